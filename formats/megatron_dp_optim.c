/* megatron_dp_optim.c - Megatron-Core's distributed optimizer state in its
 * 'dp_reshardable' form, the default since Megatron 0.13 (training/
 * checkpointing.py:552-558 at d98e8a6), and its 'dp_zero_gather_scatter'
 * one, mapped back to model space (TPC_OPEN_OPTIMIZER; dcp_int.h).
 *
 * The layout followed (Megatron-LM d98e8a6, megatron/core/optimizer/
 * distrib_optimizer.py unless named):
 *
 * - sharded_param_state_dp_reshardable (:1838-1986) saves each bucket of
 *   each parameter buffer as it lies in memory: tensors
 *   'optimizer.distributed.dp_group_idx_G.gbuf_idx_I.dtype_D.bucket_idx_B.
 *   {param,exp_avg,exp_avg_sq}' of global shape (the bucket's numel_unpadded,)
 *   (the padding between parameters included, the end padding dropped), each
 *   DP rank's range a chunk, and ShardedObjects '...dp_group_idx_G.
 *   per_bucket_numel' and 'per_bucket_numel_unpadded' ([{(param dtype, grad
 *   dtype): [n per bucket]}] per buffer); the param groups are the
 *   ShardedObject '...dp_group_idx_G.optimizer' (sharded_state_dict,
 *   :1531-1546). Nothing names a parameter.
 * - G is the rank in the model-parallel group (optimizer/__init__.py:1086,
 *   1143): parallel_state.py's RankGenerator puts tp before pp in every
 *   order it allows, and torch orders a group by global rank, so G = tp +
 *   TP x pp. One buffer per (param dtype, grad dtype, expert-parallel)
 *   (param_and_grad_buffer.py group_params_for_buffers); two dtypes are not
 *   read. Routed experts with expert parallelism (allreduce False) are in a
 *   second optimizer's buffers (optimizer/__init__.py:1213-1245), its G the
 *   rank in the expert tp-ep-pp group, etp + ETP (ep + EP pp) by the expert
 *   RankGenerator, its DP group world / (ETP EP PP) ranks: ChainedOptimizer
 *   saves the two under 'chained_0.' and 'chained_1.' (optimizer.py
 *   :1573-1603), both mapped here (without expert parallelism the experts
 *   lie in the dense buffer, after their router).
 * - A buffer holds the rank's trainable parameters in named_parameters order
 *   (distributed_data_parallel.py:179-189), laid out in reverse, each start
 *   aligned to 64 elements, a bucket closed at a parameter's end once it
 *   holds bucket_size elements (:506-589; tpc__mcore_layout, which the
 *   legacy reader shares). The bucket ends are taken from
 *   the save's per_bucket_numel_unpadded rather than from args (the default
 *   bucket size has changed: at d98e8a6 it is max(40M, 1M x the dp group
 *   without cp), distributed_data_parallel.py:131-137, and there is none past
 *   the first pipeline stage, :164-171): the parameters must fill each
 *   recorded bucket exactly, each ending at a parameter's end (Megatron itself
 *   refuses to load a save whose sizes differ from its own, :2076-2081).
 *   named_parameters walks modules in registration order: mcore_order below,
 *   a table of Megatron's parameter names in that order, each cited (a
 *   layer's own key, non-homogeneous layers, looked up as its stacked one:
 *   layer_entry). The
 *   layers of a stage are an even split of num_layers, or the uneven one
 *   args give (layer_offset), the embedding on the first stage, the final
 *   norm and output layer on the last (tied embeddings over several stages:
 *   the output layer's copy of them, and both in buckets of their own). With virtual pipeline stages each
 *   model chunk of a rank has a buffer of its own, gbuf_idx v for chunk v
 *   (DDP per chunk; the optimizer chains their buffers, :714-726), chunk v of
 *   stage p holding the layers from (v PP + p) L / (PP VPP).
 * - A rank's local parameter is its chunk(s) of the model's tensor in the
 *   save's own .metadata: chunks of one tensor (of one layer) sorted by
 *   offset along the one dim they split, chunk k on tp rank k mod TP (a
 *   column-parallel weight: one per rank; SwiGLU's fc1: [gate_r; up_r], two
 *   per rank); one chunk: replicated, every rank holds it whole (and its
 *   state is tp rank 0's).
 *
 * 'dp_zero_gather_scatter' (sharded_param_state_dp_zero, :1659-1690) is
 * read the same way but for where the buffers are: each DP group's in one
 * ShardedObject '...dp_group_idx_G.param_state', get_parameter_state_dp_zero
 * (:1262-1411), the buckets of each model chunk's buffer coalesced as in a
 * legacy distrib_optim.pt (tpc__mcore_world_tensors), laid out by the args'
 * bucket size (tpc__mcore_coalesced, the legacy reader's; zero_rank_states).
 *
 * The order is inferred, so it is proved: the save holds both the fp32 master
 * ('param') and the model's weight, and every master, rounded to the weight's
 * dtype, must equal it (tpc__mcore_prove: every element of chunks of up to
 * 65,536 elements; 64 runs of 64 spread evenly over larger ones), on every
 * rank; any difference is refused naming the parameter, rank and element.
 */
#include "dcp_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_buf.h"
#include "tpc_cast.h"
#include "tpc_extras.h"
#include "tpc_util.h"


enum { FIRST, LAYER, LAST, EXPERT, BUFFER, MTP, MTP_BODY }; /* where a parameter lives: first
						stage, each layer, last stage, each routed
						expert of each layer; BUFFER: a layer's model
						tensor that is no parameter (not in the
						optimizer's buffers); MTP: each multi-token
						prediction layer (last stage), MTP_BODY its
						transformer layer: the LAYER entries there */

/* Megatron's parameters of a GPT model in named_parameters order (module
 * registration order), as the save names its keys. GPTModel registers
 * embedding, decoder, output_layer (models/gpt/gpt_model.py:174, 233, 277);
 * LanguageModelEmbedding word then position embeddings
 * (language_model_embedding.py:59, 71); TransformerBlock its layers, then
 * final_layernorm (transformer_block.py:375, 388); TransformerLayer
 * input_layernorm, self_attention, pre_mlp_layernorm, mlp
 * (transformer_layer.py:368, 392, 426, 456; the cross-attention modules are
 * identities in a GPT); Attention core_attention and linear_proj
 * (attention.py:382, 413) before SelfAttention's linear_qkv, q_layernorm,
 * k_layernorm (:1692, 1734, 1743); MultiLatentAttention core_attention and
 * linear_proj (multi_latent_attention.py:207, 221) before MLASelfAttention's
 * linear_q_proj (without q_lora_rank) or linear_q_down_proj and
 * linear_q_up_proj, then linear_kv_down_proj, linear_kv_up_proj,
 * q_layernorm, kv_layernorm (:510, 537, 557, 584, 604, 620, 626; with
 * TransformerEngine the q and kv norms are the up projections' fused
 * layer_norm_weight, and q/kv_layernorm identities); MLP linear_fc1,
 * linear_fc2 (mlp.py:219, 240); MoELayer router, then experts, then
 * shared_experts (moe/moe_layer.py:260, 334, 346); the router its weight
 * and bias (router.py:64, 68; expert_bias is a buffer, :191-192, in the
 * save but not the optimizer); SharedExpertMLP an MLP's linear_fc1,
 * linear_fc2, then its gate_weight (shared_experts.py:128, 139, with
 * --moe-shared-expert-gate); SequentialMLP its local experts in
 * order, each an MLP (experts.py:1435-1451: linear_fc1's weight and bias,
 * then linear_fc2's, biases with --add-bias-linear), TEGroupedMLP
 * (moe_grouped_gemm) its linear_fc1, then linear_fc2 (experts.py:217,
 * 236), each a TE GroupedLinear registering weight0, bias0, weight1, bias1,
 * ... (grouped_linear.py GroupedLinear.__init__, one loop over the gemms,
 * at TransformerEngine 0069563; the model's save names them
 * experts.experts.linear_fc1.weight/bias either way, experts.py
 * :1049-1091, 1526-1566); the experts go to the expert-parallel
 * optimizer's buffer, the router to the dense one; a linear its weight, then bias (tensor_parallel/layers.py:1046-1130,
 * 1415-1501); TransformerEngine's LayerNormLinear layer_norm_weight,
 * layer_norm_bias, then weight, bias (transformer_engine/pytorch/module/
 * layernorm_linear.py, LayerNormLinear.__init__, at TransformerEngine
 * 3ec8787). Multi-token prediction (DeepSeek-V3's MTP): GPTModel
 * registers mtp after decoder and before output_layer (gpt_model.py:233,
 * 245, 277), on the last pipeline stage without a custom layout
 * (multi_token_prediction.py:788-832, mtp_on_this_rank); its layers in
 * order (over several stages that stage's own copy of the word
 * embeddings first: stage_params), each a MultiTokenPredictionLayer registering enorm, hnorm,
 * eh_proj (a column-parallel linear without bias), its transformer layer,
 * final_layernorm (:1157-1247), saved under 'mtp.layers.N.', each key the
 * layer's own (unstacked, :2142-2168), the transformer layer's as
 * 'transformer_layer.' (:1740-1766); its routed experts, named_parameters
 * order again, in the expert-parallel buffer after the decoder's. A
 * parameter not here is refused. */
