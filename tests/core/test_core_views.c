/* test_core_views.c - lib/'s checkpoint model: strided views as torch makes
 * them, tied tensors, composite tensors (swapped dims, stacks, split heads,
 * tiled groups, unit dims) and their gathered writes, each against the bytes
 * it must produce. */
#include "core_test.h"

#include <unistd.h>

#include "tpc_buf.h"
#include "tpc_ckpt.h"
#include "tpc_dtype.h"
#include "tpc_err.h"
#include "tpc_io.h"
#include "tpc_util.h"

/* A 3x4 f32 source viewed transposed, sliced and offset, as torch does. */
static void test_strided_views(void **st)
{
	(void)st;
	char *dir = test_tmpdir();
	char path[4200];
	float data[12];
	for (int i = 0; i < 12; i++)
		data[i] = (float)i;
	snprintf(path, sizeof(path), "%s/src.bin", dir);
	assert_int_equal(test_write_file(path, data, sizeof(data)), 0);
	tpc_ckpt ck;
	tpc_err e;
	int src;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_file(&ck, path, &src, &e), 0);
	int64_t shp[2] = {4, 3}, strd[2] = {1, 4};
	int64_t t = tpc_ckpt_add_tensor(&ck, "t", TPC_F32, 2, shp, strd, src, 0, &e);
	assert_true(t >= 0);
	assert_false(tpc_tensor_is_contiguous(&ck.t[t]));
	float out[12];
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[t], 0, 48, out, &e), 0);
	float want[12] = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
	assert_memory_equal(out, want, sizeof(want));
	/* a partial, element-aligned range of the same view */
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[t], 16, 20, out, &e), 0);
	assert_memory_equal(out, want + 4, 20);
	/* a column slice: rows 0..2, column 1 (offset 1 element, stride 4) */
	int64_t s2[1] = {3}, st2[1] = {4};
	int64_t c = tpc_ckpt_add_tensor(&ck, "col", TPC_F32, 1, s2, st2, src, 4, &e);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[c], 0, 12, out, &e), 0);
	assert_true(out[0] == 1 && out[1] == 5 && out[2] == 9);
	/* a view running past the source is refused by validation, naming it */
	int64_t s3[1] = {4};
	assert_true(tpc_ckpt_add_tensor(&ck, "bad", TPC_F32, 1, s3, st2, src, 8, &e) >= 0);
	assert_int_equal(tpc_ckpt_validate(&ck, &e), TPC_EINPUT);
	assert_string_equal(e.tensor, "bad");
	assert_non_null(strstr(e.msg, "but the file ends at 0x30"));
	/* 0-d and empty tensors */
	tpc_err_init(&e);
	int64_t z = tpc_ckpt_add_tensor(&ck, "scalar", TPC_F32, 0, NULL, NULL, src, 44, &e);
	assert_true(z >= 0);
	assert_int_equal(ck.t[z].numel, 1);
	int64_t zs[2] = {0, 5};
	int64_t em = tpc_ckpt_add_tensor(&ck, "empty", TPC_F32, 2, zs, NULL, src, 48, &e);
	assert_int_equal(ck.t[em].nbytes, 0);
	/* duplicate names, negative sizes and overflowing products are refused */
	assert_int_equal(tpc_ckpt_add_tensor(&ck, "t", TPC_F32, 0, NULL, NULL, src, 0, &e), TPC_EINPUT);
	tpc_err_init(&e);
	int64_t neg[1] = {-1};
	assert_int_equal(tpc_ckpt_add_tensor(&ck, "n", TPC_F32, 1, neg, NULL, src, 0, &e), TPC_EINPUT);
	tpc_err_init(&e);
	int64_t huge[3] = {1ll << 40, 1ll << 40, 1ll << 40};
	assert_int_equal(tpc_ckpt_add_tensor(&ck, "h", TPC_F32, 3, huge, NULL, src, 0, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "overflows"));
	/* find after many inserts (index rebuilds) */
	tpc_err_init(&e);
	for (int i = 0; i < 5000; i++) {
		char nm[32];
		snprintf(nm, sizeof(nm), "x.%d", i);
		assert_true(tpc_ckpt_add_tensor(&ck, nm, TPC_U8, 0, NULL, NULL, src, 0, &e) >= 0);
	}
	assert_true(tpc_ckpt_find(&ck, "x.4321") >= 0);
	assert_int_equal(tpc_ckpt_find(&ck, "x.5000"), -1);
	tpc_ckpt_release(&ck);
	test_rmrf(dir);
	free(dir);
}

