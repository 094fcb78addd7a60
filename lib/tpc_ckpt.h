/*
 * tpc_ckpt.h - the checkpoint model every format and command shares.
 *
 * A checkpoint is an ordered list of named tensors plus string metadata and,
 * for pickled formats, the object tree the tensors hang in. A tensor is a
 * description, not a buffer:
 *
 *   dtype, shape[ndim] (int64, ndim may be 0), stride[ndim] (in elements),
 *   a byte source (which mapped input) and the byte offset of element
 *   [0, 0, ...] inside it.
 *
 * Views, shared (tied) storages, transposed and Fortran-order tensors, and the
 * column and row slices the sharder makes are all descriptions over the same
 * mapped bytes. Bytes move once, at write time: a C-contiguous tensor is copied
 * from its source in the kernel (copy_file_range) or with large writes, and a
 * strided one is gathered through a bounded buffer (tpc_ckpt_read_bytes).
 *
 * Sources are input files mapped read-only (tpc_map) or memory buffers the
 * checkpoint owns (an inflated zip record). Storages record the torch storage a
 * tensor came from (key, byte range), so writers can keep tied tensors tied and
 * `inspect` can show sharing; formats without storages leave storage = -1.
 *
 * Invariants after a reader returns (checked by tpc_ckpt_validate):
 *   - names are unique ("" is allowed: torch.save of a bare tensor);
 *   - every element any tensor addresses lies inside its source (and inside its
 *     storage, when it has one);
 *   - numel and nbytes were computed with overflow checks.
 */
#ifndef TPC_CKPT_H
#define TPC_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_dtype.h"
#include "tpc_err.h"
#include "tpc_hash.h"
#include "tpc_io.h"
#include "tpc_value.h"
#include "tpconv_ckpt.h" /* the public part (opaque there), declared TPC_API first */

#define TPC_MAX_NDIM 64 /* torch has no fixed limit; 64 covers every real model */

enum {
	TPC_TF_PARAMETER = 1u << 0,     /* torch.nn.Parameter */
	TPC_TF_REQUIRES_GRAD = 1u << 1,
	TPC_TF_QUANTIZED = 1u << 2,     /* `meta` holds the quantizer parameters */
	TPC_TF_BYTESWAP = 1u << 3,      /* source bytes are big-endian: swap per element */
	TPC_TF_NODATA = 1u << 4,        /* no bytes (meta tensor) */
	TPC_TF_ZERO = 1u << 5,          /* all bytes are zero (padding); no source */
	TPC_TF_KEPT_F32 = 1u << 6,      /* a cast to f16/bf16 left it f32, as transformers keeps it */
};

typedef struct tpc_storage {
	char *key;         /* torch storage key ("0", "94639182226992"); NULL if none */
	char *location;    /* "cpu", "cuda:0"; NULL if none */
	tpc_dtype dtype;
	int src;           /* source index */
	uint64_t offset;   /* byte offset of the storage in the source */
	uint64_t nbytes;   /* storage size in bytes */
} tpc_storage;

struct tpc_dequant;

typedef struct tpc_tensor {
	char *name;
	tpc_dtype dtype;       /* logical dtype (what writers emit) */
	tpc_dtype src_dtype;   /* dtype of the bytes at the source (differs when a cast is pending) */
	int ndim;
	int64_t *shape;        /* ndim entries (owned, one block with stride) */
	int64_t *stride;       /* ndim entries, in elements of src_dtype */
	uint64_t numel;
	uint64_t nbytes;       /* numel * size(dtype): bytes written for this tensor */
	int src;               /* source index; -1 when TPC_TF_NODATA */
	uint64_t offset;       /* byte offset of element [0,...] in the source */
	int64_t storage;       /* index into storages, or -1 */
	int64_t storage_offset;/* element offset inside the storage (torch) */
	uint32_t flags;
	tpc_value *meta;       /* format extras (quantizer params...), owned reference or NULL */
	int64_t alias_of;      /* a tie no storage shows: index of the tensor this one is by record
	                          (merge of a set whose manifest records it, DeepSpeed's shared_params),
	                          or -1; it holds while both descriptions are equal (tpc_ckpt_ties) */
	/* Composite: the tensor is the concatenation of parts[0..nparts) along
	 * cat_dim (src = -1). Parts have the composite's ndim and src_dtype and
	 * equal sizes in every other dim; each part is a view, a zero fill or
	 * itself a composite. Owned (deep) by the tensor. */
	struct tpc_tensor *parts;
	int nparts;
	int cat_dim;
	/* Dequantized: the tensor's values are computed from packed companions
	 * (src = -1, src_dtype F32); see struct tpc_dequant below. Owned. */
	struct tpc_dequant *dq;
} tpc_tensor;

