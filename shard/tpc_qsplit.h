/*
 * tpc_qsplit.h - quantized layers: how the companion tensors of a quantized
 * weight split with their layer (private to shard/).
 *
 * A quantized layer stores its weight as several tensors, and none of them
 * has the weight's name or shape: GPTQ's qweight/qzeros/scales/g_idx, AWQ's
 * packed the other way, FP8's weight plus weight_scale_inv blocks. A plan
 * names the layer's weight ("q_proj.weight": col, on head boundaries); each
 * companion is split the way that weight would be, along its own axis and in
 * its own units (FRAMEWORKS.md §3; vLLM's GPTQ/AWQ/FP8 linear methods load
 * each rank's slice this way):
 *
 *                  output features (col)      input features (row)
 *   GPTQ qweight   dim 1, 1 per feature       dim 0, 32/bits features per row
 *        qzeros    dim 1, 32/bits per column  dim 0, group_size per row
 *        scales    dim 1, 1                   dim 0, group_size
 *        g_idx     whole                      dim 0, 1
 *   AWQ  qweight   dim 1, 32/bits             dim 0, 1
 *        qzeros    dim 1, 32/bits             dim 0, group_size
 *        scales    dim 1, 1                   dim 0, group_size
 *   FP8  weight_scale_inv  dim 0, block[0]    dim 1, block[1]
 *        weight_scale [out] / [out, 1]  dim 0, 1      whole
 *        weight_scale scalar, input_scale    whole
 *
 * With GPTQ act-order (desc_act) the groups follow g_idx, not the input
 * order: on a row split scales and qzeros stay whole on every rank and g_idx
 * is split with the input rows, as vLLM's GPTQ does. A rank's slice must fall
 * on whole units (a packed int32, a group, an FP8 block): when it does not,
 * the companion is refused naming the tensor, its layer and the numbers. FP8
 * blocks can be padded instead (--pad, tpc__quant_pad_weight): the weight's
 * split dimension to a multiple of block x tp with zero rows, the scales'
 * to the padded block count with zero scales.
 * Companions of a method tpconv does not know, or of a checkpoint whose
 * config has no quantization_config, are left to the plan (and refused by
 * the fallback check when their layer is split).
 */
#ifndef TPC_QSPLIT_H
#define TPC_QSPLIT_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "tpc_ckpt.h"
#include "tpc_err.h"
#include "tpc_plan.h"

/*
 * --pad (TPC_RESOLVE_PAD) and FP8 blocks: tensor t of `in` is a block-quantized
 * FP8 layer's weight ("X.weight" beside a 2-D "X.weight_scale_inv") whose
 * split is *s: each part whose rank slices would cut a weight_block_size
 * block is zero-padded at its end to a multiple of block x tp (head splits
 * excepted), as tpc__quant_split pads the scales to match (zero scales for
 * the padded blocks: their weights are zero, so any scale gives zero; the
 * pad is recorded like any other and merge strips it). Returns 1 when t is
 * such a weight, 0 otherwise; *s is only changed with TPC_RESOLVE_PAD.
 */
int tpc__quant_pad_weight(const tpc_model_facts *f, const tpc_ckpt *in, const tpc_tensor *t, int tp, unsigned flags,
			  tpc_split *s);

/* gpt-oss's MXFP4 (f->quant mx_blocks): when t is X_blocks u8 [E, R, G, 16]
 * or X_scales [E, R, G], its layer's name X into lname (n bytes) and the
 * layer's shape as transformers builds it, [E, G * 32, R], into vshape;
 * return 1. 0 otherwise. The plan's rule for X (stacked, --ep) is theirs:
 * tp by whole rows R or by whole blocks of 32 inputs (vLLM's gpt_oss.py
 * load_weights), experts by --ep. */
int tpc__quant_blocks_layer(const tpc_model_facts *f, const tpc_ckpt *in, const tpc_tensor *t, char *lname, size_t n,
			    int64_t vshape[3]);

/* gpt-oss's MXFP4 experts split as vLLM's gpt_oss.py load_weights cuts the
 * intermediate (whole blocks of 32 features, cdiv(blocks, tp) a rank, the
 * last ranks fewer, unpadded: the parts' `uneven`). tpc__quant_mx_layer: the
 * split ws of layer X [E, I, R] (lname) over its tp ranks, on dim 1 (the
 * inputs) or 2 (rows: the rule's unit x 32 a block). tpc__quant_mx_cut: a
 * tensor X_bias beside X_blocks (f mx_blocks) split on its last dim, as X's
 * rows. 0 (s cut, or left as it was) or a negative status naming the
 * numbers when vLLM would refuse the model or a rank would hold nothing. */
int tpc__quant_mx_layer(const tpc_plan *p, int tp, tpc_split *ws, const char *lname, tpc_err *e);
/* Before t (X_blocks, X_scales or X_bias of such a layer) is split over tp
 * ranks: a negative status naming the numbers when vLLM would not load the
 * model at that tp (intermediate_size not a multiple of it), else 0. */
int tpc__quant_mx_check(const tpc_plan *p, const tpc_model_facts *f, const tpc_ckpt *in, const tpc_tensor *t, int tp,
			tpc_err *e);
int tpc__quant_mx_cut(const tpc_plan *p, const tpc_model_facts *f, const tpc_ckpt *in, const tpc_tensor *t, int tp,
		      tpc_split *s, tpc_err *e);

/* If tensor t (`name`) of `in` is a companion of a quantized layer under
 * f->quant, set *out to its split and return 1; 0 when it is not one (or the
 * layer's weight matches no rule); a negative status when its split cannot be
 * honoured (e names the tensor and the numbers). */
int tpc__quant_split(const tpc_plan *p, const tpc_model_facts *f, const tpc_ckpt *in, const tpc_tensor *t, int tp,
		     unsigned flags, tpc_split *out, tpc_err *e);

#endif
