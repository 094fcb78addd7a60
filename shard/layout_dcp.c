/* layout_dcp.c - the whole shard set as ONE PyTorch Distributed Checkpoint
 * (torch.distributed.checkpoint; FRAMEWORKS.md §2a), the way the ranks of a
 * sharded (FSDP2 / DTensor) save would have written it:
 *
 *   OUT/__R_0.distcp   rank R's chunks (R = pp_rank * tp + tp_rank), items back
 *                      to back, each a torch.save archive of one bare tensor
 *   OUT/.metadata      every tensor under its global name with its GLOBAL
 *                      (unsplit) shape and one ChunkStorageMetadata per stored
 *                      box: offsets and sizes in the global tensor, and where
 *                      its item lies (relative_path, offset, length)
 *   OUT/tpconv-manifest.json, companions    as every layout
 *
 * What each rank stores, from the plan's split of each tensor:
 *   - a column, row or vocab split of a plain tensor: one box per rank;
 *   - a fused tensor split per part (q|k|v, gate|up): one box per part on each
 *     rank, each its own chunk (rank r's rows of part k are not next to its
 *     rows of part k+1 in the global tensor);
 *   - a box several ranks hold (a replicated tensor; a key/value head that
 *     tp > kv_heads replicates) is stored ONCE, by the lowest tp rank of the
 *     stage holding it: what torch's save planner does with the identical
 *     write items of several ranks (dedup_save_plans in
 *     torch/distributed/checkpoint/_dedup_save_plans.py, called by
 *     DefaultSavePlanner.create_global_plan), so the metadata never lists one
 *     box twice;
 *   - vocab padding: the padded rows (zeros appended to a vocab split so tp
 *     divides it) are not part of the global tensor, so they are NOT stored:
 *     a rank whose slice runs into the padding stores only its real rows (a
 *     rank wholly in the padding stores nothing of that tensor). This is what
 *     DTensor's uneven Shard(0) saves, and it loses nothing: padding is zeros
 *     by definition, and reading a rank back (open_rank) appends them again.
 *   - pipeline stages decide only which files hold which tensors: every tensor
 *     keeps its global name (no per-stage renumbering, unlike Megatron).
 *
 * Writing: each rank's file through the dcp format's write_part (the format
 * registry; formats/ is not included), then - once every rank file is there,
 * in write_extras, under the set's exclusive lock - the items' offsets read
 * back from each file (part_items) and .metadata through write_index; the
 * manifest follows last. A rank file alone cannot name its tensors (names live
 * in .metadata), so whether a file on disk is this set's (resume, --rank runs)
 * is decided by rank_file_ok: its items, in order, must have the dtypes and
 * shapes of the chunks this plan gives the rank.
 *
 * Reading back (merge, reshard, verify): the folder opened as the DCP
 * checkpoint it is (the global tensors, assembled from their chunks), each
 * rank's tensors as split cut from them with the manifest's splits (read from
 * the manifest beside the rank file). A folder without tpconv-manifest.json is
 * just a DCP checkpoint: the dcp format reads it, this layout never sees it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpc_buf.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_layout.h"
#include "tpc_manifest.h"
#include "tpc_shard.h"
#include "tpc_util.h"

#define DCP_META ".metadata"
#define TMP_NAME "\x01" "dcp-global/"

static char *rank_name(int t, int p, int tp, int pp, const char *format)
{
	char buf[48];
	(void)pp;
	(void)format;
	snprintf(buf, sizeof(buf), "__%d_0.distcp", p * tp + t);
	return tpc_strdup(buf);
}

const tpc_format *tpc__dcp_format(tpc_err *e)
{
	const tpc_format *f = tpc_format_by_name("dcp");
	if (!f || !f->write_part || !f->part_items || !f->write_index || !f->open) {
		tpc_err_set(e, TPC_EUSAGE, "the DCP writer is not available in this build");
		return NULL;
	}
	return f;
}

/* ---- what each rank stores ---- */

typedef struct dchunk {
	size_t entry;         /* index in sp->t */
	int dim;              /* split dimension; -1: the whole tensor */
	int64_t start, len;   /* rows [start, start + len) of the global tensor along dim */
} dchunk;