/*
 * A dequantized tensor (convert --dequantize, tpc_quant.h): a 2-D weight
 * [O, I] whose F32 image is computed from the quantized tensors it was made
 * from, which it owns as deep copies in c[] (views over the mapped input, like
 * any tensor; they are no longer in the checkpoint's list). Nothing is
 * computed when the description is built: tpc_ckpt_read_bytes computes the
 * requested elements, a bounded number of rows at a time, when a writer
 * streams the tensor, so a pending cast to bf16/f16 (dtype != src_dtype) and
 * every writer work on it as on any other tensor. Element (o, i):
 *
 *   FP8    c[0] weight F8_E4M3 [O, I], c[1] scale [ceil(O/bo), ceil(I/bi)]
 *          (float): w = e4m3(c0[o, i]) * c1[o / bo, i / bi], one F32 rounding
 *          (DeepSeek-V3 inference/kernel.py weight_dequant). Per-tensor
 *          scales are the block [O, I], per-channel ones [1, I].
 *   GPTQ   c[0] qweight I32 [I / p, O] (p = 32 / bits values per int32,
 *          packed along the input, value k of a word in bits [k*bits, ...)),
 *          c[1] scales [G, O] (float), c[2] qzeros I32 [G, O / p] (packed
 *          along the output), c[3] g_idx I32 [I] or absent (g = i / group):
 *          w = (q - z) * s with z = (stored + 1) mod 2^bits when zero_plus_one
 *          (AutoGPTQ's v1 format), else z = stored (gptq_v2).
 *   AWQ    c[0] qweight I32 [I, O / 8] packed along the output in AutoAWQ's
 *          order (output column 8j + n is nibble [0,4,1,5,2,6,3,7][n] of word
 *          j), c[1] scales [G, O], c[2] qzeros I32 [G, O / 8] in the same
 *          order, g = i / group: w = (q - z) * s.
 *   CT     compressed-tensors pack-quantized: c[0] weight_packed I32
 *          [O, ceil(I / p)] packed along the input (value i of a row in bits
 *          [(i % p) * bits, ...) of word i / p, stored + 2^(bits-1)), c[1]
 *          weight_scale [O, G] (float), then weight_zero_point I32
 *          [ceil(O / p), G] packed along the output (asymmetric; ct_zp) and
 *          weight_g_idx [I] (actorder; ct_gidx): w = (q - z) * s with q, z
 *          the signed values and g = g_idx[i], or i / group.
 *   GGML   a GGUF block tensor (formats/gguf/gguf.c, tpc_ggml.h): c[0] the packed
 *          blocks, a U8 view [rows * row_bytes], ggml type `gtype`; the
 *          tensor has any ndim >= 1, its last dim (ne[0]) a multiple of the
 *          block, and row o of the image (the last dim's rows, in C order)
 *          is block row o of c[0], or with rope_hd > 0 (a llama-family
 *          attn_q/attn_k read under its Hugging Face name) block row
 *          h*hd + 2i + t for o = h*hd + t*hd/2 + i (hd = rope_hd): the
 *          inverse of convert_hf_to_gguf.py's permute. Values are
 *          tpc_ggml_dequant's; windows as for the other kinds (2-D only).
 *   FP4    c[0] packed U8 [O, I / 2] (E2M1, element 2j the low nibble),
 *          c[1] scales [O, I / group]: F8_E4M3 (NVFP4) or U8 E8M0 (MXFP4),
 *          c[2] the tensor's one-element F32 scale (NVFP4): w = e2m1 * s with
 *          s = float(c1) / c2 (compressed-tensors' global scale, fp4_div) or
 *          float(c1) * c2 (ModelOpt's weight_scale_2), 2^(c1 - 127) (MXFP4).
 *   MXFP4_T  gpt-oss's experts: c[0] blocks U8 [E, R, I / 32, 16], c[1]
 *          scales U8 [E, R, I / 32] (E8M0); the tensor is [E, I, R], its rows
 *          (e, i), its columns r: w = e2m1 * 2^(scale - 127) of input i of
 *          row r (the blocks' matrix transposed). Read whole (no window).
 *   LORA   a PEFT LoRA merged into its base (tpc_lora.h): c[0] the base (any
 *          description, itself computed or not), c[1] A, c[2] B, c[3] DoRA's
 *          magnitude [rows] (lora_dora 1) or the per-column factors m / n
 *          (lora_dora 2, F32, computed when the description was built);
 *          lora_mode 0: row o = W[o] + s * B[o] @ A (a Linear), 1: row i =
 *          W[i] + s * (B @ A)[:, i] (Conv1D, Embedding), 2: a 1-D bias
 *          b + s * c[1] (lora_bias). Windows as for the others. With
 *          lora_ne (experts, below), a 3-D [E, out, in] (mode 0) or [E, in,
 *          out] (mode 1, gpt-oss) read as its [E * d1, d2] rows, whose
 *          windows are those of MXFP4_T's, or one expert's 2-D weight.
 *   MIX    a model merge (tpc_mix.h): c[k] input k's tensor (any
 *          description), element by element with the coefficients `mix`
 *          (computed when the description was built). Windows as for the
 *          others (element by element: any window).
 * (q - z) * s is exact in F32 for f16/bf16 scales, so bf16/f16 outputs are
 * rounded once, to nearest even, from the exact value.
 */
