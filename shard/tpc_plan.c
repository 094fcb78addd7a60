/* tpc_plan.c - plan parsing, model facts and split resolution; see tpc_plan.h. */
#include "tpc_plan.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "tpc_extras.h"
#include "tpc_family.h"
#include "tpc_io.h"
#include "tpc_qsplit.h"
#include "tpc_regex.h"
#include "tpc_util.h"

#define MAX_EXACT 9007199254740992.0

const char *tpc_split_kind_name(tpc_split_kind k)
{
	switch (k) {
	case TPC_SPLIT_REPLICATE: return "replicate";
	case TPC_SPLIT_COL: return "col";
	case TPC_SPLIT_ROW: return "row";
	case TPC_SPLIT_VOCAB: return "vocab";
	case TPC_SPLIT_DIM: return "dim";
	}
	return "?";
}

static const char *const heads_names[] = {
	[TPC_HEADS_NONE] = "none", [TPC_HEADS_Q] = "q", [TPC_HEADS_KV] = "kv",
	[TPC_HEADS_LIN_K] = "lin_k", [TPC_HEADS_LIN_V] = "lin_v", [TPC_HEADS_SSM] = "ssm", [TPC_HEADS_SSM_DT] = "ssm_dt", [TPC_HEADS_SSM_GROUPS] = "ssm_groups",
};

const char *tpc_heads_kind_name(tpc_heads_kind k)
{
	return (unsigned)k < sizeof(heads_names) / sizeof(heads_names[0]) ? heads_names[k] : "none";
}

int64_t tpc_heads_count(const tpc_model_facts *f, tpc_heads_kind kind)
{
	switch (kind) {
	case TPC_HEADS_Q: return f->heads;
	case TPC_HEADS_KV: return f->kv_heads ? f->kv_heads : f->heads;
	case TPC_HEADS_LIN_K: return f->lin_k_heads;
	case TPC_HEADS_LIN_V: return f->lin_v_heads;
	case TPC_HEADS_SSM: case TPC_HEADS_SSM_DT: return f->ssm_heads;
	case TPC_HEADS_SSM_GROUPS: return f->ssm_groups;
	default: return 0;
	}
}

int64_t tpc_heads_dim(const tpc_model_facts *f, tpc_heads_kind kind)
{
	switch (kind) {
	case TPC_HEADS_LIN_K: return f->lin_k_dim;
	case TPC_HEADS_LIN_V: return f->lin_v_dim;
	case TPC_HEADS_SSM: return f->ssm_head_dim;
	case TPC_HEADS_SSM_DT: return 1;
	case TPC_HEADS_SSM_GROUPS: return f->ssm_state;
	default: return f->head_dim;
	}
}

int64_t tpc_plan_sym_rows(tpc_heads_kind sym, const tpc_model_facts *f, int64_t *heads)
{
	int64_t cnt = sym ? tpc_heads_count(f, sym) : 0, each = sym ? tpc_heads_dim(f, sym) : 0;
	if (heads)
		*heads = cnt;
	return cnt > 0 && each > 0 && cnt <= INT64_MAX / 4 / each ? cnt * each : 0;
}

/* A linear attention's heads: their own counts and sizes, never replicated */
static bool lin_heads(tpc_heads_kind k)
{
	return k == TPC_HEADS_LIN_K || k == TPC_HEADS_LIN_V;
}

/* ---- plan parsing ---- */

void tpc_plan_init(tpc_plan *p)
{
	memset(p, 0, sizeof(*p));
	p->pad_multiple = 1;
}

static void free_res(tpc_plan_re *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		regfree(&v[i].re);
		free(v[i].src);
	}
	free(v);
}

void tpc_plan_release(tpc_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nrules; i++) {
		if (p->rules[i].re_ok)
			regfree(&p->rules[i].re);
		free(p->rules[i].match);
	}
	free(p->rules);
	free_res(p->layers, p->nlayers);
	free_res(p->first, p->nfirst);
	free_res(p->last, p->nlast);
	free_res(p->experts, p->nexperts);
	free(p->name);
	free(p->desc);
	free(p->json);
	tpc_plan_init(p);
}

/* An error about the plan: TPC_EINPUT with the plan's path. */
#define PLAN_BAD(e, path, ...) TPC_CORRUPT((e), (path), -1, NULL, __VA_ARGS__)

static int compile_re(regex_t *re, const char *src, const char *path, const char *what, tpc_err *e)
{
	char why[256];
	int rc = tpc_regex_compile(re, src, 0, why, sizeof(why));
	if (rc < 0)
		return tpc_err_nomem(e);
	if (rc && !strcmp(why, TPC_REGEX_TOO_COSTLY))
		return PLAN_BAD(e, path, "%s: regular expression '%.64s%s' is %s", what, src,
				strlen(src) > 64 ? "..." : "", TPC_REGEX_TOO_COSTLY);
	if (rc)
		return PLAN_BAD(e, path, "%s: bad regular expression '%s': %s", what, src, why);
	return 0;
}

static int get_int(const cJSON *v, int64_t lo, int64_t hi, int64_t *out)
{
	/* range first: converting a double outside int64 (1e300, inf) is undefined */
	if (!cJSON_IsNumber(v) || v->valuedouble < (double)lo || v->valuedouble > (double)hi ||
	    v->valuedouble >= 9223372036854775808.0 || v->valuedouble != (double)(int64_t)v->valuedouble)
		return -1;
	*out = (int64_t)v->valuedouble;
	return 0;
}

/* A JSON member and where it goes in a struct (off2: a second field). */
typedef struct member {
	const char *key;
	size_t off, off2;
} member;

static const member *member_named(const member *m, size_t n, const char *k)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(k, m[i].key))
			return &m[i];
	return NULL;
}

/* The members that hold a list of name patterns: where plan member k's go
 * (NULL: k is none of them). */
