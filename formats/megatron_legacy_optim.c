/* megatron_legacy_optim.c - Megatron's distributed optimizer state in a
 * legacy save: mp_rank_TT[_PPP]/distrib_optim.pt beside model_optim_rng.pt
 * (TPC_OPEN_OPTIMIZER; dcp_int.h).
 *
 * The layout followed (Megatron-LM d98e8a6, megatron/core/optimizer/
 * distrib_optimizer.py and param_layout.py):
 *
 * - distrib_optim.pt is get_parameter_state_dp_zero() (:1262-1411) as
 *   save_parameter_state (:1413-1422) writes it on DP rank 0:
 *   {"buckets_coalesced": True, gbuf_idx: {dtype key: {"param", "exp_avg",
 *   "exp_avg_sq": 1-D f32 tensors, "numel_unpadded": n}}}, one gbuf per
 *   (param dtype, grad dtype, expert-parallel) buffer of the model chunk;
 *   each tensor is the buffer's buckets back to back, each bucket without
 *   its end padding (:1394-1404), so n is the sum of the buckets' unpadded
 *   sizes. Nothing in it names a parameter.
 * - Where a parameter lies is the buffer layout
 *   (_compute_per_buffer_param_layout, :506-589): the trainable parameters
 *   in reverse named_parameters order, each start aligned to 64 elements
 *   (param_layout.py pad_param_start), a bucket closed once it holds
 *   bucket_size elements or more, and a shared embedding (tied across pipeline
 *   stages; at one stage no parameter is one) in a bucket of its
 *   own (:530-531, 555-562, 568-577); bucket_size is DDP's (distributed/
 *   distributed_data_parallel.py:131-137: --ddp-bucket-size, else
 *   max(40000000, 1000000 x the data-parallel (x context-parallel) size),
 *   none without --overlap-grad-reduce, nor past the first pipeline stage
 *   or the first model chunk: training/training.py:2504-2514,
 *   distributed_data_parallel.py:164-171; the stage is the rank folder's
 *   PPP). Inside a bucket, positions are
 *   relative to its start (a multiple of 64), so in the coalesced tensor a
 *   parameter lies at (the unpadded sizes of the buckets before it) + (its
 *   start - its bucket's start).
 * - The parameters are the tensors of model_optim_rng.pt's "model" in order
 *   (state_dict and named_parameters walk modules alike; _extra_state
 *   entries are not tensors); the param groups are its "optimizer"'s
 *   (state_dict(), :825-885), read with the rule megatron_optim.c follows.
 *
 * - With virtual pipeline stages (args' virtual_pipeline_model_parallel_size
 *   V > 1) the rank file holds its model chunks as model0 ... modelV-1
 *   (training/checkpointing.py generate_state_dict) and distrib_optim.pt one
 *   dense buffer per chunk, gbuf v for chunk v (the optimizer chains the
 *   chunks' buffers, distrib_optimizer.py:714-726), each laid out as above;
 *   the state is then named modelV.KEY, which the megatron layout renumbers
 *   to global layers (shard/layout_megatron.c).
 *
 * - A model with experts has Megatron's chained optimizer, a dense and an
 *   expert-parallel DistributedOptimizer (optimizer/__init__.py:1213-1245):
 *   "optimizer" is the list of their state dicts (optimizer.py:1567-1571),
 *   distrib_optim.pt the list of their get_parameter_state_dp_zero
 *   (:1972-1997), None for a part whose DP group's rank 0 is another rank
 *   (the dense part on EP ranks past 0 when the experts spread over the
 *   data-parallel ranks); each part's buffer holds its own parameters (the
 *   routed experts', tpc__mcore_is_expert, or the others), laid out as above.
 *
 * Read for one rank file with one dense buffer per model chunk, or the
 * chained pair: at tp 1 x pp 1 the whole model; a rank of a larger set
 * gives its TP-local moments under its local model tensors' names, which
 * the megatron layout joins as it joins the parameters (shard/
 * tpc_merge_optim.c). Experts with model chunks, uneven stages with model
 * chunks and the pre-2024 per-bucket form are refused by name. The layout's total is checked against numel_unpadded,
 * and every parameter's master, rounded to the model's dtype, against its
 * stored weight (all elements of a small tensor, 1,536 of a large one), so
 * a save whose layout differs (frozen parameters, another Megatron's
 * alignment, another parameter order) is refused with the numbers.
 */
