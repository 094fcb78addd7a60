/*
 * tpc_family.h - one record per model family: everything a --preset name
 * stands for, as data (the shape of llama.cpp's src/llama-arch.cpp).
 *
 * A record holds:
 *   name      the preset name users type ("llama", "qwen3", "mixtral")
 *   desc      one line, for `tpconv plan --list` and the commands' --help
 *   plan      its split plan: plan JSON in shard/tpc_plan.h's schema, parsed
 *             there exactly as a user's --plan file (`tpconv plan NAME`
 *             prints it); the plan's "name" is the record's name
 *   parts     the decoder layer as parts (tpc_layer_parts, below) that
 *             verify composes its block and model checks from; a record
 *             without (has_parts false) gets structure and layer checks only
 *   hf_arch   the config.json "architectures" values of its models
 *   rules     the rename presets (lib/tpc_rules.h) that bring another
 *             ecosystem's names to this family's Hugging Face names
 *   layouts   the engine layouts whose loaders were checked for its models
 *             (a layout writes a family only when it is listed here; a set
 *             no record is named for is read with the tables of the records
 *             that list its layout, tpc_family_classify_for)
 *   tensors   for decoders, the tensor table: each tensor by role with its
 *             name in every ecosystem (below); NULL for families without one
 *   gguf      its GGUF architecture: general.architecture, keys, tensor
 *             transforms, tokenizer facts (lib/tpc_family_gguf.h); NULL:
 *             convert_hf_to_gguf.py's is not written by tpconv
 *   conv1d    its Hugging Face checkpoints store the 2-D weights of the
 *             decoder's linear layers [in, out] (GPT-2's Conv1D); the other
 *             ecosystems hold them [out, in], transposed (embeddings and
 *             lm_head are [vocab or positions, hidden] everywhere)
 *   trtllm    what TensorRT-LLM's converter makes of its models (below)
 *
 * The tensor table. Each row names one weight; its bias, where the model has
 * one, is the same name with the final "weight" replaced by "bias" (also
 * TransformerEngine's "layer_norm_weight" -> "layer_norm_bias"). In a name,
 * "{L}" stands for the layer number and "{E}" for the expert number. A name
 * in one ecosystem may end in "#K": that ecosystem fuses several rows into
 * one tensor, and this row is part K of it (vLLM's qkv_proj holds q_proj as
 * #0, k_proj as #1, v_proj as #2; how the parts interleave, per rank or per
 * query group, is the layout's business). A row whose Hugging Face name has
 * "{E}" but whose name in another ecosystem has none is stacked there over
 * the experts, in expert order; an expert row whose Hugging Face name has no
 * "{E}" is stacked along dim 0 in the Hugging Face checkpoint itself
 * ([E, ...]: Granite-MoE's block_sparse_moe.input_linear.weight), as
 * tpc_family_stacked says for any ecosystem. A Hugging Face name ending in
 * "#K" is part K of a tensor the checkpoint fuses itself: the parts are
 * equal slices of its rows (of each expert's rows, dim 1, when stacked), in
 * K order (Granite-MoE's input_linear.weight#0 is the gate, #1 the up;
 * tpc_family_parts lists them; the row's hf_interleaved says they alternate
 * instead, hf_in_out that the checkpoint stores the matrix [in, out]). A
 * name that does not end in "weight" (gpt-oss's mlp.experts.gate_up_proj)
 * has its bias at the name + "_bias" (gate_up_proj_bias). NULL: the
 * ecosystem has no name for that
 * row (yet); a layout or writer that needs one refuses the tensor by name.
 *
 * Adding a family: one record in tpc_family.c (and a tensor table when it is
 * a decoder the ecosystems name), plus its tests. Presets, `plan --list`,
 * verify's architecture and the vLLM and Megatron name maps all come from
 * the records.
 */
#ifndef TPC_FAMILY_H
#define TPC_FAMILY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_dtype.h"
#include "tpconv_err.h"

