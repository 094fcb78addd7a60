/* layout_vllm.c - vLLM's pre-sharded checkpoint (load_format="sharded_state").
 *
 * What vLLM loads, from vllm-project/vllm at 01ed47b4 (the commit FRAMEWORKS.md
 * cites):
 *   - vllm/model_executor/model_loader/sharded_state_loader.py:
 *     DEFAULT_PATTERN = "model-rank-{rank}-part-{part}.safetensors", rank =
 *     get_tensor_model_parallel_rank() (no pipeline rank in the name, so one
 *     stage only); save_model() starts a new part when total + size >
 *     max_size; load_weights() globs the rank's parts and does
 *     state_dict[key] for every file tensor (an unknown key is a KeyError),
 *     and raises "Missing keys" for a parameter no file held. The state dict
 *     is filtered by _filter_subtensors(): tensors sharing storage are kept
 *     once, under the smaller key - so a tied lm_head/embed_tokens pair is
 *     stored once as "lm_head.weight" ('l' < 'm').
 *   - vllm/model_executor/models/llama.py (LlamaForCausalLM, also used by
 *     Mistral; Qwen2/Qwen3 the same names): stacked_params_mapping fuses
 *     ".q_proj"/".k_proj"/".v_proj" into ".qkv_proj" (shard ids q, k, v) and
 *     ".gate_proj"/".up_proj" into ".gate_up_proj" (0, 1); lm_head is tied to
 *     embed_tokens when config.tie_word_embeddings; "rotary_emb.inv_freq" is
 *     skipped by the HF loader and is no parameter.
 *   - vllm/model_executor/layers/linear.py QKVParallelLinear: per rank
 *     heads/tp query heads; tp >= kv heads gives one kv head per rank,
 *     num_kv_head_replicas = tp / kv heads, head = tp_rank // replicas
 *     (what tpconv's KV replication does); the rank's parameter is
 *     [q_r; k_r; v_r]. MergedColumnParallelLinear: [gate_r; up_r].
 *     RowParallelLinear keeps the whole bias on every rank (added by rank 0).
 *   - vllm/model_executor/models/mixtral.py (MixtralForCausalLM): attention
 *     as LLaMA's; block_sparse_moe.gate a ReplicatedLinear (whole); the
 *     experts one FusedMoE (vllm/model_executor/layers/fused_moe/layer.py):
 *     make_expert_params_mapping maps experts.E.w1 and .w3 to
 *     experts.w13_weight (shard ids w1, w3) and .w2 to experts.w2_weight;
 *     _load_w13 puts w1's rank rows in the first half of expert E's
 *     [2 x rows/tp, hidden] and w3's in the second, _load_w2 w2's rank
 *     columns: w13_weight [E, 2 x rows/tp, hidden], w2_weight
 *     [E, hidden, rows/tp], every expert on every rank (no expert
 *     parallelism: this layout refuses --ep).
 *   - vllm/model_executor/models/qwen3_moe.py@002456df, qwen2_moe.py@002fb907
 *     (Qwen3MoeForCausalLM, Qwen2MoeForCausalLM): attention as LLaMA's (Qwen3's
 *     q_norm/k_norm whole), the experts one FusedMoE as Mixtral's
 *     (get_expert_mapping: gate_proj shard w1, up_proj w3 of w13_weight,
 *     down_proj w2_weight), the router mlp.gate a ReplicatedLinear, and
 *     "Tensor parallel size ... is greater than the number of experts"
 *     raised in the SparseMoeBlock (record field vllm_tp_le_experts).
 *     Qwen2-MoE's shared expert is a Qwen2MoeMLP (gate_up_proj
 *     MergedColumnParallel, down_proj RowParallel) holding shared_expert_gate
 *     (torch.nn.Linear(hidden, 1), whole) as its expert_gate, and
 *     SharedFusedMoE keeps it as the submodule _shared_experts
 *     (layers/fused_moe/shared_fused_moe.py@03974a3f): the state dict has
 *     each of its tensors under two or three paths and _filter_subtensors
 *     keeps the smallest, mlp.experts._shared_experts.*; the family table's
 *     vLLM column names them (table_named).
 *   - vllm/model_executor/models/gemma2.py@025adfb9, gemma3.py@004dc924
 *     (Gemma2ForCausalLM, Gemma3ForCausalLM): LLaMA's fused linears, the
 *     sandwich norms GemmaRMSNorm, which computes x * (1 + w) at run time
 *     (layers/layernorm.py), so the file holds the weights as stored; no
 *     lm_head (compute_logits uses model.embed_tokens; assert
 *     config.tie_word_embeddings; record field vllm_no_lm_head); the
 *     embedding normalizer a non-persistent buffer since vLLM PR #19788, so
 *     not in the state dict.
 *   - vllm/model_executor/models/olmo2.py@028aedf6 (Olmo2ForCausalLM, which
 *     registry.py also gives Olmo3ForCausalLM): LLaMA's fused linears,
 *     q_norm [hidden] and k_norm [kv heads x head_dim] whole, the post
 *     norms whole; _apply_qk_norm all-gathers q and k before the norms, so
 *     kv heads cannot be replicated (record field vllm_tp_le_kv_heads).
 *   - vllm/model_executor/layers/vocab_parallel_embedding.py:
 *     DEFAULT_VOCAB_PADDING_SIZE = 64; pad_vocab_size() rounds the vocabulary
 *     up to a multiple of 64, vocab_range_from_global_vocab_size() gives rank
 *     r rows [r * Vp/tp, (r+1) * Vp/tp) (divide() asserts tp | Vp), padding
 *     rows are zero. tpconv pads to a multiple of Vp itself (pad_multiple =
 *     Vp / tp), which is the same rows.
 *
 * So a vllm set is tpconv's split of a LLaMA-family model with each rank's
 * q/k/v and gate/up slices concatenated (Mixtral's experts stacked) under
 * vLLM's names, vocab padded as
 * vLLM pads it, tied weights once, and the model's config and tokenizer
 * beside (vLLM reads config.json from the same folder). Reading one back
 * un-fuses by the head counts, so merge and verify see the tensors as split.
 * Only tensors whose vLLM parameter is known are accepted: anything else is
 * refused by name rather than written where vLLM would fail or misload it.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpc_buf.h"
#include "tpc_cfg.h"
#include "tpc_family.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_layout.h"
#include "tpc_shard.h"
#include "tpc_util.h"

#define VLLM_VOCAB_PAD 64

/* Architectures whose vLLM parameter names are these. */
/* HF name classes and the split vLLM gives them. */
typedef enum cls {
	C_NONE = 0,
	C_EMBED,   /* model.embed_tokens.weight: vocab */
	C_LMHEAD,  /* lm_head.weight: vocab */
	C_Q,       /* self_attn.q_proj.*: col, query heads */
	C_KV,      /* self_attn.k_proj.* / v_proj.*: col, kv heads */
	C_QKV,     /* self_attn.qkv_proj.*: col in parts q, kv, kv (Phi-3) */
	C_O,       /* self_attn.o_proj.weight: row */
	C_GATEUP,  /* mlp.gate_proj.* / up_proj.*: col */
	C_GATEUP2, /* mlp.gate_up_proj.*: col in 2 parts (Phi-3) */
	C_DOWN,    /* mlp.down_proj.weight: row */
	C_REPL,    /* norms, q_norm/k_norm, o_proj/down_proj biases: whole on every rank */
	C_ROUTER,  /* Mixtral block_sparse_moe.gate.weight: whole (ReplicatedLinear) */
	C_EXPCOL,  /* Mixtral experts.E.w1 / w3: col, stacked into experts.w13_weight */
	C_EXPROW,  /* Mixtral experts.E.w2: row, stacked into experts.w2_weight */
	C_SHCOL,   /* a shared expert's gate/up: col, fused under the name the table gives */
	C_SHROW,   /* a shared expert's down: row, under the table's name */
	C_SHGATE,  /* a shared expert's gate (Qwen2-MoE shared_expert_gate): whole, the table's name */
} cls;

