/* tpc_mix_pass.c - merge --recipe's passthrough (tpc_mix.h,
 * tpc_mix_passthrough): mergekit's slices stacked into one model, the layers
 * renumbered through the family record's tensor table. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_family.h"
#include "tpc_lora.h"
#include "tpc_mix.h"
#include "tpc_mix_int.h"
#include "tpc_util.h"

/* the embedding side of the model: taken from the first slice's model (plan.py
 * plan_module: pre_weights from slices[0], post_weights from slices[-1]) */
static bool pre_role(tpc_role ro)
{
	return ro == TPC_ROLE_TOKEN_EMBD || ro == TPC_ROLE_POS_EMBD || ro == TPC_ROLE_TOKEN_TYPES || ro == TPC_ROLE_TOKEN_EMBD_NORM;
}

static bool nextn_role(tpc_role ro)
{
	return ro == TPC_ROLE_NEXTN_EH_PROJ || ro == TPC_ROLE_NEXTN_EMBD || ro == TPC_ROLE_NEXTN_ENORM ||
	       ro == TPC_ROLE_NEXTN_HNORM || ro == TPC_ROLE_NEXTN_HEAD || ro == TPC_ROLE_NEXTN_HEAD_NORM;
}

/* Every tensor of input k in f's table (Hugging Face names), outside the
 * MTP layers; *nl: its layer count */
static int pass_layers(const tpc_ckpt *c, const tpc_mix_recipe *r, int k, const tpc_family *f, int64_t *nl, tpc_err *e)
{
	*nl = 0;
	for (size_t i = 0; i < c->n; i++) {
		int64_t layer, expert;
		bool bias;
		const tpc_tensor_row *row = tpc_family_classify(f, TPC_ECO_HF, c->t[i].name, &layer, &expert, &bias);
		if (!row)
			return tpc_err_at(e, TPC_EINPUT, r->model[k], c->t[i].name,
					  "not in the %s record's tensor table: passthrough cannot renumber its layer", f->name);
		if (nextn_role(row->role))
			return tpc_err_at(e, TPC_EINPUT, r->model[k], c->t[i].name,
					  "a next-token-prediction layer (after num_hidden_layers): passthrough does not restack it");
		*nl = layer + 1 > *nl ? layer + 1 : *nl;
	}
	return 0;
}

/* Input k's tensor i added to ck as `name` (prefixed \x01 until the originals
 * go), its scale at layer position t into scale[] (NaN: none) */
static int pass_add(tpc_ckpt *ck, const tpc_ckpt *const *in, int *const *map, const tpc_mix_recipe *r, int P, int k,
		    size_t i, const char *name, const cJSON *params, double t, float *scale, tpc_err *e)
{
	char tmp[1024];
	if (snprintf(tmp, sizeof(tmp), "\x01%s", name) >= (int)sizeof(tmp))
		return tpc_err_at(e, TPC_EINPUT, r->model[k], name, "name too long");
	int64_t j = tpc_ckpt_add_copy(ck, tmp, &in[k]->t[i], e);
	if (j < 0)
		return -1;
	if (k != P)
		tpc__mix_remap(&ck->t[j], map[k]);
	bool found = false;
	double v;
	const cJSON *sv = params ? cJSON_GetObjectItemCaseSensitive(params, "scale") : NULL;
	if (sv)
		tpc__mix_evaluate(sv, name, t, &v, &found);
	if (!found && r->params && (sv = cJSON_GetObjectItemCaseSensitive(r->params, "scale")))
		tpc__mix_evaluate(sv, name, t, &v, &found);
	scale[j] = found ? (float)v : NAN;
	return 0;
}

/* The pre weights, the slices' layers renumbered by f's name templates, the
 * post weights; *scale (ck->n + added) by each added tensor's index. */
