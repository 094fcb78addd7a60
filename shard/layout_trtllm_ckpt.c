/* layout_trtllm_ckpt.c - the trtllm layout: a TensorRT-LLM checkpoint, what
 * convert_checkpoint.py writes and `trtllm-build --checkpoint_dir` reads.
 *
 * On disk (tensorrt_llm/models/modeling_utils.py PretrainedModel
 * save_checkpoint / from_checkpoint): config.json (tpc_trtllm_config.c) and
 * rank{N}.safetensors, N = pp_rank * tp + tp_rank (mapping.py), each holding
 * that rank's parameters under TensorRT-LLM's names, which come from the
 * family's tensor table (lib/tpc_family.c, TPC_ECO_TRTLLM). As
 * models/llama/convert.py load_weights_from_hf_model (and
 * models/qwen/convert.py convert_hf_qwen, models/gpt/convert.py
 * load_weights_from_hf_model) build them:
 *   transformer.layers.L.*     L counted from the stage's first layer
 *                              (tllm_prex = l - layers_range[0];
 *                              Mapping.pp_layers = torch.tensor_split)
 *   attention.qkv.weight/bias  [q_r; k_r; v_r]: split(q), split(k), split(v)
 *                              concatenated; kv heads fewer than tp are first
 *                              repeated (dup_kv_weight: rank r gets head
 *                              r * kv / tp, tpconv's KV replicas); with kv ==
 *                              heads split_qkv_tp gives the same rows
 *   attention.dense.weight     split dim 1 (split_matrix_tp); its bias whole
 *   mlp.fc / mlp.gate / mlp.proj   gate_proj, up_proj (dim 0), down_proj (dim 1)
 *   MoE (Mixtral)              mlp.router.weight whole, in float32 (get_weight
 *                              (..., torch.float32)); mlp.fc.weight = this
 *                              rank's experts stacked, each [w3; w1] (concat
 *                              dim -2), w1/w3 split moe_tp ways on their rows;
 *                              mlp.proj.weight = w2 stacked, split on dim 2.
 *                              The experts are Mapping.ep_experts(): a rank
 *                              with moe_ep_rank = tp_rank % moe_ep_size and
 *                              moe_tp_rank = tp_rank / moe_ep_size holds
 *                              experts [ep_rank * E / ep, ...), moe-tp slice
 *                              moe_tp_rank
 *   transformer.vocab_embedding.weight   whole on the first stage
 *                              (use_parallel_embedding is False by default)
 *   lm_head.weight             on the last stage, rows padded with zeros to
 *                              pad_vocab_size(vocab, tp) = ceil(vocab / tp) * tp,
 *                              then split; from the embedding when the model
 *                              ties them (tie_word_embeddings; GPT-2 always)
 *   transformer.ln_f, layer norms   whole
 *   GPT-2                      Conv1D weights transposed to [out, in] before
 *                              the same splits; position_embedding whole
 * The converters cast every weight to the config's dtype; tpconv keeps the
 * checkpoint's (one dtype, refused otherwise) and writes it as "dtype".
 *
 * tpconv's own split (the manifest, merge and verify see it) is the plan's
 * with the embedding replicated and lm_head padded as above; the stored rank
 * renames and fuses it here (stored_rank) and open_rank takes it apart again.
 * One thing differs beyond names: tpconv's expert-parallel groups are
 * consecutive ranks (group t / (tp/ep), tpc_plan.h), TensorRT-LLM's moe_ep
 * ranks interleave (t % ep), so TensorRT-LLM rank t's experts are those tpconv
 * split for rank (t % ep) * (tp/ep) + t / ep, and reading rank t back takes
 * its experts from file (t % (tp/ep)) * ep + t / (tp/ep).
 *
 * Sets TensorRT-LLM wrote (no manifest) read back the same way, their model
 * and geometry from config.json; with moe_ep_size > 1 every rank's expert
 * slices are gathered from the files that hold them, as if split over all tp
 * ranks, which is what a merge without a manifest expects.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_buf.h"
#include "tpc_cast.h"
#include "tpc_cfg.h"
#include "tpc_family.h"
#include "tpc_io.h"
#include "tpc_layout.h"
#include "tpc_shard.h"
#include "tpc_util.h"

#define HF TPC_ECO_HF
#define TRT TPC_ECO_TRTLLM
#define MAXG TPC_LAYOUT_MAXG

/* ---- names: the family's table ---- */

static const tpc_tensor_row *row_of(const tpc_family *f, tpc_eco eco, const char *n, int64_t *l, int64_t *x, bool *bias)
{
	const tpc_tensor_row *w = tpc_family_classify(f, eco, n, l, x, bias);
	return w && w->name[TRT] && w->name[HF] ? w : NULL;
}

/* Held [out, in] by TensorRT-LLM but [in, out] by the HF checkpoint (Conv1D). */
static bool transposed(const tpc_family *f, const tpc_tensor_row *w, bool bias, int ndim)
{
	return f->conv1d && !bias && ndim == 2 && w->role != TPC_ROLE_TOKEN_EMBD && w->role != TPC_ROLE_POS_EMBD &&
	       w->role != TPC_ROLE_OUTPUT;
}

static int64_t stage_start(int64_t layers, int pp, int s)
{
	return s * (layers / pp) + (s < layers % pp ? s : layers % pp);
}

