/* tpc_ckpt.c - the checkpoint model; see tpc_ckpt.h. Tensor values and
 * composites apart from a checkpoint are tpc_tensor.c. Moving the bytes a
 * description names (read, write, hash, drop) is tpc_stream.c. */
#include "tpc_ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_buf.h"
#include "tpc_util.h"

/* ---- name indexes: open addressing over entry indices ----
 *
 * Two of them: tensor names (ck->index) and metadata keys (ck->meta_index).
 * name(ck, i) is entry i's name. */

struct tpc__name_index {
	int64_t *slot; /* -1 empty */
	size_t cap;    /* power of two */
};

typedef const char *(*index_name_fn)(const tpc_ckpt *ck, size_t i);

static const char *tensor_name(const tpc_ckpt *ck, size_t i)
{
	return ck->t[i].name;
}

static const char *meta_key(const tpc_ckpt *ck, size_t i)
{
	return ck->meta_k[i];
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* Entry i, named s, into the first free slot from s's hash. */
static void index_put(struct tpc__name_index *ix, const char *s, int64_t i)
{
	size_t h = hash_str(s) & (ix->cap - 1);
	while (ix->slot[h] >= 0)
		h = (h + 1) & (ix->cap - 1);
	ix->slot[h] = i;
}

/* (Re)build *ixp over entries [0, n) with room for `want`; -1 on out of
 * memory, *ixp as it was. */
static int index_build(struct tpc__name_index **ixp, const tpc_ckpt *ck, size_t n, size_t want,
		       index_name_fn name)
{
	struct tpc__name_index nx = {NULL, 64};
	while (nx.cap < want * 2)
		nx.cap *= 2;
	nx.slot = malloc(nx.cap * sizeof(*nx.slot));
	if (!nx.slot)
		return -1;
	for (size_t i = 0; i < nx.cap; i++)
		nx.slot[i] = -1;
	for (size_t i = 0; i < n; i++)
		index_put(&nx, name(ck, i), (int64_t)i);
	if (!*ixp && !(*ixp = calloc(1, sizeof(**ixp)))) {
		free(nx.slot);
		return -1;
	}
	free((*ixp)->slot);
	**ixp = nx;
	return 0;
}

/* Index of the entry named s among [0, n), or -1 (a linear scan when there
 * is no index). */
static int64_t index_find(const struct tpc__name_index *ix, const tpc_ckpt *ck, size_t n, const char *s,
			  index_name_fn name)
{
	if (!ix) {
		for (size_t i = 0; i < n; i++)
			if (!strcmp(name(ck, i), s))
				return (int64_t)i;
		return -1;
	}
	for (size_t h = hash_str(s) & (ix->cap - 1); ix->slot[h] >= 0; h = (h + 1) & (ix->cap - 1))
		if (!strcmp(name(ck, (size_t)ix->slot[h]), s))
			return ix->slot[h];
	return -1;
}

static void index_free(struct tpc__name_index **ixp)
{
	if (*ixp) {
		free((*ixp)->slot);
		free(*ixp);
		*ixp = NULL;
	}
}

static int index_rebuild(tpc_ckpt *ck, size_t want)
{
	return index_build(&ck->index, ck, ck->n, want, tensor_name);
}

int tpc_ckpt_drop_prefixed(tpc_ckpt *ck, size_t first, const char *prefix, tpc_err *e)
{
	bool *keep = tpc_calloc(ck->n + 1, sizeof(bool));
	size_t pl = strlen(prefix);
	if (!keep)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < ck->n; i++)
		keep[i] = i < first || strncmp(ck->t[i].name, prefix, pl);
	int ret = tpc_ckpt_filter(ck, keep, e);
	free(keep);
	return ret;
}

void tpc_ckpt_set_about(tpc_ckpt *ck, tpc_buf *b)
{
	char *txt = tpc_buf_detach(b, NULL);
	if (txt) {
		free(ck->about);
		ck->about = txt;
	}
	tpc_buf_release(b);
}

int64_t tpc_ckpt_find(const tpc_ckpt *ck, const char *name)
{
	return index_find(ck->index, ck, ck->n, name, tensor_name);
}

