/*
 * regression_driver.c - replay saved fuzz inputs without libFuzzer (zstd's
 * tests/fuzz/regression_driver.c): link it with one fuzz_*.c target and any
 * compiler, then run it on files or folders. Each file is read whole into an
 * exact-size heap buffer (so AddressSanitizer sees overreads) and passed to
 * LLVMFuzzerTestOneInput once.
 *
 * usage: replay_<target> PATH...     (a folder means every file in it, sorted)
 *
 * Output is TAP: one line per PATH with the number of inputs replayed. A
 * crash or sanitizer report kills the process, which fails the test; the
 * name of the input being replayed is printed to stderr first, so the
 * failing file is known.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *buf;
	size_t n;
	if (!f) {
		fprintf(stderr, "replay: cannot open '%s': %s\n", path, strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &st) != 0 || st.st_size < 0) {
		fclose(f);
		return -1;
	}
	n = (size_t)st.st_size;
	buf = malloc(n ? n : 1);
	if (!buf || fread(buf, 1, n, f) != n) {
		fprintf(stderr, "replay: cannot read '%s'\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	fprintf(stderr, "replay: %s\n", path);
	LLVMFuzzerTestOneInput(buf, n); /* exact size: a read past n is a heap overflow */
	free(buf);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replay `path` (a file, or every regular file of a folder); returns the
 * number of inputs replayed, or -1. */
static long replay_path(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		fprintf(stderr, "replay: '%s': %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path) ? -1 : 1;
	DIR *d = opendir(path);
	if (!d)
		return -1;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			char **nn = realloc(names, cap * sizeof(*names));
			if (!nn)
				break;
			names = nn;
		}
		size_t l = strlen(path) + strlen(de->d_name) + 2;
		names[n] = malloc(l);
		if (!names[n])
			break;
		snprintf(names[n], l, "%s/%s", path, de->d_name);
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	long count = 0;
	for (size_t i = 0; i < n; i++) {
		if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
			if (replay_file(names[i]))
				count = -1;
			else if (count >= 0)
				count++;
		}
		free(names[i]);
	}
	free(names);
	return count;
}

int main(int argc, char **argv)
{
	int failed = 0;
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE-OR-FOLDER...\n", argv[0]);
		return 2;
	}
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	printf("1..%d\n", argc - 1);
	for (int i = 1; i < argc; i++) {
		long n = replay_path(argv[i]);
		if (n > 0) {
			printf("ok %d - %ld inputs from %s\n", i, n, argv[i]);
		} else {
			printf("not ok %d - %s: %s\n", i, argv[i], n == 0 ? "no inputs" : "unreadable");
			failed = 1;
		}
		fflush(stdout);
	}
	return failed;
}
