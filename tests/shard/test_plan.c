/* test_plan.c - shard/tpc_plan: plan parsing (bad plans first), model facts,
 * split resolution (col, row, vocab, dim, fused parts, heads, KV replication,
 * padding, ambiguity), pipeline stages, and a seeded mutation run over
 * tpc_plan_from_buffer. */
#include "test_util.h"

#include <cjson/cJSON.h>
#include <time.h>

#include "tpc_ckpt.h"
#include "tpc_extras.h"
#include "tpc_family.h"
#include "tpc_family_gguf.h"
#include "tpc_cfg.h"
#include "tpc_layout.h"
#include "tpc_plan.h"
#include "tpc_regex.h"
#include "tpc_rules.h"
#include "tpc_shard.h"

static int parse(tpc_plan *p, const char *json, tpc_err *e)
{
	tpc_err_init(e);
	return tpc_plan_from_buffer(p, json, strlen(json), "test.json", e);
}

static void test_bad_plans(void **st)
{
	(void)st;
	static const struct {
		const char *json, *msg;
	} cases[] = {
		{"[]", "plan is not a JSON object"},
		{"{\"rules\": 3}", "\"rules\" (an array) is required"},
		{"{}", "\"rules\" (an array) is required"},
		{"{\"rules\": [], \"rules\": []}", "duplicate member \"rules\""},
		{"{\"rulez\": []}", "unknown member \"rulez\""},
		{"{\"rules\": [{\"split\": \"col\"}]}", "\"match\" (a regular expression) is required"},
		{"{\"rules\": [{\"match\": \"x\"}]}", "\"split\" is required"},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"diagonal\"}]}", "unknown split 'diagonal'"},
		{"{\"rules\": [{\"match\": \"(\", \"split\": \"col\"}]}", "bad regular expression '('"},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"dim\"}]}", "split \"dim\" needs \"dim\": N"},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"parts\": 0}]}", "\"parts\" must be 1 to 16"},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"parts\": [1, \"v\"]}]}", "part 1 must be a size, \"q\", \"kv\", \"lin_k\", \"lin_v\", \"ssm\", \"ssm_dt\", \"ssm_groups\" or \"rest\""},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"heads\": \"k\"}]}", "\"heads\" must be \"q\", \"kv\", \"lin_k\" or \"lin_v\""},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"replicate\", \"parts\": 2}]}", "has no parts or heads"},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"pad_multiple\": 8}]}", "\"pad_multiple\" is for vocab splits"},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"head_block\": 3}]}", "\"head_block\" needs \"heads\""},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"parts\": [\"q\"], \"heads\": \"q\"}]}", "give heads per part"},
		{"{\"rules\": [], \"fallback\": \"ignore\"}", "\"fallback\" must be \"replicate\" or \"error\""},
		{"{\"rules\": [], \"model\": {\"heads\": -1}}", "model fact \"heads\" must be a positive integer"},
		{"{\"rules\": [], \"model\": {\"layerz\": 1}}", "unknown model fact \"layerz\""},
		{"{\"rules\": [], \"layers\": [\"[\"]}", "bad regular expression '['"},
		/* the dialect rules files use (lib/tpc_regex.h): refused by name, not misread */
		{"{\"rules\": [{\"match\": \"(?i)x\", \"split\": \"col\"}]}", "(?...) groups and lookaround are not POSIX"},
		{"{\"rules\": [{\"match\": \"x+?\", \"split\": \"col\"}]}", "lazy quantifiers"},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"dim\": 1.5}]}", "\"dim\" must be an integer"},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"stacked\": 1}]}", "\"stacked\" must be true or false"},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"vocab\", \"stacked\": true}]}", "\"stacked\" experts are not a vocabulary"},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"heads\": \"q\", \"unit\": 2}]}", "\"unit\" is for a col"},
		{"{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"unit\": 0}]}", "\"unit\" must be an integer from 1 to 64"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tpc_plan p;
		tpc_err e;
		int r = parse(&p, cases[i].json, &e);
		if (r != TPC_EINPUT || !strstr(e.msg, cases[i].msg))
			fail_msg("case %zu (%s): got %d '%s', wanted '%s'", i, cases[i].json, r, e.msg, cases[i].msg);
		assert_string_equal(e.path, "test.json");
		tpc_plan_release(&p); /* released and zeroed on failure: a second release is harmless */
	}
}

/* Every family record is whole: a plan that names the family, a verify
 * architecture verify knows, rules presets that exist, and a tensor table
 * whose names are unique, match themselves and come back by tpc_family_name. */
static void test_families(void **st)
{
	(void)st;
	for (size_t i = 0; i < tpc_family_count(); i++) {
		const tpc_family *f = tpc_family_at(i);
		assert_ptr_equal(tpc_family_find(f->name), f);
		assert_non_null(f->desc);
		assert_non_null(strstr(f->plan, f->name));
		/* a decoder's parts are found through its table */
		if (f->has_parts && f->parts.model == TPC_PART_DECODER && f->parts.qkv != TPC_PART_QKV_PER_HEAD)
			assert_non_null(tpc_family_row(f, TPC_ROLE_ATTN_OUT));
		for (size_t k = 0; f->rules && f->rules[k]; k++)
			assert_non_null(tpc_rules_preset_text(f->rules[k]));
		for (size_t k = 0; f->hf_arch && f->hf_arch[k]; k++)
			assert_non_null(tpc_family_by_arch(f->hf_arch[k]));
		for (const tpc_tensor_row *w = f->tensors; w && w->role; w++) {
			assert_non_null(w->name[TPC_ECO_HF]);
			for (int eco = 0; eco < TPC_ECO_COUNT; eco++) {
				char nm[256];
				int part;
				if (!w->name[eco])
					continue;
				for (int b = 0; b <= (int)w->bias; b++) {
					int64_t l = -1, x = -1;
					bool bias = !b;
					assert_true(tpc_family_name(w, (tpc_eco)eco, 12, 3, b, nm, sizeof(nm), &part));
					assert_null(strchr(nm, '{'));
					assert_null(strchr(nm, '#'));
					assert_true(tpc_family_match(w->name[eco], nm, w->bias, &l, &x, &bias));
					assert_int_equal(bias, b);
					assert_true(strstr(w->name[eco], "{L}") ? l == 12 : l == -1);
					assert_true(strstr(w->name[eco], "{E}") ? x == 3 : x == -1);
					assert_int_equal(part >= 0, strchr(w->name[eco], '#') != NULL);
				}
				/* the HF names tell rows apart (other ecosystems fuse some), but
				 * for the parts of a tensor the checkpoint fuses itself
				 * ("#K"), which classify as part 0's row */
				if (eco == TPC_ECO_HF) {
					const tpc_tensor_row *pr[TPC_ROLE_COUNT];
					int np = tpc_family_parts(f, w, TPC_ECO_HF, pr, TPC_ROLE_COUNT);
					assert_true(np == 0 || np >= 2);
					assert_true(tpc_family_name(w, TPC_ECO_HF, 7, 5, false, nm, sizeof(nm), NULL));
					assert_ptr_equal(tpc_family_classify(f, TPC_ECO_HF, nm, NULL, NULL, NULL), np ? pr[0] : w);
				}
			}
		}
	}
	const tpc_family *q3 = tpc_family_find("qwen3");
	assert_non_null(q3);
	assert_ptr_equal(tpc_family_by_arch("Qwen3ForCausalLM"), q3);
	assert_true(q3->has_parts && q3->parts.qk_norm == TPC_PART_QK_HEAD);
	int64_t l, x;
	bool b;
	const tpc_tensor_row *w = tpc_family_classify(q3, TPC_ECO_HF, "model.layers.31.self_attn.k_norm.weight", &l, &x, &b);
	assert_non_null(w);
	assert_int_equal(w->role, TPC_ROLE_ATTN_K_NORM);
	assert_int_equal(l, 31);
	char nm[128];
	int part;
	assert_true(tpc_family_name(w, TPC_ECO_GGUF, l, -1, false, nm, sizeof(nm), &part));
	assert_string_equal(nm, "blk.31.attn_k_norm.weight");
	/* fused: vLLM's qkv_proj holds v_proj as part 2, biases too */
	w = tpc_family_classify(q3, TPC_ECO_HF, "model.layers.0.self_attn.v_proj.bias", &l, &x, &b);
	assert_non_null(w);
	assert_true(b);
	assert_true(tpc_family_name(w, TPC_ECO_VLLM, l, -1, true, nm, sizeof(nm), &part));
	assert_string_equal(nm, "model.layers.0.self_attn.qkv_proj.bias");
	assert_int_equal(part, 2);
	/* no bias where the family has none, no leading zeros, no stray text */
	assert_null(tpc_family_classify(q3, TPC_ECO_HF, "model.layers.0.mlp.down_proj.bias", NULL, NULL, NULL));
	assert_null(tpc_family_classify(q3, TPC_ECO_HF, "model.layers.01.mlp.down_proj.weight", NULL, NULL, NULL));
	assert_null(tpc_family_classify(q3, TPC_ECO_HF, "model.layers.1.mlp.down_proj.weights", NULL, NULL, NULL));
	assert_null(tpc_family_classify(q3, TPC_ECO_HF, "model.layers..mlp.down_proj.weight", NULL, NULL, NULL));
	/* Mixtral's experts are stacked in GGUF, numbered in Megatron-Core */
	const tpc_family *mx = tpc_family_find("mixtral");
	w = tpc_family_classify(mx, TPC_ECO_HF, "model.layers.2.block_sparse_moe.experts.7.w3.weight", &l, &x, &b);
	assert_non_null(w);
	assert_int_equal(w->role, TPC_ROLE_FFN_UP_EXP);
	assert_int_equal(x, 7);
	assert_true(tpc_family_name(w, TPC_ECO_GGUF, l, x, false, nm, sizeof(nm), &part));
	assert_string_equal(nm, "blk.2.ffn_up_exps.weight");
	assert_true(tpc_family_name(w, TPC_ECO_MEGATRON, l, x, false, nm, sizeof(nm), &part));
	assert_string_equal(nm, "decoder.layers.2.mlp.experts.local_experts.7.linear_fc1.weight");
	assert_int_equal(part, 1);
	/* TensorRT-LLM stacks them, [w3; w1] per expert: w3 is part 0 of mlp.fc */
	assert_true(tpc_family_name(w, TPC_ECO_TRTLLM, l, x, false, nm, sizeof(nm), &part));
	assert_string_equal(nm, "transformer.layers.2.mlp.fc.weight");
	assert_int_equal(part, 0);
	assert_true(tpc_family_named_in(tpc_family_find("gpt2"), TPC_ECO_TRTLLM));
	assert_true(tpc_family_find("gpt2")->conv1d);
	/* TensorRT-LLM's LLaMA converter reads q, k, v apart: no name for a fused qkv_proj */
	assert_false(tpc_family_named_in(tpc_family_find("llama"), TPC_ECO_TRTLLM));
	assert_true(tpc_family_lists(tpc_family_find("qwen2")->layouts, "trtllm"));
	/* vLLM's FusedMoE stacks them too, [w1; w3] per expert: w3 is part 1 of w13_weight */
	assert_true(tpc_family_name(w, TPC_ECO_VLLM, l, x, false, nm, sizeof(nm), &part));
	assert_string_equal(nm, "model.layers.2.block_sparse_moe.experts.w13_weight");
	assert_int_equal(part, 1);
	assert_true(tpc_family_named_in(q3, TPC_ECO_VLLM));
	assert_false(tpc_family_named_in(tpc_family_find("qwen2-moe"), TPC_ECO_VLLM));
	/* stacked over the experts where the name has no {E}: GGUF's ffn_*_exps,
	 * vLLM's w13_weight; one tensor per expert in HF and Megatron-Core */
	assert_true(tpc_family_stacked(w, TPC_ECO_GGUF) && tpc_family_stacked(w, TPC_ECO_VLLM));
	assert_false(tpc_family_stacked(w, TPC_ECO_HF) || tpc_family_stacked(w, TPC_ECO_MEGATRON));
	assert_false(tpc_family_stacked(tpc_family_row(mx, TPC_ROLE_FFN_GATE_INP), TPC_ECO_GGUF)); /* not an expert */
	/* the parts of a fused tensor, in K order: w13_weight is [w1 | w3]; qkv_proj [q | k | v] */
	const tpc_tensor_row *pr[4];
	assert_int_equal(tpc_family_parts(mx, w, TPC_ECO_VLLM, pr, 4), 2);
	assert_int_equal(pr[0]->role, TPC_ROLE_FFN_GATE_EXP);
	assert_ptr_equal(pr[1], w);
	assert_int_equal(tpc_family_parts(mx, w, TPC_ECO_TRTLLM, pr, 4), 2); /* [w3; w1]: w3 is part 0 */
	assert_ptr_equal(pr[0], w);
	assert_int_equal(tpc_family_parts(mx, w, TPC_ECO_HF, pr, 4), 0);   /* not fused there */
	assert_int_equal(tpc_family_parts(mx, w, TPC_ECO_VLLM, pr, 1), -1); /* more parts than room */
	const tpc_family *ll = tpc_family_find("llama");
	assert_int_equal(tpc_family_parts(ll, tpc_family_row(ll, TPC_ROLE_ATTN_K), TPC_ECO_VLLM, pr, 4), 3);
	assert_true(pr[0]->role == TPC_ROLE_ATTN_Q && pr[2]->role == TPC_ROLE_ATTN_V);
	assert_null(tpc_family_find("qwen4"));
	assert_null(tpc_family_by_arch("NoSuchForCausalLM"));
}

