/* torch_read.c - torch.save readers: zip (>= 1.6) and legacy (see torch.h).
 *
 * The pickle VM builds the object tree; this file interprets the few calls
 * that make tensors (_rebuild_tensor_v2 and friends) and the persistent ids
 * that name storages. A tensor becomes a description over the storage bytes
 * in the mapping (or an inflated record), checked to lie inside its storage;
 * nothing is copied. Tensors are named by walking the finished tree, so a
 * tensor pickled once and referenced twice (tied weights) gives two names
 * over one storage. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "pickle.h"
#include "torch.h"
#include "dcp_int.h"
#include "tpc_io.h"
#include "tpc_util.h"
#include "tpc_zip.h"

/* The legacy format's first pickle is the magic number 0x1950a86a20f9469cfc6c
 * (these are its little-endian bytes) in whatever encoding the pickle
 * protocol gives it: LONG1 after PROTO 2 or 3, the same inside a FRAME for 4
 * and 5, a text LONG "L1195...356L" for 0 and 1. So the first pickle is
 * loaded, not compared with one protocol's bytes. */
static const uint8_t legacy_magic_le[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
#define LEGACY_MAGIC_HEX "0x1950a86a20f9469cfc6c"
#define LEGACY_MAGIC_MAX 32 /* bytes: 28 in protocol 0-1, 24 in 4-5, 15 in 2-3 */

/* A tensor seen in the pickle, before it has a name. Its TENSOR leaf holds
 * PEND_VAL(index) (negative) until naming replaces it with a checkpoint index,
 * so a leaf that naming never reached (inside a foreign object) stays
 * recognisable. */
#define PEND_VAL(i) (-(int64_t)(i)-1)
#define PEND_IX(v) ((size_t)(-(v)-1))
typedef struct pend {
	int64_t storage;   /* index into ck->st */
	int64_t soff;      /* storage offset, in elements */
	int ndim;
	int64_t *shape;    /* 2*ndim: shape then stride */
	tpc_dtype dtype;
	uint32_t flags;
	tpc_value *meta;   /* quantizer parameters */
	const char *unsupported;
} pend;

typedef struct reader {
	tpc_ckpt *ck;
	const char *path;
	int src;
	tpc_zip *z; /* NULL for legacy */
	const tpc_open_opts *o;
	pend *p;
	size_t np, capp;
	tpc__strmap keys;       /* storage key -> index in ck->st */
	int64_t *legacy_numel;  /* legacy: numel from the pid, per storage */
	size_t nlegacy, caplegacy;
	uint64_t inflate_cap;
	/* An item inside a larger source (a DCP .distcp file): the zip starts at
	 * byte `base` of source `src`; tensor names start with `prefix`, and the
	 * object tree goes to *root_out instead of ck->root. */
	uint64_t base;
	const char *prefix;
	tpc_value **root_out;
} reader;

/* Load the first pickle of p[0..n) as plain data (no globals, a few values
 * at most): 1 when it is the magic number (*used = its length in bytes), 0
 * when it is another value, or a negative status with `e` saying why it does
 * not load. */
static int legacy_magic(const uint8_t *p, uint64_t n, const char *path, uint64_t *used, tpc_err *e)
{
	tpc_pickle_opts po;
	tpc_value *v = NULL;
	tpc_pickle_opts_init(&po);
	po.path = path;
	po.policy = TPC_PICKLE_REFUSE_UNKNOWN;
	po.max_stack = po.max_marks = po.max_memo = po.max_objects = po.max_str = po.max_tree = 64;
	po.max_depth = 4;
	int ret = tpc_pickle_load_from_buffer(p, n, &po, &v, used, e);
	if (ret)
		return ret;
	bool magic = v->kind == TPC_V_BIGINT && v->len >= sizeof(legacy_magic_le) &&
		     !memcmp(v->str, legacy_magic_le, sizeof(legacy_magic_le));
	for (size_t i = sizeof(legacy_magic_le); magic && i < v->len; i++)
		magic = !v->str[i]; /* sign extension of a positive number */
	tpc_value_unref(v);
	return magic;
}

/* A line of what inspect says about the checkpoint (ck->about), once. */
static int about_line(tpc_ckpt *ck, tpc_err *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int about_line(tpc_ckpt *ck, tpc_err *e, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	for (const char *a = ck->about; a && (a = strstr(a, line)); a++)
		if ((a == ck->about || a[-1] == '\n') && (!a[strlen(line)] || a[strlen(line)] == '\n'))
			return 0;
	tpc_buf b = TPC_BUF_INIT;
	if (ck->about)
		tpc_buf_addf(&b, "%s\n", ck->about);
	tpc_buf_adds(&b, line);
	if (b.oom) {
		tpc_buf_release(&b);
		return tpc_err_nomem(e);
	}
	tpc_ckpt_set_about(ck, &b);
	return 0;
}

/* inspect's note on bytes after the end of what torch reads, which torch
 * ignores: the offset in the file, and the file when ck has several. */
static int trailing_note(reader *r, uint64_t n, const char *after, uint64_t at, tpc_err *e)
{
	const char *base = tpc_path_base(r->path);
	return about_line(r->ck, e, "trailing bytes: %llu after the %s, at offset %llu%s%s%s (ignored, as torch.load does)",
			  (unsigned long long)n, after, (unsigned long long)at, r->ck->nsrc > 1 ? " of '" : "",
			  r->ck->nsrc > 1 ? base : "", r->ck->nsrc > 1 ? "'" : "");
}

static const char *sstr(const tpc_value *v)
{
	return v && v->kind == TPC_V_STR ? v->str : NULL;
}

static bool get_int(const tpc_value *v, int64_t *out)
{
	if (!v || (v->kind != TPC_V_INT && v->kind != TPC_V_BOOL))
		return false;
	*out = v->ival;
	return true;
}

/* ---- storages (persistent ids) ---- */

static tpc_dtype storage_dtype(const char *klass)
{
	if (!strncmp(klass, "torch.", 6)) {
		const char *k = klass + 6;
		if (!strcmp(k, "storage.UntypedStorage") || !strcmp(k, "UntypedStorage"))
			return TPC_U8;
		return tpc_dtype_from_storage(k);
	}
	return TPC_DT_INVALID;
}

static int persistent_load(void *ctx, tpc_value *pid, tpc_value **out, tpc_err *e)
{
	reader *r = ctx;
	tpc_ckpt *ck = r->ck;
	if (!pid || pid->kind != TPC_V_TUPLE || pid->n < 5 || !sstr(pid->items[0]) ||
	    strcmp(pid->items[0]->str, "storage"))
		return TPC_CORRUPT(e, r->path, -1, NULL,
				   "persistent id is not a ('storage', class, key, location, numel) tuple");
	const tpc_value *cls = pid->items[1];
	const char *key = sstr(pid->items[2]);
	const char *loc = sstr(pid->items[3]);
	int64_t numel;
	if (!cls || cls->kind != TPC_V_GLOBAL || !key || !get_int(pid->items[4], &numel) || numel < 0)
		return TPC_CORRUPT(e, r->path, -1, NULL,
				   "malformed storage persistent id (class, key, location, numel)");
	if (r->z && pid->n != 5)
		return TPC_CORRUPT(e, r->path, -1, NULL, "storage persistent id has %zu fields, expected 5",
				   pid->n);
	if (!r->z && pid->n >= 6 && pid->items[5]->kind != TPC_V_NONE)
		return TPC_CORRUPT(e, r->path, -1, NULL,
				   "storage '%s' is a legacy storage view (view_metadata), which is not supported",
				   key);
	tpc_dtype dt = storage_dtype(cls->str);
	if (!dt)
		return TPC_CORRUPT(e, r->path, -1, NULL, "unknown storage class '%s' for storage '%s'",
				   cls->str, key);
	uint64_t *have = tpc__strmap_get(&r->keys, key, strlen(key));
	int64_t ix;
	if (have) {
		ix = (int64_t)*have;
		if (ck->st[ix].dtype != dt)
			return TPC_CORRUPT(e, r->path, -1, NULL,
					   "storage '%s' is used as both %s and %s", key,
					   tpc_dtype_name(ck->st[ix].dtype), tpc_dtype_name(dt));
	} else {
		uint64_t nbytes;
		if (tpc_mul_u64((uint64_t)numel, tpc_dtype_size(dt), &nbytes))
			return TPC_CORRUPT(e, r->path, -1, NULL, "storage '%s' size overflows", key);
		int src = r->src;
		uint64_t off = 0;
		if (r->z) {
			char rec[600];
			if ((size_t)snprintf(rec, sizeof(rec), "data/%s", key) >= sizeof(rec))
				return TPC_CORRUPT(e, r->path, -1, NULL, "storage key '%.40s...' is longer than %zu bytes",
						   key, sizeof(rec) - 6);
			const tpc_zip_entry *ent = tpc_zip_find(r->z, rec);
			if (!ent)
				return TPC_CORRUPT(e, r->path, -1, NULL,
						   "storage '%s' has no record '%s/data/%s' in the archive", key,
						   tpc_zip_prefix(r->z), key);
			if (ent->usize < nbytes)
				return TPC_CORRUPT(e, r->path, (int64_t)(r->base + ent->header_offset), NULL,
						   "storage '%s' claims %lld elements (%llu bytes) but its record holds %llu bytes",
						   key, (long long)numel, (unsigned long long)nbytes,
						   (unsigned long long)ent->usize);
			if (ent->method == TPC_ZIP_STORED) {
				off = r->base + ent->data_offset;
			} else if (ent->usize > nbytes) {
				/* inflated bytes are held in memory: never more than the
				 * storage needs (a small record claiming a huge expansion) */
				return TPC_CORRUPT(e, r->path, (int64_t)(r->base + ent->header_offset), NULL,
						   "storage '%s' needs %llu bytes but its compressed record '%s' inflates to %llu; "
						   "refusing to inflate more than the storage holds (a zip bomb?)",
						   key, (unsigned long long)nbytes, ent->name,
						   (unsigned long long)ent->usize);
			} else {
				uint8_t *mem = NULL;
				uint64_t len = 0;
				int rc = tpc_zip_inflate(r->z, ent, r->inflate_cap, &mem, &len, e);
				if (rc)
					return rc;
				char label[700];
				snprintf(label, sizeof(label), "%s:%s", r->path, ent->name);
				if ((rc = tpc_ckpt_add_mem(ck, label, mem, len, &src, e)))
					return rc;
			}
		}
		ix = tpc_ckpt_add_storage(ck, key, loc, dt, src, off, nbytes, e);
		if (ix < 0)
			return (int)ix;
		if (tpc__strmap_put(&r->keys, key, strlen(key), (uint64_t)ix))
			return tpc_err_nomem(e);
		if (!r->z) {
			if (tpc_grow((void **)&r->legacy_numel, &r->caplegacy, (size_t)ix + 1, sizeof(int64_t)))
				return tpc_err_nomem(e);
			r->legacy_numel[ix] = numel;
			r->nlegacy = (size_t)ix + 1;
		}
	}
	tpc_value *v = tpc_value_new(TPC_V_STORAGE);
	if (!v)
		return tpc_err_nomem(e);
	v->ival = ix;
	if (tpc_value_append(v, tpc_value_ref(pid))) {
		tpc_value_unref(v);
		return tpc_err_nomem(e);
	}
	*out = v;
	return 0;
}

/* ---- tensors (REDUCE of the rebuild functions) ---- */

static int new_pend(reader *r, pend **out, tpc_value **val, tpc_err *e)
{
	if (tpc_grow((void **)&r->p, &r->capp, r->np + 1, sizeof(*r->p)))
		return tpc_err_nomem(e);
	pend *p = &r->p[r->np];
	memset(p, 0, sizeof(*p));
	p->storage = -1;
	*val = tpc_value_tensor(PEND_VAL(r->np));
	if (!*val)
		return tpc_err_nomem(e);
	r->np++;
	*out = p;
	return 0;
}

static int int_tuple(reader *r, const tpc_value *v, int64_t *dst, int *n, const char *what, tpc_err *e)
{
	if (!v || v->kind != TPC_V_TUPLE || v->n > TPC_MAX_NDIM)
		return TPC_CORRUPT(e, r->path, -1, NULL, "tensor %s is not a tuple of at most %d integers",
				   what, TPC_MAX_NDIM);
	for (size_t i = 0; i < v->n; i++)
		if (!get_int(v->items[i], &dst[i]))
			return TPC_CORRUPT(e, r->path, -1, NULL, "tensor %s holds a non-integer", what);
	*n = (int)v->n;
	return 0;
}

/* storage, offset, size, stride: the common head of the rebuild functions. */
static int rebuild(reader *r, tpc_value *args, tpc_dtype dtype, tpc_value **out, pend **pp, tpc_err *e)
{
	int64_t size[TPC_MAX_NDIM], stride[TPC_MAX_NDIM], off;
	int ns = 0, nt = 0, ret;
	pend *p;
	if (!args || args->kind != TPC_V_TUPLE || args->n < 4)
		return TPC_CORRUPT(e, r->path, -1, NULL, "tensor rebuild call has too few arguments");
	tpc_value *st = args->items[0];
	if (!st || st->kind != TPC_V_STORAGE)
		return TPC_CORRUPT(e, r->path, -1, NULL, "tensor rebuild call without a storage");
	if (!get_int(args->items[1], &off) || off < 0)
		return TPC_CORRUPT(e, r->path, -1, NULL, "tensor storage offset is not a non-negative integer");
	if ((ret = int_tuple(r, args->items[2], size, &ns, "size", e)) ||
	    (ret = int_tuple(r, args->items[3], stride, &nt, "stride", e)))
		return ret;
	if (ns != nt)
		return TPC_CORRUPT(e, r->path, -1, NULL, "tensor size has %d dimensions but stride has %d", ns, nt);
	for (int d = 0; d < ns; d++)
		if (size[d] < 0 || stride[d] < 0)
			return TPC_CORRUPT(e, r->path, -1, NULL, "negative size or stride in dimension %d", d);
	if ((ret = new_pend(r, &p, out, e)))
		return ret;
	p->storage = st->ival;
	p->soff = off;
	if (args->n > 4 && args->items[4]->kind == TPC_V_BOOL && args->items[4]->ival)
		p->flags |= TPC_TF_REQUIRES_GRAD;
	p->ndim = ns;
	p->dtype = dtype ? dtype : r->ck->st[st->ival].dtype;
	p->shape = tpc_calloc((size_t)(2 * ns), sizeof(int64_t));
	if (!p->shape)
		return tpc_err_nomem(e);
	memcpy(p->shape, size, (size_t)ns * sizeof(int64_t));
	memcpy(p->shape + ns, stride, (size_t)ns * sizeof(int64_t));
	if (pp)
		*pp = p;
	return 0;
}

static const char *const unsupported_rebuilds[][2] = {
	{"torch._utils._rebuild_sparse_tensor", "a sparse tensor"},
	{"torch._utils._rebuild_sparse_csr_tensor", "a sparse tensor"},
	{"torch._utils._rebuild_nested_tensor", "a nested tensor"},
	{"torch._utils._rebuild_meta_tensor_no_storage", "a meta tensor (no data)"},
	{"torch._utils._rebuild_wrapper_subclass", "a tensor subclass without data"},
	{"torch._utils._rebuild_device_tensor_from_numpy", "a device tensor"},
	{"torch._utils._rebuild_device_tensor_from_cpu_tensor", "a device tensor"},
	{"torch._utils._rebuild_xla_tensor", "an XLA tensor"},
	{"torch._utils._rebuild_mlc_tensor", "an MLC tensor"},
};

static int reduce_cb(void *ctx, tpc_value *callable, tpc_value *args, tpc_value **out, tpc_err *e)
{
	reader *r = ctx;
	if (!callable || callable->kind != TPC_V_GLOBAL)
		return 1;
	const char *fn = callable->str;
	if (!strcmp(fn, "torch._utils._rebuild_tensor_v2") || !strcmp(fn, "torch._utils._rebuild_tensor"))
		return rebuild(r, args, TPC_DT_INVALID, out, NULL, e);
	if (!strcmp(fn, "torch._utils._rebuild_tensor_v3")) {
		if (!args || args->kind != TPC_V_TUPLE || args->n < 7 || args->items[6]->kind != TPC_V_GLOBAL ||
		    strncmp(args->items[6]->str, "torch.", 6))
			return TPC_CORRUPT(e, r->path, -1, NULL, "_rebuild_tensor_v3 without a torch dtype");
		tpc_dtype dt = tpc_dtype_from_torch(args->items[6]->str + 6);
		if (!dt)
			return TPC_CORRUPT(e, r->path, -1, NULL, "unknown dtype '%s'", args->items[6]->str);
		pend *p;
		int ret = rebuild(r, args, dt, out, &p, e);
		if (!ret && r->ck->st[p->storage].dtype != TPC_U8 && r->ck->st[p->storage].dtype != dt)
			return TPC_CORRUPT(e, r->path, -1, NULL, "_rebuild_tensor_v3 dtype %s over a %s storage",
					   tpc_dtype_name(dt), tpc_dtype_name(r->ck->st[p->storage].dtype));
		return ret;
	}
	if (!strcmp(fn, "torch._utils._rebuild_qtensor")) {
		pend *p;
		int ret = rebuild(r, args, TPC_DT_INVALID, out, &p, e);
		if (ret)
			return ret;
		p->flags |= TPC_TF_QUANTIZED;
		if (args->n > 4)
			p->meta = tpc_value_ref(args->items[4]);
		return 0;
	}
	if (!strcmp(fn, "torch._utils._rebuild_parameter") ||
	    !strcmp(fn, "torch._utils._rebuild_parameter_with_state")) {
		if (!args || args->kind != TPC_V_TUPLE || args->n < 2 || args->items[0]->kind != TPC_V_TENSOR)
			return TPC_CORRUPT(e, r->path, -1, NULL, "%s without a tensor", fn);
		if (args->items[0]->ival >= 0)
			return TPC_CORRUPT(e, r->path, -1, NULL, "%s of a tensor that was already named", fn);
		pend *p = &r->p[PEND_IX(args->items[0]->ival)];
		p->flags |= TPC_TF_PARAMETER;
		if (args->items[1]->kind == TPC_V_BOOL && args->items[1]->ival)
			p->flags |= TPC_TF_REQUIRES_GRAD;
		*out = tpc_value_ref(args->items[0]);
		return 0;
	}
	if (!strcmp(fn, "torch._tensor._rebuild_from_type_v2") || !strcmp(fn, "torch._tensor._rebuild_from_type")) {
		/* (func, type, args, state): a plain tensor type rebuilt by func(*args) */
		if (!args || args->kind != TPC_V_TUPLE || args->n < 3)
			return TPC_CORRUPT(e, r->path, -1, NULL, "%s has too few arguments", fn);
		int ret = reduce_cb(ctx, args->items[0], args->items[2], out, e);
		if (ret == 1)
			return TPC_CORRUPT(e, r->path, -1, NULL, "%s of an unknown function", fn);
		return ret;
	}
	if (!strcmp(fn, "torch.Size")) {
		if (args && args->kind == TPC_V_TUPLE && args->n == 1 && args->items[0]->kind == TPC_V_TUPLE) {
			*out = tpc_value_ref(args->items[0]);
			return 0;
		}
		return 1;
	}
	for (size_t i = 0; i < sizeof(unsupported_rebuilds) / sizeof(unsupported_rebuilds[0]); i++)
		if (!strcmp(fn, unsupported_rebuilds[i][0])) {
			pend *p;
			int ret = new_pend(r, &p, out, e);
			if (!ret)
				p->unsupported = unsupported_rebuilds[i][1];
			return ret;
		}
	return 1;
}

static int build_cb(void *ctx, tpc_value *obj, tpc_value *state, tpc_err *e)
{
	(void)ctx;
	(void)state;
	(void)e;
	/* Parameter attributes or a tensor's __dict__: nothing tpconv carries. */
	return obj && obj->kind == TPC_V_TENSOR ? 0 : 1;
}

/* ---- naming: walk the tree ---- */

#define MAX_NAME_DEPTH 512

static int walk(tpc_value **slot, tpc_buf *name, int depth, tpc__leaf_fn fn, void *ctx, tpc_err *e)
{
	tpc_value *v = *slot;
	int ret = 0;
	if (!v)
		return 0;
	if (v->kind == TPC_V_TENSOR)
		return fn(ctx, name->p ? name->p : "", slot, e);
	if (v->kind != TPC_V_DICT && v->kind != TPC_V_LIST && v->kind != TPC_V_TUPLE)
		return 0;
	if (depth > MAX_NAME_DEPTH)
		return tpc_err_set(e, TPC_EINPUT, "containers nested more than %d deep", MAX_NAME_DEPTH);
	size_t base = name->len;
	for (size_t i = 0; i < v->n && !ret; i++) {
		if (base)
			tpc_buf_addc(name, '.');
		if (v->kind == TPC_V_DICT) {
			const tpc_value *k = v->keys[i];
			switch (k->kind) {
			case TPC_V_STR: tpc_buf_add(name, k->str, k->len); break;
			case TPC_V_INT: tpc_buf_addf(name, "%lld", (long long)k->ival); break;
			case TPC_V_BOOL: tpc_buf_adds(name, k->ival ? "True" : "False"); break;
			case TPC_V_NONE: tpc_buf_adds(name, "None"); break;
			case TPC_V_FLOAT: tpc_buf_addf(name, "%.17g", k->fval); break;
			default: tpc_buf_adds(name, "?"); break;
			}
		} else {
			tpc_buf_addf(name, "%zu", i);
		}
		if (name->oom)
			return tpc_err_nomem(e);
		ret = walk(&v->items[i], name, depth + 1, fn, ctx, e);
		name->len = base;
		if (name->p)
			name->p[base] = '\0';
	}
	return ret;
}

int tpc__torch_walk(tpc_value **root, tpc__leaf_fn fn, void *ctx, tpc_err *e)
{
	return tpc__torch_walk_from(root, "", fn, ctx, e);
}

int tpc__torch_walk_from(tpc_value **root, const char *prefix, tpc__leaf_fn fn, void *ctx, tpc_err *e)
{
	tpc_buf name = TPC_BUF_INIT;
	tpc_buf_adds(&name, prefix);
	int ret = walk(root, &name, 0, fn, ctx, e);
	tpc_buf_release(&name);
	return ret;
}

typedef struct match_ctx {
	const tpc_ckpt *ck;
	uint8_t *seen;
	size_t count;
	bool ok;
} match_ctx;

/* Every leaf names the tensor it points at, and no tensor is reached twice. */
static int match_leaf(void *ctx, const char *name, tpc_value **slot, tpc_err *e)
{
	match_ctx *m = ctx;
	int64_t i = (*slot)->ival;
	(void)e;
	if (i < 0 || (size_t)i >= m->ck->n || m->seen[i] || strcmp(m->ck->t[i].name, name))
		m->ok = false;
	else
		m->seen[i] = 1;
	m->count++;
	return m->ok ? 0 : 1;
}

bool tpc__torch_tree_matches(const tpc_ckpt *ck)
{
	match_ctx m = {ck, NULL, 0, true};
	tpc_err e;
	tpc_value *root = ck->root;
	if (!root || !(m.seen = tpc_calloc(ck->n, 1)))
		return false;
	tpc_err_init(&e);
	tpc__torch_walk(&root, match_leaf, &m, &e);
	free(m.seen);
	return m.ok && m.count == ck->n;
}

/* ---- finishing: pending tensors -> named checkpoint tensors ---- */

static int dequantize(reader *r, int64_t ix, tpc_err *e);

static int name_leaf(void *ctx, const char *name, tpc_value **slot, tpc_err *e)
{
	reader *r = ctx;
	tpc_ckpt *ck = r->ck;
	int64_t v = (*slot)->ival;
	if (v >= 0 || PEND_IX(v) >= r->np) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "the same tensor object appears twice under one name");
	}
	pend *p = &r->p[PEND_IX(v)];
	if (p->unsupported) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "%s, which tpconv does not support", p->unsupported);
	}
	tpc_storage *s = &ck->st[p->storage];
	unsigned es = tpc_dtype_size(p->dtype);
	uint64_t off;
	if (tpc_mul_u64((uint64_t)p->soff, es, &off) || tpc_add_u64(off, s->offset, &off)) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "storage offset overflows");
	}
	int64_t ix = tpc_ckpt_add_tensor(ck, name, p->dtype, p->ndim, p->shape, p->shape + p->ndim, s->src,
					 off, e);
	if (ix < 0) {
		tpc_err_path(e, r->path);
		return (int)ix;
	}
	tpc_tensor *t = &ck->t[ix];
	t->storage = p->storage;
	t->storage_offset = p->soff;
	t->flags |= p->flags;
	t->meta = tpc_value_ref(p->meta);
	tpc_value *nv = tpc_value_tensor(ix);
	if (!nv)
		return tpc_err_nomem(e);
	tpc_value_unref(*slot);
	*slot = nv;
	return 0;
}

