/* gguf.c - GGUF reader (the registry's "gguf", split sets too) and the KV
 * list helpers; the writer is gguf_write.c, the types and block decoders
 * lib/tpc_ggml.c. See gguf.h for the layout.
 *
 * The reader parses the whole header through a bounded cursor, checking
 * every count and length against the bytes left before allocating, then
 * validates the tensor table as llama.cpp's gguf.cpp does: known types,
 * ne[0] a multiple of the block, shapes that do not overflow, each tensor at
 * the offset that follows the previous one (padded to the alignment), its
 * data inside the file. Plain tensors become views of the mapping; block
 * tensors (any type in lib/tpc_ggml.c's table) become descriptions
 * dequantized while a writer streams them (TPC_DQ_GGML), their packed bytes
 * kept for a GGUF writer; a type with no decoder (Q8_K, Q1_0 ...) is refused
 * only by a read that needs its values (tpc_quant.c rows_ggml).
 * The KV list, with its types, hangs off the checkpoint (ck->ext, tag
 * "gguf"); `inspect` shows it through ck->about. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "gguf.h"
#include "tpc_buf.h"
#include "tpc_io.h"
#include "tpc_util.h"

#define MAX_NAME 4096     /* a key or tensor name longer than this is refused */
#define MAX_DIMS 4        /* GGML_MAX_DIMS */
#define SHOW_ITEMS 8      /* array elements `inspect` shows */

/* ---- KV list ---- */

