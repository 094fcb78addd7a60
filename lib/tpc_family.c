/* tpc_family.c - the model family records (tpc_family.h says what a record
 * holds); finding one and a tensor's row in it is tpc_family_lookup.c.
 *
 * Plans are plain plan JSON, parsed by the same tpc_plan_from_buffer a
 * user's --plan file goes through, so `tpconv plan NAME > my.json` is a
 * starting point that behaves exactly like --preset NAME. Sources for the
 * splits: ../shared/reference/SHARDING.md §1-2. Rules are written to be
 * disjoint; the resolver refuses two rules that disagree about one tensor.
 *
 * Sources for the names in the tensor tables:
 *   Megatron-Core  megatron/core/models/gpt/gpt_layer_specs.py (TE spec:
 *                  the input norms live in linear_qkv / linear_fc1), and
 *                  tools/checkpoint/loader_llama_mistral.py for the fusion
 *   vLLM           vllm/model_executor/models/llama.py stacked_params_mapping
 *   TensorRT-LLM   tensorrt_llm/models/llama/convert.py (param names of
 *                  load_weights_from_hf_model: mlp.fc = gate_proj, mlp.gate =
 *                  up_proj; MoE mlp.fc = [w3; w1] stacked over experts,
 *                  mlp.router; the same names in models/qwen/convert.py
 *                  convert_hf_qwen for Qwen2), models/gpt/convert.py for
 *                  GPT-2 (position_embedding, attention.qkv = c_attn)
 *   GGUF           gguf-py/gguf/constants.py TENSOR_NAMES (llama.cpp)
 */
#include "tpc_family.h"
#include "tpc_family_gguf.h"
#include "tpc_family_int.h"

/* ---- tensor tables ---- */

/* The LLaMA family's decoder: embedding, attention, final norm and head. */
#define LLAMA_ATTN_ROWS \
	ROW(TOKEN_EMBD, false, "model.embed_tokens.weight", "embedding.word_embeddings.weight", \
	    "model.embed_tokens.weight", "transformer.vocab_embedding.weight", "token_embd.weight"), \
	ROW(OUTPUT_NORM, false, "model.norm.weight", "decoder.final_layernorm.weight", "model.norm.weight", \
	    "transformer.ln_f.weight", "output_norm.weight"), \
	ROW(OUTPUT, false, "lm_head.weight", "output_layer.weight", "lm_head.weight", "lm_head.weight", "output.weight"), \
	ROW(ATTN_NORM, false, HF_L "input_layernorm.weight", MC_L "self_attention.linear_qkv.layer_norm_weight", \
	    HF_L "input_layernorm.weight", TR_L "input_layernorm.weight", GG_L "attn_norm.weight"), \
	ROW(ATTN_Q, true, HF_L "self_attn.q_proj.weight", MC_L "self_attention.linear_qkv.weight#0", \
	    HF_L "self_attn.qkv_proj.weight#0", TR_L "attention.qkv.weight#0", GG_L "attn_q.weight"), \
	ROW(ATTN_K, true, HF_L "self_attn.k_proj.weight", MC_L "self_attention.linear_qkv.weight#1", \
	    HF_L "self_attn.qkv_proj.weight#1", TR_L "attention.qkv.weight#1", GG_L "attn_k.weight"), \
	ROW(ATTN_V, true, HF_L "self_attn.v_proj.weight", MC_L "self_attention.linear_qkv.weight#2", \
	    HF_L "self_attn.qkv_proj.weight#2", TR_L "attention.qkv.weight#2", GG_L "attn_v.weight"), \
	ROW(ATTN_QKV, true, HF_L "self_attn.qkv_proj.weight", NULL, HF_L "self_attn.qkv_proj.weight", NULL, \
	    GG_L "attn_qkv.weight"), \
	ROW(ATTN_OUT, true, HF_L "self_attn.o_proj.weight", MC_L "self_attention.linear_proj.weight", \
	    HF_L "self_attn.o_proj.weight", TR_L "attention.dense.weight", GG_L "attn_output.weight"), \
	ROW(ATTN_Q_NORM, false, HF_L "self_attn.q_norm.weight", MC_L "self_attention.q_layernorm.weight", \
	    HF_L "self_attn.q_norm.weight", TR_L "attention.q_layernorm.weight", GG_L "attn_q_norm.weight"), \
	ROW(ATTN_K_NORM, false, HF_L "self_attn.k_norm.weight", MC_L "self_attention.k_layernorm.weight", \
	    HF_L "self_attn.k_norm.weight", TR_L "attention.k_layernorm.weight", GG_L "attn_k_norm.weight")
/* Its dense feed-forward (SwiGLU); Phi-3 fuses gate and up itself (llama.cpp
 * keeps the fused tensor as ffn_up). */
#define LLAMA_FFN_ROWS \
	ROW(FFN_NORM, false, HF_L "post_attention_layernorm.weight", MC_L "mlp.linear_fc1.layer_norm_weight", \
	    HF_L "post_attention_layernorm.weight", TR_L "post_layernorm.weight", GG_L "ffn_norm.weight"), \
	LLAMA_MLP_ROWS
#define LLAMA_MLP_ROWS \
	ROW(FFN_GATE, false, HF_L "mlp.gate_proj.weight", MC_L "mlp.linear_fc1.weight#0", HF_L "mlp.gate_up_proj.weight#0", \
	    TR_L "mlp.fc.weight", GG_L "ffn_gate.weight"), \
	ROW(FFN_UP, false, HF_L "mlp.up_proj.weight", MC_L "mlp.linear_fc1.weight#1", HF_L "mlp.gate_up_proj.weight#1", \
	    TR_L "mlp.gate.weight", GG_L "ffn_up.weight"), \
	ROW(FFN_GATE_UP, false, HF_L "mlp.gate_up_proj.weight", NULL, HF_L "mlp.gate_up_proj.weight", NULL, \
	    GG_L "ffn_up.weight"), \
	ROW(FFN_DOWN, false, HF_L "mlp.down_proj.weight", MC_L "mlp.linear_fc2.weight", HF_L "mlp.down_proj.weight", \
	    TR_L "mlp.proj.weight", GG_L "ffn_down.weight")

static const tpc_tensor_row llama_tensors[] = {LLAMA_ATTN_ROWS, LLAMA_FFN_ROWS, END_ROW};

/* OLMo 2 (Olmo2ForCausalLM): LLaMA's attention and MLP without input norms;
 * post_attention_layernorm and post_feedforward_layernorm norm each
 * sublayer's output before the residual add (so the first is not LLaMA's
 * FFN norm), q_norm/k_norm over the whole q and k projections. GGUF names:
 * gguf-py constants.py MODEL_ARCH.OLMO2 (ATTN_POST_NORM, FFN_POST_NORM). vLLM
 * (models/olmo2.py@028aedf6, which registry.py also gives Olmo3ForCausalLM):
 * the same names, q_norm [hidden] and k_norm [kv heads x head_dim] whole. */
static const tpc_tensor_row olmo2_tensors[] = {
	LLAMA_ATTN_ROWS,
	LLAMA_MLP_ROWS,
	ROW(ATTN_POST_NORM, false, HF_L "post_attention_layernorm.weight", NULL, HF_L "post_attention_layernorm.weight",
	    NULL, GG_L "post_attention_norm.weight"),
	ROW(FFN_POST_NORM, false, HF_L "post_feedforward_layernorm.weight", NULL, HF_L "post_feedforward_layernorm.weight",
	    NULL, GG_L "post_ffw_norm.weight"),
	END_ROW,
};

/* Gemma 2 / Gemma 3 (Gemma2ForCausalLM, Gemma3ForCausalLM): sandwich norms,
 * input_layernorm and pre_feedforward_layernorm before each sublayer,
 * post_attention_layernorm and post_feedforward_layernorm on its output
 * before the residual add (so the second is not LLaMA's FFN norm); Gemma
 * 3's per-head q_norm/k_norm are LLaMA's rows. GGUF names: gguf-py
 * constants.py MODEL_ARCH.GEMMA2/GEMMA3 (FFN_PRE_NORM is blk.N.ffn_norm). */
static const tpc_tensor_row gemma2_tensors[] = {
	LLAMA_ATTN_ROWS,
	LLAMA_MLP_ROWS,
	ROW(FFN_NORM, false, HF_L "pre_feedforward_layernorm.weight", NULL, HF_L "pre_feedforward_layernorm.weight", NULL,
	    GG_L "ffn_norm.weight"),
	ROW(ATTN_POST_NORM, false, HF_L "post_attention_layernorm.weight", NULL, HF_L "post_attention_layernorm.weight",
	    NULL, GG_L "post_attention_norm.weight"),
	ROW(FFN_POST_NORM, false, HF_L "post_feedforward_layernorm.weight", NULL, HF_L "post_feedforward_layernorm.weight",
	    NULL, GG_L "post_ffw_norm.weight"),
	END_ROW,
};

/* Seed-OSS (SeedOssForCausalLM): LLaMA's rows; llama.cpp's seed_oss names
 * the pre-MLP norm post_attention_norm (gguf-py constants.py
 * MODEL_ARCH.SEED_OSS has ATTN_POST_NORM, no FFN_NORM) */
static const tpc_tensor_row seedoss_tensors[] = {
	LLAMA_ATTN_ROWS,
	ROW(FFN_NORM, false, HF_L "post_attention_layernorm.weight", MC_L "mlp.linear_fc1.layer_norm_weight",
	    HF_L "post_attention_layernorm.weight", TR_L "post_layernorm.weight", GG_L "post_attention_norm.weight"),
	LLAMA_MLP_ROWS,
	END_ROW,
};

/* GLM-4 (Glm4ForCausalLM): LLaMA's attention and MLP rows (its fused
 * mlp.gate_up_proj [gate | up] is Phi-3's FFN_GATE_UP, llama.cpp's ffn_up),
 * sandwich norms: input_layernorm and post_attention_layernorm before each
 * sublayer (the second is LLaMA's FFN norm), post_self_attn_layernorm and
 * post_mlp_layernorm on its output before the residual add. GGUF names:
 * gguf-py constants.py MODEL_ARCH.GLM4 (tensor_mapping.py: ATTN_POST_NORM,
 * FFN_POST_NORM "glm-4-0414"). */
static const tpc_tensor_row glm4_tensors[] = {
	LLAMA_ATTN_ROWS,
	LLAMA_FFN_ROWS,
	ROW(ATTN_POST_NORM, false, HF_L "post_self_attn_layernorm.weight", NULL, NULL, NULL,
	    GG_L "post_attention_norm.weight"),
	ROW(FFN_POST_NORM, false, HF_L "post_mlp_layernorm.weight", NULL, NULL, NULL, GG_L "post_ffw_norm.weight"),
	END_ROW,
};

/* Mixtral: block_sparse_moe (a DeepSeek-style score correction bias beside
 * its router where config.json routes so: the MoE plan replicates it);
 * Megatron-Core's MoE layer keeps its norm apart
 * (pre_mlp_layernorm) and numbers local experts; vLLM's FusedMoE stacks them
 * (vllm/model_executor/layers/fused_moe/layer.py make_expert_params_mapping:
 * w1 and w3 into experts.w13_weight, shard ids w1 then w3 (_load_w13), w2
 * into experts.w2_weight; the router a ReplicatedLinear). */
static const tpc_tensor_row mixtral_tensors[] = {
	LLAMA_ATTN_ROWS,
	ROW(FFN_NORM, false, HF_L "post_attention_layernorm.weight", MC_L "pre_mlp_layernorm.weight",
	    HF_L "post_attention_layernorm.weight", TR_L "post_layernorm.weight", GG_L "ffn_norm.weight"),
	ROW_FUSED(FFN_GATE_INP, false, HF_L "block_sparse_moe.gate.weight", MC_L "mlp.router.weight",
		  HF_L "block_sparse_moe.gate.weight", TR_L "mlp.router.weight", GG_L "ffn_gate_inp.weight",
		  HF_L "mlp.gate.weight"),
	ROW(FFN_EXP_PROBS_B, false, HF_L "block_sparse_moe.gate.e_score_correction_bias", NULL, NULL, NULL, NULL),
	ROW_FUSED(FFN_GATE_EXP, false, HF_L "block_sparse_moe.experts.{E}.w1.weight",
		  MC_L "mlp.experts.local_experts.{E}.linear_fc1.weight#0", HF_L "block_sparse_moe.experts.w13_weight#0",
		  TR_L "mlp.fc.weight#1", GG_L "ffn_gate_exps.weight", HF_L "mlp.experts.gate_up_proj#0"),
	ROW_FUSED(FFN_UP_EXP, false, HF_L "block_sparse_moe.experts.{E}.w3.weight",
		  MC_L "mlp.experts.local_experts.{E}.linear_fc1.weight#1", HF_L "block_sparse_moe.experts.w13_weight#1",
		  TR_L "mlp.fc.weight#0", GG_L "ffn_up_exps.weight", HF_L "mlp.experts.gate_up_proj#1"),
	ROW_FUSED(FFN_DOWN_EXP, false, HF_L "block_sparse_moe.experts.{E}.w2.weight",
		  MC_L "mlp.experts.local_experts.{E}.linear_fc2.weight", HF_L "block_sparse_moe.experts.w2_weight",
		  TR_L "mlp.proj.weight", GG_L "ffn_down_exps.weight", HF_L "mlp.experts.down_proj"),
	END_ROW,
};

/* Qwen2-MoE / Qwen3-MoE: mlp.experts with their router (and a score
 * correction bias where config.json routes as DeepSeek-V3: the MoE plan
 * replicates it), and dense layers (mlp_only_layers) named as LLaMA's.
 * transformers 5 fuses the experts (conversion_mapping.py "qwen2_moe", also
 * qwen3_moe's and olmoe's): mlp.experts.gate_up_proj [E, 2I, H] (gate, up),
 * mlp.experts.down_proj [E, H, I]. vLLM (models/qwen2_moe.py@002fb907,
 * qwen3_moe.py@002456df) holds them in one FusedMoE as Mixtral's:
 * get_expert_mapping() maps gate_proj to shard w1 and up_proj to w3 of
 * experts.w13_weight, down_proj to experts.w2_weight; the router mlp.gate a
 * ReplicatedLinear. */
#define QWEN_MOE_ROWS \
	LLAMA_ATTN_ROWS, \
	ROW(FFN_NORM, false, HF_L "post_attention_layernorm.weight", MC_L "pre_mlp_layernorm.weight", \
	    HF_L "post_attention_layernorm.weight", TR_L "post_layernorm.weight", GG_L "ffn_norm.weight"), \
	LLAMA_MLP_ROWS, \
	ROW(FFN_GATE_INP, false, HF_L "mlp.gate.weight", MC_L "mlp.router.weight", HF_L "mlp.gate.weight", NULL, \
	    GG_L "ffn_gate_inp.weight"), \
	ROW(FFN_EXP_PROBS_B, false, HF_L "mlp.gate.e_score_correction_bias", NULL, NULL, NULL, NULL), \
	ROW_FUSED(FFN_GATE_EXP, false, HF_L "mlp.experts.{E}.gate_proj.weight", \
		  MC_L "mlp.experts.local_experts.{E}.linear_fc1.weight#0", HF_L "mlp.experts.w13_weight#0", NULL, \
		  GG_L "ffn_gate_exps.weight", HF_L "mlp.experts.gate_up_proj#0"), \
	ROW_FUSED(FFN_UP_EXP, false, HF_L "mlp.experts.{E}.up_proj.weight", \
		  MC_L "mlp.experts.local_experts.{E}.linear_fc1.weight#1", HF_L "mlp.experts.w13_weight#1", NULL, \
		  GG_L "ffn_up_exps.weight", HF_L "mlp.experts.gate_up_proj#1"), \
	ROW_FUSED(FFN_DOWN_EXP, false, HF_L "mlp.experts.{E}.down_proj.weight", \
		  MC_L "mlp.experts.local_experts.{E}.linear_fc2.weight", HF_L "mlp.experts.w2_weight", NULL, \
		  GG_L "ffn_down_exps.weight", HF_L "mlp.experts.down_proj")
/* Qwen2-MoE: a shared expert with its sigmoid gate besides. vLLM
 * (models/qwen2_moe.py@002fb907) builds the shared expert as a Qwen2MoeMLP
 * (gate_up_proj a MergedColumnParallelLinear [gate_r; up_r], down_proj a
 * RowParallelLinear) holding shared_expert_gate, a torch.nn.Linear(hidden,
 * 1), as its expert_gate, and hands it to SharedFusedMoE, which keeps it as
 * the submodule _shared_experts (layers/fused_moe/shared_fused_moe.py@03974a3f);
 * so the state dict holds each of these tensors under two or three module
 * paths and _filter_subtensors keeps the smallest key: experts._shared_experts.*
 * ("mlp.e" < "mlp.s"), the names below. */
