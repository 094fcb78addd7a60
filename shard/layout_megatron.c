/* layout_megatron.c - Megatron-LM legacy checkpoints (torch files per rank),
 * with Megatron-Core parameter names, for the decoders whose family records
 * list the layout (LLaMA's names; Mixtral's experts, below).
 *
 * On disk (megatron/training/checkpointing.py, get_checkpoint_name and
 * save_checkpoint; FRAMEWORKS.md §4):
 *   latest_checkpointed_iteration.txt   "release" (what tools/checkpoint's savers
 *                                       write for a converted model) or a number
 *   release/mp_rank_TT/model_optim_rng.pt          pp == 1
 *   release/mp_rank_TT_PPP/model_optim_rng.pt      pp > 1
 * each a torch.save of {"args": argparse.Namespace, "checkpoint_version": 3.0,
 * "iteration": 0, "model": the rank's model.state_dict()}. A set Megatron
 * trained with virtual pipeline stages (--num-layers-per-virtual-pipeline-
 * stage) holds "model0" ... "modelV-1" instead (generate_state_dict), chunk
 * v of stage p the layers from v L / V + p L / (PP V) (get_transformer_layer_
 * offset), each numbering them from 0: read back (unchunk), not written.
 *
 * The rank's state dict under Megatron-Core names (GPTModel with the
 * TransformerEngine layer spec: the input norms live in the fused linear
 * layers), layers numbered locally on each pipeline stage:
 *   embedding.word_embeddings.weight        vocab-parallel, padded to a multiple of
 *                                           make_vocab_size_divisible_by (128) * tp
 *                                           (training/tokenizer _vocab_size_with_padding)
 *   decoder.layers.L.self_attention.linear_qkv.layer_norm_weight   input norm
 *   decoder.layers.L.self_attention.linear_qkv.weight (.bias)      per query group
 *       [q (heads/groups * d); k (d); v (d)] x the rank's groups, as Megatron's
 *       checkpoint loaders build it (tools/checkpoint/loader_llama_mistral.py,
 *       loader_mixtral_hf.py: cat([q.reshape(G, hpg*d, -1), k.reshape(G, d, -1),
 *       v.reshape(G, d, -1)], dim=1)); tensor parallelism splits the groups, so
 *       groups % tp == 0 (Megatron asserts it)
 *   decoder.layers.L.self_attention.linear_proj.weight             row
 *   decoder.layers.L.self_attention.q_layernorm / k_layernorm      (Qwen3 q/k norms)
 *   decoder.layers.L.mlp.linear_fc1.layer_norm_weight               post-attention norm
 *   decoder.layers.L.mlp.linear_fc1.weight   [gate_r; up_r] (SwiGLU, per rank)
 *   decoder.layers.L.mlp.linear_fc2.weight   row
 *   decoder.final_layernorm.weight, output_layer.weight (last stage)
 * Mixtures of experts (Mixtral; Megatron-LM d98e8a6):
 *   release/mp_rank_TT[_PPP]_EEE/model_optim_rng.pt   ep > 1
 *       EEE the rank's expert-model-parallel rank (training/checkpointing.py:
 *       259-274: the suffix whenever the EP world size is above 1); a legacy
 *       save is written by every rank whose dp rank or expert-dp rank is 0
 *       (checkpointing.py:790-797), with ep <= tp and dp 1: tp x pp files, tp
 *       rank t in EP group t / etp (etp = tp / ep, the expert RankGenerator's
 *       order tp-cp-ep-dp-pp, core/parallel_state.py:886-895), the engine's
 *       ep_rank (rank_name_ep)
 *   decoder.layers.L.pre_mlp_layernorm.weight   the MoE layer's norm
 *                                           (models/gpt/gpt_layer_specs.py:282)
 *   decoder.layers.L.mlp.router.weight      [experts, hidden], every rank
 *                                           (moe/router.py:64)
 *   decoder.layers.L.mlp.experts.local_experts.i.linear_fc1.weight / linear_fc2.weight
 *       SequentialMLP's LOCAL expert i (moe/experts.py:1442-1451), global
 *       expert ep_rank * E/ep + i (moe/moe_layer.py:187-195); linear_fc1
 *       [gate_r; up_r] and linear_fc2 by columns over the expert tensor
 *       parallel group (tp_group=expt_tp, experts.py:1447)
 *   args: num_experts, moe_ffn_hidden_size, moe_router_topk,
 *       expert_model_parallel_size, expert_tensor_parallel_size, moe_grouped_gemm
 *       false (as layout_megatron_dist.c writes them)
 * Refused by name: --moe-grouped-gemm (TEGroupedMLP's legacy state dict is
 * per-gemm weightN tensors, not written), --ep-placement other than
 * contiguous, ep over tp (the engine: the layout holds no data-parallel
 * replicas), and MoE families other than Mixtral (no record lists the
 * layout). Reading back: the EP rank from the folder name (its last number
 * when args say expert_model_parallel_size > 1), local experts renumbered
 * globally.
 * TransformerEngine's _extra_state entries are not written (their FP8 metadata
 * does not exist for a converted model; load with strict=False or a
 * non-FP8 run, which is what tools/checkpoint users do): stated in the README.
 * args carries the facts Megatron checks on load and that reading back needs
 * (heads, query groups, kv_channels, layers, sizes, parallelism).
 *
 * Reading (merge, reshard, verify; sets tpconv wrote and sets Megatron wrote):
 * the fused tensors are split back per group, names mapped to Hugging Face's,
 * layers renumbered globally. Head counts come from the manifest or from args.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tpc_buf.h"
#include "tpc_format.h"
#include "tpc_extras.h"
#include "tpc_family.h"
#include "tpc_io.h"
#include "tpc_layout.h"
#include "tpc_shard.h"
#include "tpc_util.h"

#define TRACKER "latest_checkpointed_iteration.txt"
#define RANK_FILE "model_optim_rng.pt"
#define VOCAB_DIVISIBLE 128

/* checkpointing.py:267-274: mp_rank_TT, _PPP when pp > 1, _EEE when ep > 1 */
static char *rank_name(int t, int p, int tp, int pp, int ep_rank, const char *format)
{
	char buf[96], ep[16] = "";
	(void)tp;
	(void)format;
	if (ep_rank >= 0)
		snprintf(ep, sizeof(ep), "_%03d", ep_rank);
	if (pp > 1)
		snprintf(buf, sizeof(buf), "release/mp_rank_%02d_%03d%s/" RANK_FILE, t, p, ep);
	else
		snprintf(buf, sizeof(buf), "release/mp_rank_%02d%s/" RANK_FILE, t, ep);
	return tpc_strdup(buf);
}

/* Names both ways come from the tensor tables of the family records that
 * list this layout (lib/tpc_family.c; *of: the record the row is from): a
 * row with a Megatron-Core name is written under it, layers renumbered per
 * stage; rows fused there (linear_qkv, linear_fc1) are laid out below. */
/* The plan's family first when it lists the layout (a Mixtral layer's
 * post_attention_layernorm is pre_mlp_layernorm, not LLaMA's fused
 * linear_fc1.layer_norm_weight); x: the expert number, -1 for none. */
static const tpc_tensor_row *row_of(const tpc_family *pf, tpc_eco eco, const char *n, int64_t *l, int64_t *x, bool *bias,
				    const tpc_family **of)
{
	const tpc_tensor_row *w = tpc_family_classify_for(pf, "megatron", eco, n, l, x, bias, of);
	return w && w->name[TPC_ECO_MEGATRON] ? w : NULL;
}

static const tpc_family *plan_family(const tpc_shard_plan *sp)
{
	const tpc_family *pf = sp->plan && sp->plan->name ? tpc_family_find(sp->plan->name) : NULL;
	return pf && tpc_family_lists(pf->layouts, "megatron") ? pf : NULL;
}

/* The rank's tensor of role `r` of family f beside tensor n's (same layer,
 * expert, weight or bias). */
static const tpc_tensor *partner(const tpc_family *f, const tpc_ckpt *rk, tpc_role r, int64_t l, int64_t x, bool bias)
{
	char nm[512];
	const tpc_tensor_row *w = tpc_family_row(f, r);
	int64_t i = tpc_family_name(w, TPC_ECO_HF, l, x, bias, nm, sizeof(nm), NULL) ? tpc_ckpt_find(rk, nm) : -1;
	return i >= 0 ? &rk->t[i] : NULL;
}

