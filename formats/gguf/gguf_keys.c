/* gguf_keys.c - the keys convert_hf_to_gguf.py (llama.cpp 0.7) writes for a
 * Hugging Face model: config.json read through lib's reader under the
 * family record's key rules (TextModel.set_gguf_parameters and each
 * architecture's additions: lib/tpc_family_gguf.h), the rope scaling, the
 * sliding-window and rope-off patterns, and general.* (gguf-py metadata.py:
 * general.name, size_label; the sampling keys of generation_config.json).
 * The tensors are gguf_arch.c's.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gguf.h"
#include "gguf_arch_int.h"
#include "tpc_cast.h"
#include "tpc_cfg.h"
#include "tpc_facts.h"
#include "tpc_family.h"
#include "tpc_family_gguf.h"
#include "tpc_io.h"
#include "tpc_util.h"

/* ---- config.json ---- */


const cJSON *tpc__gk_cfg_get(const cfg *c, const char *name)
{
	return tpc_cfg_get(c->doc, TPC_CFG_TEXT, name, NULL);
}

/* find_hparam: the first of "a|b|c" present (JSON null counts as present,
 * as a Python None in the dict does); the name found copied to buf */
const cJSON *tpc__gk_cfg_find(const cfg *c, const char *names, const char **which, char *buf, size_t n)
{
	const char *w = NULL;
	const cJSON *v = tpc_cfg_get(c->doc, TPC_CFG_TEXT, names, &w);
	if (v && which) {
		snprintf(buf, n, "%s", w);
		*which = buf;
	}
	return v;
}

int tpc__gk_cfg_err(const cfg *c, tpc_err *e, const char *fmt, const char *a)
{
	char safe[160];
	tpc_sanitize(safe, sizeof(safe), a ? a : "");
	return tpc_err_at(e, TPC_EINPUT, c->path, NULL, fmt, safe);
}

/* a non-negative integer that fits u32 */
int tpc__gk_cfg_u32(const cfg *c, const cJSON *v, const char *name, uint64_t *out, tpc_err *e)
{
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 4294967295.0 ||
	    v->valuedouble != floor(v->valuedouble))
		return tpc__gk_cfg_err(c, e, "config.json: '%s' is not an integer the GGUF key can hold", name);
	*out = (uint64_t)v->valuedouble;
	return 0;
}

int tpc__gk_cfg_req_u32(const cfg *c, const char *names, uint64_t *out, tpc_err *e)
{
	char buf[64];
	const char *which = NULL;
	const cJSON *v = tpc__gk_cfg_find(c, names, &which, buf, sizeof(buf));
	if (!v)
		return tpc__gk_cfg_err(c, e, "config.json has none of %s, which the GGUF metadata needs", names);
	return tpc__gk_cfg_u32(c, v, which, out, e);
}

/* ---- keys ---- */


/* A rule's key in full: "{arch}.key", a "general." or "tokenizer." key as is */
static int key_full(conv *cv, const char *key, char *full, size_t n)
{
	int w = strncmp(key, "general.", 8) && strncmp(key, "tokenizer.", 10) ? snprintf(full, n, "%s.%s", cv->spec->arch, key)
										 : snprintf(full, n, "%s", key);
	return w < 0 || (size_t)w >= n ? tpc_err_set(cv->e, TPC_EINPUT, "gguf key '%s' is too long", key) : 0;
}

int tpc__gk_kv_put(conv *cv, const char *key, int type, double f, uint64_t u)
{
	char full[160];
	if (key_full(cv, key, full, sizeof(full)))
		return -1;
	int r = type == F32 ? tpc_gguf_kvs_float(cv->kv, full, F32, f) : tpc_gguf_kvs_uint(cv->kv, full, type, u);
	return r ? tpc_err_nomem(cv->e) : 0;
}

int tpc__gk_kv_str(conv *cv, const char *key, const char *s)
{
	return tpc_gguf_kvs_str(cv->kv, key, s, strlen(s)) ? tpc_err_nomem(cv->e) : 0;
}

int64_t tpc__gk_cfg_int_or(const cfg *c, const char *name, int64_t dflt)
{
	const cJSON *v = tpc__gk_cfg_get(c, name);
	return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}

/* the rope parameters with TextModel.__init__'s mirroring: a rope_theta given
 * at the top level counts as rope_parameters.rope_theta, "type" as
 * "rope_type" */
const cJSON *tpc__gk_rope_member(const cfg *c, const char *name)
{
	/* TextModel.set_gguf_parameters' rope_params: full_attention's when there
	 * (a record without the ROPE_THETA_SWA rule refuses those, rope_scaling) */
	const cJSON *fa = c->rope ? cJSON_GetObjectItemCaseSensitive(c->rope, "full_attention") : NULL;
	const cJSON *rp = cJSON_IsObject(fa) ? fa : c->rope;
	const cJSON *v = rp ? cJSON_GetObjectItemCaseSensitive(rp, name) : NULL;
	char buf[64];
	if (v)
		return v;
	if (!strcmp(name, "rope_theta"))
		return tpc__gk_cfg_find(c, "global_rope_theta|rope_global_theta|rope_theta_global|rope_theta|rotary_emb_base", NULL,
				buf, sizeof(buf));
	if (!strcmp(name, "rope_type") && c->rope)
		return cJSON_GetObjectItemCaseSensitive(c->rope, "type");
	if (!strcmp(name, "original_max_position_embeddings") || !strcmp(name, "partial_rotary_factor"))
		return tpc__gk_cfg_find(c, !strcmp(name, "partial_rotary_factor") ? "partial_rotary_factor|rope_pct|rope_percent" : name,
				NULL, buf, sizeof(buf));
	return NULL;
}

/* a number of the rope parameters written as an F32 key when present */
static int rope_f32(conv *cv, const char *names, const char *key)
{
	char buf[64];
	for (const char *p = names; *p;) {
		size_t n = strcspn(p, "|");
		snprintf(buf, sizeof(buf), "%.*s", (int)n, p);
		const cJSON *v = tpc__gk_rope_member(&cv->c, buf);
		if (v && !cJSON_IsNull(v)) {
			if (!cJSON_IsNumber(v))
				return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: rope parameter '%s' is not a number", buf);
			return tpc__gk_kv_put(cv, key, F32, v->valuedouble, 0);
		}
		p += n + (p[n] == '|');
	}
	return 0;
}

/* TextModel.set_gguf_parameters' rope_type: linear writes its factor, yarn
 * its factor, original context and the yarn numbers present, su / longrope
 * the type alone; llama3 nothing here (LlamaModel's rope_freqs tensor,
 * rope_freqs below), default, dynamic and unknown ones nothing (the
 * reference warns) */
static int rope_scaling_keys(conv *cv);

/* The record's TPC_KH_ROPE_SECTIONS rule, NULL when it has none */
static const tpc_gguf_kv_rule *sections_rule(const tpc_gguf_arch *a)
{
	for (const tpc_gguf_kv_rule *r = a->kv; r->how != TPC_KH_END; r++)
		if (r->how == TPC_KH_ROPE_SECTIONS)
			return r;
	return NULL;
}

/* rope.dimension_sections: n entries of int32 (a, padded with 0 to 4) */
static int sections_key(conv *cv, const tpc_gguf_kv_rule *r, const int32_t *a, int n)
{
	char full[160];
	int32_t v[4] = {0, 0, 0, 0};
	for (int i = 0; i < n && i < 4; i++)
		v[i] = a[i];
	if (key_full(cv, r->key, full, sizeof(full)))
		return -1;
	return tpc_gguf_kvs_arr(cv->kv, full, TPC_GV_I32, v, 4) ? tpc_err_nomem(cv->e) : 0;
}