typedef enum tpc_role {
	TPC_ROLE_NONE = 0,   /* ends a table */
	TPC_ROLE_TOKEN_EMBD, /* token embedding [vocab, hidden] */
	TPC_ROLE_POS_EMBD,   /* learned position embedding [positions, hidden] (GPT-2) */
	TPC_ROLE_OUTPUT_NORM,
	TPC_ROLE_OUTPUT,     /* lm_head [vocab, hidden] */
	TPC_ROLE_ATTN_NORM,
	TPC_ROLE_ATTN_Q,
	TPC_ROLE_ATTN_K,
	TPC_ROLE_ATTN_V,
	TPC_ROLE_ATTN_QKV,   /* a checkpoint that fuses q, k, v itself (Phi-3) */
	TPC_ROLE_ATTN_OUT,
	TPC_ROLE_ATTN_Q_NORM, /* per-head RMSNorm of q (Qwen3) */
	TPC_ROLE_ATTN_K_NORM,
	TPC_ROLE_FFN_NORM,
	TPC_ROLE_FFN_GATE,
	TPC_ROLE_FFN_UP,
	TPC_ROLE_FFN_GATE_UP, /* a checkpoint that fuses gate and up itself (Phi-3) */
	TPC_ROLE_FFN_DOWN,
	TPC_ROLE_FFN_GATE_INP, /* the MoE router [experts, hidden] */
	TPC_ROLE_FFN_GATE_EXP, /* expert E's gate (w1) */
	TPC_ROLE_FFN_UP_EXP,   /* expert E's up (w3) */
	TPC_ROLE_FFN_DOWN_EXP, /* expert E's down (w2) */
	TPC_ROLE_FFN_GATE_SHEXP, /* the shared expert */
	TPC_ROLE_FFN_UP_SHEXP,
	TPC_ROLE_FFN_DOWN_SHEXP,
	TPC_ROLE_FFN_GATE_INP_SHEXP, /* the shared expert's gate [1, hidden] */
	TPC_ROLE_ATTN_POST_NORM, /* the norm of the attention's output, before the residual add
				    (OLMo 2, Gemma 2/3; llama.cpp's post_attention_norm) */
	TPC_ROLE_FFN_POST_NORM,  /* the norm of the MLP's output, before the residual add */
	TPC_ROLE_TOKEN_TYPES,    /* token type embedding [types, hidden]: type 0's row added to
				    every token (BERT) */
	TPC_ROLE_TOKEN_EMBD_NORM, /* the norm of the summed embeddings (BERT) */
	TPC_ROLE_OUTPUT_DENSE,   /* a dense layer, gelu after it, before the output norm (BERT's
				    MLM transform) */
	TPC_ROLE_OUTPUT_BIAS,    /* the head's vocab bias held apart from its weight (BERT's
				    predictions.bias; OUTPUT's own bias comes first) */
	TPC_ROLE_FFN_EXP_PROBS_B, /* the router's score correction bias [experts], for choosing
				     only (DeepSeek-V3's e_score_correction_bias) */
	TPC_ROLE_ATTN_Q_A,       /* multi-head latent attention (DeepSeek-V2/V3): q's low-rank */
	TPC_ROLE_ATTN_Q_A_NORM,  /* down projection, its norm and up projection; q alone */
	TPC_ROLE_ATTN_Q_B,       /* is ATTN_Q (V2-Lite's q_proj) */
	TPC_ROLE_ATTN_KV_A_MQA,  /* the joint k/v down projection with the shared rope key */
	TPC_ROLE_ATTN_KV_A_NORM,
	TPC_ROLE_ATTN_KV_B,      /* k's nope part and v, every head */
	TPC_ROLE_NEXTN_EH_PROJ,  /* a next-token-prediction (MTP) layer, after the model's
				    num_hidden_layers (GLM-4.5, DeepSeek-V3: num_nextn_predict_layers):
				    the projection of [enorm(embedding); hnorm(hidden)] [H, 2H] */
	TPC_ROLE_NEXTN_EMBD,     /* its own token embedding [vocab, hidden] */
	TPC_ROLE_NEXTN_ENORM,    /* the norm of the embedding */
	TPC_ROLE_NEXTN_HNORM,    /* the norm of the main model's hidden state */
	TPC_ROLE_NEXTN_HEAD,     /* its own head [vocab, hidden] */
	TPC_ROLE_NEXTN_HEAD_NORM, /* the norm before that head */
	TPC_ROLE_ATTN_SINKS,     /* a learned sink logit per query head [heads], a column of its
				    own in each head's softmax, dropped after it (gpt-oss) */
	/* a sequence mixer in place of attention, named as gguf-py's
	 * MODEL_TENSOR.SSM_*: a Mamba-2 mixer (Granite 4, Bamba: mamba.*) or a
	 * gated DeltaNet linear attention (Qwen3-Next's linear_attn) */
	TPC_ROLE_SSM_IN,         /* the input projection: Mamba-2's in_proj [2 inner + 2 groups x
				    state + heads, hidden] (z, x, B, C, dt); the DeltaNet's
				    in_proj_qkvz ([q k v z] per key head's group) */
	TPC_ROLE_SSM_BA,         /* the DeltaNet's projection of beta and the decay's a (in_proj_ba:
				    [b a] per key head's group) */
	TPC_ROLE_SSM_CONV1D,     /* the causal depthwise conv1d [channels, 1, taps]: Mamba-2's over
				    x, B, C; the DeltaNet's over q, k, v */
	TPC_ROLE_SSM_DT,         /* dt's bias per head (dt_bias) */
	TPC_ROLE_SSM_A,          /* A_log per head: A = -exp(A_log) */
	TPC_ROLE_SSM_D,          /* Mamba-2's skip per head [heads] */
	TPC_ROLE_SSM_NORM,       /* the gated RMSNorm of the output (Mamba-2: per group of channels;
				    DeltaNet: of each value head) */
	TPC_ROLE_SSM_OUT,        /* the output projection [hidden, inner] */
	/* a gated DeltaNet whose projections are four tensors, each over all
	 * heads, not groups per key head (Qwen3.5's linear_attn; gguf-py's
	 * ATTN_QKV, ATTN_GATE, SSM_BETA and SSM_ALPHA of MODEL_ARCH.QWEN35) */
	TPC_ROLE_SSM_QKV,        /* q, k and v (in_proj_qkv: [q of every key head | k of every key
				    head | v of every value head]) */
	TPC_ROLE_SSM_Z,          /* the output gate z (in_proj_z: [v heads x v head dim, hidden]) */
	TPC_ROLE_SSM_BETA,       /* beta (in_proj_b: one row per value head) */
	TPC_ROLE_SSM_ALPHA,      /* the decay's a (in_proj_a: one row per value head) */
	TPC_ROLE_COUNT
} tpc_role;

