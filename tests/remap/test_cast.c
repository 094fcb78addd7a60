/* test_cast.c - lib/tpc_cast: every f16 and bf16 pattern, f32 -> f16/bf16
 * against independent references, f64 -> f32 against the C cast, NaN rules,
 * integer sources, the parallel kernel against the scalar functions, and a
 * pending cast through tpc_ckpt_read_out / write_tensor / hash_tensor. The
 * bit-for-bit comparison with real torch is tests/remap/cast_test.sh. */
#include "test_util.h"

#include <math.h>

#include "tpc_cast.h"
#include "tpc_ckpt.h"
#include "tpc_io.h"
#include "tpc_quant.h"
#include "tpc_util.h"

static uint32_t f2u(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}
static float u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}
static uint64_t d2u(double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	return u;
}
static double u2d(uint64_t u)
{
	double d;
	memcpy(&d, &u, 8);
	return d;
}

/* Reference f16 decode from the definition. */
static double f16_value(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double s = (h & 0x8000) ? -1.0 : 1.0;
	if (e == 0)
		return s * ldexp(m, -24);
	if (e == 31)
		return m ? NAN : s * INFINITY;
	return s * ldexp(1024 + m, e - 25);
}

/*
 * Reference round-to-nearest-even of a finite float onto a grid of
 * `mbits` significand bits with minimum exponent `emin` (of the leading bit)
 * and maximum finite value `max`: exact in double, which holds every
 * float and every midpoint between neighbours.
 */
static double round_grid(double x, int mbits, int emin, double max)
{
	double a = fabs(x);
	int e;
	if (a == 0)
		return x;
	frexp(a, &e); /* a = f * 2^e, f in [0.5, 1): leading bit at e - 1 */
	int lead = e - 1 < emin ? emin : e - 1;
	double ulp = ldexp(1.0, lead - (mbits - 1));
	double q = floor(a / ulp), r = a - q * ulp;
	if (r > ulp / 2 || (r == ulp / 2 && fmod(q, 2.0) == 1.0))
		q += 1;
	double v = q * ulp;
	/* overflow: the first value that rounds past max is max + ulp/2 */
	if (v > max)
		v = INFINITY;
	return x < 0 ? -v : v;
}

static void test_f16_exhaustive(void **st)
{
	(void)st;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = tpc_f16_to_f32((uint16_t)h);
		double want = f16_value((uint16_t)h);
		if (isnan(want)) {
			/* quiet, sign and payload kept (x86 vcvtph2ps) */
			assert_true(isnan(f));
			assert_int_equal(f2u(f), ((h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x3ffu) << 13));
			assert_int_equal(tpc_f32_to_f16(f), (h & 0x8000u) | 0x7e00u);
			assert_int_equal(tpc_f32_to_bf16(f), 0xffff);
			continue;
		}
		if ((double)f != want || !signbit(f) != !signbit(want))
			fail_msg("f16 0x%04x -> %a, want %a", h, (double)f, want);
		/* round trip through f32 and f64 */
		assert_int_equal(tpc_f32_to_f16(f), h);
		assert_int_equal(tpc_f32_to_f16(tpc_f64_to_f32(tpc_f32_to_f64(f))), h);
	}
}

static void test_bf16_exhaustive(void **st)
{
	(void)st;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = tpc_bf16_to_f32((uint16_t)h);
		assert_int_equal(f2u(f), h << 16);
		if (isnan(f))
			assert_int_equal(tpc_f32_to_bf16(f), 0xffff);
		else
			assert_int_equal(tpc_f32_to_bf16(f), h);
	}
}

/* A spread of f32 patterns: every exponent, low bits at and around the f16
 * and bf16 rounding points, plus pseudo-random ones. */
static uint32_t pattern(uint64_t i)
{
	static const uint32_t lows[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7fff,
					0x8000, 0x8001, 0xffff, 0x18000, 0x7fffff};
	const uint64_t nl = sizeof(lows) / sizeof(lows[0]);
	uint64_t k = i % nl, rest = i / nl;
	uint32_t exp = (uint32_t)(rest % 256), sign = (uint32_t)(rest / 256 % 2) << 31;
	uint32_t high = (uint32_t)(rest * 2654435761u) & 0x7e0000u; /* varied top mantissa bits */
	return sign | (exp << 23) | ((lows[k] | high) & 0x7fffffu);
}

