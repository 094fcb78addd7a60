/*
 * tpc_family_gguf.h - the GGUF column of the family records: what
 * convert_hf_to_gguf.py (llama.cpp 0.7) does differently for each family,
 * as data (lib/tpc_family_gguf.c), so formats/gguf/ holds code only and a
 * family that reuses known transforms is one more record here.
 *
 * A family's record (lib/tpc_family.h) points at its tpc_gguf_arch (NULL:
 * no GGUF architecture). It says:
 *   arch       general.architecture ("llama" for Llama, Mistral and Mixtral)
 *   hf_arch    the config.json architectures the reference writes as this
 *              record (NULL-terminated; [0] is written back into config.json
 *              when a GGUF is read into Hugging Face form)
 *   kv         the {arch}.* and general.file_type keys, each a rule over
 *              config.json members (tpc_gguf_kv_rule), in the reference's
 *              order; ends with TPC_KH_END
 *   tensors    per-tensor transforms (the names are the TPC_ECO_GGUF column
 *              of the record's tensor table; GPT-2's Conv1D transpose is the
 *              record's conv1d): permute_qk, norm_plus_1, no_lm_head,
 *              neox_qkv, experts (the order the stacks are written in),
 *              head_split (one tensor written as two, split per head),
 *              head_tile (value heads grouped by key head written tiled),
 *              mxfp4_blocks (MXFP4 blocks repacked, not dequantized)
 *   head_dim   what transformers' config class fills in when config.json has
 *              no head_dim (0: none, -1: hidden_size / num_attention_heads)
 *   tokenizer  vocab (which set_vocab the reference runs), the
 *              tokenizer_class written into tokenizer_config.json for a
 *              SentencePiece and for a BPE vocabulary, add_space_prefix,
 *              spm_json (the pipeline of the tokenizer.json written beside
 *              a SentencePiece tokenizer.model: that class's in
 *              transformers 5.12), special_text (special ids set by an added
 *              token's text)
 *   config     what rebuilding config.json from the GGUF keys needs: hf_cfg
 *              (member <- key), bias_flags (member <- whether a role's bias
 *              is there), rope_pct (the member a partial rotary
 *              dimension is written as), experts_member, model_type,
 *              when_key (which of two records of one arch a GGUF is read as)
 *
 * GGUF's own vocabulary (tokenizer.ggml.model "llama"/"gpt2", pre-tokenizer
 * names) is not a family and stays with the GGUF code.
 */
#ifndef TPC_FAMILY_GGUF_H
#define TPC_FAMILY_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_family.h"
#include "tpc_ggml.h"

/* How one key gets its value (TextModel.set_gguf_parameters and the
 * families' own). `names`: config.json members, '|'-separated, the first
 * present wins (find_hparam). */
