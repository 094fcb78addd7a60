/*
 * tpconv_ckpt.h - checkpoints through the library (installed as <tpconv/tpconv_ckpt.h>).
 *
 * A checkpoint is an ordered list of named tensors plus string metadata, read
 * from any format tpconv knows: a torch.save file (zip or legacy), a
 * safetensors file or Hugging Face sharded folder, GGUF, a PyTorch DCP or
 * DeepSpeed folder. Opening maps the input and describes its tensors; no
 * tensor byte is read until asked for (tpc_ckpt_read_out) or written
 * (tpc_ckpt_save), and then it goes from the mapping to the output once.
 *
 *   tpc_formats_register_all();              once per process
 *   tpc_ckpt *ck; tpc_err e; tpc_err_init(&e);
 *   if (tpc_ckpt_load(&ck, "model.pt", &e)) ... tpc_err_format(&e, ...)
 *   for (size_t i = 0; i < tpc_ckpt_count(ck); i++) {
 *       const tpc_tensor *t = tpc_ckpt_tensor(ck, i);
 *       ... tpc_tensor_name(t), tpc_tensor_dtype(t), tpc_tensor_shape(t) ...
 *   }
 *   tpc_ckpt_cast(ck, TPC_BF16, &e);         optional: floating tensors to bf16
 *   tpc_ckpt_save(ck, "model.safetensors", NULL, 0, &e);
 *   tpc_ckpt_free(ck);
 *
 * tpc_ckpt and tpc_tensor are opaque here: a program holds pointers and asks
 * through the functions below. A tensor pointer lives as long as its
 * checkpoint and is not changed by reads; tpc_ckpt_cast changes the dtype a
 * tensor is read and written in (tpc_tensor_dtype, tpc_tensor_nbytes).
 * A checkpoint may be read from several threads; calls that change it may not
 * run beside others on the same checkpoint.
 */
#ifndef TPCONV_CKPT_H
#define TPCONV_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "tpconv_api.h"
#include "tpconv_dtype.h"
#include "tpconv_err.h"

typedef struct tpc_ckpt tpc_ckpt;
typedef struct tpc_tensor tpc_tensor;

/* The library's version, "MAJOR.MINOR.PATCH". */
TPC_API const char *tpc_version(void);

/* Register every format the library reads and writes; call it once before
 * the first load or save (calling it again does nothing). */
TPC_API void tpc_formats_register_all(void);
/* The registered formats, by name ("safetensors", "torch", "gguf", "hf-index",
 * "dcp", "deepspeed"): i in [0, tpc_format_count()); NULL past the end. */
TPC_API size_t tpc_format_count(void);
TPC_API const char *tpc_format_name(size_t i);

/* Detect the format of `path` (a file or a folder) by its content and open
 * it into a new checkpoint *out. Unknown or corrupt input is TPC_EINPUT with
 * `e` naming the file, the offset and the tensor; *out is NULL on failure. */
TPC_API int tpc_ckpt_load(tpc_ckpt **out, const char *path, tpc_err *e);
/* Unmap the inputs and free the checkpoint (NULL: nothing). */
TPC_API void tpc_ckpt_free(tpc_ckpt *ck);
/* The format it was read as: "safetensors", "torch-zip", "torch-legacy", "gguf"... */
TPC_API const char *tpc_ckpt_format_name(const tpc_ckpt *ck);

/* The tensors, in the file's order: i in [0, tpc_ckpt_count(ck)); NULL past the end. */
TPC_API size_t tpc_ckpt_count(const tpc_ckpt *ck);
TPC_API const tpc_tensor *tpc_ckpt_tensor(const tpc_ckpt *ck, size_t i);
/* Index of the tensor named `name`, or -1. */
TPC_API int64_t tpc_ckpt_find(const tpc_ckpt *ck, const char *name);

/* String metadata (safetensors' __metadata__ and the like), in
 * the file's order: i in [0, tpc_ckpt_meta_count(ck)); NULL past the end. */
TPC_API size_t tpc_ckpt_meta_count(const tpc_ckpt *ck);
TPC_API const char *tpc_ckpt_meta_key(const tpc_ckpt *ck, size_t i);
TPC_API const char *tpc_ckpt_meta_value(const tpc_ckpt *ck, size_t i);
/* The value of key `k`, or NULL. */
TPC_API const char *tpc_ckpt_meta_get(const tpc_ckpt *ck, const char *k);

TPC_API const char *tpc_tensor_name(const tpc_tensor *t);
/* The dtype it is read and written in (after tpc_ckpt_cast). */
TPC_API tpc_dtype tpc_tensor_dtype(const tpc_tensor *t);
/* ndim may be 0 (a scalar); shape has ndim entries. */
TPC_API int tpc_tensor_ndim(const tpc_tensor *t);
TPC_API const int64_t *tpc_tensor_shape(const tpc_tensor *t);
TPC_API uint64_t tpc_tensor_numel(const tpc_tensor *t);
/* Bytes of its image: numel elements of tpc_tensor_dtype, sub-byte types packed. */
TPC_API uint64_t tpc_tensor_nbytes(const tpc_tensor *t);

/*
 * Bytes [off, off + len) of tensor t's image: C-contiguous, little-endian,
 * in tpc_tensor_dtype(t) (a cast applied), into dst, whatever the layout in
 * the file (views, strides, big-endian, GGUF blocks). After a cast, off and
 * len must be whole elements. Reading in windows of a few MiB keeps memory
 * bounded on any size of tensor.
 */
TPC_API int tpc_ckpt_read_out(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t off, uint64_t len,
			      void *dst, tpc_err *e);

/* Cast every floating tensor (F16, BF16, F32, F64) to `to`, one of those four;
 * the bytes are converted when read or saved (round to nearest even). Other
 * tensors keep their dtype. TPC_EUSAGE for another `to`. */
TPC_API int tpc_ckpt_cast(tpc_ckpt *ck, tpc_dtype to, tpc_err *e);

enum {
	TPC_SAVE_FORCE = 1u << 0, /* replace an existing output */
};
/*
 * Write every tensor of ck to `path` in `format` (a name from tpc_format_name;
 * NULL: from the name's ending, ".safetensors", ".pt", ".bin", ".gguf"..., and
 * a path ending in '/' is a Hugging Face sharded folder). Atomic: a temporary
 * file beside the target takes its name once complete. An existing output is
 * refused (TPC_EUSAGE) without TPC_SAVE_FORCE in flags.
 */
TPC_API int tpc_ckpt_save(const tpc_ckpt *ck, const char *path, const char *format, unsigned flags,
			  tpc_err *e);

#endif