#include "dcp_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torch/torch.h"
#include "tpc_cast.h"
#include "tpc_extras.h"
#include "tpc_io.h"
#include "tpc_util.h"

#define TMP_PREFIX "\x01" "distrib-optim/"

int tpc__mcore_world_tensors(const tpc_ckpt *ck, const tpc_value *dv, int64_t ngbuf, int64_t v, const char *where,
			     const char *name, int64_t ix[3], int64_t *unpadded, tpc_err *e)
{
	static const char *const keys[] = {"param", "exp_avg", "exp_avg_sq"};
	const tpc_value *co = tpc_value_get(dv, "buckets_coalesced"), *gb = NULL;
	if (!dv || dv->kind != TPC_V_DICT)
		return TPC_CORRUPT(e, where, -1, name, "does not hold a dict (not Megatron's distrib_optim.pt)");
	if (!co || co->kind != TPC_V_BOOL || !co->ival)
		return tpc_err_at(e, TPC_EINPUT, where, name,
				  "no buckets_coalesced: Megatron's per-bucket form from before February 2024, which is not read");
	for (size_t i = 0; i < dv->n; i++) {
		const tpc_value *k = dv->keys[i];
		if (k->kind == TPC_V_STR && !strcmp(k->str, "buckets_coalesced"))
			continue;
		if (k->kind != TPC_V_INT || k->ival < 0 || k->ival >= ngbuf || dv->items[i]->kind != TPC_V_DICT || dv->items[i]->n != 1)
			return tpc_err_at(e, TPC_EINPUT, where, name, ngbuf == 1
					  ? "holds more than one parameter buffer (one per parameter dtype and expert-parallel group): only one dense buffer is read"
					  : "holds a parameter buffer beyond one per model chunk (one per parameter dtype and expert-parallel group): only one dense buffer per model chunk is read");
		if (k->ival == v)
			gb = dv->items[i]->items[0];
	}
	const tpc_value *nu = tpc_value_get(gb, "numel_unpadded");
	if (!gb || gb->kind != TPC_V_DICT || !nu || nu->kind != TPC_V_INT || nu->ival < 0)
		return TPC_CORRUPT(e, where, -1, name, "buffer %lld has no numel_unpadded", (long long)v);
	*unpadded = nu->ival;
	for (int k = 0; k < 3; k++) {
		const tpc_value *x = tpc_value_get(gb, keys[k]);
		const tpc_tensor *t = x && x->kind == TPC_V_TENSOR && x->ival >= 0 && (size_t)x->ival < ck->n ? &ck->t[x->ival] : NULL;
		if (!t || t->ndim != 1 || t->dtype != TPC_F32 || t->shape[0] != nu->ival || !tpc_tensor_is_contiguous(t))
			return tpc_err_at(e, TPC_EINPUT, where, name, "buffer %lld's %s is not a flat f32 tensor of numel_unpadded (%lld) elements",
					  (long long)v, keys[k], (long long)nu->ival);
		ix[k] = x->ival;
	}
	return 0;
}

/* Each parameter's offset in the coalesced tensors (pos[], in model order),
 * by the buffer layout of model chunk v of pipeline stage pp_rank (bucketed
 * only in the first chunk of the first stage: training/training.py:2504-
 * 2514, distributed/distributed_data_parallel.py:164-171); keys[]: the
 * parameters' state-dict keys (the shared embedding is known by its key);
 * the total into *total, the buckets into *nb. */
