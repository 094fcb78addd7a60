/* megatron_optim.c - Megatron-Core's distributed optimizer state in a
 * torch_dist save (TPC_OPEN_OPTIMIZER; dcp_int.h).
 *
 * The layouts followed (Megatron-LM at d98e8a6, and at 5ab481c^ for the
 * flattened form it has since removed):
 *
 * - DistributedOptimizer.sharded_state_dict (megatron/core/optimizer/
 *   distrib_optimizer.py:1462-1582) stores the non-parameter state
 *   (state_dict(), :825-885: the inner optimizer's param_groups without their
 *   'params', each with the 'step' for torch's Adam, :866-878) and
 *   'param_state_sharding_type' in the common state, common.pt; the
 *   parameter state in the DCP files, as the sharding type says.
 * - 'fully_reshardable' (:1692-1836): for each model parameter, tensors
 *   'optimizer.state.{param,exp_avg,exp_avg_sq}.<key>' shaped and sharded as
 *   the model's own ShardedTensor <key> (replace(sharded_metadata, key=...,
 *   data=state.reshape(param shape)), :1823-1832): model space, read as the
 *   model is read (layers un-stacked, experts apart).
 * - 'fully_sharded_model_space' (:1988-2069, the default of Megatron 0.8 to
 *   0.15 with a fully parallel save, training/checkpointing.py at core_v0.8.0
 *   :336-338): the same keys with 'fp32_param' for the master, but each DP
 *   rank stores only its flattened_range of the TP-local shard. torch_dist
 *   saved those (dist_checkpointing/strategies/torch.py at 5ab481c^,
 *   sharded_tensor_to_torch_sharded_tensor, type 3, and resharding.py
 *   nd_flattened_tensor_reformulated_global_shape) as a tensor of global shape
 *   axis_fragmentations + (prod(local_shape),): [X // x, Y // y, Z // z,
 *   x * y * z] for a parameter [X, Y, Z] with local shards [x, y, z] (a
 *   prepended layer axis is a fragmentation of its size, local size 1), each
 *   rank's range a chunk at (fragment..., flattened_range.start). Element
 *   (g_0, ..., g_n) of the parameter is element flat(g mod x) of fragment
 *   g / x: rebuilt here as a description over the chunks (no byte moves).
 * - The other types ('dp_reshardable', the default since, :1838-1986, and
 *   'dp_zero_gather_scatter', :1659-1690, Megatron 0.8-0.12's default without
 *   --ckpt-fully-parallel-save, training/checkpointing.py:2620-2629) store
 *   the flat bucket buffers without parameter names: mapped back by
 *   Megatron's parameter order in megatron_dp_optim.c.
 *
 * Which parameter is in which param group is not recorded either (state_dict
 * deletes 'params', :868); groups come from the parameters' names and shapes
 * (optimizer/__init__.py:301-414 and the standard weight-decay override,
 * :94-128: 1-D parameters and biases get wd_mult 0), which this file follows
 * for one group or for the two groups that rule makes, and refuses otherwise.
 */
#include "dcp_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_buf.h"
#include "tpc_cast.h"
#include "tpc_io.h"
#include "tpc_optim.h"
#include "tpc_util.h"

#define STATE_PREFIX "optimizer.state."

void tpc__mcore_optim_release(tpc__mcore_optim *mo)
{
	tpc_value_unref(mo->groups);
	tpc_value_unref(mo->args);
	free(mo->type);
	free(mo->common);
	memset(mo, 0, sizeof(*mo));
}

static bool is_seq(const tpc_value *v)
{
	return v && (v->kind == TPC_V_LIST || v->kind == TPC_V_TUPLE);
}

/* argparse.Namespace's field k (a CALL whose state dict is items[2]) */
static const tpc_value *ns_field(const tpc_value *args, const char *k)
{
	if (!args || args->kind != TPC_V_CALL || args->n < 3)
		return NULL;
	return tpc_value_get(args->items[2], k);
}

/* One distributed optimizer's common state: its sharding type (a model-space
 * one) and param groups. */
static int one_optim(const tpc_value *opt, const char *path, const char **type, const tpc_value **pgs, tpc_err *e)
{
	const tpc_value *st = tpc_value_get(opt, "param_state_sharding_type"), *inner = tpc_value_get(opt, "optimizer");
	int ret = 0;
	if (!st || st->kind != TPC_V_STR) {
		ret = tpc_err_at(e, TPC_EINPUT, path, NULL,
				 "'optimizer' has no param_state_sharding_type: not Megatron's distributed optimizer (a chained optimizer of other than a dense and an expert part, or a plain one, is not read yet)");
		return ret;
	}
	bool bucket = !strcmp(st->str, "fully_sharded_bucket_space");
	bool dp = !strcmp(st->str, "dp_reshardable") || !strcmp(st->str, "dp_zero_gather_scatter");
	if (!bucket && !dp && strcmp(st->str, "fully_reshardable") && strcmp(st->str, "fully_sharded_model_space")) {
		ret = tpc_err_at(e, TPC_EINPUT, path, NULL,
				 "unknown param_state_sharding_type '%.40s' (Megatron's: fully_reshardable, fully_sharded_model_space, dp_reshardable, dp_zero_gather_scatter, fsdp_dtensor)",
				 st->str);
		return ret;
	}
	if (bucket) {
		ret = tpc_err_at(e, TPC_EINPUT, path, NULL,
				 "the distributed optimizer's state is stored as '%.40s' (deprecated, each DP rank's bucket space), which is not read; tpconv reads 'fully_reshardable' (save with --dist-ckpt-optim-fully-reshardable), 'dp_reshardable', 'dp_zero_gather_scatter' and 'fully_sharded_model_space'",
				 st->str);
		return ret;
	}
	*type = st->str;
	if (dp) /* the param groups are in the DCP files (megatron_dp_optim.c) */
		return 0;
	const tpc_value *pg = tpc_value_get(inner, "param_groups");
	*pgs = pg;
	if (!is_seq(pg) || !pg->n) {
		ret = tpc_err_at(e, TPC_EINPUT, path, NULL, "optimizer.optimizer.param_groups is not a list of groups");
		return ret;
	}
	for (size_t g = 0; g < pg->n; g++)
		if (pg->items[g]->kind != TPC_V_DICT) {
			ret = tpc_err_at(e, TPC_EINPUT, path, NULL, "optimizer.optimizer.param_groups[%zu] is not a dict", g);
			return ret;
		}
	return 0;
}

