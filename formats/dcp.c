/* dcp.c - PyTorch Distributed Checkpoint folders; see dcp.h. Parsing
 * .metadata and writing; opening a folder is megatron_dist.c's. */
#include "dcp_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats.h"
#include "torch/pickle.h"
#include "torch/torch.h"
#include "tpc_io.h"
#include "tpc_util.h"

#define MAX_DIM_SIZE ((int64_t)1 << 48)

/* The globals a DCP .metadata pickle may name (module.name); torch dtypes
 * ("torch.float32") are checked separately. */
static const char *const allowed[] = {
	"torch.distributed.checkpoint.metadata.Metadata",
	"torch.distributed.checkpoint.metadata.TensorStorageMetadata",
	"torch.distributed.checkpoint.metadata.BytesStorageMetadata",
	"torch.distributed.checkpoint.metadata.ChunkStorageMetadata",
	"torch.distributed.checkpoint.metadata.TensorProperties",
	"torch.distributed.checkpoint.metadata.MetadataIndex",
	"torch.distributed.checkpoint.metadata.StorageMeta",
	"torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING",
	"torch.distributed._shard.sharded_tensor.metadata.TensorProperties",
	"torch.distributed._shard.sharded_tensor.metadata.MEM_FORMAT_ENCODING",
	"torch.distributed.checkpoint.filesystem._StorageInfo",
	"torch.Size",
	"torch.serialization._get_layout",
	"pathlib.PosixPath",
	"pathlib.PurePosixPath",
	"pathlib._local.PosixPath",
	"pathlib._local.PurePosixPath",
	"collections.OrderedDict",
	"megatron.core.dist_checkpointing.strategies.torch.MCoreMetadata",
	"megatron.core.dist_checkpointing.strategies.torch.MCoreSavePlan",
};

#define BAD(...) TPC_CORRUPT(e, path, -1, NULL, __VA_ARGS__)

/* ---- reading the pickled objects ---- */

/* The class of an object the VM left as copyreg.__newobj__(cls, ...). */
static const char *obj_class(const tpc_value *v)
{
	if (!v || v->kind != TPC_V_CALL || v->n < 2 || v->items[0]->kind != TPC_V_GLOBAL ||
	    strcmp(v->items[0]->str, "copyreg.__newobj__"))
		return NULL;
	const tpc_value *a = v->items[1];
	if (a->kind != TPC_V_TUPLE || a->n < 1 || a->items[0]->kind != TPC_V_GLOBAL)
		return NULL;
	return a->items[0]->str;
}

/* Its BUILD state (a DICT for dataclasses, a TUPLE for TensorProperties). */
static const tpc_value *obj_state(const tpc_value *v)
{
	return v && v->kind == TPC_V_CALL && v->n >= 3 ? v->items[2] : NULL;
}

static bool class_is(const tpc_value *v, const char *name)
{
	const char *c = obj_class(v);
	size_t a, b;
	if (!c)
		return false;
	a = strlen(c);
	b = strlen(name);
	/* module-qualified: ".../metadata.TensorProperties" matches "TensorProperties" */
	return a > b && c[a - b - 1] == '.' && !strcmp(c + a - b, name);
}

static const tpc_value *field(const tpc_value *obj, const char *k)
{
	const tpc_value *s = obj_state(obj);
	return s && s->kind == TPC_V_DICT ? tpc_value_get(s, k) : NULL;
}

static bool get_size(const tpc_value *v, int64_t *out, int *nd)
{
	return tpc__torch_size(v, out, nd, MAX_DIM_SIZE);
}

static bool get_u64(const tpc_value *v, uint64_t *out)
{
	if (!v || v->kind != TPC_V_INT || v->ival < 0)
		return false;
	*out = (uint64_t)v->ival;
	return true;
}

/* ---- the index of stored items ---- */

typedef struct sinfo {
	const char *fqn;       /* borrowed from the tree */
	int nd;                /* -1: no offset (bytes items) */
	int64_t off[TPC_MAX_NDIM];
	const char *file;
	uint64_t foff, flen;
	bool used;
} sinfo;

static int cmp_sinfo(const void *a, const void *b)
{
	return strcmp(((const sinfo *)a)->fqn, ((const sinfo *)b)->fqn);
}

static bool safe_file(const char *s, size_t len)
{
	return len && strlen(s) == len && !strchr(s, '/') && !strchr(s, '\\') && strcmp(s, ".") && strcmp(s, "..");
}

static int read_storage(const tpc_value *k, const tpc_value *v, sinfo *out, const char *path, tpc_err *e)
{
	const tpc_value *fqn = field(k, "fqn"), *off = field(k, "offset");
	const tpc_value *rel = field(v, "relative_path"), *fo = field(v, "offset"), *ln = field(v, "length");
	const tpc_value *td = field(v, "transform_descriptors");
	memset(out, 0, sizeof(*out));
	if (!class_is(k, "MetadataIndex") || !fqn || fqn->kind != TPC_V_STR)
		return BAD("storage_data key is not a MetadataIndex with an fqn");
	out->fqn = fqn->str;
	if (!class_is(v, "_StorageInfo") || !rel || rel->kind != TPC_V_STR || !get_u64(fo, &out->foff) ||
	    !get_u64(ln, &out->flen)) {
		return tpc_err_at(e, TPC_EINPUT, path, fqn->str, "the storage entry is not a _StorageInfo(relative_path, offset, length)");
	}
	if (!safe_file(rel->str, rel->len)) {
		char s[256];
		tpc_sanitize(s, sizeof(s), rel->str);
		return tpc_err_at(e, TPC_EINPUT, path, fqn->str, "item file '%s' is not a plain name inside the checkpoint folder", s);
	}
	out->file = rel->str;
	if (td && td->kind != TPC_V_NONE) {
		if ((td->kind != TPC_V_LIST && td->kind != TPC_V_TUPLE))
			return BAD("transform_descriptors of '%s' is not a list", fqn->str);
		if (td->n) {
			char s[128];
			tpc_sanitize(s, sizeof(s), td->items[0]->kind == TPC_V_STR ? td->items[0]->str : "?");
			return tpc_err_at(e, TPC_EINPUT, path, fqn->str,
				    "item is stored through the transform '%s' (a DCP extension such as a zstd stream), which tpconv does not read",
				    s);
		}
	}
	out->nd = -1;
	if (off && off->kind != TPC_V_NONE && !get_size(off, out->off, &out->nd))
		return BAD("storage offset of '%s' is not a torch.Size", fqn->str);
	return 0;
}

/* ---- parsing .metadata ---- */

