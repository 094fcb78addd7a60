/*
 * tpc_layout.h - shard-set layouts: how the rank files of a set are named,
 * written, recognised and read back, one file per layout behind one table.
 *
 * A layout is what the consumer of a set expects on disk. The split itself
 * (which rows of which tensor each rank holds) is the plan's business and the
 * same for every layout; a layout decides
 *
 *   - the name of rank (tp t, pp p)'s file or folder inside the set folder
 *     (rank_name), and which rank file formats it writes (formats);
 *   - whether it accepts the set at all (check: vLLM, for instance, needs the
 *     architectures it knows and head counts tp divides) and what it needs of
 *     the plan before the split is resolved (adjust_plan: vLLM's vocab padding);
 *   - the rank checkpoint as stored (stored_rank): the tensors tpconv split,
 *     renamed and fused the way the consumer names its parameters
 *     (vLLM: qkv_proj = [q_r; k_r; v_r]). NULL: stored as split;
 *   - how one rank is written (write_rank; NULL: one file through the format
 *     registry, or an HF folder when `folders`), removed again on failure
 *     (remove_rank) and read back (open_rank: the inverse of stored_rank, so
 *     merge, reshard and verify see the tensors as split);
 *   - whether a rank file already on disk is this set's (rank_file_ok; NULL:
 *     opened as a checkpoint, its set id or tensor names and shapes compared):
 *     for rank files that cannot be read alone (DCP's __R_0.distcp, whose
 *     names live in .metadata, written after every rank);
 *   - the files beside the rank files (write_extras: TensorRT-LLM's config,
 *     companions per rank folder; NULL: the model folder's companions at the
 *     set's top), and where a merge finds the companions again
 *     (merge_extras);
 *   - for sets other tools wrote, with no tpconv manifest: which folder entries
 *     are its rank files (parse_rank_file), the set's tp and pp (foreign_geometry),
 *     the path of rank r (foreign_rank_path) and, where the set's own files
 *     name the model (TensorRT-LLM's config.json), the preset it splits as
 *     (foreign_preset).
 *
 * Every set tpconv writes also gets tpconv-manifest.json, last (tpc_manifest.h),
 * whatever its layout. Ranks are numbered TensorRT-LLM's way: rank = pp_rank *
 * tp + tp_rank.
 *
 * Adding a layout: one file shard/layout_NAME.c defining a `const tpc_layout`,
 * and its line in the table in tpc_layout.c.
 */
#ifndef TPC_LAYOUT_H
#define TPC_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_ckpt.h"
#include "tpc_err.h"
#include "tpc_extras.h"
#include "tpc_family.h"
#include "tpc_format.h"
#include "tpc_plan.h"

struct tpc_shard_plan;
struct tpc_shard_opts;

/* What open_rank knows about the rank it reads back. */
typedef struct tpc_layout_rank_ctx {
	int rank, tp_rank, pp_rank, tp, pp;
	const tpc_model_facts *facts;  /* the set's model facts (manifest or flags) */
	/* The original tensor names this rank's stage holds, when a manifest says
	 * (NULL otherwise): a layout that stores tied weights once uses them to
	 * give back the names the input had. */
	char *const *names;
	size_t nnames;
	/* NULL: the model. An optimizer state key ("fp32_param", "exp_avg",
	 * "exp_avg_sq"): that state of each parameter in its place, under the
	 * parameter's name and shape (layouts with merge_state; tpc_merge_optim.h) */
	const char *state;
} tpc_layout_rank_ctx;