/* t written as `dt` (a pending cast, applied by the writer: the router's float32). */
static void cast_to(tpc_tensor *t, tpc_dtype dt)
{
	t->dtype = dt;
	t->nbytes = t->numel * tpc_dtype_bits(dt) / 8;
}

/* ---- shard: what the split must be ---- */

/* The input's tensor of role r (the last one), or -1. */
static int64_t find_role(const tpc_shard_plan *sp, tpc_role r)
{
	int64_t ix = -1;
	for (size_t i = 0; i < sp->in->n; i++) {
		const tpc_tensor_row *w = row_of(sp->family, HF, sp->in->t[i].name, NULL, NULL, NULL);
		if (w && w->role == r)
			ix = (int64_t)i;
	}
	return ix;
}

/* The model's dtype: the embedding's, which every tensor must share (the
 * router may be float32: what the checkpoint holds it as). */
static int model_dtype(const tpc_shard_plan *sp, tpc_dtype *dt, tpc_err *e)
{
	const tpc_family *f = sp->family;
	int64_t ie = find_role(sp, TPC_ROLE_TOKEN_EMBD);
	*dt = ie >= 0 ? sp->in->t[ie].dtype : TPC_DT_INVALID;
	for (size_t i = 0; i < sp->in->n && *dt; i++) {
		const tpc_tensor *t = &sp->in->t[i];
		const tpc_tensor_row *w = row_of(f, HF, t->name, NULL, NULL, NULL);
		/* the router is float32 in the checkpoint: it may be so in the model too */
		if (t->dtype != *dt && !(w && w->role == TPC_ROLE_FFN_GATE_INP && t->dtype == TPC_F32)) {
			char msg[160];
			snprintf(msg, sizeof(msg), "a TensorRT-LLM checkpoint has one dtype (the config's); this tensor is %s, the embedding %s",
				 tpc_dtype_name(t->dtype), tpc_dtype_name(*dt));
			return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "%s (convert the model to one dtype first)", msg);
		}
	}
	if (!*dt)
		return tpc_err_set(e, TPC_EINPUT, "a TensorRT-LLM checkpoint needs the token embedding (%s); the checkpoint has none",
				   f->tensors[0].name[HF]);
	return 0;
}

/* What TensorRT-LLM's converter does with row w's tensor, as a want
 * message when the plan's split differs (NULL: the same). */
static const char *split_want(const tpc_shard_plan *sp, const tpc_tensor_row *w, bool bias, const tpc_tensor *t,
			      const tpc_split *s)
{
	bool conv = transposed(sp->family, w, bias, t->ndim);
	int col = conv ? 1 : 0, row = conv ? 0 : 1;
	switch (w->role) {
	case TPC_ROLE_OUTPUT: {
		int64_t v = s->nparts == 1 ? s->part[0].size : 0;
		if (s->kind != TPC_SPLIT_VOCAB || s->dim != 0 || s->nparts != 1 ||
		    v + s->part[0].pad != (v + sp->tp - 1) / sp->tp * sp->tp)
			return "vocab-parallel on dim 0, padded to a multiple of tp (pad_vocab_size)";
		return NULL;
	}
	case TPC_ROLE_ATTN_Q:
	case TPC_ROLE_ATTN_K:
	case TPC_ROLE_ATTN_V:
	case TPC_ROLE_ATTN_QKV:
		if (s->kind != TPC_SPLIT_COL || s->dim != col || s->nparts != (w->role == TPC_ROLE_ATTN_QKV ? 3 : 1) ||
		    !s->part[0].heads)
			return "column-parallel on head boundaries (split_qkv_tp, dup_kv_weight)";
		if (w->role == TPC_ROLE_ATTN_Q && s->part[0].replicas > 1)
			return "query heads split, never replicated";
		break;
	case TPC_ROLE_FFN_GATE:
	case TPC_ROLE_FFN_UP:
	case TPC_ROLE_FFN_GATE_EXP:
	case TPC_ROLE_FFN_UP_EXP:
		if (s->kind != TPC_SPLIT_COL || s->dim != col || s->nparts != 1)
			return "column-parallel on dim 0 (split_matrix_tp)";
		break;
	case TPC_ROLE_ATTN_OUT:
	case TPC_ROLE_FFN_DOWN:
	case TPC_ROLE_FFN_DOWN_EXP:
		if (bias ? s->dim >= 0 : (s->kind != TPC_SPLIT_ROW || s->dim != row))
			return bias ? "replicated (the bias of a row-parallel layer)" : "row-parallel on dim 1 (split_matrix_tp)";
		break;
	case TPC_ROLE_TOKEN_EMBD:
		return NULL; /* made whole by check() */
	default:
		if (s->dim >= 0)
			return "replicated";
	}
	for (int k = 0; k < s->nparts && s->dim >= 0; k++)
		if (s->part[k].pad)
			return "split without padding (TensorRT-LLM asserts tp divides it)";
	return NULL;
}

