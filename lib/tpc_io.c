/* tpc_io.c - read-only mappings and atomic outputs; see tpc_io.h.
 *
 * Temporary files live on a fixed-size list that the signal handler walks
 * without locks: entries are published with a single pointer store, and the
 * handler only calls async-signal-safe functions (unlink, signal, raise) and
 * lock-free atomics.
 *
 * No temporary may exist unregistered when the handler runs. A creator blocks
 * SIGINT/SIGTERM/SIGHUP in its own thread and counts itself in `creating` from
 * before mkostemp() until the name is on the list, so the handler never runs
 * on a thread inside that window; a handler running on another thread first
 * sets `dying` (creators that see it create nothing), then waits for
 * `creating` to drain, then unlinks every registered temporary. */
#include "tpc_io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <linux/aio_abi.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tpc_buf.h"
#include "tpc_util.h"

#define CHUNK (64u << 20)

/* ---- temporaries and inputs ---- */

#define MAX_TMP 4096
static char *volatile tmp_list[MAX_TMP];
static pthread_mutex_t io_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t signals_installed;
static _Atomic int creating;   /* threads between mkostemp() and registering its name */
static _Atomic int dying;      /* a termination signal is being handled */
static bool kernel_copy = true;

static struct {
	dev_t dev;
	ino_t ino;
} *inputs;
static size_t n_inputs, cap_inputs;

static void tmp_register(char *p)
{
	pthread_mutex_lock(&io_lock);
	for (int i = 0; i < MAX_TMP; i++)
		if (!tmp_list[i]) {
			tmp_list[i] = p;
			break;
		}
	pthread_mutex_unlock(&io_lock);
}

static void tmp_unregister(const char *p)
{
	pthread_mutex_lock(&io_lock);
	for (int i = 0; i < MAX_TMP; i++)
		if (tmp_list[i] == p) {
			tmp_list[i] = NULL;
			break;
		}
	pthread_mutex_unlock(&io_lock);
}