static const tpc_tensor_row qwen2moe_tensors[] = {
	QWEN_MOE_ROWS,
	ROW(FFN_GATE_SHEXP, false, HF_L "mlp.shared_expert.gate_proj.weight",
	    MC_L "mlp.shared_experts.linear_fc1.weight#0", HF_L "mlp.experts._shared_experts.gate_up_proj.weight#0", NULL,
	    GG_L "ffn_gate_shexp.weight"),
	ROW(FFN_UP_SHEXP, false, HF_L "mlp.shared_expert.up_proj.weight", MC_L "mlp.shared_experts.linear_fc1.weight#1",
	    HF_L "mlp.experts._shared_experts.gate_up_proj.weight#1", NULL, GG_L "ffn_up_shexp.weight"),
	ROW(FFN_DOWN_SHEXP, false, HF_L "mlp.shared_expert.down_proj.weight", MC_L "mlp.shared_experts.linear_fc2.weight",
	    HF_L "mlp.experts._shared_experts.down_proj.weight", NULL, GG_L "ffn_down_shexp.weight"),
	ROW(FFN_GATE_INP_SHEXP, false, HF_L "mlp.shared_expert_gate.weight", MC_L "mlp.shared_experts.gate_weight",
	    HF_L "mlp.experts._shared_experts.expert_gate.weight", NULL, GG_L "ffn_gate_inp_shexp.weight"),
	END_ROW,
};
/* Qwen3-MoE: no shared expert; q_norm/k_norm per head (LLaMA's rows).
 * GGUF names: gguf-py constants.py MODEL_ARCH.QWEN3MOE. */
static const tpc_tensor_row qwen3moe_tensors[] = {QWEN_MOE_ROWS, END_ROW};
/* OLMoE: Qwen's expert names, no shared expert; q_norm/k_norm over the whole
 * q and k projections (LLaMA's rows). GGUF names: MODEL_ARCH.OLMOE. */
static const tpc_tensor_row olmoe_tensors[] = {QWEN_MOE_ROWS, END_ROW};

/* GLM-4.5 MoE (Glm4MoeForCausalLM): LLaMA's attention rows (q/k/v biases,
 * per-head q_norm/k_norm with use_qk_norm), its FFN norm named
 * post_attention_norm in GGUF (MODEL_ARCH.GLM4_MOE has no FFN_NORM), the
 * first_k_dense_replace dense layers as LLaMA's MLP, then DeepSeek-V3's
 * router (mlp.gate and its e_score_correction_bias, GGUF exp_probs_b.bias),
 * routed experts and shared_experts; a next-token-prediction layer after
 * the num_hidden_layers (num_nextn_predict_layers: a MoE layer and eh_proj,
 * enorm, hnorm, shared_head; GGUF blk.N.nextn.*). Hugging Face and GGUF
 * names only. */
static const tpc_tensor_row glm4moe_tensors[] = {
	LLAMA_ATTN_ROWS,
	ROW(FFN_NORM, false, HF_L "post_attention_layernorm.weight", NULL, NULL, NULL, GG_L "post_attention_norm.weight"),
	LLAMA_MLP_ROWS,
	ROW(FFN_GATE_INP, false, HF_L "mlp.gate.weight", NULL, NULL, NULL, GG_L "ffn_gate_inp.weight"),
	ROW(FFN_EXP_PROBS_B, false, HF_L "mlp.gate.e_score_correction_bias", NULL, NULL, NULL, GG_L "exp_probs_b.bias"),
	ROW(FFN_GATE_EXP, false, HF_L "mlp.experts.{E}.gate_proj.weight", NULL, NULL, NULL, GG_L "ffn_gate_exps.weight"),
	ROW(FFN_UP_EXP, false, HF_L "mlp.experts.{E}.up_proj.weight", NULL, NULL, NULL, GG_L "ffn_up_exps.weight"),
	ROW(FFN_DOWN_EXP, false, HF_L "mlp.experts.{E}.down_proj.weight", NULL, NULL, NULL, GG_L "ffn_down_exps.weight"),
	ROW(FFN_GATE_SHEXP, false, HF_L "mlp.shared_experts.gate_proj.weight", NULL, NULL, NULL, GG_L "ffn_gate_shexp.weight"),
	ROW(FFN_UP_SHEXP, false, HF_L "mlp.shared_experts.up_proj.weight", NULL, NULL, NULL, GG_L "ffn_up_shexp.weight"),
	ROW(FFN_DOWN_SHEXP, false, HF_L "mlp.shared_experts.down_proj.weight", NULL, NULL, NULL, GG_L "ffn_down_shexp.weight"),
	ROW(NEXTN_EH_PROJ, false, HF_L "eh_proj.weight", NULL, NULL, NULL, GG_L "nextn.eh_proj.weight"),
	ROW(NEXTN_EMBD, false, HF_L "embed_tokens.weight", NULL, NULL, NULL, GG_L "nextn.embed_tokens.weight"),
	ROW(NEXTN_ENORM, false, HF_L "enorm.weight", NULL, NULL, NULL, GG_L "nextn.enorm.weight"),
	ROW(NEXTN_HNORM, false, HF_L "hnorm.weight", NULL, NULL, NULL, GG_L "nextn.hnorm.weight"),
	ROW(NEXTN_HEAD, false, HF_L "shared_head.head.weight", NULL, NULL, NULL, GG_L "nextn.shared_head_head.weight"),
	ROW(NEXTN_HEAD_NORM, false, HF_L "shared_head.norm.weight", NULL, NULL, NULL, GG_L "nextn.shared_head_norm.weight"),
	END_ROW,
};

/* Granite-MoE (GraniteMoeForCausalLM): LLaMA's attention; its experts
 * stacked in the checkpoint itself (no "{E}"), input_linear [E, 2I, H] the
 * gate (#0) and up (#1) of each expert, output_linear [E, H, I], the router
 * a Linear(hidden, experts). GGUF names: MODEL_ARCH.GRANITE_MOE
 * (GraniteMoeModel splits input_linear into ffn_gate_exps, ffn_up_exps). */
#define GRANITEMOE_ROWS \
	LLAMA_ATTN_ROWS, \
	ROW(FFN_NORM, false, HF_L "post_attention_layernorm.weight", NULL, NULL, NULL, GG_L "ffn_norm.weight"), \
	ROW(FFN_GATE_INP, false, HF_L "block_sparse_moe.router.layer.weight", NULL, NULL, NULL, GG_L "ffn_gate_inp.weight"), \
	ROW(FFN_GATE_EXP, false, HF_L "block_sparse_moe.input_linear.weight#0", NULL, NULL, NULL, GG_L "ffn_gate_exps.weight"), \
	ROW(FFN_UP_EXP, false, HF_L "block_sparse_moe.input_linear.weight#1", NULL, NULL, NULL, GG_L "ffn_up_exps.weight"), \
	ROW(FFN_DOWN_EXP, false, HF_L "block_sparse_moe.output_linear.weight", NULL, NULL, NULL, GG_L "ffn_down_exps.weight")
static const tpc_tensor_row granitemoe_tensors[] = {GRANITEMOE_ROWS, END_ROW};
/* Granite-MoE with a shared expert (GraniteMoeSharedForCausalLM):
 * shared_mlp.input_linear [2 x shared_intermediate_size, hidden], its gate
 * (#0) and up (#1), and output_linear, added ungated to the experts'
 * output. GGUF names: ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp. */
static const tpc_tensor_row granitemoe_shared_tensors[] = {
	GRANITEMOE_ROWS,
	ROW(FFN_GATE_SHEXP, false, HF_L "shared_mlp.input_linear.weight#0", NULL, NULL, NULL, GG_L "ffn_gate_shexp.weight"),
	ROW(FFN_UP_SHEXP, false, HF_L "shared_mlp.input_linear.weight#1", NULL, NULL, NULL, GG_L "ffn_up_shexp.weight"),
	ROW(FFN_DOWN_SHEXP, false, HF_L "shared_mlp.output_linear.weight", NULL, NULL, NULL, GG_L "ffn_down_shexp.weight"),
	END_ROW,
};

/* Granite 4 (GraniteMoeHybridForCausalLM): layer_types' "mamba" layers a
 * Mamba-2 mixer (mamba.in_proj, conv1d and its bias, dt_bias, A_log, D, the
 * gated norm, out_proj), the "attention" layers LLaMA's attention; each
 * layer then Granite-MoE's experts beside a shared MLP (shared_mlp) under
 * post_attention_layernorm. GGUF names: MODEL_ARCH.GRANITE_HYBRID
 * (GraniteHybridModel: Mamba2Model's ssm_* names, dt_bias as ssm_dt.bias). */
#define MAMBA2_ROWS \
	ROW(SSM_IN, true, HF_L "mamba.in_proj.weight", NULL, NULL, NULL, GG_L "ssm_in.weight"), \
	ROW(SSM_CONV1D, true, HF_L "mamba.conv1d.weight", NULL, NULL, NULL, GG_L "ssm_conv1d.weight"), \
	ROW(SSM_DT, false, HF_L "mamba.dt_bias", NULL, NULL, NULL, GG_L "ssm_dt.bias"), \
	ROW(SSM_A, false, HF_L "mamba.A_log", NULL, NULL, NULL, GG_L "ssm_a"), \
	ROW(SSM_D, false, HF_L "mamba.D", NULL, NULL, NULL, GG_L "ssm_d"), \
	ROW(SSM_NORM, false, HF_L "mamba.norm.weight", NULL, NULL, NULL, GG_L "ssm_norm.weight"), \
	ROW(SSM_OUT, true, HF_L "mamba.out_proj.weight", NULL, NULL, NULL, GG_L "ssm_out.weight")
static const tpc_tensor_row granitehybrid_tensors[] = {
	GRANITEMOE_ROWS,
	ROW(FFN_GATE_SHEXP, false, HF_L "shared_mlp.input_linear.weight#0", NULL, NULL, NULL, GG_L "ffn_gate_shexp.weight"),
	ROW(FFN_UP_SHEXP, false, HF_L "shared_mlp.input_linear.weight#1", NULL, NULL, NULL, GG_L "ffn_up_shexp.weight"),
	ROW(FFN_DOWN_SHEXP, false, HF_L "shared_mlp.output_linear.weight", NULL, NULL, NULL, GG_L "ffn_down_shexp.weight"),
	MAMBA2_ROWS,
	END_ROW,
};
/* Granite 4 without experts (num_local_experts 0): the shared MLP alone,
 * which GraniteMoeModel.modify_tensors names ffn_gate, ffn_up, ffn_down */
static const tpc_tensor_row granitehybrid_dense_tensors[] = {
	LLAMA_ATTN_ROWS,
	ROW(FFN_NORM, false, HF_L "post_attention_layernorm.weight", NULL, NULL, NULL, GG_L "ffn_norm.weight"),
	ROW(FFN_GATE, false, HF_L "shared_mlp.input_linear.weight#0", NULL, NULL, NULL, GG_L "ffn_gate.weight"),
	ROW(FFN_UP, false, HF_L "shared_mlp.input_linear.weight#1", NULL, NULL, NULL, GG_L "ffn_up.weight"),
	ROW(FFN_DOWN, false, HF_L "shared_mlp.output_linear.weight", NULL, NULL, NULL, GG_L "ffn_down.weight"),
	MAMBA2_ROWS,
	END_ROW,
};

/* A row with a Hugging Face name alone. */
#define HF_ONLY(R, B, NAME) ROW(R, B, NAME, NULL, NULL, NULL, NULL)

/* gpt-oss (GptOssForCausalLM, bf16 or f32; MXFP4 experts are their layer's
 * quantized companions, shard/tpc_qsplit.c, GGUF mxfp4_blocks): LLaMA's
 * attention with q/k/v/o biases and a sink logit per query head
 * (self_attn.sinks); the router a Linear(hidden, experts) with a bias; the
 * experts stacked in the checkpoint [in, out] (hf_in_out): gate_up_proj [E,
 * H, 2I] with gate and up interleaved along its out dim (hf_interleaved:
 * gate at even, up at odd columns), down_proj [E, I, H], each with a bias
 * [E, 2I], [E, H] (gate_up_proj_bias, down_proj_bias). Hugging Face and
 * GGUF names (gguf-py constants.py MODEL_ARCH.GPT_OSS: the FFN norm is
 * post_attention_norm, the sinks attn_sinks.weight); no other ecosystem's. */
#define ROW_IO(R, B, IL, HF, GG) {TPC_ROLE_##R, B, {HF, NULL, NULL, NULL, GG}, true, IL, NULL}
#define HG(R, B, HF, GG) ROW(R, B, HF, NULL, NULL, NULL, GG)
static const tpc_tensor_row gptoss_tensors[] = {
	HG(TOKEN_EMBD, false, "model.embed_tokens.weight", "token_embd.weight"),
	HG(OUTPUT_NORM, false, "model.norm.weight", "output_norm.weight"),
	HG(OUTPUT, false, "lm_head.weight", "output.weight"),
	HG(ATTN_NORM, false, HF_L "input_layernorm.weight", GG_L "attn_norm.weight"),
	HG(ATTN_Q, true, HF_L "self_attn.q_proj.weight", GG_L "attn_q.weight"),
	HG(ATTN_K, true, HF_L "self_attn.k_proj.weight", GG_L "attn_k.weight"),
	HG(ATTN_V, true, HF_L "self_attn.v_proj.weight", GG_L "attn_v.weight"),
	HG(ATTN_OUT, true, HF_L "self_attn.o_proj.weight", GG_L "attn_output.weight"),
	HG(ATTN_SINKS, false, HF_L "self_attn.sinks", GG_L "attn_sinks.weight"),
	HG(FFN_NORM, false, HF_L "post_attention_layernorm.weight", GG_L "post_attention_norm.weight"),
	HG(FFN_GATE_INP, true, HF_L "mlp.router.weight", GG_L "ffn_gate_inp.weight"),
	ROW_IO(FFN_GATE_EXP, true, true, HF_L "mlp.experts.gate_up_proj#0", GG_L "ffn_gate_exps.weight"),
	ROW_IO(FFN_UP_EXP, true, true, HF_L "mlp.experts.gate_up_proj#1", GG_L "ffn_up_exps.weight"),
	ROW_IO(FFN_DOWN_EXP, true, false, HF_L "mlp.experts.down_proj", GG_L "ffn_down_exps.weight"),
	END_ROW,
};
#undef ROW_IO
#undef HG

/* DeepSeek-V2/V3: LLaMA's top, norms and dense MLP layers
 * (first_k_dense_replace); multi-head latent attention, q_a_proj ->
 * q_a_layernorm -> q_b_proj (or V2-Lite's q_proj) and kv_a_proj_with_mqa ->
 * kv_a_layernorm -> kv_b_proj, then o_proj; the routed experts
 * mlp.experts.{E} under the router mlp.gate and its
 * e_score_correction_bias, shared_experts beside them (no gate). GGUF
 * names are llama.cpp's deepseek2 (kv_b_proj has no one GGUF tensor:
 * convert_hf_to_gguf.py splits it per head into attn_k_b and attn_v_b, the
 * GGUF column's head_split).
 * Megatron-Core names: GPTModel with the TransformerEngine layer spec and
 * multi_latent_attention (Megatron-LM d98e8a6; Megatron-Bridge's
 * models/deepseek/common.py maps the same pairs):
 *   - the input norm is its own TENorm, decoder.layers.L.input_layernorm
 *     (models/gpt/gpt_layer_specs.py:295-296: MLA is not fused into a
 *     linear_qkv);
 *   - q_a_proj is linear_q_down_proj and kv_a_proj_with_mqa
 *     linear_kv_down_proj, TELinear in parallel_mode "duplicated"
 *     (gpt_layer_specs.py:302,304; transformer/multi_latent_attention.py:
 *     526-527, 573-574), whole on every rank, stored by tp rank 0
 *     (extensions/transformer_engine.py:1354-1370 over the TP group it
 *     takes, 1320-1321); kv's rows are [kv_lora_rank latent;
 *     qk_rope_head_dim rope key] as Hugging Face stores them
 *     (multi_latent_attention.py:584-588 its width, 750-751 the split), the
 *     rope part in interleaved pairs, as Megatron applies it to MLA
 *     (mla_rotary_interleaved, multi_latent_attention.py:951,962;
 *     models/common/embeddings/rope_utils.py:135-138);
 *   - with qk_layernorm the q_a and kv_a norms are fused into the up
 *     projections, TELayerNormColumnParallelLinear: linear_q_up_proj and
 *     linear_kv_up_proj's layer_norm_weight (gpt_layer_specs.py:244-255;
 *     transformer/mla_qk_norm_config.py:132-168), their weights
 *     column-parallel by heads (each head's rows [qk_head_dim nope;
 *     qk_pos_emb_head_dim rope] and [qk_head_dim; v_head_dim] as Hugging
 *     Face's, multi_latent_attention.py:557-570, 604-617); linear_proj
 *     row-parallel (its columns heads x v_head_dim, 218-231);
 *   - V2-Lite's q_proj (q_lora_rank None) has none: with qk_layernorm
 *     Megatron builds linear_q_proj as a fused norm + linear whose norm the
 *     Hugging Face model has not (mla_qk_norm_config.py:147-150), without
 *     it kv_a_layernorm has no place (94-106);
 *   - the router weight and its score correction bias (expert_bias, a
 *     float32 buffer with moe_router_enable_expert_bias,
 *     transformer/moe/router.py:64-66, 180-197), both replicated;
 *   - shared_experts a SharedExpertMLP over the whole tensor-parallel group,
 *     linear_fc1 [gate; up] and linear_fc2 as a dense MLP's
 *     (transformer/moe/shared_experts.py:102-134, 209-227;
 *     models/gpt/moe_module_specs.py:74-84), no gate weight. */
