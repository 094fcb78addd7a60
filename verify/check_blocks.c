/* check_blocks.c - the block checks: a layer's attention and MLP, and a
 * mixture-of-experts block (tensor-parallel inside every expert, experts of
 * other EP groups contributing zeros), each run tensor-parallel on seeded
 * inputs against the unsplit block in fp64. The local views of a block
 * (tpc__mlp_loc_of, tpc__attn_loc_of) also serve the model check. See
 * verify.c for the pattern every check follows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"
#include "vint.h"

/* Is tensor i usable as the given half of a tensor-parallel block on rank t:
 * present, shaped, split the right way (col: output features; row: input
 * features), and its bias fitting? */
static bool block_part_ok(const vrun *R, int64_t i, int want, const char *what, char *msg, size_t n)
{
	const tpc_vtensor *v = &R->s->t[i];
	int mk = tpc__math_kind(v);
	if (!tpc__float_dtype(v->ref->src_dtype)) {
		snprintf(msg, n, "%s '%s' is %s: no arithmetic for it", what, v->name, tpc_dtype_name(v->ref->src_dtype));
		return false;
	}
	if (mk != want && !(mk == MK_REPL && R->tp == 1)) {
		snprintf(msg, n, "%s '%s' is split %s (dim %d); a tensor-parallel block needs it %s-parallel", what,
			 v->name, tpc_vsplit_name(v->split), v->dim, want == MK_COL ? "column" : "row");
		return false;
	}
	return tpc__rank_ok(R, i, R->me, msg, n) && tpc__bias_ok(R, i, want == MK_ROW, msg, n);
}

bool tpc__part_ok(const vrun *R, int64_t i, bool row, const char *what, char *msg, size_t n)
{
	return block_part_ok(R, i, row ? MK_ROW : MK_COL, what, msg, n);
}

/* Keys and values may also be replicated: every rank computes every kv head
 * (multi-query attention), and the query heads it holds find theirs. */
static bool kv_part_ok(const vrun *R, int64_t i, const char *what, char *msg, size_t n)
{
	if (tpc__math_kind(&R->s->t[i]) == MK_REPL && tpc__float_dtype(R->s->t[i].ref->src_dtype))
		return tpc__rank_ok(R, i, R->me, msg, n) && tpc__bias_ok(R, i, false, msg, n);
	return block_part_ok(R, i, MK_COL, what, msg, n);
}

/* A fused [k|v] (DALLE2's to_kv): 2 parts, or replicated whole (its halves). */
static bool kv_fused_loc(const vrun *R, int64_t i, int t, vlin *kv, char *msg, size_t n)
{
	tpc__lin_of(R, i, t, false, kv);
	vloc *w = &kv->w;
	if (!R->s->t[i].nparts && w->nparts == 1 && w->len[0] % 2 == 0) {
		w->nparts = 2;
		w->len[0] = w->len[1] = w->size[0] = w->size[1] = w->len[0] / 2;
		w->off[1] = w->poff[1] = w->len[0];
		w->start[1] = 0;
		w->replicas[1] = w->replicas[0];
	}
	if (w->nparts != 2) {
		snprintf(msg, n, "attention kv '%s' must be split as 2 parts [k|v]", R->s->t[i].name);
		return false;
	}
	return true;
}

static int64_t part_len(const vloc *l, int k)
{
	return k < l->nparts ? l->len[k] : 0;
}

bool tpc__mlp_loc_of(const vrun *R, const tpc_vmlp *p, int t, vmlp_loc *m, char *msg, size_t n)
{
	*m = (vmlp_loc){.glu = p->glu, .value_first = p->value_first, .interleaved = p->interleaved,
			.clamp = p->clamp, .alpha = p->alpha, .act = p->act, .fused = p->gate_up >= 0};
	bool ok = true;
	int64_t start = 0;
	if (t >= 0) {
		if (m->fused)
			ok = block_part_ok(R, p->gate_up, MK_COL, "mlp gate_up", msg, n);
		else
			ok = (!p->glu || block_part_ok(R, p->gate, MK_COL, "mlp gate", msg, n)) &&
			     block_part_ok(R, p->up, MK_COL, "mlp up", msg, n);
		ok = ok && block_part_ok(R, p->down, MK_ROW, "mlp down", msg, n);
		if (!ok)
			return false;
	}
	if (m->fused && m->interleaved) { /* gate, up alternating: whole pairs */
		tpc__lin_of(R, p->gate_up, t, false, &m->gate_up);
		const vloc *w = &m->gate_up.w;
		if (w->nparts != 1 || w->len[0] % 2 || w->start[0] % 2 || w->replicas[0] != 1) {
			snprintf(msg, n, "mlp gate_up '%s' (gate and up interleaved) must be split into whole [gate, up] pairs",
				 R->s->t[p->gate_up].name);
			return false;
		}
		m->inner = w->len[0] / 2;
		start = w->start[0] / 2;
	} else if (m->fused) {
		tpc__lin_of(R, p->gate_up, t, false, &m->gate_up);
		if (m->gate_up.w.nparts != 2 || part_len(&m->gate_up.w, 0) != part_len(&m->gate_up.w, 1) ||
		    m->gate_up.w.start[0] != m->gate_up.w.start[1]) {
			snprintf(msg, n, "mlp gate_up '%s' must be split as 2 equal parts %s", R->s->t[p->gate_up].name,
				 p->value_first ? "[value|gate] (a gated feed-forward)" : "[gate|up]");
			return false;
		}
		m->inner = m->gate_up.w.len[0];
		start = m->gate_up.w.start[0];
	} else {
		if (p->glu)
			tpc__lin_of(R, p->gate, t, false, &m->gate);
		tpc__lin_of(R, p->up, t, false, &m->up);
		m->inner = m->up.w.len[0];
		start = m->up.w.start[0];
		if (m->up.w.nparts != 1 ||
		    (p->glu && (m->gate.w.nparts != 1 || m->gate.w.len[0] != m->inner || m->gate.w.start[0] != start))) {
			snprintf(msg, n, "mlp gate '%s' and up '%s' must hold the same slice of the intermediate features",
				 p->glu ? R->s->t[p->gate].name : "-", R->s->t[p->up].name);
			return false;
		}
	}
	tpc__lin_of(R, p->down, t, true, &m->down);
	if (m->down.w.nparts != 1 || m->down.w.len[0] != m->inner || m->down.w.start[0] != start ||
	    m->down.w.replicas[0] != 1) {
		snprintf(msg, n, "mlp down '%s' must take the intermediate slice [%lld, +%lld) its rank computes",
			 R->s->t[p->down].name, (long long)start, (long long)m->inner);
		return false;
	}
	return true;
}