/* The class of a Hugging Face name, from the tensor table of the model's
 * family (fam, from config.json; NULL: none said) or of the records that list
 * this layout (lib/tpc_family.c), so that a tensor the family lacks is still
 * refused by what it is. */
static cls classify(const tpc_family *fam, const char *n)
{
	bool bias = false;
	const tpc_tensor_row *w = tpc_family_classify_for(fam, "vllm", TPC_ECO_HF, n, NULL, NULL, &bias, NULL);
	switch (w ? w->role : TPC_ROLE_NONE) {
	case TPC_ROLE_TOKEN_EMBD: return C_EMBED;
	case TPC_ROLE_OUTPUT: return C_LMHEAD;
	case TPC_ROLE_ATTN_Q: return C_Q;
	case TPC_ROLE_ATTN_K:
	case TPC_ROLE_ATTN_V: return C_KV;
	case TPC_ROLE_ATTN_QKV: return C_QKV;
	case TPC_ROLE_ATTN_OUT: return bias ? C_REPL : C_O;
	case TPC_ROLE_FFN_GATE:
	case TPC_ROLE_FFN_UP: return C_GATEUP;
	case TPC_ROLE_FFN_GATE_UP: return C_GATEUP2;
	case TPC_ROLE_FFN_DOWN: return C_DOWN;
	case TPC_ROLE_OUTPUT_NORM:
	case TPC_ROLE_ATTN_NORM:
	case TPC_ROLE_FFN_NORM:
	case TPC_ROLE_ATTN_Q_NORM:
	case TPC_ROLE_ATTN_K_NORM:
	case TPC_ROLE_ATTN_POST_NORM:
	case TPC_ROLE_FFN_POST_NORM: return C_REPL;
	case TPC_ROLE_FFN_GATE_SHEXP:
	case TPC_ROLE_FFN_UP_SHEXP: return C_SHCOL;
	case TPC_ROLE_FFN_DOWN_SHEXP: return C_SHROW;
	case TPC_ROLE_FFN_GATE_INP_SHEXP: return C_SHGATE;
	case TPC_ROLE_FFN_GATE_INP: return C_ROUTER;
	case TPC_ROLE_FFN_GATE_EXP:
	case TPC_ROLE_FFN_UP_EXP: return C_EXPCOL;
	case TPC_ROLE_FFN_DOWN_EXP: return C_EXPROW;
	default: return C_NONE;
	}
}

/* Whether row w's vLLM parameter is named by the table alone, not by the
 * q/k/v and gate/up swaps: a shared expert, which vLLM's state dict holds
 * under more than one module path (SharedFusedMoE keeps it as
 * experts._shared_experts besides the block's shared_expert, and Qwen2-MoE's
 * shared_expert_gate also as the MLP's expert_gate); _filter_subtensors keeps
 * the smallest key, the name the record gives. */
static bool table_named(const tpc_tensor_row *w)
{
	switch (w ? w->role : TPC_ROLE_NONE) {
	case TPC_ROLE_FFN_GATE_SHEXP:
	case TPC_ROLE_FFN_UP_SHEXP:
	case TPC_ROLE_FFN_DOWN_SHEXP:
	case TPC_ROLE_FFN_GATE_INP_SHEXP: return true;
	default: return false;
	}
}

/* The rows vLLM fuses Hugging Face tensor n into (g, in part order; 1: not
 * fused), by family f's table; its layer and bias in *l and *bias. 0 when
 * the table has no vLLM name for it. */
static int vllm_group(const tpc_family *f, const char *n, const tpc_tensor_row **g, int64_t *l, bool *bias)
{
	const tpc_tensor_row *w = f ? tpc_family_classify(f, TPC_ECO_HF, n, l, NULL, bias) : NULL;
	return w ? tpc__layout_group(f, TPC_ECO_VLLM, w, g) : 0;
}

/* Whether vLLM holds the family's experts in one FusedMoE (its table names
 * them stacked: experts.w13_weight, experts.w2_weight). */
static bool fused_moe(const tpc_family *f)
{
	for (const tpc_tensor_row *w = f ? f->tensors : NULL; w && w->role; w++)
		if (tpc__layout_stacked(w, TPC_ECO_VLLM))
			return true;
	return false;
}

/* The architectures of the records that list this layout (with FusedMoE
 * experts only, `moe`), ", " between them. */
static const char *arch_list(char *buf, size_t n, bool moe)
{
	size_t k = 0, m = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < tpc_family_count(); i++) {
		const tpc_family *f = tpc_family_at(i);
		if (!tpc_family_lists(f->layouts, "vllm") || (moe && !fused_moe(f)))
			continue;
		for (size_t j = 0; f->hf_arch && f->hf_arch[j] && k < n; j++)
			k += (size_t)snprintf(buf + k, n - k, "%s%s", m++ ? ", " : "", f->hf_arch[j]);
	}
	return buf;
}