typedef enum tpc_gguf_kh {
	TPC_KH_END = 0,
	TPC_KH_FIND,         /* the first of names present, else (or null) no key; a BOOL
				key takes a true or false member */
	TPC_KH_REQ,          /* the first of names, else refused */
	TPC_KH_TIMES4,       /* 4 x names (GPT-2's feed_forward_length) */
	TPC_KH_DIV_IF,       /* "A/B?C": A's value integer-divided by B's when config.json's C
				is a number above 0 and A and B are there (not null), else no
				key (Ernie4_5MoeModel's expert_shared_feed_forward_length:
				intermediate_size // num_key_value_heads with shared experts) */
	TPC_KH_OR_HEADS,     /* names, else num_attention_heads (Gemma's head_count_kv) */
	TPC_KH_OR_ZERO,      /* names when a number, else 0 (Phi-3's sliding_window) */
	TPC_KH_OR_TRUE,      /* a bool, true when absent (GPT-NeoX's parallel residual) */
	TPC_KH_FALSE_ONLY,   /* a bool written only when the member is false (is_causal) */
	TPC_KH_HEAD_DIM,     /* key_length and value_length from head_dim when present */
	TPC_KH_ROPE_DIM,     /* head_dim, else hidden_size / num_attention_heads */
	/* The ROPE_PCT rules: a rotary dimension from a fraction, each as its
	 * converter computes it; the fraction config.json's, else the number
	 * `names` holds (the config class's default the reference reads through
	 * AutoConfig: PhiConfig's and Glm4Config's "0.5"), else 1; refused when
	 * not a number or outside (0, 1] */
	TPC_KH_ROPE_PCT_HD,  /* int(rotary_pct * (hidden / heads)), rotary_pct required (GPT-NeoX,
				Cohere 2) */
	TPC_KH_ROPE_PCT_EMB, /* int(partial_rotary_factor * hidden) // heads (Phi-3, Phi-2) */
	TPC_KH_ROPE_PCT_HEAD, /* int(head_dim (else hidden / heads) * partial_rotary_factor)
			       * (Glm4Model's rope.dimension_count) */
	TPC_KH_ROPE_SCALING, /* rope.scaling.* from rope_parameters.rope_type */
	TPC_KH_ROPE_THETA,   /* rope.freq_base from rope_parameters.rope_theta */
	TPC_KH_ROPE_THETA_SWA, /* rope.freq_base_swa: rope_parameters.sliding_attention.rope_theta,
				* else (no per-layer-type rope parameters) the first of names
				* present, as TextModel.__init__ mirrors a local theta there; no
				* key when neither. A record with this rule takes per-layer-type
				* rope parameters (full_attention / sliding_attention): the
				* scaling and freq_base from full_attention, as TextModel's
				* set_gguf_parameters; without it they are refused */
	TPC_KH_ROPE_ORIG,    /* rope_parameters' original_max_position_embeddings, required */
	TPC_KH_CONST,        /* the number `names` holds, whatever config.json says (OlmoeModel's
				rms epsilon; a bool: "0" false), or for a string key the string
				(Cohere2Model's rope.scaling.type "none"); a key written before is
				overwritten in its place, as GGUFWriter.add_key_value does */
	TPC_KH_OR_ONE,       /* a number: names' value, else 1.0, the config class's default
				(the reference reads AutoConfig's to_dict(): GraniteConfig's
				multipliers); 0 writes no key, as the reference's `if v :=` */
	TPC_KH_NONZERO,      /* a number: names' value when there and not 0, else no key (absent,
				null or 0: the reference's `if v := hparams.get(m)`, Gemma3Model's
				final_logit_softcapping) */
	TPC_KH_REFUSE,       /* a member the reference acts on that tpconv does not yet */
	TPC_KH_FILE_TYPE,    /* general.file_type */
	TPC_KH_SWA_PATTERN,  /* with a sliding_window, a bool per layer: true for layer_types'
			      * "sliding_attention", else every layer but each period-th (1-based);
			      * names "N" (Olmo2Model.set_gguf_parameters: "4"), or "MEMBERS|N":
			      * the first config.json member present, else N (Exaone4Config's
			      * sliding_window_pattern, default 4); no key without a window (or
			      * a null one) */
	TPC_KH_ROPE_OFF_EVERY, /* no key: the layers config.json leaves without RoPE
				* (tpc_facts_rope_off, the record's default with it) must be every
				* names-th (1-based), the step the GGUF's reader assumes (llama.cpp's
				* n_no_rope_layer_step, fixed for smollm3: "4"); else refused */
	TPC_KH_NO_SWA,       /* no key: refused when config.json makes a layer slide (layer_types'
			      * "sliding_attention", or use_sliding_window without layer_types):
			      * the GGUF's reader knows no window for the architecture */
	TPC_KH_SWA_EVERY,    /* no key: the layers config.json makes slide, read as SWA_PATTERN
			      * reads them ("MEMBERS|N": layer_types, else the member's period,
			      * else N), must be all but every N-th (1-based), the pattern the
			      * GGUF's reader assumes (llama.cpp's cohere2:
			      * "sliding_window_pattern|4", Cohere2Config's default too); else
			      * refused naming the layer */
	TPC_KH_SUM,          /* the sum of the '+'-separated members of names, each required
			      * (DeepseekV2Model's key_length: kv_lora_rank + qk_rope_head_dim) */
	TPC_KH_GATING_FUNC,  /* the first of names present, a string: softmax 1, sigmoid 2,
			      * sqrtsoftplus 4 (gguf's ExpertGatingFuncType); another refused;
			      * absent or null: no key */
	TPC_KH_TRUE_ONLY,    /* a bool written (true) only when the member is true, as the
			      * reference's `if (v := hparams.get(m)) is not None and v`; refused
			      * when absent (the config class's default would decide) */
	TPC_KH_ROPE_TIMES,   /* names "PARAM*K": the rope parameter PARAM (rope_parameters, else
			      * rope_scaling) times K, when present (DeepseekV2Model's
			      * rope.scaling.yarn_log_multiplier: 0.1 x mscale_all_dim) */
	TPC_KH_ASSUMED,      /* no key: names "MEMBER=VALUE" (a number, true or false), what the
			      * GGUF's reader assumes for the architecture where no key says it;
			      * config.json's MEMBER, when there and not null, must be VALUE, else
			      * refused (llama.cpp's llama4: attention_chunk_size 8192,
			      * floor_scale 8192, attn_scale 0.1) */
	TPC_KH_PRODUCT,      /* "A*B": the first of A's '|' names present times the first of B's,
			      * both required (Mamba2Model's ssm.inner_size: expand x d_model;
			      * Qwen3NextModel's: linear_value_head_dim x linear_num_value_heads) */
	TPC_KH_LAYERS_OF,    /* "MEMBERS=TYPE": an INT32 array, an entry per layer_types entry: the
			      * first of MEMBERS present where the layer is TYPE, else 0
			      * (GraniteHybridModel's head_count_kv: the attention layers' kv
			      * heads, 0 for the Mamba-2 ones); refused without layer_types or
			      * when every layer is TYPE (the reference then writes another
			      * architecture) */
	TPC_KH_LIST_SAME,    /* the member (required): a list, a number a layer, all the same:
			      * the first (HunYuanMoEModel's moe_topk, moe_intermediate_size,
			      * num_shared_expert, which it asserts so); a number or
			      * differing entries refused */
	TPC_KH_ROPE_ALPHA,   /* the record's rope_alpha (tpc_gguf_rope_alpha): when the rope
			      * parameters' rope_type is its type, rope.freq_base scaled by
			      * alpha, rope.scaling.type "none", factor 1, the original context
			      * and context_length its ctx (each written key in its place when
			      * written before, as GGUFWriter.add_key_value does); the
			      * reference's asserts refused by name; else no key */
	TPC_KH_MULTIPLE_OF,  /* "MEMBER%N": no key; the member (required) must be a multiple of N,
			      * else refused (Mamba2Model.set_vocab pads the vocabulary to a
			      * multiple of 8 with [PAD] tokens, which tpconv does not write) */
	TPC_KH_LAYER_IS,     /* names "TYPE|MEMBERS|N": a bool per layer, true where layer_types
			      * says TYPE; without layer_types (the config class computes it),
			      * true but for each period-th layer (1-based), the period the first
			      * of MEMBERS present, else N (Qwen3NextModel's
			      * attention.recurrent_layers: "linear_attention|full_attention_interval|4");
			      * then false for each multi-token-prediction layer (tpc_family_mtp) */
	TPC_KH_PLUS_MTP,     /* the first of names (required) plus the record's multi-token-
			      * prediction layers (tpc_family_mtp: its count member, else the
			      * checkpoint's; _QwenMtpMixin's block_count; the GGUF part's
			      * mtp_count member: Glm4MoeModel's); none under --no-mtp */
	TPC_KH_MTP,          /* those layers, when there are any; else no key
			      * (_QwenMtpMixin's nextn_predict_layers); with names, the first
			      * of them present (even 0; Glm4MoeModel's num_nextn_predict_layers);
			      * no key under --no-mtp either way */
	TPC_KH_ROPE_SECTIONS, /* an INT32 array: the rope parameters' mrope_section, padded with 0 to
			       * 4 entries (its first 4), written where TextModel writes it, after
			       * the rope scaling keys (the ROPE_SCALING rule, which refuses an
			       * mrope_section for a record without this rule: llama.cpp reads its
			       * sections only for the architectures that say so); at this rule's
			       * own place, when config.json has none, the default names holds
			       * ("11,11,10,0": _Qwen35MRopeMixin's; NULL: no key) */
} tpc_gguf_kh;

