/* verify.c - the checks a verify run makes over a set description (vset.c);
 * see tpc_verify.h.
 *
 * Every check follows one pattern on every rank:
 *   1. readiness: the rank looks at its own tensors (present, shaped as the
 *      description says, splits a tensor-parallel block can use) and the ranks
 *      exchange their verdicts; any rank's problem ends the check as a
 *      failure, on every rank, before anyone computes;
 *   2. the rank computes its part in fp32 and takes part in the collectives;
 *   3. rank 0 computes the unsplit reference in fp64 and compares;
 *   4. the ranks exchange their results (and any error), rank 0 merges them
 *      into the report.
 * The exchanges are allgathers of fixed-size records, so a rank never waits
 * on one that has given up. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <unistd.h>

#include "gpu/tpc_gpu.h"
#include "tpc_io.h"
#include "tpc_util.h"
#include "vint.h"

/* ---- options and tolerances ---- */

void tpc_verify_opts_init(tpc_verify_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->seed = 1;
	o->tokens = 8;
	o->rtol = o->atol = -1;
	o->checks = TPC_VCHECK_ALL;
	o->local_rank = o->local_size = -1;
}

void tpc_verify_local_rank(char *(*lookup)(const char *name), int *local_rank, int *local_size)
{
	tpc_gpu_local_rank(lookup, local_rank, local_size);
}

void tpc_verify_tolerance(tpc_dtype dt, bool model, double *rtol, double *atol)
{
	if (dt == TPC_F16 || dt == TPC_BF16) {
		*rtol = 1e-2;
		*atol = 1e-3;
	} else {
		*rtol = model ? 1e-4 : 1e-5;
		*atol = 1e-6;
	}
}

/* ---- running ---- */

typedef struct run {
	const tpc_verify_set *s;
	const tpc_verify_opts *o;
	tpc_coll *c;
	tpc_verify_report *rep;
	tpc_err *e;
	int me, tp;
	int64_t T;
	vctx xf, xd;
	tpc_vresult *xb;
	bool any_fail;
	int threads, ref_threads; /* OpenMP threads of this rank, and of rank 0's reference work */
} run;

/* Rank 0 computes the unsplit reference while the other ranks wait for its
 * result, so it may use every core meanwhile (the results do not depend on
 * the thread count). */
static void ref_begin(const run *R)
{
#ifdef _OPENMP
	if (R->ref_threads > 0)
		omp_set_num_threads(R->ref_threads);
#else
	(void)R;
#endif
}

static void ref_end(const run *R)
{
#ifdef _OPENMP
	if (R->ref_threads > 0)
		omp_set_num_threads(R->threads);
#else
	(void)R;
#endif
}

static void res_init(run *R, tpc_vresult *r, tpc_vcheck kind, const char *name, tpc_dtype dt)
{
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	tpc_sanitize(r->name, sizeof(r->name), name);
	snprintf(r->dtype, sizeof(r->dtype), "%s", dt ? tpc_dtype_name(dt) : "-");
	double rt, at;
	tpc_verify_tolerance(dt, kind == TPC_VC_MODEL, &rt, &at);
	r->rtol = R->o->rtol >= 0 ? R->o->rtol : rt;
	r->atol = R->o->atol >= 0 ? R->o->atol : at;
}

static void res_fail(tpc_vresult *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void res_fail(tpc_vresult *r, const char *fmt, ...)
{
	r->status = TPC_VR_FAIL;
	if (r->msg[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
}

static void res_diff(tpc_vresult *r, int rank, int64_t idx, double exp, double act)
{
	if (r->ndiff < TPC_VERIFY_NDIFF)
		r->diff[r->ndiff++] = (tpc_vdiff){rank, idx, exp, act};
}

/*
 * Exchange the ranks' results: every rank gets the merged result (counts
 * summed, maxima taken, first differences in rank order, the first failure
 * message) and whether any rank failed. Rank 0 appends the merged result to
 * the report when `final` or when the check failed.
 */
static int exchange(run *R, tpc_vresult *res, bool final, bool *failed)
{
	int ret = tpc_coll_allgather(R->c, res, sizeof(*res), R->xb, R->e);
	if (ret)
		return ret;
	tpc_vresult m = R->xb[0];
	m.ndiff = 0;
	m.mismatches = m.elements = 0;
	bool fail = false;
	for (int r = 0; r < R->tp; r++) {
		const tpc_vresult *x = &R->xb[r];
		m.elements += x->elements;
		m.mismatches += x->mismatches;
		if (x->max_abs > m.max_abs || isnan(x->max_abs))
			m.max_abs = x->max_abs;
		if (x->max_rel > m.max_rel || isnan(x->max_rel))
			m.max_rel = x->max_rel;
		for (int d = 0; d < x->ndiff && m.ndiff < TPC_VERIFY_NDIFF; d++)
			m.diff[m.ndiff++] = x->diff[d];
		if (x->status == TPC_VR_FAIL) {
			fail = true;
			if (m.status != TPC_VR_FAIL || !m.msg[0])
				memcpy(m.msg, x->msg, sizeof(m.msg));
			m.status = TPC_VR_FAIL;
		}
	}
	if (!fail && m.status != TPC_VR_SKIP)
		m.status = TPC_VR_PASS;
	*failed = fail;
	if (fail || final) {
		if (fail)
			R->any_fail = true;
		*res = m;
		if (R->me == 0 && R->rep && (ret = tpc_verify_report_add(R->rep, &m)))
			return ret;
	}
	return 0;
}

/* The end of a check: an error on this rank aborts the group (the others'
 * collectives return), else the results are exchanged and reported. */
static int finish(run *R, tpc_vresult *res, int ret)
{
	bool failed;
	if (ret) {
		tpc_coll_abort(R->c);
		return ret;
	}
	return exchange(R, res, true, &failed);
}

/* rms of n values */
static double rms(const double *v, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += v[i] * v[i];
	return n ? sqrt(s / (double)n) : 0;
}

static void cmp(tpc_vresult *r, double scale, int rank, int64_t idx, double exp, double act)
{
	if ((isnan(exp) && isnan(act)) || (isinf(exp) && exp == act)) {
		/* the unsplit layer gives NaN (a weight that is NaN: random FP8
		 * bytes, a broken checkpoint) or the same infinity here, and so
		 * does the split one: they agree */
		r->elements++;
		return;
	}
	double err = fabs(act - exp), s = fmax(fabs(exp), scale);
	double rel = s > 0 ? err / s : (err > 0 ? INFINITY : 0);
	r->elements++;
	if (err > r->max_abs || isnan(err))
		r->max_abs = err;
	if (rel > r->max_rel || isnan(rel))
		r->max_rel = rel;
	if (!(err <= r->atol + r->rtol * s)) {
		r->mismatches++;
		res_diff(r, rank, idx, exp, act);
		r->status = TPC_VR_FAIL;
	}
}

static void fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape)
{
	size_t o = 0;
	o += (size_t)snprintf(buf + o, n - o, "[");
	for (int d = 0; d < ndim && o < n; d++)
		o += (size_t)snprintf(buf + o, n - o, d ? ", %lld" : "%lld", (long long)shape[d]);
	if (o < n)
		snprintf(buf + o, n - o, "]");
}

/* Is rank t's tensor i present with the shape and dtype the description
 * gives? On no, a message naming the rank. */
static bool rank_ok(const run *R, int64_t i, int t, char *msg, size_t n)
{
	const tpc_vtensor *v = &R->s->t[i];
	const tpc_tensor *rt = v->rank[t].t, *ref = v->ref;
	if (!v->rank[t].ck)
		return true; /* not loaded here: its own process checks it */
	if (!tpc_vtensor_holds(v, R->tp, t)) {
		int g = tpc_vtensor_tp(v, R->tp);
		if (rt)
			snprintf(msg, n, "rank %d holds '%s', an expert of EP group %d (ranks %d..%d) only", t, v->name,
				 v->ep_group, v->ep_group * g, v->ep_group * g + g - 1);
		return !rt;
	}
	if (!rt) {
		snprintf(msg, n, "rank %d lacks tensor '%s'", t, v->name);
		return false;
	}
	if (rt->src_dtype != ref->src_dtype) {
		snprintf(msg, n, "rank %d: '%s' is %s, the reference %s", t, v->name, tpc_dtype_name(rt->src_dtype),
			 tpc_dtype_name(ref->src_dtype));
		return false;
	}
	int64_t want[TPC_MAX_NDIM];
	memcpy(want, ref->shape, sizeof(int64_t) * (size_t)ref->ndim);
	if (v->dim >= 0)
		want[v->dim] = tpc_vtensor_local_dim(v, R->tp);
	bool same = rt->ndim == ref->ndim && !memcmp(rt->shape, want, sizeof(int64_t) * (size_t)ref->ndim);
	if (!same) {
		char a[128], b[128];
		fmt_shape(a, sizeof(a), rt->ndim, rt->shape);
		fmt_shape(b, sizeof(b), ref->ndim, want);
		snprintf(msg, n, "rank %d: '%.100s' has shape %.50s, expected %.50s", t, v->name, a, b);
	}
	return same;
}

static void loc_of(const run *R, int64_t i, int t, vloc *L)
{
	const tpc_vtensor *v = &R->s->t[i];
	memset(L, 0, sizeof(*L));
	L->name = v->name;
	L->transposed = v->transposed;
	L->dim = v->dim;
	L->nparts = v->nparts ? v->nparts : 1;
	if (t < 0) {
		L->ck = v->ref_ck;
		L->t = v->ref;
	} else {
		L->ck = v->rank[t].ck;
		L->t = v->rank[t].t;
	}
	int64_t off = 0, poff = 0;
	for (int k = 0; k < v->nparts; k++) {
		const tpc_vpart *p = &v->part[k];
		L->size[k] = p->size;
		L->poff[k] = poff;
		L->replicas[k] = t < 0 ? 1 : p->replicas;
		L->len[k] = t < 0 ? p->size : tpc_vpart_len(v, k, R->tp);
		L->start[k] = t < 0 ? 0 : tpc_vpart_start(v, k, R->tp, t);
		L->off[k] = off;
		off += L->len[k];
		poff += p->size;
	}
	if (!v->nparts) {
		L->replicas[0] = 1;
		L->len[0] = L->size[0] = v->ref->ndim ? v->ref->shape[0] : 1;
	}
}

/* What a 2-D split does to the math: output features split (col), input
 * features split (row), or none. */
enum { MK_NONE, MK_COL, MK_ROW, MK_REPL };
static int math_kind(const tpc_vtensor *v)
{
	if (v->dim < 0)
		return MK_REPL;
	if (!v->ref || v->ref->ndim != 2)
		return MK_NONE;
	return v->dim == (v->transposed ? 1 : 0) ? MK_COL : MK_ROW;
}

static uint64_t digest_f(const float *p, size_t n)
{
	return tpc__fnv(TPC_FNV_INIT, p, n * sizeof(float));
}

/* ---- structure ---- */

typedef struct bytes_cmp {
	const run *R;
	tpc_vresult *res;
	int t;
	tpc_dtype dt;
} bytes_cmp;

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

/* Compare one chunk: a's and b's bytes [off, off + n) of their images. */
static int cmp_chunk(bytes_cmp *bc, const tpc_ckpt *ca, const tpc_tensor *a, const tpc_ckpt *cb, const tpc_tensor *b,
		     const idx_map *map, uint64_t base, uint64_t off, uint64_t n, uint8_t *ba, uint8_t *bb)
{
	unsigned es = tpc_dtype_size(bc->dt);
	int ret;
	if ((ret = tpc_ckpt_read_bytes(ca, a, off, n, ba, bc->R->e)))
		return ret;
	if (b) {
		if ((ret = tpc_ckpt_read_bytes(cb, b, off, n, bb, bc->R->e)))
			return ret;
	} else {
		memset(bb, 0, (size_t)n);
	}
	bc->res->elements += n / es;
	if (!memcmp(ba, bb, (size_t)n))
		return 0;
	for (uint64_t j = 0; j < n; j += es) {
		if (!memcmp(ba + j, bb + j, es))
			continue;
		double x = elem_val(bb + j, bc->dt), y = elem_val(ba + j, bc->dt);
		double d = fabs(x - y);
		bc->res->mismatches++;
		if (d > bc->res->max_abs || isnan(d))
			bc->res->max_abs = d;
		res_diff(bc->res, bc->t, map_idx(map, (int64_t)((base + off + j) / es)), x, y);
	}
	return 0;
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
				tpc__drop_view(ca, &va);
				if (b)
					tpc__drop_view(cb, &vb);
				tpc_tensor_release(&va);
				if (b)
					tpc_tensor_release(&vb);
			}
			return ret;
		}
	}
	uint64_t chunk = cap / es * es;
	for (uint64_t off = 0; off < total && !ret; off += chunk)
		ret = cmp_chunk(bc, ca, a, cb, b, map, 0, off, total - off < chunk ? total - off : chunk, ba, bb);
	tpc__drop_view(ca, a);
	if (b)
		tpc__drop_view(cb, b);
	return ret;
}

