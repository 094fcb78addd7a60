/*
 * zip.c - torch's zip container: a checked reader (the writer is in
 * zip_write.c); see tpc_zip.h for the byte layout and the rules.
 *
 * The reader parses the end records and the central directory itself, with
 * the bounded cursor, because libzip does not expose local-header offsets and
 * checks less than a checkpoint reader needs (overlaps, data past the end,
 * descriptors). libzip then opens the same bytes with ZIP_CHECKCONS and must
 * agree. Our own checks run first so that a bad file gets a message that
 * names the entry and the offset, not libzip's one-line summary.
 */
#include <zip.h> /* libzip's */

#include "zip_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "tpc_util.h"

/* ----------------------------------------------------------------------- */
/* Reader                                                                   */

void tpc_zip_init(tpc_zip *z)
{
	memset(z, 0, sizeof(*z));
	z->map.fd = -1;
}

void tpc_zip_release(tpc_zip *z)
{
	if (!z)
		return;
	free(z->path);
	free(z->entries);
	free(z->by_name);
	free(z->names);
	free(z->prefix);
	if (z->own_map)
		tpc_map_close(&z->map);
	tpc_zip_init(z);
}

bool tpc_zip_is_lfs_pointer(const uint8_t *p, uint64_t n)
{
	static const char sig[] = "version https://git-lfs";
	return p && n >= sizeof(sig) - 1 && memcmp(p, sig, sizeof(sig) - 1) == 0;
}

static const char *method_name(unsigned m)
{
	static const struct { unsigned id; const char *name; } names[] = {
		{1, "shrink"}, {6, "implode"}, {9, "deflate64"}, {12, "bzip2"}, {14, "lzma"},
		{93, "zstd"}, {95, "xz"}, {98, "ppmd"}, {99, "aes encryption"},
	};
	const char *r = "unknown";
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].id == m)
			r = names[i].name;
	return r;
}

/* Find the zip64 extended-information field (id 0x0001) in an extra block.
 * Malformed trailing bytes end the walk (some aligners pad with zeros). */
static const uint8_t *find_zip64(const uint8_t *x, uint64_t n, uint16_t *len)
{
	tpc_cursor c;
	const uint8_t *found = NULL;
	tpc_cursor_init(&c, x, n);
	while (!found && tpc_cursor_left(&c) >= 4) {
		uint16_t id = tpc_cursor_u16le(&c);
		uint16_t l = tpc_cursor_u16le(&c);
		const uint8_t *d = tpc_cursor_take(&c, l);
		if (d && id == 0x0001) {
			*len = l;
			found = d;
		}
	}
	return found;
}

enum { Z64_OK, Z64_MISSING, Z64_SHORT };

/* Replace the header values that hold their saturated marker with the ones
 * in the zip64 field `f` (flen bytes, NULL if there is none), which holds
 * just those, in this order: size, compressed size, local header offset
 * (8 bytes each), disk number (4). A local header has no offset or disk
 * (lho and disk NULL). Z64_MISSING: a value is saturated but there is no
 * field; Z64_SHORT: the field is too short for the values it must hold. */
static int zip64_values(const uint8_t *f, uint16_t flen, uint64_t *usize, uint64_t *csize,
			uint64_t *lho, uint64_t *disk)
{
	bool u = *usize == U32_SAT, c = *csize == U32_SAT;
	bool o = lho && *lho == U32_SAT, d = disk && *disk == U16_SAT;
	tpc_cursor fc;
	if (!u && !c && !o && !d)
		return Z64_OK;
	if (!f)
		return Z64_MISSING;
	tpc_cursor_init(&fc, f, flen);
	if (u)
		*usize = tpc_cursor_u64le(&fc);
	if (c)
		*csize = tpc_cursor_u64le(&fc);
	if (o)
		*lho = tpc_cursor_u64le(&fc);
	if (d)
		*disk = tpc_cursor_u32le(&fc);
	return fc.ok ? Z64_OK : Z64_SHORT;
}

/* The end-of-central-directory record: 22 bytes plus a comment that reaches
 * the end of the file, or, followed by at most TPC_ZIP_MAX_TRAILING bytes
 * that are not part of the archive, a plausible record (torch, whose miniz
 * takes the last record signature in the file's last 64 KiB or so, loads
 * such files). *trailing receives their count. */
