/* test_diff.c - lib/tpc_diff: classification and statistics on handcrafted
 * in-memory checkpoints (NaN, signed zeros, ULPs, tolerances per dtype,
 * complex parts, sub-byte types, casts, chunk boundaries, reports). */
#include "test_util.h"

#include <math.h>

#include "tpc_cast.h"
#include "tpc_ckpt.h"
#include "tpc_diff.h"

/* A checkpoint of one tensor `name` over a copy of `bytes`. */
static void one(tpc_ckpt *ck, const char *name, tpc_dtype dt, int ndim, const int64_t *shape, const void *bytes,
		size_t n)
{
	tpc_err e;
	int src;
	tpc_err_init(&e);
	tpc_ckpt_init(ck);
	uint8_t *mem = malloc(n ? n : 1);
	memcpy(mem, bytes, n);
	assert_int_equal(tpc_ckpt_add_mem(ck, "mem", mem, n, &src, &e), 0);
	assert_true(tpc_ckpt_add_tensor(ck, name, dt, ndim, shape, NULL, src, 0, &e) >= 0);
}

static tpc_diff_entry run1(tpc_ckpt *a, tpc_ckpt *b, const tpc_diff_opts *o, tpc_diff *d)
{
	tpc_err e;
	tpc_err_init(&e);
	tpc_diff_init(d);
	assert_int_equal(tpc_diff_run(a, b, o, d, &e), 0);
	assert_int_equal(d->n, 1);
	return d->e[0];
}

static void test_floats(void **st)
{
	(void)st;
	float fa[6] = {1.0f, -0.0f, NAN, INFINITY, 2.0f, 3.0f}, fb[6] = {1.0f, 0.0f, NAN, INFINITY, 2.0f, 3.0f};
	int64_t shape[2] = {2, 3};
	tpc_ckpt a, b;
	tpc_diff d;
	tpc_diff_opts o;
	tpc_diff_opts_init(&o);
	one(&a, "w", TPC_F32, 2, shape, fa, sizeof(fa));
	one(&b, "w", TPC_F32, 2, shape, fb, sizeof(fb));
	/* bit for bit: -0.0 and 0.0 differ (index [0, 1]); the NaNs share their bits */
	tpc_diff_entry x = run1(&a, &b, &o, &d);
	assert_int_equal(x.kind, TPC_DIFF_VALUES);
	assert_int_equal(x.differing, 1);
	assert_int_equal(x.first, 1);
	assert_true(x.max_abs == 0 && x.max_ulps == 0);
	tpc_buf t = TPC_BUF_INIT;
	tpc_diff_report_text(&d, "a", "b", false, &t);
	assert_non_null(strstr(t.p, "w: values differ in 1 of 6 elements; first at [0, 1]: A -0, B 0"));
	tpc_buf_release(&t);
	tpc_diff_release(&d);
	/* with any tolerance, numbers decide: equal values with other bits are close */
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_diff_opts_tol(&o, 'a', "1e-9", &e), 0);
	x = run1(&a, &b, &o, &d);
	assert_int_equal(x.kind, TPC_DIFF_CLOSE);
	tpc_diff_release(&d);
	/* one ULP off */
	uint32_t u;
	memcpy(&u, &fb[4], 4);
	u++;
	memcpy(&fb[4], &u, 4);
	tpc_ckpt_release(&b);
	one(&b, "w", TPC_F32, 2, shape, fb, sizeof(fb));
	tpc_diff_opts_init(&o);
	assert_int_equal(tpc_diff_opts_tol(&o, 'u', "f32=1", &e), 0);
	x = run1(&a, &b, &o, &d);
	assert_int_equal(x.kind, TPC_DIFF_CLOSE); /* -0/+0 are 0 ULPs apart, 2.0 vs next is 1 */
	assert_int_equal(x.max_ulps, 1);
	tpc_diff_release(&d);
	assert_int_equal(tpc_diff_opts_tol(&o, 'u', "bf16=1,f32=0", &e), 0);
	x = run1(&a, &b, &o, &d);
	assert_int_equal(x.kind, TPC_DIFF_VALUES);
	tpc_diff_release(&d);
	/* a NaN against a number differs under any tolerance */
	fb[2] = 5.0f;
	tpc_ckpt_release(&b);
	one(&b, "w", TPC_F32, 2, shape, fb, sizeof(fb));
	assert_int_equal(tpc_diff_opts_tol(&o, 'a', "1e30", &e), 0);
	x = run1(&a, &b, &o, &d);
	assert_int_equal(x.kind, TPC_DIFF_VALUES);
	assert_int_equal(x.first, 2);
	assert_true(isinf(x.max_abs));
	tpc_diff_release(&d);
	tpc_ckpt_release(&a);
	tpc_ckpt_release(&b);
}

