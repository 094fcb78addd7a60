/*
 * tpc_stream.c - moving a tensor's bytes: its image read from the sources
 * (views gathered, composites part by part, dequantized rows computed, casts
 * applied through bounded buffers), written to an output (in the kernel, as
 * iovecs over the mappings, or jointly for the rank slices of one weight),
 * hashed, and the mapped input pages dropped behind. The tensors are
 * tpc_ckpt.c's descriptions; the calls are declared in tpc_ckpt.h.
 */
#include "tpc_ckpt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "tpc_cast.h"
#include "tpc_format.h"
#include "tpc_quant.h"
#include "tpc_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- reading bytes ---- */

static void swap_elems(uint8_t *p, uint64_t n, unsigned es)
{
	if (es < 2)
		return;
	for (uint64_t i = 0; i < n; i++, p += es)
		for (unsigned a = 0, b = es - 1; a < b; a++, b--) {
			uint8_t c = p[a];
			p[a] = p[b];
			p[b] = c;
		}
}

/* Gather elements [e0, e0+cnt) of the C-order image of t into dst. */
static void gather(const uint8_t *base, const tpc_tensor *t, uint64_t e0, uint64_t cnt, uint8_t *dst)
{
	unsigned es = tpc_dtype_size(t->src_dtype);
	int nd = t->ndim;
	int64_t idx[TPC_MAX_NDIM];
	uint64_t rem = e0;
	if (!cnt)
		return;
	for (int d = nd - 1; d >= 0; d--) {
		uint64_t s = (uint64_t)t->shape[d];
		idx[d] = (int64_t)(rem % s);
		rem /= s;
	}
	if (nd == 0) {
		memcpy(dst, base, es);
		return;
	}
	int64_t inner = t->shape[nd - 1], istr = t->stride[nd - 1];
	while (cnt) {
		uint64_t off = 0;
		for (int d = 0; d < nd; d++)
			off += (uint64_t)idx[d] * (uint64_t)t->stride[d];
		uint64_t run = (uint64_t)(inner - idx[nd - 1]);
		if (run > cnt)
			run = cnt;
		const uint8_t *s = base + off * es;
		if (istr == 1) {
			memcpy(dst, s, run * es);
		} else if (es == 4) {
			for (uint64_t k = 0; k < run; k++)
				memcpy(dst + 4 * k, s + (uint64_t)istr * 4 * k, 4);
		} else if (es == 2) {
			for (uint64_t k = 0; k < run; k++)
				memcpy(dst + 2 * k, s + (uint64_t)istr * 2 * k, 2);
		} else {
			for (uint64_t k = 0; k < run; k++)
				memcpy(dst + es * k, s + (uint64_t)istr * es * k, es);
		}
		dst += run * es;
		cnt -= run;
		idx[nd - 1] += (int64_t)run;
		for (int d = nd - 1; d > 0 && idx[d] >= t->shape[d]; d--) {
			idx[d] = 0;
			idx[d - 1]++;
		}
	}
}

/* Rows [o, o + *n) of composite t, whole, read part by part: a part's
 * piece of consecutive rows is one run of its file, read with one preadv
 * straight into the pieces' places in dst (IOV_MAX rows a call). A
 * reshard's hashing read the row-parallel weights of its input set a piece
 * of a row at a time: 393,000 preads of 2-4 KiB for tp 4 -> 8 of the 4.74 GB
 * model, a third of its CPU time in the system call's own cost. Only when
 * every part is a plain run of a mapped file; *n is set to the rows read (0:
 * the caller goes piece by piece). */
static int read_part_rows(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t o, uint64_t rows, const uint64_t *inner,
			  uint64_t row, uint8_t *dst, unsigned es, tpc_part_fn fn, void *ctx, uint64_t *n, tpc_err *e)
{
	enum { BATCH = 1024 }; /* IOV_MAX */
	struct iovec iov[BATCH];
	*n = 0;
	for (int k = 0; k < t->nparts; k++) {
		const tpc_tensor *p = &t->parts[k];
		const tpc_map *m = tpc_ckpt_source(ck, p->src);
		if (!m || m->fd < 0 || p->nparts || p->dq || (p->flags & (TPC_TF_ZERO | TPC_TF_BYTESWAP)) ||
		    !tpc_tensor_is_contiguous(p) || tpc_dtype_size(p->src_dtype) != es ||
		    p->offset > m->size || (o + rows) * inner[k] * es > m->size - p->offset ||
		    (o + rows) * inner[k] > p->numel)
			return 0;
	}
	if (rows > BATCH)
		rows = BATCH;
	uint64_t cum = 0;
	for (int k = 0; k < t->nparts; k++) {
		const tpc_tensor *p = &t->parts[k];
		const tpc_map *m = tpc_ckpt_source(ck, p->src);
		uint64_t piece = inner[k] * es, at = p->offset + o * piece, want = rows * piece;
		for (uint64_t i = 0; i < rows; i++) {
			iov[i].iov_base = dst + (i * row + cum) * es;
			iov[i].iov_len = (size_t)piece;
		}
		ssize_t got;
		do
			got = preadv(m->fd, iov, (int)rows, (off_t)at);
		while (got < 0 && errno == EINTR);
		if (got != (ssize_t)want) {
			/* a short read: this part piece by piece, from the start
			 * of the batch (the same bytes again) */
			for (uint64_t i = 0; i < rows; i++) {
				int r = tpc_ckpt_read_bytes(ck, p, (o + i) * piece, piece, iov[i].iov_base, e);
				if (r)
					return r;
			}
		}
		if (fn)
			for (uint64_t i = 0; i < rows; i++)
				fn(ctx, k, iov[i].iov_base, (size_t)piece);
		cum += inner[k];
	}
	*n = rows;
	return 0;
}

/* Parts of a composite, element range [e0, e0+cnt) of its C-order image;
 * fn (may be NULL) sees each part's run once it is read. A Q/K permutation
 * to GGUF's pairs has heads x head_dim / 2 parts (1024 for a 4096-wide
 * llama): their sizes on the heap past 64. */
