/* test_core.c - lib/: errors, numbers, SHA-256 and XXH3, dtypes, progress
 * bars, JSON strings, atomic and direct outputs, the input mappings, scratch
 * memory, companion files. The checkpoint model's strided views, composite
 * tensors and gathered writes are in test_core_views.c. */
#include "core_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tpc_buf.h"
#include "tpc_ckpt.h"
#include "tpc_dtype.h"
#include "tpc_err.h"
#include "tpc_extras.h"
#include "tpc_format.h"
#include "tpc_hash.h"
#include "tpc_io.h"
#include "tpc_util.h"

static void test_err_format(void **st)
{
	(void)st;
	tpc_err e;
	char buf[512];
	tpc_err_init(&e);
	assert_int_equal(TPC_CORRUPT(&e, "m\x01.pt", 0x48, "h.0.w", "data ends at 0x%x", 0x1f400), TPC_EINPUT);
	/* the first error wins */
	tpc_err_set(&e, TPC_EIO, "later");
	tpc_err_format(&e, buf, sizeof(buf));
	assert_string_equal(buf, "'m?.pt': tensor 'h.0.w': data ends at 0x1f400 (at byte offset 72, 0x48)");
	assert_int_equal(tpc_status_exit(e.code), 3);
	assert_int_equal(tpc_status_exit(TPC_EMISMATCH), 1);
	assert_int_equal(tpc_status_exit(TPC_EGPU), 5);
	assert_non_null(e.where);
	/* truncation keeps a terminator and marks it */
	tpc_err_format(&e, buf, 16);
	assert_int_equal(strlen(buf), 15);
	assert_string_equal(buf + 12, "...");
}

static void test_parse_size(void **st)
{
	(void)st;
	tpc_err e;
	uint64_t v;
	struct {
		const char *s;
		uint64_t v;
	} ok[] = {{"0", 0}, {"5GB", 5000000000ull}, {"4GiB", 4ull << 30}, {"64K", 64000}, {"64Ki", 65536},
		  {"1M", 1000000}, {"3Mi", 3u << 20}, {"1T", 1000000000000ull}, {"123", 123}, {"7B", 7}};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		tpc_err_init(&e);
		assert_int_equal(tpc_parse_size(ok[i].s, &v, &e), 0);
		assert_true(v == ok[i].v);
	}
	const char *bad[] = {"", "-1", "1.5G", "G", "1X", "1 G", "99999999999999999999", "20000000T", "1Gx"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tpc_err_init(&e);
		assert_int_equal(tpc_parse_size(bad[i], &v, &e), TPC_EUSAGE);
		assert_non_null(strstr(e.msg, "is not a size"));
	}
	tpc_err_init(&e);
	assert_int_equal(tpc_parse_u64("12", 10, &v, &e), TPC_EUSAGE);
	tpc_err_init(&e);
	assert_int_equal(tpc_parse_u64("10", 10, &v, &e), 0);
}

/* The digest of msg fed in pieces of `step` bytes (0: all at once), in hex. */
static void hash_hex(tpc_hash_alg alg, const void *msg, size_t n, size_t step, char *hx)
{
	tpc_hash h;
	tpc_err e;
	uint8_t d[TPC_HASH_MAX];
	tpc_err_init(&e);
	assert_int_equal(tpc_hash_begin(&h, alg, &e), 0);
	for (size_t off = 0; off < n; off += step ? step : n)
		tpc_hash_update(&h, (const uint8_t *)msg + off, step && n - off > step ? step : n - off);
	tpc_hash_final(&h, d);
	assert_null(h.state);
	tpc_hex(d, tpc_hash_len(alg), hx);
}

