/*
 * tpc_shard.h - tensor-parallel shard sets: split a checkpoint into per-rank
 * files, merge a set back, and reshard one set into another.
 *
 * A split is a description. Rank r's tensor is built from the input tensor
 * with tpc_tensor_narrow: a col slice is a dim-0 range (contiguous: written
 * with copy_file_range), a row slice a dim-1 range (a strided view, gathered
 * while writing), a fused tensor the concatenation of each part's slice
 * ([q_r ; k_r ; v_r]), a padded vocab slice a view followed by a zero-fill
 * part, a replicated KV head the same narrowed head range on several ranks.
 * Merge is the inverse description over the rank files (one replica per KV
 * head, padding narrowed away), and resharding feeds that merged description
 * straight into a new split: no byte is copied until the writers run, and no
 * intermediate file exists.
 *
 * Rank checkpoints. Each rank is its own tpc_ckpt (so its metadata can say
 * which rank it is) whose tensors refer to the INPUT checkpoint's sources:
 * the rank checkpoint borrows the input's source table (tpc_ckpt_borrow_all)
 * and gives it back before release, so the input must outlive the plan. Rank
 * files are written through the format registry ("safetensors", "torch",
 * "hf-index"), in parallel over ranks (OpenMP), each atomically.
 *
 * Ranks are numbered TensorRT-LLM's way: rank = pp_rank * tp + tp_rank.
 * With data-parallel replicas (--ep over --tp: Megatron's expert-parallel
 * ranks beyond one tp group, opts dp) a stage has tp x dp ranks, numbered
 * as Megatron's default order tp-cp-ep-dp-pp does: rank = (pp_rank * dp +
 * dp_rank) * tp + tp_rank; dense tensors are split over tp and repeated on
 * every dp rank (the copies deduplicated as replicated slices are), experts
 * over the stage's tp x dp ranks.
 *
 * Expert parallelism (--ep N) follows TensorRT-LLM's mapping too: the tp ranks
 * of a stage are N groups of tp/N (moe_ep_size N, moe_tp_size tp/N); dense
 * tensors are split over all tp ranks, a routed expert's tensors live only on
 * the ranks of the group that owns the expert, split tp/N ways (tpc_plan.h).
 * Expert tensors keep their global names (experts.5.w1.weight on group 1 of 4
 * with 8 experts), so a rank file says which experts it holds.
 *
 * Layouts (tpc_layout.h) name the rank files inside the output folder and say
 * what else the consumer needs there: tpconv, oslo, trtllm, hf, vllm, megatron, dcp (see
 * `tpconv shard --help`). Every layout also gets tpconv-manifest.json
 * (tpc_manifest.h), written last: its presence means the set is complete.
 *
 * Rank files describe themselves where the format has metadata (safetensors):
 *   tpconv.set_id, tpconv.rank, tpconv.tp_rank, tpconv.pp_rank, tpconv.tp, tpconv.pp
 * The set id is the first 16 hex digits of a SHA-256 over the tool version,
 * tp, pp, layout, format, the plan, every tensor's name, dtype, shape and split,
 * and the input files' sizes and modification times: runs on several machines
 * writing disjoint --rank subsets of one set agree on it, and a rank file left
 * from another set is recognised.
 */
#ifndef TPC_SHARD_H
#define TPC_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_buf.h"
#include "tpc_ckpt.h"
#include "tpc_err.h"
#include "tpc_format.h"
#include "tpc_layout.h"
#include "tpc_manifest.h"
#include "tpc_plan.h"
#include "tpc_progress.h"


