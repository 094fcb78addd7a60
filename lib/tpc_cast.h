/*
 * tpc_cast.h - element type conversion, bit for bit as torch's Tensor.to().
 *
 * A cast is the one transform that has to look at tensor bytes. Writers call
 * it through tpc_ckpt_read_out() (tpc_ckpt.h) on bounded chunks while
 * streaming a tensor to its output, so no whole-tensor buffer ever exists.
 * Large chunks are converted by an OpenMP parallel loop; every element is
 * converted on its own, so the result does not depend on the thread count.
 *
 * Supported conversions (all little-endian, C-contiguous buffers):
 *
 *   between F64, F32, F16, BF16      every pair, both directions
 *   BOOL U8 I8 I16 U16 I32 U32 I64 U64 -> F64, F32, F16, BF16
 *
 * Float -> integer and integer -> integer casts are refused: torch's results
 * there are undefined behaviour in C++ for out-of-range values and differ
 * between CPU kernels, and no checkpoint conversion needs them.
 *
 * What the result is, matched against torch 1.13 (Debian python3-torch, x86-64,
 * AVX2 kernels) by tests/remap/cast_torch.sh:
 *
 *   - Rounding is to nearest, ties to even. Overflow gives +-Inf (F16 above
 *     65504 rounds to Inf from 65520 on, as torch does); results below the
 *     smallest normal are correctly rounded subnormals; +-0 and +-Inf keep
 *     their sign. Widening (F16/BF16 -> F32/F64, F32 -> F64) is exact.
 *   - Everything that is not F32 <-> F64 goes through F32, as c10::Half and
 *     c10::BFloat16 are built from a float: F64 -> F16 and F64 -> BF16 round
 *     twice (F64 -> F32, then F32 -> F16/BF16), and so do I32/I64 -> F16/BF16.
 *     Integers convert with the C cast (round to nearest even).
 *   - NaN, by destination:
 *       F32/F64 from a wider or narrower float: the sign and the top payload
 *         bits are kept and the quiet bit is set (the x86 cvtss2sd/cvtsd2ss
 *         rule); BF16 -> F32 is a plain shift (a signalling NaN stays one);
 *       F16: sign | 0x7E00 (payload dropped), as c10::Half;
 *       BF16 from F32 or F64: 0xFFFF whatever the sign and payload. This is
 *         what torch's vectorized float -> bfloat16 kernel writes for every
 *         element of a contiguous tensor. (torch's scalar path writes 0x7FC0:
 *         it does for a 0-dim tensor, for F16 -> BF16, and for the last
 *         n mod 16 elements of each block in F64 -> BF16; tpconv writes 0x7FC0
 *         for F16 -> BF16 and 0xFFFF otherwise.)
 * The floating-point environment is never changed; the conversions of
 * finite values are integer arithmetic or C casts, correct as long as the
 * caller has not enabled flush-to-zero.
 */
#ifndef TPC_CAST_H
#define TPC_CAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_dtype.h"
#include "tpc_err.h"

/* Can tensors of type `from` be cast to `to`? (true when from == to) */
bool tpc_cast_supported(tpc_dtype from, tpc_dtype to);

/*
 * Convert n elements: src holds n little-endian elements of type `from`, dst
 * receives n elements of type `to`. The buffers must not overlap. Unsupported
 * pairs return TPC_EUSAGE with a message naming both types. Runs in parallel
 * when n is large.
 */
int tpc_cast(void *dst, tpc_dtype to, const void *src, tpc_dtype from, uint64_t n, tpc_err *e);

/* Scalar conversions (the kernels above are built from these; also for tests). */
uint16_t tpc_f32_to_bf16(float f);  /* NaN -> 0xFFFF */
uint16_t tpc_f32_to_f16(float f);   /* NaN -> sign | 0x7E00 */
float tpc_bf16_to_f32(uint16_t h);
float tpc_f16_to_f32(uint16_t h);
float tpc_f64_to_f32(double d);     /* NaN: sign and top payload kept, quiet bit set */
double tpc_f32_to_f64(float f);     /* NaN: sign and payload kept, quiet bit set */
/* F8_E4M3 (torch float8_e4m3fn, the FP8 of DeepSeek-V3 and Qwen3-FP8 weights)
 * to F32, exact; NaN (0x7F, 0xFF) -> sign | 0x7FF00000 as c10 writes it.
 * Used by dequantization (tpc_quant.h); not a tpc_cast pair, as a cast
 * would drop the scale that gives the values their meaning. */
float tpc_f8e4m3_to_f32(uint8_t b);

#endif