static void test_f32_narrowing(void **st)
{
	(void)st;
	uint64_t n = 14 * 256 * 2 * 16;
	uint64_t state = 0x9e3779b97f4a7c15ull;
	for (uint64_t i = 0; i < n + (1u << 20); i++) {
		uint32_t u;
		if (i < n) {
			u = pattern(i);
		} else {
			state ^= state << 13, state ^= state >> 7, state ^= state << 17;
			u = (uint32_t)state;
		}
		float f = u2f(u);
		if (isnan(f))
			continue;
		double h = round_grid(f, 11, -14, 65504.0);
		double b = round_grid(f, 8, -126, 3.3895313892515355e38);
		double gh = f16_value(tpc_f32_to_f16(f)), gb = tpc_bf16_to_f32(tpc_f32_to_bf16(f));
		if (gh != h || !signbit(gh) != !signbit(h))
			fail_msg("f32 0x%08x (%a) -> f16 %a, want %a", u, (double)f, gh, h);
		if (gb != b || !signbit(gb) != !signbit(b))
			fail_msg("f32 0x%08x (%a) -> bf16 %a, want %a", u, (double)f, gb, b);
#ifdef __FLT16_MAX__
		/* the compiler's own conversion (libgcc soft-float or F16C), RNE too */
		_Float16 c = (_Float16)f;
		uint16_t cb;
		memcpy(&cb, &c, 2);
		assert_int_equal(tpc_f32_to_f16(f), cb);
#endif
	}
	/* the edges by name */
	assert_int_equal(tpc_f32_to_f16(65504.0f), 0x7bff);
	assert_int_equal(tpc_f32_to_f16(65519.996f), 0x7bff);
	assert_int_equal(tpc_f32_to_f16(65520.0f), 0x7c00);
	assert_int_equal(tpc_f32_to_f16(-1e10f), 0xfc00);
	assert_int_equal(tpc_f32_to_f16(0x1p-25f), 0x0000);          /* tie: to even (zero) */
	assert_int_equal(tpc_f32_to_f16(0x1.000002p-25f), 0x0001);
	assert_int_equal(tpc_f32_to_f16(0x1.8p-24f), 0x0002);        /* 1.5 ulp: tie to even 2 */
	assert_int_equal(tpc_f32_to_f16(-0.0f), 0x8000);
	assert_int_equal(tpc_f32_to_f16(0x1p-149f), 0x0000);
	assert_int_equal(tpc_f32_to_bf16(0x1.01p0f), 0x3f80);        /* tie: to even */
	assert_int_equal(tpc_f32_to_bf16(0x1.03p0f), 0x3f82);        /* tie: up to even */
	assert_int_equal(tpc_f32_to_bf16(u2f(0x7f7fffff)), 0x7f80);  /* FLT_MAX rounds to Inf */
	assert_int_equal(tpc_f32_to_bf16(u2f(0x00000001)), 0x0000);
	assert_int_equal(tpc_f32_to_bf16(u2f(0x00008000)), 0x0000);  /* subnormal tie to even */
	assert_int_equal(tpc_f32_to_bf16(u2f(0x00018000)), 0x0002);
	assert_int_equal(tpc_f32_to_bf16(-INFINITY), 0xff80);
	assert_int_equal(tpc_f32_to_bf16(u2f(0x7f800001)), 0xffff);
}