typedef enum tpc_dq_kind {
	TPC_DQ_FP8 = 1, TPC_DQ_GPTQ, TPC_DQ_AWQ, TPC_DQ_CT, TPC_DQ_GGML, TPC_DQ_FP4, TPC_DQ_MXFP4_T, TPC_DQ_LORA,
	TPC_DQ_MIX
} tpc_dq_kind;

/* The most companions a description holds (a model merge: its inputs), and
 * what every other description holds (its c[] has room for TPC_DQ_NC). */
#define TPC_DQ_MAXC 16
#define TPC_DQ_NC 4

/* MIX: the per-tensor coefficients of a model merge (tpc_mix.h), c[k] input k. */
typedef struct tpc_mix_coef {
	int method;            /* tpc_mix_method */
	int base;              /* the base's index in c[], or -1 */
	int sparsify;          /* 0 none, 1 magnitude (thr), 2 random (key, keep), 3 magnitude
	                        * outliers (thr, thr_hi), 4 DELLA's MagPrune (key, plo, eps) */
	bool consensus;        /* TIES' sign election (mergekit's 'sum') */
	bool normalize;        /* divide by the sum of the weights */
	float w[TPC_DQ_MAXC];  /* the weight of each input */
	float thr[TPC_DQ_MAXC];/* magnitude: kept where |delta| >= thr (-1: all) */
	float thr_hi[TPC_DQ_MAXC]; /* magnitude outliers: and |delta| < thr_hi (-1: no bound) */
	float plo[TPC_DQ_MAXC], eps[TPC_DQ_MAXC]; /* MagPrune: kept with density - eps + 2 eps * rank */
	uint64_t key[TPC_DQ_MAXC], keep[TPC_DQ_MAXC]; /* random: kept where (h >> 40) < keep */
	float scale[TPC_DQ_MAXC]; /* rescale of the kept delta (1: none) */
	float lambda;          /* task vectors' scale */
	float wsum;            /* the weights' sum (linear, the divisor without consensus) */
	float s0, s1;          /* SLERP: the base's and the other's coefficients; model_stock:
	                        * t and 1 - t */
	bool rows;             /* model_stock filter_wise: t per row, found while written */
} tpc_mix_coef;

typedef struct tpc_dequant {
	tpc_dq_kind kind;
	int bits;            /* GPTQ/AWQ: bits per value (2, 4, 8; AWQ 4) */
	int64_t bo, bi;      /* FP8: scale block rows and columns */
	int64_t group;       /* GPTQ without g_idx, AWQ: input rows per group */
	int64_t gidx_base;   /* GPTQ: subtracted from every g_idx value (a rank's piece) */
	bool ct_zp, ct_gidx; /* CT: c[2] is weight_zero_point; the last of c[] is weight_g_idx */
	bool zero_plus_one;  /* GPTQ v1: stored zero point = zero - 1 */
	/* A window of the weight (tpc_tensor_narrow of a dequantized tensor,
	 * e.g. one rank's slice): the tensor is rows [r0, r0 + shape[0]) and
	 * columns [c0, c0 + shape[1]) of the full [O, I] image; O and I are
	 * 0 for the whole weight (then the tensor's shape is [O, I]). */
	int64_t r0, c0, O, I;
	int gtype;           /* GGML: the ggml type of c[0]'s blocks */
	bool fp4_mx;         /* FP4: E8M0 scales (MXFP4), else F8_E4M3 with c[2] */
	bool fp4_div;        /* FP4: s = c1 / c2 (compressed-tensors), else c1 * c2 */
	int64_t rope_hd;     /* GGML: rows permuted per head of rope_hd rows (0: none) */
	int lora_mode;       /* LORA: 0 Linear, 1 transposed (Conv1D, Embedding), 2 bias */
	int lora_dora;       /* LORA: 0 none, 1 c[3] the magnitude per row, 2 c[3] factors per column */
	float lora_scale;    /* LORA: s, rounded to f32 as torch does a Python float */
	/* LORA on experts (PEFT's ParamWrapper over a 3-D parameter): c[1] A is
	 * [ne * r, in], expert e's rows e * r ..; c[2] B is [out, r * ne], rank
	 * k of expert e its column k * ne + e. The image row R (of the full image;
	 * a 3-D tensor [E, d1, d2] read as [E * d1, d2]) is expert e0 + R / epr's
	 * (epr 0: every row is expert e0's: one expert's 2-D weight) and row
	 * R % epr (R) of its matrix. ne 0: no experts. */
	int64_t lora_ne, lora_e0, lora_epr;
	tpc_mix_coef *mix;   /* MIX: the coefficients (in the description's block), else NULL */
	int nc;              /* companions in c[] (GPTQ without g_idx: 3) */
	int cap;             /* room in c[]: TPC_DQ_NC, a merge's TPC_DQ_MAXC (0: a template on the stack) */
	struct tpc_tensor *c; /* the companions, in the description's block (NULL in a template) */
} tpc_dequant;

