/* tpc_tensor.c - tensor values apart from a checkpoint (tpc_ckpt.h): copies,
 * zeros, and the composites that describe a tensor made of others' bytes
 * without moving them - concatenations, narrows, row strides, head
 * regroupings, RoPE permutations, transposes, stacks and flat pieces. The
 * bytes move when a writer streams them (tpc_stream.c). */
#include "tpc_ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"

/* ---- free-standing tensor values and composites ---- */

tpc_dequant *tpc_dequant_new(int cap, bool mix)
{
	size_t head = (sizeof(tpc_dequant) + 15) & ~(size_t)15, cs = (size_t)cap * sizeof(tpc_tensor);
	tpc_dequant *dq = tpc_calloc(1, head + cs + (mix ? sizeof(tpc_mix_coef) : 0));
	if (!dq)
		return NULL;
	dq->cap = cap;
	dq->c = (tpc_tensor *)((char *)dq + head);
	if (mix)
		dq->mix = (tpc_mix_coef *)((char *)dq + head + cs);
	return dq;
}

tpc_dequant *tpc_dequant_dup(const tpc_dequant *src)
{
	tpc_dequant *dq = tpc_dequant_new(src->cap > TPC_DQ_NC ? src->cap : TPC_DQ_NC, src->mix != NULL);
	if (!dq)
		return NULL;
	tpc_tensor *c = dq->c;
	tpc_mix_coef *mix = dq->mix;
	int cap = dq->cap;
	*dq = *src;
	dq->c = c;
	dq->cap = cap;
	dq->nc = 0;
	dq->mix = mix;
	if (mix)
		*mix = *src->mix;
	return dq;
}

void tpc_tensor_release(tpc_tensor *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->nparts; i++)
		tpc_tensor_release(&t->parts[i]);
	free(t->parts);
	free(t->shape);
	tpc_value_unref(t->meta);
	if (t->dq) {
		for (int i = 0; i < t->dq->nc; i++) {
			free(t->dq->c[i].name);
			tpc_tensor_release(&t->dq->c[i]);
		}
		free(t->dq);
	}
	t->parts = NULL;
	t->nparts = 0;
	t->shape = t->stride = NULL;
	t->meta = NULL;
	t->dq = NULL;
}

/* numel and nbytes from shape and dtype; -1 on overflow. */
/* A computed 3-D tensor [E, d1, d2] read as its [E * d1, d2] rows, windows
 * of which select experts and columns: gpt-oss's MXFP4 experts, a LoRA
 * merged into fused experts (tpc_lora.h). */
static bool dq_rows3(const tpc_dequant *dq)
{
	return dq->kind == TPC_DQ_MXFP4_T || (dq->kind == TPC_DQ_LORA && dq->lora_epr);
}

static int tensor_sizes(tpc_tensor *t)
{
	uint64_t n = 1, bits;
	for (int d = 0; d < t->ndim; d++)
		if (t->shape[d] < 0 || tpc_mul_u64(n, (uint64_t)t->shape[d], &n))
			return -1;
	if (tpc_mul_u64(n, tpc_dtype_bits(t->dtype), &bits))
		return -1;
	t->numel = n;
	t->nbytes = bits / 8;
	return 0;
}

static int alloc_shape(tpc_tensor *t, int ndim)
{
	t->shape = tpc_calloc((size_t)(2 * ndim), sizeof(int64_t));
	if (!t->shape)
		return -1;
	t->stride = t->shape + ndim;
	t->ndim = ndim;
	return 0;
}

int tpc_tensor_copy(tpc_tensor *dst, const tpc_tensor *src)
{
	*dst = *src;
	dst->name = NULL;
	dst->parts = NULL;
	dst->nparts = 0;
	dst->dq = NULL;
	if (alloc_shape(dst, src->ndim))
		return -1;
	memcpy(dst->shape, src->shape, (size_t)src->ndim * 2 * sizeof(int64_t));
	tpc_value_ref(dst->meta);
	if (src->dq) {
		if (!(dst->dq = tpc_dequant_dup(src->dq))) {
			tpc_tensor_release(dst);
			return -1;
		}
		for (int i = 0; i < src->dq->nc; i++, dst->dq->nc++) {
			if (tpc_tensor_copy(&dst->dq->c[i], &src->dq->c[i])) {
				tpc_tensor_release(dst);
				return -1;
			}
			if (src->dq->c[i].name && !(dst->dq->c[i].name = tpc_strdup(src->dq->c[i].name))) {
				dst->dq->nc++;
				tpc_tensor_release(dst);
				return -1;
			}
		}
	}
	if (src->nparts) {
		dst->parts = tpc_calloc((size_t)src->nparts, sizeof(tpc_tensor));
		if (!dst->parts) {
			tpc_tensor_release(dst);
			return -1;
		}
		for (int i = 0; i < src->nparts; i++, dst->nparts++)
			if (tpc_tensor_copy(&dst->parts[i], &src->parts[i])) {
				tpc_tensor_release(dst);
				return -1;
			}
	}
	return 0;
}

