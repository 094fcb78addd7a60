/* layout_trtllm.c - the hf-mapping layout: TensorRT-LLM's file names with
 * Hugging Face tensors. rank{N}.safetensors with N = pp_rank * tp + tp_rank
 * holding each rank's slices under their Hugging Face names (q, k and v
 * apart), and config.json holding the model's config plus "mapping"
 * (world_size, tp_size, pp_size, moe_tp_size, moe_ep_size). It is no
 * TensorRT-LLM checkpoint (trtllm-build wants its own names, fused qkv and
 * config keys: layout_trtllm_ckpt.c writes that); it is for tools that read
 * per-rank Hugging Face shards and pick their file by TensorRT-LLM's rank
 * numbering. The file names, the rank numbering and the mapping geometry are
 * shared with the trtllm layout (tpc__trtllm_* below). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_buf.h"
#include "tpc_cfg.h"
#include "tpc_io.h"
#include "tpc_layout.h"
#include "tpc_shard.h"
#include "tpc_util.h"

static char *rank_name(int t, int p, int tp, int pp, const char *format)
{
	(void)pp;
	char buf[64];
	(void)format;
	snprintf(buf, sizeof(buf), "rank%d.safetensors", p * tp + t);
	return tpc_strdup(buf);
}

static void add_mapping(tpc_buf *b, const tpc_shard_plan *sp)
{
	tpc_buf_addf(b,
		     "\"mapping\": {\"world_size\": %d, \"tp_size\": %d, \"pp_size\": %d, \"cp_size\": 1, "
		     "\"moe_tp_size\": %d, \"moe_ep_size\": %d}, \"tpconv\": {\"set_id\": \"%s\", \"manifest\": \"%s\"}",
		     sp->tp * sp->pp, sp->tp, sp->pp, sp->tp / sp->ep, sp->ep, sp->set_id, TPC_MANIFEST_NAME);
}

/* No model config to merge the mapping into: a minimal one with the facts we know. */
static int write_minimal_config(const tpc_shard_plan *sp, const char *dir, const tpc_shard_opts *o, tpc_err *e)
{
	const tpc_model_facts *f = &sp->facts;
	tpc_buf b = TPC_BUF_INIT;
	char *cfg = tpc_path_join(dir, "config.json");
	int ret;
	/* the facts known, each under TensorRT-LLM's name */
	const struct {
		const char *key;
		int64_t v;
	} facts[] = {{"hidden_size", f->hidden}, {"num_attention_heads", f->heads}, {"num_key_value_heads", f->kv_heads},
		     {"head_size", f->head_dim}, {"vocab_size", f->vocab}, {"num_hidden_layers", sp->layers}};
	tpc_buf_adds(&b, "{\n  \"architecture\": \"unknown\"");
	for (size_t i = 0; i < sizeof(facts) / sizeof(facts[0]); i++)
		if (facts[i].v)
			tpc_buf_addf(&b, ",\n  \"%s\": %lld", facts[i].key, (long long)facts[i].v);
	tpc_buf_adds(&b, ",\n  ");
	add_mapping(&b, sp);
	tpc_buf_adds(&b, "\n}\n");
	if (b.oom || !cfg)
		ret = tpc_err_nomem(e);
	else
		ret = tpc_write_file_atomic(cfg, b.p, b.len, o->force ? TPC_OUT_FORCE : 0, e);
	tpc_buf_release(&b);
	free(cfg);
	return ret;
}

static int write_extras(const tpc_shard_plan *sp, const char *dir, const tpc_shard_opts *o, tpc_err *e)
{
	tpc_buf m = TPC_BUF_INIT;
	int ret;
	tpc_extras_opts xo;
	const char *drop[16];
	tpc__layout_companion_opts(o, NULL, false, &xo, drop, 16);
	/* the model's config.json, unless there is none (or, resharding a
	 * TensorRT-LLM set, its config is not one tpconv wrote from the model's) */
	bool have_cfg = o->config_dir && tpc_extras_copies_config(o->config_dir, &xo);
	tpc_buf_addc(&m, '{');
	add_mapping(&m, sp);
	tpc_buf_addc(&m, '}');
	if (m.oom)
		return tpc_err_nomem(e);
	/* TensorRT-LLM reads the mapping in config.json: it is written even with
	 * --no-extras; the companions merge "mapping" into the model's config */
	ret = tpc__layout_copy_companions(sp, dir, o, m.p, o->no_extras, e);
	if (!ret && !have_cfg)
		ret = write_minimal_config(sp, dir, o, e);
	tpc_buf_release(&m);
	return ret;
}

/* Merge: the config tpconv wrote (the model's plus "mapping") loses the
 * mapping again; an engine config from elsewhere stays out. */
