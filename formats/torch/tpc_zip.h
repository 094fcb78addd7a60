/*
 * tpc_zip.h - the zip container of torch.save checkpoints: a checked reader over
 * a mapped file, and a writer that emits what torch's own writer (miniz, in
 * caffe2/serialize/inline_container.cc) emits.
 *
 * Reader. tpc_zip_open_from_buffer() takes the bytes of the whole file (the
 * read-only mapping) and builds a table of entries: name, method, sizes,
 * CRC-32, local-header offset and the offset of the first payload byte, read
 * from the local header itself. Every field read from the file is
 * bounds-checked, and the archive is validated as a unit before any entry is
 * handed out: each entry's data lies inside the file, entries do not overlap
 * each other or the central directory, names are unique and free of NUL
 * bytes, nothing is encrypted, the method is STORED (0) or DEFLATED (8), each
 * local header agrees with its central-directory entry (name, method, and
 * the sizes and CRC where the local header carries them), and each data
 * descriptor agrees with the central directory. libzip (with ZIP_CHECKCONS)
 * then opens the same bytes as a second, independent opinion, and its entry
 * table must agree with ours (a parser differential is an error, not a
 * choice). Every failure is TPC_EINPUT through TPC_CORRUPT, with the file
 * path, the byte offset and the entry name in the message. A file that is a
 * Git LFS pointer, or that has no end-of-central-directory record (a partial
 * download: torch says "failed finding central directory"), gets a message
 * that says so. Bytes after the end records (an appended signature, padding
 * from a copy tool), up to TPC_ZIP_MAX_TRAILING of them, are not part of the
 * archive: torch loads such files, and so does this reader, which sets `size`
 * to the archive's end and counts them in `trailing`; more is refused.
 *
 * torch takes the archive prefix (the top-level folder, "archive" or the file
 * name without extension) from the first central-directory entry; so does
 * tpc_zip_prefix(), and tpc_zip_find("data.pkl") looks up "<prefix>/data.pkl".
 * The entry order is not fixed (torch 1.6 wrote "version" first): look records
 * up by name.
 *
 * STORED payloads are used in place: tpc_zip_stored() returns a pointer into
 * the mapping. DEFLATED payloads (legal: torch reads any zip, and a zip bomb
 * is a DEFLATED entry) are inflated by tpc_zip_inflate() into a buffer that
 * grows as output arrives; the declared size is never trusted for the
 * allocation, and output beyond the declared size or beyond the caller's cap
 * is an error. CRC-32 is checked on inflate; for STORED entries it is
 * optional (tpc_zip_verify_crc). A CRC of 0 means "not computed" (torch >=
 * 2.6 with compute_crc32=False) and is never checked.
 *
 * Writer. tpc_zipw_* streams a zip into a tpc_out (lib/tpc_io.h) with torch's
 * conventions, so that torch's reader, including its mmap path that computes
 * storage offsets from the layout, reads it like its own output. Small
 * records go through tpc_zipw_add(); a large record is tpc_zipw_begin(), then
 * the caller writes exactly `size` payload bytes to the output at its
 * sequential position (tpc_out_write, tpc_out_copy), then tpc_zipw_end() with
 * the CRC. tpc_zipw_finish() writes the central directory and the end
 * records; the caller commits the tpc_out. The layout of a record is a pure
 * function of (cursor, name length, size): tpc_zip_plan_record() gives it,
 * so a whole file can be laid out before a byte is written.
 *
 * Byte layout as torch writes it (all integers little-endian; "zip64" below
 * means: the record's size >= 0xFFFFFFFF or its local-header offset >=
 * 0xFFFFFFFF, the thresholds miniz and torch's getPadding() use):
 *
 *   1. local file header, one per record, at the cursor (30 bytes + name + extra)
 *        1.1  u32 signature 0x04034b50 ("PK\3\4"); a torch file starts with it
 *        1.2  u16 version needed to extract: 0
 *        1.3  u16 flags: 0x0808 (bit 3 data descriptor, bit 11 UTF-8 name);
 *             0x0800 for an empty record, which has no descriptor
 *        1.4  u16 method: 0 (STORED)
 *        1.5  u16 time, u16 date: 0
 *        1.6  u32 crc32, u32 compressed size, u32 uncompressed size: 0
 *        1.7  u16 name length, u16 extra length
 *        1.8  name: "<prefix>/<record>", not NUL-terminated
 *        1.9  extra, zip64 only: u16 0x0001, u16 len, then u64 size and u64 0
 *             (the compressed size, unknown when miniz writes the header) if
 *             size >= 0xFFFFFFFF, then u64 local-header offset if that is
 *             >= 0xFFFFFFFF (non-standard in a local header; miniz does it)
 *        1.10 extra, always: u16 0x4246 ("FB"), u16 pad, pad bytes 'Z', with
 *             pad = the least n >= 0 that puts the payload at a multiple of 64
 *   2. payload: `size` bytes at data offset = header + 30 + name + extra,
 *      data offset % 64 == 0
 *   3. data descriptor, when size > 0: u32 0x08074b50 ("PK\7\8"), u32 crc32,
 *      then u32 compressed size, u32 size (16 bytes), or, zip64, u64
 *      compressed size, u64 size (24 bytes)
 *   4. central directory, one entry per record in write order (46 bytes + name + extra)
 *        4.1  u32 0x02014b50 ("PK\1\2"), u16 version made by 0, u16 needed 0
 *        4.2  u16 flags (as 1.3), u16 method 0, u16 time 0, u16 date 0
 *        4.3  u32 crc32 (0 for an empty record; 0 = "not computed" as well)
 *        4.4  u32 compressed size, u32 size: min(size, 0xFFFFFFFF)
 *        4.5  u16 name length, u16 extra length, u16 comment length 0,
 *             u16 disk 0, u16 internal attributes 0, u32 external attributes 0
 *        4.6  u32 local-header offset: min(offset, 0xFFFFFFFF)
 *        4.7  name, then, zip64 only, extra u16 0x0001, u16 len, u64 size and
 *             u64 compressed size if size >= 0xFFFFFFFF, u64 local-header
 *             offset if >= 0xFFFFFFFF
 *   5. zip64 end of central directory record, always (56 bytes): u32
 *      0x06064b50, u64 44, u16 made by 0x031E, u16 needed 45, u32 disk 0,
 *      u32 directory disk 0, u64 entries on disk, u64 entries, u64 directory
 *      size, u64 directory offset
 *   6. zip64 end of central directory locator (20 bytes): u32 0x07064b50,
 *      u32 disk 0, u64 offset of 5, u32 number of disks 1
 *   7. end of central directory (22 bytes): u32 0x06054b50, u16 disk 0,
 *      u16 directory disk 0, u16 entries on disk and u16 entries
 *      (min(n, 0xFFFF)), u32 directory size and u32 directory offset
 *      (min(x, 0xFFFFFFFF)), u16 comment length 0
 *
 * Reading accepts more than this: any zip that torch's reader accepts and
 * that is STORED or DEFLATED (Python zipfile output: no descriptors, no
 * padding, DEFLATED, another prefix), zip64 or not, with more than 65535
 * entries or records over 4 GiB.
 */