static void on_signal(int sig)
{
	atomic_store(&dying, 1);
	while (atomic_load(&creating) > 0)
		; /* a creator on another thread, signals blocked there: a few instructions */
	for (int i = 0; i < MAX_TMP; i++) {
		char *p = tmp_list[i];
		if (p)
			unlink(p);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

void tpc_io_install_signals(void)
{
	if (signals_installed)
		return;
	signals_installed = 1;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* File size limit (RLIMIT_FSIZE): with SIGXFSZ ignored, write() fails with
	 * EFBIG and the normal error path removes the temporaries and exits 4
	 * with the reason, instead of the process dying from the signal. */
	signal(SIGXFSZ, SIG_IGN);
}

void tpc_io_set_kernel_copy(bool on)
{
	kernel_copy = on;
}

/* Bytes of the mapped inputs: the direct-write policy (direct_on). */
static _Atomic uint64_t in_bytes;

static void note_input_stat(const struct stat *st)
{
	pthread_mutex_lock(&io_lock);
	if (!tpc_grow((void **)&inputs, &cap_inputs, n_inputs + 1, sizeof(*inputs))) {
		inputs[n_inputs].dev = st->st_dev;
		inputs[n_inputs].ino = st->st_ino;
		n_inputs++;
	}
	pthread_mutex_unlock(&io_lock);
}

/* A mapping closed: its file is no longer read by this process and may be
 * written again (a long-lived library user; a reused inode number). */
static void forget_input(dev_t dev, ino_t ino)
{
	pthread_mutex_lock(&io_lock);
	for (size_t i = n_inputs; i-- > 0;)
		if (inputs[i].dev == dev && inputs[i].ino == ino) {
			inputs[i] = inputs[--n_inputs];
			break;
		}
	pthread_mutex_unlock(&io_lock);
}

void tpc_io_note_input(const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0)
		note_input_stat(&st);
}

bool tpc_io_is_input(const char *path)
{
	struct stat st;
	bool r = false;
	if (stat(path, &st) != 0)
		return false;
	pthread_mutex_lock(&io_lock);
	for (size_t i = 0; i < n_inputs; i++)
		if (inputs[i].dev == st.st_dev && inputs[i].ino == st.st_ino)
			r = true;
	pthread_mutex_unlock(&io_lock);
	return r;
}

/* ---- mappings ---- */

int tpc_map_open(tpc_map *m, const char *path, tpc_err *e)
{
	struct stat st;
	int ret = 0;
	memset(m, 0, sizeof(*m));
	m->fd = -1;
	m->path = tpc_strdup(path);
	if (!m->path)
		return tpc_err_nomem(e);
	m->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (m->fd < 0) {
		ret = tpc_err_sys(e, TPC_EINPUT, errno, "cannot open");
		goto out;
	}
	if (fstat(m->fd, &st) != 0) {
		ret = tpc_err_sys(e, TPC_EINPUT, errno, "cannot stat");
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		ret = tpc_err_set(e, TPC_EINPUT, "is a directory, expected a file");
		goto out;
	}
	m->size = (uint64_t)st.st_size;
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	if (m->size) {
		void *p = mmap(NULL, (size_t)m->size, PROT_READ, MAP_PRIVATE, m->fd, 0);
		if (p == MAP_FAILED) {
			ret = tpc_err_sys(e, TPC_EIO, errno, "cannot map %llu bytes",
					  (unsigned long long)m->size);
			goto out;
		}
		m->data = p;
		atomic_fetch_add(&in_bytes, m->size);
	}
	note_input_stat(&st);
	m->noted = true;
out:
	if (ret) {
		tpc_err_path(e, path);
		tpc_map_close(m);
	}
	return ret;
}

void tpc_map_close(tpc_map *m)
{
	if (!m)
		return;
	if (m->data)
		munmap((void *)m->data, (size_t)m->size);
	if (m->fd >= 0)
		close(m->fd);
	if (m->noted)
		forget_input(m->dev, m->ino);
	free(m->path);
	memset(m, 0, sizeof(*m));
	m->fd = -1;
}

/* The page cache holds a file in folios of up to a PMD's worth of pages (2
 * MiB with 4 KiB pages, when read-ahead or a large write made them), aligned
 * in the file, and recent kernels map the whole folio on a fault, not only
 * the 64 KiB fault-around window (on the 6.18 kernel of the bench machine,
 * 171 faults of the zip reader left 328 MiB mapped). Touching a 30-byte zip
 * header, or the first byte of a hash window, thus brings up to 2 MiB into
 * the resident set, most of it outside the range the caller later drops. So
 * a drop covers the whole aligned blocks that hold [off, off+len): a page a
 * neighbour is still reading faults back in (a minor fault), and nothing a
 * touch inside the range mapped stays behind. */
/* The block a drop widens to: a PMD-order folio (2 MiB with 4 KiB pages). */
static uint64_t drop_block(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	return (uint64_t)(pg > 0 ? pg : 4096) * 512;
}

void tpc_map_drop_passed(const tpc_map *m, uint64_t off, uint64_t end)
{
	end &= ~(drop_block() - 1);
	if (end > off)
		tpc_map_drop(m, off, end - off);
}

void tpc_map_drop(const tpc_map *m, uint64_t off, uint64_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	if (pg <= 0)
		pg = 4096;
	uint64_t span = drop_block();
	if (!m || !m->data || m->fd < 0 || off >= m->size || !len)
		return;
	if (len > m->size - off)
		len = m->size - off;
	uint64_t mapped = (m->size + (uint64_t)pg - 1) & ~(uint64_t)(pg - 1);
	uint64_t start = off & ~(span - 1);
	uint64_t end = (off + len + span - 1) & ~(span - 1);
	if (end > mapped)
		end = mapped;
	madvise((void *)(m->data + start), (size_t)(end - start), MADV_DONTNEED);
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

void tpc_map_populate(const tpc_map *m, uint64_t off, uint64_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	if (pg <= 0)
		pg = 4096;
	if (!m || !m->data || m->fd < 0 || off >= m->size || !len)
		return;
	if (len > m->size - off)
		len = m->size - off;
	uint64_t start = off & ~(uint64_t)(pg - 1);
	uint64_t end = (off + len + (uint64_t)pg - 1) & ~(uint64_t)(pg - 1);
	/* an older kernel (EINVAL) or a page that is gone (EFAULT, a file
	 * truncated under us): the copy then faults on its own */
	(void)madvise((void *)(m->data + start), (size_t)(end - start), MADV_POPULATE_READ);
}

const uint8_t *tpc_map_alias(const tpc_map *m)
{
	if (!m || m->fd < 0 || !m->data || !m->size)
		return NULL;
	void *p = mmap(NULL, (size_t)m->size, PROT_READ, MAP_PRIVATE, m->fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

void tpc_map_alias_close(const tpc_map *m, const uint8_t *alias)
{
	if (m && alias)
		munmap((void *)alias, (size_t)m->size);
}

static int map_pread(const tpc_map *m, uint64_t off, uint64_t len, void *dst)
{
	uint8_t *p = dst;
	if (!m || m->fd < 0 || off > m->size || len > m->size - off)
		return -1;
	while (len) {
		ssize_t k = pread(m->fd, p, len > (1u << 30) ? (1u << 30) : (size_t)len, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		off += (uint64_t)k;
		len -= (uint64_t)k;
	}
	return 0;
}

const uint8_t *tpc_map_bytes(const tpc_map *m, uint64_t off, uint64_t len, uint8_t *buf)
{
	return map_pread(m, off, len, buf) ? m->data + off : buf;
}

void tpc_map_bytes_done(const tpc_map *m, const uint8_t *p, uint64_t off, uint64_t len)
{
	if (p == m->data + off)
		tpc_map_drop(m, off, len);
}

/* ---- outputs ---- */

/* Final files get 0666 & ~umask, as open(2) would give them; mkostemp makes 0600. */
static mode_t saved_umask_mode;
static void umask_init(void)
{
	mode_t u = umask(022);
	umask(u);
	saved_umask_mode = 0666 & ~u;
}

/*
 * Remove the temporaries ".<base>.tpc-XXXXXX" in `dir` that no live process
 * holds: a run killed with SIGKILL cannot clean up, so the next run writing
 * the same target does. A temporary is another run's while its flock is held;
 * the age check covers the instant between mkostemp() and flock() in that run.
 */
#define STALE_AGE_S 2
static void remove_stale(const char *dir, const char *base, const char *mine)
{
	size_t bl = strlen(base);
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d))) {
		const char *n = de->d_name;
		if (n[0] != '.' || strncmp(n + 1, base, bl) || strncmp(n + 1 + bl, ".tpc-", 5) ||
		    strlen(n + 1 + bl + 5) != 6 || !strcmp(n, tpc_path_base(mine)))
			continue;
		int fd = openat(dirfd(d), n, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		struct stat st;
		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && time(NULL) - st.st_mtime >= STALE_AGE_S &&
		    flock(fd, LOCK_EX | LOCK_NB) == 0)
			unlinkat(dirfd(d), n, 0);
		close(fd);
	}
	closedir(d);
}

int tpc_out_open(tpc_out *o, const char *path, unsigned flags, tpc_err *e)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	int ret = 0;
	struct stat st;
	char *dir = NULL;
	pthread_once(&once, umask_init);
	memset(o, 0, sizeof(*o));
	o->fd = -1;
	tpc_io_install_signals();
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			ret = tpc_err_set(e, TPC_EUSAGE, "output is an existing directory");
			goto out;
		}
		if (tpc_io_is_input(path)) {
			ret = tpc_err_set(e, TPC_EUSAGE, "output is also an input; refusing to overwrite it");
			goto out;
		}
		if (!(flags & TPC_OUT_FORCE)) {
			ret = tpc_err_set(e, TPC_EUSAGE, "output exists; use --force to overwrite it");
			goto out;
		}
	}
	o->path = tpc_strdup(path);
	dir = tpc_path_dir(path);
	if (!o->path || !dir) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	{
		tpc_buf b = TPC_BUF_INIT;
		tpc_buf_addf(&b, "%s/.%s.tpc-XXXXXX", dir, tpc_path_base(path));
		o->tmp = tpc_buf_detach(&b, NULL);
	}
	if (!o->tmp) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	{
		/* create and register with the termination signals held off (see top) */
		sigset_t hold, old;
		int err = 0;
		sigemptyset(&hold);
		sigaddset(&hold, SIGINT);
		sigaddset(&hold, SIGTERM);
		sigaddset(&hold, SIGHUP);
		pthread_sigmask(SIG_BLOCK, &hold, &old);
		atomic_fetch_add(&creating, 1);
		if (atomic_load(&dying)) {
			o->fd = -1;
			err = EINTR; /* the process is going down: create nothing */
		} else {
			o->fd = mkostemp(o->tmp, O_CLOEXEC);
			err = errno;
			if (o->fd >= 0)
				tmp_register(o->tmp);
		}
		atomic_fetch_sub(&creating, 1);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (o->fd < 0) {
			ret = tpc_err_sys(e, TPC_EIO, err, "cannot create a temporary file in '%s'", dir);
			free(o->tmp);
			o->tmp = NULL;
			goto out;
		}
	}
	o->flags = flags;
	/* Locked while this process has it open (flock is dropped by the kernel
	 * when the process dies, even by SIGKILL): an unlocked temporary of the
	 * same target is a leftover, and this run removes it. */
	(void)flock(o->fd, LOCK_EX | LOCK_NB);
	remove_stale(dir, tpc_path_base(path), o->tmp);
	if (fchmod(o->fd, saved_umask_mode) != 0) {
		ret = tpc_err_sys(e, TPC_EIO, errno, "cannot set the mode of '%s'", o->tmp);
		goto out;
	}
