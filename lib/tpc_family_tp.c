/* tpc_family_tp.c - a Hugging Face tensor's tensor-parallel split from its
 * family record's plan rules (tpc_family_tp.h). The record's plan is the one
 * shard/tpc_plan.c parses in full (and validates: tests/shard); here only
 * what decides a split's dimension and parts is read. */
#include "tpc_family_tp.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_regex.h"
#include "tpc_util.h"

typedef enum { R_REPLICATE, R_COL, R_ROW, R_VOCAB, R_DIM } rkind;

typedef struct trule {
	regex_t re;
	char *match;
	rkind kind;
	bool has_dim, transposed, stacked, heads, uneven;
	int dim, parts, nlisted;
	tpc_tp_part part[TPC_TP_MAX_PARTS];
} trule;

struct tpc_family_tp {
	const tpc_family *f;
	trule *r;
	size_t n;
};

void tpc_family_tp_free(tpc_family_tp *tp)
{
	if (!tp)
		return;
	for (size_t i = 0; i < tp->n; i++) {
		regfree(&tp->r[i].re);
		free(tp->r[i].match);
	}
	free(tp->r);
	free(tp);
}

const tpc_family *tpc_family_tp_family(const tpc_family_tp *tp)
{
	return tp ? tp->f : NULL;
}

#define REC_BAD(e, f, ...) tpc_err_at((e), TPC_EINPUT, NULL, NULL, __VA_ARGS__)

/* One rule of the record's plan; its regex compiled last (released only
 * when this returns 0). */
static int read_rule(trule *r, const cJSON *o, const tpc_family *f, size_t idx, tpc_err *e)
{
	static const char *const kinds[] = {"replicate", "col", "row", "vocab", "dim"};
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "match"), *s = cJSON_GetObjectItemCaseSensitive(o, "split");
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "dim"), *p = cJSON_GetObjectItemCaseSensitive(o, "parts");
	memset(r, 0, sizeof(*r));
	if (!cJSON_IsString(m) || !cJSON_IsString(s))
		return REC_BAD(e, f, "family '%s': plan rule %zu has no \"match\" or \"split\"", f->name, idx);
	r->kind = (rkind)-1;
	for (int k = 0; k < 5; k++)
		if (!strcmp(s->valuestring, kinds[k]))
			r->kind = (rkind)k;
	if ((int)r->kind < 0)
		return REC_BAD(e, f, "family '%s': plan rule %zu: unknown split '%s'", f->name, idx, s->valuestring);
	if (cJSON_IsNumber(d)) {
		r->has_dim = true;
		r->dim = d->valueint;
	}
	r->transposed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "transposed"));
	r->stacked = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "stacked"));
	r->heads = cJSON_GetObjectItemCaseSensitive(o, "heads") != NULL;
	if (cJSON_IsNumber(p) && p->valueint > 1) {
		r->parts = p->valueint;
	} else if (cJSON_IsArray(p)) {
		/* sizes from the facts ("q", "kv", "rest"), or numbers that may differ */
		int n = cJSON_GetArraySize(p);
		const cJSON *first = p->child;
		r->parts = n > 1 ? n : 0;
		for (const cJSON *q = p->child; q; q = q->next) {
			r->heads |= cJSON_IsString(q) && strcmp(q->valuestring, "rest");
			r->uneven |= n > 1 && (!cJSON_IsNumber(q) || !cJSON_IsNumber(first) || q->valuedouble != first->valuedouble);
		}
		for (const cJSON *q = p->child; r->uneven && q && r->nlisted < TPC_TP_MAX_PARTS; q = q->next) {
			tpc_tp_part *pt = &r->part[r->nlisted++];
			if (cJSON_IsString(q))
				snprintf(pt->sym, sizeof(pt->sym), "%s", q->valuestring);
			else
				pt->size = (int64_t)q->valuedouble;
		}
		if (n > TPC_TP_MAX_PARTS)
			r->nlisted = 0;
	}
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "gated")))
		r->uneven = true; /* 2 parts or 1, as the config's activation says */
	char why[256];
	int rc = tpc_regex_compile(&r->re, m->valuestring, REG_NOSUB, why, sizeof(why));
	if (rc)
		return rc < 0 ? tpc_err_nomem(e)
			      : REC_BAD(e, f, "family '%s': plan rule %zu: '%s': %s", f->name, idx, m->valuestring, why);
	if (!(r->match = tpc_strdup(m->valuestring))) {
		regfree(&r->re);
		return tpc_err_nomem(e);
	}
	return 0;
}

