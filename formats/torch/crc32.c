/*
 * crc32.c - the zip CRC-32 (IEEE 802.3 polynomial 0x04C11DB7, bit-reflected,
 * as zlib's crc32; not CRC-32C) of the zip writer and reader.
 *
 * On x86-64 with PCLMULQDQ the bulk of a buffer is folded with carry-less
 * multiplies, after Intel's white paper "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ Instruction" (Gopal, Ozturk, Guilford, Wolrich,
 * Feghali, Dixon, Karakoyunlu; Intel, December 2009, ref. 323102), section 4
 * ("folding") in its bit-reflected form (section 5 / appendix: for a
 * reflected CRC the 64-bit halves swap roles and each constant is the
 * bit-reflection of x^e mod P shifted left by one). Four 128-bit lanes fold
 * 64 bytes at a time (fold distance 512 bits), then fold into one lane
 * (distance 128 bits). Where the CPU has AVX-512 and VPCLMULQDQ, the same
 * folding runs sixteen lanes wide first (four 512-bit registers, 256 bytes a
 * step, distance 2048 bits) and the four registers fold into the four lanes. Instead of the paper's Barrett reduction of the last
 * 128 bits, those 16 bytes, which are congruent to the whole prefix, go
 * through zlib's crc32 with a zero register, and so do the 0..15 tail bytes:
 * the result is zlib's value by linearity, and zlib stays the one table
 * implementation. Without PCLMULQDQ (or off x86-64) every byte goes through
 * zlib (tpc__crc32_portable). The choice is made per call from the CPU's
 * feature bits (__builtin_cpu_supports), so no state is shared between
 * threads. Measured on this project's 3 GB megatron-dist bench: zlib's crc32
 * was 25% of the run's CPU time (perf, issue 44).
 */
#include <stdbool.h>
#include <zlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "zip_int.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TPC_CRC_CLMUL 1
#include <immintrin.h>
#endif

uint32_t tpc__crc32_portable(uint32_t crc, const uint8_t *p, uint64_t n)
{
	uLong c = crc;
	while (n) {
		uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n; /* zlib takes uInt lengths */
		c = crc32(c, p, k);
		p += k;
		n -= k;
	}
	return (uint32_t)c;
}

#ifdef TPC_CRC_CLMUL
/* Fold constants, k = reflect32(x^e mod P) << 1 (P = 0x104C11DB7; the
 * paper's k_i for the reflected CRC), in pairs (e = D+32, e = D-32) for a
 * fold distance of D bits: D = 4*128 for four 128-bit lanes (or one 512-bit
 * register), 128 for one lane, 4*512 for four 512-bit registers. test_crc32.c
 * derives them again from P. */
#define K1 0x154442bd4ULL
#define K2 0x1c6e41596ULL
#define K3 0x1751997d0ULL
#define K4 0x0ccaa009eULL
#define K5 0x11542778aULL
#define K6 0x1322d1430ULL

const uint64_t tpc__crc32_fold_k[6] = {K1, K2, K3, K4, K5, K6};

__attribute__((target("pclmul,sse2"))) static inline __m128i fold(__m128i x, __m128i k, __m128i d)
{
	__m128i lo = _mm_clmulepi64_si128(x, k, 0x00); /* x.lo * k.lo */
	__m128i hi = _mm_clmulepi64_si128(x, k, 0x11); /* x.hi * k.hi */
	return _mm_xor_si128(_mm_xor_si128(lo, hi), d);
}

#define LD(q) _mm_loadu_si128((const __m128i *)(const void *)(q))

/* Four lanes x[0..3] that hold what came before p (congruent to it): fold
 * p[0..n) in, reduce to 32 bits. */
__attribute__((target("pclmul,sse2"))) static uint32_t fold_rest(__m128i x0, __m128i x1, __m128i x2, __m128i x3,
								  const uint8_t *p, uint64_t n)
{
	const __m128i k12 = _mm_set_epi64x((long long)K2, (long long)K1);
	const __m128i k34 = _mm_set_epi64x((long long)K4, (long long)K3);
	__m128i x[4] = {x0, x1, x2, x3};
	for (; n >= 64; p += 64, n -= 64)
		for (int j = 0; j < 4; j++)
			x[j] = fold(x[j], k12, LD(p + 16 * j));
	for (int j = 1; j < 4; j++) /* the lanes into one */
		x[0] = fold(x[0], k34, x[j]);
	x0 = x[0];
	for (; n >= 16; p += 16, n -= 16)
		x0 = fold(x0, k34, LD(p));
	uint8_t last[16];
	_mm_storeu_si128((__m128i *)(void *)last, x0);
	/* crc32(~0, last) is ~(last's remainder from a zero register) */
	uint32_t c = (uint32_t)crc32(0xffffffffUL, last, 16);
	return n ? tpc__crc32_portable(c, p, n) : c;
}

