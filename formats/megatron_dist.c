/* megatron_dist.c - opening a PyTorch DCP folder as one checkpoint: plain
 * DCP and Megatron-Core's torch_dist save folders (below), which are DCP with
 * a save folder, layer-stacked keys and optimizer state around it. dcp.c
 * parses .metadata (dcp.h) and writes; this file finds the folder, reads
 * every item in place, assembles each tensor from its chunks and rebuilds
 * the object tree. */
#include "dcp_int.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torch/torch.h"
#include "tpc_extras.h"
#include "tpc_io.h"
#include "tpc_util.h"

#define MAX_META_BYTES (1ull << 30)
#define TMP_PREFIX "\x01" "dcp-chunk/"

/* ---- assembling tensors ---- */

typedef struct box_set {
	const tpc_dcp_entry *en;
	tpc_tensor *piece;     /* [nc]: each chunk's tensor (a view of its item) */
	bool *dup;             /* [nc]: an exact repeat of an earlier chunk (a replica) */
} box_set;

static bool overlap(const tpc_dcp_chunk *a, const tpc_dcp_chunk *b, int nd)
{
	for (int d = 0; d < nd; d++)
		if (a->off[d] >= b->off[d] + b->size[d] || b->off[d] >= a->off[d] + a->size[d])
			return false;
	return true;
}

static bool same_box(const tpc_dcp_chunk *a, const tpc_dcp_chunk *b, int nd)
{
	return !memcmp(a->off, b->off, (size_t)nd * sizeof(int64_t)) && !memcmp(a->size, b->size, (size_t)nd * sizeof(int64_t));
}

static bool empty_box(const tpc_dcp_chunk *c, int nd)
{
	for (int d = 0; d < nd; d++)
		if (!c->size[d])
			return true;
	return false;
}

/* The chunks tile the global box exactly once (replicas aside). */
static int check_tiling(box_set *b, const char *path, tpc_err *e)
{
	const tpc_dcp_entry *en = b->en;
	int nd = en->ndim;
	uint64_t total = 1, have = 0;
	for (int d = 0; d < nd; d++)
		if (tpc_mul_u64(total, (uint64_t)en->shape[d], &total))
			return TPC_CORRUPT(e, path, -1, en->fqn, "tensor size overflows");
	for (size_t i = 0; i < en->nc; i++) {
		const tpc_dcp_chunk *c = &en->c[i];
		uint64_t v = 1;
		for (size_t j = 0; j < i && !b->dup[i]; j++) {
			if (b->dup[j] || empty_box(c, nd) || empty_box(&en->c[j], nd))
				continue;
			if (same_box(c, &en->c[j], nd))
				b->dup[i] = true;
			else if (overlap(c, &en->c[j], nd))
				return TPC_CORRUPT(e, path, -1, en->fqn,
						   "chunks %zu and %zu overlap (offsets [%lld...] and [%lld...])", j, i,
						   (long long)(nd ? en->c[j].off[0] : 0), (long long)(nd ? c->off[0] : 0));
		}
		if (b->dup[i])
			continue;
		for (int d = 0; d < nd; d++)
			v *= (uint64_t)c->size[d]; /* each <= the dim: no overflow past total's check */
		have += v;
	}
	if (have != total)
		return TPC_CORRUPT(e, path, -1, en->fqn,
				   "the chunks cover %llu of the tensor's %llu elements: %s", (unsigned long long)have,
				   (unsigned long long)total, have < total ? "a gap (a rank's file missing from the metadata?)" : "overlap");
	return 0;
}

/* Chunks idx[0..n) exactly tile box [lo, hi): a composite of slabs along the
 * first dimension some cut separates them on. */