/* "model.layers.12.mlp.down_proj.weight" -> 12 and "mlp.down_proj.weight" */
static bool hf_layer(const char *n, int64_t *l, const char **rest)
{
	char *end;
	if (strncmp(n, "model.layers.", 13) || n[13] < '0' || n[13] > '9')
		return false;
	*l = strtoll(n + 13, &end, 10);
	if (*end != '.')
		return false;
	*rest = end + 1;
	return true;
}

/* the first layer of pipeline stage s (tpc_plan_stage's even split) */
static int64_t stage_start(int64_t layers, int pp, int s)
{
	int64_t base = layers / pp, extra = layers % pp;
	return s * base + (s < extra ? s : extra);
}

int tpc__mcore_facts_of(const tpc_model_facts *f, tpc__mcore_facts *m, tpc_err *e)
{
	m->heads = f ? f->heads : 0;
	m->groups = f && f->kv_heads ? f->kv_heads : m->heads;
	m->d = f && f->head_dim ? f->head_dim : (f && f->hidden && m->heads ? f->hidden / m->heads : 0);
	if (!m->heads || !m->groups || !m->d || m->heads % m->groups)
		return tpc_err_set(e, TPC_EUSAGE,
				   "Megatron's linear_qkv is laid out per query group: give the head counts (--config, or --heads, --kv-heads, --head-dim)");
	return 0;
}

/* ---- shard ---- */

int tpc__mcore_check_groups(const tpc_shard_plan *sp, tpc__mcore_facts *mf, tpc_err *e)
{
	int ret = tpc__mcore_facts_of(&sp->facts, mf, e);
	int tp = sp->tp / sp->dp; /* a stage's ranks are tp x dp */
	if (!ret && mf->groups % tp)
		ret = tpc_err_set(e, TPC_EINPUT,
				  "Megatron splits query groups over tensor-parallel ranks: %lld groups (kv heads) do not divide by tp %d",
				  (long long)mf->groups, tp);
	return ret;
}

/* The attention's parts as the input's rows say them (the plan's family
 * first when it lists `layout`): q/k/v biases (Megatron's add_qkv_bias:
 * linear_qkv.bias, laid out per query group as the weight, loader_llama_mistral.py
 * set_attn_state; tp-split on axis 0 with it, extensions/transformer_engine.py:
 * 1611-1618) and q/k norms (qk_layernorm: self_attention.q_layernorm /
 * k_layernorm, a norm over each head of kv_channels, attention.py:1734-1751,
 * replicated over tp). A q/k norm of another size (OLMo 2's over the whole
 * projection) is no Megatron module: refused by name. */
int tpc__mcore_attn_of(const tpc_shard_plan *sp, const char *layout, const tpc__mcore_facts *mf, tpc__mcore_attn *at,
		       tpc_err *e)
{
	const tpc_family *pf = sp->plan && sp->plan->name ? tpc_family_find(sp->plan->name) : NULL;
	if (pf && !tpc_family_lists(pf->layouts, layout))
		pf = NULL;
	memset(at, 0, sizeof(*at));
	for (size_t i = 0; i < sp->n; i++) {
		const tpc_tensor *t = &sp->in->t[sp->t[i].in];
		bool bias = false;
		const tpc_tensor_row *w = tpc_family_classify_for(pf, layout, TPC_ECO_HF, t->name, NULL, NULL, &bias, NULL);
		tpc_role r = w ? w->role : TPC_ROLE_NONE;
		if (bias && (r == TPC_ROLE_ATTN_Q || r == TPC_ROLE_ATTN_K || r == TPC_ROLE_ATTN_V))
			at->qkv_bias = true;
		if (r != TPC_ROLE_ATTN_Q_NORM && r != TPC_ROLE_ATTN_K_NORM)
			continue;
		if (t->ndim != 1 || t->shape[0] != mf->d)
			return tpc_err_at(e, TPC_EINPUT, NULL, t->name,
					  "a q/k norm of %lld elements: Megatron's q_layernorm / k_layernorm norm each head of kv_channels %lld (attention.py:1734-1751); a norm over the whole projection is not written by the %s layout",
					  (long long)(t->ndim ? t->shape[0] : 0), (long long)mf->d, layout);
		at->qk_norm = true;
	}
	return 0;
}

int tpc__mcore_check(const tpc_shard_plan *sp, const char *layout, tpc__mcore_facts *mf, tpc_err *e)
{
	tpc__mcore_attn at;
	int ret;
	if ((ret = tpc__mcore_check_groups(sp, mf, e)) || (ret = tpc__mcore_check_stages(sp, e)) ||
	    (ret = tpc__mcore_attn_of(sp, layout, mf, &at, e)) || (ret = tpc__mcore_args_check(sp, layout, e)))
		return ret;
	if (sp->ep > 1 && sp->ep_placement != TPC_EP_CONTIGUOUS)
		return tpc_err_set(e, TPC_EUSAGE,
				   "Megatron's expert-parallel rank g holds experts [g*E/ep, (g+1)*E/ep) (moe_layer.py:187-195, experts.py:1532-1533): --ep-placement %s is not written by the %s layout",
				   tpc_ep_placement_name(sp->ep_placement), layout);
	return 0;
}

/* Pipeline stages as Megatron's arguments can say them: equal ones, or the
 * first and last stage's own counts and the middle ones equal
 * (--decoder-first/last-pipeline-num-layers). */
int tpc__mcore_check_stages(const tpc_shard_plan *sp, tpc_err *e)
{
	if (sp->pp > 1 && !sp->pp_layers && sp->layers % sp->pp)
		return tpc_err_set(e, TPC_EINPUT, "Megatron gives each pipeline stage the same number of layers: %lld layers over pp %d (--pp-layers: other first and last stages)",
				   (long long)sp->layers, sp->pp);
	/* uneven stages as Megatron says them: the first and the last stage's own
	 * counts, the middle ones equal (decoder_first/last_pipeline_num_layers) */
	for (int s = 2; sp->pp_layers && s < sp->pp - 1; s++)
		if (sp->pp_layers[s] != sp->pp_layers[1])
			return tpc_err_set(e, TPC_EINPUT,
					   "--pp-layers: Megatron's arguments give the middle stages the same number of layers (stage %d has %lld, stage 1 %lld)",
					   s, (long long)sp->pp_layers[s], (long long)sp->pp_layers[1]);
	return 0;
}

static int check(tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	tpc__mcore_facts mf;
	int ret;
	if ((ret = tpc__mcore_check(sp, "megatron", &mf, e)))
		return ret;
	if (o && o->moe_grouped_gemm)
		return tpc_err_set(e, TPC_EUSAGE,
				   "--moe-grouped-gemm: TEGroupedMLP's legacy state dict (per-gemm weightN tensors) is not written by the megatron layout (megatron-dist writes it)");
	/* a legacy set loads only at its own stages, and Megatron builds none
	 * without layers from these args (transformer_config.py:2302-2323:
	 * num_layers_in_first/last_pipeline_stage must be larger than 0, the
	 * middle stages share the rest) */
	for (int s = 0; sp->pp_layers && s < sp->pp; s++)
		if (!sp->pp_layers[s])
			return tpc_err_set(e, TPC_EINPUT,
					   "--pp-layers: stage %d holds no layer, which Megatron's first/last stage counts cannot say (they must be larger than 0), so Megatron could not load this set at its own stages; give every stage a layer, or write --layout megatron-dist (it loads at any pipeline size)",
					   s);
	const tpc_family *pf = plan_family(sp);
	for (size_t i = 0; i < sp->n; i++) {
		const char *n = sp->in->t[sp->t[i].in].name;
		bool known = row_of(pf, TPC_ECO_HF, n, NULL, NULL, NULL, NULL) != NULL;
		if (!known) {
			return tpc_err_at(e, TPC_EINPUT, NULL, n,
				    "the megatron layout knows Megatron-Core names for the LLaMA family and Mixtral; this tensor has none (drop it with --rules)");
		}
		const tpc_split *s = &sp->t[i].split;
		for (int k = 0; k < s->nparts && s->dim >= 0; k++)
			if (s->part[k].replicas > 1) {
				return tpc_err_at(e, TPC_EINPUT, NULL, n, "Megatron does not replicate key/value heads over ranks");
			}
	}
	return 0;
}

int tpc__mcore_adjust_plan(tpc_plan *plan, const tpc_ckpt *in, const tpc_model_facts *f, int tp, tpc_err *e)
{
	(void)in;
	(void)f;
	(void)tp;
	(void)e;
	plan->pad_multiple = VOCAB_DIVISIBLE; /* rows padded to a multiple of 128 * tp */
	for (size_t i = 0; i < plan->nrules; i++)
		if (plan->rules[i].kind == TPC_SPLIT_VOCAB)
			plan->rules[i].pad_multiple = 0;
	return 0;
}