static int layout(const tpc_ckpt *ck, const int64_t *par, const char *const *keys, size_t np, const tpc_value *args,
		  int64_t pp_rank, int64_t *pos, int64_t *total, int64_t *nb, const char *path, tpc_err *e)
{
	int64_t bucket, untie, pp;
	int ret = tpc__mcore_bucket_size(args, pp_rank, &bucket, path, e);
	tpc__mcore_arg_int(args, "pipeline_model_parallel_size", 1, &pp);
	tpc__mcore_arg_int(args, "untie_embeddings_and_output_weights", 0, &untie);
	int64_t *numel = tpc_calloc(np + 1, sizeof(int64_t));
	bool *shared = tpc_calloc(np + 1, sizeof(bool));
	size_t n = 0;
	if (!ret && (!numel || !shared))
		ret = tpc_err_nomem(e);
	for (size_t j = 0; !ret && j < np; j++) {
		numel[j] = (int64_t)ck->t[par[j]].numel;
		shared[j] = tpc__mcore_shared_embedding(keys[j], untie, pp);
	}
	if (!ret && tpc__mcore_coalesced(numel, shared, np, bucket, pos, total, &n))
		ret = tpc_err_nomem(e);
	*nb = (int64_t)n;
	free(numel);
	free(shared);
	return ret;
}

/* The moments and master of each parameter as tensors named
 * "optimizer.state.KEY.NAME" (what megatron_optim.c's tree takes): its
 * numel elements from pos, in its shape. */
static int add_states(tpc_ckpt *ck, const int64_t *par, size_t np, const int64_t *pos, const int64_t ix[3], tpc_err *e)
{
	static const char *const keys[] = {"param", "exp_avg", "exp_avg_sq"};
	char nb[1024];
	int ret = 0;
	for (size_t j = 0; j < np && !ret; j++) {
		for (int k = 0; k < 3 && !ret; k++) {
			const tpc_tensor *p = &ck->t[par[j]];
			tpc_tensor piece, t;
			memset(&t, 0, sizeof(t));
			if (tpc_tensor_narrow(&piece, &ck->t[ix[k]], 0, pos[j], (int64_t)p->numel))
				return tpc_err_nomem(e);
			piece.storage = -1;
			piece.storage_offset = 0;
			if (tpc_tensor_init_flat(&t, p->ndim, p->shape, &piece, 1))
				ret = tpc_err_nomem(e);
			snprintf(nb, sizeof(nb), "optimizer.state.%s.%s", keys[k], p->name);
			int64_t a = ret ? -1 : tpc_ckpt_add_copy(ck, nb, &t, e);
			if (!ret && a < 0)
				ret = (int)a;
			tpc_tensor_release(&piece);
			tpc_tensor_release(&t);
		}
	}
	return ret;
}

/* Element i (C order) of t as "[a, b]" */
static void index_str(const tpc_tensor *t, int64_t i, char *b, size_t n)
{
	int64_t ix[TPC_MAX_NDIM];
	size_t k = 0;
	for (int d = t->ndim; d-- > 0;) {
		ix[d] = t->shape[d] ? i % t->shape[d] : 0;
		i = t->shape[d] ? i / t->shape[d] : 0;
	}
	k += (size_t)snprintf(b, n, "[");
	for (int d = 0; d < t->ndim && k < n; d++)
		k += (size_t)snprintf(b + k, n - k, "%s%lld", d ? ", " : "", (long long)ix[d]);
	if (k < n)
		snprintf(b + k, n - k, "]");
}

/* Elements of an n-element tensor the master check compares: all of a small
 * one, else its first and last 256 and 1,024 spread between. */
/* The layout is inferred, so it is proved: each parameter's fp32 master,
 * rounded to the model's dtype (Megatron copies the masters to the model
 * after each step: distrib_optimizer.py _copy_main_params_to_model_params),
 * equals the rank's stored weight element for element; a parameter the
 * layout put on another's range is refused, naming rank file, parameter,
 * element and both values (tpc__mcore_prove: every element of tensors of up
 * to 65,536 elements, else 64 runs of 64, each run read at once). */
