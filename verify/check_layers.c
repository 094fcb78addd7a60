/* check_layers.c - the layer checks: one column-parallel (or vocab-split
 * head), row-parallel or vocab-parallel embedding layer alone, run split on
 * seeded inputs in fp32 with the collectives, against the unsplit layer in
 * fp64 on rank 0. See verify.c for the pattern every check follows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"
#include "vint.h"

/* Rank 0: the unsplit layer of tensor i (its bias too, when `bias`) in fp64
 * on the seeded input [T, in]: *yr [T, out], scratch of the check. */
static int lin_ref(vrun *R, int64_t i, bool row, bool bias, uint64_t stream, int64_t in, int64_t out, double **yr)
{
	int64_t T = R->T;
	vlin Lr;
	tpc__lin_of(R, i, -1, row, &Lr);
	if (!bias)
		Lr.b.t = NULL;
	double *xd;
	if (!VNEW(R, xd, T * in) || !VNEW(R, *yr, T * out))
		return tpc_err_nomem(R->e);
	tpc__seeded_d(xd, T, in, R->o->seed, stream);
	return tpc__lin_d(&R->xd, &Lr, T, xd, in, *yr, out);
}

/* The opening of a layer check of tensor i: *res begun, and failed on every
 * rank when a rank's part, or its bias (bias 0: a column bias, 1: a row
 * bias, -1: none checked), is unusable; *failed says the check ends there. */
static int layer_open(vrun *R, int64_t i, tpc_vcheck kind, int bias, tpc_vresult *res, bool *failed)
{
	const tpc_vtensor *v = &R->s->t[i];
	char msg[sizeof(res->msg)] = "";
	tpc__res_init(R, res, kind, v->name, v->ref->src_dtype);
	if (!tpc__rank_ok(R, i, R->me, msg, sizeof(msg)) ||
	    (bias >= 0 && !tpc__bias_ok(R, i, bias == 1, msg, sizeof(msg))))
		tpc__res_fail(res, "%s", msg);
	return tpc__exchange(R, res, false, failed);
}

void tpc__col_cmp(const vrun *R, int64_t i, tpc_vresult *res, const float *Y, const double *yr)
{
	const tpc_vtensor *v = &R->s->t[i];
	int64_t T = R->T, out = v->ref->shape[v->transposed ? 1 : 0], nl = tpc_vtensor_local_dim(v, R->tp);
	double scale = tpc__rms(yr, (size_t)(T * out));
	for (int r = 0; r < R->tp; r++) {
		vloc l;
		if (!tpc_vtensor_holds(v, R->tp, r))
			continue;
		tpc__loc_of(R, i, r, &l);
		for (int k = 0; k < l.nparts; k++)
			for (int64_t t = 0; t < T; t++)
				for (int64_t j = 0; j < l.len[k]; j++) {
					int64_t g = l.start[k] + j, li = t * nl + l.off[k] + j;
					double exp = g < l.size[k] ? yr[t * out + l.poff[k] + g] : 0.0;
					tpc__cmp(res, scale, r, li, exp, Y[(int64_t)r * T * nl + li]);
				}
	}
	if (res->status == TPC_VR_FAIL)
		snprintf(res->msg, sizeof(res->msg), "%llu of %llu outputs differ from the unsplit layer (rank %d first)",
			 (unsigned long long)res->mismatches, (unsigned long long)res->elements, res->diff[0].rank);
}