#ifndef TPC_ZIP_H
#define TPC_ZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_buf.h"
#include "tpc_err.h"
#include "tpc_io.h"

enum {
	TPC_ZIP_STORED = 0,
	TPC_ZIP_DEFLATED = 8,
	TPC_ZIP_ALIGN = 64, /* torch's kFieldAlignment */
	TPC_ZIP_MAX_TRAILING = 65535, /* bytes after the end records that are ignored */
};

/* ----------------------------------------------------------------------- */
/* Reader                                                                   */

typedef struct tpc_zip_entry {
	const char *name;       /* full name, NUL-terminated (names with NUL are refused) */
	uint16_t name_len;
	uint16_t method;        /* TPC_ZIP_STORED or TPC_ZIP_DEFLATED */
	uint16_t flags;         /* general-purpose flags from the central directory */
	uint32_t crc32;         /* 0 = not computed */
	uint64_t csize;         /* bytes in the file */
	uint64_t usize;         /* bytes after inflating (== csize when STORED) */
	uint64_t header_offset; /* local file header */
	uint64_t data_offset;   /* first payload byte */
	uint32_t desc_len;      /* bytes of data descriptor after the payload, 0 if none */
} tpc_zip_entry;

typedef struct tpc_zip {
	const uint8_t *data;     /* the whole file (not owned unless opened from a file) */
	uint64_t size;           /* up to the end of the end records */
	uint64_t trailing;       /* bytes after them, not part of the archive (ignored) */
	char *path;              /* for messages; owned copy, "" if none */
	tpc_zip_entry *entries;  /* central-directory order */
	size_t n;
	const tpc_zip_entry **by_name; /* sorted by name, for lookups */
	char *names;             /* storage of every entry name */
	char *prefix;            /* top-level folder of the first entry, without '/'; "" if none */
	uint64_t cd_offset, cd_size;
	bool zip64;              /* the archive has zip64 end records */
	tpc_map map;             /* only for tpc_zip_open_from_file */
	bool own_map;
	const tpc_map *backing;  /* from_map: the file data[] lies in (borrowed); else NULL */
	uint64_t base;           /* offset of data[0] in backing */
} tpc_zip;