typedef struct tpc_gguf_kv_rule {
	const char *key; /* after "{arch}."; a "general." or "tokenizer." key as is (Phi2Model
			  * writes tokenizer.ggml.add_bos_token with its own keys) */
	int type;        /* tpc_gguf_vt */
	tpc_gguf_kh how;
	const char *names;
} tpc_gguf_kv_rule;

/* Which of the reference's set_vocab a family runs (gguf_vocab.c) */
typedef enum tpc_gguf_vocab_kind {
	TPC_GGUF_VOCAB_NONE = 0,  /* not converted */
	TPC_GGUF_VOCAB_LLAMA,     /* LlamaModel: SentencePiece, else a BPE; add_prefix_space; CodeLlama's ids */
	TPC_GGUF_VOCAB_GEMMA,     /* GemmaModel: SentencePiece, its FIM ids, no space prefix */
	TPC_GGUF_VOCAB_PHI3,      /* Phi3MiniModel: a BPE when tokenizer_class says GPT2Tokenizer */
	TPC_GGUF_VOCAB_SPM_OR_BPE,/* Qwen2Model: SentencePiece when tokenizer.model is there, else BPE */
	TPC_GGUF_VOCAB_BPE,       /* TextModel._set_vocab_gpt2 */
	TPC_GGUF_VOCAB_SPM_NOSPACE, /* Gemma2Model: SentencePiece, add_space_prefix false */
	TPC_GGUF_VOCAB_SPM_NOSPACE_OR_BPE, /* Gemma3Model: that when tokenizer.model is there, else BPE */
	TPC_GGUF_VOCAB_SPM_CFG_SPACE, /* Ernie4_5Model: SentencePiece, then add_space_prefix from
				       * tokenizer_config.json's add_prefix_space when it has one */
	TPC_GGUF_VOCAB_HY_TIKTOKEN, /* HunYuanMoEModel: hy.tiktoken's ranks, merges rebuilt
				     * from them, tokenization_hy.py's special tokens after
				     * the last rank up to vocab_size; the record's hy part
				     * (pre "hunyuan", bos 127959) */
	TPC_GGUF_VOCAB_HY_TIKTOKEN_OR_BPE, /* HunYuanModel: _set_vocab_gpt2's BPE when
					    * tokenizer.json is there (without a pad id
					    * when config.json's pad_token_id is negative),
					    * else that tiktoken vocabulary; then the hy
					    * part's eos and eot either way */
} tpc_gguf_vocab_kind;

