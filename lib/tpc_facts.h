/*
 * tpc_facts.h - a model's facts, as its config.json (or a plan's "model", the
 * command line, Megatron's saved args) says them: the one struct shard,
 * verify, GGUF and the layouts read.
 *
 * Every member is 0 when unknown. tpc_facts_from_buffer reads a Hugging Face
 * or diffusers config through lib/tpc_cfg.h (the text_config rule and the
 * rope rule are stated there); values of the wrong type or out of range are
 * ignored (a config may reuse a name for something else), never an error.
 * What is derived from the facts and the checkpoint's shapes stays with its
 * user (verify derives its own defaults; shard/tpc_qsplit.c the companion
 * splits from tpc_qs_cfg).
 */
#ifndef TPC_FACTS_H
#define TPC_FACTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_err.h"
#include "tpc_rope.h"
#include "tpc_rules.h"

struct cJSON;

/* The feed-forward activation a config names (diffusers "activation_fn"):
 * gated ones (GEGLU, SwiGLU) project to 2 x inner features [value | gate]. */
typedef enum tpc_ff_act {
	TPC_FF_UNKNOWN = 0,
	TPC_FF_GELU,        /* "gelu" */
	TPC_FF_GELU_TANH,   /* "gelu-approximate" (PixArt, SD3, Flux, CogVideoX, DiT) */
	TPC_FF_GEGLU,       /* "geglu": value * gelu(gate) */
	TPC_FF_GEGLU_TANH,  /* "geglu-approximate" */
	TPC_FF_SWIGLU,      /* "swiglu": value * silu(gate) */
	TPC_FF_OTHER,       /* another ungated activation ("silu", "relu", ...) */
	TPC_FF_GATED,       /* "gated": gated, as the shapes say; the activation unknown */
	TPC_FF_UNGATED,     /* "ungated": not gated, as the shapes say; the activation unknown */
} tpc_ff_act;
bool tpc_ff_act_gated(tpc_ff_act a);
/* diffusers' name ("geglu"; "other" for TPC_FF_OTHER, NULL for unknown) and back
 * (TPC_FF_UNKNOWN for NULL, TPC_FF_OTHER for a name not in the table). */
const char *tpc_ff_act_name(tpc_ff_act a);
tpc_ff_act tpc_ff_act_parse(const char *name);

/* quantization_config of a Hugging Face config.json, as far as splitting
 * needs it (how the companions split: shard/tpc_qsplit.c). */
typedef enum tpc_qs_method {
	TPC_QS_NONE = 0,
	TPC_QS_GPTQ,  /* qweight [in*bits/32, out] int32, qzeros [in/g, out*bits/32], scales [in/g, out], g_idx [in] */
	TPC_QS_AWQ,   /* qweight [in, out*bits/32] (packed along the output), qzeros [in/g, out*bits/32], scales [in/g, out] */
	TPC_QS_FP8,   /* weight [out, in] float8, weight_scale_inv [ceil(out/b0), ceil(in/b1)] (block) */
	TPC_QS_PACKED, /* compressed-tensors pack-quantized: weight_packed [out, in*bits/32] (packed
	                  along the input), weight_scale [out, in/g], weight_zero_point
	                  [out*bits/32, in/g] (packed along the output), weight_g_idx [in],
	                  weight_shape [2] = [out, in] (rewritten per rank) */
	TPC_QS_FP4,   /* NVFP4 / MXFP4: weight_packed (compressed-tensors) or weight (ModelOpt) u8
	                  [out, in/2], weight_scale [out, in/group]; the per-tensor
	                  weight_global_scale, input_global_scale (ModelOpt: weight_scale_2,
	                  input_scale) replicated; quant_method "mxfp4" (gpt-oss, mx_blocks):
	                  X_blocks u8 [E, out, in/32, 16], X_scales [E, out, in/32] */
	TPC_QS_OTHER, /* a method tpconv does not split: its companions are refused */
} tpc_qs_method;

typedef struct tpc_qs_cfg {
	tpc_qs_method method;
	int bits;            /* gptq/awq: 2, 3, 4, 8 (0: unknown) */
	int64_t group;       /* gptq/awq group_size (-1: one group per column) */
	bool desc_act;       /* gptq act-order (compressed-tensors actorder "group"): groups
	                        follow g_idx, not the input order */
	int64_t block[2];    /* fp8 weight_block_size (0: per-tensor or per-channel scales) */
	bool modelopt;       /* fp4: ModelOpt's names (the packed tensor is X.weight) */
	bool mx_blocks;      /* fp4: X_blocks / X_scales beside no X, the layer the [E, in, out]
	                        parameter transformers builds from them (quant_method "mxfp4") */
	char name[24];       /* quant_method as written */
} tpc_qs_cfg;

