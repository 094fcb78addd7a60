/* tpc_dio.c - direct writes for tpc_out (O_DIRECT, a Linux AIO queue,
 * staging buffers) and the pool of touched buffers; see tpc_dio.h. */
#include "tpc_dio.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <linux/aio_abi.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define DIO_MIN (1u << 20)    /* smaller copies stay buffered */
/* Bytes per direct write, and per staging buffer. 4 MiB: a virtio disk
 * takes at most 4 MiB a request (max_sectors_kb), so larger writes are cut
 * there anyway, and every staging buffer is new memory whose first touch is
 * the costly part of it, so larger buffers raise the resident set at the
 * same speed (measured: BENCHMARKS.md). With DIO_DEPTH writes in flight and
 * DIO_BUFS buffers the resident set holds at most 16 MiB of source pages and
 * 8 MiB of buffers per output. */
#define DIO_STEP (4u << 20)
#define DIO_PAGE 4096u        /* direct ranges are whole pages of the output */
#define STAGE_MIN (64u << 10) /* a sequential write this large starts staging */
/* Staging buffers are 2 MiB aligned and asked for transparent huge pages.
 * A direct write is cut into requests of at most max_segments memory
 * segments, one per physically contiguous piece, so from 4 KiB pages it goes
 * out in much smaller requests than from huge pages, and takes the disk far
 * longer (measured: BENCHMARKS.md; bench/dio_probe.c). Writes from the
 * input's mapping come from its page-cache folios, often large already. */
#define DIO_HUGE (2u << 20)
#define DIO_DEPTH 4           /* direct writes in flight per output */
#define DIO_BUFS 2            /* staging buffers per output */
/* A queued write that would end past the file's size is preceded by a
 * size RESERVE_AHEAD further on (reserve_ahead). */
#define RESERVE_AHEAD (64u << 20)

enum { SLOT_FREE, SLOT_STAGE, SLOT_FLY };

/* ---- the buffer pool ---- */

/* Staging and scratch buffers outlive their output: a shard set's writer
 * threads open one rank file after another, and a buffer freed with its file
 * (8 MiB is an mmap of glibc's) came back as new memory for the next one,
 * zeroed and, on a VM with free page reporting, often faulted in from the
 * host again (measured: BENCHMARKS.md). Released buffers wait here for the
 * next output, up to POOL_BYTES of them (about what the writers that run at
 * once hold); the rest are freed. Each is 2 MiB aligned and asked for
 * transparent huge pages. */
#define POOL_MAX 32
#define POOL_BYTES (128u << 20)

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uint8_t *p;
	size_t len;
} pool[POOL_MAX];
static int npool;
static size_t pool_bytes;

uint8_t *tpc__buf_get(size_t n, size_t *len)
{
	uint8_t *b = NULL;
	int best = -1;
	pthread_mutex_lock(&pool_lock);
	for (int i = 0; i < npool; i++)
		if (pool[i].len >= n && (best < 0 || pool[i].len < pool[best].len))
			best = i;
	if (best >= 0) {
		b = pool[best].p;
		*len = pool[best].len;
		pool_bytes -= pool[best].len;
		pool[best] = pool[--npool];
	}
	pthread_mutex_unlock(&pool_lock);
	if (b)
		return b;
	n = (n + DIO_HUGE - 1) & ~(size_t)(DIO_HUGE - 1);
	if (posix_memalign((void **)&b, DIO_HUGE, n) != 0)
		return NULL;
	(void)madvise(b, n, MADV_HUGEPAGE);
	*len = n;
	return b;
}

void tpc__buf_put(uint8_t *b, size_t len)
{
	if (!b)
		return;
	pthread_mutex_lock(&pool_lock);
	if (npool < POOL_MAX && pool_bytes + len <= POOL_BYTES) {
		pool[npool].p = b;
		pool[npool++].len = len;
		pool_bytes += len;
		b = NULL;
	}
	pthread_mutex_unlock(&pool_lock);
	free(b);
}

/* At exit the pool is freed (leak checkers see no buffer behind). */
__attribute__((destructor)) static void pool_free(void)
{
	pthread_mutex_lock(&pool_lock);
	while (npool)
		free(pool[--npool].p);
	pool_bytes = 0;
	pthread_mutex_unlock(&pool_lock);
}