#define HF_ONLY(R, B, NAME) ROW(R, B, NAME, NULL, NULL, NULL, NULL)
#define HF_GG(R, B, NAME, GG) ROW(R, B, NAME, NULL, NULL, NULL, GG)
#define HMG(R, NAME, MC, GG) ROW(R, false, NAME, MC, NULL, NULL, GG)
static const tpc_tensor_row deepseek_tensors[] = {
	HMG(TOKEN_EMBD, "model.embed_tokens.weight", "embedding.word_embeddings.weight", "token_embd.weight"),
	HMG(OUTPUT_NORM, "model.norm.weight", "decoder.final_layernorm.weight", "output_norm.weight"),
	HMG(OUTPUT, "lm_head.weight", "output_layer.weight", "output.weight"),
	HMG(ATTN_NORM, HF_L "input_layernorm.weight", MC_L "input_layernorm.weight", GG_L "attn_norm.weight"),
	HF_GG(ATTN_Q, false, HF_L "self_attn.q_proj.weight", GG_L "attn_q.weight"),
	HMG(ATTN_Q_A, HF_L "self_attn.q_a_proj.weight", MC_L "self_attention.linear_q_down_proj.weight", GG_L "attn_q_a.weight"),
	HMG(ATTN_Q_A_NORM, HF_L "self_attn.q_a_layernorm.weight", MC_L "self_attention.linear_q_up_proj.layer_norm_weight",
	    GG_L "attn_q_a_norm.weight"),
	HMG(ATTN_Q_B, HF_L "self_attn.q_b_proj.weight", MC_L "self_attention.linear_q_up_proj.weight", GG_L "attn_q_b.weight"),
	HMG(ATTN_KV_A_MQA, HF_L "self_attn.kv_a_proj_with_mqa.weight", MC_L "self_attention.linear_kv_down_proj.weight",
	    GG_L "attn_kv_a_mqa.weight"),
	HMG(ATTN_KV_A_NORM, HF_L "self_attn.kv_a_layernorm.weight", MC_L "self_attention.linear_kv_up_proj.layer_norm_weight",
	    GG_L "attn_kv_a_norm.weight"),
	HMG(ATTN_KV_B, HF_L "self_attn.kv_b_proj.weight", MC_L "self_attention.linear_kv_up_proj.weight", NULL),
	HMG(ATTN_OUT, HF_L "self_attn.o_proj.weight", MC_L "self_attention.linear_proj.weight", GG_L "attn_output.weight"),
	HMG(FFN_NORM, HF_L "post_attention_layernorm.weight", MC_L "pre_mlp_layernorm.weight", GG_L "ffn_norm.weight"),
	HMG(FFN_GATE, HF_L "mlp.gate_proj.weight", MC_L "mlp.linear_fc1.weight#0", GG_L "ffn_gate.weight"),
	HMG(FFN_UP, HF_L "mlp.up_proj.weight", MC_L "mlp.linear_fc1.weight#1", GG_L "ffn_up.weight"),
	HMG(FFN_DOWN, HF_L "mlp.down_proj.weight", MC_L "mlp.linear_fc2.weight", GG_L "ffn_down.weight"),
	HMG(FFN_GATE_INP, HF_L "mlp.gate.weight", MC_L "mlp.router.weight", GG_L "ffn_gate_inp.weight"),
	HMG(FFN_EXP_PROBS_B, HF_L "mlp.gate.e_score_correction_bias", MC_L "mlp.router.expert_bias", GG_L "exp_probs_b.bias"),
	HMG(FFN_GATE_EXP, HF_L "mlp.experts.{E}.gate_proj.weight", MC_L "mlp.experts.local_experts.{E}.linear_fc1.weight#0",
	    GG_L "ffn_gate_exps.weight"),
	HMG(FFN_UP_EXP, HF_L "mlp.experts.{E}.up_proj.weight", MC_L "mlp.experts.local_experts.{E}.linear_fc1.weight#1",
	    GG_L "ffn_up_exps.weight"),
	HMG(FFN_DOWN_EXP, HF_L "mlp.experts.{E}.down_proj.weight", MC_L "mlp.experts.local_experts.{E}.linear_fc2.weight",
	    GG_L "ffn_down_exps.weight"),
	HMG(FFN_GATE_SHEXP, HF_L "mlp.shared_experts.gate_proj.weight", MC_L "mlp.shared_experts.linear_fc1.weight#0",
	    GG_L "ffn_gate_shexp.weight"),
	HMG(FFN_UP_SHEXP, HF_L "mlp.shared_experts.up_proj.weight", MC_L "mlp.shared_experts.linear_fc1.weight#1",
	    GG_L "ffn_up_shexp.weight"),
	HMG(FFN_DOWN_SHEXP, HF_L "mlp.shared_experts.down_proj.weight", MC_L "mlp.shared_experts.linear_fc2.weight",
	    GG_L "ffn_down_shexp.weight"),
	END_ROW,
};
#undef HMG

/* HunYuan MoE (HunYuanMoEV1ForCausalLM): LLaMA's attention rows with q/k/v/o
 * biases (attention_bias) and per-head query_layernorm/key_layernorm (after
 * the rotary embedding: the parts say), every layer's router mlp.gate.wg,
 * routed experts mlp.experts.{E} and an ungated shared expert
 * mlp.shared_mlp. Hugging Face and GGUF names (gguf-py's MODEL_ARCH.HUNYUAN_MOE:
 * query_layernorm as attn_q_norm, mlp.gate.wg as ffn_gate_inp, shared_mlp as
 * the *_shexp tensors); the GGUF part needs the checkpoint's hy.tiktoken and
 * config.json's moe_intermediate_size, moe_topk and num_shared_expert lists,
 * which transformers' HunYuanMoEV1Config does not write. */
static const tpc_tensor_row hunyuanmoe_tensors[] = {
	HF_GG(TOKEN_EMBD, false, "model.embed_tokens.weight", "token_embd.weight"),
	HF_GG(OUTPUT_NORM, false, "model.norm.weight", "output_norm.weight"),
	HF_GG(OUTPUT, false, "lm_head.weight", "output.weight"),
	HF_GG(ATTN_NORM, false, HF_L "input_layernorm.weight", GG_L "attn_norm.weight"),
	HF_GG(ATTN_Q, true, HF_L "self_attn.q_proj.weight", GG_L "attn_q.weight"),
	HF_GG(ATTN_K, true, HF_L "self_attn.k_proj.weight", GG_L "attn_k.weight"),
	HF_GG(ATTN_V, true, HF_L "self_attn.v_proj.weight", GG_L "attn_v.weight"),
	HF_GG(ATTN_OUT, true, HF_L "self_attn.o_proj.weight", GG_L "attn_output.weight"),
	HF_GG(ATTN_Q_NORM, false, HF_L "self_attn.query_layernorm.weight", GG_L "attn_q_norm.weight"),
	HF_GG(ATTN_K_NORM, false, HF_L "self_attn.key_layernorm.weight", GG_L "attn_k_norm.weight"),
	HF_GG(FFN_NORM, false, HF_L "post_attention_layernorm.weight", GG_L "ffn_norm.weight"),
	HF_GG(FFN_GATE_INP, false, HF_L "mlp.gate.wg.weight", GG_L "ffn_gate_inp.weight"),
	HF_GG(FFN_GATE_EXP, false, HF_L "mlp.experts.{E}.gate_proj.weight", GG_L "ffn_gate_exps.weight"),
	HF_GG(FFN_UP_EXP, false, HF_L "mlp.experts.{E}.up_proj.weight", GG_L "ffn_up_exps.weight"),
	HF_GG(FFN_DOWN_EXP, false, HF_L "mlp.experts.{E}.down_proj.weight", GG_L "ffn_down_exps.weight"),
	HF_GG(FFN_GATE_SHEXP, false, HF_L "mlp.shared_mlp.gate_proj.weight", GG_L "ffn_gate_shexp.weight"),
	HF_GG(FFN_UP_SHEXP, false, HF_L "mlp.shared_mlp.up_proj.weight", GG_L "ffn_up_shexp.weight"),
	HF_GG(FFN_DOWN_SHEXP, false, HF_L "mlp.shared_mlp.down_proj.weight", GG_L "ffn_down_shexp.weight"),
	END_ROW,
};

/* HunYuan dense (HunYuanDenseV1ForCausalLM, transformers' hunyuan_v1_dense:
 * LLaMA's decoder, LlamaAttention's q/k/v/o biases with attention_bias, and
 * per-head query_layernorm/key_layernorm after the rotary embedding: the
 * parts say). Hugging Face names; vLLM's (vllm/model_executor/models/
 * hunyuan_v1.py, HunYuanDenseV1ForCausalLM: qkv_proj and gate_up_proj
 * stacked as LLaMA's, query_layernorm/key_layernorm under their own names);
 * GGUF's (gguf-py's MODEL_ARCH.HUNYUAN_DENSE: attn_q_norm, attn_k_norm). */
static const tpc_tensor_row hunyuandense_tensors[] = {
	ROW(TOKEN_EMBD, false, "model.embed_tokens.weight", NULL, "model.embed_tokens.weight", NULL, "token_embd.weight"),
	ROW(OUTPUT_NORM, false, "model.norm.weight", NULL, "model.norm.weight", NULL, "output_norm.weight"),
	ROW(OUTPUT, false, "lm_head.weight", NULL, "lm_head.weight", NULL, "output.weight"),
	ROW(ATTN_NORM, false, HF_L "input_layernorm.weight", NULL, HF_L "input_layernorm.weight", NULL, GG_L "attn_norm.weight"),
	ROW(ATTN_Q, true, HF_L "self_attn.q_proj.weight", NULL, HF_L "self_attn.qkv_proj.weight#0", NULL, GG_L "attn_q.weight"),
	ROW(ATTN_K, true, HF_L "self_attn.k_proj.weight", NULL, HF_L "self_attn.qkv_proj.weight#1", NULL, GG_L "attn_k.weight"),
	ROW(ATTN_V, true, HF_L "self_attn.v_proj.weight", NULL, HF_L "self_attn.qkv_proj.weight#2", NULL, GG_L "attn_v.weight"),
	ROW(ATTN_OUT, true, HF_L "self_attn.o_proj.weight", NULL, HF_L "self_attn.o_proj.weight", NULL, GG_L "attn_output.weight"),
	ROW(ATTN_Q_NORM, false, HF_L "self_attn.query_layernorm.weight", NULL, HF_L "self_attn.query_layernorm.weight", NULL,
	    GG_L "attn_q_norm.weight"),
	ROW(ATTN_K_NORM, false, HF_L "self_attn.key_layernorm.weight", NULL, HF_L "self_attn.key_layernorm.weight", NULL,
	    GG_L "attn_k_norm.weight"),
	ROW(FFN_NORM, false, HF_L "post_attention_layernorm.weight", NULL, HF_L "post_attention_layernorm.weight", NULL,
	    GG_L "ffn_norm.weight"),
	ROW(FFN_GATE, false, HF_L "mlp.gate_proj.weight", NULL, HF_L "mlp.gate_up_proj.weight#0", NULL, GG_L "ffn_gate.weight"),
	ROW(FFN_UP, false, HF_L "mlp.up_proj.weight", NULL, HF_L "mlp.gate_up_proj.weight#1", NULL, GG_L "ffn_up.weight"),
	ROW(FFN_DOWN, false, HF_L "mlp.down_proj.weight", NULL, HF_L "mlp.down_proj.weight", NULL, GG_L "ffn_down.weight"),
	END_ROW,
};

/* Llama 4 text (Llama4ForCausalLM, transformers' model_type llama4_text):
 * LLaMA's attention (q/k/v/o biases with attention_bias) under the
 * feed_forward of each layer: a dense SwiGLU (feed_forward.gate_proj, ...,
 * intermediate_size_mlp wide) outside the interleave_moe_layer_step layers,
 * else a router feed_forward.router (a Linear(hidden, experts)), the routed
 * experts stacked in the checkpoint [in, out] (hf_in_out): gate_up_proj [E,
 * H, 2I] with the gate and up as its two halves of the out dim ([gate | up],
 * not interleaved), down_proj [E, I, H], and an ungated shared_expert beside
 * them. Hugging Face and GGUF names (gguf-py constants.py MODEL_ARCH.LLAMA4:
 * Llama4Model.modify_tensors splits gate_up_proj and transposes both, the
 * shared expert ffn_*_shexp); no other ecosystem's. */
#define ROW_IO(R, B, HF, GG) {TPC_ROLE_##R, B, {HF, NULL, NULL, NULL, GG}, true, false, NULL}
static const tpc_tensor_row llama4_tensors[] = {
	HF_GG(TOKEN_EMBD, false, "model.embed_tokens.weight", "token_embd.weight"),
	HF_GG(OUTPUT_NORM, false, "model.norm.weight", "output_norm.weight"),
	HF_GG(OUTPUT, false, "lm_head.weight", "output.weight"),
	HF_GG(ATTN_NORM, false, HF_L "input_layernorm.weight", GG_L "attn_norm.weight"),
	HF_GG(ATTN_Q, true, HF_L "self_attn.q_proj.weight", GG_L "attn_q.weight"),
	HF_GG(ATTN_K, true, HF_L "self_attn.k_proj.weight", GG_L "attn_k.weight"),
	HF_GG(ATTN_V, true, HF_L "self_attn.v_proj.weight", GG_L "attn_v.weight"),
	HF_GG(ATTN_OUT, true, HF_L "self_attn.o_proj.weight", GG_L "attn_output.weight"),
	HF_GG(FFN_NORM, false, HF_L "post_attention_layernorm.weight", GG_L "ffn_norm.weight"),
	HF_GG(FFN_GATE, false, HF_L "feed_forward.gate_proj.weight", GG_L "ffn_gate.weight"),
	HF_GG(FFN_UP, false, HF_L "feed_forward.up_proj.weight", GG_L "ffn_up.weight"),
	HF_GG(FFN_DOWN, false, HF_L "feed_forward.down_proj.weight", GG_L "ffn_down.weight"),
	HF_GG(FFN_GATE_INP, false, HF_L "feed_forward.router.weight", GG_L "ffn_gate_inp.weight"),
	ROW_IO(FFN_GATE_EXP, false, HF_L "feed_forward.experts.gate_up_proj#0", GG_L "ffn_gate_exps.weight"),
	ROW_IO(FFN_UP_EXP, false, HF_L "feed_forward.experts.gate_up_proj#1", GG_L "ffn_up_exps.weight"),
	ROW_IO(FFN_DOWN_EXP, false, HF_L "feed_forward.experts.down_proj", GG_L "ffn_down_exps.weight"),
	HF_GG(FFN_GATE_SHEXP, false, HF_L "feed_forward.shared_expert.gate_proj.weight", GG_L "ffn_gate_shexp.weight"),
	HF_GG(FFN_UP_SHEXP, false, HF_L "feed_forward.shared_expert.up_proj.weight", GG_L "ffn_up_shexp.weight"),
	HF_GG(FFN_DOWN_SHEXP, false, HF_L "feed_forward.shared_expert.down_proj.weight", GG_L "ffn_down_shexp.weight"),
	END_ROW,
};
#undef ROW_IO
/* The multi-token-prediction block of Qwen3-Next and Qwen3.5 (mtp.*: vLLM's
 * qwen3_next_mtp.py / qwen3_5_mtp.py): fc [H, 2H] over [enorm(embedding);
 * hnorm(hidden)], the two norms, mtp.layers.N (full-attention decoder layers
 * of the model's kind) and its final norm before the shared lm_head; read
 * as layers past num_hidden_layers (tpc_family_mtp), the rows below under
 * the names the reference gives them (eh_proj, enorm, hnorm,
 * shared_head.norm; GGUF blk.N.nextn.*) */
#define QWEN_MTP_ROWS \
	ROW(NEXTN_EH_PROJ, false, HF_L "eh_proj.weight", NULL, NULL, NULL, GG_L "nextn.eh_proj.weight"), \
	ROW(NEXTN_ENORM, false, HF_L "enorm.weight", NULL, NULL, NULL, GG_L "nextn.enorm.weight"), \
	ROW(NEXTN_HNORM, false, HF_L "hnorm.weight", NULL, NULL, NULL, GG_L "nextn.hnorm.weight"), \
	ROW(NEXTN_HEAD_NORM, false, HF_L "shared_head.norm.weight", NULL, NULL, NULL, GG_L "nextn.shared_head_norm.weight")
static const tpc_family_mtp qwen_mtp = {
	.prefix = "mtp.", .layers = "mtp.layers.", .count = "mtp_num_hidden_layers",
	.names = {{"mtp.fc.weight", "eh_proj.weight"}, {"mtp.pre_fc_norm_embedding.weight", "enorm.weight"},
		  {"mtp.pre_fc_norm_hidden.weight", "hnorm.weight"}, {"mtp.norm.weight", "shared_head.norm.weight"}}};

