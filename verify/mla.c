/* mla.c - DeepSeek-V2/V3 multi-head latent attention (tpc_vmla) for the
 * attention block and model checks: its local views on a rank and the fp32
 * and fp64 instances of mla.inc (the rotary frequencies, plain or yarn, are
 * tpc__rope_freqs'). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"
#include "vint.h"

#define TPC_CAT2(a, b) a##_##b
#define TPC_CAT(a, b) TPC_CAT2(a, b)

/* One rank's heads: q_b (q_proj) and kv_b rows, o columns, the same heads
 * and nothing padded. */
static bool heads_of(const tpc_vmla *p, int t, vmla_loc *a, char *msg, size_t n)
{
	const vlin *q = a->q.w.t ? &a->q : &a->q_b;
	int64_t dq = p->nope + p->rope, dkv = p->nope + p->v_dim;
	const vloc *w[3] = {&q->w, &a->kv_b.w, &a->o.w};
	const int64_t per[3] = {dq, dkv, p->v_dim};
	for (int k = 0; k < 3; k++) {
		const vloc *l = w[k];
		/* a replicated tensor: every head (o: its input features) */
		int64_t len = l->dim >= 0 ? l->len[0] : l->t->shape[(k == 2) ^ l->transposed ? 1 : 0];
		int64_t start = l->dim >= 0 ? l->start[0] : 0, size = l->dim >= 0 ? l->size[0] : len;
		bool whole = len % per[k] == 0 && start % per[k] == 0;
		int64_t nh = len / per[k], h0 = start / per[k];
		if (k == 0) {
			a->nh = nh;
			a->h0 = h0;
		}
		if (l->nparts != 1 || l->replicas[0] != 1 || start + len > size || !whole ||
		    nh != a->nh || h0 != a->h0 || nh < 1) {
			snprintf(msg, n, "rank %d: MLA '%s' must hold whole heads %lld..%lld of %lld rows each (as q_b_proj / q_proj)",
				 t, l->name, (long long)a->h0, (long long)(a->h0 + a->nh - 1), (long long)per[k]);
			return false;
		}
	}
	return true;
}

bool tpc__mla_loc_of(const vrun *R, const tpc_vlayer *ly, int t, vmla_loc *a, char *msg, size_t n)
{
	const tpc_vattn *at = &ly->attn;
	const tpc_vmla *p = &at->lat;
	bool lora = p->q_proj < 0;
	memset(a, 0, sizeof(*a));
	a->p = p;
	a->eps = R->s->model->norm_eps;
	a->theta = at->rope_theta > 0 ? at->rope_theta : 10000.0;
	if (t >= 0) {
		bool ok = lora ? tpc__repl_ok(R, p->q_a, "MLA q_a_proj", msg, n) &&
					 tpc__repl_ok(R, p->q_a_norm, "MLA q_a_layernorm", msg, n) &&
					 tpc__part_ok(R, p->q_b, false, "MLA q_b_proj", msg, n)
			       : tpc__part_ok(R, p->q_proj, false, "MLA q_proj", msg, n);
		if (!ok || !tpc__repl_ok(R, p->kv_a, "MLA kv_a_proj_with_mqa", msg, n) ||
		    !tpc__repl_ok(R, p->kv_a_norm, "MLA kv_a_layernorm", msg, n) ||
		    !tpc__part_ok(R, p->kv_b, false, "MLA kv_b_proj", msg, n) ||
		    !tpc__part_ok(R, at->o, true, "MLA o_proj", msg, n))
			return false;
	}
	if (lora) {
		tpc__lin_of(R, p->q_a, t, false, &a->q_a);
		tpc__loc_of(R, p->q_a_norm, t, &a->q_an);
		tpc__lin_of(R, p->q_b, t, false, &a->q_b);
	} else {
		tpc__lin_of(R, p->q_proj, t, false, &a->q);
	}
	tpc__lin_of(R, p->kv_a, t, false, &a->kv_a);
	tpc__loc_of(R, p->kv_a_norm, t, &a->kv_an);
	tpc__lin_of(R, p->kv_b, t, false, &a->kv_b);
	tpc__lin_of(R, at->o, t, true, &a->o);
	return heads_of(p, t, a, msg, n);
}

#define R float
#define S f
#define REXP expf
#include "mla.inc"
#undef R
#undef S
#undef REXP

#define R double
#define S d
#define REXP exp
#include "mla.inc"