typedef enum tpc_eco {
	TPC_ECO_HF = 0,   /* Hugging Face transformers */
	TPC_ECO_MEGATRON, /* Megatron-Core GPTModel, TransformerEngine layer spec */
	TPC_ECO_VLLM,     /* vLLM's parameters (stacked_params_mapping) */
	TPC_ECO_TRTLLM,   /* TensorRT-LLM checkpoint (models/llama/convert.py) */
	TPC_ECO_GGUF,     /* llama.cpp (gguf-py/gguf/constants.py TENSOR_NAMES) */
	TPC_ECO_COUNT
} tpc_eco;

typedef struct tpc_tensor_row {
	tpc_role role;
	bool bias;                        /* the family's models may carry its bias */
	const char *name[TPC_ECO_COUNT];
	bool hf_in_out;                   /* the Hugging Face checkpoint stores this matrix [in, out]
					     (of each expert, when it stacks them), transposed against
					     the other ecosystems' [out, in] (gpt-oss's and Llama 4's
					     experts.gate_up_proj [E, H, 2I], down_proj [E, I, H]) */
	bool hf_interleaved;              /* the "#K" parts of its fused Hugging Face tensor
					     interleave along the out dim: element j is part j % n's
					     (gpt-oss's gate_up_proj: the gate at even, the up at odd
					     columns), not equal slices in K order */
	const char *hf_fused;             /* the parameter transformers (>= 5) holds this row's experts
					     in when its Hugging Face checkpoint stores them one by one
					     ("{E}" in the name): the experts stacked along dim 0 and a
					     "#K" part the K-th equal slice of each expert's rows, as
					     conversion_mapping.py's MergeModulelist(dim=0) then
					     Concatenate(dim=1) make it (Mixtral's
					     mlp.experts.gate_up_proj#0 is w1); for a row without
					     "{E}", the name transformers 5 renames it to (Mixtral's
					     router block_sparse_moe.gate -> mlp.gate.weight). What
					     PEFT's target_parameters name. NULL: none */
} tpc_tensor_row;

