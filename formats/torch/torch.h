/*
 * torch.h - torch.save checkpoints (FORMATS.md §1, §2): shared by the reader
 * (torch_read.c) and the writer (torch_write.c). Private to formats/.
 *
 * Zip format (torch >= 1.6), records under one top-level folder:
 *   1. <prefix>/data.pkl          protocol-2 pickle; storages are persistent ids
 *                                 ('storage', <XStorage class>, key, location, numel)
 *   2. <prefix>/byteorder         "little" | "big" (torch >= 2.1; missing = little)
 *   3. <prefix>/data/<key>        raw bytes of each whole storage, 64-byte aligned
 *   4. <prefix>/version           "3\n"
 *
 * Legacy format (_use_new_zipfile_serialization=False), pickles back to back,
 * each of the protocol torch.save's pickle_protocol gave (default 2; 1 to 5
 * are read; torch.load cannot read 0, whose persistent ids are text):
 *   1. magic    the int 0x1950a86a20f9469cfc6c: LONG1 (protocols 2-5, in a
 *               FRAME in 4-5) or a text LONG (0-1), so it is loaded and
 *               compared as a number
 *   2. protocol 1001
 *   3. sys_info {'protocol_version', 'little_endian', 'type_sizes'}
 *   4. object   persistent ids ('storage', class, key, location, numel, view_metadata)
 *   5. keys     list of storage keys
 *   6. per key: u64 LE element count, then the storage bytes
 *   Bytes after the last storage are ignored, as torch.load ignores them.
 *
 * Tensors come from REDUCE of torch._utils._rebuild_tensor_v2/_v3 (and
 * _rebuild_parameter, _rebuild_qtensor, _rebuild_from_type_v2 around them);
 * nothing is ever called. The object tree is kept in ck->root with TENSOR
 * leaves; tensor names are the dotted paths of dict keys and list indices
 * (torch.save of a bare tensor gives the name ""). Tensors inside foreign
 * objects (a ScriptObject, a custom class) are not named, like
 * `torch.load(...)` users see them: only through the object.
 */
#ifndef TPC_TORCH_H
#define TPC_TORCH_H

#include "formats.h"
#include "tpc_buf.h"

/* Metadata key under which the object tree travels through safetensors
 * (JSON, tpc_value_to_json encoding). */
#define TPC_TREE_META "tpconv.tree"

/* Walk `root` and call fn for every TENSOR leaf reachable through dicts,
 * lists and tuples, with its dotted path. `slot` is the parent's pointer to
 * the leaf (so callers can replace it). Stops at the first nonzero return. */
typedef int (*tpc__leaf_fn)(void *ctx, const char *name, tpc_value **slot, tpc_err *e);
int tpc__torch_walk(tpc_value **root, tpc__leaf_fn fn, void *ctx, tpc_err *e);
/* The same, with names starting at `prefix`. */
int tpc__torch_walk_from(tpc_value **root, const char *prefix, tpc__leaf_fn fn, void *ctx, tpc_err *e);

/* Read a torch.save zip that lies at [off, off+len) of source `src` of ck (an
 * item of a DCP .distcp file) without copying it: its tensors are added to ck
 * as views of that source, named `prefix` (a bare tensor) or prefix.path, and
 * the object tree is returned in *root (the caller owns it). With
 * strict_globals, pickle globals outside torch's weights_only allow-list are
 * refused (tensor items); without, only dangerous ones (an object item such
 * as TransformerEngine's BytesIO _extra_state, kept opaque, never called).
 * `path` names the file in errors; offsets in errors are file offsets. */
int tpc__torch_open_item(tpc_ckpt *ck, int src, uint64_t off, uint64_t len, const char *path, const char *prefix,
			 bool strict_globals, tpc_value **root, tpc_err *e);

/* torch.Size((a, b, ...)) as the VM leaves it (a CALL of torch.Size), or a
 * plain tuple/list of ints, into out[*nd]; false unless every size is an
 * int in [0, max_dim] and there are at most TPC_MAX_NDIM. */
bool tpc__torch_size(const tpc_value *v, int64_t *out, int *nd, int64_t max_dim);

/* Does ck->root still name exactly ck's tensors, in order (no rename, drop
 * or reorder happened since reading)? Then writers can emit the tree. */
bool tpc__torch_tree_matches(const tpc_ckpt *ck);

/* torch.save of `what` (a value tree whose TENSOR leaves are among sel, or a
 * bare TENSOR leaf; NULL: the checkpoint's tree or a flat state dict) at
 * `path`, atomically: a DCP item. */
int tpc__torch_write_obj(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const tpc_value *what,
			 const char *path, const tpc_write_opts *o, tpc_err *e);

/* The same archive written at out's current position, its offsets running
 * from its own first byte (what torch.save into a stream writes; a DCP item
 * among others in one .distcp), records named prefix/NAME; out is neither
 * committed nor aborted. */
int tpc__torch_write_into(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const tpc_value *what, tpc_out *out,
			  const char *prefix, const tpc_write_opts *o, tpc_err *e);

/* Non-tensor values as JSON metadata (safetensors) and back. */
int tpc__tree_to_meta(const tpc_ckpt *ck, char **json, tpc_err *e);
int tpc__tree_from_meta(tpc_ckpt *ck, const char *json, tpc_err *e);

#endif
