/*
 * test_gguf_mix.c - formats/gguf/gguf_quant.c's choice of tensor types for
 * a llama-quantize file type, on tensor lists without data, against what
 * llama-quantize 0.7 was seen to do (doc: QUANT-ADAPTERS-TRAINING.md 2.4 and
 * 2.5, [V]): a 10-layer LLaMA's q4_k_m gives Q6_K to attn_v and ffn_down of
 * layers 0, 3, 6, 8, 9, a 3-layer one to layer 2 only; hidden 640 falls back
 * to Q5_0, Q8_0 where Q6_K was chosen; the order is the loader's (blk.10
 * after blk.9), norms and 1-D tensors keep their type, the file-type keys
 * go last. The whole-file comparisons are tests/gguf/qmix_test.sh.
 */
#include "test_util.h"

#include "gguf.h"
#include "tpc_ggml.h"

#define MAXT 700

typedef struct list {
	tpc_gguf_wtensor t[MAXT];
	int64_t shape[MAXT][2];
	size_t n;
} list;

static void add(list *l, const char *name, int64_t rows, int64_t cols)
{
	tpc_gguf_wtensor *w = &l->t[l->n];
	memset(w, 0, sizeof(*w));
	assert_true(l->n < MAXT);
	w->name = strdup(name);
	l->shape[l->n][0] = rows;
	l->shape[l->n][1] = cols;
	w->t.ndim = rows ? 2 : 1;
	w->t.shape = rows ? l->shape[l->n] : &l->shape[l->n][1];
	w->t.numel = (uint64_t)(rows ? rows : 1) * (uint64_t)cols;
	w->type = TPC_GGML_F32;
	l->n++;
}

/* A LLaMA-shaped model of GGUF architecture `arch`, kvh KV heads of 8 */
static void model_of(list *l, const char *arch, int layers, int64_t hidden, int kvh, tpc_gguf_kvs *kv)
{
	char name[64];
	l->n = 0;
	add(l, "token_embd.weight", 320, hidden);
	for (int i = 0; i < layers; i++) {
		static const char *const mats[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
		for (size_t k = 0; k < 7; k++) {
			snprintf(name, sizeof(name), "blk.%d.%s.weight", i, mats[k]);
			add(l, name, hidden, hidden);
		}
		snprintf(name, sizeof(name), "blk.%d.attn_norm.weight", i);
		add(l, name, 0, hidden);
	}
	add(l, "output_norm.weight", 0, hidden);
	add(l, "output.weight", 320, hidden);
	memset(kv, 0, sizeof(*kv));
	assert_int_equal(tpc_gguf_kvs_str(kv, "general.architecture", arch, strlen(arch)), 0);
	assert_int_equal(tpc_gguf_kvs_uint(kv, "general.file_type", TPC_GV_U32, 0), 0);
	assert_int_equal(tpc_gguf_kvs_uint(kv, "general.quantization_version", TPC_GV_U32, 2), 0);
	snprintf(name, sizeof(name), "%s.block_count", arch);
	assert_int_equal(tpc_gguf_kvs_uint(kv, name, TPC_GV_U32, (uint64_t)layers), 0);
	snprintf(name, sizeof(name), "%s.attention.head_count", arch);
	assert_int_equal(tpc_gguf_kvs_uint(kv, name, TPC_GV_U32, 8), 0);
	snprintf(name, sizeof(name), "%s.attention.head_count_kv", arch);
	assert_int_equal(tpc_gguf_kvs_uint(kv, name, TPC_GV_U32, (uint64_t)kvh), 0);
	assert_int_equal(tpc_gguf_kvs_str(kv, "general.name", "x", 1), 0);
}

static void llama(list *l, int layers, int64_t hidden, tpc_gguf_kvs *kv)
{
	model_of(l, "llama", layers, hidden, 8, kv);
}

static void release(list *l, tpc_gguf_kvs *kv)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->t[i].name);
	tpc_gguf_kvs_release(kv);
}

static int type_of(const list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->t[i].name, name))
			return l->t[i].type;
	fail_msg("no tensor %s", name);
	return -1;
}

