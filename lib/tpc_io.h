/*
 * tpc_io.h - input mappings and atomic output files.
 *
 * Inputs are mapped read-only (mmap, MAP_PRIVATE, PROT_READ): opening a
 * multi-GB file costs a system call and no copy; tensor bytes are read in
 * place. Empty files are "mapped" as a zero-length buffer.
 *
 * Outputs are never written under their final name. tpc_out_open() creates a
 * temporary file beside the target (".<name>.tpc-XXXXXX", O_CREAT|O_EXCL);
 * tpc_out_commit() fsyncs it, renames it over the target and fsyncs the
 * directory; tpc_out_abort() removes it. Every open temporary file is also on a
 * process-wide list that the SIGINT/SIGTERM handler (tpc_io_install_signals)
 * unlinks before the process dies, so an interrupted run leaves nothing behind.
 * Without `force`, an existing target is refused before any byte is written,
 * and again at the rename (RENAME_NOREPLACE), so a run never replaces a
 * target another run committed meanwhile. A temporary is flock()ed by its
 * run from its creation until its name is gone (renamed into place or
 * removed); the kernel drops the lock when the process dies, even by SIGKILL,
 * so an unlocked temporary is a dead run's leftover and is removed at once:
 * tpc_out_open() removes those of its target, tpc_out_sweep() those of a
 * whole folder output (every run writing one calls it). A live run's
 * temporary is never removed: the instant between creating it and locking it
 * is closed on the creator's side (one that finds its file gone makes another).
 * A target that is the same file (device + inode) as an opened input is always
 * refused: the llama.cpp gguf-split lesson.
 *
 * All I/O loops retry EINTR and short reads/writes; offsets are 64-bit.
 */
#ifndef TPC_IO_H
#define TPC_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tpc_err.h"

typedef struct tpc_map {
	char *path;          /* owned copy */
	int fd;              /* kept open for copy_file_range; -1 if none */
	const uint8_t *data; /* NULL when size == 0 */
	uint64_t size;
	dev_t dev;
	ino_t ino;
	bool noted;          /* registered as an input (forgotten on close) */
} tpc_map;

/* Map a file read-only. Errors: missing/unreadable file -> TPC_EINPUT with
 * errno; a directory -> TPC_EINPUT. The map is registered as an input so that
 * outputs refuse to overwrite it while it is open (tpc_map_close forgets it). */
int tpc_map_open(tpc_map *m, const char *path, tpc_err *e);
void tpc_map_close(tpc_map *m);
/* Drop the pages of [off, off+len) from this process's resident set once
 * they have been read (MADV_DONTNEED on the private read-only mapping; a
 * later access faults them back in from the page cache). The range is widened
 * to whole aligned 512-page blocks (2 MiB with 4 KiB pages), the largest
 * page-cache folio a fault maps at once, so neighbouring bytes lose their
 * pages too: harmless, they fault back in. Keeps the RSS of a pass over a
 * large input bounded. Owned-memory sources (fd < 0) and files no larger
 * than one block (what a reader keeps of a larger one) are left alone. */
void tpc_map_drop(const tpc_map *m, uint64_t off, uint64_t len);
/* A forward reader has passed [off, end): drop the whole blocks of it, and
 * keep the block `end` falls in, which the reader goes on to use (a later
 * drop, or one of the whole range, takes it). */
void tpc_map_drop_passed(const tpc_map *m, uint64_t off, uint64_t end);

/* Map the pages of [off, off+len) into this process's page tables now
 * (MADV_POPULATE_READ). A pwritev from a mapping needs its source pages
 * mapped: the kernel's buffered write copies with faults off, faults the
 * pages in only after a copy came up short, and then writes the rest of the
 * call in halved pieces, down to single 4 KiB page-cache folios (measured:
 * BENCHMARKS.md). */
void tpc_map_populate(const tpc_map *m, uint64_t off, uint64_t len);

