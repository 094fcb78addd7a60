/* tpc_io.c - read-only mappings and atomic outputs; see tpc_io.h. An
 * output's direct writes (O_DIRECT, the AIO queue, staging) are tpc_dio.c's.
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
#include <sys/file.h>
#include <sys/uio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tpc_buf.h"
#include "tpc_dio.h"
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

static void (*interrupt_note)(int sig);

void tpc_io_on_interrupt(void (*note)(int sig))
{
	interrupt_note = note;
}

/* In a signal handler: every registered temporary unlinked. */
static void drop_temporaries(void)
{
	atomic_store(&dying, 1);
	while (atomic_load(&creating) > 0)
		; /* a creator on another thread, signals blocked there: a few instructions */
	for (int i = 0; i < MAX_TMP; i++) {
		char *p = tmp_list[i];
		if (p)
			unlink(p);
	}
}

static void on_signal(int sig)
{
	drop_temporaries();
	if (interrupt_note)
		interrupt_note(sig);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* ---- a mapped input that shrinks: SIGBUS ----
 *
 * Reading a mapped page past a file's end, after another process truncated
 * it, raises SIGBUS. The mappings are on a fixed list the handler walks
 * without locks (base published last, with release order); it names the
 * file and the offset, removes the temporaries and exits 4, as a failed
 * read would. A SIGBUS elsewhere stays a crash. */
#define MAX_MAPS 4096
static struct {
	_Atomic(const uint8_t *) base;
	uint64_t size;
	const char *path;
} maps[MAX_MAPS];

static void map_register(const tpc_map *m)
{
	for (int i = 0; i < MAX_MAPS; i++) {
		const uint8_t *none = NULL;
		if (atomic_load(&maps[i].base) || !atomic_compare_exchange_strong(&maps[i].base, &none, (const uint8_t *)1))
			continue;
		maps[i].size = m->size;
		maps[i].path = m->path;
		atomic_store_explicit(&maps[i].base, m->data, memory_order_release);
		return;
	}
}

static void map_unregister(const uint8_t *data)
{
	for (int i = 0; data && i < MAX_MAPS; i++)
		if (atomic_load(&maps[i].base) == data) {
			atomic_store(&maps[i].base, NULL);
			return;
		}
}

static void put_err(const char *s)
{
	ssize_t r = write(2, s, strlen(s));
	(void)r;
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	const uint8_t *a = si ? (const uint8_t *)si->si_addr : NULL;
	int hit = -1;
	for (int i = 0; a && i < MAX_MAPS && hit < 0; i++) {
		const uint8_t *b = atomic_load_explicit(&maps[i].base, memory_order_acquire);
		if (b && b != (const uint8_t *)1 && a >= b && (uint64_t)(a - b) < maps[i].size)
			hit = i;
	}
	drop_temporaries();
	if (hit < 0) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	char num[24];
	int k = (int)sizeof(num) - 1;
	uint64_t off = (uint64_t)(a - atomic_load(&maps[hit].base)) & ~(uint64_t)4095;
	num[k] = 0;
	do
		num[--k] = (char)('0' + off % 10);
	while ((off /= 10) && k > 0);
	put_err("tpconv: error: '");
	put_err(maps[hit].path);
	put_err("': the file shrank while it was read (truncated by another process?): byte offset ");
	put_err(num + k);
	put_err(" is past its end now; temporary outputs removed\n");
	_exit(4);
}

void tpc_io_install_signals(void)
{
	/* SIGBUS on every call: a library may have taken it since (Open MPI's
	 * backtrace handler, a test harness) */
	struct sigaction sb;
	memset(&sb, 0, sizeof(sb));
	sb.sa_sigaction = on_sigbus;
	sb.sa_flags = SA_SIGINFO;
	sigemptyset(&sb.sa_mask);
	sigaction(SIGBUS, &sb, NULL);
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

/* Bytes of the mapped inputs: the direct-write policy (lib/tpc_dio.c). */
static _Atomic uint64_t in_bytes;

uint64_t tpc__io_input_bytes(void)
{
	return atomic_load(&in_bytes);
}

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
		map_register(m);
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
	if (m->data) {
		map_unregister(m->data);
		munmap((void *)m->data, (size_t)m->size);
	}
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
 * the 64 KiB fault-around window (a few faults of the zip reader leave
 * hundreds of MiB mapped; measured: BENCHMARKS.md). Touching a 30-byte zip
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
	/* a file within one block: every drop would be the whole file, faulted
	 * back in by the next read (verify of a 160 KB model: 600 drops, 0.1 s
	 * of system time), and its pages are no more than a larger file keeps
	 * (the block a reader is in) */
	if (!m || !m->data || m->fd < 0 || off >= m->size || !len || m->size <= span)
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

void tpc_map_advise_random(const tpc_map *m)
{
	if (m && m->data && m->fd >= 0 && m->size)
		(void)madvise((void *)m->data, (size_t)m->size, MADV_RANDOM);
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

int tpc__map_pread(const tpc_map *m, uint64_t off, uint64_t len, void *dst)
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
	return tpc__map_pread(m, off, len, buf) ? m->data + off : buf;
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
 * Leftovers. A temporary is flock()ed by its run from the moment it has its
 * name until the name is gone (renamed into place, or unlinked): the kernel
 * drops the lock when the process dies, even by SIGKILL, so an unlocked
 * temporary is a dead run's and any run may remove it, at once. The one
 * instant a live run's temporary is unlocked, between mkostemp() and its
 * flock(), is closed on the creator's side: a sweeper removes a file only
 * while holding its lock, and a creator that then gets the lock finds its
 * file unlinked and makes another (create_temp).
 */

/* Is `n` a temporary's name, ".<base>.tpc-XXXXXX" (any base when NULL)? */
static bool is_temp_name(const char *n, const char *base)
{
	size_t l = strlen(n), bl = base ? strlen(base) : 0;
	if (n[0] != '.' || l < 1 + 1 + 11 || (base && (l != 1 + bl + 11 || strncmp(n + 1, base, bl))))
		return false;
	const char *t = n + l - 11;
	if (strncmp(t, ".tpc-", 5))
		return false;
	for (int i = 5; i < 11; i++)
		if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z')))
			return false;
	return true;
}

/* Remove temporary `n` of folder dfd if no live process holds it: while
 * holding its lock, and only if the name is still that file. */
static void remove_if_dead(int dfd, const char *n)
{
	struct stat st, now;
	int fd = openat(dfd, n, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
	    fstatat(dfd, n, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino)
		unlinkat(dfd, n, 0);
	close(fd); /* the lock with it */
}

/* The dead temporaries in `dir` of target `base` (NULL: of any target). */
static void sweep(const char *dir, const char *base)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d)))
		if (is_temp_name(de->d_name, base))
			remove_if_dead(dirfd(d), de->d_name);
	closedir(d);
}