static const struct {
	const char *key;
	int where;
} mcore_order[] = {
	{"embedding.word_embeddings.weight", FIRST},
	{"embedding.position_embeddings.weight", FIRST},
	{"decoder.layers.input_layernorm.weight", LAYER},
	{"decoder.layers.input_layernorm.bias", LAYER},
	{"decoder.layers.self_attention.linear_proj.weight", LAYER},
	{"decoder.layers.self_attention.linear_proj.bias", LAYER},
	{"decoder.layers.self_attention.linear_q_proj.weight", LAYER},
	{"decoder.layers.self_attention.linear_q_down_proj.weight", LAYER},
	{"decoder.layers.self_attention.linear_q_up_proj.layer_norm_weight", LAYER},
	{"decoder.layers.self_attention.linear_q_up_proj.weight", LAYER},
	{"decoder.layers.self_attention.linear_kv_down_proj.weight", LAYER},
	{"decoder.layers.self_attention.linear_kv_up_proj.layer_norm_weight", LAYER},
	{"decoder.layers.self_attention.linear_kv_up_proj.weight", LAYER},
	{"decoder.layers.self_attention.linear_qkv.layer_norm_weight", LAYER},
	{"decoder.layers.self_attention.linear_qkv.layer_norm_bias", LAYER},
	{"decoder.layers.self_attention.linear_qkv.weight", LAYER},
	{"decoder.layers.self_attention.linear_qkv.bias", LAYER},
	{"decoder.layers.self_attention.q_layernorm.weight", LAYER},
	{"decoder.layers.self_attention.q_layernorm.bias", LAYER},
	{"decoder.layers.self_attention.k_layernorm.weight", LAYER},
	{"decoder.layers.self_attention.k_layernorm.bias", LAYER},
	{"decoder.layers.self_attention.kv_layernorm.weight", LAYER},
	{"decoder.layers.self_attention.kv_layernorm.bias", LAYER},
	{"decoder.layers.pre_mlp_layernorm.weight", LAYER},
	{"decoder.layers.pre_mlp_layernorm.bias", LAYER},
	{"decoder.layers.mlp.router.weight", LAYER},
	{"decoder.layers.mlp.router.bias", LAYER},
	{"decoder.layers.mlp.router.expert_bias", BUFFER},
	{"decoder.layers.mlp.experts.experts.linear_fc1.weight", EXPERT},
	{"decoder.layers.mlp.experts.experts.linear_fc1.bias", EXPERT},
	{"decoder.layers.mlp.experts.experts.linear_fc2.weight", EXPERT},
	{"decoder.layers.mlp.experts.experts.linear_fc2.bias", EXPERT},
	{"decoder.layers.mlp.shared_experts.linear_fc1.weight", LAYER},
	{"decoder.layers.mlp.shared_experts.linear_fc1.bias", LAYER},
	{"decoder.layers.mlp.shared_experts.linear_fc2.weight", LAYER},
	{"decoder.layers.mlp.shared_experts.linear_fc2.bias", LAYER},
	{"decoder.layers.mlp.shared_experts.gate_weight", LAYER},
	{"decoder.layers.mlp.linear_fc1.layer_norm_weight", LAYER},
	{"decoder.layers.mlp.linear_fc1.layer_norm_bias", LAYER},
	{"decoder.layers.mlp.linear_fc1.weight", LAYER},
	{"decoder.layers.mlp.linear_fc1.bias", LAYER},
	{"decoder.layers.mlp.linear_fc2.weight", LAYER},
	{"decoder.layers.mlp.linear_fc2.bias", LAYER},
	{"decoder.final_layernorm.weight", LAST},
	{"decoder.final_layernorm.bias", LAST},
	{"mtp.layers.enorm.weight", MTP},
	{"mtp.layers.enorm.bias", MTP},
	{"mtp.layers.hnorm.weight", MTP},
	{"mtp.layers.hnorm.bias", MTP},
	{"mtp.layers.eh_proj.weight", MTP},
	{"mtp.layers.transformer_layer.", MTP_BODY},
	{"mtp.layers.final_layernorm.weight", MTP},
	{"mtp.layers.final_layernorm.bias", MTP},
	{"output_layer.weight", LAST},
	{"output_layer.bias", LAST},
};
#define NORDER (sizeof(mcore_order) / sizeof(mcore_order[0]))

static const char *const state_keys[3] = {"param", "exp_avg", "exp_avg_sq"};

/* One parameter of a pipeline stage: its model tensor and its chunks. */
typedef struct dparam {
	const tpc_dcp_entry *en; /* the model's (stacked) entry */
	int64_t layer;           /* its layer, or -1 */
	int64_t expert;          /* its routed expert (global number), or -1 */
	int s;                   /* the stacked dims before its own: layer, expert */
	int64_t ix;              /* the model tensor in ck (one layer's) */
	bool own;                /* en is layer `layer`'s own key (non-homogeneous layers): no layer dim */
	bool copy;               /* the last stage's output_layer.weight, a copy of the tied
				    word embeddings (their entry): proved, no state of its own */
	size_t *box;             /* en's chunks of this layer, by offset */
	size_t nbox;
	int d;                   /* the dim the chunks split (-1: one chunk) */
} dparam;

/* The run's state: the save's sizes and what is being built. */
typedef struct dpmap {
	tpc__mcore_optim *mo;
	tpc_ckpt *ck;
	const tpc_dcp_meta *m;
	tpc_value *const *vals;
	const char *path;     /* .metadata, for errors */
	int64_t tp, pp, vpp, layers; /* vpp: model chunks per pipeline rank */
	int64_t first, last;  /* decoder_first/last_pipeline_num_layers (-1: unset) */
	bool tied;
	/* the part mapped: the dense optimizer's, or the expert-parallel one's
	 * (then tp is the expert TP size, ep the expert-parallel size; its
	 * groups are etp + ETP (ep + EP pp)) */
	const char *pre;      /* "[chained_N.]optimizer.distributed.dp_group_idx_" */
	bool expert, chained;
	int64_t ep, nexperts;
	int64_t mtp;          /* mtp_num_layers (0: none) */
	bool grouped;         /* TEGroupedMLP (moe_grouped_gemm): fc1 of every expert, then fc2 */
	int64_t *bix;         /* [G][gbuf][bucket][3]: ck index of each bucket tensor, -1 none */
	size_t maxb;          /* buckets per buffer (room) */
} dpmap;

/* Where bucket b's tensor k of buffer v (a model chunk's) of group g is. */
static int64_t *bslot(const dpmap *dm, int64_t g, int64_t v, size_t b, int k)
{
	return &dm->bix[(((size_t)g * (size_t)dm->vpp + (size_t)v) * dm->maxb + b) * 3 + (size_t)k];
}

/* ---- the save's buckets and sizes ---- */

static bool parse_i64(const char **p, int64_t *v)
{
	const char *s = *p;
	int64_t x = 0;
	if (*s < '0' || *s > '9')
		return false;
	while (*s >= '0' && *s <= '9' && x < ((int64_t)1 << 40))
		x = x * 10 + (*s++ - '0');
	*p = s;
	*v = x;
	return true;
}

/* "...dp_group_idx_G.gbuf_idx_I.dtype_D.bucket_idx_B.KEY": G, I, B, the key
 * (0..2) and D's extent; false when the name is not one. */
static bool bucket_name(const char *pre, const char *nm, int64_t *g, int64_t *gb, int64_t *b, int *k, const char **dt,
			size_t *dl)
{
	const char *p = nm + strlen(pre), *q;
	if (strncmp(nm, pre, strlen(pre)) || !parse_i64(&p, g) || strncmp(p, ".gbuf_idx_", 10))
		return false;
	p += 10;
	if (!parse_i64(&p, gb) || strncmp(p, ".dtype_", 7) || !(q = strstr(p, ".bucket_idx_")))
		return false;
	*dt = p + 7;
	*dl = (size_t)(q - *dt);
	p = q + 12;
	if (!parse_i64(&p, b) || *p++ != '.')
		return false;
	for (*k = 0; *k < 3 && strcmp(p, state_keys[*k]); (*k)++)
		;
	return *k < 3;
}

/* Every bucket tensor of ck placed in dm->bix, checked: one buffer per
 * model chunk (gbuf v, one dtype: optimizer sharded_state_dict chains the
 * chunks' buffers, distrib_optimizer.py:714-726) in each group, groups
 * inside tp x pp. */
static int find_buckets(dpmap *dm, tpc_err *e)
{
	size_t ng = (size_t)(dm->tp * dm->ep * dm->pp), nv = (size_t)dm->vpp;
	const char **dts = tpc_calloc(ng * nv + 1, sizeof(char *));
	size_t *dls = tpc_calloc(ng * nv + 1, sizeof(size_t));
	int ret = dts && dls ? 0 : tpc_err_nomem(e);
	dm->maxb = 1;
	for (size_t i = 0; !ret && i < dm->ck->n; i++) {
		int64_t g, gb, b;
		int k;
		const char *dt;
		size_t dl;
		if (bucket_name(dm->pre, dm->ck->t[i].name, &g, &gb, &b, &k, &dt, &dl) && b + 1 > (int64_t)dm->maxb && b < (1 << 20))
			dm->maxb = (size_t)b + 1;
	}
	if (!ret && ng * nv * dm->maxb > ((size_t)1 << 24))
		ret = tpc_err_at(e, TPC_EINPUT, dm->path, NULL, "bucket indices up to %zu in %zu DP groups: more than a real save holds",
				 dm->maxb - 1, ng);
	if (!ret && !(dm->bix = tpc_calloc(ng * nv * dm->maxb * 3 + 1, sizeof(int64_t))))
		ret = tpc_err_nomem(e);
	for (size_t i = 0; !ret && i < ng * nv * dm->maxb * 3; i++)
		dm->bix[i] = -1;
	for (size_t i = 0; !ret && i < dm->ck->n; i++) {
		const char *nm = dm->ck->t[i].name, *dt;
		int64_t g, gb, b;
		size_t dl;
		int k;
		if (strncmp(nm, dm->pre, strlen(dm->pre)))
			continue;
		if (!bucket_name(dm->pre, nm, &g, &gb, &b, &k, &dt, &dl) || b >= (int64_t)dm->maxb)
			ret = tpc_err_at(e, TPC_EINPUT, dm->path, nm,
					 "not a bucket tensor of Megatron's dp_reshardable form (...dp_group_idx_G.gbuf_idx_I.dtype_D.bucket_idx_B.{param,exp_avg,exp_avg_sq})");
		else if (g >= (int64_t)ng && dm->expert)
			ret = tpc_err_at(e, TPC_EINPUT, dm->path, nm,
					 "DP group %lld of the expert-parallel optimizer in an etp %lld x ep %lld x pp %lld save (its groups are 0..%zu)",
					 (long long)g, (long long)dm->tp, (long long)dm->ep, (long long)dm->pp, ng - 1);
		else if (g >= (int64_t)ng)
			ret = tpc_err_at(e, TPC_EINPUT, dm->path, nm, "DP group %lld in a tp %lld x pp %lld save (its groups are 0..%zu)",
					 (long long)g, (long long)dm->tp, (long long)dm->pp, ng - 1);
		else if (gb >= dm->vpp || (dts[g * nv + gb] && (dl != dls[g * nv + gb] || memcmp(dt, dts[g * nv + gb], dl))))
			ret = tpc_err_at(e, TPC_EINPUT, dm->path, nm,
					 "a second parameter buffer of DP group %lld beside its %s (one per parameter dtype, and expert-parallel parameters have their own): only one dense buffer per model chunk is read",
					 (long long)g, dm->vpp == 1 ? "model chunk's" : "model chunks'");
		if (ret)
			break;
		dts[g * nv + gb] = dt;
		dls[g * nv + gb] = dl;
		*bslot(dm, g, gb, (size_t)b, k) = (int64_t)i;
	}
	free(dts);
	free(dls);
	return ret;
}

