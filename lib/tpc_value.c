/*
 * tpc_value.c - the refcounted value tree and its JSON text; see tpc_value.h.
 *
 * Trees come from untrusted pickles, so nothing here recurses on the C stack
 * over a tree: release threads dead nodes through a field they no longer need,
 * equality and JSON encoding keep their own work stacks. Only JSON decoding
 * recurses, over cJSON's tree, whose depth cJSON caps (CJSON_NESTING_LIMIT).
 */
#include "tpc_value.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_buf.h"
#include "tpc_err.h"
#include "tpc_util.h"

/*
 * The private extension behind `index`: a DICT's open-addressing hash index,
 * built once the dict passes INDEX_MIN entries so that 100k-entry state dicts
 * stay O(n), and the origin CALL of a LIST or DICT. Keys are never removed, so
 * the index needs no tombstones.
 */
typedef struct vext {
	size_t *slot;  /* key position + 1; 0 = empty; NULL when no index */
	size_t nslot;  /* power of two, more than twice the key count */
	tpc_value *origin;
} vext;

#define INDEX_MIN 16

/* ---- hashing and key equality ---- */


static uint64_t hash_str(tpc_vkind kind, const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return tpc_mix64(h ^ (uint64_t)kind);
}

/* Python's dict hashes -0.0 like 0.0; NaN keys match only their own bits. */
static uint64_t key_hash(const tpc_value *k)
{
	uint64_t bits;
	switch (k->kind) {
	case TPC_V_NONE:
		return tpc_mix64(0x4e4f4e45);
	case TPC_V_BOOL:
	case TPC_V_INT:
	case TPC_V_TENSOR:
		return tpc_mix64((uint64_t)k->ival ^ ((uint64_t)k->kind << 58));
	case TPC_V_FLOAT:
		if (k->fval == 0.0)
			return tpc_mix64(TPC_V_FLOAT);
		memcpy(&bits, &k->fval, sizeof(bits));
		return tpc_mix64(bits);
	case TPC_V_STR:
	case TPC_V_BYTES:
	case TPC_V_BIGINT:
	case TPC_V_GLOBAL:
		return hash_str(k->kind, k->str, k->len);
	default:
		return tpc_mix64((uint64_t)(uintptr_t)k);
	}
}

static bool float_same(double a, double b)
{
	return memcmp(&a, &b, sizeof(a)) == 0;
}

/* Dict key equality (tpc_value.h): same kind and scalar, containers by identity. */
static bool key_equal(const tpc_value *a, const tpc_value *b)
{
	if (a == b)
		return true;
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case TPC_V_NONE:
		return true;
	case TPC_V_BOOL:
	case TPC_V_INT:
	case TPC_V_TENSOR:
		return a->ival == b->ival;
	case TPC_V_FLOAT:
		return a->fval == b->fval || float_same(a->fval, b->fval);
	case TPC_V_GLOBAL:
		if (a->ival != b->ival)
			return false;
		/* fall through */
	case TPC_V_STR:
	case TPC_V_BYTES:
	case TPC_V_BIGINT:
		return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
	default:
		return false;
	}
}

/* ---- construction ---- */

tpc_value *tpc_value_new(tpc_vkind kind)
{
	tpc_value *v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	v->kind = kind;
	v->refs = 1;
	return v;
}

/* an INT, BOOL or FLOAT: ival and fval hold the number (the other field 0) */
static tpc_value *scalar(tpc_vkind kind, int64_t i, double f)
{
	tpc_value *v = tpc_value_new(kind);
	if (v) {
		v->ival = i;
		v->fval = f;
	}
	return v;
}

tpc_value *tpc_value_int(int64_t x)
{
	return scalar(TPC_V_INT, x, 0);
}

tpc_value *tpc_value_bool(int x)
{
	return scalar(TPC_V_BOOL, x ? 1 : 0, 0);
}

tpc_value *tpc_value_float(double x)
{
	return scalar(TPC_V_FLOAT, 0, x);
}

static tpc_value *new_blob(tpc_vkind kind, const void *p, size_t len)
{
	tpc_value *v = tpc_value_new(kind);
	if (!v || len == SIZE_MAX)
		goto fail;
	v->str = malloc(len + 1);
	if (!v->str)
		goto fail;
	if (len)
		memcpy(v->str, p, len);
	v->str[len] = '\0';
	v->len = len;
	return v;
fail:
	free(v);
	return NULL;
}

tpc_value *tpc_value_str(const char *s, size_t len)
{
	return new_blob(TPC_V_STR, s, len);
}

tpc_value *tpc_value_bytes(const void *p, size_t len)
{
	return new_blob(TPC_V_BYTES, p, len);
}

tpc_value *tpc_value_global(const char *module, const char *name)
{
	size_t ml = strlen(module), nl = strlen(name);
	tpc_value *v = tpc_value_new(TPC_V_GLOBAL);
	if (!v || ml > SIZE_MAX / 2 || nl > SIZE_MAX / 2)
		goto fail;
	v->str = malloc(ml + nl + 2);
	if (!v->str)
		goto fail;
	memcpy(v->str, module, ml);
	v->str[ml] = '.';
	memcpy(v->str + ml + 1, name, nl);
	v->str[ml + 1 + nl] = '\0';
	v->len = ml + 1 + nl;
	v->ival = (int64_t)ml;
	return v;
fail:
	free(v);
	return NULL;
}

