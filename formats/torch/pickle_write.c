/*
 * pickle_write.c - protocol-2 pickle writer; see pickle.h.
 *
 * The output copies CPython's C pickler (Modules/_pickle.c, protocol 2) so that
 * a tree read from a torch file is written back as the same bytes: the integer
 * opcode by range, a memo entry after every string, global, non-empty tuple,
 * list, dict and call result, batch_list_exact / batch_dict_exact for plain
 * lists and dicts and the iterator batching of batch_list / batch_dict for the
 * items of objects made by a call (OrderedDict, dict subclasses). The tree is
 * walked with an explicit stack, so any depth is fine.
 */
#include "pickle.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"

#define BATCH 1000

typedef struct wpriv {
	tpc__u64map ids;   /* node -> memo index */
	tpc__strmap names; /* "g" module "\n" name, or "s" string -> memo index */
} wpriv;

void tpc_pickle_writer_init(tpc_pickle_writer *w, tpc_buf *out)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
}

void tpc_pickle_writer_release(tpc_pickle_writer *w)
{
	wpriv *pv = w->priv;
	if (pv) {
		tpc__u64map_release(&pv->ids);
		tpc__strmap_release(&pv->names);
		free(pv);
	}
	w->priv = NULL;
}

static wpriv *priv(tpc_pickle_writer *w)
{
	if (!w->priv && !(w->priv = calloc(1, sizeof(wpriv))))
		w->oom = true;
	return w->priv;
}

static void put1(tpc_pickle_writer *w, uint8_t b)
{
	tpc_buf_add(w->out, &b, 1);
}

void tpc_pickle_emit_op(tpc_pickle_writer *w, uint8_t op)
{
	put1(w, op);
}

void tpc_pickle_emit_proto(tpc_pickle_writer *w)
{
	static const uint8_t p[2] = {TPC_PK_PROTO, 2};
	tpc_buf_add(w->out, p, 2);
}

void tpc_pickle_emit_none(tpc_pickle_writer *w)
{
	put1(w, TPC_PK_NONE);
}

void tpc_pickle_emit_bool(tpc_pickle_writer *w, bool v)
{
	put1(w, v ? TPC_PK_NEWTRUE : TPC_PK_NEWFALSE);
}

void tpc_pickle_emit_long(tpc_pickle_writer *w, const uint8_t *le, size_t n)
{
	uint8_t h[5];
	if (n < 256) {
		h[0] = TPC_PK_LONG1;
		h[1] = (uint8_t)n;
		tpc_buf_add(w->out, h, 2);
	} else if (n <= INT32_MAX) {
		h[0] = TPC_PK_LONG4;
		tpc_wr32le(h + 1, (uint32_t)n);
		tpc_buf_add(w->out, h, 5);
	} else {
		w->oom = true; /* cannot be expressed; reported as a failure */
		return;
	}
	tpc_buf_add(w->out, le, n);
}

/* CPython's encode_long: (bit_length >> 3) + 1 bytes, one trimmed when a
 * negative number's top byte is a redundant 0xff. */
void tpc_pickle_emit_int(tpc_pickle_writer *w, int64_t v)
{
	uint8_t b[9];
	if (v >= 0 && v <= 0xff) {
		b[0] = TPC_PK_BININT1;
		b[1] = (uint8_t)v;
		tpc_buf_add(w->out, b, 2);
		return;
	}
	if (v >= 0 && v <= 0xffff) {
		b[0] = TPC_PK_BININT2;
		tpc_wr16le(b + 1, (uint16_t)v);
		tpc_buf_add(w->out, b, 3);
		return;
	}
	if (v >= INT32_MIN && v <= INT32_MAX) {
		b[0] = TPC_PK_BININT;
		tpc_wr32le(b + 1, (uint32_t)(int32_t)v);
		tpc_buf_add(w->out, b, 5);
		return;
	}
	uint64_t mag = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
	size_t bits = 64 - (size_t)__builtin_clzll(mag), nb = (bits >> 3) + 1;
	for (size_t i = 0; i < nb; i++)
		b[i] = i < 8 ? (uint8_t)((uint64_t)v >> (8 * i)) : (v < 0 ? 0xff : 0x00);
	if (v < 0 && nb > 1 && b[nb - 1] == 0xff && (b[nb - 2] & 0x80))
		nb--;
	tpc_pickle_emit_long(w, b, nb);
}