/* TextModel.set_gguf_parameters' mrope_section, padded to 4 (its first 4) */
static int rope_sections(conv *cv, const tpc_gguf_kv_rule *r, const cJSON *ms)
{
	int32_t a[4];
	int n = 0;
	const cJSON *x;
	if (!cJSON_IsArray(ms))
		return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: rope parameter '%s' is not a list", "mrope_section");
	cJSON_ArrayForEach(x, ms)
	{
		if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || fabs(x->valuedouble) > 2147483647.0)
			return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: rope parameter '%s' holds a value that is not an int32",
				       "mrope_section");
		if (n < 4)
			a[n++] = (int32_t)x->valuedouble;
	}
	return sections_key(cv, r, a, n);
}

/* TPC_KH_ROPE_SECTIONS at its own place: the default when config.json has
 * no mrope_section (_Qwen35MRopeMixin.set_gguf_parameters) */
static int rope_sections_default(conv *cv, const tpc_gguf_kv_rule *r)
{
	int32_t a[4];
	int n = 0;
	if ((cv->c.rope && cJSON_GetObjectItemCaseSensitive(cv->c.rope, "mrope_section")) || !r->names)
		return 0;
	for (const char *p = r->names; *p && n < 4;) {
		char *end = NULL;
		long v = strtol(p, &end, 10);
		if (end == p)
			return tpc_err_set(cv->e, TPC_EINPUT, "internal: gguf key rule '%s': its default is not numbers", r->key);
		a[n++] = (int32_t)v;
		p = *end == ',' ? end + 1 : end;
	}
	return sections_key(cv, r, a, n);
}

/* The record's rule of kind `how`, NULL when it has none */
static const tpc_gguf_kv_rule *rule_of(const tpc_gguf_arch *a, tpc_gguf_kh how)
{
	for (const tpc_gguf_kv_rule *r = a->kv; r->how != TPC_KH_END; r++)
		if (r->how == how)
			return r;
	return NULL;
}

/* The rope scaling keys, then the mrope sections when the record's GGUF
 * reader takes them (else refused, as a per-layer-type rope is for a record
 * without the ROPE_THETA_SWA rule) */
static int rope_scaling(conv *cv)
{
	const tpc_gguf_kv_rule *sr = sections_rule(cv->spec);
	const cJSON *ms = cv->c.rope ? cJSON_GetObjectItemCaseSensitive(cv->c.rope, "mrope_section") : NULL;
	bool per_type = cv->c.rope && (cJSON_GetObjectItemCaseSensitive(cv->c.rope, "full_attention") ||
				       cJSON_GetObjectItemCaseSensitive(cv->c.rope, "sliding_attention"));
	if (cJSON_GetObjectItemCaseSensitive(cv->c.root, "mrope_section") ||
	    (per_type && !rule_of(cv->spec, TPC_KH_ROPE_THETA_SWA)) || (ms && !sr))
		return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: %s rope parameters are not written to GGUF by tpconv yet",
			       "per-layer-type or mrope");
	if (rope_scaling_keys(cv))
		return -1;
	return ms ? rope_sections(cv, sr, ms) : 0;
}

static int rope_scaling_keys(conv *cv)
{
	const cJSON *t = tpc__gk_rope_member(&cv->c, "rope_type"), *f = tpc__gk_rope_member(&cv->c, "factor");
	char key[160];
	uint64_t u = 0;
	if (!cJSON_IsString(t))
		return 0;
	const char *ty = t->valuestring;
	bool lin = !strcmp(ty, "linear") && cJSON_IsNumber(f), yarn = !strcmp(ty, "yarn") && cJSON_IsNumber(f);
	bool lr = !strcmp(ty, "su") || !strcmp(ty, "longrope");
	if (!lin && !yarn && !lr)
		return 0;
	snprintf(key, sizeof(key), "%s.rope.scaling.type", cv->spec->arch);
	if (tpc__gk_kv_str(cv, key, lin ? "linear" : yarn ? "yarn" : "longrope"))
		return -1;
	if (lr)
		return 0;
	if (tpc__gk_kv_put(cv, "rope.scaling.factor", F32, f->valuedouble, 0))
		return -1;
	if (lin)
		return 0;
	const cJSON *o = tpc__gk_rope_member(&cv->c, "original_max_position_embeddings"),
		    *tr = tpc__gk_rope_member(&cv->c, "truncate");
	if (!o)
		return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: rope_type 'yarn' without %s", "original_max_position_embeddings");
	if (tpc__gk_cfg_u32(&cv->c, o, "original_max_position_embeddings", &u, cv->e) ||
	    tpc__gk_kv_put(cv, "rope.scaling.original_context_length", U32, 0, u))
		return -1;
	if (tr && !cJSON_IsNull(tr) && !cJSON_IsBool(tr))
		return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: rope parameter '%s' is not a boolean", "truncate");
	if (tr && cJSON_IsBool(tr) && tpc__gk_kv_put(cv, "rope.scaling.yarn_truncate", TPC_GV_BOOL, 0, cJSON_IsTrue(tr)))
		return -1;
	return rope_f32(cv, "extrapolation_factor", "rope.scaling.yarn_ext_factor") ||
			       rope_f32(cv, "attention_factor|attn_factor", "rope.scaling.yarn_attn_factor") ||
			       rope_f32(cv, "beta_fast", "rope.scaling.yarn_beta_fast") ||
			       rope_f32(cv, "beta_slow", "rope.scaling.yarn_beta_slow")
		       ? -1
		       : 0;
}

/* hidden / heads style facts: 0 (and *out), or -1 with the error set */
int tpc__gk_two_u32(const cfg *c, const char *a, const char *b, uint64_t *x, uint64_t *y, tpc_err *e)
{
	if (tpc__gk_cfg_req_u32(c, a, x, e) || tpc__gk_cfg_req_u32(c, b, y, e))
		return -1;
	return *y ? 0 : tpc__gk_cfg_err(c, e, "config.json: %s is 0", b);
}

/* The period of a sliding-window pattern without layer_types: r->names is
 * "MEMBER|...|N", the first config.json member present (an integer), else
 * N; a member that is not a positive integer is refused (Exaone4Config
 * builds layer_types from an int sliding_window_pattern and fails on its
 * "LLLG" form, so the reference does). *which gets the member read, or NULL
 * (N) */
static int swa_period(conv *cv, const tpc_gguf_kv_rule *r, uint64_t *period, const char **which, char *buf, size_t n)
{
	const cfg *c = &cv->c;
	const char *last = r->names ? strrchr(r->names, '|') : NULL;
	char names[128];
	*which = NULL;
	*period = r->names ? strtoull(last ? last + 1 : r->names, NULL, 10) : 0;
	if (!last || (size_t)(last - r->names) >= sizeof(names))
		return 0;
	snprintf(names, sizeof(names), "%.*s", (int)(last - r->names), r->names);
	const cJSON *v = tpc__gk_cfg_find(c, names, which, buf, n);
	if (!v || cJSON_IsNull(v))
		return (*which = NULL), 0;
	if (tpc__gk_cfg_u32(c, v, *which, period, cv->e))
		return -1;
	return *period ? 0 : tpc__gk_cfg_err(c, cv->e, "config.json: '%s' is 0", *which);
}

/* Which layers config.json makes slide, for the sliding-window rules: a
 * bool per layer (*b, malloc'd, *n of them) from layer_types (a list), else
 * every layer but each period-th (swa_period) of num_hidden_layers; *from
 * names the member that said it ("layer_types", the period's member, or
 * NULL: the rule's default period) */
static int layers_of_type(conv *cv, const tpc_gguf_kv_rule *r, const char *type, uint8_t **b, uint64_t *n,
			  const char **from, char *buf, size_t bn);
static int swa_layers(conv *cv, const tpc_gguf_kv_rule *r, uint8_t **b, uint64_t *n, const char **from, char *buf,
		      size_t bn)
{
	return layers_of_type(cv, r, "sliding_attention", b, n, from, buf, bn);
}

/* The same for any layer type of layer_types (r->names "MEMBERS|N" the
 * period without layer_types) */