static tpc_value *kv(tpc_value *d, const char *k, tpc_value *v)
{
	if (!d || !v || tpc_value_set(d, tpc_value_str(k, strlen(k)), v)) {
		tpc_value_unref(d);
		return NULL;
	}
	return d;
}

/* The attention and rope args under Megatron-LM's names (d98e8a6:
 * training/arguments.py for rotary_base, type int, and max_position_embeddings;
 * transformer_config.py's fields, which argument_utils.py makes dests of their
 * own names, for layernorm_epsilon, add_qkv_bias and qk_layernorm). With
 * --use-checkpoint-args Megatron takes back rotary_base, add_qkv_bias (force)
 * and max_position_embeddings (training/checkpointing.py:2272-2296); not
 * qk_layernorm or layernorm_epsilon, which its command line must give. */
static tpc_value *attn_args(tpc_value *st, const tpc_shard_plan *sp, const tpc__mcore_attn *at)
{
	double th = sp->facts.rope_theta;
	st = kv(st, "add_qkv_bias", tpc_value_bool(at->qkv_bias));
	if (at->qk_norm)
		st = kv(st, "qk_layernorm", tpc_value_bool(1));
	if (th > 0) /* --rotary-base is an int; a fractional theta stays a float */
		st = kv(st, "rotary_base", th == (double)(int64_t)th && th < 9e15 ? tpc_value_int((int64_t)th) : tpc_value_float(th));
	if (sp->facts.norm_eps > 0)
		st = kv(st, "layernorm_epsilon", tpc_value_float(sp->facts.norm_eps));
	if (sp->facts.max_pos > 0)
		st = kv(st, "max_position_embeddings", tpc_value_int(sp->facts.max_pos));
	return st;
}

/* argparse.Namespace(...) as pickle writes it: REDUCE(Namespace, ()) + BUILD(dict) */
tpc_value *tpc__mcore_args(const tpc_shard_plan *sp, const char *layout, const tpc__mcore_facts *mf, int64_t ffn,
			   int64_t vocab, int64_t orig, const tpc__mcore_moe *moe, const tpc__mcore_mla *mla)
{
	tpc__mcore_attn at;
	tpc_err ae;
	tpc_err_init(&ae);
	if (tpc__mcore_attn_of(sp, layout, mf, &at, &ae)) /* the layout's check refused it already */
		return NULL;
	tpc_value *st = tpc_value_new(TPC_V_DICT);
	st = kv(st, "num_layers", tpc_value_int(sp->layers));
	st = kv(st, "hidden_size", tpc_value_int(sp->facts.hidden ? sp->facts.hidden : mf->heads * mf->d));
	st = kv(st, "ffn_hidden_size", tpc_value_int(ffn));
	st = kv(st, "num_attention_heads", tpc_value_int(mf->heads));
	st = kv(st, "num_query_groups", tpc_value_int(mf->groups));
	st = kv(st, "group_query_attention", tpc_value_bool(mf->groups != mf->heads));
	st = kv(st, "kv_channels", tpc_value_int(mf->d));
	st = kv(st, "padded_vocab_size", tpc_value_int(vocab));
	st = kv(st, "make_vocab_size_divisible_by", tpc_value_int(VOCAB_DIVISIBLE));
	if (orig) /* the size before padding, where transformers' Megatron converters read it */
		st = kv(st, "orig_vocab_size", tpc_value_int(orig));
	st = kv(st, "tensor_model_parallel_size", tpc_value_int(sp->tp / sp->dp));
	if (sp->dp > 1) /* the ranks a save of this set had (experts over tp x dp) */
		st = kv(st, "data_parallel_size", tpc_value_int(sp->dp));
	st = kv(st, "pipeline_model_parallel_size", tpc_value_int(sp->pp));
	if (sp->pp_layers && sp->pp > 1) {
		/* uneven stages: the first and last stage's layers (training/arguments.py
		 * --decoder-first/last-pipeline-num-layers) */
		st = kv(st, "decoder_first_pipeline_num_layers", tpc_value_int(sp->pp_layers[0]));
		st = kv(st, "decoder_last_pipeline_num_layers", tpc_value_int(sp->pp_layers[sp->pp - 1]));
	}
	st = kv(st, "swiglu", tpc_value_bool(1));
	st = kv(st, "normalization", tpc_value_str("RMSNorm", 7));
	st = kv(st, "position_embedding_type", tpc_value_str("rope", 4));
	st = kv(st, "untie_embeddings_and_output_weights", tpc_value_bool(tpc_ckpt_find(sp->in, "lm_head.weight") >= 0));
	st = attn_args(st, sp, &at);
	st = tpc__mcore_rope_args(st, sp);
	st = kv(st, "add_bias_linear", tpc_value_bool(0));
	if (mla) {
		/* MLATransformerConfig's fields (transformer/transformer_config.py:
		 * 3278-3300); qk_layernorm puts the q_a / kv_a norms into the up
		 * projections (gpt_layer_specs.py:244-255) */
		st = kv(st, "multi_latent_attention", tpc_value_bool(1));
		st = kv(st, "qk_layernorm", tpc_value_bool(1));
		st = kv(st, "q_lora_rank", mla->q_lora_rank ? tpc_value_int(mla->q_lora_rank) : tpc_value_new(TPC_V_NONE));
		st = kv(st, "kv_lora_rank", tpc_value_int(mla->kv_lora_rank));
		st = kv(st, "qk_head_dim", tpc_value_int(mla->qk_head_dim));
		st = kv(st, "qk_pos_emb_head_dim", tpc_value_int(mla->qk_pos_emb_head_dim));
		st = kv(st, "v_head_dim", tpc_value_int(mla->v_head_dim));
	}
	if (moe) {
		/* training/checkpointing.py:2305-2315 takes these back (force) with
		 * --use-checkpoint-args; the expert sizes are parallel_state.py's */
		st = kv(st, "num_experts", tpc_value_int(moe->experts));
		st = kv(st, "moe_ffn_hidden_size", tpc_value_int(moe->ffn));
		if (moe->topk)
			st = kv(st, "moe_router_topk", tpc_value_int(moe->topk));
		st = kv(st, "moe_grouped_gemm", tpc_value_bool(moe->grouped));
		/* moe_utils.py:901-913: pre-softmax scores every expert before the
		 * top-k (no renormalisation); else the softmax of the top-k logits,
		 * which is a renormalised top-k of the full softmax */
		st = kv(st, "moe_router_pre_softmax", tpc_value_bool(moe->pre_softmax));
		if (moe->shared_ffn)
			st = kv(st, "moe_shared_expert_intermediate_size", tpc_value_int(moe->shared_ffn));
		/* moe_utils.py:915-929: sigmoid scores, the top-k chosen with the
		 * expert_bias added, weighed without it and renormalised */
		if (moe->sigmoid)
			st = kv(st, "moe_router_score_function", tpc_value_str("sigmoid", 7));
		if (moe->expert_bias)
			st = kv(st, "moe_router_enable_expert_bias", tpc_value_bool(1));
		if (moe->groups > 1 && moe->group_topk) {
			st = kv(st, "moe_router_num_groups", tpc_value_int(moe->groups));
			st = kv(st, "moe_router_group_topk", tpc_value_int(moe->group_topk));
		}
		if (moe->topk_scale > 0)
			st = kv(st, "moe_router_topk_scaling_factor", tpc_value_float(moe->topk_scale));
		st = kv(st, "expert_model_parallel_size", tpc_value_int(moe->ep));
		st = kv(st, "expert_tensor_parallel_size", tpc_value_int(moe->etp));
		if (moe->moe_layers) { /* gpt_layer_specs.py:648-671: 1 an MoE layer, 0 dense */
			tpc_value *fr = tpc_value_new(TPC_V_LIST);
			for (int64_t l = 0; fr && l < sp->layers; l++)
				if (tpc_value_append(fr, tpc_value_int(moe->moe_layers[l] ? 1 : 0))) {
					tpc_value_unref(fr);
					fr = NULL;
				}
			st = kv(st, "moe_layer_freq", fr);
		}
	}
	tpc_value *c = tpc_value_new(TPC_V_CALL);
	if (!st || !c || tpc_value_append(c, tpc_value_global("argparse", "Namespace")) ||
	    tpc_value_append(c, tpc_value_new(TPC_V_TUPLE)) || tpc_value_append(c, st)) {
		tpc_value_unref(c);
		return NULL;
	}
	return c;
}

