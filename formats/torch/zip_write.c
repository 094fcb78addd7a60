/*
 * zip_write.c - torch's zip container, written: the layout of one record (a
 * miniz-compatible local header, 64-byte aligned payload, data descriptor),
 * the central directory and end records, and the streaming writer over a
 * tpc_out; see tpc_zip.h for the byte layout. zip.c reads what this writes.
 */
#include "zip_int.h"

#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"

/* ----------------------------------------------------------------------- */
/* Layout                                                                   */

static uint32_t zip64_len(uint64_t size, uint64_t offset)
{
	bool big = size >= U32_SAT, far = offset >= U32_SAT;
	return (big || far) ? 4u + (big ? 16u : 0u) + (far ? 8u : 0u) : 0u;
}

int tpc_zip_plan_record(uint64_t cursor, size_t name_len, uint64_t size, tpc_zip_plan *p)
{
	int ret = 0;
	uint32_t z64 = zip64_len(size, cursor);
	uint64_t start, end;

	memset(p, 0, sizeof(*p));
	/* torch's getPadding(): the payload would start after the header, the
	 * name, the zip64 field and the 4 bytes of the FB field's header. */
	if (name_len == 0 || name_len > TPC_ZIP_NAME_MAX ||
	    tpc_add_u64(cursor, LOCAL_LEN + name_len + z64 + 4u, &start)) {
		ret = -1;
		goto out;
	}
	p->pad = (uint32_t)((TPC_ZIP_ALIGN - start % TPC_ZIP_ALIGN) % TPC_ZIP_ALIGN);
	p->header_offset = cursor;
	p->zip64_len = z64;
	p->extra_len = z64 + 4u + p->pad;
	p->header_len = LOCAL_LEN + (uint32_t)name_len + p->extra_len;
	p->data_offset = start + p->pad;
	p->desc_len = size == 0 ? 0u : (z64 ? 24u : 16u);
	if (p->data_offset < start || tpc_add_u64(p->data_offset, size, &end) ||
	    tpc_add_u64(end, p->desc_len, &p->end))
		ret = -1;
out:
	return ret;
}

uint64_t tpc_zip_central_len(size_t name_len, uint64_t size, uint64_t header_offset)
{
	return CENTRAL_LEN + name_len + zip64_len(size, header_offset);
}

void tpc_zip_encode_local(uint8_t *buf, const char *name, size_t name_len, uint64_t size,
			  const tpc_zip_plan *p)
{
	uint8_t *q = buf + LOCAL_LEN + name_len;

	memset(buf, 0, LOCAL_LEN);
	tpc_wr32le(buf, SIG_LOCAL);
	/* version needed 0, time and date 0, CRC and sizes 0: miniz, zip64 mode */
	tpc_wr16le(buf + 6, size ? FLAG_UTF8 | FLAG_DESCRIPTOR : FLAG_UTF8);
	tpc_wr16le(buf + 26, (uint16_t)name_len);
	tpc_wr16le(buf + 28, (uint16_t)p->extra_len);
	memcpy(buf + LOCAL_LEN, name, name_len);
	if (p->zip64_len) {
		tpc_wr16le(q, 0x0001);
		tpc_wr16le(q + 2, (uint16_t)(p->zip64_len - 4));
		q += 4;
		if (size >= U32_SAT) {
			tpc_wr64le(q, size);
			tpc_wr64le(q + 8, 0); /* compressed size: unknown to miniz yet */
			q += 16;
		}
		if (p->header_offset >= U32_SAT) {
			tpc_wr64le(q, p->header_offset);
			q += 8;
		}
	}
	q[0] = 'F';
	q[1] = 'B';
	tpc_wr16le(q + 2, (uint16_t)p->pad);
	memset(q + 4, 'Z', p->pad);
}