out:
	free(dir);
	if (ret) {
		tpc_err_path(e, path);
		tpc_out_abort(o);
	}
	return ret;
}

static int write_fail(tpc_out *o, int err, tpc_err *e)
{
	int code = TPC_EIO;
	tpc_err_sys(e, code, err, "write failed");
	tpc_err_path(e, o->path);
	return code;
}

/* Write-behind: once WRITE_BEHIND bytes have been written past the point
 * where writeback last started, start it for them (sync_file_range, which
 * only queues the I/O). The commit's fsync then waits for the last few MiB,
 * not for the whole file: shard tp 4 of the 4.74 GB bench file, three runs
 * each, 2.82-3.49 s with the fsync waiting for every rank file whole,
 * 1.97-2.22 s with this. Writers that write the ranks in parallel no
 * longer stall one another in the fsync, and dirty pages stay few.
 * io_cfg.write_behind off (TPCONV_WRITE_BEHIND=0) turns it off, to measure it. */
#define WRITE_BEHIND (32u << 20)

static tpc_io_config io_cfg = {-1, true, true, true, true, true, 16ull << 30};

void tpc_io_config_defaults(tpc_io_config *c)
{
	*c = (tpc_io_config){-1, true, true, true, true, true, 16ull << 30};
}

void tpc_io_configure(const tpc_io_config *c)
{
	io_cfg = *c;
}

const tpc_io_config *tpc_io_settings(void)
{
	return &io_cfg;
}

/* Bytes up to `end` have been written. */
static void written_to(tpc_out *o, uint64_t end)
{
	if (end > o->end)
		o->end = end;
	if (end < o->wb + WRITE_BEHIND || !io_cfg.write_behind)
		return;
	uint64_t to = end & ~(uint64_t)0xffff;
	(void)sync_file_range(o->fd, (off_t)o->wb, (off_t)(to - o->wb), SYNC_FILE_RANGE_WRITE);
	o->wb = to;
}

/* Direct writes. Output that takes the page cache costs its first touch of
 * every page: a buffered write (and the kernel's copy_file_range) copies each
 * byte into a newly allocated folio. On the bench VM that memory is often
 * memory the host has taken back (free page reporting), and the in-kernel
 * copy of the 4.74 GB file took 2.1-6.7 s depending on it; written with
 * O_DIRECT from the input's mapping the same bytes took 1.95-2.07 s at 0.35 s
 * of system time, disk-bound (see BENCHMARKS.md). So:
 *  - a large copy is read with pread into the staging buffers below and
 *    written from there. With TPCONV_DIRECT_STAGE=0 a copy whose source sits
 *    in the mapping at the same offset within the file system's O_DIRECT
 *    memory alignment as its output offset is written straight from the
 *    mapping (the disk reads the input's page-cache pages). That saves the
 *    copy, but a write is cut into a memory segment per physically
 *    contiguous piece, and an input cached in 4 KiB pages (a file written
 *    with small buffered writes, as torch.save's are) gives 2,048 segments
 *    per 8 MiB: on the bench VM such writes took 19-86 ms against 2.6 ms
 *    from the huge-page buffers, and convert of the 4.74 GB torch zip 10.1-
 *    10.4 s against 3.5-3.9 s staged (BENCHMARKS.md, session 11);
 *  - sequential writes of assembled bytes (a gather's runs, cast output) are
 *    staged in page-aligned buffers of DIO_STEP bytes (DIO_BUFS per output) and
 *    written with O_DIRECT each time it fills: one user-space copy into a
 *    buffer that stays resident instead of the kernel's copy into new folios.
 * Only whole 4 KiB pages of the output go direct; ragged ends stay buffered,
 * so no page is ever both in the page cache and written around it. Any write
 * that is not the staged sequence's next byte (a pwrite at an offset, a copy,
 * a truncate, the fsync) first writes out what is staged. File systems that
 * do not report an O_DIRECT alignment (statx STATX_DIOALIGN, Linux 6.1), or
 * refuse the open or a write (EINVAL), keep buffered writes. TPCONV_DIRECT=0
 * turns it off.
 *
 * The direct writes go out through a Linux AIO queue (io_submit), up to
 * DIO_DEPTH at a time per output, so the writer goes on filling the next
 * buffer (or faulting in the next source pages) while the disk writes the
 * last ones: one synchronous 16 MiB write at a time left the writer idle for
 * every write, and a write that stalled on the virtual disk (p90 65 ms, p99
 * 0.4 s in the 26 GB shard) stalled it whole. Staging has DIO_BUFS buffers,
 * so one fills while the other is written. A buffer or a source page range
 * belongs to the queue until its write completes; the mapping's pages are
 * dropped then. Writes that extend the file complete inside io_submit on
 * ext4, so a writer that knows the size sets it first (tpc_out_reserve). A
 * failed completion is reported by the next call that waits on the queue
 * (the latest at tpc_out_finish); a refused one (EINVAL) or a short one is
 * written again, buffered. Where the queue cannot be set up, or with
 * TPCONV_DIRECT_ASYNC=0, each direct write completes before the next. */