void tpc__dcp_entry_release(tpc_dcp_entry *en)
{
	for (size_t k = 0; k < en->nc; k++) {
		free(en->c[k].off);
		free(en->c[k].file);
	}
	free(en->c);
	free(en->fqn);
	free(en->shape);
	tpc_value_unref(en->path);
	memset(en, 0, sizeof(*en));
}

void tpc_dcp_meta_release(tpc_dcp_meta *m)
{
	for (size_t i = 0; m && i < m->n; i++)
		tpc__dcp_entry_release(&m->e[i]);
	if (m) {
		free(m->e);
		memset(m, 0, sizeof(*m));
	}
}

static bool global_allowed(const char *module, const char *name)
{
	char full[512];
	if (!strcmp(module, "torch") && tpc_dtype_from_torch(name) != TPC_DT_INVALID)
		return true;
	snprintf(full, sizeof(full), "%s.%s", module, name);
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		if (!strcmp(allowed[i], full))
			return true;
	return false;
}

static const sinfo *find_storage(const sinfo *s, size_t ns, const char *fqn, int nd, const int64_t *off)
{
	/* first entry of fqn by binary search, then the one with this offset */
	size_t lo = 0, hi = ns;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(s[mid].fqn, fqn) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < ns && !strcmp(s[i].fqn, fqn); i++) {
		if (nd < 0 || s[i].nd < 0) {
			if (nd < 0)
				return &s[i];
			continue;
		}
		if (s[i].nd == nd && !memcmp(s[i].off, off, (size_t)nd * sizeof(int64_t)))
			return &s[i];
	}
	return NULL;
}

static int add_chunk(tpc_dcp_entry *en, const sinfo *si, const int64_t *off, const int64_t *size, tpc_err *e)
{
	tpc_dcp_chunk *c = &en->c[en->nc];
	int nd = en->tensor ? en->ndim : 0;
	memset(c, 0, sizeof(*c));
	if (!(c->off = tpc_calloc((size_t)(2 * nd) + 1, sizeof(int64_t))) || !(c->file = tpc_strdup(si->file))) {
		free(c->off);
		c->off = NULL;
		return tpc_err_nomem(e);
	}
	c->size = c->off + nd;
	if (nd) {
		memcpy(c->off, off, (size_t)nd * sizeof(int64_t));
		memcpy(c->size, size, (size_t)nd * sizeof(int64_t));
	}
	c->foff = si->foff;
	c->flen = si->flen;
	en->nc++;
	return 0;
}

static int read_tensor_entry(tpc_dcp_entry *en, const tpc_value *md, const sinfo *si, size_t ns, const char *path,
			     tpc_err *e)
{
	const tpc_value *props = field(md, "properties"), *size = field(md, "size"), *chunks = field(md, "chunks");
	int64_t shape[TPC_MAX_NDIM];
	int nd;
	const tpc_value *ps = obj_state(props);
	const char *fqn = en->fqn;
	/* TensorProperties: state tuple (dtype, ...), or a dict with "dtype" */
	const tpc_value *dt = NULL;
	if (ps && ps->kind == TPC_V_TUPLE && ps->n >= 1)
		dt = ps->items[0];
	else if (ps && ps->kind == TPC_V_DICT)
		dt = tpc_value_get(ps, "dtype");
	if (!class_is(props, "TensorProperties") || !dt || dt->kind != TPC_V_GLOBAL || strncmp(dt->str, "torch.", 6))
		return TPC_CORRUPT(e, path, -1, fqn, "TensorStorageMetadata without TensorProperties naming a torch dtype");
	if ((en->dtype = tpc_dtype_from_torch(dt->str + 6)) == TPC_DT_INVALID) {
		char s[96];
		tpc_sanitize(s, sizeof(s), dt->str);
		return TPC_CORRUPT(e, path, -1, fqn, "dtype %s is not one tpconv knows", s);
	}
	if (!get_size(size, shape, &nd))
		return TPC_CORRUPT(e, path, -1, fqn, "size is not a torch.Size");
	if (!chunks || chunks->kind != TPC_V_LIST)
		return TPC_CORRUPT(e, path, -1, fqn, "chunks is not a list");
	en->ndim = nd;
	if (!(en->shape = tpc_calloc((size_t)nd + 1, sizeof(int64_t))) ||
	    !(en->c = tpc_calloc(chunks->n + 1, sizeof(*en->c))))
		return tpc_err_nomem(e);
	memcpy(en->shape, shape, (size_t)nd * sizeof(int64_t));
	for (size_t k = 0; k < chunks->n; k++) {
		const tpc_value *ch = chunks->items[k];
		int64_t off[TPC_MAX_NDIM], sz[TPC_MAX_NDIM];
		int n1, n2;
		if (!class_is(ch, "ChunkStorageMetadata") || !get_size(field(ch, "offsets"), off, &n1) ||
		    !get_size(field(ch, "sizes"), sz, &n2) || n1 != nd || n2 != nd)
			return TPC_CORRUPT(e, path, -1, fqn, "chunk %zu is not a ChunkStorageMetadata of %d dimensions", k, nd);
		for (int d = 0; d < nd; d++)
			if (off[d] > shape[d] || sz[d] > shape[d] - off[d])
				return TPC_CORRUPT(e, path, -1, fqn,
						   "chunk %zu lies outside the tensor: dim %d rows [%lld, %lld) of %lld", k, d,
						   (long long)off[d], (long long)(off[d] + sz[d]), (long long)shape[d]);
		const sinfo *s = find_storage(si, ns, fqn, nd, off);
		if (!s)
			return TPC_CORRUPT(e, path, -1, fqn, "chunk %zu has no stored item in storage_data", k);
		int ret = add_chunk(en, s, off, sz, e);
		if (ret)
			return ret;
	}
	return 0;
}

