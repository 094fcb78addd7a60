/*
 * test_zip.c - the zip container: corpus files written by real torch, round
 * trips through the writer, and one handcrafted bad file per failure mode.
 *
 *   test_zip                       the unit tests (cmocka)
 *   test_zip --write-samples DIR   write sample archives for tests/torch/zip_python_check.sh
 *   test_zip --rewrite IN OUT PFX  rewrite every record of IN under prefix PFX ("-": same names)
 *   test_zip --slow DIR [PKL]      write and read back an archive with a record over 4 GiB
 *                                  (PKL: the bytes to store as data.pkl)
 *
 * The corpus is $TPC_CORPUS (meson sets it), else ../../../../shared/corpus
 * (from build/tests). Temporary files go to a mkdtemp folder under $TMPDIR.
 * Random contents come from a seed printed at start ($TPC_SEED to replay).
 */
#include <dirent.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "tpc_buf.h"
#include "tpc_err.h"
#include "tpc_io.h"
#include "tpc_util.h"
#include "test_util.h"
#include "torch/tpc_zip.h"

static char *g_tmp; /* per-run temporary folder */
static uint64_t g_seed;

/* ----------------------------------------------------------------------- */
/* helpers                                                                  */

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull); /* splitmix64 */
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t s = seed;
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd(&s);
}


static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p = NULL;
	long len;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		p = malloc((size_t)len + 1);
		if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
			free(p);
			p = NULL;
		}
		*n = (size_t)len;
	}
	fclose(f);
	return p;
}

static void tmp_path(char *buf, size_t n, const char *name)
{
	int k = snprintf(buf, n, "%s/%s", g_tmp, name);
	assert_true(k > 0 && (size_t)k < n);
}

static void print_err(const tpc_err *e)
{
	char b[2048];
	tpc_err_format(e, b, sizeof(b));
	print_message("#   error: %s [%s]\n", b, e->where ? e->where : "-");
}

/* Opening must fail with TPC_EINPUT and a message containing `want`. */
static void expect_bad(const uint8_t *d, size_t n, const char *want)
{
	tpc_zip z;
	tpc_err e;
	tpc_err_init(&e);
	int r = tpc_zip_open_from_buffer(&z, d, n, "bad.pt", &e);
	if (r != TPC_EINPUT || !strstr(e.msg, want)) {
		print_message("# expected an error containing '%s', got %d\n", want, r);
		print_err(&e);
		if (!r)
			tpc_zip_release(&z);
		fail();
	}
	assert_int_equal(e.code, TPC_EINPUT);
	assert_string_equal(e.path, "bad.pt");
	assert_null(z.entries); /* released on failure */
}

static void open_ok(tpc_zip *z, const uint8_t *d, size_t n, const char *path)
{
	tpc_err e;
	tpc_err_init(&e);
	int r = tpc_zip_open_from_buffer(z, d, n, path, &e);
	if (r)
		print_err(&e);
	assert_int_equal(r, 0);
	assert_int_equal(e.code, 0); /* untouched on success */
}

/* ----------------------------------------------------------------------- */
/* writer helpers                                                           */

typedef struct rec {
	const char *name;
	const uint8_t *data;
	uint64_t len;
	bool streamed; /* begin/write/end instead of add */
} rec;

/* Write recs with the zip writer into `path`; returns 0 or the error. */
static int write_zip(const char *path, const char *prefix, const rec *r, size_t n, tpc_err *e)
{
	tpc_out o;
	tpc_zipw w;
	int ret = 0;
	if ((ret = tpc_out_open(&o, path, TPC_OUT_FORCE, e)))
		return ret;
	tpc_zipw_init(&w, &o, prefix);
	for (size_t i = 0; i < n && !ret; i++) {
		if (!r[i].streamed) {
			ret = tpc_zipw_add(&w, r[i].name, r[i].data, r[i].len, e);
			continue;
		}
		uint64_t off = 0;
		ret = tpc_zipw_begin(&w, r[i].name, r[i].len, &off, e);
		if (!ret && off != o.size)
			ret = tpc_err_set(e, TPC_EUSAGE, "data offset %" PRIu64 " is not the output position",
					  off);
		for (uint64_t k = 0; k < r[i].len && !ret; k += 7) /* odd chunks */
			ret = tpc_zipw_write(&w, r[i].data + k, r[i].len - k < 7 ? r[i].len - k : 7, e);
		if (!ret)
			ret = tpc_zipw_end(&w, tpc_crc32_parallel(r[i].data, r[i].len), e);
	}
	if (!ret)
		ret = tpc_zipw_finish(&w, e);
	if (!ret)
		ret = tpc_out_commit(&o, e);
	else
		tpc_out_abort(&o);
	tpc_zipw_release(&w);
	return ret;
}

static uint8_t *write_zip_mem(const char *prefix, const rec *r, size_t n, size_t *len)
{
	char path[1024];
	tpc_err e;
	tpc_err_init(&e);
	tmp_path(path, sizeof(path), "mem.zip");
	int ret = write_zip(path, prefix, r, n, &e);
	if (ret)
		print_err(&e);
	assert_int_equal(ret, 0);
	uint8_t *d = slurp(path, len);
	assert_non_null(d);
	unlink(path);
	return d;
}

/* A torch-like archive: data.pkl, byteorder, data/0..2 (data/1 empty), version. */
static uint8_t g_payload[1 << 20];

static uint8_t *sample_zip(size_t *len)
{
	static const uint8_t pkl[] = {0x80, 0x02, '}', 'q', 0x00, '.'};
	rec r[] = {
		{"data.pkl", pkl, sizeof(pkl), false},
		{"byteorder", (const uint8_t *)"little", 6, false},
		{"data/0", g_payload, sizeof(g_payload), false},
		{"data/1", NULL, 0, false},
		{"data/2", g_payload + 1000, 333, true},
		{"version", (const uint8_t *)"3\n", 2, false},
	};
	return write_zip_mem("sample", r, sizeof(r) / sizeof(r[0]), len);
}

/* ----------------------------------------------------------------------- */
/* handcrafted archives: a plain zip writer with knobs for lying            */

typedef struct spec {
	const char *name;
	const uint8_t *data; /* bytes as stored */
	size_t len;
	uint16_t method;
	uint16_t flags;
	uint64_t usize;       /* declared size; 0 = len */
	uint32_t crc;         /* 0 = crc32 of data */
	const char *cname;    /* central name, if it differs */
	int cmethod;          /* central method if >= 0 (use -1 for "same") */
	uint64_t grow;        /* added to the declared sizes, local and central */
	bool z64;             /* central sizes in a zip64 extra field */
	uint64_t z64_size;    /* size in that field (0 = the real one) */
	bool same_offset;     /* central offset = the previous entry's */
	uint16_t ltime;       /* local header time (central is 0) */
} spec;