static int read_composite(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t e0, uint64_t cnt,
			  uint8_t *dst, unsigned es, tpc_part_fn fn, void *ctx, tpc_err *e)
{
	/* a composite of many parts (the rows of every head of a llama attn_q
	 * interleaved for GGUF: heads x head_dim / 2 parts) sizes its own */
	uint64_t inner_buf[64], *inner = inner_buf, row = 0;
	int np = t->nparts, ret = 0;
	if (np > 64 && !(inner = tpc_calloc((size_t)np, sizeof(*inner))))
		return tpc_err_nomem(e);
	for (int k = 0; k < np; k++) {
		uint64_t n = 1;
		for (int d = t->cat_dim; d < t->ndim; d++)
			n *= (uint64_t)t->parts[k].shape[d];
		inner[k] = n;
		row += n;
	}
	while (cnt && !ret) {
		uint64_t o = e0 / row, w = e0 % row, cum = 0;
		int k = 0;
		if (!w && cnt >= 2 * row) {
			/* whole rows: each part's piece of them in one call */
			uint64_t n = cnt / row;
			if ((ret = read_part_rows(ck, t, o, n, inner, row, dst, es, fn, ctx, &n, e)))
				break;
			if (n) {
				dst += n * row * es;
				e0 += n * row;
				cnt -= n * row;
				continue;
			}
		}
		while (w >= cum + inner[k])
			cum += inner[k++];
		uint64_t take = cum + inner[k] - w;
		if (take > cnt)
			take = cnt;
		if ((ret = tpc_ckpt_read_bytes(ck, &t->parts[k], (o * inner[k] + (w - cum)) * es, take * es, dst, e)))
			break;
		if (fn)
			fn(ctx, k, dst, (size_t)(take * es));
		dst += take * es;
		e0 += take;
		cnt -= take;
	}
	if (inner != inner_buf)
		free(inner);
	return ret;
}

int tpc_ckpt_read_bytes(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t off, uint64_t len,
			void *dst, tpc_err *e)
{
	return tpc_ckpt_read_parts(ck, t, off, len, dst, NULL, NULL, e);
}

int tpc_ckpt_read_parts(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t off, uint64_t len, void *dst,
			tpc_part_fn fn, void *ctx, tpc_err *e)
{
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	unsigned es = tpc_dtype_size(t->src_dtype);
	uint64_t nbytes_src = t->numel * tpc_dtype_bits(t->src_dtype) / 8;
	if (off > nbytes_src || len > nbytes_src - off)
		return tpc_err_set(e, TPC_EINPUT, "internal: read outside tensor '%s'", t->name ? t->name : "?");
	if (!len)
		return 0;
	if (t->flags & TPC_TF_ZERO) {
		memset(dst, 0, (size_t)len);
		return 0;
	}
	if (t->dq) {
		if (off % es || len % es || t->src_dtype != TPC_F32)
			return tpc_err_set(e, TPC_EINPUT, "internal: unaligned read of dequantized '%s'",
					   t->name ? t->name : "?");
		return tpc__dequant_read(ck, t, off / es, len / es, dst, e);
	}
	if (t->nparts) {
		if (off % es || len % es || tpc_dtype_bits(t->src_dtype) < 8)
			return tpc_err_set(e, TPC_EINPUT, "internal: unaligned read of composite '%s'",
					   t->name ? t->name : "?");
		return read_composite(ck, t, off / es, len / es, dst, es, fn, ctx, e);
	}
	if (!m)
		return tpc_err_set(e, TPC_EINPUT, "internal: tensor '%s' has no source", t->name ? t->name : "?");
	if (tpc_tensor_is_contiguous(t)) {
		/* pread: the kernel's copy out of the page cache, where a memcpy
		 * from the mapping pays a fault per page it first touches (40% of
		 * a reshard's CPU time went to that memcpy) */
		const uint8_t *p = tpc_map_bytes(m, t->offset + off, len, dst);
		if (p != dst)
			memcpy(dst, p, (size_t)len);
	} else {
		if (off % es || len % es)
			return tpc_err_set(e, TPC_EINPUT, "internal: unaligned strided read of '%s'", t->name);
		const uint8_t *base = m->data + t->offset;
		uint64_t e0 = off / es, cnt = len / es;
		uint8_t *d = dst;
		if (cnt >= (1u << 16)) {
#ifdef _OPENMP
#pragma omp parallel
			{
				int nt = omp_get_num_threads(), me = omp_get_thread_num();
				uint64_t per = (cnt + (uint64_t)nt - 1) / (uint64_t)nt;
				uint64_t a = per * (uint64_t)me;
				if (a < cnt) {
					uint64_t c = cnt - a < per ? cnt - a : per;
					gather(base, t, e0 + a, c, d + a * es);
				}
			}
#else
			gather(base, t, e0, cnt, d);
#endif
		} else {
			gather(base, t, e0, cnt, d);
		}
	}
	if (t->flags & TPC_TF_BYTESWAP)
		swap_elems(dst, len / es, es);
	return 0;
}

/*
 * Casting (tpc_cast.h): a tensor whose dtype differs from its src_dtype is
 * read in source elements through a bounded buffer `tmp` and converted into
 * the caller's buffer, so a cast costs two chunk-sized buffers, never a
 * whole-tensor one.
 */
static int read_out_elems(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t e0, uint64_t cnt,
			  uint8_t *dst, uint8_t *tmp, uint64_t tmpcap, tpc_err *e)
{
	unsigned is = tpc_dtype_size(t->src_dtype), os = tpc_dtype_size(t->dtype);
	uint64_t per = tmpcap / is;
	int ret = 0;
	while (cnt && !ret) {
		uint64_t k = cnt < per ? cnt : per;
		ret = tpc_ckpt_read_bytes(ck, t, e0 * is, k * is, tmp, e);
		if (!ret)
			ret = tpc_cast(dst, t->dtype, tmp, t->src_dtype, k, e);
		dst += k * os;
		e0 += k;
		cnt -= k;
	}
	return ret;
}

static bool cast_pending(const tpc_tensor *t)
{
	return t->dtype != t->src_dtype;
}

