/* test_verify_kernels.c - the reference forward's parts one at a time on
 * hand-made weights: attention sinks, Llama 4's chunks, temperature and L2
 * q/k norm, the llama3 and yarn rope frequencies, gpt-oss's clamped GLU and
 * Phi-3.5-MoE's sparsemixer router, each against its formula or
 * transformers' numbers. */
#include <math.h>

#include "verify_test.h"

/* An F32 tensor of ck holding a copy of v (ck owns it) */
static const tpc_tensor *mem_tensor(tpc_ckpt *ck, const char *name, const float *v0, int ndim, const int64_t *shp)
{
	tpc_err e;
	int src;
	size_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= (size_t)shp[i];
	float *v = malloc(n * 4);
	memcpy(v, v0, n * 4);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_mem(ck, name, (uint8_t *)v, n * 4, &src, &e), 0);
	int64_t ix = tpc_ckpt_add_tensor(ck, name, TPC_F32, ndim, shp, NULL, src, 0, &e);
	assert_true(ix >= 0);
	return &ck->t[ix];
}

/* Attention sinks (tpc_vattn.sinks): one head of 2 dims, q = k = v = x and
 * o the identity, no rope; token t's context is sum_s e^(a_ts) x_s / (sum_s
 * e^(a_ts) + e^sink), a_ts = x_t.x_s / sqrt 2 - the sink's column in the
 * softmax, dropped after it (transformers' gpt-oss eager_attention_forward) */
static void test_attn_sinks(void **st)
{
	(void)st;
	static const float eye[4] = {1, 0, 0, 1}, sink[1] = {0.7f};
	tpc_ckpt ck;
	tpc_err e;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	int64_t s2[2] = {2, 2}, s1[1] = {1};
	const tpc_tensor *w = mem_tensor(&ck, "eye", eye, 2, s2), *sk = mem_tensor(&ck, "sinks", sink, 1, s1);
	vattn_loc a;
	memset(&a, 0, sizeof(a));
	a.q.w.ck = a.k.w.ck = a.v.w.ck = a.o.w.ck = a.sinks.ck = &ck;
	a.q.w.t = a.k.w.t = a.v.w.t = a.o.w.t = w;
	a.sinks.t = sk;
	a.nq = a.nkv = a.heads = a.kv_heads = 1;
	a.hd = 2;
	double x[4] = {0.3, -1.2, 0.8, 0.5}, y[4];
	vctx vx;
	memset(&vx, 0, sizeof(vx));
	vx.e = &e;
	assert_int_equal(tpc__attn_d(&vx, &a, 2, 2, x, y), 0);
	for (int t = 0; t < 2; t++) {
		double den = exp((double)sink[0]), num[2] = {0, 0};
		for (int s = 0; s <= t; s++) {
			double z = exp((x[2 * t] * x[2 * s] + x[2 * t + 1] * x[2 * s + 1]) / sqrt(2.0));
			den += z;
			num[0] += z * x[2 * s];
			num[1] += z * x[2 * s + 1];
		}
		assert_true(fabs(y[2 * t] - num[0] / den) < 1e-12 && fabs(y[2 * t + 1] - num[1] / den) < 1e-12);
	}
	/* without the sink: a plain softmax (token 0 sees itself alone) */
	a.sinks.t = NULL;
	assert_int_equal(tpc__attn_d(&vx, &a, 2, 2, x, y), 0);
	assert_true(fabs(y[0] - x[0]) < 1e-12 && fabs(y[1] - x[1]) < 1e-12);
	tpc__vctx_release(&vx);
	tpc_ckpt_release(&ck);
}

/* softmax(q k^T / sqrt(2)) v over keys s0 .. t of a 2-dim head, q, k, v
 * the rows of x [T, 2] (identity projections), q of token t times qs */
static void attend_ref(const double *q, const double *k, const double *x, int t, int s0, double *y)
{
	double den = 0, num[2] = {0, 0};
	for (int s = s0; s <= t; s++) {
		double z = exp((q[2 * t] * k[2 * s] + q[2 * t + 1] * k[2 * s + 1]) / sqrt(2.0));
		den += z;
		num[0] += z * x[2 * s];
		num[1] += z * x[2 * s + 1];
	}
	y[0] = num[0] / den;
	y[1] = num[1] / den;
}

/* Llama 4's attention parts on a 2-dim head with identity projections:
 * chunks of 2 tokens (token 2 sees itself alone, token 3 tokens 2 and 3);
 * the temperature tuning (floor 2, scale 0.5: token t's query times 1 + 0.5
 * log(1 + floor((t + 1) / 2))); the weightless L2 norm of q and k after a
 * rope on the pair (theta 10000: token t turned by t radians) */