/* A description on the heap with room for `cap` companions (and a merge's
 * coefficients with `mix`), in one block: free() frees it, after its
 * companions are released. tpc_dequant_dup: a new one with src's fields and
 * room (at least TPC_DQ_NC), no companions (nc 0), a copy of src's
 * coefficients. NULL when out of memory. */
tpc_dequant *tpc_dequant_new(int cap, bool mix);
tpc_dequant *tpc_dequant_dup(const tpc_dequant *src);

typedef struct tpc_ckpt {
	tpc_tensor *t;
	size_t n, cap;
	tpc_storage *st;
	size_t nst, capst;
	tpc_map *src;          /* sources: file mappings or owned memory (fd = -1, path = label) */
	bool *src_owned_mem;
	size_t nsrc, capsrc;
	char **meta_k, **meta_v; /* string metadata in insertion order (safetensors __metadata__) */
	size_t nmeta, capmeta;
	tpc_value *root;       /* object tree for pickled formats; tensors are TPC_V_TENSOR leaves */
	char *format;          /* what the reader was: "safetensors", "torch-zip", "torch-legacy", ... */
	/* Tensors the reader found but could not name: inside foreign objects of
	 * a pickle (a TorchScript ScriptObject). Writers refuse such a checkpoint
	 * rather than drop them; hidden_note names the first object. */
	uint64_t hidden_tensors;
	char *hidden_note;
	char *path;            /* what was opened */
	/* What the reader found, for `inspect`, when there is more to say than
	 * the format: the framework, ranks, iteration, what is model state and
	 * what optimizer state ("DeepSpeed ZeRO stage 3, 4 ranks, ..."). Lines
	 * separated by '\n'; writers ignore it. NULL: nothing. */
	char *about;
	/* What a format keeps of the file beyond tensors and string metadata,
	 * for its own writer (GGUF: the typed KV list, tag "gguf", so a GGUF
	 * written from a GGUF keeps every key with its type). ext_free(ext)
	 * runs at release; other writers ignore it. NULL: nothing. */
	void *ext;
	const char *ext_tag;
	void (*ext_free)(void *ext);
	struct tpc__name_index *index;
	struct tpc__name_index *meta_index; /* metadata keys -> meta_k index */
	/* The sources are rank files (a shard set merged, borrowing its rank
	 * files' sources; a sharded save such as DCP or ZeRO), not the model's
	 * own weight files: a GGUF orders the tensors as one file's. */
	bool rank_sources;
	/* Sources [0, nsrc_borrowed) are another checkpoint's (a merged set's
	 * rank files', tpc_ckpt_borrow_all): release leaves them; those added
	 * after (a LoRA adapter's files) are this one's. */
	size_t nsrc_borrowed;
} tpc_ckpt;

void tpc_ckpt_init(tpc_ckpt *ck);
void tpc_ckpt_release(tpc_ckpt *ck);

/* Map `path` and add it as a source; *idx receives its index. */
int tpc_ckpt_add_file(tpc_ckpt *ck, const char *path, int *idx, tpc_err *e);
/* Add an owned memory buffer (malloc'd; the checkpoint frees it). */
int tpc_ckpt_add_mem(tpc_ckpt *ck, const char *label, uint8_t *mem, uint64_t size, int *idx,
		     tpc_err *e);
static inline const tpc_map *tpc_ckpt_source(const tpc_ckpt *ck, int idx)
{
	return (idx >= 0 && (size_t)idx < ck->nsrc) ? &ck->src[idx] : NULL;
}

/*
 * Add a tensor. `stride` NULL means C-contiguous. Shape entries must be >= 0
 * and strides >= 0; numel and nbytes are computed with overflow checks. The
 * bytes are not checked here (tpc_ckpt_validate does that once the whole
 * table is built). Returns the new index (>= 0) or a negative status with `e`
 * naming the tensor. A duplicate name is an error.
 */