/* Qwen3-Next (Qwen3NextForCausalLM): layer_types' linear_attention layers
 * a gated DeltaNet (linear_attn: in_proj_qkvz [q k v z] and in_proj_ba [b a]
 * per key head's group, the causal conv1d of q, k, v, dt_bias, A_log, the
 * gated RMSNorm, out_proj), the full_attention layers LLaMA's attention
 * whose q_proj emits each head's query and output gate, per-head q/k
 * norms; Qwen2-MoE's experts, shared expert and its gate, dense layers
 * (mlp_only_layers) as LLaMA's MLP. GGUF names: gguf-py constants.py
 * MODEL_ARCH.QWEN3NEXT (the FFN norm is post_attention_norm; in_proj_qkvz
 * is written as two tensors, attn_qkv and attn_gate: no one GGUF name).
 * Hugging Face and GGUF names only; the multi-token-prediction block
 * (mtp.*) as QWEN_MTP_ROWS; no fused qkv_proj (GGUF's attn_qkv is the
 * DeltaNet's). */
static const tpc_tensor_row qwen3next_tensors[] = {
	ROW(TOKEN_EMBD, false, "model.embed_tokens.weight", NULL, NULL, NULL, "token_embd.weight"),
	ROW(OUTPUT_NORM, false, "model.norm.weight", NULL, NULL, NULL, "output_norm.weight"),
	ROW(OUTPUT, false, "lm_head.weight", NULL, NULL, NULL, "output.weight"),
	ROW(ATTN_NORM, false, HF_L "input_layernorm.weight", NULL, NULL, NULL, GG_L "attn_norm.weight"),
	ROW(ATTN_Q, true, HF_L "self_attn.q_proj.weight", NULL, NULL, NULL, GG_L "attn_q.weight"),
	ROW(ATTN_K, true, HF_L "self_attn.k_proj.weight", NULL, NULL, NULL, GG_L "attn_k.weight"),
	ROW(ATTN_V, true, HF_L "self_attn.v_proj.weight", NULL, NULL, NULL, GG_L "attn_v.weight"),
	ROW(ATTN_OUT, true, HF_L "self_attn.o_proj.weight", NULL, NULL, NULL, GG_L "attn_output.weight"),
	ROW(ATTN_Q_NORM, false, HF_L "self_attn.q_norm.weight", NULL, NULL, NULL, GG_L "attn_q_norm.weight"),
	ROW(ATTN_K_NORM, false, HF_L "self_attn.k_norm.weight", NULL, NULL, NULL, GG_L "attn_k_norm.weight"),
	ROW(FFN_NORM, false, HF_L "post_attention_layernorm.weight", NULL, NULL, NULL, GG_L "post_attention_norm.weight"),
	LLAMA_MLP_ROWS,
	ROW(FFN_GATE_INP, false, HF_L "mlp.gate.weight", NULL, NULL, NULL, GG_L "ffn_gate_inp.weight"),
	ROW(FFN_GATE_EXP, false, HF_L "mlp.experts.{E}.gate_proj.weight", NULL, NULL, NULL, GG_L "ffn_gate_exps.weight"),
	ROW(FFN_UP_EXP, false, HF_L "mlp.experts.{E}.up_proj.weight", NULL, NULL, NULL, GG_L "ffn_up_exps.weight"),
	ROW(FFN_DOWN_EXP, false, HF_L "mlp.experts.{E}.down_proj.weight", NULL, NULL, NULL, GG_L "ffn_down_exps.weight"),
	ROW(FFN_GATE_SHEXP, false, HF_L "mlp.shared_expert.gate_proj.weight", NULL, NULL, NULL, GG_L "ffn_gate_shexp.weight"),
	ROW(FFN_UP_SHEXP, false, HF_L "mlp.shared_expert.up_proj.weight", NULL, NULL, NULL, GG_L "ffn_up_shexp.weight"),
	ROW(FFN_DOWN_SHEXP, false, HF_L "mlp.shared_expert.down_proj.weight", NULL, NULL, NULL, GG_L "ffn_down_shexp.weight"),
	ROW(FFN_GATE_INP_SHEXP, false, HF_L "mlp.shared_expert_gate.weight", NULL, NULL, NULL,
	    GG_L "ffn_gate_inp_shexp.weight"),
	ROW(SSM_IN, false, HF_L "linear_attn.in_proj_qkvz.weight", NULL, NULL, NULL, NULL),
	ROW(SSM_BA, false, HF_L "linear_attn.in_proj_ba.weight", NULL, NULL, NULL, GG_L "ssm_ba.weight"),
	ROW(SSM_CONV1D, false, HF_L "linear_attn.conv1d.weight", NULL, NULL, NULL, GG_L "ssm_conv1d.weight"),
	ROW(SSM_DT, false, HF_L "linear_attn.dt_bias", NULL, NULL, NULL, GG_L "ssm_dt.bias"),
	ROW(SSM_A, false, HF_L "linear_attn.A_log", NULL, NULL, NULL, GG_L "ssm_a"),
	ROW(SSM_NORM, false, HF_L "linear_attn.norm.weight", NULL, NULL, NULL, GG_L "ssm_norm.weight"),
	ROW(SSM_OUT, false, HF_L "linear_attn.out_proj.weight", NULL, NULL, NULL, GG_L "ssm_out.weight"),
	QWEN_MTP_ROWS,
	END_ROW,
};

/* Qwen3.5 (Qwen3_5ForCausalLM, model_type qwen3_5_text) and Qwen3.5-MoE
 * (Qwen3_5MoeForCausalLM, qwen3_5_moe_text): Qwen3-Next's layers but for
 * the gated DeltaNet's input projections, four tensors over all heads, not
 * groups per key head: in_proj_qkv [q of every key head | k of every key
 * head | v of every value head], in_proj_z (the output gate per value
 * head), in_proj_b and in_proj_a (a row per value head); a dense SwiGLU MLP
 * on every layer (Qwen3.5) or Qwen3-Next's experts beside a gated shared
 * expert on every layer (Qwen3.5-MoE, mlp_only_layers gone). GGUF names:
 * gguf-py constants.py MODEL_ARCH.QWEN35 / QWEN35MOE (in_proj_qkv attn_qkv,
 * in_proj_z attn_gate, ssm_beta, ssm_alpha). The published checkpoints,
 * Qwen3_5ForConditionalGeneration and Qwen3_5MoeForConditionalGeneration
 * (model.language_model.*, model.visual.*, mtp.*), hold it as their text
 * model (hf_wrap); mtp.* as QWEN_MTP_ROWS. */
#define QWEN35_ROWS \
	ROW(TOKEN_EMBD, false, "model.embed_tokens.weight", NULL, NULL, NULL, "token_embd.weight"), \
	ROW(OUTPUT_NORM, false, "model.norm.weight", NULL, NULL, NULL, "output_norm.weight"), \
	ROW(OUTPUT, false, "lm_head.weight", NULL, NULL, NULL, "output.weight"), \
	ROW(ATTN_NORM, false, HF_L "input_layernorm.weight", NULL, NULL, NULL, GG_L "attn_norm.weight"), \
	ROW(ATTN_Q, true, HF_L "self_attn.q_proj.weight", NULL, NULL, NULL, GG_L "attn_q.weight"), \
	ROW(ATTN_K, true, HF_L "self_attn.k_proj.weight", NULL, NULL, NULL, GG_L "attn_k.weight"), \
	ROW(ATTN_V, true, HF_L "self_attn.v_proj.weight", NULL, NULL, NULL, GG_L "attn_v.weight"), \
	ROW(ATTN_OUT, true, HF_L "self_attn.o_proj.weight", NULL, NULL, NULL, GG_L "attn_output.weight"), \
	ROW(ATTN_Q_NORM, false, HF_L "self_attn.q_norm.weight", NULL, NULL, NULL, GG_L "attn_q_norm.weight"), \
	ROW(ATTN_K_NORM, false, HF_L "self_attn.k_norm.weight", NULL, NULL, NULL, GG_L "attn_k_norm.weight"), \
	ROW(FFN_NORM, false, HF_L "post_attention_layernorm.weight", NULL, NULL, NULL, GG_L "post_attention_norm.weight"), \
	ROW(SSM_QKV, false, HF_L "linear_attn.in_proj_qkv.weight", NULL, NULL, NULL, GG_L "attn_qkv.weight"), \
	ROW(SSM_Z, false, HF_L "linear_attn.in_proj_z.weight", NULL, NULL, NULL, GG_L "attn_gate.weight"), \
	ROW(SSM_BETA, false, HF_L "linear_attn.in_proj_b.weight", NULL, NULL, NULL, GG_L "ssm_beta.weight"), \
	ROW(SSM_ALPHA, false, HF_L "linear_attn.in_proj_a.weight", NULL, NULL, NULL, GG_L "ssm_alpha.weight"), \
	ROW(SSM_CONV1D, false, HF_L "linear_attn.conv1d.weight", NULL, NULL, NULL, GG_L "ssm_conv1d.weight"), \
	ROW(SSM_DT, false, HF_L "linear_attn.dt_bias", NULL, NULL, NULL, GG_L "ssm_dt.bias"), \
	ROW(SSM_A, false, HF_L "linear_attn.A_log", NULL, NULL, NULL, GG_L "ssm_a"), \
	ROW(SSM_NORM, false, HF_L "linear_attn.norm.weight", NULL, NULL, NULL, GG_L "ssm_norm.weight"), \
	ROW(SSM_OUT, false, HF_L "linear_attn.out_proj.weight", NULL, NULL, NULL, GG_L "ssm_out.weight"), \
	QWEN_MTP_ROWS
static const tpc_tensor_row qwen35_tensors[] = {
	QWEN35_ROWS,
	ROW(FFN_GATE, false, HF_L "mlp.gate_proj.weight", NULL, NULL, NULL, GG_L "ffn_gate.weight"),
	ROW(FFN_UP, false, HF_L "mlp.up_proj.weight", NULL, NULL, NULL, GG_L "ffn_up.weight"),
	ROW(FFN_DOWN, false, HF_L "mlp.down_proj.weight", NULL, NULL, NULL, GG_L "ffn_down.weight"),
	END_ROW,
};
static const tpc_tensor_row qwen35moe_tensors[] = {
	QWEN35_ROWS,
	ROW(FFN_GATE_INP, false, HF_L "mlp.gate.weight", NULL, NULL, NULL, GG_L "ffn_gate_inp.weight"),
	ROW(FFN_GATE_EXP, false, HF_L "mlp.experts.{E}.gate_proj.weight", NULL, NULL, NULL, GG_L "ffn_gate_exps.weight"),
	ROW(FFN_UP_EXP, false, HF_L "mlp.experts.{E}.up_proj.weight", NULL, NULL, NULL, GG_L "ffn_up_exps.weight"),
	ROW(FFN_DOWN_EXP, false, HF_L "mlp.experts.{E}.down_proj.weight", NULL, NULL, NULL, GG_L "ffn_down_exps.weight"),
	ROW(FFN_GATE_SHEXP, false, HF_L "mlp.shared_expert.gate_proj.weight", NULL, NULL, NULL, GG_L "ffn_gate_shexp.weight"),
	ROW(FFN_UP_SHEXP, false, HF_L "mlp.shared_expert.up_proj.weight", NULL, NULL, NULL, GG_L "ffn_up_shexp.weight"),
	ROW(FFN_DOWN_SHEXP, false, HF_L "mlp.shared_expert.down_proj.weight", NULL, NULL, NULL, GG_L "ffn_down_shexp.weight"),
	ROW(FFN_GATE_INP_SHEXP, false, HF_L "mlp.shared_expert_gate.weight", NULL, NULL, NULL,
	    GG_L "ffn_gate_inp_shexp.weight"),
	END_ROW,
};
#undef QWEN35_ROWS
#undef QWEN_MTP_ROWS

#undef HF_ONLY

/* StarCoder2 (Starcoder2ForCausalLM): LLaMA's attention names, all with
 * biases; LayerNorms with biases; a plain MLP c_fc / c_proj with biases.
 * Hugging Face and GGUF names only (MODEL_ARCH.STARCODER2). */
#define HG(R, B, HF, GG) ROW(R, B, HF, NULL, NULL, NULL, GG)
static const tpc_tensor_row starcoder2_tensors[] = {
	HG(TOKEN_EMBD, false, "model.embed_tokens.weight", "token_embd.weight"),
	HG(OUTPUT_NORM, true, "model.norm.weight", "output_norm.weight"),
	HG(OUTPUT, false, "lm_head.weight", "output.weight"),
	HG(ATTN_NORM, true, HF_L "input_layernorm.weight", GG_L "attn_norm.weight"),
	HG(ATTN_Q, true, HF_L "self_attn.q_proj.weight", GG_L "attn_q.weight"),
	HG(ATTN_K, true, HF_L "self_attn.k_proj.weight", GG_L "attn_k.weight"),
	HG(ATTN_V, true, HF_L "self_attn.v_proj.weight", GG_L "attn_v.weight"),
	HG(ATTN_OUT, true, HF_L "self_attn.o_proj.weight", GG_L "attn_output.weight"),
	HG(FFN_NORM, true, HF_L "post_attention_layernorm.weight", GG_L "ffn_norm.weight"),
	HG(FFN_UP, true, HF_L "mlp.c_fc.weight", GG_L "ffn_up.weight"),
	HG(FFN_DOWN, true, HF_L "mlp.c_proj.weight", GG_L "ffn_down.weight"),
	END_ROW,
};
/* ERNIE 4.5 dense (Ernie4_5ForCausalLM): LLaMA's names, every projection
 * with a bias when use_bias says so (q/k/v/o and gate/up/down); no fused
 * rows (transformers' checkpoints have none; the reference splits the
 * remote code's qkv_proj and up_gate_proj, tpconv does not). Hugging Face
 * and GGUF names only (MODEL_ARCH.ERNIE4_5). */
#define ERNIE4_5_ROWS(HEAD_BIAS) \
	HG(TOKEN_EMBD, false, "model.embed_tokens.weight", "token_embd.weight"), \
	HG(OUTPUT_NORM, false, "model.norm.weight", "output_norm.weight"), \
	HG(OUTPUT, HEAD_BIAS, "lm_head.weight", "output.weight"), \
	HG(ATTN_NORM, false, HF_L "input_layernorm.weight", GG_L "attn_norm.weight"), \
	HG(ATTN_Q, true, HF_L "self_attn.q_proj.weight", GG_L "attn_q.weight"), \
	HG(ATTN_K, true, HF_L "self_attn.k_proj.weight", GG_L "attn_k.weight"), \
	HG(ATTN_V, true, HF_L "self_attn.v_proj.weight", GG_L "attn_v.weight"), \
	HG(ATTN_OUT, true, HF_L "self_attn.o_proj.weight", GG_L "attn_output.weight"), \
	HG(FFN_NORM, false, HF_L "post_attention_layernorm.weight", GG_L "ffn_norm.weight"), \
	HG(FFN_GATE, true, HF_L "mlp.gate_proj.weight", GG_L "ffn_gate.weight"), \
	HG(FFN_UP, true, HF_L "mlp.up_proj.weight", GG_L "ffn_up.weight"), \
	HG(FFN_DOWN, true, HF_L "mlp.down_proj.weight", GG_L "ffn_down.weight")
static const tpc_tensor_row ernie4_5_tensors[] = {
	ERNIE4_5_ROWS(false),
	END_ROW,
};
/* ERNIE 4.5 MoE (Ernie4_5_MoeForCausalLM): ERNIE 4.5's rows (the dense
 * layers before moe_layer_start_index, or off moe_layer_interval's step or
 * past moe_layer_end_index, as its MLP); the MoE layers' router mlp.gate, its
 * score correction bias mlp.moe_statics.e_score_correction_bias [1, experts]
 * (GGUF exp_probs_b.bias), routed experts mlp.experts.{E} and
 * shared_experts (use_bias's biases with them, lm_head's too: its
 * Ernie4_5_MoeForCausalLM's head has one with use_bias, the dense one's
 * not). Hugging Face and GGUF names
 * only (MODEL_ARCH.ERNIE4_5_MOE). */
static const tpc_tensor_row ernie4_5moe_tensors[] = {
	ERNIE4_5_ROWS(true),
	HG(FFN_GATE_INP, false, HF_L "mlp.gate.weight", GG_L "ffn_gate_inp.weight"),
	HG(FFN_EXP_PROBS_B, false, HF_L "mlp.moe_statics.e_score_correction_bias", GG_L "exp_probs_b.bias"),
	HG(FFN_GATE_EXP, false, HF_L "mlp.experts.{E}.gate_proj.weight", GG_L "ffn_gate_exps.weight"),
	HG(FFN_UP_EXP, false, HF_L "mlp.experts.{E}.up_proj.weight", GG_L "ffn_up_exps.weight"),
	HG(FFN_DOWN_EXP, false, HF_L "mlp.experts.{E}.down_proj.weight", GG_L "ffn_down_exps.weight"),
	HG(FFN_GATE_SHEXP, true, HF_L "mlp.shared_experts.gate_proj.weight", GG_L "ffn_gate_shexp.weight"),
	HG(FFN_UP_SHEXP, true, HF_L "mlp.shared_experts.up_proj.weight", GG_L "ffn_up_shexp.weight"),
	HG(FFN_DOWN_SHEXP, true, HF_L "mlp.shared_experts.down_proj.weight", GG_L "ffn_down_shexp.weight"),
	END_ROW,
};