/* dp_zero_gather_scatter keeps each DP group's state in ShardedObjects
 * (sharded_state_dict, distrib_optimizer.py:1531-1546, and param_state,
 * :1659-1690): a tensor entry under the prefix is not of that form. */
static int zero_objects(const dpmap *dm, tpc_err *e)
{
	for (size_t i = 0; i < dm->m->n; i++)
		if (dm->m->e[i].tensor && !strncmp(dm->m->e[i].fqn, dm->pre, strlen(dm->pre)))
			return tpc_err_at(e, TPC_EINPUT, dm->path, dm->m->e[i].fqn,
					  "a tensor in a dp_zero_gather_scatter save, which keeps each DP group's state in one ShardedObject ('param_state'): not mapped");
	return 0;
}

/* The bytes item "PREFIX G.what/shard_..." of m: its value, or NULL. */
static const tpc_value *group_object(const dpmap *dm, int64_t g, const char *what)
{
	char pre[160];
	int n = snprintf(pre, sizeof(pre), "%s%lld.%s/shard_", dm->pre, (long long)g, what);
	for (size_t i = 0; n > 0 && i < dm->m->n; i++)
		if (!dm->m->e[i].tensor && !strncmp(dm->m->e[i].fqn, pre, (size_t)n))
			return dm->vals[i];
	return NULL;
}

/* Megatron's ShardedObject as its torch strategy saves it: a one-item list
 * (strategies/torch.py:317-322) */
static const tpc_value *object_data(const tpc_value *v)
{
	return v && v->kind == TPC_V_LIST && v->n == 1 ? v->items[0] : NULL;
}

/* Group g's per_bucket_numel_unpadded: buffer v's list of sizes (one
 * buffer per model chunk). */
static int saved_sizes(const dpmap *dm, int64_t g, int64_t v, const tpc_value **out, tpc_err *e)
{
	const tpc_value *o = object_data(group_object(dm, g, "per_bucket_numel_unpadded")), *d;
	char nm[128];
	snprintf(nm, sizeof(nm), "%s%lld.per_bucket_numel_unpadded", dm->pre, (long long)g);
	if (!group_object(dm, g, "per_bucket_numel_unpadded"))
		return tpc_err_at(e, TPC_EINPUT, dm->path, NULL,
				  "no '%s': the bucket sizes every dp_reshardable save records for each DP group; not mapped", nm);
	if (!o || o->kind != TPC_V_LIST || o->n != (size_t)dm->vpp || (d = o->items[v])->kind != TPC_V_DICT || d->n != 1 ||
	    d->items[0]->kind != TPC_V_LIST)
		return tpc_err_at(e, TPC_EINPUT, dm->path, nm,
				  "is not %lld buffer%s' {(param dtype, grad dtype): [sizes]} (one dense buffer per model chunk is read)",
				  (long long)dm->vpp, dm->vpp == 1 ? "" : "s");
	for (size_t b = 0; b < d->items[0]->n; b++)
		if (d->items[0]->items[b]->kind != TPC_V_INT || d->items[0]->items[b]->ival < 0)
			return tpc_err_at(e, TPC_EINPUT, dm->path, nm, "bucket %zu's size is not a count", b);
	*out = d->items[0];
	return 0;
}

/* ---- the model's parameters, stage by stage ---- */

static const tpc_dcp_entry *model_entry(const tpc_dcp_meta *m, const char *key)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->e[i].tensor && !strcmp(m->e[i].fqn, key))
			return &m->e[i];
	return NULL;
}

/* "decoder.layers.N.REST", a layer's own key (non-homogeneous layers:
 * transformer_block.py:793-838 keys each layer by its number, unstacked):
 * N and REST; false for any other key. */
static bool own_layer(const char *fqn, int64_t *l, const char **rest)
{
	const char *p = fqn + 15;
	if (strncmp(fqn, "decoder.layers.", 15) || !parse_i64(&p, l) || *p != '.')
		return false;
	*rest = p + 1;
	return true;
}

/* Table entry k's model entry for layer l (-1: none): its stacked key, or
 * layer l's own (*own set). */
static const tpc_dcp_entry *layer_entry(const dpmap *dm, size_t k, int64_t l, bool *own)
{
	const tpc_dcp_entry *en = model_entry(dm->m, mcore_order[k].key);
	char nm[512];
	*own = false;
	if (en || l < 0 || mcore_order[k].where == FIRST || mcore_order[k].where == LAST)
		return en;
	snprintf(nm, sizeof(nm), "decoder.layers.%lld.%s", (long long)l, mcore_order[k].key + 15);
	*own = true;
	return model_entry(dm->m, nm);
}

/* "mtp.layers.N.REST", a multi-token prediction layer's key: N, and the
 * table key it is looked up as ("decoder.layers.R" for its transformer
 * layer's "transformer_layer.R", else "mtp.layers.REST"); false for any
 * other key. */
static bool mtp_key(const char *fqn, int64_t *m, char *key, size_t cap)
{
	const char *p = fqn + 11;
	if (strncmp(fqn, "mtp.layers.", 11) || !parse_i64(&p, m) || *p++ != '.')
		return false;
	if (!strncmp(p, "transformer_layer.", 18))
		snprintf(key, cap, "decoder.layers.%s", p + 18);
	else
		snprintf(key, cap, "mtp.layers.%s", p);
	return true;
}

/* MTP layer m's tensor en (its table key `key`): a known parameter of one
 * of the args' MTP layers, its own (unstacked). */
static int check_mtp(const dpmap *dm, const tpc_dcp_entry *en, int64_t m, const char *key, tpc_err *e)
{
	size_t k = 0;
	bool body = !strncmp(key, "decoder.layers.", 15);
	while (k < NORDER && strcmp(mcore_order[k].key, key))
		k++;
	int where = k < NORDER ? mcore_order[k].where : -1;
	if (body ? where != LAYER && where != EXPERT && where != BUFFER : where != MTP)
		return tpc_err_at(e, TPC_EINPUT, dm->path, en->fqn,
				  "a parameter of a multi-token prediction layer whose place in Megatron's parameter order tpconv does not know (enorm, hnorm, eh_proj, a GPT transformer_layer, final_layernorm): the dp_reshardable buckets cannot be mapped");
	if (m >= dm->mtp || en->unstacked > 0 || (where != EXPERT && en->experts > 0))
		return tpc_err_at(e, TPC_EINPUT, dm->path, en->fqn,
				  "not a parameter of one of the %lld multi-token prediction layers args.mtp_num_layers says",
				  (long long)dm->mtp);
	if (where == EXPERT && (en->ndim < 2 || en->shape[0] != dm->nexperts || en->experts != dm->nexperts))
		return tpc_err_at(e, TPC_EINPUT, dm->path, en->fqn, "not stacked over the %lld experts args.num_experts says",
				  (long long)dm->nexperts);
	return 0;
}

/* Every model tensor is a parameter of the table (the order is known),
 * stacked over the layers, or a layer's own. */
static int check_known(const dpmap *dm, tpc_err *e)
{
	for (size_t i = 0; i < dm->m->n; i++) {
		const tpc_dcp_entry *en = &dm->m->e[i];
		size_t k = 0;
		int64_t l = -1;
		const char *rest = NULL;
		char key[512];
		if (!en->tensor || tpc__mcore_optim_key(en->fqn))
			continue;
		if (mtp_key(en->fqn, &l, key, sizeof(key))) {
			int ret = check_mtp(dm, en, l, key, e);
			if (ret)
				return ret;
			continue;
		}
		bool own = own_layer(en->fqn, &l, &rest);
		snprintf(key, sizeof(key), "%s%s", own ? "decoder.layers." : "", own ? rest : en->fqn);
		while (k < NORDER && strcmp(mcore_order[k].key, key))
			k++;
		if (k == NORDER)
			return tpc_err_at(e, TPC_EINPUT, dm->path, en->fqn,
					  "a parameter whose place in Megatron's parameter order tpconv does not know (its table, megatron_dp_optim.c, holds a GPT's parameters, multi-latent attention and routed and shared experts): the dp_reshardable buckets cannot be mapped");
		int where = mcore_order[k].where, s = own ? 0 : 1;
		bool stacked = where == LAYER || where == EXPERT || where == BUFFER;
		if (own && (!stacked || l >= dm->layers || en->unstacked > 0))
			return tpc_err_at(e, TPC_EINPUT, dm->path, en->fqn, "not a parameter of one of the %lld layers args.num_layers says",
					  (long long)dm->layers);
		if (!own && (stacked != (en->unstacked > 0) || (stacked && en->shape[0] != dm->layers)))
			return tpc_err_at(e, TPC_EINPUT, dm->path, en->fqn, "not stacked over the %lld layers args.num_layers says",
					  (long long)dm->layers);
		if (where == EXPERT && (en->ndim < s + 2 || en->shape[s] != dm->nexperts || en->experts != dm->nexperts))
			return tpc_err_at(e, TPC_EINPUT, dm->path, en->fqn, "not stacked over the %lld experts args.num_experts says",
					  (long long)dm->nexperts);
	}
	return 0;
}

