/* cmd_inspect.c - `tpconv inspect PATH`: what a checkpoint holds. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_buf.h"
#include "tpc_format.h"
#include "tpc_ggml.h"
#include "tpc_lora_nemo.h"
#include "tpc_optim.h"
#include "tpc_shard.h"
#include "tpc_util.h"

static const char *help =
	"usage: tpconv inspect [options] PATH\n\n"
	"List the tensors of a checkpoint: name, dtype, shape and bytes, then totals\n"
	"(tensors, parameters, bytes) and a per-dtype summary. PATH is a file, an HF\n"
	"sharded directory or a *.index.json; the format is detected from content.\n"
	"A shard set folder (any layout, see 'tpconv shard --help') with a tpconv\n"
	"manifest shows its layout, tp, pp and rank files, then the merged model;\n"
	"one without (OSLO, TensorRT-LLM or vLLM wrote it) its layout and rank 0's file,\n"
	"or, given the plan it was split with (--preset/--plan, --tp), the merged model.\n\n"
	"Options:\n"
	"  --json           machine-readable output (one JSON object on stdout)\n"
	"  --hash           add the SHA-256 of each tensor's C-contiguous bytes\n"
	"  --checksum ALG   --hash with ALG: sha256 (the default) or xxh3-128 (what\n"
	"                   a shard set's manifest holds by default; much faster)\n"
	"  --select PATH    only the subtree PATH of a nested checkpoint (e.g. ema_model)\n"
	"  --optimizer      the optimizer state (a DCP save's optim, a DeepSpeed ZeRO or\n"
	"                   universal folder's or Megatron's distributed optimizer's Adam\n"
	"                   state: exp_avg, exp_avg_sq, step, masters, param_groups)\n"
	"                   one line per parameter, each state entry\n"
	"                   tied to its parameter; one that cannot be tied is an error (exit 3)\n"
	"  --preset NAME, --plan FILE, --tp N, --pp M, --config FILE, --heads N,\n"
	"  --kv-heads N, --head-dim N, --hidden N, --vocab N\n"
	"                   a shard set without a tpconv manifest, merged as merge does\n"
	"  --globals        list every pickle global the file references, flag dangerous ones\n"
	"  --strict         refuse pickle globals outside torch's weights_only allow-list\n"
	"  --dequantize     show FP8 / GPTQ / AWQ / FP4 weights as 'convert --dequantize' writes\n"
	"                   them (with --hash: the hash of the dequantized bytes)\n"
	"  -q, --quiet      errors only\n"
	"  -v, --verbose    more detail on errors\n"
	"  -h, --help       this help\n\n" TPC_EXIT_HELP;

typedef struct dsum {
	uint64_t count, params, bytes;
} dsum;

/* A GGUF block tensor of a type tpconv has no decoder for (IQ4_XS, TQ2_0,
 * MXFP4 ...): listed as the file holds it. */
static bool packed_only(const tpc_tensor *t)
{
	return t->dq && t->dq->kind == TPC_DQ_GGML && !tpc_ggml_decodes(t->dq->gtype);
}

