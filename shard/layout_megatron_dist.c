/* layout_megatron_dist.c - a Megatron-Core torch_dist checkpoint (the folder
 * megatron.core.dist_checkpointing loads; FRAMEWORKS.md §2b), for the dense
 * decoders whose family records list the layout (LLaMA's names).
 *
 * On disk (Megatron-LM at d98e8a6; megatron/training/checkpointing.py
 * get_checkpoint_name / read_metadata, megatron/core/dist_checkpointing/):
 *   latest_checkpointed_iteration.txt  "release", as the legacy layout and
 *                                      tools/checkpoint's savers write it; with
 *                                      optimizer state the iteration N, the
 *                                      folder iter_{N:07d}/ instead of release/
 *                                      (Megatron loads no optimizer from a
 *                                      release folder: layout_megatron_train.c)
 *   release/__R_0.distcp   rank R's items (R = pp_rank * tp + tp_rank, Megatron's
 *                          default order tp-cp-ep-dp-pp with dp 1), each a torch.save
 *                          of one bare tensor: DCP's FileSystemWriter bytes, as the
 *                          dcp layout writes them (layout_dcp.c)
 *   release/.metadata      torch's DCP Metadata over every rank's items: each
 *                          ShardedTensor key with its GLOBAL shape and one chunk
 *                          (offsets, sizes) per stored shard
 *   release/common.pt      torch.save of the common state dict: args (an
 *                          argparse.Namespace), checkpoint_version 3.0, iteration 0,
 *                          content_metadata {singleton_local_shards: False,
 *                          chained_optim_avoid_prefix: True}
 *                          (dist_checkpointing/strategies/common.py:15,29 save_common;
 *                          serialization.py:192-217 still loads it before the newer
 *                          "common_state" ShardedObject; training/checkpointing.py:
 *                          560-561 _build_sharded_state_dict_metadata)
 *   release/metadata.json  {"sharded_backend": "torch_dist", "sharded_backend_version": 1,
 *                          "common_backend": "torch", "common_backend_version": 1}
 *                          (dist_checkpointing/core.py:23-33 CheckpointingConfig,
 *                          69 save_config; older releases had the common_* fields,
 *                          newer ones drop unknown fields on load: core.py:64-65)
 *   tpconv-manifest.json, the model folder's companions   as every layout
 *
 * The keys and their sharding (Megatron's sharded_state_dict for GPTModel with
 * the TransformerEngine layer spec, homogeneous layers):
 *   - decoder layers are STACKED: one key per parameter, no layer number
 *     ("decoder.layers.self_attention.linear_qkv.weight"), global shape
 *     [num_layers, ...], layer L's chunk at offset L of the leading axis and its
 *     item [1, ...] (transformer/transformer_block.py:839-842 sharded_prefix and
 *     sharded_pp_offset (0, global_layer_offset, num_layers);
 *     dist_checkpointing/strategies/torch.py:188-189 the data viewed as
 *     (1,) * prepend_axis_num + local_shape). Global layer numbers: any pipeline
 *     split, even or not (--pp-layers), stores the same keys, only in other files.
 *   - tensor-parallel weights: one chunk per tp rank at tp_rank * local rows
 *     (columns for linear_proj / linear_fc2, axis 1), replica_id (0, 0, dp);
 *     replicated ones (the norms: linear_qkv.layer_norm_weight,
 *     linear_fc1.layer_norm_weight, final_layernorm) have replica_id
 *     (0, tp_rank, dp): only tp rank 0's copy is stored
 *     (transformer/utils.py:96-175 make_sharded_tensors_for_checkpoint).
 *   - linear_qkv: per query group [q_g; k_g; v_g] (the layout Megatron's
 *     loaders build: tools/checkpoint/loader_llama_mistral.py), tp splits the
 *     groups, so a rank's rows are one contiguous box; groups % tp == 0.
 *     Its bias (Qwen2's q/k/v biases, args add_qkv_bias) the same way, axis 0
 *     (extensions/transformer_engine.py:1611-1618 {"weight": 0, "bias": 0});
 *     Qwen3's self_attention.q_layernorm / k_layernorm [head_dim] replicated
 *     (attention.py:1734-1751; no sharded_state_dict of their own:
 *     transformer/utils.py:252-290), args qk_layernorm (tpc__mcore_attn_of).
 *   - linear_fc1 (SwiGLU): TWO chunks per rank, the gate half at
 *     tp_rank * f and the up half at tp * f + tp_rank * f of a global
 *     [gate; up] (transformer/mlp.py:427-497 apply_swiglu_sharded_factory,
 *     offset_w / offset_v with axis_frag * 2).
 *   - embedding.word_embeddings.weight and output_layer.weight: vocab rows
 *     padded to a multiple of 128 * tp (make_vocab_size_divisible_by), zeros;
 *     tied embeddings store no output_layer (pp 1: it is the embedding; pp > 1:
 *     the last stage's copy has replica_id (1, 0, dp),
 *     models/common/language_module/language_module.py:505-520).
 * Mixtures of experts (Mixtral, Qwen3-MoE: the records that list this layout;
 * transformer/moe/ at the same commit):
 *   - the MoE layer's norm is its own module, decoder.layers.pre_mlp_layernorm
 *     (models/gpt/gpt_layer_specs.py:282, a TENorm when num_experts), replicated;
 *     the router is mlp.router.weight [experts, hidden] (moe_layer.py:260,
 *     router.py:64), replicated over tp: replica_id (0, tp_rank, dp), tp rank 0
 *     stores it (no sharded_state_dict of its own: the default one,
 *     transformer/utils.py:96-175).
 *   - routed experts: ONE key per parameter for every expert,
 *     "decoder.layers.mlp.experts.experts.linear_fc1.weight" of global shape
 *     [num_layers, num_experts, 2 * ffn, hidden] (linear_fc2: [.., hidden,
 *     ffn]), expert e's chunk at offset e of axis 1 (its GLOBAL number: ep_rank
 *     * local experts + local index) and the item [1, 1, ...]. SequentialMLP
 *     (experts.py:1526-1566: local_experts.N renamed "experts." with the offset
 *     (ep axis, global index, num_global_experts)) and TEGroupedMLP
 *     (experts.py:1049-1091, "interchangable with SequentialMLP's": the
 *     grouped linear's weight0..N per gemm under the same key and offset,
 *     extensions/transformer_engine.py:2805-2856) store the SAME keys, chunks
 *     and bytes; the legacy GroupedMLP (weight1/weight2) no longer exists at
 *     d98e8a6. So one layout serves both: --moe-grouped-gemm only says in
 *     common.pt's args (moe_grouped_gemm, which --use-checkpoint-args takes
 *     back with force, training/checkpointing.py:2315) which module to build.
 *     With singleton_local_shards (false here, in common.pt) the keys would
 *     be per expert; tpconv does not write that form.
 *   - linear_fc1 per expert: gate and up halves as the dense swiglu factory
 *     (mlp.py:427-497 with two prepended axes), over the expert tensor
 *     parallel group: etp = tp / ep ranks (args expert_tensor_parallel_size;
 *     with dp 1 Megatron needs etp * ep = tp, parallel_state.py:870-884);
 *     expert rank of tp rank t: ep_rank t / etp, etp_rank t % etp (the expert
 *     RankGenerator, order tp-cp-ep-dp-pp, parallel_state.py:886-895), so
 *     EP group g owns experts [g E/ep, (g+1) E/ep), --ep-placement
 *     contiguous only. linear_fc2 splits its columns (axis 1) the same way.
 *   - dense layers beside MoE ones (Qwen3-MoE's mlp_only_layers): Megatron's
 *     non-homogeneous form (moe_layer_freq a list in args): every key keeps its
 *     layer number and has no layer axis ("decoder.layers.1.mlp.experts.
 *     experts.linear_fc1.weight" [experts, ...]), a dense layer's norm fused
 *     into its linear_fc1 (mixed_layers below).
 *   - DeepSeek-V3 (the deepseek-v3 record: its table's Megatron names say
 *     where each tensor goes and cite the source, lib/tpc_family.c): MLA's
 *     down projections (q_a_proj, kv_a_proj_with_mqa with the rope key's rows
 *     after the latent's, as Hugging Face stores them) and every norm
 *     replicated (tp rank 0 stores them), its up projections (q_b_proj,
 *     kv_b_proj) column-parallel by heads with the q_a / kv_a norms as their
 *     layer_norm_weight, linear_proj row-parallel; the router's expert_bias
 *     (e_score_correction_bias) replicated beside its weight; the shared
 *     experts' linear_fc1 [gate; up] and linear_fc2 split over the whole tp
 *     group as a dense MLP's (moe/shared_experts.py:102-134, through
 *     mlp.py's swiglu factory); the first_k_dense_replace dense layers beside
 *     the MoE ones as mixed_layers below. common.pt's args carry MLA's sizes
 *     (multi_latent_attention, q_lora_rank, kv_lora_rank, qk_head_dim,
 *     qk_pos_emb_head_dim, v_head_dim, qk_layernorm) and the router's
 *     (moe_shared_expert_intermediate_size, moe_router_score_function
 *     sigmoid, moe_router_enable_expert_bias, num_groups / group_topk,
 *     moe_router_topk_scaling_factor; moe/moe_utils.py:915-933). Refused by
 *     name: a model whose rope part rotates in halves (rope_interleave
 *     false: Megatron's MLA rotates in pairs), V2-Lite's q_proj (no Megatron
 *     name: see the table), next-token-prediction layers past
 *     num_hidden_layers, group-limited routing other than Megatron's
 *     (check_groups: DeepSeek-V2's group max at 2 experts a group).
 *   - stages: equal, or --pp-layers with the middle ones equal (Megatron's
 *     decoder_first/last_pipeline_num_layers; tpc__mcore_check_stages).
 *   - ep > tp (ep = D x tp): a save by tp x D x pp ranks, D data-parallel
 *     replicas (the engine's dp, tpc_shard.h), rank (pp * D + d) * tp + t
 *     (the decoder RankGenerator's order tp-cp-ep-dp-pp, parallel_state.py:
 *     859-895). A dense chunk's replica id ends in the dp rank (tp-split:
 *     (0, 0, dp), core/utils.py:1052-1055,1123-1124; replicated: (0, tp_rank,
 *     dp), 1183-1196), so only dp rank 0's files hold them (each box once:
 *     the plan's same_as); an expert's replica id ends in the expert
 *     data-parallel rank (moe/experts.py:1556-1564), whose group has one rank
 *     when etp x ep = tp x D with etp 1: rank (t, d) is EP rank t + tp * d
 *     (the expert RankGenerator, etp fastest) and stores its E/ep experts.
 *     args say data_parallel_size D, expert_model_parallel_size ep and
 *     expert_tensor_parallel_size 1.
 *   - refused by name: round-robin placement, experts stacked in one HF
 *     tensor, a tensor whose row has no Megatron name (Mixtral's and
 *     Qwen3-MoE's score correction bias), ep that is neither a divisor nor
 *     a multiple of tp.
 * TransformerEngine's _extra_state ShardedObjects are not written (no FP8
 * state exists for a converted model): load with --dist-ckpt-strictness
 * log_all (or ignore_all), as the legacy layout needs strict=False.
 * Optimizer state (shard --optimizer, tpc_shard_optim.h): each state key's
 * chunks as the model's under 'optimizer.state.KEY.' (rank_chunks), the
 * groups in common.pt (optim_common), and what a resume reads beside them
 * (the sharding type in content_metadata, opt_param_scheduler, the args'
 * consumed samples: layout_megatron_train.c).
 *
 * Reading back: tpconv's torch_dist reader (formats/megatron_dist.c) opens the
 * folder as one checkpoint (the layers un-stacked under Megatron's names), and
 * `convert --rules megatron-llama --vocab V` gives the Hugging Face tensors
 * (megatron-mixtral, megatron-qwen3-moe, megatron-deepseek-v3: the reader
 * un-stacks the experts too, as decoder.layers.L.mlp.experts.local_experts.E.*).
 * As a set tpconv wrote (merge, reshard, verify, convert of the set folder):
 * the folder read whole, the names mapped back (layout_megatron.c's
 * tpc__mcore_to_hf), the padded vocab rows dropped, and each rank's slices
 * cut by the manifest's splits (layout_dcp.c's tpc__dcp_open_rank).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpc_buf.h"
#include "tpc_family.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_layout.h"
#include "tpc_manifest.h"
#include "tpc_shard.h"
#include "tpc_shard_optim.h"
#include "tpc_util.h"

#define LAYOUT_NAME "megatron-dist"
#define TRACKER "latest_checkpointed_iteration.txt"
#define ITER "release"

static char *rank_name(int t, int p, int tp, int pp, const char *format)
{
	char buf[64];
	(void)pp;
	(void)format;
	snprintf(buf, sizeof(buf), ITER "/__%d_0.distcp", p * tp + t);
	return tpc_strdup(buf);
}

/* release/, or with optimizer state iter_NNNNNNN/ (layout_megatron_train.c) */
static char *rank_name_plan(const tpc_shard_plan *sp, int r)
{
	char buf[64], *d = tpc__mcore_iter_dir(sp);
	if (!d)
		return NULL;
	snprintf(buf, sizeof(buf), "%s/__%d_0.distcp", d, r);
	free(d);
	return tpc_strdup(buf);
}