static void test_llama4_attn_parts(void **st)
{
	(void)st;
	static const float eye[4] = {1, 0, 0, 1};
	tpc_ckpt ck;
	tpc_err e;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	int64_t s2[2] = {2, 2};
	const tpc_tensor *w = mem_tensor(&ck, "eye", eye, 2, s2);
	vattn_loc a;
	memset(&a, 0, sizeof(a));
	a.q.w.ck = a.k.w.ck = a.v.w.ck = a.o.w.ck = &ck;
	a.q.w.t = a.k.w.t = a.v.w.t = a.o.w.t = w;
	a.nq = a.nkv = a.heads = a.kv_heads = 1;
	a.hd = 2;
	double x[8] = {0.3, -1.2, 0.8, 0.5, -0.4, 0.9, 1.1, 0.2}, y[8], r[2], q[8], k[8];
	vctx vx;
	memset(&vx, 0, sizeof(vx));
	vx.e = &e;
	a.chunk = 2;
	assert_int_equal(tpc__attn_d(&vx, &a, 4, 2, x, y), 0);
	assert_true(fabs(y[4] - x[4]) < 1e-12 && fabs(y[5] - x[5]) < 1e-12);
	for (int t = 0; t < 4; t++) {
		attend_ref(x, x, x, t, t - t % 2, r);
		assert_true(fabs(y[2 * t] - r[0]) < 1e-12 && fabs(y[2 * t + 1] - r[1]) < 1e-12);
	}
	a.chunk = 0;
	a.temp_floor = 2;
	a.temp_scale = 0.5;
	assert_int_equal(tpc__attn_d(&vx, &a, 4, 2, x, y), 0);
	for (int t = 0; t < 8; t++)
		q[t] = x[t] * (1 + 0.5 * log1p(floor((t / 2 + 1) / 2.0)));
	for (int t = 0; t < 4; t++) {
		attend_ref(q, x, x, t, 0, r);
		assert_true(fabs(y[2 * t] - r[0]) < 1e-12 && fabs(y[2 * t + 1] - r[1]) < 1e-12);
	}
	a.temp_floor = 0;
	a.rope = a.pairs = a.qk_l2 = true;
	a.theta = 10000;
	a.qk_eps = 1e-5;
	assert_int_equal(tpc__attn_d(&vx, &a, 4, 2, x, y), 0);
	for (int t = 0; t < 4; t++) {
		double c = cos(t), s = sin(t), u = x[2 * t] * c - x[2 * t + 1] * s, v = x[2 * t + 1] * c + x[2 * t] * s;
		double n = 1 / sqrt((u * u + v * v) / 2 + 1e-5);
		q[2 * t] = k[2 * t] = u * n;
		q[2 * t + 1] = k[2 * t + 1] = v * n;
	}
	for (int t = 0; t < 4; t++) {
		attend_ref(q, k, x, t, 0, r);
		assert_true(fabs(y[2 * t] - r[0]) < 1e-12 && fabs(y[2 * t + 1] - r[1]) < 1e-12);
	}
	tpc__vctx_release(&vx);
	tpc_ckpt_release(&ck);
}

/* A llama3 rope's frequencies as transformers' _compute_llama3_parameters
 * gives them for head_dim 8, theta 500000, factor 8, low and high freq
 * factors 1 and 4 over 256 positions (its float32 numbers): the first kept,
 * the second in the middle band, the last two divided by 8; equal factors
 * (Llama 4 Scout's 1 and 1) have no middle band */
static void test_rope_llama3(void **st)
{
	(void)st;
	double inv[4];
	for (int i = 0; i < 4; i++)
		inv[i] = 1.0 / pow(500000.0, 2.0 * i / 8);
	double want[4] = {inv[0], 0, inv[2] / 8, inv[3] / 8};
	double s = (256 / (2 * M_PI / inv[1]) - 1) / 3;
	want[1] = (1 - s) * inv[1] / 8 + s * inv[1];
	tpc_rope_llama3 l = {8, 1, 4, 256};
	tpc__rope_llama3(&l, 4, inv);
	for (int i = 0; i < 4; i++)
		assert_true(fabs(inv[i] - want[i]) <= 1e-15 * want[i]);
	assert_true(s > 0 && s < 1);
	double eq[2] = {1.0, 1.0 / 1000};
	tpc_rope_llama3 l1 = {16, 1, 1, 256};
	tpc__rope_llama3(&l1, 2, eq);
	assert_true(eq[0] == 1.0 && eq[1] == 1.0 / 1000 / 16);
}

/* The MLP of gpt-oss's experts (tpc_vmlp.interleaved, .clamp): a fused
 * gate_up [4, 1] whose rows alternate gate and up (g0, u0, g1, u1), then
 * (clamp(up, -7, 7) + 1) * min(gate, 7) * sigmoid(1.702 min(gate, 7)), down
 * [1, 2] summing both; x = 10 clamps gate 0 and up 0, not pair 1 */