static int find_eocd(const tpc_zip *z, uint64_t *at, uint64_t *trailing, tpc_err *e)
{
	int ret = 0;
	if (z->size >= EOCD_LEN) {
		uint64_t lo = z->size - EOCD_LEN > 65535 ? z->size - EOCD_LEN - 65535 : 0;
		for (uint64_t i = z->size - EOCD_LEN + 1; i-- > lo;) {
			const uint8_t *p = z->data + i;
			if (tpc_rd32le(p) == SIG_EOCD &&
			    i + EOCD_LEN + tpc_rd16le(p + 20) == z->size) {
				*at = i;
				goto out;
			}
		}
	}
	/* Not at the end: an end record followed by junk is not a truncation.
	 * Only a plausible record counts (its directory ends where it starts,
	 * or a zip64 locator precedes it), not four bytes of tensor data. */
	for (uint64_t i = z->size >= EOCD_LEN ? z->size - EOCD_LEN + 1 : 0; i-- > 0;) {
		const uint8_t *p = z->data + i;
		uint64_t end = i + EOCD_LEN + tpc_rd16le(p + 20);
		bool plausible = (uint64_t)tpc_rd32le(p + 16) + tpc_rd32le(p + 12) == i ||
				 (i >= LOC64_LEN && tpc_rd32le(p - LOC64_LEN) == SIG_LOC64);
		if (tpc_rd32le(p) == SIG_EOCD && plausible && end < z->size &&
		    z->size - end <= TPC_ZIP_MAX_TRAILING) {
			*at = i;
			*trailing = z->size - end;
			goto out;
		}
		if (tpc_rd32le(p) == SIG_EOCD && plausible && end < z->size &&
		    z->size - i < (1u << 20)) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)end, NULL,
					  "%llu unexpected bytes follow the end of central "
					  "directory record (more than the %u that zip readers "
					  "look through)",
					  (ull)(z->size - end), (unsigned)TPC_ZIP_MAX_TRAILING);
			goto out;
		}
		if (z->size - i >= (1u << 20))
			break;
	}
	ret = TPC_CORRUPT(e, z->path, (int64_t)z->size, NULL,
			  "failed finding the central directory: no end of central directory "
			  "record, the file looks truncated (it is %llu bytes; an interrupted "
			  "download or copy?)",
			  (ull)z->size);
out:
	return ret;
}

static int multidisk(const tpc_zip *z, uint64_t at, tpc_err *e)
{
	return TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
			   "multi-disk (split) zip archives are not supported");
}

/* End records -> z->cd_offset, z->cd_size, *count. */
static int parse_end(tpc_zip *z, uint64_t eocd, uint64_t *count, tpc_err *e)
{
	int ret = 0;
	const uint8_t *p = z->data + eocd;
	uint16_t disk = tpc_rd16le(p + 4), cd_disk = tpc_rd16le(p + 6);
	uint16_t n_disk = tpc_rd16le(p + 8), n16 = tpc_rd16le(p + 10);
	uint32_t size32 = tpc_rd32le(p + 12), off32 = tpc_rd32le(p + 16);
	uint64_t n = n16, cd_size = size32, cd_off = off32, limit = eocd;

	if (eocd >= LOC64_LEN && tpc_rd32le(p - LOC64_LEN) == SIG_LOC64) {
		uint64_t loc = eocd - LOC64_LEN;
		const uint8_t *l = z->data + loc;
		uint64_t z64 = tpc_rd64le(l + 8);
		if (tpc_rd32le(l + 4) != 0 || tpc_rd32le(l + 16) > 1) {
			ret = multidisk(z, loc, e);
			goto out;
		}
		if (z64 > loc || loc - z64 < EOCD64_LEN) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)loc, NULL,
					  "the zip64 end of central directory locator points at "
					  "offset %llu, where no 56-byte record fits before it",
					  (ull)z64);
			goto out;
		}
		const uint8_t *q = z->data + z64;
		uint64_t rec = tpc_rd64le(q + 4);
		if (tpc_rd32le(q) != SIG_EOCD64 || rec < 44 || rec > loc - z64 - 12) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)z64, NULL,
					  "no valid zip64 end of central directory record where "
					  "the locator points");
			goto out;
		}
		if (tpc_rd32le(q + 16) != 0 || tpc_rd32le(q + 20) != 0 ||
		    tpc_rd64le(q + 24) != tpc_rd64le(q + 32)) {
			ret = multidisk(z, z64, e);
			goto out;
		}
		uint64_t n64 = tpc_rd64le(q + 32), size64 = tpc_rd64le(q + 40);
		uint64_t off64 = tpc_rd64le(q + 48);
		if ((n16 != U16_SAT && n16 != n64) || (size32 != U32_SAT && size32 != size64) ||
		    (off32 != U32_SAT && off32 != off64)) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)z64, NULL,
					  "the zip64 end of central directory record (%llu entries, "
					  "directory of %llu bytes at %llu) disagrees with the end of "
					  "central directory record (%u entries, %u bytes at %u)",
					  (ull)n64, (ull)size64, (ull)off64, (unsigned)n16,
					  (unsigned)size32, (unsigned)off32);
			goto out;
		}
		n = n64;
		cd_size = size64;
		cd_off = off64;
		limit = z64;
		z->zip64 = true;
	} else if (disk != 0 || cd_disk != 0 || n_disk != n16) {
		ret = multidisk(z, eocd, e);
		goto out;
	}

	uint64_t cd_end;
	if (tpc_add_u64(cd_off, cd_size, &cd_end) || cd_end > limit) {
		ret = TPC_CORRUPT(e, z->path, (int64_t)eocd, NULL,
				  "the central directory (%llu bytes at offset %llu) runs past the "
				  "end records at %llu",
				  (ull)cd_size, (ull)cd_off, (ull)limit);
		goto out;
	}
	if (n > cd_size / CENTRAL_LEN) {
		ret = TPC_CORRUPT(e, z->path, (int64_t)eocd, NULL,
				  "the end records claim %llu entries, but a central directory of "
				  "%llu bytes holds at most %llu",
				  (ull)n, (ull)cd_size, (ull)(cd_size / CENTRAL_LEN));
		goto out;
	}
	z->cd_offset = cd_off;
	z->cd_size = cd_size;
	*count = n;
out:
	return ret;
}

/* Entry ent's zip64_values verdict as an error at `at`, from its central
 * directory record or (local) its local header; 0 when Z64_OK. */