/* n >= 64: four 128-bit lanes (PCLMULQDQ) */
__attribute__((target("pclmul,sse2"))) static uint32_t crc32_clmul(uint32_t crc, const uint8_t *p, uint64_t n)
{
	/* zlib's register is the complement of the value it returns */
	__m128i x0 = _mm_xor_si128(LD(p), _mm_cvtsi32_si128((int)~crc));
	return fold_rest(x0, LD(p + 16), LD(p + 32), LD(p + 48), p + 64, n - 64);
}

#define TGT512 "avx512f,vpclmulqdq,pclmul"

__attribute__((target(TGT512))) static inline __m512i fold512(__m512i x, __m512i k, __m512i d)
{
	__m512i lo = _mm512_clmulepi64_epi128(x, k, 0x00);
	__m512i hi = _mm512_clmulepi64_epi128(x, k, 0x11);
	return _mm512_ternarylogic_epi64(lo, hi, d, 0x96); /* lo ^ hi ^ d */
}

#define LD512(q) _mm512_loadu_si512((const void *)(q))

/* n >= 256: four 512-bit registers of four 128-bit lanes each (VPCLMULQDQ,
 * the same folding sixteen lanes wide), folded into one register, whose four
 * lanes are then fold_rest's four. */
__attribute__((target(TGT512))) static uint32_t crc32_vclmul(uint32_t crc, const uint8_t *p, uint64_t n)
{
	const __m512i k56 = _mm512_broadcast_i32x4(_mm_set_epi64x((long long)K6, (long long)K5));
	const __m512i k12 = _mm512_broadcast_i32x4(_mm_set_epi64x((long long)K2, (long long)K1));
	__m512i z0 = _mm512_xor_si512(LD512(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)~crc)));
	__m512i z1 = LD512(p + 64), z2 = LD512(p + 128), z3 = LD512(p + 192);
	p += 256;
	n -= 256;
	for (; n >= 256; p += 256, n -= 256) {
		z0 = fold512(z0, k56, LD512(p));
		z1 = fold512(z1, k56, LD512(p + 64));
		z2 = fold512(z2, k56, LD512(p + 128));
		z3 = fold512(z3, k56, LD512(p + 192));
	}
	z0 = fold512(z0, k12, z1);
	z0 = fold512(z0, k12, z2);
	z0 = fold512(z0, k12, z3);
	return fold_rest(_mm512_extracti32x4_epi32(z0, 0), _mm512_extracti32x4_epi32(z0, 1),
			 _mm512_extracti32x4_epi32(z0, 2), _mm512_extracti32x4_epi32(z0, 3), p, n);
}

int tpc__crc32_level(void)
{
	if (!__builtin_cpu_supports("pclmul") || !__builtin_cpu_supports("sse2"))
		return 0;
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") ? 2 : 1;
}

uint32_t tpc__crc32_at(int level, uint32_t crc, const uint8_t *p, uint64_t n)
{
	if (level >= 2 && n >= 256)
		return crc32_vclmul(crc, p, n);
	if (level >= 1 && n >= 64)
		return crc32_clmul(crc, p, n);
	return tpc__crc32_portable(crc, p, n);
}
#else
const uint64_t tpc__crc32_fold_k[6] = {0, 0, 0, 0, 0, 0};

int tpc__crc32_level(void)
{
	return 0;
}

uint32_t tpc__crc32_at(int level, uint32_t crc, const uint8_t *p, uint64_t n)
{
	(void)level;
	return tpc__crc32_portable(crc, p, n);
}
#endif

uint32_t tpc_crc32_update(uint32_t crc, const uint8_t *p, uint64_t n)
{
	return n >= 64 ? tpc__crc32_at(tpc__crc32_level(), crc, p, n) : tpc__crc32_portable(crc, p, n);
}

uint32_t tpc_crc32_parallel(const uint8_t *p, uint64_t n)
{
	enum { PER_THREAD_MIN = 8 << 20, MAX_PARTS = 256 };
	uint32_t crc = 0;
	int parts = 1;
#ifdef _OPENMP
	if (n >= 2 * (uint64_t)PER_THREAD_MIN && !omp_in_parallel()) {
		uint64_t most = n / PER_THREAD_MIN;
		parts = omp_get_max_threads();
		if ((uint64_t)parts > most)
			parts = (int)most;
		if (parts > MAX_PARTS)
			parts = MAX_PARTS;
	}
#endif
	if (parts <= 1) {
		crc = tpc_crc32_update(0, p, n);
	} else {
		uint32_t part[MAX_PARTS];
		uint64_t chunk = n / (uint64_t)parts;
#ifdef _OPENMP
#pragma omp parallel for num_threads(parts) schedule(static, 1)
#endif
		for (int i = 0; i < parts; i++) {
			uint64_t off = (uint64_t)i * chunk;
			uint64_t len = i == parts - 1 ? n - off : chunk;
			part[i] = tpc_crc32_update(0, p + off, len);
		}
		crc = part[0];
		for (int i = 1; i < parts; i++) {
			uint64_t len = i == parts - 1 ? n - (uint64_t)i * chunk : chunk;
			crc = (uint32_t)crc32_combine64(crc, part[i], (z_off64_t)len);
		}
	}
	return crc;
}