int tpc_tensor_init_zero(tpc_tensor *t, tpc_dtype dtype, int ndim, const int64_t *shape)
{
	memset(t, 0, sizeof(*t));
	if (alloc_shape(t, ndim))
		return -1;
	if (ndim)
		memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
	tpc_tensor_set_contiguous(t);
	t->dtype = t->src_dtype = dtype;
	t->src = -1;
	t->storage = -1;
	t->alias_of = -1;
	t->flags = TPC_TF_ZERO;
	if (tensor_sizes(t)) {
		tpc_tensor_release(t);
		return -1;
	}
	return 0;
}

/* tpc_tensor_init_cat; with `dq` parts may be dequantized windows (one
 * weight's, cut and joined again by tpc_tensor_narrow) */
static int init_cat(tpc_tensor *dst, const tpc_tensor *parts, int nparts, int dim, bool dq)
{
	memset(dst, 0, sizeof(*dst));
	if (nparts < 1 || dim < 0 || dim >= parts[0].ndim)
		return -1;
	for (int i = 0; i < nparts && !dq; i++)
		if (parts[i].dq)
			return -1;
	if (alloc_shape(dst, parts[0].ndim))
		return -1;
	memcpy(dst->shape, parts[0].shape, (size_t)parts[0].ndim * sizeof(int64_t));
	dst->shape[dim] = 0;
	for (int i = 0; i < nparts; i++) {
		if (parts[i].ndim != dst->ndim || parts[i].src_dtype != parts[0].src_dtype)
			goto bad;
		for (int d = 0; d < dst->ndim; d++)
			if (d != dim && parts[i].shape[d] != parts[0].shape[d])
				goto bad;
		dst->shape[dim] += parts[i].shape[dim];
	}
	tpc_tensor_set_contiguous(dst);
	dst->dtype = parts[0].dtype;
	dst->src_dtype = parts[0].src_dtype;
	dst->src = -1;
	dst->storage = -1;
	dst->alias_of = -1;
	dst->cat_dim = dim;
	dst->parts = tpc_calloc((size_t)nparts, sizeof(tpc_tensor));
	if (!dst->parts || tensor_sizes(dst))
		goto bad;
	for (int i = 0; i < nparts; i++, dst->nparts++)
		if (tpc_tensor_copy(&dst->parts[i], &parts[i]))
			goto bad;
	return 0;
bad:
	tpc_tensor_release(dst);
	return -1;
}

int tpc_tensor_init_cat(tpc_tensor *dst, const tpc_tensor *parts, int nparts, int dim)
{
	return init_cat(dst, parts, nparts, dim, false);
}

int tpc_tensor_pad_zero(tpc_tensor *dst, const tpc_tensor *src, int dim, int64_t len)
{
	memset(dst, 0, sizeof(*dst));
	if (dim < 0 || dim >= src->ndim || len <= src->shape[dim] || src->ndim > TPC_MAX_NDIM)
		return -1;
	tpc_tensor p[2];
	int64_t shp[TPC_MAX_NDIM];
	memcpy(shp, src->shape, (size_t)src->ndim * sizeof(int64_t));
	shp[dim] = len - src->shape[dim];
	if (tpc_tensor_init_zero(&p[1], src->src_dtype, src->ndim, shp))
		return -1;
	p[1].dtype = src->dtype;
	p[1].nbytes = p[1].numel * tpc_dtype_bits(src->dtype) / 8; /* as tpc_tensor_narrow's */
	p[0] = *src;
	int ret = init_cat(dst, p, 2, dim, true);
	tpc_tensor_release(&p[1]);
	if (!ret)
		dst->dtype = src->dtype;
	return ret ? -1 : tensor_sizes(dst);
}

/* ---- tensors cut from flat pieces (tpc_tensor_init_flat) ---- */

typedef struct flat_ctx {
	const tpc_tensor *pc;
	int np;
	int64_t *start;               /* np + 1 entries: element where piece p begins */
	int ndim;
	const int64_t *shape;
	int64_t rows[TPC_MAX_NDIM + 1]; /* rows[L]: elements of one index at level L */
} flat_ctx;