static void test_names_shapes_dtypes(void **st)
{
	(void)st;
	int32_t ia[4] = {1, 2, 3, 4};
	int64_t la[4] = {1, 2, 3, 4};
	int64_t s4[1] = {4}, s22[2] = {2, 2};
	tpc_ckpt a, b;
	tpc_diff d;
	tpc_diff_opts o;
	tpc_err e;
	tpc_diff_opts_init(&o);
	tpc_err_init(&e);
	one(&a, "x", TPC_I32, 1, s4, ia, sizeof(ia));
	one(&b, "x", TPC_I64, 1, s4, la, sizeof(la));
	tpc_diff_entry x = run1(&a, &b, &o, &d);
	assert_int_equal(x.kind, TPC_DIFF_DTYPE);
	assert_true(x.numeric && x.differing == 0);
	tpc_diff_release(&d);
	tpc_ckpt_release(&b);
	one(&b, "x", TPC_I32, 2, s22, ia, sizeof(ia));
	x = run1(&a, &b, &o, &d);
	assert_int_equal(x.kind, TPC_DIFF_SHAPE);
	tpc_diff_release(&d);
	tpc_ckpt_release(&b);
	one(&b, "y", TPC_I32, 1, s4, ia, sizeof(ia));
	tpc_diff_init(&d);
	assert_int_equal(tpc_diff_run(&a, &b, &o, &d, &e), 0);
	assert_int_equal(d.n, 2);
	assert_int_equal(d.e[0].kind, TPC_DIFF_ONLY_A);
	assert_int_equal(d.e[1].kind, TPC_DIFF_ONLY_B);
	assert_false(tpc_diff_same(&d));
	tpc_buf j = TPC_BUF_INIT;
	tpc_diff_report_junit(&d, "a<1>", "b&", &j);
	assert_non_null(strstr(j.p, "failures=\"2\""));
	assert_non_null(strstr(j.p, "value=\"a&lt;1&gt;\""));
	assert_non_null(strstr(j.p, "<failure type=\"only_a\" message=\"only in A (I32 [4])\"/>"));
	tpc_buf_release(&j);
	tpc_diff_release(&d);
	tpc_ckpt_release(&a);
	tpc_ckpt_release(&b);
}

static void test_complex_and_subbyte(void **st)
{
	(void)st;
	float ca[4] = {1, 2, 3, 4}, cb[4] = {1, 2, 3, 4.5f};
	int64_t s2[1] = {2};
	tpc_ckpt a, b;
	tpc_diff d;
	tpc_diff_opts o;
	tpc_diff_opts_init(&o);
	one(&a, "c", TPC_C64, 1, s2, ca, sizeof(ca));
	one(&b, "c", TPC_C64, 1, s2, cb, sizeof(cb));
	tpc_diff_entry x = run1(&a, &b, &o, &d);
	assert_int_equal(x.kind, TPC_DIFF_VALUES);
	assert_int_equal(x.first, 1); /* the complex element, not the part */
	assert_true(x.first_a == 4 && x.first_b == 4.5);
	tpc_diff_release(&d);
	tpc_ckpt_release(&a);
	tpc_ckpt_release(&b);
	uint8_t fa[2] = {0x12, 0x34}, fb[2] = {0x12, 0x35};
	int64_t s4[1] = {4};
	one(&a, "q", TPC_F4, 1, s4, fa, 2);
	one(&b, "q", TPC_F4, 1, s4, fb, 2);
	x = run1(&a, &b, &o, &d);
	assert_int_equal(x.kind, TPC_DIFF_VALUES);
	assert_false(x.numeric);
	assert_int_equal(x.differing, 1);
	tpc_diff_release(&d);
	tpc_ckpt_release(&a);
	tpc_ckpt_release(&b);
}

