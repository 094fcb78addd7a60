/*
 * gguf.h - GGUF, llama.cpp's model file (ggml docs/gguf.md, ggml/include/gguf.h).
 *
 * Layout (little-endian, version 3):
 *   "GGUF" u32 version, i64 n_tensors, i64 n_kv
 *   n_kv x  (gguf string key, i32 value type, value)
 *            string = u64 length + bytes (no NUL); array = i32 element type,
 *            u64 count, elements (arrays of arrays are refused)
 *   n_tensors x (gguf string name, u32 n_dims, i64 ne[n_dims], i32 ggml type,
 *            u64 offset into the data section, a multiple of the alignment)
 *   padding to general.alignment (u32, default 32), then the data section.
 * ne[0] is the innermost (contiguous) dimension: a PyTorch shape reversed.
 * A quantized type packs ne[0] in blocks (ne[0] % block == 0).
 *
 * gguf-split: NAME-00001-of-0000N.gguf ... each a whole GGUF; every file
 * has split.no (u16, from 0), split.count (u16) and split.tensors.count
 * (i32, over all files); the first file holds every other key.
 *
 * The files of formats/gguf/ (this header is their interface):
 *   gguf.c          the container: read (the registry's "gguf" format, split
 *                   sets too), the KV list helpers
 *   gguf_write.c    write (tpc_gguf_write, gguf-split sets) and the
 *                   registry's writer (a GGUF back to GGUF, or from HF)
 *   gguf_arch.c     what convert_hf_to_gguf.py writes for a Hugging Face
 *                   model: the tensor list (GGUF names, Q/K permutation,
 *                   norms + 1, experts stacked, each tensor's type for an
 *                   --outtype); gguf_keys.c its general.* and {arch}.* keys
 *                   from config.json under the record's key rules
 *   gguf_hf.c       the inverse: a GGUF's tensors in Hugging Face form and
 *                   the config.json its keys give
 *   gguf_vocab.c    tokenizer.* keys from tokenizer.model (SentencePiece) or
 *                   tokenizer.json (BPE); gguf_special.c: gguf-py's
 *                   SpecialVocab (merges, special ids, chat template);
 *                   gguf_pre.c: tokenizer.ggml.pre, the pre-tokenizer table;
 *                   gguf_vocab_int.h: what the three share
 *   gguf_tok.c      the inverse: tokenizer.model / tokenizer.json and
 *                   tokenizer_config.json from the tokenizer.* keys
 *   spm.c, spm.h    SentencePiece's ModelProto, read and written
 * What differs per family (general.architecture, the key rules, the tensor
 * transforms, the tokenizer facts) is not here: it is data on the family
 * records, lib/tpc_family_gguf.h, and this code reads it.
 */
#ifndef TPC_GGUF_H
#define TPC_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_ckpt.h"
#include "tpc_err.h"
#include "tpc_format.h"
#include "tpc_ggml.h"

#define TPC_GGUF_MAGIC 0x46554747u /* "GGUF" read as u32 LE */
#define TPC_GGUF_VERSION 3
#define TPC_GGUF_DEFAULT_ALIGNMENT 32

/* KV value types, tpc_gguf_vt: lib/tpc_ggml.h (the family records' GGUF
 * keys are typed with them). */

/* Tensor types, tpc_ggml_type / tpc_ggml_info_of / tpc_ggml_by_name: lib/tpc_ggml.h
 * (the dequantizer in lib/ needs them). */

/* A KV's number: u for unsigned types and bool, i for signed, f for floats. */
typedef union tpc_gguf_num {
	uint64_t u;
	int64_t i;
	double f;
} tpc_gguf_num;

/* One key-value pair. Scalars in v (u for unsigned and bool, i for signed,
 * f for floats); STRING in s[0..slen); ARRAY: `n` elements of type atype,
 * numbers packed little-endian at their width in arr, strings as
 * astr[k][0..alen[k]). */