static void json_tensor(tpc_buf *b, const tpc_ckpt *ck, size_t i, const char *hash, tpc_hash_alg alg)
{
	const tpc_tensor *t = &ck->t[i];
	tpc_buf_adds(b, "{\"name\":");
	tpc_buf_json_str(b, t->name, strlen(t->name), false);
	tpc_buf_addf(b, ",\"dtype\":\"%s\",\"shape\":[", tpc_dtype_name(t->dtype));
	for (int d = 0; d < t->ndim; d++)
		tpc_buf_addf(b, d ? ",%lld" : "%lld", (long long)t->shape[d]);
	tpc_buf_addf(b, "],\"bytes\":%llu", (unsigned long long)t->nbytes);
	if (!tpc_tensor_is_contiguous(t))
		tpc_buf_adds(b, ",\"contiguous\":false");
	if (t->storage >= 0 && ck->st[t->storage].key) {
		tpc_buf_adds(b, ",\"storage\":");
		tpc_buf_json_str(b, ck->st[t->storage].key, strlen(ck->st[t->storage].key), false);
		tpc_buf_addf(b, ",\"storage_offset\":%lld", (long long)t->storage_offset);
	}
	if (t->flags & TPC_TF_QUANTIZED)
		tpc_buf_adds(b, ",\"quantized\":true");
	if (t->dq && !packed_only(t))
		tpc_buf_adds(b, ",\"dequantized\":true");
	else if (t->dq)
		tpc_buf_addf(b, ",\"ggml_type\":\"%s\",\"file_bytes\":%llu", tpc_ggml_info_of(t->dq->gtype)->name,
			     (unsigned long long)t->dq->c[0].nbytes);
	if (hash)
		tpc_buf_addf(b, ",\"%s\":\"%s\"", tpc_hash_name(alg), hash);
	tpc_buf_addc(b, '}');
}

/* Non-tensor leaves of the object tree, as "# value path = repr" lines. */
static void print_values(const tpc_value *v, tpc_buf *path, int depth, int *budget)
{
	if (!v || *budget <= 0 || depth > 64)
		return;
	size_t base = path->len;
	switch (v->kind) {
	case TPC_V_DICT:
	case TPC_V_LIST:
	case TPC_V_TUPLE:
		for (size_t i = 0; i < v->n; i++) {
			if (base)
				tpc_buf_addc(path, '.');
			if (v->kind == TPC_V_DICT) {
				const tpc_value *k = v->keys[i];
				if (k->kind == TPC_V_STR)
					tpc_buf_add(path, k->str, k->len);
				else if (k->kind == TPC_V_INT)
					tpc_buf_addf(path, "%lld", (long long)k->ival);
				else
					tpc_buf_adds(path, "?");
			} else {
				tpc_buf_addf(path, "%zu", i);
			}
			print_values(v->items[i], path, depth + 1, budget);
			path->len = base;
			if (path->p)
				path->p[base] = '\0';
		}
		return;
	case TPC_V_TENSOR:
		return;
	default:
		break;
	}
	char pbuf[512], vbuf[512];
	tpc_sanitize(pbuf, sizeof(pbuf), path->p ? path->p : "");
	switch (v->kind) {
	case TPC_V_NONE: snprintf(vbuf, sizeof(vbuf), "None"); break;
	case TPC_V_BOOL: snprintf(vbuf, sizeof(vbuf), v->ival ? "True" : "False"); break;
	case TPC_V_INT: snprintf(vbuf, sizeof(vbuf), "%lld", (long long)v->ival); break;
	case TPC_V_FLOAT: snprintf(vbuf, sizeof(vbuf), "%.17g", v->fval); break;
	case TPC_V_STR: {
		char t[480];
		tpc_sanitize(t, sizeof(t), v->str);
		snprintf(vbuf, sizeof(vbuf), "'%s'", t);
		break;
	}
	case TPC_V_BYTES: snprintf(vbuf, sizeof(vbuf), "<%zu bytes>", v->len); break;
	case TPC_V_CALL:
		snprintf(vbuf, sizeof(vbuf), "<%s object, kept opaque>",
			 v->n && v->items[0]->kind == TPC_V_GLOBAL ? v->items[0]->str : "?");
		break;
	case TPC_V_GLOBAL: snprintf(vbuf, sizeof(vbuf), "<%s>", v->str); break;
	default: snprintf(vbuf, sizeof(vbuf), "<%s>", tpc_vkind_name(v->kind)); break;
	}
	printf("# value %s = %s\n", pbuf[0] ? pbuf : "(root)", vbuf);
	if (--*budget == 0)
		printf("# value ... (more values not shown)\n");
}