typedef struct tpc_shard_opts {
	int tp, pp;
	int ep;                     /* expert parallelism: EP groups of tp x dp / ep ranks (0, 1: none;
	                               tpc_plan.h) */
	int dp;                     /* data-parallel replicas of each stage (0, 1: none): the stage has
	                               tp x dp ranks, the dense tensors split over tp of them and
	                               repeated dp times, the experts over all (ep = dp x tp: one EP
	                               rank each); only layouts with data_parallel hold them */
	tpc_ep_placement ep_placement;
	const int64_t *pp_layers;   /* [pp]: the layers of each pipeline stage (--pp-layers; they add
	                               up to the model's), or NULL: as even as possible */
	const tpc_layout *layout;   /* NULL: the default (tpconv) */
	const char *format;         /* rank file format: "safetensors" or "torch"; NULL = layout's default */
	unsigned resolve_flags;     /* TPC_RESOLVE_PAD */
	bool strict;                /* tensors no rule matched are an error */
	tpc_hash_alg checksum;      /* of every original and rank tensor, in the manifest
	                               (TPC_HASH_NONE: none; tpc_hash.h) */
	bool force;                 /* overwrite existing rank files and manifest */
	uint64_t max_shard_size;    /* layouts with sized ranks (hf, vllm): largest file of a rank (0 = one file) */
	const bool *write_rank;     /* [tp*dp*pp]: ranks this run writes; NULL = all */
	tpc_progress *progress;     /* may be NULL */
	const char *config_dir;     /* folder whose companions (config.json, tokenizer ...) the set
	                               carries and whose config.json feeds the trtllm config (NULL: none) */
	/* A reshard: what the input set's layout says its config.json lost or
	 * gained (tpc_layout_merge_extras: TensorRT-LLM's "mapping" comes out
	 * again, and only a config tpconv wrote, with config_marker, is
	 * copied). NULL: config.json as it is. */
	const char *const *config_drop;
	const char *config_marker;
	const char *config_from;    /* a reshard of a TensorRT-LLM set: the file in config_dir that is
	                               the model's config.json (TPC_EXTRAS_KEPT_CONFIG), or NULL */
	const char *config_file;    /* --config: the model's config.json the trtllm layout's config is
	                               written from, before config_dir's (NULL: none) */
	bool no_extras;             /* copy no companions of config_dir (the trtllm config.json still) */
	bool moe_grouped_gemm;      /* megatron-dist: the experts are TEGroupedMLP's (args
	                               moe_grouped_gemm), not SequentialMLP's; the same bytes */
	bool dequantized;           /* the input's quantized weights were dequantized (shard
	                               --dequantize): the copied config.json loses quantization_config */
	bool defer_manifest;        /* write the rank files only, never the manifest: under mpirun
	                             * every process writes its ranks this way and rank 0 then
	                             * completes the set with a run that writes no rank */
	const struct tpc_shard_optim *optim; /* optimizer state split beside the model (shard
	                                        --optimizer; layouts with tpc_layout.optimizer),
	                                        or NULL (tpc_shard_optim.h) */
	struct tpc__merge_check *input_check; /* a reshard: the input set's checksums, not yet
	                                         checked (tpc_merge_opts.defer_checksums). A run
	                                         that hashes every rank beside its writers checks
	                                         them in the same reads, before the manifest (a
	                                         failure takes back the rank files); any other
	                                         run checks them before it writes. */
} tpc_shard_opts;

typedef struct tpc_shard_entry {
	int64_t in;            /* tensor index in the input checkpoint */
	tpc_split split;
	bool matched;          /* a rule matched (else: the fallback) */
	bool staged;           /* placed by a layer, first_stage or last_stage pattern */
	int stage;
	int64_t *rank_ix;      /* [tp]: index in the rank checkpoint of (stage, t); -1: not there
	                          (an expert on another EP group: tpc_split_holds) */
	int *same_as;          /* [tp]: lowest tp rank holding an identical slice */
	int64_t tie;           /* the earlier entry it is tied to in the input (tpc_ckpt_ties), or -1 */
	bool hashed;
	uint8_t hash[TPC_HASH_MAX];            /* of the original (checksum's length) */
	uint8_t (*rank_hash)[TPC_HASH_MAX];    /* [tp] */
} tpc_shard_entry;