/* Zero the struct (no allocation); tpc_zip_release() is then safe. */
void tpc_zip_init(tpc_zip *z);

/*
 * Open the zip in data[0..size). `data` must stay valid (mapped) until
 * tpc_zip_release(). `path` is used in messages only (may be NULL). On error
 * `z` holds nothing that needs releasing, but tpc_zip_release() is harmless.
 */
int tpc_zip_open_from_buffer(tpc_zip *z, const uint8_t *data, uint64_t size, const char *path,
			     tpc_err *e);
/*
 * Open the zip in bytes [off, off+len) of the mapped file `m` (a torch file,
 * or an item inside a bigger file), which must outlive `z`. Same checks as
 * from a buffer, but the pages the checks touch (every local header and data
 * descriptor, the central directory) are dropped from the resident set as it
 * goes (tpc_map_drop), and libzip's second opinion reads the file with pread
 * instead of through the mapping: on a page cache of large folios each
 * touched header would otherwise keep up to 2 MiB mapped, a few hundred MiB
 * for a checkpoint of a few hundred tensors.
 */
int tpc_zip_open_from_map(tpc_zip *z, const tpc_map *m, uint64_t off, uint64_t len, const char *path,
			  tpc_err *e);
/* Map `path` read-only and open it; the mapping is released with `z`. */
int tpc_zip_open_from_file(tpc_zip *z, const char *path, tpc_err *e);
void tpc_zip_release(tpc_zip *z);

/* Entries in central-directory order. */
size_t tpc_zip_count(const tpc_zip *z);
const tpc_zip_entry *tpc_zip_entry_at(const tpc_zip *z, size_t i);

/* The archive prefix, "" when the first entry has no '/' (torch refuses
 * such files: "file in archive is not in a subdirectory"). */
const char *tpc_zip_prefix(const tpc_zip *z);
/* Entry "<prefix>/<record>" (e.g. record "data.pkl"), or NULL. */
const tpc_zip_entry *tpc_zip_find(const tpc_zip *z, const char *record);
/* Entry with exactly this full name, or NULL. */
const tpc_zip_entry *tpc_zip_find_raw(const tpc_zip *z, const char *name);
/* torch's layout rule: the prefix is non-empty and every entry is under it.
 * TPC_EINPUT naming the first entry that is not. */
int tpc_zip_check_prefix(const tpc_zip *z, tpc_err *e);

/* A STORED entry's payload, in place (a pointer into the mapping). A
 * DEFLATED entry is TPC_EINPUT. */
int tpc_zip_stored(const tpc_zip *z, const tpc_zip_entry *ent, const uint8_t **p, uint64_t *len,
		   tpc_err *e);