/* the layers whose attn_v and ffn_down are `boosted`, the others `base` */
static void check_boost(const list *l, int layers, const char *which, int boosted, int base)
{
	char name[64];
	for (int i = 0; i < layers; i++)
		for (int k = 0; k < 2; k++) {
			snprintf(name, sizeof(name), "blk.%d.%s.weight", i, k ? "ffn_down" : "attn_v");
			int want = strchr(which, '0' + i) ? boosted : base;
			if (type_of(l, name) != want)
				fail_msg("%s: %s, want %s", name, tpc_ggml_info_of(type_of(l, name))->name,
					 tpc_ggml_info_of(want)->name);
		}
}

static void test_q4_k_m_layers(void **st)
{
	(void)st;
	static list l;
	tpc_gguf_kvs kv;
	tpc_err e = {0};
	llama(&l, 10, 256, &kv);
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("q4_k_m"), &kv, l.t, l.n, &e), 0);
	check_boost(&l, 10, "03689", TPC_GGML_Q6_K, TPC_GGML_Q4_K);
	assert_int_equal(type_of(&l, "blk.4.attn_q.weight"), TPC_GGML_Q4_K);
	assert_int_equal(type_of(&l, "output.weight"), TPC_GGML_Q6_K);
	assert_int_equal(type_of(&l, "token_embd.weight"), TPC_GGML_Q4_K);
	assert_int_equal(type_of(&l, "blk.3.attn_norm.weight"), TPC_GGML_F32);
	/* the loader's order: non-layer tensors by name, then blk.0 ... blk.9 (not blk.1, blk.10 ...) */
	assert_string_equal(l.t[0].name, "output.weight");
	assert_string_equal(l.t[1].name, "output_norm.weight");
	assert_string_equal(l.t[2].name, "token_embd.weight");
	assert_string_equal(l.t[3].name, "blk.0.attn_k.weight");
	assert_string_equal(l.t[l.n - 1].name, "blk.9.ffn_up.weight");
	/* the file-type keys last, quantization_version then file_type = 15 */
	assert_string_equal(kv.kv[kv.n - 2].key, "general.quantization_version");
	assert_string_equal(kv.kv[kv.n - 1].key, "general.file_type");
	assert_int_equal(kv.kv[kv.n - 1].v.u, 15);
	release(&l, &kv);

	llama(&l, 3, 256, &kv);
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("Q4_K"), &kv, l.t, l.n, &e), 0);
	check_boost(&l, 3, "2", TPC_GGML_Q6_K, TPC_GGML_Q4_K);
	release(&l, &kv);
}

/* gguf_quant.c's arch_rules: an 80-layer "llama" with fewer KV heads than
 * heads (LLaMA-2 70B) and an 80-layer "qwen2" are LLM_TYPE_70B, whose
 * q3_k_m attn_v goes Q4_K -> Q5_K; an 80-layer llama without GQA (65B) is
 * not; Falcon's output is Q8_0 where the others' is Q6_K */
static void test_arch_rules(void **st)
{
	(void)st;
	static list l;
	tpc_gguf_kvs kv;
	tpc_err e = {0};
	static const struct {
		const char *arch;
		int kvh, attn_v;
	} cases[] = {{"llama", 2, TPC_GGML_Q5_K}, {"llama", 8, TPC_GGML_Q4_K}, {"qwen2", 8, TPC_GGML_Q5_K}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		model_of(&l, cases[i].arch, 80, 256, cases[i].kvh, &kv);
		assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("q3_k_m"), &kv, l.t, l.n, &e), 0);
		assert_int_equal(type_of(&l, "blk.0.attn_v.weight"), TPC_GGML_Q5_K); /* V_LT2: layers 0, 1 */
		assert_int_equal(type_of(&l, "blk.40.attn_v.weight"), cases[i].attn_v);
		release(&l, &kv);
	}
	model_of(&l, "falcon", 4, 256, 8, &kv);
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("q4_k_m"), &kv, l.t, l.n, &e), 0);
	assert_int_equal(type_of(&l, "output.weight"), TPC_GGML_Q8_0);
	release(&l, &kv);
	llama(&l, 4, 256, &kv);
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("q4_k_m"), &kv, l.t, l.n, &e), 0);
	assert_int_equal(type_of(&l, "output.weight"), TPC_GGML_Q6_K);
	release(&l, &kv);
}

