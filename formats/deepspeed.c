/* deepspeed.c - DeepSpeed ZeRO checkpoints; see deepspeed.h. */
#include "deepspeed.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "torch/torch.h"
#include "tpc_buf.h"
#include "tpc_io.h"
#include "tpc_util.h"

#define TMP_PREFIX "\x01" "zero/"
#define LATEST "latest"
#define MODEL_SUFFIX "_model_states.pt"
#define OPTIM_SUFFIX "_optim_states.pt"
#define MAX_DIM ((int64_t)1 << 48)
#define MAX_WORLD 65536

typedef struct zfile {
	const char *path; /* for messages */
	int src;
	tpc_value *root;
} zfile;

typedef struct zero {
	tpc_ckpt *ck;
	zfile *ms, *os;
	size_t nms, nos;
	int stage;
	int64_t ws;
	size_t nbuf, nfrozen, ntrain, nshared, ngroups;
	const char *moment;   /* assembling this Adam state ("exp_avg") instead of the fp32 masters, or NULL */
	size_t nmoments;
} zero;

/* ---- the pickled objects ---- */


static bool is_seq(const tpc_value *v)
{
	return v && (v->kind == TPC_V_LIST || v->kind == TPC_V_TUPLE);
}

/* An int, or an IntEnum member as pickled: ZeroStageEnum(2) is a CALL of
 * the class with (2,). */
static bool as_int(const tpc_value *v, int64_t *out)
{
	if (v && (v->kind == TPC_V_INT || v->kind == TPC_V_BOOL)) {
		*out = v->ival;
		return true;
	}
	if (v && v->kind == TPC_V_CALL && v->n >= 2 && v->items[0]->kind == TPC_V_GLOBAL &&
	    v->items[1]->kind == TPC_V_TUPLE && v->items[1]->n == 1 && v->items[1]->items[0]->kind == TPC_V_INT) {
		*out = v->items[1]->items[0]->ival;
		return true;
	}
	/* Python >= 3.11: getattr(ZeroStageEnum, 'gradients'), by member name
	 * (deepspeed/runtime/zero/config.py ZeroStageEnum) */
	static const char *const stages[] = {"disabled", "optimizer_states", "gradients", "weights"};
	if (v && v->kind == TPC_V_CALL && v->n == 2 && v->items[0]->kind == TPC_V_GLOBAL &&
	    !strcmp(v->items[0]->str, "builtins.getattr") && v->items[1]->kind == TPC_V_TUPLE && v->items[1]->n == 2 &&
	    v->items[1]->items[0]->kind == TPC_V_GLOBAL && tpc_ends_with(v->items[1]->items[0]->str, ".ZeroStageEnum") &&
	    v->items[1]->items[1]->kind == TPC_V_STR) {
		for (int64_t i = 0; i < 4; i++)
			if (!strcmp(v->items[1]->items[1]->str, stages[i])) {
				*out = i;
				return true;
			}
	}
	return false;
}

static const tpc_tensor *tensor_of(const zero *z, const tpc_value *v)
{
	if (!v || v->kind != TPC_V_TENSOR || v->ival < 0 || (size_t)v->ival >= z->ck->n)
		return NULL;
	return &z->ck->t[v->ival];
}

static const tpc_value *osd(const zfile *f)
{
	return tpc_value_get(f->root, "optimizer_state_dict");
}

/* ---- assembling one tensor ---- */

typedef struct pieces {
	tpc_tensor *v;
	size_t n, cap;
} pieces;

static void pieces_clear(pieces *p)
{
	for (size_t i = 0; i < p->n; i++)
		tpc_tensor_release(&p->v[i]);
	p->n = 0;
}

/* Append elements [a, b) of the 1-D tensor t. */
static int pieces_add(pieces *p, const tpc_tensor *t, int64_t a, int64_t b)
{
	if (b <= a)
		return 0;
	if (tpc_grow((void **)&p->v, &p->cap, p->n + 1, sizeof(*p->v)) || tpc_tensor_narrow(&p->v[p->n], t, 0, a, b - a))
		return -1;
	p->n++;
	return 0;
}

/* Elements [a, b) of a flat buffer that is ck's 1-D tensors ix[0..n) end
 * to end (ranks' partitions, or one rank's groups). Indices, not pointers:
 * adding tensors moves ck->t. */
static int pieces_range(pieces *p, const tpc_ckpt *ck, const int64_t *ix, size_t n, int64_t a, int64_t b)
{
	int64_t pos = 0;
	for (size_t i = 0; i < n && pos < b; i++) {
		const tpc_tensor *t = &ck->t[ix[i]];
		int64_t len = t->shape[0], lo = a > pos ? a : pos, hi = b < pos + len ? b : pos + len;
		if (hi > lo && pieces_add(p, t, lo - pos, hi - pos))
			return -1;
		pos += len;
	}
	return 0;
}

static int add_assembled(zero *z, const char *name, int nd, const int64_t *shape, pieces *p, const char *path,
			 tpc_err *e)
{
	tpc_tensor t;
	int ret = 0;
	if (tpc_tensor_init_flat(&t, nd, shape, p->v, (int)p->n)) {
		pieces_clear(p);
		return TPC_CORRUPT(e, path, -1, name, "its pieces in the partitions do not add up to its shape (or differ in dtype)");
	}
	int64_t ix = tpc_ckpt_add_copy(z->ck, name, &t, e);
	if (ix < 0)
		ret = (int)ix;
	tpc_tensor_release(&t);
	pieces_clear(p);
	return ret;
}

static bool numel_of(const int64_t *shape, int nd, int64_t *out)
{
	uint64_t n = 1;
	for (int d = 0; d < nd; d++)
		if (tpc_mul_u64(n, (uint64_t)shape[d], &n) || n > (uint64_t)MAX_DIM)
			return false;
	*out = (int64_t)n;
	return true;
}

/* The 1-D tensors of a list in an optim file, checked. */
static int flat_list(zero *z, const zfile *f, const tpc_value *lst, const char *key, int64_t **out, size_t *n,
		     tpc_err *e)
{
	*out = NULL;
	*n = 0;
	if (!is_seq(lst))
		return TPC_CORRUPT(e, f->path, -1, NULL, "optimizer_state_dict.%s is not a list of tensors", key);
	int64_t *v = tpc_calloc(lst->n + 1, sizeof(*v));
	if (!v)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < lst->n; i++) {
		const tpc_tensor *t = tensor_of(z, lst->items[i]);
		if (!t || t->ndim != 1 || t->nparts || (t->numel > 1 && t->stride[0] != 1) || (t->flags & TPC_TF_NODATA)) {
			free(v);
			return TPC_CORRUPT(e, f->path, -1, NULL, "optimizer_state_dict.%s[%zu] is not a flat (1-D, contiguous) tensor",
					   key, i);
		}
		v[i] = lst->items[i]->ival;
	}
	*out = v;
	*n = lst->n;
	return 0;
}