int tpc_dcp_meta_from_buffer(tpc_dcp_meta *m, const uint8_t *p, size_t n, const char *path, tpc_err *e)
{
	tpc_pickle_opts po;
	tpc_pickle_globals g;
	tpc_value *root = NULL;
	sinfo *si = NULL;
	size_t ns = 0;
	int ret;
	memset(m, 0, sizeof(*m));
	memset(&g, 0, sizeof(g));
	if (!path)
		path = TPC_DCP_META;
	tpc_pickle_opts_init(&po);
	po.path = path;
	po.policy = TPC_PICKLE_REFUSE_DANGEROUS;
	po.globals = &g;
	if ((ret = tpc_pickle_load_from_buffer(p, n, &po, &root, NULL, e)))
		goto out;
	for (size_t i = 0; i < g.n; i++) {
		if (!global_allowed(g.v[i].module, g.v[i].name)) {
			char s[256];
			snprintf(s, sizeof(s), "%s.%s", g.v[i].module, g.v[i].name);
			char t[256];
			tpc_sanitize(t, sizeof(t), s);
			ret = BAD("the metadata pickle names %s, which is not a class of DCP metadata; refusing it", t);
			goto out;
		}
		if (strstr(g.v[i].module, "megatron"))
			m->mcore = true;
	}
	if (!class_is(root, "Metadata") && !class_is(root, "MCoreMetadata")) {
		ret = BAD("not a DCP Metadata object (torch.distributed.checkpoint.metadata.Metadata)");
		goto out;
	}
	const tpc_value *sdm = field(root, "state_dict_metadata"), *sd = field(root, "storage_data");
	const tpc_value *pd = field(root, "planner_data");
	if (field(root, "mcore_data"))
		m->mcore = true;
	if (!sdm || sdm->kind != TPC_V_DICT || !sd || sd->kind != TPC_V_DICT) {
		ret = BAD("Metadata lacks state_dict_metadata or storage_data");
		goto out;
	}
	/* the stored items, sorted by fqn */
	if (!(si = tpc_calloc(sd->n + 1, sizeof(*si)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < sd->n; i++, ns++)
		if ((ret = read_storage(sd->keys[i], sd->items[i], &si[i], path, e)))
			goto out;
	qsort(si, ns, sizeof(*si), cmp_sinfo);
	if (!(m->e = tpc_calloc(sdm->n + 1, sizeof(*m->e)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < sdm->n; i++) {
		const tpc_value *k = sdm->keys[i], *v = sdm->items[i];
		tpc_dcp_entry *en = &m->e[m->n];
		if (k->kind != TPC_V_STR || strlen(k->str) != k->len) {
			ret = BAD("state_dict_metadata key %zu is not a string", i);
			goto out;
		}
		if (!(en->fqn = tpc_strdup(k->str))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		m->n++;
		const tpc_value *pth = pd && pd->kind == TPC_V_DICT ? tpc_value_get(pd, k->str) : NULL;
		if (pth && (pth->kind == TPC_V_TUPLE || pth->kind == TPC_V_LIST) && pth->n)
			en->path = tpc_value_ref((tpc_value *)pth);
		if (class_is(v, "TensorStorageMetadata")) {
			en->tensor = true;
			if ((ret = read_tensor_entry(en, v, si, ns, path, e)))
				goto out;
		} else if (class_is(v, "BytesStorageMetadata")) {
			const sinfo *s = find_storage(si, ns, k->str, -1, NULL);
			if (!s) {
				ret = TPC_CORRUPT(e, path, -1, k->str, "bytes item has no stored item in storage_data");
				goto out;
			}
			if (!(en->c = tpc_calloc(1, sizeof(*en->c)))) {
				ret = tpc_err_nomem(e);
				goto out;
			}
			if ((ret = add_chunk(en, s, NULL, NULL, e)))
				goto out;
		} else {
			ret = TPC_CORRUPT(e, path, -1, k->str, "entry is neither TensorStorageMetadata nor BytesStorageMetadata");
			goto out;
		}
	}
out:
	free(si);
	tpc_value_unref(root);
	tpc_pickle_globals_release(&g);
	if (ret)
		tpc_dcp_meta_release(m);
	return ret;
}

/* ---- writing: convert -o DIR --format dcp ----
 *
 * What torch's FileSystemWriter writes for a state dict of whole tensors saved
 * by one process with its defaults (single_file_per_rank, thread_count 1;
 * torch/distributed/checkpoint/filesystem.py, write_data and
 * _write_files_from_queue): ONE file, __0_0.distcp, holding every item back to
 * back, the non-tensor (bytes) items first, then the tensors; each item a
 * complete torch.save archive whose offsets are relative to its own start, and
 * each item's (relative_path, offset, length) in .metadata's storage_data.
 * Items are streamed into the file one after another (put_item): a tensor's
 * bytes go from its source to the output in chunks or in the kernel, never
 * the whole model in memory. The state dict is flattened as
 * DefaultSavePlanner(flatten_state_dict=True) does (torch/distributed/
 * checkpoint/_nested_dict.py, _traverse.py): dicts are walked, lists only when
 * they hold tensors, every other value is one bytes item; planner_data maps each
 * flat key back to its path. .metadata is written last, atomically: until it
 * exists the folder is an incomplete save, as torch treats it. */

#define DCP_FILE0 "__0_0.distcp" /* the one file of a single-process save */

typedef struct witem {
	char *fqn;
	tpc_value *path;       /* TUPLE of keys */
	int64_t tensor;        /* index in ck, or -1 */
	const tpc_value *value; /* bytes items */
} witem;

typedef struct wlist {
	witem *v;
	size_t n, cap;
} wlist;

static bool holds_tensor(const tpc_value *v)
{
	if (!v)
		return false;
	if (v->kind == TPC_V_TENSOR)
		return true;
	if (v->kind != TPC_V_DICT && v->kind != TPC_V_LIST && v->kind != TPC_V_TUPLE)
		return false;
	for (size_t i = 0; i < v->n; i++)
		if (holds_tensor(v->items[i]))
			return true;
	return false;
}

static int add_item(wlist *l, const char *fqn, const tpc_value *path, int64_t tensor, const tpc_value *value,
		    tpc_err *e)
{
	if (tpc_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
		return tpc_err_nomem(e);
	witem *w = &l->v[l->n];
	memset(w, 0, sizeof(*w));
	w->tensor = tensor;
	w->value = value;
	if (!(w->fqn = tpc_strdup(fqn)) || !(w->path = tpc_value_new(TPC_V_TUPLE))) {
		free(w->fqn);
		return tpc_err_nomem(e);
	}
	l->n++;
	for (size_t i = 0; i < path->n; i++)
		if (tpc_value_append(w->path, tpc_value_ref(path->items[i])))
			return tpc_err_nomem(e);
	return 0;
}

static int flatten(wlist *l, const tpc_value *v, tpc_value *path, tpc_buf *name, int depth, tpc_err *e)
{
	int ret = 0;
	if (depth > 64)
		return tpc_err_set(e, TPC_EINPUT, "the object tree nests deeper than 64 containers");
	bool walk = v->kind == TPC_V_DICT || ((v->kind == TPC_V_LIST || v->kind == TPC_V_TUPLE) && holds_tensor(v));
	if (!walk || !v->n)
		return path->n ? add_item(l, name->p ? name->p : "", path, v->kind == TPC_V_TENSOR ? v->ival : -1, v, e)
			       : 0;
	size_t base = name->len;
	for (size_t i = 0; i < v->n && !ret; i++) {
		tpc_value *k = v->kind == TPC_V_DICT ? tpc_value_ref(v->keys[i]) : tpc_value_int((int64_t)i);
		if (!k)
			return tpc_err_nomem(e);
		if (base)
			tpc_buf_addc(name, '.');
		if (k->kind == TPC_V_STR)
			tpc_buf_add(name, k->str, k->len);
		else if (k->kind == TPC_V_INT)
			tpc_buf_addf(name, "%lld", (long long)k->ival);
		else {
			tpc_value_unref(k);
			return tpc_err_set(e, TPC_EINPUT, "a DCP state dict has string keys; this one has a %s key",
					   tpc_vkind_name(k->kind));
		}
		if (tpc_value_append(path, k) || name->oom)
			return tpc_err_nomem(e);
		ret = flatten(l, v->items[i], path, name, depth + 1, e);
		tpc_value_unref(path->items[--path->n]);
		name->len = base;
		if (name->p)
			name->p[base] = '\0';
	}
	return ret;
}

/* CALL[fn, (arg,)] with `state` (NULL: none) as its BUILD state. Takes fn,
 * arg and state; NULL for any of fn and arg (out of memory) gives NULL. */
static tpc_value *wnode(tpc_value *fn, tpc_value *arg, tpc_value *state)
{
	tpc_value *c = tpc_value_new(TPC_V_CALL), *args = tpc_value_new(TPC_V_TUPLE);
	int bad = tpc_value_append(c, fn);
	bad |= tpc_value_append(args, arg);
	bad |= tpc_value_append(c, args);
	if (state)
		bad |= tpc_value_append(c, state);
	if (bad) {
		tpc_value_unref(c);
		return NULL;
	}
	return c;
}

/* copyreg.__newobj__(module.cls) with BUILD state, as pickle writes a dataclass */
static tpc_value *wobj(const char *module, const char *cls, tpc_value *state)
{
	if (!state)
		return NULL;
	return wnode(tpc_value_global("copyreg", "__newobj__"), tpc_value_global(module, cls), state);
}

/* module.fn(args...) (REDUCE) */
static tpc_value *wcall(const char *module, const char *fn, tpc_value *arg)
{
	return wnode(tpc_value_global(module, fn), arg, NULL);
}

static tpc_value *wsize(int nd, const int64_t *v, bool zeros)
{
	tpc_value *t = tpc_value_new(TPC_V_TUPLE);
	for (int d = 0; t && d < nd; d++)
		if (tpc_value_append(t, tpc_value_int(zeros ? 0 : v[d]))) {
			tpc_value_unref(t);
			return NULL;
		}
	return wcall("torch", "Size", t);
}

static int wset(tpc_value *d, const char *k, tpc_value *v)
{
	return v ? tpc_value_set(d, tpc_value_str(k, strlen(k)), v) : -1;
}

#define META_MOD "torch.distributed.checkpoint.metadata"

/* TensorStorageMetadata of t stored as the boxes [off, off + size) of c[0..n)
 * along dim 0 (the other dims whole) */
typedef struct wchunk {
	size_t item;          /* index in the item list */
	int rank;             /* the file: __rank_0.distcp */
	int64_t off0, len0;   /* rows along dim 0 (ndim 0: 0, 0) */
	int64_t sc;           /* the narrowed view's index in the scratch checkpoint, or -1: whole, from ck */
	uint64_t foff, flen;  /* where the item lies in its file */
} wchunk;

static tpc_value *wbox(const tpc_tensor *t, const wchunk *c, bool sizes)
{
	int64_t v[TPC_MAX_NDIM];
	for (int d = 0; d < t->ndim; d++)
		v[d] = sizes ? (d || c->sc < 0 ? t->shape[d] : c->len0) : (d || c->sc < 0 ? 0 : c->off0);
	return wsize(t->ndim, v, false);
}

static tpc_value *tensor_md(const tpc_tensor *t, const wchunk *c, size_t n)
{
	const char *tn = tpc_dtype_get(t->dtype)->torch;
	tpc_value *props = tpc_value_new(TPC_V_TUPLE), *st = tpc_value_new(TPC_V_DICT), *chunks = tpc_value_new(TPC_V_LIST);
	int bad = !props || !st || !chunks || !tn;
	/* TensorProperties.__getstate__: (dtype, layout, requires_grad, memory_format, pin_memory) */
	bad = bad || tpc_value_append(props, tpc_value_global("torch", tn ? tn : "?"));
	bad = bad || tpc_value_append(props, wcall("torch.serialization", "_get_layout", tpc_value_str("torch.strided", 13)));
	bad = bad || tpc_value_append(props, tpc_value_bool(0));
	bad = bad || tpc_value_append(props, wcall(META_MOD, "_MEM_FORMAT_ENCODING", tpc_value_int(0)));
	bad = bad || tpc_value_append(props, tpc_value_bool(0));
	for (size_t k = 0; k < n && !bad; k++) {
		tpc_value *cst = tpc_value_new(TPC_V_DICT);
		bad = !cst || wset(cst, "offsets", wbox(t, &c[k], false)) || wset(cst, "sizes", wbox(t, &c[k], true));
		if (bad)
			tpc_value_unref(cst);
		else
			bad = tpc_value_append(chunks, wobj(META_MOD, "ChunkStorageMetadata", cst));
	}
	if (!bad) {
		bad = wset(st, "properties", wobj(META_MOD, "TensorProperties", props));
		props = NULL;
	}
	bad = bad || wset(st, "size", wsize(t->ndim, t->shape, false));
	if (!bad) {
		bad = wset(st, "chunks", chunks);
		chunks = NULL;
	}
	tpc_value_unref(props);
	tpc_value_unref(chunks);
	if (bad) {
		tpc_value_unref(st);
		return NULL;
	}
	return wobj(META_MOD, "TensorStorageMetadata", st);
}

/* Append one item to `out`: torch.save of tensor i (i >= 0) or of the value v,
 * streamed in at out's position with its zip offsets running from the item's
 * own start, as torch reads an item (a BytesIO of its bytes) and names it
 * (the "archive" of torch.save into a stream). *off and *len get where it
 * lies in out. */
static int put_item(tpc_out *out, const tpc_ckpt *ck, int64_t i, const tpc_value *v, const tpc_write_opts *o,
		    uint64_t *off, uint64_t *len, tpc_err *e)
{
	static const int64_t no_tensor = -1; /* sel with none selected (NULL means all) */
	tpc_write_opts wo = {.progress = o ? o->progress : NULL};
	tpc_value *leaf = i >= 0 ? tpc_value_tensor(i) : NULL;
	int ret;
	if (i >= 0 && !leaf)
		return tpc_err_nomem(e);
	*off = out->size;
	ret = tpc__torch_write_into(ck, i >= 0 ? &i : &no_tensor, i >= 0 ? 1 : 0, leaf ? leaf : v, out, "archive", &wo,
				    e);
	tpc_value_unref(leaf);
	*len = out->size - *off;
	return ret;
}

/* The chunks of every item, in item order. Without ranks (or ranks 1),
 * each item whole in __0_0.distcp. With ranks N, what N processes holding
 * every tensor Shard(0) on a 1-D mesh save (FSDP2's fully_shard; DTensor's
 * Shard._split_tensor cuts as torch.chunk does: ceil(rows / N) rows each,
 * the last ranks shorter or empty, an empty piece not saved): rank r's rows
 * in __r_0.distcp, each a view in sc; scalars, empty tensors and bytes items
 * whole on rank 0 (the one copy torch's dedup_save_plans keeps of a
 * replicated item). A parameter and its moments have one shape, so they are
 * cut alike. */
static int plan_chunks(const tpc_ckpt *ck, const wlist *l, int ranks, tpc_ckpt *sc, wchunk **out, size_t *nout,
		       tpc_err *e)
{
	wchunk *c = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;
	for (size_t k = 0; k < l->n && !ret; k++) {
		const witem *w = &l->v[k];
		const tpc_tensor *t = w->tensor >= 0 ? &ck->t[w->tensor] : NULL;
		bool cut = t && ranks > 1 && t->ndim > 0 && t->shape[0] > 1;
		int64_t per = cut ? (t->shape[0] + ranks - 1) / ranks : 0;
		for (int r = 0; r < (cut ? ranks : 1) && !ret; r++) {
			int64_t off = (int64_t)r * per, len = cut ? t->shape[0] - off : 0;
			if (len > per)
				len = per;
			if (cut && len <= 0)
				break;
			if (tpc_grow((void **)&c, &cap, n + 1, sizeof(*c))) {
				ret = tpc_err_nomem(e);
				break;
			}
			wchunk *ch = &c[n++];
			memset(ch, 0, sizeof(*ch));
			ch->item = k;
			ch->rank = r;
			ch->off0 = off;
			ch->len0 = len;
			ch->sc = -1;
			if (!cut)
				continue;
			tpc_tensor v;
			char nm[64];
			if (tpc_tensor_narrow(&v, t, 0, off, len)) {
				ret = tpc_err_nomem(e);
				break;
			}
			snprintf(nm, sizeof(nm), "%zu/%d", k, r);
			int64_t ix = tpc_ckpt_add_copy(sc, nm, &v, e);
			tpc_tensor_release(&v);
			if (ix < 0) {
				ret = (int)ix;
				break;
			}
			sc->t[ix].storage = -1; /* ck's storages are not sc's */
			sc->t[ix].storage_offset = 0;
			ch->sc = ix;
		}
	}
	*out = c;
	*nout = n;
	return ret;
}

static char *rank_file(int r)
{
	char fn[48];
	snprintf(fn, sizeof(fn), "__%d_0.distcp", r);
	return tpc_strdup(fn);
}

/* Rank r's file: its bytes items, then its tensor chunks, in the order
 * torch writes them; each chunk's place recorded. On success *done takes
 * the committed path. */
static int write_rank(const tpc_ckpt *ck, const tpc_ckpt *sc, const wlist *l, wchunk *c, size_t n, int r,
		      const char *dir, const tpc_write_opts *o, char **done, tpc_err *e)
{
	char *fn = rank_file(r), *fpath = fn ? tpc_path_join(dir, fn) : NULL;
	unsigned force = o && (o->flags & TPC_W_FORCE) ? TPC_OUT_FORCE : 0;
	tpc_out out;
	int ret;
	memset(&out, 0, sizeof(out));
	out.fd = -1;
	free(fn);
	if (!fpath)
		return tpc_err_nomem(e);
	ret = tpc_out_open(&out, fpath, force, e);
	for (int tensors = 0; tensors < 2 && !ret; tensors++)
		for (size_t k = 0; k < n && !ret; k++) {
			const witem *w = &l->v[c[k].item];
			if (c[k].rank != r || (w->tensor >= 0) != tensors)
				continue;
			ret = c[k].sc >= 0 ? put_item(&out, sc, c[k].sc, NULL, o, &c[k].foff, &c[k].flen, e)
					   : put_item(&out, ck, w->tensor, w->value, o, &c[k].foff, &c[k].flen, e);
			if (ret && !e->tensor[0])
				tpc_err_tensor(e, w->fqn);
		}
	if (!ret && !(ret = tpc_out_commit(&out, e))) {
		*done = fpath;
		fpath = NULL;
	}
	tpc_out_abort(&out);
	free(fpath);
	return ret;
}

/* .metadata's three maps for the items and their chunks: each entry, its
 * path, where each of its chunks lies. */
static int meta_maps(const tpc_ckpt *ck, const wlist *l, const wchunk *c, size_t n, tpc_value *sdm, tpc_value *pd,
		     tpc_value *sd, tpc_err *e)
{
	int bad = 0;
	for (size_t k = 0, first = 0; k < n && !bad; k++) {
		const witem *w = &l->v[c[k].item];
		const tpc_tensor *t = w->tensor >= 0 ? &ck->t[w->tensor] : NULL;
		if (k && c[k].item != c[k - 1].item)
			first = k;
		char *fn = rank_file(c[k].rank);
		tpc_value *ist = tpc_value_new(TPC_V_DICT), *sst = tpc_value_new(TPC_V_DICT);
		bad = !fn || !ist || !sst;
		bad = bad || wset(ist, "fqn", tpc_value_str(w->fqn, strlen(w->fqn)));
		if (!bad && t)
			bad = wset(ist, "offset", wbox(t, &c[k], false)) || wset(ist, "index", tpc_value_int((int64_t)(k - first)));
		else if (!bad)
			bad = wset(ist, "offset", tpc_value_new(TPC_V_NONE)) || wset(ist, "index", tpc_value_new(TPC_V_NONE));
		bad = bad || wset(sst, "relative_path", tpc_value_str(fn, strlen(fn)));
		bad = bad || wset(sst, "offset", tpc_value_int((int64_t)c[k].foff)) ||
		      wset(sst, "length", tpc_value_int((int64_t)c[k].flen));
		free(fn);
		tpc_value *mi = bad ? NULL : wobj(META_MOD, "MetadataIndex", ist);
		tpc_value *si = bad ? NULL : wobj("torch.distributed.checkpoint.filesystem", "_StorageInfo", sst);
		if (bad) {
			tpc_value_unref(ist);
			tpc_value_unref(sst);
		}
		bad = bad || !mi || !si || tpc_value_set(sd, mi, si);
		if (bad || (k + 1 < n && c[k + 1].item == c[k].item))
			continue; /* the entry once, after its last chunk */
		tpc_value *entry = t ? tensor_md(t, &c[first], k + 1 - first)
				     : wobj(META_MOD, "BytesStorageMetadata", tpc_value_new(TPC_V_DICT));
		bad = !entry || wset(sdm, w->fqn, entry);
		bad = bad || wset(pd, w->fqn, tpc_value_ref(w->path));
	}
	return bad ? tpc_err_nomem(e) : 0;
}

static int dcp_write(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *dir, const tpc_write_opts *o,
		     tpc_err *e)
{
	wlist l = {NULL, 0, 0};
	tpc_buf name = TPC_BUF_INIT, pk = TPC_BUF_INIT;
	tpc_value *path = tpc_value_new(TPC_V_TUPLE), *sdm = tpc_value_new(TPC_V_DICT);
	tpc_value *pd = tpc_value_new(TPC_V_DICT), *sd = tpc_value_new(TPC_V_DICT), *md = NULL;
	char *mpath = tpc_path_join(dir, TPC_DCP_META);
	int ranks = o && o->dcp_ranks > 1 ? o->dcp_ranks : 1;
	char **done = tpc_calloc((size_t)ranks, sizeof(char *));
	unsigned force = o && (o->flags & TPC_W_FORCE) ? TPC_OUT_FORCE : 0;
	wchunk *c = NULL;
	size_t nc = 0;
	tpc_ckpt sc;
	int ret = 0;
	tpc_ckpt_init(&sc);
	if (!path || !sdm || !pd || !sd || !mpath || !done) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = tpc_ckpt_check_writable(ck, e)))
		goto out;
	if (tpc_exists(dir) && !tpc_is_dir(dir)) {
		ret = tpc_err_at(e, TPC_EUSAGE, dir, NULL, "output exists and is not a folder");
		goto out;
	}
	if (tpc_exists(mpath) && !force) {
		ret = tpc_err_at(e, TPC_EUSAGE, mpath, NULL, "output folder already holds a DCP checkpoint; use --force to replace it");
		goto out;
	}
	if ((ret = tpc_mkdirs(dir, e)))
		goto out;
	tpc_out_sweep(dir); /* a killed run's temporaries */
	/* the items: the tree when it names every tensor, else the tensors by name */
	if (!sel && ck->root && tpc__torch_tree_matches(ck)) {
		ret = flatten(&l, ck->root, path, &name, 0, e);
	} else {
		for (size_t k = 0; k < (sel ? nsel : ck->n) && !ret; k++) {
			int64_t i = sel ? sel[k] : (int64_t)k;
			tpc_value *key = tpc_value_str(ck->t[i].name, strlen(ck->t[i].name));
			if (!key || tpc_value_append(path, key)) {
				ret = tpc_err_nomem(e);
				break;
			}
			ret = add_item(&l, ck->t[i].name, path, i, NULL, e);
			tpc_value_unref(path->items[--path->n]);
		}
	}
	if (!ret && !(ret = tpc_ckpt_borrow_sources(&sc, ck, e)))
		ret = plan_chunks(ck, &l, ranks, &sc, &c, &nc, e);
	/* the rank files, then .metadata last */
	for (int r = 0; r < ranks && !ret; r++)
		ret = write_rank(ck, &sc, &l, c, nc, r, dir, o, &done[r], e);
	if (!ret)
		ret = meta_maps(ck, &l, c, nc, sdm, pd, sd, e);
	if (ret)
		goto out;
	{
		tpc_value *st = tpc_value_new(TPC_V_DICT);
		int bad = !st || wset(st, "state_dict_metadata", tpc_value_ref(sdm)) ||
			  wset(st, "planner_data", tpc_value_ref(pd)) || wset(st, "storage_data", tpc_value_ref(sd)) ||
			  wset(st, "storage_meta", tpc_value_new(TPC_V_NONE));
		if (bad) {
			tpc_value_unref(st);
			ret = tpc_err_nomem(e);
			goto out;
		}
		md = wobj(META_MOD, "Metadata", st);
	}
	tpc_pickle_writer pw;
	tpc_pickle_writer_init(&pw, &pk);
	ret = md ? tpc_pickle_write(&pw, md, e) : tpc_err_nomem(e);
	tpc_pickle_writer_release(&pw);
	if (!ret)
		ret = tpc_write_file_atomic(mpath, pk.p, pk.len, force, e);
out:
	for (int r = 0; done && r < ranks; r++) {
		if (ret && done[r])
			unlink(done[r]); /* complete or absent */
		free(done[r]);
	}
	free(done);
	free(c);
	tpc_ckpt_release(&sc);
	for (size_t k = 0; k < l.n; k++) {
		free(l.v[k].fqn);
		tpc_value_unref(l.v[k].path);
	}
	free(l.v);
	tpc_buf_release(&name);
	tpc_buf_release(&pk);
	tpc_value_unref(path);
	tpc_value_unref(sdm);
	tpc_value_unref(pd);
	tpc_value_unref(sd);
	tpc_value_unref(md);
	free(mpath);
	return ret;
}

/* ---- writing part by part: the dcp shard-set layout ----
 *
 * shard/layout_dcp.c writes one DCP checkpoint for a whole shard set: rank r's
 * chunks as items back to back in __r_0.distcp (what each rank of a real
 * distributed save writes), then, once every rank file is there, .metadata
 * over all of them. An item is a complete torch.save archive of one bare
 * tensor with its offsets relative to its own start (torch reads each item
 * as a BytesIO of [offset, offset + length)); each is streamed into the part
 * file by the torch writer (put_item). */

static int dcp_write_part(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *path,
			  const tpc_write_opts *o, tpc_err *e)
{
	tpc_out out;
	int ret = 0;
	memset(&out, 0, sizeof(out));
	out.fd = -1;
	if (!sel)
		nsel = ck->n;
	if ((ret = tpc_out_open(&out, path, o && (o->flags & TPC_W_FORCE) ? TPC_OUT_FORCE : 0, e)))
		return ret;
	for (size_t k = 0; k < nsel && !ret; k++) {
		int64_t i = sel ? sel[k] : (int64_t)k;
		uint64_t off, len;
		ret = put_item(&out, ck, i, NULL, o, &off, &len, e);
		if (ret && !e->tensor[0])
			tpc_err_tensor(e, ck->t[i].name);
	}
	if (!ret)
		ret = tpc_out_commit(&out, e);
	tpc_out_abort(&out);
	return ret;
}

#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define MAX_PART_ITEMS (1u << 24)

/* Where the zip archive that ends at `end` of p starts: from its end records
 * (zip64 when its locator is there), the central directory's offset within the
 * archive plus its size lead back to the archive's first byte. Items tpconv
 * and torch write carry no archive comment. */
static int item_start(const uint8_t *p, uint64_t end, uint64_t *start, const char *path, tpc_err *e)
{
	uint64_t cd_size, cd_off, at;
	if (end < 22 || tpc_rd32le(p + end - 22) != SIG_EOCD || (p[end - 2] | p[end - 1]))
		return TPC_CORRUPT(e, path, (int64_t)end, NULL,
				   "no zip end record ends here: not a part file of items back to back");
	at = end - 22;
	if (at >= 20 + 56 && tpc_rd32le(p + at - 20) == SIG_LOC64) {
		at -= 20 + 56;
		if (tpc_rd32le(p + at) != SIG_EOCD64)
			return TPC_CORRUPT(e, path, (int64_t)at, NULL, "zip64 end record missing before its locator");
		cd_size = tpc_rd64le(p + at + 40);
		cd_off = tpc_rd64le(p + at + 48);
	} else {
		cd_size = tpc_rd32le(p + at + 12);
		cd_off = tpc_rd32le(p + at + 16);
	}
	if (cd_size > at || cd_off > at - cd_size)
		return TPC_CORRUPT(e, path, (int64_t)at, NULL,
				   "zip end record puts the central directory (%llu bytes at %llu) before the file's start",
				   (unsigned long long)cd_size, (unsigned long long)cd_off);
	*start = at - cd_size - cd_off;
	return 0;
}

static int part_items_src(tpc_ckpt *ck, int src, const char *path, uint64_t **off, uint64_t **len, size_t *n,
			  tpc_err *e);

static int dcp_part_items(tpc_ckpt *ck, const char *path, uint64_t **off, uint64_t **len, size_t *n, tpc_err *e)
{
	int src, ret;
	struct stat st;
	*off = *len = NULL;
	*n = 0;
	if (stat(path, &st) != 0) {
		tpc_err_sys(e, TPC_EINPUT, errno, "cannot read part file");
		tpc_err_path(e, path);
		return TPC_EINPUT;
	}
	if (st.st_size == 0)
		return 0; /* a part of no items */
	if ((ret = tpc_ckpt_add_file(ck, path, &src, e)))
		return ret;
	/* only the records between the items are read: no read-around of
	 * their tensor bytes (a file written with direct writes is not in the
	 * page cache) */
	tpc_map_advise_random(tpc_ckpt_source(ck, src));
	return part_items_src(ck, src, path, off, len, n, e);
}

int tpc_dcp_part_items_from_buffer(tpc_ckpt *ck, const uint8_t *p, size_t size, const char *path, uint64_t **off,
				   uint64_t **len, size_t *n, tpc_err *e)
{
	int src, ret;
	uint8_t *copy = tpc_malloc(size ? size : 1);
	*off = *len = NULL;
	*n = 0;
	if (!copy)
		return tpc_err_nomem(e);
	if (size)
		memcpy(copy, p, size);
	if ((ret = tpc_ckpt_add_mem(ck, path, copy, size, &src, e)))
		return ret;
	return size ? part_items_src(ck, src, path, off, len, n, e) : 0;
}

/* The items of the part file that is source src of ck, found from its end
 * (each is a zip: its end record says where it begins), each opened as one
 * tensor named by its position. */
static int part_items_src(tpc_ckpt *ck, int src, const char *path, uint64_t **off, uint64_t **len, size_t *n,
			  tpc_err *e)
{
	uint64_t *o = NULL, *l = NULL, end;
	size_t cap = 0, cnt = 0;
	int ret = 0;
	const tpc_map *m = tpc_ckpt_source(ck, src);
	/* the items from the last one back */
	for (end = m->size; end > 0 && !ret;) {
		uint64_t start = 0;
		if (cnt >= MAX_PART_ITEMS) {
			ret = TPC_CORRUPT(e, path, (int64_t)end, NULL, "more than %u items", MAX_PART_ITEMS);
			break;
		}
		if ((ret = item_start(m->data, end, &start, path, e)))
			break;
		if (cnt == cap) {
			uint64_t *nl = NULL;
			if (tpc_grow((void **)&o, &cap, cnt + 1, sizeof(*o)) || !(nl = tpc_realloc(l, cap * sizeof(*l)))) {
				ret = tpc_err_nomem(e);
				break;
			}
			l = nl;
		}
		o[cnt] = start;
		l[cnt++] = end - start;
		end = start;
	}
	for (size_t a = 0, b = cnt ? cnt - 1 : 0; !ret && a < b; a++, b--) {
		uint64_t t = o[a];
		o[a] = o[b];
		o[b] = t;
		t = l[a];
		l[a] = l[b];
		l[b] = t;
	}
	for (size_t k = 0; k < cnt && !ret; k++) {
		char nm[32];
		tpc_value *leaf = NULL;
		size_t before = ck->n;
		snprintf(nm, sizeof(nm), "%zu", k);
		ret = tpc__torch_open_item(ck, src, o[k], l[k], path, nm, true, &leaf, e);
		if (!ret && (ck->n != before + 1 || !leaf || leaf->kind != TPC_V_TENSOR))
			ret = TPC_CORRUPT(e, path, (int64_t)o[k], NULL, "item %zu does not hold one tensor", k);
		tpc_value_unref(leaf);
	}
	if (ret) {
		free(o);
		free(l);
		return ret;
	}
	*off = o;
	*len = l;
	*n = cnt;
	return 0;
}

static int dcp_write_index(const char *dir, const tpc_chunk *c, size_t n, const tpc_write_opts *o, tpc_err *e)
{
	tpc_value *sdm = tpc_value_new(TPC_V_DICT), *pd = tpc_value_new(TPC_V_DICT), *sd = tpc_value_new(TPC_V_DICT);
	tpc_value *md = NULL, *st = NULL;
	tpc_buf pk = TPC_BUF_INIT;
	char *mpath = tpc_path_join(dir, TPC_DCP_META);
	bool *done = tpc_calloc(n + 1, sizeof(bool));
	int ret = 0, bad = !sdm || !pd || !sd || !mpath || !done;
	/* per global tensor, in order of first appearance: its chunks */
	for (size_t i = 0; i < n && !bad; i++) {
		if (done[i])
			continue;
		const char *tn = tpc_dtype_get(c[i].dtype)->torch;
		if (!tn) {
			ret = tpc_err_at(e, TPC_EINPUT, NULL, c[i].fqn, "dtype %s cannot be written to a DCP checkpoint",
					  tpc_dtype_name(c[i].dtype));
			goto out;
		}
		tpc_value *props = tpc_value_new(TPC_V_TUPLE), *tsm = tpc_value_new(TPC_V_DICT);
		tpc_value *chunks = tpc_value_new(TPC_V_LIST), *path = tpc_value_new(TPC_V_TUPLE);
		bad = !props || !tsm || !chunks || !path;
		bad = bad || tpc_value_append(props, tpc_value_global("torch", tn));
		bad = bad || tpc_value_append(props, wcall("torch.serialization", "_get_layout", tpc_value_str("torch.strided", 13)));
		bad = bad || tpc_value_append(props, tpc_value_bool(0));
		bad = bad || tpc_value_append(props, wcall(META_MOD, "_MEM_FORMAT_ENCODING", tpc_value_int(0)));
		bad = bad || tpc_value_append(props, tpc_value_bool(0));
		for (size_t j = i, idx = 0; j < n && !bad; j++) {
			if (done[j] || strcmp(c[j].fqn, c[i].fqn))
				continue;
			if (c[j].dtype != c[i].dtype || c[j].ndim != c[i].ndim ||
			    memcmp(c[j].shape, c[i].shape, (size_t)c[i].ndim * sizeof(int64_t))) {
				ret = tpc_err_at(e, TPC_EINPUT, NULL, c[i].fqn, "internal: chunks of one tensor disagree on its dtype or shape");
				tpc_value_unref(props);
				tpc_value_unref(tsm);
				tpc_value_unref(chunks);
				tpc_value_unref(path);
				goto out;
			}
			done[j] = true;
			tpc_value *cst = tpc_value_new(TPC_V_DICT), *ist = tpc_value_new(TPC_V_DICT);
			tpc_value *sst = tpc_value_new(TPC_V_DICT);
			bad = !cst || !ist || !sst;
			bad = bad || wset(cst, "offsets", wsize(c[j].ndim, c[j].offset, false));
			bad = bad || wset(cst, "sizes", wsize(c[j].ndim, c[j].size, false));
			bad = bad || wset(ist, "fqn", tpc_value_str(c[j].fqn, strlen(c[j].fqn)));
			bad = bad || wset(ist, "offset", wsize(c[j].ndim, c[j].offset, false));
			bad = bad || wset(ist, "index", tpc_value_int((int64_t)idx++));
			bad = bad || wset(sst, "relative_path", tpc_value_str(c[j].file, strlen(c[j].file)));
			bad = bad || wset(sst, "offset", tpc_value_int((int64_t)c[j].foff));
			bad = bad || wset(sst, "length", tpc_value_int((int64_t)c[j].flen));
			tpc_value *ch = bad ? NULL : wobj(META_MOD, "ChunkStorageMetadata", cst);
			tpc_value *mi = bad ? NULL : wobj(META_MOD, "MetadataIndex", ist);
			tpc_value *si = bad ? NULL : wobj("torch.distributed.checkpoint.filesystem", "_StorageInfo", sst);
			if (bad) {
				tpc_value_unref(cst);
				tpc_value_unref(ist);
				tpc_value_unref(sst);
			}
			bad = bad || !ch || tpc_value_append(chunks, ch);
			ch = NULL;
			bad = bad || !mi || !si || tpc_value_set(sd, mi, si);
		}
		bad = bad || tpc_value_append(path, tpc_value_str(c[i].fqn, strlen(c[i].fqn)));
		if (!bad) {
			bad = wset(tsm, "properties", wobj(META_MOD, "TensorProperties", props));
			props = NULL;
		}
		bad = bad || wset(tsm, "size", wsize(c[i].ndim, c[i].shape, false));
		if (!bad) {
			bad = wset(tsm, "chunks", chunks);
			chunks = NULL;
		}
		tpc_value_unref(props);
		tpc_value_unref(chunks);
		if (!bad) {
			bad = wset(sdm, c[i].fqn, wobj(META_MOD, "TensorStorageMetadata", tsm));
			tsm = NULL;
		}
		tpc_value_unref(tsm);
		if (!bad) {
			bad = wset(pd, c[i].fqn, path);
			path = NULL;
		}
		tpc_value_unref(path);
	}
	if (!bad && (st = tpc_value_new(TPC_V_DICT))) {
		bad = wset(st, "state_dict_metadata", tpc_value_ref(sdm)) || wset(st, "planner_data", tpc_value_ref(pd)) ||
		      wset(st, "storage_data", tpc_value_ref(sd)) || wset(st, "storage_meta", tpc_value_new(TPC_V_NONE));
		md = bad ? NULL : wobj(META_MOD, "Metadata", st);
		if (bad)
			tpc_value_unref(st);
	}
	if (bad || !md) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	tpc_pickle_writer pw;
	tpc_pickle_writer_init(&pw, &pk);
	ret = tpc_pickle_write(&pw, md, e);
	tpc_pickle_writer_release(&pw);
	if (!ret)
		ret = tpc_write_file_atomic(mpath, pk.p, pk.len, o && (o->flags & TPC_W_FORCE) ? TPC_OUT_FORCE : 0, e);
out:
	tpc_buf_release(&pk);
	tpc_value_unref(sdm);
	tpc_value_unref(pd);
	tpc_value_unref(sd);
	tpc_value_unref(md);
	free(done);
	free(mpath);
	return ret;
}

static const char *const dcp_exts[] = {NULL};
static const char *const dcp_parts[] = {".distcp", NULL};

const tpc_format tpc_fmt_dcp = {
	.name = "dcp", .desc = "PyTorch Distributed Checkpoint folder (.metadata + __R_N.distcp; FSDP, torchtitan)",
	.detect = tpc__dcp_detect, .open = tpc__dcp_open, .write = dcp_write, .exts = dcp_exts,
	.part_exts = dcp_parts,
	.sharded = true, .rank_file = true,
	.write_part = dcp_write_part, .part_items = dcp_part_items, .write_index = dcp_write_index,
};
