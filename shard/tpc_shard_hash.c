/* tpc_shard_hash.c - the manifest checksums of a shard set, each input byte
 * read once.
 *
 * A split tensor's rank slices are ranges of the original's bytes (plus zero
 * padding rows): for a split along dim d, each run of dims before d is one
 * block, and in each block rank r holds, part by part, rows [a, b) of the part
 * followed by z zero rows (tpc__rank_tensor builds its view the same way). So
 * one pass over the original, in windows small enough to stay in the CPU
 * cache, feeds the original's hash and every distinct rank's hash at once:
 * one read of the input (from the page cache the rank copies just filled)
 * instead of two, which is what hashing cost when SHA-256 was not the
 * bottleneck. A plain run of a file is read window by window with pread
 * (no page faults, and no unmapping behind it that could race the writers'
 * copies when the pass runs beside them); anything else (a view,
 * byte-swapped, or assembled from a set's rank files when resharding) is
 * read through the mapping into the same buffer. Tensors with a
 * pending cast or of sub-byte elements keep the streaming path, one item per
 * original and per distinct rank slice. */
#include <stdlib.h>
#include <string.h>

#include "tpc_io.h"
#include "tpc_shard.h"
#include "tpc_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Bytes hashed per step: the original's hash and then each rank's read the
 * window while it is still in L2. */
#define HASH_WINDOW (1u << 20)

/* Rank r's rows of part k, in rows of the split dimension. */
typedef struct part_rows {
	int64_t at;   /* first row inside the block (part offset + a) */
	int64_t rows; /* b - a rows of data */
	int64_t zero; /* zero rows after them (padding) */
} part_rows;

/* One rank's position in the pass: piece j is part j % nparts of block
 * j / nparts. */
typedef struct rank_cursor {
	tpc_hash h;
	part_rows pr[TPC_PLAN_MAX_PARTS];
	uint64_t piece, done; /* current piece, its data bytes already fed */
} rank_cursor;

static const uint8_t zeros[64 << 10];

static void feed_zeros(tpc_hash *h, uint64_t n)
{
	while (n) {
		size_t k = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
		tpc_hash_update(h, zeros, k);
		n -= k;
	}
}

/* Can tensor i be hashed in one pass over its input bytes? Any split tensor
 * of whole-byte elements without a pending cast (the writer's image is then
 * the input's bytes). */
static bool one_pass_ok(const tpc_shard_plan *sp, const tpc_shard_entry *en)
{
	const tpc_tensor *t = &sp->in->t[en->in];
	/* a stacked tensor's groups hold other experts: their slices are not
	 * one run per block of the original (streamed instead) */
	return en->split.dim >= 0 && en->split.dim < t->ndim && !(en->split.stacked && en->split.ep > 1) &&
	       t->dtype == t->src_dtype && t->numel &&
	       !(t->flags & TPC_TF_NODATA) && tpc_dtype_bits(t->dtype) % 8 == 0;
}

/* Is every rank's copy of entry en the input tensor whole (its checksum the
 * input's)? A replicated tensor, unless it stacks experts under --ep: then
 * each group holds its own experts, hashed on the group's first rank. */
static bool whole_copy(const tpc_shard_entry *en)
{
	return en->split.dim < 0 && !en->split.is_shape && !(en->split.stacked && en->split.ep > 1);
}

/* Are t's bytes one run of its source mapping (read in place)? Otherwise (a
 * view, byte-swapped, zeros, or assembled from parts as a reshard's input is)
 * each window is read into a buffer. */
static bool in_place(const tpc_tensor *t, const tpc_map *m)
{
	return m && !t->nparts && !(t->flags & (TPC_TF_ZERO | TPC_TF_BYTESWAP)) && tpc_tensor_is_contiguous(t) &&
	       t->offset <= m->size && t->nbytes <= m->size - t->offset;
}

/* A reshard's input rank tensors read by the pass (the composite's parts that
 * are whole rank tensors, tpc__merge_check_claim): hashed as they are read. */
typedef struct part_check {
	int64_t item[TPC_PLAN_MAX_PARTS]; /* the check's item, or -1 */
	tpc_hash h[TPC_PLAN_MAX_PARTS];
	int n;                            /* parts claimed */
} part_check;

static void part_feed(void *ctx, int k, const uint8_t *p, size_t n)
{
	part_check *pc = ctx;
	if (k < TPC_PLAN_MAX_PARTS && pc->item[k] >= 0)
		tpc_hash_update(&pc->h[k], p, n);
}