typedef struct tpc_shard_plan {
	const tpc_ckpt *in;
	const tpc_plan *plan;
	tpc_model_facts facts;
	int tp, pp;            /* tp: the ranks of a stage, tp x dp of the options (every [tp] and
	                          [tp*pp] array below, rank r = pp_rank * tp + r % tp) */
	int dp;                /* data-parallel replicas of a stage (1: none): the tensor-parallel
	                          size is tp / dp; a dense tensor's split says so (tpc_split.dp) */
	int ep;                /* 1: no expert parallelism */
	tpc_ep_placement ep_placement;
	int64_t experts;       /* routed experts per layer (ep > 1) */
	int64_t layers;
	int64_t *pp_layers;    /* [pp]: layers of each stage (--pp-layers, owned), or NULL: even */
	const tpc_layout *layout;
	const char *format;    /* static string */
	tpc_shard_entry *t;
	size_t n;
	tpc_ckpt *rank;        /* [tp*pp]: the tensors as split (what checksums cover) */
	tpc_ckpt *stored;      /* [tp*pp] or NULL: as the layout stores them (renamed, fused) */
	tpc_ckpt aux;          /* owns the bytes of tensors the ranks hold rewritten (a layer's
	                          shape per rank: compressed-tensors weight_shape); the rank
	                          checkpoints read the input's sources, then these */
	uint64_t max_shard_size;
	bool tied;             /* the layout stores tied embeddings once, or (trtllm) makes lm_head
	                          from the embedding (its check decides) */
	const struct tpc_shard_optim *optim; /* the options' optimizer state, or NULL */
	const struct tpc_family *family; /* the model family the layout names tensors for (trtllm,
	                                    vllm; its check decides), or NULL */
	char **rank_file;      /* [tp*pp]: name inside the output folder */
	size_t nunmatched, nunstaged;
	char set_id[17];
	tpc_hash_alg checksum; /* of the hashes (TPC_HASH_NONE: none) */
	/* filled by tpc_shard_write */
	size_t nwritten;       /* rank files this run wrote */
	size_t nkept;          /* rank files an interrupted run left that hold exactly this plan's bytes: kept */
	size_t nleft;          /* a run that failed for want of room (tpc_out_no_room): the rank
	                          files it finished, left for the same command to resume from */
	bool manifest_written;
	bool manifest_other;   /* another run writing the folder beside this one completed the
	                          set and wrote its manifest (this run's rank files in it) */
	size_t npresent;       /* rank files of the set present after this run */
	struct tpc__merge_check *input_check; /* checked by tpc__shard_hash_all (set by tpc_shard_write) */
} tpc_shard_plan;

/*
 * Compute the whole plan before anything is written: resolve every tensor's
 * split (errors name the tensor), place it on a pipeline stage, and build each
 * rank's checkpoint of descriptions. `in` and `plan` must outlive `sp`.
 * `facts` are the model facts already merged (flags > config > plan).
 */
int tpc_shard_plan_build(tpc_shard_plan *sp, const tpc_ckpt *in, const tpc_plan *plan,
			 const tpc_model_facts *facts, const tpc_shard_opts *o, tpc_err *e);
void tpc_shard_plan_release(tpc_shard_plan *sp);

/* The manifest of this plan (tpc_manifest.h schema; checksums included when
 * computed): what tpc_shard_write writes last, and `shard --dry-run --json`. */
void tpc_shard_manifest_render(const tpc_shard_plan *sp, tpc_buf *out);

/* The --dry-run text: per tensor the split and rank shape, per rank the file,
 * tensors, bytes and a bar against the largest rank (Unicode blocks when
 * `unicode`, else '#'), the balance (largest / smallest rank), then the
 * unmatched and unstaged tensors. */
void tpc_shard_describe(const tpc_shard_plan *sp, tpc_buf *out, bool unicode);

/*
 * Write the rank files this run owns (o->write_rank) into `dir`, in parallel,
 * then - when every rank file of the set is present - the checksums and the
 * manifest. On failure the rank files this run wrote are removed again,
 * except when the disk is full (tpc_out_no_room; not under mpirun,
 * o->defer_manifest): the finished ones stay, sp->nleft counts them, so that
 * the same command resumes once there is room.
 * Resume: without --force, a rank file already there (an interrupted run left
 * it: there is no manifest) is kept when it is this set's and every tensor is
 * byte-equal to what the plan writes (sp->nkept counts them); otherwise it is
 * replaced.
 * `dir` must not be (or lie inside) an input folder.
 */
