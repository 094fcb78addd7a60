/* tpc_family_gguf.c - the GGUF column of the family records (what each field
 * means: tpc_family_gguf.h), and the lookups by Hugging Face and by GGUF
 * architecture.
 *
 * Sources (Debian's llama.cpp-tools 0.7.0): conversion/base.py (TextModel:
 * set_gguf_parameters), conversion/llama.py, qwen.py, gemma.py, phi.py,
 * gpt2.py, gptneox.py. Values are the reference's; a row says which of its
 * methods it follows where that is not TextModel's.
 */
#include <stdio.h>
#include <string.h>

#include "tpc_family_gguf.h"

#define U32 TPC_GV_U32
#define F32 TPC_GV_F32
#define BOOL TPC_GV_BOOL

/* ---- {arch}.* keys from config.json ---- */

/* rows several tables share */
#define R_BLOCK {"block_count", U32, TPC_KH_REQ, "n_layers|num_hidden_layers|n_layer|num_layers"}
#define R_FILE_TYPE {"general.file_type", U32, TPC_KH_FILE_TYPE, NULL}
#define R_FF {"feed_forward_length", U32, TPC_KH_REQ, "intermediate_size"}
#define R_END {NULL, 0, TPC_KH_END, NULL}

/* TextModel.set_gguf_parameters, in its order: up to the head count (the
 * _OF forms: the block_count rule given), from the causal flag to the score
 * function, then head_dim and the file type */
#define TEXT_RULES_TOP TEXT_RULES_TOP_OF(R_BLOCK)
#define TEXT_RULES_TOP_OF(...) \
	__VA_ARGS__, \
	{"context_length", U32, TPC_KH_FIND, "max_position_embeddings|n_ctx|n_positions|max_length|max_sequence_length|model_max_length"}, \
	{"embedding_length", U32, TPC_KH_FIND, "hidden_size|n_embd|dim"}, \
	{"feed_forward_length", U32, TPC_KH_FIND, "prefix_dense_intermediate_size|dense_intermediate_size|intermediate_size|n_inner|hidden_dim"}, \
	{"attention.head_count", U32, TPC_KH_FIND, "num_attention_heads|n_head|n_heads"}
#define R_LOCAL_THETA "local_rope_theta|rope_local_theta|rope_theta_local|swa_rope_theta|rope_local_base_freq"
#define TEXT_RULES_MID TEXT_RULES_MID_OF({"rope.freq_base_swa", 0, TPC_KH_REFUSE, R_LOCAL_THETA})
#define TEXT_RULES_MID_OF(...) \
	{"attention.causal", BOOL, TPC_KH_FALSE_ONLY, "is_causal"}, \
	{"rope.scaling.type", 0, TPC_KH_ROPE_SCALING, NULL}, \
	{"rope.freq_base", F32, TPC_KH_ROPE_THETA, NULL}, \
	__VA_ARGS__, \
	{"attention.layer_norm_rms_epsilon", F32, TPC_KH_FIND, "rms_norm_eps|norm_eps"}, \
	{"attention.layer_norm_epsilon", F32, TPC_KH_FIND, "layer_norm_eps|layer_norm_epsilon|norm_epsilon"}, \
	{"expert_count", U32, TPC_KH_FIND, "num_local_experts|num_experts|n_routed_experts"}, \
	{"expert_used_count", U32, TPC_KH_FIND, "num_experts_per_tok|num_experts_per_token|top_k_experts"}, \
	{"expert_group_count", U32, TPC_KH_FIND, "n_group"}, \
	{"expert_group_used_count", U32, TPC_KH_FIND, "topk_group"}, \
	{"expert_gating_func", U32, TPC_KH_GATING_FUNC, "score_function|scoring_func|score_func|moe_router_activation|moe_router_activation_func|expert_selection_fn|router_score_func"}
#define TEXT_RULES TEXT_RULES_OF(R_BLOCK)
#define TEXT_RULES_OF(...) \
	TEXT_RULES_TOP_OF(__VA_ARGS__), \
	{"attention.head_count_kv", U32, TPC_KH_FIND, "num_key_value_heads|n_kv_heads"}, \
	TEXT_RULES_MID, \
	{"attention.key_length", U32, TPC_KH_HEAD_DIM, "head_dim"}, \
	R_FILE_TYPE

static const tpc_gguf_kv_rule llama_kv[] = {
	TEXT_RULES,
	{"vocab_size", U32, TPC_KH_REQ, "vocab_size"}, /* LlamaModel */
	{"rope.dimension_count", U32, TPC_KH_ROPE_DIM, NULL},
	R_END,
};
static const tpc_gguf_kv_rule qwen2_kv[] = {
	TEXT_RULES,
	{"pooling_type", 0, TPC_KH_REFUSE, "pooling_type"}, /* _try_set_pooling_type: modules.json (checked apart) */
	R_END,
};
/* Olmo2Model (conversion/olmo.py): TextModel's keys; a sliding_window (OLMo 3)
 * adds the sliding-window keys and pattern, not written yet */
static const tpc_gguf_kv_rule olmo2_kv[] = {
	TEXT_RULES,
	{"attention.sliding_window", 0, TPC_KH_REFUSE, "sliding_window"},
	R_END,
};
/* Olmo2Model for Olmo3ForCausalLM: TextModel's keys, then the window and a
 * bool per layer (layer_types, else three sliding layers in four) */
static const tpc_gguf_kv_rule olmo3_kv[] = {
	TEXT_RULES,
	{"attention.sliding_window", U32, TPC_KH_FIND, "sliding_window"},
	{"attention.sliding_window_pattern", TPC_GV_BOOL, TPC_KH_SWA_PATTERN, "4"},
	R_END,
};
static const tpc_gguf_kv_rule qwen2moe_kv[] = {
	TEXT_RULES,
	{"expert_feed_forward_length", U32, TPC_KH_FIND, "moe_intermediate_size"},
	{"expert_shared_feed_forward_length", U32, TPC_KH_FIND, "shared_expert_intermediate_size"},
	R_END,
};
/* Qwen3NextModel (conversion/qwen.py, a Qwen2MoeModel): Qwen2-MoE's keys,
 * then the gated DeltaNet's: the conv kernel, the key head size as the
 * state size, the key heads as groups, the value heads as the time step
 * rank, value heads x their size as the inner size; a bool per layer of
 * layer_types' linear_attention; full_attention_interval 4 whatever
 * config.json says (the reference reads transformers 5.12's
 * Qwen3NextConfig.to_dict(), whose __post_init__ pops it); the rotary
 * dimension int(head_dim x partial_rotary_factor, 0.25 unsaid); the
 * multi-token-prediction block (_QwenMtpMixin, the reference's default: its
 * layers in block_count, nextn_predict_layers after Qwen2-MoE's keys, a
 * false recurrent_layers entry each) */
#define QWEN3NEXT_RULES \
	TEXT_RULES_OF({"block_count", U32, TPC_KH_PLUS_MTP, "n_layers|num_hidden_layers|n_layer|num_layers"}), \
	{"expert_feed_forward_length", U32, TPC_KH_FIND, "moe_intermediate_size"}, \
	{"expert_shared_feed_forward_length", U32, TPC_KH_FIND, "shared_expert_intermediate_size"}, \
	{"nextn_predict_layers", U32, TPC_KH_MTP, NULL}, \
	{"ssm.conv_kernel", U32, TPC_KH_REQ, "linear_conv_kernel_dim"}, \
	{"ssm.state_size", U32, TPC_KH_REQ, "linear_key_head_dim"}, \
	{"ssm.group_count", U32, TPC_KH_REQ, "linear_num_key_heads"}, \
	{"ssm.time_step_rank", U32, TPC_KH_REQ, "linear_num_value_heads"}, \
	{"ssm.inner_size", U32, TPC_KH_PRODUCT, "linear_value_head_dim*linear_num_value_heads"}, \
	{"attention.recurrent_layers", BOOL, TPC_KH_LAYER_IS, "linear_attention|full_attention_interval|4"}, \
	{"full_attention_interval", U32, TPC_KH_CONST, "4"}, \
	{"rope.dimension_count", U32, TPC_KH_ROPE_PCT_HEAD, "0.25"}
/* Qwen3_5TextModel and Qwen3_5MoeTextModel (conversion/qwen.py: Qwen3NextModel
 * through _LinearAttentionVReorderBase): Qwen3-Next's keys, then
 * rope.dimension_sections (_Qwen35MRopeMixin: config.json's mrope_section
 * where TextModel writes it, else [11, 11, 10, 0] here); Qwen3.5's
 * _try_set_pooling_type last (modules.json, embedding_config.json,
 * classifier_pooling: refused, not written) */
#define QWEN35_RULES \
	QWEN3NEXT_RULES, \
	{"rope.dimension_sections", 0, TPC_KH_ROPE_SECTIONS, "11,11,10,0"}
static const tpc_gguf_kv_rule qwen35_kv[] = {
	QWEN35_RULES,
	{"pooling_type", 0, TPC_KH_REFUSE, "pooling_type|classifier_pooling"},
	R_END,
};
static const tpc_gguf_kv_rule qwen35moe_kv[] = {
	QWEN35_RULES,
	R_END,
};
static const tpc_gguf_kv_rule qwen3next_kv[] = {
	QWEN3NEXT_RULES,
	R_END,
};
/* OlmoeModel (conversion/olmo.py): TextModel's keys, then the rms epsilon
 * 1e-5 whatever rms_norm_eps says */
static const tpc_gguf_kv_rule olmoe_kv[] = {
	TEXT_RULES,
	{"attention.layer_norm_rms_epsilon", F32, TPC_KH_CONST, "1e-5"},
	R_END,
};
/* StarCoder2Model (conversion/starcoder.py): TextModel's keys */
static const tpc_gguf_kv_rule starcoder2_kv[] = {
	TEXT_RULES,
	R_END,
};
/* GraniteModel (conversion/granite.py): LlamaModel's keys, then its four
 * multipliers as the reference reads them from AutoConfig's to_dict(): the
 * value, else GraniteConfig's default 1.0 */
#define GRANITE_RULES \
	TEXT_RULES, \
	{"vocab_size", U32, TPC_KH_REQ, "vocab_size"}, \
	{"rope.dimension_count", U32, TPC_KH_ROPE_DIM, NULL}, \
	{"attention.scale", F32, TPC_KH_OR_ONE, "attention_multiplier"}, \
	{"embedding_scale", F32, TPC_KH_OR_ONE, "embedding_multiplier"}, \
	{"residual_scale", F32, TPC_KH_OR_ONE, "residual_multiplier"}, \
	{"logit_scale", F32, TPC_KH_OR_ONE, "logits_scaling"}
static const tpc_gguf_kv_rule granite_kv[] = {
	GRANITE_RULES,
	R_END,
};
/* GraniteMoeModel: GraniteModel's keys, then a shared expert's width */
static const tpc_gguf_kv_rule granitemoe_kv[] = {
	GRANITE_RULES,
	{"expert_shared_feed_forward_length", U32, TPC_KH_FIND, "shared_intermediate_size"},
	R_END,
};
/* GraniteHybridModel (conversion/granite.py, a Mamba2Model and a
 * GraniteMoeModel; find_hparam also tries each name with "mamba_"):
 * GraniteMoeModel's keys, then the mixer's; head_count_kv rewritten in its
 * place as an INT32 per layer (0 for a Mamba-2 layer); no rotary embedding
 * (rope.scaling.finetuned false) and context_length rewritten 2^20, as for
 * every Granite 4 but Bamba; Mamba2Model.set_vocab pads the vocabulary to
 * a multiple of 8, refused otherwise. An all-attention model the reference
 * writes as granite or granitemoe: refused */