static const char *merge_extras(const char *dir, const char *rank0, tpc_extras_opts *xo)
{
	static const char *const drop[] = {"mapping", "tpconv", NULL};
	(void)rank0;
	xo->config_drop = drop;
	xo->config_marker = "tpconv";
	return dir;
}

static bool parse(const char *n, int *r)
{
	int a, k = -1;
	if (sscanf(n, "rank%d%n", &a, &k) == 1 && k > 0 && !strcmp(n + k, ".safetensors") && a >= 0 &&
	    a < TPC_MAX_RANKS) {
		*r = a;
		return true;
	}
	return false;
}

static bool parse_rank_file(const char *name, int *t, int *p)
{
	*p = 0;
	return parse(name, t);
}

/* tp and pp from config.json's "mapping"; -1 when it has none */
static int read_mapping(const char *dir, int *tp, int *pp)
{
	char *path = tpc_path_join(dir, "config.json");
	tpc_cfg *cfg = NULL;
	tpc_err e;
	tpc_err_init(&e);
	*tp = *pp = 0;
	if (!path || !tpc_exists(path) || tpc_cfg_from_file(&cfg, path, &e)) {
		free(path);
		return -1;
	}
	/* TensorRT-LLM's own config: "mapping" is at its top */
	const cJSON *mp = tpc_cfg_get(cfg, TPC_CFG_TOP, "mapping", NULL);
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(mp, "tp_size"), *b = cJSON_GetObjectItemCaseSensitive(mp, "pp_size");
	if (cJSON_IsNumber(a) && a->valuedouble >= 1 && a->valuedouble <= TPC_MAX_TP)
		*tp = (int)a->valuedouble;
	if (cJSON_IsNumber(b) && b->valuedouble >= 1 && b->valuedouble <= TPC_MAX_TP)
		*pp = (int)b->valuedouble;
	tpc_cfg_free(cfg);
	free(path);
	return *tp ? 0 : -1;
}

static int geometry(const char *dir, int tp_flag, int pp_flag, int *tp, int *pp, tpc_err *e)
{
	int maxr = -1, ctp, cpp;
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		int a;
		if (parse(de->d_name, &a))
			maxr = a > maxr ? a : maxr;
	}
	if (d)
		closedir(d);
	if (!read_mapping(dir, &ctp, &cpp)) {
		if (tp_flag && tp_flag != ctp) {
			return tpc_err_at(e, TPC_EUSAGE, dir, NULL, "--tp %d but config.json's mapping says tp_size %d", tp_flag, ctp);
		}
		*tp = ctp;
		*pp = cpp ? cpp : 1;
	} else {
		if (!tp_flag) {
			return tpc_err_at(e, TPC_EUSAGE, dir, NULL, "no config.json with \"mapping\": give --tp (and --pp)");
		}
		*tp = tp_flag;
		*pp = pp_flag ? pp_flag : 1;
	}
	if ((int64_t)maxr + 1 > (int64_t)*tp * *pp) {
		return tpc_err_at(e, TPC_EINPUT, dir, NULL, "rank%d.safetensors exists but tp %d x pp %d has only %d ranks", maxr, *tp,
			    *pp, *tp * *pp);
	}
	return 0;
}

static char *rank_path(const char *dir, int t, int p, int tp)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "rank%d.safetensors", p * tp + t);
	return tpc_path_join(dir, buf);
}

static const char *const formats[] = {"safetensors", NULL};

/* The TensorRT-LLM checkpoint layout names and finds its files the same way. */
char *tpc__trtllm_rank_name(int t, int p, int tp, int pp, const char *format)
{
	return rank_name(t, p, tp, pp, format);
}

bool tpc__trtllm_is_rank_file(const char *name)
{
	int r;
	return parse(name, &r);
}

int tpc__trtllm_geometry(const char *dir, int tp_flag, int pp_flag, int *tp, int *pp, tpc_err *e)
{
	return geometry(dir, tp_flag, pp_flag, tp, pp, e);
}

char *tpc__trtllm_rank_path(const char *dir, int t, int p, int tp)
{
	return rank_path(dir, t, p, tp);
}

const tpc_layout tpc_layout_hf_mapping = {
	.name = "hf-mapping",
	.desc = "rankN.safetensors with Hugging Face names and config.json with \"mapping\" (TensorRT-LLM's file names, not its checkpoint)",
	.formats = formats, .set_format = "hf-mapping-shards",
	.expert_parallel = true,
	.rank_name = rank_name,
	.write_extras = write_extras, .merge_extras = merge_extras,
	.parse_rank_file = parse_rank_file, .foreign_geometry = geometry, .foreign_rank_path = rank_path,
};
