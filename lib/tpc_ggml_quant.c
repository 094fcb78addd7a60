/* tpc_ggml_quant.c - ggml's block quantizers without an importance matrix
 * (tpc_ggml.h tpc_ggml_quantize).
 *
 * Each function gives the bytes of ggml's reference quantizer of the same
 * type (ggml/src/ggml-quants.c quantize_row_<type>_ref, which ggml_quantize_chunk
 * and so llama-quantize run when no imatrix is given), bit for bit: the same
 * F32 operations in the same order (ISO C mode: no contraction into fused
 * multiply-adds), the same rounding at each site (a cast that truncates for
 * the 32-element types, nearest_int's round-half-to-even for the K-quants),
 * f16 scales rounded to nearest even and read back where ggml reads them
 * back. The searches of make_qkx2_quants and make_qx_quants (rmse_type 1,
 * no weights) are tpc_ggml_kq.c's, several sub-blocks at a time; the one of
 * make_q3_quants (do_rmse) is here; each for the arguments those callers
 * pass. Blocks never span two rows, so the rows of a tensor
 * are quantized in parallel with bytes that do not depend on the threads. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "tpc_cast.h"
#include "tpc_ggml.h"
#include "tpc_ggml_int.h"
#include "tpc_util.h"

#define QK_K 256
#define GROUP_MAX_EPS 1e-15f

static int imin(int a, int b)
{
	return a < b ? a : b;
}

static int imax(int a, int b)
{
	return a > b ? a : b;
}


/* f32 -> f16 -> f32, as ggml reads back a scale it has just stored */
static float f16_round(float f)
{
	return tpc_f16_to_f32(tpc_f32_to_f16(f));
}

static void put_f16(uint8_t *p, float f)
{
	tpc_wr16le(p, tpc_f32_to_f16(f));
}

/* ---- the 32-element types ---- */

/* The element of x[0..n) of largest magnitude, signed (the first one wins;
 * 0 when none is above 0), its magnitude in *amax: ggml's scan (a greater
 * magnitude replaces the one kept, NaN never does) as the largest magnitude
 * over 4 running maxima (a maximum is the same in any order), then the
 * first element of that magnitude: no branch on the data in the scan. n is
 * a multiple of 4 (16, 32). */
static float abs_max(int n, const float *x, float *amax)
{
	float m[4] = {0.0f, 0.0f, 0.0f, 0.0f}, a = 0.0f;
	for (int i = 0; i + 3 < n; i += 4)
		for (int k = 0; k < 4; k++)
			m[k] = fabsf(x[i + k]) > m[k] ? fabsf(x[i + k]) : m[k];
	for (int k = 0; k < 4; k++)
		a = m[k] > a ? m[k] : a;
	*amax = a;
	for (int i = 0; a > 0.0f && i < n; i++)
		if (fabsf(x[i]) == a)
			return x[i];
	return 0.0f;
}

/* Q4_0 / Q5_0: d from the signed value of largest magnitude (the first one
 * wins), q = min(top, trunc(x / d + off + 0.5)) with 1/d from the F32 d */
static void q_sym(const float *x, uint8_t *b, int bits)
{
	float amax, max = abs_max(32, x, &amax);
	float d = max / (bits == 4 ? -8.0f : -16.0f), id = d != 0.0f ? 1.0f / d : 0.0f;
	float off = bits == 4 ? 8.5f : 16.5f;
	int top = bits == 4 ? 15 : 31;
	uint8_t *qs = b + (bits == 4 ? 2 : 6);
	uint32_t qh = 0;
	put_f16(b, d);
#pragma omp simd reduction(| : qh)
	for (int j = 0; j < 16; j++) {
		int a = imin(top, (int8_t)(int)(x[j] * id + off)), c = imin(top, (int8_t)(int)(x[j + 16] * id + off));
		qs[j] = (uint8_t)((a & 15) | (c & 15) << 4);
		qh |= (uint32_t)(a >> 4 & 1) << j | (uint32_t)(c >> 4 & 1) << (j + 16);
	}
	if (bits == 5)
		tpc_wr32le(b + 2, qh);
}

