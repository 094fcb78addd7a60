/*
 * tpc_value.h - the non-tensor values a checkpoint carries.
 *
 * A torch checkpoint is a pickled object: nested dicts and lists whose leaves
 * are tensors, numbers, strings and the odd foreign object (an
 * argparse.Namespace, a numpy scalar). tpconv keeps that tree so a torch ->
 * torch round trip restores it and torch -> safetensors can store it as JSON.
 *
 * Values are immutable once built (except while the pickle VM fills a
 * container), reference counted, and may be shared (the pickle memo shares
 * nodes; it never deep-copies). tpc_value_unref(NULL) is a no-op.
 *
 * Kinds:
 *   NONE BOOL INT FLOAT STR BYTES            scalars; INT is int64. Integers that do
 *                                            not fit (LONG1/LONG4 > 8 bytes) are BIGINT
 *                                            with their little-endian two's complement bytes.
 *   LIST TUPLE SET                           items[]
 *   DICT                                     ordered keys[]/items[]; a repeated key replaces
 *   GLOBAL                                   str = "module.name" (a class or function
 *                                            reference, never resolved to code)
 *   CALL                                     a REDUCE/NEWOBJ the reader did not interpret:
 *                                            items[0] = callable (GLOBAL), items[1] = args
 *                                            (TUPLE), optional items[2] = BUILD state
 *   TENSOR                                   ival = index into the checkpoint's tensor list
 *   STORAGE                                  a torch storage reference (the persistent id
 *                                            that no tensor consumed); items[0] = the pid tuple
 */
#ifndef TPC_VALUE_H
#define TPC_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum tpc_vkind {
	TPC_V_NONE = 0,
	TPC_V_BOOL,
	TPC_V_INT,
	TPC_V_BIGINT,
	TPC_V_FLOAT,
	TPC_V_STR,
	TPC_V_BYTES,
	TPC_V_LIST,
	TPC_V_TUPLE,
	TPC_V_SET,
	TPC_V_DICT,
	TPC_V_GLOBAL,
	TPC_V_CALL,
	TPC_V_TENSOR,
	TPC_V_STORAGE,
} tpc_vkind;

typedef struct tpc_value tpc_value;
struct tpc_value {
	tpc_vkind kind;
	uint32_t refs;
	int64_t ival;    /* BOOL (0/1), INT, TENSOR index */
	double fval;     /* FLOAT */
	char *str;       /* STR, BYTES, BIGINT (raw bytes), GLOBAL: owned, NUL-terminated */
	size_t len;      /* length of str in bytes (without the terminator) */
	tpc_value **items; /* LIST TUPLE SET DICT(values) CALL STORAGE: owned references */
	tpc_value **keys;  /* DICT keys, parallel to items */
	size_t n, cap;
	void *index;       /* DICT: private hash index for large dicts */
};

tpc_value *tpc_value_new(tpc_vkind kind);          /* NULL on out of memory */
tpc_value *tpc_value_int(int64_t v);
tpc_value *tpc_value_bool(int v);
tpc_value *tpc_value_float(double v);
tpc_value *tpc_value_str(const char *s, size_t len); /* STR; copies */
tpc_value *tpc_value_bytes(const void *p, size_t len);
tpc_value *tpc_value_global(const char *module, const char *name); /* "module.name" */
tpc_value *tpc_value_tensor(int64_t index);

tpc_value *tpc_value_ref(tpc_value *v); /* returns v */
void tpc_value_unref(tpc_value *v);

/* Append to LIST/TUPLE/SET/CALL/STORAGE; takes ownership of `item` (also on failure). 0 or -1 (OOM). */
int tpc_value_append(tpc_value *seq, tpc_value *item);
/* DICT: d[key] = val, replacing an equal key's value (equality: same kind and
 * same scalar value or string; containers compare by identity). Takes both
 * references (also on failure). 0 or -1 (OOM). */
int tpc_value_set(tpc_value *dict, tpc_value *key, tpc_value *val);
/* DICT lookup by string key; borrowed reference or NULL. */
tpc_value *tpc_value_get(const tpc_value *dict, const char *key);
/* An INT, BOOL or FLOAT as a double into *x; false (x untouched) otherwise. */
bool tpc_value_number(const tpc_value *v, double *x);

int tpc_value_equal(const tpc_value *a, const tpc_value *b); /* deep, for tests */
const char *tpc_vkind_name(tpc_vkind k);

