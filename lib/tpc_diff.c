/* tpc_diff.c - tensor-by-tensor comparison of two checkpoints (see tpc_diff.h). */
#include "tpc_diff.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tpc_cast.h"
#include "tpc_util.h"

/* How the elements of a dtype are compared. */
enum { CL_BYTES, CL_FLOAT, CL_INT, CL_UINT };

static int dclass(tpc_dtype d)
{
	switch (d) {
	case TPC_F16: case TPC_BF16: case TPC_F32: case TPC_F64: return CL_FLOAT;
	case TPC_I8: case TPC_I16: case TPC_I32: case TPC_I64: return CL_INT;
	case TPC_BOOL: case TPC_U8: case TPC_U16: case TPC_U32: case TPC_U64: return CL_UINT;
	default: return CL_BYTES;
	}
}

/* The unit compared: a complex element is two parts of its component type. */
static tpc_dtype unit_dtype(tpc_dtype d, unsigned *per)
{
	*per = 1;
	switch (d) {
	case TPC_C32: *per = 2; return TPC_F16;
	case TPC_C64: *per = 2; return TPC_F32;
	case TPC_C128: *per = 2; return TPC_F64;
	default: return d;
	}
}

static uint64_t ubits(const uint8_t *p, unsigned sz)
{
	switch (sz) {
	case 1: return p[0];
	case 2: return tpc_rd16le(p);
	case 4: return tpc_rd32le(p);
	default: return tpc_rd64le(p);
	}
}

static double value(tpc_dtype d, const uint8_t *p)
{
	uint64_t u = ubits(p, tpc_dtype_size(d));
	float f;
	double x;
	switch (d) {
	case TPC_F16: return tpc_f16_to_f32((uint16_t)u);
	case TPC_BF16: return tpc_bf16_to_f32((uint16_t)u);
	case TPC_F32: memcpy(&f, p, 4); return f;
	case TPC_F64: memcpy(&x, p, 8); return x;
	case TPC_I8: return (int8_t)u;
	case TPC_I16: return (int16_t)u;
	case TPC_I32: return (int32_t)u;
	case TPC_I64: return (double)(int64_t)u;
	default: return (double)u;
	}
}

/* Distance in representable values between two floats of `w` bits (neither NaN). */
static uint64_t ulp_dist(uint64_t a, uint64_t b, unsigned w)
{
	uint64_t sign = 1ull << (w - 1), ma = a & (sign - 1), mb = b & (sign - 1);
	if ((a & sign) == (b & sign))
		return ma > mb ? ma - mb : mb - ma;
	return ma + mb; /* across zero; -0 and +0 are both 0 */
}

void tpc_diff_opts_init(tpc_diff_opts *o)
{
	memset(o, 0, sizeof(*o));
}

static int set_tol(tpc_diff_opts *o, char which, tpc_dtype dt, const char *num, tpc_err *e)
{
	char *end = NULL;
	int ret = 0;
	if (which == 'u') {
		uint64_t v;
		tpc_err tmp;
		tpc_err_init(&tmp);
		if (tpc_parse_u64(num, UINT64_MAX, &v, &tmp)) {
			ret = tpc_err_set(e, TPC_EUSAGE, "--ulps: '%s' is not a count", num);
			goto out;
		}
		for (int d = 0; d < TPC_DT_COUNT; d++)
			if (dt == TPC_DT_INVALID || d == (int)dt)
				o->tol[d].ulps = v;
		goto out;
	}
	double v = strtod(num, &end);
	if (!*num || !end || *end || !(v >= 0) || isinf(v)) {
		ret = tpc_err_set(e, TPC_EUSAGE, "--%s: '%s' is not a number >= 0", which == 'a' ? "atol" : "rtol", num);
		goto out;
	}
	for (int d = 0; d < TPC_DT_COUNT; d++)
		if (dt == TPC_DT_INVALID || d == (int)dt) {
			if (which == 'a')
				o->tol[d].atol = v;
			else
				o->tol[d].rtol = v;
		}
out:
	return ret;
}