/*
 * A decoder layer (and the model around it) as parts. Structure only: the
 * numbers (eps, rope theta, the rotary fraction, top-k, group counts) are the
 * model facts' (config.json). A record reusing known parts needs no code:
 * verify composes its forward from them and finds each tensor through the
 * record's roles (Hugging Face names).
 *
 *   model      decoder (causal LM), encoder (bidirectional, token types:
 *              BERT; its head, OUTPUT_DENSE -> OUTPUT_NORM -> OUTPUT, may be
 *              absent: without OUTPUT_DENSE in the checkpoint, a BertModel,
 *              the last hidden states are compared), or no token model at
 *              all, block checks only, over a module layout verify knows
 *              (diffusers transformer blocks, DALLE2-pytorch's prior and
 *              Unets)
 *   norm       RMSNorm or LayerNorm (with biases where the rows say so);
 *              norm_offset: the weight is stored minus this (Gemma: 1);
 *              norm_eps: their epsilon when config.json gives none (BERT's
 *              1e-12); 0: 1e-6 for RMSNorm, 1e-5 for LayerNorm
 *   place      pre: norm -> sublayer -> residual add (LLaMA); post: no input
 *              norms, sublayer -> norm -> residual add (OLMo 2:
 *              post_attention_layernorm and post_feedforward_layernorm);
 *              sandwich: both (Gemma 2/3); after_add: residual add -> norm
 *              (BERT)
 *   attn       MHA/GQA, or multi-head latent attention (DeepSeek-V2/V3)
 *   attn_gate  q_proj emits each head's query then its output gate
 *              ([heads, 2, head_dim] rows): the attention's context times
 *              sigmoid(gate), before o_proj (Qwen3-Next's gated attention)
 *   linear_attn  the layers config.json's layer_types calls
 *              "linear_attention" are a linear attention of the SSM roles
 *              instead: a gated DeltaNet (Qwen3-Next): in_proj_qkvz's [q k v
 *              z] and in_proj_ba's [b a] per key head's group, the causal
 *              depthwise conv1d (kernel linear_conv_kernel_dim, SiLU) over
 *              q, k, v, q and k L2-normalised per head and repeated over
 *              the value heads of their group, q scaled by dk^-1/2, beta =
 *              sigmoid(b), the decay g = -exp(A_log) softplus(a + dt_bias),
 *              the delta rule S = S e^g + k (beta (v - S^T k))^T, o = S^T q,
 *              each head's o RMS-normalised (its own weight, not offset)
 *              times silu(z), out_proj
 *   qk_norm    none, RMSNorm per head over head_dim (Qwen3), or over the
 *              whole q and k projections, heads * head_dim (OLMo 2); before
 *              the rotary embedding; qk_after_rope: after it (HunYuan's
 *              query_layernorm/key_layernorm); or l2_rope: every head of q
 *              and k RMS-normalised without a weight (eps the model's) after
 *              the rotary embedding, on the layers that rotate only, unless
 *              config.json's use_qk_norm is false (Llama 4's
 *              Llama4TextL2Norm; no tensor)
 *   qkv        how a fused qkv holds its parts: [q | k | v] (GPT-2, Phi-3)
 *              or [q, k, v] per head (GPT-NeoX's query_key_value)
 *   rope       rotate-half (dims i and i + rot/2) or interleaved pairs (2i,
 *              2i + 1): GLM-4, ERNIE 4.5, Cohere 2; only DeepSeek's MLA lets
 *              config.json's rope_interleave say otherwise
 *   partial_rope  only the first int(head_dim * partial_rotary_factor) dims
 *              of each head are rotated (GLM-4, Phi, GPT-NeoX; rotary_pct in
 *              the facts); when config.json gives no fraction, rope_fraction
 *              (GPT-NeoX's 0.25); 0: verify refuses the config
 *   pos        RoPE, learned absolute positions, or none
 *   rope_alpha  a dynamic rope's alpha (rope_type "dynamic" with an alpha in
 *              the rope parameters) makes the rotary base rope_theta *
 *              alpha ^ (head_dim / (head_dim - 2)) (HunYuan's NTK-aware
 *              alpha scaling: transformers' HunYuanMoEV1RotaryEmbedding);
 *              without it a dynamic rope is transformers' dynamic NTK,
 *              which alpha plays no part in (the default rope's frequencies
 *              within max_position_embeddings)
 *   rope_orig_top  a longrope rope's original_max_position_embeddings is the
 *              one at the top of config.json, or this default when it has
 *              none there, whatever the rope object says (Phi3Config's
 *              field, default 4096, which transformers' standardize_rope_params
 *              copies over the rope object's); 0: the rope object's, else
 *              max_position_embeddings (the other config classes)
 *   longrope_alias  rope_type "su" and "yarn" are longrope (Phi3Config's
 *              convert_rope_params_to_dict renames them; its longrope
 *              validation then requires the two lists)
 *   mlp        gated SiLU (SwiGLU), gated GELU, gated tanh-approximated GELU
 *              (Gemma's gelu_pytorch_tanh), plain GELU, plain gelu_new, or
 *              the clamped SwiGLU of gpt-oss's experts: gate = min(gate,
 *              limit), up = clamp(up, -limit, limit), out = (up + 1) * gate
 *              * sigmoid(1.702 gate), limit config.json's swiglu_limit (7
 *              unsaid, GptOssConfig's); it applies to routed experts
 *   router     the default routing of a mixture of experts (the config may
 *              say otherwise): softmax top-k, sigmoid with a correction bias,
 *              group-limited top-k; none: dense. sigmoid_bias: a layer with
 *              its score correction bias (FFN_EXP_PROBS_B) scores by sigmoid
 *              and picks noaux_tc's top-k (groups by their top-2 sums)
 *              where config.json names no scoring_func and no topk_method
 *              (GLM-4.5). softmax_topk: the softmax
 *              of the top-k logits alone (Granite-MoE's TopKGating: the
 *              weights of the chosen experts always sum to 1, whatever
 *              norm_topk_prob would say; verify renormalises them).
 *              sparsemixer: two experts chosen one after the other, each
 *              weighted by the softmax of the logits within a relative
 *              distance 2 x eps of the best remaining one (Phi-3.5-MoE's
 *              sparsemixer in eval mode; eps config.json's
 *              router_jitter_noise, else router_jitter; the second choice
 *              among the experts left; num_experts_per_tok and
 *              norm_topk_prob play no part);
 *              sigmoid_input: the top-k of the router's logits, each
 *              weighted by its sigmoid (not renormalised), the weight
 *              multiplying the chosen expert's input, not its output
 *              (Llama 4's Llama4Router and Llama4TextMoe);
 *              experts_per_tok: the experts a token is routed to when
 *              config.json names none (transformers' MixtralConfig: 2); 0:
 *              config.json must say
 *   resid      sequential, or parallel x + attn(n1(x)) + mlp(n2(x)) (NeoX;
 *              the config's use_parallel_residual may turn it off), or
 *              parallel under one input norm x + attn(n1(x)) + mlp(n1(x))
 *              (Phi, Cohere 2: the table has no FFN_NORM row)
 *   embed_scale  the embeddings times sqrt(hidden), rounded to the
 *              embedding's dtype (Gemma)
 *   swa_every  sliding-window layers when config.json has no layer_types:
 *              every swa_every-th layer (1-based) attends globally, the
 *              others within the sliding_window (transformers' default
 *              pattern: Gemma 2: 2, Gemma 3: 6); 0: none unless layer_types
 *              says. The window itself, the attention and final logit
 *              softcaps, query_pre_attn_scalar and a sliding layers' own
 *              rope theta are the facts' (config.json)
 *   nope_global  in a model with a sliding window, the layers that attend
 *              globally have no rotary embedding, the sliding ones keep it
 *              (EXAONE 4's hybrid NoPE, Cohere 2); without a window every
 *              layer has it (EXAONE 4; Cohere2's class would rotate none)
 *   rope_off_every  layers without a rotary embedding when config.json has
 *              neither no_rope_layers nor no_rope_layer_interval: every
 *              rope_off_every-th layer (1-based; transformers' SmolLM3
 *              default, 4); 0: every layer rotates unless config.json's
 *              no_rope_layers says otherwise (a fact, whatever the record)
 *   temp_floor, temp_scale  the layers without RoPE scale their queries
 *              by 1 + temp_scale * log(1 + floor((position + 1) /
 *              temp_floor)) unless config.json's attn_temperature_tuning is
 *              false (Llama 4's attention temperature tuning; config.json's
 *              floor_scale and attn_scale replace the record's numbers,
 *              Llama4TextConfig's defaults 8192 and 0.1); 0: none
 *   chunk_rope  without config.json's layer_types, the layers that rotate
 *              attend within chunks of attention_chunk_size tokens (Llama
 *              4's default "chunked_attention" layers; token t sees the keys
 *              from t - t % size to t); layer_types' "chunked_attention"
 *              says so for any record
 *   logit_scale  the logits times config.json's logit_scale (Cohere 2);
 *              verify refuses a config without it
 *   rope_if_said  the attention rotates only when config.json's
 *              position_embedding_type says "rope" (GraniteMoeHybrid: unsaid
 *              or null is no positions, as granite-4.0-h)
 *   ssm        the layers config.json's layer_types calls "mamba" have a
 *              Mamba-2 mixer (the SSM_* roles) in place of the attention:
 *              in_proj to z, x, B, C, dt; a causal depthwise conv1d (and
 *              bias) over x, B, C, then SiLU; dt = softplus(dt + dt_bias),
 *              A = -exp(A_log); per head the recurrence h_t = exp(dt A)
 *              h_{t-1} + dt x_t B_t^T, y_t = h_t C_t + D x_t (B and C of the
 *              head's group); y * silu(z) RMS-normalised per group of
 *              inner / n_groups channels (mamba_ssm's RMSNormGated, vLLM's
 *              Mixer2RMSNormGated, llama.cpp; transformers 5.12's torch path
 *              normalises the whole width, the same for one group) times the
 *              norm weight; out_proj
 *   tied_head  the head may be the token embedding (no lm_head tensor);
 *              false: a checkpoint without the record's OUTPUT is refused
 */