/*
 * JSON text for a value tree (cJSON-free, deterministic), used to store
 * non-tensor values in safetensors `__metadata__` and for `inspect --json`.
 * Encoding, chosen so that tpc_value_from_json() restores the exact tree:
 *   NONE null; BOOL true/false; INT number; FLOAT {"float": "<%.17g>"} so
 *   NaN/Inf/-0.0 survive; STR "..."; BYTES {"bytes": "<hex>"};
 *   LIST [..]; TUPLE {"tuple": [..]}; SET {"set": [..]};
 *   DICT with all-string keys {"dict": {"k": v, ...}} else
 *        {"dict_items": [[k, v], ...]};
 *   GLOBAL {"global": "mod.name"}; CALL {"call": [callable, args, state?]};
 *   TENSOR {"tensor": "<flat name>"} (names given by the caller's callback);
 *   BIGINT {"bigint": "<hex little-endian>"}; STORAGE {"storage": pid}.
 * Returns a malloc'd NUL-terminated string, or NULL on out of memory.
 */
typedef const char *(*tpc_tensor_namer)(void *ctx, int64_t index);
char *tpc_value_to_json(const tpc_value *v, tpc_tensor_namer namer, void *ctx);

/* Inverse of tpc_value_to_json. `resolve` maps a tensor name back to an index
 * (return -1 if unknown). Returns NULL with the error set on malformed input. */
struct tpc_err;
typedef int64_t (*tpc_tensor_resolver)(void *ctx, const char *name);
tpc_value *tpc_value_from_json(const char *text, size_t len, tpc_tensor_resolver resolve,
			       void *ctx, struct tpc_err *e);

/*
 * Additions for the pickle VM and writer (declarations only; nothing above changed).
 *
 * GLOBAL: `ival` holds the length of the module part, so "pkg.mod.Outer.Inner"
 * splits back into module "pkg.mod" and the dotted (protocol 4) qualified name
 * "Outer.Inner". tpc_value_global() sets it; tpc_value_global_split() reads it.
 *
 * Origin of a LIST or DICT that a pickle built by calling a class instead of
 * with the plain container opcodes: collections.OrderedDict(), Counter(),
 * defaultdict(list), or a list/dict subclass made by NEWOBJ and then filled by
 * APPENDS/SETITEMS. The origin is a CALL value [callable, args TUPLE, optional
 * BUILD state]; the container's items are its contents. torch's state_dict is a
 * DICT whose origin is CALL[GLOBAL collections.OrderedDict, (), {'_metadata': ..}].
 * A plain list or dict has no origin. It lives in the private extension behind
 * `index`, is part of tpc_value_equal() and of the JSON text, and is released
 * with its container.
 *
 * JSON encoding extensions, all restored exactly by tpc_value_from_json():
 *   an INT outside +-2^53 is {"int": "<decimal>"} (JSON readers round past 2^53);
 *   a STR that is not valid UTF-8 or holds a NUL byte is {"strhex": "<hex>"};
 *   a LIST with an origin is {"list": [..], "origin": <call>}; a DICT with an
 *   origin has "origin": <call> beside "dict" / "dict_items";
 *   a GLOBAL whose module is not everything before the last dot adds
 *   "module": "<module>";
 *   a TENSOR the namer does not name (no namer, or it returned NULL) is
 *   {"tensor": <index>}.
 * tpc_value_to_json() also returns NULL when the text would pass
 * TPC_VALUE_JSON_MAX bytes (a pickle may share one subtree many times and JSON
 * has no references). Encoding, decoding, equality and release never recurse
 * on the C stack, so depth is bounded by memory only (decoding: by cJSON's
 * nesting limit).
 */
#define TPC_VALUE_JSON_MAX ((size_t)1 << 30)

/* Set the origin of a LIST or DICT (see above) to `call`, a CALL value, or NULL
 * to remove it. Takes the reference (also on failure). 0, or -1 on out of
 * memory or a wrong kind. */
int tpc_value_set_origin(tpc_value *v, tpc_value *call);
/* Borrowed origin CALL of a LIST or DICT, or NULL. */
tpc_value *tpc_value_origin(const tpc_value *v);
/* A container's children in order (a dict: key, value, key, ...; then the
 * origin, if any) and how many there are. */
size_t tpc_value_nchildren(const tpc_value *v);
tpc_value *tpc_value_child(const tpc_value *v, size_t j);
/* GLOBAL: length of the module part of `str`; *name (if not NULL) points at the
 * name after the separating dot. */
size_t tpc_value_global_split(const tpc_value *g, const char **name);

#endif
