/*
 * tpc_mix.h - model merging (merge --recipe): N checkpoints of one
 * architecture merged tensor by tensor, each merged tensor a computed
 * description (TPC_DQ_MIX, tpc_ckpt.h) made while a writer streams it, as
 * convert --lora does (tpc_lora.h): one pass over the inputs, bounded
 * buffers (TIES, DARE's rescale and SLERP read their inputs' tensors once to
 * three times more, a chunk at a time, for their whole-tensor facts).
 *
 * The recipe is mergekit's YAML config (mergekit commit a6e40288,
 * mergekit/config.py) for the methods below, read through tpc_yaml.h:
 *
 *   models:                          the inputs, in this order
 *     - model: PATH                  any checkpoint tpconv reads
 *       parameters: {weight, density}
 *   base_model: PATH                 an input too when not among the models
 *   merge_method: linear | task_arithmetic | ties | dare_ties | dare_linear |
 *                 breadcrumbs | breadcrumbs_ties | della | della_linear | slerp |
 *                 model_stock | passthrough
 *   slices:                          passthrough's instead of models: each
 *     - sources:                     {sources: [one {model, layer_range:
 *         - model: PATH              [a, b], parameters: {scale}}]}: the
 *           layer_range: [a, b]      layers stacked (tpc_mix_passthrough)
 *   parameters: {...}                the method's (normalize, rescale, lambda,
 *                                    int8_mask, t) and defaults of the models'
 *   dtype / out_dtype: float32 | float16 | bfloat16   the output's dtype
 *   tokenizer_source: base           (the only one read: the output's
 *                                    companions are the base's, else the
 *                                    first model's)
 *
 * A parameter is a number (a bool for normalize, rescale, int8_mask), a
 * list of numbers (a gradient: at layer position t, config.py
 * evaluate_setting L33-38), or a list of {filter, value}: the first whose
 * filter is absent, "*" or a substring of the tensor's name (L42-49). A
 * model's parameters come before the recipe's (ConfigReader.parameter).
 * The layer position of a tensor is i / (L - 1) (plan.py L285-288; 1 when
 * L = 1) where i is the first all-digit component of its name and L one
 * more than the largest such over the checkpoint; 0 for other tensors.
 *
 * The methods (mergekit merge_methods/, in f32, each product and sum
 * rounded to f32, sums over the inputs in the recipe's order from 0):
 *   linear            sum_k w_k x_k, / sum_k w_k with normalize (default on)
 *                     (linear.py L48-55)
 *   task_arithmetic   b + lambda * sum_k w_k (x_k - b), the base left out of
 *                     k; normalize (off) divides by sum w_k unless
 *                     |sum| < 1e-8 (generalized_task_arithmetic.py L152-184)
 *   ties              the deltas trimmed to `density` by magnitude
 *                     (sparsify.py magnitude), the sign elected by the sum of
 *                     the weighted deltas (>= 0: +), the agreeing ones summed
 *                     and divided by their weights' sum (0 -> 1) with
 *                     normalize (on) (get_mask L230-254)
 *   dare_linear/_ties the deltas kept at random with probability `density`
 *                     and rescaled (rescale, on) so their L1 norm is the
 *                     delta's (sparsify.py bernoulli, rescaled_masked_tensor);
 *                     then as task_arithmetic / ties
 *   breadcrumbs/_ties the deltas' gamma * numel largest magnitudes dropped
 *                     (gamma a model's parameter, 0.01 by default), then the
 *                     smallest down to density * numel, fewer of the largest
 *                     dropped when both do not fit (sparsify.py
 *                     magnitude_outliers L77-116, registry.py L65-82:
 *                     normalize and rescale off); then as task_arithmetic /
 *                     ties
 *   della/_linear     DELLA's MagPrune: each delta element kept with
 *                     probability density - eps + 2 eps * rank / (n - 1), its
 *                     magnitude's rank within its row (epsilon a model's
 *                     parameter, 0.15 by default; sparsify.py della_magprune
 *                     L138-176, registry.py L83-100: rescale on, normalize on
 *                     for della); then as ties / task_arithmetic
 *   model_stock       the base b and N >= 2 models: c the mean (summed in
 *                     pair order) of the cosines of each pair of offsets
 *                     x_i - b over whole tensors (dot / max(|o_i||o_j|, 1e-6),
 *                     clamped to [-1, 1]), t = N c / (1 + (N - 1) c), then
 *                     t * mean_i x_i + (1 - t) b (model_stock.py L33-85);
 *                     filter_wise: a t per row (the last dimension), found
 *                     while written, one row of each input held
 *   slerp             two inputs, the base and one more, at t: the spherical
 *                     interpolation of the whole tensors, lerp when the
 *                     normalized dot product exceeds 0.9995 (slerp.py L100-170)
 * Where tpconv's result is defined differently from mergekit's (which
 * leaves it to torch's kernels or its random generator):
 *   - whole-tensor sums (norms, L1 norms, the dot) are taken in f64 in
 *     index order and rounded to f32 once;
 *   - magnitude keeps every element with |delta| >= the k-th largest
 *     (k = int(density * numel), found by two histograms of the f32 bit
 *     patterns): ties at the threshold are all kept, where torch.argsort
 *     keeps an arbitrary k;
 *   - magnitude_outliers likewise by two thresholds: kept where the k-th
 *     largest <= |delta| < the n_top-th largest (ties at the upper all
 *     dropped); n_top = 0 drops none of the largest (mergekit's
 *     indices[n_bot:-n_top] is then empty and drops every element);
 *   - MagPrune's ranks order equal magnitudes by index, its probability is
 *     computed in f32 as mergekit's, r / (n - 1) is 0 in a row of one (NaN
 *     in mergekit), and its draw is DARE's below with that probability;
 *   - random keeps element j of input k where (h >> 40) < floor(density *
 *     2^24), h = splitmix64(key + j), key = splitmix64(splitmix64(
 *     splitmix64(seed) ^ fnv1a64(name)) + k): reproducible from --seed,
 *     the same bits for any thread count or chunking;
 *   - SLERP's angle and coefficients in f64, the coefficients rounded to f32.
 * The result is rounded once to the output dtype.
 * Ties of the written input (tpc_ckpt_ties) are kept: a tensor tied to an
 * earlier one is that one's merge (a copy of its description, alias_of it);
 * an input where the two are not tied is refused.
 *
 * Refused by name (TPC_EINPUT): slices with another method, modules, tokenizer, chat_template,
 * another merge_method, a parameter the method does not take (int8_mask is
 * taken and ignored: the mask is exact either way), a model given twice, a
 * mergekit LoRA reference (model+lora), more than 15 inputs, a filter
 * that is in no tensor's name (a recipe for other names); a tensor
 * missing from an input or of another shape, a float tensor in one input
 * that is not float in another, a weight missing, density outside (0, 1]
 * or one keeping no element, gamma outside [0, 1), density -+ epsilon
 * outside (0, 1), della on a tensor of more than 2 dimensions or rows over
 * 2^24.
 */