int tpc__gguf_vt_width(int t)
{
	static const signed char w[TPC_GV_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
	return t >= 0 && t < TPC_GV_COUNT ? w[t] : 0;
}

int tpc__gguf_kv_scalar(const tpc_gguf_kv *k, uint8_t raw[8])
{
	uint64_t u = k->v.u;
	if (k->type == TPC_GV_F32) {
		float f = (float)k->v.f;
		uint32_t x;
		memcpy(&x, &f, 4);
		u = x;
	} else if (k->type == TPC_GV_F64) {
		memcpy(&u, &k->v.f, 8);
	}
	tpc_wr64le(raw, u);
	return tpc__gguf_vt_width(k->type);
}

static void kv_clear(tpc_gguf_kv *k)
{
	free(k->key);
	free(k->s);
	free(k->arr);
	tpc_free_strv(k->astr, k->astr ? (size_t)k->n : 0);
	free(k->alen);
	memset(k, 0, sizeof(*k));
}

void tpc_gguf_kvs_release(tpc_gguf_kvs *l)
{
	for (size_t i = 0; l && i < l->n; i++)
		kv_clear(&l->kv[i]);
	if (l) {
		free(l->kv);
		memset(l, 0, sizeof(*l));
	}
}

ptrdiff_t tpc_gguf_kvs_find(const tpc_gguf_kvs *l, const char *key)
{
	for (size_t i = 0; l && i < l->n; i++)
		if (!strcmp(l->kv[i].key, key))
			return (ptrdiff_t)i;
	return -1;
}

/* The slot for `key`: the existing one emptied (its key kept), or a new one. */
static tpc_gguf_kv *kv_slot(tpc_gguf_kvs *l, const char *key)
{
	ptrdiff_t i = tpc_gguf_kvs_find(l, key);
	if (i >= 0) {
		char *k = l->kv[i].key;
		l->kv[i].key = NULL;
		kv_clear(&l->kv[i]);
		l->kv[i].key = k;
		return &l->kv[i];
	}
	if (tpc_grow((void **)&l->kv, &l->cap, l->n + 1, sizeof(*l->kv)))
		return NULL;
	tpc_gguf_kv *k = &l->kv[l->n];
	memset(k, 0, sizeof(*k));
	if (!(k->key = tpc_strdup(key)))
		return NULL;
	l->n++;
	return k;
}

static int kv_num(tpc_gguf_kvs *l, const char *key, int type, tpc_gguf_num v)
{
	tpc_gguf_kv *k = kv_slot(l, key);
	if (!k)
		return -1;
	k->type = type;
	k->v = v;
	return 0;
}

int tpc_gguf_kvs_uint(tpc_gguf_kvs *l, const char *key, int type, uint64_t v)
{
	return kv_num(l, key, type, (tpc_gguf_num){.u = v});
}

int tpc_gguf_kvs_int(tpc_gguf_kvs *l, const char *key, int type, int64_t v)
{
	return kv_num(l, key, type, (tpc_gguf_num){.i = v});
}

int tpc_gguf_kvs_float(tpc_gguf_kvs *l, const char *key, int type, double v)
{
	return kv_num(l, key, type, (tpc_gguf_num){.f = v});
}

int tpc_gguf_kvs_str(tpc_gguf_kvs *l, const char *key, const char *s, size_t len)
{
	tpc_gguf_kv *k = kv_slot(l, key);
	if (!k)
		return -1;
	k->type = TPC_GV_STRING;
	k->slen = len;
	return (k->s = tpc_strndup(s, len)) ? 0 : -1;
}

int tpc_gguf_kvs_arr(tpc_gguf_kvs *l, const char *key, int atype, const void *data, uint64_t n)
{
	tpc_gguf_kv *k = kv_slot(l, key);
	size_t w = (size_t)tpc__gguf_vt_width(atype);
	if (!k || !w || n > SIZE_MAX / w)
		return -1;
	k->type = TPC_GV_ARRAY;
	k->atype = atype;
	if (!(k->arr = tpc_malloc(n ? (size_t)n * w : 1)))
		return -1;
	if (n)
		memcpy(k->arr, data, (size_t)n * w);
	k->n = n;
	return 0;
}

int tpc_gguf_kvs_strs(tpc_gguf_kvs *l, const char *key, const char *const *s, const uint64_t *len, uint64_t n)
{
	tpc_gguf_kv *k = kv_slot(l, key);
	if (!k || n > SIZE_MAX / sizeof(char *))
		return -1;
	k->type = TPC_GV_ARRAY;
	k->atype = TPC_GV_STRING;
	k->astr = tpc_calloc(n ? (size_t)n : 1, sizeof(char *));
	k->alen = tpc_calloc(n ? (size_t)n : 1, sizeof(uint64_t));
	if (!k->astr || !k->alen)
		return -1;
	for (uint64_t i = 0; i < n; i++, k->n++) {
		k->alen[i] = len ? len[i] : strlen(s[i]);
		if (!(k->astr[i] = tpc_strndup(s[i], (size_t)k->alen[i])))
			return -1;
	}
	return 0;
}

void tpc_gguf_kvs_del(tpc_gguf_kvs *l, const char *key)
{
	ptrdiff_t i = tpc_gguf_kvs_find(l, key);
	if (i < 0)
		return;
	kv_clear(&l->kv[i]);
	memmove(&l->kv[i], &l->kv[i + 1], (l->n - (size_t)i - 1) * sizeof(*l->kv));
	l->n--;
}

static void kvs_free_ext(void *p)
{
	tpc_gguf_kvs_release(p);
	free(p);
}

const tpc_gguf_kvs *tpc_gguf_ckpt_kvs(const tpc_ckpt *ck)
{
	return ck->ext && ck->ext_tag && !strcmp(ck->ext_tag, "gguf") ? ck->ext : NULL;
}

int tpc_gguf_packed(const tpc_tensor *t)
{
	const tpc_dequant *dq = t->dq;
	if (!dq || dq->kind != TPC_DQ_GGML || dq->rope_hd || dq->O || dq->r0 || dq->c0)
		return TPC_GGML_NONE;
	return dq->gtype;
}

/* ---- parsing ---- */

typedef struct gp {
	tpc_cursor c;
	const char *path;
	tpc_err *e;
	int ret;
} gp;

/* The first error wins; the cursor's position is the offset. */
#define GP_BAD(g, off, tensor, ...) \
	((g)->ret ? (g)->ret : ((g)->ret = TPC_CORRUPT((g)->e, (g)->path, (int64_t)(off), (tensor), __VA_ARGS__)))

/* n bytes at the cursor, or NULL (the error set: the file ends inside `what`) */
static const uint8_t *gp_take(gp *g, size_t n, const char *what, const char *tensor)
{
	uint64_t at = g->c.pos;
	const uint8_t *b = tpc_cursor_take(&g->c, n);
	if (!b)
		GP_BAD(g, at, tensor, "file ends inside %s (truncated?)", what);
	return b;
}

static uint64_t gp_u64(gp *g, const char *what, const char *tensor)
{
	const uint8_t *b = gp_take(g, 8, what, tensor);
	return b ? tpc_rd64le(b) : 0;
}

static uint32_t gp_u32(gp *g, const char *what, const char *tensor)
{
	const uint8_t *b = gp_take(g, 4, what, tensor);
	return b ? tpc_rd32le(b) : 0;
}

/* A gguf string: its bytes in the buffer (*len of them), or NULL. */
static const uint8_t *gp_str(gp *g, uint64_t *len, const char *what, const char *tensor)
{
	uint64_t at = g->c.pos, n = gp_u64(g, what, tensor);
	if (g->ret)
		return NULL;
	if (n > tpc_cursor_left(&g->c)) {
		GP_BAD(g, at, tensor, "%s of %llu bytes runs past the end of the file (%llu bytes left)", what,
		       (unsigned long long)n, (unsigned long long)tpc_cursor_left(&g->c));
		return NULL;
	}
	*len = n;
	return tpc_cursor_take(&g->c, n);
}

/* A key or tensor name: no NUL, at most MAX_NAME bytes; malloc'd. */
static char *gp_name(gp *g, const char *what, const char *tensor)
{
	uint64_t at = g->c.pos, n = 0;
	const uint8_t *s = gp_str(g, &n, what, tensor);
	if (!s)
		return NULL;
	if (n == 0 || n > MAX_NAME || memchr(s, 0, (size_t)n)) {
		GP_BAD(g, at, tensor, "%s is %s", what, n == 0 ? "empty" : n > MAX_NAME ? "over 4096 bytes" : "holding a NUL byte");
		return NULL;
	}
	char *r = tpc_strndup((const char *)s, (size_t)n);
	if (!r)
		g->ret = tpc_err_nomem(g->e);
	return r;
}

static int gp_array(gp *g, tpc_gguf_kv *k, uint64_t at)
{
	k->atype = (int)(int32_t)gp_u32(g, "an array's type", k->key);
	uint64_t n = gp_u64(g, "an array's length", k->key);
	if (g->ret)
		return g->ret;
	if (k->atype == TPC_GV_ARRAY)
		return GP_BAD(g, at, NULL, "key '%s': arrays of arrays are not supported", k->key);
	if (k->atype == TPC_GV_STRING) {
		/* each element at least its 8-byte length */
		if (n > tpc_cursor_left(&g->c) / 8)
			return GP_BAD(g, at, NULL, "key '%s': array of %llu strings cannot fit the %llu bytes left", k->key,
				      (unsigned long long)n, (unsigned long long)tpc_cursor_left(&g->c));
		k->astr = tpc_calloc(n ? (size_t)n : 1, sizeof(char *));
		k->alen = tpc_calloc(n ? (size_t)n : 1, sizeof(uint64_t));
		if (!k->astr || !k->alen)
			return g->ret = tpc_err_nomem(g->e);
		for (uint64_t i = 0; i < n; i++, k->n++) {
			const uint8_t *s = gp_str(g, &k->alen[i], "an array string", k->key);
			if (!s)
				return g->ret;
			if (!(k->astr[i] = tpc_strndup((const char *)s, (size_t)k->alen[i])))
				return g->ret = tpc_err_nomem(g->e);
		}
		return 0;
	}
	int w = tpc__gguf_vt_width(k->atype);
	if (!w)
		return GP_BAD(g, at, NULL, "key '%s': unknown array element type %d", k->key, k->atype);
	if (n > tpc_cursor_left(&g->c) / (uint64_t)w)
		return GP_BAD(g, at, NULL, "key '%s': array of %llu elements of %d bytes runs past the end of the file",
			      k->key, (unsigned long long)n, w);
	const uint8_t *p = tpc_cursor_take(&g->c, n * (uint64_t)w);
	if (!(k->arr = tpc_malloc(n ? (size_t)(n * (uint64_t)w) : 1)))
		return g->ret = tpc_err_nomem(g->e);
	memcpy(k->arr, p, (size_t)(n * (uint64_t)w));
	k->n = n;
	return 0;
}

/* One KV, appended to l (its key checked unique). */
static int gp_kv(gp *g, tpc_gguf_kvs *l)
{
	uint64_t at = g->c.pos;
	char *key = gp_name(g, "a key", NULL);
	if (!key)
		return g->ret;
	if (tpc_gguf_kvs_find(l, key) >= 0) {
		GP_BAD(g, at, NULL, "duplicate key '%s'", key);
		free(key);
		return g->ret;
	}
	if (tpc_grow((void **)&l->kv, &l->cap, l->n + 1, sizeof(*l->kv))) {
		free(key);
		return g->ret = tpc_err_nomem(g->e);
	}
	tpc_gguf_kv *k = &l->kv[l->n++];
	memset(k, 0, sizeof(*k));
	k->key = key;
	uint64_t vat = g->c.pos;
	k->type = (int)(int32_t)gp_u32(g, "a value type", NULL);
	if (g->ret)
		return g->ret;
	if (k->type == TPC_GV_STRING) {
		const uint8_t *s = gp_str(g, &k->slen, "a string value", NULL);
		if (s && !(k->s = tpc_strndup((const char *)s, (size_t)k->slen)))
			g->ret = tpc_err_nomem(g->e);
		return g->ret;
	}
	if (k->type == TPC_GV_ARRAY)
		return gp_array(g, k, vat);
	int w = tpc__gguf_vt_width(k->type);
	if (!w)
		return GP_BAD(g, vat, NULL, "key '%s': unknown value type %d", key, k->type);
	const uint8_t *b = tpc_cursor_take(&g->c, (uint64_t)w);
	if (!b)
		return GP_BAD(g, vat, NULL, "key '%s': file ends inside its value (truncated?)", key);
	uint64_t u = w == 1 ? b[0] : w == 2 ? tpc_rd16le(b) : w == 4 ? tpc_rd32le(b) : tpc_rd64le(b);
	switch (k->type) {
	case TPC_GV_I8: k->v.i = (int8_t)u; break;
	case TPC_GV_I16: k->v.i = (int16_t)u; break;
	case TPC_GV_I32: k->v.i = (int32_t)u; break;
	case TPC_GV_I64: k->v.i = (int64_t)u; break;
	case TPC_GV_F32: { uint32_t x = (uint32_t)u; float f; memcpy(&f, &x, 4); k->v.f = f; break; }
	case TPC_GV_F64: memcpy(&k->v.f, &u, 8); break;
	case TPC_GV_BOOL:
		if (u > 1)
			return GP_BAD(g, vat, NULL, "key '%s': bool value %llu", key, (unsigned long long)u);
		k->v.u = u;
		break;
	default: k->v.u = u; break;
	}
	return 0;
}

/* One tensor info: name, ne (PyTorch order into shape), type, offset. */
typedef struct ginfo {
	char *name;
	int ndim, type;
	int64_t shape[MAX_DIMS];
	uint64_t off, nbytes, at;
} ginfo;

static int gp_info(gp *g, ginfo *ti)
{
	ti->at = g->c.pos;
	if (!(ti->name = gp_name(g, "a tensor name", NULL)))
		return g->ret;
	uint32_t nd = gp_u32(g, "a tensor's dimension count", ti->name);
	if (g->ret)
		return g->ret;
	if (nd < 1 || nd > MAX_DIMS)
		return GP_BAD(g, ti->at, ti->name, "%u dimensions (GGUF allows 1 to %d)", nd, MAX_DIMS);
	ti->ndim = (int)nd;
	uint64_t numel = 1;
	for (int d = 0; d < ti->ndim; d++) {
		uint64_t v = gp_u64(g, "a tensor's shape", ti->name);
		if (g->ret)
			return g->ret;
		if (v > (uint64_t)INT64_MAX || tpc_mul_u64(numel, v, &numel) || numel > (uint64_t)INT64_MAX)
			return GP_BAD(g, ti->at, ti->name, "shape overflows (ne[%d] = %llu)", d, (unsigned long long)v);
		ti->shape[ti->ndim - 1 - d] = (int64_t)v;
	}
	ti->type = (int)(int32_t)gp_u32(g, "a tensor's type", ti->name);
	ti->off = gp_u64(g, "a tensor's offset", ti->name);
	if (g->ret)
		return g->ret;
	const tpc_ggml_info *in = tpc_ggml_info_of(ti->type);
	if (!in)
		return GP_BAD(g, ti->at, ti->name, "ggml type %d is not one gguf-py 0.19 names", ti->type);
	int64_t ne0 = ti->shape[ti->ndim - 1];
	if (ne0 % in->block)
		return GP_BAD(g, ti->at, ti->name, "ne[0] = %lld is not a multiple of the %s block (%d)", (long long)ne0,
			      in->name, in->block);
	if (tpc_mul_u64(numel / (uint64_t)in->block, (uint64_t)in->size, &ti->nbytes))
		return GP_BAD(g, ti->at, ti->name, "size overflows");
	return 0;
}

/* general.alignment: a u32 power of two, else the default. */
static int alignment_of(gp *g, const tpc_gguf_kvs *l, uint64_t *al)
{
	ptrdiff_t i = tpc_gguf_kvs_find(l, "general.alignment");
	*al = TPC_GGUF_DEFAULT_ALIGNMENT;
	if (i < 0)
		return 0;
	const tpc_gguf_kv *k = &l->kv[i];
	if (k->type != TPC_GV_U32 || k->v.u == 0 || (k->v.u & (k->v.u - 1)))
		return GP_BAD(g, 0, NULL, "general.alignment must be a u32 power of two");
	*al = k->v.u;
	return 0;
}

/* A block tensor: its packed bytes as c[0], a U8 view, and a description of
 * its F32 values (src_dtype F32, computed while streamed). */
static int add_block_tensor(tpc_ckpt *ck, const ginfo *ti, int src, uint64_t at, tpc_err *e)
{
	int64_t nb = (int64_t)ti->nbytes;
	int64_t ix = tpc_ckpt_add_tensor(ck, ti->name, TPC_U8, 1, &nb, NULL, src, at, e);
	if (ix < 0)
		return (int)ix;
	tpc_dequant *dq = tpc_dequant_new(TPC_DQ_NC, false);
	tpc_tensor nt;
	char label[64];
	if (!dq)
		return tpc_err_nomem(e);
	dq->kind = TPC_DQ_GGML;
	dq->gtype = ti->type;
	snprintf(label, sizeof(label), "%s blocks", tpc_ggml_info_of(ti->type)->name);
	if (tpc_tensor_copy(&dq->c[0], &ck->t[ix]) || !(dq->c[0].name = tpc_strdup(label))) {
		dq->nc = 1;
		goto nomem;
	}
	dq->nc = 1;
	if (tpc_tensor_init_zero(&nt, TPC_F32, ti->ndim, ti->shape))
		goto nomem;
	nt.flags = 0;
	nt.dq = dq;
	nt.name = ck->t[ix].name;
	ck->t[ix].name = NULL;
	tpc_tensor_release(&ck->t[ix]);
	ck->t[ix] = nt;
	return 0;
nomem:
	free(dq->c[0].name);
	tpc_tensor_release(&dq->c[0]);
	free(dq);
	return tpc_err_nomem(e);
}

/* The tensor table, checked as a unit, then added to ck. */
static int add_tensors(gp *g, tpc_ckpt *ck, ginfo *ti, uint64_t nt, uint64_t data0, uint64_t al, int src)
{
	uint64_t expect = 0, n = g->c.n;
	for (uint64_t i = 0; i < nt && !g->ret; i++) {
		if (ti[i].off != expect)
			return GP_BAD(g, ti[i].at, ti[i].name,
				      "data offset %llu, expected %llu (tensors follow each other in order, each padded to %llu bytes)",
				      (unsigned long long)ti[i].off, (unsigned long long)expect, (unsigned long long)al);
		if (data0 + ti[i].off > n || ti[i].nbytes > n - data0 - ti[i].off)
			return GP_BAD(g, data0 + ti[i].off, ti[i].name,
				      "data (%llu bytes) runs past the end of the file (%llu bytes; truncated?)",
				      (unsigned long long)ti[i].nbytes, (unsigned long long)n);
		uint64_t padded = (ti[i].nbytes + al - 1) / al * al;
		expect += padded;
	}
	for (uint64_t i = 0; i < nt && !g->ret; i++) {
		const ginfo *t = &ti[i];
		tpc_dtype dt = tpc_ggml_plain_dtype(t->type);
		if (tpc_ckpt_find(ck, t->name) >= 0)
			return GP_BAD(g, t->at, t->name, "duplicate tensor name");
		if (dt) {
			int64_t r = tpc_ckpt_add_tensor(ck, t->name, dt, t->ndim, t->shape, NULL, src, data0 + t->off, g->e);
			if (r < 0)
				g->ret = (int)r;
		} else {
			g->ret = add_block_tensor(ck, t, src, data0 + t->off, g->e);
		}
	}
	return g->ret;
}

int tpc_gguf_from_buffer(tpc_ckpt *ck, const uint8_t *p, uint64_t n, int src, const char *path, tpc_gguf_kvs *kv,
			 tpc_err *e)
{
	gp g = {.path = path, .e = e};
	ginfo *ti = NULL;
	uint64_t nt = 0, nk, al;
	tpc_cursor_init(&g.c, p, n);
	uint32_t magic = gp_u32(&g, "the magic", NULL), ver = gp_u32(&g, "the version", NULL);
	if (!g.ret && magic != TPC_GGUF_MAGIC)
		GP_BAD(&g, 0, NULL, "not a GGUF file (magic %08x)", magic);
	if (!g.ret && (ver < 2 || ver > 3))
		GP_BAD(&g, 4, NULL, "GGUF version %u is not supported (2 and 3 are)", ver);
	nt = gp_u64(&g, "the tensor count", NULL);
	nk = gp_u64(&g, "the KV count", NULL);
	/* a KV takes at least 13 bytes, a tensor info 32 */
	if (!g.ret && nk > tpc_cursor_left(&g.c) / 13)
		GP_BAD(&g, 16, NULL, "%llu KVs cannot fit the %llu bytes left", (unsigned long long)nk,
		       (unsigned long long)tpc_cursor_left(&g.c));
	if (!g.ret && nt > tpc_cursor_left(&g.c) / 32)
		GP_BAD(&g, 8, NULL, "%llu tensors cannot fit the %llu bytes left", (unsigned long long)nt,
		       (unsigned long long)tpc_cursor_left(&g.c));
	for (uint64_t i = 0; i < nk && !g.ret; i++)
		gp_kv(&g, kv);
	if (!g.ret && !(ti = tpc_calloc(nt ? (size_t)nt : 1, sizeof(*ti))))
		g.ret = tpc_err_nomem(e);
	for (uint64_t i = 0; i < nt && !g.ret; i++)
		gp_info(&g, &ti[i]);
	if (!g.ret && !alignment_of(&g, kv, &al)) {
		uint64_t data0 = (g.c.pos + al - 1) / al * al;
		if (nt && data0 > n)
			GP_BAD(&g, g.c.pos, NULL, "the data section would start at %llu, past the end of the file",
			       (unsigned long long)data0);
		else
			add_tensors(&g, ck, ti, nt, data0, al, src);
	}
	for (uint64_t i = 0; ti && i < nt; i++)
		free(ti[i].name);
	free(ti);
	return g.ret;
}

/* ---- inspect: the KV list as ck->about ---- */

static const char *const vt_names[TPC_GV_COUNT] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
						   "bool", "str", "arr", "u64", "i64", "f64"};

