/* tpc_cast.c - dtype conversion kernels; see tpc_cast.h for the exact rules. */
#include "tpc_cast.h"

#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/*
 * Values are carried as bit patterns (uint16_t/uint32_t/uint64_t) and only
 * turned into float or double where an IEEE operation is wanted (a rounding
 * C cast of a value known not to be NaN). Moving a NaN through a floating
 * register could quiet it on some ABIs; integers never change.
 */

/* Bit patterns of floats and back (C11 unions pun; compilers emit a move). */
static inline uint32_t f2u(float f) { return ((union { float f; uint32_t u; }){.f = f}).u; }
static inline float u2f(uint32_t u) { return ((union { uint32_t u; float f; }){.u = u}).f; }
static inline uint64_t d2u(double d) { return ((union { double d; uint64_t u; }){.d = d}).u; }
static inline double u2d(uint64_t u) { return ((union { uint64_t u; double d; }){.u = u}).d; }

/* f32 bits -> bf16, round to nearest even; NaN -> `nan` (0xFFFF or 0x7FC0). */
static inline uint16_t bf16_from_bits(uint32_t u, uint16_t nan)
{
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return nan;
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

/* f32 bits -> f16, round to nearest even (c10::Half / fp16_ieee_from_fp32_value). */
static inline uint16_t f16_from_bits(uint32_t u)
{
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return sign | 0x7e00u;
	if (a >= 0x477ff000u) /* >= 65520: Inf (65504 has an odd significand, so the tie goes up) */
		return sign | 0x7c00u;
	if (a >= 0x38800000u) { /* >= 2^-14: a normal f16 */
		uint32_t r = a - 0x38000000u; /* rebias the exponent from 127 to 15 */
		r += 0xfffu + ((r >> 13) & 1u);
		return sign | (uint16_t)(r >> 13);
	}
	/* Subnormal result: the value in units of 2^-24, rounded to nearest even.
	 * Inputs below 2^-25 (f32 subnormals included) round to zero. */
	uint32_t exp = a >> 23;
	if (exp < 102)
		return sign;
	uint32_t m = (a & 0x7fffffu) | 0x800000u;
	unsigned sh = 126 - exp; /* 14..24 */
	uint32_t q = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
	if (rem > half || (rem == half && (q & 1u)))
		q++;
	return sign | (uint16_t)q;
}

static inline uint32_t f16_to_bits(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	if (e == 0x1f)
		return m ? sign | 0x7fc00000u | (m << 13) : sign | 0x7f800000u;
	if (e == 0) {
		if (!m)
			return sign;
		unsigned sh = 0;
		while (!(m & 0x400u)) {
			m <<= 1;
			sh++;
		}
		return sign | ((113u - sh) << 23) | ((m & 0x3ffu) << 13);
	}
	return sign | ((e + 112u) << 23) | (m << 13);
}

static inline uint32_t bf16_to_bits(uint16_t h)
{
	return (uint32_t)h << 16;
}

static inline uint64_t f32_to_f64_bits(uint32_t u)
{
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return ((uint64_t)(u & 0x80000000u) << 32) | 0x7ff8000000000000ull |
		       ((uint64_t)(u & 0x7fffffu) << 29);
	return d2u((double)u2f(u));
}

static inline uint32_t f64_to_f32_bits(uint64_t u)
{
	if ((u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull)
		return (uint32_t)((u >> 32) & 0x80000000u) | 0x7fc00000u |
		       (uint32_t)((u >> 29) & 0x7fffffu);
	return f2u((float)u2d(u));
}

uint16_t tpc_f32_to_bf16(float f)
{
	return bf16_from_bits(f2u(f), 0xffffu);
}
uint16_t tpc_f32_to_f16(float f)
{
	return f16_from_bits(f2u(f));
}
float tpc_bf16_to_f32(uint16_t h)
{
	return u2f(bf16_to_bits(h));
}
float tpc_f16_to_f32(uint16_t h)
{
	return u2f(f16_to_bits(h));
}
float tpc_f64_to_f32(double d)
{
	return u2f(f64_to_f32_bits(d2u(d)));
}
/* E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities,
 * S.1111.111 is NaN; exponent 0 is subnormal (m * 2^-9). NaN decodes as c10's
 * fp8e4m3fn_to_fp32_value does: sign | 0x7FF00000. Every finite value is
 * exact in F32. */
float tpc_f8e4m3_to_f32(uint8_t b)
{
	uint32_t sign = (uint32_t)(b >> 7) << 31, ex = (b >> 3) & 15u, m = b & 7u;
	if (ex == 15 && m == 7)
		return u2f(sign | 0x7FF00000u);
	if (ex == 0) {
		/* subnormal: m * 2^-9 (0 when m == 0), exact */
		float v = (float)m * (1.0f / 512.0f);
		return sign ? -v : v;
	}
	return u2f(sign | ((ex - 7u + 127u) << 23) | (m << 20));
}

double tpc_f32_to_f64(float f)
{
	return u2d(f32_to_f64_bits(f2u(f)));
}

/* ---- loads and stores of little-endian elements ---- */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define LE16(x) __builtin_bswap16(x)
#define LE32(x) __builtin_bswap32(x)
#define LE64(x) __builtin_bswap64(x)
#else
#define LE16(x) (x)
#define LE32(x) (x)
#define LE64(x) (x)
#endif

static inline uint16_t ld16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return LE16(v);
}
static inline uint32_t ld32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return LE32(v);
}
static inline uint64_t ld64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return LE64(v);
}
static inline void st16(uint8_t *p, uint16_t v)
{
	v = LE16(v);
	memcpy(p, &v, 2);
}
static inline void st32(uint8_t *p, uint32_t v)
{
	v = LE32(v);
	memcpy(p, &v, 4);
}
static inline void st64(uint8_t *p, uint64_t v)
{
	v = LE64(v);
	memcpy(p, &v, 8);
}

