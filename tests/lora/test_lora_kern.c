/* test_lora_kern.c - LoRA's row kernel (tpc_lora_kern.c): every variant this
 * CPU runs gives, bit for bit, what tpc_lora.h's arithmetic gives written out
 * one element at a time (products and sums rounded to f32 in k's order, no
 * fused multiply-add), for shapes with partial tiles in rows and columns. */
#include "test_util.h"

#include "tpc_lora.h"

static uint64_t rng = 0x9e3779b97f4a7c15u;

static float rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	/* magnitudes across a few binades, both signs: sums that round */
	float m = (float)((rng >> 40) & 0xffffff) / 16777216.0f - 0.5f;
	return m * (float)(1u << (rng >> 60 & 7));
}

static void reference(float *V, const float *co, const float *op, int64_t nr, int64_t C, int64_t r, float s)
{
	for (int64_t o = 0; o < nr; o++)
		for (int64_t j = 0; j < C; j++) {
			volatile float ac = 0; /* one rounding per step, whatever the flags */
			for (int64_t k = 0; k < r; k++) {
				volatile float p = co[o * r + k] * op[k * C + j];
				ac = ac + p;
			}
			volatile float d = ac * s;
			V[o * C + j] = V[o * C + j] + d;
		}
}

static void test_variants_bit_exact(void **state)
{
	(void)state;
	static const int64_t shapes[][3] = {
		{1, 1, 1}, {3, 7, 5}, {4, 64, 64}, {13, 200, 7}, {37, 130, 64}, {5, 64, 3}, {9, 2065, 16}, {33, 96, 1},
	};
	static const float scales[] = {2.0f, 0.37f};
	tpc_lora_kern_fn all[3];
	size_t nk = tpc__lora_kernels(all);
	assert_true(nk >= 1 && nk <= 3);
	for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
		int64_t nr = shapes[t][0], C = shapes[t][1], r = shapes[t][2];
		float *co = malloc((size_t)(nr * r) * sizeof(float)), *op = malloc((size_t)(r * C) * sizeof(float));
		float *W = malloc((size_t)(nr * C) * sizeof(float)), *want = malloc((size_t)(nr * C) * sizeof(float));
		float *got = malloc((size_t)(nr * C) * sizeof(float));
		for (int64_t i = 0; i < nr * r; i++)
			co[i] = rnd();
		for (int64_t i = 0; i < r * C; i++)
			op[i] = rnd();
		for (int64_t i = 0; i < nr * C; i++)
			W[i] = rnd();
		for (size_t si = 0; si < 2; si++) {
			memcpy(want, W, (size_t)(nr * C) * sizeof(float));
			reference(want, co, op, nr, C, r, scales[si]);
			for (size_t v = 0; v <= nk; v++) {
				memcpy(got, W, (size_t)(nr * C) * sizeof(float));
				if (v < nk)
					all[v](got, co, op, nr, C, r, scales[si]);
				else
					tpc__lora_kernel(got, co, op, nr, C, r, scales[si]);
				if (memcmp(got, want, (size_t)(nr * C) * sizeof(float)))
					fail_msg("variant %zu of %zu, %lldx%lld r %lld s %g: bits differ", v, nk, (long long)nr,
						 (long long)C, (long long)r, (double)scales[si]);
			}
		}
		free(co);
		free(op);
		free(W);
		free(want);
		free(got);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_variants_bit_exact),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
