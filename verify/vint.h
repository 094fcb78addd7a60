/*
 * vint.h - what the files of verify/ share and nobody else sees.
 *
 * Local views. A check computes with one "local" tensor per weight: on the
 * tensor-parallel side rank t's tensor, with rank t's slice of every part
 * (vloc_rank); on the reference side the whole reference tensor as if it were
 * the only rank (vloc_ref). The kernels and blocks (kernels.inc, instantiated
 * for float and double in kernels.c) take local views and never ask which
 * side they are on, so the unsplit reference and the tensor-parallel run are
 * the same code with different views: fp64 and no collectives for the
 * reference, fp32 and the collectives for the ranks.
 */
#ifndef TPC_VINT_H
#define TPC_VINT_H

#include <stdbool.h>
#include <stdint.h>

#include "coll.h"
#include "tpc_verify.h"

/* Bytes of weights converted per step of a streamed matmul (on the GPU,
 * TPC_V_CHUNK: each step is a copy to the device). A constant: the order of
 * every sum depends on it only through whole rows, never on the number of
 * threads. */
#define TPC_V_CHUNK (8u << 20)
/* On the CPU, windows that stay in a core's cache (the fp64 reference's
 * widened copy and OpenBLAS's packing of it included), and blocks of output
 * columns of a transposed weight's product, one thread each. */
#define TPC_V_CPU_CHUNK (512u << 10)
#define TPC_V_COLS 256
/* Mapped pages of weights are dropped behind a matmul every this many bytes:
 * each drop is a TLB shootdown on every thread of the process. */
#define TPC_V_DROP (8u << 20)

struct tpc_gpu_api;
struct tpc_gpu_ctx;

/* The BLAS functions the kernels call (blas.c), resolved at run time. */
#ifdef TPC_HAVE_CBLAS
#include <cblas.h>
typedef struct tpc__blas {
	__typeof__(cblas_sgemm) *sgemm;
	__typeof__(cblas_dgemm) *dgemm;
} tpc__blas;
#else
typedef struct tpc__blas {
	void *sgemm, *dgemm;
} tpc__blas;
#endif

/* *b from the library `name` (tpc_verify_opts.blas: NULL the OpenBLAS the
 * build found, "none" none); false, and the hand-written loops, when it
 * cannot be opened or the build has no OpenBLAS headers. */
bool tpc__blas_open(const char *name, tpc__blas *b);

typedef struct vloc {
	const char *name;
	const tpc_ckpt *ck;
	const tpc_tensor *t;     /* NULL: absent (a missing bias) */
	bool transposed;
	int dim;                 /* split dim (-1 replicated) */
	int nparts;              /* >= 1 */
	int ranks;               /* the ranks it is split over (tpc_vtensor_tp; 1: the reference) */
	int64_t len[TPC_VERIFY_MAX_PARTS];   /* this tensor's rows of each part along dim */
	int64_t off[TPC_VERIFY_MAX_PARTS];   /* where part k begins in this tensor */
	int64_t start[TPC_VERIFY_MAX_PARTS]; /* where the slice begins in the (padded) part */
	int64_t size[TPC_VERIFY_MAX_PARTS];  /* the part's real rows in the reference */
	int64_t poff[TPC_VERIFY_MAX_PARTS];  /* where part k begins in the reference */
	int replicas[TPC_VERIFY_MAX_PARTS];
	double shift;            /* a norm weight stored minus this (Gemma's 1 + w); 0 else */
} vloc;

typedef struct vctx {
	tpc_coll *c;             /* NULL: the reference side (no collectives) */
	bool mute;               /* a data-parallel rank past group 0 (tpc_verify_set.dp) outside
				    the experts: products give zeros unread, and its share of
				    every all-reduce is zeros, so each all-reduce gives dp
				    group 0's sum and the replicated work after it (norms,
				    residuals) runs on the same values everywhere */
	tpc_err *e;
	uint8_t *raw;
	size_t raw_cap;
	void *cvt;
	size_t cvt_cap;
	double score_max;        /* largest scale * sum |q_i k_i| an attention met (see tpc_verify.h) */
	uint64_t nread;          /* bytes of weights read (tpc_verify_report.weights_read) */
	const struct tpc_gpu_api *gpu; /* non-NULL: matmuls on the GPU (float side) */
	struct tpc_gpu_ctx *gpu_ctx;
	const char *blas_lib;    /* tpc_verify_opts.blas */
	int blas_state;          /* 0: not opened yet (the first product opens it), 1: blas, -1: loops */
	tpc__blas blas;
} vctx;

