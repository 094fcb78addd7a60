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

typedef enum tpc_dtype {
	TPC_DT_INVALID = 0,
	TPC_BOOL,
	TPC_U8,
	TPC_I8,
	TPC_I16,
	TPC_U16,
	TPC_I32,
	TPC_U32,
	TPC_I64,
	TPC_U64,
	TPC_F16,
	TPC_BF16,
	TPC_F32,
	TPC_F64,
	TPC_C32,  /* torch complex32 (chalf): two f16 */
	TPC_C64,  /* two f32 */
	TPC_C128, /* two f64 (torch only) */
	TPC_F8_E4M3,
	TPC_F8_E5M2,
	TPC_F8_E4M3FNUZ,
	TPC_F8_E5M2FNUZ,
	TPC_F8_E8M0,
	TPC_F4,     /* safetensors F4 = torch float4_e2m1fn_x2 (2 per byte) */
	TPC_F6_E2M3,
	TPC_F6_E3M2,
	TPC_QINT8,
	TPC_QUINT8,
	TPC_QINT32,
	TPC_QUINT4X2,
	TPC_QUINT2X4,
	TPC_DT_COUNT
} tpc_dtype;

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

/* Bytes per element, rounded up (1 for sub-byte types). 0 for TPC_DT_INVALID. */
unsigned tpc_dtype_size(tpc_dtype t);
unsigned tpc_dtype_bits(tpc_dtype t);
/* Short display name: the safetensors name where one exists, else torch's. */
const char *tpc_dtype_name(tpc_dtype t);

/* Lookups; return TPC_DT_INVALID when unknown. */
tpc_dtype tpc_dtype_from_st(const char *name);
tpc_dtype tpc_dtype_from_torch(const char *attr);      /* "float32", "half", "float" too */
tpc_dtype tpc_dtype_from_storage(const char *klass);   /* "FloatStorage" */
/* User-facing names on the command line: bf16, f16, fp16, half, f32, float32, F32 ... */
tpc_dtype tpc_dtype_parse(const char *s);

#endif