#define GRANITEHYBRID_GROUPS "n_groups|num_groups|mamba_n_groups|mamba_num_groups"
static const tpc_gguf_kv_rule granitehybrid_kv[] = {
	GRANITE_RULES,
	{"expert_shared_feed_forward_length", U32, TPC_KH_FIND, "shared_intermediate_size"},
	{"ssm.conv_kernel", U32, TPC_KH_REQ, "conv_kernel|d_conv|mamba_conv_kernel|mamba_d_conv"},
	{"ssm.state_size", U32, TPC_KH_REQ,
	 "state_size|d_state|state_dim|ssm_state_size|mamba_state_size|mamba_d_state|mamba_state_dim|mamba_ssm_state_size"},
	{"ssm.group_count", U32, TPC_KH_REQ, GRANITEHYBRID_GROUPS},
	{"ssm.inner_size", U32, TPC_KH_PRODUCT,
	 "expand|num_heads|mamba_expand|mamba_num_heads*mamba_head_dim|hidden_size|d_model|mamba_mamba_head_dim|mamba_hidden_size|mamba_d_model"},
	{"ssm.time_step_rank", U32, TPC_KH_REQ, "n_heads|num_heads|mamba_n_heads|mamba_num_heads"},
	{"attention.head_count_kv", 0, TPC_KH_LAYERS_OF,
	 "num_key_value_heads|n_head_kv|mamba_num_key_value_heads|mamba_n_head_kv=attention"},
	{"rope.dimension_count", U32, TPC_KH_FIND, "attn_rotary_emb|mamba_attn_rotary_emb"},
	{"rope.scaling.finetuned", BOOL, TPC_KH_CONST, "0"},
	{"context_length", U32, TPC_KH_CONST, "1048576"},
	{"vocab_size", 0, TPC_KH_MULTIPLE_OF, "vocab_size%8"},
	R_END,
};
/* SmolLM3Model (a LlamaModel, conversion/llama.py): LlamaModel's keys and no
 * more; llama.cpp reads every 4th layer as one without RoPE and no window,
 * so a config.json that says otherwise is refused (no key is written) */
static const tpc_gguf_kv_rule smollm3_kv[] = {
	TEXT_RULES,
	{"vocab_size", U32, TPC_KH_REQ, "vocab_size"},
	{"rope.dimension_count", U32, TPC_KH_ROPE_DIM, NULL},
	{"no_rope_layer_step", 0, TPC_KH_ROPE_OFF_EVERY, "4"},
	{"attention.sliding_window", 0, TPC_KH_NO_SWA, NULL},
	R_END,
};
/* SeedOssModel (conversion/olmo.py): TextModel's keys */
static const tpc_gguf_kv_rule seedoss_kv[] = {
	TEXT_RULES,
	R_END,
};
/* Glm4Model (conversion/glm.py): TextModel's keys, then a half of head_dim
 * (partial_rotary_factor, Glm4Config's default 0.5) as the rotary dimension */
static const tpc_gguf_kv_rule glm4_kv[] = {
	TEXT_RULES,
	{"rope.dimension_count", U32, TPC_KH_ROPE_PCT_HEAD, "0.5"},
	R_END,
};
/* Glm4MoeModel (conversion/glm.py): TextModel's keys with the
 * next-token-prediction layers in block_count, then the rotary dimension
 * (Glm4MoeConfig's partial_rotary_factor default 0.5), the routed experts
 * (again, in place), their width, the shared experts, the leading dense
 * layers, the sigmoid gating (ExpertGatingFuncType.SIGMOID, 2), the scale,
 * the renormalisation and num_nextn_predict_layers (those layers: mtp_count,
 * left out under --no-mtp) */
static const tpc_gguf_kv_rule glm4moe_kv[] = {
	TEXT_RULES_OF({"block_count", U32, TPC_KH_PLUS_MTP, "n_layers|num_hidden_layers|n_layer|num_layers"}),
	{"rope.dimension_count", U32, TPC_KH_ROPE_PCT_HEAD, "0.5"},
	{"expert_count", U32, TPC_KH_FIND, "n_routed_experts"},
	{"expert_feed_forward_length", U32, TPC_KH_FIND, "moe_intermediate_size"},
	{"expert_shared_count", U32, TPC_KH_FIND, "n_shared_experts"},
	{"leading_dense_block_count", U32, TPC_KH_FIND, "first_k_dense_replace"},
	{"expert_gating_func", U32, TPC_KH_CONST, "2"},
	{"expert_weights_scale", F32, TPC_KH_FIND, "routed_scaling_factor"},
	{"expert_weights_norm", BOOL, TPC_KH_FIND, "norm_topk_prob"},
	{"nextn_predict_layers", U32, TPC_KH_MTP, "num_nextn_predict_layers"},
	R_END,
};
/* HunYuanMoEModel (conversion/hunyuan.py): TextModel's keys, then the
 * shared expert's width (intermediate_size), the experts' width, the experts
 * used and the shared experts from config.json's lists a layer each
 * (moe_intermediate_size, moe_topk, num_shared_expert; all the same, as it
 * asserts); then its dynamic NTK-alpha rope's keys (hunyuanmoe_rope) */
static const tpc_gguf_kv_rule hunyuanmoe_kv[] = {
	TEXT_RULES,
	{"expert_shared_feed_forward_length", U32, TPC_KH_REQ, "intermediate_size"},
	{"expert_feed_forward_length", U32, TPC_KH_LIST_SAME, "moe_intermediate_size"},
	{"expert_used_count", U32, TPC_KH_LIST_SAME, "moe_topk"},
	{"expert_shared_count", U32, TPC_KH_LIST_SAME, "num_shared_expert"},
	{"rope.freq_base", F32, TPC_KH_ROPE_ALPHA, NULL},
	R_END,
};
/* HunYuanMoEModel.set_gguf_parameters' rope_type "dynamic": alpha 1000
 * (its default too), rope_theta 10000, a 128-dim head, max_position_embeddings
 * 32k or 256k (its assert), written with a 256k context (Hunyuan-A13B's
 * usable one, its comment says). HunYuanModel (hunyuan-dense) has another
 * rule, hunyuandense_rope. */
static const tpc_gguf_rope_alpha hunyuanmoe_rope = {
	.rope_type = "dynamic", .alpha = 1000, .theta = 10000, .dim = 128, .ctx_from = {32768, 262144}, .ctx = 262144};
/* HunYuanModel (conversion/hunyuan.py:157-283) for HunYuanDenseV1ForCausalLM:
 * TextModel's keys without an expert_count from num_experts (its
 * set_gguf_parameters pops num_experts: HunyuanVL's 1 is no MoE), then its
 * rope's keys (hunyuandense_rope) */
static const tpc_gguf_kv_rule hunyuandense_kv[] = {
	TEXT_RULES_TOP,
	{"attention.head_count_kv", U32, TPC_KH_FIND, "num_key_value_heads|n_kv_heads"},
	{"attention.causal", BOOL, TPC_KH_FALSE_ONLY, "is_causal"},
	{"rope.scaling.type", 0, TPC_KH_ROPE_SCALING, NULL},
	{"rope.freq_base", F32, TPC_KH_ROPE_THETA, NULL},
	{"rope.freq_base_swa", 0, TPC_KH_REFUSE, R_LOCAL_THETA},
	{"attention.layer_norm_rms_epsilon", F32, TPC_KH_FIND, "rms_norm_eps|norm_eps"},
	{"attention.layer_norm_epsilon", F32, TPC_KH_FIND, "layer_norm_eps|layer_norm_epsilon|norm_epsilon"},
	{"expert_count", U32, TPC_KH_FIND, "num_local_experts|n_routed_experts"},
	{"expert_used_count", U32, TPC_KH_FIND, "num_experts_per_tok|num_experts_per_token|top_k_experts"},
	{"expert_group_count", U32, TPC_KH_FIND, "n_group"},
	{"expert_group_used_count", U32, TPC_KH_FIND, "topk_group"},
	{"expert_gating_func", U32, TPC_KH_GATING_FUNC, "score_function|scoring_func|score_func|moe_router_activation|moe_router_activation_func|expert_selection_fn|router_score_func"},
	{"attention.key_length", U32, TPC_KH_HEAD_DIM, "head_dim"},
	R_FILE_TYPE,
	{"rope.freq_base", F32, TPC_KH_ROPE_ALPHA, NULL},
	R_END,
};
/* HunYuanModel.set_gguf_parameters' rope_type "dynamic": freq_base theta x
 * alpha ^ (d / (d - 2)), d config.json's head_dim; alpha not asserted (its
 * default 50 is refused: transformers' HunYuanDenseV1RotaryEmbedding rotates
 * a dynamic rope without alpha by rope_theta), rope_theta 10000 and
 * max_position_embeddings 32k or 256k asserted, a 256k context written.
 * Its "xdrope" is HunyuanVL's (HunyuanVLTextModel), not this architecture's. */
static const tpc_gguf_rope_alpha hunyuandense_rope = {.rope_type = "dynamic", .alpha = 50, .any_alpha = true,
						      .theta = 10000, .dim_member = "head_dim",
						      .ctx_from = {32768, 262144}, .ctx = 262144};
/* Ernie4_5Model (conversion/ernie.py): TextModel's keys */
static const tpc_gguf_kv_rule ernie4_5_kv[] = {
	TEXT_RULES,
	R_END,
};
/* Ernie4_5MoeModel: Ernie4_5Model's (TextModel's) keys, then the experts,
 * the MoE layers' step and the leading dense ones, the experts' width, the
 * shared ones and their width as it computes it (intermediate_size //
 * num_key_value_heads, when there are shared experts) */
static const tpc_gguf_kv_rule ernie4_5moe_kv[] = {
	TEXT_RULES,
	{"expert_count", U32, TPC_KH_REQ, "moe_num_experts"},
	{"expert_used_count", U32, TPC_KH_REQ, "moe_k"},
	{"interleave_moe_layer_step", U32, TPC_KH_REQ, "moe_layer_interval"},
	{"leading_dense_block_count", U32, TPC_KH_REQ, "moe_layer_start_index"},
	{"expert_feed_forward_length", U32, TPC_KH_FIND, "moe_intermediate_size"},
	{"expert_shared_count", U32, TPC_KH_FIND, "moe_num_shared_experts"},
	{"expert_shared_feed_forward_length", U32, TPC_KH_DIV_IF, "intermediate_size/num_key_value_heads?moe_num_shared_experts"},
	R_END,
};
/* Exaone4Model (conversion/exaone.py): TextModel's keys, vocab_size, then
 * with a sliding_window (not null) the window and a bool per layer
 * (layer_types, else sliding_window_pattern's period, Exaone4Config's 4) */
static const tpc_gguf_kv_rule exaone4_kv[] = {
	TEXT_RULES,
	{"vocab_size", U32, TPC_KH_REQ, "vocab_size"},
	{"attention.sliding_window", U32, TPC_KH_FIND, "sliding_window"},
	{"attention.sliding_window_pattern", TPC_GV_BOOL, TPC_KH_SWA_PATTERN, "sliding_window_pattern|4"},
	R_END,
};
/* Phi2Model.set_gguf_parameters (conversion/phi.py): its own keys, not
 * TextModel's (no rope theta); feed_forward_length 4 x hidden and
 * head_count_kv the heads whatever config.json says; the rotary dimension
 * from partial_rotary_factor (PhiConfig's 0.5 when config.json has none);
 * then tokenizer.ggml.add_bos_token false */