/* Descend `select` (dotted path) from the root: dict keys, list indices. */
static int apply_select(reader *r, tpc_value **root, const char *sel, tpc_err *e)
{
	tpc_value *v = *root;
	char *path = tpc_strdup(sel), *save = NULL;
	int ret = 0;
	if (!path)
		return tpc_err_nomem(e);
	for (char *tok = strtok_r(path, ".", &save); tok; tok = strtok_r(NULL, ".", &save)) {
		tpc_value *next = NULL;
		if (v && v->kind == TPC_V_DICT) {
			next = tpc_value_get(v, tok);
		} else if (v && (v->kind == TPC_V_LIST || v->kind == TPC_V_TUPLE)) {
			char *end;
			unsigned long long i = strtoull(tok, &end, 10);
			if (!*end && i < v->n)
				next = v->items[i];
		}
		if (!next) {
			tpc_buf keys = TPC_BUF_INIT;
			if (v && v->kind == TPC_V_DICT)
				for (size_t i = 0; i < v->n && i < 12; i++)
					if (v->keys[i]->kind == TPC_V_STR)
						tpc_buf_addf(&keys, "%s'%s'", keys.len ? ", " : "", v->keys[i]->str);
			ret = tpc_err_at(e, TPC_EINPUT, r->path, NULL, "--select '%s': no key '%s'%s%s%s", sel, tok,
					  keys.len ? " (keys here: " : "", keys.len ? keys.p : "",
					  keys.len ? ")" : "");
			tpc_buf_release(&keys);
			goto out;
		}
		v = next;
	}
	tpc_value_ref(v);
	tpc_value_unref(*root);
	*root = v;
out:
	free(path);
	return ret;
}