typedef struct tpc_gguf_kv {
	char *key;
	int type; /* tpc_gguf_vt */
	tpc_gguf_num v;
	char *s;
	uint64_t slen;
	int atype;
	uint64_t n;
	void *arr;
	char **astr;
	uint64_t *alen;
} tpc_gguf_kv;

/* An ordered list of KVs (order is the file's order). Owns everything. */
typedef struct tpc_gguf_kvs {
	tpc_gguf_kv *kv;
	size_t n, cap;
} tpc_gguf_kvs;

void tpc_gguf_kvs_release(tpc_gguf_kvs *l);
/* Index of `key`, or -1. */
ptrdiff_t tpc_gguf_kvs_find(const tpc_gguf_kvs *l, const char *key);
/* Add, or replace in place when the key is there. 0, or -1 out of memory. */
int tpc_gguf_kvs_uint(tpc_gguf_kvs *l, const char *key, int type, uint64_t v);  /* U8 U16 U32 U64 BOOL */
int tpc_gguf_kvs_int(tpc_gguf_kvs *l, const char *key, int type, int64_t v);    /* I8 I16 I32 I64 */
int tpc_gguf_kvs_float(tpc_gguf_kvs *l, const char *key, int type, double v);   /* F32 F64 */
int tpc_gguf_kvs_str(tpc_gguf_kvs *l, const char *key, const char *s, size_t len);
/* An array of numbers: n elements of atype, packed at their width (copied). */
int tpc_gguf_kvs_arr(tpc_gguf_kvs *l, const char *key, int atype, const void *data, uint64_t n);
/* An array of strings s[k][0..len[k]) (copied; len NULL: NUL-terminated). */
int tpc_gguf_kvs_strs(tpc_gguf_kvs *l, const char *key, const char *const *s, const uint64_t *len, uint64_t n);
void tpc_gguf_kvs_del(tpc_gguf_kvs *l, const char *key);

/* One tensor to write: `name` in the file, values from `t` (a description of
 * ck in PyTorch order, any float dtype; its GGUF ne[] is t's shape
 * reversed), stored as `type`: F32, F16, BF16, a type tpc_ggml_quantizes
 * (quantized from the values as ggml's reference quantizers do; Q8_0 is
 * also gguf-py's quants.py), or, when t is a GGUF block tensor
 * read from a GGUF file (tpc_gguf_packed), its own packed type, bytes
 * copied. */
typedef struct tpc_gguf_wtensor {
	char *name;
	tpc_tensor t; /* owned description (tpc_tensor_release) */
	int type;     /* tpc_ggml_type */
	/* Values computed by gguf_arch.c rather than read from ck (Gemma's
	 * norm weights + 1): t.nbytes bytes of t.dtype in C order, owned
	 * (freed by tpc_gguf_wtensors_release); t then only gives the dtype
	 * and shape. NULL: the values are t's, read from ck. */
	void *mem;
	/* ne[] entries written: 0, t.ndim; else fewer, the outer ones of 1
	 * dropped (llama-quantize writes ggml_n_dims of them) */
	int ndims;
} tpc_gguf_wtensor;

void tpc_gguf_wtensors_release(tpc_gguf_wtensor *t, size_t n);

/*
 * Write a GGUF file at `path` (atomically; o->flags TPC_W_FORCE) holding
 * kv (general.alignment, when present, sets the alignment) then tensors
 * t[0..n) in that order, data streamed from ck with bounded memory.
 * o->max_shard_size > 0: a gguf-split set instead, path's stem + "-0000K-of-
 * 0000N.gguf" in path's folder, a new file started before a tensor that
 * would take the current one past the size (a tensor larger than the size
 * gets a file of its own), the split.* keys added.
 */
int tpc_gguf_write(const tpc_ckpt *ck, const tpc_gguf_kvs *kv, const tpc_gguf_wtensor *t, size_t n,
		   const char *path, const tpc_write_opts *o, tpc_err *e);