static const tpc_gguf_kv_rule phi2_kv[] = {
	{"context_length", U32, TPC_KH_REQ, "n_positions|max_position_embeddings"},
	{"embedding_length", U32, TPC_KH_REQ, "hidden_size|n_embd"},
	{"feed_forward_length", U32, TPC_KH_TIMES4, "hidden_size|n_embd"},
	R_BLOCK,
	{"attention.head_count", U32, TPC_KH_REQ, "num_attention_heads|n_head"},
	{"attention.head_count_kv", U32, TPC_KH_REQ, "num_attention_heads|n_head"},
	{"attention.layer_norm_epsilon", F32, TPC_KH_REQ, "layer_norm_epsilon|layer_norm_eps"},
	{"rope.dimension_count", U32, TPC_KH_ROPE_PCT_EMB, "0.5"},
	R_FILE_TYPE,
	{"tokenizer.ggml.add_bos_token", BOOL, TPC_KH_CONST, "0"},
	R_END,
};
/* Cohere2Model (conversion/command_r.py): TextModel's keys, then
 * logit_scale, the window, vocab_size, the rotary dimension from rotary_pct
 * (required, as the reference's hparams["rotary_pct"]: Cohere2Config has
 * none, Command R7B's config.json has it) and rope.scaling.type "none".
 * The reference reads logit_scale, sliding_window and vocab_size through
 * AutoConfig (Cohere2Config's defaults when config.json lacks them): refused
 * here instead. It writes no sliding-window pattern: llama.cpp takes three
 * sliding layers in four, so another layer_types is refused */
static const tpc_gguf_kv_rule cohere2_kv[] = {
	TEXT_RULES,
	{"logit_scale", F32, TPC_KH_REQ, "logit_scale"},
	{"attention.sliding_window", U32, TPC_KH_REQ, "sliding_window"},
	{"attention.sliding_window_pattern", 0, TPC_KH_SWA_EVERY, "sliding_window_pattern|4"},
	{"vocab_size", U32, TPC_KH_REQ, "vocab_size"},
	{"rope.dimension_count", U32, TPC_KH_ROPE_PCT_HD, NULL},
	{"rope.scaling.type", TPC_GV_STRING, TPC_KH_CONST, "none"},
	R_END,
};
/* DeepseekV2Model (conversion/deepseek.py) for DeepseekV3ForCausalLM:
 * TextModel's keys with num_key_value_heads 1 (MLA read as MQA) and
 * key_length / value_length as the MLA's latent widths (kv_lora_rank +
 * qk_rope_head_dim, kv_lora_rank: the reference writes head_dim there,
 * then overwrites it in its place), then its own. The reference reads
 * hparams through AutoConfig, so a member config.json lacks has
 * DeepseekV3Config's default there: refused here instead (rms_norm_eps,
 * first_k_dense_replace, kv_lora_rank, n_shared_experts,
 * routed_scaling_factor, norm_topk_prob) */
static const tpc_gguf_kv_rule deepseek2_kv[] = {
	TEXT_RULES_TOP,
	{"attention.head_count_kv", U32, TPC_KH_CONST, "1"},
	TEXT_RULES_MID,
	{"attention.key_length", U32, TPC_KH_SUM, "kv_lora_rank+qk_rope_head_dim"},
	{"attention.value_length", U32, TPC_KH_REQ, "kv_lora_rank"},
	R_FILE_TYPE,
	{"attention.layer_norm_rms_epsilon", F32, TPC_KH_REQ, "rms_norm_eps"},
	{"leading_dense_block_count", U32, TPC_KH_REQ, "first_k_dense_replace"},
	{"vocab_size", U32, TPC_KH_REQ, "vocab_size"},
	{"attention.q_lora_rank", U32, TPC_KH_FIND, "q_lora_rank"},
	{"attention.kv_lora_rank", U32, TPC_KH_REQ, "kv_lora_rank"},
	{"attention.key_length_mla", U32, TPC_KH_SUM, "qk_nope_head_dim+qk_rope_head_dim"},
	{"attention.value_length_mla", U32, TPC_KH_REQ, "v_head_dim"},
	{"expert_feed_forward_length", U32, TPC_KH_REQ, "moe_intermediate_size|intermediate_size"},
	{"expert_count", U32, TPC_KH_REQ, "n_routed_experts"},
	{"expert_shared_count", U32, TPC_KH_REQ, "n_shared_experts"},
	{"expert_weights_scale", F32, TPC_KH_REQ, "routed_scaling_factor"},
	{"expert_weights_norm", BOOL, TPC_KH_TRUE_ONLY, "norm_topk_prob"},
	{"rope.dimension_count", U32, TPC_KH_REQ, "qk_rope_head_dim"},
	{"rope.scaling.yarn_log_multiplier", F32, TPC_KH_ROPE_TIMES, "mscale_all_dim*0.1"},
	R_END,
};
/* GemmaModel.set_gguf_parameters, in its order */
#define GEMMA_RULES \
	{"context_length", U32, TPC_KH_REQ, "max_position_embeddings"}, \
	{"embedding_length", U32, TPC_KH_REQ, "hidden_size"}, \
	R_BLOCK, \
	R_FF, \
	{"attention.head_count", U32, TPC_KH_REQ, "num_attention_heads"}, \
	{"attention.head_count_kv", U32, TPC_KH_OR_HEADS, "num_key_value_heads"}, \
	{"attention.layer_norm_rms_epsilon", F32, TPC_KH_REQ, "rms_norm_eps"}, \
	{"attention.key_length", U32, TPC_KH_REQ, "head_dim"}, \
	{"attention.value_length", U32, TPC_KH_REQ, "head_dim"}, \
	R_FILE_TYPE

static const tpc_gguf_kv_rule gemma_kv[] = {
	GEMMA_RULES,
	R_END,
};
/* Gemma2Model.set_gguf_parameters: GemmaModel's, then the softcaps and the
 * window, each required */
static const tpc_gguf_kv_rule gemma2_kv[] = {
	GEMMA_RULES,
	{"attn_logit_softcapping", F32, TPC_KH_REQ, "attn_logit_softcapping"},
	{"final_logit_softcapping", F32, TPC_KH_REQ, "final_logit_softcapping"},
	{"attention.sliding_window", U32, TPC_KH_REQ, "sliding_window"},
	R_END,
};
/* Gemma3Model.set_gguf_parameters (conversion/gemma.py): TextModel's keys
 * (per-layer-type rope parameters: full_attention's scaling and theta,
 * sliding_attention's theta as freq_base_swa), its overwrites of context,
 * heads, epsilon and kv heads landing in their places; value_length with
 * key_length; then the final softcap when set, the window (written whenever
 * sliding_window_pattern is not 1: transformers 5.12's config has none, so
 * always); attn_logit_softcapping, which it asserts absent, refused. No
 * pattern key: llama.cpp's gemma3 fixes five sliding layers in six
 * (set_swa_pattern(6)), so config.json's layer_types must say so */
static const tpc_gguf_kv_rule gemma3_kv[] = {
	TEXT_RULES_TOP,
	{"attention.head_count_kv", U32, TPC_KH_FIND, "num_key_value_heads|n_kv_heads"},
	TEXT_RULES_MID_OF({"rope.freq_base_swa", F32, TPC_KH_ROPE_THETA_SWA, R_LOCAL_THETA}),
	{"attention.key_length", U32, TPC_KH_HEAD_DIM, "head_dim"},
	R_FILE_TYPE,
	{"attention.logit_softcapping", 0, TPC_KH_REFUSE, "attn_logit_softcapping"},
	{"final_logit_softcapping", F32, TPC_KH_NONZERO, "final_logit_softcapping"},
	{"attention.sliding_window", U32, TPC_KH_REQ, "sliding_window"},
	{"attention.sliding_window_pattern", 0, TPC_KH_SWA_EVERY, "sliding_window_pattern|6"},
	R_END,
};
static const tpc_gguf_kv_rule phi3_kv[] = {
	{"context_length", U32, TPC_KH_REQ, "n_positions|max_position_embeddings"},
	{"rope.scaling.original_context_length", U32, TPC_KH_ROPE_ORIG, NULL},
	{"embedding_length", U32, TPC_KH_REQ, "hidden_size|n_embd"},
	R_FF,
	R_BLOCK,
	{"attention.head_count", U32, TPC_KH_REQ, "num_attention_heads|n_head"},
	{"attention.head_count_kv", U32, TPC_KH_REQ, "num_key_value_heads|n_head_kv"},
	{"attention.layer_norm_rms_epsilon", F32, TPC_KH_REQ, "rms_norm_eps"},
	{"rope.dimension_count", U32, TPC_KH_ROPE_PCT_EMB, NULL},
	{"rope.freq_base", F32, TPC_KH_ROPE_THETA, "!"}, /* "!": required */
	R_FILE_TYPE,
	{"attention.sliding_window", U32, TPC_KH_OR_ZERO, "sliding_window"},
	R_END,
};
/* PhiMoeModel (a Phi3MiniModel, conversion/phi.py): Phi3MiniModel's keys,
 * then the experts used and their count */
static const tpc_gguf_kv_rule phimoe_kv[] = {
	{"context_length", U32, TPC_KH_REQ, "n_positions|max_position_embeddings"},
	{"rope.scaling.original_context_length", U32, TPC_KH_ROPE_ORIG, NULL},
	{"embedding_length", U32, TPC_KH_REQ, "hidden_size|n_embd"},
	R_FF,
	R_BLOCK,
	{"attention.head_count", U32, TPC_KH_REQ, "num_attention_heads|n_head"},
	{"attention.head_count_kv", U32, TPC_KH_REQ, "num_key_value_heads|n_head_kv"},
	{"attention.layer_norm_rms_epsilon", F32, TPC_KH_REQ, "rms_norm_eps"},
	{"rope.dimension_count", U32, TPC_KH_ROPE_PCT_EMB, NULL},
	{"rope.freq_base", F32, TPC_KH_ROPE_THETA, "!"},
	R_FILE_TYPE,
	{"attention.sliding_window", U32, TPC_KH_OR_ZERO, "sliding_window"},
	{"expert_used_count", U32, TPC_KH_REQ, "num_experts_per_tok|num_experts_per_token"},
	{"expert_count", U32, TPC_KH_REQ, "num_local_experts|num_experts"},
	R_END,
};
static const tpc_gguf_kv_rule gpt2_kv[] = {
	R_BLOCK,
	{"context_length", U32, TPC_KH_REQ, "n_ctx"},
	{"embedding_length", U32, TPC_KH_REQ, "n_embd"},
	{"feed_forward_length", U32, TPC_KH_TIMES4, "n_embd"},
	{"attention.head_count", U32, TPC_KH_REQ, "n_head"},
	{"attention.layer_norm_epsilon", F32, TPC_KH_REQ, "layer_norm_epsilon"},
	R_FILE_TYPE,
	R_END,
};
/* GPTNeoXModel.set_gguf_parameters: no general.file_type */
static const tpc_gguf_kv_rule gptneox_kv[] = {
	{"context_length", U32, TPC_KH_REQ, "max_position_embeddings"},
	{"embedding_length", U32, TPC_KH_REQ, "hidden_size"},
	R_BLOCK,
	R_FF,
	{"rope.dimension_count", U32, TPC_KH_ROPE_PCT_HD, NULL},
	{"attention.head_count", U32, TPC_KH_REQ, "num_attention_heads"},
	{"use_parallel_residual", BOOL, TPC_KH_OR_TRUE, "use_parallel_residual"},
	{"attention.layer_norm_epsilon", F32, TPC_KH_REQ, "layer_norm_eps"},
	R_END,
};

/* ---- config.json members from the keys (a GGUF read back) ---- */