/* The optimizer's own state dict in an optim file: stage 1/2
 * base_optimizer_state, stage 3 optimizer_state_dict (DeepSpeed's
 * stage_1_and_2.py state_dict, stage3.py _rigid_state_dict): state keyed by
 * the flat group's number, each of Adam's tensors a partition shaped as the
 * fp32 one. */
static const tpc_value *base_osd(const zero *z, const zfile *f)
{
	return tpc_value_get(osd(f), z->stage == 3 ? "optimizer_state_dict" : "base_optimizer_state");
}

static const tpc_value *group_state(const tpc_value *bo, size_t gi)
{
	const tpc_value *st = tpc_value_get(bo, "state");
	for (size_t i = 0; st && st->kind == TPC_V_DICT && i < st->n; i++)
		if (st->keys[i]->kind == TPC_V_INT && st->keys[i]->ival == (int64_t)gi)
			return st->items[i];
	return NULL;
}

/* The flat partitions a rank holds: the fp32 masters (key), or with
 * z->moment that Adam state of each of them, as a list like the masters'. */
static int rank_flats(zero *z, const zfile *f, const char *key, int64_t **out, size_t *n, tpc_err *e)
{
	const tpc_value *masters = tpc_value_get(osd(f), key);
	if (!z->moment)
		return flat_list(z, f, masters, key, out, n, e);
	tpc_value *lst = tpc_value_new(TPC_V_LIST);
	const tpc_value *bo = base_osd(z, f);
	char what[96];
	int ret = 0;
	if (!lst)
		return tpc_err_nomem(e);
	for (size_t gi = 0; is_seq(masters) && gi < masters->n && !ret; gi++) {
		tpc_value *t = (tpc_value *)tpc_value_get(group_state(bo, gi), z->moment);
		if (!t)
			ret = tpc_err_at(e, TPC_EINPUT, f->path, NULL, "the optimizer state of flat group %zu has no %s", gi, z->moment);
		else if (tpc_value_append(lst, tpc_value_ref(t)))
			ret = tpc_err_nomem(e);
	}
	snprintf(what, sizeof(what), "%s.state[*].%s", z->stage == 3 ? "optimizer_state_dict" : "base_optimizer_state", z->moment);
	if (!ret)
		ret = flat_list(z, f, lst, what, out, n, e);
	tpc_value_unref(lst);
	return ret;
}

/* What an assembled tensor is called: the parameter, or its Adam state
 * under get_state_dict's name (optim.state.NAME.KEY). */
static const char *out_name(const zero *z, const char *name, char *buf, size_t n)
{
	if (!z->moment)
		return name;
	snprintf(buf, n, "optim.state.%s.%s", name, z->moment);
	return buf;
}

/* A trained parameter (or, under TPC_OPEN_OPTIMIZER, one of its moments)
 * assembled from the optimizer states' pieces p, counted */
static int add_param(zero *z, const char *name, int nd, const int64_t *shape, pieces *p, tpc_err *e)
{
	char nb[1024];
	if (z->moment)
		z->nmoments++;
	else
		z->ntrain++;
	return add_assembled(z, out_name(z, name, nb, sizeof(nb)), nd, shape, p, z->os[0].path, e);
}

/* (name, shape) of entry i of a param_shapes dict. */
static int shape_entry(const zfile *f, const tpc_value *d, size_t i, const char **name, int64_t *shape, int *nd,
		       int64_t *numel, tpc_err *e)
{
	const tpc_value *k = d->keys[i];
	if (k->kind != TPC_V_STR || !k->len)
		return TPC_CORRUPT(e, f->path, -1, NULL, "param_shapes: entry %zu is not named by a string", i);
	*name = k->str;
	if (!tpc__torch_size(d->items[i], shape, nd, MAX_DIM) || !numel_of(shape, *nd, numel))
		return TPC_CORRUPT(e, f->path, -1, k->str, "param_shapes: the shape is not a torch.Size");
	return 0;
}

/* ---- the three kinds of model state ---- */

static bool is_buffer(const tpc_value *names, const char *k)
{
	for (size_t i = 0; is_seq(names) && i < names->n; i++)
		if (names->items[i]->kind == TPC_V_STR && !strcmp(names->items[i]->str, k))
			return true;
	return false;
}

/* zero_to_fp32 returns buffers as v.float(). Buffers are small (rotary
 * frequencies, masks): the f32 copy is made here, in memory the checkpoint
 * owns, so every consumer (verify too) sees a plain f32 tensor. */
static int buffer_as_f32(tpc_ckpt *ck, int64_t ix, const char *path, tpc_err *e)
{
	tpc_tensor *o = &ck->t[ix];
	uint64_t n = o->numel * 4;
	uint8_t *mem = tpc_malloc(n ? (size_t)n : 1);
	int src, ret;
	if (!mem)
		return tpc_err_nomem(e);
	o->dtype = TPC_F32;
	o->nbytes = n;
	if ((ret = tpc_ckpt_read_out(ck, o, 0, n, mem, e))) {
		free(mem);
		tpc_err_path(e, path);
		return ret;
	}
	if ((ret = tpc_ckpt_add_mem(ck, o->name, mem, n, &src, e)))
		return ret;
	o = &ck->t[ix];
	o->src_dtype = TPC_F32;
	o->src = src;
	o->offset = 0;
	o->flags &= ~(uint32_t)TPC_TF_BYTESWAP;
	tpc_tensor_set_contiguous(o);
	return 0;
}

static int add_buffers(zero *z, tpc_err *e)
{
	int ret;
	const zfile *m = &z->ms[0];
	const tpc_value *mod = tpc_value_get(m->root, "module"), *names = tpc_value_get(m->root, "buffer_names");
	if (!names || (!is_seq(names) && names->kind != TPC_V_SET))
		return TPC_CORRUPT(e, m->path, -1, NULL, "buffer_names is not a list");
	for (size_t i = 0; mod && mod->kind == TPC_V_DICT && i < mod->n; i++) {
		const tpc_value *k = mod->keys[i];
		const tpc_tensor *t = tensor_of(z, mod->items[i]);
		if (k->kind != TPC_V_STR || !t || !is_buffer(names, k->str))
			continue;
		int64_t ix = tpc_ckpt_add_copy(z->ck, k->str, t, e);
		if (ix < 0)
			return (int)ix;
		tpc_tensor *o = &z->ck->t[ix];
		o->storage = -1;
		o->storage_offset = 0;
		if ((tpc_dtype_get(o->src_dtype)->flags & TPC_DTF_FLOAT) && o->dtype != TPC_F32 &&
		    (ret = buffer_as_f32(z->ck, ix, m->path, e)))
			return ret;
		z->nbuf++;
	}
	return 0;
}

