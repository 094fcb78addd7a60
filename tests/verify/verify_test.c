/* verify_test.c - the helpers verify_test.h declares, shared by the
 * test_verify*.c binaries. */
#include <math.h>

#include "verify_test.h"

#include "tpc_util.h"

void tiny_open(const char *file, const char *out, tpc_ckpt *ck, tpc_ckpt *ex, tpc_verify_set *s, tpc_err *e)
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

double vs_worst(const tpc_verify_set *s, tpc_ckpt *ex, const char *key, int64_t W, const char *what)
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

void vs_transformers(const tpc_verify_set *s, tpc_ckpt *ex, const char *key, int64_t W, const char *what)
{
	assert_true(vs_worst(s, ex, key, W, what) < 1e-5);
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

void add_as_plan(const tpc_family *fam, tpc_ckpt *ck, tpc_verify_set *s)
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

void record_set_of(const tpc_family *fam, const char *file, const char *cfg, const char *out, tpc_ckpt *ck,
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

void record_set(const tpc_family *fam, const char *file, tpc_ckpt *ck, tpc_ckpt *ex, tpc_verify_set *s,
		tpc_model_facts *f)
{
	record_set_of(fam, file, file, "tiny_records_out.safetensors", ck, ex, s, f);
}

void record_case_of(const tpc_family *fam, const char *file, tpc_model_facts *fp, tpc_verify_set *sp)
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

void record_case(const char *fam, const char *file)
{
	tpc_model_facts f;
	record_case_of(tpc_family_find(fam), file, &f, NULL);
}