int tpc_ckpt_read_out(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t out_off, uint64_t out_len,
		      void *dst, tpc_err *e)
{
	if (!cast_pending(t))
		return tpc_ckpt_read_bytes(ck, t, out_off, out_len, dst, e);
	unsigned is = tpc_dtype_size(t->src_dtype), os = tpc_dtype_size(t->dtype);
	if (tpc_dtype_bits(t->src_dtype) < 8 || tpc_dtype_bits(t->dtype) < 8 || out_off % os ||
	    out_len % os || out_off > t->nbytes || out_len > t->nbytes - out_off)
		return tpc_err_set(e, TPC_EINPUT, "internal: unaligned or out-of-range read of cast tensor '%s'",
				   t->name ? t->name : "?");
	uint64_t cnt = out_len / os, cap = (uint64_t)(TPC_GATHER_CHUNK / is) * is;
	if (!cnt)
		return 0;
	if (cap > cnt * is)
		cap = cnt * is;
	size_t tmplen = 0;
	uint8_t *tmp = tpc_scratch_get((size_t)cap, &tmplen);
	if (!tmp)
		return tpc_err_nomem(e);
	int ret = read_out_elems(ck, t, out_off / os, cnt, dst, tmp, cap, e);
	tpc_scratch_put(tmp, tmplen);
	return ret;
}

/* Drop the mapped pages a tensor's bytes came from out of our resident set
 * (the page cache keeps them): a pass over a big model stays at a bounded RSS. */
void tpc_ckpt_drop_pages(const tpc_ckpt *ck, const tpc_tensor *t)
{
	if (t->dq) {
		for (int k = 0; k < t->dq->nc; k++)
			tpc_ckpt_drop_pages(ck, &t->dq->c[k]);
		return;
	}
	if (t->nparts) {
		for (int k = 0; k < t->nparts; k++)
			tpc_ckpt_drop_pages(ck, &t->parts[k]);
		return;
	}
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	if (!m || (t->flags & (TPC_TF_ZERO | TPC_TF_NODATA)) || !t->numel)
		return;
	uint64_t lo, hi;
	tpc_tensor_extent(t, &lo, &hi);
	if (hi > lo && hi <= m->size)
		tpc_map_drop(m, lo, hi - lo);
}

void tpc_ckpt_drop_range(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t off, uint64_t len)
{
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	unsigned os = tpc_dtype_size(t->dtype), is = tpc_dtype_size(t->src_dtype);
	if (!m || t->nparts || (t->flags & TPC_TF_ZERO) || !tpc_tensor_is_contiguous(t) || !os)
		return;
	tpc_map_drop(m, t->offset + off / os * is, len / os * is);
}

/* Hand tensor t's output image to `sink` in chunks of at most TPC_GATHER_CHUNK bytes. */
static int stream_out(const tpc_ckpt *ck, const tpc_tensor *t,
		      int (*sink)(void *ctx, const uint8_t *p, size_t n, tpc_err *e), void *ctx,
		      tpc_err *e)
{
	unsigned os = tpc_dtype_size(t->dtype), is = tpc_dtype_size(t->src_dtype);
	uint64_t chunk = TPC_GATHER_CHUNK / os * os, tmpcap = 0;
	uint8_t *buf = NULL, *tmp = NULL;
	size_t buflen = 0, tmplen = 0;
	int ret = 0;
	bool cast = cast_pending(t);
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	bool contig_src = m && !t->nparts && !(t->flags & TPC_TF_ZERO) && tpc_tensor_is_contiguous(t);
	if (cast && (tpc_dtype_bits(t->src_dtype) < 8 || tpc_dtype_bits(t->dtype) < 8))
		return tpc_err_set(e, TPC_EUSAGE, "cannot cast %s to %s", tpc_dtype_name(t->src_dtype),
				   tpc_dtype_name(t->dtype));
	buf = tpc_scratch_get((size_t)(chunk < t->nbytes ? chunk : t->nbytes), &buflen);
	if (cast) {
		tmpcap = chunk / os * is;
		if (tmpcap > t->numel * is)
			tmpcap = t->numel * is;
		tmp = tpc_scratch_get((size_t)tmpcap, &tmplen);
	}
	if (!buf || (cast && !tmp)) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (uint64_t off = 0; off < t->nbytes && !ret; off += chunk) {
		uint64_t k = t->nbytes - off < chunk ? t->nbytes - off : chunk;
		if (cast)
			ret = read_out_elems(ck, t, off / os, k / os, buf, tmp, tmpcap, e);
		else
			ret = tpc_ckpt_read_bytes(ck, t, off, k, buf, e);
		if (!ret)
			ret = sink(ctx, buf, (size_t)k, e);
		if (!ret && contig_src)
			tpc_ckpt_drop_range(ck, t, off, k);
	}
	if (!ret && !contig_src)
		tpc_ckpt_drop_pages(ck, t);
out:
	tpc_scratch_put(tmp, tmplen);
	tpc_scratch_put(buf, buflen);
	return ret;
}

static int sink_out(void *ctx, const uint8_t *p, size_t n, tpc_err *e)
{
	return tpc_out_write(ctx, p, n, e);
}

/* The bytes can go straight from the source mapping to the output. */
static bool plain_copy(const tpc_tensor *t, const tpc_map *m)
{
	return m && !t->nparts && !(t->flags & (TPC_TF_ZERO | TPC_TF_BYTESWAP)) && !cast_pending(t) &&
	       tpc_tensor_is_contiguous(t);
}

/* ---- zero-copy gather: a view's or composite's C-order image written as
 * runs of the mapped source bytes (pwritev), with no user-space copy ----
 *
 * A row-parallel slice ([out, in/tp] of [out, in]) or a merged row-parallel
 * weight (a composite cut along dim 1) is many contiguous runs, one per row
 * and part. Handing the kernel iovecs that point into the mappings saves the
 * gsink copy the buffered path makes. Used when every leaf is a plain view
 * (no cast, no byte swap, whole-byte dtype) or a zero fill and the shortest
 * run is at least GATHER_MIN_RUN bytes. */
#define GATHER_MIN_RUN 512u
#define GATHER_IOV 1024

static const uint8_t zero_page[65536];

/* Each flush drops the input pages its runs came from, per source file the
 * span from the first run to the last (a merged row-parallel weight reads
 * one span in each rank file): the resident set stays at a few flushes'
 * worth instead of a whole tensor per writer thread. */
