/*
 * tpc_verify.h - check a tensor-parallel shard set against the unsplit model.
 *
 * verify/ knows math and collectives, not plans, manifests or file formats:
 * the caller (cmd_verify, the tests) opens the reference checkpoint and the
 * rank files and describes, per tensor, how the reference was split. The
 * description is neutral: it is what a tpconv manifest records, and equally
 * what a Megatron, OSLO or TensorRT-LLM set implies, so any of them can be
 * translated into it.
 *
 * ---- The description (tpc_verify_set) ----
 *
 * One tpc_vtensor per reference tensor:
 *
 *   split        replicate | col | row | vocab | dim
 *   dim          the split dimension in storage (-1 when replicated). For a
 *                plain [out, in] weight col is dim 0 and row dim 1; for a
 *                `transposed` [in, out] weight (GPT-2 Conv1D) col is dim 1 and
 *                row dim 0; vocab is dim 0. tpc_verify_split_dim() gives these.
 *   parts        the split dimension is made of nparts consecutive blocks of
 *                part[k].size rows each (fused [q|k|v], [gate|up]); every part
 *                is split on its own, and rank t's tensor is the concatenation
 *                of its slice of each part. An unfused tensor has one part.
 *                part[k].pad zero rows are appended to a part before it is
 *                split (vocab padding: size = true vocab, size + pad = padded).
 *                part[k].replicas > 1 (KV heads when tp > kv heads) means tp /
 *                replicas groups: ranks r*j .. r*j+r-1 hold the same slice j.
 *                Rank t's slice of part k: len = (size + pad) / (tp / replicas)
 *                rows starting at (t / replicas) * len; rows at or past `size`
 *                are padding and must be zero.
 *   row_bias     the 1-D bias of a row-parallel layer: replicated, and added
 *                once after the all-reduce. A replicated bias that belongs to a
 *                row-parallel weight and lacks the flag is added on every rank,
 *                as a runtime reading the set would: the layer check fails.
 *   bias         index of the layer's bias in the set (-1: none);
 *                tpc_verify_link_biases() pairs "X.weight" with "X.bias".
 *   ref, rank[t] the reference tensor and rank t's tensor, each with the
 *                checkpoint that owns its bytes. rank[t].t == NULL with a
 *                non-NULL rank[t].ck means rank t lacks the tensor (a
 *                structure failure); rank[t].ck == NULL means rank t is not
 *                loaded in this process (MPI: a process opens its own rank
 *                file only).
 *   ep, ep_group expert parallelism: a routed expert's tensor lives only on
 *                the tp/ep ranks of its group and is split over them as above
 *                with tp/ep for tp and t's place in the group for t; the
 *                other ranks must not hold it. Layer checks run on the group
 *                (the others take part in the collectives with zeros), the
 *                MoE block check sums every group's experts across all ranks.
 *   dp           data-parallel replicas of a stage (Megatron's expert
 *                parallelism over more ranks than tp: ep = tp' x dp, the set's
 *                tp = tp' x dp ranks a stage, tpc_verify_set.dp): a dense
 *                tensor (not an expert's) is split over the tp' ranks of dp
 *                group 0 (ranks 0 .. tp'-1) as above with tp' for tp; ranks of
 *                the other dp groups hold the same stored slices (a replica
 *                loads them: rank t's is group 0's rank t % tp'), which the
 *                structure check does not compare again. Layer and block
 *                checks, and the dense part of the model check, run on dp
 *                group 0 (the others take part in the collectives with zeros);
 *                every rank computes the experts it holds.
 *   hash, rank_hash       optional checksums (a manifest's, in hash_alg:
 *                xxh3-128 or sha256, tpc_hash.h) to confirm.
 *
 * A tensor that stacks a layer's routed experts along dim 0 (a plan's
 * "stacked" rule: Granite-MoE's input_linear [E, 2I, H]) is described as one
 * tensor per expert, named TPC_VERIFY_EXPERT_NAME of its name and expert
 * ("...input_linear.weight[5]"): the reference's dim 0 index and each rank's
 * (the caller's views, no bytes copied), split as one expert is, an expert
 * of its EP group under expert parallelism. Every check then sees experts as
 * it sees a checkpoint that names them one by one.
 *
 * A model description (tpc_vmodel, optional) names which tensors form each
 * layer's attention and MLP, plus embeddings, norms and head, for the block
 * and whole-model checks. tpc_verify_model_from_names() builds it from a
 * family record: its layer parts and its tensor table's Hugging Face names.
 *
 * ---- The checks (every rank runs tpc_verify_run in the same order) ----
 *
 *   structure  every rank's tensor has the expected shape and dtype and is, bit
 *              for bit, its slice of the reference (padding zero, every replica
 *              equal): merging the set in memory gives every original tensor
 *              back. Checksums are confirmed when given.
 *   col        (col, vocab head, dim 0) seeded x[T, in]; each rank computes
 *              x W_t^T (+ b_t); all-gather; every part of every rank's output
 *              compared with its columns of the unsplit x W^T + b.
 *   row        (row, dim 1) each rank takes its slice of x, computes x_t W_t^T,
 *              all-reduce (summed in rank order), bias added once; compared
 *              with x W^T + b.
 *   embed      (vocab) seeded token ids; masked lookup on each rank, all-reduce.
 *   head       (vocab) logits x W^T per rank, all-gathered, padding stripped.
 *   mlp        per layer: col gate/up (or fused gate_up, split per part) ->
 *              activation (SwiGLU: act(gate) * up) -> row down + all-reduce;
 *              no gather in between.
 *   attn       per layer: q/k/v (or fused qkv) col on head boundaries, each
 *              rank's query heads attend to the KV heads it holds (GQA
 *              replicas), RoPE (llama), causal softmax, o row + all-reduce.
 *   model      embedding -> layers -> final norm -> lm head on T tokens,
 *              tensor-parallel vs unsplit: logits max abs / rel difference and
 *              top-1 agreement.
 *
 * Inputs are drawn from (seed, check, element index) with splitmix64 and are
 * exactly representable in fp32, so every rank builds its slice without
 * communication. The tensor-parallel side computes in fp32; the reference is
 * the unsplit computation in fp64 on rank 0. All kernels reduce in a fixed
 * order that depends neither on the thread count nor on the backend, and the
 * all-reduce sums in rank order on every rank: the threads and the MPI
 * backends give the same bits (each result carries a digest of its fp32
 * outputs to show it).
 *
 * Comparison. For each element, err = |a - r| and
 *   rel = err / max(|r|, rms(r)),   pass iff err <= atol + rtol * max(|r|, rms(r))
 * where rms(r) is the root mean square of the reference output of that check:
 * scaling by the output's RMS keeps elements that cancel to near zero from
 * failing on fp32 rounding, while any wrong slice (errors of the size of the
 * output itself) fails by orders of magnitude.
 *
 * Default tolerances, by the dtype of the weights (overridable):
 *   F32, F64     rtol 1e-5 (layers, blocks), 1e-4 (model), atol 1e-6
 *   F16, BF16    rtol 1e-2, atol 1e-3
 * Attention and model checks raise rtol to 4 * 2^-24 * S when that is
 * larger, S the largest scaled score magnitude sum_i |q_i k_i| / sqrt(hd)
 * of the reference: softmax turns the absolute rounding error of a score
 * (about 2^-24 S) into a relative error of its outputs, so models with huge
 * scores (unscaled random weights: S ~ 1e4) differ from fp64 by more than
 * 1e-5 while nothing is wrong. Well-scaled models keep the default; the
 * report carries the rtol used. An explicit rtol is never raised.
 * The CPU side widens half-precision weights exactly and computes in fp32,
 * so its errors are fp32's for every dtype; the half-precision tolerances
 * leave room for GPU paths that keep activations in the weight dtype.
 *
 * ---- JSON report (tpc_verify_report_json), schema version 1 ----
 *
 *   {
 *     "tpconv_verify": 1,
 *     "tp": 4, "seed": 1, "tokens": 8,
 *     "dp": 2,                      only with data-parallel replicas: "tp" counts
 *                                   a stage's ranks, tp/dp x dp
 *     "backend": "threads" | "mpi" | "cuda",
 *     "device": "cpu" | "cuda",
 *     "collectives": "threads" | "mpi" | "nccl",   host threads, MPI, or NCCL
 *                                   (cuda with one GPU per rank; more ranks
 *                                   than GPUs keep the host collectives)
 *     "passed": 57, "failed": 0, "skipped": 0,
 *     "ok": true,
 *     "seconds": 1.25,
 *     "weights_read": 91234560,     bytes of weights rank 0's layer, block and model
 *                                   checks read (its slices and the reference)
 *     "checks": [
 *       {"check": "structure" | "col" | "row" | "embed" | "head" | "mlp" | "attn" | "model",
 *        "tensor": "model.layers.0.mlp.up_proj.weight",   tensor, layer or "model"
 *        "dtype": "F32",
 *        "status": "pass" | "fail" | "skip",
 *        "elements": 4096,             values compared (bytes-elements for structure)
 *        "mismatches": 0,              summed over ranks
 *        "capped": false,              true: a rank stopped counting at
 *                                      TPC_VERIFY_COUNT_MAX (structure), so
 *                                      mismatches and max_abs are lower bounds
 *        "max_abs": 1.2e-06,           numeric checks; 0 for structure
 *        "max_rel": 3.1e-07,
 *        "rtol": 1e-05, "atol": 1e-06,
 *        "top1": [8, 8],               model only: agreeing tokens, tokens
 *        "digest": "0123456789abcdef", FNV-1a of the fp32 tensor-parallel
 *                                      output bits ("" for structure)
 *        "message": "...",             why it failed or was skipped ("" if none)
 *        "first": [                    up to 4 first differing values
 *          {"rank": 1, "index": 17, "expected": 0.25, "actual": -0.5}]}
 *     ]
 *   }
 *
 * The table (tpc_verify_report_table) has one `#`-prefixed header and one row
 * per check: check, tensor, max abs, max rel, pass; failures are followed by
 * their first differing values. JUnit XML (tpc_verify_report_junit): one
 * <testsuite name="tpconv-verify">, one <testcase classname="<check>"
 * name="<tensor>"> per check, <failure> and <skipped/> where due.
 *
 * Errors: a description that does not fit the reference (parts that do not
 * add up, a split dim out of range) is TPC_EINPUT; a shard set that differs
 * from its description (wrong shape, wrong bytes, wrong numbers) is not an
 * error but a failed check, and tpc_verify_run returns TPC_EMISMATCH. A
 * collective or GPU failure is TPC_EGPU.
 */
