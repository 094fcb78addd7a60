/* tpc_rules.c - the remap stage; see tpc_rules.h. The rule list and its
 * plan over a checkpoint are here; rules files and presets are
 * tpc_rules_doc.c, expected keys tpc_keys.c. */
#include "tpc_regex.h"
#include "tpc_rules.h"

#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_cast.h"
#include "tpc_rules_int.h"
#include "tpc_util.h"

#define MAX_GROUPS 10     /* \0 .. \9 */

/* A size or group count: terms joined by '*' and '/', each an integer or a
 * fact. */
#define MAX_TERMS 8
typedef struct expr {
	char *text;
	int n;
	int64_t lit[MAX_TERMS];
	int fact[MAX_TERMS]; /* -1: the literal */
	char op[MAX_TERMS];  /* before term i (i > 0) */
} expr;

typedef struct upart {
	char *to;    /* NULL: left out (or the rule has one "to") */
	expr size;
	int sized;   /* 0 none, 1 expression, 2 "rest" */
} upart;

typedef struct rule {
	tpc_rule_kind kind;
	char *arg;    /* prefix or pattern text */
	char *to;     /* rename replacement (validated) */
	char *when, *unless;
	char *origin;
	regex_t re, re_when, re_unless;
	bool has_re, has_when, has_unless;
	tpc_dtype dtype;
	bool optional, ints;
	/* unfuse */
	int dim;
	expr groups;  /* n == 0: 1 */
	upart *parts;
	int nparts;
	/* rope_halves, rope_pairs */
	expr heads, head_dim; /* head_dim.n == 0: not checked */
} rule;

/* Rules are allocated one by one: a compiled regex_t is not guaranteed to
 * survive being moved by realloc. */
struct tpc_rules {
	rule **v;
	size_t n, cap;
	int64_t fact[TPC_NFACTS];
	char *fact_from[TPC_NFACTS];
};

static const char *kind_name(tpc_rule_kind k)
{
	switch (k) {
	case TPC_RULE_SELECT: return "select";
	case TPC_RULE_DROP: return "drop";
	case TPC_RULE_KEEP: return "keep";
	case TPC_RULE_RENAME: return "rename";
	case TPC_RULE_STRIP_PREFIX: return "strip_prefix";
	case TPC_RULE_ADD_PREFIX: return "add_prefix";
	case TPC_RULE_TRANSPOSE: return "transpose";
	case TPC_RULE_DTYPE: return "dtype";
	case TPC_RULE_UNFUSE: return "unfuse";
	case TPC_RULE_ROPE_HALVES: return "rope_halves";
	case TPC_RULE_ROPE_PAIRS: return "rope_pairs";
	}
	return "?";
}

/* ---- lifecycle ---- */

tpc_rules *tpc_rules_new(void)
{
	return calloc(1, sizeof(tpc_rules));
}

static void rule_release(rule *x)
{
	if (x->has_re)
		regfree(&x->re);
	if (x->has_when)
		regfree(&x->re_when);
	if (x->has_unless)
		regfree(&x->re_unless);
	free(x->arg);
	free(x->to);
	free(x->when);
	free(x->unless);
	free(x->origin);
	free(x->groups.text);
	free(x->heads.text);
	free(x->head_dim.text);
	for (int i = 0; x->parts && i < x->nparts; i++) {
		free(x->parts[i].to);
		free(x->parts[i].size.text);
	}
	free(x->parts);
	memset(x, 0, sizeof(*x));
}

void tpc_rules_free(tpc_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		rule_release(r->v[i]);
		free(r->v[i]);
	}
	for (int f = 0; f < TPC_NFACTS; f++)
		free(r->fact_from[f]);
	free(r->v);
	free(r);
}

size_t tpc_rules_count(const tpc_rules *r)
{
	return r ? r->n : 0;
}

/* ---- model facts and size expressions ---- */

static const char *const fact_names[TPC_NFACTS] = {
	"heads", "kv_heads", "head_dim", "hidden", "vocab",
};
static const char *const fact_what[TPC_NFACTS] = {
	"the number of attention heads", "the number of key/value heads (Megatron's query groups)",
	"the size of a head (Megatron's kv_channels)", "the hidden size",
	"the tokenizer's vocabulary size (unpadded)",
};

const char *tpc_rules_fact_name(int f)
{
	return f >= 0 && f < TPC_NFACTS ? fact_names[f] : NULL;
}

int tpc_rules_set_fact(tpc_rules *r, int f, int64_t value, const char *from, tpc_err *e)
{
	if (f < 0 || f >= TPC_NFACTS || value <= 0)
		return tpc_err_set(e, TPC_EUSAGE, "internal: fact %d = %lld", f, (long long)value);
	if (r->fact[f])
		return 0;
	if (!(r->fact_from[f] = tpc_strdup(from ? from : "the caller")))
		return tpc_err_nomem(e);
	r->fact[f] = value;
	return 0;
}

int64_t tpc_rules_get_fact(const tpc_rules *r, int f, const char **from)
{
	if (from)
		*from = f >= 0 && f < TPC_NFACTS ? r->fact_from[f] : NULL;
	return f >= 0 && f < TPC_NFACTS ? r->fact[f] : 0;
}

static unsigned expr_facts(const expr *x)
{
	unsigned m = 0;
	for (int i = 0; i < x->n; i++)
		if (x->fact[i] >= 0)
			m |= 1u << x->fact[i];
	return m;
}

unsigned tpc_rules_facts_used(const tpc_rules *r)
{
	unsigned m = 0;
	for (size_t i = 0; r && i < r->n; i++) {
		m |= expr_facts(&r->v[i]->groups) | expr_facts(&r->v[i]->heads) | expr_facts(&r->v[i]->head_dim);
		for (int k = 0; k < r->v[i]->nparts; k++)
			m |= expr_facts(&r->v[i]->parts[k].size);
	}
	return m;
}

/* "heads/kv_heads*head_dim": terms (a positive integer or a fact name) joined
 * by '*' and '/'; spaces around them are allowed. */
static int parse_expr(expr *x, const char *text, const char *what, const char *origin, tpc_err *e)
{
	const char *p = text;
	char san[96];
	memset(x, 0, sizeof(*x));
	tpc_sanitize(san, sizeof(san), text);
	for (;;) {
		while (*p == ' ')
			p++;
		const char *a = p;
		while ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')
			p++;
		size_t l = (size_t)(p - a);
		if (!l)
			return tpc_err_set(e, TPC_EUSAGE, "%s: %s '%s': expected a number or a fact (%s, %s, %s, %s, %s)",
					   origin, what, san, fact_names[0], fact_names[1], fact_names[2], fact_names[3],
					   fact_names[4]);
		if (x->n == MAX_TERMS)
			return tpc_err_set(e, TPC_EUSAGE, "%s: %s '%s': more than %d terms", origin, what, san, MAX_TERMS);
		x->fact[x->n] = -1;
		if (*a >= '0' && *a <= '9') {
			int64_t v = 0;
			for (const char *q = a; q < p; q++) {
				if (*q < '0' || *q > '9' || v > (INT64_C(1) << 40))
					return tpc_err_set(e, TPC_EUSAGE, "%s: %s '%s': bad number '%.*s'", origin, what, san,
							   (int)(l < 40 ? l : 40), a);
				v = v * 10 + (*q - '0');
			}
			if (!v)
				return tpc_err_set(e, TPC_EUSAGE, "%s: %s '%s': a term is 0", origin, what, san);
			x->lit[x->n] = v;
		} else {
			for (int f = 0; f < TPC_NFACTS; f++)
				if (strlen(fact_names[f]) == l && !strncmp(a, fact_names[f], l))
					x->fact[x->n] = f;
			if (x->fact[x->n] < 0)
				return tpc_err_set(e, TPC_EUSAGE,
						   "%s: %s '%s': unknown fact '%.*s' (facts: %s, %s, %s, %s, %s)", origin,
						   what, san, (int)(l < 40 ? l : 40), a, fact_names[0], fact_names[1],
						   fact_names[2], fact_names[3], fact_names[4]);
		}
		x->n++;
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		if (*p != '*' && *p != '/')
			return tpc_err_set(e, TPC_EUSAGE, "%s: %s '%s': unexpected '%c' (terms are joined by * and /)",
					   origin, what, san, (*p >= 0x20 && *p < 0x7f) ? *p : '?');
		x->op[x->n] = *p++;
	}
	if (!(x->text = tpc_strdup(text)))
		return tpc_err_nomem(e);
	return 0;
}

