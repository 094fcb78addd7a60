/* check_structure.c - the structure check: each rank's tensor holds the bytes
 * of its slice of the reference (padding rows zero), and both sides match the
 * checksums the manifest recorded. Bytes are compared and hashed in windows
 * of whole rows whose mapped pages are dropped behind them, so a model of any
 * size is checked in a few windows of memory. See verify.c for the pattern
 * every check follows. */
#include <math.h>
#include <string.h>

#include "tpc_hash.h"
#include "tpc_io.h"
#include "tpc_util.h"
#include "vint.h"

typedef struct bytes_cmp {
	const vrun *R;
	tpc_vresult *res;
	int t;
	tpc_dtype dt;
	/* the rank tensor's checksum, fed on the way while its bytes come in
	 * the order of its image (one part split along dim 0, or none) */
	const tpc_tensor *rt;
	tpc_hash *h;             /* NULL: hashed apart */
	uint64_t next;           /* the next byte of rt's image the hash wants */
	bool in_order;
} bytes_cmp;

/* Bytes [off, off + n) of t's image: where they are mapped, else read into buf. */
static const uint8_t *view_bytes(const vrun *R, const tpc_ckpt *ck, const tpc_tensor *t, uint64_t off, uint64_t n,
				 uint8_t *buf, int *ret)
{
	const uint8_t *p = tpc__mapped(ck, t, off, n);
	if (p)
		return p;
	*ret = tpc_ckpt_read_bytes(ck, t, off, n, buf, R->e);
	return buf;
}

/* Feed the rank tensor's checksum bytes [off, off + n) of view a of it. */
static void hash_feed(bytes_cmp *bc, const tpc_tensor *a, uint64_t off, const uint8_t *p, uint64_t n)
{
	if (!bc->h || !bc->in_order)
		return;
	if (a->src != bc->rt->src || !tpc_tensor_is_contiguous(a) || a->offset < bc->rt->offset ||
	    a->offset - bc->rt->offset + off != bc->next) {
		bc->in_order = false;
		return;
	}
	tpc_hash_update(bc->h, p, (size_t)n);
	bc->next += n;
}

static double elem_val(const uint8_t *p, tpc_dtype dt)
{
	double d;
	if (tpc__float_dtype(dt) && !tpc__decode_d(&d, p, dt, 1))
		return d;
	uint64_t u = 0;
	memcpy(&u, p, tpc_dtype_size(dt) < 8 ? tpc_dtype_size(dt) : 8);
	return (double)u;
}

/*
 * Compare the C-order images of two same-shaped views (b == NULL: b is all
 * zero, the padding), in bounded chunks. `map` turns a view element index
 * into the rank tensor's.
 */
typedef struct idx_map {
	int64_t inner, len, full, off; /* along the split dim */
} idx_map;

static int64_t map_idx(const idx_map *m, int64_t v)
{
	if (!m->len)
		return v;
	int64_t in = v % m->inner, mid = (v / m->inner) % m->len, outer = v / (m->inner * m->len);
	return (outer * m->full + m->off + mid) * m->inner + in;
}

/* Compare n bytes of a's image (pa) with b's (pb), at byte `at` of the
 * compared view's image. Counting stops at TPC_VERIFY_COUNT_MAX differing
 * elements (res->capped: there are more); the elements are still counted
 * and the bytes still hashed by the caller. */
static void cmp_bytes(bytes_cmp *bc, const idx_map *map, uint64_t at, const uint8_t *pa, const uint8_t *pb, uint64_t n)
{
	unsigned es = tpc_dtype_size(bc->dt);
	tpc_vresult *r = bc->res;
	r->elements += n / es;
	if (r->capped || !memcmp(pa, pb, (size_t)n))
		return;
	for (uint64_t j = 0; j < n; j += es) {
		if (!memcmp(pa + j, pb + j, es))
			continue;
		if (r->mismatches >= TPC_VERIFY_COUNT_MAX) {
			r->capped = 1;
			return;
		}
		double x = elem_val(pb + j, bc->dt), y = elem_val(pa + j, bc->dt);
		double d = fabs(x - y);
		r->mismatches++;
		if (d > r->max_abs || isnan(d))
			r->max_abs = d;
		tpc__res_diff(r, bc->t, map_idx(map, (int64_t)((at + j) / es)), x, y);
	}
}