static int index_insert(tpc_ckpt *ck, int64_t i)
{
	struct tpc__name_index *ix = ck->index;
	if (!ix || (size_t)(i + 1) * 2 > ix->cap)
		return index_rebuild(ck, (size_t)i + 1);
	index_put(ix, ck->t[i].name, i);
	return 0;
}

/* ---- lifecycle ---- */

void tpc_ckpt_init(tpc_ckpt *ck)
{
	memset(ck, 0, sizeof(*ck));
}

void tpc_ckpt_release(tpc_ckpt *ck)
{
	if (!ck)
		return;
	for (size_t i = 0; i < ck->n; i++) {
		free(ck->t[i].name);
		tpc_tensor_release(&ck->t[i]);
	}
	free(ck->t);
	for (size_t i = 0; i < ck->nst; i++) {
		free(ck->st[i].key);
		free(ck->st[i].location);
	}
	free(ck->st);
	for (size_t i = 0; i < ck->nsrc; i++) {
		if (ck->src_owned_mem[i]) {
			free((void *)ck->src[i].data);
			free(ck->src[i].path);
		} else if (i >= ck->nsrc_borrowed) { /* borrowed maps stay with their owner */
			tpc_map_close(&ck->src[i]);
		}
	}
	free(ck->src);
	free(ck->src_owned_mem);
	tpc_free_strv(ck->meta_k, ck->nmeta);
	tpc_free_strv(ck->meta_v, ck->nmeta);
	free(ck->about);
	if (ck->ext && ck->ext_free)
		ck->ext_free(ck->ext);
	tpc_value_unref(ck->root);
	free(ck->format);
	free(ck->hidden_note);
	free(ck->path);
	index_free(&ck->index);
	index_free(&ck->meta_index);
	memset(ck, 0, sizeof(*ck));
}

static int grow_sources(tpc_ckpt *ck, tpc_err *e)
{
	size_t cap = ck->capsrc;
	if (tpc_grow((void **)&ck->src, &cap, ck->nsrc + 1, sizeof(*ck->src)))
		return tpc_err_nomem(e);
	size_t cap2 = ck->capsrc;
	if (tpc_grow((void **)&ck->src_owned_mem, &cap2, ck->nsrc + 1, sizeof(bool)))
		return tpc_err_nomem(e);
	ck->capsrc = cap < cap2 ? cap : cap2;
	return 0;
}

int tpc_ckpt_add_file(tpc_ckpt *ck, const char *path, int *idx, tpc_err *e)
{
	int ret = grow_sources(ck, e);
	if (ret)
		return ret;
	ret = tpc_map_open(&ck->src[ck->nsrc], path, e);
	if (ret)
		return ret;
	ck->src_owned_mem[ck->nsrc] = false;
	*idx = (int)ck->nsrc++;
	return 0;
}

int tpc_ckpt_add_mem(tpc_ckpt *ck, const char *label, uint8_t *mem, uint64_t size, int *idx,
		     tpc_err *e)
{
	int ret = grow_sources(ck, e);
	if (ret) {
		free(mem);
		return ret;
	}
	tpc_map *m = &ck->src[ck->nsrc];
	memset(m, 0, sizeof(*m));
	m->fd = -1;
	m->path = tpc_strdup(label);
	if (!m->path) {
		free(mem);
		return tpc_err_nomem(e);
	}
	m->data = mem;
	m->size = size;
	ck->src_owned_mem[ck->nsrc] = true;
	*idx = (int)ck->nsrc++;
	return 0;
}

/* ---- tensors ---- */

void tpc_tensor_set_contiguous(tpc_tensor *t)
{
	int64_t s = 1;
	for (int d = t->ndim - 1; d >= 0; d--) {
		t->stride[d] = s;
		s *= t->shape[d] ? t->shape[d] : 1;
	}
}

