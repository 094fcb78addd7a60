/* tpc_cfg.c - the config.json reader; see tpc_cfg.h for the rules. */
#include "tpc_cfg.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_io.h"
#include "tpc_util.h"

#define KEY_MAX 96

struct tpc_cfg {
	char *path;
	cJSON *root;
	const cJSON *text; /* text_config when it is an object */
	char which[KEY_MAX];
};

int tpc_cfg_from_buffer(tpc_cfg **out, const char *text, size_t len, const char *path, tpc_err *e)
{
	tpc_cfg *c = calloc(1, sizeof(*c));
	*out = NULL;
	if (!c || !(c->path = strdup(path ? path : "config.json"))) {
		free(c);
		return tpc_err_nomem(e);
	}
	if (len > TPC_CFG_MAX_BYTES) {
		tpc_cfg_free(c);
		return tpc_err_at(e, TPC_EINPUT, path, NULL, "model config is larger than %u MiB", TPC_CFG_MAX_BYTES >> 20);
	}
	c->root = cJSON_ParseWithLength(text, len);
	if (!cJSON_IsObject(c->root)) {
		tpc_cfg_free(c);
		return TPC_CORRUPT(e, path, -1, NULL, "model config is not a JSON object");
	}
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(c->root, "text_config");
	c->text = cJSON_IsObject(tc) ? tc : NULL;
	*out = c;
	return 0;
}

TPC_PARSE_FN(cfg_parse, tpc_cfg_from_buffer)

int tpc_cfg_from_file(tpc_cfg **out, const char *path, tpc_err *e)
{
	*out = NULL;
	return tpc_parse_file(path, TPC_CFG_MAX_BYTES, cfg_parse, out, e);
}

void tpc_cfg_free(tpc_cfg *c)
{
	if (!c)
		return;
	cJSON_Delete(c->root);
	free(c->path);
	free(c);
}

const char *tpc_cfg_path(const tpc_cfg *c)
{
	return c->path;
}

const cJSON *tpc_cfg_root(const tpc_cfg *c)
{
	return c->root;
}

const cJSON *tpc_cfg_text(const tpc_cfg *c)
{
	return c->text;
}

/* one member under the scope's rule */
static const cJSON *member(const tpc_cfg *c, tpc_cfg_scope s, const char *name)
{
	const cJSON *v = s == TPC_CFG_TEXT && c->text ? cJSON_GetObjectItemCaseSensitive(c->text, name) : NULL;
	return v ? v : cJSON_GetObjectItemCaseSensitive(c->root, name);
}

/* The first alias after *p whose value passes ok (NULL: any), *p moved past
 * it; the alias in c->which. */
static const cJSON *next_alias(const tpc_cfg *c, tpc_cfg_scope s, const char **p)
{
	char *buf = ((tpc_cfg *)c)->which;
	while (*p && **p) {
		const char *bar = strchr(*p, '|');
		size_t len = bar ? (size_t)(bar - *p) : strlen(*p);
		const char *at = *p;
		*p = bar ? bar + 1 : at + len;
		if (!len || len >= KEY_MAX)
			continue;
		memcpy(buf, at, len);
		buf[len] = '\0';
		const cJSON *v = member(c, s, buf);
		if (v)
			return v;
	}
	return NULL;
}

const cJSON *tpc_cfg_get(const tpc_cfg *c, tpc_cfg_scope s, const char *names, const char **which)
{
	const char *p = names;
	const cJSON *v = next_alias(c, s, &p);
	if (which)
		*which = v ? c->which : NULL;
	return v;
}

static int not_found(const tpc_cfg *c, const char *names, tpc_err *e)
{
	char safe[160];
	tpc_sanitize(safe, sizeof(safe), names);
	return tpc_err_at(e, TPC_EINPUT, c->path, NULL, "key '%s' not found", safe);
}

static int wrong(const tpc_cfg *c, const char *what, tpc_err *e)
{
	char safe[KEY_MAX];
	tpc_sanitize(safe, sizeof(safe), c->which);
	return tpc_err_at(e, TPC_EINPUT, c->path, NULL, "key '%s' is not %s", safe, what);
}

/* The walk every typed getter shares: the first alias whose value is not
 * null and passes ok (lenient) or the first not null (strict). */
typedef bool (*fits_fn)(const cJSON *v, const void *arg);