void tpc_zip_encode_descriptor(uint8_t *buf, uint64_t size, uint32_t crc32, const tpc_zip_plan *p)
{
	if (p->desc_len) {
		tpc_wr32le(buf, SIG_DESC);
		tpc_wr32le(buf + 4, crc32);
	}
	if (p->desc_len == 24) {
		tpc_wr64le(buf + 8, size);
		tpc_wr64le(buf + 16, size);
	} else if (p->desc_len == 16) {
		tpc_wr32le(buf + 8, (uint32_t)size);
		tpc_wr32le(buf + 12, (uint32_t)size);
	}
}

static uint32_t sat32(uint64_t v)
{
	return v > U32_SAT ? U32_SAT : (uint32_t)v;
}

void tpc_zip_encode_tail(tpc_buf *b, const tpc_zipw_rec *recs, size_t n, uint64_t cd_offset)
{
	size_t start = b->len;
	uint8_t h[EOCD64_LEN];

	for (size_t i = 0; i < n; i++) {
		const tpc_zipw_rec *r = &recs[i];
		size_t nlen = strlen(r->name);
		uint32_t z64 = zip64_len(r->size, r->header_offset);
		memset(h, 0, CENTRAL_LEN);
		tpc_wr32le(h, SIG_CENTRAL);
		/* made by 0, needed 0, method 0, time and date 0, no comment,
		 * disk 0, attributes 0 */
		tpc_wr16le(h + 8, r->size ? FLAG_UTF8 | FLAG_DESCRIPTOR : FLAG_UTF8);
		tpc_wr32le(h + 16, r->crc32);
		tpc_wr32le(h + 20, sat32(r->size));
		tpc_wr32le(h + 24, sat32(r->size));
		tpc_wr16le(h + 28, (uint16_t)nlen);
		tpc_wr16le(h + 30, (uint16_t)z64);
		tpc_wr32le(h + 42, sat32(r->header_offset));
		tpc_buf_add(b, h, CENTRAL_LEN);
		tpc_buf_add(b, r->name, nlen);
		if (z64) {
			uint8_t x[28], *q = x + 4;
			tpc_wr16le(x, 0x0001);
			tpc_wr16le(x + 2, (uint16_t)(z64 - 4));
			if (r->size >= U32_SAT) {
				tpc_wr64le(q, r->size);
				tpc_wr64le(q + 8, r->size);
				q += 16;
			}
			if (r->header_offset >= U32_SAT) {
				tpc_wr64le(q, r->header_offset);
				q += 8;
			}
			tpc_buf_add(b, x, (size_t)(q - x));
		}
	}
	uint64_t cd_size = b->len - start, z64_at = cd_offset + cd_size;

	memset(h, 0, EOCD64_LEN);
	tpc_wr32le(h, SIG_EOCD64);
	tpc_wr64le(h + 4, EOCD64_LEN - 12);
	tpc_wr16le(h + 12, 0x031E);
	tpc_wr16le(h + 14, 45);
	tpc_wr64le(h + 24, n);
	tpc_wr64le(h + 32, n);
	tpc_wr64le(h + 40, cd_size);
	tpc_wr64le(h + 48, cd_offset);
	tpc_buf_add(b, h, EOCD64_LEN);

	memset(h, 0, LOC64_LEN);
	tpc_wr32le(h, SIG_LOC64);
	tpc_wr64le(h + 8, z64_at);
	tpc_wr32le(h + 16, 1);
	tpc_buf_add(b, h, LOC64_LEN);

	memset(h, 0, EOCD_LEN);
	tpc_wr32le(h, SIG_EOCD);
	tpc_wr16le(h + 8, n > U16_SAT ? U16_SAT : (uint16_t)n);
	tpc_wr16le(h + 10, n > U16_SAT ? U16_SAT : (uint16_t)n);
	tpc_wr32le(h + 12, sat32(cd_size));
	tpc_wr32le(h + 16, sat32(cd_offset));
	tpc_buf_add(b, h, EOCD_LEN);
}

/* ----------------------------------------------------------------------- */
/* Writer                                                                   */