/* What a resume takes besides the state (training/checkpointing.py at
 * d98e8a6: :2856 iteration, :2878 consumed_train_samples, :3005
 * opt_param_scheduler; a set tpconv writes: shard/layout_megatron_train.c) */
static void resume_facts(tpc__mcore_optim *mo, const tpc_value *root)
{
	const tpc_value *it = tpc_value_get(root, "iteration"), *c = ns_field(mo->args, "consumed_train_samples");
	const tpc_value *s = tpc_value_get(root, "opt_param_scheduler"), *lr = tpc_value_get(s, "max_lr");
	mo->iteration = it && it->kind == TPC_V_INT ? it->ival : -1;
	mo->consumed = c && c->kind == TPC_V_INT ? c->ival : -1;
	mo->sched = !s ? 0 : lr && lr->kind != TPC_V_NONE ? 2 : 1;
}

int tpc__mcore_optim_begin(tpc__mcore_optim *mo, const char *iterdir, tpc_err *e)
{
	tpc_ckpt ck;
	char *path = tpc_path_join(iterdir, "common.pt");
	int ret = 0;
	memset(mo, 0, sizeof(*mo));
	tpc_ckpt_init(&ck);
	if (!path)
		return tpc_err_nomem(e);
	if (!tpc_exists(path)) {
		ret = tpc_err_at(e, TPC_EINPUT, iterdir, NULL,
				 "no common.pt, where Megatron keeps the optimizer's param groups and sharding type: the optimizer state cannot be read");
		goto out;
	}
	if ((ret = tpc_ckpt_open(&ck, path, NULL, e)))
		goto out;
	const tpc_value *opt = tpc_value_get(ck.root, "optimizer");
	if (!opt) {
		ret = tpc_err_at(e, TPC_EINPUT, path, NULL, "holds no 'optimizer': the save has no optimizer state (saved with --no-save-optim?)");
		goto out;
	}
	/* a ChainedOptimizer of two (dense, then expert-parallel parameters:
	 * optimizer/__init__.py:1170-1240) saves {0: .., 1: ..}, each a
	 * distributed optimizer's (optimizer.py:1589-1603; no key prefix with
	 * chained_optim_avoid_prefix and a fully reshardable form, :1583-1587) */
	const tpc_value *part[2] = {opt, NULL}, *pgs[2] = {NULL, NULL};
	const char *type = NULL;
	size_t nparts = 1;
	if (!tpc_value_get(opt, "param_state_sharding_type") && opt->kind == TPC_V_DICT && opt->n == 2 &&
	    opt->keys[0]->kind == TPC_V_INT && opt->keys[0]->ival == 0 && opt->keys[1]->kind == TPC_V_INT &&
	    opt->keys[1]->ival == 1) {
		part[0] = opt->items[0];
		part[1] = opt->items[1];
		nparts = 2;
	}
	for (size_t k = 0; k < nparts && !ret; k++) {
		ret = one_optim(part[k], path, &type, &pgs[k], e);
		if (!ret && k && strcmp(type, tpc_value_get(part[0], "param_state_sharding_type")->str))
			ret = tpc_err_at(e, TPC_EINPUT, path, NULL, "a chained optimizer whose two parts are stored in different forms");
	}
	if (ret)
		goto out;
	const tpc_value *pg = pgs[0];
	tpc_value *all = NULL;
	if (nparts == 2 && pg) { /* dp_reshardable: the groups are in the DCP files */
		if (!(all = tpc_value_new(TPC_V_LIST))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		for (size_t k = 0; k < 2 && !ret; k++)
			for (size_t g = 0; g < pgs[k]->n && !ret; g++)
				if (tpc_value_append(all, tpc_value_ref(pgs[k]->items[g])))
					ret = tpc_err_nomem(e);
		if (ret) {
			tpc_value_unref(all);
			goto out;
		}
	}
	mo->dpz = !strcmp(type, "dp_zero_gather_scatter");
	mo->dp = mo->dpz || !strcmp(type, "dp_reshardable");
	mo->ndense = pg ? pg->n : 0;
	mo->chained = nparts == 2;
	if (!(mo->type = tpc_strdup(type))) {
		tpc_value_unref(all);
		ret = tpc_err_nomem(e);
		goto out;
	}
	mo->groups = all ? all : pg ? tpc_value_ref((tpc_value *)pg) : NULL;
	mo->common = path;
	path = NULL;
	mo->args = tpc_value_get(ck.root, "args") ? tpc_value_ref((tpc_value *)tpc_value_get(ck.root, "args")) : NULL;
	resume_facts(mo, ck.root);
	mo->on = true;
out:
	if (ret)
		tpc__mcore_optim_release(mo);
	tpc_ckpt_release(&ck);
	free(path);
	return ret;
}

/* "optimizer.state.KEY.PARAM": KEY's length, or 0 when fqn is no such key */
static size_t state_key(const char *fqn)
{
	static const char *const keys[] = {"exp_avg_sq", "exp_avg", "fp32_param", "param"};
	if (strncmp(fqn, STATE_PREFIX, strlen(STATE_PREFIX)))
		return 0;
	const char *k = fqn + strlen(STATE_PREFIX);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		size_t l = strlen(keys[i]);
		if (!strncmp(k, keys[i], l) && k[l] == '.' && k[l + 1])
			return l;
	}
	return 0;
}