/* Ties (tpc_ckpt_ties): the same view of one storage, and a recorded alias
 * while its description is its target's; a transposed view, a transposed or
 * cast alias are not ties. */
static void test_ties(void **st)
{
	(void)st;
	tpc_ckpt ck;
	tpc_err e;
	int src;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	uint8_t *mem = calloc(1, 64);
	assert_non_null(mem);
	assert_int_equal(tpc_ckpt_add_mem(&ck, "mem", mem, 64, &src, &e), 0);
	int64_t s0 = tpc_ckpt_add_storage(&ck, "0", "cpu", TPC_F32, src, 0, 64, &e);
	int64_t shp[2] = {2, 3}, tr[2] = {1, 2};
	const char *names[] = {"a", "b", "c", "d", "e", "f"};
	for (int i = 0; i < 6; i++) {
		int64_t ix = tpc_ckpt_add_tensor(&ck, names[i], TPC_F32, 2, shp, i == 2 ? tr : NULL, src, 0, &e);
		assert_int_equal(ix, i);
		ck.t[i].storage = i < 3 ? s0 : -1;
		ck.t[i].alias_of = i >= 3 ? 0 : -1;
	}
	tpc_tensor_transpose2d(&ck.t[4]);
	ck.t[5].dtype = TPC_F16;
	int64_t first[6], want[6] = {0, 0, 2, 0, 4, 5};
	assert_int_equal(tpc_ckpt_ties(&ck, NULL, 0, first, &e), 0);
	assert_memory_equal(first, want, sizeof(want));
	/* a selection: positions in it, the first selected of each tie */
	int64_t sel[4] = {3, 5, 1, 0}, want2[4] = {0, 1, 0, 0};
	assert_int_equal(tpc_ckpt_ties(&ck, sel, 4, first, &e), 0);
	assert_memory_equal(first, want2, sizeof(want2));
	/* computed tensors (a merge's descriptions): an alias of a copy is a
	 * tie; another coefficient, another companion is not */
	for (int i = 3; i < 6; i++) {
		tpc_dequant *dq = tpc_dequant_new(TPC_DQ_MAXC, true);
		assert_non_null(dq);
		dq->kind = TPC_DQ_MIX;
		dq->mix->w[0] = 0.5f;
		assert_int_equal(tpc_tensor_copy(&dq->c[0], &ck.t[i == 5 ? 1 : 0]), 0);
		dq->nc = 1;
		char *name = ck.t[i].name;
		tpc_tensor_release(&ck.t[i]);
		assert_int_equal(tpc_tensor_init_zero(&ck.t[i], TPC_F32, 2, shp), 0);
		ck.t[i].name = name;
		ck.t[i].flags = 0;
		ck.t[i].dq = dq;
		ck.t[i].alias_of = i == 3 ? -1 : 3;
	}
	ck.t[5].dq->c[0].offset = 4;
	assert_true(tpc_tensor_same_desc(&ck.t[3], &ck.t[4]));
	int64_t want3[6] = {0, 0, 2, 3, 3, 5};
	assert_int_equal(tpc_ckpt_ties(&ck, NULL, 0, first, &e), 0);
	assert_memory_equal(first, want3, sizeof(want3));
	ck.t[4].dq->mix->w[0] = 0.25f;
	assert_false(tpc_tensor_same_desc(&ck.t[3], &ck.t[4]));
	tpc_ckpt_release(&ck);
}

/* ck over a file of 24 int32 values 0, 1, ..., 23 named `name` in a fresh
 * folder *dir (remove and free it); returns the source index. */
static int ints_ckpt(tpc_ckpt *ck, const char *name, char **dirp)
{
	char *dir = *dirp = test_tmpdir();
	char path[4200];
	int32_t data[24];
	for (int i = 0; i < 24; i++)
		data[i] = i;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(test_write_file(path, data, sizeof(data)), 0);
	tpc_err e;
	int src;
	tpc_ckpt_init(ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_file(ck, path, &src, &e), 0);
	return src;
}

/* tpc_tensor_swap_dims: a [2, 3, 4] int32 view read as [2, 4, 3] (each of
 * the two stacked matrices transposed, as gpt-oss's experts stored [in,
 * out] are read), then refused on a composite */
