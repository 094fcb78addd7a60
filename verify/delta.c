/* delta.c - a gated DeltaNet (tpc_vdelta: Qwen3-Next's linear_attention
 * layers) for the attention block and model checks: its local views on a
 * rank and the fp32 and fp64 instances of delta.inc. A rank holds whole key
 * head groups g0 .. g0 + g - 1 (vLLM's split): their rows of in_proj_qkvz
 * and in_proj_ba (or, flat, their heads of in_proj_qkv, in_proj_z,
 * in_proj_b, in_proj_a), their q, k and v channels of conv1d, their value
 * heads' dt_bias and A_log and out_proj columns; the gated norm whole. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"
#include "vint.h"

#define TPC_CAT2(a, b) a##_##b
#define TPC_CAT(a, b) TPC_CAT2(a, b)

/* Part k of l holds rows [g0 * per, (g0 + g) * per) of its part (whole when
 * l is replicated: every group, g the count) */
static bool holds(const vloc *l, int k, int64_t per, int64_t g0, int64_t g, int64_t whole_rows)
{
	if (l->dim < 0)
		return g0 == 0 && per * g == whole_rows;
	return k < l->nparts && l->replicas[k] == 1 && l->len[k] == g * per && l->start[k] == g0 * per &&
	       l->start[k] + l->len[k] <= l->size[k];
}

/* Both forms' out_proj (row-parallel), gated norm (replicated), conv1d,
 * dt_bias and A_log (the rank's own): placed for rank t (-1: the unsplit
 * reference), then located. */
static bool shared_ok(const vrun *R, const tpc_vattn *at, int t, char *msg, size_t n)
{
	const tpc_vdelta *p = &at->dn;
	return tpc__part_ok(R, at->o, true, "DeltaNet out_proj", msg, n) && tpc__repl_ok(R, p->norm, "DeltaNet norm", msg, n) &&
	       tpc__rank_ok(R, p->conv, t, msg, n) && tpc__rank_ok(R, p->dt, t, msg, n) && tpc__rank_ok(R, p->a_log, t, msg, n);
}

static void shared_loc(const vrun *R, const tpc_vattn *at, int t, vdelta_loc *d)
{
	const tpc_vdelta *p = &at->dn;
	tpc__lin_of(R, at->o, t, true, &d->o);
	tpc__loc_of(R, p->conv, t, &d->conv);
	tpc__loc_of(R, p->dt, t, &d->dt);
	tpc__loc_of(R, p->a_log, t, &d->a_log);
	tpc__loc_of(R, p->norm, t, &d->norm);
}

/* The tensors both forms share, for the key head groups d->g0.. the rank
 * computes: conv1d's q, k and v channels, the value heads of dt_bias and
 * A_log, out_proj's input columns. The name of the first that does not hold
 * them, else NULL. */
static const char *shared_bad(const vrun *R, const tpc_vattn *at, const vdelta_loc *d)
{
	const tpc_vdelta *p = &at->dn;
	int64_t r = p->nv / p->nk, V = r * p->dv;
	if (d->conv.dim >= 0 ? d->conv.dim != 0 || d->conv.nparts != 3 || !holds(&d->conv, 0, p->dk, d->g0, d->g, 0) ||
				       !holds(&d->conv, 1, p->dk, d->g0, d->g, 0) || !holds(&d->conv, 2, V, d->g0, d->g, 0)
			     : d->g0 != 0 || d->g != p->nk)
		return R->s->t[p->conv].name;
	if (!holds(&d->dt, 0, r, d->g0, d->g, p->nv))
		return R->s->t[p->dt].name;
	if (!holds(&d->a_log, 0, r, d->g0, d->g, p->nv))
		return R->s->t[p->a_log].name;
	if (!holds(&d->o.w, 0, V, d->g0, d->g, p->nv * p->dv))
		return R->s->t[at->o].name;
	return NULL;
}

static bool loc_fail(char *msg, size_t n, int t, const char *bad, const vdelta_loc *d, const char *what)
{
	snprintf(msg, n, "rank %d: DeltaNet '%s' must hold the key head groups %lld..%lld the rank computes (%s)", t, bad,
		 (long long)d->g0, (long long)(d->g0 + d->g - 1), what);
	return false;
}

/* The key-head groups a rank holds, from the rows of q, a tensor of W rows
 * per group held whole (d->g from d->g0 on): false when its part is not
 * whole groups of one piece. */