static void show_str(tpc_buf *b, const char *s, uint64_t n, size_t max)
{
	char tmp[128];
	size_t k = n < max ? (size_t)n : max;
	tpc_buf_addc(b, '"');
	for (size_t i = 0; i < k; i += sizeof(tmp) - 1) {
		size_t m = k - i < sizeof(tmp) - 1 ? k - i : sizeof(tmp) - 1;
		char raw[128];
		memcpy(raw, s + i, m);
		raw[m] = 0;
		tpc_sanitize(tmp, sizeof(tmp), raw);
		tpc_buf_adds(b, tmp);
	}
	tpc_buf_adds(b, n > max ? "\"..." : "\"");
}

static void show_num(tpc_buf *b, int type, const uint8_t *p)
{
	uint64_t u = 0;
	int w = tpc__gguf_vt_width(type);
	for (int i = w - 1; i >= 0; i--)
		u = u << 8 | p[i];
	switch (type) {
	case TPC_GV_I8: tpc_buf_addf(b, "%d", (int8_t)u); break;
	case TPC_GV_I16: tpc_buf_addf(b, "%d", (int16_t)u); break;
	case TPC_GV_I32: tpc_buf_addf(b, "%d", (int32_t)u); break;
	case TPC_GV_I64: tpc_buf_addf(b, "%lld", (long long)(int64_t)u); break;
	case TPC_GV_F32: { uint32_t x = (uint32_t)u; float f; memcpy(&f, &x, 4); tpc_buf_addf(b, "%.9g", f); break; }
	case TPC_GV_F64: { double f; memcpy(&f, &u, 8); tpc_buf_addf(b, "%.17g", f); break; }
	case TPC_GV_BOOL: tpc_buf_adds(b, u ? "true" : "false"); break;
	default: tpc_buf_addf(b, "%llu", (unsigned long long)u); break;
	}
}