static int zip64_bad(const tpc_zip *z, const tpc_zip_entry *ent, int z64, uint16_t flen, uint64_t at, bool local,
		     tpc_err *e)
{
	if (z64 == Z64_MISSING)
		return TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
				   "entry '" NAMEF "': %s 0xFFFFFFFF but there is no zip64 extra field", ent->name,
				   local ? "a size in its local header is" : "a size or the offset is");
	if (z64 == Z64_SHORT)
		return TPC_CORRUPT(e, z->path, (int64_t)at, NULL, "entry '" NAMEF "': the zip64 extra field %s (%u bytes)%s",
				   ent->name, local ? "of its local header is too short" : "is too short",
				   (unsigned)flen, local ? "" : " for the values it must hold");
	return 0;
}

static int parse_central(tpc_zip *z, uint64_t count, tpc_err *e)
{
	int ret = 0;
	tpc_cursor c;
	char *np;

	z->entries = tpc_calloc((size_t)count, sizeof(*z->entries));
	z->names = tpc_malloc((size_t)(z->cd_size + count));
	if (!z->entries || !z->names) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	np = z->names;
	tpc_cursor_init(&c, z->data + z->cd_offset, z->cd_size);
	for (uint64_t i = 0; i < count; i++) {
		uint64_t at = z->cd_offset + c.pos;
		tpc_zip_entry *ent = &z->entries[i];
		const uint8_t *h = tpc_cursor_take(&c, CENTRAL_LEN);
		if (!h) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
					  "central directory entry %llu is cut off by the end of "
					  "the directory",
					  (ull)i);
			goto out;
		}
		if (tpc_rd32le(h) != SIG_CENTRAL) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
					  "central directory entry %llu has a bad signature "
					  "0x%08x",
					  (ull)i, (unsigned)tpc_rd32le(h));
			goto out;
		}
		uint16_t flags = tpc_rd16le(h + 8), method = tpc_rd16le(h + 10);
		uint32_t crc = tpc_rd32le(h + 16), csize32 = tpc_rd32le(h + 20);
		uint32_t usize32 = tpc_rd32le(h + 24);
		uint16_t nlen = tpc_rd16le(h + 28), xlen = tpc_rd16le(h + 30);
		uint16_t clen = tpc_rd16le(h + 32), disk = tpc_rd16le(h + 34);
		uint32_t lho32 = tpc_rd32le(h + 42);
		const uint8_t *name = tpc_cursor_take(&c, nlen);
		const uint8_t *extra = tpc_cursor_take(&c, xlen);
		tpc_cursor_take(&c, clen);
		if (!c.ok) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
					  "central directory entry %llu: its name, extra field or "
					  "comment runs past the end of the directory",
					  (ull)i);
			goto out;
		}
		if (nlen == 0 || memchr(name, 0, nlen)) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
					  "central directory entry %llu has %s", (ull)i,
					  nlen ? "a NUL byte in its name" : "an empty name");
			goto out;
		}
		memcpy(np, name, nlen);
		np[nlen] = '\0';
		ent->name = np;
		ent->name_len = nlen;
		np += nlen + 1;

		uint64_t usize = usize32, csize = csize32, lho = lho32, disk64 = disk;
		uint16_t flen = 0;
		const uint8_t *f = find_zip64(extra, xlen, &flen);
		int z64 = zip64_values(f, flen, &usize, &csize, &lho, &disk64);
		if ((ret = zip64_bad(z, ent, z64, flen, at, false, e)))
			goto out;
		if (disk64 != 0) {
			ret = multidisk(z, at, e);
			goto out;
		}
		if (flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENC)) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
					  "entry '" NAMEF "' is encrypted; encrypted zip entries "
					  "are not supported",
					  ent->name);
			goto out;
		}
		if (method != TPC_ZIP_STORED && method != TPC_ZIP_DEFLATED) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
					  "entry '" NAMEF "' uses compression method %u (%s); only "
					  "stored (0) and deflated (8) are supported",
					  ent->name, (unsigned)method, method_name(method));
			goto out;
		}
		if (method == TPC_ZIP_STORED && csize != usize) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
					  "entry '" NAMEF "' is stored, but its compressed size "
					  "%llu differs from its size %llu",
					  ent->name, (ull)csize, (ull)usize);
			goto out;
		}
		ent->method = method;
		ent->flags = flags;
		ent->crc32 = crc;
		ent->csize = csize;
		ent->usize = usize;
		ent->header_offset = lho;
	}
	if (tpc_cursor_left(&c) != 0) {
		ret = TPC_CORRUPT(e, z->path, (int64_t)(z->cd_offset + c.pos), NULL,
				  "the central directory has %llu bytes after its last entry (the "
				  "end records say %llu entries)",
				  (ull)tpc_cursor_left(&c), (ull)count);
		goto out;
	}
	z->n = (size_t)count;
out:
	return ret;
}

/* One field of a local header against the central directory. With a data
 * descriptor, zeros in the local header mean "see the descriptor". */
static int local_field(const tpc_zip *z, const tpc_zip_entry *ent, bool dd, const char *what,
		       uint64_t local, uint64_t central, tpc_err *e)
{
	int ret = 0;
	if (!(dd && local == 0) && local != central)
		ret = TPC_CORRUPT(e, z->path, (int64_t)ent->header_offset, NULL,
				  "entry '" NAMEF "': the local header says %s %llu but the "
				  "central directory says %llu",
				  ent->name, what, (ull)local, (ull)central);
	return ret;
}