#ifndef TPC_MIX_H
#define TPC_MIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_ckpt.h"
#include "tpc_err.h"

typedef enum tpc_mix_method {
	TPC_MIX_LINEAR = 1, TPC_MIX_TASK_ARITHMETIC, TPC_MIX_TIES, TPC_MIX_DARE_TIES, TPC_MIX_DARE_LINEAR, TPC_MIX_SLERP,
	TPC_MIX_BREADCRUMBS, TPC_MIX_BREADCRUMBS_TIES, TPC_MIX_DELLA, TPC_MIX_DELLA_LINEAR,
	TPC_MIX_MODEL_STOCK, TPC_MIX_PASSTHROUGH
} tpc_mix_method;

#define TPC_MIX_MAX_INPUTS (TPC_DQ_MAXC - 1)
#define TPC_MIX_MAX_SLICES 256

typedef struct tpc_mix_recipe {
	char *path;          /* for messages */
	tpc_mix_method method;
	const char *method_name;
	size_t n;            /* inputs: the models in order, then the base when not among them */
	const char *model[TPC_MIX_MAX_INPUTS];
	const void *mparams[TPC_MIX_MAX_INPUTS]; /* each one's parameters (cJSON), or NULL */
	int base;            /* the base's index among the inputs, or -1 */
	const void *params;  /* the recipe's parameters (cJSON), or NULL */
	tpc_dtype dtype;     /* out_dtype, else dtype; 0: each tensor as the first input's */
	void *json;          /* the parsed recipe (cJSON) */
	/* passthrough: the output's layers, slice by slice (mergekit's
	 * slices: one source each, layer_range [a, b)) */
	size_t nslices;
	struct tpc_mix_slice {
		int input;           /* the source model's index among the inputs */
		int64_t a, b;        /* its layers [a, b) */
		const void *params;  /* the source's parameters (cJSON: scale), or NULL */
	} slice[TPC_MIX_MAX_SLICES];
} tpc_mix_recipe;