/* Phi (PhiForCausalLM: Phi-1, Phi-1.5, Phi-2): one input LayerNorm for the
 * parallel attention and MLP (no FFN norm row), q/k/v and dense with biases,
 * mlp.fc1 / fc2 as ffn_up / ffn_down with biases, final_layernorm, lm_head
 * with its vocab bias (output.bias). Hugging Face and GGUF names only
 * (MODEL_ARCH.PHI2). */
static const tpc_tensor_row phi_tensors[] = {
	HG(TOKEN_EMBD, false, "model.embed_tokens.weight", "token_embd.weight"),
	HG(OUTPUT_NORM, true, "model.final_layernorm.weight", "output_norm.weight"),
	HG(OUTPUT, true, "lm_head.weight", "output.weight"),
	HG(ATTN_NORM, true, HF_L "input_layernorm.weight", GG_L "attn_norm.weight"),
	HG(ATTN_Q, true, HF_L "self_attn.q_proj.weight", GG_L "attn_q.weight"),
	HG(ATTN_K, true, HF_L "self_attn.k_proj.weight", GG_L "attn_k.weight"),
	HG(ATTN_V, true, HF_L "self_attn.v_proj.weight", GG_L "attn_v.weight"),
	HG(ATTN_OUT, true, HF_L "self_attn.dense.weight", GG_L "attn_output.weight"),
	HG(FFN_UP, true, HF_L "mlp.fc1.weight", GG_L "ffn_up.weight"),
	HG(FFN_DOWN, true, HF_L "mlp.fc2.weight", GG_L "ffn_down.weight"),
	END_ROW,
};

/* Cohere 2 (Cohere2ForCausalLM): LLaMA's names under one input norm (no FFN
 * norm row). Hugging Face and GGUF names only (MODEL_ARCH.COHERE2, which has
 * no output tensor: an untied lm_head is refused by name, as the reference
 * cannot map it; attention biases, which the reference drops when zero and
 * refuses otherwise, are refused by name). */
static const tpc_tensor_row cohere2_tensors[] = {
	HG(TOKEN_EMBD, false, "model.embed_tokens.weight", "token_embd.weight"),
	HG(OUTPUT_NORM, false, "model.norm.weight", "output_norm.weight"),
	HG(OUTPUT, false, "lm_head.weight", NULL),
	HG(ATTN_NORM, false, HF_L "input_layernorm.weight", GG_L "attn_norm.weight"),
	HG(ATTN_Q, false, HF_L "self_attn.q_proj.weight", GG_L "attn_q.weight"),
	HG(ATTN_K, false, HF_L "self_attn.k_proj.weight", GG_L "attn_k.weight"),
	HG(ATTN_V, false, HF_L "self_attn.v_proj.weight", GG_L "attn_v.weight"),
	HG(ATTN_OUT, false, HF_L "self_attn.o_proj.weight", GG_L "attn_output.weight"),
	HG(FFN_GATE, false, HF_L "mlp.gate_proj.weight", GG_L "ffn_gate.weight"),
	HG(FFN_UP, false, HF_L "mlp.up_proj.weight", GG_L "ffn_up.weight"),
	HG(FFN_DOWN, false, HF_L "mlp.down_proj.weight", GG_L "ffn_down.weight"),
	END_ROW,
};

/* Phi-3.5-MoE (PhiMoEForCausalLM; transformers' PhimoeForCausalLM): LLaMA's
 * names with LayerNorms (weights and biases), q/k/v/o biases
 * (attention_bias) and lm_head's (lm_head_bias); Mixtral's
 * block_sparse_moe.gate and experts.{E}.w1/w3/w2 (as the checkpoints hold
 * them; transformers 5 saves them so). Hugging Face and GGUF names only
 * (MODEL_ARCH.PHIMOE). */
static const tpc_tensor_row phimoe_tensors[] = {
	HG(TOKEN_EMBD, false, "model.embed_tokens.weight", "token_embd.weight"),
	HG(OUTPUT_NORM, true, "model.norm.weight", "output_norm.weight"),
	HG(OUTPUT, true, "lm_head.weight", "output.weight"),
	HG(ATTN_NORM, true, HF_L "input_layernorm.weight", GG_L "attn_norm.weight"),
	HG(ATTN_Q, true, HF_L "self_attn.q_proj.weight", GG_L "attn_q.weight"),
	HG(ATTN_K, true, HF_L "self_attn.k_proj.weight", GG_L "attn_k.weight"),
	HG(ATTN_V, true, HF_L "self_attn.v_proj.weight", GG_L "attn_v.weight"),
	HG(ATTN_OUT, true, HF_L "self_attn.o_proj.weight", GG_L "attn_output.weight"),
	HG(FFN_NORM, true, HF_L "post_attention_layernorm.weight", GG_L "ffn_norm.weight"),
	HG(FFN_GATE_INP, false, HF_L "block_sparse_moe.gate.weight", GG_L "ffn_gate_inp.weight"),
	HG(FFN_GATE_EXP, false, HF_L "block_sparse_moe.experts.{E}.w1.weight", GG_L "ffn_gate_exps.weight"),
	HG(FFN_UP_EXP, false, HF_L "block_sparse_moe.experts.{E}.w3.weight", GG_L "ffn_up_exps.weight"),
	HG(FFN_DOWN_EXP, false, HF_L "block_sparse_moe.experts.{E}.w2.weight", GG_L "ffn_down_exps.weight"),
	END_ROW,
};
#undef HG

/* ---- plans ---- */

/* The LLaMA family's attention and dense MLP (HF names), shared by the dense
 * presets and the mixture-of-experts ones. */
#define LLAMA_STAGES \
	"  \"layers\": [\"layers\\\\.([0-9]+)\\\\.\"],\n" \
	"  \"first_stage\": [\"embed_tokens\\\\.\"],\n" \
	"  \"last_stage\": [\"(^|\\\\.)norm\\\\.\", \"^lm_head\\\\.\"],\n"
#define LLAMA_ATTN_RULES \
	"    {\"match\": \"self_attn\\\\.q_proj\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"q\"},\n" \
	"    {\"match\": \"self_attn\\\\.(k_proj|v_proj)\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"kv\"},\n" \
	"    {\"match\": \"self_attn\\\\.qkv_proj\\\\.(weight|bias)$\", \"split\": \"col\", \"parts\": [\"q\", \"kv\", \"kv\"]},\n" \
	"    {\"match\": \"self_attn\\\\.o_proj\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\"},\n" \
	"    {\"match\": \"self_attn\\\\.o_proj\\\\.bias$\", \"split\": \"row\"},\n"
#define LLAMA_MLP_RULES \
	"    {\"match\": \"mlp\\\\.(gate_proj|up_proj)\\\\.(weight|bias)$\", \"split\": \"col\"},\n" \
	"    {\"match\": \"mlp\\\\.gate_up_proj\\\\.(weight|bias)$\", \"split\": \"col\", \"parts\": 2},\n" \
	"    {\"match\": \"mlp\\\\.down_proj\\\\.(weight|bias)$\", \"split\": \"row\"},\n"
#define LLAMA_EDGE_RULES \
	"    {\"match\": \"embed_tokens\\\\.weight$\", \"split\": \"vocab\"},\n" \
	"    {\"match\": \"^lm_head\\\\.weight$\", \"split\": \"vocab\"},\n" \
	"    {\"match\": \"(layernorm|(^|\\\\.)norm|(^|\\\\.)(q_norm|k_norm))\\\\.(weight|bias)$|rotary_emb\\\\.inv_freq$\", \"split\": \"replicate\"}\n"
#define LLAMA_JSON(NAME) \
	"{\n" \
	"  \"name\": \"" NAME "\",\n" \
	"  \"description\": \"LLaMA, Mistral, Qwen2/Qwen3, Gemma, Phi-3 and similar decoders with Hugging Face names. q/k/v col on head boundaries (K/V heads replicated when tp > kv heads, as TensorRT-LLM and vLLM do; head_dim from the config when it is not hidden/heads, as Gemma's), o_proj row, gate/up col, down row, embed_tokens and lm_head vocab-parallel; Qwen2-style q/k/v biases split with their weights; Qwen3 q_norm/k_norm replicated; fused qkv_proj [q|k|v] and gate_up_proj [gate|up] (Phi-3) split per part.\",\n" \
	LLAMA_STAGES \
	"  \"rules\": [\n" LLAMA_ATTN_RULES LLAMA_MLP_RULES LLAMA_EDGE_RULES "  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"
/* Mixture of experts with tensor parallelism inside every expert (vLLM's
 * default for Mixtral and Qwen-MoE without --enable-expert-parallel:
 * vllm/model_executor/layers/fused_moe/layer.py shards w13 on the output and
 * w2 on the input per tp rank): each expert's w1/w3 (gate/up) col, w2 (down)
 * row; the router, Qwen's shared-expert gate and DeepSeek-style score
 * correction bias replicated; a shared expert split like a dense MLP; dense
 * layers (decoder_sparse_step, mlp_only_layers) as LLaMA's. */
#define MOE_RULES \
	"    {\"match\": \"experts\\\\.[0-9]+\\\\.(w1|w3|gate_proj|up_proj)\\\\.(weight|bias)$\", \"split\": \"col\"},\n" \
	"    {\"match\": \"experts\\\\.[0-9]+\\\\.(w2|down_proj)\\\\.(weight|bias)$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"shared_experts?\\\\.(gate_proj|up_proj)\\\\.(weight|bias)$\", \"split\": \"col\"},\n" \
	"    {\"match\": \"shared_experts?\\\\.down_proj\\\\.(weight|bias)$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"(block_sparse_moe|mlp)\\\\.gate\\\\.(weight|bias|e_score_correction_bias)$|shared_expert_gate\\\\.weight$\", \"split\": \"replicate\"},\n"
#define MOE_JSON(NAME, DESC) MOE_JSON_OF(NAME, DESC, LLAMA_EDGE_RULES)
#define MOE_JSON_OF(NAME, DESC, EDGE) \
	"{\n" \
	"  \"name\": \"" NAME "\",\n" \
	"  \"description\": \"" DESC " Attention as LLaMA's. Every expert split by tensor parallelism inside it: experts.N w1/w3 (gate_proj/up_proj) col, w2 (down_proj) row; the shared expert like a dense MLP; the router (gate), shared_expert_gate and e_score_correction_bias replicated on every rank; dense layers as LLaMA's. With --ep N every expert (experts.N.) lives on one EP group of tp/N ranks, split tp/N ways there.\",\n" \
	LLAMA_STAGES \
	"  \"experts\": [\"experts\\\\.([0-9]+)\\\\.\"],\n" \
	"  \"rules\": [\n" LLAMA_ATTN_RULES LLAMA_MLP_RULES MOE_RULES \
	EDGE "  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"

/* LLaMA's edges with lm_head's vocab bias split with its weight (Phi-3.5-MoE's lm_head_bias) */
#define LLAMA_EDGE_RULES_HEAD_BIAS \
	"    {\"match\": \"embed_tokens\\\\.weight$\", \"split\": \"vocab\"},\n" \
	"    {\"match\": \"^lm_head\\\\.(weight|bias)$\", \"split\": \"vocab\"},\n" \
	"    {\"match\": \"(layernorm|(^|\\\\.)norm|(^|\\\\.)(q_norm|k_norm))\\\\.(weight|bias)$|rotary_emb\\\\.inv_freq$\", \"split\": \"replicate\"}\n"

/* Granite-MoE, split as vLLM's granitemoe.py loads it into FusedMoE
 * (tensor parallelism inside every expert: input_linear's gate and up rows
 * each split, output_linear by its columns; the router replicated), the
 * fused expert tensors stacked over the experts ("stacked": with --ep each
 * group holds its own); GraniteMoeShared's shared_mlp like a dense MLP
 * (input_linear col in 2 parts [gate | up], output_linear row). */
#define GRANITEMOE_JSON(NAME, DESC) \
	"{\n" \
	"  \"name\": \"" NAME "\",\n" \
	"  \"description\": \"" DESC " Attention as LLaMA's. The routed experts are stacked in dim 0 of block_sparse_moe.input_linear [experts, 2 x intermediate, hidden] (each expert's gate rows, then its up rows) and output_linear [experts, hidden, intermediate]: every expert split by tensor parallelism inside it, input_linear col in 2 parts [gate | up], output_linear row; the router (router.layer) replicated; a shared expert (shared_mlp, GraniteMoeShared) like a dense MLP, input_linear col in 2 parts [gate | up], output_linear row. With --ep N each EP group holds its own experts' rows of dim 0, split tp/N ways.\",\n" \
	LLAMA_STAGES \
	"  \"rules\": [\n" LLAMA_ATTN_RULES \
	"    {\"match\": \"block_sparse_moe\\\\.input_linear\\\\.weight$\", \"split\": \"col\", \"parts\": 2, \"stacked\": true},\n" \
	"    {\"match\": \"block_sparse_moe\\\\.output_linear\\\\.weight$\", \"split\": \"row\", \"stacked\": true},\n" \
	"    {\"match\": \"block_sparse_moe\\\\.router\\\\.layer\\\\.weight$\", \"split\": \"replicate\"},\n" \
	"    {\"match\": \"shared_mlp\\\\.input_linear\\\\.weight$\", \"split\": \"col\", \"parts\": 2},\n" \
	"    {\"match\": \"shared_mlp\\\\.output_linear\\\\.weight$\", \"split\": \"row\"},\n" \
	LLAMA_EDGE_RULES "  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"

/* Granite 4 (GraniteMoeHybrid), split as vLLM's granitemoehybrid.py loads
 * it: attention and the experts as Granite-MoE's; the Mamba-2 mixer as
 * MambaMixer2 (layers/mamba/mamba_mixer2.py): in_proj col with z, x, B, C
 * and dt each split on its own (x and z by heads, B and C by groups, one
 * group whole on every rank), conv1d and its bias col over x, B, C the same
 * way, A_log, D and dt_bias with their heads, the gated norm's weight col
 * (Mixer2RMSNormGated: sharded_weight_loader(0)), out_proj row; the final
 * and layer norms replicated (not mamba.norm: the edge rules name them). */
#define GRANITEHYBRID_JSON(NAME) \
	"{\n" \
	"  \"name\": \"" NAME "\",\n" \
	"  \"description\": \"Granite 4 (GraniteMoeHybridForCausalLM) with Hugging Face names. Attention layers as LLaMA's; the routed experts and shared_mlp as granitemoe's (block_sparse_moe.input_linear col in 2 parts [gate | up] inside every expert, output_linear row, the router replicated). The Mamba-2 layers as vLLM's MambaMixer2: mamba.in_proj col in parts [z | x | B | C | dt] (z and x by mamba heads, B and C by mamba_n_groups groups, dt by heads), conv1d weight and bias col in parts [x | B | C]; one group is whole on every rank, a group count tp does not divide is refused; A_log, D and dt_bias col with their heads; mamba.norm col; out_proj row.\",\n" \
	LLAMA_STAGES \
	"  \"rules\": [\n" LLAMA_ATTN_RULES \
	"    {\"match\": \"block_sparse_moe\\\\.input_linear\\\\.weight$\", \"split\": \"col\", \"parts\": 2, \"stacked\": true},\n" \
	"    {\"match\": \"block_sparse_moe\\\\.output_linear\\\\.weight$\", \"split\": \"row\", \"stacked\": true},\n" \
	"    {\"match\": \"block_sparse_moe\\\\.router\\\\.layer\\\\.weight$\", \"split\": \"replicate\"},\n" \
	"    {\"match\": \"shared_mlp\\\\.input_linear\\\\.weight$\", \"split\": \"col\", \"parts\": 2},\n" \
	"    {\"match\": \"shared_mlp\\\\.output_linear\\\\.weight$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"mamba\\\\.in_proj\\\\.(weight|bias)$\", \"split\": \"col\", \"parts\": [\"ssm\", \"ssm\", \"ssm_groups\", \"ssm_groups\", \"ssm_dt\"]},\n" \
	"    {\"match\": \"mamba\\\\.conv1d\\\\.(weight|bias)$\", \"split\": \"col\", \"dim\": 0, \"parts\": [\"ssm\", \"ssm_groups\", \"ssm_groups\"]},\n" \
	"    {\"match\": \"mamba\\\\.(A_log|D|dt_bias)$\", \"split\": \"col\", \"parts\": [\"ssm_dt\"]},\n" \
	"    {\"match\": \"mamba\\\\.norm\\\\.weight$\", \"split\": \"col\", \"parts\": [\"ssm\"]},\n" \
	"    {\"match\": \"mamba\\\\.out_proj\\\\.weight$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"mamba\\\\.out_proj\\\\.bias$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"embed_tokens\\\\.weight$\", \"split\": \"vocab\"},\n" \
	"    {\"match\": \"^lm_head\\\\.weight$\", \"split\": \"vocab\"},\n" \
	"    {\"match\": \"(layernorm\\\\.weight|^model\\\\.norm\\\\.weight)$|rotary_emb\\\\.inv_freq$\", \"split\": \"replicate\"}\n" \
	"  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"