/* Model-states member `key` of m: 0 with *v NULL when absent or None, 0
 * with the dict, or an error when it is something else. */
static int opt_dict(const zfile *m, const char *key, const tpc_value **v, tpc_err *e)
{
	*v = tpc_value_get(m->root, key);
	if (*v && (*v)->kind == TPC_V_NONE)
		*v = NULL;
	if (*v && (*v)->kind != TPC_V_DICT)
		return TPC_CORRUPT(e, m->path, -1, NULL, "%s is not a dict", key);
	return 0;
}

static int add_frozen(zero *z, pieces *p, tpc_err *e)
{
	const zfile *m0 = &z->ms[0];
	const tpc_value *shapes;
	int ret = opt_dict(m0, "frozen_param_shapes", &shapes, e);
	if (ret || !shapes)
		return ret;
	if (z->stage == 3 && z->nms != (size_t)z->ws && shapes->n)
		return TPC_CORRUPT(e, m0->path, -1, NULL,
				   "stage 3 keeps frozen parameters in every rank's model states: %zu model-states files for %lld ranks",
				   z->nms, (long long)z->ws);
	for (size_t i = 0; i < shapes->n; i++) {
		const char *name;
		int64_t shape[TPC_MAX_NDIM], numel;
		int nd;
		if ((ret = shape_entry(m0, shapes, i, &name, shape, &nd, &numel, e)))
			return ret;
		size_t nr = z->stage == 3 ? z->nms : 1;
		int64_t need = numel;
		for (size_t r = 0; r < nr; r++) {
			const zfile *m = &z->ms[r];
			const tpc_tensor *t = tensor_of(z, tpc_value_get(tpc_value_get(m->root, "frozen_param_fragments"), name));
			if (!t)
				return TPC_CORRUPT(e, m->path, -1, name, "frozen_param_fragments has no tensor for this frozen parameter");
			if (z->stage != 3) {
				/* stage <= 2: the whole tensor, as it is */
				if ((int64_t)t->numel != numel)
					return TPC_CORRUPT(e, m->path, -1, name,
							   "frozen fragment holds %llu elements, frozen_param_shapes says %lld",
							   (unsigned long long)t->numel, (long long)numel);
				int64_t ix = tpc_ckpt_add_copy(z->ck, name, t, e);
				if (ix < 0)
					return (int)ix;
				z->ck->t[ix].storage = -1;
				z->ck->t[ix].storage_offset = 0;
				need = 0;
				break;
			}
			if (t->ndim != 1 || (t->numel > 1 && t->stride[0] != 1) || t->nparts)
				return TPC_CORRUPT(e, m->path, -1, name, "stage 3 frozen fragment is not a flat tensor");
			int64_t take = (int64_t)t->numel < need ? (int64_t)t->numel : need;
			if (pieces_add(p, t, 0, take))
				return tpc_err_nomem(e);
			need -= take;
		}
		if (need > 0)
			return TPC_CORRUPT(e, m0->path, -1, name, "the ranks' frozen fragments hold %lld elements too few",
					   (long long)need);
		if (z->stage == 3 && (ret = add_assembled(z, name, nd, shape, p, m0->path, e)))
			return ret;
		z->nfrozen++;
	}
	return 0;
}

static int64_t align_up(int64_t x, int64_t a)
{
	return (x + a - 1) / a * a;
}

/* Stage 1 and 2: zero_to_fp32 _zero2_merge_trainable_params. */
static int add_trainable_z2(zero *z, const tpc_value *shapes, pieces *p, tpc_err *e)
{
	int64_t **g = tpc_calloc((size_t)z->ws, sizeof(*g));
	size_t ng = 0;
	int ret = 0;
	if (!g)
		return tpc_err_nomem(e);
	for (int64_t r = 0; r < z->ws && !ret; r++) {
		const zfile *f = &z->os[r];
		size_t n;
		ret = rank_flats(z, f, "single_partition_of_fp32_groups", &g[r], &n, e);
		if (!ret && r == 0)
			ng = n;
		else if (!ret && n != ng)
			ret = TPC_CORRUPT(e, f->path, -1, NULL, "%zu parameter groups, rank 0 has %zu", n, ng);
	}
	if (!ret && ng != shapes->n)
		ret = TPC_CORRUPT(e, z->ms[0].path, -1, NULL,
				  "param_shapes lists %zu parameter groups, the optimizer partitions hold %zu", shapes->n, ng);
	int64_t *col = ret ? NULL : tpc_calloc((size_t)z->ws, sizeof(*col));
	if (!ret && !col)
		ret = tpc_err_nomem(e);
	for (size_t gi = 0; gi < ng && !ret; gi++) {
		const tpc_value *d = shapes->items[gi];
		int64_t avail = 0, off = 0;
		for (int64_t r = 0; r < z->ws; r++) {
			const tpc_tensor *t = &z->ck->t[col[r] = g[r][gi]], *t0 = &z->ck->t[col[0]];
			if (t->dtype != t0->dtype)
				ret = TPC_CORRUPT(e, z->os[r].path, -1, NULL, "group %zu's partition is %s, rank 0's is %s", gi,
						  tpc_dtype_name(t->dtype), tpc_dtype_name(t0->dtype));
			avail += t->shape[0];
		}
		if (!ret && d->kind != TPC_V_DICT)
			ret = TPC_CORRUPT(e, z->ms[0].path, -1, NULL, "param_shapes[%zu] is not a dict", gi);
		for (size_t i = 0; !ret && i < d->n; i++) {
			const char *name;
			int64_t shape[TPC_MAX_NDIM], numel;
			int nd;
			if ((ret = shape_entry(&z->ms[0], d, i, &name, shape, &nd, &numel, e)))
				break;
			if (numel > avail - off) {
				ret = TPC_CORRUPT(e, z->os[0].path, -1, name,
						  "parameter group %zu: needs elements [%lld, %lld) of the group, its partitions hold %lld",
						  gi, (long long)off, (long long)(off + numel), (long long)avail);
				break;
			}
			if (pieces_range(p, z->ck, col, (size_t)z->ws, off, off + numel))
				ret = tpc_err_nomem(e);
			else
				ret = add_param(z, name, nd, shape, p, e);
			off += numel;
		}
		/* zero_to_fp32's sanity check: both ends aligned to 2 * world size */
		int64_t al = 2 * z->ws;
		if (!ret && align_up(off, al) != align_up(avail, al))
			ret = TPC_CORRUPT(e, z->os[0].path, -1, NULL,
					  "parameter group %zu: the parameters take %lld elements, the partitions hold %lld (rounded up to 2 x world size = %lld: %lld and %lld): these model states do not belong to these optimizer files",
					  gi, (long long)off, (long long)avail, (long long)al, (long long)align_up(off, al),
					  (long long)align_up(avail, al));
	}
	z->ngroups = ng;
	for (int64_t r = 0; r < z->ws; r++)
		free(g[r]);
	free(g);
	free(col);
	return ret;
}