/* TensorRT-LLM's config.json for record f from a Hugging Face config. */
static char *trt_config(const tpc_family *f, const char *hf)
{
	static tpc_shard_plan sp;
	tpc__trt_source src;
	tpc_buf b = TPC_BUF_INIT;
	tpc_err e;
	tpc_err_init(&e);
	memset(&sp, 0, sizeof(sp));
	sp.tp = sp.pp = sp.ep = 1;
	memset(&src, 0, sizeof(src));
	src.text = (char *)hf;
	src.len = strlen(hf);
	src.fam = f;
	assert_int_equal(tpc_cfg_from_buffer(&src.cfg, hf, src.len, "config.json", &e), 0);
	src.root = tpc_cfg_root(src.cfg);
	snprintf(src.arch, sizeof(src.arch), "TestForCausalLM");
	assert_int_equal(tpc__trt_config_render(&sp, &src, TPC_BF16, &b, &e), 0);
	tpc_cfg_free(src.cfg);
	return tpc_buf_detach(&b, NULL);
}

/* The layouts decide from the record, never from its name: a record that is
 * not one of the built-in ones (a new family reusing LLaMA's names) gets the
 * TensorRT-LLM config class its fields say, MoE members when its table has
 * experts; a set no record is named for is read with the tables of the
 * records that list its layout. */
static void test_family_layout_records(void **st)
{
	(void)st;
	static const char hf[] =
		"{\"architectures\": [\"TestForCausalLM\"], \"vocab_size\": 32, \"hidden_size\": 16, "
		"\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 32, "
		"\"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, "
		"\"hidden_act\": \"silu\", \"num_local_experts\": 4, \"num_experts_per_tok\": 2}";
	const tpc_family *llama = tpc_family_find("llama"), *mx = tpc_family_find("mixtral");
	tpc_family rec = *llama;
	char *c;
	rec.name = "test-family";
	c = trt_config(&rec, hf); /* LLaMAConfig, no experts */
	assert_non_null(strstr(c, "\"moe\": {\"num_experts\": 0, \"top_k\": 0, \"normalization_mode\": null}"));
	assert_non_null(strstr(c, "\"attn_bias\": false"));
	assert_null(strstr(c, "qwen_type"));
	free(c);
	rec.trtllm.qwen_type = "qwen-test"; /* QWenConfig: its qwen_type, attention biases */
	c = trt_config(&rec, hf);
	assert_non_null(strstr(c, "\"qwen_type\": \"qwen-test\""));
	assert_non_null(strstr(c, "\"attn_bias\": true"));
	free(c);
	rec.trtllm.qwen_type = NULL;
	rec.tensors = mx->tensors; /* experts in the table: the MoE members */
	assert_true(tpc_family_has_experts(&rec));
	c = trt_config(&rec, hf);
	assert_non_null(strstr(c, "\"hidden_act\": \"swiglu\""));
	assert_non_null(strstr(c, "\"moe\": {\"num_experts\": 4, \"top_k\": 2, \"normalization_mode\": 1}"));
	free(c);

	assert_false(tpc_family_has_experts(llama));
	assert_true(tpc_family_has_experts(tpc_family_find("qwen2-moe")));
	assert_ptr_equal(tpc_family_by_trtllm_arch("GPTForCausalLM"), tpc_family_find("gpt2"));
	assert_ptr_equal(tpc_family_by_trtllm_arch("GPT2LMHeadModel"), tpc_family_find("gpt2"));
	assert_ptr_equal(tpc_family_by_trtllm_arch("MixtralForCausalLM"), mx);
	assert_null(tpc_family_by_trtllm_arch("NoSuchForCausalLM"));

	/* reading back without a record: vLLM's stacked experts from the record
	 * that lists vllm and names them (Mixtral's), Megatron's names from the
	 * one that lists megatron */
	const tpc_family *of = NULL;
	int64_t l = -1, x = -1;
	bool b = true;
	const tpc_tensor_row *w = tpc_family_classify_for(NULL, "vllm", TPC_ECO_VLLM,
							  "model.layers.3.block_sparse_moe.experts.w2_weight", &l, &x, &b, &of);
	assert_non_null(w);
	assert_int_equal(w->role, TPC_ROLE_FFN_DOWN_EXP);
	assert_ptr_equal(of, mx);
	assert_int_equal(l, 3);
	assert_false(b);
	w = tpc_family_classify_for(NULL, "megatron", TPC_ECO_MEGATRON, "decoder.layers.1.mlp.linear_fc2.weight", &l,
				    NULL, NULL, &of);
	assert_true(w && w->role == TPC_ROLE_FFN_DOWN && tpc_family_lists(of->layouts, "megatron"));
	/* the set's own record first; a row it lacks from the listed records */
	w = tpc_family_classify_for(tpc_family_find("qwen3"), "vllm", TPC_ECO_HF, "model.layers.0.self_attn.q_norm.weight",
				    NULL, NULL, NULL, &of);
	assert_ptr_equal(of, tpc_family_find("qwen3"));
	w = tpc_family_classify_for(mx, "vllm", TPC_ECO_HF, "model.layers.0.mlp.up_proj.weight", NULL, NULL, NULL, &of);
	assert_true(w && w->role == TPC_ROLE_FFN_UP && of == llama);
	assert_null(tpc_family_classify_for(mx, NULL, TPC_ECO_HF, "model.layers.0.mlp.up_proj.weight", NULL, NULL, NULL, &of));
	assert_null(of);
}

/* Plans and rules share one dialect: \d is a digit in a plan too (POSIX
 * alone would read it as 'd'), and the cost guard holds. */
static void test_regex_dialect(void **st)
{
	(void)st;
	regex_t re;
	char why[256];
	assert_int_equal(tpc_regex_compile(&re, "layers\\.\\d+\\.mlp$", REG_NOSUB, why, sizeof(why)), 0);
	assert_int_equal(regexec(&re, "model.layers.12.mlp", 0, NULL, 0), 0);
	assert_int_not_equal(regexec(&re, "model.layers.dd.mlp", 0, NULL, 0), 0);
	regfree(&re);
	assert_int_equal(tpc_regex_compile(&re, "([0-9]+)+++++++++++++++++++++", 0, why, sizeof(why)), 1);
	assert_string_equal(why, TPC_REGEX_TOO_COSTLY);
	assert_int_equal(tpc_regex_compile(&re, "a(", 0, why, sizeof(why)), 1);
	tpc_plan p;
	tpc_err e;
	tpc_err_init(&e);
	const char *json = "{\"rules\": [{\"match\": \"layers\\\\.\\\\d+\\\\.mlp\\\\.down_proj\\\\.weight$\", \"split\": \"row\"}],"
			   " \"fallback\": \"error\"}";
	assert_int_equal(tpc_plan_from_buffer(&p, json, strlen(json), "dialect.json", &e), 0);
	assert_int_equal(regexec(&p.rules[0].re, "model.layers.3.mlp.down_proj.weight", 0, NULL, 0), 0);
	tpc_plan_release(&p);
}

/* a config.json without architectures: the record by its model_type, '_'
 * and '-' aside on both sides */
static void test_by_model_type(void **st)
{
	(void)st;
	const char *arch = NULL;
	assert_string_equal(tpc_family_by_model_type("qwen2_moe", &arch)->name, "qwen2-moe");
	assert_string_equal(arch, "Qwen2MoeForCausalLM");
	assert_string_equal(tpc_family_by_model_type("ernie4_5", &arch)->name, "ernie4_5");
	assert_string_equal(arch, "Ernie4_5ForCausalLM");
	assert_string_equal(tpc_family_by_model_type("glm4", NULL)->name, "glm4");
	/* the MoE record, not the dense ERNIE 4.5 whose stem it starts with */
	assert_string_equal(tpc_family_by_model_type("ernie4_5_moe", &arch)->name, "ernie4_5-moe");
	assert_string_equal(arch, "Ernie4_5_MoeForCausalLM");
	/* the model_type the record's GGUF column names, not its architecture's stem */
	assert_string_equal(tpc_family_by_model_type("llama4_text", &arch)->name, "llama4");
	assert_string_equal(arch, "Llama4ForCausalLM");
	assert_string_equal(tpc_family_by_model_type("qwen3_next", &arch)->name, "qwen3-next");
	assert_string_equal(arch, "Qwen3NextForCausalLM");
	assert_string_equal(tpc_family_by_model_type("hunyuan_v1_dense", &arch)->name, "hunyuan-dense");
	assert_string_equal(arch, "HunYuanDenseV1ForCausalLM");
}

/* Every role has a name of its own; the parts' defaults (norm_eps,
 * rope_fraction, experts_per_tok) are part of the layer verify computes: a
 * record that differs in one no longer has another's plan and layer */
static void test_roles_and_defaults(void **st)
{
	(void)st;
	for (int r = 0; r < TPC_ROLE_COUNT; r++) {
		assert_string_not_equal(tpc_role_name((tpc_role)r), "?");
		for (int k = 0; k < r; k++)
			assert_string_not_equal(tpc_role_name((tpc_role)r), tpc_role_name((tpc_role)k));
	}
	assert_string_equal(tpc_role_name(TPC_ROLE_FFN_EXP_PROBS_B), "exp_probs_b");
	/* the next-token-prediction layer's, named as gguf-py's MODEL_TENSOR.NEXTN_* */
	assert_string_equal(tpc_role_name(TPC_ROLE_NEXTN_EH_PROJ), "nextn_eh_proj");
	assert_string_equal(tpc_role_name(TPC_ROLE_NEXTN_HEAD_NORM), "nextn_shared_head_norm");
	/* a linear attention's, named as gguf-py's MODEL_TENSOR.SSM_* */
	assert_string_equal(tpc_role_name(TPC_ROLE_SSM_CONV1D), "ssm_conv1d");
	assert_string_equal(tpc_role_name(TPC_ROLE_SSM_OUT), "ssm_out");
	/* a DeltaNet's four projections over all heads (Qwen3.5) */
	assert_string_equal(tpc_role_name(TPC_ROLE_SSM_QKV), "ssm_qkv");
	assert_string_equal(tpc_role_name(TPC_ROLE_SSM_ALPHA), "ssm_alpha");
	assert_string_equal(tpc_role_name(TPC_ROLE_COUNT), "?");
	tpc_family mi = *tpc_family_find("mistral");
	assert_true(tpc_family_fits(&mi, "LlamaForCausalLM"));
	mi.parts.norm_eps = 1e-12;
	assert_false(tpc_family_fits(&mi, "LlamaForCausalLM"));
	mi = *tpc_family_find("mistral");
	mi.parts.rope_fraction = 0.25;
	assert_false(tpc_family_fits(&mi, "LlamaForCausalLM"));
	mi = *tpc_family_find("mistral");
	mi.parts.experts_per_tok = 2;
	assert_false(tpc_family_fits(&mi, "LlamaForCausalLM"));
	mi = *tpc_family_find("mistral");
	mi.parts.rope_orig_top = 4096;
	assert_false(tpc_family_fits(&mi, "LlamaForCausalLM"));
	/* Phi-3's partial rotary and longrope original length: LLaMA's record
	 * does not fit a Phi3ForCausalLM config */
	assert_false(tpc_family_fits(tpc_family_find("llama"), "Phi3ForCausalLM"));
	assert_true(tpc_family_fits(tpc_family_find("phi3"), "Phi3ForCausalLM"));
}