/* gpt-oss, split as vLLM's gpt_oss.py loads it (tensor parallelism inside
 * every expert, FusedMoE): LLaMA's attention with its biases, the sinks by
 * query head as vLLM slices them (heads of the rank); the router and its
 * bias replicated (ReplicatedLinear); gate_up_proj [E, H, 2I] and its bias
 * col on the interleaved out dim in whole [gate, up] pairs (vLLM's
 * 2*start..2*end, "unit": 2), down_proj [E, I, H] row (its rows),
 * down_proj_bias whole on every rank and added once; all stacked ("stacked":
 * with --ep each group holds its experts). */
#define GPTOSS_JSON \
	"{\n" \
	"  \"name\": \"gpt-oss\",\n" \
	"  \"description\": \"gpt-oss (GptOssForCausalLM, bf16 or f32) with Hugging Face names. Attention as LLaMA's with q/k/v/o biases; self_attn.sinks (a logit per query head) split with the query heads. The experts are stacked [in, out]: mlp.experts.gate_up_proj [experts, hidden, 2 x intermediate] with gate and up interleaved (gate at even, up at odd columns) and its bias col in whole [gate, up] pairs (2 x intermediate / tp must be even), down_proj [experts, intermediate, hidden] row, down_proj_bias whole and added once; the router (mlp.router weight and bias) replicated. With --ep N each EP group holds its own experts' rows of dim 0, split tp/N ways.\",\n" \
	LLAMA_STAGES \
	"  \"rules\": [\n" LLAMA_ATTN_RULES \
	"    {\"match\": \"self_attn\\\\.sinks$\", \"split\": \"col\", \"heads\": \"q\", \"head_count\": true},\n" \
	"    {\"match\": \"mlp\\\\.experts\\\\.gate_up_proj(_bias)?$\", \"split\": \"col\", \"transposed\": true, \"stacked\": true, \"unit\": 2},\n" \
	"    {\"match\": \"mlp\\\\.experts\\\\.down_proj$\", \"split\": \"row\", \"transposed\": true, \"stacked\": true},\n" \
	"    {\"match\": \"mlp\\\\.experts\\\\.down_proj_bias$\", \"split\": \"row\", \"stacked\": true},\n" \
	"    {\"match\": \"mlp\\\\.router\\\\.(weight|bias)$\", \"split\": \"replicate\"},\n" \
	LLAMA_EDGE_RULES "  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"

/* StarCoder2 (transformers' base_model_tp_plan: q/k/v colwise, o_proj
 * rowwise, mlp.c_fc colwise, mlp.c_proj rowwise); the biases with their
 * weights, c_proj's and o_proj's added once */
#define STARCODER2_JSON \
	"{\n" \
	"  \"name\": \"starcoder2\",\n" \
	"  \"description\": \"StarCoder2 (Starcoder2ForCausalLM) with Hugging Face names. q/k/v col on head boundaries (K/V heads replicated when tp > kv heads), o_proj row, mlp.c_fc col, mlp.c_proj row, their biases with them; embed_tokens and lm_head vocab-parallel; LayerNorm weights and biases replicated.\",\n" \
	LLAMA_STAGES \
	"  \"rules\": [\n" LLAMA_ATTN_RULES \
	"    {\"match\": \"mlp\\\\.c_fc\\\\.(weight|bias)$\", \"split\": \"col\"},\n" \
	"    {\"match\": \"mlp\\\\.c_proj\\\\.(weight|bias)$\", \"split\": \"row\"},\n" \
	LLAMA_EDGE_RULES "  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"

/* Phi (transformers' PhiConfig.base_model_tp_plan: q/k/v colwise,
 * self_attn.dense rowwise, mlp.fc1 colwise, mlp.fc2 rowwise); the biases
 * with their weights, dense's and fc2's added once; lm_head's vocab bias
 * split with it */
#define PHI_JSON \
	"{\n" \
	"  \"name\": \"phi\",\n" \
	"  \"description\": \"Phi-1, Phi-1.5 and Phi-2 (PhiForCausalLM) with Hugging Face names. q/k/v col on head boundaries (K/V heads replicated when tp > kv heads), self_attn.dense row, mlp.fc1 col, mlp.fc2 row, their biases with them; embed_tokens and lm_head (weight and vocab bias) vocab-parallel; the LayerNorms' weights and biases replicated.\",\n" \
	"  \"layers\": [\"layers\\\\.([0-9]+)\\\\.\"],\n" \
	"  \"first_stage\": [\"embed_tokens\\\\.\"],\n" \
	"  \"last_stage\": [\"final_layernorm\\\\.\", \"^lm_head\\\\.\"],\n" \
	"  \"rules\": [\n" \
	"    {\"match\": \"self_attn\\\\.q_proj\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"q\"},\n" \
	"    {\"match\": \"self_attn\\\\.(k_proj|v_proj)\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"kv\"},\n" \
	"    {\"match\": \"self_attn\\\\.dense\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\"},\n" \
	"    {\"match\": \"self_attn\\\\.dense\\\\.bias$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"mlp\\\\.fc1\\\\.(weight|bias)$\", \"split\": \"col\"},\n" \
	"    {\"match\": \"mlp\\\\.fc2\\\\.(weight|bias)$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"embed_tokens\\\\.weight$\", \"split\": \"vocab\"},\n" \
	"    {\"match\": \"^lm_head\\\\.(weight|bias)$\", \"split\": \"vocab\"},\n" \
	"    {\"match\": \"layernorm\\\\.(weight|bias)$|rotary_emb\\\\.inv_freq$\", \"split\": \"replicate\"}\n" \
	"  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"

/* DeepSeek-V2/V3 (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM) with HF
 * names, split as vLLM's deepseek_v2.py does: multi-head latent attention's
 * low-rank down projections (q_a_proj, kv_a_proj_with_mqa) and their norms
 * ReplicatedLinear; q_b_proj (or V2-Lite's q_proj) and kv_b_proj
 * ColumnParallelLinear over the heads, o_proj RowParallelLinear. Their heads
 * are not head_dim rows (qk_nope + qk_rope in q_b_proj, qk_nope + v in
 * kv_b_proj, v columns in o_proj), so the rules count heads
 * ("head_count"): tp must divide num_attention_heads. Routed experts as the
 * MoE presets (FusedMoE: TP inside every expert), shared_experts as a dense
 * MLP, the router and its e_score_correction_bias replicated, the
 * first_k_dense_replace dense layers as LLaMA's. */
#define DEEPSEEK_JSON \
	"{\n" \
	"  \"name\": \"deepseek-v3\",\n" \
	"  \"description\": \"DeepSeek-V3 and DeepSeek-V2 (DeepseekV3ForCausalLM, DeepseekV2ForCausalLM) with Hugging Face names, split as vLLM does. Multi-head latent attention: q_a_proj, kv_a_proj_with_mqa and their q_a_layernorm/kv_a_layernorm replicated; q_b_proj (V2-Lite: q_proj) col by heads (num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim) rows), kv_b_proj col by heads (num_attention_heads x (qk_nope_head_dim + v_head_dim) rows), o_proj row by heads (num_attention_heads x v_head_dim columns); tp must divide num_attention_heads. Routed experts mlp.experts.N gate_proj/up_proj col, down_proj row (tensor parallelism inside every expert); mlp.shared_experts like a dense MLP; the router mlp.gate and its e_score_correction_bias replicated; the first_k_dense_replace dense layers' mlp as LLaMA's; embed_tokens and lm_head vocab-parallel. With --ep N every expert lives on one EP group of tp/N ranks. FP8 block checkpoints (quantization_config fp8, weight_block_size) split their weight_scale_inv with each layer; --pad pads a layer whose slices would cut a block.\",\n" \
	LLAMA_STAGES \
	"  \"experts\": [\"experts\\\\.([0-9]+)\\\\.\"],\n" \
	"  \"rules\": [\n" \
	"    {\"match\": \"self_attn\\\\.(q_proj|q_b_proj|kv_b_proj)\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"q\", \"head_count\": true},\n" \
	"    {\"match\": \"self_attn\\\\.o_proj\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\", \"head_count\": true},\n" \
	"    {\"match\": \"self_attn\\\\.o_proj\\\\.bias$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"self_attn\\\\.(q_a_proj|kv_a_proj_with_mqa|q_a_layernorm|kv_a_layernorm)\\\\.(weight|bias)$\", \"split\": \"replicate\"},\n" \
	LLAMA_MLP_RULES MOE_RULES LLAMA_EDGE_RULES "  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"

/* Llama 4 text, split as transformers' Llama4TextConfig.base_model_tp_plan
 * says (vLLM's llama4.py loads it the same way: FusedMoE, tensor
 * parallelism inside every expert): q/k/v colwise, o_proj rowwise; the dense
 * layers' and the shared expert's gate/up colwise, down rowwise; the stacked
 * experts' gate_up_proj [E, H, 2I] "packed_rowwise" (its out dim, the last,
 * in 2 parts [gate | up]: col, transposed) and down_proj [E, I, H] "colwise"
 * (its in dim I: row, transposed); the router replicated. */
#define LLAMA4_JSON \
	"{\n" \
	"  \"name\": \"llama4\",\n" \
	"  \"description\": \"Llama 4 text (Llama4ForCausalLM) with Hugging Face names, split as transformers' Llama4TextConfig.base_model_tp_plan says. Attention as LLaMA's (biases with their weights); the dense layers' feed_forward gate_proj/up_proj col and down_proj row, the shared expert (feed_forward.shared_expert) the same; the routed experts stacked [in, out]: feed_forward.experts.gate_up_proj [experts, hidden, 2 x intermediate] col in 2 parts [gate | up], down_proj [experts, intermediate, hidden] row; the router (feed_forward.router) replicated. With --ep N each EP group holds its own experts' rows of dim 0, split tp/N ways.\",\n" \
	LLAMA_STAGES \
	"  \"rules\": [\n" LLAMA_ATTN_RULES \
	"    {\"match\": \"feed_forward\\\\.(shared_expert\\\\.)?(gate_proj|up_proj)\\\\.(weight|bias)$\", \"split\": \"col\"},\n" \
	"    {\"match\": \"feed_forward\\\\.(shared_expert\\\\.)?down_proj\\\\.(weight|bias)$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"feed_forward\\\\.experts\\\\.gate_up_proj$\", \"split\": \"col\", \"transposed\": true, \"parts\": 2, \"stacked\": true},\n" \
	"    {\"match\": \"feed_forward\\\\.experts\\\\.down_proj$\", \"split\": \"row\", \"transposed\": true, \"stacked\": true},\n" \
	"    {\"match\": \"feed_forward\\\\.router\\\\.weight$\", \"split\": \"replicate\"},\n" \
	LLAMA_EDGE_RULES "  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"

/* Qwen3-Next, split as vLLM's qwen3_next.py loads it: the full attention's
 * q_proj (QKVParallelLinear over 2 x num_attention_heads heads: each head's
 * query then its gate) by whole heads of both ("head_block": 2), k/v by kv
 * heads, o_proj row; the gated DeltaNet (QwenGatedDeltaNetAttention with
 * gqa_interleaved_layout) by key head groups: in_proj_qkvz and in_proj_ba
 * MergedColumnParallelLinear of one output each, so rank r holds whole
 * [q k v z] and [b a] groups; conv1d's channels [q | k | v] each split by
 * heads (mamba_v2_sharded_weight_loader); dt_bias and A_log by value head
 * (sharded_weight_loader(0)); out_proj row by value heads; the gated norm
 * replicated; experts, shared expert and its gate as the MoE presets. tp
 * must divide linear_num_key_heads (vLLM's num_k_heads // tp_size). */
#define QWEN3NEXT_JSON \
	"{\n" \
	"  \"name\": \"qwen3-next\",\n" \
	"  \"description\": \"Qwen3-Next (Qwen3NextForCausalLM) with Hugging Face names, split as vLLM does. Full attention: q_proj (each head's query then its output gate) col by whole heads, k_proj/v_proj col by kv heads (replicated when tp > kv heads), o_proj row, q_norm/k_norm replicated. Gated DeltaNet (linear_attn): in_proj_qkvz and in_proj_ba col by key-head groups (each group's [q k v z] and [b a] whole on one rank; tp must divide linear_num_key_heads), conv1d's channels [q | k | v] each col by heads, dt_bias and A_log by value head, out_proj row by value heads, the gated norm replicated. Experts mlp.experts.N gate_proj/up_proj col, down_proj row; the shared expert like a dense MLP; the router (mlp.gate) and shared_expert_gate replicated; dense layers (mlp_only_layers) as LLaMA's; embed_tokens and lm_head vocab-parallel. With --ep N every expert lives on one EP group of tp/N ranks.\",\n" \
	LLAMA_STAGES \
	"  \"experts\": [\"experts\\\\.([0-9]+)\\\\.\"],\n" \
	"  \"rules\": [\n" \
	"    {\"match\": \"self_attn\\\\.q_proj\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"q\", \"head_block\": 2},\n" \
	"    {\"match\": \"self_attn\\\\.(k_proj|v_proj)\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"kv\"},\n" \
	"    {\"match\": \"self_attn\\\\.o_proj\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\"},\n" \
	"    {\"match\": \"self_attn\\\\.o_proj\\\\.bias$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"linear_attn\\\\.(in_proj_qkvz|in_proj_ba)\\\\.weight$\", \"split\": \"col\", \"heads\": \"lin_k\", \"head_count\": true},\n" \
	"    {\"match\": \"linear_attn\\\\.conv1d\\\\.weight$\", \"split\": \"col\", \"dim\": 0, \"parts\": [\"lin_k\", \"lin_k\", \"lin_v\"]},\n" \
	"    {\"match\": \"linear_attn\\\\.(dt_bias|A_log)$\", \"split\": \"col\", \"heads\": \"lin_v\", \"head_count\": true},\n" \
	"    {\"match\": \"linear_attn\\\\.out_proj\\\\.weight$\", \"split\": \"row\", \"heads\": \"lin_v\"},\n" \
	LLAMA_MLP_RULES MOE_RULES LLAMA_EDGE_RULES "  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"

/* Qwen3.5 and Qwen3.5-MoE, split as vLLM's qwen3_5.py loads them
 * (GatedDeltaNetAttention without gqa_interleaved_layout): in_proj_qkv and
 * in_proj_z one MergedColumnParallelLinear in_proj_qkvz of outputs [q, k,
 * v, z], in_proj_b and in_proj_a one in_proj_ba of [b, a], each output
 * split by tp: in_proj_qkv's [q | k | v] each col by heads (key, key,
 * value), in_proj_z col by value heads, in_proj_b/in_proj_a by value head;
 * conv1d, dt_bias, A_log, the gated norm and out_proj as Qwen3-Next's; the
 * full attention as Qwen3-Next's; a dense MLP (Qwen3.5) or the MoE presets'
 * experts and shared expert (Qwen3.5-MoE). tp must divide
 * linear_num_key_heads (rank r's value heads are then those of its key
 * heads, as repeat_interleave pairs them). */
#define QWEN35_RULES \
	"    {\"match\": \"self_attn\\\\.q_proj\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"q\", \"head_block\": 2},\n" \
	"    {\"match\": \"self_attn\\\\.(k_proj|v_proj)\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"kv\"},\n" \
	"    {\"match\": \"self_attn\\\\.o_proj\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\"},\n" \
	"    {\"match\": \"self_attn\\\\.o_proj\\\\.bias$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"linear_attn\\\\.(in_proj_qkv|conv1d)\\\\.weight$\", \"split\": \"col\", \"dim\": 0, \"parts\": [\"lin_k\", \"lin_k\", \"lin_v\"]},\n" \
	"    {\"match\": \"linear_attn\\\\.in_proj_z\\\\.weight$\", \"split\": \"col\", \"heads\": \"lin_v\"},\n" \
	"    {\"match\": \"linear_attn\\\\.(in_proj_b|in_proj_a)\\\\.weight$\", \"split\": \"col\", \"heads\": \"lin_v\", \"head_count\": true},\n" \
	"    {\"match\": \"linear_attn\\\\.(dt_bias|A_log)$\", \"split\": \"col\", \"heads\": \"lin_v\", \"head_count\": true},\n" \
	"    {\"match\": \"linear_attn\\\\.out_proj\\\\.weight$\", \"split\": \"row\", \"heads\": \"lin_v\"},\n"
#define QWEN35_LIN_DESC "Gated DeltaNet (linear_attn): in_proj_qkv's [q | k | v] each col by heads, in_proj_z col by value heads, in_proj_b/in_proj_a by value head (tp must divide linear_num_key_heads), conv1d's channels [q | k | v] each col by heads, dt_bias and A_log by value head, out_proj row by value heads, the gated norm replicated."
#define QWEN35_JSON \
	"{\n" \
	"  \"name\": \"qwen3_5\",\n" \
	"  \"description\": \"Qwen3.5 text (Qwen3_5ForCausalLM) with Hugging Face names, split as vLLM does. Full attention: q_proj (each head's query then its output gate) col by whole heads, k_proj/v_proj col by kv heads (replicated when tp > kv heads), o_proj row, q_norm/k_norm replicated. " QWEN35_LIN_DESC " MLP gate_proj/up_proj col, down_proj row; embed_tokens and lm_head vocab-parallel.\",\n" \
	LLAMA_STAGES \
	"  \"rules\": [\n" \
	QWEN35_RULES LLAMA_MLP_RULES LLAMA_EDGE_RULES "  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"