static void test_f64(void **st)
{
	(void)st;
	uint64_t state = 88172645463325252ull;
	for (int i = 0; i < 1 << 20; i++) {
		state ^= state << 13, state ^= state >> 7, state ^= state << 17;
		double d = u2d(state);
		if (i & 1) /* half of them inside float's range */
			d = ldexp(frexp(d, &(int){0}), (int)(state % 300) - 160);
		if (isnan(d))
			continue;
		assert_int_equal(f2u(tpc_f64_to_f32(d)), f2u((float)d));
		float f = u2f((uint32_t)state);
		if (!isnan(f))
			assert_int_equal(d2u(tpc_f32_to_f64(f)), d2u((double)f));
	}
	/* NaN: sign and top payload kept, quiet bit set */
	assert_int_equal(f2u(tpc_f64_to_f32(u2d(0x7ff0000000000001ull))), 0x7fc00000u);
	assert_int_equal(f2u(tpc_f64_to_f32(u2d(0x7ff0000020000000ull))), 0x7fc00001u);
	assert_int_equal(f2u(tpc_f64_to_f32(u2d(0xfff123456789abcdull))), 0xffc91a2bu);
	assert_int_equal(d2u(tpc_f32_to_f64(u2f(0x7f800001u))), 0x7ff8000020000000ull);
	assert_int_equal(d2u(tpc_f32_to_f64(u2f(0xff812345u))), 0xfff82468a0000000ull);
	/* f64 -> bf16 rounds twice, through f32, as c10::BFloat16(float) */
	double x = 1.0 + 0x1p-8 + 0x1p-30;
	uint16_t out;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_cast(&out, TPC_BF16, &x, TPC_F64, 1, &e), 0);
	assert_int_equal(out, 0x3f80); /* once: 0x3f81; through f32 (1 + 2^-8, a tie): 0x3f80 */
}

/* The kernel over big buffers (parallel blocks, a tail) equals the scalar functions. */
static void test_kernels(void **st)
{
	(void)st;
	const uint64_t n = (1u << 20) + 7;
	uint32_t *in = malloc(n * 4);
	uint16_t *o16 = malloc(n * 2);
	double *o64 = malloc(n * 8);
	float *o32 = malloc(n * 4);
	tpc_err e;
	uint64_t s = 1;
	for (uint64_t i = 0; i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		in[i] = (uint32_t)(s >> 32);
	}
	tpc_err_init(&e);
	assert_int_equal(tpc_cast(o16, TPC_BF16, in, TPC_F32, n, &e), 0);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(o16[i], tpc_f32_to_bf16(u2f(in[i])));
	assert_int_equal(tpc_cast(o16, TPC_F16, in, TPC_F32, n, &e), 0);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(o16[i], tpc_f32_to_f16(u2f(in[i])));
	assert_int_equal(tpc_cast(o64, TPC_F64, in, TPC_F32, n, &e), 0);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(d2u(o64[i]), d2u(tpc_f32_to_f64(u2f(in[i]))));
	assert_int_equal(tpc_cast(o32, TPC_F32, o64, TPC_F64, n, &e), 0);
	for (uint64_t i = 0; i < n; i++) /* f32 -> f64 -> f32 is the identity, NaNs quieted */
		assert_int_equal(f2u(o32[i]), isnan(u2f(in[i])) ? in[i] | 0x400000u : in[i]);
	/* f16 -> bf16: NaN is 0x7FC0 there (torch's scalar path) */
	uint16_t h[3] = {0x7e00, 0xfc01, 0x3c00}, b[3];
	assert_int_equal(tpc_cast(b, TPC_BF16, h, TPC_F16, 3, &e), 0);
	assert_int_equal(b[0], 0x7fc0);
	assert_int_equal(b[1], 0x7fc0);
	assert_int_equal(b[2], 0x3f80);
	/* integers */
	int64_t i64[4] = {(1ll << 53) + 1, INT64_MIN, -3, 16777217};
	double d4[4];
	float f4[4];
	assert_int_equal(tpc_cast(d4, TPC_F64, i64, TPC_I64, 4, &e), 0);
	assert_true(d4[0] == 0x1p53 && d4[1] == -0x1p63 && d4[2] == -3.0);
	assert_int_equal(tpc_cast(f4, TPC_F32, i64, TPC_I64, 4, &e), 0);
	assert_true(f4[3] == 16777216.0f);
	uint8_t bools[3] = {0, 1, 2};
	uint16_t hb[3];
	assert_int_equal(tpc_cast(hb, TPC_F16, bools, TPC_BOOL, 3, &e), 0);
	assert_true(hb[0] == 0 && hb[1] == 0x3c00 && hb[2] == 0x3c00);
	int32_t big = 70000;
	assert_int_equal(tpc_cast(hb, TPC_F16, &big, TPC_I32, 1, &e), 0);
	assert_int_equal(hb[0], 0x7c00);
	/* refused pairs */
	assert_false(tpc_cast_supported(TPC_F32, TPC_I32));
	assert_false(tpc_cast_supported(TPC_I32, TPC_I64));
	assert_false(tpc_cast_supported(TPC_F8_E4M3, TPC_F32));
	assert_true(tpc_cast_supported(TPC_F8_E4M3, TPC_F8_E4M3));
	assert_true(tpc_cast_supported(TPC_U64, TPC_BF16));
	assert_int_equal(tpc_cast(o32, TPC_I32, in, TPC_F32, 1, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "cannot cast F32 to I32"));
	free(in);
	free(o16);
	free(o64);
	free(o32);
}

