/* check_model.c - the model check: the whole forward (embedding, every layer,
 * final norm, head) tensor-parallel on seeded token ids, its logits against
 * the unsplit model's in fp64, with the top-1 agreement. See verify.c for the
 * pattern every check follows.
 *
 * Mixture-of-experts layers route on the split run's own activations: rank 0
 * routes (its router, fp64 arithmetic on its fp32 activations) and sends the
 * experts, weights and shared-expert gates to every rank, so all take part in
 * the same collectives. The reference then runs those experts with its own
 * weights for them: a top-k choice that fp32 rounding tips over a near tie
 * would otherwise change the logits without anything being wrong. Whether
 * the reference's own choice scores higher than the split run's by more
 * than TPC_V_ROUTE_TOL is checked on every token, and fails the check. */
#include <math.h>
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

/* Choice scores (softmax or sigmoid probabilities, plus any correction
 * bias) by which the reference may prefer other experts than the split run
 * chose: far above fp32 rounding of the activations, far below a change of
 * expert a wrong weight makes. */
#define TPC_V_ROUTE_TOL 1e-3

/* The model check's state for the hooks of the forward (vmodel_loc). */
typedef struct mrun {
	vrun *R;
	int64_t T, K;            /* tokens, the largest top_k */
	int64_t *sel;            /* [nl][T * K]: the split run's routing */
	int64_t *own;            /* [T * K]: the reference's own choice */
	double *buf;             /* [T * (2K + 1) + T * H]: routing sent from rank 0; x in fp64 */
	float *trace;            /* rank 0: every layer's output [nl][T * H] of the split run */
	tpc_vresult *res;        /* the check's tolerances, for the first differing layer */
	int64_t first_bad;       /* the first layer whose output differs (-1: none) */
	char why[200];           /* the first routing the reference would not make */
	bool own_route;          /* the reference alone (tpc__model_reference): routes itself */
} mrun;

static int moe_f(void *arg, int64_t l, int64_t T, const float *in, float *out)
{
	mrun *M = arg;
	vrun *R = M->R;
	const tpc_vmoe *mo = &R->s->model->layers[l].moe;
	int64_t H = R->s->model->hidden, K = mo->top_k, *sel = M->sel + l * T * M->K;
	double *w = M->buf + T * K, *g = mo->shared_gate >= 0 ? w + T * K : NULL, *xd = M->buf + T * (2 * K + 1);
	int ret = 0;
	if (R->me == 0) {
		for (int64_t i = 0; i < T * H; i++)
			xd[i] = in[i];
		if ((ret = tpc__moe_route(R, mo, 0, xd, T, H, NULL, sel, w, NULL)) ||
		    (g && (ret = tpc__moe_shared_gate(R, mo, 0, xd, T, H, g))))
			return ret;
		for (int64_t i = 0; i < T * K; i++)
			M->buf[i] = (double)sel[i];
	}
	if ((ret = tpc_coll_bcast(R->c, M->buf, sizeof(double) * (size_t)(T * (2 * K + 1)), 0, R->e)))
		return ret;
	for (int64_t i = 0; i < T * K; i++)
		sel[i] = (int64_t)M->buf[i];
	return tpc__moe_apply_f(R, mo, R->me, in, T, H, sel, w, g, out);
}

static int moe_d(void *arg, int64_t l, int64_t T, const double *in, double *out)
{
	mrun *M = arg;
	vrun *R = M->R;
	const tpc_vlayer *ly = &R->s->model->layers[l];
	const tpc_vmoe *mo = &ly->moe;
	int64_t H = R->s->model->hidden, K = mo->top_k, *sel = M->sel + l * T * M->K;
	double *w = M->buf, *g = mo->shared_gate >= 0 ? w + T * K : NULL;
	vgap gap = {0, -1};
	int ret = M->own_route ? tpc__moe_route(R, mo, -1, in, T, H, NULL, sel, w, NULL)
			       : tpc__moe_route(R, mo, -1, in, T, H, sel, M->own, w, &gap);
	if (!ret && g)
		ret = tpc__moe_shared_gate(R, mo, -1, in, T, H, g);
	if (!ret && gap.gap > TPC_V_ROUTE_TOL && !M->why[0])
		snprintf(M->why, sizeof(M->why),
			 "'%s' routes token %lld to other experts than the unsplit model would (their scores are %.3g lower)",
			 ly->name, (long long)gap.tok, gap.gap);
	return ret ? ret : tpc__moe_apply_d(R, mo, -1, in, T, H, sel, w, g, out);
}

static void layer_end_f(void *arg, int64_t l, int64_t T, const float *X)
{
	mrun *M = arg;
	int64_t H = M->R->s->model->hidden;
	if (M->trace)
		memcpy(M->trace + l * T * H, X, sizeof(float) * (size_t)(T * H));
}

/* The reference's layer l against the split run's, with the check's
 * tolerances as they stand: only to name the first layer that differs. */