/* A linear layer: weight, optional bias, and how the bias is applied. */
typedef struct vlin {
	vloc w, b;               /* b.t == NULL: no bias */
	bool row;                /* row-parallel: output all-reduced */
	bool bias_once;          /* row: bias after the reduce (else on every rank before it) */
	/* The single pass (check_pass.c): pT rows more, pin [pT, in] (of the
	 * side's real type), stacked above the input in the same product, their
	 * outputs (bias and all-reduce included) into pout [pT, out]. */
	const void *pin;
	void *pout;
	int64_t pT;
} vlin;

typedef struct vmlp_loc {
	vlin gate, up, gate_up, down;
	bool fused, glu, value_first, interleaved; /* interleaved, clamp, alpha: tpc_vmlp's */
	double clamp, alpha;
	tpc_vact act;
	int64_t inner;           /* local intermediate width */
} vmlp_loc;

typedef struct vattn_loc {
	vlin q, k, v, qkv, o, kv;
	bool fused, kv_fused;
	int64_t nq, nkv, hd;     /* local query and kv heads, head dim */
	int64_t q0, kv0;         /* first global query / kv head held */
	int64_t heads, kv_heads; /* global counts */
	bool rope;
	double theta, rope_linear; /* rope_linear: positions divided by it (0: none) */
	tpc_yarn yarn;           /* tpc_vattn's */
	tpc_rope_llama3 llama3;  /* tpc_vattn's */
	const double *lr_short, *lr_long; /* a longrope rope's factors (tpc_vmodel's); NULL: none */
	int64_t lr_orig;         /* tpc_vmodel's longrope_orig */
	double lr_af;            /* tpc_vmodel's longrope_af */
	double scale, softcap;   /* tpc_vattn's */
	int64_t window, chunk;   /* tpc_vattn's */
	bool qk_l2;              /* tpc_vattn's */
	double temp_floor, temp_scale; /* tpc_vattn's */
	vloc sinks;              /* attention sinks [heads] or this rank's [nq]; .t NULL: none */
	int64_t sink0;           /* the index in sinks of local query head 0 */
	vloc qn, kn;             /* per-head q/k RMSNorm weights; .t NULL: none */
	double qk_eps;
	bool qk_whole;           /* qn, kn over the whole projection [heads * hd] (OLMo 2): this
				    rank's heads take their columns, the sums of squares all-reduced */
	bool qk_late;            /* qn, kn after the rope (tpc_vattn's qk_after_rope) */
	bool bidirectional;
	bool interleaved;        /* qkv rows [q, k, v] per head (GPT-NeoX) */
	bool gated;              /* q rows [query, gate] per head: the context times sigmoid(gate) */
	int64_t rot;             /* rope on each head's first rot dims (0: all) */
	bool pairs;              /* rope on interleaved pairs, not halves (tpc_vattn's rope_pairs) */
	int64_t kv_w;            /* width of kv_f / kv_d; 0: k and v read the block input */
	const float *kv_f;       /* cross-attention encoder states [T, kv_w] */
	const double *kv_d;
	int64_t nb;              /* the T rows are nb sequences of T / nb tokens (0: one) */
	double *smax0;           /* the first sequence's score_max here, not in the vctx's */
} vattn_loc;

/* MLA attention (mla.c, tpc_vmla): this rank's heads h0 .. h0 + nh - 1 of
 * q_b (or q_proj) and kv_b, the matching columns of o; the low-rank
 * projections and their norms whole. */
typedef struct vmla_loc {
	vlin q, q_a, q_b, kv_a, kv_b, o; /* q.w.t NULL: q_a, its norm, q_b */
	vloc q_an, kv_an;
	double eps, theta;
	int64_t nh, h0;
	const tpc_vmla *p;       /* the sizes and the rope */
} vmla_loc;