int64_t tpc_ckpt_add_tensor(tpc_ckpt *ck, const char *name, tpc_dtype dtype, int ndim,
			    const int64_t *shape, const int64_t *stride, int src, uint64_t offset,
			    tpc_err *e)
{
	tpc_tensor t;
	uint64_t numel = 1, span = 1, nbits;
	unsigned bits = tpc_dtype_bits(dtype);
	memset(&t, 0, sizeof(t));
	/* "" is a legal name: torch.save(tensor) gives one tensor with no key */
	if (!name)
		return tpc_err_set(e, TPC_EINPUT, "internal: a tensor without a name");
	if (!bits) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "unknown dtype");
	}
	if (ndim < 0 || ndim > TPC_MAX_NDIM) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "%d dimensions (at most %d supported)", ndim, TPC_MAX_NDIM);
	}
	for (int d = 0; d < ndim; d++) {
		if (shape[d] < 0 || (stride && stride[d] < 0)) {
			return tpc_err_at(e, TPC_EINPUT, NULL, name, "negative size or stride in dimension %d", d);
		}
		/* span: the product of the non-zero sizes, which contiguous strides
		 * reach even when a zero size makes numel 0 */
		if (tpc_mul_u64(numel, (uint64_t)shape[d], &numel) || numel > (UINT64_MAX >> 8) ||
		    tpc_mul_u64(span, shape[d] ? (uint64_t)shape[d] : 1, &span) || span > (UINT64_MAX >> 8)) {
			return tpc_err_at(e, TPC_EINPUT, NULL, name, "shape product overflows");
		}
	}
	nbits = numel * bits;
	if (nbits % 8) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "%llu elements of %u bits do not fill whole bytes",
			    (unsigned long long)numel, bits);
	}
	if (tpc_ckpt_find(ck, name) >= 0) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "duplicate tensor name");
	}
	if (tpc_grow((void **)&ck->t, &ck->cap, ck->n + 1, sizeof(*ck->t)))
		return tpc_err_nomem(e);
	t.name = tpc_strdup(name);
	t.shape = tpc_calloc((size_t)(2 * ndim), sizeof(int64_t));
	if (!t.name || !t.shape) {
		free(t.name);
		free(t.shape);
		return tpc_err_nomem(e);
	}
	t.stride = t.shape + ndim;
	t.ndim = ndim;
	t.dtype = t.src_dtype = dtype;
	if (ndim)
		memcpy(t.shape, shape, (size_t)ndim * sizeof(int64_t));
	if (stride && ndim)
		memcpy(t.stride, stride, (size_t)ndim * sizeof(int64_t));
	else
		tpc_tensor_set_contiguous(&t);
	t.numel = numel;
	t.nbytes = nbits / 8;
	t.src = src;
	t.offset = offset;
	t.storage = -1;
	t.alias_of = -1;
	ck->t[ck->n++] = t;
	if (index_insert(ck, (int64_t)ck->n - 1)) {
		ck->n--;
		free(t.name);
		free(t.shape);
		return tpc_err_nomem(e);
	}
	return (int64_t)ck->n - 1;
}

int64_t tpc_ckpt_add_composite(tpc_ckpt *ck, const char *name, tpc_dtype dtype, int ndim,
			       const int64_t *shape, int cat_dim, const tpc_tensor *parts, int nparts,
			       tpc_err *e)
{
	tpc_tensor cat;
	if (tpc_tensor_init_cat(&cat, parts, nparts, cat_dim))
		return tpc_err_set(e, TPC_EINPUT, "internal: parts of '%s' do not concatenate", name);
	for (int d = 0; d < ndim; d++)
		if (d >= cat.ndim || cat.shape[d] != shape[d] || ndim != cat.ndim) {
			tpc_tensor_release(&cat);
			return tpc_err_set(e, TPC_EINPUT, "internal: parts of '%s' do not add up to its shape", name);
		}
	cat.dtype = dtype;
	int64_t ix = tpc_ckpt_add_copy(ck, name, &cat, e);
	tpc_tensor_release(&cat);
	return ix;
}

int64_t tpc_ckpt_add_copy(tpc_ckpt *ck, const char *name, const tpc_tensor *t, tpc_err *e)
{
	if (ck->t && t >= ck->t && t < ck->t + ck->n) {
		/* a tensor of this checkpoint: adding may move the array under it */
		tpc_tensor cp;
		if (tpc_tensor_copy(&cp, t))
			return tpc_err_nomem(e);
		int64_t r = tpc_ckpt_add_copy(ck, name, &cp, e);
		tpc_tensor_release(&cp);
		return r;
	}
	int64_t ix = tpc_ckpt_add_tensor(ck, name, t->dtype, t->ndim, t->shape, t->stride, t->src,
					 t->offset, e);
	if (ix < 0)
		return ix;
	tpc_tensor *d = &ck->t[ix];
	char *nm = d->name;
	free(d->shape);
	if (tpc_tensor_copy(d, t)) {
		d->shape = NULL;
		ck->n--; /* the index still names it: rebuild */
		free(nm);
		index_rebuild(ck, ck->n);
		return tpc_err_nomem(e);
	}
	d->name = nm;
	return ix;
}