/* A tensor over several chunks: the one difference is found past the first
 * chunk, byte-identical chunks are counted, and a cast compares exactly. */
static void test_chunks_and_cast(void **st)
{
	(void)st;
	size_t n = 3 * TPC_DIFF_CHUNK / 4 + 5; /* f32: 3 chunks and a bit */
	float *fa = malloc(n * 4);
	uint16_t *hb = malloc(n * 2);
	for (size_t i = 0; i < n; i++) {
		fa[i] = (float)sin((double)i) * 3.0f;
		hb[i] = tpc_f32_to_bf16(fa[i]);
	}
	int64_t shape[1] = {(int64_t)n};
	tpc_ckpt a, b;
	tpc_diff d;
	tpc_diff_opts o;
	tpc_diff_opts_init(&o);
	o.cast = true;
	one(&a, "w", TPC_F32, 1, shape, fa, n * 4);
	one(&b, "w", TPC_BF16, 1, shape, hb, n * 2);
	tpc_diff_entry x = run1(&a, &b, &o, &d);
	assert_int_equal(x.kind, TPC_DIFF_EQUAL);
	assert_true(x.cast);
	assert_int_equal(d.bytes_same, n * 2);
	tpc_diff_release(&d);
	hb[n - 2] ^= 1;
	tpc_ckpt_release(&b);
	one(&b, "w", TPC_BF16, 1, shape, hb, n * 2);
	x = run1(&a, &b, &o, &d);
	assert_int_equal(x.kind, TPC_DIFF_VALUES);
	assert_int_equal(x.first, n - 2);
	assert_int_equal(x.max_ulps, 1);
	assert_int_equal(d.bytes_same, (n - n % (TPC_DIFF_CHUNK / 2)) * 2);
	tpc_diff_release(&d);
	/* differences in several threads' ranges of one chunk: counted once each,
	 * the first is the earliest */
	hb[n - 5] ^= 2;
	hb[3 * TPC_DIFF_CHUNK / 4 - 7] ^= 1; /* in the second chunk's first half */
	tpc_ckpt_release(&b);
	one(&b, "w", TPC_BF16, 1, shape, hb, n * 2);
	x = run1(&a, &b, &o, &d);
	assert_int_equal(x.differing, 3);
	assert_int_equal(x.first, 3 * TPC_DIFF_CHUNK / 4 - 7);
	assert_int_equal(x.max_ulps, 2);
	tpc_diff_release(&d);
	o.cast = false;
	x = run1(&a, &b, &o, &d);
	assert_int_equal(x.kind, TPC_DIFF_DTYPE);
	tpc_diff_release(&d);
	tpc_ckpt_release(&a);
	tpc_ckpt_release(&b);
	free(fa);
	free(hb);
}

static void test_tol_parse(void **st)
{
	(void)st;
	tpc_diff_opts o;
	tpc_err e;
	tpc_diff_opts_init(&o);
	tpc_err_init(&e);
	assert_int_equal(tpc_diff_opts_tol(&o, 'a', "1e-3", &e), 0);
	assert_int_equal(tpc_diff_opts_tol(&o, 'a', "bf16=1e-2,f32=0", &e), 0);
	assert_true(o.tol[TPC_BF16].atol == 1e-2 && o.tol[TPC_F32].atol == 0 && o.tol[TPC_F16].atol == 1e-3);
	assert_int_equal(tpc_diff_opts_tol(&o, 'r', "-1", &e), TPC_EUSAGE);
	tpc_err_init(&e);
	assert_int_equal(tpc_diff_opts_tol(&o, 'r', "nope=1", &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "unknown dtype 'nope'"));
	tpc_err_init(&e);
	assert_int_equal(tpc_diff_opts_tol(&o, 'u', "1.5", &e), TPC_EUSAGE);
	tpc_err_init(&e);
	assert_int_equal(tpc_diff_opts_tol(&o, 'a', "f32=1,", &e), 0);
	assert_int_equal(tpc_diff_opts_tol(&o, 'a', "f32", &e), TPC_EUSAGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_floats),
		cmocka_unit_test(test_names_shapes_dtypes),
		cmocka_unit_test(test_complex_and_subbyte),
		cmocka_unit_test(test_chunks_and_cast),
		cmocka_unit_test(test_tol_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