/* ---- kernels: one loop per (from, to) pair ---- */

typedef void (*kernel_fn)(uint8_t *restrict d, const uint8_t *restrict s, uint64_t n);

#define KERNEL(NAME, ISZ, LOAD, OSZ, STORE, EXPR)                                 \
	static void NAME(uint8_t *restrict d, const uint8_t *restrict s, uint64_t n) \
	{                                                                         \
		for (uint64_t i = 0; i < n; i++) {                                \
			__typeof__(LOAD(s)) x = LOAD(s + i * ISZ);                \
			STORE(d + i * OSZ, EXPR);                                 \
		}                                                                 \
	}

/* float <-> float */
KERNEL(k_f32_bf16, 4, ld32, 2, st16, bf16_from_bits(x, 0xffffu))
KERNEL(k_f32_f16, 4, ld32, 2, st16, f16_from_bits(x))
KERNEL(k_f32_f64, 4, ld32, 8, st64, f32_to_f64_bits(x))
KERNEL(k_f64_f32, 8, ld64, 4, st32, f64_to_f32_bits(x))
KERNEL(k_f64_bf16, 8, ld64, 2, st16, bf16_from_bits(f64_to_f32_bits(x), 0xffffu))
KERNEL(k_f64_f16, 8, ld64, 2, st16, f16_from_bits(f64_to_f32_bits(x)))
KERNEL(k_bf16_f32, 2, ld16, 4, st32, bf16_to_bits(x))
KERNEL(k_bf16_f64, 2, ld16, 8, st64, f32_to_f64_bits(bf16_to_bits(x)))
KERNEL(k_bf16_f16, 2, ld16, 2, st16, f16_from_bits(bf16_to_bits(x)))
KERNEL(k_f16_f32, 2, ld16, 4, st32, f16_to_bits(x))
KERNEL(k_f16_f64, 2, ld16, 8, st64, f32_to_f64_bits(f16_to_bits(x)))
KERNEL(k_f16_bf16, 2, ld16, 2, st16, bf16_from_bits(f16_to_bits(x), 0x7fc0u))