/* A Mamba-2 mixer (tpc_vssm) on this rank: its heads h0 .. h0 + nh - 1 of
 * hd channels, groups g0 .. g0 + ng - 1 of B and C (all of one replicated
 * group), of heads and groups in the model; the conv1d of K taps over this
 * rank's [x | B | C] channels */
typedef struct vssm_loc {
	vlin in, out;
	vloc conv_w, conv_b, dt_bias, a_log, d, norm; /* conv_b.t NULL: none */
	int64_t nh, h0, ng, g0, hd, ns, K, heads, groups;
	double eps;
} vssm_loc;
/* A gated DeltaNet (delta.c, tpc_vdelta): this rank's key head groups g0 ..
 * g0 + g - 1 of in_proj_qkvz and in_proj_ba, their conv1d channels, their
 * value heads' dt_bias, A_log and out_proj columns; the gated norm whole. */
typedef struct vdelta_loc {
	vlin qkvz, ba, o;
	vlin qkv, z, b, a;       /* the flat projections (p->flat) */
	vloc conv, dt, a_log, norm;
	int64_t g, g0;
	const tpc_vdelta *p;     /* the sizes */
} vdelta_loc;

typedef struct vlayer_loc {
	vloc n1w, n1b, n2w, n2b;
	vloc p1w, p2w;           /* norms of the attention's and MLP's outputs (.t NULL: none) */
	bool no_pre;             /* no input norms: the sublayers read the residual stream (OLMo 2) */
	bool parallel;           /* x + attn(n1(x)) + mlp(n2(x)): both read the layer's input
				    (Phi, Cohere 2: n2 is n1) */
	vattn_loc attn;
	vmla_loc mla;            /* mla.p non-NULL: the attention is MLA, not attn */
	vdelta_loc dn;           /* dn.p non-NULL: a gated DeltaNet, not attn */
	vmlp_loc mlp;
	bool moe;                /* the feed-forward is the model's moe hook, not mlp */
	bool is_ssm;             /* the sequence mixer is ssm, not attn */
	vssm_loc ssm;
} vlayer_loc;

/* The single pass (check_pass.c): a layer's attention and MLP block checks'
 * inputs xa, xm [T, H] (of the side's real type; NULL: none) run stacked
 * above the model's rows in the same calls, their outputs into ya, ym, the
 * block attention's score_max into *smax. */
typedef struct vstack {
	const void *xa, *xm;
	void *ya, *ym;
	double *smax;
} vstack;

/* The whole model. A mixture-of-experts layer's feed-forward needs the run
 * (routing shared by the ranks, experts of other EP groups): the model check
 * (check_model.c) gives it as a hook, one per real type, called with the
 * layer's index and its normed input [T, H]; out [T, H]. Called after each
 * layer with its output, layer_end may record or compare it (NULL: none). */
typedef struct vmodel_loc {
	tpc_vnorm norm;
	double eps;
	double embed_mul, final_softcap, resid_mul, logit_div, logit_mul; /* tpc_vmodel's */
	int64_t H, V;
	vloc embed, pos, fnw, fnb, head; /* pos.t / fnb.t NULL: none */
	vlayer_loc *L;
	int64_t nl;
	int (*moe_f)(void *arg, int64_t l, int64_t T, const float *in, float *out);
	int (*moe_d)(void *arg, int64_t l, int64_t T, const double *in, double *out);
	void (*layer_end_f)(void *arg, int64_t l, int64_t T, const float *X);
	void (*layer_end_d)(void *arg, int64_t l, int64_t T, const double *X);
	/* NULL, or called with a copy of layer l before it runs: may set probes
	 * in its linear layers (vlin.pin) and stack block inputs (vstack);
	 * once more after the last layer (l = nl, L and st NULL); `dbl`: the
	 * reference side */
	int (*stack)(void *arg, int64_t l, bool dbl, vlayer_loc *L, vstack *st);
	void *arg;
	/* GPT-NeoX and BERT (neox.c): non-NULL, neox.inc runs their embedding
	 * extras, layers and top (tpc__form_*) */
	const tpc_vmodel *form;
	vloc head_b;             /* the head's vocab bias (.t NULL: none) */
	vloc type, enw, enb;     /* BERT: token type 0, the embeddings' norm */
	vlin mlm;                /* BERT: the MLM transform's dense (w.t NULL: none) */
} vmodel_loc;

