/* test_verify.c - unit tests of verify/: seeded inputs, the threads
 * collectives, the streamed matmul, the checks on a hand-split tiny LLaMA
 * (correct and broken), the description's validation, the reports, and the
 * GPU module's host logic (no GPU needed). */
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>

#include "test_util.h"

#include "formats.h"
#include "gpu/tpc_gpu.h"
#include "tpc_format.h"
#include "tpc_util.h"
#include "tpc_verify.h"
#include "vint.h"

static void test_uniform(void **st)
{
	(void)st;
	uint64_t s1 = tpc_verify_stream("a.weight", 1), s2 = tpc_verify_stream("a.weight", 2);
	assert_true(s1 != s2);
	int differ = 0;
	for (uint64_t i = 0; i < 10000; i++) {
		double u = tpc_verify_uniform(42, s1, i);
		assert_true(u >= -1.0 && u < 1.0);
		assert_true((double)(float)u == u); /* exact in fp32 */
		assert_true(u == tpc_verify_uniform(42, s1, i));
		differ += u != tpc_verify_uniform(42, s2, i);
		differ += u != tpc_verify_uniform(43, s1, i);
	}
	assert_true(differ > 19900);
}

/* ---- threads collectives ---- */

typedef struct targ {
	tpc_coll_group *g;
	int rank, ret, abort_rank;
	float red[5];
	int32_t gathered[4];
	uint8_t b[3];
	tpc_err e;
} targ;

static void *coll_main(void *p)
{
	targ *a = p;
	tpc_coll c;
	tpc_coll_threads_rank(a->g, a->rank, &c);
	tpc_err_init(&a->e);
	int32_t mine = 100 + a->rank;
	if ((a->ret = tpc_coll_allgather(&c, &mine, sizeof(mine), a->gathered, &a->e)))
		return NULL;
	for (int i = 0; i < 5; i++)
		a->red[i] = 0.1f * (float)(a->rank + 1) + (float)i * 1e-8f;
	if ((a->ret = tpc_coll_allreduce(&c, a->red, 5, TPC_F32, &a->e)))
		return NULL;
	if (a->rank == 2)
		memcpy(a->b, "xyz", 3);
	if ((a->ret = tpc_coll_bcast(&c, a->b, 3, 2, &a->e)))
		return NULL;
	if (a->rank == a->abort_rank) {
		tpc_coll_abort(&c);
		a->ret = TPC_EIO;
		return NULL;
	}
	a->ret = tpc_coll_barrier(&c, &a->e); /* the others wait here until the abort */
	return NULL;
}

static void test_coll_threads(void **st)
{
	(void)st;
	tpc_coll_group *g;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_coll_group_new(&g, 4, &e), 0);
	targ a[4];
	pthread_t th[4];
	for (int r = 0; r < 4; r++) {
		memset(&a[r], 0, sizeof(a[r]));
		a[r].g = g;
		a[r].rank = r;
		a[r].abort_rank = 3;
		assert_int_equal(pthread_create(&th[r], NULL, coll_main, &a[r]), 0);
	}
	for (int r = 0; r < 4; r++)
		pthread_join(th[r], NULL);
	/* the reference rank-order sum, bit for bit */
	float src[4][5], want[5];
	for (int r = 0; r < 4; r++)
		for (int i = 0; i < 5; i++)
			src[r][i] = 0.1f * (float)(r + 1) + (float)i * 1e-8f;
	tpc_coll_sum_ranks(want, src, 4, 5, TPC_F32);
	for (int r = 0; r < 4; r++) {
		for (int k = 0; k < 4; k++)
			assert_int_equal(a[r].gathered[k], 100 + k);
		assert_memory_equal(a[r].red, want, sizeof(want));
		assert_memory_equal(a[r].b, "xyz", 3);
	}
	assert_int_equal(a[3].ret, TPC_EIO);
	for (int r = 0; r < 3; r++) {
		assert_int_equal(a[r].ret, TPC_EGPU);
		assert_int_equal(a[r].e.sys, TPC_COLL_ABORTED);
	}
	tpc_coll_group_free(g);
}

/* ---- streamed matmul ---- */

static void test_matmul_stream(void **st)
{
	(void)st;
	/* [rows, cols] F32 larger than one 8 MiB chunk, in owned memory */
	int64_t rows = 2300, cols = 1000, T = 3;
	size_t n = (size_t)(rows * cols);
	float *w = malloc(n * 4);
	for (size_t i = 0; i < n; i++)
		w[i] = (float)tpc_verify_uniform(3, 1, i);
	tpc_ckpt ck;
	tpc_err e;
	int src;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_mem(&ck, "w", (uint8_t *)w, n * 4, &src, &e), 0);
	int64_t shp[2] = {rows, cols};
	int64_t ix = tpc_ckpt_add_tensor(&ck, "w", TPC_F32, 2, shp, NULL, src, 0, &e);
	assert_true(ix >= 0);
	float x[3 * 2300], y[3 * 2300];
	for (int64_t i = 0; i < T * rows; i++)
		x[i] = (float)tpc_verify_uniform(4, 1, (uint64_t)i);
	vctx vx;
	memset(&vx, 0, sizeof(vx));
	vx.e = &e;
	vloc L;
	memset(&L, 0, sizeof(L));
	L.ck = &ck;
	L.t = &ck.t[ix];
	/* plain [out, in]: y[T, rows] = x[T, cols] W^T */
	assert_int_equal(tpc__matmul_f(&vx, &L, T, x, cols, y, rows), 0);
	for (int64_t t = 0; t < T; t++)
		for (int64_t j = 0; j < rows; j += 97) {
			double s = 0;
			for (int64_t i = 0; i < cols; i++)
				s += (double)x[t * cols + i] * w[j * cols + i];
			assert_true(fabs(s - y[t * rows + j]) < 1e-4);
		}
	/* transposed [in, out]: y[T, cols] = x[T, rows] W */
	L.transposed = true;
	assert_int_equal(tpc__matmul_f(&vx, &L, T, x, rows, y, cols), 0);
	for (int64_t t = 0; t < T; t++)
		for (int64_t j = 0; j < cols; j += 41) {
			double s = 0;
			for (int64_t i = 0; i < rows; i++)
				s += (double)x[t * rows + i] * w[i * cols + j];
			assert_true(fabs(s - y[t * cols + j]) < 1e-4);
		}
	tpc__vctx_release(&vx);
	tpc_ckpt_release(&ck);
}

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

/* ---- the checks on tests/data/tiny_llama.safetensors at tp 2 ---- */

typedef struct tiny {
	tpc_ckpt ck;
	tpc_verify_set s;
} tiny;

/* Split by name the way the llama preset does (no shard/ here): q/k/v,
 * gate/up col; o, down row; embed/lm_head vocab; the rest replicated. Rank
 * views are added to the checkpoint itself as "rN/<name>". `swap` swaps
 * ranks 0 and 1 of the tensors whose name contains it. */
static void tiny_build(tiny *tn, int tp, const char *swap)
{
	char path[4096];
	tpc_err e;
	tpc_err_init(&e);
	snprintf(path, sizeof(path), "%s/tests/data/tiny_llama.safetensors", getenv("TPC_SRC") ? getenv("TPC_SRC") : "../../..");
	tpc_ckpt_init(&tn->ck);
	assert_int_equal(tpc_ckpt_open(&tn->ck, path, NULL, &e), 0);
	size_t n0 = tn->ck.n;
	int *dims = calloc(n0, sizeof(int));
	int64_t *first = calloc(n0, sizeof(int64_t));
	for (size_t i = 0; i < n0; i++) {
		const char *nm = tn->ck.t[i].name;
		int ndim = tn->ck.t[i].ndim;
		dims[i] = -1;
		if (strstr(nm, "q_proj") || strstr(nm, "k_proj") || strstr(nm, "v_proj") || strstr(nm, "gate_proj") ||
		    strstr(nm, "up_proj") || strstr(nm, "embed_tokens") || strstr(nm, "lm_head"))
			dims[i] = 0;
		else if ((strstr(nm, "o_proj") || strstr(nm, "down_proj")) && ndim == 2)
			dims[i] = 1;
		first[i] = (int64_t)tn->ck.n;
		for (int t = 0; t < tp; t++) {
			tpc_tensor v;
			char rn[600];
			snprintf(rn, sizeof(rn), "r%d/%s", t, nm);
			if (dims[i] < 0) {
				assert_int_equal(tpc_tensor_copy(&v, &tn->ck.t[i]), 0);
			} else {
				int64_t len = tn->ck.t[i].shape[dims[i]] / tp;
				assert_int_equal(tpc_tensor_narrow(&v, &tn->ck.t[i], dims[i], t * len, len), 0);
			}
			assert_true(tpc_ckpt_add_copy(&tn->ck, rn, &v, &e) >= 0);
			tpc_tensor_release(&v);
		}
	}
	tpc_verify_set_init(&tn->s, tp);
	for (size_t i = 0; i < n0; i++) {
		const char *nm = tn->ck.t[i].name;
		tpc_vsplit sp = dims[i] < 0 ? TPC_VSPLIT_REPLICATE
			      : strstr(nm, "embed") || strstr(nm, "lm_head") ? TPC_VSPLIT_VOCAB
			      : dims[i] == 0 ? TPC_VSPLIT_COL : TPC_VSPLIT_ROW;
		int64_t ix = tpc_verify_set_add(&tn->s, nm, &tn->ck, &tn->ck.t[i], sp, dims[i], false, false, 0, NULL, &e);
		assert_true(ix >= 0);
		for (int t = 0; t < tp; t++) {
			int src = t;
			if (swap && strstr(nm, swap) && t < 2)
				src = 1 - t;
			tpc_verify_set_rank(&tn->s, ix, t, &tn->ck, &tn->ck.t[first[i] + src]);
		}
	}
	tpc_verify_link_biases(&tn->s);
	tpc_model_facts f = {.heads = 4, .kv_heads = 2, .head_dim = 16, .hidden = 64, .vocab = 128, .layers = 2};
	assert_int_equal(tpc_verify_model_from_names(&tn->s, tpc_family_find("llama"), &f, &e), 0);
	assert_int_equal(tn->s.model->nlayers, 2);
	free(dims);
	free(first);
}

static void tiny_release(tiny *tn)
{
	tpc_verify_set_release(&tn->s);
	tpc_ckpt_release(&tn->ck);
}

static void test_tiny_llama_pass(void **st)
{
	(void)st;
	tiny tn;
	tiny_build(&tn, 2, NULL);
	tpc_verify_opts o;
	tpc_verify_opts_init(&o);
	o.seed = 5;
	tpc_verify_report rep;
	tpc_verify_report_init(&rep);
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_verify_execute(&tn.s, &o, &rep, &e), 0);
	assert_int_equal(rep.nfail, 0);
	/* structure for every tensor, a layer check per split weight (two for
	 * each vocab tensor), 2 x (attn + mlp), model */
	bool seen[TPC_VC_COUNT] = {false};
	for (size_t i = 0; i < rep.n; i++)
		seen[rep.r[i].kind] = true;
	for (int k = 0; k < TPC_VC_COUNT; k++)
		assert_true(seen[k]);
	const tpc_vresult *m = &rep.r[rep.n - 1];
	assert_int_equal(m->kind, TPC_VC_MODEL);
	assert_int_equal(m->top1_agree, m->top1_total);
	assert_true(m->max_rel < 1e-4);
	/* JSON parses and says ok; JUnit has one testcase per check */
	tpc_buf b = TPC_BUF_INIT;
	tpc_verify_report_json(&rep, &b);
	cJSON *j = cJSON_Parse(b.p);
	assert_non_null(j);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")));
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "checks")), (int)rep.n);
	cJSON_Delete(j);
	tpc_buf_reset(&b);
	tpc_verify_report_junit(&rep, &b);
	size_t cases = 0;
	for (const char *p = b.p; (p = strstr(p, "<testcase ")); p++)
		cases++;
	assert_int_equal(cases, rep.n);
	tpc_buf_release(&b);
	tpc_verify_report_release(&rep);
	tiny_release(&tn);
}

