/* check_pass.c - the single pass: a dense model's layer and block checks
 * computed inside the model check's forward, so that every weight of its
 * layers is read (and on the reference side widened to fp64) once, not once
 * per check.
 *
 * Before each layer of the forward (the split run on every rank, then the
 * fp64 reference on rank 0), tpc__pass_stack gives the layer:
 *   - the block checks' seeded inputs, which run as a second sequence beside
 *     the model's tokens through the same attention and MLP calls
 *     (vstack: [block rows; model rows] in every product);
 *   - each split weight's layer check input as probe rows of its linear layer
 *     (vlin.pin: [probe rows; block rows; model rows] in one product).
 * Their outputs are kept here; the checks then run in their usual order and
 * take them instead of computing (check_layers.c, check_blocks.c), compare
 * and report as always. Each row of a product is computed as it would be
 * alone up to the summation order OpenBLAS picks for the product's size, so
 * digests may differ from a run without the pass; the thread count and the
 * backend still change no bit.
 *
 * The pass runs when every rank can: all numeric checks asked for, on the
 * CPU, a LLaMA- or GPT-2-shaped model (no mixture of experts, MLA, cross-
 * attention, GPT-NeoX or BERT layers, which keep their own passes) whose
 * model check is ready on every rank. Otherwise nothing changes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"
#include "vint.h"

struct vpass {
	bool *done;      /* [n] tensor i's layer check computed on the split side */
	float **y;       /* [n] col: this rank's [T, nl]; row: rank 0's reduced [T, out] */
	double **yr;     /* [n] rank 0: the unsplit layer's [T, out] */
	bool *bdone;     /* [2 * nl] the layers' attn and mlp blocks computed */
	float *by;       /* rank 0: [2 * nl][T * H] the split blocks' outputs */
	double *byr;     /* rank 0: the unsplit blocks' */
	double *bsmax;   /* rank 0: [nl] the unsplit attention blocks' score_max */
	double smax;     /* the split side's, unused */
	void **tmp;      /* the current layer's inputs and unused outputs */
	size_t ntmp, tmp_cap;
	tpc_vresult model; /* the model check's result, reported in its place */
	bool model_done;
};

static void tmp_free(vpass *P)
{
	while (P->ntmp > 0)
		free(P->tmp[--P->ntmp]);
}

static void *tmp_new(vpass *P, size_t bytes)
{
	if (tpc_grow((void **)&P->tmp, &P->tmp_cap, P->ntmp + 1, sizeof(*P->tmp)))
		return NULL;
	void *p = malloc(bytes ? bytes : 1);
	if (p)
		P->tmp[P->ntmp++] = p;
	return p;
}

void tpc__pass_end(vrun *R)
{
	vpass *P = R->pass;
	if (!P)
		return;
	for (size_t i = 0; i < R->s->n; i++) {
		free(P->y[i]);
		free(P->yr[i]);
	}
	tmp_free(P);
	free(P->tmp);
	free(P->done);
	free(P->y);
	free(P->yr);
	free(P->bdone);
	free(P->by);
	free(P->byr);
	free(P->bsmax);
	free(P);
	R->pass = NULL;
}

/* Can this rank run the pass? */
static bool pass_fits(const vrun *R)
{
	const tpc_vmodel *d = R->s->model;
	unsigned need = TPC_VCHECK_LAYERS | TPC_VCHECK_BLOCKS | TPC_VCHECK_MODEL;
	unsigned checks = R->o->checks ? R->o->checks : TPC_VCHECK_ALL;
	if (!d || (checks & need) != need || R->xf.gpu || (d->arch != TPC_VARCH_LLAMA && d->arch != TPC_VARCH_GPT2) ||
	    d->moe || d->mla)
		return false;
	for (int64_t l = 0; l < d->nlayers; l++) {
		const tpc_vlayer *ly = &d->layers[l];
		if (ly->moe.exp || ly->attn.mla || ly->attn.kv_width || ly->attn.o < 0 || ly->mlp.down < 0 ||
		    (ly->hidden && ly->hidden != d->hidden))
			return false;
	}
	vmodel_loc m;
	char msg[256];
	bool ok = tpc__model_loc_of(R, R->me, &m, msg, sizeof(msg)) && !m.form;
	free(m.L);
	return ok;
}