/* "key (type) = value", long strings and arrays cut short */
static void show_kv(tpc_buf *b, const tpc_gguf_kv *k)
{
	char key[256];
	tpc_sanitize(key, sizeof(key), k->key);
	tpc_buf_addf(b, "\nkv %s (%s", key, k->type >= 0 && k->type < TPC_GV_COUNT ? vt_names[k->type] : "?");
	if (k->type == TPC_GV_ARRAY)
		tpc_buf_addf(b, " of %llu %s", (unsigned long long)k->n, vt_names[k->atype]);
	tpc_buf_adds(b, ") = ");
	if (k->type == TPC_GV_STRING) {
		show_str(b, k->s, k->slen, 72);
	} else if (k->type == TPC_GV_ARRAY) {
		tpc_buf_addc(b, '[');
		for (uint64_t i = 0; i < k->n && i < SHOW_ITEMS; i++) {
			tpc_buf_adds(b, i ? ", " : "");
			if (k->atype == TPC_GV_STRING)
				show_str(b, k->astr[i], k->alen[i], 24);
			else
				show_num(b, k->atype, (const uint8_t *)k->arr + i * (uint64_t)tpc__gguf_vt_width(k->atype));
		}
		tpc_buf_adds(b, k->n > SHOW_ITEMS ? ", ...]" : "]");
	} else {
		uint8_t raw[8];
		tpc__gguf_kv_scalar(k, raw);
		show_num(b, k->type, raw);
	}
}