int tpc_ckpt_borrow_all(tpc_ckpt *dst, const tpc_ckpt *const *srcs, size_t n, int *base, bool rank_sources, tpc_err *e)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += srcs[i]->nsrc;
	dst->src = tpc_calloc(total ? total : 1, sizeof(*dst->src));
	dst->src_owned_mem = tpc_calloc(total ? total : 1, sizeof(bool));
	if (!dst->src || !dst->src_owned_mem) {
		free(dst->src);
		free(dst->src_owned_mem);
		dst->src = NULL;
		dst->src_owned_mem = NULL;
		return tpc_err_nomem(e);
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (base)
			base[i] = (int)k;
		for (size_t j = 0; j < srcs[i]->nsrc; j++)
			dst->src[k++] = srcs[i]->src[j]; /* shallow: the owner keeps the mapping */
	}
	dst->nsrc = dst->capsrc = dst->nsrc_borrowed = total;
	dst->rank_sources = rank_sources;
	return 0;
}

int tpc_ckpt_borrow_sources(tpc_ckpt *dst, const tpc_ckpt *src, tpc_err *e)
{
	return tpc_ckpt_borrow_all(dst, &src, 1, NULL, src->rank_sources, e);
}

int64_t tpc_ckpt_add_storage(tpc_ckpt *ck, const char *key, const char *location,
			     tpc_dtype dtype, int src, uint64_t offset, uint64_t nbytes, tpc_err *e)
{
	tpc_storage s;
	memset(&s, 0, sizeof(s));
	if (tpc_grow((void **)&ck->st, &ck->capst, ck->nst + 1, sizeof(*ck->st)))
		return tpc_err_nomem(e);
	s.key = key ? tpc_strdup(key) : NULL;
	s.location = location ? tpc_strdup(location) : NULL;
	if ((key && !s.key) || (location && !s.location)) {
		free(s.key);
		free(s.location);
		return tpc_err_nomem(e);
	}
	s.dtype = dtype;
	s.src = src;
	s.offset = offset;
	s.nbytes = nbytes;
	ck->st[ck->nst] = s;
	return (int64_t)ck->nst++;
}

int tpc_ckpt_rename(tpc_ckpt *ck, int64_t i, const char *name, tpc_err *e)
{
	int64_t j = tpc_ckpt_find(ck, name);
	if (j == i)
		return 0;
	if (j >= 0) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "renaming '%s' collides with an existing tensor", ck->t[i].name);
	}
	char *n = tpc_strdup(name);
	if (!n)
		return tpc_err_nomem(e);
	free(ck->t[i].name);
	ck->t[i].name = n;
	if (index_rebuild(ck, ck->n))
		return tpc_err_nomem(e);
	return 0;
}

/* Rewrite TPC_V_TENSOR leaves through map[] (-1: replaced by None). */
static int remap_tree(tpc_value *root, const int64_t *map, size_t nmap)
{
	tpc_value **stack = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;
	if (!root)
		return 0;
	if (tpc_grow((void **)&stack, &cap, 1, sizeof(*stack)))
		return -1;
	stack[n++] = root;
	while (n) {
		tpc_value *v = stack[--n];
		for (size_t i = 0; i < v->n; i++) {
			tpc_value *c = v->items[i];
			if (!c)
				continue;
			if (c->kind == TPC_V_TENSOR) {
				int64_t ix = c->ival;
				int64_t to = (ix >= 0 && (size_t)ix < nmap) ? map[ix] : -1;
				if (to >= 0 && c->refs == 1) {
					c->ival = to;
					continue;
				}
				/* a dropped tensor becomes None; a shared reference its own */
				tpc_value *nv = to < 0 ? tpc_value_new(TPC_V_NONE) : tpc_value_tensor(to);
				if (!nv) {
					ret = -1;
					goto out;
				}
				tpc_value_unref(c);
				v->items[i] = nv;
			} else if (c->n) {
				if (tpc_grow((void **)&stack, &cap, n + 1, sizeof(*stack))) {
					ret = -1;
					goto out;
				}
				stack[n++] = c;
			}
		}
	}
out:
	free(stack);
	return ret;
}