static void part_reset(part_check *pc)
{
	pc->n = 0;
	for (int k = 0; k < TPC_PLAN_MAX_PARTS; k++) {
		pc->item[k] = -1;
		pc->h[k] = (tpc_hash){TPC_HASH_NONE, NULL};
	}
}

/* Claim t's parts that are whole input rank tensors, in the input
 * manifest's algorithm. */
static int part_claim(part_check *pc, tpc__merge_check *c, const tpc_tensor *t, tpc_err *e)
{
	int ret = 0;
	for (int k = 0; c && t->nparts <= TPC_PLAN_MAX_PARTS && k < t->nparts && !ret; k++)
		if ((pc->item[k] = tpc__merge_check_claim(c, &t->parts[k])) >= 0) {
			pc->n++;
			ret = tpc_hash_begin(&pc->h[k], tpc__merge_check_alg(c), e);
		}
	return ret;
}

/* Compare what was read with the manifest; the claims of a pass that failed
 * are left to tpc__merge_check_run. */
static int part_settle(part_check *pc, tpc__merge_check *c, bool ok, tpc_err *e)
{
	int ret = 0;
	for (int k = 0; k < TPC_PLAN_MAX_PARTS; k++) {
		if (ok && !ret && pc->item[k] >= 0) {
			uint8_t d[TPC_HASH_MAX];
			tpc_hash_final(&pc->h[k], d);
			ret = tpc__merge_check_settle(c, pc->item[k], d, e);
		}
		tpc_hash_release(&pc->h[k]);
	}
	return ret;
}

/* The original and every distinct rank slice of en in one pass. Returns 1
 * when en's slices are not what the pass would hash (the caller streams them
 * instead), 0 done, or an error. */
