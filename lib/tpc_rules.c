/* tpc_rules.c - the remap stage; see tpc_rules.h. */
#include "tpc_rules.h"

#include <cjson/cJSON.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_cast.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_util.h"

#define MAX_GROUPS 10     /* \0 .. \9 */
#define MAX_EXTENDS_DEPTH 8
#define MAX_RULES_FILE (16u << 20)
#define MAX_KEYS_FILE (256u << 20)

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
} rule;

/* Rules are allocated one by one: a compiled regex_t is not guaranteed to
 * survive being moved by realloc. */
struct tpc_rules {
	rule **v;
	size_t n, cap;
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
	}
	return "?";
}

/* ---- presets ---- */

static const struct preset {
	const char *name, *desc, *text;
} presets[] = {
	{"dalle2",
	 "DALLE2-pytorch decoder: ema_model if present, drop clip.*, .g -> .gamma in cross_attn and fn.fn. blocks",
	 "{\n"
	 "  \"description\": \"DALLE2-pytorch Decoder: take ema_model when present; skip keys containing 'clip.'; when 'cross_attn' or 'fn.fn.' is in the key and it ends with '.g', the final 'g' becomes 'gamma'\",\n"
	 "  \"rules\": [\n"
	 "    {\"select\": \"ema_model\", \"optional\": true},\n"
	 "    {\"drop\": \"clip\\\\.\"},\n"
	 "    {\"rename\": \"\\\\.g$\", \"to\": \".gamma\", \"when\": \"cross_attn|fn\\\\.fn\\\\.\"}\n"
	 "  ]\n"
	 "}\n"},
	{"libai",
	 "LiBai's loader (_fix_key): 'gamma' -> 'weight', 'beta' -> 'bias' (a key with both: only beta)",
	 "{\n"
	 "  \"description\": \"LiBai base_loader._fix_key: a key containing 'beta' has every 'beta' replaced by 'bias'; otherwise every 'gamma' by 'weight'\",\n"
	 "  \"rules\": [\n"
	 "    {\"rename\": \"gamma\", \"to\": \"weight\", \"unless\": \"beta\", \"optional\": true},\n"
	 "    {\"rename\": \"beta\", \"to\": \"bias\", \"optional\": true}\n"
	 "  ]\n"
	 "}\n"},
	{"strip-module",
	 "strip the 'module.' prefix that torch.nn.DataParallel / DistributedDataParallel add",
	 "{\n"
	 "  \"description\": \"torch.nn.DataParallel and DistributedDataParallel state dicts: strip 'module.'\",\n"
	 "  \"rules\": [\n"
	 "    {\"strip_prefix\": \"module.\"}\n"
	 "  ]\n"
	 "}\n"},
	{"gpt2-conv1d",
	 "transpose GPT-2 Conv1D weights [in, out] to Linear [out, in] (c_attn, q_attn, c_proj, c_fc)",
	 "{\n"
	 "  \"description\": \"HF GPT-2 Conv1D stores weight as [in, out]; nn.Linear wants [out, in]\",\n"
	 "  \"rules\": [\n"
	 "    {\"transpose\": \"(^|\\\\.)(c_attn|q_attn|c_proj|c_fc)\\\\.weight$\"}\n"
	 "  ]\n"
	 "}\n"},
};
#define NPRESETS (sizeof(presets) / sizeof(presets[0]))

size_t tpc_rules_preset_count(void)
{
	return NPRESETS;
}
const char *tpc_rules_preset_name(size_t i)
{
	return i < NPRESETS ? presets[i].name : NULL;
}
const char *tpc_rules_preset_desc(size_t i)
{
	return i < NPRESETS ? presets[i].desc : NULL;
}
const char *tpc_rules_preset_text(const char *name)
{
	for (size_t i = 0; i < NPRESETS; i++)
		if (!strcmp(presets[i].name, name))
			return presets[i].text;
	return NULL;
}

static void preset_list(char *buf, size_t n)
{
	size_t len = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < NPRESETS && len < n; i++)
		len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? ", " : "", presets[i].name);
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
	free(r->v);
	free(r);
}