int tpc__pass_begin(vrun *R)
{
	uint8_t ok = pass_fits(R), *all = tpc_calloc((size_t)R->tp, 1);
	int ret = all ? tpc_coll_allgather(R->c, &ok, 1, all, R->e) : tpc_err_nomem(R->e);
	for (int r = 0; !ret && r < R->tp; r++)
		ok = ok && all[r];
	free(all);
	if (ret || !ok)
		return ret;
	size_t n = R->s->n, nl = (size_t)R->s->model->nlayers, th = (size_t)(R->T * R->s->model->hidden);
	vpass *P = R->pass = tpc_calloc(1, sizeof(*P));
	if (!P)
		return tpc_err_nomem(R->e);
	P->done = tpc_calloc(n + 1, sizeof(*P->done));
	P->y = tpc_calloc(n + 1, sizeof(*P->y));
	P->yr = tpc_calloc(n + 1, sizeof(*P->yr));
	P->bdone = tpc_calloc(2 * nl + 1, sizeof(*P->bdone));
	if (R->me == 0) {
		P->by = tpc_calloc(2 * nl * th + 1, sizeof(*P->by));
		P->byr = tpc_calloc(2 * nl * th + 1, sizeof(*P->byr));
		P->bsmax = tpc_calloc(nl + 1, sizeof(*P->bsmax));
	}
	if (!P->done || !P->y || !P->yr || !P->bdone || (R->me == 0 && (!P->by || !P->byr || !P->bsmax))) {
		tpc__pass_end(R);
		return tpc_err_nomem(R->e);
	}
	return 0;
}

/* Tensor i's layer check as probe rows of its linear layer L: its seeded
 * input (this rank's slice for a row-parallel one) and where its output
 * goes. The split side takes the first use of a tensor, the reference the
 * same one. */
static int probe(vrun *R, int64_t i, vlin *L, bool dbl)
{
	vpass *P = R->pass;
	if (i < 0 || !L->w.t)
		return 0;
	const tpc_vtensor *v = &R->s->t[i];
	int mk = tpc__math_kind(v);
	if (!tpc__float_dtype(v->ref->src_dtype) || (mk != MK_COL && mk != MK_ROW) ||
	    (mk == MK_COL && v->split == TPC_VSPLIT_VOCAB) || (dbl ? !P->done[i] || P->yr[i] : P->done[i]))
		return 0;
	int64_t T = R->T, in = v->ref->shape[v->transposed ? 0 : 1], out = v->ref->shape[v->transposed ? 1 : 0];
	int64_t nl = tpc_vtensor_local_dim(v, R->tp);
	uint64_t stream = tpc_verify_stream(v->name, mk == MK_COL ? TPC_VC_COL : TPC_VC_ROW);
	L->pT = T;
	if (dbl) {
		double *x = tmp_new(P, sizeof(double) * (size_t)(T * in));
		L->pout = P->yr[i] = malloc(sizeof(double) * (size_t)(T * out + 1));
		if (!x || !L->pout)
			return tpc_err_nomem(R->e);
		tpc__seeded_d(x, T, in, R->o->seed, stream);
		L->pin = x;
		return 0;
	}
	int64_t w = mk == MK_COL ? in : nl, o = mk == MK_COL ? nl : out;
	float *x = tmp_new(P, sizeof(float) * (size_t)(T * w));
	if (mk == MK_COL || R->me == 0)
		L->pout = P->y[i] = malloc(sizeof(float) * (size_t)(T * o + 1));
	else /* the reduced output only rank 0 compares */
		L->pout = tmp_new(P, sizeof(float) * (size_t)(T * o));
	if (!x || !L->pout)
		return tpc_err_nomem(R->e);
	if (mk == MK_COL)
		tpc__seeded_f(x, T, in, in, 0, R->o->seed, stream);
	else
		tpc__row_input(R, i, &L->w, x);
	L->pin = x;
	P->done[i] = true;
	return 0;
}