int64_t tpc_ckpt_add_tensor(tpc_ckpt *ck, const char *name, tpc_dtype dtype, int ndim,
			    const int64_t *shape, const int64_t *stride, int src, uint64_t offset,
			    tpc_err *e);
/*
 * Composite tensors: how the sharder describes a rank's slice of a fused
 * tensor ([q_r; k_r; v_r]), a padded vocab slice, or the merge of rank files,
 * without copying a byte. Parts are deep-copied.
 */
int64_t tpc_ckpt_add_composite(tpc_ckpt *ck, const char *name, tpc_dtype dtype, int ndim,
			       const int64_t *shape, int cat_dim, const tpc_tensor *parts, int nparts,
			       tpc_err *e);
/* Add a tensor that is an exact copy (deep) of `t` under a new name (`t` may
 * be one of ck's own tensors). */
int64_t tpc_ckpt_add_copy(tpc_ckpt *ck, const char *name, const tpc_tensor *t, tpc_err *e);

/* Tensor values that are not in a checkpoint's list: views built by the
 * sharder. tpc_tensor_init_* allocate the shape; release with tpc_tensor_release.
 * A dequantized tensor (dq) narrows to a window of its weight (dims 0 and
 * 1 of 2) and cannot be concatenated (-1). */
int tpc_tensor_init_zero(tpc_tensor *t, tpc_dtype dtype, int ndim, const int64_t *shape);
int tpc_tensor_copy(tpc_tensor *dst, const tpc_tensor *src); /* deep copy; name not copied */
/* dst = src narrowed to [start, start+len) along dim (a view, or for a
 * composite the narrowed parts). */
int tpc_tensor_narrow(tpc_tensor *dst, const tpc_tensor *src, int dim, int64_t start, int64_t len);
/* Composite of parts along dim, as a free-standing value (parts deep-copied). */
int tpc_tensor_init_cat(tpc_tensor *dst, const tpc_tensor *parts, int nparts, int dim);
/* The same for parts made for it (malloc'd, np of them): dst unless ret, an
 * earlier failure, says otherwise; the parts are released and the array
 * freed either way; -1 on any failure. */
int tpc_tensor_cat_release(tpc_tensor *dst, tpc_tensor *parts, int np, int dim, int ret);
/* dst = src (a view, or a window of a computed weight) followed along dim by
 * zeros up to len rows (> src's): the rank slice of an uneven split as the
 * even one it is cut from (the pad its last ranks do not store). -1 on a bad
 * argument or out of memory. */
int tpc_tensor_pad_zero(tpc_tensor *dst, const tpc_tensor *src, int dim, int64_t len);
/* One part of a fused tensor laid out in `groups` repetitions of `per` along
 * dim (Megatron's per-query-group [q (heads_per_group*d); k (d); v (d)]):
 * dst = the concatenation over g in [0, groups) of src's
 * [g*per + off, g*per + off + len) along dim, a view when groups is 1.
 * -1 when the pieces do not lie inside src (groups*per must be src's size
 * along dim) or out of memory. */
int tpc_tensor_ungroup(tpc_tensor *dst, const tpc_tensor *src, int dim, int64_t groups, int64_t per,
		       int64_t off, int64_t len);
/* Entries [off, off + groups * per * unit) of dim, laid out as `groups`
 * groups of `per` units of `unit` entries each, reordered unit-major: the
 * first unit of every group, then the second of every group, ... (llama.cpp's
 * grouped -> tiled order of a linear attention's value heads, `per` value
 * heads to each of `groups` key heads); the entries before and after kept in
 * place. The same call with groups and per swapped is its inverse. A
 * composite of views (a copy of src when per or groups is 1): no byte
 * copied; of a 2-D dequantized weight, its windows (tpc_tensor_narrow),
 * each dequantized when read. -1 when the span does not lie inside dim or
 * out of memory. */
int tpc_tensor_tile_groups(tpc_tensor *dst, const tpc_tensor *src, int dim, int64_t off, int64_t groups, int64_t per,
			   int64_t unit);
/* dst = the rows start, start + step, ..., start + (count-1) * step of src
 * (dim 0), count >= 1: for a view one strided view, for a composite the
 * same taken from its parts, for a dequantized tensor row by row. -1 when the
 * rows do not lie inside src or out of memory. */
int tpc_tensor_rows_every(tpc_tensor *dst, const tpc_tensor *src, int64_t start, int64_t step, int64_t count);
/* The rows of each of `heads` heads (dim 0 = heads * hd, hd even) reordered
 * between Meta's rotary layout, where rows 2i and 2i+1 of a head rotate
 * together, and Hugging Face's, where rows i and i + hd/2 do: `to_halves`
 * is transformers' convert_llama_weights_to_hf.py permute (torchtitan's
 * to_hf), else its inverse (torchtitan's from_hf). A composite of views: no
 * byte is copied. -1 on a bad argument or out of memory. */