/* A pending cast through the checkpoint: read_out, write_tensor, hash. */
static void test_ckpt_cast(void **st)
{
	(void)st;
	/* 4.5 M elements: the bf16 image (9 MB) passes more than one 8 MiB chunk */
	const int R = 1500, C = 3000;
	float *src = malloc((size_t)R * C * 4);
	tpc_ckpt ck;
	tpc_err e;
	int s;
	for (int i = 0; i < R * C; i++)
		src[i] = (float)sin(i) * (float)(i % 97) + (i % 1000 == 0 ? NAN : 0.0f);
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_mem(&ck, "mem", (uint8_t *)src, (uint64_t)R * C * 4, &s, &e), 0);
	int64_t shape[2] = {C, R}, stride[2] = {1, C}; /* the transpose of a [R, C] matrix */
	int64_t ix = tpc_ckpt_add_tensor(&ck, "t", TPC_F32, 2, shape, stride, s, 0, &e);
	assert_true(ix >= 0);
	tpc_tensor *t = &ck.t[ix];
	t->dtype = TPC_BF16;
	t->nbytes = t->numel * 2;
	uint16_t *want = malloc((size_t)R * C * 2), *got = malloc((size_t)R * C * 2);
	for (int i = 0; i < C; i++)
		for (int j = 0; j < R; j++)
			want[(size_t)i * R + j] = tpc_f32_to_bf16(src[(size_t)j * C + i]);
	assert_int_equal(tpc_ckpt_read_out(&ck, t, 0, t->nbytes, got, &e), 0);
	assert_memory_equal(got, want, t->nbytes);
	memset(got, 0, t->nbytes);
	assert_int_equal(tpc_ckpt_read_out(&ck, t, 2 * 12345, 2 * 777, got, &e), 0);
	assert_memory_equal(got, want + 12345, 2 * 777);
	assert_int_equal(tpc_ckpt_read_out(&ck, t, 1, 2, got, &e), TPC_EINPUT);
	tpc_err_init(&e);
	/* hash = sha256 of the cast image */
	uint8_t h1[TPC_HASH_MAX], h2[TPC_HASH_MAX];
	assert_int_equal(tpc_hash_buf(TPC_HASH_SHA256, want, t->nbytes, h1, &e), 0);
	assert_int_equal(tpc_ckpt_hash_tensor(&ck, t, TPC_HASH_SHA256, h2, &e), 0);
	assert_memory_equal(h1, h2, 32);
	/* write_tensor streams the cast image */
	char *dir = test_tmpdir();
	char path[4200];
	snprintf(path, sizeof(path), "%s/out.bin", dir);
	tpc_out o;
	assert_int_equal(tpc_out_open(&o, path, 0, &e), 0);
	assert_int_equal(tpc_ckpt_write_tensor(&ck, t, &o, &e), 0);
	assert_int_equal(tpc_out_commit(&o, &e), 0);
	tpc_out_abort(&o);
	size_t n = 0;
	uint8_t *file = test_read_file(path, &n);
	assert_int_equal(n, t->nbytes);
	assert_memory_equal(file, want, n);
	free(file);
	/* a contiguous f32 -> f64 too (the plain-copy path must not be taken) */
	int64_t shape1[1] = {1000};
	ix = tpc_ckpt_add_tensor(&ck, "u", TPC_F32, 1, shape1, NULL, s, 400, &e);
	t = &ck.t[ix];
	t->dtype = TPC_F64;
	t->nbytes = 8000;
	snprintf(path, sizeof(path), "%s/out2.bin", dir);
	assert_int_equal(tpc_out_open(&o, path, 0, &e), 0);
	assert_int_equal(tpc_ckpt_write_tensor(&ck, t, &o, &e), 0);
	assert_int_equal(tpc_out_commit(&o, &e), 0);
	tpc_out_abort(&o);
	file = test_read_file(path, &n);
	assert_int_equal(n, 8000);
	for (int i = 0; i < 1000; i++) {
		double d;
		memcpy(&d, file + 8 * i, 8);
		assert_int_equal(d2u(d), d2u(tpc_f32_to_f64(src[100 + i])));
	}
	free(file);
	test_rmrf(dir);
	free(dir);
	free(want);
	free(got);
	tpc_ckpt_release(&ck);
}