/* --globals: every pickle global with its count and class; returns how many are dangerous. */
static int print_globals(const tpc_value *g, bool json, tpc_buf *out)
{
	int dangerous = 0;
	if (json)
		tpc_buf_adds(out, ",\"globals\":[");
	for (size_t i = 0; g && i < g->n; i++) {
		const tpc_value *v = g->items[i];
		const char *name = g->keys[i]->str;
		long long cnt = v->n > 0 ? (long long)v->items[0]->ival : 0;
		const char *cls = v->n > 1 ? v->items[1]->str : "unknown";
		if (!strcmp(cls, "dangerous"))
			dangerous++;
		if (json) {
			tpc_buf_adds(out, i ? ",{\"name\":" : "{\"name\":");
			tpc_buf_json_str(out, name, strlen(name), false);
			tpc_buf_addf(out, ",\"count\":%lld,\"class\":\"%s\"}", cnt, cls);
		} else {
			char nm[512];
			tpc_sanitize(nm, sizeof(nm), name);
			printf("# global %-56s %6lld  %s\n", nm, cnt,
			       !strcmp(cls, "dangerous") ? "DANGEROUS (never executed)" : cls);
		}
	}
	if (json)
		tpc_buf_addc(out, ']');
	else if (!g || !g->n)
		printf("# globals: none (not a pickled checkpoint)\n");
	return dangerous;
}

/* Pieces a composite tensor is made of (zero fills count). */
static size_t leaf_parts(const tpc_tensor *t)
{
	size_t n = 0;
	if (!t->nparts)
		return 1;
	for (int k = 0; k < t->nparts; k++)
		n += leaf_parts(&t->parts[k]);
	return n;
}

/* What inspect shows: the checkpoint (a set's merged model, a foreign
 * set's rank 0), and the lines that say what the input was. */
typedef struct insp {
	const char *path;
	bool json, hash, globals, dequant, optimizer;
	tpc_optim opt;             /* the optimizer state mapped to its parameters */
	tpc_buf opt_text;
	tpc_hash_alg halg;
	unsigned flags;            /* TPC_CLI_IN_* */
	tpc_cli_set set;           /* --preset/--plan/--tp/--pp/facts of a set, --select */
	tpc_cli_input in;
	const tpc_ckpt *ck;        /* in.view */
	char set_line[512], set_json[512];
	dsum sums[TPC_DT_COUNT];
	uint64_t params, bytes;
} insp;

/* The lines that say which set was merged (a manifest's, or a foreign one's
 * with the plan it was split with) or whose rank 0 is shown. */