static uint8_t *build(const spec *s, size_t n, size_t *out_len)
{
	tpc_buf b = TPC_BUF_INIT, cd = TPC_BUF_INIT;
	uint64_t prev = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t h[46];
		uint64_t at = b.len;
		uint64_t csize = s[i].len + s[i].grow;
		uint64_t usize = (s[i].usize ? s[i].usize : s[i].len) + s[i].grow;
		uint32_t crc = s[i].crc ? s[i].crc
					: (uint32_t)crc32(0, s[i].data, (uInt)s[i].len);
		size_t nlen = strlen(s[i].name);
		memset(h, 0, 30);
		tpc_wr32le(h, 0x04034b50);
		tpc_wr16le(h + 4, 20);
		tpc_wr16le(h + 6, s[i].flags);
		tpc_wr16le(h + 8, s[i].method);
		tpc_wr16le(h + 10, s[i].ltime);
		tpc_wr32le(h + 14, crc);
		tpc_wr32le(h + 18, (uint32_t)csize);
		tpc_wr32le(h + 22, (uint32_t)usize);
		tpc_wr16le(h + 26, (uint16_t)nlen);
		tpc_buf_add(&b, h, 30);
		tpc_buf_add(&b, s[i].name, nlen);
		tpc_buf_add(&b, s[i].data, s[i].len);

		const char *cn = s[i].cname ? s[i].cname : s[i].name;
		size_t cnlen = strlen(cn);
		memset(h, 0, 46);
		tpc_wr32le(h, 0x02014b50);
		tpc_wr16le(h + 4, 20);
		tpc_wr16le(h + 6, 20);
		tpc_wr16le(h + 8, s[i].flags);
		tpc_wr16le(h + 10, s[i].cmethod >= 0 ? (uint16_t)s[i].cmethod : s[i].method);
		tpc_wr32le(h + 16, crc);
		tpc_wr32le(h + 20, s[i].z64 ? 0xFFFFFFFFu : (uint32_t)csize);
		tpc_wr32le(h + 24, s[i].z64 ? 0xFFFFFFFFu : (uint32_t)usize);
		tpc_wr16le(h + 28, (uint16_t)cnlen);
		tpc_wr16le(h + 30, s[i].z64 ? 20 : 0);
		tpc_wr32le(h + 42, (uint32_t)(s[i].same_offset ? prev : at));
		tpc_buf_add(&cd, h, 46);
		tpc_buf_add(&cd, cn, cnlen);
		if (s[i].z64) {
			uint8_t x[20];
			tpc_wr16le(x, 1);
			tpc_wr16le(x + 2, 16);
			tpc_wr64le(x + 4, s[i].z64_size ? s[i].z64_size : usize);
			tpc_wr64le(x + 12, s[i].z64_size ? s[i].z64_size : csize);
			tpc_buf_add(&cd, x, 20);
		}
		prev = at;
	}
	uint8_t eocd[22] = {0};
	tpc_wr32le(eocd, 0x06054b50);
	tpc_wr16le(eocd + 8, (uint16_t)n);
	tpc_wr16le(eocd + 10, (uint16_t)n);
	tpc_wr32le(eocd + 12, (uint32_t)cd.len);
	tpc_wr32le(eocd + 16, (uint32_t)b.len);
	tpc_buf_add(&b, cd.p, cd.len);
	tpc_buf_add(&b, eocd, 22);
	tpc_buf_release(&cd);
	assert_false(b.oom);
	return (uint8_t *)tpc_buf_detach(&b, out_len);
}

#define SPEC(nm, d, l) {.name = (nm), .data = (const uint8_t *)(d), .len = (l), .cmethod = -1}

