/*
 * tpc_manifest.h - the manifest of a shard set (tpconv-manifest.json).
 *
 * Written last, atomically, by the run that completes the set: its presence
 * means every rank file is in place. Merge and reshard read it first; it makes
 * a set self-describing (the split of every tensor is recorded, so no plan or
 * model facts are needed to merge it back).
 *
 * Schema (version 1). All members are required unless marked optional;
 * readers refuse unknown versions and malformed entries.
 *
 *   {
 *     "tpconv_manifest": 1,
 *     "tool": "tpconv 0.1.0",                 who wrote it
 *     "set_id": "0123456789abcdef",           16 hex digits, also in each
 *                                             safetensors rank file's metadata
 *                                             as tpconv.set_id
 *     "tp": 4, "pp": 1,
 *     "layout": "tpconv" | "oslo" | "trtllm" | "hf" | "vllm" | "megatron" | "dcp",   (tpc_layout.h)
 *     "format": "safetensors" | "torch" | "dcp",   rank file format: one the
 *                                             layout writes
 *     "dp": 8,                                optional (absent: 1): data-parallel
 *                                             replicas of each stage (tpc_shard.h): a
 *                                             stage has tp x dp ranks, rank (pp_rank *
 *                                             dp + dp_rank) * tp + tp_rank; only layouts
 *                                             with data_parallel (megatron-dist)
 *     "ep": 4, "ep_placement": "contiguous" | "round-robin", "experts": 8,
 *                                             optional, together: expert parallelism
 *                                             (tpc_plan.h): ep divides tp x dp, experts
 *                                             divides by ep
 *     "checksum": "xxh3-128" | "sha256" | "none",   the algorithm of the tensors'
 *                                             checksum members (tpc_hash.h); absent
 *                                             = "none"; another name is refused
 *     "model": {"heads": 32, ...,            model facts used (known ones only);
 *               "activation_fn": "geglu"},   the feed-forward activation when known (dit)
 *     "plan": { ... } | null,                 the plan (tpc_plan.h schema), so a
 *                                             reshard can reuse it
 *     "metadata": {"k": "v", ...},            the input's string metadata,
 *                                             restored by merge
 *     "ranks": [                              tp * dp * pp entries, rank order
 *       {"rank": 0, "tp_rank": 0, "pp_rank": 0,   (with "dp": "dp_rank" too)
 *        "file": "model_tp00_pp00.safetensors",   relative ('hf': a folder; 'megatron':
 *                                                release/mp_rank_TT[_PPP]/model_optim_rng.pt),
 *                                                no component empty or starting with '.' 
 *        "tensors": 12, "bytes": 123456}
 *     ],
 *     "tensors": [                            in the original checkpoint's order
 *       {"name": "model.layers.0.self_attn.k_proj.weight",
 *        "dtype": "F32", "shape": [64, 128],  the original tensor
 *        "stage": 0,                          pipeline stage (its ranks are
 *                                             stage * tp + 0 .. tp-1)
 *        "split": "col" | "row" | "vocab" | "dim" | "replicate",
 *        "dim": 0,                            split dimension, -1 if replicated
 *        "rule": 1,                           deciding plan rule, -1 = fallback
 *        "matched": true,                     false: no rule matched
 *        "row_bias": false,                   replicated bias of a row-parallel
 *                                             layer (add once after the reduce)
 *        "parts": [                           along dim, in order ([] if replicated)
 *          {"size": 64,                       rows of the original
 *           "pad": 0,                         zero rows appended before splitting
 *                                             (vocab padding, --pad); stripped on merge
 *           "heads": 4,                       heads in the part (0: not a head split)
 *           "replicas": 2}                    ranks holding each head (KV heads
 *                                             when tp > kv heads; 1 = split)
 *        ],
 *        "rank_shape": [32, 128],             every rank's tensor shape
 *        "shape_of_rank": {"dim": 1, "len": 64},   optional: a replicated [2]
 *                                             integer tensor holding its layer's shape
 *                                             (compressed-tensors weight_shape): every
 *                                             rank's copy has entry dim = len (its
 *                                             slice's), the original len * ranks
 *        "tied_to": "model.embed_tokens.weight",   optional: the input held this
 *                                             tensor and the named one, listed
 *                                             before it and not tied itself, as one
 *                                             storage (tied weights: the same view,
 *                                             or a recorded tie); same dtype, shape
 *                                             and checksum. Each keeps its own split
 *                                             and rank copies; merge checks they
 *                                             are equal and writes them as one
 *                                             storage (torch) or once (safetensors,
 *                                             as save_pretrained). Absent: untied
 *        "expert": 5, "ep_group": 2,          optional (sets with "ep"): a routed
 *                                             expert's tensor, held only by the
 *                                             tp/ep ranks of its group (stage * tp +
 *                                             ep_group * tp/ep + 0 .. tp/ep-1) and
 *                                             split over them; the group must be the
 *                                             one the placement gives
 *        "stacked": true,                     optional: dim 0 stacks the routed
 *                                             experts (a plan's "stacked" rule);
 *                                             dim and parts are the tensor's own.
 *                                             In a set with "ep" every rank holds
 *                                             its group's experts' rows of dim 0
 *                                             (tpc_split_experts) and rank_shape
 *                                             has shape[0] / ep there; no
 *                                             "expert" or "ep_group"
 *        "<checksum>": "...",                 the original tensor's, named after
 *                                             the algorithm ("xxh3-128": 32 hex
 *                                             digits, "sha256": 64); required when
 *                                             "checksum" is not "none"
 *        "rank_<checksum>": ["...", ...]}     tp entries, rank order (null for
 *                                             the ranks an expert is not on)
 *     ]
 *   }
 *
 * Rank t of the tensor's stage holds, for each part in order, rows
 * [start, start + len) of the zero-padded part: len = (size + pad) / tp and
 * start = t * len, or with replicas len = size / heads and start =
 * (t / replicas) * len. For an expert, tp is tp/ep and t the rank's place in
 * its group. Checksums are over the C-contiguous little-endian
 * bytes, the same as `tpconv inspect --checksum ALG`. Manifests written before
 * xxh3-128 existed say "checksum": "sha256" with "sha256" and "rank_sha256"
 * members: they read unchanged.
 */