/* ---- kernels.c ---- */

bool tpc__float_dtype(tpc_dtype dt);
/* A 2-D tensor, or one whose dims past the second are all 1 (a 1x1
 * convolution's [out, in, 1, 1]): its layer is a matrix product. */
bool tpc__matrix(const tpc_tensor *t);
void tpc__vctx_release(vctx *x);

/* Float and double instantiations of kernels.inc. */
#define TPC_V_DECL(R, S)                                                                          \
	int tpc__decode_##S(R *dst, const uint8_t *src, tpc_dtype dt, size_t n);                  \
	int tpc__load_##S(vctx *x, const tpc_ckpt *ck, const tpc_tensor *t, R *dst);             \
	int tpc__load_row_##S(vctx *x, const tpc_ckpt *ck, const tpc_tensor *t, int64_t row,     \
			      R *dst);                                                            \
	int tpc__matmul_##S(vctx *x, const vloc *w, int64_t T, const R *in, int64_t ldi, R *out, \
			    int64_t ldo);                                                         \
	int tpc__lin_##S(vctx *x, const vlin *L, int64_t T, const R *in, int64_t ldi, R *out,    \
			 int64_t ldo);                                                            \
	int tpc__norm_##S(vctx *x, tpc_vnorm kind, double eps, const vloc *w, const vloc *b,    \
			  int64_t T, int64_t H, const R *in, R *out);                             \
	void tpc__act_##S(tpc_vact a, R *v, size_t n);                                          \
	int tpc__mlp_##S(vctx *x, const vmlp_loc *m, int64_t T, int64_t H, const R *in, R *out); \
	int tpc__attn_##S(vctx *x, const vattn_loc *a, int64_t T, int64_t H, const R *in,       \
			  R *out);                                                                \
	int tpc__model_##S(vctx *x, const vmodel_loc *m, int64_t T, const int32_t *ids, R *logits); \
	int tpc__ssm_##S(vctx *x, const vssm_loc *s, int64_t T, int64_t H, const R *in, R *out);
TPC_V_DECL(float, f)
TPC_V_DECL(double, d)

/* MLA attention (mla.inc, instantiated in mla.c): out [T, H] from in [T, H],
 * o_proj's all-reduce included. */
int tpc__mla_f(vctx *x, const vmla_loc *a, int64_t T, int64_t H, const float *in, float *out);
int tpc__mla_d(vctx *x, const vmla_loc *a, int64_t T, int64_t H, const double *in, double *out);

/* GPT-NeoX and BERT (neox.inc, instantiated in neox.c), called by
 * tpc__model when m->form is set: the embeddings' extras on X [T, H] (BERT:
 * token type 0, the norm; tmp [H] of scratch), layer L on X in place (N, O
 * [T, H] of scratch), and the top: X into N, the head's input (the final
 * norm, or BERT's MLM transform; X itself with no head). */
#define TPC_FORM_DECL(R, S)                                                                                   \
	int tpc__form_embed_##S(vctx *x, const vmodel_loc *m, int64_t T, R *X, R *tmp);                       \
	int tpc__form_layer_##S(vctx *x, const vmodel_loc *m, const vlayer_loc *L, int64_t T, R *X, R *N, R *O); \
	int tpc__form_top_##S(vctx *x, const vmodel_loc *m, int64_t T, const R *X, R *N);
TPC_FORM_DECL(float, f)
TPC_FORM_DECL(double, d)

/* The float side's matmul chunk on the GPU (gpu_loader.c): non-transposed
 * out[:, 0:nr] = in W^T for W [nr, cols]; transposed out += in[:, 0:nr] W for
 * W [nr, cols]. */
int tpc__gpu_gemm(vctx *x, bool transposed, int64_t T, int64_t nr, int64_t cols, const float *in,
		  int64_t ldi, const float *w, float *out, int64_t ldo);