static int check_masters(const tpc_ckpt *ck, const int64_t *par, size_t np, const int64_t *pos, int64_t master,
			 const char *sib, tpc_err *e)
{
	int ret = 0;
	for (size_t j = 0; j < np && !ret; j++) {
		const tpc_tensor *p = &ck->t[par[j]];
		if (p->dtype != p->src_dtype || (p->dtype != TPC_BF16 && p->dtype != TPC_F16 && p->dtype != TPC_F32))
			return tpc_err_at(e, TPC_EINPUT, sib, p->name, "a %s parameter: its master cannot be checked against it (bf16, f16 or f32)",
					  tpc_dtype_name(p->src_dtype));
		tpc_tensor lv;
		int64_t at = -1;
		float f = 0;
		uint32_t want = 0;
		memset(&lv, 0, sizeof(lv));
		if (tpc_tensor_narrow(&lv, &ck->t[master], 0, pos[j], (int64_t)p->numel))
			return tpc_err_nomem(e);
		ret = tpc__mcore_prove(ck, &lv, p, &at, &f, &want, e);
		tpc_tensor_release(&lv);
		if (ret || at < 0)
			continue;
		char where[160];
		uint8_t r[4];
		float wv = 0, rv = f;
		if (p->dtype != TPC_F32 && (tpc_cast(&wv, TPC_F32, &want, p->dtype, 1, e) || tpc_cast(r, p->dtype, &f, TPC_F32, 1, e) ||
					    tpc_cast(&rv, TPC_F32, r, p->dtype, 1, e)))
			return e->code;
		if (p->dtype == TPC_F32)
			memcpy(&wv, &want, 4);
		index_str(p, at, where, sizeof(where));
		ret = tpc_err_at(e, TPC_EINPUT, sib, p->name,
				 "its fp32 master at element %s (buffer offset %lld) is %.9g, %.9g in %s, but the rank's model weight there is %.9g: Megatron's buffer layout, as inferred from the model's tensors, does not put this parameter here (another parameter order, frozen parameters); not mapped",
				 where, (long long)(pos[j] + at), (double)f, (double)rv, tpc_dtype_name(p->dtype), (double)wv);
	}
	return ret;
}

/* Model chunk `model`'s tensors (par[], in order, with their keys): part
 * 0 all, 1 the dense ones, 2 the routed experts' (a chained optimizer's
 * two buffers). */
static int model_params(const tpc_ckpt *ck, const tpc_value *model, int part, const char *path, int64_t **par,
			const char ***keys, size_t *np, tpc_err *e)
{
	*par = tpc_calloc(model->n + 1, sizeof(int64_t));
	*keys = tpc_calloc(model->n + 1, sizeof(char *));
	if (!*par || !*keys)
		return tpc_err_nomem(e);
	*np = 0;
	for (size_t i = 0; i < model->n; i++) {
		const tpc_value *v = model->items[i], *k = model->keys[i];
		if (v->kind != TPC_V_TENSOR || v->ival < 0 || (size_t)v->ival >= ck->n || k->kind != TPC_V_STR)
			continue; /* _extra_state objects */
		if (part && tpc__mcore_is_expert(k->str) != (part == 2))
			continue;
		if (*np && ck->t[v->ival].dtype != ck->t[(*par)[0]].dtype)
			return tpc_err_at(e, TPC_EINPUT, path, ck->t[v->ival].name,
					  "is %s where '%s' is %s: parameters of two dtypes lie in two buffers, not read yet",
					  tpc_dtype_name(ck->t[v->ival].dtype), ck->t[(*par)[0]].name, tpc_dtype_name(ck->t[(*par)[0]].dtype));
		(*keys)[*np] = k->str;
		(*par)[(*np)++] = v->ival;
	}
	return 0;
}

/* The rank file's model chunks: "model", or with virtual pipeline stages
 * (args' virtual_pipeline_model_parallel_size V) "model0" ... "modelV-1"
 * (training/checkpointing.py generate_state_dict), chunk v's buffer gbuf v
 * of distrib_optim.pt (the optimizer chains the chunks' buffers,
 * distrib_optimizer.py:714-726). *pp_rank: the rank's pipeline stage, from
 * its folder (mp_rank_TT_PPP[_EEE] when pp > 1: checkpointing.py:267-274). */