/* The mapping is read in small places far apart (a walk over records, not a
 * pass over the bytes): a fault reads the page it needs and no read-around
 * (MADV_RANDOM). A fault on a page not in the page cache otherwise reads
 * read_ahead_kb around it (8 MiB on a virtio disk here): a walk over the
 * item records of a DCP rank file just written with direct writes read the
 * whole file back from the disk (measured: bench/mdist_bench.sh). */
void tpc_map_advise_random(const tpc_map *m);

/* A second mapping of m's file, for one writer thread: a VMA of its own, so
 * that the drops of the thread's batches (tpc_map_drop) unmap no page another
 * thread's kernel copy is reading from. Two writers read the same pages of a
 * row-parallel weight (each its columns of every row); through one shared
 * mapping the first one's drop made the second one's pwritev come up short,
 * and the kernel then wrote the rest of that call in 4 KiB folios (measured:
 * BENCHMARKS.md). Returns NULL when m has
 * no file or the mapping fails (the caller keeps m's own mapping). */
const uint8_t *tpc_map_alias(const tpc_map *m);
void tpc_map_alias_close(const tpc_map *m, const uint8_t *alias);

/* Bytes [off, off+len) of m (in range), for a reader: read into buf (len
 * bytes) with pread(2) when m has a file descriptor, else (or on a read
 * error) a pointer into the mapping. pread takes no page faults, adds nothing
 * to the resident set and leaves nothing to drop, so a reader running beside
 * the writers (the shard checksums, merge's check) never unmaps pages a
 * writer's batch is about to copy. Hand the pointer back with
 * tpc_map_bytes_done, which drops the mapped pages when the mapping was
 * used. */
const uint8_t *tpc_map_bytes(const tpc_map *m, uint64_t off, uint64_t len, uint8_t *buf);
void tpc_map_bytes_done(const tpc_map *m, const uint8_t *p, uint64_t off, uint64_t len);

/* Register an extra path as an input (a directory's files, an index). */
void tpc_io_note_input(const char *path);
/* Is `path` (existing) the same file as a registered input? */
bool tpc_io_is_input(const char *path);

typedef struct tpc_out {
	char *path;     /* final name */
	char *tmp;      /* temporary name */
	int fd;
	uint64_t size;  /* bytes written through tpc_out_write (sequential position) */
	bool committed;
	unsigned flags; /* TPC_OUT_* given to tpc_out_open */
	/* the rest is the library's own */
	uint64_t wb;        /* write-behind: writeback started for [0, wb) */
	uint64_t end;       /* the end of the furthest byte written */
	uint64_t reserved;  /* the size tpc_out_reserve gave the file */
	uint8_t *scratch;   /* tpc_out_scratch's buffer */
	size_t scratch_len;
	struct tpc_dio *dio; /* direct writes (O_DIRECT, their queue and staging); NULL
			      * until the first write that could go direct */
	uint64_t *keep;      /* tpc_out_keep_cached's ranges: off, end pairs */
	size_t nkeep, capkeep;
} tpc_out;

enum { TPC_OUT_FORCE = 1 };

int tpc_out_open(tpc_out *o, const char *path, unsigned flags, tpc_err *e);
/* Did e's write fail for want of room (ENOSPC, EDQUOT, or EFBIG: a file size
 * limit)? A folder output keeps the files it finished then, so that the same
 * command, once there is room, resumes from them. */
bool tpc_out_no_room(const tpc_err *e);
/* Remove the temporaries (".<name>.tpc-XXXXXX") in folder `dir` that no live
 * run holds, whatever their target: the leftovers of runs killed with
 * SIGKILL. Not recursive. A folder output's writers call it for each folder
 * they write into, before they write (or refuse). */
void tpc_out_sweep(const char *dir);
/* Sequential write at the current position. */
int tpc_out_write(tpc_out *o, const void *p, size_t n, tpc_err *e);
/* Gather write of iov[0..n) at the current position (pwritev; partial
 * writes resumed), moving it. */