void tpc_pickle_emit_float(tpc_pickle_writer *w, double v)
{
	uint8_t b[9];
	uint64_t u;
	memcpy(&u, &v, sizeof(u));
	b[0] = TPC_PK_BINFLOAT;
	for (int i = 0; i < 8; i++)
		b[1 + i] = (uint8_t)(u >> (56 - 8 * i));
	tpc_buf_add(w->out, b, 9);
}

uint32_t tpc_pickle_emit_put(tpc_pickle_writer *w)
{
	uint8_t b[5];
	uint32_t idx = w->memo_next;
	if (idx == UINT32_MAX)
		return UINT32_MAX; /* memo full: the object simply is not memoized */
	if (idx < 256) {
		b[0] = TPC_PK_BINPUT;
		b[1] = (uint8_t)idx;
		tpc_buf_add(w->out, b, 2);
	} else {
		b[0] = TPC_PK_LONG_BINPUT;
		tpc_wr32le(b + 1, idx);
		tpc_buf_add(w->out, b, 5);
	}
	w->memo_next++;
	return idx;
}

void tpc_pickle_emit_get(tpc_pickle_writer *w, uint32_t idx)
{
	uint8_t b[5];
	if (idx < 256) {
		b[0] = TPC_PK_BINGET;
		b[1] = (uint8_t)idx;
		tpc_buf_add(w->out, b, 2);
	} else {
		b[0] = TPC_PK_LONG_BINGET;
		tpc_wr32le(b + 1, idx);
		tpc_buf_add(w->out, b, 5);
	}
}

/* Memoize the object just written under a node identity. */
static void put_node(tpc_pickle_writer *w, const void *node)
{
	uint32_t idx = tpc_pickle_emit_put(w);
	wpriv *pv = priv(w);
	if (idx != UINT32_MAX && pv && tpc__u64map_put(&pv->ids, (uintptr_t)node, idx))
		w->oom = true;
}

/* Memoize the object just written under a name key. */
static void put_name(tpc_pickle_writer *w, const char *key, size_t n)
{
	uint32_t idx = tpc_pickle_emit_put(w);
	wpriv *pv = priv(w);
	if (idx != UINT32_MAX && pv && tpc__strmap_put(&pv->names, key, n, idx))
		w->oom = true;
}

/* Emit the memo fetch for a name key if it was written before. */
static bool get_name(tpc_pickle_writer *w, const char *key, size_t n)
{
	wpriv *pv = priv(w);
	uint64_t *at = pv ? tpc__strmap_get(&pv->names, key, n) : NULL;
	if (at)
		tpc_pickle_emit_get(w, (uint32_t)*at);
	return at != NULL;
}

static void binunicode(tpc_pickle_writer *w, const char *s, size_t n)
{
	uint8_t h[5];
	if (n > UINT32_MAX) {
		w->oom = true; /* protocol 2 has no longer string */
		return;
	}
	h[0] = TPC_PK_BINUNICODE;
	tpc_wr32le(h + 1, (uint32_t)n);
	tpc_buf_add(w->out, h, 5);
	tpc_buf_add(w->out, s, n);
}

void tpc_pickle_emit_str(tpc_pickle_writer *w, const char *s, size_t n, bool shared)
{
	char *key = NULL;
	if (shared || w->share_strings) {
		key = malloc(n + 1);
		if (!key) {
			w->oom = true;
			return;
		}
		key[0] = 's';
		memcpy(key + 1, s, n);
		if (get_name(w, key, n + 1))
			goto out;
	}
	binunicode(w, s, n);
	if (key)
		put_name(w, key, n + 1);
	else
		tpc_pickle_emit_put(w);
out:
	free(key);
}