bool tpc__mcore_optim_key(const char *fqn)
{
	if (!strncmp(fqn, "optimizer.", 10))
		return true;
	if (strncmp(fqn, "chained_", 8) || fqn[8] < '0' || fqn[8] > '9')
		return false;
	const char *p = fqn + 8;
	while (*p >= '0' && *p <= '9')
		p++;
	return !strncmp(p, ".optimizer.", 11);
}

int tpc__mcore_optim_keep(const tpc__mcore_optim *mo, const tpc_dcp_entry *en, const char *path, tpc_err *e)
{
	if (!tpc__mcore_optim_key(en->fqn))
		return 1;
	/* a chained optimizer's keys: 'chained_0.' (dense) and 'chained_1.'
	 * (expert-parallel) before the bucket forms' (optimizer.py:1573-1603) */
	if (mo->dp && mo->chained && (!strncmp(en->fqn, "chained_0.optimizer.distributed.dp_group_idx_", 45) ||
				      !strncmp(en->fqn, "chained_1.optimizer.distributed.dp_group_idx_", 45)))
		return 1;
	if (strncmp(en->fqn, "optimizer.", 10))
		return tpc_err_at(e, TPC_EINPUT, path, en->fqn, mo->dp && mo->chained
				  ? "an entry of a chained optimizer tpconv does not know (neither chained_0. nor chained_1.optimizer.distributed.dp_group_idx_G.*): refused rather than dropped"
				  : "a chained optimizer's state under its 'chained_N.' prefix (ChainedOptimizer adds it for the bucket forms, and without chained_optim_avoid_prefix): not read yet");
	if (mo->dp && !mo->chained && !strncmp(en->fqn, "optimizer.distributed.dp_group_idx_", 35))
		return 1;
	if (!mo->dp && state_key(en->fqn) && en->tensor)
		return 1;
	if (mo->dp)
		return tpc_err_at(e, TPC_EINPUT, path, en->fqn,
				  "an optimizer entry tpconv does not know in a %s save (not one of its optimizer.distributed.dp_group_idx_G.* entries): refused rather than dropped",
				  mo->type);
	return tpc_err_at(e, TPC_EINPUT, path, en->fqn,
			  "an optimizer entry tpconv does not know (neither optimizer.state.{exp_avg,exp_avg_sq,param,fp32_param}.KEY tensors): refused rather than dropped");
}

/* The model entry whose key follows "optimizer.state.KEY." in en's, or NULL */
const tpc_dcp_entry *tpc__mcore_optim_param_entry(const tpc_dcp_meta *m, const tpc_dcp_entry *en)
{
	size_t kl = state_key(en->fqn);
	if (!kl)
		return NULL;
	const char *p = en->fqn + strlen(STATE_PREFIX) + kl + 1;
	for (size_t i = 0; i < m->n; i++)
		if (m->e[i].tensor && !strcmp(m->e[i].fqn, p))
			return &m->e[i];
	return NULL;
}

bool tpc__mcore_optim_is_flat(const tpc_dcp_entry *en, const tpc_dcp_entry *pe)
{
	return pe && en->ndim == pe->ndim + 1;
}

/* The pieces of one fragment, each a 1-D view, in order along the flat dim. */
static int frag_pieces(const tpc_dcp_entry *en, const tpc_tensor *piece, const size_t *idx, size_t nlive,
		       const int64_t *f, tpc_tensor **out, int *np, const char *path, tpc_err *e)
{
	int k = en->ndim - 1, n = 0;
	tpc_tensor *v = NULL;
	size_t *sel = tpc_calloc(nlive + 1, sizeof(size_t));
	int ret = sel ? 0 : tpc_err_nomem(e);
	for (size_t j = 0; j < nlive && !ret; j++) {
		const tpc_dcp_chunk *c = &en->c[idx[j]];
		bool here = true;
		for (int d = 0; d < k; d++) {
			if (c->size[d] != 1 && c->off[d] <= f[d] && f[d] < c->off[d] + c->size[d])
				ret = TPC_CORRUPT(e, path, -1, en->fqn,
						  "a chunk spans %lld fragments along dim %d: not Megatron's flattened layout (one fragment per chunk)",
						  (long long)c->size[d], d);
			here = here && c->off[d] == f[d];
		}
		if (here && !ret) {
			/* insertion by flat offset */
			int at = n++;
			while (at > 0 && en->c[sel[at - 1]].off[k] > c->off[k]) {
				sel[at] = sel[at - 1];
				at--;
			}
			sel[at] = idx[j];
		}
	}
	if (!ret && !(v = tpc_calloc((size_t)n + 1, sizeof(*v))))
		ret = tpc_err_nomem(e);
	for (int j = 0; j < n && !ret; j++) {
		if (tpc_tensor_copy(&v[j], &piece[sel[j]])) {
			ret = tpc_err_nomem(e);
			break;
		}
		for (int d = 0; d < k && !ret; d++)
			if (tpc_tensor_unit_dim(&v[j], 0, false))
				ret = TPC_CORRUPT(e, path, -1, en->fqn, "chunk %zu is not a plain view", sel[j]);
		if (!ret && !tpc_tensor_is_contiguous(&v[j]))
			ret = TPC_CORRUPT(e, path, -1, en->fqn, "chunk %zu is not contiguous", sel[j]);
	}
	free(sel);
	if (ret && v) {
		for (int j = 0; j < n; j++)
			tpc_tensor_release(&v[j]);
		free(v);
		v = NULL;
	}
	*out = v;
	*np = n;
	return ret;
}