/* Rank r's chunks, in the input's tensor order and, within a tensor, part
 * order: what its file holds, item by item. */
static int rank_chunks(const tpc_shard_plan *sp, int r, dchunk **out, size_t *n, tpc_err *e)
{
	int stage = r / sp->tp, t = r % sp->tp;
	size_t cap = 0, cnt = 0;
	dchunk *v = NULL;
	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < sp->n; i++) {
		const tpc_shard_entry *en = &sp->t[i];
		const tpc_split *s = &en->split;
		if (en->stage != stage)
			continue;
		dchunk add[TPC_PLAN_MAX_PARTS];
		int na = 0;
		if (s->dim < 0) {
			if (t == 0) /* replicated: the stage's first rank stores it */
				add[na++] = (dchunk){i, -1, 0, 0};
		} else {
			int64_t poff = 0;
			for (int k = 0; k < s->nparts; k++) {
				const tpc_split_part *p = &s->part[k];
				int64_t len = tpc_split_rank_len(s, k, sp->tp), start = tpc_split_rank_start(s, k, sp->tp, t);
				int64_t a = start < p->size ? start : p->size;
				int64_t b = start + len < p->size ? start + len : p->size;
				bool dup = false;
				/* the same rows on a lower rank (a replicated KV head): stored there */
				for (int q = 0; q < t && !dup; q++)
					dup = tpc_split_rank_start(s, k, sp->tp, q) == start;
				if (b > a && !dup)
					add[na++] = (dchunk){i, s->dim, poff + a, b - a};
				poff += p->size;
			}
		}
		if (na && tpc_grow((void **)&v, &cap, cnt + (size_t)na, sizeof(*v))) {
			free(v);
			return tpc_err_nomem(e);
		}
		for (int k = 0; k < na; k++)
			v[cnt++] = add[k];
	}
	*out = v;
	*n = cnt;
	return 0;
}

static void clear_storage(tpc_tensor *t)
{
	t->storage = -1;
	t->alias_of = -1;
	for (int k = 0; k < t->nparts; k++)
		clear_storage(&t->parts[k]);
}

/* The chunk's description over the input tensor. */
static int chunk_view(const tpc_shard_plan *sp, const dchunk *c, tpc_tensor *out)
{
	const tpc_tensor *t = &sp->in->t[sp->t[c->entry].in];
	int ret = c->dim < 0 ? tpc_tensor_copy(out, t) : tpc_tensor_narrow(out, t, c->dim, c->start, c->len);
	if (!ret)
		clear_storage(out);
	return ret;
}

/* The chunk's box in the global tensor: offsets and sizes. */
static void chunk_box(const tpc_shard_plan *sp, const dchunk *c, int64_t *off, int64_t *size)
{
	const tpc_tensor *t = &sp->in->t[sp->t[c->entry].in];
	for (int d = 0; d < t->ndim; d++) {
		off[d] = d == c->dim ? c->start : 0;
		size[d] = d == c->dim ? c->len : t->shape[d];
	}
}

/* ---- shard ---- */

static int check(tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	(void)sp;
	(void)o;
	return tpc__dcp_format(e) ? 0 : TPC_EUSAGE;
}

/* The rank as stored: its chunks, one tensor each (named after the global
 * tensor; a second box of the same tensor gets "#part" and its index: these
 * names never reach the disk, items are bare tensors). */
static int stored_rank(const tpc_shard_plan *sp, int r, tpc_ckpt *out, tpc_err *e)
{
	dchunk *c;
	size_t n;
	int ret = rank_chunks(sp, r, &c, &n, e);
	for (size_t k = 0; k < n && !ret; k++) {
		const char *name = sp->in->t[sp->t[c[k].entry].in].name;
		tpc_tensor v;
		tpc_buf nb = TPC_BUF_INIT;
		tpc_buf_adds(&nb, name);
		if (k && c[k - 1].entry == c[k].entry)
			tpc_buf_addf(&nb, "#part%zu", k);
		if (nb.oom || chunk_view(sp, &c[k], &v)) {
			tpc_buf_release(&nb);
			ret = tpc_err_nomem(e);
			break;
		}
		int64_t ix = tpc_ckpt_add_copy(out, nb.p, &v, e);
		tpc_tensor_release(&v);
		tpc_buf_release(&nb);
		if (ix < 0)
			ret = (int)ix;
	}
	free(c);
	return ret;
}