/* The block tensors' types, counted: "Q4_K 120, Q6_K 25, F32 61" */
static void show_types(tpc_buf *b, const tpc_ckpt *ck)
{
	bool first = true;
	for (size_t k = 0; tpc_ggml_type_at(k) != TPC_GGML_NONE; k++) {
		int want = tpc_ggml_type_at(k);
		size_t c = 0;
		for (size_t i = 0; i < ck->n; i++) {
			const tpc_tensor *t = &ck->t[i];
			int ty = t->dq && t->dq->kind == TPC_DQ_GGML ? t->dq->gtype : TPC_GGML_NONE;
			for (size_t j = 0; ty == TPC_GGML_NONE && tpc_ggml_type_at(j) != TPC_GGML_NONE; j++)
				if (tpc_ggml_plain_dtype(tpc_ggml_type_at(j)) == t->src_dtype)
					ty = tpc_ggml_type_at(j);
			c += ty == want;
		}
		if (c)
			tpc_buf_addf(b, "%s%s %zu", first ? "" : ", ", tpc_ggml_info_of(want)->name, c);
		first = first && !c;
	}
}

/* general.type "adapter": llama.cpp's LoRA (or other) adapter file */
static bool is_adapter(const tpc_gguf_kvs *kv)
{
	ptrdiff_t i = tpc_gguf_kvs_find(kv, "general.type");
	return i >= 0 && kv->kv[i].type == TPC_GV_STRING && kv->kv[i].slen == 7 && !memcmp(kv->kv[i].s, "adapter", 7);
}