int tpc_tensor_rope_permute(tpc_tensor *dst, const tpc_tensor *src, int64_t heads, bool to_halves);
/* Swap dims 0 and 1 of a 2-D description in place; a composite's parts are
 * swapped too and it concatenates along the other dim. */
void tpc_tensor_transpose2d(tpc_tensor *t);
/* Swap dims a and b of a plain view in place (a description: no byte moves;
 * gpt-oss's experts stored [in, out]); -1 for a composite or a computed
 * tensor, or a dim out of range. */
int tpc_tensor_swap_dims(tpc_tensor *t, int a, int b);
/* Drop dim `d` of size 1 (insert false), or insert a dim of size 1 before
 * dim `d` (0 <= d <= ndim), of a plain view in place: a description, no byte
 * moves (a depthwise convolution's [channels, 1, kernel] as [channels,
 * kernel] and back). -1 for a composite or a computed tensor, a dim out of
 * range or not of size 1, or out of memory. */
int tpc_tensor_unit_dim(tpc_tensor *t, int d, bool insert);
/* Stacked tensors (TensorRT-LLM's and vLLM's per-layer expert weights
 * [experts, rows, cols]) as descriptions: dst = parts[0..n) stacked along a
 * new leading dimension (each part a view, zero fill or composite of equal
 * shape and dtype, deep-copied); and dst = src[j], index j of dim 0 with that
 * dimension dropped. -1 on a bad argument (shapes that differ, j out of
 * range, a dequantized tensor other than a 3-D stack of gpt-oss's MXFP4
 * experts, whose expert j is its [I, R] window, computed when read) or out
 * of memory. */
int tpc_tensor_init_stack(tpc_tensor *dst, const tpc_tensor *parts, int nparts);
int tpc_tensor_select0(tpc_tensor *dst, const tpc_tensor *src, int64_t j);
/* A 2-D tensor whose rows are `heads` heads of a + b rows each (dim 0 =
 * heads * (a + b)), every head's first a rows then its b rows, as two
 * stacks over the heads: *p0 = [heads, a, cols], or with `transpose0`
 * [heads, cols, a] (each head's block transposed), and *p1 = [heads, b,
 * cols] (convert_hf_to_gguf.py's kv_b_proj -> attn_k_b, attn_v_b).
 * tpc_tensor_join_heads is the inverse: *dst = [heads * (a + b), cols] from
 * p0 and p1 of those shapes (the heads, a, b and cols read from them). Both
 * are descriptions (views, composites): no byte is copied. -1 on a bad
 * argument (rows that are not whole heads, parts whose heads or columns
 * differ, a dequantized tensor) or out of memory. */
int tpc_tensor_split_heads(tpc_tensor *p0, tpc_tensor *p1, const tpc_tensor *src, int64_t heads, int64_t a,
			   bool transpose0);
int tpc_tensor_join_heads(tpc_tensor *dst, const tpc_tensor *p0, const tpc_tensor *p1, bool transpose0);
void tpc_tensor_release(tpc_tensor *t); /* frees shape and parts, not name */
/*
 * A C-contiguous tensor of `shape` whose elements, in C order, are the
 * elements of pieces[0], then pieces[1], ... (their numels add up to the
 * shape's): what DeepSpeed ZeRO keeps of a parameter, cut from flat buffers
 * wherever a partition ends. Each piece is a 1-D C-contiguous view of a
 * source (or a zero fill); the result is a view where one piece covers the
 * whole tensor, else nested composites of views, cut on row boundaries where
 * possible (at most a few parts per level for each piece boundary). Pieces
 * share the result's src_dtype, which must be whole bytes. -1 on a bad
 * argument or out of memory.
 */
int tpc_tensor_init_flat(tpc_tensor *dst, int ndim, const int64_t *shape, const tpc_tensor *pieces, int npieces);

int64_t tpc_ckpt_add_storage(tpc_ckpt *ck, const char *key, const char *location,
			     tpc_dtype dtype, int src, uint64_t offset, uint64_t nbytes, tpc_err *e);

/* dst (initialised, empty) shares src's sources: descriptions over them can
 * be added to dst, and releasing dst leaves them to src. */
int tpc_ckpt_borrow_sources(tpc_ckpt *dst, const tpc_ckpt *src, tpc_err *e);
/* dst (initialised, empty) shares the sources of srcs[0..n), in that order
 * (base[i]: where srcs[i]'s begin, when base is not NULL), its rank_sources
 * as given. */
