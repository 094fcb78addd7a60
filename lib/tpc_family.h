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
 *   verify    the architecture verify's block and model checks run it as
 *             ("llama", "gpt2", "gpt-neox", "bert", "dit", "dalle2"); NULL: structure
 *             and layer checks only
 *   hf_arch   the config.json "architectures" values of its models
 *   rules     the rename presets (lib/tpc_rules.h) that bring another
 *             ecosystem's names to this family's Hugging Face names
 *   layouts   the engine layouts whose loaders were checked for its models
 *             (a layout writes a family only when it is listed here)
 *   tensors   for decoders, the tensor table: each tensor by role with its
 *             name in every ecosystem (below); NULL for families without one
 *   conv1d    its Hugging Face checkpoints store the 2-D weights of the
 *             decoder's linear layers [in, out] (GPT-2's Conv1D); the other
 *             ecosystems hold them [out, in], transposed (embeddings and
 *             lm_head are [vocab or positions, hidden] everywhere)
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
 * the experts, in expert order. NULL: the ecosystem has no name for that
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
} tpc_tensor_row;

typedef struct tpc_family {
	const char *name, *desc, *plan, *verify;
	const char *const *hf_arch;      /* NULL-terminated; NULL: none */
	const char *const *rules;        /* NULL-terminated; NULL: none */
	const char *const *layouts;      /* the engine layouts (shard/tpc_layout.h) whose
					  * loaders were checked against this family's
					  * models: a layout writes only those */
	const tpc_tensor_row *tensors;   /* ends with role TPC_ROLE_NONE; NULL: none */
	bool conv1d;                     /* HF linear weights [in, out] (GPT-2) */
} tpc_family;

size_t tpc_family_count(void);
const tpc_family *tpc_family_at(size_t i);           /* NULL past the end */
const tpc_family *tpc_family_find(const char *name); /* NULL if unknown */
/* The family whose hf_arch lists `arch` (config.json's architectures[0]);
 * the first such record, NULL if none. */
const tpc_family *tpc_family_by_arch(const char *arch);

/* The family of a config.json without architectures, by its model_type: the
 * record one of whose hf_arch has that stem, case and '_' aside
 * ("qwen2_moe" -> Qwen2MoeForCausalLM, "gpt2" -> GPT2LMHeadModel); *arch
 * (may be NULL) receives that hf_arch. NULL if none. */
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

#endif
