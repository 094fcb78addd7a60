/* tpc_ggml_quant_iq.c - IQ4_NL, IQ4_XS, TQ1_0 and TQ2_0 blocks from F32
 * values without an importance matrix, as llama-quantize writes them
 * (ggml_quantize_chunk: quantize_iq4_nl / quantize_iq4_xs with 7 tries a
 * side, quantize_tq1_0 / quantize_tq2_0 = their _ref rows), bit for bit: the
 * same F32 operations in the same order, no contraction (see
 * tpc_ggml_quant.c).
 *
 * IQ4: each 32 values get the scale that maximizes (sum w q x)^2 / sum w q^2
 * with w = x^2 over the 16 non-linear levels (kvalues_iq4nl), starting from
 * d = max / 127 and trying the 15 scales (k - 127) / max, k = -7..7, each
 * value at its nearest level (ties upward); IQ4_NL stores that scale as
 * f16, IQ4_XS stores d = -max_scale / 32 once per 256 and each block's
 * 6-bit multiple of it, the levels re-chosen for the rounded scale.
 * TQ1_0 / TQ2_0: d = the largest magnitude, each value lroundf(x / d) in
 * {-1, 0, 1}, packed as base-3 fractions of 256 (TQ1_0) or 2 bits (TQ2_0). */
#include <math.h>
#include <string.h>

#include "tpc_cast.h"
#include "tpc_ggml.h"
#include "tpc_ggml_int.h"
#include "tpc_util.h"

#define QK_K 256
#define GROUP_MAX_EPS 1e-15f
#define NTRY 7

/* the level nearest x: the highest i whose midpoint with i - 1 x reaches
 * (2x against the integer sum: exact) */
static int best_level(float x)
{
	const int8_t *v = tpc__kvalues_iq4nl;
	float x2 = x + x;
	int idx = 0;
	for (int step = 8; step > 0; step >>= 1) {
		int j = idx + step;
		idx = x2 >= (float)(v[j - 1] + v[j]) ? j : idx;
	}
	return idx;
}

/* the best scale of 32 values xb (levels in L), 0 for a block below GROUP_MAX_EPS */
static float iq4_block(const float *xb, uint8_t *L)
{
	const int8_t *v = tpc__kvalues_iq4nl;
	float w[32], amax = 0, max = 0;
	for (int j = 0; j < 32; j++) {
		w[j] = xb[j] * xb[j];
		float ax = fabsf(xb[j]);
		if (ax > amax) {
			amax = ax;
			max = xb[j];
		}
	}
	if (amax < GROUP_MAX_EPS)
		return 0;
	float d = -max / (float)v[0], id = 1 / d, sumqx = 0, sumq2 = 0;
	for (int j = 0; j < 32; j++) {
		int l = best_level(id * xb[j]);
		L[j] = (uint8_t)l;
		float q = (float)v[l];
		sumqx += w[j] * q * xb[j];
		sumq2 += w[j] * q * q;
	}
	d = sumqx / sumq2;
	float best = d * sumqx;
	for (int itry = -NTRY; itry <= NTRY; itry++) {
		id = (float)(itry + v[0]) / max;
		sumqx = sumq2 = 0;
		for (int j = 0; j < 32; j++) {
			float q = (float)v[best_level(id * xb[j])];
			sumqx += w[j] * q * xb[j];
			sumq2 += w[j] * q * q;
		}
		if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
			d = sumqx / sumq2;
			best = d * sumqx;
		}
	}
	return d;
}

/* 32 levels -> 16 bytes: value j low nibble, j + 16 high */
static void pack_nibbles(const uint8_t *L, uint8_t *q)
{
	for (int j = 0; j < 16; j++)
		q[j] = (uint8_t)(L[j] | L[16 + j] << 4);
}

void tpc__ggml_qrow_iq4_nl(const float *x, uint8_t *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, x += 32, y += 18) {
		uint8_t L[32];
		float d = iq4_block(x, L);
		tpc_wr16le(y, tpc_f32_to_f16(d));
		float id = d != 0.0f ? 1 / d : 0;
		for (int j = 0; j < 32; j++)
			L[j] = (uint8_t)best_level(id * x[j]);
		pack_nibbles(L, y + 2);
	}
}

