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
#include <stdbool.h>
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
		return tpc_facts_check(f, p, ck, e); /* the shapes disagree or do not say: ask */
	f->ff_act = gated ? TPC_FF_GATED : TPC_FF_UNGATED;
	if (note && n)
		snprintf(note, n,
			 "the feed-forward is %s, as the shapes say: %zu blocks like '%s' project to %lld rows for %lld inner features (config.json names no activation_fn)",
			 gated ? "gated ([value | gate])" : "not gated", gated + plain, first, (long long)rows,
			 (long long)cols);
	return tpc_facts_check(f, p, ck, e);
}

/* ---- facts against shapes ---- */

/* The first head size the shapes gave where no head_dim is known: every
 * other head part must give the same. */
typedef struct head_ref {
	int64_t size, rows, count;
	const char *kind;
	char name[TPC_ERR_NAME_MAX], shape[96], fact[2 * TPC_FACT_ORIGIN_MAX];
} head_ref;

/* "kv_heads 4 (--kv-heads)" */
static const char *fact_str(const tpc_model_facts *f, int k, int64_t v, char *buf, size_t n)
{
	snprintf(buf, n, "%s %lld (%s)", tpc_fact_name(k), (long long)v, f->origin[k][0] ? f->origin[k] : "given");
	return buf;
}

/* A fact the tensor's shape contradicts: the user gives the right one. */
#define refuse(e, tensor, ...) tpc_err_at((e), TPC_EUSAGE, NULL, (tensor), __VA_ARGS__)

/* One part of `size` rows of `kind` heads (head_block `b`) in dim d of t. */
static int check_heads(const tpc_model_facts *f, const tpc_tensor *t, const char *shape, int d, const char *which,
		       int64_t size, tpc_heads_kind kind, int64_t b, head_ref *ref, tpc_err *e)
{
	int k = kind == TPC_HEADS_Q ? TPC_FACT_HEADS : TPC_FACT_KV_HEADS;
	int64_t cnt = kind == TPC_HEADS_Q ? f->heads : f->kv_heads;
	const char *kname = kind == TPC_HEADS_Q ? "query" : "key/value";
	char fs[2 * TPC_FACT_ORIGIN_MAX], hs[2 * TPC_FACT_ORIGIN_MAX], blk[48] = "";
	if (b > 1)
		snprintf(blk, sizeof(blk), " x head_block %lld", (long long)b);
	if (f->head_dim) {
		int64_t unit = f->head_dim * b;
		fact_str(f, TPC_FACT_HEAD_DIM, f->head_dim, hs, sizeof(hs));
		if (size % unit)
			return refuse(e, t->name,
				      "%s contradicts the shape %s: its %lld rows%s in dim %d are not whole heads of %lld rows (head_dim%s)",
				      hs, shape, (long long)size, which, d, (long long)unit, blk);
		if (cnt && size / unit != cnt)
			return refuse(e, t->name,
				      "%s contradicts the shape %s: with %s its %lld rows%s in dim %d hold %lld %s heads, not %lld",
				      fact_str(f, k, cnt, fs, sizeof(fs)), shape, hs, (long long)size, which, d,
				      (long long)(size / unit), kname, (long long)cnt);
		return 0;
	}
	if (!cnt)
		return 0; /* the split asks for what it lacks */
	fact_str(f, k, cnt, fs, sizeof(fs));
	if (size % (cnt * b))
		return refuse(e, t->name, "%s contradicts the shape %s: its %lld rows%s in dim %d do not divide into %lld %s heads%s",
			      fs, shape, (long long)size, which, d, (long long)cnt, kname, blk);
	int64_t h = size / (cnt * b);
	if (!ref->size) {
		ref->size = h;
		ref->rows = size;
		ref->count = cnt;
		ref->kind = kname;
		snprintf(ref->name, sizeof(ref->name), "%s", t->name);
		snprintf(ref->shape, sizeof(ref->shape), "%s", shape);
		snprintf(ref->fact, sizeof(ref->fact), "%s", fs);
		return 0;
	}
	if (h == ref->size)
		return 0;
	if (!strcmp(ref->fact, fs)) /* one count, two head sizes */
		return refuse(e, t->name,
			      "%s contradicts the shapes: this tensor %s has %lld rows%s / %lld %s heads = %lld rows per head, '%s' %s has %lld / %lld = %lld; give --head-dim",
			      fs, shape, (long long)size, which, (long long)cnt, kname, (long long)h, ref->name, ref->shape,
			      (long long)ref->rows, (long long)ref->count, (long long)ref->size);
	return refuse(e, t->name,
		      "%s and %s contradict the shapes: this tensor %s has %lld rows%s / %lld %s heads = %lld rows per head, '%s' %s has %lld / %lld %s heads = %lld; one count is wrong: give it right, or --head-dim",
		      fs, ref->fact, shape, (long long)size, which, (long long)cnt, kname, (long long)h, ref->name,
		      ref->shape, (long long)ref->rows, (long long)ref->count, ref->kind, (long long)ref->size);
}