/* Stage 3: zero_to_fp32 _zero3_merge_trainable_params (GatheredTensor). */
static int add_trainable_z3(zero *z, const tpc_value *shapes, pieces *p, tpc_err *e)
{
	int64_t **g = tpc_calloc((size_t)z->ws, sizeof(*g));
	size_t *ng = tpc_calloc((size_t)z->ws, sizeof(size_t));
	int64_t total = 0, off = 0;
	int ret = 0;
	if (!g || !ng) {
		free(g);
		free(ng);
		return tpc_err_nomem(e);
	}
	for (int64_t r = 0; r < z->ws && !ret; r++) {
		const zfile *f = &z->os[r];
		int64_t sum = 0;
		if ((ret = rank_flats(z, f, "fp32_flat_groups", &g[r], &ng[r], e)))
			break;
		for (size_t i = 0; i < ng[r]; i++) {
			const tpc_tensor *t = &z->ck->t[g[r][i]], *t0 = &z->ck->t[g[0][0]];
			sum += t->shape[0];
			if (t->dtype != t0->dtype)
				ret = TPC_CORRUPT(e, f->path, -1, NULL, "fp32_flat_groups[%zu] is %s, rank 0's are %s", i,
						  tpc_dtype_name(t->dtype), tpc_dtype_name(t0->dtype));
		}
		if (!ret && r == 0)
			total = sum;
		else if (!ret && sum != total)
			ret = TPC_CORRUPT(e, f->path, -1, NULL, "this rank's flat groups hold %lld elements, rank 0's %lld",
					  (long long)sum, (long long)total);
	}
	if (!ret && !ng[0] && shapes->n)
		ret = TPC_CORRUPT(e, z->os[0].path, -1, NULL, "fp32_flat_groups is empty");
	/* the groups' dicts in order, as one (zero_to_fp32 merges them) */
	for (size_t gi = 0; gi < shapes->n && !ret; gi++) {
		const tpc_value *d = shapes->items[gi];
		if (d->kind != TPC_V_DICT) {
			ret = TPC_CORRUPT(e, z->ms[0].path, -1, NULL, "param_shapes[%zu] is not a dict", gi);
			break;
		}
		for (size_t i = 0; i < d->n && !ret; i++) {
			const char *name;
			int64_t shape[TPC_MAX_NDIM], numel;
			int nd;
			if ((ret = shape_entry(&z->ms[0], d, i, &name, shape, &nd, &numel, e)))
				break;
			int64_t pn = (numel + z->ws - 1) / z->ws, need = numel;
			if (pn > total - off) {
				ret = TPC_CORRUPT(e, z->os[0].path, -1, name,
						  "needs elements [%lld, %lld) of every rank's flat groups, which hold %lld", (long long)off,
						  (long long)(off + pn), (long long)total);
				break;
			}
			for (int64_t r = 0; r < z->ws && need > 0 && !ret; r++) {
				int64_t take = pn < need ? pn : need;
				if (pieces_range(p, z->ck, g[r], ng[r], off, off + take))
					ret = tpc_err_nomem(e);
				need -= take;
			}
			if (!ret)
				ret = add_param(z, name, nd, shape, p, e);
			off += pn;
		}
	}
	if (!ret && off != total)
		ret = TPC_CORRUPT(e, z->os[0].path, -1, NULL,
				  "the parameters take %lld elements of each rank's flat groups, which hold %lld: these model states do not belong to these optimizer files",
				  (long long)off, (long long)total);
	z->ngroups = ng[0];
	for (int64_t r = 0; r < z->ws; r++)
		free(g[r]);
	free(g);
	free(ng);
	return ret;
}

static int add_shared(zero *z, tpc_err *e)
{
	const zfile *m = &z->ms[0];
	const tpc_value *sh;
	int ret = opt_dict(m, "shared_params", &sh, e);
	if (ret || !sh)
		return ret;
	for (size_t i = 0; i < sh->n; i++) {
		const tpc_value *k = sh->keys[i], *v = sh->items[i];
		if (k->kind != TPC_V_STR || v->kind != TPC_V_STR)
			return TPC_CORRUPT(e, m->path, -1, NULL, "shared_params: entry %zu is not alias -> name", i);
		int64_t s = tpc_ckpt_find(z->ck, v->str), a = tpc_ckpt_find(z->ck, k->str);
		if (s < 0)
			continue; /* zero_to_fp32: only when the source is there */
		if (a >= 0) {
			/* state_dict[alias] = state_dict[source]: the alias keeps its place */
			tpc_tensor cp;
			if (tpc_tensor_copy(&cp, &z->ck->t[s]))
				return tpc_err_nomem(e);
			cp.name = z->ck->t[a].name;
			tpc_tensor_release(&z->ck->t[a]);
			z->ck->t[a] = cp;
		} else if ((a = tpc_ckpt_add_copy(z->ck, k->str, &z->ck->t[s], e)) < 0) {
			return (int)a;
		}
		/* the same tensor object in zero_to_fp32's state dict: one storage
		 * when torch.save writes it (tpc_ckpt_ties) */
		z->ck->t[a].alias_of = s;
		z->nshared++;
	}
	return 0;
}

/* ---- the optimizer state (TPC_OPEN_OPTIMIZER) ----
 * Adam's exp_avg and exp_avg_sq lie in each flat group's partitions exactly
 * as the fp32 masters do (the base optimizer steps the flat partition), so
 * each parameter's moments are cut from the same elements its master is;
 * step is one per flat group. The groups are the base optimizer's
 * param_groups, whose params number the flat groups (stage 1/2: one per
 * group; stage 3: its sub-groups), each flat group's parameters those
 * param_shapes lists for it. Given as get_state_dict shapes it (tpc_optim.h). */

/* Each of the optimizer's groups, call fn with the parameter names of its
 * flat groups in order. */
typedef int (*group_fn)(zero *z, const tpc_value *g, size_t gi, const tpc_value *flat_state, const char *name,
			void *ctx, tpc_err *e);

