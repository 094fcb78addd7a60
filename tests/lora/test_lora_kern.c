/* test_lora_kern.c - LoRA's row kernel (tpc_lora_kern.c): every variant this
 * CPU runs gives, bit for bit, what tpc_lora.h's arithmetic gives written out
 * one element at a time (products and sums rounded to f32 in k's order, no
 * fused multiply-add), for shapes with partial tiles in rows and columns and
 * for a window of columns of wider rows. */
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

static void reference(float *V, const float *co, const float *op, int64_t nr, int64_t C, int64_t ld, int64_t r,
		      float s)
{
	for (int64_t o = 0; o < nr; o++)
		for (int64_t j = 0; j < C; j++) {
			volatile float ac = 0; /* one rounding per step, whatever the flags */
			for (int64_t k = 0; k < r; k++) {
				volatile float p = co[o * r + k] * op[k * ld + j];
				ac = ac + p;
			}
			volatile float d = ac * s;
			V[o * ld + j] = V[o * ld + j] + d;
		}
}

static void test_variants_bit_exact(void **state)
{
	(void)state;
	/* rows, columns, rank, row stride, first column (a window of wider rows) */
	static const int64_t shapes[][5] = {
		{1, 1, 1, 1, 0},      {3, 7, 5, 7, 0},     {4, 64, 64, 64, 0},   {13, 200, 7, 200, 0},
		{37, 130, 64, 130, 0}, {5, 64, 3, 64, 0}, {9, 2065, 16, 2065, 0}, {33, 96, 1, 96, 0},
		{11, 128, 8, 256, 128}, {6, 70, 9, 150, 33},
	};
	static const float scales[] = {2.0f, 0.37f};
	tpc_lora_kern_fn all[3];
	size_t nk = tpc__lora_kernels(all);
	assert_true(nk >= 1 && nk <= 3);
	for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
		int64_t nr = shapes[t][0], C = shapes[t][1], r = shapes[t][2], ld = shapes[t][3], j0 = shapes[t][4];
		size_t nv = (size_t)(nr * ld) * sizeof(float);
		float *co = malloc((size_t)(nr * r) * sizeof(float)), *op = malloc((size_t)(r * ld) * sizeof(float));
		float *W = malloc(nv), *want = malloc(nv), *got = malloc(nv);
		for (int64_t i = 0; i < nr * r; i++)
			co[i] = rnd();
		for (int64_t i = 0; i < r * ld; i++)
			op[i] = rnd();
		for (int64_t i = 0; i < nr * ld; i++)
			W[i] = rnd();
		for (size_t si = 0; si < 2; si++) {
			memcpy(want, W, nv);
			reference(want + j0, co, op + j0, nr, C, ld, r, scales[si]);
			for (size_t v = 0; v <= nk; v++) {
				memcpy(got, W, nv);
				if (v < nk)
					all[v](got + j0, co, op + j0, nr, C, ld, r, scales[si]);
				else
					tpc__lora_kernel(got + j0, co, op + j0, nr, C, ld, r, scales[si]);
				/* the columns outside the window stay the base's */
				if (memcmp(got, want, nv))
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