size_t tpc_value_global_split(const tpc_value *g, const char **name)
{
	size_t ml = 0;
	if (g && g->kind == TPC_V_GLOBAL && g->str) {
		if (g->ival >= 0 && (uint64_t)g->ival < g->len && g->str[g->ival] == '.') {
			ml = (size_t)g->ival;
		} else {
			const char *dot = strrchr(g->str, '.');
			ml = dot ? (size_t)(dot - g->str) : g->len;
		}
	}
	if (name)
		*name = (g && g->str) ? g->str + (ml < g->len ? ml + 1 : ml) : "";
	return ml;
}

tpc_value *tpc_value_tensor(int64_t index)
{
	tpc_value *v = tpc_value_new(TPC_V_TENSOR);
	if (v)
		v->ival = index;
	return v;
}

tpc_value *tpc_value_ref(tpc_value *v)
{
	/* A saturated count pins the node for good: a leak, never a use after free. */
	if (v && v->refs < UINT32_MAX)
		v->refs++;
	return v;
}

/* ---- release ---- */

/*
 * A node whose count reaches zero is pushed on `pending`, linked through its
 * `str` field (its string is freed first), and its children are dropped when it
 * is popped: no recursion, no allocation, any depth.
 */
static void drop(tpc_value *v, tpc_value **pending)
{
	if (!v || v->refs == UINT32_MAX)
		return;
	if (--v->refs)
		return;
	free(v->str);
	v->str = (char *)(void *)*pending;
	*pending = v;
}

void tpc_value_unref(tpc_value *v)
{
	tpc_value *pending = NULL;
	drop(v, &pending);
	while (pending) {
		tpc_value *x = pending;
		pending = (tpc_value *)(void *)x->str;
		for (size_t i = 0; i < x->n; i++) {
			if (x->items)
				drop(x->items[i], &pending);
			if (x->keys)
				drop(x->keys[i], &pending);
		}
		vext *ext = x->index;
		if (ext) {
			drop(ext->origin, &pending);
			free(ext->slot);
			free(ext);
		}
		free(x->items);
		free(x->keys);
		free(x);
	}
}

/* ---- containers ---- */

static vext *ext_of(tpc_value *v, bool create)
{
	if (!v->index && create)
		v->index = calloc(1, sizeof(vext));
	return v->index;
}

static bool is_seq(tpc_vkind k)
{
	return k == TPC_V_LIST || k == TPC_V_TUPLE || k == TPC_V_SET || k == TPC_V_CALL ||
	       k == TPC_V_STORAGE;
}

int tpc_value_append(tpc_value *seq, tpc_value *item)
{
	int ret = 0;
	if (!seq || !item || !is_seq(seq->kind)) {
		ret = -1;
		goto out;
	}
	if (seq->n == seq->cap &&
	    tpc_grow((void **)&seq->items, &seq->cap, seq->n + 1, sizeof(*seq->items))) {
		ret = -1;
		goto out;
	}
	seq->items[seq->n++] = item;
	item = NULL;
out:
	tpc_value_unref(item);
	return ret;
}

/* Position + 1 of `key` in dict `d`, or 0. */
static size_t dict_find(const tpc_value *d, const tpc_value *key, uint64_t h)
{
	const vext *x = d->index;
	if (x && x->slot) {
		size_t mask = x->nslot - 1;
		for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
			size_t s = x->slot[i];
			if (!s)
				return 0;
			if (key_equal(d->keys[s - 1], key))
				return s;
		}
	}
	for (size_t i = 0; i < d->n; i++)
		if (key_equal(d->keys[i], key))
			return i + 1;
	return 0;
}

static void index_insert(vext *x, uint64_t h, size_t pos1)
{
	size_t mask = x->nslot - 1, i = (size_t)h & mask;
	while (x->slot[i])
		i = (i + 1) & mask;
	x->slot[i] = pos1;
}

/* (Re)build the index for at least `want` keys; -1 on out of memory. */
static int index_build(tpc_value *d, vext *x, size_t want)
{
	size_t ns = 64;
	while (ns / 2 <= want) {
		if (ns > SIZE_MAX / 4 / sizeof(size_t))
			return -1;
		ns *= 2;
	}
	size_t *slot = calloc(ns, sizeof(*slot));
	if (!slot)
		return -1;
	free(x->slot);
	x->slot = slot;
	x->nslot = ns;
	for (size_t i = 0; i < d->n; i++)
		index_insert(x, key_hash(d->keys[i]), i + 1);
	return 0;
}