void tpc_pickle_emit_global(tpc_pickle_writer *w, const char *module, const char *name)
{
	char *key = NULL;
	tpc_pickle_unmap_name(&module, &name);
	if (!strcmp(module, "builtins"))
		module = "__builtin__";
	else if (!strcmp(module, "copyreg"))
		module = "copy_reg";
	size_t ml = strlen(module), nl = strlen(name);
	if (memchr(module, '\n', ml) || memchr(name, '\n', nl) || !ml || !nl) {
		w->oom = true; /* not expressible as GLOBAL */
		return;
	}
	key = malloc(ml + nl + 3);
	if (!key) {
		w->oom = true;
		return;
	}
	key[0] = 'g';
	memcpy(key + 1, module, ml);
	key[1 + ml] = '\n';
	memcpy(key + 2 + ml, name, nl);
	key[2 + ml + nl] = '\n';
	if (!get_name(w, key, ml + nl + 2)) {
		put1(w, TPC_PK_GLOBAL);
		tpc_buf_add(w->out, key + 1, ml + nl + 2);
		put_name(w, key, ml + nl + 2);
	}
	free(key);
}

static void emit_global_value(tpc_pickle_writer *w, const tpc_value *g)
{
	const char *name;
	size_t ml = tpc_value_global_split(g, &name);
	char *module = tpc_strndup(g->str, ml);
	if (!module) {
		w->oom = true;
		return;
	}
	tpc_pickle_emit_global(w, module, name);
	free(module);
}

/* bytes in protocol 2: _codecs.encode(<the bytes as latin-1 str>, 'latin1'). */
static void emit_bytes(tpc_pickle_writer *w, const tpc_value *v)
{
	char *s = NULL;
	size_t n = 0;
	if (v->len > SIZE_MAX / 2 || !(s = tpc_malloc(2 * v->len))) {
		w->oom = true;
		return;
	}
	for (size_t i = 0; i < v->len; i++) {
		unsigned char c = (unsigned char)v->str[i];
		if (c < 0x80) {
			s[n++] = (char)c;
		} else {
			s[n++] = (char)(0xc0 | c >> 6);
			s[n++] = (char)(0x80 | (c & 0x3f));
		}
	}
	tpc_pickle_emit_global(w, "_codecs", "encode");
	binunicode(w, s, n);
	tpc_pickle_emit_put(w);
	tpc_pickle_emit_str(w, "latin1", 6, true);
	put1(w, TPC_PK_TUPLE2);
	tpc_pickle_emit_put(w);
	put1(w, TPC_PK_REDUCE);
	free(s);
}

/* ---- the tree walk ---- */

enum stage {
	S_START,
	S_TUPLE_ITEMS, /* children of a tuple, then TUPLEn / TUPLE */
	S_HEAD,        /* callable / NEWOBJ class of f->call */
	S_HEAD_ARGS,   /* REDUCE args */
	S_HEAD_REDUCE,
	S_NEW_ARGS,    /* NEWOBJ: children args[1..] */
	S_NEW_END,
	S_AFTER_HEAD, /* memoize the object */
	S_ITEMS,
	S_SET_END,
	S_STATE,
	S_BUILD,
	S_PERSID,
	S_DONE,
};

enum batching { B_EXACT_LIST, B_ITER_LIST, B_EXACT_DICT, B_ITER_DICT };

typedef struct wframe {
	const tpc_value *v;    /* node being written */
	const tpc_value *call; /* its CALL: v itself, or v's origin */
	enum stage st;
	enum batching mode;
	size_t i;       /* next item (or child) */
	size_t left;    /* items left in the open batch */
	size_t prevlen; /* length of the previous batch; SIZE_MAX before the first */
	bool inbatch, single, half;
	bool mark_pending; /* NEWOBJ args of more than 3: MARK after the class */
} wframe;

static bool is_newobj(const tpc_value *call)
{
	const tpc_value *f = call->items[0], *a = call->items[1];
	return f && f->kind == TPC_V_GLOBAL && !strcmp(f->str, "copyreg.__newobj__") && a &&
	       a->kind == TPC_V_TUPLE && a->n >= 1;
}

