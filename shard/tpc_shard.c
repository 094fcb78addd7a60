/* tpc_shard.c - split planning and rank checkpoints; see tpc_shard.h. Writing
 * them is tpc_shard_write.c, their checksums tpc_shard_hash.c.
 *
 * Memory: every rank tensor is a description; bytes move only inside the
 * registry writers (copy_file_range for contiguous slices, a bounded gather
 * buffer for the rest) and the hashing pass (bounded windows). Pages of the
 * input mapping that a gather or a hash has read are dropped from the resident
 * set again (tpc_map_drop), so peak RSS does not grow with the model. */
#include "tpc_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tpc_config.h"
#include "tpc_extras.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_manifest.h"
#include "tpc_qsplit.h"
#include "tpc_util.h"

void tpc__return_sources(tpc_ckpt *dst)
{
	/* borrowed maps stay with their owners; memory and files added since are dst's */
	for (size_t k = 0; dst->src && dst->src_owned_mem && k < dst->nsrc; k++)
		if (dst->src_owned_mem[k]) {
			free((void *)dst->src[k].data);
			free(dst->src[k].path);
		} else if (k >= dst->nsrc_borrowed) {
			tpc_map_close(&dst->src[k]);
		}
	free(dst->src);
	free(dst->src_owned_mem);
	dst->src = NULL;
	dst->src_owned_mem = NULL;
	dst->nsrc = dst->capsrc = dst->nsrc_borrowed = 0;
}

/* ---- the lowest failing item of a parallel loop ---- */

void tpc__keep_first(int64_t k, const tpc_err *le, int64_t *bad, tpc_err *first)
{
#ifdef _OPENMP
#pragma omp critical(tpc_keep_first)
#endif
	{
		if (*bad < 0 || k < *bad) {
			*first = *le;
#ifdef _OPENMP
#pragma omp atomic write
#endif
			*bad = k;
		}
	}
}

int64_t tpc__first_bad(int64_t *bad)
{
	int64_t b;
#ifdef _OPENMP
#pragma omp atomic read
#endif
	b = *bad;
	return b;
}

/* ---- rank descriptions ---- */

static void clear_storage(tpc_tensor *t)
{
	t->storage = -1;
	t->alias_of = -1;
	for (int k = 0; k < t->nparts; k++)
		clear_storage(&t->parts[k]);
}

static int rank_slices(const tpc_tensor *t, const tpc_split *s, int tp, int r, tpc_tensor *out);

int tpc__rank_tensor(const tpc_tensor *t, const tpc_split *s, int tp, int r, tpc_tensor *out)
{
	if (!s->stacked || s->ep <= 1)
		return rank_slices(t, s, tp, r, out);
	/* a stacked tensor under expert parallelism: the rows of dim 0 of this
	 * rank's group's experts, then its slice of each as any rank's */
	int64_t first, step, count;
	tpc_tensor g;
	if (t->ndim < 1 || t->shape[0] % s->ep)
		return -1;
	tpc_split_experts(s, t->shape[0], tp, r, &first, &step, &count);
	if (step == 1 ? tpc_tensor_narrow(&g, t, 0, first, count) : tpc_tensor_rows_every(&g, t, first, step, count))
		return -1;
	int ret = rank_slices(&g, s, tp, r, out);
	tpc_tensor_release(&g);
	return ret;
}

/* Rank r's slices of t along the split dim (its group's, for an expert). */
static int rank_slices(const tpc_tensor *t, const tpc_split *s, int tp, int r, tpc_tensor *out)
{
	tpc_tensor pieces[2 * TPC_PLAN_MAX_PARTS];
	int np = 0, ret = 0;
	if (s->dim < 0) {
		ret = tpc_tensor_copy(out, t);
		if (!ret)
			clear_storage(out);
		return ret;
	}
	int d = s->dim;
	int64_t poff = 0;
	for (int k = 0; k < s->nparts && !ret; k++) {
		const tpc_split_part *p = &s->part[k];
		int64_t len = tpc_split_rank_len(s, k, tp), start = tpc_split_rank_start(s, k, tp, r);
		int64_t a = start < p->size ? start : p->size;
		int64_t b = start + len < p->size ? start + len : p->size;
		if (b > a || (len == 0 && k == 0) || (p->uneven && k == 0 && b == a)) {
			if (tpc_tensor_narrow(&pieces[np], t, d, poff + a, b - a))
				ret = -1;
			else
				np++;
		}
		if (!ret && !p->uneven && start + len > b && b >= a) { /* an uneven part's pad is not stored */
			int64_t z = start + len - (start > p->size ? start : p->size);
			int64_t shp[TPC_MAX_NDIM];
			memcpy(shp, t->shape, (size_t)t->ndim * sizeof(int64_t));
			shp[d] = z;
			if (z > 0) {
				if (tpc_tensor_init_zero(&pieces[np], t->src_dtype, t->ndim, shp)) {
					ret = -1;
				} else {
					pieces[np].dtype = t->dtype;
					/* nbytes follows the logical dtype, as in tpc_tensor_narrow */
					pieces[np].nbytes = pieces[np].numel * tpc_dtype_bits(t->dtype) / 8;
					np++;
				}
			}
		}
		poff += p->size;
	}
	if (!ret) {
		if (np == 1) {
			*out = pieces[0];
			np = 0;
		} else if (np == 0) {
			ret = -1;
		} else {
			ret = tpc_tensor_init_cat(out, pieces, np, d);
			if (!ret) {
				out->dtype = t->dtype;
				out->nbytes = out->numel * tpc_dtype_bits(t->dtype) / 8;
			}
		}
	}
	for (int i = 0; i < np; i++)
		tpc_tensor_release(&pieces[i]);
	if (!ret)
		clear_storage(out);
	return ret;
}

/* ---- the plan ---- */

int tpc__flat_root(tpc_ckpt *ck, tpc_err *e)
{
	tpc_value *d = tpc_value_new(TPC_V_DICT), *call = tpc_value_new(TPC_V_CALL);
	tpc_value *od = tpc_value_global("collections", "OrderedDict"), *args = tpc_value_new(TPC_V_TUPLE);
	int ret = 0;
	if (!d || !call || !od || !args || tpc_value_append(call, od) || tpc_value_append(call, args)) {
		if (!call) {
			tpc_value_unref(od);
			tpc_value_unref(args);
		}
		tpc_value_unref(call);
		tpc_value_unref(d);
		return tpc_err_nomem(e);
	}
	if (tpc_value_set_origin(d, call)) {
		tpc_value_unref(d);
		return tpc_err_nomem(e);
	}
	for (size_t i = 0; i < ck->n && !ret; i++)
		if (tpc_value_set(d, tpc_value_str(ck->t[i].name, strlen(ck->t[i].name)), tpc_value_tensor((int64_t)i)))
			ret = tpc_err_nomem(e);
	if (ret) {
		tpc_value_unref(d);
		return ret;
	}
	tpc_value_unref(ck->root);
	ck->root = d;
	return 0;
}

static bool matches_any(const tpc_plan_re *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (regexec(&v[i].re, name, 0, NULL, 0) == 0)
			return true;
	return false;
}