static int check_entries(tpc_shard_plan *sp, tpc_err *e)
{
	for (size_t i = 0; i < sp->n; i++) {
		tpc_shard_entry *en = &sp->t[i];
		const tpc_tensor *t = &sp->in->t[en->in];
		bool bias = false;
		const tpc_tensor_row *w = row_of(sp->family, HF, t->name, NULL, NULL, &bias);
		if (!w || (bias && !w->bias))
			return tpc_err_at(e, TPC_EINPUT, NULL, t->name,
				      "TensorRT-LLM's %s checkpoint has no parameter for this tensor (drop or rename it with --rules before sharding)",
				      sp->family->name);
		const char *want = split_want(sp, w, bias, t, &en->split);
		if (want) {
			char msg[256];
			snprintf(msg, sizeof(msg), "the trtllm layout needs this tensor %s, as TensorRT-LLM's converter splits it; the plan (rule %d) splits it %s",
				 want, en->split.rule, en->split.dim < 0 ? "not at all" : tpc_split_kind_name(en->split.kind));
			return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "%s", msg);
		}
		if (w->role == TPC_ROLE_TOKEN_EMBD) {
			/* whole on every rank of the first stage (use_parallel_embedding False) */
			int rule = en->split.rule;
			memset(&en->split, 0, sizeof(en->split));
			en->split.kind = TPC_SPLIT_REPLICATE;
			en->split.dim = -1;
			en->split.rule = rule;
		}
	}
	return 0;
}

/* lm_head: the checkpoint's, or (tied, or GPT-2) the embedding's, which an
 * lm_head the checkpoint also holds must then equal. Sets sp->tied when
 * lm_head is made from the embedding. */
static int check_head(tpc_shard_plan *sp, const tpc__trt_source *src, tpc_err *e)
{
	const tpc_family *f = sp->family;
	int64_t ie = find_role(sp, TPC_ROLE_TOKEN_EMBD), il = find_role(sp, TPC_ROLE_OUTPUT);
	bool from_embed = f->conv1d || src->tied;
	sp->tied = il < 0;
	if (il < 0 && !from_embed)
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json does not say tie_word_embeddings, but the checkpoint has no lm_head.weight: TensorRT-LLM would find no lm_head");
	if (il >= 0 && from_embed && ie >= 0) {
		const tpc_tensor *a = &sp->in->t[il], *b = &sp->in->t[ie];
		bool eq = tpc_tensor_same_view(a, b);
		int ret;
		if (!eq && a->dtype == b->dtype && a->ndim == b->ndim &&
		    !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)) && (ret = tpc_tensors_equal(sp->in, a, b, &eq, e)))
			return ret;
		if (!eq)
			return tpc_err_at(e, TPC_EINPUT, NULL, a->name, "%s, but this lm_head differs from the embedding, which TensorRT-LLM's converter takes instead",
				      f->conv1d ? "GPT-2's lm_head is its token embedding (models/gpt/convert.py)" : "config.json says tie_word_embeddings");
	}
	return 0;
}

/* Attention biases in the checkpoint need attn_bias in the config (LLaMA's
 * is config.json's bias or attention_bias; the QWenConfig and GPTConfig
 * classes the record may name always have them): TensorRT-LLM would build
 * the model without them and only warn that the file holds tensors it does
 * not use. */
static int check_bias(const tpc_shard_plan *sp, const tpc__trt_source *src, tpc_err *e)
{
	static const char *const keys[] = {"bias", "attention_bias", "attn_bias"};
	bool said = src->fam->trtllm.qwen_type || src->fam->trtllm.gpt_variant;
	for (size_t k = 0; k < 3 && !said; k++)
		said = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(src->root, keys[k]));
	for (size_t i = 0; i < sp->in->n && !said; i++) {
		bool bias = false;
		const tpc_tensor_row *w = row_of(sp->family, HF, sp->in->t[i].name, NULL, NULL, &bias);
		if (w && bias && w->role >= TPC_ROLE_ATTN_Q && w->role <= TPC_ROLE_ATTN_OUT)
			return tpc_err_at(e, TPC_EINPUT, src->path, sp->in->t[i].name,
					  "an attention bias, but config.json does not say attention_bias: TensorRT-LLM would build the model without it");
	}
	return 0;
}

static int check(tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	tpc__trt_source src;
	tpc_buf cfg = TPC_BUF_INIT;
	tpc_dtype dt;
	int ret = tpc__trt_source_open(sp, o, &src, e);
	if (ret)
		goto out;
	if (!src.fam || !tpc_family_lists(src.fam->layouts, "trtllm") || !src.fam->tensors) {
		char a[128];
		tpc_sanitize(a, sizeof(a), src.arch[0] ? src.arch : "(none)");
		ret = tpc_err_at(e, TPC_EINPUT, src.path, NULL,
				  "the trtllm layout writes TensorRT-LLM checkpoints of LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM and GPT2LMHeadModel models, not %s (config.json's architectures)",
				  a);
		goto out;
	}
	sp->family = src.fam;
	if (sp->facts.quant.method && !o->dequantized)
		ret = tpc_err_set(e, TPC_EINPUT,
				  "the model is quantized (%s): TensorRT-LLM converts quantized checkpoints itself; shard with --dequantize for a dense one",
				  sp->facts.quant.name[0] ? sp->facts.quant.name : "quantization_config");
	else if (sp->ep > 1 && sp->ep_placement != TPC_EP_CONTIGUOUS)
		ret = tpc_err_set(e, TPC_EUSAGE,
				  "TensorRT-LLM gives each moe_ep rank a contiguous block of experts (Mapping.ep_experts): --ep-placement round-robin does not go with the trtllm layout");
	if (!ret && !(ret = model_dtype(sp, &dt, e)) && !(ret = check_entries(sp, e)) && !(ret = check_head(sp, &src, e)) &&
	    !(ret = check_bias(sp, &src, e)))
		ret = tpc__trt_config_render(sp, &src, dt, &cfg, e); /* the config can be written */
out:
	tpc_buf_release(&cfg);
	tpc__trt_source_release(&src);
	return ret;
}