static void test_clamped_glu(void **st)
{
	(void)st;
	static const float gu[4] = {1, -1, 0.3f, 0.2f}, dn[2] = {1, 1};
	tpc_ckpt ck;
	tpc_err e;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	int64_t s41[2] = {4, 1}, s12[2] = {1, 2};
	vmlp_loc m;
	memset(&m, 0, sizeof(m));
	m.gate_up.w.ck = m.down.w.ck = &ck;
	m.gate_up.w.t = mem_tensor(&ck, "gate_up", gu, 2, s41);
	m.down.w.t = mem_tensor(&ck, "down", dn, 2, s12);
	m.fused = m.glu = m.interleaved = true;
	m.inner = 2;
	m.clamp = 7;
	m.alpha = 1.702;
	double x[2] = {10, -2}, y[2];
	vctx vx;
	memset(&vx, 0, sizeof(vx));
	vx.e = &e;
	assert_int_equal(tpc__mlp_d(&vx, &m, 2, 1, x, y), 0);
	for (int t = 0; t < 2; t++) {
		double want = 0;
		for (int i = 0; i < 2; i++) {
			double g = (double)gu[2 * i] * x[t], u = (double)gu[2 * i + 1] * x[t];
			g = g < 7 ? g : 7;
			u = u < -7 ? -7 : u > 7 ? 7 : u;
			want += (u + 1) * g / (1 + exp(-1.702 * g));
		}
		assert_true(fabs(y[t] - want) < 1e-12);
	}
	tpc__vctx_release(&vx);
	tpc_ckpt_release(&ck);
}

/* The rotary frequencies MLA and GQA share (tpc__rope_freqs): plain
 * theta^(-2i/rot), and gpt-oss's default yarn (factor 32, betas 32 and 1,
 * 4096 original positions, theta 150000, not truncated) on an 8-dim head
 * as transformers' _compute_yarn_parameters gives them (float32) with its
 * attention factor 0.1 ln 32 + 1 */
static void test_rope_freqs(void **st)
{
	(void)st;
	double inv[4], af;
	tpc__rope_freqs(NULL, 10000, 8, inv, &af);
	assert_true(af == 1 && inv[0] == 1 && fabs(inv[2] - 1.0 / pow(10000, 0.5)) < 1e-15);
	tpc_yarn y = {.factor = 32, .beta_fast = 32, .beta_slow = 1, .orig_max = 4096, .truncate = 0};
	tpc__rope_freqs(&y, 150000, 8, inv, &af);
	static const double hf[4] = {1.0, 0.05081327259540558, 0.0004564839182421565, 4.099978468730114e-06};
	for (int i = 0; i < 4; i++)
		assert_true(fabs(inv[i] - hf[i]) <= 1e-6 * hf[i]);
	assert_true(fabs(af - 1.3465735902799727) < 1e-12);
}

/* The sparsemixer (Phi-3.5-MoE's router in eval mode) against transformers
 * 5.12's sparsemixer(scores, eps, training=False) in float64: the experts
 * and weights of four score rows (a 0 / 0 distance kept, as torch's >
 * keeps NaN), and the weights of experts the router did not choose */
static void test_sparsemixer(void **st)
{
	(void)st;
	static const struct {
		double s[4], eps;
		int64_t n, sel[2];
		double w[2];
	} c[] = {
		{{1.0, 2.0, 1.9, -0.5}, 0.05, 4, {1, 2}, {0.524979187479, 1.0}},
		{{1.0, 2.0, 1.9, -0.5}, 0.3, 4, {1, 2}, {0.440002016067, 0.710949502625}},
		{{0.0, 0.0, -1.0}, 0.01, 3, {0, 1}, {0.5, 1.0}},
		{{-1.0, -3.0, -1.05}, 0.05, 3, {0, 2}, {0.512497396484, 1.0}},
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int64_t sel[2];
		double w[2];
		tpc__sparsemixer(c[i].s, c[i].n, c[i].eps, NULL, sel, w);
		assert_true(sel[0] == c[i].sel[0] && sel[1] == c[i].sel[1]);
		assert_true(fabs(w[0] - c[i].w[0]) < 1e-11 && fabs(w[1] - c[i].w[1]) < 1e-11);
	}
	/* experts 2 then 0 forced on the second row: 2's share of the first
	 * softmax (0, 1, 2 kept), then 0's beside 1 with 2 out */
	const int64_t use[2] = {2, 0};
	int64_t sel[2];
	double w[2];
	tpc__sparsemixer(c[1].s, 4, 0.3, use, sel, w);
	assert_true(sel[0] == 1 && sel[1] == 2);
	assert_true(fabs(w[0] - exp(-0.1) / (1 + exp(-1.0) + exp(-0.1))) < 1e-12);
	assert_true(fabs(w[1] - exp(-1.0) / (1 + exp(-1.0))) < 1e-12);
}

int main(void)
{
	tpc_formats_register_all();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rope_freqs),
		cmocka_unit_test(test_attn_sinks),
		cmocka_unit_test(test_clamped_glu),
		cmocka_unit_test(test_llama4_attn_parts),
		cmocka_unit_test(test_rope_llama3),
		cmocka_unit_test(test_sparsemixer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