/* raw deflate of p[0..n) */
static uint8_t *deflate_raw(const uint8_t *p, size_t n, size_t *out_len)
{
	z_stream s;
	memset(&s, 0, sizeof(s));
	assert_int_equal(deflateInit2(&s, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
	size_t cap = deflateBound(&s, (uLong)n);
	uint8_t *out = malloc(cap);
	assert_non_null(out);
	s.next_in = (Bytef *)(uintptr_t)p;
	s.avail_in = (uInt)n;
	s.next_out = out;
	s.avail_out = (uInt)cap;
	assert_int_equal(deflate(&s, Z_FINISH), Z_STREAM_END);
	*out_len = s.total_out;
	deflateEnd(&s);
	return out;
}

/* ----------------------------------------------------------------------- */
/* corpus                                                                   */

static void test_corpus_torch(void **state)
{
	(void)state;
	char dir[1200], path[2400], out[1024];
	int zips = 0, legacy = 0;
	snprintf(dir, sizeof(dir), "%s/torch", test_corpus());
	DIR *d = opendir(dir);
	if (!d) {
		print_message("# corpus not found at '%s' (set TPC_CORPUS)\n", dir);
		if (getenv("TPC_CORPUS"))
			fail();
		skip();
	}
	tmp_path(out, sizeof(out), "rewrite.pt");
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		size_t n = 0;
		uint8_t *buf = slurp(path, &n);
		assert_non_null(buf);
		if (n < 4 || memcmp(buf, "PK\3\4", 4) != 0) { /* legacy format */
			legacy++;
			free(buf);
			continue;
		}
		zips++;
		tpc_zip z;
		tpc_err e;
		tpc_err_init(&e);
		open_ok(&z, buf, n, path);
		const tpc_zip_entry *pkl = tpc_zip_find(&z, "data.pkl");
		assert_non_null(pkl);
		assert_true(strlen(tpc_zip_prefix(&z)) > 0);
		assert_int_equal(pkl->name_len, strlen(tpc_zip_prefix(&z)) + 9);
		assert_ptr_equal(tpc_zip_find_raw(&z, pkl->name), pkl);
		assert_null(tpc_zip_find(&z, "no/such/record"));
		assert_int_equal(tpc_zip_check_prefix(&z, &e), 0);
		assert_false(tpc_zip_is_torchscript(&z));
		/* every record of a torch-written file starts at a multiple of 64 */
		for (size_t i = 0; i < tpc_zip_count(&z); i++) {
			const tpc_zip_entry *ent = tpc_zip_entry_at(&z, i);
			if (ent->data_offset % 64)
				print_message("# %s: '%s' at %" PRIu64 "\n", path, ent->name,
					      ent->data_offset);
			assert_int_equal(ent->data_offset % 64, 0);
			assert_int_equal(ent->method, TPC_ZIP_STORED);
			assert_int_equal(tpc_zip_verify_crc(&z, ent, &e), 0);
		}
		/* our writer reproduces the file byte for byte */
		rec *r = calloc(tpc_zip_count(&z), sizeof(*r));
		assert_non_null(r);
		for (size_t i = 0; i < tpc_zip_count(&z); i++) {
			const tpc_zip_entry *ent = tpc_zip_entry_at(&z, i);
			r[i].name = ent->name;
			assert_int_equal(tpc_zip_stored(&z, ent, &r[i].data, &r[i].len, &e), 0);
		}
		int ret = write_zip(out, NULL, r, tpc_zip_count(&z), &e);
		if (ret)
			print_err(&e);
		assert_int_equal(ret, 0);
		size_t m = 0;
		uint8_t *again = slurp(out, &m);
		assert_non_null(again);
		if (m != n || memcmp(again, buf, n) != 0)
			print_message("# %s: rewrite differs (%zu vs %zu bytes)\n", path, m, n);
		assert_true(m == n && memcmp(again, buf, n) == 0);
		free(again);
		free(r);
		tpc_zip_release(&z);
		free(buf);
	}
	closedir(d);
	unlink(out);
	print_message("# corpus: %d zip files read and rewritten byte-identically, %d legacy skipped\n",
		      zips, legacy);
	assert_true(zips >= 1);
}

static void test_corpus_negative(void **state)
{
	(void)state;
	char path[1200];
	const char *ts[] = {"pytorch113_TestSerialization.test_linear.scripted.pt",
			    "pytorch113_TestSerialization.test_linear.traced.pt"};
	snprintf(path, sizeof(path), "%s/negative", test_corpus());
	if (!tpc_is_dir(path))
		skip();
	for (size_t i = 0; i < 2; i++) {
		tpc_zip z;
		tpc_err e;
		tpc_err_init(&e);
		snprintf(path, sizeof(path), "%s/negative/%s", test_corpus(), ts[i]);
		int r = tpc_zip_open_from_file(&z, path, &e);
		if (r)
			print_err(&e);
		assert_int_equal(r, 0);
		assert_true(tpc_zip_is_torchscript(&z));
		/* its code/ records are DEFLATED: they inflate and pass their CRC */
		int deflated = 0;
		for (size_t k = 0; k < tpc_zip_count(&z); k++) {
			const tpc_zip_entry *ent = tpc_zip_entry_at(&z, k);
			const uint8_t *p = NULL;
			uint64_t len = 0;
			uint8_t *own = NULL;
			assert_int_equal(tpc_zip_read(&z, ent, 1 << 20, &p, &len, &own, &e), 0);
			assert_int_equal(len, ent->usize);
			deflated += ent->method == TPC_ZIP_DEFLATED;
			free(own);
		}
		assert_true(deflated > 0);
		tpc_zip_release(&z);
	}
	tpc_zip z;
	tpc_err e;
	tpc_err_init(&e);
	snprintf(path, sizeof(path), "%s/negative/burn_src__pytorch__tests__reader__test_data__broken.pt",
		 test_corpus());
	assert_int_equal(tpc_zip_open_from_file(&z, path, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "not a zip archive"));
}

/* ----------------------------------------------------------------------- */
/* round trips                                                              */

static void test_roundtrip(void **state)
{
	(void)state;
	size_t n = 0;
	uint8_t *d = sample_zip(&n);
	tpc_zip z;
	tpc_err e;
	tpc_err_init(&e);
	open_ok(&z, d, n, "sample.pt");
	assert_string_equal(tpc_zip_prefix(&z), "sample");
	assert_int_equal(tpc_zip_count(&z), 6);
	assert_true(z.zip64); /* zip64 end records always, as miniz */
	assert_int_equal(tpc_zip_check_prefix(&z, &e), 0);
	assert_false(tpc_zip_is_torchscript(&z));

	const char *names[] = {"data.pkl", "byteorder", "data/0", "data/1", "data/2", "version"};
	uint64_t cursor = 0, cd_len = 0;
	for (size_t i = 0; i < 6; i++) {
		const tpc_zip_entry *ent = tpc_zip_find(&z, names[i]);
		assert_non_null(ent);
		assert_ptr_equal(ent, tpc_zip_entry_at(&z, i)); /* write order */
		assert_int_equal(ent->data_offset % 64, 0);
		/* the pure layout function agrees with what was written */
		tpc_zip_plan p;
		assert_int_equal(tpc_zip_plan_record(cursor, ent->name_len, ent->usize, &p), 0);
		assert_int_equal(p.header_offset, ent->header_offset);
		assert_int_equal(p.data_offset, ent->data_offset);
		assert_int_equal(p.desc_len, ent->desc_len);
		assert_int_equal(ent->flags, ent->usize ? 0x0808 : 0x0800);
		cursor = p.end;
		cd_len += tpc_zip_central_len(ent->name_len, ent->usize, ent->header_offset);
		assert_int_equal(tpc_zip_verify_crc(&z, ent, &e), 0);
	}
	assert_int_equal(z.cd_offset, cursor);
	assert_int_equal(z.cd_size, cd_len);
	assert_int_equal(n, cursor + cd_len + TPC_ZIP_END_LEN);

	const uint8_t *p = NULL;
	uint64_t len = 0;
	assert_int_equal(tpc_zip_stored(&z, tpc_zip_find(&z, "data/0"), &p, &len, &e), 0);
	assert_int_equal(len, sizeof(g_payload));
	assert_memory_equal(p, g_payload, sizeof(g_payload));
	assert_int_equal(tpc_zip_stored(&z, tpc_zip_find(&z, "data/2"), &p, &len, &e), 0);
	assert_int_equal(len, 333);
	assert_memory_equal(p, g_payload + 1000, 333);
	const tpc_zip_entry *empty = tpc_zip_find(&z, "data/1");
	assert_int_equal(empty->usize, 0);
	assert_int_equal(empty->crc32, 0);
	assert_int_equal(empty->desc_len, 0); /* miniz writes none for an empty record */
	/* an empty record's data offset is where the next header starts */
	assert_int_equal(empty->data_offset, tpc_zip_find(&z, "data/2")->header_offset);
	uint8_t *own = NULL;
	assert_int_equal(tpc_zip_inflate(&z, tpc_zip_find(&z, "version"), 16, &own, &len, &e), 0);
	assert_int_equal(len, 2);
	assert_memory_equal(own, "3\n", 2);
	free(own);
	/* a STORED entry over the cap is refused by inflate too */
	assert_int_equal(tpc_zip_inflate(&z, tpc_zip_find(&z, "data/0"), 1000, &own, &len, &e),
			 TPC_EINPUT);
	assert_null(own);
	tpc_zip_release(&z);
	free(d);
}

static void test_many_entries(void **state)
{
	(void)state;
	enum { N = 70000 }; /* > 65535: the end record saturates, zip64 holds the count */
	rec *r = calloc(N, sizeof(*r));
	char *names = malloc((size_t)N * 16);
	assert_non_null(r);
	assert_non_null(names);
	for (size_t i = 0; i < N; i++) {
		snprintf(names + i * 16, 16, "r/%06zu", i);
		r[i].name = names + i * 16;
		r[i].data = g_payload + i % 1000;
		r[i].len = i % 5;
	}
	size_t n = 0;
	uint8_t *d = write_zip_mem("many", r, N, &n);
	assert_int_equal(tpc_rd16le(d + n - 22 + 10), 0xFFFF);
	tpc_zip z;
	open_ok(&z, d, n, "many.pt");
	assert_int_equal(tpc_zip_count(&z), N);
	const tpc_zip_entry *ent = tpc_zip_find(&z, "r/069999");
	assert_non_null(ent);
	assert_int_equal(ent->usize, 69999 % 5);
	assert_ptr_equal(ent, tpc_zip_entry_at(&z, N - 1));
	tpc_zip_release(&z);
	free(d);
	free(names);
	free(r);
}

/* An archive inside a bigger mapped file (a DCP item), opened in place: the
 * same table as from a buffer, libzip's second opinion read by pread at the
 * right offset, and a bad archive refused with the same message. */
static void test_from_map(void **state)
{
	(void)state;
	rec r[] = {{"data.pkl", g_payload, 100, false}, {"data/0", g_payload + 5, 3000, true},
		   {"version", (const uint8_t *)"3\n", 2, false}};
	size_t n = 0;
	uint8_t *d = write_zip_mem("m", r, 3, &n);
	const uint64_t at = 4096 + 7;
	uint8_t *file = calloc(1, at + n + 100);
	char path[4200];
	tpc_map m = {.fd = -1};
	tpc_zip a, b;
	tpc_err e;
	assert_non_null(file);
	memset(file, 'x', at + n + 100);
	memcpy(file + at, d, n);
	tmp_path(path, sizeof(path), "inside.bin");
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(file, 1, at + n + 100, f), at + n + 100);
	assert_int_equal(fclose(f), 0);
	tpc_err_init(&e);
	assert_int_equal(tpc_map_open(&m, path, &e), 0);
	open_ok(&a, d, n, "inside.bin");
	assert_int_equal(tpc_zip_open_from_map(&b, &m, at, n, "inside.bin", &e), 0);
	assert_int_equal(tpc_zip_count(&b), tpc_zip_count(&a));
	for (size_t i = 0; i < tpc_zip_count(&a); i++) {
		const tpc_zip_entry *x = tpc_zip_entry_at(&a, i), *y = tpc_zip_entry_at(&b, i);
		assert_string_equal(x->name, y->name);
		assert_int_equal(x->data_offset, y->data_offset);
		assert_int_equal(x->desc_len, y->desc_len);
	}
	const uint8_t *p;
	uint64_t len;
	assert_int_equal(tpc_zip_stored(&b, tpc_zip_find(&b, "data/0"), &p, &len, &e), 0);
	assert_int_equal(len, 3000);
	assert_memory_equal(p, g_payload + 5, 3000);
	tpc_zip_release(&a);
	tpc_zip_release(&b);
	/* the range must lie in the file */
	assert_int_equal(tpc_zip_open_from_map(&b, &m, at, m.size, "inside.bin", &e), TPC_EINPUT);
	/* cut short: no end record */
	tpc_err_init(&e);
	assert_int_equal(tpc_zip_open_from_map(&b, &m, at, n - 10, "inside.bin", &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "central directory"));
	assert_null(b.entries);
	tpc_map_close(&m);
	unlink(path);
	free(file);
	free(d);
}