typedef enum tpc_part_model {
	TPC_PART_DECODER = 0,
	TPC_PART_ENCODER,        /* bidirectional, token types, post-add norms (BERT) */
	TPC_PART_BLOCKS_DIFFUSERS, /* no token model: diffusers transformer blocks */
	TPC_PART_BLOCKS_DALLE2,  /* no token model: DALLE2-pytorch attentions and feed-forwards */
} tpc_part_model;
typedef enum tpc_part_norm { TPC_PART_RMSNORM = 0, TPC_PART_LAYERNORM } tpc_part_norm;
typedef enum tpc_part_place {
	TPC_PART_PRE = 0, TPC_PART_POST, TPC_PART_SANDWICH, TPC_PART_AFTER_ADD
} tpc_part_place;
typedef enum tpc_part_attn { TPC_PART_GQA = 0, TPC_PART_MLA } tpc_part_attn;
typedef enum tpc_part_qk_norm {
	TPC_PART_QK_NONE = 0, TPC_PART_QK_HEAD, TPC_PART_QK_WHOLE, TPC_PART_QK_L2_ROPE
} tpc_part_qk_norm;
typedef enum tpc_part_qkv { TPC_PART_QKV_PARTS = 0, TPC_PART_QKV_PER_HEAD } tpc_part_qkv;
typedef enum tpc_part_rope { TPC_PART_ROPE_HALF = 0, TPC_PART_ROPE_INTERLEAVED } tpc_part_rope;
typedef enum tpc_part_pos { TPC_PART_POS_ROPE = 0, TPC_PART_POS_LEARNED, TPC_PART_POS_NONE } tpc_part_pos;
typedef enum tpc_part_mlp {
	TPC_PART_MLP_SILU_GLU = 0, TPC_PART_MLP_GELU_GLU, TPC_PART_MLP_GELU_TANH_GLU, TPC_PART_MLP_GELU,
	TPC_PART_MLP_GELU_NEW, TPC_PART_MLP_CLAMPED_GLU
} tpc_part_mlp;
typedef enum tpc_part_router {
	TPC_PART_ROUTER_NONE = 0, TPC_PART_ROUTER_SOFTMAX, TPC_PART_ROUTER_SIGMOID_BIAS, TPC_PART_ROUTER_GROUP,
	TPC_PART_ROUTER_SOFTMAX_TOPK, TPC_PART_ROUTER_SPARSEMIXER, TPC_PART_ROUTER_SIGMOID_INPUT
} tpc_part_router;
typedef enum tpc_part_resid { TPC_PART_SEQUENTIAL = 0, TPC_PART_PARALLEL, TPC_PART_PARALLEL_ONE_NORM } tpc_part_resid;
typedef enum tpc_part_linear { TPC_PART_LINEAR_NONE = 0, TPC_PART_LINEAR_GATED_DELTA } tpc_part_linear;