struct iovec;
int tpc_out_writev(tpc_out *o, struct iovec *iov, int n, tpc_err *e);
/* Positioned write (does not move the sequential position). */
int tpc_out_pwrite(tpc_out *o, const void *p, size_t n, uint64_t off, tpc_err *e);
/* Where the next bytes of a sequential write can be put in place: a pointer
 * into the output's staging buffer for direct writes with room for *room
 * bytes (> 0), or NULL when the output is not staging at its end (write with
 * tpc_out_write then, which may start staging). A writer that fills the
 * room itself (a read straight into it) saves tpc_out_write's copy. */
uint8_t *tpc_out_room(tpc_out *o, size_t *room);
/* The first k bytes (k <= *room) of that room now hold the output's next
 * bytes: they are written as tpc_out_write would have written them. */
int tpc_out_room_used(tpc_out *o, size_t k, tpc_err *e);
/* Copy `len` bytes from `src` at `src_off` to the current position, in the
 * kernel (copy_file_range) when possible, else through large pwrites from the
 * mapping. */
int tpc_out_copy(tpc_out *o, const tpc_map *src, uint64_t src_off, uint64_t len, tpc_err *e);
/* Like tpc_out_copy but to an explicit output offset. */
int tpc_out_copy_at(tpc_out *o, const tpc_map *src, uint64_t src_off, uint64_t len,
		    uint64_t dst_off, tpc_err *e);
/* The file will hold `size` bytes: its size is set now (no blocks are
 * allocated), so direct writes do not extend it. ext4 completes a direct
 * write that extends the file before io_submit returns (the size moves
 * under the inode lock), so only writes inside the size run several at a
 * time. tpc_out_finish cuts the file back to what was written, if less. */
int tpc_out_reserve(tpc_out *o, uint64_t size, tpc_err *e);
/* Bytes [off, off + len) of the output will be read back soon after it is
 * committed (a zip's records: the set check and a DCP .metadata walk them):
 * tpc_out_commit has them read into the page cache (POSIX_FADV_WILLNEED,
 * queued, not waited for) once the file is written, where direct writes
 * left it uncached; the walk otherwise waited for each of those pages in
 * turn, and a fault there read read_ahead_kb (8 MiB here) of tensor bytes
 * around it. Adjacent ranges are merged; best effort (out of memory: not
 * kept). */
void tpc_out_keep_cached(tpc_out *o, uint64_t off, uint64_t len);
/* A page-aligned buffer of at least n bytes that lives as long as the output
 * (reused by its writer from tensor to tensor, so its pages are touched once;
 * freed by tpc_out_commit and tpc_out_abort); NULL when out of memory. */
uint8_t *tpc_out_scratch(tpc_out *o, size_t n);
/* A buffer of at least n bytes for a pass over one tensor (*len gets its
 * size; NULL when out of memory), given back with tpc_scratch_put(p, *len).
 * Those of 1 MiB and more come from the writers' pool of touched buffers
 * instead of new memory, which can cost more to fault in than reading the
 * same bytes from the page cache (measured: BENCHMARKS.md). */
uint8_t *tpc_scratch_get(size_t n, size_t *len);
void tpc_scratch_put(uint8_t *p, size_t len);
/* Set the file size. */
int tpc_out_truncate(tpc_out *o, uint64_t size, tpc_err *e);
/* fsync, keeping the temporary open (and so locked against removal as a
 * leftover; still removed on abort or signal); a later tpc_out_commit closes
 * and renames. Lets a multi-file set be written whole before any file takes
 * its final name (one open descriptor per pending file). */
int tpc_out_finish(tpc_out *o, tpc_err *e);
int tpc_out_commit(tpc_out *o, tpc_err *e);
void tpc_out_abort(tpc_out *o); /* safe after commit (no-op) and on a zeroed struct */
/* Do o's large writes go to the file with O_DIRECT (the file system took the
 * descriptor and has refused no direct write)? False before the first write
 * that could go direct, and after the commit. */
bool tpc_out_is_direct(const tpc_out *o);