/* The data descriptor after the payload (flag bit 3): optional signature,
 * CRC, then 4- or 8-byte sizes. It must agree with the central directory. */
static int check_descriptor(const tpc_zip *z, tpc_zip_entry *ent, bool zip64, tpc_err *e)
{
	int ret = 0;
	uint64_t at = ent->data_offset + ent->csize, left = z->size - at;
	const uint8_t *q = z->data + at;
	uint32_t k = 0;

	if (left >= 4 && tpc_rd32le(q) == SIG_DESC)
		k = 4;
	bool ok32 = left >= k + 12u && tpc_rd32le(q + k) == ent->crc32 &&
		    tpc_rd32le(q + k + 4) == ent->csize && tpc_rd32le(q + k + 8) == ent->usize;
	bool ok64 = left >= k + 20u && tpc_rd32le(q + k) == ent->crc32 &&
		    tpc_rd64le(q + k + 4) == ent->csize && tpc_rd64le(q + k + 12) == ent->usize;
	if (ok64 && (zip64 || !ok32))
		ent->desc_len = k + 20;
	else if (ok32)
		ent->desc_len = k + 12;
	else
		ret = TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
				  "entry '" NAMEF "': the data descriptor after its data does not "
				  "match the central directory (crc 0x%08x, %llu bytes%s)",
				  ent->name, (unsigned)ent->crc32, (ull)ent->csize,
				  left < k + 12u ? "; it runs past the end of the file" : "");
	return ret;
}

static int check_local(const tpc_zip *z, tpc_zip_entry *ent, tpc_err *e)
{
	int ret = 0;
	uint64_t at = ent->header_offset;

	if (at > z->size || z->size - at < LOCAL_LEN) {
		ret = TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
				  "entry '" NAMEF "': its local header at %llu runs past the end of "
				  "the file (%llu bytes)",
				  ent->name, (ull)at, (ull)z->size);
		goto out;
	}
	const uint8_t *p = z->data + at;
	if (tpc_rd32le(p) != SIG_LOCAL) {
		ret = TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
				  "entry '" NAMEF "': no local header at offset %llu, where the "
				  "central directory points",
				  ent->name, (ull)at);
		goto out;
	}
	uint16_t flags = tpc_rd16le(p + 6), method = tpc_rd16le(p + 8);
	uint32_t crc = tpc_rd32le(p + 14), csize32 = tpc_rd32le(p + 18);
	uint32_t usize32 = tpc_rd32le(p + 22);
	uint16_t nlen = tpc_rd16le(p + 26), xlen = tpc_rd16le(p + 28);
	if (z->size - at - LOCAL_LEN < (uint64_t)nlen + xlen) {
		ret = TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
				  "entry '" NAMEF "': the name and extra field of its local header "
				  "run past the end of the file",
				  ent->name);
		goto out;
	}
	const uint8_t *name = p + LOCAL_LEN, *extra = name + nlen;
	if (nlen != ent->name_len || memcmp(name, ent->name, nlen) != 0) {
		ret = TPC_CORRUPT(e, z->path, (int64_t)(at + LOCAL_LEN), NULL,
				  "entry '" NAMEF "': the central directory name does not match the "
				  "local header name '%.*s'",
				  ent->name, nlen > 200 ? 200 : (int)nlen, (const char *)name);
		goto out;
	}
	if (method != ent->method) {
		ret = TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
				  "entry '" NAMEF "': the local header says method %u but the "
				  "central directory says %u",
				  ent->name, (unsigned)method, (unsigned)ent->method);
		goto out;
	}
	if (flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENC)) {
		ret = TPC_CORRUPT(e, z->path, (int64_t)at, NULL,
				  "entry '" NAMEF "' is encrypted (local header flags 0x%04x); "
				  "encrypted zip entries are not supported",
				  ent->name, (unsigned)flags);
		goto out;
	}
	ent->data_offset = at + LOCAL_LEN + nlen + xlen;
	uint64_t end;
	if (tpc_add_u64(ent->data_offset, ent->csize, &end) || end > z->size) {
		ret = TPC_CORRUPT(e, z->path, (int64_t)ent->data_offset, NULL,
				  "entry '" NAMEF "': data ends at %llu but the file ends at %llu",
				  ent->name, (ull)(ent->data_offset + ent->csize), (ull)z->size);
		goto out;
	}

	bool dd = flags & FLAG_DESCRIPTOR;
	uint64_t usize = usize32, csize = csize32;
	uint16_t flen = 0;
	const uint8_t *f = find_zip64(extra, xlen, &flen);
	int z64 = zip64_values(f, flen, &usize, &csize, NULL, NULL);
	if ((ret = zip64_bad(z, ent, z64, flen, at, true, e)))
		goto out;
	if ((ret = local_field(z, ent, dd, "crc", crc, ent->crc32, e)) ||
	    (ret = local_field(z, ent, dd, "compressed size", csize, ent->csize, e)) ||
	    (ret = local_field(z, ent, dd, "size", usize, ent->usize, e)))
		goto out;
	if (dd)
		ret = check_descriptor(z, ent, f != NULL || ent->csize >= U32_SAT ||
						       ent->usize >= U32_SAT, e);
out:
	return ret;
}

static int cmp_offset(const void *a, const void *b)
{
	const tpc_zip_entry *x = *(const tpc_zip_entry *const *)a;
	const tpc_zip_entry *y = *(const tpc_zip_entry *const *)b;
	int c = (x->header_offset > y->header_offset) - (x->header_offset < y->header_offset);
	return c ? c : (x > y) - (x < y);
}