static int each_param(zero *z, const tpc_value *shapes, group_fn fn, void *ctx, tpc_err *e)
{
	const zfile *f = &z->os[0];
	const tpc_value *bo = base_osd(z, f), *pg = tpc_value_get(bo, "param_groups");
	if (!is_seq(pg))
		return tpc_err_at(e, TPC_EINPUT, f->path, NULL, "the optimizer state has no param_groups list");
	for (size_t gi = 0; gi < pg->n; gi++) {
		const tpc_value *g = pg->items[gi], *params = tpc_value_get(g, "params");
		if (!is_seq(params))
			return tpc_err_at(e, TPC_EINPUT, f->path, NULL, "param_groups[%zu] has no params list", gi);
		int ret = fn(z, g, gi, NULL, NULL, ctx, e);
		for (size_t j = 0; j < params->n && !ret; j++) {
			int64_t fg;
			if (!as_int(params->items[j], &fg) || fg < 0 || (size_t)fg >= shapes->n)
				return tpc_err_at(e, TPC_EINPUT, f->path, NULL, "param_groups[%zu].params[%zu] is not a flat group's number",
						  gi, j);
			const tpc_value *d = shapes->items[fg], *fs = group_state(bo, (size_t)fg);
			for (size_t i = 0; d->kind == TPC_V_DICT && i < d->n && !ret; i++)
				ret = d->keys[i]->kind == TPC_V_STR ? fn(z, g, gi, fs, d->keys[i]->str, ctx, e) : 0;
		}
		if (ret)
			return ret;
	}
	return 0;
}

/* step: one tensor per parameter (a description of its flat group's) */
static int add_step(zero *z, const tpc_value *g, size_t gi, const tpc_value *fs, const char *name, void *ctx, tpc_err *e)
{
	char nb[1024];
	const tpc_tensor *t = tensor_of(z, tpc_value_get(fs, "step"));
	(void)g;
	(void)gi;
	(void)ctx;
	if (!name || !t)
		return 0; /* a group's start; a step that is a number stays a value */
	snprintf(nb, sizeof(nb), "optim.state.%s.step", name);
	int64_t ix = tpc_ckpt_add_copy(z->ck, nb, t, e);
	return ix < 0 ? (int)ix : 0;
}

typedef struct otree {
	tpc_value *state, *groups, *names; /* names: the current group's params */
} otree;

static int tree_param(zero *z, const tpc_value *g, size_t gi, const tpc_value *fs, const char *name, void *ctx, tpc_err *e)
{
	otree *o = ctx;
	static const char *const keys[] = {"exp_avg", "exp_avg_sq", "step"};
	(void)gi;
	if (!name) { /* a new group: its hyper-parameters, params filled below */
		tpc_value *d = tpc_value_new(TPC_V_DICT);
		o->names = tpc_value_new(TPC_V_LIST);
		int bad = !d || !o->names;
		for (size_t k = 0; !bad && k < g->n; k++)
			if (!(g->keys[k]->kind == TPC_V_STR && !strcmp(g->keys[k]->str, "params")))
				bad = tpc_value_set(d, tpc_value_ref(g->keys[k]), tpc_value_ref(g->items[k]));
		bad = bad || tpc_value_set(d, tpc_value_str("params", 6), o->names);
		/* keyed 0, 1, ...: DCP walks the groups as torch 2.x's flatten does
		 * (optim.param_groups.0.lr ...), as its reader gives them back */
		bad = bad || tpc_value_set(o->groups, tpc_value_int((int64_t)gi), d);
		return bad ? tpc_err_nomem(e) : 0;
	}
	tpc_value *sd = tpc_value_new(TPC_V_DICT);
	int bad = !sd || tpc_value_set(o->state, tpc_value_str(name, strlen(name)), sd) ||
		  tpc_value_append(o->names, tpc_value_str(name, strlen(name)));
	for (size_t k = 0; k < 3 && !bad; k++) {
		char nb[1024];
		snprintf(nb, sizeof(nb), "optim.state.%s.%s", name, keys[k]);
		int64_t ix = tpc_ckpt_find(z->ck, nb);
		const tpc_value *v = tpc_value_get(fs, keys[k]);
		if (ix >= 0)
			bad = tpc_value_set(sd, tpc_value_str(keys[k], strlen(keys[k])), tpc_value_tensor(ix));
		else if (v && v->kind != TPC_V_TENSOR)
			bad = tpc_value_set(sd, tpc_value_str(keys[k], strlen(keys[k])), tpc_value_ref((tpc_value *)v));
	}
	return bad ? tpc_err_nomem(e) : 0;
}

/* The moments and steps, as tensors (before the files' tensors go). */
static int add_optim_tensors(zero *z, const tpc_value *shapes, pieces *p, tpc_err *e)
{
	static const char *const moments[] = {"exp_avg", "exp_avg_sq"};
	int ret = 0;
	for (int k = 0; k < 2 && !ret; k++) {
		z->moment = moments[k];
		ret = z->stage == 3 ? add_trainable_z3(z, shapes, p, e) : add_trainable_z2(z, shapes, p, e);
		z->moment = NULL;
	}
	return ret ? ret : each_param(z, shapes, add_step, NULL, e);
}

/* The tree get_state_dict saves: {"model": {NAME: tensor}, "optim": ...},
 * the model's tensors renamed model.NAME as DCP flattens them (so a DCP
 * folder written from it is what FSDP2 loads by the same names). */
static int add_optim_tree(zero *z, const tpc_value *shapes, tpc_err *e)
{
	otree o = {tpc_value_new(TPC_V_DICT), tpc_value_new(TPC_V_DICT), NULL};
	tpc_value *root = tpc_value_new(TPC_V_DICT), *opt = tpc_value_new(TPC_V_DICT), *model = tpc_value_new(TPC_V_DICT);
	int ret = !o.state || !o.groups || !root || !opt || !model ? tpc_err_nomem(e) : 0;
	for (size_t i = 0; i < z->ck->n && !ret; i++) {
		char nb[1024];
		const char *nm = z->ck->t[i].name;
		if (!strncmp(nm, "optim.state.", 12))
			continue;
		if (tpc_value_set(model, tpc_value_str(nm, strlen(nm)), tpc_value_tensor((int64_t)i)))
			ret = tpc_err_nomem(e);
		snprintf(nb, sizeof(nb), "model.%s", nm);
		if (!ret)
			ret = tpc_ckpt_rename(z->ck, (int64_t)i, nb, e);
	}
	if (!ret)
		ret = each_param(z, shapes, tree_param, &o, e);
	if (!ret && (tpc_value_set(opt, tpc_value_str("state", 5), tpc_value_ref(o.state)) ||
		     tpc_value_set(opt, tpc_value_str("param_groups", 12), tpc_value_ref(o.groups)) ||
		     tpc_value_set(root, tpc_value_str("model", 5), tpc_value_ref(model)) ||
		     tpc_value_set(root, tpc_value_str("optim", 5), tpc_value_ref(opt))))
		ret = tpc_err_nomem(e);
	if (!ret) {
		tpc_value_unref(z->ck->root);
		z->ck->root = root;
		root = NULL;
	}
	tpc_value_unref(root);
	tpc_value_unref(opt);
	tpc_value_unref(model);
	tpc_value_unref(o.state);
	tpc_value_unref(o.groups);
	return ret;
}