/* What the reference writes around a HunYuan vocabulary (conversion/hunyuan.py's
 * set_vocab, TPC_GGUF_VOCAB_HY_TIKTOKEN*): the pre-tokenizer's name, a bos id
 * written over SpecialVocab's after a hy.tiktoken vocabulary, then (either
 * vocabulary) an eos id from a config.json member and an eot id from
 * generation_config.json. Read back (gguf_hf.c, gguf_tok.c): hy.tiktoken
 * when tokenizer.ggml.pre is `pre`; the member from the GGUF's eos id (null
 * without one), generation_config.json's eos_token_id [eot, eos]. */
typedef struct tpc_gguf_hy_vocab {
	const char *pre;        /* tokenizer.ggml.pre of a hy.tiktoken vocabulary (llama.cpp's
				 * name for the model's tokenizer) */
	int64_t bos;            /* bos_token_id written after a hy.tiktoken vocabulary; 0: none */
	int64_t bos_hidden;     /* ... only where config.json's hidden_size is this; 0: always */
	const char *eos_member; /* config.json's member whose id is written as eos_token_id
				 * (null there: none); NULL: none */
	int64_t eos_default;    /* its value where config.json lacks it (the config class's
				 * default: the reference reads hparams through AutoConfig) */
	bool eot_gen;           /* generation_config.json's eos_token_id, a list of two or
				 * more: its first as eot_token_id */
} tpc_gguf_hy_vocab;

/* The tokenizer.json transformers 5.12 builds from a SentencePiece BPE
 * (its SentencePieceExtractor's vocab and merges, then the tokenizer
 * class's own pipeline), which tpconv writes beside tokenizer.model when a
 * GGUF is read into Hugging Face form (gguf_tok.c) */
typedef enum tpc_gguf_spm_json {
	TPC_GGUF_SPM_JSON_LLAMA = 0, /* LlamaTokenizer: Metaspace, no normalizer, BPE without unk_token */
	TPC_GGUF_SPM_JSON_GEMMA,     /* GemmaTokenizer: Replace(' ', U+2581), Split(' '), BPE unk_token */
} tpc_gguf_spm_json;

/* A special token id the reference sets by an added token's text once
 * SpecialVocab has loaded the files (Glm4Model.set_vocab's
 * _set_special_token(type, tokenizer.get_added_vocab()[token])): a type
 * the files set keeps their id; a token tokenizer.json's added_tokens lack
 * is refused (the reference fails). BPE vocabularies (_set_vocab_gpt2's). */
typedef struct tpc_gguf_special_text {
	const char *type, *token; /* type NULL: none */
} tpc_gguf_special_text;