typedef struct tpc_layer_parts {
	tpc_part_model model;
	tpc_part_norm norm;
	double norm_offset;
	double norm_eps;         /* the default epsilon (above); 0: by the norm */
	tpc_part_place place;
	tpc_part_attn attn;
	bool attn_gate;          /* q_proj emits each head's query and output gate (above) */
	tpc_part_linear linear_attn; /* layer_types' linear_attention layers (above) */
	tpc_part_qk_norm qk_norm;
	bool qk_after_rope;      /* the q/k norms after the rotary embedding (above) */
	tpc_part_qkv qkv;
	tpc_part_rope rope;
	bool partial_rope;       /* a fraction of each head rotated (rotary_pct in the facts) */
	double rope_fraction;    /* that fraction when config.json gives none; 0: it must */
	bool attn_bias;          /* q/k/v (and o) may carry biases */
	tpc_part_pos pos;
	bool rope_alpha;         /* a dynamic rope's alpha scales the base (above) */
	int64_t rope_orig_top;   /* longrope's original_max_position_embeddings default (above) */
	bool longrope_alias;     /* rope_type "su" and "yarn" read as longrope (above) */
	tpc_part_mlp mlp;
	tpc_part_router router;
	int experts_per_tok;     /* the default top-k (above); 0: config.json must say */
	double router_jitter;    /* the sparsemixer's eps when config.json gives no
				    router_jitter_noise (PhimoeConfig's 0.01) */
	tpc_part_resid resid;
	bool embed_scale;
	int swa_every;           /* the default sliding-window pattern (above); 0: none */
	bool nope_global;        /* global layers without rope when the model slides (above) */
	int rope_off_every;      /* the default layers without RoPE (above); 0: none */
	double temp_floor, temp_scale; /* NoPE layers' temperature tuning (above); 0: none */
	bool chunk_rope;         /* the rotating layers chunked by default (above) */
	bool logit_scale;        /* the logits times config.json's logit_scale */
	bool rope_if_said;       /* RoPE only when position_embedding_type is "rope" (above) */
	bool ssm;                /* layer_types' "mamba" layers a Mamba-2 mixer (above) */
	bool tied_head;
} tpc_layer_parts;
struct tpc_gguf_arch;
/* A family's TensorRT-LLM checkpoint config (tensorrt_llm/models/<model>/
 * config.py). The class is LLaMAConfig unless a field below names another;
 * its "moe" member is filled when the tensor table has routed experts
 * (tpc_family_has_experts). QWenConfig and GPTConfig always build the
 * attention biases (attn_bias / bias true). */
typedef struct tpc_family_trtllm {
	const char *const *arch; /* NULL-terminated "architecture" values TensorRT-LLM
				  * writes for it besides hf_arch (GPTForCausalLM) */
	const char *qwen_type;   /* QWenConfig (models/qwen), its qwen_type */
	const char *gpt_variant; /* GPTConfig (models/gpt), its gpt_variant */
} tpc_family_trtllm;

/* A multi-token-prediction block the checkpoint holds beside the decoder
 * under a prefix of its own (Qwen3-Next, Qwen3.5: mtp.fc, mtp.layers.N.*,
 * mtp.norm, mtp.pre_fc_norm_*), which transformers does not load and
 * convert_hf_to_gguf.py writes as decoder layers past num_hidden_layers
 * (_QwenMtpMixin.filter_tensors: mtp.layers.N.X as model.layers.{layers +
 * N}.X, each of `names` as model.layers.{layers}.NAME). Its tensors are
 * classified by the record's rows under that decoder-layer name
 * (tpc_family_mtp_as_layer): verify's forward leaves those layers out as
 * GLM-4.5's next-token-prediction layer, shard splits them as the layer's
 * rows say. */
typedef struct tpc_family_mtp {
	const char *prefix;      /* "mtp.": every tensor of the block */
	const char *layers;      /* "mtp.layers.": its decoder layers, numbered from 0 */
	const char *count;       /* config.json member with their count ("mtp_num_hidden_layers");
				  * absent or 0: the checkpoint's (the highest N + 1) */
	const char *names[4][2]; /* its other tensors: {"mtp.fc.weight", "eh_proj.weight"} */
} tpc_family_mtp;