int tpc_shard_write(tpc_shard_plan *sp, const char *dir, const tpc_shard_opts *o, tpc_err *e);

/* Is `out` the same as, or inside, folder `in_dir`? (both existing or not) */
bool tpc_shard_path_inside(const char *out, const char *in_dir);

/* ---- merging ---- */

typedef enum tpc_set_kind {
	TPC_SET_NONE = 0,
	TPC_SET_MANIFEST, /* a tpconv manifest */
	TPC_SET_FOREIGN,  /* rank files of a layout that other tools write, no manifest */
	TPC_SET_CKPT,     /* tpc_merge_open only: a sharded training checkpoint (a format
			   * registered as `sharded`, e.g. DCP) read whole */
} tpc_set_kind;

/* What kind of shard set folder `dir` is (NONE for anything else); *layout
 * (may be NULL) receives a foreign set's layout. */
tpc_set_kind tpc_set_detect(const char *dir, const tpc_layout **layout);

typedef struct tpc_merge_opts {
	const tpc_plan *plan;       /* sets without a manifest: the plan they were split with */
	tpc_model_facts facts;      /* sets without a manifest: model facts */
	int tp, pp;                 /* sets without a manifest (0: from names / config.json) */
	bool take_rank0;            /* replicated tensors that differ: take rank 0's copy */
	bool checksums;             /* verify rank tensors against the manifest (default true) */
	bool defer_checksums;       /* with checksums: leave them to tpc_merge_write, which checks
	                               them on another core while it writes a single safetensors
	                               or torch file and before that file is committed (other
	                               outputs: before writing) */
	unsigned resolve_flags;
	const char *state;          /* NULL: the model; an optimizer state key: that state of every
	                               parameter merged in its place (a foreign set whose layout has
	                               merge_state; tpc_merge_optim.h) */
} tpc_merge_opts;

typedef struct tpc_merge {
	tpc_ckpt out;           /* the merged checkpoint: descriptions over the rank files */
	tpc_ckpt *rank;         /* [nranks] opened rank files */
	int nranks, tp, pp;     /* tp: the ranks of a stage (tp x dp; tpc_shard_plan) */
	int dp;                 /* data-parallel replicas of a manifest set (0, 1: none) */
	int ep;                 /* expert parallelism of a manifest set (1: none) */
	tpc_ep_placement ep_placement;
	int64_t experts;
	tpc_set_kind kind;
	const tpc_layout *layout; /* the manifest's, or the foreign set's */
	char *plan_json;        /* the plan recorded in the manifest, or NULL */
	tpc_model_facts facts;  /* recorded in the manifest */
	size_t ndiffer;         /* replicated tensors that differed (take_rank0) */
	char differ_first[512]; /* the first of them */
	struct tpc__merge_check *check; /* checksums left to tpc_merge_write (defer_checksums) */
	const char *state;      /* tpc_merge_opts.state */
} tpc_merge;

/*
 * Open the shard set in `dir` and describe the unsplit checkpoint in m->out
 * (tensors in the original order, original metadata). Checks, each TPC_EINPUT
 * naming file and tensor: a missing rank file, a rank file from another set
 * (set id, shapes, and with o->checksums the checksum of every rank tensor
 * against the manifest, in the algorithm the manifest names), replicated
 * tensors and replicated KV heads that differ between ranks (unless
 * take_rank0).
 */
int tpc_merge_open(tpc_merge *m, const char *dir, const tpc_merge_opts *o, tpc_err *e);
void tpc_merge_release(tpc_merge *m);

/* Write the merged checkpoint with writer `f` (bounded RSS while it gathers).
 * With checksums left to it (defer_checksums), a failing checksum fails the
 * write and leaves no output. */
int tpc_merge_write(tpc_merge *m, const tpc_format *f, const char *path, const tpc_write_opts *o,
		    tpc_err *e);

