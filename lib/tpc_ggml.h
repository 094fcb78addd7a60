/*
 * tpc_ggml.h - ggml's tensor types: the type table, the block decoders that
 * turn GGUF's packed weights into F32 values, and the block quantizers
 * (tpc_ggml_quantize: the ones llama-quantize runs without an importance
 * matrix, in lib/tpc_ggml_quant.c).
 *
 * lib/ holds them because the values of a quantized GGUF tensor are computed
 * while a writer streams it (struct tpc_dequant, kind TPC_DQ_GGML), as those
 * of FP8 or GPTQ weights are; formats/gguf/gguf.c reads and writes the file.
 *
 * Block layouts (little-endian; f16 scales; QK_K = 256), from ggml's
 * ggml-common.h and gguf-py's quants.py, element j of a block:
 *   Q4_0  (32, 18)   d, qs[16]: q = nibble (j < 16: low of qs[j], else high
 *                    of qs[j-16]); x = d * (q - 8)
 *   Q4_1  (32, 20)   d, m, qs[16]: x = d * q + m
 *   Q5_0  (32, 22)   d, qh (u32), qs[16]: q = nibble | bit j of qh << 4;
 *                    x = d * (q - 16)
 *   Q5_1  (32, 24)   d, m, qh, qs[16]: x = d * q + m
 *   Q8_0  (32, 34)   d, qs[32] (int8): x = qs[j] * d
 *   Q2_K  (256, 84)  scales[16], qs[64], d, dmin: j = 128c + 32s + l,
 *                    q = qs[32c + l] >> 2s & 3, g = j / 16:
 *                    x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4)
 *   Q3_K  (256, 110) hmask[32], qs[64], scales[12] (16 6-bit values), d:
 *                    q = (qs[32c + l] >> 2s & 3) - (hmask bit clear ? 4 : 0)
 *                    (hmask bit (j / 32) of hmask[j % 32]); x = d * (sc - 32) * q
 *   Q4_K  (256, 144) d, dmin, scales[12] (8 6-bit scales and mins), qs[128]:
 *                    j = 64c + 32s + l, q = qs[32c + l] >> 4s & 15, sub-block
 *                    j / 32: x = d * sc * q - dmin * m
 *   Q5_K  (256, 176) d, dmin, scales[12], qh[32], qs[128]: q as Q4_K plus
 *                    bit (j / 32) of qh[j % 32] << 4
 *   Q6_K  (256, 210) ql[128], qh[64], scales[16] (int8), d: j = 128c + r,
 *                    q = (ql[64c + r % 64] >> 4(r / 64) & 15 |
 *                    (qh[32c + r % 32] >> 2(r / 32) & 3) << 4) - 32;
 *                    x = d * scales[j / 16] * q
 *   MXFP4 (32, 17)   e (E8M0), qs[16]: q = nibble as Q4_0; x = 2^(e-128) *
 *                    kvalues_mxfp4[q] (E2M1 doubled: 0 1 2 3 4 6 8 12, bit 3
 *                    the sign)
 *   NVFP4 (64, 36)   d[4] (UE4M3, one per 16), qs[32]: sub-block s's
 *                    element j the nibble (j < 8: low of qs[8s + j], else
 *                    high of qs[8s + j - 8]); x = ue4m3(d[s]) / 2 * kvalues[q]
 *   IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S (256 each): rows of
 *                    ggml's lattices (tpc_ggml_grids.c) by index, signs and
 *                    4-bit (IQ1: 3-bit) scales; IQ4_NL (32, 18) and IQ4_XS
 *                    (256, 136): 16 non-linear levels by nibble; TQ1_0 (256,
 *                    54) and TQ2_0 (256, 66): ternary. Their layouts are
 *                    lib/tpc_ggml_iq.c's comments.
 * Every product and sum is one F32 operation in the order numpy evaluates
 * gguf-py's dequantize_blocks (d * sc first, then * q, then - dmin * m), so
 * the values are bit for bit python3-gguf's (built with -ffp-contract=off,
 * which ISO C mode gives: no fused multiply-add).
 */
#ifndef TPC_GGML_H
#define TPC_GGML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_dtype.h"

/* KV value types (gguf_type): GGUF's, here because the family records
 * (tpc_family_gguf.h) type their keys with them */
typedef enum tpc_gguf_vt {
	TPC_GV_U8 = 0, TPC_GV_I8 = 1, TPC_GV_U16 = 2, TPC_GV_I16 = 3, TPC_GV_U32 = 4, TPC_GV_I32 = 5,
	TPC_GV_F32 = 6, TPC_GV_BOOL = 7, TPC_GV_STRING = 8, TPC_GV_ARRAY = 9, TPC_GV_U64 = 10,
	TPC_GV_I64 = 11, TPC_GV_F64 = 12, TPC_GV_COUNT
} tpc_gguf_vt;