static int dict_grow(tpc_value *d)
{
	if (d->n < d->cap)
		return 0;
	size_t nc = d->cap ? d->cap * 2 : 8;
	if (nc < d->cap || nc > SIZE_MAX / sizeof(tpc_value *))
		return -1;
	tpc_value **it = realloc(d->items, nc * sizeof(*it));
	if (!it)
		return -1;
	d->items = it;
	tpc_value **ks = realloc(d->keys, nc * sizeof(*ks));
	if (!ks)
		return -1; /* items grew, cap did not: still consistent */
	d->keys = ks;
	d->cap = nc;
	return 0;
}

int tpc_value_set(tpc_value *d, tpc_value *key, tpc_value *val)
{
	int ret = 0;
	if (!d || d->kind != TPC_V_DICT || !key || !val) {
		ret = -1;
		goto out;
	}
	uint64_t h = key_hash(key);
	size_t pos = dict_find(d, key, h);
	if (pos) {
		/* Python keeps the first key object and replaces the value. */
		tpc_value_unref(d->items[pos - 1]);
		d->items[pos - 1] = val;
		val = NULL;
		goto out;
	}
	if (dict_grow(d)) {
		ret = -1;
		goto out;
	}
	d->keys[d->n] = key;
	d->items[d->n] = val;
	d->n++;
	key = val = NULL;
	vext *x = d->index;
	if (x && x->slot && d->n * 2 < x->nslot) {
		index_insert(x, h, d->n);
	} else if (d->n > INDEX_MIN && (x = ext_of(d, true)) != NULL) {
		if (index_build(d, x, d->n) && x->slot) {
			/* No memory for a bigger index: lookups fall back to a scan. */
			free(x->slot);
			x->slot = NULL;
			x->nslot = 0;
		}
	}
out:
	tpc_value_unref(key);
	tpc_value_unref(val);
	return ret;
}

tpc_value *tpc_value_get(const tpc_value *d, const char *key)
{
	if (!d || d->kind != TPC_V_DICT || !key)
		return NULL;
	tpc_value k = {.kind = TPC_V_STR, .str = (char *)key, .len = strlen(key)};
	size_t pos = dict_find(d, &k, key_hash(&k));
	return pos ? d->items[pos - 1] : NULL;
}

bool tpc_value_number(const tpc_value *v, double *x)
{
	if (v && (v->kind == TPC_V_INT || v->kind == TPC_V_BOOL))
		*x = (double)v->ival;
	else if (v && v->kind == TPC_V_FLOAT)
		*x = v->fval;
	else
		return false;
	return true;
}

int tpc_value_set_origin(tpc_value *v, tpc_value *call)
{
	int ret = 0;
	vext *x;
	if (!v || (v->kind != TPC_V_LIST && v->kind != TPC_V_DICT) ||
	    (call && call->kind != TPC_V_CALL) || call == v) {
		ret = -1;
		goto out;
	}
	if (!call && !v->index)
		goto out;
	x = ext_of(v, true);
	if (!x) {
		ret = -1;
		goto out;
	}
	tpc_value_unref(x->origin);
	x->origin = call;
	call = NULL;
out:
	tpc_value_unref(call);
	return ret;
}

tpc_value *tpc_value_origin(const tpc_value *v)
{
	const vext *x = v ? v->index : NULL;
	if (!x || (v->kind != TPC_V_LIST && v->kind != TPC_V_DICT))
		return NULL;
	return x->origin;
}

const char *tpc_vkind_name(tpc_vkind k)
{
	static const char *const names[] = {
		"none", "bool",  "int", "bigint", "float",  "str",    "bytes",   "list",
		"tuple", "set", "dict", "global", "call", "tensor", "storage",
	};
	if ((unsigned)k < sizeof(names) / sizeof(names[0]))
		return names[k];
	return "unknown";
}

/* ---- deep equality (tests): iterative, floats compared bit for bit ---- */

int tpc_value_equal(const tpc_value *a, const tpc_value *b)
{
	const tpc_value **st = NULL;
	size_t n = 0, cap = 0;
	int eq = 1;
#define PUSH2(x, y)                                                             \
	do {                                                                    \
		if (tpc_grow((void **)&st, &cap, n + 2, sizeof(*st))) {         \
			eq = 0;                                                 \
			goto out;                                               \
		}                                                               \
		st[n++] = (x);                                                  \
		st[n++] = (y);                                                  \
	} while (0)
	PUSH2(a, b);
	while (n) {
		const tpc_value *y = st[--n], *x = st[--n];
		if (x == y)
			continue;
		if (!x || !y || x->kind != y->kind) {
			eq = 0;
			goto out;
		}
		switch (x->kind) {
		case TPC_V_FLOAT:
			if (!float_same(x->fval, y->fval))
				eq = 0;
			break;
		case TPC_V_STR:
		case TPC_V_BYTES:
		case TPC_V_BIGINT:
		case TPC_V_GLOBAL:
			if (x->len != y->len || memcmp(x->str, y->str, x->len) ||
			    (x->kind == TPC_V_GLOBAL &&
			     tpc_value_global_split(x, NULL) != tpc_value_global_split(y, NULL)))
				eq = 0;
			break;
		case TPC_V_NONE:
			break;
		case TPC_V_BOOL:
		case TPC_V_INT:
		case TPC_V_TENSOR:
			if (x->ival != y->ival)
				eq = 0;
			break;
		default:
			if (x->n != y->n) {
				eq = 0;
				break;
			}
			for (size_t i = 0; i < x->n; i++) {
				PUSH2(x->items[i], y->items[i]);
				if (x->kind == TPC_V_DICT)
					PUSH2(x->keys[i], y->keys[i]);
			}
			const tpc_value *ox = tpc_value_origin(x), *oy = tpc_value_origin(y);
			if (ox || oy)
				PUSH2(ox, oy);
			break;
		}
		if (!eq)
			goto out;
	}
out:
#undef PUSH2
	free(st);
	return eq;
}

