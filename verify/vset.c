/* vset.c - what a verify run checks: the shard-set description (tensors,
 * their splits, each rank's piece, biases linked to their layers), its
 * validation, and the model structure (tpc_verify_model_from_names): a
 * token model's from its family record's layer parts and tensor table,
 * diffusers' and DALLE2-pytorch's blocks from their module names; see
 * tpc_verify.h. The checks that run over it are in verify.c, the report in
 * report.c. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_cast.h"
#include "tpc_family.h"
#include "tpc_util.h"
#include "vint.h"

/* ---- names ---- */

const char *tpc_vsplit_name(tpc_vsplit s)
{
	static const char *n[] = {"replicate", "col", "row", "vocab", "dim"};
	return (unsigned)s < 5 ? n[s] : "?";
}

const char *tpc_vcheck_name(tpc_vcheck k)
{
	static const char *n[] = {"structure", "col", "row", "embed", "head", "mlp", "attn", "model"};
	return (unsigned)k < TPC_VC_COUNT ? n[k] : "?";
}

int tpc_verify_split_dim(tpc_vsplit s, bool transposed, int ndim)
{
	switch (s) {
	case TPC_VSPLIT_COL:
		return transposed && ndim >= 2 ? 1 : 0;
	case TPC_VSPLIT_ROW:
		if (ndim < 2)
			return -1;
		return transposed ? 0 : 1;
	case TPC_VSPLIT_VOCAB:
		return 0;
	default:
		return -1;
	}
}

/* ---- the set ---- */

static int groups(const tpc_vpart *p, int tp)
{
	return tp / (p->replicas > 0 ? p->replicas : 1);
}

int tpc_vtensor_tp(const tpc_vtensor *v, int tp)
{
	if (v->ep > 1)
		return tp % v->ep == 0 ? tp / v->ep : tp;
	return v->dp > 1 && tp % v->dp == 0 ? tp / v->dp : tp;
}

int tpc_vtensor_root(const tpc_vtensor *v, int tp)
{
	return v->ep > 1 ? v->ep_group * tpc_vtensor_tp(v, tp) : 0;
}

bool tpc_vtensor_holds(const tpc_vtensor *v, int tp, int t)
{
	if (v->ep > 1)
		return t / tpc_vtensor_tp(v, tp) == v->ep_group;
	return v->dp <= 1 || t < tpc_vtensor_tp(v, tp);
}

int64_t tpc_vpart_len(const tpc_vtensor *v, int k, int tp)
{
	const tpc_vpart *p = &v->part[k];
	int g = groups(p, tpc_vtensor_tp(v, tp));
	return g ? (p->size + p->pad) / g : 0;
}

int64_t tpc_vpart_start(const tpc_vtensor *v, int k, int tp, int t)
{
	const tpc_vpart *p = &v->part[k];
	t %= tpc_vtensor_tp(v, tp);
	return (int64_t)(t / (p->replicas > 0 ? p->replicas : 1)) * tpc_vpart_len(v, k, tp);
}

int64_t tpc_vpart_local_off(const tpc_vtensor *v, int k, int tp)
{
	int64_t o = 0;
	for (int j = 0; j < k; j++)
		o += tpc_vpart_len(v, j, tp);
	return o;
}

int64_t tpc_vtensor_local_dim(const tpc_vtensor *v, int tp)
{
	return tpc_vpart_local_off(v, v->nparts, tp);
}

void tpc_verify_set_init(tpc_verify_set *s, int tp)
{
	memset(s, 0, sizeof(*s));
	s->tp = tp;
}

static void model_free(tpc_vmodel *m)
{
	if (!m)
		return;
	for (int64_t l = 0; l < m->nlayers; l++) {
		free(m->layers[l].name);
		free(m->layers[l].moe.exp);
	}
	free(m->layers);
	free(m);
}

void tpc_verify_set_release(tpc_verify_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->t[i].name);
		free(s->t[i].rank);
		free(s->t[i].rank_hash);
	}
	free(s->t);
	model_free(s->model);
	memset(s, 0, sizeof(*s));
}

int64_t tpc_verify_set_add(tpc_verify_set *s, const char *name, const tpc_ckpt *ref_ck,
			   const tpc_tensor *ref, tpc_vsplit split, int dim, bool transposed,
			   bool row_bias, int nparts, const tpc_vpart *parts, tpc_err *e)
{
	if (s->tp < 1 || s->tp > TPC_VERIFY_MAX_TP)
		return tpc_err_set(e, TPC_EINPUT, "tp %d is out of range (1..%d)", s->tp, TPC_VERIFY_MAX_TP);
	if (nparts < 0 || nparts > TPC_VERIFY_MAX_PARTS)
		return tpc_err_set(e, TPC_EINPUT, "tensor '%s': %d parts (at most %d)", name, nparts,
				   TPC_VERIFY_MAX_PARTS);
	if (tpc_grow((void **)&s->t, &s->cap, s->n + 1, sizeof(*s->t)))
		return tpc_err_nomem(e);
	tpc_vtensor *v = &s->t[s->n];
	memset(v, 0, sizeof(*v));
	v->name = tpc_strdup(name);
	v->rank = tpc_calloc((size_t)s->tp, sizeof(*v->rank));
	if (!v->name || !v->rank) {
		free(v->name);
		free(v->rank);
		return tpc_err_nomem(e);
	}
	v->ref_ck = ref_ck;
	v->ref = ref;
	v->split = split;
	v->dim = split == TPC_VSPLIT_REPLICATE ? -1 : dim;
	v->transposed = transposed;
	v->row_bias = row_bias;
	v->bias = -1;
	if (v->dim >= 0) {
		if (nparts && parts) {
			v->nparts = nparts;
			memcpy(v->part, parts, sizeof(*parts) * (size_t)nparts);
		} else {
			v->nparts = 1;
			v->part[0].size = ref && v->dim < ref->ndim ? ref->shape[v->dim] : 0;
		}
		for (int k = 0; k < v->nparts; k++)
			if (v->part[k].replicas < 1)
				v->part[k].replicas = 1;
	}
	return (int64_t)s->n++;
}

void tpc_verify_set_rank(tpc_verify_set *s, int64_t i, int t, const tpc_ckpt *ck, const tpc_tensor *rt)
{
	s->t[i].rank[t].ck = ck;
	s->t[i].rank[t].t = rt;
}

int64_t tpc_verify_set_find(const tpc_verify_set *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->t[i].name, name))
			return (int64_t)i;
	return -1;
}

void tpc_verify_link_biases(tpc_verify_set *s)
{
	char buf[TPC_ERR_NAME_MAX + 8];
	for (size_t i = 0; i < s->n; i++) {
		const char *n = s->t[i].name, *x = strrchr(n, '[');
		size_t l = strlen(n);
		if (l >= 7 && !strcmp(n + l - 7, ".weight")) {
			snprintf(buf, sizeof(buf), "%.*s.bias", (int)(l - 7), n);
		} else if (x && n[l - 1] == ']' && !(x - n >= 7 && !strncmp(x - 7, ".weight", 7)) &&
			   !(x - n >= 5 && !strncmp(x - 5, "_bias", 5))) {
			/* an expert's view of a stacked NAME that is not NAME.weight
			 * (gpt-oss's experts.gate_up_proj[x]): NAME_bias[x] */
			snprintf(buf, sizeof(buf), "%.*s_bias%s", (int)(x - n), n, x);
		} else {
			continue;
		}
		s->t[i].bias = tpc_verify_set_find(s, buf);
	}
}

int tpc_verify_set_validate(const tpc_verify_set *s, tpc_err *e)
{
	if (s->tp < 1 || s->tp > TPC_VERIFY_MAX_TP)
		return tpc_err_set(e, TPC_EINPUT, "tp %d is out of range (1..%d)", s->tp, TPC_VERIFY_MAX_TP);
	if (s->dp > 1 && s->tp % s->dp)
		return tpc_err_set(e, TPC_EINPUT, "%d data-parallel replicas do not divide the stage's %d ranks", s->dp, s->tp);
	for (size_t i = 0; i < s->n; i++) {
		const tpc_vtensor *v = &s->t[i];
		if (!v->ref)
			return tpc_err_set(e, TPC_EINPUT, "tensor '%s' is not in the reference", v->name);
		if (v->dim < 0)
			continue;
		if (v->dim >= v->ref->ndim)
			return tpc_err_set(e, TPC_EINPUT, "tensor '%s': split dim %d, but it has %d dims", v->name,
					   v->dim, v->ref->ndim);
		if (v->nparts < 1)
			return tpc_err_set(e, TPC_EINPUT, "tensor '%s' is split but has no parts", v->name);
		if (v->transposed && v->ref->ndim != 2)
			return tpc_err_set(e, TPC_EINPUT, "tensor '%s': transposed needs 2 dims", v->name);
		int64_t sum = 0;
		if (v->ep > 1 && (s->tp % v->ep || v->ep_group < 0 || v->ep_group >= v->ep))
			return tpc_err_set(e, TPC_EINPUT, "tensor '%s': EP group %d of %d does not fit tp %d", v->name,
					   v->ep_group, v->ep, s->tp);
		if (v->dp > 1 && (v->ep > 1 || v->dp != s->dp || s->tp % v->dp))
			return tpc_err_set(e, TPC_EINPUT, "tensor '%s': %d data-parallel replicas in a set of dp %d, tp %d%s",
					   v->name, v->dp, s->dp, s->tp, v->ep > 1 ? " (an expert's)" : "");
		int gtp = tpc_vtensor_tp(v, s->tp);
		for (int k = 0; k < v->nparts; k++) {
			const tpc_vpart *p = &v->part[k];
			int g;
			if (p->size < 0 || p->pad < 0 || p->replicas < 1 || gtp % p->replicas)
				return tpc_err_set(e, TPC_EINPUT,
						   "tensor '%s': part %d (size %lld, pad %lld, replicas %d) does not fit tp %d",
						   v->name, k, (long long)p->size, (long long)p->pad, p->replicas, gtp);
			g = groups(p, gtp);
			if ((p->size + p->pad) % g)
				return tpc_err_set(e, TPC_EINPUT,
						   "tensor '%s': part %d of %lld rows does not split into %d slices",
						   v->name, k, (long long)(p->size + p->pad), g);
			sum += p->size;
		}
		if (sum != v->ref->shape[v->dim])
			return tpc_err_set(e, TPC_EINPUT, "tensor '%s': parts add up to %lld, dim %d is %lld", v->name,
					   (long long)sum, v->dim, (long long)v->ref->shape[v->dim]);
		if (v->bias >= 0 && (size_t)v->bias >= s->n)
			return tpc_err_set(e, TPC_EINPUT, "tensor '%s': bias index out of range", v->name);
	}
	return 0;
}

