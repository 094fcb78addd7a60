/* test_family.c - what the family records say of a checkpoint's tensors
 * beyond their rows: a multimodal checkpoint's text model
 * (tpc_family_text_model) and a multi-token-prediction block
 * (tpc_family_mtp). */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>

#include "tpc_ckpt.h"
#include "tpc_family.h"
#include "tpc_family_gguf.h"

/* A multimodal checkpoint's text model (tpc_family_text_model, the
 * reference's TextModel.filter_tensors): "language_model." taken out of the
 * names, lm_head and the multi-token-prediction block mtp.* kept, the vision
 * tower left out and named by group; a renamed name that clashes with
 * another tensor refused. */
static void test_text_model(void **st)
{
	(void)st;
	static const char *names[] = {"lm_head.weight", "model.language_model.embed_tokens.weight",
				      "model.language_model.layers.0.linear_attn.in_proj_z.weight",
				      "model.visual.blocks.0.attn.qkv.weight", "model.visual.merger.fc.weight", "mtp.fc.weight"};
	const tpc_family *f = tpc_family_find("qwen3_5");
	tpc_ckpt ck;
	tpc_err e;
	int src;
	int64_t shp[1] = {4};
	char groups[128];
	size_t left = 0;
	assert_non_null(f);
	/* the records' multimodal classes */
	assert_ptr_equal(tpc_family_by_wrap("Qwen3_5ForConditionalGeneration"), f);
	assert_ptr_equal(tpc_family_by_wrap("Qwen3_5MoeForConditionalGeneration"), tpc_family_find("qwen3_5-moe"));
	assert_null(tpc_family_by_wrap("Qwen3_5ForCausalLM"));
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_mem(&ck, "mem", calloc(16, 1), 16, &src, &e), 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_true(tpc_ckpt_add_tensor(&ck, names[i], TPC_F32, 1, shp, NULL, src, 0, &e) >= 0);
	assert_int_equal(tpc_family_text_model(f, &ck, &left, groups, sizeof(groups), &e), 0);
	assert_int_equal(left, 2);
	assert_string_equal(groups, "model.visual.*");
	assert_int_equal(ck.n, 4);
	assert_true(tpc_ckpt_find(&ck, "mtp.fc.weight") >= 0);
	assert_true(tpc_ckpt_find(&ck, "lm_head.weight") >= 0);
	assert_true(tpc_ckpt_find(&ck, "model.embed_tokens.weight") >= 0);
	assert_true(tpc_ckpt_find(&ck, "model.layers.0.linear_attn.in_proj_z.weight") >= 0);
	/* the text model's name already another tensor's */
	assert_true(tpc_ckpt_add_tensor(&ck, "model.language_model.norm.weight", TPC_F32, 1, shp, NULL, src, 0, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(&ck, "model.norm.weight", TPC_F32, 1, shp, NULL, src, 0, &e) >= 0);
	assert_int_equal(tpc_family_text_model(f, &ck, &left, groups, sizeof(groups), &e), TPC_EINPUT);
	tpc_ckpt_release(&ck);
}

/* A record's multi-token-prediction block (tpc_family_mtp): its tensors under
 * the decoder-layer names convert_hf_to_gguf.py reads them as
 * (_QwenMtpMixin.filter_tensors) and back, classified by the record's rows
 * there; its layers counted in a checkpoint; every record's block names
 * rows of its own table. */
static void test_mtp(void **st)
{
	(void)st;
	static const struct {
		const char *mtp, *layer;
	} pairs[] = {{"mtp.fc.weight", "model.layers.4.eh_proj.weight"},
		     {"mtp.pre_fc_norm_embedding.weight", "model.layers.4.enorm.weight"},
		     {"mtp.pre_fc_norm_hidden.weight", "model.layers.4.hnorm.weight"},
		     {"mtp.norm.weight", "model.layers.4.shared_head.norm.weight"},
		     {"mtp.layers.0.self_attn.q_proj.weight", "model.layers.4.self_attn.q_proj.weight"},
		     {"mtp.layers.1.mlp.experts.3.up_proj.weight", "model.layers.5.mlp.experts.3.up_proj.weight"}};
	const tpc_family *f = tpc_family_find("qwen3_5-moe");
	char buf[128], small[12];
	int64_t l, x;
	bool b;
	assert_non_null(f);
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		assert_true(tpc_family_mtp_as_layer(f, pairs[i].mtp, 4, buf, sizeof(buf)));
		assert_string_equal(buf, pairs[i].layer);
		assert_non_null(tpc_family_classify(f, TPC_ECO_HF, buf, &l, &x, &b));
		assert_int_equal(l, i == 5 ? 5 : 4);
		assert_true(tpc_family_mtp_name(f, pairs[i].layer, 4, buf, sizeof(buf)));
		assert_string_equal(buf, pairs[i].mtp);
	}
	const tpc_tensor_row *r = tpc_family_classify(f, TPC_ECO_HF, "model.layers.4.eh_proj.weight", &l, &x, &b);
	assert_int_equal(r->role, TPC_ROLE_NEXTN_EH_PROJ);
	/* not the block's: a decoder layer, a name of no row, a layer number with a
	 * leading zero, no block (llama), a short buffer */
	assert_false(tpc_family_mtp_name(f, "model.layers.3.self_attn.q_proj.weight", 4, buf, sizeof(buf)));
	assert_false(tpc_family_mtp_as_layer(f, "model.layers.0.self_attn.q_proj.weight", 4, buf, sizeof(buf)));
	assert_false(tpc_family_mtp_as_layer(f, "mtp.bogus.weight", 4, buf, sizeof(buf)));
	assert_false(tpc_family_mtp_as_layer(f, "mtp.layers.01.input_layernorm.weight", 4, buf, sizeof(buf)));
	assert_false(tpc_family_mtp_as_layer(tpc_family_find("llama"), "mtp.fc.weight", 4, buf, sizeof(buf)));
	assert_false(tpc_family_mtp_as_layer(f, "mtp.layers.0.self_attn.q_proj.weight", 4, small, sizeof(small)));
	/* the layers a checkpoint holds: the highest N + 1 */
	tpc_ckpt ck;
	tpc_err e;
	int src;
	int64_t shp[1] = {4};
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_family_mtp_count(f, &ck), 0);
	assert_int_equal(tpc_ckpt_add_mem(&ck, "mem", calloc(16, 1), 16, &src, &e), 0);
	static const char *names[] = {"mtp.fc.weight", "mtp.layers.0.input_layernorm.weight", "mtp.layers.2.input_layernorm.weight",
				      "model.layers.7.input_layernorm.weight"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_true(tpc_ckpt_add_tensor(&ck, names[i], TPC_F32, 1, shp, NULL, src, 0, &e) >= 0);
	assert_int_equal(tpc_family_mtp_count(f, &ck), 3);
	assert_int_equal(tpc_family_mtp_count(tpc_family_find("llama"), &ck), 0);
	tpc_ckpt_release(&ck);
	/* every record's block: its names are rows of its table */
	for (size_t i = 0; i < tpc_family_count(); i++) {
		const tpc_family *g = tpc_family_at(i);
		for (int k = 0; g->mtp && k < 4 && g->mtp->names[k][0]; k++) {
			assert_true(tpc_family_mtp_as_layer(g, g->mtp->names[k][0], 2, buf, sizeof(buf)));
			if (!tpc_family_classify(g, TPC_ECO_HF, buf, &l, &x, &b))
				fail_msg("%s: the MTP block's %s has no row", g->name, g->mtp->names[k][0]);
		}
	}
}