#ifndef TPC_MANIFEST_H
#define TPC_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_buf.h"
#include "tpc_dtype.h"
#include "tpc_err.h"
#include "tpc_hash.h"
#include "tpc_layout.h"
#include "tpc_plan.h"

#define TPC_MANIFEST_NAME "tpconv-manifest.json"
#define TPC_MANIFEST_MAX_BYTES (1u << 30)
#define TPC_MAX_TP 4096
#define TPC_MAX_RANKS 65536

typedef struct tpc_manifest_tensor {
	char *name;
	tpc_dtype dtype;
	int ndim;
	int64_t *shape;
	int stage;
	tpc_split split;
	bool matched;
	bool has_hash;
	uint8_t hash[TPC_HASH_MAX];         /* tpc_hash_len(checksum) bytes used */
	uint8_t (*rank_hash)[TPC_HASH_MAX]; /* [tp], or NULL */
	int64_t tied_to;                    /* index of the earlier tensor it is tied to, or -1 */
} tpc_manifest_tensor;

typedef struct tpc_manifest {
	char *tool, *set_id, *format, *plan_json;
	int tp, pp;            /* tp: the ranks of a stage, the file's "tp" x "dp" (every [tp]) */
	int dp;                /* "dp": data-parallel replicas of a stage (1: none; tpc_shard.h) */
	int ep;                /* 1: no expert parallelism */
	tpc_ep_placement ep_placement;
	int64_t experts;       /* routed experts per layer (ep > 1) */
	const tpc_layout *layout;
	tpc_hash_alg checksum; /* TPC_HASH_NONE: no checksum members */
	char **files; /* [tp * pp] */
	tpc_model_facts facts;
	char **meta_k, **meta_v;
	size_t nmeta;
	tpc_manifest_tensor *t;
	size_t n;
} tpc_manifest;


/* Parse and validate (untrusted input: every size, index and name checked). */
int tpc_manifest_from_buffer(tpc_manifest *m, const char *text, size_t len, const char *path, tpc_err *e);
int tpc_manifest_from_file(tpc_manifest *m, const char *path, tpc_err *e);
void tpc_manifest_release(tpc_manifest *m);

#endif