/* Count TENSOR leaves that naming never reached (inside foreign objects),
 * remembering the first object's class. Iterative: trees can be deep. */
static int count_hidden(reader *r, tpc_value *root, tpc_err *e)
{
	struct item {
		tpc_value *v;
		const char *owner;
	} *st = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;
	if (!root)
		return 0;
	if (tpc_grow((void **)&st, &cap, 1, sizeof(*st)))
		return tpc_err_nomem(e);
	st[n++] = (struct item){root, NULL};
	while (n) {
		struct item it = st[--n];
		tpc_value *v = it.v;
		if (!v)
			continue;
		if (v->kind == TPC_V_TENSOR) {
			if (v->ival < 0) {
				r->ck->hidden_tensors++;
				if (!r->ck->hidden_note && it.owner)
					r->ck->hidden_note = tpc_strdup(it.owner);
			}
			continue;
		}
		const char *owner = it.owner;
		if (v->kind == TPC_V_CALL && v->n && v->items[0]->kind == TPC_V_GLOBAL) {
			owner = v->items[0]->str;
			/* NEWOBJ is copyreg.__newobj__(cls, ...): name the class */
			if (!strcmp(owner, "copyreg.__newobj__") && v->n > 1 && v->items[1]->n &&
			    v->items[1]->items[0]->kind == TPC_V_GLOBAL)
				owner = v->items[1]->items[0]->str;
		}
		tpc_value *origin = tpc_value_origin(v);
		size_t need = n + v->n + (v->keys ? v->n : 0) + 1;
		if (tpc_grow((void **)&st, &cap, need, sizeof(*st))) {
			ret = tpc_err_nomem(e);
			break;
		}
		for (size_t i = 0; i < v->n; i++) {
			st[n++] = (struct item){v->items[i], owner};
			if (v->keys)
				st[n++] = (struct item){v->keys[i], owner};
		}
		if (origin)
			st[n++] = (struct item){origin, owner};
	}
	free(st);
	return ret;
}