/* The plan's family when it lists the layout: its rows come first (an MoE
 * layer's post_attention_layernorm is pre_mlp_layernorm, not LLaMA's fused
 * linear_fc1.layer_norm_weight). */
static const tpc_family *plan_family(const tpc_shard_plan *sp)
{
	const tpc_family *pf = sp->plan && sp->plan->name ? tpc_family_find(sp->plan->name) : NULL;
	return pf && tpc_family_lists(pf->layouts, LAYOUT_NAME) ? pf : NULL;
}

static const tpc_tensor_row *row_of(const tpc_family *pf, const char *n, int64_t *l, int64_t *x, bool *bias,
				    const tpc_family **of)
{
	const tpc_tensor_row *w = tpc_family_classify_for(pf, LAYOUT_NAME, TPC_ECO_HF, n, l, x, bias, of);
	return w && w->name[TPC_ECO_MEGATRON] ? w : NULL;
}

static bool expert_role(tpc_role r)
{
	return r == TPC_ROLE_FFN_GATE_EXP || r == TPC_ROLE_FFN_UP_EXP || r == TPC_ROLE_FFN_DOWN_EXP;
}

/* The routed experts per layer: the EP plan's, else config.json's. */
static int64_t experts_of(const tpc_shard_plan *sp)
{
	return sp->experts > 0 ? sp->experts : sp->facts.experts;
}