#ifndef TPC_VERIFY_H
#define TPC_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_buf.h"
#include "tpc_ckpt.h"
#include "tpc_err.h"
#include "tpc_facts.h"
#include "tpc_family.h"
#include "tpc_progress.h"
#include "tpc_rope.h"

#define TPC_VERIFY_MAX_PARTS 16
#define TPC_VERIFY_MAX_TP 1024
#define TPC_VERIFY_MAX_TOKENS 4096
#define TPC_VERIFY_NDIFF 4
/* The structure check stops counting one rank's differing elements of one
 * tensor after this many (a swapped or garbage file differs everywhere, and
 * looking at every element then only costs time): its message says "more
 * than N", the result's `capped` is set, and its count, summed over ranks, is
 * a lower bound, as is max abs (over the counted elements). The first
 * TPC_VERIFY_NDIFF differences are named either way. */
#define TPC_VERIFY_COUNT_MAX 100000
/* The name verify gives expert x of a tensor stacking them (see above). */
#define TPC_VERIFY_EXPERT_NAME "%s[%lld]"

typedef enum tpc_vsplit {
	TPC_VSPLIT_REPLICATE = 0,
	TPC_VSPLIT_COL,
	TPC_VSPLIT_ROW,
	TPC_VSPLIT_VOCAB,
	TPC_VSPLIT_DIM,
} tpc_vsplit;