/* Q4_1 / Q5_1: d = (max - min) / 15 or 31, q = trunc((x - min) / d + 0.5)
 * (Q4_1 clamped to 15; Q5_1 is not clamped, its sum never passes 31.5) */
static void q_affine(const float *x, uint8_t *b, int bits)
{
	float min = FLT_MAX, max = -FLT_MAX;
	for (int j = 0; j < 32; j++) {
		if (x[j] < min)
			min = x[j];
		if (x[j] > max)
			max = x[j];
	}
	float d = (max - min) / (bits == 4 ? 15.0f : 31.0f), id = d != 0.0f ? 1.0f / d : 0.0f;
	uint8_t *qs = b + (bits == 4 ? 4 : 8);
	uint32_t qh = 0;
	put_f16(b, d);
	put_f16(b + 2, min);
	for (int j = 0; j < 16; j++) {
		int a = (int)((x[j] - min) * id + 0.5f), c = (int)((x[j + 16] - min) * id + 0.5f);
		if (bits == 4) {
			a = imin(15, (int8_t)a);
			c = imin(15, (int8_t)c);
		} else {
			a = (uint8_t)a;
			c = (uint8_t)c;
		}
		qs[j] = (uint8_t)((a & 15) | (c & 15) << 4);
		qh |= (uint32_t)(a >> 4 & 1) << j | (uint32_t)(c >> 4 & 1) << (j + 16);
	}
	if (bits == 5)
		tpc_wr32le(b + 4, qh);
}

/* The legacy types' rows: nb blocks of 32 values, one after another. */
#define QROW(type, q, bytes, bits)                                               \
	void tpc__ggml_qrow_##type(const float *x, uint8_t *y, uint64_t nb)      \
	{                                                                        \
		for (uint64_t i = 0; i < nb; i++)                                \
			q(x + 32 * i, y + (bytes) * i, bits);                    \
	}
QROW(q4_0, q_sym, 18, 4)
QROW(q5_0, q_sym, 22, 5)
QROW(q4_1, q_affine, 20, 4)
QROW(q5_1, q_affine, 24, 5)

void tpc__ggml_qrow_q8_0(const float *x, uint8_t *y, uint64_t nb)
{
	tpc_ggml_quant_q8_0(x, y, nb * 32);
}

/* ---- the K-quants ---- */

/* The levels of a make_qkx2_quants fit (tpc_ggml_int.h): the ones of its
 * winning trial, which a sub-block whose quantized scale is 0 keeps */
static void fit_levels(const float *x, int n, int nmax, const tpc__kq_fit *f, uint8_t *L)
{
	for (int i = 0; i < n; i++)
		L[i] = f->flat ? 0 : (uint8_t)imax(0, imin(nmax, tpc__nearest_int(f->is * (x[i] - f->m))));
}

/* Q2_K: 16 sub-blocks of 16, 2-bit levels, 4-bit scale and min each
 * (quantize_row_q2_K_ref), from the sub-blocks' make_qkx2_quants fits f */