static void set_lines(insp *x)
{
	const tpc_cli_input *in = &x->in;
	const tpc_merge *mg = &in->mg;
	const tpc_layout *fl = in->layout;
	if (in->rank0) {
		snprintf(x->set_line, sizeof(x->set_line),
			 "# shard set: layout %s, no tpconv manifest (merge it with --preset and --tp); rank 0's file %s:\n",
			 fl->name, tpc_path_base(in->rank0));
		snprintf(x->set_json, sizeof(x->set_json), ",\"shard_set\":{\"layout\":\"%s\",\"manifest\":false}", fl->name);
	} else if (in->have_mg && mg->kind == TPC_SET_MANIFEST) {
		char epl[160] = "", epj[160] = "";
		int dp = mg->dp > 1 ? mg->dp : 1;
		if (dp > 1) { /* ep over tp: the stage's tp x dp ranks (tpc_shard.h) */
			snprintf(epl, sizeof(epl), ", dp %d", dp);
			snprintf(epj, sizeof(epj), ",\"dp\":%d", dp);
		}
		if (mg->ep > 1) {
			size_t nl = strlen(epl), nj = strlen(epj);
			snprintf(epl + nl, sizeof(epl) - nl, ", ep %d (%lld experts per layer, %s; %d rank%s per expert)", mg->ep,
				 (long long)mg->experts, tpc_ep_placement_name(mg->ep_placement), mg->tp / mg->ep,
				 mg->tp / mg->ep == 1 ? "" : "s");
			snprintf(epj + nj, sizeof(epj) - nj, ",\"ep\":%d,\"ep_placement\":\"%s\",\"experts\":%lld", mg->ep,
				 tpc_ep_placement_name(mg->ep_placement), (long long)mg->experts);
		}
		snprintf(x->set_line, sizeof(x->set_line), "# shard set: layout %s, tp %d, pp %d%s, %d rank %s; the merged model:\n",
			 mg->layout->name, mg->tp / dp, mg->pp, epl, mg->nranks, mg->layout->folders ? "folders" : "files");
		snprintf(x->set_json, sizeof(x->set_json), ",\"shard_set\":{\"layout\":\"%s\",\"tp\":%d,\"pp\":%d%s,\"manifest\":true}",
			 mg->layout->name, mg->tp / dp, mg->pp, epj);
	} else if (in->have_mg && mg->kind == TPC_SET_FOREIGN) {
		/* merged with the plan its own files name (TensorRT-LLM's config.json) or a flag gave */
		const char *pre = in->plan_name ? tpc_path_base(in->plan_name) : "?";
		snprintf(x->set_line, sizeof(x->set_line),
			 "# shard set: layout %s (%s), tp %d, pp %d, %d rank files, no tpconv manifest; the merged model (%s %s):\n",
			 fl->name, fl->desc, mg->tp, mg->pp, mg->nranks, x->set.plan_file && !x->set.preset ? "plan" : "preset",
			 pre);
		snprintf(x->set_json, sizeof(x->set_json),
			 ",\"shard_set\":{\"layout\":\"%s\",\"tp\":%d,\"pp\":%d,\"preset\":\"%s\",\"manifest\":false}", fl->name,
			 mg->tp, mg->pp, pre);
	}
}

/* Open the path through the one opener: a set as its merged model (nothing
 * copied), a foreign set without a plan as its rank 0's file, or a
 * checkpoint. 0 or the exit status (said). */
static int open_input(insp *x)
{
	tpc_err e;
	size_t ndq;
	int ret;
	tpc_err_init(&e);
	if (tpc_lora_nemo_detect(x->path)) { /* a NeMo tensor-parallel LoRA: the PEFT adapter it merges to */
		tpc_buf cfg = TPC_BUF_INIT;
		tpc_lora_nemo_info ni;
		ret = tpc_lora_nemo_read(&x->in.ck, &cfg, x->path, &ni, &e);
		tpc_buf_release(&cfg);
		if (ret)
			return tpc_cli_fail(&e);
		x->in.have_ck = true;
		x->ck = x->in.view = &x->in.ck;
		snprintf(x->set_line, sizeof(x->set_line),
			 "# NeMo LoRA save: tp %d, pp %d, %lld layers, r %lld, alpha %g; the PEFT adapter 'merge' writes:\n", ni.tp,
			 ni.pp, (long long)ni.layers, (long long)ni.r, ni.alpha);
		snprintf(x->set_json, sizeof(x->set_json), ",\"nemo_lora\":{\"tp\":%d,\"pp\":%d,\"r\":%lld,\"alpha\":%g}", ni.tp,
			 ni.pp, (long long)ni.r, ni.alpha);
		return 0;
	}
	if ((ret = tpc_cli_input_open(&x->in, "inspect", x->path, &x->set, x->flags | TPC_CLI_IN_RANK0, &e)))
		return ret < 0 ? tpc_cli_fail(&e) : ret;
	x->ck = x->in.view;
	set_lines(x);
	if (!x->in.have_mg && (x->set.preset || x->set.plan_file || x->set.tp || x->set.pp))
		return tpc_cli_usage("inspect", "--preset, --plan, --tp and --pp tell how a shard set without a tpconv manifest was split; '%s' is not a shard set",
				     x->path);
	if (x->dequant && !x->in.rank0)
		return tpc_cli_dequantize(x->path, x->in.view, &ndq);
	return 0;
}