typedef struct tpc_layout {
	const char *name;           /* --layout NAME and the manifest's "layout" */
	const char *desc;           /* one line for --help and `tpconv plan --layouts` */
	const char *const *formats; /* rank file formats, the default first; NULL-terminated */
	bool folders;               /* each rank is a folder (an HF-sharded checkpoint) */
	bool sized;                 /* --max-shard-size splits a rank into several files */
	bool companions_at_top;     /* the model's config and tokenizer sit at the set's top */
	int max_pp;                 /* largest pipeline size it can name (0: any) */
	bool uneven_stages;         /* holds stages of any layer counts (--pp-layers) */
	bool expert_parallel;       /* holds expert-parallel sets (--ep): its consumers read
	                               experts by global name from the ranks that have them */
	bool data_parallel;         /* holds data-parallel replicas (tpc_shard_opts.dp): tp x dp ranks a
	                               stage, the dense tensors' copies on dp ranks > 0 not stored */
	bool optimizer;             /* stores optimizer state beside the model (shard --optimizer:
	                               tpc_shard_plan.optim, each state tensor split as its
	                               parameter) */
	bool merge_state;           /* a foreign set's rank files hold optimizer state that open_rank
	                               gives in place of the parameters (tpc_layout_rank_ctx.state),
	                               so that a merge joins it as the parameters (tpc_merge_optim.h) */
	const char *set_format;     /* format label of a merged set without a manifest */
	const char *merged_file;    /* a merge into a folder writes this one safetensors file there,
	                               with the companions beside it (peft: adapter_model.safetensors),
	                               not a Hugging Face checkpoint; NULL: the latter */

	/* Rank (t, p)'s file under the set's folder: rank_fmt's name, printf'd
	 * with t and p, or rank_name's where the name needs more (malloc'd) */
	const char *rank_fmt;
	char *(*rank_name)(int t, int p, int tp, int pp, const char *format);
	/* Instead of rank_name, where the name says the rank's expert-parallel
	 * rank too (Megatron's legacy mp_rank_TT[_PPP]_EEE): ep_rank is the
	 * engine's EP group of rank (t, p), -1 when the set has no expert
	 * parallelism (malloc'd) */
	char *(*rank_name_ep)(int t, int p, int tp, int pp, int ep_rank, const char *format);
	/* Instead of both, where the name depends on the plan (megatron-dist with
	 * optimizer state: the iteration's folder, iter_NNNNNNN/): rank r's name
	 * (malloc'd; NULL: out of memory) */
	char *(*rank_name_plan)(const struct tpc_shard_plan *sp, int r);

	int (*check)(struct tpc_shard_plan *sp, const struct tpc_shard_opts *o, tpc_err *e);
	int (*adjust_plan)(tpc_plan *plan, const tpc_ckpt *in, const tpc_model_facts *f, int tp, tpc_err *e);
	int (*stored_rank)(const struct tpc_shard_plan *sp, int r, tpc_ckpt *out, tpc_err *e);
	/* What rank r's file stores, when not the plan's rank tensors (--dry-run's
	 * bytes per file): its bytes and items; false when it cannot say (NULL:
	 * the rank tensors) */
	bool (*stored_size)(const struct tpc_shard_plan *sp, int r, uint64_t *bytes, size_t *items);
	int (*write_rank)(const struct tpc_shard_plan *sp, int r, const tpc_ckpt *ck, const char *path,
			  const tpc_write_opts *wo, tpc_err *e);
	void (*remove_rank)(const char *path);
	int (*rank_file_ok)(const struct tpc_shard_plan *sp, int r, const char *path, bool *ok, tpc_err *e);
	bool (*rank_exists)(const char *path);
	int (*open_rank)(const char *path, const tpc_layout_rank_ctx *c, tpc_ckpt *ck, tpc_err *e);
	int (*write_extras)(const struct tpc_shard_plan *sp, const char *dir, const struct tpc_shard_opts *o,
			    tpc_err *e);
	/* Folder whose companions a merge of the set in `dir` carries (NULL:
	 * none), with config members to drop in xo; rank0 is rank 0's path. */
	const char *(*merge_extras)(const char *dir, const char *rank0, tpc_extras_opts *xo);
	/* The Hugging Face config.json a merge of the set in `dir` writes when the
	 * set keeps none (TensorRT-LLM: rebuilt from its own): malloc'd text, or
	 * NULL (e set on an error) */
	char *(*merge_config)(const char *dir, tpc_err *e);

	/* Whether a file name is one of the set's rank files, and the ranks it
	 * names (one number: in *t, *p 0). */
	bool (*parse_rank_file)(const char *name, int *t, int *p);
	bool (*detect_dir)(const char *dir);  /* instead of parse_rank_file: the folder as a whole */
	/* Model facts a foreign set records itself (Megatron's args); unknown ones stay 0. */
	void (*foreign_facts)(const char *dir, tpc_model_facts *f);
	int (*foreign_geometry)(const char *dir, int tp_flag, int pp_flag, int *tp, int *pp, tpc_err *e);
	char *(*foreign_rank_path)(const char *dir, int t, int p, int tp);
	/* The preset (tpc_family name) of a set without a manifest whose files say
	 * which model it is; NULL: they do not (give --preset or --plan). */
	const char *(*foreign_preset)(const char *dir);
} tpc_layout;