static tpc_plan_re **re_member(tpc_plan *p, const char *k, size_t **n)
{
	static const member m[] = {
		{"layers", offsetof(tpc_plan, layers), offsetof(tpc_plan, nlayers)},
		{"first_stage", offsetof(tpc_plan, first), offsetof(tpc_plan, nfirst)},
		{"last_stage", offsetof(tpc_plan, last), offsetof(tpc_plan, nlast)},
		{"experts", offsetof(tpc_plan, experts), offsetof(tpc_plan, nexperts)},
	};
	const member *x = member_named(m, sizeof(m) / sizeof(m[0]), k);
	if (!x)
		return NULL;
	*n = (size_t *)((char *)p + x->off2);
	return (tpc_plan_re **)((char *)p + x->off);
}

static int parse_res(const cJSON *a, tpc_plan_re **out, size_t *n, const char *key, const char *path,
		     tpc_err *e)
{
	if (!a)
		return 0;
	if (!cJSON_IsArray(a))
		return PLAN_BAD(e, path, "plan: \"%s\" must be an array of regular expressions", key);
	size_t cnt = (size_t)cJSON_GetArraySize(a);
	if (cnt > TPC_PLAN_MAX_RULES)
		return PLAN_BAD(e, path, "plan: too many \"%s\" patterns", key);
	*out = tpc_calloc(cnt, sizeof(**out));
	if (!*out)
		return tpc_err_nomem(e);
	for (const cJSON *it = a->child; it; it = it->next) {
		char what[64];
		snprintf(what, sizeof(what), "plan \"%s\"", key);
		if (!cJSON_IsString(it))
			return PLAN_BAD(e, path, "plan: \"%s\" must be an array of strings", key);
		int ret = compile_re(&(*out)[*n].re, it->valuestring, path, what, e);
		if (ret)
			return ret;
		if (!((*out)[*n].src = tpc_strdup(it->valuestring))) {
			regfree(&(*out)[*n].re);
			return tpc_err_nomem(e);
		}
		(*n)++;
	}
	return 0;
}

static int parse_heads(const cJSON *v, tpc_heads_kind *out)
{
	if (!cJSON_IsString(v))
		return -1;
	if (!strcmp(v->valuestring, "q"))
		*out = TPC_HEADS_Q;
	else if (!strcmp(v->valuestring, "kv"))
		*out = TPC_HEADS_KV;
	else if (!strcmp(v->valuestring, "lin_k"))
		*out = TPC_HEADS_LIN_K;
	else if (!strcmp(v->valuestring, "lin_v"))
		*out = TPC_HEADS_LIN_V;
	else if (!strcmp(v->valuestring, "none"))
		*out = TPC_HEADS_NONE;
	else
		return -1;
	return 0;
}

/* A listed part's symbolic size: the head kinds and a Mamba-2 mixer's parts */
static int parse_part(const cJSON *v, tpc_heads_kind *out)
{
	for (size_t k = TPC_HEADS_Q; k < sizeof(heads_names) / sizeof(heads_names[0]); k++)
		if (!strcmp(v->valuestring, heads_names[k])) {
			*out = (tpc_heads_kind)k;
			return 0;
		}
	return -1;
}

/* A rule's member that is true or false: where it goes (NULL: k is none). */
static bool *rule_flag(tpc_plan_rule *r, const char *k)
{
	static const member m[] = {
		{"transposed", offsetof(tpc_plan_rule, transposed), 0},
		{"head_count", offsetof(tpc_plan_rule, head_count), 0},
		{"stacked", offsetof(tpc_plan_rule, stacked), 0},
		{"gated", offsetof(tpc_plan_rule, gated), 0},
	};
	const member *x = member_named(m, sizeof(m) / sizeof(m[0]), k);
	return x ? (bool *)((char *)r + x->off) : NULL;
}