int tpc_diff_opts_tol(tpc_diff_opts *o, char which, const char *arg, tpc_err *e)
{
	int ret = 0;
	char *copy = tpc_strdup(arg), *save = NULL;
	if (!copy)
		return tpc_err_nomem(e);
	if (!strchr(copy, '=')) {
		ret = set_tol(o, which, TPC_DT_INVALID, copy, e);
		goto out;
	}
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq) {
			ret = tpc_err_set(e, TPC_EUSAGE, "'%s': give DTYPE=VALUE in a list", tok);
			goto out;
		}
		*eq = 0;
		tpc_dtype dt = tpc_dtype_parse(tok);
		if (dt == TPC_DT_INVALID) {
			ret = tpc_err_set(e, TPC_EUSAGE, "unknown dtype '%s' (bf16, f16, f32, f64, i32 ...)", tok);
			goto out;
		}
		if ((ret = set_tol(o, which, dt, eq + 1, e)))
			goto out;
	}
out:
	free(copy);
	return ret;
}

const char *tpc_diff_kind_name(tpc_diff_kind k)
{
	static const char *const n[] = {"equal", "close", "values", "dtype", "shape", "only_a", "only_b"};
	return (unsigned)k < sizeof(n) / sizeof(n[0]) ? n[k] : "?";
}

void tpc_diff_init(tpc_diff *d)
{
	memset(d, 0, sizeof(*d));
}

static void entry_release(tpc_diff_entry *x)
{
	free(x->name);
	free(x->shape_a);
	free(x->shape_b);
}

void tpc_diff_release(tpc_diff *d)
{
	for (size_t i = 0; i < d->n; i++)
		entry_release(&d->e[i]);
	free(d->e);
	tpc_diff_init(d);
}

static int64_t *copy_shape(const tpc_tensor *t)
{
	int64_t *s = tpc_calloc((size_t)(t->ndim ? t->ndim : 1), sizeof(int64_t));
	if (s && t->ndim)
		memcpy(s, t->shape, (size_t)t->ndim * sizeof(int64_t));
	return s;
}

static int describe(tpc_diff_entry *x, const tpc_tensor *ta, const tpc_tensor *tb, tpc_err *e)
{
	if (ta) {
		x->dtype_a = ta->dtype;
		x->ndim_a = ta->ndim;
		if (!(x->shape_a = copy_shape(ta)))
			return tpc_err_nomem(e);
	}
	if (tb) {
		x->dtype_b = tb->dtype;
		x->ndim_b = tb->ndim;
		if (!(x->shape_b = copy_shape(tb)))
			return tpc_err_nomem(e);
	}
	return 0;
}

static bool same_shape(const tpc_tensor *a, const tpc_tensor *b)
{
	return a->ndim == b->ndim && !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t));
}

/* What the element loop needs to know about a pair. */
typedef struct pair {
	tpc_dtype ua, ub;     /* unit dtypes */
	unsigned usa, usb;    /* unit sizes in bytes */
	unsigned per;         /* units per element */
	int cls;              /* CL_* of the units (CL_BYTES: compare bytes) */
	bool same;            /* same dtype on both sides (bits comparable) */
	bool exact;           /* no tolerances: bits decide */
	tpc_diff_tol tol;
} pair;

/* Compare units [lo, hi) of one chunk; updates the entry's statistics. */
static void compare_range(const pair *p, const uint8_t *ba, const uint8_t *bb, uint64_t u0, uint64_t lo, uint64_t hi,
			  tpc_diff_entry *x)
{
	unsigned w = p->usa * 8;
	for (uint64_t i = lo; i < hi; i++) {
		const uint8_t *pa = ba + i * p->usa, *pb = bb + i * p->usb;
		bool differs;
		double va = 0, vb = 0;
		if (p->cls == CL_BYTES) {
			differs = memcmp(pa, pb, p->usa) != 0;
		} else {
			bool bitsame = p->same && !memcmp(pa, pb, p->usa);
			if (bitsame)
				continue;
			va = value(p->ua, pa);
			vb = value(p->ub, pb);
			bool na = isnan(va), nb = isnan(vb);
			double ad = (na || nb) ? ((na && nb) ? 0 : INFINITY) : (va == vb ? 0 : fabs(va - vb));
			double rd = ad == 0 ? 0 : (vb != 0 && isfinite(vb)) ? ad / fabs(vb) : INFINITY;
			uint64_t ul = 0;
			bool have_ul = p->same && p->cls == CL_FLOAT;
			if (have_ul)
				ul = (na || nb) ? ((na && nb) ? 0 : UINT64_MAX) : ulp_dist(ubits(pa, p->usa), ubits(pb, p->usb), w);
			if (p->exact)
				differs = p->same ? true : !(va == vb || (na && nb));
			else
				differs = !((na && nb) || va == vb || ad <= p->tol.atol + p->tol.rtol * fabs(vb) ||
					    (have_ul && p->tol.ulps && ul <= p->tol.ulps));
			if (ad > x->max_abs || (ad != ad))
				x->max_abs = ad;
			if (rd > x->max_rel)
				x->max_rel = rd;
			if (have_ul && ul > x->max_ulps)
				x->max_ulps = ul;
		}
		if (differs && !x->differing++) {
			x->first = (u0 + i) / p->per;
			x->first_a = va;
			x->first_b = vb;
		}
	}
}

