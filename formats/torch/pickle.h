/*
 * pickle.h - a pickle VM that never executes anything, and a pickle writer.
 *
 * torch checkpoints are Python pickles (FORMATS.md §1.6-1.12, §2.1). Loading a
 * pickle in Python runs whatever callables it names; this VM only builds a
 * tpc_value tree (tpc_value.h). A GLOBAL becomes a TPC_V_GLOBAL value holding
 * its name, a REDUCE becomes a TPC_V_CALL node [callable, args] unless a
 * callback or one of the few built-in data constructors below interprets it.
 * Nothing is imported, looked up or called, so "os.system" is just a string
 * (and, by default, a refused one).
 *
 * Reading
 * -------
 * tpc_pickle_load_from_buffer() runs one pickle up to and including its STOP
 * opcode and reports how many bytes that took (`consumed`), because the legacy
 * torch format has several pickles back to back (§2.1). Every load starts with
 * an empty memo, as torch's separate pickle.load() calls do.
 *
 * Opcodes: all data opcodes of protocols 0-5 that CPython's and torch's
 * picklers emit: PROTO FRAME STOP MARK POP POP_MARK DUP NONE NEWTRUE NEWFALSE
 * INT LONG FLOAT (text) BININT BININT1 BININT2 LONG1 LONG4 BINFLOAT BINUNICODE
 * SHORT_BINUNICODE BINUNICODE8 BINSTRING SHORT_BINSTRING BINBYTES
 * SHORT_BINBYTES BINBYTES8 BYTEARRAY8 EMPTY_TUPLE TUPLE TUPLE1-3 EMPTY_LIST LIST
 * APPEND APPENDS EMPTY_DICT DICT SETITEM SETITEMS EMPTY_SET ADDITEMS FROZENSET
 * GLOBAL STACK_GLOBAL REDUCE BUILD NEWOBJ NEWOBJ_EX PERSID BINPERSID GET BINGET
 * LONG_BINGET PUT BINPUT LONG_BINPUT MEMOIZE. Refused by name: STRING, UNICODE
 * (protocol 0 text strings), INST, OBJ, EXT1/2/4, NEXT_BUFFER, READONLY_BUFFER.
 * Any other byte is refused as an unknown opcode. Encoding traps: BININT2 is
 * unsigned, BINFLOAT is big-endian, LONG1/LONG4 are little-endian two's
 * complement (more than 8 significant bytes gives a BIGINT), and the decimal
 * INT/LONG text of protocols 0-1 gives the same BIGINT beyond int64 (at most
 * 640 digits; the legacy torch magic number is one).
 *
 * Values produced:
 *   strings (BINUNICODE etc., and protocol-2 BINSTRING/SHORT_BINSTRING) -> STR,
 *     bytes kept as found (not UTF-8 validated; JSON output copes);
 *   BINBYTES*, BYTEARRAY8 -> BYTES; EMPTY_SET/FROZENSET -> SET (frozenness is
 *     not kept; ADDITEMS does not remove duplicates);
 *   GLOBAL/STACK_GLOBAL -> GLOBAL "module.name", Python 2 names mapped as
 *     torch/_utils.py IMPORT_MAPPING / NAME_MAPPING do (__builtin__ -> builtins,
 *     copy_reg -> copyreg, ...);
 *   NEWOBJ cls args -> the value REDUCE would give for copyreg.__newobj__
 *     (cls, *args), which is what protocols 0-1 write for the same object;
 *     NEWOBJ_EX -> copyreg.__newobj_ex__ (cls, args, kwargs);
 *   BINPERSID/PERSID -> whatever opts->persistent_load returns (no loader: error).
 *
 * REDUCE / NEWOBJ, in this order:
 *   1. opts->reduce, if set: returns 0 with *out = a new value, 1 = "not
 *      handled", or a negative tpc_status (error, with `e` filled);
 *   2. built-ins (pure data, nothing called):
 *        collections.OrderedDict() / Counter() / Counter(dict) / defaultdict(f)
 *          -> DICT whose origin (tpc_value.h) is CALL[callable, args]
 *          (Counter(dict) copies the items and keeps origin args ());
 *        builtins.set / frozenset (list|tuple|set) or () -> SET;
 *        _codecs.encode(str, 'latin1'|'latin-1') -> BYTES (each code point of
 *          the UTF-8 str must be < 256), _codecs.encode(str[, 'utf-8']) -> BYTES;
 *        builtins.bytearray() / (bytes) / (str, 'latin-1') and builtins.bytes()
 *          -> BYTES;
 *   3. otherwise a CALL node [callable, args].
 *   args must be a TUPLE (CPython's C unpickler refuses anything else).
 *
 * Containers built by calls. APPEND(S) needs a LIST, SETITEM(S) a DICT; on
 * anything else they are errors, except on a CALL node: an opaque object that
 * receives items is a list or dict subclass (CPython's pickler writes NEWOBJ,
 * then APPENDS or SETITEMS), so the CALL node turns in place into a LIST or DICT
 * whose origin is the former CALL. Every holder of the node sees the change.
 * Dict keys that are a LIST, DICT or SET are refused (unhashable in Python).
 *
 * BUILD pops the state and applies it to the object below:
 *   1. opts->build, if set: 0 = handled (the callback took what it needs,
 *      with tpc_value_ref), 1 = not handled, negative = error;
 *   2. a CALL node, or a LIST/DICT with an origin, keeps the state as the CALL's
 *      items[2] (the origin's for a container): torch's state_dict gives a
 *      DICT with origin CALL[collections.OrderedDict, (), {'_metadata': ...}],
 *      and tpc_pickle_write_value() re-emits REDUCE, SETITEMS, state, BUILD.
 *      A second BUILD on the same object is an error;
 *   3. on anything else a state of None or {} is a no-op (as in Python), any
 *      other state an error (Python would fail too: builtins have no __dict__).
 *
 * Cycles (a list appended to itself, directly or not) are refused: reference
 * counts cannot free them and every tree walker would loop. The check costs
 * nothing for pickles that never mutate a container already held by another,
 * i.e. for every acyclic pickle CPython writes.
 *
 * Limits (tpc_pickle_opts, 0 = the default in brackets), each refused with a
 * clear message rather than a crash or a huge allocation: stack depth [2^24],
 * open MARKs [2^16], memo index [2^24; dense indices live in an array that
 * grows only with the entry count, others in a hash, so a lone LONG_BINPUT
 * 0xffffff costs one entry], values created [2^25], one string or
 * bytes object [2^30 bytes, and never more than the bytes left], container
 * nesting of the result [10000], and the tree size counting every shared
 * subtree once per use [2^26], which bounds naive tree walkers (JSON output,
 * a recursive reader) on "billion laughs" pickles. Every length is checked
 * against the bytes left before anything is allocated.
 *
 * Globals. Every GLOBAL/STACK_GLOBAL opcode is recorded in opts->globals (if
 * set; it accumulates over several loads) with a count of opcodes naming it.
 * tpc_pickle_global_class() sorts a name into SAFE (torch's weights_only
 * allow-list, FORMATS.md §1.11), DANGEROUS (modelled on picklescan: os, posix,
 * nt, subprocess, sys, builtins.eval/exec/compile/open/getattr/__import__, runpy,
 * socket, shutil, pty, pickle.loads, marshal, ctypes, importlib, torch.load,
 * torch.hub, ...) or UNKNOWN. opts->policy decides what the VM refuses: by
 * default DANGEROUS globals (still never executed: refusing them makes a
 * malicious file an input error rather than a tree), or also UNKNOWN ones
 * (weights_only-like), or nothing (for `inspect --globals`).
 *
 * Errors are TPC_EINPUT through TPC_CORRUPT with opts->path, the absolute byte
 * offset of the opcode (opts->base_offset + its position) and a lowercase
 * message naming the opcode; out of memory is TPC_EIO.
 *
 * Writing
 * -------
 * The writer emits protocol 2 inside torch's weights_only opcode set (§1.11:
 * no FRAME, MEMOIZE, STACK_GLOBAL, SHORT_BINUNICODE, BINBYTES; LONG4 only for
 * an integer of 256 bytes or more) into a tpc_buf, with CPython's own choices:
 * BININT1/BININT2/BININT/LONG1 by range, BINFLOAT, BINUNICODE, TUPLE1-3 or
 * MARK..TUPLE, APPENDS/SETITEMS in batches of 1000 (APPEND/SETITEM for a single
 * item; a plain dict whose size is a multiple of 1000 ends with an empty
 * MARK SETITEMS, as CPython's), and BINPUT/LONG_BINPUT after every string,
 * global, tuple, list, dict and REDUCE result. Memo reuse: a node seen twice is
 * written once and then fetched with BINGET, globals are shared by name
 * (collections.OrderedDict, torch._utils._rebuild_tensor_v2), and with
 * `share_strings` strings are shared by value. GLOBAL names are written the
 * protocol-2 way (builtins -> __builtin__, copyreg -> copy_reg).
 * tpc_pickle_write_value() writes any tree; a tree read by the VM comes out as
 * the bytes CPython writes for the same objects. Deviations: empty BYTES is
 * written as _codecs.encode('', 'latin1') (CPython: __builtin__.bytes(), which
 * weights_only refuses); SET as __builtin__.set([...]); a CALL whose callable is
 * copyreg.__newobj__ as cls args NEWOBJ. What the tree does not keep cannot
 * come back: frozenset (read as SET), bytearray (BYTES), Counter(dict)
 * (re-emitted as Counter() plus SETITEMS), and an *empty* list or dict
 * subclass, which has no APPENDS/SETITEMS to reveal it and stays a CALL. The
 * walk uses its own stack, so any depth is fine.
 */
