/* tpc_yaml.c - the YAML subset of tpc_yaml.h: lines first (indent, content
 * without its comment), then a descent over them; a sequence item's inline
 * content is re-read as a line of its own at its column. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_io.h"
#include "tpc_util.h"
#include "tpc_yaml.h"

#define YAML_MAX_DEPTH 64
#define YAML_MAX_BYTES (16u << 20)

typedef struct yline {
	int no;     /* 1-based line number */
	int ind;    /* column of the content */
	char *s;    /* the content, NUL-terminated, no comment, no trailing blanks */
} yline;

typedef struct yp {
	yline *l;
	size_t n, i;
	const char *path;
	tpc_err *e;
	int depth;
} yp;

static int bad(yp *p, int no, const char *what)
{
	return tpc_err_at(p->e, TPC_EINPUT, p->path, NULL, "line %d: %s", no, what);
}

/* the end of a quoted scalar starting at s (a quote), or NULL */
static const char *quote_end(const char *s)
{
	char q = *s++;
	for (; *s; s++) {
		if (q == '\'' && *s == '\'') {
			if (s[1] == '\'') {
				s++;
				continue;
			}
			return s;
		}
		if (q == '"' && *s == '\\' && s[1]) {
			s++;
			continue;
		}
		if (q == '"' && *s == '"')
			return s;
	}
	return NULL;
}

/* Cut the comment: '#' at the start or after a blank, outside quotes that
 * open a token (after the start, a blank, '[' or ','). */
static void cut_comment(char *s)
{
	for (char *c = s; *c; c++) {
		bool tok = c == s || c[-1] == ' ' || c[-1] == '\t' || c[-1] == '[' || c[-1] == '{' || c[-1] == ',';
		if ((*c == '\'' || *c == '"') && tok) {
			const char *q = quote_end(c);
			if (!q)
				return;
			c = (char *)q;
			continue;
		}
		if (*c == '#' && (c == s || c[-1] == ' ' || c[-1] == '\t')) {
			*c = 0;
			return;
		}
	}
}

static int split_lines(yp *p, char *buf, size_t len)
{
	size_t cap = 0;
	int no = 0;
	bool seen = false;
	for (char *c = buf; c < buf + len;) {
		char *nl = memchr(c, '\n', (size_t)(buf + len - c));
		char *end = nl ? nl : buf + len;
		*end = 0;
		no++;
		char *s = c;
		c = end + 1;
		int ind = 0;
		while (*s == ' ' || *s == '\t') {
			if (*s == '\t') {
				char *t = s;
				while (*t == ' ' || *t == '\t' || *t == '\r')
					t++;
				if (*t && *t != '#')
					return bad(p, no, "a tab in the indentation (YAML indents with spaces)");
			}
			s++;
			ind++;
		}
		cut_comment(s);
		size_t k = strlen(s);
		while (k && (s[k - 1] == ' ' || s[k - 1] == '\t' || s[k - 1] == '\r'))
			s[--k] = 0;
		if (!k)
			continue;
		if (!strcmp(s, "---") && ind == 0) {
			if (seen)
				return bad(p, no, "a second document: one recipe a file");
			seen = true;
			continue;
		}
		if (!strcmp(s, "...") && ind == 0)
			return bad(p, no, "a document end marker: one recipe a file");
		if (*s == '%')
			return bad(p, no, "directives (%) are not read");
		seen = true;
		if (p->n == cap) {
			size_t nc = cap ? cap * 2 : 32;
			yline *nl2 = realloc(p->l, nc * sizeof(*nl2));
			if (!nl2)
				return tpc_err_nomem(p->e);
			p->l = nl2;
			cap = nc;
		}
		p->l[p->n++] = (yline){no, ind, s};
	}
	return 0;
}

static bool is_seq(const char *s)
{
	return s[0] == '-' && (s[1] == 0 || s[1] == ' ');
}

/* A scalar's node: quoted -> string; else null, bool, number or string. */
static cJSON *scalar(const char *s, size_t n, bool quoted)
{
	char *v = tpc_strndup(s, n);
	cJSON *r = NULL;
	if (!v)
		return NULL;
	if (quoted) {
		r = cJSON_CreateString(v);
		free(v);
		return r;
	}
	if (!strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL") || !strcmp(v, "~")) {
		r = cJSON_CreateNull();
	} else if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE")) {
		r = cJSON_CreateTrue();
	} else if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE")) {
		r = cJSON_CreateFalse();
	} else {
		bool num = n > 0 && strspn(v, "0123456789+-.eE") == n && strpbrk(v, "0123456789");
		char *end = NULL;
		double d = num ? strtod(v, &end) : 0;
		if (num && end && !*end && isfinite(d))
			r = cJSON_CreateNumber(d);
		else
			r = cJSON_CreateString(v);
	}
	free(v);
	return r;
}