typedef struct grid {
	const tpc_dcp_entry *en;
	const tpc_tensor *piece;
	const size_t *idx;
	size_t nlive;
	int k;                      /* the parameter's dims */
	int64_t fr[TPC_MAX_NDIM];   /* fragments per dim */
	int64_t loc[TPC_MAX_NDIM];  /* the local shard's shape */
	int64_t f[TPC_MAX_NDIM];    /* the fragment being built */
	const char *path;
} grid;

/* The parameter's block for fragments f[0..d) fixed: the concatenation
 * along d of the blocks of every f[d], down to one fragment's local shard
 * cut from its flat pieces. */
static int build_grid(grid *g, int d, tpc_tensor *out, tpc_err *e)
{
	if (d == g->k) {
		tpc_tensor *v = NULL;
		int np = 0, ret = frag_pieces(g->en, g->piece, g->idx, g->nlive, g->f, &v, &np, g->path, e);
		if (!ret && np == 0 && tpc_tensor_init_zero(out, g->en->dtype, g->k, g->loc))
			ret = tpc_err_nomem(e);
		if (!ret && np == 0)
			out->flags = 0; /* an empty shard: no bytes */
		else if (!ret && tpc_tensor_init_flat(out, g->k, g->loc, v, np))
			ret = TPC_CORRUPT(e, g->path, -1, g->en->fqn, "the chunks of one fragment do not make its %lld elements",
					  (long long)g->en->shape[g->k]);
		for (int j = 0; j < np; j++)
			tpc_tensor_release(&v[j]);
		free(v);
		return ret;
	}
	if (g->fr[d] == 1) {
		g->f[d] = 0;
		return build_grid(g, d + 1, out, e);
	}
	tpc_tensor *parts = tpc_calloc((size_t)g->fr[d], sizeof(*parts));
	int ret = parts ? 0 : tpc_err_nomem(e);
	for (int64_t j = 0; j < g->fr[d] && !ret; j++) {
		g->f[d] = j;
		ret = build_grid(g, d + 1, &parts[j], e);
	}
	if (!parts)
		return ret;
	if (tpc_tensor_cat_release(out, parts, (int)g->fr[d], d, ret) && !ret)
		ret = tpc_err_nomem(e);
	return ret;
}

int tpc__mcore_optim_unflat(const tpc_dcp_entry *en, const tpc_dcp_entry *pe, const tpc_tensor *piece,
			    const size_t *idx, size_t nlive, tpc_tensor *out, const char *path, tpc_err *e)
{
	grid g;
	uint64_t n = 1;
	char want[160];
	memset(&g, 0, sizeof(g));
	g.en = en;
	g.piece = piece;
	g.idx = idx;
	g.nlive = nlive;
	g.k = pe->ndim;
	g.path = path;
	{
		tpc_buf b = TPC_BUF_INIT;
		tpc_buf_addf(&b, "[");
		for (int d = 0; d < pe->ndim; d++)
			tpc_buf_addf(&b, "%s%lld", d ? ", " : "", (long long)pe->shape[d]);
		tpc_buf_addf(&b, "]");
		snprintf(want, sizeof(want), "%s", b.p ? b.p : "?");
		tpc_buf_release(&b);
	}
	for (int d = 0; d < g.k; d++) {
		int64_t fr = en->shape[d];
		if (fr < 1 || pe->shape[d] % fr)
			return tpc_err_at(e, TPC_EINPUT, path, en->fqn,
					  "stored in %lld fragments along dim %d, which do not divide its parameter '%s' %s (Megatron's flattened form: fragments per dim, then the local shard's elements)",
					  (long long)fr, d, pe->fqn, want);
		g.fr[d] = fr;
		g.loc[d] = pe->shape[d] / fr;
		if (tpc_mul_u64(n, (uint64_t)g.loc[d], &n))
			return TPC_CORRUPT(e, path, -1, en->fqn, "size overflows");
	}
	if (n != (uint64_t)en->shape[g.k])
		return tpc_err_at(e, TPC_EINPUT, path, en->fqn,
				  "a local shard of its parameter '%s' %s holds %llu elements, the flattened form stores %lld per fragment",
				  pe->fqn, want, (unsigned long long)n, (long long)en->shape[g.k]);
	return build_grid(&g, 0, out, e);
}