static int layers_of_type(conv *cv, const tpc_gguf_kv_rule *r, const char *type, uint8_t **b, uint64_t *n,
			  const char **from, char *buf, size_t bn)
{
	const cfg *c = &cv->c;
	const cJSON *lt = tpc__gk_cfg_get(c, "layer_types");
	uint64_t period = 0;
	*b = NULL;
	*n = 0;
	*from = "layer_types";
	if (!cJSON_IsArray(lt)) {
		lt = NULL;
		if (swa_period(cv, r, &period, from, buf, bn))
			return -1;
		if (!period)
			return tpc_err_set(cv->e, TPC_EINPUT, "gguf key '%s': no period", r->key);
		if (tpc__gk_cfg_req_u32(c, "num_hidden_layers", n, cv->e))
			return -1;
	} else {
		*n = (uint64_t)cJSON_GetArraySize(lt);
	}
	if (!(*b = malloc(*n ? *n : 1)))
		return tpc_err_nomem(cv->e);
	for (uint64_t i = 0; i < *n; i++) {
		const cJSON *t = lt ? cJSON_GetArrayItem(lt, (int)i) : NULL;
		(*b)[i] = lt ? cJSON_IsString(t) && !strcmp(t->valuestring, type) : (i + 1) % period != 0;
	}
	return 0;
}

/* Key `key`, a bool per layer b[0..n), unless ret says an earlier step
 * failed; b freed either way */
static int put_bools(conv *cv, const char *key, int ret, uint8_t *b, uint64_t n)
{
	char full[160];
	if (!ret && key_full(cv, key, full, sizeof(full)))
		ret = -1;
	if (!ret && tpc_gguf_kvs_arr(cv->kv, full, TPC_GV_BOOL, b, n))
		ret = tpc_err_nomem(cv->e);
	free(b);
	return ret;
}

/* The sliding_window_pattern key (Olmo2Model's, Exaone4Model's): with a
 * sliding_window (not null), a bool per layer (swa_layers) */
static int swa_pattern(conv *cv, const tpc_gguf_kv_rule *r)
{
	const cJSON *sw = tpc__gk_cfg_get(&cv->c, "sliding_window");
	uint8_t *b = NULL;
	uint64_t n = 0;
	const char *from;
	char buf[64];
	if (!sw || cJSON_IsNull(sw))
		return 0;
	int ret = swa_layers(cv, r, &b, &n, &from, buf, sizeof(buf)) ? -1 : 0;
	return put_bools(cv, r->key, ret, b, n);
}

/* TPC_KH_LAYER_IS: "TYPE|MEMBERS|N", a bool per layer of layer_types' TYPE
 * (layers_of_type, the period from "MEMBERS|N") */
static int layer_is(conv *cv, const tpc_gguf_kv_rule *r)
{
	const char *bar = r->names ? strchr(r->names, '|') : NULL;
	char type[64], buf[64];
	uint8_t *b = NULL;
	uint64_t n = 0;
	const char *from;
	if (!bar || (size_t)(bar - r->names) >= sizeof(type))
		return tpc_err_set(cv->e, TPC_EINPUT, "gguf key rule '%s': no layer type", r->key);
	snprintf(type, sizeof(type), "%.*s", (int)(bar - r->names), r->names);
	tpc_gguf_kv_rule period = *r;
	period.names = bar + 1;
	int ret = layers_of_type(cv, &period, type, &b, &n, &from, buf, sizeof(buf)) ? -1 : 0;
	if (!ret && cv->mtp) { /* Qwen3NextModel: recurrent += [False] * (block_count - n_layer) */
		uint8_t *nb = cv->mtp < ((uint64_t)1 << 20) ? realloc(b, n + cv->mtp) : NULL;
		if (!nb)
			ret = tpc_err_nomem(cv->e);
		else
			memset((b = nb) + n, 0, cv->mtp);
		n += cv->mtp;
	}
	return put_bools(cv, r->key, ret, b, n);
}

/* The sliding layers (swa_layers) must be all but every N-th, N the rule's
 * period (r->names' last number), as the GGUF's reader assumes: llama.cpp
 * fixes cohere2's at three in four, and convert_hf_to_gguf.py writes no
 * pattern for it. Without layer_types the config's period member (Cohere2Config
 * takes sliding_window_pattern, 4 when absent) gives the layers compared. */
static int swa_every(conv *cv, const tpc_gguf_kv_rule *r)
{
	const char *last = r->names ? strrchr(r->names, '|') : NULL;
	uint64_t every = r->names ? strtoull(last ? last + 1 : r->names, NULL, 10) : 0, n = 0;
	uint8_t *b = NULL;
	const char *from;
	char buf[64];
	if (!every)
		return tpc_err_set(cv->e, TPC_EINPUT, "gguf key rule '%s': no period", r->key);
	if (swa_layers(cv, r, &b, &n, &from, buf, sizeof(buf)))
		return -1;
	int ret = 0;
	for (uint64_t l = 0; l < n && !ret; l++)
		if ((b[l] != 0) != ((l + 1) % every != 0))
			ret = tpc_err_at(cv->e, TPC_EINPUT, cv->c.path, NULL,
					 "config.json: %s makes layer %llu %s, but a GGUF of architecture '%s' is read "
					 "with every layer sliding but each %llu-th (llama.cpp): not written",
					 from ? from : "the default sliding_window_pattern", (unsigned long long)l,
					 b[l] ? "slide" : "attend globally", cv->spec->arch, (unsigned long long)every);
	free(b);
	return ret;
}

/* config.json's facts (lib/tpc_facts.h) and its layer count, for the rules
 * that check layers */
static int layer_facts(conv *cv, tpc_model_facts *f, uint64_t *n)
{
	return tpc__gk_cfg_req_u32(&cv->c, "n_layers|num_hidden_layers|n_layer|num_layers", n, cv->e) ||
			       tpc_facts_from_cfg(f, cv->c.doc, cv->e)
		       ? -1
		       : 0;
}

/* The layers without RoPE must be every period-th (r->names), as the GGUF's
 * reader assumes: llama.cpp fixes smollm3's n_no_rope_layer_step at 4, and
 * convert_hf_to_gguf.py writes no key for it. */
static int rope_off_every(conv *cv, const tpc_gguf_kv_rule *r)
{
	tpc_model_facts f;
	uint64_t n = 0, period = r->names ? strtoull(r->names, NULL, 10) : 0;
	int every = cv->fam ? cv->fam->parts.rope_off_every : 0;
	if (!period)
		return tpc_err_set(cv->e, TPC_EINPUT, "gguf key rule '%s': no period", r->key);
	if (layer_facts(cv, &f, &n))
		return -1;
	if (f.n_rope_listed && (uint64_t)f.n_rope_listed < n)
		return tpc_err_at(cv->e, TPC_EINPUT, cv->c.path, NULL,
				  "config.json: no_rope_layers has %lld entries for %llu layers", (long long)f.n_rope_listed,
				  (unsigned long long)n);
	for (uint64_t l = 0; l < n; l++) {
		bool off = tpc_facts_rope_off(&f, (int64_t)l, every);
		if (off != ((l + 1) % period == 0))
			return tpc_err_at(cv->e, TPC_EINPUT, cv->c.path, NULL,
					  "config.json: %s leaves layer %llu %s RoPE, but a GGUF of architecture '%s' is read "
					  "with every %llu-th layer without it (llama.cpp): not written",
					  f.n_rope_listed ? "no_rope_layers" : "no_rope_layer_interval", (unsigned long long)l,
					  off ? "without" : "with", cv->spec->arch, (unsigned long long)period);
	}
	return 0;
}

/* TPC_KH_ASSUMED: config.json's member, when there, is the value the GGUF's
 * reader assumes ("MEMBER=VALUE": a number, true or false) */