/* A 2-D view whose rows are each one run of a mapped file (the column slice
 * of a row-parallel weight in the reference): row r at the result + r * *ld,
 * the pages of its extent mapped in one call; NULL when it is not (then a
 * read gathers the rows). */
static const uint8_t *mapped_rows(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t *ld)
{
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	uint64_t lo, hi;
	if (!m || !m->data || m->fd < 0 || t->dq || t->nparts || t->ndim != 2 || t->stride[1] != 1 || t->stride[0] < 0 ||
	    t->dtype != t->src_dtype || (t->flags & (TPC_TF_ZERO | TPC_TF_NODATA | TPC_TF_BYTESWAP)) || !t->numel)
		return NULL;
	tpc_tensor_extent(t, &lo, &hi);
	if (hi <= lo || hi > m->size || lo != t->offset)
		return NULL;
	tpc_map_populate(m, lo, hi - lo);
	*ld = (uint64_t)t->stride[0] * tpc_dtype_size(t->src_dtype);
	return m->data + lo;
}

/* Compare one chunk: a's and b's bytes [off, off + n) of their images. */
static int cmp_chunk(bytes_cmp *bc, const tpc_ckpt *ca, const tpc_tensor *a, const tpc_ckpt *cb, const tpc_tensor *b,
		     const idx_map *map, uint64_t base, uint64_t off, uint64_t n, uint8_t *ba, uint8_t *bb)
{
	int ret = 0;
	uint64_t ld = 0;
	const uint8_t *pa = view_bytes(bc->R, ca, a, off, n, ba, &ret), *pb = bb;
	if (ret)
		return ret;
	hash_feed(bc, a, off, pa, n);
	const uint8_t *rows = b && !off && n == b->numel * tpc_dtype_size(bc->dt) && !tpc_tensor_is_contiguous(b)
				      ? mapped_rows(cb, b, &ld) : NULL;
	if (rows) { /* row by row where they are mapped: no gathering copy */
		uint64_t w = n / (uint64_t)b->shape[0];
		for (int64_t r = 0; r < b->shape[0]; r++)
			cmp_bytes(bc, map, base + (uint64_t)r * w, pa + (uint64_t)r * w, rows + (uint64_t)r * ld, w);
		return 0;
	}
	if (b)
		pb = view_bytes(bc->R, cb, b, off, n, bb, &ret);
	else
		memset(bb, 0, (size_t)n);
	if (!ret)
		cmp_bytes(bc, map, base + off, pa, pb, n);
	return ret;
}

/*
 * Compare the C-order images of two same-shaped views (b == NULL: b is all
 * zero, the padding), in chunks of whole dim-0 rows of at most `cap` bytes,
 * dropping each chunk's mapped pages once compared (the RSS stays at a few
 * chunks whatever the tensor's size). `map` turns a view element index into
 * the rank tensor's.
 */
