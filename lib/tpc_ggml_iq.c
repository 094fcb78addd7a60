/* tpc_ggml_iq.c - the block decoders of ggml's lattice and ternary types
 * (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS,
 * TQ1_0, TQ2_0), written from the block layouts; the lattices are data
 * (tpc_ggml_grids.c, generated from python3-gguf 0.19).
 *
 * Each value is the F32 result python3-gguf's dequantize_blocks gives, bit
 * for bit: the same products in the same order, one rounding each (the
 * super-block scale d times the 4-bit scale term first, then the lattice
 * value, then the sign; the 1-bit types add their +-1/8 to the lattice
 * value before the one product). A group's sign bits come either from the
 * 7-bit index into ksigns (IQ2_XXS, IQ2_XS, IQ3_XXS) or stored (IQ2_S,
 * IQ3_S). */
#include <string.h>

#include "tpc_cast.h"
#include "tpc_ggml.h"
#include "tpc_ggml_int.h"
#include "tpc_util.h"

static float h2f(const uint8_t *p)
{
	return tpc_f16_to_f32(tpc_rd16le(p));
}

static float sgn(unsigned bits, int j)
{
	return (bits >> j) & 1 ? -1.0f : 1.0f;
}

/* byte k of a grid row, unsigned (the IQ2 / IQ3 lattices) or signed (IQ1) */
static float gu(uint64_t row, int k)
{
	return (float)(uint8_t)(row >> (8 * k));
}

static float gs(uint64_t row, int k)
{
	return (float)(int8_t)(uint8_t)(row >> (8 * k));
}

/* IQ2_XXS (256, 66): d, then 8 groups of 32 as two uint32: four grid
 * indices (bytes), and four 7-bit sign indices with the 4-bit scale on top */
static void dq_iq2xxs(const uint8_t *b, float *x)
{
	float d = h2f(b);
	for (int ib = 0; ib < 8; ib++) {
		const uint8_t *g = b + 2 + 8 * ib;
		uint32_t aux = tpc_rd32le(g + 4);
		float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
		for (int l = 0; l < 4; l++) {
			uint64_t row = tpc__iq2xxs_grid[g[l]];
			unsigned s = tpc__ksigns_iq2xs[(aux >> (7 * l)) & 127];
			for (int j = 0; j < 8; j++)
				x[32 * ib + 8 * l + j] = db * gu(row, j) * sgn(s, j);
		}
	}
}

/* the 4-bit scale of values 16s.. (IQ2_XS, IQ2_S: two a byte, low first) */
static float scale16(float d, const uint8_t *sc, int s)
{
	return d * (0.5f + (float)((sc[s / 2] >> (4 * (s & 1))) & 15)) * 0.25f;
}

/* IQ2_XS (256, 74): d, 32 uint16 (9-bit grid index, 7-bit sign index), 8
 * bytes of scales */
static void dq_iq2xs(const uint8_t *b, float *x)
{
	float d = h2f(b);
	for (int i = 0; i < 32; i++) {
		unsigned q = tpc_rd16le(b + 2 + 2 * i);
		float db = scale16(d, b + 66, i / 2);
		uint64_t row = tpc__iq2xs_grid[q & 511];
		unsigned s = tpc__ksigns_iq2xs[q >> 9];
		for (int j = 0; j < 8; j++)
			x[8 * i + j] = db * gu(row, j) * sgn(s, j);
	}
}

/* IQ2_S (256, 82): d, 32 grid index bytes, 32 sign bytes, 8 bytes of the
 * indices' two high bits, 8 bytes of scales */
static void dq_iq2s(const uint8_t *b, float *x)
{
	float d = h2f(b);
	const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66;
	for (int i = 0; i < 32; i++) {
		unsigned idx = qs[i] | ((qh[i / 4] >> (2 * (i % 4))) & 3u) << 8;
		float db = scale16(d, b + 74, i / 2);
		uint64_t row = tpc__iq2s_grid[idx];
		for (int j = 0; j < 8; j++)
			x[8 * i + j] = db * gu(row, j) * sgn(signs[i], j);
	}
}