/* The registered layouts, in --help order; the first is the default. */
size_t tpc_layout_count(void);
const tpc_layout *tpc_layout_at(size_t i);
const tpc_layout *tpc_layout_by_name(const char *name);
const tpc_layout *tpc_layout_default(void);
/* Rank (t, p)'s file name in a set of tp x pp ranks stored as `format`
 * (rank_fmt, rank_name or rank_name_ep; ep_rank: its EP group, -1 without
 * expert parallelism); malloc'd, NULL out of memory. */
char *tpc_layout_rank_name(const tpc_layout *l, int t, int p, int tp, int pp, int ep_rank, const char *format);
/* "tpconv, oslo, trtllm, hf, vllm, megatron, dcp" into buf. */
const char *tpc_layout_names(char *buf, size_t n);

/* The layout of a set without a manifest in `dir` (the first whose
 * parse_rank_file accepts an entry), or NULL. */
const tpc_layout *tpc_layout_detect_foreign(const char *dir);

/* The hooks with their defaults filled in. */
int tpc_layout_open_rank(const tpc_layout *l, const char *path, const tpc_layout_rank_ctx *c, tpc_ckpt *ck,
			 tpc_err *e);
void tpc_layout_remove_rank(const tpc_layout *l, const char *path);
bool tpc_layout_rank_exists(const tpc_layout *l, const char *path);
const char *tpc_layout_merge_extras(const tpc_layout *l, const char *dir, const char *rank0,
				    tpc_extras_opts *xo);

/* Shared by the layout files (private). */
/* Copy the model folder's companions into `dir` (config members merged from
 * `config_merge` when not NULL; only config.json with `only_config`). */
int tpc__layout_copy_companions(const struct tpc_shard_plan *sp, const char *dir, const struct tpc_shard_opts *o,
				const char *config_merge, bool only_config, tpc_err *e);
/* Layouts whose rank files are folders, each loadable alone (hf, peft): the
 * companions copied into every rank folder (write_extras), and a merge takes
 * rank 0's (merge_extras). */
int tpc__layout_companions_per_rank(const struct tpc_shard_plan *sp, const char *dir, const struct tpc_shard_opts *o,
				    tpc_err *e);
const char *tpc__layout_rank0_extras(const char *dir, const char *rank0, tpc_extras_opts *xo);
/* The tpc_extras_opts of that copy; drop[cap] holds the config members it
 * drops. */
void tpc__layout_companion_opts(const struct tpc_shard_opts *o, const char *config_merge, bool only_config,
				tpc_extras_opts *xo, const char **drop, size_t cap);

/* Whether the original names of the rank's stage (c->names) hold `name`. */
bool tpc__layout_listed(const tpc_layout_rank_ctx *c, const char *name);
/* Add a copy of t to ck under `name`; t may be one of ck's own tensors (the
 * add can move ck's table: t is copied first). */
int tpc__layout_add_copy(tpc_ckpt *ck, const char *name, const tpc_tensor *t, tpc_err *e);
/* The largest tp and pp ranks (-1 when none) among the names in `dir` that
 * `parse` takes for rank files of a foreign layout; false when none is. */
bool tpc__layout_max_ranks(const char *dir, bool (*parse)(const char *name, int *t, int *p), int *maxt, int *maxp);
/* Remove every file in folder dir whose name match takes (ctx: its data). */
void tpc__layout_unlink_if(const char *dir, bool (*match)(const char *name, const void *ctx), const void *ctx);
/* Write ck as one rank file at path with format f (its write_part when part:
 * one file of a DCP folder), the folders above path made first. */
int tpc__layout_write_file(const tpc_format *f, bool part, const tpc_ckpt *ck, const char *path,
			   const tpc_write_opts *wo, tpc_err *e);

/* Renaming by the family tables (lib/tpc_family.h) for the layouts that store
 * an ecosystem's names (trtllm, vllm). A row whose name in `eco` ends in "#K"
 * is part K of a fused tensor: _group gives its rows in part order (at most
 * TPC_LAYOUT_MAXG; 1 when not fused, 0 on a gap); _stacked: eco holds the
 * row's experts as one tensor per layer; _fuse concatenates rank q's tensors
 * of rows g[0..n) (layer l, expert x) on dim 0 (-1 when one is missing);
 * _add_stacked adds to out, for layer l of rank q and under eco's name for
 * layer `local`, every stacked tensor: the experts q holds, ascending, each
 * its parts fused. */