int tpc__dcp_write_rank(const tpc_shard_plan *sp, int r, const tpc_ckpt *ck, const char *path, const tpc_write_opts *wo,
			tpc_err *e)
{
	const tpc_format *f = tpc__dcp_format(e);
	(void)sp;
	(void)r;
	return f ? tpc__layout_write_file(f, true, ck, path, wo, e) : TPC_EUSAGE;
}

/* .metadata describes the rank files: a set taken back loses it too */
static void remove_rank(const char *path)
{
	char *dir = tpc_path_dir(path), *m = dir ? tpc_path_join(dir, DCP_META) : NULL;
	unlink(path);
	if (m)
		unlink(m);
	free(m);
	free(dir);
}

bool tpc__dcp_items_ok(const char *path, const tpc__dcp_item *want, size_t n)
{
	const tpc_format *f = tpc_format_by_name("dcp");
	tpc_ckpt ck;
	tpc_err e2;
	uint64_t *off = NULL, *len = NULL;
	size_t got = 0;
	bool ok = false;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e2);
	if (f && f->part_items && !f->part_items(&ck, path, &off, &len, &got, &e2) && got == n && ck.n == n) {
		ok = true;
		for (size_t k = 0; k < n && ok; k++)
			ok = ck.t[k].dtype == want[k].dtype && ck.t[k].ndim == want[k].ndim &&
			     !memcmp(ck.t[k].shape, want[k].shape, (size_t)want[k].ndim * sizeof(int64_t));
	}
	tpc_ckpt_release(&ck);
	free(off);
	free(len);
	return ok;
}

/* The items of the file at `path`, in order, have the dtypes and shapes of
 * rank r's chunks. */
static int rank_file_ok(const tpc_shard_plan *sp, int r, const char *path, bool *ok, tpc_err *e)
{
	size_t nc = 0;
	dchunk *c = NULL;
	tpc__dcp_item *w = NULL;
	int ret = rank_chunks(sp, r, &c, &nc, e);
	*ok = false;
	if (!ret && !(w = tpc_calloc(nc + 1, sizeof(*w))))
		ret = tpc_err_nomem(e);
	for (size_t k = 0; k < nc && !ret; k++) {
		const tpc_tensor *in = &sp->in->t[sp->t[c[k].entry].in];
		int64_t o[TPC_MAX_NDIM];
		chunk_box(sp, &c[k], o, w[k].shape);
		w[k].dtype = in->dtype;
		w[k].ndim = in->ndim;
	}
	if (!ret)
		*ok = tpc__dcp_items_ok(path, w, nc);
	free(w);
	free(c);
	return ret;
}

void tpc__dcp_where_free(tpc__dcp_where *w, int n)
{
	for (int r = 0; w && r < n; r++) {
		free(w[r].off);
		free(w[r].len);
	}
	free(w);
}

int tpc__dcp_rank_items(const tpc_format *f, const char *dir, const char *file, int r, size_t want, tpc__dcp_where *w,
			tpc_err *e)
{
	char *p = tpc_path_join(dir, file);
	tpc_ckpt ck;
	size_t n = 0;
	int ret;
	tpc_ckpt_init(&ck);
	if (!p)
		ret = tpc_err_nomem(e);
	else if (!(ret = f->part_items(&ck, p, &w->off, &w->len, &n, e)) && n != want)
		ret = tpc_err_at(e, TPC_EINPUT, p, NULL, "rank %d's file holds %zu items, the plan gives the rank %zu chunks", r, n,
				 want);
	tpc_ckpt_release(&ck);
	free(p);
	return ret;
}