/* ---- Megatron's buffer layout (both bucket readers) ---- */

bool tpc__mcore_arg_int(const tpc_value *args, const char *k, int64_t def, int64_t *v)
{
	const tpc_value *x = ns_field(args, k);
	*v = def;
	if (!x || x->kind == TPC_V_NONE)
		return false;
	if (x->kind == TPC_V_INT || x->kind == TPC_V_BOOL)
		*v = x->ival;
	return true;
}

int tpc__mcore_bucket_size(const tpc_value *args, int64_t pp_rank, int64_t *bucket, const char *path, tpc_err *e)
{
	int64_t overlap, dp, cp;
	tpc__mcore_arg_int(args, "overlap_grad_reduce", 0, &overlap);
	*bucket = 0;
	if (!overlap || pp_rank > 0)
		return 0;
	if (tpc__mcore_arg_int(args, "ddp_bucket_size", 0, bucket))
		return 0;
	if (!tpc__mcore_arg_int(args, "data_parallel_size", 0, &dp) || dp < 1)
		return tpc_err_at(e, TPC_EINPUT, path, NULL,
				  "args has no data_parallel_size, which sets the distributed optimizer's bucket size (--overlap-grad-reduce without --ddp-bucket-size)");
	tpc__mcore_arg_int(args, "context_parallel_size", 1, &cp);
	*bucket = 1000000 * dp * (cp > 0 ? cp : 1);
	if (*bucket < 40000000)
		*bucket = 40000000;
	return 0;
}

static int64_t pad64(int64_t x)
{
	return (x + 63) / 64 * 64;
}