/* lm_head rows padded to a multiple of tp (pad_vocab_size), not the plan's multiple. */
static int adjust_plan(tpc_plan *plan, const tpc_ckpt *in, const tpc_model_facts *f, int tp, tpc_err *e)
{
	(void)in;
	(void)f;
	(void)tp;
	(void)e;
	plan->pad_multiple = 1;
	for (size_t i = 0; i < plan->nrules; i++)
		if (plan->rules[i].kind == TPC_SPLIT_VOCAB)
			plan->rules[i].pad_multiple = 0;
	return 0;
}

/* ---- shard: the rank as TensorRT-LLM names it ---- */

/* The tpconv rank whose expert slices TensorRT-LLM rank r holds (mapping.py:
 * moe_ep_rank = tp_rank % moe_ep_size, moe_tp_rank = tp_rank / moe_ep_size;
 * tpconv's group g = rank / moe_tp_size holds experts g, local rank % moe_tp_size). */
static int expert_rank(const tpc_shard_plan *sp, int r)
{
	int t = r % sp->tp, g = sp->tp / sp->ep;
	return r - t + (t % sp->ep) * g + t / sp->ep;
}

/* Layer l's stacked expert tensors (mlp.fc = [w3; w1] per expert, mlp.proj =
 * w2), from the rank holding TensorRT-LLM rank r's experts. */
static int add_experts(const tpc_shard_plan *sp, int r, int64_t l, int64_t local, tpc_ckpt *out, tpc_err *e)
{
	return tpc__layout_add_stacked(sp->family, TRT, &sp->rank[expert_rank(sp, r)], l, local, out, e);
}

/* lm_head made from the embedding: padded to a multiple of tp, rank t's rows. */
static int add_tied_head(const tpc_shard_plan *sp, int t, tpc_ckpt *out, tpc_err *e)
{
	int64_t ie = find_role(sp, TPC_ROLE_TOKEN_EMBD);
	const tpc_tensor *emb = ie >= 0 ? &sp->in->t[ie] : NULL;
	if (!emb || emb->ndim != 2)
		return tpc_err_set(e, TPC_EINPUT, "lm_head is made from the token embedding, and the checkpoint has none");
	tpc_split s;
	tpc_tensor d;
	memset(&s, 0, sizeof(s));
	s.kind = TPC_SPLIT_VOCAB;
	s.rule = -1;
	s.nparts = 1;
	s.part[0].size = emb->shape[0];
	s.part[0].pad = (emb->shape[0] + sp->tp - 1) / sp->tp * sp->tp - emb->shape[0];
	if (tpc__rank_tensor(emb, &s, sp->tp, t, &d))
		return tpc_err_nomem(e);
	int ret = tpc__layout_add_copy(out, "lm_head.weight", &d, e);
	tpc_tensor_release(&d);
	return ret;
}

/* One tensor of the rank (row w, layer l) under its TensorRT-LLM name: q, k
 * and v fused, Conv1D weights transposed, the router as float32. */
static int add_dense(const tpc_shard_plan *sp, const tpc_ckpt *rk, const tpc_tensor *t, const tpc_tensor_row *w,
		     int64_t l, int64_t local, bool bias, tpc_ckpt *out, tpc_err *e)
{
	const tpc_tensor_row *g[MAXG];
	char nm[512];
	int part, n = tpc__layout_group(sp->family, TRT, w, g), ret;
	tpc_tensor d;
	if (!n || !tpc_family_name(w, TRT, local, -1, bias, nm, sizeof(nm), &part))
		return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "no TensorRT-LLM name for this tensor");
	if (part > 0)
		return 0; /* with part 0 */
	if (tpc__layout_fuse(rk, g, n, l, -1, bias, &d))
		return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "TensorRT-LLM fuses this tensor with others the rank lacks (q, k and v)");
	if (transposed(sp->family, w, bias, d.ndim))
		tpc_tensor_transpose2d(&d);
	if (w->role == TPC_ROLE_FFN_GATE_INP)
		cast_to(&d, TPC_F32);
	ret = tpc__layout_add_copy(out, nm, &d, e);
	tpc_tensor_release(&d);
	return ret;
}

static int stored_rank(const tpc_shard_plan *sp, int r, tpc_ckpt *out, tpc_err *e)
{
	const tpc_family *f = sp->family;
	const tpc_ckpt *rk = &sp->rank[r];
	int stage = r / sp->tp, ret = 0;
	int64_t start = stage_start(sp->layers, sp->pp, stage);
	bool *done = tpc_calloc((size_t)(sp->layers + 1), sizeof(bool));
	char v[16];
	if (!done)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < rk->n && !ret; i++) {
		const tpc_tensor *t = &rk->t[i];
		int64_t l = -1;
		bool bias = false;
		const tpc_tensor_row *w = row_of(f, HF, t->name, &l, NULL, &bias);
		int64_t local = l < 0 ? -1 : l - start;
		if (!w) {
			ret = tpc_err_at(e, TPC_EINPUT, NULL, t->name, "no TensorRT-LLM name for this tensor");
		} else if (tpc__layout_stacked(w, TRT)) {
			if (l >= 0 && l < sp->layers && !done[l]) {
				done[l] = true;
				ret = add_experts(sp, r, l, local, out, e);
			}
		} else {
			ret = add_dense(sp, rk, t, w, l, local, bias, out, e);
		}
	}
	free(done);
	if (!ret && sp->tied && stage == sp->pp - 1)
		ret = add_tied_head(sp, r % sp->tp, out, e);
	for (size_t i = 0; i < rk->nmeta && !ret; i++)
		ret = tpc_ckpt_meta_set(out, rk->meta_k[i], rk->meta_v[i], e);
	snprintf(v, sizeof(v), "%d", r % sp->tp % sp->ep); /* moe_ep_rank: the experts this file holds */
	if (!ret && sp->ep > 1)
		ret = tpc_ckpt_meta_set(out, "tpconv.ep_rank", v, e);
	return ret;
}