const char *tpc_vsplit_name(tpc_vsplit s);
/* The storage dim a split acts on for an ndim tensor: col 0 (1 when
 * transposed and ndim >= 2), row 1 (0 when transposed), vocab 0; -1 for
 * replicate, for a 1-D row tensor (a row bias is replicated) and for dim. */
int tpc_verify_split_dim(tpc_vsplit s, bool transposed, int ndim);

typedef struct tpc_vpart {
	int64_t size;  /* rows of the part in the reference */
	int64_t pad;   /* zero rows appended before splitting */
	int replicas;  /* ranks holding each slice (>= 1) */
} tpc_vpart;

typedef struct tpc_vrank {
	const tpc_ckpt *ck; /* NULL: this rank is not loaded in this process */
	const tpc_tensor *t; /* NULL (with ck set): the rank lacks the tensor */
} tpc_vrank;

typedef struct tpc_vtensor {
	char *name;                /* owned */
	const tpc_ckpt *ref_ck;
	const tpc_tensor *ref;
	tpc_vrank *rank;           /* [tp], owned array */
	tpc_vsplit split;
	int dim;                   /* storage dim split, -1 when replicated */
	bool transposed;           /* [in, out] weight */
	bool row_bias;
	int nparts;                /* >= 1 when split; 0 when replicated */
	tpc_vpart part[TPC_VERIFY_MAX_PARTS];
	int64_t bias;              /* index of the layer's bias, -1 none */
	int ep, ep_group;          /* ep > 1: a routed expert's tensor (expert parallelism) held
	                              only by the tp/ep ranks of group ep_group (ranks
	                              ep_group * tp/ep ..) and split over them; the others
	                              must not have it */
	int dp;                    /* > 1 (a dense tensor of a set with data-parallel replicas):
	                              split over the tp/dp ranks of dp group 0; the others hold
	                              their copies of those slices, not compared again */
	tpc_hash_alg hash_alg;     /* of hash and rank_hash */
	bool has_hash;
	uint8_t hash[TPC_HASH_MAX];         /* of the reference tensor */
	uint8_t (*rank_hash)[TPC_HASH_MAX]; /* [tp] or NULL, owned */
} tpc_vtensor;

/* Does rank t hold tensor v (always, unless it is an expert of another EP
 * group, or a dense tensor on a data-parallel rank past group 0)? The ranks v
 * is split over (tp, tp/ep for an expert, tp/dp for a dense tensor with dp),
 * and the first of them (tpc_vtensor_root: where its group's results come
 * from). */
bool tpc_vtensor_holds(const tpc_vtensor *v, int tp, int t);
int tpc_vtensor_tp(const tpc_vtensor *v, int tp);
int tpc_vtensor_root(const tpc_vtensor *v, int tp);
/* Rows of part k that rank t holds, where they start in the padded part, and
 * the offset of part k inside rank t's tensor along the split dim (an
 * expert's: among its group's ranks). */
int64_t tpc_vpart_len(const tpc_vtensor *v, int k, int tp);
int64_t tpc_vpart_start(const tpc_vtensor *v, int k, int tp, int t);
int64_t tpc_vpart_local_off(const tpc_vtensor *v, int k, int tp);
/* Rank t's expected size along the split dim (sum of its part lengths). */
int64_t tpc_vtensor_local_dim(const tpc_vtensor *v, int tp);

typedef enum tpc_vact {
	TPC_VACT_SILU = 0,
	TPC_VACT_GELU,      /* exact: x/2 (1 + erf(x / sqrt 2)) */
	TPC_VACT_GELU_TANH, /* GPT-2 gelu_new */
	TPC_VACT_RELU,
} tpc_vact;

typedef enum tpc_vnorm {
	TPC_VNORM_RMS = 0,   /* x / sqrt(mean(x^2) + eps) * w */
	TPC_VNORM_LAYER,     /* (x - mean) / sqrt(var + eps) * w + b */
} tpc_vnorm;

/* Tensor indices into the set; -1 when absent. */
typedef struct tpc_vmlp {
	int64_t gate, up, gate_up, down; /* SwiGLU: gate + up, or fused gate_up (2 parts); plain: up */
	tpc_vact act;
	bool glu;                        /* out = down(act(gate) * up) */
	bool value_first;                /* fused [up | gate] (diffusers GEGLU) instead of [gate | up] */
	bool interleaved;                /* fused gate_up alternates gate and up along its out dim
					    (gpt-oss: gate at even, up at odd columns), one part whose
					    slices hold whole pairs, not [gate | up] */
	double clamp;                    /* > 0: the clamped SwiGLU (the record's clamped_glu): gate =
					    min(gate, clamp), up = clamp(up, -clamp, clamp), out = (up
					    + 1) * gate * sigmoid(alpha gate); 0: act and glu above */
	double alpha;
} tpc_vmlp;

/* DeepSeek-V2/V3 multi-head latent attention (transformers'
 * DeepseekV3Attention): q = q_b(rms(q_a(x))) (or q_proj(x) without q_lora),
 * [nope | rope] a head; kv_a(x) = [c | k_pe], c of kv_lora, k_pe one rope
 * part shared by every head; kv_b(rms(c)) = [k_nope | v] a head; RoPE on
 * the rope parts only, in interleaved pairs (x0, x1), (x2, x3) ... unless
 * `rotate_half`; softmax scale (nope + rope)^-1/2 times `mscale2` (yarn's
 * mscale(factor, mscale_all_dim)^2); with yarn (factor > 1) the frequencies
 * and cos/sin scaling of transformers' _compute_yarn_parameters. Heads split
 * by q_b (q_proj) and kv_b rows, o_proj by its columns; q_a, kv_a and their
 * norms replicated. Tensor indices -1 when absent. */