/* hf_fused: transformers' fused expert parameters and the rows they hold,
 * in K order; every record's fused rows are expert rows with "{E}" in their
 * Hugging Face names, their parts 0 .. n-1 */
static void test_fused(void **st)
{
	(void)st;
	const tpc_tensor_row *rw[4];
	int64_t L;
	const tpc_family *mx = tpc_family_find("mixtral"), *q3 = tpc_family_find("qwen3-moe");
	assert_non_null(mx);
	assert_non_null(q3);
	assert_int_equal(tpc_family_fused_rows(mx, "model.layers.3.mlp.experts.gate_up_proj", &L, rw, 4), 2);
	assert_int_equal(L, 3);
	assert_int_equal(rw[0]->role, TPC_ROLE_FFN_GATE_EXP);
	assert_int_equal(rw[1]->role, TPC_ROLE_FFN_UP_EXP);
	assert_int_equal(tpc_family_fused_rows(mx, "model.layers.0.mlp.experts.down_proj", &L, rw, 4), 1);
	assert_int_equal(rw[0]->role, TPC_ROLE_FFN_DOWN_EXP);
	assert_int_equal(tpc_family_fused_rows(q3, "model.layers.12.mlp.experts.gate_up_proj", &L, rw, 4), 2);
	assert_int_equal(L, 12);
	assert_int_equal(tpc_family_fused_rows(mx, "model.layers.0.mlp.experts.gate_up_proj", &L, rw, 1), -1);
	assert_int_equal(tpc_family_fused_rows(mx, "model.layers.0.block_sparse_moe.gate.weight", &L, rw, 4), 0);
	assert_int_equal(tpc_family_fused_rows(mx, "model.layers.1.mlp.gate.weight", &L, rw, 4), 1); /* a rename */
	assert_int_equal(rw[0]->role, TPC_ROLE_FFN_GATE_INP);
	assert_int_equal(tpc_family_fused_rows(tpc_family_find("llama"), "model.layers.0.mlp.experts.down_proj", &L, rw, 4), 0);
	for (size_t i = 0; i < tpc_family_count(); i++) {
		const tpc_family *g = tpc_family_at(i);
		for (const tpc_tensor_row *w = g->tensors; w && w->role; w++) {
			if (!w->hf_fused)
				continue;
			char nm[256];
			int part;
			assert_true(w->name[TPC_ECO_HF] && (strstr(w->name[TPC_ECO_HF], "{E}") || !strchr(w->hf_fused, '#')));
			assert_true(tpc_family_name(w, TPC_ECO_HF, 0, 0, false, nm, sizeof(nm), &part));
			const char *h = strchr(w->hf_fused, '#');
			snprintf(nm, sizeof(nm), "%.*s", h ? (int)(h - w->hf_fused) : (int)strlen(w->hf_fused), w->hf_fused);
			char *at = strstr(nm, "{L}");
			assert_non_null(at);
			memmove(at + 1, at + 3, strlen(at + 3) + 1);
			at[0] = '5';
			int n = tpc_family_fused_rows(g, nm, &L, rw, 4);
			if (n < 1 || L != 5)
				fail_msg("%s: fused parameter %s: %d rows", g->name, nm, n);
		}
	}
}