/* A quoted scalar at *s (its quote) into a string node; *s past it. */
static int quoted(yp *p, int no, const char **s, cJSON **out)
{
	const char *q = quote_end(*s);
	if (!q)
		return bad(p, no, "a quoted scalar that does not close on its line");
	char *v = tpc_malloc((size_t)(q - *s) + 1), *w = v;
	if (!v)
		return tpc_err_nomem(p->e);
	char qc = **s;
	for (const char *c = *s + 1; c < q; c++) {
		if (qc == '\'' && *c == '\'') {
			*w++ = '\'';
			c++;
		} else if (qc == '"' && *c == '\\') {
			c++;
			switch (*c) {
			case '\\': *w++ = '\\'; break;
			case '"': *w++ = '"'; break;
			case '/': *w++ = '/'; break;
			case 'n': *w++ = '\n'; break;
			case 't': *w++ = '\t'; break;
			default:
				free(v);
				return bad(p, no, "an escape other than \\\\ \\\" \\/ \\n \\t in a double-quoted scalar");
			}
		} else {
			*w++ = *c;
		}
	}
	*w = 0;
	*out = cJSON_CreateString(v);
	free(v);
	*s = q + 1;
	return *out ? 0 : tpc_err_nomem(p->e);
}

static int refused_start(yp *p, int no, char c)
{
	switch (c) {
	case '&': return bad(p, no, "anchors (&) are not read");
	case '*': return bad(p, no, "aliases (*) are not read");
	case '!': return bad(p, no, "tags (!) are not read");
	case '|':
	case '>': return bad(p, no, "block scalars (| >) are not read");
	case '%':
	case '@':
	case '`': return bad(p, no, "a plain scalar cannot start with this character");
	default: return 0;
	}
}

/* A plain scalar inside a flow collection, from *c to a ',', ']', '}' or,
 * for a key, ':' followed by a blank. */
static int flow_plain(yp *p, int no, const char **c, bool key, cJSON **out)
{
	const char *b = *c, *s = *c;
	while (*s && *s != ',' && *s != ']' && *s != '}' && !(key && *s == ':' && (s[1] == ' ' || !s[1] || s[1] == ',')))
		s++;
	size_t n = (size_t)(s - b);
	while (n && b[n - 1] == ' ')
		n--;
	if (memchr(b, '[', n) || memchr(b, '{', n))
		return bad(p, no, "a bracket inside a plain scalar of a flow collection");
	if (!key && memchr(b, ':', n))
		return bad(p, no, "a ':' inside a flow value (quote it)");
	if (!n)
		return bad(p, no, "an empty entry in a flow collection");
	*c = s;
	return (*out = scalar(b, n, false)) ? 0 : tpc_err_nomem(p->e);
}

/* [a, b, [c]] or {k: v, ...} at *s ('[' or '{'), on one line; *s past its end. */
static int flow(yp *p, int no, const char **s, cJSON **out)
{
	bool map = **s == '{';
	char close = map ? '}' : ']';
	const char *c = *s + 1;
	int ret = 0;
	if (++p->depth > YAML_MAX_DEPTH)
		return bad(p, no, "nested more than 64 levels");
	cJSON *col = map ? cJSON_CreateObject() : cJSON_CreateArray(), *key = NULL;
	if (!col)
		return tpc_err_nomem(p->e);
	for (;;) {
		while (*c == ' ')
			c++;
		if (*c == close) {
			c++;
			break;
		}
		if (!*c) {
			ret = bad(p, no, "a flow collection must close on its line");
			break;
		}
		if (map) {
			if (*c == '\'' || *c == '"')
				ret = quoted(p, no, &c, &key);
			else if (!(ret = refused_start(p, no, *c == '{' ? 'x' : *c)))
				ret = flow_plain(p, no, &c, true, &key);
			if (ret)
				break;
			while (*c == ' ')
				c++;
			if (*c != ':' || !cJSON_IsString(key)) {
				ret = bad(p, no, cJSON_IsString(key) ? "expected 'key: value' in a flow mapping" : "a flow mapping's key must be a string");
				break;
			}
			c++;
			while (*c == ' ')
				c++;
			if (cJSON_GetObjectItemCaseSensitive(col, key->valuestring)) {
				ret = bad(p, no, "a key given twice in one mapping");
				break;
			}
		}
		cJSON *it = NULL;
		if (*c == '[' || *c == '{')
			ret = flow(p, no, &c, &it);
		else if (*c == '\'' || *c == '"')
			ret = quoted(p, no, &c, &it);
		else if (!(ret = refused_start(p, no, *c)))
			ret = flow_plain(p, no, &c, false, &it);
		if (ret)
			break;
		if (map)
			cJSON_AddItemToObject(col, key->valuestring, it);
		else
			cJSON_AddItemToArray(col, it);
		cJSON_Delete(key);
		key = NULL;
		while (*c == ' ')
			c++;
		if (*c == ',') {
			c++;
			continue;
		}
		if (*c != close) {
			ret = bad(p, no, *c ? "expected ',' or the closing bracket in a flow collection"
					    : "a flow collection must close on its line");
			break;
		}
	}
	cJSON_Delete(key);
	p->depth--;
	if (ret) {
		cJSON_Delete(col);
		return ret;
	}
	*s = c;
	*out = col;
	return 0;
}