typedef struct tpc_vmla {
	int64_t q_a, q_a_norm, q_b, q_proj, kv_a, kv_a_norm, kv_b;
	int64_t q_lora, kv_lora, nope, rope, v_dim; /* sizes from the shapes and the heads */
	bool rotate_half;
	double mscale2;                  /* 1 without yarn's mscale_all_dim */
	tpc_yarn yarn;                   /* factor <= 1: plain RoPE; beta_fast, beta_slow
					  * set (32, 1 unsaid); truncate 1 or 0 */
} tpc_vmla;

/* A gated DeltaNet (tpc_layer_parts' linear_attn: Qwen3-Next's
 * linear_attn): its tensors and sizes; the attention's o is out_proj. */
typedef struct tpc_vdelta {
	int64_t qkvz, ba, conv, dt, a_log, norm; /* in_proj_qkvz, in_proj_ba, conv1d, dt_bias, A_log, norm */
	bool flat;                               /* the projections are four tensors over all heads
						    instead of qkvz and ba: in_proj_qkv [q | k | v],
						    in_proj_z, in_proj_b, in_proj_a (Qwen3.5) */
	int64_t qkv, z, b, a;                    /* those (flat), else -1 */
	int64_t nk, nv, dk, dv, kernel;          /* key heads (groups), value heads, their sizes, the conv's width */
	double eps;                              /* the gated norm's (rms_norm_eps) */
} tpc_vdelta;

typedef struct tpc_vattn {
	int64_t q, k, v, qkv, o;         /* separate q/k/v or fused qkv (3 parts [q|k|v]) */
	int64_t kv;                      /* with q and k < 0: fused [k|v] (2 parts; DALLE2's to_kv);
					    k, v and kv may be replicated (every rank computes every
					    kv head: multi-query attention) */
	int64_t heads, kv_heads, head_dim;
	bool rope;                       /* rotary embedding on q and k (rotate-half, or rope_pairs
					    below); false: none (a NoPE layer) */
	double rope_theta;
	int64_t q_norm, k_norm;          /* RMSNorm of every q and k head before the rotary embedding
					    (Qwen3's q_norm/k_norm, [head_dim], replicated); -1: none */
	double qk_eps;                   /* their epsilon (the model's norm_eps) */
	bool qk_whole;                   /* q_norm/k_norm are over the whole projection [heads *
					    head_dim], not per head (OLMo 2): the ranks all-reduce the
					    sums of squares of their heads */
	bool qk_after_rope;              /* q_norm/k_norm after the rotary embedding, not before
					    (HunYuan's query_layernorm/key_layernorm) */
	bool bidirectional;              /* every query sees every key (DiT); else causal */
	int64_t kv_width;                /* cross-attention: k and v read encoder states of this
					    width (seeded like the block input); 0: the block input */
	bool mla;                        /* DeepSeek multi-head latent attention: the tensors and
					    sizes in `lat` (q, k, v unused; o is o_proj) */
	tpc_vmla lat;
	bool delta;                      /* a gated DeltaNet: the tensors and sizes in `dn` (q, k, v
					    unused; o is out_proj) */
	tpc_vdelta dn;
	bool gated;                      /* q holds each head's query then its output gate: the
					    context times sigmoid(gate) (Qwen3-Next) */
	bool interleaved;                /* qkv holds [q, k, v] per head ([heads, 3, head_dim] rows,
					    GPT-NeoX's query_key_value): one part split on 3 * head_dim */
	int64_t rot_dims;                /* rope on the first rot_dims of each head only (GPT-NeoX's
					    rotary_pct, GLM-4's partial_rotary_factor); 0: the whole head */
	bool rope_pairs;                 /* the rope rotates interleaved pairs (x0, x1), (x2, x3) ...
					    with frequency i for pair i (the record's interleaved rope:
					    GLM-4, ERNIE 4.5); else the halves (x_i, x_{i + rot/2}) */
	double rope_linear;              /* a linear rope scaling's factor: positions divided by it
					    (0: none) */
	tpc_yarn yarn;                   /* a yarn rope scaling (factor > 1; betas, orig_max and
					    truncate resolved): tpc__rope_freqs' frequencies and
					    cos/sin factor (gpt-oss); factor 0: none */
	double scale;                    /* the scores' scale (Gemma's query_pre_attn_scalar^-1/2,
					    Granite's attention_multiplier); 0: head_dim^-1/2 */
	double softcap;                  /* scores capped as softcap * tanh(s / softcap) before the
					    mask (Gemma 2); 0: none */
	int64_t window;                  /* a sliding-window layer: token t sees keys t - window + 1
					    .. t (transformers' sliding_window); 0: all before it */
	int64_t sinks;                   /* a learned sink logit per query head [heads] (the role
					    attn_sinks, gpt-oss): one more column in each head's softmax,
					    dropped after it; split with the query heads or
					    replicated; -1: none */
	tpc_rope_llama3 llama3;          /* a llama3 rope scaling of the frequencies (factor 0:
					    none; tpc__rope_llama3) */
	bool longrope;                   /* the model's longrope rope (tpc_vmodel's longrope) */
	bool qk_l2;                      /* every q and k head RMS-normalised without a weight
					    (qk_eps) after the rotary embedding (Llama 4's L2 norm) */
	double temp_floor, temp_scale;   /* the queries of token t times 1 + temp_scale *
					    log(1 + floor((t + 1) / temp_floor)) (Llama 4's attention
					    temperature tuning); temp_floor 0: none */
	int64_t chunk;                   /* chunked local attention: token t sees keys t - t % chunk
					    .. t (Llama 4's chunked_attention); 0: none */
} tpc_vattn;