#define MAX_CHUNKS 64
static int chunks_of(const tpc_value *root, bool chained, const char *path, const tpc_value **ch, int64_t *nv,
		     int64_t *pp_rank, tpc_err *e)
{
	const tpc_value *args = tpc_value_get(root, "args");
	int64_t vp, ne, pp;
	char nm[32];
	tpc__mcore_arg_int(args, "virtual_pipeline_model_parallel_size", 1, &vp);
	tpc__mcore_arg_int(args, "pipeline_model_parallel_size", 1, &pp);
	tpc__mcore_arg_int(args, "num_experts", 0, &ne);
	if (ne > 0 && !chained)
		return tpc_err_at(e, TPC_EINPUT, path, NULL,
				  "a model with %lld experts whose optimizer is not Megatron's chained dense and expert-parallel pair: not read",
				  (long long)ne);
	if (ne > 0 && vp > 1)
		return tpc_err_at(e, TPC_EINPUT, path, NULL, "virtual pipeline stages with experts: not read yet");
	if (vp < 1 || vp > MAX_CHUNKS)
		return tpc_err_at(e, TPC_EINPUT, path, NULL, "args say virtual_pipeline_model_parallel_size %lld (1 to %d are read)",
				  (long long)vp, MAX_CHUNKS);
	*nv = vp;
	for (int64_t v = 0; v < vp; v++) {
		snprintf(nm, sizeof(nm), vp > 1 ? "model%lld" : "model", (long long)v);
		ch[v] = tpc_value_get(root, nm);
		if ((!ch[v] || ch[v]->kind != TPC_V_DICT) && vp > 1)
			return tpc_err_at(e, TPC_EINPUT, path, NULL, "args say %lld virtual pipeline stages, but it holds no model chunk '%s'",
					  (long long)vp, nm);
		if (!ch[v] || ch[v]->kind != TPC_V_DICT)
			return tpc_err_at(e, TPC_EINPUT, path, NULL, "holds no 'model' beside its distrib_optim.pt%s",
					  tpc_value_get(root, "model0") ? " (it holds model0, model1, ...: model chunks its args' virtual_pipeline_model_parallel_size does not say)" : "");
	}
	snprintf(nm, sizeof(nm), "model%lld", (long long)vp);
	if (vp > 1 && (tpc_value_get(root, nm) || tpc_value_get(root, "model")))
		return tpc_err_at(e, TPC_EINPUT, path, NULL, "holds a model chunk beyond the %lld its args' virtual_pipeline_model_parallel_size says",
				  (long long)vp);
	tpc_megatron_args ma;
	if (vp > 1 && tpc_extras_megatron_args(root, &ma) && ma.uneven)
		return tpc_err_at(e, TPC_EINPUT, path, NULL,
				  "args set %s with virtual pipeline stages: which layers a model chunk holds is read for even stages only",
				  ma.uneven);
	*pp_rank = 0;
	if (pp > 1) {
		char *dir = tpc_path_dir(path);
		const char *b = dir ? tpc_path_base(dir) : NULL;
		int t, p, k = -1;
		if (!dir)
			return tpc_err_nomem(e);
		if (sscanf(b, "mp_rank_%2d_%3d%n", &t, &p, &k) == 2 && k == 14 && (!b[k] || b[k] == '_') && p < pp)
			*pp_rank = p;
		else
			k = -1;
		free(dir);
		if (k < 0)
			return tpc_err_at(e, TPC_EINPUT, path, NULL,
					  "args say pipeline_model_parallel_size %lld, but its folder is no mp_rank_TT_PPP with a stage below it: the buffer's buckets depend on the stage",
					  (long long)pp);
	}
	return 0;
}

/* Keep the model's tensors and the state: the rank file's other tensors
 * (RNG states) and distrib_optim.pt's own go. The tree becomes the model
 * dict (with model chunks, a dict of them), as megatron_optim.c's tree
 * expects. */