/* ---- companions ---- */

/* The model's own config.json, kept beside TensorRT-LLM's under
 * TPC_EXTRAS_KEPT_CONFIG (what merge restores, byte for byte as every other
 * layout keeps it): the companions' config.json as the other layouts copy it,
 * else the --config file TensorRT-LLM's was written from. A set TensorRT-LLM
 * wrote (no such file) gets nothing: merge rebuilds a config then. */
static int keep_model_config(const char *dir, const tpc_shard_opts *o, const tpc__trt_source *src, tpc_err *e)
{
	tpc_extras_opts xo;
	const char *drop[16] = {NULL};
	unsigned flags = o->force ? TPC_OUT_FORCE : 0;
	char *kept = NULL;
	int ret = 0;
	tpc__layout_companion_opts(o, NULL, true, &xo, drop, 16);
	xo.config_as = TPC_EXTRAS_KEPT_CONFIG;
	if (!o->config_file && o->config_dir && tpc_extras_copies_config(o->config_dir, &xo))
		return tpc_extras_copy(o->config_dir, dir, &xo, NULL, e);
	if (src->trt || !src->text)
		return 0;
	if (!(kept = tpc_path_join(dir, TPC_EXTRAS_KEPT_CONFIG)))
		return tpc_err_nomem(e);
	ret = tpc_write_file_atomic(kept, src->text, src->len, flags, e);
	free(kept);
	return ret;
}

static int write_extras(const tpc_shard_plan *sp, const char *dir, const tpc_shard_opts *o, tpc_err *e)
{
	tpc__trt_source src;
	tpc_buf b = TPC_BUF_INIT;
	tpc_dtype dt;
	char *cfg = tpc_path_join(dir, "config.json");
	int ret = cfg ? tpc__trt_source_open(sp, o, &src, e) : tpc_err_nomem(e);
	if (!ret && !(ret = model_dtype(sp, &dt, e)))
		ret = tpc__trt_config_render(sp, &src, dt, &b, e);
	/* the tokenizer and the rest beside; the model's config.json is replaced */
	if (!ret && !o->no_extras)
		ret = tpc__layout_copy_companions(sp, dir, o, NULL, false, e);
	if (!ret && !o->no_extras)
		ret = keep_model_config(dir, o, &src, e);
	if (!ret)
		ret = tpc_write_file_atomic(cfg, b.p, b.len, o->force || !o->no_extras ? TPC_OUT_FORCE : 0, e);
	if (cfg)
		tpc__trt_source_release(&src);
	tpc_buf_release(&b);
	free(cfg);
	return ret;
}

/* Merge: the tokenizer and the other companions, and the model's own
 * config.json where the set kept it; never TensorRT-LLM's config.json (no
 * Hugging Face config: it lacks "architectures"; merge_config rebuilds one). */
static const char *merge_extras(const char *dir, const char *rank0, tpc_extras_opts *xo)
{
	static const char *const drop[] = {"mapping", NULL};
	char *kept = tpc_path_join(dir, TPC_EXTRAS_KEPT_CONFIG);
	bool have = kept && tpc_exists(kept);
	(void)rank0;
	free(kept);
	if (have) {
		xo->config_from = TPC_EXTRAS_KEPT_CONFIG;
		return dir;
	}
	xo->config_drop = drop;
	xo->config_marker = "architectures";
	return dir;
}

static char *merge_config(const char *dir, tpc_err *e)
{
	return tpc__trt_hf_config(dir, e);
}

/* ---- merge, reshard and verify: the rank back as split ---- */

/* The file's tensors while the Hugging Face ones are appended: renamed
 * (lm_head.weight is the same name in both), dropped at the end. */
#define OWN "\x01trt:"

static const char *orig(const char *n)
{
	return strncmp(n, OWN, sizeof(OWN) - 1) ? n : n + sizeof(OWN) - 1;
}

/* What reading rank c->rank needs: the set's model and geometry. */
typedef struct rd {
	const tpc_layout_rank_ctx *c;
	tpc__trt_model m;
	char *dir;
	const char *path;
	int64_t start; /* the stage's first layer */
} rd;

static int bad_in(const rd *d, const char *name, const char *path, const char *msg, tpc_err *e)
{
	return tpc_err_at(e, TPC_EINPUT, path ? path : d->path, name, "%s", msg);
}

/* Rows of each part of a fused tensor of `rows` rows (q, k, v: the rank's
 * query heads, then its kv heads, one replicated head when tp > kv; [w3; w1]
 * halves). */