static int parse_rule(tpc_plan_rule *r, const cJSON *o, size_t idx, const char *path, tpc_err *e)
{
	const cJSON *match = NULL, *split = NULL;
	int nrest = 0;
	r->head_block = 1;
	r->unit = 1;
	if (!cJSON_IsObject(o))
		return PLAN_BAD(e, path, "plan rule %zu is not an object", idx);
	for (const cJSON *f = o->child; f; f = f->next) {
		const char *k = f->string;
		int64_t v;
		bool *flag = rule_flag(r, k);
		if (flag) {
			if (!cJSON_IsBool(f))
				return PLAN_BAD(e, path, "plan rule %zu: \"%s\" must be true or false", idx, k);
			*flag = cJSON_IsTrue(f);
		} else if (!strcmp(k, "match")) {
			match = f;
		} else if (!strcmp(k, "split")) {
			split = f;
		} else if (!strcmp(k, "dim")) {
			if (get_int(f, -TPC_PLAN_MAX_RULES, TPC_PLAN_MAX_RULES, &v))
				return PLAN_BAD(e, path, "plan rule %zu: \"dim\" must be an integer", idx);
			r->has_dim = true;
			r->dim = (int)v;
		} else if (!strcmp(k, "heads")) {
			if (parse_heads(f, &r->heads))
				return PLAN_BAD(e, path, "plan rule %zu: \"heads\" must be \"q\", \"kv\", \"lin_k\" or \"lin_v\"", idx);
		} else if (!strcmp(k, "unit")) {
			if (get_int(f, 1, 64, &r->unit))
				return PLAN_BAD(e, path, "plan rule %zu: \"unit\" must be an integer from 1 to 64", idx);
		} else if (!strcmp(k, "head_block")) {
			if (get_int(f, 1, 64, &r->head_block))
				return PLAN_BAD(e, path, "plan rule %zu: \"head_block\" must be an integer from 1 to 64", idx);
		} else if (!strcmp(k, "pad_multiple")) {
			if (get_int(f, 1, 1 << 20, &r->pad_multiple))
				return PLAN_BAD(e, path, "plan rule %zu: \"pad_multiple\" must be a positive integer", idx);
		} else if (!strcmp(k, "parts")) {
			if (cJSON_IsNumber(f)) {
				if (get_int(f, 1, TPC_PLAN_MAX_PARTS, &v))
					return PLAN_BAD(e, path, "plan rule %zu: \"parts\" must be 1 to %d", idx,
							TPC_PLAN_MAX_PARTS);
				r->nparts = (int)v;
			} else if (cJSON_IsArray(f)) {
				int n = cJSON_GetArraySize(f);
				if (n < 1 || n > TPC_PLAN_MAX_PARTS)
					return PLAN_BAD(e, path, "plan rule %zu: \"parts\" must list 1 to %d parts", idx,
							TPC_PLAN_MAX_PARTS);
				r->nparts = n;
				r->parts_listed = true;
				int j = 0;
				for (const cJSON *p = f->child; p; p = p->next, j++) {
					tpc_plan_part *pp = &r->parts[j];
					if (cJSON_IsString(p) && !strcmp(p->valuestring, "rest")) {
						if (nrest++)
							return PLAN_BAD(e, path, "plan rule %zu: at most one part is \"rest\"",
									idx);
						pp->rest = true;
					} else if (cJSON_IsString(p)) {
						if (parse_part(p, &pp->sym))
							return PLAN_BAD(e, path,
									"plan rule %zu: part %d must be a size, \"q\", \"kv\", \"lin_k\", \"lin_v\", \"ssm\", \"ssm_dt\", \"ssm_groups\" or \"rest\"",
									idx, j);
						pp->heads = pp->sym;
					} else if (!get_int(p, 1, INT64_MAX / 2, &pp->size)) {
						pp->heads = TPC_HEADS_NONE;
					} else {
						return PLAN_BAD(e, path,
								"plan rule %zu: part %d must be a size, \"q\", \"kv\", \"lin_k\", \"lin_v\" or \"rest\"",
								idx, j);
					}
				}
			} else {
				return PLAN_BAD(e, path, "plan rule %zu: \"parts\" must be a count or a list", idx);
			}
		} else if (!strcmp(k, "comment")) {
			/* free text */
		} else {
			return PLAN_BAD(e, path, "plan rule %zu: unknown member \"%s\"", idx, k);
		}
	}
	if (!cJSON_IsString(match) || !*match->valuestring)
		return PLAN_BAD(e, path, "plan rule %zu: \"match\" (a regular expression) is required", idx);
	if (!cJSON_IsString(split))
		return PLAN_BAD(e, path, "plan rule %zu: \"split\" is required", idx);
	static const char *const kinds[] = {"replicate", "col", "row", "vocab", "dim"};
	r->kind = (tpc_split_kind)-1;
	for (int k = 0; k < 5; k++)
		if (!strcmp(split->valuestring, kinds[k]))
			r->kind = (tpc_split_kind)k;
	if ((int)r->kind < 0)
		return PLAN_BAD(e, path,
				"plan rule %zu: unknown split '%s' (col, row, vocab, replicate or dim)", idx,
				split->valuestring);
	if (r->kind == TPC_SPLIT_DIM && !r->has_dim)
		return PLAN_BAD(e, path, "plan rule %zu: split \"dim\" needs \"dim\": N", idx);
	if (r->kind == TPC_SPLIT_REPLICATE && (r->nparts || r->heads))
		return PLAN_BAD(e, path, "plan rule %zu: a replicated tensor has no parts or heads", idx);
	if (r->pad_multiple && r->kind != TPC_SPLIT_VOCAB)
		return PLAN_BAD(e, path, "plan rule %zu: \"pad_multiple\" is for vocab splits", idx);
	if (r->parts_listed && r->heads)
		return PLAN_BAD(e, path,
				"plan rule %zu: with listed parts, give heads per part (\"q\", \"kv\"), not \"heads\"", idx);
	if (r->head_block > 1 && !r->heads)
		return PLAN_BAD(e, path, "plan rule %zu: \"head_block\" needs \"heads\"", idx);
	if (r->head_count && ((r->heads != TPC_HEADS_Q && !lin_heads(r->heads)) || r->head_block > 1 || r->nparts))
		return PLAN_BAD(e, path,
				"plan rule %zu: \"head_count\" needs \"heads\": \"q\", \"lin_k\" or \"lin_v\", without \"head_block\" or \"parts\"",
				idx);
	if (r->gated && (r->nparts || r->kind == TPC_SPLIT_REPLICATE || r->kind == TPC_SPLIT_VOCAB))
		return PLAN_BAD(e, path, "plan rule %zu: \"gated\" is for a col or row split without \"parts\"", idx);
	if (r->unit > 1 && (r->heads || r->nparts || r->gated || r->kind == TPC_SPLIT_REPLICATE || r->kind == TPC_SPLIT_VOCAB))
		return PLAN_BAD(e, path, "plan rule %zu: \"unit\" is for a col, row or dim split without heads or parts", idx);
	if (r->stacked && r->kind == TPC_SPLIT_VOCAB)
		return PLAN_BAD(e, path, "plan rule %zu: \"stacked\" experts are not a vocabulary", idx);
	char what[64];
	snprintf(what, sizeof(what), "plan rule %zu", idx);
	int ret = compile_re(&r->re, match->valuestring, path, what, e);
	if (ret)
		return ret;
	r->re_ok = true;
	if (!(r->match = tpc_strdup(match->valuestring)))
		return tpc_err_nomem(e);
	return 0;
}