static int finish(reader *r, tpc_value *root, tpc_err *e)
{
	tpc_ckpt *ck = r->ck;
	int ret = 0;
	size_t first = ck->n;
	if (r->o && r->o->select && (ret = apply_select(r, &root, r->o->select, e)))
		goto out;
	if ((ret = tpc__torch_walk_from(&root, r->prefix ? r->prefix : "", name_leaf, r, e)) ||
	    (ret = count_hidden(r, root, e)))
		goto out;
	if (r->z) {
		const tpc_zip_entry *bo = tpc_zip_find(r->z, "byteorder");
		if (bo) {
			const uint8_t *p;
			uint64_t n;
			uint8_t *owned = NULL;
			if ((ret = tpc_zip_read(r->z, bo, 64, &p, &n, &owned, e)))
				goto out;
			bool big = n == 3 && !memcmp(p, "big", 3);
			bool little = n == 6 && !memcmp(p, "little", 6);
			free(owned);
			if (!big && !little) {
				ret = TPC_CORRUPT(e, r->path, (int64_t)bo->data_offset, NULL,
						  "byteorder record is neither 'little' nor 'big'");
				goto out;
			}
			if (big)
				for (size_t i = first; i < ck->n; i++)
					ck->t[i].flags |= TPC_TF_BYTESWAP;
		}
	}
	if (r->o && (r->o->flags & TPC_OPEN_DEQUANTIZE))
		for (size_t i = first; i < ck->n && !ret; i++)
			if (ck->t[i].flags & TPC_TF_QUANTIZED)
				ret = dequantize(r, (int64_t)i, e);
	if (ret)
		goto out;
	if (r->root_out) {
		*r->root_out = root;
		root = NULL;
		goto out;
	}
	if (ck->root) { /* several files (HF shards): the caller merges trees */
		tpc_value_unref(ck->root);
	}
	ck->root = root;
	root = NULL;
out:
	tpc_value_unref(root);
	return ret;
}