static void test_tiny_llama_swapped(void **st)
{
	(void)st;
	tiny tn;
	tiny_build(&tn, 2, "layers.1.self_attn.q_proj");
	tpc_verify_opts o;
	tpc_verify_opts_init(&o);
	tpc_verify_report rep;
	tpc_verify_report_init(&rep);
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_verify_execute(&tn.s, &o, &rep, &e), TPC_EMISMATCH);
	/* structure, col, the layer's attention and the model fail; nothing else */
	size_t named = 0;
	for (size_t i = 0; i < rep.n; i++) {
		const tpc_vresult *r = &rep.r[i];
		if (r->status != TPC_VR_FAIL)
			continue;
		assert_true(strstr(r->name, "layers.1") || r->kind == TPC_VC_MODEL);
		named += strstr(r->name, "layers.1.self_attn.q_proj.weight") != NULL;
		assert_true(r->ndiff > 0 && r->mismatches > 0);
	}
	assert_int_equal(named, 2);
	assert_int_equal(rep.nfail, 4);
	tpc_buf b = TPC_BUF_INIT;
	tpc_verify_report_table(&rep, true, &b);
	assert_non_null(strstr(b.p, "FAIL"));
	assert_non_null(strstr(b.p, "#   rank 0 index"));
	tpc_buf_release(&b);
	tpc_verify_report_release(&rep);
	tiny_release(&tn);
}

/* A set with data-parallel replicas (tpc_verify_set.dp): a stage of tp' x dp
 * ranks; a dense tensor is split over dp group 0's tp' ranks, the others hold
 * group 0's slices (rank t's is rank t % tp''s); an expert is one EP rank's. */
static void test_dp_geometry(void **st)
{
	(void)st;
	tiny tn;
	tiny_build(&tn, 4, NULL);
	tpc_err e;
	tpc_err_init(&e);
	int64_t q = tpc_verify_set_find(&tn.s, "model.layers.0.self_attn.q_proj.weight");
	assert_true(q >= 0);
	tpc_vtensor *v = &tn.s.t[q];
	tn.s.dp = 2;
	v->dp = 2;
	assert_int_equal(tpc_vtensor_tp(v, 4), 2);
	assert_int_equal(tpc_vtensor_root(v, 4), 0);
	assert_true(tpc_vtensor_holds(v, 4, 0) && tpc_vtensor_holds(v, 4, 1));
	assert_false(tpc_vtensor_holds(v, 4, 2) || tpc_vtensor_holds(v, 4, 3));
	assert_int_equal(tpc_vpart_len(v, 0, 4), v->part[0].size / 2);
	assert_int_equal(tpc_vpart_start(v, 0, 4, 3), tpc_vpart_start(v, 0, 4, 1));
	assert_int_equal(tpc_vpart_start(v, 0, 4, 2), 0);
	/* an expert of EP rank 3 of 4 (ep = tp' x dp): rank 3's alone */
	tpc_vtensor x = *v;
	x.dp = 0;
	x.ep = 4;
	x.ep_group = 3;
	assert_int_equal(tpc_vtensor_tp(&x, 4), 1);
	assert_int_equal(tpc_vtensor_root(&x, 4), 3);
	assert_true(tpc_vtensor_holds(&x, 4, 3) && !tpc_vtensor_holds(&x, 4, 1));
	/* the set's rows split over 2 of its 4 ranks */
	v->part[0].replicas = 1;
	assert_int_equal(tpc_verify_set_validate(&tn.s, &e), 0);
	tn.s.dp = 1; /* a tensor's replicas the set does not have */
	assert_int_equal(tpc_verify_set_validate(&tn.s, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "data-parallel replicas in a set of dp 1"));
	tpc_err_init(&e);
	tn.s.dp = 3;
	assert_int_equal(tpc_verify_set_validate(&tn.s, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "3 data-parallel replicas do not divide the stage's 4 ranks"));
	tn.s.dp = 0;
	v->dp = 0;
	tiny_release(&tn);
}

static void test_validate(void **st)
{
	(void)st;
	tiny tn;
	tiny_build(&tn, 2, NULL);
	tpc_err e;
	tpc_err_init(&e);
	int64_t q = tpc_verify_set_find(&tn.s, "model.layers.0.self_attn.q_proj.weight");
	assert_true(q >= 0);
	tpc_vtensor keep = tn.s.t[q];
	tn.s.t[q].nparts = 2;
	tn.s.t[q].part[0] = (tpc_vpart){40, 0, 1};
	tn.s.t[q].part[1] = (tpc_vpart){40, 0, 1};
	assert_int_equal(tpc_verify_set_validate(&tn.s, &e), TPC_EINPUT); /* 80 != 64 rows */
	assert_non_null(strstr(e.msg, "add up"));
	tpc_err_init(&e);
	tn.s.t[q] = keep;
	tn.s.t[q].part[0].replicas = 3;
	assert_int_equal(tpc_verify_set_validate(&tn.s, &e), TPC_EINPUT); /* 3 does not divide tp 2 */
	tn.s.t[q] = keep;
	tpc_err_init(&e);
	tn.s.t[q].dim = 5;
	assert_int_equal(tpc_verify_set_validate(&tn.s, &e), TPC_EINPUT);
	tn.s.t[q] = keep;
	assert_int_equal(tpc_verify_set_validate(&tn.s, &e), 0);
	/* a shape the description does not predict is a failed check, not an error */
	int64_t k = tpc_verify_set_find(&tn.s, "model.layers.0.self_attn.k_proj.weight");
	tn.s.t[k].rank[1].t = tn.s.t[q].rank[1].t;
	tpc_verify_opts o;
	tpc_verify_opts_init(&o);
	o.checks = TPC_VCHECK_STRUCTURE | TPC_VCHECK_LAYERS;
	tpc_verify_report rep;
	tpc_verify_report_init(&rep);
	assert_int_equal(tpc_verify_execute(&tn.s, &o, &rep, &e), TPC_EMISMATCH);
	bool found = false;
	for (size_t i = 0; i < rep.n; i++)
		if (rep.r[i].status == TPC_VR_FAIL && strstr(rep.r[i].msg, "rank 1") && strstr(rep.r[i].msg, "shape"))
			found = true;
	assert_true(found);
	tpc_verify_report_release(&rep);
	tiny_release(&tn);
}

static void test_cuda_absent(void **st)
{
	(void)st;
	tiny tn;
	tiny_build(&tn, 2, NULL);
	tpc_verify_opts o;
	tpc_verify_opts_init(&o);
	o.device = TPC_VDEV_CUDA;
	tpc_verify_report rep;
	tpc_verify_report_init(&rep);
	tpc_err e;
	tpc_err_init(&e);
	/* no GPU on CI: the module is missing, or loads and finds no device */
	int r = tpc_verify_execute(&tn.s, &o, &rep, &e);
	if (r == 0) {
		print_message("# a CUDA device is visible: --device cuda ran\n");
	} else {
		assert_int_equal(r, TPC_EGPU);
		assert_int_equal(tpc_status_exit(r), 5);
		assert_non_null(strstr(e.msg, "CUDA"));
		print_message("# --device cuda: %s\n", e.msg);
	}
	tpc_verify_report_release(&rep);
	tiny_release(&tn);
}

static void test_gpu_host(void **st)
{
	(void)st;
	char msg[256];
	assert_int_equal(tpc_gpu_device_for(0, 4, 4, msg, sizeof(msg)), 0);
	assert_int_equal(tpc_gpu_device_for(3, 4, 8, msg, sizeof(msg)), 3);
	assert_int_equal(tpc_gpu_device_for(5, 8, 4, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "one rank per GPU"));
	assert_int_equal(tpc_gpu_device_for(0, 1, 0, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "no CUDA device"));
	tpc_gpu_plan p;
	assert_int_equal(tpc_gpu_buffer_plan(8, 2048, 5440, 8u << 20, 4, &p), 0);
	assert_int_equal(p.in_bytes, 8 * 2048 * 4);
	assert_int_equal(p.out_bytes, 8 * 5440 * 4);
	assert_int_equal(p.coll_bytes, 8 * 5440 * 4 * 4);
	assert_int_equal(p.total, p.in_bytes + p.out_bytes + p.w_bytes + p.coll_bytes);
	assert_int_equal(p.in_bytes % 256, 0);
	assert_int_equal(tpc_gpu_buffer_plan(8, INT64_MAX / 2, 1, 1, 1, &p), -1); /* overflow */
	assert_int_equal(tpc_gpu_buffer_plan(0, 1, 1, 1, 1, &p), -1);
	assert_int_equal(tpc_gpu_chunk_rows(2048, 8u << 20), 1024);
	assert_int_equal(tpc_gpu_chunk_rows(1 << 30, 8u << 20), 1);
	int status[4] = {0, TPC_EGPU, TPC_EIO, 0}, peer[4] = {0, 1, 0, 0};
	assert_int_equal(tpc_gpu_first_error(status, peer, 4), 2);
	assert_int_equal(tpc_gpu_first_error(status, NULL, 4), 1);
	int none[3] = {0, 0, 0};
	assert_int_equal(tpc_gpu_first_error(none, NULL, 3), -1);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
	int lr, ls;
	tpc_gpu_local_rank(getenv, &lr, &ls);
	assert_int_equal(lr, 2);
	assert_int_equal(ls, 4);
	unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
	unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}

/* ---- the model check's reference forward against real transformers ---- */

/* tests/data/FILE as *ck, its transformers outputs OUT as *ex, an empty tp-1 set. */
static void tiny_open(const char *file, const char *out, tpc_ckpt *ck, tpc_ckpt *ex, tpc_verify_set *s, tpc_err *e)
{
	char path[4096];
	const char *src = getenv("TPC_SRC") ? getenv("TPC_SRC") : "../../..";
	tpc_err_init(e);
	tpc_ckpt_init(ck);
	tpc_ckpt_init(ex);
	snprintf(path, sizeof(path), "%s/tests/data/%s", src, file);
	assert_int_equal(tpc_ckpt_open(ck, path, NULL, e), 0);
	snprintf(path, sizeof(path), "%s/tests/data/%s", src, out);
	assert_int_equal(tpc_ckpt_open(ex, path, NULL, e), 0);
	tpc_verify_set_init(s, 1);
}

/* The reference forward of set s on the T = 10 ids in ex's "ids" against
 * ex's outputs `key` [T, W] from transformers: within 1e-5 of their rms. */
/* max |tpconv - transformers| / rms of the logits (vs_transformers below) */
static double vs_worst(const tpc_verify_set *s, tpc_ckpt *ex, const char *key, int64_t W, const char *what);

static void vs_transformers(const tpc_verify_set *s, tpc_ckpt *ex, const char *key, int64_t W, const char *what)
{
	assert_true(vs_worst(s, ex, key, W, what) < 1e-5);
}

static double vs_worst(const tpc_verify_set *s, tpc_ckpt *ex, const char *key, int64_t W, const char *what)
{
	enum { T = 10 };
	tpc_err e;
	tpc_err_init(&e);
	int64_t ii = tpc_ckpt_find(ex, "ids"), li = tpc_ckpt_find(ex, key);
	assert_true(ii >= 0 && li >= 0 && W <= 64);
	int32_t ids[T];
	double want[T * 64], got[T * 64];
	uint8_t raw[8 * T];
	vctx x = {.e = &e};
	assert_int_equal(ex->t[ii].numel, T);
	assert_int_equal(ex->t[li].numel, T * W);
	assert_int_equal(tpc_ckpt_read_bytes(ex, &ex->t[ii], 0, sizeof(raw), raw, &e), 0); /* I64 */
	for (int t = 0; t < T; t++)
		ids[t] = (int32_t)tpc_rd64le(raw + 8 * t);
	assert_int_equal(tpc__load_d(&x, ex, &ex->t[li], want), 0);
	int mr = tpc__model_reference(s, T, ids, got, &e);
	if (mr)
		print_message("# %s\n", e.msg);
	assert_int_equal(mr, 0);
	double ss = 0, worst = 0;
	for (int64_t i = 0; i < T * W; i++)
		ss += want[i] * want[i];
	double rms = sqrt(ss / (double)(T * W));
	for (int64_t i = 0; i < T * W; i++)
		worst = fmax(worst, fabs(got[i] - want[i]) / rms);
	print_message("# %s: max |tpconv - transformers| / rms %.3g (rms %.3g)\n", what, worst, rms);
	tpc__vctx_release(&x);
	return worst;
}