int tpc_plan_from_buffer(tpc_plan *p, const char *text, size_t len, const char *path, tpc_err *e)
{
	cJSON *root = NULL;
	int ret = 0;
	tpc_plan_init(p);
	if (len > TPC_PLAN_MAX_BYTES)
		return PLAN_BAD(e, path, "plan is %zu bytes, more than the %u allowed", len, TPC_PLAN_MAX_BYTES);
	root = cJSON_ParseWithLength(text, len);
	if (!root || !cJSON_IsObject(root)) {
		ret = PLAN_BAD(e, path, "plan is not a JSON object");
		goto out;
	}
	const cJSON *rules = NULL;
	for (const cJSON *f = root->child; f; f = f->next) {
		const char *k = f->string;
		tpc_plan_re **re;
		size_t *nre;
		for (const cJSON *g = root->child; g != f; g = g->next)
			if (!strcmp(g->string, k)) {
				ret = PLAN_BAD(e, path, "plan: duplicate member \"%s\"", k);
				goto out;
			}
		if (!strcmp(k, "name") || !strcmp(k, "description")) {
			if (!cJSON_IsString(f)) {
				ret = PLAN_BAD(e, path, "plan: \"%s\" must be a string", k);
				goto out;
			}
			char **dst = !strcmp(k, "name") ? &p->name : &p->desc;
			if (!(*dst = tpc_strdup(f->valuestring))) {
				ret = tpc_err_nomem(e);
				goto out;
			}
		} else if (!strcmp(k, "model")) {
			if (!cJSON_IsObject(f)) {
				ret = PLAN_BAD(e, path, "plan: \"model\" must be an object");
				goto out;
			}
			for (const cJSON *m = f->child; m; m = m->next) {
				int64_t v, *dst = !strcmp(m->string, "heads")      ? &p->facts.heads
						  : !strcmp(m->string, "kv_heads") ? &p->facts.kv_heads
						  : !strcmp(m->string, "head_dim") ? &p->facts.head_dim
						  : !strcmp(m->string, "hidden")   ? &p->facts.hidden
						  : !strcmp(m->string, "vocab")    ? &p->facts.vocab
						  : !strcmp(m->string, "layers")   ? &p->facts.layers
						  : !strcmp(m->string, "experts")  ? &p->facts.experts
										   : NULL;
				if (!dst) {
					ret = PLAN_BAD(e, path,
						       "plan: unknown model fact \"%s\" (heads, kv_heads, head_dim, hidden, vocab, layers, experts)",
						       m->string);
					goto out;
				}
				if (get_int(m, 1, INT64_MAX / 2, &v)) {
					ret = PLAN_BAD(e, path, "plan: model fact \"%s\" must be a positive integer", m->string);
					goto out;
				}
				*dst = v;
			}
			tpc_facts_label(&p->facts, "the plan's \"model\"");
		} else if (!strcmp(k, "pad_multiple")) {
			if (get_int(f, 1, 1 << 20, &p->pad_multiple)) {
				ret = PLAN_BAD(e, path, "plan: \"pad_multiple\" must be a positive integer");
				goto out;
			}
		} else if ((re = re_member(p, k, &nre))) {
			if ((ret = parse_res(f, re, nre, k, path, e)))
				goto out;
		} else if (!strcmp(k, "rules")) {
			rules = f;
		} else if (!strcmp(k, "fallback")) {
			if (!cJSON_IsString(f) ||
			    (strcmp(f->valuestring, "replicate") && strcmp(f->valuestring, "error"))) {
				ret = PLAN_BAD(e, path, "plan: \"fallback\" must be \"replicate\" or \"error\"");
				goto out;
			}
			p->fallback_error = !strcmp(f->valuestring, "error");
		} else if (!strcmp(k, "comment")) {
			/* free text */
		} else {
			ret = PLAN_BAD(e, path, "plan: unknown member \"%s\"", k);
			goto out;
		}
	}
	if (!cJSON_IsArray(rules)) {
		ret = PLAN_BAD(e, path, "plan: \"rules\" (an array) is required");
		goto out;
	}
	size_t n = (size_t)cJSON_GetArraySize(rules);
	if (n > TPC_PLAN_MAX_RULES) {
		ret = PLAN_BAD(e, path, "plan: %zu rules, at most %d allowed", n, TPC_PLAN_MAX_RULES);
		goto out;
	}
	p->rules = tpc_calloc(n, sizeof(*p->rules));
	if (!p->rules) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (const cJSON *r = rules->child; r; r = r->next) {
		/* count it first so release frees a half-built rule */
		size_t idx = p->nrules++;
		ret = parse_rule(&p->rules[idx], r, idx, path, e);
		if (ret)
			goto out;
	}
	if (!(p->json = cJSON_PrintUnformatted(root)))
		ret = tpc_err_nomem(e);
out:
	cJSON_Delete(root);
	if (ret)
		tpc_plan_release(p);
	return ret;
}

TPC_PARSE_FN(parse_plan, tpc_plan_from_buffer)

int tpc_plan_from_file(tpc_plan *p, const char *path, tpc_err *e)
{
	tpc_plan_init(p);
	return tpc_parse_file(path, TPC_PLAN_MAX_BYTES, parse_plan, p, e);
}

/* Levenshtein distance of two short names, capped: a typo's distance is small. */
static const char *family_name(size_t i, void *ctx)
{
	(void)ctx;
	return i < tpc_family_count() ? tpc_family_at(i)->name : NULL;
}

int tpc_plan_preset(tpc_plan *p, const char *name, tpc_err *e)
{
	const tpc_family *fam = tpc_family_find(name);
	if (!fam) {
		char list[512], hint[96];
		size_t k = 0;
		list[0] = '\0';
		for (size_t i = 0; i < tpc_family_count() && k < sizeof(list); i++)
			k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%s", i ? ", " : "", tpc_family_at(i)->name);
		tpc_did_you_mean(name, family_name, NULL, hint, sizeof(hint));
		tpc_plan_init(p);
		/* a name the user typed, not a file's content: a usage error (exit 2) */
		return tpc_err_set(e, TPC_EUSAGE, "unknown preset '%s' (%sknown: %s)", name, hint, list);
	}
	char label[96];
	snprintf(label, sizeof(label), "preset %s", name);
	return tpc_plan_from_buffer(p, fam->plan, strlen(fam->plan), label, e);
}