/* One config.json member rebuilt from a GGUF key (gguf_hf.c) */
typedef enum tpc_gguf_ck {
	TPC_CK_INT,
	TPC_CK_INT_NZ, /* left out when 0 */
	TPC_CK_INT_OR_NULL, /* null when the GGUF lacks the key (a config class whose default
			     * is not none: Exaone4Config's sliding_window 4096); a member an
			     * earlier row wrote is kept */
	TPC_CK_FLOAT,
	TPC_CK_BOOL,
	TPC_CK_LAYER_TYPES, /* a bool array: layer_types, "sliding_attention" where true,
			     * else "full_attention" */
	TPC_CK_LAYERS,      /* the model's layers: the key's value less {arch}.nextn_predict_layers,
			     * the next-token-prediction layers a block_count counts besides
			     * (Glm4MoeModel) */
	TPC_CK_INT_DIFF,    /* key "K1-K2": the first key's integer less the second's
			     * (DeepSeek's qk_nope_head_dim: key_length_mla - rope.dimension_count) */
	TPC_CK_BOOL_OR_FALSE, /* a bool key, false when the GGUF lacks it (the reference writes
			       * it only when true; the config class's default is true) */
	TPC_CK_GATING_FUNC, /* expert_gating_func back to its name: 1 softmax, 2 sigmoid,
			     * 4 sqrtsoftplus */
	TPC_CK_ROPE_DIV,    /* key "KEY/K": a member of the rebuilt rope scaling (yarn), the
			     * key's value divided by K (DeepSeek's mscale_all_dim from
			     * yarn_log_multiplier / 0.1) */
	TPC_CK_LAYER_TYPES_LINEAR, /* a bool array: layer_types, "linear_attention" where true,
				    * else "full_attention" (attention.recurrent_layers) */
	TPC_CK_CONST,       /* key: JSON text, the member's value whatever the GGUF holds: what
			     * the GGUF's reader computes with for the architecture, which no
			     * key says, where the config class's default would say another
			     * model (llama.cpp's qwen3moe renormalises the top-k routing
			     * weights always: norm_topk_prob "true"); a member an earlier
			     * row or the GGUF's token ids wrote is kept */
	TPC_CK_ARR_NZ,      /* an integer array key (one entry per layer): the value of its
			     * nonzero entries, which must all be equal (GraniteHybridModel's
			     * head_count_kv: 0 for a Mamba-2 layer) */
	TPC_CK_LAYER_KINDS, /* key "KEY=A/B": layer_types from an integer array key, "A" where
			     * the entry is nonzero, else "B" (head_count_kv's attention and
			     * mamba layers) */
	TPC_CK_INT_QUOT,    /* key "K1/K2": the first key's integer divided by the second's,
			     * exactly (mamba_expand: ssm.inner_size / embedding_length;
			     * Qwen3-Next's linear_value_head_dim: ssm.inner_size /
			     * ssm.time_step_rank) */
	TPC_CK_LAYER_LIST,  /* an integer key written as a list of that value a layer
			     * (block_count entries; HunYuan's moe_topk,
			     * moe_intermediate_size, num_shared_expert, which the reference
			     * reads as lists); required */
	TPC_CK_ROPE_SECTIONS, /* an integer array key: member written into rope_parameters (with
			       * rope_type "default" unless there) when the key stands where
			       * TextModel writes config.json's (before general.file_type); after
			       * it, the record's default (TPC_KH_ROPE_SECTIONS): no member */
} tpc_gguf_ck;

typedef struct tpc_gguf_cfg_rule {
	const char *member, *key; /* config.json member, GGUF key after "{arch}." */
	tpc_gguf_ck kind;
} tpc_gguf_cfg_rule;

/* A config.json member rebuilt from the biases a GGUF holds (gguf_hf.c): true
 * when layer 0's tensor of `role` has its bias, else false (a config class
 * whose default would otherwise add or drop biases: SeedOssConfig's
 * attention_bias, default true, and attention_out_bias, default false;
 * Glm4Config's attention_bias, default true; Ernie4_5Config's use_bias, one
 * flag for every projection, default false: the q projection's says) */
typedef struct tpc_gguf_bias_flag {
	const char *member;
	tpc_role role;
} tpc_gguf_bias_flag;

/* A tensor the reference writes as two, split per head
 * (DeepseekV2Model.modify_tensors' kv_b_proj [heads * (nope + v), rank]:
 * attn_k_b [heads, rank, nope], each head's nope rows transposed, and
 * attn_v_b [heads, v, rank]; tpc_tensor_split_heads), read back joined
 * (tpc_tensor_join_heads). Its row's GGUF name in the tensor table is NULL:
 * llama.cpp has no one tensor for it. */
typedef struct tpc_gguf_head_split {
	tpc_role role;       /* the row split; 0: none */
	const char *name[2]; /* the two GGUF names ("blk.{L}." templates) */
	const char *heads;   /* config.json member: the heads (the reference reads num_key_value_heads) */
	const char *rows[2]; /* config.json members: each head's rows of part 0 and of part 1 */
	bool transpose0;     /* part 0 transposed per head */
} tpc_gguf_head_split;