/* --no-mtp: the records whose GGUF holds multi-token-prediction layers are
 * those whose convert_hf_to_gguf.py class has supports_mtp_export
 * (_QwenMtpMixin, Glm4MoeModel); DeepSeek-V3's DeepseekV2Model drops its layer
 * always and refuses the option, as every other class does */
static void test_no_mtp(void **st)
{
	static const char *with[] = {"glm4-moe", "qwen3-next", "qwen3_5", "qwen3_5-moe"};
	(void)st;
	for (size_t i = 0; i < tpc_family_count(); i++) {
		const tpc_family *g = tpc_family_at(i);
		bool want = false;
		for (size_t k = 0; k < sizeof(with) / sizeof(with[0]); k++)
			want |= !strcmp(g->name, with[k]);
		if (tpc_gguf_arch_has_mtp(g) != want)
			fail_msg("%s: tpc_gguf_arch_has_mtp says %d", g->name, !want);
	}
	assert_false(tpc_gguf_arch_has_mtp(NULL));
	assert_string_equal(tpc_family_find("glm4-moe")->gguf->mtp_count, "num_nextn_predict_layers");
}

/* The HunYuan vocabularies' record part (tpc_gguf_hy_vocab): every record
 * whose vocab kind is a HunYuan one has it, no other record has; the MoE's
 * (HunYuanMoEModel.set_vocab: pre "hunyuan", bos 127959 always, no eos or
 * eot) and the dense one's (HunYuanModel.set_vocab: pre "hunyuan-dense", bos
 * 127958 at hidden_size 4096 only, eos from eod_token_id with
 * HunYuanDenseV1Config's default 3, eot from generation_config.json); their
 * alpha ropes: the MoE's alpha 1000 on a hidden / heads head of 128, the
 * dense one's any alpha on config.json's head_dim (conversion/hunyuan.py) */
static void test_hy_parts(void **st)
{
	(void)st;
	for (size_t i = 0; i < tpc_family_count(); i++) {
		const tpc_family *g = tpc_family_at(i);
		bool hy = g->gguf && (g->gguf->vocab == TPC_GGUF_VOCAB_HY_TIKTOKEN ||
				      g->gguf->vocab == TPC_GGUF_VOCAB_HY_TIKTOKEN_OR_BPE);
		if (hy != (g->gguf && g->gguf->hy && g->gguf->hy->pre))
			fail_msg("%s: a HunYuan vocabulary kind %d, its hy part %p", g->name, hy,
				 g->gguf ? (const void *)g->gguf->hy : NULL);
	}
	const tpc_gguf_arch *m = tpc_family_find("hunyuan-moe")->gguf, *d = tpc_family_find("hunyuan-dense")->gguf;
	assert_string_equal(m->hy->pre, "hunyuan");
	assert_true(m->hy->bos == 127959 && m->hy->bos_hidden == 0 && !m->hy->eos_member && !m->hy->eot_gen);
	assert_string_equal(d->hy->pre, "hunyuan-dense");
	assert_true(d->hy->bos == 127958 && d->hy->bos_hidden == 4096 && d->hy->eos_default == 3 && d->hy->eot_gen);
	assert_string_equal(d->hy->eos_member, "eod_token_id");
	assert_true(!m->rope_alpha->any_alpha && m->rope_alpha->alpha == 1000 && m->rope_alpha->dim == 128 &&
		    !m->rope_alpha->dim_member);
	assert_true(d->rope_alpha->any_alpha && d->rope_alpha->dim == 0 && d->rope_alpha->theta == 10000);
	assert_string_equal(d->rope_alpha->dim_member, "head_dim");
	assert_ptr_equal(tpc_family_by_gguf_hf("HunYuanDenseV1ForCausalLM"), tpc_family_find("hunyuan-dense"));
	assert_ptr_equal(tpc_family_by_gguf("hunyuan-dense", -1), tpc_family_find("hunyuan-dense"));
}