static void ext_unref(void *v)
{
	tpc_value_unref(v);
}

/* ck->ext: what the engine restores from the model states beside the
 * optimizer (deepspeed.h, TPC_ZERO_MODEL_STATES) */
static int keep_model_states(zero *z, tpc_err *e)
{
	static const char *const keys[] = {"lr_scheduler", "data_sampler", "random_ltd",
					   "global_steps", "global_samples", "skipped_steps"};
	if (z->ck->ext)
		return 0;
	tpc_value *d = tpc_value_new(TPC_V_DICT);
	if (!d)
		return tpc_err_nomem(e);
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		tpc_value *v = (tpc_value *)tpc_value_get(z->ms[0].root, keys[k]);
		if (v && tpc_value_set(d, tpc_value_str(keys[k], strlen(keys[k])), tpc_value_ref(v))) {
			tpc_value_unref(d);
			return tpc_err_nomem(e);
		}
	}
	z->ck->ext = d;
	z->ck->ext_tag = TPC_ZERO_MODEL_STATES;
	z->ck->ext_free = ext_unref;
	return 0;
}

/* ---- the whole checkpoint ---- */

static int check_optim(zero *z, tpc_err *e)
{
	const zfile *f = &z->os[0];
	const tpc_value *o = osd(f), *pc;
	int64_t st, ws = -1;
	if (!o || o->kind != TPC_V_DICT)
		return TPC_CORRUPT(e, f->path, -1, NULL, "not a DeepSpeed optim-states file (no optimizer_state_dict)");
	if (!as_int(tpc_value_get(o, "zero_stage"), &st)) {
		return tpc_err_at(e, TPC_EINPUT, f->path, NULL,
			    "optimizer_state_dict has no zero_stage: not a ZeRO checkpoint (the BF16 optimizer without ZeRO and stage 0 keep no fp32 partitions to consolidate)");
	}
	if (st < 1 || st > 3)
		return TPC_CORRUPT(e, f->path, -1, NULL, "unknown ZeRO stage %lld", (long long)st);
	pc = tpc_value_get(o, "partition_count");
	if (is_seq(pc)) {
		/* one per parameter group; expert groups may have their own
		 * data-parallel size, which zero_to_fp32's max() would merge wrongly */
		for (size_t i = 0; i < pc->n; i++) {
			int64_t x;
			if (!as_int(pc->items[i], &x))
				return TPC_CORRUPT(e, f->path, -1, NULL, "partition_count[%zu] is not an int", i);
			if (ws >= 0 && x != ws) {
				return tpc_err_at(e, TPC_EINPUT, f->path, NULL,
					    "parameter groups with different data-parallel sizes (partition_count %lld and %lld: expert-parallel groups): not supported",
					    (long long)ws, (long long)x);
			}
			ws = x;
		}
	} else if (!as_int(pc, &ws)) {
		return TPC_CORRUPT(e, f->path, -1, NULL, "partition_count is missing or not an int");
	}
	if (ws < 1 || ws > MAX_WORLD)
		return TPC_CORRUPT(e, f->path, -1, NULL, "partition_count %lld is out of range", (long long)ws);
	if ((size_t)ws != z->nos)
		return tpc_err_set(e, TPC_EINPUT,
				   "expected %lld *_optim_states.pt files (partition_count), found %zu: an overwritten checkpoint, or one rank did not save",
				   (long long)ws, z->nos);
	for (size_t r = 1; r < z->nos; r++) {
		int64_t s2;
		if (!as_int(tpc_value_get(osd(&z->os[r]), "zero_stage"), &s2) || s2 != st)
			return TPC_CORRUPT(e, z->os[r].path, -1, NULL, "zero_stage differs from rank 0's (%lld)", (long long)st);
	}
	z->stage = (int)st;
	z->ws = ws;
	return 0;
}

static void set_about(zero *z, const char *tag)
{
	tpc_buf b;
	const tpc_value *m0 = z->ms[0].root, *v = tpc_value_get(m0, "ds_version");
	int64_t it;
	tpc_buf_init(&b);
	tpc_buf_addf(&b, "DeepSpeed ZeRO stage %d checkpoint", z->stage);
	if (tag)
		tpc_buf_addf(&b, " %s", tag);
	if (v && v->kind == TPC_V_STR)
		tpc_buf_addf(&b, " (deepspeed %s)", v->str);
	if (as_int(tpc_value_get(m0, "global_steps"), &it))
		tpc_buf_addf(&b, ", iteration %lld", (long long)it);
	tpc_buf_addf(&b, "\ndata-parallel world size %lld: %zu optim-states files, %zu model-states file%s; %zu fp32 parameter group%s",
		     (long long)z->ws, z->nos, z->nms, z->nms == 1 ? "" : "s", z->ngroups, z->ngroups == 1 ? "" : "s");
	tpc_buf_addf(&b, "\nmodel state: %zu trainable parameters consolidated from the fp32 partitions, %zu frozen, %zu buffers, %zu shared aliases",
		     z->ntrain, z->nfrozen, z->nbuf, z->nshared);
	/* what the optimizer state holds, left in the files */
	const tpc_value *o = osd(&z->os[0]), *base = tpc_value_get(o, z->stage == 3 ? "optimizer_state_dict" : "base_optimizer_state");
	const tpc_value *state = tpc_value_get(base, "state");
	if (!state && is_seq(base) && base->n)
		state = tpc_value_get(base->items[0], "state");
	tpc_buf_adds(&b, z->nmoments ? "\noptimizer state (read, each moment cut from its parameter's elements):"
				     : "\noptimizer state (not read):");
	if (state && state->kind == TPC_V_DICT && state->n && state->items[0]->kind == TPC_V_DICT) {
		const tpc_value *s0 = state->items[0];
		for (size_t i = 0; i < s0->n; i++)
			if (s0->keys[i]->kind == TPC_V_STR)
				tpc_buf_addf(&b, "%s %s", i ? "," : "", s0->keys[i]->str);
		tpc_buf_adds(&b, " per partition, the loss scaler");
	} else {
		tpc_buf_adds(&b, " the base optimizer's state and the loss scaler");
	}
	tpc_ckpt_set_about(z->ck, &b);
}