static int set_id_compute(tpc_shard_plan *sp, tpc_err *e)
{
	tpc_hash s;
	uint8_t h[TPC_HASH_MAX];
	char hx[2 * TPC_HASH_MAX + 1], line[512];
	int ret;
	/* SHA-256, as before libcrypto: sets written by older versions keep their id */
	if ((ret = tpc_hash_begin(&s, TPC_HASH_SHA256, e)))
		return ret;
	snprintf(line, sizeof(line), "tpconv-set 1\n%s\ntp %d pp %d %s %s\n", TPC_VERSION, sp->tp, sp->pp,
		 sp->layout->name, sp->format);
	tpc_hash_update(&s, line, strlen(line));
	if (sp->ep > 1) {
		/* sets without expert parallelism keep the id they always had */
		snprintf(line, sizeof(line), "ep %d %s %lld\n", sp->ep, tpc_ep_placement_name(sp->ep_placement),
			 (long long)sp->experts);
		tpc_hash_update(&s, line, strlen(line));
	}
	if (sp->dp > 1) {
		snprintf(line, sizeof(line), "dp %d\n", sp->dp);
		tpc_hash_update(&s, line, strlen(line));
	}
	if (sp->plan->json)
		tpc_hash_update(&s, sp->plan->json, strlen(sp->plan->json));
	for (size_t i = 0; i < sp->n; i++) {
		const tpc_shard_entry *en = &sp->t[i];
		const tpc_tensor *t = &sp->in->t[en->in];
		tpc_hash_update(&s, t->name, strlen(t->name) + 1);
		snprintf(line, sizeof(line), "%s %d %d %d %d", tpc_dtype_name(t->dtype), t->ndim, en->split.kind,
			 en->split.dim, en->stage);
		tpc_hash_update(&s, line, strlen(line));
		for (int d = 0; d < t->ndim; d++)
			tpc_hash_update(&s, &t->shape[d], sizeof(t->shape[d]));
		for (int k = 0; k < en->split.nparts; k++)
			tpc_hash_update(&s, &en->split.part[k], sizeof(en->split.part[k]));
		if (en->split.ep > 1) {
			snprintf(line, sizeof(line), "expert %lld group %d", (long long)en->split.expert,
				 en->split.ep_group);
			tpc_hash_update(&s, line, strlen(line));
		}
		if (en->split.stacked) /* a dim split before the field existed: the same id */
			tpc_hash_update(&s, "stacked", 7);
		if (en->split.is_shape) {
			snprintf(line, sizeof(line), "shape %d %lld", en->split.shape_dim, (long long)en->split.shape_len);
			tpc_hash_update(&s, line, strlen(line));
		}
	}
	for (size_t i = 0; i < sp->in->nsrc; i++) {
		const tpc_map *m = &sp->in->src[i];
		struct stat st;
		int64_t v[3] = {(int64_t)m->size, 0, 0};
		if (m->fd >= 0 && fstat(m->fd, &st) == 0) {
			v[1] = (int64_t)st.st_mtim.tv_sec;
			v[2] = (int64_t)st.st_mtim.tv_nsec;
		}
		tpc_hash_update(&s, v, sizeof(v));
	}
	tpc_hash_final(&s, h);
	tpc_hex(h, 8, hx);
	memcpy(sp->set_id, hx, 16);
	sp->set_id[16] = '\0';
	return 0;
}

/* Is `name` part of a layer the plan splits: the plan splits "<module>.weight"
 * (a quantized weight's qweight/qzeros/scales/g_idx, an FP8 weight_scale_inv,
 * compressed-tensors' weight_packed/weight_scale sit beside it), or is it an
 * expert of a mixture of experts ("experts.N.", or the fused "experts." tensors
 * of Qwen3-MoE / gpt-oss)? Then replicating it whole would be wrong. */
static int check_fallback(const tpc_plan *plan, const char *name, tpc_err *e)
{
	const char *dot = strrchr(name, '.');
	char nm[256];
	if (dot && dot != name) {
		tpc_buf w = TPC_BUF_INIT;
		tpc_buf_add(&w, name, (size_t)(dot - name));
		tpc_buf_adds(&w, ".weight");
		int rule = w.p && strcmp(w.p, name) ? tpc_plan_match(plan, w.p) : -1;
		bool row_bias = false;
		if (rule >= 0 && plan->rules[rule].kind != TPC_SPLIT_REPLICATE &&
		    tpc_plan_rule_dim(plan, rule, 2, &row_bias) >= 0) {
			tpc_sanitize(nm, sizeof(nm), w.p);
			tpc_err_at(e, TPC_EINPUT, NULL, name,
				    "no rule of the plan says how to split this tensor, but the plan splits its layer ('%s', rule %d: %s); "
				    "replicating it would make a wrong set. Add a rule for it (quantized weights: split with their layer), or drop it with --rules",
				    nm, rule, tpc_split_kind_name(plan->rules[rule].kind));
			tpc_buf_release(&w);
			return TPC_EINPUT;
		}
		tpc_buf_release(&w);
	}
	const char *x = strstr(name, "experts.");
	if (x && (x == name || x[-1] == '.')) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name,
			    "an expert's weight that no rule of the plan places: a mixture-of-experts layer needs expert-parallel or per-expert tensor-parallel rules (the plan has none for it); replicating it would make a wrong set");
	}
	return 0;
}

/* Is `name` an optimizer's state rather than a weight: a component an
 * optimizer's state dict has (torch.optim's Adam/AdamW exp_avg, exp_avg_sq,
 * max_exp_avg_sq; SGD's momentum_buffer; Adafactor's exp_avg_sq_row/col), or
 * a top-level key a training checkpoint keeps it under (torchtitan's
 * "optimizer", torch DCP's "optim", DeepSpeed's "optimizer_state_dict")?
 * Sets *what to the component that says so. */
static bool optimizer_state(const char *name, const char **what)
{
	static const char *const leaf[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer",
					   "exp_avg_sq_row", "exp_avg_sq_col", "param_groups", NULL};
	static const char *const top[] = {"optimizer", "optim", "optimizer_state_dict", "optimizer_states",
					  "optim_state", NULL};
	size_t n = strcspn(name, ".");
	for (int k = 0; top[k]; k++)
		if (strlen(top[k]) == n && !strncmp(name, top[k], n))
			return *what = top[k], true;
	for (const char *p = name; *p; p += n + (p[n] == '.')) {
		n = strcspn(p, ".");
		for (int k = 0; leaf[k]; k++)
			if (strlen(leaf[k]) == n && !strncmp(p, leaf[k], n))
				return *what = leaf[k], true;
	}
	return false;
}

/* A training checkpoint sharded whole (issue 41): its optimizer state is not
 * the model's, and replicating Adam's moments on every rank makes a set no
 * runtime loads. Refused by name with the --select that takes the model: the
 * top-level key of the first tensor a rule splits. */