static int assumed(conv *cv, const tpc_gguf_kv_rule *r)
{
	char m[64], *end = NULL;
	const char *eq = r->names ? strchr(r->names, '=') : NULL;
	if (!eq || eq == r->names || (size_t)(eq - r->names) >= sizeof(m))
		return tpc_err_set(cv->e, TPC_EINPUT, "gguf key rule '%s': not MEMBER=VALUE", r->key);
	snprintf(m, sizeof(m), "%.*s", (int)(eq - r->names), r->names);
	const char *want = eq + 1;
	bool is_bool = !strcmp(want, "true") || !strcmp(want, "false");
	double x = is_bool ? 0 : strtod(want, &end);
	if (!is_bool && (!end || end == want || *end))
		return tpc_err_set(cv->e, TPC_EINPUT, "gguf key rule '%s': '%s' is no number, true or false", r->key, want);
	const cJSON *v = tpc__gk_cfg_get(&cv->c, m);
	if (!v || cJSON_IsNull(v))
		return 0;
	bool same = is_bool ? cJSON_IsBool(v) && cJSON_IsTrue(v) == !strcmp(want, "true")
			    : cJSON_IsNumber(v) && fabs(v->valuedouble - x) <= 1e-9 * fabs(x);
	if (!same)
		return tpc_err_at(cv->e, TPC_EINPUT, cv->c.path, NULL,
				  "config.json: '%s' is not %s, which a GGUF of architecture '%s' is read with (llama.cpp; "
				  "no key says it): not written",
				  m, want, cv->spec->arch);
	return 0;
}

/* No layer may slide: the GGUF's reader knows no window for the architecture
 * (llama.cpp's smollm3; convert_hf_to_gguf.py writes none). */
static int no_swa(conv *cv, const tpc_gguf_kv_rule *r)
{
	tpc_model_facts f;
	uint64_t n = 0;
	const cJSON *use = tpc__gk_cfg_get(&cv->c, "use_sliding_window"), *w = tpc__gk_cfg_get(&cv->c, "sliding_window");
	if (layer_facts(cv, &f, &n))
		return -1;
	for (uint64_t l = 0; l < n && l < (uint64_t)f.n_typed; l++)
		if (f.swa_layers[l / 64] >> (l % 64) & 1)
			return tpc_err_at(cv->e, TPC_EINPUT, cv->c.path, NULL,
					  "config.json: layer_types makes layer %llu slide, but a GGUF of architecture '%s' "
					  "has no sliding window (%s): not written",
					  (unsigned long long)l, cv->spec->arch, r->key);
	if (!f.n_typed && cJSON_IsTrue(use) && cJSON_IsNumber(w))
		return tpc_err_at(cv->e, TPC_EINPUT, cv->c.path, NULL,
				  "config.json: use_sliding_window without layer_types (which layers slide is the model "
				  "class's default), and a GGUF of architecture '%s' has no sliding window: not written",
				  cv->spec->arch);
	return 0;
}

/* A rotary fraction for the ROPE_PCT rules: config.json's member p (name),
 * else the config class's default the rule holds (names: the reference
 * reads it through AutoConfig: PhiConfig's and Glm4Config's 0.5), else 1;
 * refused when p (or the default) is not a number, or outside (0, 1] */
static int rot_fraction(conv *cv, const tpc_gguf_kv_rule *r, const cJSON *p, const char *name, double *pct)
{
	char *end = NULL;
	if (p && !cJSON_IsNumber(p))
		return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: '%s' is not a number", name);
	if (p)
		*pct = p->valuedouble;
	else if (!r->names)
		*pct = 1.0;
	else if ((*pct = strtod(r->names, &end)), end == r->names || *end)
		return tpc_err_set(cv->e, TPC_EINPUT, "gguf key '%s': its default is not a number", r->key);
	if (!(*pct > 0 && *pct <= 1))
		return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: '%s' is not in (0, 1]", name);
	return 0;
}

/* TPC_KH_SUM: the members of "a+b+..." added (op '+'), or multiplied
 * (op '*'), each a u32 */
int tpc__gk_sum_members(conv *cv, const char *names, char op, uint64_t *u)
{
	char buf[64], sep[2] = {op, 0};
	*u = op == '*' ? 1 : 0;
	for (const char *p = names; p && *p;) {
		size_t n = strcspn(p, sep);
		uint64_t x = 0;
		snprintf(buf, sizeof(buf), "%.*s", (int)n, p);
		if (tpc__gk_cfg_req_u32(&cv->c, buf, &x, cv->e))
			return -1;
		*u = op == '*' ? *u * x : *u + x; /* u32 factors: no wrap before the check below */
		if (*u > 4294967295u)
			return tpc__gk_cfg_err(&cv->c, cv->e, op == '*' ? "config.json: %s multiplies past a u32" : "config.json: %s adds up past a u32",
				       names);
		p += n + (p[n] == op);
	}
	return 0;
}

/* TPC_KH_GATING_FUNC: TextModel.set_gguf_parameters' score function */
static int gating_func(conv *cv, const cJSON *v, const char *which, bool *put, uint64_t *u)
{
	static const struct {
		const char *name;
		uint64_t id;
	} fn[] = {{"softmax", 1}, {"sigmoid", 2}, {"sqrtsoftplus", 4}};
	if (!v || cJSON_IsNull(v))
		return (*put = false), 0;
	for (size_t i = 0; cJSON_IsString(v) && i < sizeof(fn) / sizeof(fn[0]); i++)
		if (!strcmp(v->valuestring, fn[i].name))
			return (*u = fn[i].id), 0;
	return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: '%s' is not a score function the GGUF knows (softmax, sigmoid, sqrtsoftplus)",
		       which);
}

/* TPC_KH_ROPE_TIMES: "PARAM*K" */
static int rope_times(conv *cv, const char *names, bool *put, double *f)
{
	const char *star = names ? strchr(names, '*') : NULL;
	char buf[64], *end = NULL;
	double k = star ? strtod(star + 1, &end) : 0;
	*put = false;
	if (!star || end == star + 1 || *end || (size_t)(star - names) >= sizeof(buf))
		return tpc_err_set(cv->e, TPC_EINPUT, "internal: rope rule '%s' is not PARAM*K", names ? names : "");
	snprintf(buf, sizeof(buf), "%.*s", (int)(star - names), names);
	const cJSON *v = tpc__gk_rope_member(&cv->c, buf);
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsNumber(v))
		return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: rope parameter '%s' is not a number", buf);
	*f = k * v->valuedouble;
	*put = true;
	return 0;
}

/* names cut at the first `sep` into buf (the part before) and the part after */
static const char *cut(const char *names, int sep, char *buf, size_t n)
{
	const char *at = names ? strchr(names, sep) : NULL;
	if (!at || (size_t)(at - names) >= n)
		return NULL;
	snprintf(buf, n, "%.*s", (int)(at - names), names);
	return at + 1;
}

/* TPC_KH_LIST_SAME: a list of equal numbers (required): its first */
static int key_list_same(conv *cv, const tpc_gguf_kv_rule *r, const cJSON *v, const char *which, uint64_t *u)
{
	const cfg *c = &cv->c;
	const cJSON *it;
	uint64_t x = 0;
	int i = 0;
	if (!v)
		return tpc__gk_cfg_err(c, cv->e, "config.json has none of %s, which the GGUF metadata needs", r->names);
	if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v))
		return tpc__gk_cfg_err(c, cv->e, "config.json: '%s' is not a list of a number a layer, as the reference reads it",
				       which);
	cJSON_ArrayForEach(it, v) {
		if (tpc__gk_cfg_u32(c, it, which, &x, cv->e))
			return -1;
		if (i++ && x != *u)
			return tpc__gk_cfg_err(c, cv->e, "config.json: '%s' differs between layers (the reference asserts it does not)",
					       which);
		*u = x;
	}
	return 0;
}

/* TPC_KH_PRODUCT: "A*B", both required */
static int key_product(conv *cv, const tpc_gguf_kv_rule *r, uint64_t *u)
{
	char first[128];
	const char *second = cut(r->names, '*', first, sizeof(first));
	uint64_t a = 0, b = 0;
	if (!second)
		return tpc_err_set(cv->e, TPC_EINPUT, "internal: gguf key rule '%s' is not A*B", r->key);
	if (tpc__gk_cfg_req_u32(&cv->c, first, &a, cv->e) || tpc__gk_cfg_req_u32(&cv->c, second, &b, cv->e))
		return -1;
	*u = a * b;
	return *u > 4294967295u ? tpc__gk_cfg_err(&cv->c, cv->e, "config.json: %s multiplies past a u32", r->names) : 0;
}