static void tuple_op(tpc_pickle_writer *w, size_t n)
{
	static const uint8_t small[4] = {TPC_PK_EMPTY_TUPLE, TPC_PK_TUPLE1, TPC_PK_TUPLE2,
					 TPC_PK_TUPLE3};
	put1(w, n <= 3 ? small[n] : TPC_PK_TUPLE);
}

/* Decide the next batch (see the file comment); false when there is none. */
static bool next_batch(wframe *f, size_t n, size_t *len, bool *single)
{
	size_t r = n - f->i;
	bool first = f->prevlen == SIZE_MAX;
	*single = false;
	switch (f->mode) {
	case B_EXACT_LIST:
		if (first && n == 1) {
			*single = true;
			*len = 1;
			return true;
		}
		*len = r < BATCH ? r : BATCH;
		return r > 0;
	case B_EXACT_DICT:
		if (n == 0)
			return false;
		if (first && n == 1) {
			*single = true;
			*len = 1;
			return true;
		}
		/* CPython loops while the last batch was full: n % 1000 == 0 ends with
		 * an empty MARK SETITEMS. */
		*len = r < BATCH ? r : BATCH;
		return first || f->prevlen == BATCH;
	default:
		if (!first && f->prevlen != BATCH)
			return false;
		if (r == 0)
			return false;
		*single = r == 1;
		*len = r < BATCH ? r : BATCH;
		return true;
	}
}

/* Next child among the items, or NULL when the items are done. `*got` says
 * whether a child was returned (a child may itself be NULL: a hole). */
static const tpc_value *items_step(tpc_pickle_writer *w, wframe *f, bool *got)
{
	const tpc_value *v = f->v;
	bool dict = f->mode == B_EXACT_DICT || f->mode == B_ITER_DICT;
	*got = false;
	for (;;) {
		if (f->inbatch && f->left > 0) {
			const tpc_value *c;
			if (dict) {
				c = f->half ? v->items[f->i] : v->keys[f->i];
				if (f->half) {
					f->i++;
					f->left--;
				}
				f->half = !f->half;
			} else {
				c = v->items[f->i++];
				f->left--;
			}
			*got = true;
			return c;
		}
		if (f->inbatch) {
			if (f->single)
				put1(w, dict ? TPC_PK_SETITEM : TPC_PK_APPEND);
			else
				put1(w, dict ? TPC_PK_SETITEMS : TPC_PK_APPENDS);
			f->inbatch = false;
			continue;
		}
		size_t len;
		bool single;
		if (!next_batch(f, v->n, &len, &single))
			return NULL;
		f->prevlen = len;
		f->left = len;
		f->single = single;
		f->inbatch = true;
		f->half = false;
		if (!single)
			put1(w, TPC_PK_MARK);
	}
}

typedef struct walker {
	tpc_pickle_writer *w;
	tpc_err *e;
	wframe *st;
	size_t n, cap;
} walker;

static int werr(walker *k, const char *what, const tpc_value *v)
{
	return tpc_err_set(k->e, TPC_EINPUT, "pickle writer: %s (%s value)", what,
			   v ? tpc_vkind_name(v->kind) : "null");
}

static int push_frame(walker *k, const tpc_value *v)
{
	if (tpc_grow((void **)&k->st, &k->cap, k->n + 1, sizeof(*k->st)))
		return tpc_err_nomem(k->e);
	wframe *f = &k->st[k->n++];
	memset(f, 0, sizeof(*f));
	f->v = v;
	f->prevlen = SIZE_MAX;
	return 0;
}