size_t tpc_rules_count(const tpc_rules *r)
{
	return r ? r->n : 0;
}

/* ---- regular expressions ---- */

/*
 * Rewrite a Python-flavoured pattern into POSIX ERE: \d and \D become bracket
 * expressions; constructs that POSIX would misread instead of refusing
 * ((?...) groups, lazy quantifiers) are errors. Bracket expressions are
 * copied untouched (backslash is literal there in POSIX).
 */
static int translate_re(const char *pat, tpc_buf *out, const char **why)
{
	const char *p = pat;
	while (*p) {
		if (*p == '[') {
			const char *q = p + 1;
			if (*q == '^')
				q++;
			if (*q == ']')
				q++;
			while (*q && *q != ']') {
				if (*q == '[' && (q[1] == ':' || q[1] == '.' || q[1] == '=')) {
					char c = q[1];
					const char *end = q + 2;
					while (*end && !(end[0] == c && end[1] == ']'))
						end++;
					if (!*end) {
						*why = "unterminated [: :] class";
						return -1;
					}
					q = end + 2;
					continue;
				}
				q++;
			}
			if (!*q) {
				*why = "unterminated [ ] bracket expression";
				return -1;
			}
			tpc_buf_add(out, p, (size_t)(q + 1 - p));
			p = q + 1;
			continue;
		}
		if (*p == '\\') {
			if (!p[1]) {
				*why = "trailing backslash";
				return -1;
			}
			if (p[1] == 'd')
				tpc_buf_adds(out, "[0-9]");
			else if (p[1] == 'D')
				tpc_buf_adds(out, "[^0-9]");
			else
				tpc_buf_add(out, p, 2);
			p += 2;
			continue;
		}
		if (*p == '(' && p[1] == '?') {
			*why = "(?...) groups and lookaround are not POSIX extended regular expressions";
			return -1;
		}
		if ((*p == '*' || *p == '+' || *p == '?' || *p == '}') && p[1] == '?') {
			*why = "lazy quantifiers (*? +? ?? {}?) are not POSIX extended regular expressions";
			return -1;
		}
		tpc_buf_addc(out, *p++);
	}
	return 0;
}