static int build_box(box_set *b, size_t *idx, size_t n, const int64_t *lo, const int64_t *hi, tpc_tensor *out,
		     int depth, const char *path, tpc_err *e)
{
	const tpc_dcp_entry *en = b->en;
	int nd = en->ndim, ret = 0;
	if (n == 1)
		return tpc_tensor_copy(out, &b->piece[idx[0]]) ? tpc_err_nomem(e) : 0;
	if (depth > 4 * TPC_MAX_NDIM + 64)
		return TPC_CORRUPT(e, path, -1, en->fqn, "chunk layout nests too deep");
	for (int d = 0; d < nd; d++) {
		/* cut positions along d: chunk starts; a cut at x is clean when no
		 * chunk spans it */
		int64_t best = -1;
		for (size_t i = 0; i < n && best < 0; i++) {
			int64_t x = en->c[idx[i]].off[d];
			if (x <= lo[d])
				continue;
			bool clean = true;
			for (size_t j = 0; j < n && clean; j++) {
				const tpc_dcp_chunk *c = &en->c[idx[j]];
				clean = !(c->off[d] < x && c->off[d] + c->size[d] > x);
			}
			if (clean)
				best = x;
		}
		if (best < 0)
			continue;
		/* slabs [lo, best) and [best, hi) along d, recursively */
		size_t *a = tpc_malloc(n * sizeof(size_t)), na = 0, nb = 0;
		if (!a)
			return tpc_err_nomem(e);
		size_t *bb = tpc_malloc(n * sizeof(size_t));
		if (!bb) {
			free(a);
			return tpc_err_nomem(e);
		}
		for (size_t i = 0; i < n; i++) {
			if (en->c[idx[i]].off[d] < best)
				a[na++] = idx[i];
			else
				bb[nb++] = idx[i];
		}
		int64_t mid_hi[TPC_MAX_NDIM], mid_lo[TPC_MAX_NDIM];
		memcpy(mid_hi, hi, (size_t)nd * sizeof(int64_t));
		memcpy(mid_lo, lo, (size_t)nd * sizeof(int64_t));
		mid_hi[d] = best;
		mid_lo[d] = best;
		tpc_tensor parts[2];
		memset(parts, 0, sizeof(parts));
		ret = build_box(b, a, na, lo, mid_hi, &parts[0], depth + 1, path, e);
		if (!ret)
			ret = build_box(b, bb, nb, mid_lo, hi, &parts[1], depth + 1, path, e);
		if (!ret && tpc_tensor_init_cat(out, parts, 2, d))
			ret = TPC_CORRUPT(e, path, -1, en->fqn, "chunks do not concatenate along dim %d", d);
		tpc_tensor_release(&parts[0]);
		tpc_tensor_release(&parts[1]);
		free(a);
		free(bb);
		return ret;
	}
	return TPC_CORRUPT(e, path, -1, en->fqn,
			   "the chunks do not cut into slabs along any dimension (a layout no DTensor placement writes)");
}

static void clear_storages(tpc_tensor *t)
{
	t->storage = -1;
	t->storage_offset = 0;
	for (int k = 0; k < t->nparts; k++)
		clear_storages(&t->parts[k]);
}

/* ---- item files and the object tree ---- */

typedef struct file_src {
	const char *name;
	int src;
} file_src;

static int source_of(tpc_ckpt *ck, const char *dir, const char *file, file_src **fs, size_t *nfs, size_t *cap,
		     int *src, tpc_err *e)
{
	for (size_t i = 0; i < *nfs; i++)
		if (!strcmp((*fs)[i].name, file)) {
			*src = (*fs)[i].src;
			return 0;
		}
	char *p = tpc_path_join(dir, file);
	int ret;
	if (!p)
		return tpc_err_nomem(e);
	if (!tpc_exists(p)) {
		tpc_err_at(e, TPC_EINPUT, dir, NULL, "the metadata names item file '%s', which is missing", file);
		free(p);
		return TPC_EINPUT;
	}
	ret = tpc_ckpt_add_file(ck, p, src, e);
	free(p);
	if (ret)
		return ret;
	if (tpc_grow((void **)fs, cap, *nfs + 1, sizeof(**fs)))
		return tpc_err_nomem(e);
	(*fs)[*nfs].name = file;
	(*fs)[*nfs].src = *src;
	(*nfs)++;
	return 0;
}

/* Put value `v` at `path` (keys) under root; tensors' names follow the path. */
static int place(tpc_value *root, const tpc_value *path, tpc_value *v, tpc_err *e)
{
	tpc_value *cur = root;
	for (size_t i = 0; i + 1 < path->n; i++) {
		tpc_value *k = path->items[i];
		tpc_value *next = NULL;
		for (size_t j = 0; j < cur->n; j++)
			if (tpc_value_equal(cur->keys[j], k))
				next = cur->items[j];
		if (!next) {
			if (!(next = tpc_value_new(TPC_V_DICT)) || tpc_value_set(cur, tpc_value_ref(k), next)) {
				tpc_value_unref(v);
				return tpc_err_nomem(e);
			}
		} else if (next->kind != TPC_V_DICT) {
			tpc_value_unref(v);
			return tpc_err_set(e, TPC_EINPUT, "planner_data puts a value inside another value");
		}
		cur = next;
	}
	if (tpc_value_set(cur, tpc_value_ref(path->items[path->n - 1]), v))
		return tpc_err_nomem(e);
	return 0;
}

/* ---- Megatron-Core torch_dist (FRAMEWORKS.md §2b) ----
 * A save folder holds latest_checkpointed_iteration.txt (an iteration number or
 * "release") and iter_NNNNNNN/ (or release/); a torch_dist iteration folder is a
 * DCP checkpoint saved with flatten_state_dict=False plus metadata.json
 * {"sharded_backend": "torch_dist"}. Homogeneous decoders store one key per
 * parameter with the layer axis first ("decoder.layers.self_attention.
 * linear_qkv.weight" [layers, ...]); the model's own state dict names them per
 * layer, so the reader un-stacks them ("decoder.layers.0.self_attention...") as
 * views. Optimizer state (optimizer.*) is left out unless --select asks for it.
 * Legacy sets (mp_rank_TT[_PPP]/model_optim_rng.pt) are shard sets of the
 * megatron layout (shard/layout_megatron.c): merge reads them; opened here as
 * one checkpoint they are refused with that advice. */

