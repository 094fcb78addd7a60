/* test_verify_forward.c - the model check's fp64 reference forward against
 * real transformers' logits on sets split here by name (DeepSeek-V3's MLA
 * and MoE, GPT-NeoX, BERT) and on records whose tables and parts are written
 * here (OLMo 2, Gemma 2 and 3, Phi's and Cohere 2's parallel layers). */
#include <math.h>

#include "verify_test.h"

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
		cmocka_unit_test(test_deepseek_yarn),
		cmocka_unit_test(test_deepseek_plain),
		cmocka_unit_test(test_neox_bert),
		cmocka_unit_test(test_neox_bert_records),
		cmocka_unit_test(test_olmo2_parts),
		cmocka_unit_test(test_gemma2_parts),
		cmocka_unit_test(test_gemma3_parts),
		cmocka_unit_test(test_parallel_one_norm),
		cmocka_unit_test(test_cohere2_parts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