#define DIO_MIN (1u << 20)    /* smaller copies stay buffered */
/* Bytes per direct write, and per staging buffer. 4 MiB: the virtio disk
 * takes at most 4 MiB a request (max_sectors_kb), so larger writes are cut
 * there anyway, and every staging buffer is new memory whose first touch is
 * the costly part of it on the bench VM (2.3 ms a MiB, host page reporting):
 * 8 MiB buffers made shard tp 8 zero 66 huge pages (144 MiB peak RSS), 4 MiB
 * ones 34 (80 MiB), at the same speed. With DIO_DEPTH writes in flight and
 * DIO_BUFS buffers the resident set holds at most 16 MiB of source pages and
 * 8 MiB of buffers per output. */
#define DIO_STEP (4u << 20)
#define DIO_PAGE 4096u        /* direct ranges are whole pages of the output */
#define STAGE_MIN (64u << 10) /* a sequential write this large starts staging */
/* Staging buffers are 2 MiB aligned and asked for transparent huge pages.
 * A direct write is cut into requests of at most max_segments memory
 * segments (254 on the bench VM's virtio disk), one per physically
 * contiguous piece: from 4 KiB pages an 8 MiB write went out as ~1 MiB
 * requests, from huge pages as 4 MiB ones, and the disk took the same 4.74
 * GB in 9.0-9.5 s of writes against 1.6-3.1 s (memcpy into the buffer, then
 * the direct write, bench/dio_probe.c; BENCHMARKS.md). Writes from the input's
 * mapping come from its page-cache folios, often large already. */
#define DIO_HUGE (2u << 20)
#define DIO_DEPTH 4           /* direct writes in flight per output */
#define DIO_BUFS 2            /* staging buffers per output */

enum { SLOT_FREE, SLOT_STAGE, SLOT_FLY };

/* Staging and scratch buffers outlive their output: a shard set's writer
 * threads open one rank file after another, and a buffer freed with its file
 * (8 MiB is an mmap of glibc's) came back as new memory for the next one,
 * zeroed and, on the bench VM, often faulted in from the host again (free
 * page reporting): clear_page was 6% of shard tp 8's samples, 65 huge pages
 * zeroed for 16 buffers in use at a time. Released buffers wait here for the
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

/* A buffer of at least n bytes (*len gets its size); NULL when out of memory. */
static uint8_t *buf_get(size_t n, size_t *len)
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

static void buf_put(uint8_t *b, size_t len)
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

#define SCRATCH_POOLED (1u << 20)

uint8_t *tpc_scratch_get(size_t n, size_t *len)
{
	if (n >= SCRATCH_POOLED)
		return buf_get(n, len);
	*len = n;
	return malloc(n ? n : 1);
}

void tpc_scratch_put(uint8_t *p, size_t len)
{
	if (len >= SCRATCH_POOLED)
		buf_put(p, len);
	else
		free(p);
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
 * grace period, 30-40 ms each on the bench VM, and shard tp 8 spent 0.27 s
 * after its flush destroying eight contexts one after another on its two
 * writer threads. A context with nothing in flight goes back here for the
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

typedef struct tpc_dio_queue {
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
} tpc_dio_queue;

/* Is the input more than three quarters of RAM? Then it cannot stay in the
 * page cache through the run, whatever is cached when it starts (an
 * in-kernel copy of a 26 GB file on a 24 GiB machine leaves most of it
 * cached, and the run reads it from disk again all the same). */
static bool input_beyond_ram(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || pg <= 0)
		return false;
	return atomic_load(&in_bytes) / 3 > (uint64_t)pages * (uint64_t)pg / 4;
}

/* io_cfg.direct (TPCONV_DIRECT) 0: never; 1: wherever the file system allows; -1:
 * unless the input is larger than three quarters of RAM. Such a run reads
 * its input from the disk while it writes, and there buffered writes let the
 * kernel's writeback run beside the reads and recycle the input's reclaimed
 * pages: the 26 GB shard at tp 8 measured 44.8 s buffered against 81.5 s
 * direct and queued (50 s of system time, the readers and kswapd), on a 24
 * GiB machine. An input that fits but is not in the page cache goes direct
 * all the same: buffered, every output byte is a copy into a new page-cache
 * page, and on the bench VM that first touch of new memory (host page
 * reporting) cost the 4.74 GB shard at tp 4 from a cold cache 6.5-9.9 s
 * (5.6-10 s of system time) against 4.5-5.0 s direct, and the merge of its
 * uncached set 5.2-8.9 s against 4.8-5.4 s (BENCHMARKS.md, session 14).
 * Decided once per process, at the first output that could go direct: the
 * inputs are mapped by then. */
static bool direct_on(void)
{
	static _Atomic int on = -1;
	int v = atomic_load(&on);
	if (v < 0) {
		v = io_cfg.direct >= 0 ? io_cfg.direct : !input_beyond_ram();
		atomic_store(&on, v);
	}
	return v;
}

/* Direct copies in the input's page phase are staged too (pread into the
 * huge-page buffers) unless io_cfg.direct_stage is off (from the mapping). */

/* No more direct writes to this file (what is staged is still written). */
static void dio_stop(tpc_out *o)
{
	if (o->dio > 0)
		close(o->dfd);
	o->dio = -1;
}

/* The file is closed or gone: the queue (io_destroy waits for what is in
 * flight), the descriptor and the buffers go. */
static void dio_release(tpc_out *o)
{
	tpc_dio_queue *q = o->dq;
	if (q) {
		/* io_destroy waits for what is in flight (a failed output) */
		if (q->ctx && q->nfly)
			(void)syscall(SYS_io_destroy, q->ctx);
		else
			ctx_put(q->ctx);
		for (int i = 0; i < DIO_DEPTH; i++)
			buf_put(q->slot[i].buf, DIO_STEP);
		free(q);
		o->dq = NULL;
	}
	dio_stop(o);
	o->stage = NULL;
	o->staged = 0;
	o->staging = false;
	buf_put(o->scratch, o->scratch_len);
	o->scratch = NULL;
	o->scratch_len = 0;
}

uint8_t *tpc_out_scratch(tpc_out *o, size_t n)
{
	if (o->scratch_len >= n)
		return o->scratch;
	buf_put(o->scratch, o->scratch_len);
	o->scratch_len = 0;
	if ((o->scratch = buf_get(n, &o->scratch_len)) == NULL)
		o->scratch_len = 0;
	return o->scratch;
}

