/*
 * tpc_plan.h - sharding plans: which tensor is split how for tensor parallelism.
 *
 * A plan maps tensor names to splits with an ordered list of rules. Each rule
 * has a regular expression in the dialect of rules files (lib/tpc_regex.h:
 * POSIX extended plus \d and \D) that is searched for in the name
 * (unanchored: write `^` and `$` where they matter). The first rule whose
 * expression matches decides the tensor's split; the plan's fallback decides
 * the tensors no rule matches ("replicate", or "error"). A later rule that also
 * matches the tensor must give it the same split: two rules that disagree
 * about one tensor make the plan ambiguous, and resolving that tensor is an
 * error naming both rules (the shadowing bug - a generic pattern hiding a
 * specific one, or the other way round - is caught where it would otherwise
 * silently give a wrong split).
 *
 * Plan JSON (the built-in presets are plans in this form; `tpconv plan NAME`
 * prints them):
 *
 *   {
 *     "name": "llama",                       optional, shown in listings
 *     "description": "...",                  optional
 *     "model": {"heads": 32, "kv_heads": 8,  optional default model facts, all
 *               "head_dim": 128,             optional; overridden by --config
 *               "hidden": 4096,              and by flags
 *               "vocab": 32000},
 *     "pad_multiple": 1,                     vocab padding: rows are padded to a
 *                                            multiple of pad_multiple * tp
 *                                            (Megatron make_vocab_size_divisible_by)
 *     "layers": ["layers\\.([0-9]+)\\."],    pipeline stages: the last capture
 *                                            group that matched is the layer index
 *     "first_stage": ["embed_tokens\\."],    non-layer tensors for stage 0
 *     "last_stage": ["^lm_head\\."],         non-layer tensors for the last stage
 *                                            (others go to stage 0)
 *     "experts": ["experts\\.([0-9]+)\\."], routed experts: the last capture group
 *                                            that matched is the expert index;
 *                                            with expert parallelism (--ep) these
 *                                            tensors live on one EP group's ranks
 *     "rules": [ RULE, ... ],
 *     "fallback": "replicate" | "error"      default "replicate"
 *   }
 *
 *   RULE = {
 *     "match": "self_attn\\.q_proj\\.(weight|bias)$",    required
 *     "split": "col" | "row" | "vocab" | "replicate" | "dim",   required
 *     "dim": N,            the split dimension: required for "dim", an override
 *                          for the others; negative counts from the end
 *     "transposed": true,  [in, out] storage (GPT-2 Conv1D): col splits dim 1,
 *                          row splits dim 0
 *     "heads": "q"|"kv"|"lin_k"|"lin_v",
 *                          the split dimension is made of attention heads
 *                          (head_dim rows each): every split falls on a head
 *                          boundary; "kv" heads are replicated when tp exceeds
 *                          their number (tp % kv heads == 0), as TensorRT-LLM
 *                          and vLLM do, and the replica factor recorded.
 *                          "lin_k" and "lin_v" are a linear attention's key
 *                          and value heads (config.json's linear_num_key_heads
 *                          of linear_key_head_dim rows, linear_num_value_heads
 *                          of linear_value_head_dim: Qwen3-Next's gated
 *                          DeltaNet), never replicated: tp must divide them
 *     "head_count": true,  with "heads": "q": the dimension holds the model's
 *                          num_attention_heads heads of whatever size it
 *                          divides into (MLA: q_b_proj has qk_nope + qk_rope
 *                          rows per head, kv_b_proj qk_nope + v, o_proj v
 *                          columns), not head_dim each; tp must divide them.
 *                          With "lin_k" / "lin_v": that many of those heads
 *                          (a group per key head: Qwen3-Next's in_proj_qkvz
 *                          holds [q k v z] of each key head's group in turn)
 *     "head_block": 3,     rows per head in units of head_dim, for head-
 *                          interleaved layouts ([nh, 3, hd] fused QKV): the
 *                          split stays a plain contiguous split on head boundaries
 *     "parts": 2 | [P, ...],  a fused tensor: equal parts, or a list where each
 *                          P is a size, "q" (heads * head_dim rows of query
 *                          heads), "kv" (kv_heads * head_dim rows of K or V
 *                          heads), "lin_k" / "lin_v" (a linear attention's
 *                          key or value heads times their size), a Mamba-2
 *                          mixer's "ssm" (ssm_heads * ssm_head_dim: z or x),
 *                          "ssm_dt" (ssm_heads: dt) or "ssm_groups" (ssm_groups
 *                          * ssm_state: B or C; one group is replicated, more
 *                          must divide by tp: vLLM's MambaMixer2), or "rest"
 *                          (what the other parts leave; at most one). Each part is split on its own and rank r
 *                          gets [part0_r ; part1_r ; ...]. With a count,
 *                          "heads" applies to every part.
 *     "gated": true,       a feed-forward input projection: 2 equal parts
 *                          [value | gate] when the model's activation is gated
 *                          (config activation_fn geglu, geglu-approximate,
 *                          swiglu), one part when it is not; an error naming
 *                          the tensor when the config does not say
 *     "unit": N,           the split dimension is made of units of N consecutive
 *                          elements that must stay together (gpt-oss's
 *                          experts.gate_up_proj: gate and up interleaved, a
 *                          pair per intermediate index: 2): each rank's slice
 *                          holds whole units; a dimension that does not divide
 *                          into tp slices of whole units is an error naming the
 *                          tensor (never padded). Not with "heads" or "parts"
 *     "pad_multiple": N    vocab only: overrides the plan's
 *     "stacked": true      the tensor is the routed experts stacked along dim
 *                          0 ([E, ...], one expert's matrix per index, as
 *                          Granite-MoE's input_linear [E, 2I, H], gpt-oss's
 *                          and Llama 4's experts.gate_up_proj [E, H, 2I]):
 *                          "split", "dim", "transposed", "parts", "heads" and
 *                          "gated" describe each expert's matrix (the tensor
 *                          without dim 0), so "col" splits the tensor's dim 1
 *                          (dim 2 when transposed), "row" its dim 2 (dim 1),
 *                          and "dim": -1 its last; every expert is split the
 *                          same way (tensor parallelism inside each). With
 *                          --ep, EP group g holds its own experts' rows of
 *                          dim 0 (tpc_split_experts), split over its tp/ep
 *                          ranks. "replicate" keeps each expert whole (with
 *                          --ep: each group its experts). Not with "vocab".
 *   }
 *
 * What each split does to a tensor of ndim dimensions:
 *   col        dim 0 (dim 1 when transposed and ndim >= 2); a 1-D bias splits dim 0
 *   row        dim 1 (dim 0 when transposed); a 1-D tensor (the bias of a row-
 *              parallel layer) is replicated and flagged: it must be added once,
 *              after the all-reduce
 *   vocab      dim 0, zero-padded to a multiple of pad_multiple * tp; the true
 *              size is recorded and the padding stripped on merge
 *   dim        the given dimension
 *   replicate  every rank gets the whole tensor
 * A 0-dim tensor is always replicated (there is nothing to split).
A col or row split of a tensor of 3 or more dimensions that is not a
convolution's matrix (dims past the second all 1) is refused, naming the
tensor, unless its rule says "stacked" or gives "dim": which of its
dimensions is the matrix's is not something to guess (a 3-D expert stack
split col on dim 0 would hand each rank whole experts of a tensor-parallel
set).
 * A split that does not divide evenly is an error naming the tensor, dim, size
 * and tp, unless padding is allowed (TPC_RESOLVE_PAD): then each part is
 * zero-padded at its end to a multiple of tp. Head splits never pad.
 */