static int part_rows(const rd *d, const tpc_tensor_row **g, int n, int64_t rows, int64_t *len)
{
	int64_t tp = d->m.tp, hd = d->m.head_size, kv = d->m.kv_heads, sum = 0;
	for (int k = 0; k < n; k++) {
		switch (g[k]->role) {
		case TPC_ROLE_ATTN_Q: len[k] = d->m.heads / tp * hd; break;
		case TPC_ROLE_ATTN_K:
		case TPC_ROLE_ATTN_V: len[k] = (kv >= tp ? kv / tp : 1) * hd; break;
		default: len[k] = rows / n;
		}
		sum += len[k];
	}
	bool heads_fit = d->m.heads % tp == 0 && (kv >= tp ? kv % tp == 0 : tp % kv == 0);
	return sum == rows && (n == 1 || heads_fit) ? 0 : -1;
}

/* The router, float32 in the file, in the model's dtype again: read and cast
 * here (it is small: experts x hidden), so merge, checksums and verify see
 * plain bytes of the dtype the model had. Kept float32 when the cast would
 * change a value (a router that was float32 in the model). */
static int router_back(const rd *d, tpc_ckpt *ck, const char *tname, const char *path, tpc_tensor *p, tpc_err *e)
{
	uint64_t n = p->numel, wide = p->nbytes, narrow = n * tpc_dtype_bits(d->m.dtype) / 8;
	uint8_t *a = tpc_malloc(wide ? wide : 1), *b = tpc_malloc(narrow ? narrow : 1), *c = tpc_malloc(wide ? wide : 1);
	int ret = 0, src;
	if (!a || !b || !c)
		ret = tpc_err_nomem(e);
	else if (!(ret = tpc_ckpt_read_bytes(ck, p, 0, wide, a, e)) && !(ret = tpc_cast(b, d->m.dtype, a, p->src_dtype, n, e)))
		ret = tpc_cast(c, p->src_dtype, b, d->m.dtype, n, e);
	if (ret || memcmp(a, c, wide)) {
		if (ret)
			bad_in(d, tname, path, "cannot read the router back in the model's dtype", e);
		goto out;
	}
	ret = tpc_ckpt_add_mem(ck, "the router in the model's dtype", b, narrow, &src, e);
	b = NULL; /* ck's now (freed by it on failure) */
	if (ret)
		goto out;
	p->src = src;
	p->offset = 0;
	p->storage = -1;
	p->flags &= ~(uint32_t)TPC_TF_BYTESWAP;
	p->dtype = p->src_dtype = d->m.dtype;
	tpc_tensor_set_contiguous(p);
	p->nbytes = narrow;
out:
	free(a);
	free(b);
	free(c);
	return ret;
}

/* Tensor t (TensorRT-LLM row w's, layer l global, expert x) as Hugging Face
 * tensors appended to ck: parts apart, Conv1D weights back to [in, out], the
 * router in the model's dtype. `sub`/`nsub`: only the sub-th of nsub equal
 * slices along the split dimension (an expert as if split over all ranks). */
static int add_hf(const rd *d, tpc_ckpt *ck, const char *tname, const tpc_tensor *t, const tpc_tensor_row *w,
		  int64_t l, int64_t x, bool bias, int sub, int nsub, const char *path, tpc_err *e)
{
	const tpc_family *f = d->m.fam;
	const tpc_tensor_row *g[MAXG];
	int64_t len[MAXG], off = 0;
	int n = tpc__layout_group(f, TRT, w, g), ret = 0;
	if (!n || t->ndim < 1 || part_rows(d, g, n, t->shape[0], len))
		return bad_in(d, tname, path,
			      "its rows do not fit the parts config.json's head counts and tp give it (num_attention_heads, num_key_value_heads, head_size)",
			      e);
	for (int k = 0; k < n && !ret; k++) {
		char nm[512];
		tpc_tensor p, s;
		if (!tpc_family_name(g[k], HF, l, x, bias, nm, sizeof(nm), NULL))
			return bad_in(d, tname, path, "no Hugging Face name for this TensorRT-LLM tensor", e);
		if (tpc_tensor_narrow(&p, t, 0, off, len[k]))
			return tpc_err_nomem(e);
		off += len[k];
		if (transposed(f, g[k], bias, p.ndim))
			tpc_tensor_transpose2d(&p);
		if (g[k]->role == TPC_ROLE_FFN_GATE_INP && p.dtype != d->m.dtype && (ret = router_back(d, ck, tname, path, &p, e)))
			break;
		int dim = g[k]->role == TPC_ROLE_FFN_DOWN_EXP ? 1 : 0;
		if (nsub > 1 && (p.ndim <= dim || p.shape[dim] % nsub)) {
			ret = bad_in(d, tname, path, "an expert's slice does not divide over moe_ep_size", e);
		} else if (nsub > 1 && !tpc_tensor_narrow(&s, &p, dim, sub * (p.shape[dim] / nsub), p.shape[dim] / nsub)) {
			ret = tpc__layout_add_copy(ck, nm, &s, e);
			tpc_tensor_release(&s);
		} else {
			ret = nsub > 1 ? tpc_err_nomem(e) : tpc__layout_add_copy(ck, nm, &p, e);
		}
		tpc_tensor_release(&p);
	}
	return ret;
}

/* The stacked expert tensors of TensorRT-LLM file `fr` (its rank index) as
 * each expert's Hugging Face tensors appended to ck. ft holds the file's
 * tensors: ck itself (its first n), or the file opened apart, whose bytes
 * are ck's source `src`. */