/* A mixture-of-experts feed-forward (Mixtral, Qwen2/3-MoE, DeepSeek-V2/V3):
 * scores = softmax (or, `sigmoid`, the sigmoid) of the router's logits; the
 * top_k experts per token (ties to the lower index) chosen by score +
 * score_bias (DeepSeek-V3's e_score_correction_bias, for choosing only),
 * among the topk_group best of n_group groups when n_group > 1 (a group's
 * score: the sum of its top 2 choice scores, or its best with `group_max`,
 * DeepSeek-V2's group_limited_greedy; experts of other groups are never
 * chosen, as vLLM's grouped_topk); their weights are the scores without the
 * bias, renormalised to sum 1 when `renorm`, times `scale`
 * (routed_scaling_factor); out = sum_k w_k expert_k(x) (+ shared(x), times
 * sigmoid(x g^T) with a shared expert gate). `sparsemixer` (Phi-3.5-MoE):
 * top_k 2, the best logit's expert, then the best of the others; each
 * weighted by the softmax of the logits of the experts then left whose
 * (best - logit) / max(|logit|, best) is at most 2 x `jitter`, at its own
 * (tpc__sparsemixer); no bias, groups, renormalisation or scale. */
typedef struct tpc_vmoe {
	int64_t router;                  /* [E, H], replicated */
	int64_t router_bias;             /* [E], replicated, added to the router's logits (gpt-oss);
					    -1: none */
	int64_t nexp;
	tpc_vmlp *exp;                   /* nexp SwiGLU experts (owned); NULL: not an MoE layer */
	int64_t top_k;
	bool renorm;
	tpc_vmlp shared;                 /* shared.down < 0: none */
	int64_t shared_gate;             /* [1, H]; -1: none (shared expert added ungated) */
	bool sigmoid;
	int64_t score_bias;              /* [E], replicated; -1: none */
	int64_t n_group, topk_group;     /* n_group <= 1: no group limit */
	bool group_max;
	double scale;                    /* > 0 */
	bool sparsemixer;
	double jitter;                   /* the sparsemixer's eps (router_jitter_noise) */
	bool scale_input;                /* each chosen expert's input times its weight, its output
					    added as is (Llama 4's Llama4TextMoe), not its output
					    times the weight */
} tpc_vmoe;

/* A Mamba-2 mixer in place of a layer's attention (the record's parts.ssm):
 * tensor indices (-1: none) of in_proj [z | x | B | C | dt] and its bias,
 * the conv1d's weight [channels, 1, conv] and bias, dt_bias, A_log, D, the
 * gated norm's weight and out_proj; heads of head_dim channels, groups of
 * B and C of state channels, the norm's epsilon (tpc_layer_parts.ssm says
 * the arithmetic) */
typedef struct tpc_vssm {
	int64_t in, conv_w, conv_b, dt_bias, a_log, d, norm, out;
	int64_t heads, head_dim, groups, state, conv;
	double eps;
} tpc_vssm;

typedef struct tpc_vlayer {
	char *name;                      /* "model.layers.3" (owned) */
	int64_t norm1_w, norm1_b, norm2_w, norm2_b;
	int64_t post1_w, post2_w;        /* the norms of the attention's and the MLP's outputs before
					    the residual add (OLMo 2, Gemma 2/3); -1: none */
	tpc_vattn attn;                  /* attn.o < 0: no attention check (a DiT feed-forward entry) */
	tpc_vmlp mlp;                    /* mlp.down < 0: no feed-forward check */
	tpc_vmoe moe;                    /* moe.exp NULL: none */
	tpc_vssm ssm;                    /* ssm.in < 0: none; else the layer's mixer (no attn) */
	int64_t hidden;                  /* the block's width when it differs from the model's
					    (a Unet's stages); 0: the model's */
} tpc_vlayer;

/* The forward verify composes, derived from the record's parts
 * (tpc_layer_parts) only, never from a name. */
typedef enum tpc_varch {
	TPC_VARCH_LLAMA = 0, /* RMSNorm, RoPE, SwiGLU, untied or tied head */
	TPC_VARCH_GPT2,      /* LayerNorm, learned positions, gelu_new, Conv1D */
	TPC_VARCH_DIT,       /* diffusers transformer blocks: attention and feed-forward checks only */
	TPC_VARCH_DALLE2,    /* DALLE2-pytorch attentions and feed-forwards: block checks only */
	TPC_VARCH_GPTNEOX,   /* GPT-NeoX / Pythia (and LiBai's GPT): LayerNorm, head-interleaved
				query_key_value, partial rotary, parallel residual (neox.c) */
	TPC_VARCH_BERT,      /* BERT encoder: post-norm, bidirectional, token types (neox.c) */
} tpc_varch;