int tpc_ckpt_borrow_all(tpc_ckpt *dst, const tpc_ckpt *const *srcs, size_t n, int *base, bool rank_sources, tpc_err *e);

/* Remove the tensors from index `first` on whose names begin with `prefix`
 * (a reader's scratch tensors, once what it assembled from them is added). */
int tpc_ckpt_drop_prefixed(tpc_ckpt *ck, size_t first, const char *prefix, tpc_err *e);

/* Take `b`'s text as ck->about (released either way; kept as it was if b
 * ran out of memory). */
struct tpc_buf;
void tpc_ckpt_set_about(tpc_ckpt *ck, struct tpc_buf *b);

/* Index of the tensor named `name`, or -1. */
int64_t tpc_ckpt_find(const tpc_ckpt *ck, const char *name);
/* Give tensor i a new name (must not collide). */
int tpc_ckpt_rename(tpc_ckpt *ck, int64_t i, const char *name, tpc_err *e);
/* Remove the tensors whose keep[i] is false, keeping order; fixes tree leaves' indices. */
int tpc_ckpt_filter(tpc_ckpt *ck, const bool *keep, tpc_err *e);

/* Reorder the tensors: new position i holds old tensor order[i] (a permutation
 * of 0..n-1). Tree leaves and aliases follow. */
int tpc_ckpt_permute(tpc_ckpt *ck, const int64_t *order, tpc_err *e);

int tpc_ckpt_meta_set(tpc_ckpt *ck, const char *k, const char *v, tpc_err *e);
const char *tpc_ckpt_meta_get(const tpc_ckpt *ck, const char *k);
void tpc_ckpt_meta_del(tpc_ckpt *ck, const char *k);

/* Writers call this first: refuses a checkpoint with hidden tensors. */
int tpc_ckpt_check_writable(const tpc_ckpt *ck, tpc_err *e);

/* Check the invariants above for every tensor; reports the first violation. */
int tpc_ckpt_validate(const tpc_ckpt *ck, tpc_err *e);

/* Byte range [lo, hi) of the source that tensor t touches (lo == hi when empty). */
void tpc_tensor_extent(const tpc_tensor *t, uint64_t *lo, uint64_t *hi);
bool tpc_tensor_is_contiguous(const tpc_tensor *t);
/* Same bytes seen the same way: one storage, offset, dtype, shape and strides
 * (tied weights). Composites and tensors without a storage never match. */
bool tpc_tensor_same_view(const tpc_tensor *a, const tpc_tensor *b);
/* The same description: dtypes, shape, strides, source and offset, flags,
 * for a composite the same parts, for a computed tensor (dq) the same
 * description and companions (storage not compared): the same bytes. */
bool tpc_tensor_same_desc(const tpc_tensor *a, const tpc_tensor *b);
/*
 * Tied tensors, what torch.save writes as one storage: the same view of one
 * storage (tpc_tensor_same_view), and a tensor and its alias_of while their
 * descriptions are equal (tpc_tensor_same_desc: a rule that transposed or
 * cast one of them unties them). For the tensors sel[0..nsel) (sel NULL: all
 * of ck, in order), first[k] receives the position in sel of the first of
 * them tied to sel[k], k itself when none before it. O(n log n).
 */
int tpc_ckpt_ties(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, int64_t *first, tpc_err *e);
/* Set stride to the C-contiguous strides for the current shape. */
void tpc_tensor_set_contiguous(tpc_tensor *t);

/* Tensor shape as "[2, 3]" into buf. */
const char *tpc_shape_str(const tpc_tensor *t, char *buf, size_t n);

/* ---- moving the bytes (tpc_stream.c) ---- */

/*
 * Copy bytes [off, off+len) of tensor t's C-contiguous little-endian image (in
 * src_dtype) into dst. `off` and `len` must be multiples of the element size
 * for strided or byte-swapped tensors. Large strided gathers run in parallel.
 */
int tpc_ckpt_read_bytes(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t off, uint64_t len,
			void *dst, tpc_err *e);
/*
 * tpc_ckpt_read_bytes, and for a composite (t->nparts) fn(ctx, k, p, n) after
 * each run of part k is read: p[0..n) are the part's next bytes in its own
 * C order, so a caller reading the whole composite in order sees each part's
 * image once, in order (a reshard hashes its input's rank tensors that way).
 */
typedef void (*tpc_part_fn)(void *ctx, int part, const uint8_t *p, size_t n);
int tpc_ckpt_read_parts(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t off, uint64_t len, void *dst,
			tpc_part_fn fn, void *ctx, tpc_err *e);