/* Evaluate; *need gets the first unknown fact (then 0 is returned), -1 if none. */
static int eval_expr(const tpc_rules *r, const expr *x, int64_t *out, int *need, char *why, size_t nwhy)
{
	int64_t v = 0;
	*need = -1;
	for (int i = 0; i < x->n; i++) {
		int64_t t = x->fact[i] >= 0 ? r->fact[x->fact[i]] : x->lit[i];
		if (!t) {
			*need = x->fact[i];
			return -1;
		}
		if (!i) {
			v = t;
		} else if (x->op[i] == '*') {
			if (v > INT64_MAX / t) {
				snprintf(why, nwhy, "'%s' overflows", x->text);
				return -1;
			}
			v *= t;
		} else {
			if (v % t) {
				snprintf(why, nwhy, "'%s': %lld / %lld does not divide", x->text, (long long)v, (long long)t);
				return -1;
			}
			v /= t;
		}
	}
	*out = x->n ? v : 1;
	return 0;
}

/* ---- regular expressions ---- */

static int compile_re(regex_t *re, const char *pat, const char *what, const char *origin,
		      tpc_err *e)
{
	char why[256];
	int rc = tpc_regex_compile(re, pat, 0, why, sizeof(why));
	if (rc < 0)
		return tpc_err_nomem(e);
	if (rc && !strcmp(why, TPC_REGEX_TOO_COSTLY))
		return tpc_err_set(e, TPC_EUSAGE, "%s: bad %s '%.64s%s': %s", origin, what, pat,
				   strlen(pat) > 64 ? "..." : "", why);
	if (rc)
		return tpc_err_set(e, TPC_EUSAGE, "%s: bad %s '%s': %s", origin, what, pat, why);
	return 0;
}

static bool re_find(const regex_t *re, const char *s)
{
	return regexec(re, s, 0, NULL, 0) == 0;
}

/* Check a replacement's escapes against the pattern's group count. */
static int check_repl(const char *to, size_t nsub, const char *origin, tpc_err *e)
{
	for (const char *p = to; *p; p++) {
		if (*p != '\\')
			continue;
		p++;
		if (*p == '\\')
			continue;
		if (*p >= '0' && *p <= '9') {
			size_t g = (size_t)(*p - '0');
			if (g > nsub)
				return tpc_err_set(e, TPC_EUSAGE,
						   "%s: replacement '%s' refers to group \\%zu but the pattern has %zu group%s",
						   origin, to, g, nsub, nsub == 1 ? "" : "s");
			continue;
		}
		return tpc_err_set(e, TPC_EUSAGE,
				   "%s: replacement '%s': unknown escape '\\%c' (use \\1..\\9, \\0 or \\\\)",
				   origin, to, *p ? *p : ' ');
	}
	return 0;
}

/*
 * Replace every non-overlapping match of re in s, as Python's re.sub: after a
 * match the search goes on where it ended; an empty match copies one more
 * character first. Later searches pass REG_NOTBOL so '^' anchors only at the
 * start of the name.
 */
#define RENAME_MAX 65536u /* longest name a rename may produce (unless it shrinks one) */
static int substitute(const regex_t *re, const char *to, const char *s, tpc_buf *out)
{
	regmatch_t m[MAX_GROUPS];
	size_t pos = 0, len = strlen(s);
	int flags = 0;
	while (pos <= len) {
		if (regexec(re, s + pos, MAX_GROUPS, m, flags))
			break;
		tpc_buf_add(out, s + pos, (size_t)m[0].rm_so);
		for (const char *p = to; *p; p++) {
			if (out->len > RENAME_MAX && out->len > len)
				goto done; /* too long already: the caller refuses it */
			if (*p == '\\' && p[1] == '\\') {
				tpc_buf_addc(out, '\\');
				p++;
			} else if (*p == '\\' && p[1] >= '0' && p[1] <= '9') {
				const regmatch_t *g = &m[p[1] - '0'];
				if (g->rm_so >= 0)
					tpc_buf_add(out, s + pos + g->rm_so, (size_t)(g->rm_eo - g->rm_so));
				p++;
			} else {
				tpc_buf_addc(out, *p);
			}
		}
		size_t end = pos + (size_t)m[0].rm_eo;
		if (m[0].rm_eo == m[0].rm_so) {
			if (end < len)
				tpc_buf_addc(out, s[end]);
			end++;
		}
		pos = end;
		flags = REG_NOTBOL;
	}
	if (pos < len)
		tpc_buf_add(out, s + pos, len - pos);
done:
	tpc_buf_addc(out, '\0');
	return out->oom ? -1 : 0;
}

/* ---- building the list ---- */

static bool is_rope(tpc_rule_kind k)
{
	return k == TPC_RULE_ROPE_HALVES || k == TPC_RULE_ROPE_PAIRS;
}

static bool kind_has_re(tpc_rule_kind k)
{
	return k == TPC_RULE_DROP || k == TPC_RULE_KEEP || k == TPC_RULE_RENAME ||
	       k == TPC_RULE_TRANSPOSE || k == TPC_RULE_UNFUSE || is_rope(k);
}

/* The heads (required) and head_dim (optional) of a rope rule. */
static int add_rope(rule *x, const tpc_rule_spec *s, const char *origin, tpc_err *e)
{
	int ret;
	if (!is_rope(s->kind))
		return s->heads || s->head_dim
			       ? tpc_err_set(e, TPC_EUSAGE, "%s: \"heads\" and \"head_dim\" apply to rope_halves and rope_pairs rules only", origin)
			       : 0;
	if (!s->heads)
		return tpc_err_set(e, TPC_EUSAGE, "%s: %s needs \"heads\" (the heads in the rows: \"heads\", \"kv_heads\")", origin,
				   kind_name(s->kind));
	if ((ret = parse_expr(&x->heads, s->heads, "heads", origin, e)))
		return ret;
	return s->head_dim ? parse_expr(&x->head_dim, s->head_dim, "head_dim", origin, e) : 0;
}

/* The unfuse fields of a rule: parts, sizes, groups, dim (checked here, so a
 * plan only meets tensors that do not fit). */