/* Is the O_DIRECT descriptor open (opened on first use)? */
static bool dio_ready(tpc_out *o)
{
	if (o->dio)
		return o->dio > 0;
	o->dio = -1;
#ifdef STATX_DIOALIGN
	struct statx sx;
	if (!direct_on() || o->fd < 0 || !o->tmp)
		return false;
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
	o->dfd = fd;
	o->dio_mem = ma;
	o->dio = 1;
	return true;
#else
	return false;
#endif
}

static void written_to(tpc_out *o, uint64_t end);
static int write_fail(tpc_out *o, int err, tpc_err *e);
static int pwrite_pieces(tpc_out *o, const void *p, size_t n, uint64_t off, size_t piece, tpc_err *e);

/* Write p[0..n) at off with O_DIRECT (off and n whole pages, p in off's
 * memory alignment phase). *done is what was written: less than n when the
 * file system refused a direct write (then no longer tried for this file). */
static int dio_pwrite(tpc_out *o, const uint8_t *p, size_t n, uint64_t off, size_t *done, tpc_err *e)
{
	*done = 0;
	while (n && o->dio > 0) {
		size_t k = n > DIO_STEP ? DIO_STEP : n;
		ssize_t w = pwrite(o->dfd, p, k, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EINVAL || errno == EOPNOTSUPP || errno == ENOTSUP)) {
			dio_stop(o);
			break;
		}
		if (w < 0)
			return write_fail(o, errno, e);
		if (w == 0)
			return write_fail(o, ENOSPC, e);
		p += w;
		off += (uint64_t)w;
		n -= (size_t)w;
		*done += (size_t)w;
		written_to(o, off);
		if ((size_t)w % DIO_PAGE)
			dio_stop(o); /* a short write off the page grid: the rest buffered */
	}
	return 0;
}

/* ---- the queue ---- */

static tpc_dio_queue *dq_get(tpc_out *o)
{
	if (!o->dq) {
		o->dq = calloc(1, sizeof(*o->dq));
		if (o->dq && io_cfg.direct_async)
			o->dq->ctx = ctx_get();
	}
	return o->dq;
}

