/* kernels.c - fp32 and fp64 instances of kernels.inc, and the small helpers
 * around them: element decoding, page dropping, hashing. */
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "tpc_io.h"
#include "tpc_util.h"
#include "vint.h"

#define TPC_CAT2(a, b) a##_##b
#define TPC_CAT(a, b) TPC_CAT2(a, b)

static double yarn_get_mscale(double scale, double m)
{
	return scale <= 1 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

static double yarn_correction_dim(double rot, double dim, double base, double max_pos)
{
	return dim * log(max_pos / (rot * 2 * 3.14159265358979323846)) / (2 * log(base));
}

void tpc__rope_freqs(const tpc_yarn *y, double theta, int64_t rot, double *inv, double *af)
{
	double dim = (double)rot;
	*af = 1.0;
	for (int64_t i = 0; i < rot / 2; i++)
		inv[i] = 1.0 / pow(theta, 2.0 * (double)i / dim);
	if (!y || y->factor <= 1)
		return;
	double f = y->factor;
	if (y->attn_factor > 0)
		*af = y->attn_factor;
	else if (y->mscale > 0 && y->mscale_all_dim > 0)
		*af = yarn_get_mscale(f, y->mscale) / yarn_get_mscale(f, y->mscale_all_dim);
	else
		*af = yarn_get_mscale(f, 1.0);
	double lo = yarn_correction_dim(y->beta_fast, dim, theta, (double)y->orig_max);
	double hi = yarn_correction_dim(y->beta_slow, dim, theta, (double)y->orig_max);
	if (y->truncate) {
		lo = floor(lo);
		hi = ceil(hi);
	}
	lo = lo < 0 ? 0 : lo;
	hi = hi > dim - 1 ? dim - 1 : hi;
	if (lo == hi)
		hi += 0.001;
	for (int64_t i = 0; i < rot / 2; i++) {
		double ramp = ((double)i - lo) / (hi - lo);
		double ext = 1.0 - (ramp < 0 ? 0 : ramp > 1 ? 1 : ramp);
		inv[i] = inv[i] / f * (1.0 - ext) + inv[i] * ext;
	}
}

void tpc__rope_llama3(const tpc_rope_llama3 *l, int64_t n, double *inv)
{
	if (!l || l->factor <= 0)
		return;
	double lo_wl = (double)l->orig_max / l->low_freq_factor, hi_wl = (double)l->orig_max / l->high_freq_factor;
	for (int64_t i = 0; i < n; i++) {
		double wl = 2 * 3.14159265358979323846 / inv[i];
		if (wl > lo_wl) {
			inv[i] /= l->factor;
		} else if (wl >= hi_wl && l->high_freq_factor != l->low_freq_factor) { /* the middle band */
			double s = ((double)l->orig_max / wl - l->low_freq_factor) / (l->high_freq_factor - l->low_freq_factor);
			inv[i] = (1 - s) * inv[i] / l->factor + s * inv[i];
		}
	}
}

/* IEEE half and bfloat16 to float: exact widening. */
static float tpc__half(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
	if (exp == 0) {
		if (man == 0) {
			u = sign;
		} else { /* subnormal: normalise */
			int e = -1;
			do {
				e++;
				man <<= 1;
			} while (!(man & 0x400));
			u = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
		}
	} else if (exp == 0x1f) {
		u = sign | 0x7f800000u | man << 13;
	} else {
		u = sign | (exp + 127 - 15) << 23 | man << 13;
	}
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static float tpc__bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

bool tpc__float_dtype(tpc_dtype dt)
{
	return dt == TPC_F32 || dt == TPC_F64 || dt == TPC_F16 || dt == TPC_BF16;
}

void tpc__vctx_release(vctx *x)
{
	free(x->raw);
	free(x->cvt);
	x->raw = NULL;
	x->cvt = NULL;
	x->raw_cap = x->cvt_cap = 0;
}

const uint8_t *tpc__mapped(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t off, uint64_t len)
{
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	uint64_t n = t->numel * tpc_dtype_bits(t->src_dtype) / 8;
	if (!m || !m->data || m->fd < 0 || t->dq || t->nparts || (t->flags & (TPC_TF_ZERO | TPC_TF_NODATA)) ||
	    !tpc_tensor_is_contiguous(t) || !len || off > n || len > n - off ||
	    t->offset > m->size || off + len > m->size - t->offset)
		return NULL;
	tpc_map_populate(m, t->offset + off, len);
	return m->data + t->offset + off;
}

void tpc__drop_behind(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t *from, int64_t r0, int64_t r1, bool all)
{
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	if (!m || !m->data || t->dq || t->nparts || (t->flags & (TPC_TF_ZERO | TPC_TF_NODATA)) ||
	    !tpc_tensor_is_contiguous(t) || t->ndim < 1 || t->shape[0] < 1)
		return;
	uint64_t row = t->numel / (uint64_t)t->shape[0] * tpc_dtype_bits(t->src_dtype) / 8;
	uint64_t end = t->offset + (uint64_t)r1 * row;
	if (*from == UINT64_MAX)
		*from = t->offset + (uint64_t)r0 * row;
	if (end <= *from || (!all && end - *from < TPC_V_DROP))
		return;
	/* a block partly behind stays until the next call: its start is
	 * rounded down to the block then */
	if (all)
		tpc_map_drop(m, *from, end - *from);
	else
		tpc_map_drop_passed(m, *from, end);
	*from = end;
}

uint64_t tpc__mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t tpc__fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

double tpc_verify_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
	uint64_t h = tpc__mix64(tpc__mix64(seed ^ tpc__mix64(stream)) + index);
	return (double)(h >> 40) * (1.0 / 8388608.0) - 1.0; /* 24 bits: k / 2^23 - 1 */
}

uint64_t tpc_verify_stream(const char *name, int kind)
{
	uint64_t h = tpc__fnv(TPC_FNV_INIT, name, strlen(name));
	unsigned char k = (unsigned char)kind;
	return tpc__fnv(h, &k, 1);
}

#define R float
#define S f
#define TPC_V_FLOAT 1
#define REXP expf
#define RERF erff
#define RTANH tanhf
#define RSQRT sqrtf
#define RLOG1P log1pf
#define GEMM sgemm
#include "kernels.inc"
#undef R
#undef S
#undef TPC_V_FLOAT
#undef REXP
#undef RERF
#undef RTANH
#undef RSQRT
#undef RLOG1P
#undef GEMM

#define R double
#define S d
#define TPC_V_FLOAT 0
#define REXP exp
#define RERF erf
#define RTANH tanh
#define RSQRT sqrt
#define RLOG1P log1p
#define GEMM dgemm
#include "kernels.inc"