static void set_about(tpc_ckpt *ck, const tpc_gguf_kvs *kv, size_t nfiles)
{
	tpc_buf b = TPC_BUF_INIT;
	ptrdiff_t a = tpc_gguf_kvs_find(kv, "general.architecture");
	char arch[64] = "?";
	if (a >= 0 && kv->kv[a].type == TPC_GV_STRING)
		tpc_sanitize(arch, sizeof(arch), kv->kv[a].s);
	tpc_buf_addf(&b, "GGUF, architecture %s, %zu KVs", arch, kv->n);
	if (is_adapter(kv)) {
		ptrdiff_t al = tpc_gguf_kvs_find(kv, "adapter.alora.invocation_tokens");
		tpc_buf_addf(&b, ", a LoRA adapter of %zu tensors (convert FILE --base BASE -o DIR/: the PEFT adapter)", ck->n);
		if (al >= 0 && kv->kv[al].type == TPC_GV_ARRAY)
			tpc_buf_addf(&b, ", activated (aLoRA) after %llu invocation tokens", (unsigned long long)kv->kv[al].n);
	}
	if (nfiles > 1)
		tpc_buf_addf(&b, ", a gguf-split set of %zu files", nfiles);
	tpc_buf_adds(&b, "\ntensor types: ");
	show_types(&b, ck);
	for (size_t i = 0; i < kv->n; i++)
		show_kv(&b, &kv->kv[i]);
	tpc_ckpt_set_about(ck, &b);
}