#define QWEN35MOE_JSON \
	"{\n" \
	"  \"name\": \"qwen3_5-moe\",\n" \
	"  \"description\": \"Qwen3.5-MoE text (Qwen3_5MoeForCausalLM) with Hugging Face names, split as vLLM does. Full attention: q_proj (each head's query then its output gate) col by whole heads, k_proj/v_proj col by kv heads (replicated when tp > kv heads), o_proj row, q_norm/k_norm replicated. " QWEN35_LIN_DESC " Experts mlp.experts.N gate_proj/up_proj col, down_proj row; the shared expert like a dense MLP; the router (mlp.gate) and shared_expert_gate replicated; embed_tokens and lm_head vocab-parallel. With --ep N every expert lives on one EP group of tp/N ranks.\",\n" \
	LLAMA_STAGES \
	"  \"experts\": [\"experts\\\\.([0-9]+)\\\\.\"],\n" \
	"  \"rules\": [\n" \
	QWEN35_RULES MOE_RULES LLAMA_EDGE_RULES "  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"

/* Layer parts (tpc_family.h). LLaMA's are the zero values: RMSNorm before
 * each sublayer, GQA with rotate-half RoPE, SwiGLU, sequential residual. */
#define LLAMA_PARTS PARTS(.tied_head = true)

/* Fields left out are NULL: no layer parts (verify's structure and layer
 * checks only), no architectures, no
 * rules presets, no checked layouts, no tensor table. */