/* Every E4M3FN code against the format's definition: sign, 4-bit exponent
 * (bias 7), 3-bit mantissa, exponent 0 subnormal, S.1111.111 NaN, no Inf. */
static void test_e4m3_all(void **st)
{
	(void)st;
	int finite = 0;
	for (int c = 0; c < 256; c++) {
		float v = tpc_f8e4m3_to_f32((uint8_t)c);
		int ex = (c >> 3) & 15, m = c & 7;
		if (ex == 15 && m == 7) {
			assert_true(isnan(v));
			assert_int_equal(f2u(v), (c & 0x80 ? 0x80000000u : 0u) | 0x7FF00000u);
			continue;
		}
		double ref = ex ? ldexp(8 + m, ex - 7 - 3) : ldexp(m, -9);
		if (c & 0x80)
			ref = -ref;
		assert_int_equal(f2u(v), f2u((float)ref));
		finite++;
	}
	assert_int_equal(finite, 254);
	assert_true(tpc_f8e4m3_to_f32(0x7E) == 448.0f && tpc_f8e4m3_to_f32(0xFE) == -448.0f);
	assert_true(tpc_f8e4m3_to_f32(0x38) == 1.0f && tpc_f8e4m3_to_f32(0x40) == 2.0f);
	assert_true(tpc_f8e4m3_to_f32(0x01) == ldexpf(1, -9));     /* smallest subnormal */
	assert_true(tpc_f8e4m3_to_f32(0x07) == ldexpf(7, -9));     /* largest subnormal */
	assert_true(tpc_f8e4m3_to_f32(0x08) == ldexpf(1, -6));     /* smallest normal */
	assert_int_equal(f2u(tpc_f8e4m3_to_f32(0x80)), 0x80000000u); /* -0 */
	assert_int_equal(f2u(tpc_f8e4m3_to_f32(0x00)), 0u);
}