/* How a router scores experts (config scoring_func) and picks its top-k
 * (topk_method: DeepSeek-V2 "greedy" / "group_limited_greedy", V3
 * "noaux_tc" with e_score_correction_bias). */
typedef enum tpc_moe_scoring { TPC_MOE_SCORE_UNKNOWN = 0, TPC_MOE_SOFTMAX, TPC_MOE_SIGMOID } tpc_moe_scoring;
typedef enum tpc_moe_topk {
	TPC_MOE_TOPK_UNKNOWN = 0,
	TPC_MOE_GREEDY,
	TPC_MOE_GROUP_LIMITED,
	TPC_MOE_NOAUX_TC,
} tpc_moe_topk;

/* The facts a checkpoint's shapes are checked against (tpc_facts_check), each
 * with where it came from: origin[k], k one of the rules' TPC_FACT_HEADS ..
 * TPC_FACT_VOCAB (lib/tpc_rules.h) or TPC_FACT_EXPERTS. */
#define TPC_FACT_EXPERTS TPC_NFACTS
#define TPC_FACT_NCHECKED (TPC_NFACTS + 1)
#define TPC_FACT_ORIGIN_MAX 200

/* The layers whose attention kind config.json's layer_types can say */
#define TPC_FACTS_MAX_TYPED 1024