/* "a.b.q_proj.weight" with `from` = ".q_proj." -> "a.b.<to>weight" */
static char *swap_part(const char *n, const char *from, const char *to)
{
	const char *p = strstr(n, from);
	tpc_buf b = TPC_BUF_INIT;
	if (!p)
		return NULL;
	tpc_buf_add(&b, n, (size_t)(p - n));
	tpc_buf_adds(&b, to);
	tpc_buf_adds(&b, p + strlen(from));
	return tpc_buf_detach(&b, NULL);
}

/* ---- what the model's config.json says ---- */

typedef struct vcfg {
	bool have;     /* a config.json was read */
	bool tied;     /* tie_word_embeddings */
	char arch[128];
} vcfg;

/* Whether config.json in dir has `member` true (a family's vllm_cfg_true) */
static bool config_true(const char *dir, const char *member)
{
	char *path = dir ? tpc_path_join(dir, "config.json") : NULL;
	tpc_cfg *cfg = NULL;
	tpc_err e;
	bool yes = false;
	tpc_err_init(&e);
	if (path && tpc_exists(path) && !tpc_cfg_from_file(&cfg, path, &e))
		yes = cJSON_IsTrue(tpc_cfg_get(cfg, TPC_CFG_TOP, member, NULL));
	tpc_cfg_free(cfg);
	free(path);
	return yes;
}

static void read_config(const char *dir, vcfg *c)
{
	memset(c, 0, sizeof(*c));
	char *path = dir ? tpc_path_join(dir, "config.json") : NULL;
	tpc_cfg *cfg = NULL;
	tpc_err e;
	tpc_err_init(&e);
	/* both at the top level, as before: architectures names the whole
	 * model's class, and the families vLLM's layout takes have no text_config */
	if (path && tpc_exists(path) && !tpc_cfg_from_file(&cfg, path, &e)) {
		const cJSON *a = tpc_cfg_get(cfg, TPC_CFG_TOP, "architectures", NULL);
		const cJSON *t = tpc_cfg_get(cfg, TPC_CFG_TOP, "tie_word_embeddings", NULL);
		c->have = true;
		if (cJSON_IsArray(a) && cJSON_IsString(cJSON_GetArrayItem(a, 0)))
			snprintf(c->arch, sizeof(c->arch), "%s", cJSON_GetArrayItem(a, 0)->valuestring);
		c->tied = cJSON_IsTrue(t);
	}
	tpc_cfg_free(cfg);
	free(path);
}

/* Is the set tied (lm_head stored once)? The config says, else a checkpoint
 * without lm_head.weight is. */
static bool is_tied(const tpc_shard_plan *sp, const tpc_shard_opts *o, vcfg *c)
{
	read_config(o->config_dir, c);
	if (c->have)
		return c->tied;
	return tpc_ckpt_find(sp->in, "lm_head.weight") < 0;
}

/* ---- shard: what the plan must look like ---- */

static int refuse(tpc_err *e, const char *name, const char *fmt, const char *what)
{
	return tpc_err_at(e, TPC_EINPUT, NULL, name, fmt, what);
}

/* How vLLM splits a tensor of class k, when plan split s is not that
 * (NULL: it is). */
static const char *required(cls k, const tpc_split *s)
{
	switch (k) {
	case C_NONE: return NULL; /* refused by name before */
	case C_EMBED:
	case C_LMHEAD:
		if (s->kind != TPC_SPLIT_VOCAB || s->dim != 0 || s->nparts != 1)
			return "vocab-parallel on dim 0";
		if ((s->part[0].size + s->part[0].pad) != (s->part[0].size + VLLM_VOCAB_PAD - 1) / VLLM_VOCAB_PAD * VLLM_VOCAB_PAD)
			return "vocab-parallel, padded to a multiple of 64 rows as vLLM pads it (tpconv shard does this for --layout vllm)";
		return NULL;
	case C_Q:
	case C_KV:
		if (s->kind != TPC_SPLIT_COL || s->dim != 0 || s->nparts != 1 || s->part[0].pad || !s->part[0].heads)
			return "column-parallel on head boundaries (QKVParallelLinear)";
		return k == C_Q && s->part[0].replicas > 1 ? "query heads split, never replicated" : NULL;
	case C_QKV:
		return s->kind != TPC_SPLIT_COL || s->dim != 0 || s->nparts != 3 ? "column-parallel in parts q, k, v (QKVParallelLinear)"
										   : NULL;
	case C_GATEUP:
	case C_GATEUP2:
	case C_SHCOL:
		return s->kind != TPC_SPLIT_COL || s->dim != 0 || s->nparts != (k == C_GATEUP2 ? 2 : 1)
			       ? "column-parallel (MergedColumnParallelLinear)"
			       : NULL;
	case C_O:
	case C_DOWN:
	case C_SHROW: return s->kind != TPC_SPLIT_ROW || s->dim != 1 ? "row-parallel on dim 1 (RowParallelLinear)" : NULL;
	case C_EXPCOL:
		return s->kind != TPC_SPLIT_COL || s->dim != 0 || s->nparts != 1
			       ? "column-parallel on dim 0 inside every expert (FusedMoE w13)"
			       : NULL;
	case C_EXPROW:
		return s->kind != TPC_SPLIT_ROW || s->dim != 1 ? "row-parallel on dim 1 inside every expert (FusedMoE w2)" : NULL;
	case C_ROUTER:
	case C_SHGATE: return s->dim >= 0 ? "replicated (ReplicatedLinear)" : NULL;
	case C_REPL: return s->dim >= 0 ? "replicated" : NULL;
	}
	return NULL;
}

/* What the family's vLLM model class refuses of the whole model: an untied
 * config where it has no lm_head, a tp above the experts of its sparse
 * block or above the kv heads it cannot replicate. */