#ifndef TPC_PICKLE_H
#define TPC_PICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_buf.h"
#include "tpc_err.h"
#include "tpc_value.h"

/* ---- reading ---- */

typedef enum tpc_pickle_gclass {
	TPC_PICKLE_UNKNOWN = 0,
	TPC_PICKLE_SAFE = 1,
	TPC_PICKLE_DANGEROUS = 2,
} tpc_pickle_gclass;

/* Classify a global by name (Python 2 names are mapped first). */
tpc_pickle_gclass tpc_pickle_global_class(const char *module, const char *name);
const char *tpc_pickle_gclass_name(tpc_pickle_gclass c); /* "safe" "unknown" "dangerous" */

/* What the VM refuses. The zero value is the safe default. */
typedef enum tpc_pickle_policy {
	TPC_PICKLE_REFUSE_DANGEROUS = 0, /* refuse DANGEROUS globals */
	TPC_PICKLE_REFUSE_UNKNOWN = 1,   /* accept only SAFE globals */
	TPC_PICKLE_ALLOW_ALL = 2,        /* refuse nothing (nothing runs anyway) */
} tpc_pickle_policy;

typedef struct tpc_pickle_global {
	char *module, *name; /* after the Python 2 mapping */
	uint64_t count;      /* GLOBAL / STACK_GLOBAL opcodes naming it */
	tpc_pickle_gclass cls;
} tpc_pickle_global;