#define MEGATRON_LATEST "latest_checkpointed_iteration.txt"

static bool has_entry_prefix(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	bool found = false;
	while (d && !found && (de = readdir(d)))
		found = !strncmp(de->d_name, prefix, strlen(prefix));
	if (d)
		closedir(d);
	return found;
}

static bool megatron_torch_dist(const char *dir)
{
	char *p = tpc_path_join(dir, "metadata.json"), *text = NULL;
	size_t len;
	tpc_err e2;
	tpc_err_init(&e2);
	bool yes = p && tpc_exists(p) && !tpc_read_file(p, 1u << 20, &text, &len, &e2) && strstr(text, "\"sharded_backend\"") &&
		   strstr(text, "torch_dist");
	free(p);
	free(text);
	return yes;
}

/* "decoder.layers.mlp.x" -> the length of "decoder.layers" (a layers component
 * not followed by a number), or 0 */
static size_t stacked_prefix(const char *fqn)
{
	for (const char *p = strstr(fqn, "layers."); p; p = strstr(p + 1, "layers.")) {
		if (p != fqn && p[-1] != '.')
			continue;
		const char *q = p + 7;
		return *q >= '0' && *q <= '9' ? 0 : (size_t)(p + 6 - fqn);
	}
	return 0;
}

/* Drop dim 0 (of size 1) from a description: a view loses it, a composite
 * along dim 0 becomes its one non-empty part, others drop it from every part. */
static int squeeze0(tpc_tensor *t)
{
	if (t->ndim < 1 || t->shape[0] != 1)
		return -1;
	if (t->nparts && t->cat_dim == 0) {
		int keep = -1;
		for (int k = 0; k < t->nparts; k++)
			if (t->parts[k].shape[0] == 1)
				keep = k;
		if (keep < 0)
			return -1;
		tpc_tensor part = t->parts[keep];
		memset(&t->parts[keep], 0, sizeof(part));
		tpc_tensor_release(t);
		*t = part;
		return squeeze0(t);
	}
	for (int k = 0; k < t->nparts; k++)
		if (squeeze0(&t->parts[k]))
			return -1;
	int nd = t->ndim - 1;
	int64_t sh[TPC_MAX_NDIM], st[TPC_MAX_NDIM];
	for (int d = 0; d < nd; d++) {
		sh[d] = t->shape[d + 1];
		st[d] = t->stride[d + 1];
	}
	t->ndim = nd;
	t->stride = t->shape + nd;
	for (int d = 0; d < nd; d++) {
		t->shape[d] = sh[d];
		t->stride[d] = st[d];
	}
	if (t->nparts)
		t->cat_dim--;
	return 0;
}

/* --select PATH: keep the entries under PATH (a dotted prefix of their keys),
 * named relative to it, before any item is read (a torchtitan checkpoint's
 * "model" without its optimizer state). */
static int select_entries(tpc_dcp_meta *m, const char *sel, const char *path, tpc_err *e)
{
	size_t sl = strlen(sel), kept = 0;
	tpc_buf top = TPC_BUF_INIT;
	for (size_t i = 0; i < m->n; i++) {
		tpc_dcp_entry *en = &m->e[i];
		bool in = !strncmp(en->fqn, sel, sl) && en->fqn[sl] == '.';
		if (!in) {
			/* the first few top-level keys, for the message */
			const char *dot = strchr(en->fqn, '.');
			size_t l = dot ? (size_t)(dot - en->fqn) : strlen(en->fqn);
			char q[160];
			snprintf(q, sizeof(q), "'%.*s'", (int)(l < 150 ? l : 150), en->fqn);
			if (top.len < 200 && !(top.p && strstr(top.p, q)))
				tpc_buf_addf(&top, "%s%s", top.len ? ", " : "", q);
			tpc__dcp_entry_release(en);
			continue;
		}
		memmove(en->fqn, en->fqn + sl + 1, strlen(en->fqn + sl + 1) + 1);
		if (en->path) {
			/* drop the path elements that spell PATH; no exact match: flat name */
			size_t used = 0, k = 0;
			while (k < en->path->n && used < sl) {
				const tpc_value *p = en->path->items[k];
				if (p->kind != TPC_V_STR || strncmp(sel + used + (used ? 1 : 0), p->str, p->len))
					break;
				used += p->len + (used ? 1 : 0);
				k++;
			}
			tpc_value *np = NULL;
			if (used == sl && k < en->path->n && (np = tpc_value_new(TPC_V_TUPLE)))
				for (size_t j = k; j < en->path->n; j++)
					if (tpc_value_append(np, tpc_value_ref(en->path->items[j]))) {
						tpc_value_unref(np);
						np = NULL;
						break;
					}
			tpc_value_unref(en->path);
			en->path = np;
		}
		m->e[kept++] = *en;
	}
	m->n = kept;
	if (!kept) {
		tpc_err_at(e, TPC_EINPUT, path, NULL, "--select '%s': no key '%s' (keys here: %s)", sel, sel, top.p ? top.p : "none");
	}
	tpc_buf_release(&top);
	return kept ? 0 : TPC_EINPUT;
}