static void layer_end_d(void *arg, int64_t l, int64_t T, const double *X)
{
	mrun *M = arg;
	int64_t H = M->R->s->model->hidden;
	if (!M->trace || M->first_bad >= 0)
		return;
	tpc_vresult r = *M->res;
	r.status = TPC_VR_PASS;
	r.mismatches = 0;
	r.ndiff = 0;
	tpc__widen(M->R, &r);
	tpc__cmp_all(&r, X, M->trace + l * T * H, (size_t)(T * H));
	if (r.status == TPC_VR_FAIL)
		M->first_bad = l;
}

static int stack(void *arg, int64_t l, bool dbl, vlayer_loc *L, vstack *st)
{
	return tpc__pass_stack(((mrun *)arg)->R, l, dbl, L, st);
}

bool tpc__model_loc_of(const vrun *R, int t, vmodel_loc *m, char *msg, size_t n)
{
	const tpc_vmodel *d = R->s->model;
	*m = (vmodel_loc){.norm = d->norm, .eps = d->norm_eps, .embed_mul = d->embed_mul, .final_softcap = d->final_softcap,
			  .resid_mul = d->resid_mul, .logit_div = d->logit_div, .logit_mul = d->logit_mul, .H = d->hidden,
			  .V = d->vocab, .nl = d->nlayers};
	int64_t head = d->lm_head >= 0 ? d->lm_head : d->embed;
	if (t >= 0) {
		if (!vocab_ok(R, d->embed, "embedding", msg, n) || !vocab_ok(R, head, "lm head", msg, n) ||
		    !tpc__repl_ok(R, d->pos_embed, "position embedding", msg, n) ||
		    !tpc__repl_ok(R, d->final_norm_w, "final norm", msg, n) || !tpc__repl_ok(R, d->final_norm_b, "final norm", msg, n) ||
		    (d->head_bias >= 0 && !tpc__rank_ok(R, d->head_bias, t, msg, n)))
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
	tpc__opt_loc(R, d->head_bias, t, &m->head_b);
	m->fnw.shift = d->parts.norm_offset;
	if (m->head_b.t && (m->head_b.dim != m->head.dim || m->head_b.nparts != 1 || m->head_b.len[0] != m->head.len[0] ||
			    m->head_b.start[0] != m->head.start[0])) {
		snprintf(msg, n, "head bias '%s' must be split as the head '%s' (vocab rows)", m->head_b.name, m->head.name);
		return false;
	}
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
		if (t >= 0 && (!tpc__repl_ok(R, ly->post1_w, "norm", msg, n) || !tpc__repl_ok(R, ly->post2_w, "norm", msg, n)))
			return false;
		tpc__opt_loc(R, ly->post1_w, t, &L->p1w);
		tpc__opt_loc(R, ly->post2_w, t, &L->p2w);
		L->n1w.shift = L->n2w.shift = L->p1w.shift = L->p2w.shift = d->parts.norm_offset;
		L->no_pre = d->parts.place == TPC_PART_POST;
		L->parallel = d->parts.resid != TPC_PART_SEQUENTIAL;
		L->is_ssm = ly->ssm.in >= 0;
		if (L->is_ssm ? !tpc__ssm_loc_of(R, ly, t, &L->ssm, msg, n)
		    : ly->attn.mla   ? !tpc__mla_loc_of(R, ly, t, &L->mla, msg, n)
		    : ly->attn.delta ? !tpc__delta_loc_of(R, ly, t, &L->dn, msg, n)
				     : !tpc__attn_loc_of(R, ly, t, &L->attn, msg, n))
			return false;
		L->moe = ly->moe.exp != NULL;
		if (L->moe ? t >= 0 && !tpc__moe_ok(R, &ly->moe, msg, n) : !tpc__mlp_loc_of(R, &ly->mlp, t, &L->mlp, msg, n))
			return false;
	}
	if (!tpc__form_loc_of(R, t, m, msg, n))
		return false;
	m->moe_f = moe_f;
	m->moe_d = moe_d;
	m->layer_end_f = layer_end_f;
	m->layer_end_d = layer_end_d;
	if (R->pass)
		m->stack = stack;
	return true;
}

/* The hooks' buffers (the trace on rank 0 only). */
static int mrun_init(vrun *R, mrun *M, tpc_vresult *res)
{
	const tpc_vmodel *d = R->s->model;
	memset(M, 0, sizeof(*M));
	M->R = R;
	M->T = R->T;
	M->res = res;
	M->first_bad = -1;
	M->K = 1;
	for (int64_t l = 0; l < d->nlayers; l++)
		if (d->layers[l].moe.exp && d->layers[l].moe.top_k > M->K)
			M->K = d->layers[l].moe.top_k;
	size_t tk = (size_t)(M->T * M->K), th = (size_t)(M->T * d->hidden);
	M->sel = malloc(sizeof(int64_t) * (tk * (size_t)d->nlayers + 1));
	M->own = malloc(sizeof(int64_t) * (tk + 1));
	M->buf = malloc(sizeof(double) * (2 * tk + (size_t)M->T + th + 1));
	if (R->me == 0)
		M->trace = malloc(sizeof(float) * (th * (size_t)d->nlayers + 1));
	if (!M->sel || !M->own || !M->buf || (R->me == 0 && !M->trace))
		return tpc_err_nomem(R->e);
	return 0;
}

