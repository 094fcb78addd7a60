/* tpc_ggml.c - ggml type table, block decoders, Q8_0 quantizer (tpc_ggml.h). */
#include <ctype.h>
#include <math.h>
#include <string.h>

#include "tpc_cast.h"
#include "tpc_ggml.h"
#include "tpc_ggml_int.h"
#include "tpc_util.h"

#define QK_K 256

/* Every ggml type gguf-py 0.19 names (constants.py GGMLQuantizationType and
 * GGML_QUANT_SIZES), in the order `inspect` counts them: the ones tpconv
 * decodes first, as before, then the ones it reads and copies only. The
 * quant column: the types tpconv writes from F32 values, with ggml's
 * reference quantizer (lib/tpc_ggml_quant.c). */
typedef void (*qrow_fn)(const float *x, uint8_t *y, uint64_t nblocks);
static const struct {
	int type;
	tpc_ggml_info info;
	tpc_dtype plain;
	qrow_fn quant;
} types[] = {
	{TPC_GGML_F32, {"F32", 1, 4}, TPC_F32, NULL},       {TPC_GGML_F16, {"F16", 1, 2}, TPC_F16, NULL},
	{TPC_GGML_BF16, {"BF16", 1, 2}, TPC_BF16, NULL},
	{TPC_GGML_Q4_0, {"Q4_0", 32, 18}, 0, tpc__ggml_qrow_q4_0},
	{TPC_GGML_Q4_1, {"Q4_1", 32, 20}, 0, tpc__ggml_qrow_q4_1},
	{TPC_GGML_Q5_0, {"Q5_0", 32, 22}, 0, tpc__ggml_qrow_q5_0},
	{TPC_GGML_Q5_1, {"Q5_1", 32, 24}, 0, tpc__ggml_qrow_q5_1},
	{TPC_GGML_Q8_0, {"Q8_0", 32, 34}, 0, tpc__ggml_qrow_q8_0},
	{TPC_GGML_Q2_K, {"Q2_K", QK_K, 84}, 0, tpc__ggml_qrow_q2_k},
	{TPC_GGML_Q3_K, {"Q3_K", QK_K, 110}, 0, tpc__ggml_qrow_q3_k},
	{TPC_GGML_Q4_K, {"Q4_K", QK_K, 144}, 0, tpc__ggml_qrow_q4_k},
	{TPC_GGML_Q5_K, {"Q5_K", QK_K, 176}, 0, tpc__ggml_qrow_q5_k},
	{TPC_GGML_Q6_K, {"Q6_K", QK_K, 210}, 0, tpc__ggml_qrow_q6_k},
	{TPC_GGML_F64, {"F64", 1, 8}, TPC_F64, NULL},
	{TPC_GGML_I8, {"I8", 1, 1}, TPC_I8, NULL},          {TPC_GGML_I16, {"I16", 1, 2}, TPC_I16, NULL},
	{TPC_GGML_I32, {"I32", 1, 4}, TPC_I32, NULL},       {TPC_GGML_I64, {"I64", 1, 8}, TPC_I64, NULL},
	/* read, listed and copied; not dequantized: Q8_1, Q8_K, Q1_0, Q2_0 */
	{TPC_GGML_Q8_1, {"Q8_1", 32, 36}, 0, NULL},         {TPC_GGML_Q8_K, {"Q8_K", QK_K, 292}, 0, NULL},
	{TPC_GGML_IQ2_XXS, {"IQ2_XXS", QK_K, 66}, 0, NULL}, {TPC_GGML_IQ2_XS, {"IQ2_XS", QK_K, 74}, 0, NULL},
	{TPC_GGML_IQ3_XXS, {"IQ3_XXS", QK_K, 98}, 0, NULL}, {TPC_GGML_IQ1_S, {"IQ1_S", QK_K, 50}, 0, NULL},
	{TPC_GGML_IQ4_NL, {"IQ4_NL", 32, 18}, 0, tpc__ggml_qrow_iq4_nl},     {TPC_GGML_IQ3_S, {"IQ3_S", QK_K, 110}, 0, NULL},
	{TPC_GGML_IQ2_S, {"IQ2_S", QK_K, 82}, 0, NULL},     {TPC_GGML_IQ4_XS, {"IQ4_XS", QK_K, 136}, 0, tpc__ggml_qrow_iq4_xs},
	{TPC_GGML_IQ1_M, {"IQ1_M", QK_K, 56}, 0, NULL},     {TPC_GGML_TQ1_0, {"TQ1_0", QK_K, 54}, 0, tpc__ggml_qrow_tq1_0},
	{TPC_GGML_TQ2_0, {"TQ2_0", QK_K, 66}, 0, tpc__ggml_qrow_tq2_0},     {TPC_GGML_MXFP4, {"MXFP4", 32, 17}, 0, NULL},
	{TPC_GGML_NVFP4, {"NVFP4", 64, 36}, 0, NULL},       {TPC_GGML_Q1_0, {"Q1_0", 128, 18}, 0, NULL},
	{TPC_GGML_Q2_0, {"Q2_0", 64, 18}, 0, NULL},
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

const tpc_ggml_info *tpc_ggml_info_of(int type)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].type == type)
			return &types[i].info;
	return NULL;
}