static void test_swap_dims(void **st)
{
	(void)st;
	char *dir;
	tpc_ckpt ck;
	tpc_err e;
	int src = ints_ckpt(&ck, "w.bin", &dir);
	tpc_err_init(&e);
	int64_t shp[3] = {2, 3, 4};
	int64_t w = tpc_ckpt_add_tensor(&ck, "w", TPC_I32, 3, shp, NULL, src, 0, &e);
	assert_true(w >= 0);
	tpc_tensor t;
	assert_int_equal(tpc_tensor_copy(&t, &ck.t[w]), 0);
	assert_int_equal(tpc_tensor_swap_dims(&t, 1, 2), 0);
	assert_true(t.shape[0] == 2 && t.shape[1] == 4 && t.shape[2] == 3);
	int64_t v = tpc_ckpt_add_copy(&ck, "wt", &t, &e);
	assert_true(v >= 0);
	int32_t out[24];
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[v], 0, 96, out, &e), 0);
	for (int x = 0; x < 2; x++)
		for (int j = 0; j < 4; j++)
			for (int i = 0; i < 3; i++)
				assert_int_equal(out[x * 12 + j * 3 + i], x * 12 + i * 4 + j);
	assert_int_equal(tpc_tensor_swap_dims(&t, 0, 3), -1);
	tpc_tensor p[2], c;
	assert_int_equal(tpc_tensor_narrow(&p[0], &ck.t[w], 0, 0, 1), 0);
	assert_int_equal(tpc_tensor_narrow(&p[1], &ck.t[w], 0, 1, 1), 0);
	assert_int_equal(tpc_tensor_init_cat(&c, p, 2, 0), 0);
	assert_int_equal(tpc_tensor_swap_dims(&c, 1, 2), -1);
	tpc_tensor_release(&c);
	tpc_tensor_release(&p[0]);
	tpc_tensor_release(&p[1]);
	tpc_tensor_release(&t);
	tpc_ckpt_release(&ck);
	test_rmrf(dir);
	free(dir);
}

/* Composite tensors: a fused [q; k; v] split per part and re-assembled, zero
 * padding, narrowing across part boundaries, and a row slice of a composite. */
