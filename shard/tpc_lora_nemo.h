/*
 * tpc_lora_nemo.h - a LoRA adapter trained with tensor (and pipeline)
 * parallelism in NeMo / Megatron, per-rank files, merged back into one PEFT
 * adapter (`tpconv merge NEMO_DIR -o ADAPTER/`).
 *
 * The input is what NeMo 1.x saves for a PEFT run (a .nemo archive, extracted:
 * `tar xf lora.nemo -C DIR`):
 *
 *   DIR/model_config.yaml        tensor_model_parallel_size, pipeline_model_
 *                                parallel_size, num_layers, hidden_size,
 *                                ffn_hidden_size, num_attention_heads,
 *                                num_query_groups (null: the heads),
 *                                kv_channels (null: hidden / heads), activation,
 *                                peft.lora_tuning.{adapter_dim, alpha, variant}
 *   DIR/model_weights.ckpt                          tp 1, pp 1
 *   DIR/mp_rank_TT/model_weights.ckpt               tp > 1, pp 1
 *   DIR/tp_rank_TT_pp_rank_PPP/model_weights.ckpt   pp > 1
 *
 * each a torch.save of the rank's adapter tensors, keys
 *
 *   <prefix>layers.L.<module>.linear_in.weight / .linear_out.weight
 *
 * L counted inside the stage (global L + num_layers / pp * p, as NeMo's own
 * converter adds it: nemo/export/utils/lora_converter.py
 * replace_number_add_offset, NVIDIA/NeMo 8cfedd72), <module> one of NeMo 1's
 * adapter names or Megatron-Bridge / NeMo 2's (the same layers):
 *
 *   self_attention.adapter_layer.lora_kqv_adapter          self_attention.linear_qkv.adapter
 *   self_attention.adapter_layer.lora_dense_attention_adapter  self_attention.linear_proj.adapter
 *   mlp.adapter_layer.lora_hto4h_adapter                   mlp.linear_fc1.adapter
 *   mlp.adapter_layer.lora_4htoh_adapter                   mlp.linear_fc2.adapter
 *
 * How each rank holds them (ParallelLinearAdapter, nemo/collections/nlp/
 * modules/common/megatron/adapters/parallel_adapters.py L201-243, built with
 * gather_output=False by nemo/collections/llm/peft/lora.py L743-763):
 *
 *   kqv, hto4h (column-parallel base): linear_in [r/tp, in] rank t's rows of
 *       A (a ColumnParallelLinear over the rank dim); linear_out [out/tp, r]
 *       rank t's rows of B, in the base's own layout: linear_qkv's query groups
 *       [q heads; k; v] each (rank t groups t*g/tp ...), linear_fc1's
 *       [gate_t; up_t]
 *   dense, 4htoh (row-parallel base): linear_in [r, in/tp] rank t's columns of
 *       A (a RowParallelLinear); linear_out [out/tp, r] rank t's rows of B (a
 *       ColumnParallelLinear, gathered)
 *
 * Merged: A and B gathered, then unfused and named as NeMo's converter does at
 * tp 1 (lora_converter.py convert_lora_weights_to_canonical,
 * reformat_module_names_to_hf): kqv's B split by query groups into q_proj,
 * k_proj, v_proj, its A copied to each; hto4h's B into gate_proj and up_proj
 * (a gated activation), A copied; dense -> o_proj, 4htoh -> down_proj; keys
 * base_model.model.model.layers.L.{self_attn,mlp}.<proj>.lora_{A,B}.weight, in
 * the order q k v o gate up down per layer. adapter_config.json: peft_type
 * LORA, r = adapter_dim, lora_alpha = alpha (NeMo scales by alpha /
 * adapter_dim, as PEFT by lora_alpha / r), target_modules the projections
 * written. Bytes are copied, never converted: the dtype is the rank files'.
 *
 * Refused by name (TPC_EINPUT, naming file and tensor, or the config member):
 * a missing rank file or config member, a variant other than "nemo", a
 * scheme other than lora, an alpha that is neither a number nor
 * ${peft.lora_tuning.adapter_dim}, a key that is none of the above, a module
 * missing on some rank or its linear_in without linear_out, shapes that are
 * not the config's split by tp (query groups, the rank and the widths must
 * divide), mixed dtypes, layers outside the stage, an ungated hto4h (its PEFT
 * name is not NeMo's converter's).
 */
#ifndef TPC_LORA_NEMO_H
#define TPC_LORA_NEMO_H

#include <stdbool.h>
#include <stdint.h>

#include "tpc_buf.h"
#include "tpc_ckpt.h"
#include "tpc_err.h"

typedef struct tpc_lora_nemo_info {
	int tp, pp;
	int64_t layers, hidden, heads, groups, head_dim, ffn, r;
	double alpha;
	size_t modules;      /* PEFT modules written (q_proj of layer 0, ...) */
} tpc_lora_nemo_info;

/* Is `dir` a NeMo LoRA save: model_config.yaml naming peft.lora_tuning (or
 * peft_scheme lora), and its rank 0 file? */
bool tpc_lora_nemo_detect(const char *dir);

/* Read the NeMo LoRA save in `dir` into `out` (initialised, empty): the PEFT
 * adapter's tensors in memory, and adapter_config.json's text into cfg. */
int tpc_lora_nemo_read(tpc_ckpt *out, tpc_buf *cfg, const char *dir, tpc_lora_nemo_info *info, tpc_err *e);

#endif
