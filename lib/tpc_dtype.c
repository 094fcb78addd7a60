/* tpc_dtype.c - the dtype table; see tpc_dtype.h. */
#include "tpc_dtype.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

#define F TPC_DTF_FLOAT
#define I TPC_DTF_INT
#define C TPC_DTF_COMPLEX
#define Q TPC_DTF_QUANT
#define R TPC_DTF_READONLY
#define S TPC_DTF_SUBBYTE

/* st_rank follows safetensors' `enum Dtype` declaration order (FORMATS.md §3.2). */
static const tpc_dtype_info table[TPC_DT_COUNT] = {
	[TPC_DT_INVALID] = {NULL, NULL, NULL, 0, -1, 0},
	[TPC_BOOL] = {"BOOL", "bool", "BoolStorage", 8, 0, I},
	[TPC_F4] = {"F4", "float4_e2m1fn_x2", NULL, 4, 1, R | S},
	[TPC_F6_E2M3] = {"F6_E2M3", NULL, NULL, 6, 2, R | S},
	[TPC_F6_E3M2] = {"F6_E3M2", NULL, NULL, 6, 3, R | S},
	[TPC_U8] = {"U8", "uint8", "ByteStorage", 8, 4, I},
	[TPC_I8] = {"I8", "int8", "CharStorage", 8, 5, I},
	[TPC_F8_E5M2] = {"F8_E5M2", "float8_e5m2", NULL, 8, 6, R},
	[TPC_F8_E4M3] = {"F8_E4M3", "float8_e4m3fn", NULL, 8, 7, R},
	[TPC_F8_E8M0] = {"F8_E8M0", "float8_e8m0fnu", NULL, 8, 8, R},
	[TPC_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", "float8_e4m3fnuz", NULL, 8, 9, R},
	[TPC_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", "float8_e5m2fnuz", NULL, 8, 10, R},
	[TPC_I16] = {"I16", "int16", "ShortStorage", 16, 11, I},
	[TPC_U16] = {"U16", "uint16", NULL, 16, 12, I},
	[TPC_F16] = {"F16", "float16", "HalfStorage", 16, 13, F},
	[TPC_BF16] = {"BF16", "bfloat16", "BFloat16Storage", 16, 14, F},
	[TPC_I32] = {"I32", "int32", "IntStorage", 32, 15, I},
	[TPC_U32] = {"U32", "uint32", NULL, 32, 16, I},
	[TPC_F32] = {"F32", "float32", "FloatStorage", 32, 17, F},
	[TPC_C64] = {"C64", "complex64", "ComplexFloatStorage", 64, 18, C},
	[TPC_F64] = {"F64", "float64", "DoubleStorage", 64, 19, F},
	[TPC_I64] = {"I64", "int64", "LongStorage", 64, 20, I},
	[TPC_U64] = {"U64", "uint64", NULL, 64, 21, I},
	[TPC_C32] = {NULL, "complex32", NULL, 32, -1, C | R},
	[TPC_C128] = {NULL, "complex128", "ComplexDoubleStorage", 128, -1, C},
	[TPC_QINT8] = {NULL, "qint8", "QInt8Storage", 8, -1, Q},
	[TPC_QUINT8] = {NULL, "quint8", "QUInt8Storage", 8, -1, Q},
	[TPC_QINT32] = {NULL, "qint32", "QInt32Storage", 32, -1, Q},
	[TPC_QUINT4X2] = {NULL, "quint4x2", "QUInt4x2Storage", 8, -1, Q},
	[TPC_QUINT2X4] = {NULL, "quint2x4", "QUInt2x4Storage", 8, -1, Q},
};

const tpc_dtype_info *tpc_dtype_get(tpc_dtype t)
{
	if ((int)t <= 0 || t >= TPC_DT_COUNT)
		return &table[TPC_DT_INVALID];
	return &table[t];
}

unsigned tpc_dtype_bits(tpc_dtype t)
{
	return tpc_dtype_get(t)->bits;
}

unsigned tpc_dtype_size(tpc_dtype t)
{
	unsigned b = tpc_dtype_bits(t);
	return b ? (b + 7) / 8 : 0;
}

const char *tpc_dtype_name(tpc_dtype t)
{
	const tpc_dtype_info *d = tpc_dtype_get(t);
	if (d->st)
		return d->st;
	return d->torch ? d->torch : "invalid";
}

/* The dtype whose name in one of the table's columns (the const char *
 * member at offset off: st, torch, storage) is s, compared with cmp. */
static tpc_dtype by_column(size_t off, const char *s, int (*cmp)(const char *, const char *))
{
	for (int i = 1; i < TPC_DT_COUNT; i++) {
		const char *c = *(const char *const *)((const char *)&table[i] + off);
		if (c && !cmp(c, s))
			return (tpc_dtype)i;
	}
	return TPC_DT_INVALID;
}

/* Other names of dtypes: torch's attribute aliases, and what users type. */
typedef struct dt_alias {
	const char *name;
	tpc_dtype t;
} dt_alias;
static const dt_alias torch_alias[] = {
	{"float", TPC_F32}, {"double", TPC_F64}, {"half", TPC_F16}, {"long", TPC_I64},
	{"int", TPC_I32}, {"short", TPC_I16}, {"cfloat", TPC_C64}, {"cdouble", TPC_C128},
	{"chalf", TPC_C32}, {"complex32", TPC_C32}, {NULL, TPC_DT_INVALID},
};
static const dt_alias user_alias[] = {
	{"bf16", TPC_BF16}, {"bfloat16", TPC_BF16}, {"f16", TPC_F16}, {"fp16", TPC_F16},
	{"half", TPC_F16}, {"float16", TPC_F16}, {"f32", TPC_F32}, {"fp32", TPC_F32},
	{"float", TPC_F32}, {"float32", TPC_F32}, {"f64", TPC_F64}, {"fp64", TPC_F64},
	{"double", TPC_F64}, {"float64", TPC_F64}, {NULL, TPC_DT_INVALID},
};

static tpc_dtype by_alias(const dt_alias *a, const char *s, int (*cmp)(const char *, const char *))
{
	for (; a->name; a++)
		if (!cmp(a->name, s))
			return a->t;
	return TPC_DT_INVALID;
}

tpc_dtype tpc_dtype_from_st(const char *name)
{
	return by_column(offsetof(tpc_dtype_info, st), name, strcmp);
}

tpc_dtype tpc_dtype_from_torch(const char *attr)
{
	tpc_dtype t = by_column(offsetof(tpc_dtype_info, torch), attr, strcmp);
	return t != TPC_DT_INVALID ? t : by_alias(torch_alias, attr, strcmp);
}

tpc_dtype tpc_dtype_from_storage(const char *klass)
{
	return by_column(offsetof(tpc_dtype_info, storage), klass, strcmp);
}

tpc_dtype tpc_dtype_float_named(const char *s)
{
	if (!s)
		return TPC_DT_INVALID;
	tpc_dtype t = tpc_dtype_parse(strncmp(s, "torch.", 6) ? s : s + 6);
	return t == TPC_F32 || t == TPC_F16 || t == TPC_BF16 ? t : TPC_DT_INVALID;
}

tpc_dtype tpc_dtype_parse(const char *s)
{
	tpc_dtype t = by_alias(user_alias, s, strcasecmp);
	if (t == TPC_DT_INVALID)
		t = by_column(offsetof(tpc_dtype_info, st), s, strcasecmp);
	return t != TPC_DT_INVALID ? t : tpc_dtype_from_torch(s);
}