bool tpc_out_no_room(const tpc_err *e)
{
	return e->code == TPC_EIO && (e->sys == ENOSPC || e->sys == EDQUOT || e->sys == EFBIG);
}

void tpc_out_sweep(const char *dir)
{
	sweep(dir, NULL);
}

/* o->tmp: a new temporary beside o->path, registered for the signal
 * handler, locked, and still under its name. 0 or an errno. */
static int create_temp(tpc_out *o, const char *dir)
{
	for (int tries = 0; tries < 64; tries++) {
		tpc_buf b = TPC_BUF_INIT;
		tpc_buf_addf(&b, "%s/.%s.tpc-XXXXXX", dir, tpc_path_base(o->path));
		if (!(o->tmp = tpc_buf_detach(&b, NULL)))
			return ENOMEM;
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
			free(o->tmp);
			o->tmp = NULL;
			return err;
		}
		/* Locked while it has this name. A file system without flock
		 * fails here and in every sweeper alike: nothing is removed. */
		while (flock(o->fd, LOCK_EX) != 0 && errno == EINTR)
			;
		struct stat a, n;
		if (fstat(o->fd, &a) != 0 || stat(o->tmp, &n) != 0 || a.st_dev != n.st_dev || a.st_ino != n.st_ino) {
			/* a sweeping run took it for a dead run's before the lock: another */
			close(o->fd);
			o->fd = -1;
			tmp_unregister(o->tmp);
			free(o->tmp);
			o->tmp = NULL;
			continue;
		}
		return 0;
	}
	return EAGAIN;
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
	o->path = tpc_strdup(path);
	dir = tpc_path_dir(path);
	if (!o->path || !dir) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	/* a run killed with SIGKILL left its temporaries of this target: gone,
	 * whether this run writes it or not */
	sweep(dir, tpc_path_base(path));
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
	int err = create_temp(o, dir);
	if (err) {
		ret = err == ENOMEM ? tpc_err_nomem(e)
				    : tpc_err_sys(e, TPC_EIO, err, "cannot create a temporary file in '%s'", dir);
		goto out;
	}
	o->flags = flags;
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