static int add_named(tpc_ckpt *out, tpc_value *model, const char *mcore, const tpc_tensor *t, tpc_err *e)
{
	tpc_buf b = TPC_BUF_INIT;
	tpc_buf_adds(&b, "model.");
	tpc_buf_adds(&b, mcore);
	if (b.oom)
		return tpc_err_nomem(e);
	int64_t ix = tpc_ckpt_add_copy(out, b.p, t, e);
	tpc_buf_release(&b);
	if (ix < 0)
		return (int)ix;
	if (tpc_value_set(model, tpc_value_str(mcore, strlen(mcore)), tpc_value_tensor(ix)))
		return tpc_err_nomem(e);
	return 0;
}

tpc_role tpc__mcore_up_of(tpc_role gate)
{
	switch (gate) {
	case TPC_ROLE_FFN_GATE: return TPC_ROLE_FFN_UP;
	case TPC_ROLE_FFN_GATE_EXP: return TPC_ROLE_FFN_UP_EXP;
	case TPC_ROLE_FFN_GATE_SHEXP: return TPC_ROLE_FFN_UP_SHEXP;
	default: return TPC_ROLE_NONE;
	}
}

/* [q_g; k_g; v_g] for each of the rank's groups, over rank slices q, k, v */
int tpc__mcore_fuse_qkv(const tpc_tensor *q, const tpc_tensor *k, const tpc_tensor *v, const tpc__mcore_facts *mf,
			 tpc_tensor *out)
{
	int64_t hpg = mf->heads / mf->groups, d = mf->d, g = k->shape[0] / d;
	int np = 0, ret = 0;
	if (g < 1 || k->shape[0] % d || q->shape[0] != g * hpg * d || v->shape[0] != k->shape[0])
		return -1;
	tpc_tensor *parts = tpc_calloc((size_t)(3 * g), sizeof(*parts));
	if (!parts)
		return -1;
	for (int64_t i = 0; i < g && !ret; i++) {
		ret = tpc_tensor_narrow(&parts[np++], q, 0, i * hpg * d, hpg * d) ||
		      tpc_tensor_narrow(&parts[np++], k, 0, i * d, d) || tpc_tensor_narrow(&parts[np++], v, 0, i * d, d);
	}
	return tpc_tensor_cat_release(out, parts, np, 0, ret);
}

/* The MoE args of the set (moe->ffn 0: a dense model), from the input's
 * first expert and the plan (as layout_megatron_dist.c's write_common) */
static void moe_of(const tpc_shard_plan *sp, const tpc_family *pf, tpc__mcore_moe *moe)
{
	memset(moe, 0, sizeof(*moe));
	for (size_t i = 0; i < sp->n && !moe->ffn; i++) {
		const tpc_tensor *t = &sp->in->t[sp->t[i].in];
		const tpc_tensor_row *w = row_of(pf, TPC_ECO_HF, t->name, NULL, NULL, NULL, NULL);
		if (w && w->role == TPC_ROLE_FFN_GATE_EXP)
			moe->ffn = t->shape[0];
	}
	moe->experts = sp->experts > 0 ? sp->experts : sp->facts.experts;
	moe->topk = sp->facts.experts_per_tok;
	moe->ep = sp->ep > 1 ? sp->ep : 1;
	moe->etp = sp->tp / moe->ep;
	moe->pre_softmax = sp->facts.norm_topk < 0;
}

/* [gate; up] of the rank's slices (linear_fc1, the swiglu layout; an
 * expert's too), under Megatron-Core name mc */
static int fuse_gate(const tpc_family *f, const tpc_ckpt *rk, const tpc_tensor_row *w, const tpc_tensor *t, int64_t l,
		     int64_t x, bool bias, tpc_ckpt *out, tpc_value *model, const char *mc, tpc_err *e)
{
	const tpc_tensor *up = partner(f, rk, tpc__mcore_up_of(w->role), l, x, bias);
	tpc_tensor parts[2], fused;
	int ret;
	if (!up)
		return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "gate projection without its up projection");
	parts[0] = *t;
	parts[1] = *up;
	if (tpc_tensor_init_cat(&fused, parts, 2, 0))
		return tpc_err_nomem(e);
	ret = add_named(out, model, mc, &fused, e);
	tpc_tensor_release(&fused);
	return ret;
}

static int stored_rank(const tpc_shard_plan *sp, int r, tpc_ckpt *out, tpc_err *e)
{
	const tpc_ckpt *rk = &sp->rank[r];
	const tpc_family *pf = plan_family(sp);
	int stage = r / sp->tp, ret = 0;
	int64_t start = stage_start(sp->layers, sp->pp, stage), ffn = 0, vocab = 0, base = 0;
	tpc__mcore_moe moe;
	moe_of(sp, pf, &moe);
	if (moe.ffn && moe.ep > 1) /* moe_layer.py:187-188: EP rank g's first expert */
		base = (int64_t)(r % sp->tp / moe.etp) * (moe.experts / moe.ep);
	for (int s = 0; sp->pp_layers && s <= stage; s++) /* --pp-layers: the stages before this one */
		start = s ? start + sp->pp_layers[s - 1] : 0;
	tpc__mcore_facts mf;
	tpc_value *root = tpc_value_new(TPC_V_DICT), *model = tpc_value_new(TPC_V_DICT);
	if ((ret = tpc__mcore_facts_of(&sp->facts, &mf, e)))
		goto out;
	if (!root || !model) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < rk->n && !ret; i++) {
		const tpc_tensor *t = &rk->t[i];
		const char *n = t->name;
		int64_t l = -1, x = -1;
		bool bias = false;
		int part = -1;
		char mc[512];
		const tpc_family *f = NULL;
		const tpc_tensor_row *w = row_of(pf, TPC_ECO_HF, n, &l, &x, &bias, &f);
		if (w && x >= 0 && (x < base || (moe.ep > 1 && x >= base + moe.experts / moe.ep))) {
			tpc_err_at(e, TPC_EINPUT, NULL, n, "expert %lld is not EP rank %lld's", (long long)x,
				   (long long)(moe.ep > 1 ? base / (moe.experts / moe.ep) : 0));
			ret = TPC_EINPUT;
			break;
		}
		if (!w || !tpc_family_name(w, TPC_ECO_MEGATRON, l < 0 ? -1 : l - start, x < 0 ? -1 : x - base, bias, mc,
					   sizeof(mc), &part)) {
			tpc_err_at(e, TPC_EINPUT, NULL, n, "no Megatron-Core name for this tensor");
			ret = TPC_EINPUT;
			break;
		}
		if (w->role == TPC_ROLE_ATTN_Q) {
			const tpc_tensor *kk = partner(f, rk, TPC_ROLE_ATTN_K, l, -1, bias),
					 *vv = partner(f, rk, TPC_ROLE_ATTN_V, l, -1, bias);
			tpc_tensor fused;
			if (!kk || !vv || tpc__mcore_fuse_qkv(t, kk, vv, &mf, &fused)) {
				tpc_err_at(e, TPC_EINPUT, NULL, n, "cannot lay q, k and v out per query group (partners missing or sizes off)");
				ret = TPC_EINPUT;
				break;
			}
			ret = add_named(out, model, mc, &fused, e);
			tpc_tensor_release(&fused);
			continue;
		}
		if (w->role == TPC_ROLE_FFN_GATE || w->role == TPC_ROLE_FFN_GATE_EXP) {
			if (w->role == TPC_ROLE_FFN_GATE)
				ffn = t->shape[0] * sp->tp;
			ret = fuse_gate(f, rk, w, t, l, x, bias, out, model, mc, e);
			continue;
		}
		if (part > 0)
			continue; /* k, v and up: fused with their q / gate */
		if (w->role == TPC_ROLE_TOKEN_EMBD || w->role == TPC_ROLE_OUTPUT)
			vocab = t->shape[0] * sp->tp;
		ret = add_named(out, model, mc, t, e);
	}
	if (ret)
		goto out;
	if (!ffn) /* a stage without MLPs: any layer's gate says it */
		for (size_t i = 0; i < sp->n && !ffn; i++)
			if (strstr(sp->in->t[sp->t[i].in].name, ".mlp.gate_proj.weight"))
				ffn = sp->in->t[sp->t[i].in].shape[0];
	int64_t orig = 0;
	for (size_t i = 0; i < sp->n && !orig; i++)
		if (sp->t[i].split.kind == TPC_SPLIT_VOCAB && sp->t[i].split.dim == 0) {
			orig = sp->t[i].split.part[0].size;
			if (!vocab)
				vocab = orig + sp->t[i].split.part[0].pad;
		}
	if (!ffn)
		ffn = moe.ffn;
	tpc_value *args = tpc__mcore_args(sp, "megatron", &mf, ffn, vocab, orig, moe.ffn ? &moe : NULL, NULL);
	if (!args || tpc_value_set(root, tpc_value_str("args", 4), args) ||
	    tpc_value_set(root, tpc_value_str("checkpoint_version", 18), tpc_value_float(3.0)) ||
	    tpc_value_set(root, tpc_value_str("iteration", 9), tpc_value_int(0)) ||
	    tpc_value_set(root, tpc_value_str("model", 5), model)) {
		model = NULL;
		ret = tpc_err_nomem(e);
		goto out;
	}
	model = NULL;
	out->root = root;
	root = NULL;