static void test_presets(void **st)
{
	(void)st;
	assert_int_equal(tpc_family_count(), 44);
	for (size_t i = 0; i < tpc_family_count(); i++) {
		tpc_plan p;
		tpc_err e;
		tpc_err_init(&e);
		assert_int_equal(tpc_plan_preset(&p, tpc_family_at(i)->name, &e), 0);
		assert_string_equal(p.name, tpc_family_at(i)->name);
		assert_true(p.nrules > 0);
		assert_non_null(p.json);
		assert_false(p.fallback_error);
		tpc_plan_release(&p);
	}
	tpc_plan p;
	tpc_err e;
	tpc_err_init(&e);
	/* a name typed on the command line: a usage error, with the nearest name */
	assert_int_equal(tpc_plan_preset(&p, "gpt3", &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "unknown preset 'gpt3' (did you mean 'gpt2'? known: llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3, phi3, olmo2, olmo3, starcoder2, granite, smollm3, seed-oss, glm4, ernie4_5, exaone4, phi, cohere2, mixtral, qwen2-moe, qwen3-moe, olmoe, granitemoe, granitemoeshared, granitemoehybrid, granitemoehybrid-dense, glm4-moe, gpt-oss, phimoe, hunyuan-moe, hunyuan-dense, ernie4_5-moe, deepseek-v3, llama4, qwen3-next, qwen3_5, qwen3_5-moe, gpt2, gpt-neox, bert, libai, dit, dalle2)"));
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_preset(&p, "lama", &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "did you mean 'llama'?"));
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_preset(&p, "transformer-xl", &e), TPC_EUSAGE);
	assert_null(strstr(e.msg, "did you mean"));
}

/* lib/tpc_cfg.h: the one config.json reader */
static void test_cfg_reader(void **st)
{
	(void)st;
	tpc_cfg *c = NULL;
	tpc_err e;
	int64_t i = 0;
	double d = 0;
	int b = 0;
	const char *str = NULL;
	const char *txt = "{\"num_attention_heads\": 8, \"n_head\": 4, \"hidden_size\": 7.5, \"name\": \"x\", "
			  "\"tie\": false, \"nul\": null, \"vocab_size\": 100, \"rope_theta\": 500000, "
			  "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2}, "
			  "\"text_config\": {\"num_attention_heads\": 16, \"head_dim\": 64}}";
	tpc_err_init(&e);
	assert_int_equal(tpc_cfg_from_buffer(&c, txt, strlen(txt), "config.json", &e), 0);
	/* aliases: the first present wins; required and optional */
	assert_int_equal(tpc_cfg_int(c, TPC_CFG_TOP, "n_heads|n_head|num_attention_heads", TPC_CFG_REQUIRED, 1, 99, &i, &e), 1);
	assert_int_equal(i, 4);
	i = -7;
	assert_int_equal(tpc_cfg_int(c, TPC_CFG_TOP, "num_layers|nul", 0, 1, 99, &i, &e), 0);
	assert_int_equal(i, -7); /* absent (null counts as absent): untouched */
	assert_int_equal(tpc_cfg_int(c, TPC_CFG_TOP, "num_layers", TPC_CFG_REQUIRED, 1, 99, &i, &e), TPC_EINPUT);
	assert_string_equal(e.path, "config.json");
	assert_string_equal(e.msg, "key 'num_layers' not found");
	/* the wrong type is an error, or skipped to the next alias when lenient */
	tpc_err_init(&e);
	assert_int_equal(tpc_cfg_int(c, TPC_CFG_TOP, "hidden_size|vocab_size", 0, 1, 1000, &i, &e), TPC_EINPUT);
	assert_string_equal(e.msg, "key 'hidden_size' is not an integer in [1, 1000]");
	tpc_err_init(&e);
	assert_int_equal(tpc_cfg_int(c, TPC_CFG_TOP, "hidden_size|vocab_size", TPC_CFG_LENIENT, 1, 1000, &i, &e), 1);
	assert_int_equal(i, 100);
	assert_int_equal(tpc_cfg_num(c, TPC_CFG_TOP, "name", 0, &d, &e), TPC_EINPUT);
	assert_string_equal(e.msg, "key 'name' is not a number");
	tpc_err_init(&e);
	assert_int_equal(tpc_cfg_str(c, TPC_CFG_TOP, "name", TPC_CFG_REQUIRED, &str, &e), 1);
	assert_string_equal(str, "x");
	assert_int_equal(tpc_cfg_bool(c, TPC_CFG_TOP, "tie", 0, &b, &e), 1);
	assert_int_equal(b, -1);
	assert_int_equal(tpc_cfg_bool(c, TPC_CFG_TOP, "name", 0, &b, &e), TPC_EINPUT);
	assert_string_equal(e.msg, "key 'name' is not true or false");
	tpc_err_init(&e);
	/* the text_config rule: its member wins, else the top level's */
	assert_int_equal(tpc_cfg_int(c, TPC_CFG_TOP, "num_attention_heads", 0, 1, 99, &i, &e), 1);
	assert_int_equal(i, 8);
	assert_int_equal(tpc_cfg_int(c, TPC_CFG_TEXT, "num_attention_heads", 0, 1, 99, &i, &e), 1);
	assert_int_equal(i, 16);
	assert_int_equal(tpc_cfg_int(c, TPC_CFG_TEXT, "vocab_size", 0, 1, 999, &i, &e), 1);
	assert_int_equal(i, 100);
	assert_int_equal(tpc_cfg_int(c, TPC_CFG_TOP, "head_dim", 0, 1, 999, &i, &e), 0);
	/* the rope: rope_scaling when there is no rope_parameters; "type" is rope_type;
	 * rope_theta from the top level when the object lacks it */
	assert_string_equal(tpc_cfg_rope_type(c, TPC_CFG_TEXT), "linear");
	assert_int_equal(tpc_cfg_rope_num(c, TPC_CFG_TEXT, "factor", NULL, 0, &d, &e), 1);
	assert_true(d == 2);
	assert_int_equal(tpc_cfg_rope_num(c, TPC_CFG_TEXT, "rope_theta", "rope_theta", 0, &d, &e), 1);
	assert_true(d == 500000);
	assert_int_equal(tpc_cfg_rope_num(c, TPC_CFG_TEXT, "beta_fast", NULL, TPC_CFG_REQUIRED, &d, &e), TPC_EINPUT);
	assert_string_equal(e.msg, "key 'beta_fast' not found");
	tpc_cfg_free(c);
	/* rope_parameters wins over rope_scaling, and its members over the top level */
	const char *t5 = "{\"rope_theta\": 1, \"rope_scaling\": {\"rope_type\": \"yarn\"}, "
			 "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000, \"factor\": \"2\"}}";
	tpc_err_init(&e);
	assert_int_equal(tpc_cfg_from_buffer(&c, t5, strlen(t5), "m/config.json", &e), 0);
	assert_string_equal(tpc_cfg_rope_type(c, TPC_CFG_TOP), "default");
	assert_int_equal(tpc_cfg_rope_num(c, TPC_CFG_TOP, "rope_theta", "rope_theta", 0, &d, &e), 1);
	assert_true(d == 10000);
	assert_int_equal(tpc_cfg_rope_num(c, TPC_CFG_TOP, "factor", NULL, 0, &d, &e), TPC_EINPUT);
	assert_string_equal(e.msg, "key 'rope_parameters.factor' is not a number");
	tpc_cfg_free(c);
	/* not an object */
	tpc_err_init(&e);
	assert_int_equal(tpc_cfg_from_buffer(&c, "[1]", 3, "config.json", &e), TPC_EINPUT);
	assert_null(c);
	tpc_cfg_free(NULL);
}

static void test_facts(void **st)
{
	(void)st;
	tpc_model_facts f;
	tpc_err e;
	const char *llama = "{\"hidden_size\": 4096, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"vocab_size\": 32000, \"num_hidden_layers\": 32}";
	tpc_err_init(&e);
	assert_int_equal(tpc_facts_from_buffer(&f, llama, strlen(llama), "c", &e), 0);
	tpc_facts_finish(&f);
	assert_true(f.heads == 32 && f.kv_heads == 8 && f.head_dim == 128 && f.vocab == 32000 && f.layers == 32);
	const char *gpt2 = "{\"n_embd\": 768, \"n_head\": 12, \"n_layer\": 12, \"vocab_size\": 50257}";
	assert_int_equal(tpc_facts_from_buffer(&f, gpt2, strlen(gpt2), "c", &e), 0);
	tpc_facts_finish(&f);
	assert_true(f.heads == 12 && f.kv_heads == 0 && f.head_dim == 64 && f.hidden == 768);
	const char *falcon = "{\"hidden_size\": 64, \"num_attention_heads\": 4, \"multi_query\": true}";
	assert_int_equal(tpc_facts_from_buffer(&f, falcon, strlen(falcon), "c", &e), 0);
	assert_int_equal(f.kv_heads, 1);
	const char *nested = "{\"text_config\": {\"num_attention_heads\": 16, \"head_dim\": 256}}";
	assert_int_equal(tpc_facts_from_buffer(&f, nested, strlen(nested), "c", &e), 0);
	assert_true(f.heads == 16 && f.head_dim == 256);
	/* a non-integer or negative count is ignored, not truncated */
	const char *odd = "{\"num_attention_heads\": 7.5, \"hidden_size\": -4}";
	assert_int_equal(tpc_facts_from_buffer(&f, odd, strlen(odd), "c", &e), 0);
	assert_true(f.heads == 0 && f.hidden == 0);
	assert_int_equal(tpc_facts_from_buffer(&f, "[1]", 3, "c", &e), TPC_EINPUT);
	/* the rope for verify's model check: DeepSeek-V3's yarn rope_scaling, or
	 * transformers 5's rope_parameters */
	const char *yarn = "{\"rms_norm_eps\": 1e-6, \"rope_theta\": 10000, \"rope_interleave\": false, \"rope_scaling\": "
			   "{\"type\": \"yarn\", \"factor\": 40, \"mscale\": 1.0, \"mscale_all_dim\": 0.707, "
			   "\"original_max_position_embeddings\": 4096, \"beta_fast\": 32, \"beta_slow\": 1}}";
	assert_int_equal(tpc_facts_from_buffer(&f, yarn, strlen(yarn), "c", &e), 0);
	assert_true(f.norm_eps == 1e-6 && f.rope_theta == 10000 && f.rope_interleave == -1 && f.yarn.factor == 40 &&
		    f.yarn.mscale == 1 && f.yarn.mscale_all_dim == 0.707 && f.yarn.orig_max == 4096 &&
		    f.yarn.beta_fast == 32 && f.yarn.beta_slow == 1 && f.yarn.truncate == 0);
	const char *rp = "{\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 500000, \"factor\": 4, "
			 "\"original_max_position_embeddings\": 16, \"truncate\": false}}";
	assert_int_equal(tpc_facts_from_buffer(&f, rp, strlen(rp), "c", &e), 0);
	assert_true(f.rope_theta == 500000 && f.yarn.factor == 4 && f.yarn.orig_max == 16 && f.yarn.truncate == -1 &&
		    f.rope_interleave == 0);
	const char *lin = "{\"rope_scaling\": {\"type\": \"linear\", \"factor\": 4}}";
	assert_int_equal(tpc_facts_from_buffer(&f, lin, strlen(lin), "c", &e), 0);
	assert_true(f.yarn.factor == 0);
	/* GPT-NeoX and BERT: transformers 5's rope_parameters (tests/data/tiny_gpt_neox.json), the
	 * names before it, the LayerNorm epsilon */
	const char *nx = "{\"layer_norm_eps\": 1e-05, \"use_parallel_residual\": false, \"rope_parameters\": "
			 "{\"partial_rotary_factor\": 0.5, \"rope_theta\": 10000.0, \"rope_type\": \"default\"}}";
	assert_int_equal(tpc_facts_from_buffer(&f, nx, strlen(nx), "c", &e), 0);
	assert_true(f.norm_eps == 1e-5 && f.rotary_pct == 0.5 && f.rope_theta == 10000 && f.parallel_residual == -1);
	const char *old = "{\"layer_norm_epsilon\": 1e-12, \"rotary_pct\": 0.25, \"rotary_emb_base\": 500, "
			  "\"use_parallel_residual\": true}";
	assert_int_equal(tpc_facts_from_buffer(&f, old, strlen(old), "c", &e), 0);
	assert_true(f.norm_eps == 1e-12 && f.rotary_pct == 0.25 && f.rope_theta == 500 && f.parallel_residual == 1);
	/* layers without RoPE (SmolLM3, Llama 4): no_rope_layers as Python reads
	 * its entries, else no_rope_layer_interval, else the record's default */
	const char *nr = "{\"no_rope_layers\": [1, 0, true, false, null, 2], \"no_rope_layer_interval\": 2}";
	assert_int_equal(tpc_facts_from_buffer(&f, nr, strlen(nr), "c", &e), 0);
	assert_true(f.n_rope_listed == 6 && f.rope_off_every == 2 && f.rope_off[0] == 0x1a);
	for (int l = 0; l < 8; l++) /* the list wins over the interval; past its end: rotates */
		assert_int_equal(tpc_facts_rope_off(&f, l, 4), l == 1 || l == 3 || l == 4);
	/* Qwen2's sliding-window switch and pattern (max_window_layers 0 is a value) */
	const char *qs = "{\"use_sliding_window\": false, \"sliding_window\": 131072, \"max_window_layers\": 0}";
	assert_int_equal(tpc_facts_from_buffer(&f, qs, strlen(qs), "c", &e), 0);
	assert_true(f.use_swa == -1 && f.sliding_window == 131072 && f.max_window_said && f.max_window_layers == 0);
	const char *qt = "{\"use_sliding_window\": true, \"max_window_layers\": 28}";
	assert_int_equal(tpc_facts_from_buffer(&f, qt, strlen(qt), "c", &e), 0);
	assert_true(f.use_swa == 1 && f.max_window_said && f.max_window_layers == 28);
	const char *qn = "{\"sliding_window\": 4096, \"max_window_layers\": -1}";
	assert_int_equal(tpc_facts_from_buffer(&f, qn, strlen(qn), "c", &e), 0);
	assert_true(f.use_swa == 0 && !f.max_window_said && f.sliding_window == 4096);
	const char *iv = "{\"no_rope_layer_interval\": 3}";
	assert_int_equal(tpc_facts_from_buffer(&f, iv, strlen(iv), "c", &e), 0);
	assert_true(f.n_rope_listed == 0 && f.rope_off_every == 3);
	for (int l = 0; l < 7; l++) /* the config's interval wins over the record's */
		assert_int_equal(tpc_facts_rope_off(&f, l, 4), l == 2 || l == 5);
	assert_int_equal(tpc_facts_from_buffer(&f, llama, strlen(llama), "c", &e), 0);
	for (int l = 0; l < 9; l++) /* unsaid: the record's default, or every layer rotates */
		assert_true(tpc_facts_rope_off(&f, l, 4) == (l == 3 || l == 7) && !tpc_facts_rope_off(&f, l, 0) &&
			    tpc_facts_rope_off(NULL, l, 4) == (l == 3 || l == 7));
	/* precedence: filled only where unknown */
	tpc_model_facts a = {.heads = 8}, b = {.heads = 4, .kv_heads = 2, .n_rope_listed = 2, .rope_off = {2}};
	tpc_facts_fill(&a, &b);
	assert_true(a.heads == 8 && a.kv_heads == 2 && a.n_rope_listed == 2 && tpc_facts_rope_off(&a, 1, 0));
}

