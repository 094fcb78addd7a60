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
 * After each layer (the next call, or the one after the last layer) the split
 * side gathers its column-parallel outputs to rank 0 and the reference side
 * compares them with its own as the checks do (tpc__col_cmp, tpc__row_cmp,
 * tpc__block_cmp), keeping the results only; the checks then run in their
 * usual order and report those (check_layers.c, check_blocks.c).
 *
 * Each row of a product is computed as it would be alone, up to the
 * summation order OpenBLAS picks for the product's size, so digests may
 * differ from a run without the pass; the thread count and the backend
 * still change no bit. What stays between the split side and the reference
 * is rank 0's split outputs of every check ([T, out] floats per weight).
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
	uint8_t *state;    /* [n] tensor i's layer check: 0 not in the pass, 1 split side done, 2 compared */
	tpc_vresult *res;  /* rank 0: [n] its result */
	float **y;         /* [n] the split output until compared: col: this rank's [T, nl], then rank 0's
			      gathered [tp][T, nl]; row: rank 0's reduced [T, out] */
	double **yr;       /* [n] rank 0: the unsplit layer's, until compared */
	bool *bdone;       /* [2 * nl] the layers' attn and mlp blocks computed */
	tpc_vresult *bres; /* rank 0: [2 * nl] their results */
	float *by;         /* rank 0: [2 * nl][T * H] the split blocks' outputs */
	double *byr;       /* rank 0: [2][T * H] the current layer's unsplit blocks' */
	double bsmax;      /* the current layer's unsplit attention block's score_max */
	double smax;       /* the split side's, unused */
	int64_t pend[16];  /* the current layer's tensors in the pass */
	int npend;
	int64_t layer;     /* the current layer (-1: none) */
	void **tmp;        /* the current layer's inputs and unused outputs */
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
	free(P->state);
	free(P->res);
	free(P->y);
	free(P->yr);
	free(P->bdone);
	free(P->bres);
	free(P->by);
	free(P->byr);
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
	    d->moe || d->mla || d->delta || R->s->dp > 1)
		return false;
	for (int64_t l = 0; l < d->nlayers; l++) {
		const tpc_vlayer *ly = &d->layers[l];
		if (ly->moe.exp || ly->attn.mla || ly->attn.delta || ly->attn.kv_width || ly->attn.o < 0 || ly->mlp.down < 0 ||
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
	P->layer = -1;
	P->state = tpc_calloc(n + 1, sizeof(*P->state));
	P->y = tpc_calloc(n + 1, sizeof(*P->y));
	P->yr = tpc_calloc(n + 1, sizeof(*P->yr));
	P->bdone = tpc_calloc(2 * nl + 1, sizeof(*P->bdone));
	if (R->me == 0) {
		P->res = tpc_calloc(n + 1, sizeof(*P->res));
		P->bres = tpc_calloc(2 * nl + 1, sizeof(*P->bres));
		P->by = tpc_calloc(2 * nl * th + 1, sizeof(*P->by));
		P->byr = tpc_calloc(2 * th + 1, sizeof(*P->byr));
	}
	if (!P->state || !P->y || !P->yr || !P->bdone || (R->me == 0 && (!P->res || !P->bres || !P->by || !P->byr))) {
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
	    (mk == MK_COL && v->split == TPC_VSPLIT_VOCAB) || P->state[i] != (dbl ? 1 : 0) ||
	    P->npend == (int)(sizeof(P->pend) / sizeof(P->pend[0])))
		return 0;
	int64_t T = R->T, in = v->ref->shape[v->transposed ? 0 : 1], out = v->ref->shape[v->transposed ? 1 : 0];
	int64_t nl = tpc_vtensor_local_dim(v, R->tp);
	uint64_t stream = tpc_verify_stream(v->name, mk == MK_COL ? TPC_VC_COL : TPC_VC_ROW);
	P->pend[P->npend++] = i;
	P->state[i]++;
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
	return 0;
}

/* A block check's seeded input and where its output goes. */
static int block_rows(vrun *R, const tpc_vlayer *ly, int64_t l, tpc_vcheck kind, bool dbl, const void **x, void **y)
{
	vpass *P = R->pass;
	char name[TPC_ERR_NAME_MAX];
	tpc_vresult scratch;
	int64_t T = R->T, H = R->s->model->hidden, k = kind == TPC_VC_MLP;
	size_t th = (size_t)(T * H);
	tpc__block_open(R, ly, kind, &scratch, name, sizeof(name));
	uint64_t stream = tpc_verify_stream(name, kind);
	void *in = tmp_new(P, (dbl ? sizeof(double) : sizeof(float)) * th);
	if (!in)
		return tpc_err_nomem(R->e);
	if (dbl) {
		tpc__seeded_d(in, T, H, R->o->seed, stream);
		*y = P->byr + (size_t)k * th;
	} else {
		tpc__seeded_f(in, T, H, H, 0, R->o->seed, stream);
		*y = R->me == 0 ? (void *)(P->by + (size_t)(2 * l + k) * th) : tmp_new(P, sizeof(float) * th);
		P->bdone[2 * l + k] = true;
	}
	*x = in;
	return *y ? 0 : tpc_err_nomem(R->e);
}

/* The split side after a layer: the column-parallel outputs gathered on
 * rank 0 (every rank takes part, in the same order). */
static int gather(vrun *R)
{
	vpass *P = R->pass;
	int ret = 0;
	for (int k = 0; k < P->npend && !ret; k++) {
		int64_t i = P->pend[k];
		const tpc_vtensor *v = &R->s->t[i];
		if (tpc__math_kind(v) != MK_COL)
			continue;
		size_t n = (size_t)(R->T * tpc_vtensor_local_dim(v, R->tp));
		float *Y = malloc(sizeof(float) * (n * (size_t)R->tp + 1));
		ret = Y ? tpc_coll_allgather(R->c, P->y[i], sizeof(float) * n, Y, R->e) : tpc_err_nomem(R->e);
		free(P->y[i]);
		P->y[i] = NULL;
		if (R->me == 0)
			P->y[i] = Y;
		else
			free(Y);
	}
	return ret;
}

/* The reference side after a layer (rank 0): every check of the layer
 * compared as the check would, the results kept and the outputs freed. */
static void compare(vrun *R)
{
	vpass *P = R->pass;
	int64_t T = R->T, H = R->s->model->hidden;
	for (int k = 0; k < P->npend; k++) {
		int64_t i = P->pend[k];
		const tpc_vtensor *v = &R->s->t[i];
		bool col = tpc__math_kind(v) == MK_COL;
		int64_t n = T * (col ? tpc_vtensor_local_dim(v, R->tp) * R->tp : v->ref->shape[v->transposed ? 1 : 0]);
		tpc_vresult *res = &P->res[i];
		tpc__res_init(R, res, col ? TPC_VC_COL : TPC_VC_ROW, v->name, v->ref->src_dtype);
		res->digest = tpc__digest_f(P->y[i], (size_t)n);
		if (col)
			tpc__col_cmp(R, i, res, P->y[i], P->yr[i]);
		else
			tpc__row_cmp(R, i, res, P->y[i], P->yr[i]);
		free(P->y[i]);
		free(P->yr[i]);
		P->y[i] = NULL;
		P->yr[i] = NULL;
	}
	for (int k = 0; k < 2; k++) {
		char name[TPC_ERR_NAME_MAX];
		int64_t b = 2 * P->layer + k;
		tpc_vresult *res = &P->bres[b];
		const float *y = P->by + b * T * H;
		tpc__block_open(R, &R->s->model->layers[P->layer], k ? TPC_VC_MLP : TPC_VC_ATTN, res, name, sizeof(name));
		res->digest = tpc__digest_f(y, (size_t)(T * H));
		tpc__block_cmp(R, res, y, P->byr + k * T * H, k ? 0 : P->bsmax);
	}
}

int tpc__pass_stack(vrun *R, int64_t l, bool dbl, vlayer_loc *L, vstack *st)
{
	vpass *P = R->pass;
	int ret = 0;
	if (P->layer >= 0) { /* the layer before is done */
		if (dbl)
			compare(R);
		else
			ret = gather(R);
	}
	tmp_free(P);
	P->npend = 0;
	P->layer = -1;
	if (ret || l >= R->s->model->nlayers) /* after the last layer */
		return ret;
	P->layer = l;
	P->bsmax = 0;
	const tpc_vlayer *ly = &R->s->model->layers[l];
	const tpc_vattn *a = &ly->attn;
	const tpc_vmlp *m = &ly->mlp;
	st->smax = dbl ? &P->bsmax : &P->smax;
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

bool tpc__pass_result(const vrun *R, int64_t i, tpc_vresult *res)
{
	const vpass *P = R->pass;
	if (!P || !P->state[i])
		return false;
	if (P->res)
		*res = P->res[i];
	return true;
}

bool tpc__pass_block(const vrun *R, int64_t l, tpc_vcheck kind, tpc_vresult *res)
{
	const vpass *P = R->pass;
	int64_t b = 2 * l + (kind == TPC_VC_MLP);
	if (!P || !P->bdone[b])
		return false;
	if (P->bres)
		*res = P->bres[b];
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