int tpc__out_write_fail(tpc_out *o, int err, int64_t at, tpc_err *e)
{
	int code = TPC_EIO;
	bool fresh = !e->code; /* the place goes with this error, not an earlier one */
	tpc_err_sys(e, code, err, "write failed");
	tpc_err_path(e, o->path);
	if (fresh && at >= 0)
		tpc_err_offset(e, at);
	return code;
}

/* Write-behind: once WRITE_BEHIND bytes have been written past the point
 * where writeback last started, start it for them (sync_file_range, which
 * only queues the I/O). The commit's fsync then waits for the last few MiB,
 * not for the whole file, which makes a shard set markedly faster
 * (measured: BENCHMARKS.md). Writers that write the ranks in parallel no
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
void tpc__out_written_to(tpc_out *o, uint64_t end)
{
	if (end > o->end)
		o->end = end;
	if (end < o->wb + WRITE_BEHIND || !io_cfg.write_behind)
		return;
	uint64_t to = end & ~(uint64_t)0xffff;
	(void)sync_file_range(o->fd, (off_t)o->wb, (off_t)(to - o->wb), SYNC_FILE_RANGE_WRITE);
	o->wb = to;
}

#define SCRATCH_POOLED (1u << 20)

uint8_t *tpc_scratch_get(size_t n, size_t *len)
{
	if (n >= SCRATCH_POOLED)
		return tpc__buf_get(n, len);
	*len = n;
	return malloc(n ? n : 1);
}

void tpc_scratch_put(uint8_t *p, size_t len)
{
	if (len >= SCRATCH_POOLED)
		tpc__buf_put(p, len);
	else
		free(p);
}

void tpc_out_keep_cached(tpc_out *o, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;
	if (!len || end < off)
		return;
	/* within a page of the last range (records written in order): one range */
	if (o->nkeep && off >= o->keep[2 * o->nkeep - 2] && off <= o->keep[2 * o->nkeep - 1] + 4096) {
		if (end > o->keep[2 * o->nkeep - 1])
			o->keep[2 * o->nkeep - 1] = end;
		return;
	}
	if (o->nkeep == o->capkeep && tpc_grow((void **)&o->keep, &o->capkeep, o->nkeep + 1, 2 * sizeof(*o->keep)))
		return;
	o->keep[2 * o->nkeep] = off;
	o->keep[2 * o->nkeep + 1] = end;
	o->nkeep++;
}

/* The file is written and synced: the kept ranges are read back into the
 * page cache, when direct writes left them out of it. */
static void prefetch_kept(tpc_out *o)
{
	for (size_t k = 0; o->dio && k < o->nkeep; k++) {
		uint64_t a = o->keep[2 * k], z = o->keep[2 * k + 1] < o->end ? o->keep[2 * k + 1] : o->end;
		if (z > a)
			(void)posix_fadvise(o->fd, (off_t)a, (off_t)(z - a), POSIX_FADV_WILLNEED);
	}
}

