/* verify.c - the checks a verify run makes over a set description (vset.c):
 * what every check shares, and the run; see tpc_verify.h.
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
 * on one that has given up.
 *
 * The checks, by family: check_structure.c (bytes and checksums),
 * check_layers.c (a column-, row- or vocab-parallel layer alone),
 * check_blocks.c (attention, MLP and mixture-of-experts blocks) and
 * check_model.c (the whole forward). Here: their results, exchanges,
 * comparisons and local views (vint.h), the order they run in, and the
 * backends (threads, MPI, CUDA) that run them. */
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

/* ---- the check protocol ---- */

/* Rank 0 computes the unsplit reference while the other ranks wait for its
 * result, so it may use every core meanwhile (the results do not depend on
 * the thread count). */
int tpc__ref_begin(vrun *R, tpc_vresult *res, const float *y, size_t n, double **ref, size_t nref)
{
	res->digest = tpc__digest_f(y, n);
	R->ref_on = true;
	if (ref && !VNEW(R, *ref, nref))
		return tpc_err_nomem(R->e);
#ifdef _OPENMP
	if (R->ref_threads > 0)
		omp_set_num_threads(R->ref_threads);
#endif
	return 0;
}

void tpc__ref_end(vrun *R)
{
	R->ref_on = false;
#ifdef _OPENMP
	if (R->ref_threads > 0)
		omp_set_num_threads(R->threads);
#endif
}

void *tpc__scratch(vrun *R, size_t bytes, bool zero)
{
	if (tpc_grow((void **)&R->scratch, &R->scratch_cap, R->nscratch + 1, sizeof(*R->scratch)))
		return NULL;
	void *p = zero ? calloc(1, bytes) : malloc(bytes);
	if (p)
		R->scratch[R->nscratch++] = p;
	return p;
}

void tpc__res_init(vrun *R, tpc_vresult *r, tpc_vcheck kind, const char *name, tpc_dtype dt)
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