int tpc_ggml_by_name(const char *name)
{
	for (size_t i = 0; name && i < NTYPES; i++) {
		const char *a = types[i].info.name, *b = name;
		while (*a && *b && toupper((unsigned char)*b) == *a)
			a++, b++;
		if (!*a && !*b)
			return types[i].type;
	}
	return TPC_GGML_NONE;
}

tpc_dtype tpc_ggml_plain_dtype(int type)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].type == type)
			return types[i].plain;
	return TPC_DT_INVALID;
}

int tpc_ggml_type_at(size_t i)
{
	return i < NTYPES ? types[i].type : TPC_GGML_NONE;
}

bool tpc_ggml_quantizes(int type)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].type == type)
			return types[i].quant != NULL;
	return false;
}

void tpc_ggml_quantize(int type, const float *src, uint8_t *dst, uint64_t nrows, uint64_t ncols)
{
	qrow_fn q = NULL;
	const tpc_ggml_info *in = NULL;
	for (size_t i = 0; i < NTYPES && !q; i++)
		if (types[i].type == type) {
			q = types[i].quant;
			in = &types[i].info;
		}
	if (!q || ncols % (uint64_t)in->block)
		return;
	uint64_t nb = ncols / (uint64_t)in->block, rb = nb * (uint64_t)in->size;
	int64_t n = (int64_t)nrows;
	/* a row at a time: blocks never span rows, so the bytes are the same
	 * for any number of threads */
#pragma omp parallel for schedule(static) if (nrows * ncols >= (1 << 16))
	for (int64_t r = 0; r < n; r++)
		q(src + (uint64_t)r * ncols, dst + (uint64_t)r * rb, nb);
}

bool tpc_ggml_decodes(int type)
{
	switch (type) {
	case TPC_GGML_Q4_0: case TPC_GGML_Q4_1: case TPC_GGML_Q5_0: case TPC_GGML_Q5_1: case TPC_GGML_Q8_0:
	case TPC_GGML_Q2_K: case TPC_GGML_Q3_K: case TPC_GGML_Q4_K: case TPC_GGML_Q5_K: case TPC_GGML_Q6_K:
	case TPC_GGML_MXFP4: case TPC_GGML_NVFP4: case TPC_GGML_IQ2_XXS: case TPC_GGML_IQ2_XS:
	case TPC_GGML_IQ2_S: case TPC_GGML_IQ3_XXS: case TPC_GGML_IQ3_S: case TPC_GGML_IQ1_S: case TPC_GGML_IQ1_M:
	case TPC_GGML_IQ4_NL: case TPC_GGML_IQ4_XS: case TPC_GGML_TQ1_0: case TPC_GGML_TQ2_0:
		return true;
	default:
		return false;
	}
}

static float h2f(const uint8_t *p)
{
	return tpc_f16_to_f32(tpc_rd16le(p));
}