/* what TextModel.set_gguf_parameters wrote, read back */
#define TEXT_CFG_ROWS \
	{"hidden_size", "embedding_length", TPC_CK_INT}, \
	{"intermediate_size", "feed_forward_length", TPC_CK_INT}, \
	{"num_attention_heads", "attention.head_count", TPC_CK_INT}, \
	{"num_key_value_heads", "attention.head_count_kv", TPC_CK_INT}, \
	{"num_hidden_layers", "block_count", TPC_CK_INT}, \
	{"max_position_embeddings", "context_length", TPC_CK_INT}, \
	{"rms_norm_eps", "attention.layer_norm_rms_epsilon", TPC_CK_FLOAT}, \
	{"rope_theta", "rope.freq_base", TPC_CK_FLOAT}, \
	{"head_dim", "attention.key_length", TPC_CK_INT}, \
	{"num_experts_per_tok", "expert_used_count", TPC_CK_INT}, \
	{"moe_intermediate_size", "expert_feed_forward_length", TPC_CK_INT}, \
	{"shared_expert_intermediate_size", "expert_shared_feed_forward_length", TPC_CK_INT}, \
	{"sliding_window", "attention.sliding_window", TPC_CK_INT_NZ}, \
	{"original_max_position_embeddings", "rope.scaling.original_context_length", TPC_CK_INT},
static const tpc_gguf_cfg_rule text_cfg[] = {
	TEXT_CFG_ROWS
	{NULL, NULL, TPC_CK_INT},
};
/* Gemma 2: the softcaps; query_pre_attn_scalar as head_dim, the scale
 * llama.cpp computes for Gemma 2 but the 27B (n_embd / n_head there) */
static const tpc_gguf_cfg_rule gemma2_cfg[] = {
	TEXT_CFG_ROWS
	{"attn_logit_softcapping", "attn_logit_softcapping", TPC_CK_FLOAT},
	{"final_logit_softcapping", "final_logit_softcapping", TPC_CK_FLOAT},
	{"query_pre_attn_scalar", "attention.key_length", TPC_CK_INT},
	{NULL, NULL, TPC_CK_INT},
};
/* Granite's multipliers */
#define GRANITE_CFG_ROWS \
	TEXT_CFG_ROWS \
	{"attention_multiplier", "attention.scale", TPC_CK_FLOAT}, \
	{"embedding_multiplier", "embedding_scale", TPC_CK_FLOAT}, \
	{"residual_multiplier", "residual_scale", TPC_CK_FLOAT}, \
	{"logits_scaling", "logit_scale", TPC_CK_FLOAT},
static const tpc_gguf_cfg_rule granite_cfg[] = {
	GRANITE_CFG_ROWS
	{NULL, NULL, TPC_CK_INT},
};
/* Granite-MoE with a shared expert: its width too */
static const tpc_gguf_cfg_rule granitemoe_shared_cfg[] = {
	GRANITE_CFG_ROWS
	{"shared_intermediate_size", "expert_shared_feed_forward_length", TPC_CK_INT},
	{NULL, NULL, TPC_CK_INT},
};
/* Granite 4: the kv heads and layer_types from the per-layer head_count_kv
 * (before the text rows read it as one count), Granite-MoE-shared's rows,
 * the mixer's sizes */
#define GRANITEHYBRID_CFG_ROWS \
	{"num_key_value_heads", "attention.head_count_kv", TPC_CK_ARR_NZ}, \
	{"layer_types", "attention.head_count_kv=attention/mamba", TPC_CK_LAYER_KINDS}, \
	GRANITE_CFG_ROWS \
	{"shared_intermediate_size", "expert_shared_feed_forward_length", TPC_CK_INT}, \
	{"mamba_d_conv", "ssm.conv_kernel", TPC_CK_INT}, \
	{"mamba_d_state", "ssm.state_size", TPC_CK_INT}, \
	{"mamba_n_groups", "ssm.group_count", TPC_CK_INT}, \
	{"mamba_n_heads", "ssm.time_step_rank", TPC_CK_INT}, \
	{"mamba_expand", "ssm.inner_size/embedding_length", TPC_CK_INT_QUOT}, \
	{"mamba_d_head", "ssm.inner_size/ssm.time_step_rank", TPC_CK_INT_QUOT},
static const tpc_gguf_cfg_rule granitehybrid_cfg[] = {
	GRANITEHYBRID_CFG_ROWS
	{NULL, NULL, TPC_CK_INT},
};
/* without experts: num_local_experts 0 said (GraniteMoeHybridConfig's default is 8) */
static const tpc_gguf_cfg_rule granitehybrid_dense_cfg[] = {
	{"num_local_experts", "0", TPC_CK_CONST},
	GRANITEHYBRID_CFG_ROWS
	{NULL, NULL, TPC_CK_INT},
};
/* its conv1d and in_proj biases: Mamba-2 layer 0's */
static const tpc_gguf_bias_flag granitehybrid_bias[] = {
	{"mamba_conv_bias", TPC_ROLE_SSM_CONV1D},
	{"mamba_proj_bias", TPC_ROLE_SSM_IN},
	{NULL, TPC_ROLE_NONE},
};
/* Phi's LayerNorm epsilon */
static const tpc_gguf_cfg_rule phi2_cfg[] = {
	TEXT_CFG_ROWS
	{"layer_norm_eps", "attention.layer_norm_epsilon", TPC_CK_FLOAT},
	{NULL, NULL, TPC_CK_INT},
};
/* Cohere 2's LayerNorm epsilon and logit_scale (the window is a text row;
 * no layer_types: Cohere2Config's default, three sliding layers in four) */
static const tpc_gguf_cfg_rule cohere2_cfg[] = {
	TEXT_CFG_ROWS
	{"layer_norm_eps", "attention.layer_norm_epsilon", TPC_CK_FLOAT},
	{"logit_scale", "logit_scale", TPC_CK_FLOAT},
	{NULL, NULL, TPC_CK_INT},
};
/* DeepSeek-V3: num_key_value_heads the heads (the GGUF's head_count_kv 1 is
 * llama.cpp's MQA reading of MLA), head_dim qk_rope_head_dim (as
 * DeepseekV3Config sets it), the MLA widths, the router's facts; mscale and
 * mscale_all_dim both from yarn_log_multiplier (llama.cpp takes them equal,
 * as DeepSeek-V3's config.json has them) */
static const tpc_gguf_cfg_rule deepseek2_cfg[] = {
	{"num_key_value_heads", "attention.head_count", TPC_CK_INT},
	{"head_dim", "rope.dimension_count", TPC_CK_INT},
	TEXT_CFG_ROWS
	{"first_k_dense_replace", "leading_dense_block_count", TPC_CK_INT},
	{"q_lora_rank", "attention.q_lora_rank", TPC_CK_INT_OR_NULL},
	{"kv_lora_rank", "attention.kv_lora_rank", TPC_CK_INT},
	{"qk_rope_head_dim", "rope.dimension_count", TPC_CK_INT},
	{"qk_nope_head_dim", "attention.key_length_mla-rope.dimension_count", TPC_CK_INT_DIFF},
	{"v_head_dim", "attention.value_length_mla", TPC_CK_INT},
	{"n_shared_experts", "expert_shared_count", TPC_CK_INT},
	{"routed_scaling_factor", "expert_weights_scale", TPC_CK_FLOAT},
	{"norm_topk_prob", "expert_weights_norm", TPC_CK_BOOL_OR_FALSE},
	{"n_group", "expert_group_count", TPC_CK_INT},
	{"topk_group", "expert_group_used_count", TPC_CK_INT},
	{"scoring_func", "expert_gating_func", TPC_CK_GATING_FUNC},
	{"mscale_all_dim", "rope.scaling.yarn_log_multiplier/0.1", TPC_CK_ROPE_DIV},
	{"mscale", "rope.scaling.yarn_log_multiplier/0.1", TPC_CK_ROPE_DIV},
	{NULL, NULL, TPC_CK_INT},
};
/* Qwen3-MoE: llama.cpp's qwen3moe graph renormalises the top-k routing
 * weights always (build_moe_ffn's norm_w true) and the reference writes no
 * key for it (Qwen2MoeModel.set_gguf_parameters): norm_topk_prob true, not
 * Qwen3MoeConfig's default false */
static const tpc_gguf_cfg_rule qwen3moe_cfg[] = {
	TEXT_CFG_ROWS
	{"norm_topk_prob", "true", TPC_CK_CONST},
	{NULL, NULL, TPC_CK_INT},
};
/* Qwen3-Next: the layers less the multi-token-prediction ones, the gated
 * DeltaNet's sizes back from the ssm.* keys, layer_types from the recurrent
 * layers (the rotary fraction is rope_pct's) */
static const tpc_gguf_cfg_rule qwen3next_cfg[] = {
	{"num_hidden_layers", "block_count", TPC_CK_LAYERS},
	TEXT_CFG_ROWS
	{"linear_conv_kernel_dim", "ssm.conv_kernel", TPC_CK_INT},
	{"linear_key_head_dim", "ssm.state_size", TPC_CK_INT},
	{"linear_num_key_heads", "ssm.group_count", TPC_CK_INT},
	{"linear_num_value_heads", "ssm.time_step_rank", TPC_CK_INT},
	{"linear_value_head_dim", "ssm.inner_size/ssm.time_step_rank", TPC_CK_INT_QUOT},
	{"layer_types", "attention.recurrent_layers", TPC_CK_LAYER_TYPES_LINEAR},
	{NULL, NULL, TPC_CK_INT},
};
/* Qwen3.5: Qwen3-Next's, the mrope sections config.json gave, and the
 * multi-token-prediction layers as its checkpoints' text_config counts them */
static const tpc_gguf_cfg_rule qwen35_cfg[] = {
	{"num_hidden_layers", "block_count", TPC_CK_LAYERS},
	TEXT_CFG_ROWS
	{"linear_conv_kernel_dim", "ssm.conv_kernel", TPC_CK_INT},
	{"linear_key_head_dim", "ssm.state_size", TPC_CK_INT},
	{"linear_num_key_heads", "ssm.group_count", TPC_CK_INT},
	{"linear_num_value_heads", "ssm.time_step_rank", TPC_CK_INT},
	{"linear_value_head_dim", "ssm.inner_size/ssm.time_step_rank", TPC_CK_INT_QUOT},
	{"layer_types", "attention.recurrent_layers", TPC_CK_LAYER_TYPES_LINEAR},
	{"mrope_section", "rope.dimension_sections", TPC_CK_ROPE_SECTIONS},
	{"mtp_num_hidden_layers", "nextn_predict_layers", TPC_CK_INT},
	{NULL, NULL, TPC_CK_INT},
};
/* StarCoder2's LayerNorm epsilon is norm_epsilon */
/* OLMo 3: layer_types (the window is a text row) */
static const tpc_gguf_cfg_rule olmo3_cfg[] = {
	TEXT_CFG_ROWS
	{"layer_types", "attention.sliding_window_pattern", TPC_CK_LAYER_TYPES},
	{NULL, NULL, TPC_CK_INT},
};
/* EXAONE 4: layer_types, and a null window when the GGUF has none
 * (Exaone4Config's default is 4096) */