int tpc_ckpt_filter(tpc_ckpt *ck, const bool *keep, tpc_err *e)
{
	int64_t *map = tpc_malloc(ck->n * sizeof(*map));
	size_t j = 0;
	if (!map)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < ck->n; i++) {
		if (keep[i]) {
			map[i] = (int64_t)j;
			ck->t[j++] = ck->t[i];
		} else {
			map[i] = -1;
			free(ck->t[i].name);
			tpc_tensor_release(&ck->t[i]);
		}
	}
	size_t old = ck->n;
	ck->n = j;
	for (size_t i = 0; i < ck->n; i++)
		if (ck->t[i].alias_of >= 0)
			ck->t[i].alias_of = map[ck->t[i].alias_of];
	int r = remap_tree(ck->root, map, old);
	free(map);
	if (r || index_rebuild(ck, ck->n))
		return tpc_err_nomem(e);
	return 0;
}

int tpc_ckpt_permute(tpc_ckpt *ck, const int64_t *order, tpc_err *e)
{
	tpc_tensor *nt = tpc_malloc(ck->n * sizeof(*nt));
	int64_t *map = tpc_malloc(ck->n * sizeof(*map));
	int ret = 0;
	if (!nt || !map) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < ck->n; i++) {
		nt[i] = ck->t[order[i]];
		map[order[i]] = (int64_t)i;
	}
	memcpy(ck->t, nt, ck->n * sizeof(*nt));
	for (size_t i = 0; i < ck->n; i++)
		if (ck->t[i].alias_of >= 0)
			ck->t[i].alias_of = map[ck->t[i].alias_of];
	if (remap_tree(ck->root, map, ck->n) || index_rebuild(ck, ck->n))
		ret = tpc_err_nomem(e);
out:
	free(nt);
	free(map);
	return ret;
}

/* Metadata keys are hashed like tensor names: a safetensors header may hold
 * millions of __metadata__ entries, and a linear search per key made reading
 * one quadratic (100 000 keys took 40 s). */
static int meta_index_rebuild(tpc_ckpt *ck)
{
	return index_build(&ck->meta_index, ck, ck->nmeta, ck->nmeta, meta_key);
}

/* Index of key k in meta_k, or -1. */
static int64_t meta_find(const tpc_ckpt *ck, const char *k)
{
	return index_find(ck->meta_index, ck, ck->nmeta, k, meta_key);
}

int tpc_ckpt_meta_set(tpc_ckpt *ck, const char *k, const char *v, tpc_err *e)
{
	int64_t i = meta_find(ck, k);
	if (i >= 0) {
		char *nv = tpc_strdup(v);
		if (!nv)
			return tpc_err_nomem(e);
		free(ck->meta_v[i]);
		ck->meta_v[i] = nv;
		return 0;
	}
	size_t c1 = ck->capmeta, c2 = ck->capmeta;
	if (tpc_grow((void **)&ck->meta_k, &c1, ck->nmeta + 1, sizeof(char *)) ||
	    tpc_grow((void **)&ck->meta_v, &c2, ck->nmeta + 1, sizeof(char *)))
		return tpc_err_nomem(e);
	ck->capmeta = c1 < c2 ? c1 : c2;
	ck->meta_k[ck->nmeta] = tpc_strdup(k);
	ck->meta_v[ck->nmeta] = tpc_strdup(v);
	if (!ck->meta_k[ck->nmeta] || !ck->meta_v[ck->nmeta]) {
		free(ck->meta_k[ck->nmeta]);
		free(ck->meta_v[ck->nmeta]);
		return tpc_err_nomem(e);
	}
	ck->nmeta++;
	struct tpc__name_index *ix = ck->meta_index;
	if (!ix || ck->nmeta * 2 > ix->cap) {
		if (meta_index_rebuild(ck))
			index_free(&ck->meta_index); /* out of memory: fall back to the linear scan */
	} else {
		index_put(ix, k, (int64_t)ck->nmeta - 1);
	}
	return 0;
}