static const char *PLAN =
	"{\"name\": \"t\", \"pad_multiple\": 1,"
	" \"layers\": [\"layers\\\\.([0-9]+)\\\\.\"], \"last_stage\": [\"^head\\\\.\", \"(^|\\\\.)norm\\\\.\"],"
	" \"rules\": ["
	"  {\"match\": \"\\\\.q\\\\.weight$\", \"split\": \"col\", \"heads\": \"q\"},"
	"  {\"match\": \"\\\\.kv\\\\.weight$\", \"split\": \"col\", \"heads\": \"kv\"},"
	"  {\"match\": \"\\\\.qkv\\\\.(weight|bias)$\", \"split\": \"col\", \"parts\": [\"q\", \"kv\", \"kv\"]},"
	"  {\"match\": \"\\\\.o\\\\.(weight|bias)$\", \"split\": \"row\", \"heads\": \"q\"},"
	"  {\"match\": \"\\\\.conv\\\\.(weight|bias)$\", \"split\": \"col\", \"transposed\": true, \"parts\": 3},"
	"  {\"match\": \"\\\\.cproj\\\\.(weight|bias)$\", \"split\": \"row\", \"transposed\": true},"
	"  {\"match\": \"\\\\.inter\\\\.weight$\", \"split\": \"col\", \"heads\": \"q\", \"head_block\": 3},"
	"  {\"match\": \"\\\\.gu\\\\.weight$\", \"split\": \"col\", \"parts\": [96, 32]},"
	"  {\"match\": \"^emb\\\\.\", \"split\": \"vocab\", \"pad_multiple\": 8},"
	"  {\"match\": \"^head\\\\.\", \"split\": \"vocab\"},"
	"  {\"match\": \"\\\\.conv3d$\", \"split\": \"dim\", \"dim\": -1},"
	"  {\"match\": \"\\\\.scale$\", \"split\": \"col\"},"
	"  {\"match\": \"norm\\\\.\", \"split\": \"replicate\"}"
	" ]}";

typedef struct rcase {
	const char *name;
	int ndim;
	int64_t shape[4];
	int tp;
	unsigned flags;
	/* expected */
	int ret;
	int dim;
	int64_t rank_dim;
	const char *msg;
} rcase;

static void test_resolve(void **st)
{
	(void)st;
	tpc_plan p;
	tpc_err e;
	assert_int_equal(parse(&p, PLAN, &e), 0);
	/* 8 query heads, 4 kv heads, head_dim 4 */
	tpc_model_facts f = {.heads = 8, .kv_heads = 4, .head_dim = 4};
	static const rcase cases[] = {
		{"l.0.q.weight", 2, {32, 16}, 4, 0, 0, 0, 8, NULL},
		{"l.0.q.weight", 2, {32, 16}, 3, 0, TPC_EINPUT, 0, 0, "8 query heads in dim 0 (size 32) cannot be split over tp 3: tp must divide the heads"},
		{"l.0.q.weight", 2, {32, 16}, 16, 0, TPC_EINPUT, 0, 0, "cannot be split over tp 16"},
		{"l.0.kv.weight", 2, {16, 16}, 2, 0, 0, 0, 8, NULL},
		{"l.0.kv.weight", 2, {16, 16}, 8, 0, 0, 0, 4, NULL},   /* 4 kv heads on 8 ranks: replicated */
		{"l.0.kv.weight", 2, {16, 16}, 3, 0, TPC_EINPUT, 0, 0, "or be a multiple of them"},
		{"l.0.kv.weight", 2, {18, 16}, 2, 0, TPC_EINPUT, 0, 0, "not a whole number of heads"},
		{"l.0.qkv.weight", 2, {64, 16}, 8, 0, 0, 0, 4 + 2 * 4, NULL},
		{"l.0.qkv.bias", 1, {64}, 2, 0, 0, 0, 16 + 2 * 8, NULL},
		{"l.0.qkv.weight", 2, {60, 16}, 2, 0, TPC_EINPUT, 0, 0, "parts [32, 16, 16] add up to 64 but dim 0 has 60"},
		{"l.0.o.weight", 2, {16, 32}, 4, 0, 0, 1, 8, NULL},
		{"l.0.o.bias", 1, {16}, 4, 0, 0, -1, 0, NULL},          /* row bias: replicated */
		{"l.0.conv.weight", 2, {16, 48}, 4, 0, 0, 1, 12, NULL}, /* Conv1D [in, out]: col = dim 1 */
		{"l.0.conv.bias", 1, {48}, 4, 0, 0, 0, 12, NULL},
		{"l.0.cproj.weight", 2, {48, 16}, 4, 0, 0, 0, 12, NULL},
		{"l.0.inter.weight", 2, {96, 16}, 8, 0, 0, 0, 12, NULL}, /* [nh, 3, hd]: 12 rows per head */
		{"l.0.inter.weight", 2, {96, 16}, 16, 0, TPC_EINPUT, 0, 0, "8 query heads"},
		{"l.0.gu.weight", 2, {128, 16}, 4, 0, 0, 0, 32, NULL},
		{"l.0.gu.weight", 2, {128, 16}, 5, 0, TPC_EINPUT, 0, 0, "part 0 of dim 0 of size 96 does not divide evenly by tp 5; use --pad"},
		{"l.0.gu.weight", 2, {128, 16}, 5, TPC_RESOLVE_PAD, 0, 0, 20 + 7, NULL},
		{"emb.weight", 2, {250, 16}, 4, 0, 0, 0, 64, NULL},     /* padded to 256 = 8 * 4 * 8 */
		{"head.weight", 2, {250, 16}, 4, 0, 0, 0, 63, NULL},    /* padded to 252 */
		{"head.weight", 2, {250, 16}, 2, 0, 0, 0, 125, NULL},
		{"l.0.conv3d", 3, {2, 3, 8}, 4, 0, 0, 2, 2, NULL},
		{"l.0.scale", 0, {0}, 4, 0, 0, -1, 0, NULL},            /* 0-dim: replicated */
		{"l.0.norm.weight", 1, {16}, 4, 0, 0, -1, 0, NULL},
		{"unmatched", 2, {3, 3}, 4, 0, 0, -1, 0, NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const rcase *c = &cases[i];
		tpc_split s;
		bool matched;
		tpc_err_init(&e);
		int r = tpc_plan_resolve(&p, &f, c->name, c->ndim, c->shape, c->tp, c->flags, &s, &matched, &e);
		if (r != c->ret || (c->msg && !strstr(e.msg, c->msg)))
			fail_msg("case %zu (%s tp %d): got %d '%s'", i, c->name, c->tp, r, e.msg);
		if (r) {
			assert_string_equal(e.tensor, c->name);
			continue;
		}
		if (s.dim != c->dim)
			fail_msg("case %zu (%s): dim %d, wanted %d", i, c->name, s.dim, c->dim);
		if (s.dim >= 0 && tpc_split_rank_dim(&s, c->tp) != c->rank_dim)
			fail_msg("case %zu (%s): rank dim %lld, wanted %lld", i, c->name,
				 (long long)tpc_split_rank_dim(&s, c->tp), (long long)c->rank_dim);
		assert_int_equal(matched, strcmp(c->name, "unmatched") != 0);
	}
	/* details: the row bias flag, KV replicas and where each rank starts */
	tpc_split s;
	int64_t ob[1] = {16}, kv[2] = {16, 16}, qkv[2] = {64, 16};
	assert_int_equal(tpc_plan_resolve(&p, &f, "l.0.o.bias", 1, ob, 4, 0, &s, NULL, &e), 0);
	assert_true(s.row_bias);
	assert_int_equal(tpc_plan_resolve(&p, &f, "l.0.kv.weight", 2, kv, 8, 0, &s, NULL, &e), 0);
	assert_int_equal(s.part[0].heads, 4);
	assert_int_equal(s.part[0].replicas, 2);
	for (int r = 0; r < 8; r++)
		assert_int_equal(tpc_split_rank_start(&s, 0, 8, r), (r / 2) * 4);
	assert_int_equal(tpc_plan_resolve(&p, &f, "l.0.qkv.weight", 2, qkv, 8, 0, &s, NULL, &e), 0);
	assert_int_equal(s.nparts, 3);
	assert_int_equal(s.part[0].replicas, 1);
	assert_int_equal(s.part[1].replicas, 2);
	assert_int_equal(tpc_split_rank_start(&s, 0, 8, 5), 5 * 4);
	assert_int_equal(tpc_split_rank_start(&s, 2, 8, 5), 2 * 4);
	int64_t emb[2] = {250, 16};
	assert_int_equal(tpc_plan_resolve(&p, &f, "emb.weight", 2, emb, 4, 0, &s, NULL, &e), 0);
	assert_int_equal(s.part[0].pad, 6);
	/* head splits need facts */
	tpc_model_facts none = {0};
	int64_t q[2] = {32, 16};
	tpc_err_init(&e);
	/* a fact the user must give: a usage error (exit 2), the tensor named */
	assert_int_equal(tpc_plan_resolve(&p, &none, "l.0.q.weight", 2, q, 2, 0, &s, NULL, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "head size is unknown; give --config"));
	assert_string_equal(e.tensor, "l.0.q.weight");
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &none, "l.0.qkv.weight", 2, qkv, 2, 0, &s, NULL, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "part 0 is \"q\""));
	/* without head_dim the head count decides */
	tpc_model_facts counts = {.heads = 8};
	assert_int_equal(tpc_plan_resolve(&p, &counts, "l.0.q.weight", 2, q, 4, 0, &s, NULL, &e), 0);
	assert_int_equal(s.part[0].heads, 8);
	tpc_plan_release(&p);
}