/* One of a Mamba-2 mixer's tensors held as its split says on this rank: a
 * float, split on dim 0 (conv1d, dt_bias, A_log, D, the norm) or, with one
 * rank, replicated */
static bool ssm_part_ok(const vrun *R, int64_t i, const char *what, char *msg, size_t n)
{
	const tpc_vtensor *v = i >= 0 ? &R->s->t[i] : NULL;
	if (!v) {
		snprintf(msg, n, "the Mamba-2 mixer has no %s", what);
		return false;
	}
	if (!tpc__float_dtype(v->ref->src_dtype) || (R->tp > 1 && v->dim != 0)) {
		snprintf(msg, n, "Mamba-2 %s '%s' must be a float split on dim 0 by heads", what, v->name);
		return false;
	}
	return tpc__rank_ok(R, i, R->me, msg, n);
}

/* A whole (unsplit, partless) tensor of a Mamba-2 mixer described as its np
 * parts of sz[] rows; false when its rows do not add up. A split one as it is. */
static bool ssm_whole(vloc *w, const int64_t *sz, int np)
{
	int64_t sum = 0;
	if (w->nparts == np || w->nparts != 1 || w->start[0] != 0 || w->len[0] != w->size[0])
		return true; /* split: the checks below */
	for (int k = 0; k < np; k++) {
		w->len[k] = w->size[k] = sz[k];
		w->start[k] = 0;
		w->off[k] = w->poff[k] = sum;
		w->replicas[k] = 1;
		sum += sz[k];
	}
	w->nparts = np;
	return w->t && w->t->ndim >= 1 && w->t->shape[0] == sum;
}

bool tpc__ssm_loc_of(const vrun *R, const tpc_vlayer *ly, int t, vssm_loc *s, char *msg, size_t n)
{
	const tpc_vssm *p = &ly->ssm;
	*s = (vssm_loc){.hd = p->head_dim, .ns = p->state, .K = p->conv, .heads = p->heads, .groups = p->groups,
			.eps = p->eps};
	if (t >= 0 && (!block_part_ok(R, p->in, MK_COL, "Mamba-2 in_proj", msg, n) ||
		       !block_part_ok(R, p->out, MK_ROW, "Mamba-2 out_proj", msg, n) || !ssm_part_ok(R, p->conv_w, "conv1d", msg, n) ||
		       (p->conv_b >= 0 && !ssm_part_ok(R, p->conv_b, "conv1d bias", msg, n)) ||
		       !ssm_part_ok(R, p->dt_bias, "dt_bias", msg, n) || !ssm_part_ok(R, p->a_log, "A_log", msg, n) ||
		       !ssm_part_ok(R, p->d, "D", msg, n) || !ssm_part_ok(R, p->norm, "norm", msg, n)))
		return false;
	tpc__lin_of(R, p->in, t, false, &s->in);
	tpc__lin_of(R, p->out, t, true, &s->out);
	tpc__loc_of(R, p->conv_w, t, &s->conv_w);
	tpc__opt_loc(R, p->conv_b, t, &s->conv_b);
	tpc__loc_of(R, p->dt_bias, t, &s->dt_bias);
	tpc__loc_of(R, p->a_log, t, &s->a_log);
	tpc__loc_of(R, p->d, t, &s->d);
	tpc__loc_of(R, p->norm, t, &s->norm);
	vloc *w = &s->in.w, *c = &s->conv_w;
	int64_t hd = s->hd, ns = s->ns, di = s->heads * hd, gw = s->groups * ns;
	/* a set that holds them whole (one rank, a set not split by the
	 * record's plan): the parts from the facts */
	const int64_t in_sz[5] = {di, di, gw, gw, s->heads}, conv_sz[3] = {di, gw, gw};
	if (!ssm_whole(w, in_sz, 5) || !ssm_whole(c, conv_sz, 3)) {
		snprintf(msg, n, "the Mamba-2 mixer '%s' is not %lld heads of %lld and %lld groups of %lld channels", w->name,
			 (long long)s->heads, (long long)hd, (long long)s->groups, (long long)ns);
		return false;
	}
	/* in_proj [z | x | B | C | dt], conv1d [x | B | C]: this rank's heads
	 * and groups, the same in both; the heads' per-head tensors */
	bool fits = w->nparts == 5 && c->nparts == 3 && hd > 0 && ns > 0 && s->K > 0 && s->groups > 0 &&
		    s->heads % s->groups == 0 && w->len[0] == w->len[1] && w->len[0] % hd == 0 && w->start[0] % hd == 0 &&
		    w->start[1] == w->start[0] && w->len[2] == w->len[3] && w->start[2] == w->start[3] && w->len[2] % ns == 0 &&
		    w->start[2] % ns == 0 && w->len[4] * hd == w->len[0] && w->start[4] * hd == w->start[0] &&
		    c->len[0] == w->len[0] && c->start[0] == w->start[0] && c->len[1] == w->len[2] && c->start[1] == w->start[2] &&
		    c->len[2] == w->len[2] && c->t->ndim == 3 && c->t->shape[1] == 1 && c->t->shape[2] == s->K &&
		    s->dt_bias.len[0] == w->len[4] && s->a_log.len[0] == w->len[4] && s->d.len[0] == w->len[4] &&
		    s->norm.len[0] == w->len[0] && s->out.w.t->ndim == 2 && s->out.w.t->shape[1] == w->len[0];
	if (!fits) {
		snprintf(msg, n, "rank %d: the Mamba-2 mixer '%s' is not split by whole heads and groups as in_proj [z|x|B|C|dt] and conv1d [x|B|C] (%lld heads of %lld, %lld groups of %lld, %lld taps)",
			 t, w->name, (long long)s->heads, (long long)hd, (long long)s->groups, (long long)ns, (long long)s->K);
		return false;
	}
	s->nh = w->len[0] / hd;
	s->h0 = w->start[0] / hd;
	s->ng = w->len[2] / ns;
	s->g0 = w->replicas[2] > 1 ? 0 : w->start[2] / ns;
	return true;
}