/*
 * The GGUF convert_hf_to_gguf.py writes for a Hugging Face model (gguf_arch.c):
 * ck holds its tensors under HF names; dir is the model folder (config.json,
 * tokenizer.model / tokenizer.json, tokenizer_config.json,
 * generation_config.json); outtype "f32" "f16" "bf16" "q8_0" or "auto" (NULL:
 * auto, the reference's rule). Fills kv (general.*, {arch}.*, tokenizer.*)
 * and the tensor list *t[0..*n) in the reference's order. A tensor it cannot
 * place, a family the reference has no architecture for, or a config that
 * lacks a fact it needs: an error naming it (TPC_E_UNSUPPORTED/TPC_E_FORMAT).
 */
int tpc_gguf_from_hf(const tpc_ckpt *ck, const char *dir, const char *outtype, tpc_gguf_kvs *kv,
		     tpc_gguf_wtensor **t, size_t *n, tpc_err *e);
/* The same with tokenizer.ggml.pre given for a BPE tokenizer (NULL: as
 * tpc_gguf_vocab names it from tokenizer.json) and flags: TPC_GGUF_NO_MTP
 * leaves the multi-token-prediction layers out, as convert_hf_to_gguf.py
 * --no-mtp (their tensors, their place in block_count, nextn_predict_layers;
 * refused for a family whose GGUF has none: tpc_gguf_arch_has_mtp). */
#define TPC_GGUF_NO_MTP 1u
int tpc_gguf_from_hf_pre(const tpc_ckpt *ck, const char *dir, const char *outtype, const char *pre, unsigned flags,
			 tpc_gguf_kvs *kv, tpc_gguf_wtensor **t, size_t *n, tpc_err *e);
/*
 * The adapter GGUF llama.cpp's convert_lora_to_gguf.py writes (gguf_lora.c)
 * for the PEFT LoRA adapter whose tensors ad holds (its config lc, its folder
 * adapter_dir: general.name) over the base model in folder base_dir (only its
 * config.json is read, as the script's --base): kv (general.architecture,
 * general.type "adapter", adapter.type "lora", general.name,
 * adapter.lora.alpha, general.quantization_version) and the tensors
 * <gguf name>.lora_a / .lora_b in the reference's order, the family's
 * transforms applied as LoraTorchTensor applies them. outtype f32 (NULL),
 * f16, bf16 or q8_0. Refused by name (TPC_EINPUT): config members an adapter
 * GGUF cannot express (use_rslora, use_dora, lora_bias, fan_in_fan_out,
 * alpha_pattern, modules_to_save), a key that is not a LoRA A or B, an A
 * without its B, shapes that do not fit, a module with no GGUF name or whose
 * weight the family transforms in a way no LoRA pair gets.
 */
struct tpc_lora_cfg;
int tpc_gguf_lora_from_peft(const tpc_ckpt *ad, const struct tpc_lora_cfg *lc, const char *base_dir,
			    const char *adapter_dir, const char *outtype, tpc_gguf_kvs *kv, tpc_gguf_wtensor **t, size_t *n,
			    tpc_err *e);

/* The registry's lora_to_peft (lib/tpc_format.h), the inverse: an adapter
 * GGUF (ck opened under GGUF names) renamed in place to PEFT's keys
 * (base_model.model.<module>.lora_A.weight, lora_embedding_A ...), lora_b's
 * Q/K rows and token_embd's lora_a put back, and the adapter_config.json
 * PEFT would write for it (r, rank_pattern where pairs differ,
 * lora_alpha, target_modules). Refused naming the key or tensor: a
 * general.type other than "adapter", adapter.type other than "lora", no
 * adapter.lora.alpha, an architecture other than the base's, a tensor that
 * is not a .lora_a/.lora_b, one without its partner, shapes that do not fit. */
int tpc__gguf_lora_to_peft(tpc_ckpt *ck, const char *base, char **json, tpc_err *e);