/* A value on the rest of a line: a flow sequence or a scalar. */
static int inline_value(yp *p, int no, const char *s, cJSON **out)
{
	int ret;
	*out = NULL;
	if (*s == '[' || *s == '{' || *s == '\'' || *s == '"') {
		const char *c = s;
		if ((ret = *s == '[' || *s == '{' ? flow(p, no, &c, out) : quoted(p, no, &c, out)))
			return ret;
		while (*c == ' ')
			c++;
		if (*c) {
			cJSON_Delete(*out);
			*out = NULL;
			return bad(p, no, "text after the end of a value");
		}
		return 0;
	}
	if ((ret = refused_start(p, no, *s)))
		return ret;
	if (is_seq(s))
		return bad(p, no, "a block sequence cannot start after a key on its line");
	if (strstr(s, ": ") || s[strlen(s) - 1] == ':')
		return bad(p, no, "a mapping cannot start here (a value holding ': ' must be quoted)");
	return (*out = scalar(s, strlen(s), false)) ? 0 : tpc_err_nomem(p->e);
}

/* Is s "key: ..." / "key:"? *key the key's node, *rest the value's text. */
static int key_of(yp *p, int no, const char *s, cJSON **key, const char **rest, bool *is_key)
{
	const char *c = s;
	*is_key = false;
	*key = NULL;
	if (*s == '\'' || *s == '"') {
		const char *q = quote_end(s);
		if (!q)
			return bad(p, no, "a quoted scalar that does not close on its line");
		c = q + 1;
		while (*c == ' ')
			c++;
		if (*c != ':' || (c[1] && c[1] != ' '))
			return 0;
		const char *k = s;
		int ret = quoted(p, no, &k, key);
		if (ret)
			return ret;
	} else {
		if (*s == '[' || *s == '{' || *s == '?')
			return *s == '?' ? bad(p, no, "complex keys (?) are not read") : 0;
		for (; *c; c++)
			if (*c == ':' && (!c[1] || c[1] == ' '))
				break;
		if (!*c)
			return 0;
		size_t n = (size_t)(c - s);
		while (n && s[n - 1] == ' ')
			n--;
		if (!n)
			return bad(p, no, "an empty key");
		char *k = tpc_strndup(s, n);
		if (!k)
			return tpc_err_nomem(p->e);
		*key = cJSON_CreateString(k);
		free(k);
		if (!*key)
			return tpc_err_nomem(p->e);
	}
	c++;
	while (*c == ' ')
		c++;
	*rest = c;
	*is_key = true;
	return 0;
}

static int node(yp *p, int ind, cJSON **out);

/* A mapping or sequence at indent ind has ended (ret: how): nothing may stand
 * deeper after it; *out the collection c, or c freed on an error. */
static int collection_end(yp *p, int ind, int ret, cJSON *c, cJSON **out)
{
	if (!ret && p->i < p->n && p->l[p->i].ind > ind)
		ret = bad(p, p->l[p->i].no, "indented where nothing can start");
	if (ret) {
		cJSON_Delete(c);
		return ret;
	}
	*out = c;
	return 0;
}