static const tpc_gguf_cfg_rule exaone4_cfg[] = {
	TEXT_CFG_ROWS
	{"sliding_window", "attention.sliding_window", TPC_CK_INT_OR_NULL},
	{"layer_types", "attention.sliding_window_pattern", TPC_CK_LAYER_TYPES},
	{NULL, NULL, TPC_CK_INT},
};
static const tpc_gguf_cfg_rule starcoder2_cfg[] = {
	TEXT_CFG_ROWS
	{"norm_epsilon", "attention.layer_norm_epsilon", TPC_CK_FLOAT},
	{NULL, NULL, TPC_CK_INT},
};
static const tpc_gguf_cfg_rule gpt2_cfg[] = {
	{"n_embd", "embedding_length", TPC_CK_INT},
	{"n_inner", "feed_forward_length", TPC_CK_INT},
	{"n_head", "attention.head_count", TPC_CK_INT},
	{"n_layer", "block_count", TPC_CK_INT},
	{"n_ctx", "context_length", TPC_CK_INT},
	{"n_positions", "context_length", TPC_CK_INT},
	{"layer_norm_epsilon", "attention.layer_norm_epsilon", TPC_CK_FLOAT},
	{NULL, NULL, TPC_CK_INT},
};
static const tpc_gguf_cfg_rule neox_cfg[] = {
	{"hidden_size", "embedding_length", TPC_CK_INT},
	{"intermediate_size", "feed_forward_length", TPC_CK_INT},
	{"num_attention_heads", "attention.head_count", TPC_CK_INT},
	{"num_hidden_layers", "block_count", TPC_CK_INT},
	{"max_position_embeddings", "context_length", TPC_CK_INT},
	{"layer_norm_eps", "attention.layer_norm_epsilon", TPC_CK_FLOAT},
	{"use_parallel_residual", "use_parallel_residual", TPC_CK_BOOL},
	{NULL, NULL, TPC_CK_INT},
};

/* ---- the records' GGUF parts ---- */

#define A(...) ((const char *const[]){__VA_ARGS__, NULL})

/* LlamaModel (llama, mistral, mixtral): Q/K permuted, a SentencePiece or
 * BPE vocabulary; head_dim: LlamaConfig and MistralConfig fill in
 * hidden_size / num_attention_heads (transformers 5.12) */
#define LLAMA_PART(hf, hd) \
	.arch = "llama", .hf_arch = A(hf), .kv = llama_kv, .permute_qk = true, .rope_freqs = true, .head_dim = hd, \
	.vocab = TPC_GGUF_VOCAB_LLAMA, .tok_class_spm = "LlamaTokenizer", .add_space_prefix = true, \
	.hf_cfg = text_cfg, .rope_pct = "partial_rotary_factor"

const tpc_gguf_arch tpc__gguf_llama = {LLAMA_PART("LlamaForCausalLM", -1)};
const tpc_gguf_arch tpc__gguf_mistral = {LLAMA_PART("MistralForCausalLM", -1)};
/* LlamaModel.modify_tensors: w1, w2, w3; MixtralConfig has no head_dim default */
const tpc_gguf_arch tpc__gguf_mixtral = {
	LLAMA_PART("MixtralForCausalLM", 0),
	.experts = {TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_DOWN_EXP, TPC_ROLE_FFN_UP_EXP},
	.experts_member = "num_local_experts"};
const tpc_gguf_arch tpc__gguf_qwen2 = {
	.arch = "qwen2", .hf_arch = A("Qwen2ForCausalLM"), .kv = qwen2_kv, .vocab = TPC_GGUF_VOCAB_SPM_OR_BPE,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "Qwen2Tokenizer", .hf_cfg = text_cfg,
	.rope_pct = "partial_rotary_factor"};
/* Qwen3Config's head_dim default: 128 */
const tpc_gguf_arch tpc__gguf_qwen3 = {
	.arch = "qwen3", .hf_arch = A("Qwen3ForCausalLM"), .kv = qwen2_kv, .head_dim = 128,
	.vocab = TPC_GGUF_VOCAB_SPM_OR_BPE, .tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "Qwen2Tokenizer",
	.hf_cfg = text_cfg, .rope_pct = "partial_rotary_factor"};
/* Qwen2MoeModel.modify_tensors: down_proj, gate_proj, up_proj */
const tpc_gguf_arch tpc__gguf_qwen2moe = {
	.arch = "qwen2moe", .hf_arch = A("Qwen2MoeForCausalLM"), .kv = qwen2moe_kv,
	.experts = {TPC_ROLE_FFN_DOWN_EXP, TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP}, .vocab = TPC_GGUF_VOCAB_BPE,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "Qwen2Tokenizer", .hf_cfg = text_cfg,
	.rope_pct = "partial_rotary_factor", .experts_member = "num_experts"};
/* Qwen3MoeModel (a Qwen2MoeModel): the same keys and expert order; read
 * back with the renormalised routing llama.cpp computes */
const tpc_gguf_arch tpc__gguf_qwen3moe = {
	.arch = "qwen3moe", .hf_arch = A("Qwen3MoeForCausalLM"), .kv = qwen2moe_kv,
	.experts = {TPC_ROLE_FFN_DOWN_EXP, TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP}, .vocab = TPC_GGUF_VOCAB_BPE,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "Qwen2Tokenizer", .hf_cfg = qwen3moe_cfg,
	.rope_pct = "partial_rotary_factor", .experts_member = "num_experts"};
/* Qwen3NextModel.modify_tensors: A_log as -exp(A_log), dt_bias as
 * ssm_dt.bias (the table's name), conv1d squeezed, every norm + 1 but
 * linear_attn.norm, in_proj_qkvz's [q k v z] per key head gathered into
 * attn_qkv [all q; all k; all v] and attn_gate [all z]; Qwen2MoeModel's
 * expert order; its vocabulary */
const tpc_gguf_arch tpc__gguf_qwen3next = {
	.arch = "qwen3next", .hf_arch = A("Qwen3NextForCausalLM"), .kv = qwen3next_kv, .norm_plus_1 = true,
	.norm_plain = TPC_ROLE_SSM_NORM, .neg_exp = TPC_ROLE_SSM_A, .squeeze = TPC_ROLE_SSM_CONV1D,
	.experts = {TPC_ROLE_FFN_DOWN_EXP, TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP},
	.group_split = {.role = TPC_ROLE_SSM_IN,
			.name = {"blk.{L}.attn_qkv.weight", "blk.{L}.attn_gate.weight"},
			.groups = "linear_num_key_heads",
			.rows = {"linear_num_key_heads*linear_key_head_dim", "linear_num_key_heads*linear_key_head_dim",
				 "linear_num_value_heads*linear_value_head_dim", "linear_num_value_heads*linear_value_head_dim"},
			.first = 3,
			.key_groups = "ssm.group_count",
			.key_rows = {"ssm.group_count*ssm.state_size", "ssm.group_count*ssm.state_size", "ssm.inner_size",
				     "ssm.inner_size"}},
	.vocab = TPC_GGUF_VOCAB_BPE, .tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "Qwen2Tokenizer",
	.hf_cfg = qwen3next_cfg, .rope_pct = "partial_rotary_factor", .experts_member = "num_experts"};
/* Qwen3_5TextModel / Qwen3_5MoeTextModel.modify_tensors: the DeltaNet's
 * value heads, grouped by key head, tiled (_LinearAttentionVReorderBase:
 * in_proj_qkv's v rows, in_proj_z's rows, a row each of in_proj_b,
 * in_proj_a, A_log and dt_bias, conv1d's v channels, out_proj's columns),
 * then Qwen3NextModel's transforms (in_proj_qkv and in_proj_z are attn_qkv
 * and attn_gate as they are: no group split); its expert order and
 * vocabulary; model_type the text config's */
#define QWEN35_TILE \
	{.groups = "linear_num_key_heads", .heads = "linear_num_value_heads", .key_groups = "ssm.group_count", \
	 .key_heads = "ssm.time_step_rank", \
	 .rows = {{TPC_ROLE_SSM_QKV, 0, "linear_num_value_heads*linear_value_head_dim", "ssm.inner_size"}, \
		  {TPC_ROLE_SSM_Z, 0, "linear_num_value_heads*linear_value_head_dim", "ssm.inner_size"}, \
		  {TPC_ROLE_SSM_BETA, 0, "linear_num_value_heads", "ssm.time_step_rank"}, \
		  {TPC_ROLE_SSM_ALPHA, 0, "linear_num_value_heads", "ssm.time_step_rank"}, \
		  {TPC_ROLE_SSM_A, 0, "linear_num_value_heads", "ssm.time_step_rank"}, \
		  {TPC_ROLE_SSM_DT, 0, "linear_num_value_heads", "ssm.time_step_rank"}, \
		  {TPC_ROLE_SSM_CONV1D, 0, "linear_num_value_heads*linear_value_head_dim", "ssm.inner_size"}, \
		  {TPC_ROLE_SSM_OUT, 1, "linear_num_value_heads*linear_value_head_dim", "ssm.inner_size"}}}
#define QWEN35_PART \
	.norm_plus_1 = true, .norm_plain = TPC_ROLE_SSM_NORM, .neg_exp = TPC_ROLE_SSM_A, .squeeze = TPC_ROLE_SSM_CONV1D, \
	.head_tile = QWEN35_TILE, .vocab = TPC_GGUF_VOCAB_BPE, .tok_class_spm = "LlamaTokenizer", \
	.tok_class_bpe = "Qwen2Tokenizer", .hf_cfg = qwen35_cfg, .rope_pct = "partial_rotary_factor"
const tpc_gguf_arch tpc__gguf_qwen35 = {
	.arch = "qwen35", .hf_arch = A("Qwen3_5ForCausalLM"), .kv = qwen35_kv, .model_type = "qwen3_5_text", QWEN35_PART};
const tpc_gguf_arch tpc__gguf_qwen35moe = {
	.arch = "qwen35moe", .hf_arch = A("Qwen3_5MoeForCausalLM"), .kv = qwen35moe_kv, .model_type = "qwen3_5_moe_text",
	.experts = {TPC_ROLE_FFN_DOWN_EXP, TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP}, .experts_member = "num_experts",
	QWEN35_PART};
#undef QWEN35_PART
#undef QWEN35_TILE
/* OlmoeModel: Qwen2MoeModel's expert order; TextModel's _set_vocab_gpt2 */
const tpc_gguf_arch tpc__gguf_olmoe = {
	.arch = "olmoe", .hf_arch = A("OlmoeForCausalLM"), .kv = olmoe_kv,
	.experts = {TPC_ROLE_FFN_DOWN_EXP, TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP}, .vocab = TPC_GGUF_VOCAB_BPE,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer", .hf_cfg = text_cfg,
	.rope_pct = "partial_rotary_factor", .experts_member = "num_experts"};
/* GraniteModel (a LlamaModel): Q/K permuted, LlamaModel's vocabulary;
 * head_dim popped from the hparams (GraniteConfig has none) */
const tpc_gguf_arch tpc__gguf_granite = {
	.arch = "granite", .hf_arch = A("GraniteForCausalLM"), .kv = granite_kv, .permute_qk = true,
	.rope_freqs = true, .vocab = TPC_GGUF_VOCAB_LLAMA, .tok_class_spm = "LlamaTokenizer",
	.add_space_prefix = true, .hf_cfg = granite_cfg, .rope_pct = "partial_rotary_factor"};
/* GraniteMoeModel (a GraniteModel): its input_linear written as ffn_gate_exps
 * and ffn_up_exps (the record's "#K" rows), output_linear as ffn_down_exps;
 * GraniteMoeConfig has no head_dim either */
const tpc_gguf_arch tpc__gguf_granitemoe = {
	.arch = "granitemoe", .hf_arch = A("GraniteMoeForCausalLM"), .kv = granitemoe_kv, .permute_qk = true,
	.rope_freqs = true, .experts = {TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP, TPC_ROLE_FFN_DOWN_EXP},
	.vocab = TPC_GGUF_VOCAB_LLAMA, .tok_class_spm = "LlamaTokenizer", .add_space_prefix = true, .hf_cfg = granite_cfg,
	.rope_pct = "partial_rotary_factor", .experts_member = "num_local_experts"};
