/*
 * fuzz.h - helpers shared by the libFuzzer targets in tests/fuzz/.
 *
 * Every target defines LLVMFuzzerTestOneInput(data, size) and is linked two
 * ways: with clang's -fsanitize=fuzzer for `make fuzz`, and with
 * regression_driver.c (any compiler, no libFuzzer) so `make test` replays the
 * saved corpus under tests/fuzz/corpus/<target>/ in the normal and the
 * sanitizer builds.
 *
 * A target returns 0 whatever the parser says about the input: a rejection is
 * the expected outcome for almost every fuzzed input. What counts as a finding
 * is a crash, a sanitizer report, a leak, a timeout, an allocation beyond
 * libFuzzer's -malloc_limit_mb, or a broken invariant (FUZZ_CHECK), such as a
 * parser that fails without filling its tpc_err or succeeds with one filled.
 */
#ifndef TPC_FUZZ_H
#define TPC_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tpc_ckpt.h"
#include "tpc_err.h"
#include "tpc_format.h"
#include "tpc_value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant of the code under test; abort() so libFuzzer saves the input. */
#define FUZZ_CHECK(cond)                                                            \
	do {                                                                        \
		if (!(cond)) {                                                      \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
				#cond);                                             \
			abort();                                                    \
		}                                                                   \
	} while (0)

/* The status/tpc_err contract every parser follows (tpc_err.h): failure fills
 * the error with the same code and a message; success leaves it untouched. */
static inline void fuzz_check_status(int ret, const tpc_err *e)
{
	if (ret) {
		FUZZ_CHECK(ret < 0 && ret >= -5);
		FUZZ_CHECK(e->code == ret);
		FUZZ_CHECK(e->msg[0] != '\0');
		char line[4096];
		tpc_err_format(e, line, sizeof(line)); /* what the CLI prints */
		for (const char *c = line; *c; c++) /* file bytes print as '?' */
			FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f);
	} else {
		FUZZ_CHECK(e->code == 0);
	}
}

/* Bytes each target may read through tensors after a successful parse: a
 * stride-0 view can address far more bytes than the input holds, and
 * reading them all would only make the fuzzer slow. */
#define FUZZ_READ_CAP (4u << 20)

/* Exercise what commands do with a parsed checkpoint: hash every tensor
 * (the gather path for strided views, the byte swap, composites) and render
 * the object tree as `inspect --json` does. */
static inline void fuzz_consume_ckpt(tpc_ckpt *ck)
{
	tpc_err e;
	uint64_t budget = FUZZ_READ_CAP;
	for (size_t i = 0; i < ck->n; i++) {
		const tpc_tensor *t = &ck->t[i];
		uint8_t h[TPC_HASH_MAX];
		char shape[256];
		tpc_shape_str(t, shape, sizeof(shape));
		if (t->nbytes > budget)
			continue;
		budget -= t->nbytes;
		tpc_err_init(&e);
		int r = tpc_ckpt_hash_tensor(ck, t, i % 2 ? TPC_HASH_SHA256 : TPC_HASH_XXH3_128, h, &e);
		fuzz_check_status(r, &e);
	}
	if (ck->root) {
		char *j = tpc_value_to_json(ck->root, NULL, NULL);
		free(j);
	}
}

/* The input as a file: an anonymous memory file, named through /proc, for the
 * readers whose entry point takes a path (it is then mapped as a real input
 * is). Returns the fd (close it) and fills path; -1 on failure. */
static inline int fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t n)
{
	int fd = memfd_create("tpc-fuzz", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t off = 0;
	while (off < size) {
		ssize_t w = write(fd, data + off, size - off);
		if (w <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	snprintf(path, n, "/proc/self/fd/%d", fd);
	return fd;
}

/* The input as a file opened through format f's registry entry, as a user's
 * file is; check(ck) on the checkpoint when it opens. */
static inline void fuzz_open_as_file(const tpc_format *f, const uint8_t *data, size_t size, void (*check)(tpc_ckpt *))
{
	char path[64];
	int fd = fuzz_memfile(data, size, path, sizeof(path));
	if (fd < 0)
		return;
	tpc_ckpt ck;
	tpc_err e;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	int r = f->open(&ck, path, NULL, &e);
	fuzz_check_status(r, &e);
	if (!r)
		check(&ck);
	tpc_ckpt_release(&ck);
	close(fd);
}

#endif