/* ---- what each rank stores ---- */

typedef struct mchunk {
	char *key;                 /* Megatron's sharded key (stacked: without a layer number) */
	tpc_tensor t;              /* the item: over the rank's tensors (stacked: [1, ...]) */
	int64_t shape[TPC_MAX_NDIM], off[TPC_MAX_NDIM]; /* the key's global shape, the chunk's box */
} mchunk;

typedef struct mlist {
	mchunk *v;
	size_t n, cap;
} mlist;

static void mlist_release(mlist *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].key);
		tpc_tensor_release(&m->v[i].t);
	}
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static void clear_storage(tpc_tensor *t)
{
	t->storage = -1;
	t->alias_of = -1;
	for (int k = 0; k < t->nparts; k++)
		clear_storage(&t->parts[k]);
}

/* "decoder.layers.12.mlp.linear_fc2.weight" -> "decoder.layers.mlp.linear_fc2.weight" */
static void unnumber(char *s)
{
	for (char *p = strstr(s, "layers."); p; p = strstr(p + 1, "layers.")) {
		char *q = p + 7, *d = q;
		while (*d >= '0' && *d <= '9')
			d++;
		if (d > q && *d == '.') {
			memmove(q, d + 1, strlen(d + 1) + 1);
			return;
		}
	}
}

/* t or one of its parts is computed while written (a dequantized weight) */
static bool computed(const tpc_tensor *t)
{
	for (int k = 0; k < t->nparts; k++)
		if (computed(&t->parts[k]))
			return true;
	return t->dq != NULL;
}

/* Add the chunk of `t` (owned by the list from here) under `key`: rows
 * [at, at + t's rows) of a global dim-`dim` extent `global` (dim -1: the whole
 * tensor); layer l >= 0 stacks it at l of sp->layers, then expert x >= 0 at x
 * of the routed experts (the item [1, 1, ...]: experts.py:1067-1075 and
 * 1543-1547 put the expert axis after the layer's). */
static int add_chunk(mlist *m, const tpc_shard_plan *sp, const char *key, tpc_tensor *t, int dim, int64_t at,
		     int64_t global, int64_t l, int64_t x, tpc_err *e)
{
	mchunk c;
	int ret = 0;
	memset(&c, 0, sizeof(c));
	int lead = (l >= 0 ? 1 : 0) + (x >= 0 ? 1 : 0);
	if (t->ndim + lead > TPC_MAX_NDIM) {
		tpc_tensor_release(t);
		return tpc_err_at(e, TPC_EINPUT, NULL, key, "too many dimensions to stack");
	}
	if (lead && computed(t)) {
		tpc_tensor_release(t);
		return tpc_err_at(e, TPC_EINPUT, NULL, key, "a tensor computed while written (dequantized) cannot be stacked as [1, ...]");
	}
	c.t = *t;
	memset(t, 0, sizeof(*t));
	for (int k = lead - 1; k >= 0 && !ret; k--) {
		tpc_tensor one;
		bool layer = k == 0 && l >= 0;
		c.shape[k] = layer ? sp->layers : experts_of(sp);
		c.off[k] = layer ? l : x;
		if (tpc_tensor_init_stack(&one, &c.t, 1))
			ret = tpc_err_nomem(e);
		tpc_tensor_release(&c.t);
		c.t = one;
		if (ret)
			memset(&c.t, 0, sizeof(c.t));
	}
	for (int d = 0; d < c.t.ndim - lead && !ret; d++) {
		c.shape[d + lead] = d == dim ? global : c.t.shape[d + lead];
		c.off[d + lead] = d == dim ? at : 0;
	}
	if (!ret && !(c.key = tpc_strdup(key)))
		ret = tpc_err_nomem(e);
	if (!ret && tpc_grow((void **)&m->v, &m->cap, m->n + 1, sizeof(*m->v)))
		ret = tpc_err_nomem(e);
	if (ret) {
		free(c.key);
		tpc_tensor_release(&c.t);
		return ret;
	}
	clear_storage(&c.t);
	m->v[m->n++] = c;
	return 0;
}

/* The rank's tensor of role `r` of family f beside (layer l, expert x, bias). */
static const tpc_tensor *partner(const tpc_family *f, const tpc_ckpt *rk, tpc_role r, int64_t l, int64_t x, bool bias)
{
	char nm[512];
	const tpc_tensor_row *w = tpc_family_row(f, r);
	int64_t i = w && tpc_family_name(w, TPC_ECO_HF, l, x, bias, nm, sizeof(nm), NULL) ? tpc_ckpt_find(rk, nm) : -1;
	return i >= 0 ? &rk->t[i] : NULL;
}

/* Layer l's feed-forward is routed experts (its expert 0's gate is in the
 * input): 1, a dense one: 0, -1 when family f has no expert rows. */
static int layer_moe(const tpc_shard_plan *sp, const tpc_family *f, int64_t l)
{
	char nm[512];
	const tpc_tensor_row *w = f ? tpc_family_row(f, TPC_ROLE_FFN_GATE_EXP) : NULL;
	if (!w || !tpc_family_name(w, TPC_ECO_HF, l, 0, false, nm, sizeof(nm), NULL))
		return -1;
	return tpc_ckpt_find(sp->in, nm) >= 0;
}

/* Layers of two kinds, some with routed experts, some dense (Qwen3-MoE's
 * mlp_only_layers; Megatron's moe_layer_freq, models/gpt/gpt_layer_specs.py:
 * 648-671, the dense ones with the fused TE norm of num_experts None,
 * 579-590): Megatron then keys every layer by its own number, no layer axis
 * (transformer/transformer_block.py:799-803, 835-837). */