static void test_empty_archive(void **state)
{
	(void)state;
	size_t n = 0;
	uint8_t *d = write_zip_mem("none", NULL, 0, &n);
	assert_int_equal(n, TPC_ZIP_END_LEN);
	tpc_zip z;
	open_ok(&z, d, n, "none.pt");
	assert_int_equal(tpc_zip_count(&z), 0);
	assert_string_equal(tpc_zip_prefix(&z), "");
	assert_null(tpc_zip_find(&z, "data.pkl"));
	tpc_zip_release(&z);
	free(d);
}

static void test_deflated(void **state)
{
	(void)state;
	size_t clen = 0, n = 0;
	uint8_t *c = deflate_raw(g_payload, 200000, &clen);
	spec s[] = {SPEC("a/data.pkl", "\x80\x02N.", 4), SPEC("a/big", c, clen)};
	s[1].method = TPC_ZIP_DEFLATED;
	s[1].usize = 200000;
	s[1].crc = (uint32_t)crc32(0, g_payload, 200000);
	uint8_t *d = build(s, 2, &n);
	tpc_zip z;
	tpc_err e;
	tpc_err_init(&e);
	open_ok(&z, d, n, "deflated.pt");
	const tpc_zip_entry *ent = tpc_zip_find(&z, "big");
	assert_non_null(ent);
	uint8_t *out = NULL;
	const uint8_t *p = NULL;
	uint64_t len = 0;
	assert_int_equal(tpc_zip_read(&z, ent, 1 << 20, &p, &len, &out, &e), 0);
	assert_int_equal(len, 200000);
	assert_memory_equal(p, g_payload, 200000);
	free(out);
	/* in place is refused for a compressed entry */
	assert_int_equal(tpc_zip_stored(&z, ent, &p, &len, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "compressed"));
	tpc_zip_release(&z);
	free(d);

	/* CRC mismatch on inflate */
	s[1].crc = 0x12345678;
	d = build(s, 2, &n);
	open_ok(&z, d, n, "deflated.pt");
	tpc_err_init(&e);
	assert_int_equal(tpc_zip_inflate(&z, tpc_zip_find(&z, "big"), 1 << 20, &out, &len, &e),
			 TPC_EINPUT);
	assert_non_null(strstr(e.msg, "CRC-32 mismatch"));
	assert_null(out);
	tpc_zip_release(&z);
	free(d);

	/* corrupt deflate data */
	c[0] ^= 0x06; /* block type 3: invalid */
	s[1].crc = 0;
	d = build(s, 2, &n);
	open_ok(&z, d, n, "deflated.pt");
	tpc_err_init(&e);
	assert_int_equal(tpc_zip_inflate(&z, tpc_zip_find(&z, "big"), 1 << 20, &out, &len, &e),
			 TPC_EINPUT);
	assert_non_null(strstr(e.msg, "corrupt deflate data"));
	tpc_zip_release(&z);
	free(d);
	c[0] ^= 0x06;

	/* truncated deflate stream */
	s[1].len = clen / 2;
	d = build(s, 2, &n);
	open_ok(&z, d, n, "deflated.pt");
	tpc_err_init(&e);
	assert_int_equal(tpc_zip_inflate(&z, tpc_zip_find(&z, "big"), 1 << 20, &out, &len, &e),
			 TPC_EINPUT);
	assert_non_null(strstr(e.msg, "ends before the end of the stream"));
	tpc_zip_release(&z);
	free(d);
	free(c);
}

static void test_crc(void **state)
{
	(void)state;
	size_t n = 64u << 20;
	uint8_t *p = malloc(n);
	assert_non_null(p);
	fill_random(p, n, g_seed);
	uint32_t want = (uint32_t)crc32(0, p, (uInt)n);
	assert_int_equal(tpc_crc32_parallel(p, n), want);
	assert_int_equal(tpc_crc32_parallel(p, n - 13), (uint32_t)crc32(0, p, (uInt)(n - 13)));
	assert_int_equal(tpc_crc32_update(tpc_crc32_update(0, p, 1000), p + 1000, n - 1000), want);
	assert_int_equal(tpc_crc32_parallel(p, 0), 0);
	free(p);

	/* a flipped byte in a STORED record: the CRC check finds it */
	size_t len = 0;
	uint8_t *d = sample_zip(&len);
	tpc_zip z;
	tpc_err e;
	open_ok(&z, d, len, "sample.pt");
	const tpc_zip_entry *ent = tpc_zip_find(&z, "data/0");
	d[ent->data_offset + 12345] ^= 1;
	tpc_err_init(&e);
	assert_int_equal(tpc_zip_verify_crc(&z, ent, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "CRC-32 mismatch"));
	assert_non_null(strstr(e.msg, "data/0"));
	assert_int_equal(e.offset, (int64_t)ent->data_offset);
	tpc_zip_release(&z);
	free(d);
}

static void test_crc_zero(void **state)
{
	(void)state;
	/* torch >= 2.6 with compute_crc32=False writes CRC 0: not computed */
	rec r[] = {{"data.pkl", g_payload, 100, true}, {"data/0", g_payload, 5000, true}};
	char path[1024];
	tpc_out o;
	tpc_zipw w;
	tpc_err e;
	tpc_err_init(&e);
	tmp_path(path, sizeof(path), "crc0.pt");
	assert_int_equal(tpc_out_open(&o, path, TPC_OUT_FORCE, &e), 0);
	tpc_zipw_init(&w, &o, "crc0");
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(tpc_zipw_begin(&w, r[i].name, r[i].len, NULL, &e), 0);
		assert_int_equal(tpc_zipw_write(&w, r[i].data, r[i].len, &e), 0);
		assert_int_equal(tpc_zipw_end(&w, 0, &e), 0);
	}
	assert_int_equal(tpc_zipw_finish(&w, &e), 0);
	assert_int_equal(tpc_out_commit(&o, &e), 0);
	tpc_zipw_release(&w);
	tpc_zip z;
	assert_int_equal(tpc_zip_open_from_file(&z, path, &e), 0);
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(tpc_zip_entry_at(&z, i)->crc32, 0);
		assert_int_equal(tpc_zip_verify_crc(&z, tpc_zip_entry_at(&z, i), &e), 0);
	}
	tpc_zip_release(&z);
	unlink(path);
}

