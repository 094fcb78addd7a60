/*
 * tpc_lora.h - a PEFT LoRA adapter merged into its base as descriptions
 * (convert --lora): each targeted weight becomes a computed tensor
 * (TPC_DQ_LORA, tpc_ckpt.h) whose rows are made while a writer streams it,
 * so a merge costs one pass over the base and a bounded buffer per tensor,
 * never a whole-model copy.
 *
 * The adapter is a folder as PEFT v0.20.0's save_pretrained writes it:
 * adapter_config.json (LoraConfig) and adapter_model.safetensors (or .bin),
 * its keys base_model.model.<module>.<what> (utils/save_and_load.py):
 *
 *   lora_A.weight [r, in], lora_B.weight [out, r]    a Linear (GPT-2 Conv1D:
 *                                                    the base is [in, out])
 *   lora_B.bias [out]                                lora_bias
 *   lora_embedding_A [r, vocab], lora_embedding_B [dim, r]   an Embedding
 *   lora_magnitude_vector[.weight] [out] / [dim]     DoRA
 *   lora_A.weight [E * r, in], lora_B.weight [out, r * E]   target_parameters
 *                                                    (PEFT's ParamWrapper, below)
 *   <module>.weight, <module>.bias                   modules_to_save: the base
 *                                                    tensor replaced whole
 *
 * The merge, for each module M (base tensor M.weight), in f32, following
 * tuners/lora/layer.py Linear.get_delta_weight / merge, Embedding's, and
 * variants.py DoraLinearVariant / DoraEmbeddingVariant.merge_safe:
 *
 *   s  = float(w * alpha / r)     (alpha / sqrt(r) with use_rslora; r and
 *                                  alpha from rank_pattern / alpha_pattern by
 *                                  get_pattern_key; w the --lora weight, 1)
 *   P[o, i] = sum over k = 0, 1, ..., r-1 in that order of B[o, k] * A[k, i]
 *             (each product and each sum rounded to f32: no fused multiply-add;
 *             rows in parallel under OpenMP, the same bits)
 *   D  = P * s (rounded), laid out as the base: [out, in] for a Linear,
 *        transposed for a Conv1D (fan_in_fan_out) and an Embedding
 *   V  = W + D
 *   DoRA: n = the L2 norm of V per output row (Linear), per column (Conv1D,
 *        Embedding): sqrt of the squares summed in f64 in index order, then
 *        rounded to f32; W' = (m / n) * V, else W' = V
 *   lora_bias: b' = b + lora_B.bias * s
 *
 * target_parameters (PEFT >= 0.17's ParamWrapper, tuners/lora/layer.py at
 * 5d602fdb L2246-2600): the module's lora_A/B adapt its parameter P, a 3-D
 * [E, d1, d2] of experts or a 2-D [out, in] (then as a Linear). Two
 * parameters of one module nest: the inner wrapper's keys carry
 * ".base_layer" (tuners_utils.py _inject_parameters); which parameter a
 * key adapts is the one target_parameters names for that module whose base
 * tensor fits the shapes. Expert e's delta (get_delta_weight, L2436-2462):
 *
 *   D_e[o, i] = s * sum over k in order of B[o, k * E + e] * A[e * r + k, i]
 *
 * laid out [out, in] (transformers' fused experts, Granite-MoE's
 * ParallelExperts) or [in, out] (is_transposed: gpt-oss, Llama 4), told by
 * the shapes, or where the experts are square by the family record's
 * hf_in_out (c->family); r and alpha from the patterns by P's full name.
 * A base that keeps P's experts one tensor each (a Mixtral or Qwen-MoE
 * checkpoint, whose transformers 5 model fuses them into
 * mlp.experts.gate_up_proj [E, 2I, H] and down_proj: the family record's
 * hf_fused rows) gets D_e's rows k * I .. in expert e's part k (w1 / gate,
 * w3 / up; w2 / down whole).
 *
 * The image is f32; the output dtype is the base tensor's (one rounding, where
 * PEFT rounds D to a bf16/f16 adapter's dtype and adds in the base dtype: the
 * f32 case is PEFT's bit pattern given the sum order above, the others are
 * within one unit in the last place). Several adapters apply in the order
 * given, each over the image the ones before made (PEFT's merge_and_unload of
 * several adapters). A Conv1D's or an Embedding's DoRA factors need whole
 * columns: they are computed when the description is built (one extra read
 * of that tensor).
 *
 * Refused by name (TPC_EINPUT): an activated LoRA (alora_invocation_tokens:
 * it acts only after its invocation tokens, and PEFT does not merge one;
 * tpc_lora_check passes it, for an adapter GGUF or a shard); a peft_type
 * other than LORA; config members
 * that change what the base is or how the adapter acts, which a merge cannot
 * express (init_lora_weights pissa/olora/corda/loftq/lora_ga,
 * use_qalora, layer_replication,
 * trainable_token_indices, arrow_config, use_bdlora); a key that is none of
 * the above; a module with A but no B (or the reverse); a module that
 * target_modules does not name or exclude_modules names; an adapter tensor
 * with no base tensor; shapes that do not fit (the rank against the pattern's
 * r too); target_parameters with use_dora, lora_bias or fan_in_fan_out
 * (PEFT's ParamWrapper refuses them), a ParamWrapper module that fits no
 * parameter, or two, or square experts no family record places; DoRA or
 * LoRA on a base that is not 2-D (convolutions), not float
 * (FP8 without --dequantize) or tied to another tensor; lora_bias on a base
 * without a bias. Nothing is changed in the checkpoint until the whole
 * adapter has been checked.
 */