#define GATHER_SPANS 16

typedef struct gsink {
	tpc_out *o;
	struct iovec iov[GATHER_IOV];
	int n;
	struct {
		const tpc_map *m;
		uint64_t lo, hi;
	} span[GATHER_SPANS];
	int nspan;
} gsink;

/* Map the batch's source pages before the pwritev (tpc_map_populate says
 * why): the spans when they are few MiB (a row-parallel slice at tp 8 reads
 * an eighth of its span; one call is cheaper than 1024), else each run, so
 * that what is mapped stays near what the batch copies. */
#define GATHER_POPULATE_SPAN (32u << 20)

static void gather_populate(gsink *g)
{
	uint64_t spans = 0;
	for (int i = 0; i < g->nspan; i++)
		spans += g->span[i].hi - g->span[i].lo;
	if (spans <= GATHER_POPULATE_SPAN) {
		for (int i = 0; i < g->nspan; i++)
			tpc_map_populate(g->span[i].m, g->span[i].lo, g->span[i].hi - g->span[i].lo);
		return;
	}
	for (int k = 0; k < g->n; k++) {
		const uint8_t *p = g->iov[k].iov_base;
		if (p == zero_page)
			continue;
		for (int i = 0; i < g->nspan; i++) {
			const tpc_map *m = g->span[i].m;
			if (p >= m->data && p < m->data + m->size) {
				tpc_map_populate(m, (uint64_t)(p - m->data), g->iov[k].iov_len);
				break;
			}
		}
	}
}

/* The batch's source bytes are read with pread into one window per span
 * (GATHER_WIN bytes from the run that needs it) and the runs written from
 * there. On the bench VM a page read through a user mapping costs its first
 * touch (1.6 us per 4 KiB page, measured: 0.33 GB/s for 1 KiB runs at an
 * 8 KiB stride through the mapping, 8.8 GB/s of window read by pread), and
 * the mapping's pages are dropped behind each batch, so every batch paid it
 * again; the kernel's copy out of the page cache does not. A row-parallel
 * slice at tp 8 reads its whole span for an eighth of it, and that is still
 * cheaper. Runs are written out before a window they point into is
 * refilled; a run longer than a window goes in window-sized pieces. */
#define GATHER_WIN (2u << 20)

static int gather_windows(gsink *g, uint8_t *win, tpc_err *e)
{
	const uint8_t *base[GATHER_SPANS];
	uint64_t wlo[GATHER_SPANS], wlen[GATHER_SPANS];
	int start = 0, ret = 0;
	for (int i = 0; i < GATHER_SPANS; i++)
		wlen[i] = 0;
	for (int k = 0; k < g->n && !ret; k++) {
		const uint8_t *p = g->iov[k].iov_base;
		uint64_t len = g->iov[k].iov_len;
		int i = 0;
		if (p == zero_page)
			continue;
		while (i < g->nspan && !(p >= g->span[i].m->data && p < g->span[i].m->data + g->span[i].m->size))
			i++;
		if (i == g->nspan)
			return tpc_err_set(e, TPC_EINPUT, "internal: gather run outside its sources");
		const tpc_map *m = g->span[i].m;
		uint64_t off = (uint64_t)(p - m->data);
		if (wlen[i] && off >= wlo[i] && off + len <= wlo[i] + wlen[i]) {
			g->iov[k].iov_base = (void *)(base[i] + (off - wlo[i]));
			continue;
		}
		/* window i moves: what points into the windows is written first */
		if (k > start && (ret = tpc_out_writev(g->o, g->iov + start, k - start, e)))
			return ret;
		start = k;
		uint8_t *w = win + (size_t)i * GATHER_WIN;
		if (len > GATHER_WIN) {
			for (uint64_t done = 0; done < len && !ret;) {
				uint64_t c = len - done < GATHER_WIN ? len - done : GATHER_WIN;
				const uint8_t *q = tpc_map_bytes(m, off + done, c, w);
				ret = tpc_out_write(g->o, q, (size_t)c, e);
				tpc_map_bytes_done(m, q, off + done, c);
				done += c;
			}
			wlen[i] = 0;
			start = k + 1;
			continue;
		}
		wlo[i] = off;
		wlen[i] = m->size - off < GATHER_WIN ? m->size - off : GATHER_WIN;
		base[i] = tpc_map_bytes(m, off, wlen[i], w); /* the mapping itself if pread fails */
		g->iov[k].iov_base = (void *)base[i];
	}
	if (!ret && g->n > start)
		ret = tpc_out_writev(g->o, g->iov + start, g->n - start, e);
	return ret;
}

static int gather_flush(gsink *g, tpc_err *e)
{
	int ret = 0;
	uint8_t *win = g->n ? tpc_out_scratch(g->o, (size_t)g->nspan * GATHER_WIN) : NULL;
	if (win) {
		ret = gather_windows(g, win, e);
	} else if (g->n) {
		gather_populate(g);
		ret = tpc_out_writev(g->o, g->iov, g->n, e);
	}
	g->n = 0;
	/* Drop only the whole blocks (tpc_map_drop's 2 MiB) the spans have
	 * passed: the next batch reads on from where they end. A merge at tp 8
	 * reads 128 KiB of each rank file per batch, and dropping the block
	 * around it made the next 15 batches map the same pages again. The
	 * block the span ends in goes with a later batch or with the tensor
	 * (gather_write's tpc_ckpt_drop_pages). */
	for (int i = 0; i < g->nspan; i++)
		tpc_map_drop_passed(g->span[i].m, g->span[i].lo, g->span[i].hi);
	g->nspan = 0;
	return ret;
}

/* Note that bytes [off, off+len) of m are in the batch. */
static int gather_note(gsink *g, const tpc_map *m, uint64_t off, uint64_t len, tpc_err *e)
{
	int i = 0;
	while (i < g->nspan && g->span[i].m != m)
		i++;
	if (i == g->nspan) {
		if (g->nspan == GATHER_SPANS) {
			int ret = gather_flush(g, e);
			if (ret)
				return ret;
			i = 0;
		}
		g->span[i].m = m;
		g->span[i].lo = off;
		g->span[i].hi = off + len;
		g->nspan = i + 1;
		return 0;
	}
	if (off < g->span[i].lo)
		g->span[i].lo = off;
	if (off + len > g->span[i].hi)
		g->span[i].hi = off + len;
	return 0;
}