static const tpc_family families[] = {
	{.name = "llama",
	 .desc = "LLaMA / Mistral / Qwen2 / Qwen3 / Gemma / Phi-3 (HF names): GQA q/k/v col on head boundaries, o row, gate/up col, down row, vocab-parallel embed and lm_head",
	 .plan = LLAMA_JSON("llama"),
	 .hf_arch = A("LlamaForCausalLM"),
	 .gguf = &tpc__gguf_llama,
	 .rules = A("megatron-llama", "torchtitan"),
	 .layouts = A("vllm", "trtllm", "megatron", "megatron-dist"),
	 .tensors = llama_tensors,
	 LLAMA_PARTS},
	{.name = "mistral",
	 .desc = "Mistral (HF names): the llama plan",
	 .plan = LLAMA_JSON("mistral"),
	 .hf_arch = A("MistralForCausalLM"),
	 .gguf = &tpc__gguf_mistral,
	 .rules = A("megatron-llama"),
	 .layouts = A("vllm", "trtllm", "megatron", "megatron-dist"),
	 .tensors = llama_tensors,
	 LLAMA_PARTS},
	{.name = "qwen2",
	 .desc = "Qwen2 / Qwen2.5 dense (HF names): the llama plan (q/k/v biases split with their weights)",
	 .plan = LLAMA_JSON("qwen2"),
	 .hf_arch = A("Qwen2ForCausalLM"),
	 .gguf = &tpc__gguf_qwen2,
	 .rules = A("megatron-llama"),
	 .layouts = A("vllm", "trtllm", "megatron", "megatron-dist"),
	 .tensors = llama_tensors,
	 .trtllm = {.qwen_type = "qwen2"},
	 PARTS(.attn_bias = true, .tied_head = true)},
	{.name = "qwen3",
	 .desc = "Qwen3 dense (HF names): the llama plan; per-head q_norm/k_norm replicated, head_dim from config.json",
	 .plan = LLAMA_JSON("qwen3"),
	 .hf_arch = A("Qwen3ForCausalLM"),
	 .gguf = &tpc__gguf_qwen3,
	 .rules = A("megatron-llama"),
	 .layouts = A("vllm", "megatron", "megatron-dist"),
	 .tensors = llama_tensors,
	 PARTS(.qk_norm = TPC_PART_QK_HEAD, .tied_head = true)},
	{.name = "gemma",
	 .desc = "Gemma (HF names): the llama plan; head_dim from config.json (not hidden/heads)",
	 .plan = LLAMA_JSON("gemma"),
	 .hf_arch = A("GemmaForCausalLM"),
	 .gguf = &tpc__gguf_gemma,
	 .tensors = llama_tensors,
	 PARTS(.norm_offset = 1, .embed_scale = true, .tied_head = true)},
	{.name = "gemma2",
	 .desc = "Gemma 2 (HF names): the llama plan; sandwich norms replicated, head_dim from config.json",
	 .plan = LLAMA_JSON("gemma2"),
	 .hf_arch = A("Gemma2ForCausalLM"),
	 .gguf = &tpc__gguf_gemma2,
	 .layouts = A("vllm"),
	 .vllm_no_lm_head = true, /* vLLM's Gemma2ForCausalLM: no lm_head, assert config.tie_word_embeddings */
	 .tensors = gemma2_tensors,
	 PARTS(.norm_offset = 1, .place = TPC_PART_SANDWICH, .mlp = TPC_PART_MLP_GELU_TANH_GLU, .embed_scale = true,
	       .swa_every = 2, .tied_head = true)},
	{.name = "gemma3",
	 .desc = "Gemma 3 text (HF names): the llama plan; per-head q_norm/k_norm and sandwich norms replicated, head_dim from config.json",
	 .plan = LLAMA_JSON("gemma3"),
	 .hf_arch = A("Gemma3ForCausalLM"),
	 .gguf = &tpc__gguf_gemma3,
	 .layouts = A("vllm"),
	 .vllm_no_lm_head = true, /* vLLM's Gemma3ForCausalLM: as Gemma 2's */
	 .tensors = gemma2_tensors,
	 PARTS(.norm_offset = 1, .place = TPC_PART_SANDWICH, .qk_norm = TPC_PART_QK_HEAD, .mlp = TPC_PART_MLP_GELU_TANH_GLU,
	       .embed_scale = true, .swa_every = 6, .tied_head = true)},
	{.name = "phi3",
	 .desc = "Phi-3 (HF names): the llama plan; fused qkv_proj [q|k|v] and gate_up_proj [gate|up] split per part",
	 .plan = LLAMA_JSON("phi3"),
	 .hf_arch = A("Phi3ForCausalLM"),
	 .gguf = &tpc__gguf_phi3,
	 .layouts = A("vllm"),
	 .tensors = llama_tensors,
	 /* Phi-4-mini's partial_rotary_factor (the whole head unsaid); a
	  * longrope rope's original_max_position_embeddings Phi3Config's own
	  * field (default 4096); its older names su and yarn longrope too */
	 PARTS(.partial_rope = true, .rope_fraction = 1.0, .rope_orig_top = 4096, .longrope_alias = true,
	       .tied_head = true)},
	{.name = "olmo2",
	 .desc = "OLMo 2 (HF names): the llama plan; q_norm/k_norm over the whole projection and the post-attention/post-feedforward norms replicated",
	 .plan = LLAMA_JSON("olmo2"),
	 .hf_arch = A("Olmo2ForCausalLM"),
	 .gguf = &tpc__gguf_olmo2,
	 .layouts = A("vllm"),
	 .vllm_tp_le_kv_heads = true, /* vLLM's Olmo2Attention._apply_qk_norm: all-gather, then k_norm of kv heads */
	 .tensors = olmo2_tensors,
	 PARTS(.place = TPC_PART_POST, .qk_norm = TPC_PART_QK_WHOLE, .tied_head = true)},
	{.name = "olmo3",
	 .desc = "OLMo 3 (HF names): the llama plan; q_norm/k_norm over the whole projection and the post-attention/post-feedforward norms replicated",
	 .plan = LLAMA_JSON("olmo3"),
	 .hf_arch = A("Olmo3ForCausalLM"),
	 .gguf = &tpc__gguf_olmo3,
	 .layouts = A("vllm"),
	 .vllm_tp_le_kv_heads = true, /* vLLM runs it as Olmo2ForCausalLM */
	 .tensors = olmo2_tensors,
	 PARTS(.place = TPC_PART_POST, .qk_norm = TPC_PART_QK_WHOLE, .swa_every = 4, .tied_head = true)},
	{.name = "starcoder2",
	 .desc = "StarCoder2 (HF names): q/k/v col on head boundaries, o_proj row, mlp.c_fc col, mlp.c_proj row (biases with their weights); LayerNorms replicated",
	 .plan = STARCODER2_JSON,
	 .hf_arch = A("Starcoder2ForCausalLM"),
	 .gguf = &tpc__gguf_starcoder2,
	 .tensors = starcoder2_tensors,
	 PARTS(.norm = TPC_PART_LAYERNORM, .attn_bias = true, .mlp = TPC_PART_MLP_GELU_NEW, .tied_head = true)},
	/* LLaMA's tensors, plan and parts; its four multipliers are
	 * config.json's facts */
	{.name = "granite",
	 .desc = "Granite (HF names): the llama plan",
	 .plan = LLAMA_JSON("granite"),
	 .hf_arch = A("GraniteForCausalLM"),
	 .gguf = &tpc__gguf_granite,
	 .tensors = llama_tensors,
	 LLAMA_PARTS},
	/* LLaMA's tensors, plan and parts, every fourth layer without RoPE by
	 * default; no_rope_layers and the sliding window are config.json's facts */
	{.name = "smollm3",
	 .desc = "SmolLM3 (HF names): the llama plan; layers without RoPE as config.json's no_rope_layers says (every 4th by default)",
	 .plan = LLAMA_JSON("smollm3"),
	 .hf_arch = A("SmolLM3ForCausalLM"),
	 .gguf = &tpc__gguf_smollm3,
	 .tensors = llama_tensors,
	 PARTS(.rope_off_every = 4, .tied_head = true)},
	/* LLaMA's plan and parts with q/k/v biases (attention_bias) and an
	 * o_proj bias (attention_out_bias) where the checkpoint has them */
	{.name = "seed-oss",
	 .desc = "Seed-OSS (HF names): the llama plan (q/k/v and o_proj biases split with their weights); head_dim from config.json",
	 .plan = LLAMA_JSON("seed-oss"),
	 .hf_arch = A("SeedOssForCausalLM"),
	 .gguf = &tpc__gguf_seedoss,
	 .tensors = seedoss_tensors,
	 PARTS(.attn_bias = true, .tied_head = true)},
	/* sandwich norms without Gemma's 1 + w; half of each head rotated
	 * (partial_rotary_factor, config.json's) in interleaved pairs */
	{.name = "glm4",
	 .desc = "GLM-4 (HF names): the llama plan (q/k/v biases split with their weights, fused gate_up_proj [gate|up] split per part); sandwich norms replicated, head_dim from config.json",
	 .plan = LLAMA_JSON("glm4"),
	 .hf_arch = A("Glm4ForCausalLM"),
	 .gguf = &tpc__gguf_glm4,
	 .tensors = glm4_tensors,
	 PARTS(.place = TPC_PART_SANDWICH, .rope = TPC_PART_ROPE_INTERLEAVED, .partial_rope = true, .attn_bias = true,
	       .tied_head = true)},
	/* LLaMA's plan and parts, the rope on interleaved pairs */
	{.name = "ernie4_5",
	 .desc = "ERNIE 4.5 dense (HF names): the llama plan (use_bias's biases split with their weights); head_dim from config.json",
	 .plan = LLAMA_JSON("ernie4_5"),
	 .hf_arch = A("Ernie4_5ForCausalLM"),
	 .gguf = &tpc__gguf_ernie4_5,
	 .tensors = ernie4_5_tensors,
	 PARTS(.rope = TPC_PART_ROPE_INTERLEAVED, .attn_bias = true, .tied_head = true)},
	/* OLMo 2's tensor table and post placement, per-head q/k norms, three
	 * sliding layers in four by default (sliding_window_pattern); the
	 * global layers without rope when the model slides */
	{.name = "exaone4",
	 .desc = "EXAONE 4 (HF names): the llama plan; per-head q_norm/k_norm and the post-attention/post-feedforward norms replicated",
	 .plan = LLAMA_JSON("exaone4"),
	 .hf_arch = A("Exaone4ForCausalLM"),
	 .gguf = &tpc__gguf_exaone4,
	 .tensors = olmo2_tensors,
	 PARTS(.place = TPC_PART_POST, .qk_norm = TPC_PART_QK_HEAD, .swa_every = 4, .nope_global = true, .tied_head = true)},
	/* one input LayerNorm for the parallel attention and MLP; the rotary
	 * fraction is config.json's */
	{.name = "phi",
	 .desc = "Phi-1 / Phi-1.5 / Phi-2 (HF names): q/k/v col on head boundaries, self_attn.dense row, mlp.fc1 col, mlp.fc2 row (biases with their weights); lm_head and its bias vocab; LayerNorms replicated",
	 .plan = PHI_JSON,
	 .hf_arch = A("PhiForCausalLM"),
	 .gguf = &tpc__gguf_phi2,
	 .tensors = phi_tensors,
	 PARTS(.norm = TPC_PART_LAYERNORM, .partial_rope = true, .attn_bias = true, .mlp = TPC_PART_MLP_GELU_NEW,
	       .resid = TPC_PART_PARALLEL_ONE_NORM, .tied_head = true)},
	/* the llama plan; one weight-only LayerNorm for the parallel attention
	 * and SwiGLU, interleaved RoPE on the sliding layers only (nope_global;
	 * three in four by default; the window and layer_types are config.json's),
	 * the logits times config.json's logit_scale */
	{.name = "cohere2",
	 .desc = "Cohere 2 / Command R7B (HF names): the llama plan; one input LayerNorm replicated",
	 .plan = LLAMA_JSON("cohere2"),
	 .hf_arch = A("Cohere2ForCausalLM"),
	 .gguf = &tpc__gguf_cohere2,
	 .tensors = cohere2_tensors,
	 PARTS(.norm = TPC_PART_LAYERNORM, .rope = TPC_PART_ROPE_INTERLEAVED, .resid = TPC_PART_PARALLEL_ONE_NORM,
	       .swa_every = 4, .nope_global = true, .logit_scale = true, .tied_head = true)},
	{.name = "mixtral",
	 .desc = "Mixtral (HF names): llama attention; block_sparse_moe.experts.N w1/w3 col, w2 row (tp inside each expert); router replicated",
	 .plan = MOE_JSON("mixtral", "Mixtral (MixtralForCausalLM) with Hugging Face names."),
	 .hf_arch = A("MixtralForCausalLM"),
	 .gguf = &tpc__gguf_mixtral,
	 .layouts = A("vllm", "trtllm", "megatron", "megatron-dist"),
	 .tensors = mixtral_tensors,
	 PARTS(.router = TPC_PART_ROUTER_SOFTMAX_TOPK, .experts_per_tok = 2, .tied_head = true)},
	{.name = "qwen2-moe",
	 .desc = "Qwen2-MoE (HF names): llama attention (q/k/v biases split with their weights); mlp.experts.N gate/up col, down row; shared_expert like a dense MLP; router and shared_expert_gate replicated",
	 .plan = MOE_JSON("qwen2-moe", "Qwen2-MoE (Qwen2MoeForCausalLM) with Hugging Face names."),
	 .hf_arch = A("Qwen2MoeForCausalLM"),
	 .gguf = &tpc__gguf_qwen2moe,
	 .layouts = A("vllm"),
	 .vllm_tp_le_experts = true, /* vLLM's Qwen2MoeSparseMoeBlock: tp_size > num_experts raises */
	 .tensors = qwen2moe_tensors,
	 PARTS(.attn_bias = true, .router = TPC_PART_ROUTER_SOFTMAX, .tied_head = true)},
	{.name = "qwen3-moe",
	 .desc = "Qwen3-MoE (HF names): llama attention, per-head q_norm/k_norm replicated; mlp.experts.N gate/up col, down row; router replicated; no shared expert",
	 .plan = MOE_JSON("qwen3-moe", "Qwen3-MoE (Qwen3MoeForCausalLM) with Hugging Face names."),
	 .hf_arch = A("Qwen3MoeForCausalLM"),
	 .gguf = &tpc__gguf_qwen3moe,
	 .layouts = A("vllm", "megatron-dist"),
	 .vllm_tp_le_experts = true, /* vLLM's Qwen3MoeSparseMoeBlock: as Qwen2-MoE's */
	 .tensors = qwen3moe_tensors,
	 PARTS(.qk_norm = TPC_PART_QK_HEAD, .router = TPC_PART_ROUTER_SOFTMAX, .tied_head = true)},
	{.name = "olmoe",
	 .desc = "OLMoE (HF names): llama attention, q_norm/k_norm over the whole projection replicated; mlp.experts.N gate/up col, down row; router replicated",
	 .plan = MOE_JSON("olmoe", "OLMoE (OlmoeForCausalLM) with Hugging Face names."),
	 .hf_arch = A("OlmoeForCausalLM"),
	 .gguf = &tpc__gguf_olmoe,
	 .tensors = olmoe_tensors,
	 PARTS(.qk_norm = TPC_PART_QK_WHOLE, .router = TPC_PART_ROUTER_SOFTMAX, .tied_head = true)},
	/* Granite's four multipliers (config.json's facts) around experts
	 * stacked in the checkpoint, routed by the softmax of the top-k logits */
	{.name = "granitemoe",
	 .desc = "Granite-MoE (HF names): llama attention; experts stacked in block_sparse_moe.input_linear [E,2I,H] col in 2 parts [gate|up] and output_linear [E,H,I] row inside each (--ep: each group its experts); router replicated",
	 .plan = GRANITEMOE_JSON("granitemoe", "Granite-MoE (GraniteMoeForCausalLM) with Hugging Face names."),
	 .hf_arch = A("GraniteMoeForCausalLM"),
	 .gguf = &tpc__gguf_granitemoe,
	 .tensors = granitemoe_tensors,
	 PARTS(.router = TPC_PART_ROUTER_SOFTMAX_TOPK, .tied_head = true)},
	/* Granite-MoE's with a shared expert beside the routed ones */
	{.name = "granitemoeshared",
	 .desc = "Granite-MoE with a shared expert (HF names): the granitemoe plan; shared_mlp.input_linear col in 2 parts [gate|up], output_linear row",
	 .plan = GRANITEMOE_JSON("granitemoeshared", "Granite-MoE with a shared expert (GraniteMoeSharedForCausalLM) with Hugging Face names."),
	 .hf_arch = A("GraniteMoeSharedForCausalLM"),
	 .gguf = &tpc__gguf_granitemoe_shared,
	 .tensors = granitemoe_shared_tensors,
	 PARTS(.router = TPC_PART_ROUTER_SOFTMAX_TOPK, .tied_head = true)},
	/* Granite-MoE-shared's layers with a Mamba-2 mixer in place of the
	 * attention where layer_types says "mamba" */
	{.name = "granitemoehybrid",
	 .desc = "Granite 4 hybrid (HF names): the granitemoeshared plan; Mamba-2 mixers as vLLM's MambaMixer2: in_proj col in parts [z|x|B|C|dt], conv1d col [x|B|C], B/C by groups (one group replicated), A_log/D/dt_bias/norm with their heads, out_proj row",
	 .plan = GRANITEHYBRID_JSON("granitemoehybrid"),
	 .hf_arch = A("GraniteMoeHybridForCausalLM"),
	 .gguf = &tpc__gguf_granitehybrid,
	 .tensors = granitehybrid_tensors,
	 PARTS(.router = TPC_PART_ROUTER_SOFTMAX_TOPK, .rope_if_said = true, .ssm = true, .tied_head = true)},
	/* the same without experts (num_local_experts 0): its GGUF names the
	 * shared MLP as a dense one; a config.json finds the record above
	 * (tpc_family_by_arch) but for GGUF */
	{.name = "granitemoehybrid-dense",
	 .desc = "Granite 4 hybrid without experts (HF names): the granitemoehybrid plan",
	 .plan = GRANITEHYBRID_JSON("granitemoehybrid-dense"),
	 .hf_arch = A("GraniteMoeHybridForCausalLM"),
	 .gguf = &tpc__gguf_granitehybrid_dense,
	 .tensors = granitehybrid_dense_tensors,
	 PARTS(.rope_if_said = true, .ssm = true, .tied_head = true)},
	/* per-head q/k norms (use_qk_norm), rotate-half RoPE on a part of each
	 * head (partial_rotary_factor, 0.5 when config.json has none), the
	 * sigmoid router with its correction bias (groups: n_group and
	 * topk_group, config.json's), a shared expert */
	{.name = "glm4-moe",
	 .desc = "GLM-4.5 MoE (HF names): llama attention (q/k/v biases split with their weights, q_norm/k_norm replicated); mlp.experts.N gate/up col, down row; shared_experts like a dense MLP; router and e_score_correction_bias replicated; the MTP layer's eh_proj and norms replicated",
	 .plan = MOE_JSON("glm4-moe", "GLM-4.5 MoE (Glm4MoeForCausalLM) with Hugging Face names; the next-token-prediction layer after num_hidden_layers (eh_proj, enorm, hnorm, shared_head) replicated by the fallback."),
	 .hf_arch = A("Glm4MoeForCausalLM"),
	 .gguf = &tpc__gguf_glm4moe,
	 .tensors = glm4moe_tensors,
	 .f32_roles = ROLES(TPC_ROLE_FFN_EXP_PROBS_B), /* _keep_in_fp32_modules_strict */
	 PARTS(.qk_norm = TPC_PART_QK_HEAD, .partial_rope = true, .rope_fraction = 0.5, .attn_bias = true,
	       .router = TPC_PART_ROUTER_SIGMOID_BIAS, .tied_head = true)},
	/* attention sinks, the yarn rope (config.json's rope_parameters), sliding
	 * layers every other one (layer_types, else GptOssConfig's default: the
	 * even ones), the router's bias and the softmax of its top-k logits,
	 * experts with the clamped SwiGLU (swiglu_limit) */
	{.name = "gpt-oss",
	 .desc = "gpt-oss (HF names, bf16/f32): llama attention with biases, sinks by query head; experts stacked [in, out], gate_up_proj interleaved col in whole pairs, down_proj row (--ep: each group its experts); router replicated",
	 .plan = GPTOSS_JSON,
	 .hf_arch = A("GptOssForCausalLM"),
	 .gguf = &tpc__gguf_gptoss,
	 .tensors = gptoss_tensors,
	 .f32_roles_f16 = ROLES(TPC_ROLE_ATTN_NORM, TPC_ROLE_FFN_NORM, TPC_ROLE_OUTPUT_NORM), /* _keep_in_fp32_modules */
	 PARTS(.attn_bias = true, .mlp = TPC_PART_MLP_CLAMPED_GLU, .router = TPC_PART_ROUTER_SOFTMAX_TOPK,
	       .experts_per_tok = 4, .swa_every = 2)},
	/* LayerNorms with biases, q/k/v/o and lm_head biases, Mixtral's experts
	 * under the sparsemixer router (router_jitter_noise config.json's,
	 * PhimoeConfig's 0.01 when unsaid) */
	{.name = "phimoe",
	 .desc = "Phi-3.5-MoE (HF names): llama attention (q/k/v/o biases split with their weights); block_sparse_moe.experts.N w1/w3 col, w2 row; router replicated; lm_head and its bias vocab; LayerNorms replicated",
	 .plan = MOE_JSON_OF("phimoe", "Phi-3.5-MoE (PhiMoEForCausalLM) with Hugging Face names; lm_head's bias vocab-parallel with its weight, the LayerNorms' weights and biases replicated.", LLAMA_EDGE_RULES_HEAD_BIAS),
	 .hf_arch = A("PhiMoEForCausalLM", "PhimoeForCausalLM"),
	 .gguf = &tpc__gguf_phimoe,
	 .tensors = phimoe_tensors,
	 PARTS(.norm = TPC_PART_LAYERNORM, .attn_bias = true, .router = TPC_PART_ROUTER_SPARSEMIXER, .router_jitter = 0.01,
	       .tied_head = true)},
	/* per-head q/k norms after the rope, q/k/v/o biases, the softmax of the
	 * top-k (moe_topk) renormalised, an ungated shared expert in every layer */
	{.name = "hunyuan-moe",
	 .desc = "HunYuan MoE (HF names): llama attention (q/k/v/o biases split with their weights, query/key_layernorm replicated); mlp.experts.N gate/up col, down row; shared_mlp like a dense MLP; router mlp.gate.wg replicated",
	 .plan = MOE_JSON("hunyuan-moe", "HunYuan MoE (HunYuanMoEV1ForCausalLM) with Hugging Face names; the shared expert mlp.shared_mlp split as a dense MLP, the router mlp.gate.wg replicated by the fallback."),
	 .hf_arch = A("HunYuanMoEV1ForCausalLM"),
	 .gguf = &tpc__gguf_hunyuanmoe,
	 .tensors = hunyuanmoe_tensors,
	 .f32_roles = ROLES(TPC_ROLE_FFN_GATE_INP), /* mlp.gate.wg built with dtype=torch.float32 */
	 PARTS(.qk_norm = TPC_PART_QK_HEAD, .qk_after_rope = true, .rope_alpha = true, .attn_bias = true, .router = TPC_PART_ROUTER_SOFTMAX_TOPK,
	       .tied_head = true)},
	/* LLaMA with per-head q/k norms after the rope, attention_bias's
	 * biases, HunYuan's NTK-alpha rope */
	{.name = "hunyuan-dense",
	 .desc = "HunYuan dense (HF names): the llama plan; q/k/v/o biases split with their weights, per-head query/key_layernorm replicated, head_dim from config.json",
	 .plan = LLAMA_JSON("hunyuan-dense"),
	 .hf_arch = A("HunYuanDenseV1ForCausalLM"),
	 .gguf = &tpc__gguf_hunyuandense,
	 .layouts = A("vllm"),
	 .vllm_cfg_true = "use_qk_norm", /* vLLM's HunYuanAttention: getattr(config, "use_qk_norm", False) */
	 .tensors = hunyuandense_tensors,
	 PARTS(.qk_norm = TPC_PART_QK_HEAD, .qk_after_rope = true, .rope_alpha = true, .attn_bias = true, .tied_head = true)},
	/* ERNIE 4.5's rope in interleaved pairs and use_bias's biases; the
	 * softmax's top-k chosen with the correction bias, renormalised
	 * (Ernie4_5_MoeTopKRouter), a shared expert */
	{.name = "ernie4_5-moe",
	 .desc = "ERNIE 4.5 MoE (HF names): llama attention (use_bias's biases split with their weights); mlp.experts.N gate/up col, down row; shared_experts like a dense MLP; router and moe_statics' e_score_correction_bias replicated; dense layers as LLaMA's",
	 .plan = MOE_JSON_OF("ernie4_5-moe", "ERNIE 4.5 MoE (Ernie4_5_MoeForCausalLM) with Hugging Face names; the layers outside moe_layer_start_index, moe_layer_interval and moe_layer_end_index dense; mlp.moe_statics.e_score_correction_bias replicated by the fallback; lm_head's bias (use_bias) vocab-parallel with its weight.", LLAMA_EDGE_RULES_HEAD_BIAS),
	 .hf_arch = A("Ernie4_5_MoeForCausalLM"),
	 .gguf = &tpc__gguf_ernie4_5moe,
	 .tensors = ernie4_5moe_tensors,
	 .f32_roles = ROLES(TPC_ROLE_FFN_GATE_INP, TPC_ROLE_FFN_EXP_PROBS_B), /* _keep_in_fp32_modules_strict */
	 PARTS(.rope = TPC_PART_ROPE_INTERLEAVED, .attn_bias = true, .router = TPC_PART_ROUTER_SOFTMAX_TOPK, .tied_head = true)},
	{.name = "deepseek-v3",
	 .desc = "DeepSeek-V3 / DeepSeek-V2 (HF names): MLA q_a/kv_a replicated, q_b_proj/kv_b_proj col and o_proj row by heads; mlp.experts.N gate/up col, down row; shared_experts like a dense MLP; router and e_score_correction_bias replicated",
	 .plan = DEEPSEEK_JSON,
	 .hf_arch = A("DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"),
	 .gguf = &tpc__gguf_deepseek2,
	 .layouts = A("megatron-dist"),
	 .tensors = deepseek_tensors,
	 .f32_roles = ROLES(TPC_ROLE_FFN_EXP_PROBS_B), /* _keep_in_fp32_modules_strict */
	 PARTS(.attn = TPC_PART_MLA, .rope = TPC_PART_ROPE_INTERLEAVED, .router = TPC_PART_ROUTER_SIGMOID_BIAS,
	       .tied_head = true)},
	/* Llama 4 text: the rope on interleaved pairs (its complex form), every
	 * fourth layer without it by default (no_rope_layers, config.json's);
	 * the L2 q/k norm of the rotating layers, the temperature tuning of the
	 * others (Llama4TextConfig's floor_scale 8192, attn_scale 0.1 unless
	 * config.json says), the rotating layers chunked (attention_chunk_size)
	 * unless layer_types says, a sigmoid top-1 router on the experts' input */
	{.name = "llama4",
	 .desc = "Llama 4 text (HF names): llama attention; feed_forward and its shared_expert gate/up col, down row; experts stacked [in, out], gate_up_proj col in 2 parts [gate|up], down_proj row (--ep: each group its experts); router replicated",
	 .plan = LLAMA4_JSON,
	 .hf_arch = A("Llama4ForCausalLM"),
	 .gguf = &tpc__gguf_llama4,
	 .tensors = llama4_tensors,
	 PARTS(.qk_norm = TPC_PART_QK_L2_ROPE, .rope = TPC_PART_ROPE_INTERLEAVED, .attn_bias = true,
	       .router = TPC_PART_ROUTER_SIGMOID_INPUT, .experts_per_tok = 1, .rope_off_every = 4, .temp_floor = 8192,
	       .temp_scale = 0.1, .chunk_rope = true, .tied_head = true)},
	/* the gated DeltaNet's layers (layer_types) beside gated full attention,
	 * zero-centred RMSNorms (weight + 1), experts with a gated shared expert */
	{.name = "qwen3-next",
	 .desc = "Qwen3-Next (HF names): gated q_proj col by whole heads; linear_attn in_proj_qkvz/in_proj_ba col by key-head groups, conv1d [q|k|v] by heads, dt_bias/A_log by value head, out_proj row; experts gate/up col, down row; shared expert like a dense MLP; router and shared_expert_gate replicated",
	 .plan = QWEN3NEXT_JSON,
	 .hf_arch = A("Qwen3NextForCausalLM"),
	 .gguf = &tpc__gguf_qwen3next,
	 .tensors = qwen3next_tensors,
	 .mtp = &qwen_mtp,
	 PARTS(.norm_offset = 1, .attn_gate = true, .linear_attn = TPC_PART_LINEAR_GATED_DELTA, .qk_norm = TPC_PART_QK_HEAD,
	       .partial_rope = true, .rope_fraction = 0.25, .router = TPC_PART_ROUTER_SOFTMAX, .tied_head = true)},
	/* Qwen3-Next's layers with the DeltaNet's projections over all heads
	 * (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a), a dense MLP on every
	 * layer; Qwen3.5-MoE: experts beside a gated shared expert on every
	 * layer, routed by the softmax's top-k always renormalised
	 * (Qwen3_5MoeTopKRouter: no norm_topk_prob). The interleaved mrope
	 * (mrope_section) of a text position, the same on its three axes, is
	 * the plain partial rope */
	{.name = "qwen3_5",
	 .desc = "Qwen3.5 text (HF names): gated q_proj col by whole heads; linear_attn in_proj_qkv [q|k|v] and conv1d by heads, in_proj_z/in_proj_b/in_proj_a/dt_bias/A_log by value head, out_proj row; mlp gate/up col, down row",
	 .plan = QWEN35_JSON,
	 .hf_arch = A("Qwen3_5ForCausalLM"),
	 .hf_wrap = A("Qwen3_5ForConditionalGeneration"),
	 .gguf = &tpc__gguf_qwen35,
	 .tensors = qwen35_tensors,
	 .mtp = &qwen_mtp,
	 PARTS(.norm_offset = 1, .attn_gate = true, .linear_attn = TPC_PART_LINEAR_GATED_DELTA, .qk_norm = TPC_PART_QK_HEAD,
	       .partial_rope = true, .rope_fraction = 0.25, .tied_head = true)},
	{.name = "qwen3_5-moe",
	 .desc = "Qwen3.5-MoE text (HF names): gated q_proj col by whole heads; linear_attn in_proj_qkv [q|k|v] and conv1d by heads, in_proj_z/in_proj_b/in_proj_a/dt_bias/A_log by value head, out_proj row; experts gate/up col, down row; shared expert like a dense MLP; router and shared_expert_gate replicated",
	 .plan = QWEN35MOE_JSON,
	 .hf_arch = A("Qwen3_5MoeForCausalLM"),
	 .hf_wrap = A("Qwen3_5MoeForConditionalGeneration"),
	 .gguf = &tpc__gguf_qwen35moe,
	 .tensors = qwen35moe_tensors,
	 .mtp = &qwen_mtp,
	 PARTS(.norm_offset = 1, .attn_gate = true, .linear_attn = TPC_PART_LINEAR_GATED_DELTA, .qk_norm = TPC_PART_QK_HEAD,
	       .partial_rope = true, .rope_fraction = 0.25, .router = TPC_PART_ROUTER_SOFTMAX_TOPK, .tied_head = true)},
};
#undef A

/* The decoders above, then the families of tpc_family_classic.c, in the
 * order `tpconv plan --list` shows them. */
#define NFAM (sizeof(families) / sizeof(families[0]))

size_t tpc_family_count(void)
{
	return NFAM + tpc__family_classic_count;
}

const tpc_family *tpc_family_at(size_t i)
{
	return i < NFAM ? &families[i] : i < tpc_family_count() ? &tpc__family_classic[i - NFAM] : NULL;
}