/* "decoder.layers" + l + "mlp.x" */
static char *layer_name(const char *fqn, size_t pre, int64_t l)
{
	tpc_buf b = TPC_BUF_INIT;
	tpc_buf_add(&b, fqn, pre);
	tpc_buf_addf(&b, ".%lld%s", (long long)l, fqn + pre);
	return tpc_buf_detach(&b, NULL);
}

/* Routed experts stacked under one key ("decoder.layers.mlp.experts.experts.
 * linear_fc1.weight" [layers, experts, ...]: Megatron-Core's SequentialMLP and
 * TEGroupedMLP, moe/experts.py:1049-1091 and 1526-1566) are un-stacked again
 * per expert, under SequentialMLP's own state dict names with the global
 * expert number ("decoder.layers.0.mlp.experts.local_experts.5.linear_fc1.
 * weight", experts.py:1449). `nm` is a layer's name; NULL when it is no
 * expert key. */
#define EXPERTS_KEY ".experts.experts."
/* the experts' stack: not singleton_local_shards' per-expert keys
 * ("...experts.experts.5.linear_fc1.weight", experts.py:1541) */
static const char *experts_at(const char *nm)
{
	const char *p = strstr(nm, EXPERTS_KEY);
	return p && !(p[strlen(EXPERTS_KEY)] >= '0' && p[strlen(EXPERTS_KEY)] <= '9') ? p : NULL;
}

static char *expert_name(const char *nm, int64_t x)
{
	const char *p = experts_at(nm);
	if (!p)
		return NULL;
	tpc_buf b = TPC_BUF_INIT;
	tpc_buf_add(&b, nm, (size_t)(p - nm));
	tpc_buf_addf(&b, ".experts.local_experts.%lld.%s", (long long)x, p + strlen(EXPERTS_KEY));
	return tpc_buf_detach(&b, NULL);
}

/* What inspect says about the folder: framework, rank files, chunks per
 * tensor, the iteration, what is model and what optimizer state. */
static void set_about(tpc_ckpt *ck, const tpc_dcp_meta *m, size_t nfiles, bool mcore, const char *dir, const char *iter,
		      size_t nopt, bool selected, const tpc__mcore_optim *mo)
{
	tpc_buf b;
	size_t nt = 0, nb = 0, nc = 0, maxc = 0;
	for (size_t i = 0; i < m->n; i++) {
		if (!m->e[i].tensor) {
			nb++;
			continue;
		}
		nt++;
		nc += m->e[i].nc;
		if (m->e[i].nc > maxc)
			maxc = m->e[i].nc;
	}
	tpc_buf_init(&b);
	if (mcore)
		tpc_buf_addf(&b, "Megatron-Core torch_dist checkpoint%s%s (PyTorch DCP with Megatron's metadata.json)",
			     iter ? " " : "", iter ? tpc_path_base(iter) : "");
	else
		tpc_buf_adds(&b, "PyTorch Distributed Checkpoint (torch.distributed.checkpoint)");
	tpc_buf_addf(&b, "\n%zu .distcp file%s read: %zu tensor entries in %zu chunks (at most %zu per tensor), %zu non-tensor item%s",
		     nfiles, nfiles == 1 ? "" : "s", nt, nc, maxc, nb, nb == 1 ? "" : "s");
	if (mo->on)
		tpc__mcore_optim_about(mo, &b);
	if (mo->on && !strcmp(tpc_path_base(dir), "release"))
		tpc_buf_adds(&b, "\nrelease folder: Megatron never loads its optimizer state (training/checkpointing.py:2612-2618, 2958 at d98e8a6)");
	else if (mcore && !selected)
		tpc_buf_addf(&b, "\noptimizer state: %zu entr%s left out (read %s with --select optimizer)", nopt, nopt == 1 ? "y" : "ies", nopt == 1 ? "it" : "them");
	tpc_ckpt_set_about(ck, &b);
}

/* ---- opening the folder ---- */

