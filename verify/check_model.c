/* check_model.c - the model check: the whole forward (embedding, every layer,
 * final norm, head) tensor-parallel on seeded token ids, its logits against
 * the unsplit model's in fp64, with the top-1 agreement. See verify.c for the
 * pattern every check follows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"
#include "vint.h"

static bool vocab_ok(const vrun *R, int64_t i, const char *what, char *msg, size_t n)
{
	const tpc_vtensor *v = &R->s->t[i];
	if (v->dim >= 0 && (v->dim != 0 || v->nparts != 1 || v->transposed)) {
		snprintf(msg, n, "%s '%s' must be replicated or vocab-split on dim 0", what, v->name);
		return false;
	}
	return tpc__rank_ok(R, i, R->me, msg, n);
}

static bool model_loc_of(const vrun *R, int t, vmodel_loc *m, char *msg, size_t n)
{
	const tpc_vmodel *d = R->s->model;
	memset(m, 0, sizeof(*m));
	m->norm = d->norm;
	m->eps = d->norm_eps;
	m->H = d->hidden;
	m->V = d->vocab;
	m->nl = d->nlayers;
	int64_t head = d->lm_head >= 0 ? d->lm_head : d->embed;
	if (t >= 0) {
		if (!vocab_ok(R, d->embed, "embedding", msg, n) || !vocab_ok(R, head, "lm head", msg, n) ||
		    !tpc__repl_ok(R, d->pos_embed, "position embedding", msg, n) ||
		    !tpc__repl_ok(R, d->final_norm_w, "final norm", msg, n) || !tpc__repl_ok(R, d->final_norm_b, "final norm", msg, n))
			return false;
		if (d->pos_embed >= 0 && R->s->t[d->pos_embed].ref->shape[0] < R->T) {
			snprintf(msg, n, "%lld tokens, but only %lld positions", (long long)R->T,
				 (long long)R->s->t[d->pos_embed].ref->shape[0]);
			return false;
		}
	}
	tpc__loc_of(R, d->embed, t, &m->embed);
	tpc__loc_of(R, head, t, &m->head);
	tpc__opt_loc(R, d->pos_embed, t, &m->pos);
	tpc__opt_loc(R, d->final_norm_w, t, &m->fnw);
	tpc__opt_loc(R, d->final_norm_b, t, &m->fnb);
	m->L = calloc((size_t)d->nlayers + 1, sizeof(*m->L));
	if (!m->L) {
		snprintf(msg, n, "out of memory");
		return false;
	}
	for (int64_t l = 0; l < d->nlayers; l++) {
		const tpc_vlayer *ly = &d->layers[l];
		vlayer_loc *L = &m->L[l];
		if (t >= 0 && (!tpc__repl_ok(R, ly->norm1_w, "norm", msg, n) || !tpc__repl_ok(R, ly->norm1_b, "norm", msg, n) ||
			       !tpc__repl_ok(R, ly->norm2_w, "norm", msg, n) || !tpc__repl_ok(R, ly->norm2_b, "norm", msg, n)))
			return false;
		tpc__opt_loc(R, ly->norm1_w, t, &L->n1w);
		tpc__opt_loc(R, ly->norm1_b, t, &L->n1b);
		tpc__opt_loc(R, ly->norm2_w, t, &L->n2w);
		tpc__opt_loc(R, ly->norm2_b, t, &L->n2b);
		if (!tpc__attn_loc_of(R, ly, t, &L->attn, msg, n) || !tpc__mlp_loc_of(R, &ly->mlp, t, &L->mlp, msg, n))
			return false;
	}
	return true;
}

int tpc__check_model(vrun *R)
{
	const tpc_vmodel *d = R->s->model;
	tpc_vresult res;
	tpc__res_init(R, &res, TPC_VC_MODEL, "model", R->s->t[d->embed].ref->src_dtype);
	char msg[sizeof(res.msg)] = "";
	int ret = 0, me = R->me;
	bool failed = false;
	int64_t T = R->T, V = d->vocab;
	int32_t *ids = NULL;
	float *lg = NULL;
	double *lr = NULL;
	vmodel_loc m, mr;
	memset(&mr, 0, sizeof(mr));
	if (!model_loc_of(R, me, &m, msg, sizeof(msg)))
		tpc__res_fail(&res, "%s", msg);
	if ((ret = tpc__exchange(R, &res, false, &failed)) || failed)
		goto done;
	if (!VNEW(R, ids, T) || !VNEW(R, lg, T * V)) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	uint64_t stream = tpc_verify_stream("model", TPC_VC_MODEL);
	for (int64_t t = 0; t < T; t++)
		ids[t] = (int32_t)tpc__seeded_id(R->o->seed, stream, t, V);
	if ((ret = tpc__model_f(&R->xf, &m, T, ids, lg)))
		goto done;
	if (me == 0) {
		tpc__ref_begin(R, &res, lg, (size_t)(T * V));
		if (!model_loc_of(R, -1, &mr, msg, sizeof(msg))) {
			ret = tpc_err_set(R->e, TPC_EINPUT, "reference model: %s", msg);
			goto done;
		}
		if (!VNEW(R, lr, T * V)) {
			ret = tpc_err_nomem(R->e);
			goto done;
		}
		R->xd.score_max = 0;
		if ((ret = tpc__model_d(&R->xd, &mr, T, ids, lr)))
			goto done;
		tpc__widen(R, &res);
		tpc__cmp_all(&res, lr, lg, (size_t)(T * V));
		res.top1_total = T;
		for (int64_t t = 0; t < T; t++) {
			int64_t a = 0, b = 0;
			for (int64_t j = 1; j < V; j++) {
				if (lg[t * V + j] > lg[t * V + a])
					a = j;
				if (lr[t * V + j] > lr[t * V + b])
					b = j;
			}
			res.top1_agree += a == b;
		}
		if (res.status == TPC_VR_FAIL)
			snprintf(res.msg, sizeof(res.msg), "%llu of %llu logits differ from the unsplit model; top-1 agrees on %lld of %lld tokens",
				 (unsigned long long)res.mismatches, (unsigned long long)res.elements,
				 (long long)res.top1_agree, (long long)res.top1_total);
	}
done:
	free(m.L);
	free(mr.L);
	if (failed && !ret)
		return 0;
	return tpc__finish(R, &res, ret);
}