/* Parse a recipe's text (`path` names it in errors); refusals as above.
 * Release with tpc_mix_recipe_release. */
int tpc_mix_recipe_from_buffer(tpc_mix_recipe *r, const char *text, size_t len, const char *path, tpc_err *e);
int tpc_mix_recipe_from_file(tpc_mix_recipe *r, const char *path, tpc_err *e);
void tpc_mix_recipe_release(tpc_mix_recipe *r);

/* The input whose checkpoint is written (its tensor list, metadata and
 * companions): the base, else the first model. */
static inline int tpc_mix_primary(const tpc_mix_recipe *r)
{
	return r->base >= 0 ? r->base : 0;
}

/* Parameter `name` for tensor `tensor` at layer position t: input k's
 * (k >= 0) before the recipe's. *found false when neither gives it. */
int tpc_mix_param(const tpc_mix_recipe *r, const char *name, int k, const char *tensor, double t, double *v,
		  bool *found, tpc_err *e);

typedef struct tpc_mix_stats {
	size_t merged;       /* tensors merged */
	size_t kept;         /* not float in any input: the written input's, as it is */
	size_t lerped;       /* SLERP that fell back to lerp */
	size_t tied;         /* tied in the written input to an earlier tensor: its merge, tied */
} tpc_mix_stats;

/*
 * Merge: in[k] is input k's checkpoint (in[tpc_mix_primary(r)] == ck, the
 * one written); each float tensor of ck becomes a TPC_DQ_MIX description
 * over the inputs' tensors of its name (their sources added to ck). Every
 * tensor is checked in every input before ck changes; a later error (out of
 * memory, a read of the whole-tensor facts) leaves ck partly merged, for
 * the caller to drop. `seed`: DARE's.
 */
int tpc_mix_apply(tpc_ckpt *ck, const tpc_ckpt *const *in, const tpc_mix_recipe *r, uint64_t seed,
		  tpc_mix_stats *st, tpc_err *e);

/*
 * Passthrough (merge_method passthrough with slices): ck (in[primary], the
 * first slice's model) becomes the first slice's model's embedding-side
 * tensors (plan.py plan_module: pre_weights from slices[0]), each slice's
 * layers in turn renumbered from 0 by f's tensor table (tpc_family_classify,
 * tpc_family_name: Hugging Face names), then the last slice's model's other
 * tensors (post_weights from slices[-1]); a source's `scale` multiplies its
 * tensors (passthrough.py), the recipe's dtype rounds them once. *layers:
 * the output's layer count (config.json's num_hidden_layers). Refused: no
 * family record, a tensor outside its table or in an MTP layer, a
 * layer_range past a model's layers.
 */
struct tpc_family;
int tpc_mix_passthrough(tpc_ckpt *ck, const tpc_ckpt *const *in, const tpc_mix_recipe *r, const struct tpc_family *f,
			int64_t *layers, tpc_mix_stats *st, tpc_err *e);

/* tpc_ckpt_read_bytes of a TPC_DQ_MIX tensor: F32 elements [e0, e0+cnt). */
int tpc__mix_read(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t e0, uint64_t cnt, float *dst, tpc_err *e);

/* DARE's generator (above), for tests */
uint64_t tpc_mix_splitmix64(uint64_t x);

#endif