/* ---- dequantization (--dequantize) ---- */

static double qvalue(const uint8_t *p, tpc_dtype dt, uint64_t i)
{
	switch (dt) {
	case TPC_QINT8: return (double)(int8_t)p[i];
	case TPC_QUINT8: return (double)p[i];
	case TPC_QINT32: {
		int32_t v;
		memcpy(&v, p + 4 * i, 4);
		return (double)v;
	}
	default: return 0;
	}
}

static int dequantize(reader *r, int64_t ix, tpc_err *e)
{
	tpc_ckpt *ck = r->ck;
	tpc_tensor *t = &ck->t[ix];
	tpc_value *q = t->meta;
	uint8_t *raw = NULL;
	float *out = NULL;
	int ret = 0, src;
	if (t->dtype != TPC_QINT8 && t->dtype != TPC_QUINT8 && t->dtype != TPC_QINT32) {
		tpc_err_set(e, TPC_EINPUT, "cannot dequantize %s", tpc_dtype_name(t->dtype));
		goto fail;
	}
	if (!q || q->kind != TPC_V_TUPLE || q->n < 3 || q->items[0]->kind != TPC_V_GLOBAL) {
		tpc_err_set(e, TPC_EINPUT, "quantized tensor without quantizer parameters");
		goto fail;
	}
	const char *scheme = q->items[0]->str;
	bool per_tensor = !strcmp(scheme, "torch.per_tensor_affine");
	bool per_channel = !strcmp(scheme, "torch.per_channel_affine") ||
			   !strcmp(scheme, "torch.per_channel_affine_float_qparams");
	raw = tpc_malloc((size_t)t->nbytes);
	out = tpc_malloc((size_t)t->numel * sizeof(float));
	if (!raw || !out) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = tpc_ckpt_read_bytes(ck, t, 0, t->nbytes, raw, e)))
		goto out;
	if (per_tensor) {
		double scale = q->items[1]->kind == TPC_V_FLOAT ? q->items[1]->fval : (double)q->items[1]->ival;
		int64_t zp = q->items[2]->ival;
		for (uint64_t i = 0; i < t->numel; i++)
			out[i] = (float)((qvalue(raw, t->dtype, i) - (double)zp) * scale);
	} else if (per_channel && q->n >= 4 && q->items[1]->kind == TPC_V_TENSOR &&
		   q->items[2]->kind == TPC_V_TENSOR) {
		/* scales / zero points are tensors pickled inside the qparams: pending, not named */
		if (q->items[1]->ival >= 0 || q->items[2]->ival >= 0 || PEND_IX(q->items[1]->ival) >= r->np ||
		    PEND_IX(q->items[2]->ival) >= r->np) {
			tpc_err_set(e, TPC_EINPUT, "per-channel quantizer parameters are not tensors of this file");
			goto fail;
		}
		pend *ps = &r->p[PEND_IX(q->items[1]->ival)], *pz = &r->p[PEND_IX(q->items[2]->ival)];
		int64_t axis = q->items[3]->ival;
		if (axis < 0 || axis >= t->ndim || ps->ndim != 1 || pz->ndim != 1 ||
		    ps->shape[0] != t->shape[axis] || pz->shape[0] != t->shape[axis]) {
			tpc_err_set(e, TPC_EINPUT, "per-channel quantizer parameters do not match the tensor");
			goto fail;
		}
		uint64_t inner = 1, ch = (uint64_t)t->shape[axis];
		for (int d = (int)axis + 1; d < t->ndim; d++)
			inner *= (uint64_t)t->shape[d];
		double *sc = tpc_malloc(ch * sizeof(double));
		double *zp = tpc_malloc(ch * sizeof(double));
		if (!sc || !zp) {
			free(sc);
			free(zp);
			ret = tpc_err_nomem(e);
			goto out;
		}
		for (uint64_t c = 0; c < ch; c++) {
			const tpc_storage *ss = &ck->st[ps->storage], *sz = &ck->st[pz->storage];
			const tpc_map *ms = tpc_ckpt_source(ck, ss->src), *mz = tpc_ckpt_source(ck, sz->src);
			uint64_t so = ss->offset + ((uint64_t)ps->soff + c * (uint64_t)ps->shape[ps->ndim]) * tpc_dtype_size(ps->dtype);
			uint64_t zo = sz->offset + ((uint64_t)pz->soff + c * (uint64_t)pz->shape[pz->ndim]) * tpc_dtype_size(pz->dtype);
			if (!ms || !mz || so + 8 > ms->size || zo + 8 > mz->size) {
				free(sc);
				free(zp);
				tpc_err_set(e, TPC_EINPUT, "per-channel quantizer parameters lie outside the file");
				goto fail;
			}
			double s = 0;
			int64_t z = 0;
			if (ps->dtype == TPC_F64)
				memcpy(&s, ms->data + so, 8);
			else if (ps->dtype == TPC_F32) {
				float f;
				memcpy(&f, ms->data + so, 4);
				s = f;
			}
			if (pz->dtype == TPC_I64)
				memcpy(&z, mz->data + zo, 8);
			else if (pz->dtype == TPC_F32) {
				float f;
				memcpy(&f, mz->data + zo, 4);
				z = (int64_t)f;
			}
			sc[c] = s;
			zp[c] = (double)z;
		}
		for (uint64_t i = 0; i < t->numel; i++) {
			uint64_t c = (i / inner) % ch;
			out[i] = (float)((qvalue(raw, t->dtype, i) - zp[c]) * sc[c]);
		}
		free(sc);
		free(zp);
	} else {
		tpc_err_set(e, TPC_EINPUT, "cannot dequantize quantization scheme '%s'", scheme);
		goto fail;
	}
	{
		char label[600];
		snprintf(label, sizeof(label), "%s:dequantized", r->path);
		if ((ret = tpc_ckpt_add_mem(ck, label, (uint8_t *)out, t->numel * sizeof(float), &src, e))) {
			out = NULL; /* freed by add_mem */
			goto out;
		}
		out = NULL;
		t = &ck->t[ix];
		t->dtype = t->src_dtype = TPC_F32;
		t->src = src;
		t->offset = 0;
		t->storage = -1;
		t->storage_offset = 0;
		t->nbytes = t->numel * 4;
		t->flags &= ~(TPC_TF_QUANTIZED | TPC_TF_BYTESWAP);
		tpc_tensor_set_contiguous(t);
		tpc_value_unref(t->meta);
		t->meta = NULL;
	}
	goto out;
