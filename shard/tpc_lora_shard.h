/*
 * tpc_lora_shard.h - a PEFT LoRA adapter split for tensor parallelism beside
 * its base (shard ADAPTER --base BASE): the plan each adapter tensor is split
 * by, derived from the rule that splits its base tensor.
 *
 * A LoRA module adds (B @ A) * s to a base weight W [out, in] (lib/tpc_lora.h):
 * A is [r, in], B [out, r]. Tensor parallelism splits W along one of its two
 * dimensions, and the adapter follows the dimension, the way vLLM holds it
 * (vllm-project/vllm 4f54575c, vllm/lora/layers/column_parallel_linear.py:
 * ColumnParallelLinearWithLoRA.slice_lora_a keeps A whole, slice_lora_b takes
 * rank r's rows of B; MergedColumnParallelLinearWithLoRA and
 * QKVParallelLinearWithLoRA.slice_lora_b take each part's rows on their own,
 * the K/V part by tp_rank // num_kv_head_replicas, and concatenate them;
 * 7626577c, row_parallel_linear.py: RowParallelLinearWithLoRA.slice_lora_a
 * takes rank r's columns of A, slice_lora_b keeps B whole):
 *
 *   base split along out (col; a Conv1D's [in, out] col; an embedding's hidden)
 *       B [out, r]            its out rows split exactly as W's (the base rule's
 *                             parts, heads, KV replicas, units, padding)
 *       lora_B.bias [out]     the same
 *       magnitude [out]       the same (DoRA: each output row's norm is whole on
 *                             its rank)
 *       A                     whole on every rank
 *   base split along in (row; a Conv1D's row; an embedding's vocab)
 *       A [r, in]             its in columns split exactly as W's (a vocab split
 *                             pads A's vocab columns with zeros as W's rows)
 *       B, lora_B.bias        whole (the bias, as the base's, added once after
 *                             the all-reduce)
 *       DoRA                  refused: the norm of an output row spans every
 *                             rank's columns, so no rank can merge its slice alone
 *   base replicated by a rule: every adapter tensor whole
 *   modules_to_save (M.weight, M.bias saved whole): split as the base tensor is
 *
 * Embeddings: lora_embedding_A [r, vocab], lora_embedding_B [hidden, r]: vocab
 * is the "in" dimension (W's dim 0), hidden the "out" (dim 1). GPT-2 Conv1D
 * (fan_in_fan_out): W is [in, out], A and B as a Linear's.
 *
 * Megatron's own LoRA (NVIDIA/NeMo 8cfedd72, nemo/collections/nlp/modules/
 * common/megatron/adapters/parallel_adapters.py L201-243, used by
 * nemo/collections/llm/peft/lora.py L743-763 with gather_output=False) splits
 * differently: linear_in (A) is a ColumnParallelLinear over r for a
 * column-parallel base and a RowParallelLinear over in for a row-parallel one;
 * linear_out (B) is a ColumnParallelLinear over out in both cases. That layout
 * is read back by tpc_lora_nemo.h; tpconv writes vLLM's.
 *
 * Experts kept one tensor each (Mixtral's experts.N.w1): each expert's LoRA
 * tensors go with their expert (the plan's "experts" patterns, copied into
 * the adapter's plan: with --ep, to the expert's EP group, split tp/ep ways
 * there as its base is), as vLLM's FusedMoEWithLoRA holds them per expert
 * (vllm/lora/layers/fused_moe.py).
 *
 * A LoRA of target_parameters on fused experts (lib/tpc_lora.h: A [E * r,
 * in], B [out, r * E] over a stacked [E, out, in] or [E, in, out], found as
 * tpc_lora_param_base finds it) follows the stacked rule's split of the
 * experts' out or in dimension as a Linear's does, the rule's parts, units
 * and heads kept ("stacked", "dim", "transposed" dropped: the pair is 2-D).
 *
 * Refused by name (TPC_EINPUT): an adapter tensor whose base tensor is missing,
 * is not 2-D (but for target_parameters), is matched by no rule of the plan
 * (its split is not known), is a stacked expert tensor or is split along
 * neither of its dimensions; a target_parameters pair with --ep (its A holds
 * the experts' ranks in rows, its B in interleaved columns, which no plan rule
 * cuts by expert) or on experts the base keeps one tensor each; DoRA on a
 * base split along in; a key that is not PEFT's.
 *
 * The plan is an ordinary plan (tpc_plan.h): one rule per group of adapter
 * tensors whose names differ in numbers only (the layers), each the base
 * rule's JSON with its split retargeted; a group whose members would need
 * different splits gets a rule per tensor. Its fallback is "error", so the
 * shard set's manifest records exactly how each tensor was split and merge
 * rebuilds the adapter byte for byte.
 */
#ifndef TPC_LORA_SHARD_H
#define TPC_LORA_SHARD_H

#include "tpc_buf.h"
#include "tpc_ckpt.h"
#include "tpc_err.h"
#include "tpc_facts.h"
#include "tpc_lora.h"
#include "tpc_plan.h"

typedef struct tpc_lora_shard_stats {
	size_t out_split;   /* adapter tensors split along the base's out dimension */
	size_t in_split;    /* along its in dimension */
	size_t whole;       /* kept whole on every rank */
	size_t saved;       /* modules_to_save tensors, split as their base */
	size_t rules;       /* rules in the plan */
} tpc_lora_shard_stats;

/*
 * The plan (JSON into `out`) that splits adapter `ad` (config c) for tp ranks
 * beside base checkpoint `base` split by plan `bp` with facts f (already
 * merged and checked against base) and resolve flags `rflags`.
 */
int tpc_lora_shard_plan(const tpc_ckpt *base, const tpc_plan *bp, const tpc_model_facts *f, int tp, int ep,
			unsigned rflags, const tpc_ckpt *ad, const tpc_lora_cfg *c, tpc_buf *out, tpc_lora_shard_stats *st,
			tpc_err *e);

#endif