#define TPC_LAYOUT_MAXG 4
bool tpc__layout_stacked(const tpc_tensor_row *w, tpc_eco eco);
int tpc__layout_group(const tpc_family *f, tpc_eco eco, const tpc_tensor_row *w, const tpc_tensor_row **g);
int tpc__layout_fuse(const tpc_ckpt *q, const tpc_tensor_row *const *g, int n, int64_t l, int64_t x, bool bias,
		     tpc_tensor *out);
int tpc__layout_add_stacked(const tpc_family *f, tpc_eco eco, const tpc_ckpt *q, int64_t l, int64_t local,
			    tpc_ckpt *out, tpc_err *e);

/* The DCP format with its writer and reader (layout_dcp.c); NULL with the
 * error set when this build lacks them. */
const tpc_format *tpc__dcp_format(tpc_err *e);
/* A layout's write_rank for a DCP rank file (`__R_0.distcp`), its folder made
 * first. */
int tpc__dcp_write_rank(const struct tpc_shard_plan *sp, int r, const tpc_ckpt *ck, const char *path,
			const tpc_write_opts *wo, tpc_err *e);
/* Where each of a rank file's items lies: offset and length in the file. */
typedef struct tpc__dcp_where {
	uint64_t *off, *len;
} tpc__dcp_where;
/* Rank r's, in its file dir/file (f's part_items), which must hold the
 * `want` chunks the plan gives the rank. */
int tpc__dcp_rank_items(const tpc_format *f, const char *dir, const char *file, int r, size_t want, tpc__dcp_where *w,
			tpc_err *e);
/* Free the n ranks' w[] (NULL: nothing). */
void tpc__dcp_where_free(tpc__dcp_where *w, int n);
/* Whether the items of the DCP rank file at `path`, in order, have the dtypes
 * and shapes of want[0..n) (a rank file on disk is this set's: resume). */
typedef struct tpc__dcp_item {
	tpc_dtype dtype;
	int ndim;
	int64_t shape[TPC_MAX_NDIM];
} tpc__dcp_item;
bool tpc__dcp_items_ok(const char *path, const tpc__dcp_item *want, size_t n);
/* A rank of a set stored as one DCP checkpoint (the dcp and megatron-dist
 * layouts, layout_dcp.c): the folder dcp_dir opened whole, `fix` (or NULL)
 * turning the tensors from index n0 on into the manifest's global tensors
 * (names, shapes), then the rank's slices cut from them by the splits of
 * set_dir's tpconv-manifest.json. */
struct tpc_manifest;
typedef int (*tpc__dcp_globals_fn)(tpc_ckpt *ck, size_t n0, const struct tpc_manifest *man,
				   const tpc_layout_rank_ctx *c, const char *dcp_dir, tpc_err *e);
int tpc__dcp_open_rank(const char *path, const char *set_dir, const char *dcp_dir, const tpc_layout_rank_ctx *c,
		       tpc__dcp_globals_fn fix, tpc_ckpt *ck, tpc_err *e);

/* Megatron-Core's side of a checkpoint, shared by the megatron (legacy
 * mp_rank) and megatron-dist (torch_dist) layouts (layout_megatron.c):
 * the head facts linear_qkv is laid out by (heads, query groups, head dim;
 * an error naming the flags when they are missing), the rank's
 * [q_g; k_g; v_g] per query group over its q, k, v slices, and the
 * argparse.Namespace Megatron's loaders read (args: the plan's sizes and
 * parallelism; ffn and padded vocab of the whole model, orig the vocab
 * before padding or 0). */
/* Vocab rows padded to a multiple of 128 * tp (make_vocab_size_divisible_by) */
int tpc__mcore_adjust_plan(tpc_plan *plan, const tpc_ckpt *in, const tpc_model_facts *f, int tp, tpc_err *e);
typedef struct tpc__mcore_facts {
	int64_t heads, groups, d;
} tpc__mcore_facts;
int tpc__mcore_facts_of(const tpc_model_facts *f, tpc__mcore_facts *m, tpc_err *e);
/* The facts, and query groups tp divides (Megatron asserts it). */
int tpc__mcore_check_groups(const struct tpc_shard_plan *sp, tpc__mcore_facts *mf, tpc_err *e);
/* Stages Megatron's arguments can say: equal, or --pp-layers with the middle
 * stages equal (decoder_first/last_pipeline_num_layers). */
