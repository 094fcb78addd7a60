/* test_safetensors.c - the safetensors reader and writer, HF sharding.
 * Bad files first: one handcrafted file per failure mode with the message it
 * must produce; then the real corpus; then seeded round trips. */
#include "test_util.h"

#include <cjson/cJSON.h>
#include <sys/stat.h>

#include "formats.h"
#include "tpc_buf.h"
#include "tpc_ckpt.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_util.h"
#include <time.h>

/* 8-byte length + header + `data` bytes of filler. */
static uint8_t *mk(const char *hdr, size_t data, size_t *n)
{
	size_t h = strlen(hdr);
	uint8_t *p = calloc(1, 8 + h + data + 1);
	tpc_wr64le(p, h);
	memcpy(p + 8, hdr, h);
	*n = 8 + h + data;
	return p;
}

static int parse(const uint8_t *p, size_t n, tpc_err *e)
{
	tpc_ckpt ck;
	tpc_ckpt_init(&ck);
	tpc_err_init(e);
	int r = tpc_safetensors_from_buffer(&ck, p, n, 0, "bad.safetensors", e);
	tpc_ckpt_release(&ck);
	return r;
}

static void expect_bad(const char *hdr, size_t data, const char *msg, const char *tensor)
{
	size_t n;
	tpc_err e;
	uint8_t *p = mk(hdr, data, &n);
	int r = parse(p, n, &e);
	if (r != TPC_EINPUT || !strstr(e.msg, msg))
		fail_msg("header %s: got %d '%s', wanted '%s'", hdr, r, e.msg, msg);
	assert_string_equal(e.path, "bad.safetensors");
	if (tensor)
		assert_string_equal(e.tensor, tensor);
	free(p);
}

static void test_bad_files(void **st)
{
	(void)st;
	tpc_err e;
	uint8_t small[5] = {1, 0, 0, 0, 0};
	assert_int_equal(parse(small, 5, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "too short"));

	uint8_t past[16] = {0xe8, 0x03, 0, 0, 0, 0, 0, 0, '{', '}'};
	assert_int_equal(parse(past, 16, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "header length 1000 runs past the end of the file (16 bytes)"));

	uint8_t big[16] = {0};
	tpc_wr64le(big, 100000001);
	assert_int_equal(parse(big, 16, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "exceeds the 100000000-byte limit"));

	/* a text file under a .safetensors name: its first 8 bytes are no length */
	const char *txt = "hello, world\nthis is not a model\n";
	assert_int_equal(parse((const uint8_t *)txt, strlen(txt), &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "not a safetensors file: it starts with the text 'hello, w'"));

	const char *lfs = "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n";
	assert_int_equal(parse((const uint8_t *)lfs, strlen(lfs), &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "Git LFS pointer"));

	expect_bad("{\"a\":{\"dtype\":\"F32\",", 0, "not valid JSON", NULL);
	expect_bad("[1,2]", 0, "not a JSON object", NULL);
	expect_bad("{\"a\":{\"dtype\":\"F12\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype 'F12'", "a");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 20,
		   "shape [2, 3] of F32 needs 24 bytes but data_offsets [0, 20] hold 20", "a");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap", "b");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}", 16, "hole", "b");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "hole", "a");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 7,
		   "3 unexpected bytes after the last tensor", NULL);
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 10, "truncated", "a");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "duplicate tensor name", "a");
	expect_bad("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ value for 'k' is not a string", NULL);
	expect_bad("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, "duplicate __metadata__ key", NULL);
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0,
		   "shape[0] is not an integer", "a");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,0]}}", 0,
		   "shape[0] is not an integer", "a");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,0]}}", 0,
		   "shape[0] is not an integer", "a");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
		   "\"data_offsets\":[0,0]}}", 0, "overflows", "a");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 4, "end before they begin", "a");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", 4,
		   "unexpected key 'extra'", "a");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, "needs \"dtype\"", "a");
	expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 0, "two integers", "a");
	expect_bad("{\"a\xff\":{}}", 0, "not valid UTF-8", NULL);
	expect_bad("{} x", 0, "unexpected bytes after the header", NULL);
	/* sub-byte dtype that does not fill whole bytes */
	expect_bad("{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, "whole bytes", "a");
	/* deep nesting must fail cleanly (cJSON's nesting limit) */
	{
		tpc_buf b = TPC_BUF_INIT;
		tpc_buf_adds(&b, "{\"a\":");
		tpc_buf_addn(&b, '[', 100000);
		tpc_buf_addn(&b, ']', 100000);
		tpc_buf_addc(&b, '}');
		expect_bad(b.p, 0, "not valid JSON", NULL);
		tpc_buf_release(&b);
	}
}