static void test_composites(void **st)
{
	(void)st;
	char *dir;
	tpc_ckpt ck;
	tpc_err e;
	int src = ints_ckpt(&ck, "w.bin", &dir); /* a [6, 4] int32 matrix: q rows 0-1, k rows 2-3, v rows 4-5 */
	tpc_err_init(&e);
	int64_t shp[2] = {6, 4};
	int64_t w = tpc_ckpt_add_tensor(&ck, "w", TPC_I32, 2, shp, NULL, src, 0, &e);
	/* rank 1 of 2 for parts of 2 rows: rows 1, 3, 5 */
	tpc_tensor p[3];
	for (int k = 0; k < 3; k++)
		assert_int_equal(tpc_tensor_narrow(&p[k], &ck.t[w], 0, 2 * k + 1, 1), 0);
	int64_t rs[2] = {3, 4};
	int64_t r1 = tpc_ckpt_add_composite(&ck, "w.r1", TPC_I32, 2, rs, 0, p, 3, &e);
	assert_true(r1 >= 0);
	int32_t out[32];
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[r1], 0, 48, out, &e), 0);
	for (int r = 0; r < 3; r++)
		for (int c = 0; c < 4; c++)
			assert_int_equal(out[r * 4 + c], (2 * r + 1) * 4 + c);
	/* a column slice of the composite narrows every part: columns 2..3 */
	tpc_tensor col;
	assert_int_equal(tpc_tensor_narrow(&col, &ck.t[r1], 1, 2, 2), 0);
	assert_int_equal(col.nparts, 3);
	int64_t cix = tpc_ckpt_add_copy(&ck, "w.r1.c", &col, &e);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[cix], 0, 24, out, &e), 0);
	assert_int_equal(out[0], 6);
	assert_int_equal(out[1], 7);
	assert_int_equal(out[4], 22);
	/* narrowing across a part boundary of the composite: rows 1..2 -> data rows 3, 5 */
	tpc_tensor mid;
	assert_int_equal(tpc_tensor_narrow(&mid, &ck.t[r1], 0, 1, 2), 0);
	assert_int_equal(mid.nparts, 2);
	int64_t mix = tpc_ckpt_add_copy(&ck, "w.r1.mid", &mid, &e);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[mix], 0, 32, out, &e), 0);
	assert_int_equal(out[0], 12);
	assert_int_equal(out[4], 20);
	/* zero padding below a view: [w; 0 0 0 0] */
	tpc_tensor pad[2];
	int64_t zs[2] = {1, 4};
	assert_int_equal(tpc_tensor_copy(&pad[0], &ck.t[w]), 0);
	assert_int_equal(tpc_tensor_init_zero(&pad[1], TPC_I32, 2, zs), 0);
	int64_t ps[2] = {7, 4};
	int64_t pix = tpc_ckpt_add_composite(&ck, "w.pad", TPC_I32, 2, ps, 0, pad, 2, &e);
	assert_int_equal(tpc_ckpt_validate(&ck, &e), 0);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[pix], 80, 32, out, &e), 0);
	assert_int_equal(out[0], 20);
	assert_int_equal(out[3], 23);
	assert_int_equal(out[4], 0);
	assert_int_equal(out[7], 0);
	/* concatenation along dim 1 (row-parallel merge): [w[:, :2] | w[:, 2:]] == w */
	tpc_tensor h[2];
	assert_int_equal(tpc_tensor_narrow(&h[0], &ck.t[w], 1, 0, 2), 0);
	assert_int_equal(tpc_tensor_narrow(&h[1], &ck.t[w], 1, 2, 2), 0);
	int64_t mg = tpc_ckpt_add_composite(&ck, "w.merged", TPC_I32, 2, shp, 1, h, 2, &e);
	uint8_t h1[TPC_HASH_MAX], h2[TPC_HASH_MAX];
	assert_int_equal(tpc_ckpt_hash_tensor(&ck, &ck.t[mg], TPC_HASH_SHA256, h1, &e), 0);
	assert_int_equal(tpc_ckpt_hash_tensor(&ck, &ck.t[w], TPC_HASH_SHA256, h2, &e), 0);
	assert_memory_equal(h1, h2, 32);
	/* tpc_tensor_pad_zero: w[:, :3] followed by a zero column (an uneven
	 * rank slice as the even one it is cut from); nothing shorter */
	tpc_tensor c3, cz;
	assert_int_equal(tpc_tensor_narrow(&c3, &ck.t[w], 1, 0, 3), 0);
	assert_int_equal(tpc_tensor_pad_zero(&cz, &c3, 1, 3), -1);
	assert_int_equal(tpc_tensor_pad_zero(&cz, &c3, 2, 4), -1);
	assert_int_equal(tpc_tensor_pad_zero(&cz, &c3, 1, 4), 0);
	assert_int_equal(cz.shape[1], 4);
	assert_int_equal(cz.nbytes, 96);
	int64_t zix = tpc_ckpt_add_copy(&ck, "w.c3.pad", &cz, &e);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[zix], 0, 96, out, &e), 0);
	for (int r = 0; r < 6; r++)
		for (int c = 0; c < 4; c++)
			assert_int_equal(out[r * 4 + c], c < 3 ? r * 4 + c : 0);
	tpc_tensor_release(&c3);
	tpc_tensor_release(&cz);
	/* an empty narrow */
	tpc_tensor em;
	assert_int_equal(tpc_tensor_narrow(&em, &ck.t[r1], 0, 3, 0), 0);
	assert_int_equal(em.numel, 0);
	for (int k = 0; k < 3; k++)
		tpc_tensor_release(&p[k]);
	tpc_tensor_release(&col);
	tpc_tensor_release(&mid);
	tpc_tensor_release(&pad[0]);
	tpc_tensor_release(&pad[1]);
	tpc_tensor_release(&h[0]);
	tpc_tensor_release(&h[1]);
	tpc_tensor_release(&em);
	tpc_ckpt_release(&ck);
	test_rmrf(dir);
	free(dir);
}

/* Writing views and composites whose rows are long runs goes through the
 * zero-copy gather (pwritev from the mappings); the bytes must be the image
 * read_bytes gives, for a column slice, a 3-D slice and a dim-1 composite of
 * shuffled slices and a zero fill (a merged row-parallel weight). */
static void write_matches_image(tpc_ckpt *ck, int64_t ix, const char *dir)
{
	char path[4300];
	tpc_err e;
	tpc_out o;
	size_t len = 0;
	const tpc_tensor *t = &ck->t[ix];
	tpc_err_init(&e);
	memset(&o, 0, sizeof(o));
	o.fd = -1;
	snprintf(path, sizeof(path), "%s/out_%lld.bin", dir, (long long)ix);
	assert_int_equal(tpc_out_open(&o, path, 0, &e), 0);
	assert_int_equal(tpc_ckpt_write_tensor(ck, t, &o, &e), 0);
	assert_int_equal(tpc_out_commit(&o, &e), 0);
	tpc_out_abort(&o);
	uint8_t *img = malloc((size_t)t->nbytes), *got = test_read_file(path, &len);
	assert_non_null(img);
	assert_int_equal(tpc_ckpt_read_bytes(ck, t, 0, t->nbytes, img, &e), 0);
	assert_int_equal(len, t->nbytes);
	assert_memory_equal(got, img, (size_t)t->nbytes);
	free(img);
	free(got);
}