/* A block check's seeded input and where its output goes. */
static int block_rows(vrun *R, const tpc_vlayer *ly, int64_t l, tpc_vcheck kind, bool dbl, const void **x, void **y)
{
	vpass *P = R->pass;
	char name[TPC_ERR_NAME_MAX];
	int64_t T = R->T, H = R->s->model->hidden, k = 2 * l + (kind == TPC_VC_MLP);
	size_t th = (size_t)(T * H);
	tpc__block_name(R, ly, kind, name, sizeof(name));
	uint64_t stream = tpc_verify_stream(name, kind);
	void *in = tmp_new(P, (dbl ? sizeof(double) : sizeof(float)) * th);
	if (!in)
		return tpc_err_nomem(R->e);
	if (dbl) {
		tpc__seeded_d(in, T, H, R->o->seed, stream);
		*y = P->byr + (size_t)k * th;
	} else {
		tpc__seeded_f(in, T, H, H, 0, R->o->seed, stream);
		*y = R->me == 0 ? (void *)(P->by + (size_t)k * th) : tmp_new(P, sizeof(float) * th);
		P->bdone[k] = true;
	}
	*x = in;
	return *y ? 0 : tpc_err_nomem(R->e);
}

int tpc__pass_stack(vrun *R, int64_t l, bool dbl, vlayer_loc *L, vstack *st)
{
	vpass *P = R->pass;
	const tpc_vlayer *ly = &R->s->model->layers[l];
	const tpc_vattn *a = &ly->attn;
	const tpc_vmlp *m = &ly->mlp;
	int ret;
	tmp_free(P);
	st->smax = dbl ? &P->bsmax[l] : &P->smax;
	if ((ret = block_rows(R, ly, l, TPC_VC_ATTN, dbl, &st->xa, &st->ya)) ||
	    (ret = block_rows(R, ly, l, TPC_VC_MLP, dbl, &st->xm, &st->ym)))
		return ret;
	if (L->attn.fused)
		ret = probe(R, a->qkv, &L->attn.qkv, dbl);
	else
		(void)((ret = probe(R, a->q, &L->attn.q, dbl)) || (ret = probe(R, a->k, &L->attn.k, dbl)) ||
		       (ret = probe(R, a->v, &L->attn.v, dbl)));
	if (!ret && L->mlp.fused)
		ret = probe(R, m->gate_up, &L->mlp.gate_up, dbl);
	else if (!ret)
		(void)((m->glu && (ret = probe(R, m->gate, &L->mlp.gate, dbl))) || (ret = probe(R, m->up, &L->mlp.up, dbl)));
	if (!ret && !(ret = probe(R, a->o, &L->attn.o, dbl)))
		ret = probe(R, m->down, &L->mlp.down, dbl);
	return ret;
}

const float *tpc__pass_layer(const vrun *R, int64_t i, const double **yr)
{
	const vpass *P = R->pass;
	if (!P || !P->done[i])
		return NULL;
	*yr = P->yr[i];
	return P->y[i] ? P->y[i] : (const float *)"";
}

bool tpc__pass_block(const vrun *R, int64_t l, tpc_vcheck kind, const float **y, const double **yr, double *smax)
{
	const vpass *P = R->pass;
	int64_t k = 2 * l + (kind == TPC_VC_MLP);
	size_t th = (size_t)(R->T * R->s->model->hidden);
	if (!P || !P->bdone[k])
		return false;
	if (P->by) {
		*y = P->by + (size_t)k * th;
		*yr = P->byr + (size_t)k * th;
		*smax = kind == TPC_VC_ATTN ? P->bsmax[l] : 0;
	}
	return true;
}

void tpc__pass_keep_model(vrun *R, const tpc_vresult *res)
{
	R->pass->model = *res;
	R->pass->model_done = true;
}

int tpc__pass_model(vrun *R)
{
	bool failed;
	if (!R->pass->model_done)
		return 0;
	return tpc__exchange(R, &R->pass->model, true, &failed);
}