/* "gated" (a feed-forward projection: 2 parts [value | gate] when the model's
 * activation is gated) and a "rest" part (Flux's proj_out over [attention |
 * mlp]); diffusers configs give the activation and heads. */
/* DeepSeek: MLA heads counted (not head_dim rows), routing and MLA facts */
/* DeepSeek-V3's Megatron-Core names (MLA, shared experts, the router's
 * expert_bias): each Hugging Face tensor has one, fused ones as parts */
static void test_deepseek_megatron_names(void **st)
{
	(void)st;
	static const struct {
		const char *hf, *mc;
		int part;
	} want[] = {
		{"model.layers.0.input_layernorm.weight", "decoder.layers.0.input_layernorm.weight", -1},
		{"model.layers.4.self_attn.q_a_proj.weight", "decoder.layers.4.self_attention.linear_q_down_proj.weight", -1},
		{"model.layers.4.self_attn.q_a_layernorm.weight", "decoder.layers.4.self_attention.linear_q_up_proj.layer_norm_weight", -1},
		{"model.layers.4.self_attn.q_b_proj.weight", "decoder.layers.4.self_attention.linear_q_up_proj.weight", -1},
		{"model.layers.4.self_attn.kv_a_proj_with_mqa.weight", "decoder.layers.4.self_attention.linear_kv_down_proj.weight", -1},
		{"model.layers.4.self_attn.kv_a_layernorm.weight", "decoder.layers.4.self_attention.linear_kv_up_proj.layer_norm_weight", -1},
		{"model.layers.4.self_attn.kv_b_proj.weight", "decoder.layers.4.self_attention.linear_kv_up_proj.weight", -1},
		{"model.layers.4.self_attn.o_proj.weight", "decoder.layers.4.self_attention.linear_proj.weight", -1},
		{"model.layers.4.mlp.gate.e_score_correction_bias", "decoder.layers.4.mlp.router.expert_bias", -1},
		{"model.layers.4.mlp.shared_experts.up_proj.weight", "decoder.layers.4.mlp.shared_experts.linear_fc1.weight", 1},
		{"model.layers.4.mlp.experts.200.gate_proj.weight", "decoder.layers.4.mlp.experts.local_experts.200.linear_fc1.weight", 0},
		{"model.layers.1.mlp.up_proj.weight", "decoder.layers.1.mlp.linear_fc1.weight", 1},
	};
	const tpc_family *ds = tpc_family_find("deepseek-v3");
	char nm[256];
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int64_t l, x;
		bool b;
		int part = -2;
		const tpc_tensor_row *w = tpc_family_classify(ds, TPC_ECO_HF, want[i].hf, &l, &x, &b);
		assert_non_null(w);
		assert_true(tpc_family_name(w, TPC_ECO_MEGATRON, l, x, b, nm, sizeof(nm), &part));
		assert_string_equal(nm, want[i].mc);
		assert_int_equal(part, want[i].part);
	}
	/* the shared expert's linear_fc1 is [gate; up], as a dense MLP's */
	const tpc_tensor_row *pr[3];
	assert_int_equal(tpc_family_parts(ds, tpc_family_row(ds, TPC_ROLE_FFN_UP_SHEXP), TPC_ECO_MEGATRON, pr, 3), 2);
	assert_int_equal(pr[0]->role, TPC_ROLE_FFN_GATE_SHEXP);
	/* V2-Lite's q_proj has none (Megatron's linear_q_proj carries a norm
	 * the model has not): the table says so, a layout refuses it by name */
	assert_null(tpc_family_row(ds, TPC_ROLE_ATTN_Q)->name[TPC_ECO_MEGATRON]);
	assert_false(tpc_family_named_in(ds, TPC_ECO_MEGATRON));
}

static void test_deepseek(void **st)
{
	(void)st;
	tpc_plan p;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_preset(&p, "deepseek-v3", &e), 0);
	static const char cfg[] =
		"{\"hidden_size\": 7168, \"num_attention_heads\": 128, \"n_routed_experts\": 256,"
		" \"num_experts_per_tok\": 8, \"norm_topk_prob\": true, \"scoring_func\": \"sigmoid\","
		" \"topk_method\": \"noaux_tc\", \"n_group\": 8, \"topk_group\": 4, \"routed_scaling_factor\": 2.5,"
		" \"first_k_dense_replace\": 3, \"q_lora_rank\": 1536, \"kv_lora_rank\": 512,"
		" \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"v_head_dim\": 128}";
	tpc_model_facts f;
	assert_int_equal(tpc_facts_from_buffer(&f, cfg, strlen(cfg), "c", &e), 0);
	assert_int_equal(f.experts, 256);
	assert_int_equal(f.experts_per_tok, 8);
	assert_int_equal(f.norm_topk, 1);
	assert_int_equal(f.scoring, TPC_MOE_SIGMOID);
	assert_int_equal(f.topk_method, TPC_MOE_NOAUX_TC);
	assert_int_equal(f.n_group, 8);
	assert_int_equal(f.topk_group, 4);
	assert_true(f.routed_scale == 2.5);
	assert_int_equal(f.first_dense, 3);
	assert_int_equal(f.q_lora_rank, 1536);
	assert_int_equal(f.kv_lora_rank, 512);
	assert_int_equal(f.qk_nope_head_dim + f.qk_rope_head_dim, 192);
	assert_int_equal(f.v_head_dim, 128);
	tpc_facts_finish(&f); /* head_dim 7168 / 128 = 56: not MLA's head size */
	tpc_split s;
	int64_t qb[2] = {128 * 192, 1536}, kvb[2] = {128 * 256, 512}, o[2] = {7168, 128 * 128};
	int64_t qa[2] = {1536, 7168}, bias[1] = {256};
	assert_int_equal(tpc_plan_resolve(&p, &f, "model.layers.3.self_attn.q_b_proj.weight", 2, qb, 8, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, 0);
	assert_int_equal(s.part[0].heads, 128);
	assert_int_equal(tpc_split_rank_dim(&s, 8), 16 * 192);
	assert_int_equal(tpc_plan_resolve(&p, &f, "model.layers.3.self_attn.kv_b_proj.weight", 2, kvb, 16, 0, &s, NULL, &e), 0);
	assert_int_equal(tpc_split_rank_dim(&s, 16), 8 * 256);
	assert_int_equal(tpc_plan_resolve(&p, &f, "model.layers.3.self_attn.o_proj.weight", 2, o, 8, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, 1);
	assert_int_equal(tpc_split_rank_dim(&s, 8), 16 * 128);
	assert_int_equal(tpc_plan_resolve(&p, &f, "model.layers.3.self_attn.q_a_proj.weight", 2, qa, 8, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, -1);
	assert_int_equal(tpc_plan_resolve(&p, &f, "model.layers.3.mlp.gate.e_score_correction_bias", 1, bias, 8, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, -1);
	/* 3 * 192 * 128 rows divide by tp 3, but the heads do not: refused (with --pad too) */
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &f, "model.layers.3.self_attn.q_b_proj.weight", 2, qb, 3, TPC_RESOLVE_PAD, &s, NULL, &e),
			 TPC_EINPUT);
	assert_non_null(strstr(e.msg, "128 query heads in dim 0 (size 24576) cannot be split over tp 3: tp must divide the heads"));
	/* without the head count */
	tpc_model_facts none = {0};
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &none, "model.layers.3.self_attn.kv_b_proj.weight", 2, kvb, 2, 0, &s, NULL, &e),
			 TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "head count is unknown"));
	tpc_plan_release(&p);
	/* head_count goes with heads "q" only */
	static const char bad[] = "{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"head_count\": true}]}";
	tpc_plan_init(&p);
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_from_buffer(&p, bad, strlen(bad), "p.json", &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "\"head_count\" needs \"heads\": \"q\""));
	tpc_plan_release(&p);
}

static void test_gated_and_rest(void **st)
{
	(void)st;
	tpc_plan p;
	tpc_err e;
	tpc_split s;
	assert_int_equal(parse(&p, "{\"rules\": [{\"match\": \"proj\", \"split\": \"col\", \"gated\": true},"
				   " {\"match\": \"out\", \"split\": \"row\", \"parts\": [\"q\", \"rest\"]}]}", &e), 0);
	int64_t w[2] = {64, 16}, o[2] = {16, 48};
	tpc_model_facts geglu = {.heads = 4, .head_dim = 4, .ff_act = TPC_FF_GEGLU};
	tpc_model_facts gelu = {.heads = 4, .head_dim = 4, .ff_act = TPC_FF_GELU_TANH};
	tpc_model_facts unknown = {.heads = 4, .head_dim = 4};
	assert_int_equal(tpc_plan_resolve(&p, &geglu, "proj", 2, w, 4, 0, &s, NULL, &e), 0);
	assert_int_equal(s.nparts, 2);
	assert_int_equal(s.part[1].size, 32);
	assert_int_equal(tpc_split_rank_start(&s, 1, 4, 3), 24);
	assert_int_equal(tpc_plan_resolve(&p, &gelu, "proj", 2, w, 4, 0, &s, NULL, &e), 0);
	assert_int_equal(s.nparts, 1);
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &unknown, "proj", 2, w, 4, 0, &s, NULL, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "activation_fn"));
	assert_string_equal(e.tensor, "proj");
	/* rest: 48 columns = 16 of heads + 32 left */
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &gelu, "out", 2, o, 4, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, 1);
	assert_int_equal(s.nparts, 2);
	assert_int_equal(s.part[0].size, 16);
	assert_int_equal(s.part[1].size, 32);
	assert_int_equal(tpc_split_rank_dim(&s, 4), 4 + 8);
	int64_t small[2] = {16, 16};
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &gelu, "out", 2, small, 4, 0, &s, NULL, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "leaves nothing for the \"rest\" part"));
	tpc_plan_release(&p);
	/* bad uses */
	assert_int_equal(parse(&p, "{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"parts\": [\"rest\", \"rest\"]}]}", &e),
			 TPC_EINPUT);
	assert_non_null(strstr(e.msg, "at most one part is \"rest\""));
	assert_int_equal(parse(&p, "{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"parts\": 2, \"gated\": true}]}", &e),
			 TPC_EINPUT);
	assert_int_equal(parse(&p, "{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"gated\": 1}]}", &e), TPC_EINPUT);
	/* diffusers configs */
	tpc_model_facts f;
	const char *pix = "{\"_class_name\": \"PixArtTransformer2DModel\", \"num_attention_heads\": 16, "
			  "\"attention_head_dim\": 72, \"num_layers\": 28, \"activation_fn\": \"gelu-approximate\"}";
	assert_int_equal(tpc_facts_from_buffer(&f, pix, strlen(pix), "c.json", &e), 0);
	assert_int_equal(f.heads, 16);
	assert_int_equal(f.head_dim, 72);
	assert_int_equal(f.hidden, 1152);
	assert_int_equal(f.layers, 28);
	assert_int_equal(f.ff_act, TPC_FF_GELU_TANH);
	const char *flux = "{\"_class_name\": \"FluxTransformer2DModel\", \"num_attention_heads\": 24, \"attention_head_dim\": 128}";
	assert_int_equal(tpc_facts_from_buffer(&f, flux, strlen(flux), "c.json", &e), 0);
	assert_int_equal(f.ff_act, TPC_FF_GELU_TANH);
	assert_false(tpc_ff_act_gated(f.ff_act));
	const char *gg = "{\"activation_fn\": \"geglu\"}";
	assert_int_equal(tpc_facts_from_buffer(&f, gg, strlen(gg), "c.json", &e), 0);
	assert_true(tpc_ff_act_gated(f.ff_act));
	assert_string_equal(tpc_ff_act_name(f.ff_act), "geglu");
	assert_int_equal(tpc_ff_act_parse("mystery"), TPC_FF_OTHER);
}

/* A Mamba-2 mixer's fused tensors as vLLM's MambaMixer2 loads them
 * (mamba_v2_sharded_weight_loader): in_proj's z, x, B, C, dt each split on
 * its own, B and C by groups of d_state rows; one group is whole on every
 * rank, a group count tp does not divide is refused by name; the facts come
 * from config.json's mamba_* members (mamba_d_head "auto": expand x hidden
 * / heads) and layer_types' "mamba" layers. */