/* ---- JSON encoding ---- */

static void add_hex(tpc_buf *b, const char *p, size_t n)
{
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		char two[2] = {hx[c >> 4], hx[c & 15]};
		tpc_buf_add(b, two, 2);
	}
}

static bool str_clean(const tpc_value *s)
{
	return tpc_utf8_valid(s->str, s->len) && !memchr(s->str, 0, s->len);
}

static void add_str(tpc_buf *b, const tpc_value *s)
{
	if (str_clean(s)) {
		tpc_buf_json_str(b, s->str, s->len, false);
	} else {
		tpc_buf_adds(b, "{\"strhex\":\"");
		add_hex(b, s->str, s->len);
		tpc_buf_adds(b, "\"}");
	}
}

#define JSON_INT_MAX ((int64_t)1 << 53)

/* A scalar (anything with no children) as JSON text. */
static void add_scalar(tpc_buf *b, const tpc_value *v, tpc_tensor_namer namer, void *ctx)
{
	const char *name;
	size_t ml;
	switch (v->kind) {
	case TPC_V_NONE:
		tpc_buf_adds(b, "null");
		break;
	case TPC_V_BOOL:
		tpc_buf_adds(b, v->ival ? "true" : "false");
		break;
	case TPC_V_INT:
		if (v->ival >= -JSON_INT_MAX && v->ival <= JSON_INT_MAX)
			tpc_buf_addf(b, "%" PRId64, v->ival);
		else
			tpc_buf_addf(b, "{\"int\":\"%" PRId64 "\"}", v->ival);
		break;
	case TPC_V_FLOAT:
		tpc_buf_addf(b, "{\"float\":\"%.17g\"}", v->fval);
		break;
	case TPC_V_STR:
		add_str(b, v);
		break;
	case TPC_V_BYTES:
	case TPC_V_BIGINT:
		tpc_buf_adds(b, v->kind == TPC_V_BYTES ? "{\"bytes\":\"" : "{\"bigint\":\"");
		add_hex(b, v->str, v->len);
		tpc_buf_adds(b, "\"}");
		break;
	case TPC_V_GLOBAL: {
		tpc_buf_adds(b, "{\"global\":");
		tpc_buf_json_str(b, v->str, v->len, false);
		ml = tpc_value_global_split(v, NULL);
		const char *dot = strrchr(v->str, '.');
		if (!dot || (size_t)(dot - v->str) != ml) {
			tpc_buf_adds(b, ",\"module\":");
			tpc_buf_json_str(b, v->str, ml, false);
		}
		tpc_buf_addc(b, '}');
		break;
	}
	case TPC_V_TENSOR:
		name = namer ? namer(ctx, v->ival) : NULL;
		tpc_buf_adds(b, "{\"tensor\":");
		if (name)
			tpc_buf_json_str(b, name, strlen(name), false);
		else
			tpc_buf_addf(b, "%" PRId64, v->ival);
		tpc_buf_addc(b, '}');
		break;
	default:
		tpc_buf_adds(b, "null");
		break;
	}
}

/*
 * Values the JSON text will hold, counting a shared subtree once per use
 * (saturating), computed over the distinct nodes. Each value takes at least
 * one byte of text, so a count past TPC_VALUE_JSON_MAX fails fast instead of
 * after writing a gigabyte. Returns UINT64_MAX on out of memory too.
 */
typedef struct cslot {
	const tpc_value *k;
	uint64_t v;
} cslot;

typedef struct cframe {
	const tpc_value *v;
	size_t j;
	uint64_t sum;
} cframe;

size_t tpc_value_nchildren(const tpc_value *v)
{
	return v->n * (v->kind == TPC_V_DICT ? 2 : 1) + (tpc_value_origin(v) ? 1 : 0);
}

tpc_value *tpc_value_child(const tpc_value *v, size_t j)
{
	if (v->kind == TPC_V_DICT) {
		if (j < 2 * v->n)
			return j % 2 ? v->items[j / 2] : v->keys[j / 2];
	} else if (j < v->n) {
		return v->items[j];
	}
	return tpc_value_origin(v);
}