fail:
	ret = TPC_EINPUT;
	tpc_err_tensor(e, t->name);
	tpc_err_path(e, r->path);
out:
	free(raw);
	free(out);
	return ret;
}

/* ---- the two containers ---- */

static void pickle_opts(reader *r, tpc_pickle_opts *po, tpc_pickle_globals *g, uint64_t base)
{
	tpc_pickle_opts_init(po);
	po->path = r->path;
	po->base_offset = base;
	po->ctx = r;
	po->reduce = reduce_cb;
	po->build = build_cb;
	po->persistent_load = persistent_load;
	po->globals = g;
	if (r->o && (r->o->flags & TPC_OPEN_STRICT))
		po->policy = TPC_PICKLE_REFUSE_UNKNOWN;
	else if (r->o && r->o->globals)
		po->policy = TPC_PICKLE_ALLOW_ALL; /* inspect --globals: show, never run */
}

static int export_globals(reader *r, tpc_pickle_globals *g, tpc_err *e)
{
	if (!r->o || !r->o->globals)
		return 0;
	for (size_t i = 0; i < g->n; i++) {
		tpc_buf k = TPC_BUF_INIT;
		tpc_buf_addf(&k, "%s.%s", g->v[i].module, g->v[i].name);
		tpc_value *key = k.oom ? NULL : tpc_value_str(k.p, k.len);
		tpc_value *val = tpc_value_new(TPC_V_TUPLE);
		tpc_buf_release(&k);
		const char *cls = tpc_pickle_gclass_name(g->v[i].cls);
		if (!key || !val || tpc_value_append(val, tpc_value_int((int64_t)g->v[i].count)) ||
		    tpc_value_append(val, tpc_value_str(cls, strlen(cls)))) {
			tpc_value_unref(key);
			tpc_value_unref(val);
			return tpc_err_nomem(e);
		}
		tpc_value *old = tpc_value_get(r->o->globals, key->str);
		if (old && old->kind == TPC_V_TUPLE && old->n && old->items[0]->kind == TPC_V_INT)
			val->items[0]->ival += old->items[0]->ival;
		if (tpc_value_set(r->o->globals, key, val))
			return tpc_err_nomem(e);
	}
	return 0;
}

/* The end of a load: the pickle's globals reported, then the checkpoint built
 * from its result, which finish takes (*root NULL after). */
static int finish_load(reader *r, tpc_pickle_globals *g, tpc_value **root, tpc_err *e)
{
	int ret = export_globals(r, g, e);
	if (!ret) {
		ret = finish(r, *root, e);
		*root = NULL;
	}
	return ret;
}

static uint64_t inflate_cap(void)
{
	return tpc_io_settings()->inflate_cap;
}

