/*
 * test_crc32.c - crc32.c's CRC-32 against zlib's crc32: every path (zlib's,
 * and the PCLMULQDQ and AVX-512 VPCLMULQDQ folding where the CPU has them),
 * every length to 600 (all fold boundaries), every 16-byte misalignment, chained updates with
 * a non-zero starting value, and the fold constants derived from the
 * polynomial.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

#include <cmocka.h>

#include "torch/tpc_zip.h"

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* reflect32(x^e mod P) << 1, P = x^32 + 0x04C11DB7 */
static uint64_t fold_k(unsigned e)
{
	uint64_t r = 1;
	for (unsigned i = 0; i < e; i++) {
		r <<= 1;
		if (r >> 32)
			r ^= 0x104C11DB7ULL;
	}
	uint64_t f = 0;
	for (int b = 0; b < 32; b++)
		f |= ((r >> b) & 1) << (31 - b);
	return f << 1;
}

static void test_constants(void **state)
{
	(void)state;
	if (!tpc__crc32_level())
		skip();
	assert_int_equal(tpc__crc32_fold_k[0], fold_k(4 * 128 + 32));
	assert_int_equal(tpc__crc32_fold_k[1], fold_k(4 * 128 - 32));
	assert_int_equal(tpc__crc32_fold_k[2], fold_k(128 + 32));
	assert_int_equal(tpc__crc32_fold_k[3], fold_k(128 - 32));
	assert_int_equal(tpc__crc32_fold_k[4], fold_k(4 * 512 + 32));
	assert_int_equal(tpc__crc32_fold_k[5], fold_k(4 * 512 - 32));
}

static void test_against_zlib(void **state)
{
	(void)state;
	enum { CAP = 1 << 20 };
	uint8_t *buf = malloc(CAP + 64);
	assert_non_null(buf);
	uint64_t s = 0x9E3779B97F4A7C15ULL;
	for (size_t i = 0; i < CAP + 64; i++)
		buf[i] = (uint8_t)rnd(&s);
	int level = tpc__crc32_level();
	/* every length 0..600 at every alignment 0..15, then random ones */
	for (int pass = 0; pass < 2; pass++) {
		int count = pass ? 2000 : 601 * 16;
		for (int i = 0; i < count; i++) {
			size_t al = pass ? (size_t)(rnd(&s) % 64) : (size_t)(i % 16);
			size_t n = pass ? (size_t)(rnd(&s) % (rnd(&s) & 1 ? CAP : 4096)) : (size_t)(i / 16);
			uint32_t seed = (i & 3) ? (uint32_t)rnd(&s) : 0;
			const uint8_t *p = buf + al;
			uint32_t want = (uint32_t)crc32(seed, p, (uInt)n);
			assert_int_equal(tpc__crc32_portable(seed, p, n), want);
			assert_int_equal(tpc_crc32_update(seed, p, n), want);
			for (int l = 1; l <= level; l++)
				assert_int_equal(tpc__crc32_at(l, seed, p, n), want);
			size_t cut = n ? (size_t)(rnd(&s) % n) : 0;
			assert_int_equal(tpc_crc32_update(tpc_crc32_update(seed, p, cut), p + cut, n - cut), want);
		}
	}
	/* the whole buffer through the OpenMP split and zlib's combine */
	assert_int_equal(tpc_crc32_parallel(buf + 3, CAP), (uint32_t)crc32(0, buf + 3, CAP));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_constants),
		cmocka_unit_test(test_against_zlib),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