void tpc_ckpt_meta_del(tpc_ckpt *ck, const char *k)
{
	int64_t i = meta_find(ck, k);
	if (i < 0)
		return;
	free(ck->meta_k[i]);
	free(ck->meta_v[i]);
	memmove(ck->meta_k + i, ck->meta_k + i + 1, (ck->nmeta - (size_t)i - 1) * sizeof(char *));
	memmove(ck->meta_v + i, ck->meta_v + i + 1, (ck->nmeta - (size_t)i - 1) * sizeof(char *));
	ck->nmeta--;
	if (ck->meta_index && meta_index_rebuild(ck))
		index_free(&ck->meta_index);
}

const char *tpc_ckpt_meta_get(const tpc_ckpt *ck, const char *k)
{
	int64_t i = meta_find(ck, k);
	return i >= 0 ? ck->meta_v[i] : NULL;
}

/* ---- geometry ---- */

bool tpc_tensor_is_contiguous(const tpc_tensor *t)
{
	int64_t s = 1;
	if (t->nparts || (t->flags & TPC_TF_ZERO))
		return false;
	for (int d = t->ndim - 1; d >= 0; d--) {
		if (t->shape[d] != 1 && t->stride[d] != s)
			return false;
		s *= t->shape[d];
		if (s == 0)
			return true;
	}
	return true;
}

bool tpc_tensor_same_view(const tpc_tensor *a, const tpc_tensor *b)
{
	if (a->storage < 0 || a->storage != b->storage || a->src != b->src || a->offset != b->offset ||
	    a->ndim != b->ndim || a->dtype != b->dtype || a->src_dtype != b->src_dtype || a->nparts ||
	    b->nparts || a->flags != b->flags)
		return false;
	for (int d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d] || a->stride[d] != b->stride[d])
			return false;
	return true;
}

/* Two computed tensors' descriptions: every field, the coefficients of a
 * merge, and the companions the same (so the same bytes computed). A field
 * added to tpc_dequant must be compared here, or two descriptions that
 * compute different bytes would be taken for one tie: the assertion stops
 * the build until it is (64-bit layout). */
#if UINTPTR_MAX == 0xffffffffffffffffu
_Static_assert(sizeof(tpc_dequant) == 160, "a field was added to tpc_dequant: compare it in same_dq, then update this size");
#endif
static bool same_dq(const tpc_dequant *a, const tpc_dequant *b)
{
	if (a->kind != b->kind || a->bits != b->bits || a->bo != b->bo || a->bi != b->bi || a->group != b->group ||
	    a->gidx_base != b->gidx_base || a->ct_zp != b->ct_zp || a->ct_gidx != b->ct_gidx ||
	    a->zero_plus_one != b->zero_plus_one || a->r0 != b->r0 || a->c0 != b->c0 || a->O != b->O || a->I != b->I ||
	    a->gtype != b->gtype || a->fp4_mx != b->fp4_mx || a->fp4_div != b->fp4_div || a->rope_hd != b->rope_hd ||
	    a->lora_mode != b->lora_mode || a->lora_dora != b->lora_dora || a->lora_scale != b->lora_scale ||
	    a->lora_ne != b->lora_ne || a->lora_e0 != b->lora_e0 || a->lora_epr != b->lora_epr ||
	    a->nc != b->nc || !a->mix != !b->mix || (a->mix && memcmp(a->mix, b->mix, sizeof(*a->mix))))
		return false;
	for (int k = 0; k < a->nc; k++)
		if (!tpc_tensor_same_desc(&a->c[k], &b->c[k]))
			return false;
	return true;
}

bool tpc_tensor_same_desc(const tpc_tensor *a, const tpc_tensor *b)
{
	if (a->dtype != b->dtype || a->src_dtype != b->src_dtype || a->ndim != b->ndim || a->src != b->src ||
	    a->offset != b->offset || a->flags != b->flags || a->numel != b->numel || a->nbytes != b->nbytes ||
	    a->meta != b->meta || !a->dq != !b->dq || (a->dq && !same_dq(a->dq, b->dq)) || a->nparts != b->nparts ||
	    (a->nparts && a->cat_dim != b->cat_dim))
		return false;
	for (int d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d] || a->stride[d] != b->stride[d])
			return false;
	for (int k = 0; k < a->nparts; k++)
		if (!tpc_tensor_same_desc(&a->parts[k], &b->parts[k]))
			return false;
	return true;
}