/* Valid edge cases: unpadded header, leading/trailing whitespace, empty and 0-d tensors. */
static void test_good_edges(void **st)
{
	(void)st;
	size_t n;
	tpc_err e;
	tpc_ckpt ck;
	uint8_t *p = mk(" {\"__metadata__\":{\"x\":\"y\"},\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
			"\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[8,8]}}  ", 8, &n);
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_safetensors_from_buffer(&ck, p, n, 0, "ok", &e), 0);
	assert_int_equal(ck.n, 2);
	assert_string_equal(tpc_ckpt_meta_get(&ck, "x"), "y");
	int64_t s = tpc_ckpt_find(&ck, "s");
	assert_int_equal(ck.t[s].ndim, 0);
	assert_int_equal(ck.t[s].nbytes, 8);
	tpc_ckpt_release(&ck);
	free(p);
}

typedef struct {
	char name[256];
	char dtype[16];
	int64_t shape[8];
	int ndim;
	char sha[65];
} want_t;

static void check_against(tpc_ckpt *ck, cJSON *exp, const char *file)
{
	tpc_err e;
	tpc_err_init(&e);
	int count = 0;
	for (cJSON *it = exp->child; it; it = it->next) {
		if (!strcmp(it->string, "__metadata__")) {
			for (cJSON *m = it->child; m; m = m->next) {
				const char *v = tpc_ckpt_meta_get(ck, m->string);
				if (!v || strcmp(v, m->valuestring))
					fail_msg("%s: metadata %s", file, m->string);
			}
			continue;
		}
		count++;
		int64_t ix = tpc_ckpt_find(ck, it->string);
		if (ix < 0)
			fail_msg("%s: missing tensor %s", file, it->string);
		const tpc_tensor *t = &ck->t[ix];
		cJSON *dt = cJSON_GetArrayItem(it, 0), *sh = cJSON_GetArrayItem(it, 1), *hs = cJSON_GetArrayItem(it, 2);
		if (strcmp(tpc_dtype_name(t->dtype), dt->valuestring))
			fail_msg("%s: %s dtype %s vs %s", file, it->string, tpc_dtype_name(t->dtype), dt->valuestring);
		assert_int_equal(t->ndim, cJSON_GetArraySize(sh));
		for (int d = 0; d < t->ndim; d++)
			assert_int_equal(t->shape[d], (int64_t)cJSON_GetArrayItem(sh, d)->valuedouble);
		uint8_t h[TPC_HASH_MAX];
		char hx[65];
		assert_int_equal(tpc_ckpt_hash_tensor(ck, t, TPC_HASH_SHA256, h, &e), 0);
		tpc_hex(h, 32, hx);
		if (strcmp(hx, hs->valuestring))
			fail_msg("%s: %s sha256 %s vs %s", file, it->string, hx, hs->valuestring);
	}
	assert_int_equal((size_t)count, ck->n);
}