/* ---- model description from Hugging Face names ---- */

static int64_t findf(const tpc_verify_set *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int64_t findf(const tpc_verify_set *s, const char *fmt, ...)
{
	char buf[TPC_ERR_NAME_MAX];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return (n < 0 || (size_t)n >= sizeof(buf)) ? -1 : tpc_verify_set_find(s, buf);
}

static int64_t rows_of(const tpc_verify_set *s, int64_t i, bool out)
{
	const tpc_vtensor *v = &s->t[i];
	if (!tpc__matrix(v->ref))
		return -1;
	return v->ref->shape[(out ^ v->transposed) ? 0 : 1];
}

/* A layer with no tensors (every index -1). */
static void layer_init(tpc_vlayer *L)
{
	memset(L, 0, sizeof(*L));
	L->norm1_w = L->norm1_b = L->norm2_w = L->norm2_b = -1;
	L->post1_w = L->post2_w = -1;
	L->attn.q = L->attn.k = L->attn.v = L->attn.qkv = L->attn.o = L->attn.kv = -1;
	L->attn.q_norm = L->attn.k_norm = L->attn.sinks = -1;
	L->mlp.gate = L->mlp.up = L->mlp.gate_up = L->mlp.down = -1;
	L->ssm.in = L->ssm.conv_w = L->ssm.conv_b = L->ssm.dt_bias = L->ssm.a_log = L->ssm.d = L->ssm.norm = L->ssm.out = -1;
}

/* Append layer L, named `name`, to the model. */
static int layer_add(tpc_vmodel *m, tpc_vlayer *L, const char *name, tpc_err *e)
{
	if (!(L->name = tpc_strdup(name)))
		return tpc_err_nomem(e);
	size_t cap = (size_t)m->nlayers;
	if (tpc_grow((void **)&m->layers, &cap, (size_t)m->nlayers + 1, sizeof(*L))) {
		free(L->name);
		return tpc_err_nomem(e);
	}
	m->layers[m->nlayers++] = *L;
	return 0;
}

/* ---- DiT (diffusers) blocks: one entry per attention and feed-forward ---- */

static void no_mlp(tpc_vmlp *p)
{
	p->gate = p->up = p->gate_up = p->down = -1;
}

/* The routing of layer nm's mixture of experts, its router mo->router
 * found: the experts from the router's rows, top_k (topk when config.json
 * names none; 0: it must), renormalised as `renorm` says unless
 * norm_topk_prob does, sigmoid or softmax scores, a group limit, the scale.
 * `biased`: the record's router is sigmoid_bias and the layer has its score
 * correction bias: where config.json names no scoring_func and no
 * topk_method, the scores are sigmoids and the top-k noaux_tc's (GLM-4.5's
 * config has neither: transformers' Glm4MoeMoE always routes so).
 * `pt` the record's parts: a sparsemixer router takes two experts whatever
 * config.json says, with router_jitter_noise (else the record's) as eps. */
static int moe_routing(const tpc_verify_set *s, const char *nm, const tpc_model_facts *f, const tpc_layer_parts *pt,
		       bool renorm, bool biased, tpc_vmoe *mo, tpc_err *e)
{
	const tpc_vtensor *rv = &s->t[mo->router];
	int64_t topk = pt->experts_per_tok;
	if (rv->ref->ndim != 2 || rv->dim >= 0 || rv->ref->shape[0] < 1 || rv->ref->shape[0] > 4096)
		return tpc_err_set(e, TPC_EINPUT, "layer '%s': the router '%s' must be a replicated [experts, hidden] tensor",
				   nm, rv->name);
	mo->nexp = rv->ref->shape[0];
	if (pt->router == TPC_PART_ROUTER_SPARSEMIXER) {
		if (mo->nexp < 2)
			return tpc_err_set(e, TPC_EINPUT, "layer '%s': the sparsemixer router '%s' needs 2 experts or more", nm,
					   rv->name);
		mo->sparsemixer = true;
		mo->top_k = 2;
		mo->jitter = f && f->router_jitter_said ? f->router_jitter : pt->router_jitter;
		mo->scale = 1.0;
		return 0;
	}
	mo->top_k = f && f->experts_per_tok ? f->experts_per_tok : topk;
	if (mo->top_k < 1 || mo->top_k > mo->nexp)
		return tpc_err_set(e, TPC_EINPUT,
				   "layer '%s': a mixture of %lld experts needs the experts per token (num_experts_per_tok in config.json%s)",
				   nm, (long long)mo->nexp, mo->top_k ? ", at most the experts" : "");
	mo->renorm = f && f->norm_topk ? f->norm_topk > 0 : renorm;
	/* Llama 4: the sigmoid of the chosen logits, on the experts' inputs */
	bool sig_in = pt->router == TPC_PART_ROUTER_SIGMOID_INPUT;
	mo->scale_input = sig_in;
	tpc_moe_scoring sc = f && f->scoring ? f->scoring : biased || sig_in ? TPC_MOE_SIGMOID : TPC_MOE_SCORE_UNKNOWN;
	tpc_moe_topk tm = f && f->topk_method ? f->topk_method : biased ? TPC_MOE_NOAUX_TC : TPC_MOE_TOPK_UNKNOWN;
	mo->sigmoid = sc == TPC_MOE_SIGMOID;
	mo->group_max = tm == TPC_MOE_GROUP_LIMITED;
	mo->scale = f && f->routed_scale > 0 ? f->routed_scale : 1.0;
	bool grouped = f && (tm == TPC_MOE_GROUP_LIMITED || tm == TPC_MOE_NOAUX_TC);
	mo->n_group = grouped && f->n_group > 1 ? f->n_group : 0;
	mo->topk_group = mo->n_group ? (f->topk_group ? f->topk_group : mo->n_group) : 0;
	if (mo->n_group && (mo->nexp % mo->n_group || mo->topk_group > mo->n_group ||
			    mo->top_k > mo->topk_group * (mo->nexp / mo->n_group)))
		return tpc_err_set(e, TPC_EINPUT,
				   "layer '%s': %lld experts in n_group %lld groups, topk_group %lld, top_k %lld do not fit together",
				   nm, (long long)mo->nexp, (long long)mo->n_group, (long long)mo->topk_group,
				   (long long)mo->top_k);
	return 0;
}

static int moe_score_bias(const tpc_verify_set *s, const char *nm, const tpc_vmoe *mo, tpc_err *e)
{
	const tpc_vtensor *bv = &s->t[mo->score_bias];
	/* [experts], or [1, experts] (ERNIE 4.5 MoE's moe_statics: one group) */
	bool one = bv->ref->ndim == 1 || (bv->ref->ndim == 2 && bv->ref->shape[0] == 1);
	if (!one || bv->dim >= 0 || bv->ref->shape[bv->ref->ndim - 1] != mo->nexp)
		return tpc_err_set(e, TPC_EINPUT, "layer '%s': '%s' must be a replicated tensor of %lld scores, one per expert",
				   nm, bv->name, (long long)mo->nexp);
	return 0;
}

/* The attention of block `blk` under module `mod` ("attn1", "attn", "attn2"):
 * its to_q/to_k/to_v/to_out.0, and the joint stream add_*_proj/to_add_out. */
static int dit_attn(tpc_verify_set *s, tpc_vmodel *m, const char *blk, const char *mod, const tpc_model_facts *f,
		    tpc_err *e)
{
	static const char *const own[] = {"to_q", "to_k", "to_v", "to_out.0"};
	static const char *const add[] = {"add_q_proj", "add_k_proj", "add_v_proj", "to_add_out"};
	for (int stream = 0; stream < 2; stream++) {
		const char *const *n = stream ? add : own;
		tpc_vlayer L;
		char nm[TPC_ERR_NAME_MAX];
		layer_init(&L);
		L.attn.q = findf(s, "%s.%s.%s.weight", blk, mod, n[0]);
		L.attn.k = findf(s, "%s.%s.%s.weight", blk, mod, n[1]);
		L.attn.v = findf(s, "%s.%s.%s.weight", blk, mod, n[2]);
		L.attn.o = findf(s, "%s.%s.%s.weight", blk, mod, n[3]);
		if (L.attn.q < 0 || L.attn.k < 0 || L.attn.v < 0 || L.attn.o < 0)
			continue; /* Flux single blocks: no to_out (proj_out mixes attention and MLP) */
		snprintf(nm, sizeof(nm), "%s.%s%s", blk, mod, stream ? ".add" : "");
		const tpc_vtensor *kt = &s->t[L.attn.k];
		int64_t qrows = rows_of(s, L.attn.q, true), krows = rows_of(s, L.attn.k, true);
		int64_t kin = kt->ref->ndim == 2 ? kt->ref->shape[1] : 0;
		if (!f->heads || !f->head_dim || qrows != f->heads * f->head_dim || krows != qrows)
			return tpc_err_set(e, TPC_EINPUT,
					   "'%s': %lld query rows are not %lld heads x head_dim %lld (give --config with num_attention_heads and attention_head_dim)",
					   nm, (long long)qrows, (long long)f->heads, (long long)f->head_dim);
		L.attn.heads = L.attn.kv_heads = f->heads;
		L.attn.head_dim = f->head_dim;
		L.attn.bidirectional = true;
		if (!strcmp(mod, "attn2") || kin != m->hidden)
			L.attn.kv_width = kin; /* cross-attention over encoder states */
		int ret = layer_add(m, &L, nm, e);
		if (ret)
			return ret;
	}
	return 0;
}

static int dit_ff(tpc_verify_set *s, tpc_vmodel *m, const char *blk, const char *mod, const tpc_model_facts *f,
		  tpc_err *e)
{
	tpc_vlayer L;
	char nm[TPC_ERR_NAME_MAX];
	layer_init(&L);
	int64_t in = findf(s, "%s.%s.net.0.proj.weight", blk, mod), down = findf(s, "%s.%s.net.2.weight", blk, mod);
	if (in < 0 || down < 0)
		return 0;
	snprintf(nm, sizeof(nm), "%s.%s", blk, mod);
	bool gated = tpc_ff_act_gated(f->ff_act);
	if (!f->ff_act)
		return tpc_err_set(e, TPC_EINPUT,
				   "'%s': is the feed-forward gated (GEGLU/SwiGLU) or not? give --config with activation_fn", nm);
	L.mlp.down = down;
	L.mlp.act = f->ff_act == TPC_FF_GELU || f->ff_act == TPC_FF_GEGLU	 ? TPC_VACT_GELU
		    : f->ff_act == TPC_FF_SWIGLU || f->ff_act == TPC_FF_OTHER ? TPC_VACT_SILU
									 : TPC_VACT_GELU_TANH;
	if (gated) {
		L.mlp.gate_up = in;
		L.mlp.glu = true;
		L.mlp.value_first = true; /* hidden, gate = proj(x).chunk(2, dim=-1) */
	} else {
		L.mlp.up = in;
	}
	return layer_add(m, &L, nm, e);
}

static int dit_from_names(tpc_verify_set *s, tpc_vmodel *m, const tpc_model_facts *f, tpc_err *e)
{
	static const char *const blocks[] = {"transformer_blocks", "single_transformer_blocks"};
	static const char *const attns[] = {"attn1", "attn", "attn2"};
	static const char *const ffs[] = {"ff", "ff_context"};
	tpc_model_facts none;
	memset(&none, 0, sizeof(none));
	if (!f)
		f = &none;
	m->hidden = f->hidden ? f->hidden : f->heads * f->head_dim;
	if (!m->hidden) {
		int64_t o = findf(s, "transformer_blocks.0.attn1.to_out.0.weight");
		if (o < 0)
			o = findf(s, "transformer_blocks.0.attn.to_out.0.weight");
		m->hidden = o >= 0 ? s->t[o].ref->shape[0] : 0;
	}
	int ret = 0;
	for (size_t b = 0; b < 2 && !ret; b++)
		for (int64_t l = 0; !ret; l++) {
			char blk[TPC_ERR_NAME_MAX];
			snprintf(blk, sizeof(blk), "%s.%lld", blocks[b], (long long)l);
			int64_t before = m->nlayers;
			bool any = false;
			for (size_t i = 0; i < s->n && !any; i++)
				any = !strncmp(s->t[i].name, blk, strlen(blk)) && s->t[i].name[strlen(blk)] == '.';
			if (!any)
				break;
			for (size_t a = 0; a < 3 && !ret; a++)
				ret = dit_attn(s, m, blk, attns[a], f, e);
			for (size_t k = 0; k < 2 && !ret; k++)
				ret = dit_ff(s, m, blk, ffs[k], f, e);
			(void)before;
		}
	if (!ret && !m->nlayers)
		ret = tpc_err_set(e, TPC_EINPUT, "dit model: no transformer_blocks.N attention or feed-forward found");
	return ret;
}

/* ---- DALLE2-pytorch: its attentions and the prior's feed-forwards ---- */

/* The attention module `mod` (the name before ".to_out.0.weight"), if it is
 * one: LinearAttention's to_qkv, or Attention's and CrossAttention's to_q
 * with to_kv. */
static int dalle2_attn(tpc_verify_set *s, tpc_vmodel *m, const char *mod, const tpc_model_facts *f, tpc_err *e)
{
	tpc_vlayer L;
	layer_init(&L);
	L.attn.o = findf(s, "%s.to_out.0.weight", mod);
	L.attn.qkv = findf(s, "%s.to_qkv.weight", mod);
	L.attn.q = L.attn.qkv < 0 ? findf(s, "%s.to_q.weight", mod) : -1;
	L.attn.kv = L.attn.q >= 0 ? findf(s, "%s.to_kv.weight", mod) : -1;
	if (L.attn.o < 0 || (L.attn.qkv < 0 && L.attn.kv < 0))
		return 0;
	bool cross = strstr(mod, "cross_attn") != NULL;
	int64_t hd = f->head_dim, in = rows_of(s, L.attn.o, false);
	int64_t q = L.attn.qkv >= 0 ? rows_of(s, L.attn.qkv, true) / 3 : rows_of(s, L.attn.q, true);
	int64_t kv = L.attn.kv >= 0 ? rows_of(s, L.attn.kv, true) / 2 : q;
	if (L.attn.kv >= 0 && !cross)
		hd = kv; /* multi-query: to_kv is one head of k and one of v */
	L.hidden = rows_of(s, L.attn.o, true);
	if (hd <= 0 || q <= 0 || in != q || q % hd || kv % hd || (q / hd) % (kv / hd) || L.hidden <= 0)
		return tpc_err_set(e, TPC_EINPUT,
				   "'%s': %lld query rows (to_out.0 takes %lld) and %lld key rows are not whole heads of head_dim %lld (give --head-dim or --config)",
				   mod, (long long)q, (long long)in, (long long)kv, (long long)hd);
	L.attn.heads = q / hd;
	L.attn.kv_heads = kv / hd;
	L.attn.head_dim = hd;
	L.attn.bidirectional = true;
	if (cross && L.attn.kv >= 0)
		L.attn.kv_width = rows_of(s, L.attn.kv, false); /* the condition's width */
	return layer_add(m, &L, mod, e);
}

/* The FeedForward of CausalTransformer layer `p` (its "P.1"): Linear(dim,
 * inner*2) [x | gate], SwiGLU, Linear(inner, dim); none with a post-activation
 * norm P.1.3 between (the block would not be this one). */
static int dalle2_ff(tpc_verify_set *s, tpc_vmodel *m, const char *ff, tpc_err *e)
{
	tpc_vlayer L;
	layer_init(&L);
	int64_t in = findf(s, "%s.1.weight", ff), down = findf(s, "%s.5.weight", ff);
	if (in < 0 || down < 0 || findf(s, "%s.3.g", ff) >= 0 || findf(s, "%s.3.gamma", ff) >= 0 ||
	    findf(s, "%s.3.weight", ff) >= 0)
		return 0;
	L.mlp.gate_up = in;
	L.mlp.down = down;
	L.mlp.glu = true;
	L.mlp.value_first = true; /* x, gate = x.chunk(2, dim=-1) */
	L.mlp.act = TPC_VACT_SILU;
	L.hidden = rows_of(s, in, false);
	return layer_add(m, &L, ff, e);
}

static int dalle2_from_names(tpc_verify_set *s, tpc_vmodel *m, const tpc_model_facts *f, tpc_err *e)
{
	static const char attn_end[] = ".to_out.0.weight", ff_end[] = ".1.5.weight";
	tpc_model_facts none;
	memset(&none, 0, sizeof(none));
	int ret = 0;
	for (size_t i = 0; i < s->n && !ret; i++) {
		const char *nm = s->t[i].name;
		size_t n = strlen(nm);
		char mod[TPC_ERR_NAME_MAX];
		if (n > sizeof(attn_end) - 1 && n < sizeof(mod) && !strcmp(nm + n - (sizeof(attn_end) - 1), attn_end)) {
			snprintf(mod, sizeof(mod), "%.*s", (int)(n - (sizeof(attn_end) - 1)), nm);
			ret = dalle2_attn(s, m, mod, f ? f : &none, e);
		} else if (n > sizeof(ff_end) - 1 && n < sizeof(mod) && !strcmp(nm + n - (sizeof(ff_end) - 1), ff_end) &&
			   strstr(nm, "layers.")) {
			snprintf(mod, sizeof(mod), "%.*s", (int)(n - (sizeof(ff_end) - 1) + 2), nm);
			ret = dalle2_ff(s, m, mod, e);
		}
	}
	if (!ret && !m->nlayers)
		ret = tpc_err_set(e, TPC_EINPUT, "dalle2 model: no attention (to_q/to_qkv with to_out.0) or feed-forward found");
	if (!ret)
		m->hidden = m->layers[0].hidden;
	return ret;
}

/* ---- token models (decoders, encoders): the top, then layer by layer ---- */

/* A token model's tensors are found through its family record's table
 * (lib/tpc_family.c), each name under the prefix the checkpoint uses in
 * place of the table's: the table's own (the token embedding's name up to
 * its first dot), none, or the table's under "language_model." (a
 * multimodal checkpoint's text model). */
typedef struct arch_names {
	const tpc_family *fam;
	char pres[3][64];        /* the prefixes a checkpoint may use; [0] the table's */
	const char *pre;         /* the one this checkpoint uses */
} arch_names;

static int arch_names_init(arch_names *an, const tpc_family *fam)
{
	const tpc_tensor_row *w = tpc_family_row(fam, TPC_ROLE_TOKEN_EMBD);
	const char *dot = w && w->name[TPC_ECO_HF] ? strchr(w->name[TPC_ECO_HF], '.') : NULL;
	int n = dot ? (int)(dot - w->name[TPC_ECO_HF]) + 1 : 0;
	memset(an, 0, sizeof(*an));
	an->fam = fam;
	if (!dot || n >= 32)
		return -1;
	snprintf(an->pres[0], sizeof(an->pres[0]), "%.*s", n, w->name[TPC_ECO_HF]);
	snprintf(an->pres[2], sizeof(an->pres[2]), "language_model.%.32s", an->pres[0]);
	return 0;
}

/* The Hugging Face name of role r's tensor (its bias with `bias`) of layer l
 * (-1 for the model's top) and expert x (-1: none) under the checkpoint's
 * prefix, in nm; false if the record has none or it does not fit. */
static bool role_name(const arch_names *an, tpc_role r, int64_t l, int64_t x, bool bias, char *nm, size_t n)
{
	char hf[TPC_ERR_NAME_MAX];
	const char *canon = an->pres[0];
	size_t cl = strlen(canon);
	if (!tpc_family_name(tpc_family_row(an->fam, r), TPC_ECO_HF, l, x, bias, hf, sizeof(hf), NULL))
		return false;
	int k = strncmp(hf, canon, cl) ? snprintf(nm, n, "%s", hf)
				       : snprintf(nm, n, "%s%s", an->pre ? an->pre : canon, hf + cl);
	return k >= 0 && (size_t)k < n;
}

/* The index of role r's tensor (its bias with `bias`) of layer l (-1 for the
 * model's top) under the checkpoint's prefix; -1 if absent. */
static int64_t find_role(const tpc_verify_set *s, const arch_names *an, tpc_role r, int64_t l, bool bias)
{
	char nm[TPC_ERR_NAME_MAX];
	return role_name(an, r, l, -1, bias, nm, sizeof(nm)) ? tpc_verify_set_find(s, nm) : -1;
}

/* Role r's tensor of the model's top, required: its index, or the error
 * naming the tensor the record says the checkpoint must have. */
static int64_t need_role(const tpc_verify_set *s, const arch_names *an, tpc_role r, tpc_err *e)
{
	char nm[TPC_ERR_NAME_MAX];
	int64_t i = find_role(s, an, r, -1, false);
	if (i < 0 && role_name(an, r, -1, -1, false, nm, sizeof(nm)))
		return tpc_err_set(e, TPC_EINPUT, "%s model: no '%s'", an->fam->name, nm);
	return i < 0 ? tpc_err_set(e, TPC_EINPUT, "%s model: the family table names no %s", an->fam->name,
				   tpc_role_name(r))
		     : i;
}

/* Role r's tensor of the top and, where the record's row says its models
 * carry one, its bias (*b; -1 when none). */
static int64_t top_role(const tpc_verify_set *s, const arch_names *an, tpc_role r, int64_t *b)
{
	const tpc_tensor_row *w = tpc_family_row(an->fam, r);
	*b = w && w->bias ? find_role(s, an, r, -1, true) : -1;
	return find_role(s, an, r, -1, false);
}

/* An encoder's extras (BERT): token type 0 and the embeddings' norm, the
 * head's dense (gelu after it) before the final norm and a vocab bias; no
 * dense in the checkpoint (a BertModel): no head, the last hidden states. */
static int encoder_top(tpc_verify_set *s, tpc_vmodel *m, const arch_names *an, tpc_err *e)
{
	int64_t b;
	m->type_embed = find_role(s, an, TPC_ROLE_TOKEN_TYPES, -1, false);
	m->embed_norm_w = top_role(s, an, TPC_ROLE_TOKEN_EMBD_NORM, &m->embed_norm_b);
	if (m->embed_norm_w < 0 && tpc_family_row(an->fam, TPC_ROLE_TOKEN_EMBD_NORM))
		return (int)need_role(s, an, TPC_ROLE_TOKEN_EMBD_NORM, e);
	m->mlm_dense = top_role(s, an, TPC_ROLE_OUTPUT_DENSE, &b);
	if ((m->hidden_out = m->mlm_dense < 0)) {
		m->final_norm_w = m->final_norm_b = m->lm_head = -1;
		return 0;
	}
	/* the dense is replicated: its bias is linked here */
	if (b >= 0 && s->t[m->mlm_dense].bias < 0)
		s->t[m->mlm_dense].bias = b;
	top_role(s, an, TPC_ROLE_OUTPUT, &m->head_bias);
	if (m->head_bias < 0)
		m->head_bias = find_role(s, an, TPC_ROLE_OUTPUT_BIAS, -1, false);
	return 0;
}

/* The model's top: the prefix its names carry, the embedding, learned
 * positions, the final norm, the head (tied to the embedding when the
 * record allows it and the checkpoint has none), an encoder's extras;
 * hidden and vocab from the embedding. */
static int model_top(tpc_verify_set *s, tpc_vmodel *m, const tpc_model_facts *f, arch_names *an, tpc_err *e)
{
	const tpc_layer_parts *p = &an->fam->parts;
	const char *arch = an->fam->name;
	char embd[TPC_ERR_NAME_MAX];
	size_t cl = strlen(an->pres[0]);
	if (!tpc_family_name(tpc_family_row(an->fam, TPC_ROLE_TOKEN_EMBD), TPC_ECO_HF, -1, -1, false, embd,
			     sizeof(embd), NULL) ||
	    strncmp(embd, an->pres[0], cl))
		return tpc_err_set(e, TPC_EINPUT, "%s: the family table names no embedding under '%s'", arch,
				   an->pres[0]);
	for (int k = 0; k < 3 && !an->pre; k++)
		if (findf(s, "%s%s", an->pres[k], embd + cl) >= 0)
			an->pre = an->pres[k];
	if (!an->pre)
		return tpc_err_set(e, TPC_EINPUT, "%s model: no '%s'", arch, embd);
	m->embed = find_role(s, an, TPC_ROLE_TOKEN_EMBD, -1, false);
	m->pos_embed = find_role(s, an, TPC_ROLE_POS_EMBD, -1, false);
	m->final_norm_w = top_role(s, an, TPC_ROLE_OUTPUT_NORM, &m->final_norm_b);
	m->lm_head = find_role(s, an, TPC_ROLE_OUTPUT, -1, false);
	if (tpc_family_row(an->fam, TPC_ROLE_OUTPUT) && tpc_family_row(an->fam, TPC_ROLE_OUTPUT)->bias)
		m->head_bias = find_role(s, an, TPC_ROLE_OUTPUT, -1, true);
	const tpc_vtensor *ev = &s->t[m->embed];
	if (ev->ref->ndim != 2)
		return tpc_err_set(e, TPC_EINPUT, "%s model: the embedding '%s' must be 2-D", arch, ev->name);
	m->hidden = ev->ref->shape[1];
	m->vocab = ev->dim == 0 ? ev->part[0].size : ev->ref->shape[0];
	if (f && f->hidden && f->hidden != m->hidden)
		return tpc_err_set(e, TPC_EINPUT, "model facts: hidden %lld, but the embedding is [%lld, %lld]",
				   (long long)f->hidden, (long long)ev->ref->shape[0], (long long)m->hidden);
	int ret = p->model == TPC_PART_ENCODER ? encoder_top(s, m, an, e) : 0;
	if (!ret && m->pos_embed < 0 && p->pos == TPC_PART_POS_LEARNED)
		ret = (int)need_role(s, an, TPC_ROLE_POS_EMBD, e);
	if (!ret && m->final_norm_w < 0 && !m->hidden_out)
		ret = (int)need_role(s, an, TPC_ROLE_OUTPUT_NORM, e);
	if (!ret && m->lm_head < 0 && !m->hidden_out && !p->tied_head)
		ret = (int)need_role(s, an, TPC_ROLE_OUTPUT, e);
	return ret;
}

/* Where each role of a layer goes in tpc_vlayer (biases only where the
 * family's row says its models carry one). */
#define SLOT(R, B, F) {TPC_ROLE_##R, B, offsetof(tpc_vlayer, F)}
static const struct layer_slot {
	tpc_role role;
	bool bias;
	size_t off;
} layer_slots[] = {
	SLOT(ATTN_NORM, false, norm1_w), SLOT(ATTN_NORM, true, norm1_b),   SLOT(FFN_NORM, false, norm2_w),
	SLOT(FFN_NORM, true, norm2_b),   SLOT(ATTN_Q, false, attn.q),       SLOT(ATTN_K, false, attn.k),
	SLOT(ATTN_V, false, attn.v),     SLOT(ATTN_QKV, false, attn.qkv),   SLOT(ATTN_OUT, false, attn.o),
	SLOT(ATTN_Q_NORM, false, attn.q_norm), SLOT(ATTN_K_NORM, false, attn.k_norm), SLOT(ATTN_SINKS, false, attn.sinks),
	SLOT(FFN_GATE, false, mlp.gate), SLOT(FFN_UP, false, mlp.up),       SLOT(FFN_GATE_UP, false, mlp.gate_up),
	SLOT(FFN_DOWN, false, mlp.down), SLOT(ATTN_POST_NORM, false, post1_w), SLOT(FFN_POST_NORM, false, post2_w),
};
#undef SLOT

/* Layer l's name: its attention output's name up to the layer number. */
static void layer_name(const arch_names *an, int64_t l, char *nm)
{
	const tpc_tensor_row *w = tpc_family_row(an->fam, TPC_ROLE_ATTN_OUT);
	const char *p = w ? w->name[TPC_ECO_HF] : NULL, *ph = p ? strstr(p, "{L}") : NULL;
	size_t cl = strlen(an->pres[0]);
	if (!ph || strncmp(p, an->pres[0], cl)) {
		snprintf(nm, TPC_ERR_NAME_MAX, "%slayer.%lld", an->pre, (long long)l);
		return;
	}
	snprintf(nm, TPC_ERR_NAME_MAX, "%s%.*s%lld", an->pre, (int)(ph - p - cl), p + cl, (long long)l);
}

/* Whether layer l attends within a sliding window: as config.json's
 * layer_types says, else as the record's default pattern (swa_every). */
static bool layer_slides(const tpc_layer_parts *pt, const tpc_model_facts *f, int64_t l)
{
	if (!f)
		return false;
	if (f->n_typed)
		return l < f->n_typed && (f->swa_layers[l / 64] >> (l % 64) & 1);
	return pt->swa_every > 0 && (l + 1) % pt->swa_every != 0;
}

/* A yarn rope scaling as config.json says it (src; NULL: none) with
 * transformers' defaults resolved (betas 32 and 1, truncate unless false)
 * into *y; factor 0 when there is none. */
static int yarn_of(const tpc_yarn *src, const char *nm, tpc_yarn *y, tpc_err *e)
{
	tpc_yarn in = src ? *src : (tpc_yarn){0};
	memset(y, 0, sizeof(*y));
	if (in.factor <= 1)
		return 0;
	*y = in;
	y->beta_fast = in.beta_fast > 0 ? in.beta_fast : 32;
	y->beta_slow = in.beta_slow > 0 ? in.beta_slow : 1;
	y->truncate = in.truncate >= 0;
	if (y->orig_max < 1)
		return tpc_err_set(e, TPC_EINPUT, "layer '%s': a yarn rope scaling needs original_max_position_embeddings",
				   nm);
	return 0;
}

/* Layer l's tensors by name; its name in nm[TPC_ERR_NAME_MAX]. */
static void layer_names(const tpc_verify_set *s, const tpc_vmodel *m, const arch_names *an, int64_t l,
			const tpc_model_facts *f, tpc_vlayer *L, char *nm)
{
	tpc_vattn *a = &L->attn;
	tpc_vmlp *p = &L->mlp;
	layer_init(L);
	layer_name(an, l, nm);
	for (size_t k = 0; k < sizeof(layer_slots) / sizeof(layer_slots[0]); k++) {
		const struct layer_slot *sl = &layer_slots[k];
		const tpc_tensor_row *w = tpc_family_row(an->fam, sl->role);
		if (w && (!sl->bias || w->bias))
			*(int64_t *)((char *)L + sl->off) = find_role(s, an, sl->role, l, sl->bias);
	}
	const tpc_layer_parts *pt = &m->parts;
	if (pt->resid == TPC_PART_PARALLEL_ONE_NORM) { /* one input norm for both sublayers */
		L->norm2_w = L->norm1_w;
		L->norm2_b = L->norm1_b;
	}
	a->qk_eps = m->norm_eps;
	a->qk_whole = pt->qk_norm == TPC_PART_QK_WHOLE;
	a->qk_after_rope = pt->qk_after_rope;
	a->interleaved = a->qkv >= 0 && pt->qkv == TPC_PART_QKV_PER_HEAD;
	a->gated = pt->attn_gate && a->q >= 0;
	a->bidirectional = pt->model == TPC_PART_ENCODER;
	p->glu = pt->mlp == TPC_PART_MLP_SILU_GLU || pt->mlp == TPC_PART_MLP_GELU_GLU ||
		 pt->mlp == TPC_PART_MLP_GELU_TANH_GLU;
	p->act = pt->mlp == TPC_PART_MLP_SILU_GLU ? TPC_VACT_SILU
		 : pt->mlp == TPC_PART_MLP_GELU_NEW || pt->mlp == TPC_PART_MLP_GELU_TANH_GLU ? TPC_VACT_GELU_TANH
											       : TPC_VACT_GELU;
	bool swa = layer_slides(pt, f, l);
	if (f) {
		a->scale = f->attn_mul > 0 ? f->attn_mul : f->attn_scalar > 0 ? 1.0 / sqrt(f->attn_scalar) : 0;
		a->softcap = f->attn_softcap;
		a->window = swa ? f->sliding_window : 0;
	}
	/* EXAONE 4, Cohere 2: the global layers of a model with a window have no
	 * rope */
	bool nope = pt->nope_global && f && f->sliding_window > 0 && !swa;
	/* a layer config.json's no_rope_layers (or the record's default) leaves
	 * unrotated attends without positions (SmolLM3's NoPE layers); a record
	 * that rotates only when position_embedding_type says "rope" */
	if (pt->rope_if_said && !(f && f->pos_rope_said))
		nope = true;
	if (pt->pos == TPC_PART_POS_ROPE && !nope && !tpc_facts_rope_off(f, l, pt->rope_off_every)) {
		/* a sliding layer with a theta of its own rotates by it, unscaled */
		bool own = swa && f->rope_theta_local > 0;
		a->rope = true;
		a->rope_pairs = pt->rope == TPC_PART_ROPE_INTERLEAVED;
		a->rope_theta = own ? f->rope_theta_local : f && f->rope_theta > 0 ? f->rope_theta : 10000.0;
		a->rope_linear = f && !own ? f->rope_linear : 0;
		if (f && !own) { /* resolved by layer_rot */
			/* Phi-3's su and yarn: longrope (the record's longrope_alias) */
			a->longrope = f->longrope.on || (pt->longrope_alias && f->longrope.alias);
			a->yarn = a->longrope ? (tpc_yarn){0} : f->yarn;
			a->llama3 = f->llama3;
		}
		/* Llama 4: the L2 norm of q and k on the rotating layers */
		a->qk_l2 = pt->qk_norm == TPC_PART_QK_L2_ROPE && !(f && f->use_qk_norm < 0);
	} else if (pt->temp_floor > 0 && !(f && f->temp_tuning < 0)) {
		/* Llama 4: the temperature tuning of the layers without RoPE */
		a->temp_floor = f && f->temp_floor > 0 ? f->temp_floor : pt->temp_floor;
		a->temp_scale = f && f->temp_scale_said ? f->temp_scale : pt->temp_scale;
	}
	/* chunked local attention: layer_types' "chunked_attention", else (the
	 * record's chunk_rope, no layer_types) the rotating layers */
	bool chunked = f && f->n_typed ? l < f->n_typed && (f->chunk_layers[l / 64] >> (l % 64) & 1)
				       : pt->chunk_rope && a->rope;
	a->chunk = !chunked ? 0 : f->chunk_size > 0 ? f->chunk_size : -1; /* -1: refused by layer_rot */
}

/* Layer l's Mamba-2 mixer when the record has one and config.json's
 * layer_types makes layer l a "mamba" layer: its tensors by the record's
 * SSM_* roles, its sizes from the facts (tpc_vssm). 0 when not such a
 * layer; a missing tensor or fact refused by name. */
static int layer_ssm(const tpc_verify_set *s, const tpc_vmodel *m, const arch_names *an, int64_t l, const char *nm,
		     const tpc_model_facts *f, tpc_vssm *q, tpc_err *e)
{
	static const tpc_role need[] = {TPC_ROLE_SSM_IN, TPC_ROLE_SSM_CONV1D, TPC_ROLE_SSM_DT, TPC_ROLE_SSM_A,
					TPC_ROLE_SSM_D, TPC_ROLE_SSM_NORM, TPC_ROLE_SSM_OUT};
	int64_t *at[] = {&q->in, &q->conv_w, &q->dt_bias, &q->a_log, &q->d, &q->norm, &q->out};
	char miss[TPC_ERR_NAME_MAX];
	if (!m->parts.ssm || !tpc_facts_ssm_layer(f, l))
		return 0;
	for (size_t k = 0; k < sizeof(need) / sizeof(need[0]); k++)
		if ((*at[k] = find_role(s, an, need[k], l, false)) < 0)
			return tpc_err_set(e, TPC_EINPUT, "layer '%s': layer_types makes it a Mamba-2 mixer, but it has no '%s'", nm,
					   role_name(an, need[k], l, -1, false, miss, sizeof(miss)) ? miss : tpc_role_name(need[k]));
	q->conv_b = find_role(s, an, TPC_ROLE_SSM_CONV1D, l, true);
	q->heads = f->ssm_heads, q->head_dim = f->ssm_head_dim, q->groups = f->ssm_groups, q->state = f->ssm_state;
	q->conv = f->ssm_conv;
	q->eps = m->norm_eps;
	if (q->heads < 1 || q->head_dim < 1 || q->groups < 1 || q->state < 1 || q->conv < 1 || q->heads % q->groups)
		return tpc_err_set(e, TPC_EINPUT,
				   "layer '%s': a Mamba-2 mixer needs config.json's mamba_n_heads, mamba_d_head, mamba_n_groups (dividing the heads), mamba_d_state and mamba_d_conv",
				   nm);
	return 1;
}

/* Expert x's tensor of role r in layer l under the checkpoint's prefix: its
 * own where the record's name has "{E}", else its view of the tensor that
 * stacks the experts (TPC_VERIFY_EXPERT_NAME); -1 if absent. */
static int64_t find_expert(const tpc_verify_set *s, const arch_names *an, tpc_role r, int64_t l, int64_t x)
{
	char nm[TPC_ERR_NAME_MAX];
	if (!role_name(an, r, l, x, false, nm, sizeof(nm)))
		return -1;
	return tpc_family_stacked(tpc_family_row(an->fam, r), TPC_ECO_HF) ? findf(s, TPC_VERIFY_EXPERT_NAME, nm, (long long)x)
									  : tpc_verify_set_find(s, nm);
}

/* The name of the tensor of a SwiGLU p (of the gate, up and down roles g, u,
 * d; expert x or -1) that is missing, for a message, in nm. */
static const char *glu_missing(const arch_names *an, const tpc_vmlp *p, tpc_role g, tpc_role u, tpc_role d, int64_t l,
			       int64_t x, char *nm, size_t n)
{
	tpc_role r = p->down < 0 ? d : p->gate_up >= 0 || p->gate >= 0 ? u : g;
	return role_name(an, r, l, x, false, nm, n) ? nm : tpc_role_name(r);
}

/* A SwiGLU of the record's gate, up and down roles: g and u a fused [gate |
 * up] when they are the two parts of one tensor ("#0", "#1"). `x` >= 0: the
 * stacked experts' x-th; else layer l's own (a shared expert). */
static void glu_of(const tpc_verify_set *s, const arch_names *an, tpc_role g, tpc_role u, tpc_role d, int64_t l,
		   int64_t x, tpc_vmlp *p)
{
	const tpc_tensor_row *pr[2], *gr = tpc_family_row(an->fam, g);
	no_mlp(p);
	p->act = TPC_VACT_SILU;
	p->glu = true;
	bool fused = gr && tpc_family_parts(an->fam, gr, TPC_ECO_HF, pr, 2) == 2 && pr[0] == gr && pr[1]->role == u;
#define FIND(R) (x >= 0 ? find_expert(s, an, R, l, x) : find_role(s, an, R, l, false))
	if (fused) {
		p->gate_up = FIND(g);
		p->interleaved = gr->hf_interleaved;
	} else {
		p->gate = FIND(g);
		p->up = FIND(u);
	}
	p->down = FIND(d);
#undef FIND
}

/* The record whose rows read layer l's mixture of experts: the model's own
 * when its table has a router; else (a dense family named for a set with
 * experts: --arch llama on a Mixtral set) the first record with a router,
 * its names under the same prefix, whose router is a tensor of the set at
 * layer l; NULL when none. */
static const tpc_family *moe_record(const tpc_verify_set *s, const arch_names *an, int64_t l)
{
	if (tpc_family_row(an->fam, TPC_ROLE_FFN_GATE_INP))
		return an->fam;
	for (size_t i = 0; i < tpc_family_count(); i++) {
		arch_names xn;
		if (!tpc_family_row(tpc_family_at(i), TPC_ROLE_FFN_GATE_INP) || arch_names_init(&xn, tpc_family_at(i)) ||
		    strcmp(xn.pres[0], an->pres[0]))
			continue;
		xn.pre = an->pre;
		if (find_role(s, &xn, TPC_ROLE_FFN_GATE_INP, l, false) >= 0)
			return xn.fam;
	}
	return NULL;
}

/* Layer l's mixture of experts by the record's rows (moe_record's): its
 * router, each routed expert (its own tensors, or views of the tensors
 * stacking them: Granite-MoE's input_linear, output_linear), a score
 * correction bias, a shared expert and its gate. The routing facts as
 * config.json says; where it is silent, the record's experts_per_tok, and
 * the top-k weights renormalised when its router is softmax_topk. 1 when
 * layer l is such a mixture, 0 when not; a tensor the router implies and
 * the set lacks is refused by name. */
static int layer_moe(tpc_verify_set *s, const arch_names *an, int64_t l, const char *nm, const tpc_model_facts *f,
		     tpc_vmoe *mo, tpc_err *e)
{
	arch_names xn = *an;
	char miss[TPC_ERR_NAME_MAX];
	if (!(xn.fam = moe_record(s, an, l)) || (mo->router = find_role(s, &xn, TPC_ROLE_FFN_GATE_INP, l, false)) < 0)
		return 0;
	const tpc_layer_parts *pt = &xn.fam->parts;
	mo->score_bias = find_role(s, &xn, TPC_ROLE_FFN_EXP_PROBS_B, l, false);
	int ret = moe_routing(s, nm, f, pt, pt->router == TPC_PART_ROUTER_SOFTMAX_TOPK,
			      pt->router == TPC_PART_ROUTER_SIGMOID_BIAS && mo->score_bias >= 0, mo, e);
	if (ret)
		return ret;
	const tpc_tensor_row *rr = tpc_family_row(xn.fam, TPC_ROLE_FFN_GATE_INP);
	mo->router_bias = rr && rr->bias ? find_role(s, &xn, TPC_ROLE_FFN_GATE_INP, l, true) : -1;
	if (mo->router_bias >= 0 && (s->t[mo->router_bias].ref->ndim != 1 || s->t[mo->router_bias].ref->shape[0] != mo->nexp ||
				     s->t[mo->router_bias].dim >= 0))
		return tpc_err_set(e, TPC_EINPUT, "layer '%s': the router bias '%s' must be a replicated [%lld] tensor", nm,
				   s->t[mo->router_bias].name, (long long)mo->nexp);
	if (mo->score_bias >= 0 && (ret = moe_score_bias(s, nm, mo, e)))
		return ret;
	if (!(mo->exp = tpc_calloc((size_t)mo->nexp, sizeof(tpc_vmlp))))
		return tpc_err_nomem(e);
	for (int64_t x = 0; x < mo->nexp; x++) {
		tpc_vmlp *p = &mo->exp[x];
		glu_of(s, &xn, TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP, TPC_ROLE_FFN_DOWN_EXP, l, x, p);
		if (pt->mlp == TPC_PART_MLP_CLAMPED_GLU) { /* gpt-oss's experts */
			p->clamp = f && f->swiglu_limit > 0 ? f->swiglu_limit : 7.0;
			p->alpha = 1.702;
		}
		if (p->down < 0 || (p->gate_up < 0 && (p->gate < 0 || p->up < 0)))
			return tpc_err_set(e, TPC_EINPUT, "layer '%s': the router names %lld experts, but expert %lld has no '%s'",
					   nm, (long long)mo->nexp, (long long)x,
					   glu_missing(&xn, p, TPC_ROLE_FFN_GATE_EXP, TPC_ROLE_FFN_UP_EXP,
						       TPC_ROLE_FFN_DOWN_EXP, l, x, miss, sizeof(miss)));
	}
	tpc_vmlp *sh = &mo->shared;
	glu_of(s, &xn, TPC_ROLE_FFN_GATE_SHEXP, TPC_ROLE_FFN_UP_SHEXP, TPC_ROLE_FFN_DOWN_SHEXP, l, -1, sh);
	if (sh->down < 0)
		no_mlp(sh);
	else if (sh->gate_up < 0 && (sh->gate < 0 || sh->up < 0))
		return tpc_err_set(e, TPC_EINPUT, "layer '%s': the shared expert has no '%s'", nm,
				   glu_missing(&xn, sh, TPC_ROLE_FFN_GATE_SHEXP, TPC_ROLE_FFN_UP_SHEXP, TPC_ROLE_FFN_DOWN_SHEXP,
					       l, -1, miss, sizeof(miss)));
	mo->shared_gate = find_role(s, &xn, TPC_ROLE_FFN_GATE_INP_SHEXP, l, false);
	return 1;
}

/* Rows (out) or columns of tensor i, -1 when absent or not a matrix. */
static int64_t dim_of(const tpc_verify_set *s, int64_t i, bool out);

/* Layer l's (nm's) gated DeltaNet by the record's SSM rows, its sizes from
 * config.json's linear_* facts, every shape checked against them. */
static int delta_of(const tpc_verify_set *s, const tpc_vmodel *m, const arch_names *an, int64_t l, const char *nm,
		    const tpc_model_facts *f, tpc_vattn *a, tpc_err *e)
{
	tpc_vdelta *d = &a->dn;
	d->qkvz = find_role(s, an, TPC_ROLE_SSM_IN, l, false);
	d->ba = find_role(s, an, TPC_ROLE_SSM_BA, l, false);
	d->qkv = find_role(s, an, TPC_ROLE_SSM_QKV, l, false);
	d->z = find_role(s, an, TPC_ROLE_SSM_Z, l, false);
	d->b = find_role(s, an, TPC_ROLE_SSM_BETA, l, false);
	d->a = find_role(s, an, TPC_ROLE_SSM_ALPHA, l, false);
	d->flat = d->qkvz < 0 && d->qkv >= 0;
	d->conv = find_role(s, an, TPC_ROLE_SSM_CONV1D, l, false);
	d->dt = find_role(s, an, TPC_ROLE_SSM_DT, l, false);
	d->a_log = find_role(s, an, TPC_ROLE_SSM_A, l, false);
	d->norm = find_role(s, an, TPC_ROLE_SSM_NORM, l, false);
	a->o = find_role(s, an, TPC_ROLE_SSM_OUT, l, false);
	d->eps = m->norm_eps;
	if (f) {
		d->nk = f->lin_k_heads, d->nv = f->lin_v_heads, d->dk = f->lin_k_dim, d->dv = f->lin_v_dim;
	}
	if (d->nk < 1 || d->nv < 1 || d->dk < 1 || d->dv < 1 || d->nv % d->nk)
		return tpc_err_set(e, TPC_EINPUT,
				   "layer '%s': a gated DeltaNet needs config.json's linear_num_key_heads, linear_num_value_heads (a multiple of them), linear_key_head_dim and linear_value_head_dim",
				   nm);
	const tpc_tensor *cv = d->conv >= 0 ? s->t[d->conv].ref : NULL;
	int64_t H = m->hidden, r = d->nv / d->nk, C = 2 * d->nk * d->dk + d->nv * d->dv;
	d->kernel = cv && cv->ndim == 3 ? cv->shape[2] : 0;
	const tpc_tensor *dt = d->dt >= 0 ? s->t[d->dt].ref : NULL, *al = d->a_log >= 0 ? s->t[d->a_log].ref : NULL;
	const tpc_tensor *nw = d->norm >= 0 ? s->t[d->norm].ref : NULL;
	bool in_ok = d->flat ? dim_of(s, d->qkv, true) == C && dim_of(s, d->qkv, false) == H &&
				       dim_of(s, d->z, true) == d->nv * d->dv && dim_of(s, d->z, false) == H &&
				       dim_of(s, d->b, true) == d->nv && dim_of(s, d->b, false) == H &&
				       dim_of(s, d->a, true) == d->nv && dim_of(s, d->a, false) == H
			     : dim_of(s, d->qkvz, true) == d->nk * (2 * d->dk + 2 * r * d->dv) &&
				       dim_of(s, d->qkvz, false) == H && dim_of(s, d->ba, true) == 2 * d->nv &&
				       dim_of(s, d->ba, false) == H;
	if (!in_ok || !cv || cv->shape[0] != C ||
	    cv->shape[1] != 1 || d->kernel < 1 || !dt || dt->ndim != 1 || dt->shape[0] != d->nv || !al || al->ndim != 1 ||
	    al->shape[0] != d->nv || !nw || nw->ndim != 1 || nw->shape[0] != d->dv || dim_of(s, a->o, false) != d->nv * d->dv ||
	    dim_of(s, a->o, true) != H)
		return tpc_err_set(e, TPC_EINPUT,
				   "layer '%s': the gated DeltaNet's tensors (%s, conv1d, dt_bias, A_log, norm, out_proj) do not fit %lld key heads of %lld and %lld value heads of %lld",
				   nm, d->flat ? "in_proj_qkv, in_proj_z, in_proj_b, in_proj_a" : "in_proj_qkvz, in_proj_ba", (long long)d->nk, (long long)d->dk, (long long)d->nv, (long long)d->dv);
	a->delta = true;
	a->rope = false;
	a->heads = d->nv;
	a->kv_heads = d->nk;
	a->head_dim = d->dv;
	return 0;
}

/* Layer nm's mixture of experts and MLA (llama), and whether it has a norm,
 * an attention and an MLP. */
static int layer_kinds(tpc_verify_set *s, tpc_vmodel *m, const arch_names *an, int64_t l, const char *nm,
		       const tpc_model_facts *f, tpc_vlayer *L, tpc_err *e)
{
	tpc_vattn *a = &L->attn;
	tpc_vmlp *p = &L->mlp;
	int ret;
	L->moe.router = L->moe.shared_gate = L->moe.score_bias = L->moe.router_bias = -1;
	no_mlp(&L->moe.shared);
	if (m->arch == TPC_VARCH_LLAMA && p->down < 0 && (ret = layer_moe(s, an, l, nm, f, &L->moe, e)) < 0)
		return ret;
	if (L->moe.exp)
		m->moe = true;
	/* a layer without a router whose record has a shared expert: that is
	 * its MLP (Granite 4 with num_local_experts 0: shared_mlp alone) */
	if (m->arch == TPC_VARCH_LLAMA && p->down < 0 && !L->moe.exp && tpc_family_row(an->fam, TPC_ROLE_FFN_DOWN_SHEXP)) {
		glu_of(s, an, TPC_ROLE_FFN_GATE_SHEXP, TPC_ROLE_FFN_UP_SHEXP, TPC_ROLE_FFN_DOWN_SHEXP, l, -1, p);
		if (p->down < 0)
			no_mlp(p);
	}
	if ((ret = layer_ssm(s, m, an, l, nm, f, &L->ssm, e)) < 0)
		return ret;
	/* multi-head latent attention (DeepSeek): checked tensor by tensor */
	if (m->parts.attn == TPC_PART_MLA && a->o >= 0 && a->k < 0 && a->v < 0 && a->qkv < 0 &&
	    find_role(s, an, TPC_ROLE_ATTN_KV_A_MQA, l, false) >= 0 && find_role(s, an, TPC_ROLE_ATTN_KV_B, l, false) >= 0 &&
	    (a->q >= 0 || find_role(s, an, TPC_ROLE_ATTN_Q_B, l, false) >= 0))
		a->mla = m->mla = true;
	/* a gated DeltaNet (Qwen3-Next's linear_attention layers): by its rows */
	if (m->parts.linear_attn == TPC_PART_LINEAR_GATED_DELTA && a->o < 0 && a->q < 0 && a->qkv < 0 &&
	    (find_role(s, an, TPC_ROLE_SSM_IN, l, false) >= 0 || find_role(s, an, TPC_ROLE_SSM_QKV, l, false) >= 0)) {
		if ((ret = delta_of(s, m, an, l, nm, f, a, e)))
			return ret;
		m->delta = true;
	}
	bool attn_ok = (a->o >= 0 && (a->mla || a->delta || a->qkv >= 0 || (a->q >= 0 && a->k >= 0 && a->v >= 0))) ||
		       L->ssm.in >= 0;
	bool mlp_ok = (p->down >= 0 && (p->gate_up >= 0 || p->up >= 0) && (!p->glu || p->gate_up >= 0 || p->gate >= 0)) ||
		      L->moe.exp;
	tpc_part_place pl = m->parts.place;
	bool pre_ok = pl == TPC_PART_POST || (L->norm1_w >= 0 && L->norm2_w >= 0);
	bool post_ok = (pl != TPC_PART_POST && pl != TPC_PART_SANDWICH) || (L->post1_w >= 0 && L->post2_w >= 0);
	if (!pre_ok || !post_ok || !attn_ok || !mlp_ok)
		return tpc_err_set(e, TPC_EINPUT, "layer '%s' lacks a norm, attention or MLP tensor", nm);
	return 0;
}

/* Rows (out) or columns of tensor i, -1 when absent or not a matrix. */
static int64_t dim_of(const tpc_verify_set *s, int64_t i, bool out)
{
	return i < 0 ? -1 : rows_of(s, i, out);
}

/* Layer l's (nm's) MLA tensors by the record's rows and their sizes
 * (tpc_vmla) from their shapes and the heads, and the rope facts. */
static int mla_of(const tpc_verify_set *s, const arch_names *an, int64_t l, const char *nm, const tpc_model_facts *f,
		  int64_t heads, tpc_vattn *a, tpc_err *e)
{
	tpc_vmla *m = &a->lat;
	m->q_proj = a->q;
	m->q_a = find_role(s, an, TPC_ROLE_ATTN_Q_A, l, false);
	m->q_a_norm = find_role(s, an, TPC_ROLE_ATTN_Q_A_NORM, l, false);
	m->q_b = find_role(s, an, TPC_ROLE_ATTN_Q_B, l, false);
	m->kv_a = find_role(s, an, TPC_ROLE_ATTN_KV_A_MQA, l, false);
	m->kv_a_norm = find_role(s, an, TPC_ROLE_ATTN_KV_A_NORM, l, false);
	m->kv_b = find_role(s, an, TPC_ROLE_ATTN_KV_B, l, false);
	bool lora = m->q_proj < 0;
	int64_t q = dim_of(s, lora ? m->q_b : m->q_proj, true), kvb = dim_of(s, m->kv_b, true);
	m->kv_lora = m->kv_a_norm >= 0 && s->t[m->kv_a_norm].ref->ndim == 1 ? s->t[m->kv_a_norm].ref->shape[0] : -1;
	m->q_lora = lora && m->q_a_norm >= 0 && s->t[m->q_a_norm].ref->ndim == 1 ? s->t[m->q_a_norm].ref->shape[0] : 0;
	m->rope = dim_of(s, m->kv_a, true) - m->kv_lora;
	if (heads > 0 && q > 0 && kvb > 0 && q % heads == 0 && kvb % heads == 0) {
		m->nope = q / heads - m->rope;
		m->v_dim = kvb / heads - m->nope;
	}
	if (heads <= 0 || m->kv_lora < 1 || m->rope < 2 || m->rope % 2 || m->nope < 0 || m->v_dim < 1 ||
	    dim_of(s, m->kv_a, false) != dim_of(s, a->o, true) || dim_of(s, m->kv_b, false) != m->kv_lora ||
	    dim_of(s, a->o, false) != heads * m->v_dim ||
	    (lora ? m->q_lora < 1 || dim_of(s, m->q_a, true) != m->q_lora || dim_of(s, m->q_b, false) != m->q_lora ||
			    dim_of(s, m->q_a, false) != dim_of(s, a->o, true)
		  : dim_of(s, m->q_proj, false) != dim_of(s, a->o, true)))
		return tpc_err_set(e, TPC_EINPUT,
				   "layer '%s': MLA tensors do not fit %lld heads (q_a/q_b or q_proj, kv_a_proj_with_mqa with kv_a_layernorm, kv_b_proj, o_proj; give num_attention_heads)",
				   nm, (long long)heads);
	m->rotate_half = f && f->rope_interleave < 0;
	m->mscale2 = 1;
	int ret = yarn_of(f ? &f->yarn : NULL, nm, &m->yarn, e);
	if (ret)
		return ret;
	if (m->yarn.factor > 1) {
		if (m->yarn.mscale_all_dim > 0) {
			double ms = 0.1 * m->yarn.mscale_all_dim * log(m->yarn.factor) + 1.0;
			m->mscale2 = ms * ms;
		}
	}
	a->heads = a->kv_heads = heads;
	a->head_dim = m->nope + m->rope;
	return 0;
}

/* Layer nm's attention heads: MLA's counted heads, else from the facts
 * (*heads, *kvh, *hd; 0 unknown) or, where they gave none, from the q and k
 * rows, which then stand for every later layer. */
static int layer_heads(const tpc_verify_set *s, const tpc_vmodel *m, const arch_names *an, int64_t l, const char *nm,
		       const tpc_model_facts *f, tpc_vattn *a, int64_t *heads, int64_t *kvh, int64_t *hd, tpc_err *e)
{
	if (a->mla) /* MLA: its heads are counted, not head_dim rows */
		return mla_of(s, an, l, nm, f, *heads, a, e);
	if (a->delta) /* sized by delta_of */
		return 0;
	int64_t qrows = a->qkv >= 0 ? (s->t[a->qkv].nparts == 3 ? s->t[a->qkv].part[0].size : -1)
				    : rows_of(s, a->q, true);
	int64_t krows = a->qkv >= 0 ? (s->t[a->qkv].nparts == 3 ? s->t[a->qkv].part[1].size : -1)
				    : rows_of(s, a->k, true);
	if (a->qkv >= 0 && s->t[a->qkv].nparts != 3 && m->arch == TPC_VARCH_GPT2)
		qrows = krows = m->hidden; /* a replicated c_attn: [q|k|v] thirds */
	if (a->gated && qrows > 0) /* each head's query then its gate */
		qrows = qrows % 2 ? -1 : qrows / 2;
	if (a->interleaved) /* [q, k, v] per head: a third of the rows each */
		qrows = krows = rows_of(s, a->qkv, true) % 3 ? -1 : rows_of(s, a->qkv, true) / 3;
	if (!*hd && *heads)
		*hd = qrows / *heads;
	if (!*heads && *hd)
		*heads = qrows / *hd;
	if (!*heads || !*hd || qrows != *heads * *hd || krows <= 0 || krows % *hd)
		return tpc_err_set(e, TPC_EINPUT,
				   "layer '%s': attention heads unknown or not matching q rows %lld (give heads and head_dim)",
				   nm, (long long)qrows);
	if (!*kvh)
		*kvh = krows / *hd;
	if (krows != *kvh * *hd || *heads % *kvh)
		return tpc_err_set(e, TPC_EINPUT, "layer '%s': %lld kv heads do not match k rows %lld", nm,
				   (long long)*kvh, (long long)krows);
	a->heads = *heads;
	a->kv_heads = *kvh;
	a->head_dim = *hd;
	return 0;
}

/* A longrope layer (Phi-3's): one factor in short_factor and long_factor per
 * rotated pair (transformers' Phi3Config.validate_rope), its
 * original_max_position_embeddings resolved (model_longrope); an MLA layer's
 * longrope refused. */
static int layer_longrope(const tpc_vmodel *m, const char *nm, tpc_vattn *a, tpc_err *e)
{
	if (!a->longrope || !a->rope || a->delta)
		return (a->longrope = false), 0;
	const tpc_rope_longrope *lr = &m->longrope;
	int64_t half = (a->rot_dims ? a->rot_dims : a->head_dim) / 2;
	if (a->mla)
		return tpc_err_set(e, TPC_EINPUT, "layer '%s': a longrope rope on a multi-head latent attention layer", nm);
	if (m->longrope_orig < 1)
		return tpc_err_set(e, TPC_EINPUT, "layer '%s': a longrope rope needs config.json's original_max_position_embeddings",
				   nm);
	if (lr->n_short != half || lr->n_long != half)
		return tpc_err_set(e, TPC_EINPUT,
				   "layer '%s': config.json's longrope short_factor has %d entries and long_factor %d, not %lld (one per rotated pair of the %lld rotated dims)",
				   nm, lr->n_short, lr->n_long, (long long)half, (long long)(2 * half));
	return 0;
}

/* A record with a partial rotary embedding (GLM-4, GPT-NeoX): int(head_dim
 * * partial_rotary_factor) dims of each head rotated, as transformers'
 * rope init counts them; config.json says the fraction, or the record's
 * default (rope_fraction). And a GQA layer's yarn rope scaling resolved
 * (yarn_of); a llama3 rope scaling without its numbers and a chunked layer
 * without its chunk size refused. */
static int layer_rot(const tpc_vmodel *m, const char *nm, const tpc_model_facts *f, tpc_vattn *a, tpc_err *e)
{
	int ret = a->mla || a->delta ? 0 : yarn_of(&a->yarn, nm, &a->yarn, e);
	if (ret)
		return ret;
	if (a->rope && f && f->llama3_bad)
		return tpc_err_set(e, TPC_EINPUT,
				   "layer '%s': a llama3 rope scaling needs factor, low_freq_factor, high_freq_factor and original_max_position_embeddings",
				   nm);
	if (a->chunk < 0)
		return tpc_err_set(e, TPC_EINPUT, "layer '%s': a chunked attention layer needs config.json's attention_chunk_size",
				   nm);
	if (a->rope && f && f->rope_unknown[0] && !a->longrope && !a->mla && !a->delta)
		return tpc_err_set(e, TPC_EINPUT,
				   "layer '%s': config.json's rope_type '%s' is not one verify's forward computes (default, linear, dynamic, yarn, llama3, longrope): refused rather than rotated as a plain rope",
				   nm, f->rope_unknown);
	/* a dynamic rope: within max_position_embeddings transformers' dynamic
	 * NTK is the default rope; a record's alpha rope (HunYuan's) rotates by
	 * theta * alpha ^ (head_dim / (head_dim - 2)) */
	if (a->rope && f && f->rope_dynamic && !a->mla && !a->delta) {
		if (f->max_pos < 1)
			return tpc_err_set(e, TPC_EINPUT, "layer '%s': a dynamic rope needs config.json's max_position_embeddings",
					   nm);
		if (m->parts.rope_alpha && f->rope_alpha > 0) {
			if (a->head_dim < 3)
				return tpc_err_set(e, TPC_EINPUT, "layer '%s': a dynamic alpha rope on a %lld-dim head", nm,
						   (long long)a->head_dim);
			a->rope_theta *= pow(f->rope_alpha, (double)a->head_dim / (double)(a->head_dim - 2));
		}
	}
	if (!m->parts.partial_rope || !a->rope || a->mla || a->delta)
		return layer_longrope(m, nm, a, e);
	double pct = f && f->rotary_pct > 0 ? f->rotary_pct : m->parts.rope_fraction;
	a->rot_dims = (int64_t)((double)a->head_dim * pct);
	if (pct <= 0 || pct > 1)
		return tpc_err_set(e, TPC_EINPUT,
				   "layer '%s': a partial rotary embedding needs config.json's partial_rotary_factor (0 < it <= 1)",
				   nm);
	if (a->rot_dims < 2 || a->rot_dims % 2)
		return tpc_err_set(e, TPC_EINPUT, "layer '%s': %lld rotary dims of a %lld-dim head: not a positive even number",
				   nm, (long long)a->rot_dims, (long long)a->head_dim);
	return layer_longrope(m, nm, a, e);
}

/* A longrope rope (transformers' _compute_longrope_parameters):
 * original_max_position_embeddings as the config class reads it (the
 * record's rope_orig_top: the top of config.json's, or that default; else
 * the rope object's, else max_position_embeddings: standardize_rope_params),
 * factor as said, else max_position_embeddings / it, and the attention
 * factor as said, else sqrt(1 + ln(factor) / ln(original)), 1 when factor
 * <= 1. An original of 0 is refused by layer_longrope. */
static void model_longrope(tpc_vmodel *m, const tpc_rope_longrope *lr)
{
	int64_t orig = m->parts.rope_orig_top ? (lr->orig_top ? lr->orig_top : m->parts.rope_orig_top)
			: lr->orig_rope ? lr->orig_rope : lr->max_pos;
	m->longrope = *lr;
	m->longrope_orig = orig;
	double factor = lr->factor > 0 ? lr->factor : orig > 0 && lr->max_pos > 0 ? (double)lr->max_pos / (double)orig : 1;
	m->longrope_af = lr->attn_factor > 0 ? lr->attn_factor
			 : factor <= 1 || orig < 2 ? 1.0 : sqrt(1 + log(factor) / log((double)orig));
}

/* The model's layers, 0, 1, ... until one is missing; with config.json's
 * num_nextn_predict_layers, the num_hidden_layers first: the
 * next-token-prediction layers after them are no part of transformers'
 * model (GLM-4.5's _keys_to_ignore_on_load_unexpected, DeepSeek-V3's), their
 * tensors checked one by one only. */
static int model_layers(tpc_verify_set *s, tpc_vmodel *m, const arch_names *an, const tpc_model_facts *f,
			     tpc_err *e)
{
	int64_t heads = f ? f->heads : 0, kvh = f ? f->kv_heads : 0, hd = f ? f->head_dim : 0;
	int ret = 0;
	int64_t last = f && f->nextn > 0 && f->layers > 0 ? f->layers : INT64_MAX;
	if (f && (f->longrope.on || (m->parts.longrope_alias && f->longrope.alias)))
		model_longrope(m, &f->longrope);
	for (int64_t l = 0; !ret && l < last; l++) {
		tpc_vlayer L;
		char nm[TPC_ERR_NAME_MAX];
		layer_names(s, m, an, l, f, &L, nm);
		if (L.norm1_w < 0 && L.attn.o < 0 && L.mlp.down < 0)
			break; /* no layer l: the model has l layers */
		if ((ret = layer_kinds(s, m, an, l, nm, f, &L, e)) ||
		    (L.ssm.in < 0 && (ret = layer_heads(s, m, an, l, nm, f, &L.attn, &heads, &kvh, &hd, e))) ||
		    (ret = layer_rot(m, nm, f, &L.attn, e)) ||
		    (ret = layer_add(m, &L, nm, e)))
			free(L.moe.exp);
	}
	if (!ret && f && f->rope_dynamic)
		m->rope_max = f->max_pos;
	if (!ret && (!m->nlayers || (f && f->layers && f->layers != m->nlayers)))
		ret = tpc_err_set(e, TPC_EINPUT, "model: found %lld layers%s", (long long)m->nlayers,
				  m->nlayers ? ", not the configured number" : "");
	/* transformers indexes no_rope_layers by layer: a shorter list is no model */
	if (!ret && f && f->n_rope_listed && f->n_rope_listed < m->nlayers)
		ret = tpc_err_set(e, TPC_EINPUT, "model: config.json's no_rope_layers has %lld entries for %lld layers",
				  (long long)f->n_rope_listed, (long long)m->nlayers);
	return ret;
}

/* Gemma's embedding scale: sqrt(hidden) as transformers holds it (an fp32
 * buffer), rounded to the embedding's dtype (.to(weight.dtype)). */
static double embed_scale(int64_t hidden, tpc_dtype dt)
{
	float v = (float)sqrt((double)hidden);
	if (dt == TPC_BF16)
		v = tpc_bf16_to_f32(tpc_f32_to_bf16(v));
	else if (dt == TPC_F16)
		v = tpc_f16_to_f32(tpc_f32_to_f16(v));
	return v;
}

tpc_varch tpc_verify_varch(const tpc_layer_parts *p)
{
	switch (p->model) {
	case TPC_PART_BLOCKS_DIFFUSERS:
		return TPC_VARCH_DIT;
	case TPC_PART_BLOCKS_DALLE2:
		return TPC_VARCH_DALLE2;
	case TPC_PART_ENCODER:
		return TPC_VARCH_BERT;
	default:
		break;
	}
	if (p->qkv == TPC_PART_QKV_PER_HEAD)
		return TPC_VARCH_GPTNEOX;
	return p->pos == TPC_PART_POS_LEARNED ? TPC_VARCH_GPT2 : TPC_VARCH_LLAMA;
}

int tpc_verify_model_from_names(tpc_verify_set *s, const tpc_family *fam, const tpc_model_facts *f, tpc_err *e)
{
	if (!fam || !fam->has_parts)
		return tpc_err_set(e, TPC_EINPUT, "verify: the family '%s' describes no layer parts",
				   fam ? fam->name : "?");
	tpc_vmodel *m = tpc_calloc(1, sizeof(*m));
	tpc_varch arch = tpc_verify_varch(&fam->parts);
	arch_names an;
	int ret = 0;
	if (!m)
		return tpc_err_nomem(e);
	m->arch = arch;
	m->parts = fam->parts;
	m->embed = m->pos_embed = m->final_norm_w = m->final_norm_b = m->lm_head = -1;
	m->type_embed = m->embed_norm_w = m->embed_norm_b = m->mlm_dense = m->head_bias = -1;
	if (arch == TPC_VARCH_DIT) {
		ret = dit_from_names(s, m, f, e);
	} else if (arch == TPC_VARCH_DALLE2) {
		ret = dalle2_from_names(s, m, f, e);
	} else {
		const tpc_layer_parts *p = &fam->parts;
		bool rms = p->norm == TPC_PART_RMSNORM;
		m->norm = rms ? TPC_VNORM_RMS : TPC_VNORM_LAYER;
		m->norm_eps = f && f->norm_eps > 0 ? f->norm_eps : p->norm_eps > 0 ? p->norm_eps : rms ? 1e-6 : 1e-5;
		m->post_norm = p->place == TPC_PART_AFTER_ADD;
		m->parallel_residual = p->resid == TPC_PART_PARALLEL && !(f && f->parallel_residual < 0);
		if (arch_names_init(&an, fam))
			ret = tpc_err_set(e, TPC_EINPUT, "verify: no tensor table for this architecture");
		else if (!(ret = model_top(s, m, f, &an, e)))
			ret = model_layers(s, m, &an, f, e);
		if (!ret && fam->parts.embed_scale)
			m->embed_mul = embed_scale(m->hidden, s->t[m->embed].ref->src_dtype);
		else if (f)
			m->embed_mul = f->embed_mul;
		m->final_softcap = f ? f->final_softcap : 0;
		m->resid_mul = f ? f->resid_mul : 0;
		m->logit_div = f ? f->logit_div : 0;
		m->logit_mul = fam->parts.logit_scale && f ? f->logit_mul : 0;
		if (!ret && fam->parts.logit_scale && !m->logit_mul)
			ret = tpc_err_set(e, TPC_EINPUT, "%s model: its logits are scaled by config.json's logit_scale, which the config lacks",
					  fam->name);
	}
	if (!ret) {
		model_free(s->model);
		s->model = m;
		m = NULL;
	}
	model_free(m);
	return ret;
}
