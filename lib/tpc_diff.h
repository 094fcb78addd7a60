/*
 * tpc_diff.h - are two checkpoints the same model? Tensor by tensor.
 *
 * tpc_diff_run() walks checkpoint A in order, finds each tensor by name in B
 * and classifies the pair:
 *
 *   equal       the values agree: bit for bit, or (with tolerances) every
 *               element within them ("close" when some bits differ)
 *   values      same dtype and shape, some element outside the tolerances:
 *               how many, the first one (index, both values), max abs, max
 *               rel (|a-b| / |b|, B is the reference as in numpy.allclose),
 *               max ULPs for floating types
 *   dtype       dtypes differ (values are still compared as numbers when both
 *               sides are numeric and the shapes agree, for the statistics)
 *   shape       shapes differ (values not compared)
 *   only_a, only_b   the name is missing on the other side
 *
 * The names compared are A's as the caller left them: a remap (tpc_rules) run
 * over A first maps one naming onto the other.
 *
 * Values
 * ------
 * Each pair is streamed through two buffers of TPC_DIFF_CHUNK bytes (bounded
 * memory whatever the model size; input pages are dropped behind the read).
 * A chunk whose bytes are identical on both sides is equal without looking at
 * its elements; only chunks that differ are decoded element by element, so
 * equal tensors are read once and compared with memcmp.
 *
 * Without tolerances for a dtype, "equal" means identical bits (so -0.0 and
 * 0.0, or two NaN payloads, differ). With tolerances an element is within
 * them when both are NaN, a == b, |a - b| <= atol + rtol * |b|, or (floats of
 * the same dtype) the ULP distance is at most `ulps`. Tolerances are chosen by
 * B's dtype. Integers and bool compare as numbers; f16, bf16, f32, f64 as
 * floats; complex types as their real and imaginary parts (the index names
 * the complex element); other types (f8, f4, quantized) byte for byte per
 * element, without values.
 *
 * Cast-aware mode (o->cast): where A and B are floating types that differ
 * (f32 A, bf16 B), A is cast to B's dtype the way `convert --dtype` casts
 * (round to nearest even, tpc_cast) and the results compared bit for bit (or
 * within B's tolerances). A bf16 checkpoint made from an f32 one is then equal
 * exactly when it is that cast.
 *
 * Reports (rendered into a tpc_buf; the library prints nothing): a text
 * listing of the differences, JSON with every tensor, and JUnit XML with one
 * test case per tensor for a CI's test report.
 */
#ifndef TPC_DIFF_H
#define TPC_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_buf.h"
#include "tpc_ckpt.h"
#include "tpc_dtype.h"
#include "tpc_err.h"
#include "tpc_progress.h"

#define TPC_DIFF_CHUNK (4u << 20) /* bytes per side per step */

typedef struct tpc_diff_tol {
	double atol, rtol;
	uint64_t ulps;
} tpc_diff_tol;

typedef struct tpc_diff_opts {
	tpc_diff_tol tol[TPC_DT_COUNT]; /* by B's dtype; all zero: bit for bit */
	bool cast;                      /* compare A cast to B's floating dtype */
	tpc_progress *progress;         /* bytes of B compared; may be NULL */
} tpc_diff_opts;

void tpc_diff_opts_init(tpc_diff_opts *o);
/*
 * One tolerance option: `which` is 'a' (atol), 'r' (rtol) or 'u' (ulps); `arg`
 * is a value for every dtype ("1e-3") or a comma list of DTYPE=VALUE
 * ("bf16=1e-2,f32=1e-6"); later options override earlier ones. Bad numbers,
 * negative values and unknown dtypes are TPC_EUSAGE quoting the token.
 */
int tpc_diff_opts_tol(tpc_diff_opts *o, char which, const char *arg, tpc_err *e);

typedef enum tpc_diff_kind {
	TPC_DIFF_EQUAL = 0,
	TPC_DIFF_CLOSE,  /* bits differ, every element within the tolerances */
	TPC_DIFF_VALUES,
	TPC_DIFF_DTYPE,
	TPC_DIFF_SHAPE,
	TPC_DIFF_ONLY_A,
	TPC_DIFF_ONLY_B,
} tpc_diff_kind;

const char *tpc_diff_kind_name(tpc_diff_kind k); /* "equal", "close", "values", ... */

typedef struct tpc_diff_entry {
	char *name;
	tpc_diff_kind kind;
	tpc_dtype dtype_a, dtype_b;    /* TPC_DT_INVALID on the missing side */
	int ndim_a, ndim_b;
	int64_t *shape_a, *shape_b;    /* owned; NULL on the missing side */
	bool cast;                     /* A was cast to dtype_b before comparing */
	bool numeric;                  /* values and max abs/rel are meaningful */
	bool have_ulps;                /* max_ulps is meaningful (same floating dtype) */
	uint64_t elements;             /* elements compared (0: values not compared) */
	uint64_t differing;            /* elements outside the tolerances */
	uint64_t first;                /* flat index of the first of them (C order) */
	double first_a, first_b;       /* their values (numeric only) */
	double max_abs, max_rel;
	uint64_t max_ulps;
} tpc_diff_entry;

typedef struct tpc_diff {
	tpc_diff_entry *e;
	size_t n, cap;
	size_t nequal, nclose, ndiffer, nonly_a, nonly_b;
	uint64_t bytes;       /* bytes of B's side compared */
	uint64_t bytes_same;  /* of which in byte-identical chunks (memcmp only) */
	double seconds;
} tpc_diff;

void tpc_diff_init(tpc_diff *d);
void tpc_diff_release(tpc_diff *d);
static inline bool tpc_diff_same(const tpc_diff *d)
{
	return !d->ndiffer && !d->nonly_a && !d->nonly_b;
}

/*
 * Compare every tensor of `a` with its namesake in `b`, appending one entry per
 * name to `d` (A's order, then the names only B has, in B's order). Returns 0
 * whether or not they differ (see tpc_diff_same); a negative status only when
 * a side cannot be read (TPC_EINPUT or TPC_EIO, e naming the tensor).
 */
int tpc_diff_run(const tpc_ckpt *a, const tpc_ckpt *b, const tpc_diff_opts *o, tpc_diff *d,
		 tpc_err *e);

/* Compare one pair (names are not looked at) into `out` (name not set). */
int tpc_diff_tensor(const tpc_ckpt *a, const tpc_tensor *ta, const tpc_ckpt *b, const tpc_tensor *tb,
		    const tpc_diff_opts *o, tpc_diff_entry *out, uint64_t *bytes_same, tpc_err *e);

/*
 * Reports. text: one line per tensor that is not equal ("close" ones and equal
 * ones too when verbose), then a '#' summary line; `label_a` and `label_b` name
 * the inputs. json: every tensor. junit: one test case per tensor.
 */
void tpc_diff_report_text(const tpc_diff *d, const char *label_a, const char *label_b, bool verbose,
			  tpc_buf *b);
void tpc_diff_report_json(const tpc_diff *d, const char *label_a, const char *label_b, tpc_buf *b);
void tpc_diff_report_junit(const tpc_diff *d, const char *label_a, const char *label_b, tpc_buf *b);

#endif