static int cmp_name(const void *a, const void *b)
{
	const tpc_zip_entry *x = *(const tpc_zip_entry *const *)a;
	const tpc_zip_entry *y = *(const tpc_zip_entry *const *)b;
	int c = strcmp(x->name, y->name);
	return c ? c : (x > y) - (x < y);
}

/* Spans [local header, end of descriptor) must be disjoint and lie before
 * the central directory; names must be unique. */
static int check_table(tpc_zip *z, tpc_err *e)
{
	int ret = 0;
	const tpc_zip_entry **by_off = NULL;

	z->by_name = tpc_malloc(z->n * sizeof(*z->by_name));
	by_off = tpc_malloc(z->n * sizeof(*by_off));
	if (!z->by_name || !by_off) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < z->n; i++)
		z->by_name[i] = by_off[i] = &z->entries[i];
	qsort(by_off, z->n, sizeof(*by_off), cmp_offset);
	for (size_t i = 0; i < z->n; i++) {
		const tpc_zip_entry *a = by_off[i];
		uint64_t end = a->data_offset + a->csize + a->desc_len; /* <= size, checked */
		uint64_t next = i + 1 < z->n ? by_off[i + 1]->header_offset : z->cd_offset;
		if (end <= next)
			continue;
		if (i + 1 < z->n)
			ret = TPC_CORRUPT(e, z->path, (int64_t)next, NULL,
					  "entries '" NAMEF "' and '" NAMEF "' overlap: the first "
					  "ends at %llu, the second starts at %llu",
					  a->name, by_off[i + 1]->name, (ull)end, (ull)next);
		else
			ret = TPC_CORRUPT(e, z->path, (int64_t)a->header_offset, NULL,
					  "entry '" NAMEF "' overlaps the central directory: it ends "
					  "at %llu, the directory starts at %llu",
					  a->name, (ull)end, (ull)next);
		goto out;
	}
	qsort(z->by_name, z->n, sizeof(*z->by_name), cmp_name);
	for (size_t i = 1; i < z->n; i++) {
		if (strcmp(z->by_name[i - 1]->name, z->by_name[i]->name) == 0) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)z->by_name[i]->header_offset, NULL,
					  "duplicate entry name '" NAMEF "' (central directory "
					  "entries %zu and %zu)",
					  z->by_name[i]->name, (size_t)(z->by_name[i - 1] - z->entries),
					  (size_t)(z->by_name[i] - z->entries));
			goto out;
		}
	}
out:
	free(by_off);
	return ret;
}

/* Drop the pages that reading [off, off+len) of the archive brought into the
 * resident set, when it lies in a mapped file (tpc_map_drop). */
static const tpc_map *backing(const tpc_zip *z)
{
	return z->own_map ? &z->map : z->backing;
}

static void drop(const tpc_zip *z, uint64_t off, uint64_t len)
{
	if (backing(z) && off < z->size)
		tpc_map_drop(backing(z), z->base + off, len < z->size - off ? len : z->size - off);
}

/* libzip's reads of a mapped archive, served by pread from the file: its
 * consistency pass reads every local header again, and through the mapping
 * each read would map a page-cache folio that stays mapped. */
typedef struct pread_src {
	int fd;
	uint64_t base, size, pos;
	zip_error_t err;
} pread_src;

static zip_int64_t pread_cb(void *ud, void *data, zip_uint64_t len, zip_source_cmd_t cmd)
{
	pread_src *s = ud;
	switch (cmd) {
	case ZIP_SOURCE_OPEN:
		s->pos = 0;
		return 0;
	case ZIP_SOURCE_READ: {
		if (s->pos >= s->size)
			return 0;
		if (len > s->size - s->pos)
			len = s->size - s->pos;
		if (len > (1u << 30))
			len = 1u << 30;
		ssize_t r;
		do
			r = pread(s->fd, data, (size_t)len, (off_t)(s->base + s->pos));
		while (r < 0 && errno == EINTR);
		if (r < 0) {
			zip_error_set(&s->err, ZIP_ER_READ, errno);
			return -1;
		}
		s->pos += (uint64_t)r;
		return r;
	}
	case ZIP_SOURCE_CLOSE:
	case ZIP_SOURCE_FREE:
		return 0;
	case ZIP_SOURCE_STAT: {
		zip_stat_t *st = data;
		if (len < sizeof(*st)) {
			zip_error_set(&s->err, ZIP_ER_INVAL, 0);
			return -1;
		}
		zip_stat_init(st);
		st->size = st->comp_size = s->size;
		st->comp_method = ZIP_CM_STORE;
		st->encryption_method = ZIP_EM_NONE;
		st->valid = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
		return sizeof(*st);
	}
	case ZIP_SOURCE_ERROR:
		return zip_error_to_data(&s->err, data, len);
	case ZIP_SOURCE_SEEK: {
		zip_int64_t at = zip_source_seek_compute_offset(s->pos, s->size, data, len, &s->err);
		if (at < 0)
			return -1;
		s->pos = (uint64_t)at;
		return 0;
	}
	case ZIP_SOURCE_TELL:
		return (zip_int64_t)s->pos;
	case ZIP_SOURCE_SUPPORTS:
		return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE,
						      ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE,
						      ZIP_SOURCE_SEEK, ZIP_SOURCE_TELL, ZIP_SOURCE_SUPPORTS, -1);
	default:
		zip_error_set(&s->err, ZIP_ER_OPNOTSUPP, 0);
		return -1;
	}
}