/* Open every file's pickle, consolidate, drop the per-file tensors. */
static int consolidate(tpc_ckpt *ck, zfile *ms, size_t nms, zfile *os, size_t nos, const char *tag, bool optim,
		       tpc_err *e)
{
	zero z;
	pieces p;
	size_t first = ck->n;
	uint64_t hidden = ck->hidden_tensors;
	char *hidden_note = ck->hidden_note;
	int ret = 0;
	memset(&z, 0, sizeof(z));
	memset(&p, 0, sizeof(p));
	z.ck = ck;
	z.ms = ms;
	z.nms = nms;
	z.os = os;
	z.nos = nos;
	ck->hidden_note = NULL;
	for (size_t i = 0; i < nms + nos && !ret; i++) {
		zfile *f = i < nms ? &ms[i] : &os[i - nms];
		char pre[48];
		snprintf(pre, sizeof(pre), TMP_PREFIX "%zu", i);
		const tpc_map *m = tpc_ckpt_source(ck, f->src);
		ret = tpc__torch_open_item(ck, f->src, 0, m ? m->size : 0, f->path, pre, false, &f->root, e);
		if (!ret && (!f->root || f->root->kind != TPC_V_DICT))
			ret = TPC_CORRUPT(e, f->path, -1, NULL, "does not hold a dict (not a DeepSpeed checkpoint file)");
	}
	/* tensors inside DeepSpeed's own objects belong to the optimizer, not the model */
	ck->hidden_tensors = hidden;
	free(ck->hidden_note);
	ck->hidden_note = hidden_note;
	if (ret)
		goto out;
	if (!tpc_value_get(ms[0].root, "buffer_names")) {
		ret = TPC_CORRUPT(e, ms[0].path, -1, NULL, "not a DeepSpeed model-states file (no buffer_names)");
		goto out;
	}
	if ((ret = check_optim(&z, e)))
		goto out;
	const tpc_value *shapes = tpc_value_get(ms[0].root, "param_shapes");
	if (!is_seq(shapes)) {
		ret = TPC_CORRUPT(e, ms[0].path, -1, NULL, "param_shapes is not a list of dicts");
		goto out;
	}
	if ((ret = add_buffers(&z, e)) || (ret = add_frozen(&z, &p, e)) ||
	    (ret = z.stage == 3 ? add_trainable_z3(&z, shapes, &p, e) : add_trainable_z2(&z, shapes, &p, e)) ||
	    (ret = add_shared(&z, e)) || (optim && (ret = add_optim_tensors(&z, shapes, &p, e))))
		goto out;
	if ((ret = tpc_ckpt_drop_prefixed(ck, first, TMP_PREFIX, e)))
		goto out;
	if (optim && ((ret = add_optim_tree(&z, shapes, e)) || (ret = keep_model_states(&z, e))))
		goto out;
	set_about(&z, tag);
	if (!ck->format || strcmp(ck->format, "deepspeed")) {
		char fmt[32];
		snprintf(fmt, sizeof(fmt), "deepspeed-zero%d", z.stage);
		free(ck->format);
		ck->format = tpc_strdup(fmt);
	}
out:
	pieces_clear(&p);
	free(p.v);
	for (size_t i = 0; i < nms; i++)
		tpc_value_unref(ms[i].root);
	for (size_t i = 0; i < nos; i++)
		tpc_value_unref(os[i].root);
	return ret;
}

int tpc_zero_from_buffers(tpc_ckpt *ck, const uint8_t *const *bufs, const uint64_t *lens, size_t nmodel,
			  size_t noptim, const char *label, tpc_err *e)
{
	size_t n = nmodel + noptim;
	zfile *f;
	int ret = 0;
	if (!nmodel || !noptim)
		return tpc_err_set(e, TPC_EINPUT, "a ZeRO checkpoint needs model-states and optim-states files");
	if (!(f = tpc_calloc(n, sizeof(*f))))
		return tpc_err_nomem(e);
	for (size_t i = 0; i < n && !ret; i++) {
		uint8_t *copy = tpc_malloc(lens[i] ? (size_t)lens[i] : 1);
		if (!copy) {
			ret = tpc_err_nomem(e);
			break;
		}
		if (lens[i])
			memcpy(copy, bufs[i], (size_t)lens[i]);
		f[i].path = label;
		ret = tpc_ckpt_add_mem(ck, label, copy, lens[i], &f[i].src, e);
	}
	if (!ret)
		ret = consolidate(ck, f, nmodel, f + nmodel, noptim, NULL, false, e);
	free(f);
	return ret;
}

/* ---- the folder ---- */

/* Python's natural_keys order (zero_to_fp32 sorts the files with it):
 * digit runs compare as numbers. */
static int natural_cmp(const char *a, const char *b)
{
	while (*a && *b) {
		if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
			while (*a == '0' && isdigit((unsigned char)a[1]))
				a++;
			while (*b == '0' && isdigit((unsigned char)b[1]))
				b++;
			size_t la = 0, lb = 0;
			while (isdigit((unsigned char)a[la]))
				la++;
			while (isdigit((unsigned char)b[lb]))
				lb++;
			if (la != lb)
				return la < lb ? -1 : 1;
			int c = strncmp(a, b, la);
			if (c)
				return c;
			a += la;
			b += lb;
		} else {
			if (*a != *b)
				return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
			a++;
			b++;
		}
	}
	return *a ? 1 : *b ? -1 : 0;
}

static int cmp_natural(const void *x, const void *y)
{
	return natural_cmp(*(char *const *)x, *(char *const *)y);
}


typedef struct listing {
	char **model, **optim;
	size_t nmodel, noptim, capm, capo;
	char *pipeline, *mp; /* first offending names */
} listing;

static void listing_free(listing *l)
{
	tpc_free_strv(l->model, l->nmodel);
	tpc_free_strv(l->optim, l->noptim);
	free(l->pipeline);
	free(l->mp);
}