static int check_training(const tpc_shard_plan *sp, tpc_err *e)
{
	const char *what = NULL, *model = NULL;
	size_t bad = SIZE_MAX, nbad = 0, mlen = 0;
	for (size_t i = 0; i < sp->n; i++) {
		const char *nm = sp->in->t[sp->t[i].in].name, *w;
		if (optimizer_state(nm, &w)) {
			if (!nbad++) {
				bad = i;
				what = w;
			}
		} else if (!model && sp->t[i].split.dim >= 0 && strchr(nm, '.')) {
			model = nm;
			mlen = strcspn(nm, ".");
		}
	}
	if (!nbad)
		return 0;
	char top[64];
	const char *bn = sp->in->t[sp->t[bad].in].name;
	size_t blen = strcspn(bn, ".");
	if (model && (mlen != blen || strncmp(model, bn, mlen)) && mlen < sizeof(top))
		snprintf(top, sizeof(top), "%.*s", (int)mlen, model);
	else
		snprintf(top, sizeof(top), "KEY");
	return tpc_err_at(e, TPC_EINPUT, NULL, bn,
			  "optimizer state ('%s'), not a weight of the model: %zu of the checkpoint's %zu tensors are; "
			  "a training checkpoint sharded whole would put them on every rank. Shard the model alone: --select %s%s",
			  what, nbad, sp->n, top, strcmp(top, "KEY") ? "" : " (the key that holds the model's weights)");
}

/* A tensor the fallback would replicate whose name, without a leading
 * prefix, is one the plan splits ("model.lm_head.weight" where the plan
 * splits "^lm_head.weight$": a checkpoint's model under a key such as
 * "model."): its split is unknown under that prefix, and replicating it
 * would be wrong. */
static int check_prefixed(const tpc_plan *plan, const char *name, tpc_err *e)
{
	for (const char *p = strchr(name, '.'); p && p[1]; p = strchr(p + 1, '.')) {
		int rule = tpc_plan_match(plan, p + 1);
		bool row_bias = false;
		if (rule >= 0 && plan->rules[rule].kind != TPC_SPLIT_REPLICATE &&
		    tpc_plan_rule_dim(plan, rule, 2, &row_bias) >= 0) {
			char nm[256];
			tpc_sanitize(nm, sizeof(nm), p + 1);
			return tpc_err_at(e, TPC_EINPUT, NULL, name,
					  "no rule of the plan places this tensor, but without its prefix '%.*s' it is '%s', which the plan splits (rule %d: %s); "
					  "replicating it would make a wrong set. Take the model's subtree with --select %.*s, or --strip-prefix %.*s",
					  (int)(p + 1 - name), name, nm, rule, tpc_split_kind_name(plan->rules[rule].kind),
					  (int)(strcspn(name, ".")), name, (int)(p + 1 - name), name);
		}
	}
	return 0;
}

/* Expert parallelism: the geometry, the layout and the experts the checkpoint
 * and the config agree on; sets sp->experts. */
static int ep_check(tpc_shard_plan *sp, const tpc_ckpt *in, const tpc_plan *plan, const tpc_model_facts *f,
		    tpc_err *e)
{
	if (sp->tp % sp->ep)
		return tpc_err_set(e, TPC_EUSAGE,
				   "--ep %d does not divide --tp %d: the %d ranks of a stage form --ep groups of tp/ep ranks, each expert split over its group (moe_ep_size x moe_tp_size = tp, as TensorRT-LLM maps them)",
				   sp->ep, sp->tp / sp->dp, sp->tp / sp->dp);
	if (sp->dp > 1 && sp->ep != sp->tp)
		return tpc_err_set(e, TPC_EUSAGE,
				   "--ep %d over --tp %d with %d data-parallel replicas: each of the stage's %d ranks is one expert-parallel rank (ep = tp x dp)",
				   sp->ep, sp->tp / sp->dp, sp->dp, sp->tp);
	if (!sp->layout->expert_parallel)
		return tpc_err_set(e, TPC_EUSAGE,
				   "the %s layout does not hold expert-parallel sets (--ep); tpconv, hf and trtllm do",
				   sp->layout->name);
	bool stacks = false;
	for (size_t i = 0; i < plan->nrules && !stacks; i++)
		stacks = plan->rules[i].stacked;
	if (!plan->nexperts && !stacks)
		return tpc_err_set(e, TPC_EUSAGE,
				   "--ep needs a plan that names its routed experts (an \"experts\" pattern, as the mixtral and qwen2-moe presets have, or \"stacked\" rules); plan '%s' has none",
				   plan->name ? plan->name : "(unnamed)");
	int64_t top = -1, nstk = 0;
	size_t first = 0;
	for (size_t i = 0; i < in->n; i++) {
		int64_t x = tpc_plan_expert(plan, in->t[i].name);
		int rule = tpc_plan_match(plan, in->t[i].name);
		if (x > top) {
			top = x;
			first = i;
		}
		/* a stacked tensor's dim 0: the first says how many (resolve_entry
		 * checks the others) */
		if (rule >= 0 && plan->rules[rule].stacked && in->t[i].ndim >= 1 && !nstk) {
			nstk = in->t[i].shape[0];
			first = top < 0 ? i : first;
		}
	}
	if (top < 0 && !nstk)
		return tpc_err_set(e, TPC_EINPUT, "--ep %d: no tensor of the checkpoint matches the plan's expert patterns or its stacked rules",
				   sp->ep);
	if (f->experts && (top >= f->experts || (nstk && nstk != f->experts))) {
		return tpc_err_at(e, TPC_EINPUT, NULL, in->t[first].name,
			    "%s %lld, but the model has %lld routed experts (config.json num_local_experts / num_experts / n_routed_experts)",
			    top >= 0 ? "expert index" : "experts stacked", (long long)(top >= 0 ? top : nstk), (long long)f->experts);
	}
	sp->experts = f->experts ? f->experts : nstk ? nstk : top + 1;
	if (sp->experts % sp->ep)
		return tpc_err_set(e, TPC_EINPUT,
				   "%lld routed experts do not divide over --ep %d groups (each group must own as many experts)",
				   (long long)sp->experts, sp->ep);
	return 0;
}

/* The bytes every rank holds for a tensor of its layer's shape (is_shape):
 * the input's two values, entry shape_dim replaced by the rank's length; a
 * memory source of sp->aux (*idx). */
static int shape_bytes(tpc_shard_plan *sp, const tpc_shard_entry *en, int *idx, tpc_err *e)
{
	const tpc_tensor *t = &sp->in->t[en->in];
	int64_t v[2];
	int ret = tpc__shape_read(sp->in, t, v, e);
	if (ret)
		return ret;
	v[en->split.shape_dim] = en->split.shape_len;
	return tpc__shape_add(&sp->aux, t, v, "a layer's shape per rank", idx, e);
}

/* The rank file format: the layout's default, or one it writes. */
static int choose_format(tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	const char *const *fl = sp->layout->formats;
	const char *f = o->format ? o->format : fl[0];
	size_t i = 0;
	while (fl[i] && strcmp(fl[i], f))
		i++;
	if (!fl[i]) {
		const tpc_format *ff = tpc_format_by_name(f);
		if (!ff || !ff->rank_file) {
			char list[128];
			size_t k = 0, m = 0;
			list[0] = '\0';
			for (size_t j = 0; j < tpc_format_count() && k < sizeof(list); j++)
				if (tpc_format_at(j)->rank_file)
					k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%s", m++ ? ", " : "",
							      tpc_format_at(j)->name);
			return tpc_err_set(e, TPC_EUSAGE, "unknown rank file format '%s' (%s)", f, list);
		}
		return tpc_err_set(e, TPC_EUSAGE, "the %s layout writes %s files, not %s", sp->layout->name, fl[0], f);
	}
	sp->format = fl[i]; /* static */
	if (!tpc_format_by_name(sp->format) || (sp->layout->folders && !tpc_format_index()))
		return tpc_err_set(e, TPC_EUSAGE, "the %s writer is not available in this build", sp->format);
	return 0;
}

