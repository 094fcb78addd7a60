/*
 * tpc_quant.h - dequantizing FP8, GPTQ and AWQ checkpoints while streaming
 * (convert --dequantize).
 *
 * Quantized Hugging Face checkpoints keep each linear weight as packed or
 * low-precision tensors plus scales, and say how in config.json's
 * `quantization_config`. tpc_ckpt_dequantize() replaces each such family by
 * one tensor description, `X.weight` [O, I], whose F32 values are computed
 * from the family's tensors when a writer streams it (struct tpc_dequant in
 * tpc_ckpt.h): at most a bounded block of rows (about 1M elements) is
 * unpacked at a time, so converting a model needs no whole-file or
 * whole-tensor buffer, unlike DeepSeek's inference/fp8_cast_bf16.py, which
 * loads each shard. The family's other tensors leave the checkpoint. Writers,
 * casts (dtype != src_dtype), hashing and `inspect` see an ordinary tensor.
 *
 * Layouts (what the files hold; the formulas are in tpc_ckpt.h):
 *
 *   1. FP8 (quant_method "fp8": DeepSeek-V3/R1, Qwen3-FP8;
 *      weight_block_size [bo, bi], usually [128, 128]):
 *        X.weight            F8_E4M3 [O, I]
 *        X.weight_scale_inv  F32 [ceil(O/bo), ceil(I/bi)]
 *      w = float(weight) * scale_inv[o/bo, i/bi], computed in F32 and
 *      rounded once to the output dtype, as DeepSeek-V3's
 *      inference/kernel.py weight_dequant_kernel does (`x.to(tl.float32) *
 *      s`, stored as bf16) and fp8_cast_bf16.py, which calls it and drops the
 *      scale_inv tensors. Edges that are not a multiple of the block use the
 *      partial block's scale.
 *      Per-tensor and per-channel FP8 (compressed-tensors / llm-compressor
 *      "float-quantized", vLLM "fp8" without a block size):
 *        X.weight        F8_E4M3 [O, I]
 *        X.weight_scale  one element, or [O, 1] / [O] (per output channel),
 *                        or the block grid when the config names a block
 *      w = float(weight) * weight_scale; X.input_scale (a static activation
 *      scale, meaningless once the weight is dense) is dropped with it.
 *   2. GPTQ (quant_method "gptq"; AutoGPTQ / GPTQModel, bits 2, 4 or 8):
 *        X.qweight  I32 [I*bits/32, O]  packed along the input: value k of
 *                   a word (bits [k*bits, (k+1)*bits)) is input row 32/bits*r + k
 *        X.qzeros   I32 [G, O*bits/32]  packed along the output likewise
 *        X.scales   F16 [G, O]
 *        X.g_idx    I32 [I]             group of each input row (act-order,
 *                                       desc_act); absent: i / group_size
 *      w[o, i] = (q[i, o] - z[g_idx[i], o]) * s[g_idx[i], o] -> X.weight [O, I].
 *      AutoGPTQ's v1 format stores zero - 1 (its pack() does `zeros -= 1`;
 *      qlinear_cuda_old.py adds 1 back: `zeros = zeros + 1` then
 *      `bitwise_and(zeros, 2**bits - 1)`), so z = (stored + 1) mod 2^bits;
 *      checkpoint_format "gptq_v2" (GPTQModel) stores z itself. Old AutoGPTQ
 *      folders say all this in quantize_config.json instead (the CLI reads it
 *      when config.json has no quantization_config).
 *   3. AWQ (quant_method "awq", version "gemm"; AutoAWQ, 4 bits):
 *        X.qweight  I32 [I, O/8]  packed along the OUTPUT, in AutoAWQ's order:
 *                   pack_awq puts column 8j + AWQ_ORDER[k] (AWQ_ORDER =
 *                   [0,2,4,6,1,3,5,7]) in nibble k of word j, so unpack_awq /
 *                   reverse_awq_order (awq/utils/packing_utils.py) read column
 *                   8j + n from nibble AWQ_REVERSE_ORDER[n] = [0,4,1,5,2,6,3,7][n]
 *        X.qzeros   I32 [G, O/8]  same order
 *        X.scales   F16 [G, O]
 *      w[o, i] = (q[i, o] - z[i/group, o]) * s[i/group, o] (dequantize_gemm),
 *      -> X.weight [O, I].
 *   4. FP4 (E2M1 codes, two per byte: element 2j in the low nibble, 2j+1 in
 *      the high; bit 3 the sign, bits 0-2 index {0, .5, 1, 1.5, 2, 3, 4, 6}):
 *      compressed-tensors 0.17 (quant_method "compressed-tensors"):
 *        NVFP4, format "nvfp4-pack-quantized":
 *          X.weight_packed        U8 [O, I/2]
 *          X.weight_scale         F8_E4M3 [O, I/16]
 *          X.weight_global_scale  F32 [1]
 *          w = e2m1 * (float(scale) / global_scale), in F32 as
 *          NVFP4PackedCompressor.decompress computes it (forward_helpers.py
 *          _dequantize: the bf16 scale divided by the f32 global scale, the
 *          code times that, then .to(bf16)); X.input_global_scale is dropped
 *        MXFP4, format "mxfp4-pack-quantized": X.weight_scale U8 [O, I/32],
 *          E8M0: w = e2m1 * 2^(scale - 127), exact (mx_utils.py
 *          decompress_mx_scale; 255 is infinite there, NaN in OCP MX: refused)
 *      NVIDIA ModelOpt NVFP4 (quant_method "modelopt", quant_algo "NVFP4", or
 *      hf_quant_config.json's quantization.quant_algo):
 *          X.weight        U8 [O, I/2]
 *          X.weight_scale  F8_E4M3 [O, I/16]
 *          X.weight_scale_2  F32, one element
 *          w = e2m1 * (float(scale) * scale_2) (nvfp4_tensor.py
 *          NVFP4QTensor.dequantize: the block scale first); X.input_scale is
 *          dropped. compressed-tensors' global scale is the reciprocal of
 *          ModelOpt's scale_2: each convention is read as its producer writes it.
 *      A 1-D (swizzled, cutlass) weight_scale is refused.
 *      gpt-oss (quant_method "mxfp4"; transformers integrations/mxfp4.py):
 *          X_blocks  U8 [E, R, I/32, 16]  row r of expert e's [R, I] matrix,
 *                                         32 inputs a block, pairs as above
 *          X_scales  U8 [E, R, I/32]      E8M0
 *      -> X [E, I, R], the Hugging Face parameter (GptOssExperts's
 *      gate_up_proj [E, H, 2I], down_proj [E, I, H]): w[e, i, r] =
 *      e2m1 * 2^(scale - 127), exact, as convert_moe_packed_tensors gives
 *      (its transpose(1, 2) included).
 * For GPTQ and AWQ, (q - z) * s is exact in F32 (a 9-bit integer times an
 * f16/bf16 scale), so a bf16 or f16 output is that exact value rounded once
 * to nearest even: the same bits as torch computing it in f32 and calling
 * .to(torch.bfloat16). (AutoAWQ multiplies in f16; its f16 results are these.)
 *
 * Everything is checked before a byte is written: every companion present
 * with the dtype and shape the layout needs (errors name the tensor), g_idx
 * entries inside [0, G). A tensor that belongs to no family is left as it is.
 */