static int keep_model(tpc_ckpt *ck, const tpc_value *const *ch, int64_t nv, tpc_err *e)
{
	bool *keep = tpc_calloc(ck->n + 1, sizeof(bool));
	tpc_value *root = nv > 1 ? tpc_value_new(TPC_V_DICT) : tpc_value_ref((tpc_value *)ch[0]);
	int ret = keep && root ? 0 : tpc_err_nomem(e);
	for (int64_t c = 0; !ret && c < nv; c++) {
		char nm[32];
		snprintf(nm, sizeof(nm), "model%lld", (long long)c);
		if (nv > 1 && tpc_value_set(root, tpc_value_str(nm, strlen(nm)), tpc_value_ref((tpc_value *)ch[c])))
			ret = tpc_err_nomem(e);
		for (size_t i = 0; !ret && i < ch[c]->n; i++) {
			const tpc_value *v = ch[c]->items[i], *k = ch[c]->keys[i];
			if (v->kind == TPC_V_TENSOR && v->ival >= 0 && (size_t)v->ival < ck->n && k->kind == TPC_V_STR)
				keep[v->ival] = true;
		}
	}
	for (size_t i = 0; !ret && i < ck->n; i++)
		keep[i] = keep[i] || !strncmp(ck->t[i].name, "optimizer.state.", 16);
	if (!ret) {
		tpc_value_unref(ck->root);
		ck->root = root;
		root = NULL;
		ret = tpc_ckpt_filter(ck, keep, e);
	}
	tpc_value_unref(root);
	free(keep);
	return ret;
}

/* The rank file's summary line and its state's. */
static void about(tpc_ckpt *ck, const tpc__mcore_optim *mo, int64_t nv)
{
	tpc_buf b = TPC_BUF_INIT;
	int64_t tp, pp, ep;
	tpc__mcore_arg_int(mo->args, "tensor_model_parallel_size", 1, &tp);
	tpc__mcore_arg_int(mo->args, "pipeline_model_parallel_size", 1, &pp);
	tpc__mcore_arg_int(mo->args, "expert_model_parallel_size", 1, &ep);
	if (tp * pp * (ep > 1 ? ep : 1) > 1) {
		tpc_buf_addf(&b, "Megatron legacy rank file of a tp %lld x pp %lld", (long long)tp, (long long)pp);
		if (nv > 1)
			tpc_buf_addf(&b, " x vpp %lld", (long long)nv);
		if (ep > 1)
			tpc_buf_addf(&b, " x ep %lld", (long long)ep);
		tpc_buf_adds(&b, " set with its distributed optimizer's state (this rank's slices: 'tpconv convert SAVE_DIR --optimizer' joins the set's)");
	} else {
		tpc_buf_addf(&b, "Megatron legacy rank file (tp 1 x pp 1) with its distributed optimizer's state");
	}
	tpc__mcore_optim_about(mo, &b);
	tpc_ckpt_set_about(ck, &b);
}

/* Model chunk v (dict md) of a rank at pipeline stage pp_rank: its
 * parameters laid out in buffer v of distrib_optim.pt (dv), the layout's
 * total checked, every master against its weight, the states added; *nb
 * gets its buckets, *np its parameters; part: model_params'. */
static int map_chunk(tpc_ckpt *ck, const tpc_value *md, int part, const tpc_value *dv, int64_t v, int64_t nv,
		     int64_t pp_rank, const tpc_value *args, const char *path, const char *sib, int64_t *nb, size_t *np,
		     tpc_err *e)
{
	int64_t *par = NULL, *pos = NULL, ix[3], unpadded = 0, total = 0, n = 0;
	const char **keys = NULL;
	int ret = model_params(ck, md, part, path, &par, &keys, np, e);
	if (!ret)
		ret = tpc__mcore_world_tensors(ck, dv, nv, v, sib, NULL, ix, &unpadded, e);
	if (!ret && !(pos = tpc_calloc(*np + 1, sizeof(int64_t))))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = layout(ck, par, keys, *np, args, pp_rank + v, pos, &total, &n, path, e);
	if (!ret && total != unpadded) {
		char c[48] = "the model";
		if (part)
			snprintf(c, sizeof(c), "the %s part", part == 1 ? "dense" : "expert-parallel");
		if (nv > 1)
			snprintf(c, sizeof(c), "model chunk %lld", (long long)v);
		ret = tpc_err_at(e, TPC_EINPUT, sib, NULL,
				 "%s's %zu parameters take %lld elements in Megatron's buffer layout (%lld bucket%s, 64-element aligned), the buffer holds %lld (numel_unpadded): another layout (frozen parameters, another Megatron); not mapped",
				 c, *np, (long long)total, (long long)n, n == 1 ? "" : "s", (long long)unpadded);
	}
	if (!ret && !(ret = check_masters(ck, par, *np, pos, ix[0], sib, e)))
		ret = add_states(ck, par, *np, pos, ix, e);
	*nb += n;
	free(par);
	free(keys);
	free(pos);
	return ret;
}