/* The geometry the options ask for, as the layout allows it, and the rank
 * file format. */
static int plan_geometry(tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	if (sp->tp < 1 || sp->tp > TPC_MAX_TP)
		return tpc_err_set(e, TPC_EUSAGE, "--tp must be 1 to %d", TPC_MAX_TP);
	if (sp->pp < 1 || sp->pp > TPC_MAX_TP || (int64_t)sp->tp * sp->pp > TPC_MAX_RANKS)
		return tpc_err_set(e, TPC_EUSAGE, "--pp must be 1 to %d with tp * pp at most %d", TPC_MAX_TP,
				   TPC_MAX_RANKS);
	if (sp->layout->max_pp && sp->pp > sp->layout->max_pp)
		return tpc_err_set(e, TPC_EUSAGE, "the %s layout names ranks for --pp up to %d, not %d", sp->layout->name,
				   sp->layout->max_pp, sp->pp);
	if (sp->max_shard_size && !sp->layout->sized)
		return tpc_err_set(e, TPC_EUSAGE, "--max-shard-size does not go with the %s layout (one file per rank)",
				   sp->layout->name);
	if (sp->dp > 1 && !sp->layout->data_parallel)
		return tpc_err_set(e, TPC_EUSAGE,
				   "%d data-parallel replicas a stage (--ep %d over --tp %d): the %s layout holds tp x pp ranks, not the dense weights again on data-parallel ranks (megatron-dist does)",
				   sp->dp, o->ep, o->tp, sp->layout->name);
	return choose_format(sp, o, e);
}

/* The layers the plan's layer patterns find, for pipeline stages. */
static int count_layers(tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	sp->layers = 0;
	for (size_t i = 0; i < sp->in->n; i++) {
		int64_t l = tpc_plan_layer(sp->plan, sp->in->t[i].name);
		if (l >= sp->layers)
			sp->layers = l + 1;
	}
	if (sp->pp > 1 && sp->layers < sp->pp)
		return tpc_err_set(e, TPC_EUSAGE,
				   "--pp %d needs at least %d layers, but the plan's layer patterns find %lld in the checkpoint",
				   sp->pp, sp->pp, (long long)sp->layers);
	if (o->pp_layers) {
		int64_t sum = 0;
		if (!sp->layout->uneven_stages)
			return tpc_err_set(e, TPC_EUSAGE, "--pp-layers: the %s layout places layers evenly over the stages",
					   sp->layout->name);
		for (int s = 0; s < sp->pp; s++)
			sum += o->pp_layers[s];
		if (sum != sp->layers)
			return tpc_err_set(e, TPC_EUSAGE, "--pp-layers add up to %lld layers; the plan's layer patterns find %lld",
					   (long long)sum, (long long)sp->layers);
		if (!(sp->pp_layers = tpc_malloc((size_t)sp->pp * sizeof(int64_t))))
			return tpc_err_nomem(e);
		memcpy(sp->pp_layers, o->pp_layers, (size_t)sp->pp * sizeof(int64_t));
	}
	return 0;
}

/* Entry i's split (its rule; a quantized layer's companion with its layer; an
 * expert's tensor over its EP group) and pipeline stage. */
static int resolve_entry(tpc_shard_plan *sp, size_t i, const tpc_model_facts *facts, const tpc_shard_opts *o,
			 tpc_err *e)
{
	const tpc_plan *plan = sp->plan;
	tpc_shard_entry *en = &sp->t[i];
	const tpc_tensor *t = &sp->in->t[i];
	en->in = (int64_t)i;
	/* an expert's tensor (with --ep) is split over its EP group's ranks, as
	 * is each expert of a stacked one */
	char lname[1024];
	int64_t lshape[3];
	const char *mname = tpc__quant_blocks_layer(facts, sp->in, t, lname, sizeof(lname), lshape) ? lname : t->name;
	int64_t ex = sp->ep > 1 ? tpc_plan_expert(plan, mname) : -1;
	int rule = sp->ep > 1 ? tpc_plan_match(plan, mname) : -1; /* MXFP4 blocks: their layer's */
	bool stk = rule >= 0 && plan->rules[rule].stacked && t->ndim >= 1;
	if (stk)
		ex = -1;
	int rtp = ex >= 0 || stk ? sp->tp / sp->ep : sp->tp / sp->dp;
	int ret = tpc__quant_mx_check(plan, facts, sp->in, t, rtp, e); /* gpt-oss MXFP4: as vLLM loads it */
	if (!ret)
		ret = tpc_plan_resolve(plan, facts, t->name, t->ndim, t->shape, rtp, o->resolve_flags, &en->split,
				       &en->matched, e);
	if (!ret && !en->matched && facts && facts->quant.method) {
		/* a quantized layer's companion splits with its layer */
		int q = tpc__quant_split(plan, facts, sp->in, t, rtp, o->resolve_flags, &en->split, e);
		if (q < 0)
			ret = q;
		else if (q > 0)
			en->matched = true;
	} else if (!ret && facts) {
		/* --pad: an FP8 block weight padded to whole blocks per rank */
		tpc__quant_pad_weight(facts, sp->in, t, rtp, o->resolve_flags, &en->split);
		/* gpt-oss's MXFP4 experts' bias, cut with their blocks */
		ret = tpc__quant_mx_cut(plan, facts, sp->in, t, rtp, &en->split, e);
	}
	if (ret)
		return ret;
	en->split.ep = ex >= 0 || stk ? sp->ep : 0;
	en->split.ep_group = ex >= 0 ? tpc_ep_owner(sp->ep_placement, ex, sp->experts, sp->ep) : stk ? -1 : 0;
	en->split.expert = ex >= 0 ? ex : 0;
	en->split.ep_placement = sp->ep_placement;
	en->split.dp = ex >= 0 || stk ? 1 : sp->dp;
	if (stk && t->shape[0] != sp->experts)
		return tpc_err_at(e, TPC_EINPUT, NULL, t->name,
				  "stacks %lld experts along dim 0, but the model has %lld routed experts", (long long)t->shape[0],
				  (long long)sp->experts);
	int64_t l = tpc_plan_layer(plan, t->name);
	en->stage = tpc_plan_stage_in(plan, t->name, sp->pp, sp->layers, sp->pp_layers);
	en->staged = l >= 0 || matches_any(plan->first, plan->nfirst, t->name) ||
		     matches_any(plan->last, plan->nlast, t->name);
	return 0;
}

/* Every entry resolved and counted (unstaged, unmatched). Never silently
 * wrong: a tensor only the fallback would place (whole on every rank) must
 * not belong to a layer the plan splits, nor be an expert's weight; with
 * --strict, no tensor may be unmatched. */