/* The file is closed or gone: its direct state and its buffers go. */
static void release_buffers(tpc_out *o)
{
	free(o->keep);
	o->keep = NULL;
	o->nkeep = o->capkeep = 0;
	tpc__dio_release(o);
	tpc__buf_put(o->scratch, o->scratch_len);
	o->scratch = NULL;
	o->scratch_len = 0;
}

uint8_t *tpc_out_scratch(tpc_out *o, size_t n)
{
	if (o->scratch_len >= n)
		return o->scratch;
	tpc__buf_put(o->scratch, o->scratch_len);
	o->scratch_len = 0;
	if ((o->scratch = tpc__buf_get(n, &o->scratch_len)) == NULL)
		o->scratch_len = 0;
	return o->scratch;
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
			return tpc__out_write_fail(o, errno, (int64_t)off, e);
		}
		if (w == 0)
			return tpc__out_write_fail(o, ENOSPC, (int64_t)off, e);
		off += (uint64_t)w;
		tpc__out_written_to(o, off);
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
int tpc__out_pwrite_pieces(tpc_out *o, const void *p, size_t n, uint64_t off, size_t piece, tpc_err *e)
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
	int r = tpc__dio_flush(o, true, e);
	if (r)
		return r;
	/* CHUNK at a time: progress and signals stay responsive */
	return tpc__out_pwrite_pieces(o, p, n, off, CHUNK, e);
}

int tpc_out_writev(tpc_out *o, struct iovec *iov, int n, tpc_err *e)
{
	uint64_t total = 0;
	bool staged;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	int ret = tpc__dio_seq(o, iov, n, total, &staged, e);
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
	int ret = tpc__dio_seq(o, &v, 1, n, &staged, e);
	if (!ret && !staged) /* past everything in flight: no wait */
		ret = tpc__out_pwrite_pieces(o, p, n, o->size, CHUNK, e);
	if (!ret)
		o->size += n;
	return ret;
}

uint8_t *tpc_out_room(tpc_out *o, size_t *room)
{
	return tpc__dio_room(o, room);
}

int tpc_out_room_used(tpc_out *o, size_t k, tpc_err *e)
{
	int ret = tpc__dio_room_used(o, k, e);
	if (!ret)
		o->size += k;
	return ret;
}