/* One open in progress: what the steps of tpc__dcp_open hand on. */
typedef struct dcp_read {
	tpc_ckpt *ck;
	const char *dir;  /* the DCP folder: the one given, or a save folder's iteration */
	char *iter;       /* that iteration folder (a Megatron save folder), or NULL */
	char *mpath;      /* dir's .metadata */
	bool mcore;       /* Megatron's metadata.json says torch_dist */
	tpc_dcp_meta m;
	file_src *fs;     /* the item files added to ck */
	size_t nfs, capfs;
	tpc_value **vals; /* [m.n]: each bytes item's value */
	size_t nopt;      /* Megatron optimizer entries left out */
	tpc__mcore_optim mo; /* or read (TPC_OPEN_OPTIMIZER) */
} dcp_read;

/* The folder (a Megatron save folder's latest iteration) and its metadata,
 * parsed, with the entries --select or Megatron's model-only default keep. */
static int open_meta(dcp_read *r, const char *dir_in, const tpc_open_opts *o, tpc_err *e)
{
	char *text = NULL;
	size_t len = 0;
	int ret;
	/* a Megatron save folder: its latest iteration */
	char *own = tpc_path_join(r->dir, TPC_DCP_META);
	if (own && !tpc_exists(own) && (r->iter = tpc_extras_megatron_iter(r->dir))) {
		r->dir = r->iter;
		if (has_entry_prefix(r->dir, "mp_rank_")) {
			free(own);
			return tpc_err_at(e, TPC_EINPUT, dir_in, NULL,
				    "this is a legacy Megatron checkpoint (mp_rank_TT[_PPP]/model_optim_rng.pt), a shard set: read it with 'tpconv merge DIR --preset llama -o OUT' (or shard it again)");
		}
	}
	free(own);
	r->mcore = megatron_torch_dist(r->dir);
	if (!(r->mpath = tpc_path_join(r->dir, TPC_DCP_META)))
		return tpc_err_nomem(e);
	if (r->iter && !tpc_exists(r->mpath)) {
		return tpc_err_at(e, TPC_EINPUT, dir_in, NULL, "the save folder's %s names %s, which holds no DCP checkpoint (.metadata)",
			    MEGATRON_LATEST, tpc_path_base(r->iter));
	}
	if ((ret = tpc_read_file(r->mpath, MAX_META_BYTES, &text, &len, e)) ||
	    (ret = tpc_dcp_meta_from_buffer(&r->m, (const uint8_t *)text, len, r->mpath, e))) {
		free(text);
		return ret;
	}
	free(text);
	if (o && o->select && (ret = select_entries(&r->m, o->select, r->dir, e)))
		return ret;
	bool any = false;
	for (size_t i = 0; i < r->m.n && !any; i++)
		any = tpc__mcore_optim_key(r->m.e[i].fqn);
	if (r->mcore && any && !(o && o->select) && o && (o->flags & TPC_OPEN_OPTIMIZER) &&
	    (ret = tpc__mcore_optim_begin(&r->mo, r->dir, e)))
		return ret;
	if (r->mcore && !(o && o->select)) {
		/* the model: Megatron's optimizer state stays out unless selected
		 * or read beside its parameters (megatron_optim.c) */
		size_t kept = 0;
		for (size_t i = 0; i < r->m.n; i++) {
			int keep = r->mo.on ? tpc__mcore_optim_keep(&r->mo, &r->m.e[i], r->mpath, e) : 0;
			if (keep < 0)
				return keep;
			if (!keep && tpc__mcore_optim_key(r->m.e[i].fqn)) {
				r->nopt++;
				tpc__dcp_entry_release(&r->m.e[i]);
				continue;
			}
			r->m.e[kept++] = r->m.e[i];
		}
		r->m.n = kept;
	}
	return 0;
}

/* Bytes item i: its value, read from its item in place. */
static int read_bytes_item(dcp_read *r, size_t i, tpc_err *e)
{
	tpc_dcp_entry *en = &r->m.e[i];
	int src, ret;
	char *fp = NULL;
	if (!(ret = source_of(r->ck, r->dir, en->c[0].file, &r->fs, &r->nfs, &r->capfs, &src, e)) &&
	    !(fp = tpc_path_join(r->dir, en->c[0].file)))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = tpc__torch_open_item(r->ck, src, en->c[0].foff, en->c[0].flen, fp, en->fqn, false, &r->vals[i], e);
	if (ret)
		tpc_err_tensor(e, en->fqn);
	free(fp);
	return ret;
}

/* Tensor entry i's chunks, each opened from its item as a tensor of ck
 * (named TMP_PREFIX i/k) and checked against the metadata; idx[0..*nlive)
 * gets the chunks that hold bytes, b->piece[k] each one's tensor. */