static void test_writer_misuse(void **state)
{
	(void)state;
	char path[1024];
	tpc_out o;
	tpc_zipw w;
	tpc_err e;
	tmp_path(path, sizeof(path), "misuse.pt");

	/* duplicate names */
	tpc_err_init(&e);
	assert_int_equal(tpc_out_open(&o, path, TPC_OUT_FORCE, &e), 0);
	tpc_zipw_init(&w, &o, "m");
	assert_int_equal(tpc_zipw_add(&w, "a", "x", 1, &e), 0);
	assert_int_equal(tpc_zipw_add(&w, "a", "y", 1, &e), 0);
	assert_int_equal(tpc_zipw_finish(&w, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "duplicate record name 'm/a'"));
	tpc_zipw_release(&w);
	tpc_out_abort(&o);

	/* short payload */
	tpc_err_init(&e);
	assert_int_equal(tpc_out_open(&o, path, TPC_OUT_FORCE, &e), 0);
	tpc_zipw_init(&w, &o, "m");
	assert_int_equal(tpc_zipw_begin(&w, "b", 10, NULL, &e), 0);
	assert_int_equal(tpc_zipw_begin(&w, "c", 10, NULL, &e), TPC_EUSAGE); /* still open */
	tpc_err_init(&e);
	assert_int_equal(tpc_zipw_write(&w, "12345", 5, &e), 0);
	assert_int_equal(tpc_zipw_write(&w, "1234567", 7, &e), TPC_EUSAGE); /* overrun */
	tpc_err_init(&e);
	assert_int_equal(tpc_zipw_end(&w, 0, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "needs 10 payload bytes"));
	tpc_err_init(&e);
	assert_int_equal(tpc_zipw_finish(&w, &e), TPC_EUSAGE); /* failed writer stays failed */
	tpc_zipw_release(&w);
	tpc_out_abort(&o);

	/* bytes written behind the writer's back */
	tpc_err_init(&e);
	assert_int_equal(tpc_out_open(&o, path, TPC_OUT_FORCE, &e), 0);
	tpc_zipw_init(&w, &o, NULL);
	assert_int_equal(tpc_zipw_add(&w, "a", "x", 1, &e), 0);
	assert_int_equal(tpc_out_write(&o, "junk", 4, &e), 0);
	assert_int_equal(tpc_zipw_add(&w, "b", "x", 1, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "behind the writer's back"));
	tpc_zipw_release(&w);
	tpc_out_abort(&o);

	/* names */
	tpc_err_init(&e);
	assert_int_equal(tpc_out_open(&o, path, TPC_OUT_FORCE, &e), 0);
	tpc_zipw_init(&w, &o, NULL);
	assert_int_equal(tpc_zipw_add(&w, "/abs", "x", 1, &e), TPC_EUSAGE);
	tpc_err_init(&e);
	char *longname = malloc(70000);
	memset(longname, 'n', 69999);
	longname[69999] = '\0';
	assert_int_equal(tpc_zipw_add(&w, longname, "x", 1, &e), TPC_EUSAGE);
	free(longname);
	tpc_zipw_release(&w);
	tpc_out_abort(&o);

	/* the layout function itself */
	tpc_zip_plan p;
	assert_int_equal(tpc_zip_plan_record(0, 0, 1, &p), -1);
	assert_int_equal(tpc_zip_plan_record(0, 65536, 1, &p), -1);
	assert_int_equal(tpc_zip_plan_record(UINT64_MAX - 100, 10, 1000, &p), -1);
	assert_int_equal(tpc_zip_plan_record(0, 10, 5, &p), 0);
	assert_int_equal(p.data_offset, 64); /* 30 + 10 + 4 = 44, pad 20 */
	assert_int_equal(p.pad, 20);
	assert_int_equal(p.desc_len, 16);
	assert_int_equal(p.end, 64 + 5 + 16);
	/* zip64 thresholds are >= 0xFFFFFFFF, as miniz and getPadding() */
	assert_int_equal(tpc_zip_plan_record(0, 10, 0xFFFFFFFEull, &p), 0);
	assert_int_equal(p.zip64_len, 0);
	assert_int_equal(tpc_zip_plan_record(0, 10, 0xFFFFFFFFull, &p), 0);
	assert_int_equal(p.zip64_len, 20);
	assert_int_equal(p.desc_len, 24);
	assert_int_equal(p.data_offset % 64, 0);
	assert_int_equal(tpc_zip_plan_record(0xFFFFFFFFull, 10, 0, &p), 0);
	assert_int_equal(p.zip64_len, 12);
	assert_int_equal(p.desc_len, 0);
	assert_int_equal(p.data_offset % 64, 0);
	assert_int_equal(tpc_zip_plan_record(0x100000000ull, 10, 0x100000000ull, &p), 0);
	assert_int_equal(p.zip64_len, 28);
	assert_int_equal(p.data_offset % 64, 0);
	assert_int_equal(tpc_zip_central_len(10, 1, 0), 56);
	assert_int_equal(tpc_zip_central_len(10, 0x100000000ull, 0x100000000ull), 56 + 28);
}

/* ----------------------------------------------------------------------- */
/* bad files                                                                */

static void test_bad_truncated(void **state)
{
	(void)state;
	size_t n = 0;
	uint8_t *d = sample_zip(&n);
	expect_bad(d, 0, "empty");
	for (int k = 1; k < 16; k++) {
		size_t cut = n * (size_t)k / 16;
		uint8_t *t = malloc(cut);
		memcpy(t, d, cut); /* a separate buffer, so ASan sees any overread */
		expect_bad(t, cut, "looks truncated");
		free(t);
	}
	/* cut inside the end records: still "truncated" */
	expect_bad(d, n - 1, "truncated");
	expect_bad(d, n - 30, "truncated");
	/* junk after the end record is not a truncation: up to 65535 bytes of
	 * it are not part of the archive (torch loads such files), more is
	 * refused */
	size_t big = TPC_ZIP_MAX_TRAILING + 1;
	uint8_t *j = calloc(1, n + big);
	memcpy(j, d, n);
	memcpy(j + n, "junk!", 5);
	tpc_zip z;
	tpc_err e;
	tpc_err_init(&e);
	for (size_t extra = 1; extra < big; extra += extra < 8 ? 1 : 4093) {
		assert_int_equal(tpc_zip_open_from_buffer(&z, j, n + extra, "t.pt", &e), 0);
		assert_int_equal(z.trailing, extra);
		assert_int_equal(z.size, n);
		assert_int_equal(z.n, 6);
		tpc_zip_release(&z);
	}
	assert_int_equal(tpc_zip_open_from_buffer(&z, j, n + big - 1, "t.pt", &e), 0);
	assert_int_equal(z.trailing, big - 1);
	tpc_zip_release(&z);
	expect_bad(j, n + big, "65536 unexpected bytes follow the end of central directory record "
			       "(more than the 65535 that zip readers look through)");
	/* trailing bytes do not hide a truncation: cut inside the directory */
	memmove(j + n - 40, j + n, 5);
	expect_bad(j, n - 35, "looks truncated");
	free(j);
	free(d);
}

static void test_bad_not_zip(void **state)
{
	(void)state;
	static const char lfs[] = "version https://git-lfs.github.com/spec/v1\n"
				  "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
				  "size 12345\n";
	expect_bad((const uint8_t *)lfs, sizeof(lfs) - 1,
		   "this is a Git LFS pointer, not the file; run git lfs pull");
	expect_bad((const uint8_t *)"abc", 3, "not a zip archive");
	expect_bad((const uint8_t *)"\x80\x02\x8a\x0a", 4, "not a zip archive");
	tpc_zip z;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_zip_open_from_buffer(&z, NULL, 0, "zero.pt", &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "empty"));
	assert_true(tpc_zip_is_lfs_pointer((const uint8_t *)lfs, sizeof(lfs) - 1));
	assert_false(tpc_zip_is_lfs_pointer((const uint8_t *)"PK\3\4", 4));
}

static void test_bad_data_past_eof(void **state)
{
	(void)state;
	spec s[] = {SPEC("a/x", "hello", 5), SPEC("a/y", "world!", 6)};
	size_t n = 0;
	s[1].grow = 1000000; /* local and central agree on a size the file does not have */
	uint8_t *d = build(s, 2, &n);
	expect_bad(d, n, "data ends at");
	expect_bad(d, n, "but the file ends at");
	free(d);
}

static void test_bad_overlap(void **state)
{
	(void)state;
	spec s[] = {SPEC("a/x", "hello", 5), SPEC("a/y", "world!", 6), SPEC("a/z", "!", 1)};
	size_t n = 0;
	s[0].grow = 20; /* a/x's data now runs over a/y's local header */
	uint8_t *d = build(s, 3, &n);
	expect_bad(d, n, "entries 'a/x' and 'a/y' overlap");
	free(d);
	s[0].grow = 0;
	s[2].name = "a/y";        /* two central entries for one local header */
	s[2].same_offset = true;  /* (the overlap is found before the duplicate) */
	s[2].data = (const uint8_t *)"world!";
	s[2].len = 6;
	d = build(s, 3, &n);
	expect_bad(d, n, "overlap");
	free(d);
	/* the last entry running into the central directory */
	spec t[] = {SPEC("a/x", "hello", 5)};
	t[0].grow = 10;
	d = build(t, 1, &n);
	expect_bad(d, n, "overlaps the central directory");
	free(d);
}

static void test_bad_duplicate(void **state)
{
	(void)state;
	spec s[] = {SPEC("a/x", "hello", 5), SPEC("a/y", "world", 5), SPEC("a/x", "again", 5)};
	size_t n = 0;
	uint8_t *d = build(s, 3, &n);
	expect_bad(d, n, "duplicate entry name 'a/x'");
	free(d);
}