/* The alg digest of t's C-order image, streamed in chunks of whole dim-0 rows
 * whose mapped pages are dropped behind the hash (tpc_ckpt_hash_tensor would
 * leave a whole model resident). */
static int hash_view(const tpc_ckpt *ck, const tpc_tensor *t, tpc_hash_alg alg, uint8_t out[TPC_HASH_MAX],
		     uint8_t *buf, size_t cap, tpc_err *e)
{
	tpc_hash h;
	unsigned es = tpc_dtype_size(t->src_dtype);
	uint64_t total = t->numel * tpc_dtype_bits(t->src_dtype) / 8;
	int ret;
	if ((ret = tpc_hash_begin(&h, alg, e)))
		return ret;
	if (t->ndim >= 1 && t->shape[0] > 1 && total > cap && es * 8 == tpc_dtype_bits(t->src_dtype)) {
		uint64_t row = total / (uint64_t)t->shape[0];
		int64_t per = row && cap / row ? (int64_t)(cap / row) : 1;
		for (int64_t r0 = 0; r0 < t->shape[0] && !ret; r0 += per) {
			int64_t nr = t->shape[0] - r0 < per ? t->shape[0] - r0 : per;
			tpc_tensor v;
			if (tpc_tensor_narrow(&v, t, 0, r0, nr)) {
				ret = tpc_err_nomem(e);
				break;
			}
			uint64_t n = (uint64_t)nr * row;
			for (uint64_t off = 0; off < n && !ret; off += cap) {
				uint64_t k = n - off < cap ? n - off : cap;
				if (!(ret = tpc_ckpt_read_bytes(ck, &v, off, k, buf, e)))
					tpc_hash_update(&h, buf, (size_t)k);
			}
			tpc__drop_view(ck, &v);
			tpc_tensor_release(&v);
		}
	} else {
		for (uint64_t off = 0; off < total && !ret; off += cap) {
			uint64_t k = total - off < cap ? total - off : cap;
			if (!(ret = tpc_ckpt_read_bytes(ck, t, off, k, buf, e)))
				tpc_hash_update(&h, buf, (size_t)k);
		}
		tpc__drop_view(ck, t);
	}
	if (ret)
		tpc_hash_release(&h);
	else
		tpc_hash_final(&h, out);
	return ret;
}