static void test_quant_cfg(void **st)
{
	(void)st;
	tpc_quant_cfg q;
	tpc_err e;
	const char *ds = "{\"torch_dtype\":\"bfloat16\",\"quantization_config\":{\"quant_method\":\"fp8\","
			 "\"fmt\":\"e4m3\",\"weight_block_size\":[128,64]}}";
	tpc_err_init(&e);
	assert_int_equal(tpc_quant_cfg_from_buffer(&q, ds, strlen(ds), "c.json", false, &e), 0);
	assert_int_equal(q.method, TPC_QM_FP8);
	assert_int_equal(q.block[0], 128);
	assert_int_equal(q.block[1], 64);
	assert_int_equal(q.torch_dtype, TPC_BF16);
	const char *g = "{\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":8,\"group_size\":-1,"
			"\"checkpoint_format\":\"gptq_v2\"}}";
	assert_int_equal(tpc_quant_cfg_from_buffer(&q, g, strlen(g), "c.json", false, &e), 0);
	assert_true(q.method == TPC_QM_GPTQ && q.bits == 8 && q.group_size == -1 && !q.zero_plus_one);
	assert_int_equal(q.torch_dtype, TPC_DT_INVALID);
	const char *old = "{\"bits\":4,\"group_size\":128,\"desc_act\":true,\"sym\":true}";
	assert_int_equal(tpc_quant_cfg_from_buffer(&q, old, strlen(old), "q.json", true, &e), 0);
	assert_true(q.method == TPC_QM_GPTQ && q.bits == 4 && q.group_size == 128 && q.zero_plus_one);
	static const struct {
		const char *json;
		int method;
	} cts[] = {
		{"{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":{\"g\":{\"weights\":{\"type\":\"float\"}}}}}", TPC_QM_FP8},
		{"{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":{\"g\":{\"weights\":{\"num_bits\":8,\"strategy\":\"block\",\"block_structure\":[128,128]}}}}}", TPC_QM_FP8},
		{"{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\",\"config_groups\":{\"g\":{\"weights\":{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":32}}}}}", TPC_QM_PACKED},
		{"{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"nvfp4-pack-quantized\",\"config_groups\":{\"g\":{\"weights\":{\"type\":\"float\",\"num_bits\":4,\"group_size\":16}}}}}", TPC_QM_FP4},
	};
	for (size_t i = 0; i < sizeof(cts) / sizeof(cts[0]); i++) {
		assert_int_equal(tpc_quant_cfg_from_buffer(&q, cts[i].json, strlen(cts[i].json), "c.json", false, &e), 0);
		assert_int_equal(q.method, cts[i].method);
	}
	assert_true(q.fp4_group == 16 && !q.fp4_modelopt);
	const char *none = "{\"torch_dtype\":\"float16\"}";
	assert_int_equal(tpc_quant_cfg_from_buffer(&q, none, strlen(none), "c.json", false, &e), 0);
	assert_int_equal(q.method, TPC_QM_NONE);
	assert_int_equal(q.torch_dtype, TPC_F16);
	static const char *const bad[] = {
		"{\"quantization_config\":{\"quant_method\":\"bitsandbytes\"}}",
		"{\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":3,\"group_size\":128}}",
		"{\"quantization_config\":{\"quant_method\":\"gptq\",\"group_size\":128}}",
		"{\"quantization_config\":{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":128,\"version\":\"gemv\"}}",
		"{\"quantization_config\":{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":128,\"zero_point\":false}}",
		"{\"quantization_config\":{\"quant_method\":\"fp8\",\"weight_block_size\":[128]}}",
		"{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\"}}",
		"{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\",\"config_groups\":{\"g\":{\"weights\":{\"type\":\"int\",\"num_bits\":3,\"strategy\":\"channel\"}}}}}",
		"{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\",\"config_groups\":{\"g\":{\"weights\":{\"type\":\"float\",\"num_bits\":4,\"strategy\":\"channel\"}}}}}",
		"{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\",\"config_groups\":{\"g\":{\"weights\":{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":32}},\"h\":{\"weights\":{\"num_bits\":8,\"strategy\":\"channel\"}}}}}",
		"{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"nvfp4-pack-quantized\",\"config_groups\":{\"g\":{\"weights\":{\"type\":\"float\",\"num_bits\":8}}}}}",
		"{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"mxfp4-pack-quantized\",\"config_groups\":{\"g\":{\"weights\":{\"type\":\"float\",\"num_bits\":4,\"group_size\":16}}}}}",
		"{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":{\"g\":{\"weights\":{\"type\":\"float\",\"num_bits\":4}}}}}",
		"{\"quantization_config\":{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":{\"g\":{\"weights\":{\"type\":\"int\",\"num_bits\":8}}}}}",
		"{\"quantization_config\":{}}",
		"{\"quantization_config\":[1]}",
		"[1, 2]",
		"{\"quantization_config\":",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tpc_err_init(&e);
		assert_int_equal(tpc_quant_cfg_from_buffer(&q, bad[i], strlen(bad[i]), "c.json", false, &e), TPC_EINPUT);
		assert_string_equal(e.path, "c.json");
		assert_int_equal(q.method, TPC_QM_NONE);
	}
}