/*
 * Bytes [out_off, out_off+out_len) of tensor t's OUTPUT image: C-contiguous,
 * little-endian, in t->dtype, i.e. with a pending cast (dtype != src_dtype,
 * set by the remap stage) applied as tpc_cast does. With no cast pending this
 * is tpc_ckpt_read_bytes; with one, the range must be whole output elements.
 * Uses a temporary buffer of at most TPC_GATHER_CHUNK bytes. Writers that
 * place bytes themselves (torch zip, rank files) read through this.
 */
int tpc_ckpt_read_out(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t out_off, uint64_t out_len,
		      void *dst, tpc_err *e);

/* Write tensor t's output image (t->nbytes bytes, cast applied) at the
 * output's current position: in-kernel copy when contiguous, not swapped and
 * not cast, else through bounded buffers (gather, then cast). */
int tpc_ckpt_write_tensor(const tpc_ckpt *ck, const tpc_tensor *t, tpc_out *o, tpc_err *e);

/* Write t[i]'s output image at o[i]'s position, for i in [0, n), reading
 * shared source bytes once: when the tensors are row slices of one source
 * matrix (a row-parallel weight's rank slices: 2-D views of one mapping with
 * the same dtype, shape and strides, their columns side by side inside each
 * row), the source rows are read in windows, once, and each window's runs go
 * to every output, where n separate writes would each read the whole span
 * for its slice (n times the bytes at tp n). *joint is false, and nothing
 * is written, when the tensors are not such slices (write them one by one).
 * On failure *bad is the index of the output that failed. */
int tpc_ckpt_write_joint(const tpc_ckpt *const *ck, const tpc_tensor *const *t, tpc_out *const *o, int n,
			 bool *joint, int *bad, tpc_err *e);
/* Would tpc_ckpt_write_joint write t[0..n) jointly? */
bool tpc_ckpt_joint_ok(const tpc_ckpt *const *ck, const tpc_tensor *const *t, int n);

/* Where should a data section holding tensors order[0..n) back to back
 * start, modulo TPC_PAGE_PHASE? The in-kernel copy (copy_file_range) moves
 * bytes through a pipe a source page at a time: a tensor whose destination
 * is not page-congruent with its source straddles two destination pages per
 * source page and gets its page-cache folios cut small (measured on a 4.74 GB
 * copy: 362,000 folios instead of 73,000). Returns the residue, a multiple of
 * `unit`, that makes the most bytes of kernel-copied runs of at least 1 MiB
 * congruent, or -1 when there are none (no padding needed). Writers pad
 * their header to it; tpc_out_copy_at does the rest (the 64 KiB grid). */
#define TPC_PAGE_PHASE 4096u
int64_t tpc_ckpt_copy_residue(const tpc_ckpt *ck, const int64_t *order, size_t n, unsigned unit);

/* Drop the mapped input pages tensor t reads from our resident set (the page
 * cache keeps them), all of them or those behind output bytes [off, off+len)
 * when t is a contiguous view: writers call these as they go so a pass over a
 * large model keeps a bounded RSS. */
void tpc_ckpt_drop_pages(const tpc_ckpt *ck, const tpc_tensor *t);
void tpc_ckpt_drop_range(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t off, uint64_t len);
/* ... those of dim-0 rows [r0, r1) (a 0-dim tensor: all of it). */
void tpc_ckpt_drop_rows(const tpc_ckpt *ck, const tpc_tensor *t, int64_t r0, int64_t r1);

/* The alg digest (tpc_hash.h) of tensor t's output image (cast applied):
 * tpc_hash_len(alg) bytes into out, streamed in bounded windows with the
 * source pages dropped behind them. The one tensor hasher: shard writes the
 * manifest's checksums with it, and merge, reshard, verify, resume and
 * inspect --hash check them with it. */
int tpc_ckpt_hash_tensor(const tpc_ckpt *ck, const tpc_tensor *t, tpc_hash_alg alg, uint8_t out[TPC_HASH_MAX],
			 tpc_err *e);
/* Resume: whether the file at `path` (an interrupted run's output) holds
 * exactly tensors sel[0..n) of ck (all of ck with sel NULL and n = ck->n):
 * the same names, dtypes, shapes and bytes (XXH3-128), nothing else. An
 * unreadable file holds nothing. */
bool tpc_ckpt_file_holds(const char *path, const tpc_ckpt *ck, const int64_t *sel, size_t n);
/* Whether a and b (same dtype and shape) hold the same bytes, compared in
 * bounded windows; *eq false for different dtypes or shapes. */
int tpc_tensors_equal(const tpc_ckpt *ck, const tpc_tensor *a, const tpc_tensor *b, bool *eq, tpc_err *e);

/* Size of the bounded gather buffer used by writers (bytes). */
#define TPC_GATHER_CHUNK (8u << 20)

#endif