/* IQ4_XS (256, 136): d, scales_h (uint16), scales_l[4], qs[128] */
void tpc__ggml_qrow_iq4_xs(const float *x, uint8_t *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, x += QK_K, y += 136) {
		uint8_t L[QK_K];
		float sc[8], max_scale = 0, amax_scale = 0;
		for (int ib = 0; ib < 8; ib++) {
			sc[ib] = iq4_block(x + 32 * ib, L + 32 * ib);
			if (fabsf(sc[ib]) > amax_scale) {
				amax_scale = fabsf(sc[ib]);
				max_scale = sc[ib];
			}
		}
		float d = -max_scale / 32;
		float id = d != 0.0f ? 1 / d : 0;
		unsigned sh = 0;
		memset(y + 4, 0, 4);
		tpc_wr16le(y, tpc_f32_to_f16(d));
		for (int ib = 0; ib < 8; ib++) {
			int l = tpc__nearest_int(id * sc[ib]);
			l = l < -32 ? -32 : l > 31 ? 31 : l;
			float dl = d * (float)l;
			float idl = dl != 0.0f ? 1 / dl : 0;
			for (int j = 0; j < 32; j++)
				L[32 * ib + j] = (uint8_t)best_level(idl * x[32 * ib + j]);
			l += 32;
			y[4 + ib / 2] |= (uint8_t)((l & 15) << (4 * (ib % 2)));
			sh |= (unsigned)(l >> 4) << (2 * ib);
			pack_nibbles(L + 32 * ib, y + 8 + 16 * ib);
		}
		tpc_wr16le(y + 2, (uint16_t)sh);
	}
}

/* the largest magnitude of 256 values and its inverse (0 for 0) */
static float tq_scale(const float *x, float *id)
{
	float amax = 0;
	for (int j = 0; j < QK_K; j++)
		amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]); /* ggml MAX(amax, |x|) */
	*id = amax != 0.0f ? 1.0f / amax : 0.0f;
	return amax;
}

/* x / d as a trit 0, 1, 2 */
static int trit(float x, float id)
{
	return (int)lroundf(x * id) + 1;
}

/* TQ1_0 (256, 54): qs[48], qh[4], d. Byte m of the first 32 holds values
 * m, m + 32, ... m + 128 (the first the most significant trit), of the next
 * 16 values 160 + m + 16n, of qh values 240 + m + 4n; each as the ceiling
 * of its base-3 number * 256 / 243 */
void tpc__ggml_qrow_tq1_0(const float *x, uint8_t *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, x += QK_K, y += 54) {
		float id, d = tq_scale(x, &id);
		for (int m = 0; m < 48; m++) {
			const float *xs = m < 32 ? x + m : x + 160 + (m - 32);
			int stride = m < 32 ? 32 : 16;
			uint8_t q = 0;
			for (int n = 0; n < 5; n++)
				q = (uint8_t)(q * 3 + trit(xs[n * stride], id));
			y[m] = (uint8_t)(((uint16_t)q * 256 + 242) / 243);
		}
		for (int m = 0; m < 4; m++) {
			uint8_t q = 0;
			for (int n = 0; n < 4; n++)
				q = (uint8_t)(q * 3 + trit(x[240 + m + 4 * n], id));
			q = (uint8_t)(q * 3);
			y[48 + m] = (uint8_t)(((uint16_t)q * 256 + 242) / 243);
		}
		tpc_wr16le(y + 52, tpc_f32_to_f16(d));
	}
}

/* TQ2_0 (256, 66): qs[64], d; byte 32c + m holds values 128c + m + 32n in
 * bits 2n */
void tpc__ggml_qrow_tq2_0(const float *x, uint8_t *y, uint64_t nb)
{
	for (uint64_t i = 0; i < nb; i++, x += QK_K, y += 66) {
		float id, d = tq_scale(x, &id);
		for (int c = 0; c < 2; c++)
			for (int m = 0; m < 32; m++) {
				unsigned q = 0;
				for (int n = 0; n < 4; n++)
					q += (unsigned)(trit(x[128 * c + m + 32 * n], id) & 3) << (2 * n);
				y[32 * c + m] = (uint8_t)q;
			}
		tpc_wr16le(y + 64, tpc_f32_to_f16(d));
	}
}
