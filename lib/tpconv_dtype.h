/*
 * tpconv_dtype.h - element types (installed as <tpconv/tpconv_dtype.h>).
 *
 * Every type a supported format can store: the IEEE and brain floats, the
 * FP8/FP6/FP4 formats, integers, complex types, and torch's quantized types
 * (named so a program can show them; their bytes are carried as they are).
 * A tensor's bytes are little-endian, C-contiguous, tpc_dtype_bits bits per
 * element (sub-byte types packed, two F4 per byte).
 */
#ifndef TPCONV_DTYPE_H
#define TPCONV_DTYPE_H

#include "tpconv_api.h"

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

/* Bytes per element, rounded up (1 for sub-byte types). 0 for TPC_DT_INVALID. */
TPC_API unsigned tpc_dtype_size(tpc_dtype t);
TPC_API unsigned tpc_dtype_bits(tpc_dtype t);
/* Short display name: the safetensors name where one exists, else torch's ("BF16", "F8_E4M3"). */
TPC_API const char *tpc_dtype_name(tpc_dtype t);
/* A name as a user writes it: bf16, f16, fp16, half, f32, float32, F32 ...;
 * TPC_DT_INVALID when unknown. */
TPC_API tpc_dtype tpc_dtype_parse(const char *s);

#endif