static int off_cmp(const int64_t *a, const int64_t *b, int nd)
{
	for (int d = 0; d < nd; d++)
		if (a[d] != b[d])
			return a[d] < b[d] ? -1 : 1;
	return 0;
}

/* p's chunks (of its layer), sorted by offset, and the dim they split;
 * refused unless they tile the tensor along one dim in chunks of whole ranks. */
static int find_boxes(const dpmap *dm, dparam *p, tpc_err *e)
{
	const tpc_dcp_entry *en = p->en;
	int s = p->s, nd = en->ndim - s;
	if (!(p->box = tpc_calloc(en->nc + 1, sizeof(size_t))))
		return tpc_err_nomem(e);
	p->nbox = 0;
	bool ok = true;
	int li = p->layer >= 0 && !p->own ? 0 : -1, xi = p->expert >= 0 ? li + 1 : -1; /* the layer's and expert's dims */
	for (size_t c = 0; c < en->nc; c++) {
		if ((li >= 0 && en->c[c].off[li] != p->layer) || (xi >= 0 && en->c[c].off[xi] != p->expert))
			continue;
		for (int d = 0; d < s; d++)
			ok = ok && en->c[c].size[d] == 1;
		size_t at = p->nbox; /* insertion by offset; a replica written twice kept once */
		while (at > 0 && off_cmp(en->c[p->box[at - 1]].off + s, en->c[c].off + s, nd) > 0)
			at--;
		if (at > 0 && !off_cmp(en->c[p->box[at - 1]].off + s, en->c[c].off + s, nd) &&
		    !off_cmp(en->c[p->box[at - 1]].size + s, en->c[c].size + s, nd))
			continue;
		memmove(&p->box[at + 1], &p->box[at], (p->nbox - at) * sizeof(size_t));
		p->box[at] = c;
		p->nbox++;
	}
	p->d = -1;
	const tpc_dcp_chunk *c0 = p->nbox ? &en->c[p->box[0]] : NULL;
	for (int d = 0; c0 && d < nd; d++)
		if (c0->size[s + d] != en->shape[s + d]) {
			if (p->d >= 0)
				return tpc_err_at(e, TPC_EINPUT, dm->path, en->fqn,
						  "split along two dims: not a tensor-parallel split tpconv maps");
			p->d = d;
		}
	ok = ok && p->nbox > 0 && (p->nbox == 1 ? p->d < 0 : p->d >= 0 && p->nbox % (size_t)dm->tp == 0);
	int64_t along = 0;
	for (size_t k = 0; ok && k < p->nbox; k++) {
		const tpc_dcp_chunk *c = &en->c[p->box[k]];
		for (int d = 0; d < nd && ok; d++)
			ok = d == p->d ? c->off[s + d] == along : c->off[s + d] == 0 && c->size[s + d] == en->shape[s + d];
		along += p->d >= 0 ? c->size[s + p->d] : 0;
	}
	if (ok && p->d >= 0)
		ok = along == en->shape[s + p->d];
	if (!ok)
		return tpc_err_at(e, TPC_EINPUT, dm->path, en->fqn,
				  "%zu chunks (of layer %lld) that do not tile it as Megatron's tensor parallelism over %lld ranks does (one chunk, or whole ranks' chunks along one dim)",
				  p->nbox, (long long)p->layer, (long long)dm->tp);
	return 0;
}

static bool rank_has(const dparam *p, size_t k, int64_t t, int64_t tp)
{
	return p->nbox == 1 || (int64_t)(k % (size_t)tp) == t;
}

/* Parameter p's local shape on tp rank t (its chunks joined along d). */
static void local_shape(const dparam *p, int64_t t, int64_t tp, int64_t *shape)
{
	int s = p->s, nd = p->en->ndim - s;
	const tpc_dcp_chunk *c0 = &p->en->c[p->box[0]];
	for (int d = 0; d < nd; d++)
		shape[d] = c0->size[s + d];
	if (p->d < 0)
		return;
	shape[p->d] = 0;
	for (size_t k = 0; k < p->nbox; k++)
		if (rank_has(p, k, t, tp))
			shape[p->d] += p->en->c[p->box[k]].size[s + p->d];
}

static int64_t shape_numel(const int64_t *shape, int nd)
{
	int64_t n = 1;
	for (int d = 0; d < nd; d++)
		n *= shape[d];
	return n;
}

/* One parameter into ps[*n]: entry en's tensor of layer l (or none, -1;
 * own: en is the layer's own key), routed expert x (or none), its ck
 * tensor and chunks. */
static int add_param(const dpmap *dm, dparam *ps, size_t *n, const tpc_dcp_entry *en, int64_t l, bool own, int64_t x,
		     tpc_err *e)
{
	dparam *p = &ps[(*n)++];
	char nm[1024];
	int64_t ol;
	p->en = en;
	p->layer = l;
	p->own = own;
	p->expert = x;
	p->s = (l >= 0 && !own) + (x >= 0);
	const char *rest = l >= 0 ? en->fqn + strlen("decoder.layers.") : en->fqn, *xs;
	if (own && !own_layer(en->fqn, &ol, &rest))
		return tpc_err_at(e, TPC_EINPUT, dm->path, en->fqn, "not a layer's own key");
	xs = strstr(rest, ".experts.experts.");
	char lp[48] = ""; /* "decoder.layers.L." before rest, none for an MTP layer's key */
	if (l >= 0)
		snprintf(lp, sizeof(lp), "decoder.layers.%lld.", (long long)l);
	if (x >= 0 && xs) /* the reader's per-expert name (megatron_dist.c expert_name) */
		snprintf(nm, sizeof(nm), "%s%.*s.experts.local_experts.%lld.%s", lp, (int)(xs - rest), rest, (long long)x,
			 xs + strlen(".experts.experts."));
	else if (l >= 0)
		snprintf(nm, sizeof(nm), "decoder.layers.%lld.%s", (long long)l, rest);
	else
		snprintf(nm, sizeof(nm), "%s", en->fqn);
	if ((p->ix = tpc_ckpt_find(dm->ck, nm)) < 0)
		return tpc_err_at(e, TPC_EINPUT, dm->path, en->fqn, "layer %lld (expert %lld) was not read", (long long)l, (long long)x);
	return find_boxes(dm, p, e);
}

/* Do table entries a and b belong to one module (their keys equal up to
 * the parameter's name)? */
static bool same_module(size_t a, size_t b)
{
	const char *da = strrchr(mcore_order[a].key, '.'), *db = strrchr(mcore_order[b].key, '.');
	return da - mcore_order[a].key == db - mcore_order[b].key &&
	       !strncmp(mcore_order[a].key, mcore_order[b].key, (size_t)(da - mcore_order[a].key));
}

/* Layer l's routed experts [x0, x0 + nx) into ps, in the order their
 * module registers them: SequentialMLP expert by expert (fc1's weight and
 * bias, then fc2's, of each), TEGroupedMLP linear by linear (fc1, then
 * fc2), expert by expert within each (weight0, bias0, weight1, ...). A run
 * is the table's expert entries (SequentialMLP: all of them; TEGroupedMLP:
 * one linear's), walked once per expert. mtpl >= 0: MTP layer mtpl's
 * transformer layer's experts (l unused). */
static const tpc_dcp_entry *mtp_entry(const dpmap *dm, int64_t m, size_t k);

static int add_experts(const dpmap *dm, dparam *ps, size_t *n, int64_t l, int64_t mtpl, int64_t x0, int64_t nx,
		       tpc_err *e)
{
	int ret = 0;
	for (size_t m = 0; m < NORDER && !ret; m++) {
		bool starts = mcore_order[m].where == EXPERT &&
			      (m == 0 || mcore_order[m - 1].where != EXPERT || (dm->grouped && !same_module(m, m - 1)));
		for (int64_t x = x0; starts && x < x0 + nx && !ret; x++)
			for (size_t k = m; k < NORDER && mcore_order[k].where == EXPERT && (!dm->grouped || same_module(k, m)) && !ret;
			     k++) {
				bool own = false;
				const tpc_dcp_entry *en = mtpl >= 0 ? mtp_entry(dm, mtpl, k) : layer_entry(dm, k, l, &own);
				if (en)
					ret = add_param(dm, ps, n, en, mtpl >= 0 ? -1 : l, own, x, e);
			}
	}
	return ret;
}

/* Table entry k (a decoder layer's) in MTP layer m's transformer layer:
 * its model entry, or NULL. */
static const tpc_dcp_entry *mtp_entry(const dpmap *dm, int64_t m, size_t k)
{
	char nm[512];
	snprintf(nm, sizeof(nm), "mtp.layers.%lld.transformer_layer.%s", (long long)m, mcore_order[k].key + 15);
	return model_entry(dm->m, nm);
}