static int hash_one_pass(const tpc_shard_plan *sp, tpc_shard_entry *en, tpc_err *e)
{
	const tpc_tensor *t = &sp->in->t[en->in];
	const tpc_map *m = tpc_ckpt_source(sp->in, t->src);
	const tpc_split *s = &en->split;
	int tp = sp->tp, d = s->dim, ret = 0;
	uint64_t es = tpc_dtype_bits(t->dtype) / 8, inner = es, outer = 1;
	rank_cursor *rc = tpc_calloc((size_t)tp, sizeof(*rc));
	tpc_hash h0 = {TPC_HASH_NONE, NULL};
	part_check pc;
	bool direct = in_place(t, m);
	/* a window no larger than the tensor, from the scratch pool: a new
	 * 8 MiB allocation a tensor is an mmap/munmap pair each, its pages
	 * faulted in again every time (and a sanitizer build's shadow
	 * poisoning of all of it) */
	size_t buflen = 0;
	uint8_t *buf = tpc_scratch_get(t->nbytes && t->nbytes < HASH_WINDOW ? (size_t)t->nbytes : HASH_WINDOW, &buflen);
	part_reset(&pc);
	if (!rc || !buf) {
		free(rc);
		tpc_scratch_put(buf, buflen);
		return tpc_err_nomem(e);
	}
	for (int k = d + 1; k < t->ndim; k++)
		inner *= (uint64_t)t->shape[k];
	for (int k = 0; k < d; k++)
		outer *= (uint64_t)t->shape[k];
	uint64_t block = (uint64_t)t->shape[d] * inner, nb = outer * block;
	if (nb != t->nbytes) {
		ret = 1;
		goto out;
	}
	/* rank r's pieces, as tpc__rank_tensor cuts them; their sizes must add up
	 * to the rank tensor the writer wrote, or this is not the same view */
	for (int r = 0; r < tp && !ret; r++) {
		if (en->same_as[r] != r)
			continue;
		int64_t poff = 0, rows = 0;
		for (int k = 0; k < s->nparts; k++) {
			const tpc_split_part *p = &s->part[k];
			int64_t len = tpc_split_rank_len(s, k, tp), start = tpc_split_rank_start(s, k, tp, r);
			int64_t a = start < p->size ? start : p->size;
			int64_t b = start + len < p->size ? start + len : p->size;
			int64_t z = start + len - (start > p->size ? start : p->size);
			rc[r].pr[k].at = poff + a;
			rc[r].pr[k].rows = b > a ? b - a : 0;
			rc[r].pr[k].zero = z > 0 && b >= a && !p->uneven ? z : 0;
			rows += rc[r].pr[k].rows + rc[r].pr[k].zero;
			poff += p->size;
		}
		const tpc_ckpt *rk = &sp->rank[en->stage * tp + r];
		const tpc_tensor *rt = &rk->t[en->rank_ix[r]];
		if (rt->nbytes != outer * (uint64_t)rows * inner || rt->dtype != t->dtype)
			ret = 1;
	}
	if (ret)
		goto out;
	if ((ret = tpc_hash_begin(&h0, sp->checksum, e)))
		goto out;
	for (int r = 0; r < tp && !ret; r++)
		if (en->same_as[r] == r)
			ret = tpc_hash_begin(&rc[r].h, sp->checksum, e);
	if (ret || (!direct && t->nparts && (ret = part_claim(&pc, sp->input_check, t, e))))
		goto out;
	uint64_t npieces = outer * (uint64_t)s->nparts;
	uint64_t row = t->shape[0] ? nb / (uint64_t)t->shape[0] : 0;
	int64_t dropped = 0; /* rows whose pages are dropped (buffered reads) */
	for (uint64_t w0 = 0; w0 < nb && !ret; w0 += HASH_WINDOW) {
		uint64_t w1 = nb - w0 < HASH_WINDOW ? nb : w0 + HASH_WINDOW;
		/* win[x - w0] is byte x of the tensor (a run of the file read
		 * without unmapping anything a writer copies from: tpc_map_bytes) */
		const uint8_t *win = direct ? tpc_map_bytes(m, t->offset + w0, w1 - w0, buf) : buf;
		if (!direct && (ret = tpc_ckpt_read_parts(sp->in, t, w0, w1 - w0, buf, pc.n ? part_feed : NULL, &pc, e)))
			break;
		tpc_hash_update(&h0, win, (size_t)(w1 - w0));
		for (int r = 0; r < tp; r++) {
			rank_cursor *c = &rc[r];
			if (en->same_as[r] != r)
				continue;
			while (c->piece < npieces) {
				const part_rows *pr = &c->pr[c->piece % (uint64_t)s->nparts];
				uint64_t off = c->piece / (uint64_t)s->nparts * block + (uint64_t)pr->at * inner;
				uint64_t len = (uint64_t)pr->rows * inner;
				uint64_t lo = off + c->done > w0 ? off + c->done : w0, hi = off + len < w1 ? off + len : w1;
				if (hi > lo) {
					tpc_hash_update(&c->h, win + (lo - w0), (size_t)(hi - lo));
					c->done = hi - off;
				}
				if (c->done < len)
					break; /* the rest of this piece lies in a later window */
				feed_zeros(&c->h, (uint64_t)pr->zero * inner);
				c->piece++;
				c->done = 0;
			}
		}
		if (direct) {
			tpc_map_bytes_done(m, win, t->offset + w0, w1 - w0);
		} else if (row && (w1 == nb || w1 - (uint64_t)dropped * row >= 8 * (uint64_t)HASH_WINDOW)) {
			int64_t upto = (int64_t)(w1 / row); /* whole rows done */
			tpc_ckpt_drop_rows(sp->in, t, dropped, w1 == nb ? t->shape[0] : upto);
			dropped = upto;
		}
	}
	if (ret)
		goto out;
	if (!direct && !row)
		tpc_ckpt_drop_pages(sp->in, t);
	tpc_hash_final(&h0, en->hash);
	for (int r = 0; r < tp; r++)
		if (en->same_as[r] == r)
			tpc_hash_final(&rc[r].h, en->rank_hash[r]);
out:
	if (pc.n) {
		int r = part_settle(&pc, sp->input_check, !ret, e);
		ret = ret ? ret : r;
	}
	tpc_hash_release(&h0);
	for (int r = 0; r < tp; r++)
		tpc_hash_release(&rc[r].h);
	free(rc);
	tpc_scratch_put(buf, buflen);
	return ret;
}

/* The checkpoint a rank tensor is read through: the input's, whose
 * mappings stay where they are. The pass runs beside the writers
 * (tpc_shard_write.c), and a writer swaps its rank checkpoint's mappings for
 * ones of its own while it writes and unmaps them when it is done
 * (views_open, views_close): a read through the rank checkpoint that takes
 * the pointer just before that reads unmapped memory (a SIGSEGV of shard
 * --tp 2 --dtype bf16 of a 1 GiB model, one run in ten under load). A rank
 * tensor refers to the input's sources by the same indices; only a
 * rewritten shape (is_shape) lives past them, in memory no writer swaps. */