void tpc_zipw_init(tpc_zipw *w, tpc_out *out, const char *prefix)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
	w->prefix = prefix;
	w->base = out ? out->size : 0;
	w->pos = 0;
}

void tpc_zipw_release(tpc_zipw *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++)
		free(w->recs[i].name);
	free(w->recs);
	w->recs = NULL;
	w->n = w->cap = 0;
}

/* The writer is usable, the output is where the archive ends and no record
 * is open: a record may begin, or the archive end. */
static int zipw_ready(const tpc_zipw *w, tpc_err *e)
{
	int ret = 0;
	if (w->failed || w->finished || !w->out)
		ret = tpc_err_set(e, TPC_EUSAGE, "zip writer: %s",
				  w->failed ? "an earlier error left the archive incomplete"
				  : w->out  ? "the archive is already finished"
					    : "no output");
	else if (w->out->size != w->base + w->pos)
		ret = tpc_err_set(e, TPC_EUSAGE,
				  "zip writer: the output is at byte %llu but the archive ends at "
				  "%llu (bytes written behind the writer's back?)",
				  (ull)w->out->size, (ull)(w->base + w->pos));
	else if (w->in_record)
		ret = tpc_err_set(e, TPC_EUSAGE, "zip writer: record '" NAMEF "' is still open",
				  w->recs[w->n - 1].name);
	return ret;
}