/* The non-empty piece holding element `at`. */
static int flat_piece(const flat_ctx *c, int64_t at)
{
	int lo = 0, hi = c->np - 1;
	while (lo < hi) {
		int mid = lo + (hi - lo + 1) / 2;
		if (c->start[mid] <= at)
			lo = mid;
		else
			hi = mid - 1;
	}
	while (lo < c->np - 1 && c->start[lo + 1] <= at)
		lo++; /* past empty pieces */
	return lo;
}

/* A view of `shp` (ndim entries) starting at element `at`, inside piece p. */
static int flat_view(const flat_ctx *c, int p, int64_t at, const int64_t *shp, tpc_tensor *out)
{
	const tpc_tensor *pc = &c->pc[p];
	if ((pc->flags & TPC_TF_ZERO) || pc->src < 0) {
		if (tpc_tensor_init_zero(out, pc->src_dtype, c->ndim, shp))
			return -1;
		out->dtype = pc->dtype;
		return tensor_sizes(out);
	}
	*out = *pc;
	out->name = NULL;
	out->parts = NULL;
	out->nparts = 0;
	out->meta = NULL;
	out->dq = NULL;
	out->storage = -1;
	out->storage_offset = 0;
	out->alias_of = -1;
	if (alloc_shape(out, c->ndim))
		return -1;
	if (c->ndim)
		memcpy(out->shape, shp, (size_t)c->ndim * sizeof(int64_t));
	tpc_tensor_set_contiguous(out);
	out->offset = pc->offset + (uint64_t)(at - c->start[p]) * tpc_dtype_size(pc->src_dtype);
	if (tensor_sizes(out)) {
		tpc_tensor_release(out);
		return -1;
	}
	return 0;
}

/* The block [i0, .., i_{L-1}, :, ..] that begins at element `base`, as a
 * tensor of shape [1]*L + shape[L:]. */
static int flat_block(const flat_ctx *c, int L, int64_t base, tpc_tensor *out)
{
	int64_t shp[TPC_MAX_NDIM];
	for (int d = 0; d < c->ndim; d++)
		shp[d] = d < L ? 1 : c->shape[d];
	int p = flat_piece(c, base);
	if (L >= c->ndim || base + c->rows[L] <= c->start[p + 1])
		return flat_view(c, p, base, shp, out);
	tpc_tensor *parts = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;
	int64_t r1 = c->rows[L + 1];
	for (int64_t j = 0; j < c->shape[L] && !ret;) {
		int64_t b = base + j * r1;
		int q = flat_piece(c, b);
		if (tpc_grow((void **)&parts, &cap, n + 1, sizeof(*parts))) {
			ret = -1;
			break;
		}
		if (b + r1 <= c->start[q + 1]) {
			/* whole indices of dim L inside piece q: one view */
			int64_t cnt = (c->start[q + 1] - b) / r1;
			if (cnt > c->shape[L] - j)
				cnt = c->shape[L] - j;
			shp[L] = cnt;
			ret = flat_view(c, q, b, shp, &parts[n]);
			shp[L] = c->shape[L];
			j += cnt;
		} else {
			ret = flat_block(c, L + 1, b, &parts[n]); /* an index cut by a piece boundary */
			j++;
		}
		if (!ret)
			n++;
	}
	if (!ret && tpc_tensor_init_cat(out, parts, (int)n, L))
		ret = -1;
	for (size_t i = 0; i < n; i++)
		tpc_tensor_release(&parts[i]);
	free(parts);
	return ret;
}

int tpc_tensor_init_flat(tpc_tensor *dst, int ndim, const int64_t *shape, const tpc_tensor *pieces, int npieces)
{
	flat_ctx c;
	uint64_t total = 0, want = 1;
	int ret;
	memset(dst, 0, sizeof(*dst));
	if (ndim < 0 || ndim > TPC_MAX_NDIM || npieces < 1 || !pieces)
		return -1;
	tpc_dtype sd = pieces[0].src_dtype;
	if (tpc_dtype_bits(sd) % 8)
		return -1;
	for (int d = 0; d < ndim; d++)
		if (shape[d] < 0 || tpc_mul_u64(want, (uint64_t)shape[d], &want))
			return -1;
	for (int i = 0; i < npieces; i++) {
		const tpc_tensor *pc = &pieces[i];
		if (pc->ndim != 1 || pc->nparts || pc->src_dtype != sd || pc->dtype != pieces[0].dtype ||
		    (pc->numel > 1 && pc->stride[0] != 1) || tpc_add_u64(total, pc->numel, &total))
			return -1;
	}
	if (total != want || want > (uint64_t)INT64_MAX)
		return -1;
	if (want == 0) {
		if (tpc_tensor_init_zero(dst, sd, ndim, shape))
			return -1;
		dst->dtype = pieces[0].dtype;
		dst->flags = 0;
		return tensor_sizes(dst);
	}
	memset(&c, 0, sizeof(c));
	c.pc = pieces;
	c.np = npieces;
	c.ndim = ndim;
	c.shape = shape;
	c.rows[ndim] = 1;
	for (int d = ndim - 1; d >= 0; d--)
		c.rows[d] = c.rows[d + 1] * shape[d];
	if (!(c.start = tpc_calloc((size_t)npieces + 1, sizeof(int64_t))))
		return -1;
	for (int i = 0; i < npieces; i++)
		c.start[i + 1] = c.start[i] + (int64_t)pieces[i].numel;
	ret = flat_block(&c, 0, 0, dst);
	free(c.start);
	return ret;
}