static int add_file_experts(const rd *d, tpc_ckpt *ck, const tpc_ckpt *ft, size_t n, int src, int fr, int sub,
			    int nsub, const char *path, tpc_err *e)
{
	const tpc_family *f = d->m.fam;
	int64_t per = d->m.experts / d->m.moe_ep, e0 = (fr % d->m.tp) % d->m.moe_ep * per;
	int ret = 0;
	for (size_t i = 0; i < n && !ret; i++) {
		int64_t l = -1;
		bool bias = false;
		const char *name = orig(ft->t[i].name); /* the string stays where it is when ck grows */
		const tpc_tensor_row *w = row_of(f, TRT, name, &l, NULL, &bias);
		if (!w || !tpc__layout_stacked(w, TRT))
			continue;
		if (ft->t[i].ndim != 3 || ft->t[i].shape[0] != per)
			return bad_in(d, name, path,
				      "a stacked expert tensor must be [experts of the rank, rows, columns], moe.num_experts / moe_ep_size experts",
				      e);
		for (int64_t j = 0; j < per && !ret; j++) {
			tpc_tensor one;
			if (tpc_tensor_select0(&one, &ft->t[i], j))
				return tpc_err_nomem(e);
			if (src >= 0)
				one.src = src;
			ret = add_hf(d, ck, name, &one, w, l + d->start, e0 + j, bias, sub, nsub, path, e);
			tpc_tensor_release(&one);
		}
	}
	return ret;
}

/* The experts of TensorRT-LLM rank file fr (another rank's file) into ck. */
static int add_other_experts(const rd *d, tpc_ckpt *ck, int fr, int sub, int nsub, tpc_err *e)
{
	tpc_ckpt ft;
	int src = -1, ret;
	char *path = tpc__trtllm_rank_path(d->dir, fr % d->m.tp, fr / d->m.tp, d->m.tp);
	tpc_ckpt_init(&ft);
	if (!path)
		return tpc_err_nomem(e);
	if (!(ret = tpc_ckpt_open(&ft, path, NULL, e)) && ft.nsrc != 1)
		ret = tpc_err_set(e, TPC_EINPUT, "internal: a rank file of %zu sources", ft.nsrc);
	if (!ret)
		ret = tpc_ckpt_add_file(ck, path, &src, e);
	for (size_t i = 0; !ret && i < ft.n; i++)
		ft.t[i].storage = -1;
	if (!ret)
		ret = add_file_experts(d, ck, &ft, ft.n, src, fr, sub, nsub, path, e);
	tpc_ckpt_release(&ft);
	free(path);
	return ret;
}

/* Rank t's experts as tpconv split them. A set with a manifest: tpconv rank
 * t of group t / g (g = moe_tp_size), local t % g, is TensorRT-LLM file
 * (t % g) * ep + t / g. Without one: as if every expert were split over all
 * tp ranks: rank t's rows lie in moe-tp slice t / ep, sub-slice t % ep, of
 * the files (t / ep) * ep + G for every moe_ep rank G. */
static int add_experts_back(const rd *d, tpc_ckpt *ck, size_t n0, tpc_err *e)
{
	int tp = d->m.tp, ep = d->m.moe_ep, g = d->m.moe_tp, t = d->c->tp_rank, base = d->c->pp_rank * tp, ret = 0;
	if (d->c->names) {
		int fr = base + (t % g) * ep + t / g;
		return fr == d->c->rank ? add_file_experts(d, ck, ck, n0, -1, fr, 0, 1, d->path, e)
					: add_other_experts(d, ck, fr, 0, 1, e);
	}
	for (int G = 0; G < ep && !ret; G++) {
		int fr = base + (t / ep) * ep + G;
		ret = fr == d->c->rank ? add_file_experts(d, ck, ck, n0, -1, fr, t % ep, ep, d->path, e)
				       : add_other_experts(d, ck, fr, t % ep, ep, e);
	}
	return ret;
}

/* The rank's own tensors but the experts, under Hugging Face names. */
static int add_dense_back(const rd *d, tpc_ckpt *ck, size_t n0, bool *experts, tpc_err *e)
{
	int ret = 0;
	for (size_t i = 0; i < n0 && !ret; i++) {
		int64_t l = -1;
		bool bias = false;
		const char *name = orig(ck->t[i].name);
		const tpc_tensor_row *w = row_of(d->m.fam, TRT, name, &l, NULL, &bias);
		if (!w)
			return bad_in(d, name, NULL,
				      "not a TensorRT-LLM name of this model's family (quantized checkpoints and other architectures are not read)", e);
		if (tpc__layout_stacked(w, TRT)) {
			*experts = true;
			continue;
		}
		/* an lm_head tpconv made from the embedding the input had alone */
		if (w->role == TPC_ROLE_OUTPUT && d->c->names && !tpc__layout_listed(d->c, "lm_head.weight"))
			continue;
		tpc_tensor t;
		if (tpc_tensor_copy(&t, &ck->t[i]))
			return tpc_err_nomem(e);
		ret = add_hf(d, ck, name, &t, w, l < 0 ? -1 : l + d->start, -1, bias, 0, 1, NULL, e);
		tpc_tensor_release(&t);
	}
	return ret;
}