static void test_ssm_parts(void **st)
{
	(void)st;
	tpc_plan p;
	tpc_err e;
	tpc_split s;
	tpc_model_facts f;
	const char *cfg = "{\"hidden_size\": 32, \"mamba_n_heads\": 4, \"mamba_d_head\": \"auto\", \"mamba_expand\": 2,"
			  " \"mamba_n_groups\": 1, \"mamba_d_state\": 8, \"mamba_d_conv\": 4,"
			  " \"layer_types\": [\"mamba\", \"attention\", \"mamba\"]}";
	assert_int_equal(tpc_facts_from_buffer(&f, cfg, strlen(cfg), "c.json", &e), 0);
	assert_int_equal(f.ssm_heads, 4);
	assert_int_equal(f.ssm_head_dim, 16);
	assert_int_equal(f.ssm_groups, 1);
	assert_int_equal(f.ssm_state, 8);
	assert_int_equal(f.ssm_conv, 4);
	assert_true(tpc_facts_ssm_layer(&f, 0));
	assert_false(tpc_facts_ssm_layer(&f, 1));
	assert_true(tpc_facts_ssm_layer(&f, 2));
	assert_false(tpc_facts_ssm_layer(&f, 3));
	assert_int_equal(parse(&p, "{\"rules\": [{\"match\": \"in_proj\", \"split\": \"col\","
				   " \"parts\": [\"ssm\", \"ssm\", \"ssm_groups\", \"ssm_groups\", \"ssm_dt\"]}]}", &e), 0);
	/* 64 z + 64 x + 8 B + 8 C + 4 dt rows */
	int64_t w[2] = {148, 32};
	assert_int_equal(tpc_plan_resolve(&p, &f, "in_proj", 2, w, 2, 0, &s, NULL, &e), 0);
	assert_int_equal(s.nparts, 5);
	assert_int_equal(s.part[2].size, 8);
	assert_int_equal(s.part[2].replicas, 2);
	assert_int_equal(tpc_split_rank_len(&s, 0, 2), 32);
	assert_int_equal(tpc_split_rank_len(&s, 2, 2), 8); /* the one group, whole */
	assert_int_equal(tpc_split_rank_start(&s, 3, 2, 1), 0);
	assert_int_equal(tpc_split_rank_start(&s, 4, 2, 1), 2);
	assert_int_equal(tpc_split_rank_dim(&s, 2), 32 + 32 + 8 + 8 + 2);
	assert_string_equal(tpc_heads_kind_name(s.part[4].head_kind), "ssm_dt");
	/* two groups split over tp 2, refused over tp 4 */
	f.ssm_groups = 2;
	int64_t w2[2] = {164, 32};
	assert_int_equal(tpc_plan_resolve(&p, &f, "in_proj", 2, w2, 2, 0, &s, NULL, &e), 0);
	assert_int_equal(s.part[3].replicas, 1);
	assert_int_equal(tpc_split_rank_start(&s, 3, 2, 1), 8);
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &f, "in_proj", 2, w2, 4, 0, &s, NULL, &e), TPC_EINPUT);
	assert_string_equal(e.tensor, "in_proj");
	assert_non_null(strstr(e.msg, "2 Mamba-2 groups (mamba_n_groups)"));
	/* heads tp does not divide */
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &f, "in_proj", 2, w2, 8, 0, &s, NULL, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "heads (mamba_n_heads)"));
	/* parts that do not add up, and facts that are missing */
	int64_t w3[2] = {150, 32};
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &f, "in_proj", 2, w3, 2, 0, &s, NULL, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "add up to 164"));
	f.ssm_state = 0;
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &f, "in_proj", 2, w2, 2, 0, &s, NULL, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "mamba_d_state"));
	tpc_plan_release(&p);
}

/* A linear attention's heads ("lin_k", "lin_v": Qwen3-Next's gated
 * DeltaNet): config.json's linear_num_key_heads of linear_key_head_dim and
 * linear_num_value_heads of linear_value_head_dim; a key head's group of
 * any size with head_count (in_proj_qkvz [q k v z] per group), parts of
 * their sizes (conv1d's [q | k | v] channels), never replicated: tp must
 * divide them, else the tensor is refused by name */
static void test_linear_heads(void **st)
{
	(void)st;
	tpc_plan p;
	tpc_err e;
	tpc_split s;
	assert_int_equal(parse(&p, "{\"rules\": [{\"match\": \"qkvz\", \"split\": \"col\", \"heads\": \"lin_k\", \"head_count\": true},"
				   " {\"match\": \"conv\", \"split\": \"col\", \"dim\": 0, \"parts\": [\"lin_k\", \"lin_k\", \"lin_v\"]},"
				   " {\"match\": \"A_log\", \"split\": \"col\", \"heads\": \"lin_v\", \"head_count\": true},"
				   " {\"match\": \"out\", \"split\": \"row\", \"heads\": \"lin_v\"}]}", &e), 0);
	static const char cfg[] = "{\"linear_num_key_heads\": 4, \"linear_num_value_heads\": 8,"
				  " \"linear_key_head_dim\": 8, \"linear_value_head_dim\": 6}";
	tpc_model_facts f;
	assert_int_equal(tpc_facts_from_buffer(&f, cfg, strlen(cfg), "c", &e), 0);
	assert_int_equal(f.lin_k_heads, 4);
	assert_int_equal(f.lin_v_heads, 8);
	assert_int_equal(f.lin_k_dim, 8);
	assert_int_equal(f.lin_v_dim, 6);
	/* 4 groups of 8 + 8 + 2 x 6 + 2 x 6 = 40 rows: tp 2 takes 2 whole groups */
	int64_t qkvz[2] = {160, 32}, conv[3] = {112, 1, 4}, a[1] = {8}, out[2] = {32, 48};
	assert_int_equal(tpc_plan_resolve(&p, &f, "qkvz", 2, qkvz, 2, 0, &s, NULL, &e), 0);
	assert_int_equal(s.part[0].heads, 4);
	assert_int_equal(tpc_split_rank_dim(&s, 2), 80);
	assert_int_equal(tpc_split_rank_start(&s, 0, 2, 1), 80);
	/* conv1d: [q 32 | k 32 | v 48] each split, rank 1 gets [q_1; k_1; v_1] */
	assert_int_equal(tpc_plan_resolve(&p, &f, "conv", 3, conv, 4, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, 0);
	assert_int_equal(s.nparts, 3);
	assert_int_equal(s.part[1].size, 32);
	assert_int_equal(s.part[2].size, 48);
	assert_int_equal(s.part[2].heads, 8);
	assert_int_equal(tpc_split_rank_dim(&s, 4), 8 + 8 + 12);
	assert_int_equal(tpc_plan_resolve(&p, &f, "A_log", 1, a, 4, 0, &s, NULL, &e), 0);
	assert_int_equal(tpc_split_rank_dim(&s, 4), 2);
	assert_int_equal(tpc_plan_resolve(&p, &f, "out", 2, out, 8, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, 1);
	assert_int_equal(tpc_split_rank_dim(&s, 8), 6);
	/* 160 rows divide by tp 8 (20 each), the 4 key-head groups do not: refused,
	 * never replicated as key/value heads would be */
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &f, "qkvz", 2, qkvz, 8, TPC_RESOLVE_PAD, &s, NULL, &e), TPC_EINPUT);
	assert_string_equal(e.tensor, "qkvz");
	assert_non_null(strstr(e.msg, "4 linear-attention key heads in dim 0 (size 160) cannot be split over tp 8"));
	/* a value dim that is not whole heads of linear_value_head_dim */
	int64_t odd[2] = {32, 50};
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &f, "out", 2, odd, 2, 0, &s, NULL, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "not a whole number of linear-attention heads of 6 rows"));
	/* the facts unknown: asked for */
	tpc_model_facts none = {0};
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &none, "qkvz", 2, qkvz, 2, 0, &s, NULL, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "linear_num_key_heads"));
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &none, "conv", 3, conv, 2, 0, &s, NULL, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "linear_key_head_dim"));
	tpc_plan_release(&p);
	assert_string_equal(tpc_heads_kind_name(TPC_HEADS_LIN_V), "lin_v");
	assert_int_equal(parse(&p, "{\"rules\": [{\"match\": \"x\", \"split\": \"col\", \"heads\": \"lin_q\"}]}", &e),
			 TPC_EINPUT);
}

/* "stacked": dim 0 holds the experts, the rule describes one expert's
 * matrix (Granite-MoE's input_linear [E, 2I, H] and output_linear [E, H, I];
 * Llama 4's transposed gate_up_proj [E, H, 2I]); a 3-D tensor under a col or
 * row rule that says neither "stacked" nor "dim" is refused by name. */
/* A row whose Hugging Face name does not end in "weight" has its bias at
 * NAME_bias (gpt-oss's experts.gate_up_proj, gate_up_proj_bias); the row
 * fields hf_in_out and hf_interleaved ride along, and tpc_family_parts
 * lists the interleaved parts as any fused ones; the sinks role is named */
static void test_row_forms(void **st)
{
	(void)st;
	static const tpc_tensor_row rows[] = {
		{TPC_ROLE_FFN_GATE_EXP, true, {"model.layers.{L}.mlp.experts.gate_up_proj#0", NULL, NULL, NULL,
					       "blk.{L}.ffn_gate_exps.weight"}, true, true, NULL},
		{TPC_ROLE_FFN_UP_EXP, true, {"model.layers.{L}.mlp.experts.gate_up_proj#1", NULL, NULL, NULL,
					     "blk.{L}.ffn_up_exps.weight"}, true, true, NULL},
		{TPC_ROLE_FFN_DOWN_EXP, true, {"model.layers.{L}.mlp.experts.down_proj", NULL, NULL, NULL,
					       "blk.{L}.ffn_down_exps.weight"}, true, false, NULL},
		{TPC_ROLE_ATTN_SINKS, false, {"model.layers.{L}.self_attn.sinks", NULL, NULL, NULL,
					      "blk.{L}.attn_sinks.weight"}, false, false, NULL},
		{TPC_ROLE_NONE, false, {NULL}, false, false, NULL},
	};
	tpc_family f = {.name = "t", .tensors = rows};
	int64_t l, x;
	bool b;
	char buf[128];
	int part;
	const tpc_tensor_row *r = tpc_family_classify(&f, TPC_ECO_HF, "model.layers.3.mlp.experts.gate_up_proj_bias", &l, &x, &b);
	assert_ptr_equal(r, &rows[0]); /* a fused tensor classifies as part 0's */
	assert_true(b && l == 3 && x == -1);
	r = tpc_family_classify(&f, TPC_ECO_HF, "model.layers.1.mlp.experts.down_proj", &l, &x, &b);
	assert_ptr_equal(r, &rows[2]);
	assert_true(!b && l == 1 && r->hf_in_out && !r->hf_interleaved);
	assert_true(tpc_family_stacked(r, TPC_ECO_HF) && tpc_family_stacked(r, TPC_ECO_GGUF));
	/* a row without a bias has none, whatever its name */
	assert_null(tpc_family_classify(&f, TPC_ECO_HF, "model.layers.1.self_attn.sinks_bias", &l, &x, &b));
	assert_false(tpc_family_name(&rows[3], TPC_ECO_HF, 0, -1, true, buf, sizeof(buf), &part));
	assert_true(tpc_family_name(&rows[1], TPC_ECO_HF, 2, -1, true, buf, sizeof(buf), &part));
	assert_string_equal(buf, "model.layers.2.mlp.experts.gate_up_proj_bias");
	assert_int_equal(part, 1);
	assert_true(tpc_family_name(&rows[2], TPC_ECO_GGUF, 2, -1, true, buf, sizeof(buf), &part));
	assert_string_equal(buf, "blk.2.ffn_down_exps.bias"); /* "weight" as "bias" */
	assert_false(tpc_family_name(&rows[1], TPC_ECO_HF, 2, -1, true, buf, 44, &part)); /* one byte short */
	const tpc_tensor_row *pr[4];
	assert_int_equal(tpc_family_parts(&f, &rows[1], TPC_ECO_HF, pr, 4), 2);
	assert_true(pr[0] == &rows[0] && pr[1] == &rows[1] && pr[0]->hf_interleaved);
	assert_string_equal(tpc_role_name(TPC_ROLE_ATTN_SINKS), "attn_sinks");
	assert_string_equal(tpc_role_name(TPC_ROLE_SSM_IN), "ssm_in");
	assert_string_equal(tpc_role_name(TPC_ROLE_SSM_OUT), "ssm_out");
	for (int r = 1; r < TPC_ROLE_COUNT; r++)
		assert_string_not_equal(tpc_role_name((tpc_role)r), "?");
}