/* Tensor types (ggml_type); the numbers are the file's. */
typedef enum tpc_ggml_type {
	TPC_GGML_F32 = 0, TPC_GGML_F16 = 1, TPC_GGML_Q4_0 = 2, TPC_GGML_Q4_1 = 3,
	TPC_GGML_Q5_0 = 6, TPC_GGML_Q5_1 = 7, TPC_GGML_Q8_0 = 8, TPC_GGML_Q8_1 = 9,
	TPC_GGML_Q2_K = 10, TPC_GGML_Q3_K = 11, TPC_GGML_Q4_K = 12, TPC_GGML_Q5_K = 13,
	TPC_GGML_Q6_K = 14, TPC_GGML_Q8_K = 15, TPC_GGML_IQ2_XXS = 16, TPC_GGML_IQ2_XS = 17,
	TPC_GGML_IQ3_XXS = 18, TPC_GGML_IQ1_S = 19, TPC_GGML_IQ4_NL = 20, TPC_GGML_IQ3_S = 21,
	TPC_GGML_IQ2_S = 22, TPC_GGML_IQ4_XS = 23,
	TPC_GGML_I8 = 24, TPC_GGML_I16 = 25, TPC_GGML_I32 = 26, TPC_GGML_I64 = 27, TPC_GGML_F64 = 28,
	TPC_GGML_IQ1_M = 29, TPC_GGML_BF16 = 30, TPC_GGML_TQ1_0 = 34, TPC_GGML_TQ2_0 = 35,
	TPC_GGML_MXFP4 = 39, TPC_GGML_NVFP4 = 40, TPC_GGML_Q1_0 = 41, TPC_GGML_Q2_0 = 42,
	TPC_GGML_NONE = -1
} tpc_ggml_type;

typedef struct tpc_ggml_info {
	const char *name; /* "F32", "Q8_0", "Q4_K" (as gguf-py's GGMLQuantizationType) */
	int block;        /* elements per block (1 for plain types) */
	int size;         /* bytes per block */
} tpc_ggml_info;

/* The row of a type: every type gguf-py 0.19 names (GGML_QUANT_SIZES), so
 * any GGUF can be read, listed and copied block for block; NULL for a number
 * no ggml names (a file holding it is refused, naming the tensor and the
 * number). Only the types tpc_ggml_decodes accepts have values: a path that
 * needs another one's values refuses it by name. */
const tpc_ggml_info *tpc_ggml_info_of(int type);
/* The type in row i of the table (i from 0), TPC_GGML_NONE past the end. */
int tpc_ggml_type_at(size_t i);
/* "f32" "f16" "bf16" "q8_0" ... (case-insensitive) -> type, TPC_GGML_NONE if unknown. */
int tpc_ggml_by_name(const char *name);
/* The tpconv dtype a plain type's elements are (F32 -> TPC_F32, I8 -> TPC_I8
 * ...), TPC_DT_INVALID for a block type. */
tpc_dtype tpc_ggml_plain_dtype(int type);
/* Types whose blocks tpc_ggml_dequant decodes (the list above). */
bool tpc_ggml_decodes(int type);

/* nblocks blocks of `type` at src -> nblocks * block F32 values at dst.
 * The type must be one tpc_ggml_decodes accepts. */
void tpc_ggml_dequant(int type, const uint8_t *src, float *dst, uint64_t nblocks);

/* nblocks MXFP4 blocks held as E2M1 pairs (OCP MX, gpt-oss's X_blocks and
 * compressed-tensors' mxfp4-pack-quantized: 16 bytes a block, element 2j
 * the low nibble of byte j, 2j + 1 the high one; E8M0 scale bytes apart,
 * one a block) -> ggml's block_mxfp4 (17 bytes: the scale byte, then qs[16]
 * holding element j in the low and j + 16 in the high nibble of qs[j]).
 * Bits moved, no value computed: the 4-bit codes and the scale byte are
 * the same numbers on both sides (GptOssModel.repack_mxfp4's
 * transform_nibble_layout, base.py's repack_mxfp4_blocks). */
void tpc_ggml_mxfp4_from_pairs(const uint8_t *pairs, const uint8_t *scales, uint8_t *dst, uint64_t nblocks);

/* n F32 values (n % 32 == 0) -> n / 32 Q8_0 blocks, as gguf-py's
 * quants.Q8_0.quantize_blocks: d = max|x| / 127, q = x * (1 / d) rounded
 * half away from zero (np_roundf), d stored as f16 rounded to nearest even. */
void tpc_ggml_quant_q8_0(const float *src, uint8_t *dst, uint64_t n);

/* Types tpc_ggml_quantize writes: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K. */
bool tpc_ggml_quantizes(int type);
/* nrows rows of ncols F32 values (ncols a multiple of the type's block) ->
 * nrows * ncols / block blocks, the bytes of ggml's quantize_row_<type>_ref
 * (ggml/src/ggml-quants.c), which llama-quantize runs without an importance
 * matrix: nothing is written for a type tpc_ggml_quantizes refuses or a
 * ncols that is not whole blocks. Rows in parallel (OpenMP); the bytes do
 * not depend on the number of threads. */
void tpc_ggml_quantize(int type, const float *src, uint8_t *dst, uint64_t nrows, uint64_t ncols);

#endif