static bool mixed_layers(const tpc_shard_plan *sp, const tpc_family *f)
{
	int seen = 0;
	for (int64_t l = 0; l < sp->layers; l++) {
		int k = layer_moe(sp, f, l);
		if (k < 0)
			return false;
		seen |= k ? 1 : 2;
	}
	return seen == 3;
}

/* "decoder.layers.mlp.experts.local_experts.5.linear_fc1.weight" ->
 * "decoder.layers.mlp.experts.experts.linear_fc1.weight": the sharded key
 * SequentialMLP (experts.py:1539-1547) and TEGroupedMLP (1085-1089, through
 * transformer_engine.py:2805-2856's per-gemm keys) both give every expert */
static void unexpert(char *s)
{
	char *p = strstr(s, "local_experts.");
	if (!p)
		return;
	char *d = p + 14;
	while (*d >= '0' && *d <= '9')
		d++;
	if (d > p + 14 && *d == '.') {
		memcpy(p, "experts.", 8);
		memmove(p + 8, d + 1, strlen(d + 1) + 1);
	}
}

/* Rank r's chunks, in the input's tensor order (linear_fc1: gate, then up).
 * A routed expert's tensors are split over its expert-tensor-parallel group
 * (etp = tp / ep ranks, tpc_split_tp): Megatron's expert rank of tp rank t
 * is ep_rank t / etp, etp_rank t % etp (parallel_state.py:886-895: the expert
 * RankGenerator's order "tp-cp-ep-dp-pp", etp fastest); with dp replicas
 * (ep = tp x dp) rank t + tp * d of a stage is EP rank t + tp * d, etp 1. */
static int model_chunks(const tpc_shard_plan *sp, int r, mlist *m, tpc_err *e)
{
	const tpc_ckpt *rk = &sp->rank[r];
	const tpc_family *pf = plan_family(sp);
	int stage = r / sp->tp, t = r % sp->tp, tp = sp->tp, ret = 0;
	bool mixed = mixed_layers(sp, pf);
	tpc__mcore_facts mf;
	memset(m, 0, sizeof(*m));
	if ((ret = tpc__mcore_facts_of(&sp->facts, &mf, e)))
		return ret;
	for (size_t i = 0; i < sp->n && !ret; i++) {
		const tpc_shard_entry *en = &sp->t[i];
		/* a box another rank holds too is stored once, by the lowest
		 * (same_as): Megatron's replica_id is 0 there only. A replicated
		 * tensor: (0, tp_rank, dp) at tp rank 0 (of an expert's etp group);
		 * any dense chunk: its replica id ends in the data-parallel rank
		 * (transformer/utils.py:164-175), so dp rank 0 stores it; an
		 * expert's: the expert-data-parallel rank (experts.py:1556-1564),
		 * 0 on every rank of a stage of tp x dp = ep ranks */
		if (en->stage != stage || !en->rank_ix || en->rank_ix[t] < 0 || en->same_as[t] != t)
			continue;
		const tpc_tensor *x = &rk->t[en->rank_ix[t]];
		const tpc_split *s = &en->split;
		int64_t l = -1, ex = -1;
		bool bias = false;
		int part = -1;
		const tpc_family *f = NULL;
		char key[512];
		const tpc_tensor_row *w = row_of(pf, x->name, &l, &ex, &bias, &f);
		if (!w || !tpc_family_name(w, TPC_ECO_MEGATRON, l, ex, bias, key, sizeof(key), &part)) {
			ret = tpc_err_at(e, TPC_EINPUT, NULL, x->name, "no Megatron-Core name for this tensor");
			break;
		}
		if (part > 0)
			continue; /* k, v, up: with their q / gate */
		char *hash = strchr(key, '#');
		if (hash)
			*hash = '\0';
		if (mixed && w->role == TPC_ROLE_FFN_NORM && l >= 0 && !layer_moe(sp, pf, l))
			snprintf(key, sizeof(key), "decoder.layers.%lld.mlp.linear_fc1.layer_norm_weight", (long long)l);
		if (!mixed)
			unnumber(key);
		int64_t ls = mixed ? -1 : l; /* the layer axis: stacked layers only */
		if (!expert_role(w->role))
			ex = -1;
		else
			unexpert(key);
		/* the ranks this tensor is split over (a routed expert's: its etp
		 * group) and this rank's place among them */
		int et = tpc_split_tp(s, tp), er = tpc_split_local(s, tp, t);
		tpc_tensor v;
		memset(&v, 0, sizeof(v));
		if (w->role == TPC_ROLE_ATTN_Q) {
			const tpc_tensor *kk = partner(f, rk, TPC_ROLE_ATTN_K, l, -1, bias), *vv = partner(f, rk, TPC_ROLE_ATTN_V, l, -1, bias);
			if (!kk || !vv || tpc__mcore_fuse_qkv(x, kk, vv, &mf, &v)) {
				ret = tpc_err_at(e, TPC_EINPUT, NULL, x->name, "cannot lay q, k and v out per query group (partners missing or sizes off)");
				break;
			}
			int64_t rows = v.shape[0];
			ret = add_chunk(m, sp, key, &v, 0, er * rows, et * rows, ls, -1, e);
		} else if (tpc__mcore_up_of(w->role)) {
			/* a dense MLP's, a routed expert's or the shared experts' linear_fc1 */
			const tpc_tensor *up = partner(f, rk, tpc__mcore_up_of(w->role), l, ex, bias);
			int64_t g = x->shape[0];
			if (!up || up->shape[0] != g) {
				ret = tpc_err_at(e, TPC_EINPUT, NULL, x->name, "a gate projection without an up projection of its rows");
				break;
			}
			tpc_tensor u;
			if (tpc_tensor_copy(&v, x) || tpc_tensor_copy(&u, up)) {
				tpc_tensor_release(&v);
				ret = tpc_err_nomem(e);
				break;
			}
			ret = add_chunk(m, sp, key, &v, 0, er * g, 2 * et * g, ls, ex, e);
			if (!ret)
				ret = add_chunk(m, sp, key, &u, 0, et * g + er * g, 2 * et * g, ls, ex, e);
			else
				tpc_tensor_release(&u);
		} else if (s->dim < 0) {
			ret = tpc_tensor_copy(&v, x) ? tpc_err_nomem(e) : add_chunk(m, sp, key, &v, -1, 0, 0, ls, ex, e);
		} else {
			int64_t len = x->shape[s->dim];
			ret = tpc_tensor_copy(&v, x) ? tpc_err_nomem(e) : add_chunk(m, sp, key, &v, s->dim, er * len, et * len, ls, ex, e);
		}
	}
	if (ret)
		mlist_release(m);
	return ret;
}

