/* tpc_ggml_kq.c - the K-quants' scale searches (tpc_ggml_int.h
 * tpc__kq_kern): ggml's make_qkx2_quants (Q2_K, Q4_K, Q5_K), make_q3_quants
 * with do_rmse (Q3_K) and make_qx_quants with rmse_type 1 and no weights
 * (Q6_K), for a run of sub-blocks, in the scalar arithmetic of
 * ggml/src/ggml-quants.c and in vector lanes (AVX2: 8 sub-blocks at once,
 * AVX-512: 16, and twice that for make_qkx2_quants in two interleaved
 * groups; the body is tpc_ggml_kq.h), chosen once for the CPU. Every variant
 * gives the same bits: a lane is one sub-block, its sums run over its
 * elements in ggml's order, and nothing is fused or reassociated (ISO C
 * mode, and fp-contract=off asked for here too).
 *
 * make_qkx2_quants and make_qx_quants return each sub-block's winning
 * parameters, not its levels: the levels of the winning trial are the
 * nearest_int of the same expression at the same iscale and min, so the
 * block code recomputes them in the rare sub-block whose quantized scale is
 * 0 (the only one that keeps the search's levels), and the trials store
 * none. make_q3_quants' levels are its result (moved one at a time): they
 * are stored. */
#include <math.h>
#include <string.h>

#include "tpc_ggml_int.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define GROUP_MAX_EPS 1e-15f

static int imin(int a, int b)
{
	return a < b ? a : b;
}

static int imax(int a, int b)
{
	return a > b ? a : b;
}

/* make_qkx2_quants(n, nmax, x, w, L, &min, Laux, rmin, rdelta, nstep,
 * use_mad) for one sub-block, its weights by a->wkind: levels 0..nmax, a
 * scale and a min (-min in mn) that minimise the weighted error (|e| when
 * mad, else e^2) over nstep + 1 trial scales; `min` of the trials is the
 * best one so far, as ggml's is */
static void kq_qkx2_one(const float *x, const tpc__kq_args *a, tpc__kq_fit *f)
{
	const int n = a->n < 1 ? 1 : a->n > 32 ? 32 : a->n, nmax = a->nmax; /* 16 or 32 */
	float w[32];
	if (a->wkind == TPC_KQ_W_ABS) {
		for (int i = 0; i < n; i++)
			w[i] = fabsf(x[i]);
	} else { /* quantize_row_q4_K_ref / q5_K: av_x + |x| */
		float sum_x2 = 0;
		for (int i = 0; i < n; i++)
			sum_x2 += x[i] * x[i];
		float av_x = sqrtf(sum_x2 / (float)n);
		for (int i = 0; i < n; i++)
			w[i] = av_x + fabsf(x[i]);
	}
	float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
	for (int i = 1; i < n; i++) {
		if (x[i] < min)
			min = x[i];
		if (x[i] > max)
			max = x[i];
		sum_w += w[i];
		sum_x += w[i] * x[i];
	}
	if (min > 0)
		min = 0;
	if (max == min) {
		*f = (tpc__kq_fit){.scale = 0.0f, .mn = -min, .flat = 1};
		return;
	}
	float iscale = (float)nmax / (max - min), scale = 1 / iscale, best = 0, lf[32];
	f->is = iscale;
	f->m = min;
	for (int i = 0; i < n; i++) {
		float l = (float)imax(0, imin(nmax, tpc__nearest_int(iscale * (x[i] - min))));
		float diff = scale * l + min - x[i];
		diff = a->mad ? fabsf(diff) : diff * diff;
		best += w[i] * diff;
	}
	for (int is = 0; is <= a->nstep; is++) {
		iscale = (a->rmin + a->rdelta * (float)is + (float)nmax) / (max - min);
		float sl = 0, sl2 = 0, sxl = 0;
		for (int i = 0; i < n; i++) {
			lf[i] = (float)imax(0, imin(nmax, tpc__nearest_int(iscale * (x[i] - min))));
			sl += w[i] * lf[i];
			sl2 += w[i] * lf[i] * lf[i];
			sxl += w[i] * lf[i] * x[i];
		}
		float D = sum_w * sl2 - sl * sl;
		if (D > 0) {
			float ts = (sum_w * sxl - sum_x * sl) / D, tm = (sl2 * sum_x - sl * sxl) / D;
			if (tm > 0) {
				tm = 0;
				ts = sxl / sl2;
			}
			float err = 0;
			for (int i = 0; i < n; i++) {
				float diff = ts * lf[i] + tm - x[i];
				diff = a->mad ? fabsf(diff) : diff * diff;
				err += w[i] * diff;
			}
			if (err < best) {
				f->is = iscale;
				f->m = min;
				best = err;
				scale = ts;
				min = tm;
			}
		}
	}
	f->scale = scale;
	f->mn = -min;
	f->flat = 0;
}