/* Model facts: 0 = unknown. */
typedef struct tpc_model_facts {
	int64_t heads, kv_heads, head_dim, hidden, vocab, layers;
	tpc_ff_act ff_act;
	/* mixtures of experts (for verify's MoE block check): experts each token
	 * is routed to (num_experts_per_tok), and whether their weights are
	 * renormalised to sum 1 (norm_topk_prob: 1 yes, -1 no, 0 unknown) */
	int64_t experts_per_tok;
	int norm_topk;
	/* routed experts per MoE layer (num_local_experts, num_experts,
	 * n_routed_experts): the experts expert parallelism places */
	int64_t experts;
	/* DeepSeek-V2/V3 routing (config.json): scoring_func, topk_method,
	 * n_group groups of which topk_group are kept, routed_scaling_factor
	 * (0: unknown), the first_k_dense_replace layers that are dense (0: none
	 * or unknown) */
	tpc_moe_scoring scoring;
	tpc_moe_topk topk_method;
	int64_t n_group, topk_group, first_dense;
	double routed_scale;
	/* the sparsemixer router's eps (router_jitter_noise; Phi-3.5-MoE),
	 * router_jitter_said: config.json has it (0 is a value) */
	double router_jitter;
	bool router_jitter_said;
	/* next-token-prediction (MTP) layers after the num_hidden_layers
	 * (num_nextn_predict_layers: GLM-4.5, DeepSeek-V3): model.layers.N for
	 * N >= layers, which transformers' model leaves out (0: none or unsaid) */
	int64_t nextn;
	/* DeepSeek multi-head latent attention (MLA): q_lora_rank (0: no
	 * q_a/q_b, a plain q_proj as V2-Lite), kv_lora_rank, the per-head sizes */
	int64_t q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
	/* linear attention (gated DeltaNet: Qwen3-Next's linear_attn): its key
	 * heads and value heads (linear_num_key_heads, linear_num_value_heads)
	 * and their sizes (linear_key_head_dim, linear_value_head_dim), which a
	 * plan's "lin_k" / "lin_v" heads split by */
	int64_t lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim;
	/* for verify's model check: rms_norm_eps, rope_theta (or
	 * rope_parameters.rope_theta), rope_interleave (1 true, -1 false, 0
	 * unsaid), and a rope_scaling / rope_parameters of rope_type "yarn"
	 * (tpc_yarn) */
	double norm_eps, rope_theta;
	int rope_interleave;
	tpc_yarn yarn;
	/* a rope_type "llama3" rope (tpc_rope_llama3; factor 0: none), and
	 * llama3_bad: config.json says llama3 but one of its four numbers is
	 * missing (verify refuses it: transformers would fail) */
	tpc_rope_llama3 llama3;
	bool llama3_bad;
	/* a rope_type "longrope" rope (tpc_rope_longrope; on false: none) */
	tpc_rope_longrope longrope;
	/* GPT-NeoX: rotary_pct (or rope_parameters.partial_rotary_factor; 0
	 * unsaid) and use_parallel_residual (1 true, -1 false, 0 unsaid); the
	 * norm's epsilon above is also layer_norm_eps / layer_norm_epsilon and
	 * rope_theta also rotary_emb_base */
	double rotary_pct;
	int parallel_residual;
	/* attention and logits (verify's model check; Gemma 2/3, OLMo 3):
	 * query_pre_attn_scalar (scores scaled by its -1/2 power, not
	 * head_dim's), attn_logit_softcapping and final_logit_softcapping
	 * (cap * tanh(x / cap)), sliding_window, the sliding layers' rope theta
	 * (rope_parameters.sliding_attention.rope_theta, or rope_local_base_freq;
	 * rope_theta is then rope_parameters.full_attention's), and layer_types:
	 * n_typed entries (0: unsaid, or longer than TPC_FACTS_MAX_TYPED),
	 * layer l "sliding_attention" when bit l of swa_layers is set */
	double attn_scalar, attn_softcap, final_softcap, rope_theta_local;
	/* a rope_type "linear" rope's factor (positions divided by it): the
	 * rope object's, or with per-layer-type ones full_attention's (the
	 * sliding layers then rotate by their own theta, unscaled) */
	double rope_linear;
	/* a rope_type "dynamic" rope (rope_dynamic; the rope object's, or with
	 * per-layer-type ones full_attention's): its alpha (0: none; a record
	 * whose parts say rope_alpha scales the base by it); max_pos:
	 * config.json's max_position_embeddings (0 unsaid), past which a dynamic
	 * rope rescales the frequencies, and Megatron's args say */
	bool rope_dynamic;
	double rope_alpha;
	int64_t max_pos;
	/* a rope_type none of the above (e.g. "longrope"): its name, which
	 * verify's model check refuses rather than rotate as a plain rope ("":
	 * default, linear, dynamic, yarn, llama3, longrope or unsaid) */
	char rope_unknown[24];
	/* multipliers (Granite): the embeddings times embedding_multiplier,
	 * each sublayer's output times residual_multiplier before its residual
	 * add, the scores times attention_multiplier (in place of head_dim^-1/2
	 * or query_pre_attn_scalar's), the logits divided by logits_scaling */
	double embed_mul, resid_mul, attn_mul, logit_div;
	/* Cohere's logit_scale: the logits times it (applied where the
	 * family's parts say logit_scale) */
	double logit_mul;
	/* gpt-oss's swiglu_limit: its experts' gate and up clamped to it (a
	 * record whose parts say mlp clamped_swiglu; 0 unsaid) */
	double swiglu_limit;
	int64_t sliding_window, n_typed;
	uint64_t swa_layers[TPC_FACTS_MAX_TYPED / 64];
	/* Qwen2 / Qwen3's switch and pattern (transformers 5.12
	 * configuration_qwen2.py:84-94: use_sliding_window false drops the
	 * window, whatever layer_types says; without layer_types, layer l slides
	 * when l >= max_window_layers): use_swa 1 true, -1 false, 0 unsaid;
	 * max_window_layers (0 is a value) when max_window_said */
	int use_swa;
	int64_t max_window_layers;
	bool max_window_said;
	/* chunked local attention (Llama 4): attention_chunk_size, the layers
	 * layer_types calls "chunked_attention" (bit l of chunk_layers; read
	 * with n_typed) */
	int64_t chunk_size;
	uint64_t chunk_layers[TPC_FACTS_MAX_TYPED / 64];
	/* Llama 4: use_qk_norm (1 true, -1 false, 0 unsaid), and the attention
	 * temperature tuning of its layers without RoPE: attn_temperature_tuning
	 * (1, -1, 0 as above), floor_scale and attn_scale (0 unsaid) */
	int use_qk_norm, temp_tuning;
	double temp_floor, temp_scale;
	bool temp_scale_said;    /* attn_scale is there (0 is a value) */
	/* a Mamba-2 mixer (config.json's mamba_* members: Granite 4, Bamba):
	 * ssm_heads heads of ssm_head_dim channels each (mamba_d_head; "auto"
	 * or unsaid: mamba_expand x hidden / ssm_heads), B and C in ssm_groups
	 * groups (mamba_n_groups) of ssm_state channels (mamba_d_state), a
	 * causal conv1d of ssm_conv taps (mamba_d_conv); the layers
	 * layer_types calls "mamba" have bit l of ssm_layers set (n_typed
	 * entries). Read a layer's kind through tpc_facts_ssm_layer. */
	int64_t ssm_heads, ssm_head_dim, ssm_groups, ssm_state, ssm_conv;
	/* position_embedding_type is "rope" (GraniteMoeHybrid's attention
	 * rotates only then: tpc_layer_parts.rope_if_said) */
	bool pos_rope_said;
	uint64_t ssm_layers[TPC_FACTS_MAX_TYPED / 64];
	/* layers without a rotary embedding (SmolLM3, Llama 4): no_rope_layers,
	 * an entry per layer, true (1) rotates, false (0) does not, as Python
	 * reads it: n_rope_listed entries (0: unsaid, or longer than
	 * TPC_FACTS_MAX_TYPED), layer l without RoPE when bit l of rope_off is
	 * set; no_rope_layer_interval as rope_off_every (every such layer,
	 * 1-based, without RoPE when the list is unsaid; 0: unsaid). Read them
	 * through tpc_facts_rope_off. */
	int64_t n_rope_listed, rope_off_every;
	uint64_t rope_off[TPC_FACTS_MAX_TYPED / 64];
	/* a quantized checkpoint (config.json quantization_config): how its
	 * companion tensors split with their layer (tpc_qs_cfg.c) */
	tpc_qs_cfg quant;
	/* the vocabulary rows a checkpoint says are padded (Megatron's
	 * padded_vocab_size) when it does not record the true vocabulary size:
	 * a merge must not take them for the vocabulary */
	int64_t padded_vocab;
	/* where heads, kv_heads, head_dim, hidden, vocab and experts came from,
	 * for the errors that name them: "--kv-heads", "'config.json'", "the
	 * checkpoint's Megatron args", ...; "" when unknown */
	char origin[TPC_FACT_NCHECKED][TPC_FACT_ORIGIN_MAX];
} tpc_model_facts;