/* Write a value that needs no frame, fetch a memoized one, or open a frame. */
static int visit(walker *k, const tpc_value *v)
{
	tpc_pickle_writer *w = k->w;
	wpriv *pv = priv(w);
	uint64_t *at;
	if (!v) {
		tpc_pickle_emit_none(w);
		return 0;
	}
	if (pv && (at = tpc__u64map_get(&pv->ids, (uintptr_t)v)) != NULL) {
		tpc_pickle_emit_get(w, (uint32_t)*at);
		return 0;
	}
	switch (v->kind) {
	case TPC_V_NONE:
		tpc_pickle_emit_none(w);
		return 0;
	case TPC_V_BOOL:
		tpc_pickle_emit_bool(w, v->ival != 0);
		return 0;
	case TPC_V_INT:
		tpc_pickle_emit_int(w, v->ival);
		return 0;
	case TPC_V_BIGINT:
		tpc_pickle_emit_long(w, (const uint8_t *)v->str, v->len);
		return 0;
	case TPC_V_FLOAT:
		tpc_pickle_emit_float(w, v->fval);
		return 0;
	case TPC_V_STR:
		if (w->share_strings) {
			tpc_pickle_emit_str(w, v->str, v->len, true);
		} else {
			binunicode(w, v->str, v->len);
			put_node(w, v);
		}
		return 0;
	case TPC_V_GLOBAL:
		emit_global_value(w, v);
		return 0;
	case TPC_V_BYTES:
		emit_bytes(w, v);
		put_node(w, v);
		return 0;
	case TPC_V_TENSOR: {
		if (!w->tensor)
			return werr(k, "no tensor writer for a tensor leaf", v);
		int ret = w->tensor(w->ctx, w, v, k->e);
		if (ret)
			return ret < 0 ? ret : werr(k, "the tensor writer failed", v);
		put_node(w, v);
		return 0;
	}
	case TPC_V_TUPLE:
		if (v->n == 0) {
			put1(w, TPC_PK_EMPTY_TUPLE);
			return 0;
		}
		return push_frame(k, v);
	case TPC_V_LIST:
	case TPC_V_DICT:
	case TPC_V_SET:
	case TPC_V_CALL:
	case TPC_V_STORAGE:
		return push_frame(k, v);
	default:
		return werr(k, "unknown kind", v);
	}
}