static void test_stacked(void **st)
{
	(void)st;
	tpc_plan p;
	tpc_err e;
	tpc_split s;
	tpc_model_facts f = {0};
	assert_int_equal(parse(&p, "{\"rules\": ["
				   "{\"match\": \"input_linear\", \"split\": \"col\", \"parts\": 2, \"stacked\": true},"
				   "{\"match\": \"output_linear\", \"split\": \"row\", \"stacked\": true},"
				   "{\"match\": \"gate_up_proj$\", \"split\": \"col\", \"transposed\": true, \"parts\": 2, \"stacked\": true},"
				   "{\"match\": \"down_bias\", \"split\": \"row\", \"stacked\": true},"
				   "{\"match\": \"last\", \"split\": \"dim\", \"dim\": -1, \"stacked\": true},"
				   "{\"match\": \"whole\", \"split\": \"replicate\", \"stacked\": true},"
				   "{\"match\": \"plain3d\", \"split\": \"col\"},"
				   "{\"match\": \"conv\", \"split\": \"row\"}]}",
			       &e),
			 0);
	assert_true(p.rules[0].stacked);
	int64_t in[3] = {4, 64, 32}, out[3] = {4, 32, 16}, gu[3] = {4, 32, 128}, bias[2] = {4, 32}, conv[4] = {8, 6, 1, 1};
	assert_int_equal(tpc_plan_resolve(&p, &f, "input_linear", 3, in, 4, 0, &s, NULL, &e), 0);
	assert_true(s.stacked);
	assert_int_equal(s.dim, 1); /* each expert's rows */
	assert_int_equal(s.nparts, 2);
	assert_int_equal(s.part[1].size, 32);
	assert_int_equal(tpc_split_rank_dim(&s, 4), 16);
	assert_int_equal(tpc_plan_resolve(&p, &f, "output_linear", 3, out, 2, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, 2); /* each expert's columns */
	assert_int_equal(tpc_plan_resolve(&p, &f, "x.gate_up_proj", 3, gu, 2, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, 2); /* [E, H, 2I]: transposed, col is the expert's dim 1 */
	assert_int_equal(s.part[0].size, 64);
	assert_int_equal(tpc_plan_resolve(&p, &f, "down_bias", 2, bias, 2, 0, &s, NULL, &e), 0);
	assert_true(s.row_bias && s.stacked);
	assert_int_equal(s.dim, -1); /* a row layer's bias per expert: added once */
	assert_int_equal(tpc_plan_resolve(&p, &f, "last", 3, out, 2, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, 2);
	assert_int_equal(tpc_plan_resolve(&p, &f, "whole", 3, out, 2, 0, &s, NULL, &e), 0);
	assert_true(s.stacked);
	assert_int_equal(s.dim, -1);
	/* gpt-oss's interleaved gate/up: pairs stay whole on each rank */
	tpc_plan q;
	assert_int_equal(parse(&q, "{\"rules\": [{\"match\": \"gate_up_proj\", \"split\": \"col\", \"transposed\": true, "
				   "\"stacked\": true, \"unit\": 2}]}", &e), 0);
	int64_t gu6[3] = {4, 32, 12}, gub[2] = {4, 12};
	assert_int_equal(tpc_plan_resolve(&q, &f, "gate_up_proj", 3, gu6, 2, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, 2);
	assert_int_equal(tpc_plan_resolve(&q, &f, "gate_up_proj_bias", 2, gub, 2, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, 1);
	tpc_err_init(&e); /* 12 / 4 = 3: a rank would end inside a pair */
	assert_int_equal(tpc_plan_resolve(&q, &f, "gate_up_proj", 3, gu6, 4, TPC_RESOLVE_PAD, &s, NULL, &e), TPC_EINPUT);
	assert_string_equal(e.tensor, "gate_up_proj");
	assert_non_null(strstr(e.msg, "units of 2"));
	tpc_plan_release(&q);
	/* unknown: refused by name, never col on dim 0 (whole experts per rank) */
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &f, "plain3d", 3, in, 2, 0, &s, NULL, &e), TPC_EINPUT);
	assert_string_equal(e.tensor, "plain3d");
	assert_non_null(strstr(e.msg, "a tensor of 3 dimensions that is not a matrix"));
	assert_non_null(strstr(e.msg, "\"stacked\": true"));
	/* a 1x1 convolution is a matrix: row splits its dim 1 as before */
	assert_int_equal(tpc_plan_resolve(&p, &f, "conv", 4, conv, 2, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, 1);
	assert_false(s.stacked);
	/* which experts a rank holds under expert parallelism */
	assert_int_equal(tpc_plan_resolve(&p, &f, "input_linear", 3, in, 2, 0, &s, NULL, &e), 0);
	int64_t first, step, count;
	tpc_split_experts(&s, 4, 4, 3, &first, &step, &count);
	assert_true(first == 0 && step == 1 && count == 4); /* no ep: all */
	s.ep = 2;
	s.ep_group = -1;
	assert_true(tpc_split_holds(&s, 4, 3) && tpc_split_first_rank(&s, 4) == 0 && tpc_split_tp(&s, 4) == 2);
	tpc_split_experts(&s, 4, 4, 3, &first, &step, &count);
	assert_true(first == 2 && step == 1 && count == 2); /* group 1: experts 2, 3 */
	s.ep_placement = TPC_EP_ROUND_ROBIN;
	tpc_split_experts(&s, 4, 4, 1, &first, &step, &count);
	assert_true(first == 0 && step == 2 && count == 2); /* group 0: experts 0, 2 */
	tpc_split t = s;
	t.stacked = false;
	assert_false(tpc_split_equal(&s, &t));
	/* data-parallel replicas: a stage of 4 ranks = tp 2 x dp 2; a dense
	 * tensor is split over 2 and rank 3 (tp 1, dp 1) holds rank 1's rows */
	tpc_split d;
	memset(&d, 0, sizeof(d));
	d.kind = TPC_SPLIT_COL;
	d.nparts = 1;
	d.part[0].size = 8;
	d.dp = 2;
	assert_true(tpc_split_tp(&d, 4) == 2 && tpc_split_local(&d, 4, 3) == 1 && tpc_split_holds(&d, 4, 3));
	assert_true(tpc_split_rank_len(&d, 0, 4) == 4 && tpc_split_rank_start(&d, 0, 4, 3) == 4);
	d.ep = 4; /* an expert's tensor: over its EP group (the stage's 4 ranks: 1 each), dp aside */
	d.ep_group = 3;
	assert_true(tpc_split_tp(&d, 4) == 1 && tpc_split_holds(&d, 4, 3) && !tpc_split_holds(&d, 4, 1));
	tpc_plan_release(&p);
}

static void test_ambiguous_and_fallback(void **st)
{
	(void)st;
	tpc_plan p;
	tpc_err e;
	tpc_split s;
	int64_t w[2] = {8, 8};
	tpc_model_facts f = {0};
	/* two rules that agree are fine (first match wins); two that disagree are an error */
	assert_int_equal(parse(&p, "{\"rules\": [{\"match\": \"a\\\\.w$\", \"split\": \"col\"}, {\"match\": \"w$\", \"split\": \"dim\", \"dim\": 0}, {\"match\": \"\\\\.w$\", \"split\": \"row\"}]}", &e), 0);
	tpc_err_init(&e);
	int r = tpc_plan_resolve(&p, &f, "a.w", 2, w, 2, 0, &s, NULL, &e);
	assert_int_equal(r, TPC_EINPUT);
	assert_non_null(strstr(e.msg, "matched by plan rules 0 ('a\\.w$', split col) and 2 ('\\.w$', split row) that disagree"));
	assert_string_equal(e.tensor, "a.w");
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &f, "b.v", 2, w, 2, 0, &s, NULL, &e), 0);
	assert_int_equal(s.dim, -1);
	tpc_plan_release(&p);
	assert_int_equal(parse(&p, "{\"rules\": [{\"match\": \"^x$\", \"split\": \"col\"}], \"fallback\": \"error\"}", &e), 0);
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &f, "y", 2, w, 2, 0, &s, NULL, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "no rule of the plan matches"));
	tpc_plan_release(&p);
	/* a rule's dim out of range for the tensor */
	assert_int_equal(parse(&p, "{\"rules\": [{\"match\": \"x\", \"split\": \"dim\", \"dim\": 3}]}", &e), 0);
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_resolve(&p, &f, "x", 2, w, 2, 0, &s, NULL, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "splits dim 3 but the tensor has 2 dimensions"));
	tpc_plan_release(&p);
}

static void test_stages(void **st)
{
	(void)st;
	tpc_plan p;
	tpc_err e;
	assert_int_equal(parse(&p, PLAN, &e), 0);
	assert_int_equal(tpc_plan_layer(&p, "model.layers.12.q.weight"), 12);
	assert_int_equal(tpc_plan_layer(&p, "emb.weight"), -1);
	/* 5 layers over 2 stages: 3 + 2 (the first stages take the extra layer) */
	int want[5] = {0, 0, 0, 1, 1};
	for (int l = 0; l < 5; l++) {
		char name[64];
		snprintf(name, sizeof(name), "layers.%d.q.weight", l);
		assert_int_equal(tpc_plan_stage(&p, name, 2, 5), want[l]);
	}
	/* 7 layers over 3 stages: 3 + 2 + 2 */
	assert_int_equal(tpc_plan_stage(&p, "layers.2.x", 3, 7), 0);
	assert_int_equal(tpc_plan_stage(&p, "layers.3.x", 3, 7), 1);
	assert_int_equal(tpc_plan_stage(&p, "layers.5.x", 3, 7), 2);
	assert_int_equal(tpc_plan_stage(&p, "head.weight", 3, 7), 2);
	assert_int_equal(tpc_plan_stage(&p, "m.norm.weight", 3, 7), 2);
	assert_int_equal(tpc_plan_stage(&p, "emb.weight", 3, 7), 0);
	assert_int_equal(tpc_plan_stage(&p, "head.weight", 1, 7), 0);
	/* --pp-layers 1,3,2,1 for 7 layers (first and last stages short), and a
	 * stage with none: 0,2 */
	static const int64_t c4[4] = {1, 3, 2, 1}, c2[2] = {0, 2};
	int want4[7] = {0, 1, 1, 1, 2, 2, 3};
	for (int l = 0; l < 7; l++) {
		char name[64];
		snprintf(name, sizeof(name), "layers.%d.q.weight", l);
		assert_int_equal(tpc_plan_stage_in(&p, name, 4, 7, c4), want4[l]);
	}
	assert_int_equal(tpc_plan_stage_in(&p, "layers.0.x", 2, 2, c2), 1);
	assert_int_equal(tpc_plan_stage_in(&p, "emb.weight", 2, 2, c2), 0);
	assert_int_equal(tpc_plan_stage_in(&p, "head.weight", 4, 7, c4), 3);
	assert_int_equal(tpc_plan_stage_in(&p, "layers.4.x", 3, 7, NULL), tpc_plan_stage(&p, "layers.4.x", 3, 7));
	tpc_plan_release(&p);
}

/* Seeded mutations of a valid plan: the parser must fail cleanly or succeed,
 * never crash or leak (run under the sanitizer build). */
static void test_mutations(void **st)
{
	(void)st;
	unsigned seed = (unsigned)time(NULL);
	const char *env = getenv("TPC_SEED");
	if (env)
		seed = (unsigned)strtoul(env, NULL, 10);
	printf("# test_mutations seed %u (TPC_SEED to replay)\n", seed);
	srand(seed);
	size_t n = strlen(PLAN);
	char *buf = malloc(n + 1);
	for (int it = 0; it < 3000; it++) {
		memcpy(buf, PLAN, n + 1);
		int k = 1 + rand() % 4;
		for (int j = 0; j < k; j++) {
			size_t pos = (size_t)rand() % n;
			static const char alphabet[] = "{}[]\",:0123456789-.\\qkv ";
			buf[pos] = (rand() % 2) ? alphabet[rand() % (int)(sizeof(alphabet) - 1)] : (char)(rand() % 256);
		}
		size_t len = (size_t)rand() % (n + 1);
		tpc_plan p;
		tpc_err e;
		tpc_err_init(&e);
		if (tpc_plan_from_buffer(&p, buf, len, "m", &e) == 0) {
			tpc_model_facts f = {.heads = 8, .kv_heads = 4, .head_dim = 4};
			tpc_split s;
			int64_t shp[2] = {64, 16};
			tpc_err_init(&e);
			(void)tpc_plan_resolve(&p, &f, "l.0.qkv.weight", 2, shp, 8, 0, &s, NULL, &e);
			tpc_plan_release(&p);
		} else {
			assert_true(e.code != 0 && e.msg[0]);
		}
	}
	free(buf);
}

/* Model facts against the shapes they govern (tpc_facts_check): q [16, 4] is 8
 * heads of 2, kv [4, 4] 2 heads, qkv [24, 4] = [q | kv | kv], emb [10, 4]. */