static void header(insp *x, tpc_buf *out)
{
	const tpc_ckpt *ck = x->ck;
	if (x->json) {
		tpc_buf_adds(out, "{\"path\":");
		tpc_buf_json_str(out, x->path, strlen(x->path), false);
		tpc_buf_addf(out, ",\"format\":\"%s\",\"files\":%zu%s,", ck->format ? ck->format : "?", ck->nsrc, x->set_json);
		if (ck->about) {
			tpc_buf_adds(out, "\"about\":");
			tpc_buf_json_str(out, ck->about, strlen(ck->about), false);
			tpc_buf_addc(out, ',');
		}
		if (x->opt_text.len) {
			tpc_buf_adds(out, "\"optimizer\":");
			tpc_buf_json_str(out, x->opt_text.p, x->opt_text.len, false);
			tpc_buf_addc(out, ',');
		}
		tpc_buf_adds(out, "\"metadata\":{");
		for (size_t i = 0; i < ck->nmeta; i++) {
			if (i)
				tpc_buf_addc(out, ',');
			tpc_buf_json_str(out, ck->meta_k[i], strlen(ck->meta_k[i]), false);
			tpc_buf_addc(out, ':');
			tpc_buf_json_str(out, ck->meta_v[i], strlen(ck->meta_v[i]), false);
		}
		tpc_buf_adds(out, "},\"tensors\":[");
		return;
	}
	char sz[32], fsz[32];
	fputs(x->set_line, stdout);
	uint64_t file_bytes = 0;
	bool dq = false;
	for (size_t i = 0; i < ck->n && !dq; i++)
		dq = ck->t[i].dq != NULL;
	for (size_t i = 0; dq && i < ck->nsrc; i++)
		file_bytes += ck->src[i].size;
	/* a quantized file read dequantized: what it holds is not what it weighs */
	if (dq)
		printf("# %s: %s, %zu file%s, %zu tensors, %llu parameters, file %s, dequantized %s\n", x->path,
		       ck->format ? ck->format : "?", ck->nsrc, ck->nsrc == 1 ? "" : "s", ck->n,
		       (unsigned long long)x->params, tpc_fmt_size(file_bytes, fsz, sizeof(fsz)),
		       tpc_fmt_size(x->bytes, sz, sizeof(sz)));
	else
		printf("# %s: %s, %zu file%s, %zu tensors, %llu parameters, %s\n", x->path, ck->format ? ck->format : "?",
		       ck->nsrc, ck->nsrc == 1 ? "" : "s", ck->n, (unsigned long long)x->params,
		       tpc_fmt_size(x->bytes, sz, sizeof(sz)));
	for (const char *a = ck->about; a && *a;) {
		/* the reader's account: framework, ranks, model and optimizer state */
		const char *nl = strchr(a, '\n');
		int len = nl ? (int)(nl - a) : (int)strlen(a);
		printf("# %.*s\n", len, a);
		a += len + (nl ? 1 : 0);
	}
	for (const char *a = x->opt_text.len ? x->opt_text.p : NULL; a && *a;) {
		const char *nl = strchr(a, '\n');
		int len = nl ? (int)(nl - a) : (int)strlen(a);
		char line[1024], safe[1024];
		snprintf(line, sizeof(line), "%.*s", len, a);
		tpc_sanitize(safe, sizeof(safe), line);
		printf("# %s\n", safe);
		a += len + (nl ? 1 : 0);
	}
	for (size_t i = 0; i < ck->nmeta; i++)
		printf("# metadata %s = %s\n", ck->meta_k[i], ck->meta_v[i]);
}

/* The optimizer state, tied to its parameters: said in the header; one
 * that cannot be tied is a warning, or with --optimizer an error. 0 or the
 * exit status (said). */
