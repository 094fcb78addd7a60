/* tpc_family_int.h - lib-private: what the record files (tpc_family.c, the
 * decoders; tpc_family_classic.c, GPT-2, GPT-NeoX, BERT, LiBai, DiT and
 * DALLE2) share: the tensor-row, role-list, layer-parts and name-list
 * initialisers, and the second file's records. */
#ifndef TPC_FAMILY_INT_H
#define TPC_FAMILY_INT_H

#include <stddef.h>

#include "tpc_family.h"

/* The layer templates ({L} the layer) of the HF, Megatron-Core,
 * TensorRT-LLM and GGUF names */
#define HF_L "model.layers.{L}."
#define MC_L "decoder.layers.{L}."
#define TR_L "transformer.layers.{L}."
#define GG_L "blk.{L}."

/* A row: role, bias, then names in HF, Megatron-Core, vLLM, TensorRT-LLM, GGUF order. */
#define ROW(R, B, HF, MC, VL, TR, GG) {TPC_ROLE_##R, B, {HF, MC, VL, TR, GG}, false, false, NULL}
/* A row of routed experts that transformers (>= 5) fuses into parameter FU
 * (tpc_tensor_row.hf_fused). */
#define ROW_FUSED(R, B, HF, MC, VL, TR, GG, FU) {TPC_ROLE_##R, B, {HF, MC, VL, TR, GG}, false, false, FU}
#define END_ROW {TPC_ROLE_NONE, false, {NULL, NULL, NULL, NULL, NULL}, false, false, NULL}
/* A list of roles ending with TPC_ROLE_NONE (tpc_family.f32_roles) */
#define ROLES(...) ((const tpc_role[]){__VA_ARGS__, TPC_ROLE_NONE})
/* Layer parts (tpc_family.h); fields left out are the LLaMA's zero values */
#define PARTS(...) .has_parts = true, .parts = {__VA_ARGS__}
/* a NULL-terminated list of names */
#define A(...) ((const char *const[]){__VA_ARGS__, NULL})

extern const tpc_family tpc__family_classic[];
extern const size_t tpc__family_classic_count;

#endif