/* A tensor the reference writes as two, its rows regrouped
 * (Qwen3NextModel.modify_tensors' in_proj_qkvz: `groups` groups of parts
 * [q k v z], each part's rows of every group gathered, the first `first`
 * parts into tensor 0 (attn_qkv: all q, all k, all v), the rest into tensor
 * 1 (attn_gate: all z)), read back regrouped (views: no byte copied). Its
 * row's GGUF name in the tensor table is NULL. */
typedef struct tpc_gguf_group_split {
	tpc_role role;          /* the row; 0: none */
	const char *name[2];    /* the two GGUF names ("blk.{L}." templates) */
	const char *groups;     /* config.json member: the groups */
	const char *rows[4];    /* each part's rows over all groups: config.json members
				 * multiplied ("a*b"); NULL ends the list */
	int first;              /* the parts in tensor 0 */
	const char *key_groups; /* the same read back from the GGUF's {arch}.* keys */
	const char *key_rows[4];
} tpc_gguf_group_split;

/* A role whose heads the reference reorders from grouped to tiled
 * (_LinearAttentionVReorderBase.modify_tensors, Qwen3.5's gated DeltaNet:
 * `heads` value heads stored grouped by key head, heads / groups to each of
 * `groups`; llama.cpp broadcasts them tiled, the first of every group, then
 * the second ...): along `dim`, the tensor's last `span` entries (config.json
 * members multiplied; key_span the same from the GGUF's {arch}.* keys) as
 * groups x (heads / groups) heads of span / heads entries each, reordered
 * (tpc_tensor_tile_groups) before any other transform of the role (after the
 * squeeze of a depthwise convolution), and back when read. Views. */
typedef struct tpc_gguf_tile_row {
	tpc_role role;              /* 0: none (ends the list) */
	int dim;                    /* 0: rows; 1: columns (out_proj's inputs) */
	const char *span, *key_span;
} tpc_gguf_tile_row;

typedef struct tpc_gguf_head_tile {
	const char *groups, *heads;         /* config.json members ('|': the first present) */
	const char *key_groups, *key_heads; /* the same read back: {arch}.* keys */
	tpc_gguf_tile_row rows[8];
} tpc_gguf_head_tile;

/* An NTK-aware alpha rope the reference writes as a plain one
 * (HunYuanMoEModel.set_gguf_parameters, conversion/hunyuan.py: rope_type
 * "dynamic" with alpha, Hunyuan-A13B's): rope.freq_base = theta * alpha ^
 * (dim / (dim - 2)), dim hidden_size // num_attention_heads; rope scaling
 * "none", factor 1; rope.scaling.original_context_length and context_length
 * `ctx` whatever config.json says. The reference asserts alpha, theta, dim
 * and max_position_embeddings (each 0 here: not asserted); tpconv refuses
 * what it asserts, by name. Read back (gguf_hf.c): a GGUF whose freq_base is
 * that of `alpha` and `theta` (the only ones the reference writes) gets the
 * rope parameters back, max_position_embeddings `ctx`; another freq_base
 * under rope scaling "none" with that context is refused (alpha is not in
 * the GGUF). */
typedef struct tpc_gguf_rope_alpha {
	const char *rope_type;  /* the rope type it applies to; NULL: none */
	double alpha;           /* alpha when the rope parameters have none; the only one taken */
	bool any_alpha;         /* any alpha taken (HunYuanModel asserts none), and none refused: its
				 * default (alpha above) is not transformers', whose rope without
				 * one is rope_theta's; read back: the shortest alpha whose
				 * freq_base is the GGUF's */
	double theta;           /* rope_theta when they have none; the only one taken */
	const char *dim_member; /* config.json's head dim (HunYuanModel's head_dim; attention.key_length
				 * read back); NULL: hidden_size / num_attention_heads */
	int64_t dim;            /* the only head dim taken; 0: any */
	int64_t ctx_from[2];    /* the max_position_embeddings taken */
	int64_t ctx;            /* the context written */
} tpc_gguf_rope_alpha;