bool tpc__attn_loc_of(const vrun *R, const tpc_vlayer *ly, int t, vattn_loc *a, char *msg, size_t n)
{
	const tpc_vattn *p = &ly->attn;
	*a = (vattn_loc){.fused = p->qkv >= 0, .kv_fused = p->qkv < 0 && p->k < 0 && p->kv >= 0,
			 .hd = p->head_dim, .heads = p->heads, .kv_heads = p->kv_heads, .rope = p->rope,
			 .theta = p->rope_theta, .rot = p->rot_dims, .pairs = p->rope_pairs, .bidirectional = p->bidirectional,
			 .kv_w = p->kv_width, .qk_eps = p->qk_eps, .qk_whole = p->qk_whole,
			 .qk_late = p->qk_after_rope,
			 .rope_linear = p->rope_linear, .yarn = p->yarn, .llama3 = p->llama3, .scale = p->scale,
			 .softcap = p->softcap, .window = p->window, .chunk = p->chunk, .qk_l2 = p->qk_l2,
			 .temp_floor = p->temp_floor, .temp_scale = p->temp_scale};
	if (t >= 0 && (!tpc__repl_ok(R, p->q_norm, "attention q_norm", msg, n) || !tpc__repl_ok(R, p->k_norm, "attention k_norm", msg, n)))
		return false;
	tpc__opt_loc(R, p->q_norm, t, &a->qn);
	tpc__opt_loc(R, p->k_norm, t, &a->kn);
	if (R->s->model && p->longrope) { /* Phi-3's longrope: the model's factors */
		const tpc_vmodel *m = R->s->model;
		a->lr_short = m->longrope.short_f;
		a->lr_long = m->longrope.long_f;
		a->lr_orig = m->longrope_orig;
		a->lr_af = m->longrope_af;
	}
	if (R->s->model) /* Gemma 3's q_norm, k_norm: 1 + w as its other norms */
		a->qn.shift = a->kn.shift = R->s->model->parts.norm_offset;
	if (t >= 0) {
		bool ok = a->fused ? block_part_ok(R, p->qkv, MK_COL, "attention qkv", msg, n)
			  : a->kv_fused ? block_part_ok(R, p->q, MK_COL, "attention q", msg, n) &&
					  kv_part_ok(R, p->kv, "attention kv", msg, n)
				   : block_part_ok(R, p->q, MK_COL, "attention q", msg, n) &&
					     kv_part_ok(R, p->k, "attention k", msg, n) &&
					     kv_part_ok(R, p->v, "attention v", msg, n);
		if (!ok || !block_part_ok(R, p->o, MK_ROW, "attention o", msg, n))
			return false;
	}
	int64_t ql, kl, vl, qs, ks, vs;
	const char *qn;
	if (a->fused) {
		tpc__lin_of(R, p->qkv, t, false, &a->qkv);
		const vloc *w = &a->qkv.w;
		qn = R->s->t[p->qkv].name;
		if (p->interleaved) { /* [q, k, v] per head: whole heads of 3 * head_dim rows */
			a->interleaved = true;
			if (w->nparts != 1 || a->hd <= 0 || w->len[0] % (3 * a->hd) || w->start[0] % (3 * a->hd) || w->replicas[0] != 1 ||
			    w->start[0] + w->len[0] > w->size[0]) {
				snprintf(msg, n, "attention qkv '%s' must hold whole heads of [q, k, v] (%lld rows each)", qn,
					 (long long)(3 * a->hd));
				return false;
			}
			ql = kl = vl = w->len[0] / 3, qs = ks = vs = w->start[0] / 3;
		} else if (w->nparts != 3) {
			snprintf(msg, n, "attention qkv '%s' must be split as 3 parts [q|k|v]", qn);
			return false;
		} else {
			ql = w->len[0], kl = w->len[1], vl = w->len[2], qs = w->start[0], ks = w->start[1], vs = w->start[2];
		}
	} else if (a->kv_fused) {
		tpc__lin_of(R, p->q, t, false, &a->q);
		if (!kv_fused_loc(R, p->kv, t, &a->kv, msg, n))
			return false;
		qn = R->s->t[p->q].name;
		ql = a->q.w.len[0], kl = a->kv.w.len[0], vl = a->kv.w.len[1];
		qs = a->q.w.start[0], ks = a->kv.w.start[0], vs = a->kv.w.start[1];
	} else {
		tpc__lin_of(R, p->q, t, false, &a->q);
		tpc__lin_of(R, p->k, t, false, &a->k);
		tpc__lin_of(R, p->v, t, false, &a->v);
		qn = R->s->t[p->q].name;
		ql = a->q.w.len[0], kl = a->k.w.len[0], vl = a->v.w.len[0];
		qs = a->q.w.start[0], ks = a->k.w.start[0], vs = a->v.w.start[0];
		if (p->gated) { /* [query, gate] per head: whole pairs, counted as their query rows */
			a->gated = true;
			if (ql % (2 * a->hd) || qs % (2 * a->hd)) {
				snprintf(msg, n, "rank %d: gated '%s' must hold whole heads of a query and its gate (%lld rows each)",
					 t, qn, (long long)(2 * a->hd));
				return false;
			}
			ql /= 2, qs /= 2;
		}
	}
	int64_t hd = a->hd;
	if (hd <= 0 || ql % hd || kl % hd || kl != vl || ks != vs || qs % hd || ks % hd) {
		snprintf(msg, n, "rank %d: '%s' q/k/v slices (%lld, %lld, %lld rows) are not whole heads of %lld", t, qn,
			 (long long)ql, (long long)kl, (long long)vl, (long long)hd);
		return false;
	}
	a->nq = ql / hd;
	a->nkv = kl / hd;
	a->q0 = qs / hd;
	a->kv0 = ks / hd;
	int64_t group = a->heads / a->kv_heads;
	for (int64_t h = 0; h < a->nq; h++) {
		int64_t need = (a->q0 + h) / group;
		if (need < a->kv0 || need >= a->kv0 + a->nkv) {
			snprintf(msg, n, "rank %d: query head %lld needs kv head %lld, but the rank holds kv heads %lld..%lld", t,
				 (long long)(a->q0 + h), (long long)need, (long long)a->kv0,
				 (long long)(a->kv0 + a->nkv - 1));
			return false;
		}
	}
	tpc__lin_of(R, p->o, t, true, &a->o);
	if (a->o.w.nparts != 1 || a->o.w.len[0] != ql || a->o.w.start[0] != qs || a->o.w.replicas[0] != 1) {
		snprintf(msg, n, "rank %d: o '%s' must take the context of the query heads the rank computes (%lld..%lld)", t,
			 R->s->t[p->o].name, (long long)a->q0, (long long)(a->q0 + a->nq - 1));
		return false;
	}
	/* the sinks of its query heads: whole (replicated, or the reference),
	 * or the rank's slice of them, split with the heads */
	tpc__opt_loc(R, p->sinks, t, &a->sinks);
	if (a->sinks.t) {
		const tpc_tensor *st = a->sinks.t;
		int64_t sn = st->ndim == 1 ? st->shape[0] : -1;
		if (t >= 0 && !tpc__rank_ok(R, p->sinks, t, msg, n))
			return false;
		if (sn == a->heads && (t < 0 || a->sinks.dim < 0 || R->s->t[p->sinks].split == TPC_VSPLIT_REPLICATE)) {
			a->sink0 = a->q0;
		} else if (sn == a->nq && a->sinks.dim == 0 && a->sinks.start[0] == a->q0) {
			a->sink0 = 0;
		} else {
			snprintf(msg, n, "rank %d: attention sinks '%s' must hold the sinks of its query heads %lld..%lld", t,
				 R->s->t[p->sinks].name, (long long)a->q0, (long long)(a->q0 + a->nq - 1));
			return false;
		}
	}
	return true;
}