/* Slot i's write ended with `res` (bytes written, or -errno). */
static int slot_done(tpc_out *o, int i, long long res, tpc_err *e)
{
	struct dio_slot *sl = &o->dq->slot[i];
	const uint8_t *p = (const uint8_t *)(uintptr_t)sl->cb.aio_buf;
	size_t n = (size_t)sl->cb.aio_nbytes;
	uint64_t off = (uint64_t)sl->cb.aio_offset;
	int r = 0;
	sl->state = SLOT_FREE;
	o->dq->nfly--;
	if (res == -EINVAL || res == -EOPNOTSUPP || res == -ENOTSUP) {
		dio_stop(o); /* refused: this piece and the rest buffered */
		res = 0;
	}
	if (res < 0) {
		r = write_fail(o, (int)-res, e);
	} else if (res == 0 && n && o->dio > 0) {
		r = write_fail(o, ENOSPC, e);
	} else {
		if ((size_t)res < n) {
			if (res % DIO_PAGE)
				dio_stop(o);
			r = pwrite_pieces(o, p + res, n - (size_t)res, off + (uint64_t)res, DIO_STEP, e);
		}
		written_to(o, off + n);
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
	tpc_dio_queue *q = o->dq;
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
			return write_fail(o, err, e);
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
	while (o->dq && o->dq->nfly) {
		tpc_err ignored;
		int rr = dq_reap(o, o->dq->nfly, r ? &ignored : e);
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
	tpc_dio_queue *q = o->dq;
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
			if ((q->slot[pick].buf = buf_get(DIO_STEP, &got)))
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

/* Write p[0..n) at off (whole pages, p in off's memory alignment phase) from
 * slot i: queued when the queue runs, else direct now with what the file
 * refuses buffered. src, when not NULL, is the mapping p points into (its
 * pages at s dropped once written). */
static int dio_submit(tpc_out *o, int i, const uint8_t *p, size_t n, uint64_t off, const tpc_map *src,
		      uint64_t s, tpc_err *e)
{
	tpc_dio_queue *q = o->dq;
	struct dio_slot *sl = &q->slot[i];
	while (o->dio > 0 && q->ctx) {
		struct iocb *cbp = &sl->cb;
		memset(&sl->cb, 0, sizeof(sl->cb));
		sl->cb.aio_data = (uint64_t)i;
		sl->cb.aio_lio_opcode = IOCB_CMD_PWRITE;
		sl->cb.aio_fildes = (uint32_t)o->dfd;
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
	int r = o->dio > 0 ? dio_pwrite(o, p, n, off, &done, e) : 0;
	if (!r && done < n)
		r = pwrite_pieces(o, p + done, n - done, off + done, DIO_STEP, e);
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
	while (len && o->dio > 0) {
		size_t k = len > DIO_STEP ? DIO_STEP : (size_t)len;
		int i, r = slot_take(o, false, &i, e);
		if (r)
			return r;
		if (o->dio <= 0 || i < 0)
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

/* Write out the staged bytes: the whole pages direct (queued), a ragged last
 * page buffered. Staging ends. */
static int stage_flush(tpc_out *o, tpc_err *e)
{
	if (!o->staging)
		return 0;
	o->staging = false;
	size_t whole = o->staged & ~(size_t)(DIO_PAGE - 1);
	int r = 0, i = o->stage_slot;
	if (o->staged > whole)
		r = pwrite_pieces(o, o->stage + whole, o->staged - whole, o->stage_off + whole, DIO_STEP, e);
	if (!r && whole)
		r = dio_submit(o, i, o->stage, whole, o->stage_off, NULL, 0, e);
	else
		o->dq->slot[i].state = SLOT_FREE;
	o->staged = 0;
	o->stage = NULL;
	return r;
}

/* A staging buffer of a free slot becomes the stage; false when none can be
 * had. */
static int stage_take(tpc_out *o, bool *ok, tpc_err *e)
{
	int i, r = slot_take(o, true, &i, e);
	*ok = !r && i >= 0;
	if (*ok) {
		o->stage_slot = i;
		o->dq->slot[i].state = SLOT_STAGE;
		o->stage = o->dq->slot[i].buf;
	}
	return r;
}

/* The staging buffer is full: write it (queued, or buffered once the file
 * refused a direct write) and stage on in another buffer. */
static int stage_spill(tpc_out *o, tpc_err *e)
{
	bool ok;
	int r = dio_submit(o, o->stage_slot, o->stage, DIO_STEP, o->stage_off, NULL, 0, e);
	if (r)
		return r;
	o->stage_off += DIO_STEP;
	o->staged = 0;
	if ((r = stage_take(o, &ok, e)))
		return r;
	if (!ok) { /* no buffer (out of memory): the one just written, once done */
		if ((r = dq_drain(o, e)) || (r = stage_take(o, &ok, e)))
			return r;
		if (!ok) {
			o->staging = false;
			return tpc_err_nomem(e);
		}
	}
	return 0;
}

static int map_pread(const tpc_map *m, uint64_t off, uint64_t len, void *dst);
static int read_fail(const tpc_map *m, uint64_t off, tpc_err *e);

/* Append n bytes to the staged ones, writing each full buffer: from p, or
 * (p NULL) read with pread from src at s. */
static int stage_add(tpc_out *o, const uint8_t *p, const tpc_map *src, uint64_t s, uint64_t n, tpc_err *e)
{
	while (n) {
		size_t k = DIO_STEP - o->staged;
		if (k > n)
			k = (size_t)n;
		if (p) {
			memcpy(o->stage + o->staged, p, k);
			p += k;
		} else {
			errno = 0;
			if (map_pread(src, s, k, o->stage + o->staged))
				return read_fail(src, s, e);
			s += k;
		}
		o->staged += k;
		n -= k;
		if (o->staged == DIO_STEP) {
			int r = stage_spill(o, e);
			if (r)
				return r;
		}
	}
	return 0;
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

static int read_fail(const tpc_map *m, uint64_t off, tpc_err *e)
{
	int err = errno;
	tpc_err_sys(e, TPC_EIO, err ? err : EIO, "cannot read at byte %llu (did the file change during the run?)",
		    (unsigned long long)off);
	tpc_err_path(e, m->path);
	return TPC_EIO;
}

/* An out-of-phase copy, src[s, s+len) to [d, d+len): staged, the source read
 * with pread straight into the staging buffer (the kernel's copy out of the
 * page cache, not a first touch of the mapping's pages), the part up to the
 * output's next page buffered. *done false when it does not apply. */
static int stage_copy(tpc_out *o, const tpc_map *src, uint64_t s, uint64_t len, uint64_t d, bool *done, tpc_err *e)
{
	*done = false;
	if (src->fd < 0)
		return 0;
	if (o->staging && (o->dio <= 0 || o->stage_off + o->staged != d)) {
		int r = stage_flush(o, e);
		if (r)
			return r;
	}
	if (!o->staging) {
		uint64_t head = (DIO_PAGE - d % DIO_PAGE) % DIO_PAGE;
		bool ok = false;
		int r = head < len ? stage_can(o, &ok, e) : 0;
		if (r || !ok)
			return r;
		o->staging = true; /* the head goes through the buffer first */
		o->stage_off = d + head;
		o->staged = 0;
		if (head) {
			errno = 0;
			if (map_pread(src, s, head, o->stage))
				return read_fail(src, s, e);
			if ((r = pwrite_pieces(o, o->stage, (size_t)head, d, DIO_STEP, e)))
				return r;
		}
		s += head;
		d += head;
		len -= head;
	}
	*done = true;
	return stage_add(o, NULL, src, s, len, e);
}

/* Bytes for o->size onwards, `total` of them in iov[0..n): staged when they
 * are many and the file takes direct writes (the part up to the next page
 * boundary buffered first); *staged false when the caller writes them. */
static int stage_seq(tpc_out *o, const struct iovec *iov, int n, uint64_t total, bool *staged, tpc_err *e)
{
	*staged = false;
	uint64_t skip = 0; /* bytes of iov written as the head */
	if (o->staging && (o->dio <= 0 || o->stage_off + o->staged != o->size)) {
		int r = stage_flush(o, e);
		if (r)
			return r;
	}
	if (!o->staging) {
		uint64_t head = (DIO_PAGE - o->size % DIO_PAGE) % DIO_PAGE;
		bool ok = false;
		int r = total >= STAGE_MIN && head < total ? stage_can(o, &ok, e) : 0;
		if (r || !ok)
			return r;
		/* the head, buffered */
		uint64_t off = o->size;
		for (int i = 0; i < n && head; i++) {
			size_t k = iov[i].iov_len < head ? iov[i].iov_len : (size_t)head;
			if ((r = pwrite_pieces(o, iov[i].iov_base, k, off, DIO_STEP, e))) {
				o->dq->slot[o->stage_slot].state = SLOT_FREE;
				o->stage = NULL;
				return r;
			}
			off += k;
			head -= k;
		}
		o->staging = true;
		o->stage_off = off;
		o->staged = 0;
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

/* Write iov[0..n) at `off`, resuming after partial writes (the kernel caps
 * one call near 2 GiB; a signal or a full pipe may cut it short). */
static int pwritev_all(tpc_out *o, struct iovec *iov, int n, uint64_t off, tpc_err *e)
{
	while (n > 0) {
		ssize_t w = pwritev(o->fd, iov, n, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return write_fail(o, errno, e);
		}
		if (w == 0)
			return write_fail(o, ENOSPC, e);
		off += (uint64_t)w;
		written_to(o, off);
		/* skip what was written; resume inside a partly written entry */
		size_t left = (size_t)w;
		while (n > 0 && left >= iov->iov_len) {
			left -= iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + left;
			iov->iov_len -= left;
		}
	}
	return 0;
}

/* Write p[0..n) at off in calls that each end on the output's `piece` grid. */
static int pwrite_pieces(tpc_out *o, const void *p, size_t n, uint64_t off, size_t piece, tpc_err *e)
{
	const char *c = p;
	int ret = 0;
	while (n && !ret) {
		size_t k = piece - (size_t)(off % piece);
		if (k > n)
			k = n;
		struct iovec v = {(void *)c, k};
		ret = pwritev_all(o, &v, 1, off, e);
		c += k;
		n -= k;
		off += k;
	}
	return ret;
}

int tpc_out_pwrite(tpc_out *o, const void *p, size_t n, uint64_t off, tpc_err *e)
{
	/* anywhere in the file: nothing may be in flight under it */
	int r = stage_flush(o, e);
	if (!r)
		r = dq_drain(o, e);
	if (r)
		return r;
	/* CHUNK at a time: progress and signals stay responsive */
	return pwrite_pieces(o, p, n, off, CHUNK, e);
}

int tpc_out_writev(tpc_out *o, struct iovec *iov, int n, tpc_err *e)
{
	uint64_t total = 0;
	bool staged;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	int ret = stage_seq(o, iov, n, total, &staged, e);
	if (!ret && !staged)
		ret = pwritev_all(o, iov, n, o->size, e);
	if (!ret)
		o->size += total;
	return ret;
}

int tpc_out_write(tpc_out *o, const void *p, size_t n, tpc_err *e)
{
	struct iovec v = {(void *)p, n};
	bool staged;
	int ret = stage_seq(o, &v, 1, n, &staged, e);
	if (!ret && !staged) /* past everything in flight: no wait */
		ret = pwrite_pieces(o, p, n, o->size, CHUNK, e);
	if (!ret)
		o->size += n;
	return ret;
}

int tpc_out_copy_at(tpc_out *o, const tpc_map *src, uint64_t src_off, uint64_t len,
		    uint64_t dst_off, tpc_err *e)
{
	if (src_off > src->size || len > src->size - src_off)
		return tpc_err_set(e, TPC_EINPUT, "internal: copy range past the end of '%s'", src->path);
	int sr = stage_flush(o, e);
	if (sr)
		return sr;
	if (len >= DIO_MIN && src->data && src->fd >= 0 && io_cfg.direct_stage) {
		bool staged;
		int r = stage_copy(o, src, src_off, len, dst_off, &staged, e);
		if (r || staged)
			return r;
	}
	if (len >= DIO_MIN && src->data && src->fd >= 0 && dio_ready(o) && !((src_off ^ dst_off) & (o->dio_mem - 1))) {
		uint64_t a = (dst_off + DIO_PAGE - 1) & ~(uint64_t)(DIO_PAGE - 1);
		uint64_t z = (dst_off + len) & ~(uint64_t)(DIO_PAGE - 1);
		if (z > a) {
			uint64_t head = a - dst_off, done = 0;
			int r = head ? tpc_out_copy_at(o, src, src_off, head, dst_off, e) : 0;
			if (!r)
				r = direct_copy(o, src, src_off + head, z - a, a, &done, e);
			if (r)
				return r;
			src_off += head + done;
			dst_off += head + done;
			len -= head + done;
			if (!len)
				return 0;
		}
	}
	bool try_kernel = kernel_copy && src->fd >= 0;
	/* The kernel's copy keeps the source's page phase: into an output
	 * offset in another phase it writes each 64 KiB piece across two
	 * pages, in small folios (convert of the 4.74 GB torch zip, whose
	 * entries start in 32 different phases: 336,289 page-cache folios
	 * against 72,624 for a copy of the whole file). Such a copy is written
	 * from the mapping instead (below), 64 KiB pieces on the output's grid
	 * as the kernel's own copy writes them. */
	bool phase = len >= (1u << 20) && src->data && ((src_off ^ dst_off) & 4095);
	if (phase) {
		bool staged;
		int r = stage_copy(o, src, src_off, len, dst_off, &staged, e);
		if (r || staged)
			return r;
		try_kernel = false;
	}
	while (len && try_kernel) {
		loff_t in = (loff_t)src_off, outp = (loff_t)dst_off;
		size_t k = len > (64u << 20) ? (64u << 20) : (size_t)len;
		/* The kernel writes the copy 64 KiB at a time from where the call
		 * starts: a large copy begins with the piece up to the next 64 KiB
		 * of the output, so those writes land on whole 64 KiB folios (5x
		 * fewer page-cache folios when the source is in the same page
		 * phase, see tpc_ckpt_copy_residue). */
		if (len >= (2u << 20) && (dst_off & 0xffff) && k > 0x10000 - (dst_off & 0xffff))
			k = 0x10000 - (size_t)(dst_off & 0xffff);
		ssize_t r = copy_file_range(src->fd, &in, o->fd, &outp, k, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP ||
			    errno == EBADF || errno == ETXTBSY) {
				try_kernel = false;
				break;
			}
			return write_fail(o, errno, e);
		}
		if (r == 0) {
			try_kernel = false;
			break;
		}
		src_off += (uint64_t)r;
		dst_off += (uint64_t)r;
		len -= (uint64_t)r;
		written_to(o, dst_off);
	}
	/* No kernel copy (another file system, turned off, or out of phase): from the
	 * mapping a chunk at a time, each chunk's pages dropped behind it, or the
	 * whole range would stay in the resident set (4.5 GiB for a 4.7 GB
	 * convert onto tmpfs). */
	enum { STEP = 8 << 20, PIECE = 64 << 10 };
	int ret = 0;
	while (len && !ret) {
		size_t k = len > STEP ? STEP : (size_t)len;
		tpc_map_populate(src, src_off, k);
		/* Out of phase: 64 KiB pieces, so 64 KiB folios, not 2 MiB ones.
		 * On the bench VM (free page reporting) a 2 MiB folio is memory
		 * the host took back, and the first write to it faults page by
		 * page. The 4.74 GB convert in 8 MiB writes took 4.22-7.40 s, in
		 * 64 KiB pieces 1.70-1.89 s, through the kernel's misaligned copy
		 * 2.00-2.05 s. */
		ret = pwrite_pieces(o, src->data + src_off, k, dst_off, phase ? PIECE : CHUNK, e);
		tpc_map_drop(src, src_off, k);
		src_off += k;
		dst_off += k;
		len -= k;
	}
	return ret;
}

int tpc_out_copy(tpc_out *o, const tpc_map *src, uint64_t src_off, uint64_t len, tpc_err *e)
{
	int ret = tpc_out_copy_at(o, src, src_off, len, o->size, e);
	if (!ret)
		o->size += len;
	return ret;
}

int tpc_out_truncate(tpc_out *o, uint64_t size, tpc_err *e)
{
	int r = stage_flush(o, e);
	if (!r)
		r = dq_drain(o, e);
	if (r)
		return r;
	if (ftruncate(o->fd, (off_t)size) != 0)
		return write_fail(o, errno, e);
	o->end = size;
	o->reserved = 0;
	return 0;
}

int tpc_out_reserve(tpc_out *o, uint64_t size, tpc_err *e)
{
	struct stat st;
	if (o->fd < 0 || fstat(o->fd, &st) != 0 || (uint64_t)st.st_size >= size)
		return 0;
	if (ftruncate(o->fd, (off_t)size) != 0)
		return write_fail(o, errno, e);
	o->reserved = size;
	return 0;
}

static int fsync_dir(const char *path)
{
	char *dir = tpc_path_dir(path);
	int fd, r = 0;
	if (!dir)
		return ENOMEM;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (fd < 0)
		return errno;
	if (fsync(fd) != 0 && errno != EINVAL)
		r = errno;
	close(fd);
	return r;
}

int tpc_out_finish(tpc_out *o, tpc_err *e)
{
	if (o->fd < 0)
		return 0;
	int r = stage_flush(o, e);
	if (!r)
		r = dq_drain(o, e);
	if (r)
		return r;
	/* a reserved size that was not all written: the file ends where the
	 * bytes do, as it would have without the reservation */
	if (o->reserved > o->end && ftruncate(o->fd, (off_t)o->end) != 0)
		return write_fail(o, errno, e);
	o->reserved = 0;
	if (fsync(o->fd) != 0 && errno != EINVAL)
		return write_fail(o, errno, e);
	return 0;
}

int tpc_out_commit(tpc_out *o, tpc_err *e)
{
	int r = tpc_out_finish(o, e);
	if (r)
		return r;
	dio_release(o);
	if (o->fd >= 0) {
		r = close(o->fd);
		o->fd = -1;
		if (r != 0)
			return write_fail(o, errno, e);
	}
	/* Without TPC_OUT_FORCE a target that appeared since tpc_out_open (another
	 * run finished first) is not replaced: the check at open is repeated
	 * atomically here. */
	int rc = (o->flags & TPC_OUT_FORCE) ? rename(o->tmp, o->path)
					    : renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path, RENAME_NOREPLACE);
	if (rc != 0 && !(o->flags & TPC_OUT_FORCE) && (errno == EINVAL || errno == ENOSYS)) {
		/* no RENAME_NOREPLACE on this file system: link() fails on an existing name too */
		rc = link(o->tmp, o->path);
		if (rc == 0)
			unlink(o->tmp);
		else if (errno != EEXIST)
			rc = rename(o->tmp, o->path);
	}
	if (rc != 0) {
		int err = errno;
		if (err == EEXIST) {
			tpc_err_set(e, TPC_EUSAGE, "output appeared while this run was writing it (another run?); "
						   "use --force to overwrite it");
			tpc_err_path(e, o->path);
			return TPC_EUSAGE;
		}
		tpc_err_sys(e, TPC_EIO, err, "cannot rename the temporary file into place");
		tpc_err_path(e, o->path);
		return TPC_EIO;
	}
	tmp_unregister(o->tmp);
	free(o->tmp);
	o->tmp = NULL;
	o->committed = true;
	r = fsync_dir(o->path);
	if (r)
		return tpc_err_sys(e, TPC_EIO, r, "cannot sync the directory of '%s'", o->path);
	free(o->path);
	o->path = NULL;
	return 0;
}

void tpc_out_abort(tpc_out *o)
{
	if (!o)
		return;
	if (o->fd >= 0 && o->tmp)
		close(o->fd);
	o->fd = -1;
	dio_release(o);
	if (o->tmp) {
		unlink(o->tmp);
		tmp_unregister(o->tmp);
		free(o->tmp);
		o->tmp = NULL;
	}
	free(o->path);
	o->path = NULL;
}

int tpc_write_file_atomic(const char *path, const void *p, size_t n, unsigned flags, tpc_err *e)
{
	tpc_out o;
	int ret = tpc_out_open(&o, path, flags, e);
	if (ret)
		return ret;
	ret = tpc_out_write(&o, p, n, e);
	if (!ret)
		ret = tpc_out_commit(&o, e);
	tpc_out_abort(&o);
	return ret;
}

int tpc_read_file(const char *path, uint64_t cap, char **out, size_t *len, tpc_err *e)
{
	tpc_map m;
	int ret = tpc_map_open(&m, path, e);
	if (ret)
		return ret;
	if (m.size > cap) {
		ret = tpc_err_set(e, TPC_EINPUT, "file is %llu bytes, more than the %llu allowed",
				  (unsigned long long)m.size, (unsigned long long)cap);
		tpc_err_path(e, path);
		goto out;
	}
	*out = tpc_strndup(m.data ? (const char *)m.data : "", (size_t)m.size);
	if (!*out) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (len)
		*len = (size_t)m.size;
out:
	tpc_map_close(&m);
	return ret;
}

bool tpc_is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool tpc_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

int tpc_mkdirs(const char *path, tpc_err *e)
{
	char *p = tpc_strdup(path);
	int ret = 0;
	if (!p)
		return tpc_err_nomem(e);
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;
			*s = '\0';
			if (mkdir(p, 0777) != 0 && errno != EEXIST) {
				ret = tpc_err_sys(e, TPC_EIO, errno, "cannot create directory");
				tpc_err_path(e, p);
				break;
			}
			*s = c;
			if (!c)
				break;
		}
	}
	if (!ret && !tpc_is_dir(path)) {
		ret = tpc_err_set(e, TPC_EIO, "exists and is not a directory");
		tpc_err_path(e, path);
	}
	free(p);
	return ret;
}

char *tpc_path_join(const char *dir, const char *name)
{
	tpc_buf b = TPC_BUF_INIT;
	size_t l = strlen(dir);
	tpc_buf_adds(&b, dir);
	if (l && dir[l - 1] != '/')
		tpc_buf_addc(&b, '/');
	tpc_buf_adds(&b, name);
	return tpc_buf_detach(&b, NULL);
}

const char *tpc_path_base(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

char *tpc_path_dir(const char *path)
{
	const char *s = strrchr(path, '/');
	if (!s)
		return tpc_strdup(".");
	if (s == path)
		return tpc_strdup("/");
	return tpc_strndup(path, (size_t)(s - path));
}