#ifndef TPC_PLAN_H
#define TPC_PLAN_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_buf.h"
#include "tpc_err.h"
#include "tpc_facts.h"
#include "tpc_rope.h"
#include "tpc_rules.h"

#define TPC_PLAN_MAX_PARTS 16
#define TPC_PLAN_MAX_RULES 4096
#define TPC_PLAN_MAX_BYTES (16u << 20)

typedef enum tpc_split_kind {
	TPC_SPLIT_REPLICATE = 0,
	TPC_SPLIT_COL,
	TPC_SPLIT_ROW,
	TPC_SPLIT_VOCAB,
	TPC_SPLIT_DIM,
} tpc_split_kind;

typedef enum tpc_heads_kind {
	TPC_HEADS_NONE = 0,
	TPC_HEADS_Q,  /* query heads: split on head boundaries, never replicated */
	TPC_HEADS_KV, /* key/value heads: replicated when tp > their count */
	TPC_HEADS_LIN_K, /* a linear attention's key heads (linear_num_key_heads), never replicated */
	TPC_HEADS_LIN_V, /* its value heads (linear_num_value_heads), never replicated */
	/* parts of a Mamba-2 mixer's fused tensors (vLLM's MambaMixer2 splits
	 * each on its own: mamba_v2_sharded_weight_loader), listed parts only */
	TPC_HEADS_SSM,        /* "ssm": ssm_heads x ssm_head_dim rows, split on head boundaries */
	TPC_HEADS_SSM_DT,     /* "ssm_dt": a row per SSM head (dt), split with the heads */
	TPC_HEADS_SSM_GROUPS, /* "ssm_groups": ssm_groups x ssm_state rows (B or C), split on
				 group boundaries; one group is on every rank whole (vLLM
				 replicates it beside each rank's heads); tp must divide
				 more than one */
} tpc_heads_kind;