/* GraniteMoeModel for GraniteMoeSharedForCausalLM: general.architecture
 * granitemoe too, told apart by the shared expert's width; shared_mlp's
 * input_linear written as ffn_gate_shexp and ffn_up_shexp */
const tpc_gguf_arch tpc__gguf_granitemoe_shared = {
	.arch = "granitemoe", .hf_arch = A("GraniteMoeSharedForCausalLM"), .kv = granitemoe_kv, .permute_qk = true,
	.rope_freqs = true, .experts = {TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP, TPC_ROLE_FFN_DOWN_EXP},
	.vocab = TPC_GGUF_VOCAB_LLAMA, .tok_class_spm = "LlamaTokenizer", .add_space_prefix = true,
	.hf_cfg = granitemoe_shared_cfg, .rope_pct = "partial_rotary_factor", .experts_member = "num_local_experts",
	.when_key = "expert_shared_feed_forward_length"};
/* GraniteHybridModel: general.architecture granitehybrid; LlamaModel's Q/K
 * permutation on the attention layers, GraniteMoeModel's experts and shared
 * MLP (ffn_*_shexp), Mamba2Model's mixer tensors (mamba2); Mamba2Model's
 * set_vocab (SentencePiece when tokenizer.model is there, else a BPE) */
const tpc_gguf_arch tpc__gguf_granitehybrid = {
	.arch = "granitehybrid", .hf_arch = A("GraniteMoeHybridForCausalLM"), .kv = granitehybrid_kv, .permute_qk = true,
	.mamba2 = true, .ssm_groups = GRANITEHYBRID_GROUPS,
	.experts = {TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP, TPC_ROLE_FFN_DOWN_EXP},
	.vocab = TPC_GGUF_VOCAB_SPM_OR_BPE, .tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer",
	.hf_cfg = granitehybrid_cfg, .bias_flags = granitehybrid_bias, .rope_pct = "partial_rotary_factor",
	.experts_member = "num_local_experts"};
/* GraniteHybridModel for a Granite 4 without experts: the same keys
 * (expert_count 0), no stacks, the shared MLP as ffn_gate/ffn_up/ffn_down */
const tpc_gguf_arch tpc__gguf_granitehybrid_dense = {
	.arch = "granitehybrid", .hf_arch = A("GraniteMoeHybridForCausalLM"), .kv = granitehybrid_kv, .permute_qk = true,
	.mamba2 = true, .ssm_groups = GRANITEHYBRID_GROUPS,
	.vocab = TPC_GGUF_VOCAB_SPM_OR_BPE, .tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer",
	.hf_cfg = granitehybrid_dense_cfg, .bias_flags = granitehybrid_bias, .rope_pct = "partial_rotary_factor",
	.model_type = "granitemoehybrid"};
/* GptOssModel (conversion/gpt_oss.py, bf16/f32 weights or OpenAI's MXFP4
 * experts): TextModel's keys, then sliding_window and the experts' width;
 * _set_vocab_gpt2; its experts transposed and gate_up_proj's gate and up
 * de-interleaved (the record's hf_in_out, hf_interleaved); the sinks as
 * attn_sinks.weight; MXFP4 experts repacked, not dequantized (mxfp4_blocks) */
static const tpc_gguf_kv_rule gptoss_kv[] = {
	TEXT_RULES,
	{"attention.sliding_window", U32, TPC_KH_REQ, "sliding_window"},
	{"expert_feed_forward_length", U32, TPC_KH_REQ, "intermediate_size"},
	R_END,
};
const tpc_gguf_arch tpc__gguf_gptoss = {
	.arch = "gpt-oss", .hf_arch = A("GptOssForCausalLM"), .kv = gptoss_kv,
	.experts = {TPC_ROLE_FFN_DOWN_EXP, TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP}, .vocab = TPC_GGUF_VOCAB_BPE,
	.tok_class_bpe = "GPT2Tokenizer", .hf_cfg = text_cfg, .experts_member = "num_local_experts", .mxfp4_blocks = true};
/* Llama4Model (conversion/llama.py, a LlamaModel): its __init__ makes
 * intermediate_size_mlp the feed_forward_length (the key keeps TextModel's
 * place) and intermediate_size the experts' width; LlamaModel's keys, then
 * interleave_moe_layer_step and the experts' width. llama.cpp's llama4
 * reads every 4th layer as one without RoPE (n_no_rope_layer_step), the
 * others in chunks of 8192 tokens, and tunes the temperature with floor
 * 8192 and scale 0.1 (llama-model.cpp, no key says them): a config.json
 * that says otherwise is refused (no key is written) */
static const tpc_gguf_kv_rule llama4_kv[] = {
	TEXT_RULES,
	{"feed_forward_length", U32, TPC_KH_REQ, "intermediate_size_mlp"},
	{"vocab_size", U32, TPC_KH_REQ, "vocab_size"},
	{"rope.dimension_count", U32, TPC_KH_ROPE_DIM, NULL},
	{"interleave_moe_layer_step", U32, TPC_KH_REQ, "interleave_moe_layer_step"},
	{"expert_feed_forward_length", U32, TPC_KH_REQ, "intermediate_size"},
	{"no_rope_layer_step", 0, TPC_KH_ROPE_OFF_EVERY, "4"},
	{"attention.chunk_size", 0, TPC_KH_ASSUMED, "attention_chunk_size=8192"},
	{"attention.temperature_tuning", 0, TPC_KH_ASSUMED, "attn_temperature_tuning=true"},
	{"attention.temperature_floor", 0, TPC_KH_ASSUMED, "floor_scale=8192"},
	{"attention.temperature_scale", 0, TPC_KH_ASSUMED, "attn_scale=0.1"},
	R_END,
};
/* Read back: the dense width as intermediate_size_mlp, the experts' as
 * intermediate_size */
static const tpc_gguf_cfg_rule llama4_cfg[] = {
	{"hidden_size", "embedding_length", TPC_CK_INT},
	{"intermediate_size_mlp", "feed_forward_length", TPC_CK_INT},
	{"intermediate_size", "expert_feed_forward_length", TPC_CK_INT},
	{"num_attention_heads", "attention.head_count", TPC_CK_INT},
	{"num_key_value_heads", "attention.head_count_kv", TPC_CK_INT},
	{"num_hidden_layers", "block_count", TPC_CK_INT},
	{"max_position_embeddings", "context_length", TPC_CK_INT},
	{"rms_norm_eps", "attention.layer_norm_rms_epsilon", TPC_CK_FLOAT},
	{"rope_theta", "rope.freq_base", TPC_CK_FLOAT},
	{"head_dim", "attention.key_length", TPC_CK_INT},
	{"num_local_experts", "expert_count", TPC_CK_INT},
	{"num_experts_per_tok", "expert_used_count", TPC_CK_INT},
	{"interleave_moe_layer_step", "interleave_moe_layer_step", TPC_CK_INT},
	{NULL, NULL, TPC_CK_INT},
};
/* no Q/K permutation (undo_permute false: Llama 4's q/k rows are already
 * the interleaved pairs llama.cpp rotates); a llama3 rope's rope_freqs;
 * _set_vocab_gpt2; the experts as its checkpoint holds them: down_proj,
 * then gate_up_proj split gate, up (the record's rows: hf_in_out,
 * [gate | up]); read back as llama4_text, attention_bias said by layer
 * 0's q bias (Llama4TextConfig's default: false) */
static const tpc_gguf_bias_flag llama4_bias[] = {
	{"attention_bias", TPC_ROLE_ATTN_Q},
	{NULL, TPC_ROLE_NONE},
};
const tpc_gguf_arch tpc__gguf_llama4 = {
	.arch = "llama4", .hf_arch = A("Llama4ForCausalLM"), .kv = llama4_kv, .rope_freqs = true,
	.experts = {TPC_ROLE_FFN_DOWN_EXP, TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP}, .vocab = TPC_GGUF_VOCAB_BPE,
	.tok_class_bpe = "GPT2Tokenizer", .hf_cfg = llama4_cfg, .bias_flags = llama4_bias,
	.experts_member = "num_local_experts", .model_type = "llama4_text"};
/* SeedOssModel (conversion/olmo.py): TextModel's keys, no Q/K permutation,
 * _set_vocab_gpt2; SeedOssConfig's head_dim default: 128; read back, its
 * two bias members say which biases are there (its defaults: q/k/v yes,
 * o_proj no) */
static const tpc_gguf_bias_flag seedoss_bias[] = {
	{"attention_bias", TPC_ROLE_ATTN_Q},
	{"attention_out_bias", TPC_ROLE_ATTN_OUT},
	{NULL, TPC_ROLE_NONE},
};
const tpc_gguf_arch tpc__gguf_seedoss = {
	.arch = "seed_oss", .hf_arch = A("SeedOssForCausalLM"), .kv = seedoss_kv, .head_dim = 128,
	.vocab = TPC_GGUF_VOCAB_BPE, .tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer",
	.hf_cfg = text_cfg, .bias_flags = seedoss_bias, .rope_pct = "partial_rotary_factor"};
/* SmolLM3Model (a LlamaModel): Q/K permuted, LlamaModel's vocabulary;
 * SmolLM3Config has no head_dim */
const tpc_gguf_arch tpc__gguf_smollm3 = {
	.arch = "smollm3", .hf_arch = A("SmolLM3ForCausalLM"), .kv = smollm3_kv, .permute_qk = true,
	.rope_freqs = true, .vocab = TPC_GGUF_VOCAB_LLAMA, .tok_class_spm = "LlamaTokenizer",
	.add_space_prefix = true, .hf_cfg = text_cfg, .rope_pct = "partial_rotary_factor"};
/* StarCoder2Model: TextModel's _set_vocab_gpt2; no Q/K permutation */
const tpc_gguf_arch tpc__gguf_starcoder2 = {
	.arch = "starcoder2", .hf_arch = A("Starcoder2ForCausalLM"), .kv = starcoder2_kv, .vocab = TPC_GGUF_VOCAB_BPE,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer", .hf_cfg = starcoder2_cfg,
	.rope_pct = "partial_rotary_factor"};
/* Glm4Model: _set_vocab_gpt2's tokens, then eos, eot, unk and bos by the
 * added tokens' text (a type tokenizer_config.json set keeps its id); no
 * Q/K permutation (llama.cpp rotates GLM-4's interleaved pairs itself; the
 * M-RoPE permutation of an mrope_section is refused with the rope);
 * Glm4Config's head_dim default 128, attention_bias default true */
static const tpc_gguf_bias_flag glm4_bias[] = {
	{"attention_bias", TPC_ROLE_ATTN_Q},
	{NULL, TPC_ROLE_NONE},
};
const tpc_gguf_arch tpc__gguf_glm4 = {
	.arch = "glm4", .hf_arch = A("Glm4ForCausalLM"), .kv = glm4_kv, .head_dim = 128, .vocab = TPC_GGUF_VOCAB_BPE,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer",
	.special_text = {{"eos", "<|endoftext|>"}, {"eot", "<|user|>"}, {"unk", "<|endoftext|>"}, {"bos", "<|endoftext|>"}},
	.hf_cfg = text_cfg, .bias_flags = glm4_bias, .rope_pct = "partial_rotary_factor"};
/* Glm4MoeModel: _set_vocab_glm (its four special ids by text), no Q/K
 * permutation (NeoX order already), Qwen2MoeModel's expert order; read
 * back: the layers less the next-token-prediction ones, the routing keys,
 * use_qk_norm from layer 0's q norm, attention_bias from its q bias, the
 * rotary fraction always (Glm4MoeConfig's default is 0.5) */