static void test_sha256(void **st)
{
	(void)st;
	char hx[2 * TPC_HASH_MAX + 1];
	/* FIPS 180-4 examples (NIST CSRC "SHA256.pdf") */
	hash_hex(TPC_HASH_SHA256, "", 0, 0, hx);
	assert_string_equal(hx, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	hash_hex(TPC_HASH_SHA256, "abc", 3, 0, hx);
	assert_string_equal(hx, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	hash_hex(TPC_HASH_SHA256, m, strlen(m), 1, hx); /* byte at a time */
	assert_string_equal(hx, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	char *a = malloc(1000000);
	assert_non_null(a);
	memset(a, 'a', 1000000);
	hash_hex(TPC_HASH_SHA256, a, 1000000, 4093, hx);
	assert_string_equal(hx, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(a);
}

static void test_xxh3_128(void **st)
{
	(void)st;
	char hx[2 * TPC_HASH_MAX + 1], one[2 * TPC_HASH_MAX + 1];
	tpc_err e;
	uint8_t d[TPC_HASH_MAX];
	/* canonical (big-endian) digests, as `xxh128sum` prints them */
	hash_hex(TPC_HASH_XXH3_128, "", 0, 0, hx);
	assert_string_equal(hx, "99aa06d3014798d86001c324468d497f");
	hash_hex(TPC_HASH_XXH3_128, "abc", 3, 0, hx);
	assert_string_equal(hx, "06b05ab6733a618578af5f94892f3950");
	uint8_t *b = malloc(10240);
	assert_non_null(b);
	for (size_t i = 0; i < 10240; i++)
		b[i] = (uint8_t)i;
	/* python3-xxhash: xxhash.xxh3_128(bytes(range(256)) * 40).hexdigest() */
	hash_hex(TPC_HASH_XXH3_128, b, 10240, 0, one);
	assert_string_equal(one, "1cb22534d0d96975c03d2231ab9348f3");
	hash_hex(TPC_HASH_XXH3_128, b, 10240, 7, hx); /* pieces across the stripes */
	assert_string_equal(hx, one);
	tpc_err_init(&e);
	assert_int_equal(tpc_hash_buf(TPC_HASH_XXH3_128, b, 10240, d, &e), 0);
	tpc_hex(d, 16, hx);
	assert_string_equal(hx, one);
	free(b);
	/* an abandoned hash frees its state; release twice is harmless */
	tpc_hash h;
	assert_int_equal(tpc_hash_begin(&h, TPC_HASH_XXH3_128, &e), 0);
	tpc_hash_update(&h, "x", 1);
	tpc_hash_release(&h);
	tpc_hash_release(&h);
	/* no algorithm is no hash */
	assert_int_equal(tpc_hash_begin(&h, TPC_HASH_NONE, &e), TPC_EUSAGE);
	assert_null(h.state);
}

static void test_hash_names(void **st)
{
	(void)st;
	tpc_hash_alg a = TPC_HASH_NONE;
	assert_true(tpc_hash_from_name("xxh3-128", &a) && a == TPC_HASH_XXH3_128);
	assert_true(tpc_hash_from_name("sha256", &a) && a == TPC_HASH_SHA256);
	assert_true(tpc_hash_from_name("none", &a) && a == TPC_HASH_NONE);
	assert_false(tpc_hash_from_name("SHA256", &a));
	assert_false(tpc_hash_from_name("xxh3", &a));
	assert_false(tpc_hash_from_name(NULL, &a));
	assert_string_equal(tpc_hash_name(TPC_HASH_XXH3_128), "xxh3-128");
	assert_string_equal(tpc_hash_name(TPC_HASH_SHA256), "sha256");
	assert_null(tpc_hash_name((tpc_hash_alg)7));
	assert_int_equal(tpc_hash_len(TPC_HASH_XXH3_128), 16);
	assert_int_equal(tpc_hash_len(TPC_HASH_SHA256), 32);
	assert_int_equal(tpc_hash_len(TPC_HASH_NONE), 0);
	uint8_t d[4];
	assert_int_equal(tpc_unhex("00ff7a10", d, 4), 0);
	assert_true(d[0] == 0 && d[1] == 0xff && d[2] == 0x7a && d[3] == 0x10);
	assert_int_equal(tpc_unhex("00FF7a10", d, 4), -1); /* lowercase only */
	assert_int_equal(tpc_unhex("00ff7a1", d, 4), -1);
	assert_int_equal(tpc_unhex("00ff7a100", d, 4), -1);
	assert_int_equal(tpc_unhex("00ff7g10", d, 4), -1);
	assert_int_equal(tpc_unhex(NULL, d, 4), -1);
}

static void test_dtypes(void **st)
{
	(void)st;
	assert_int_equal(tpc_dtype_from_st("BF16"), TPC_BF16);
	assert_int_equal(tpc_dtype_from_st("bf16"), TPC_DT_INVALID);
	assert_int_equal(tpc_dtype_from_torch("half"), TPC_F16);
	assert_int_equal(tpc_dtype_from_torch("float8_e4m3fn"), TPC_F8_E4M3);
	assert_int_equal(tpc_dtype_from_storage("BFloat16Storage"), TPC_BF16);
	assert_int_equal(tpc_dtype_parse("fp16"), TPC_F16);
	assert_int_equal(tpc_dtype_parse("F32"), TPC_F32);
	assert_int_equal(tpc_dtype_size(TPC_C64), 8);
	assert_int_equal(tpc_dtype_bits(TPC_F4), 4);
	/* safetensors sort order: every safetensors type has a distinct rank */
	for (int a = 1; a < TPC_DT_COUNT; a++)
		for (int b = a + 1; b < TPC_DT_COUNT; b++) {
			const tpc_dtype_info *x = tpc_dtype_get((tpc_dtype)a), *y = tpc_dtype_get((tpc_dtype)b);
			if (x->st && y->st)
				assert_int_not_equal(x->st_rank, y->st_rank);
		}
}

static void test_bars(void **st)
{
	(void)st;
	tpc_buf b = TPC_BUF_INIT;
	tpc_buf_bar(&b, 50, 100, 8, false);
	assert_string_equal(b.p, "####    ");
	tpc_buf_reset(&b);
	tpc_buf_bar(&b, 1, 1000, 4, false); /* never empty for a nonzero value */
	assert_string_equal(b.p, "#   ");
	tpc_buf_reset(&b);
	tpc_buf_bar(&b, 0, 0, 3, false);
	assert_string_equal(b.p, "   ");
	tpc_buf_reset(&b);
	tpc_buf_bar(&b, 9, 16, 2, true); /* 9/16 of 2 cells = 9 eighths: one full, one eighth */
	assert_string_equal(b.p, "\u2588\u258f");
	tpc_buf_reset(&b);
	tpc_buf_bar(&b, 200, 100, 2, true); /* clamped */
	assert_string_equal(b.p, "\u2588\u2588");
	tpc_buf_release(&b);
}

static void test_json_str(void **st)
{
	(void)st;
	tpc_buf b = TPC_BUF_INIT;
	tpc_buf_json_str(&b, "a\"b\\\n\x01\xc3\xa9\xf0\x9f\x98\x80", 12, true);
	assert_string_equal(b.p, "\"a\\\"b\\\\\\n\\u0001\\u00e9\\ud83d\\ude00\"");
	tpc_buf_reset(&b);
	tpc_buf_json_str(&b, "\xc3\xa9", 2, false);
	assert_string_equal(b.p, "\"\xc3\xa9\"");
	tpc_buf_release(&b);
	assert_true(tpc_utf8_valid("\xc3\xa9", 2));
	assert_false(tpc_utf8_valid("\xc0\xaf", 2));   /* overlong */
	assert_false(tpc_utf8_valid("\xed\xa0\x80", 3)); /* surrogate */
	/* XML text (JUnit): a Latin-1 path's bytes become U+FFFD, UTF-8 stays */
	tpc_buf_xml_str(&b, "caf\xe9/<\xc3\xa9>\x01\xff", 11);
	assert_string_equal(b.p, "caf\xef\xbf\xbd/&lt;\xc3\xa9&gt;?\xef\xbf\xbd");
	assert_true(tpc_utf8_valid(b.p, b.len));
	tpc_buf_release(&b);
}


static void test_atomic_output(void **st)
{
	(void)st;
	char *dir = test_tmpdir();
	char path[4200], in[4200];
	tpc_out o;
	tpc_err e;
	tpc_map m;
	snprintf(path, sizeof(path), "%s/out.bin", dir);
	snprintf(in, sizeof(in), "%s/in.bin", dir);
	assert_int_equal(test_write_file(in, "hello world", 11), 0);

	tpc_err_init(&e);
	assert_int_equal(tpc_out_open(&o, path, 0, &e), 0);
	assert_int_equal(tpc_out_write(&o, "abc", 3, &e), 0);
	/* nothing under the final name until commit */
	assert_false(tpc_exists(path));
	assert_int_equal(tpc_out_commit(&o, &e), 0);
	tpc_out_abort(&o);
	assert_true(tpc_exists(path));

	/* refuse to overwrite without force */
	assert_int_equal(tpc_out_open(&o, path, 0, &e), TPC_EUSAGE);
	if (!strstr(e.msg, "--force"))
		fail_msg("overwrite refusal says: %s", e.msg);
	/* abort removes the temporary, leaves the old file */
	tpc_err_init(&e);
	assert_int_equal(tpc_out_open(&o, path, TPC_OUT_FORCE, &e), 0);
	char *tmp = strdup(o.tmp);
	assert_int_equal(tpc_out_write(&o, "zzzz", 4, &e), 0);
	tpc_out_abort(&o);
	assert_false(tpc_exists(tmp));
	free(tmp);
	size_t n;
	uint8_t *got = test_read_file(path, &n);
	assert_int_equal(n, 3);
	free(got);

	/* an output that is an input is refused even with force */
	assert_int_equal(tpc_map_open(&m, in, &e), 0);
	assert_int_equal(tpc_out_open(&o, in, TPC_OUT_FORCE, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "also an input"));
	/* copies (kernel and fallback) */
	tpc_err_init(&e);
	for (int k = 0; k < 2; k++) {
		tpc_io_set_kernel_copy(k == 0);
		assert_int_equal(tpc_out_open(&o, path, TPC_OUT_FORCE, &e), 0);
		assert_int_equal(tpc_out_copy(&o, &m, 6, 5, &e), 0);
		assert_int_equal(tpc_out_copy(&o, &m, 0, 5, &e), 0);
		assert_int_equal(tpc_out_commit(&o, &e), 0);
		got = test_read_file(path, &n);
		assert_int_equal(n, 10);
		assert_memory_equal(got, "worldhello", 10);
		free(got);
	}
	tpc_io_set_kernel_copy(true);
	tpc_map_close(&m);
	/* missing input */
	assert_int_equal(tpc_map_open(&m, "/nonexistent/x", &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "No such file"));
	test_rmrf(dir);
	free(dir);
}

/* Leftover temporaries (tpc_out_sweep, tpc_out_open): one whose run died is
 * removed at once, however young; one a live run holds (this process's open
 * output, another open file description's lock) stays, and so do files that
 * only look like temporaries. */
static void test_sweep_temporaries(void **st)
{
	(void)st;
	char *dir = test_tmpdir();
	char p[4200], dead[4][4200], kept[3][4200];
	static const char *const dead_names[] = {".a.bin.tpc-Dead01", ".b.bin.tpc-Dead02", ".config.json.tpc-x1Y2z3", NULL};
	static const char *const kept_names[] = {".b.bin.tpc-12345", "b.bin.tpc-Dead03", ".b.bin.tpc-Dea-03"};
	tpc_out o, o2;
	tpc_err e;
	tpc_err_init(&e);
	snprintf(p, sizeof(p), "%s/a.bin", dir);
	assert_int_equal(tpc_out_open(&o, p, 0, &e), 0);
	assert_int_equal(tpc_out_write(&o, "abc", 3, &e), 0);
	for (int i = 0; dead_names[i]; i++) {
		snprintf(dead[i], sizeof(dead[i]), "%s/%s", dir, dead_names[i]);
		assert_int_equal(test_write_file(dead[i], "x", 1), 0);
	}
	for (int i = 0; i < 3; i++) {
		snprintf(kept[i], sizeof(kept[i]), "%s/%s", dir, kept_names[i]);
		assert_int_equal(test_write_file(kept[i], "x", 1), 0);
	}
	/* a live run elsewhere: its temporary locked through another open file */
	snprintf(dead[3], sizeof(dead[3]), "%s/.c.bin.tpc-Live01", dir);
	assert_int_equal(test_write_file(dead[3], "x", 1), 0);
	int lfd = open(dead[3], O_RDONLY | O_CLOEXEC);
	assert_true(lfd >= 0);
	assert_int_equal(flock(lfd, LOCK_EX), 0);
	/* a run that died without cleaning up (as after SIGKILL): its lock is gone */
	pid_t pid = fork();
	if (pid == 0) {
		char q[4200];
		snprintf(q, sizeof(q), "%s/d.bin", dir);
		_exit(tpc_out_open(&o2, q, 0, &e) || tpc_out_write(&o2, "zz", 2, &e) ? 1 : 0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	tpc_out_sweep(dir);
	for (int i = 0; dead_names[i]; i++)
		if (tpc_exists(dead[i]))
			fail_msg("dead temporary %s left", dead_names[i]);
	for (int i = 0; i < 3; i++)
		if (!tpc_exists(kept[i]))
			fail_msg("%s is no temporary but was removed", kept_names[i]);
	assert_true(tpc_exists(o.tmp));
	assert_true(tpc_exists(dead[3]));
	char *left = NULL;
	DIR *d = opendir(dir);
	for (struct dirent *de; d && (de = readdir(d));)
		if (!strncmp(de->d_name, ".d.bin.tpc-", 11))
			left = strdup(de->d_name);
	closedir(d);
	if (left)
		fail_msg("the dead child's temporary %s is left", left);
	/* this run's output commits whole after the sweep */
	assert_int_equal(tpc_out_commit(&o, &e), 0);
	size_t n;
	uint8_t *got = test_read_file(p, &n);
	assert_int_equal(n, 3);
	free(got);
	/* the lock released: the next output opened in the folder's target goes */
	close(lfd);
	snprintf(p, sizeof(p), "%s/c.bin", dir);
	assert_int_equal(tpc_out_open(&o, p, 0, &e), 0);
	assert_false(tpc_exists(dead[3]));
	tpc_out_abort(&o);
	test_rmrf(dir);
	free(dir);
}

/* Direct writes (tpc_io.c): staged sequential bytes and in-phase copies go
 * O_DIRECT where the file system takes it, their ragged ends buffered; a
 * copy, a pwrite or the commit writes out what is staged first. The file
 * must hold exactly what the calls wrote, in the order they wrote it: sized
 * ahead by the writer (tpc_out_reserve, `reserve`) or not (then the queue
 * sets the size ahead of its writes itself, tpc_dio.c reserve_ahead), the
 * commit cuts it back to the bytes written. */
static void direct_output(bool reserve)
{
	char *dir = test_tmpdir();
	char path[4200], in[4200];
	size_t insz = 40u << 20, cap = 96u << 20, at = 0;
	uint8_t *src = malloc(insz), *want = malloc(cap), *user = malloc(1u << 20);
	uint32_t x = 12345;
	assert_non_null(src);
	assert_non_null(want);
	assert_non_null(user);
	for (size_t i = 0; i < insz; i++) {
		x = x * 1103515245u + 12345u;
		src[i] = (uint8_t)(x >> 16);
	}
	for (size_t i = 0; i < (1u << 20); i++)
		user[i] = (uint8_t)(i * 7 + 3);
	snprintf(in, sizeof(in), "%s/in.bin", dir);
	snprintf(path, sizeof(path), "%s/out.bin", dir);
	assert_int_equal(test_write_file(in, src, insz), 0);
	tpc_map m;
	tpc_out o;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_map_open(&m, in, &e), 0);
	assert_int_equal(tpc_out_open(&o, path, 0, &e), 0);
	/* sized ahead, larger than what is written: the commit cuts it back */
	if (reserve)
		assert_int_equal(tpc_out_reserve(&o, cap, &e), 0);
#define PUT(p, n) (memcpy(want + at, (p), (n)), at += (n))
	/* a small header: buffered */
	assert_int_equal(tpc_out_write(&o, user, 100, &e), 0);
	PUT(user, 100);
	/* a gather of runs from the mapping: staged (head to the page buffered),
	 * crossing one full staging buffer */
	struct iovec v[3] = {{(void *)(m.data + 7), 70000}, {(void *)(m.data + 123456), 20u << 20},
			     {(void *)(m.data + 5), 1000}};
	assert_int_equal(tpc_out_writev(&o, v, 3, &e), 0);
	PUT(src + 7, 70000);
	PUT(src + 123456, 20u << 20);
	PUT(src + 5, 1000);
	/* more sequential bytes continue the staged run, small ones too */
	assert_int_equal(tpc_out_write(&o, user, 200000, &e), 0);
	PUT(user, 200000);
	assert_int_equal(tpc_out_write(&o, user + 9, 33, &e), 0);
	PUT(user + 9, 33);
	/* an in-phase copy: what is staged goes first, then direct from the mapping */
	uint64_t so = 4096 * 100 + (o.size % 4096);
	assert_int_equal(tpc_out_copy(&o, &m, so, 3u << 20, &e), 0);
	PUT(src + so, 3u << 20);
	/* a long one: several direct writes in flight at once, from the mapping */
	so = 4096 * 10 + (o.size % 4096);
	assert_int_equal(tpc_out_copy(&o, &m, so, (36u << 20) + 5, &e), 0);
	PUT(src + so, (36u << 20) + 5);
	/* queued writes never extend the file (ext4 would complete them inside
	 * io_submit): its size is ahead of them */
	struct stat fs;
	assert_int_equal(fstat(o.fd, &fs), 0);
	if (tpc_out_is_direct(&o) && tpc_io_settings()->direct_async)
		assert_true((uint64_t)fs.st_size > o.size);
	/* an out-of-phase copy: buffered */
	so = 4096 * 3000 + ((o.size + 100) % 4096);
	assert_int_equal(tpc_out_copy(&o, &m, so, (2u << 20) + 17, &e), 0);
	PUT(src + so, (2u << 20) + 17);
	/* staged again, then a pwrite back into the header flushes it */
	struct iovec z[2] = {{(void *)(m.data + 999), 65536}, {user, 300000}};
	assert_int_equal(tpc_out_writev(&o, z, 2, &e), 0);
	PUT(src + 999, 65536);
	PUT(user, 300000);
	assert_int_equal(tpc_out_pwrite(&o, "PATCHED", 7, 50, &e), 0);
	memcpy(want + 50, "PATCHED", 7);
	/* and a last staged run that the commit writes out */
	assert_int_equal(tpc_out_write(&o, user, 1u << 20, &e), 0);
	PUT(user, 1u << 20);
#undef PUT
#ifdef STATX_DIOALIGN
	struct statx sx;
	if (statx(AT_FDCWD, dir, 0, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
	    sx.stx_dio_offset_align && sx.stx_dio_offset_align <= 4096 && tpc_io_settings()->direct != 0)
		assert_true(tpc_out_is_direct(&o)); /* the direct path ran and was not refused */
#endif
	assert_int_equal(tpc_out_commit(&o, &e), 0);
	tpc_out_abort(&o);
	size_t n;
	uint8_t *got = test_read_file(path, &n);
	assert_int_equal(n, at);
	assert_memory_equal(got, want, at);
	free(got);
	tpc_map_close(&m);
	free(src);
	free(want);
	free(user);
	test_rmrf(dir);
	free(dir);
}

static void test_direct_output(void **st)
{
	(void)st;
	direct_output(true);
	direct_output(false);
}

/* tpc_out_keep_cached: ranges within a page of the last one merge; once the
 * file is committed the kept pages are in the page cache (read back with
 * POSIX_FADV_WILLNEED where direct writes left them out; polled, the read
 * is queued, not waited for). */
static void test_keep_cached(void **st)
{
	(void)st;
	char *dir = test_tmpdir();
	char path[4200];
	size_t size = 12u << 20;
	uint8_t *buf = malloc(size);
	assert_non_null(buf);
	for (size_t i = 0; i < size; i++)
		buf[i] = (uint8_t)(i * 13 + 1);
	snprintf(path, sizeof(path), "%s/kept.bin", dir);
	tpc_out o;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_out_open(&o, path, 0, &e), 0);
	assert_int_equal(tpc_out_write(&o, buf, size, &e), 0);
	tpc_out_keep_cached(&o, 100, 100);
	tpc_out_keep_cached(&o, 300, 100);  /* merged with the one before */
	tpc_out_keep_cached(&o, 4000, 10);  /* within a page of its end: merged */
	tpc_out_keep_cached(&o, 7u << 20, 10);
	tpc_out_keep_cached(&o, 9u << 20, 0); /* empty: nothing */
	assert_int_equal(o.nkeep, 2);
	assert_int_equal(o.keep[0], 100);
	assert_int_equal(o.keep[1], 4010);
	assert_int_equal(tpc_out_commit(&o, &e), 0);
	tpc_out_abort(&o);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	void *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(m != MAP_FAILED);
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char v0 = 0, v1 = 0;
	for (int tries = 0; tries < 200 && !((v0 & 1) && (v1 & 1)); tries++) {
		assert_int_equal(mincore(m, (size_t)pg, &v0), 0);
		assert_int_equal(mincore((uint8_t *)m + (7u << 20), (size_t)pg, &v1), 0);
		if (!((v0 & 1) && (v1 & 1)))
			usleep(10000);
	}
	assert_true(v0 & 1);
	assert_true(v1 & 1);
	assert_memory_equal((uint8_t *)m + (7u << 20), buf + (7u << 20), 64);
	munmap(m, size);
	close(fd);
	free(buf);
	test_rmrf(dir);
	free(dir);
}

/* Resident kB of the mapping that starts at p (/proc/self/smaps), -1 if not found. */
static long mapping_rss_kb(const void *p)
{
	char line[512], want[32];
	long kb = -1;
	bool in = false;
	FILE *f = fopen("/proc/self/smaps", "r");
	snprintf(want, sizeof(want), "%lx-", (unsigned long)(uintptr_t)p);
	while (f && fgets(line, sizeof(line), f)) {
		if (strchr(line, '-') && strchr(line, ' ') && strchr(line, '-') < strchr(line, ' '))
			in = !strncmp(line, want, strlen(want));
		else if (in && sscanf(line, "Rss: %ld kB", &kb) == 1)
			break;
	}
	if (f)
		fclose(f);
	return kb;
}

/* Does the mapping that starts at p carry VmFlags `flag` (/proc/self/smaps)?
 * -1 if the mapping or its flags are not found. */
static int mapping_has_flag(const void *p, const char *flag)
{
	char line[512], want[32];
	int r = -1;
	bool in = false;
	FILE *f = fopen("/proc/self/smaps", "r");
	snprintf(want, sizeof(want), "%lx-", (unsigned long)(uintptr_t)p);
	while (f && fgets(line, sizeof(line), f)) {
		if (strchr(line, '-') && strchr(line, ' ') && strchr(line, '-') < strchr(line, ' ')) {
			in = !strncmp(line, want, strlen(want));
		} else if (in && !strncmp(line, "VmFlags:", 8)) {
			char pat[16];
			snprintf(pat, sizeof(pat), " %s ", flag);
			line[strcspn(line, "\n")] = ' ';
			r = strstr(line + 8, pat) != NULL;
			break;
		}
	}
	if (f)
		fclose(f);
	return r;
}

/* An input that shrinks while it is mapped (another process truncates it):
 * a read past its new end is a SIGBUS, which ends the run with exit 4 and
 * the file and offset named, its temporaries removed, not a crash. */
static void test_shrunk_input(void **state)
{
	(void)state;
	char dir[] = "/tmp/tpc-shrinkXXXXXX", path[64], out[96];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/in.bin", dir);
	snprintf(out, sizeof(out), "%s/out.bin", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0 && ftruncate(fd, 3 * 4096) == 0);
	close(fd);
	tpc_map m;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_map_open(&m, path, &e), 0);
	assert_int_equal(truncate(path, 4096), 0);
	int pipefd[2];
	assert_int_equal(pipe(pipefd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pipefd[1], 2);
		tpc_io_install_signals();
		tpc_out o;
		tpc_err ce;
		tpc_err_init(&ce);
		if (tpc_out_open(&o, out, 0, &ce))
			_exit(9);
		volatile uint8_t b = m.data[2 * 4096 + 5]; /* past the new end */
		(void)b;
		_exit(0);
	}
	close(pipefd[1]);
	char msg[512] = {0};
	ssize_t got = 0, r;
	while ((r = read(pipefd[0], msg + got, sizeof(msg) - 1 - (size_t)got)) > 0)
		got += r;
	close(pipefd[0]);
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 4);
	assert_non_null(strstr(msg, path));
	assert_non_null(strstr(msg, "byte offset 8192"));
	/* no temporary of the output left in the folder */
	DIR *d = opendir(dir);
	struct dirent *de;
	int left = 0;
	while ((de = readdir(d)))
		left += de->d_name[0] == '.' && strstr(de->d_name, ".tpc-") != NULL;
	closedir(d);
	assert_int_equal(left, 0);
	tpc_map_close(&m);
	unlink(path);
	rmdir(dir);
}

/* tpc_map_drop covers whole 512-page blocks: a fault can map a whole large
 * folio around the touched byte, and all of it must go. */
static void test_map_drop(void **st)
{
	(void)st;
	char *dir = test_tmpdir();
	char path[4200];
	long pg = sysconf(_SC_PAGESIZE);
	size_t block = (size_t)pg * 512, size = 4 * block + 100;
	uint8_t *buf = calloc(1, size);
	tpc_map m;
	tpc_err e;
	assert_non_null(buf);
	snprintf(path, sizeof(path), "%s/in.bin", dir);
	assert_int_equal(test_write_file(path, buf, size), 0);
	tpc_err_init(&e);
	assert_int_equal(tpc_map_open(&m, path, &e), 0);
	volatile uint8_t sum = 0;
	for (size_t i = 0; i < size; i += (size_t)pg)
		sum += m.data[i];
	long all = mapping_rss_kb(m.data);
	if (all < 0) {
		print_message("# no /proc/self/smaps: skipped\n");
	} else {
		assert_int_equal(all, (long)((4 * block + (size_t)pg) / 1024));
		/* 10 bytes inside block 1: all of block 1 goes, nothing else */
		tpc_map_drop(&m, block + 100, 10);
		assert_int_equal(mapping_rss_kb(m.data), all - (long)(block / 1024));
		/* the tail: the last block and the partial page after it, within the mapping */
		tpc_map_drop(&m, 4 * block + 50, 10);
		assert_int_equal(mapping_rss_kb(m.data), all - (long)((block + (size_t)pg) / 1024));
		/* across a block boundary: both blocks */
		tpc_map_drop(&m, 3 * block - 1, 2);
		assert_int_equal(mapping_rss_kb(m.data), (long)(block / 1024));
	}
	tpc_map_close(&m);
	/* a file of one block or less keeps its pages: a drop would be all of
	 * it, faulted back in by the next read */
	assert_int_equal(test_write_file(path, buf, block), 0);
	assert_int_equal(tpc_map_open(&m, path, &e), 0);
	for (size_t i = 0; i < block; i += (size_t)pg)
		sum += m.data[i];
	if (all >= 0) {
		tpc_map_drop(&m, 100, 10);
		assert_int_equal(mapping_rss_kb(m.data), (long)(block / 1024));
	}
	/* a walk over records far apart: no read-around (smaps' "rr", MADV_RANDOM) */
	int rr = mapping_has_flag(m.data, "rr");
	tpc_map_advise_random(&m);
	if (rr >= 0) {
		assert_int_equal(rr, 0);
		assert_int_equal(mapping_has_flag(m.data, "rr"), 1);
	}
	assert_int_equal(m.data[block - 1], 0);
	tpc_map_close(&m);
	free(buf);
	test_rmrf(dir);
	free(dir);
}

/* Scratch buffers: small ones are plain allocations of their size; those of
 * 1 MiB and more come back from the pool once given back (their pages
 * touched once), at least as large as asked and 2 MiB aligned. */
static void test_scratch(void **st)
{
	(void)st;
	size_t n1 = 0, n2 = 0, n3 = 0;
	uint8_t *s = tpc_scratch_get(100, &n1);
	assert_non_null(s);
	assert_int_equal(n1, 100);
	memset(s, 1, n1);
	tpc_scratch_put(s, n1);
	/* larger than anything the other tests leave in the pool */
	uint8_t *a = tpc_scratch_get((30u << 20) + 1, &n2);
	assert_non_null(a);
	assert_true(n2 >= (30u << 20) + 1);
	assert_int_equal((uintptr_t)a % (2u << 20), 0);
	memset(a, 7, n2);
	tpc_scratch_put(a, n2);
	uint8_t *b = tpc_scratch_get(30u << 20, &n3);
	assert_non_null(b);
	assert_ptr_equal(b, a); /* the pooled one, not new memory */
	assert_int_equal(n3, n2);
	tpc_scratch_put(b, n3);
	tpc_scratch_put(NULL, 0);
}

/* Companion files: chosen by name, copied byte for byte, config.json edited on request. */
/* lib/ knows no format: the weight names companions leave out come from
 * whatever formats/ registers (this stand-in: two of its endings and a part
 * file), so a format registered later is never a companion either */
static int stub_open(tpc_ckpt *ck, const char *path, const tpc_open_opts *o, tpc_err *e)
{
	(void)ck, (void)o;
	return tpc_err_at(e, TPC_EINPUT, path, NULL, "test stand-in format");
}

static void test_extras(void **st)
{
	static const char *const exts[] = {".safetensors", ".bin", NULL}, *const parts[] = {".index.json", NULL};
	static const tpc_format stub = {.name = "test-weights", .open = stub_open, .exts = exts, .part_exts = parts};
	assert_true(tpc_extras_is_companion("x.weights"));
	assert_int_equal(tpc_format_register(&stub), 0);
	assert_false(tpc_extras_is_companion("model.safetensors.index.json"));
	(void)st;
	char *dir = test_tmpdir();
	char src[4200], dst[4200], p[4300];
	const char *files[] = {"config.json", "tokenizer.json", "tokenizer.model", "README.md",
			       "model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", ".hidden"};
	snprintf(src, sizeof(src), "%s/in", dir);
	snprintf(dst, sizeof(dst), "%s/out", dir);
	mkdir(src, 0777);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", src, files[i]);
		const char *body = !strcmp(files[i], "config.json") ? "{\"hidden_size\": 64, \"torch_dtype\": \"float32\"}"
										: files[i];
		assert_int_equal(test_write_file(p, body, strlen(body)), 0);
	}
	assert_true(tpc_extras_is_companion("generation_config.json"));
	assert_false(tpc_extras_is_companion("model-00001-of-00002.safetensors"));
	assert_false(tpc_extras_is_companion("tpconv-manifest.json"));
	char *sd = tpc_extras_source_dir(src);
	assert_string_equal(sd, src);
	free(sd);
	snprintf(p, sizeof(p), "%s/model.safetensors", src);
	assert_null(tpc_extras_source_dir(p));
	tpc_err e;
	size_t n = 0;
	tpc_extras_opts o = {.torch_dtype = "bfloat16", .config_merge = "{\"mapping\": {\"tp_size\": 2}, \"tpconv\": {}}"};
	tpc_err_init(&e);
	assert_int_equal(tpc_extras_copy(src, dst, &o, &n, &e), 0);
	assert_int_equal(n, 4);
	size_t len = 0;
	snprintf(p, sizeof(p), "%s/tokenizer.model", dst);
	uint8_t *got = test_read_file(p, &len);
	assert_int_equal(len, strlen("tokenizer.model"));
	free(got);
	snprintf(p, sizeof(p), "%s/model.safetensors", dst);
	assert_false(tpc_exists(p));
	snprintf(p, sizeof(p), "%s/config.json", dst);
	got = test_read_file(p, &len);
	got = realloc(got, len + 1);
	got[len] = 0;
	assert_non_null(strstr((char *)got, "\"torch_dtype\": \"bfloat16\""));
	assert_non_null(strstr((char *)got, "\"tp_size\": 2"));
	assert_non_null(strstr((char *)got, "\"hidden_size\": 64"));
	free(got);
	/* a second copy refuses to overwrite */
	assert_int_equal(tpc_extras_copy(src, dst, NULL, &n, &e), TPC_EUSAGE);
	/* merging back: the members come out again where the marker is there... */
	static const char *const drop[] = {"mapping", "tpconv", NULL};
	tpc_extras_opts back = {.config_drop = drop, .config_marker = "tpconv"};
	char dst2[4200];
	snprintf(dst2, sizeof(dst2), "%s/back", dir);
	assert_int_equal(tpc_extras_copy(dst, dst2, &back, &n, &e), 0);
	assert_int_equal(n, 4);
	snprintf(p, sizeof(p), "%s/config.json", dst2);
	got = test_read_file(p, &len);
	got = realloc(got, len + 1);
	got[len] = 0;
	assert_null(strstr((char *)got, "mapping"));
	assert_null(strstr((char *)got, "tpconv"));
	assert_non_null(strstr((char *)got, "\"hidden_size\": 64"));
	free(got);
	/* ...and a config without it (an engine config from elsewhere) stays out */
	snprintf(dst2, sizeof(dst2), "%s/foreign", dir);
	assert_int_equal(tpc_extras_copy(src, dst2, &back, &n, &e), 0);
	assert_int_equal(n, 3);
	snprintf(p, sizeof(p), "%s/config.json", dst2);
	assert_false(tpc_exists(p));
	test_rmrf(dir);
	free(dir);
}

/* config.json rewritten (a cast, TensorRT-LLM's "mapping" in and out) keeps
 * every number as the model wrote it: cJSON alone prints 30.0 as 30, which
 * transformers 5 refuses for a float field (final_logit_softcapping). */
static void test_extras_config_numbers(void **st)
{
	(void)st;
	char *dir = test_tmpdir();
	char src[4200], dst[4200], back[4200], p[4300];
	static const char cfg[] =
		"{\"final_logit_softcapping\": 30.0, \"attention_dropout\": 0.0, \"rms_norm_eps\": 1e-06,\n"
		" \"note\": \"a \\\"2.0\\\" in 3 words -1\", \"big\": 12345678901234567890, \"neg\": -5E+2,\n"
		" \"rope_parameters\": {\"rope_theta\": 10000.0, \"factor\": [1.0, 2, -0.50]}, \"flag\": true,\n"
		" \"hidden_size\": 64, \"torch_dtype\": \"float32\", \"x\": null}";
	snprintf(src, sizeof(src), "%s/in", dir);
	snprintf(dst, sizeof(dst), "%s/out", dir);
	snprintf(back, sizeof(back), "%s/back", dir);
	mkdir(src, 0777);
	snprintf(p, sizeof(p), "%s/config.json", src);
	assert_int_equal(test_write_file(p, cfg, strlen(cfg)), 0);
	static const char *const drop[] = {"mapping", "tpconv", NULL};
	tpc_extras_opts o = {.torch_dtype = "bfloat16", .config_merge = "{\"mapping\": {\"tp_size\": 2}, \"tpconv\": {}}"};
	tpc_extras_opts undo = {.config_drop = drop, .config_marker = "tpconv"};
	tpc_err e;
	size_t n = 0, len = 0;
	tpc_err_init(&e);
	assert_int_equal(tpc_extras_copy(src, dst, &o, &n, &e), 0);
	assert_int_equal(tpc_extras_copy(dst, back, &undo, &n, &e), 0);
	const char *dirs[] = {dst, back};
	for (int d = 0; d < 2; d++) {
		snprintf(p, sizeof(p), "%s/config.json", dirs[d]);
		char *got = (char *)test_read_file(p, &len);
		got = realloc(got, len + 1);
		got[len] = 0;
		static const char *const kept[] = {"\"final_logit_softcapping\": 30.0,", "\"attention_dropout\": 0.0,",
						   "\"rms_norm_eps\": 1e-06,", "\"big\": 12345678901234567890,",
						   "\"neg\": -5E+2,", "\"rope_theta\": 10000.0,", "[\n      1.0,\n      2,\n      -0.50\n    ]",
						   "\"a \\\"2.0\\\" in 3 words -1\"", "\"hidden_size\": 64,",
						   "\"torch_dtype\": \"bfloat16\""};
		for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
			if (!strstr(got, kept[i]))
				fail_msg("%s: no %s in\n%s", p, kept[i], got);
		assert_true((strstr(got, "\"tp_size\": 2") != NULL) == (d == 0));
		free(got);
	}
	test_rmrf(dir);
	free(dir);
}

/* A cast names the new dtype under both keys a config may use: transformers 5
 * writes "dtype" and reads it before the older "torch_dtype", so a cast that
 * left "dtype": "float32" made from_pretrained(dtype="auto") upcast bf16 weights. */
static void test_extras_config_dtype(void **st)
{
	(void)st;
	char *dir = test_tmpdir();
	char src[4200], dst[4200], p[4300];
	static const char *const cfgs[] = {"{\"dtype\": \"float32\", \"hidden_size\": 64}",
					   "{\"torch_dtype\": \"float32\", \"dtype\": \"float32\"}",
					   "{\"hidden_size\": 64}"};
	static const char *const want[][2] = {{"\"dtype\": \"bfloat16\"", NULL},
					      {"\"dtype\": \"bfloat16\"", "\"torch_dtype\": \"bfloat16\""},
					      {"\"torch_dtype\": \"bfloat16\"", NULL}};
	tpc_extras_opts o = {.torch_dtype = "bfloat16"};
	for (int i = 0; i < 3; i++) {
		snprintf(src, sizeof(src), "%s/in%d", dir, i);
		snprintf(dst, sizeof(dst), "%s/out%d", dir, i);
		mkdir(src, 0777);
		snprintf(p, sizeof(p), "%s/config.json", src);
		assert_int_equal(test_write_file(p, cfgs[i], strlen(cfgs[i])), 0);
		tpc_err e;
		size_t n = 0, len = 0;
		tpc_err_init(&e);
		assert_int_equal(tpc_extras_copy(src, dst, &o, &n, &e), 0);
		snprintf(p, sizeof(p), "%s/config.json", dst);
		char *got = (char *)test_read_file(p, &len);
		got = realloc(got, len + 1);
		got[len] = 0;
		for (int k = 0; k < 2; k++)
			if (want[i][k] && !strstr(got, want[i][k]))
				fail_msg("config %d: no %s in\n%s", i, want[i][k], got);
		assert_null(strstr(got, "float32"));
		free(got);
	}
	test_rmrf(dir);
	free(dir);
}

/* Model chunk v of stage p's first layer (get_transformer_layer_offset,
 * even stages): 4 layers over pp 2 x vpp 2 interleave 0, 1 | 2, 3. */
static void test_megatron_chunk_layer(void **st)
{
	(void)st;
	assert_int_equal(tpc_megatron_chunk_first_layer(4, 2, 2, 0, 0), 0);
	assert_int_equal(tpc_megatron_chunk_first_layer(4, 2, 2, 1, 0), 1);
	assert_int_equal(tpc_megatron_chunk_first_layer(4, 2, 2, 0, 1), 2);
	assert_int_equal(tpc_megatron_chunk_first_layer(4, 2, 2, 1, 1), 3);
	assert_int_equal(tpc_megatron_chunk_first_layer(16, 4, 2, 3, 1), 8 + 6);
	assert_int_equal(tpc_megatron_chunk_first_layer(12, 3, 1, 2, 0), 8);
	assert_int_equal(tpc_megatron_chunk_first_layer(12, 0, 1, 2, 0), 0);
}

int main(void)
{
	core_test_io_config();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_err_format),
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_sha256),
		cmocka_unit_test(test_xxh3_128),
		cmocka_unit_test(test_hash_names),
		cmocka_unit_test(test_dtypes),
		cmocka_unit_test(test_json_str),
		cmocka_unit_test(test_bars),
		cmocka_unit_test(test_atomic_output),
		cmocka_unit_test(test_sweep_temporaries),
		cmocka_unit_test(test_direct_output),
		cmocka_unit_test(test_keep_cached),
		cmocka_unit_test(test_extras),
		cmocka_unit_test(test_extras_config_numbers),
		cmocka_unit_test(test_extras_config_dtype),
		cmocka_unit_test(test_map_drop),
		cmocka_unit_test(test_shrunk_input),
		cmocka_unit_test(test_scratch),
		cmocka_unit_test(test_megatron_chunk_layer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