static int mapping(yp *p, int ind, cJSON **out)
{
	cJSON *obj = cJSON_CreateObject(), *key = NULL;
	int ret = 0;
	if (!obj)
		return tpc_err_nomem(p->e);
	while (!ret && p->i < p->n && p->l[p->i].ind == ind) {
		yline *l = &p->l[p->i];
		const char *rest;
		bool is_key;
		cJSON *v = NULL;
		if (is_seq(l->s)) {
			ret = bad(p, l->no, "a sequence item where a mapping's key is expected");
			break;
		}
		if ((ret = key_of(p, l->no, l->s, &key, &rest, &is_key)))
			break;
		if (!is_key) {
			ret = bad(p, l->no, "expected 'key: value'");
			break;
		}
		if (cJSON_GetObjectItemCaseSensitive(obj, key->valuestring)) {
			ret = bad(p, l->no, "a key given twice in one mapping");
			break;
		}
		if (*rest) {
			ret = inline_value(p, l->no, rest, &v);
			p->i++;
		} else {
			p->i++;
			if (p->i < p->n && p->l[p->i].ind > ind)
				ret = node(p, p->l[p->i].ind, &v);
			else if (p->i < p->n && p->l[p->i].ind == ind && is_seq(p->l[p->i].s))
				ret = node(p, ind, &v);
			else if (!(v = cJSON_CreateNull()))
				ret = tpc_err_nomem(p->e);
		}
		if (!ret)
			cJSON_AddItemToObject(obj, key->valuestring, v);
		else
			cJSON_Delete(v);
		cJSON_Delete(key);
		key = NULL;
	}
	cJSON_Delete(key);
	return collection_end(p, ind, ret, obj, out);
}

static int sequence(yp *p, int ind, cJSON **out)
{
	cJSON *arr = cJSON_CreateArray();
	int ret = 0;
	if (!arr)
		return tpc_err_nomem(p->e);
	while (!ret && p->i < p->n && p->l[p->i].ind == ind && is_seq(p->l[p->i].s)) {
		yline *l = &p->l[p->i];
		const char *rest = l->s + 1;
		cJSON *v = NULL;
		while (*rest == ' ')
			rest++;
		if (!*rest) {
			p->i++;
			if (p->i < p->n && p->l[p->i].ind > ind)
				ret = node(p, p->l[p->i].ind, &v);
			else if (!(v = cJSON_CreateNull()))
				ret = tpc_err_nomem(p->e);
		} else {
			/* the item's content, a line of its own at its column */
			l->ind += (int)(rest - l->s);
			l->s = (char *)rest;
			ret = node(p, l->ind, &v);
		}
		if (!ret)
			cJSON_AddItemToArray(arr, v);
	}
	return collection_end(p, ind, ret, arr, out);
}

/* The node starting at line p->i, whose indent is ind. */
static int node(yp *p, int ind, cJSON **out)
{
	yline *l = &p->l[p->i];
	const char *rest;
	bool is_key;
	cJSON *key = NULL;
	int ret;
	*out = NULL;
	if (++p->depth > YAML_MAX_DEPTH)
		return bad(p, l->no, "nested more than 64 levels");
	if (is_seq(l->s)) {
		ret = sequence(p, ind, out);
	} else if ((ret = key_of(p, l->no, l->s, &key, &rest, &is_key))) {
		;
	} else if (is_key) {
		cJSON_Delete(key);
		ret = mapping(p, ind, out);
	} else {
		ret = inline_value(p, l->no, l->s, out);
		p->i++;
		if (!ret && p->i < p->n && p->l[p->i].ind > ind) {
			cJSON_Delete(*out);
			*out = NULL;
			ret = bad(p, p->l[p->i].no, "a scalar that goes on over lines (not read) or a stray indent");
		}
	}
	p->depth--;
	return ret;
}

int tpc_yaml_from_buffer(const char *text, size_t len, const char *path, cJSON **out, tpc_err *e)
{
	yp p = {.path = path ? path : "recipe", .e = e};
	char *buf = NULL;
	cJSON *root = NULL;
	int ret = 0;
	*out = NULL;
	if (len > YAML_MAX_BYTES)
		return tpc_err_at(e, TPC_EINPUT, p.path, NULL, "larger than 16 MiB: not a recipe");
	if (memchr(text, 0, len))
		return tpc_err_at(e, TPC_EINPUT, p.path, NULL, "a NUL byte: not a text file");
	if (!(buf = tpc_malloc(len + 1)))
		return tpc_err_nomem(e);
	memcpy(buf, text, len);
	buf[len] = 0;
	if ((ret = split_lines(&p, buf, len)))
		goto out;
	if (!p.n) {
		root = cJSON_CreateObject();
		ret = root ? 0 : tpc_err_nomem(e);
		goto out;
	}
	if ((ret = node(&p, p.l[0].ind, &root)))
		goto out;
	if (p.i < p.n)
		ret = bad(&p, p.l[p.i].no, "indented less than the document's first line");
out:
	if (ret) {
		cJSON_Delete(root);
		root = NULL;
	}
	*out = root;
	free(p.l);
	free(buf);
	return ret;
}

static int parse_cb(void *out, const char *text, size_t len, const char *path, tpc_err *e)
{
	return tpc_yaml_from_buffer(text, len, path, out, e);
}

int tpc_yaml_from_file(const char *path, cJSON **out, tpc_err *e)
{
	*out = NULL;
	return tpc_parse_file(path, YAML_MAX_BYTES, parse_cb, out, e);
}