static int check_family(const tpc_shard_plan *sp, const tpc_family *fam, const vcfg *c, tpc_err *e)
{
	char a[160];
	tpc_sanitize(a, sizeof(a), c->arch);
	if (fam && fam->vllm_no_lm_head && c->have && !c->tied)
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json's tie_word_embeddings is not true: vLLM's %s has no lm_head (it computes the logits with model.embed_tokens) and asserts the model is tied",
				   a);
	if (fam && fam->vllm_tp_le_experts && sp->facts.experts > 0 && sp->tp > sp->facts.experts)
		return tpc_err_set(e, TPC_EINPUT,
				   "tp %d is above the model's %lld routed experts: vLLM's %s refuses it (\"Tensor parallel size %d is greater than the number of experts %lld\")",
				   sp->tp, (long long)sp->facts.experts, a, sp->tp, (long long)sp->facts.experts);
	if (fam && fam->vllm_tp_le_kv_heads && sp->facts.kv_heads > 0 && sp->tp > sp->facts.kv_heads)
		return tpc_err_set(e, TPC_EINPUT,
				   "tp %d is above the model's %lld kv heads: vLLM's %s norms k over all kv heads after gathering it and cannot replicate them",
				   sp->tp, (long long)sp->facts.kv_heads, a);
	return 0;
}

/* The tied pair lm_head.weight and model.embed_tokens.weight is stored once:
 * both must be the same weights. */
static int check_tied(const tpc_shard_plan *sp, const vcfg *c, tpc_err *e)
{
	int64_t li = tpc_ckpt_find(sp->in, "lm_head.weight"), ei = tpc_ckpt_find(sp->in, "model.embed_tokens.weight");
	if (li < 0 || ei < 0)
		return 0;
	const tpc_tensor *a = &sp->in->t[li], *b = &sp->in->t[ei];
	bool eq = tpc_tensor_same_view(a, b);
	int ret;
	if (!eq && a->dtype == b->dtype && a->ndim == b->ndim && !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) &&
	    (ret = tpc_tensors_equal(sp->in, a, b, &eq, e)))
		return ret;
	if (!eq)
		return refuse(e, "lm_head.weight",
			      "the model is tied (%s) but lm_head.weight differs from model.embed_tokens.weight; vLLM keeps one of them",
			      c->have ? "config.json's tie_word_embeddings" : "no config.json");
	return 0;
}

static int check(tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	vcfg c;
	bool tied = sp->tied = is_tied(sp, o, &c);
	const tpc_family *fam = c.have && c.arch[0] ? tpc_family_by_arch(c.arch) : NULL;
	bool moe = fused_moe(fam);
	char known[512];
	int ret;
	if (c.have && c.arch[0] && !(fam && tpc_family_lists(fam->layouts, "vllm"))) {
		char a[160];
		tpc_sanitize(a, sizeof(a), c.arch);
		return tpc_err_set(e, TPC_EINPUT, "the vllm layout knows vLLM's parameter names for %s, not %s",
				   arch_list(known, sizeof(known), false), a);
	}
	if (fam && fam->vllm_cfg_true && !config_true(o->config_dir, fam->vllm_cfg_true)) {
		char a[160];
		tpc_sanitize(a, sizeof(a), c.arch);
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json's %s is not true: vLLM's %s model reads it as false when absent and then has no parameter for this family's tensors it gates (set it in config.json, as the model's own publisher does)",
				   fam->vllm_cfg_true, a);
	}
	if ((ret = check_family(sp, fam, &c, e)))
		return ret;
	sp->family = fam; /* stored_rank names the tensors by its table */
	if (c.have && !c.tied && tpc_ckpt_find(sp->in, "lm_head.weight") < 0)
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json says tie_word_embeddings is false but the checkpoint has no lm_head.weight: vLLM would find no lm_head");
	for (size_t i = 0; i < sp->n; i++) {
		const tpc_shard_entry *en = &sp->t[i];
		const tpc_tensor *t = &sp->in->t[en->in];
		const tpc_split *s = &en->split;
		const tpc_tensor_row *g[TPC_LAYOUT_MAXG];
		int64_t l;
		bool b;
		cls k = classify(fam, t->name);
		const char *want;
		if (k == C_NONE)
			return refuse(e, t->name,
				      "vLLM has no parameter for this tensor (%s); drop or rename it with --rules before sharding",
				      "the vllm layout writes LLaMA-family names only, and vLLM refuses unknown keys");
		if ((k == C_EXPCOL || k == C_EXPROW || k == C_ROUTER) && !moe) {
			char msg[640];
			snprintf(msg, sizeof(msg),
				 "an expert's tensor: vLLM's FusedMoE names are written for %s, and config.json does not say it is one",
				 arch_list(known, sizeof(known), true));
			return refuse(e, t->name, "%s", msg);
		}
		if ((k == C_SHCOL || k == C_SHROW || k == C_SHGATE) && vllm_group(fam, t->name, g, &l, &b) <= 0)
			return refuse(e, t->name, "%s",
				      "a shared expert's tensor whose vLLM parameter the model's family record does not name (config.json names no family that has one)");
		want = required(k, s);
		for (int p = 0; !want && p < s->nparts && s->dim >= 0; p++)
			if (s->part[p].pad && k != C_EMBED && k != C_LMHEAD)
				want = "split without padding (vLLM needs tp to divide it)";
		if (want) {
			char msg[256];
			snprintf(msg, sizeof(msg), "the vllm layout needs this tensor %s, as vLLM splits it; the plan (rule %d) splits it %s",
				 want, s->rule, s->dim < 0 ? "not at all" : tpc_split_kind_name(s->kind));
			return refuse(e, t->name, "%s", msg);
		}
	}
	return tied ? check_tied(sp, &c, e) : 0;
}

/* vLLM pads the vocabulary to a multiple of 64 and gives each rank Vp/tp rows:
 * a vocab split padded to a multiple of Vp is the same. */
static int adjust_plan(tpc_plan *plan, const tpc_ckpt *in, const tpc_model_facts *f, int tp, tpc_err *e)
{
	int64_t v = f->vocab;
	if (!v) {
		int64_t i = tpc_ckpt_find(in, "model.embed_tokens.weight");
		if (i < 0)
			i = tpc_ckpt_find(in, "lm_head.weight");
		if (i >= 0 && in->t[i].ndim == 2)
			v = in->t[i].shape[0];
	}
	if (v <= 0)
		return 0; /* no vocabulary tensor: check() refuses what needs one */
	int64_t vp = (v + VLLM_VOCAB_PAD - 1) / VLLM_VOCAB_PAD * VLLM_VOCAB_PAD;
	if (vp % tp)
		return tpc_err_set(e, TPC_EINPUT,
				   "vLLM pads the vocabulary of %lld to %lld rows, which tp %d does not divide (vLLM refuses this tp too)",
				   (long long)v, (long long)vp, tp);
	plan->pad_multiple = vp / tp;
	for (size_t i = 0; i < plan->nrules; i++)
		if (plan->rules[i].kind == TPC_SPLIT_VOCAB)
			plan->rules[i].pad_multiple = 0;
	return 0;
}