/* ---- resolution ---- */

const char *tpc_ep_placement_name(tpc_ep_placement p)
{
	return p == TPC_EP_ROUND_ROBIN ? "round-robin" : "contiguous";
}

int tpc_ep_owner(tpc_ep_placement p, int64_t e, int64_t n, int ep)
{
	if (ep <= 1 || e < 0 || n < ep)
		return 0;
	if (p == TPC_EP_ROUND_ROBIN)
		return (int)(e % ep);
	return (int)(e / (n / ep));
}

int tpc_split_tp(const tpc_split *s, int tp)
{
	if (s->ep > 1)
		return tp % s->ep == 0 ? tp / s->ep : tp;
	return s->dp > 1 && tp % s->dp == 0 ? tp / s->dp : tp;
}

int tpc_split_local(const tpc_split *s, int tp, int r)
{
	return r % tpc_split_tp(s, tp);
}

bool tpc_split_holds(const tpc_split *s, int tp, int r)
{
	return s->ep <= 1 || s->stacked || r / tpc_split_tp(s, tp) == s->ep_group;
}

int tpc_split_first_rank(const tpc_split *s, int tp)
{
	return s->ep > 1 && !s->stacked ? s->ep_group * tpc_split_tp(s, tp) : 0;
}

void tpc_split_experts(const tpc_split *s, int64_t n, int tp, int r, int64_t *first, int64_t *step, int64_t *count)
{
	int ep = s->stacked && s->ep > 1 && n % s->ep == 0 ? s->ep : 1;
	int g = ep > 1 ? r / tpc_split_tp(s, tp) : 0;
	*count = n / ep;
	*first = s->ep_placement == TPC_EP_ROUND_ROBIN ? g : g * *count;
	*step = s->ep_placement == TPC_EP_ROUND_ROBIN ? ep : 1;
}

int64_t tpc_split_rank_len(const tpc_split *s, int k, int tp)
{
	const tpc_split_part *p = &s->part[k];
	if (p->replicas > 1)
		return p->size / p->heads;
	return (p->size + p->pad) / tpc_split_tp(s, tp);
}

int64_t tpc_split_rank_start(const tpc_split *s, int k, int tp, int r)
{
	const tpc_split_part *p = &s->part[k];
	r = tpc_split_local(s, tp, r);
	return (int64_t)(p->replicas > 1 ? r / p->replicas : r) * tpc_split_rank_len(s, k, tp);
}

int64_t tpc_split_rank_take(const tpc_split *s, int k, int tp, int r)
{
	const tpc_split_part *p = &s->part[k];
	int64_t len = tpc_split_rank_len(s, k, tp), start = tpc_split_rank_start(s, k, tp, r);
	if (!p->uneven)
		return len;
	return start >= p->size ? 0 : start + len > p->size ? p->size - start : len;
}

int64_t tpc_split_rank_off(const tpc_split *s, int k, int tp, int r)
{
	int64_t o = 0;
	for (int j = 0; j < k; j++)
		o += tpc_split_rank_take(s, j, tp, r);
	return o;
}

bool tpc_split_uneven(const tpc_split *s)
{
	for (int k = 0; s->dim >= 0 && k < s->nparts; k++)
		if (s->part[k].uneven)
			return true;
	return false;
}

int64_t tpc_split_rank_dim(const tpc_split *s, int tp)
{
	int64_t n = 0;
	for (int k = 0; k < s->nparts; k++)
		n += tpc_split_rank_len(s, k, tp);
	return n;
}

bool tpc_split_equal(const tpc_split *a, const tpc_split *b)
{
	/* the bytes each rank gets decide; the kind's name does not (col on dim 0
	 * and dim 0 agree) */
	if (a->dim != b->dim || a->row_bias != b->row_bias || a->nparts != b->nparts || a->stacked != b->stacked)
		return false;
	if ((a->ep > 1 || b->ep > 1) && (a->ep != b->ep || a->ep_group != b->ep_group || a->expert != b->expert))
		return false;
	if ((a->dp > 1 ? a->dp : 1) != (b->dp > 1 ? b->dp : 1))
		return false;
	if (a->is_shape != b->is_shape ||
	    (a->is_shape && (a->shape_dim != b->shape_dim || a->shape_len != b->shape_len)))
		return false;
	for (int k = 0; k < a->nparts; k++)
		if (a->part[k].size != b->part[k].size || a->part[k].pad != b->part[k].pad ||
		    a->part[k].heads != b->part[k].heads || a->part[k].replicas != b->part[k].replicas ||
		    a->part[k].uneven != b->part[k].uneven)
			return false;
	return true;
}

int tpc_plan_match(const tpc_plan *p, const char *name)
{
	for (size_t i = 0; i < p->nrules; i++)
		if (regexec(&p->rules[i].re, name, 0, NULL, 0) == 0)
			return (int)i;
	return -1;
}

/* The input does not fit the plan: exit 3. */
#define bad_tensor(e, name, ...) tpc_err_at((e), TPC_EINPUT, NULL, (name), __VA_ARGS__)
/* A model fact the split needs and nothing gave: the user gives it (a flag or
 * --config), so it is a usage error (exit 2), as the unfuse rules and the
 * megatron layout say too. */
#define missing_fact(e, name, ...) tpc_err_at((e), TPC_EUSAGE, NULL, (name), __VA_ARGS__)