/*
 * Inflate a DEFLATED entry (a STORED one is copied) into a new buffer
 * (*out, free() it). Refused, before any allocation, when the declared size
 * is over `cap`; refused while streaming as soon as the output would pass the
 * declared size; the buffer grows gradually, so a lying header cannot make it
 * allocate more than the data actually produces. The CRC-32 is checked
 * unless it is 0.
 */
int tpc_zip_inflate(const tpc_zip *z, const tpc_zip_entry *ent, uint64_t cap, uint8_t **out,
		    uint64_t *len, tpc_err *e);
/* Either of the two: a STORED entry in place (*owned = NULL), a DEFLATED
 * entry inflated into *owned (free() it); *p points at the bytes. */
int tpc_zip_read(const tpc_zip *z, const tpc_zip_entry *ent, uint64_t cap, const uint8_t **p,
		 uint64_t *len, uint8_t **owned, tpc_err *e);
/* Check a STORED entry's CRC-32 (in parallel for large entries); an entry
 * with CRC 0 passes (not computed). DEFLATED entries are checked by
 * tpc_zip_inflate() and are TPC_EINPUT here. */
int tpc_zip_verify_crc(const tpc_zip *z, const tpc_zip_entry *ent, tpc_err *e);

/* A TorchScript archive (torch.jit.save), not a torch.save checkpoint: it has
 * "<prefix>/constants.pkl" or "<prefix>/code/..." records, or
 * "<prefix>/.data/version" without "<prefix>/data.pkl". */
bool tpc_zip_is_torchscript(const tpc_zip *z);

/* Do these first bytes look like a Git LFS pointer file ("version
 * https://git-lfs...")? Used by every format's detector. */
bool tpc_zip_is_lfs_pointer(const uint8_t *p, uint64_t n);

/* CRC-32 (zlib's) of p[0..n); for large n split across OpenMP threads and
 * joined with crc32_combine64. n may exceed 4 GiB. */
uint32_t tpc_crc32_parallel(const uint8_t *p, uint64_t n);
/* Continue a CRC-32 serially (zlib's value; n may exceed 4 GiB): carry-less
 * multiply folding where the CPU has PCLMULQDQ, zlib's crc32 otherwise
 * (crc32.c). */
uint32_t tpc_crc32_update(uint32_t crc, const uint8_t *p, uint64_t n);
/* crc32.c's paths, for the tests: zlib's crc32 over chunks; the folding
 * level the CPU has (0 none, 1 PCLMULQDQ, 2 AVX-512 VPCLMULQDQ); the CRC at
 * a level (at most the CPU's; each falls back to the one below it for short
 * buffers); the six fold constants (zeros without the folding paths). */
uint32_t tpc__crc32_portable(uint32_t crc, const uint8_t *p, uint64_t n);
int tpc__crc32_level(void);
uint32_t tpc__crc32_at(int level, uint32_t crc, const uint8_t *p, uint64_t n);
extern const uint64_t tpc__crc32_fold_k[6];

/* ----------------------------------------------------------------------- */
/* Layout (pure functions)                                                  */

/* Where a record goes when its local header starts at `cursor`. */
typedef struct tpc_zip_plan {
	uint64_t header_offset; /* == cursor */
	uint64_t data_offset;   /* payload, a multiple of 64 */
	uint64_t end;           /* next cursor: after the payload and the descriptor */
	uint32_t header_len;    /* 30 + name + extra = data_offset - header_offset */
	uint32_t extra_len;     /* zip64 field (if any) + FB field */
	uint32_t zip64_len;     /* bytes of the zip64 field (0, 12, 20 or 28) */
	uint32_t pad;           /* 'Z' bytes in the FB field */
	uint32_t desc_len;      /* 0 (empty record), 16, or 24 (zip64) */
} tpc_zip_plan;