/* A piece of a composite, from the parts it overlaps: take() makes the piece
 * of each part (at offset pos along cat_dim) and returns 1 where the part
 * gives none; the pieces, concatenated along cat_dim, are dst (one piece is
 * moved, not copied). */
typedef int (*part_take)(tpc_tensor *piece, const tpc_tensor *part, int64_t pos, const void *ctx);

static int take_parts(tpc_tensor *dst, const tpc_tensor *src, part_take take, const void *ctx)
{
	tpc_tensor *sub = tpc_calloc((size_t)src->nparts, sizeof(tpc_tensor));
	int n = 0, ret = sub ? 0 : -1;
	int64_t pos = 0;
	for (int i = 0; i < src->nparts && !ret; i++) {
		int r = take(&sub[n], &src->parts[i], pos, ctx);
		ret = r < 0 ? -1 : 0;
		n += r == 0;
		pos += src->parts[i].shape[src->cat_dim];
	}
	if (!ret && n == 1) {
		*dst = sub[0];
		n = 0;
	} else if (!ret) {
		ret = tpc_tensor_init_cat(dst, sub, n, src->cat_dim);
	}
	for (int i = 0; i < n; i++)
		tpc_tensor_release(&sub[i]);
	free(sub);
	return ret;
}

/* narrow's piece of one part: its overlap with the window (win: dim, start, len) */
static int narrow_part(tpc_tensor *piece, const tpc_tensor *part, int64_t pos, const void *ctx)
{
	const int64_t *win = ctx, start = win[1], end = win[1] + win[2];
	int dim = (int)win[0];
	int64_t a = start > pos ? start : pos, b = end < pos + part->shape[dim] ? end : pos + part->shape[dim];
	if (b <= a)
		return 1;
	return tpc_tensor_narrow(piece, part, dim, a - pos, b - a) ? -1 : 0;
}

int tpc_tensor_narrow(tpc_tensor *dst, const tpc_tensor *src, int dim, int64_t start, int64_t len)
{
	if (dim < 0 || dim >= src->ndim || start < 0 || len < 0 || start + len > src->shape[dim])
		return -1;
	if (src->dq) {
		/* a window of the computed weight: nothing is read until it is. A
		 * 3-D one (gpt-oss's MXFP4 experts [E, I, R], rows (e, i)): experts
		 * and columns are windows too; inputs, expert by expert */
		bool three = src->ndim == 3 && dq_rows3(src->dq);
		if (three && dim == 1 && src->shape[0] > 1) {
			int64_t E = src->shape[0];
			tpc_tensor *sub = tpc_calloc((size_t)E, sizeof(tpc_tensor)), one;
			int ret = sub ? 0 : -1;
			int64_t k = 0;
			for (; k < E && !ret; k++) {
				ret = tpc_tensor_narrow(&one, src, 0, k, 1);
				if (!ret) {
					ret = tpc_tensor_narrow(&sub[k], &one, 1, start, len);
					tpc_tensor_release(&one);
					if (ret)
						break;
				}
			}
			if (!ret)
				ret = init_cat(dst, sub, (int)E, 0, true);
			for (int64_t x = 0; sub && x < k; x++)
				tpc_tensor_release(&sub[x]);
			free(sub);
			if (!ret)
				dst->dtype = src->dtype;
			return ret ? -1 : tensor_sizes(dst);
		}
		if ((src->ndim != 2 && !three) || tpc_tensor_copy(dst, src))
			return -1;
		tpc_dequant *w = dst->dq;
		if (!w->O) {
			w->O = three ? src->shape[0] * src->shape[1] : src->shape[0];
			w->I = src->shape[src->ndim - 1];
		}
		if (dim == src->ndim - 1)
			w->c0 += start;
		else if (dim == 0)
			w->r0 += start * (three ? src->shape[1] : 1);
		else
			w->r0 += start; /* inputs of a single expert */
		dst->shape[dim] = len;
		tpc_tensor_set_contiguous(dst);
		return tensor_sizes(dst);
	}
	if (len == 0 || src->numel == 0) {
		/* nothing to read: an empty (or zero-size) tensor of the right shape */
		int64_t shp[TPC_MAX_NDIM];
		memcpy(shp, src->shape, (size_t)src->ndim * sizeof(int64_t));
		shp[dim] = len;
		if (tpc_tensor_init_zero(dst, src->src_dtype, src->ndim, shp))
			return -1;
		dst->dtype = src->dtype;
		return tensor_sizes(dst);
	}
	if (src->nparts && dim == src->cat_dim) {
		/* keep the overlapping parts, each narrowed to the overlap */
		int ret = take_parts(dst, src, narrow_part, (int64_t[3]){dim, start, len});
		if (!ret) {
			dst->dtype = src->dtype;
			ret = tensor_sizes(dst);
		}
		return ret;
	}
	if (tpc_tensor_copy(dst, src))
		return -1;
	dst->shape[dim] = len;
	if (src->nparts) {
		for (int i = 0; i < dst->nparts; i++) {
			tpc_tensor t;
			if (tpc_tensor_narrow(&t, &src->parts[i], dim, start, len)) {
				tpc_tensor_release(dst);
				return -1;
			}
			tpc_tensor_release(&dst->parts[i]);
			dst->parts[i] = t;
		}
	} else if (!(src->flags & TPC_TF_ZERO)) {
		uint64_t bits = tpc_dtype_bits(src->src_dtype), off;
		if (tpc_mul_u64((uint64_t)start * (uint64_t)src->stride[dim], bits, &off) || off % 8) {
			tpc_tensor_release(dst);
			return -1;
		}
		dst->offset += off / 8;
		dst->storage_offset += start * src->stride[dim];
	} else {
		tpc_tensor_set_contiguous(dst);
	}
	if (tensor_sizes(dst)) {
		tpc_tensor_release(dst);
		return -1;
	}
	return 0;
}

