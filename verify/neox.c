/* neox.c - GPT-NeoX's (and LiBai's GPT's) and BERT's model extras on a
 * rank, and the fp32 and fp64 instances of neox.inc (the layer forms
 * tpc__model runs for them). Their tensors are found through their
 * records' tables (vset.c), as every token model's.
 *
 * GPT-NeoX (transformers' GPTNeoXForCausalLM): LayerNorms with biases,
 * query_key_value holding [q, k, v] per head (the gpt-neox plan splits it on
 * whole heads), rotate-half rope on the first int(head_dim * rotary_pct)
 * dims of each head, causal attention; dense_h_to_4h, gelu, dense_4h_to_h;
 * the parallel residual x + attn(ln1(x)) + mlp(ln2(x)) unless
 * use_parallel_residual is false. LiBai's GPT has the same layer with
 * learned positions, no rope and the sequential residual.
 *
 * BERT (BertModel, BertForMaskedLM, BertForPreTraining): word + position +
 * token type 0 embeddings and their LayerNorm, then per layer bidirectional
 * self-attention, the residual and its LayerNorm, the MLP, the residual and
 * its LayerNorm; the MLM head (transform dense, gelu, its LayerNorm, the
 * decoder tied to the word embeddings or its own, the vocab bias) when the
 * checkpoint has one, else the last hidden states. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"
#include "vint.h"

#define TPC_CAT2(a, b) a##_##b
#define TPC_CAT(a, b) TPC_CAT2(a, b)

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