/* Stacked expert weights: [w3_e; w1_e] per expert (a composite) stacked on a
 * new leading dimension, read back whole and one expert at a time. */
static void test_stack(void **st)
{
	(void)st;
	char *dir;
	tpc_ckpt ck;
	tpc_err e;
	int src = ints_ckpt(&ck, "s.bin", &dir); /* two experts' [3, 4] int32 weights, back to back */
	tpc_err_init(&e);
	int64_t shp[2] = {3, 4};
	int64_t a = tpc_ckpt_add_tensor(&ck, "a", TPC_I32, 2, shp, NULL, src, 0, &e);
	int64_t b = tpc_ckpt_add_tensor(&ck, "b", TPC_I32, 2, shp, NULL, src, 48, &e);
	/* expert 0 = [a rows 1..2; b row 0] (a composite), expert 1 = b */
	tpc_tensor p[2], f[2], stk, one, bad;
	assert_int_equal(tpc_tensor_narrow(&p[0], &ck.t[a], 0, 1, 2), 0);
	assert_int_equal(tpc_tensor_narrow(&p[1], &ck.t[b], 0, 0, 1), 0);
	assert_int_equal(tpc_tensor_init_cat(&f[0], p, 2, 0), 0); /* [3, 4] composite */
	assert_int_equal(tpc_tensor_copy(&f[1], &ck.t[b]), 0);      /* [3, 4] view */
	assert_int_equal(tpc_tensor_init_stack(&stk, f, 2), 0);
	assert_int_equal(stk.ndim, 3);
	assert_int_equal(stk.shape[0], 2);
	assert_int_equal(stk.shape[1], 3);
	assert_int_equal(stk.shape[2], 4);
	int64_t sx = tpc_ckpt_add_copy(&ck, "stacked", &stk, &e);
	assert_true(sx >= 0);
	assert_int_equal(tpc_ckpt_validate(&ck, &e), 0);
	int32_t out[24];
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[sx], 0, 96, out, &e), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(out[i], 4 + i); /* a rows 1..2 */
	for (int i = 0; i < 4; i++)
		assert_int_equal(out[8 + i], 12 + i); /* b row 0 */
	for (int i = 0; i < 12; i++)
		assert_int_equal(out[12 + i], 12 + i); /* b */
	write_matches_image(&ck, sx, dir);
	/* expert 1 again, and expert 0 (a composite) with its dim dropped */
	assert_int_equal(tpc_tensor_select0(&one, &ck.t[sx], 1), 0);
	assert_int_equal(one.ndim, 2);
	int64_t ox = tpc_ckpt_add_copy(&ck, "one", &one, &e);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[ox], 0, 48, out, &e), 0);
	for (int i = 0; i < 12; i++)
		assert_int_equal(out[i], 12 + i); /* b, the file's values 12..23 */
	tpc_tensor_release(&one);
	assert_int_equal(tpc_tensor_select0(&one, &ck.t[sx], 0), 0);
	int64_t zx = tpc_ckpt_add_copy(&ck, "zero", &one, &e);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[zx], 0, 48, out, &e), 0);
	assert_int_equal(out[0], 4);
	assert_int_equal(out[11], 15);
	/* a row of a stacked matrix, out of range, and parts that do not stack */
	assert_int_equal(tpc_tensor_select0(&bad, &ck.t[sx], 2), -1);
	tpc_tensor_release(&f[1]);
	assert_int_equal(tpc_tensor_narrow(&f[1], &ck.t[b], 0, 0, 2), 0);
	assert_int_equal(tpc_tensor_init_stack(&bad, f, 2), -1);
	tpc_tensor_release(&one);
	tpc_tensor_release(&stk);
	for (int k = 0; k < 2; k++) {
		tpc_tensor_release(&p[k]);
		tpc_tensor_release(&f[k]);
	}
	tpc_ckpt_release(&ck);
	test_rmrf(dir);
	free(dir);
}

/* A [6, 4] weight of 2 heads of 3 rows (2 then 1) split per head into
 * [2, 4, 2] (the first 2 rows of each head, transposed) and [2, 1, 4], and
 * joined back into the same [6, 4] image. */