static int compile_re(regex_t *re, const char *pat, const char *what, const char *origin,
		      tpc_err *e)
{
	tpc_buf b = TPC_BUF_INIT;
	const char *why = NULL;
	int rc;
	if (translate_re(pat, &b, &why)) {
		tpc_buf_release(&b);
		return tpc_err_set(e, TPC_EUSAGE, "%s: bad %s '%s': %s", origin, what, pat, why);
	}
	tpc_buf_addc(&b, '\0'); /* an empty pattern still needs a string */
	if (b.oom) {
		tpc_buf_release(&b);
		return tpc_err_nomem(e);
	}
	if (tpc_regex_cost(b.p) > TPC_REGEX_MAX_COST) {
		tpc_buf_release(&b);
		return tpc_err_set(e, TPC_EUSAGE, "%s: bad %s '%.64s%s': %s", origin, what, pat,
				   strlen(pat) > 64 ? "..." : "", TPC_REGEX_TOO_COSTLY);
	}
	rc = regcomp(re, b.p, REG_EXTENDED);
	tpc_buf_release(&b);
	if (rc) {
		char msg[256];
		regerror(rc, re, msg, sizeof(msg));
		return tpc_err_set(e, TPC_EUSAGE, "%s: bad %s '%s': %s", origin, what, pat, msg);
	}
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

static bool kind_has_re(tpc_rule_kind k)
{
	return k == TPC_RULE_DROP || k == TPC_RULE_KEEP || k == TPC_RULE_RENAME ||
	       k == TPC_RULE_TRANSPOSE;
}

static bool is_cast_target(tpc_dtype t)
{
	return t == TPC_F16 || t == TPC_BF16 || t == TPC_F32 || t == TPC_F64;
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
	if (s->kind < TPC_RULE_SELECT || s->kind > TPC_RULE_DTYPE) {
		ret = tpc_err_set(e, TPC_EUSAGE, "%s: unknown rule kind", origin);
		goto out;
	}
	if (s->kind == TPC_RULE_DTYPE) {
		if (!is_cast_target(s->dtype)) {
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
	if (s->kind != TPC_RULE_RENAME && s->to) {
		ret = tpc_err_set(e, TPC_EUSAGE, "%s: only rename takes a replacement", origin);
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
	r->v[r->n++] = xp;
	return 0;
out:
	rule_release(xp);
	free(xp);
	return ret;
}

/* ---- JSON rules documents ---- */

/* An error in the document itself, reported against its label (file name).
 * Errors from tpc_rules_add already name their origin ("FILE rule N"). */
static int doc_err(tpc_err *e, const char *label, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int doc_err(tpc_err *e, const char *label, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tpc_err_setv(e, TPC_EUSAGE, fmt, ap);
	va_end(ap);
	tpc_err_path(e, label);
	return TPC_EUSAGE;
}

static const char *const action_keys[] = {
	"select", "drop", "keep", "rename", "strip_prefix", "add_prefix", "transpose", "dtype",
};

static int parse_rule(tpc_rules *r, const cJSON *o, const char *label, size_t no, tpc_err *e)
{
	tpc_rule_spec s;
	char origin[512];
	const char *action = NULL;
	memset(&s, 0, sizeof(s));
	snprintf(origin, sizeof(origin), "%s rule %zu", label, no);
	if (!cJSON_IsObject(o))
		return doc_err(e, label, "rule %zu: not an object", no);
	for (const cJSON *it = o->child; it; it = it->next) {
		const char *k = it->string;
		bool is_action = false;
		for (size_t a = 0; a < sizeof(action_keys) / sizeof(action_keys[0]); a++)
			if (!strcmp(k, action_keys[a])) {
				if (action)
					return doc_err(e, label, "rule %zu: more than one action ('%s' and '%s'); use one rule each",
							   no, action, k);
				action = k;
				s.kind = (tpc_rule_kind)(TPC_RULE_SELECT + (int)a);
				is_action = true;
			}
		if (!strcmp(k, "optional") || !strcmp(k, "ints")) {
			if (!cJSON_IsBool(it))
				return doc_err(e, label, "rule %zu: '%s' must be true or false", no, k);
			if (k[0] == 'o')
				s.optional = cJSON_IsTrue(it);
			else
				s.ints = cJSON_IsTrue(it);
			continue;
		}
		bool known = is_action || !strcmp(k, "to") || !strcmp(k, "when") ||
			     !strcmp(k, "unless") || !strcmp(k, "match") || !strcmp(k, "comment");
		if (!known) {
			char san[128];
			tpc_sanitize(san, sizeof(san), k);
			return doc_err(e, label, "rule %zu: unknown key '%s' (actions: select drop keep rename strip_prefix add_prefix transpose dtype; modifiers: to when unless match optional ints comment)",
					   no, san);
		}
		if (!cJSON_IsString(it))
			return doc_err(e, label, "rule %zu: '%s' must be a string", no, k);
		const char *v = it->valuestring;
		if (is_action && s.kind == TPC_RULE_DTYPE) {
			s.dtype = tpc_dtype_parse(v);
			if (!is_cast_target(s.dtype)) {
				char san[64];
				tpc_sanitize(san, sizeof(san), v);
				return doc_err(e, label, "rule %zu: bad dtype '%s' (bf16, f16, f32 or f64)", no, san);
			}
		} else if (is_action) {
			s.arg = v;
		} else if (!strcmp(k, "to")) {
			s.to = v;
		} else if (!strcmp(k, "when")) {
			s.when = v;
		} else if (!strcmp(k, "unless")) {
			s.unless = v;
		} else if (!strcmp(k, "match")) {
			s.match = v;
		}
	}
	if (!action)
		return doc_err(e, label, "rule %zu: no action (one of select drop keep rename strip_prefix add_prefix transpose dtype)",
				   no);
	return tpc_rules_add(r, &s, origin, e);
}

static int from_buffer(tpc_rules *r, const char *text, size_t len, const char *label, int depth,
		       tpc_err *e);

static int add_extends(tpc_rules *r, const cJSON *x, const char *label, int depth, tpc_err *e)
{
	if (!cJSON_IsString(x))
		return doc_err(e, label, "'extends' must name a preset (a string or a list of strings)");
	const char *text = tpc_rules_preset_text(x->valuestring);
	if (!text) {
		char list[256], san[128];
		preset_list(list, sizeof(list));
		tpc_sanitize(san, sizeof(san), x->valuestring);
		return doc_err(e, label, "'extends': unknown preset '%s' (presets: %s)", san, list);
	}
	char plabel[160];
	snprintf(plabel, sizeof(plabel), "preset %s", x->valuestring);
	return from_buffer(r, text, strlen(text), plabel, depth + 1, e);
}

static int from_buffer(tpc_rules *r, const char *text, size_t len, const char *label, int depth,
		       tpc_err *e)
{
	const char *end = NULL;
	const cJSON *list = NULL;
	cJSON *root;
	int ret = 0;
	if (depth > MAX_EXTENDS_DEPTH)
		return doc_err(e, label, "'extends' nests deeper than %d", MAX_EXTENDS_DEPTH);
	root = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if (!root) {
		size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
		ret = doc_err(e, label, "invalid JSON near byte %zu", at);
		goto out;
	}
	if (cJSON_IsArray(root)) {
		list = root;
	} else if (cJSON_IsObject(root)) {
		for (const cJSON *it = root->child; it; it = it->next) {
			const char *k = it->string;
			if (!strcmp(k, "extends")) {
				if (cJSON_IsArray(it)) {
					for (const cJSON *x = it->child; x && !ret; x = x->next)
						ret = add_extends(r, x, label, depth, e);
				} else {
					ret = add_extends(r, it, label, depth, e);
				}
				if (ret)
					goto out;
			} else if (!strcmp(k, "rules")) {
				if (!cJSON_IsArray(it)) {
					ret = doc_err(e, label, "'rules' must be a list");
					goto out;
				}
				list = it;
			} else if (strcmp(k, "description") && strcmp(k, "comment")) {
				char san[128];
				tpc_sanitize(san, sizeof(san), k);
				ret = doc_err(e, label, "unknown key '%s' (a rules file has extends, rules, description, comment)",
						  san);
				goto out;
			}
		}
	} else {
		ret = doc_err(e, label, "a rules file is a JSON object or a list of rules");
		goto out;
	}
	size_t no = 1;
	for (const cJSON *it = list ? list->child : NULL; it; it = it->next, no++)
		if ((ret = parse_rule(r, it, label, no, e)))
			goto out;
out:
	cJSON_Delete(root);
	return ret;
}

int tpc_rules_from_buffer(tpc_rules *r, const char *text, size_t len, const char *label,
			  tpc_err *e)
{
	return from_buffer(r, text, len, label ? label : "rules", 0, e);
}

int tpc_rules_from_file(tpc_rules *r, const char *path, tpc_err *e)
{
	char *text = NULL;
	size_t len = 0;
	int ret = tpc_read_file(path, MAX_RULES_FILE, &text, &len, e);
	if (ret) {
		/* a rules file that cannot be read is a bad argument (exit 2) */
		tpc_err_path(e, path);
		if (ret == TPC_EINPUT)
			e->code = ret = TPC_EUSAGE;
		return ret;
	}
	ret = tpc_rules_from_buffer(r, text, len, path, e);
	free(text);
	return ret;
}

int tpc_rules_add_preset(tpc_rules *r, const char *name, tpc_err *e)
{
	const char *text = tpc_rules_preset_text(name);
	char label[160];
	if (!text) {
		char list[256];
		preset_list(list, sizeof(list));
		return tpc_err_set(e, TPC_EUSAGE, "unknown rules preset '%s' (presets: %s)", name, list);
	}
	snprintf(label, sizeof(label), "preset %s", name);
	return from_buffer(r, text, strlen(text), label, 0, e);
}

int tpc_rules_load(tpc_rules *r, const char *arg, tpc_err *e)
{
	if (tpc_rules_preset_text(arg))
		return tpc_rules_add_preset(r, arg, e);
	if (!tpc_exists(arg) && !strchr(arg, '/') && !strchr(arg, '.')) {
		char list[256];
		preset_list(list, sizeof(list));
		return tpc_err_set(e, TPC_EUSAGE, "'%s' is neither a rules preset (%s) nor a file", arg,
				   list);
	}
	return tpc_rules_from_file(r, arg, e);
}

static const char *describe_rule(const rule *x, char *buf, size_t n)
{
	size_t len = 0;
	if (!n)
		return buf;
	buf[0] = '\0';
#define ADD(...)                                                          \
	do {                                                              \
		if (len < n) {                                            \
			int k_ = snprintf(buf + len, n - len, __VA_ARGS__); \
			if (k_ > 0)                                       \
				len += (size_t)k_;                        \
		}                                                         \
	} while (0)
	if (x->kind == TPC_RULE_DTYPE)
		ADD("dtype %s", tpc_dtype_name(x->dtype));
	else
		ADD("%s '%s'", kind_name(x->kind), x->arg);
	if (x->to)
		ADD(" -> '%s'", x->to);
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
	for (size_t i = 0; i < m->nselect; i++)
		free(m->select[i]);
	free(m->select);
	memset(m, 0, sizeof(*m));
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
					  ck->t[a].name, ck->t[b].name, m->name[a]);
			break;
		}
	}
	free(idx);
	return ret;
}

static int plan_rule(const tpc_ckpt *ck, tpc_remap *m, const rule *x, size_t k, tpc_err *e)
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

	for (size_t i = 0; i < m->n && !ret; i++) {
		const char *s = m->name[i];
		const tpc_tensor *t = &ck->t[i];
		if (!s || !cond_ok(x, s))
			continue;
		bool hit = x->has_re ? re_find(&x->re, s) : true;
		switch (x->kind) {
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
				tpc_err_set(e, TPC_EUSAGE, "%s turns the name into an empty string",
					    describe_rule(x, d, sizeof(d)));
				tpc_err_tensor(e, t->name);
				ret = TPC_EUSAGE;
				break;
			}
			/* "\\0\\0" doubles a name: forty such rules would ask for terabytes */
			if (b.len - 1 > RENAME_MAX && b.len - 1 > strlen(s)) {
				char d[512];
				tpc_err_set(e, TPC_EUSAGE, "%s makes the name %zu bytes long (at most %u)",
					    describe_rule(x, d, sizeof(d)), b.len - 1, RENAME_MAX);
				tpc_err_tensor(e, t->name);
				ret = TPC_EUSAGE;
				break;
			}
			ret = set_name(m, i, tpc_strdup(b.p), e);
			break;
		case TPC_RULE_STRIP_PREFIX:
			if (has_prefix(s, x->arg, plen)) {
				m->hits[k]++;
				if (!s[plen]) {
					tpc_err_set(e, TPC_EUSAGE, "strip_prefix '%s' (%s) leaves an empty name",
						    x->arg, x->origin);
					tpc_err_tensor(e, t->name);
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
			if (t->ndim != 2 || t->nparts) {
				tpc_err_set(e, TPC_EUSAGE,
					    "transpose '%s' (%s) matches a tensor with %d dimension%s; only 2-D tensors can be transposed",
					    x->arg, x->origin, t->ndim, t->ndim == 1 ? "" : "s");
				tpc_err_tensor(e, t->name);
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
				tpc_err_set(e, TPC_EUSAGE, "dtype %s (%s): cannot cast %s to %s",
					    tpc_dtype_name(x->dtype), x->origin, tpc_dtype_name(t->src_dtype),
					    tpc_dtype_name(x->dtype));
				tpc_err_tensor(e, t->name);
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
	m->n = ck->n;
	m->nrules = nr;
	m->name = tpc_calloc(ck->n, sizeof(*m->name));
	m->dropped_by = tpc_malloc(ck->n * sizeof(*m->dropped_by));
	m->transpose = tpc_calloc(ck->n, sizeof(*m->transpose));
	m->dtype = tpc_malloc(ck->n * sizeof(*m->dtype));
	m->hits = tpc_calloc(nr, sizeof(*m->hits));
	if (!m->name || !m->dropped_by || !m->transpose || !m->dtype || !m->hits) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < ck->n; i++) {
		m->dropped_by[i] = -1;
		m->dtype[i] = ck->t[i].dtype;
		if (!(m->name[i] = tpc_strdup(ck->t[i].name))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
	}
	m->nkept = ck->n;
	for (size_t k = 0; k < nr; k++)
		if ((ret = plan_rule(ck, m, r->v[k], k, e)))
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

int tpc_remap_apply(tpc_ckpt *ck, const tpc_remap *m, tpc_err *e)
{
	bool *keep = NULL;
	int ret = 0;
	if (m->n != ck->n)
		return tpc_err_set(e, TPC_EUSAGE, "internal: remap planned for %zu tensors, checkpoint has %zu",
				   m->n, ck->n);
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
		if (m->transpose[i]) {
			int64_t a = t->shape[0], s = t->stride[0];
			t->shape[0] = t->shape[1];
			t->shape[1] = a;
			t->stride[0] = t->stride[1];
			t->stride[1] = s;
		}
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

static void add_name(tpc_buf *b, const char *s)
{
	for (; *s; s++)
		tpc_buf_addc(b, ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s);
}

void tpc_remap_table(const tpc_ckpt *ck, const tpc_remap *m, const tpc_rules *r, tpc_buf *out)
{
	char d[1024], s1[128], s2[128];
	size_t ndrop = m->n - m->nkept, nren = 0;
	for (size_t i = 0; i < m->n; i++)
		if (m->name[i] && strcmp(m->name[i], ck->t[i].name))
			nren++;
	tpc_buf_addf(out, "# %zu tensors: %zu kept (%zu renamed), %zu dropped\n", m->n, m->nkept, nren,
		     ndrop);
	for (size_t i = 0; i < m->n; i++) {
		const tpc_tensor *t = &ck->t[i];
		if (!m->name[i])
			continue;
		add_name(out, t->name);
		tpc_buf_adds(out, " -> ");
		add_name(out, m->name[i]);
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
	if (ndrop)
		tpc_buf_addf(out, "# dropped (%zu)\n", ndrop);
	for (size_t i = 0; i < m->n; i++) {
		if (m->name[i])
			continue;
		add_name(out, ck->t[i].name);
		if (m->dropped_by[i] >= 0)
			tpc_buf_addf(out, "  by %s",
				     tpc_rules_describe(r, (size_t)m->dropped_by[i], d, sizeof(d)));
		tpc_buf_addc(out, '\n');
	}
}

/* ---- expected keys ---- */

void tpc_keys_release(tpc_keys *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n; i++)
		free(k->v[i]);
	free(k->v);
	memset(k, 0, sizeof(*k));
}

static int keys_push(tpc_keys *k, const char *s, size_t n, tpc_err *e)
{
	if (tpc_grow((void **)&k->v, &k->cap, k->n + 1, sizeof(*k->v)))
		return tpc_err_nomem(e);
	if (!(k->v[k->n] = tpc_strndup(s, n)))
		return tpc_err_nomem(e);
	k->n++;
	return 0;
}

int tpc_keys_from_buffer(tpc_keys *k, const char *text, size_t len, const char *label,
			 tpc_err *e)
{
	size_t i = 0;
	int ret = 0;
	while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
		i++;
	if (i < len && text[i] == '[') {
		const char *end = NULL;
		cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
		if (!root || !cJSON_IsArray(root)) {
			cJSON_Delete(root);
			ret = tpc_err_set(e, TPC_EINPUT, "key list: invalid JSON near byte %zu",
					  end && end >= text ? (size_t)(end - text) : (size_t)0);
			goto out;
		}
		for (const cJSON *it = root->child; it && !ret; it = it->next) {
			if (!cJSON_IsString(it))
				ret = tpc_err_set(e, TPC_EINPUT, "key list: every entry must be a string");
			else
				ret = keys_push(k, it->valuestring, strlen(it->valuestring), e);
		}
		cJSON_Delete(root);
		goto out;
	}
	for (i = 0; i < len && !ret;) {
		size_t a = i, b;
		while (i < len && text[i] != '\n')
			i++;
		b = i++;
		while (a < b && (text[a] == ' ' || text[a] == '\t'))
			a++;
		while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\r'))
			b--;
		if (b > a) {
			if (memchr(text + a, '\0', b - a)) {
				ret = tpc_err_set(e, TPC_EINPUT, "key list: a line holds a NUL byte; not a text key list");
				break;
			}
			ret = keys_push(k, text + a, b - a, e);
		}
	}
out:
	if (ret && label)
		tpc_err_path(e, label);
	return ret;
}

int tpc_keys_load(tpc_keys *k, const char *path, tpc_err *e)
{
	tpc_err scratch;
	char *text = NULL;
	size_t len = 0;
	int ret;
	tpc_err_init(&scratch);
	if (tpc_exists(path) && tpc_format_detect(path, &scratch)) {
		tpc_ckpt ck;
		tpc_ckpt_init(&ck);
		ret = tpc_ckpt_open(&ck, path, NULL, e);
		for (size_t i = 0; i < ck.n && !ret; i++)
			ret = keys_push(k, ck.t[i].name, strlen(ck.t[i].name), e);
		tpc_ckpt_release(&ck);
		return ret;
	}
	if ((ret = tpc_read_file(path, MAX_KEYS_FILE, &text, &len, e))) {
		tpc_err_path(e, path);
		return ret;
	}
	ret = tpc_keys_from_buffer(k, text, len, path, e);
	free(text);
	return ret;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int tpc_keys_check(char *const *have, size_t nhave, const tpc_keys *want, tpc_buf *report,
		   tpc_err *e)
{
	char **h = tpc_malloc(nhave * sizeof(*h));
	char **w = tpc_malloc(want->n * sizeof(*w));
	size_t nh = 0, nw = want->n, i = 0, j = 0, nmiss = 0, nunexp = 0;
	tpc_buf miss = TPC_BUF_INIT, unexp = TPC_BUF_INIT;
	int ret = 0;
	if (!h || !w) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t x = 0; x < nhave; x++)
		if (have[x])
			h[nh++] = have[x];
	memcpy(w, want->v, nw * sizeof(*w));
	qsort(h, nh, sizeof(*h), cmp_str);
	qsort(w, nw, sizeof(*w), cmp_str);
	/* Merge; a key listed twice in the expected list counts once. */
	while (i < nh || j < nw) {
		int c = i >= nh ? 1 : j >= nw ? -1 : strcmp(h[i], w[j]);
		if (c == 0) {
			const char *s = h[i];
			while (i < nh && !strcmp(h[i], s))
				i++;
			while (j < nw && !strcmp(w[j], s))
				j++;
		} else if (c < 0) {
			nunexp++;
			tpc_buf_adds(&unexp, "  ");
			add_name(&unexp, h[i]);
			tpc_buf_addc(&unexp, '\n');
			i++;
		} else {
			const char *s = w[j];
			nmiss++;
			tpc_buf_adds(&miss, "  ");
			add_name(&miss, s);
			tpc_buf_addc(&miss, '\n');
			while (j < nw && !strcmp(w[j], s))
				j++;
		}
	}
	if (miss.oom || unexp.oom) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (nmiss || nunexp) {
		if (report) {
			if (nmiss) {
				tpc_buf_addf(report, "missing (%zu):\n", nmiss);
				tpc_buf_add(report, miss.p, miss.len);
			}
			if (nunexp) {
				tpc_buf_addf(report, "unexpected (%zu):\n", nunexp);
				tpc_buf_add(report, unexp.p, unexp.len);
			}
		}
		ret = tpc_err_set(e, TPC_EMISMATCH, "%zu missing and %zu unexpected keys", nmiss, nunexp);
	}
out:
	tpc_buf_release(&miss);
	tpc_buf_release(&unexp);
	free(h);
	free(w);
	return ret;
}