static cJSON *load_expected(void)
{
	char path[4096];
	size_t n = 0;
	snprintf(path, sizeof(path), "%s/expected_safetensors.json", test_corpus());
	uint8_t *p = test_read_file(path, &n);
	if (!p)
		fail_msg("cannot read %s (set TPC_CORPUS)", path);
	cJSON *j = cJSON_ParseWithLength((const char *)p, n);
	free(p);
	assert_non_null(j);
	return j;
}

static void test_corpus_reads(void **st)
{
	(void)st;
	cJSON *exp = load_expected();
	int files = 0;
	for (cJSON *f = exp->child; f; f = f->next) {
		char path[4096];
		tpc_ckpt ck;
		tpc_err e;
		snprintf(path, sizeof(path), "%s/safetensors/%s", test_corpus(), f->string);
		tpc_ckpt_init(&ck);
		tpc_err_init(&e);
		if (tpc_ckpt_open(&ck, path, NULL, &e)) {
			char buf[2048];
			tpc_err_format(&e, buf, sizeof(buf));
			fail_msg("%s", buf);
		}
		assert_string_equal(ck.format, "safetensors");
		check_against(&ck, f, f->string);
		tpc_ckpt_release(&ck);
		files++;
	}
	assert_int_equal(files, 14);
	cJSON_Delete(exp);
}

/* corpus file -> single -> HF shards -> single: data and header byte-identical,
 * tensors equal to the corpus' expected hashes at every step. */
static void test_round_trips(void **st)
{
	(void)st;
	cJSON *exp = load_expected();
	char *dir = test_tmpdir();
	unsigned seed = (unsigned)time(NULL);
	printf("# seed %u\n", seed);
	srand(seed);
	for (cJSON *f = exp->child; f; f = f->next) {
		char in[4096], a[4200], sh[4200], b[4200];
		tpc_ckpt ck, ck2, ck3;
		tpc_err e;
		tpc_write_opts wo;
		memset(&wo, 0, sizeof(wo));
		snprintf(in, sizeof(in), "%s/safetensors/%s", test_corpus(), f->string);
		snprintf(a, sizeof(a), "%s/%s.a.safetensors", dir, f->string);
		snprintf(sh, sizeof(sh), "%s/%s.shards", dir, f->string);
		snprintf(b, sizeof(b), "%s/%s.b.safetensors", dir, f->string);
		tpc_err_init(&e);
		tpc_ckpt_init(&ck);
		assert_int_equal(tpc_ckpt_open(&ck, in, NULL, &e), 0);
		assert_int_equal(tpc_fmt_safetensors.write(&ck, NULL, 0, a, &wo, &e), 0);
		tpc_ckpt_release(&ck);

		tpc_ckpt_init(&ck);
		assert_int_equal(tpc_ckpt_open(&ck, a, NULL, &e), 0);
		check_against(&ck, f, a);
		/* random small shard size so most files split into several shards */
		uint64_t total = 0;
		for (size_t i = 0; i < ck.n; i++)
			total += ck.t[i].nbytes;
		wo.max_shard_size = 1 + (uint64_t)rand() % (total / 2 + 1);
		wo.inner_format = "safetensors";
		assert_int_equal(tpc_fmt_hf_index.write(&ck, NULL, 0, sh, &wo, &e), 0);

		tpc_ckpt_init(&ck2);
		if (tpc_ckpt_open(&ck2, sh, NULL, &e)) {
			char buf[2048];
			tpc_err_format(&e, buf, sizeof(buf));
			fail_msg("%s", buf);
		}
		check_against(&ck2, f, sh);
		assert_int_equal(tpc_fmt_safetensors.write(&ck2, NULL, 0, b, &wo, &e), 0);
		size_t na, nb;
		uint8_t *pa = test_read_file(a, &na), *pb = test_read_file(b, &nb);
		assert_int_equal(na, nb);
		assert_memory_equal(pa, pb, na);
		free(pa);
		free(pb);
		/* the written header: padded to 8, __metadata__ first with format pt */
		tpc_ckpt_init(&ck3);
		assert_int_equal(tpc_ckpt_open(&ck3, b, NULL, &e), 0);
		assert_string_equal(ck3.meta_k[0], "format");
		assert_int_equal(ck3.t[0].offset % 8, 0);
		tpc_ckpt_release(&ck3);
		tpc_ckpt_release(&ck2);
		tpc_ckpt_release(&ck);
	}
	cJSON_Delete(exp);
	test_rmrf(dir);
	free(dir);
}

