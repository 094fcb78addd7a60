/* neox.c - GPT-NeoX (and LiBai's GPT, named its own way) and BERT for the
 * block and model checks: their model descriptions from Hugging Face (and
 * LiBai) names, their local extras on a rank, and the fp32 and fp64
 * instances of neox.inc (the layer forms tpc__model runs for them).
 *
 * GPT-NeoX (transformers' GPTNeoXForCausalLM): embed_in, then per layer
 * LayerNorms with biases, query_key_value holding [q, k, v] per head
 * ([heads, 3, head_dim] rows: the gpt-neox plan splits it on whole heads),
 * rotate-half rope on the first int(head_dim * rotary_pct) dims of each
 * head, causal attention, dense; dense_h_to_4h, gelu, dense_4h_to_h; the
 * parallel residual x + attn(ln1(x)) + mlp(ln2(x)) unless
 * use_parallel_residual is false; final_layer_norm, embed_out. LiBai's GPT
 * has the same layer under other names, learned positions, no rope, the
 * sequential residual and the head tied to its token embeddings.
 *
 * BERT (BertModel, BertForMaskedLM, BertForPreTraining): word + position +
 * token type 0 embeddings and their LayerNorm, then per layer bidirectional
 * self-attention (query, key, value, attention.output.dense), the residual
 * and attention.output.LayerNorm, intermediate.dense, gelu, output.dense,
 * the residual and output.LayerNorm; the MLM head (transform dense, gelu,
 * its LayerNorm, the decoder tied to the word embeddings or its own, the
 * vocab bias) when the checkpoint has one, else the last hidden states. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"
#include "vint.h"

#define TPC_CAT2(a, b) a##_##b
#define TPC_CAT(a, b) TPC_CAT2(a, b)

/* Tensor a + b + c of the set, -1 when absent. */
static int64_t find3(const tpc_verify_set *s, const char *a, const char *b, const char *c)
{
	char nm[TPC_ERR_NAME_MAX];
	int k = snprintf(nm, sizeof(nm), "%s%s%s", a, b, c);
	return k < 0 || (size_t)k >= sizeof(nm) ? -1 : tpc_verify_set_find(s, nm);
}

/* The names of a decoder whose query_key_value is head-interleaved. */
typedef struct woven {
	const char *what, *pre[3];
	const char *embed, *pos, *layers, *ln1, *qkv, *o, *ln2, *up, *down, *fnorm, *head;
	bool rope;
} woven;

static const woven wovens[] = {
	{"GPT-NeoX", {"gpt_neox.", "", NULL}, "embed_in.weight", NULL, "layers.", "input_layernorm",
	 "attention.query_key_value", "attention.dense", "post_attention_layernorm", "mlp.dense_h_to_4h",
	 "mlp.dense_4h_to_h", "final_layer_norm", "embed_out.weight", true},
	{"LiBai GPT", {"GPT_model.", "", NULL}, "embeddings.token_embeddings.weight",
	 "embeddings.position_embeddings.weight", "transformer.layers.", "input_layernorm",
	 "self_attention.query_key_value", "self_attention.dense", "post_attention_layernorm", "mlp.dense_h_to_4h",
	 "mlp.dense_4h_to_h", "transformer.layernorm_f", NULL, false},
};

/* The embedding at index i: hidden and vocab, heads and head_dim from the
 * facts. */
static int top_of(const tpc_verify_set *s, tpc_vmodel *m, int64_t i, const tpc_model_facts *f, const char *what,
		  int64_t *heads, int64_t *hd, tpc_err *e)
{
	const tpc_vtensor *ev = &s->t[i];
	m->embed = i;
	if (ev->ref->ndim != 2)
		return tpc_err_set(e, TPC_EINPUT, "%s model: the embedding '%s' must be 2-D", what, ev->name);
	m->hidden = ev->ref->shape[1];
	m->vocab = ev->dim == 0 ? ev->part[0].size : ev->ref->shape[0];
	*heads = f ? f->heads : 0;
	*hd = f && f->head_dim ? f->head_dim : *heads > 0 && m->hidden % *heads == 0 ? m->hidden / *heads : 0;
	if (*heads < 1 || *hd < 1 || *heads * *hd != m->hidden || (f && f->hidden && f->hidden != m->hidden))
		return tpc_err_set(e, TPC_EINPUT, "%s model: %lld heads do not divide hidden %lld (give num_attention_heads)",
				   what, (long long)*heads, (long long)m->hidden);
	return 0;
}