/* dst = parts[0..np) concatenated on dim when ret is 0; the parts released
 * and their array freed either way. -1 on any failure. */
int tpc_tensor_cat_release(tpc_tensor *dst, tpc_tensor *parts, int np, int dim, int ret)
{
	if (!ret)
		ret = tpc_tensor_init_cat(dst, parts, np, dim);
	for (int i = 0; i < np; i++)
		tpc_tensor_release(&parts[i]);
	free(parts);
	return ret ? -1 : 0;
}

int tpc_tensor_ungroup(tpc_tensor *dst, const tpc_tensor *src, int dim, int64_t groups, int64_t per,
		       int64_t off, int64_t len)
{
	uint64_t whole;
	int ret = 0, np = 0;
	if (dim < 0 || dim >= src->ndim || groups < 1 || per < 0 || off < 0 || len < 0 || off > per ||
	    len > per - off || tpc_mul_u64((uint64_t)groups, (uint64_t)per, &whole) ||
	    whole != (uint64_t)src->shape[dim] || groups > INT32_MAX)
		return -1;
	if (groups == 1)
		return tpc_tensor_narrow(dst, src, dim, off, len);
	tpc_tensor *parts = tpc_calloc((size_t)groups, sizeof(*parts));
	if (!parts)
		return -1;
	for (int64_t g = 0; g < groups && !ret; g++, np++)
		ret = tpc_tensor_narrow(&parts[g], src, dim, g * per + off, len);
	return tpc_tensor_cat_release(dst, parts, np, dim, ret);
}

int tpc_tensor_tile_groups(tpc_tensor *dst, const tpc_tensor *src, int dim, int64_t off, int64_t groups, int64_t per,
			   int64_t unit)
{
	uint64_t units, span;
	if (dim < 0 || dim >= src->ndim || off < 0 || groups < 1 || per < 1 || unit < 1 ||
	    tpc_mul_u64((uint64_t)groups, (uint64_t)per, &units) || tpc_mul_u64(units, (uint64_t)unit, &span) ||
	    off > src->shape[dim] || span > (uint64_t)(src->shape[dim] - off) || units > INT32_MAX - 2)
		return -1;
	if (groups == 1 || per == 1)
		return tpc_tensor_copy(dst, src) ? -1 : 0;
	int64_t tail = src->shape[dim] - off - (int64_t)span;
	tpc_tensor *parts = tpc_calloc((size_t)units + 2, sizeof(*parts));
	int np = 0, ret = parts ? 0 : -1;
	if (!ret && off)
		ret = tpc_tensor_narrow(&parts[np++], src, dim, 0, off);
	for (int64_t p = 0; p < per && !ret; p++)
		for (int64_t g = 0; g < groups && !ret; g++)
			ret = tpc_tensor_narrow(&parts[np++], src, dim, off + (g * per + p) * unit, unit);
	if (!ret && tail)
		ret = tpc_tensor_narrow(&parts[np++], src, dim, off + (int64_t)span, tail);
	if (ret && np)
		np--; /* the part that failed holds nothing */
	if (!ret && src->dq) { /* windows of one dequantized weight (2-D: rows or columns) */
		ret = init_cat(dst, parts, np, dim, true);
		for (int i = 0; i < np; i++)
			tpc_tensor_release(&parts[i]);
		free(parts);
		return ret ? -1 : 0;
	}
	return tpc_tensor_cat_release(dst, parts, np, dim, ret);
}