/* Rank r's chunks: the model's, then with optimizer state (shard
 * --optimizer) each state key's, split by the model's plan and stored as
 * the model's chunks under 'optimizer.state.KEY.' + the model's key
 * (distrib_optimizer.py:1789-1832 sharded_param_state_fully_reshardable:
 * replace(sharded_metadata, key=f'{prefix}.{state_key}.{key}'), the same
 * offsets, shapes and replica ids; the prefix 'optimizer.state', :1746). */
static int rank_chunks(const tpc_shard_plan *sp, int r, mlist *m, tpc_err *e)
{
	int ret = model_chunks(sp, r, m, e);
	for (int k = 0; !ret && sp->optim && k < sp->optim->nkeys; k++) {
		mlist s;
		if ((ret = model_chunks(&sp->optim->sp[k], r, &s, e)))
			break;
		if (tpc_grow((void **)&m->v, &m->cap, m->n + s.n + 1, sizeof(*m->v)))
			ret = tpc_err_nomem(e);
		for (size_t j = 0; j < s.n && !ret; j++) {
			tpc_buf b = TPC_BUF_INIT;
			tpc_buf_addf(&b, "optimizer.state.%s.%s", sp->optim->key[k], s.v[j].key);
			if (b.oom) {
				ret = tpc_err_nomem(e);
				break;
			}
			size_t bl;
			free(s.v[j].key);
			s.v[j].key = tpc_buf_detach(&b, &bl);
			m->v[m->n++] = s.v[j];
			s.v[j].key = NULL;
			memset(&s.v[j].t, 0, sizeof(s.v[j].t));
		}
		mlist_release(&s);
	}
	if (ret)
		mlist_release(m);
	return ret;
}

/* ---- shard ---- */

/* Multi-head latent attention (a family whose parts say so): Megatron's MLA
 * rotates the rope part of q and k in interleaved pairs (multi_latent_attention.py:
 * 951,962 mla_rotary_interleaved; rope_utils.py:135-138), as Hugging Face's
 * DeepSeek-V3 does with rope_interleave; a model that rotates halves would need
 * its rope rows permuted, which this layout does not do. */
static int check_mla(const tpc_shard_plan *sp, const tpc_family *pf, tpc_err *e)
{
	if (!pf || pf->parts.attn != TPC_PART_MLA)
		return 0;
	bool pairs = sp->facts.rope_interleave ? sp->facts.rope_interleave > 0 : pf->parts.rope == TPC_PART_ROPE_INTERLEAVED;
	if (!pairs)
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json's rope_interleave is false: Megatron-Core's multi-latent attention rotates in interleaved pairs (rope_utils.py:135-138), the model in halves; not written by the megatron-dist layout");
	if (!sp->facts.kv_lora_rank || !sp->facts.qk_rope_head_dim || !sp->facts.v_head_dim || !sp->facts.qk_nope_head_dim)
		return tpc_err_set(e, TPC_EUSAGE,
				   "multi-latent attention: config.json must give kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim (Megatron's args carry them)");
	return 0;
}

/* Group-limited routing as args can say it: Megatron scores a group by the
 * sum of its top topk / group_topk experts (moe/moe_utils.py:711-712), which
 * is DeepSeek-V3's noaux_tc when that is 2 (its top-2 sum) and V2's
 * group_limited_greedy when it is 1 (its max); other models would route
 * otherwise under the args written. */
static int check_groups(const tpc_shard_plan *sp, const tpc_family *pf, tpc_err *e)
{
	const tpc_model_facts *f = &sp->facts;
	if (f->n_group <= 1 || !f->topk_group || f->topk_group >= f->n_group)
		return 0;
	tpc_moe_topk how = f->topk_method;
	if (!how && pf && pf->parts.router == TPC_PART_ROUTER_SIGMOID_BIAS)
		how = TPC_MOE_NOAUX_TC; /* the record's default routing (tpc_family.h: router) */
	int64_t per = how == TPC_MOE_NOAUX_TC ? 2 : how == TPC_MOE_GROUP_LIMITED ? 1 : 0;
	if (per && f->experts_per_tok == per * f->topk_group)
		return 0;
	return tpc_err_set(e, TPC_EINPUT,
			   "group-limited routing (n_group %lld, topk_group %lld, %lld experts a token): Megatron scores a group by the sum of its top num_experts_per_tok / topk_group experts (moe_utils.py:711-712), the model %s; not written by the megatron-dist layout",
			   (long long)f->n_group, (long long)f->topk_group, (long long)f->experts_per_tok,
			   per ? (per == 2 ? "by its top 2" : "by its best one") : "by a rule config.json does not name");
}