/* Softmax turns an absolute error d in its inputs into a relative error of
 * about d in its outputs, and an fp32 score q.k carries an absolute error of
 * about 2^-24 * sum |q_i k_i|: an attention whose scores are large (random,
 * unscaled weights) differs from the fp64 reference by more than fp32's
 * usual 1e-5 without anything being wrong. So an attention or model check
 * compares with rtol raised to 4 * 2^-24 * S when that is larger, S the
 * largest scaled sum |q_i k_i| the reference met (the report shows the rtol
 * used). Well-scaled models (S ~ 10) keep the default. */
void tpc__widen(const vrun *R, tpc_vresult *res)
{
	double w = 4.0 * 0x1p-24 * R->xd.score_max;
	if (w > res->rtol && R->o->rtol < 0)
		res->rtol = w;
}

static tpc_dtype block_dtype(const vrun *R, int64_t i)
{
	return i >= 0 ? R->s->t[i].ref->src_dtype : TPC_F32;
}

/* Rank 0: a block's outputs against the unsplit block's. */
static void cmp_block(tpc_vresult *res, const double *yr, const float *y, size_t n, const char *what)
{
	tpc__cmp_all(res, yr, y, n);
	if (res->status == TPC_VR_FAIL)
		snprintf(res->msg, sizeof(res->msg), "%llu of %llu %s differ from the unsplit block",
			 (unsigned long long)res->mismatches, (unsigned long long)res->elements, what);
}