int tpc__mcore_layout(const int64_t *numel, const bool *shared, size_t n, int64_t bucket, const int64_t *want,
		      size_t nwant, int64_t *bk, int64_t *at, int64_t *sizes, size_t *nb, size_t *bad)
{
	int64_t start = 0, bstart = 0, end = 0;
	size_t inb = 0;
	*nb = 0;
	*bad = n;
	sizes[0] = 0;
	for (size_t j = n; j-- > 0;) {
		start = pad64(start);
		if (shared[j] && inb) { /* close the bucket before the shared embedding */
			sizes[(*nb)++] = start - bstart;
			bstart = start; /* a bucket's end is padded to lcm(dp, 128): 64-aligned */
			inb = 0;
		}
		end = start + numel[j];
		if (want && (*nb >= nwant || end - bstart > want[*nb])) {
			sizes[*nb] = end - bstart; /* how far it would reach */
			*bad = j;
			return -1;
		}
		bk[j] = (int64_t)*nb;
		at[j] = start - bstart;
		inb++;
		bool close = want ? end - bstart == want[*nb] : (bucket > 0 && end - bstart >= bucket);
		if (close || shared[j]) {
			sizes[(*nb)++] = end - bstart;
			start = bstart = pad64(end);
			inb = 0;
		} else {
			start = end;
		}
	}
	if (want && (inb || *nb != nwant)) { /* the parameters end first */
		sizes[*nb] = inb ? end - bstart : 0;
		return -1;
	}
	if (inb)
		sizes[(*nb)++] = end - bstart;
	return 0;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Are bits w a NaN of dtype dt (bf16, f16, f32)? */
static bool nan_bits(tpc_dtype dt, uint32_t w)
{
	if (dt == TPC_BF16)
		return (w & 0x7F80) == 0x7F80 && (w & 0x7F);
	if (dt == TPC_F16)
		return (w & 0x7C00) == 0x7C00 && (w & 0x3FF);
	return (w & 0x7F800000u) == 0x7F800000u && (w & 0x7FFFFFu);
}

int tpc__mcore_prove(const tpc_ckpt *ck, const tpc_tensor *master, const tpc_tensor *model, int64_t *at, float *f,
		     uint32_t *want, tpc_err *e)
{
	size_t es = model->dtype == TPC_F32 ? 4 : 2;
	int64_t n = (int64_t)model->numel, run = n <= TPC__MCORE_PROOF_ALL ? n : TPC__MCORE_PROOF_RUN;
	int64_t nruns = n <= TPC__MCORE_PROOF_ALL ? 1 : TPC__MCORE_PROOF_RUNS;
	int ret = 0;
	*at = -1;
	if (master->numel != model->numel || master->dtype != TPC_F32 ||
	    (model->dtype != TPC_BF16 && model->dtype != TPC_F16 && model->dtype != TPC_F32))
		return tpc_err_at(e, TPC_EINPUT, NULL, model->name,
				  "a %s parameter of %llu elements against an %s master of %llu: not a pair the proof compares (bf16, f16 or f32 against f32)",
				  tpc_dtype_name(model->dtype), (unsigned long long)model->numel, tpc_dtype_name(master->dtype),
				  (unsigned long long)master->numel);
	uint8_t *fa = tpc_calloc((size_t)run * 4 + 4, 1), *ma = tpc_calloc((size_t)run * es + 4, 1);
	if (!fa || !ma)
		ret = tpc_err_nomem(e);
	for (int64_t r = 0; r < nruns && !ret && *at < 0; r++) {
		int64_t s = nruns == 1 ? 0 : r * (n - run) / (nruns - 1);
		if ((ret = tpc_ckpt_read_bytes(ck, master, (uint64_t)s * 4, (uint64_t)run * 4, fa, e)) ||
		    (ret = tpc_ckpt_read_bytes(ck, model, (uint64_t)s * es, (uint64_t)run * es, ma, e)))
			break;
		for (int64_t q = 0; q < run; q++) {
			const uint8_t *mb = ma + (size_t)q * es;
			uint32_t u = le32(fa + q * 4), w = es == 4 ? le32(mb) : (uint32_t)(mb[0] | mb[1] << 8), got;
			float x;
			memcpy(&x, &u, 4);
			got = model->dtype == TPC_BF16 ? tpc_f32_to_bf16(x) : model->dtype == TPC_F16 ? tpc_f32_to_f16(x) : u;
			if (got != w && !(x != x && nan_bits(model->dtype, w))) {
				*at = s + q;
				*f = x;
				*want = w;
				break;
			}
		}
	}
	free(fa);
	free(ma);
	return ret;
}

bool tpc__mcore_shared_embedding(const char *name, int64_t untie, int64_t pp)
{
	return !untie && pp > 1 && (!strcmp(name, "embedding.word_embeddings.weight") || !strcmp(name, "output_layer.weight"));
}

int tpc__mcore_coalesced(const int64_t *numel, const bool *shared, size_t n, int64_t bucket, int64_t *pos,
			 int64_t *total, size_t *nb)
{
	int64_t *bk = tpc_calloc(2 * n + 2, sizeof(int64_t)), *sizes = bk ? bk + n + 1 : NULL, off = 0;
	size_t bad;
	if (!bk)
		return -1;
	tpc__mcore_layout(numel, shared, n, bucket, NULL, 0, bk, pos, sizes, nb, &bad);
	for (size_t b = 0; b < *nb; b++) { /* the buckets back to back, each without its end padding */
		int64_t sz = sizes[b];
		sizes[b] = off;
		off += sz;
	}
	for (size_t j = 0; j < n; j++)
		pos[j] += sizes[bk[j]];
	*total = off;
	free(bk);
	return 0;
}

/* ---- the tree get_state_dict saves (tpc_optim.h) ---- */

static bool truthy(const tpc_value *v)
{
	return v && (v->kind == TPC_V_BOOL || v->kind == TPC_V_INT) && v->ival;
}

/* Which group each parameter is in: in each distributed optimizer (one, or
 * a chained optimizer's dense and expert-parallel parts), one group holds
 * its parameters or two, as Megatron's standard override makes them
 * (optimizer/__init__.py:94-128: wd_mult 0 for 1-D parameters and biases,
 * q/k layer norms excepted with apply_wd_to_qk_layernorm) in groups sorted
 * with the default one first (:374); anything else is refused, naming the
 * groups. nowd[part]: the index of the wd_mult-0 group (-1: one group). */
static int part_rule(const tpc__mcore_optim *mo, size_t a, size_t b, bool expert, int *nowd, const char *path, tpc_err *e)
{
	const tpc_value *pg = mo->groups;
	*nowd = -1;
	for (size_t g = a; g < b; g++)
		if (truthy(tpc_value_get(pg->items[g], "is_expert_parallel")) != expert)
			return tpc_err_at(e, TPC_EINPUT, path, NULL,
					  expert ? "param group %zu of the expert-parallel optimizer is not is_expert_parallel"
						 : mo->chained ? "param group %zu of the dense optimizer is is_expert_parallel"
							       : "param group %zu holds expert-parallel parameters without an optimizer of their own (Megatron chains one to the dense one): not read",
					  g);
	if (b - a == 1)
		return 0;
	double w0 = -1, w1 = -1;
	if (b - a == 2 && tpc_value_number(tpc_value_get(pg->items[a], "wd_mult"), &w0) && tpc_value_number(tpc_value_get(pg->items[a + 1], "wd_mult"), &w1) &&
	    (w0 == 0) != (w1 == 0)) {
		*nowd = (int)a + (w0 == 0 ? 0 : 1);
		return 0;
	}
	tpc_buf b2 = TPC_BUF_INIT;
	for (size_t g = a; g < b && g < a + 8; g++) {
		double w;
		if (tpc_value_number(tpc_value_get(pg->items[g], "wd_mult"), &w))
			tpc_buf_addf(&b2, "%s%g", g > a ? ", " : "", w);
		else
			tpc_buf_addf(&b2, "%snone", g > a ? ", " : "");
	}
	int ret = tpc_err_at(e, TPC_EINPUT, path, NULL,
			     "%zu param groups (wd_mult %s)%s: Megatron does not save which parameter is in which (state_dict drops 'params'), and tpconv knows only its standard split, one group with weight decay and one (wd_mult 0) for 1-D parameters and biases",
			     b - a, b2.p ? b2.p : "?", mo->chained ? (expert ? " in the expert-parallel optimizer" : " in the dense optimizer") : "");
	tpc_buf_release(&b2);
	return ret;
}

static int group_rule(const tpc__mcore_optim *mo, int nowd[2], const char *path, tpc_err *e)
{
	size_t n = mo->groups->n, nd = mo->chained ? mo->ndense : n;
	int ret = part_rule(mo, 0, nd, false, &nowd[0], path, e);
	nowd[1] = -1;
	if (!ret && mo->chained)
		ret = part_rule(mo, nd, n, true, &nowd[1], path, e);
	return ret;
}

static bool ends_with(const char *s, const char *t)
{
	size_t a = strlen(s), b = strlen(t);
	return a >= b && !strcmp(s + a - b, t);
}

/* A routed expert's parameter (allreduce False: moe/experts.py), the
 * chained optimizer's expert part: "...mlp.experts.local_experts.E..." as
 * the reader names it (shared experts are mlp.shared_experts) */
bool tpc__mcore_is_expert(const char *name)
{
	return strstr(name, ".mlp.experts.") != NULL;
}

static int group_of(const tpc__mcore_optim *mo, const int nowd[2], const tpc_tensor *p)
{
	int part = mo->chained && tpc__mcore_is_expert(p->name), base = part ? (int)mo->ndense : 0;
	if (nowd[part] < 0)
		return base;
	bool skip = p->ndim == 1 || ends_with(p->name, ".bias");
	if (skip && truthy(ns_field(mo->args, "apply_wd_to_qk_layernorm")) &&
	    (strstr(p->name, "q_layernorm.") || strstr(p->name, "k_layernorm.")))
		skip = false;
	return skip ? nowd[part] : 2 * base + 1 - nowd[part]; /* the part's other group */
}

/* Each group's step (torch's Adam keeps it per group in Megatron's save,
 * distrib_optimizer.py:866-878), as f32 scalars in one owned buffer: tensor
 * "optim.state.NAME.step" of a parameter is a view of its group's. */
static int add_steps(const tpc__mcore_optim *mo, tpc_ckpt *ck, int *src, const char *path, tpc_err *e)
{
	size_t bad = 0;
	int ret = tpc_optim_add_group_steps(ck, mo->groups, src, &bad, e);
	if (ret < 0)
		ret = tpc_err_at(e, TPC_EINPUT, path, NULL,
				 "param group %zu has no step (an integer, as Megatron saves torch's Adam's): the moments cannot be resumed without it",
				 bad);
	return ret;
}

/* Parameter pi's state tensors into sd (a dict), checked against it. */
static int param_state(tpc__mcore_optim *mo, tpc_ckpt *ck, int64_t pi, tpc_value *sd, const char *path, tpc_err *e)
{
	static const char *const keys[] = {"exp_avg", "exp_avg_sq", "fp32_param", "param"};
	const tpc_tensor *p = &ck->t[pi];
	char nb[1024], a[160], b[160];
	bool master = false;
	for (size_t k = 0; k < 4; k++) {
		snprintf(nb, sizeof(nb), STATE_PREFIX "%s.%s", keys[k], p->name);
		int64_t ix = tpc_ckpt_find(ck, nb);
		if (ix < 0)
			continue;
		const tpc_tensor *t = &ck->t[ix];
		if (t->ndim != p->ndim || memcmp(t->shape, p->shape, (size_t)p->ndim * sizeof(int64_t)))
			return tpc_err_at(e, TPC_EINPUT, path, nb, "%s is not shaped as its parameter '%s' %s",
					  tpc_shape_str(t, a, sizeof(a)), p->name, tpc_shape_str(p, b, sizeof(b)));
		/* the master: 'param' in fully_reshardable, 'fp32_param' in
		 * fully_sharded_model_space (distrib_optimizer.py:2016); one name */
		const char *as = k >= 2 ? "fp32_param" : keys[k];
		if (k >= 2 && master)
			return tpc_err_at(e, TPC_EINPUT, path, nb, "a second master copy of '%s' (both param and fp32_param)", p->name);
		master = master || k >= 2;
		if (tpc_value_set(sd, tpc_value_str(as, strlen(as)), tpc_value_tensor(ix)))
			return tpc_err_nomem(e);
		mo->nstate++;
	}
	return 0;
}

/* Every optimizer tensor belongs to a parameter of the save. */
static int check_orphans(const tpc_ckpt *ck, size_t n0, const char *path, tpc_err *e)
{
	for (size_t i = 0; i < n0; i++) {
		size_t kl = state_key(ck->t[i].name);
		const char *p = ck->t[i].name + strlen(STATE_PREFIX) + kl + 1;
		if (kl && tpc_ckpt_find(ck, p) < 0)
			return tpc_err_at(e, TPC_EINPUT, path, ck->t[i].name, "its parameter '%s' is not in the save", p);
	}
	return 0;
}

/* The model's tensors become model.NAME, the state's optim.state.NAME.KEY. */
static int rename_all(tpc_ckpt *ck, size_t n0, tpc_err *e)
{
	tpc_buf b = TPC_BUF_INIT;
	int ret = 0;
	for (size_t i = 0; i < n0 && !ret; i++) {
		const char *nm = ck->t[i].name;
		size_t kl = state_key(nm);
		b.len = 0;
		if (kl) {
			const char *key = nm + strlen(STATE_PREFIX);
			bool master = !strncmp(key, "param.", 6) || !strncmp(key, "fp32_param.", 11);
			tpc_buf_addf(&b, "optim.state.%s.%s", key + kl + 1, master ? "fp32_param" : "");
			if (!master)
				tpc_buf_add(&b, key, kl);
		} else {
			tpc_buf_addf(&b, "model.%s", nm);
		}
		ret = b.oom ? tpc_err_nomem(e) : tpc_ckpt_rename(ck, (int64_t)i, b.p, e);
	}
	tpc_buf_release(&b);
	return ret;
}

int tpc__mcore_optim_tree(tpc__mcore_optim *mo, tpc_ckpt *ck, const char *path, tpc_err *e)
{
	const tpc_value *pg = mo->groups;
	size_t n0 = ck->n;
	int nowd[2], src = -1, ret;
	const char *first = NULL;
	size_t per = 0;
	tpc_value *root = tpc_value_new(TPC_V_DICT), *model = tpc_value_new(TPC_V_DICT), *opt = tpc_value_new(TPC_V_DICT);
	tpc_value *state = tpc_value_new(TPC_V_DICT), *groups = tpc_value_new(TPC_V_DICT);
	tpc_value **names = tpc_calloc(pg->n + 1, sizeof(*names));
	if (!root || !model || !opt || !state || !groups || !names) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t g = 0; g < pg->n; g++)
		if (!(names[g] = tpc_value_new(TPC_V_LIST))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
	if ((ret = group_rule(mo, nowd, mo->common, e)) || (ret = check_orphans(ck, n0, path, e)) ||
	    (ret = add_steps(mo, ck, &src, mo->common, e)))
		goto out;
	for (size_t i = 0; i < n0 && !ret; i++) {
		if (state_key(ck->t[i].name))
			continue;
		tpc_value *sd = tpc_value_new(TPC_V_DICT);
		if (!sd) {
			ret = tpc_err_nomem(e);
			break;
		}
		size_t before = mo->nstate;
		if ((ret = param_state(mo, ck, (int64_t)i, sd, path, e)) || mo->nstate == before) {
			tpc_value_unref(sd);
			continue; /* no state: frozen, or not a parameter */
		}
		int g = group_of(mo, nowd, &ck->t[i]);
		char nb[1024];
		const char *nm = ck->t[i].name;
		if (!first)
			first = nm, per = mo->nstate - before;
		if (mo->nstate - before != per) {
			tpc_value_unref(sd);
			ret = tpc_err_at(e, TPC_EINPUT, path, nm,
					 "has %zu optimizer state tensors, '%s' %zu: a parameter without its moments or master cannot resume",
					 mo->nstate - before, first, per);
			break;
		}
		snprintf(nb, sizeof(nb), "optim.state.%s.step", nm);
		int64_t st = tpc_ckpt_add_tensor(ck, nb, TPC_F32, 0, NULL, NULL, src, (uint64_t)g * 4, e);
		if (st < 0) {
			tpc_value_unref(sd);
			ret = (int)st;
			break;
		}
		if (tpc_value_set(sd, tpc_value_str("step", 4), tpc_value_tensor(st)) ||
		    tpc_value_set(state, tpc_value_str(nm, strlen(nm)), sd) ||
		    tpc_value_append(names[g], tpc_value_str(nm, strlen(nm))))
			ret = tpc_err_nomem(e);
		mo->nparams++;
	}
	for (size_t g = 0; g < pg->n && !ret; g++) {
		tpc_value *d = tpc_optim_group_named(pg->items[g], names[g]);
		if (!d || tpc_value_set(groups, tpc_value_int((int64_t)g), d))
			ret = tpc_err_nomem(e);
	}
	/* the model: every other item of the tree, as it was read */
	for (size_t i = 0; !ret && ck->root && ck->root->kind == TPC_V_DICT && i < ck->root->n; i++) {
		const tpc_value *k = ck->root->keys[i];
		if (k->kind == TPC_V_STR && !strncmp(k->str, "optimizer.", 10))
			continue;
		if (tpc_value_set(model, tpc_value_ref(ck->root->keys[i]), tpc_value_ref(ck->root->items[i])))
			ret = tpc_err_nomem(e);
	}
	if (!ret && (tpc_value_set(opt, tpc_value_str("state", 5), tpc_value_ref(state)) ||
		     tpc_value_set(opt, tpc_value_str("param_groups", 12), tpc_value_ref(groups)) ||
		     tpc_value_set(root, tpc_value_str("model", 5), tpc_value_ref(model)) ||
		     tpc_value_set(root, tpc_value_str("optim", 5), tpc_value_ref(opt))))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = rename_all(ck, n0, e);
	if (!ret) {
		tpc_value_unref(ck->root);
		ck->root = root;
		root = NULL;
	}
out:
	for (size_t g = 0; names && g < pg->n; g++)
		tpc_value_unref(names[g]);
	free(names);
	tpc_value_unref(root);
	tpc_value_unref(model);
	tpc_value_unref(opt);
	tpc_value_unref(state);
	tpc_value_unref(groups);
	return ret;
}

void tpc__mcore_optim_about(const tpc__mcore_optim *mo, tpc_buf *b)
{
	tpc_buf_addf(b, "\noptimizer state: Megatron's distributed optimizer (%s): %zu parameters, %zu state tensors beside them (each element its parameter's), %zu param group%s",
		     mo->type, mo->nparams, mo->nstate, mo->groups->n, mo->groups->n == 1 ? "" : "s");
	if (mo->iteration >= 0)
		tpc_buf_addf(b, "\nresume: iteration %lld", (long long)mo->iteration);
	if (mo->iteration >= 0 && mo->consumed >= 0)
		tpc_buf_addf(b, ", consumed_train_samples %lld", (long long)mo->consumed);
	if (mo->iteration >= 0)
		tpc_buf_adds(b, mo->sched == 2   ? ", learning-rate schedule saved"
				: mo->sched == 1 ? ", learning-rate schedule unknown (None: resume with --override-opt_param-scheduler)"
						 : ", no opt_param_scheduler (Megatron's load stops at its KeyError)");
}