static int check(tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	tpc__mcore_facts mf;
	const tpc_family *named = sp->plan && sp->plan->name ? tpc_family_find(sp->plan->name) : NULL, *pf = plan_family(sp);
	const char *dense = NULL, *routed = NULL;
	int ret;
	if (!tpc__dcp_format(e))
		return TPC_EUSAGE;
	/* Megatron's keys stack every layer's tensor as an item [1, ...] (and
	 * [1, 1, ...] an expert's), a view a weight dequantized while written
	 * has not (tpc_tensor_init_stack) */
	if (o->dequantized)
		return tpc_err_set(e, TPC_EUSAGE,
				   "--dequantize with --layout megatron-dist: the layout stacks each tensor as Megatron's [1, ...] items, which a weight dequantized while written is not; dequantize first (tpconv convert MODEL --dequantize -o dense/) and shard that folder");
	if (named && !pf)
		return tpc_err_set(e, TPC_EINPUT,
				   "family '%s' is not written by the megatron-dist layout (its Megatron-Core names are not mapped)",
				   named->name);
	if ((ret = tpc__mcore_train_check(sp, e)) || (ret = tpc__mcore_check(sp, "megatron-dist", &mf, e)))
		return ret;
	if ((ret = check_mla(sp, pf, e)) || (experts_of(sp) > 0 && (ret = check_groups(sp, pf, e))))
		return ret;
	for (size_t i = 0; i < sp->n; i++) {
		const char *n = sp->in->t[sp->t[i].in].name;
		int64_t l = -1;
		const tpc_tensor_row *w = row_of(pf, n, &l, NULL, NULL, NULL);
		if (!w && sp->facts.quant.method != TPC_QS_NONE)
			return tpc_err_at(e, TPC_EINPUT, NULL, n,
					  "a %s-quantized checkpoint (config.json's quantization_config): Megatron-Core's torch_dist holds dense weights; dequantize it first (tpconv convert MODEL --dequantize -o dense/) and shard that folder",
					  sp->facts.quant.name[0] ? sp->facts.quant.name : "quantized");
		if (!w)
			return tpc_err_at(e, TPC_EINPUT, NULL, n,
					  "no Megatron-Core name for this tensor in the tables of the families the megatron-dist layout writes%s%s (drop it with --rules)",
					  pf ? ": " : "", pf ? pf->name : "");
		if (l >= sp->layers || (sp->facts.layers > 0 && l >= sp->facts.layers))
			return tpc_err_at(e, TPC_EINPUT, NULL, n,
					  "layer %lld is past the decoder's %lld (num_hidden_layers): a next-token-prediction (MTP) layer, which the megatron-dist layout does not write (drop it with --rules)",
					  (long long)l, (long long)(sp->facts.layers > 0 ? sp->facts.layers : sp->layers));
		/* with optimizer state: every Megatron parameter has it; the
		 * router's expert_bias is a buffer there (moe/router.py:191-197) */
		if (sp->optim && !tpc_shard_optim_has_state(sp->optim, n) && w->role != TPC_ROLE_FFN_EXP_PROBS_B)
			return tpc_err_at(e, TPC_EINPUT, NULL, n,
					  "a tensor of the model that no param group lists (frozen, or a buffer): Megatron's distributed optimizer holds state for every parameter of it; not written with --optimizer (drop it with --rules)");
		const tpc_split *s = &sp->t[i].split;
		if (w->role == TPC_ROLE_FFN_GATE || w->role == TPC_ROLE_FFN_DOWN)
			dense = n;
		if (expert_role(w->role))
			routed = n;
		if (s->stacked)
			return tpc_err_at(e, TPC_EINPUT, NULL, n, "experts stacked in one tensor have no Megatron-Core chunk layout here");
		if (s->dim >= 0 && s->nparts != 1)
			return tpc_err_at(e, TPC_EINPUT, NULL, n, "a tensor split in parts has no Megatron-Core chunk layout here");
		for (int k = 0; k < s->nparts && s->dim >= 0; k++)
			if (s->part[k].replicas > 1)
				return tpc_err_at(e, TPC_EINPUT, NULL, n, "Megatron does not replicate key/value heads over ranks");
	}
	if (dense && routed && !mixed_layers(sp, pf))
		return tpc_err_at(e, TPC_EINPUT, NULL, dense,
				  "a dense feed-forward beside routed experts (%s) in one layer: not a Megatron-Core layer", routed);
	if (routed && experts_of(sp) <= 0)
		return tpc_err_at(e, TPC_EINPUT, NULL, routed, "routed experts, but config.json says not how many (num_local_experts / num_experts)");
	return 0;
}

/* --dry-run: the bytes of rank r's chunks (replicated boxes once, on tp
 * rank 0 of their group), without reading a weight */
static bool stored_size(const tpc_shard_plan *sp, int r, uint64_t *bytes, size_t *items)
{
	mlist m;
	tpc_err e;
	tpc_err_init(&e);
	if (rank_chunks(sp, r, &m, &e))
		return false;
	*bytes = 0;
	for (size_t k = 0; k < m.n; k++)
		*bytes += m.v[k].t.nbytes;
	*items = m.n;
	mlist_release(&m);
	return true;
}

/* The rank as stored: its chunks, in order (names never reach the disk:
 * items are bare tensors; a repeated key gets "#" and its index). */
static int stored_rank(const tpc_shard_plan *sp, int r, tpc_ckpt *out, tpc_err *e)
{
	mlist m;
	int ret = rank_chunks(sp, r, &m, e);
	for (size_t k = 0; k < m.n && !ret; k++) {
		tpc_buf nb = TPC_BUF_INIT;
		tpc_buf_addf(&nb, "%s#%zu", m.v[k].key, k);
		int64_t ix = nb.oom ? tpc_err_nomem(e) : tpc_ckpt_add_copy(out, nb.p, &m.v[k].t, e);
		tpc_buf_release(&nb);
		if (ix < 0)
			ret = (int)ix;
	}
	mlist_release(&m);
	return ret;
}

/* the iteration folder's files describe the rank files: a set taken back loses them */
static void remove_rank(const char *path)
{
	static const char *const side[] = {".metadata", "common.pt", "metadata.json"};
	char *dir = tpc_path_dir(path);
	unlink(path);
	for (size_t i = 0; dir && i < sizeof(side) / sizeof(side[0]); i++) {
		char *p = tpc_path_join(dir, side[i]);
		if (p)
			unlink(p);
		free(p);
	}
	if (dir)
		rmdir(dir); /* release/, when empty */
	free(dir);
}

/* The items of the file at `path`, in order, have the dtypes and shapes of
 * rank r's chunks. */
static int rank_file_ok(const tpc_shard_plan *sp, int r, const char *path, bool *ok, tpc_err *e)
{
	mlist m;
	tpc__dcp_item *w = NULL;
	int ret = rank_chunks(sp, r, &m, e);
	*ok = false;
	if (ret)
		return ret;
	if (!(w = tpc_calloc(m.n + 1, sizeof(*w))))
		ret = tpc_err_nomem(e);
	for (size_t k = 0; k < m.n && !ret; k++) {
		w[k].dtype = m.v[k].t.dtype;
		w[k].ndim = m.v[k].t.ndim;
		memcpy(w[k].shape, m.v[k].t.shape, (size_t)m.v[k].t.ndim * sizeof(int64_t));
	}
	if (!ret)
		*ok = tpc__dcp_items_ok(path, w, m.n);
	free(w);
	mlist_release(&m);
	return ret;
}

/* One distributed optimizer's common state (distrib_optimizer.py:866-878
 * state_dict: param_groups without params, with step; :1581
 * param_state_sharding_type) over the groups its parameters need. */
static tpc_value *one_optim(const tpc_shard_plan *sp, bool expert, const bool side[2])
{
	tpc_value *opt = tpc_value_new(TPC_V_DICT), *inner = tpc_value_new(TPC_V_DICT);
	tpc_value *pg = tpc_shard_optim_groups(sp->optim, expert, side[0], side[1]);
	bool bad = !opt || !inner || !pg || tpc_value_set(inner, tpc_value_str("param_groups", 12), tpc_value_ref(pg)) ||
		   tpc_value_set(opt, tpc_value_str("optimizer", 9), tpc_value_ref(inner)) ||
		   tpc_value_set(opt, tpc_value_str("param_state_sharding_type", 25), tpc_value_str("fully_reshardable", 17));
	tpc_value_unref(pg);
	tpc_value_unref(inner);
	if (bad) {
		tpc_value_unref(opt);
		return NULL;
	}
	return opt;
}

/* common.pt's 'optimizer': one distributed optimizer, or with routed
 * experts (allreduce False, moe/experts.py) a ChainedOptimizer of the dense
 * one and the expert-parallel one (optimizer/__init__.py:1170-1240, groups
 * is_expert_parallel), saved as {0: dense, 1: expert} (optimizer.py:
 * 1589-1603; no key prefix: chained_optim_avoid_prefix, :1583-1587). */