static const tpc_gguf_cfg_rule glm4moe_cfg[] = {
	{"num_hidden_layers", "block_count", TPC_CK_LAYERS},
	TEXT_CFG_ROWS
	{"num_nextn_predict_layers", "nextn_predict_layers", TPC_CK_INT},
	{"n_shared_experts", "expert_shared_count", TPC_CK_INT},
	{"first_k_dense_replace", "leading_dense_block_count", TPC_CK_INT},
	{"n_group", "expert_group_count", TPC_CK_INT},
	{"topk_group", "expert_group_used_count", TPC_CK_INT},
	{"routed_scaling_factor", "expert_weights_scale", TPC_CK_FLOAT},
	{"norm_topk_prob", "expert_weights_norm", TPC_CK_BOOL},
	{NULL, NULL, TPC_CK_INT},
};
static const tpc_gguf_bias_flag glm4moe_qk_norm[] = {
	{"use_qk_norm", TPC_ROLE_ATTN_Q_NORM},
	{NULL, TPC_ROLE_NONE},
};
const tpc_gguf_arch tpc__gguf_glm4moe = {
	.arch = "glm4moe", .hf_arch = A("Glm4MoeForCausalLM"), .kv = glm4moe_kv,
	.experts = {TPC_ROLE_FFN_DOWN_EXP, TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP}, .vocab = TPC_GGUF_VOCAB_BPE,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer",
	.special_text = {{"bos", "[gMASK]"}, {"eot", "<|user|>"}, {"unk", "<|endoftext|>"}, {"eom", "<|observation|>"}},
	.hf_cfg = glm4moe_cfg, .bias_flags = glm4_bias, .weight_flags = glm4moe_qk_norm,
	.rope_pct = "partial_rotary_factor", .rope_pct_always = true, .experts_member = "n_routed_experts",
	.mtp_count = "num_nextn_predict_layers"};
/* Ernie4_5Model: _set_vocab_sentencepiece, then tokenizer_config.json's
 * add_prefix_space; no Q/K permutation (llama.cpp's ernie4_5 rotates the
 * interleaved pairs itself); Ernie4_5Config's head_dim default 128,
 * use_bias default false */
static const tpc_gguf_bias_flag ernie4_5_bias[] = {
	{"use_bias", TPC_ROLE_ATTN_Q},
	{NULL, TPC_ROLE_NONE},
};
const tpc_gguf_arch tpc__gguf_ernie4_5 = {
	.arch = "ernie4_5", .hf_arch = A("Ernie4_5ForCausalLM"), .kv = ernie4_5_kv, .head_dim = 128,
	.vocab = TPC_GGUF_VOCAB_SPM_CFG_SPACE, .tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer",
	.add_space_prefix = true, .hf_cfg = text_cfg, .bias_flags = ernie4_5_bias, .rope_pct = "partial_rotary_factor"};
/* Ernie4_5MoeModel: Ernie4_5Model's vocabulary, no Q/K permutation, the
 * experts stacked gate, up, down; read back, the MoE members from their
 * keys (moe_layer_end_index left to its default, the last layer); not
 * TextModel's num_experts_per_tok and shared_expert_intermediate_size,
 * which the reference would write back as other keys */
static const tpc_gguf_cfg_rule ernie4_5moe_cfg[] = {
	{"hidden_size", "embedding_length", TPC_CK_INT},
	{"intermediate_size", "feed_forward_length", TPC_CK_INT},
	{"num_attention_heads", "attention.head_count", TPC_CK_INT},
	{"num_key_value_heads", "attention.head_count_kv", TPC_CK_INT},
	{"num_hidden_layers", "block_count", TPC_CK_INT},
	{"max_position_embeddings", "context_length", TPC_CK_INT},
	{"rms_norm_eps", "attention.layer_norm_rms_epsilon", TPC_CK_FLOAT},
	{"rope_theta", "rope.freq_base", TPC_CK_FLOAT},
	{"head_dim", "attention.key_length", TPC_CK_INT},
	{"moe_intermediate_size", "expert_feed_forward_length", TPC_CK_INT},
	{"moe_num_experts", "expert_count", TPC_CK_INT},
	{"moe_k", "expert_used_count", TPC_CK_INT},
	{"moe_layer_interval", "interleave_moe_layer_step", TPC_CK_INT},
	{"moe_layer_start_index", "leading_dense_block_count", TPC_CK_INT},
	{"moe_num_shared_experts", "expert_shared_count", TPC_CK_INT},
	{NULL, NULL, TPC_CK_INT},
};
const tpc_gguf_arch tpc__gguf_ernie4_5moe = {
	.arch = "ernie4_5-moe", .hf_arch = A("Ernie4_5_MoeForCausalLM"), .kv = ernie4_5moe_kv, .head_dim = -1,
	.experts = {TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP, TPC_ROLE_FFN_DOWN_EXP},
	.vocab = TPC_GGUF_VOCAB_SPM_CFG_SPACE, .tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer",
	.add_space_prefix = true, .hf_cfg = ernie4_5moe_cfg, .bias_flags = ernie4_5_bias, .rope_pct = "partial_rotary_factor",
	.experts_member = "moe_num_experts"};
/* HunYuanMoEModel, read back: TextModel's members, then the three lists a
 * layer each (moe_intermediate_size, moe_topk, num_shared_expert) from
 * their keys; attention_bias from layer 0's q bias */
static const tpc_gguf_cfg_rule hunyuanmoe_cfg[] = {
	{"hidden_size", "embedding_length", TPC_CK_INT},
	{"intermediate_size", "feed_forward_length", TPC_CK_INT},
	{"num_attention_heads", "attention.head_count", TPC_CK_INT},
	{"num_key_value_heads", "attention.head_count_kv", TPC_CK_INT},
	{"num_hidden_layers", "block_count", TPC_CK_INT},
	{"max_position_embeddings", "context_length", TPC_CK_INT},
	{"rms_norm_eps", "attention.layer_norm_rms_epsilon", TPC_CK_FLOAT},
	{"rope_theta", "rope.freq_base", TPC_CK_FLOAT},
	{"head_dim", "attention.key_length", TPC_CK_INT},
	{"moe_intermediate_size", "expert_feed_forward_length", TPC_CK_LAYER_LIST},
	{"moe_topk", "expert_used_count", TPC_CK_LAYER_LIST},
	{"num_shared_expert", "expert_shared_count", TPC_CK_LAYER_LIST},
	{NULL, NULL, TPC_CK_INT},
};
static const tpc_gguf_bias_flag hunyuanmoe_bias[] = {
	{"attention_bias", TPC_ROLE_ATTN_Q},
	{NULL, TPC_ROLE_NONE},
};
/* HunYuanMoEModel for HunYuanMoEV1ForCausalLM (tencent/Hunyuan-A13B): its
 * tiktoken vocabulary (TPC_GGUF_VOCAB_HY_TIKTOKEN: hy.tiktoken, not the
 * remote code); no Q/K permutation; the experts stacked down, gate, up (its
 * modify_tensors); read back with hy.tiktoken (gguf_tok.c) and
 * transformers' model_type hunyuan_v1_moe */
/* HunYuanMoEModel.set_vocab: pre "hunyuan" (llama.cpp's name for
 * Hunyuan-A13B's tokenizer), bos 127959 (A13B's <|bos|>) whatever the model */
static const tpc_gguf_hy_vocab hunyuanmoe_hy = {.pre = "hunyuan", .bos = 127959};
const tpc_gguf_arch tpc__gguf_hunyuanmoe = {
	.arch = "hunyuan-moe", .hf_arch = A("HunYuanMoEV1ForCausalLM"), .kv = hunyuanmoe_kv,
	.experts = {TPC_ROLE_FFN_DOWN_EXP, TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP}, .vocab = TPC_GGUF_VOCAB_HY_TIKTOKEN,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer", .hf_cfg = hunyuanmoe_cfg,
	.bias_flags = hunyuanmoe_bias, .rope_pct = "partial_rotary_factor", .experts_member = "num_experts",
	.model_type = "hunyuan_v1_moe", .rope_alpha = &hunyuanmoe_rope, .hy = &hunyuanmoe_hy};
/* HunYuanModel, read back: TextModel's members; attention_bias from layer 0's q bias */
static const tpc_gguf_cfg_rule hunyuandense_cfg[] = {
	{"hidden_size", "embedding_length", TPC_CK_INT},
	{"intermediate_size", "feed_forward_length", TPC_CK_INT},
	{"num_attention_heads", "attention.head_count", TPC_CK_INT},
	{"num_key_value_heads", "attention.head_count_kv", TPC_CK_INT},
	{"num_hidden_layers", "block_count", TPC_CK_INT},
	{"max_position_embeddings", "context_length", TPC_CK_INT},
	{"rms_norm_eps", "attention.layer_norm_rms_epsilon", TPC_CK_FLOAT},
	{"rope_theta", "rope.freq_base", TPC_CK_FLOAT},
	{"head_dim", "attention.key_length", TPC_CK_INT},
	{NULL, NULL, TPC_CK_INT},
};
/* HunYuanModel.set_vocab: a hy.tiktoken vocabulary's pre "hunyuan-dense"
 * (llama.cpp's name for Hunyuan-4B's tokenizer), bos 127958 after it only
 * where hidden_size is 4096 (Hunyuan-7B's <|bos|>); eos config.json's
 * eod_token_id (HunYuanDenseV1Config's default 3 where unsaid), eot the
 * first of generation_config.json's eos ids */
static const tpc_gguf_hy_vocab hunyuandense_hy = {.pre = "hunyuan-dense", .bos = 127958, .bos_hidden = 4096,
						  .eos_member = "eod_token_id", .eos_default = 3, .eot_gen = true};
/* HunYuanModel for HunYuanDenseV1ForCausalLM (tencent/Hunyuan-0.5B to -7B):
 * LLaMA's tensors with per-head q/k norms, no Q/K permutation, a tied
 * lm_head left out; read back as transformers' hunyuan_v1_dense */
const tpc_gguf_arch tpc__gguf_hunyuandense = {
	.arch = "hunyuan-dense", .hf_arch = A("HunYuanDenseV1ForCausalLM"), .kv = hunyuandense_kv,
	.vocab = TPC_GGUF_VOCAB_HY_TIKTOKEN_OR_BPE, .tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer",
	.hf_cfg = hunyuandense_cfg, .bias_flags = hunyuanmoe_bias, .rope_pct = "partial_rotary_factor",
	.model_type = "hunyuan_v1_dense", .rope_alpha = &hunyuandense_rope, .hy = &hunyuandense_hy};
/* Exaone4Model: get_vocab_base's BPE and SpecialVocab (_set_vocab_gpt2's);
 * no Q/K permutation; a llama3 rope's rope_freqs.weight (its own
 * generate_extra_tensors, LlamaModel's numbers); Exaone4Config has no
 * head_dim */
const tpc_gguf_arch tpc__gguf_exaone4 = {
	.arch = "exaone4", .hf_arch = A("Exaone4ForCausalLM"), .kv = exaone4_kv, .rope_freqs = true,
	.vocab = TPC_GGUF_VOCAB_BPE, .tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer",
	.hf_cfg = exaone4_cfg, .rope_pct = "partial_rotary_factor"};
/* Phi2Model: TextModel's _set_vocab_gpt2; no Q/K permutation; the rotary
 * fraction written back whole or not (PhiConfig's default is 0.5) */