static int read_chunks(dcp_read *r, size_t i, box_set *b, size_t *idx, size_t *nlive, tpc_err *e)
{
	tpc_dcp_entry *en = &r->m.e[i];
	tpc_ckpt *ck = r->ck;
	int ret = 0;
	for (size_t k = 0; k < en->nc && !ret; k++) {
		tpc_dcp_chunk *c = &en->c[k];
		char tmp[64];
		int src;
		tpc_value *leaf = NULL;
		if (b->dup[k] || empty_box(c, en->ndim))
			continue; /* replicas read once; empty chunks hold nothing */
		char *fp = tpc_path_join(r->dir, c->file);
		if (!fp) {
			ret = tpc_err_nomem(e);
			break;
		}
		snprintf(tmp, sizeof(tmp), TMP_PREFIX "%zu/%zu", i, k);
		size_t before = ck->n;
		if (!(ret = source_of(ck, r->dir, c->file, &r->fs, &r->nfs, &r->capfs, &src, e)))
			ret = tpc__torch_open_item(ck, src, c->foff, c->flen, fp, tmp, true, &leaf, e);
		if (!ret && (ck->n != before + 1 || !leaf || leaf->kind != TPC_V_TENSOR))
			ret = TPC_CORRUPT(e, fp, (int64_t)c->foff, en->fqn, "item of chunk %zu does not hold one tensor", k);
		tpc_value_unref(leaf);
		if (!ret) {
			tpc_tensor *t = &ck->t[before];
			bool ok = t->dtype == en->dtype && t->ndim == en->ndim &&
				  !memcmp(t->shape, c->size, (size_t)en->ndim * sizeof(int64_t));
			if (!ok) {
				char got[128];
				tpc_shape_str(t, got, sizeof(got));
				ret = TPC_CORRUPT(e, fp, (int64_t)c->foff, en->fqn,
						  "item of chunk %zu holds %s %s, the metadata says %s of %d dimensions for this chunk",
						  k, tpc_dtype_name(t->dtype), got, tpc_dtype_name(en->dtype), en->ndim);
			} else if (tpc_tensor_copy(&b->piece[k], t)) {
				ret = tpc_err_nomem(e);
			} else {
				idx[(*nlive)++] = k;
			}
		} else if (!e->tensor[0]) {
			tpc_err_tensor(e, en->fqn);
		}
		free(fp);
	}
	return ret;
}

/* Tensor `one` under name nm, or, when nm is the routed experts' stack
 * [experts, ...], one tensor per expert (en->experts of them). */
static int add_experts(tpc_ckpt *ck, tpc_dcp_entry *en, const char *nm, const tpc_tensor *one, const char *mpath,
		       tpc_err *e)
{
	int ret = 0;
	if (!experts_at(nm) || one->ndim < 2) {
		int64_t ix = tpc_ckpt_add_copy(ck, nm, one, e);
		return ix < 0 ? (int)ix : 0;
	}
	for (int64_t x = 0; x < one->shape[0] && !ret; x++) {
		tpc_tensor ex;
		char *xn = expert_name(nm, x);
		if (!xn || tpc_tensor_narrow(&ex, one, 0, x, 1)) {
			free(xn);
			return tpc_err_nomem(e);
		}
		if (squeeze0(&ex))
			ret = TPC_CORRUPT(e, mpath, -1, en->fqn, "cannot take expert %lld of this tensor", (long long)x);
		int64_t ix = ret ? -1 : tpc_ckpt_add_copy(ck, xn, &ex, e);
		if (!ret && ix < 0)
			ret = (int)ix;
		tpc_tensor_release(&ex);
		free(xn);
	}
	en->experts = one->shape[0];
	return ret;
}

/* A Megatron layer-stacked tensor: one tensor per layer (and expert), named
 * as the model names it. */
static int add_layers(tpc_ckpt *ck, tpc_dcp_entry *en, size_t pre, const tpc_tensor *whole, const char *mpath,
		      tpc_err *e)
{
	int ret = 0;
	for (int64_t l = 0; l < whole->shape[0] && !ret; l++) {
		tpc_tensor one;
		char *nm = layer_name(en->fqn, pre, l);
		if (!nm || tpc_tensor_narrow(&one, whole, 0, l, 1)) {
			free(nm);
			ret = tpc_err_nomem(e);
			break;
		}
		if (squeeze0(&one))
			ret = TPC_CORRUPT(e, mpath, -1, en->fqn, "cannot take layer %lld of this tensor", (long long)l);
		if (!ret)
			ret = add_experts(ck, en, nm, &one, mpath, e);
		tpc_tensor_release(&one);
		free(nm);
	}
	en->unstacked = whole->shape[0];
	return ret;
}

/* Tensor entry i: its chunks read and assembled into one tensor of ck (or
 * one per layer). */