static int map_optimizer(insp *x)
{
	tpc_err e;
	tpc_err_init(&e);
	if (tpc_optim_map(&x->opt, x->ck, &e)) {
		if (x->optimizer)
			return tpc_cli_fail(&e);
		char msg[1024];
		tpc_err_format(&e, msg, sizeof(msg));
		tpc_cli_warn("the optimizer state is not tied to the parameters: %s", msg);
		return 0;
	}
	if (x->opt.okey)
		tpc_optim_describe(&x->opt, x->ck, x->optimizer, &x->opt_text);
	else if (x->optimizer)
		tpc_cli_warn("'%s' holds no optimizer state (a top-level key with 'state' and 'param_groups')", x->path);
	if (x->opt_text.oom) {
		tpc_err_nomem(&e);
		return tpc_cli_fail(&e);
	}
	return 0;
}

/* One tensor's line of the table: where its bytes come from, in a note. */
static void text_row(const insp *x, size_t i, int w, const char *hx)
{
	const tpc_ckpt *ck = x->ck;
	const tpc_tensor *t = &ck->t[i];
	char nm[1024], note[160] = "", shp[256];
	tpc_sanitize(nm, sizeof(nm), t->name);
	if (t->storage >= 0) {
		const tpc_storage *sg = &ck->st[t->storage];
		size_t users = 0;
		for (size_t j = 0; j < ck->n; j++)
			users += ck->t[j].storage == t->storage;
		snprintf(note, sizeof(note), "  storage %s%s%s%s", sg->key ? sg->key : "?", users > 1 ? " (shared)" : "",
			 (t->storage_offset || t->nbytes < sg->nbytes) ? " view" : "",
			 !tpc_tensor_is_contiguous(t) ? " strided" : "");
	} else if (packed_only(t)) {
		/* blocks tpconv reads and copies but has no decoder for: the
		 * file's type and bytes */
		printf("%-*s  %-8s %-22s %14llu%s%s  blocks, not dequantized\n", w, nm, tpc_ggml_info_of(t->dq->gtype)->name,
		       tpc_shape_str(t, shp, sizeof(shp)), (unsigned long long)t->dq->c[0].nbytes, x->hash ? "  " : "", hx);
		return;
	} else if (t->dq) {
		char from[120];
		tpc_sanitize(from, sizeof(from), t->dq->c[0].name ? t->dq->c[0].name : "?");
		snprintf(note, sizeof(note), "  dequantized from %s", from);
	} else if (t->nparts) {
		/* assembled from pieces: DCP chunks, rank files of a set */
		snprintf(note, sizeof(note), "  %zu pieces", leaf_parts(t));
	} else if (!tpc_tensor_is_contiguous(t)) {
		snprintf(note, sizeof(note), "  strided view");
	}
	printf("%-*s  %-8s %-22s %14llu%s%s%s%s\n", w, nm, tpc_dtype_name(t->dtype), tpc_shape_str(t, shp, sizeof(shp)),
	       (unsigned long long)t->nbytes, x->hash ? "  " : "", hx, (t->flags & TPC_TF_QUANTIZED) ? "  quantized" : "",
	       note);
}

/* Every tensor, with its checksum under --hash. 0 or the exit status. */
static int tensors(insp *x, tpc_buf *out)
{
	const tpc_ckpt *ck = x->ck;
	tpc_err e;
	int w = 4;
	tpc_err_init(&e);
	for (size_t i = 0; i < ck->n; i++) {
		int l = (int)strlen(ck->t[i].name);
		if (l > w)
			w = l < 72 ? l : 72;
	}
	if (!x->json)
		printf("%-*s  %-8s %-22s %14s%s%s\n", w, "name", "dtype", "shape", "bytes", x->hash ? "  " : "",
		       x->hash ? tpc_hash_name(x->halg) : "");
	for (size_t i = 0; i < ck->n; i++) {
		char hx[2 * TPC_HASH_MAX + 1] = "";
		if (x->hash) {
			uint8_t h[TPC_HASH_MAX];
			if (tpc_ckpt_hash_tensor(ck, &ck->t[i], x->halg, h, &e))
				return tpc_cli_fail(&e);
			tpc_hex(h, tpc_hash_len(x->halg), hx);
		}
		if (x->json) {
			if (i)
				tpc_buf_addc(out, ',');
			json_tensor(out, ck, i, x->hash ? hx : NULL, x->halg);
		} else {
			text_row(x, i, w, hx);
		}
	}
	return 0;
}