/* Fused parts listed as "q" / "kv" / sizes: what the facts make them. */
static int check_listed(const tpc_model_facts *f, const tpc_plan_rule *r, const tpc_tensor *t, const char *shape,
			int d, int64_t *sizes, tpc_err *e)
{
	int64_t sum = 0;
	bool rest = false;
	char list[256] = "";
	size_t at = 0;
	for (int k = 0; k < r->nparts; k++) {
		const tpc_plan_part *pp = &r->parts[k];
		int64_t rows = pp->sym ? tpc_plan_sym_rows(pp->sym, f, NULL) : 0;
		if (pp->sym && !rows)
			return 1; /* unknown: the split asks */
		sizes[k] = pp->rest ? 0 : pp->sym ? rows : pp->size;
		rest |= pp->rest;
		sum += sizes[k];
		if (at < sizeof(list))
			at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", k ? " + " : "",
					       pp->rest ? "rest" : "");
		if (!pp->rest && at < sizeof(list))
			at += (size_t)snprintf(list + at, sizeof(list) - at, "%lld", (long long)sizes[k]);
	}
	if (rest ? sum < t->shape[d] : sum == t->shape[d])
		return 0;
	char hs[2 * TPC_FACT_ORIGIN_MAX], ks[2 * TPC_FACT_ORIGIN_MAX], ds[2 * TPC_FACT_ORIGIN_MAX];
	return refuse(e, t->name,
		      "%s, %s and %s make the parts [%s] = %lld rows, but dim %d of the shape %s has %lld%s",
		      fact_str(f, TPC_FACT_HEADS, f->heads, hs, sizeof(hs)),
		      fact_str(f, TPC_FACT_KV_HEADS, f->kv_heads ? f->kv_heads : f->heads, ks, sizeof(ks)),
		      fact_str(f, TPC_FACT_HEAD_DIM, f->head_dim, ds, sizeof(ds)), list, (long long)sum, d, shape,
		      (long long)t->shape[d], rest ? " (nothing left for the \"rest\" part)" : "");
}