static int read_tensor(dcp_read *r, size_t i, tpc_err *e)
{
	tpc_dcp_entry *en = &r->m.e[i];
	box_set b = {en, NULL, NULL};
	if (!(b.piece = tpc_calloc(en->nc + 1, sizeof(*b.piece))) || !(b.dup = tpc_calloc(en->nc + 1, sizeof(bool)))) {
		free(b.piece);
		return tpc_err_nomem(e);
	}
	int ret = check_tiling(&b, r->mpath, e);
	size_t nlive = 0, *idx = tpc_calloc(en->nc + 1, sizeof(size_t));
	if (!idx && !ret)
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = read_chunks(r, i, &b, idx, &nlive, e);
	if (!ret) {
		tpc_tensor whole;
		memset(&whole, 0, sizeof(whole));
		int64_t lo[TPC_MAX_NDIM] = {0};
		const tpc_dcp_entry *pe = r->mo.on ? tpc__mcore_optim_param_entry(&r->m, en) : NULL;
		if (tpc__mcore_optim_is_flat(en, pe)) {
			ret = tpc__mcore_optim_unflat(en, pe, b.piece, idx, nlive, &whole, r->mpath, e);
		} else if (nlive == 0) {
			if (tpc_tensor_init_zero(&whole, en->dtype, en->ndim, en->shape))
				ret = tpc_err_nomem(e);
			whole.flags = 0; /* empty: no bytes at all */
		} else {
			ret = build_box(&b, idx, nlive, lo, en->shape, &whole, 0, r->mpath, e);
		}
		size_t pre = r->mcore ? stacked_prefix(en->fqn) : 0;
		if (!ret)
			clear_storages(&whole);
		if (!ret && pre && whole.ndim >= 1) {
			ret = add_layers(r->ck, en, pre, &whole, r->mpath, e);
		} else if (!ret && r->mcore) {
			/* a layer's own key (non-homogeneous layers, transformer_block.py:
			 * 832-834): its experts apart all the same */
			ret = add_experts(r->ck, en, en->fqn, &whole, r->mpath, e);
		} else if (!ret) {
			int64_t ix = tpc_ckpt_add_copy(r->ck, en->fqn, &whole, e);
			if (ix < 0)
				ret = (int)ix;
		}
		tpc_tensor_release(&whole);
	}
	for (size_t k = 0; b.piece && k < en->nc; k++)
		tpc_tensor_release(&b.piece[k]);
	free(b.piece);
	free(b.dup);
	free(idx);
	return ret;
}

/* The dp_reshardable buckets as each parameter's state (megatron_dp_optim.c),
 * then the bucket entries and tensors dropped. */
static int dp_buckets(dcp_read *r, size_t first, tpc_err *e)
{
	int ret = tpc__mcore_dp_map(&r->mo, r->ck, &r->m, r->vals, r->mpath, e);
	size_t kept = 0;
	for (size_t i = 0; !ret && i < r->m.n; i++) {
		if (tpc__mcore_optim_key(r->m.e[i].fqn)) { /* all the kept optimizer entries are the buckets' */
			tpc__dcp_entry_release(&r->m.e[i]);
			tpc_value_unref(r->vals[i]);
			continue;
		}
		r->vals[kept] = r->vals[i];
		r->m.e[kept++] = r->m.e[i];
	}
	if (!ret) {
		for (size_t i = kept; i < r->m.n; i++)
			r->vals[i] = NULL;
		r->m.n = kept;
		ret = tpc_ckpt_drop_prefixed(r->ck, first, "optimizer.distributed.", e);
	for (int k = 0; k < 2 && !ret; k++)
		ret = tpc_ckpt_drop_prefixed(r->ck, first, k ? "chained_1.optimizer.distributed." : "chained_0.optimizer.distributed.", e);
	}
	return ret;
}

/* The object tree: planner_data's nesting, tensors as leaves. */
static int build_tree(dcp_read *r, tpc_value *root, tpc_err *e)
{
	int ret = 0;
	for (size_t i = 0; i < r->m.n && !ret; i++) {
		tpc_dcp_entry *en = &r->m.e[i];
		tpc_value *v;
		if (en->unstacked || en->experts) {
			size_t pre = en->unstacked ? stacked_prefix(en->fqn) : 0;
			for (int64_t l = 0; l < (en->unstacked ? en->unstacked : 1) && !ret; l++) {
				for (int64_t x = 0; x < (en->experts ? en->experts : 1) && !ret; x++) {
					char *ln = en->unstacked ? layer_name(en->fqn, pre, l) : tpc_strdup(en->fqn);
					char *nm = en->experts && ln ? expert_name(ln, x) : ln;
					int64_t ix = nm ? tpc_ckpt_find(r->ck, nm) : -1;
					tpc_value *k = nm ? tpc_value_str(nm, strlen(nm)) : NULL, *leaf = ix >= 0 ? tpc_value_tensor(ix) : NULL;
					if (!k || !leaf || tpc_value_set(root, k, leaf))
						ret = tpc_err_nomem(e);
					if (nm != ln)
						free(nm);
					free(ln);
				}
			}
			continue;
		}
		if (en->tensor) {
			int64_t ix = tpc_ckpt_find(r->ck, en->fqn);
			v = ix >= 0 ? tpc_value_tensor(ix) : NULL;
		} else {
			v = r->vals[i];
			r->vals[i] = NULL;
		}
		if (!v) {
			ret = tpc_err_nomem(e);
			break;
		}
		if (en->path) {
			ret = place(root, en->path, v, e);
		} else {
			tpc_value *k = tpc_value_str(en->fqn, strlen(en->fqn));
			ret = k && !tpc_value_set(root, k, v) ? 0 : tpc_err_nomem(e);
		}
	}
	return ret;
}