/* general.name as the reference makes it from model folder `dir`'s name
 * (gguf-py Metadata.id_to_title); malloc'd, NULL out of memory. */
char *tpc__gguf_title(const char *dir);
/* A value type's width in bytes (0: string, array, unknown), and a scalar
 * key's value as the file stores it (little-endian, the width's first bytes
 * of raw; f32 rounded from the double it is kept in): returns the width. */
int tpc__gguf_vt_width(int t);
int tpc__gguf_kv_scalar(const tpc_gguf_kv *k, uint8_t raw[8]);

/*
 * The tokenizer.* keys for the tokenizer in `dir` (gguf_vocab.c), added to kv
 * as the reference converter adds them for architecture `arch` (its
 * vocab_size from config.json, padded as the reference pads). 0 also when
 * the folder has no tokenizer (nothing added; the caller decides).
 */
int tpc_gguf_vocab(const char *dir, const char *arch, int64_t vocab_size, tpc_gguf_kvs *kv, tpc_err *e);
/* The same with the BPE pre-tokenizer name (tokenizer.ggml.pre) given: the
 * reference derives it from a hash of Hugging Face tokenizers' output on a
 * check text, which C does not compute, so tpc_gguf_vocab (pre NULL) names
 * the llama.cpp pre-tokenizer that splits as tokenizer.json's pre_tokenizer
 * does, and refuses one it cannot map, naming the key (gguf_pre.c,
 * doc/gguf_vocab.md). arch is the
 * GGUF architecture of a family record (tpc_family_by_gguf): its vocab
 * field says which of the reference's set_vocab runs; another is refused. */
int tpc_gguf_vocab_pre(const char *dir, const char *arch, int64_t vocab_size, const char *pre, tpc_gguf_kvs *kv,
		       tpc_err *e);

/*
 * Reading (gguf.c). One GGUF file image p[0..n), source `src` of ck: its
 * tensors appended to ck under their GGUF names, in file order, PyTorch
 * shapes (ne reversed); plain types as views, block types as tensors whose
 * F32 values are computed when streamed (TPC_DQ_GGML); its KVs appended to
 * kv in file order. Errors are TPC_EINPUT naming `path`, the key or tensor
 * and the byte offset. For tests and fuzzers; the registry's open adds the
 * split-set handling and hangs the KV list off the checkpoint.
 */
int tpc_gguf_from_buffer(tpc_ckpt *ck, const uint8_t *p, uint64_t n, int src, const char *path, tpc_gguf_kvs *kv,
			 tpc_err *e);
/* The KV list of a checkpoint read from GGUF (split.* keys removed: the
 * checkpoint is the whole model), or NULL. */
const tpc_gguf_kvs *tpc_gguf_ckpt_kvs(const tpc_ckpt *ck);
/* The ggml type of a whole, unpermuted block tensor read from GGUF (its
 * packed bytes are dq->c[0]), else TPC_GGML_NONE. */
int tpc_gguf_packed(const tpc_tensor *t);

/*
 * Hugging Face form (gguf_hf.c): a checkpoint read from GGUF with its
 * tensors renamed and laid out as the Hugging Face model the reference
 * converter started from (the inverse of tpc_gguf_from_hf), and the
 * config.json its metadata gives. tpc_fmt_gguf's open does the first under
 * TPC_OPEN_HF_NAMES; its hf_config hook is the second.
 */
int tpc__gguf_to_hf(tpc_ckpt *ck, const tpc_gguf_kvs *kv, tpc_err *e);
/* exp(x) as torch 2.x computes a float32 tensor's on the CPU (ATen's
 * vectorised exp: SLEEF's expf_u10, FMA steps; bit for bit on 2.1M values
 * against torch 2.14's AVX512 path), for the reference's -torch.exp(A_log)
 * (gguf_arch.c) and its inverse (gguf_hf.c) */