/* Totals by dtype, what the reader could not name, the object tree and the
 * pickle's globals. Returns the number of dangerous globals. */
static int totals(insp *x, tpc_buf *out)
{
	const tpc_ckpt *ck = x->ck;
	const dsum *sums = x->sums;
	if (x->json) {
		tpc_buf_addf(out, "],\"totals\":{\"tensors\":%zu,\"parameters\":%llu,\"bytes\":%llu,\"hidden_tensors\":%llu},\"dtypes\":{",
			     ck->n, (unsigned long long)x->params, (unsigned long long)x->bytes,
			     (unsigned long long)ck->hidden_tensors);
		bool first = true;
		for (int d = 1; d < TPC_DT_COUNT; d++) {
			if (!sums[d].count)
				continue;
			tpc_buf_addf(out, "%s\"%s\":{\"tensors\":%llu,\"parameters\":%llu,\"bytes\":%llu}", first ? "" : ",",
				     tpc_dtype_name((tpc_dtype)d), (unsigned long long)sums[d].count,
				     (unsigned long long)sums[d].params, (unsigned long long)sums[d].bytes);
			first = false;
		}
		tpc_buf_adds(out, "}");
		int nd = x->globals ? print_globals(x->set.globals, true, out) : 0;
		tpc_buf_adds(out, "}\n");
		return nd;
	}
	char sz[32];
	printf("# total: %zu tensors, %llu parameters, %llu bytes (%s)\n", ck->n, (unsigned long long)x->params,
	       (unsigned long long)x->bytes, tpc_fmt_size(x->bytes, sz, sizeof(sz)));
	for (int d = 1; d < TPC_DT_COUNT; d++)
		if (sums[d].count) {
			printf("# %-8s %6llu tensors %14llu parameters %16llu bytes  ", tpc_dtype_name((tpc_dtype)d),
			       (unsigned long long)sums[d].count, (unsigned long long)sums[d].params,
			       (unsigned long long)sums[d].bytes);
			fflush(stdout);
			tpc_cli_bar(stdout, sums[d].bytes, x->bytes, 24);
			printf(" %5.1f%% %s\n", x->bytes ? 100.0 * (double)sums[d].bytes / (double)x->bytes : 0.0,
			       tpc_fmt_size(sums[d].bytes, sz, sizeof(sz)));
		}
	if (ck->hidden_tensors)
		printf("# %llu tensor%s inside opaque objects (%s) not listed: tpconv cannot name %s\n",
		       (unsigned long long)ck->hidden_tensors, ck->hidden_tensors == 1 ? "" : "s",
		       ck->hidden_note ? ck->hidden_note : "foreign objects", ck->hidden_tensors == 1 ? "it" : "them");
	if (ck->root) {
		tpc_buf p = TPC_BUF_INIT;
		int budget = 200;
		print_values(ck->root, &p, 0, &budget);
		tpc_buf_release(&p);
	}
	return x->globals ? print_globals(x->set.globals, false, NULL) : 0;
}