/* The per-chunk tensors dropped; the bytes items' trees (a
 * dp_zero_gather_scatter param_state holds tensors) ride as ck's root
 * meanwhile, so that the drop renumbers their tensors too. */
static int drop_chunks(dcp_read *r, size_t first, tpc_err *e)
{
	tpc_value *held = r->ck->root, *all = tpc_value_new(TPC_V_LIST);
	int ret = all ? 0 : tpc_err_nomem(e);
	for (size_t i = 0; i < r->m.n && !ret; i++)
		if (r->vals[i] && tpc_value_append(all, tpc_value_ref(r->vals[i])))
			ret = tpc_err_nomem(e);
	if (!ret) {
		r->ck->root = all;
		ret = tpc_ckpt_drop_prefixed(r->ck, first, TMP_PREFIX, e);
		r->ck->root = held;
	}
	tpc_value_unref(all);
	return ret;
}

int tpc__dcp_open(tpc_ckpt *ck, const char *dir_in, const tpc_open_opts *o, tpc_err *e)
{
	dcp_read r;
	tpc_value *root = NULL;
	size_t first = ck->n;
	int ret;
	memset(&r, 0, sizeof(r));
	r.ck = ck;
	r.dir = dir_in;
	if ((ret = open_meta(&r, dir_in, o, e)))
		goto out;
	if (!(r.vals = tpc_calloc(r.m.n + 1, sizeof(*r.vals)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	/* every item, read in place */
	for (size_t i = 0; i < r.m.n && !ret; i++)
		ret = r.m.e[i].tensor ? read_tensor(&r, i, e) : read_bytes_item(&r, i, e);
	if (ret)
		goto out;
	/* drop the per-chunk tensors; the assembled ones stay */
	if ((ret = drop_chunks(&r, first, e)))
		goto out;
	/* dp_reshardable: the buckets mapped to each parameter's state, then gone */
	if (r.mo.on && r.mo.dp && (ret = dp_buckets(&r, first, e)))
		goto out;
	if (!(root = tpc_value_new(TPC_V_DICT))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = build_tree(&r, root, e)))
		goto out;
	tpc_value_unref(ck->root);
	ck->root = root;
	root = NULL;
	if (r.mo.on && (ret = tpc__mcore_optim_tree(&r.mo, ck, r.mpath, e)))
		goto out;
	if (!ck->format && !(ck->format = tpc_strdup(r.mcore || r.m.mcore ? "megatron-torch_dist" : "dcp")))
		ret = tpc_err_nomem(e);
	if (!ret)
		set_about(ck, &r.m, r.nfs, r.mcore || r.m.mcore, r.dir, r.iter, r.nopt, o && o->select, &r.mo);
	if (!ret)
		ret = tpc_ckpt_validate(ck, e);
out:
	for (size_t i = 0; r.vals && i < r.m.n; i++)
		tpc_value_unref(r.vals[i]);
	free(r.vals);
	free(r.fs);
	free(r.mpath);
	free(r.iter);
	tpc_value_unref(root);
	tpc_dcp_meta_release(&r.m);
	tpc__mcore_optim_release(&r.mo);
	return ret;
}

int tpc__dcp_detect(const char *path, const uint8_t *head, size_t n)
{
	(void)n;
	if (head)
		return 0;
	char *m = tpc_path_join(path, TPC_DCP_META), *iter = NULL;
	int score = 0;
	FILE *f = m ? fopen(m, "rb") : NULL;
	if (!f && (iter = tpc_extras_megatron_iter(path))) {
		/* a Megatron save folder; legacy ones too, so the reader can say what they are */
		free(m);
		m = tpc_path_join(iter, TPC_DCP_META);
		f = m ? fopen(m, "rb") : NULL;
		if (!f && has_entry_prefix(iter, "mp_rank_"))
			score = 90;
		free(iter);
	}
	if (f) {
		int c = fgetc(f);
		score = c == 0x80 ? 90 : 0; /* a pickle (PROTO) */
		fclose(f);
	}
	free(m);
	return score;
}