/* TPC_KH_LAYERS_OF: "MEMBERS=TYPE", an INT32 per layer_types entry */
static int key_layers_of(conv *cv, const tpc_gguf_kv_rule *r)
{
	char members[128], full[160];
	const char *type = cut(r->names, '=', members, sizeof(members));
	const cJSON *lt = tpc__gk_cfg_get(&cv->c, "layer_types");
	uint64_t v = 0, n = cJSON_IsArray(lt) ? (uint64_t)cJSON_GetArraySize(lt) : 0, of = 0;
	if (!type)
		return tpc_err_set(cv->e, TPC_EINPUT, "internal: gguf key rule '%s' is not MEMBERS=TYPE", r->key);
	if (!n)
		return tpc__gk_cfg_err(&cv->c, cv->e, "config.json has no layer_types, which the GGUF metadata's %s needs", r->key);
	if (tpc__gk_cfg_req_u32(&cv->c, members, &v, cv->e) || key_full(cv, r->key, full, sizeof(full)))
		return -1;
	int32_t *a = malloc((size_t)n * sizeof(*a));
	if (!a)
		return tpc_err_nomem(cv->e);
	for (uint64_t i = 0; i < n; i++) {
		const cJSON *t = cJSON_GetArrayItem(lt, (int)i);
		bool is = cJSON_IsString(t) && !strcmp(t->valuestring, type);
		a[i] = is ? (int32_t)v : 0;
		of += is;
	}
	int ret = 0;
	if (of == n)
		ret = tpc__gk_cfg_err(&cv->c, cv->e,
			      "config.json: every layer_types entry is '%s', which convert_hf_to_gguf.py writes as another architecture (not written by tpconv)",
			      type);
	else if (tpc_gguf_kvs_arr(cv->kv, full, TPC_GV_I32, a, n))
		ret = tpc_err_nomem(cv->e);
	free(a);
	return ret;
}

/* TPC_KH_MULTIPLE_OF: "MEMBER%N", no key */
static int key_multiple_of(conv *cv, const tpc_gguf_kv_rule *r)
{
	char member[128], *end = NULL;
	const char *num = cut(r->names, '%', member, sizeof(member));
	unsigned long long k = num ? strtoull(num, &end, 10) : 0;
	uint64_t v = 0;
	if (!num || end == num || *end || !k)
		return tpc_err_set(cv->e, TPC_EINPUT, "internal: gguf key rule '%s' is not MEMBER%%N", r->key);
	if (tpc__gk_cfg_req_u32(&cv->c, member, &v, cv->e))
		return -1;
	if (v % k) {
		char msg[160];
		snprintf(msg, sizeof(msg), "config.json: '%%s' is %llu, not a multiple of %llu: the reference pads it, which tpconv does not write yet",
			 (unsigned long long)v, k);
		return tpc__gk_cfg_err(&cv->c, cv->e, msg, member);
	}
	return 0;
}

/* TPC_KH_DIV_IF: "A/B?C", A integer-divided by B when C is a number above 0, else no key */
static int key_div_if(conv *cv, const tpc_gguf_kv_rule *r, bool *put, uint64_t *u)
{
	const cfg *c = &cv->c;
	char buf[64];
	const char *which = NULL;
	const char *sl = r->names ? strchr(r->names, '/') : NULL, *q = sl ? strchr(sl, '?') : NULL;
	char a[128], b[128];
	uint64_t d = 0, n = 0;
	const cJSON *va, *vb, *vc;
	if (!q || (size_t)(sl - r->names) >= sizeof(a) || (size_t)(q - sl - 1) >= sizeof(b))
		return tpc_err_set(cv->e, TPC_EINPUT, "gguf key rule '%s': not A/B?C", r->key);
	snprintf(a, sizeof(a), "%.*s", (int)(sl - r->names), r->names);
	snprintf(b, sizeof(b), "%.*s", (int)(q - sl - 1), sl + 1);
	*put = false;
	if (!(vc = tpc__gk_cfg_find(c, q + 1, &which, buf, sizeof(buf))) || !cJSON_IsNumber(vc) || vc->valuedouble <= 0)
		return 0;
	if (!(va = tpc__gk_cfg_find(c, a, &which, buf, sizeof(buf))) || cJSON_IsNull(va) || tpc__gk_cfg_u32(c, va, which, &n, cv->e))
		return va && !cJSON_IsNull(va) ? -1 : 0;
	if (!(vb = tpc__gk_cfg_find(c, b, &which, buf, sizeof(buf))) || cJSON_IsNull(vb) || tpc__gk_cfg_u32(c, vb, which, &d, cv->e))
		return vb && !cJSON_IsNull(vb) ? -1 : 0;
	if (!d)
		return tpc__gk_cfg_err(c, cv->e, "config.json: '%s' is 0", b);
	*u = n / d;
	*put = true;
	return 0;
}

/* TPC_KH_ROPE_PCT_HD / _EMB: the rotary dimension from a fraction of the head (rotary_pct) or of the embedding */
static int key_rope_pct(conv *cv, const tpc_gguf_kv_rule *r, uint64_t *u)
{
	const cfg *c = &cv->c;
	uint64_t h = 0, heads = 0;
	bool hd = r->how == TPC_KH_ROPE_PCT_HD;
	const cJSON *p = hd ? tpc__gk_cfg_get(c, "rotary_pct") : tpc__gk_rope_member(c, "partial_rotary_factor");
	/* transformers 5 writes GPT-NeoX's rotary_pct as rope_parameters.partial_rotary_factor */
	if (hd && !cJSON_IsNumber(p) && c->rope)
		p = cJSON_GetObjectItemCaseSensitive(c->rope, "partial_rotary_factor");
	if (hd && !cJSON_IsNumber(p))
		return tpc__gk_cfg_err(c, cv->e, "config.json has no number '%s' (nor rope_parameters.partial_rotary_factor), "
			       "which the GGUF metadata needs", "rotary_pct");
	double pct = 0;
	if (rot_fraction(cv, r, p, hd ? "rotary_pct" : "partial_rotary_factor", &pct) ||
	    tpc__gk_two_u32(c, "hidden_size|n_embd", "num_attention_heads|n_head", &h, &heads, cv->e))
		return -1;
	*u = hd ? (uint64_t)(pct * (double)(h / heads)) : (uint64_t)(pct * (double)h) / heads;
	return 0;
}

/* TPC_KH_ROPE_PCT_HEAD: partial_rotary_factor of head_dim (else hidden / heads) */
static int key_rope_pct_head(conv *cv, const tpc_gguf_kv_rule *r, uint64_t *u)
{
	const cfg *c = &cv->c;
	uint64_t h = 0, heads = 0;
	const cJSON *v;
	double pct = 0;
	if (rot_fraction(cv, r, tpc__gk_rope_member(c, "partial_rotary_factor"), "partial_rotary_factor", &pct))
		return -1;
	if ((v = tpc__gk_cfg_get(c, "head_dim")) && !cJSON_IsNull(v)) {
		if (tpc__gk_cfg_u32(c, v, "head_dim", &h, cv->e))
			return -1;
	} else if (tpc__gk_two_u32(c, "hidden_size", "num_attention_heads", &h, &heads, cv->e)) {
		return -1;
	} else {
		h /= heads;
	}
	*u = (uint64_t)(pct * (double)h);
	return 0;
}

/* TPC_KH_CONST: the rule's own number, or (a string key) its text */
static int key_const(conv *cv, const tpc_gguf_kv_rule *r, bool *put, uint64_t *u, double *f)
{
	char *end = NULL, full[160];
	if (r->type == TPC_GV_STRING) { /* the string names holds */
		*put = false;
		return key_full(cv, r->key, full, sizeof(full)) ? -1 : tpc__gk_kv_str(cv, full, r->names ? r->names : "");
	}
	*f = r->names ? strtod(r->names, &end) : 0;
	if (!end || end == r->names || *end || *f < 0)
		return tpc_err_set(cv->e, TPC_EINPUT, "gguf key '%s': its constant is not a number", r->key);
	*u = (uint64_t)*f;
	return 0;
}

