/*
 * test_ggml_kq.c - the K-quants' scale searches (lib/tpc_ggml_kq.c): every
 * kernel this CPU runs (scalar, AVX2, AVX-512) gives, bit for bit, the
 * scalar one's fits for Q2_K's, Q4_K's, Q5_K's (make_qkx2_quants), Q3_K's
 * (make_q3_quants, and its levels) and Q6_K's (make_qx_quants) arguments,
 * on sub-blocks that take every branch of the
 * search: random values over many binades, all zero, constant (positive and
 * negative), one value apart, all of one sign, below GROUP_MAX_EPS, ties at
 * a half level, a large outlier; in runs that end in a partial group of
 * lanes. The scalar fits are the ones the llama-quantize fixtures check
 * (test_ggml_quant.c, gguf-qmix); the fits' levels are rebuilt by the block
 * code, so equal fits are equal blocks.
 */
#include "test_util.h"

#include <math.h>

#include "tpc_ggml_int.h"

static uint64_t rng = 0x2545f4914f6cdd1du;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* a value in (-0.5, 0.5) times 2^(e - 8), e in 0..15 */
static float rnd(void)
{
	uint64_t r = next();
	float m = (float)((r >> 40) & 0xffffff) / 16777216.0f - 0.5f;
	return ldexpf(m, (int)(r >> 60) - 8);
}

/* sub-block k of n values, of kind k % 12 */
static void fill(float *x, int n, int k)
{
	float s = ldexpf(1.0f, (int)(next() >> 59) - 20);
	for (int i = 0; i < n; i++) {
		switch (k % 12) {
		case 0: x[i] = 0.0f; break;
		case 1: x[i] = 0.25f; break;
		case 2: x[i] = -0.75f; break;
		case 3: x[i] = i == k % n ? rnd() : 0.0f; break;
		case 4: x[i] = fabsf(rnd()) * s; break;
		case 5: x[i] = -fabsf(rnd()) * s; break;
		case 6: x[i] = rnd() * 1e-17f; break;
		case 7: x[i] = (float)((int)(next() % 33) - 16) / 32.0f; break; /* ties */
		case 8: x[i] = i == 3 ? 100.0f * s : rnd() * s; break;
		case 9: x[i] = i < n / 2 ? 0.0f : rnd(); break;
		default: x[i] = rnd() * s; break;
		}
	}
}

static void same_fits(const tpc__kq_fit *a, const tpc__kq_fit *b, int n, const char *what, const char *kern)
{
	for (int k = 0; k < n; k++) {
		int ok = a[k].flat == b[k].flat && !memcmp(&a[k].scale, &b[k].scale, 4) && !memcmp(&a[k].mn, &b[k].mn, 4);
		if (ok && !a[k].flat)
			ok = !memcmp(&a[k].is, &b[k].is, 4) && !memcmp(&a[k].m, &b[k].m, 4);
		if (!ok)
			fail_msg("%s, kernel %s, sub-block %d: flat %d/%d scale %a/%a mn %a/%a is %a/%a m %a/%a", what, kern, k,
				 a[k].flat, b[k].flat, (double)a[k].scale, (double)b[k].scale, (double)a[k].mn,
				 (double)b[k].mn, (double)a[k].is, (double)b[k].is, (double)a[k].m, (double)b[k].m);
	}
}

static void test_kernels_bit_exact(void **st)
{
	(void)st;
	static const struct {
		const char *name;
		int type;
		tpc__kq_args a;
	} cases[] = {
		{"Q2_K", 2, {.n = 16, .nmax = 3, .wkind = TPC_KQ_W_ABS, .nstep = 15, .mad = 1, .rmin = -0.5f, .rdelta = 0.1f}},
		{"Q3_K", 3, {.n = 16, .nmax = 4}},
		{"Q4_K", 4, {.n = 32, .nmax = 15, .wkind = TPC_KQ_W_AVX, .nstep = 20, .rmin = -1.0f, .rdelta = 0.1f}},
		{"Q5_K", 5, {.n = 32, .nmax = 31, .wkind = TPC_KQ_W_AVX, .nstep = 15, .rmin = -0.5f, .rdelta = 0.1f}},
		{"Q6_K", 6, {.n = 16, .nmax = 32}},
	};
	enum { NSUB = 1203 }; /* not a multiple of 8 or 16: a partial group last */
	float *x = malloc(NSUB * 32 * sizeof(float));
	tpc__kq_fit *want = malloc(NSUB * sizeof(*want)), *got = malloc(NSUB * sizeof(*got));
	int8_t *lw = malloc(NSUB * 32), *lg = malloc(NSUB * 32);
	assert_non_null(x);
	assert_non_null(lw);
	assert_non_null(lg);
	assert_non_null(want);
	assert_non_null(got);
	const tpc__kq_kern *all;
	size_t nk = tpc__kq_kernels(&all);
	assert_true(nk >= 1 && nk <= 3);
	assert_ptr_equal(tpc__kq_kernel(), &all[nk - 1]);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const tpc__kq_args *a = &cases[c].a;
		for (int k = 0; k < NSUB; k++)
			fill(x + k * a->n, a->n, k);
		tpc__kq_fits(&all[0], cases[c].type, x, NSUB, a, want, lw);
		int flat = 0;
		for (int k = 0; k < NSUB; k++)
			flat += want[k].flat;
		assert_true(flat > 0 && flat < NSUB / 2);
		for (size_t v = 1; v < nk; v++) {
			memset(got, 0x5A, NSUB * sizeof(*got));
			memset(lg, 0x5A, NSUB * 32);
			tpc__kq_fits(&all[v], cases[c].type, x, NSUB, a, got, lg);
			same_fits(want, got, NSUB, cases[c].name, all[v].name);
			if (cases[c].type == 3) /* make_q3_quants' levels */
				assert_memory_equal(lw, lg, (size_t)(NSUB * a->n));
			/* a run shorter than the lanes */
			memset(got, 0x5A, NSUB * sizeof(*got));
			tpc__kq_fits(&all[v], cases[c].type, x + 5 * a->n, 3, a, got, lg);
			same_fits(want + 5, got, 3, cases[c].name, all[v].name);
			if (cases[c].type == 3)
				assert_memory_equal(lw + 5 * a->n, lg, (size_t)(3 * a->n));
		}
	}
	free(x);
	free(want);
	free(got);
	free(lw);
	free(lg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernels_bit_exact),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