int tpc__gpu_act(vctx *x, tpc_vact a, float *v, size_t n);
int tpc__gpu_softmax(vctx *x, float *p, int64_t rows, int64_t n);

/* module.c: a run-time module `file` (the CUDA or MPI one, named `what` in
 * messages) opened with dlopen `flags`, and the table its function `sym`
 * returns, which opens with `int abi` and must carry `abi`. Looked for at
 * `path` when given (the TPCONV_*_MODULE variable, read in cmd/), else beside
 * the executable, in the build tree (../verify), in ../lib/tpconv and in the
 * install's libdir. 0 and *api; else -1 with why[len] saying why a module
 * found did not load, or empty when none was found. */
int tpc__module_load(const char *path, const char *file, const char *what, const char *sym, int abi, int flags,
		     const void **api, char *why, size_t len);

/* gpu_loader.c: the module, its communicators, NCCL as a tpc_coll */
int tpc__gpu_load(const char *path, const struct tpc_gpu_api **api, tpc_err *e);
int tpc__gpu_devices(const struct tpc_gpu_api *api, int *ndev, tpc_err *e);
int tpc__gpu_open_threads(const struct tpc_gpu_api *api, int tp, struct tpc_gpu_ctx **ctx, bool *host_coll,
			  tpc_err *e);
int tpc__gpu_open_mpi(const struct tpc_gpu_api *api, tpc_coll *c, int lr, int ls, struct tpc_gpu_ctx **ctx, bool *host_coll,
		      tpc_err *e);
int tpc__gpu_coll(const struct tpc_gpu_api *api, struct tpc_gpu_ctx *ctx, int rank, int size, tpc_coll *c,
		  tpc_err *e);
void tpc__gpu_coll_free(tpc_coll *c);

/* The bytes [off, off + len) of a tensor (view) that is one plain run of a
 * mapped file, their pages mapped in one call and read where they lie, no
 * copy out of the page cache; NULL when it is not (then a read copies them).
 * Their pages go once used (tpc_ckpt_drop_pages, _drop_range), or they count
 * in the RSS. tpc__drop_behind: rows [r0, r1) of t used, the pages of the
 * whole blocks (2 MiB) behind them dropped from *from on (UINT64_MAX: row r0),
 * every page up to r1 when `all`, else at most every TPC_V_DROP bytes;
 * *from advanced. */
const uint8_t *tpc__mapped(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t off, uint64_t len);
void tpc__drop_behind(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t *from, int64_t r0, int64_t r1, bool all);

/* Hash inputs */
uint64_t tpc__mix64(uint64_t z);
uint64_t tpc__fnv(uint64_t h, const void *p, size_t n);
#define TPC_FNV_INIT 0xcbf29ce484222325ull


/* ---- the checks (verify.c; check_structure.c, check_layers.c,
 * check_blocks.c, check_model.c) ---- */

typedef struct vpass vpass; /* check_pass.c */

/* One rank's run of the checks. */
typedef struct vrun {
	const tpc_verify_set *s;
	const tpc_verify_opts *o;
	tpc_coll *c;
	tpc_verify_report *rep;
	tpc_err *e;
	int me, tp;
	int64_t T;
	vctx xf, xd;
	tpc_vresult *xb;
	bool any_fail;
	int threads, ref_threads; /* OpenMP threads of this rank, and of rank 0's reference work */
	bool ref_on;              /* between tpc__ref_begin and the check's end */
	void **scratch;           /* the current check's buffers (tpc__scratch) */
	size_t nscratch, scratch_cap;
	vpass *pass;              /* the single pass's results (check_pass.c); NULL: none */
} vrun;

/* A data-parallel rank past group 0 (tpc_verify_set.dp): in a block check
 * and the model check's forward it computes the experts it holds and, of
 * everything else, only takes part in the collectives with zeros (vctx.mute,
 * set around those computations). */
static inline bool tpc__dp_mute(const vrun *R)
{
	return R->s->dp > 1 && R->me >= R->s->tp / R->s->dp;
}

/* Memory for the current check, freed when it ends (tpc__finish): n + 1
 * elements of *p (zeroed with VZERO); NULL when out of memory. */