int tpc_out_copy_at(tpc_out *o, const tpc_map *src, uint64_t src_off, uint64_t len,
		    uint64_t dst_off, tpc_err *e)
{
	if (src_off > src->size || len > src->size - src_off)
		return tpc_err_set(e, TPC_EINPUT, "internal: copy range past the end of '%s'", src->path);
	bool done = false;
	int sr = tpc__dio_flush(o, false, e);
	if (!sr)
		sr = tpc__dio_copy(o, src, &src_off, &len, &dst_off, &done, e);
	if (sr || done)
		return sr;
	bool try_kernel = kernel_copy && src->fd >= 0;
	/* The kernel's copy keeps the source's page phase: into an output
	 * offset in another phase it writes each 64 KiB piece across two
	 * pages, in small folios: several times the folios of an in-phase
	 * copy (measured: BENCHMARKS.md). Such a copy is written
	 * from the mapping instead (below), 64 KiB pieces on the output's grid
	 * as the kernel's own copy writes them. */
	bool phase = len >= (1u << 20) && src->data && ((src_off ^ dst_off) & 4095);
	if (phase) {
		bool staged;
		int r = tpc__dio_stage_copy(o, src, src_off, len, dst_off, &staged, e);
		if (r || staged)
			return r;
		try_kernel = false;
	}
	while (len && try_kernel) {
		loff_t in = (loff_t)src_off, outp = (loff_t)dst_off;
		size_t k = len > (64u << 20) ? (64u << 20) : (size_t)len;
		/* The kernel writes the copy 64 KiB at a time from where the call
		 * starts: a large copy begins with the piece up to the next 64 KiB
		 * of the output, so those writes land on whole 64 KiB folios
		 * (fewer page-cache folios when the source is in the same page
		 * phase, see tpc_ckpt_copy_residue; measured: BENCHMARKS.md). */
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
			return tpc__out_write_fail(o, errno, (int64_t)dst_off, e);
		}
		if (r == 0) {
			try_kernel = false;
			break;
		}
		src_off += (uint64_t)r;
		dst_off += (uint64_t)r;
		len -= (uint64_t)r;
		tpc__out_written_to(o, dst_off);
	}
	/* No kernel copy (another file system, turned off, or out of phase): from the
	 * mapping a chunk at a time, each chunk's pages dropped behind it, or the
	 * whole range would stay in the resident set. */
	enum { STEP = 8 << 20, PIECE = 64 << 10 };
	int ret = 0;
	while (len && !ret) {
		size_t k = len > STEP ? STEP : (size_t)len;
		tpc_map_populate(src, src_off, k);
		/* Out of phase: 64 KiB pieces, so 64 KiB folios, not 2 MiB ones:
		 * on a VM with free page reporting a 2 MiB folio is memory the
		 * host took back, and the first write to it faults page by page
		 * (measured: BENCHMARKS.md). */
		ret = tpc__out_pwrite_pieces(o, src->data + src_off, k, dst_off, phase ? PIECE : CHUNK, e);
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
	int r = tpc__dio_flush(o, true, e);
	if (r)
		return r;
	if (ftruncate(o->fd, (off_t)size) != 0)
		return tpc__out_write_fail(o, errno, -1, e);
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
		return tpc__out_write_fail(o, errno, -1, e);
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
	int r = tpc__dio_flush(o, true, e);
	if (r)
		return r;
	/* a reserved size that was not all written: the file ends where the
	 * bytes do, as it would have without the reservation */
	if (o->reserved > o->end && ftruncate(o->fd, (off_t)o->end) != 0)
		return tpc__out_write_fail(o, errno, -1, e);
	o->reserved = 0;
	if (fsync(o->fd) != 0 && errno != EINVAL)
		return tpc__out_write_fail(o, errno, -1, e);
	return 0;
}

int tpc_out_commit(tpc_out *o, tpc_err *e)
{
	int r = tpc_out_finish(o, e);
	if (r)
		return r;
	prefetch_kept(o);
	release_buffers(o);
	/* Renamed while still open, so still locked: no sweeping run takes the
	 * finished file for a dead run's (see create_temp). Without
	 * TPC_OUT_FORCE a target that appeared since tpc_out_open (another run
	 * finished first) is not replaced: the check at open is repeated
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
			return tpc_err_at(e, TPC_EUSAGE, o->path, NULL, "output appeared while this run was writing it (another run?); "
						   "use --force to overwrite it");
		}
		tpc_err_sys(e, TPC_EIO, err, "cannot rename the temporary file into place");
		tpc_err_path(e, o->path);
		return TPC_EIO;
	}
	tmp_unregister(o->tmp);
	free(o->tmp);
	o->tmp = NULL;
	if (o->fd >= 0) {
		r = close(o->fd);
		o->fd = -1;
		if (r != 0) {
			int err = errno;
			unlink(o->path); /* a failed output is not left under its name */
			return tpc__out_write_fail(o, err, -1, e);
		}
	}
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
	/* the name goes while the file is still locked (see create_temp): a
	 * sweeper never sees it unlocked under its name */
	if (o->tmp)
		unlink(o->tmp);
	if (o->fd >= 0 && o->tmp)
		close(o->fd);
	o->fd = -1;
	release_buffers(o);
	if (o->tmp) {
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
		ret = tpc_err_at(e, TPC_EINPUT, path, NULL, "file is %llu bytes, more than the %llu allowed",
				  (unsigned long long)m.size, (unsigned long long)cap);
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

int tpc_parse_file(const char *path, uint64_t cap, tpc_parse_fn parse, void *obj, tpc_err *e)
{
	char *text = NULL;
	size_t len = 0;
	int ret = tpc_read_file(path, cap, &text, &len, e);
	if (!ret)
		ret = parse(obj, text, len, path, e);
	free(text);
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
		ret = tpc_err_at(e, TPC_EIO, path, NULL, "exists and is not a directory");
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