/* ---- shard: the rank as vLLM's state dict ---- */

static int add_cat(tpc_ckpt *out, const char *name, const tpc_tensor *const *parts, int n, tpc_err *e)
{
	tpc_tensor tmp[3], cat;
	for (int i = 0; i < n; i++)
		tmp[i] = *parts[i];
	if (tpc_tensor_init_cat(&cat, tmp, n, 0)) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "cannot fuse the rank slices of this tensor (shapes or dtypes differ)");
	}
	int64_t ix = tpc_ckpt_add_copy(out, name, &cat, e);
	tpc_tensor_release(&cat);
	return ix < 0 ? (int)ix : 0;
}

/* Layer l's experts as FusedMoE holds them, once per layer (done[l]); mx is
 * the model's family (check() refuses experts without one that has them). */
static int add_experts(const tpc_family *mx, const tpc_ckpt *rk, const char *n, bool *done, int64_t nl, tpc_ckpt *out,
		       tpc_err *e)
{
	int64_t l = -1;
	tpc_family_classify(mx, TPC_ECO_HF, n, &l, NULL, NULL);
	if (l < 0 || l >= nl)
		return refuse(e, n, "%s", "an expert's tensor outside the model's layers");
	if (done[l])
		return 0;
	done[l] = true;
	return tpc__layout_add_stacked(mx, TPC_ECO_VLLM, rk, l, l, out, e);
}

/* Tensor t of rank rk under the vLLM name family f's table gives it (a
 * shared expert): the first part of a fused group with the others after it,
 * a later part nothing (emitted with the first), refused when a part is
 * missing. */
static int add_by_table(const tpc_family *f, const tpc_ckpt *rk, const tpc_tensor *t, tpc_ckpt *out, tpc_err *e)
{
	const tpc_tensor_row *g[TPC_LAYOUT_MAXG];
	int64_t l = -1;
	bool bias = false;
	char nm[512];
	tpc_tensor fused;
	int n = vllm_group(f, t->name, g, &l, &bias), part, ret;
	if (n <= 0 || !tpc_family_name(g[0], TPC_ECO_VLLM, l, -1, bias, nm, sizeof(nm), &part))
		return refuse(e, t->name, "%s", "the family record names no vLLM parameter for this tensor");
	if (tpc_family_classify(f, TPC_ECO_HF, t->name, NULL, NULL, NULL) != g[0]) {
		char first[512];
		if (tpc_family_name(g[0], TPC_ECO_HF, l, -1, bias, first, sizeof(first), NULL) && tpc_ckpt_find(rk, first) >= 0)
			return 0; /* emitted with its first part */
		return refuse(e, t->name, "vLLM fuses this tensor into %s after a part this rank does not hold", nm);
	}
	if (tpc__layout_fuse(rk, g, n, l, -1, bias, &fused))
		return refuse(e, t->name, "vLLM fuses this tensor into %s with parts this rank does not hold (or of other shapes)", nm);
	ret = tpc__layout_add_copy(out, nm, &fused, e);
	tpc_tensor_release(&fused);
	return ret;
}

/* One tensor of a tied pair: stored once, as _filter_subtensors keeps the
 * smaller key of lm_head.weight and model.embed_tokens.weight, lm_head.weight,
 * or as model.embed_tokens.weight where vLLM's class has no lm_head
 * (vllm_no_lm_head); from the tensor of that name when the rank has it. */
static int add_tied(const tpc_family *f, const tpc_ckpt *rk, const tpc_tensor *t, tpc_ckpt *out, tpc_err *e)
{
	const char *keep = f && f->vllm_no_lm_head ? "model.embed_tokens.weight" : "lm_head.weight";
	if (strcmp(t->name, keep) && tpc_ckpt_find(rk, keep) >= 0)
		return 0;
	return tpc_ckpt_add_copy(out, keep, t, e) < 0 ? (e->code ? e->code : TPC_EIO) : 0;
}

static int stored_rank(const tpc_shard_plan *sp, int r, tpc_ckpt *out, tpc_err *e)
{
	const tpc_ckpt *rk = &sp->rank[r];
	bool tied = sp->tied; /* decided by check() */
	int ret = 0;
	bool *done = tpc_calloc((size_t)sp->layers + 1, sizeof(bool));
	if (!done)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < rk->n && !ret; i++) {
		const tpc_tensor *t = &rk->t[i];
		const char *n = t->name;
		cls k = classify(sp->family, n);
		char *fused = NULL;
		if (k == C_EXPCOL || k == C_EXPROW) {
			ret = add_experts(sp->family, rk, n, done, sp->layers, out, e);
		} else if (k == C_SHCOL || k == C_SHROW || k == C_SHGATE) {
			ret = add_by_table(sp->family, rk, t, out, e);
		} else if (k == C_Q) {
			char *kn = swap_part(n, ".q_proj.", ".k_proj."), *vn = swap_part(n, ".q_proj.", ".v_proj.");
			int64_t ki = kn ? tpc_ckpt_find(rk, kn) : -1, vi = vn ? tpc_ckpt_find(rk, vn) : -1;
			free(kn);
			free(vn);
			if (ki < 0 || vi < 0) {
				ret = refuse(e, n, "%s", "vLLM fuses q_proj with k_proj and v_proj into qkv_proj, and this one has no k/v partner");
				break;
			}
			const tpc_tensor *parts[3] = {t, &rk->t[ki], &rk->t[vi]};
			if (!(fused = swap_part(n, ".q_proj.", ".qkv_proj.")))
				ret = tpc_err_nomem(e);
			else
				ret = add_cat(out, fused, parts, 3, e);
		} else if (k == C_KV) {
			char *qn = strstr(n, ".k_proj.") ? swap_part(n, ".k_proj.", ".q_proj.") : swap_part(n, ".v_proj.", ".q_proj.");
			bool partner = qn && tpc_ckpt_find(rk, qn) >= 0;
			free(qn);
			if (!partner)
				ret = refuse(e, n, "%s", "vLLM fuses k_proj and v_proj with q_proj into qkv_proj, and this one has no q_proj");
			/* else emitted with its q_proj */
		} else if (k == C_GATEUP && strstr(n, ".gate_proj.")) {
			char *un = swap_part(n, ".gate_proj.", ".up_proj.");
			int64_t ui = un ? tpc_ckpt_find(rk, un) : -1;
			free(un);
			if (ui < 0) {
				ret = refuse(e, n, "%s", "vLLM fuses gate_proj with up_proj into gate_up_proj, and this one has no up_proj");
				break;
			}
			const tpc_tensor *parts[2] = {t, &rk->t[ui]};
			if (!(fused = swap_part(n, ".gate_proj.", ".gate_up_proj.")))
				ret = tpc_err_nomem(e);
			else
				ret = add_cat(out, fused, parts, 2, e);
		} else if (k == C_GATEUP) {
			char *gn = swap_part(n, ".up_proj.", ".gate_proj.");
			bool partner = gn && tpc_ckpt_find(rk, gn) >= 0;
			free(gn);
			if (!partner)
				ret = refuse(e, n, "%s", "vLLM fuses up_proj with gate_proj into gate_up_proj, and this one has no gate_proj");
		} else if ((k == C_EMBED || k == C_LMHEAD) && tied) {
			ret = add_tied(sp->family, rk, t, out, e);
		} else if (tpc_ckpt_add_copy(out, n, t, e) < 0) {
			ret = e->code ? e->code : TPC_EIO;
		}
		free(fused);
	}
	free(done);
	for (size_t i = 0; i < rk->nmeta && !ret; i++)
		ret = tpc_ckpt_meta_set(out, rk->meta_k[i], rk->meta_v[i], e);
	return ret;
}