const char *tpc_split_kind_name(tpc_split_kind k);
const char *tpc_heads_kind_name(tpc_heads_kind k);
/* The facts' count of `kind` heads (kv: kv_heads, else heads) and their
 * rows each (head_dim; a linear attention's own sizes); 0 when unknown. */
int64_t tpc_heads_count(const tpc_model_facts *f, tpc_heads_kind kind);
int64_t tpc_heads_dim(const tpc_model_facts *f, tpc_heads_kind kind);

/* The rows a symbolic part ("q", "kv", "ssm", "ssm_dt", "ssm_groups") stands
 * for under the facts f, and the heads (groups) they hold in *heads (may be
 * NULL); 0 when a fact it needs is unknown. */
struct tpc_model_facts;
int64_t tpc_plan_sym_rows(tpc_heads_kind sym, const struct tpc_model_facts *f, int64_t *heads);

typedef struct tpc_plan_part {
	int64_t size;        /* explicit size, or 0 */
	tpc_heads_kind sym;  /* "q" / "kv" symbolic size (heads * head_dim), or NONE */
	tpc_heads_kind heads;
	bool rest;           /* "rest": what the other parts leave of the dim */
} tpc_plan_part;

typedef struct tpc_plan_rule {
	char *match;
	regex_t re;
	bool re_ok;
	tpc_split_kind kind;
	bool has_dim;
	int dim;
	bool transposed;
	int nparts;              /* 0: not fused */
	bool parts_listed;       /* parts[] given (else nparts equal parts) */
	tpc_plan_part parts[TPC_PLAN_MAX_PARTS];
	tpc_heads_kind heads;
	int64_t head_block;      /* >= 1 */
	bool head_count;         /* heads: the model's head count, of size dim / heads */
	int64_t pad_multiple;    /* 0: the plan's */
	bool gated;              /* 2 parts [value | gate] when the model's ff is gated, else 1 */
	bool stacked;            /* dim 0 stacks the routed experts; the rest describes one expert */
	int64_t unit;            /* >= 1: each rank's slice holds whole units of this many */
} tpc_plan_rule;

typedef struct tpc_plan_re {
	char *src;
	regex_t re;
} tpc_plan_re;

typedef struct tpc_plan {
	char *name, *desc;
	tpc_model_facts facts;     /* defaults from "model" */
	int64_t pad_multiple;      /* >= 1 */
	tpc_plan_rule *rules;
	size_t nrules;
	bool fallback_error;
	tpc_plan_re *layers, *first, *last, *experts;
	size_t nlayers, nfirst, nlast, nexperts;
	char *json;                /* canonical JSON of the plan (for manifests) */
} tpc_plan;

void tpc_plan_init(tpc_plan *p);
void tpc_plan_release(tpc_plan *p);
/* Parse a plan (JSON text of len bytes); `path` names it in errors. Unknown
 * members are refused (a typo must not silently change a split). */
int tpc_plan_from_buffer(tpc_plan *p, const char *text, size_t len, const char *path, tpc_err *e);
int tpc_plan_from_file(tpc_plan *p, const char *path, tpc_err *e);
/* A built-in preset by name: the plan of that model family's record
 * (lib/tpc_family.h); TPC_EUSAGE naming the known presets (and the nearest,
 * for a typo) if unknown. */
int tpc_plan_preset(tpc_plan *p, const char *name, tpc_err *e);

/* ---- resolving one tensor ---- */

enum {
	TPC_RESOLVE_PAD = 1u << 0, /* pad uneven splits instead of refusing them */
};

typedef struct tpc_split_part {
	int64_t size;      /* rows of this part in the original tensor (along dim) */
	int64_t pad;       /* zero rows appended before splitting */
	int64_t heads;     /* heads in this part (0: not a head split) */
	int replicas;      /* ranks sharing each head (1: none) */
	tpc_heads_kind head_kind;
	/* the pad is not stored (vLLM's cut of gpt-oss's MXFP4 intermediate,
	 * tpc__mx_cut): every rank's slice is (size + pad) / tp rows long but the
	 * last ones hold only the rows before `size`; the manifest lists each
	 * rank's rows ("rank_sizes") */
	bool uneven;
} tpc_split_part;

