/*
 * dcp.h - PyTorch Distributed Checkpoint folders (torch.distributed.checkpoint,
 * FileSystemWriter): what FSDP2, torchtitan, torchtune and accelerate save.
 * Private to formats/; the format itself is registered as "dcp".
 *
 * Folder (FRAMEWORKS.md §2a; torch/distributed/checkpoint/{metadata,filesystem}.py):
 *   1. .metadata       pickle of torch.distributed.checkpoint.metadata.Metadata
 *                      (written last, renamed from .metadata.tmp: no .metadata =
 *                      an incomplete checkpoint)
 *        1.1 state_dict_metadata  {fqn: TensorStorageMetadata | BytesStorageMetadata}
 *            TensorStorageMetadata(properties: TensorProperties, size: torch.Size,
 *                                  chunks: [ChunkStorageMetadata(offsets, sizes)])
 *            TensorProperties pickles its state as a TUPLE (dtype, layout,
 *            requires_grad, memory_format, pin_memory)
 *        1.2 planner_data         {fqn: (key, key, ...)}: the path of each flattened
 *                                 key in the original nested state dict (or absent)
 *        1.3 storage_data         {MetadataIndex(fqn, offset: torch.Size|None, index):
 *                                  _StorageInfo(relative_path, offset, length
 *                                               [, transform_descriptors])}
 *        1.4 storage_meta, version  (ignored)
 *   2. __R_N.distcp   items back to back; each item is a complete torch.save zip
 *                     (of one tensor chunk, or of a plain object for a bytes item)
 *                     at [offset, offset + length) of the named file, its internal
 *                     offsets relative to its own start.
 *
 * Reading (no torch, no copy): the pickle runs in the safe VM with an allow-list
 * of exactly the classes above (older releases' torch.distributed._shard names,
 * pathlib paths in storage_meta, Megatron's MCoreMetadata/MCoreSavePlan); any
 * other global is refused by name. Each global tensor is assembled from its
 * chunks as a description over the mapped item bytes: the chunks must tile the
 * global box exactly once (in bounds, no overlap, volumes adding up; a chunk
 * repeated exactly, as replicated saves without de-duplication write, is read
 * once), each item's tensor must have the chunk's shape and the key's dtype,
 * and the layout must cut into slabs (every DTensor placement does). Non-tensor
 * items become values of the object tree, placed by planner_data. Items with a
 * transform descriptor (zstd streams) are refused by name; relative paths with
 * '/' or '..' are refused.
 */
#ifndef TPC_DCP_H
#define TPC_DCP_H

#include <stddef.h>
#include <stdint.h>

#include "tpc_ckpt.h"
#include "tpc_err.h"
#include "tpc_value.h"

#define TPC_DCP_META ".metadata"

typedef struct tpc_dcp_chunk {
	int64_t *off, *size;  /* [ndim] each (one allocation: off) */
	char *file;           /* relative path of the .distcp file */
	uint64_t foff, flen;  /* the item inside it */
} tpc_dcp_chunk;

typedef struct tpc_dcp_entry {
	char *fqn;
	bool tensor;          /* else a bytes item (a pickled object) */
	tpc_dtype dtype;
	int ndim;
	int64_t *shape;       /* [ndim] */
	tpc_dcp_chunk *c;     /* tensor: its chunks; bytes: one, with no box */
	size_t nc;
	tpc_value *path;      /* planner_data's path (TUPLE of keys), or NULL */
	int64_t unstacked;    /* Megatron layer-stacked key read as this many per-layer tensors */
	int64_t experts;      /* and (each layer's) routed experts' stack as this many per-expert tensors */
} tpc_dcp_entry;

typedef struct tpc_dcp_meta {
	tpc_dcp_entry *e;
	size_t n;
	bool mcore;           /* Megatron's mcore_data or MCore classes seen */
} tpc_dcp_meta;

/* Parse a .metadata image (untrusted): every entry with its chunks and where
 * each item lies, validated (allow-listed globals, known dtypes, shapes,
 * chunks inside the global box, each chunk's item found). `path` names it in
 * errors. */
int tpc_dcp_meta_from_buffer(tpc_dcp_meta *m, const uint8_t *p, size_t n, const char *path, tpc_err *e);
void tpc_dcp_meta_release(tpc_dcp_meta *m);

/* The items of a part file the dcp layout wrote (torch.save archives back to
 * back, found from the end), given as an image (untrusted; for the fuzzer):
 * each item's offset and length, each opened into ck as one tensor. */
int tpc_dcp_part_items_from_buffer(tpc_ckpt *ck, const uint8_t *p, size_t size, const char *path, uint64_t **off,
				   uint64_t **len, size_t *n, tpc_err *e);

#endif
