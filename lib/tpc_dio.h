/*
 * tpc_dio.h - direct writes for tpc_out, and the pool of touched buffers;
 * private to lib/ (tpc_io.c and tpc_dio.c), not installed.
 *
 * Output that takes the page cache costs its first touch of every page: a
 * buffered write (and the kernel's copy_file_range) copies each byte into a
 * newly allocated folio, and on a virtual machine that memory is often
 * memory the host has taken back (free page reporting); written with
 * O_DIRECT the same bytes are disk-bound at a fraction of the system time
 * (measured: BENCHMARKS.md). So:
 *  - a large copy is read with pread into the staging buffers and written
 *    from there. With io_cfg.direct_stage off (TPCONV_DIRECT_STAGE=0) a copy
 *    whose source sits in the mapping at the same offset within the file
 *    system's O_DIRECT memory alignment as its output offset is written
 *    straight from the mapping (the disk reads the input's page-cache
 *    pages). That saves the copy, but a write is cut into a memory segment
 *    per physically contiguous piece, and an input cached in 4 KiB pages (a
 *    file written with small buffered writes, as torch.save's are) makes
 *    those writes many times slower than from the huge-page buffers
 *    (measured: BENCHMARKS.md);
 *  - sequential writes of assembled bytes (a gather's runs, cast output) are
 *    staged in page-aligned buffers and written with O_DIRECT each time one
 *    fills: one user-space copy into a buffer that stays resident instead of
 *    the kernel's copy into new folios.
 * Only whole 4 KiB pages of the output go direct; ragged ends stay buffered,
 * so no page is ever both in the page cache and written around it. Any write
 * that is not the staged sequence's next byte (a pwrite at an offset, a copy,
 * a truncate, the fsync) first writes out what is staged (tpc__dio_flush).
 * File systems that do not report an O_DIRECT alignment (statx
 * STATX_DIOALIGN, Linux 6.1), or refuse the open or a write (EINVAL), keep
 * buffered writes. io_cfg.direct 0 (TPCONV_DIRECT=0) turns it off.
 *
 * The direct writes go out through a Linux AIO queue (io_submit), a few at a
 * time per output, so the writer goes on filling the next buffer (or
 * faulting in the next source pages) while the disk writes the last ones:
 * one synchronous write at a time left the writer idle for every write, and
 * a write that stalled on the disk stalled it whole. Staging has two
 * buffers, so one fills while the other is written. A buffer or a source
 * page range belongs to the queue until its write completes; the mapping's
 * pages are dropped then. Writes that extend the file complete inside
 * io_submit on ext4, so a writer that knows the size sets it first
 * (tpc_out_reserve), and for one that does not (a torch zip, a DCP rank
 * file) the queue sets the size 64 MiB past a write that would extend it
 * (reserve_ahead), cut back to the bytes written by tpc_out_finish. A
 * failed completion is reported by the next call that
 * waits on the queue (the latest at tpc_out_finish); a refused one (EINVAL)
 * or a short one is written again, buffered. Where the queue cannot be set
 * up, or with io_cfg.direct_async off (TPCONV_DIRECT_ASYNC=0), each direct
 * write completes before the next.
 *
 * An output's direct state (struct tpc_dio, tpc_out.dio) is made by the
 * first write that could go direct and freed by tpc__dio_release; NULL means
 * no direct write was tried yet.
 */
#ifndef TPC_DIO_H
#define TPC_DIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_err.h"
#include "tpc_io.h"

struct iovec;

/* ---- tpc_dio.c, for tpc_io.c ---- */

/* A 2 MiB-aligned buffer of at least n bytes, asked for transparent huge
 * pages (*len gets its size), from the pool of released ones when one is
 * big enough; NULL when out of memory. tpc__buf_put gives it back. */
uint8_t *tpc__buf_get(size_t n, size_t *len);
void tpc__buf_put(uint8_t *b, size_t len);

/* Sequential bytes for o->size onwards, `total` of them in iov[0..n):
 * staged when they are many and the file takes direct writes (the part up
 * to the next page boundary buffered first); *staged false when the caller
 * writes them. Does not move o->size. */
int tpc__dio_seq(tpc_out *o, const struct iovec *iov, int n, uint64_t total, bool *staged, tpc_err *e);

/* The direct part of a copy of src[*s, *s + *len) to [*d, ...) (nothing for
 * copies under 1 MiB): staged, or (io_cfg.direct_stage off) written from
 * the mapping when the source is in the output's O_DIRECT memory phase. *s,
 * *d and *len move past what was written; *done when nothing is left for
 * the caller. */
int tpc__dio_copy(tpc_out *o, const tpc_map *src, uint64_t *s, uint64_t *len, uint64_t *d, bool *done,
		  tpc_err *e);

/* A copy whose source is out of the output's page phase, src[s, s+len) to
 * [d, d+len): staged through the buffers (pread), the part up to the
 * output's next page buffered. *done false when it does not apply (no
 * direct writes, no buffer, the source has no file). */
int tpc__dio_stage_copy(tpc_out *o, const tpc_map *src, uint64_t s, uint64_t len, uint64_t d, bool *done,
			tpc_err *e);

/* The staging buffer's free bytes at the output's end, for a writer that
 * reads its next bytes straight into them (*room of them, > 0), or NULL when
 * the output is not staging there (tpc_out_write's own path applies). */
uint8_t *tpc__dio_room(tpc_out *o, size_t *room);
/* k bytes (at most *room) were put where tpc__dio_room pointed: staged, and
 * a full buffer written as stage_add writes it. */
int tpc__dio_room_used(tpc_out *o, size_t k, tpc_err *e);

/* Write out what is staged; with `drain`, also wait for every direct write
 * in flight (the first failure returned). */
int tpc__dio_flush(tpc_out *o, bool drain, tpc_err *e);

/* The file is closed or gone: the queue (io_destroy waits for what is in
 * flight), the O_DIRECT descriptor and the buffers go; o->dio is NULL. */
void tpc__dio_release(tpc_out *o);

/* ---- tpc_io.c, for tpc_dio.c ---- */

/* Bytes of the mapped inputs (the direct-write policy). */
uint64_t tpc__io_input_bytes(void);
/* Read [off, off+len) of m with pread: 0, or -1 (errno set when a read
 * failed; 0 left alone at the end of the file). */
int tpc__map_pread(const tpc_map *m, uint64_t off, uint64_t len, void *dst);
/* A failed write to o at byte `at` of the file (-1: not a write at one
 * place, as fsync): the error filled in, TPC_EIO returned. */
int tpc__out_write_fail(tpc_out *o, int err, int64_t at, tpc_err *e);
/* Bytes of o up to `end` have been written (write-behind, the file's end). */
void tpc__out_written_to(tpc_out *o, uint64_t end);
/* Buffered: p[0..n) at off in calls that each end on the output's `piece`
 * grid. */
int tpc__out_pwrite_pieces(tpc_out *o, const void *p, size_t n, uint64_t off, size_t piece, tpc_err *e);

#endif