/* Heads in part k: from head_dim when known, else from the head counts. */
static int part_heads(const tpc_model_facts *f, const tpc_plan_rule *r, tpc_split_part *pt, int k,
		      int nparts, const char *name, tpc_err *e)
{
	int64_t block = r->head_block, unit;
	char which[32] = "";
	if (nparts > 1)
		snprintf(which, sizeof(which), " (part %d)", k);
	if (lin_heads(pt->head_kind)) {
		/* a linear attention's heads: its own count (head_count: heads of any
		 * size, a key head's group) or its own head size */
		int64_t cnt = tpc_heads_count(f, pt->head_kind), hd = tpc_heads_dim(f, pt->head_kind);
		const char *member = pt->head_kind == TPC_HEADS_LIN_K ? "linear_num_key_heads" : "linear_num_value_heads";
		if (r->head_count ? !cnt : !hd)
			return missing_fact(e, name,
					  "the split must fall on linear-attention %s-head boundaries but their %s is unknown; give --config config.json (%s)",
					  pt->head_kind == TPC_HEADS_LIN_K ? "key" : "value", r->head_count ? "count" : "size",
					  r->head_count ? member
					  : pt->head_kind == TPC_HEADS_LIN_K ? "linear_key_head_dim" : "linear_value_head_dim");
		if (r->head_count) {
			pt->heads = cnt;
		} else {
			unit = hd * block;
			if (pt->size % unit)
				return bad_tensor(e, name, "%lld rows%s are not a whole number of linear-attention heads of %lld rows",
						  (long long)pt->size, which, (long long)unit);
			pt->heads = pt->size / unit;
		}
	} else if (r->head_count) {
		/* heads of any size (MLA: qk_nope + qk_rope rows in q_b_proj,
		 * qk_nope + v in kv_b_proj): the count decides */
		if (!f->heads)
			return missing_fact(e, name,
					  "the split must fall on attention-head boundaries but the head count is unknown; give --config config.json (num_attention_heads) or --heads");
		pt->heads = f->heads;
	} else if (f->head_dim) {
		unit = f->head_dim * block;
		if (pt->size % unit)
			return bad_tensor(e, name, "%lld rows%s are not a whole number of heads of %lld rows (head_dim %lld%s)",
					  (long long)pt->size, which, (long long)unit, (long long)f->head_dim,
					  block > 1 ? " times the head block" : "");
		pt->heads = pt->size / unit;
	} else if (pt->head_kind == TPC_HEADS_Q && f->heads) {
		pt->heads = f->heads;
	} else if (pt->head_kind == TPC_HEADS_KV && f->kv_heads) {
		pt->heads = f->kv_heads;
	} else {
		return missing_fact(e, name,
				  "the split must fall on attention-head boundaries but the head size is unknown; give --config config.json, --head-dim or --heads/--kv-heads");
	}
	if (pt->heads < 1 || pt->size % pt->heads)
		return bad_tensor(e, name, "%lld rows%s do not divide into %lld heads", (long long)pt->size, which,
				  (long long)pt->heads);
	return 0;
}

static int rule_dim(const tpc_plan_rule *r, int ndim, bool *row_bias);

int tpc_plan_rule_dim(const tpc_plan *p, int ri, int ndim, bool *row_bias)
{
	const tpc_plan_rule *r = (ri >= 0 && (size_t)ri < p->nrules) ? &p->rules[ri] : NULL;
	if (row_bias)
		*row_bias = false;
	if (!r || r->kind == TPC_SPLIT_REPLICATE || ndim == 0)
		return -1;
	if (r->stacked) {
		/* the rule describes one expert: the tensor without dim 0 */
		int d = ndim > 1 ? rule_dim(r, ndim - 1, row_bias) : -1;
		return d >= 0 ? d + 1 : d;
	}
	return rule_dim(r, ndim, row_bias);
}

/* The dimension rule r splits in a matrix (or tensor) of ndim >= 1 dims. */
static int rule_dim(const tpc_plan_rule *r, int ndim, bool *row_bias)
{
	if (r->has_dim) {
		int d = r->dim < 0 ? ndim + r->dim : r->dim;
		return (d < 0 || d >= ndim) ? -2 : d;
	}
	if (r->kind == TPC_SPLIT_COL)
		return (r->transposed && ndim >= 2) ? 1 : 0;
	if (r->kind == TPC_SPLIT_ROW) {
		if (ndim == 1) {
			if (row_bias)
				*row_bias = true;
			return -1;
		}
		return r->transposed ? 0 : 1;
	}
	return 0;
}

/* The sizes of a rule's listed parts (numbers, head kinds from the facts, a
 * "rest") along dim d of `size`, into s->part[0 .. np). */