out:
	tpc_value_unref(root);
	tpc_value_unref(model);
	return ret;
}

static int write_rank(const tpc_shard_plan *sp, int r, const tpc_ckpt *ck, const char *path, const tpc_write_opts *wo,
		      tpc_err *e)
{
	const tpc_format *f = tpc_format_by_name("torch");
	(void)sp;
	(void)r;
	if (!f)
		return tpc_err_set(e, TPC_EUSAGE, "the torch writer is not available in this build");
	return tpc__layout_write_file(f, false, ck, path, wo, e);
}

static void remove_rank(const char *path)
{
	char *dir = tpc_path_dir(path);
	unlink(path);
	if (dir) {
		rmdir(dir); /* mp_rank_TT, when empty */
		char *up = tpc_path_dir(dir);
		if (up)
			rmdir(up); /* release/, when empty */
		free(up);
	}
	free(dir);
}

static int write_extras(const tpc_shard_plan *sp, const char *dir, const tpc_shard_opts *o, tpc_err *e)
{
	char *t = tpc_path_join(dir, TRACKER);
	int ret = t ? tpc_write_file_atomic(t, "release", 7, o->force ? TPC_OUT_FORCE : 0, e) : tpc_err_nomem(e);
	free(t);
	if (!ret && !o->no_extras)
		ret = tpc__layout_copy_companions(sp, dir, o, NULL, false, e);
	return ret;
}

/* ---- reading back ---- */

/* what args says fills the facts not given otherwise */
static void facts_from_args(const tpc_value *root, tpc_model_facts *f, int64_t *layers, int *pp, tpc_megatron_args *out)
{
	tpc_megatron_args a;
	tpc_extras_megatron_args(root, &a);
	tpc_facts_from_megatron(f, &a, "the set's Megatron args");
	if (layers)
		*layers = a.layers;
	if (pp)
		*pp = (int)a.pp;
	if (out)
		*out = a;
}

/* The first expert of rank file `path` (mp_rank_TT[_PPP]_EEE/...): EEE, the
 * folder's last number, is its EP rank when args say ep > 1
 * (checkpointing.py:273-274), its experts from EEE * E/ep on
 * (moe_layer.py:187-188); 0 without expert parallelism, -1 when the folder
 * does not say. */
static int64_t expert_base_of(const char *path, const tpc_megatron_args *a)
{
	if (a->ep <= 1)
		return 0;
	char *dir = tpc_path_dir(path);
	const char *b = dir ? strrchr(dir, '/') : NULL, *nm = b ? b + 1 : dir, *u = nm ? strrchr(nm, '_') : NULL;
	char *end = NULL;
	long g = u && !strncmp(nm, "mp_rank_", 8) && u - nm > 8 ? strtol(u + 1, &end, 10) : -1;
	int64_t base = end && !*end && end - u == 4 && g >= 0 && g < a->ep && a->experts % a->ep == 0
			       ? g * (a->experts / a->ep) : -1;
	free(dir);
	return base;
}

int tpc__mcore_to_hf(tpc_ckpt *ck, size_t from, size_t to, const char *prefix, const char *layout, const tpc_family *fam,
		     int64_t start, int64_t expert_base, const tpc__mcore_facts *mf, const char *path, tpc_err *e)
{
	size_t pl = strlen(prefix);
	bool *keep = NULL;
	int ret = 0;
	for (size_t i = from; i < to && !ret; i++) {
		const char *n = ck->t[i].name;
		char hf[512];
		hf[0] = '\0';
		if (strncmp(n, prefix, pl) || strstr(n, "._extra_state"))
			continue; /* dropped below */
		int64_t l = -1, x = -1;
		bool bias = false;
		const tpc_family *f = NULL;
		const tpc_tensor_row *w = tpc_family_classify_for(fam, layout, TPC_ECO_MEGATRON, n + pl, &l, &x, &bias, &f);
		if (w && !w->name[TPC_ECO_MEGATRON])
			w = NULL;
		if (l >= 0)
			l += start;
		if (x >= 0)
			x += expert_base; /* a local expert's global number */
		if (w && w->role == TPC_ROLE_ATTN_Q) {
			/* per group [q; k; v]: q, k and v back as composites of group slices */
			const tpc_tensor *t = &ck->t[i];
			int64_t hpg = mf->heads / mf->groups, d = mf->d, per = (hpg + 2) * d;
			int64_t g = t->ndim >= 1 && t->shape[0] % per == 0 ? t->shape[0] / per : 0;
			if (!g) {
				tpc_err_at(e, TPC_EINPUT, path, n,
					    "linear_qkv has %lld rows, not a whole number of query groups of (%lld + 2) x %lld",
					    (long long)(t->ndim ? t->shape[0] : 0), (long long)hpg, (long long)d);
				ret = TPC_EINPUT;
				break;
			}
			static const tpc_role which[3] = {TPC_ROLE_ATTN_Q, TPC_ROLE_ATTN_K, TPC_ROLE_ATTN_V};
			for (int k = 0; k < 3 && !ret; k++) {
				int64_t off = k == 0 ? 0 : hpg * d + (k - 1) * d, len = k == 0 ? hpg * d : d;
				tpc_tensor cat;
				if (!tpc_family_name(tpc_family_row(f, which[k]), TPC_ECO_HF, l, -1, bias, hf, sizeof(hf), NULL) ||
				    tpc_tensor_ungroup(&cat, t, 0, g, per, off, len)) {
					ret = tpc_err_nomem(e);
				} else {
					ret = tpc__layout_add_copy(ck, hf, &cat, e);
					tpc_tensor_release(&cat);
				}
				t = &ck->t[i]; /* the table may have moved */
			}
			continue;
		}
		if (w && tpc__mcore_up_of(w->role)) {
			const tpc_tensor *t = &ck->t[i];
			int64_t rows = t->ndim >= 1 ? t->shape[0] : 0;
			tpc_tensor half;
			for (int k = 0; k < 2 && !ret; k++) {
				if (rows % 2 || tpc_tensor_narrow(&half, &ck->t[i], 0, k * rows / 2, rows / 2)) {
					ret = TPC_CORRUPT(e, path, -1, n, "linear_fc1 has an odd number of rows (%lld)", (long long)rows);
					break;
				}
				tpc_role rk = k ? tpc__mcore_up_of(w->role) : w->role;
				if (!tpc_family_name(tpc_family_row(f, rk), TPC_ECO_HF, l, x, false, hf, sizeof(hf), NULL))
					ret = tpc_err_nomem(e);
				else
					ret = tpc__layout_add_copy(ck, hf, &half, e);
				tpc_tensor_release(&half);
			}
			continue;
		}
		if (w && !tpc_family_name(w, TPC_ECO_HF, l, x, bias, hf, sizeof(hf), NULL))
			hf[0] = '\0';
		if (!hf[0]) {
			tpc_err_at(e, TPC_EINPUT, path, n, "no Hugging Face name for this Megatron-Core tensor");
			ret = TPC_EINPUT;
			break;
		}
		if ((ret = tpc__layout_add_copy(ck, hf, &ck->t[i], e)))
			break;
	}
	if (!ret && !(keep = tpc_calloc(ck->n + 1, sizeof(bool))))
		ret = tpc_err_nomem(e);
	for (size_t i = 0; !ret && i < ck->n; i++)
		keep[i] = i < from || i >= to;
	if (!ret) {
		tpc_value_unref(ck->root); /* the tree names Megatron's keys: a flat state dict from here */
		ck->root = NULL;
		ret = tpc_ckpt_filter(ck, keep, e);
	}
	free(keep);
	return ret;
}

/* The rank's optimizer state `key` in place of its parameters: model.NAME
 * becomes optim.state.NAME.KEY (the torch reader's, TPC_OPEN_OPTIMIZER:
 * distrib_optim.pt mapped by Megatron's buffer layout, each master checked
 * against its weight), under the parameter's name, so that what follows
 * (renaming, unfusing, the merge's joins) treats it as the parameter. */