static bool key_groups(const vloc *q, int64_t W, vdelta_loc *d)
{
	int64_t len = q->dim >= 0 ? q->len[0] : q->t->shape[q->transposed ? 1 : 0], start = q->dim >= 0 ? q->start[0] : 0;
	d->g = len / W;
	d->g0 = start / W;
	return !(len % W || start % W || d->g < 1 || (q->dim >= 0 && (q->nparts != 1 || q->replicas[0] != 1)));
}

/* The flat projections (Qwen3.5): in_proj_qkv's [q | k | v] each by heads
 * (3 parts), in_proj_z, in_proj_b, in_proj_a by value heads; the rank's
 * key head groups g0 .. g0 + g - 1 from in_proj_z's rows */
static bool flat_loc_of(const vrun *R, const tpc_vattn *at, int t, vdelta_loc *d, char *msg, size_t n)
{
	const tpc_vdelta *p = &at->dn;
	if (t >= 0 && (!tpc__part_ok(R, p->qkv, false, "DeltaNet in_proj_qkv", msg, n) ||
		       !tpc__part_ok(R, p->z, false, "DeltaNet in_proj_z", msg, n) ||
		       !tpc__part_ok(R, p->b, false, "DeltaNet in_proj_b", msg, n) ||
		       !tpc__part_ok(R, p->a, false, "DeltaNet in_proj_a", msg, n) || !shared_ok(R, at, t, msg, n)))
		return false;
	tpc__lin_of(R, p->qkv, t, false, &d->qkv);
	tpc__lin_of(R, p->z, t, false, &d->z);
	tpc__lin_of(R, p->b, t, false, &d->b);
	tpc__lin_of(R, p->a, t, false, &d->a);
	shared_loc(R, at, t, d);
	int64_t r = p->nv / p->nk, V = r * p->dv;
	const vloc *q = &d->qkv.w;
	const char *bad = NULL;
	if (!key_groups(&d->z.w, V, d))
		bad = R->s->t[p->z].name;
	else if (q->dim >= 0 ? q->nparts != 3 || !holds(q, 0, p->dk, d->g0, d->g, 0) || !holds(q, 1, p->dk, d->g0, d->g, 0) ||
				       !holds(q, 2, V, d->g0, d->g, 0)
			     : d->g0 != 0 || d->g != p->nk)
		bad = R->s->t[p->qkv].name;
	else if (!holds(&d->b.w, 0, r, d->g0, d->g, p->nv))
		bad = R->s->t[p->b].name;
	else if (!holds(&d->a.w, 0, r, d->g0, d->g, p->nv))
		bad = R->s->t[p->a].name;
	else
		bad = shared_bad(R, at, d);
	return bad ? loc_fail(msg, n, t, bad, d, "their q, k and v heads of in_proj_qkv and conv1d, value heads of in_proj_z, in_proj_b, in_proj_a, dt_bias, A_log and out_proj")
		   : true;
}

bool tpc__delta_loc_of(const vrun *R, const tpc_vlayer *ly, int t, vdelta_loc *d, char *msg, size_t n)
{
	const tpc_vattn *at = &ly->attn;
	const tpc_vdelta *p = &at->dn;
	memset(d, 0, sizeof(*d));
	d->p = p;
	if (p->flat)
		return flat_loc_of(R, at, t, d, msg, n);
	if (t >= 0 && (!tpc__part_ok(R, p->qkvz, false, "DeltaNet in_proj_qkvz", msg, n) ||
		       !tpc__part_ok(R, p->ba, false, "DeltaNet in_proj_ba", msg, n) || !shared_ok(R, at, t, msg, n)))
		return false;
	tpc__lin_of(R, p->qkvz, t, false, &d->qkvz);
	tpc__lin_of(R, p->ba, t, false, &d->ba);
	shared_loc(R, at, t, d);
	int64_t r = p->nv / p->nk;
	const char *bad = NULL;
	if (!key_groups(&d->qkvz.w, 2 * p->dk + 2 * r * p->dv, d))
		bad = R->s->t[p->qkvz].name;
	else if (!holds(&d->ba.w, 0, 2 * r, d->g0, d->g, 2 * p->nv))
		bad = R->s->t[p->ba].name;
	else
		bad = shared_bad(R, at, d);
	return bad ? loc_fail(msg, n, t, bad, d, "whole [q k v z] groups of in_proj_qkvz, [b a] of in_proj_ba, q/k/v channels of conv1d, value heads of dt_bias, A_log and out_proj")
		   : true;
}

#define R float
#define S f
#define REXP expf
#define RLOG1P log1pf
#define RSQRT sqrtf
#include "delta.inc"
#undef R
#undef S
#undef REXP
#undef RLOG1P
#undef RSQRT

#define R double
#define S d
#define REXP exp
#define RLOG1P log1p
#define RSQRT sqrt
#include "delta.inc"