static int open_rank(const char *path, const tpc_layout_rank_ctx *c, tpc_ckpt *ck, tpc_err *e)
{
	rd d;
	bool *keep = NULL, experts = false;
	int ret;
	memset(&d, 0, sizeof(d));
	d.c = c;
	d.path = path;
	if (!(d.dir = tpc_path_dir(path)))
		return tpc_err_nomem(e);
	if ((ret = tpc__trt_model_read(d.dir, &d.m, e)))
		goto out;
	if (d.m.tp != c->tp || d.m.pp != c->pp) {
		ret = tpc_err_at(e, TPC_EINPUT, d.dir, NULL, "config.json's mapping says tp %d, pp %d, but the set has tp %d, pp %d",
				  d.m.tp, d.m.pp, c->tp, c->pp);
		goto out;
	}
	d.start = stage_start(d.m.layers, d.m.pp, c->pp_rank);
	if ((ret = tpc_ckpt_open(ck, path, NULL, e)))
		goto out;
	size_t n0 = ck->n;
	for (size_t i = 0; i < n0 && !ret; i++) {
		tpc_buf b = TPC_BUF_INIT;
		tpc_buf_adds(&b, OWN);
		tpc_buf_adds(&b, ck->t[i].name);
		ret = b.oom ? tpc_err_nomem(e) : tpc_ckpt_rename(ck, (int64_t)i, b.p, e);
		tpc_buf_release(&b);
	}
	if (!ret && !(ret = add_dense_back(&d, ck, n0, &experts, e)) && experts) {
		if (!d.m.experts || d.m.experts % d.m.moe_ep)
			ret = bad_in(&d, "mlp.fc.weight", NULL, "stacked expert tensors, but config.json's moe.num_experts does not say how many", e);
		else
			ret = add_experts_back(&d, ck, n0, e);
	}
	if (!ret && !(keep = tpc_calloc(ck->n + 1, sizeof(bool))))
		ret = tpc_err_nomem(e);
	for (size_t i = n0; !ret && i < ck->n; i++)
		keep[i] = true;
	if (!ret)
		ret = tpc_ckpt_filter(ck, keep, e);
out:
	free(keep);
	free(d.dir);
	return ret;
}

/* ---- sets TensorRT-LLM wrote ---- */

/* The family config.json's "architecture" names when it is a TensorRT-LLM
 * config (with "mapping"); *trt whether it is one. */
static const tpc_family *config_family(const char *dir, bool *trt)
{
	char *path = tpc_path_join(dir, "config.json");
	tpc_cfg *cfg = NULL;
	const tpc_family *f = NULL;
	tpc_err e;
	tpc_err_init(&e);
	*trt = false;
	if (path && tpc_exists(path) && !tpc_cfg_from_file(&cfg, path, &e)) {
		/* TensorRT-LLM's own members, at its top */
		const cJSON *a = tpc_cfg_get(cfg, TPC_CFG_TOP, "architecture", NULL);
		*trt = cJSON_IsString(a) && cJSON_IsObject(tpc_cfg_get(cfg, TPC_CFG_TOP, "mapping", NULL));
		f = *trt ? tpc_family_by_trtllm_arch(a->valuestring) : NULL;
	}
	tpc_cfg_free(cfg);
	free(path);
	return f;
}

/* A folder with rank files and a TensorRT-LLM config.json. */
static bool detect_dir(const char *dir)
{
	bool rank = false, trt;
	DIR *dd = opendir(dir);
	struct dirent *de;
	while (dd && !rank && (de = readdir(dd)))
		rank = tpc__trtllm_is_rank_file(de->d_name);
	if (dd)
		closedir(dd);
	if (!rank)
		return false;
	config_family(dir, &trt);
	return trt;
}

static void foreign_facts(const char *dir, tpc_model_facts *f)
{
	tpc__trt_model m;
	tpc_err e;
	tpc_err_init(&e);
	if (tpc__trt_model_read(dir, &m, &e))
		return;
	f->heads = m.heads;
	f->kv_heads = m.kv_heads;
	f->head_dim = m.head_size;
	f->hidden = m.hidden;
	f->vocab = m.vocab;
	f->layers = m.layers;
	f->experts = m.experts;
}

/* Its architecture's family, when it is one the layout reads (the rest of
 * config.json is checked when the ranks are read). */
static const char *foreign_preset(const char *dir)
{
	bool trt;
	const tpc_family *f = config_family(dir, &trt);
	return f && tpc_family_lists(f->layouts, "trtllm") ? f->name : NULL;
}

static const char *const formats[] = {"safetensors", NULL};

const tpc_layout tpc_layout_trtllm = {
	.name = "trtllm",
	.desc = "TensorRT-LLM checkpoint for trtllm-build --checkpoint_dir: rankN.safetensors under its names (fused qkv, stacked experts) and its config.json",
	.formats = formats, .set_format = "trtllm-checkpoint",
	.expert_parallel = true,
	.rank_name = tpc__trtllm_rank_name, .check = check, .adjust_plan = adjust_plan,
	.stored_rank = stored_rank, .open_rank = open_rank,
	.write_extras = write_extras, .merge_extras = merge_extras, .merge_config = merge_config,
	.detect_dir = detect_dir, .foreign_geometry = tpc__trtllm_geometry, .foreign_rank_path = tpc__trtllm_rank_path,
	.foreign_facts = foreign_facts, .foreign_preset = foreign_preset,
};