static int find_typed(const tpc_cfg *c, tpc_cfg_scope s, const char *names, unsigned flags, fits_fn fits,
		      const void *arg, const char *what, const cJSON **out, tpc_err *e)
{
	const char *p = names;
	const cJSON *v;
	while ((v = next_alias(c, s, &p))) {
		if (cJSON_IsNull(v))
			continue;
		if (fits(v, arg)) {
			*out = v;
			return 1;
		}
		if (!(flags & TPC_CFG_LENIENT))
			return wrong(c, what, e);
	}
	return flags & TPC_CFG_REQUIRED ? not_found(c, names, e) : 0;
}

static bool fits_int(const cJSON *v, const void *arg)
{
	const int64_t *r = arg;
	if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
		return false;
	return v->valuedouble >= (double)r[0] && v->valuedouble <= (double)r[1] && fabs(v->valuedouble) <= 9007199254740992.0;
}

int tpc_cfg_int(const tpc_cfg *c, tpc_cfg_scope s, const char *names, unsigned flags, int64_t lo, int64_t hi,
		int64_t *out, tpc_err *e)
{
	const int64_t r[2] = {lo, hi};
	const cJSON *v = NULL;
	char what[96];
	snprintf(what, sizeof(what), "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
	int ret = find_typed(c, s, names, flags, fits_int, r, what, &v, e);
	if (ret > 0)
		*out = (int64_t)v->valuedouble;
	return ret;
}

/* a value of one of the cJSON types in the mask *arg */
static bool fits_type(const cJSON *v, const void *arg)
{
	return v && (v->type & 0xff & *(const int *)arg);
}
static const int T_NUM = cJSON_Number, T_BOOL = cJSON_True | cJSON_False, T_STR = cJSON_String;

int tpc_cfg_num(const tpc_cfg *c, tpc_cfg_scope s, const char *names, unsigned flags, double *out, tpc_err *e)
{
	const cJSON *v = NULL;
	int ret = find_typed(c, s, names, flags, fits_type, &T_NUM, "a number", &v, e);
	if (ret > 0)
		*out = v->valuedouble;
	return ret;
}

int tpc_cfg_bool(const tpc_cfg *c, tpc_cfg_scope s, const char *names, unsigned flags, int *out, tpc_err *e)
{
	const cJSON *v = NULL;
	int ret = find_typed(c, s, names, flags, fits_type, &T_BOOL, "true or false", &v, e);
	if (ret > 0)
		*out = cJSON_IsTrue(v) ? 1 : -1;
	return ret;
}

int tpc_cfg_str(const tpc_cfg *c, tpc_cfg_scope s, const char *names, unsigned flags, const char **out,
		tpc_err *e)
{
	const cJSON *v = NULL;
	int ret = find_typed(c, s, names, flags, fits_type, &T_STR, "a string", &v, e);
	if (ret > 0)
		*out = v->valuestring;
	return ret;
}

/* ---- the rope ---- */

/* rope_parameters, else rope_scaling, with the name found */
static const cJSON *rope_obj(const tpc_cfg *c, tpc_cfg_scope s, const char **name)
{
	*name = "rope_parameters";
	const cJSON *r = member(c, s, *name);
	if (!cJSON_IsObject(r))
		r = member(c, s, *name = "rope_scaling");
	return cJSON_IsObject(r) ? r : NULL;
}

const cJSON *tpc_cfg_rope(const tpc_cfg *c, tpc_cfg_scope s)
{
	const char *name;
	return rope_obj(c, s, &name);
}

int tpc_cfg_rope_num(const tpc_cfg *c, tpc_cfg_scope s, const char *name, const char *top, unsigned flags,
		     double *out, tpc_err *e)
{
	const char *obj;
	const cJSON *r = rope_obj(c, s, &obj);
	const cJSON *v = r ? cJSON_GetObjectItemCaseSensitive(r, name) : NULL;
	if (cJSON_IsNumber(v)) {
		*out = v->valuedouble;
		return 1;
	}
	if (v && !cJSON_IsNull(v) && !(flags & TPC_CFG_LENIENT)) {
		snprintf(((tpc_cfg *)c)->which, KEY_MAX, "%s.%.60s", obj, name);
		return wrong(c, "a number", e);
	}
	if (top)
		return tpc_cfg_num(c, s, top, flags, out, e);
	return flags & TPC_CFG_REQUIRED ? not_found(c, name, e) : 0;
}

const char *tpc_cfg_rope_type(const tpc_cfg *c, tpc_cfg_scope s)
{
	const cJSON *r = tpc_cfg_rope(c, s);
	const cJSON *t = r ? cJSON_GetObjectItemCaseSensitive(r, "rope_type") : NULL;
	if (!cJSON_IsString(t) && r)
		t = cJSON_GetObjectItemCaseSensitive(r, "type");
	return cJSON_IsString(t) ? t->valuestring : NULL;
}