static void test_bad_encrypted(void **state)
{
	(void)state;
	spec s[] = {SPEC("a/x", "hello", 5), SPEC("a/y", "world", 5)};
	size_t n = 0;
	s[1].flags = 0x0001;
	uint8_t *d = build(s, 2, &n);
	expect_bad(d, n, "entry 'a/y' is encrypted");
	free(d);
}

static void test_bad_method(void **state)
{
	(void)state;
	spec s[] = {SPEC("a/x", "hello", 5)};
	size_t n = 0;
	s[0].method = 12;
	uint8_t *d = build(s, 1, &n);
	expect_bad(d, n, "compression method 12 (bzip2)");
	free(d);
	s[0].method = 0;
	s[0].cmethod = 8; /* central says deflated, local says stored */
	d = build(s, 1, &n);
	expect_bad(d, n, "the local header says method 0 but the central directory says 8");
	free(d);
	s[0].cmethod = -1;
	s[0].usize = 7; /* stored, but two different sizes */
	d = build(s, 1, &n);
	expect_bad(d, n, "is stored, but its compressed size 5 differs from its size 7");
	free(d);
}

static void test_bad_bomb(void **state)
{
	(void)state;
	size_t big = 64u << 20, clen = 0, n = 0;
	uint8_t *zeros = calloc(1, big);
	assert_non_null(zeros);
	uint8_t *c = deflate_raw(zeros, big, &clen);
	uint32_t crc = (uint32_t)crc32(0, zeros, (uInt)big);
	free(zeros);
	spec s[] = {SPEC("bomb/data.pkl", c, clen)};
	s[0].method = TPC_ZIP_DEFLATED;
	s[0].usize = big;
	s[0].crc = crc;
	uint8_t *d = build(s, 1, &n);
	print_message("# bomb: %zu bytes inflate to %zu\n", clen, big);
	tpc_zip z;
	tpc_err e;
	uint8_t *out = NULL;
	uint64_t len = 0;
	/* the declared size is over the cap: refused before any allocation */
	open_ok(&z, d, n, "bomb.pt");
	tpc_err_init(&e);
	assert_int_equal(tpc_zip_inflate(&z, tpc_zip_entry_at(&z, 0), 1 << 20, &out, &len, &e),
			 TPC_EINPUT);
	assert_non_null(strstr(e.msg, "entry 'bomb/data.pkl' declares 67108864 bytes uncompressed, "
				      "more than the limit of 1048576 bytes"));
	assert_null(out);
	/* under a big enough cap it inflates */
	assert_int_equal(tpc_zip_inflate(&z, tpc_zip_entry_at(&z, 0), big, &out, &len, &e), 0);
	assert_int_equal(len, big);
	free(out);
	tpc_zip_release(&z);
	free(d);

	/* the declared size lies (1 KiB): stopped at 1 KiB of output */
	s[0].usize = 1024;
	d = build(s, 1, &n);
	open_ok(&z, d, n, "bomb.pt");
	tpc_err_init(&e);
	assert_int_equal(tpc_zip_inflate(&z, tpc_zip_entry_at(&z, 0), 1 << 20, &out, &len, &e),
			 TPC_EINPUT);
	assert_non_null(strstr(e.msg, "inflates to more than its declared 1024 bytes"));
	assert_null(out);
	tpc_zip_release(&z);
	free(d);

	/* ... or claims more than there is */
	s[0].usize = big + 1;
	d = build(s, 1, &n);
	open_ok(&z, d, n, "bomb.pt");
	tpc_err_init(&e);
	assert_int_equal(tpc_zip_inflate(&z, tpc_zip_entry_at(&z, 0), big * 2, &out, &len, &e),
			 TPC_EINPUT);
	assert_non_null(strstr(e.msg, "inflates to 67108864 bytes but declares 67108865"));
	tpc_zip_release(&z);
	free(d);
	free(c);
}

static void test_bad_name_mismatch(void **state)
{
	(void)state;
	spec s[] = {SPEC("a/data.pkl", "hello", 5), SPEC("a/y", "world", 5)};
	size_t n = 0;
	s[1].cname = "a/z";
	uint8_t *d = build(s, 2, &n);
	expect_bad(d, n, "entry 'a/z': the central directory name does not match the local "
			 "header name 'a/y'");
	free(d);
}

static void test_bad_zip64_lies(void **state)
{
	(void)state;
	spec s[] = {SPEC("a/x", "hello", 5), SPEC("a/y", "world", 5)};
	size_t n = 0;
	uint8_t *d;

	/* the zip64 field claims a terabyte */
	s[1].z64 = true;
	s[1].z64_size = 1ull << 40;
	d = build(s, 2, &n);
	expect_bad(d, n, "entry 'a/y': data ends at");
	free(d);

	/* zip64 sizes inside the file that the local header contradicts */
	s[1].z64_size = 9;
	d = build(s, 2, &n);
	expect_bad(d, n, "entry 'a/y': the local header says compressed size 5 but the central "
			 "directory says 9");
	free(d);

	/* honest zip64 fields are fine */
	s[1].z64_size = 0;
	d = build(s, 2, &n);
	tpc_zip z;
	open_ok(&z, d, n, "z64.pt");
	assert_int_equal(tpc_zip_entry_at(&z, 1)->usize, 5);
	tpc_zip_release(&z);
	free(d);

	/* zip64 marker without the field */
	s[1].z64 = false;
	d = build(s, 2, &n);
	size_t cd = tpc_rd32le(d + n - 22 + 16) + 46 + 3; /* second central entry */
	tpc_wr32le(d + cd + 20, 0xFFFFFFFFu);
	expect_bad(d, n, "there is no zip64 extra field");
	free(d);

	/* writer output (descriptors): central sizes grown inside the file */
	d = sample_zip(&n);
	open_ok(&z, d, n, "sample.pt");
	const tpc_zip_entry *ent = tpc_zip_find(&z, "byteorder");
	uint64_t at = z.cd_offset;
	for (size_t i = 0; i < 1; i++) /* byteorder is the second central entry */
		at += 46 + tpc_zip_entry_at(&z, i)->name_len;
	uint64_t size = ent->usize;
	tpc_zip_release(&z);
	assert_int_equal(tpc_rd32le(d + at + 24), size);
	tpc_wr32le(d + at + 20, (uint32_t)size + 8);
	tpc_wr32le(d + at + 24, (uint32_t)size + 8);
	expect_bad(d, n, "entry 'sample/byteorder': the data descriptor after its data does not match");
	free(d);

	/* zip64 end record disagreeing with the end record */
	d = sample_zip(&n);
	uint64_t z64 = tpc_rd64le(d + n - 22 - 20 + 8);
	tpc_wr64le(d + z64 + 24, 7); /* entries: 7 instead of 6 */
	tpc_wr64le(d + z64 + 32, 7);
	expect_bad(d, n, "zip64 end of central directory record (7 entries");
	tpc_wr64le(d + z64 + 32, 6); /* on this disk 7, in all 6 */
	expect_bad(d, n, "multi-disk");
	tpc_wr64le(d + z64 + 24, 6);
	tpc_wr64le(d + z64 + 40, tpc_rd64le(d + z64 + 40) + 1); /* directory size */
	expect_bad(d, n, "disagrees with the end of central directory record");
	free(d);

	/* both lie consistently about the directory size */
	d = sample_zip(&n);
	z64 = tpc_rd64le(d + n - 22 - 20 + 8);
	tpc_wr64le(d + z64 + 40, tpc_rd64le(d + z64 + 40) + 1);
	tpc_wr32le(d + n - 22 + 12, tpc_rd32le(d + n - 22 + 12) + 1);
	expect_bad(d, n, "runs past the end records");
	/* ... or about the count */
	tpc_wr64le(d + z64 + 40, tpc_rd64le(d + z64 + 40) - 1);
	tpc_wr32le(d + n - 22 + 12, tpc_rd32le(d + n - 22 + 12) - 1);
	tpc_wr64le(d + z64 + 24, 1000);
	tpc_wr64le(d + z64 + 32, 1000);
	tpc_wr16le(d + n - 22 + 8, 1000);
	tpc_wr16le(d + n - 22 + 10, 1000);
	expect_bad(d, n, "claim 1000 entries");
	/* locator pointing nowhere */
	free(d);
	d = sample_zip(&n);
	tpc_wr64le(d + n - 22 - 20 + 8, n);
	expect_bad(d, n, "locator points at");
	free(d);
}