static void facts_ckpt(tpc_ckpt *ck)
{
	tpc_err e;
	int src;
	tpc_ckpt_init(ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_mem(ck, "mem", calloc(24 * 4, 4), 24 * 4 * 4, &src, &e), 0);
	const int64_t q[2] = {16, 4}, kv[2] = {4, 4}, qkv[2] = {24, 4}, emb[2] = {10, 4};
	assert_true(tpc_ckpt_add_tensor(ck, "l.0.q.weight", TPC_F32, 2, q, NULL, src, 0, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(ck, "l.0.kv.weight", TPC_F32, 2, kv, NULL, src, 0, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(ck, "l.0.qkv.weight", TPC_F32, 2, qkv, NULL, src, 0, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(ck, "emb.weight", TPC_F32, 2, emb, NULL, src, 0, &e) >= 0);
}

static int check_facts(const tpc_plan *p, const tpc_ckpt *ck, int64_t heads, int64_t kv, int64_t hd, int64_t vocab,
		       tpc_err *e)
{
	tpc_model_facts f;
	memset(&f, 0, sizeof(f));
	f.heads = heads;
	f.kv_heads = kv;
	f.head_dim = hd;
	f.vocab = vocab;
	tpc_facts_label(&f, "--x");
	tpc_err_init(e);
	return tpc_facts_check(&f, p, ck, e);
}

static void test_facts_check(void **st)
{
	(void)st;
	tpc_plan p;
	tpc_ckpt ck;
	tpc_err e;
	assert_int_equal(parse(&p, PLAN, &e), 0);
	facts_ckpt(&ck);
	assert_int_equal(check_facts(&p, &ck, 8, 2, 2, 10, &e), 0);
	assert_int_equal(check_facts(&p, &ck, 8, 2, 0, 0, &e), 0); /* one head size: 2 */
	assert_int_equal(check_facts(&p, &ck, 0, 0, 0, 0, &e), 0); /* nothing to check */
	assert_int_equal(check_facts(&p, &ck, 8, 4, 2, 0, &e), TPC_EUSAGE);
	assert_string_equal(e.tensor, "l.0.kv.weight");
	assert_string_equal(e.msg, "kv_heads 4 (--x) contradicts the shape [4, 4]: with head_dim 2 (--x) its 4 rows in dim 0 hold 2 key/value heads, not 4");
	assert_int_equal(check_facts(&p, &ck, 8, 4, 0, 0, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "kv_heads 4 (--x) and heads 8 (--x) contradict the shapes: this tensor [4, 4] has 4 rows / 4 key/value heads = 1 rows per head, 'l.0.q.weight' [16, 4] has 16 / 8 query heads = 2"));
	assert_int_equal(check_facts(&p, &ck, 8, 0, 4, 0, &e), TPC_EUSAGE);
	assert_string_equal(e.tensor, "l.0.q.weight");
	assert_non_null(strstr(e.msg, "hold 4 query heads, not 8"));
	assert_int_equal(check_facts(&p, &ck, 0, 2, 3, 0, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "head_dim 3 (--x) contradicts the shape [16, 4]: its 16 rows in dim 0 are not whole heads of 3 rows"));
	assert_int_equal(check_facts(&p, &ck, 0, 0, 0, 11, &e), TPC_EUSAGE);
	assert_string_equal(e.tensor, "emb.weight");
	/* the fused [q | kv | kv]: what the facts make of its parts (q and kv
	 * themselves dropped to reach it) */
	tpc_ckpt_release(&ck);
	facts_ckpt(&ck);
	for (int i = 0; i < 2; i++)
		ck.t[i].name[strlen(ck.t[i].name) - 1] = 'x'; /* "...weighx": no rule */
	assert_int_equal(check_facts(&p, &ck, 8, 3, 2, 0, &e), TPC_EUSAGE);
	assert_string_equal(e.tensor, "l.0.qkv.weight");
	assert_non_null(strstr(e.msg, "make the parts [16 + 6 + 6] = 28 rows, but dim 0 of the shape [24, 4] has 24"));
	tpc_ckpt_release(&ck);
	tpc_plan_release(&p);
}

/* Each fact keeps where it came from through the resolution. */
static void test_facts_origin(void **st)
{
	(void)st;
	tpc_model_facts a, b;
	tpc_err e;
	const char *cfg = "{\"hidden_size\": 64, \"num_attention_heads\": 8, \"padded_vocab_size\": 256}";
	tpc_err_init(&e);
	memset(&a, 0, sizeof(a));
	a.kv_heads = 2;
	tpc_facts_label(&a, "--kv-heads");
	assert_int_equal(tpc_facts_from_buffer(&b, cfg, strlen(cfg), "c.json", &e), 0);
	assert_true(b.vocab == 0 && b.padded_vocab == 256); /* a padded size is not the vocabulary */
	tpc_facts_fill(&a, &b);
	tpc_facts_finish(&a);
	assert_string_equal(a.origin[TPC_FACT_KV_HEADS], "--kv-heads");
	assert_string_equal(a.origin[TPC_FACT_HEADS], "'c.json'");
	assert_string_equal(a.origin[TPC_FACT_HEAD_DIM], "hidden 64 / heads 8, from 'c.json'");
	assert_string_equal(a.origin[TPC_FACT_VOCAB], "");
	tpc_megatron_args m = {.heads = 4, .query_groups = 4, .kv_channels = 16, .padded_vocab = 512};
	memset(&b, 0, sizeof(b));
	tpc_facts_from_megatron(&b, &m, "args");
	assert_true(b.heads == 4 && b.kv_heads == 4 && b.head_dim == 16 && b.vocab == 0 && b.padded_vocab == 512);
	assert_string_equal(b.origin[TPC_FACT_HEAD_DIM], "args");
	m.vocab = 500;
	memset(&b, 0, sizeof(b));
	tpc_facts_from_megatron(&b, &m, "args");
	assert_true(b.vocab == 500 && b.padded_vocab == 0);
}

/* What transformers keeps in f32 under a narrower dtype: the record's roles,
 * strict ones under f16 and bf16, the others under f16 only. */
/* The GGUF column's head_tile (roles written with their value heads tiled):
 * tpc_gguf_tile_of finds a listed role and no other; every record's rows
 * name a role of its own table that has a GGUF name, dim 0 or 1, both
 * spans, and the groups and heads both ways. */
static void test_gguf_tiles(void **st)
{
	(void)st;
	static const tpc_gguf_arch g = {.head_tile = {.groups = "k", .heads = "v", .key_groups = "kg", .key_heads = "vg",
						      .rows = {{TPC_ROLE_SSM_Z, 0, "v*d", "inner"}, {TPC_ROLE_SSM_OUT, 1, "v*d", "inner"}}}};
	assert_ptr_equal(tpc_gguf_tile_of(&g, TPC_ROLE_SSM_OUT), &g.head_tile.rows[1]);
	assert_null(tpc_gguf_tile_of(&g, TPC_ROLE_SSM_QKV));
	assert_null(tpc_gguf_tile_of(&g, TPC_ROLE_NONE));
	assert_null(tpc_gguf_tile_of(NULL, TPC_ROLE_SSM_Z));
	for (size_t i = 0; i < tpc_family_count(); i++) {
		const tpc_family *f = tpc_family_at(i);
		const tpc_gguf_arch *a = f->gguf;
		for (size_t k = 0; a && k < sizeof(a->head_tile.rows) / sizeof(a->head_tile.rows[0]); k++) {
			const tpc_gguf_tile_row *r = &a->head_tile.rows[k];
			if (r->role == TPC_ROLE_NONE)
				break;
			const tpc_tensor_row *row = tpc_family_row(f, r->role);
			if (!row || !row->name[TPC_ECO_GGUF] || (r->dim != 0 && r->dim != 1) || !r->span || !r->key_span ||
			    !a->head_tile.groups || !a->head_tile.heads || !a->head_tile.key_groups || !a->head_tile.key_heads)
				fail_msg("%s: head_tile row %zu (%s)", f->name, k, tpc_role_name(r->role));
		}
	}
}

static void test_keeps_f32(void **state)
{
	(void)state;
	const tpc_family *ernie = tpc_family_find("ernie4_5-moe"), *oss = tpc_family_find("gpt-oss"),
			 *llama = tpc_family_find("llama");
	assert_true(tpc_family_keeps_f32(ernie, "model.layers.1.mlp.gate.weight", TPC_BF16));
	assert_true(tpc_family_keeps_f32(ernie, "model.layers.1.mlp.moe_statics.e_score_correction_bias", TPC_F16));
	assert_false(tpc_family_keeps_f32(ernie, "model.layers.1.mlp.gate.weight", TPC_F32));
	assert_false(tpc_family_keeps_f32(ernie, "model.layers.1.mlp.experts.0.up_proj.weight", TPC_BF16));
	assert_true(tpc_family_keeps_f32(oss, "model.layers.0.input_layernorm.weight", TPC_F16));
	assert_true(tpc_family_keeps_f32(oss, "model.norm.weight", TPC_F16));
	assert_false(tpc_family_keeps_f32(oss, "model.norm.weight", TPC_BF16));
	assert_false(tpc_family_keeps_f32(llama, "model.norm.weight", TPC_F16));
	assert_false(tpc_family_keeps_f32(NULL, "model.norm.weight", TPC_F16));
}

/* An uneven part (vLLM's cut of gpt-oss's MXFP4 intermediate: 7 blocks over
 * 4 ranks, cdiv 2 a rank): every rank's slice is 2 long, the pad (1) is not
 * stored, so rank 3 holds 1; an even part and the equality of the two. */
static void test_uneven(void **st)
{
	(void)st;
	tpc_split s, t;
	memset(&s, 0, sizeof(s));
	s.kind = TPC_SPLIT_ROW;
	s.dim = 2;
	s.nparts = 1;
	s.part[0] = (tpc_split_part){7, 1, 0, 1, TPC_HEADS_NONE, true};
	static const int64_t take[4] = {2, 2, 2, 1}, off[4] = {0, 0, 0, 0};
	for (int r = 0; r < 4; r++) {
		assert_int_equal(tpc_split_rank_len(&s, 0, 4), 2);
		assert_int_equal(tpc_split_rank_start(&s, 0, 4, r), 2 * r);
		assert_int_equal(tpc_split_rank_take(&s, 0, 4, r), take[r]);
		assert_int_equal(tpc_split_rank_off(&s, 0, 4, r), off[r]);
		assert_int_equal(tpc_split_rank_off(&s, 1, 4, r), take[r]); /* the rank tensor's dim */
	}
	assert_true(tpc_split_uneven(&s));
	t = s;
	t.part[0].uneven = false; /* the padded split: rank 3 stores a zero row */
	assert_int_equal(tpc_split_rank_take(&t, 0, 4, 3), 2);
	assert_false(tpc_split_uneven(&t));
	assert_false(tpc_split_equal(&s, &t));
	t.part[0].uneven = true;
	assert_true(tpc_split_equal(&s, &t));
	/* a part ending before a rank starts: nothing on it (an empty slice) */
	s.part[0] = (tpc_split_part){5, 3, 0, 1, TPC_HEADS_NONE, true};
	assert_int_equal(tpc_split_rank_take(&s, 0, 4, 2), 1);
	assert_int_equal(tpc_split_rank_take(&s, 0, 4, 3), 0);
	s.dim = -1;
	assert_false(tpc_split_uneven(&s));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_plans),    cmocka_unit_test(test_presets),
		cmocka_unit_test(test_by_model_type), cmocka_unit_test(test_roles_and_defaults), cmocka_unit_test(test_row_forms),
		cmocka_unit_test(test_families),     cmocka_unit_test(test_regex_dialect),
		cmocka_unit_test(test_cfg_reader),   cmocka_unit_test(test_facts),        cmocka_unit_test(test_resolve),
		cmocka_unit_test(test_ambiguous_and_fallback), cmocka_unit_test(test_stages),
		cmocka_unit_test(test_mutations),    cmocka_unit_test(test_gated_and_rest),
		cmocka_unit_test(test_deepseek), cmocka_unit_test(test_deepseek_megatron_names),     cmocka_unit_test(test_facts_check),
		cmocka_unit_test(test_facts_origin), cmocka_unit_test(test_family_layout_records),
		cmocka_unit_test(test_stacked),      cmocka_unit_test(test_keeps_f32),
		cmocka_unit_test(test_ssm_parts),      cmocka_unit_test(test_linear_heads), cmocka_unit_test(test_gguf_tiles),
		cmocka_unit_test(test_uneven),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