/* Layer lp's tensors present? Else name what it lacks. */
static int layer_whole(const tpc_vlayer *L, const char *lp, tpc_err *e)
{
	const tpc_vattn *a = &L->attn;
	bool attn = a->o >= 0 && (a->qkv >= 0 || (a->q >= 0 && a->k >= 0 && a->v >= 0));
	if (L->norm1_w < 0 || L->norm2_w < 0 || !attn || L->mlp.up < 0 || L->mlp.down < 0)
		return tpc_err_set(e, TPC_EINPUT, "layer '%s' lacks a norm, attention or MLP tensor", lp);
	return 0;
}

/* One layer of a woven decoder; *done when there is no layer l. */
static int woven_layer(tpc_verify_set *s, tpc_vmodel *m, const woven *w, const char *pre, int64_t l, int64_t heads,
		       int64_t hd, const tpc_model_facts *f, bool *done, tpc_err *e)
{
	char lp[TPC_ERR_NAME_MAX];
	tpc_vlayer L;
	tpc__layer_init(&L);
	snprintf(lp, sizeof(lp), "%s%s%lld.", pre, w->layers, (long long)l);
	L.norm1_w = find3(s, lp, w->ln1, ".weight");
	L.norm1_b = find3(s, lp, w->ln1, ".bias");
	L.norm2_w = find3(s, lp, w->ln2, ".weight");
	L.norm2_b = find3(s, lp, w->ln2, ".bias");
	L.attn.qkv = find3(s, lp, w->qkv, ".weight");
	L.attn.o = find3(s, lp, w->o, ".weight");
	L.mlp.up = find3(s, lp, w->up, ".weight");
	L.mlp.down = find3(s, lp, w->down, ".weight");
	lp[strlen(lp) - 1] = '\0';
	if ((*done = L.norm1_w < 0 && L.attn.qkv < 0 && L.mlp.down < 0))
		return 0;
	int ret = layer_whole(&L, lp, e);
	if (ret)
		return ret;
	if (s->t[L.attn.qkv].ref->ndim != 2 || s->t[L.attn.qkv].ref->shape[0] != 3 * heads * hd)
		return tpc_err_set(e, TPC_EINPUT, "layer '%s': query_key_value is not [3 * %lld, ...] for %lld heads of %lld",
				   lp, (long long)m->hidden, (long long)heads, (long long)hd);
	tpc_vattn *a = &L.attn;
	a->interleaved = true;
	a->heads = a->kv_heads = heads;
	a->head_dim = hd;
	/* transformers: rotary_ndims = int(head_size * partial_rotary_factor) */
	a->rot_dims = w->rope ? (int64_t)((double)hd * (f && f->rotary_pct > 0 ? f->rotary_pct : 0.25)) : 0;
	a->rope = a->rot_dims > 0;
	a->rope_theta = f && f->rope_theta > 0 ? f->rope_theta : 10000.0;
	if (a->rot_dims % 2 || a->rot_dims > hd)
		return tpc_err_set(e, TPC_EINPUT, "layer '%s': %lld rotary dims of a head of %lld (rotary_pct)", lp,
				   (long long)a->rot_dims, (long long)hd);
	L.mlp.act = TPC_VACT_GELU;
	return tpc__layer_add(m, &L, lp, e);
}