static int gather_add(gsink *g, const uint8_t *p, uint64_t len, tpc_err *e)
{
	while (len) {
		size_t k = len > (1u << 30) ? (1u << 30) : (size_t)len;
		if (g->n && (const uint8_t *)g->iov[g->n - 1].iov_base + g->iov[g->n - 1].iov_len == p &&
		    p != zero_page) {
			g->iov[g->n - 1].iov_len += k; /* adjacent: one run */
		} else {
			if (g->n == GATHER_IOV) {
				int ret = gather_flush(g, e);
				if (ret)
					return ret;
			}
			g->iov[g->n].iov_base = (void *)p;
			g->iov[g->n].iov_len = k;
			g->n++;
		}
		p += k;
		len -= k;
	}
	return 0;
}

/* First dim k from which t's dims are C-contiguous in its strides (ndim when
 * not even the last one is): each run is then product(shape[k..]) elements. */
static int contig_from(const tpc_tensor *t)
{
	int64_t want = 1;
	int k = t->ndim;
	while (k > 0 && (t->shape[k - 1] == 1 || t->stride[k - 1] == want)) {
		want *= t->shape[k - 1];
		k--;
	}
	return k;
}

/* Shortest run in bytes of t's image (UINT64_MAX for zero fills), or 0 when
 * some leaf cannot be gathered. */
static uint64_t gather_min_run(const tpc_ckpt *ck, const tpc_tensor *t, tpc_dtype dt)
{
	if (t->dtype != dt || cast_pending(t) || (t->flags & TPC_TF_BYTESWAP) || tpc_dtype_bits(dt) < 8)
		return 0;
	if (t->nparts) {
		uint64_t m = UINT64_MAX;
		for (int k = 0; k < t->nparts; k++) {
			uint64_t r = gather_min_run(ck, &t->parts[k], dt);
			m = r < m ? r : m;
		}
		return m;
	}
	if (t->flags & TPC_TF_ZERO)
		return UINT64_MAX;
	if (!tpc_ckpt_source(ck, t->src))
		return 0;
	uint64_t run = tpc_dtype_size(dt);
	for (int d = contig_from(t); d < t->ndim; d++)
		run *= (uint64_t)t->shape[d];
	return contig_from(t) == t->ndim && t->ndim ? tpc_dtype_size(dt) : run;
}

/* Emit the image of t[idx[0], ..., idx[j-1], :, ...]. For a view, `base` is
 * the byte offset of that block's first element. */
static int gather_block(const tpc_ckpt *ck, const tpc_tensor *t, int64_t *idx, int j, gsink *g, tpc_err *e)
{
	unsigned es = tpc_dtype_size(t->dtype);
	int ret = 0;
	if (t->nparts) {
		int d = t->cat_dim;
		if (j > d) {
			/* the fixed index along cat_dim falls in one part */
			int64_t i = idx[d];
			for (int k = 0; k < t->nparts; k++) {
				if (i < t->parts[k].shape[d]) {
					int64_t keep = idx[d];
					idx[d] = i;
					ret = gather_block(ck, &t->parts[k], idx, j, g, e);
					idx[d] = keep;
					return ret;
				}
				i -= t->parts[k].shape[d];
			}
			return tpc_err_set(e, TPC_EINPUT, "internal: index past the parts of '%s'", t->name);
		}
		if (j == d) {
			for (int k = 0; k < t->nparts && !ret; k++)
				ret = gather_block(ck, &t->parts[k], idx, j, g, e);
			return ret;
		}
		for (int64_t i = 0; i < t->shape[j] && !ret; i++) {
			idx[j] = i;
			ret = gather_block(ck, t, idx, j + 1, g, e);
		}
		return ret;
	}
	uint64_t block = es;
	for (int d = j; d < t->ndim; d++)
		block *= (uint64_t)t->shape[d];
	if (t->flags & TPC_TF_ZERO) {
		for (uint64_t left = block; left && !ret;) {
			uint64_t k = left < sizeof(zero_page) ? left : sizeof(zero_page);
			ret = gather_add(g, zero_page, k, e);
			left -= k;
		}
		return ret;
	}
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	int c = contig_from(t);
	if (c < j)
		c = j;
	uint64_t run = es;
	for (int d = c; d < t->ndim; d++)
		run *= (uint64_t)t->shape[d];
	uint64_t off = t->offset;
	for (int d = 0; d < j; d++)
		off += (uint64_t)idx[d] * (uint64_t)t->stride[d] * es;
	/* walk the dims j..c-1 like an odometer */
	int64_t ctr[TPC_MAX_NDIM];
	for (int d = j; d < c; d++) {
		ctr[d] = 0;
		if (!t->shape[d])
			return 0;
	}
	for (;;) {
		uint64_t o = off;
		for (int d = j; d < c; d++)
			o += (uint64_t)ctr[d] * (uint64_t)t->stride[d] * es;
		if (o > m->size || run > m->size - o)
			return tpc_err_set(e, TPC_EINPUT, "internal: run of '%s' past the end of '%s'", t->name, m->path);
		if ((ret = gather_add(g, m->data + o, run, e)) || (ret = gather_note(g, m, o, run, e)))
			return ret;
		int d = c - 1;
		while (d >= j && ++ctr[d] == t->shape[d])
			ctr[d--] = 0;
		if (d < j)
			return 0;
	}
}

static int gather_write(const tpc_ckpt *ck, const tpc_tensor *t, tpc_out *o, tpc_err *e)
{
	gsink *g = tpc_malloc(sizeof(*g));
	int64_t idx[TPC_MAX_NDIM];
	if (!g)
		return tpc_err_nomem(e);
	g->o = o;
	g->n = 0;
	g->nspan = 0;
	int ret = gather_block(ck, t, idx, 0, g, e);
	if (!ret)
		ret = gather_flush(g, e);
	free(g);
	if (!ret)
		tpc_ckpt_drop_pages(ck, t);
	return ret;
}