/* Compare n units of one chunk that differs somewhere: in parallel for large
 * chunks, each thread over its own range, the statistics merged in order so
 * the first differing element stays the first. */
static void compare_units(const pair *p, const uint8_t *ba, const uint8_t *bb, uint64_t u0, uint64_t n,
			  tpc_diff_entry *x)
{
	int nt = 1;
#ifdef _OPENMP
	if (n >= (1u << 16))
		nt = omp_get_max_threads();
#endif
	tpc_diff_entry *part = nt > 1 ? tpc_calloc((size_t)nt, sizeof(*part)) : NULL;
	if (!part) {
		compare_range(p, ba, bb, u0, 0, n, x);
		return;
	}
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static, 1)
#endif
	for (int k = 0; k < nt; k++)
		compare_range(p, ba, bb, u0, n * (uint64_t)k / (uint64_t)nt, n * (uint64_t)(k + 1) / (uint64_t)nt, &part[k]);
	for (int k = 0; k < nt; k++) {
		const tpc_diff_entry *q = &part[k];
		if (q->differing && !x->differing) {
			x->first = q->first;
			x->first_a = q->first_a;
			x->first_b = q->first_b;
		}
		x->differing += q->differing;
		if (q->max_abs > x->max_abs)
			x->max_abs = q->max_abs;
		if (q->max_rel > x->max_rel)
			x->max_rel = q->max_rel;
		if (q->max_ulps > x->max_ulps)
			x->max_ulps = q->max_ulps;
	}
	free(part);
}