/* Q4_0, Q4_1, Q5_0, Q5_1: 32 values, nibbles j and j + 16 share a byte;
 * `hi` the fifth bits (NULL: none), `off` what q is shifted by, m the
 * minimum (added when has_m). */
static void dq_small(const uint8_t *qs, const uint8_t *hi, float d, float m, bool has_m, int off, float *x)
{
	uint32_t qh = hi ? tpc_rd32le(hi) : 0;
	for (int j = 0; j < 32; j++) {
		int q = (qs[j & 15] >> (j < 16 ? 0 : 4)) & 15;
		q |= (int)((qh >> j) & 1) << 4;
		x[j] = has_m ? d * (float)q + m : d * (float)(q - off);
	}
}

/* The 6-bit scale and min of sub-block j of a Q4_K / Q5_K block. */
static void k_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 15) | ((s[j - 4] >> 2) & 0x30);
		*m = (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30);
	}
}

static void dq_q2k(const uint8_t *b, float *x)
{
	const uint8_t *sc = b, *qs = b + 16;
	float d = h2f(b + 80), dmin = h2f(b + 82);
	for (int j = 0; j < QK_K; j++) {
		int c = j / 128, s = (j % 128) / 32, l = j % 32, g = j / 16;
		float dl = d * (float)(sc[g] & 15), ml = dmin * (float)(sc[g] >> 4);
		x[j] = dl * (float)((qs[32 * c + l] >> (2 * s)) & 3) - ml;
	}
}

static void dq_q3k(const uint8_t *b, float *x)
{
	const uint8_t *hm = b, *qs = b + 32, *s = b + 96;
	float d = h2f(b + 108), dl[16];
	for (int i = 0; i < 16; i++) {
		int lo = (i < 8 ? s[i] : s[i - 8] >> 4) & 15, hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
		dl[i] = d * (float)((int8_t)(uint8_t)(lo | hi << 4) - 32);
	}
	for (int j = 0; j < QK_K; j++) {
		int c = j / 128, sh = (j % 128) / 32, l = j % 32;
		int q = (qs[32 * c + l] >> (2 * sh)) & 3;
		if (!((hm[l] >> (j / 32)) & 1))
			q -= 4;
		x[j] = dl[j / 16] * (float)q;
	}
}

/* Q4_K and Q5_K (qh non-NULL: the fifth bits) */
static void dq_q45k(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, float *x)
{
	float d = h2f(b), dmin = h2f(b + 2);
	for (int sb = 0; sb < 8; sb++) {
		int sc, m;
		k_scale_min(b + 4, sb, &sc, &m);
		float dd = d * (float)sc, dm = dmin * (float)m;
		for (int l = 0; l < 32; l++) {
			int j = 32 * sb + l, q = (qs[32 * (j / 64) + l] >> (4 * ((j / 32) & 1))) & 15;
			if (qh)
				q |= ((qh[l] >> sb) & 1) << 4;
			x[j] = dd * (float)q - dm;
		}
	}
}

static void dq_q6k(const uint8_t *b, float *x)
{
	const uint8_t *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192);
	float d = h2f(b + 208);
	for (int j = 0; j < QK_K; j++) {
		int c = j / 128, r = j % 128;
		int q = ((ql[64 * c + r % 64] >> (4 * (r / 64))) & 15) | ((qh[32 * c + r % 32] >> (2 * (r / 32))) & 3) << 4;
		x[j] = d * (float)sc[j / 16] * (float)(q - 32);
	}
}

