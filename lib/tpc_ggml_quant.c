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
 * back. The search helpers follow make_qkx2_quants, make_qx_quants
 * (rmse_type 1, no weights) and make_q3_quants (do_rmse) for the arguments
 * those callers pass. Blocks never span two rows, so the rows of a tensor
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
 * 0 when none is above 0), its magnitude in *amax. */
static float abs_max(int n, const float *x, float *amax)
{
	float max = 0.0f;
	*amax = 0.0f;
	for (int i = 0; i < n; i++)
		if (fabsf(x[i]) > *amax) {
			*amax = fabsf(x[i]);
			max = x[i];
		}
	return max;
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

/* ---- the K-quants' searches ---- */

/* make_qkx2_quants: levels 0..nmax, a scale and a min (returned as -min in
 * *mn) that minimise the weighted error (|e| when mad, else e^2) over
 * nstep + 1 trial scales */
static float qkx2(int n, int nmax, const float *x, const float *w, uint8_t *L, float *mn, float rmin, float rdelta,
		  int nstep, int mad)
{
	uint8_t aux[32];
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
		memset(L, 0, (size_t)n);
		*mn = -min;
		return 0.0f;
	}
	float iscale = (float)nmax / (max - min), scale = 1 / iscale, best = 0;
	for (int i = 0; i < n; i++) {
		L[i] = (uint8_t)imax(0, imin(nmax, tpc__nearest_int(iscale * (x[i] - min))));
		float diff = scale * (float)L[i] + min - x[i];
		diff = mad ? fabsf(diff) : diff * diff;
		best += w[i] * diff;
	}
	for (int is = 0; is <= nstep; is++) {
		iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
		float sl = 0, sl2 = 0, sxl = 0;
		for (int i = 0; i < n; i++) {
			int l = imax(0, imin(nmax, tpc__nearest_int(iscale * (x[i] - min))));
			aux[i] = (uint8_t)l;
			sl += w[i] * (float)l;
			sl2 += w[i] * (float)l * (float)l;
			sxl += w[i] * (float)l * x[i];
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
				float diff = ts * (float)aux[i] + tm - x[i];
				diff = mad ? fabsf(diff) : diff * diff;
				err += w[i] * diff;
			}
			if (err < best) {
				memcpy(L, aux, (size_t)n);
				best = err;
				scale = ts;
				min = tm;
			}
		}
	}
	*mn = -min;
	return scale;
}

/* The element of x of largest magnitude, signed; 0 with L zeroed when that
 * magnitude is under GROUP_MAX_EPS (make_qx_quants' and make_q3_quants' start) */
static float signed_max(int n, const float *x, int8_t *L)
{
	float amax, max = abs_max(n, x, &amax);
	if (amax < GROUP_MAX_EPS) {
		memset(L, 0, (size_t)n);
		return 0.0f;
	}
	return max;
}

/* Their first levels at iscale -nmax / max (max signed_max's), clamped to [-nmax, nmax - 1] and
 * stored plus `off`, with the x^2-weighted sums of l x and l^2 */
static void first_levels(int n, int nmax, float max, const float *x, int8_t *L, int off, float *iscale, float *slx,
			 float *sl2)
{
	*iscale = (float)-nmax / max;
	*slx = *sl2 = 0;
	for (int i = 0; i < n; i++) {
		int l = imax(-nmax, imin(nmax - 1, tpc__nearest_int(*iscale * x[i])));
		L[i] = (int8_t)(l + off);
		float w = x[i] * x[i];
		*slx += w * x[i] * (float)l;
		*sl2 += w * (float)l * (float)l;
	}
}

/* make_qx_quants(n, nmax, x, L, rmse_type = 1, qw = NULL): signed levels
 * -nmax..nmax-1 stored + nmax, weights x^2, 18 trial scales around nmax / max */
static float qx(int n, int nmax, const float *x, int8_t *L)
{
	float max = signed_max(n, x, L), iscale, slx, sl2;
	if (max == 0.0f)
		return 0.0f;
	first_levels(n, nmax, max, x, L, nmax, &iscale, &slx, &sl2);
	float scale = sl2 != 0.0f ? slx / sl2 : 0.0f, best = scale * slx;
	for (int is = -9; is <= 9; is++) {
		if (!is)
			continue;
		iscale = -((float)nmax + 0.1f * (float)is) / max;
		slx = sl2 = 0;
		for (int i = 0; i < n; i++) {
			int l = imax(-nmax, imin(nmax - 1, tpc__nearest_int(iscale * x[i])));
			float w = x[i] * x[i];
			slx += w * x[i] * (float)l;
			sl2 += w * (float)l * (float)l;
		}
		if (sl2 > 0 && slx * slx > best * sl2) {
			for (int i = 0; i < n; i++)
				L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, tpc__nearest_int(iscale * x[i]))));
			scale = slx / sl2;
			best = scale * slx;
		}
	}
	return scale;
}

/* make_q3_quants(n, nmax, x, L, do_rmse = true): levels from -nmax / max,
 * then up to 5 passes moving single levels while the x^2-weighted fit gains */