/* Every rank file is there: .metadata over all of them, then the companions. */
static int write_extras(const tpc_shard_plan *sp, const char *dir, const tpc_shard_opts *o, tpc_err *e)
{
	const tpc_format *f = tpc__dcp_format(e);
	int nr = sp->tp * sp->pp, ret = 0;
	dchunk **ch = tpc_calloc((size_t)nr, sizeof(*ch));
	size_t *nch = tpc_calloc((size_t)nr, sizeof(*nch)), *cur = tpc_calloc((size_t)nr, sizeof(*cur)), total = 0;
	tpc__dcp_where *at = tpc_calloc((size_t)nr, sizeof(*at));
	tpc_chunk *all = NULL;
	int64_t *boxes = NULL;
	if (!f)
		ret = TPC_EUSAGE;
	else if (!ch || !nch || !cur || !at)
		ret = tpc_err_nomem(e);
	/* where each rank's items lie */
	for (int r = 0; r < nr && !ret; r++) {
		if (!(ret = rank_chunks(sp, r, &ch[r], &nch[r], e)))
			ret = tpc__dcp_rank_items(f, dir, sp->rank_file[r], r, nch[r], &at[r], e);
		total += nch[r];
	}
	if (!ret && (!(all = tpc_calloc(total + 1, sizeof(*all))) ||
		     !(boxes = tpc_calloc(2 * TPC_MAX_NDIM * (total + 1), sizeof(*boxes)))))
		ret = tpc_err_nomem(e);
	/* tensor by tensor (the input's order), rank by rank, part by part */
	size_t k = 0;
	for (size_t i = 0; i < sp->n && !ret; i++) {
		const tpc_tensor *t = &sp->in->t[sp->t[i].in];
		for (int q = 0; q < sp->tp; q++) {
			int r = sp->t[i].stage * sp->tp + q;
			while (cur[r] < nch[r] && ch[r][cur[r]].entry == i) {
				size_t j = cur[r]++;
				tpc_chunk *c = &all[k];
				int64_t *bo = &boxes[2 * TPC_MAX_NDIM * k], *bs = bo + TPC_MAX_NDIM;
				chunk_box(sp, &ch[r][j], bo, bs);
				c->fqn = t->name;
				c->dtype = t->dtype;
				c->ndim = t->ndim;
				c->shape = t->shape;
				c->offset = bo;
				c->size = bs;
				c->file = sp->rank_file[r];
				c->foff = at[r].off[j];
				c->flen = at[r].len[j];
				k++;
			}
		}
	}
	if (!ret) {
		tpc_write_opts wo;
		memset(&wo, 0, sizeof(wo));
		/* under the set's lock, every rank file checked: a .metadata an
		 * interrupted run left describes nothing that is still there */
		wo.flags = TPC_W_FORCE;
		ret = f->write_index(dir, all, k, &wo, e);
	}
	if (!ret && !o->no_extras)
		ret = tpc__layout_copy_companions(sp, dir, o, NULL, false, e);
	for (int r = 0; ch && r < nr; r++)
		free(ch[r]);
	tpc__dcp_where_free(at, nr);
	free(ch);
	free(nch);
	free(cur);
	free(all);
	free(boxes);
	return ret;
}

/* ---- reading back ---- */