/* ---- shard: writing a rank as its parts ---- */

static char *part_path(const char *dir, int rank, size_t part)
{
	char buf[96];
	snprintf(buf, sizeof(buf), "model-rank-%d-part-%zu.safetensors", rank, part);
	return tpc_path_join(dir, buf);
}

/* "DIR/model-rank-R-part-0.safetensors" -> DIR and R */
static char *split_path(const char *path, int *rank)
{
	const char *base = tpc_path_base(path);
	char *dir = tpc_strdup(path);
	if (!dir)
		return NULL;
	if (sscanf(base, "model-rank-%d-part-", rank) != 1)
		*rank = -1;
	size_t dl = (size_t)(base - path);
	if (dl == 0) {
		strcpy(dir, ".");
	} else {
		dir[dl - 1] = '\0';
		if (dl == 1)
			strcpy(dir, "/");
	}
	return dir;
}

static bool is_part(const char *n, const void *pre)
{
	return !strncmp(n, pre, strlen(pre)) && tpc_ends_with(n, ".safetensors");
}

/* every model-rank-R-part-*.safetensors in the folder of `path` */
static void remove_rank(const char *path)
{
	int rank;
	char *dir = split_path(path, &rank);
	char pre[64];
	snprintf(pre, sizeof(pre), "model-rank-%d-part-", rank);
	tpc__layout_unlink_if(dir, is_part, pre);
	free(dir);
}

static int write_rank(const tpc_shard_plan *sp, int r, const tpc_ckpt *ck, const char *path,
		      const tpc_write_opts *wo, tpc_err *e)
{
	const tpc_format *st = tpc_format_by_name("safetensors");
	int rank, ret = 0;
	char *dir = split_path(path, &rank);
	int64_t *sel = tpc_malloc((ck->n ? ck->n : 1) * sizeof(*sel));
	size_t nparts = 0, nsel = 0;
	uint64_t total = 0, max = sp->max_shard_size;
	(void)r;
	if (!dir || !sel) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (!st) {
		ret = tpc_err_set(e, TPC_EUSAGE, "the safetensors writer is not available in this build");
		goto out;
	}
	/* save_model(): a new part when this tensor would take the part past max */
	for (size_t i = 0; i <= ck->n && !ret; i++) {
		uint64_t sz = i < ck->n ? ck->t[i].nbytes : 0;
		if (i == ck->n || (max && nsel && total + sz > max)) {
			char *pp = part_path(dir, rank, nparts);
			ret = pp ? st->write(ck, sel, nsel, pp, wo, e) : tpc_err_nomem(e);
			free(pp);
			if (ret)
				break;
			nparts++;
			nsel = 0;
			total = 0;
		}
		if (i < ck->n) {
			sel[nsel++] = (int64_t)i;
			total += sz;
		}
	}
	if (ret) {
		for (size_t k = 0; k < nparts; k++) {
			char *pp = part_path(dir, rank, k);
			if (pp)
				unlink(pp);
			free(pp);
		}
	} else {
		/* parts a larger earlier run left (--force) would be loaded too */
		for (size_t k = nparts;; k++) {
			char *pp = part_path(dir, rank, k);
			bool there = pp && tpc_exists(pp);
			if (there)
				unlink(pp);
			free(pp);
			if (!there)
				break;
		}
	}
out:
	free(dir);
	free(sel);
	return ret;
}

/* ---- merge and verify: the rank back as split ---- */

static int add_view(tpc_ckpt *ck, const char *name, const tpc_tensor *t, int64_t start, int64_t len, tpc_err *e)
{
	tpc_tensor v;
	if (tpc_tensor_narrow(&v, t, 0, start, len))
		return tpc_err_nomem(e);
	int64_t ix = tpc_ckpt_add_copy(ck, name, &v, e);
	tpc_tensor_release(&v);
	return ix < 0 ? (int)ix : 0;
}