int tpc_diff_tensor(const tpc_ckpt *a, const tpc_tensor *ta, const tpc_ckpt *b, const tpc_tensor *tb,
		    const tpc_diff_opts *o, tpc_diff_entry *x, uint64_t *bytes_same, tpc_err *e)
{
	int ret = 0;
	tpc_tensor cast_t;
	bool have_cast = false, bitdiff = false;
	uint8_t *bufa = NULL, *bufb = NULL;
	const tpc_tensor *xa = ta;
	pair p;

	memset(&cast_t, 0, sizeof(cast_t));
	memset(&p, 0, sizeof(p));
	if ((ret = describe(x, ta, tb, e)))
		goto out;
	if (!same_shape(ta, tb)) {
		x->kind = TPC_DIFF_SHAPE;
		goto out;
	}
	tpc_dtype da = ta->dtype, db = tb->dtype;
	if (da != db && o->cast && dclass(da) == CL_FLOAT && dclass(db) == CL_FLOAT && tpc_cast_supported(da, db)) {
		if (tpc_tensor_copy(&cast_t, ta)) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		have_cast = true;
		cast_t.name = ta->name;
		cast_t.dtype = db;
		cast_t.nbytes = ta->numel * tpc_dtype_size(db);
		xa = &cast_t;
		da = db;
		x->cast = true;
	}
	if ((ta->flags | tb->flags) & TPC_TF_NODATA) {
		/* meta tensors: equal when both have no bytes */
		bool both = (ta->flags & tb->flags & TPC_TF_NODATA) != 0;
		x->kind = da != db ? TPC_DIFF_DTYPE : both ? TPC_DIFF_EQUAL : TPC_DIFF_VALUES;
		x->elements = ta->numel;
		x->differing = both ? 0 : ta->numel;
		goto out;
	}
	p.same = da == db;
	p.ua = unit_dtype(da, &p.per);
	unsigned perb;
	p.ub = unit_dtype(db, &perb);
	p.cls = dclass(p.ua);
	uint64_t nunits = ta->numel * p.per;
	if (p.same && tpc_dtype_bits(da) < 8) {
		/* sub-byte types: whole bytes (an element index is a byte index) */
		p.ua = p.ub = TPC_U8;
		p.cls = CL_BYTES;
		nunits = xa->nbytes;
	}
	if (!p.same && (p.cls == CL_BYTES || dclass(p.ub) == CL_BYTES || perb != p.per)) {
		x->kind = TPC_DIFF_DTYPE; /* not comparable as numbers */
		goto out;
	}
	p.usa = tpc_dtype_size(p.ua);
	p.usb = p.same ? p.usa : tpc_dtype_size(p.ub);
	p.tol = o->tol[db];
	p.exact = p.tol.atol == 0 && p.tol.rtol == 0 && p.tol.ulps == 0;
	x->numeric = p.cls != CL_BYTES;
	x->have_ulps = p.same && p.cls == CL_FLOAT;
	x->elements = ta->numel;

	unsigned big = p.usa > p.usb ? p.usa : p.usb;
	uint64_t cu = TPC_DIFF_CHUNK / big / p.per * p.per;
	if (cu > nunits)
		cu = nunits;
	if (nunits) {
		bufa = tpc_malloc((size_t)(cu * p.usa));
		bufb = tpc_malloc((size_t)(cu * p.usb));
		if (!bufa || !bufb) {
			ret = tpc_err_nomem(e);
			goto out;
		}
	}
	for (uint64_t u0 = 0; u0 < nunits; u0 += cu) {
		uint64_t n = nunits - u0 < cu ? nunits - u0 : cu;
		if ((ret = tpc_ckpt_read_out(a, xa, u0 * p.usa, n * p.usa, bufa, e)) ||
		    (ret = tpc_ckpt_read_out(b, tb, u0 * p.usb, n * p.usb, bufb, e)))
			goto out;
		tpc_ckpt_drop_range(a, xa, u0 * p.usa, n * p.usa);
		tpc_ckpt_drop_range(b, tb, u0 * p.usb, n * p.usb);
		tpc_progress_add(o->progress, n * p.usb);
		if (p.same && !memcmp(bufa, bufb, (size_t)(n * p.usa))) {
			if (bytes_same)
				*bytes_same += n * p.usa;
			continue;
		}
		bitdiff = true;
		compare_units(&p, bufa, bufb, u0, n, x);
	}
	if (!p.same)
		x->kind = TPC_DIFF_DTYPE;
	else if (x->differing)
		x->kind = TPC_DIFF_VALUES;
	else
		x->kind = bitdiff ? TPC_DIFF_CLOSE : TPC_DIFF_EQUAL;
out:
	if (ret && !e->tensor[0])
		tpc_err_tensor(e, ta->name);
	tpc_ckpt_drop_pages(a, xa);
	tpc_ckpt_drop_pages(b, tb);
	free(bufa);
	free(bufb);
	if (have_cast) {
		cast_t.name = NULL;
		tpc_tensor_release(&cast_t);
	}
	return ret;
}

static tpc_diff_entry *push(tpc_diff *d, const char *name, tpc_err *e)
{
	if (tpc_grow((void **)&d->e, &d->cap, d->n + 1, sizeof(*d->e))) {
		tpc_err_nomem(e);
		return NULL;
	}
	tpc_diff_entry *x = &d->e[d->n];
	memset(x, 0, sizeof(*x));
	if (!(x->name = tpc_strdup(name ? name : ""))) {
		tpc_err_nomem(e);
		return NULL;
	}
	d->n++;
	return x;
}

int tpc_diff_run(const tpc_ckpt *a, const tpc_ckpt *b, const tpc_diff_opts *o, tpc_diff *d, tpc_err *e)
{
	int ret = 0;
	double t0 = tpc_now();
	bool *seen = tpc_calloc(b->n ? b->n : 1, sizeof(bool));
	if (!seen)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < a->n; i++) {
		const tpc_tensor *ta = &a->t[i];
		int64_t j = tpc_ckpt_find(b, ta->name);
		tpc_diff_entry *x = push(d, ta->name, e);
		if (!x) {
			ret = TPC_EIO;
			goto out;
		}
		if (j < 0) {
			x->kind = TPC_DIFF_ONLY_A;
			if ((ret = describe(x, ta, NULL, e)))
				goto out;
			d->nonly_a++;
			continue;
		}
		seen[j] = true;
		if ((ret = tpc_diff_tensor(a, ta, b, &b->t[j], o, x, &d->bytes_same, e)))
			goto out;
		if (x->elements && x->kind != TPC_DIFF_SHAPE)
			d->bytes += b->t[j].nbytes;
		if (x->kind == TPC_DIFF_EQUAL)
			d->nequal++;
		else if (x->kind == TPC_DIFF_CLOSE)
			d->nclose++;
		else
			d->ndiffer++;
	}
	for (size_t j = 0; j < b->n; j++) {
		if (seen[j])
			continue;
		tpc_diff_entry *x = push(d, b->t[j].name, e);
		if (!x) {
			ret = TPC_EIO;
			goto out;
		}
		x->kind = TPC_DIFF_ONLY_B;
		if ((ret = describe(x, NULL, &b->t[j], e)))
			goto out;
		d->nonly_b++;
	}