int tpc__dcp_open_rank(const char *path, const char *set_dir, const char *dcp_dir, const tpc_layout_rank_ctx *c,
		       tpc__dcp_globals_fn fix, tpc_ckpt *ck, tpc_err *e)
{
	const tpc_format *f = tpc__dcp_format(e);
	const char *dir = dcp_dir;
	char *mpath = tpc_path_join(set_dir, TPC_MANIFEST_NAME);
	tpc_manifest man;
	bool have_man = false, *keep = NULL;
	int64_t *gix = NULL;
	int ret = 0;
	memset(&man, 0, sizeof(man));
	if (!f) {
		ret = TPC_EUSAGE;
		goto out;
	}
	if (!mpath) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	/* the splits: the set's manifest (this layout only reads sets it wrote) */
	if ((ret = tpc_manifest_from_file(&man, mpath, e)))
		goto out;
	have_man = true;
	if (man.tp != c->tp || man.pp != c->pp) {
		ret = tpc_err_at(e, TPC_EINPUT, mpath, NULL, "the manifest says tp %d pp %d, the set is read as tp %d pp %d", man.tp,
				  man.pp, c->tp, c->pp);
		goto out;
	}
	if (!tpc_exists(path)) {
		ret = tpc_err_at(e, TPC_EINPUT, path, NULL, "rank %d (tp %d, pp %d) of the DCP set is missing", c->rank, c->tp_rank,
				  c->pp_rank);
		goto out;
	}
	/* the global tensors, assembled from every rank's chunks */
	size_t n0 = ck->n;
	if ((ret = f->open(ck, dir, NULL, e)) || (fix && (ret = fix(ck, n0, &man, c, dir, e))))
		goto out;
	size_t n1 = ck->n;
	if (!(gix = tpc_calloc(man.n + 1, sizeof(*gix))) || !(keep = tpc_calloc(n1 + man.n + 1, sizeof(bool)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < man.n && !ret; i++) {
		const tpc_manifest_tensor *mt = &man.t[i];
		gix[i] = -1;
		if (mt->stage != c->pp_rank || !tpc_split_holds(&mt->split, c->tp, c->tp_rank))
			continue; /* another stage's, an expert of another EP group's */
		int64_t g = tpc_ckpt_find(ck, mt->name);
		if (g < (int64_t)n0) {
			ret = tpc_err_at(e, TPC_EINPUT, dir, mt->name, "the DCP metadata has no tensor the manifest lists");
			break;
		}
		const tpc_tensor *t = &ck->t[g];
		if (t->dtype != mt->dtype || t->ndim != mt->ndim ||
		    memcmp(t->shape, mt->shape, (size_t)mt->ndim * sizeof(int64_t))) {
			char got[128];
			tpc_shape_str(t, got, sizeof(got));
			ret = tpc_err_at(e, TPC_EINPUT, dir, mt->name, "the DCP metadata says %s %s, the manifest says %s of %d dimensions",
					  tpc_dtype_name(t->dtype), got, tpc_dtype_name(mt->dtype), mt->ndim);
			break;
		}
		gix[i] = g;
	}
	/* the globals under temporary names, the rank's views under the real ones */
	for (size_t i = n0; i < n1 && !ret; i++) {
		tpc_buf nb = TPC_BUF_INIT;
		tpc_buf_adds(&nb, TMP_NAME);
		tpc_buf_adds(&nb, ck->t[i].name);
		ret = nb.oom ? tpc_err_nomem(e) : tpc_ckpt_rename(ck, (int64_t)i, nb.p, e);
		tpc_buf_release(&nb);
	}
	for (size_t i = 0; i < man.n && !ret; i++) {
		tpc_tensor v;
		if (gix[i] < 0)
			continue;
		if (tpc__rank_tensor(&ck->t[gix[i]], &man.t[i].split, c->tp, c->tp_rank, &v)) {
			ret = tpc_err_at(e, TPC_EINPUT, path, man.t[i].name, "cannot cut rank %d's slice from this tensor", c->rank);
			break;
		}
		int64_t ix = tpc_ckpt_add_copy(ck, man.t[i].name, &v, e);
		tpc_tensor_release(&v);
		if (ix < 0)
			ret = (int)ix;
	}
	if (ret)
		goto out;
	for (size_t i = 0; i < ck->n; i++)
		keep[i] = i < n0 || i >= n1;
	tpc_value_unref(ck->root); /* the tree names the globals: a flat state dict from here */
	ck->root = NULL;
	ret = tpc_ckpt_filter(ck, keep, e);
out:
	if (have_man)
		tpc_manifest_release(&man);
	free(gix);
	free(keep);
	free(mpath);
	return ret;
}

static int open_rank(const char *path, const tpc_layout_rank_ctx *c, tpc_ckpt *ck, tpc_err *e)
{
	char *dir = tpc_path_dir(path);
	int ret = dir ? tpc__dcp_open_rank(path, dir, dir, c, NULL, ck, e) : tpc_err_nomem(e);
	free(dir);
	return ret;
}

static const char *const formats[] = {"dcp", NULL};

const tpc_layout tpc_layout_dcp = {
	.name = "dcp",
	.desc = "one PyTorch Distributed Checkpoint: __R_0.distcp per rank (its chunks) + .metadata (global shapes)",
	.formats = formats, .set_format = "dcp-shards",
	.companions_at_top = true,
	.rank_name = rank_name, .check = check,
	.stored_rank = stored_rank, .write_rank = tpc__dcp_write_rank, .rank_file_ok = rank_file_ok, .remove_rank = remove_rank,
	.open_rank = open_rank, .write_extras = write_extras,
};