/* Un-fuse tensor i (qkv_proj or gate_up_proj) into views appended to ck. */
static int unfuse(tpc_ckpt *ck, size_t i, const tpc_layout_rank_ctx *c, const char *path, tpc_err *e)
{
	const tpc_tensor *t = &ck->t[i];
	char *n0 = NULL, *n1 = NULL, *n2 = NULL;
	int ret = 0;
	int64_t rows = t->ndim >= 1 ? t->shape[0] : 0;
	char *name = tpc_strdup(t->name);
	if (!name)
		return tpc_err_nomem(e);
	if (strstr(name, ".qkv_proj.")) {
		const tpc_model_facts *f = c->facts;
		int64_t h = f ? f->heads : 0, kv = f && f->kv_heads ? f->kv_heads : h;
		int64_t hd = f && f->head_dim ? f->head_dim : (f && f->hidden && h ? f->hidden / h : 0);
		if (!hd || !h) {
			ret = tpc_err_set(e, TPC_EUSAGE,
					  "un-fusing qkv_proj needs the head counts: give --config (the model's config.json) or --heads, --kv-heads, --head-dim");
			goto out;
		}
		int64_t q = h / c->tp * hd, k = (kv >= c->tp ? kv / c->tp : 1) * hd;
		if (h % c->tp || (kv >= c->tp ? kv % c->tp : c->tp % kv) || q + 2 * k != rows) {
			tpc_err_at(e, TPC_EINPUT, path, name,
				    "qkv_proj has %lld rows; %lld heads and %lld kv heads of %lld over tp %d give %lld + 2 x %lld",
				    (long long)rows, (long long)h, (long long)kv, (long long)hd, c->tp, (long long)q, (long long)k);
			ret = TPC_EINPUT;
			goto out;
		}
		n0 = swap_part(name, ".qkv_proj.", ".q_proj.");
		n1 = swap_part(name, ".qkv_proj.", ".k_proj.");
		n2 = swap_part(name, ".qkv_proj.", ".v_proj.");
		/* Phi-3 style sets name their fused tensor qkv_proj themselves */
		if (c->names && tpc__layout_listed(c, name))
			goto out;
		if (!n0 || !n1 || !n2)
			ret = tpc_err_nomem(e);
		if (!ret)
			ret = add_view(ck, n0, &ck->t[i], 0, q, e);
		if (!ret)
			ret = add_view(ck, n1, &ck->t[i], q, k, e);
		if (!ret)
			ret = add_view(ck, n2, &ck->t[i], q + k, k, e);
	} else {
		if (c->names && tpc__layout_listed(c, name))
			goto out;
		if (rows % 2) {
			tpc_err_at(e, TPC_EINPUT, path, name, "gate_up_proj has an odd number of rows (%lld)", (long long)rows);
			ret = TPC_EINPUT;
			goto out;
		}
		n0 = swap_part(name, ".gate_up_proj.", ".gate_proj.");
		n1 = swap_part(name, ".gate_up_proj.", ".up_proj.");
		if (!n0 || !n1)
			ret = tpc_err_nomem(e);
		if (!ret)
			ret = add_view(ck, n0, &ck->t[i], 0, rows / 2, e);
		if (!ret)
			ret = add_view(ck, n1, &ck->t[i], rows / 2, rows / 2, e);
	}
out:
	free(name);
	free(n0);
	free(n1);
	free(n2);
	return ret;
}

/* A shared expert's tensor i back as the Hugging Face tensors of its n rows
 * g (equal slices of dim 0 in part order; n 1: renamed), layer l. */
static int split_named(tpc_ckpt *ck, size_t i, const tpc_tensor_row *const *g, int n, int64_t l, bool bias,
		       const char *path, tpc_err *e)
{
	const char *name = ck->t[i].name;
	int64_t rows = ck->t[i].ndim >= 1 ? ck->t[i].shape[0] : 0;
	int ret = 0;
	if (ck->t[i].ndim < 1 || rows % n)
		return TPC_CORRUPT(e, path, -1, name, "vLLM fuses %d tensors into this one along dim 0, and its %lld rows do not split so",
				   n, (long long)rows);
	for (int k = 0; k < n && !ret; k++) {
		char nm[512];
		tpc_tensor part;
		if (!tpc_family_name(g[k], TPC_ECO_HF, l, -1, bias, nm, sizeof(nm), NULL) ||
		    tpc_tensor_narrow(&part, &ck->t[i], 0, k * (rows / n), rows / n))
			return tpc_err_nomem(e);
		ret = tpc__layout_add_copy(ck, nm, &part, e);
		tpc_tensor_release(&part);
	}
	return ret;
}

/* FusedMoE's stacked experts back as each expert's Hugging Face tensors
 * (w13_weight [experts, 2 x rows, hidden] = [w1_r; w3_r] per expert,
 * w2_weight [experts, hidden, rows]), a shared expert's tensors
 * (table_named) back under their Hugging Face names; the vLLM ones dropped.
 * The rank does not say its family: each name is read with the tables of
 * the records that list this layout. */
static int unstack_experts(tpc_ckpt *ck, const char *path, tpc_err *e)
{
	size_t n0 = ck->n;
	bool any = false, *keep = NULL;
	int ret = 0;
	for (size_t i = 0; i < n0 && !ret; i++) {
		const tpc_tensor_row *g[TPC_LAYOUT_MAXG];
		int64_t l = -1;
		bool bias = false;
		const char *name = ck->t[i].name; /* stays put when ck grows */
		const tpc_family *mx = NULL;
		const tpc_tensor_row *w = tpc_family_classify_for(NULL, "vllm", TPC_ECO_VLLM, name, &l, NULL, &bias, &mx);
		bool st = w && tpc__layout_stacked(w, TPC_ECO_VLLM);
		int n = st || table_named(w) ? tpc__layout_group(mx, TPC_ECO_VLLM, w, g) : 0;
		if (!n)
			continue;
		any = true;
		if (!st) {
			ret = split_named(ck, i, g, n, l, bias, path, e);
			continue;
		}
		if (ck->t[i].ndim != 3 || ck->t[i].shape[1] % n)
			return TPC_CORRUPT(e, path, -1, name, "FusedMoE's stacked experts must be [experts, %d x rows, columns]", n);
		for (int64_t j = 0; j < ck->t[i].shape[0] && !ret; j++) {
			int64_t rows = ck->t[i].shape[1] / n;
			tpc_tensor one, part;
			if (tpc_tensor_select0(&one, &ck->t[i], j))
				return tpc_err_nomem(e);
			for (int k = 0; k < n && !ret; k++) {
				char nm[512];
				if (!tpc_family_name(g[k], TPC_ECO_HF, l, j, false, nm, sizeof(nm), NULL) ||
				    tpc_tensor_narrow(&part, &one, 0, k * rows, rows)) {
					ret = tpc_err_nomem(e);
					break;
				}
				ret = tpc__layout_add_copy(ck, nm, &part, e);
				tpc_tensor_release(&part);
			}
			tpc_tensor_release(&one);
		}
	}
	if (ret || !any)
		return ret;
	if (!(keep = tpc_calloc(ck->n, sizeof(bool))))
		return tpc_err_nomem(e);
	for (size_t i = 0; i < ck->n; i++) {
		const tpc_tensor_row *w =
			i < n0 ? tpc_family_classify_for(NULL, "vllm", TPC_ECO_VLLM, ck->t[i].name, NULL, NULL, NULL, NULL) : NULL;
		keep[i] = !(w && (tpc__layout_stacked(w, TPC_ECO_VLLM) || table_named(w)));
	}
	ret = tpc_ckpt_filter(ck, keep, e);
	free(keep);
	return ret;
}