typedef struct tpc_vmodel {
	tpc_varch arch;                  /* from parts */
	tpc_layer_parts parts;           /* the family record's */
	tpc_vnorm norm;
	double norm_eps;
	int64_t hidden, vocab;           /* vocab: true (unpadded) size */
	int64_t embed, pos_embed, final_norm_w, final_norm_b, lm_head; /* lm_head -1: tied to embed */
	tpc_vlayer *layers;
	int64_t nlayers;
	bool moe;                        /* some layer is a mixture of experts */
	bool mla;                        /* some layer has MLA attention (tpc_vmla) */
	bool delta;                      /* some layer is a gated DeltaNet (tpc_vdelta) */
	/* GPT-NeoX and BERT (verify/neox.c); -1 / false for the others */
	bool parallel_residual;          /* x + attn(norm1(x)) + mlp(norm2(x)) (GPT-NeoX) */
	bool post_norm;                  /* BERT: x = norm1(x + attn(x)); x = norm2(x + mlp(x)); the
					    final norm is the MLM transform's */
	int64_t type_embed;              /* BERT: token type 0's row added to every token */
	int64_t embed_norm_w, embed_norm_b; /* BERT: the embeddings' LayerNorm */
	int64_t mlm_dense;               /* BERT: the MLM transform's dense (gelu after it) */
	int64_t head_bias;               /* the head's vocab bias (BERT's decoder, Phi's lm_head) */
	double embed_mul;                /* the embeddings times this (Gemma: sqrt(hidden) in the
					    embedding's dtype; Granite: embedding_multiplier); 0: none */
	double final_softcap;            /* logits capped as cap * tanh(l / cap) (Gemma 2); 0: none */
	double resid_mul;                /* each sublayer's output times this before its residual
					    add (Granite's residual_multiplier); 0: none */
	double logit_div;                /* the logits divided by this (Granite's logits_scaling);
					    0: none */
	double logit_mul;                /* the logits times this (Cohere's logit_scale); 0: none */
	bool hidden_out;                 /* no head (BertModel): the model check compares the last
					    hidden states [T, hidden] */
	tpc_rope_longrope longrope;      /* a longrope rope (on: its layers' tpc_vattn.longrope),
					    as config.json says it; resolved: */
	int64_t longrope_orig;           /* original_max_position_embeddings: longer sequences
					    take long_factor, the others short_factor */
	double longrope_af;              /* cos and sin times this (attention_factor) */
	int64_t rope_max;                /* a dynamic rope's max_position_embeddings: more tokens
					    are refused (transformers rescales its frequencies past
					    them, dynamic_rope_update); 0: none */
} tpc_vmodel;

typedef struct tpc_verify_set {
	int tp;                          /* the ranks of a stage (tp' x dp with dp replicas) */
	int dp;                          /* data-parallel replicas of a stage (0, 1: none; see
					    tpc_vtensor.dp): ranks dp group 0 does not hold compute
					    the experts they hold and nothing else */
	tpc_vtensor *t;
	size_t n, cap;
	tpc_vmodel *model;               /* owned; NULL: no block or model checks */
} tpc_verify_set;

void tpc_verify_set_init(tpc_verify_set *s, int tp);
void tpc_verify_set_release(tpc_verify_set *s);
/* Append a tensor; returns its index or a negative status. `parts` may be
 * NULL for an unfused split (one part: the whole dim, no pad, replicas 1).
 * Rank entries start as "not loaded" (ck = NULL). */
int64_t tpc_verify_set_add(tpc_verify_set *s, const char *name, const tpc_ckpt *ref_ck,
			   const tpc_tensor *ref, tpc_vsplit split, int dim, bool transposed,
			   bool row_bias, int nparts, const tpc_vpart *parts, tpc_err *e);
void tpc_verify_set_rank(tpc_verify_set *s, int64_t i, int t, const tpc_ckpt *ck,
			 const tpc_tensor *rt);
int64_t tpc_verify_set_find(const tpc_verify_set *s, const char *name);
/* Pair every "X.weight" with its "X.bias", and an expert's view "X[e]" of a
 * stacked X not named X.weight with "X_bias[e]" (gpt-oss's gate_up_proj). */
void tpc_verify_link_biases(tpc_verify_set *s);
/* Check the description against the reference shapes (TPC_EINPUT, naming
 * the tensor): dims in range, parts adding up, slices dividing evenly. */
int tpc_verify_set_validate(const tpc_verify_set *s, tpc_err *e);

/* The model's facts are lib's (tpc_facts.h), 0 meaning unknown; what verify
 * derives from them stays here: norm_eps 0 is the record's, else 1e-6
 * (RMSNorm) or 1e-5 (LayerNorm),
 * rope_theta 0 is 10000; experts_per_tok 0 is the record's (Mixtral's 2);
 * norm_topk 0 the record's default (renormalised with a softmax_topk
 * router); scoring sigmoid or softmax (the default); n_group and
 * topk_group count only with topk_method group_limited_greedy or noaux_tc,
 * and group_limited_greedy scores a group by its best expert (else its top
 * 2); routed_scale 0 is 1; ff_act (dit) says whether the feed-forward is
 * gated [value | gate] and its activation (GELU / GEGLU: GELU, SwiGLU and
 * other ungated ones: SiLU, the rest GELU tanh); MLA's heads are heads,
 * rope_interleave 0 interleaved (DeepSeek's default), yarn when its factor
 * > 1; rotary_pct 0 is the record's rope_fraction, parallel_residual 0
 * yes. */