/*
 * Process-wide I/O settings. The library reads no environment: cmd/ reads
 * the TPCONV_* switches (tpc_cli_io_config) and hands them down once, before
 * the first input is opened; without a call the defaults below hold. They
 * exist to measure one path against another (BENCHMARKS.md) and as escape
 * hatches; the bytes written are the same either way.
 */
typedef struct tpc_io_config {
	int direct;           /* TPCONV_DIRECT: 1 O_DIRECT writes wherever the file system
			       * allows, 0 never, -1 (default) unless the inputs exceed
			       * three quarters of RAM */
	bool direct_async;    /* TPCONV_DIRECT_ASYNC: direct writes through an AIO queue (on) */
	bool direct_stage;    /* TPCONV_DIRECT_STAGE: direct copies in the input's page phase
			       * staged through huge-page buffers, not written from the
			       * mapping (on) */
	bool write_behind;    /* TPCONV_WRITE_BEHIND: buffered outputs flushed every 32 MiB (on) */
	bool joint;           /* TPCONV_JOINT: shard writes ranks that share a row-parallel
			       * weight in step, reading its rows once (on) */
	bool rss_guard;       /* TPCONV_NO_RSS_GUARD unset: shard drops input pages when its
			       * resident set grows (on) */
	uint64_t inflate_cap; /* TPCONV_INFLATE_CAP: the largest deflated zip member inflated
			       * (16 GiB) */
} tpc_io_config;

void tpc_io_config_defaults(tpc_io_config *c);
/* Set the process's settings; call before any I/O (not thread-safe). */
void tpc_io_configure(const tpc_io_config *c);
const tpc_io_config *tpc_io_settings(void);

/* Install SIGINT/SIGTERM/SIGHUP handlers that remove open temporaries and
 * then re-raise the signal, and ignore SIGXFSZ so that a file size limit
 * shows as a write error (EFBIG, exit 4). Idempotent. */
void tpc_io_install_signals(void);
/* A function the handler calls after removing the temporaries and before
 * the signal ends the process (cmd/ says what was kept): it must be
 * async-signal-safe (write(2), no stdio, no malloc). */
void tpc_io_on_interrupt(void (*note)(int sig));

/* Write a whole small file atomically (JSON index, manifest). */
int tpc_write_file_atomic(const char *path, const void *p, size_t n, unsigned flags, tpc_err *e);

/* Read a whole small file (JSON) into a malloc'd NUL-terminated buffer, at
 * most `cap` bytes (bigger -> TPC_EINPUT). */
int tpc_read_file(const char *path, uint64_t cap, char **out, size_t *len, tpc_err *e);
/* Read it and hand the text to parse(obj, text, len, path, e). */
typedef int (*tpc_parse_fn)(void *obj, const char *text, size_t len, const char *path, tpc_err *e);
int tpc_parse_file(const char *path, uint64_t cap, tpc_parse_fn parse, void *obj, tpc_err *e);
/* Defines fn, the tpc_parse_fn of a reader whose from_buffer takes
 * (T *obj, text, len, path, e): one line beside each *_from_file. */
#define TPC_PARSE_FN(fn, from_buffer)                                                           \
	static int fn(void *obj, const char *text, size_t len, const char *path, tpc_err *e) \
	{                                                                                       \
		return from_buffer(obj, text, len, path, e);                                    \
	}

/* Directory helpers. */
bool tpc_is_dir(const char *path);
bool tpc_exists(const char *path);
/* Create a directory (and parents) if missing. */
int tpc_mkdirs(const char *path, tpc_err *e);
/* Join dir + "/" + name into a malloc'd string (NULL on OOM). */
char *tpc_path_join(const char *dir, const char *name);
/* Base name (pointer into path) and directory (malloc'd, "." when none). */
const char *tpc_path_base(const char *path);
char *tpc_path_dir(const char *path);

/* Disable the in-kernel copy (tests, benchmarks). */
void tpc_io_set_kernel_copy(bool on);

#endif