/* A number of the rope parameters (else `dflt`); refused when not a number */
static int rope_num(conv *cv, const char *name, double dflt, double *out)
{
	const cJSON *v = tpc__gk_rope_member(&cv->c, name);
	*out = v ? v->valuedouble : dflt;
	return !v || cJSON_IsNumber(v) ? 0 : tpc__gk_cfg_err(&cv->c, cv->e, "config.json: rope parameter '%s' is not a number", name);
}

/* The head dim of the record's alpha rope: config.json's dim_member
 * (HunYuanModel's head_dim), else hidden_size / num_attention_heads */
static int rope_alpha_dim(conv *cv, const tpc_gguf_rope_alpha *ra, uint64_t *dim)
{
	uint64_t h = 0, heads = 0;
	if (ra->dim_member)
		return tpc__gk_cfg_req_u32(&cv->c, ra->dim_member, dim, cv->e);
	if (tpc__gk_two_u32(&cv->c, "hidden_size", "num_attention_heads", &h, &heads, cv->e))
		return -1;
	*dim = h / heads;
	return 0;
}

/* TPC_KH_ROPE_ALPHA: the record's alpha rope (HunYuanMoEModel's and
 * HunYuanModel's set_gguf_parameters, "dynamic"): what the reference asserts
 * refused by name (and a missing alpha where any is taken: the reference's
 * default is not transformers'), then freq_base theta * alpha ^ (dim / (dim -
 * 2)) in double as Python computes it (an F32 key), scaling "none", factor
 * 1, the original context and context_length */
static int rope_alpha_keys(conv *cv, const tpc_gguf_kv_rule *r)
{
	const tpc_gguf_rope_alpha *ra = cv->spec->rope_alpha;
	const cJSON *t = tpc__gk_rope_member(&cv->c, "rope_type");
	double alpha = 0, theta = 0;
	uint64_t dim = 0, ctx = 0;
	char msg[200], key[160];
	(void)r;
	if (!ra || !ra->rope_type || !cJSON_IsString(t) || strcmp(t->valuestring, ra->rope_type))
		return 0;
	if (ra->any_alpha && !tpc__gk_rope_member(&cv->c, "alpha")) {
		snprintf(msg, sizeof(msg), "a %s rope without alpha: convert_hf_to_gguf.py writes alpha %g's base, transformers rotates it by rope_theta's",
			 ra->rope_type, ra->alpha);
		return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: %s (not the same model)", msg);
	}
	if (rope_num(cv, "alpha", ra->alpha, &alpha) || rope_num(cv, "rope_theta", ra->theta, &theta) ||
	    rope_alpha_dim(cv, ra, &dim) || tpc__gk_cfg_req_u32(&cv->c, "max_position_embeddings", &ctx, cv->e))
		return -1;
	msg[0] = 0;
	if (ra->any_alpha && !(alpha > 0))
		snprintf(msg, sizeof(msg), "alpha %g, not a positive number", alpha);
	else if (!ra->any_alpha && alpha != ra->alpha)
		snprintf(msg, sizeof(msg), "alpha %g, not %g", alpha, ra->alpha);
	else if (theta != ra->theta)
		snprintf(msg, sizeof(msg), "rope_theta %g, not %g", theta, ra->theta);
	else if (ra->dim && dim != (uint64_t)ra->dim)
		snprintf(msg, sizeof(msg), "a head of %llu dims (%s), not %lld", (unsigned long long)dim,
			 ra->dim_member ? ra->dim_member : "hidden_size / num_attention_heads", (long long)ra->dim);
	else if (ctx != (uint64_t)ra->ctx_from[0] && ctx != (uint64_t)ra->ctx_from[1])
		snprintf(msg, sizeof(msg), "max_position_embeddings %llu, not %lld or %lld", (unsigned long long)ctx,
			 (long long)ra->ctx_from[0], (long long)ra->ctx_from[1]);
	if (msg[0]) {
		char full[260];
		snprintf(full, sizeof(full), "%s rope with %s: convert_hf_to_gguf.py asserts those (its rule for another is unknown)",
			 ra->rope_type, msg);
		return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: a %s", full);
	}
	if (dim < 3)
		return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: a %s rope on a head of under 3 dims", ra->rope_type);
	snprintf(key, sizeof(key), "%s.rope.scaling.type", cv->spec->arch);
	return tpc__gk_kv_put(cv, "rope.freq_base", F32, theta * pow(alpha, (double)dim / (double)(dim - 2)), 0) ||
			       tpc__gk_kv_str(cv, key, "none") || tpc__gk_kv_put(cv, "rope.scaling.factor", F32, 1.0, 0) ||
			       tpc__gk_kv_put(cv, "rope.scaling.original_context_length", U32, 0, (uint64_t)ra->ctx) ||
			       tpc__gk_kv_put(cv, "context_length", U32, 0, (uint64_t)ra->ctx)
		       ? -1
		       : 0;
}

/* rope.freq_base_swa (TextModel.set_gguf_parameters): the rope parameters'
 * sliding_attention.rope_theta; without per-layer-type parameters the local
 * theta member found (v, `which`), which TextModel.__init__ mirrors there */
static int rope_theta_swa(conv *cv, const cJSON *v, const char *which, bool *put, double *f)
{
	const cJSON *rp = cv->c.rope;
	const cJSON *sa = rp ? cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention") : NULL;
	bool per_type = sa || (rp && cJSON_GetObjectItemCaseSensitive(rp, "full_attention"));
	if (per_type) {
		v = cJSON_IsObject(sa) ? cJSON_GetObjectItemCaseSensitive(sa, "rope_theta") : NULL;
		which = "rope_parameters.sliding_attention.rope_theta";
		if (sa && !cJSON_IsObject(sa))
			return tpc__gk_cfg_err(&cv->c, cv->e, "config.json: %s is not an object", "rope_parameters.sliding_attention");
		/* the reference writes sliding_attention's theta alone; the GGUF's
		 * reader scales no sliding layer (llama.cpp: freq_scale_swa 1) */
		const cJSON *t = cJSON_IsObject(sa) ? cJSON_GetObjectItemCaseSensitive(sa, "rope_type") : NULL;
		if (t && !(cJSON_IsString(t) && !strcmp(t->valuestring, "default")))
			return tpc__gk_cfg_err(&cv->c, cv->e,
					       "config.json: rope_parameters.sliding_attention's rope_type is not 'default': a "
					       "scaled sliding-layer rope is not in the GGUF metadata (its reader scales none): %s",
					       "not written");
	}
	if (!v || cJSON_IsNull(v))
		return (*put = false), 0;
	*f = v->valuedouble;
	return cJSON_IsNumber(v) ? 0 : tpc__gk_cfg_err(&cv->c, cv->e, "config.json: '%s' is not a number", which);
}

/* Whether a rule of this kind looks its names up in config.json as
 * alternatives (the others read them as their own syntax, or not at all) */
static bool finds_names(tpc_gguf_kh how)
{
	switch (how) {
	case TPC_KH_CONST:
	case TPC_KH_SWA_PATTERN:
	case TPC_KH_DIV_IF:
	case TPC_KH_ROPE_PCT_EMB:
	case TPC_KH_ROPE_PCT_HEAD:
	case TPC_KH_ROPE_OFF_EVERY:
	case TPC_KH_SWA_EVERY:
	case TPC_KH_SUM:
	case TPC_KH_ROPE_TIMES:
	case TPC_KH_ASSUMED:
	case TPC_KH_PRODUCT:
	case TPC_KH_LAYERS_OF:
	case TPC_KH_MULTIPLE_OF:
	case TPC_KH_LAYER_IS:
	case TPC_KH_ROPE_SECTIONS:
	case TPC_KH_ROPE_ALPHA:
		return false;
	default:
		return true;
	}
}