static int resolve_entries(tpc_shard_plan *sp, const tpc_model_facts *facts, const tpc_shard_opts *o, tpc_err *e)
{
	tpc_buf um = TPC_BUF_INIT;
	size_t numshown = 0;
	int ret = 0;
	for (size_t i = 0; i < sp->n && !ret; i++) {
		tpc_shard_entry *en = &sp->t[i];
		if ((ret = resolve_entry(sp, i, facts, o, e)))
			break;
		if (!en->staged)
			sp->nunstaged++;
		if (!en->matched) {
			sp->nunmatched++;
			if (numshown++ < 8) {
				char nm[256];
				tpc_sanitize(nm, sizeof(nm), sp->in->t[i].name);
				tpc_buf_addf(&um, "%s'%s'", numshown > 1 ? ", " : "", nm);
			}
		}
	}
	if (!ret)
		ret = check_training(sp, e);
	for (size_t i = 0; i < sp->n && !ret; i++)
		if (!sp->t[i].matched && sp->t[i].split.dim < 0 &&
		    !(ret = check_fallback(sp->plan, sp->in->t[sp->t[i].in].name, e)))
			ret = check_prefixed(sp->plan, sp->in->t[sp->t[i].in].name, e);
	if (!ret && o->strict && sp->nunmatched)
		ret = tpc_err_set(e, TPC_EINPUT, "%zu tensor%s match%s no rule of the plan (--strict): %s%s",
				  sp->nunmatched, sp->nunmatched == 1 ? "" : "s", sp->nunmatched == 1 ? "es" : "",
				  um.p ? um.p : "", sp->nunmatched > 8 ? ", ..." : "");
	tpc_buf_release(&um);
	return ret;
}

/* The rewritten tensors' bytes (a layer's shape per rank: aux_src[i], the
 * source of entry i in sp->aux), then the rank checkpoints over the input's
 * sources and those (*aux_base: where aux's begin in a rank's table), and
 * their file names. */
static int rank_ckpts(tpc_shard_plan *sp, int *aux_src, int *aux_base, tpc_err *e)
{
	int nr = sp->tp * sp->pp, ret = 0;
	int base[2] = {0, 0};
	for (size_t i = 0; i < sp->n && !ret; i++)
		if (sp->t[i].split.is_shape)
			ret = shape_bytes(sp, &sp->t[i], &aux_src[i], e);
	for (int r = 0; r < nr && !ret; r++) {
		const tpc_ckpt *srcs[2] = {sp->in, &sp->aux};
		tpc_ckpt_init(&sp->rank[r]);
		ret = tpc_ckpt_borrow_all(&sp->rank[r], srcs, 2, base, true, e);
	}
	for (int r = 0; r < nr && !ret; r++) {
		int ep_rank = sp->ep > 1 ? r % sp->tp / (sp->tp / sp->ep) : -1; /* as tpconv.ep_rank */
		if (sp->layout->rank_name_plan)
			sp->rank_file[r] = sp->layout->rank_name_plan(sp, r);
		else
			sp->rank_file[r] = tpc_layout_rank_name(sp->layout, r % sp->tp, r / sp->tp, sp->tp, sp->pp, ep_rank,
								sp->format);
		if (!sp->rank_file[r])
			ret = tpc_err_nomem(e);
	}
	*aux_base = base[1];
	return ret;
}

/* Which lower rank holds the same bytes as rank r: a part that is split gives
 * every rank its own rows; parts of replicated heads are shared by the R
 * ranks of a group, so the lowest rank with the same head in every part is
 * the largest group start. */
static int same_as_of(const tpc_split *s, int tp, int r)
{
	/* a dense tensor's data-parallel copies repeat group 0's ranks */
	int base = s->ep > 1 ? r - tpc_split_local(s, tp, r) : 0;
	int lr = tpc_split_local(s, tp, r), q = 0;
	for (int k = 0; k < s->nparts && q <= lr; k++) {
		const tpc_split_part *pt = &s->part[k];
		int rep = pt->replicas > 1 ? pt->replicas : 1;
		if (rep == 1 && tpc_split_rank_len(s, k, tp) > 0)
			q = lr;
		else if (lr / rep * rep > q)
			q = lr / rep * rep;
	}
	return base + q;
}

/* Entry i's slice on every rank that holds it, added to its stage's rank
 * checkpoint (rank_ix), and which rank's bytes each repeats (same_as). */
static int rank_entry(tpc_shard_plan *sp, size_t i, const int *aux_src, int aux_base, tpc_err *e)
{
	tpc_shard_entry *en = &sp->t[i];
	const tpc_tensor *t = &sp->in->t[en->in];
	en->rank_ix = tpc_calloc((size_t)sp->tp, sizeof(*en->rank_ix));
	en->same_as = tpc_calloc((size_t)sp->tp, sizeof(*en->same_as));
	if (!en->rank_ix || !en->same_as)
		return tpc_err_nomem(e);
	for (int r = 0; r < sp->tp; r++) {
		tpc_tensor desc;
		if (!tpc_split_holds(&en->split, sp->tp, r)) {
			en->rank_ix[r] = -1;
			en->same_as[r] = -1;
			continue;
		}
		if (tpc__rank_tensor(t, &en->split, sp->tp, r, &desc)) {
			if (t->dq && en->split.nparts > 1)
				return tpc_err_at(e, TPC_EINPUT, NULL, t->name,
						  "a weight computed while it is written (dequantized or LoRA-merged) is split in one window a rank, and this one's split takes %d parts a rank (a fused tensor): convert it first, then shard the result",
						  en->split.nparts);
			return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "cannot slice this tensor for rank %d (sub-byte dtype %s?)", r,
				    tpc_dtype_name(t->src_dtype));
		}
		if (en->split.is_shape) { /* the rank's own shape, from aux */
			desc.src = aux_base + aux_src[i];
			desc.offset = 0;
			desc.flags &= ~(uint32_t)TPC_TF_BYTESWAP;
			tpc_tensor_set_contiguous(&desc);
		}
		tpc_ckpt *rk = &sp->rank[en->stage * sp->tp + r];
		int64_t ix = tpc_ckpt_add_copy(rk, t->name, &desc, e);
		tpc_tensor_release(&desc);
		if (ix < 0)
			return (int)ix;
		en->rank_ix[r] = ix;
		/* a torch rank file keeps a tie whose halves are split alike (the
		 * same slice: tpc_ckpt_ties compares the descriptions) */
		const tpc_shard_entry *to = en->tie >= 0 ? &sp->t[en->tie] : NULL;
		if (to && to->stage == en->stage && to->rank_ix[r] >= 0 && tpc_format_by_name(sp->format)->object_tree)
			rk->t[ix].alias_of = to->rank_ix[r];
		en->same_as[r] = same_as_of(&en->split, sp->tp, r);
	}
	return 0;
}

/* Which earlier entry each one is tied to (one storage in the input). */
static int find_ties(tpc_shard_plan *sp, tpc_err *e)
{
	int64_t *first = tpc_malloc((sp->n + 1) * sizeof(int64_t));
	int ret = first ? tpc_ckpt_ties(sp->in, NULL, sp->n, first, e) : tpc_err_nomem(e);
	for (size_t i = 0; i < sp->n && !ret; i++)
		sp->t[i].tie = first[i] == (int64_t)i ? -1 : first[i];
	free(first);
	return ret;
}