/* tests/data/tiny_deepseek_v3*: a DeepSeek-V3 (MLA, a dense first layer,
 * sigmoid group-limited MoE with a shared expert), and the logits
 * transformers 5's DeepseekV3ForCausalLM gives in float64 on fixed ids
 * (tests/data/make_tiny_deepseek.py) under two configs: yarn rope scaling
 * with mscale / mscale_all_dim and interleaved rope ("yarn"), plain rope
 * with rope_interleave false ("plain"). The reference forward must give the
 * same logits (its rope in fp64, transformers' cos/sin in fp32). The MLA
 * projections, router, correction bias and experts are the record's rows.
 * `skip`: tensors left out, the model refused with a message holding
 * `want`. */
static void deepseek_case(bool yarn, bool silent, const char *skip, const char *want)
{
	tpc_err e;
	tpc_ckpt ck, ex;
	tpc_verify_set s;
	tiny_open("tiny_deepseek_v3.safetensors", "tiny_deepseek_v3_logits.safetensors", &ck, &ex, &s, &e);
	for (size_t i = 0; i < ck.n; i++) { /* split as the deepseek-v3 preset does, at tp 1 */
		const char *nm = ck.t[i].name;
		if (skip && strstr(nm, skip))
			continue;
		bool col = strstr(nm, "q_b_proj") || strstr(nm, "kv_b_proj") || strstr(nm, "gate_proj") ||
			   strstr(nm, "up_proj");
		bool row = strstr(nm, "o_proj") || strstr(nm, "down_proj");
		bool voc = strstr(nm, "embed_tokens") || strstr(nm, "lm_head");
		tpc_vsplit sp = col ? TPC_VSPLIT_COL : row ? TPC_VSPLIT_ROW : voc ? TPC_VSPLIT_VOCAB : TPC_VSPLIT_REPLICATE;
		int64_t ix = tpc_verify_set_add(&s, nm, &ck, &ck.t[i], sp, row ? 1 : col || voc ? 0 : -1, false, false, 0,
						NULL, &e);
		assert_true(ix >= 0);
		tpc_verify_set_rank(&s, ix, 0, &ck, &ck.t[i]);
	}
	/* config.json as tpconv reads it (tiny_deepseek_v3.{yarn,plain}.json) */
	tpc_model_facts f = {.heads = 4, .hidden = 32, .vocab = 48, .layers = 3, .norm_eps = 1e-6, .rope_theta = 10000,
			     .experts_per_tok = 2, .norm_topk = 1, .scoring = TPC_MOE_SIGMOID,
			     .topk_method = TPC_MOE_NOAUX_TC, .n_group = 2, .topk_group = 1, .routed_scale = 2.5,
			     .rope_interleave = yarn ? 0 : -1};
	if (silent) /* config.json without scoring_func and topk_method (GLM-4.5's): the record's router */
		f.scoring = TPC_MOE_SCORE_UNKNOWN, f.topk_method = TPC_MOE_TOPK_UNKNOWN;
	if (yarn) {
		f.yarn.factor = 4;
		f.yarn.mscale = 1;
		f.yarn.mscale_all_dim = 0.5;
		f.yarn.orig_max = 16;
		f.yarn.beta_fast = 32;
		f.yarn.beta_slow = 1;
	}
	int r = tpc_verify_model_from_names(&s, tpc_family_find("deepseek-v3"), &f, &e);
	if (want) {
		assert_int_equal(r, TPC_EINPUT);
		if (!strstr(e.msg, want))
			fail_msg("got '%s', wanted '%s'", e.msg, want);
	} else {
		assert_int_equal(r, 0);
		const tpc_vmoe *mo = &s.model->layers[2].moe;
		assert_true(s.model->layers[0].attn.mla && mo->exp && !s.model->layers[0].moe.exp);
		assert_true(mo->score_bias >= 0 && mo->shared.down >= 0 && mo->shared_gate < 0 && mo->top_k == 2);
		assert_int_equal(s.model->layers[1].attn.lat.v_dim, 6);
		vs_transformers(&s, &ex, yarn ? "logits.yarn" : "logits.plain", 48, yarn ? "deepseek-v3 yarn" : "deepseek-v3 plain");
	}
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

static void test_deepseek_yarn(void **st)
{
	(void)st;
	deepseek_case(true, false, NULL, NULL);
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

static void test_deepseek_plain(void **st)
{
	(void)st;
	deepseek_case(false, false, NULL, NULL);
	/* the record's sigmoid_bias router with the layers' correction bias:
	 * sigmoid scores, noaux_tc's groups, where config.json is silent */
	deepseek_case(false, true, NULL, NULL);
	/* a tensor the router implies, refused naming it from the table */
	deepseek_case(false, false, "layers.2.mlp.experts.1.down_proj", "expert 1 has no 'model.layers.2.mlp.experts.1.down_proj.weight'");
	deepseek_case(false, false, "layers.2.mlp.shared_experts.up_proj",
		      "the shared expert has no 'model.layers.2.mlp.shared_experts.up_proj.weight'");
}

/* tests/data/tiny_gpt_neox.safetensors, tiny_bert.safetensors: GPT-NeoX and
 * BERT as transformers 5.12 saves them, and its float64 outputs
 * (tests/data/make_tiny_neox_bert.py); every tensor whole (tp 1), the facts
 * as their config.json files give them. `skip`: tensors left out (BERT
 * without its MLM head is a BertModel). The model of record `arch` built:
 * its status, the message in e. */
static int neox_bert_set(const char *file, const char *arch, const tpc_model_facts *f, const char *skip, tpc_ckpt *ck,
			 tpc_ckpt *ex, tpc_verify_set *s, tpc_err *e)
{
	tiny_open(file, "tiny_neox_bert_out.safetensors", ck, ex, s, e);
	for (size_t i = 0; i < ck->n; i++) {
		if (skip && strstr(ck->t[i].name, skip))
			continue;
		const char *nm = ck->t[i].name; /* split as the gpt-neox and bert presets do, at tp 1 */
		bool col = strstr(nm, "query_key_value") || strstr(nm, "h_to_4h") || strstr(nm, "attention.self.") ||
			   strstr(nm, "intermediate.dense");
		bool row = strstr(nm, "4h_to_h") || strstr(nm, "attention.dense") || strstr(nm, "output.dense");
		bool voc = strstr(nm, "embed_in") || strstr(nm, "embed_out") || strstr(nm, "word_embeddings") ||
			   !strcmp(nm, "cls.predictions.bias");
		tpc_vsplit sp = col ? TPC_VSPLIT_COL : row ? TPC_VSPLIT_ROW : voc ? TPC_VSPLIT_VOCAB : TPC_VSPLIT_REPLICATE;
		int64_t ix = tpc_verify_set_add(s, nm, ck, &ck->t[i], sp, tpc_verify_split_dim(sp, false, ck->t[i].ndim),
						false, row && ck->t[i].ndim == 1, 0, NULL, e);
		assert_true(ix >= 0);
		tpc_verify_set_rank(s, ix, 0, ck, &ck->t[i]);
	}
	tpc_verify_link_biases(s);
	tpc_err_init(e);
	return tpc_verify_model_from_names(s, tpc_family_find(arch), f, e);
}

static void neox_bert_case(const char *file, const char *arch, const tpc_model_facts *f, const char *skip, const char *key,
			   int64_t W)
{
	tpc_err e;
	tpc_ckpt ck, ex;
	tpc_verify_set s;
	assert_int_equal(neox_bert_set(file, arch, f, skip, &ck, &ex, &s, &e), 0);
	assert_int_equal(s.model->nlayers, 2);
	vs_transformers(&s, &ex, key, W, key);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

static void test_neox_bert(void **st)
{
	(void)st;
	tpc_model_facts f = {.heads = 4, .norm_eps = 1e-5, .rope_theta = 10000, .rotary_pct = 0.5, .parallel_residual = 1};
	neox_bert_case("tiny_gpt_neox.safetensors", "gpt-neox", &f, NULL, "neox.parallel", 48);
	f.rotary_pct = 0.25;
	f.parallel_residual = -1;
	neox_bert_case("tiny_gpt_neox.safetensors", "gpt-neox", &f, NULL, "neox.sequential", 48);
	tpc_model_facts b = {.heads = 4, .norm_eps = 1e-12};
	neox_bert_case("tiny_bert.safetensors", "bert", &b, NULL, "bert.mlm", 48);
	neox_bert_case("tiny_bert.safetensors", "bert", &b, "cls.", "bert.hidden", 32);
}

/* What GPT-NeoX's and BERT's records say where config.json is silent, and
 * the tensors they require: without rotary_pct the record's rope_fraction
 * (0.25 of each 8-dim head), without layer_norm_eps BERT's 1e-12; a
 * checkpoint without GPT-NeoX's untied head or BERT's embedding norm is
 * refused naming the tensor from the table; BERT's MLM head with its
 * transform's norm missing too */
static void test_neox_bert_records(void **st)
{
	(void)st;
	tpc_err e;
	tpc_ckpt ck, ex;
	tpc_verify_set s;
	tpc_model_facts f = {.heads = 4};
	assert_int_equal(neox_bert_set("tiny_gpt_neox.safetensors", "gpt-neox", &f, NULL, &ck, &ex, &s, &e), 0);
	assert_true(s.model->layers[1].attn.interleaved && s.model->layers[1].attn.rot_dims == 2);
	assert_true(s.model->parallel_residual && s.model->norm_eps == 1e-5 && s.model->lm_head >= 0);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
	assert_int_equal(neox_bert_set("tiny_gpt_neox.safetensors", "gpt-neox", &f, "embed_out", &ck, &ex, &s, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "no 'embed_out.weight'"));
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
	assert_int_equal(neox_bert_set("tiny_bert.safetensors", "bert", &f, NULL, &ck, &ex, &s, &e), 0);
	assert_true(s.model->norm_eps == 1e-12 && s.model->post_norm && s.model->layers[0].attn.bidirectional);
	assert_true(s.model->type_embed >= 0 && s.model->mlm_dense >= 0 && s.model->head_bias >= 0 && !s.model->hidden_out);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
	assert_int_equal(neox_bert_set("tiny_bert.safetensors", "bert", &f, "embeddings.LayerNorm", &ck, &ex, &s, &e),
			 TPC_EINPUT);
	assert_non_null(strstr(e.msg, "no 'bert.embeddings.LayerNorm.weight'"));
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
	assert_int_equal(neox_bert_set("tiny_bert.safetensors", "bert", &f, "transform.LayerNorm", &ck, &ex, &s, &e),
			 TPC_EINPUT);
	assert_non_null(strstr(e.msg, "no 'cls.predictions.transform.LayerNorm.weight'"));
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

/* OLMo 2 from parts alone: a record as the OLMo 2 one would be (its table
 * and its parts: post placement, q/k norms over the whole projection;
 * otherwise LLaMA's), no code of its own. tests/data/tiny_olmo2.safetensors
 * and its logits in plain torch (tests/data/make_tiny_olmo2.py): verify's
 * fp64 reference forward composed from the parts gives them. */
#define OL(R, NAME) {TPC_ROLE_##R, false, {NAME, NULL, NULL, NULL, NULL}, false, false, NULL}
static const tpc_tensor_row olmo2_rows[] = {
	OL(TOKEN_EMBD, "model.embed_tokens.weight"),
	OL(OUTPUT_NORM, "model.norm.weight"),
	OL(OUTPUT, "lm_head.weight"),
	OL(ATTN_Q, "model.layers.{L}.self_attn.q_proj.weight"),
	OL(ATTN_K, "model.layers.{L}.self_attn.k_proj.weight"),
	OL(ATTN_V, "model.layers.{L}.self_attn.v_proj.weight"),
	OL(ATTN_OUT, "model.layers.{L}.self_attn.o_proj.weight"),
	OL(ATTN_Q_NORM, "model.layers.{L}.self_attn.q_norm.weight"),
	OL(ATTN_K_NORM, "model.layers.{L}.self_attn.k_norm.weight"),
	OL(ATTN_POST_NORM, "model.layers.{L}.post_attention_layernorm.weight"),
	OL(FFN_GATE, "model.layers.{L}.mlp.gate_proj.weight"),
	OL(FFN_UP, "model.layers.{L}.mlp.up_proj.weight"),
	OL(FFN_DOWN, "model.layers.{L}.mlp.down_proj.weight"),
	OL(FFN_POST_NORM, "model.layers.{L}.post_feedforward_layernorm.weight"),
	{TPC_ROLE_NONE, false, {NULL, NULL, NULL, NULL, NULL}, false, false, NULL},
};
#undef OL

static void test_olmo2_parts(void **st)
{
	(void)st;
	const tpc_family olmo2 = {.name = "olmo2", .tensors = olmo2_rows, .has_parts = true,
				  .parts = {.place = TPC_PART_POST, .qk_norm = TPC_PART_QK_WHOLE, .tied_head = true}};
	tpc_err e;
	tpc_ckpt ck, ex;
	tpc_verify_set s;
	tiny_open("tiny_olmo2.safetensors", "tiny_olmo2_out.safetensors", &ck, &ex, &s, &e);
	for (size_t i = 0; i < ck.n; i++) {
		const char *nm = ck.t[i].name; /* split as the llama plan splits, at tp 1 */
		bool row = strstr(nm, "o_proj") || strstr(nm, "down_proj"), voc = strstr(nm, "embed") || strstr(nm, "lm_head");
		tpc_vsplit sp = ck.t[i].ndim == 1 ? TPC_VSPLIT_REPLICATE : row ? TPC_VSPLIT_ROW : voc ? TPC_VSPLIT_VOCAB : TPC_VSPLIT_COL;
		int64_t ix = tpc_verify_set_add(&s, nm, &ck, &ck.t[i], sp, tpc_verify_split_dim(sp, false, ck.t[i].ndim), false,
						false, 0, NULL, &e);
		assert_true(ix >= 0);
		tpc_verify_set_rank(&s, ix, 0, &ck, &ck.t[i]);
	}
	tpc_model_facts f = {.heads = 4, .kv_heads = 2, .norm_eps = 1e-6, .rope_theta = 10000};
	assert_int_equal(tpc_verify_model_from_names(&s, &olmo2, &f, &e), 0);
	assert_int_equal(s.model->nlayers, 2);
	assert_true(s.model->layers[1].norm1_w < 0 && s.model->layers[1].post1_w >= 0 && s.model->layers[1].post2_w >= 0);
	assert_true(s.model->layers[0].attn.qk_whole);
	vs_transformers(&s, &ex, "logits", 48, "olmo2 parts vs plain torch");
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

/* Gemma 2 and Gemma 3 from parts alone: records as theirs would be (sandwich
 * norms stored as w for 1 + w, the embedding times sqrt(hidden), a gated
 * gelu_pytorch_tanh, the default sliding pattern; Gemma 3 with per-head
 * q/k norms), no code of their own, the facts read from the config.json
 * transformers 5.12 saved (tests/data/tiny_gemma{2,3}.json):
 * query_pre_attn_scalar, the softcaps, the sliding window and layer_types,
 * the per-layer-type rope (a linear scaling on the full layers). verify's
 * fp64 reference forward gives Gemma2ForCausalLM's and Gemma3ForCausalLM's
 * float64 logits (tests/data/make_tiny_gemma.py). Gemma 2 once more without
 * layer_types: the record's swa_every (2) says which layers slide. */
#define GM(R, NAME) {TPC_ROLE_##R, false, {NAME, NULL, NULL, NULL, NULL}, false, false, NULL}
static const tpc_tensor_row gemma_rows[] = {
	GM(TOKEN_EMBD, "model.embed_tokens.weight"),
	GM(OUTPUT_NORM, "model.norm.weight"),
	GM(OUTPUT, "lm_head.weight"),
	GM(ATTN_NORM, "model.layers.{L}.input_layernorm.weight"),
	GM(ATTN_Q, "model.layers.{L}.self_attn.q_proj.weight"),
	GM(ATTN_K, "model.layers.{L}.self_attn.k_proj.weight"),
	GM(ATTN_V, "model.layers.{L}.self_attn.v_proj.weight"),
	GM(ATTN_OUT, "model.layers.{L}.self_attn.o_proj.weight"),
	GM(ATTN_Q_NORM, "model.layers.{L}.self_attn.q_norm.weight"),
	GM(ATTN_K_NORM, "model.layers.{L}.self_attn.k_norm.weight"),
	GM(ATTN_POST_NORM, "model.layers.{L}.post_attention_layernorm.weight"),
	GM(FFN_NORM, "model.layers.{L}.pre_feedforward_layernorm.weight"),
	GM(FFN_GATE, "model.layers.{L}.mlp.gate_proj.weight"),
	GM(FFN_UP, "model.layers.{L}.mlp.up_proj.weight"),
	GM(FFN_DOWN, "model.layers.{L}.mlp.down_proj.weight"),
	GM(FFN_POST_NORM, "model.layers.{L}.post_feedforward_layernorm.weight"),
	{TPC_ROLE_NONE, false, {NULL, NULL, NULL, NULL, NULL}, false, false, NULL},
};
#undef GM

static void gemma_case(const char *name, tpc_part_qk_norm qk, int swa_every, bool typed)
{
	tpc_family fam = {.name = name, .tensors = gemma_rows, .has_parts = true,
			  .parts = {.norm_offset = 1, .place = TPC_PART_SANDWICH, .qk_norm = qk,
				    .mlp = TPC_PART_MLP_GELU_TANH_GLU, .embed_scale = true, .swa_every = swa_every,
				    .tied_head = true}};
	char file[64], cfg[4096], key[64];
	const char *src = getenv("TPC_SRC") ? getenv("TPC_SRC") : "../../..";
	tpc_err e;
	tpc_ckpt ck, ex;
	tpc_verify_set s;
	tpc_model_facts f;
	snprintf(file, sizeof(file), "tiny_%s.safetensors", name);
	tiny_open(file, "tiny_gemma_logits.safetensors", &ck, &ex, &s, &e);
	snprintf(cfg, sizeof(cfg), "%s/tests/data/tiny_%s.json", src, name);
	assert_int_equal(tpc_facts_from_file(&f, cfg, &e), 0);
	assert_true(f.attn_scalar == 24 && f.sliding_window == 4 && f.n_typed == 3 && f.swa_layers[0] == 5);
	if (!typed) {
		f.n_typed = 0;
		f.swa_layers[0] = 0;
	}
	for (size_t i = 0; i < ck.n; i++) {
		const char *nm = ck.t[i].name; /* split as the llama plan splits, at tp 1 */
		bool row = strstr(nm, "o_proj") || strstr(nm, "down_proj"), voc = strstr(nm, "embed") != NULL;
		tpc_vsplit sp = ck.t[i].ndim == 1 ? TPC_VSPLIT_REPLICATE : row ? TPC_VSPLIT_ROW : voc ? TPC_VSPLIT_VOCAB : TPC_VSPLIT_COL;
		int64_t ix = tpc_verify_set_add(&s, nm, &ck, &ck.t[i], sp, tpc_verify_split_dim(sp, false, ck.t[i].ndim), false,
						false, 0, NULL, &e);
		assert_true(ix >= 0);
		tpc_verify_set_rank(&s, ix, 0, &ck, &ck.t[i]);
	}
	assert_int_equal(tpc_verify_model_from_names(&s, &fam, &f, &e), 0);
	assert_int_equal(s.model->nlayers, 3);
	const tpc_vattn *a0 = &s.model->layers[0].attn, *a1 = &s.model->layers[1].attn;
	assert_true(a0->window == 4 && a1->window == 0 && fabs(a0->scale - 1 / sqrt(24.0)) < 1e-15);
	assert_true(s.model->layers[1].norm2_w >= 0 && s.model->layers[1].post1_w >= 0 && s.model->layers[1].post2_w >= 0);
	assert_true(fabs(s.model->embed_mul - (double)(float)sqrt(48.0)) < 1e-15);
	snprintf(key, sizeof(key), "logits.%s", name);
	snprintf(file, sizeof(file), "%s parts vs transformers%s", name, typed ? "" : " (no layer_types)");
	vs_transformers(&s, &ex, key, 48, file);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

static void test_gemma2_parts(void **st)
{
	(void)st;
	gemma_case("gemma2", TPC_PART_QK_NONE, 2, true);
	gemma_case("gemma2", TPC_PART_QK_NONE, 2, false);
}

static void test_gemma3_parts(void **st)
{
	(void)st;
	gemma_case("gemma3", TPC_PART_QK_HEAD, 6, true);
}

/* Families added as records alone (lib/tpc_family.c): tests/data/tiny_FAM
 * .safetensors as transformers 5.12 saves them, their config.json (tiny_FAM
 * .json) and transformers' float64 logits (tests/data/make_tiny_records.py).
 * Every tensor whole (tp 1), split as the record's plan would (the router
 * replicated), the facts read from the config.json; verify's fp64 reference
 * forward, composed from the record's layer parts, gives transformers'
 * logits within 1e-5 of their rms (vs_transformers). */
static void record_case_of(const tpc_family *fam, const char *file, tpc_model_facts *f, tpc_verify_set *s);

static void record_case(const char *fam, const char *file)
{
	tpc_model_facts f;
	record_case_of(tpc_family_find(fam), file, &f, NULL);
}

/* The row of fam a tensor of ck belongs to, an expert's view "X[e]" by X's */
static const tpc_tensor_row *row_of(const tpc_family *fam, const char *name)
{
	char base[256];
	const char *x = strrchr(name, '[');
	snprintf(base, sizeof(base), "%.*s", x ? (int)(x - name) : (int)strlen(name), name);
	int64_t l, ex;
	bool b;
	return fam ? tpc_family_classify(fam, TPC_ECO_HF, base, &l, &ex, &b) : NULL;
}

/* Whether tensor t stacks the experts: 3-D (but a row's that does not:
 * Qwen3-Next's conv1d [channels, 1, kernel]), or a bias [E, n] of a row
 * whose Hugging Face name stacks them (gpt-oss's gate_up_proj_bias) */
static bool stacks_experts(const tpc_family *fam, const tpc_tensor *t)
{
	const tpc_tensor_row *r = t->ndim == 2 || t->ndim == 3 ? row_of(fam, t->name) : NULL;
	size_t n = strlen(t->name);
	/* a 3-D tensor of no stacked row (a conv1d's [C, 1, K]) is not one */
	return (t->ndim == 3 && (!r || tpc_family_stacked(r, TPC_ECO_HF))) ||
	       (t->ndim == 2 && r && tpc_family_stacked(r, TPC_ECO_HF) && n > 5 && !strcmp(t->name + n - 5, "_bias"));
}

/* Every tensor of ck into s whole (tp 1), split as the record's plan would
 * (the router replicated; a fused [gate | up] col in 2 parts; an expert's
 * view of a matrix stored [in, out] transposed; stacked experts left to
 * their views) */
static void add_as_plan(const tpc_family *fam, tpc_ckpt *ck, tpc_verify_set *s)
{
	tpc_err e;
	tpc_err_init(&e);
	for (size_t i = 0; i < ck->n; i++) {
		const char *nm = ck->t[i].name;
		if (stacks_experts(fam, &ck->t[i]))
			continue;
		/* an expert's view of a matrix stored [in, out] (gpt-oss), and a
		 * fused gate_up whose gate and up interleave (one part) */
		const tpc_tensor_row *rw = row_of(fam, nm);
		bool tr = rw && rw->hf_in_out && ck->t[i].ndim == 2, il = rw && rw->hf_interleaved;
		bool row = strstr(nm, "o_proj") || strstr(nm, "down_proj") || strstr(nm, "c_proj") ||
			   strstr(nm, "self_attn.dense") || strstr(nm, "mlp.fc2") || strstr(nm, "output_linear") ||
			   strstr(nm, ".w2.");
		bool col = strstr(nm, "q_proj") || strstr(nm, "k_proj") || strstr(nm, "v_proj") || strstr(nm, "gate_proj") ||
			   strstr(nm, "up_proj") || strstr(nm, "c_fc") || strstr(nm, "mlp.fc1") || strstr(nm, "input_linear") ||
			   strstr(nm, ".w1.") || strstr(nm, ".w3.");
		bool voc = strstr(nm, "embed_tokens") || strstr(nm, "lm_head");
		tpc_vsplit sp = row && ck->t[i].ndim == 2 ? TPC_VSPLIT_ROW
				: col			  ? TPC_VSPLIT_COL
				: voc			  ? TPC_VSPLIT_VOCAB
							  : TPC_VSPLIT_REPLICATE;
		/* a fused [gate | up] (gate_up_proj, input_linear): col in 2 equal
		 * parts of its split dim (an expert's [in, out] view: dim 1, Llama
		 * 4's), as the plan splits it */
		bool gu = (strstr(nm, "gate_up_proj") || strstr(nm, "input_linear")) && !il;
		int sd = tpc_verify_split_dim(sp, tr, ck->t[i].ndim);
		int64_t half = sd >= 0 ? ck->t[i].shape[sd] / 2 : 0;
		tpc_vpart two[2] = {{half, 0, 1}, {half, 0, 1}};
		int64_t ix = tpc_verify_set_add(s, nm, ck, &ck->t[i], sp, sd, tr, row && ck->t[i].ndim == 1, gu ? 2 : 0,
						gu ? two : NULL, &e);
		assert_true(ix >= 0);
		tpc_verify_set_rank(s, ix, 0, ck, &ck->t[i]);
	}
}

/* The set of tests/data/tiny_FILE (every tensor whole, split as the plan
 * would at tp 1), its facts from tiny_FILE.json and the model of record fam
 * built; ck and ex (transformers' logits) stay open for the caller */
static void record_set_of(const tpc_family *fam, const char *file, const char *cfg, const char *out, tpc_ckpt *ck,
			  tpc_ckpt *ex, tpc_verify_set *s, tpc_model_facts *f);

static void record_set(const tpc_family *fam, const char *file, tpc_ckpt *ck, tpc_ckpt *ex, tpc_verify_set *s,
		       tpc_model_facts *f)
{
	record_set_of(fam, file, file, "tiny_records_out.safetensors", ck, ex, s, f);
}

/* record_set with the weights of tiny_FILE, the config.json tiny_CFG.json
 * and transformers' logits in OUT */
static void record_set_of(const tpc_family *fam, const char *file, const char *cfg, const char *out, tpc_ckpt *ck,
			  tpc_ckpt *ex, tpc_verify_set *s, tpc_model_facts *f)
{
	char st[128], js[4096];
	tpc_err e;
	snprintf(st, sizeof(st), "tiny_%s.safetensors", file);
	tiny_open(st, out, ck, ex, s, &e);
	snprintf(js, sizeof(js), "%s/tests/data/tiny_%s.json", getenv("TPC_SRC") ? getenv("TPC_SRC") : "../../..", cfg);
	memset(f, 0, sizeof(*f));
	assert_int_equal(tpc_facts_from_file(f, js, &e), 0);
	/* experts stacked in a 3-D tensor: one view each, as verify describes
	 * them (TPC_VERIFY_EXPERT_NAME), before anything points into ck */
	for (size_t i = 0, n0 = ck->n; i < n0; i++) {
		if (!stacks_experts(fam, &ck->t[i]))
			continue;
		for (int64_t x = 0; x < ck->t[i].shape[0]; x++) {
			char vn[256];
			tpc_tensor v;
			snprintf(vn, sizeof(vn), TPC_VERIFY_EXPERT_NAME, ck->t[i].name, (long long)x);
			assert_int_equal(tpc_tensor_select0(&v, &ck->t[i], x), 0);
			assert_true(tpc_ckpt_add_copy(ck, vn, &v, &e) >= 0);
			tpc_tensor_release(&v);
		}
	}
	add_as_plan(fam, ck, s);
	tpc_verify_link_biases(s);
	int r = tpc_verify_model_from_names(s, fam, f, &e);
	if (r)
		print_message("# %s\n", e.msg);
	assert_int_equal(r, 0);
	assert_int_equal(s->model->nlayers, f->layers);
}

/* record_case with the record given; s, when not NULL, gets the model built
 * (its release the caller's) */
static void record_case_of(const tpc_family *fam, const char *file, tpc_model_facts *fp, tpc_verify_set *sp)
{
	tpc_ckpt ck, ex;
	tpc_verify_set s;
	record_set(fam, file, &ck, &ex, &s, fp);
	vs_transformers(&s, &ex, file, 48, fam->name);
	if (sp)
		*sp = s;
	else
		tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

/* Qwen3-MoE: per-head q/k norms, head_dim 16 (not hidden / heads), top-2 of
 * 4 experts renormalised, no shared expert */
static void test_qwen3_moe_record(void **st)
{
	(void)st;
	record_case("qwen3-moe", "qwen3_moe");
}

/* A dense record on a set with experts reads them by the first record whose
 * router names a tensor of the layer: LLaMA's (per-head q/k norms by its
 * rows) on Qwen3-MoE's set by Qwen2-MoE's rows gives its logits */
static void test_moe_other_record(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	const tpc_family *ll = tpc_family_find("llama");
	assert_null(tpc_family_row(ll, TPC_ROLE_FFN_GATE_INP));
	record_case_of(ll, "qwen3_moe", &f, &s);
	assert_true(s.model->moe && s.model->layers[0].moe.exp && s.model->layers[0].moe.top_k == 2);
	tpc_verify_set_release(&s);
}

/* GLM-4.5 MoE: a dense layer 0, then a sigmoid router with its correction
 * bias over 2 groups of 2 experts (one kept), top-2 renormalised times 2.5,
 * beside a shared expert; per-head q/k norms, partial rotate-half RoPE, q/k/v
 * biases; config.json names no scoring_func nor topk_method (the record's
 * router says), and the next-token-prediction layer 2 in the checkpoint is
 * left out */
static void test_glm4_moe_record(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	record_case_of(tpc_family_find("glm4-moe"), "glm4_moe", &f, &s);
	assert_int_equal(f.nextn, 1);
	assert_true(f.scoring == TPC_MOE_SCORE_UNKNOWN && f.topk_method == TPC_MOE_TOPK_UNKNOWN);
	const tpc_vmoe *mo = &s.model->layers[1].moe;
	assert_true(!s.model->layers[0].moe.exp && mo->exp && mo->sigmoid && mo->score_bias >= 0 && mo->n_group == 2 &&
		    mo->topk_group == 1 && mo->shared.down >= 0 && mo->scale == 2.5);
	assert_int_equal(s.model->layers[1].attn.rot_dims, 8);
	tpc_verify_set_release(&s);
}

/* A layer after config.json's num_hidden_layers (a next-token-prediction
 * layer: Qwen3-MoE's layer 1 again as layer 2) is no part of the model when
 * num_nextn_predict_layers says so (the logits are transformers'); else the
 * model has one layer too many */
static void test_nextn_layers_left_out(void **st)
{
	(void)st;
	tpc_ckpt ck, ex;
	tpc_verify_set s;
	tpc_model_facts f;
	tpc_err e;
	char js[4096];
	tiny_open("tiny_qwen3_moe.safetensors", "tiny_records_out.safetensors", &ck, &ex, &s, &e);
	snprintf(js, sizeof(js), "%s/tests/data/tiny_qwen3_moe.json", getenv("TPC_SRC") ? getenv("TPC_SRC") : "../../..");
	memset(&f, 0, sizeof(f));
	assert_int_equal(tpc_facts_from_file(&f, js, &e), 0);
	assert_int_equal(f.layers, 2);
	assert_int_equal(f.nextn, 0);
	for (size_t i = 0, n0 = ck.n; i < n0; i++) {
		char nm[256];
		if (strncmp(ck.t[i].name, "model.layers.1.", 15))
			continue;
		snprintf(nm, sizeof(nm), "model.layers.2.%s", ck.t[i].name + 15);
		tpc_tensor t = ck.t[i];
		assert_true(tpc_ckpt_add_copy(&ck, nm, &t, &e) >= 0);
	}
	add_as_plan(tpc_family_find("qwen3-moe"), &ck, &s);
	tpc_verify_link_biases(&s);
	assert_int_equal(tpc_verify_model_from_names(&s, tpc_family_find("qwen3-moe"), &f, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "found 3 layers, not the configured number"));
	f.nextn = 1;
	tpc_err_init(&e);
	assert_int_equal(tpc_verify_model_from_names(&s, tpc_family_find("qwen3-moe"), &f, &e), 0);
	assert_int_equal(s.model->nlayers, 2);
	vs_transformers(&s, &ex, "qwen3_moe", 48, "qwen3-moe with a layer after its num_hidden_layers");
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

/* OLMoE: q/k norms over the whole projection, pre-norm, top-2 of 4 experts
 * not renormalised */
static void test_olmoe_record(void **st)
{
	(void)st;
	record_case("olmoe", "olmoe");
}

/* StarCoder2: LayerNorms with biases, q/k/v/o and MLP biases, a plain
 * c_fc / c_proj MLP with gelu_pytorch_tanh, RoPE */
static void test_starcoder2_record(void **st)
{
	(void)st;
	record_case("starcoder2", "starcoder2");
}

/* Granite: LLaMA's parts, its four multipliers config.json's facts */
static void test_granite_record(void **st)
{
	(void)st;
	record_case("granite", "granite");
}

/* Phi: LayerNorms and biases, attention and MLP in parallel under one
 * norm, partial RoPE, gelu_new, lm_head's vocab bias. Its rope is GLM-4's
 * (layer_rot, FN(rope)): the first int(8 * 0.5) dims of each head,
 * rotate-half within them */
static void test_phi_record(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	record_case_of(tpc_family_find("phi"), "phi", &f, &s);
	for (int l = 0; l < 2; l++)
		assert_true(s.model->layers[l].attn.rope && s.model->layers[l].attn.rot_dims == 4 &&
			    !s.model->layers[l].attn.rope_pairs);
	tpc_verify_set_release(&s);
}

/* The q/k norms after the rotary embedding (qk_after_rope): Qwen3-MoE's
 * set read by its record with the flag set gives logits away from
 * transformers' (its per-head norms' weights do not commute with the
 * rotation), and the attention of every layer says so */
static void test_qk_after_rope(void **st)
{
	(void)st;
	tpc_ckpt ck, ex;
	tpc_verify_set s;
	tpc_model_facts f;
	tpc_family fam = *tpc_family_find("qwen3-moe");
	fam.parts.qk_after_rope = true;
	record_set(&fam, "qwen3_moe", &ck, &ex, &s, &f);
	for (int l = 0; l < 2; l++)
		assert_true(s.model->layers[l].attn.qk_after_rope && s.model->layers[l].attn.q_norm >= 0);
	assert_true(vs_worst(&s, &ex, "qwen3_moe", 48, "qwen3-moe, q/k norms after the rope") > 1e-3);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

/* HunYuan MoE: every layer 4 experts (top-2 of the softmax, renormalised)
 * beside an ungated shared expert, the router mlp.gate.wg; q/k/v/o biases;
 * per-head q/k norms after the rotary embedding */
static void test_hunyuan_moe_record(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	record_case_of(tpc_family_find("hunyuan-moe"), "hunyuan_moe", &f, &s);
	for (int l = 0; l < 2; l++) {
		const tpc_vlayer *ly = &s.model->layers[l];
		assert_true(ly->moe.exp && ly->moe.top_k == 2 && ly->moe.renorm && !ly->moe.sigmoid &&
			    ly->moe.shared.down >= 0 && ly->moe.shared_gate < 0 && ly->attn.qk_after_rope &&
			    ly->attn.q_norm >= 0 && ly->attn.k_norm >= 0);
	}
	tpc_verify_set_release(&s);
}

/* HunYuan MoE under Hunyuan-A13B's rope, rope_type "dynamic" with alpha
 * 1000 (tests/data/make_tiny_hunyuan_dyn.py: tiny_hunyuan_moe's weights,
 * transformers' float64 logits): the record's rope_alpha makes every layer
 * rotate by 10000 x 1000^(8 / 6) = 1e8 (head_dim 8), as
 * HunYuanMoEV1RotaryEmbedding does; the default rope's logits are far off.
 * A record without rope_alpha (LLaMA's rows read the same tensors) keeps
 * rope_theta: transformers' dynamic NTK is the default rope within
 * max_position_embeddings, alpha no part of it. */
static void test_hunyuan_moe_dynamic_rope(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	tpc_ckpt ck, ex;
	const tpc_family *fam = tpc_family_find("hunyuan-moe");
	record_set_of(fam, "hunyuan_moe", "hunyuan_moe_dyn", "tiny_hunyuan_moe_dyn_out.safetensors", &ck, &ex, &s, &f);
	assert_true(f.rope_dynamic && f.rope_alpha == 1000 && f.max_pos == 64);
	assert_int_equal(s.model->rope_max, 64);
	for (int l = 0; l < 2; l++)
		assert_true(fabs(s.model->layers[l].attn.rope_theta / 1e8 - 1) < 1e-12);
	vs_transformers(&s, &ex, "hunyuan_moe_dyn", 48, "hunyuan-moe, dynamic alpha rope");
	for (int l = 0; l < 2; l++)
		s.model->layers[l].attn.rope_theta = 10000;
	assert_true(vs_worst(&s, &ex, "hunyuan_moe_dyn", 48, "the same with the default rope") > 1e-2);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
	tpc_family parts = *fam;
	parts.parts.rope_alpha = false;
	record_set_of(&parts, "hunyuan_moe", "hunyuan_moe_dyn", "tiny_hunyuan_moe_dyn_out.safetensors", &ck, &ex, &s, &f);
	assert_true(s.model->layers[0].attn.rope_theta == 10000 && s.model->rope_max == 64);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

/* HunYuan dense (tests/data/make_tiny_hunyuan_dense.py: q/k/v/o biases,
 * per-head q/k norms after the rotary embedding, Hunyuan-7B's rope_type
 * "dynamic" with alpha 1000; transformers 5.12's float64 logits): the
 * record's parts rotate every layer by 10000 x 1000^(8 / 6) = 1e8 (head_dim
 * 8) and norm q and k after it, as HunYuanDenseV1Attention does; with the
 * norms before the rotation or the default rope's base, far off */
static void test_hunyuan_dense_record(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	tpc_ckpt ck, ex;
	const tpc_family *fam = tpc_family_find("hunyuan-dense");
	record_set_of(fam, "hunyuan_dense", "hunyuan_dense", "tiny_hunyuan_dense_out.safetensors", &ck, &ex, &s, &f);
	assert_true(f.rope_dynamic && f.rope_alpha == 1000 && f.max_pos == 64);
	for (int l = 0; l < 2; l++) {
		const tpc_vlayer *ly = &s.model->layers[l];
		assert_true(fabs(ly->attn.rope_theta / 1e8 - 1) < 1e-12 && ly->attn.qk_after_rope && ly->attn.q_norm >= 0 &&
			    ly->attn.k_norm >= 0);
	}
	vs_transformers(&s, &ex, "hunyuan_dense", 48, "hunyuan-dense, dynamic alpha rope");
	for (int l = 0; l < 2; l++)
		s.model->layers[l].attn.qk_after_rope = false;
	assert_true(vs_worst(&s, &ex, "hunyuan_dense", 48, "the q/k norms before the rope") > 1e-3);
	for (int l = 0; l < 2; l++) {
		s.model->layers[l].attn.qk_after_rope = true;
		s.model->layers[l].attn.rope_theta = 10000;
	}
	assert_true(vs_worst(&s, &ex, "hunyuan_dense", 48, "the default rope's base") > 1e-2);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

/* Phi-3's longrope (tests/data/make_tiny_phi3_longrope.py: a tiny
 * Phi3ForCausalLM, partial_rotary_factor 0.75, the same weights under two
 * configs, transformers 5.12's float64 logits on 10 ids): with
 * original_max_position_embeddings 8 the 10 tokens take long_factor, cos and
 * sin times sqrt(1 + ln 8 / ln 8); with 16, short_factor and sqrt(1 + ln 4 /
 * ln 16). The other list's factors are far off. A record without
 * rope_orig_top reads the rope object's original_max_position_embeddings
 * (here none: max_position_embeddings 64, the short branch), as transformers'
 * config classes other than Phi3Config do; lists of another length than the
 * rotated pairs are refused naming them; Phi-3's older rope_type names su
 * and yarn are longrope for its record. */
static void test_phi3_longrope(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	tpc_ckpt ck, ex;
	tpc_err e;
	const tpc_family *fam = tpc_family_find("phi3");
	record_set_of(fam, "phi3_longrope", "phi3_longrope_long", "tiny_phi3_longrope_out.safetensors", &ck, &ex, &s, &f);
	assert_true(f.longrope.on && f.longrope.n_short == 6 && f.longrope.n_long == 6 && f.longrope.orig_top == 8 &&
		    !f.longrope.orig_rope && f.longrope.max_pos == 64 && f.rotary_pct == 0.75 && !f.rope_unknown[0]);
	assert_true(s.model->longrope_orig == 8 && fabs(s.model->longrope_af - sqrt(2)) < 1e-15);
	for (int l = 0; l < 2; l++)
		assert_true(s.model->layers[l].attn.longrope && s.model->layers[l].attn.rot_dims == 12);
	vs_transformers(&s, &ex, "long", 48, "phi3, longrope past original_max_position_embeddings (long_factor)");
	memcpy(s.model->longrope.long_f, s.model->longrope.short_f, sizeof(s.model->longrope.short_f));
	assert_true(vs_worst(&s, &ex, "long", 48, "the same with short_factor") > 1e-2);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
	record_set_of(fam, "phi3_longrope", "phi3_longrope_short", "tiny_phi3_longrope_out.safetensors", &ck, &ex, &s,
		      &f);
	assert_true(s.model->longrope_orig == 16 && fabs(s.model->longrope_af - sqrt(1 + log(4) / log(16))) < 1e-15);
	vs_transformers(&s, &ex, "short", 48, "phi3, longrope within original_max_position_embeddings (short_factor)");
	memcpy(s.model->longrope.short_f, f.longrope.long_f, sizeof(f.longrope.long_f));
	assert_true(vs_worst(&s, &ex, "short", 48, "the same with long_factor") > 1e-2);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
	/* a record without rope_orig_top: the rope object's, else max_position_embeddings */
	tpc_family parts = *fam;
	parts.parts.rope_orig_top = 0;
	record_set_of(&parts, "phi3_longrope", "phi3_longrope_long", "tiny_phi3_longrope_out.safetensors", &ck, &ex, &s,
		      &f);
	assert_true(s.model->longrope_orig == 64 && s.model->longrope_af == 1.0);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
	/* Phi3Config's older names (the record's longrope_alias): "yarn" with a
	 * top-level original 8 is the long config, "su" with a top-level 16
	 * beside the rope object's 8 the short one (transformers' logits equal) */
	record_set_of(fam, "phi3_longrope", "phi3_longrope_yarn", "tiny_phi3_longrope_out.safetensors", &ck, &ex, &s, &f);
	assert_true(f.longrope.alias == 2 && s.model->layers[0].attn.longrope && !s.model->layers[0].attn.yarn.factor);
	vs_transformers(&s, &ex, "long", 48, "phi3, rope_type yarn read as longrope");
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
	record_set_of(fam, "phi3_longrope", "phi3_longrope_su", "tiny_phi3_longrope_out.safetensors", &ck, &ex, &s, &f);
	assert_true(f.longrope.alias == 1 && s.model->longrope_orig == 16);
	vs_transformers(&s, &ex, "short", 48, "phi3, rope_type su read as longrope");
	/* without the part "su" is no rope the forward computes */
	parts = *fam;
	parts.parts.longrope_alias = false;
	tpc_err_init(&e);
	assert_int_equal(tpc_verify_model_from_names(&s, &parts, &f, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "rope_type 'su' is not one verify's forward computes"));
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
	/* factor lists of another length than the 6 rotated pairs: refused */
	tpc_err_init(&e);
	record_set_of(fam, "phi3_longrope", "phi3_longrope_long", "tiny_phi3_longrope_out.safetensors", &ck, &ex, &s, &f);
	f.longrope.n_long = 8;
	assert_int_equal(tpc_verify_model_from_names(&s, fam, &f, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "longrope short_factor has 6 entries and long_factor 8, not 6"));
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

/* ERNIE 4.5 MoE: 3 layers, layer 1 alone a mixture (moe_layer_start_index
 * and moe_layer_end_index 1) of 4 experts, the softmax's top-2 (moe_k)
 * chosen with moe_statics' [1, 4] correction bias, renormalised, beside a
 * shared expert; use_bias's biases (lm_head's too), interleaved-pair rope */
static void test_ernie4_5_moe_record(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	record_case_of(tpc_family_find("ernie4_5-moe"), "ernie4_5_moe", &f, &s);
	assert_int_equal(f.experts_per_tok, 2);
	const tpc_vmoe *mo = &s.model->layers[1].moe;
	assert_true(!s.model->layers[0].moe.exp && !s.model->layers[2].moe.exp && mo->exp && mo->score_bias >= 0 &&
		    !mo->sigmoid && mo->renorm && mo->shared.down >= 0 && mo->shared_gate < 0);
	tpc_verify_set_release(&s);
}

/* Qwen3-Next: 4 layers, a gated DeltaNet (layers 0 and 2: 2 key heads of
 * 8, 4 value heads of 8, conv kernel 4; the delta rule run recurrently)
 * then gated full attention (layers 1 and 3: query and gate per head,
 * per-head q/k norms, a quarter of each 16-wide head rotated), zero-centred
 * RMSNorms, 4 experts (top-2, renormalised) beside a shared expert with its
 * sigmoid gate, layer 2 a dense MLP (mlp_only_layers). transformers' torch
 * path computes in float32 whatever the model's dtype in its zero-centred
 * RMSNorms (Gemma3RMSNorm's x.float()), the decay g (A_log.float()), the
 * chunked delta rule and the gated norm: 1.56e-5 of the logits' rms from
 * verify's fp64 forward, so within 3e-5 here (with those casts taken out,
 * transformers' float64 logits are 2.9e-7 of their rms from verify's) */
static void test_qwen3_next_record(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	tpc_ckpt ck, ex;
	record_set(tpc_family_find("qwen3-next"), "qwen3_next", &ck, &ex, &s, &f);
	assert_true(vs_worst(&s, &ex, "qwen3_next", 48, "qwen3-next") < 3e-5);
	tpc_ckpt_release(&ex);
	assert_int_equal(f.lin_k_heads, 2);
	assert_int_equal(f.lin_v_heads, 4);
	const tpc_vmodel *m = s.model;
	assert_true(m->delta && m->layers[0].attn.delta && m->layers[2].attn.delta && !m->layers[1].attn.delta &&
		    m->layers[1].attn.gated && m->layers[3].attn.gated && m->layers[1].attn.rot_dims == 4);
	assert_true(m->layers[0].moe.exp && !m->layers[2].moe.exp && m->layers[2].mlp.down >= 0 &&
		    m->layers[0].moe.shared.down >= 0 && m->layers[0].moe.shared_gate >= 0 && m->layers[0].moe.renorm);
	assert_int_equal(m->layers[0].attn.dn.kernel, 4);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ck);
}

/* Qwen3.5 (the text model): Qwen3-Next's layers (4: the DeltaNet on 0 and
 * 2 of 2 key heads of 8 and 4 value heads of 8, gated attention on 1 and
 * 3) with the DeltaNet's projections four tensors over all heads
 * (in_proj_qkv [q | k | v], in_proj_z, in_proj_b, in_proj_a: the flat
 * layout), a dense MLP on every layer; transformers' interleaved mrope of
 * one text position is the plain partial rope. Its torch path computes in
 * float32 as Qwen3-Next's does: within 3e-5 of the logits' rms */
static void test_qwen3_5_record(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	tpc_ckpt ck, ex;
	record_set(tpc_family_find("qwen3_5"), "qwen3_5", &ck, &ex, &s, &f);
	assert_true(vs_worst(&s, &ex, "qwen3_5", 48, "qwen3_5") < 3e-5);
	tpc_ckpt_release(&ex);
	const tpc_vmodel *m = s.model;
	assert_true(m->delta && m->layers[0].attn.delta && m->layers[2].attn.delta && !m->layers[1].attn.delta &&
		    m->layers[0].attn.dn.flat && m->layers[1].attn.gated && m->layers[1].attn.rot_dims == 4);
	assert_true(!m->moe && m->layers[0].mlp.down >= 0 && m->layers[3].mlp.down >= 0);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ck);
}

/* Qwen3.5-MoE: the same layers, every one 4 experts (the softmax's top-2,
 * always renormalised: Qwen3_5MoeTopKRouter has no norm_topk_prob, and
 * the softmax of the top-2 logits is the same weights) beside a shared
 * expert with its sigmoid gate */
static void test_qwen3_5_moe_record(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	tpc_ckpt ck, ex;
	record_set(tpc_family_find("qwen3_5-moe"), "qwen3_5_moe", &ck, &ex, &s, &f);
	assert_true(vs_worst(&s, &ex, "qwen3_5_moe", 48, "qwen3_5-moe") < 3e-5);
	tpc_ckpt_release(&ex);
	const tpc_vmodel *m = s.model;
	assert_true(m->delta && m->layers[0].attn.dn.flat && m->layers[2].attn.dn.flat && m->layers[3].attn.gated);
	for (int l = 0; l < 4; l++)
		assert_true(m->layers[l].moe.exp && m->layers[l].moe.top_k == 2 && m->layers[l].moe.renorm &&
			    m->layers[l].moe.shared.down >= 0 && m->layers[l].moe.shared_gate >= 0);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ck);
}

/* Phi-3.5-MoE: LayerNorms with biases, q/k/v/o and lm_head biases, every
 * layer 4 experts under the sparsemixer router with config.json's
 * router_jitter_noise 0.25 (PhimoeForCausalLM, as transformers 5 saves it) */
static void test_phimoe_record(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	record_case_of(tpc_family_find("phimoe"), "phimoe", &f, &s);
	assert_true(f.router_jitter_said && f.router_jitter == 0.25);
	for (int l = 0; l < 2; l++) {
		const tpc_vmoe *mo = &s.model->layers[l].moe;
		assert_true(mo->exp && mo->sparsemixer && mo->top_k == 2 && mo->jitter == 0.25 && mo->nexp == 4 &&
			    s.model->layers[l].norm1_b >= 0 && s.model->layers[l].norm2_b >= 0);
	}
	tpc_verify_set_release(&s);
}

/* Cohere 2: one weight-only LayerNorm for the parallel attention and
 * SwiGLU, interleaved RoPE on the sliding layer only, logit_scale, a tied
 * head. Its rope is ERNIE 4.5's: interleaved pairs over the whole head */
static void test_cohere2_record(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	record_case_of(tpc_family_find("cohere2"), "cohere2", &f, &s);
	const tpc_vattn *a0 = &s.model->layers[0].attn;
	assert_true(a0->rope && a0->rope_pairs && a0->rot_dims == 0 && !s.model->layers[1].attn.rope);
	tpc_verify_set_release(&s);
}

/* Granite-MoE: Granite's multipliers around 4 experts stacked in
 * input_linear [4, 64, 32] ([gate | up] each) and output_linear [4, 32,
 * 32], routed by the softmax of the top-2 logits (renormalised, the
 * record's softmax_topk router: config.json names no norm_topk_prob) */
static void test_granitemoe_record(void **st)
{
	(void)st;
	record_case("granitemoe", "granitemoe");
}

/* Granite-MoE with a shared expert: shared_mlp's fused [gate | up] input and
 * its output added ungated to the routed experts' */
static void test_granitemoe_shared_record(void **st)
{
	(void)st;
	record_case("granitemoeshared", "granitemoe_shared");
}

/* Granite 4 (GraniteMoeHybrid): layer_types' Mamba-2 mixers (in_proj's z,
 * x, B, C, dt; the causal conv1d; the recurrence scanned token by token
 * against transformers' chunked SSD in float32 over chunks of 4 of the 10
 * tokens; the gated norm; D's skip) beside attention layers with RoPE
 * (position_embedding_type "rope"), the experts and shared MLP; and without
 * experts (the shared MLP alone), with in_proj and out_proj biases and
 * attention without positions. transformers' mixer runs in float32 inside
 * its float64 model: the logits agree to its rounding */
static void test_granitemoehybrid_record(void **st)
{
	(void)st;
	record_case("granitemoehybrid", "granitemoehybrid");
	record_case("granitemoehybrid", "granitemoehybrid_dense");
}

/* Granite's four multipliers as config.json's facts, no parts of their own:
 * LLaMA's record with them gives GraniteForCausalLM's logits (the embeddings
 * times embedding_multiplier, each sublayer's output times
 * residual_multiplier, the scores times attention_multiplier, the logits
 * divided by logits_scaling) */
/* gpt-oss: q/k/v/o biases, attention sinks, the yarn rope, a 4-token window
 * on layer 0 (layer_types), a router bias and the softmax of its top-2,
 * experts stacked [in, out] with gate and up interleaved and biases, the
 * clamped SwiGLU */
static void test_gpt_oss_record(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	record_case_of(tpc_family_find("gpt-oss"), "gpt_oss", &f, &s);
	const tpc_vlayer *l0 = &s.model->layers[0], *l1 = &s.model->layers[1];
	assert_true(l0->attn.window == 4 && l1->attn.window == 0 && l0->attn.sinks >= 0 && l0->attn.yarn.factor == 32);
	assert_true(l0->moe.router_bias >= 0 && l0->moe.top_k == 2 && l0->moe.renorm && l0->moe.exp[0].interleaved &&
		    l0->moe.exp[0].clamp == 7 && s.t[l0->moe.exp[0].gate_up].transposed && s.t[l0->moe.exp[0].gate_up].bias >= 0);
	tpc_verify_set_release(&s);
}

/* Llama 4 text: 4 layers, MoE on 1 and 3 (4 experts stacked [in, out],
 * gate_up_proj [gate | up], the top-2 logits' sigmoids on the experts'
 * inputs, a shared expert), dense MLPs on 0 and 2; layer 2 without RoPE
 * (no_rope_layers) and temperature-tuned (floor_scale 3, attn_scale 0.5),
 * the others with the L2 q/k norm and chunks of 4 tokens (layer_types'
 * chunked_attention); interleaved-pair rope with a llama3 scaling; q/k/v/o
 * biases */
static void test_llama4_record(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	record_case_of(tpc_family_find("llama4"), "llama4", &f, &s);
	assert_true(f.llama3.factor == 8 && f.llama3.orig_max == 256 && f.chunk_size == 4 && f.temp_floor == 3 &&
		    f.temp_scale_said && f.temp_scale == 0.5);
	for (int l = 0; l < 4; l++) {
		const tpc_vlayer *ly = &s.model->layers[l];
		bool rope = l != 2, moe = l % 2;
		assert_true(ly->attn.rope == rope && ly->attn.qk_l2 == rope && ly->attn.chunk == (rope ? 4 : 0) &&
			    ly->attn.temp_floor == (rope ? 0 : 3) && ly->attn.rope_pairs == rope);
		assert_true(!!ly->moe.exp == moe && (moe ? ly->mlp.down < 0 : ly->mlp.down >= 0));
		if (moe)
			assert_true(ly->moe.scale_input && ly->moe.sigmoid && !ly->moe.renorm && ly->moe.top_k == 2 &&
				    ly->moe.shared.down >= 0 && ly->moe.shared_gate < 0 && !ly->moe.exp[0].interleaved &&
				    s.t[ly->moe.exp[0].gate_up].transposed && s.t[ly->moe.exp[0].gate_up].nparts == 2);
	}
	tpc_verify_set_release(&s);
}

static void test_granite_facts(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	record_case_of(tpc_family_find("llama"), "granite", &f, &s);
	assert_true(f.embed_mul == 12 && f.resid_mul == 0.22 && f.attn_mul == 0.0625 && f.logit_div == 8);
	assert_true(s.model->embed_mul == 12 && s.model->resid_mul == 0.22 && s.model->logit_div == 8);
	assert_true(s.model->layers[0].attn.scale == 0.0625 && s.model->layers[1].attn.scale == 0.0625);
	tpc_verify_set_release(&s);
}

/* Layers without RoPE as config.json's facts: no_rope_layers [1, 0, 1, 1]
 * (and, with use_sliding_window, that layer's 4-token window from
 * layer_types) on LLaMA's record give SmolLM3ForCausalLM's logits */
static void test_rope_off_facts(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_verify_set s;
	tpc_ckpt ck, ex;
	tpc_err e;
	record_set(tpc_family_find("llama"), "smollm3", &ck, &ex, &s, &f);
	vs_transformers(&s, &ex, "smollm3", 48, "llama with no_rope_layers");
	assert_true(f.n_rope_listed == 4 && f.rope_off[0] == 2);
	for (int l = 0; l < 4; l++) {
		assert_int_equal(s.model->layers[l].attn.rope, l != 1);
		assert_int_equal(s.model->layers[l].attn.window, l == 1 ? 4 : 0);
	}
	/* a list shorter than the layers (transformers would index past it) */
	f.n_rope_listed = 3;
	tpc_err_init(&e);
	assert_int_equal(tpc_verify_model_from_names(&s, tpc_family_find("llama"), &f, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "no_rope_layers has 3 entries for 4 layers"));
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

/* SmolLM3: LLaMA's parts, config.json's no_rope_layers [1, 0, 1, 1] over
 * the record's default; without the list (nor an interval) the record's
 * every fourth layer without RoPE */
static void test_smollm3_record(void **st)
{
	(void)st;
	const tpc_family *fam = tpc_family_find("smollm3");
	tpc_model_facts f;
	tpc_verify_set s;
	tpc_ckpt ck, ex;
	tpc_err e;
	assert_true(fam && fam->parts.rope_off_every == 4);
	record_set(fam, "smollm3", &ck, &ex, &s, &f);
	vs_transformers(&s, &ex, "smollm3", 48, "smollm3");
	for (int l = 0; l < 4; l++)
		assert_int_equal(s.model->layers[l].attn.rope, l != 1);
	f.n_rope_listed = f.rope_off_every = 0;
	tpc_err_init(&e);
	assert_int_equal(tpc_verify_model_from_names(&s, fam, &f, &e), 0);
	for (int l = 0; l < 4; l++)
		assert_int_equal(s.model->layers[l].attn.rope, l != 3);
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

/* Seed-OSS: LLaMA's parts with q/k/v and o_proj biases, head_dim 16 (not
 * hidden / heads) */
static void test_seed_oss_record(void **st)
{
	(void)st;
	record_case("seed-oss", "seed_oss");
}

/* GLM-4: sandwich norms without 1 + w, a fused gate_up_proj, q/k/v biases,
 * half of each head rotated in interleaved pairs */
static void test_glm4_record(void **st)
{
	(void)st;
	record_case("glm4", "glm4");
}

/* ERNIE 4.5: LLaMA's parts with the rope on interleaved pairs, use_bias's
 * biases on every projection */
static void test_ernie4_5_record(void **st)
{
	(void)st;
	record_case("ernie4_5", "ernie4_5");
}

/* EXAONE 4: post norms, per-head q/k norms, a sliding layer with rope, a
 * global one without */
static void test_exaone4_record(void **st)
{
	(void)st;
	record_case("exaone4", "exaone4");
}

/* Global layers without rope in a model with a window (EXAONE 4's hybrid
 * NoPE): OLMo 3's record (its names are Exaone4's) with per-head q/k norms
 * and nope_global gives Exaone4ForCausalLM's logits (layer 0 slides over 4
 * tokens with rope, layer 1 attends globally without); the rope on layer 1
 * too gives others */
static void test_nope_global(void **st)
{
	(void)st;
	tpc_family fam = *tpc_family_find("olmo3");
	fam.parts.qk_norm = TPC_PART_QK_HEAD;
	fam.parts.nope_global = true;
	tpc_model_facts f;
	tpc_verify_set s;
	record_case_of(&fam, "exaone4", &f, &s);
	assert_true(f.sliding_window == 4);
	assert_true(s.model->layers[0].attn.rope && s.model->layers[0].attn.window == 4);
	assert_true(!s.model->layers[1].attn.rope && s.model->layers[1].attn.window == 0);
	tpc_verify_set_release(&s);
}

/* A rope on interleaved pairs over a fraction of each head, on the LLaMA
 * path: Phi-3's record (LLaMA's names, a fused gate_up_proj) with the
 * interleaved rope, partial rotary and attention biases gives
 * GlmForCausalLM's logits (half of each head rotated in pairs (x0, x1),
 * (x2, x3) ...; q/k/v biases); without partial_rotary_factor in config.json
 * such a record is refused */
static void test_rope_pairs_partial(void **st)
{
	(void)st;
	tpc_family fam = *tpc_family_find("phi3");
	fam.parts.rope = TPC_PART_ROPE_INTERLEAVED;
	fam.parts.partial_rope = fam.parts.attn_bias = true;
	fam.parts.rope_fraction = 0; /* Phi-3's default: the whole head */
	tpc_model_facts f;
	tpc_verify_set s;
	record_case_of(&fam, "glm", &f, &s);
	assert_true(f.rotary_pct == 0.5);
	assert_true(s.model->layers[0].attn.rope_pairs && s.model->layers[1].attn.rot_dims == 4);
	tpc_verify_set_release(&s);
	/* the same set without the fraction: refused naming it */
	tpc_ckpt ck, ex;
	tpc_err e;
	tpc_err_init(&e);
	record_set(&fam, "glm", &ck, &ex, &s, &f);
	f.rotary_pct = 0;
	assert_int_equal(tpc_verify_model_from_names(&s, &fam, &f, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "partial_rotary_factor"));
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

/* Parts no record had before Phi and Cohere 2, on records as theirs would
 * be (tables here, parts as the records'), tests/data/tiny_phi and
 * tiny_cohere2 (make_tiny_records.py): verify's forward gives transformers
 * 5.12's float64 logits. */
#define PR(R, B, NAME) {TPC_ROLE_##R, B, {NAME, NULL, NULL, NULL, NULL}, false, false, NULL}
static const tpc_tensor_row phi_rows[] = {
	PR(TOKEN_EMBD, false, "model.embed_tokens.weight"),
	PR(OUTPUT_NORM, true, "model.final_layernorm.weight"),
	PR(OUTPUT, true, "lm_head.weight"),
	PR(ATTN_NORM, true, "model.layers.{L}.input_layernorm.weight"),
	PR(ATTN_Q, true, "model.layers.{L}.self_attn.q_proj.weight"),
	PR(ATTN_K, true, "model.layers.{L}.self_attn.k_proj.weight"),
	PR(ATTN_V, true, "model.layers.{L}.self_attn.v_proj.weight"),
	PR(ATTN_OUT, true, "model.layers.{L}.self_attn.dense.weight"),
	PR(FFN_UP, true, "model.layers.{L}.mlp.fc1.weight"),
	PR(FFN_DOWN, true, "model.layers.{L}.mlp.fc2.weight"),
	{TPC_ROLE_NONE, false, {NULL, NULL, NULL, NULL, NULL}, false, false, NULL},
};
static const tpc_tensor_row cohere2_rows[] = {
	PR(TOKEN_EMBD, false, "model.embed_tokens.weight"),
	PR(OUTPUT_NORM, false, "model.norm.weight"),
	PR(OUTPUT, false, "lm_head.weight"),
	PR(ATTN_NORM, false, "model.layers.{L}.input_layernorm.weight"),
	PR(ATTN_Q, false, "model.layers.{L}.self_attn.q_proj.weight"),
	PR(ATTN_K, false, "model.layers.{L}.self_attn.k_proj.weight"),
	PR(ATTN_V, false, "model.layers.{L}.self_attn.v_proj.weight"),
	PR(ATTN_OUT, false, "model.layers.{L}.self_attn.o_proj.weight"),
	PR(FFN_GATE, false, "model.layers.{L}.mlp.gate_proj.weight"),
	PR(FFN_UP, false, "model.layers.{L}.mlp.up_proj.weight"),
	PR(FFN_DOWN, false, "model.layers.{L}.mlp.down_proj.weight"),
	{TPC_ROLE_NONE, false, {NULL, NULL, NULL, NULL, NULL}, false, false, NULL},
};
#undef PR

/* Phi: attention and MLP in parallel under one LayerNorm (resid
 * TPC_PART_PARALLEL_ONE_NORM), rotate-half RoPE on the first
 * partial_rotary_factor of each head (partial_rope: 4 of 8 dims), lm_head's
 * vocab bias; refused without partial_rotary_factor. */
static void test_parallel_one_norm(void **st)
{
	(void)st;
	const tpc_family phi = {.name = "phi", .tensors = phi_rows, .has_parts = true,
				.parts = {.norm = TPC_PART_LAYERNORM, .partial_rope = true, .attn_bias = true,
					  .mlp = TPC_PART_MLP_GELU_NEW, .resid = TPC_PART_PARALLEL_ONE_NORM}};
	tpc_model_facts f;
	tpc_verify_set s;
	tpc_ckpt ck, ex;
	tpc_err e;
	record_set(&phi, "phi", &ck, &ex, &s, &f);
	vs_transformers(&s, &ex, "phi", 48, "phi parts");
	const tpc_vlayer *l1 = &s.model->layers[1];
	assert_true(f.rotary_pct == 0.5 && l1->attn.rot_dims == 4 && !l1->attn.rope_pairs);
	assert_true(l1->norm1_w >= 0 && l1->norm2_w == l1->norm1_w && l1->norm1_b >= 0 && l1->norm2_b == l1->norm1_b);
	assert_true(s.model->head_bias >= 0 && s.model->final_norm_b >= 0);
	f.rotary_pct = 0;
	tpc_err_init(&e);
	assert_int_equal(tpc_verify_model_from_names(&s, &phi, &f, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "partial_rotary_factor"));
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

/* Cohere 2: the same parallel layer with a weight-only LayerNorm and a
 * SwiGLU; interleaved RoPE (rope TPC_PART_ROPE_INTERLEAVED) on the sliding
 * layer only (nope_global: EXAONE 4's part), the full layer without; the
 * logits times config.json's logit_scale (logit_scale); refused without it.
 * Without a window every layer rotates (nope_global's rule; Cohere2's class
 * would rotate none: Cohere 2's GGUF column requires the window) */
static void test_cohere2_parts(void **st)
{
	(void)st;
	const tpc_family co = {.name = "cohere2", .tensors = cohere2_rows, .has_parts = true,
			       .parts = {.norm = TPC_PART_LAYERNORM, .rope = TPC_PART_ROPE_INTERLEAVED,
					 .resid = TPC_PART_PARALLEL_ONE_NORM, .swa_every = 4, .nope_global = true,
					 .logit_scale = true, .tied_head = true}};
	tpc_model_facts f;
	tpc_verify_set s;
	tpc_ckpt ck, ex;
	tpc_err e;
	record_set(&co, "cohere2", &ck, &ex, &s, &f);
	vs_transformers(&s, &ex, "cohere2", 48, "cohere2 parts");
	const tpc_vattn *a0 = &s.model->layers[0].attn, *a1 = &s.model->layers[1].attn;
	assert_true(a0->rope && a0->rope_pairs && a0->window == 4 && !a1->rope && a1->window == 0);
	assert_true(s.model->logit_mul == 0.25 && s.model->lm_head < 0 && s.model->layers[0].norm1_b < 0);
	assert_true(tpc_family_find("cohere2")->parts.nope_global);
	f.sliding_window = 0;
	tpc_err_init(&e);
	assert_int_equal(tpc_verify_model_from_names(&s, &co, &f, &e), 0);
	assert_true(s.model->layers[0].attn.rope && s.model->layers[1].attn.rope && s.model->layers[1].attn.window == 0);
	f.sliding_window = 4;
	f.logit_mul = 0;
	assert_int_equal(tpc_verify_model_from_names(&s, &co, &f, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "logit_scale"));
	tpc_verify_set_release(&s);
	tpc_ckpt_release(&ex);
	tpc_ckpt_release(&ck);
}

int main(void)
{
	tpc_formats_register_all();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uniform),           cmocka_unit_test(test_coll_threads),
		cmocka_unit_test(test_matmul_stream),     cmocka_unit_test(test_tiny_llama_pass),
		cmocka_unit_test(test_tiny_llama_swapped), cmocka_unit_test(test_validate),
		cmocka_unit_test(test_dp_geometry),
		cmocka_unit_test(test_cuda_absent),       cmocka_unit_test(test_gpu_host),
		cmocka_unit_test(test_deepseek_yarn),     cmocka_unit_test(test_deepseek_plain),
		cmocka_unit_test(test_rope_freqs),        cmocka_unit_test(test_attn_sinks),
		cmocka_unit_test(test_clamped_glu),       cmocka_unit_test(test_llama4_attn_parts),
		cmocka_unit_test(test_rope_llama3),
		cmocka_unit_test(test_gpt_oss_record),
		cmocka_unit_test(test_neox_bert), cmocka_unit_test(test_moe_other_record), cmocka_unit_test(test_neox_bert_records),         cmocka_unit_test(test_olmo2_parts),
		cmocka_unit_test(test_gemma2_parts),      cmocka_unit_test(test_gemma3_parts),
		cmocka_unit_test(test_qwen3_moe_record), cmocka_unit_test(test_olmoe_record),
		cmocka_unit_test(test_starcoder2_record),  cmocka_unit_test(test_granite_facts),
		cmocka_unit_test(test_granite_record),     cmocka_unit_test(test_rope_off_facts),
		cmocka_unit_test(test_smollm3_record),     cmocka_unit_test(test_seed_oss_record),
		cmocka_unit_test(test_rope_pairs_partial), cmocka_unit_test(test_glm4_record),
		cmocka_unit_test(test_ernie4_5_record),    cmocka_unit_test(test_nope_global),
		cmocka_unit_test(test_exaone4_record),     cmocka_unit_test(test_parallel_one_norm),
		cmocka_unit_test(test_cohere2_parts),      cmocka_unit_test(test_phi_record),
		cmocka_unit_test(test_cohere2_record),     cmocka_unit_test(test_granitemoe_record),
		cmocka_unit_test(test_granitemoe_shared_record), cmocka_unit_test(test_granitemoehybrid_record),
		cmocka_unit_test(test_nextn_layers_left_out),
		cmocka_unit_test(test_glm4_moe_record),   cmocka_unit_test(test_sparsemixer),
		cmocka_unit_test(test_phimoe_record),      cmocka_unit_test(test_qk_after_rope),
		cmocka_unit_test(test_hunyuan_moe_record), cmocka_unit_test(test_hunyuan_moe_dynamic_rope),
		cmocka_unit_test(test_hunyuan_dense_record),
		cmocka_unit_test(test_phi3_longrope),
		cmocka_unit_test(test_ernie4_5_moe_record),
		cmocka_unit_test(test_llama4_record),
		cmocka_unit_test(test_qwen3_next_record),
		cmocka_unit_test(test_qwen3_5_record),
		cmocka_unit_test(test_qwen3_5_moe_record),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