/* Longest full name a record may have. */
#define TPC_ZIP_NAME_MAX 65535u
/* Largest local header (30 + name + zip64 28 + FB 4 + pad 63). */
#define TPC_ZIP_LOCAL_MAX (30u + TPC_ZIP_NAME_MAX + 28u + 4u + 63u)
/* Bytes after the central directory: zip64 EOCD (56) + locator (20) + EOCD (22). */
#define TPC_ZIP_END_LEN 98u

/* Lay out a record with a full name of `name_len` bytes and `size` payload
 * bytes at `cursor`. -1 when the name is too long or the layout overflows. */
int tpc_zip_plan_record(uint64_t cursor, size_t name_len, uint64_t size, tpc_zip_plan *p);
/* Bytes of the record's central-directory entry. */
uint64_t tpc_zip_central_len(size_t name_len, uint64_t size, uint64_t header_offset);
/* Encode the local header of a planned record into buf (p->header_len bytes). */
void tpc_zip_encode_local(uint8_t *buf, const char *name, size_t name_len, uint64_t size,
			  const tpc_zip_plan *p);
/* Encode the data descriptor (p->desc_len bytes, none for an empty record). */
void tpc_zip_encode_descriptor(uint8_t *buf, uint64_t size, uint32_t crc32, const tpc_zip_plan *p);

/* A written record, as the central directory needs it. */
typedef struct tpc_zipw_rec {
	char *name;             /* full name, owned */
	uint64_t header_offset;
	uint64_t size;
	uint32_t crc32;
} tpc_zipw_rec;

/* Append the central directory for recs[0..n) starting at cd_offset, then the
 * zip64 end record, the locator and the end record (item 4-7 above). */
void tpc_zip_encode_tail(tpc_buf *b, const tpc_zipw_rec *recs, size_t n, uint64_t cd_offset);

/* ----------------------------------------------------------------------- */
/* Writer                                                                   */

typedef struct tpc_zipw {
	tpc_out *out;
	const char *prefix;  /* borrowed; NULL or "" = names are used as given */
	uint64_t base;       /* the output position where the archive starts */
	uint64_t pos;        /* the zip cursor: bytes of zip written so far (its offsets
	                        run from the archive's start, as torch.save into a
	                        stream at any position writes them: a DCP item) */
	tpc_zipw_rec *recs;
	size_t n, cap;
	bool in_record;      /* between tpc_zipw_begin and tpc_zipw_end */
	tpc_zip_plan cur;    /* the open record */
	uint64_t cur_size;
	bool failed;         /* an earlier call failed: only release is allowed */
	bool finished;
} tpc_zipw;

/* Start a zip at the output's current position (0 for a file of its own; a
 * DCP item's offset in its .distcp): its offsets run from there. No allocation;
 * `prefix` ("archive", or the output's base name without extension) must
 * outlive the writer. Records are named "<prefix>/<name>". */
void tpc_zipw_init(tpc_zipw *w, tpc_out *out, const char *prefix);
/* A whole record from memory (computes the CRC). */
int tpc_zipw_add(tpc_zipw *w, const char *name, const void *data, uint64_t len, tpc_err *e);
/* Write the local header of a `size`-byte record; *data_offset (may be NULL)
 * receives where the payload goes, which is the output's sequential position
 * on return. The caller then writes exactly `size` bytes sequentially. */
int tpc_zipw_begin(tpc_zipw *w, const char *name, uint64_t size, uint64_t *data_offset,
		   tpc_err *e);
/* Convenience: payload bytes through the writer (tpc_out_write). */
int tpc_zipw_write(tpc_zipw *w, const void *p, size_t n, tpc_err *e);
/* Close the record: checks that `size` bytes were written, writes the data
 * descriptor. `crc32` is the payload's CRC-32 (0 = not computed). */
int tpc_zipw_end(tpc_zipw *w, uint32_t crc32, tpc_err *e);
/* Central directory and end records. Duplicate names are TPC_EUSAGE. The
 * caller then commits (or aborts) the tpc_out. */
int tpc_zipw_finish(tpc_zipw *w, tpc_err *e);
void tpc_zipw_release(tpc_zipw *w);

#endif