/* The multi-token prediction layers' parameters into ps, layer by layer,
 * each in the table's order (MTP_BODY: the decoder layer's entries, under
 * the MTP layer's 'transformer_layer.'): the dense part's (its routed
 * experts too when no expert-parallel optimizer holds them), or the expert
 * part's, rank ep's experts only. */
static int add_mtp(const dpmap *dm, dparam *ps, size_t *n, int64_t ep, tpc_err *e)
{
	char nm[512];
	int ret = 0;
	int64_t nx = dm->nexperts / dm->ep;
	for (int64_t m = 0; m < dm->mtp && !ret; m++)
		for (size_t k = 0; k < NORDER && !ret; k++) {
			int where = mcore_order[k].where;
			const tpc_dcp_entry *en = NULL;
			if (where == MTP && !dm->expert) {
				snprintf(nm, sizeof(nm), "mtp.layers.%lld.%s", (long long)m, mcore_order[k].key + 11);
				if ((en = model_entry(dm->m, nm)))
					ret = add_param(dm, ps, n, en, -1, false, -1, e);
			}
			for (size_t j = 0; where == MTP_BODY && j < NORDER && !ret; j++) {
				int wj = mcore_order[j].where;
				if (wj == EXPERT && mcore_order[j - 1].where != EXPERT && (dm->expert || !dm->chained))
					ret = add_experts(dm, ps, n, -1, m, dm->expert ? ep * nx : 0, nx, e);
				else if (wj == LAYER && !dm->expert && (en = mtp_entry(dm, m, j)))
					ret = add_param(dm, ps, n, en, -1, false, -1, e);
			}
		}
	return ret;
}

/* Model chunk v of stage p: its first layer (*l0) and layer count (*n),
 * even or uneven stages (tpc_megatron_chunk_layers; uneven_stages checks
 * the counts divide). */
static void chunk_layers(const dpmap *dm, int64_t p, int64_t v, int64_t *l0, int64_t *n)
{
	tpc_megatron_chunk_layers(dm->layers, dm->pp, dm->vpp, dm->first, dm->last, p, v, l0, n);
}

/* Model chunk v of pipeline stage pp (and for the expert part, expert-
 * parallel rank ep): its parameters in named_parameters order into *out
 * (*n of them). Chunk v of stage pp holds layers from v L / VPP + pp L /
 * (PP VPP) (transformer_layer.py:202, get_transformer_layer_offset; uneven
 * stages: chunk_layers), the embedding chunk 0 of stage 0, the final norm
 * and output layer the last chunk of the last stage (with tied embeddings
 * over several stages, the output layer's copy of them: GPTModel
 * allocates its weight where it is no pre-process stage,
 * gpt_model.py:277, and language_module.py:258-283 keeps it in sync, in a
 * bucket of its own). The dense part has a layer's routed experts
 * only when no expert-parallel optimizer holds them (expert parallelism 1:
 * all of them, in the dense buffer); the expert part has only them, rank
 * ep's E / EP. */
static int stage_params(const dpmap *dm, int64_t pp, int64_t v, int64_t ep, dparam **out, size_t *n, tpc_err *e)
{
	int64_t per = dm->layers / (dm->pp * dm->vpp), nx = dm->nexperts / dm->ep;
	int64_t l0 = tpc_megatron_chunk_first_layer(dm->layers, dm->pp, dm->vpp, pp, v);
	if (dm->first > 0 || dm->last > 0) {
		chunk_layers(dm, pp, v, &l0, &per);
	}
	size_t cap = 2; /* every tensor the entries hold (their layers and experts checked), the copy */
	for (size_t i = 0; i < dm->m->n; i++)
		cap += (size_t)(dm->m->e[i].unstacked > 0 ? dm->m->e[i].unstacked : 1) *
		       (size_t)(dm->m->e[i].experts > 0 ? dm->m->e[i].experts : 1);
	dparam *ps = tpc_calloc(cap, sizeof(dparam));
	int ret = ps ? 0 : tpc_err_nomem(e);
	*n = 0;
	for (int pass = FIRST; pass <= LAST && !ret; pass++) {
		if (pass == FIRST && pp > 0 && pp == dm->pp - 1 && dm->mtp && !dm->expert) {
			/* the MTP stage's own copy of the word embeddings, first (GPTModel builds
			 * it where mtp_process, gpt_model.py:173-181; its save ties it to the
			 * first stage's key, language_module.py:441-452): proved, no state */
			const tpc_dcp_entry *we = model_entry(dm->m, "embedding.word_embeddings.weight");
			if (we && !(ret = add_param(dm, ps, n, we, -1, false, -1, e)))
				ps[*n - 1].copy = true;
		}
		if ((pass == FIRST && (pp != 0 || v != 0)) || (pass == LAST && (pp != dm->pp - 1 || v != dm->vpp - 1)))
			continue;
		if (dm->expert && pass == FIRST)
			continue;
		for (int64_t l = pass == LAYER ? l0 : -1; l < (pass == LAYER ? l0 + per : 0) && !ret; l++) {
			bool experts_done = false;
			for (size_t k = 0; k < NORDER && !ret; k++) {
				int where = mcore_order[k].where;
				bool own;
				const tpc_dcp_entry *en = layer_entry(dm, k, l, &own);
				if (pass == LAST && where == MTP_BODY) /* the MTP layers, between the final norm and the output layer */
					ret = add_mtp(dm, ps, n, ep, e);
				if (!en || (where != pass && !(pass == LAYER && where == EXPERT)))
					continue;
				if (where == EXPERT && !experts_done && (dm->expert || !dm->chained))
					ret = add_experts(dm, ps, n, l, -1, dm->expert ? ep * nx : 0, nx, e);
				if (where == EXPERT) {
					experts_done = true;
					continue;
				}
				if (!dm->expert)
					ret = add_param(dm, ps, n, en, l, own, -1, e);
			}
		}
		if (pass == LAST && !dm->expert && !ret && dm->tied && dm->pp > 1) {
			const tpc_dcp_entry *we = model_entry(dm->m, "embedding.word_embeddings.weight");
			if (!we)
				ret = tpc_err_at(e, TPC_EINPUT, dm->path, NULL,
						 "tied embeddings with no embedding.word_embeddings.weight, which the last stage's output layer copies");
			else if (!(ret = add_param(dm, ps, n, we, -1, false, -1, e)))
				ps[*n - 1].copy = true;
		}
	}
	if (ret) {
		for (size_t j = 0; j < *n; j++)
			free(ps[j].box);
		free(ps);
		ps = NULL;
		*n = 0;
	}
	*out = ps;
	return ret;
}

/* ---- one rank's buffer ---- */

static int count_leaves(const tpc_tensor *t)
{
	int n = t->nparts ? 0 : 1;
	for (int k = 0; k < t->nparts; k++)
		n += count_leaves(&t->parts[k]);
	return n;
}

/* The 1-D views that make [a, a + n) of a 1-D tensor (a view, or a
 * composite of them along dim 0, as the reader joins a bucket's chunks). */
static int flat_pieces(const tpc_tensor *t, int64_t a, int64_t n, tpc_tensor *out, int *np, int cap)
{
	if (!t->nparts) {
		if (*np >= cap || t->ndim != 1 || tpc_tensor_narrow(&out[*np], t, 0, a, n))
			return -1;
		out[*np].storage = -1;
		out[(*np)++].storage_offset = 0;
		return 0;
	}
	int64_t base = 0;
	for (int k = 0; k < t->nparts; k++) {
		int64_t len = t->parts[k].ndim == 1 ? t->parts[k].shape[0] : 0;
		int64_t lo = a > base ? a : base, hi = a + n < base + len ? a + n : base + len;
		if (hi > lo && flat_pieces(&t->parts[k], lo - base, hi - lo, out, np, cap))
			return -1;
		base += len;
	}
	return 0;
}

/* numel elements at `at` of bucket tensor bt, in shape[nd]. */
static int local_state(const tpc_tensor *bt, int64_t at, const int64_t *shape, int nd, tpc_tensor *out)
{
	int cap = count_leaves(bt) + 1, np = 0;
	tpc_tensor *pc = tpc_calloc((size_t)cap, sizeof(*pc));
	int ret = pc ? flat_pieces(bt, at, shape_numel(shape, nd), pc, &np, cap) : -1;
	if (!ret)
		ret = tpc_tensor_init_flat(out, nd, shape, pc, np);
	for (int k = 0; k < np; k++)
		tpc_tensor_release(&pc[k]);
	free(pc);
	return ret;
}

/* "tp T, pp P" of dense group g, "etp T, ep E, pp P ..." of an expert one */
static void group_desc(const dpmap *dm, int64_t g, char *b, size_t n)
{
	if (dm->expert)
		snprintf(b, n, "etp %lld, ep %lld, pp %lld of the expert-parallel optimizer", (long long)(g % dm->tp),
			 (long long)(g / dm->tp % dm->ep), (long long)(g / dm->tp / dm->ep));
	else
		snprintf(b, n, "tp %lld, pp %lld", (long long)(g % dm->tp), (long long)(g / dm->tp));
}

static void list_str(tpc_buf *b, const int64_t *v, size_t n)
{
	tpc_buf_addf(b, "[");
	for (size_t i = 0; i < n && i < 16; i++)
		tpc_buf_addf(b, "%s%lld", i ? ", " : "", (long long)v[i]);
	tpc_buf_addf(b, "%s]", n > 16 ? ", ..." : "");
}