/* IQ3_XXS (256, 98): d, 64 grid index bytes (4 values each), 8 uint32 as
 * IQ2_XXS's second word (the scale term halved, not quartered) */
static void dq_iq3xxs(const uint8_t *b, float *x)
{
	float d = h2f(b);
	for (int ib = 0; ib < 8; ib++) {
		uint32_t aux = tpc_rd32le(b + 66 + 4 * ib);
		float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
		for (int l = 0; l < 4; l++) {
			unsigned s = tpc__ksigns_iq2xs[(aux >> (7 * l)) & 127];
			for (int j = 0; j < 8; j++) {
				uint32_t row = tpc__iq3xxs_grid[b[2 + 8 * ib + 2 * l + j / 4]];
				x[32 * ib + 8 * l + j] = db * gu(row, j % 4) * sgn(s, j);
			}
		}
	}
}

/* IQ3_S (256, 110): d, 64 grid index bytes, 8 bytes of their ninth bits, 32
 * sign bytes, 4 bytes of scales (d * (1 + 2 s) per 32) */
static void dq_iq3s(const uint8_t *b, float *x)
{
	float d = h2f(b);
	const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *sc = b + 106;
	for (int v = 0; v < 256; v++) {
		int i = v / 4, ib = v / 32;
		unsigned idx = qs[i] | ((qh[i / 8] >> (i % 8)) & 1u) << 8;
		float db = d * (float)(1 + 2 * ((sc[ib / 2] >> (4 * (ib & 1))) & 15));
		x[v] = db * gu(tpc__iq3s_grid[idx], v % 4) * sgn(signs[v / 8], v % 8);
	}
}

/* IQ1_S (256, 50): d, 32 grid index bytes, 8 uint16: per 32 values the
 * indices' three high bits (3 each), the 3-bit scale, the delta's sign */
static void dq_iq1s(const uint8_t *b, float *x)
{
	float d = h2f(b);
	for (int ib = 0; ib < 8; ib++) {
		unsigned h = tpc_rd16le(b + 34 + 2 * ib);
		float dl = d * (float)(2 * ((h >> 12) & 7) + 1);
		float delta = h & 0x8000 ? -0.125f : 0.125f;
		for (int l = 0; l < 4; l++) {
			uint64_t row = tpc__iq1s_grid[b[2 + 4 * ib + l] | ((h >> (3 * l)) & 7u) << 8];
			for (int j = 0; j < 8; j++)
				x[32 * ib + 8 * l + j] = dl * (gs(row, j) + delta);
		}
	}
}

/* IQ1_M (256, 56): 32 grid index bytes, 16 bytes of nibbles (three high
 * index bits and the delta's sign per 8 values), 4 uint16 holding sixteen
 * 3-bit scales (one per 16 values) and, in their top nibbles, the f16 d */
static void dq_iq1m(const uint8_t *b, float *x)
{
	unsigned sc[4];
	for (int k = 0; k < 4; k++)
		sc[k] = tpc_rd16le(b + 48 + 2 * k);
	uint16_t dh = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000));
	float d = tpc_f16_to_f32(dh);
	for (int i = 0; i < 32; i++) {
		unsigned nib = (b[32 + i / 2] >> (4 * (i % 2))) & 15;
		int s = i / 2;
		float dl = d * (float)(2 * ((sc[s / 4] >> (3 * (s % 4))) & 7) + 1);
		float delta = nib & 8 ? -0.125f : 0.125f;
		uint64_t row = tpc__iq1s_grid[b[i] | (nib & 7u) << 8];
		for (int j = 0; j < 8; j++)
			x[8 * i + j] = dl * (gs(row, j) + delta);
	}
}