static void test_bad_central(void **state)
{
	(void)state;
	size_t n = 0;
	uint8_t *d = sample_zip(&n);
	tpc_zip z;
	open_ok(&z, d, n, "sample.pt");
	uint64_t cd = z.cd_offset, hdr = tpc_zip_entry_at(&z, 2)->header_offset;
	tpc_zip_release(&z);

	d[cd] = 'X'; /* central signature */
	expect_bad(d, n, "central directory entry 0 has a bad signature");
	d[cd] = 'P';
	d[hdr] = 'X'; /* local signature of data/0 */
	expect_bad(d, n, "entry 'sample/data/0': no local header at offset");
	d[hdr] = 'P';
	tpc_wr16le(d + cd + 32, 2000); /* comment length past the directory */
	expect_bad(d, n, "runs past the end of the directory");
	tpc_wr16le(d + cd + 32, 0);
	tpc_wr16le(d + cd + 34, 1); /* disk number */
	expect_bad(d, n, "multi-disk");
	tpc_wr16le(d + cd + 34, 0);
	tpc_wr32le(d + cd + 42, (uint32_t)n - 10); /* local header past the end */
	expect_bad(d, n, "runs past the end of the file");
	tpc_wr32le(d + cd + 42, 0);
	tpc_wr16le(d + cd + 28, 0); /* empty name */
	expect_bad(d, n, "empty name");
	free(d);

	/* local/central time differ: our checks pass, libzip's ZIP_CHECKCONS does not */
	spec s[] = {SPEC("a/x", "hello", 5)};
	s[0].ltime = 0x1234;
	d = build(s, 1, &n);
	expect_bad(d, n, "libzip refuses the archive: Zip archive inconsistent");
	free(d);

	/* a NUL byte in a name */
	spec t[] = {SPEC("a/x", "hello", 5), SPEC("a/yz", "world", 5)};
	d = build(t, 2, &n);
	cd = tpc_rd32le(d + n - 22 + 16) + 46 + 3 + 46 + 3; /* 'z' of the second central name */
	d[cd] = '\0';
	expect_bad(d, n, "NUL byte in its name");
	free(d);
}

static void test_prefix_rules(void **state)
{
	(void)state;
	spec s[] = {SPEC("a/data.pkl", "x", 1), SPEC("b/other", "y", 1)};
	size_t n = 0;
	uint8_t *d = build(s, 2, &n);
	tpc_zip z;
	tpc_err e;
	open_ok(&z, d, n, "mixed.pt");
	assert_string_equal(tpc_zip_prefix(&z), "a");
	assert_non_null(tpc_zip_find(&z, "data.pkl"));
	assert_null(tpc_zip_find(&z, "other"));
	assert_non_null(tpc_zip_find_raw(&z, "b/other"));
	tpc_err_init(&e);
	assert_int_equal(tpc_zip_check_prefix(&z, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "entry 'b/other' is not under the archive folder 'a/'"));
	tpc_zip_release(&z);
	free(d);

	spec t[] = {SPEC("data.pkl", "x", 1), SPEC("constants.pkl", "y", 1)};
	d = build(t, 2, &n);
	open_ok(&z, d, n, "flat.pt");
	assert_string_equal(tpc_zip_prefix(&z), "");
	assert_non_null(tpc_zip_find(&z, "data.pkl"));
	assert_true(tpc_zip_is_torchscript(&z));
	tpc_err_init(&e);
	assert_int_equal(tpc_zip_check_prefix(&z, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "not in a folder"));
	tpc_zip_release(&z);
	free(d);

	spec u[] = {SPEC("m/.data/version", "1", 1), SPEC("m/x", "y", 1)};
	d = build(u, 2, &n);
	open_ok(&z, d, n, "ts.pt");
	assert_true(tpc_zip_is_torchscript(&z)); /* .data/version without data.pkl */
	tpc_zip_release(&z);
	free(d);
	spec v[] = {SPEC("m/data.pkl", "1", 1), SPEC("m/code/__torch__/x.py", "y", 1)};
	d = build(v, 2, &n);
	open_ok(&z, d, n, "ts.pt");
	assert_true(tpc_zip_is_torchscript(&z));
	tpc_zip_release(&z);
	free(d);
}

/* ----------------------------------------------------------------------- */
/* modes for the shell tests                                                */

static int die(const tpc_err *e, const char *what)
{
	char b[2048];
	tpc_err_format(e, b, sizeof(b));
	fprintf(stderr, "test_zip: %s: %s\n", what, b);
	return 1;
}

static int write_samples(const char *dir)
{
	char path[4096];
	tpc_err e;
	tpc_err_init(&e);
	fill_random(g_payload, sizeof(g_payload), g_seed);
	static const uint8_t pkl[] = {0x80, 0x02, '}', 'q', 0x00, '.'};
	rec r[] = {
		{"data.pkl", pkl, sizeof(pkl), false},
		{"byteorder", (const uint8_t *)"little", 6, false},
		{"data/0", g_payload, sizeof(g_payload), false},
		{"data/1", NULL, 0, false},
		{"data/2", g_payload + 1000, 333, true},
		{"version", (const uint8_t *)"3\n", 2, false},
	};
	snprintf(path, sizeof(path), "%s/sample.pt", dir);
	if (write_zip(path, "sample", r, 6, &e))
		return die(&e, path);
	enum { N = 70000 };
	rec *m = calloc(N, sizeof(*m));
	char *names = malloc((size_t)N * 16);
	if (!m || !names)
		return 1;
	for (size_t i = 0; i < N; i++) {
		snprintf(names + i * 16, 16, "r/%06zu", i);
		m[i].name = names + i * 16;
		m[i].data = g_payload + i % 1000;
		m[i].len = i % 5;
	}
	snprintf(path, sizeof(path), "%s/many.pt", dir);
	int ret = write_zip(path, "many", m, N, &e);
	free(m);
	free(names);
	if (ret)
		return die(&e, path);
	snprintf(path, sizeof(path), "%s/none.zip", dir);
	if (write_zip(path, "none", NULL, 0, &e))
		return die(&e, path);
	return 0;
}

static int rewrite(const char *in, const char *out, const char *prefix)
{
	tpc_zip z;
	tpc_err e;
	rec *r = NULL;
	int ret = 0;
	tpc_err_init(&e);
	if (tpc_zip_open_from_file(&z, in, &e))
		return die(&e, in);
	bool keep = strcmp(prefix, "-") == 0;
	size_t plen = strlen(tpc_zip_prefix(&z));
	r = calloc(tpc_zip_count(&z) + 1, sizeof(*r));
	for (size_t i = 0; r && i < tpc_zip_count(&z) && !ret; i++) {
		const tpc_zip_entry *ent = tpc_zip_entry_at(&z, i);
		r[i].name = keep ? ent->name : ent->name + plen + 1;
		ret = tpc_zip_stored(&z, ent, &r[i].data, &r[i].len, &e);
	}
	if (!r || ret || write_zip(out, keep ? NULL : prefix, r, tpc_zip_count(&z), &e))
		ret = die(&e, out);
	free(r);
	tpc_zip_release(&z);
	return ret;
}

#define SLOW_BIG (0x100000000ull + 4096) /* 4 GiB + 4 KiB */

static int slow_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "test_zip --slow: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	return 1;
}

/* A record over 4 GiB, then records whose local headers are past 4 GiB. The
 * payload comes from a sparse file through tpc_out_copy (copy_file_range),
 * so the run costs ~4.3 GB of disk and no 4 GiB buffer. */