static int listed_parts(const tpc_plan_rule *r, const tpc_model_facts *f, const char *name, int d, int64_t size, int np,
			tpc_split *s, tpc_err *e)
{
	int64_t sum = 0;
	int rest = -1;
	for (int k = 0; k < np; k++) {
		const tpc_plan_part *pp = &r->parts[k];
		tpc_split_part *pt = &s->part[k];
		pt->head_kind = pp->heads;
		if (pp->rest) {
			rest = k;
			pt->size = 0;
			continue;
		}
		if (pp->sym >= TPC_HEADS_SSM) {
			if (!(pt->size = tpc_plan_sym_rows(pp->sym, f, &pt->heads)))
				return missing_fact(e, name,
						  "part %d is \"%s\" (of a Mamba-2 mixer) but the model's mamba_n_heads, mamba_d_head (or mamba_expand), mamba_n_groups or mamba_d_state are unknown; give --config config.json",
						  k, tpc_heads_kind_name(pp->sym));
		} else if (pp->sym) {
			int64_t cnt = tpc_heads_count(f, pp->sym), hd = tpc_heads_dim(f, pp->sym);
			if (lin_heads(pp->sym) && (!cnt || !hd))
				return missing_fact(e, name,
						  "part %d is \"%s\" (a linear attention's %s heads x their size) but config.json's linear_num_%s_heads or linear_%s_head_dim is unknown; give --config config.json",
						  k, tpc_heads_kind_name(pp->sym), pp->sym == TPC_HEADS_LIN_K ? "key" : "value",
						  pp->sym == TPC_HEADS_LIN_K ? "key" : "value",
						  pp->sym == TPC_HEADS_LIN_K ? "key" : "value");
			if (!cnt || !hd)
				return missing_fact(e, name,
						  "part %d is \"%s\" (%s heads x head_dim rows) but the model's %s are unknown; give --config config.json or --heads, --kv-heads and --head-dim",
						  k, tpc_heads_kind_name(pp->sym), pp->sym == TPC_HEADS_Q ? "query" : "key/value",
						  !cnt ? "head counts" : "head_dim");
			pt->size = cnt * hd;
		} else {
			pt->size = pp->size;
		}
		sum += pt->size;
	}
	if (rest >= 0) {
		if (sum >= size)
			return bad_tensor(e, name, "dim %d has %lld, which leaves nothing for the \"rest\" part %d", d,
					  (long long)size, rest);
		s->part[rest].size = size - sum;
		sum = size;
	}
	if (sum != size) {
		char buf[256];
		size_t k2 = 0;
		for (int k = 0; k < np && k2 < sizeof(buf); k++)
			k2 += (size_t)snprintf(buf + k2, sizeof(buf) - k2, "%s%lld", k ? ", " : "",
					       (long long)s->part[k].size);
		return bad_tensor(e, name, "parts [%s] add up to %lld but dim %d has %lld", buf, (long long)sum, d,
				  (long long)size);
	}
	return 0;
}

static int resolve_rule(const tpc_plan *p, const tpc_model_facts *f, int ri, const char *name, int ndim,
			const int64_t *shape, int tp, unsigned flags, tpc_split *s, tpc_err *e)
{
	const tpc_plan_rule *r = ri >= 0 ? &p->rules[ri] : NULL;
	memset(s, 0, sizeof(*s));
	s->rule = ri;
	s->dim = -1;
	s->stacked = r && r->stacked && ndim >= 1;
	if (!r || r->kind == TPC_SPLIT_REPLICATE)
		return 0;
	if (ndim == 0) {
		s->scalar = true;
		return 0;
	}
	bool row_bias = false;
	int d = tpc_plan_rule_dim(p, ri, ndim, &row_bias);
	if (d == -2)
		return bad_tensor(e, name, "rule %d ('%s') splits dim %d but the tensor has %d dimension%s%s", ri,
				  r->match, r->dim, ndim, ndim == 1 ? "" : "s", r->stacked ? " (dim 0 its experts)" : "");
	if (!r->stacked && !r->has_dim && ndim >= 3 && (r->kind == TPC_SPLIT_COL || r->kind == TPC_SPLIT_ROW)) {
		int64_t rest = 1;
		for (int k = 2; k < ndim; k++)
			rest *= shape[k];
		if (rest != 1)
			return bad_tensor(e, name,
					  "rule %d ('%s') splits %s a tensor of %d dimensions that is not a matrix: say which dim is split (\"dim\") or that dim 0 stacks experts whose matrices it splits (\"stacked\": true)",
					  ri, r->match, tpc_split_kind_name(r->kind), ndim);
	}
	if (d < 0) {
		s->row_bias = row_bias; /* replicated; added once after the all-reduce */
		return 0;
	}
	s->kind = r->kind;
	s->dim = d;
	int64_t size = shape[d];
	int np = r->nparts ? r->nparts : 1;
	if (r->gated) {
		if (!f->ff_act)
			return missing_fact(e, name,
					  "is the feed-forward gated (GEGLU/SwiGLU: [value | gate], split in 2 parts) or not? the model's config names no activation_fn; give --config config.json");
		np = tpc_ff_act_gated(f->ff_act) ? 2 : 1;
	}
	s->nparts = np;
	if (r->parts_listed) {
		int ret = listed_parts(r, f, name, d, size, np, s, e);
		if (ret)
			return ret;
	} else {
		if (size % np)
			return bad_tensor(e, name, "dim %d of size %lld does not divide into %d equal parts", d,
					  (long long)size, np);
		for (int k = 0; k < np; k++) {
			s->part[k].size = size / np;
			s->part[k].head_kind = r->heads;
		}
	}
	for (int k = 0; k < np; k++) {
		tpc_split_part *pt = &s->part[k];
		char which[32] = "";
		if (np > 1)
			snprintf(which, sizeof(which), "part %d of ", k);
		pt->replicas = 1;
		if (pt->head_kind >= TPC_HEADS_SSM) {
			/* heads or groups the facts gave with the part's size */
			if (pt->heads % tp == 0)
				continue;
			if (pt->head_kind == TPC_HEADS_SSM_GROUPS && pt->heads == 1) {
				pt->replicas = tp; /* the one group beside every rank's heads */
				continue;
			}
			return bad_tensor(e, name,
					  "%s%lld Mamba-2 %s in dim %d (size %lld) cannot be split over tp %d: tp must divide them%s",
					  which, (long long)pt->heads,
					  pt->head_kind == TPC_HEADS_SSM_GROUPS ? "groups (mamba_n_groups)" : "heads (mamba_n_heads)",
					  d, (long long)pt->size, tp,
					  pt->head_kind == TPC_HEADS_SSM_GROUPS
						  ? " (one group is replicated, as vLLM's MambaMixer2 does; it refuses other counts)"
						  : "");
		}
		if (pt->head_kind) {
			int ret = part_heads(f, r, pt, k, np, name, e);
			if (ret)
				return ret;
			if (pt->heads % tp == 0)
				continue;
			if (pt->head_kind == TPC_HEADS_KV && tp % pt->heads == 0) {
				pt->replicas = (int)(tp / pt->heads);
				continue;
			}
			return bad_tensor(e, name,
					  "%s%lld %s heads in dim %d (size %lld) cannot be split over tp %d: tp must divide the heads%s",
					  which, (long long)pt->heads,
					  pt->head_kind == TPC_HEADS_KV      ? "key/value"
					  : pt->head_kind == TPC_HEADS_LIN_K ? "linear-attention key"
					  : pt->head_kind == TPC_HEADS_LIN_V ? "linear-attention value"
									     : "query",
					  d,
					  (long long)pt->size, tp,
					  pt->head_kind == TPC_HEADS_KV ? " or be a multiple of them (replication)" : "");
		}
		if (r->kind == TPC_SPLIT_VOCAB) {
			int64_t m = (r->pad_multiple ? r->pad_multiple : p->pad_multiple) * tp;
			pt->pad = (m - pt->size % m) % m;
		} else if (r->unit > 1 && pt->size % (tp * r->unit)) {
			/* never padded: a rank's slice would end inside a unit */
			return bad_tensor(e, name,
					  "dim %d of size %lld holds units of %lld that must stay whole, but does not divide into tp %d slices of whole units",
					  d, (long long)pt->size, (long long)r->unit, tp);
		} else if (pt->size % tp) {
			if (!(flags & TPC_RESOLVE_PAD))
				return bad_tensor(e, name,
						  "%sdim %d of size %lld does not divide evenly by tp %d; use --pad to zero-pad it",
						  which, d, (long long)pt->size, tp);
			pt->pad = tp - pt->size % tp;
		}
	}
	return 0;
}