/* ---- the registry's format: one file or a gguf-split set ---- */

static int detect(const char *path, const uint8_t *head, size_t n)
{
	(void)path;
	return head && n >= 4 && tpc_rd32le(head) == TPC_GGUF_MAGIC ? 100 : 0;
}

/* A split key's value, -1 when absent; *bad when present with another type. */
static int64_t split_key(const tpc_gguf_kvs *kv, const char *key, int type, bool *bad)
{
	ptrdiff_t i = tpc_gguf_kvs_find(kv, key);
	if (i < 0)
		return -1;
	if (kv->kv[i].type != type) {
		*bad = true;
		return -1;
	}
	return type == TPC_GV_I32 ? kv->kv[i].v.i : (int64_t)kv->kv[i].v.u;
}

/* "NAME-00002-of-00005.gguf" -> stem length (up to the '-'), k 2, n 5 */
static bool split_name(const char *path, size_t *stem, unsigned *k, unsigned *n)
{
	size_t l = strlen(path);
	const char *s = path + l - 20; /* "-00002-of-00005.gguf" */
	if (l < 21 || s[0] != '-' || memcmp(s + 6, "-of-", 4) || strcmp(s + 15, ".gguf"))
		return false;
	*k = *n = 0;
	for (int i = 1; i < 6; i++) {
		if (s[i] < '0' || s[i] > '9' || s[i + 9] < '0' || s[i + 9] > '9')
			return false;
		*k = *k * 10 + (unsigned)(s[i] - '0');
		*n = *n * 10 + (unsigned)(s[i + 9] - '0');
	}
	*stem = l - 20;
	return *k >= 1 && *k <= *n;
}

/* One file of the set: its tensors into ck, its KVs into *kv. */
static int open_one(tpc_ckpt *ck, const char *path, tpc_gguf_kvs *kv, tpc_err *e)
{
	int src, ret;
	if ((ret = tpc_ckpt_add_file(ck, path, &src, e)))
		return ret;
	const tpc_map *m = tpc_ckpt_source(ck, src);
	return tpc_gguf_from_buffer(ck, m->data, m->size, src, path, kv, e);
}