/*
 * Find the tensors of a token model in the set by its family record's tensor
 * table (Hugging Face names, under the prefix the checkpoint uses: the
 * table's, none, or "language_model." before it) and attach a model
 * description its layer parts compose: the top (embedding, learned
 * positions, final norm, head or tied), then layers 0, 1, ... until one is
 * missing, each by the layer roles (norms where the parts place them, q/k/v
 * or a fused qkv, o, q/k norms, the MLP's gate/up/down or a fused gate_up;
 * GPT-2's Conv1D transposed). A layer without a dense MLP is a mixture of
 * experts by the record's rows: the router, each expert's tensors (one per
 * expert, "{E}", or TPC_VERIFY_EXPERT_NAME views of the tensor the
 * checkpoint stacks them in, a fused [gate | up] row pair as each expert's
 * gate_up), a score correction bias, a shared expert and its gate; a record
 * without a router row reads it by the first record whose router names a
 * tensor of that layer (--arch llama on a Mixtral set). A record whose parts
 * say MLA marks a layer with its KV_A_MQA and KV_B (and Q or Q_B) rows
 * `mla`, its sizes from their shapes. Missing facts are derived from shapes
 * (hidden from the embedding, heads from head_dim...). TPC_EINPUT names what
 * is missing.
 *
 * TPC_VARCH_GPTNEOX and TPC_VARCH_BERT (their forms in verify/neox.c) are
 * found the same way, through their records' tables: GPT-NeoX's and LiBai's
 * GPT's query_key_value holds [q, k, v] per head (the parts' per-head qkv:
 * `interleaved`), the rotary fraction f->rotary_pct or the record's
 * rope_fraction, the parallel residual where the parts say so unless
 * f->parallel_residual < 0; BERT (an encoder) is bidirectional with its norms
 * after each residual add, token type 0 and the embeddings' norm, and its
 * MLM head (OUTPUT_DENSE, OUTPUT_NORM, OUTPUT or tied, OUTPUT's bias or
 * OUTPUT_BIAS) when the checkpoint has OUTPUT_DENSE, else the last hidden
 * states (hidden_out). A tensor the record requires (the embedding, learned
 * positions, the embeddings' norm, the final norm, an untied head: the
 * parts' tied_head) and the checkpoint lacks is refused by name.
 *
 * TPC_VARCH_DIT (diffusers PixArt, SD3, Flux, CogVideoX, DiT): every
 * transformer_blocks.N / single_transformer_blocks.N attention (attn1, attn,
 * the cross-attention attn2 with encoder states as wide as its to_k input,
 * and a joint attention's add_q/k/v_proj + to_add_out stream) becomes an
 * attention entry, bidirectional, without the q/k norms (the split is what is
 * checked: both sides compute the same function), and ff / ff_context a
 * feed-forward entry (net.0.proj, gated [value | gate] when f->ff_act says so,
 * with f->ff_act, net.2). Flux single blocks' proj_out mixes attention and MLP
 * and is checked by the col/row checks only. Heads and head_dim must be known.
 *
 * TPC_VARCH_DALLE2 (DALLE2-pytorch's prior and decoder Unets): every module M
 * with M.to_out.0.weight and M.to_qkv.weight (LinearAttention, 1x1 convs seen
 * as matrices: fused [q|k|v], f->head_dim rows a head) or M.to_q.weight and
 * M.to_kv.weight (Attention: multi-query, to_kv one head of k and v, its rows
 * / 2 the head size; CrossAttention, "cross_attn" in M: [k|v] of every head of
 * f->head_dim, over encoder states as wide as to_kv's input) becomes an
 * attention entry as wide as its to_out.0's output, bidirectional softmax
 * attention standing in for each (the split is what is checked: a to_qkv or
 * to_q that is not split with its row-split to_out.0 fails); every P.1.1 /
 * P.1.5 pair of a CausalTransformer layer P a SwiGLU feed-forward entry
 * ([x | gate], SiLU), unless a post-activation norm P.1.3 sits between.
 */
int tpc_verify_model_from_names(tpc_verify_set *s, const tpc_family *fam, const tpc_model_facts *f,
				tpc_err *e);

/* The forward a record's parts compose: TPC_VARCH_DIT or _DALLE2 for the
 * block layouts, _BERT for an encoder, _GPTNEOX for a qkv fused per head,
 * _GPT2 for a decoder with learned positions, else _LLAMA (whose layers
 * take every other part: placement, q/k norms, MLA, routers). */
tpc_varch tpc_verify_varch(const tpc_layer_parts *p);

/* ---- running ---- */

enum {
	TPC_VCHECK_STRUCTURE = 1u << 0,
	TPC_VCHECK_LAYERS = 1u << 1,
	TPC_VCHECK_BLOCKS = 1u << 2,
	TPC_VCHECK_MODEL = 1u << 3,
	TPC_VCHECK_ALL = 0xfu,
};

typedef enum tpc_vbackend {
	TPC_VB_THREADS = 0, /* ranks are threads of this process */
	TPC_VB_MPI,         /* one process per rank (mpirun); rank 0 reports */
} tpc_vbackend;

typedef enum tpc_vdevice {
	TPC_VDEV_CPU = 0,
	TPC_VDEV_CUDA,      /* the tpconv_cuda module: cuBLAS + NCCL */
} tpc_vdevice;

typedef struct tpc_verify_opts {
	uint64_t seed;
	int tokens;         /* T, default 8 */
	double rtol, atol;  /* < 0: per-dtype defaults */
	unsigned checks;    /* TPC_VCHECK_*; 0 = all */
	tpc_vbackend backend;
	tpc_vdevice device;
	int threads_per_rank; /* OpenMP threads per rank; 0 = cores / tp (>= 1) */
	int ref_threads;      /* OpenMP threads for rank 0's fp64 reference while the other
			       * ranks wait; 0 = all cores (threads backend) or as the rank */
	const char *cuda_module;    /* the CUDA module's path (TPCONV_CUDA_MODULE); NULL: beside
				     * the executable, the build tree, the install's libdir */
	const char *blas;           /* the CPU products' BLAS (TPCONV_BLAS), opened at the first
				     * product: NULL the OpenBLAS the build found, by its SONAME;
				     * "none" the hand-written loops; else a library name or path
				     * exporting cblas_sgemm and cblas_dgemm. One that cannot be
				     * opened is the loops too (the build without OpenBLAS) */
	int local_rank, local_size; /* MPI: this process's place on its node (picks its GPU),
				     * from tpc_verify_local_rank; -1: unknown, one per node */
	tpc_progress *progress;     /* rank 0 counts its steps here (each tensor's structure and
				     * layer checks, each layer's blocks, the model) and sets the
				     * total; NULL: none */
} tpc_verify_opts;

/* Node-local rank and size from the launcher's variables (OpenMPI, MPICH,
 * Slurm), read through `lookup` (cmd/ passes getenv: verify/ reads no
 * environment); -1 when none is set. */