static tpc_value *optim_common(const tpc_shard_plan *sp)
{
	const tpc_family *pf = plan_family(sp);
	bool side[2][2] = {{false, false}, {false, false}}; /* [expert][no decay] */
	for (size_t i = 0; i < sp->n; i++) {
		const tpc_tensor *t = &sp->in->t[sp->t[i].in];
		const tpc_tensor_row *w = row_of(pf, t->name, NULL, NULL, NULL, NULL);
		side[w && expert_role(w->role)][tpc_shard_optim_no_decay(t, t->name)] = true;
	}
	if (!side[1][0] && !side[1][1])
		return one_optim(sp, false, side[0]);
	tpc_value *d = tpc_value_new(TPC_V_DICT), *a = one_optim(sp, false, side[0]), *b = one_optim(sp, true, side[1]);
	if (!d || !a || !b || tpc_value_set(d, tpc_value_int(0), tpc_value_ref(a)) ||
	    tpc_value_set(d, tpc_value_int(1), tpc_value_ref(b))) {
		tpc_value_unref(d);
		d = NULL;
	}
	tpc_value_unref(a);
	tpc_value_unref(b);
	return d;
}

/* common.pt: {args, checkpoint_version, iteration, content_metadata} */
static int write_common(const tpc_shard_plan *sp, const char *path, const tpc_shard_opts *o, tpc_err *e)
{
	const tpc_format *tf = tpc_format_by_name("torch");
	const tpc_family *pf = plan_family(sp);
	tpc__mcore_facts mf;
	tpc__mcore_moe moe;
	bool *layers = NULL;
	int64_t ffn = 0, vocab = 0, orig = 0;
	int ret;
	if (!tf)
		return tpc_err_set(e, TPC_EUSAGE, "the torch writer is not available in this build");
	if ((ret = tpc__mcore_facts_of(&sp->facts, &mf, e)))
		return ret;
	memset(&moe, 0, sizeof(moe));
	for (size_t i = 0; i < sp->n; i++) {
		const tpc_tensor *t = &sp->in->t[sp->t[i].in];
		const tpc_tensor_row *w = row_of(pf, t->name, NULL, NULL, NULL, NULL);
		if (!ffn && w && w->role == TPC_ROLE_FFN_GATE)
			ffn = t->shape[0];
		if (!moe.ffn && w && w->role == TPC_ROLE_FFN_GATE_EXP)
			moe.ffn = t->shape[0];
		if (!moe.shared_ffn && w && w->role == TPC_ROLE_FFN_GATE_SHEXP)
			moe.shared_ffn = t->shape[0];
		if (w && w->role == TPC_ROLE_FFN_EXP_PROBS_B)
			moe.expert_bias = true;
		if (!orig && sp->t[i].split.kind == TPC_SPLIT_VOCAB && sp->t[i].split.dim == 0) {
			orig = sp->t[i].split.part[0].size;
			vocab = orig + sp->t[i].split.part[0].pad;
		}
	}
	tpc_value *root = tpc_value_new(TPC_V_DICT), *cm = tpc_value_new(TPC_V_DICT);
	if (moe.ffn) {
		moe.experts = experts_of(sp);
		moe.topk = sp->facts.experts_per_tok;
		moe.ep = sp->ep > 1 ? sp->ep : 1;
		moe.etp = sp->tp / moe.ep;
		moe.grouped = o->moe_grouped_gemm;
		moe.pre_softmax = sp->facts.norm_topk < 0;
		moe.sigmoid = sp->facts.scoring == TPC_MOE_SIGMOID ||
			      (!sp->facts.scoring && pf && pf->parts.router == TPC_PART_ROUTER_SIGMOID_BIAS);
		moe.groups = sp->facts.n_group;
		moe.group_topk = sp->facts.topk_group;
		moe.topk_scale = sp->facts.routed_scale;
		if (mixed_layers(sp, pf) && (layers = tpc_calloc((size_t)sp->layers + 1, sizeof(bool))))
			for (int64_t l = 0; l < sp->layers; l++)
				layers[l] = layer_moe(sp, pf, l) > 0;
		moe.moe_layers = layers;
		if (!ffn)
			ffn = moe.ffn;
	}
	tpc__mcore_mla mla = {sp->facts.q_lora_rank, sp->facts.kv_lora_rank, sp->facts.qk_nope_head_dim,
			      sp->facts.qk_rope_head_dim, sp->facts.v_head_dim};
	bool is_mla = pf && pf->parts.attn == TPC_PART_MLA;
	tpc_value *args = tpc__mcore_args(sp, LAYOUT_NAME, &mf, ffn, vocab, orig, moe.ffn ? &moe : NULL, is_mla ? &mla : NULL);
	free(layers);
	bool bad = !root || !cm || !args || tpc__mcore_tokenizer_args(args, o->config_dir);
	bad = bad || tpc_value_set(cm, tpc_value_str("singleton_local_shards", 22), tpc_value_bool(0)) ||
	      tpc_value_set(cm, tpc_value_str("chained_optim_avoid_prefix", 26), tpc_value_bool(1));
	if (!bad) /* args is root's from here; borrowed below for the training state */
		bad = tpc_value_set(root, tpc_value_str("args", 4), tpc_value_ref(args));
	bad = bad || tpc_value_set(root, tpc_value_str("checkpoint_version", 18), tpc_value_float(3.0)) ||
	      tpc_value_set(root, tpc_value_str("iteration", 9),
			    tpc_value_int(sp->optim ? tpc_shard_optim_iteration(sp->optim) : 0));
	tpc_value *opt = !bad && sp->optim ? optim_common(sp) : NULL;
	if (!bad && sp->optim)
		bad = !opt || tpc_value_set(root, tpc_value_str("optimizer", 9), opt);
	bad = bad || tpc__mcore_train_common(sp, root, args, cm);
	if (!bad) {
		bad = tpc_value_set(root, tpc_value_str("content_metadata", 16), cm);
		cm = NULL;
	}
	tpc_value_unref(args);
	tpc_value_unref(cm);
	if (bad) {
		tpc_value_unref(root);
		return tpc_err_nomem(e);
	}
	tpc_ckpt ck;
	tpc_write_opts wo;
	tpc_ckpt_init(&ck);
	ck.root = root;
	memset(&wo, 0, sizeof(wo));
	wo.flags = TPC_W_FORCE;
	ret = tf->write(&ck, NULL, 0, path, &wo, e);
	tpc_ckpt_release(&ck);
	return ret;
}

/* Every rank file is there: .metadata over all of them, common.pt,
 * metadata.json, the tracker, then the companions. */