void tpc__block_open(vrun *R, const tpc_vlayer *ly, tpc_vcheck kind, tpc_vresult *res, char *name, size_t n)
{
	if (R->s->model->arch == TPC_VARCH_DIT || R->s->model->arch == TPC_VARCH_DALLE2)
		snprintf(name, n, "%s", ly->name);
	else
		snprintf(name, n, "%s.%s", ly->name, kind == TPC_VC_MLP ? "mlp" : "attn");
	tpc__res_init(R, res, kind, name, block_dtype(R, kind == TPC_VC_MLP ? ly->mlp.down : ly->attn.o));
}

void tpc__block_cmp(vrun *R, tpc_vresult *res, const float *y, const double *yr, double smax)
{
	double keep = R->xd.score_max;
	R->xd.score_max = smax;
	tpc__widen(R, res);
	R->xd.score_max = keep;
	cmp_block(res, yr, y, (size_t)(R->T * R->s->model->hidden), "block outputs");
}

int tpc__check_block(vrun *R, const tpc_vlayer *ly, tpc_vcheck kind)
{
	tpc_vresult res;
	char name[TPC_ERR_NAME_MAX];
	if (kind == TPC_VC_MLP ? ly->mlp.down < 0 : ly->attn.o < 0)
		return 0; /* a DiT entry holds one of the two */
	tpc__block_open(R, ly, kind, &res, name, sizeof(name));
	bool mla = kind == TPC_VC_ATTN && ly->attn.mla, dn = kind == TPC_VC_ATTN && ly->attn.delta;
	char msg[sizeof(res.msg)] = "";
	int ret = 0, me = R->me;
	bool failed = false;
	int64_t T = R->T, H = ly->hidden ? ly->hidden : R->s->model->hidden, C = kind == TPC_VC_ATTN ? ly->attn.kv_width : 0;
	float *x = NULL, *y = NULL, *cf = NULL;
	double *xd = NULL, *yr = NULL, *cd = NULL;
	vmlp_loc m;
	vattn_loc a;
	vmla_loc ml;
	vdelta_loc dl;
	bool ok = kind == TPC_VC_MLP ? tpc__mlp_loc_of(R, &ly->mlp, me, &m, msg, sizeof(msg))
		  : mla		     ? tpc__mla_loc_of(R, ly, me, &ml, msg, sizeof(msg))
		  : dn		     ? tpc__delta_loc_of(R, ly, me, &dl, msg, sizeof(msg))
				     : tpc__attn_loc_of(R, ly, me, &a, msg, sizeof(msg));
	if (!ok)
		tpc__res_fail(&res, "%s", msg);
	if ((ret = tpc__exchange(R, &res, false, &failed)) || failed)
		return ret;
	if (tpc__pass_block(R, ly - R->s->model->layers, kind, &res))
		goto done; /* computed in the single pass */
	if (!VNEW(R, x, T * H) || !VNEW(R, y, T * H)) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	uint64_t stream = tpc_verify_stream(name, kind);
	tpc__seeded_f(x, T, H, H, 0, R->o->seed, stream);
	if (C) { /* cross-attention: seeded encoder states, the same on every rank */
		if (!VNEW(R, cf, T * C)) {
			ret = tpc_err_nomem(R->e);
			goto done;
		}
		tpc__seeded_f(cf, T, C, C, 0, R->o->seed, stream ^ 0x9e3779b97f4a7c15ull);
		a.kv_f = cf;
	}
	R->xf.mute = tpc__dp_mute(R); /* dp group 0 computes the block */
	ret = kind == TPC_VC_MLP ? tpc__mlp_f(&R->xf, &m, T, H, x, y)
	      : mla		 ? tpc__mla_f(&R->xf, &ml, T, H, x, y)
	      : dn		 ? tpc__delta_f(&R->xf, &dl, T, H, x, y)
				 : tpc__attn_f(&R->xf, &a, T, H, x, y);
	R->xf.mute = false;
	if (ret)
		goto done;
	if (me == 0) {
		tpc__ref_begin(R, &res, y, (size_t)(T * H), NULL, 0);
		vmlp_loc mr;
		vattn_loc ar;
		vmla_loc mlr;
		vdelta_loc dlr;
		if (kind == TPC_VC_MLP ? !tpc__mlp_loc_of(R, &ly->mlp, -1, &mr, msg, sizeof(msg))
		    : mla	       ? !tpc__mla_loc_of(R, ly, -1, &mlr, msg, sizeof(msg))
		    : dn	       ? !tpc__delta_loc_of(R, ly, -1, &dlr, msg, sizeof(msg))
				       : !tpc__attn_loc_of(R, ly, -1, &ar, msg, sizeof(msg))) {
			ret = tpc_err_set(R->e, TPC_EINPUT, "reference %s: %s", name, msg);
			goto done;
		}
		if (!VNEW(R, xd, T * H) || !VNEW(R, yr, T * H)) {
			ret = tpc_err_nomem(R->e);
			goto done;
		}
		tpc__seeded_d(xd, T, H, R->o->seed, stream);
		if (C) {
			if (!VNEW(R, cd, T * C)) {
				ret = tpc_err_nomem(R->e);
				goto done;
			}
			tpc__seeded_d(cd, T, C, R->o->seed, stream ^ 0x9e3779b97f4a7c15ull);
			ar.kv_d = cd;
		}
		R->xd.score_max = 0;
		ret = kind == TPC_VC_MLP ? tpc__mlp_d(&R->xd, &mr, T, H, xd, yr)
		      : mla		 ? tpc__mla_d(&R->xd, &mlr, T, H, xd, yr)
		      : dn		 ? tpc__delta_d(&R->xd, &dlr, T, H, xd, yr)
					 : tpc__attn_d(&R->xd, &ar, T, H, xd, yr);
		if (ret)
			goto done;
		tpc__widen(R, &res);
		cmp_block(&res, yr, y, (size_t)(T * H), "block outputs");
	}
done:
	return tpc__finish(R, &res, ret);
}