float tpc__gguf_torch_expf(float x);
int tpc__gguf_hf_config(const tpc_ckpt *ck, char **json, tpc_err *e);
/* Its hf_tokenizer hook (gguf_tok.c): tokenizer.model and tokenizer.json (a
 * "llama" vocabulary) or tokenizer.json (a "gpt2" one) and
 * tokenizer_config.json from the tokenizer.* keys, the inverse of
 * tpc_gguf_vocab. */
int tpc__gguf_hf_tokenizer(const tpc_ckpt *ck, tpc_hf_file *f, size_t *n, char *why, size_t whylen, tpc_err *e);

/*
 * llama-quantize's file types (gguf_quant.c): --outtype q4_0, q4_1, q5_0,
 * q5_1, q2_k, q3_k_s, q3_k_m, q3_k_l, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k
 * (q3_k, q4_k, q5_k: the _m ones, as llama-quantize's aliases). The file is
 * the one llama.cpp's llama-quantize (0.7) writes, without an importance
 * matrix, from the f32 GGUF tpconv (= convert_hf_to_gguf.py) writes, byte
 * for byte: tensors in the model loader's order (layer number, then name),
 * each tensor's type by llama_tensor_get_type (tensor_allows_quantization,
 * the output / tied token_embd rule, the mixture's attn_v / ffn_down /
 * attn_output rows with their counters, n_gqa and expert count from the
 * KVs, tensor_type_fallback for rows that are not whole blocks), quantized
 * by ggml's reference quantizers (tpc_ggml_quantize), and the KVs copied
 * with general.quantization_version (2) and general.file_type moved to the
 * end; a 70B model's (LLM_TYPE_70B: 80-layer llama with grouped KV heads,
 * 80-layer qwen2 or deci, 68-layer jais2) attn_v lifted from Q3_K / Q4_K to
 * Q5_K. Not applied: --pure, --imatrix, --tensor-type and the other
 * llama-quantize options; the IQ types below 4 bits, MXFP4 and Q2_K_S (q2_k_s
 * needs an imatrix). iq4_nl, iq4_xs, tq1_0 and tq2_0 are written.
 */
typedef struct tpc_gguf_mix {
	const char *name; /* --outtype, "q4_k_m" */
	int ftype;        /* general.file_type (llama_ftype) */
	int base;         /* the default tensor type (llama_ftype_get_default_type) */
} tpc_gguf_mix;

/* The file type named (case-insensitive), NULL if none. */
const tpc_gguf_mix *tpc_gguf_mix_by_name(const char *name);
/* For a GGUF input: the same, and q8_0 as llama-quantize's Q8_0 file type
 * (general.file_type 7; its order, KVs and row fallbacks). */
const tpc_gguf_mix *tpc_gguf_requant_by_name(const char *name);
/* Every --outtype a GGUF output takes, for messages and --help. */
const char *tpc_gguf_outtypes(void);
/* For a llama-quantize type name tpconv refuses, why (" (...)"), else "". */
const char *tpc_gguf_outtype_note(const char *name);
/* t[0..n) (each with its own type: a tensor the mixture leaves alone keeps
 * it) reordered and retyped, kv's file-type keys set, as llama-quantize
 * does to the file holding them. */
int tpc_gguf_mix_apply(const tpc_gguf_mix *m, tpc_gguf_kvs *kv, tpc_gguf_wtensor *t, size_t n, tpc_err *e);

/* The registry's writer (gguf_write.c): a checkpoint read from GGUF is
 * written back with its KVs and its tensors' types (o->outtype: f32, f16,
 * bf16 or q8_0 for its float tensors of 2 or more dims, or a
 * llama-quantize file type over its tensors as they are, a block tensor
 * dequantized where its type changes); any other goes through
 * tpc_gguf_from_hf (a llama-quantize file type: over its f32 GGUF). */
int tpc__gguf_write_fmt(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *path,
			const tpc_write_opts *o, tpc_err *e);

#endif