/* Second opinion: libzip with ZIP_CHECKCONS must open the same bytes and see
 * the same entries. */
static int libzip_check(const tpc_zip *z, tpc_err *e)
{
	int ret = 0;
	zip_error_t ze;
	zip_source_t *src = NULL;
	zip_t *za = NULL;
	pread_src ps;

	zip_error_init(&ze);
	zip_error_init(&ps.err);
	if (backing(z) && backing(z)->fd >= 0) {
		ps.fd = backing(z)->fd;
		ps.base = z->base;
		ps.size = z->size;
		ps.pos = 0;
		src = zip_source_function_create(pread_cb, &ps, &ze);
	} else {
		src = zip_source_buffer_create(z->data, z->size, 0, &ze);
	}
	if (!src) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
	if (!za) {
		ret = TPC_CORRUPT(e, z->path, -1, NULL, "libzip refuses the archive: %s",
				  zip_error_strerror(&ze));
		goto out;
	}
	src = NULL; /* owned by za now */
	zip_int64_t n = zip_get_num_entries(za, 0);
	if (n < 0 || (uint64_t)n != z->n) {
		ret = TPC_CORRUPT(e, z->path, (int64_t)z->cd_offset, NULL,
				  "libzip reads %lld entries, the central directory %zu", (long long)n,
				  z->n);
		goto out;
	}
	for (size_t i = 0; i < z->n; i++) {
		const tpc_zip_entry *ent = &z->entries[i];
		zip_stat_t st;
		zip_stat_init(&st);
		if (zip_stat_index(za, i, ZIP_FL_ENC_RAW, &st) != 0 || !st.name ||
		    strcmp(st.name, ent->name) != 0 || st.size != ent->usize ||
		    st.comp_size != ent->csize || st.crc != ent->crc32 ||
		    st.comp_method != (zip_int32_t)ent->method) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)ent->header_offset, NULL,
					  "entry %zu '" NAMEF "': libzip reads it differently (an "
					  "ambiguous archive)",
					  i, ent->name);
			goto out;
		}
	}
out:
	if (za)
		zip_discard(za);
	zip_source_free(src);
	zip_error_fini(&ze);
	zip_error_fini(&ps.err);
	return ret;
}

static int zip_open_data(tpc_zip *z, const uint8_t *data, uint64_t size, const char *path,
			 tpc_err *e)
{
	int ret = 0;
	uint64_t eocd = 0, count = 0;

	z->data = data;
	z->size = size;
	z->path = tpc_strdup(path ? path : "");
	if (!z->path) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (tpc_zip_is_lfs_pointer(data, size)) {
		ret = TPC_CORRUPT(e, z->path, 0, NULL,
				  "this is a Git LFS pointer, not the file; run git lfs pull");
		goto out;
	}
	/* torch takes a file for a zip only if it starts with a local header;
	 * an archive without entries starts with its end records. */
	if (size < 4 || data[0] != 'P' || data[1] != 'K' ||
	    !((data[2] == 3 && data[3] == 4) || (data[2] == 5 && data[3] == 6) ||
	      (data[2] == 6 && data[3] == 6))) {
		ret = TPC_CORRUPT(e, z->path, 0, NULL,
				  size ? "not a zip archive: no zip signature at offset 0"
				       : "not a zip archive: the file is empty");
		goto out;
	}
	if ((ret = find_eocd(z, &eocd, &z->trailing, e)))
		goto out;
	z->size -= z->trailing; /* the archive ends with its end records */
	if ((ret = parse_end(z, eocd, &count, e)) || (ret = parse_central(z, count, e)))
		goto out;
	drop(z, z->cd_offset, z->size - z->cd_offset);
	/* Each local header read maps the page-cache folio around it. Entries
	 * in file order (torch's are): drop the whole blocks the headers have
	 * passed, once each; a madvise per header made a 65,536-entry archive
	 * spend 12 s zapping the same 2 MiB block (tpc_map_drop_passed). An
	 * entry before the cursor drops its own header. */
	uint64_t lo = 0;
	for (size_t i = 0; i < z->n; i++) {
		tpc_zip_entry *ent = &z->entries[i];
		if ((ret = check_local(z, ent, e)))
			goto out;
		if (ent->header_offset < lo) {
			drop(z, ent->header_offset, ent->data_offset - ent->header_offset);
			if (ent->desc_len)
				drop(z, ent->data_offset + ent->csize, ent->desc_len);
		} else if (backing(z)) {
			tpc_map_drop_passed(backing(z), z->base + lo, z->base + ent->header_offset);
			lo = ent->header_offset;
		}
	}
	if (z->n && lo < z->cd_offset)
		drop(z, lo, z->cd_offset - lo);
	if ((ret = check_table(z, e)) || (ret = libzip_check(z, e)))
		goto out;

	size_t plen = 0;
	if (z->n) {
		const char *slash = memchr(z->entries[0].name, '/', z->entries[0].name_len);
		plen = slash ? (size_t)(slash - z->entries[0].name) : 0;
	}
	z->prefix = tpc_strndup(z->n ? z->entries[0].name : "", plen);
	if (!z->prefix)
		ret = tpc_err_nomem(e);
out:
	return ret;
}