/* E2M1 doubled (ggml's kvalues_mxfp4), halved back by the scales below */
static const int8_t kv_fp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* ggml_e8m0_to_fp32_half: 2^(e - 128), subnormal below e = 2 */
static float e8m0_half(uint8_t e)
{
	uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

/* gguf-py's NVFP4.ue4m3_to_fp32: unsigned E4M3 (bias 7) times 0.5; 0 and 0x7F are 0 */
static float ue4m3_half(uint8_t x)
{
	int ex = (x >> 3) & 15, man = x & 7;
	float raw = ex == 0 ? (float)man * 0x1p-9f : (1.0f + (float)man / 8.0f) * ldexpf(1.0f, ex - 7);
	return x == 0 || x == 0x7F ? 0.0f : raw * 0.5f;
}

/* MXFP4 (32, 17): e (E8M0), qs[16]: element j < 16 the low nibble of
 * qs[j], j >= 16 the high nibble of qs[j - 16]; x = e8m0_half(e) * kv.
 * NVFP4 (64, 36): d[4] (UE4M3, one per 16), qs[32]: sub-block s's
 * elements 0-7 the low nibbles of qs[8s..], 8-15 the high ones. */
static void dq_fp4(int type, const uint8_t *b, float *x)
{
	if (type == TPC_GGML_MXFP4) {
		float d = e8m0_half(b[0]);
		for (int j = 0; j < 32; j++)
			x[j] = d * (float)kv_fp4[(b[1 + j % 16] >> (j < 16 ? 0 : 4)) & 15];
		return;
	}
	for (int sb = 0; sb < 4; sb++) {
		float d = ue4m3_half(b[sb]);
		const uint8_t *qs = b + 4 + 8 * sb;
		for (int j = 0; j < 16; j++)
			x[16 * sb + j] = d * (float)kv_fp4[(qs[j % 8] >> (j < 8 ? 0 : 4)) & 15];
	}
}

void tpc_ggml_dequant(int type, const uint8_t *src, float *dst, uint64_t nblocks)
{
	const tpc_ggml_info *in = tpc_ggml_info_of(type);
	for (uint64_t k = 0; in && k < nblocks; k++) {
		const uint8_t *b = src + k * (uint64_t)in->size;
		float *x = dst + k * (uint64_t)in->block;
		switch (type) {
		case TPC_GGML_Q4_0: dq_small(b + 2, NULL, h2f(b), 0, false, 8, x); break;
		case TPC_GGML_Q4_1: dq_small(b + 4, NULL, h2f(b), h2f(b + 2), true, 0, x); break;
		case TPC_GGML_Q5_0: dq_small(b + 6, b + 2, h2f(b), 0, false, 16, x); break;
		case TPC_GGML_Q5_1: dq_small(b + 8, b + 4, h2f(b), h2f(b + 2), true, 0, x); break;
		case TPC_GGML_Q8_0:
			for (int j = 0; j < 32; j++)
				x[j] = (float)(int8_t)b[2 + j] * h2f(b);
			break;
		case TPC_GGML_Q2_K: dq_q2k(b, x); break;
		case TPC_GGML_Q3_K: dq_q3k(b, x); break;
		case TPC_GGML_Q4_K: dq_q45k(b, NULL, b + 16, x); break;
		case TPC_GGML_Q5_K: dq_q45k(b, b + 16, b + 48, x); break;
		case TPC_GGML_Q6_K: dq_q6k(b, x); break;
		case TPC_GGML_MXFP4: case TPC_GGML_NVFP4: dq_fp4(type, b, x); break;
		default:
			if (!tpc__ggml_dq_lattice(type, b, x)) /* not reached: tpc_ggml_decodes */
				memset(x, 0, (size_t)in->block * sizeof(float));
			break;
		}
	}
}

void tpc_ggml_mxfp4_from_pairs(const uint8_t *pairs, const uint8_t *scales, uint8_t *dst, uint64_t nblocks)
{
	for (uint64_t k = 0; k < nblocks; k++) {
		const uint8_t *p = pairs + 16 * k;
		uint8_t *b = dst + 17 * k;
		b[0] = scales[k];
		for (int j = 0; j < 16; j++) { /* element e is nibble e % 2 of pair byte e / 2 */
			uint8_t lo = (uint8_t)(p[j / 2] >> (j % 2 ? 4 : 0)) & 15, hi = (uint8_t)(p[8 + j / 2] >> (j % 2 ? 4 : 0)) & 15;
			b[1 + j] = (uint8_t)(lo | hi << 4);
		}
	}
}

/* np_roundf: floor(|x|) + floor(2 * (|x| - floor(|x|))), signed, in F32 */
static float roundf_away(float n)
{
	float a = fabsf(n), fl = floorf(a);
	float b = fl + floorf(2.0f * (a - fl));
	return n < 0 ? -b : n > 0 ? b : 0.0f * b;
}

static void q8_0_base(const float *src, uint8_t *dst, uint64_t n)
{
	for (uint64_t k = 0; k < n / 32; k++) {
		const float *x = src + 32 * k;
		uint8_t *b = dst + 34 * k;
		float amax = 0.0f;
		for (int j = 0; j < 32; j++)
			amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
		float d = amax / 127.0f;
		float id = d == 0.0f ? 0.0f : 1.0f / d;
		tpc_wr16le(b, tpc_f32_to_f16(d));
		for (int j = 0; j < 32; j++)
			b[2 + j] = (uint8_t)(int8_t)roundf_away(x[j] * id);
	}
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#define Q8_AVX2 1
/* q8_0_base in 8 lanes with no branch (the signs are random): the same F32
 * operations (floor is exact), amax the same maximum (NaN skipped, as the
 * scalar comparison skips it), and the float to int8 conversion the
 * scalar's cvttss2si then the low byte (0x80000000, byte 0, for NaN) */
__attribute__((target("avx2"))) static void q8_0_avx2(const float *src, uint8_t *dst, uint64_t n)
{
	const __m256 sgn = _mm256_set1_ps(-0.0f), two = _mm256_set1_ps(2.0f), zero = _mm256_setzero_ps();
	for (uint64_t k = 0; k < n / 32; k++) {
		const float *x = src + 32 * k;
		uint8_t *b = dst + 34 * k;
		__m256 m = zero;
		for (int j = 0; j < 32; j += 8) /* max(a, m): a when a > m, so m when a is NaN */
			m = _mm256_max_ps(_mm256_andnot_ps(sgn, _mm256_loadu_ps(x + j)), m);
		float t[8], amax = 0.0f;
		_mm256_storeu_ps(t, m);
		for (int j = 0; j < 8; j++)
			amax = t[j] > amax ? t[j] : amax;
		float d = amax / 127.0f;
		float id = d == 0.0f ? 0.0f : 1.0f / d;
		tpc_wr16le(b, tpc_f32_to_f16(d));
		const __m256 vid = _mm256_set1_ps(id);
		for (int j = 0; j < 32; j += 8) {
			__m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j), vid), a = _mm256_andnot_ps(sgn, v);
			__m256 fl = _mm256_floor_ps(a);
			__m256 r = _mm256_add_ps(fl, _mm256_floor_ps(_mm256_mul_ps(two, _mm256_sub_ps(a, fl))));
			__m256 neg = _mm256_cmp_ps(v, zero, _CMP_LT_OQ), pos = _mm256_cmp_ps(v, zero, _CMP_GT_OQ);
			r = _mm256_blendv_ps(_mm256_blendv_ps(_mm256_mul_ps(zero, r), r, pos), _mm256_xor_ps(sgn, r), neg);
			int32_t q[8];
			_mm256_storeu_si256((__m256i *)q, _mm256_cvttps_epi32(r));
			for (int l = 0; l < 8; l++)
				b[2 + j + l] = (uint8_t)q[l];
		}
	}
}
#endif

size_t tpc__ggml_q8_0_impls(tpc__q8_0_fn *all)
{
	size_t c = 0;
	all[c++] = q8_0_base;
#ifdef Q8_AVX2
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2"))
		all[c++] = q8_0_avx2;
#endif
	return c;
}

void tpc_ggml_quant_q8_0(const float *src, uint8_t *dst, uint64_t n)
{
	static tpc__q8_0_fn fn;
	tpc__q8_0_fn f = __atomic_load_n(&fn, __ATOMIC_RELAXED);
	if (!f) {
		tpc__q8_0_fn all[2];
		size_t c = tpc__ggml_q8_0_impls(all);
		f = all[c - 1];
		__atomic_store_n(&fn, f, __ATOMIC_RELAXED);
	}
	f(src, dst, n);
}