int tpc__check_col(vrun *R, int64_t i, tpc_vcheck kind)
{
	const tpc_vtensor *v = &R->s->t[i];
	tpc_vresult res;
	bool failed, use_bias = kind != TPC_VC_HEAD;
	int ret = layer_open(R, i, kind, use_bias ? 0 : -1, &res, &failed), me = R->me, tp = R->tp;
	if (ret || failed || tpc__pass_result(R, i, &res)) /* computed in the single pass */
		return ret || failed ? ret : tpc__finish(R, &res, 0);
	float *x, *y, *Y;
	double *yr = NULL;
	int64_t T = R->T, in = v->ref->shape[v->transposed ? 0 : 1], out = v->ref->shape[v->transposed ? 1 : 0];
	int64_t nl = tpc_vtensor_local_dim(v, tp);
	bool mine = tpc_vtensor_holds(v, tp, me);
	vlin L;
	if (mine)
		tpc__lin_of(R, i, me, false, &L);
	if (mine && !use_bias)
		L.b.t = NULL;
	if (!VNEW(R, x, T * in) || !VZERO(R, y, T * nl) || !VNEW(R, Y, T * nl * tp)) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	uint64_t stream = tpc_verify_stream(v->name, kind);
	tpc__seeded_f(x, T, in, in, 0, R->o->seed, stream);
	/* an expert's other EP groups (a dense tensor's data-parallel ranks past
	 * group 0) gather zeros, which nothing compares */
	if (mine && (ret = tpc__lin_f(&R->xf, &L, T, x, in, y, nl)))
		goto done;
	if ((ret = tpc_coll_allgather(R->c, y, sizeof(float) * (size_t)(T * nl), Y, R->e)))
		goto done;
	if (me == 0) {
		tpc__ref_begin(R, &res, Y, (size_t)(T * nl) * (size_t)tp, NULL, 0);
		if ((ret = lin_ref(R, i, false, use_bias, stream, in, out, &yr)))
			goto done;
		tpc__col_cmp(R, i, &res, Y, yr);
	}
done:
	return tpc__finish(R, &res, ret);
}

void tpc__row_input(const vrun *R, int64_t i, const vloc *w, float *x)
{
	const tpc_vtensor *v = &R->s->t[i];
	int64_t T = R->T, in = v->ref->shape[v->transposed ? 0 : 1], nl = tpc_vtensor_local_dim(v, R->tp);
	uint64_t stream = tpc_verify_stream(v->name, TPC_VC_ROW);
	memset(x, 0, sizeof(float) * (size_t)(T * nl));
	/* this rank's slice of x, part by part; padding and replicas beyond the
	 * first of each group contribute zeros */
	for (int k = 0; k < w->nparts; k++) {
		if (R->me % w->replicas[k])
			continue;
		for (int64_t t = 0; t < T; t++)
			for (int64_t j = 0; j < w->len[k]; j++) {
				int64_t g = w->start[k] + j;
				if (g < w->size[k])
					x[t * nl + w->off[k] + j] = (float)tpc_verify_uniform(
						R->o->seed, stream, (uint64_t)(t * in + w->poff[k] + g));
			}
	}
}

void tpc__row_cmp(const vrun *R, int64_t i, tpc_vresult *res, const float *y, const double *yr)
{
	const tpc_vtensor *v = &R->s->t[i];
	int64_t out = v->ref->shape[v->transposed ? 1 : 0];
	tpc__cmp_all(res, yr, y, (size_t)(R->T * out));
	if (res->status != TPC_VR_FAIL)
		return;
	if (v->bias >= 0 && !R->s->t[v->bias].row_bias)
		snprintf(res->msg, sizeof(res->msg),
			 "%llu of %llu outputs differ: bias '%s' is not marked row_bias, so every rank adds it",
			 (unsigned long long)res->mismatches, (unsigned long long)res->elements, R->s->t[v->bias].name);
	else
		snprintf(res->msg, sizeof(res->msg), "%llu of %llu all-reduced outputs differ from the unsplit layer",
			 (unsigned long long)res->mismatches, (unsigned long long)res->elements);
}