/* The param groups: optimizer.optimizer.param_groups, or with a chained
 * optimizer (a model with experts: ChainedOptimizer of a dense and an
 * expert-parallel DistributedOptimizer, whose state_dict is the list of
 * theirs, optimizer.py:1567-1571) the dense part's then the expert part's
 * (*ndense the dense part's count), as megatron_optim.c's tree takes them. */
static int param_groups(const tpc_value *root, bool chained, tpc_value **groups, size_t *ndense, const char *path,
			tpc_err *e)
{
	const tpc_value *opt = tpc_value_get(root, "optimizer");
	*groups = NULL;
	*ndense = 0;
	for (size_t k = 0; k < (chained ? 2 : 1); k++) {
		const tpc_value *pg = tpc_value_get(tpc_value_get(chained ? opt->items[k] : opt, "optimizer"), "param_groups");
		if (!pg || (pg->kind != TPC_V_LIST && pg->kind != TPC_V_TUPLE) || !pg->n) {
			tpc_value_unref(*groups);
			*groups = NULL;
			return chained ? tpc_err_at(e, TPC_EINPUT, path, NULL, "optimizer[%zu].optimizer.param_groups is not a list of groups", k)
				       : tpc_err_at(e, TPC_EINPUT, path, NULL, "optimizer.optimizer.param_groups is not a list of groups");
		}
		if (!chained) {
			*groups = tpc_value_ref((tpc_value *)pg);
			return 0;
		}
		if (!*groups && !(*groups = tpc_value_new(TPC_V_LIST)))
			return tpc_err_nomem(e);
		for (size_t g = 0; g < pg->n; g++)
			if (tpc_value_append(*groups, tpc_value_ref(pg->items[g]))) {
				tpc_value_unref(*groups);
				*groups = NULL;
				return tpc_err_nomem(e);
			}
		if (!k)
			*ndense = pg->n;
	}
	return 0;
}

/* Each buffer mapped: the model chunks' (gbuf v each), or a chained
 * optimizer's two parts, distrib_optim.pt then the list of their
 * get_parameter_state_dp_zero (optimizer.py:1972-1997), None for a part
 * whose DP group's rank 0 is another rank (an EP rank past 0: the dense
 * part's DP group spans the EP ranks, so its state is EP rank 0's file's). */
static int map_all(tpc_ckpt *ck, const tpc_value *const *ch, int64_t nv, bool chained, const tpc_value *dv,
		   int64_t pp_rank, const tpc_value *args, const char *path, const char *sib, int64_t *nb, size_t *np,
		   bool *dense_elsewhere, tpc_err *e)
{
	int ret = 0;
	*dense_elsewhere = false;
	if (chained && (!dv || (dv->kind != TPC_V_LIST && dv->kind != TPC_V_TUPLE) || dv->n != 2))
		return tpc_err_at(e, TPC_EINPUT, sib, NULL,
				  "is not the list of a chained optimizer's two parts (dense, expert-parallel) that its model_optim_rng.pt's optimizer is");
	if (chained && dv->items[0]->kind == TPC_V_NONE && dv->items[1]->kind == TPC_V_NONE)
		return tpc_err_at(e, TPC_EINPUT, sib, NULL, "holds neither part's state (both None)");
	for (int64_t v = 0; v < (chained ? 2 : nv) && !ret; v++) {
		size_t n = 0;
		if (chained && dv->items[v]->kind == TPC_V_NONE) {
			*dense_elsewhere = *dense_elsewhere || v == 0;
			continue;
		}
		ret = chained ? map_chunk(ck, ch[0], (int)v + 1, dv->items[v], 0, 1, pp_rank, args, path, sib, nb, &n, e)
			      : map_chunk(ck, ch[v], 0, dv, v, nv, pp_rank, args, path, sib, nb, &n, e);
		*np += n;
	}
	return ret;
}