/* Rank r's checkpoint metadata: the set and where the rank stands in it. */
static int rank_meta(tpc_shard_plan *sp, int r, tpc_err *e)
{
	char v[32];
	tpc_ckpt *rk = &sp->rank[r];
	int ret;
	/* torch rank files: the state dict torch.save would write */
	if (tpc_format_by_name(sp->format)->object_tree && (ret = tpc__flat_root(rk, e)))
		return ret;
	if ((ret = tpc_ckpt_meta_set(rk, "format", "pt", e)) ||
	    (ret = tpc_ckpt_meta_set(rk, "tpconv.set_id", sp->set_id, e)))
		return ret;
	snprintf(v, sizeof(v), "%d", r);
	if ((ret = tpc_ckpt_meta_set(rk, "tpconv.rank", v, e)))
		return ret;
	snprintf(v, sizeof(v), "%d", r % sp->tp % (sp->tp / sp->dp));
	if ((ret = tpc_ckpt_meta_set(rk, "tpconv.tp_rank", v, e)))
		return ret;
	if (sp->dp > 1) {
		snprintf(v, sizeof(v), "%d", r % sp->tp / (sp->tp / sp->dp));
		if ((ret = tpc_ckpt_meta_set(rk, "tpconv.dp_rank", v, e)))
			return ret;
		snprintf(v, sizeof(v), "%d", sp->dp);
		if ((ret = tpc_ckpt_meta_set(rk, "tpconv.dp", v, e)))
			return ret;
	}
	snprintf(v, sizeof(v), "%d", r / sp->tp);
	if ((ret = tpc_ckpt_meta_set(rk, "tpconv.pp_rank", v, e)))
		return ret;
	snprintf(v, sizeof(v), "%d", sp->tp / sp->dp);
	if ((ret = tpc_ckpt_meta_set(rk, "tpconv.tp", v, e)))
		return ret;
	snprintf(v, sizeof(v), "%d", sp->pp);
	if ((ret = tpc_ckpt_meta_set(rk, "tpconv.pp", v, e)))
		return ret;
	if (sp->ep > 1) {
		snprintf(v, sizeof(v), "%d", sp->ep);
		if ((ret = tpc_ckpt_meta_set(rk, "tpconv.ep", v, e)))
			return ret;
		snprintf(v, sizeof(v), "%d", r % sp->tp / (sp->tp / sp->ep));
		if ((ret = tpc_ckpt_meta_set(rk, "tpconv.ep_rank", v, e)))
			return ret;
	}
	return 0;
}

/* The ranks as the layout stores them (its stored_rank hook). */
static int stored_ranks(tpc_shard_plan *sp, tpc_err *e)
{
	int nr = sp->tp * sp->pp, ret = 0;
	if (!(sp->stored = tpc_calloc((size_t)nr, sizeof(*sp->stored))))
		return tpc_err_nomem(e);
	for (int r = 0; r < nr; r++)
		tpc_ckpt_init(&sp->stored[r]);
	for (int r = 0; r < nr && !ret; r++) {
		const tpc_ckpt *srcs[2] = {sp->in, &sp->aux};
		if (!(ret = tpc_ckpt_borrow_all(&sp->stored[r], srcs, 2, NULL, true, e)))
			ret = sp->layout->stored_rank(sp, r, &sp->stored[r], e);
	}
	return ret;
}