static int check_structure(run *R, int64_t i)
{
	const tpc_vtensor *v = &R->s->t[i];
	tpc_vresult res;
	res_init(R, &res, TPC_VC_STRUCTURE, v->name, v->ref->src_dtype);
	res.rtol = res.atol = 0;
	char msg[sizeof(res.msg)] = "";
	int ret = 0, me = R->me;
	uint8_t *ba = NULL, *bb = NULL;
	size_t balen = 0;
	tpc_tensor va, vb;
	bool have_a = false, have_b = false;
	if (!v->rank[me].ck)
		goto done;
	if (!rank_ok(R, i, me, msg, sizeof(msg))) {
		res_fail(&res, "%s", msg);
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
	bytes_cmp bc = {R, &res, me, v->ref->src_dtype};
	if (v->dim < 0) {
		idx_map id = {1, 0, 0, 0};
		ret = cmp_views(&bc, v->rank[me].ck, rt, v->ref_ck, v->ref, &id, ba, bb, cap);
	} else {
		vloc L;
		loc_of(R, i, me, &L);
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
		res_fail(&res, "rank %d: %llu of %llu elements differ from the reference slice%s", me,
			 (unsigned long long)res.mismatches, (unsigned long long)res.elements,
			 v->nparts > 1 ? " (fused parts)" : "");
	size_t hl = tpc_hash_len(v->hash_alg);
	if (!ret && v->rank_hash && hl) {
		uint8_t h[TPC_HASH_MAX];
		if (!(ret = hash_view(v->rank[me].ck, rt, v->hash_alg, h, ba, cap, R->e)) && memcmp(h, v->rank_hash[me], hl))
			res_fail(&res, "rank %d: %s of '%s' differs from the recorded one", me, tpc_hash_name(v->hash_alg),
				 v->name);
	}
	if (!ret && v->has_hash && hl && me == 0) {
		uint8_t h[TPC_HASH_MAX];
		if (!(ret = hash_view(v->ref_ck, v->ref, v->hash_alg, h, ba, cap, R->e)) && memcmp(h, v->hash, hl))
			res_fail(&res, "the reference '%s' differs from the recorded %s", v->name, tpc_hash_name(v->hash_alg));
	}
done:
	if (have_a)
		tpc_tensor_release(&va);
	if (have_b)
		tpc_tensor_release(&vb);
	tpc_scratch_put(ba, balen);
	return finish(R, &res, ret);
}

/* ---- layers ---- */

/* Fill x[T, n] with the seeded inputs of the columns [c0, c0+n) of a
 * [T, full] matrix. */
static void seeded_f(float *x, int64_t T, int64_t n, int64_t full, int64_t c0, uint64_t seed, uint64_t stream)
{
	for (int64_t t = 0; t < T; t++)
		for (int64_t j = 0; j < n; j++)
			x[t * n + j] = (float)tpc_verify_uniform(seed, stream, (uint64_t)(t * full + c0 + j));
}

static void seeded_d(double *x, int64_t T, int64_t n, uint64_t seed, uint64_t stream)
{
	for (int64_t t = 0; t < T; t++)
		for (int64_t j = 0; j < n; j++)
			x[t * n + j] = tpc_verify_uniform(seed, stream, (uint64_t)(t * n + j));
}

/* The linear layer of tensor i on rank t (-1: reference) with its bias. */
static void lin_of(const run *R, int64_t i, int t, bool row, vlin *L)
{
	const tpc_vtensor *v = &R->s->t[i];
	memset(L, 0, sizeof(*L));
	loc_of(R, i, t, &L->w);
	L->row = row;
	L->bias_once = true;
	if (v->bias >= 0) {
		loc_of(R, v->bias, t, &L->b);
		if (t >= 0 && row)
			L->bias_once = R->s->t[v->bias].row_bias;
	}
}

/* A layer's bias on this rank: present and shaped as its split says, and for
 * a row-parallel layer replicated. */
static bool bias_ok(const run *R, int64_t i, bool row, char *msg, size_t n)
{
	const tpc_vtensor *v = &R->s->t[i];
	if (v->bias < 0)
		return true;
	const tpc_vtensor *b = &R->s->t[v->bias];
	if (b->ref->ndim != 1 || !tpc__float_dtype(b->ref->src_dtype)) {
		snprintf(msg, n, "bias '%s' is not a 1-D float tensor", b->name);
		return false;
	}
	if (row && b->dim >= 0) {
		snprintf(msg, n, "bias '%s' of row-parallel '%s' is split %s; it must be replicated", b->name, v->name,
			 tpc_vsplit_name(b->split));
		return false;
	}
	if (!row) {
		if (b->dim < 0 && R->tp > 1) {
			snprintf(msg, n, "bias '%s' of column-parallel '%s' is replicated; it must be split like the weight",
				 b->name, v->name);
			return false;
		}
		if (b->dim >= 0 && tpc_vtensor_local_dim(b, R->tp) != tpc_vtensor_local_dim(v, R->tp)) {
			snprintf(msg, n, "bias '%s' is split into %lld rows per rank, its weight into %lld", b->name,
				 (long long)tpc_vtensor_local_dim(b, R->tp), (long long)tpc_vtensor_local_dim(v, R->tp));
			return false;
		}
	}
	return rank_ok(R, v->bias, R->me, msg, n);
}

static int check_col(run *R, int64_t i, tpc_vcheck kind)
{
	const tpc_vtensor *v = &R->s->t[i];
	tpc_vresult res;
	res_init(R, &res, kind, v->name, v->ref->src_dtype);
	char msg[sizeof(res.msg)] = "";
	int ret = 0, me = R->me, tp = R->tp;
	bool failed = false;
	float *x = NULL, *y = NULL, *Y = NULL;
	double *xd = NULL, *yr = NULL;
	int64_t T = R->T, in = v->ref->shape[v->transposed ? 0 : 1], out = v->ref->shape[v->transposed ? 1 : 0];
	int64_t nl = tpc_vtensor_local_dim(v, tp);
	bool use_bias = kind != TPC_VC_HEAD;
	if (!rank_ok(R, i, me, msg, sizeof(msg)) || (use_bias && !bias_ok(R, i, false, msg, sizeof(msg))))
		res_fail(&res, "%s", msg);
	if ((ret = exchange(R, &res, false, &failed)) || failed)
		return ret;
	bool mine = tpc_vtensor_holds(v, tp, me);
	vlin L;
	if (mine)
		lin_of(R, i, me, false, &L);
	if (mine && !use_bias)
		L.b.t = NULL;
	x = malloc(sizeof(float) * (size_t)(T * in + 1));
	y = calloc((size_t)(T * nl + 1), sizeof(float));
	Y = malloc(sizeof(float) * (size_t)(T * nl) * (size_t)tp + 1);
	if (!x || !y || !Y) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	uint64_t stream = tpc_verify_stream(v->name, kind);
	seeded_f(x, T, in, in, 0, R->o->seed, stream);
	/* an expert's other EP groups gather zeros, which nothing compares */
	if (mine && (ret = tpc__lin_f(&R->xf, &L, T, x, in, y, nl)))
		goto done;
	if ((ret = tpc_coll_allgather(R->c, y, sizeof(float) * (size_t)(T * nl), Y, R->e)))
		goto done;
	if (me == 0) {
		ref_begin(R);
		res.digest = digest_f(Y, (size_t)(T * nl) * (size_t)tp);
		vlin Lr;
		lin_of(R, i, -1, false, &Lr);
		if (!use_bias)
			Lr.b.t = NULL;
		xd = malloc(sizeof(double) * (size_t)(T * in + 1));
		yr = malloc(sizeof(double) * (size_t)(T * out + 1));
		if (!xd || !yr) {
			ret = tpc_err_nomem(R->e);
			goto done;
		}
		seeded_d(xd, T, in, R->o->seed, stream);
		if ((ret = tpc__lin_d(&R->xd, &Lr, T, xd, in, yr, out)))
			goto done;
		double scale = rms(yr, (size_t)(T * out));
		for (int r = 0; r < tp; r++) {
			vloc l;
			if (!tpc_vtensor_holds(v, tp, r))
				continue;
			loc_of(R, i, r, &l);
			for (int k = 0; k < l.nparts; k++)
				for (int64_t t = 0; t < T; t++)
					for (int64_t j = 0; j < l.len[k]; j++) {
						int64_t g = l.start[k] + j, li = t * nl + l.off[k] + j;
						double exp = g < l.size[k] ? yr[t * out + l.poff[k] + g] : 0.0;
						cmp(&res, scale, r, li, exp, Y[(int64_t)r * T * nl + li]);
					}
		}
		if (res.status == TPC_VR_FAIL)
			snprintf(res.msg, sizeof(res.msg), "%llu of %llu outputs differ from the unsplit layer (rank %d first)",
				 (unsigned long long)res.mismatches, (unsigned long long)res.elements, res.diff[0].rank);
	}
done:
	if (me == 0)
		ref_end(R);
	free(x);
	free(y);
	free(Y);
	free(xd);
	free(yr);
	return finish(R, &res, ret);
}

static int check_row(run *R, int64_t i)
{
	const tpc_vtensor *v = &R->s->t[i];
	tpc_vresult res;
	res_init(R, &res, TPC_VC_ROW, v->name, v->ref->src_dtype);
	char msg[sizeof(res.msg)] = "";
	int ret = 0, me = R->me;
	bool failed = false;
	float *x = NULL, *y = NULL;
	double *xd = NULL, *yr = NULL;
	int64_t T = R->T, in = v->ref->shape[v->transposed ? 0 : 1], out = v->ref->shape[v->transposed ? 1 : 0];
	int64_t nl = tpc_vtensor_local_dim(v, R->tp);
	if (!rank_ok(R, i, me, msg, sizeof(msg)) || !bias_ok(R, i, true, msg, sizeof(msg)))
		res_fail(&res, "%s", msg);
	if ((ret = exchange(R, &res, false, &failed)) || failed)
		return ret;
	bool mine = tpc_vtensor_holds(v, R->tp, me);
	vlin L;
	if (mine)
		lin_of(R, i, me, true, &L);
	x = calloc((size_t)(T * nl + 1), sizeof(float));
	y = calloc((size_t)(T * out + 1), sizeof(float));
	if (!x || !y) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	uint64_t stream = tpc_verify_stream(v->name, TPC_VC_ROW);
	/* this rank's slice of x, part by part; padding and replicas beyond the
	 * first of each group contribute zeros */
	for (int k = 0; mine && k < L.w.nparts; k++) {
		if (me % L.w.replicas[k])
			continue;
		for (int64_t t = 0; t < T; t++)
			for (int64_t j = 0; j < L.w.len[k]; j++) {
				int64_t g = L.w.start[k] + j;
				if (g < L.w.size[k])
					x[t * nl + L.w.off[k] + j] = (float)tpc_verify_uniform(
						R->o->seed, stream, (uint64_t)(t * in + L.w.poff[k] + g));
			}
	}
	if (mine)
		ret = tpc__lin_f(&R->xf, &L, T, x, nl, y, out);
	else /* an expert of another EP group: zeros into the same all-reduce */
		ret = tpc_coll_allreduce(R->c, y, (size_t)(T * out), TPC_F32, R->e);
	if (!ret && v->ep > 1) /* its group's result (with the bias added once) to every rank */
		ret = tpc_coll_bcast(R->c, y, sizeof(float) * (size_t)(T * out), v->ep_group * tpc_vtensor_tp(v, R->tp),
				     R->e);
	if (ret)
		goto done;
	if (me == 0) {
		ref_begin(R);
		res.digest = digest_f(y, (size_t)(T * out));
		vlin Lr;
		lin_of(R, i, -1, true, &Lr);
		xd = malloc(sizeof(double) * (size_t)(T * in + 1));
		yr = malloc(sizeof(double) * (size_t)(T * out + 1));
		if (!xd || !yr) {
			ret = tpc_err_nomem(R->e);
			goto done;
		}
		seeded_d(xd, T, in, R->o->seed, stream);
		if ((ret = tpc__lin_d(&R->xd, &Lr, T, xd, in, yr, out)))
			goto done;
		double scale = rms(yr, (size_t)(T * out));
		for (int64_t j = 0; j < T * out; j++)
			cmp(&res, scale, 0, j, yr[j], y[j]);
		if (res.status == TPC_VR_FAIL) {
			if (v->bias >= 0 && !R->s->t[v->bias].row_bias)
				snprintf(res.msg, sizeof(res.msg),
					 "%llu of %llu outputs differ: bias '%s' is not marked row_bias, so every rank adds it",
					 (unsigned long long)res.mismatches, (unsigned long long)res.elements,
					 R->s->t[v->bias].name);
			else
				snprintf(res.msg, sizeof(res.msg), "%llu of %llu all-reduced outputs differ from the unsplit layer",
					 (unsigned long long)res.mismatches, (unsigned long long)res.elements);
		}
	}
done:
	if (me == 0)
		ref_end(R);
	free(x);
	free(y);
	free(xd);
	free(yr);
	return finish(R, &res, ret);
}

static int check_embed(run *R, int64_t i)
{
	const tpc_vtensor *v = &R->s->t[i];
	tpc_vresult res;
	res_init(R, &res, TPC_VC_EMBED, v->name, v->ref->src_dtype);
	char msg[sizeof(res.msg)] = "";
	int ret = 0, me = R->me;
	bool failed = false;
	int64_t T = R->T, H = v->ref->shape[1], V = v->part[0].size;
	float *y = NULL;
	double *yr = NULL;
	if (!rank_ok(R, i, me, msg, sizeof(msg)))
		res_fail(&res, "%s", msg);
	if ((ret = exchange(R, &res, false, &failed)) || failed)
		return ret;
	vloc L;
	loc_of(R, i, me, &L);
	uint64_t stream = tpc_verify_stream(v->name, TPC_VC_EMBED);
	y = calloc((size_t)(T * H + 1), sizeof(float));
	if (!y) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	for (int64_t t = 0; t < T && !ret; t++) {
		int64_t id = (int64_t)(tpc__mix64(R->o->seed ^ stream ^ tpc__mix64((uint64_t)t)) % (uint64_t)V);
		int64_t r = id - L.start[0];
		if (r >= 0 && r < L.len[0] && me % L.replicas[0] == 0)
			ret = tpc__load_row_f(&R->xf, L.ck, L.t, r, y + t * H);
	}
	if (ret || (ret = tpc_coll_allreduce(R->c, y, (size_t)(T * H), TPC_F32, R->e)))
		goto done;
	if (me == 0) {
		ref_begin(R);
		res.digest = digest_f(y, (size_t)(T * H));
		if (!(yr = malloc(sizeof(double) * (size_t)(T * H + 1)))) {
			ret = tpc_err_nomem(R->e);
			goto done;
		}
		for (int64_t t = 0; t < T && !ret; t++) {
			int64_t id = (int64_t)(tpc__mix64(R->o->seed ^ stream ^ tpc__mix64((uint64_t)t)) % (uint64_t)V);
			ret = tpc__load_row_d(&R->xd, v->ref_ck, v->ref, id, yr + t * H);
		}
		if (ret)
			goto done;
		double scale = rms(yr, (size_t)(T * H));
		for (int64_t j = 0; j < T * H; j++)
			cmp(&res, scale, 0, j, yr[j], y[j]);
		if (res.status == TPC_VR_FAIL)
			snprintf(res.msg, sizeof(res.msg), "%llu of %llu looked-up values differ (masked lookup + all-reduce)",
				 (unsigned long long)res.mismatches, (unsigned long long)res.elements);
	}
done:
	if (me == 0)
		ref_end(R);
	free(y);
	free(yr);
	return finish(R, &res, ret);
}

/* ---- blocks ---- */

/* Is tensor i usable as the given half of a tensor-parallel block on rank t:
 * present, shaped, split the right way (col: output features; row: input
 * features), and its bias fitting? */
static bool block_part_ok(const run *R, int64_t i, int want, const char *what, char *msg, size_t n)
{
	const tpc_vtensor *v = &R->s->t[i];
	int mk = math_kind(v);
	if (!tpc__float_dtype(v->ref->src_dtype)) {
		snprintf(msg, n, "%s '%s' is %s: no arithmetic for it", what, v->name, tpc_dtype_name(v->ref->src_dtype));
		return false;
	}
	if (mk != want && !(mk == MK_REPL && R->tp == 1)) {
		snprintf(msg, n, "%s '%s' is split %s (dim %d); a tensor-parallel block needs it %s-parallel", what,
			 v->name, tpc_vsplit_name(v->split), v->dim, want == MK_COL ? "column" : "row");
		return false;
	}
	return rank_ok(R, i, R->me, msg, n) && bias_ok(R, i, want == MK_ROW, msg, n);
}

static int64_t part_len(const vloc *l, int k)
{
	return k < l->nparts ? l->len[k] : 0;
}

static bool mlp_loc_of(const run *R, const tpc_vmlp *p, int t, vmlp_loc *m, char *msg, size_t n)
{
	memset(m, 0, sizeof(*m));
	m->glu = p->glu;
	m->value_first = p->value_first;
	m->act = p->act;
	m->fused = p->gate_up >= 0;
	bool ok = true;
	int64_t start = 0;
	if (t >= 0) {
		if (m->fused)
			ok = block_part_ok(R, p->gate_up, MK_COL, "mlp gate_up", msg, n);
		else
			ok = (!p->glu || block_part_ok(R, p->gate, MK_COL, "mlp gate", msg, n)) &&
			     block_part_ok(R, p->up, MK_COL, "mlp up", msg, n);
		ok = ok && block_part_ok(R, p->down, MK_ROW, "mlp down", msg, n);
		if (!ok)
			return false;
	}
	if (m->fused) {
		lin_of(R, p->gate_up, t, false, &m->gate_up);
		if (m->gate_up.w.nparts != 2 || part_len(&m->gate_up.w, 0) != part_len(&m->gate_up.w, 1) ||
		    m->gate_up.w.start[0] != m->gate_up.w.start[1]) {
			snprintf(msg, n, "mlp gate_up '%s' must be split as 2 equal parts %s", R->s->t[p->gate_up].name,
				 p->value_first ? "[value|gate] (a gated feed-forward)" : "[gate|up]");
			return false;
		}
		m->inner = m->gate_up.w.len[0];
		start = m->gate_up.w.start[0];
	} else {
		if (p->glu)
			lin_of(R, p->gate, t, false, &m->gate);
		lin_of(R, p->up, t, false, &m->up);
		m->inner = m->up.w.len[0];
		start = m->up.w.start[0];
		if (m->up.w.nparts != 1 ||
		    (p->glu && (m->gate.w.nparts != 1 || m->gate.w.len[0] != m->inner || m->gate.w.start[0] != start))) {
			snprintf(msg, n, "mlp gate '%s' and up '%s' must hold the same slice of the intermediate features",
				 p->glu ? R->s->t[p->gate].name : "-", R->s->t[p->up].name);
			return false;
		}
	}
	lin_of(R, p->down, t, true, &m->down);
	if (m->down.w.nparts != 1 || m->down.w.len[0] != m->inner || m->down.w.start[0] != start ||
	    m->down.w.replicas[0] != 1) {
		snprintf(msg, n, "mlp down '%s' must take the intermediate slice [%lld, +%lld) its rank computes",
			 R->s->t[p->down].name, (long long)start, (long long)m->inner);
		return false;
	}
	return true;
}

static bool repl_ok(const run *R, int64_t i, const char *what, char *msg, size_t n);
static void opt_loc(const run *R, int64_t i, int t, vloc *l);

static bool attn_loc_of(const run *R, const tpc_vlayer *ly, int t, vattn_loc *a, char *msg, size_t n)
{
	const tpc_vattn *p = &ly->attn;
	memset(a, 0, sizeof(*a));
	a->fused = p->qkv >= 0;
	a->hd = p->head_dim;
	a->heads = p->heads;
	a->kv_heads = p->kv_heads;
	a->rope = p->rope;
	a->theta = p->rope_theta;
	a->bidirectional = p->bidirectional;
	a->kv_w = p->kv_width;
	a->qk_eps = p->qk_eps;
	if (t >= 0 && (!repl_ok(R, p->q_norm, "attention q_norm", msg, n) || !repl_ok(R, p->k_norm, "attention k_norm", msg, n)))
		return false;
	opt_loc(R, p->q_norm, t, &a->qn);
	opt_loc(R, p->k_norm, t, &a->kn);
	if (t >= 0) {
		bool ok = a->fused ? block_part_ok(R, p->qkv, MK_COL, "attention qkv", msg, n)
				   : block_part_ok(R, p->q, MK_COL, "attention q", msg, n) &&
					     block_part_ok(R, p->k, MK_COL, "attention k", msg, n) &&
					     block_part_ok(R, p->v, MK_COL, "attention v", msg, n);
		if (!ok || !block_part_ok(R, p->o, MK_ROW, "attention o", msg, n))
			return false;
	}
	int64_t ql, kl, vl, qs, ks, vs;
	const char *qn;
	if (a->fused) {
		lin_of(R, p->qkv, t, false, &a->qkv);
		const vloc *w = &a->qkv.w;
		qn = R->s->t[p->qkv].name;
		if (w->nparts != 3) {
			snprintf(msg, n, "attention qkv '%s' must be split as 3 parts [q|k|v]", qn);
			return false;
		}
		ql = w->len[0], kl = w->len[1], vl = w->len[2], qs = w->start[0], ks = w->start[1], vs = w->start[2];
	} else {
		lin_of(R, p->q, t, false, &a->q);
		lin_of(R, p->k, t, false, &a->k);
		lin_of(R, p->v, t, false, &a->v);
		qn = R->s->t[p->q].name;
		ql = a->q.w.len[0], kl = a->k.w.len[0], vl = a->v.w.len[0];
		qs = a->q.w.start[0], ks = a->k.w.start[0], vs = a->v.w.start[0];
	}
	int64_t hd = a->hd;
	if (hd <= 0 || ql % hd || kl % hd || kl != vl || ks != vs || qs % hd || ks % hd) {
		snprintf(msg, n, "rank %d: '%s' q/k/v slices (%lld, %lld, %lld rows) are not whole heads of %lld", t, qn,
			 (long long)ql, (long long)kl, (long long)vl, (long long)hd);
		return false;
	}
	a->nq = ql / hd;
	a->nkv = kl / hd;
	a->q0 = qs / hd;
	a->kv0 = ks / hd;
	int64_t group = a->heads / a->kv_heads;
	for (int64_t h = 0; h < a->nq; h++) {
		int64_t need = (a->q0 + h) / group;
		if (need < a->kv0 || need >= a->kv0 + a->nkv) {
			snprintf(msg, n, "rank %d: query head %lld needs kv head %lld, but the rank holds kv heads %lld..%lld", t,
				 (long long)(a->q0 + h), (long long)need, (long long)a->kv0,
				 (long long)(a->kv0 + a->nkv - 1));
			return false;
		}
	}
	lin_of(R, p->o, t, true, &a->o);
	if (a->o.w.nparts != 1 || a->o.w.len[0] != ql || a->o.w.start[0] != qs || a->o.w.replicas[0] != 1) {
		snprintf(msg, n, "rank %d: o '%s' must take the context of the query heads the rank computes (%lld..%lld)", t,
			 R->s->t[p->o].name, (long long)a->q0, (long long)(a->q0 + a->nq - 1));
		return false;
	}
	return true;
}

/* Softmax turns an absolute error d in its inputs into a relative error of
 * about d in its outputs, and an fp32 score q.k carries an absolute error of
 * about 2^-24 * sum |q_i k_i|: an attention whose scores are large (random,
 * unscaled weights) differs from the fp64 reference by more than fp32's
 * usual 1e-5 without anything being wrong. So an attention or model check
 * compares with rtol raised to 4 * 2^-24 * S when that is larger, S the
 * largest scaled sum |q_i k_i| the reference met (the report shows the rtol
 * used). Well-scaled models (S ~ 10) keep the default. */
static void widen(const run *R, tpc_vresult *res)
{
	double w = 4.0 * 0x1p-24 * R->xd.score_max;
	if (w > res->rtol && R->o->rtol < 0)
		res->rtol = w;
}

static tpc_dtype block_dtype(const run *R, int64_t i)
{
	return i >= 0 ? R->s->t[i].ref->src_dtype : TPC_F32;
}

/* Rank 0: a block's outputs against the unsplit block's. */
static void cmp_block(tpc_vresult *res, const double *yr, const float *y, size_t n, const char *what)
{
	double scale = rms(yr, n);
	for (size_t j = 0; j < n; j++)
		cmp(res, scale, 0, (int64_t)j, yr[j], y[j]);
	if (res->status == TPC_VR_FAIL)
		snprintf(res->msg, sizeof(res->msg), "%llu of %llu %s differ from the unsplit block",
			 (unsigned long long)res->mismatches, (unsigned long long)res->elements, what);
}

static int check_block(run *R, const tpc_vlayer *ly, tpc_vcheck kind)
{
	tpc_vresult res;
	char name[TPC_ERR_NAME_MAX];
	if (kind == TPC_VC_MLP ? ly->mlp.down < 0 : ly->attn.o < 0)
		return 0; /* a DiT entry holds one of the two */
	if (R->s->model->arch == TPC_VARCH_DIT)
		snprintf(name, sizeof(name), "%s", ly->name);
	else
		snprintf(name, sizeof(name), "%s.%s", ly->name, kind == TPC_VC_MLP ? "mlp" : "attn");
	res_init(R, &res, kind, name,
		 block_dtype(R, kind == TPC_VC_MLP ? ly->mlp.down : ly->attn.o));
	if (kind == TPC_VC_ATTN && ly->attn.mla) {
		res.status = TPC_VR_SKIP;
		snprintf(res.msg, sizeof(res.msg),
			 "MLA attention: no block check yet; q_b_proj/kv_b_proj (col) and o_proj (row) have the layer checks, the replicated low-rank projections the structure check");
		return finish(R, &res, 0);
	}
	char msg[sizeof(res.msg)] = "";
	int ret = 0, me = R->me;
	bool failed = false;
	int64_t T = R->T, H = R->s->model->hidden, C = kind == TPC_VC_ATTN ? ly->attn.kv_width : 0;
	float *x = NULL, *y = NULL, *cf = NULL;
	double *xd = NULL, *yr = NULL, *cd = NULL;
	vmlp_loc m;
	vattn_loc a;
	bool ok = kind == TPC_VC_MLP ? mlp_loc_of(R, &ly->mlp, me, &m, msg, sizeof(msg))
				     : attn_loc_of(R, ly, me, &a, msg, sizeof(msg));
	if (!ok)
		res_fail(&res, "%s", msg);
	if ((ret = exchange(R, &res, false, &failed)) || failed)
		return ret;
	x = malloc(sizeof(float) * (size_t)(T * H + 1));
	y = malloc(sizeof(float) * (size_t)(T * H + 1));
	if (!x || !y) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	uint64_t stream = tpc_verify_stream(name, kind);
	seeded_f(x, T, H, H, 0, R->o->seed, stream);
	if (C) { /* cross-attention: seeded encoder states, the same on every rank */
		if (!(cf = malloc(sizeof(float) * (size_t)(T * C + 1)))) {
			ret = tpc_err_nomem(R->e);
			goto done;
		}
		seeded_f(cf, T, C, C, 0, R->o->seed, stream ^ 0x9e3779b97f4a7c15ull);
		a.kv_f = cf;
	}
	ret = kind == TPC_VC_MLP ? tpc__mlp_f(&R->xf, &m, T, H, x, y) : tpc__attn_f(&R->xf, &a, T, H, x, y);
	if (ret)
		goto done;
	if (me == 0) {
		ref_begin(R);
		res.digest = digest_f(y, (size_t)(T * H));
		vmlp_loc mr;
		vattn_loc ar;
		if (kind == TPC_VC_MLP ? !mlp_loc_of(R, &ly->mlp, -1, &mr, msg, sizeof(msg))
				       : !attn_loc_of(R, ly, -1, &ar, msg, sizeof(msg))) {
			ret = tpc_err_set(R->e, TPC_EINPUT, "reference %s: %s", name, msg);
			goto done;
		}
		xd = malloc(sizeof(double) * (size_t)(T * H + 1));
		yr = malloc(sizeof(double) * (size_t)(T * H + 1));
		if (!xd || !yr) {
			ret = tpc_err_nomem(R->e);
			goto done;
		}
		seeded_d(xd, T, H, R->o->seed, stream);
		if (C) {
			if (!(cd = malloc(sizeof(double) * (size_t)(T * C + 1)))) {
				ret = tpc_err_nomem(R->e);
				goto done;
			}
			seeded_d(cd, T, C, R->o->seed, stream ^ 0x9e3779b97f4a7c15ull);
			ar.kv_d = cd;
		}
		R->xd.score_max = 0;
		ret = kind == TPC_VC_MLP ? tpc__mlp_d(&R->xd, &mr, T, H, xd, yr) : tpc__attn_d(&R->xd, &ar, T, H, xd, yr);
		if (ret)
			goto done;
		widen(R, &res);
		cmp_block(&res, yr, y, (size_t)(T * H), "block outputs");
	}
done:
	if (me == 0)
		ref_end(R);
	free(x);
	free(y);
	free(xd);
	free(yr);
	free(cf);
	free(cd);
	return finish(R, &res, ret);
}

/* ---- mixture of experts ---- */

/* Routing of T tokens, the same on every rank: the reference router's
 * logits in fp64, softmax or sigmoid scores, each token's top_k experts
 * (ties to the lower index) by score + score_bias among its best groups
 * (see tpc_vmoe) and their weights (the scores, renormalised when the model
 * does, times its scale). The router is replicated and checked bit for bit
 * by the structure check; routing from the reference keeps every rank's
 * collectives the same size. */
static int moe_route(run *R, const tpc_vmoe *mo, const double *x, int64_t T, int64_t H, int64_t *sel, double *w)
{
	vloc L;
	int64_t E = mo->nexp, K = mo->top_k, G = mo->n_group > 1 ? mo->n_group : 1, per = E / G;
	loc_of(R, mo->router, -1, &L);
	double *W = malloc(sizeof(double) * (size_t)(E * H + 1)), *p = malloc(sizeof(double) * (size_t)(E + 1));
	double *c = malloc(sizeof(double) * (size_t)(E + 1)), *b = calloc((size_t)E + 1, sizeof(double));
	double *gs = malloc(sizeof(double) * (size_t)(G + 1));
	bool *keep = malloc(sizeof(bool) * (size_t)(G + 1)), *taken = malloc(sizeof(bool) * (size_t)(E + 1));
	int ret = 0;
	if (!W || !p || !c || !b || !gs || !keep || !taken) {
		ret = tpc_err_nomem(R->e);
		goto out;
	}
	if ((ret = tpc__load_d(&R->xd, L.ck, L.t, W)))
		goto out;
	if (mo->score_bias >= 0) {
		vloc B;
		loc_of(R, mo->score_bias, -1, &B);
		if ((ret = tpc__load_d(&R->xd, B.ck, B.t, b)))
			goto out;
	}
	for (int64_t t = 0; t < T; t++) {
		double mx = -INFINITY, sum = 0, ks = 0;
		for (int64_t e = 0; e < E; e++) {
			double a = 0;
			for (int64_t h = 0; h < H; h++)
				a += x[t * H + h] * W[e * H + h];
			p[e] = a;
			if (a > mx)
				mx = a;
		}
		if (mo->sigmoid) {
			for (int64_t e = 0; e < E; e++)
				p[e] = 1.0 / (1.0 + exp(-p[e]));
			sum = 1.0;
		} else {
			for (int64_t e = 0; e < E; e++)
				sum += (p[e] = exp(p[e] - mx));
		}
		for (int64_t e = 0; e < E; e++) {
			p[e] /= sum;
			c[e] = p[e] + b[e]; /* the bias only chooses */
			taken[e] = false;
		}
		/* group-limited: each group's score, the topk_group best kept */
		for (int64_t g = 0; g < G; g++) {
			double b1 = -INFINITY, b2 = -INFINITY;
			for (int64_t e = g * per; e < (g + 1) * per; e++) {
				if (c[e] > b1) {
					b2 = b1;
					b1 = c[e];
				} else if (c[e] > b2) {
					b2 = c[e];
				}
			}
			gs[g] = mo->group_max || per < 2 ? b1 : b1 + b2;
			keep[g] = G == 1;
		}
		for (int64_t k = 0; G > 1 && k < mo->topk_group; k++) {
			int64_t best = -1;
			for (int64_t g = 0; g < G; g++)
				if (!keep[g] && (best < 0 || gs[g] > gs[best]))
					best = g;
			keep[best] = true;
		}
		for (int64_t k = 0; k < K; k++) {
			int64_t best = -1;
			for (int64_t e = 0; e < E; e++)
				if (!taken[e] && keep[e / per] && (best < 0 || c[e] > c[best]))
					best = e;
			taken[best] = true;
			sel[t * K + k] = best;
			w[t * K + k] = p[best];
			ks += w[t * K + k];
		}
		for (int64_t k = 0; k < K; k++)
			w[t * K + k] = (mo->renorm ? w[t * K + k] / ks : w[t * K + k]) * mo->scale;
	}
out:
	free(W);
	free(p);
	free(c);
	free(b);
	free(gs);
	free(keep);
	free(taken);
	return ret;
}

/* sigmoid(x g^T) per token for a shared expert's gate (the reference's). */
static int moe_shared_gate(run *R, const tpc_vmoe *mo, const double *x, int64_t T, int64_t H, double *g)
{
	vloc L;
	loc_of(R, mo->shared_gate, -1, &L);
	double *W = malloc(sizeof(double) * (size_t)(H + 1));
	int ret = W ? tpc__load_d(&R->xd, L.ck, L.t, W) : tpc_err_nomem(R->e);
	for (int64_t t = 0; !ret && t < T; t++) {
		double a = 0;
		for (int64_t h = 0; h < H; h++)
			a += x[t * H + h] * W[h];
		g[t] = 1.0 / (1.0 + exp(-a));
	}
	free(W);
	return ret;
}

#define MOE_BODY(R_T, S, CTX)                                                                                       \
	static int moe_apply_##S(run *R, const tpc_vmoe *mo, int t, const R_T *x, int64_t T, int64_t H,          \
				 const int64_t *sel, const double *w, const double *g, R_T *y)                      \
	{                                                                                                         \
		int64_t K = mo->top_k;                                                                            \
		int ret = 0;                                                                                      \
		char msg[256];                                                                                    \
		R_T *xe = malloc(sizeof(R_T) * (size_t)(T * H + 1)), *ye = malloc(sizeof(R_T) * (size_t)(T * H + 1)); \
		int64_t *ix = malloc(sizeof(int64_t) * (size_t)(T + 1));                                          \
		double *wx = malloc(sizeof(double) * (size_t)(T + 1));                                            \
		if (!xe || !ye || !ix || !wx) {                                                                   \
			ret = tpc_err_nomem(R->e);                                                                \
			goto out;                                                                                 \
		}                                                                                                 \
		memset(y, 0, sizeof(R_T) * (size_t)(T * H));                                                      \
		for (int64_t e = 0; e <= mo->nexp && !ret; e++) {                                                 \
			const tpc_vmlp *p = e < mo->nexp ? &mo->exp[e] : &mo->shared;                             \
			int64_t n = 0;                                                                            \
			if (e == mo->nexp && p->down < 0)                                                         \
				break;                                                                            \
			for (int64_t tok = 0; tok < T; tok++)                                                     \
				for (int64_t k = 0; k < K; k++)                                                   \
					if (e == mo->nexp ? k == 0 : sel[tok * K + k] == e) {                     \
						ix[n] = tok;                                                      \
						wx[n++] = e == mo->nexp ? (g ? g[tok] : 1.0) : w[tok * K + k];    \
					}                                                                         \
			if (!n)                                                                                   \
				continue; /* no token chose it: the same on every rank */                         \
			vmlp_loc m;                                                                               \
			const tpc_vtensor *dv = &R->s->t[p->down];                                                \
			if (t >= 0 && !tpc_vtensor_holds(dv, R->tp, t)) {                                         \
				/* another EP group's expert: zeros into its all-reduce */                        \
				memset(ye, 0, sizeof(R_T) * (size_t)(n * H));                                     \
				ret = tpc_coll_allreduce(R->c, ye, (size_t)(n * H),                              \
							 sizeof(R_T) == 4 ? TPC_F32 : TPC_F64, R->e);             \
			} else if (!mlp_loc_of(R, p, t, &m, msg, sizeof(msg))) {                                  \
				ret = tpc_err_set(R->e, TPC_EINPUT, "%s", msg);                                   \
			} else {                                                                                  \
				for (int64_t j = 0; j < n; j++)                                                   \
					memcpy(xe + j * H, x + ix[j] * H, sizeof(R_T) * (size_t)H);               \
				ret = tpc__mlp_##S(CTX, &m, n, H, xe, ye);                                        \
			}                                                                                         \
			if (!ret && t >= 0 && dv->ep > 1) /* the group's output, bias once, to every rank */     \
				ret = tpc_coll_bcast(R->c, ye, sizeof(R_T) * (size_t)(n * H),                     \
						     dv->ep_group * tpc_vtensor_tp(dv, R->tp), R->e);            \
			if (ret)                                                                                  \
				break;                                                                            \
			for (int64_t j = 0; j < n; j++)                                                           \
				for (int64_t h = 0; h < H; h++)                                                   \
					y[ix[j] * H + h] += (R_T)wx[j] * ye[j * H + h];                           \
		}                                                                                                 \
	out:                                                                                                      \
		free(xe);                                                                                         \
		free(ye);                                                                                         \
		free(ix);                                                                                         \
		free(wx);                                                                                         \
		return ret;                                                                                       \
	}
MOE_BODY(float, f, &R->xf)
MOE_BODY(double, d, &R->xd)

/* The MoE block of layer ly, tensor-parallel inside every expert, against
 * the unsplit block in fp64. */
static int check_moe(run *R, const tpc_vlayer *ly)
{
	const tpc_vmoe *mo = &ly->moe;
	tpc_vresult res;
	char name[TPC_ERR_NAME_MAX], msg[sizeof(res.msg)] = "";
	int ret = 0, me = R->me;
	bool failed = false, ok = true;
	int64_t T = R->T, H = R->s->model->hidden, K = mo->top_k;
	snprintf(name, sizeof(name), "%s.moe", ly->name);
	res_init(R, &res, TPC_VC_MLP, name, block_dtype(R, mo->exp[0].down));
	vmlp_loc m;
	ok = rank_ok(R, mo->router, me, msg, sizeof(msg)) &&
	     (mo->shared_gate < 0 || rank_ok(R, mo->shared_gate, me, msg, sizeof(msg)));
	for (int64_t e = 0; e <= mo->nexp && ok; e++) {
		const tpc_vmlp *p = e < mo->nexp ? &mo->exp[e] : &mo->shared;
		if (p->down >= 0 && tpc_vtensor_holds(&R->s->t[p->down], R->tp, me))
			ok = mlp_loc_of(R, p, me, &m, msg, sizeof(msg));
	}
	if (!ok)
		res_fail(&res, "%s", msg);
	if ((ret = exchange(R, &res, false, &failed)) || failed)
		return ret;
	float *x = malloc(sizeof(float) * (size_t)(T * H + 1)), *y = malloc(sizeof(float) * (size_t)(T * H + 1));
	double *xd = malloc(sizeof(double) * (size_t)(T * H + 1)), *yr = NULL, *w = malloc(sizeof(double) * (size_t)(T * K + 1));
	double *g = mo->shared_gate >= 0 ? malloc(sizeof(double) * (size_t)(T + 1)) : NULL;
	int64_t *sel = malloc(sizeof(int64_t) * (size_t)(T * K + 1));
	if (!x || !y || !xd || !w || !sel || (mo->shared_gate >= 0 && !g)) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	uint64_t stream = tpc_verify_stream(name, TPC_VC_MLP);
	seeded_f(x, T, H, H, 0, R->o->seed, stream);
	seeded_d(xd, T, H, R->o->seed, stream);
	if ((ret = moe_route(R, mo, xd, T, H, sel, w)) || (g && (ret = moe_shared_gate(R, mo, xd, T, H, g))) ||
	    (ret = moe_apply_f(R, mo, me, x, T, H, sel, w, g, y)))
		goto done;
	if (me == 0) {
		ref_begin(R);
		res.digest = digest_f(y, (size_t)(T * H));
		if (!(yr = malloc(sizeof(double) * (size_t)(T * H + 1)))) {
			ret = tpc_err_nomem(R->e);
			goto done;
		}
		R->xd.score_max = 0;
		if ((ret = moe_apply_d(R, mo, -1, xd, T, H, sel, w, g, yr)))
			goto done;
		cmp_block(&res, yr, y, (size_t)(T * H), "outputs of the mixture of experts");
	}
done:
	if (me == 0)
		ref_end(R);
	free(x);
	free(y);
	free(xd);
	free(yr);
	free(w);
	free(g);
	free(sel);
	return finish(R, &res, ret);
}

/* ---- model ---- */

static bool repl_ok(const run *R, int64_t i, const char *what, char *msg, size_t n)
{
	if (i < 0)
		return true;
	const tpc_vtensor *v = &R->s->t[i];
	if (v->dim >= 0) {
		snprintf(msg, n, "%s '%s' is split %s; it must be replicated", what, v->name, tpc_vsplit_name(v->split));
		return false;
	}
	return rank_ok(R, i, R->me, msg, n);
}

static void opt_loc(const run *R, int64_t i, int t, vloc *l)
{
	if (i >= 0)
		loc_of(R, i, t, l);
	else
		memset(l, 0, sizeof(*l));
}

static bool vocab_ok(const run *R, int64_t i, const char *what, char *msg, size_t n)
{
	const tpc_vtensor *v = &R->s->t[i];
	if (v->dim >= 0 && (v->dim != 0 || v->nparts != 1 || v->transposed)) {
		snprintf(msg, n, "%s '%s' must be replicated or vocab-split on dim 0", what, v->name);
		return false;
	}
	return rank_ok(R, i, R->me, msg, n);
}

static bool model_loc_of(const run *R, int t, vmodel_loc *m, char *msg, size_t n)
{
	const tpc_vmodel *d = R->s->model;
	memset(m, 0, sizeof(*m));
	m->norm = d->norm;
	m->eps = d->norm_eps;
	m->H = d->hidden;
	m->V = d->vocab;
	m->nl = d->nlayers;
	int64_t head = d->lm_head >= 0 ? d->lm_head : d->embed;
	if (t >= 0) {
		if (!vocab_ok(R, d->embed, "embedding", msg, n) || !vocab_ok(R, head, "lm head", msg, n) ||
		    !repl_ok(R, d->pos_embed, "position embedding", msg, n) ||
		    !repl_ok(R, d->final_norm_w, "final norm", msg, n) || !repl_ok(R, d->final_norm_b, "final norm", msg, n))
			return false;
		if (d->pos_embed >= 0 && R->s->t[d->pos_embed].ref->shape[0] < R->T) {
			snprintf(msg, n, "%lld tokens, but only %lld positions", (long long)R->T,
				 (long long)R->s->t[d->pos_embed].ref->shape[0]);
			return false;
		}
	}
	loc_of(R, d->embed, t, &m->embed);
	loc_of(R, head, t, &m->head);
	opt_loc(R, d->pos_embed, t, &m->pos);
	opt_loc(R, d->final_norm_w, t, &m->fnw);
	opt_loc(R, d->final_norm_b, t, &m->fnb);
	m->L = calloc((size_t)d->nlayers + 1, sizeof(*m->L));
	if (!m->L) {
		snprintf(msg, n, "out of memory");
		return false;
	}
	for (int64_t l = 0; l < d->nlayers; l++) {
		const tpc_vlayer *ly = &d->layers[l];
		vlayer_loc *L = &m->L[l];
		if (t >= 0 && (!repl_ok(R, ly->norm1_w, "norm", msg, n) || !repl_ok(R, ly->norm1_b, "norm", msg, n) ||
			       !repl_ok(R, ly->norm2_w, "norm", msg, n) || !repl_ok(R, ly->norm2_b, "norm", msg, n)))
			return false;
		opt_loc(R, ly->norm1_w, t, &L->n1w);
		opt_loc(R, ly->norm1_b, t, &L->n1b);
		opt_loc(R, ly->norm2_w, t, &L->n2w);
		opt_loc(R, ly->norm2_b, t, &L->n2b);
		if (!attn_loc_of(R, ly, t, &L->attn, msg, n) || !mlp_loc_of(R, &ly->mlp, t, &L->mlp, msg, n))
			return false;
	}
	return true;
}

static int check_model(run *R)
{
	const tpc_vmodel *d = R->s->model;
	tpc_vresult res;
	res_init(R, &res, TPC_VC_MODEL, "model", R->s->t[d->embed].ref->src_dtype);
	char msg[sizeof(res.msg)] = "";
	int ret = 0, me = R->me;
	bool failed = false;
	int64_t T = R->T, V = d->vocab;
	int32_t *ids = NULL;
	float *lg = NULL;
	double *lr = NULL;
	vmodel_loc m, mr;
	memset(&mr, 0, sizeof(mr));
	if (!model_loc_of(R, me, &m, msg, sizeof(msg)))
		res_fail(&res, "%s", msg);
	if ((ret = exchange(R, &res, false, &failed)) || failed)
		goto done;
	ids = malloc(sizeof(int32_t) * (size_t)T);
	lg = malloc(sizeof(float) * (size_t)(T * V + 1));
	if (!ids || !lg) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	uint64_t stream = tpc_verify_stream("model", TPC_VC_MODEL);
	for (int64_t t = 0; t < T; t++)
		ids[t] = (int32_t)(tpc__mix64(R->o->seed ^ stream ^ tpc__mix64((uint64_t)t)) % (uint64_t)V);
	if ((ret = tpc__model_f(&R->xf, &m, T, ids, lg)))
		goto done;
	if (me == 0) {
		ref_begin(R);
		res.digest = digest_f(lg, (size_t)(T * V));
		if (!model_loc_of(R, -1, &mr, msg, sizeof(msg))) {
			ret = tpc_err_set(R->e, TPC_EINPUT, "reference model: %s", msg);
			goto done;
		}
		if (!(lr = malloc(sizeof(double) * (size_t)(T * V + 1)))) {
			ret = tpc_err_nomem(R->e);
			goto done;
		}
		R->xd.score_max = 0;
		if ((ret = tpc__model_d(&R->xd, &mr, T, ids, lr)))
			goto done;
		widen(R, &res);
		double scale = rms(lr, (size_t)(T * V));
		for (int64_t j = 0; j < T * V; j++)
			cmp(&res, scale, 0, j, lr[j], lg[j]);
		res.top1_total = T;
		for (int64_t t = 0; t < T; t++) {
			int64_t a = 0, b = 0;
			for (int64_t j = 1; j < V; j++) {
				if (lg[t * V + j] > lg[t * V + a])
					a = j;
				if (lr[t * V + j] > lr[t * V + b])
					b = j;
			}
			res.top1_agree += a == b;
		}
		if (res.status == TPC_VR_FAIL)
			snprintf(res.msg, sizeof(res.msg), "%llu of %llu logits differ from the unsplit model; top-1 agrees on %lld of %lld tokens",
				 (unsigned long long)res.mismatches, (unsigned long long)res.elements,
				 (long long)res.top1_agree, (long long)res.top1_total);
	}
done:
	if (me == 0)
		ref_end(R);
	free(m.L);
	free(mr.L);
	free(ids);
	free(lg);
	free(lr);
	if (failed && !ret)
		return 0;
	return finish(R, &res, ret);
}

/* ---- the run ---- */

static int run_checks(const tpc_verify_set *s, const tpc_verify_opts *o, tpc_coll *c, const tpc_gpu_api *gpu,
		      tpc_gpu_ctx *gctx, tpc_verify_report *rep, tpc_err *e)
{
	run R;
	int ret;
	memset(&R, 0, sizeof(R));
	R.s = s;
	R.o = o;
	R.c = c;
	R.rep = c->rank == 0 ? rep : NULL;
	R.e = e;
	R.me = c->rank;
	R.tp = c->size;
	R.T = o->tokens > 0 ? o->tokens : 8;
	R.xf.e = R.xd.e = e;
	R.xf.c = c; /* the reference side (xd) has no collectives */
#ifdef _OPENMP
	R.threads = omp_get_max_threads();
#endif
	R.ref_threads = o->ref_threads;
	unsigned checks = o->checks ? o->checks : TPC_VCHECK_ALL;
	if (c->size != s->tp)
		return tpc_err_set(e, TPC_EINPUT, "the set has tp %d, but %d ranks run", s->tp, c->size);
	if (R.T > TPC_VERIFY_MAX_TOKENS)
		return tpc_err_set(e, TPC_EUSAGE, "%lld tokens (at most %d)", (long long)R.T, TPC_VERIFY_MAX_TOKENS);
	if ((ret = tpc_verify_set_validate(s, e)))
		return ret;
	if (!(R.xb = tpc_calloc((size_t)R.tp, sizeof(tpc_vresult))))
		return tpc_err_nomem(e);
	R.xf.gpu = gpu;
	R.xf.gpu_ctx = gctx;
	if (R.rep) {
		R.rep->tp = s->tp;
		R.rep->seed = o->seed;
		R.rep->tokens = (int)R.T;
	}
	for (size_t i = 0; i < s->n && !ret; i++) {
		const tpc_vtensor *v = &s->t[i];
		if (checks & TPC_VCHECK_STRUCTURE)
			ret = check_structure(&R, (int64_t)i);
		if (ret || !(checks & TPC_VCHECK_LAYERS) || !tpc__float_dtype(v->ref->src_dtype))
			continue;
		switch (math_kind(v)) {
		case MK_COL:
			ret = check_col(&R, (int64_t)i, v->split == TPC_VSPLIT_VOCAB ? TPC_VC_HEAD : TPC_VC_COL);
			if (!ret && v->split == TPC_VSPLIT_VOCAB && v->nparts == 1 && !v->transposed)
				ret = check_embed(&R, (int64_t)i);
			break;
		case MK_ROW:
			ret = check_row(&R, (int64_t)i);
			break;
		default:
			break;
		}
	}
	if (!ret && s->model && (checks & TPC_VCHECK_BLOCKS))
		for (int64_t l = 0; l < s->model->nlayers && !ret; l++) {
			ret = check_block(&R, &s->model->layers[l], TPC_VC_ATTN);
			if (!ret)
				ret = check_block(&R, &s->model->layers[l], TPC_VC_MLP);
			if (!ret && s->model->layers[l].moe.exp)
				ret = check_moe(&R, &s->model->layers[l]);
		}
	if (!ret && s->model && s->model->arch != TPC_VARCH_DIT && (checks & TPC_VCHECK_MODEL)) {
		if (s->model->moe || s->model->mla) {
			/* the whole-model forward has no MoE layers or MLA yet: say so */
			tpc_vresult res;
			res_init(&R, &res, TPC_VC_MODEL, "model", TPC_F32);
			res.status = TPC_VR_SKIP;
			snprintf(res.msg, sizeof(res.msg), "%s: checked block by block, no whole-model run yet",
				 s->model->moe ? "a mixture-of-experts model" : "MLA attention");
			ret = finish(&R, &res, 0);
		} else {
			ret = check_model(&R);
		}
	}
	if (!ret && R.any_fail)
		ret = TPC_EMISMATCH;
	tpc__vctx_release(&R.xf);
	tpc__vctx_release(&R.xd);
	free(R.xb);
	return ret;
}

int tpc_verify_run(const tpc_verify_set *s, const tpc_verify_opts *o, tpc_coll *c, tpc_verify_report *rep,
		   tpc_err *e)
{
	return run_checks(s, o, c, NULL, NULL, rep, e);
}

/* ---- backends ---- */

typedef struct th_arg {
	const tpc_verify_set *s;
	const tpc_verify_opts *o;
	tpc_coll_group *g;
	const tpc_gpu_api *gpu;
	tpc_gpu_ctx *gctx;
	tpc_verify_report *rep;
	int rank, threads, ret;
	bool nccl; /* collectives through NCCL (one GPU per rank), else the group's */
	tpc_err e;
} th_arg;

static void *th_main(void *p)
{
	th_arg *a = p;
	tpc_coll c;
	tpc_coll_threads_rank(a->g, a->rank, &c);
#ifdef _OPENMP
	omp_set_num_threads(a->threads);
#endif
	if (a->gpu) {
		char msg[512] = "";
		int sys = 0;
		if (a->gpu->bind(a->gctx, &sys, msg, sizeof(msg))) {
			a->ret = tpc_err_set(&a->e, TPC_EGPU, "%s", msg);
			a->e.sys = sys;
			tpc_coll_abort(&c);
			return NULL;
		}
		/* the collectives go through NCCL; the group's barrier is unused */
		if (a->nccl && (a->ret = tpc__gpu_coll(a->gpu, a->gctx, a->rank, a->g ? c.size : 1, &c, &a->e)))
			return NULL;
	}
	a->ret = run_checks(a->s, a->o, &c, a->gpu, a->gctx, a->rank == 0 ? a->rep : NULL, &a->e);
	if (a->gpu && a->nccl)
		tpc__gpu_coll_free(&c);
	return NULL;
}

static int cores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

int tpc_verify_execute(const tpc_verify_set *s, const tpc_verify_opts *o, tpc_verify_report *rep, tpc_err *e)
{
	double t0 = tpc_now();
	int ret = 0;
	bool host_coll = true;
	if (rep) {
		rep->backend = o->backend == TPC_VB_MPI ? "mpi" : "threads";
		rep->device = o->device == TPC_VDEV_CUDA ? "cuda" : "cpu";
		rep->collectives = rep->backend;
	}
	if (o->backend == TPC_VB_MPI) {
		tpc_coll c;
		if ((ret = tpc_coll_mpi(&c, e)))
			return ret;
		if (c.size != s->tp)
			return tpc_err_set(e, TPC_EUSAGE, "mpirun started %d processes for a tp %d set", c.size, s->tp);
#ifdef _OPENMP
		if (o->threads_per_rank > 0)
			omp_set_num_threads(o->threads_per_rank);
#endif
		if (o->device == TPC_VDEV_CUDA) {
			const tpc_gpu_api *api = NULL;
			tpc_gpu_ctx *gctx = NULL;
			tpc_coll gc;
			/* every rank learns whether the module loaded before NCCL starts */
			int st = tpc__gpu_load(o->cuda_module, &api, e), who;
			int agreed = tpc_coll_agree(&c, st, &who, e);
			if (agreed) {
				if (!st)
					tpc_err_set(e, agreed, "rank %d could not load the CUDA module", who);
				return agreed;
			}
			if ((ret = tpc__gpu_open_mpi(api, &c, o->local_rank, o->local_size, &gctx, &host_coll, e))) {
				if (gctx)
					api->close(gctx);
				return ret;
			}
			if (rep && !host_coll)
				rep->collectives = "nccl";
			if (host_coll) {
				ret = run_checks(s, o, &c, api, gctx, c.rank == 0 ? rep : NULL, e);
			} else if (!(ret = tpc__gpu_coll(api, gctx, c.rank, c.size, &gc, e))) {
				ret = run_checks(s, o, &gc, api, gctx, c.rank == 0 ? rep : NULL, e);
				tpc__gpu_coll_free(&gc);
			}
			api->close(gctx);
		} else {
			ret = tpc_verify_run(s, o, &c, c.rank == 0 ? rep : NULL, e);
		}
		if (rep)
			rep->seconds = tpc_now() - t0;
		return ret;
	}
	int tp = s->tp;
	if (tp < 1 || tp > TPC_VERIFY_MAX_TP)
		return tpc_err_set(e, TPC_EINPUT, "tp %d is out of range (1..%d)", tp, TPC_VERIFY_MAX_TP);
	tpc_coll_group *g = NULL;
	const tpc_gpu_api *api = NULL;
	tpc_gpu_ctx **gctx = NULL;
	th_arg *a = tpc_calloc((size_t)tp, sizeof(*a));
	pthread_t *th = tpc_calloc((size_t)tp, sizeof(*th));
	if (!a || !th) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = tpc_coll_group_new(&g, tp, e)))
		goto out;
	if (o->device == TPC_VDEV_CUDA) {
		/* one process, all local GPUs: every communicator made at once */
		if (!(gctx = tpc_calloc((size_t)tp, sizeof(*gctx)))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		if ((ret = tpc__gpu_load(o->cuda_module, &api, e)) || (ret = tpc__gpu_open_threads(api, tp, gctx, &host_coll, e)))
			goto out;
		if (rep && !host_coll)
			rep->collectives = "nccl";
	}
	tpc_verify_opts oo = *o;
	if (!oo.ref_threads)
		oo.ref_threads = cores();
	o = &oo;
	int per = o->threads_per_rank > 0 ? o->threads_per_rank : cores() / tp;
	if (per < 1)
		per = 1;
	for (int r = 0; r < tp; r++) {
		a[r] = (th_arg){s, o, g, api, gctx ? gctx[r] : NULL, rep, r, per, 0, !host_coll, {0}};
		tpc_err_init(&a[r].e);
	}
	/* every rank must start: the group's barriers count tp threads */
	for (int r = 0; r < tp; r++) {
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setstacksize(&at, 8u << 20);
		int rc = pthread_create(&th[r], &at, th_main, &a[r]);
		pthread_attr_destroy(&at);
		if (rc) {
			ret = tpc_err_set(e, TPC_EIO, "cannot start thread %d of %d", r, tp);
			/* the started ones wait for the missing rank: abort the group */
			tpc_coll ab;
			tpc_coll_threads_rank(g, 0, &ab);
			tpc_coll_abort(&ab);
			for (int k = 0; k < r; k++)
				pthread_join(th[k], NULL);
			goto out;
		}
	}
	for (int r = 0; r < tp; r++)
		pthread_join(th[r], NULL);
	/* the lowest rank with its own error wins over "another rank failed";
	 * a mismatch is the same on every rank */
	int *st = tpc_calloc((size_t)tp, sizeof(int)), *peer = tpc_calloc((size_t)tp, sizeof(int));
	if (!st || !peer) {
		ret = tpc_err_nomem(e);
	} else {
		for (int r = 0; r < tp; r++) {
			st[r] = a[r].ret == TPC_EMISMATCH ? 0 : a[r].ret;
			peer[r] = a[r].e.sys == TPC_COLL_ABORTED;
		}
		int w = tpc_gpu_first_error(st, peer, tp);
		if (w >= 0) {
			*e = a[w].e;
			ret = a[w].ret;
		} else {
			ret = a[0].ret;
		}
	}
	free(st);
	free(peer);
out:
	if (rep)
		rep->seconds = tpc_now() - t0;
	for (int r = 0; gctx && api && r < tp; r++)
		if (gctx[r])
			api->close(gctx[r]);
	free(gctx);
	tpc_coll_group_free(g);
	free(a);
	free(th);
	return ret;
}