int tpc__check_row(vrun *R, int64_t i)
{
	const tpc_vtensor *v = &R->s->t[i];
	tpc_vresult res;
	bool failed;
	int ret = layer_open(R, i, TPC_VC_ROW, 1, &res, &failed), me = R->me;
	if (ret || failed || tpc__pass_result(R, i, &res)) /* computed in the single pass */
		return ret || failed ? ret : tpc__finish(R, &res, 0);
	float *x, *y;
	double *yr = NULL;
	int64_t T = R->T, in = v->ref->shape[v->transposed ? 0 : 1], out = v->ref->shape[v->transposed ? 1 : 0];
	int64_t nl = tpc_vtensor_local_dim(v, R->tp);
	bool mine = tpc_vtensor_holds(v, R->tp, me);
	vlin L;
	if (mine)
		tpc__lin_of(R, i, me, true, &L);
	if (!VZERO(R, x, T * nl) || !VZERO(R, y, T * out)) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	uint64_t stream = tpc_verify_stream(v->name, TPC_VC_ROW);
	if (mine) {
		tpc__row_input(R, i, &L.w, x);
		ret = tpc__lin_f(&R->xf, &L, T, x, nl, y, out);
	} else { /* an expert of another EP group, a dense tensor on a data-parallel
		  * rank past group 0: zeros into the same all-reduce */
		ret = tpc_coll_allreduce(R->c, y, (size_t)(T * out), TPC_F32, R->e);
	}
	if (!ret && (v->ep > 1 || v->dp > 1)) /* its group's result (with the bias added once) to every rank */
		ret = tpc_coll_bcast(R->c, y, sizeof(float) * (size_t)(T * out), tpc_vtensor_root(v, R->tp), R->e);
	if (ret)
		goto done;
	if (me == 0) {
		tpc__ref_begin(R, &res, y, (size_t)(T * out), NULL, 0);
		if ((ret = lin_ref(R, i, true, true, stream, in, out, &yr)))
			goto done;
		tpc__row_cmp(R, i, &res, y, yr);
	}
done:
	return tpc__finish(R, &res, ret);
}

int tpc__check_embed(vrun *R, int64_t i)
{
	const tpc_vtensor *v = &R->s->t[i];
	tpc_vresult res;
	bool failed;
	int ret = layer_open(R, i, TPC_VC_EMBED, -1, &res, &failed), me = R->me;
	if (ret || failed)
		return ret;
	int64_t T = R->T, H = v->ref->shape[1], V = v->part[0].size;
	float *y;
	double *yr;
	vloc L;
	tpc__loc_of(R, i, me, &L);
	uint64_t stream = tpc_verify_stream(v->name, TPC_VC_EMBED);
	if (!VZERO(R, y, T * H)) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	for (int64_t t = 0; t < T && !ret; t++) {
		int64_t id = tpc__seeded_id(R->o->seed, stream, t, V);
		int64_t r = id - L.start[0];
		if (r >= 0 && r < L.len[0] && me % L.replicas[0] == 0 && tpc_vtensor_holds(v, R->tp, me))
			ret = tpc__load_row_f(&R->xf, L.ck, L.t, r, y + t * H);
	}
	if (ret || (ret = tpc_coll_allreduce(R->c, y, (size_t)(T * H), TPC_F32, R->e)))
		goto done;
	if (me == 0) {
		if ((ret = tpc__ref_begin(R, &res, y, (size_t)(T * H), &yr, (size_t)(T * H))))
			goto done;
		for (int64_t t = 0; t < T && !ret; t++) {
			int64_t id = tpc__seeded_id(R->o->seed, stream, t, V);
			ret = tpc__load_row_d(&R->xd, v->ref_ck, v->ref, id, yr + t * H);
		}
		if (ret)
			goto done;
		tpc__cmp_all(&res, yr, y, (size_t)(T * H));
		if (res.status == TPC_VR_FAIL)
			snprintf(res.msg, sizeof(res.msg), "%llu of %llu looked-up values differ (masked lookup + all-reduce)",
				 (unsigned long long)res.mismatches, (unsigned long long)res.elements);
	}
done:
	return tpc__finish(R, &res, ret);
}