/* The refusal when the parameters do not fill the save's buckets. */
static int misfit(const dpmap *dm, int64_t g, const dparam *ps, size_t n, const int64_t *u, size_t nb, size_t bad,
		  size_t bb, int64_t fill, const int64_t *numel, tpc_err *e)
{
	tpc_buf s = TPC_BUF_INIT;
	char gd[96];
	group_desc(dm, g, gd, sizeof(gd));
	list_str(&s, u, nb);
	int ret;
	if (bad < n && bb < nb)
		ret = tpc_err_at(e, TPC_EINPUT, dm->path, dm->ck->t[ps[bad].ix].name,
				 "DP group %lld (%s): in Megatron's parameter order its %lld elements here would end at %lld of bucket %zu, past the %lld elements per_bucket_numel_unpadded %s gives it: another layout (frozen parameters, another parameter order); not mapped",
				 (long long)g, gd, (long long)numel[bad], (long long)fill,
				 bb, (long long)u[bb], s.p ? s.p : "?");
	else if (bad < n)
		ret = tpc_err_at(e, TPC_EINPUT, dm->path, dm->ck->t[ps[bad].ix].name,
				 "DP group %lld (%s): in Megatron's parameter order it lies past the %zu buckets per_bucket_numel_unpadded %s records: another layout (frozen parameters, another parameter order); not mapped",
				 (long long)g, gd, nb, s.p ? s.p : "?");
	else
		ret = tpc_err_at(e, TPC_EINPUT, dm->path, NULL,
				 "DP group %lld (%s): its %zu parameters fill %lld elements of bucket %zu and end there, yet per_bucket_numel_unpadded records %s: another layout (frozen parameters, another parameter order); not mapped",
				 (long long)g, gd, n, (long long)fill, bb,
				 s.p ? s.p : "?");
	tpc_buf_release(&s);
	return ret;
}

/* Is p in a bucket of its own (the tied embeddings, either copy)? */
static bool is_shared(const dpmap *dm, const dparam *p)
{
	if (p->layer < 0 && dm->mtp && dm->pp > 1) /* untied with MTP over stages: both embeddings' copies
						      (language_module.py:258-291) */
		return p->copy || !strcmp(p->en->fqn, "embedding.word_embeddings.weight");
	return p->layer < 0 && tpc__mcore_shared_embedding(p->copy ? "output_layer.weight" : p->en->fqn, !dm->tied, dm->pp);
}

/* Tp rank t of stage pp: its buffer laid out in the save's buckets and
 * each parameter's state (loc[j * 3 + k]) in its local shape. */
static int rank_states(const dpmap *dm, int64_t g, int64_t v, int64_t t, const dparam *ps, size_t n, tpc_tensor *loc,
		       tpc_err *e)
{
	int64_t shape[TPC_MAX_NDIM];
	const tpc_value *sv = NULL;
	size_t bad = 0, bb = 0, nb = 0;
	int64_t *numel = tpc_calloc(4 * n + 2, sizeof(int64_t)), *bk = numel + n, *at = numel + 2 * n, *got = numel + 3 * n;
	int64_t *u = NULL;
	bool *shared = tpc_calloc(n + 1, sizeof(bool)); /* a tied embedding: alone across stages */
	int ret = numel && shared ? saved_sizes(dm, g, v, &sv, e) : tpc_err_nomem(e);
	if (!ret && !(u = tpc_calloc(sv->n + 1, sizeof(int64_t))))
		ret = tpc_err_nomem(e);
	for (size_t b = 0; !ret && b < sv->n; b++)
		u[nb++] = sv->items[b]->ival;
	for (size_t j = 0; !ret && j < n; j++) {
		local_shape(&ps[j], t, dm->tp, shape);
		numel[j] = shape_numel(shape, ps[j].en->ndim - ps[j].s);
		shared[j] = is_shared(dm, &ps[j]);
	}
	if (!ret && tpc__mcore_layout(numel, shared, n, 0, u, nb, bk, at, got, &bb, &bad))
		ret = misfit(dm, g, ps, n, u, nb, bad, bb, got[bb], numel, e);
	for (size_t b = 0; !ret && b < dm->maxb; b++)
		for (int k = 0; k < 3 && !ret; k++) {
			int64_t ix = *bslot(dm, g, v, b, k);
			const tpc_tensor *bt = ix >= 0 ? &dm->ck->t[ix] : NULL;
			if (b >= nb && bt)
				ret = tpc_err_at(e, TPC_EINPUT, dm->path, bt->name, "a bucket beyond the %zu of DP group %lld", nb, (long long)g);
			else if (b < nb && (!bt || bt->ndim != 1 || bt->dtype != TPC_F32 || bt->shape[0] != u[b]))
				ret = tpc_err_at(e, TPC_EINPUT, dm->path, NULL,
						 "DP group %lld's bucket %zu has no %s of %lld f32 elements (its per_bucket_numel_unpadded)",
						 (long long)g, b, state_keys[k], (long long)u[b]);
		}
	for (size_t j = 0; !ret && j < n; j++) {
		local_shape(&ps[j], t, dm->tp, shape);
		for (int k = 0; k < 3 && !ret; k++) {
			int64_t ix = *bslot(dm, g, v, (size_t)bk[j], k);
			if (local_state(&dm->ck->t[ix], at[j], shape, ps[j].en->ndim - ps[j].s, &loc[j * 3 + (size_t)k]))
				ret = TPC_CORRUPT(e, dm->path, -1, dm->ck->t[ix].name, "cannot take %lld elements at %lld of it",
						  (long long)numel[j], (long long)at[j]);
		}
	}
	free(numel);
	free(shared);
	free(u);
	return ret;
}

/* dp_zero_gather_scatter: tp rank t's buffer of model chunk v in DP group
 * g's ShardedObject '...dp_group_idx_G.param_state', which its DP rank 0
 * saves (sharded_param_state_dp_zero, distrib_optimizer.py:1659-1690):
 * get_parameter_state_dp_zero's dict (:1262-1411), each buffer's buckets
 * coalesced as in a legacy distrib_optim.pt (gbuf v: the optimizer chains
 * the chunks' buffers, :714-726). The buckets are not recorded: laid out by
 * the args' bucket size (none past the first pipeline stage, nor past the
 * first model chunk: distributed_data_parallel.py:164-171, training/
 * training.py:2504-2514), their total checked against numel_unpadded; *nb
 * counts them. */
static int zero_rank_states(const dpmap *dm, int64_t g, int64_t pp, int64_t v, int64_t t, const dparam *ps, size_t n,
			    tpc_tensor *loc, size_t *nb, tpc_err *e)
{
	char nm[160], gd[96];
	const tpc_value *o = group_object(dm, g, "param_state");
	int64_t ix[3], unpadded = 0, bucket = 0, total = 0, shape[TPC_MAX_NDIM];
	size_t nbk = 0;
	snprintf(nm, sizeof(nm), "%s%lld.param_state", dm->pre, (long long)g);
	group_desc(dm, g, gd, sizeof(gd));
	if (!o)
		return tpc_err_at(e, TPC_EINPUT, dm->path, NULL,
				  "no '%s': DP group %lld's (%s) optimizer state, which a dp_zero_gather_scatter save keeps on the group's DP rank 0; not mapped",
				  nm, (long long)g, gd);
	int ret = tpc__mcore_world_tensors(dm->ck, object_data(o), dm->vpp, v, dm->path, nm, ix, &unpadded, e);
	if (!ret)
		ret = tpc__mcore_bucket_size(dm->mo->args, pp + v, &bucket, dm->mo->common, e);
	int64_t *numel = tpc_calloc(2 * n + 2, sizeof(int64_t)), *pos = numel ? numel + n + 1 : NULL;
	bool *shared = tpc_calloc(n + 1, sizeof(bool));
	if (!ret && (!numel || !shared))
		ret = tpc_err_nomem(e);
	for (size_t j = 0; !ret && j < n; j++) {
		local_shape(&ps[j], t, dm->tp, shape);
		numel[j] = shape_numel(shape, ps[j].en->ndim - ps[j].s);
		shared[j] = is_shared(dm, &ps[j]);
	}
	if (!ret && tpc__mcore_coalesced(numel, shared, n, bucket, pos, &total, &nbk))
		ret = tpc_err_nomem(e);
	if (!ret && total != unpadded)
		ret = tpc_err_at(e, TPC_EINPUT, dm->path, nm,
				 "DP group %lld (%s): its %zu parameters take %lld elements in Megatron's buffer layout (%zu bucket%s of args' bucket size %lld, 64-element aligned), its param_state holds %lld (numel_unpadded): another layout (frozen parameters, another bucket size or Megatron); not mapped",
				 (long long)g, gd, n, (long long)total, nbk, nbk == 1 ? "" : "s", (long long)bucket, (long long)unpadded);
	for (size_t j = 0; !ret && j < n; j++) {
		local_shape(&ps[j], t, dm->tp, shape);
		for (int k = 0; k < 3 && !ret; k++)
			if (local_state(&dm->ck->t[ix[k]], pos[j], shape, ps[j].en->ndim - ps[j].s, &loc[j * 3 + (size_t)k]))
				ret = TPC_CORRUPT(e, dm->path, -1, nm, "cannot take %lld elements at %lld of its %s", (long long)numel[j],
						  (long long)pos[j], state_keys[k]);
	}
	*nb += ret ? 0 : nbk;
	free(numel);
	free(shared);
	return ret;
}

/* ---- the proof: every master rounds to its weight ---- */

/* The refusal: element i of box k of p, whose master f does not round to
 * the model's stored element (bits `want`). */
static int mismatch(const dpmap *dm, const dparam *p, int64_t g, size_t k, int64_t i, float f, uint32_t want,
		    tpc_err *e)
{
	const tpc_tensor *model = &dm->ck->t[p->ix];
	const tpc_dcp_chunk *c = &p->en->c[p->box[k]];
	int s = p->s, nd = p->en->ndim - s;
	int64_t flat = 0, rem = i, coord[TPC_MAX_NDIM];
	char gd[96];
	group_desc(dm, g, gd, sizeof(gd));
	for (int d = nd; d-- > 0;) { /* element i of the box as an element of the layer's tensor */
		coord[d] = rem % c->size[s + d] + c->off[s + d];
		rem /= c->size[s + d];
	}
	for (int d = 0; d < nd; d++)
		flat = flat * p->en->shape[s + d] + coord[d];
	float mf;
	if (model->dtype == TPC_F32)
		memcpy(&mf, &want, 4);
	else
		mf = model->dtype == TPC_BF16 ? tpc_bf16_to_f32((uint16_t)want) : tpc_f16_to_f32((uint16_t)want);
	return tpc_err_at(e, TPC_EINPUT, dm->path, model->name,
			  "element %lld: the distributed optimizer's master in DP group %lld (%s) is %.9g, %s %s, the model holds %.9g: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped",
			  (long long)flat, (long long)g, gd, (double)f,
			  model->dtype == TPC_F32 ? "and" : "which rounds differently to", tpc_dtype_name(model->dtype), (double)mf);
}