/* Dequantized tensors read in pieces (crossing the row steps, unaligned to
 * rows) against scalar references written from the layouts' definitions. */
static void test_dequant_read(void **st)
{
	(void)st;
	tpc_ckpt ck;
	tpc_err e;
	int s;
	/* FP8 [1100, 1000] with 128x128 blocks: 1.1 M elements, more than one row step */
	const int64_t O = 1100, I = 1000, SO = 9, SI = 8;
	uint64_t wbytes = (uint64_t)(O * I), sbytes = (uint64_t)(SO * SI) * 4;
	uint8_t *mem = malloc(wbytes + sbytes);
	float sc[9 * 8];
	for (uint64_t k = 0; k < wbytes; k++)
		mem[k] = (uint8_t)((k * 2654435761u) >> 13);
	for (int k = 0; k < SO * SI; k++)
		sc[k] = 0.001f * (float)(k + 1) + 1e-7f * (float)k;
	memcpy(mem + wbytes, sc, sizeof(sc));
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_mem(&ck, "mem", mem, wbytes + sbytes, &s, &e), 0);
	int64_t wshape[2] = {O, I}, sshape[2] = {SO, SI};
	assert_true(tpc_ckpt_add_tensor(&ck, "l.weight", TPC_F8_E4M3, 2, wshape, NULL, s, 0, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(&ck, "l.weight_scale_inv", TPC_F32, 2, sshape, NULL, s, wbytes, &e) >= 0);
	tpc_quant_cfg q;
	memset(&q, 0, sizeof(q));
	q.method = TPC_QM_FP8;
	q.block[0] = q.block[1] = 128;
	size_t n = 0;
	assert_int_equal(tpc_ckpt_dequantize(&ck, &q, TPC_BF16, &n, &e), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ck.n, 1);
	tpc_tensor *t = &ck.t[0];
	assert_string_equal(t->name, "l.weight");
	assert_true(t->dq && t->dtype == TPC_BF16 && t->src_dtype == TPC_F32 && t->nbytes == (uint64_t)(O * I) * 2);
	uint16_t *got = malloc((size_t)(O * I) * 2), *want = malloc((size_t)(O * I) * 2);
	for (int64_t o = 0; o < O; o++)
		for (int64_t i = 0; i < I; i++) {
			float w = tpc_f8e4m3_to_f32(mem[o * I + i]) * sc[(o / 128) * SI + i / 128];
			want[o * I + i] = tpc_f32_to_bf16(w);
		}
	assert_int_equal(tpc_ckpt_read_out(&ck, t, 0, t->nbytes, got, &e), 0);
	assert_memory_equal(got, want, t->nbytes);
	memset(got, 0, t->nbytes);
	assert_int_equal(tpc_ckpt_read_out(&ck, t, 2 * 4321, 2 * 1093457, got, &e), 0); /* crosses a row step */
	assert_memory_equal(got, want + 4321, 2 * 1093457);
	assert_int_equal(tpc_ckpt_read_out(&ck, t, 2 * 677777, 2 * 345679, got, &e), 0);
	assert_memory_equal(got, want + 677777, 2 * 345679);
	tpc_tensor cp;
	assert_int_equal(tpc_tensor_copy(&cp, t), 0); /* deep copy of the companions */
	memset(got, 0, 64);
	assert_int_equal(tpc_ckpt_read_out(&ck, &cp, 2 * 999, 64, got, &e), 0);
	assert_memory_equal(got, want + 999, 64);
	tpc_tensor_release(&cp);
	assert_int_equal(tpc_ckpt_validate(&ck, &e), 0);
	tpc_ckpt_release(&ck);

	/* GPTQ 4-bit, I 64, O 24, group 16, act-order g_idx, v1 zeros; f32 output */
	enum { GI = 64, GO = 24, GG = 4 };
	uint32_t qw[GI / 8 * GO], qz[GG * GO / 8];
	uint16_t scl[GG * GO];
	int32_t gidx[GI];
	int qv[GI][GO], zv[GG][GO];
	memset(qw, 0, sizeof(qw));
	memset(qz, 0, sizeof(qz));
	for (int i = 0; i < GI; i++) {
		gidx[i] = (i * 7) % GG;
		for (int o = 0; o < GO; o++) {
			qv[i][o] = (i * 3 + o * 5) & 15;
			qw[(i / 8) * GO + o] |= (uint32_t)qv[i][o] << (4 * (i % 8));
		}
	}
	for (int g = 0; g < GG; g++)
		for (int o = 0; o < GO; o++) {
			zv[g][o] = (g + o) & 15;
			qz[g * (GO / 8) + o / 8] |= (uint32_t)((zv[g][o] - 1) & 15) << (4 * (o % 8)); /* stored zero - 1 */
			scl[g * GO + o] = tpc_f32_to_f16(0.01f * (float)(g * GO + o + 1));
		}
	size_t b1 = sizeof(qw), b2 = b1 + sizeof(qz), b3 = b2 + sizeof(scl), tot = b3 + sizeof(gidx);
	uint8_t *gm = malloc(tot);
	memcpy(gm, qw, sizeof(qw));
	memcpy(gm + b1, qz, sizeof(qz));
	memcpy(gm + b2, scl, sizeof(scl));
	memcpy(gm + b3, gidx, sizeof(gidx));
	tpc_ckpt_init(&ck);
	assert_int_equal(tpc_ckpt_add_mem(&ck, "gptq", gm, tot, &s, &e), 0);
	int64_t s1[2] = {GI / 8, GO}, s2[2] = {GG, GO / 8}, s3[2] = {GG, GO}, s4[1] = {GI};
	assert_true(tpc_ckpt_add_tensor(&ck, "m.qweight", TPC_I32, 2, s1, NULL, s, 0, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(&ck, "m.qzeros", TPC_I32, 2, s2, NULL, s, b1, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(&ck, "m.scales", TPC_F16, 2, s3, NULL, s, b2, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(&ck, "m.g_idx", TPC_I32, 1, s4, NULL, s, b3, &e) >= 0);
	memset(&q, 0, sizeof(q));
	q.method = TPC_QM_GPTQ;
	q.bits = 4;
	q.group_size = 16;
	q.zero_plus_one = true;
	assert_int_equal(tpc_ckpt_dequantize(&ck, &q, TPC_F32, &n, &e), 0);
	assert_int_equal(ck.n, 1);
	t = &ck.t[0];
	assert_string_equal(t->name, "m.weight");
	assert_true(t->shape[0] == GO && t->shape[1] == GI);
	float fw[GO * GI], fg[GO * GI];
	for (int o = 0; o < GO; o++)
		for (int i = 0; i < GI; i++) {
			int g = gidx[i];
			fw[o * GI + i] = (float)(qv[i][o] - zv[g][o]) * tpc_f16_to_f32(scl[g * GO + o]);
		}
	assert_int_equal(tpc_ckpt_read_out(&ck, t, 0, t->nbytes, fg, &e), 0);
	assert_memory_equal(fg, fw, sizeof(fw));
	assert_int_equal(tpc_ckpt_read_out(&ck, t, 4 * 37, 4 * 100, fg, &e), 0);
	assert_memory_equal(fg, fw + 37, 4 * 100);
	tpc_ckpt_release(&ck);
	free(got);
	free(want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f16_exhaustive), cmocka_unit_test(test_bf16_exhaustive),
		cmocka_unit_test(test_f32_narrowing),  cmocka_unit_test(test_f64),
		cmocka_unit_test(test_kernels),        cmocka_unit_test(test_ckpt_cast),
		cmocka_unit_test(test_e4m3_all),       cmocka_unit_test(test_quant_cfg),
		cmocka_unit_test(test_dequant_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