void tpc_verify_local_rank(char *(*lookup)(const char *name), int *local_rank, int *local_size);

void tpc_verify_opts_init(tpc_verify_opts *o);

/* Tolerances used for a weight dtype at a check level (model or not). */
void tpc_verify_tolerance(tpc_dtype dt, bool model, double *rtol, double *atol);

typedef enum tpc_vcheck {
	TPC_VC_STRUCTURE = 0,
	TPC_VC_COL,
	TPC_VC_ROW,
	TPC_VC_EMBED,
	TPC_VC_HEAD,
	TPC_VC_MLP,
	TPC_VC_ATTN,
	TPC_VC_MODEL,
	TPC_VC_COUNT
} tpc_vcheck;

const char *tpc_vcheck_name(tpc_vcheck k);

typedef struct tpc_vdiff {
	int32_t rank;
	int64_t index;     /* element index in the compared output (rank tensor for structure) */
	double expected, actual;
} tpc_vdiff;

/* One check's result. Fixed size, no pointers: ranks exchange it as bytes. */
typedef struct tpc_vresult {
	int32_t kind;      /* tpc_vcheck */
	int32_t status;    /* 0 pass, 1 fail, 2 skip */
	char name[TPC_ERR_NAME_MAX];
	char dtype[12];
	uint64_t elements, mismatches;
	int32_t capped;    /* a rank stopped counting at TPC_VERIFY_COUNT_MAX: mismatches is a lower bound */
	double max_abs, max_rel, rtol, atol;
	int64_t top1_agree, top1_total;
	uint64_t digest;
	int32_t ndiff;
	tpc_vdiff diff[TPC_VERIFY_NDIFF];
	char msg[256];
} tpc_vresult;

enum { TPC_VR_PASS = 0, TPC_VR_FAIL = 1, TPC_VR_SKIP = 2 };

typedef struct tpc_verify_report {
	tpc_vresult *r;
	size_t n, cap;
	int tp, tokens;
	int dp;                  /* data-parallel replicas of the set (tpc_verify_set.dp; 0, 1:
				    none): tp counts a stage's ranks, tp/dp x dp */
	uint64_t seed;
	const char *backend, *device;
	const char *collectives; /* "threads", "mpi" or "nccl" */
	size_t npass, nfail, nskip;
	double seconds;
	uint64_t weights_read;   /* bytes of weights rank 0's layer, block and model checks read
				    (its slices and the reference; "weights_read" in the JSON) */
} tpc_verify_report;

void tpc_verify_report_init(tpc_verify_report *rep);
void tpc_verify_report_release(tpc_verify_report *rep);
/* Append one result (copied); 0 or TPC_EIO on out of memory. */
int tpc_verify_report_add(tpc_verify_report *rep, const tpc_vresult *r);

struct tpc_coll; /* verify/coll.h */

/*
 * Run every check this rank takes part in, over the collective `c` (its rank
 * and size; size == s->tp), on the CPU (o->device is ignored here:
 * tpc_verify_execute sets up the GPU). Every rank of the group calls it with the same
 * set and options. Rank 0 fills `rep` (others may pass NULL). Returns 0 when
 * every check passed, TPC_EMISMATCH when one failed (on every rank), another
 * negative status on error.
 */
int tpc_verify_run(const tpc_verify_set *s, const tpc_verify_opts *o, struct tpc_coll *c,
		   tpc_verify_report *rep, tpc_err *e);

/*
 * The whole run in one call for the threads backend (o->backend THREADS, CPU
 * or CUDA device): starts tp threads and returns rank 0's report. For MPI,
 * each process calls tpc_verify_mpi_init first (to learn its rank and open
 * only its own rank file), builds the set, then calls this.
 */
int tpc_verify_execute(const tpc_verify_set *s, const tpc_verify_opts *o, tpc_verify_report *rep,
		       tpc_err *e);

/* Load the MPI module (tpconv_mpi.so, verify/tpc_mpi.h), which links
 * libmpi so that tpconv does not: from `path` when given (cmd/ passes
 * TPCONV_MPI_MODULE), else beside the executable, in the build tree or in
 * the install's libdir. Once loaded, 0 at every call. TPC_EGPU saying why
 * when this build has no MPI, or the module or its MPI library is missing
 * here: the run then goes on as a build without MPI would. */
int tpc_verify_mpi_load(const char *path, tpc_err *e);
/* MPI_Init_thread (once) and this process's rank and size, the module
 * loaded first (from the default places) if it is not. TPC_EGPU when the
 * module cannot load or MPI fails. */
int tpc_verify_mpi_init(int *rank, int *size, tpc_err *e);
void tpc_verify_mpi_finalize(void);
/* After a rank has reported an error: end the whole MPI job (MPI_Abort with
 * `code`), since the other ranks may wait in a collective for it. */
void tpc_verify_mpi_abort(int code);
/* Every process passes its *v and receives the largest of them all
 * (MPI_Allreduce MAX): how `mpirun tpconv shard` agrees that every process
 * succeeded before rank 0 completes the set. TPC_EGPU without MPI. */
int tpc_verify_mpi_allmax(int *v, tpc_err *e);

/* ---- output ---- */

void tpc_verify_report_table(const tpc_verify_report *rep, bool failures_only, tpc_buf *out);
void tpc_verify_report_json(const tpc_verify_report *rep, tpc_buf *out);
void tpc_verify_report_junit(const tpc_verify_report *rep, tpc_buf *out);

/* ---- seeded inputs (also used by the GPU module and the tests) ---- */

/* Uniform in [-1, 1) with 24 random bits: exact in fp32. */
double tpc_verify_uniform(uint64_t seed, uint64_t stream, uint64_t index);
/* Stream id of a check: FNV-1a over the name and kind. */
uint64_t tpc_verify_stream(const char *name, int kind);

#endif