/* Globals seen, in order of first appearance. Zero-initialise, pass the same
 * list to several loads to accumulate, release with tpc_pickle_globals_release. */
typedef struct tpc_pickle_globals {
	tpc_pickle_global *v;
	size_t n, cap;
	void *index; /* private */
} tpc_pickle_globals;
void tpc_pickle_globals_release(tpc_pickle_globals *g);

/* Callbacks. Values passed in are borrowed: take a reference to keep one.
 * Return 0 (handled), 1 (not handled: the VM does the default) or a negative
 * tpc_status with `e` filled. */
typedef int (*tpc_pickle_reduce_fn)(void *ctx, tpc_value *callable, tpc_value *args,
				    tpc_value **out, tpc_err *e);
typedef int (*tpc_pickle_build_fn)(void *ctx, tpc_value *obj, tpc_value *state, tpc_err *e);
/* Must return 0 with *out set, or a negative status (1 is treated as an error). */
typedef int (*tpc_pickle_persid_fn)(void *ctx, tpc_value *pid, tpc_value **out, tpc_err *e);

typedef struct tpc_pickle_opts {
	const char *path;     /* file named in errors; NULL for none */
	uint64_t base_offset; /* offset of the pickle's first byte in that file */
	tpc_pickle_policy policy;

	/* Limits; 0 means the default (see above). */
	uint64_t max_stack;   /* values on the stack */
	uint64_t max_marks;   /* open MARKs */
	uint64_t max_memo;    /* memo indices must be below this */
	uint64_t max_objects; /* values created */
	uint64_t max_str;     /* bytes in one string/bytes object */
	uint64_t max_depth;   /* container nesting of the result */
	uint64_t max_tree;    /* result size counting shared subtrees per use */

	void *ctx; /* passed to the callbacks */
	tpc_pickle_reduce_fn reduce;
	tpc_pickle_build_fn build;
	tpc_pickle_persid_fn persistent_load;

	tpc_pickle_globals *globals; /* optional output */
} tpc_pickle_opts;

/* All fields zero: no path, the safe policy, the default limits, no callbacks. */
void tpc_pickle_opts_init(tpc_pickle_opts *o);

/*
 * Run the pickle at p[0..n). On success *out is the result (a new reference)
 * and *consumed (if not NULL) the bytes up to and including STOP. On failure
 * returns a negative tpc_status, *out is NULL, and `e` says what and where.
 * `o` may be NULL for the defaults.
 */
int tpc_pickle_load_from_buffer(const uint8_t *p, uint64_t n, const tpc_pickle_opts *o,
				tpc_value **out, uint64_t *consumed, tpc_err *e);