int tpc_zip_open_from_buffer(tpc_zip *z, const uint8_t *data, uint64_t size, const char *path,
			     tpc_err *e)
{
	int ret;
	tpc_zip_init(z);
	ret = zip_open_data(z, data, size, path, e);
	if (ret)
		tpc_zip_release(z);
	return ret;
}

int tpc_zip_open_from_map(tpc_zip *z, const tpc_map *m, uint64_t off, uint64_t len, const char *path,
			  tpc_err *e)
{
	int ret;
	tpc_zip_init(z);
	if (off > m->size || len > m->size - off)
		return tpc_err_set(e, TPC_EINPUT, "internal: zip range past the end of '%s'", m->path);
	z->backing = m;
	z->base = off;
	ret = zip_open_data(z, m->data ? m->data + off : NULL, len, path, e);
	if (ret)
		tpc_zip_release(z);
	return ret;
}

int tpc_zip_open_from_file(tpc_zip *z, const char *path, tpc_err *e)
{
	int ret = 0;
	tpc_zip_init(z);
	if ((ret = tpc_map_open(&z->map, path, e)))
		goto out;
	z->own_map = true;
	ret = zip_open_data(z, z->map.data, z->map.size, path, e);
out:
	if (ret)
		tpc_zip_release(z);
	return ret;
}

size_t tpc_zip_count(const tpc_zip *z)
{
	return z->n;
}

const tpc_zip_entry *tpc_zip_entry_at(const tpc_zip *z, size_t i)
{
	return i < z->n ? &z->entries[i] : NULL;
}

const char *tpc_zip_prefix(const tpc_zip *z)
{
	return z->prefix ? z->prefix : "";
}

/* strcmp(name, pre + "/" + rec) without building the string ("" pre: rec). */
static int cmp_joined(const char *name, const char *pre, const char *rec)
{
	const unsigned char *a = (const unsigned char *)name;
	const unsigned char *parts[3] = {(const unsigned char *)pre,
					 (const unsigned char *)(*pre ? "/" : ""),
					 (const unsigned char *)rec};
	int c = 0;
	for (int k = 0; k < 3 && !c; k++)
		for (const unsigned char *b = parts[k]; *b && !c; a++, b++)
			c = (*a > *b) - (*a < *b); /* also when *a is the NUL */
	return c ? c : *a != 0;
}