static void test_fallback(void **st)
{
	(void)st;
	static list l;
	tpc_gguf_kvs kv;
	tpc_err e = {0};
	llama(&l, 10, 640, &kv); /* 640 = 2.5 K blocks: Q4_K -> Q5_0, Q6_K -> Q8_0 */
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("q4_k_m"), &kv, l.t, l.n, &e), 0);
	check_boost(&l, 10, "03689", TPC_GGML_Q8_0, TPC_GGML_Q5_0);
	assert_int_equal(type_of(&l, "output.weight"), TPC_GGML_Q8_0);
	release(&l, &kv);
	llama(&l, 2, 48, &kv); /* 48: not whole 32-blocks either -> F16 */
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("q3_k_m"), &kv, l.t, l.n, &e), 0);
	assert_int_equal(type_of(&l, "blk.0.attn_q.weight"), TPC_GGML_F16);
	release(&l, &kv);
}

/* q8_0 of a GGUF input: llama-quantize's Q8_0 file type (not a mixture
 * name: a Hugging Face model's q8_0 is the converter's); the output keeps
 * Q8_0 (llama_tensor_get_type_impl: Q6_K only for a default other than
 * Q8_0), norms their type, rows of 48 F16 (iq4_nl and q4_0 too, as llama.cpp
 * 0.7 writes them), general.file_type 7 */
static void test_requant_q8_0(void **st)
{
	(void)st;
	static list l;
	tpc_gguf_kvs kv;
	tpc_err e = {0};
	assert_null(tpc_gguf_mix_by_name("q8_0"));
	const tpc_gguf_mix *q8 = tpc_gguf_requant_by_name("Q8_0");
	assert_non_null(q8);
	assert_int_equal(q8->ftype, 7);
	assert_ptr_equal(tpc_gguf_requant_by_name("q4_k_m"), tpc_gguf_mix_by_name("q4_k_m"));
	assert_null(tpc_gguf_requant_by_name("q2_k_s"));
	llama(&l, 10, 256, &kv);
	assert_int_equal(tpc_gguf_mix_apply(q8, &kv, l.t, l.n, &e), 0);
	check_boost(&l, 10, "", TPC_GGML_Q8_0, TPC_GGML_Q8_0);
	assert_int_equal(type_of(&l, "output.weight"), TPC_GGML_Q8_0);
	assert_int_equal(type_of(&l, "token_embd.weight"), TPC_GGML_Q8_0);
	assert_int_equal(type_of(&l, "blk.0.attn_norm.weight"), TPC_GGML_F32);
	ptrdiff_t ft = tpc_gguf_kvs_find(&kv, "general.file_type");
	assert_true(ft >= 0 && kv.kv[ft].v.u == 7);
	release(&l, &kv);
	static const char *const odd[] = {"q8_0", "iq4_nl", "q4_0"};
	for (size_t i = 0; i < 3; i++) {
		llama(&l, 2, 48, &kv);
		assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_requant_by_name(odd[i]), &kv, l.t, l.n, &e), 0);
		assert_int_equal(type_of(&l, "blk.1.ffn_down.weight"), TPC_GGML_F16);
		assert_int_equal(type_of(&l, "output.weight"), TPC_GGML_F16);
		release(&l, &kv);
	}
}

/* q3_k_m: the first two attn_v Q5_K then Q4_K, attn_output Q4_K, ffn_down
 * Q4_K (layers below n/16 Q5_K); q2_k: attn_v Q3_K under n_gqa 1, Q4_K at 4 */
static void test_mixtures(void **st)
{
	(void)st;
	static list l;
	tpc_gguf_kvs kv;
	tpc_err e = {0};
	llama(&l, 32, 256, &kv);
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("q3_k_m"), &kv, l.t, l.n, &e), 0);
	assert_int_equal(type_of(&l, "blk.1.attn_v.weight"), TPC_GGML_Q5_K);
	assert_int_equal(type_of(&l, "blk.2.attn_v.weight"), TPC_GGML_Q4_K);
	assert_int_equal(type_of(&l, "blk.1.ffn_down.weight"), TPC_GGML_Q5_K);
	assert_int_equal(type_of(&l, "blk.2.ffn_down.weight"), TPC_GGML_Q4_K);
	assert_int_equal(type_of(&l, "blk.5.attn_output.weight"), TPC_GGML_Q4_K);
	assert_int_equal(type_of(&l, "blk.5.attn_q.weight"), TPC_GGML_Q3_K);
	release(&l, &kv);
	llama(&l, 2, 256, &kv);
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("q2_k"), &kv, l.t, l.n, &e), 0);
	assert_int_equal(type_of(&l, "blk.0.attn_v.weight"), TPC_GGML_Q3_K);
	assert_int_equal(type_of(&l, "blk.0.ffn_down.weight"), TPC_GGML_Q3_K);
	release(&l, &kv);
	llama(&l, 2, 256, &kv);
	assert_int_equal(tpc_gguf_kvs_uint(&kv, "llama.attention.head_count_kv", TPC_GV_U32, 2), 0);
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("q2_k"), &kv, l.t, l.n, &e), 0);
	assert_int_equal(type_of(&l, "blk.0.attn_v.weight"), TPC_GGML_Q4_K);
	release(&l, &kv);
	assert_null(tpc_gguf_mix_by_name("q2_k_s"));
	assert_null(tpc_gguf_mix_by_name("iq3_s"));
	assert_null(tpc_gguf_mix_by_name("q8_0")); /* convert_hf_to_gguf.py's, not a mixture */
}