out:
	d->seconds = tpc_now() - t0;
	free(seen);
	return ret;
}

/* ---- reports ---- */

static void shape_str(tpc_buf *b, const int64_t *s, int ndim)
{
	tpc_buf_addc(b, '[');
	for (int i = 0; i < ndim; i++)
		tpc_buf_addf(b, "%s%lld", i ? ", " : "", (long long)s[i]);
	tpc_buf_addc(b, ']');
}

/* The multi-index of flat index `flat` in C order over B's shape. */
static void index_str(tpc_buf *b, const tpc_diff_entry *x)
{
	int64_t idx[TPC_MAX_NDIM];
	uint64_t f = x->first;
	int nd = x->ndim_b > TPC_MAX_NDIM ? TPC_MAX_NDIM : x->ndim_b;
	for (int d = nd - 1; d >= 0; d--) {
		uint64_t s = x->shape_b[d] > 0 ? (uint64_t)x->shape_b[d] : 1;
		idx[d] = (int64_t)(f % s);
		f /= s;
	}
	shape_str(b, idx, nd);
}

static void val_str(tpc_buf *b, tpc_dtype dt, double v)
{
	bool wide = dt == TPC_F64 || dt == TPC_C128 || dt == TPC_I64 || dt == TPC_U64;
	if (isnan(v))
		tpc_buf_adds(b, "nan");
	else if (isinf(v))
		tpc_buf_adds(b, v > 0 ? "inf" : "-inf");
	else
		tpc_buf_addf(b, wide ? "%.17g" : "%.9g", v);
}

static void name_str(tpc_buf *b, const char *name)
{
	char nm[TPC_ERR_NAME_MAX];
	tpc_sanitize(nm, sizeof(nm), name);
	tpc_buf_adds(b, nm);
}

static void stats_str(tpc_buf *b, const tpc_diff_entry *x)
{
	tpc_buf_adds(b, "max abs ");
	val_str(b, TPC_F32, x->max_abs);
	tpc_buf_adds(b, ", max rel ");
	val_str(b, TPC_F32, x->max_rel);
	if (x->have_ulps) {
		if (x->max_ulps == UINT64_MAX)
			tpc_buf_adds(b, ", max ulps nan");
		else
			tpc_buf_addf(b, ", max ulps %llu", (unsigned long long)x->max_ulps);
	}
}