static cslot *cfind(cslot *t, size_t mask, const tpc_value *k)
{
	size_t i = (size_t)tpc_mix64((uint64_t)(uintptr_t)k) & mask;
	while (t[i].k && t[i].k != k)
		i = (i + 1) & mask;
	return &t[i];
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t expanded_count(const tpc_value *root)
{
	cslot *t = NULL;
	size_t tcap = 0, tn = 0;
	cframe *st = NULL;
	size_t n = 0, cap = 0;
	uint64_t ret = UINT64_MAX;
	if (!root || !tpc_value_nchildren(root))
		return 1;
	if (tpc_grow((void **)&st, &cap, 1, sizeof(*st)))
		goto out;
	st[n++] = (cframe){root, 0, 1};
	while (n) {
		cframe *f = &st[n - 1];
		if (f->j < tpc_value_nchildren(f->v)) {
			const tpc_value *c = tpc_value_child(f->v, f->j++);
			if (!c || !tpc_value_nchildren(c)) {
				f->sum = sat_add(f->sum, 1);
				continue;
			}
			cslot *s = tcap ? cfind(t, tcap - 1, c) : NULL;
			if (s && s->k) {
				f->sum = sat_add(f->sum, s->v);
				continue;
			}
			if (tpc_grow((void **)&st, &cap, n + 1, sizeof(*st)))
				goto out;
			st[n++] = (cframe){c, 0, 1};
			continue;
		}
		if ((tn + 1) * 2 > tcap) {
			size_t nc = tcap ? tcap * 2 : 64;
			cslot *big = calloc(nc, sizeof(*big));
			if (!big)
				goto out;
			for (size_t i = 0; i < tcap; i++)
				if (t[i].k)
					*cfind(big, nc - 1, t[i].k) = t[i];
			free(t);
			t = big;
			tcap = nc;
		}
		cslot *s = cfind(t, tcap - 1, f->v);
		s->k = f->v;
		s->v = f->sum;
		tn++;
		uint64_t done = f->sum;
		n--;
		if (n)
			st[n - 1].sum = sat_add(st[n - 1].sum, done);
		else
			ret = done;
	}
out:
	free(st);
	free(t);
	return ret;
}

typedef struct jframe {
	const tpc_value *v;
	const tpc_value *origin;
	size_t i, nchild;
	bool strkeys; /* DICT written as {"dict": {...}} */
} jframe;

static bool has_children(const tpc_value *v)
{
	switch (v->kind) {
	case TPC_V_LIST:
	case TPC_V_TUPLE:
	case TPC_V_SET:
	case TPC_V_DICT:
	case TPC_V_CALL:
	case TPC_V_STORAGE:
		return true;
	default:
		return false;
	}
}

/* Open a container: write its prefix and fill in the frame. */
static void open_frame(tpc_buf *b, jframe *f, const tpc_value *v)
{
	memset(f, 0, sizeof(*f));
	f->v = v;
	f->origin = tpc_value_origin(v);
	switch (v->kind) {
	case TPC_V_LIST:
		tpc_buf_adds(b, f->origin ? "{\"list\":[" : "[");
		f->nchild = v->n + (f->origin ? 1 : 0);
		break;
	case TPC_V_TUPLE:
	case TPC_V_SET:
	case TPC_V_CALL:
		tpc_buf_adds(b, v->kind == TPC_V_TUPLE ? "{\"tuple\":[" : v->kind == TPC_V_SET ? "{\"set\":[" : "{\"call\":[");
		f->nchild = v->n;
		break;
	case TPC_V_STORAGE:
		tpc_buf_adds(b, "{\"storage\":");
		if (!v->n)
			tpc_buf_adds(b, "null");
		f->nchild = v->n ? 1 : 0;
		break;
	case TPC_V_DICT:
		f->strkeys = true;
		for (size_t i = 0; i < v->n && f->strkeys; i++)
			f->strkeys = v->keys[i]->kind == TPC_V_STR && str_clean(v->keys[i]);
		tpc_buf_adds(b, f->strkeys ? "{\"dict\":{" : "{\"dict_items\":[");
		f->nchild = (f->strkeys ? v->n : 2 * v->n) + (f->origin ? 1 : 0);
		break;
	default:
		break;
	}
}

/* Write what goes before child j and return the child. */
static const tpc_value *next_child(tpc_buf *b, jframe *f)
{
	const tpc_value *v = f->v;
	size_t j = f->i++;
	switch (v->kind) {
	case TPC_V_LIST:
		if (j == v->n) {
			tpc_buf_adds(b, "],\"origin\":");
			return f->origin;
		}
		break;
	case TPC_V_STORAGE:
		return v->items[0];
	case TPC_V_DICT:
		if (f->strkeys) {
			if (j == v->n) {
				tpc_buf_adds(b, "},\"origin\":");
				return f->origin;
			}
			if (j)
				tpc_buf_addc(b, ',');
			tpc_buf_json_str(b, v->keys[j]->str, v->keys[j]->len, false);
			tpc_buf_addc(b, ':');
			return v->items[j];
		}
		if (j == 2 * v->n) {
			tpc_buf_adds(b, v->n ? "]],\"origin\":" : "],\"origin\":");
			return f->origin;
		}
		if (j % 2) {
			tpc_buf_addc(b, ',');
			return v->items[j / 2];
		}
		tpc_buf_adds(b, j ? "],[" : "[");
		return v->keys[j / 2];
	default:
		break;
	}
	if (j)
		tpc_buf_addc(b, ',');
	return v->items[j];
}

static void close_frame(tpc_buf *b, const jframe *f)
{
	const tpc_value *v = f->v;
	if (f->origin) {
		tpc_buf_addc(b, '}');
		return;
	}
	switch (v->kind) {
	case TPC_V_LIST:
		tpc_buf_addc(b, ']');
		break;
	case TPC_V_STORAGE:
		tpc_buf_addc(b, '}');
		break;
	case TPC_V_DICT:
		if (f->strkeys)
			tpc_buf_adds(b, "}}");
		else
			tpc_buf_adds(b, v->n ? "]]}" : "]}");
		break;
	default:
		tpc_buf_adds(b, "]}");
		break;
	}
}

char *tpc_value_to_json(const tpc_value *v, tpc_tensor_namer namer, void *ctx)
{
	tpc_buf b = TPC_BUF_INIT;
	jframe *st = NULL;
	size_t n = 0, cap = 0;
	char *ret = NULL;
	const tpc_value *cur = v;
	if (expanded_count(v) > TPC_VALUE_JSON_MAX)
		goto out;
	for (;;) {
		if (!cur) {
			tpc_buf_adds(&b, "null"); /* a hand-built tree with a hole */
		} else if (has_children(cur)) {
			if (tpc_grow((void **)&st, &cap, n + 1, sizeof(*st)))
				goto out;
			open_frame(&b, &st[n++], cur);
		} else {
			add_scalar(&b, cur, namer, ctx);
		}
		if (b.oom || b.len > TPC_VALUE_JSON_MAX)
			goto out;
		bool more = false;
		while (n) {
			jframe *f = &st[n - 1];
			if (f->i < f->nchild) {
				cur = next_child(&b, f);
				more = true;
				break;
			}
			close_frame(&b, f);
			n--;
		}
		if (!more)
			break;
	}
	if (b.oom || b.len > TPC_VALUE_JSON_MAX)
		goto out;
	ret = tpc_buf_detach(&b, NULL);
out:
	free(st);
	tpc_buf_release(&b);
	return ret;
}

/* ---- JSON decoding ---- */

typedef struct jdec {
	tpc_tensor_resolver resolve;
	void *ctx;
	tpc_err *e;
} jdec;

#define JBAD(d, ...) TPC_CORRUPT((d)->e, NULL, -1, NULL, __VA_ARGS__)

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static tpc_value *from_hex(jdec *d, tpc_vkind kind, const cJSON *j, const char *tag)
{
	const char *s = cJSON_GetStringValue(j);
	tpc_value *v = NULL;
	char *raw = NULL;
	if (!s) {
		JBAD(d, "value json: \"%s\" needs a hex string", tag);
		goto out;
	}
	size_t n = strlen(s);
	if (n % 2) {
		JBAD(d, "value json: \"%s\" hex string has an odd length", tag);
		goto out;
	}
	raw = malloc(n / 2 + 1);
	if (!raw) {
		tpc_err_nomem(d->e);
		goto out;
	}
	for (size_t i = 0; i < n; i += 2) {
		int hi = hexval(s[i]), lo = hexval(s[i + 1]);
		if (hi < 0 || lo < 0) {
			JBAD(d, "value json: \"%s\" holds a non-hex character", tag);
			goto out;
		}
		raw[i / 2] = (char)(hi << 4 | lo);
	}
	v = new_blob(kind, raw, n / 2);
	if (!v)
		tpc_err_nomem(d->e);
out:
	free(raw);
	return v;
}

static tpc_value *from_cj(jdec *d, const cJSON *j);

/* Fill container `c` (LIST TUPLE SET CALL) from a JSON array. */
static int fill_seq(jdec *d, tpc_value *c, const cJSON *arr, const char *tag)
{
	if (!cJSON_IsArray(arr))
		return JBAD(d, "value json: \"%s\" needs an array", tag);
	const cJSON *it;
	cJSON_ArrayForEach(it, arr) {
		tpc_value *x = from_cj(d, it);
		if (!x)
			return TPC_EINPUT;
		if (tpc_value_append(c, x))
			return tpc_err_nomem(d->e);
	}
	return 0;
}

static int dict_put(jdec *d, tpc_value *dict, tpc_value *k, tpc_value *val)
{
	size_t before = dict->n;
	if (tpc_value_set(dict, k, val))
		return tpc_err_nomem(d->e);
	if (dict->n == before)
		return JBAD(d, "value json: duplicate dict key");
	return 0;
}

/* The error for a JSON object that is not a well-formed tagged value. */
static int bad_object(jdec *d, const char *tag)
{
	return JBAD(d, "value json: malformed or unknown tagged object {\"%s\": ...}", tag ? tag : "");
}

/* The member of object j that is its tag: the one that is neither "origin"
 * (list, dict and dict_items take one) nor "module" (global takes one).
 * NULL, reported, when there is no such single member. */
static const cJSON *object_tag(jdec *d, const cJSON *j, const cJSON *origin, const cJSON *module)
{
	const cJSON *a = j->child;
	int count = cJSON_GetArraySize(j);
	while (a && (a == origin || a == module))
		a = a->next;
	if (!a || !a->string) {
		bad_object(d, "");
		return NULL;
	}
	const char *tag = a->string;
	if ((origin && (strcmp(tag, "list") && strcmp(tag, "dict") && strcmp(tag, "dict_items"))) ||
	    (module && strcmp(tag, "global")) || count != 1 + (origin ? 1 : 0) + (module ? 1 : 0)) {
		bad_object(d, tag);
		return NULL;
	}
	return a;
}

/* {"float": "1.5"}, {"int": "-3"}, {"global": "mod.name"} (with "module":
 * where the module's name ends), {"tensor": "name" or index}; any other tag
 * is refused. */
static tpc_value *from_scalar(jdec *d, const cJSON *a, const char *tag, const cJSON *module)
{
	tpc_value *v = NULL;
	char *end = NULL;
	if (!strcmp(tag, "float")) {
		const char *s = cJSON_GetStringValue(a);
		if (!s || !*s)
			goto bad;
		double x = strtod(s, &end);
		if (*end)
			goto bad;
		v = tpc_value_float(x);
	} else if (!strcmp(tag, "int")) {
		const char *s = cJSON_GetStringValue(a);
		if (!s || !*s)
			goto bad;
		errno = 0;
		long long x = strtoll(s, &end, 10);
		if (*end || errno)
			goto bad;
		v = tpc_value_int((int64_t)x);
	} else if (!strcmp(tag, "global")) {
		const char *s = cJSON_GetStringValue(a), *dot;
		if (!s || !(dot = strrchr(s, '.')))
			goto bad;
		size_t ml = (size_t)(dot - s);
		if (module) {
			const char *m = cJSON_GetStringValue(module);
			if (!m || (ml = strlen(m)) >= strlen(s) || strncmp(s, m, ml) || s[ml] != '.')
				goto bad;
		}
		v = tpc_value_str(s, strlen(s));
		if (v) {
			v->kind = TPC_V_GLOBAL;
			v->ival = (int64_t)ml;
		}
	} else if (!strcmp(tag, "tensor")) {
		int64_t idx = -1;
		if (cJSON_IsString(a)) {
			if (d->resolve)
				idx = d->resolve(d->ctx, a->valuestring);
			if (idx < 0) {
				JBAD(d, "value json: unknown tensor '%s'", a->valuestring);
				return NULL;
			}
		} else if (cJSON_IsNumber(a) && a->valuedouble >= 0 &&
			   a->valuedouble <= (double)JSON_INT_MAX &&
			   a->valuedouble == floor(a->valuedouble)) {
			idx = (int64_t)a->valuedouble;
		} else {
			goto bad;
		}
		v = tpc_value_tensor(idx);
	} else {
		goto bad;
	}
	if (!v)
		tpc_err_nomem(d->e);
	return v;
bad:
	bad_object(d, tag);
	return NULL;
}

/* {"storage": persistent id}. */
static tpc_value *from_storage(jdec *d, const cJSON *a)
{
	tpc_value *pid = from_cj(d, a);
	if (!pid)
		return NULL;
	tpc_value *v = tpc_value_new(TPC_V_STORAGE);
	if (v && tpc_value_append(v, pid)) {
		tpc_value_unref(v);
		v = NULL;
	} else if (!v) {
		tpc_value_unref(pid);
	}
	if (!v)
		tpc_err_nomem(d->e);
	return v;
}

/* {"tuple" | "set" | "call" | "list": [...]}; a call is [callable, args]
 * or [callable, args, state]. */
static tpc_value *from_seq(jdec *d, const cJSON *a, const char *tag)
{
	tpc_vkind k = tag[0] == 't' ? TPC_V_TUPLE
		      : tag[0] == 's' ? TPC_V_SET
		      : tag[0] == 'c' ? TPC_V_CALL
				      : TPC_V_LIST;
	tpc_value *v = tpc_value_new(k);
	if (!v) {
		tpc_err_nomem(d->e);
		return NULL;
	}
	if (fill_seq(d, v, a, tag))
		goto fail;
	if (k == TPC_V_CALL && (v->n < 2 || v->n > 3)) {
		bad_object(d, tag);
		goto fail;
	}
	return v;
fail:
	tpc_value_unref(v);
	return NULL;
}

/* {"dict": {"key": value, ...}} (string keys) or {"dict_items": [[key,
 * value], ...]} (keys of any kind). */
static tpc_value *from_dict(jdec *d, const cJSON *a, const char *tag)
{
	bool items = !strcmp(tag, "dict_items");
	if (items ? !cJSON_IsArray(a) : !cJSON_IsObject(a)) {
		bad_object(d, tag);
		return NULL;
	}
	tpc_value *v = tpc_value_new(TPC_V_DICT);
	if (!v) {
		tpc_err_nomem(d->e);
		return NULL;
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, a) {
		tpc_value *k, *val;
		if (items) {
			if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2) {
				bad_object(d, tag);
				goto fail;
			}
			k = from_cj(d, it->child);
			val = k ? from_cj(d, it->child->next) : NULL;
		} else {
			k = tpc_value_str(it->string, strlen(it->string));
			if (!k) {
				tpc_err_nomem(d->e);
				goto fail;
			}
			val = from_cj(d, it);
		}
		if (!k || !val) {
			tpc_value_unref(k);
			goto fail;
		}
		if (dict_put(d, v, k, val))
			goto fail;
	}
	return v;
fail:
	tpc_value_unref(v);
	return NULL;
}