/* The zip in bytes [r->base, r->base + len) of m. */
static int open_zip(reader *r, const tpc_map *m, uint64_t len, tpc_err *e)
{
	tpc_zip z;
	tpc_value *root = NULL;
	tpc_pickle_globals g;
	tpc_pickle_opts po;
	uint8_t *owned = NULL;
	int ret;
	memset(&g, 0, sizeof(g));
	tpc_zip_init(&z);
	if ((ret = tpc_zip_open_from_map(&z, m, r->base, len, r->path, e)))
		goto out;
	r->z = &z;
	if (z.trailing && (ret = trailing_note(r, z.trailing, "end of central directory record", r->base + z.size, e)))
		goto out;
	if (tpc_zip_is_torchscript(&z)) {
		ret = TPC_CORRUPT(e, r->path, -1, NULL,
				  "this is a TorchScript archive (torch.jit.save), not a torch.save checkpoint; "
				  "load it with torch.jit.load and save its state_dict() instead");
		goto out;
	}
	if ((ret = tpc_zip_check_prefix(&z, e)))
		goto out;
	const tpc_zip_entry *pk = tpc_zip_find(&z, "data.pkl");
	if (!pk) {
		ret = TPC_CORRUPT(e, r->path, -1, NULL, "zip archive has no '%s/data.pkl': not a torch.save checkpoint",
				  tpc_zip_prefix(&z));
		goto out;
	}
	const uint8_t *p;
	uint64_t n;
	if ((ret = tpc_zip_read(&z, pk, r->inflate_cap < (1ull << 32) ? r->inflate_cap : 1ull << 32, &p, &n,
				&owned, e)))
		goto out;
	pickle_opts(r, &po, &g, pk->method == TPC_ZIP_STORED ? r->base + pk->data_offset : 0);
	if (!(ret = tpc_pickle_load_from_buffer(p, n, &po, &root, NULL, e)))
		ret = finish_load(r, &g, &root, e);
out:
	tpc_value_unref(root);
	free(owned);
	tpc_pickle_globals_release(&g);
	tpc_zip_release(&z);
	r->z = NULL;
	return ret;
}

/* The legacy file in m, whose magic pickle (legacy_magic) is `pos` bytes. */
static int open_legacy(reader *r, const tpc_map *m, uint64_t pos, tpc_err *e)
{
	tpc_value *v = NULL, *root = NULL, *keys = NULL;
	tpc_pickle_globals g;
	tpc_pickle_opts po;
	uint64_t used = 0;
	/* PROTO opens every pickle of protocol 2 and up; 0 and 1 write the
	 * magic alike, and 1001 as BININT2 (1) or INT text (0) */
	int proto = m->data[0] == TPC_PK_PROTO ? m->data[1] : pos < m->size && m->data[pos] == TPC_PK_INT ? 0 : 1;
	int ret;
	memset(&g, 0, sizeof(g));
	if (proto == 0) {
		ret = TPC_CORRUPT(e, r->path, (int64_t)pos, NULL,
				  "legacy torch file pickled with protocol 0 (text), which torch.load cannot read "
				  "either (its storage ids are text, not tuples); save it with pickle_protocol 2");
		goto out;
	}
	if ((ret = about_line(r->ck, e, "legacy torch.save format, pickle protocol %d", proto)))
		goto out;
	/* protocol version, sys_info: plain data, no callbacks needed */
	for (int i = 1; i < 3; i++) {
		pickle_opts(r, &po, &g, pos);
		po.persistent_load = NULL;
		if ((ret = tpc_pickle_load_from_buffer(m->data + pos, m->size - pos, &po, &v, &used, e)))
			goto out;
		if (i == 1 && (v->kind != TPC_V_INT || v->ival != 1001)) {
			ret = TPC_CORRUPT(e, r->path, (int64_t)pos, NULL,
					  "legacy torch file with protocol version %lld, expected 1001",
					  (long long)(v->kind == TPC_V_INT ? v->ival : -1));
			goto out;
		}
		if (i == 2) {
			tpc_value *le = v->kind == TPC_V_DICT ? tpc_value_get(v, "little_endian") : NULL;
			if (le && le->kind == TPC_V_BOOL && !le->ival) {
				ret = TPC_CORRUPT(e, r->path, (int64_t)pos, NULL,
						  "legacy torch file written on a big-endian machine; not supported");
				goto out;
			}
		}
		tpc_value_unref(v);
		v = NULL;
		pos += used;
	}
	pickle_opts(r, &po, &g, pos);
	if ((ret = tpc_pickle_load_from_buffer(m->data + pos, m->size - pos, &po, &root, &used, e)))
		goto out;
	pos += used;
	pickle_opts(r, &po, &g, pos);
	po.persistent_load = NULL;
	if ((ret = tpc_pickle_load_from_buffer(m->data + pos, m->size - pos, &po, &keys, &used, e)))
		goto out;
	pos += used;
	if (keys->kind != TPC_V_LIST) {
		ret = TPC_CORRUPT(e, r->path, (int64_t)pos, NULL, "legacy storage key list is not a list");
		goto out;
	}
	/* storages follow in key-list order: u64 element count, then the bytes */
	for (size_t i = 0; i < keys->n; i++) {
		const char *key = sstr(keys->items[i]);
		uint64_t *ix = key ? tpc__strmap_get(&r->keys, key, strlen(key)) : NULL;
		if (!ix) {
			ret = TPC_CORRUPT(e, r->path, (int64_t)pos, NULL,
					  "storage '%s' is listed but no tensor uses it, so its size is unknown",
					  key ? key : "?");
			goto out;
		}
		tpc_storage *s = &r->ck->st[*ix];
		if (m->size - pos < 8) {
			ret = TPC_CORRUPT(e, r->path, (int64_t)pos, NULL,
					  "file ends before storage '%s' (truncated)", key);
			goto out;
		}
		uint64_t numel = tpc_rd64le(m->data + pos), nbytes;
		if (tpc_mul_u64(numel, tpc_dtype_size(s->dtype), &nbytes) || nbytes > m->size - pos - 8) {
			ret = TPC_CORRUPT(e, r->path, (int64_t)pos, NULL,
					  "storage '%s' claims %llu elements but the file ends at %llu (truncated?)",
					  key, (unsigned long long)numel, (unsigned long long)m->size);
			goto out;
		}
		if ((uint64_t)r->legacy_numel[*ix] > numel) {
			ret = TPC_CORRUPT(e, r->path, (int64_t)pos, NULL,
					  "storage '%s' is used as %lld elements but holds %llu", key,
					  (long long)r->legacy_numel[*ix], (unsigned long long)numel);
			goto out;
		}
		s->offset = pos + 8;
		s->nbytes = nbytes;
		pos += 8 + nbytes;
	}
	if (pos == m->size || !(ret = trailing_note(r, m->size - pos, "last storage", pos, e)))
		ret = finish_load(r, &g, &root, e);
out:
	tpc_value_unref(v);
	tpc_value_unref(root);
	tpc_value_unref(keys);
	tpc_pickle_globals_release(&g);
	return ret;
}

static void reader_release(reader *r)
{
	for (size_t i = 0; i < r->np; i++) {
		free(r->p[i].shape);
		tpc_value_unref(r->p[i].meta);
	}
	free(r->p);
	free(r->legacy_numel);
	tpc__strmap_release(&r->keys);
}