/* IQ4_NL (32, 18): d, 16 bytes: value j < 16 the low nibble of byte j, the
 * others the high nibbles, each an index into kvalues_iq4nl */
static void dq_iq4nl(const uint8_t *b, float *x)
{
	float d = h2f(b);
	for (int j = 0; j < 32; j++)
		x[j] = d * (float)tpc__kvalues_iq4nl[(b[2 + j % 16] >> (j < 16 ? 0 : 4)) & 15];
}

/* IQ4_XS (256, 136): d, the scales' high 2 bits (uint16, 2 per 32 values),
 * their low 4 bits (4 bytes, low nibble first), then 8 IQ4_NL-ordered
 * groups of 16 bytes; the 6-bit scale less 32 */
static void dq_iq4xs(const uint8_t *b, float *x)
{
	float d = h2f(b);
	unsigned sh = tpc_rd16le(b + 2);
	for (int ib = 0; ib < 8; ib++) {
		int ls = (int)(((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | ((sh >> (2 * ib)) & 3) << 4) - 32;
		float dl = d * (float)ls;
		const uint8_t *qs = b + 8 + 16 * ib;
		for (int j = 0; j < 32; j++)
			x[32 * ib + j] = dl * (float)tpc__kvalues_iq4nl[(qs[j % 16] >> (j < 16 ? 0 : 4)) & 15];
	}
}

/* TQ1_0 (256, 54): 48 bytes of five base-3 digits each (as a fraction of
 * 256: digit k is the top of (byte * 3^k mod 256) * 3), 4 bytes of four,
 * then d; values 0-159 from bytes 0-31 (digit v / 32), 160-239 from bytes
 * 32-47, 240-255 from the 4 */
static void dq_tq1(const uint8_t *b, float *x)
{
	static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
	float d = h2f(b + 52);
	for (int v = 0; v < 256; v++) {
		uint8_t byte, k;
		if (v < 160)
			byte = b[v % 32], k = (uint8_t)(v / 32);
		else if (v < 240)
			byte = b[32 + (v - 160) % 16], k = (uint8_t)((v - 160) / 16);
		else
			byte = b[48 + (v - 240) % 4], k = (uint8_t)((v - 240) / 4);
		uint8_t m = (uint8_t)(byte * pow3[k]);
		x[v] = d * (float)((int)(((unsigned)m * 3) >> 8) - 1);
	}
}

/* TQ2_0 (256, 66): 64 bytes of 2-bit values (value v: byte 32 (v / 128) +
 * v % 32, bits 2 ((v % 128) / 32)), then d; q - 1 */
static void dq_tq2(const uint8_t *b, float *x)
{
	float d = h2f(b + 64);
	for (int v = 0; v < 256; v++)
		x[v] = d * (float)((int)((b[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3) - 1);
}

bool tpc__ggml_dq_lattice(int type, const uint8_t *b, float *x)
{
	switch (type) {
	case TPC_GGML_IQ2_XXS: dq_iq2xxs(b, x); return true;
	case TPC_GGML_IQ2_XS: dq_iq2xs(b, x); return true;
	case TPC_GGML_IQ2_S: dq_iq2s(b, x); return true;
	case TPC_GGML_IQ3_XXS: dq_iq3xxs(b, x); return true;
	case TPC_GGML_IQ3_S: dq_iq3s(b, x); return true;
	case TPC_GGML_IQ1_S: dq_iq1s(b, x); return true;
	case TPC_GGML_IQ1_M: dq_iq1m(b, x); return true;
	case TPC_GGML_IQ4_NL: dq_iq4nl(b, x); return true;
	case TPC_GGML_IQ4_XS: dq_iq4xs(b, x); return true;
	case TPC_GGML_TQ1_0: dq_tq1(b, x); return true;
	case TPC_GGML_TQ2_0: dq_tq2(b, x); return true;
	default: return false;
	}
}