/* rows_every of a composite along dim 0: the rows each part holds
 * (sel: start, step, count). */
static int rows_every_part(tpc_tensor *piece, const tpc_tensor *part, int64_t pos, const void *ctx)
{
	const int64_t *sel = ctx, start = sel[0], step = sel[1], count = sel[2];
	int64_t ps = part->shape[0], last = start + (count - 1) * step;
	int64_t i0 = pos <= start ? 0 : (pos - start + step - 1) / step;
	int64_t i1 = pos + ps - 1 >= last ? count - 1 : (pos + ps - 1 - start) / step;
	if (ps <= 0 || i0 > i1 || pos + ps <= start)
		return 1;
	return tpc_tensor_rows_every(piece, part, start + i0 * step - pos, step, i1 - i0 + 1) ? -1 : 0;
}

int tpc_tensor_rows_every(tpc_tensor *dst, const tpc_tensor *src, int64_t start, int64_t step, int64_t count)
{
	int ret = 0;
	if (src->ndim < 1 || count < 1 || step < 1 || start < 0 || start >= src->shape[0] ||
	    (src->shape[0] - 1 - start) / step < count - 1)
		return -1;
	if (count == 1 || step == 1)
		return tpc_tensor_narrow(dst, src, 0, start, (count - 1) * step + 1);
	if (src->nparts && src->cat_dim == 0) {
		ret = take_parts(dst, src, rows_every_part, (int64_t[3]){start, step, count});
	} else if (src->nparts || src->dq) {
		/* parts side by side (each holds every row), or a computed weight: row by row */
		tpc_tensor *sub = tpc_calloc((size_t)(src->dq ? count : src->nparts), sizeof(tpc_tensor));
		int n = 0;
		if (!sub || count > INT32_MAX)
			ret = -1;
		for (int64_t i = 0; !ret && i < (src->dq ? count : src->nparts); i++, n++)
			ret = src->dq ? tpc_tensor_narrow(&sub[i], src, 0, start + i * step, 1)
				      : tpc_tensor_rows_every(&sub[i], &src->parts[i], start, step, count);
		if (!ret)
			ret = init_cat(dst, sub, n, src->dq ? 0 : src->cat_dim, src->dq != NULL);
		for (int i = 0; sub && i < n; i++)
			tpc_tensor_release(&sub[i]);
		free(sub);
	} else if (!(ret = tpc_tensor_narrow(dst, src, 0, start, 1))) {
		dst->shape[0] = count;
		if (src->flags & TPC_TF_ZERO)
			tpc_tensor_set_contiguous(dst);
		else
			dst->stride[0] = src->stride[0] * step;
		if ((ret = tensor_sizes(dst)))
			tpc_tensor_release(dst);
	}
	if (!ret)
		dst->dtype = src->dtype;
	return ret ? -1 : 0;
}

/* dst: the n views in pc concatenated along dim 0, of dtype dt, unless ret
 * (an earlier failure) says otherwise; the views are released and pc freed
 * either way; -1 on any failure */
static int cat_rows(tpc_tensor *dst, tpc_tensor *pc, int n, tpc_dtype dt, int ret)
{
	ret = tpc_tensor_cat_release(dst, pc, n, 0, ret);
	if (!ret)
		dst->dtype = dt;
	return ret;
}

int tpc_tensor_rope_permute(tpc_tensor *dst, const tpc_tensor *src, int64_t heads, bool to_halves)
{
	memset(dst, 0, sizeof(*dst));
	if (src->ndim < 1 || heads < 1 || src->shape[0] % (2 * heads))
		return -1;
	int64_t hd = src->shape[0] / heads, half = hd / 2;
	/* to halves: per head its even rows, then its odd ones; to pairs: per
	 * head, row i of the first half, then row i of the second */
	int64_t np = to_halves ? 2 * heads : heads * half;
	if (np > INT32_MAX)
		return -1;
	tpc_tensor *pc = tpc_calloc((size_t)np, sizeof(tpc_tensor));
	int n = 0, ret = pc ? 0 : -1;
	for (int64_t h = 0; h < heads && !ret; h++)
		for (int64_t j = 0; j < (to_halves ? 2 : half) && !ret; j++, n++)
			ret = to_halves ? tpc_tensor_rows_every(&pc[n], src, h * hd + j, 2, half)
					: tpc_tensor_rows_every(&pc[n], src, h * hd + j, half, 2);
	return cat_rows(dst, pc, n, src->dtype, ret);
}

