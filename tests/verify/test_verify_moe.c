/* test_verify_moe.c - families with experts (and the hybrid linear-attention
 * ones beside them: Qwen3-Next's and Qwen3.5's DeltaNet, Granite 4's Mamba-2)
 * added as records alone: routers, shared experts, stacked and fused expert
 * tensors, next-token-prediction layers left out; verify's reference forward
 * against transformers' logits (verify_test.h's record helpers). */
#include <math.h>

#include "verify_test.h"

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

int main(void)
{
	tpc_formats_register_all();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpt_oss_record),
		cmocka_unit_test(test_moe_other_record),
		cmocka_unit_test(test_qwen3_moe_record),
		cmocka_unit_test(test_olmoe_record),
		cmocka_unit_test(test_granitemoe_record),
		cmocka_unit_test(test_granitemoe_shared_record),
		cmocka_unit_test(test_granitemoehybrid_record),
		cmocka_unit_test(test_nextn_layers_left_out),
		cmocka_unit_test(test_glm4_moe_record),
		cmocka_unit_test(test_phimoe_record),
		cmocka_unit_test(test_qk_after_rope),
		cmocka_unit_test(test_hunyuan_moe_record),
		cmocka_unit_test(test_hunyuan_moe_dynamic_rope),
		cmocka_unit_test(test_ernie4_5_moe_record),
		cmocka_unit_test(test_llama4_record),
		cmocka_unit_test(test_qwen3_next_record),
		cmocka_unit_test(test_qwen3_5_record),
		cmocka_unit_test(test_qwen3_5_moe_record),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