static int slow(const char *dir, const char *pkl_path)
{
	char src[4096], path[4096];
	tpc_err e;
	tpc_map m = {.fd = -1};
	tpc_out o;
	tpc_zipw w;
	tpc_zip z;
	uint8_t small[100];
	uint64_t off = 0;
	double t0 = tpc_now();
	int ret = 0;
	uint8_t *pkl = NULL;
	size_t pkl_len = 0;

	tpc_err_init(&e);
	fill_random(small, sizeof(small), g_seed);
	if (pkl_path && !(pkl = slurp(pkl_path, &pkl_len)))
		return slow_fail("cannot read %s", pkl_path);
	snprintf(src, sizeof(src), "%s/sparse.bin", dir);
	snprintf(path, sizeof(path), "%s/big.pt", dir);
	FILE *f = fopen(src, "wb");
	if (!f || fwrite("HEAD", 1, 4, f) != 4 || fseeko(f, (off_t)SLOW_BIG - 4, SEEK_SET) ||
	    fwrite("TAIL", 1, 4, f) != 4 || fclose(f))
		return slow_fail("cannot write %s", src);
	if (tpc_map_open(&m, src, &e))
		return die(&e, src);
	uint32_t crc = tpc_crc32_parallel(m.data, m.size);
	if (tpc_out_open(&o, path, TPC_OUT_FORCE, &e))
		return die(&e, path);
	tpc_zipw_init(&w, &o, "big");
	if (tpc_zipw_add(&w, "data.pkl", pkl ? pkl : small, pkl ? pkl_len : sizeof(small), &e) ||
	    tpc_zipw_begin(&w, "data/0", SLOW_BIG, &off, &e) ||
	    tpc_out_copy(&o, &m, 0, SLOW_BIG, &e) || tpc_zipw_end(&w, crc, &e) ||
	    tpc_zipw_add(&w, "data/1", small, sizeof(small), &e) ||
	    tpc_zipw_add(&w, "data/2", NULL, 0, &e) ||
	    tpc_zipw_add(&w, "version", "3\n", 2, &e) || tpc_zipw_finish(&w, &e) ||
	    tpc_out_commit(&o, &e)) {
		tpc_out_abort(&o);
		ret = die(&e, path);
	}
	tpc_zipw_release(&w);
	tpc_map_close(&m);
	unlink(src);
	free(pkl);
	if (ret)
		return ret;
	fprintf(stderr, "wrote %s in %.1f s\n", path, tpc_now() - t0);

	if (tpc_zip_open_from_file(&z, path, &e))
		return die(&e, path);
	const tpc_zip_entry *big = tpc_zip_find(&z, "data/0");
	const tpc_zip_entry *after = tpc_zip_find(&z, "data/1");
	const tpc_zip_entry *empty = tpc_zip_find(&z, "data/2");
	const uint8_t *p = NULL;
	uint64_t len = 0;
	uint64_t cursor = 0;
	for (size_t i = 0; i < tpc_zip_count(&z) && !ret; i++) {
		const tpc_zip_entry *ent = tpc_zip_entry_at(&z, i);
		tpc_zip_plan pl;
		tpc_zip_plan_record(cursor, ent->name_len, ent->usize, &pl);
		if (pl.data_offset != ent->data_offset || pl.header_offset != ent->header_offset ||
		    pl.desc_len != ent->desc_len || ent->data_offset % 64)
			ret = slow_fail("'%s': layout %llu/%llu/%u, plan %llu/%llu/%u", ent->name,
					(unsigned long long)ent->header_offset,
					(unsigned long long)ent->data_offset, ent->desc_len,
					(unsigned long long)pl.header_offset,
					(unsigned long long)pl.data_offset, pl.desc_len);
		cursor = pl.end;
	}
	if (ret)
		goto out;
	if (!big || !after || !empty || big->usize != SLOW_BIG || big->data_offset != off ||
	    big->desc_len != 24 || after->header_offset < 0x100000000ull || after->desc_len != 24 ||
	    empty->desc_len != 0 || !z.zip64) {
		ret = slow_fail("unexpected entry table");
		goto out;
	}
	/* local zip64 fields as miniz writes them: (size, 0) for the big record,
	 * (header offset) for a record that starts past 4 GiB */
	const uint8_t *x = z.data + big->header_offset + 30 + big->name_len;
	const uint8_t *y = z.data + after->header_offset + 30 + after->name_len;
	if (tpc_rd16le(x) != 1 || tpc_rd16le(x + 2) != 16 || tpc_rd64le(x + 4) != SLOW_BIG ||
	    tpc_rd64le(x + 12) != 0 || x[20] != 'F' || x[21] != 'B' || tpc_rd16le(y) != 1 ||
	    tpc_rd16le(y + 2) != 8 || tpc_rd64le(y + 4) != after->header_offset) {
		ret = slow_fail("local zip64 extra fields differ from miniz's");
		goto out;
	}
	/* the 24-byte descriptor */
	const uint8_t *dd = z.data + big->data_offset + SLOW_BIG;
	if (tpc_rd32le(dd) != 0x08074b50 || tpc_rd32le(dd + 4) != crc ||
	    tpc_rd64le(dd + 8) != SLOW_BIG || tpc_rd64le(dd + 16) != SLOW_BIG) {
		ret = slow_fail("bad zip64 data descriptor");
		goto out;
	}
	if (tpc_zip_stored(&z, big, &p, &len, &e) || memcmp(p, "HEAD", 4) ||
	    memcmp(p + len - 4, "TAIL", 4) || tpc_zip_verify_crc(&z, big, &e) ||
	    tpc_zip_stored(&z, after, &p, &len, &e) || memcmp(p, small, sizeof(small))) {
		ret = e.code ? die(&e, path) : slow_fail("payload differs");
		goto out;
	}
	fprintf(stderr, "read back and checked in %.1f s total\n", tpc_now() - t0);
out:
	tpc_zip_release(&z);
	return ret;
}

/* ----------------------------------------------------------------------- */

static int setup(void **state)
{
	(void)state;
	if (!(g_tmp = test_tmpdir()))
		return -1;
	fill_random(g_payload, sizeof(g_payload), g_seed);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	test_rmrf(g_tmp);
	free(g_tmp);
	return 0;
}

int main(int argc, char **argv)
{
	const char *s = getenv("TPC_SEED");
	g_seed = s && *s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
	fprintf(stderr, "test_zip: seed %llu (TPC_SEED to replay)\n", (unsigned long long)g_seed);
	if (argc == 3 && strcmp(argv[1], "--write-samples") == 0)
		return write_samples(argv[2]);
	if (argc == 5 && strcmp(argv[1], "--rewrite") == 0)
		return rewrite(argv[2], argv[3], argv[4]);
	if ((argc == 3 || argc == 4) && strcmp(argv[1], "--slow") == 0)
		return slow(argv[2], argc == 4 ? argv[3] : NULL);
	if (argc != 1) {
		fprintf(stderr, "usage: test_zip [--write-samples DIR | --rewrite IN OUT PREFIX | "
				"--slow DIR [PKL]]\n");
		return 2;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_corpus_torch),
		cmocka_unit_test(test_corpus_negative),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_many_entries),
		cmocka_unit_test(test_from_map),
		cmocka_unit_test(test_empty_archive),
		cmocka_unit_test(test_deflated),
		cmocka_unit_test(test_crc),
		cmocka_unit_test(test_crc_zero),
		cmocka_unit_test(test_writer_misuse),
		cmocka_unit_test(test_bad_truncated),
		cmocka_unit_test(test_bad_not_zip),
		cmocka_unit_test(test_bad_data_past_eof),
		cmocka_unit_test(test_bad_overlap),
		cmocka_unit_test(test_bad_duplicate),
		cmocka_unit_test(test_bad_encrypted),
		cmocka_unit_test(test_bad_method),
		cmocka_unit_test(test_bad_bomb),
		cmocka_unit_test(test_bad_name_mismatch),
		cmocka_unit_test(test_bad_zip64_lies),
		cmocka_unit_test(test_bad_central),
		cmocka_unit_test(test_prefix_rules),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