void tpc_tensor_transpose2d(tpc_tensor *t)
{
	if (t->ndim != 2)
		return;
	int64_t a = t->shape[0], s = t->stride[0];
	t->shape[0] = t->shape[1];
	t->shape[1] = a;
	t->stride[0] = t->stride[1];
	t->stride[1] = s;
	if (t->nparts) {
		for (int i = 0; i < t->nparts; i++)
			tpc_tensor_transpose2d(&t->parts[i]);
		t->cat_dim = 1 - t->cat_dim;
	}
}

int tpc_tensor_swap_dims(tpc_tensor *t, int a, int b)
{
	if (t->nparts || t->dq || a < 0 || b < 0 || a >= t->ndim || b >= t->ndim)
		return -1;
	int64_t s = t->shape[a], st = t->stride[a];
	t->shape[a] = t->shape[b];
	t->stride[a] = t->stride[b];
	t->shape[b] = s;
	t->stride[b] = st;
	return 0;
}

int tpc_tensor_unit_dim(tpc_tensor *t, int d, bool insert)
{
	int n = t->ndim, m = insert ? n + 1 : n - 1;
	if (t->nparts || t->dq || d < 0 || d > (insert ? n : n - 1) || (!insert && t->shape[d] != 1) ||
	    m > TPC_MAX_NDIM || m < 0)
		return -1;
	int64_t *s = tpc_calloc((size_t)(2 * (m ? m : 1)), sizeof(int64_t));
	if (!s)
		return -1;
	for (int i = 0, j = 0; i < m; i++) {
		if (insert && i == d) {
			s[i] = 1;
			s[m + i] = d < n ? t->shape[d] * t->stride[d] : 1; /* any: one element along it */
			continue;
		}
		if (!insert && j == d)
			j++;
		s[i] = t->shape[j];
		s[m + i] = t->stride[j];
		j++;
	}
	free(t->shape);
	t->shape = s;
	t->stride = s + m;
	t->ndim = m;
	return 0;
}

/* A leading dimension of size 1, in place (a composite's parts too, which
 * then concatenate one dimension further along). */
static int lift0(tpc_tensor *t)
{
	int n = t->ndim;
	/* a merged LoRA weight [O, I] reads as [1, O, I] (tpc__lora_read): one
	 * expert of a stack the GGUF writer makes */
	bool lora = t->dq && t->dq->kind == TPC_DQ_LORA && !t->dq->lora_epr && n == 2;
	if (n >= TPC_MAX_NDIM || (t->dq && !lora))
		return -1;
	int64_t *s = tpc_calloc((size_t)(2 * (n + 1)), sizeof(int64_t));
	if (!s)
		return -1;
	s[0] = 1;
	memcpy(s + 1, t->shape, (size_t)n * sizeof(int64_t));
	/* the stride of a size-1 dimension is never stepped: the C-contiguous one */
	s[n + 1] = n ? t->shape[0] * t->stride[0] : 1;
	memcpy(s + n + 2, t->stride, (size_t)n * sizeof(int64_t));
	free(t->shape);
	t->shape = s;
	t->stride = s + n + 1;
	t->ndim = n + 1;
	for (int i = 0; i < t->nparts; i++)
		if (lift0(&t->parts[i]))
			return -1;
	if (t->nparts)
		t->cat_dim++;
	return 0;
}

/* Drop a leading dimension of size 1, in place. */
static int drop0(tpc_tensor *t)
{
	int n = t->ndim;
	/* a computed weight: gpt-oss's MXFP4 experts [1, I, R] (tpc_tensor_narrow
	 * put the expert's rows at r0 of the [E * I, R] image) read as [I, R] */
	bool mx = t->dq && dq_rows3(t->dq) && n == 3;
	if (n < 1 || t->shape[0] != 1 || (t->dq && !mx) || (t->nparts && t->cat_dim == 0))
		return -1;
	int64_t *s = t->shape;
	memmove(s, s + 1, (size_t)(n - 1) * sizeof(int64_t));
	memmove(s + n - 1, s + n + 1, (size_t)(n - 1) * sizeof(int64_t));
	t->stride = s + n - 1;
	t->ndim = n - 1;
	for (int i = 0; i < t->nparts; i++)
		if (drop0(&t->parts[i]))
			return -1;
	if (t->nparts)
		t->cat_dim--;
	return 0;
}