int tpc_plan_resolve(const tpc_plan *p, const tpc_model_facts *f, const char *name, int ndim,
		     const int64_t *shape, int tp, unsigned flags, tpc_split *out, bool *matched,
		     tpc_err *e)
{
	int first = tpc_plan_match(p, name);
	int ret;
	if (matched)
		*matched = first >= 0;
	if (first < 0) {
		if (p->fallback_error)
			return bad_tensor(e, name, "no rule of the plan matches this tensor (the plan's fallback is \"error\")");
		return resolve_rule(p, f, -1, name, ndim, shape, tp, flags, out, e);
	}
	if ((ret = resolve_rule(p, f, first, name, ndim, shape, tp, flags, out, e)))
		return ret;
	for (size_t j = (size_t)first + 1; j < p->nrules; j++) {
		if (regexec(&p->rules[j].re, name, 0, NULL, 0) != 0)
			continue;
		tpc_split other;
		tpc_err e2;
		tpc_err_init(&e2);
		if (resolve_rule(p, f, (int)j, name, ndim, shape, tp, flags, &other, &e2) ||
		    !tpc_split_equal(out, &other))
			return bad_tensor(e, name,
					  "matched by plan rules %d ('%s', split %s) and %zu ('%s', split %s) that disagree; make the patterns disjoint",
					  first, p->rules[first].match, tpc_split_kind_name(p->rules[first].kind), j,
					  p->rules[j].match, tpc_split_kind_name(p->rules[j].kind));
	}
	return 0;
}

/* The number in the last capture group that matched, of the first pattern
 * matching `name`, or -1. */
static int64_t captured_index(const tpc_plan_re *res, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++) {
		regmatch_t m[10];
		if (regexec(&res[i].re, name, 10, m, 0) != 0)
			continue;
		for (int g = 9; g >= 1; g--) {
			if (m[g].rm_so < 0)
				continue;
			int64_t v = 0;
			bool digits = m[g].rm_eo > m[g].rm_so;
			for (regoff_t k = m[g].rm_so; k < m[g].rm_eo && digits; k++) {
				char c = name[k];
				if (c < '0' || c > '9' || v > (INT64_MAX - 9) / 10)
					digits = false;
				else
					v = v * 10 + (c - '0');
			}
			if (digits)
				return v;
		}
	}
	return -1;
}

int64_t tpc_plan_layer(const tpc_plan *p, const char *name)
{
	return captured_index(p->layers, p->nlayers, name);
}

int64_t tpc_plan_expert(const tpc_plan *p, const char *name)
{
	return captured_index(p->experts, p->nexperts, name);
}

int tpc_plan_stage(const tpc_plan *p, const char *name, int pp, int64_t layers)
{
	return tpc_plan_stage_in(p, name, pp, layers, NULL);
}

int tpc_plan_stage_in(const tpc_plan *p, const char *name, int pp, int64_t layers, const int64_t *counts)
{
	if (pp <= 1)
		return 0;
	int64_t l = tpc_plan_layer(p, name);
	if (l >= 0 && layers > 0 && counts) {
		/* --pp-layers: stage s holds counts[s] layers (uneven first and last
		 * stages, as Megatron's decoder_first/last_pipeline_num_layers) */
		int64_t start = 0;
		for (int s = 0; s < pp; s++) {
			start += counts[s];
			if (l < start)
				return s;
		}
		return pp - 1;
	}
	if (l >= 0 && layers > 0) {
		/* as even as possible, the first (layers % pp) stages one layer more
		 * (TensorRT-LLM's pp_layers / torch.tensor_split) */
		int64_t base = layers / pp, extra = layers % pp, start = 0;
		for (int s = 0; s < pp; s++) {
			int64_t cnt = base + (s < extra ? 1 : 0);
			if (l < start + cnt)
				return s;
			start += cnt;
		}
		return pp - 1;
	}
	for (size_t i = 0; i < p->nlast; i++)
		if (regexec(&p->last[i].re, name, 0, NULL, 0) == 0)
			return pp - 1;
	return 0;
}
