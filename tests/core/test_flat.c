/* test_flat.c - tpc_tensor_flatten (lib/tpc_flat.h): a composite cut along
 * dim 0, one cut along an inner dimension (flattened row by row), a zero
 * fill among the parts, a strided view refused; each flat image read back
 * equals the tensor's C-order image. */
#include "test_util.h"

#include "tpc_ckpt.h"
#include "tpc_flat.h"

/* 32 floats 0, 1, 2, ... in one source */
static int src_of(tpc_ckpt *ck)
{
	float *mem = calloc(32, sizeof(float));
	int src;
	tpc_err e;
	tpc_err_init(&e);
	for (int i = 0; i < 32; i++)
		mem[i] = (float)i;
	assert_int_equal(tpc_ckpt_add_mem(ck, "mem", (uint8_t *)mem, 32 * sizeof(float), &src, &e), 0);
	return src;
}

/* flatten t, add it to ck, and compare its bytes with t's */
static void same_flat(tpc_ckpt *ck, const tpc_tensor *t, const char *name)
{
	tpc_tensor f;
	tpc_err e;
	float a[32], b[32];
	tpc_err_init(&e);
	assert_int_equal(tpc_tensor_flatten(&f, t), 0);
	assert_int_equal(f.ndim, 1);
	assert_int_equal(f.shape[0], (int64_t)t->numel);
	int64_t ix = tpc_ckpt_add_copy(ck, name, &f, &e);
	tpc_tensor_release(&f);
	assert_true(ix >= 0);
	assert_int_equal(tpc_ckpt_read_bytes(ck, t, 0, t->nbytes, a, &e), 0);
	assert_int_equal(tpc_ckpt_read_bytes(ck, &ck->t[ix], 0, t->nbytes, b, &e), 0);
	assert_memory_equal(a, b, t->nbytes);
}

static void test_flatten(void **st)
{
	(void)st;
	tpc_ckpt ck;
	tpc_err e;
	tpc_err_init(&e);
	tpc_ckpt_init(&ck);
	int src = src_of(&ck);
	/* p0 [3, 2] at element 0, p1 [3, 3] at element 6, z [3, 1] zeros */
	int64_t s0[2] = {3, 2}, s1[2] = {3, 3}, sz[2] = {3, 1}, r0[2] = {2, 3}, r1[2] = {1, 3};
	assert_true(tpc_ckpt_add_tensor(&ck, "p0", TPC_F32, 2, s0, NULL, src, 0, &e) == 0);
	assert_true(tpc_ckpt_add_tensor(&ck, "p1", TPC_F32, 2, s1, NULL, src, 24, &e) == 1);
	assert_true(tpc_ckpt_add_tensor(&ck, "r0", TPC_F32, 2, r0, NULL, src, 40, &e) == 2);
	assert_true(tpc_ckpt_add_tensor(&ck, "r1", TPC_F32, 2, r1, NULL, src, 80, &e) == 3);
	tpc_tensor parts[3], cols, rows, z;
	assert_int_equal(tpc_tensor_init_zero(&z, TPC_F32, 2, sz), 0);
	parts[0] = ck.t[0];
	parts[1] = z;
	parts[2] = ck.t[1];
	/* [3, 6] = [p0 | zeros | p1] along dim 1: flattened row by row */
	assert_int_equal(tpc_tensor_init_cat(&cols, parts, 3, 1), 0);
	same_flat(&ck, &cols, "cols");
	/* [3, 3] = [r0; r1] along dim 0: the parts flattened in turn */
	parts[0] = ck.t[2];
	parts[1] = ck.t[3];
	assert_int_equal(tpc_tensor_init_cat(&rows, parts, 2, 0), 0);
	same_flat(&ck, &rows, "rows");
	/* a [1, 6] composite along dim 1: its parts in turn */
	tpc_tensor one;
	assert_int_equal(tpc_tensor_narrow(&one, &cols, 0, 1, 1), 0);
	same_flat(&ck, &one, "one");
	/* a transposed view has no flat view over its bytes */
	tpc_tensor tr, f;
	assert_int_equal(tpc_tensor_copy(&tr, &ck.t[1]), 0);
	tpc_tensor_transpose2d(&tr);
	assert_int_equal(tpc_tensor_flatten(&f, &tr), -1);
	tpc_tensor_release(&tr);
	tpc_tensor_release(&one);
	tpc_tensor_release(&rows);
	tpc_tensor_release(&cols);
	tpc_tensor_release(&z);
	tpc_ckpt_release(&ck);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flatten),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
