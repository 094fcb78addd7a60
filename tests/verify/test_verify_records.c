/* test_verify_records.c - dense families added as records alone
 * (lib/tpc_family.c) and the config.json facts their forward reads (rope
 * variants: partial, interleaved pairs, layers without it, Phi-3's longrope;
 * Granite's multipliers): verify's reference forward against transformers'
 * logits (verify_test.h's record helpers). */
#include <math.h>

#include "verify_test.h"

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

/* Granite's four multipliers as config.json's facts, no parts of their own:
 * LLaMA's record with them gives GraniteForCausalLM's logits (the embeddings
 * times embedding_multiplier, each sublayer's output times
 * residual_multiplier, the scores times attention_multiplier, the logits
 * divided by logits_scaling) */
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

int main(void)
{
	tpc_formats_register_all();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_starcoder2_record),
		cmocka_unit_test(test_granite_facts),
		cmocka_unit_test(test_granite_record),
		cmocka_unit_test(test_rope_off_facts),
		cmocka_unit_test(test_smollm3_record),
		cmocka_unit_test(test_seed_oss_record),
		cmocka_unit_test(test_rope_pairs_partial),
		cmocka_unit_test(test_glm4_record),
		cmocka_unit_test(test_ernie4_5_record),
		cmocka_unit_test(test_nope_global),
		cmocka_unit_test(test_exaone4_record),
		cmocka_unit_test(test_phi_record),
		cmocka_unit_test(test_cohere2_record),
		cmocka_unit_test(test_hunyuan_dense_record),
		cmocka_unit_test(test_phi3_longrope),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
