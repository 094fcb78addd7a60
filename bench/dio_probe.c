/* dio_probe.c - what an O_DIRECT write costs depending on the memory it is
 * written from. Copies FILE to OUT in STEP-MiB direct writes, the source
 * bytes taken from:
 *   map   FILE's read-only mapping (page-cache folios, as lib/tpc_io.c's
 *         direct copies do)
 *   small a buffer of 4 KiB pages, filled with memcpy from the mapping
 *   huge  the same in a 2 MiB-aligned buffer asked for transparent huge
 *         pages (MADV_HUGEPAGE; tpc_io.c's staging buffers)
 * and prints the time inside the writes, the fsync after them and the rate
 * of the whole. A direct write goes out in requests of at most the device's
 * max_segments memory segments (/sys/block/DEV/queue/max_segments), one per
 * physically contiguous piece, so the buffer's page size sets the request
 * size. Run each mode more than once, interleaved: the disk varies.
 * usage: cc -O2 bench/dio_probe.c -o /tmp/dio_probe &&
 *        /tmp/dio_probe FILE OUT map|small|huge [STEP_MIB=8] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s FILE OUT map|small|huge [STEP_MIB]\n", argv[0]);
		return 2;
	}
	const char *mode = argv[3];
	size_t step = (size_t)(argc > 4 ? atoi(argv[4]) : 8) << 20;
	int fd = open(argv[1], O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || !step) {
		perror(argv[1]);
		return 1;
	}
	size_t n = (size_t)st.st_size & ~(step - 1);
	const unsigned char *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	int o = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	unsigned char *buf = NULL;
	if (m == MAP_FAILED || o < 0 || posix_memalign((void **)&buf, 2u << 20, step) != 0) {
		perror("setup");
		return 1;
	}
	if (!strcmp(mode, "huge"))
		madvise(buf, step, MADV_HUGEPAGE);
	else if (!strcmp(mode, "small"))
		madvise(buf, step, MADV_NOHUGEPAGE);
	else if (strcmp(mode, "map")) {
		fprintf(stderr, "mode: map, small or huge\n");
		return 2;
	}
	double t0 = now(), tw = 0;
	for (size_t off = 0; off < n; off += step) {
		const unsigned char *p = m + off;
		if (strcmp(mode, "map")) {
			memcpy(buf, m + off, step);
			p = buf;
		}
		double a = now();
		if (pwrite(o, p, step, (off_t)off) != (ssize_t)step) {
			perror("pwrite");
			return 1;
		}
		tw += now() - a;
		madvise((void *)(m + off), step, MADV_DONTNEED);
	}
	double t1 = now();
	fsync(o);
	double t2 = now();
	printf("%-5s %zu MiB writes: %.2f GB, writes %.2f s, other %.2f s, fsync %.2f s: %.2f GB/s\n", mode,
	       step >> 20, (double)n / 1e9, tw, t1 - t0 - tw, t2 - t1, (double)n / 1e9 / (t2 - t0));
	unlink(argv[2]);
	return 0;
}