/* AIO contexts outlive their output as well: io_destroy waits for an RCU
 * grace period, so destroying each output's context one after another cost
 * a shard set's writers a visible pause after their flush (measured:
 * BENCHMARKS.md). A context with nothing in flight goes back here for the
 * next output (all have DIO_DEPTH events); what is pooled at exit the kernel
 * frees, waiting once for all. A forked child does not share its parent's
 * contexts, so they are taken only by the process that pooled them. */
#define CTX_POOL 16
static aio_context_t ctx_pool[CTX_POOL];
static int nctx;
static pid_t ctx_pid;

/* An AIO context of DIO_DEPTH events, or 0 when the kernel gives none. */
static aio_context_t ctx_get(void)
{
	aio_context_t c = 0;
	pthread_mutex_lock(&pool_lock);
	if (nctx && ctx_pid == getpid())
		c = ctx_pool[--nctx];
	pthread_mutex_unlock(&pool_lock);
	if (!c && syscall(SYS_io_setup, DIO_DEPTH, &c) != 0)
		c = 0;
	return c;
}

/* Context c, with no write in flight, is free for another output. */
static void ctx_put(aio_context_t c)
{
	pid_t me = getpid();
	if (!c)
		return;
	pthread_mutex_lock(&pool_lock);
	if (nctx && ctx_pid != me)
		nctx = 0; /* a parent's, never to be used here */
	if (nctx < CTX_POOL) {
		ctx_pid = me;
		ctx_pool[nctx++] = c;
		c = 0;
	}
	pthread_mutex_unlock(&pool_lock);
	if (c)
		(void)syscall(SYS_io_destroy, c);
}

/* ---- an output's direct state ---- */

struct tpc_dio {
	int on;            /* 1 dfd open, -1 not used for this file */
	int dfd;           /* the file opened O_DIRECT (valid when on > 0) */
	uint32_t mem;      /* the file system's O_DIRECT memory alignment (statx) */
	/* the queue: direct writes in flight and their buffers */
	bool queued;       /* the queue was set up (ctx taken, or none to be had) */
	aio_context_t ctx; /* 0: no queue (every direct write completes before the next) */
	int nfly;
	int nbuf;
	struct dio_slot {
		struct iocb cb;
		uint8_t *buf;       /* a staging buffer (DIO_STEP bytes), or NULL */
		const tpc_map *src; /* written from this mapping: dropped when done */
		uint64_t s;
		int state;
	} slot[DIO_DEPTH];
	/* staging */
	uint8_t *stage;     /* staged sequential bytes (a slot's buffer) */
	int stage_slot;     /* the slot that owns stage */
	size_t staged;      /* bytes in stage */
	uint64_t stage_off; /* file offset of stage[0] (a whole page) */
	bool staging;       /* stage holds the bytes at [stage_off, stage_off + staged) */
};

bool tpc_out_is_direct(const tpc_out *o)
{
	return o && o->dio && o->dio->on > 0;
}

/* Is the input more than three quarters of RAM? Then it cannot stay in the
 * page cache through the run, whatever is cached when it starts: an
 * in-kernel copy of a file larger than RAM leaves most of it cached, and the
 * run reads it from disk again all the same. */
static bool input_beyond_ram(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || pg <= 0)
		return false;
	return tpc__io_input_bytes() / 3 > (uint64_t)pages * (uint64_t)pg / 4;
}

/* io_cfg.direct (TPCONV_DIRECT) 0: never; 1: wherever the file system allows; -1:
 * unless the input is larger than three quarters of RAM. Such a run reads
 * its input from the disk while it writes, and there buffered writes let the
 * kernel's writeback run beside the reads and recycle the input's reclaimed
 * pages, where direct writes were much slower (measured: BENCHMARKS.md). An
 * input that fits but is not in the page cache goes direct all the same:
 * buffered, every output byte is a copy into a new page-cache page, and that
 * first touch of new memory cost more than the direct writes (measured:
 * BENCHMARKS.md). Decided once per process, at the first output that could
 * go direct: the inputs are mapped by then. */