/* the IQ4 and ternary file types' rows: iq4_nl / iq4_xs give attn_v Q5_K
 * with 4 or more heads a KV head, ffn_down Q5_K in the first eighth of the
 * layers (no importance matrix); tq1_0 / tq2_0 an untied token_embd Q4_K;
 * rows of 32 fall back IQ4_XS -> IQ4_NL, TQ1_0 -> Q4_0 */
static void test_iq4_tq(void **st)
{
	(void)st;
	static list l;
	tpc_gguf_kvs kv;
	tpc_err e = {0};
	llama(&l, 8, 256, &kv);
	assert_int_equal(tpc_gguf_kvs_uint(&kv, "llama.attention.head_count_kv", TPC_GV_U32, 2), 0);
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("iq4_xs"), &kv, l.t, l.n, &e), 0);
	for (int i = 0; i < 8; i++) {
		char name[64];
		snprintf(name, sizeof(name), "blk.%d.attn_v.weight", i);
		assert_int_equal(type_of(&l, name), TPC_GGML_Q5_K);
		snprintf(name, sizeof(name), "blk.%d.ffn_down.weight", i);
		assert_int_equal(type_of(&l, name), i < 1 ? TPC_GGML_Q5_K : TPC_GGML_IQ4_XS);
	}
	assert_int_equal(type_of(&l, "token_embd.weight"), TPC_GGML_IQ4_XS);
	assert_int_equal(type_of(&l, "output.weight"), TPC_GGML_Q6_K);
	release(&l, &kv);
	llama(&l, 8, 256, &kv);
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("IQ4_NL"), &kv, l.t, l.n, &e), 0);
	assert_int_equal(type_of(&l, "blk.0.attn_v.weight"), TPC_GGML_IQ4_NL); /* one KV head a head */
	assert_int_equal(type_of(&l, "blk.0.ffn_down.weight"), TPC_GGML_Q5_K);
	assert_int_equal(type_of(&l, "blk.1.ffn_down.weight"), TPC_GGML_IQ4_NL);
	release(&l, &kv);
	llama(&l, 2, 256, &kv);
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("tq1_0"), &kv, l.t, l.n, &e), 0);
	assert_int_equal(type_of(&l, "token_embd.weight"), TPC_GGML_Q4_K);
	assert_int_equal(type_of(&l, "blk.1.ffn_down.weight"), TPC_GGML_TQ1_0);
	assert_int_equal(type_of(&l, "output.weight"), TPC_GGML_Q6_K);
	release(&l, &kv);
	llama(&l, 2, 32, &kv);
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("tq2_0"), &kv, l.t, l.n, &e), 0);
	assert_int_equal(type_of(&l, "blk.1.attn_q.weight"), TPC_GGML_Q4_0);
	assert_int_equal(type_of(&l, "output.weight"), TPC_GGML_Q8_0);
	release(&l, &kv);
	llama(&l, 2, 32, &kv);
	assert_int_equal(tpc_gguf_mix_apply(tpc_gguf_mix_by_name("iq4_xs"), &kv, l.t, l.n, &e), 0);
	assert_int_equal(type_of(&l, "blk.1.attn_q.weight"), TPC_GGML_IQ4_NL);
	release(&l, &kv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_q4_k_m_layers),
		cmocka_unit_test(test_arch_rules),
		cmocka_unit_test(test_fallback),
		cmocka_unit_test(test_mixtures),
		cmocka_unit_test(test_iq4_tq),
		cmocka_unit_test(test_requant_q8_0),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