typedef struct tpc_gguf_arch {
	const char *arch;
	const char *const *hf_arch;
	const tpc_gguf_kv_rule *kv;
	bool permute_qk;   /* LlamaModel.permute of q_proj / k_proj (weight, bias) */
	bool norm_plus_1;  /* Gemma: every *norm.weight + 1 */
	tpc_role norm_plain; /* with norm_plus_1: a norm role written as it is (Qwen3-Next's
			      * gated linear_attn.norm, not zero-centred); 0: none */
	tpc_role neg_exp;  /* a role written as -exp(x), as torch's float32 exp computes it
			    * (Qwen3-Next's A_log as ssm_a), read back as the float whose
			    * -exp is the value; 0: none */
	tpc_role squeeze;  /* a role whose dim 1 of size 1 is dropped (a depthwise convolution
			    * [channels, 1, kernel]: Qwen3-Next's conv1d.weight as ssm_conv1d
			    * [channels, kernel]), put back when read; 0: none */
	bool no_lm_head;   /* Gemma: lm_head.weight skipped */
	bool neox_qkv;     /* GPT-NeoX: qkv rows [heads, 3, hd] -> [3, heads, hd] */
	bool rope_freqs;   /* LlamaModel.generate_extra_tensors: a llama3 rope writes rope_freqs.weight */
	bool rope_factors; /* Phi3MiniModel: a longrope's long/short factors as rope_factors_long/_short */
	bool mamba2;       /* Mamba2Model.modify_tensors: the conv1d weight squeezed ([C, 1, K] ->
			    * [C, K]), A_log written as A = -exp(A_log) and D, both [heads, 1],
			    * the gated norm's weight [groups, inner / groups] (groups: ssm_groups) */
	const char *ssm_groups; /* config.json members of the Mamba-2 group count ('|': the first) */
	const char *model_type; /* config.json's model_type read back; NULL: the record's name, '-' as
				 * '_' (a record named apart from transformers': Granite 4 without
				 * experts; Llama 4 text's llama4_text, transformers' llama4 being the
				 * multimodal Llama4Config) */
	tpc_role experts[3]; /* a layer's stacked experts in the order written; 0: none */
	bool mxfp4_blocks; /* with quantization_config.quant_method "mxfp4": the checkpoint's
			    * X_blocks U8 [E, R, I / 32, 16] and X_scales [E, R, I / 32] (OCP MX
			    * E2M1 pairs and E8M0 scales, rows whole) written as GGUF MXFP4 [E, R,
			    * I], repacked (tpc_ggml_mxfp4_from_pairs), never dequantized, first
			    * of all tensors and whatever the outtype; a fused X (the record's
			    * "#K" row) split into its parts as its values would be (the rows
			    * every n-th when interleaved); general.file_type MOSTLY_MXFP4_MOE
			    * (38) where the outtype is f32, f16 or bf16 (GptOssModel.dequant_model,
			    * generate_extra_tensors, repack_mxfp4; base.py's prepare_metadata) */
	tpc_gguf_head_split head_split; /* a tensor written as two, split per head */
	tpc_gguf_group_split group_split; /* a tensor written as two, its grouped rows gathered */
	tpc_gguf_head_tile head_tile; /* roles whose heads are written tiled, not grouped */
	const char *past_layers; /* the Hugging Face prefix of the decoder layers ("model.layers."):
				  * a tensor under it whose layer number is past config.json's
				  * layer count is left out, as the reference does (DeepseekV2Model's
				  * skip_mtp: DeepSeek-V3's multi-token-prediction layer); NULL: such
				  * a tensor is refused */
	const char *mtp_count; /* config.json member counting the multi-token-prediction layers
				* the checkpoint holds past its decoder layers, under their names
				* (Glm4MoeModel: num_nextn_predict_layers; absent: none): the
				* GGUF holds them (TPC_KH_PLUS_MTP, TPC_KH_MTP) unless converted
				* with --no-mtp, which leaves their tensors out as past_layers
				* does. NULL: none, unless the family has tpc_family_mtp */
	const tpc_gguf_rope_alpha *rope_alpha; /* an alpha rope written as a plain one; NULL: none */
	const tpc_gguf_hy_vocab *hy; /* a HunYuan vocabulary's ids and pre-tokenizer; NULL: none */
	int head_dim;
	tpc_gguf_vocab_kind vocab;
	const char *tok_class_spm; /* tokenizer_class for a SentencePiece vocabulary */
	const char *tok_class_bpe; /* for a BPE; NULL: by its pre-tokenizer (gguf_tok.c) */
	bool add_space_prefix;     /* tokenizer.ggml.add_space_prefix is tokenizer_config's add_prefix_space */
	tpc_gguf_spm_json spm_json; /* a SentencePiece vocabulary's tokenizer.json */
	tpc_gguf_special_text special_text[4]; /* special ids by added token text, in the
						 * reference's order */
	const tpc_gguf_cfg_rule *hf_cfg; /* ends with member NULL */
	const tpc_gguf_bias_flag *bias_flags; /* ends with member NULL; NULL: none */
	const tpc_gguf_bias_flag *weight_flags; /* the same from whether layer 0 has the role's
						 * weight (Glm4MoeConfig's use_qk_norm, default
						 * false: a q norm) */
	const char *rope_pct;      /* member for a partial rotary dimension; NULL: none (the
				    * rotary dimension is an hf_cfg row of its own) */
	bool rope_pct_always;      /* rope_pct written also when the rotary dimension is whole */
	const char *experts_member; /* config.json's expert count member */
	const char *when_key; /* the record reads a GGUF of its arch only when this {arch}.* key is
			       * there (OLMo 3's attention.sliding_window: the reference writes
			       * Olmo2ForCausalLM and Olmo3ForCausalLM both as olmo2); the record
			       * without one reads the others */
} tpc_gguf_arch;