static float q3(int n, int nmax, const float *x, int8_t *L)
{
	float max = signed_max(n, x, L), iscale, sumlx, suml2;
	if (max == 0.0f)
		return 0.0f;
	first_levels(n, nmax, max, x, L, 0, &iscale, &sumlx, &suml2);
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
	return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- the K-quants ---- */

/* Q2_K: 16 sub-blocks of 16, 2-bit levels, 4-bit scale and min each
 * (quantize_row_q2_K_ref) */
static void q2_k(const float *x, uint8_t *y)
{
	uint8_t L[QK_K], *sc = y, *qs = y + 16;
	float w[16], mins[16], scales[16], max_scale = 0, max_min = 0;
	for (int j = 0; j < 16; j++) {
		for (int l = 0; l < 16; l++)
			w[l] = fabsf(x[16 * j + l]);
		scales[j] = qkx2(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, 1);
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
		if (dl == 0.0f)
			continue;
		float ml = dm * (float)(sc[j] >> 4);
		for (int i = 0; i < 16; i++)
			L[16 * j + i] = (uint8_t)imax(0, imin(3, tpc__nearest_int((x[16 * j + i] + ml) / dl)));
	}
	for (int j = 0; j < QK_K; j += 128)
		for (int l = 0; l < 32; l++)
			qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

/* Q3_K: 16 sub-blocks of 16, 3-bit levels (high bit in hmask), 6-bit signed
 * scales (quantize_row_q3_K_ref) */
static void q3_k(const float *x, uint8_t *y)
{
	uint8_t *hmask = y, *qs = y + 32, *s = y + 96;
	int8_t L[QK_K];
	float scales[16], amax;
	for (int j = 0; j < 16; j++)
		scales[j] = q3(16, 4, x + 16 * j, L + 16 * j);
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
		for (int i = 0; i < 16; i++)
			L[16 * j + i] = (int8_t)(imax(-4, imin(3, tpc__nearest_int(x[16 * j + i] / dl))) + 4);
	}
	memset(hmask, 0, 32);
	for (int j = 0; j < QK_K; j++)
		if (L[j] > 3) {
			hmask[j % 32] |= (uint8_t)(1u << (j / 32));
			L[j] -= 4;
		}
	for (int j = 0; j < QK_K; j += 128)
		for (int l = 0; l < 32; l++)
			qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

/* Q4_K and Q5_K: 8 sub-blocks of 32, levels 0..nmax, 6-bit scale and min
 * each (quantize_row_q4_K_ref, quantize_row_q5_K_ref) */
static void q45_k(const float *x, uint8_t *y, int nmax)
{
	uint8_t L[QK_K], *s = y + 4;
	float w[32], mins[8], scales[8], max_scale = 0, max_min = 0;
	for (int j = 0; j < 8; j++) {
		float sum_x2 = 0;
		for (int l = 0; l < 32; l++)
			sum_x2 += x[32 * j + l] * x[32 * j + l];
		float av_x = sqrtf(sum_x2 / 32);
		for (int l = 0; l < 32; l++)
			w[l] = av_x + fabsf(x[32 * j + l]);
		scales[j] = nmax == 15 ? qkx2(32, 15, x + 32 * j, w, L + 32 * j, &mins[j], -1.0f, 0.1f, 20, 0)
				       : qkx2(32, 31, x + 32 * j, w, L + 32 * j, &mins[j], -0.5f, 0.1f, 15, 0);
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
		if (d == 0.0f)
			continue;
		float dmin = dm * (float)m;
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
		for (int j = 0; j < 32; j++) {
			int l1 = L[n + j], l2 = L[n + j + 32];
			if (l1 > 15) {
				l1 -= 16;
				qh[j] |= m1;
			}
			if (l2 > 15) {
				l2 -= 16;
				qh[j] |= m2;
			}
			ql[j] = (uint8_t)(l1 | l2 << 4);
		}
}

/* Q6_K: 16 sub-blocks of 16, 6-bit levels, 8-bit signed scales
 * (quantize_row_q6_K_ref) */
static void q6_k(const float *x, uint8_t *y)
{
	int8_t L[QK_K], *sc = (int8_t *)(y + 192);
	float scales[16], max_abs;
	for (int ib = 0; ib < 16; ib++)
		scales[ib] = qx(16, 32, x + 16 * ib, L + 16 * ib);
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
		if (d == 0.0f)
			continue;
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

void tpc__ggml_qrow_q2_k(const float *x, uint8_t *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++)
		q2_k(x + QK_K * i, y + 84 * i);
}

void tpc__ggml_qrow_q3_k(const float *x, uint8_t *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++)
		q3_k(x + QK_K * i, y + 110 * i);
}

void tpc__ggml_qrow_q4_k(const float *x, uint8_t *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++)
		q45_k(x + QK_K * i, y + 144 * i, 15);
}

void tpc__ggml_qrow_q5_k(const float *x, uint8_t *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++)
		q45_k(x + QK_K * i, y + 176 * i, 31);
}

void tpc__ggml_qrow_q6_k(const float *x, uint8_t *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++)
		q6_k(x + QK_K * i, y + 210 * i);
}
