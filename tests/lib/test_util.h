/* test_util.h - helpers shared by the cmocka tests. */
#ifndef TPC_TEST_UTIL_H
#define TPC_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* Root of ../shared/corpus (env TPC_CORPUS, set by meson). */
static inline const char *test_corpus(void)
{
	const char *c = getenv("TPC_CORPUS");
	return c ? c : "../../../../shared/corpus";
}

/* A fresh temporary directory (mkdtemp under TMPDIR); caller frees. */
static inline char *test_tmpdir(void)
{
	const char *t = getenv("TMPDIR");
	char *p = malloc(4096);
	snprintf(p, 4096, "%s/tpc-test-XXXXXX", t ? t : "/tmp");
	if (!mkdtemp(p)) {
		free(p);
		return NULL;
	}
	return p;
}

static inline void test_rmrf(const char *dir)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", dir);
}

static inline int test_write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	size_t w = fwrite(p, 1, n, f);
	fclose(f);
	return w == n ? 0 : -1;
}

/* Read a whole file; caller frees. */
static inline uint8_t *test_read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long l = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *p = malloc((size_t)l + 1);
	if (fread(p, 1, (size_t)l, f) != (size_t)l) {
		free(p);
		fclose(f);
		return NULL;
	}
	fclose(f);
	*n = (size_t)l;
	return p;
}

#endif