static int state_in_place(tpc_ckpt *ck, const char *key, bool lenient, const char *path, tpc_err *e)
{
	size_t n0 = ck->n;
	bool *keep = NULL;
	tpc_buf b = TPC_BUF_INIT;
	int ret = 0;
	if (!ck->root || !tpc_value_get(ck->root, "optim")) {
		char *dir = tpc_path_dir(path), *sib = dir ? tpc_path_join(dir, "distrib_optim.pt") : NULL;
		ret = !sib ? tpc_err_nomem(e)
			   : tpc_err_at(e, TPC_EINPUT, sib, NULL,
					"missing: this rank's distributed optimizer state (what --use-distributed-optimizer saves beside model_optim_rng.pt) is not in the set");
		free(sib);
		free(dir);
		return ret;
	}
	for (size_t i = 0; i < n0 && !ret; i++) {
		const char *nm = ck->t[i].name;
		if (strncmp(nm, "model.", 6))
			continue;
		b.len = 0;
		tpc_buf_addf(&b, "optim.state.%s.%s", nm + 6, key);
		int64_t s = b.oom ? -1 : tpc_ckpt_find(ck, b.p);
		if (b.oom) {
			ret = tpc_err_nomem(e);
			break;
		}
		if (s < 0 && lenient)
			continue; /* a dense parameter whose state is EP rank 0's (add_ep_experts) */
		if (s < 0) {
			ret = tpc_err_at(e, TPC_EINPUT, path, nm + 6, "has no %s in the rank's optimizer state", key);
			break;
		}
		b.len = 0;
		tpc_buf_addf(&b, "\x01%s", nm); /* a scratch name until the parameters go */
		tpc_tensor t = ck->t[s];
		t.storage = -1;
		t.alias_of = -1;
		int64_t a = b.oom ? tpc_err_nomem(e) : tpc_ckpt_add_copy(ck, b.p, &t, e);
		ret = a < 0 ? (int)a : 0;
	}
	tpc_buf_release(&b);
	if (!ret && !(keep = tpc_calloc(ck->n + 1, sizeof(bool))))
		ret = tpc_err_nomem(e);
	for (size_t i = n0; !ret && i < ck->n; i++)
		keep[i] = true;
	if (!ret) {
		tpc_value_unref(ck->root); /* a flat state dict from here, as the model's */
		ck->root = NULL;
		ret = tpc_ckpt_filter(ck, keep, e);
	}
	for (size_t i = 0; !ret && i < ck->n; i++) {
		char *nm = tpc_strdup(ck->t[i].name + 1);
		ret = nm ? tpc_ckpt_rename(ck, (int64_t)i, nm, e) : tpc_err_nomem(e);
		free(nm);
	}
	free(keep);
	return ret;
}

/* A rank file with virtual pipeline stages holds its model chunks as
 * model0 ... modelV-1 (training/checkpointing.py generate_state_dict), each
 * numbering its layers from 0: chunk v's layer k becomes global layer
 * tpc_megatron_chunk_first_layer(...) + k (get_transformer_layer_offset,
 * even stages), under model.NAME as a rank without chunks names it. */
static int unchunk(tpc_ckpt *ck, const tpc_megatron_args *a, int pp_rank, const char *path, tpc_err *e)
{
	int64_t per = a->pp > 0 && a->vpp > 0 ? a->layers / (a->pp * a->vpp) : 0;
	tpc_buf b = TPC_BUF_INIT;
	uint64_t seen = 0;
	int ret = 0;
	if (a->vpp > 64)
		return tpc_err_at(e, TPC_EINPUT, path, NULL, "args say virtual_pipeline_model_parallel_size %lld (1 to 64 are read)",
				  (long long)a->vpp);
	if (a->uneven)
		return tpc_err_at(e, TPC_EINPUT, path, NULL,
				  "args set %s with virtual pipeline stages: which layers a model chunk holds is read for even stages only",
				  a->uneven);
	if (per < 1 || a->layers % (a->pp * a->vpp))
		return tpc_err_at(e, TPC_EINPUT, path, NULL,
				  "args say %lld layers over %lld pipeline stages of %lld model chunks: not whole chunks of layers (uneven virtual stages are not read)",
				  (long long)a->layers, (long long)a->pp, (long long)a->vpp);
	for (size_t i = 0; i < ck->n && !ret; i++) {
		const char *n = ck->t[i].name, *rest;
		char *end;
		long long v = -1, k = -1;
		if (!strncmp(n, "model.model", 11))
			n += 6; /* the state in place of the parameters (state_in_place): model.modelV.NAME */
		if (strncmp(n, "model", 5) || n[5] < '0' || n[5] > '9')
			continue;
		v = strtoll(n + 5, &end, 10);
		if (*end != '.' || v >= a->vpp)
			return tpc_err_at(e, TPC_EINPUT, path, n, "not in a model chunk below the %lld its args say", (long long)a->vpp);
		rest = end + 1;
		seen |= 1ull << v;
		b.len = 0;
		if (!strncmp(rest, "decoder.layers.", 15) && (k = strtoll(rest + 15, &end, 10)) >= 0 && *end == '.') {
			if (k >= per) {
				ret = tpc_err_at(e, TPC_EINPUT, path, n, "layer %lld of a model chunk of %lld layers", k, (long long)per);
				break;
			}
			tpc_buf_addf(&b, "model.decoder.layers.%lld%s",
				     (long long)(tpc_megatron_chunk_first_layer(a->layers, a->pp, a->vpp, pp_rank, v) + k), end);
		} else {
			tpc_buf_addf(&b, "model.%s", rest);
		}
		ret = b.oom ? tpc_err_nomem(e) : tpc_ckpt_rename(ck, (int64_t)i, b.p, e);
	}
	tpc_buf_release(&b);
	for (int64_t v = 0; v < a->vpp && !ret; v++)
		if (!(seen >> v & 1))
			ret = tpc_err_at(e, TPC_EINPUT, path, NULL, "args say %lld virtual pipeline stages, but it holds no model chunk 'model%lld'",
					 (long long)a->vpp, (long long)v);
	return ret;
}

static int add_ep_experts(tpc_ckpt *ck, const char *path, const tpc_megatron_args *a, const char *state, tpc_err *e);

static int open_rank(const char *path, const tpc_layout_rank_ctx *c, tpc_ckpt *ck, tpc_err *e)
{
	tpc_open_opts oo = {.flags = TPC_OPEN_OPTIMIZER};
	int ret = tpc_ckpt_open(ck, path, c->state ? &oo : NULL, e);
	tpc_model_facts f;
	int64_t layers = 0, start = -1;
	int pp = 0;
	tpc__mcore_facts mf;
	if (ret)
		return ret;
	memset(&f, 0, sizeof(f));
	if (c->facts)
		f = *c->facts;
	tpc_megatron_args a;
	if (c->state) { /* the tree the optimizer state came with has no args */
		tpc_ckpt own;
		tpc_ckpt_init(&own);
		ret = tpc_ckpt_open(&own, path, NULL, e);
		if (!ret)
			facts_from_args(own.root, &f, &layers, &pp, &a);
		tpc_ckpt_release(&own);
		if (ret || (ret = state_in_place(ck, c->state, false, path, e)))
			return ret;
	} else {
		facts_from_args(ck->root, &f, &layers, &pp, &a);
	}
	if ((ret = tpc__mcore_facts_of(&f, &mf, e))) {
		tpc_err_path(e, path);
		return ret;
	}
	int64_t base = expert_base_of(path, &a);
	if (base < 0)
		return tpc_err_at(e, TPC_EINPUT, path, NULL,
				  "args say expert_model_parallel_size %lld (%lld experts), but the rank folder names no EP rank below it (mp_rank_TT[_PPP]_EEE)",
				  (long long)a.ep, (long long)a.experts);
	bool ep_union = a.ep > 1 && (!a.etp || a.etp == a.tp) && !c->names; /* add_ep_experts */
	if (a.vpp > 1 && a.ep > 1)
		return tpc_err_at(e, TPC_EINPUT, path, NULL, "virtual pipeline stages with expert parallelism: not read yet");
	if (a.vpp > 1) { /* global layer numbers already */
		if ((ret = unchunk(ck, &a, c->pp_rank, path, e)))
			return ret;
		return tpc__mcore_to_hf(ck, 0, ck->n, "model.", "megatron", NULL, 0, base, &mf, path, e);
	}
	/* global layer numbers: the stage's first layer */
	for (size_t i = 0; c->names && i < c->nnames; i++) {
		int64_t l;
		const char *rest;
		if (hf_layer(c->names[i], &l, &rest) && (start < 0 || l < start))
			start = l;
	}
	if (start < 0 && a.uneven && c->pp > 1 && strncmp(a.uneven, "decoder_", 8))
		return tpc_err_at(e, TPC_EINPUT, path, NULL,
				  "args set %s: which layers pipeline stage %d holds is read for even stages and decoder_first/last_pipeline_num_layers only",
				  a.uneven, c->pp_rank);
	if (start < 0 && (a.first > 0 || a.last > 0) && layers && c->pp > 1) {
		int64_t n;
		tpc_megatron_chunk_layers(layers, c->pp, 1, a.first, a.last, c->pp_rank, 0, &start, &n);
	}
	if (start < 0)
		start = layers && c->pp ? stage_start(layers, c->pp, c->pp_rank) : 0;
	if (ep_union && (ret = add_ep_experts(ck, path, &a, c->state, e)))
		return ret;
	return tpc__mcore_to_hf(ck, 0, ck->n, "model.", "megatron", NULL, start, base, &mf, path, e);
}

