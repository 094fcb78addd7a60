/*
 * tpc_infer.c - model facts that a checkpoint's shapes fix.
 *
 * config.json is the first source of model facts, but a diffusers config may
 * lack "activation_fn" (and a folder may lack the config). Some facts are not
 * a matter of opinion: a feed-forward whose input projection (ff.net.0.proj,
 * [rows, dim]) has twice as many rows as its output projection (ff.net.2,
 * [dim, inner]) has columns projects to [value | gate]: it is gated (GEGLU,
 * SwiGLU); with equal counts it is not. Asking the user for what the bytes
 * already say is the rough edge this removes. Only a unanimous answer counts:
 * if the blocks disagree, or no pair has a telling shape, the fact stays
 * unknown and the split asks, as before.
 */
#include <stdio.h>
#include <string.h>

#include "tpc_ckpt.h"
#include "tpc_plan.h"

#define PROJ_IN "net.0.proj.weight"
#define PROJ_OUT "net.2.weight"

int tpc_facts_from_shapes(tpc_model_facts *f, const tpc_plan *p, const tpc_ckpt *ck, char *note, size_t n,
			  tpc_err *e)
{
	char other[TPC_ERR_NAME_MAX], first[TPC_ERR_NAME_MAX] = "";
	size_t gated = 0, plain = 0, in_len = strlen(PROJ_IN);
	int64_t rows = 0, cols = 0;

	(void)e;
	if (note && n)
		note[0] = '\0';
	if (f->ff_act != TPC_FF_UNKNOWN)
		return 0;
	for (size_t i = 0; i < ck->n; i++) {
		const tpc_tensor *t = &ck->t[i];
		size_t len = strlen(t->name);
		int ri = tpc_plan_match(p, t->name);
		if (ri < 0 || !p->rules[ri].gated || t->ndim != 2 || len < in_len ||
		    strcmp(t->name + len - in_len, PROJ_IN))
			continue;
		/* "...ff.net.0.proj.weight" -> "...ff.net.2.weight" */
		size_t stem = len - in_len;
		if (stem + strlen(PROJ_OUT) >= sizeof(other))
			continue;
		memcpy(other, t->name, stem);
		strcpy(other + stem, PROJ_OUT);
		int64_t j = tpc_ckpt_find(ck, other);
		if (j < 0 || ck->t[j].ndim != 2)
			continue;
		int64_t r = t->shape[0], c = ck->t[j].shape[1];
		if (c > 0 && r == 2 * c)
			gated++;
		else if (c > 0 && r == c)
			plain++;
		else
			continue;
		if (!first[0]) {
			snprintf(first, sizeof(first), "%s", t->name);
			rows = r;
			cols = c;
		}
	}
	if ((gated && plain) || (!gated && !plain))
		return 0; /* the shapes disagree or do not say: ask */
	f->ff_act = gated ? TPC_FF_GATED : TPC_FF_UNGATED;
	if (note && n)
		snprintf(note, n,
			 "the feed-forward is %s, as the shapes say: %zu blocks like '%s' project to %lld rows for %lld inner features (config.json names no activation_fn)",
			 gated ? "gated ([value | gate])" : "not gated", gated + plain, first, (long long)rows,
			 (long long)cols);
	return 0;
}