/* integer -> float: the C cast to float (or to double for F64), then as above */
static inline uint8_t ld8(const uint8_t *p)
{
	return *p;
}
#define I2F(NAME, ISZ, LOAD, CT)                                                   \
	KERNEL(NAME##_f32, ISZ, LOAD, 4, st32, f2u((float)(CT)x))                  \
	KERNEL(NAME##_f64, ISZ, LOAD, 8, st64, d2u((double)(CT)x))                 \
	KERNEL(NAME##_bf16, ISZ, LOAD, 2, st16, bf16_from_bits(f2u((float)(CT)x), 0xffffu)) \
	KERNEL(NAME##_f16, ISZ, LOAD, 2, st16, f16_from_bits(f2u((float)(CT)x)))
I2F(k_bool, 1, ld8, _Bool)
I2F(k_u8, 1, ld8, uint8_t)
I2F(k_i8, 1, ld8, int8_t)
I2F(k_i16, 2, ld16, int16_t)
I2F(k_u16, 2, ld16, uint16_t)
I2F(k_i32, 4, ld32, int32_t)
I2F(k_u32, 4, ld32, uint32_t)
I2F(k_i64, 8, ld64, int64_t)
I2F(k_u64, 8, ld64, uint64_t)

static int float_slot(tpc_dtype t)
{
	switch (t) {
	case TPC_F32: return 0;
	case TPC_F64: return 1;
	case TPC_BF16: return 2;
	case TPC_F16: return 3;
	default: return -1;
	}
}

static kernel_fn find_kernel(tpc_dtype from, tpc_dtype to)
{
	/* [from][to] in float_slot order: f32 f64 bf16 f16 */
	static const kernel_fn ff[4][4] = {
		{NULL, k_f32_f64, k_f32_bf16, k_f32_f16},
		{k_f64_f32, NULL, k_f64_bf16, k_f64_f16},
		{k_bf16_f32, k_bf16_f64, NULL, k_bf16_f16},
		{k_f16_f32, k_f16_f64, k_f16_bf16, NULL},
	};
#define ROW(N) {N##_f32, N##_f64, N##_bf16, N##_f16}
	static const kernel_fn fi[][4] = {
		ROW(k_bool), ROW(k_u8), ROW(k_i8), ROW(k_i16), ROW(k_u16),
		ROW(k_i32), ROW(k_u32), ROW(k_i64), ROW(k_u64),
	};
#undef ROW
	int b = float_slot(to), a = float_slot(from), r;
	if (b < 0)
		return NULL;
	if (a >= 0)
		return ff[a][b];
	switch (from) {
	case TPC_BOOL: r = 0; break;
	case TPC_U8: r = 1; break;
	case TPC_I8: r = 2; break;
	case TPC_I16: r = 3; break;
	case TPC_U16: r = 4; break;
	case TPC_I32: r = 5; break;
	case TPC_U32: r = 6; break;
	case TPC_I64: r = 7; break;
	case TPC_U64: r = 8; break;
	default: return NULL;
	}
	return fi[r][b];
}

bool tpc_cast_supported(tpc_dtype from, tpc_dtype to)
{
	return from == to || find_kernel(from, to) != NULL;
}

/* Elements per parallel task: big enough to amortise the fork, small enough
 * to balance an 8 MiB chunk over many cores. */
#define CAST_BLOCK (1u << 15)

int tpc_cast(void *dst, tpc_dtype to, const void *src, tpc_dtype from, uint64_t n, tpc_err *e)
{
	unsigned isz = tpc_dtype_size(from), osz = tpc_dtype_size(to);
	kernel_fn k;
	if (from == to && tpc_dtype_bits(from) >= 8) {
		memcpy(dst, src, (size_t)(n * isz));
		return 0;
	}
	k = find_kernel(from, to);
	if (!k)
		return tpc_err_set(e, TPC_EUSAGE, "cannot cast %s to %s (supported: between F64 F32 F16 BF16, and from integer or bool to those)",
				   tpc_dtype_name(from), tpc_dtype_name(to));
	uint8_t *d = dst;
	const uint8_t *s = src;
	int64_t nblk = (int64_t)((n + CAST_BLOCK - 1) / CAST_BLOCK);
	if (nblk <= 1) {
		k(d, s, n);
		return 0;
	}
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
	for (int64_t b = 0; b < nblk; b++) {
		uint64_t i = (uint64_t)b * CAST_BLOCK;
		uint64_t c = n - i < CAST_BLOCK ? n - i : CAST_BLOCK;
		k(d + i * osz, s + i * isz, c);
	}
	return 0;
}