static int list_dir(const char *dir, listing *l)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int ret = 0;
	memset(l, 0, sizeof(*l));
	if (!d)
		return -1;
	while (!ret && (de = readdir(d))) {
		const char *n = de->d_name;
		bool m = tpc_ends_with(n, MODEL_SUFFIX), o = tpc_ends_with(n, OPTIM_SUFFIX);
		/* PipelineModule: layer_LL-model_TT-model_states.pt (engine.py _get_ckpt_name) */
		if (!strncmp(n, "layer_", 6) && tpc_ends_with(n, "-model_states.pt")) {
			if (!l->pipeline)
				l->pipeline = tpc_strdup(n);
			continue;
		}
		if (!m && !o)
			continue;
		const char *mp = strstr(n, "mp_rank_");
		if (mp && strncmp(mp + 8, "00_", 3)) {
			if (!l->mp)
				l->mp = tpc_strdup(n);
			continue;
		}
		char ***v = m ? &l->model : &l->optim;
		size_t *cnt = m ? &l->nmodel : &l->noptim, *cap = m ? &l->capm : &l->capo;
		if (tpc_grow((void **)v, cap, *cnt + 1, sizeof(char *)) || !((*v)[*cnt] = tpc_strdup(n)))
			ret = -1;
		else
			(*cnt)++;
	}
	closedir(d);
	if (l->model)
		qsort(l->model, l->nmodel, sizeof(char *), cmp_natural);
	if (l->optim)
		qsort(l->optim, l->noptim, sizeof(char *), cmp_natural);
	return ret;
}

/* The tag folder: DIR/<latest> when DIR has a `latest` file, else DIR. */
static char *tag_dir(const char *dir, char **tag, tpc_err *e)
{
	char *lp = tpc_path_join(dir, LATEST), *text = NULL, *out = NULL;
	size_t len;
	*tag = NULL;
	if (!lp) {
		tpc_err_nomem(e);
		return NULL;
	}
	if (!tpc_exists(lp) || tpc_is_dir(lp)) {
		free(lp);
		return tpc_strdup(dir);
	}
	if (tpc_read_file(lp, 4096, &text, &len, e)) {
		free(lp);
		return NULL;
	}
	while (len && isspace((unsigned char)text[len - 1]))
		text[--len] = '\0';
	char *t = text;
	while (isspace((unsigned char)*t))
		t++;
	if (!*t || strchr(t, '/') || !strcmp(t, ".") || !strcmp(t, "..") || strlen(t) != strlen(text) - (size_t)(t - text)) {
		tpc_err_at(e, TPC_EINPUT, lp, NULL, "'latest' must name a folder beside it (a tag such as global_step14)");
	} else if (!(out = tpc_path_join(dir, t)) || !tpc_is_dir(out)) {
		if (out)
			tpc_err_set(e, TPC_EINPUT, "'latest' names %s, which is not a folder here", t);
		else
			tpc_err_nomem(e);
		tpc_err_path(e, lp);
		free(out);
		out = NULL;
	} else if (!(*tag = tpc_strdup(t))) {
		tpc_err_nomem(e);
		free(out);
		out = NULL;
	}
	free(lp);
	free(text);
	return out;
}

static bool has_weights(const char *dir)
{
	static const char *const names[] = {"model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
					    "pytorch_model.bin.index.json"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char *p = tpc_path_join(dir, names[i]);
		bool y = p && tpc_exists(p);
		free(p);
		if (y)
			return true;
	}
	return false;
}

static int ds_detect(const char *path, const uint8_t *head, size_t n)
{
	(void)n;
	if (head)
		return 0;
	tpc_err e;
	char *tag = NULL, *dir;
	listing l;
	int score = 0;
	tpc_err_init(&e);
	if (!(dir = tag_dir(path, &tag, &e))) {
		/* a `latest` that names no folder here: let the reader say so,
		 * unless the folder holds weights of its own */
		char *lp = tpc_path_join(path, LATEST);
		score = lp && tpc_exists(lp) && !has_weights(path) ? 60 : 0;
		free(lp);
		return score;
	}
	if (!list_dir(dir, &l) && (l.nmodel || l.noptim || l.pipeline || l.mp))
		/* a Trainer checkpoint folder with consolidated weights: those win */
		score = has_weights(path) ? 40 : 95;
	listing_free(&l);
	free(dir);
	free(tag);
	return score;
}

static int ds_open(tpc_ckpt *ck, const char *path, const tpc_open_opts *o, tpc_err *e)
{
	char *tag = NULL, *dir = tag_dir(path, &tag, e);
	listing l;
	zfile *f = NULL;
	char **paths = NULL;
	size_t n = 0;
	int ret = 0;
	memset(&l, 0, sizeof(l));
	if (!dir)
		return e->code ? e->code : TPC_EINPUT;
	if (o && o->select) {
		ret = tpc_err_set(e, TPC_EUSAGE,
				  "--select is not supported for DeepSpeed checkpoints (the model is read; the optimizer state is not)");
		goto out;
	}
	if (list_dir(dir, &l)) {
		ret = tpc_err_sys(e, TPC_EINPUT, 0, "cannot list the folder");
		tpc_err_path(e, dir);
		goto out;
	}
	if (l.pipeline) {
		ret = tpc_err_at(e, TPC_EINPUT, dir, NULL,
				  "a DeepSpeed pipeline-parallel checkpoint (%s): per-layer files are not supported", l.pipeline);
		goto out;
	}
	if (l.mp) {
		ret = tpc_err_at(e, TPC_EINPUT, dir, NULL,
				  "a model-parallel DeepSpeed checkpoint (%s): each tensor-parallel rank holds its own slices, which ZeRO consolidation cannot join; not supported",
				  l.mp);
		goto out;
	}
	if (!l.nmodel || !l.noptim) {
		ret = tpc_err_at(e, TPC_EINPUT, dir, NULL, "no *%s files: %s", l.nmodel ? OPTIM_SUFFIX : MODEL_SUFFIX,
				  l.nmodel ? "the fp32 weights ZeRO keeps are in them (was the optimizer state not saved?)"
					   : "not a complete DeepSpeed checkpoint");
		goto out;
	}
	n = l.nmodel + l.noptim;
	if (!(f = tpc_calloc(n, sizeof(*f))) || !(paths = tpc_calloc(n, sizeof(*paths)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < n && !ret; i++) {
		const char *nm = i < l.nmodel ? l.model[i] : l.optim[i - l.nmodel];
		if (!(paths[i] = tpc_path_join(dir, nm)))
			ret = tpc_err_nomem(e);
		else
			ret = tpc_ckpt_add_file(ck, paths[i], &f[i].src, e);
		f[i].path = paths[i];
	}
	if (!ret)
		ret = consolidate(ck, f, l.nmodel, f + l.nmodel, l.noptim, tag, o && (o->flags & TPC_OPEN_OPTIMIZER), e);
out:
	tpc_free_strv(paths, n);
	free(f);
	listing_free(&l);
	free(dir);
	free(tag);
	return ret;
}

const tpc_format tpc_fmt_deepspeed = {
	.name = "deepspeed",
	.desc = "DeepSpeed ZeRO 1/2/3 checkpoint folder (latest, global_stepN/*_optim_states.pt), read as the consolidated fp32 model",
	.detect = ds_detect, .open = ds_open,
	.sharded = true,
};