/* v's "origin": the call that rebuilds it (a list or dict subclass). */
static int attach_origin(jdec *d, tpc_value *v, const cJSON *origin, const char *tag)
{
	tpc_value *o = from_cj(d, origin);
	if (!o)
		return -1;
	if (o->kind != TPC_V_CALL) {
		tpc_value_unref(o);
		bad_object(d, tag);
		return -1;
	}
	if (tpc_value_set_origin(v, o)) {
		tpc_err_nomem(d->e);
		return -1;
	}
	return 0;
}

/* A tagged object: {"TAG": ...}, with "origin" (the call that rebuilds a
 * list or dict subclass) and "module" beside the tag where it takes them. */
static tpc_value *from_object(jdec *d, const cJSON *j)
{
	const cJSON *origin = cJSON_GetObjectItemCaseSensitive(j, "origin");
	const cJSON *module = cJSON_GetObjectItemCaseSensitive(j, "module");
	const cJSON *a = object_tag(d, j, origin, module);
	tpc_value *v;
	if (!a)
		return NULL;
	const char *tag = a->string;
	if (!strcmp(tag, "bytes"))
		return from_hex(d, TPC_V_BYTES, a, tag);
	if (!strcmp(tag, "bigint"))
		return from_hex(d, TPC_V_BIGINT, a, tag);
	if (!strcmp(tag, "strhex"))
		return from_hex(d, TPC_V_STR, a, tag);
	if (!strcmp(tag, "storage"))
		v = from_storage(d, a);
	else if (!strcmp(tag, "tuple") || !strcmp(tag, "set") || !strcmp(tag, "call") || !strcmp(tag, "list"))
		v = from_seq(d, a, tag);
	else if (!strcmp(tag, "dict") || !strcmp(tag, "dict_items"))
		v = from_dict(d, a, tag);
	else
		v = from_scalar(d, a, tag, module);
	if (v && origin && attach_origin(d, v, origin, tag)) {
		tpc_value_unref(v);
		return NULL;
	}
	return v;
}