/* ---- ties ---- */

static int64_t tie_find(int64_t *rep, int64_t i)
{
	while (rep[i] != i) {
		rep[i] = rep[rep[i]];
		i = rep[i];
	}
	return i;
}

static void tie_join(int64_t *rep, int64_t a, int64_t b)
{
	a = tie_find(rep, a);
	b = tie_find(rep, b);
	if (a < b)
		rep[b] = a;
	else
		rep[a] = b;
}

typedef struct tie_key {
	int64_t storage;
	uint64_t offset;
	int64_t ix;
} tie_key;

static int tie_key_cmp(const void *pa, const void *pb)
{
	const tie_key *a = pa, *b = pb;
	if (a->storage != b->storage)
		return a->storage < b->storage ? -1 : 1;
	if (a->offset != b->offset)
		return a->offset < b->offset ? -1 : 1;
	return (a->ix > b->ix) - (a->ix < b->ix);
}

/* rep[i]: the lowest index of the tensors tied to tensor i. */
static int tie_groups(const tpc_ckpt *ck, int64_t *rep, tpc_err *e)
{
	tie_key *k = tpc_malloc((ck->n ? ck->n : 1) * sizeof(*k));
	size_t nk = 0;
	if (!k)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < ck->n; i++) {
		rep[i] = (int64_t)i;
		if (ck->t[i].storage >= 0 && !ck->t[i].nparts)
			k[nk++] = (tie_key){ck->t[i].storage, ck->t[i].offset, (int64_t)i};
	}
	/* views: sorted by where they start, each run compared pairwise
	 * (a run is the few names of one tied weight) */
	qsort(k, nk, sizeof(*k), tie_key_cmp);
	for (size_t a = 0; a < nk;) {
		size_t b = a + 1;
		while (b < nk && k[b].storage == k[a].storage && k[b].offset == k[a].offset)
			b++;
		for (size_t x = a + 1; x < b; x++)
			for (size_t y = a; y < x; y++)
				if (tpc_tensor_same_view(&ck->t[k[y].ix], &ck->t[k[x].ix])) {
					tie_join(rep, k[y].ix, k[x].ix);
					break;
				}
		a = b;
	}
	free(k);
	/* recorded ties, while both descriptions are still the same bytes */
	for (size_t i = 0; i < ck->n; i++) {
		int64_t a = ck->t[i].alias_of;
		if (a >= 0 && (size_t)a < ck->n && a != (int64_t)i && tpc_tensor_same_desc(&ck->t[i], &ck->t[a]))
			tie_join(rep, (int64_t)i, a);
	}
	for (size_t i = 0; i < ck->n; i++)
		rep[i] = tie_find(rep, (int64_t)i);
	return 0;
}

int tpc_ckpt_ties(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, int64_t *first, tpc_err *e)
{
	int64_t *rep = tpc_malloc((ck->n ? ck->n : 1) * sizeof(int64_t));
	int64_t *at = tpc_malloc((ck->n ? ck->n : 1) * sizeof(int64_t));
	int ret = 0;
	if (!sel)
		nsel = ck->n;
	if (!rep || !at)
		ret = tpc_err_nomem(e);
	else if (!(ret = tie_groups(ck, rep, e))) {
		for (size_t i = 0; i < ck->n; i++)
			at[i] = -1;
		for (size_t k = 0; k < nsel; k++) {
			int64_t r = rep[sel ? sel[k] : (int64_t)k];
			if (at[r] < 0)
				at[r] = (int64_t)k;
			first[k] = at[r];
		}
	}
	free(rep);
	free(at);
	return ret;
}