void *tpc__scratch(vrun *R, size_t bytes, bool zero);
#define VNEW(R, p, n) ((p) = tpc__scratch((R), sizeof(*(p)) * ((size_t)(n) + 1), false))
#define VZERO(R, p, n) ((p) = tpc__scratch((R), sizeof(*(p)) * ((size_t)(n) + 1), true))

/* Rank 0's reference work on every core meanwhile, once the digest of the
 * split result y [n] is in *res, with *ref [nref] of scratch for its output
 * when ref is not NULL (tpc__ref_begin: 0 or out of memory), and back to
 * this rank's threads (tpc__ref_end). */
int tpc__ref_begin(vrun *R, tpc_vresult *res, const float *y, size_t n, double **ref, size_t nref);
void tpc__ref_end(vrun *R);

/* A check's result: begun with its tolerances, failed with the first message,
 * a difference recorded (the first TPC_VERIFY_NDIFF). */
void tpc__res_init(vrun *R, tpc_vresult *r, tpc_vcheck kind, const char *name, tpc_dtype dt);
void tpc__res_fail(tpc_vresult *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tpc__res_diff(tpc_vresult *r, int rank, int64_t idx, double exp, double act);

/* The ranks' results merged on every rank, *failed when any rank failed; rank
 * 0 reports the merged result when `final` or failed. tpc__finish ends a
 * check: its reference threads and scratch memory released, an error aborts
 * the group, else the final exchange. */
int tpc__exchange(vrun *R, tpc_vresult *res, bool final, bool *failed);
int tpc__finish(vrun *R, tpc_vresult *res, int ret);
/* tpc__finish without the exchange (the result reported later). */
int tpc__finish_quiet(vrun *R, int ret);

/* Comparing with the reference: one value on the scale of the reference's
 * rms (tpc__cmp), or n values of rank 0 (tpc__cmp_all). */
double tpc__rms(const double *v, size_t n);
void tpc__cmp(tpc_vresult *r, double scale, int rank, int64_t idx, double exp, double act);
void tpc__cmp_all(tpc_vresult *r, const double *yr, const float *y, size_t n);
uint64_t tpc__digest_f(const float *p, size_t n);

/* What a 2-D split does to the math: output features split (col), input
 * features split (row), replicated, or none. */
enum { MK_NONE, MK_COL, MK_ROW, MK_REPL };
int tpc__math_kind(const tpc_vtensor *v);

/* Seeded inputs: columns [c0, c0+n) of a [T, full] matrix in fp32, a whole
 * [T, n] one in fp64, token t's id in a vocabulary of V. */
void tpc__seeded_f(float *x, int64_t T, int64_t n, int64_t full, int64_t c0, uint64_t seed, uint64_t stream);
void tpc__seeded_d(double *x, int64_t T, int64_t n, uint64_t seed, uint64_t stream);
int64_t tpc__seeded_id(uint64_t seed, uint64_t stream, int64_t t, int64_t V);

/* The rotary frequencies of rot dims, inv[rot / 2] = theta^(-2i/rot), and
 * the factor *af on cos and sin (1); with a yarn scaling (y->factor > 1; its
 * betas, orig_max and truncate (0/1) resolved), yarn's blend of interpolated
 * and extrapolated frequencies over its ramp and its attention factor, as
 * transformers' _compute_yarn_parameters (DeepSeek's MLA, gpt-oss's GQA). */
void tpc__rope_freqs(const tpc_yarn *y, double theta, int64_t rot, double *inv, double *af);
/* The n frequencies inv[] of a llama3 rope (l->factor > 0) scaled as
 * transformers' _compute_llama3_parameters does: wavelength 2 pi / inv[i]
 * above orig_max / low_freq_factor, inv[i] / factor; below orig_max /
 * high_freq_factor, kept; between, (1 - s) inv[i] / factor + s inv[i], s =
 * (orig_max / wavelength - low_freq_factor) / (high_freq_factor -
 * low_freq_factor) */
void tpc__rope_llama3(const tpc_rope_llama3 *l, int64_t n, double *inv);

/* Local views of tensor i on rank t (-1: the reference): the tensor
 * (tpc__loc_of; tpc__opt_loc for i < 0: none), the linear layer with its bias
 * (tpc__lin_of). */
void tpc__loc_of(const vrun *R, int64_t i, int t, vloc *L);
void tpc__opt_loc(const vrun *R, int64_t i, int t, vloc *l);
void tpc__lin_of(const vrun *R, int64_t i, int t, bool row, vlin *L);

/* Readiness on this rank; on no, a message in msg[n]: tensor i present and
 * shaped as described on rank t (tpc__rank_ok), a layer's bias fitting its
 * split (tpc__bias_ok), a tensor replicated (tpc__repl_ok; i < 0: none). */
bool tpc__rank_ok(const vrun *R, int64_t i, int t, char *msg, size_t n);
bool tpc__bias_ok(const vrun *R, int64_t i, bool row, char *msg, size_t n);
bool tpc__repl_ok(const vrun *R, int64_t i, const char *what, char *msg, size_t n);

/* check_blocks.c: a layer's MLP and attention as local views on rank t (-1:
 * the reference), false with a message when the splits do not fit a
 * tensor-parallel block; rtol widened for large attention scores. */
bool tpc__mlp_loc_of(const vrun *R, const tpc_vmlp *p, int t, vmlp_loc *m, char *msg, size_t n);
bool tpc__attn_loc_of(const vrun *R, const tpc_vlayer *ly, int t, vattn_loc *a, char *msg, size_t n);
bool tpc__ssm_loc_of(const vrun *R, const tpc_vlayer *ly, int t, vssm_loc *s, char *msg, size_t n);
void tpc__widen(const vrun *R, tpc_vresult *res);
/* Tensor i as the column (row: the row) half of a tensor-parallel block on
 * this rank (check_blocks.c); MLA's local views on rank t (-1: the
 * reference; mla.c), false with a message as tpc__attn_loc_of. */
bool tpc__part_ok(const vrun *R, int64_t i, bool row, const char *what, char *msg, size_t n);
bool tpc__mla_loc_of(const vrun *R, const tpc_vlayer *ly, int t, vmla_loc *a, char *msg, size_t n);
/* A gated DeltaNet's local views on rank t (-1: the reference; delta.c),
 * false with a message when the rank's slices are not whole key head
 * groups; and the layer on T tokens: out [T, H] from in [T, H], out_proj's
 * all-reduce included. */
bool tpc__delta_loc_of(const vrun *R, const tpc_vlayer *ly, int t, vdelta_loc *d, char *msg, size_t n);
int tpc__delta_f(vctx *x, const vdelta_loc *d, int64_t T, int64_t H, const float *in, float *out);
int tpc__delta_d(vctx *x, const vdelta_loc *d, int64_t T, int64_t H, const double *in, double *out);
/* GPT-NeoX's and BERT's model extras (neox.c) on rank t (-1: the
 * reference) into m, false with a message when they do not fit; true and
 * nothing done for the other architectures. */
bool tpc__form_loc_of(const vrun *R, int t, vmodel_loc *m, char *msg, size_t n);

/* Mixture of experts (check_blocks.c). tpc__moe_ok: this rank's router, gate
 * and held experts fit the block. tpc__moe_route: T tokens routed by rank
 * rt's router (-1: the reference's) from x [T, H] in fp64: each token's
 * top_k experts in sel [T, top_k] and their weights in w; with `force`, the
 * weights are those of the experts in force (the same shape) and *gap (when
 * not NULL) gets the largest amount by which this router's own choice scores
 * higher than the forced one, and its token. tpc__moe_shared_gate: the
 * shared expert's sigmoid gate per token. tpc__moe_apply_*: the block on rank
 * t (-1: the reference) for the given routing: y [T, H]; every rank takes
 * part in the same collectives. */
typedef struct vgap {
	double gap;
	int64_t tok;
} vgap;
bool tpc__moe_ok(const vrun *R, const tpc_vmoe *mo, char *msg, size_t n);
/* The sparsemixer's routing of one token from its router logits s[E] (E >=
 * 2) in eval mode (transformers' phimoe sparsemixer, training false): its
 * two experts into sel[2] (the best, ties to the lower index; then the best
 * of the others) and the weights into w[2] of the experts in use[2] (sel
 * itself when use is NULL): use[0]'s the softmax of the logits whose
 * (max - s_e) / max(|s_e|, max) is at most 2 eps at use[0]; use[1]'s the
 * same over the experts but use[0] with their max. */
void tpc__sparsemixer(const double *s, int64_t E, double eps, const int64_t *use, int64_t *sel, double *w);
int tpc__moe_route(vrun *R, const tpc_vmoe *mo, int rt, const double *x, int64_t T, int64_t H, const int64_t *force,
		   int64_t *sel, double *w, vgap *gap);
int tpc__moe_shared_gate(vrun *R, const tpc_vmoe *mo, int rt, const double *x, int64_t T, int64_t H, double *g);
int tpc__moe_apply_f(vrun *R, const tpc_vmoe *mo, int t, const float *x, int64_t T, int64_t H, const int64_t *sel,
		     const double *w, const double *g, float *y);
int tpc__moe_apply_d(vrun *R, const tpc_vmoe *mo, int t, const double *x, int64_t T, int64_t H, const int64_t *sel,
		     const double *w, const double *g, double *y);

/* A row-parallel layer check's seeded input on this rank: x [T, local in
 * dim] of tensor i held as w; rank 0's comparison of a column-parallel
 * check's gathered outputs Y [tp][T, nl] and a row-parallel one's y [T, out]
 * with the unsplit layer's yr (check_layers.c). A block check's result begun
 * and its name (tpc__block_open), its outputs y [T, H] compared with yr
 * given the reference's score_max (tpc__block_cmp; check_blocks.c). The
 * model's local views on rank t (-1: the reference; check_model.c), false
 * with a message when they do not fit; m->L freed by the caller. */
void tpc__row_input(const vrun *R, int64_t i, const vloc *w, float *x);
void tpc__col_cmp(const vrun *R, int64_t i, tpc_vresult *res, const float *Y, const double *yr);
void tpc__row_cmp(const vrun *R, int64_t i, tpc_vresult *res, const float *y, const double *yr);
void tpc__block_open(vrun *R, const tpc_vlayer *ly, tpc_vcheck kind, tpc_vresult *res, char *name, size_t n);
void tpc__block_cmp(vrun *R, tpc_vresult *res, const float *y, const double *yr, double smax);
bool tpc__model_loc_of(const vrun *R, int t, vmodel_loc *m, char *msg, size_t n);

/* The single pass (check_pass.c). tpc__pass_begin: R->pass set when every
 * rank can run it (else NULL; nonzero only on an error). tpc__pass_stack:
 * the vmodel_loc.stack hook. tpc__pass_result, tpc__pass_block: whether
 * tensor i's layer check, or layer l's block check, was computed in the
 * pass, and on rank 0 its result into *res. The model check's result kept
 * (tpc__pass_keep_model) and reported in its place (tpc__pass_model). */
int tpc__pass_begin(vrun *R);
void tpc__pass_end(vrun *R);
int tpc__pass_stack(vrun *R, int64_t l, bool dbl, vlayer_loc *L, vstack *st);
bool tpc__pass_result(const vrun *R, int64_t i, tpc_vresult *res);
bool tpc__pass_block(const vrun *R, int64_t l, tpc_vcheck kind, tpc_vresult *res);
void tpc__pass_keep_model(vrun *R, const tpc_vresult *res);
int tpc__pass_model(vrun *R);

/* The checks, each ending in tpc__finish. */
int tpc__check_structure(vrun *R, int64_t i);
int tpc__check_col(vrun *R, int64_t i, tpc_vcheck kind);
int tpc__check_row(vrun *R, int64_t i);
int tpc__check_embed(vrun *R, int64_t i);
int tpc__check_block(vrun *R, const tpc_vlayer *ly, tpc_vcheck kind);
int tpc__check_moe(vrun *R, const tpc_vlayer *ly);
int tpc__check_model(vrun *R);
/* The model check's fp64 reference forward of set s alone on ids [T], routing
 * on its own: logits [T, vocab] (for tests against transformers). */
int tpc__model_reference(const tpc_verify_set *s, int64_t T, const int32_t *ids, double *logits, tpc_err *e);

#endif