/* HF layout details: names, the index text, one shard -> model.safetensors. */
static void test_hf_layout(void **st)
{
	(void)st;
	char *dir = test_tmpdir();
	char in[4200], out[4200], p[4300];
	size_t n = 0;
	float data[6] = {1, 2, 3, 4, 5, 6};
	tpc_ckpt ck;
	tpc_err e;
	tpc_write_opts wo;
	int src;
	memset(&wo, 0, sizeof(wo));
	snprintf(in, sizeof(in), "%s/raw.bin", dir);
	assert_int_equal(test_write_file(in, data, sizeof(data)), 0);
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_file(&ck, in, &src, &e), 0);
	int64_t s2[1] = {2};
	assert_true(tpc_ckpt_add_tensor(&ck, "b.w", TPC_F32, 1, s2, NULL, src, 0, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(&ck, "a.w", TPC_F32, 1, s2, NULL, src, 8, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(&ck, "c\xc3\xa9", TPC_F32, 1, s2, NULL, src, 16, &e) >= 0);
	snprintf(out, sizeof(out), "%s/hf", dir);
	wo.max_shard_size = 10; /* 8-byte tensors: one per shard */
	assert_int_equal(tpc_fmt_hf_index.write(&ck, NULL, 0, out, &wo, &e), 0);
	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", out);
	char *idx = (char *)test_read_file(p, &n);
	assert_non_null(idx);
	idx = realloc(idx, n + 1);
	idx[n] = 0;
	assert_string_equal(idx, "{\n  \"metadata\": {\n    \"total_size\": 24\n  },\n  \"weight_map\": {\n"
				 "    \"a.w\": \"model-00002-of-00003.safetensors\",\n"
				 "    \"b.w\": \"model-00001-of-00003.safetensors\",\n"
				 "    \"c\\u00e9\": \"model-00003-of-00003.safetensors\"\n  }\n}\n");
	free(idx);
	/* refuses to overwrite an existing set */
	assert_int_equal(tpc_fmt_hf_index.write(&ck, NULL, 0, out, &wo, &e), TPC_EUSAGE);
	/* one shard: model.safetensors, no index */
	snprintf(out, sizeof(out), "%s/one", dir);
	wo.max_shard_size = 0;
	tpc_err_init(&e);
	assert_int_equal(tpc_fmt_hf_index.write(&ck, NULL, 0, out, &wo, &e), 0);
	snprintf(p, sizeof(p), "%s/model.safetensors", out);
	assert_true(tpc_exists(p));
	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", out);
	assert_false(tpc_exists(p));
	tpc_ckpt_release(&ck);
	/* an index naming a file that lacks the tensor */
	snprintf(p, sizeof(p), "%s/hf/model.safetensors.index.json", dir);
	const char *lie = "{\"weight_map\":{\"a.w\":\"model-00001-of-00003.safetensors\","
			  "\"b.w\":\"model-00001-of-00003.safetensors\",\"c\\u00e9\":\"model-00003-of-00003.safetensors\"}}";
	assert_int_equal(test_write_file(p, lie, strlen(lie)), 0);
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_open(&ck, p, NULL, &e), TPC_EINPUT);
	tpc_ckpt_release(&ck);
	test_rmrf(dir);
	free(dir);
}

int main(void)
{
	tpc_formats_register_all();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_files),    cmocka_unit_test(test_good_edges),
		cmocka_unit_test(test_corpus_reads), cmocka_unit_test(test_round_trips),
		cmocka_unit_test(test_hf_layout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