int tpc__megatron_legacy_optim(tpc_ckpt *ck, const char *path, tpc_err *e)
{
	tpc__mcore_optim mo;
	tpc_value *dv = NULL, *groups = NULL;
	const tpc_value *ch[MAX_CHUNKS];
	int64_t nb = 0, nv = 1, pp_rank = 0;
	size_t np = 0, ndense = 0;
	bool dense_elsewhere = false;
	int src, ret = 0;
	char *dir = tpc_path_dir(path), *sib = dir ? tpc_path_join(dir, "distrib_optim.pt") : NULL;
	memset(&mo, 0, sizeof(mo));
	if (!sib) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (strcmp(tpc_path_base(path), "model_optim_rng.pt") || !tpc_exists(sib) || !ck->root)
		goto out; /* not a Megatron rank file with the distributed optimizer */
	const tpc_value *root = ck->root, *opt = tpc_value_get(root, "optimizer");
	const tpc_value *args = tpc_value_get(root, "args");
	bool chained = opt && (opt->kind == TPC_V_LIST || opt->kind == TPC_V_TUPLE) && opt->n == 2;
	if ((ret = chunks_of(root, chained, path, ch, &nv, &pp_rank, e)) ||
	    (ret = param_groups(root, chained, &groups, &ndense, path, e)))
		goto out;
	const tpc_map *m;
	if ((ret = tpc_ckpt_add_file(ck, sib, &src, e)) || !(m = tpc_ckpt_source(ck, src)) ||
	    (ret = tpc__torch_open_item(ck, src, 0, m->size, sib, TMP_PREFIX, false, &dv, e)))
		goto out;
	/* without model chunks the tensors go by their keys (the state is named after them) */
	for (size_t i = 0; nv == 1 && !ret && i < ch[0]->n; i++) {
		const tpc_value *v = ch[0]->items[i], *k = ch[0]->keys[i];
		if (v->kind == TPC_V_TENSOR && v->ival >= 0 && (size_t)v->ival < ck->n && k->kind == TPC_V_STR &&
		    strcmp(ck->t[v->ival].name, k->str))
			ret = tpc_ckpt_rename(ck, v->ival, k->str, e);
	}
	if (ret || (ret = map_all(ck, ch, nv, chained, dv, pp_rank, args, path, sib, &nb, &np, &dense_elsewhere, e)))
		goto out;
	mo.on = true;
	mo.groups = groups;
	groups = NULL;
	mo.chained = chained;
	mo.ndense = ndense;
	mo.args = args ? tpc_value_ref((tpc_value *)args) : NULL;
	char what[160];
	if (chained)
		snprintf(what, sizeof(what), "distrib_optim.pt, %s, %lld bucket%s", dense_elsewhere
			 ? "the expert-parallel part's buffer (the dense part's state is in its DP group's rank 0's file)"
			 : "the chained dense and expert-parallel parts' buffers", (long long)nb, nb == 1 ? "" : "s");
	else if (nv > 1)
		snprintf(what, sizeof(what), "distrib_optim.pt, %lld model chunks' buffers, %lld buckets", (long long)nv, (long long)nb);
	else
		snprintf(what, sizeof(what), "distrib_optim.pt, %lld bucket%s", (long long)nb, nb == 1 ? "" : "s");
	if (!(mo.type = tpc_strdup(what)) || !(mo.common = tpc_strdup(path))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	tpc_value *hold[MAX_CHUNKS];
	for (int64_t v = 0; v < nv; v++)
		hold[v] = tpc_value_ref((tpc_value *)ch[v]); /* the root they are in goes */
	ret = keep_model(ck, (const tpc_value *const *)hold, nv, e);
	for (int64_t v = 0; v < nv; v++)
		tpc_value_unref(hold[v]);
	if (!ret)
		ret = tpc__mcore_optim_tree(&mo, ck, sib, e);
	if (!ret)
		about(ck, &mo, nv);
out:
	tpc__mcore_optim_release(&mo);
	tpc_value_unref(groups);
	tpc_value_unref(dv);
	free(sib);
	free(dir);
	return ret;
}