void tpc__res_fail(tpc_vresult *r, const char *fmt, ...)
{
	r->status = TPC_VR_FAIL;
	if (r->msg[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
}

void tpc__res_diff(tpc_vresult *r, int rank, int64_t idx, double exp, double act)
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
int tpc__exchange(vrun *R, tpc_vresult *res, bool final, bool *failed)
{
	int ret = tpc_coll_allgather(R->c, res, sizeof(*res), R->xb, R->e);
	if (ret)
		return ret;
	tpc_vresult m = R->xb[0];
	m.ndiff = 0;
	m.mismatches = m.elements = 0;
	m.capped = 0;
	bool fail = false;
	for (int r = 0; r < R->tp; r++) {
		const tpc_vresult *x = &R->xb[r];
		m.elements += x->elements;
		m.mismatches += x->mismatches;
		m.capped |= x->capped;
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
int tpc__finish_quiet(vrun *R, int ret)
{
	if (R->ref_on)
		tpc__ref_end(R);
	while (R->nscratch > 0)
		free(R->scratch[--R->nscratch]);
	if (ret)
		tpc_coll_abort(R->c);
	return ret;
}

int tpc__finish(vrun *R, tpc_vresult *res, int ret)
{
	bool failed;
	if ((ret = tpc__finish_quiet(R, ret)))
		return ret;
	return tpc__exchange(R, res, true, &failed);
}

/* rms of n values */
double tpc__rms(const double *v, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += v[i] * v[i];
	return n ? sqrt(s / (double)n) : 0;
}

void tpc__cmp(tpc_vresult *r, double scale, int rank, int64_t idx, double exp, double act)
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
		tpc__res_diff(r, rank, idx, exp, act);
		r->status = TPC_VR_FAIL;
	}
}

void tpc__cmp_all(tpc_vresult *r, const double *yr, const float *y, size_t n)
{
	double scale = tpc__rms(yr, n);
	for (size_t j = 0; j < n; j++)
		tpc__cmp(r, scale, 0, (int64_t)j, yr[j], y[j]);
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
bool tpc__rank_ok(const vrun *R, int64_t i, int t, char *msg, size_t n)
{
	const tpc_vtensor *v = &R->s->t[i];
	const tpc_tensor *rt = v->rank[t].t, *ref = v->ref;
	if (!v->rank[t].ck)
		return true; /* not loaded here: its own process checks it */
	/* an expert of another EP group must be absent; a dense tensor on a
	 * data-parallel rank past group 0 goes on: that rank holds the copy of
	 * group 0's slice a replica loads, present and shaped so */
	if (v->ep > 1 && !tpc_vtensor_holds(v, R->tp, t)) {
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

void tpc__loc_of(const vrun *R, int64_t i, int t, vloc *L)
{
	const tpc_vtensor *v = &R->s->t[i];
	memset(L, 0, sizeof(*L));
	L->name = v->name;
	L->transposed = v->transposed;
	L->dim = v->dim;
	L->nparts = v->nparts ? v->nparts : 1;
	L->ranks = t < 0 ? 1 : tpc_vtensor_tp(v, R->tp);
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

bool tpc__matrix(const tpc_tensor *t)
{
	if (!t || t->ndim < 2)
		return false;
	for (int d = 2; d < t->ndim; d++)
		if (t->shape[d] != 1)
			return false;
	return true;
}

int tpc__math_kind(const tpc_vtensor *v)
{
	if (v->dim < 0)
		return MK_REPL;
	if (!tpc__matrix(v->ref) || v->dim > 1)
		return MK_NONE;
	return v->dim == (v->transposed ? 1 : 0) ? MK_COL : MK_ROW;
}

uint64_t tpc__digest_f(const float *p, size_t n)
{
	return tpc__fnv(TPC_FNV_INIT, p, n * sizeof(float));
}

/* ---- seeded inputs; local views and their readiness ---- */

/* Fill x[T, n] with the seeded inputs of the columns [c0, c0+n) of a
 * [T, full] matrix. */
void tpc__seeded_f(float *x, int64_t T, int64_t n, int64_t full, int64_t c0, uint64_t seed, uint64_t stream)
{
	for (int64_t t = 0; t < T; t++)
		for (int64_t j = 0; j < n; j++)
			x[t * n + j] = (float)tpc_verify_uniform(seed, stream, (uint64_t)(t * full + c0 + j));
}

void tpc__seeded_d(double *x, int64_t T, int64_t n, uint64_t seed, uint64_t stream)
{
	for (int64_t t = 0; t < T; t++)
		for (int64_t j = 0; j < n; j++)
			x[t * n + j] = tpc_verify_uniform(seed, stream, (uint64_t)(t * n + j));
}

int64_t tpc__seeded_id(uint64_t seed, uint64_t stream, int64_t t, int64_t V)
{
	return (int64_t)(tpc__mix64(seed ^ stream ^ tpc__mix64((uint64_t)t)) % (uint64_t)V);
}

/* The linear layer of tensor i on rank t (-1: reference) with its bias. */
void tpc__lin_of(const vrun *R, int64_t i, int t, bool row, vlin *L)
{
	const tpc_vtensor *v = &R->s->t[i];
	memset(L, 0, sizeof(*L));
	tpc__loc_of(R, i, t, &L->w);
	L->row = row;
	L->bias_once = true;
	if (v->bias >= 0) {
		tpc__loc_of(R, v->bias, t, &L->b);
		if (t >= 0 && row)
			L->bias_once = R->s->t[v->bias].row_bias;
	}
}

/* A layer's bias on this rank: present and shaped as its split says, and for
 * a row-parallel layer replicated. */
bool tpc__bias_ok(const vrun *R, int64_t i, bool row, char *msg, size_t n)
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
		if (b->dim < 0 && tpc_vtensor_tp(v, R->tp) > 1) {
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
	return tpc__rank_ok(R, v->bias, R->me, msg, n);
}

bool tpc__repl_ok(const vrun *R, int64_t i, const char *what, char *msg, size_t n)
{
	if (i < 0)
		return true;
	const tpc_vtensor *v = &R->s->t[i];
	if (v->dim >= 0) {
		snprintf(msg, n, "%s '%s' is split %s; it must be replicated", what, v->name, tpc_vsplit_name(v->split));
		return false;
	}
	return tpc__rank_ok(R, i, R->me, msg, n);
}

void tpc__opt_loc(const vrun *R, int64_t i, int t, vloc *l)
{
	if (i >= 0)
		tpc__loc_of(R, i, t, l);
	else
		memset(l, 0, sizeof(*l));
}

/* ---- the run ---- */

static int run_checks(const tpc_verify_set *s, const tpc_verify_opts *o, tpc_coll *c, const tpc_gpu_api *gpu,
		      tpc_gpu_ctx *gctx, tpc_verify_report *rep, tpc_err *e)
{
	/* the reference side (xd) has no collectives */
	vrun R = {.s = s, .o = o, .c = c, .rep = c->rank == 0 ? rep : NULL, .e = e, .me = c->rank, .tp = c->size,
		  .T = o->tokens > 0 ? o->tokens : 8, .xf = {.e = e, .c = c, .gpu = gpu, .gpu_ctx = gctx, .blas_lib = o->blas},
		  .xd = {.e = e, .blas_lib = o->blas}};
	int ret;
#ifdef _OPENMP
	R.threads = omp_get_max_threads();
#endif
	R.ref_threads = o->ref_threads;
	unsigned checks = o->checks ? o->checks : TPC_VCHECK_ALL;
	if (c->size != s->tp)
		return tpc_err_set(e, TPC_EINPUT, "the set has tp %d, but %d ranks run", s->tp, c->size);
	if (R.T > TPC_VERIFY_MAX_TOKENS)
		return tpc_err_set(e, TPC_EUSAGE, "%lld tokens (at most %d)", (long long)R.T, TPC_VERIFY_MAX_TOKENS);
	if (s->model && s->model->rope_max > 0 && R.T > s->model->rope_max)
		return tpc_err_set(e, TPC_EINPUT,
				   "%lld tokens, past the dynamic rope's max_position_embeddings %lld (transformers rescales its frequencies there; verify does not)",
				   (long long)R.T, (long long)s->model->rope_max);
	if ((ret = tpc_verify_set_validate(s, e)))
		return ret;
	if (!(R.xb = tpc_calloc((size_t)R.tp, sizeof(tpc_vresult))))
		return tpc_err_nomem(e);
	if (R.rep) {
		R.rep->tp = s->tp;
		R.rep->dp = s->dp;
		R.rep->seed = o->seed;
		R.rep->tokens = (int)R.T;
	}
	tpc_progress *prog = R.me == 0 ? o->progress : NULL;
	bool model_run = s->model && s->model->arch != TPC_VARCH_DIT && s->model->arch != TPC_VARCH_DALLE2 &&
			 (checks & TPC_VCHECK_MODEL);
	if (prog)
		prog->total = s->n + (s->model && (checks & TPC_VCHECK_BLOCKS) ? (uint64_t)s->model->nlayers : 0) + model_run;
	/* the single pass: the model check's forward computes the layer and
	 * block checks' products too (check_pass.c); its result is reported
	 * in its place below */
	if (model_run && !(ret = tpc__pass_begin(&R)) && R.pass)
		ret = tpc__check_model(&R);
	for (size_t i = 0; i < s->n && !ret; i++, tpc_progress_add(prog, 1)) {
		const tpc_vtensor *v = &s->t[i];
		if (checks & TPC_VCHECK_STRUCTURE)
			ret = tpc__check_structure(&R, (int64_t)i);
		if (ret || !(checks & TPC_VCHECK_LAYERS) || !tpc__float_dtype(v->ref->src_dtype))
			continue;
		switch (tpc__math_kind(v)) {
		case MK_COL:
			ret = tpc__check_col(&R, (int64_t)i, v->split == TPC_VSPLIT_VOCAB ? TPC_VC_HEAD : TPC_VC_COL);
			if (!ret && v->split == TPC_VSPLIT_VOCAB && v->nparts == 1 && !v->transposed)
				ret = tpc__check_embed(&R, (int64_t)i);
			break;
		case MK_ROW:
			ret = tpc__check_row(&R, (int64_t)i);
			break;
		default:
			break;
		}
	}
	if (!ret && s->model && (checks & TPC_VCHECK_BLOCKS))
		for (int64_t l = 0; l < s->model->nlayers && !ret; l++) {
			ret = tpc__check_block(&R, &s->model->layers[l], TPC_VC_ATTN);
			if (!ret)
				ret = tpc__check_block(&R, &s->model->layers[l], TPC_VC_MLP);
			if (!ret && s->model->layers[l].moe.exp)
				ret = tpc__check_moe(&R, &s->model->layers[l]);
			tpc_progress_add(prog, 1);
		}
	if (!ret && model_run) {
		ret = R.pass ? tpc__pass_model(&R) : tpc__check_model(&R);
		tpc_progress_add(prog, 1);
	}
	if (!ret && R.any_fail)
		ret = TPC_EMISMATCH;
	tpc__pass_end(&R);
	if (R.rep)
		R.rep->weights_read = R.xf.nread + R.xd.nread;
	tpc__vctx_release(&R.xf);
	tpc__vctx_release(&R.xd);
	while (R.nscratch > 0) /* a check that ended without tpc__finish */
		free(R.scratch[--R.nscratch]);
	free(R.scratch);
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

/* This process's rank of an MPI job (mpirun started tp processes), its GPU
 * when the device is cuda; the time since t0 in the report once the checks
 * ran. */
static int execute_mpi(const tpc_verify_set *s, const tpc_verify_opts *o, tpc_verify_report *rep, double t0,
		       tpc_err *e)
{
	tpc_coll c;
	int ret;
	bool host_coll = true;
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

/* The threads' outcome: the lowest rank with its own error wins over
 * "another rank failed"; a mismatch is the same on every rank. */
static int threads_error(const th_arg *a, int tp, tpc_err *e)
{
	int ret;
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
	return ret;
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
	if (s->dp > 1 && o->device == TPC_VDEV_CUDA) /* not yet run on a GPU */
		return tpc_err_set(e, TPC_EUSAGE,
				   "a set with %d data-parallel replicas a stage (tp %d x dp %d ranks) is checked on the CPU (--device cpu): its GPU path has not been run",
				   s->dp, s->tp / s->dp, s->dp);
	if (o->backend == TPC_VB_MPI)
		return execute_mpi(s, o, rep, t0, e);
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
	ret = threads_error(a, tp, e);
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