static tpc_value *from_cj(jdec *d, const cJSON *j)
{
	tpc_value *v = NULL;
	if (cJSON_IsNull(j)) {
		v = tpc_value_new(TPC_V_NONE);
	} else if (cJSON_IsTrue(j) || cJSON_IsFalse(j)) {
		v = tpc_value_bool(cJSON_IsTrue(j));
	} else if (cJSON_IsNumber(j)) {
		double x = j->valuedouble;
		if (x == floor(x) && fabs(x) <= (double)JSON_INT_MAX)
			v = tpc_value_int((int64_t)x);
		else
			v = tpc_value_float(x);
	} else if (cJSON_IsString(j)) {
		v = tpc_value_str(j->valuestring, strlen(j->valuestring));
	} else if (cJSON_IsArray(j)) {
		v = tpc_value_new(TPC_V_LIST);
		if (v && fill_seq(d, v, j, "list")) {
			tpc_value_unref(v);
			return NULL;
		}
	} else if (cJSON_IsObject(j)) {
		return from_object(d, j);
	} else {
		JBAD(d, "value json: unexpected token");
		return NULL;
	}
	if (!v)
		tpc_err_nomem(d->e);
	return v;
}

tpc_value *tpc_value_from_json(const char *text, size_t len, tpc_tensor_resolver resolve,
			       void *ctx, struct tpc_err *e)
{
	jdec d = {resolve, ctx, e};
	const char *end = NULL;
	tpc_value *v = NULL;
	cJSON *root = NULL;
	if (!text) {
		JBAD(&d, "value json: no text");
		goto out;
	}
	root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (!root) {
		long long at = end && end >= text ? (long long)(end - text) : -1;
		TPC_CORRUPT(e, NULL, at, NULL,
			    "value json: malformed, or nested deeper than %d levels",
			    CJSON_NESTING_LIMIT);
		goto out;
	}
	for (const char *p = end; p && p < text + len; p++) {
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\0') {
			TPC_CORRUPT(e, NULL, (int64_t)(p - text), NULL,
				    "value json: trailing characters after the value");
			goto out;
		}
	}
	v = from_cj(&d, root);
out:
	cJSON_Delete(root);
	return v;
}