static int pass_stack(tpc_ckpt *ck, const tpc_ckpt *const *in, int *const *map, const tpc_mix_recipe *r,
		      const tpc_family *f, size_t n0, float *scale, int64_t *layers, tpc_err *e)
{
	int P = tpc_mix_primary(r), ret = 0;
	int64_t L = 0;
	for (int pass = 0; pass < 3 && !ret; pass++) {
		size_t s0 = pass == 2 ? r->nslices - 1 : 0, s1 = pass == 1 ? r->nslices : s0 + 1;
		for (size_t s = s0; s < s1 && !ret; s++) {
			const struct tpc_mix_slice *sl = &r->slice[s];
			const tpc_ckpt *c = in[sl->input];
			int64_t len = pass == 1 ? sl->b - sl->a : 1;
			for (int64_t idx = 0; idx < len && !ret; idx++, L += pass == 1) {
				double t = pass != 1 ? 0 : len > 1 ? (double)idx / (double)(len - 1) : 1;
				/* the written input's own tensors, not those added to it */
				size_t cn = sl->input == P ? n0 : c->n;
				for (size_t i = 0; i < cn && !ret; i++) {
					int64_t layer, expert;
					bool bias;
					int part;
					char nm[1024];
					const tpc_tensor_row *row = tpc_family_classify(f, TPC_ECO_HF, c->t[i].name, &layer, &expert, &bias);
					if (pass != 1 && (layer >= 0 || pre_role(row->role) != (pass == 0)))
						continue;
					if (pass == 1 && layer != sl->a + idx)
						continue;
					if (pass == 1 && !tpc_family_name(row, TPC_ECO_HF, L, expert, bias, nm, sizeof(nm), &part))
						ret = tpc_err_at(e, TPC_EINPUT, r->model[sl->input], c->t[i].name, "no name for layer %lld",
								 (long long)L);
					else
						ret = pass_add(ck, in, map, r, P, sl->input, i, pass == 1 ? nm : c->t[i].name,
							       pass == 1 ? sl->params : NULL, t, scale, e);
				}
			}
		}
	}
	*layers = L;
	return ret;
}

int tpc_mix_passthrough(tpc_ckpt *ck, const tpc_ckpt *const *in, const tpc_mix_recipe *r, const tpc_family *f,
			int64_t *layers, tpc_mix_stats *st, tpc_err *e)
{
	int P = tpc_mix_primary(r), ret = 0;
	int *map[TPC_MIX_MAX_INPUTS] = {0};
	int64_t nl[TPC_MIX_MAX_INPUTS];
	size_t n0 = ck->n, total = 0;
	float *scale = NULL;
	bool *keep = NULL;
	memset(st, 0, sizeof(*st));
	if (!f || !f->tensors)
		return tpc_err_at(e, TPC_EINPUT, r->model[P], NULL,
				  "passthrough renumbers layers by the family record's tensor names: no config.json beside it names an architecture tpconv has a record of");
	for (size_t k = 0; k < r->n && !ret; k++)
		ret = pass_layers(in[k], r, (int)k, f, &nl[k], e);
	for (size_t s = 0; s < r->nslices && !ret; s++) {
		const struct tpc_mix_slice *sl = &r->slice[s];
		if (sl->b > nl[sl->input])
			ret = tpc_err_at(e, TPC_EINPUT, r->path, NULL, "layer_range [%lld, %lld] of '%s': it has %lld layers",
					 (long long)sl->a, (long long)sl->b, r->model[sl->input], (long long)nl[sl->input]);
	}
	for (size_t k = 0; k < r->n && !ret; k++) {
		total += in[k]->n * (r->nslices + 2);
		if ((int)k != P)
			ret = tpc__import_sources(ck, in[k], &map[k], e);
	}
	if (ret)
		goto out;
	if (!(scale = tpc_malloc((n0 + total) * sizeof(float)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = pass_stack(ck, in, map, r, f, n0, scale, layers, e)))
		goto out;
	if (!(keep = tpc_malloc(ck->n * sizeof(bool)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < ck->n; i++)
		keep[i] = i >= n0;
	if ((ret = tpc_ckpt_filter(ck, keep, e)))
		goto out;
	for (size_t i = 0; i < ck->n && !ret; i++) {
		char *nm = tpc_strdup(ck->t[i].name + 1);
		ret = nm ? tpc_ckpt_rename(ck, (int64_t)i, nm, e) : tpc_err_nomem(e);
		free(nm);
		/* a scale, or the recipe's dtype: the tensor times its scale (1), rounded once */
		float sc = scale[n0 + i];
		if (ret || !tpc__mix_is_float(&ck->t[i]) || (isnan(sc) && !r->dtype))
			continue;
		tpc_dequant *dq = tpc_dequant_new(TPC_DQ_MAXC, true);
		if (!dq) {
			ret = tpc_err_nomem(e);
			break;
		}
		dq->kind = TPC_DQ_MIX;
		dq->mix->method = TPC_MIX_PASSTHROUGH;
		dq->mix->base = -1;
		dq->mix->w[0] = isnan(sc) ? 1.0f : sc;
		if (tpc_tensor_copy(&dq->c[0], &ck->t[i]) || !(dq->c[0].name = tpc_strdup(ck->t[i].name))) {
			tpc_tensor_release(&dq->c[0]);
			free(dq);
			ret = tpc_err_nomem(e);
			break;
		}
		dq->nc = 1;
		if ((ret = tpc__mix_install(ck, i, dq, r->dtype, e)))
			tpc__dq_free(dq);
		st->merged++;
	}
out:
	for (size_t k = 0; k < r->n; k++)
		free(map[k]);
	free(scale);
	free(keep);
	return ret;
}