/*
 * Expert parallelism (TensorRT-LLM's mapping, vLLM's expert-parallel MoE):
 * the tp ranks of a stage form `ep` groups of tp/ep consecutive ranks (rank r
 * is in group r / (tp/ep), moe_ep_size = ep, moe_tp_size = tp/ep). Attention
 * and every dense tensor are split over all tp ranks as without EP; a routed
 * expert's tensor lives on the ranks of the one group that owns the expert
 * and is split over them (tp/ep ways) by its rule. A tensor with ep <= 1 is
 * on every rank.
 */
typedef enum tpc_ep_placement {
	TPC_EP_CONTIGUOUS = 0, /* group g owns experts [g*E/ep, (g+1)*E/ep) (Megatron, vLLM "linear") */
	TPC_EP_ROUND_ROBIN,    /* expert e goes to group e % ep (vLLM "round_robin") */
} tpc_ep_placement;
const char *tpc_ep_placement_name(tpc_ep_placement p);
/* The group of `ep` that owns expert e of n. */
int tpc_ep_owner(tpc_ep_placement p, int64_t e, int64_t n, int ep);

typedef struct tpc_split {
	tpc_split_kind kind;   /* REPLICATE, or the kind that split it */
	int dim;               /* split dimension; -1 when replicated */
	int rule;              /* index of the deciding rule; -1: the fallback */
	bool row_bias;         /* replicated bias of a row-parallel layer: add once */
	bool scalar;           /* 0-dim tensor, replicated */
	int nparts;            /* >= 1 when split */
	tpc_split_part part[TPC_PLAN_MAX_PARTS];
	/* a tensor that holds its layer's shape (compressed-tensors weight_shape,
	 * [out, in]): replicated, but each rank holds the shape of its slice:
	 * entry shape_dim (0 out, 1 in) is shape_len on every rank */
	bool is_shape;
	int shape_dim;
	int64_t shape_len;
	int ep;                /* > 1: an expert's tensor, on EP group ep_group's ranks only;
	                          a stacked tensor's: on every rank, each group its experts */
	int ep_group;          /* -1 for a stacked tensor */
	int64_t expert;        /* its expert index (when ep > 1; 0 for a stacked tensor) */
	/* dim 0 stacks the routed experts (a "stacked" rule): dim and the parts
	 * are the tensor's own (the expert's dims shifted by one); with ep > 1
	 * rank r holds the experts of its group (tpc_split_experts) */
	bool stacked;
	tpc_ep_placement ep_placement; /* stacked with ep > 1: which experts a group holds */
	/* > 1: data-parallel replicas (tpc_shard_plan's dp): the stage's `tp`
	 * ranks are dp groups of tp/dp, and this tensor (not an expert's) is
	 * split over each group alike, rank r holding local rank r % (tp/dp)'s
	 * slice; the copies of groups 1.. repeat group 0's (same_as) */
	int dp;
} tpc_split;

/* The experts of a stacked tensor (of n along dim 0) rank r holds: *count of
 * them, the first *first, every *step-th (contiguous: group g's n/ep from
 * g*n/ep, step 1; round-robin: g, g + ep, ...). Without ep, all n. */
void tpc_split_experts(const tpc_split *s, int64_t n, int tp, int r, int64_t *first, int64_t *step, int64_t *count);

/* Does rank r (0..tp) of a stage hold the tensor? (always, unless ep > 1) */
bool tpc_split_holds(const tpc_split *s, int tp, int r);
/* The ranks a tensor is split over (tp, tp/dp for a dense tensor of a set
 * with data-parallel replicas, or tp/ep for an expert) and rank r's place
 * among them. */
int tpc_split_tp(const tpc_split *s, int tp);
int tpc_split_local(const tpc_split *s, int tp, int r);
/* The first rank of the stage holding it. */
int tpc_split_first_rank(const tpc_split *s, int tp);

/* Rows of part k each rank holds, and where rank r's rows start in the padded
 * part (replicated heads: several ranks start at the same head). `tp` is the
 * stage's rank count: an expert's tensor (ep > 1) is split over its group. */
int64_t tpc_split_rank_len(const tpc_split *s, int k, int tp);
int64_t tpc_split_rank_start(const tpc_split *s, int k, int tp, int r);
/* Rows of part k rank r stores: tpc_split_rank_len, less the pad rows of an
 * `uneven` part (none past its end); and where they start in rank r's
 * tensor (the rows it stores of parts 0 .. k-1). */