/* make_qx_quants(n, nmax, x, L, rmse_type = 1, qw = NULL) for one
 * sub-block: signed levels -nmax..nmax-1, weights x^2, the first scale
 * -nmax / max (max the signed value of largest magnitude, the first one
 * wins) and 18 trials around it; flat (scale 0, levels 0) when that
 * magnitude is under GROUP_MAX_EPS */
static void kq_qx_one(const float *x, const tpc__kq_args *a, tpc__kq_fit *f)
{
	const int n = a->n < 1 ? 1 : a->n > 32 ? 32 : a->n, nmax = a->nmax; /* 16 or 32 */
	float amax = 0, max = 0;
	for (int i = 0; i < n; i++)
		if (fabsf(x[i]) > amax) {
			amax = fabsf(x[i]);
			max = x[i];
		}
	*f = (tpc__kq_fit){.scale = 0.0f, .flat = 1};
	if (amax < GROUP_MAX_EPS)
		return;
	float iscale = (float)-nmax / max, slx = 0, sl2 = 0;
	for (int i = 0; i < n; i++) {
		float l = (float)imax(-nmax, imin(nmax - 1, tpc__nearest_int(iscale * x[i]))), w = x[i] * x[i];
		slx += w * x[i] * l;
		sl2 += w * l * l;
	}
	float scale = sl2 != 0.0f ? slx / sl2 : 0.0f, best = scale * slx;
	f->is = iscale;
	for (int is = -9; is <= 9; is++) {
		if (!is)
			continue;
		iscale = -((float)nmax + 0.1f * (float)is) / max;
		slx = sl2 = 0;
		for (int i = 0; i < n; i++) {
			float l = (float)imax(-nmax, imin(nmax - 1, tpc__nearest_int(iscale * x[i]))), w = x[i] * x[i];
			slx += w * x[i] * l;
			sl2 += w * l * l;
		}
		if (sl2 > 0 && slx * slx > best * sl2) {
			f->is = iscale;
			scale = slx / sl2;
			best = scale * slx;
		}
	}
	f->scale = scale;
	f->flat = 0;
}

/* make_q3_quants(n, nmax, x, L, do_rmse = true) for one sub-block: the
 * levels of make_qx_quants' first scale (weights x^2), then up to 5 passes
 * moving single levels while the weighted fit gains (a pass with no move
 * ends it); the levels + nmax to L, the scale sum l x / sum l^2 */
static void kq_q3_one(const float *x, const tpc__kq_args *a, tpc__kq_fit *f, int8_t *L)
{
	const int n = a->n < 1 ? 1 : a->n > 32 ? 32 : a->n, nmax = a->nmax; /* 16 */
	float amax = 0, max = 0;
	for (int i = 0; i < n; i++)
		if (fabsf(x[i]) > amax) {
			amax = fabsf(x[i]);
			max = x[i];
		}
	*f = (tpc__kq_fit){.scale = 0.0f, .flat = 1};
	if (amax < GROUP_MAX_EPS) {
		memset(L, 0, (size_t)n);
		return;
	}
	float iscale = (float)-nmax / max, sumlx = 0, suml2 = 0;
	for (int i = 0; i < n; i++) {
		int l = imax(-nmax, imin(nmax - 1, tpc__nearest_int(iscale * x[i])));
		float w = x[i] * x[i];
		L[i] = (int8_t)l;
		sumlx += w * x[i] * (float)l;
		suml2 += w * (float)l * (float)l;
	}
	for (int t = 0; t < 5; t++) {
		int changed = 0;
		for (int i = 0; i < n; i++) {
			float w = x[i] * x[i], slx = sumlx - w * x[i] * (float)L[i];
			if (slx > 0) {
				float sl2 = suml2 - w * (float)L[i] * (float)L[i];
				int nl = imax(-nmax, imin(nmax - 1, tpc__nearest_int(x[i] * sl2 / slx)));
				if (nl != L[i]) {
					slx += w * x[i] * (float)nl;
					sl2 += w * (float)nl * (float)nl;
					if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
						L[i] = (int8_t)nl;
						sumlx = slx;
						suml2 = sl2;
						changed++;
					}
				}
			}
		}
		if (!changed)
			break;
	}
	for (int i = 0; i < n; i++)
		L[i] = (int8_t)(L[i] + nmax);
	f->scale = suml2 > 0.0f ? sumlx / suml2 : 0.0f;
	f->flat = 0;
}