/* The options: -1 to go on, or the exit status. */
static int parse_args(insp *x, int argc, char **argv)
{
	static const struct option lo[] = {
		{"json", no_argument, NULL, 'j'},   {"hash", no_argument, NULL, 'H'},
		{"checksum", required_argument, NULL, 'C'},
		{"globals", no_argument, NULL, 'g'}, TPC_CLI_SET_LONGOPTS,
		{"strict", no_argument, NULL, 'S'}, {"quiet", no_argument, NULL, 'q'},
		{"dequantize", no_argument, NULL, 'D'}, {"optimizer", no_argument, NULL, 'O'},
		{"verbose", no_argument, NULL, 'v'}, {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "qvh", lo, NULL)) != -1) {
		int ret = tpc_cli_input_opt(&x->set, NULL, "inspect", c, argv[optind - 1], optarg);
		if (ret >= 0) {
			if (ret)
				return ret;
			continue;
		}
		switch (c) {
		case 'j': x->json = true; break;
		case 'H': x->hash = true; break;
		case 'C':
			if (!tpc_hash_from_name(optarg, &x->halg) || x->halg == TPC_HASH_NONE)
				return tpc_cli_usage("inspect", "--checksum takes sha256 or xxh3-128, not '%s'", optarg);
			x->hash = true;
			break;
		case 'g': x->globals = true; break;
		case 'O': x->optimizer = true; x->flags |= TPC_CLI_IN_OPTIMIZER; break;
		case 'S': x->flags |= TPC_CLI_IN_STRICT; break;
		case 'D': x->flags |= TPC_CLI_IN_DEQUANTIZE; x->dequant = true; break;
		case 'q': tpc_cli_verbose = -1; break;
		case 'v': tpc_cli_verbose++; break;
		case 'h': fputs(help, stdout); return 0;
		default:
			return tpc_cli_bad_option("inspect", argv[optind - 1], lo);
		}
	}
	if (optind != argc - 1)
		return tpc_cli_usage("inspect", optind >= argc ? "missing PATH" : "expected one PATH, got '%s' too",
				     optind < argc - 1 ? argv[optind + 1] : "");
	x->path = argv[optind];
	if (x->set.preset && x->set.plan_file)
		return tpc_cli_usage("inspect", "give --preset or --plan, not both");
	return -1;
}

int cmd_inspect(int argc, char **argv)
{
	insp x;
	tpc_buf out = TPC_BUF_INIT;
	tpc_err e;
	int ret, ndanger;

	memset(&x, 0, sizeof(x));
	x.halg = TPC_HASH_SHA256;
	tpc_cli_set_init(&x.set, 0);
	tpc_cli_input_init(&x.in);
	if ((ret = parse_args(&x, argc, argv)) >= 0)
		return ret;
	tpc_err_init(&e);
	if (x.globals && !(x.set.globals = tpc_value_new(TPC_V_DICT))) {
		tpc_err_nomem(&e);
		ret = tpc_cli_fail(&e);
		goto out;
	}
	if ((ret = open_input(&x)) || (ret = map_optimizer(&x)))
		goto out;
	for (size_t i = 0; i < x.ck->n; i++) {
		const tpc_tensor *t = &x.ck->t[i];
		x.sums[t->dtype].count++;
		x.sums[t->dtype].params += t->numel;
		x.sums[t->dtype].bytes += t->nbytes;
		x.params += t->numel;
		x.bytes += t->nbytes;
	}
	header(&x, &out);
	if ((ret = tensors(&x, &out)))
		goto out;
	ndanger = totals(&x, &out);
	if (x.json) {
		if (out.oom) {
			tpc_err_nomem(&e);
			ret = tpc_cli_fail(&e);
			goto out;
		}
		fwrite(out.p, 1, out.len, stdout);
	}
	if (ndanger) {
		fprintf(stderr, "tpconv: error: '%s': the pickle references %d dangerous global%s "
				"(listed above; tpconv never executes them, torch.load without weights_only would)\n",
			x.path, ndanger, ndanger == 1 ? "" : "s");
		ret = 3;
	}
out:
	tpc_buf_release(&out);
	tpc_value_unref(x.set.globals);
	tpc_optim_release(&x.opt);
	tpc_buf_release(&x.opt_text);
	tpc_cli_input_release(&x.in);
	return ret;
}