static void q2_k(const float *x, uint8_t *y, const tpc__kq_fit *f)
{
	uint8_t L[QK_K], *sc = y, *qs = y + 16;
	float mins[16], scales[16], max_scale = 0, max_min = 0;
	for (int j = 0; j < 16; j++) {
		scales[j] = f[j].scale;
		mins[j] = f[j].mn;
		if (scales[j] > max_scale)
			max_scale = scales[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}
	float d = 0.0f, dmin = 0.0f;
	if (max_scale > 0) {
		float iscale = 15.0f / max_scale;
		for (int j = 0; j < 16; j++)
			sc[j] = (uint8_t)tpc__nearest_int(iscale * scales[j]);
		d = max_scale / 15.0f;
	} else {
		memset(sc, 0, 16);
	}
	if (max_min > 0) {
		float iscale = 15.0f / max_min;
		for (int j = 0; j < 16; j++)
			sc[j] |= (uint8_t)(tpc__nearest_int(iscale * mins[j]) << 4);
		dmin = max_min / 15.0f;
	}
	put_f16(y + 80, d);
	put_f16(y + 82, dmin);
	float dd = f16_round(d), dm = f16_round(dmin);
	for (int j = 0; j < 16; j++) {
		float dl = dd * (float)(sc[j] & 15);
		if (dl == 0.0f) {
			fit_levels(x + 16 * j, 16, 3, &f[j], L + 16 * j);
			continue;
		}
		float ml = dm * (float)(sc[j] >> 4);
#pragma omp simd
		for (int i = 0; i < 16; i++)
			L[16 * j + i] = (uint8_t)imax(0, imin(3, tpc__nearest_int((x[16 * j + i] + ml) / dl)));
	}
	for (int j = 0; j < QK_K; j += 128)
		for (int l = 0; l < 32; l++)
			qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

/* Q3_K: 16 sub-blocks of 16, 3-bit levels (high bit in hmask), 6-bit signed
 * scales (quantize_row_q3_K_ref), from the sub-blocks' make_q3_quants fits f
 * and levels L (changed here) */
static void q3_k(const float *x, uint8_t *y, const tpc__kq_fit *f, int8_t *L)
{
	uint8_t *hmask = y, *qs = y + 32, *s = y + 96;
	float scales[16], amax;
	for (int j = 0; j < 16; j++)
		scales[j] = f[j].scale;
	float max_scale = abs_max(16, scales, &amax);
	memset(s, 0, 12);
	float d = 0.0f;
	if (max_scale != 0.0f) {
		float iscale = -32.0f / max_scale;
		for (int j = 0; j < 16; j++) {
			int8_t l = (int8_t)tpc__nearest_int(iscale * scales[j]);
			l = (int8_t)(imax(-32, imin(31, l)) + 32);
			if (j < 8)
				s[j] = (uint8_t)(l & 15);
			else
				s[j - 8] |= (uint8_t)((l & 15) << 4);
			s[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
		}
		d = 1 / iscale;
	}
	put_f16(y + 108, d);
	float dd = f16_round(d);
	for (int j = 0; j < 16; j++) {
		int v = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
		int8_t sc = (int8_t)((v | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32);
		float dl = dd * (float)sc;
		if (dl == 0.0f)
			continue;
#pragma omp simd
		for (int i = 0; i < 16; i++)
			L[16 * j + i] = (int8_t)(imax(-4, imin(3, tpc__nearest_int(x[16 * j + i] / dl))) + 4);
	}
	memset(hmask, 0, 32); /* level j's high bit: bit j / 32 of hmask[j % 32] (no branch: it is random) */
	for (int m = 0; m < 8; m++)
		for (int l = 0; l < 32; l++) {
			int hi = L[32 * m + l] > 3;
			hmask[l] |= (uint8_t)(hi << m);
			L[32 * m + l] = (int8_t)(L[32 * m + l] - 4 * hi);
		}
	for (int j = 0; j < QK_K; j += 128)
		for (int l = 0; l < 32; l++)
			qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

/* Q4_K and Q5_K: 8 sub-blocks of 32, levels 0..nmax, 6-bit scale and min
 * each (quantize_row_q4_K_ref, quantize_row_q5_K_ref), from the
 * sub-blocks' make_qkx2_quants fits f */
static void q45_k(const float *x, uint8_t *y, const tpc__kq_fit *f, int nmax)
{
	uint8_t L[QK_K], *s = y + 4;
	float mins[8], scales[8], max_scale = 0, max_min = 0;
	for (int j = 0; j < 8; j++) {
		scales[j] = f[j].scale;
		mins[j] = f[j].mn;
		if (scales[j] > max_scale)
			max_scale = scales[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}
	float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f, inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
	for (int j = 0; j < 8; j++) {
		uint8_t ls = (uint8_t)tpc__nearest_int(inv_scale * scales[j]), lm = (uint8_t)tpc__nearest_int(inv_min * mins[j]);
		ls = ls < 63 ? ls : 63;
		lm = lm < 63 ? lm : 63;
		if (j < 4) {
			s[j] = ls;
			s[j + 4] = lm;
		} else {
			s[j + 4] = (uint8_t)((ls & 15) | (lm & 15) << 4);
			s[j - 4] |= (uint8_t)((ls >> 4) << 6);
			s[j] |= (uint8_t)((lm >> 4) << 6);
		}
	}
	put_f16(y, max_scale / 63.0f);
	put_f16(y + 2, max_min / 63.0f);
	float dd = f16_round(max_scale / 63.0f), dm = f16_round(max_min / 63.0f);
	for (int j = 0; j < 8; j++) {
		int sc, m;
		if (j < 4) {
			sc = s[j] & 63;
			m = s[j + 4] & 63;
		} else {
			sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
			m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
		}
		float d = dd * (float)sc;
		if (d == 0.0f) {
			fit_levels(x + 32 * j, 32, nmax, &f[j], L + 32 * j);
			continue;
		}
		float dmin = dm * (float)m;
#pragma omp simd
		for (int i = 0; i < 32; i++)
			L[32 * j + i] = (uint8_t)imax(0, imin(nmax, tpc__nearest_int((x[32 * j + i] + dmin) / d)));
	}
	if (nmax == 15) {
		uint8_t *q = y + 16;
		for (int j = 0; j < QK_K; j += 64, q += 32)
			for (int l = 0; l < 32; l++)
				q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
		return;
	}
	uint8_t *qh = y + 16, *ql = y + 48, m1 = 1, m2 = 2;
	memset(qh, 0, 32);
	for (int n = 0; n < QK_K; n += 64, ql += 32, m1 = (uint8_t)(m1 << 2), m2 = (uint8_t)(m2 << 2))
		for (int j = 0; j < 32; j++) { /* no branch: the fifth bits are random */
			int l1 = L[n + j], l2 = L[n + j + 32];
			qh[j] |= (uint8_t)((l1 >> 4) * m1 | (l2 >> 4) * m2);
			ql[j] = (uint8_t)((l1 & 15) | (l2 & 15) << 4);
		}
}

/* Q6_K: 16 sub-blocks of 16, 6-bit levels, 8-bit signed scales
 * (quantize_row_q6_K_ref), from the sub-blocks' make_qx_quants fits f */
static void q6_k(const float *x, uint8_t *y, const tpc__kq_fit *f)
{
	int8_t L[QK_K], *sc = (int8_t *)(y + 192);
	float scales[16], max_abs;
	for (int ib = 0; ib < 16; ib++)
		scales[ib] = f[ib].scale;
	float max_scale = abs_max(16, scales, &max_abs);
	if (max_abs < GROUP_MAX_EPS) {
		memset(y, 0, 210);
		return;
	}
	float iscale = -128.0f / max_scale;
	put_f16(y + 208, 1 / iscale);
	float dd = f16_round(1 / iscale);
	for (int ib = 0; ib < 16; ib++)
		sc[ib] = (int8_t)imin(127, tpc__nearest_int(iscale * scales[ib]));
	for (int j = 0; j < 16; j++) {
		float d = dd * (float)sc[j];
		if (d == 0.0f) { /* the levels of the fit's scale */
			for (int i = 0; i < 16; i++)
				L[16 * j + i] = f[j].flat ? 0
						: (int8_t)(32 + imax(-32, imin(31, tpc__nearest_int(f[j].is * x[16 * j + i]))));
			continue;
		}
#pragma omp simd
		for (int i = 0; i < 16; i++)
			L[16 * j + i] = (int8_t)(imax(-32, imin(31, tpc__nearest_int(x[16 * j + i] / d))) + 32);
	}
	uint8_t *ql = y, *qh = y + 128;
	for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32)
		for (int l = 0; l < 32; l++) {
			int a = L[j + l], b = L[j + l + 32], c = L[j + l + 64], e = L[j + l + 96];
			ql[l] = (uint8_t)((a & 15) | (c & 15) << 4);
			ql[l + 32] = (uint8_t)((b & 15) | (e & 15) << 4);
			qh[l] = (uint8_t)(a >> 4 | (b >> 4) << 2 | (c >> 4) << 4 | (e >> 4) << 6);
		}
}

/* The K-quants' rows: the searches of KQ_BLOCKS blocks' sub-blocks
 * at a time (tpc__kq_fits: in vector lanes where the CPU has them), then
 * each block from its fits */
#define KQ_BLOCKS 4
static const tpc__kq_args a_q2 = {.n = 16, .nmax = 3, .wkind = TPC_KQ_W_ABS, .nstep = 15, .mad = 1, .rmin = -0.5f, .rdelta = 0.1f};
static const tpc__kq_args a_q4 = {.n = 32, .nmax = 15, .wkind = TPC_KQ_W_AVX, .nstep = 20, .rmin = -1.0f, .rdelta = 0.1f};
static const tpc__kq_args a_q5 = {.n = 32, .nmax = 31, .wkind = TPC_KQ_W_AVX, .nstep = 15, .rmin = -0.5f, .rdelta = 0.1f};
static const tpc__kq_args a_q3 = {.n = 16, .nmax = 4};
static const tpc__kq_args a_q6 = {.n = 16, .nmax = 32};

static void k_row(const float *x, uint8_t *y, uint64_t nb, int type, const tpc__kq_args *a)
{
	const tpc__kq_kern *k = tpc__kq_kernel();
	const int per = QK_K / a->n;
	tpc__kq_fit f[KQ_BLOCKS * 16];
	int8_t L[KQ_BLOCKS * QK_K];
	for (uint64_t i = 0; i < nb; i += KQ_BLOCKS) {
		int c = nb - i < KQ_BLOCKS ? (int)(nb - i) : KQ_BLOCKS;
		tpc__kq_fits(k, type, x + QK_K * i, c * per, a, f, L);
		for (int b = 0; b < c; b++) {
			const float *xb = x + QK_K * (i + (uint64_t)b);
			const tpc__kq_fit *fb = f + per * b;
			switch (type) {
			case 2: q2_k(xb, y + 84 * (i + (uint64_t)b), fb); break;
			case 3: q3_k(xb, y + 110 * (i + (uint64_t)b), fb, L + QK_K * b); break;
			case 4: q45_k(xb, y + 144 * (i + (uint64_t)b), fb, 15); break;
			case 5: q45_k(xb, y + 176 * (i + (uint64_t)b), fb, 31); break;
			default: q6_k(xb, y + 210 * (i + (uint64_t)b), fb); break;
			}
		}
	}
}

void tpc__ggml_qrow_q2_k(const float *x, uint8_t *y, uint64_t nb)
{
	k_row(x, y, nb, 2, &a_q2);
}

void tpc__ggml_qrow_q3_k(const float *x, uint8_t *y, uint64_t nb)
{
	k_row(x, y, nb, 3, &a_q3);
}

void tpc__ggml_qrow_q4_k(const float *x, uint8_t *y, uint64_t nb)
{
	k_row(x, y, nb, 4, &a_q4);
}

void tpc__ggml_qrow_q5_k(const float *x, uint8_t *y, uint64_t nb)
{
	k_row(x, y, nb, 5, &a_q5);
}

void tpc__ggml_qrow_q6_k(const float *x, uint8_t *y, uint64_t nb)
{
	k_row(x, y, nb, 6, &a_q6);
}