/* A composite whose parts follow one another in its C-order image: cut along
 * its first non-unit dimension (a merged column-parallel or vocab-parallel
 * weight), with no cast or byte swap of its own. Each part can then be
 * written on its own, mapped parts in the kernel (copy_file_range). */
static bool parts_in_sequence(const tpc_tensor *t)
{
	if (!t->nparts || cast_pending(t) || (t->flags & (TPC_TF_ZERO | TPC_TF_BYTESWAP)))
		return false;
	for (int d = 0; d < t->cat_dim; d++)
		if (t->shape[d] != 1)
			return false;
	for (int k = 0; k < t->nparts; k++)
		if (t->parts[k].dtype != t->dtype || cast_pending(&t->parts[k]))
			return false;
	return true;
}

/* Is every leaf of composite t copied whole (a contiguous mapped view, or a
 * zero fill) when its parts are written one by one? */
static bool parts_copied(const tpc_ckpt *ck, const tpc_tensor *t)
{
	for (int k = 0; k < t->nparts; k++) {
		const tpc_tensor *p = &t->parts[k];
		if (p->nparts ? !parts_in_sequence(p) || !parts_copied(ck, p)
			      : !(p->flags & TPC_TF_ZERO) && !plain_copy(p, tpc_ckpt_source(ck, p->src)))
			return false;
	}
	return true;
}

int tpc_ckpt_write_tensor(const tpc_ckpt *ck, const tpc_tensor *t, tpc_out *o, tpc_err *e)
{
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	if (t->numel == 0)
		return 0;
	if (!m && !t->nparts && !t->dq && !(t->flags & TPC_TF_ZERO))
		return tpc_err_set(e, TPC_EINPUT, "tensor '%s' has no data", t->name);
	if (plain_copy(t, m))
		return tpc_out_copy(o, m, t->offset, t->nbytes, e);
	/* parts that are strided views (the rows of every head of a llama
	 * attn_q interleaved for GGUF) are gathered in one pass: part by part,
	 * each would read a whole window for its few rows */
	if (parts_in_sequence(t) && (parts_copied(ck, t) || gather_min_run(ck, t, t->dtype) < GATHER_MIN_RUN)) {
		int ret = 0;
		for (int k = 0; k < t->nparts && !ret; k++)
			ret = tpc_ckpt_write_tensor(ck, &t->parts[k], o, e);
		return ret;
	}
	uint64_t run = gather_min_run(ck, t, t->dtype);
	if (run >= GATHER_MIN_RUN && t->ndim <= TPC_MAX_NDIM)
		return gather_write(ck, t, o, e);
	return stream_out(ck, t, sink_out, o, e);
}

/* ---- joint writes: the rank slices of one row-parallel weight ---- */

/* Rows per window: the window holds that many source rows plus the widest
 * offset between the slices (JOINT_WIN is a soft size). */
#define JOINT_WIN (2u << 20)
#define JOINT_IOV 1024

/* Is t[i] a row slice that the joint path can write: a plain 2-D view of
 * whole-byte elements, rows of at least GATHER_MIN_RUN bytes, no cast or
 * swap? */
static bool joint_leaf(const tpc_ckpt *ck, const tpc_tensor *t)
{
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	return m && m->data && m->fd >= 0 && !t->nparts && !t->dq && !(t->flags & (TPC_TF_ZERO | TPC_TF_BYTESWAP)) &&
	       !cast_pending(t) && tpc_dtype_bits(t->dtype) >= 8 && t->ndim == 2 && t->numel && t->stride[1] == 1 &&
	       t->shape[0] > 1 && t->stride[0] > t->shape[1] &&
	       (uint64_t)t->shape[1] * tpc_dtype_size(t->dtype) >= GATHER_MIN_RUN;
}

/* The byte range of one source row the slices cover: [lo, hi + run). */
static bool joint_span(const tpc_ckpt *const *ck, const tpc_tensor *const *t, int n, uint64_t *lo_out,
		       uint64_t *hi_out)
{
	if (n < 2 || n > JOINT_IOV || !joint_leaf(ck[0], t[0]))
		return false;
	const tpc_map *m = tpc_ckpt_source(ck[0], t[0]->src);
	uint64_t es = tpc_dtype_size(t[0]->dtype);
	uint64_t rb = (uint64_t)t[0]->stride[0] * es, run = (uint64_t)t[0]->shape[1] * es;
	uint64_t rows = (uint64_t)t[0]->shape[0], lo = t[0]->offset, hi = t[0]->offset;
	for (int i = 1; i < n; i++) {
		const tpc_map *mi = tpc_ckpt_source(ck[i], t[i]->src);
		/* one file (each writer may read it through a mapping of its own) */
		bool same = mi->size == m->size && (mi->fd == m->fd || (m->ino && mi->dev == m->dev && mi->ino == m->ino));
		if (!joint_leaf(ck[i], t[i]) || !same || t[i]->dtype != t[0]->dtype ||
		    memcmp(t[i]->shape, t[0]->shape, 2 * sizeof(int64_t)) ||
		    memcmp(t[i]->stride, t[0]->stride, 2 * sizeof(int64_t)))
			return false;
		lo = t[i]->offset < lo ? t[i]->offset : lo;
		hi = t[i]->offset > hi ? t[i]->offset : hi;
	}
	/* the slices must lie side by side inside one source row, and that
	 * much of a row must fit a window (longer rows go rank by rank, in
	 * window-sized pieces) */
	if (hi - lo + run > rb || hi - lo + run > JOINT_WIN || lo > m->size ||
	    (rows - 1) * rb + (hi - lo) + run > m->size - lo)
		return false;
	*lo_out = lo;
	*hi_out = hi;
	return true;
}

bool tpc_ckpt_joint_ok(const tpc_ckpt *const *ck, const tpc_tensor *const *t, int n)
{
	uint64_t lo, hi;
	return joint_span(ck, t, n, &lo, &hi);
}