static int check_tensor(const tpc_model_facts *f, const tpc_plan *p, const tpc_tensor *t, head_ref *ref,
			tpc_err *e)
{
	int ri = tpc_plan_match(p, t->name);
	if (ri < 0 || t->ndim == 0)
		return 0;
	const tpc_plan_rule *r = &p->rules[ri];
	int d = tpc_plan_rule_dim(p, ri, t->ndim, NULL);
	if (d < 0 || r->head_count || r->gated)
		return 0; /* replicated, or heads of any size: the split checks them */
	char shape[96], vs[2 * TPC_FACT_ORIGIN_MAX];
	tpc_shape_str(t, shape, sizeof(shape));
	int64_t S = t->shape[d], sizes[TPC_PLAN_MAX_PARTS];
	if (r->kind == TPC_SPLIT_VOCAB) {
		if (f->vocab && !r->nparts && f->vocab > S)
			return refuse(e, t->name, "%s contradicts the shape %s: dim %d holds %lld rows, fewer than the vocabulary",
				      fact_str(f, TPC_FACT_VOCAB, f->vocab, vs, sizeof(vs)), shape, d, (long long)S);
		return 0;
	}
	int np = r->nparts ? r->nparts : 1, ret;
	if (r->parts_listed) {
		if ((ret = check_listed(f, r, t, shape, d, sizes, e)))
			return ret > 0 ? 0 : ret;
	} else {
		if (S % np)
			return 0; /* the split says so */
		for (int k = 0; k < np; k++)
			sizes[k] = S / np;
	}
	for (int k = 0; k < np; k++) {
		tpc_heads_kind kind = r->parts_listed ? r->parts[k].heads : r->heads;
		char which[32] = "";
		if (np > 1)
			snprintf(which, sizeof(which), " of part %d", k);
		/* a Mamba-2 part's size is its heads (groups) already: check_listed's sum */
		if (kind && kind < TPC_HEADS_SSM && kind != TPC_HEADS_LIN_K && kind != TPC_HEADS_LIN_V && !(r->parts_listed && r->parts[k].rest) &&
		    (ret = check_heads(f, t, shape, d, which, sizes[k], kind, r->head_block, ref, e)))
			return ret;
	}
	return 0;
}

/* The experts the plan's patterns find, and the dim 0 of the tensors its
 * "stacked" rules match, against the experts fact. */
static int check_experts(const tpc_model_facts *f, const tpc_plan *p, const tpc_ckpt *ck, tpc_err *e)
{
	int64_t top = -1;
	size_t at = 0;
	char es[2 * TPC_FACT_ORIGIN_MAX], shape[96];
	if (!f->experts)
		return 0;
	/* a tensor that stacks them holds them all along dim 0 */
	for (size_t i = 0; i < ck->n; i++) {
		int r = tpc_plan_match(p, ck->t[i].name);
		if (r < 0 || !p->rules[r].stacked || ck->t[i].ndim < 1 || ck->t[i].shape[0] == f->experts)
			continue;
		fact_str(f, TPC_FACT_EXPERTS, f->experts, es, sizeof(es));
		tpc_shape_str(&ck->t[i], shape, sizeof(shape));
		return refuse(e, ck->t[i].name, "%s contradicts this tensor %s, whose dim 0 stacks %lld experts (plan rule %d)", es,
			      shape, (long long)ck->t[i].shape[0], r);
	}
	if (!p->nexperts)
		return 0;
	for (size_t i = 0; i < ck->n; i++) {
		int64_t x = tpc_plan_expert(p, ck->t[i].name);
		if (x > top) {
			top = x;
			at = i;
		}
	}
	if (top < 0 || top + 1 == f->experts)
		return 0;
	fact_str(f, TPC_FACT_EXPERTS, f->experts, es, sizeof(es));
	tpc_shape_str(&ck->t[at], shape, sizeof(shape));
	if (top >= f->experts)
		return refuse(e, ck->t[at].name, "%s contradicts this tensor %s of expert index %lld (experts count from 0)", es,
			      shape, (long long)top);
	return refuse(e, ck->t[at].name,
		      "%s contradicts the checkpoint: its highest expert index is %lld (this tensor %s), so it holds %lld experts",
		      es, (long long)top, shape, (long long)(top + 1));
}

int tpc_facts_check(const tpc_model_facts *f, const tpc_plan *p, const tpc_ckpt *ck, tpc_err *e)
{
	head_ref ref;
	int ret = 0;
	memset(&ref, 0, sizeof(ref));
	for (size_t i = 0; i < ck->n && !ret; i++)
		ret = check_tensor(f, p, &ck->t[i], &ref, e);
	return ret ? ret : check_experts(f, p, ck, e);
}