static bool direct_on(void)
{
	static _Atomic int on = -1;
	int v = atomic_load(&on);
	if (v < 0) {
		v = tpc_io_settings()->direct >= 0 ? tpc_io_settings()->direct : !input_beyond_ram();
		atomic_store(&on, v);
	}
	return v;
}

/* No more direct writes to this file (what is staged is still written). */
static void dio_stop(struct tpc_dio *d)
{
	if (d->on > 0)
		close(d->dfd);
	d->on = -1;
}

void tpc__dio_release(tpc_out *o)
{
	struct tpc_dio *d = o->dio;
	if (!d)
		return;
	/* io_destroy waits for what is in flight (a failed output) */
	if (d->ctx && d->nfly)
		(void)syscall(SYS_io_destroy, d->ctx);
	else
		ctx_put(d->ctx);
	for (int i = 0; i < DIO_DEPTH; i++)
		tpc__buf_put(d->slot[i].buf, DIO_STEP);
	dio_stop(d);
	free(d);
	o->dio = NULL;
}

/* Is the O_DIRECT descriptor open (opened on first use)? */
static bool dio_ready(tpc_out *o)
{
	if (o->dio)
		return o->dio->on > 0;
#ifdef STATX_DIOALIGN
	struct statx sx;
	if (!direct_on() || o->fd < 0 || !o->tmp)
		return false;
	struct tpc_dio *d = calloc(1, sizeof(*d));
	if (!d)
		return false;
	d->on = -1;
	d->dfd = -1;
	o->dio = d;
	if (statx(o->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) != 0 || !(sx.stx_mask & STATX_DIOALIGN))
		return false;
	uint32_t ma = sx.stx_dio_mem_align, oa = sx.stx_dio_offset_align;
	if (!ma || !oa || (ma & (ma - 1)) || (oa & (oa - 1)) || ma > DIO_PAGE || oa > DIO_PAGE)
		return false;
	int fd = open(o->tmp, O_WRONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat a, b;
	if (fstat(fd, &a) != 0 || fstat(o->fd, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		close(fd);
		return false;
	}
	d->dfd = fd;
	d->mem = ma;
	d->on = 1;
	return true;
#else
	return false;
#endif
}

/* Write p[0..n) at off with O_DIRECT (off and n whole pages, p in off's
 * memory alignment phase). *done is what was written: less than n when the
 * file system refused a direct write (then no longer tried for this file). */
static int dio_pwrite(tpc_out *o, const uint8_t *p, size_t n, uint64_t off, size_t *done, tpc_err *e)
{
	struct tpc_dio *d = o->dio;
	*done = 0;
	while (n && d->on > 0) {
		size_t k = n > DIO_STEP ? DIO_STEP : n;
		ssize_t w = pwrite(d->dfd, p, k, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EINVAL || errno == EOPNOTSUPP || errno == ENOTSUP)) {
			dio_stop(d);
			break;
		}
		if (w < 0)
			return tpc__out_write_fail(o, errno, (int64_t)off, e);
		if (w == 0)
			return tpc__out_write_fail(o, ENOSPC, (int64_t)off, e);
		p += w;
		off += (uint64_t)w;
		n -= (size_t)w;
		*done += (size_t)w;
		tpc__out_written_to(o, off);
		if ((size_t)w % DIO_PAGE)
			dio_stop(d); /* a short write off the page grid: the rest buffered */
	}
	return 0;
}

/* ---- the queue ---- */

/* The queue, set up on first use (an AIO context when io_cfg.direct_async). */
static struct tpc_dio *dq_get(tpc_out *o)
{
	struct tpc_dio *d = o->dio;
	if (d && !d->queued) {
		d->queued = true;
		if (tpc_io_settings()->direct_async)
			d->ctx = ctx_get();
	}
	return d;
}

/* Slot i's write ended with `res` (bytes written, or -errno). */
static int slot_done(tpc_out *o, int i, long long res, tpc_err *e)
{
	struct tpc_dio *d = o->dio;
	struct dio_slot *sl = &d->slot[i];
	const uint8_t *p = (const uint8_t *)(uintptr_t)sl->cb.aio_buf;
	size_t n = (size_t)sl->cb.aio_nbytes;
	uint64_t off = (uint64_t)sl->cb.aio_offset;
	int r = 0;
	sl->state = SLOT_FREE;
	d->nfly--;
	if (res == -EINVAL || res == -EOPNOTSUPP || res == -ENOTSUP) {
		dio_stop(d); /* refused: this piece and the rest buffered */
		res = 0;
	}
	if (res < 0) {
		r = tpc__out_write_fail(o, (int)-res, (int64_t)off, e);
	} else if (res == 0 && n && d->on > 0) {
		r = tpc__out_write_fail(o, ENOSPC, (int64_t)off, e);
	} else {
		if ((size_t)res < n) {
			if (res % DIO_PAGE)
				dio_stop(d);
			r = tpc__out_pwrite_pieces(o, p + res, n - (size_t)res, off + (uint64_t)res, DIO_STEP, e);
		}
		tpc__out_written_to(o, off + n);
	}
	if (sl->src)
		tpc_map_drop(sl->src, sl->s, n); /* the disk has read those pages */
	sl->src = NULL;
	return r;
}

/* Wait for at least `min` writes in flight to complete. The first failure
 * is returned; the other completions are still taken. */
static int dq_reap(tpc_out *o, int min, tpc_err *e)
{
	struct tpc_dio *q = o->dio;
	struct io_event ev[DIO_DEPTH];
	int r = 0;
	if (!q || !q->nfly)
		return 0;
	for (;;) {
		long k = syscall(SYS_io_getevents, q->ctx, (long)min, (long)DIO_DEPTH, ev, NULL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			/* the queue is broken: wait for what is in flight (io_destroy
			 * does), count it failed, and write synchronously from now on */
			int err = errno;
			(void)syscall(SYS_io_destroy, q->ctx);
			q->ctx = 0;
			for (int j = 0; j < DIO_DEPTH; j++)
				if (q->slot[j].state == SLOT_FLY)
					q->slot[j].state = SLOT_FREE;
			q->nfly = 0;
			return tpc__out_write_fail(o, err, -1, e);
		}
		for (long j = 0; j < k; j++) {
			tpc_err ignored;
			int rr = slot_done(o, (int)ev[j].data, ev[j].res, r ? &ignored : e);
			if (rr && !r)
				r = rr;
		}
		return r;
	}
}

/* Every write in flight has completed (the first failure returned). */
static int dq_drain(tpc_out *o, tpc_err *e)
{
	int r = 0;
	while (o->dio && o->dio->nfly) {
		tpc_err ignored;
		int rr = dq_reap(o, o->dio->nfly, r ? &ignored : e);
		if (rr && !r)
			r = rr;
	}
	return r;
}

/* A free slot (with a staging buffer when `buf`), waiting for a write in
 * flight to complete when there is none. *i is -1 when no buffer can be had
 * (out of memory, none in flight to wait for). */
static int slot_take(tpc_out *o, bool buf, int *i, tpc_err *e)
{
	struct tpc_dio *q = o->dio;
	*i = -1;
	for (;;) {
		int pick = -1;
		for (int k = 0; k < DIO_DEPTH; k++) {
			if (q->slot[k].state != SLOT_FREE)
				continue;
			if (!buf || q->slot[k].buf) {
				pick = k;
				break;
			}
			if (pick < 0 && q->nbuf < DIO_BUFS)
				pick = k;
		}
		if (pick >= 0 && buf && !q->slot[pick].buf) {
			size_t got;
			if ((q->slot[pick].buf = tpc__buf_get(DIO_STEP, &got)))
				q->nbuf++;
			else
				pick = -1;
		}
		if (pick >= 0) {
			*i = pick;
			return 0;
		}
		if (!q->nfly)
			return 0;
		int r = dq_reap(o, 1, e);
		if (r)
			return r;
	}
}

/* A queued write of [off, off + n) is about to go out: the file's size is
 * past its end first. ext4 completes a direct write that extends the file
 * inside io_submit (fs/ext4/file.c ext4_dio_write_iter: iomap_dio_rw with
 * IOMAP_DIO_FORCE_WAIT when `extend`), so a writer that does not know its
 * size (a torch zip, a DCP rank file; tpc_out_reserve is for the ones that
 * do) had one write in flight, waited for inside io_submit, and its reads
 * and checksums never overlapped the disk (perf's sched_switch stacks of
 * bench/mdist_bench.sh: the writers' off-CPU time in io_submit ->
 * __iomap_dio_rw -> io_schedule_timeout, 9.5 s of two threads' 15). So the
 * size is set RESERVE_AHEAD past the write (never below what the file
 * holds: fstat), and tpc_out_finish cuts it back to the bytes written
 * (o->reserved > o->end). A failed ftruncate leaves the write extending,
 * as before. */
static void reserve_ahead(tpc_out *o, uint64_t off, size_t n)
{
	struct stat st;
	uint64_t want = off + n;
	if (want <= o->reserved || fstat(o->fd, &st) != 0)
		return;
	if ((uint64_t)st.st_size >= want) {
		o->reserved = (uint64_t)st.st_size;
		return;
	}
	uint64_t to = (want + RESERVE_AHEAD) & ~(uint64_t)(DIO_STEP - 1);
	if (ftruncate(o->fd, (off_t)to) == 0)
		o->reserved = to;
}

/* Write p[0..n) at off (whole pages, p in off's memory alignment phase) from
 * slot i: queued when the queue runs, else direct now with what the file
 * refuses buffered. src, when not NULL, is the mapping p points into (its
 * pages at s dropped once written). */
static int dio_submit(tpc_out *o, int i, const uint8_t *p, size_t n, uint64_t off, const tpc_map *src,
		      uint64_t s, tpc_err *e)
{
	struct tpc_dio *q = o->dio;
	struct dio_slot *sl = &q->slot[i];
	if (q->on > 0 && q->ctx)
		reserve_ahead(o, off, n);
	while (q->on > 0 && q->ctx) {
		struct iocb *cbp = &sl->cb;
		memset(&sl->cb, 0, sizeof(sl->cb));
		sl->cb.aio_data = (uint64_t)i;
		sl->cb.aio_lio_opcode = IOCB_CMD_PWRITE;
		sl->cb.aio_fildes = (uint32_t)q->dfd;
		sl->cb.aio_buf = (uint64_t)(uintptr_t)p;
		sl->cb.aio_nbytes = n;
		sl->cb.aio_offset = (int64_t)off;
		long k = syscall(SYS_io_submit, q->ctx, 1L, &cbp);
		if (k == 1) {
			sl->state = SLOT_FLY;
			sl->src = src;
			sl->s = s;
			q->nfly++;
			return 0;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN && q->nfly) {
			int r = dq_reap(o, 1, e);
			if (r)
				return r;
			continue;
		}
		break; /* not queued: written here */
	}
	size_t done = 0;
	int r = q->on > 0 ? dio_pwrite(o, p, n, off, &done, e) : 0;
	if (!r && done < n)
		r = tpc__out_pwrite_pieces(o, p + done, n - done, off + done, DIO_STEP, e);
	if (src)
		tpc_map_drop(src, s, n);
	sl->state = SLOT_FREE;
	return r;
}

/* Write src[s, s+len) to [d, d+len) with O_DIRECT, DIO_STEP at a time from
 * the mapping (queued; the pages dropped as each write completes). *done is
 * what went to the queue: less than len once the file refused a direct
 * write, the rest is the caller's. */
static int direct_copy(tpc_out *o, const tpc_map *src, uint64_t s, uint64_t len, uint64_t d, uint64_t *done,
		       tpc_err *e)
{
	*done = 0;
	if (!dq_get(o))
		return 0;
	while (len && o->dio->on > 0) {
		size_t k = len > DIO_STEP ? DIO_STEP : (size_t)len;
		int i, r = slot_take(o, false, &i, e);
		if (r)
			return r;
		if (o->dio->on <= 0 || i < 0)
			break;
		if ((r = dio_submit(o, i, src->data + s, k, d, src, s, e)))
			return r;
		s += k;
		d += k;
		len -= k;
		*done += k;
	}
	return 0;
}

/* ---- staging ---- */

/* Write out the staged bytes: the whole pages direct (queued), a ragged last
 * page buffered. Staging ends. */
static int stage_flush(tpc_out *o, tpc_err *e)
{
	struct tpc_dio *d = o->dio;
	if (!d || !d->staging)
		return 0;
	d->staging = false;
	size_t whole = d->staged & ~(size_t)(DIO_PAGE - 1);
	int r = 0, i = d->stage_slot;
	if (d->staged > whole)
		r = tpc__out_pwrite_pieces(o, d->stage + whole, d->staged - whole, d->stage_off + whole, DIO_STEP, e);
	if (!r && whole)
		r = dio_submit(o, i, d->stage, whole, d->stage_off, NULL, 0, e);
	else
		d->slot[i].state = SLOT_FREE;
	d->staged = 0;
	d->stage = NULL;
	return r;
}

int tpc__dio_flush(tpc_out *o, bool drain, tpc_err *e)
{
	int r = stage_flush(o, e);
	if (!r && drain)
		r = dq_drain(o, e);
	return r;
}

/* A staging buffer of a free slot becomes the stage; false when none can be
 * had. */
static int stage_take(tpc_out *o, bool *ok, tpc_err *e)
{
	struct tpc_dio *d = o->dio;
	int i, r = slot_take(o, true, &i, e);
	*ok = !r && i >= 0;
	if (*ok) {
		d->stage_slot = i;
		d->slot[i].state = SLOT_STAGE;
		d->stage = d->slot[i].buf;
	}
	return r;
}

/* The staging buffer is full: write it (queued, or buffered once the file
 * refused a direct write) and stage on in another buffer. */
static int stage_spill(tpc_out *o, tpc_err *e)
{
	struct tpc_dio *d = o->dio;
	bool ok;
	int r = dio_submit(o, d->stage_slot, d->stage, DIO_STEP, d->stage_off, NULL, 0, e);
	if (r)
		return r;
	d->stage_off += DIO_STEP;
	d->staged = 0;
	if ((r = stage_take(o, &ok, e)))
		return r;
	if (!ok) { /* no buffer (out of memory): the one just written, once done */
		if ((r = dq_drain(o, e)) || (r = stage_take(o, &ok, e)))
			return r;
		if (!ok) {
			d->staging = false;
			return tpc_err_nomem(e);
		}
	}
	return 0;
}

static int read_fail(const tpc_map *m, uint64_t off, tpc_err *e)
{
	int err = errno;
	tpc_err_sys(e, TPC_EIO, err ? err : EIO, "cannot read at byte %llu (did the file change during the run?)",
		    (unsigned long long)off);
	tpc_err_path(e, m->path);
	return TPC_EIO;
}

/* Append n bytes to the staged ones, writing each full buffer: from p, or
 * (p NULL) read with pread from src at s. */
static int stage_add(tpc_out *o, const uint8_t *p, const tpc_map *src, uint64_t s, uint64_t n, tpc_err *e)
{
	struct tpc_dio *d = o->dio;
	while (n) {
		size_t k = DIO_STEP - d->staged;
		if (k > n)
			k = (size_t)n;
		if (p) {
			memcpy(d->stage + d->staged, p, k);
			p += k;
		} else {
			errno = 0;
			if (tpc__map_pread(src, s, k, d->stage + d->staged))
				return read_fail(src, s, e);
			s += k;
		}
		d->staged += k;
		n -= k;
		if (d->staged == DIO_STEP) {
			int r = stage_spill(o, e);
			if (r)
				return r;
		}
	}
	return 0;
}

uint8_t *tpc__dio_room(tpc_out *o, size_t *room)
{
	struct tpc_dio *d = o->dio;
	if (!d || !d->staging || d->on <= 0 || d->stage_off + d->staged != o->size || d->staged >= DIO_STEP)
		return NULL;
	*room = DIO_STEP - d->staged;
	return d->stage + d->staged;
}

int tpc__dio_room_used(tpc_out *o, size_t k, tpc_err *e)
{
	struct tpc_dio *d = o->dio;
	d->staged += k;
	return d->staged == DIO_STEP ? stage_spill(o, e) : 0;
}

/* Can staging start (the file takes direct writes, a buffer is free)? On
 * success *ok says so and the stage is taken. */
static int stage_can(tpc_out *o, bool *ok, tpc_err *e)
{
	*ok = false;
	if (!dio_ready(o) || !dq_get(o))
		return 0;
	return stage_take(o, ok, e);
}

/* An out-of-phase copy: the source read with pread straight into the
 * staging buffer (the kernel's copy out of the page cache, not a first
 * touch of the mapping's pages). */
int tpc__dio_stage_copy(tpc_out *o, const tpc_map *src, uint64_t s, uint64_t len, uint64_t d, bool *done,
			tpc_err *e)
{
	*done = false;
	if (src->fd < 0)
		return 0;
	if (o->dio && o->dio->staging && (o->dio->on <= 0 || o->dio->stage_off + o->dio->staged != d)) {
		int r = stage_flush(o, e);
		if (r)
			return r;
	}
	if (!o->dio || !o->dio->staging) {
		uint64_t head = (DIO_PAGE - d % DIO_PAGE) % DIO_PAGE;
		bool ok = false;
		int r = head < len ? stage_can(o, &ok, e) : 0;
		if (r || !ok)
			return r;
		struct tpc_dio *q = o->dio;
		q->staging = true; /* the head goes through the buffer first */
		q->stage_off = d + head;
		q->staged = 0;
		if (head) {
			errno = 0;
			if (tpc__map_pread(src, s, head, q->stage))
				return read_fail(src, s, e);
			if ((r = tpc__out_pwrite_pieces(o, q->stage, (size_t)head, d, DIO_STEP, e)))
				return r;
		}
		s += head;
		d += head;
		len -= head;
	}
	*done = true;
	return stage_add(o, NULL, src, s, len, e);
}

int tpc__dio_seq(tpc_out *o, const struct iovec *iov, int n, uint64_t total, bool *staged, tpc_err *e)
{
	*staged = false;
	uint64_t skip = 0; /* bytes of iov written as the head */
	if (o->dio && o->dio->staging && (o->dio->on <= 0 || o->dio->stage_off + o->dio->staged != o->size)) {
		int r = stage_flush(o, e);
		if (r)
			return r;
	}
	if (!o->dio || !o->dio->staging) {
		uint64_t head = (DIO_PAGE - o->size % DIO_PAGE) % DIO_PAGE;
		bool ok = false;
		int r = total >= STAGE_MIN && head < total ? stage_can(o, &ok, e) : 0;
		if (r || !ok)
			return r;
		struct tpc_dio *d = o->dio;
		/* the head, buffered */
		uint64_t off = o->size;
		for (int i = 0; i < n && head; i++) {
			size_t k = iov[i].iov_len < head ? iov[i].iov_len : (size_t)head;
			if ((r = tpc__out_pwrite_pieces(o, iov[i].iov_base, k, off, DIO_STEP, e))) {
				d->slot[d->stage_slot].state = SLOT_FREE;
				d->stage = NULL;
				return r;
			}
			off += k;
			head -= k;
		}
		d->staging = true;
		d->stage_off = off;
		d->staged = 0;
		skip = off - o->size;
	}
	*staged = true;
	for (int i = 0; i < n; i++) {
		size_t k = iov[i].iov_len;
		const uint8_t *p = iov[i].iov_base;
		if (skip >= k) {
			skip -= k;
			continue;
		}
		int r = stage_add(o, p + skip, NULL, 0, k - skip, e);
		skip = 0;
		if (r)
			return r;
	}
	return 0;
}

int tpc__dio_copy(tpc_out *o, const tpc_map *src, uint64_t *s, uint64_t *len, uint64_t *d, bool *done,
		  tpc_err *e)
{
	*done = false;
	if (*len >= DIO_MIN && src->data && src->fd >= 0 && tpc_io_settings()->direct_stage) {
		int r = tpc__dio_stage_copy(o, src, *s, *len, *d, done, e);
		if (r || *done)
			return r;
	}
	if (*len >= DIO_MIN && src->data && src->fd >= 0 && dio_ready(o) && !((*s ^ *d) & (o->dio->mem - 1))) {
		uint64_t a = (*d + DIO_PAGE - 1) & ~(uint64_t)(DIO_PAGE - 1);
		uint64_t z = (*d + *len) & ~(uint64_t)(DIO_PAGE - 1);
		if (z > a) {
			uint64_t head = a - *d, sent = 0;
			int r = head ? tpc_out_copy_at(o, src, *s, head, *d, e) : 0;
			if (!r)
				r = direct_copy(o, src, *s + head, z - a, a, &sent, e);
			if (r)
				return r;
			*s += head + sent;
			*d += head + sent;
			*len -= head + sent;
			*done = !*len;
		}
	}
	return 0;
}