int tpc_ckpt_write_joint(const tpc_ckpt *const *ck, const tpc_tensor *const *t, tpc_out *const *o, int n,
			 bool *joint, int *bad, tpc_err *e)
{
	uint64_t lo, hi;
	*joint = false;
	*bad = 0;
	if (!joint_span(ck, t, n, &lo, &hi))
		return 0;
	const tpc_map *m = tpc_ckpt_source(ck[0], t[0]->src);
	uint64_t es = tpc_dtype_size(t[0]->dtype);
	uint64_t rb = (uint64_t)t[0]->stride[0] * es, run = (uint64_t)t[0]->shape[1] * es;
	uint64_t rows = (uint64_t)t[0]->shape[0];
	*joint = true;
	uint64_t per = JOINT_WIN / rb ? JOINT_WIN / rb : 1; /* rows per window */
	if (per > JOINT_IOV)
		per = JOINT_IOV;
	uint64_t wcap = (per - 1) * rb + (hi - lo) + run;
	uint8_t *win = tpc_out_scratch(o[0], (size_t)wcap);
	struct iovec *iov = tpc_malloc((size_t)per * sizeof(*iov));
	int ret = 0;
	if (!win || !iov) {
		free(iov);
		return tpc_err_nomem(e);
	}
	for (uint64_t r0 = 0; r0 < rows && !ret; r0 += per) {
		uint64_t k = rows - r0 < per ? rows - r0 : per;
		uint64_t at = lo + r0 * rb, len = (k - 1) * rb + (hi - lo) + run;
		/* the bytes of the file, read once for every slice (the first
		 * one's mapping itself if pread fails) */
		const uint8_t *base = tpc_map_bytes(m, at, len, win);
		for (int i = 0; i < n && !ret; i++) {
			const uint8_t *p = base + (t[i]->offset - lo);
			for (uint64_t j = 0; j < k; j++) {
				iov[j].iov_base = (void *)(p + j * rb);
				iov[j].iov_len = (size_t)run;
			}
			if ((ret = tpc_out_writev(o[i], iov, (int)k, e)))
				*bad = i;
		}
		tpc_map_bytes_done(m, base, at, len);
	}
	free(iov);
	for (int i = 0; i < n && !ret; i++)
		tpc_ckpt_drop_pages(ck[i], t[i]);
	return ret;
}

/* Kernel-copied runs of t at data offset `at`: where each wants the data
 * section to start (mod TPC_PAGE_PHASE), weighted by its bytes. */
static void copy_wants(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t at, uint64_t *want, unsigned unit)
{
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	if (!t->numel)
		return;
	if (plain_copy(t, m)) {
		if (t->nbytes >= (1u << 20) && m->fd >= 0) {
			uint64_t r = (t->offset - at) & (TPC_PAGE_PHASE - 1);
			if (r % unit == 0)
				want[r / unit] += t->nbytes;
		}
		return;
	}
	if (parts_in_sequence(t))
		for (int k = 0; k < t->nparts; k++) {
			copy_wants(ck, &t->parts[k], at, want, unit);
			at += t->parts[k].nbytes;
		}
}

int64_t tpc_ckpt_copy_residue(const tpc_ckpt *ck, const int64_t *order, size_t n, unsigned unit)
{
	if (!unit || TPC_PAGE_PHASE % unit)
		return -1;
	uint64_t *want = tpc_calloc(TPC_PAGE_PHASE / unit, sizeof(*want)), at = 0, best = 0;
	int64_t r = -1;
	if (!want)
		return -1; /* only a speed hint */
	for (size_t i = 0; i < n; i++) {
		const tpc_tensor *t = &ck->t[order[i]];
		copy_wants(ck, t, at, want, unit);
		at += t->nbytes;
	}
	for (uint64_t k = 0; k < TPC_PAGE_PHASE / unit; k++)
		if (want[k] > best) {
			best = want[k];
			r = (int64_t)(k * unit);
		}
	free(want);
	return r;
}

/* ---- hashing and comparing with bounded residency: the one tensor hasher
 * (manifest checksums written and checked, resume, inspect --hash) ---- */

#define HASH_WINDOW (8u << 20)

void tpc_ckpt_drop_rows(const tpc_ckpt *ck, const tpc_tensor *t, int64_t r0, int64_t r1)
{
	tpc_tensor sub;
	if (t->ndim == 0) {
		tpc_ckpt_drop_pages(ck, t);
		return;
	}
	if (r1 <= r0 || tpc_tensor_narrow(&sub, t, 0, r0, r1 - r0))
		return;
	tpc_ckpt_drop_pages(ck, &sub);
	tpc_tensor_release(&sub);
}

typedef int (*sink_fn)(void *ctx, const uint8_t *p, size_t n);
typedef int (*read_fn)(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t off, uint64_t len, void *dst,
		       tpc_err *e);

/* Bytes of window that stream_tensor needs for t: the whole tensor when it
 * is smaller than HASH_WINDOW (every branch then reads it in one piece). */
static size_t stream_window(const tpc_tensor *t)
{
	uint64_t nb = t->numel * tpc_dtype_bits(t->src_dtype) / 8;
	uint64_t need = (nb > t->nbytes ? nb : t->nbytes) * 2; /* the cast branch halves it */
	return need && need < HASH_WINDOW ? (size_t)need : HASH_WINDOW;
}

/* Feed bytes [0, total) of t's image as `rd` reads them to fn, `chunk` bytes
 * at a time, dropping the source pages of the rows (of `row` bytes; 0: none
 * dropped) behind each window. */
static int stream_windows(const tpc_ckpt *ck, const tpc_tensor *t, read_fn rd, uint64_t total, uint64_t chunk,
			  uint64_t row, uint8_t *buf, sink_fn fn, void *ctx, tpc_err *e)
{
	int ret = 0;
	for (uint64_t off = 0; off < total && !ret; off += chunk) {
		uint64_t k = total - off < chunk ? total - off : chunk;
		ret = rd(ck, t, off, k, buf, e);
		if (!ret)
			ret = fn(ctx, buf, (size_t)k);
		if (row)
			tpc_ckpt_drop_rows(ck, t, (int64_t)(off / row), (int64_t)((off + k + row - 1) / row));
	}
	return ret;
}

/* Feed tensor t's C-order bytes to fn in windows of at most `cap` bytes
 * (buf's size, stream_window(t) or more), dropping the source pages behind
 * each window. */