/* One line's message, without the name ("values differ in ..."). */
static void entry_msg(tpc_buf *b, const tpc_diff_entry *x)
{
	if (x->cast)
		tpc_buf_addf(b, "A cast to %s: ", tpc_dtype_name(x->dtype_b));
	switch (x->kind) {
	case TPC_DIFF_EQUAL:
		tpc_buf_adds(b, "equal");
		break;
	case TPC_DIFF_CLOSE:
		tpc_buf_adds(b, "within tolerance (");
		stats_str(b, x);
		tpc_buf_addc(b, ')');
		break;
	case TPC_DIFF_VALUES:
	case TPC_DIFF_DTYPE:
		if (x->kind == TPC_DIFF_DTYPE)
			tpc_buf_addf(b, "dtype %s in A, %s in B", tpc_dtype_name(x->dtype_a), tpc_dtype_name(x->dtype_b));
		if (!x->elements || (x->kind == TPC_DIFF_DTYPE && !x->numeric))
			break;
		if (x->kind == TPC_DIFF_DTYPE && dclass(x->dtype_a) == CL_FLOAT && dclass(x->dtype_b) == CL_FLOAT)
			tpc_buf_addf(b, " (--cast compares A cast to %s)", tpc_dtype_name(x->dtype_b));
		if (x->kind == TPC_DIFF_DTYPE && !x->differing) {
			tpc_buf_adds(b, "; as numbers, equal");
			break;
		}
		if (x->kind == TPC_DIFF_DTYPE)
			tpc_buf_adds(b, "; as numbers, ");
		tpc_buf_addf(b, "values differ in %llu of %llu elements", (unsigned long long)x->differing,
			     (unsigned long long)x->elements);
		if (x->differing) {
			tpc_buf_adds(b, "; first at ");
			index_str(b, x);
			if (x->numeric) {
				tpc_buf_adds(b, ": A ");
				val_str(b, x->dtype_a, x->first_a);
				tpc_buf_adds(b, ", B ");
				val_str(b, x->dtype_b, x->first_b);
			}
		}
		if (x->numeric) {
			tpc_buf_adds(b, "; ");
			stats_str(b, x);
		}
		break;
	case TPC_DIFF_SHAPE:
		tpc_buf_adds(b, "shape ");
		shape_str(b, x->shape_a, x->ndim_a);
		tpc_buf_adds(b, " in A, ");
		shape_str(b, x->shape_b, x->ndim_b);
		tpc_buf_adds(b, " in B");
		break;
	case TPC_DIFF_ONLY_A:
	case TPC_DIFF_ONLY_B: {
		bool in_a = x->kind == TPC_DIFF_ONLY_A;
		tpc_buf_addf(b, "only in %s (%s ", in_a ? "A" : "B", tpc_dtype_name(in_a ? x->dtype_a : x->dtype_b));
		shape_str(b, in_a ? x->shape_a : x->shape_b, in_a ? x->ndim_a : x->ndim_b);
		tpc_buf_addc(b, ')');
		break;
	}
	}
}

void tpc_diff_report_text(const tpc_diff *d, const char *label_a, const char *label_b, bool verbose,
			  tpc_buf *b)
{
	char la[TPC_ERR_PATH_MAX], lb[TPC_ERR_PATH_MAX], s1[32], s2[32];
	tpc_sanitize(la, sizeof(la), label_a);
	tpc_sanitize(lb, sizeof(lb), label_b);
	tpc_buf_addf(b, "# diff A '%s', B '%s'\n", la, lb);
	for (size_t i = 0; i < d->n; i++) {
		const tpc_diff_entry *x = &d->e[i];
		if (!verbose && (x->kind == TPC_DIFF_EQUAL || x->kind == TPC_DIFF_CLOSE))
			continue;
		name_str(b, x->name);
		tpc_buf_adds(b, ": ");
		entry_msg(b, x);
		tpc_buf_addc(b, '\n');
	}
	tpc_buf_addf(b,
		     "# %s: %zu tensors: %zu equal, %zu within tolerance, %zu differ, %zu only in A, %zu only in B "
		     "(%s compared, %s of it byte-identical, %.2f s)\n",
		     tpc_diff_same(d) ? "same" : "different", d->n, d->nequal, d->nclose, d->ndiffer, d->nonly_a,
		     d->nonly_b, tpc_fmt_size(d->bytes, s1, sizeof(s1)), tpc_fmt_size(d->bytes_same, s2, sizeof(s2)),
		     d->seconds);
}