int tpc_zipw_begin(tpc_zipw *w, const char *name, uint64_t size, uint64_t *data_offset,
		   tpc_err *e)
{
	int ret = 0;
	char *full = NULL;
	uint8_t *hdr = NULL;
	bool pre = w->prefix && *w->prefix;
	tpc_zip_plan p;

	if ((ret = zipw_ready(w, e)))
		goto out;
	if (!name || !*name || *name == '/') {
		ret = tpc_err_set(e, TPC_EUSAGE, "zip writer: bad record name '%s'",
				  name ? name : "(null)");
		goto out;
	}
	size_t plen = pre ? strlen(w->prefix) : 0, nlen = strlen(name);
	size_t flen = plen + (pre ? 1 : 0) + nlen;
	if (tpc_zip_plan_record(w->pos, flen, size, &p)) {
		ret = tpc_err_set(e, TPC_EUSAGE,
				  "zip writer: record '" NAMEF "' does not fit (name of %zu bytes, "
				  "at most %u)",
				  name, flen, TPC_ZIP_NAME_MAX);
		goto out;
	}
	if (w->n == w->cap &&
	    tpc_grow((void **)&w->recs, &w->cap, w->n + 1, sizeof(*w->recs))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	full = tpc_malloc(flen + 1);
	hdr = tpc_malloc(p.header_len);
	if (!full || !hdr) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	memcpy(full, w->prefix ? w->prefix : "", plen);
	if (pre)
		full[plen] = '/';
	memcpy(full + flen - nlen, name, nlen + 1);
	tpc_zip_encode_local(hdr, full, flen, size, &p);
	if ((ret = tpc_out_write(w->out, hdr, p.header_len, e))) {
		w->failed = true;
		goto out;
	}
	/* a reader of the archive reads every record's local header (the
	 * payload's place): kept in the page cache once written */
	tpc_out_keep_cached(w->out, w->base + p.header_offset, p.header_len);
	w->recs[w->n].name = full;
	w->recs[w->n].header_offset = p.header_offset;
	w->recs[w->n].size = size;
	w->recs[w->n].crc32 = 0;
	w->n++;
	full = NULL;
	w->pos = p.data_offset;
	w->cur = p;
	w->cur_size = size;
	w->in_record = true;
	if (data_offset)
		*data_offset = w->base + p.data_offset;
out:
	free(hdr);
	free(full);
	return ret;
}

int tpc_zipw_write(tpc_zipw *w, const void *p, size_t n, tpc_err *e)
{
	int ret = 0;
	uint64_t data = w->base + w->cur.data_offset;
	if (!w->in_record || w->failed || w->out->size < data || n > data + w->cur_size - w->out->size) {
		ret = tpc_err_set(e, TPC_EUSAGE, "zip writer: %zu payload bytes do not fit the "
				  "open record", n);
		goto out;
	}
	if ((ret = tpc_out_write(w->out, p, n, e)))
		w->failed = true;
out:
	return ret;
}

int tpc_zipw_end(tpc_zipw *w, uint32_t crc32, tpc_err *e)
{
	int ret = 0;
	uint8_t d[24];
	uint64_t want = w->base + w->cur.data_offset + w->cur_size;

	if (!w->in_record || w->failed) {
		ret = tpc_err_set(e, TPC_EUSAGE, "zip writer: no open record");
		goto out;
	}
	if (w->out->size != want) {
		w->failed = true;
		ret = tpc_err_set(e, TPC_EUSAGE,
				  "zip writer: record '" NAMEF "' needs %llu payload bytes, but the "
				  "output is at %llu instead of %llu",
				  w->recs[w->n - 1].name, (ull)w->cur_size, (ull)w->out->size,
				  (ull)want);
		goto out;
	}
	tpc_zip_encode_descriptor(d, w->cur_size, crc32, &w->cur);
	if (w->cur.desc_len && (ret = tpc_out_write(w->out, d, w->cur.desc_len, e))) {
		w->failed = true;
		goto out;
	}
	/* the descriptor, beside the next record's header (tpc_zipw_add keeps
	 * a record from memory whole: data.pkl is read, a tensor's bytes not) */
	tpc_out_keep_cached(w->out, w->base + w->cur.data_offset + w->cur_size, w->cur.desc_len);
	w->recs[w->n - 1].crc32 = w->cur_size ? crc32 : 0;
	w->pos = w->cur.end;
	w->in_record = false;
out:
	return ret;
}

int tpc_zipw_add(tpc_zipw *w, const char *name, const void *data, uint64_t len, tpc_err *e)
{
	int ret = 0;
	uint32_t crc = len ? tpc_crc32_parallel(data, len) : 0;
	const uint8_t *p = data;
	uint64_t at;

	if ((ret = tpc_zipw_begin(w, name, len, &at, e)))
		goto out;
	tpc_out_keep_cached(w->out, at, len);
	while (len) { /* tpc_out_write takes size_t */
		size_t k = len > (1u << 30) ? (1u << 30) : (size_t)len;
		if ((ret = tpc_zipw_write(w, p, k, e)))
			goto out;
		p += k;
		len -= k;
	}
	ret = tpc_zipw_end(w, crc, e);
out:
	return ret;
}

static int cmp_rec_name(const void *a, const void *b)
{
	return strcmp((*(const tpc_zipw_rec *const *)a)->name,
		      (*(const tpc_zipw_rec *const *)b)->name);
}

int tpc_zipw_finish(tpc_zipw *w, tpc_err *e)
{
	int ret = 0;
	const tpc_zipw_rec **sorted = NULL;
	tpc_buf b = TPC_BUF_INIT;

	if ((ret = zipw_ready(w, e)))
		goto out;
	if (!(sorted = tpc_malloc(w->n * sizeof(*sorted)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < w->n; i++)
		sorted[i] = &w->recs[i];
	qsort(sorted, w->n, sizeof(*sorted), cmp_rec_name);
	for (size_t i = 1; i < w->n; i++) {
		if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0) {
			ret = tpc_err_set(e, TPC_EUSAGE, "zip writer: duplicate record name '" NAMEF "'",
					  sorted[i]->name);
			goto out;
		}
	}
	tpc_zip_encode_tail(&b, w->recs, w->n, w->pos);
	if (b.oom) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = tpc_out_write(w->out, b.p, b.len, e))) {
		w->failed = true;
		goto out;
	}
	tpc_out_keep_cached(w->out, w->base + w->pos, b.len); /* the central directory and end records */
	w->pos += b.len;
	w->finished = true;
out:
	tpc_buf_release(&b);
	free(sorted);
	return ret;
}