int tpc__mcore_check_stages(const struct tpc_shard_plan *sp, tpc_err *e);
/* Both, and experts placed as Megatron places them (contiguous), for the
 * layout named `layout` (its messages). */
int tpc__mcore_check(const struct tpc_shard_plan *sp, const char *layout, tpc__mcore_facts *mf, tpc_err *e);
/* The up projection paired with a gate in one linear_fc1 [gate; up] (a dense
 * MLP's, a routed expert's, the shared experts'); TPC_ROLE_NONE: not a gate. */
tpc_role tpc__mcore_up_of(tpc_role gate);
int tpc__mcore_fuse_qkv(const tpc_tensor *q, const tpc_tensor *k, const tpc_tensor *v, const tpc__mcore_facts *mf,
			 tpc_tensor *out);
/* Megatron-Core tensors ck->t[from, to) named prefix + Megatron's name, layer
 * numbers + start, local expert numbers + expert_base, as Hugging Face's (rows of family `fam` first, when not
 * NULL, then of `layout`'s family tables; linear_qkv per group back to q, k,
 * v, linear_fc1 to gate and up, an expert's too, as views); everything in
 * [from, to) is dropped, _extra_state included, and ck's tree (it names
 * Megatron's keys). */
int tpc__mcore_to_hf(tpc_ckpt *ck, size_t from, size_t to, const char *prefix, const char *layout, const tpc_family *fam,
		     int64_t start, int64_t expert_base, const tpc__mcore_facts *mf, const char *path, tpc_err *e);
/* A mixture of experts' args (NULL: a dense model): routed experts, their
 * top-k and rows, expert-model- and expert-tensor-parallel sizes, and which
 * module holds them (moe_grouped_gemm: TEGroupedMLP, else SequentialMLP). */
typedef struct tpc__mcore_moe {
	int64_t experts, topk, ffn;
	int ep, etp;
	bool grouped;
	bool pre_softmax; /* softmax over every expert, then top-k, not renormalised
			     (config.json's norm_topk_prob false) */
	const bool *moe_layers; /* [num_layers]: which layers have experts (moe_layer_freq as a
				   list), or NULL: every layer */
	int64_t shared_ffn;     /* the shared experts' rows (moe_shared_expert_intermediate_size);
				   0: none */
	bool expert_bias;       /* the router keeps a score correction bias (expert_bias) */
	bool sigmoid;           /* scores by sigmoid, not softmax (moe_router_score_function) */
	int64_t groups, group_topk; /* group-limited routing (moe_router_num_groups /
				       group_topk); 0: none */
	double topk_scale;      /* the chosen weights' factor (moe_router_topk_scaling_factor); 0: none */
} tpc__mcore_moe;
/* Multi-head latent attention's sizes (MLATransformerConfig, NULL: none):
 * q_lora_rank (0: None, a plain linear_q_proj), kv_lora_rank, qk_head_dim (the
 * nope part), qk_pos_emb_head_dim (the rope part), v_head_dim. */
typedef struct tpc__mcore_mla {
	int64_t q_lora_rank, kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim, v_head_dim;
} tpc__mcore_mla;
/* What the rows of the input's attention say (layout_megatron.c): q/k/v
 * biases (add_qkv_bias) and per-head q/k norms (qk_layernorm); a q/k norm
 * not of kv_channels elements is refused by name. */
typedef struct tpc__mcore_attn {
	bool qkv_bias, qk_norm;
} tpc__mcore_attn;
int tpc__mcore_attn_of(const struct tpc_shard_plan *sp, const char *layout, const tpc__mcore_facts *mf,
		       tpc__mcore_attn *at, tpc_err *e);
/* common.pt's / model_optim_rng.pt's args, for the layout named `layout`
 * (whose family records name the rows) */
tpc_value *tpc__mcore_args(const struct tpc_shard_plan *sp, const char *layout, const tpc__mcore_facts *mf,
			   int64_t ffn, int64_t vocab, int64_t orig, const tpc__mcore_moe *moe,
			   const tpc__mcore_mla *mla);