/* The rules that write their own keys (arrays) or only check config.json */
static int (*const own_keys[])(conv *cv, const tpc_gguf_kv_rule *r) = {
	[TPC_KH_SWA_PATTERN] = swa_pattern,
	[TPC_KH_ROPE_OFF_EVERY] = rope_off_every,
	[TPC_KH_NO_SWA] = no_swa,
	[TPC_KH_SWA_EVERY] = swa_every,
	[TPC_KH_LAYER_IS] = layer_is,
	[TPC_KH_ASSUMED] = assumed,
	[TPC_KH_LAYERS_OF] = key_layers_of,
	[TPC_KH_MULTIPLE_OF] = key_multiple_of,
	[TPC_KH_ROPE_SECTIONS] = rope_sections_default,
	[TPC_KH_ROPE_ALPHA] = rope_alpha_keys,
};

/* One rule: 0 with *put false (no key), 0 with the value in *u or *f, or -1. */
int tpc__gk_rule_eval(conv *cv, const tpc_gguf_kv_rule *r, bool *put, uint64_t *u, double *f)
{
	const cfg *c = &cv->c;
	char buf[64];
	const char *which = NULL;
	if ((size_t)r->how < sizeof(own_keys) / sizeof(own_keys[0]) && own_keys[r->how]) {
		*put = false;
		return own_keys[r->how](cv, r);
	}
	const cJSON *v = r->names && finds_names(r->how) ? tpc__gk_cfg_find(c, r->names, &which, buf, sizeof(buf)) : NULL;
	uint64_t h = 0, heads = 0;
	*put = true;
	switch (r->how) {
	case TPC_KH_FIND:
	case TPC_KH_REQ:
		if ((!v || cJSON_IsNull(v)) && r->how == TPC_KH_FIND) /* find_hparam's None: no key */
			return (*put = false), 0;
		if (!v)
			return tpc__gk_cfg_err(c, cv->e, "config.json has none of %s, which the GGUF metadata needs", r->names);
		if (r->type == TPC_GV_BOOL && cJSON_IsBool(v))
			return (*u = cJSON_IsTrue(v)), 0;
		if (r->type != F32)
			return tpc__gk_cfg_u32(c, v, which, u, cv->e);
		*f = v->valuedouble;
		return cJSON_IsNumber(v) ? 0 : tpc__gk_cfg_err(c, cv->e, "config.json: '%s' is not a number", which);
	case TPC_KH_TIMES4:
		if (tpc__gk_cfg_req_u32(c, r->names, u, cv->e))
			return -1;
		*u *= 4;
		return 0;
	case TPC_KH_DIV_IF:
		return key_div_if(cv, r, put, u);
	case TPC_KH_OR_HEADS:
		return v ? tpc__gk_cfg_u32(c, v, which, u, cv->e) : tpc__gk_cfg_req_u32(c, "num_attention_heads", u, cv->e);
	case TPC_KH_OR_ZERO:
		*u = 0;
		return v && !cJSON_IsNull(v) ? tpc__gk_cfg_u32(c, v, which, u, cv->e) : 0;
	case TPC_KH_OR_TRUE:
		if (v && !cJSON_IsBool(v))
			return tpc__gk_cfg_err(c, cv->e, "config.json: '%s' is not true or false", which);
		*u = v ? cJSON_IsTrue(v) : 1;
		return 0;
	case TPC_KH_FALSE_ONLY:
		*put = cJSON_IsFalse(v);
		*u = 0;
		return 0;
	case TPC_KH_HEAD_DIM: /* key_length here, value_length by the caller */
		if (!v || cJSON_IsNull(v))
			return (*put = false), 0;
		return tpc__gk_cfg_u32(c, v, which, u, cv->e);
	case TPC_KH_ROPE_DIM:
		if ((v = tpc__gk_cfg_get(c, "head_dim")) && !cJSON_IsNull(v))
			return tpc__gk_cfg_u32(c, v, "head_dim", u, cv->e);
		if (tpc__gk_two_u32(c, "hidden_size", "num_attention_heads", &h, &heads, cv->e))
			return -1;
		*u = h / heads;
		return 0;
	case TPC_KH_ROPE_PCT_HD:
	case TPC_KH_ROPE_PCT_EMB:
		return key_rope_pct(cv, r, u);
	case TPC_KH_ROPE_PCT_HEAD:
		return key_rope_pct_head(cv, r, u);
	case TPC_KH_ROPE_SCALING:
		*put = false;
		return rope_scaling(cv);
	case TPC_KH_ROPE_THETA:
		v = tpc__gk_rope_member(c, "rope_theta");
		if (!v && r->names)
			return tpc__gk_cfg_err(c, cv->e, "config.json has no %s, which the GGUF metadata needs", "rope_theta");
		if (!v || cJSON_IsNull(v))
			return (*put = false), 0;
		*f = v->valuedouble;
		return cJSON_IsNumber(v) ? 0 : tpc__gk_cfg_err(c, cv->e, "config.json: '%s' is not a number", "rope_theta");
	case TPC_KH_ROPE_THETA_SWA:
		return rope_theta_swa(cv, v, which, put, f);
	case TPC_KH_ROPE_ORIG:
		v = tpc__gk_rope_member(c, "original_max_position_embeddings");
		if (!v)
			return tpc__gk_cfg_err(c, cv->e, "config.json has no %s, which the GGUF metadata needs",
				       "original_max_position_embeddings");
		return tpc__gk_cfg_u32(c, v, "original_max_position_embeddings", u, cv->e);
	case TPC_KH_CONST:
		return key_const(cv, r, put, u, f);
	case TPC_KH_OR_ONE:
	case TPC_KH_NONZERO:
		if (v && !cJSON_IsNull(v) && !cJSON_IsNumber(v))
			return tpc__gk_cfg_err(c, cv->e, "config.json: '%s' is not a number", which);
		*f = v && !cJSON_IsNull(v) ? v->valuedouble : r->how == TPC_KH_OR_ONE ? 1.0 : 0.0;
		*u = 0;
		*put = *f != 0;
		return 0;
	case TPC_KH_REFUSE:
		*put = false;
		return v && !cJSON_IsNull(v) ? tpc__gk_cfg_err(c, cv->e, "config.json: '%s' is not written to GGUF by tpconv yet", which)
					     : 0;
	case TPC_KH_FILE_TYPE: /* prepare_metadata: an MXFP4 model's f32/f16/bf16 is MOSTLY_MXFP4_MOE */
		*u = (uint64_t)(cv->mxfp4 && (cv->ftype == FT_ALL_F32 || cv->ftype == FT_MOSTLY_F16 || cv->ftype == FT_MOSTLY_BF16)
					? FT_MOSTLY_MXFP4_MOE : cv->ftype);
		return 0;
	case TPC_KH_SUM:
		return tpc__gk_sum_members(cv, r->names, '+', u);
	case TPC_KH_PLUS_MTP:
		if (tpc__gk_cfg_req_u32(c, r->names, u, cv->e))
			return -1;
		*u += cv->mtp;
		return 0;
	case TPC_KH_MTP:
		if (r->names) { /* Glm4MoeModel: the member as config.json has it, unless --no-mtp */
			if (cv->no_mtp || !v || cJSON_IsNull(v))
				return (*put = false), 0;
			return tpc__gk_cfg_u32(c, v, which, u, cv->e);
		}
		*put = cv->mtp > 0;
		*u = cv->mtp;
		return 0;
	case TPC_KH_GATING_FUNC:
		return gating_func(cv, v, which, put, u);
	case TPC_KH_TRUE_ONLY:
		if (!v)
			return tpc__gk_cfg_err(c, cv->e, "config.json has no %s, which the GGUF metadata needs", r->names);
		if (!cJSON_IsNull(v) && !cJSON_IsBool(v))
			return tpc__gk_cfg_err(c, cv->e, "config.json: '%s' is not true or false", which);
		*put = cJSON_IsTrue(v);
		*u = 1;
		return 0;
	case TPC_KH_ROPE_TIMES:
		return rope_times(cv, r->names, put, f);
	case TPC_KH_PRODUCT:
		return key_product(cv, r, u);
	case TPC_KH_LIST_SAME:
		return key_list_same(cv, r, v, which, u);
	case TPC_KH_SWA_PATTERN: /* own_keys: not reached */
	case TPC_KH_ROPE_OFF_EVERY:
	case TPC_KH_NO_SWA:
	case TPC_KH_SWA_EVERY:
	case TPC_KH_LAYER_IS:
	case TPC_KH_ASSUMED:
	case TPC_KH_LAYERS_OF:
	case TPC_KH_MULTIPLE_OF:
	case TPC_KH_ROPE_SECTIONS:
	case TPC_KH_ROPE_ALPHA:
	case TPC_KH_END:
		break;
	}
	return (*put = false), 0;
}