static int add_unfuse(rule *x, const tpc_rule_spec *s, const char *origin, tpc_err *e)
{
	int ret = 0, nsized = 0, nrest = 0, nto = 0;
	if (s->nparts < 1 || !s->parts)
		return tpc_err_set(e, TPC_EUSAGE, "%s: unfuse needs \"parts\" (a list of {\"to\": ..., \"size\": ...})",
				   origin);
	if (s->nparts > TPC_RULES_MAX_PARTS)
		return tpc_err_set(e, TPC_EUSAGE, "%s: unfuse has %d parts (at most %d)", origin, s->nparts,
				   TPC_RULES_MAX_PARTS);
	if (s->dim < 0 || s->dim >= TPC_MAX_NDIM)
		return tpc_err_set(e, TPC_EUSAGE, "%s: unfuse \"dim\" must be 0..%d", origin, TPC_MAX_NDIM - 1);
	x->dim = s->dim;
	if (s->groups && (ret = parse_expr(&x->groups, s->groups, "groups", origin, e)))
		return ret;
	if (!(x->parts = tpc_calloc((size_t)s->nparts, sizeof(*x->parts))))
		return tpc_err_nomem(e);
	x->nparts = s->nparts; /* zeroed: rule_release frees what is set */
	for (int k = 0; k < s->nparts; k++) {
		const tpc_rule_part *p = &s->parts[k];
		upart *u = &x->parts[k];
		char what[32];
		snprintf(what, sizeof(what), "part %d size", k + 1);
		if (p->to) {
			if (s->to)
				return tpc_err_set(e, TPC_EUSAGE,
						   "%s: unfuse has \"to\" on the rule (one tensor) and on part %d; give one or the other",
						   origin, k + 1);
			if ((ret = check_repl(p->to, x->re.re_nsub, origin, e)))
				return ret;
			if (!(u->to = tpc_strdup(p->to)))
				return tpc_err_nomem(e);
			nto++;
		}
		if (p->size && !strcmp(p->size, "rest")) {
			u->sized = 2;
			nrest++;
		} else if (p->size) {
			if ((ret = parse_expr(&u->size, p->size, what, origin, e)))
				return ret;
			u->sized = 1;
		}
		nsized += p->size != NULL;
	}
	if (!s->to && !nto)
		return tpc_err_set(e, TPC_EUSAGE, "%s: unfuse names no part (give parts a \"to\", or the rule one \"to\")",
				   origin);
	if (nsized && nsized != s->nparts)
		return tpc_err_set(e, TPC_EUSAGE, "%s: unfuse gives %d of %d parts a size; give every part one, or none (equal parts)",
				   origin, nsized, s->nparts);
	if (nrest > 1)
		return tpc_err_set(e, TPC_EUSAGE, "%s: unfuse has %d parts of size \"rest\" (at most one)", origin, nrest);
	return 0;
}