static int neox_from_names(tpc_verify_set *s, tpc_vmodel *m, const tpc_model_facts *f, tpc_err *e)
{
	const woven *w = NULL;
	const char *pre = NULL;
	int64_t heads, hd, ix = -1;
	for (size_t k = 0; !w && k < sizeof(wovens) / sizeof(wovens[0]); k++)
		for (const char *const *p = wovens[k].pre; *p && !w; p++)
			if ((ix = find3(s, *p, wovens[k].embed, "")) >= 0) {
				w = &wovens[k];
				pre = *p;
			}
	if (!w)
		return tpc_err_set(e, TPC_EINPUT,
				   "gpt-neox model: no 'gpt_neox.embed_in.weight' (GPT-NeoX) or 'GPT_model.embeddings.token_embeddings.weight' (LiBai's GPT); --arch none checks "
				   "structure and layers only");
	int ret = top_of(s, m, ix, f, w->what, &heads, &hd, e);
	if (ret)
		return ret;
	m->parallel_residual = w->rope && !(f && f->parallel_residual < 0);
	m->pos_embed = w->pos ? find3(s, pre, w->pos, "") : -1;
	m->final_norm_w = find3(s, pre, w->fnorm, ".weight");
	m->final_norm_b = find3(s, pre, w->fnorm, ".bias");
	m->lm_head = w->head ? tpc_verify_set_find(s, w->head) : -1;
	if (m->final_norm_w < 0 || (w->head && m->lm_head < 0))
		return tpc_err_set(e, TPC_EINPUT, "%s model: no final norm '%s%s.weight' or head '%s'", w->what, pre,
				   w->fnorm, w->head ? w->head : "-");
	bool done = false;
	for (int64_t l = 0; !ret && !done; l++)
		ret = woven_layer(s, m, w, pre, l, heads, hd, f, &done, e);
	return ret;
}

/* ---- BERT ---- */

static int bert_layer(tpc_verify_set *s, tpc_vmodel *m, const char *pre, int64_t l, int64_t heads, int64_t hd,
		      bool *done, tpc_err *e)
{
	char lp[TPC_ERR_NAME_MAX];
	tpc_vlayer L;
	tpc_vattn *a = &L.attn;
	tpc__layer_init(&L);
	snprintf(lp, sizeof(lp), "%sencoder.layer.%lld.", pre, (long long)l);
	a->q = find3(s, lp, "attention.self.query", ".weight");
	a->k = find3(s, lp, "attention.self.key", ".weight");
	a->v = find3(s, lp, "attention.self.value", ".weight");
	a->o = find3(s, lp, "attention.output.dense", ".weight");
	L.norm1_w = find3(s, lp, "attention.output.LayerNorm", ".weight");
	L.norm1_b = find3(s, lp, "attention.output.LayerNorm", ".bias");
	L.mlp.up = find3(s, lp, "intermediate.dense", ".weight");
	L.mlp.down = find3(s, lp, "output.dense", ".weight");
	L.norm2_w = find3(s, lp, "output.LayerNorm", ".weight");
	L.norm2_b = find3(s, lp, "output.LayerNorm", ".bias");
	lp[strlen(lp) - 1] = '\0';
	if ((*done = a->q < 0 && a->o < 0 && L.norm1_w < 0))
		return 0;
	int ret = layer_whole(&L, lp, e);
	if (ret)
		return ret;
	a->heads = a->kv_heads = heads;
	a->head_dim = hd;
	a->bidirectional = true;
	L.mlp.act = TPC_VACT_GELU;
	return tpc__layer_add(m, &L, lp, e);
}

/* The MLM head under cls.predictions, when there is one. */
static int bert_head(tpc_verify_set *s, tpc_vmodel *m, tpc_err *e)
{
	const char *cp = "cls.predictions.";
	m->mlm_dense = find3(s, cp, "transform.dense", ".weight");
	m->hidden_out = m->mlm_dense < 0;
	if (m->hidden_out)
		return 0;
	m->final_norm_w = find3(s, cp, "transform.LayerNorm", ".weight");
	m->final_norm_b = find3(s, cp, "transform.LayerNorm", ".bias");
	m->lm_head = find3(s, cp, "decoder", ".weight"); /* else tied to the word embeddings */
	m->head_bias = find3(s, cp, "decoder", ".bias");
	if (m->head_bias < 0)
		m->head_bias = find3(s, cp, "bias", "");
	/* the transform's dense is replicated: its bias is linked here */
	int64_t b = find3(s, cp, "transform.dense", ".bias");
	if (b >= 0 && s->t[m->mlm_dense].bias < 0)
		s->t[m->mlm_dense].bias = b;
	if (m->final_norm_w < 0)
		return tpc_err_set(e, TPC_EINPUT, "bert model: the MLM head has no 'cls.predictions.transform.LayerNorm.weight'");
	return 0;
}