int tpc_family_tp_open(tpc_family_tp **out, const tpc_family *f, tpc_err *e)
{
	*out = NULL;
	if (!f || !f->plan)
		return tpc_err_at(e, TPC_EINPUT, NULL, NULL, "family '%s' has no split plan", f ? f->name : "?");
	cJSON *root = cJSON_Parse(f->plan);
	const cJSON *rules = root ? cJSON_GetObjectItemCaseSensitive(root, "rules") : NULL;
	tpc_family_tp *tp = tpc_calloc(1, sizeof(*tp));
	size_t n = cJSON_IsArray(rules) ? (size_t)cJSON_GetArraySize(rules) : 0;
	int ret = 0;
	if (!tp || (n && !(tp->r = tpc_calloc(n, sizeof(*tp->r))))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	tp->f = f;
	if (!cJSON_IsArray(rules)) {
		ret = REC_BAD(e, f, "family '%s': its plan has no \"rules\" list", f->name);
		goto out;
	}
	for (const cJSON *o = rules->child; o && !ret; o = o->next)
		if (!(ret = read_rule(&tp->r[tp->n], o, f, tp->n, e)))
			tp->n++;
out:
	cJSON_Delete(root);
	if (ret)
		tpc_family_tp_free(tp);
	else
		*out = tp;
	return ret;
}

/* The dim rule r splits in a tensor of ndim >= 1 dims (tpc_plan_rule_dim);
 * -1: replicated (a row split's bias), -2: a "dim" out of range. */
static int rule_dim(const trule *r, int ndim)
{
	int base = r->stacked ? 1 : 0, n = ndim - base;
	if (n < 1)
		return -1;
	int d;
	if (r->has_dim)
		d = r->dim < 0 ? n + r->dim : r->dim;
	else if (r->kind == R_COL)
		d = r->transposed && n >= 2 ? 1 : 0;
	else if (r->kind == R_ROW)
		d = n == 1 ? -1 : r->transposed ? 0 : 1;
	else
		d = 0;
	if (d == -1 && !r->has_dim)
		return -1;
	return d < 0 || d >= n ? -2 : d + base;
}

int tpc_family_tp_split(const tpc_family_tp *tp, const char *name, int ndim, tpc_tp_split *out, tpc_err *e)
{
	memset(out, 0, sizeof(*out));
	out->dim = -1;
	out->rule = -1;
	const trule *r = NULL;
	for (size_t i = 0; i < tp->n && !r; i++)
		if (regexec(&tp->r[i].re, name, 0, NULL, 0) == 0) {
			r = &tp->r[i];
			out->rule = (int)i;
			out->match = r->match;
		}
	if (!r)
		return 0; /* TPC_TP_UNKNOWN */
	out->stacked = r->stacked && ndim >= 1;
	if (r->kind == R_REPLICATE || ndim == 0) {
		out->kind = TPC_TP_REPLICATE;
		return 0;
	}
	int d = rule_dim(r, ndim);
	if (d == -2)
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "rule %d ('%s') of family '%s' splits dim %d but the tensor has %d dimension%s",
				  out->rule, r->match, tp->f->name, r->dim, ndim, ndim == 1 ? "" : "s");
	if (d < 0) {
		out->kind = TPC_TP_REPLICATE;
		return 0;
	}
	out->kind = r->kind == R_VOCAB ? TPC_TP_VOCAB : TPC_TP_SPLIT;
	out->dim = d;
	out->heads = r->heads;
	out->parts = r->parts;
	out->uneven_parts = r->uneven;
	out->nlisted = r->nlisted;
	memcpy(out->part, r->part, sizeof(out->part));
	return 0;
}