/* Box k (of DP group g's chunks) of parameter p: the master's part of it
 * (master: the rank's local master, the box at pos along p->d) against the
 * model's (tpc__mcore_prove). */
static int prove_box(const dpmap *dm, const dparam *p, int64_t g, size_t k, const tpc_tensor *master, int64_t pos,
		     tpc_err *e)
{
	const tpc_tensor *model = &dm->ck->t[p->ix];
	const tpc_dcp_chunk *c = &p->en->c[p->box[k]];
	int s = p->s, ret = 0;
	tpc_tensor mv, lv;
	memset(&mv, 0, sizeof(mv));
	memset(&lv, 0, sizeof(lv));
	if (p->d >= 0 ? tpc_tensor_narrow(&mv, model, p->d, c->off[s + p->d], c->size[s + p->d]) ||
				tpc_tensor_narrow(&lv, master, p->d, pos, c->size[s + p->d])
		      : tpc_tensor_copy(&mv, model) || tpc_tensor_copy(&lv, master))
		ret = tpc_err_nomem(e);
	int64_t at = -1;
	float f = 0;
	uint32_t want = 0;
	if (!ret && !(ret = tpc__mcore_prove(dm->ck, &lv, &mv, &at, &f, &want, e)) && at >= 0)
		ret = mismatch(dm, p, g, k, at, f, want, e);
	tpc_tensor_release(&mv);
	tpc_tensor_release(&lv);
	return ret;
}

/* Every chunk tp rank t holds of p, against its master. */
static int prove(const dpmap *dm, const dparam *p, int64_t t, int64_t g, const tpc_tensor *master, tpc_err *e)
{
	const tpc_tensor *model = &dm->ck->t[p->ix];
	int s = p->s;
	int64_t pos = 0;
	if (model->dtype != TPC_BF16 && model->dtype != TPC_F16 && model->dtype != TPC_F32)
		return tpc_err_at(e, TPC_EINPUT, dm->path, model->name,
				  "is %s: its master cannot be checked against it (bf16, f16 or f32), so the parameter order cannot be proved; not mapped",
				  tpc_dtype_name(model->dtype));
	for (size_t k = 0; k < p->nbox; k++) {
		if (!rank_has(p, k, t, dm->tp))
			continue;
		int ret = prove_box(dm, p, g, k, master, pos, e);
		if (ret)
			return ret;
		pos += p->d >= 0 ? p->en->c[p->box[k]].size[s + p->d] : 0;
	}
	return 0;
}

/* ---- model space ---- */

/* Parameter j's state k in the model's shape, from every rank's local one
 * (loc[(t * n + j) * 3 + k]), added as "optimizer.state.KEY.NAME". */
static int add_state(const dpmap *dm, const dparam *p, const tpc_tensor *loc, size_t n, size_t j, int k, tpc_err *e)
{
	int s = p->s, ret = 0;
	tpc_tensor whole;
	char nm[1200];
	memset(&whole, 0, sizeof(whole));
	snprintf(nm, sizeof(nm), "optimizer.state.%s.%s", state_keys[k], dm->ck->t[p->ix].name);
	if (p->nbox == 1) {
		if (tpc_tensor_copy(&whole, &loc[j * 3 + (size_t)k]))
			return tpc_err_nomem(e);
	} else {
		tpc_tensor *parts = tpc_calloc(p->nbox + 1, sizeof(*parts));
		int64_t *pos = tpc_calloc((size_t)dm->tp + 1, sizeof(int64_t));
		ret = parts && pos ? 0 : tpc_err_nomem(e);
		for (size_t b = 0; !ret && b < p->nbox; b++) {
			size_t t = b % (size_t)dm->tp;
			int64_t len = p->en->c[p->box[b]].size[s + p->d];
			if (tpc_tensor_narrow(&parts[b], &loc[(t * n + j) * 3 + (size_t)k], p->d, pos[t], len))
				ret = tpc_err_nomem(e);
			pos[t] += len;
		}
		free(pos);
		if (parts && tpc_tensor_cat_release(&whole, parts, (int)p->nbox, p->d, ret) && !ret)
			ret = tpc_err_nomem(e);
	}
	int64_t ix = ret ? -1 : tpc_ckpt_add_copy(dm->ck, nm, &whole, e);
	if (!ret && ix < 0)
		ret = (int)ix;
	tpc_tensor_release(&whole);
	return ret;
}

/* Model chunk v of pipeline stage pp (of expert-parallel rank ep): every
 * tp rank's buffer mapped, proved, and its parameters' state added in model
 * space. */
static int map_stage(const dpmap *dm, int64_t pp, int64_t v, int64_t ep, size_t *nbuckets, tpc_err *e)
{
	dparam *ps = NULL;
	size_t n = 0, tp = (size_t)dm->tp;
	int64_t g0 = dm->tp * (ep + dm->ep * pp); /* tp rank t's group: g0 + t */
	int ret = stage_params(dm, pp, v, ep, &ps, &n, e);
	tpc_tensor *loc = ret ? NULL : tpc_calloc(tp * n * 3 + 1, sizeof(*loc));
	if (!ret && !loc)
		ret = tpc_err_nomem(e);
	for (size_t t = 0; !ret && t < tp; t++)
		ret = dm->mo->dpz ? zero_rank_states(dm, g0 + (int64_t)t, pp, v, (int64_t)t, ps, n, loc + t * n * 3, nbuckets, e)
				  : rank_states(dm, g0 + (int64_t)t, v, (int64_t)t, ps, n, loc + t * n * 3, e);
	for (size_t t = 0; !ret && t < tp; t++)
		for (size_t j = 0; j < n && !ret; j++)
			ret = prove(dm, &ps[j], (int64_t)t, g0 + (int64_t)t, &loc[(t * n + j) * 3], e);
	for (size_t j = 0; !ret && j < n; j++)
		for (int k = 0; k < 3 && !ret && !ps[j].copy; k++)
			ret = add_state(dm, &ps[j], loc, n, j, k, e);
	for (size_t t = 0; !ret && !dm->mo->dpz && t < tp; t++)
		for (size_t b = 0; b < dm->maxb; b++)
			*nbuckets += *bslot(dm, g0 + (int64_t)t, v, b, 0) >= 0;
	for (size_t i = 0; loc && i < tp * n * 3; i++)
		tpc_tensor_release(&loc[i]);
	free(loc);
	for (size_t j = 0; j < n; j++)
		free(ps[j].box);
	free(ps);
	return ret;
}

/* Uneven pipeline stages from args (decoder_first/last_pipeline_num_layers,
 * Megatron's num_layers_in_first/last_pipeline_stage), checked as
 * Megatron's TransformerConfig checks them: the stages between take the
 * rest evenly. */
static int uneven_stages(dpmap *dm, tpc_err *e)
{
	const char *cp = dm->mo->common;
	tpc__mcore_arg_int(dm->mo->args, "decoder_first_pipeline_num_layers", -1, &dm->first);
	tpc__mcore_arg_int(dm->mo->args, "decoder_last_pipeline_num_layers", -1, &dm->last);
	if (dm->pp == 1 || (dm->first < 0 && dm->last < 0)) { /* one stage holds them all */
		dm->first = dm->last = -1;
		return 0;
	}
	int64_t f = dm->first > 0 ? dm->first : 0, t = dm->last > 0 ? dm->last : 0;
	int64_t mid = dm->pp - (dm->first > 0) - (dm->last > 0), rest = dm->layers - f - t;
	if (dm->first == 0 || dm->last == 0 || rest < 0 || (mid > 0 ? rest % mid : rest) || f % dm->vpp || t % dm->vpp ||
	    (mid > 0 && rest / mid % dm->vpp)) {
		char fs[24] = "unset", ls[24] = "unset";
		if (dm->first >= 0)
			snprintf(fs, sizeof(fs), "%lld", (long long)dm->first);
		if (dm->last >= 0)
			snprintf(ls, sizeof(ls), "%lld", (long long)dm->last);
		return tpc_err_at(e, TPC_EINPUT, cp, NULL,
				  "decoder_first_pipeline_num_layers %s and decoder_last_pipeline_num_layers %s of %lld layers over %lld stages (x %lld model chunks): not stages Megatron builds (each given one at least a layer, the stages between the rest evenly, each stage's layers a multiple of its model chunks)",
				  fs, ls, (long long)dm->layers, (long long)dm->pp, (long long)dm->vpp);
	}
	return 0;
}