/* Tied weights stored once (add_tied) back under the names the input had:
 * lm_head.weight also as model.embed_tokens.weight (renamed when the
 * manifest lists the embedding alone; without one, on the first stage),
 * model.embed_tokens.weight (a class without lm_head) also as
 * lm_head.weight when the manifest lists that. A new tensor's index goes
 * to order[(*no)++]. */
static int untie(tpc_ckpt *ck, const tpc_layout_rank_ctx *c, int64_t *order, size_t *no, tpc_err *e)
{
	static const char LM[] = "lm_head.weight", EMB[] = "model.embed_tokens.weight";
	int64_t lm = tpc_ckpt_find(ck, LM), em = tpc_ckpt_find(ck, EMB), from;
	const char *to;
	tpc_tensor tied_copy;
	if (lm >= 0 && em < 0 && (c->names ? tpc__layout_listed(c, EMB) : c->pp_rank == 0)) {
		if (c->names && !tpc__layout_listed(c, LM))
			return tpc_ckpt_rename(ck, lm, EMB, e);
		from = lm, to = EMB;
	} else if (em >= 0 && lm < 0 && c->names && tpc__layout_listed(c, LM)) {
		from = em, to = LM;
	} else {
		return 0;
	}
	if (tpc_tensor_copy(&tied_copy, &ck->t[from]))
		return tpc_err_nomem(e); /* a copy first: the add may move ck's table */
	int64_t ix = tpc_ckpt_add_copy(ck, to, &tied_copy, e);
	tpc_tensor_release(&tied_copy);
	if (ix < 0)
		return e->code ? e->code : TPC_EIO;
	order[(*no)++] = ix;
	return 0;
}

static int open_rank(const char *path, const tpc_layout_rank_ctx *c, tpc_ckpt *ck, tpc_err *e)
{
	int rank, ret = 0;
	char *dir = split_path(path, &rank);
	bool *keep = NULL;
	int64_t *order = NULL;
	size_t n0;
	if (!dir)
		return tpc_err_nomem(e);
	/* every part, in order, into one checkpoint */
	for (size_t k = 0; !ret; k++) {
		char *pp = part_path(dir, rank, k);
		if (!pp) {
			ret = tpc_err_nomem(e);
			break;
		}
		if (k > 0 && !tpc_exists(pp)) {
			free(pp);
			break;
		}
		ret = tpc_ckpt_open(ck, pp, NULL, e);
		free(pp);
	}
	if (ret || (ret = unstack_experts(ck, path, e)))
		goto out;
	/* the split tensors after each fused one, the fused ones dropped */
	n0 = ck->n;
	if (!(order = tpc_malloc((3 * n0 + 2) * sizeof(*order))) || !(keep = tpc_calloc(3 * n0 + 2, sizeof(*keep)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	size_t no = 0;
	for (size_t i = 0; i < n0 && !ret; i++) {
		const char *n = ck->t[i].name;
		bool fused = strstr(n, ".qkv_proj.") || strstr(n, ".gate_up_proj.");
		size_t before = ck->n;
		order[no++] = (int64_t)i;
		if (fused && (ret = unfuse(ck, i, c, path, e)))
			break;
		keep[i] = ck->n == before; /* kept when nothing was split off */
		for (size_t j = before; j < ck->n; j++)
			order[no++] = (int64_t)j;
	}
	if (!ret)
		ret = untie(ck, c, order, &no, e);
	for (size_t j = n0; j < ck->n; j++)
		keep[j] = true;
	if (!ret && no != ck->n)
		ret = tpc_err_set(e, TPC_EINPUT, "internal: un-fusing rank %d lost track of its tensors", c->rank);
	if (!ret)
		ret = tpc_ckpt_permute(ck, order, e);
	if (!ret) {
		/* keep[] follows the old indices: rebuild it for the new order */
		bool *k2 = tpc_calloc(ck->n ? ck->n : 1, sizeof(*k2));
		if (!k2) {
			ret = tpc_err_nomem(e);
		} else {
			for (size_t i = 0; i < ck->n; i++)
				k2[i] = keep[order[i]];
			ret = tpc_ckpt_filter(ck, k2, e);
			free(k2);
		}
	}
out:
	free(dir);
	free(keep);
	free(order);
	return ret;
}

/* ---- sets vLLM wrote (no manifest) ---- */

static bool parse(const char *n, int *rank, int *part)
{
	int a, b, k = -1;
	if (sscanf(n, "model-rank-%d-part-%d%n", &a, &b, &k) == 2 && k > 0 && !strcmp(n + k, ".safetensors") && a >= 0 &&
	    b >= 0 && a < TPC_MAX_TP) {
		*rank = a;
		*part = b;
		return true;
	}
	return false;
}

static int geometry(const char *dir, int tp_flag, int pp_flag, int *tp, int *pp, tpc_err *e)
{
	int maxr, maxp;
	tpc__layout_max_ranks(dir, parse, &maxr, &maxp);
	if (pp_flag > 1) {
		return tpc_err_at(e, TPC_EUSAGE, dir, NULL, "vLLM's sharded_state files name the tensor-parallel rank only: --pp must be 1");
	}
	*tp = tp_flag ? tp_flag : maxr + 1;
	*pp = 1;
	if (*tp < maxr + 1) {
		return tpc_err_at(e, TPC_EINPUT, dir, NULL, "model-rank-%d-part-*.safetensors exists but --tp %d was given", maxr, *tp);
	}
	return 0;
}

static char *rank_path(const char *dir, int t, int p, int tp)
{
	(void)p;
	(void)tp;
	return part_path(dir, t, 0);
}

static const char *const formats[] = {"safetensors", NULL};

const tpc_layout tpc_layout_vllm = {
	.name = "vllm", .desc = "model-rank-R-part-P.safetensors with vLLM's fused names (load_format=\"sharded_state\")",
	.formats = formats, .set_format = "vllm-shards", .max_pp = 1,
	.sized = true, .companions_at_top = true,
	.rank_fmt = "model-rank-%d-part-0.safetensors", .check = check, .adjust_plan = adjust_plan,
	.stored_rank = stored_rank, .write_rank = write_rank, .remove_rank = remove_rank,
	.open_rank = open_rank,
	.parse_rank_file = parse, .foreign_geometry = geometry, .foreign_rank_path = rank_path,
};