int64_t tpc_split_rank_take(const tpc_split *s, int k, int tp, int r);
int64_t tpc_split_rank_off(const tpc_split *s, int k, int tp, int r);
/* Whether any part is uneven (rank tensors of different sizes). */
bool tpc_split_uneven(const tpc_split *s);
/* Size of the split dimension in each rank's tensor. */
int64_t tpc_split_rank_dim(const tpc_split *s, int tp);
bool tpc_split_equal(const tpc_split *a, const tpc_split *b);

/* The dimension rule `rule` (-1: the fallback) splits in a tensor of ndim
 * dimensions: >= 0, -1 when it is replicated (*row_bias set for the 1-D bias
 * of a row split), -2 when the rule's "dim" is out of range. */
int tpc_plan_rule_dim(const tpc_plan *p, int rule, int ndim, bool *row_bias);

/* Index of the first rule matching `name`, or -1. */
int tpc_plan_match(const tpc_plan *p, const char *name);

/*
 * Facts the checkpoint's shapes fix, for what config.json left unknown (see
 * tpc_infer.c). Today: whether a feed-forward the plan splits "gated" is
 * gated, when every net.0.proj.weight has exactly 2x (gated) or 1x (not) the
 * rows of its net.2.weight's columns; f->ff_act becomes TPC_FF_GATED or
 * TPC_FF_UNGATED. Shapes that disagree or say nothing leave the fact unknown
 * (the split then asks for it). `note` (may be NULL) receives one line saying
 * what was inferred from which tensors, or "" when nothing was.
 */
struct tpc_ckpt;
int tpc_facts_from_shapes(tpc_model_facts *f, const tpc_plan *p, const struct tpc_ckpt *ck, char *note, size_t n,
			  tpc_err *e);

/*
 * The facts against the shapes of the tensors they govern, before anything is
 * split or written (tpc_facts_from_shapes ends with it; a merge of a set
 * without a manifest runs it on the tensors it rebuilt). Per tensor the plan
 * splits on heads: a part of "q" heads holds heads x head_dim x head_block
 * rows, a part of "kv" heads kv_heads x head_dim x head_block; without a
 * head_dim every such part must give the same head size (rows / heads); fused
 * parts ("q", "kv") must add up to the tensor. A vocab-split tensor has at
 * least vocab rows. The plan's expert patterns find exactly `experts` experts
 * (indices 0 .. experts - 1), and every tensor its "stacked" rules match
 * stacks `experts` along dim 0. hidden is checked through the head_dim it
 * gives (hidden / heads). A contradiction is TPC_EUSAGE (the user gives the
 * right fact) naming the fact, its origin, the tensor and its shape, and what
 * the shape implies.
 */
int tpc_facts_check(const tpc_model_facts *f, const tpc_plan *p, const struct tpc_ckpt *ck, tpc_err *e);

/*
 * Decide the split of tensor `name` of shape[ndim] for `tp` ranks, with the
 * model facts `f` (already merged with the plan's). Errors (TPC_EINPUT, the
 * tensor named): uneven split, parts that do not add up, heads that do not
 * divide, missing facts for a head split, two rules that disagree, a fallback
 * of "error". `matched` (may be NULL) tells whether a rule matched.
 */
int tpc_plan_resolve(const tpc_plan *p, const tpc_model_facts *f, const char *name, int ndim,
		     const int64_t *shape, int tp, unsigned flags, tpc_split *out, bool *matched,
		     tpc_err *e);

/* Pipeline stage of `name` among `pp` stages for a model of `layers` layers
 * (count of layer indices; see tpc_plan_layer). */
int tpc_plan_stage(const tpc_plan *p, const char *name, int pp, int64_t layers);
/* The same with the layers of each stage given: counts[0..pp) (adding up to
 * layers; a stage may have none), or NULL for the even split. */
int tpc_plan_stage_in(const tpc_plan *p, const char *name, int pp, int64_t layers, const int64_t *counts);
/* Layer index in `name` per the plan's "layers" patterns, or -1. */
int64_t tpc_plan_layer(const tpc_plan *p, const char *name);
/* Expert index in `name` per the plan's "experts" patterns, or -1. */
int64_t tpc_plan_expert(const tpc_plan *p, const char *name);

/* A plan (JSON text, into `out`) from a transformers tensor-parallel plan: a
 * config.json with "base_model_tp_plan" (its model facts go into the plan) or
 * the plan dict alone; see tpc_hfplan.c for the styles. An unknown or
 * unsupported style (expert parallelism) is TPC_EINPUT naming it. */
int tpc_plan_from_hf(const char *text, size_t len, const char *path, tpc_buf *out, tpc_err *e);


#endif