static int cmp_views(bytes_cmp *bc, const tpc_ckpt *ca, const tpc_tensor *a, const tpc_ckpt *cb,
		     const tpc_tensor *b, const idx_map *map, uint8_t *ba, uint8_t *bb, size_t cap)
{
	unsigned es = tpc_dtype_size(bc->dt);
	uint64_t total = a->numel * es;
	int ret = 0;
	if (a->ndim >= 1 && a->shape[0] > 1 && total > cap) {
		uint64_t row = total / (uint64_t)a->shape[0];
		int64_t per = row ? (int64_t)(cap / row) : a->shape[0];
		if (per >= 1) {
			for (int64_t r0 = 0; r0 < a->shape[0] && !ret; r0 += per) {
				int64_t nr = a->shape[0] - r0 < per ? a->shape[0] - r0 : per;
				tpc_tensor va, vb;
				if (tpc_tensor_narrow(&va, a, 0, r0, nr))
					return tpc_err_nomem(bc->R->e);
				if (b && tpc_tensor_narrow(&vb, b, 0, r0, nr)) {
					tpc_tensor_release(&va);
					return tpc_err_nomem(bc->R->e);
				}
				ret = cmp_chunk(bc, ca, &va, cb, b ? &vb : NULL, map, (uint64_t)r0 * row, 0,
						(uint64_t)nr * row, ba, bb);
				tpc_ckpt_drop_pages(ca, &va);
				if (b)
					tpc_ckpt_drop_pages(cb, &vb);
				tpc_tensor_release(&va);
				if (b)
					tpc_tensor_release(&vb);
			}
			return ret;
		}
	}
	uint64_t chunk = cap / es * es;
	for (uint64_t off = 0; off < total && !ret; off += chunk) {
		uint64_t n = total - off < chunk ? total - off : chunk;
		ret = cmp_chunk(bc, ca, a, cb, b, map, 0, off, n, ba, bb);
		tpc_ckpt_drop_range(ca, a, off, n);
		if (b)
			tpc_ckpt_drop_range(cb, b, off, n);
	}
	tpc_ckpt_drop_pages(ca, a);
	if (b)
		tpc_ckpt_drop_pages(cb, b);
	return ret;
}

/* The checksum of a tensor in windows of its mapping (dropped behind), else
 * through the library's stream (a read). */
static int hash_mapped(const vrun *R, const tpc_ckpt *ck, const tpc_tensor *t, tpc_hash_alg alg, uint8_t *out)
{
	uint64_t n = t->numel * tpc_dtype_bits(t->src_dtype) / 8;
	tpc_hash h;
	int ret;
	if (!n || !tpc__mapped(ck, t, 0, 1))
		return tpc_ckpt_hash_tensor(ck, t, alg, out, R->e);
	if ((ret = tpc_hash_begin(&h, alg, R->e)))
		return ret;
	for (uint64_t off = 0; off < n; off += TPC_V_CHUNK) {
		uint64_t k = n - off < TPC_V_CHUNK ? n - off : TPC_V_CHUNK;
		tpc_hash_update(&h, tpc__mapped(ck, t, off, k), (size_t)k);
		tpc_ckpt_drop_range(ck, t, off, k);
	}
	tpc_hash_final(&h, out);
	return 0;
}

/* The checksums the manifest recorded: this rank's tensor (hashed on the way
 * by the comparison when its bytes came in order, else from its mapping once
 * more) and, on rank 0, the reference's. */
static int check_hashes(vrun *R, const tpc_vtensor *v, bytes_cmp *bc, tpc_vresult *res)
{
	size_t hl = tpc_hash_len(v->hash_alg);
	const tpc_tensor *rt = v->rank[R->me].t;
	uint8_t h[TPC_HASH_MAX];
	int ret = 0;
	if (bc->h) {
		if (bc->in_order && bc->next == rt->numel * tpc_dtype_bits(rt->src_dtype) / 8) {
			tpc_hash_final(bc->h, h);
		} else {
			tpc_hash_release(bc->h);
			ret = hash_mapped(R, v->rank[R->me].ck, rt, v->hash_alg, h);
		}
		bc->h = NULL;
		if (!ret && memcmp(h, v->rank_hash[R->me], hl))
			tpc__res_fail(res, "rank %d: %s of '%s' differs from the recorded one", R->me,
				      tpc_hash_name(v->hash_alg), v->name);
	}
	if (!ret && v->has_hash && hl && R->me == 0 && !(ret = hash_mapped(R, v->ref_ck, v->ref, v->hash_alg, h)) &&
	    memcmp(h, v->hash, hl))
		tpc__res_fail(res, "the reference '%s' differs from the recorded %s", v->name, tpc_hash_name(v->hash_alg));
	return ret;
}