static const tpc_zip_entry *lookup(const tpc_zip *z, const char *pre, const char *rec)
{
	const tpc_zip_entry *found = NULL;
	size_t lo = 0, hi = z->n;
	while (!found && lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = cmp_joined(z->by_name[mid]->name, pre, rec);
		if (c == 0)
			found = z->by_name[mid];
		else if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return found;
}

const tpc_zip_entry *tpc_zip_find(const tpc_zip *z, const char *record)
{
	return lookup(z, tpc_zip_prefix(z), record);
}

const tpc_zip_entry *tpc_zip_find_raw(const tpc_zip *z, const char *name)
{
	return lookup(z, "", name);
}

int tpc_zip_check_prefix(const tpc_zip *z, tpc_err *e)
{
	int ret = 0;
	size_t plen = strlen(tpc_zip_prefix(z));
	for (size_t i = 0; i < z->n; i++) {
		const tpc_zip_entry *ent = &z->entries[i];
		if (plen && ent->name_len > plen && ent->name[plen] == '/' &&
		    memcmp(ent->name, z->prefix, plen) == 0)
			continue;
		ret = TPC_CORRUPT(e, z->path, (int64_t)ent->header_offset, NULL,
				  plen ? "entry '" NAMEF "' is not under the archive folder '%s/' "
					 "(taken from the first entry)"
				       : "entry '" NAMEF "' is not in a folder%s; a torch archive "
					 "keeps every record under one top-level folder",
				  ent->name, z->prefix ? z->prefix : "");
		break;
	}
	return ret;
}

bool tpc_zip_is_torchscript(const tpc_zip *z)
{
	const char *pre = tpc_zip_prefix(z);
	size_t plen = strlen(pre);
	bool ts = tpc_zip_find(z, "constants.pkl") ||
		  (tpc_zip_find(z, ".data/version") && !tpc_zip_find(z, "data.pkl"));
	for (size_t i = 0; !ts && i < z->n; i++) {
		const char *nm = z->entries[i].name;
		if (plen && (strncmp(nm, pre, plen) != 0 || nm[plen] != '/'))
			continue;
		ts = strncmp(nm + plen + (plen ? 1 : 0), "code/", 5) == 0;
	}
	return ts;
}

int tpc_zip_stored(const tpc_zip *z, const tpc_zip_entry *ent, const uint8_t **p, uint64_t *len,
		   tpc_err *e)
{
	int ret = 0;
	if (ent->method != TPC_ZIP_STORED)
		ret = TPC_CORRUPT(e, z->path, (int64_t)ent->header_offset, NULL,
				  "entry '" NAMEF "' is compressed (method %u); it cannot be "
				  "used in place",
				  ent->name, (unsigned)ent->method);
	else {
		*p = z->data + ent->data_offset;
		*len = ent->csize;
	}
	return ret;
}

static int crc_mismatch(const tpc_zip *z, const tpc_zip_entry *ent, uint32_t got, tpc_err *e)
{
	return TPC_CORRUPT(e, z->path, (int64_t)ent->data_offset, NULL,
			   "entry '" NAMEF "': CRC-32 mismatch (the data has 0x%08x, the archive "
			   "says 0x%08x)",
			   ent->name, (unsigned)got, (unsigned)ent->crc32);
}

int tpc_zip_verify_crc(const tpc_zip *z, const tpc_zip_entry *ent, tpc_err *e)
{
	int ret = 0;
	const uint8_t *p = NULL;
	uint64_t len = 0;
	if ((ret = tpc_zip_stored(z, ent, &p, &len, e)) || ent->crc32 == 0)
		goto out;
	uint32_t got = tpc_crc32_parallel(p, len);
	if (got != ent->crc32)
		ret = crc_mismatch(z, ent, got, e);
out:
	return ret;
}

int tpc_zip_inflate(const tpc_zip *z, const tpc_zip_entry *ent, uint64_t cap, uint8_t **out,
		    uint64_t *len, tpc_err *e)
{
	enum { STEP = 64 << 10, ZMAX = 1u << 30 };
	int ret = 0;
	uint8_t *buf = NULL, spare;
	uint64_t have = 0, bufcap = 0, limit = ent->usize;
	const uint8_t *in = z->data + ent->data_offset;
	uint64_t in_left = ent->csize;
	z_stream s;
	bool live = false;

	*out = NULL;
	*len = 0;
	if (limit > cap || limit > SIZE_MAX) {
		ret = TPC_CORRUPT(e, z->path, (int64_t)ent->header_offset, NULL,
				  "entry '" NAMEF "' declares %llu bytes uncompressed, more than "
				  "the limit of %llu bytes (a zip bomb?)",
				  ent->name, (ull)limit, (ull)cap);
		goto out;
	}
	if (ent->method == TPC_ZIP_STORED) {
		if (!(buf = tpc_malloc((size_t)limit))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		memcpy(buf, in, (size_t)limit);
		have = limit;
		goto check;
	}

	memset(&s, 0, sizeof(s));
	if (inflateInit2(&s, -MAX_WBITS) != Z_OK) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	live = true;
	bufcap = limit < STEP ? limit : STEP;
	if (!(buf = tpc_malloc((size_t)bufcap))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (;;) {
		if (s.avail_in == 0 && in_left) {
			s.next_in = (Bytef *)(uintptr_t)in;
			s.avail_in = in_left > ZMAX ? ZMAX : (uInt)in_left;
			in += s.avail_in;
			in_left -= s.avail_in;
		}
		if (have == bufcap && bufcap < limit) {
			/* Grow with the output actually produced, never to the
			 * declared size up front. */
			uint64_t nc = bufcap * 2 > STEP ? bufcap * 2 : STEP;
			uint8_t *nb;
			if (nc > limit)
				nc = limit;
			if (!(nb = tpc_realloc(buf, (size_t)nc))) {
				ret = tpc_err_nomem(e);
				goto out;
			}
			buf = nb;
			bufcap = nc;
		}
		bool full = have == bufcap; /* at the declared size: more is a lie */
		uInt room = full ? 1 : (bufcap - have > ZMAX ? ZMAX : (uInt)(bufcap - have));
		s.next_out = full ? &spare : buf + have;
		s.avail_out = room;
		uInt in_before = s.avail_in;
		int zr = inflate(&s, Z_NO_FLUSH);
		uint64_t made = room - s.avail_out;
		if (full && made) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)ent->data_offset, NULL,
					  "entry '" NAMEF "' inflates to more than its declared "
					  "%llu bytes (a zip bomb?)",
					  ent->name, (ull)limit);
			goto out;
		}
		have += made;
		if (zr == Z_STREAM_END)
			break;
		if (zr == Z_MEM_ERROR) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		if (zr == Z_DATA_ERROR || zr == Z_NEED_DICT || zr == Z_STREAM_ERROR) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)ent->data_offset, NULL,
					  "entry '" NAMEF "': corrupt deflate data (%s)", ent->name,
					  s.msg ? s.msg : "bad stream");
			goto out;
		}
		if (!made && in_before == s.avail_in && s.avail_in == 0 && in_left == 0) {
			ret = TPC_CORRUPT(e, z->path, (int64_t)ent->data_offset, NULL,
					  "entry '" NAMEF "': its deflate data ends before the end "
					  "of the stream (truncated?)",
					  ent->name);
			goto out;
		}
	}
	if (have != limit) {
		ret = TPC_CORRUPT(e, z->path, (int64_t)ent->data_offset, NULL,
				  "entry '" NAMEF "' inflates to %llu bytes but declares %llu",
				  ent->name, (ull)have, (ull)limit);
		goto out;
	}
check:
	if (ent->crc32) {
		uint32_t got = tpc_crc32_parallel(buf, have);
		if (got != ent->crc32) {
			ret = crc_mismatch(z, ent, got, e);
			goto out;
		}
	}
	*out = buf;
	*len = have;
	buf = NULL;
out:
	if (live)
		inflateEnd(&s);
	free(buf);
	return ret;
}

int tpc_zip_read(const tpc_zip *z, const tpc_zip_entry *ent, uint64_t cap, const uint8_t **p,
		 uint64_t *len, uint8_t **owned, tpc_err *e)
{
	int ret = 0;
	*owned = NULL;
	if (ent->method == TPC_ZIP_STORED)
		ret = tpc_zip_stored(z, ent, p, len, e);
	else if (!(ret = tpc_zip_inflate(z, ent, cap, owned, len, e)))
		*p = *owned;
	return ret;
}