/* The set's sizes from common.pt's args, and what is not read. */
static int set_sizes(dpmap *dm, tpc_err *e)
{
	const tpc_value *a = dm->mo->args;
	const char *cp = dm->mo->common;
	int64_t untie, v;
	int ret;
	static const char *const uneven[] = {"pipeline_model_parallel_layout"};
	static const char *const shifted[] = {"account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
					      "overlap_param_gather_with_optimizer_step"};
	tpc__mcore_arg_int(a, "tensor_model_parallel_size", 1, &dm->tp);
	tpc__mcore_arg_int(a, "pipeline_model_parallel_size", 1, &dm->pp);
	tpc__mcore_arg_int(a, "untie_embeddings_and_output_weights", 0, &untie);
	dm->tied = !untie;
	if (!tpc__mcore_arg_int(a, "num_layers", 0, &dm->layers) || dm->layers < 1 || dm->layers > (1 << 20))
		return tpc_err_at(e, TPC_EINPUT, cp, NULL, "args has no num_layers, which the pipeline stages split: the dp_reshardable buckets cannot be mapped");
	tpc__mcore_arg_int(a, "virtual_pipeline_model_parallel_size", 1, &dm->vpp);
	if (dm->tp < 1 || dm->pp < 1 || dm->vpp < 1 || dm->tp > 4096 || dm->pp > 4096 || dm->vpp > 4096 ||
	    dm->tp * dm->pp > 65536)
		return tpc_err_at(e, TPC_EINPUT, cp, NULL, "tp %lld x pp %lld (x %lld model chunks): not a set tpconv maps",
				  (long long)dm->tp, (long long)dm->pp, (long long)dm->vpp);
	if ((ret = uneven_stages(dm, e)))
		return ret;
	if (dm->first < 0 && dm->last < 0 && dm->layers % (dm->pp * dm->vpp))
		return tpc_err_at(e, TPC_EINPUT, cp, NULL,
				  "tp %lld x pp %lld (x %lld model chunks) over %lld layers: not an even pipeline split, nor uneven stages args give (decoder_first/last_pipeline_num_layers)",
				  (long long)dm->tp, (long long)dm->pp, (long long)dm->vpp, (long long)dm->layers);
	for (size_t i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
		if (tpc__mcore_arg_int(a, shifted[i], 0, &v) && v)
			return tpc_err_at(e, TPC_EINPUT, cp, NULL,
					  "args.%s is set: its pipeline split or optimizer split is not mapped yet", shifted[i]);
	for (size_t i = 0; i < sizeof(uneven) / sizeof(uneven[0]); i++) {
		const tpc_value *x = a && a->kind == TPC_V_CALL && a->n >= 3 && a->items[2]->kind == TPC_V_DICT
					     ? tpc_value_get(a->items[2], uneven[i]) : NULL;
		if (x && x->kind != TPC_V_NONE)
			return tpc_err_at(e, TPC_EINPUT, cp, NULL, "args.%s is set: pipeline stages of other than num_layers / pp layers are not mapped yet", uneven[i]);
	}
	if (dm->tied && model_entry(dm->m, "output_layer.weight"))
		return tpc_err_at(e, TPC_EINPUT, cp, NULL,
				  "args say the embeddings are tied (no untie_embeddings_and_output_weights), yet the save has output_layer.weight");
	tpc__mcore_arg_int(a, "mtp_num_layers", 0, &dm->mtp);
	if (dm->mtp < 0 || dm->mtp > 4096)
		return tpc_err_at(e, TPC_EINPUT, cp, NULL, "args.mtp_num_layers %lld: not a count of layers", (long long)dm->mtp);
	if (dm->mtp && dm->pp > 1 && (dm->vpp > 1 || dm->tied))
		return tpc_err_at(e, TPC_EINPUT, cp, NULL,
				  "%lld multi-token prediction layers over %lld pipeline stages with %s: not mapped yet",
				  (long long)dm->mtp, (long long)dm->pp, dm->tied ? "tied embeddings (the MTP stage's output layer beside its embedding copy)" : "virtual pipeline stages");
	if (dm->mtp && tpc__mcore_arg_int(a, "mtp_use_repeated_layer", 0, &v) && v)
		return tpc_err_at(e, TPC_EINPUT, cp, NULL,
				  "args.mtp_use_repeated_layer is set (one MTP layer for every depth): not mapped yet");
	if (dm->tied && dm->pp == 1 && dm->vpp > 1)
		return tpc_err_at(e, TPC_EINPUT, cp, NULL,
				  "tied embeddings over %lld model chunks of one pipeline stage (the last chunk's copy of them, in no bucket of its own): not mapped yet",
				  (long long)dm->vpp);
	return 0;
}

/* The expert-parallel sizes (expert TP defaults to TP, parallel_state.py:
 * 873-874), checked against the model's experts. */
static int expert_sizes(dpmap *dm, tpc_err *e)
{
	const tpc_value *a = dm->mo->args;
	int64_t etp;
	tpc__mcore_arg_int(a, "num_experts", 0, &dm->nexperts);
	tpc__mcore_arg_int(a, "expert_model_parallel_size", 1, &dm->ep);
	tpc__mcore_arg_int(a, "expert_tensor_parallel_size", dm->tp, &etp);
	int64_t g = 0;
	dm->grouped = tpc__mcore_arg_int(a, "moe_grouped_gemm", 0, &g) && g;
	if (dm->nexperts < 0 || dm->nexperts > 65536 || dm->ep < 1 || dm->ep > 4096 || etp < 1 || etp > 4096 ||
	    (dm->nexperts && dm->nexperts % dm->ep))
		return tpc_err_at(e, TPC_EINPUT, dm->mo->common, NULL, "%lld experts over expert parallelism %lld (expert tp %lld): not an even split",
				  (long long)dm->nexperts, (long long)dm->ep, (long long)etp);
	if (dm->expert)
		dm->tp = etp;
	else
		dm->ep = 1;
	return 0;
}

/* One distributed optimizer's part: its buckets mapped, its param groups
 * into *pg; nb counts the buckets. */
static int map_part(dpmap *dm, const tpc_value **pg, size_t *nb, tpc_err *e)
{
	int ret = set_sizes(dm, e);
	if (!ret)
		ret = expert_sizes(dm, e);
	if (!ret)
		ret = check_known(dm, e);
	if (!ret)
		ret = dm->mo->dpz ? zero_objects(dm, e) : find_buckets(dm, e);
	for (int64_t pp = 0; !ret && pp < dm->pp; pp++)
		for (int64_t v = 0; !ret && v < dm->vpp; v++)
			for (int64_t ep = 0; !ret && ep < dm->ep; ep++)
				ret = map_stage(dm, pp, v, ep, nb, e);
	const tpc_value *o = ret ? NULL : object_data(group_object(dm, 0, "optimizer"));
	*pg = o && o->kind == TPC_V_DICT ? tpc_value_get(o, "param_groups") : NULL;
	if (!ret && (!*pg || ((*pg)->kind != TPC_V_LIST && (*pg)->kind != TPC_V_TUPLE) || !(*pg)->n))
		ret = tpc_err_at(e, TPC_EINPUT, dm->path, NULL,
				 "no '%s0.optimizer' holding param_groups (where a dp_reshardable save keeps them): the optimizer cannot be resumed",
				 dm->pre);
	for (size_t g = 0; !ret && g < (*pg)->n; g++)
		if ((*pg)->items[g]->kind != TPC_V_DICT)
			ret = tpc_err_at(e, TPC_EINPUT, dm->path, NULL, "%s0.optimizer's param_groups[%zu] is not a dict", dm->pre, g);
	free(dm->bix);
	dm->bix = NULL;
	return ret;
}

int tpc__mcore_dp_map(tpc__mcore_optim *mo, tpc_ckpt *ck, const tpc_dcp_meta *m, tpc_value *const *vals,
		      const char *path, tpc_err *e)
{
	dpmap dm[2];
	const tpc_value *pg[2] = {NULL, NULL};
	size_t nb[2] = {0, 0}, nparts = mo->chained ? 2 : 1;
	static const char *const pre[3] = {"optimizer.distributed.dp_group_idx_", "chained_0.optimizer.distributed.dp_group_idx_",
					   "chained_1.optimizer.distributed.dp_group_idx_"};
	int ret = 0;
	for (size_t k = 0; k < nparts && !ret; k++) {
		memset(&dm[k], 0, sizeof(dm[k]));
		dm[k].mo = mo;
		dm[k].ck = ck;
		dm[k].m = m;
		dm[k].vals = vals;
		dm[k].path = path;
		dm[k].chained = mo->chained;
		dm[k].expert = k == 1;
		dm[k].pre = pre[mo->chained ? k + 1 : 0];
		ret = map_part(&dm[k], &pg[k], &nb[k], e);
	}
	tpc_value *all = ret ? NULL : tpc_value_new(TPC_V_LIST);
	if (!ret && !all)
		ret = tpc_err_nomem(e);
	for (size_t k = 0; k < nparts && !ret; k++)
		for (size_t g = 0; g < pg[k]->n && !ret; g++)
			if (tpc_value_append(all, tpc_value_ref(pg[k]->items[g])))
				ret = tpc_err_nomem(e);
	char what[200], chunks[48] = "", experts[80] = "";
	if (!ret && dm[0].vpp > 1)
		snprintf(chunks, sizeof(chunks), " of %lld model chunks", (long long)dm[0].vpp);
	if (!ret && nparts == 2)
		snprintf(experts, sizeof(experts), " and %lld expert-parallel ones (%zu buckets)",
			 (long long)(dm[1].tp * dm[1].ep * dm[1].pp), nb[1]);
	if (!ret)
		snprintf(what, sizeof(what), "%s, %lld DP group%s%s, %zu buckets%s%s, every master checked against its weight",
			 mo->dpz ? "dp_zero_gather_scatter" : "dp_reshardable", (long long)(dm[0].tp * dm[0].pp),
			 dm[0].tp * dm[0].pp == 1 ? "" : "s", chunks, nb[0], experts, mo->dpz ? " by args' bucket size" : "");
	char *ty = ret ? NULL : tpc_strdup(what);
	if (!ret && !ty)
		ret = tpc_err_nomem(e);
	if (!ret) {
		free(mo->type);
		mo->type = ty;
		tpc_value_unref(mo->groups);
		mo->groups = all;
		all = NULL;
		mo->ndense = pg[0]->n;
	}
	tpc_value_unref(all);
	return ret;
}
