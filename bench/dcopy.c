/* dcopy.c - the direct-write copy of a file: the second reference of
 * bench/floor.sh, beside the in-kernel copy (kcopy.py).
 *
 * The in-kernel copy (copy_file_range) puts every byte into new page-cache
 * folios of the output, and on the bench VM that first touch of new memory
 * moves with what the host has taken back (free page reporting): the same
 * 4.74 GB copy measured 3.3 s in one hour and 5.5-10.9 s in another. This
 * copy moves the same bytes the way tpconv's writers do when the input is
 * cached (lib/tpc_io.c): pread into 8 MiB buffers that are 2 MiB aligned and
 * asked for transparent huge pages, O_DIRECT writes of them through a Linux
 * AIO queue DEPTH deep (the file's size set first, so no write extends it),
 * the ragged tail written buffered, then fsync. It has no tensor to cut, no
 * checksum and no header: what it takes is what the disk and the page cache
 * take to move the bytes, so a step's ratio to it is the step's own cost.
 * Buffers are reused from the first lap on (their pages touched once).
 *
 * usage: cc -O2 bench/dcopy.c -o dcopy && dcopy SRC DST [DEPTH=4]
 * prints the bytes, the seconds in the copy and in the fsync. Exit 1 on any
 * error (the file system refuses O_DIRECT: EINVAL, said so). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define STEP (8u << 20)
#define MAXQ 32

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "dcopy: %s: %s\n", what, strerror(err));
	return 1;
}

/* Read len bytes at off into p (whole, or fail). */
static int read_all(int fd, uint8_t *p, size_t len, off_t off)
{
	while (len) {
		ssize_t k = pread(fd, p, len, off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? errno : EIO;
		p += k;
		off += k;
		len -= (size_t)k;
	}
	return 0;
}

/* Wait for at least min writes in flight; each must have written all. */
static int reap(aio_context_t ctx, long min, int *fly, int *freeq, int *nfree)
{
	struct io_event ev[MAXQ];
	long k;
	do
		k = syscall(SYS_io_getevents, ctx, min, (long)MAXQ, ev, NULL);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return errno;
	for (long j = 0; j < k; j++) {
		if (ev[j].res != (int64_t)STEP)
			return ev[j].res < 0 ? (int)-ev[j].res : EIO;
		freeq[(*nfree)++] = (int)ev[j].data;
		(*fly)--;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s SRC DST [DEPTH]\n", argv[0]);
		return 2;
	}
	int depth = argc > 3 ? atoi(argv[3]) : 4;
	if (depth < 1 || depth > MAXQ)
		depth = 4;
	int in = open(argv[1], O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (in < 0 || fstat(in, &st) != 0)
		return fail(argv[1], errno);
	int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int dout = out < 0 ? -1 : open(argv[2], O_WRONLY | O_DIRECT | O_CLOEXEC);
	if (out < 0 || dout < 0)
		return fail(argv[2], errno);
	uint64_t size = (uint64_t)st.st_size, whole = size & ~(uint64_t)(STEP - 1);
	uint8_t *buf[MAXQ];
	int freeq[MAXQ], nfree = 0, fly = 0, r = 0;
	struct iocb cb[MAXQ];
	aio_context_t ctx = 0;
	for (int i = 0; i < depth; i++) {
		if (posix_memalign((void **)&buf[i], 2u << 20, STEP) != 0)
			return fail("buffers", ENOMEM);
		(void)madvise(buf[i], STEP, MADV_HUGEPAGE);
		freeq[nfree++] = i;
	}
	if (syscall(SYS_io_setup, (long)depth, &ctx) != 0)
		return fail("io_setup", errno);
	double t0 = now();
	if (ftruncate(out, (off_t)size) != 0)
		return fail(argv[2], errno);
	for (uint64_t off = 0; off < whole && !r;) {
		if (!nfree && (r = reap(ctx, 1, &fly, freeq, &nfree)))
			break;
		int i = freeq[--nfree];
		if ((r = read_all(in, buf[i], STEP, (off_t)off)))
			break;
		struct iocb *p = &cb[i];
		memset(p, 0, sizeof(*p));
		p->aio_data = (uint64_t)i;
		p->aio_lio_opcode = IOCB_CMD_PWRITE;
		p->aio_fildes = (uint32_t)dout;
		p->aio_buf = (uint64_t)(uintptr_t)buf[i];
		p->aio_nbytes = STEP;
		p->aio_offset = (int64_t)off;
		long k;
		do
			k = syscall(SYS_io_submit, ctx, 1L, &p);
		while (k < 0 && errno == EINTR);
		if (k != 1) {
			r = k < 0 ? errno : EIO;
			break;
		}
		fly++;
		off += STEP;
	}
	while (fly && !r)
		r = reap(ctx, fly, &fly, freeq, &nfree);
	if (!r && size > whole) { /* the ragged tail, buffered */
		size_t n = (size_t)(size - whole);
		r = read_all(in, buf[0], n, (off_t)whole);
		if (!r && pwrite(out, buf[0], n, (off_t)whole) != (ssize_t)n)
			r = errno ? errno : EIO;
	}
	if (r)
		return fail(r == EINVAL ? "the file system refuses O_DIRECT writes" : argv[2], r);
	double t1 = now();
	if (fsync(out) != 0)
		return fail("fsync", errno);
	double t2 = now();
	printf("%.2f GB copied in %.2f s, fsync %.2f s\n", (double)size / 1e9, t1 - t0, t2 - t1);
	return 0;
}
