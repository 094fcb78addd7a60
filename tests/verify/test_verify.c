/* test_verify.c - unit tests of verify/'s checks: seeded inputs, the
 * threads collectives, the streamed matmul, the checks on a hand-split tiny
 * LLaMA (correct and broken), the description's validation, the reports, and
 * the GPU module's host logic (no GPU needed). The reference forward's
 * kernels, its models against transformers and the family records are in
 * test_verify_kernels.c, test_verify_forward.c, test_verify_records.c and
 * test_verify_moe.c. */
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

int main(void)
{
	tpc_formats_register_all();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uniform),
		cmocka_unit_test(test_coll_threads),
		cmocka_unit_test(test_matmul_stream),
		cmocka_unit_test(test_tiny_llama_pass),
		cmocka_unit_test(test_tiny_llama_swapped),
		cmocka_unit_test(test_validate),
		cmocka_unit_test(test_dp_geometry),
		cmocka_unit_test(test_cuda_absent),
		cmocka_unit_test(test_gpu_host),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