int tpc_rules_add(tpc_rules *r, const tpc_rule_spec *s, const char *origin, tpc_err *e)
{
	rule *xp = NULL;
	int ret = 0;
	if (!origin)
		origin = kind_name(s->kind);
	if (tpc_grow((void **)&r->v, &r->cap, r->n + 1, sizeof(*r->v)) ||
	    !(xp = calloc(1, sizeof(*xp))))
		return tpc_err_nomem(e);
	xp->kind = s->kind;
	xp->dtype = s->dtype;
	xp->optional = s->optional;
	xp->ints = s->ints;
	xp->origin = tpc_strdup(origin);
	if (!xp->origin) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (s->kind < TPC_RULE_SELECT || s->kind > TPC_RULE_ROPE_PAIRS) {
		ret = tpc_err_set(e, TPC_EUSAGE, "%s: unknown rule kind", origin);
		goto out;
	}
	if (s->kind == TPC_RULE_DTYPE) {
		if (!tpc__cast_target(s->dtype)) {
			ret = tpc_err_set(e, TPC_EUSAGE, "%s: dtype must be bf16, f16, f32 or f64", origin);
			goto out;
		}
	} else if (!s->arg) {
		ret = tpc_err_set(e, TPC_EUSAGE, "%s: %s needs a %s", origin, kind_name(s->kind),
				  kind_has_re(s->kind) ? "pattern" : "prefix");
		goto out;
	}
	if ((s->kind == TPC_RULE_SELECT || s->kind == TPC_RULE_STRIP_PREFIX ||
	     s->kind == TPC_RULE_ADD_PREFIX) && !*s->arg) {
		ret = tpc_err_set(e, TPC_EUSAGE, "%s: empty prefix", origin);
		goto out;
	}
	if (s->kind == TPC_RULE_SELECT && (s->when || s->unless || s->match)) {
		ret = tpc_err_set(e, TPC_EUSAGE, "%s: select takes no condition", origin);
		goto out;
	}
	if (s->kind == TPC_RULE_RENAME && !s->to) {
		ret = tpc_err_set(e, TPC_EUSAGE, "%s: rename needs a replacement (\"to\")", origin);
		goto out;
	}
	if (s->kind != TPC_RULE_RENAME && s->kind != TPC_RULE_UNFUSE && s->to) {
		ret = tpc_err_set(e, TPC_EUSAGE, "%s: only rename and unfuse take a replacement", origin);
		goto out;
	}
	if (s->kind != TPC_RULE_UNFUSE && (s->parts || s->nparts || s->groups || s->dim)) {
		ret = tpc_err_set(e, TPC_EUSAGE, "%s: \"parts\", \"groups\" and \"dim\" apply to unfuse rules only", origin);
		goto out;
	}
	if (s->kind != TPC_RULE_DTYPE && s->ints) {
		ret = tpc_err_set(e, TPC_EUSAGE, "%s: \"ints\" applies to dtype rules only", origin);
		goto out;
	}
	if (s->when && s->match) {
		ret = tpc_err_set(e, TPC_EUSAGE, "%s: give \"when\" or \"match\", not both", origin);
		goto out;
	}
	if (s->arg && !(xp->arg = tpc_strdup(s->arg))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (kind_has_re(s->kind)) {
		if ((ret = compile_re(&xp->re, s->arg, "pattern", origin, e)))
			goto out;
		xp->has_re = true;
	}
	const char *when = s->when ? s->when : s->match;
	if (when) {
		if (!(xp->when = tpc_strdup(when))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		if ((ret = compile_re(&xp->re_when, when, "condition", origin, e)))
			goto out;
		xp->has_when = true;
	}
	if (s->unless) {
		if (!(xp->unless = tpc_strdup(s->unless))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		if ((ret = compile_re(&xp->re_unless, s->unless, "condition", origin, e)))
			goto out;
		xp->has_unless = true;
	}
	if (s->to) {
		if ((ret = check_repl(s->to, xp->re.re_nsub, origin, e)))
			goto out;
		if (!(xp->to = tpc_strdup(s->to))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
	}
	if ((s->kind == TPC_RULE_UNFUSE && (ret = add_unfuse(xp, s, origin, e))) || (ret = add_rope(xp, s, origin, e)))
		goto out;
	r->v[r->n++] = xp;
	return 0;
out:
	rule_release(xp);
	free(xp);
	return ret;
}

static const char *describe_rule(const rule *x, char *buf, size_t n)
{
	size_t len = 0;
	if (!n)
		return buf;
	buf[0] = '\0';
#define ADD(...) tpc_appendf(buf, n, &len, __VA_ARGS__)
	if (x->kind == TPC_RULE_DTYPE)
		ADD("dtype %s", tpc_dtype_name(x->dtype));
	else
		ADD("%s '%s'", kind_name(x->kind), x->arg);
	if (x->to)
		ADD(" -> '%s'", x->to);
	for (int k = 0; k < x->nparts; k++) {
		const upart *u = &x->parts[k];
		ADD("%s", k ? ", " : x->to ? " from parts " : " into ");
		if (x->to)
			ADD("part %d", k + 1);
		else if (u->to)
			ADD("'%s'", u->to);
		else
			ADD("(left out)");
		if (u->sized)
			ADD(" [%s]", u->sized == 2 ? "rest" : u->size.text);
	}
	if (x->groups.n)
		ADD(" x %s groups", x->groups.text);
	if (x->heads.n)
		ADD(" over %s heads%s%s", x->heads.text, x->head_dim.n ? " of head_dim " : "", x->head_dim.n ? x->head_dim.text : "");
	if (x->dim)
		ADD(" along dim %d", x->dim);
	if (x->when)
		ADD(" %s '%s'", x->kind == TPC_RULE_DTYPE ? "for" : "when", x->when);
	if (x->unless)
		ADD(" unless '%s'", x->unless);
	if (x->ints)
		ADD(" (integers too)");
	ADD(" (%s)", x->origin);
#undef ADD
	return buf;
}

const char *tpc_rules_describe(const tpc_rules *r, size_t i, char *buf, size_t n)
{
	if (n)
		buf[0] = '\0';
	if (!r || i >= r->n)
		return buf;
	return describe_rule(r->v[i], buf, n);
}

/* ---- planning ---- */

void tpc_remap_init(tpc_remap *m)
{
	memset(m, 0, sizeof(*m));
}

void tpc_remap_release(tpc_remap *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->name ? m->name[i] : NULL);
	free(m->name);
	free(m->dropped_by);
	free(m->transpose);
	free(m->dtype);
	free(m->hits);
	for (size_t i = m->n0; i < m->n; i++) {
		if (m->derived)
			tpc_tensor_release(&m->derived[i - m->n0]);
		free(m->how ? m->how[i - m->n0] : NULL);
	}
	free(m->derived);
	free(m->how);
	free(m->parent);
	free(m->unfused);
	tpc_free_strv(m->select, m->nselect);
	memset(m, 0, sizeof(*m));
}

/* Entry i's tensor as planned so far (before transposes and casts). */
static const tpc_tensor *ent(const tpc_ckpt *ck, const tpc_remap *m, size_t i)
{
	return i < m->n0 ? &ck->t[i] : &m->derived[i - m->n0];
}

/* The checkpoint name entry i comes from. */
static const char *src_name(const tpc_ckpt *ck, const tpc_remap *m, size_t i)
{
	while (i >= m->n0)
		i = (size_t)m->parent[i];
	return ck->t[i].name;
}

/* Room for `need` entries in every per-entry array. */
static int remap_grow(tpc_remap *m, size_t need)
{
	size_t cap = m->cap, nd;
	if (need <= cap)
		return 0;
	cap = cap * 2 > need ? cap * 2 : need;
	if (cap > SIZE_MAX / sizeof(tpc_tensor))
		return -1;
	nd = cap - m->n0;
#define GROW(f, n)                                                              \
	do {                                                                    \
		void *p_ = tpc_realloc(m->f, (n) * sizeof(*m->f));              \
		if (!p_)                                                        \
			return -1;                                              \
		m->f = p_;                                                      \
	} while (0)
	GROW(name, cap);
	GROW(dropped_by, cap);
	GROW(transpose, cap);
	GROW(dtype, cap);
	GROW(parent, cap);
	GROW(unfused, cap);
	GROW(derived, nd);
	GROW(how, nd);
#undef GROW
	m->cap = cap;
	return 0;
}

static bool cond_ok(const rule *x, const char *s)
{
	if (x->has_when && !re_find(&x->re_when, s))
		return false;
	if (x->has_unless && re_find(&x->re_unless, s))
		return false;
	return true;
}

static bool has_prefix(const char *s, const char *p, size_t plen)
{
	return !strncmp(s, p, plen);
}

/* Replace m->name[i] by a new malloc'd string. */
static int set_name(tpc_remap *m, size_t i, char *s, tpc_err *e)
{
	if (!s)
		return tpc_err_nomem(e);
	free(m->name[i]);
	m->name[i] = s;
	return 0;
}

static int cmp_name_idx(const void *a, const void *b, void *ctx)
{
	char **names = ctx;
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	int c = strcmp(names[x], names[y]);
	return c ? c : (x < y ? -1 : x > y);
}

static int check_collisions(const tpc_ckpt *ck, tpc_remap *m, tpc_err *e)
{
	int64_t *idx = tpc_malloc(m->nkept * sizeof(*idx));
	size_t k = 0;
	int ret = 0;
	if (!idx)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < m->n; i++)
		if (m->name[i])
			idx[k++] = (int64_t)i;
	qsort_r(idx, k, sizeof(*idx), cmp_name_idx, m->name);
	for (size_t j = 0; j + 1 < k; j++) {
		int64_t a = idx[j], b = idx[j + 1];
		if (!strcmp(m->name[a], m->name[b])) {
			ret = tpc_err_set(e, TPC_EUSAGE,
					  "name collision: tensors '%s' and '%s' would both be named '%s'",
					  src_name(ck, m, (size_t)a), src_name(ck, m, (size_t)b), m->name[a]);
			break;
		}
	}
	free(idx);
	return ret;
}

/* An unfuse error about entry i: the rule, the message, the tensor. */
static int unfuse_err(const tpc_ckpt *ck, const tpc_remap *m, const rule *x, size_t i, tpc_err *e, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
static int unfuse_err(const tpc_ckpt *ck, const tpc_remap *m, const rule *x, size_t i, tpc_err *e, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tpc_err_at(e, TPC_EUSAGE, NULL, src_name(ck, m, i), "%s '%s' (%s): %s", kind_name(x->kind), x->arg, x->origin, msg);
}

static int need_fact(const tpc_ckpt *ck, const tpc_remap *m, const rule *x, size_t i, int f, const char *what,
		     tpc_err *e)
{
	return unfuse_err(ck, m, x, i, e, "the %s needs %s ('%s'), which is not known: give --%s N or --config config.json%s",
			  what, fact_what[f], fact_names[f],
			  f == TPC_FACT_KV_HEADS ? "kv-heads" : f == TPC_FACT_HEAD_DIM ? "head-dim" : fact_names[f],
			  f == TPC_FACT_VOCAB ? " (Megatron pads the vocabulary and does not record the tokenizer's size)"
			  : x->kind == TPC_RULE_UNFUSE ? " (a Megatron checkpoint records it in its args)" : "");
}

/* The parts' sizes along x->dim inside one group of `per` (equal parts,
 * the sizes given, what is left for "rest"), which must add up to `per`,
 * and their offsets. */
static int unfuse_sizes(const tpc_rules *r, const tpc_ckpt *ck, const tpc_remap *m, const rule *x, size_t i,
			const tpc_tensor *view, int64_t groups, int64_t per, int64_t *size, int64_t *off, tpc_buf *b,
			tpc_err *e)
{
	int64_t sum = 0;
	char why[160], shp[128];
	int need, rest = -1;
	why[0] = '\0';
	for (int p = 0; p < x->nparts; p++) {
		const upart *u = &x->parts[p];
		size[p] = 0;
		if (!u->sized) {
			if (per % x->nparts)
				return unfuse_err(ck, m, x, i, e, "%d equal parts do not divide %lld (dim %d of %s%s)", x->nparts,
						  (long long)per, x->dim, tpc_shape_str(view, shp, sizeof(shp)),
						  groups > 1 ? ", per group" : "");
			size[p] = per / x->nparts;
		} else if (u->sized == 2) {
			rest = p;
		} else if (eval_expr(r, &u->size, &size[p], &need, why, sizeof(why))) {
			char what[32];
			snprintf(what, sizeof(what), "size of part %d", p + 1);
			return need >= 0 ? need_fact(ck, m, x, i, need, what, e) : unfuse_err(ck, m, x, i, e, "part %d size %s", p + 1, why);
		}
		if (size[p] > per || sum > per - size[p]) {
			sum = per + 1;
			break;
		}
		sum += size[p];
	}
	if (rest >= 0 && sum <= per)
		size[rest] = per - sum, sum = per;
	if (sum != per) {
		tpc_buf_reset(b);
		for (int p = 0; p < x->nparts; p++)
			tpc_buf_addf(b, "%s%lld", p ? " + " : "", (long long)size[p]);
		return unfuse_err(ck, m, x, i, e, "the parts (%s) do not add up to %lld, dim %d of %s%s%lld group%s", b->p ? b->p : "",
				  (long long)per, x->dim, tpc_shape_str(view, shp, sizeof(shp)), groups > 1 ? " over " : " in ",
				  (long long)groups, groups == 1 ? "" : "s");
	}
	for (int p = 0; p < x->nparts; p++)
		off[p] = p ? off[p - 1] + size[p - 1] : 0;
	return 0;
}

/* The names of the parts that have one, names[x->nparts] the rule's own
 * "to", as rename makes them from entry i's name. */
static int unfuse_names(const tpc_ckpt *ck, const tpc_remap *m, const rule *x, size_t i, char **names, tpc_buf *b,
			tpc_err *e)
{
	for (int p = 0; p <= x->nparts; p++) {
		const char *to = p == x->nparts ? x->to : x->parts[p].to;
		if (!to)
			continue;
		tpc_buf_reset(b);
		if (substitute(&x->re, to, m->name[i], b))
			return tpc_err_nomem(e);
		if (!b->p[0] || b->len - 1 > RENAME_MAX)
			return unfuse_err(ck, m, x, i, e, "part name '%s' is %s", to, b->p[0] ? "too long" : "empty");
		if (!(names[p] = tpc_strdup(b->p)))
			return tpc_err_nomem(e);
	}
	return 0;
}

/* pieces[p]: part p of every group of `view`, for the parts kept; with the
 * rule's one "to", pieces[0] is all of them, part by part, and names[0]
 * its name. */
static int unfuse_pieces(const rule *x, const tpc_tensor *view, int64_t groups, int64_t per, const int64_t *size,
			 const int64_t *off, tpc_tensor *pieces, char **names, tpc_err *e)
{
	for (int p = 0; p < x->nparts; p++)
		if ((x->to || names[p]) && tpc_tensor_ungroup(&pieces[p], view, x->dim, groups, per, off[p], size[p]))
			return tpc_err_nomem(e);
	if (x->to) {
		/* one tensor: every part of every group, part by part */
		tpc_tensor all;
		if (tpc_tensor_init_cat(&all, pieces, x->nparts, x->dim))
			return tpc_err_nomem(e);
		for (int p = 0; p < x->nparts; p++)
			tpc_tensor_release(&pieces[p]);
		pieces[0] = all;
		names[0] = names[x->nparts];
		names[x->nparts] = NULL;
		for (int p = 1; p < x->nparts; p++)
			memset(&pieces[p], 0, sizeof(pieces[p]));
	}
	return 0;
}

/* A new entry j taken from entry i: the description *t (moved out), its
 * name (moved out), what it is; entry i keeps its transpose and dtype. */
static int new_entry(tpc_remap *m, size_t i, tpc_tensor *t, char **name, const char *how, tpc_err *e)
{
	if (remap_grow(m, m->n + 1))
		return tpc_err_nomem(e);
	size_t j = m->n, d = j - m->n0;
	if (!(m->how[d] = tpc_strdup(how)))
		return tpc_err_nomem(e);
	m->derived[d] = *t;
	memset(t, 0, sizeof(*t));
	m->name[j] = *name;
	*name = NULL;
	m->dropped_by[j] = -1;
	m->transpose[j] = false;
	m->dtype[j] = m->dtype[i];
	m->parent[j] = (int64_t)i;
	m->unfused[j] = false;
	m->n++;
	m->nkept++;
	return 0;
}

/* Entry i is replaced (by rule k) by what was taken from it. */
static void replaced(tpc_remap *m, size_t i, size_t k)
{
	free(m->name[i]);
	m->name[i] = NULL;
	m->dropped_by[i] = (int64_t)k;
	m->unfused[i] = true;
	m->nkept--;
}

/* A new entry, taken from entry i, for each named piece (moved out of
 * pieces[] and names[]). */
static int unfuse_add(tpc_remap *m, const rule *x, size_t i, int64_t groups, int64_t per, const int64_t *size,
		      const int64_t *off, tpc_tensor *pieces, char **names, tpc_buf *b, tpc_err *e)
{
	for (int p = 0; p < (x->to ? 1 : x->nparts); p++) {
		if (!names[p])
			continue;
		tpc_buf_reset(b);
		if (x->to)
			tpc_buf_addf(b, "regrouped: %d parts x %lld groups -> part by part", x->nparts, (long long)groups);
		else if (groups > 1)
			tpc_buf_addf(b, "unfused: [%lld, %lld) of each of %lld groups of %lld", (long long)off[p],
				     (long long)(off[p] + size[p]), (long long)groups, (long long)per);
		else
			tpc_buf_addf(b, "unfused: [%lld, %lld)", (long long)off[p], (long long)(off[p] + size[p]));
		if (x->dim)
			tpc_buf_addf(b, " of dim %d", x->dim);
		int ret = b->oom ? tpc_err_nomem(e) : new_entry(m, i, &pieces[p], &names[p], b->p, e);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Entry i (its current name, the rule's pattern matched) is replaced by the
 * parts the rule takes from it: along x->dim it is `groups` repetitions of
 * [part 0; part 1; ...]; each named part becomes an entry (a composite of
 * views), or with the rule's one "to" one entry holding the parts in order.
 * A transpose planned for i is applied to the description first.
 */
static int plan_unfuse(const tpc_rules *r, const tpc_ckpt *ck, tpc_remap *m, const rule *x, size_t k, size_t i,
		       tpc_err *e)
{
	tpc_tensor view, *pieces = NULL;
	int64_t groups = 1, per, size[TPC_RULES_MAX_PARTS] = {0}, off[TPC_RULES_MAX_PARTS] = {0};
	char *names[TPC_RULES_MAX_PARTS + 1], why[160], shp[128];
	int need, ret = 0;
	tpc_buf b = TPC_BUF_INIT;
	const tpc_tensor *t = ent(ck, m, i);
	memset(names, 0, sizeof(names));
	memset(&view, 0, sizeof(view));
	why[0] = '\0';
	if (x->dim >= t->ndim)
		return unfuse_err(ck, m, x, i, e, "dim %d, but the tensor has %d dimension%s", x->dim, t->ndim,
				  t->ndim == 1 ? "" : "s");
	if (t->flags & (TPC_TF_QUANTIZED | TPC_TF_NODATA))
		return unfuse_err(ck, m, x, i, e, "a %s tensor cannot be taken apart",
				  (t->flags & TPC_TF_QUANTIZED) ? "quantized" : "meta");
	if (eval_expr(r, &x->groups, &groups, &need, why, sizeof(why)))
		return need >= 0 ? need_fact(ck, m, x, i, need, "group count", e) : unfuse_err(ck, m, x, i, e, "groups %s", why);
	if (tpc_tensor_copy(&view, t))
		return tpc_err_nomem(e);
	if (m->transpose[i])
		tpc_tensor_transpose2d(&view);
	int64_t dimsize = view.shape[x->dim];
	if (dimsize % groups) {
		ret = unfuse_err(ck, m, x, i, e, "%lld groups do not divide dim %d (%lld) of %s", (long long)groups, x->dim,
				 (long long)dimsize, tpc_shape_str(&view, shp, sizeof(shp)));
		goto out;
	}
	per = dimsize / groups;
	/* names first: the entry's name is freed below */
	if ((ret = unfuse_sizes(r, ck, m, x, i, &view, groups, per, size, off, &b, e)) ||
	    (ret = unfuse_names(ck, m, x, i, names, &b, e)))
		goto out;
	if (!(pieces = tpc_calloc((size_t)x->nparts, sizeof(*pieces)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = unfuse_pieces(x, &view, groups, per, size, off, pieces, names, e)) ||
	    (ret = unfuse_add(m, x, i, groups, per, size, off, pieces, names, &b, e)))
		goto out;
	replaced(m, i, k);
out:
	for (int p = 0; pieces && p < x->nparts; p++)
		tpc_tensor_release(&pieces[p]);
	free(pieces);
	for (int p = 0; p <= x->nparts; p++)
		free(names[p]);
	tpc_tensor_release(&view);
	tpc_buf_release(&b);
	return ret;
}

/* Entry i's rows, heads of x->heads, reordered between rotary pairs and
 * halves (tpc_tensor_rope_permute); a transpose planned for i is applied to
 * the description first. The facts must fit the rows. */
static int plan_rope(const tpc_rules *r, const tpc_ckpt *ck, tpc_remap *m, const rule *x, size_t k, size_t i,
		     tpc_err *e)
{
	tpc_tensor view, out;
	int64_t heads = 0, hd = 0;
	char why[160], how[160], *name = NULL;
	int need, ret = 0;
	const tpc_tensor *t = ent(ck, m, i);
	why[0] = '\0';
	if (t->ndim < 1 || (t->flags & (TPC_TF_QUANTIZED | TPC_TF_NODATA)))
		return unfuse_err(ck, m, x, i, e, "a %s tensor has no rows to reorder",
				  t->ndim < 1 ? "0-dimensional" : (t->flags & TPC_TF_QUANTIZED) ? "quantized" : "meta");
	if (eval_expr(r, &x->heads, &heads, &need, why, sizeof(why)) ||
	    (x->head_dim.n && eval_expr(r, &x->head_dim, &hd, &need, why, sizeof(why))))
		return need >= 0 ? need_fact(ck, m, x, i, need, need == TPC_FACT_HEAD_DIM ? "head size" : "head count", e)
				 : unfuse_err(ck, m, x, i, e, "%s", why);
	if (tpc_tensor_copy(&view, t))
		return tpc_err_nomem(e);
	if (m->transpose[i])
		tpc_tensor_transpose2d(&view);
	int64_t rows = view.shape[0];
	if (rows % (2 * heads) || (hd && rows != heads * hd)) {
		ret = hd ? unfuse_err(ck, m, x, i, e, "%lld rows are not %lld heads of head_dim %lld: a model fact is wrong",
				      (long long)rows, (long long)heads, (long long)hd)
			 : unfuse_err(ck, m, x, i, e, "%lld rows are not %lld heads of an even size", (long long)rows,
				      (long long)heads);
		goto out;
	}
	bool halves = x->kind == TPC_RULE_ROPE_HALVES;
	snprintf(how, sizeof(how), "rotary rows: %s -> %s, %lld heads of %lld", halves ? "pairs" : "halves",
		 halves ? "halves" : "pairs", (long long)heads, (long long)(rows / heads));
	if (tpc_tensor_rope_permute(&out, &view, heads, halves)) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (!(name = tpc_strdup(m->name[i])) || (ret = new_entry(m, i, &out, &name, how, e))) {
		ret = ret ? ret : tpc_err_nomem(e);
		tpc_tensor_release(&out);
		goto out;
	}
	replaced(m, i, k);
out:
	free(name);
	tpc_tensor_release(&view);
	return ret;
}

static int plan_rule(const tpc_rules *r, const tpc_ckpt *ck, tpc_remap *m, const rule *x, size_t k, tpc_err *e)
{
	tpc_buf b = TPC_BUF_INIT;
	int ret = 0;
	size_t plen = x->arg ? strlen(x->arg) : 0;

	if (x->kind == TPC_RULE_SELECT) {
		uint64_t under = 0;
		for (size_t i = 0; i < m->n; i++)
			if (m->name[i] && has_prefix(m->name[i], x->arg, plen) && m->name[i][plen] == '.')
				under++;
		if (!under)
			return 0; /* nothing under P.: no effect (warned unless optional) */
		for (size_t i = 0; i < m->n && !ret; i++) {
			if (!m->name[i])
				continue;
			if (has_prefix(m->name[i], x->arg, plen) && m->name[i][plen] == '.') {
				m->hits[k]++;
				ret = set_name(m, i, tpc_strdup(m->name[i] + plen + 1), e);
			} else {
				free(m->name[i]);
				m->name[i] = NULL;
				m->dropped_by[i] = (int64_t)k;
				m->nkept--;
			}
		}
		if (ret)
			return ret;
		size_t cap = m->nselect; /* no capacity kept: selects are few */
		if (tpc_grow((void **)&m->select, &cap, m->nselect + 1, sizeof(char *)))
			return tpc_err_nomem(e);
		if (!(m->select[m->nselect] = tpc_strdup(x->arg)))
			return tpc_err_nomem(e);
		m->nselect++;
		return 0;
	}

	for (size_t i = 0, n = m->n; i < n && !ret; i++) {
		const char *s = m->name[i];
		const tpc_tensor *t = ent(ck, m, i);
		if (!s || !cond_ok(x, s))
			continue;
		bool hit = x->has_re ? re_find(&x->re, s) : true;
		switch (x->kind) {
		case TPC_RULE_UNFUSE:
		case TPC_RULE_ROPE_HALVES:
		case TPC_RULE_ROPE_PAIRS:
			if (hit) {
				m->hits[k]++;
				ret = x->kind == TPC_RULE_UNFUSE ? plan_unfuse(r, ck, m, x, k, i, e) : plan_rope(r, ck, m, x, k, i, e);
			}
			break;
		case TPC_RULE_DROP:
		case TPC_RULE_KEEP:
			if (hit)
				m->hits[k]++;
			if (hit == (x->kind == TPC_RULE_DROP)) {
				free(m->name[i]);
				m->name[i] = NULL;
				m->dropped_by[i] = (int64_t)k;
				m->nkept--;
			}
			break;
		case TPC_RULE_RENAME:
			if (!hit)
				break;
			m->hits[k]++;
			tpc_buf_reset(&b);
			if (substitute(&x->re, x->to, s, &b)) {
				ret = tpc_err_nomem(e);
				break;
			}
			if (!b.p[0]) {
				char d[512];
				tpc_err_at(e, TPC_EUSAGE, NULL, src_name(ck, m, i), "%s turns the name into an empty string",
					    describe_rule(x, d, sizeof(d)));
				ret = TPC_EUSAGE;
				break;
			}
			/* "\\0\\0" doubles a name: forty such rules would ask for terabytes */
			if (b.len - 1 > RENAME_MAX && b.len - 1 > strlen(s)) {
				char d[512];
				tpc_err_at(e, TPC_EUSAGE, NULL, src_name(ck, m, i), "%s makes the name %zu bytes long (at most %u)",
					    describe_rule(x, d, sizeof(d)), b.len - 1, RENAME_MAX);
				ret = TPC_EUSAGE;
				break;
			}
			ret = set_name(m, i, tpc_strdup(b.p), e);
			break;
		case TPC_RULE_STRIP_PREFIX:
			if (has_prefix(s, x->arg, plen)) {
				m->hits[k]++;
				if (!s[plen]) {
					tpc_err_at(e, TPC_EUSAGE, NULL, src_name(ck, m, i), "strip_prefix '%s' (%s) leaves an empty name",
						    x->arg, x->origin);
					ret = TPC_EUSAGE;
					break;
				}
				ret = set_name(m, i, tpc_strdup(s + plen), e);
			}
			break;
		case TPC_RULE_ADD_PREFIX:
			m->hits[k]++;
			tpc_buf_reset(&b);
			tpc_buf_adds(&b, x->arg);
			tpc_buf_adds(&b, s);
			ret = b.oom ? tpc_err_nomem(e) : set_name(m, i, tpc_strdup(b.p), e);
			break;
		case TPC_RULE_TRANSPOSE:
			if (!hit)
				break;
			if (t->ndim != 2) {
				tpc_err_at(e, TPC_EUSAGE, NULL, src_name(ck, m, i),
					    "transpose '%s' (%s) matches a tensor with %d dimension%s; only 2-D tensors can be transposed",
					    x->arg, x->origin, t->ndim, t->ndim == 1 ? "" : "s");
				ret = TPC_EUSAGE;
				break;
			}
			m->hits[k]++;
			m->transpose[i] = !m->transpose[i];
			break;
		case TPC_RULE_DTYPE: {
			unsigned fl = tpc_dtype_get(t->dtype)->flags;
			bool castable = (fl & TPC_DTF_FLOAT) ||
					(x->ints && (fl & TPC_DTF_INT) && !(fl & TPC_DTF_QUANT));
			if (!castable || (t->flags & (TPC_TF_QUANTIZED | TPC_TF_NODATA)))
				break;
			if (!tpc_cast_supported(t->src_dtype, x->dtype)) {
				tpc_err_at(e, TPC_EUSAGE, NULL, src_name(ck, m, i), "dtype %s (%s): cannot cast %s to %s",
					    tpc_dtype_name(x->dtype), x->origin, tpc_dtype_name(t->src_dtype),
					    tpc_dtype_name(x->dtype));
				ret = TPC_EUSAGE;
				break;
			}
			m->hits[k]++;
			m->dtype[i] = x->dtype;
			break;
		}
		default:
			break;
		}
	}
	tpc_buf_release(&b);
	return ret;
}

int tpc_rules_plan(const tpc_rules *r, const tpc_ckpt *ck, tpc_remap *m, tpc_err *e)
{
	int ret = 0;
	size_t nr = tpc_rules_count(r);
	tpc_remap_init(m);
	m->n0 = ck->n;
	m->nrules = nr;
	m->hits = tpc_calloc(nr, sizeof(*m->hits));
	if (!m->hits || remap_grow(m, ck->n + 1)) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < ck->n; i++) {
		m->n = i + 1;
		m->name[i] = NULL;
		m->transpose[i] = false;
		m->parent[i] = -1;
		m->unfused[i] = false;
		m->dropped_by[i] = -1;
		m->dtype[i] = ck->t[i].dtype;
		if (!(m->name[i] = tpc_strdup(ck->t[i].name))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
	}
	m->nkept = ck->n;
	for (size_t k = 0; k < nr; k++)
		if ((ret = plan_rule(r, ck, m, r->v[k], k, e)))
			goto out;
	ret = check_collisions(ck, m, e);
out:
	if (ret)
		tpc_remap_release(m);
	return ret;
}

bool tpc_remap_unmatched(const tpc_rules *r, const tpc_remap *m, size_t i)
{
	return i < m->nrules && i < r->n && m->hits[i] == 0 && !r->v[i]->optional;
}

/* ---- applying ---- */

/* The subtree of `root` at dotted path `p`: dict keys may themselves hold dots
 * (a state_dict inside {"ema_model": {...}}), so at each level the shortest
 * dotted prefix that is a key is taken. NULL when there is none. */
static tpc_value *subtree(tpc_value *root, const char *p)
{
	char buf[1024];
	while (root && *p) {
		const char *dot = p;
		tpc_value *next = NULL;
		if (root->kind != TPC_V_DICT)
			return NULL;
		for (;;) {
			dot = strchr(dot, '.');
			size_t l = dot ? (size_t)(dot - p) : strlen(p);
			if (l >= sizeof(buf))
				return NULL;
			memcpy(buf, p, l);
			buf[l] = '\0';
			if ((next = tpc_value_get(root, buf)))
				break;
			if (!dot)
				return NULL;
			dot++;
		}
		root = next;
		p = dot ? dot + 1 : p + strlen(p);
	}
	return root;
}

static int cmp_pair(const void *a, const void *b)
{
	const size_t *x = a, *y = b;
	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* The kept entries in output order: each part an unfuse rule made where the
 * checkpoint tensor it came from was, parts in the order they were made.
 * *count receives how many; NULL on out of memory. */
static size_t *kept_order(const tpc_remap *m, size_t *count)
{
	size_t *pair = tpc_malloc(m->nkept * 2 * sizeof(size_t) + 1), *ord = tpc_malloc(m->nkept * sizeof(size_t) + 1);
	size_t c = 0;
	if (!pair || !ord) {
		free(pair);
		free(ord);
		return NULL;
	}
	for (size_t i = 0; i < m->n && c < m->nkept; i++) {
		if (!m->name[i])
			continue;
		size_t r = i;
		while (r >= m->n0)
			r = (size_t)m->parent[r];
		pair[2 * c] = r; /* (the checkpoint tensor it comes from, entry) */
		pair[2 * c + 1] = i;
		c++;
	}
	qsort(pair, c, 2 * sizeof(size_t), cmp_pair);
	for (size_t k = 0; k < c; k++)
		ord[k] = pair[2 * k + 1];
	free(pair);
	*count = c;
	return ord;
}

/* After the filter and the adds, ck holds the kept entries [0, n0) in order,
 * then the kept parts in order: put the parts in their places. */
static int place_parts(tpc_ckpt *ck, const tpc_remap *m, tpc_err *e)
{
	size_t c = 0, norig = 0;
	size_t *ord = kept_order(m, &c), *pos = tpc_malloc(m->n * sizeof(size_t) + 1);
	int64_t *order = tpc_malloc(ck->n * sizeof(int64_t) + 1);
	int ret = 0;
	if (!ord || !pos || !order) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (c != ck->n) {
		ret = tpc_err_set(e, TPC_EUSAGE, "internal: %zu tensors after the remap, %zu planned", ck->n, c);
		goto out;
	}
	for (size_t i = 0; i < m->n0; i++)
		if (m->name[i])
			pos[i] = norig++;
	for (size_t i = m->n0, b = norig; i < m->n; i++)
		if (m->name[i])
			pos[i] = b++;
	for (size_t j = 0; j < c; j++)
		order[j] = (int64_t)pos[ord[j]];
	ret = tpc_ckpt_permute(ck, order, e);
out:
	free(ord);
	free(pos);
	free(order);
	return ret;
}

int tpc_remap_apply(tpc_ckpt *ck, const tpc_remap *m, tpc_err *e)
{
	bool *keep = NULL;
	int ret = 0;
	if (m->n0 != ck->n)
		return tpc_err_set(e, TPC_EUSAGE, "internal: remap planned for %zu tensors, checkpoint has %zu",
				   m->n0, ck->n);
	/* The tree: the selected subtree becomes the root. */
	for (size_t s = 0; s < m->nselect && ck->root; s++) {
		tpc_value *sub = subtree(ck->root, m->select[s]);
		if (sub && sub->kind == TPC_V_DICT)
			tpc_value_ref(sub);
		else
			sub = NULL;
		tpc_value_unref(ck->root);
		ck->root = sub;
	}
	keep = tpc_malloc(ck->n * sizeof(*keep));
	if (!keep)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < ck->n; i++) {
		tpc_tensor *t = &ck->t[i];
		keep[i] = m->name[i] != NULL;
		if (!keep[i])
			continue;
		if (m->transpose[i])
			tpc_tensor_transpose2d(t);
		if (m->dtype[i] != t->dtype) {
			t->dtype = m->dtype[i];
			t->nbytes = t->numel * tpc_dtype_bits(t->dtype) / 8;
		}
		/* Names are set directly and the name index is rebuilt once by
		 * tpc_ckpt_filter below: tpc_ckpt_rename rebuilds it per call,
		 * O(n^2) for a whole-model rename, and would refuse a swap
		 * (a -> b, b -> a) half-way. The plan checked uniqueness. */
		if (strcmp(t->name, m->name[i])) {
			char *nn = tpc_strdup(m->name[i]);
			if (!nn) {
				ret = tpc_err_nomem(e);
				goto out;
			}
			free(t->name);
			t->name = nn;
		}
	}
	if ((ret = tpc_ckpt_filter(ck, keep, e)))
		goto out;
	/* the parts unfuse rules took out: descriptions over the same sources */
	for (size_t i = m->n0; i < m->n && !ret; i++) {
		tpc_tensor t;
		if (!m->name[i])
			continue;
		if (tpc_tensor_copy(&t, &m->derived[i - m->n0])) {
			ret = tpc_err_nomem(e);
			break;
		}
		if (m->transpose[i])
			tpc_tensor_transpose2d(&t);
		if (m->dtype[i] != t.dtype) {
			t.dtype = m->dtype[i];
			t.nbytes = t.numel * tpc_dtype_bits(t.dtype) / 8;
		}
		int64_t ix = tpc_ckpt_add_copy(ck, m->name[i], &t, e);
		tpc_tensor_release(&t);
		if (ix < 0)
			ret = (int)ix;
	}
	if (!ret && m->n > m->n0)
		ret = place_parts(ck, m, e);
	if (ret)
		goto out;
	for (size_t i = 0; i < ck->n; i++)
		if (tpc_ckpt_find(ck, ck->t[i].name) != (int64_t)i) {
			ret = tpc_err_set(e, TPC_EUSAGE, "internal: name index out of date after renaming '%s'",
					  ck->t[i].name);
			goto out;
		}
out:
	free(keep);
	return ret;
}

/* ---- dry-run table ---- */

/* Was entry i made by a rope rule (its parent replaced by one)? Entry i
 * itself, when it is a checkpoint tensor a rope rule replaced. */
static bool rope_made(const tpc_remap *m, const tpc_rules *r, size_t i)
{
	size_t p = i >= m->n0 ? (size_t)m->parent[i] : i;
	if (i < m->n0 && !m->unfused[i])
		return false;
	return m->unfused[p] && m->dropped_by[p] >= 0 && (size_t)m->dropped_by[p] < r->n &&
	       is_rope(r->v[m->dropped_by[p]]->kind);
}

void tpc_remap_table(const tpc_ckpt *ck, const tpc_remap *m, const tpc_rules *r, tpc_buf *out)
{
	char d[1024], s1[128], s2[128];
	size_t ndrop = 0, nren = 0, nunf = 0, nparts = 0, nrope = 0;
	for (size_t i = 0; i < m->n; i++) {
		/* a rope rule replaces a tensor by its reordered rows: kept */
		bool rope = rope_made(m, r, i);
		if (i < m->n0 && m->name[i] && strcmp(m->name[i], ck->t[i].name))
			nren++;
		nunf += m->unfused[i] && i < m->n0 && !rope;
		nrope += rope && m->name[i];
		nparts += i >= m->n0 && m->name[i] && !rope;
		ndrop += !m->name[i] && !m->unfused[i];
	}
	tpc_buf_addf(out, "# %zu tensors: %zu kept (%zu renamed", m->n0, m->nkept - nparts, nren);
	if (nrope)
		tpc_buf_addf(out, ", %zu with rotary rows reordered", nrope);
	if (nunf)
		tpc_buf_addf(out, "), %zu unfused into %zu, %zu dropped\n", nunf, nparts, ndrop);
	else
		tpc_buf_addf(out, "), %zu dropped\n", ndrop);
	size_t nord = 0, *ord = kept_order(m, &nord);
	if (!ord) {
		out->oom = true;
		return;
	}
	for (size_t j = 0; j < nord; j++) {
		size_t i = ord[j];
		const tpc_tensor *t = ent(ck, m, i);
		tpc__add_name(out, src_name(ck, m, i));
		tpc_buf_adds(out, " -> ");
		tpc__add_name(out, m->name[i]);
		if (i >= m->n0) {
			const tpc_tensor *p = ent(ck, m, (size_t)m->parent[i]);
			tpc_buf_addf(out, "  %s %s -> %s", m->how[i - m->n0], tpc_shape_str(p, s1, sizeof(s1)),
				     tpc_shape_str(t, s2, sizeof(s2)));
		}
		if (m->dtype[i] != t->dtype)
			tpc_buf_addf(out, "  %s -> %s", tpc_dtype_name(t->dtype), tpc_dtype_name(m->dtype[i]));
		if (m->transpose[i]) {
			tpc_tensor tt = *t;
			int64_t sh[2] = {t->shape[1], t->shape[0]};
			tt.shape = sh;
			tpc_buf_addf(out, "  transposed %s -> %s", tpc_shape_str(t, s1, sizeof(s1)),
				     tpc_shape_str(&tt, s2, sizeof(s2)));
		}
		tpc_buf_addc(out, '\n');
	}
	free(ord);
	if (ndrop)
		tpc_buf_addf(out, "# dropped (%zu)\n", ndrop);
	for (size_t i = 0; i < m->n; i++) {
		if (m->name[i] || m->unfused[i])
			continue;
		tpc__add_name(out, src_name(ck, m, i));
		if (m->dropped_by[i] >= 0)
			tpc_buf_addf(out, "  by %s",
				     tpc_rules_describe(r, (size_t)m->dropped_by[i], d, sizeof(d)));
		tpc_buf_addc(out, '\n');
	}
}