/* ---- helpers shared by shard/ (private) ---- */

/* A checkpoint that borrowed sources (tpc_ckpt_borrow_all) gives them back
 * before it is released. */
void tpc__return_sources(tpc_ckpt *dst);
/* t (a description over one checkpoint's sources, copied) over a union
 * whose sources begin `by` later (tpc_ckpt_borrow_all's base); its storage
 * and tie dropped (tpc_merge.c) */
void tpc__tensor_shift_src(tpc_tensor *t, int by);

/* The manifest checksums of a merge (tpc_merge_check.c): _new copies what it
 * needs from the manifest and borrows views (tp per tensor, manifest order)
 * until _take_views hands them over; _run checks now; _start checks on a
 * thread and _finish (idempotent; a tpc_write_opts.before_commit) waits for
 * it and gives its result. */
typedef struct tpc__merge_check tpc__merge_check;
struct tpc_manifest;
int tpc__merge_check_new(tpc__merge_check **out, const tpc_ckpt *ck, const struct tpc_manifest *man,
			 tpc_tensor *views, char *const *paths, int nranks, tpc_err *e);
void tpc__merge_check_take_views(tpc__merge_check *c);
/* _run checks what no reader settled: a reader that reads a leaf of the
 * merged description whose bytes are exactly a checked rank tensor (a
 * reshard's hashing pass) _claims it (its index, or -1: none, or claimed),
 * hashes what it reads and _settles it. */
int tpc__merge_check_run(tpc__merge_check *c, bool parallel, tpc_err *e);
int64_t tpc__merge_check_claim(tpc__merge_check *c, const tpc_tensor *leaf);
tpc_hash_alg tpc__merge_check_alg(const tpc__merge_check *c);
int tpc__merge_check_settle(tpc__merge_check *c, int64_t k, const uint8_t digest[TPC_HASH_MAX], tpc_err *e);
int tpc__merge_check_start(tpc__merge_check *c, tpc_err *e);
int tpc__merge_check_finish(void *ctx, tpc_err *e);
void tpc__merge_check_free(tpc__merge_check *c);

/* Every original and rank tensor's checksum (sp->checksum) into sp->t[i],
 * in parallel, each input byte read once where the slices allow
 * (tpc_shard_hash.c). */
int tpc__shard_hash_all(tpc_shard_plan *sp, tpc_err *e);

/* Item k of a parallel loop failed with *le: kept in *first when it is the
 * lowest failing item so far (*bad, -1 while none). The loop reads *bad
 * (tpc__first_bad, atomically) to skip the items after it. */
void tpc__keep_first(int64_t k, const tpc_err *le, int64_t *bad, tpc_err *first);
int64_t tpc__first_bad(int64_t *bad);

/* While writers gather from ck's mappings, drop their resident pages every
 * few milliseconds (bounded RSS; see tpc_shard_write.c). NULL-safe stop. */
void *tpc__rss_guard_start(const tpc_ckpt *ck);
void tpc__rss_guard_stop(void *guard);

/* Give ck an object tree that is a plain state dict: an OrderedDict of its
 * tensors by name, in order (what torch.save(model.state_dict()) holds). */
int tpc__flat_root(tpc_ckpt *ck, tpc_err *e);

/* A layer's shape tensor (compressed-tensors weight_shape, [2] I32/I64,
 * split is_shape; tpc_qsplit.c): its two values (each >= 1), and a memory
 * source of ck holding v[2] in t's dtype (*idx its index), for what ranks,
 * merge and verify hold rewritten. */
int tpc__shape_read(const tpc_ckpt *ck, const tpc_tensor *t, int64_t v[2], tpc_err *e);
int tpc__shape_add(tpc_ckpt *ck, const tpc_tensor *t, const int64_t v[2], const char *label, int *idx, tpc_err *e);

/* Rank r's description of input tensor `t` under split `s`. */
int tpc__rank_tensor(const tpc_tensor *t, const tpc_split *s, int tp, int r, tpc_tensor *out);

#endif