const tpc_gguf_arch tpc__gguf_phi2 = {
	.arch = "phi2", .hf_arch = A("PhiForCausalLM"), .kv = phi2_kv, .vocab = TPC_GGUF_VOCAB_BPE,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer", .hf_cfg = phi2_cfg,
	.rope_pct = "partial_rotary_factor", .rope_pct_always = true};
/* Cohere2Model: TextModel's _set_vocab_gpt2; no Q/K permutation;
 * Cohere2Config's head_dim: hidden_size / num_attention_heads; rotary_pct
 * written back always (the reference requires it) */
const tpc_gguf_arch tpc__gguf_cohere2 = {
	.arch = "cohere2", .hf_arch = A("Cohere2ForCausalLM"), .kv = cohere2_kv, .head_dim = -1,
	.vocab = TPC_GGUF_VOCAB_BPE, .tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer",
	.hf_cfg = cohere2_cfg, .rope_pct = "rotary_pct", .rope_pct_always = true};
/* DeepseekV2Model for DeepseekV3ForCausalLM: _set_vocab_gpt2; no Q/K
 * permutation; experts stacked down, gate, up; kv_b_proj split per head
 * over num_key_value_heads into attn_k_b (its qk_nope_head_dim rows,
 * transposed) and attn_v_b (its v_head_dim rows); the layers past
 * num_hidden_layers (the multi-token-prediction layer) left out. Not
 * DeepseekV2ForCausalLM: its routing keys are not checked against the
 * reference yet */
const tpc_gguf_arch tpc__gguf_deepseek2 = {
	.arch = "deepseek2", .hf_arch = A("DeepseekV3ForCausalLM"), .kv = deepseek2_kv,
	.experts = {TPC_ROLE_FFN_DOWN_EXP, TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP},
	.head_split = {TPC_ROLE_ATTN_KV_B, {"blk.{L}.attn_k_b.weight", "blk.{L}.attn_v_b.weight"}, "num_key_value_heads",
		       {"qk_nope_head_dim", "v_head_dim"}, true},
	.past_layers = "model.layers.", .vocab = TPC_GGUF_VOCAB_BPE, .tok_class_spm = "LlamaTokenizer",
	.tok_class_bpe = "GPT2Tokenizer", .hf_cfg = deepseek2_cfg, .experts_member = "n_routed_experts"};
/* Olmo2Model: _set_vocab_gpt2; no Q/K permutation (not LlamaModel) */
const tpc_gguf_arch tpc__gguf_olmo2 = {
	.arch = "olmo2", .hf_arch = A("Olmo2ForCausalLM"), .kv = olmo2_kv, .vocab = TPC_GGUF_VOCAB_BPE,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer", .hf_cfg = text_cfg,
	.rope_pct = "partial_rotary_factor"};
/* Olmo2Model for Olmo3ForCausalLM: general.architecture olmo2 too, told
 * apart by its window */
const tpc_gguf_arch tpc__gguf_olmo3 = {
	.arch = "olmo2", .hf_arch = A("Olmo3ForCausalLM"), .kv = olmo3_kv, .vocab = TPC_GGUF_VOCAB_BPE,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer", .hf_cfg = olmo3_cfg,
	.rope_pct = "partial_rotary_factor", .when_key = "attention.sliding_window"};
/* GemmaConfig's head_dim default: 256 */
const tpc_gguf_arch tpc__gguf_gemma = {
	.arch = "gemma", .hf_arch = A("GemmaForCausalLM"), .kv = gemma_kv, .norm_plus_1 = true, .no_lm_head = true,
	.head_dim = 256, .vocab = TPC_GGUF_VOCAB_GEMMA, .tok_class_spm = "GemmaTokenizer",
	.spm_json = TPC_GGUF_SPM_JSON_GEMMA, .hf_cfg = text_cfg, .rope_pct = "partial_rotary_factor"};
/* Gemma2Model: GemmaModel's norms + 1 and no lm_head, SentencePiece without
 * Gemma 1's FIM ids; Gemma2Config's head_dim default: 256 */
const tpc_gguf_arch tpc__gguf_gemma2 = {
	.arch = "gemma2", .hf_arch = A("Gemma2ForCausalLM"), .kv = gemma2_kv, .norm_plus_1 = true, .no_lm_head = true,
	.head_dim = 256, .vocab = TPC_GGUF_VOCAB_SPM_NOSPACE, .tok_class_spm = "GemmaTokenizer",
	.spm_json = TPC_GGUF_SPM_JSON_GEMMA, .hf_cfg = gemma2_cfg, .rope_pct = "partial_rotary_factor"};
/* Gemma3Model: Gemma 2's norms + 1 (every *norm.weight, q/k norms too), no
 * lm_head, SentencePiece with add_space_prefix false; Gemma3TextConfig's
 * head_dim default 256. The embedding trimmed to the tokenizer's vocabulary
 * is the whole of it with a tokenizer.model (_create_vocab_sentencepiece
 * pads the tokens to vocab_size) */
const tpc_gguf_arch tpc__gguf_gemma3 = {
	.arch = "gemma3", .hf_arch = A("Gemma3ForCausalLM"), .kv = gemma3_kv, .norm_plus_1 = true, .no_lm_head = true,
	.head_dim = 256, .vocab = TPC_GGUF_VOCAB_SPM_NOSPACE, .tok_class_spm = "GemmaTokenizer",
	.spm_json = TPC_GGUF_SPM_JSON_GEMMA, .hf_cfg = gemma2_cfg, .model_type = "gemma3_text",
	.rope_pct = "partial_rotary_factor"};
/* the reference reads a BPE when tokenizer_class says GPT2Tokenizer */
const tpc_gguf_arch tpc__gguf_phi3 = {
	.arch = "phi3", .hf_arch = A("Phi3ForCausalLM"), .kv = phi3_kv, .rope_factors = true, .vocab = TPC_GGUF_VOCAB_PHI3,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer", .hf_cfg = text_cfg,
	.rope_pct = "partial_rotary_factor"};
/* PhiMoeModel: Phi3MiniModel's vocabulary and rope factors, no Q/K
 * permutation, the experts stacked as LlamaModel's (w1, w2, w3); read back,
 * attention_bias and lm_head_bias from layer 0's q bias and the head's */
static const tpc_gguf_bias_flag phimoe_bias[] = {
	{"attention_bias", TPC_ROLE_ATTN_Q},
	{"lm_head_bias", TPC_ROLE_OUTPUT},
	{NULL, TPC_ROLE_NONE},
};
const tpc_gguf_arch tpc__gguf_phimoe = {
	.arch = "phimoe", .hf_arch = A("PhiMoEForCausalLM"), .kv = phimoe_kv, .rope_factors = true,
	.experts = {TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_DOWN_EXP, TPC_ROLE_FFN_UP_EXP}, .vocab = TPC_GGUF_VOCAB_PHI3,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer", .hf_cfg = text_cfg, .bias_flags = phimoe_bias,
	.rope_pct = "partial_rotary_factor", .experts_member = "num_local_experts"};
const tpc_gguf_arch tpc__gguf_gpt2 = {
	.arch = "gpt2", .hf_arch = A("GPT2LMHeadModel"), .kv = gpt2_kv, .vocab = TPC_GGUF_VOCAB_BPE,
	.tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPT2Tokenizer", .hf_cfg = gpt2_cfg,
	.rope_pct = "partial_rotary_factor"};
const tpc_gguf_arch tpc__gguf_gptneox = {
	.arch = "gptneox", .hf_arch = A("GPTNeoXForCausalLM"), .kv = gptneox_kv, .neox_qkv = true,
	.vocab = TPC_GGUF_VOCAB_BPE, .tok_class_spm = "LlamaTokenizer", .tok_class_bpe = "GPTNeoXTokenizer",
	.hf_cfg = neox_cfg, .rope_pct = "rotary_pct", .rope_pct_always = true};

#undef A

/* ---- lookups ---- */

bool tpc_gguf_arch_stacks_experts(const tpc_gguf_arch *g)
{
	return g && g->experts[0] != TPC_ROLE_NONE;
}

bool tpc_gguf_arch_has_mtp(const tpc_family *f)
{
	return f && f->gguf && (f->mtp || f->gguf->mtp_count);
}

const tpc_gguf_tile_row *tpc_gguf_tile_of(const tpc_gguf_arch *g, tpc_role role)
{
	size_t n = g ? sizeof(g->head_tile.rows) / sizeof(g->head_tile.rows[0]) : 0;
	for (size_t i = 0; role != TPC_ROLE_NONE && i < n && g->head_tile.rows[i].role != TPC_ROLE_NONE; i++)
		if (g->head_tile.rows[i].role == role)
			return &g->head_tile.rows[i];
	return NULL;
}

const tpc_family *tpc_family_by_gguf_hf(const char *hf_arch)
{
	const tpc_family *f = tpc_family_by_arch(hf_arch), *w = tpc_family_by_wrap(hf_arch);
	if (f && f->gguf && tpc_family_lists(f->gguf->hf_arch, hf_arch))
		return f;
	/* a multimodal class: its text model, when that record has a GGUF column */
	return w && w->gguf ? w : NULL;
}

const tpc_family *tpc_family_by_gguf_hf_experts(const char *hf_arch, int64_t experts)
{
	for (size_t i = 0; experts == 0 && hf_arch && i < tpc_family_count(); i++) {
		const tpc_family *f = tpc_family_at(i);
		if (f->gguf && tpc_family_lists(f->gguf->hf_arch, hf_arch) && !tpc_gguf_arch_stacks_experts(f->gguf))
			return f;
	}
	return tpc_family_by_gguf_hf(hf_arch);
}

static bool fits_gguf(const tpc_family *f, const char *arch, int experts)
{
	return f->gguf && !strcmp(f->gguf->arch, arch) &&
	       (experts < 0 || tpc_gguf_arch_stacks_experts(f->gguf) == (experts > 0));
}

const tpc_family *tpc_family_by_gguf_keys(const char *arch, int experts, bool (*has)(const void *ctx, const char *key),
					  const void *ctx)
{
	char full[160];
	for (size_t i = 0; arch && has && i < tpc_family_count(); i++) {
		const tpc_family *f = tpc_family_at(i);
		if (!fits_gguf(f, arch, experts) || !f->gguf->when_key)
			continue;
		int n = snprintf(full, sizeof(full), "%s.%s", arch, f->gguf->when_key);
		if (n > 0 && (size_t)n < sizeof(full) && has(ctx, full))
			return f;
	}
	for (size_t i = 0; arch && i < tpc_family_count(); i++) {
		const tpc_family *f = tpc_family_at(i);
		if (fits_gguf(f, arch, experts) && !f->gguf->when_key)
			return f;
	}
	return NULL;
}

const tpc_family *tpc_family_by_gguf(const char *arch, int experts)
{
	return tpc_family_by_gguf_keys(arch, experts, NULL, NULL);
}

void tpc_family_gguf_list(bool hf, char *buf, size_t n)
{
	size_t used = 0;
	if (n)
		buf[0] = '\0';
	for (size_t i = 0; i < tpc_family_count(); i++) {
		const tpc_family *f = tpc_family_at(i);
		if (!f->gguf || (!hf && tpc_family_by_gguf(f->gguf->arch, -1) != f))
			continue; /* no GGUF part, or an architecture named already */
		for (size_t k = 0; hf ? f->gguf->hf_arch[k] != NULL : k < 1; k++) {
			int w = snprintf(buf + used, n > used ? n - used : 0, "%s%s", used ? ", " : "",
					 hf ? f->gguf->hf_arch[k] : f->gguf->arch);
			if (w < 0 || used + (size_t)w >= n)
				return;
			used += (size_t)w;
		}
	}
}