typedef struct tpc_family {
	const char *name, *desc, *plan;
	const char *const *hf_arch;      /* NULL-terminated; NULL: none */
	/* multimodal classes whose checkpoint holds this record's model as its
	 * text model (Qwen3_5ForConditionalGeneration: model.language_model.*
	 * beside model.visual.* and mtp.*), which convert_hf_to_gguf.py's
	 * TextModel reads as the text model ("language_model." taken out of
	 * the names, config.json's text_config over its top level); NULL: none */
	const char *const *hf_wrap;
	const char *const *rules;        /* NULL-terminated; NULL: none */
	const char *const *layouts;      /* the engine layouts (shard/tpc_layout.h) whose
					  * loaders were checked against this family's
					  * models: a layout writes only those */
	const char *vllm_cfg_true;       /* a config.json member vLLM's model class reads as
					  * false when absent and this family's tensors need
					  * true (HunYuan's use_qk_norm: without it vLLM's
					  * HunYuanAttention builds no q/k norms and refuses
					  * their keys): the vllm layout refuses a config.json
					  * where it is not true; NULL: none */
	bool vllm_no_lm_head;            /* vLLM's model class has no lm_head parameter: it
					  * computes the logits with model.embed_tokens and
					  * asserts tie_word_embeddings (Gemma2ForCausalLM,
					  * Gemma3ForCausalLM), so the tied head is stored once
					  * as model.embed_tokens.weight and the vllm layout
					  * refuses an untied config.json */
	bool vllm_tp_le_experts;         /* vLLM's sparse MoE block raises ValueError when
					  * tp exceeds the routed experts (Qwen2-MoE's and
					  * Qwen3-MoE's SparseMoeBlock): the vllm layout
					  * refuses such a tp */
	bool vllm_tp_le_kv_heads;        /* vLLM's attention cannot replicate kv heads: it
					  * all-gathers k and norms it with a k_norm of kv
					  * heads x head_dim, which fails when tp exceeds the
					  * kv heads (OLMo 2's Olmo2Attention._apply_qk_norm):
					  * the vllm layout refuses such a tp */
	const tpc_tensor_row *tensors;   /* ends with role TPC_ROLE_NONE; NULL: none */
	const struct tpc_gguf_arch *gguf; /* lib/tpc_family_gguf.h; NULL: none */
	bool conv1d;                     /* HF linear weights [in, out] (GPT-2) */
	bool has_parts;                  /* verify runs block and model checks from `parts` */
	tpc_layer_parts parts;
	tpc_family_trtllm trtllm;        /* TensorRT-LLM's config class for it */
	/* What transformers keeps in float32 when it loads the model in a
	 * narrower dtype, by role, each list ending with TPC_ROLE_NONE (NULL:
	 * none): f32_roles under f16 and bf16 (its _keep_in_fp32_modules_strict,
	 * or a module built with dtype=torch.float32), f32_roles_f16 under f16
	 * only (_keep_in_fp32_modules). A cast to that dtype writes them in f32
	 * (tpc_family_keep_f32), as a model so loaded saves them. */
	const tpc_role *f32_roles, *f32_roles_f16;
	const tpc_family_mtp *mtp;       /* NULL: none */
} tpc_family;

size_t tpc_family_count(void);
const tpc_family *tpc_family_at(size_t i);           /* NULL past the end */
const tpc_family *tpc_family_find(const char *name); /* NULL if unknown */
/* The record whose hf_wrap lists `arch` (a multimodal class holding its
 * text model), or NULL */
const tpc_family *tpc_family_by_wrap(const char *arch);
/* A multimodal checkpoint's text model as convert_hf_to_gguf.py's
 * TextModel.filter_tensors reads it: "language_model." taken out of every
 * name that has it (those tensors kept: the GGUF writer refuses by name one
 * the record has no row for), every other tensor the record's table does
 * not classify left out (the vision tower model.visual.*) but the record's
 * multi-token-prediction block (tpc_family_mtp: mtp.*). *nleft
 * gets how many were left out, `groups` their groups ("model.visual.*,
 * mtp.*": a name's first two parts under "model.", else its first; cut to
 * fit n). -1 with e set on a name clash or out of memory. */
struct tpc_ckpt;
int tpc_family_text_model(const tpc_family *f, struct tpc_ckpt *ck, size_t *nleft, char *groups, size_t n, tpc_err *e);
/* A tensor of f's multi-token-prediction block (tpc_family_mtp) under the
 * decoder-layer name convert_hf_to_gguf.py reads it as, the decoder having
 * `layers` layers: "mtp.layers.N.X" as "model.layers.{layers + N}.X", each
 * of the block's names as "model.layers.{layers}.NAME"; into buf. false
 * when f has no block, name is not one of its tensors or buf is short. */
bool tpc_family_mtp_as_layer(const tpc_family *f, const char *name, int64_t layers, char *buf, size_t n);
/* The reverse: a decoder-layer name "model.layers.L.X" with L >= layers back
 * to the block's name; false when it is not one. */
bool tpc_family_mtp_name(const tpc_family *f, const char *name, int64_t layers, char *buf, size_t n);
/* The block's layers in checkpoint ck: the highest N of its "mtp.layers.N."
 * tensors + 1 (_QwenMtpMixin's opt_num_mtp_layers); 0 when none */
int64_t tpc_family_mtp_count(const tpc_family *f, const struct tpc_ckpt *ck);
/* The family whose hf_arch lists `arch` (config.json's architectures[0]);
 * the first such record, NULL if none. */
const tpc_family *tpc_family_by_arch(const char *arch);
/* The family a TensorRT-LLM config.json's "architecture" names: one whose
 * trtllm.arch lists it, else tpc_family_by_arch. */