static void test_split_heads(void **st)
{
	(void)st;
	char *dir;
	tpc_ckpt ck;
	tpc_err e;
	int src = ints_ckpt(&ck, "h.bin", &dir); /* int32 0..23 */
	tpc_err_init(&e);
	int64_t shp[2] = {6, 4};
	int64_t w = tpc_ckpt_add_tensor(&ck, "w", TPC_I32, 2, shp, NULL, src, 0, &e);
	tpc_tensor k, v, j, bad, bad2;
	assert_int_equal(tpc_tensor_split_heads(&k, &v, &ck.t[w], 2, 2, true), 0);
	assert_int_equal(k.ndim, 3);
	assert_int_equal(k.shape[0], 2);
	assert_int_equal(k.shape[1], 4);
	assert_int_equal(k.shape[2], 2);
	assert_int_equal(v.shape[0], 2);
	assert_int_equal(v.shape[1], 1);
	assert_int_equal(v.shape[2], 4);
	int64_t kx = tpc_ckpt_add_copy(&ck, "k", &k, &e), vx = tpc_ckpt_add_copy(&ck, "v", &v, &e);
	assert_true(kx >= 0 && vx >= 0);
	assert_int_equal(tpc_ckpt_validate(&ck, &e), 0);
	int32_t out[24];
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[kx], 0, 64, out, &e), 0);
	for (int h = 0; h < 2; h++)
		for (int c = 0; c < 4; c++)
			for (int r = 0; r < 2; r++)
				assert_int_equal(out[(h * 4 + c) * 2 + r], (h * 3 + r) * 4 + c);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[vx], 0, 32, out, &e), 0);
	for (int h = 0; h < 2; h++)
		for (int c = 0; c < 4; c++)
			assert_int_equal(out[h * 4 + c], (h * 3 + 2) * 4 + c);
	write_matches_image(&ck, kx, dir);
	/* the inverse, from the checkpoint's two stacks */
	assert_int_equal(tpc_tensor_join_heads(&j, &ck.t[kx], &ck.t[vx], true), 0);
	assert_int_equal(j.ndim, 2);
	assert_int_equal(j.shape[0], 6);
	assert_int_equal(j.shape[1], 4);
	int64_t jx = tpc_ckpt_add_copy(&ck, "joined", &j, &e);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[jx], 0, 96, out, &e), 0);
	for (int i = 0; i < 24; i++)
		assert_int_equal(out[i], i);
	write_matches_image(&ck, jx, dir);
	/* rows that are not whole heads, a first part as wide as a head, parts
	 * whose columns differ (k read as not transposed) */
	assert_int_equal(tpc_tensor_split_heads(&bad, &bad2, &ck.t[w], 4, 1, true), -1);
	assert_int_equal(tpc_tensor_split_heads(&bad, &bad2, &ck.t[w], 2, 3, true), -1);
	assert_int_equal(tpc_tensor_join_heads(&bad, &ck.t[kx], &ck.t[vx], false), -1);
	tpc_tensor_release(&j);
	tpc_tensor_release(&k);
	tpc_tensor_release(&v);
	tpc_ckpt_release(&ck);
	test_rmrf(dir);
	free(dir);
}

/* Groups of units reordered unit-major (a linear attention's value heads,
 * grouped by key head, to llama.cpp's tiled order): rows 2..21 of 24 as 2
 * groups of 5 units of 2 rows, the rows around them kept; columns of a
 * [4, 6] matrix as 3 groups of 2 one-column units; each undone by the call
 * with groups and per swapped; spans past the dim refused. */