static int stream_tensor(const tpc_ckpt *ck, const tpc_tensor *t, uint8_t *buf, size_t cap, sink_fn fn,
			 void *ctx, tpc_err *e)
{
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	uint64_t nb = t->numel * tpc_dtype_bits(t->src_dtype) / 8;
	unsigned es = tpc_dtype_size(t->src_dtype);
	int ret = 0;
	if (!nb || (t->flags & TPC_TF_NODATA))
		return 0;
	if (t->dtype != t->src_dtype) {
		/* a pending cast (remap stage): hash what the writer writes */
		unsigned os = tpc_dtype_size(t->dtype);
		uint64_t ob = t->nbytes, chunk = cap / 2 / os * os;
		uint64_t orow = t->ndim && t->shape[0] ? ob / (uint64_t)t->shape[0] : ob;
		return stream_windows(ck, t, tpc_ckpt_read_out, ob, chunk, orow, buf, fn, ctx, e);
	}
	if (m && !t->nparts && !(t->flags & TPC_TF_ZERO) && tpc_tensor_is_contiguous(t) &&
	    !(t->flags & TPC_TF_BYTESWAP)) {
		/* a cache-sized piece at a time, read so as not to unmap what a
		 * writer beside this (merge's check) copies from: tpc_map_bytes */
		uint64_t piece = cap < (1u << 20) ? cap : (1u << 20);
		for (uint64_t off = 0; off < nb && !ret; off += piece) {
			uint64_t k = nb - off < piece ? nb - off : piece;
			const uint8_t *p = tpc_map_bytes(m, t->offset + off, k, buf);
			ret = fn(ctx, p, (size_t)k);
			tpc_map_bytes_done(m, p, t->offset + off, k);
		}
		return ret;
	}
	if (tpc_dtype_bits(t->src_dtype) < 8) {
		/* sub-byte types are contiguous views or zero fills: bytes at any offset */
		return stream_windows(ck, t, tpc_ckpt_read_bytes, nb, cap, 0, buf, fn, ctx, e);
	}
	uint64_t row = t->ndim ? t->numel / (uint64_t)(t->shape[0] ? t->shape[0] : 1) * es : nb;
	return stream_windows(ck, t, tpc_ckpt_read_bytes, nb, cap / es * es, row, buf, fn, ctx, e);
}

static int hash_update_sink(void *ctx, const uint8_t *p, size_t n)
{
	tpc_hash_update(ctx, p, n);
	return 0;
}

int tpc_ckpt_hash_tensor(const tpc_ckpt *ck, const tpc_tensor *t, tpc_hash_alg alg, uint8_t out[TPC_HASH_MAX],
			 tpc_err *e)
{
	tpc_hash s;
	uint8_t *buf = NULL;
	size_t cap = stream_window(t), len = 0;
	int ret;
	if ((ret = tpc_hash_begin(&s, alg, e)))
		return ret;
	if (!(buf = tpc_scratch_get(cap, &len)))
		ret = tpc_err_nomem(e);
	else
		ret = stream_tensor(ck, t, buf, cap, hash_update_sink, &s, e);
	if (ret)
		tpc_hash_release(&s);
	else
		tpc_hash_final(&s, out);
	tpc_scratch_put(buf, len);
	return ret;
}

int tpc_tensors_equal(const tpc_ckpt *ck, const tpc_tensor *a, const tpc_tensor *b, bool *eq, tpc_err *e)
{
	uint64_t na = a->numel * tpc_dtype_bits(a->src_dtype) / 8;
	uint64_t nb = b->numel * tpc_dtype_bits(b->src_dtype) / 8;
	unsigned es = tpc_dtype_size(a->src_dtype);
	uint8_t *x = NULL, *y = NULL;
	int ret = 0;
	*eq = false;
	if (na != nb || a->src_dtype != b->src_dtype || a->ndim != b->ndim)
		return 0;
	for (int d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d])
			return 0;
	size_t cap = na && na < HASH_WINDOW ? (size_t)na : HASH_WINDOW, len = 0;
	if (!(x = tpc_scratch_get(2 * cap, &len)))
		return tpc_err_nomem(e);
	y = x + cap;
	*eq = true;
	uint64_t chunk = es ? cap / es * es : cap;
	if (tpc_dtype_bits(a->src_dtype) < 8)
		chunk = na; /* contiguous by construction; small in practice */
	for (uint64_t off = 0; off < na && *eq && !ret; off += chunk) {
		uint64_t k = na - off < chunk ? na - off : chunk;
		if (k > cap) {
			ret = tpc_err_set(e, TPC_EINPUT, "internal: sub-byte tensor too large to compare");
			break;
		}
		if (!(ret = tpc_ckpt_read_bytes(ck, a, off, k, x, e)) &&
		    !(ret = tpc_ckpt_read_bytes(ck, b, off, k, y, e)))
			*eq = !memcmp(x, y, (size_t)k);
	}
	tpc_ckpt_drop_pages(ck, a);
	tpc_ckpt_drop_pages(ck, b);
	tpc_scratch_put(x, len);
	if (ret)
		*eq = false;
	return ret;
}

bool tpc_ckpt_file_holds(const char *path, const tpc_ckpt *ck, const int64_t *sel, size_t n)
{
	tpc_ckpt f;
	tpc_err e;
	bool same;
	tpc_ckpt_init(&f);
	tpc_err_init(&e);
	same = !tpc_ckpt_open(&f, path, NULL, &e) && f.n == n;
	for (size_t k = 0; same && k < n; k++) {
		const tpc_tensor *a = &ck->t[sel ? (size_t)sel[k] : k];
		int64_t j = tpc_ckpt_find(&f, a->name);
		uint8_t ha[TPC_HASH_MAX], hb[TPC_HASH_MAX];
		same = j >= 0 && f.t[j].dtype == a->dtype && f.t[j].ndim == a->ndim &&
		       !memcmp(f.t[j].shape, a->shape, (size_t)a->ndim * sizeof(int64_t)) &&
		       !tpc_ckpt_hash_tensor(ck, a, TPC_HASH_XXH3_128, ha, &e) &&
		       !tpc_ckpt_hash_tensor(&f, &f.t[j], TPC_HASH_XXH3_128, hb, &e) &&
		       !memcmp(ha, hb, tpc_hash_len(TPC_HASH_XXH3_128));
	}
	tpc_ckpt_release(&f);
	return same;
}