int tpc__gk_arch_keys(conv *cv)
{
	for (const tpc_gguf_kv_rule *r = cv->spec->kv; r->how != TPC_KH_END; r++) {
		bool put = false;
		uint64_t u = 0;
		double f = 0;
		if (tpc__gk_rule_eval(cv, r, &put, &u, &f) < 0)
			return -1;
		if (put && tpc__gk_kv_put(cv, r->key, r->type, f, u))
			return -1;
		if (put && r->how == TPC_KH_HEAD_DIM && tpc__gk_kv_put(cv, "attention.value_length", U32, 0, u))
			return -1;
	}
	return 0;
}

/* ---- general.* ---- */

/* gguf-py Metadata.id_to_title: '-' as a space, each all-lowercase word
 * title-cased unless it is a version ("v1.2") or starts with a digit */
static char *id_to_title(const char *id)
{
	size_t n = strlen(id);
	char *out = malloc(n + 1), *o = out;
	for (const char *p = id; out && *p;) {
		while (*p == '-' || *p == ' ' || *p == '\t' || *p == '\n')
			p++;
		const char *w = p;
		while (*p && *p != '-' && *p != ' ' && *p != '\t' && *p != '\n')
			p++;
		if (p == w)
			break;
		bool cased = false, lower = true, ver = w[0] >= '0' && w[0] <= '9';
		for (const char *q = w; q < p; q++) {
			cased |= (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z');
			lower &= !(*q >= 'A' && *q <= 'Z');
		}
		if (w[0] == 'v' && p - w > 1) { /* v\d+(\.\d+)* */
			ver = true;
			for (const char *q = w + 1; q < p; q++)
				ver &= (*q >= '0' && *q <= '9') || (*q == '.' && q[-1] != '.' && q[-1] != 'v' && q + 1 < p);
		}
		if (o != out)
			*o++ = ' ';
		for (const char *q = w; q < p; q++) {
			bool after_letter = q > w && ((q[-1] >= 'a' && q[-1] <= 'z') || (q[-1] >= 'A' && q[-1] <= 'Z'));
			*o++ = cased && lower && !ver && !after_letter && *q >= 'a' && *q <= 'z' ? (char)(*q - 32) : *q;
		}
	}
	if (o)
		*o = '\0';
	return out;
}

char *tpc__gguf_title(const char *dir)
{
	char *base = tpc_strdup(dir), *title = NULL;
	/* Path(dir).name: trailing slashes do not count */
	for (size_t k = base ? strlen(base) : 0; k > 1 && base[k - 1] == '/'; k--)
		base[k - 1] = '\0';
	if (base)
		title = id_to_title(tpc_path_base(base));
	free(base);
	return title;
}

/* gguf-py model_weight_count_rounded_notation */
static void rounded_notation(uint64_t count, char *buf, size_t n)
{
	double x = (double)count;
	const char *suffix = "K";
	double s = x * 1e-3;
	if (x > 1e12)
		s = x * 1e-12, suffix = "T";
	else if (x > 1e9)
		s = x * 1e-9, suffix = "B";
	else if (x > 1e6)
		s = x * 1e-6, suffix = "M";
	char r[64];
	snprintf(r, sizeof(r), "%.0f", nearbyint(s)); /* Python round(): ties to even */
	const char *d = r;
	while (*d == '0')
		d++;
	int fix = 2 - (int)strlen(d);
	snprintf(buf, n, "%.*f%s", fix > 0 ? fix : 0, s, suffix);
}

/* GGUFWriter.get_total_parameter_count + gguf-py size_label */
void tpc__gk_size_label(const tpc_gguf_wtensor *t, size_t nt, char *buf, size_t n)
{
	uint64_t total = 0, shared = 0, expert = 0, xsum = 0, nx = 0;
	for (size_t i = 0; i < nt; i++) {
		uint64_t size = t[i].t.numel;
		bool bias = strstr(t[i].name, ".bias") != NULL;
		int64_t cnt = t[i].t.ndim >= 3 ? t[i].t.shape[t[i].t.ndim - (bias ? 2 : 3)] : 0;
		if (strstr(t[i].name, "_exps.") && t[i].t.ndim >= 3 && cnt > 0) {
			expert += size / (uint64_t)cnt;
			xsum += (uint64_t)cnt;
			nx++;
		} else {
			shared += size;
		}
		total += size;
	}
	uint64_t xc = nx ? xsum / nx : 0;
	char pretty[32];
	rounded_notation(xc ? shared + expert : total, pretty, sizeof(pretty));
	if (xc)
		snprintf(buf, n, "%llux%s", (unsigned long long)xc, pretty);
	else
		snprintf(buf, n, "%s", pretty);
}

/* Metadata.load: generation_config.json's sampling members */
int tpc__gk_sampling_keys(conv *cv, const char *dir)
{
	/* each under general.sampling.<key, else member>; alt: another name of the member */
#define S(m, t) {m, t, NULL, NULL}
	static const struct { const char *member; int type; const char *alt, *key; } s[] = {
		S("sequence", TPC_GV_STRING), S("top_k", TPC_GV_I32), S("top_p", F32), S("min_p", F32),
		S("xtc_probability", F32), S("xtc_threshold", F32), {"temperature", F32, NULL, "temp"},
		S("penalty_last_n", TPC_GV_I32), {"penalty_repeat", F32, "repetition_penalty", NULL}, S("mirostat", TPC_GV_I32),
		S("mirostat_tau", F32), S("mirostat_eta", F32),
	};
#undef S
	char *path = tpc_path_join(dir, "generation_config.json"), *text = NULL;
	size_t len = 0;
	tpc_err scratch;
	tpc_err_init(&scratch);
	int ret = path ? 0 : tpc_err_nomem(cv->e);
	/* the reference reads it only when it is a valid JSON file */
	cJSON *g = !ret && !tpc_read_file(path, CONFIG_CAP, &text, &len, &scratch) ? cJSON_ParseWithLength(text, len) : NULL;
	for (size_t i = 0; g && !ret && i < sizeof(s) / sizeof(s[0]); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(g, s[i].member);
		if (!v && s[i].alt)
			v = cJSON_GetObjectItemCaseSensitive(g, s[i].alt);
		if (!v || cJSON_IsNull(v))
			continue;
		char key[48];
		snprintf(key, sizeof(key), "general.sampling.%s", s[i].key ? s[i].key : s[i].member);
		if (s[i].type == TPC_GV_STRING ? !cJSON_IsString(v) : !cJSON_IsNumber(v))
			ret = tpc_err_at(cv->e, TPC_EINPUT, path, NULL, "generation_config.json: '%s' is not a %s", s[i].member,
					 s[i].type == TPC_GV_STRING ? "string" : "number");
		else if (s[i].type == TPC_GV_STRING)
			ret = tpc__gk_kv_str(cv, key, v->valuestring);
		else if (s[i].type == F32)
			ret = tpc_gguf_kvs_float(cv->kv, key, F32, v->valuedouble) ? tpc_err_nomem(cv->e) : 0;
		else
			ret = tpc_gguf_kvs_int(cv->kv, key, TPC_GV_I32, (int64_t)v->valuedouble) ? tpc_err_nomem(cv->e) : 0;
	}
	cJSON_Delete(g);
	free(text);
	free(path);
	return ret;
}