int tpc__check_structure(vrun *R, int64_t i)
{
	const tpc_vtensor *v = &R->s->t[i];
	tpc_vresult res;
	tpc__res_init(R, &res, TPC_VC_STRUCTURE, v->name, v->ref->src_dtype);
	res.rtol = res.atol = 0;
	char msg[sizeof(res.msg)] = "";
	int ret = 0, me = R->me;
	uint8_t *ba = NULL, *bb = NULL;
	size_t balen = 0;
	tpc_tensor va, vb;
	bool have_a = false, have_b = false;
	if (!v->rank[me].ck)
		goto done;
	if (!tpc__rank_ok(R, i, me, msg, sizeof(msg))) {
		tpc__res_fail(&res, "%s", msg);
		goto done;
	}
	if (!tpc_vtensor_holds(v, R->tp, me))
		goto done; /* an expert of another EP group, rightly absent */
	const tpc_tensor *rt = v->rank[me].t;
	/* windows no larger than the bigger of the two tensors (most are small),
	 * from the scratch pool: two new 8 MiB allocations a tensor cost an
	 * mmap/munmap and a fault of every page each (and the sanitizer build's
	 * shadow poisoning of all of it) */
	uint64_t most = (rt->numel > v->ref->numel ? rt->numel : v->ref->numel) * 8 + 64;
	size_t cap = most < TPC_V_CHUNK ? (size_t)most : TPC_V_CHUNK;
	if (!(ba = tpc_scratch_get(2 * cap, &balen))) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	bb = ba + cap;
	bytes_cmp bc = {R, &res, me, v->ref->src_dtype, rt, NULL, 0, true};
	tpc_hash hs;
	if (v->rank_hash && tpc_hash_len(v->hash_alg)) {
		if ((ret = tpc_hash_begin(&hs, v->hash_alg, R->e)))
			goto done;
		bc.h = &hs;
	}
	if (v->dim < 0) {
		idx_map id = {1, 0, 0, 0};
		ret = cmp_views(&bc, v->rank[me].ck, rt, v->ref_ck, v->ref, &id, ba, bb, cap);
	} else {
		vloc L;
		tpc__loc_of(R, i, me, &L);
		int64_t inner = 1;
		for (int d = v->dim + 1; d < v->ref->ndim; d++)
			inner *= v->ref->shape[d];
		for (int k = 0; k < L.nparts && !ret; k++) {
			int64_t real = L.size[k] - L.start[k];
			real = real < 0 ? 0 : (real > L.len[k] ? L.len[k] : real);
			idx_map mp = {inner ? inner : 1, real, rt->shape[v->dim], L.off[k]};
			if (real > 0) {
				if (tpc_tensor_narrow(&va, rt, v->dim, L.off[k], real) ||
				    !(have_a = true) ||
				    tpc_tensor_narrow(&vb, v->ref, v->dim, L.poff[k] + L.start[k], real)) {
					ret = tpc_err_nomem(R->e);
					break;
				}
				have_b = true;
				ret = cmp_views(&bc, v->rank[me].ck, &va, v->ref_ck, &vb, &mp, ba, bb, cap);
				tpc_tensor_release(&va);
				tpc_tensor_release(&vb);
				have_a = have_b = false;
			}
			if (!ret && L.len[k] > real) { /* padding rows must be zero */
				mp.len = L.len[k] - real;
				mp.off = L.off[k] + real;
				if (tpc_tensor_narrow(&va, rt, v->dim, L.off[k] + real, L.len[k] - real)) {
					ret = tpc_err_nomem(R->e);
					break;
				}
				have_a = true;
				ret = cmp_views(&bc, v->rank[me].ck, &va, NULL, NULL, &mp, ba, bb, cap);
				tpc_tensor_release(&va);
				have_a = false;
			}
		}
	}
	if (!ret && res.mismatches)
		tpc__res_fail(&res, "rank %d: %s%llu of %llu elements differ from the reference slice%s%s", me,
			      res.capped ? "more than " : "", (unsigned long long)res.mismatches,
			      (unsigned long long)res.elements, v->nparts > 1 ? " (fused parts)" : "",
			      res.capped ? " (counting stops there)" : "");
	if (!ret)
		ret = check_hashes(R, v, &bc, &res);
	if (bc.h)
		tpc_hash_release(bc.h);
done:
	if (have_a)
		tpc_tensor_release(&va);
	if (have_b)
		tpc_tensor_release(&vb);
	tpc_scratch_put(ba, balen);
	return tpc__finish(R, &res, ret);
}