/* Map a Python 2 global name to Python 3 as torch does (module, name in/out;
 * the results point into static tables or at the inputs). */
void tpc_pickle_map_name(const char **module, const char **name);
/* The inverse for the writer (protocol 2 names Python 2's): the names that
 * map one to one (builtins and copyreg modules are the caller's). */
void tpc_pickle_unmap_name(const char **module, const char **name);

/* ---- writing ---- */

typedef struct tpc_pickle_writer tpc_pickle_writer;

/* Writes a TENSOR leaf: emit one complete object expression (e.g. GLOBAL
 * torch._utils._rebuild_tensor_v2, the args tuple, REDUCE) and do not memoize
 * the result: the writer memoizes the TENSOR node itself afterwards, so a node
 * met again is fetched with BINGET (tied weights stay tied). */
typedef int (*tpc_pickle_tensor_fn)(void *ctx, tpc_pickle_writer *w, const tpc_value *tensor,
				    tpc_err *e);

struct tpc_pickle_writer {
	tpc_buf *out;               /* where bytes go */
	tpc_pickle_tensor_fn tensor; /* TENSOR leaves; NULL: writing one is an error */
	void *ctx;
	bool share_strings; /* memoize STR by value, not by node */
	/* private */
	uint32_t memo_next;
	bool oom;
	void *priv;
};

/* Set up (no allocation); the caller then sets tensor/ctx/share_strings. */
void tpc_pickle_writer_init(tpc_pickle_writer *w, tpc_buf *out);
void tpc_pickle_writer_release(tpc_pickle_writer *w);

/* Low-level emitters. They never fail on their own: an allocation failure
 * is sticky and reported by tpc_pickle_write_value / tpc_pickle_writer_finish. */
void tpc_pickle_emit_proto(tpc_pickle_writer *w);          /* PROTO 2 */
void tpc_pickle_emit_op(tpc_pickle_writer *w, uint8_t op); /* one bare opcode */
void tpc_pickle_emit_none(tpc_pickle_writer *w);
void tpc_pickle_emit_bool(tpc_pickle_writer *w, bool v);
void tpc_pickle_emit_int(tpc_pickle_writer *w, int64_t v);
void tpc_pickle_emit_long(tpc_pickle_writer *w, const uint8_t *le, size_t n); /* LONG1/LONG4 */
void tpc_pickle_emit_float(tpc_pickle_writer *w, double v);
/* BINUNICODE + BINPUT; with `shared`, a string equal to one written before
 * through a shared emit (or with share_strings) is fetched with BINGET. */
void tpc_pickle_emit_str(tpc_pickle_writer *w, const char *s, size_t n, bool shared);
/* GLOBAL "module\nname\n" + BINPUT, or BINGET of the same name written before. */
void tpc_pickle_emit_global(tpc_pickle_writer *w, const char *module, const char *name);
/* BINPUT/LONG_BINPUT of the next memo index for the object just written;
 * returns the index (UINT32_MAX when the memo is full: nothing written). */
uint32_t tpc_pickle_emit_put(tpc_pickle_writer *w);
void tpc_pickle_emit_get(tpc_pickle_writer *w, uint32_t idx); /* BINGET/LONG_BINGET */

/* Write a whole tree (no PROTO, no STOP). 0 or a negative tpc_status. */
int tpc_pickle_write_value(tpc_pickle_writer *w, const tpc_value *v, tpc_err *e);
/* PROTO 2 + value + STOP into w->out in one call. */
int tpc_pickle_write(tpc_pickle_writer *w, const tpc_value *v, tpc_err *e);
/* Emit STOP and report a sticky allocation failure (TPC_EIO). */
int tpc_pickle_writer_finish(tpc_pickle_writer *w, tpc_err *e);

/* Opcode bytes, for the low-level emitters and for callers that need to name
 * them. */
