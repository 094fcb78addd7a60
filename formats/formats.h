/*
 * formats.h - the checkpoint formats tpconv reads and writes.
 *
 * Each format is a tpc_format (lib/tpc_format.h) registered by
 * tpc_formats_register_all(); commands and the sharder reach them only
 * through the registry. The *_from_buffer entries exist for tests and fuzzers.
 *
 *   safetensors  one .safetensors file (FORMATS.md §3)
 *   hf-index     a Hugging Face sharded checkpoint: a directory or a
 *                `*.index.json` with a weight_map naming shard files of any
 *                registered format; written as model-0000N-of-0000M.* + index
 *   torch        torch.save files: zip (>= 1.6) and legacy (FORMATS.md §1, §2)
 *   dcp          PyTorch Distributed Checkpoint folders, read and written (dcp.h)
 *   deepspeed    DeepSpeed ZeRO 1/2/3 folders, read as the consolidated model (deepspeed.h)
 *   ds-universal DeepSpeed universal checkpoints, read and written (ds_universal.h)
 *   gguf         llama.cpp's GGUF, read (split sets too) and written (gguf.h)
 *
 * safetensors layout (FORMATS.md §3.1):
 *   1. u64 LE N          header length (N <= 100 000 000)
 *   2. N bytes JSON      {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [b, e]}}
 *                        padded with spaces to a multiple of 8 by writers since 0.3
 *   3. data              tensors back to back, offsets relative to byte 8 + N;
 *                        sorted by begin, no holes, no overlap, ending at EOF
 */
#ifndef TPC_FORMATS_H
#define TPC_FORMATS_H

#include <stdint.h>

#include "tpc_ckpt.h"
#include "tpc_format.h"

void tpc_formats_register_all(void);

extern const tpc_format tpc_fmt_safetensors;
extern const tpc_format tpc_fmt_hf_index;
extern const tpc_format tpc_fmt_torch;
extern const tpc_format tpc_fmt_dcp;
extern const tpc_format tpc_fmt_deepspeed;
extern const tpc_format tpc_fmt_gguf;

#define TPC_ST_MAX_HEADER 100000000ull

/* Parse a safetensors file image (p, n) whose bytes are source `src` of ck,
 * adding its tensors and metadata. `path` names the file in errors. */
int tpc_safetensors_from_buffer(tpc_ckpt *ck, const uint8_t *p, uint64_t n, int src,
				const char *path, tpc_err *e);

/* Build the JSON header (padded to 8) for tensors sel[0..n) laid out in the
 * order given; data offsets are assigned back to back. Used by the writer
 * and by the sharder to plan rank files. */
int tpc_safetensors_header(const tpc_ckpt *ck, const int64_t *order, size_t n, char **out,
			   size_t *len, tpc_err *e);

/* Order tensors sel[0..n) the way the reference writer does: dtype descending
 * in safetensors' enum order, then name (bytewise). Sorts `sel` in place. */
void tpc_safetensors_sort(const tpc_ckpt *ck, int64_t *sel, size_t n);

/* Read a torch.save file image (zip or legacy) from p[0..n) into ck, as the
 * registry's open does for a file: the bytes are copied into memory that ck
 * owns. `path` names it in errors; `o` may be NULL. For tests and fuzzers. */
int tpc_torch_from_buffer(tpc_ckpt *ck, const uint8_t *p, uint64_t n, const char *path,
			  const tpc_open_opts *o, tpc_err *e);

/* Parse an HF index JSON (text, len) into the list of (tensor, file) pairs:
 * for tests and fuzzers. */
/* The shard paths an HF-sharded write of ck's tensors sel[0..nsel) (all when
 * sel is NULL) into `dir` with options `o` produces, those of this process
 * only (o->procs, o->proc); caller frees each and the array. */
int tpc_hf_shard_paths(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *dir, const tpc_write_opts *o,
		       char ***paths, size_t *n, tpc_err *e);
int tpc_hf_index_from_buffer(const char *text, size_t len, const char *path, char ***names,
			     char ***files, size_t *n, uint64_t *total_size, tpc_err *e);

#endif