static void mrun_release(mrun *M)
{
	free(M->sel);
	free(M->own);
	free(M->buf);
	free(M->trace);
}

int tpc__check_model(vrun *R)
{
	const tpc_vmodel *d = R->s->model;
	tpc_vresult res;
	tpc__res_init(R, &res, TPC_VC_MODEL, "model", R->s->t[d->embed].ref->src_dtype);
	char msg[sizeof(res.msg)] = "";
	int ret = 0, me = R->me;
	bool failed = false;
	int64_t T = R->T, V = d->hidden_out ? d->hidden : d->vocab; /* BertModel: its hidden states */
	int32_t *ids = NULL;
	float *lg = NULL;
	double *lr = NULL;
	vmodel_loc m, mr;
	mrun M;
	memset(&mr, 0, sizeof(mr));
	memset(&M, 0, sizeof(M));
	if (!tpc__model_loc_of(R, me, &m, msg, sizeof(msg)))
		tpc__res_fail(&res, "%s", msg);
	if ((ret = tpc__exchange(R, &res, false, &failed)) || failed)
		goto done;
	if ((ret = mrun_init(R, &M, &res)))
		goto done;
	m.arg = &M;
	if (!VNEW(R, ids, T) || !VNEW(R, lg, T * V)) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	uint64_t stream = tpc_verify_stream("model", TPC_VC_MODEL);
	for (int64_t t = 0; t < T; t++)
		ids[t] = (int32_t)tpc__seeded_id(R->o->seed, stream, t, d->vocab);
	R->xf.mute = tpc__dp_mute(R); /* the dense part on dp group 0, the experts where they are */
	ret = tpc__model_f(&R->xf, &m, T, ids, lg);
	R->xf.mute = false;
	if (ret)
		goto done;
	if (me == 0) {
		tpc__ref_begin(R, &res, lg, (size_t)(T * V), NULL, 0);
		if (!tpc__model_loc_of(R, -1, &mr, msg, sizeof(msg))) {
			ret = tpc_err_set(R->e, TPC_EINPUT, "reference model: %s", msg);
			goto done;
		}
		if (!VNEW(R, lr, T * V)) {
			ret = tpc_err_nomem(R->e);
			goto done;
		}
		mr.arg = &M;
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
			snprintf(res.msg, sizeof(res.msg),
				 "%llu of %llu logits differ from the unsplit model; top-1 agrees on %lld of %lld tokens%s%s%s",
				 (unsigned long long)res.mismatches, (unsigned long long)res.elements,
				 (long long)res.top1_agree, (long long)res.top1_total,
				 M.first_bad >= 0 ? "; the first layer whose output differs: '" : "",
				 M.first_bad >= 0 ? d->layers[M.first_bad].name : "", M.first_bad >= 0 ? "'" : "");
		if (M.why[0]) {
			res.msg[0] = 0;
			tpc__res_fail(&res, "%s", M.why);
		}
	}
done:
	mrun_release(&M);
	free(m.L);
	free(mr.L);
	if (failed && !ret)
		return 0;
	if (R->pass) { /* the single pass: reported in its place */
		if (!(ret = tpc__finish_quiet(R, ret)))
			tpc__pass_keep_model(R, &res);
		return ret;
	}
	return tpc__finish(R, &res, ret);
}

int tpc__model_reference(const tpc_verify_set *s, int64_t T, const int32_t *ids, double *logits, tpc_err *e)
{
	tpc_verify_opts o;
	tpc_vresult res;
	vrun R;
	mrun M;
	vmodel_loc m;
	char msg[sizeof(res.msg)] = "";
	memset(&o, 0, sizeof(o));
	memset(&R, 0, sizeof(R));
	memset(&res, 0, sizeof(res));
	memset(&m, 0, sizeof(m));
	R.s = s;
	R.o = &o;
	R.e = R.xd.e = e;
	R.tp = s->tp;
	R.T = T;
	int ret = mrun_init(&R, &M, &res);
	free(M.trace); /* nothing to compare layers with */
	M.trace = NULL;
	M.own_route = true;
	if (!ret && !tpc__model_loc_of(&R, -1, &m, msg, sizeof(msg)))
		ret = tpc_err_set(e, TPC_EINPUT, "reference model: %s", msg);
	m.arg = &M;
	if (!ret)
		ret = tpc__model_d(&R.xd, &m, T, ids, logits);
	mrun_release(&M);
	free(m.L);
	tpc__vctx_release(&R.xd);
	return ret;
}