enum {
	TPC_PK_MARK = 0x28, TPC_PK_STOP = 0x2e, TPC_PK_POP = 0x30, TPC_PK_POP_MARK = 0x31,
	TPC_PK_DUP = 0x32, TPC_PK_FLOAT = 0x46, TPC_PK_INT = 0x49, TPC_PK_BININT = 0x4a,
	TPC_PK_BININT1 = 0x4b, TPC_PK_LONG = 0x4c, TPC_PK_BININT2 = 0x4d, TPC_PK_NONE = 0x4e,
	TPC_PK_PERSID = 0x50, TPC_PK_BINPERSID = 0x51, TPC_PK_REDUCE = 0x52,
	TPC_PK_STRING = 0x53, TPC_PK_BINSTRING = 0x54, TPC_PK_SHORT_BINSTRING = 0x55,
	TPC_PK_UNICODE = 0x56, TPC_PK_BINUNICODE = 0x58, TPC_PK_APPEND = 0x61,
	TPC_PK_BUILD = 0x62, TPC_PK_GLOBAL = 0x63, TPC_PK_DICT = 0x64, TPC_PK_EMPTY_DICT = 0x7d,
	TPC_PK_APPENDS = 0x65, TPC_PK_GET = 0x67, TPC_PK_BINGET = 0x68, TPC_PK_INST = 0x69,
	TPC_PK_LONG_BINGET = 0x6a, TPC_PK_LIST = 0x6c, TPC_PK_EMPTY_LIST = 0x5d,
	TPC_PK_OBJ = 0x6f, TPC_PK_PUT = 0x70, TPC_PK_BINPUT = 0x71, TPC_PK_LONG_BINPUT = 0x72,
	TPC_PK_SETITEM = 0x73, TPC_PK_TUPLE = 0x74, TPC_PK_EMPTY_TUPLE = 0x29,
	TPC_PK_SETITEMS = 0x75, TPC_PK_BINFLOAT = 0x47,
	TPC_PK_PROTO = 0x80, TPC_PK_NEWOBJ = 0x81, TPC_PK_EXT1 = 0x82, TPC_PK_EXT2 = 0x83,
	TPC_PK_EXT4 = 0x84, TPC_PK_TUPLE1 = 0x85, TPC_PK_TUPLE2 = 0x86, TPC_PK_TUPLE3 = 0x87,
	TPC_PK_NEWTRUE = 0x88, TPC_PK_NEWFALSE = 0x89, TPC_PK_LONG1 = 0x8a, TPC_PK_LONG4 = 0x8b,
	TPC_PK_BINBYTES = 0x42, TPC_PK_SHORT_BINBYTES = 0x43,
	TPC_PK_SHORT_BINUNICODE = 0x8c, TPC_PK_BINUNICODE8 = 0x8d, TPC_PK_BINBYTES8 = 0x8e,
	TPC_PK_EMPTY_SET = 0x8f, TPC_PK_ADDITEMS = 0x90, TPC_PK_FROZENSET = 0x91,
	TPC_PK_NEWOBJ_EX = 0x92, TPC_PK_STACK_GLOBAL = 0x93, TPC_PK_MEMOIZE = 0x94,
	TPC_PK_FRAME = 0x95, TPC_PK_BYTEARRAY8 = 0x96, TPC_PK_NEXT_BUFFER = 0x97,
	TPC_PK_READONLY_BUFFER = 0x98,
};

/* ---- private, shared by pickle.c, pickle_shape.c and pickle_write.c ---- */

/* u64 -> u64 hash map (open addressing, no removal). */
struct tpc__u64ent {
	uint64_t k, v;
	bool used;
};
typedef struct tpc__u64map {
	struct tpc__u64ent *e;
	size_t cap, n;
} tpc__u64map;
int tpc__u64map_put(tpc__u64map *m, uint64_t k, uint64_t v); /* 0 or -1 (OOM) */
uint64_t *tpc__u64map_get(const tpc__u64map *m, uint64_t k);  /* NULL if absent */
void tpc__u64map_release(tpc__u64map *m);

/* byte-string -> u64 hash map (keys copied). */
typedef struct tpc__strmap {
	struct tpc__strent *e;
	size_t cap, n;
} tpc__strmap;
int tpc__strmap_put(tpc__strmap *m, const char *k, size_t n, uint64_t v);
uint64_t *tpc__strmap_get(const tpc__strmap *m, const char *k, size_t n);
void tpc__strmap_release(tpc__strmap *m);

/* A value's children as the VM's cycle check and the result check walk them:
 * the items (a dict's keys and values interleaved), then the origin if any. */
bool tpc__pickle_has_children(const tpc_value *v);

/* The result check (pickle_shape.c), run once the VM has released its memo
 * and stack: the nesting depth and the size counting every use of a shared
 * subtree stay within the limits, and builtins.getattr, if the pickle pushed
 * it, appears only as getattr(class, 'member'). Errors are reported at `off`
 * in `path`. */
typedef struct tpc__pickle_shape {
	uint64_t max_depth, max_tree;
	bool getattr_seen;
	const char *path;
	int64_t off;
} tpc__pickle_shape;
int tpc__pickle_check_shape(const tpc_value *root, const tpc__pickle_shape *sh, tpc_err *e);

#endif