static const tpc_ckpt *reader(const tpc_shard_plan *sp, const tpc_shard_entry *en, const tpc_ckpt *rk)
{
	return en->split.is_shape ? rk : sp->in;
}

/* One work item: tensor i in one pass (r == -2), or the streaming path's
 * original (r == -1) or distinct rank slice r. */
static int hash_item(tpc_shard_plan *sp, size_t i, int r, tpc_err *e)
{
	tpc_shard_entry *en = &sp->t[i];
	if (r == -2) {
		int ret = hash_one_pass(sp, en, e);
		if (ret != 1)
			return ret;
		/* not the view the pass assumed: stream everything */
		if ((ret = tpc_ckpt_hash_tensor(sp->in, &sp->in->t[en->in], sp->checksum, en->hash, e)))
			return ret;
		for (int q = 0; q < sp->tp && !ret; q++) {
			const tpc_ckpt *rk = &sp->rank[en->stage * sp->tp + q];
			if (en->same_as[q] == q)
				ret = tpc_ckpt_hash_tensor(reader(sp, en, rk), &rk->t[en->rank_ix[q]], sp->checksum,
							   en->rank_hash[q], e);
		}
		return ret;
	}
	if (r < 0)
		return tpc_ckpt_hash_tensor(sp->in, &sp->in->t[en->in], sp->checksum, en->hash, e);
	if (whole_copy(en) || en->same_as[r] != r)
		return 0;
	const tpc_ckpt *rk = &sp->rank[en->stage * sp->tp + r];
	return tpc_ckpt_hash_tensor(reader(sp, en, rk), &rk->t[en->rank_ix[r]], sp->checksum, en->rank_hash[r], e);
}

int tpc__shard_hash_all(tpc_shard_plan *sp, tpc_err *e)
{
	typedef struct item {
		size_t i;
		int r;
	} item;
	item *it = NULL;
	size_t n = 0;
	int ret = 0;
	for (size_t i = 0; i < sp->n; i++) {
		free(sp->t[i].rank_hash);
		sp->t[i].hashed = false;
		if (!(sp->t[i].rank_hash = tpc_calloc((size_t)sp->tp, TPC_HASH_MAX)))
			return tpc_err_nomem(e);
	}
	if (!(it = tpc_calloc(sp->n * (size_t)(sp->tp + 1) + 1, sizeof(*it))))
		return tpc_err_nomem(e);
	for (size_t i = 0; i < sp->n; i++) {
		tpc_shard_entry *en = &sp->t[i];
		if (one_pass_ok(sp, en)) {
			it[n++] = (item){i, -2};
			continue;
		}
		for (int r = -1; r < sp->tp; r++)
			/* a rewritten shape: the ranks' bytes are not the input's */
			if (r < 0 || (!whole_copy(en) && en->same_as[r] == r))
				it[n++] = (item){i, r};
	}
	/* in file order: the reads of neighbouring threads stay close together */
	int64_t ni = (int64_t)n;
	int64_t bad = -1;
	tpc_err first;
	tpc_err_init(&first);
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
	for (int64_t k = 0; k < ni; k++) {
		if (tpc__first_bad(&bad) >= 0)
			continue;
		tpc_err le;
		tpc_err_init(&le);
		if (hash_item(sp, it[k].i, it[k].r, &le))
			tpc__keep_first(k, &le, &bad, &first);
	}
	free(it);
	if (bad >= 0) {
		*e = first;
		return first.code ? first.code : TPC_EIO;
	}
	/* a reshard's input rank tensors the pass did not read whole */
	if (sp->input_check && (ret = tpc__merge_check_run(sp->input_check, true, e)))
		return ret;
	for (size_t i = 0; i < sp->n; i++) {
		tpc_shard_entry *en = &sp->t[i];
		en->hashed = true;
		for (int r = 0; r < sp->tp; r++) {
			if (en->same_as[r] < 0) /* an expert another EP group holds */
				memset(en->rank_hash[r], 0, TPC_HASH_MAX);
			else if (whole_copy(en))
				memcpy(en->rank_hash[r], en->hash, TPC_HASH_MAX);
			else if (en->same_as[r] != r)
				memcpy(en->rank_hash[r], en->rank_hash[en->same_as[r]], TPC_HASH_MAX);
		}
	}
	return ret;
}