static void test_tile_groups(void **st)
{
	(void)st;
	char *dir;
	tpc_ckpt ck;
	tpc_err e;
	int src = ints_ckpt(&ck, "g.bin", &dir); /* int32 0..23 */
	tpc_err_init(&e);
	int64_t n24 = 24, shp[2] = {4, 6};
	int64_t v = tpc_ckpt_add_tensor(&ck, "v", TPC_I32, 1, &n24, NULL, src, 0, &e);
	int64_t m = tpc_ckpt_add_tensor(&ck, "m", TPC_I32, 2, shp, NULL, src, 0, &e);
	tpc_tensor t, back, bad;
	int32_t out[24], want[24];
	assert_int_equal(tpc_tensor_tile_groups(&t, &ck.t[v], 0, 2, 2, 5, 2), 0);
	int64_t tx = tpc_ckpt_add_copy(&ck, "tiled", &t, &e);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[tx], 0, 96, out, &e), 0);
	for (int i = 0; i < 24; i++)
		want[i] = i;
	for (int p = 0; p < 5; p++) /* unit p of group g: rows 2 + (g * 5 + p) * 2 .. +1 */
		for (int g = 0; g < 2; g++)
			for (int r = 0; r < 2; r++)
				want[2 + (p * 2 + g) * 2 + r] = 2 + (g * 5 + p) * 2 + r;
	assert_memory_equal(out, want, sizeof(want));
	write_matches_image(&ck, tx, dir);
	assert_int_equal(tpc_tensor_tile_groups(&back, &ck.t[tx], 0, 2, 5, 2, 2), 0);
	int64_t bx = tpc_ckpt_add_copy(&ck, "back", &back, &e);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[bx], 0, 96, out, &e), 0);
	for (int i = 0; i < 24; i++)
		assert_int_equal(out[i], i);
	tpc_tensor_release(&t);
	tpc_tensor_release(&back);
	/* columns: [4, 6] as 3 groups of 2 columns -> column order 0 2 4 1 3 5 */
	assert_int_equal(tpc_tensor_tile_groups(&t, &ck.t[m], 1, 0, 3, 2, 1), 0);
	int64_t cx = tpc_ckpt_add_copy(&ck, "cols", &t, &e);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[cx], 0, 96, out, &e), 0);
	static const int order[6] = {0, 2, 4, 1, 3, 5};
	for (int r = 0; r < 4; r++)
		for (int c = 0; c < 6; c++)
			assert_int_equal(out[r * 6 + c], r * 6 + order[c]);
	write_matches_image(&ck, cx, dir);
	assert_int_equal(tpc_tensor_tile_groups(&back, &ck.t[cx], 1, 0, 2, 3, 1), 0);
	int64_t cb = tpc_ckpt_add_copy(&ck, "cols_back", &back, &e);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[cb], 0, 96, out, &e), 0);
	for (int i = 0; i < 24; i++)
		assert_int_equal(out[i], i);
	/* past the end, an offset past the dim, a dim out of range */
	assert_int_equal(tpc_tensor_tile_groups(&bad, &ck.t[v], 0, 5, 2, 5, 2), -1);
	assert_int_equal(tpc_tensor_tile_groups(&bad, &ck.t[v], 0, 25, 1, 1, 1), -1);
	assert_int_equal(tpc_tensor_tile_groups(&bad, &ck.t[m], 2, 0, 2, 2, 1), -1);
	tpc_tensor_release(&t);
	tpc_tensor_release(&back);
	tpc_ckpt_release(&ck);
	test_rmrf(dir);
	free(dir);
}

/* A unit dim dropped and put back (a depthwise convolution's [6, 1, 4] as
 * [6, 4]): descriptions of the same bytes; a dim of another size, a dim out
 * of range and a composite refused. */
static void test_unit_dim(void **st)
{
	(void)st;
	char *dir;
	tpc_ckpt ck;
	tpc_err e;
	int src = ints_ckpt(&ck, "u.bin", &dir); /* int32 0..23 */
	tpc_err_init(&e);
	int64_t shp[3] = {6, 1, 4};
	int64_t w = tpc_ckpt_add_tensor(&ck, "w", TPC_I32, 3, shp, NULL, src, 0, &e);
	tpc_tensor t, c;
	assert_int_equal(tpc_tensor_copy(&t, &ck.t[w]), 0);
	assert_int_equal(tpc_tensor_unit_dim(&t, 0, false), -1);
	assert_int_equal(tpc_tensor_unit_dim(&t, 3, false), -1);
	assert_int_equal(tpc_tensor_unit_dim(&t, 1, false), 0);
	assert_int_equal(t.ndim, 2);
	assert_int_equal(t.shape[0], 6);
	assert_int_equal(t.shape[1], 4);
	int64_t sx = tpc_ckpt_add_copy(&ck, "squeezed", &t, &e);
	int32_t out[24];
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[sx], 0, 96, out, &e), 0);
	for (int i = 0; i < 24; i++)
		assert_int_equal(out[i], i);
	/* a column of it, then the unit dim back: [6, 1, 1] of column 2 */
	tpc_tensor col;
	assert_int_equal(tpc_tensor_narrow(&col, &ck.t[sx], 1, 2, 1), 0);
	assert_int_equal(tpc_tensor_unit_dim(&col, 1, true), 0);
	assert_int_equal(col.ndim, 3);
	assert_int_equal(col.shape[1], 1);
	int64_t cx = tpc_ckpt_add_copy(&ck, "col", &col, &e);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[cx], 0, 24, out, &e), 0);
	for (int r = 0; r < 6; r++)
		assert_int_equal(out[r], r * 4 + 2);
	assert_int_equal(tpc_tensor_unit_dim(&t, 1, true), 0);
	assert_int_equal(t.ndim, 3);
	int64_t bx = tpc_ckpt_add_copy(&ck, "back", &t, &e);
	assert_int_equal(tpc_ckpt_read_bytes(&ck, &ck.t[bx], 0, 96, out, &e), 0);
	for (int i = 0; i < 24; i++)
		assert_int_equal(out[i], i);
	write_matches_image(&ck, bx, dir);
	assert_int_equal(tpc_tensor_init_cat(&c, &ck.t[w], 1, 0), 0);
	assert_int_equal(tpc_tensor_unit_dim(&c, 1, false), c.nparts ? -1 : 0);
	tpc_tensor_release(&c);
	tpc_tensor_release(&col);
	tpc_tensor_release(&t);
	tpc_ckpt_release(&ck);
	test_rmrf(dir);
	free(dir);
}