/* ---- mixture of experts ---- */

/* How much better the experts in own[K] score (c) than those in use[K]; 0
 * when they are the same experts. */
static double moe_gap(const double *c, const int64_t *own, const int64_t *use, int64_t K)
{
	double a = 0, b = 0;
	int64_t same = 0;
	for (int64_t k = 0; k < K; k++) {
		a += c[own[k]];
		b += c[use[k]];
		for (int64_t j = 0; j < K; j++)
			same += own[k] == use[j];
	}
	return same == K ? 0 : a - b;
}

/* Whether the sparsemixer masks logit i of s (max m, `out` masked
 * already): torch's ((m - s) / s.abs().clamp(min=m)) > 2 eps (0 / 0 is
 * NaN, kept) */
static bool sparse_masked(const double *s, double m, double eps, int64_t out, int64_t i)
{
	return i == out || (m - s[i]) / fmax(fabs(s[i]), m) > 2 * eps;
}

/* The softmax weight at e of the logits s[E] but `out`'s (-1: none) that
 * the sparsemixer keeps */
static double sparse_weight(const double *s, int64_t E, double eps, int64_t out, int64_t e)
{
	double m = -INFINITY, sum = 0;
	for (int64_t i = 0; i < E; i++)
		if (i != out && s[i] > m)
			m = s[i];
	if (sparse_masked(s, m, eps, out, e))
		return 0;
	for (int64_t i = 0; i < E; i++)
		if (!sparse_masked(s, m, eps, out, i))
			sum += exp(s[i] - m);
	return exp(s[e] - m) / sum;
}

void tpc__sparsemixer(const double *s, int64_t E, double eps, const int64_t *use, int64_t *sel, double *w)
{
	sel[0] = sel[1] = -1;
	for (int64_t e = 0; e < E; e++)
		if (sel[0] < 0 || s[e] > s[sel[0]])
			sel[0] = e;
	for (int64_t e = 0; e < E; e++)
		if (e != sel[0] && (sel[1] < 0 || s[e] > s[sel[1]]))
			sel[1] = e;
	const int64_t *u = use ? use : sel;
	w[0] = sparse_weight(s, E, eps, -1, u[0]);
	w[1] = sparse_weight(s, E, eps, u[0], u[1]);
}

int tpc__moe_route(vrun *R, const tpc_vmoe *mo, int rt, const double *x, int64_t T, int64_t H, const int64_t *force,
		   int64_t *sel, double *w, vgap *gap)
{
	vloc L;
	int64_t E = mo->nexp, K = mo->top_k, G = mo->n_group > 1 ? mo->n_group : 1, per = E / G;
	tpc__loc_of(R, mo->router, rt, &L);
	double *W = malloc(sizeof(double) * (size_t)(E * H + 1)), *p = malloc(sizeof(double) * (size_t)(E + 1));
	double *c = malloc(sizeof(double) * (size_t)(E + 1)), *b = calloc((size_t)E + 1, sizeof(double));
	double *rb = calloc((size_t)E + 1, sizeof(double));
	double *gs = malloc(sizeof(double) * (size_t)(G + 1));
	bool *keep = malloc(sizeof(bool) * (size_t)(G + 1)), *taken = malloc(sizeof(bool) * (size_t)(E + 1));
	int ret = 0;
	if (!W || !p || !c || !b || !rb || !gs || !keep || !taken) {
		ret = tpc_err_nomem(R->e);
		goto out;
	}
	if ((ret = tpc__load_d(&R->xd, L.ck, L.t, W)))
		goto out;
	if (mo->router_bias >= 0) { /* added to the logits (gpt-oss) */
		vloc B;
		tpc__loc_of(R, mo->router_bias, rt, &B);
		if ((ret = tpc__load_d(&R->xd, B.ck, B.t, rb)))
			goto out;
	}
	if (mo->score_bias >= 0) {
		vloc B;
		tpc__loc_of(R, mo->score_bias, rt, &B);
		if ((ret = tpc__load_d(&R->xd, B.ck, B.t, b)))
			goto out;
	}
	for (int64_t t = 0; t < T; t++) {
		double mx = -INFINITY, sum = 0, ks = 0;
		for (int64_t e = 0; e < E; e++) {
			double a = rb[e];
			for (int64_t h = 0; h < H; h++)
				a += x[t * H + h] * W[e * H + h];
			p[e] = a;
			if (a > mx)
				mx = a;
		}
		if (mo->sparsemixer) {
			tpc__sparsemixer(p, E, mo->jitter, force ? force + t * K : NULL, sel + t * K, w + t * K);
			double d = force ? moe_gap(p, sel + t * K, force + t * K, K) : 0;
			if (gap && d > gap->gap) {
				gap->gap = d;
				gap->tok = t;
			}
			continue;
		}
		if (mo->sigmoid) {
			for (int64_t e = 0; e < E; e++)
				p[e] = 1.0 / (1.0 + exp(-p[e]));
			sum = 1.0;
		} else {
			for (int64_t e = 0; e < E; e++)
				sum += (p[e] = exp(p[e] - mx));
		}
		for (int64_t e = 0; e < E; e++) {
			p[e] /= sum;
			c[e] = p[e] + b[e]; /* the bias only chooses */
			taken[e] = false;
		}
		/* group-limited: each group's score, the topk_group best kept */
		for (int64_t g = 0; g < G; g++) {
			double b1 = -INFINITY, b2 = -INFINITY;
			for (int64_t e = g * per; e < (g + 1) * per; e++) {
				if (c[e] > b1) {
					b2 = b1;
					b1 = c[e];
				} else if (c[e] > b2) {
					b2 = c[e];
				}
			}
			gs[g] = mo->group_max || per < 2 ? b1 : b1 + b2;
			keep[g] = G == 1;
		}
		for (int64_t k = 0; G > 1 && k < mo->topk_group; k++) {
			int64_t best = -1;
			for (int64_t g = 0; g < G; g++)
				if (!keep[g] && (best < 0 || gs[g] > gs[best]))
					best = g;
			keep[best] = true;
		}
		for (int64_t k = 0; k < K; k++) {
			int64_t best = -1;
			for (int64_t e = 0; e < E; e++)
				if (!taken[e] && keep[e / per] && (best < 0 || c[e] > c[best]))
					best = e;
			taken[best] = true;
			sel[t * K + k] = best;
		}
		const int64_t *use = force ? force + t * K : sel + t * K;
		double d = force ? moe_gap(c, sel + t * K, use, K) : 0;
		if (gap && d > gap->gap) {
			gap->gap = d;
			gap->tok = t;
		}
		for (int64_t k = 0; k < K; k++) {
			w[t * K + k] = p[use[k]];
			ks += w[t * K + k];
		}
		for (int64_t k = 0; k < K; k++)
			w[t * K + k] = (mo->renorm ? w[t * K + k] / ks : w[t * K + k]) * mo->scale;
	}
out:
	free(rb);
	free(W);
	free(p);
	free(c);
	free(b);
	free(gs);
	free(keep);
	free(taken);
	return ret;
}