int tpc_tensor_init_stack(tpc_tensor *dst, const tpc_tensor *parts, int nparts)
{
	int ret = 0, n = 0;
	memset(dst, 0, sizeof(*dst));
	if (nparts < 1)
		return -1;
	tpc_tensor *up = tpc_calloc((size_t)nparts, sizeof(*up));
	if (!up)
		return -1;
	bool dq = false; /* merged LoRA weights (lift0), read part by part */
	for (; n < nparts && !ret; n++) {
		ret = parts[n].ndim != parts[0].ndim || tpc_tensor_copy(&up[n], &parts[n]) || lift0(&up[n]);
		dq = dq || parts[n].dq;
	}
	if (!ret)
		ret = init_cat(dst, up, n, 0, dq);
	for (int i = 0; i < n; i++)
		tpc_tensor_release(&up[i]);
	free(up);
	return ret ? -1 : 0;
}

int tpc_tensor_select0(tpc_tensor *dst, const tpc_tensor *src, int64_t j)
{
	bool mx = src->dq && dq_rows3(src->dq) && src->ndim == 3; /* one expert of the stack */
	if (src->ndim < 1 || (src->dq && !mx) || tpc_tensor_narrow(dst, src, 0, j, 1))
		return -1;
	if (drop0(dst) || tensor_sizes(dst)) {
		tpc_tensor_release(dst);
		return -1;
	}
	return 0;
}

/* One stack of split_heads: head h's rows [h * per + off, + len), each
 * transposed with `tr`, stacked over the heads. */
static int head_stack(tpc_tensor *dst, const tpc_tensor *src, int64_t heads, int64_t per, int64_t off, int64_t len,
		      bool tr)
{
	tpc_tensor *p = tpc_calloc((size_t)heads, sizeof(*p));
	int n = 0, ret = p ? 0 : -1; /* n: the pieces made */
	while (!ret && n < heads) {
		if ((ret = tpc_tensor_narrow(&p[n], src, 0, n * per + off, len)))
			break;
		if (tr)
			tpc_tensor_transpose2d(&p[n]);
		n++;
	}
	if (!ret)
		ret = tpc_tensor_init_stack(dst, p, n);
	for (int i = 0; i < n; i++)
		tpc_tensor_release(&p[i]);
	free(p);
	return ret ? -1 : 0;
}

int tpc_tensor_split_heads(tpc_tensor *p0, tpc_tensor *p1, const tpc_tensor *src, int64_t heads, int64_t a,
			   bool transpose0)
{
	memset(p0, 0, sizeof(*p0));
	memset(p1, 0, sizeof(*p1));
	if (src->ndim != 2 || src->dq || heads < 1 || heads > INT32_MAX || a < 1 || src->shape[0] % heads ||
	    src->shape[0] / heads <= a)
		return -1;
	int64_t per = src->shape[0] / heads;
	if (head_stack(p0, src, heads, per, 0, a, transpose0))
		return -1;
	if (head_stack(p1, src, heads, per, a, per - a, false)) {
		tpc_tensor_release(p0);
		memset(p0, 0, sizeof(*p0));
		return -1;
	}
	p0->dtype = p1->dtype = src->dtype;
	return 0;
}

int tpc_tensor_join_heads(tpc_tensor *dst, const tpc_tensor *p0, const tpc_tensor *p1, bool transpose0)
{
	memset(dst, 0, sizeof(*dst));
	if (p0->ndim != 3 || p1->ndim != 3 || p0->dq || p1->dq || p0->shape[0] != p1->shape[0] || p0->shape[0] < 1 ||
	    p0->shape[0] > INT32_MAX / 2 || p0->shape[transpose0 ? 1 : 2] != p1->shape[2] ||
	    p0->src_dtype != p1->src_dtype || p0->dtype != p1->dtype)
		return -1;
	int64_t heads = p0->shape[0];
	tpc_tensor *p = tpc_calloc((size_t)(2 * heads), sizeof(*p));
	int n = 0, ret = p ? 0 : -1; /* n: the pieces made: head h's p0 block, then its p1 block */
	while (!ret && n < 2 * heads) {
		if ((ret = tpc_tensor_select0(&p[n], n % 2 ? p1 : p0, n / 2)))
			break;
		if (n % 2 == 0 && transpose0)
			tpc_tensor_transpose2d(&p[n]);
		n++;
	}
	return cat_rows(dst, p, n, p0->dtype, ret);
}