void tpc_tensor_extent(const tpc_tensor *t, uint64_t *lo, uint64_t *hi)
{
	unsigned es = tpc_dtype_size(t->src_dtype);
	*lo = *hi = t->offset;
	if (t->numel == 0 || (t->flags & TPC_TF_NODATA))
		return;
	if (tpc_dtype_bits(t->src_dtype) < 8) {
		/* sub-byte types are only ever contiguous */
		*hi = t->offset + (t->numel * tpc_dtype_bits(t->src_dtype) + 7) / 8;
		return;
	}
	/* Callers validate first; saturate on overflow so a bad tensor reads as out of range. */
	uint64_t last = 0, k;
	for (int d = 0; d < t->ndim; d++) {
		if (tpc_mul_u64((uint64_t)(t->shape[d] - 1), (uint64_t)t->stride[d], &k) ||
		    tpc_add_u64(last, k, &last)) {
			*hi = UINT64_MAX;
			return;
		}
	}
	if (tpc_add_u64(last, 1, &last) || tpc_mul_u64(last, es, &last) ||
	    tpc_add_u64(t->offset, last, hi))
		*hi = UINT64_MAX;
}

static int validate_tensor(const tpc_ckpt *ck, const tpc_tensor *t, const char *name, tpc_err *e)
{
	uint64_t lo, hi;
	const tpc_map *m;
	if (t->flags & (TPC_TF_NODATA | TPC_TF_ZERO))
		return 0;
	if (t->dq) {
		for (int k = 0; k < t->dq->nc; k++) {
			int r = validate_tensor(ck, &t->dq->c[k], t->dq->c[k].name ? t->dq->c[k].name : name, e);
			if (r)
				return r;
		}
		return 0;
	}
	if (t->nparts) {
		for (int k = 0; k < t->nparts; k++) {
			int r = validate_tensor(ck, &t->parts[k], name, e);
			if (r)
				return r;
		}
		return 0;
	}
	{
		m = tpc_ckpt_source(ck, t->src);
		if (!m)
			return TPC_CORRUPT(e, ck->path, -1, name, "tensor has no data source");
		if (tpc_dtype_bits(t->src_dtype) < 8 && !tpc_tensor_is_contiguous(t))
			return TPC_CORRUPT(e, m->path, -1, name,
					   "sub-byte dtype %s with non-contiguous strides",
					   tpc_dtype_name(t->src_dtype));
		tpc_tensor_extent(t, &lo, &hi);
		if (hi > m->size)
			return TPC_CORRUPT(e, m->path, (int64_t)lo, name,
					   "data ends at 0x%llx but the file ends at 0x%llx",
					   (unsigned long long)hi, (unsigned long long)m->size);
		if (t->storage >= 0) {
			const tpc_storage *s = &ck->st[t->storage];
			if (lo < s->offset || hi > s->offset + s->nbytes)
				return TPC_CORRUPT(e, m->path, (int64_t)lo, name,
						   "view (offset %lld, %llu elements) lies outside its storage '%s' of %llu bytes",
						   (long long)t->storage_offset,
						   (unsigned long long)t->numel, s->key ? s->key : "?",
						   (unsigned long long)s->nbytes);
		}
	}
	return 0;
}

int tpc_ckpt_check_writable(const tpc_ckpt *ck, tpc_err *e)
{
	if (!ck->hidden_tensors)
		return 0;
	return tpc_err_set(e, TPC_EINPUT,
			   "%llu tensor%s inside opaque objects (%s) that tpconv cannot name; writing would lose "
			   "them (use --select to take a subtree without them)",
			   (unsigned long long)ck->hidden_tensors, ck->hidden_tensors == 1 ? " sits" : "s sit",
			   ck->hidden_note ? ck->hidden_note : "a foreign object");
}

int tpc_ckpt_validate(const tpc_ckpt *ck, tpc_err *e)
{
	for (size_t i = 0; i < ck->n; i++) {
		int r = validate_tensor(ck, &ck->t[i], ck->t[i].name, e);
		if (r)
			return r;
	}
	return 0;
}

const char *tpc_shape_str(const tpc_tensor *t, char *buf, size_t n)
{
	size_t len = 0;
	if (!n)
		return buf;
	buf[0] = '\0';
	len += (size_t)snprintf(buf, n, "[");
	for (int d = 0; d < t->ndim && len < n; d++)
		len += (size_t)snprintf(buf + len, n - len, d ? ", %lld" : "%lld", (long long)t->shape[d]);
	if (len < n)
		snprintf(buf + len, n - len, "]");
	return buf;
}