static int bert_from_names(tpc_verify_set *s, tpc_vmodel *m, const tpc_model_facts *f, tpc_err *e)
{
	static const char *const pres[] = {"bert.", ""};
	const char *pre = NULL;
	int64_t heads, hd, ix = -1;
	for (size_t k = 0; !pre && k < 2; k++)
		if ((ix = find3(s, pres[k], "embeddings.word_embeddings", ".weight")) >= 0)
			pre = pres[k];
	if (!pre)
		return tpc_err_set(e, TPC_EINPUT, "bert model: no 'bert.embeddings.word_embeddings.weight'");
	int ret = top_of(s, m, ix, f, "bert", &heads, &hd, e);
	if (ret)
		return ret;
	m->post_norm = true;
	m->pos_embed = find3(s, pre, "embeddings.position_embeddings", ".weight");
	m->type_embed = find3(s, pre, "embeddings.token_type_embeddings", ".weight");
	m->embed_norm_w = find3(s, pre, "embeddings.LayerNorm", ".weight");
	m->embed_norm_b = find3(s, pre, "embeddings.LayerNorm", ".bias");
	if (m->pos_embed < 0 || m->embed_norm_w < 0)
		return tpc_err_set(e, TPC_EINPUT, "bert model: no '%sembeddings.position_embeddings.weight' or '%sembeddings.LayerNorm.weight'",
				   pre, pre);
	if ((ret = bert_head(s, m, e)))
		return ret;
	bool done = false;
	for (int64_t l = 0; !ret && !done; l++)
		ret = bert_layer(s, m, pre, l, heads, hd, &done, e);
	return ret;
}

int tpc__neox_from_names(tpc_verify_set *s, tpc_vmodel *m, const tpc_model_facts *f, tpc_err *e)
{
	bool bert = m->arch == TPC_VARCH_BERT;
	m->norm = TPC_VNORM_LAYER;
	m->norm_eps = f && f->norm_eps > 0 ? f->norm_eps : bert ? 1e-12 : 1e-5;
	int ret = bert ? bert_from_names(s, m, f, e) : neox_from_names(s, m, f, e);
	if (!ret && (!m->nlayers || (f && f->layers && f->layers != m->nlayers)))
		ret = tpc_err_set(e, TPC_EINPUT, "%s model: found %lld layers%s", bert ? "bert" : "gpt-neox",
				  (long long)m->nlayers, m->nlayers ? ", not the configured number" : "");
	return ret;
}

bool tpc__form_loc_of(const vrun *R, int t, vmodel_loc *m, char *msg, size_t n)
{
	const tpc_vmodel *d = R->s->model;
	if (d->arch != TPC_VARCH_GPTNEOX && d->arch != TPC_VARCH_BERT)
		return true;
	m->form = d;
	int64_t mb = d->mlm_dense >= 0 ? R->s->t[d->mlm_dense].bias : -1;
	if (t >= 0 && (!tpc__repl_ok(R, d->type_embed, "token type embedding", msg, n) ||
		       !tpc__repl_ok(R, d->embed_norm_w, "embedding norm", msg, n) ||
		       !tpc__repl_ok(R, d->embed_norm_b, "embedding norm", msg, n) ||
		       !tpc__repl_ok(R, d->mlm_dense, "MLM transform", msg, n) || !tpc__repl_ok(R, mb, "MLM transform", msg, n)))
		return false;
	tpc__opt_loc(R, d->type_embed, t, &m->type);
	tpc__opt_loc(R, d->embed_norm_w, t, &m->enw);
	tpc__opt_loc(R, d->embed_norm_b, t, &m->enb);
	if (d->mlm_dense >= 0)
		tpc__lin_of(R, d->mlm_dense, t, false, &m->mlm);
	if (d->hidden_out)
		memset(&m->head, 0, sizeof(m->head));
	return true;
}

#define R float
#define S f
#include "neox.inc"
#undef R
#undef S

#define R double
#define S d
#include "neox.inc"