/* The record's head_tile row of `role`, NULL when the role is not tiled */
const tpc_gguf_tile_row *tpc_gguf_tile_of(const tpc_gguf_arch *g, tpc_role role);

/* Whether the architecture stacks a layer's experts into one tensor each */
bool tpc_gguf_arch_stacks_experts(const tpc_gguf_arch *g);

/* Whether family f's GGUF holds multi-token-prediction layers that convert
 * --no-mtp leaves out: its tpc_family_mtp block (mtp.*) or its GGUF part's
 * mtp_count layers (convert_hf_to_gguf.py's supports_mtp_export, whose
 * --no-mtp / --no-nextn the other classes refuse) */
bool tpc_gguf_arch_has_mtp(const tpc_family *f);

/* The record convert_hf_to_gguf.py writes a config.json architectures[0]
 * `hf_arch` as (tpc_family_by_arch, when its GGUF part lists it); NULL if
 * none. */
const tpc_family *tpc_family_by_gguf_hf(const char *hf_arch);
/* The same for a config.json whose routed experts number `experts` (-1:
 * unsaid): with none (0), a record whose GGUF part lists hf_arch and stacks
 * no experts comes first (Granite 4 with num_local_experts 0, whose shared
 * MLP the reference writes as ffn_gate/ffn_up/ffn_down). */
const tpc_family *tpc_family_by_gguf_hf_experts(const char *hf_arch, int64_t experts);

/* The first record whose GGUF architecture is `arch` (a GGUF's
 * general.architecture): experts 1, one that stacks experts; 0, one that
 * does not; -1, either. NULL if none. Records with a when_key are left out. */
const tpc_family *tpc_family_by_gguf(const char *arch, int experts);
/* The same, a record with a when_key first when has(ctx, "{arch}.key") says
 * the GGUF holds that key. */
const tpc_family *tpc_family_by_gguf_keys(const char *arch, int experts, bool (*has)(const void *ctx, const char *key),
					  const void *ctx);

/* For messages: the records' HF architectures (hf true) or their distinct
 * GGUF architectures, ", "-separated, into buf (truncated to fit). */
void tpc_family_gguf_list(bool hf, char *buf, size_t n);

/* The records' GGUF parts (lib/tpc_family_gguf.c), for tpc_family.c */
extern const tpc_gguf_arch tpc__gguf_llama, tpc__gguf_mistral, tpc__gguf_mixtral, tpc__gguf_qwen2,
	tpc__gguf_qwen3, tpc__gguf_qwen2moe, tpc__gguf_gemma, tpc__gguf_phi3, tpc__gguf_gpt2, tpc__gguf_gptneox, tpc__gguf_olmo2, tpc__gguf_olmo3,
	tpc__gguf_gemma2, tpc__gguf_gemma3, tpc__gguf_qwen3moe, tpc__gguf_olmoe, tpc__gguf_starcoder2, tpc__gguf_granite,
	tpc__gguf_smollm3, tpc__gguf_seedoss, tpc__gguf_glm4, tpc__gguf_ernie4_5, tpc__gguf_exaone4, tpc__gguf_phi2,
	tpc__gguf_cohere2, tpc__gguf_granitemoe, tpc__gguf_granitemoe_shared, tpc__gguf_glm4moe, tpc__gguf_deepseek2, tpc__gguf_gptoss,
	tpc__gguf_phimoe, tpc__gguf_ernie4_5moe, tpc__gguf_llama4, tpc__gguf_granitehybrid,
	tpc__gguf_granitehybrid_dense, tpc__gguf_qwen3next, tpc__gguf_qwen35, tpc__gguf_qwen35moe, tpc__gguf_hunyuanmoe,
	tpc__gguf_hunyuandense;

#endif