/* ---- sets Megatron wrote (below: expert-parallel ones) ---- */

static bool parse_rank_dir(const char *n, int *t, int *p)
{
	int a, b, c, k = -1;
	if (sscanf(n, "mp_rank_%2d_%3d%n", &a, &b, &k) == 2 && k == 14 && !n[k]) {
		*t = a;
		*p = b;
		return true;
	}
	k = -1; /* mp_rank_TT_PPP_EEE: expert parallelism at pp > 1 (geometry reads the args) */
	if (sscanf(n, "mp_rank_%2d_%3d_%3d%n", &a, &b, &c, &k) == 3 && k == 18 && !n[k]) {
		*t = a;
		*p = b;
		return true;
	}
	k = -1;
	if (sscanf(n, "mp_rank_%2d%n", &a, &k) == 1 && k == 10 && !n[k]) {
		*t = a;
		*p = -1;
		return true;
	}
	return false;
}

static char *rank_path(const char *dir, int t, int p, int tp);

/* The iteration folder of a save folder (latest_checkpointed_iteration.txt
 * names it), or dir itself when it holds the mp_rank folders (an
 * iter_NNNNNNN/ or release/ given as it is: training/checkpointing.py:
 * 242-270, get_checkpoint_name). NULL: neither. */
static char *iter_of(const char *dir)
{
	char *it = tpc_extras_megatron_iter(dir);
	int t, p;
	if (!it && tpc__layout_max_ranks(dir, parse_rank_dir, &t, &p))
		it = tpc_strdup(dir);
	return it;
}

static bool detect_dir(const char *dir)
{
	char *it = iter_of(dir);
	int maxt, maxp;
	bool yes = tpc__layout_max_ranks(it, parse_rank_dir, &maxt, &maxp);
	free(it);
	return yes;
}

/* ---- expert-parallel sets Megatron wrote ----
 *
 * With expert parallelism over data-parallel ranks (ep x etp above tp: the
 * expert tensor-parallel size etp = tp, Megatron's default) the legacy save
 * has a folder per (tp rank, pp rank, EP rank), mp_rank_TT[_PPP]_EEE
 * (checkpointing.py:267-274), written by every rank whose dp or expert-dp
 * rank is 0 (:780-797): each holds the tp rank's dense slices (the same on
 * every EP rank) and EP rank EEE's E / EP experts (SequentialMLP's
 * local_experts.i, global EEE x E/EP + i: moe_layer.py:187-195). Rank (t,
 * p) reads as EP rank 0's folder with the other EP ranks' experts added
 * (add_ep_experts). Sets whose etp is below tp (tpconv's own, one folder
 * per tp rank) keep their manifest's path. */
static char *ep_folder(const char *it, int t, int p, int pp, int g)
{
	char buf[64];
	if (pp > 1)
		snprintf(buf, sizeof(buf), "mp_rank_%02d_%03d_%03d/" RANK_FILE, t, p, g);
	else
		snprintf(buf, sizeof(buf), "mp_rank_%02d_%03d/" RANK_FILE, t, g);
	return tpc_path_join(it, buf);
}

static int ep_geometry(const char *dir, const tpc_megatron_args *a, int tp_flag, int pp_flag, int *tp, int *pp,
		       tpc_err *e)
{
	int64_t atp = a->tp > 0 ? a->tp : 1, app = a->pp > 0 ? a->pp : 1;
	if (a->etp && a->etp != atp)
		return tpc_err_at(e, TPC_EINPUT, dir, NULL,
				  "an expert-parallel legacy set with expert_tensor_parallel_size %lld under tp %lld (args) without tpconv's manifest is not read (only etp = tp, Megatron's default)",
				  (long long)a->etp, (long long)atp);
	if (a->experts <= 0 || a->experts % a->ep)
		return tpc_err_at(e, TPC_EINPUT, dir, NULL, "args say expert_model_parallel_size %lld but %lld experts",
				  (long long)a->ep, (long long)a->experts);
	if ((tp_flag && tp_flag != atp) || (pp_flag && pp_flag != app))
		return tpc_err_at(e, TPC_EINPUT, dir, NULL, "an expert-parallel set of tp %lld x pp %lld (args), not tp %d x pp %d",
				  (long long)atp, (long long)app, tp_flag ? tp_flag : (int)atp, pp_flag ? pp_flag : (int)app);
	*tp = (int)atp;
	*pp = (int)app;
	char *it = iter_of(dir);
	int ret = it ? 0 : tpc_err_nomem(e);
	for (int p = 0; p < *pp && !ret; p++)
		for (int t = 0; t < *tp && !ret; t++)
			for (int g = 0; g < a->ep && !ret; g++) {
				char *f = ep_folder(it, t, p, *pp, g);
				if (!f)
					ret = tpc_err_nomem(e);
				else if (!tpc_exists(f))
					ret = tpc_err_at(e, TPC_EINPUT, f, NULL,
							 "missing: tp rank %d, pp rank %d, EP rank %d's file of an expert-parallel set (args: expert_model_parallel_size %lld, %lld experts)",
							 t, p, g, (long long)a->ep, (long long)a->experts);
				free(f);
			}
	free(it);
	return ret;
}

/* t's sources (and its parts') through map (-1: not a file): -1 when one
 * is not. */
static int remap_src(tpc_tensor *t, const int *map, size_t n)
{
	if (t->src >= 0 && ((size_t)t->src >= n || map[t->src] < 0))
		return -1;
	if (t->src >= 0)
		t->src = map[t->src];
	t->storage = -1;
	t->alias_of = -1;
	for (int k = 0; k < t->nparts; k++)
		if (remap_src(&t->parts[k], map, n))
			return -1;
	return 0;
}

/* Megatron-Core name n of a routed expert's tensor ("...mlp.experts.
 * local_experts.I.REST"): *at the offset of I, *i its number, *rest past
 * it; false for any other tensor. Its layer (the stage's number) in *l. */
static bool local_expert(const char *n, size_t *at, int64_t *i, const char **rest, int64_t *l)
{
	static const char key[] = ".mlp.experts.local_experts.";
	const char *x = strstr(n, key), *d = strstr(n, "decoder.layers.");
	char *end;
	if (!x || !d)
		return false;
	*l = strtoll(d + 15, &end, 10);
	*at = (size_t)(x - n) + sizeof(key) - 1;
	*i = strtoll(n + *at, &end, 10);
	*rest = end;
	return end != n + *at && *end == '.' && *i >= 0;
}

/* ck's tensors in Megatron's order with EP ranks 1 .. EP-1's experts
 * (ck's from first on) after EP rank 0's of the same layer. */
static int ep_order(tpc_ckpt *ck, size_t first, tpc_err *e)
{
	int64_t *order = tpc_calloc(ck->n + 1, sizeof(int64_t)), *layer = tpc_calloc(ck->n + 1, sizeof(int64_t));
	bool *done = tpc_calloc(ck->n + 1, sizeof(bool));
	size_t k = 0, at;
	int64_t i;
	const char *rest;
	int ret = order && layer && done ? 0 : tpc_err_nomem(e);
	for (size_t j = 0; !ret && j < ck->n; j++)
		if (!local_expert(ck->t[j].name, &at, &i, &rest, &layer[j]))
			layer[j] = -1;
	for (size_t j = 0; !ret && j < first; j++) {
		order[k++] = (int64_t)j;
		if (layer[j] < 0 || (j + 1 < first && layer[j + 1] == layer[j]))
			continue; /* not the last of its layer's experts */
		for (size_t x = first; x < ck->n; x++)
			if (!done[x] && layer[x] == layer[j])
				order[k++] = (int64_t)x, done[x] = true;
	}
	for (size_t x = first; !ret && x < ck->n; x++)
		if (!done[x])
			order[k++] = (int64_t)x;
	if (!ret)
		ret = tpc_ckpt_permute(ck, order, e);
	free(order);
	free(layer);
	free(done);
	return ret;
}