/* Advance the top frame: 1 = *child must be visited, 0 = frame finished. */
static int frame_step(walker *k, wframe *f, const tpc_value **child)
{
	tpc_pickle_writer *w = k->w;
	const tpc_value *v = f->v, *c;
	bool got;
	for (;;) {
		switch (f->st) {
		case S_START:
			switch (v->kind) {
			case TPC_V_TUPLE:
				if (v->n > 3)
					put1(w, TPC_PK_MARK);
				f->st = S_TUPLE_ITEMS;
				break;
			case TPC_V_STORAGE:
				f->st = S_PERSID;
				*child = v->n ? v->items[0] : NULL;
				return 1;
			case TPC_V_SET:
				tpc_pickle_emit_global(w, "builtins", "set");
				put1(w, TPC_PK_EMPTY_LIST);
				tpc_pickle_emit_put(w);
				f->mode = B_EXACT_LIST;
				f->st = S_ITEMS;
				break;
			case TPC_V_CALL:
				f->call = v;
				f->st = S_HEAD;
				break;
			default: /* LIST, DICT */
				f->call = tpc_value_origin(v);
				if (f->call) {
					f->mode = v->kind == TPC_V_LIST ? B_ITER_LIST : B_ITER_DICT;
					f->st = S_HEAD;
					break;
				}
				put1(w, v->kind == TPC_V_LIST ? TPC_PK_EMPTY_LIST : TPC_PK_EMPTY_DICT);
				put_node(w, v);
				f->mode = v->kind == TPC_V_LIST ? B_EXACT_LIST : B_EXACT_DICT;
				f->st = S_ITEMS;
				break;
			}
			break;
		case S_TUPLE_ITEMS:
			if (f->i < v->n) {
				*child = v->items[f->i++];
				return 1;
			}
			tuple_op(w, v->n);
			put_node(w, v);
			f->st = S_DONE;
			break;
		case S_HEAD:
			if (f->call->n < 2 || f->call->n > 3)
				return werr(k, "a call needs a callable, arguments and at most a state",
					    f->call);
			if (!f->call->items[1] || f->call->items[1]->kind != TPC_V_TUPLE)
				return werr(k, "call arguments must be a tuple", f->call);
			*child = is_newobj(f->call) ? f->call->items[1]->items[0] : f->call->items[0];
			f->i = 1;
			f->st = is_newobj(f->call) ? S_NEW_ARGS : S_HEAD_ARGS;
			f->mark_pending = f->st == S_NEW_ARGS && f->call->items[1]->n > 4;
			return 1;
		case S_HEAD_ARGS:
			f->st = S_HEAD_REDUCE;
			*child = f->call->items[1];
			return 1;
		case S_HEAD_REDUCE:
			put1(w, TPC_PK_REDUCE);
			f->st = S_AFTER_HEAD;
			break;
		case S_NEW_ARGS: {
			const tpc_value *a = f->call->items[1];
			if (f->mark_pending) {
				put1(w, TPC_PK_MARK);
				f->mark_pending = false;
			}
			if (f->i < a->n) {
				*child = a->items[f->i++];
				return 1;
			}
			tuple_op(w, a->n - 1);
			if (a->n > 1)
				tpc_pickle_emit_put(w);
			f->st = S_NEW_END;
			break;
		}
		case S_NEW_END:
			put1(w, TPC_PK_NEWOBJ);
			f->st = S_AFTER_HEAD;
			break;
		case S_AFTER_HEAD:
			put_node(w, v);
			f->i = 0;
			f->prevlen = SIZE_MAX;
			f->st = v->kind == TPC_V_CALL ? S_STATE : S_ITEMS;
			break;
		case S_ITEMS:
			c = items_step(w, f, &got);
			if (got) {
				*child = c;
				return 1;
			}
			f->st = v->kind == TPC_V_SET ? S_SET_END : f->call ? S_STATE : S_DONE;
			break;
		case S_SET_END:
			put1(w, TPC_PK_TUPLE1);
			tpc_pickle_emit_put(w);
			put1(w, TPC_PK_REDUCE);
			put_node(w, v);
			f->st = S_DONE;
			break;
		case S_STATE:
			if (f->call->n == 3) {
				f->st = S_BUILD;
				*child = f->call->items[2];
				return 1;
			}
			f->st = S_DONE;
			break;
		case S_BUILD:
			put1(w, TPC_PK_BUILD);
			f->st = S_DONE;
			break;
		case S_PERSID:
			put1(w, TPC_PK_BINPERSID);
			f->st = S_DONE;
			break;
		case S_DONE:
			return 0;
		}
	}
}

int tpc_pickle_write_value(tpc_pickle_writer *w, const tpc_value *v, tpc_err *e)
{
	walker k = {w, e, NULL, 0, 0};
	int ret = visit(&k, v);
	while (!ret && k.n) {
		const tpc_value *child = NULL;
		int r = frame_step(&k, &k.st[k.n - 1], &child);
		if (r < 0) {
			ret = r;
			break;
		}
		if (r == 0) {
			k.n--;
			continue;
		}
		ret = visit(&k, child);
		if (w->out->oom || w->oom)
			break;
	}
	if (!ret && (w->out->oom || w->oom))
		ret = tpc_err_set(e, TPC_EIO,
				  "pickle writer: out of memory, or a string, integer or name "
				  "that protocol 2 cannot hold");
	free(k.st);
	return ret;
}

int tpc_pickle_writer_finish(tpc_pickle_writer *w, tpc_err *e)
{
	put1(w, TPC_PK_STOP);
	if (w->out->oom || w->oom)
		return tpc_err_set(e, TPC_EIO,
				   "pickle writer: out of memory, or a string, integer or name "
				   "that protocol 2 cannot hold");
	return 0;
}

int tpc_pickle_write(tpc_pickle_writer *w, const tpc_value *v, tpc_err *e)
{
	tpc_pickle_emit_proto(w);
	int ret = tpc_pickle_write_value(w, v, e);
	if (!ret)
		ret = tpc_pickle_writer_finish(w, e);
	return ret;
}