void tpc_diff_report_json(const tpc_diff *d, const char *label_a, const char *label_b, tpc_buf *b)
{
	tpc_buf_adds(b, "{\n  \"a\": ");
	tpc_buf_json_str(b, label_a, strlen(label_a), false);
	tpc_buf_adds(b, ",\n  \"b\": ");
	tpc_buf_json_str(b, label_b, strlen(label_b), false);
	tpc_buf_addf(b,
		     ",\n  \"same\": %s,\n  \"tensors\": %zu,\n  \"equal\": %zu,\n  \"close\": %zu,\n  \"differ\": %zu,\n"
		     "  \"only_a\": %zu,\n  \"only_b\": %zu,\n  \"bytes_compared\": %llu,\n  \"bytes_identical\": %llu,\n"
		     "  \"seconds\": %.3f,\n  \"results\": [",
		     tpc_diff_same(d) ? "true" : "false", d->n, d->nequal, d->nclose, d->ndiffer, d->nonly_a, d->nonly_b,
		     (unsigned long long)d->bytes, (unsigned long long)d->bytes_same, d->seconds);
	for (size_t i = 0; i < d->n; i++) {
		const tpc_diff_entry *x = &d->e[i];
		tpc_buf_adds(b, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
		tpc_buf_json_str(b, x->name, strlen(x->name), false);
		tpc_buf_addf(b, ", \"status\": \"%s\"", tpc_diff_kind_name(x->kind));
		if (x->shape_a) {
			tpc_buf_addf(b, ", \"dtype_a\": \"%s\", \"shape_a\": ", tpc_dtype_name(x->dtype_a));
			shape_str(b, x->shape_a, x->ndim_a);
		}
		if (x->shape_b) {
			tpc_buf_addf(b, ", \"dtype_b\": \"%s\", \"shape_b\": ", tpc_dtype_name(x->dtype_b));
			shape_str(b, x->shape_b, x->ndim_b);
		}
		if (x->kind != TPC_DIFF_ONLY_A && x->kind != TPC_DIFF_ONLY_B && x->kind != TPC_DIFF_SHAPE) {
			tpc_buf_addf(b, ", \"cast\": %s, \"elements\": %llu, \"differing\": %llu", x->cast ? "true" : "false",
				     (unsigned long long)x->elements, (unsigned long long)x->differing);
			if (x->differing) {
				tpc_buf_addf(b, ", \"first_flat\": %llu, \"first_index\": ", (unsigned long long)x->first);
				index_str(b, x);
				if (x->numeric) {
					tpc_buf_adds(b, ", \"first_a\": ");
					tpc_buf_json_num(b, x->first_a, 17);
					tpc_buf_adds(b, ", \"first_b\": ");
					tpc_buf_json_num(b, x->first_b, 17);
				}
			}
			if (x->numeric) {
				tpc_buf_adds(b, ", \"max_abs\": ");
				tpc_buf_json_num(b, x->max_abs, 17);
				tpc_buf_adds(b, ", \"max_rel\": ");
				tpc_buf_json_num(b, x->max_rel, 17);
			}
			if (x->have_ulps) {
				if (x->max_ulps == UINT64_MAX)
					tpc_buf_adds(b, ", \"max_ulps\": null");
				else
					tpc_buf_addf(b, ", \"max_ulps\": %llu", (unsigned long long)x->max_ulps);
			}
		}
		tpc_buf_adds(b, ", \"message\": ");
		tpc_buf buf = TPC_BUF_INIT;
		entry_msg(&buf, x);
		tpc_buf_json_str(b, buf.p ? buf.p : "", buf.len, false);
		tpc_buf_release(&buf);
		tpc_buf_addc(b, '}');
	}
	tpc_buf_adds(b, d->n ? "\n  ]\n}\n" : "]\n}\n");
}

void tpc_diff_report_junit(const tpc_diff *d, const char *label_a, const char *label_b, tpc_buf *b)
{
	size_t nfail = d->ndiffer + d->nonly_a + d->nonly_b;
	tpc_buf_adds(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	tpc_buf_addf(b, "<testsuites name=\"tpconv\" tests=\"%zu\" failures=\"%zu\" time=\"%.3f\">\n", d->n, nfail,
		     d->seconds);
	tpc_buf_addf(b, "  <testsuite name=\"tpconv-diff\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"0\" time=\"%.3f\">\n",
		     d->n, nfail, d->seconds);
	tpc_buf_adds(b, "    <properties><property name=\"a\" value=\"");
	tpc_buf_xml_str(b, label_a, strlen(label_a));
	tpc_buf_adds(b, "\"/><property name=\"b\" value=\"");
	tpc_buf_xml_str(b, label_b, strlen(label_b));
	tpc_buf_adds(b, "\"/></properties>\n");
	for (size_t i = 0; i < d->n; i++) {
		const tpc_diff_entry *x = &d->e[i];
		tpc_buf_adds(b, "    <testcase classname=\"diff\" name=\"");
		tpc_buf_xml_str(b, x->name, strlen(x->name));
		tpc_buf_adds(b, "\" time=\"0\"");
		if (x->kind == TPC_DIFF_EQUAL || x->kind == TPC_DIFF_CLOSE) {
			tpc_buf_adds(b, "/>\n");
			continue;
		}
		tpc_buf msg = TPC_BUF_INIT;
		entry_msg(&msg, x);
		tpc_buf_addf(b, ">\n      <failure type=\"%s\" message=\"", tpc_diff_kind_name(x->kind));
		tpc_buf_xml_str(b, msg.p ? msg.p : "", msg.len);
		tpc_buf_adds(b, "\"/>\n    </testcase>\n");
		tpc_buf_release(&msg);
	}
	tpc_buf_adds(b, "  </testsuite>\n</testsuites>\n");
}