/* Rank (t, p) of an expert-parallel set (ck: EP rank 0's file, under
 * Megatron-Core names): EP ranks 1 .. EP-1's experts added, local expert i
 * of EP rank x as local_experts.(x E/EP + i), which the renaming then numbers
 * from EP rank 0's base (0), each after EP rank 0's experts of its layer;
 * their dense tensors, EP rank 0's again, checked for shape and dtype and
 * left. With `state`, each rank's optimizer state in place of its
 * parameters (state_in_place), the dense parameters' from EP rank 0's. */
static int add_ep_experts(tpc_ckpt *ck, const char *path, const tpc_megatron_args *a, const char *state, tpc_err *e)
{
	char *dir = tpc_path_dir(path), *it = dir ? tpc_path_dir(dir) : NULL;
	const char *nm = dir ? tpc_path_base(dir) : NULL;
	int t = 0, p = 0, g = -1, k = -1, ret = 0;
	size_t first = ck->n;
	int64_t per = a->experts / a->ep;
	tpc_buf b = TPC_BUF_INIT;
	if (!it)
		ret = tpc_err_nomem(e);
	else if (a->pp > 1 ? sscanf(nm, "mp_rank_%2d_%3d_%3d%n", &t, &p, &g, &k) != 3 || k != 18
			   : sscanf(nm, "mp_rank_%2d_%3d%n", &t, &g, &k) != 2 || k != 14)
		ret = tpc_err_at(e, TPC_EINPUT, path, NULL, "not in an mp_rank_TT%s_EEE folder", a->pp > 1 ? "_PPP" : "");
	for (int x = 1; x < a->ep && !ret && g == 0; x++) {
		char *f = ep_folder(it, t, p, (int)a->pp, x);
		tpc_open_opts oo = {.flags = TPC_OPEN_OPTIMIZER};
		tpc_ckpt o;
		int *map = NULL;
		tpc_ckpt_init(&o);
		ret = !f ? tpc_err_nomem(e) : tpc_ckpt_open(&o, f, state ? &oo : NULL, e);
		if (!ret && state) /* its dense parameters' state is EP rank 0's (distrib_optim.pt's None) */
			ret = state_in_place(&o, state, true, f, e);
		if (!ret && !(map = tpc_calloc(o.nsrc + 1, sizeof(int))))
			ret = tpc_err_nomem(e);
		for (size_t i = 0; !ret && i < o.nsrc; i++) { /* its files become ck's sources too */
			const tpc_map *sm = tpc_ckpt_source(&o, (int)i);
			map[i] = -1;
			if (sm && sm->fd >= 0)
				ret = tpc_ckpt_add_file(ck, sm->path, &map[i], e);
		}
		for (size_t i = 0; i < o.n && !ret; i++) {
			const char *n = o.t[i].name, *rest;
			size_t at;
			int64_t li, l;
			tpc_tensor c;
			if (strncmp(n, "model.", 6) || strstr(n, "._extra_state"))
				continue;
			if (!local_expert(n, &at, &li, &rest, &l)) {
				int64_t d = tpc_ckpt_find(ck, n);
				if (d < 0 || ck->t[d].dtype != o.t[i].dtype || ck->t[d].ndim != o.t[i].ndim ||
				    memcmp(ck->t[d].shape, o.t[i].shape, sizeof(int64_t) * (size_t)o.t[i].ndim))
					ret = tpc_err_at(e, TPC_EINPUT, f, n, d < 0 ? "EP rank %d's dense tensor is not in EP rank 0's file"
										: "EP rank %d's copy has another shape or dtype than EP rank 0's", x);
				continue;
			}
			if (li >= per) {
				ret = tpc_err_at(e, TPC_EINPUT, f, n, "local expert %lld of an EP rank holding %lld", (long long)li, (long long)per);
				break;
			}
			b.len = 0;
			tpc_buf_add(&b, n, at);
			tpc_buf_addf(&b, "%lld%s", (long long)(x * per + li), rest);
			if (b.oom || tpc_tensor_copy(&c, &o.t[i])) {
				ret = tpc_err_nomem(e);
				break;
			}
			if (remap_src(&c, map, o.nsrc))
				ret = tpc_err_at(e, TPC_EINPUT, f, n, "its data is not in the rank's files");
			else if (tpc_ckpt_find(ck, b.p) >= 0)
				ret = tpc_err_at(e, TPC_EINPUT, f, n, "local expert %lld of EP rank %d: expert %lld is already EP rank 0's",
						 (long long)li, x, (long long)(x * per + li));
			if (!ret) {
				int64_t ad = tpc_ckpt_add_copy(ck, b.p, &c, e);
				ret = ad < 0 ? (int)ad : 0;
			}
			tpc_tensor_release(&c);
		}
		tpc_ckpt_release(&o);
		free(map);
		free(f);
	}
	tpc_buf_release(&b);
	free(it);
	free(dir);
	return ret || first == ck->n ? ret : ep_order(ck, first, e);
}


static int geometry(const char *dir, int tp_flag, int pp_flag, int *tp, int *pp, tpc_err *e)
{
	/* mp_rank_TT_EEE reads as mp_rank_TT_PPP: an expert-parallel set's
	 * sizes are its args' */
	tpc_megatron_args a;
	char *r0 = rank_path(dir, 0, 0, 1);
	bool ep = r0 && tpc_extras_megatron_args_at(r0, &a) && a.ep > 1;
	free(r0);
	if (ep)
		return ep_geometry(dir, &a, tp_flag, pp_flag, tp, pp, e);
	char *it = iter_of(dir);
	int maxt, maxp;
	tpc__layout_max_ranks(it, parse_rank_dir, &maxt, &maxp);
	free(it);
	*tp = tp_flag ? tp_flag : maxt + 1;
	*pp = pp_flag ? pp_flag : (maxp >= 0 ? maxp + 1 : 1);
	if (maxt < 0 || *tp < maxt + 1 || *pp < maxp + 1)
		return tpc_err_at(e, TPC_EINPUT, dir, NULL, "mp_rank folders for tp rank %d / pp rank %d, but tp %d / pp %d", maxt, maxp, *tp, *pp);
	return 0;
}

static char *rank_path(const char *dir, int t, int p, int tp)
{
	char *it = iter_of(dir), buf[64], *out = NULL;
	(void)tp;
	if (!it)
		return tpc_path_join(dir, "release/mp_rank_00/" RANK_FILE);
	snprintf(buf, sizeof(buf), "mp_rank_%02d_%03d/" RANK_FILE, t, p);
	out = tpc_path_join(it, buf);
	if (out && !tpc_exists(out) && p == 0) {
		free(out);
		snprintf(buf, sizeof(buf), "mp_rank_%02d/" RANK_FILE, t);
		out = tpc_path_join(it, buf);
	}
	if (out && !tpc_exists(out)) { /* an expert-parallel set at pp > 1: EP rank 0's folder */
		char *ep = ep_folder(it, t, p, 2, 0);
		if (ep && tpc_exists(ep)) {
			free(out);
			out = ep;
		} else {
			free(ep);
		}
	}
	free(it);
	return out;
}

static void foreign_facts(const char *dir, tpc_model_facts *f)
{
	char *p = rank_path(dir, 0, 0, 1);
	tpc_ckpt ck;
	tpc_err e;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	if (p && !tpc_ckpt_open(&ck, p, NULL, &e))
		facts_from_args(ck.root, f, NULL, NULL, NULL);
	tpc_ckpt_release(&ck);
	free(p);
}

static const char *const formats[] = {"torch", NULL};

const tpc_layout tpc_layout_megatron = {
	.name = "megatron", .desc = "release/mp_rank_TT[_PPP]/model_optim_rng.pt, Megatron-Core names (Megatron-LM legacy)",
	.formats = formats, .set_format = "megatron-shards",
	.companions_at_top = true, .uneven_stages = true, .expert_parallel = true, .merge_state = true,
	.rank_name_ep = rank_name, .check = check, .adjust_plan = tpc__mcore_adjust_plan,
	.stored_rank = stored_rank, .write_rank = write_rank, .remove_rank = remove_rank,
	.open_rank = open_rank, .write_extras = write_extras,
	.detect_dir = detect_dir, .foreign_geometry = geometry, .foreign_rank_path = rank_path, .foreign_facts = foreign_facts,
};