static void kq_qkx2_scalar(const float *x, int cnt, const tpc__kq_args *a, tpc__kq_fit *out)
{
	for (int k = 0; k < cnt; k++)
		kq_qkx2_one(x + k * a->n, a, out + k);
}

static void kq_qx_scalar(const float *x, int cnt, const tpc__kq_args *a, tpc__kq_fit *out)
{
	for (int k = 0; k < cnt; k++)
		kq_qx_one(x + k * a->n, a, out + k);
}

static void kq_q3_scalar(const float *x, int cnt, const tpc__kq_args *a, tpc__kq_fit *out, int8_t *L)
{
	for (int k = 0; k < cnt; k++)
		kq_q3_one(x + k * a->n, a, out + k, L + k * a->n);
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define KQ_X86 1
#include <immintrin.h>
#define KQ_W 8
#define KQ_N(f) kq_avx2_##f
#define KQ_ATTR __attribute__((target("avx2")))
#include "tpc_ggml_kq.h"
#undef KQ_W
#undef KQ_N
#undef KQ_ATTR

#define KQ_W 16
#define KQ_N(f) kq_avx512_##f
#define KQ_ATTR __attribute__((target("avx512f")))
#include "tpc_ggml_kq.h"
#undef KQ_W
#undef KQ_N
#undef KQ_ATTR
#endif

static const tpc__kq_kern kerns[] = {
	{"scalar", 1, 1, kq_qkx2_scalar, kq_qx_scalar, kq_q3_scalar},
#ifdef KQ_X86
	{"avx2", 8, 16, kq_avx2_qkx2, kq_avx2_qx, kq_avx2_q3},
	{"avx512f", 16, 32, kq_avx512_qkx2, kq_avx512_qx, kq_avx512_q3},
#endif
};

size_t tpc__kq_kernels(const tpc__kq_kern **all)
{
	size_t n = 1;
#ifdef KQ_X86
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2"))
		n = 2;
	if (n == 2 && __builtin_cpu_supports("avx512f"))
		n = 3;
#endif
	*all = kerns;
	return n;
}

const tpc__kq_kern *tpc__kq_kernel(void)
{
	static const tpc__kq_kern *k;
	const tpc__kq_kern *p = __atomic_load_n(&k, __ATOMIC_RELAXED);
	if (!p) {
		const tpc__kq_kern *all;
		size_t n = tpc__kq_kernels(&all);
		p = &all[n - 1];
		__atomic_store_n(&k, p, __ATOMIC_RELAXED);
	}
	return p;
}

void tpc__kq_fits(const tpc__kq_kern *k, int type, const float *x, int nsub, const tpc__kq_args *a,
		  tpc__kq_fit *out, int8_t *L)
{
	const int lanes = type == 3 || type == 6 ? k->lanes : k->lanes_qkx2;
	for (int g = 0; g < nsub; g += lanes) {
		int cnt = nsub - g < lanes ? nsub - g : lanes;
		if (type == 3)
			k->q3(x + g * a->n, cnt, a, out + g, L + g * a->n);
		else
			(type == 6 ? k->qx : k->qkx2)(x + g * a->n, cnt, a, out + g);
	}
}