static int write_extras(const tpc_shard_plan *sp, const char *dir, const tpc_shard_opts *o, tpc_err *e)
{
	static const char config[] = "{\"sharded_backend\": \"torch_dist\", \"sharded_backend_version\": 1, "
				     "\"common_backend\": \"torch\", \"common_backend_version\": 1}";
	const tpc_format *f = tpc__dcp_format(e);
	int nr = sp->tp * sp->pp, ret = 0;
	mlist *ch = tpc_calloc((size_t)nr, sizeof(*ch));
	tpc__dcp_where *at = tpc_calloc((size_t)nr, sizeof(*at));
	tpc_chunk *all = NULL;
	size_t total = 0, k = 0;
	char *itd = tpc__mcore_iter_dir(sp), *it = itd ? tpc_path_join(dir, itd) : NULL, *p = NULL;
	if (!f)
		ret = TPC_EUSAGE;
	else if (!ch || !at || !it)
		ret = tpc_err_nomem(e);
	for (int r = 0; r < nr && !ret; r++) {
		if (!(ret = rank_chunks(sp, r, &ch[r], e)))
			ret = tpc__dcp_rank_items(f, dir, sp->rank_file[r], r, ch[r].n, &at[r], e);
		if (!ret)
			total += ch[r].n;
	}
	if (!ret && !(all = tpc_calloc(total + 1, sizeof(*all))))
		ret = tpc_err_nomem(e);
	for (int r = 0; r < nr && !ret; r++)
		for (size_t j = 0; j < ch[r].n; j++, k++) {
			mchunk *c = &ch[r].v[j];
			all[k] = (tpc_chunk){.fqn = c->key, .dtype = c->t.dtype, .ndim = c->t.ndim, .shape = c->shape,
					     .offset = c->off, .size = c->t.shape, .file = tpc_path_base(sp->rank_file[r]),
					     .foff = at[r].off[j], .flen = at[r].len[j]};
		}
	if (!ret) {
		tpc_write_opts wo;
		memset(&wo, 0, sizeof(wo));
		wo.flags = TPC_W_FORCE; /* under the set's lock, every rank file checked */
		ret = f->write_index(it, all, k, &wo, e);
	}
	if (!ret && !(p = tpc_path_join(it, "common.pt")))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = write_common(sp, p, o, e);
	free(p);
	p = NULL;
	if (!ret && !(p = tpc_path_join(it, "metadata.json")))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = tpc_write_file_atomic(p, config, sizeof(config) - 1, TPC_OUT_FORCE, e);
	free(p);
	p = NULL;
	if (!ret && !(p = tpc_path_join(dir, TRACKER)))
		ret = tpc_err_nomem(e);
	if (!ret) { /* "release", or the iteration as Megatron writes it (str(iteration)) */
		char tr[32];
		snprintf(tr, sizeof(tr), "%lld", sp->optim ? (long long)tpc_shard_optim_iteration(sp->optim) : 0LL);
		const char *t = sp->optim ? tr : ITER;
		ret = tpc_write_file_atomic(p, t, strlen(t), o->force ? TPC_OUT_FORCE : 0, e);
	}
	free(p);
	if (!ret && !o->no_extras)
		ret = tpc__layout_copy_companions(sp, dir, o, NULL, false, e);
	for (int r = 0; ch && r < nr; r++)
		mlist_release(&ch[r]);
	tpc__dcp_where_free(at, nr);
	free(ch);
	free(all);
	free(it);
	free(itd);
	return ret;
}

/* ---- reading back ---- */

/* The folder's Megatron tensors ck->t[n0...] as the manifest's global
 * tensors: Hugging Face names (layers numbered globally already), the padded
 * vocab rows narrowed away. */
static int globals(tpc_ckpt *ck, size_t n0, const tpc_manifest *man, const tpc_layout_rank_ctx *c, const char *dir,
		   tpc_err *e)
{
	tpc__mcore_facts mf;
	const tpc_family *fam = NULL;
	int ret = tpc__mcore_facts_of(c->facts, &mf, e);
	if (!ret && man->plan_json) {
		/* the set's family (its plan's name) names the rows: a Mixtral's
		 * pre_mlp_layernorm, a Qwen3-MoE's experts */
		tpc_plan plan;
		memset(&plan, 0, sizeof(plan));
		if (!(ret = tpc_plan_from_buffer(&plan, man->plan_json, strlen(man->plan_json), dir, e)) && plan.name)
			fam = tpc_family_find(plan.name);
		tpc_plan_release(&plan);
		if (fam && !tpc_family_lists(fam->layouts, LAYOUT_NAME))
			fam = NULL;
	}
	if (ret || (ret = tpc__mcore_to_hf(ck, n0, ck->n, "", LAYOUT_NAME, fam, 0, 0, &mf, dir, e)))
		return ret;
	for (size_t i = 0; i < man->n; i++) {
		const tpc_manifest_tensor *mt = &man->t[i];
		int64_t g = mt->split.kind == TPC_SPLIT_VOCAB && mt->ndim >= 1 ? tpc_ckpt_find(ck, mt->name) : -1;
		if (g < (int64_t)n0 || ck->t[g].ndim != mt->ndim || ck->t[g].shape[0] <= mt->shape[0])
			continue;
		tpc_tensor v, *t = &ck->t[g];
		char *nm = t->name;
		if (tpc_tensor_narrow(&v, t, 0, 0, mt->shape[0]))
			return tpc_err_nomem(e);
		tpc_tensor_release(t);
		*t = v;
		t->name = nm;
	}
	return 0;
}

static int open_rank(const char *path, const tpc_layout_rank_ctx *c, tpc_ckpt *ck, tpc_err *e)
{
	char *it = tpc_path_dir(path), *dir = it ? tpc_path_dir(it) : NULL;
	int ret = dir ? tpc__dcp_open_rank(path, dir, it, c, globals, ck, e) : tpc_err_nomem(e);
	free(dir);
	free(it);
	return ret;
}

static const char *const formats[] = {"dcp", NULL};

const tpc_layout tpc_layout_megatron_dist = {
	.name = LAYOUT_NAME,
	.desc = "Megatron-Core torch_dist: release/__R_0.distcp + .metadata + common.pt + metadata.json, stacked layers",
	.formats = formats, .set_format = "megatron-torch_dist",
	.companions_at_top = true, .uneven_stages = true, .expert_parallel = true,
	.data_parallel = true, .optimizer = true,
	.rank_name = rank_name, .rank_name_plan = rank_name_plan, .check = check, .adjust_plan = tpc__mcore_adjust_plan,
	.stored_rank = stored_rank, .stored_size = stored_size, .write_rank = tpc__dcp_write_rank, .rank_file_ok = rank_file_ok, .remove_rank = remove_rank,
	.open_rank = open_rank, .write_extras = write_extras,
};