/* Facts from a Hugging Face config.json text (num_attention_heads / n_head,
 * num_key_value_heads / multi_query, head_dim / kv_channels /
 * attention_head_dim, hidden_size / n_embd / d_model, vocab_size (a
 * padded_vocab_size only as padded_vocab), num_hidden_layers / n_layer,
 * labelled with `path`; read with lib/tpc_cfg.h's text_config rule, a
 * member of "text_config" winning over the top level's) or a diffusers one (num_attention_heads, attention_head_dim, hidden =
 * their product, num_layers, activation_fn; SD3 and Flux configs, which name
 * no activation_fn, use gelu-approximate). Unknown members stay 0. */
int tpc_facts_from_buffer(tpc_model_facts *f, const char *text, size_t len, const char *path,
			  tpc_err *e);
int tpc_facts_from_file(tpc_model_facts *f, const char *path, tpc_err *e);
/* The same from a parsed config (tpc_cfg.h). */
struct tpc_cfg;
int tpc_facts_from_cfg(tpc_model_facts *f, const struct tpc_cfg *c, tpc_err *e);
/* dst's unknown facts are taken from src, with their origins. */
void tpc_facts_fill(tpc_model_facts *dst, const tpc_model_facts *src);
/* Whether layer l (0-based) has no rotary embedding: no_rope_layers' entry
 * when the list is said (false past its end), else every period-th layer
 * (1-based), the period no_rope_layer_interval or, unsaid, `every` (the
 * record's default, tpc_layer_parts.rope_off_every; 0: every layer rotates).
 * f may be NULL (`every` alone). */
bool tpc_facts_rope_off(const tpc_model_facts *f, int64_t l, int64_t every);
/* Whether layer l (0-based) is a Mamba-2 mixer (layer_types' "mamba") */
bool tpc_facts_ssm_layer(const tpc_model_facts *f, int64_t l);
/* Derive what follows from the rest (head_dim = hidden / heads). */
void tpc_facts_finish(tpc_model_facts *f);
/* Every known checked fact without an origin gets `origin` (truncated to
 * TPC_FACT_ORIGIN_MAX); the name of fact `k` ("heads", "kv_heads", ...). */
void tpc_facts_label(tpc_model_facts *f, const char *origin);
const char *tpc_fact_name(int k);

/* What Megatron-LM's saved args say (lib/tpc_extras.h) as facts, labelled
 * `origin`: the heads, query groups (kv_heads), kv_channels (head_dim),
 * hidden size, the true vocabulary when recorded, else the padded one as
 * padded_vocab. Only unknown facts are filled. */
struct tpc_megatron_args;
void tpc_facts_from_megatron(tpc_model_facts *f, const struct tpc_megatron_args *a, const char *origin);

/* Fill q from a config's "quantization_config" object (NULL or not an
 * object: no quantization). */
void tpc_qs_from_json(tpc_qs_cfg *q, const struct cJSON *qc);

#endif