static void test_gather_write(void **st)
{
	(void)st;
	char *dir = test_tmpdir();
	char path[4200];
	enum { R = 64, C = 1024 };
	float *data = malloc(sizeof(float) * R * C);
	assert_non_null(data);
	for (int i = 0; i < R * C; i++)
		data[i] = (float)i;
	snprintf(path, sizeof(path), "%s/w.bin", dir);
	assert_int_equal(test_write_file(path, data, sizeof(float) * R * C), 0);
	free(data);
	tpc_ckpt ck;
	tpc_err e;
	int src;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_file(&ck, path, &src, &e), 0);
	int64_t shp[2] = {R, C}, shp3[3] = {8, 8, C};
	int64_t w = tpc_ckpt_add_tensor(&ck, "w", TPC_F32, 2, shp, NULL, src, 0, &e);
	int64_t w3 = tpc_ckpt_add_tensor(&ck, "w3", TPC_F32, 3, shp3, NULL, src, 0, &e);
	/* a row-parallel rank slice: columns 256..511, runs of 1 KiB */
	tpc_tensor v;
	assert_int_equal(tpc_tensor_narrow(&v, &ck.t[w], 1, 256, 256), 0);
	write_matches_image(&ck, tpc_ckpt_add_copy(&ck, "w.cols", &v, &e), dir);
	/* a 3-D slice: [8, 2..5, C], runs of 4 rows of C */
	tpc_tensor v3;
	assert_int_equal(tpc_tensor_narrow(&v3, &ck.t[w3], 1, 2, 4), 0);
	write_matches_image(&ck, tpc_ckpt_add_copy(&ck, "w3.mid", &v3, &e), dir);
	/* a dim-1 composite: [w[:, 768:] | w[:, 0:256] | 0 (R x 256) | w[:, 256:768]] */
	tpc_tensor p[4];
	int64_t zs[2] = {R, 256};
	assert_int_equal(tpc_tensor_narrow(&p[0], &ck.t[w], 1, 768, 256), 0);
	assert_int_equal(tpc_tensor_narrow(&p[1], &ck.t[w], 1, 0, 256), 0);
	assert_int_equal(tpc_tensor_init_zero(&p[2], TPC_F32, 2, zs), 0);
	assert_int_equal(tpc_tensor_narrow(&p[3], &ck.t[w], 1, 256, 512), 0);
	int64_t cs[2] = {R, C + 256};
	int64_t cx = tpc_ckpt_add_composite(&ck, "w.merged", TPC_F32, 2, cs, 1, p, 4, &e);
	assert_true(cx >= 0);
	write_matches_image(&ck, cx, dir);
	/* a transposed view (runs of one element) takes the buffered path */
	int64_t tst[2] = {1, C}, tsh[2] = {C, R};
	int64_t tx = tpc_ckpt_add_tensor(&ck, "w.T", TPC_F32, 2, tsh, tst, src, 0, &e);
	assert_true(tx >= 0);
	write_matches_image(&ck, tx, dir);
	tpc_tensor_release(&v);
	tpc_tensor_release(&v3);
	for (int k = 0; k < 4; k++)
		tpc_tensor_release(&p[k]);
	tpc_ckpt_release(&ck);
	test_rmrf(dir);
	free(dir);
}


int main(void)
{
	core_test_io_config();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strided_views),
		cmocka_unit_test(test_composites),
		cmocka_unit_test(test_stack),
		cmocka_unit_test(test_split_heads),
		cmocka_unit_test(test_unit_dim),
		cmocka_unit_test(test_tile_groups),
		cmocka_unit_test(test_gather_write),
		cmocka_unit_test(test_ties),
		cmocka_unit_test(test_swap_dims),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