int tpc_shard_plan_build(tpc_shard_plan *sp, const tpc_ckpt *in, const tpc_plan *plan,
			 const tpc_model_facts *facts, const tpc_shard_opts *o, tpc_err *e)
{
	int ret = 0, aux_base = 0;
	int *aux_src = NULL;
	memset(sp, 0, sizeof(*sp));
	tpc_ckpt_init(&sp->aux);
	sp->in = in;
	sp->optim = o->optim;
	sp->plan = plan;
	sp->facts = *facts;
	sp->dp = o->dp > 1 ? o->dp : 1;
	sp->tp = o->tp * sp->dp; /* the stage's ranks */
	sp->pp = o->pp ? o->pp : 1;
	sp->layout = o->layout ? o->layout : tpc_layout_default();
	if (o->optim && !sp->layout->optimizer)
		return tpc_err_set(e, TPC_EUSAGE, "--optimizer: the %s layout stores no optimizer state (megatron-dist does)",
				   sp->layout->name);
	sp->checksum = o->checksum;
	sp->max_shard_size = o->max_shard_size;
	sp->ep = o->ep > 1 ? o->ep : 1;
	sp->ep_placement = o->ep_placement;
	if ((ret = plan_geometry(sp, o, e)) || (ret = count_layers(sp, o, e)) ||
	    (sp->ep > 1 && (ret = ep_check(sp, in, plan, facts, e))))
		return ret;
	sp->t = tpc_calloc(in->n, sizeof(*sp->t));
	int nr = sp->tp * sp->pp;
	sp->rank = tpc_calloc((size_t)nr, sizeof(*sp->rank));
	sp->rank_file = tpc_calloc((size_t)nr, sizeof(*sp->rank_file));
	if (!sp->t || !sp->rank || !sp->rank_file) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	sp->n = in->n;
	if ((ret = resolve_entries(sp, facts, o, e)) || (sp->layout->check && (ret = sp->layout->check(sp, o, e))) ||
	    (ret = find_ties(sp, e)))
		goto out;
	if (!(aux_src = tpc_calloc(sp->n ? sp->n : 1, sizeof(int)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = rank_ckpts(sp, aux_src, &aux_base, e)))
		goto out;
	for (size_t i = 0; i < sp->n && !ret; i++)
		ret = rank_entry(sp, i, aux_src, aux_base, e);
	if (ret || (ret = set_id_compute(sp, e)))
		goto out;
	for (int r = 0; r < nr && !ret; r++)
		ret = rank_meta(sp, r, e);
	if (!ret && sp->layout->stored_rank)
		ret = stored_ranks(sp, e);
out:
	free(aux_src);
	if (ret)
		tpc_shard_plan_release(sp);
	return ret;
}

void tpc_shard_plan_release(tpc_shard_plan *sp)
{
	if (!sp)
		return;
	for (size_t i = 0; i < sp->n; i++) {
		free(sp->t[i].rank_ix);
		free(sp->t[i].same_as);
		free(sp->t[i].rank_hash);
	}
	free(sp->t);
	free(sp->pp_layers);
	int nr = sp->tp * sp->pp;
	for (int r = 0; sp->rank && r < nr; r++) {
		tpc__return_sources(&sp->rank[r]);
		tpc_ckpt_release(&sp->rank[r]);
	}
	free(sp->rank);
	for (int r = 0; sp->stored && r < nr; r++) {
		tpc__return_sources(&sp->stored[r]);
		tpc_ckpt_release(&sp->stored[r]);
	}
	free(sp->stored);
	for (int r = 0; sp->rank_file && r < nr; r++)
		free(sp->rank_file[r]);
	free(sp->rank_file);
	tpc_ckpt_release(&sp->aux);
	memset(sp, 0, sizeof(*sp));
}

/* ---- --dry-run ---- */

static void shape_into(tpc_buf *b, int ndim, const int64_t *shape)
{
	tpc_buf_addc(b, '[');
	for (int d = 0; d < ndim; d++)
		tpc_buf_addf(b, d ? ", %lld" : "%lld", (long long)shape[d]);
	tpc_buf_addc(b, ']');
}

static void notes_into(tpc_buf *b, const tpc_split *s)
{
	bool any = false;
#define NOTE(...)                                   \
	do {                                        \
		tpc_buf_adds(b, any ? "; " : "");   \
		tpc_buf_addf(b, __VA_ARGS__);       \
		any = true;                         \
	} while (0)
	if (s->row_bias)
		NOTE("row-parallel bias: add once after the reduce");
	if (s->scalar)
		NOTE("0-dim");
	if (s->dim < 0)
		return;
	if (s->nparts > 1) {
		/* parts 64(q8)|32(kv4x2)|32(kv4x2); 125+3pad */
		tpc_buf_adds(b, any ? "; parts " : "parts ");
		for (int k = 0; k < s->nparts; k++) {
			const tpc_split_part *p = &s->part[k];
			tpc_buf_addf(b, "%s%lld", k ? "|" : "", (long long)p->size);
			if (p->pad)
				tpc_buf_addf(b, "+%lldpad", (long long)p->pad);
			if (p->heads)
				tpc_buf_addf(b, "(%s%lld", p->head_kind > TPC_HEADS_Q ? tpc_heads_kind_name(p->head_kind) : "q", (long long)p->heads);
			if (p->heads && p->replicas > 1)
				tpc_buf_addf(b, "x%d", p->replicas);
			if (p->heads)
				tpc_buf_addc(b, ')');
		}
		return;
	}
	const tpc_split_part *p = &s->part[0];
	if (p->heads && p->replicas > 1)
		NOTE("%lld %s heads, each on %d ranks", (long long)p->heads, p->head_kind > TPC_HEADS_Q ? tpc_heads_kind_name(p->head_kind) : "q",
		     p->replicas);
	else if (p->heads)
		NOTE("%lld %s heads", (long long)p->heads, p->head_kind > TPC_HEADS_Q ? tpc_heads_kind_name(p->head_kind) : "q");
	if (p->pad && p->uneven)
		NOTE("uneven: the last ranks hold %lld fewer (vLLM's MXFP4 cut, not padded)", (long long)p->pad);
	else if (p->pad)
		NOTE("pad %lld", (long long)p->pad);
#undef NOTE
}

static uint64_t rank_bytes(const tpc_shard_plan *sp, int r)
{
	uint64_t bytes = 0;
	for (size_t i = 0; i < sp->rank[r].n; i++)
		bytes += sp->rank[r].t[i].nbytes;
	return bytes;
}

/* The plan's line, the model facts and, with --ep, where the experts go. */
static void describe_head(const tpc_shard_plan *sp, tpc_buf *out)
{
	const tpc_model_facts *f = &sp->facts;
	int nr = sp->tp * sp->pp;
	char dp[48] = "";
	if (sp->dp > 1)
		snprintf(dp, sizeof(dp), ", dp %d (the dense weights stored once)", sp->dp);
	tpc_buf_addf(out, "# plan '%s': tp %d%s, pp %d, layout %s, format %s, %zu tensors, %d rank %s\n",
		     sp->plan->name ? sp->plan->name : "(unnamed)", sp->tp / sp->dp, dp, sp->pp, sp->layout->name,
		     sp->format, sp->n, nr, sp->layout->folders ? "folders" : "files");
	tpc_buf_adds(out, "# model:");
	if (!f->heads && !f->kv_heads && !f->head_dim && !f->hidden && !f->vocab)
		tpc_buf_adds(out, " no facts");
	if (f->heads)
		tpc_buf_addf(out, " heads %lld", (long long)f->heads);
	if (f->kv_heads)
		tpc_buf_addf(out, " kv_heads %lld", (long long)f->kv_heads);
	if (f->head_dim)
		tpc_buf_addf(out, " head_dim %lld", (long long)f->head_dim);
	if (f->hidden)
		tpc_buf_addf(out, " hidden %lld", (long long)f->hidden);
	if (f->vocab)
		tpc_buf_addf(out, " vocab %lld", (long long)f->vocab);
	if (sp->pp > 1)
		tpc_buf_addf(out, " layers %lld", (long long)sp->layers);
	tpc_buf_addc(out, '\n');
	if (sp->ep > 1) {
		int g = sp->tp / sp->ep;
		int64_t per = sp->experts / sp->ep;
		tpc_buf_addf(out,
			     "# experts: %lld routed per layer over ep %d groups of %d rank%s (moe_ep_size %d x moe_tp_size %d), %s",
			     (long long)sp->experts, sp->ep, g, g == 1 ? "" : "s", sp->ep, g,
			     tpc_ep_placement_name(sp->ep_placement));
		for (int k = 0; k < sp->ep; k++) {
			if (sp->ep > 16 && k == 8) { /* a few, then the last */
				tpc_buf_addf(out, "; ... (%d more)", sp->ep - 9);
				k = sp->ep - 1;
			}
			tpc_buf_addf(out, "%s group %d (ranks %d..%d): ", k ? ";" : ":", k, k * g, k * g + g - 1);
			if (sp->ep_placement == TPC_EP_ROUND_ROBIN)
				tpc_buf_addf(out, "experts %d, %d, ... (every %d%s)", k, k + sp->ep, sp->ep,
					     sp->ep == 2 ? "nd" : sp->ep == 3 ? "rd" : "th");
			else
				tpc_buf_addf(out, "experts %lld..%lld", (long long)(k * per), (long long)(k * per + per - 1));
		}
		tpc_buf_addc(out, '\n');
	}
}

/* Entry i's row of the table, names `w` wide. */
static void describe_entry(const tpc_shard_plan *sp, size_t i, int w, tpc_buf *out)
{
	const tpc_shard_entry *en = &sp->t[i];
	const tpc_tensor *t = &sp->in->t[en->in];
	int r0 = tpc_split_first_rank(&en->split, sp->tp);
	const tpc_tensor *rt = &sp->rank[en->stage * sp->tp + r0].t[en->rank_ix[r0]];
	char nm[1024], split[32];
	tpc_buf sb = TPC_BUF_INIT, rb = TPC_BUF_INIT, nb = TPC_BUF_INIT;
	tpc_sanitize(nm, sizeof(nm), t->name);
	shape_into(&sb, t->ndim, t->shape);
	shape_into(&rb, rt->ndim, rt->shape);
	notes_into(&nb, &en->split);
	if (en->split.stacked)
		tpc_buf_addf(&nb, "%s%lld experts stacked in dim 0%s", nb.len ? "; " : "", t->ndim ? (long long)t->shape[0] : 0LL,
			     en->split.ep > 1 ? ", each ep group its own" : "");
	else if (en->split.ep > 1)
		tpc_buf_addf(&nb, "%sexpert %lld: ep group %d", nb.len ? "; " : "", (long long)en->split.expert,
			     en->split.ep_group);
	if (en->split.is_shape)
		tpc_buf_addf(&nb, "%sthe layer's shape: each rank holds its slice's (%s %lld)", nb.len ? "; " : "",
			     en->split.shape_dim ? "in" : "out", (long long)en->split.shape_len);
	if (!en->matched)
		tpc_buf_addf(&nb, "%sno rule matched", nb.len ? "; " : "");
	if (en->tie >= 0) {
		char tn[1024];
		tpc_sanitize(tn, sizeof(tn), sp->in->t[sp->t[en->tie].in].name);
		tpc_buf_addf(&nb, "%stied to %s", nb.len ? "; " : "", tn);
	}
	if (en->split.dim >= 0)
		snprintf(split, sizeof(split), "%s:%d", tpc_split_kind_name(en->split.kind), en->split.dim);
	else
		snprintf(split, sizeof(split), "replicate");
	tpc_buf line = TPC_BUF_INIT;
	tpc_buf_addf(&line, "%-*s  %-6s %-16s %-11s %-16s", w, nm, tpc_dtype_name(t->dtype), sb.p ? sb.p : "",
		     split, rb.p ? rb.p : "");
	if (sp->pp > 1)
		tpc_buf_addf(&line, " %5d", en->stage);
	tpc_buf_addf(&line, " %s", nb.p ? nb.p : "");
	while (line.len && line.p[line.len - 1] == ' ')
		line.p[--line.len] = '\0';
	tpc_buf_add(out, line.p ? line.p : "", line.len);
	tpc_buf_addc(out, '\n');
	tpc_buf_release(&line);
	tpc_buf_release(&sb);
	tpc_buf_release(&rb);
	tpc_buf_release(&nb);
}

/* Each rank's file, tensors and bytes with a bar, and the balance. A layout
 * that stores other than the rank tensors (stored_size) says its items and
 * bytes, and their sum beside the model's. */
static void describe_ranks(const tpc_shard_plan *sp, tpc_buf *out, bool unicode)
{
	int nr = sp->tp * sp->pp;
	uint64_t most = 0, least = UINT64_MAX, all = 0, model = 0;
	uint64_t *by = tpc_calloc((size_t)nr + 1, sizeof(*by));
	size_t *items = tpc_calloc((size_t)nr + 1, sizeof(*items));
	bool stored = by && items && sp->layout->stored_size;
	int fw = 0, empty = 0;
	for (int r = 0; r < nr && stored; r++)
		stored = sp->layout->stored_size(sp, r, &by[r], &items[r]);
	for (int r = 0; r < nr; r++) {
		uint64_t bytes = stored ? by[r] : rank_bytes(sp, r);
		most = bytes > most ? bytes : most;
		empty += !bytes;
		if (bytes) /* a file that stores nothing (a dense stage's data-parallel copy) aside */
			least = bytes < least ? bytes : least;
		all += bytes;
		int l = (int)strlen(sp->rank_file[r]);
		fw = l > fw ? (l < 48 ? l : 48) : fw;
	}
	for (int r = 0; r < nr; r++) {
		uint64_t bytes = stored ? by[r] : rank_bytes(sp, r);
		char sz[32];
		char dp[24] = "";
		int dtp = sp->tp / sp->dp;
		if (sp->dp > 1)
			snprintf(dp, sizeof(dp), ", dp %d", r % sp->tp / dtp);
		tpc_buf_addf(out, "# rank %d (tp %d%s, pp %d): %-*s %5zu %-7s %12llu bytes %9s  ", r, r % sp->tp % dtp, dp, r / sp->tp,
			     fw + 1, sp->rank_file[r], stored ? items[r] : sp->rank[r].n, stored ? "chunks" : "tensors",
			     (unsigned long long)bytes, tpc_fmt_size(bytes, sz, sizeof(sz)));
		tpc_buf_bar(out, bytes, most, 24, unicode);
		while (out->len && out->p[out->len - 1] == ' ')
			out->p[--out->len] = '\0';
		tpc_buf_addc(out, '\n');
	}
	if (stored) {
		char a[32], b[32];
		for (size_t i = 0; i < sp->in->n; i++)
			model += sp->in->t[i].nbytes;
		tpc_buf_addf(out, "# stored: %llu bytes of tensor data in all rank files (%s), the model %llu (%s): each box once%s\n",
			     (unsigned long long)all, tpc_fmt_size(all, a, sizeof(a)), (unsigned long long)model,
			     tpc_fmt_size(model, b, sizeof(b)), all > model ? ", the rest padding" : "");
	}
	if (nr > 1 && least != UINT64_MAX)
		tpc_buf_addf(out, "# balance: largest rank %.3fx the smallest%s%s\n",
			     least ? (double)most / (double)least : 0.0, empty ? " that stores any" : "",
			     least && most > least + least / 10 ? " (pipeline stages or replicated tensors weigh unevenly)" : "");
	if (empty)
		tpc_buf_addf(out, "# %d rank file%s store%s no tensor data (each box once: the stage's on other ranks)\n", empty,
			     empty == 1 ? "" : "s", empty == 1 ? "s" : "");
	free(by);
	free(items);
}

/* The replicated tensors and why, the unmatched ones, and with --pp the
 * unstaged ones. */
static void describe_lists(const tpc_shard_plan *sp, tpc_buf *out)
{
	size_t nrep = 0;
	for (size_t i = 0; i < sp->n; i++)
		nrep += sp->t[i].split.dim < 0;
	tpc_buf_addf(out, "# replicated (whole on every rank of its stage): %zu tensor%s\n", nrep, nrep == 1 ? "" : "s");
	for (size_t i = 0; i < sp->n; i++) {
		const tpc_split *x = &sp->t[i].split;
		char nm[1024], why[96];
		if (x->dim >= 0)
			continue;
		tpc_sanitize(nm, sizeof(nm), sp->in->t[sp->t[i].in].name);
		if (!sp->t[i].matched)
			snprintf(why, sizeof(why), "no rule: the fallback");
		else if (x->scalar)
			snprintf(why, sizeof(why), "rule %d; a 0-d tensor", x->rule);
		else if (x->row_bias)
			snprintf(why, sizeof(why), "rule %d: bias of a row-parallel layer, added once", x->rule);
		else
			snprintf(why, sizeof(why), "rule %d (%s)", x->rule,
				 x->rule >= 0 && (size_t)x->rule < sp->plan->nrules ? tpc_split_kind_name(sp->plan->rules[x->rule].kind) : "?");
		tpc_buf_addf(out, "#   %s  %s\n", nm, why);
	}
	tpc_buf_addf(out, "# unmatched: %zu tensor%s (%s)\n", sp->nunmatched, sp->nunmatched == 1 ? "" : "s",
		     sp->plan->fallback_error ? "error" : "replicated by the fallback");
	for (size_t i = 0; i < sp->n; i++)
		if (!sp->t[i].matched) {
			char nm[1024];
			tpc_sanitize(nm, sizeof(nm), sp->in->t[sp->t[i].in].name);
			tpc_buf_addf(out, "#   %s\n", nm);
		}
	if (sp->pp > 1 && sp->nunstaged) {
		tpc_buf_addf(out, "# unstaged (no layer, first_stage or last_stage pattern; on stage 0): %zu\n",
			     sp->nunstaged);
		for (size_t i = 0; i < sp->n; i++)
			if (!sp->t[i].staged) {
				char nm[1024];
				tpc_sanitize(nm, sizeof(nm), sp->in->t[sp->t[i].in].name);
				tpc_buf_addf(out, "#   %s\n", nm);
			}
	}
}

void tpc_shard_describe(const tpc_shard_plan *sp, tpc_buf *out, bool unicode)
{
	int w = 4;
	describe_head(sp, out);
	for (size_t i = 0; i < sp->n; i++) {
		int l = (int)strlen(sp->in->t[sp->t[i].in].name);
		if (l > w)
			w = l < 72 ? l : 72;
	}
	tpc_buf_addf(out, "%-*s  %-6s %-16s %-11s %-16s%s notes\n", w, "name", "dtype", "shape", "split",
		     "rank shape", sp->pp > 1 ? " stage" : "");
	for (size_t i = 0; i < sp->n; i++)
		describe_entry(sp, i, w, out);
	describe_ranks(sp, out, unicode);
	describe_lists(sp, out);
}