/* layout_megatron_args.c: the config.json features Megatron's args cannot
 * say (a rope its RotaryEmbedding lacks, chunked attention, a sliding window
 * with MLA or with its own rope theta), refused by name for the layout named
 * `layout`; the rope and sliding-window args added to st (a DICT; NULL on out
 * of memory, st released); tokenizer_type HuggingFaceTokenizer and
 * tokenizer_model when dir holds a Hugging Face tokenizer (0, -1 on out of
 * memory). */
int tpc__mcore_args_check(const struct tpc_shard_plan *sp, const char *layout, tpc_err *e);
tpc_value *tpc__mcore_rope_args(tpc_value *st, const struct tpc_shard_plan *sp);
int tpc__mcore_tokenizer_args(tpc_value *args, const char *dir);

/* The training state of a megatron-dist set with optimizer state
 * (layout_megatron_train.c): its folder ("release", or iter_NNNNNNN with
 * optimizer state; malloc'd), the run's facts checked (the iteration, the
 * global batch size, a schedule Megatron's scheduler accepts), and
 * common.pt's resume state added to root, the args Namespace (a CALL) and
 * the content metadata (-1: out of memory). */
struct tpc_mcore_train;
char *tpc__mcore_iter_dir(const struct tpc_shard_plan *sp);
int tpc__mcore_train_check(const struct tpc_shard_plan *sp, tpc_err *e);
int tpc__mcore_train_common(const struct tpc_shard_plan *sp, tpc_value *root, tpc_value *args, tpc_value *cm);

/* The hf-mapping layout's file names and mapping geometry, which the trtllm
 * layout shares (layout_trtllm.c). */
char *tpc__trtllm_rank_name(int t, int p, int tp, int pp, const char *format);
bool tpc__trtllm_is_rank_file(const char *name);
int tpc__trtllm_geometry(const char *dir, int tp_flag, int pp_flag, int *tp, int *pp, tpc_err *e);
char *tpc__trtllm_rank_path(const char *dir, int t, int p, int tp);

/* A TensorRT-LLM checkpoint's config.json (tpc_trtllm_config.c). The source
 * the trtllm layout writes it from: --config, the model folder's
 * config.json, or a resharded set's own (trt: a TensorRT-LLM config, kept
 * with a new mapping). fam: the family its architecture names (NULL: none). */
struct cJSON;
struct tpc_cfg;
typedef struct tpc__trt_source {
	char *path, *text;
	size_t len;
	struct tpc_cfg *cfg;      /* read through lib/tpc_cfg.h */
	const struct cJSON *root; /* its tree (borrowed from cfg) */
	bool trt;
	bool tied;          /* tie_word_embeddings */
	char arch[96];
	const tpc_family *fam;
} tpc__trt_source;
int tpc__trt_source_open(const struct tpc_shard_plan *sp, const struct tpc_shard_opts *o, tpc__trt_source *s,
			 tpc_err *e);
void tpc__trt_source_release(tpc__trt_source *s);
/* A Hugging Face config.json rebuilt from a TensorRT-LLM set's config.json
 * in dir (the inverse of the family's member table); malloc'd text. */
char *tpc__trt_hf_config(const char *dir, tpc_err *e);
/* config.json's text for the plan's geometry, weights of `dtype`. */
int tpc__trt_config_render(const struct tpc_shard_plan *sp, const tpc__trt_source *s, tpc_dtype dtype,
			   tpc_buf *out, tpc_err *e);
/* What reading a set back needs of its config.json (TensorRT-LLM's or
 * tpconv's): the family, head counts, sizes and the mapping. */
typedef struct tpc__trt_model {
	char arch[96];
	const tpc_family *fam;
	int64_t heads, kv_heads, head_size, hidden, layers, vocab, experts;
	int tp, pp, moe_tp, moe_ep;
	bool parallel_embedding;
	int sharding_dim;
	tpc_dtype dtype;
} tpc__trt_model;
int tpc__trt_model_read(const char *dir, tpc__trt_model *m, tpc_err *e);

extern const tpc_layout tpc_layout_tpconv, tpc_layout_oslo, tpc_layout_trtllm, tpc_layout_hf, tpc_layout_vllm,
	tpc_layout_megatron, tpc_layout_megatron_dist, tpc_layout_dcp, tpc_layout_hf_mapping, tpc_layout_peft;

#endif