int tpc__moe_shared_gate(vrun *R, const tpc_vmoe *mo, int rt, const double *x, int64_t T, int64_t H, double *g)
{
	vloc L;
	tpc__loc_of(R, mo->shared_gate, rt, &L);
	double *W = malloc(sizeof(double) * (size_t)(H + 1));
	int ret = W ? tpc__load_d(&R->xd, L.ck, L.t, W) : tpc_err_nomem(R->e);
	for (int64_t t = 0; !ret && t < T; t++) {
		double a = 0;
		for (int64_t h = 0; h < H; h++)
			a += x[t * H + h] * W[h];
		g[t] = 1.0 / (1.0 + exp(-a));
	}
	free(W);
	return ret;
}

#define MOE_BODY(R_T, S, CTX)                                                                                       \
	int tpc__moe_apply_##S(vrun *R, const tpc_vmoe *mo, int t, const R_T *x, int64_t T, int64_t H,            \
			       const int64_t *sel, const double *w, const double *g, R_T *y)                        \
	{                                                                                                         \
		int64_t K = mo->top_k;                                                                            \
		int ret = 0;                                                                                      \
		char msg[256];                                                                                    \
		R_T *xe = malloc(sizeof(R_T) * (size_t)(T * H + 1)), *ye = malloc(sizeof(R_T) * (size_t)(T * H + 1)); \
		int64_t *ix = malloc(sizeof(int64_t) * (size_t)(T + 1));                                          \
		double *wx = malloc(sizeof(double) * (size_t)(T + 1));                                            \
		if (!xe || !ye || !ix || !wx) {                                                                   \
			ret = tpc_err_nomem(R->e);                                                                \
			goto out;                                                                                 \
		}                                                                                                 \
		memset(y, 0, sizeof(R_T) * (size_t)(T * H));                                                      \
		for (int64_t e = 0; e <= mo->nexp && !ret; e++) {                                                 \
			const tpc_vmlp *p = e < mo->nexp ? &mo->exp[e] : &mo->shared;                             \
			int64_t n = 0;                                                                            \
			if (e == mo->nexp && p->down < 0)                                                         \
				break;                                                                            \
			for (int64_t tok = 0; tok < T; tok++)                                                     \
				for (int64_t k = 0; k < K; k++)                                                   \
					if (e == mo->nexp ? k == 0 : sel[tok * K + k] == e) {                     \
						ix[n] = tok;                                                      \
						wx[n++] = e == mo->nexp ? (g ? g[tok] : 1.0) : w[tok * K + k];    \
					}                                                                         \
			if (!n)                                                                                   \
				continue; /* no token chose it: the same on every rank */                         \
			vmlp_loc m;                                                                               \
			const tpc_vtensor *dv = &R->s->t[p->down];                                                \
			if (t >= 0 && !tpc_vtensor_holds(dv, R->tp, t)) {                                         \
				/* another EP group's expert: zeros into its all-reduce */                        \
				memset(ye, 0, sizeof(R_T) * (size_t)(n * H));                                     \
				ret = tpc_coll_allreduce(R->c, ye, (size_t)(n * H),                              \
							 sizeof(R_T) == 4 ? TPC_F32 : TPC_F64, R->e);             \
			} else if (!tpc__mlp_loc_of(R, p, t, &m, msg, sizeof(msg))) {                                  \
				ret = tpc_err_set(R->e, TPC_EINPUT, "%s", msg);                                   \
			} else {                                                                                  \
				for (int64_t j = 0; j < n; j++)                                                   \
					memcpy(xe + j * H, x + ix[j] * H, sizeof(R_T) * (size_t)H);               \
				for (int64_t j = 0; mo->scale_input && e < mo->nexp && j < n; j++)               \
					for (int64_t h = 0; h < H; h++) /* Llama 4: the weight on the input */    \
						xe[j * H + h] *= (R_T)wx[j];                                      \
				bool mu = (CTX)->mute; /* a data-parallel rank computes its experts */             \
				(CTX)->mute = false;                                                              \
				ret = tpc__mlp_##S(CTX, &m, n, H, xe, ye);                                        \
				(CTX)->mute = mu;                                                                 \
			}                                                                                         \
			if (!ret && t >= 0 && dv->ep > 1) /* the group's output, bias once, to every rank */     \
				ret = tpc_coll_bcast(R->c, ye, sizeof(R_T) * (size_t)(n * H),                     \
						     tpc_vtensor_root(dv, R->tp), R->e);                          \
			if (ret)                                                                                  \
				break;                                                                            \
			for (int64_t j = 0; j < n; j++) {                                                         \
				R_T wj = mo->scale_input && e < mo->nexp ? (R_T)1 : (R_T)wx[j];                   \
				for (int64_t h = 0; h < H; h++)                                                   \
					y[ix[j] * H + h] += wj * ye[j * H + h];                                   \
			}                                                                                         \
		}                                                                                                 \
	out:                                                                                                      \
		free(xe);                                                                                         \
		free(ye);                                                                                         \
		free(ix);                                                                                         \
		free(wx);                                                                                         \
		return ret;                                                                                       \
	}