/* File k (0-based) of a set of n: its split.* keys must say so. */
static int check_split(const tpc_gguf_kvs *kv, const char *path, int64_t k, int64_t n, int64_t *tcount, tpc_err *e)
{
	bool bad = false;
	int64_t no = split_key(kv, "split.no", TPC_GV_U16, &bad), cnt = split_key(kv, "split.count", TPC_GV_U16, &bad);
	int64_t tc = split_key(kv, "split.tensors.count", TPC_GV_I32, &bad);
	if (bad)
		return TPC_CORRUPT(e, path, 0, NULL, "split.* keys of the wrong type (split.no and split.count u16, split.tensors.count i32)");
	if (no != k || cnt != n || tc < 0)
		return TPC_CORRUPT(e, path, 0, NULL,
				   "split.no %lld, split.count %lld, split.tensors.count %lld: expected file %lld of a set of %lld",
				   (long long)no, (long long)cnt, (long long)tc, (long long)k + 1, (long long)n);
	if (*tcount >= 0 && tc != *tcount)
		return TPC_CORRUPT(e, path, 0, NULL, "split.tensors.count %lld, but the first file says %lld", (long long)tc,
				   (long long)*tcount);
	*tcount = tc;
	return 0;
}

static int gg_open_set(tpc_ckpt *ck, const char *path, size_t stem, unsigned nfiles, tpc_gguf_kvs *kv, tpc_err *e)
{
	int ret = 0;
	int64_t tcount = -1;
	size_t first = ck->n, plen = stem + 32;
	char *p = tpc_malloc(plen);
	if (!p)
		return tpc_err_nomem(e);
	for (unsigned k = 0; k < nfiles && !ret; k++) {
		tpc_gguf_kvs other = {0};
		memcpy(p, path, stem);
		snprintf(p + stem, plen - stem, "-%05u-of-%05u.gguf", k + 1, nfiles);
		/* the first file holds the model's keys; the others only split.* */
		ret = open_one(ck, p, k ? &other : kv, e);
		if (!ret)
			ret = check_split(k ? &other : kv, p, k, nfiles, &tcount, e);
		tpc_gguf_kvs_release(&other);
	}
	if (!ret && (uint64_t)(ck->n - first) != (uint64_t)tcount)
		ret = TPC_CORRUPT(e, path, 0, NULL, "the set holds %zu tensors but split.tensors.count says %lld",
				  ck->n - first, (long long)tcount);
	free(p);
	return ret;
}

static int gg_open(tpc_ckpt *ck, const char *path, const tpc_open_opts *o, tpc_err *e)
{
	tpc_gguf_kvs *kv = tpc_calloc(1, sizeof(*kv));
	size_t stem;
	unsigned k = 0, n = 0;
	int ret;
	if (!kv)
		return tpc_err_nomem(e);
	bool set = split_name(path, &stem, &k, &n) && n > 1;
	ret = set ? gg_open_set(ck, path, stem, n, kv, e) : open_one(ck, path, kv, e);
	if (!ret && !set && tpc_gguf_kvs_find(kv, "split.count") >= 0) {
		bool bad = false;
		int64_t c = split_key(kv, "split.count", TPC_GV_U16, &bad);
		if (bad || c != 1)
			ret = TPC_CORRUPT(e, path, 0, NULL,
					  "a file of a gguf-split set (split.count %lld) whose name is not NAME-0000K-of-0000N.gguf",
					  (long long)c);
	}
	if (!ret)
		ret = tpc_ckpt_validate(ck, e);
	if (!ret && o && (o->flags & TPC_OPEN_HF_NAMES) && is_adapter(kv))
		ret = tpc_err_at(e, TPC_EINPUT, path, NULL,
				 "an adapter GGUF (general.type \"adapter\"): convert it with --base BASE (the base model's folder) "
				 "to get its PEFT adapter, or keep its GGUF names with --gguf-names");
	else if (!ret && o && (o->flags & TPC_OPEN_HF_NAMES))
		ret = tpc__gguf_to_hf(ck, kv, e); /* gguf_hf.c */
	if (!ret) {
		/* the checkpoint is the whole model: a writer adds split.* anew */
		tpc_gguf_kvs_del(kv, "split.no");
		tpc_gguf_kvs_del(kv, "split.count");
		tpc_gguf_kvs_del(kv, "split.tensors.count");
		set_about(ck, kv, set ? n : 1);
		ck->ext = kv;
		ck->ext_tag = "gguf";
		ck->ext_free = kvs_free_ext;
		return 0;
	}
	kvs_free_ext(kv);
	return ret;
}

static const char *const gg_exts[] = {".gguf", NULL};

const tpc_format tpc_fmt_gguf = {
	.name = "gguf", .desc = "GGUF (llama.cpp), gguf-split sets too",
	.detect = detect, .open = gg_open, .write = tpc__gguf_write_fmt, .exts = gg_exts, .self_split = true,
	.hf_config = tpc__gguf_hf_config, .hf_tokenizer = tpc__gguf_hf_tokenizer,
	.lora_to_peft = tpc__gguf_lora_to_peft,
};