/* A family's vllm_cfg_true is a vllm-layout condition: only records that
 * list the vllm layout have one */
static void test_vllm_cfg_true(void **st)
{
	(void)st;
	for (size_t i = 0; i < tpc_family_count(); i++) {
		const tpc_family *g = tpc_family_at(i);
		if (g->vllm_cfg_true && !tpc_family_lists(g->layouts, "vllm"))
			fail_msg("%s: vllm_cfg_true %s without the vllm layout", g->name, g->vllm_cfg_true);
	}
}

/* vllm_no_lm_head, vllm_tp_le_experts and vllm_tp_le_kv_heads: vllm-layout
 * conditions of records that list it, on tied families and families with
 * experts; the
 * vLLM names of Qwen2-MoE's shared expert are the smallest of its state
 * dict's keys, Qwen's routed experts FusedMoE's stacked ones */
static void test_vllm_fields(void **st)
{
	(void)st;
	for (size_t i = 0; i < tpc_family_count(); i++) {
		const tpc_family *g = tpc_family_at(i);
		if ((g->vllm_no_lm_head || g->vllm_tp_le_experts || g->vllm_tp_le_kv_heads) &&
		    !tpc_family_lists(g->layouts, "vllm"))
			fail_msg("%s: a vllm field without the vllm layout", g->name);
		if (g->vllm_no_lm_head && !(g->has_parts && g->parts.tied_head))
			fail_msg("%s: vllm_no_lm_head on a family not tied", g->name);
		if (g->vllm_tp_le_experts && !tpc_family_has_experts(g))
			fail_msg("%s: vllm_tp_le_experts without experts", g->name);
	}
	assert_true(tpc_family_find("gemma2")->vllm_no_lm_head && tpc_family_find("gemma3")->vllm_no_lm_head);
	assert_false(tpc_family_find("qwen2")->vllm_no_lm_head);
	const tpc_family *q2 = tpc_family_find("qwen2-moe"), *q3 = tpc_family_find("qwen3-moe");
	assert_true(q2->vllm_tp_le_experts && q3->vllm_tp_le_experts && !tpc_family_find("mixtral")->vllm_tp_le_experts);
	assert_true(tpc_family_find("olmo2")->vllm_tp_le_kv_heads && tpc_family_find("olmo3")->vllm_tp_le_kv_heads);
	assert_false(tpc_family_find("llama")->vllm_tp_le_kv_heads);
	char nm[256];
	int part = -1;
	const tpc_tensor_row *w = tpc_family_row(q2, TPC_ROLE_FFN_UP_SHEXP);
	assert_true(tpc_family_name(w, TPC_ECO_VLLM, 1, -1, false, nm, sizeof(nm), &part));
	assert_string_equal(nm, "model.layers.1.mlp.experts._shared_experts.gate_up_proj.weight");
	assert_int_equal(part, 1);
	assert_true(tpc_family_name(tpc_family_row(q2, TPC_ROLE_FFN_GATE_INP_SHEXP), TPC_ECO_VLLM, 0, -1, false, nm,
				    sizeof(nm), &part));
	assert_string_equal(nm, "model.layers.0.mlp.experts._shared_experts.expert_gate.weight");
	assert_int_equal(part, -1);
	w = tpc_family_row(q3, TPC_ROLE_FFN_GATE_EXP);
	assert_true(tpc_family_stacked(w, TPC_ECO_VLLM));
	assert_true(tpc_family_name(w, TPC_ECO_VLLM, 2, 5, false, nm, sizeof(nm), &part));
	assert_string_equal(nm, "model.layers.2.mlp.experts.w13_weight");
	assert_int_equal(part, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_model),
		cmocka_unit_test(test_mtp),
		cmocka_unit_test(test_fused),
		cmocka_unit_test(test_no_mtp),
		cmocka_unit_test(test_hy_parts),
		cmocka_unit_test(test_vllm_cfg_true),
		cmocka_unit_test(test_vllm_fields),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