MOE_BODY(float, f, &R->xf)
MOE_BODY(double, d, &R->xd)

bool tpc__moe_ok(const vrun *R, const tpc_vmoe *mo, char *msg, size_t n)
{
	vmlp_loc m;
	bool ok = tpc__rank_ok(R, mo->router, R->me, msg, n) &&
		  (mo->shared_gate < 0 || tpc__rank_ok(R, mo->shared_gate, R->me, msg, n)) &&
		  (mo->score_bias < 0 || tpc__rank_ok(R, mo->score_bias, R->me, msg, n));
	for (int64_t e = 0; e <= mo->nexp && ok; e++) {
		const tpc_vmlp *p = e < mo->nexp ? &mo->exp[e] : &mo->shared;
		if (p->down >= 0 && tpc_vtensor_holds(&R->s->t[p->down], R->tp, R->me))
			ok = tpc__mlp_loc_of(R, p, R->me, &m, msg, n);
	}
	return ok;
}

/* The MoE block of layer ly, tensor-parallel inside every expert, against
 * the unsplit block in fp64. */
int tpc__check_moe(vrun *R, const tpc_vlayer *ly)
{
	const tpc_vmoe *mo = &ly->moe;
	tpc_vresult res;
	char name[TPC_ERR_NAME_MAX], msg[sizeof(res.msg)] = "";
	int ret = 0, me = R->me;
	bool failed = false, ok = true;
	int64_t T = R->T, H = R->s->model->hidden, K = mo->top_k;
	snprintf(name, sizeof(name), "%s.moe", ly->name);
	tpc__res_init(R, &res, TPC_VC_MLP, name, block_dtype(R, mo->exp[0].down));
	ok = tpc__moe_ok(R, mo, msg, sizeof(msg));
	if (!ok)
		tpc__res_fail(&res, "%s", msg);
	if ((ret = tpc__exchange(R, &res, false, &failed)) || failed)
		return ret;
	float *x, *y;
	double *xd, *yr, *w, *g = NULL;
	int64_t *sel;
	if (!VNEW(R, x, T * H) || !VNEW(R, y, T * H) || !VNEW(R, xd, T * H) || !VNEW(R, w, T * K) ||
	    !VNEW(R, sel, T * K) || (mo->shared_gate >= 0 && !VNEW(R, g, T))) {
		ret = tpc_err_nomem(R->e);
		goto done;
	}
	uint64_t stream = tpc_verify_stream(name, TPC_VC_MLP);
	tpc__seeded_f(x, T, H, H, 0, R->o->seed, stream);
	tpc__seeded_d(xd, T, H, R->o->seed, stream);
	if ((ret = tpc__moe_route(R, mo, -1, xd, T, H, NULL, sel, w, NULL)) ||
	    (g && (ret = tpc__moe_shared_gate(R, mo, -1, xd, T, H, g))) ||
	    (ret = tpc__moe_apply_f(R, mo, me, x, T, H, sel, w, g, y)))
		goto done;
	if (me == 0) {
		if ((ret = tpc__ref_begin(R, &res, y, (size_t)(T * H), &yr, (size_t)(T * H))))
			goto done;
		R->xd.score_max = 0;
		if ((ret = tpc__moe_apply_d(R, mo, -1, xd, T, H, sel, w, g, yr)))
			goto done;
		cmp_block(&res, yr, y, (size_t)(T * H), "outputs of the mixture of experts");
	}
done:
	return tpc__finish(R, &res, ret);
}
