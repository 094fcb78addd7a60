/*
 * tpc_dtype.h - the element types tpconv knows, with their names in each format.
 *
 * One table, indexed by tpc_dtype, gives for each type:
 *   bits     element size in bits (4 for F4, 6 for F6_*, 8..128 otherwise)
 *   st       safetensors name ("F32"), NULL when safetensors has none
 *   torch    torch dtype attribute ("float32"; `torch.float32`)
 *   storage  legacy storage class ("FloatStorage"), NULL for the types torch
 *            saves through UntypedStorage + _rebuild_tensor_v3
 *   st_rank  position in safetensors' `enum Dtype` (its writer sorts tensors
 *            by dtype descending in this order); -1 when not a safetensors type
 *
 * Quantized torch types (QInt8 ...) are listed so `inspect` can name them;
 * they carry TPC_DTF_QUANT and are refused by converters unless dequantized.
 * Types with TPC_DTF_READONLY are read and copied byte for byte, never cast.
 */
#ifndef TPC_DTYPE_H
#define TPC_DTYPE_H

#include <stdint.h>

#include "tpconv_dtype.h" /* tpc_dtype; its name, size, bits and parse */

enum {
	TPC_DTF_FLOAT = 1u << 0,    /* a real floating type we can cast (f16 bf16 f32 f64) */
	TPC_DTF_INT = 1u << 1,      /* integer or bool */
	TPC_DTF_COMPLEX = 1u << 2,
	TPC_DTF_QUANT = 1u << 3,    /* torch quantized type */
	TPC_DTF_READONLY = 1u << 4, /* known by name only: carried bytewise, never cast */
	TPC_DTF_SUBBYTE = 1u << 5,  /* bits < 8 */
};

typedef struct tpc_dtype_info {
	const char *st;
	const char *torch;
	const char *storage;
	unsigned bits;
	int st_rank;
	unsigned flags;
} tpc_dtype_info;

const tpc_dtype_info *tpc_dtype_get(tpc_dtype t);

/* Lookups; return TPC_DT_INVALID when unknown. */
tpc_dtype tpc_dtype_from_st(const char *name);
tpc_dtype tpc_dtype_from_torch(const char *attr);      /* "float32", "half", "float" too */
tpc_dtype tpc_dtype_from_storage(const char *klass);   /* "FloatStorage" */
/* A config's float dtype (torch_dtype, dtype, out_dtype): float32, float16
 * or bfloat16 under any name tpc_dtype_parse takes, "torch." before it or
 * not; anything else (NULL too) TPC_DT_INVALID. */
tpc_dtype tpc_dtype_float_named(const char *s);

#endif