#ifndef TPC_QUANT_H
#define TPC_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_ckpt.h"
#include "tpc_dtype.h"
#include "tpc_err.h"

typedef enum tpc_quant_method {
	TPC_QM_NONE = 0, /* no quantization_config */
	TPC_QM_FP8,      /* "fp8", or "compressed-tensors" with format "float-quantized" */
	TPC_QM_GPTQ,
	TPC_QM_AWQ,
	TPC_QM_PACKED,   /* "compressed-tensors" with format "pack-quantized" (int4/int8) */
	TPC_QM_FP4,      /* E2M1 weights: compressed-tensors "nvfp4-pack-quantized" and
	                    "mxfp4-pack-quantized", NVIDIA ModelOpt NVFP4 ("modelopt") */
} tpc_quant_method;

typedef struct tpc_quant_cfg {
	tpc_quant_method method;
	int bits;              /* GPTQ / AWQ */
	int64_t group_size;    /* GPTQ / AWQ; -1: one group spans the input */
	int64_t block[2];      /* FP8 weight_block_size; {0, 0} when none */
	bool zero_plus_one;    /* GPTQ: stored zero points are zero - 1 (v1) */
	bool symmetric;        /* pack-quantized: no weight_zero_point */
	int fp4_group;         /* FP4: elements per scale (16 NVFP4, 32 MXFP4) */
	bool fp4_modelopt;     /* FP4: ModelOpt's names (weight, weight_scale_2), else
	                          compressed-tensors' (weight_packed, weight_global_scale) */
	bool fp4_blocks;       /* FP4: gpt-oss's X_blocks / X_scales (quant_method "mxfp4") */
	tpc_dtype torch_dtype; /* config.json torch_dtype when F16/BF16/F32, else TPC_DT_INVALID */
	bool rank_piece;       /* the tensors are one rank's pieces of a shard set (verify): a
	                          row-split GPTQ layer's g_idx keeps the global group numbers
	                          while its scales and zeros hold the rank's groups only, so
	                          g_idx is read relative to its smallest value when it would
	                          not fit the groups otherwise */
} tpc_quant_cfg;

/*
 * Parse a config.json text. No quantization_config: method TPC_QM_NONE and
 * 0. A quantization_config tpconv cannot dequantize (unknown quant_method,
 * GPTQ bits other than 2/4/8, AWQ other than 4-bit gemm with zero points, a
 * compressed-tensors format other than float-quantized, malformed members) is
 * TPC_EINPUT naming `path` and what is wrong. `gptq_file` parses an AutoGPTQ
 * quantize_config.json instead (bits, group_size, desc_act, sym; no
 * quant_method: it is GPTQ).
 */
int tpc_quant_cfg_from_buffer(tpc_quant_cfg *q, const char *text, size_t len, const char *path,
			      bool gptq_file, tpc_err *e);
int tpc_quant_cfg_from_file(tpc_quant_cfg *q, const char *path, bool gptq_file, tpc_err *e);

/* Name of the first tensor of ck that looks quantized (an F8 dtype; a name
 * ending in qweight, weight_scale_inv, weight_packed or weight_scale_2), or NULL. */
const char *tpc_quant_find_quantized(const tpc_ckpt *ck);

/*
 * Replace every quantized family of ck (by q's method) with a dequantized
 * X.weight whose output dtype is `out` (F16, BF16 or F32; src_dtype F32),
 * dropping the family's other tensors. *n receives the number of tensors
 * dequantized (may be NULL). Errors (TPC_EINPUT) name the tensor: a
 * missing or misshapen companion, an F8 weight without a scale, an F8 type
 * other than F8_E4M3, a g_idx entry out of range (with its byte offset).
 */
int tpc_ckpt_dequantize(tpc_ckpt *ck, const tpc_quant_cfg *q, tpc_dtype out, size_t *n, tpc_err *e);

/* tpc_ckpt_read_bytes for a tensor with dq set: F32 elements [e0, e0+cnt) of
 * its C-order image into dst. */
int tpc__dequant_read(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t e0, uint64_t cnt, void *dst,
		      tpc_err *e);

#endif