/* Read the torch file that is source `src` of ck (a mapping or owned memory). */
static int torch_open_src(tpc_ckpt *ck, int src, const char *path, const tpc_open_opts *o,
			  tpc_err *e)
{
	reader r = {.ck = ck, .path = path, .o = o, .inflate_cap = inflate_cap(), .src = src};
	int ret;
	const tpc_map *m = tpc_ckpt_source(ck, r.src);
	uint64_t used = 0;
	tpc_err me;
	tpc_err_init(&me);
	int lm = m->size >= 4 && !memcmp(m->data, "PK\x03\x04", 4) ? 0 : legacy_magic(m->data, m->size, path, &used, &me);
	if (m->size >= 4 && !memcmp(m->data, "PK\x03\x04", 4)) {
		ret = open_zip(&r, m, m->size, e);
		if (!ret && !ck->format)
			ck->format = tpc_strdup("torch-zip");
	} else if (lm == 1) {
		ret = open_legacy(&r, m, used, e);
		if (!ret && !ck->format)
			ck->format = tpc_strdup("torch-legacy");
	} else if (m->size >= 2 && m->data[0] == TPC_PK_PROTO && m->data[1] <= 5) {
		/* a damaged magic pickle fails within its few bytes; a plain
		 * pickle.dump file gets as far as a value that is not the number */
		bool damaged = lm < 0 && me.offset >= 0 && me.offset < LEGACY_MAGIC_MAX;
		ret = TPC_CORRUPT(e, path, damaged ? me.offset : 0, NULL,
				  "not a torch.save checkpoint: it starts with a pickle (protocol %u) that is not the legacy "
				  "magic number " LEGACY_MAGIC_HEX ": %s",
				  m->data[1], damaged ? me.msg : "its first value is something else (a plain pickle file?)");
	} else if (m->size >= 262 && !memcmp(m->data + 257, "ustar", 5)) {
		ret = TPC_CORRUPT(e, path, 257, NULL,
				  "this is the pre-0.4 tar torch format, which tpconv does not read");
	} else if (tpc_zip_is_lfs_pointer(m->data, m->size)) {
		ret = TPC_CORRUPT(e, path, 0, NULL, "this is a Git LFS pointer, not the checkpoint; run 'git lfs pull'");
	} else if (m->size < 64) {
		ret = TPC_CORRUPT(e, path, 0, NULL,
				  "file is only %llu bytes: a truncated or corrupt torch checkpoint (no zip header, no pickle magic)",
				  (unsigned long long)m->size);
	} else {
		ret = TPC_CORRUPT(e, path, 0, NULL,
				  "not a torch.save checkpoint: neither a zip archive nor the legacy pickle format");
	}
	if (!ret)
		ret = tpc_ckpt_validate(ck, e);
	reader_release(&r);
	return ret;
}

/* torch.Size((a, b, ...)) (or a plain tuple/list of ints) into out[*nd]. */
bool tpc__torch_size(const tpc_value *v, int64_t *out, int *nd, int64_t max_dim)
{
	if (v && v->kind == TPC_V_CALL && v->n >= 2 && v->items[0]->kind == TPC_V_GLOBAL &&
	    !strcmp(v->items[0]->str, "torch.Size")) {
		const tpc_value *a = v->items[1];
		if (a->kind != TPC_V_TUPLE)
			return false;
		if (a->n == 0) {
			*nd = 0;
			return true;
		}
		v = a->items[0];
	}
	if (!v || (v->kind != TPC_V_TUPLE && v->kind != TPC_V_LIST) || v->n > TPC_MAX_NDIM)
		return false;
	for (size_t i = 0; i < v->n; i++) {
		const tpc_value *x = v->items[i];
		if (x->kind != TPC_V_INT || x->ival < 0 || x->ival > max_dim)
			return false;
		out[i] = x->ival;
	}
	*nd = (int)v->n;
	return true;
}

int tpc__torch_open_item(tpc_ckpt *ck, int src, uint64_t off, uint64_t len, const char *path, const char *prefix,
			 bool strict_globals, tpc_value **root, tpc_err *e)
{
	static const tpc_open_opts strict = {TPC_OPEN_STRICT, NULL, NULL}, lenient = {0, NULL, NULL};
	reader r;
	int ret;
	const tpc_map *m = tpc_ckpt_source(ck, src);
	uint64_t end;
	*root = NULL;
	if (!m || tpc_add_u64(off, len, &end) || end > m->size)
		return TPC_CORRUPT(e, path, (int64_t)off, NULL,
				   "item of %llu bytes at offset %llu lies outside the file (%llu bytes)",
				   (unsigned long long)len, (unsigned long long)off,
				   (unsigned long long)(m ? m->size : 0));
	memset(&r, 0, sizeof(r));
	r.ck = ck;
	r.path = path;
	r.o = strict_globals ? &strict : &lenient;
	r.inflate_cap = inflate_cap();
	r.src = src;
	r.base = off;
	r.prefix = prefix;
	r.root_out = root;
	if (len < 4 || memcmp(m->data + off, "PK\x03\x04", 4))
		ret = TPC_CORRUPT(e, path, (int64_t)off, NULL, "item at offset %llu is not a torch.save zip archive",
				  (unsigned long long)off);
	else
		ret = open_zip(&r, m, len, e);
	reader_release(&r);
	if (ret) {
		tpc_value_unref(*root);
		*root = NULL;
	}
	return ret;
}

static int torch_open(tpc_ckpt *ck, const char *path, const tpc_open_opts *o, tpc_err *e)
{
	int src, ret;
	if ((ret = tpc_ckpt_add_file(ck, path, &src, e)) || (ret = torch_open_src(ck, src, path, o, e)))
		return ret;
	/* Megatron's distributed optimizer beside a legacy rank file */
	return o && (o->flags & TPC_OPEN_OPTIMIZER) ? tpc__megatron_legacy_optim(ck, path, e) : 0;
}

int tpc_torch_from_buffer(tpc_ckpt *ck, const uint8_t *p, uint64_t n, const char *path,
			  const tpc_open_opts *o, tpc_err *e)
{
	int src, ret;
	uint8_t *copy = tpc_malloc(n ? (size_t)n : 1);
	if (!path)
		path = "";
	if (!copy)
		return tpc_err_nomem(e);
	if (n)
		memcpy(copy, p, (size_t)n);
	if ((ret = tpc_ckpt_add_mem(ck, path, copy, n, &src, e)))
		return ret;
	return torch_open_src(ck, src, path, o, e);
}

static int torch_detect(const char *path, const uint8_t *head, size_t n)
{
	(void)path;
	if (!head)
		return 0;
	if (n >= 4 && !memcmp(head, "PK\x03\x04", 4))
		return 95;
	uint64_t used;
	tpc_err e;
	tpc_err_init(&e);
	return legacy_magic(head, n, NULL, &used, &e) == 1 ? 95 : 0;
}

static const char *const torch_exts[] = {".pt", ".pth", ".bin", ".ckpt", NULL};

int tpc__torch_write(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *path,
		     const tpc_write_opts *o, tpc_err *e);

const tpc_format tpc_fmt_torch = {
	.name = "torch", .desc = "torch.save checkpoint (zip, or legacy to read)",
	.detect = torch_detect, .open = torch_open, .write = tpc__torch_write, .exts = torch_exts,
	.rank_file = true, .object_tree = true, .gates_commit = true,
};