#ifndef TPC_LORA_H
#define TPC_LORA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_ckpt.h"
#include "tpc_err.h"

typedef struct tpc_lora_cfg {
	char *path;          /* adapter_config.json, for messages */
	int64_t r;           /* r */
	double alpha;        /* lora_alpha */
	bool rslora;         /* use_rslora */
	bool fifo;           /* fan_in_fan_out */
	bool dora;           /* use_dora */
	bool lora_bias;      /* lora_bias */
	bool params;         /* target_parameters names parameters (PEFT's ParamWrapper) */
	void *json;          /* the parsed file (cJSON): target_modules, patterns... */
	/* The base's family (tpc_family.h), set by the caller, may be NULL: its
	 * tensor table's hf_in_out tells [E, in, out] experts from [E, out, in]
	 * where the shapes cannot (square experts, target_parameters). */
	const struct tpc_family *family;
} tpc_lora_cfg;

/* Parse adapter_config.json's text (`path` names it in errors). Refusals as
 * above, TPC_EINPUT naming the member. Release with tpc_lora_cfg_release. */
int tpc_lora_cfg_from_buffer(tpc_lora_cfg *c, const char *text, size_t len, const char *path, tpc_err *e);
int tpc_lora_cfg_from_file(tpc_lora_cfg *c, const char *path, tpc_err *e);
void tpc_lora_cfg_release(tpc_lora_cfg *c);

/* The r and alpha of module `name` (rank_pattern / alpha_pattern, PEFT's
 * get_pattern_key: the first key K, in the file's order, for which the name
 * matches ^(.*\.)?(K)$). */
int tpc_lora_rank_alpha(const tpc_lora_cfg *c, const char *name, int64_t *r, double *alpha, tpc_err *e);

typedef struct tpc_lora_stats {
	size_t merged;       /* weights that got a delta */
	size_t dora;         /* of which DoRA */
	size_t biases;       /* lora_bias */
	size_t replaced;     /* modules_to_save */
} tpc_lora_stats;

/*
 * Merge adapter checkpoint `ad` (its tensors as read from the adapter file)
 * with config `c` and weight `w` into `ck`: each targeted tensor of ck
 * becomes a TPC_DQ_LORA description (its old description the base, c[0]), a
 * replaced one a copy of the adapter's. ad's sources are added to ck (files
 * mapped again, memory copied), so ad can be released after. Every key is
 * placed and checked before ck changes: an error there leaves ck as it was
 * (but for no source); a later one (out of memory, a read of a Conv1D's or
 * embedding's DoRA columns) leaves ck partly merged, for the caller to drop.
 */
int tpc_lora_merge(tpc_ckpt *ck, const tpc_ckpt *ad, const tpc_lora_cfg *c, double w, tpc_lora_stats *st,
		   tpc_err *e);

/* What tpc_lora_merge checks before ck changes (every key placed, shapes,
 * target_modules...), ck left as it is: convert ADAPTER --base's check, which
 * an activated LoRA (alora_invocation_tokens, never merged) passes too. */
int tpc_lora_check(const tpc_ckpt *ck, const tpc_ckpt *ad, const tpc_lora_cfg *c, tpc_err *e);

/* The base tensor the target_parameters module `module` (a key less
 * "base_model.model." and ".lora_A.weight", ".base_layer"s kept) of adapter
 * ad adapts, by the rules above: *base its index in ck, *in_out whether its
 * experts are [E, in, out] (gpt-oss), else [E, out, in] or 2-D [out, in].
 * TPC_EINPUT naming why when none or two fit, or when the base keeps that
 * parameter's experts one tensor each (shard/tpc_lora_shard.c). */
int tpc_lora_param_base(const tpc_ckpt *ck, const tpc_ckpt *ad, const tpc_lora_cfg *c, const char *module, int64_t *base,
			bool *in_out, tpc_err *e);

/* ad's sources added to ck (files mapped again, memory copied): (*map)[j]
 * is ad's source j's index in ck (malloc'd). Also model merging's (tpc_mix.h). */
int tpc__import_sources(tpc_ckpt *ck, const tpc_ckpt *ad, int **map, tpc_err *e);
/* A description not yet installed: its companions (names too) and itself. */
void tpc__dq_free(tpc_dequant *dq);

/* tpc_ckpt_read_bytes of a TPC_DQ_LORA tensor: F32 elements [e0, e0+cnt). */
int tpc__lora_read(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t e0, uint64_t cnt, float *dst, tpc_err *e);
/* V[o, j] += (sum over k in order of co[o, k] * op[k, j]) * s for rows
 * o < nr and columns j < C of V [nr, ld], co [nr, r], op [r, ld]: the
 * arithmetic above, in the widest vectors the CPU has (tpc_lora_kern.c);
 * the same bits on any. */
void tpc__lora_kernel(float *V, const float *co, const float *op, int64_t nr, int64_t C, int64_t ld, int64_t r,
		      float s);
/* Every variant of it this CPU runs, the baseline first, the one
 * tpc__lora_kernel uses last: how many (at most 3). For the tests. */
typedef void (*tpc_lora_kern_fn)(float *, const float *, const float *, int64_t, int64_t, int64_t, int64_t, float);
size_t tpc__lora_kernels(tpc_lora_kern_fn all[3]);

#endif