const tpc_family *tpc_family_by_trtllm_arch(const char *arch);

/* The family of a config.json without architectures, by its model_type: the
 * record whose GGUF column names that model_type (llama4_text ->
 * Llama4ForCausalLM), else the record one of whose hf_arch has that stem,
 * case and '_' aside ("qwen2_moe" -> Qwen2MoeForCausalLM, "gpt2" ->
 * GPT2LMHeadModel); *arch (may be NULL) receives that hf_arch. NULL if none. */
const tpc_family *tpc_family_by_model_type(const char *model_type, const char **arch);
/* Does family f's plan split a model of architecture `arch`: f lists it, or
 * the family that lists it has f's plan under another name (the llama plan
 * of mistral, qwen2, qwen3, gemma, phi3)? */
bool tpc_family_fits(const tpc_family *f, const char *arch);

/* Whether a NULL-terminated list (hf_arch, rules, layouts) holds `s`. */
bool tpc_family_lists(const char *const *list, const char *s);

const char *tpc_role_name(tpc_role r);
const char *tpc_eco_name(tpc_eco e);

/* The row of `f` with role `r`; NULL if the family has none. */
const tpc_tensor_row *tpc_family_row(const tpc_family *f, tpc_role r);

/* Match a tensor name against a name pattern of the table ("{L}", "{E}"
 * take decimal numbers; a "#K" suffix is ignored). `weight_or_bias`: also
 * match the bias name. Fills *layer and *expert (-1 where the pattern has
 * none) and *bias. */
bool tpc_family_match(const char *pattern, const char *name, bool weight_or_bias, int64_t *layer,
		      int64_t *expert, bool *bias);

/* The row of `f` a tensor name in ecosystem `eco` belongs to (weights and
 * biases), with its layer and expert; NULL if none. */
const tpc_tensor_row *tpc_family_classify(const tpc_family *f, tpc_eco eco, const char *name, int64_t *layer,
					  int64_t *expert, bool *bias);

/* Write a row's name in ecosystem `eco` for a layer and expert into buf
 * ("#K" dropped; *part set to K, or -1 when the name is not fused); the
 * bias name with `bias`. Returns false when the ecosystem has no name for
 * it or buf is too small. */
bool tpc_family_name(const tpc_tensor_row *row, tpc_eco eco, int64_t layer, int64_t expert, bool bias,
		     char *buf, size_t n, int *part);

/* Whether every row of the family's table has a name in `eco`. */
bool tpc_family_named_in(const tpc_family *f, tpc_eco eco);

/* Whether row's tensor in ecosystem eco stacks the routed experts along dim
 * 0: an expert row (FFN_GATE_EXP, FFN_UP_EXP, FFN_DOWN_EXP) whose name there
 * has no "{E}" (GGUF's ffn_*_exps, vLLM's w13_weight, Granite-MoE's Hugging
 * Face input_linear). */
bool tpc_family_stacked(const tpc_tensor_row *row, tpc_eco eco);

/* The rows of f that are parts of the tensor row's name in eco is part of
 * (the same name up to "#K"), in K order, into out[0 .. n); their count, 0
 * when row's name there is not fused ("#K"), -1 when the parts are not 0 ..
 * count-1 each once or more than n. */
int tpc_family_parts(const tpc_family *f, const tpc_tensor_row *row, tpc_eco eco, const tpc_tensor_row **out,
		     int n);

/* The rows of f whose hf_fused is transformers' parameter `name` (a layer's
 * name: "{L}" matched, its number in *layer), in K order, into out[0 .. n):
 * their count; 0 when no row names it, -1 when the parts are not 0 ..
 * count-1 each once or more than n. */
int tpc_family_fused_rows(const tpc_family *f, const char *name, int64_t *layer, const tpc_tensor_row **out, int n);

/* Whether the family's table has routed experts (FFN_*_EXP rows). */
bool tpc_family_has_experts(const tpc_family *f);
/* Whether transformers keeps the tensor named `hf_name` (a Hugging Face
 * name) of f's models in float32 when it loads them in `to` (f16 or bf16):
 * f32_roles and f32_roles_f16 above. */
bool tpc_family_keeps_f32(const tpc_family *f, const char *hf_name, tpc_dtype to);
/* A cast of ck's tensors (each narrowed from its source's dtype to f16 or
 * bf16) undone to f32 for those tpc_family_keeps_f32 names, flagged
 * TPC_TF_KEPT_F32; how many. */
struct tpc_ckpt;
size_t tpc_family_keep_f32(const tpc_family *f, struct tpc_ckpt *ck);

/* The row of `name` (ecosystem eco) for a set no record was named for:
 * from the table of `f` when it has the row, else of the first record
 * whose layouts list `layout` and whose table has it (*of: that record;
 * f, layout and of may be NULL). How a layout reads a set without a
 * manifest, and the rows a set's own family leaves out. */
const tpc_tensor_row *tpc_family_classify_for(const tpc_family *f, const char *layout, tpc_eco eco,
					     const char *name, int64_t *layer, int64_t *expert, bool *bias,
					     const tpc_family **of);

#endif
