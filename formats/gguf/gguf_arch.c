/* gguf_arch.c - what convert_hf_to_gguf.py (llama.cpp 0.7) writes for a
 * Hugging Face model: general.* and {arch}.* keys, then the tokenizer's
 * (gguf_vocab.c), and the tensor list in the reference's order.
 *
 * Sources (Debian's llama.cpp-tools 0.7.0): conversion/base.py (ModelBase:
 * index_tensors, prepare_tensors, prepare_metadata; TextModel:
 * set_gguf_parameters), conversion/llama.py, qwen.py, gemma.py, phi.py,
 * gpt2.py, gptneox.py; gguf-py metadata.py (general.name, size_label).
 *
 * The reference walks the tensors of each model part sorted by name, maps
 * each HF name to its GGUF name (here: the family records' TPC_ECO_GGUF
 * column), transforms some (Q/K rows back to Meta's interleaved rotary order
 * for the llama architecture, Gemma's norms + 1, GPT-2's Conv1D transposed,
 * GPT-NeoX's head-interleaved qkv regrouped) and stacks a layer's experts
 * once the last of them has come. What differs per family is data on its
 * record (the GGUF part, lib/tpc_family_gguf.h: keys as rules, transforms
 * as fields); code only where a value is computed.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gguf.h"
#include "tpc_cast.h"
#include "tpc_cfg.h"
#include "tpc_facts.h"
#include "tpc_family.h"
#include "tpc_family_gguf.h"
#include "tpc_io.h"
#include "tpc_util.h"

#define CONFIG_CAP ((uint64_t)64 << 20)

/* LlamaFileType */
enum { FT_ALL_F32 = 0, FT_MOSTLY_F16 = 1, FT_MOSTLY_Q8_0 = 7, FT_MOSTLY_BF16 = 32 };

#define U32 TPC_GV_U32
#define F32 TPC_GV_F32

/* ---- config.json ---- */

/* config.json through lib's reader (tpc_cfg.h), under its text_config rule:
 * text_config's members win, as TextModel.__init__ merges them */
typedef struct cfg {
	const char *path;
	tpc_cfg *doc;
	cJSON *root;
	const cJSON *text; /* text_config (NULL when none) */
	const cJSON *rope; /* rope_parameters, else rope_scaling (an object or NULL) */
} cfg;

static const cJSON *cfg_get(const cfg *c, const char *name)
{
	return tpc_cfg_get(c->doc, TPC_CFG_TEXT, name, NULL);
}

/* find_hparam: the first of "a|b|c" present (JSON null counts as present,
 * as a Python None in the dict does); the name found copied to buf */
static const cJSON *cfg_find(const cfg *c, const char *names, const char **which, char *buf, size_t n)
{
	const char *w = NULL;
	const cJSON *v = tpc_cfg_get(c->doc, TPC_CFG_TEXT, names, &w);
	if (v && which) {
		snprintf(buf, n, "%s", w);
		*which = buf;
	}
	return v;
}

static int cfg_err(const cfg *c, tpc_err *e, const char *fmt, const char *a)
{
	char safe[160];
	tpc_sanitize(safe, sizeof(safe), a ? a : "");
	return tpc_err_at(e, TPC_EINPUT, c->path, NULL, fmt, safe);
}

/* a non-negative integer that fits u32 */
static int cfg_u32(const cfg *c, const cJSON *v, const char *name, uint64_t *out, tpc_err *e)
{
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 4294967295.0 ||
	    v->valuedouble != floor(v->valuedouble))
		return cfg_err(c, e, "config.json: '%s' is not an integer the GGUF key can hold", name);
	*out = (uint64_t)v->valuedouble;
	return 0;
}

static int cfg_req_u32(const cfg *c, const char *names, uint64_t *out, tpc_err *e)
{
	char buf[64];
	const char *which = NULL;
	const cJSON *v = cfg_find(c, names, &which, buf, sizeof(buf));
	if (!v)
		return cfg_err(c, e, "config.json has none of %s, which the GGUF metadata needs", names);
	return cfg_u32(c, v, which, out, e);
}

/* ---- keys ---- */

typedef struct conv {
	const tpc_gguf_arch *spec;
	const tpc_family *fam;
	cfg c;
	int ftype; /* LlamaFileType after `auto` is resolved */
	bool has_attn;      /* Phi-3's rope.scaling.attn_factor (long_factor) */
	double attn_factor;
	tpc_gguf_kvs *kv;
	tpc_err *e;
} conv;

/* A rule's key in full: "{arch}.key", a "general." or "tokenizer." key as is */
static int key_full(conv *cv, const char *key, char *full, size_t n)
{
	int w = strncmp(key, "general.", 8) && strncmp(key, "tokenizer.", 10) ? snprintf(full, n, "%s.%s", cv->spec->arch, key)
										 : snprintf(full, n, "%s", key);
	return w < 0 || (size_t)w >= n ? tpc_err_set(cv->e, TPC_EINPUT, "gguf key '%s' is too long", key) : 0;
}

static int kv_put(conv *cv, const char *key, int type, double f, uint64_t u)
{
	char full[160];
	if (key_full(cv, key, full, sizeof(full)))
		return -1;
	int r = type == F32 ? tpc_gguf_kvs_float(cv->kv, full, F32, f) : tpc_gguf_kvs_uint(cv->kv, full, type, u);
	return r ? tpc_err_nomem(cv->e) : 0;
}

static int kv_str(conv *cv, const char *key, const char *s)
{
	return tpc_gguf_kvs_str(cv->kv, key, s, strlen(s)) ? tpc_err_nomem(cv->e) : 0;
}

static int64_t cfg_int_or(const cfg *c, const char *name, int64_t dflt)
{
	const cJSON *v = cfg_get(c, name);
	return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}

/* the rope parameters with TextModel.__init__'s mirroring: a rope_theta given
 * at the top level counts as rope_parameters.rope_theta, "type" as
 * "rope_type" */
static const cJSON *rope_member(const cfg *c, const char *name)
{
	const cJSON *v = c->rope ? cJSON_GetObjectItemCaseSensitive(c->rope, name) : NULL;
	char buf[64];
	if (v)
		return v;
	if (!strcmp(name, "rope_theta"))
		return cfg_find(c, "global_rope_theta|rope_global_theta|rope_theta_global|rope_theta|rotary_emb_base", NULL,
				buf, sizeof(buf));
	if (!strcmp(name, "rope_type") && c->rope)
		return cJSON_GetObjectItemCaseSensitive(c->rope, "type");
	if (!strcmp(name, "original_max_position_embeddings") || !strcmp(name, "partial_rotary_factor"))
		return cfg_find(c, !strcmp(name, "partial_rotary_factor") ? "partial_rotary_factor|rope_pct|rope_percent" : name,
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
		const cJSON *v = rope_member(&cv->c, buf);
		if (v && !cJSON_IsNull(v)) {
			if (!cJSON_IsNumber(v))
				return cfg_err(&cv->c, cv->e, "config.json: rope parameter '%s' is not a number", buf);
			return kv_put(cv, key, F32, v->valuedouble, 0);
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
static int rope_scaling(conv *cv)
{
	const cJSON *t = rope_member(&cv->c, "rope_type"), *f = rope_member(&cv->c, "factor");
	char key[160];
	uint64_t u = 0;
	if (cJSON_GetObjectItemCaseSensitive(cv->c.root, "mrope_section") ||
	    (cv->c.rope && (cJSON_GetObjectItemCaseSensitive(cv->c.rope, "full_attention") ||
			    cJSON_GetObjectItemCaseSensitive(cv->c.rope, "mrope_section"))))
		return cfg_err(&cv->c, cv->e, "config.json: %s rope parameters are not written to GGUF by tpconv yet",
			       "per-layer-type or mrope");
	if (!cJSON_IsString(t))
		return 0;
	const char *ty = t->valuestring;
	bool lin = !strcmp(ty, "linear") && cJSON_IsNumber(f), yarn = !strcmp(ty, "yarn") && cJSON_IsNumber(f);
	bool lr = !strcmp(ty, "su") || !strcmp(ty, "longrope");
	if (!lin && !yarn && !lr)
		return 0;
	snprintf(key, sizeof(key), "%s.rope.scaling.type", cv->spec->arch);
	if (kv_str(cv, key, lin ? "linear" : yarn ? "yarn" : "longrope"))
		return -1;
	if (lr)
		return 0;
	if (kv_put(cv, "rope.scaling.factor", F32, f->valuedouble, 0))
		return -1;
	if (lin)
		return 0;
	const cJSON *o = rope_member(&cv->c, "original_max_position_embeddings"),
		    *tr = rope_member(&cv->c, "truncate");
	if (!o)
		return cfg_err(&cv->c, cv->e, "config.json: rope_type 'yarn' without %s", "original_max_position_embeddings");
	if (cfg_u32(&cv->c, o, "original_max_position_embeddings", &u, cv->e) ||
	    kv_put(cv, "rope.scaling.original_context_length", U32, 0, u))
		return -1;
	if (tr && !cJSON_IsNull(tr) && !cJSON_IsBool(tr))
		return cfg_err(&cv->c, cv->e, "config.json: rope parameter '%s' is not a boolean", "truncate");
	if (tr && cJSON_IsBool(tr) && kv_put(cv, "rope.scaling.yarn_truncate", TPC_GV_BOOL, 0, cJSON_IsTrue(tr)))
		return -1;
	return rope_f32(cv, "extrapolation_factor", "rope.scaling.yarn_ext_factor") ||
			       rope_f32(cv, "attention_factor|attn_factor", "rope.scaling.yarn_attn_factor") ||
			       rope_f32(cv, "beta_fast", "rope.scaling.yarn_beta_fast") ||
			       rope_f32(cv, "beta_slow", "rope.scaling.yarn_beta_slow")
		       ? -1
		       : 0;
}

/* hidden / heads style facts: 0 (and *out), or -1 with the error set */
static int two_u32(const cfg *c, const char *a, const char *b, uint64_t *x, uint64_t *y, tpc_err *e)
{
	if (cfg_req_u32(c, a, x, e) || cfg_req_u32(c, b, y, e))
		return -1;
	return *y ? 0 : cfg_err(c, e, "config.json: %s is 0", b);
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
	const cJSON *v = cfg_find(c, names, which, buf, n);
	if (!v || cJSON_IsNull(v))
		return (*which = NULL), 0;
	if (cfg_u32(c, v, *which, period, cv->e))
		return -1;
	return *period ? 0 : cfg_err(c, cv->e, "config.json: '%s' is 0", *which);
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
	const cJSON *lt = cfg_get(c, "layer_types");
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
		if (cfg_req_u32(c, "num_hidden_layers", n, cv->e))
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

/* The sliding_window_pattern key (Olmo2Model's, Exaone4Model's): with a
 * sliding_window (not null), a bool per layer (swa_layers) */
static int swa_pattern(conv *cv, const tpc_gguf_kv_rule *r)
{
	const cJSON *sw = cfg_get(&cv->c, "sliding_window");
	uint8_t *b = NULL;
	uint64_t n = 0;
	const char *from;
	char buf[64], full[160];
	if (!sw || cJSON_IsNull(sw))
		return 0;
	int ret = swa_layers(cv, r, &b, &n, &from, buf, sizeof(buf)) || key_full(cv, r->key, full, sizeof(full)) ? -1 : 0;
	if (!ret && tpc_gguf_kvs_arr(cv->kv, full, TPC_GV_BOOL, b, n))
		ret = tpc_err_nomem(cv->e);
	free(b);
	return ret;
}

/* TPC_KH_LAYER_IS: "TYPE|MEMBERS|N", a bool per layer of layer_types' TYPE
 * (layers_of_type, the period from "MEMBERS|N") */
static int layer_is(conv *cv, const tpc_gguf_kv_rule *r)
{
	const char *bar = r->names ? strchr(r->names, '|') : NULL;
	char type[64], full[160], buf[64];
	uint8_t *b = NULL;
	uint64_t n = 0;
	const char *from;
	if (!bar || (size_t)(bar - r->names) >= sizeof(type))
		return tpc_err_set(cv->e, TPC_EINPUT, "gguf key rule '%s': no layer type", r->key);
	snprintf(type, sizeof(type), "%.*s", (int)(bar - r->names), r->names);
	tpc_gguf_kv_rule period = *r;
	period.names = bar + 1;
	int ret = layers_of_type(cv, &period, type, &b, &n, &from, buf, sizeof(buf)) ||
			  key_full(cv, r->key, full, sizeof(full))
		      ? -1
		      : 0;
	if (!ret && tpc_gguf_kvs_arr(cv->kv, full, TPC_GV_BOOL, b, n))
		ret = tpc_err_nomem(cv->e);
	free(b);
	return ret;
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
	return cfg_req_u32(&cv->c, "n_layers|num_hidden_layers|n_layer|num_layers", n, cv->e) ||
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
	const cJSON *v = cfg_get(&cv->c, m);
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
	const cJSON *use = cfg_get(&cv->c, "use_sliding_window"), *w = cfg_get(&cv->c, "sliding_window");
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
		return cfg_err(&cv->c, cv->e, "config.json: '%s' is not a number", name);
	if (p)
		*pct = p->valuedouble;
	else if (!r->names)
		*pct = 1.0;
	else if ((*pct = strtod(r->names, &end)), end == r->names || *end)
		return tpc_err_set(cv->e, TPC_EINPUT, "gguf key '%s': its default is not a number", r->key);
	if (!(*pct > 0 && *pct <= 1))
		return cfg_err(&cv->c, cv->e, "config.json: '%s' is not in (0, 1]", name);
	return 0;
}

/* TPC_KH_SUM: the members of "a+b+..." added (op '+'), or multiplied
 * (op '*'), each a u32 */
static int sum_members(conv *cv, const char *names, char op, uint64_t *u)
{
	char buf[64], sep[2] = {op, 0};
	*u = op == '*' ? 1 : 0;
	for (const char *p = names; p && *p;) {
		size_t n = strcspn(p, sep);
		uint64_t x = 0;
		snprintf(buf, sizeof(buf), "%.*s", (int)n, p);
		if (cfg_req_u32(&cv->c, buf, &x, cv->e))
			return -1;
		*u = op == '*' ? *u * x : *u + x; /* u32 factors: no wrap before the check below */
		if (*u > 4294967295u)
			return cfg_err(&cv->c, cv->e, op == '*' ? "config.json: %s multiplies past a u32" : "config.json: %s adds up past a u32",
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
	return cfg_err(&cv->c, cv->e, "config.json: '%s' is not a score function the GGUF knows (softmax, sigmoid, sqrtsoftplus)",
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
	const cJSON *v = rope_member(&cv->c, buf);
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsNumber(v))
		return cfg_err(&cv->c, cv->e, "config.json: rope parameter '%s' is not a number", buf);
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

/* TPC_KH_PRODUCT: "A*B", both required */
static int key_product(conv *cv, const tpc_gguf_kv_rule *r, uint64_t *u)
{
	char first[128];
	const char *second = cut(r->names, '*', first, sizeof(first));
	uint64_t a = 0, b = 0;
	if (!second)
		return tpc_err_set(cv->e, TPC_EINPUT, "internal: gguf key rule '%s' is not A*B", r->key);
	if (cfg_req_u32(&cv->c, first, &a, cv->e) || cfg_req_u32(&cv->c, second, &b, cv->e))
		return -1;
	*u = a * b;
	return *u > 4294967295u ? cfg_err(&cv->c, cv->e, "config.json: %s multiplies past a u32", r->names) : 0;
}

/* TPC_KH_LAYERS_OF: "MEMBERS=TYPE", an INT32 per layer_types entry */
static int key_layers_of(conv *cv, const tpc_gguf_kv_rule *r)
{
	char members[128], full[160];
	const char *type = cut(r->names, '=', members, sizeof(members));
	const cJSON *lt = cfg_get(&cv->c, "layer_types");
	uint64_t v = 0, n = cJSON_IsArray(lt) ? (uint64_t)cJSON_GetArraySize(lt) : 0, of = 0;
	if (!type)
		return tpc_err_set(cv->e, TPC_EINPUT, "internal: gguf key rule '%s' is not MEMBERS=TYPE", r->key);
	if (!n)
		return cfg_err(&cv->c, cv->e, "config.json has no layer_types, which the GGUF metadata's %s needs", r->key);
	if (cfg_req_u32(&cv->c, members, &v, cv->e) || key_full(cv, r->key, full, sizeof(full)))
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
		ret = cfg_err(&cv->c, cv->e,
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
	if (cfg_req_u32(&cv->c, member, &v, cv->e))
		return -1;
	if (v % k) {
		char msg[160];
		snprintf(msg, sizeof(msg), "config.json: '%%s' is %llu, not a multiple of %llu: the reference pads it, which tpconv does not write yet",
			 (unsigned long long)v, k);
		return cfg_err(&cv->c, cv->e, msg, member);
	}
	return 0;
}

/* TPC_KH_PLUS: "A+B", A required, plus B when config.json has it */
static int key_plus(conv *cv, const tpc_gguf_kv_rule *r, uint64_t *u)
{
	const cfg *c = &cv->c;
	char buf[64];
	const char *which = NULL;
	const cJSON *v;
	const char *plus = r->names ? strchr(r->names, '+') : NULL;
	char first[128];
	uint64_t b = 0;
	if (!plus || (size_t)(plus - r->names) >= sizeof(first))
		return tpc_err_set(cv->e, TPC_EINPUT, "gguf key rule '%s': not A+B", r->key);
	snprintf(first, sizeof(first), "%.*s", (int)(plus - r->names), r->names);
	if (cfg_req_u32(c, first, u, cv->e))
		return -1;
	if ((v = cfg_find(c, plus + 1, &which, buf, sizeof(buf))) && !cJSON_IsNull(v) && cfg_u32(c, v, which, &b, cv->e))
		return -1;
	*u += b;
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
	if (!(vc = cfg_find(c, q + 1, &which, buf, sizeof(buf))) || !cJSON_IsNumber(vc) || vc->valuedouble <= 0)
		return 0;
	if (!(va = cfg_find(c, a, &which, buf, sizeof(buf))) || cJSON_IsNull(va) || cfg_u32(c, va, which, &n, cv->e))
		return va && !cJSON_IsNull(va) ? -1 : 0;
	if (!(vb = cfg_find(c, b, &which, buf, sizeof(buf))) || cJSON_IsNull(vb) || cfg_u32(c, vb, which, &d, cv->e))
		return vb && !cJSON_IsNull(vb) ? -1 : 0;
	if (!d)
		return cfg_err(c, cv->e, "config.json: '%s' is 0", b);
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
	const cJSON *p = hd ? cfg_get(c, "rotary_pct") : rope_member(c, "partial_rotary_factor");
	/* transformers 5 writes GPT-NeoX's rotary_pct as rope_parameters.partial_rotary_factor */
	if (hd && !cJSON_IsNumber(p) && c->rope)
		p = cJSON_GetObjectItemCaseSensitive(c->rope, "partial_rotary_factor");
	if (hd && !cJSON_IsNumber(p))
		return cfg_err(c, cv->e, "config.json has no number '%s' (nor rope_parameters.partial_rotary_factor), "
			       "which the GGUF metadata needs", "rotary_pct");
	double pct = 0;
	if (rot_fraction(cv, r, p, hd ? "rotary_pct" : "partial_rotary_factor", &pct) ||
	    two_u32(c, "hidden_size|n_embd", "num_attention_heads|n_head", &h, &heads, cv->e))
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
	if (rot_fraction(cv, r, rope_member(c, "partial_rotary_factor"), "partial_rotary_factor", &pct))
		return -1;
	if ((v = cfg_get(c, "head_dim")) && !cJSON_IsNull(v)) {
		if (cfg_u32(c, v, "head_dim", &h, cv->e))
			return -1;
	} else if (two_u32(c, "hidden_size", "num_attention_heads", &h, &heads, cv->e)) {
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
		return key_full(cv, r->key, full, sizeof(full)) ? -1 : kv_str(cv, full, r->names ? r->names : "");
	}
	*f = r->names ? strtod(r->names, &end) : 0;
	if (!end || end == r->names || *end || *f < 0)
		return tpc_err_set(cv->e, TPC_EINPUT, "gguf key '%s': its constant is not a number", r->key);
	*u = (uint64_t)*f;
	return 0;
}

/* Whether a rule of this kind looks its names up in config.json as
 * alternatives (the others read them as their own syntax, or not at all) */
static bool finds_names(tpc_gguf_kh how)
{
	switch (how) {
	case TPC_KH_CONST:
	case TPC_KH_SWA_PATTERN:
	case TPC_KH_PLUS:
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
		return false;
	default:
		return true;
	}
}

/* One rule: 0 with *put false (no key), 0 with the value in *u or *f, or -1. */
static int rule_eval(conv *cv, const tpc_gguf_kv_rule *r, bool *put, uint64_t *u, double *f)
{
	const cfg *c = &cv->c;
	char buf[64];
	const char *which = NULL;
	const cJSON *v = r->names && finds_names(r->how) ? cfg_find(c, r->names, &which, buf, sizeof(buf)) : NULL;
	uint64_t h = 0, heads = 0;
	*put = true;
	switch (r->how) {
	case TPC_KH_FIND:
	case TPC_KH_REQ:
		if ((!v || cJSON_IsNull(v)) && r->how == TPC_KH_FIND) /* find_hparam's None: no key */
			return (*put = false), 0;
		if (!v)
			return cfg_err(c, cv->e, "config.json has none of %s, which the GGUF metadata needs", r->names);
		if (r->type == TPC_GV_BOOL && cJSON_IsBool(v))
			return (*u = cJSON_IsTrue(v)), 0;
		if (r->type != F32)
			return cfg_u32(c, v, which, u, cv->e);
		*f = v->valuedouble;
		return cJSON_IsNumber(v) ? 0 : cfg_err(c, cv->e, "config.json: '%s' is not a number", which);
	case TPC_KH_TIMES4:
		if (cfg_req_u32(c, r->names, u, cv->e))
			return -1;
		*u *= 4;
		return 0;
	case TPC_KH_PLUS:
		return key_plus(cv, r, u);
	case TPC_KH_DIV_IF:
		return key_div_if(cv, r, put, u);
	case TPC_KH_OR_HEADS:
		return v ? cfg_u32(c, v, which, u, cv->e) : cfg_req_u32(c, "num_attention_heads", u, cv->e);
	case TPC_KH_OR_ZERO:
		*u = 0;
		return v && !cJSON_IsNull(v) ? cfg_u32(c, v, which, u, cv->e) : 0;
	case TPC_KH_OR_TRUE:
		if (v && !cJSON_IsBool(v))
			return cfg_err(c, cv->e, "config.json: '%s' is not true or false", which);
		*u = v ? cJSON_IsTrue(v) : 1;
		return 0;
	case TPC_KH_FALSE_ONLY:
		*put = cJSON_IsFalse(v);
		*u = 0;
		return 0;
	case TPC_KH_HEAD_DIM: /* key_length here, value_length by the caller */
		if (!v || cJSON_IsNull(v))
			return (*put = false), 0;
		return cfg_u32(c, v, which, u, cv->e);
	case TPC_KH_ROPE_DIM:
		if ((v = cfg_get(c, "head_dim")) && !cJSON_IsNull(v))
			return cfg_u32(c, v, "head_dim", u, cv->e);
		if (two_u32(c, "hidden_size", "num_attention_heads", &h, &heads, cv->e))
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
		v = rope_member(c, "rope_theta");
		if (!v && r->names)
			return cfg_err(c, cv->e, "config.json has no %s, which the GGUF metadata needs", "rope_theta");
		if (!v || cJSON_IsNull(v))
			return (*put = false), 0;
		*f = v->valuedouble;
		return cJSON_IsNumber(v) ? 0 : cfg_err(c, cv->e, "config.json: '%s' is not a number", "rope_theta");
	case TPC_KH_ROPE_ORIG:
		v = rope_member(c, "original_max_position_embeddings");
		if (!v)
			return cfg_err(c, cv->e, "config.json has no %s, which the GGUF metadata needs",
				       "original_max_position_embeddings");
		return cfg_u32(c, v, "original_max_position_embeddings", u, cv->e);
	case TPC_KH_CONST:
		return key_const(cv, r, put, u, f);
	case TPC_KH_SWA_PATTERN:
		*put = false;
		return swa_pattern(cv, r);
	case TPC_KH_ROPE_OFF_EVERY:
		*put = false;
		return rope_off_every(cv, r);
	case TPC_KH_NO_SWA:
		*put = false;
		return no_swa(cv, r);
	case TPC_KH_SWA_EVERY:
		*put = false;
		return swa_every(cv, r);
	case TPC_KH_OR_ONE:
		if (v && !cJSON_IsNull(v) && !cJSON_IsNumber(v))
			return cfg_err(c, cv->e, "config.json: '%s' is not a number", which);
		*f = v && !cJSON_IsNull(v) ? v->valuedouble : 1.0;
		*u = 0;
		*put = *f != 0;
		return 0;
	case TPC_KH_REFUSE:
		*put = false;
		return v && !cJSON_IsNull(v) ? cfg_err(c, cv->e, "config.json: '%s' is not written to GGUF by tpconv yet", which)
					     : 0;
	case TPC_KH_FILE_TYPE:
		*u = (uint64_t)cv->ftype;
		return 0;
	case TPC_KH_SUM:
		return sum_members(cv, r->names, '+', u);
	case TPC_KH_LAYER_IS:
		*put = false;
		return layer_is(cv, r);
	case TPC_KH_GATING_FUNC:
		return gating_func(cv, v, which, put, u);
	case TPC_KH_TRUE_ONLY:
		if (!v)
			return cfg_err(c, cv->e, "config.json has no %s, which the GGUF metadata needs", r->names);
		if (!cJSON_IsNull(v) && !cJSON_IsBool(v))
			return cfg_err(c, cv->e, "config.json: '%s' is not true or false", which);
		*put = cJSON_IsTrue(v);
		*u = 1;
		return 0;
	case TPC_KH_ROPE_TIMES:
		return rope_times(cv, r->names, put, f);
	case TPC_KH_ASSUMED:
		*put = false;
		return assumed(cv, r);
	case TPC_KH_PRODUCT:
		return key_product(cv, r, u);
	case TPC_KH_LAYERS_OF:
		*put = false;
		return key_layers_of(cv, r);
	case TPC_KH_MULTIPLE_OF:
		*put = false;
		return key_multiple_of(cv, r);
	case TPC_KH_END:
		break;
	}
	return (*put = false), 0;
}

static int arch_keys(conv *cv)
{
	for (const tpc_gguf_kv_rule *r = cv->spec->kv; r->how != TPC_KH_END; r++) {
		bool put = false;
		uint64_t u = 0;
		double f = 0;
		if (rule_eval(cv, r, &put, &u, &f) < 0)
			return -1;
		if (put && kv_put(cv, r->key, r->type, f, u))
			return -1;
		if (put && r->how == TPC_KH_HEAD_DIM && kv_put(cv, "attention.value_length", U32, 0, u))
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
static void size_label(const tpc_gguf_wtensor *t, size_t nt, char *buf, size_t n)
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
static int sampling_keys(conv *cv, const char *dir)
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
			ret = kv_str(cv, key, v->valuestring);
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

/* ---- tensors ---- */

typedef struct tlist {
	tpc_gguf_wtensor *t;
	size_t n, cap;
	tpc_role *role; /* parallel to t: for the type rule */
} tlist;

static int tl_push(tlist *l, const char *name, tpc_tensor *t, tpc_role role, tpc_err *e)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		tpc_gguf_wtensor *nt = realloc(l->t, cap * sizeof(*nt));
		if (nt)
			l->t = nt;
		tpc_role *nr = nt ? realloc(l->role, cap * sizeof(*nr)) : NULL;
		if (!nr) {
			tpc_tensor_release(t);
			return tpc_err_nomem(e);
		}
		l->role = nr;
		l->cap = cap;
	}
	tpc_gguf_wtensor *w = &l->t[l->n];
	memset(w, 0, sizeof(*w));
	if (!(w->name = tpc_strdup(name))) {
		tpc_tensor_release(t);
		return tpc_err_nomem(e);
	}
	w->t = *t;
	w->type = TPC_GGML_F32;
	l->role[l->n++] = role;
	memset(t, 0, sizeof(*t));
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !memcmp(s + n - k, suffix, k);
}

/* prepare_tensors' type rule for one output tensor */
static int tensor_type(int ftype, tpc_role role, const tpc_gguf_wtensor *w)
{
	if (w->t.ndim <= 1 || ends_with(w->name, "_norm.weight") || !ends_with(w->name, ".weight") ||
	    role == TPC_ROLE_FFN_GATE_INP || role == TPC_ROLE_FFN_GATE_INP_SHEXP || role == TPC_ROLE_POS_EMBD ||
	    role == TPC_ROLE_SSM_CONV1D)
		return TPC_GGML_F32;
	switch (ftype) {
	case FT_ALL_F32:
		return TPC_GGML_F32;
	case FT_MOSTLY_BF16:
		return TPC_GGML_BF16;
	case FT_MOSTLY_Q8_0: /* gguf.quants refuses a row that is not whole blocks: F16 instead */
		return w->t.shape[w->t.ndim - 1] % 32 ? TPC_GGML_F16 : TPC_GGML_Q8_0;
	default:
		return TPC_GGML_F16;
	}
}

/* dst: src as F32 values computed here, read into *v (malloc'd; the
 * caller sets them and hands them to the tensor list) */
static int f32_values(const tpc_ckpt *ck, const tpc_tensor *src, tpc_tensor *dst, float **v, tpc_err *e)
{
	if (tpc_tensor_copy(dst, src))
		return tpc_err_nomem(e);
	dst->dtype = TPC_F32;
	dst->nbytes = dst->numel * 4;
	*v = dst->numel <= ((uint64_t)1 << 28) ? malloc(dst->nbytes ? dst->nbytes : 1) : NULL;
	if (!*v)
		return tpc_err_nomem(e);
	if (tpc_ckpt_read_out(ck, dst, 0, dst->nbytes, *v, e)) {
		free(*v);
		*v = NULL;
		return -1;
	}
	return 0;
}

/* Gemma's norm + 1, computed as the reference does: f16 stays f16 (the sum
 * rounded to f16), any other dtype goes through f32 */
static int norm_plus_one(const tpc_ckpt *ck, const tpc_tensor *src, tpc_tensor *dst, void **mem, tpc_err *e)
{
	float *v;
	if (f32_values(ck, src, dst, &v, e))
		return -1;
	for (uint64_t i = 0; i < dst->numel; i++)
		v[i] = src->dtype == TPC_F16 ? tpc_f16_to_f32(tpc_f32_to_f16(v[i] + 1.0f)) : v[i] + 1.0f;
	*mem = v;
	return 0;
}

static float pow2i(int q)
{
	uint32_t b = (uint32_t)(q + 0x7f) << 23;
	float f;
	memcpy(&f, &b, 4);
	return f;
}

float tpc__gguf_torch_expf(float d)
{
	/* SLEEF's xexpf (sleefsimdsp.c), each vmla an FMA as on AVX2/AVX512 */
	if (isnan(d))
		return d;
	int q = (int)nearbyintf(d * 1.442695040888963407359924681001892137426645954152985934135449406931f);
	float s = fmaf((float)q, -0.693145751953125f, d);
	s = fmaf((float)q, -1.428606765330187045e-06f, s);
	float u = 0.000198527617612853646278381f;
	u = fmaf(u, s, 0.00139304355252534151077271f);
	u = fmaf(u, s, 0.00833336077630519866943359f);
	u = fmaf(u, s, 0.0416664853692054748535156f);
	u = fmaf(u, s, 0.166666671633720397949219f);
	u = fmaf(u, s, 0.5f);
	u = 1.0f + fmaf(s * s, u, s);
	if (d < -104)
		return 0;
	if (d > 100)
		return INFINITY;
	return u * pow2i(q >> 1) * pow2i(q - (q >> 1)); /* vldexp2 */
}

/* Qwen3NextModel.modify_tensors' -torch.exp(A_log) as prepare_tensors hands
 * it the tensor: f16 stays f16 (torch computes in float and rounds to f16),
 * any other dtype is float32 first (norm_plus_one's rule); written F32 */
static int neg_exp(const tpc_ckpt *ck, const tpc_tensor *src, tpc_tensor *dst, void **mem, tpc_err *e)
{
	float *v;
	if (f32_values(ck, src, dst, &v, e))
		return -1;
	for (uint64_t i = 0; i < dst->numel; i++) {
		float x = -tpc__gguf_torch_expf(v[i]);
		v[i] = src->dtype == TPC_F16 ? tpc_f16_to_f32(tpc_f32_to_f16(x)) : x;
	}
	*mem = v;
	return 0;
}

/* GPT-NeoX's query_key_value: rows [heads, 3, hd] regrouped [3, heads, hd] */
static int neox_qkv(const tpc_tensor *src, int64_t heads, tpc_tensor *dst)
{
	tpc_tensor p[3];
	int ret = 0, k = 0;
	if (heads < 1 || src->ndim < 1 || src->shape[0] % (3 * heads))
		return -1;
	int64_t hd = src->shape[0] / (3 * heads);
	for (; k < 3 && !ret; k++)
		ret = tpc_tensor_ungroup(&p[k], src, 0, heads, 3 * hd, k * hd, hd);
	if (!ret)
		ret = tpc_tensor_init_cat(dst, p, 3, 0);
	for (int i = 0; i < k - (ret ? 1 : 0); i++)
		tpc_tensor_release(&p[i]);
	return ret;
}

/* Elements k, k + n, k + 2n ... of dim d of a plain view (a strided view:
 * gpt-oss's gate at even, up at odd columns) */
static int every_nth(tpc_tensor *dst, const tpc_tensor *src, int d, int k, int n)
{
	tpc_tensor t;
	if (src->ndim <= d || src->shape[d] % n || tpc_tensor_copy(&t, src))
		return -1;
	int ret = tpc_tensor_swap_dims(&t, 0, d) || tpc_tensor_rows_every(dst, &t, k, n, t.shape[0] / n) ? -1 : 0;
	tpc_tensor_release(&t);
	if (!ret && tpc_tensor_swap_dims(dst, 0, d)) {
		tpc_tensor_release(dst);
		ret = -1;
	}
	return ret;
}

typedef struct walk {
	conv *cv;
	const tpc_ckpt *ck;
	tlist out;
	uint64_t layers, n_exp, heads, kv_heads;
	int64_t *xidx;  /* [layer][3][expert] ck index, -1 */
	uint64_t *xgot; /* [layer] */
} walk;

/* Mamba2Model.modify_tensors on one of the mixer's tensors: its values (as
 * F32, computed in the checkpoint's dtype as torch does for A) with the
 * shape llama.cpp reads */
static int mamba2_tensor(walk *w, const tpc_tensor *src, tpc_role role, tpc_tensor *dst, void **mem)
{
	const tpc_ckpt *ck = w->ck;
	int64_t shape[TPC_MAX_NDIM];
	int nd = 0;
	uint64_t groups = 0;
	if (src->numel > ((uint64_t)1 << 28) || src->dq)
		return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, src->name, "a Mamba-2 %s tpconv does not compute (%llu elements%s)",
				  tpc_role_name(role), (unsigned long long)src->numel, src->dq ? ", quantized" : "");
	if (role == TPC_ROLE_SSM_CONV1D) { /* torch's squeeze(): every dim of 1 dropped */
		for (int d = 0; d < src->ndim; d++)
			if (src->shape[d] != 1)
				shape[nd++] = src->shape[d];
	} else if (role == TPC_ROLE_SSM_NORM) {
		if (cfg_req_u32(&w->cv->c, w->cv->spec->ssm_groups, &groups, w->cv->e))
			return -1;
		if (!groups || src->ndim != 1 || src->shape[0] % (int64_t)groups)
			return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, src->name, "not a vector of %llu groups (config.json's %s)",
					  (unsigned long long)groups, w->cv->spec->ssm_groups);
		shape[nd++] = (int64_t)groups;
		shape[nd++] = src->shape[0] / (int64_t)groups;
	} else { /* A and D: (*shape, 1) */
		if (src->ndim >= TPC_MAX_NDIM)
			return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, src->name, "too many dimensions");
		for (int d = 0; d < src->ndim; d++)
			shape[nd++] = src->shape[d];
		shape[nd++] = 1;
	}
	tpc_tensor t;
	if (tpc_tensor_copy(&t, src))
		return tpc_err_nomem(w->cv->e);
	t.dtype = TPC_F32;
	t.nbytes = t.numel * 4;
	float *v = malloc(t.nbytes ? t.nbytes : 1);
	int ret = v ? tpc_ckpt_read_out(ck, &t, 0, t.nbytes, v, w->cv->e) : tpc_err_nomem(w->cv->e);
	tpc_tensor_release(&t);
	for (uint64_t i = 0; !ret && role == TPC_ROLE_SSM_A && i < src->numel; i++) {
		float a = tpc__gguf_torch_expf(v[i]); /* -torch.exp(A_log) in A_log's dtype */
		a = src->dtype == TPC_BF16 ? tpc_bf16_to_f32(tpc_f32_to_bf16(a))
		    : src->dtype == TPC_F16 ? tpc_f16_to_f32(tpc_f32_to_f16(a)) : a;
		v[i] = -a;
	}
	if (!ret && tpc_tensor_init_zero(dst, TPC_F32, nd, shape))
		ret = tpc_err_nomem(w->cv->e);
	if (ret) {
		free(v);
		return ret;
	}
	dst->flags = 0;
	*mem = v;
	return 0;
}

/* One checkpoint tensor that is not an expert's: its description as the
 * reference writes it. */
static int single(walk *w, size_t i, const tpc_tensor_row *row, int64_t l, bool bias)
{
	const tpc_ckpt *ck = w->ck;
	const tpc_tensor *src = &ck->t[i];
	const tpc_gguf_arch *sp = w->cv->spec;
	tpc_tensor t;
	void *mem = NULL;
	char name[256];
	int part, ret = 0;
	memset(&t, 0, sizeof(t));
	if (!tpc_family_name(row, TPC_ECO_GGUF, l, -1, bias, name, sizeof(name), &part))
		return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, src->name, "no GGUF name for this tensor (%s)",
				  tpc_role_name(row->role));
	bool q = row->role == TPC_ROLE_ATTN_Q, k = row->role == TPC_ROLE_ATTN_K;
	if (sp->permute_qk && (q || k)) {
		if (tpc_tensor_rope_permute(&t, src, q ? (int64_t)w->heads : (int64_t)w->kv_heads, false))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, src->name,
					 "%lld rows are not whole heads of even size (%llu heads)", (long long)src->shape[0],
					 (unsigned long long)(q ? w->heads : w->kv_heads));
	} else if (sp->neg_exp && row->role == sp->neg_exp && !bias) {
		ret = neg_exp(ck, src, &t, &mem, w->cv->e);
	} else if (sp->squeeze && row->role == sp->squeeze && !bias) {
		if (tpc_tensor_copy(&t, src))
			ret = tpc_err_nomem(w->cv->e);
		else if (t.ndim != 3 || tpc_tensor_unit_dim(&t, 1, false))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, src->name,
					 "not a depthwise convolution [channels, 1, kernel] (%d-D)", src->ndim);
	} else if (sp->norm_plus_1 && ends_with(src->name, "norm.weight") && !(sp->norm_plain && row->role == sp->norm_plain)) {
		ret = norm_plus_one(ck, src, &t, &mem, w->cv->e);
	} else if (sp->mamba2 && !bias &&
		   (row->role == TPC_ROLE_SSM_CONV1D || row->role == TPC_ROLE_SSM_A || row->role == TPC_ROLE_SSM_D ||
		    row->role == TPC_ROLE_SSM_NORM)) {
		ret = mamba2_tensor(w, src, row->role, &t, &mem);
	} else if (sp->neox_qkv && row->role == TPC_ROLE_ATTN_QKV) {
		if (neox_qkv(src, (int64_t)w->heads, &t))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, src->name,
					 "%lld rows are not 3 x %llu heads", src->ndim ? (long long)src->shape[0] : 0LL,
					 (unsigned long long)w->heads);
	} else if (tpc_tensor_copy(&t, src)) {
		ret = tpc_err_nomem(w->cv->e);
	} else if (row->hf_in_out && !bias && t.ndim >= 2) {
		/* gpt-oss's down_proj [E, I, H]: each expert's [in, out] transposed */
		if (tpc_tensor_swap_dims(&t, t.ndim - 2, t.ndim - 1))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, src->name, "cannot transpose this tensor's experts");
	} else if (w->cv->fam->conv1d && !bias && t.ndim == 2 && row->role != TPC_ROLE_TOKEN_EMBD &&
		   row->role != TPC_ROLE_POS_EMBD && row->role != TPC_ROLE_OUTPUT) {
		tpc_tensor_transpose2d(&t); /* GPT2Model.modify_tensors: Conv1D [in, out] */
	}
	if (!ret)
		ret = tl_push(&w->out, name, &t, row->role, w->cv->e);
	else
		tpc_tensor_release(&t);
	if (!ret && mem)
		w->out.t[w->out.n - 1].mem = mem;
	else
		free(mem);
	return ret;
}

/* An expert's tensor: kept until the layer's last one, then the layer's
 * stacks in the family's order. */
static int expert(walk *w, size_t i, const tpc_tensor_row *row, int64_t l, int64_t x)
{
	const tpc_gguf_arch *sp = w->cv->spec;
	int k = 0;
	while (k < 3 && sp->experts[k] != row->role)
		k++;
	if (k == 3 || x < 0 || (uint64_t)x >= w->n_exp)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, w->ck->t[i].name,
				  "not an expert tensor the GGUF stacks (expert %lld of %llu)", (long long)x,
				  (unsigned long long)w->n_exp);
	int64_t *slot = &w->xidx[((uint64_t)l * 3 + (uint64_t)k) * w->n_exp + (uint64_t)x];
	if (*slot < 0)
		w->xgot[l]++;
	*slot = (int64_t)i;
	if (w->xgot[l] < 3 * w->n_exp)
		return 0;
	for (k = 0; k < 3; k++) {
		const tpc_tensor_row *r = tpc_family_row(w->cv->fam, sp->experts[k]);
		tpc_tensor *parts = tpc_calloc(w->n_exp, sizeof(*parts)), st;
		char name[256];
		int part, ret = parts ? 0 : tpc_err_nomem(w->cv->e);
		for (uint64_t e = 0; !ret && e < w->n_exp; e++)
			parts[e] = w->ck->t[w->xidx[((uint64_t)l * 3 + (uint64_t)k) * w->n_exp + e]];
		if (!ret && !tpc_family_name(r, TPC_ECO_GGUF, l, -1, false, name, sizeof(name), &part))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, w->ck->t[i].name, "no GGUF name for the %s stack",
					 tpc_role_name(sp->experts[k]));
		if (!ret && tpc_tensor_init_stack(&st, parts, (int)w->n_exp))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, name,
					 "layer %lld's experts differ in shape or dtype", (long long)l);
		free(parts); /* shallow copies of ck's tensors */
		if (!ret)
			ret = tl_push(&w->out, name, &st, r->role, w->cv->e);
		if (ret)
			return ret;
	}
	return 0;
}

/* A tensor the Hugging Face checkpoint fuses itself (its name "#K" in the
 * table: Granite-MoE's input_linear [E, 2I, H], gate then up): one GGUF
 * tensor per part, in K order, each an equal slice of the rows (of every
 * expert's rows when it stacks them: dim 1), as GraniteMoeModel.modify_tensors
 * splits it; a row stored [in, out] (hf_in_out: gpt-oss's gate_up_proj [E,
 * H, 2I]) transposed first, parts that interleave (hf_interleaved) taken as
 * every n-th row, and a fused bias ([E, 2I], a row with a bias) the same
 * way, as GptOssModel.modify_tensors. Views: no byte copied. */
static int hf_fused(walk *w, size_t i, const tpc_tensor_row *row, int64_t l, bool bias)
{
	const tpc_tensor *src = &w->ck->t[i];
	const tpc_tensor_row *parts[TPC_ROLE_COUNT];
	int n = tpc_family_parts(w->cv->fam, row, TPC_ECO_HF, parts, TPC_ROLE_COUNT), d = tpc_family_stacked(row, TPC_ECO_HF);
	if ((bias && !row->bias) || n < 2 || src->ndim <= d || src->shape[d] % n)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name,
				  "a fused tensor whose %d parts are not equal slices of dim %d%s", n, d,
				  bias ? " (a fused bias: not written by tpconv yet)" : "");
	tpc_tensor base;
	if (tpc_tensor_copy(&base, src))
		return tpc_err_nomem(w->cv->e);
	if (row->hf_in_out && !bias && (base.ndim < 2 || tpc_tensor_swap_dims(&base, base.ndim - 2, base.ndim - 1))) {
		tpc_tensor_release(&base);
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "cannot transpose this tensor's experts");
	}
	int64_t len = base.shape[d] / n;
	int ret = 0;
	for (int k = 0; k < n && !ret; k++) {
		char name[256];
		int part;
		tpc_tensor t;
		if (!tpc_family_name(parts[k], TPC_ECO_GGUF, l, -1, bias, name, sizeof(name), &part) || part >= 0)
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "no GGUF name for part %d of this tensor (%s)",
					 k, tpc_role_name(parts[k]->role));
		else if (row->hf_interleaved ? every_nth(&t, &base, d, k, n) : tpc_tensor_narrow(&t, &base, d, k * len, len))
			ret = tpc_err_nomem(w->cv->e);
		else
			ret = tl_push(&w->out, name, &t, parts[k]->role, w->cv->e);
	}
	tpc_tensor_release(&base);
	return ret;
}

/* A tensor the GGUF holds as two, split per head (the record's head_split:
 * DeepSeek's kv_b_proj as attn_k_b and attn_v_b): descriptions, no byte
 * copied. */
static int head_split(walk *w, size_t i, const tpc_tensor_row *row, int64_t l, bool bias)
{
	const tpc_gguf_head_split *hs = &w->cv->spec->head_split;
	const tpc_tensor *src = &w->ck->t[i];
	uint64_t heads = 0, a = 0, b = 0;
	tpc_tensor p[2];
	if (bias)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "a bias split per head is not written by tpconv yet");
	if (cfg_req_u32(&w->cv->c, hs->heads, &heads, w->cv->e) || cfg_req_u32(&w->cv->c, hs->rows[0], &a, w->cv->e) ||
	    cfg_req_u32(&w->cv->c, hs->rows[1], &b, w->cv->e))
		return -1;
	/* the reference asserts heads * (rows0 + rows1) rows */
	if (src->ndim != 2 || src->shape[0] < 0 || (uint64_t)src->shape[0] != heads * (a + b) || src->dq ||
	    tpc_tensor_split_heads(&p[0], &p[1], src, (int64_t)heads, (int64_t)a, hs->transpose0))
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name,
				  "not %llu heads of %s + %s = %llu rows (config.json's %s)", (unsigned long long)heads,
				  hs->rows[0], hs->rows[1], (unsigned long long)(a + b), hs->heads);
	int ret = 0, k = 0;
	for (; k < 2 && !ret; k++) {
		tpc_tensor_row part = {.role = row->role};
		char name[256];
		int fused;
		part.name[TPC_ECO_GGUF] = hs->name[k];
		if (tpc_family_name(&part, TPC_ECO_GGUF, l, -1, false, name, sizeof(name), &fused)) {
			ret = tl_push(&w->out, name, &p[k], row->role, w->cv->e); /* takes p[k] either way */
		} else {
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "no GGUF name for part %d of this tensor", k);
			tpc_tensor_release(&p[k]);
		}
	}
	for (; k < 2; k++) /* the parts not pushed */
		tpc_tensor_release(&p[k]);
	return ret;
}

/* rows of a group_split part: config.json's members multiplied */
static int members_product(conv *cv, const char *names, uint64_t *u)
{
	return sum_members(cv, names, '*', u);
}

/* A tensor the GGUF holds as two, its grouped rows gathered (the record's
 * group_split: Qwen3-Next's in_proj_qkvz as attn_qkv and attn_gate):
 * descriptions, no byte copied. */
static int group_split(walk *w, size_t i, const tpc_tensor_row *row, int64_t l, bool bias)
{
	const tpc_gguf_group_split *gs = &w->cv->spec->group_split;
	const tpc_tensor *src = &w->ck->t[i];
	uint64_t groups = 0, rows[4] = {0}, per = 0;
	int np = 0;
	if (bias)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "a bias of grouped rows is not written by tpconv yet");
	if (cfg_req_u32(&w->cv->c, gs->groups, &groups, w->cv->e))
		return -1;
	for (; np < 4 && gs->rows[np]; np++) {
		if (members_product(w->cv, gs->rows[np], &rows[np]))
			return -1;
		if (!groups || rows[np] % groups)
			return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "%s (%llu) is not whole groups of %s (%llu)",
					  gs->rows[np], (unsigned long long)rows[np], gs->groups, (unsigned long long)groups);
		per += rows[np] / groups;
	}
	if (src->ndim != 2 || src->dq || src->shape[0] < 0 || (uint64_t)src->shape[0] != groups * per)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "not %llu groups of %llu rows (config.json's %s)",
				  (unsigned long long)groups, (unsigned long long)per, gs->groups);
	tpc_tensor p[4];
	int made = 0, ret = 0;
	uint64_t off = 0;
	for (; made < np && !ret; made++) {
		int64_t len = (int64_t)(rows[made] / groups);
		if (tpc_tensor_ungroup(&p[made], src, 0, (int64_t)groups, (int64_t)per, (int64_t)off, len))
			ret = tpc_err_nomem(w->cv->e);
		off += (uint64_t)len;
	}
	if (ret)
		made--;
	for (int k = 0; k < 2 && !ret; k++) {
		tpc_tensor_row part = {.role = row->role};
		tpc_tensor t;
		char name[256];
		int fused, a = k ? gs->first : 0, n = k ? np - gs->first : gs->first;
		part.name[TPC_ECO_GGUF] = gs->name[k];
		if (n < 1 || !tpc_family_name(&part, TPC_ECO_GGUF, l, -1, false, name, sizeof(name), &fused))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "no GGUF name for part %d of this tensor", k);
		else if (tpc_tensor_init_cat(&t, &p[a], n, 0))
			ret = tpc_err_nomem(w->cv->e);
		else
			ret = tl_push(&w->out, name, &t, row->role, w->cv->e);
	}
	for (int k = 0; k < made; k++)
		tpc_tensor_release(&p[k]);
	return ret;
}

/* index_tensors: each part file's tensors sorted by name, parts in name order */
typedef struct order_key {
	const char *file, *name;
	size_t i;
} order_key;

static int by_file_then_name(const void *a, const void *b)
{
	const order_key *x = a, *y = b;
	int c = strcmp(x->file, y->file);
	return c ? c : strcmp(x->name, y->name);
}

static bool skipped(const tpc_gguf_arch *sp, const char *name)
{
	/* prepare_tensors drops these buffers; GPT-2's attn.bias too (its
	 * causal mask, not a weight) */
	return ends_with(name, ".attention.masked_bias") || ends_with(name, ".attention.bias") ||
	       ends_with(name, ".rotary_emb.inv_freq") || ends_with(name, ".attn.bias") ||
	       ends_with(name, ".attn.masked_bias") || (sp->no_lm_head && !strcmp(name, "lm_head.weight"));
}

/* A tensor of a layer past config.json's count the record leaves out
 * (past_layers, the reference's re.match(r"model.layers.(\d+)", name)) */
static bool past_layer(const walk *w, const char *name)
{
	const char *pre = w->cv->spec->past_layers;
	size_t n = pre ? strlen(pre) : 0;
	uint64_t l = 0;
	if (!pre || strncmp(name, pre, n) || name[n] < '0' || name[n] > '9')
		return false;
	for (const char *p = name + n; *p >= '0' && *p <= '9' && l <= w->layers; p++)
		l = l * 10 + (uint64_t)(*p - '0');
	return l >= w->layers;
}

static int walk_one(walk *w, size_t i)
{
	const tpc_tensor *src = &w->ck->t[i];
	int64_t l = -1, x = -1;
	bool bias = false;
	const tpc_tensor_row *row = tpc_family_classify(w->cv->fam, TPC_ECO_HF, src->name, &l, &x, &bias);
	if (row && w->cv->spec->head_split.role && row->role == w->cv->spec->head_split.role &&
	    (l < 0 || (uint64_t)l < w->layers))
		return head_split(w, i, row, l, bias);
	if (row && w->cv->spec->group_split.role && row->role == w->cv->spec->group_split.role &&
	    (l < 0 || (uint64_t)l < w->layers))
		return group_split(w, i, row, l, bias);
	if (!row || !row->name[TPC_ECO_GGUF])
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name,
				  "convert_hf_to_gguf.py has no GGUF name for this tensor of a %s model", w->cv->spec->hf_arch[0]);
	if (l >= 0 && (uint64_t)l >= w->layers)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name,
				  "layer %lld, but config.json has %llu layers", (long long)l, (unsigned long long)w->layers);
	if (strchr(row->name[TPC_ECO_HF], '#'))
		return hf_fused(w, i, row, l, bias);
	bool stacked = strstr(row->name[TPC_ECO_HF], "{E}") && !strstr(row->name[TPC_ECO_GGUF], "{E}");
	if (stacked && !bias)
		return expert(w, i, row, l, x);
	if (stacked)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "expert biases are not stacked by tpconv yet");
	return single(w, i, row, l, bias);
}

static int walk_tensors(walk *w)
{
	const tpc_ckpt *ck = w->ck;
	int ret = 0;
	order_key *ord = tpc_calloc(ck->n ? ck->n : 1, sizeof(*ord));
	if (!ord)
		return tpc_err_nomem(w->cv->e);
	for (size_t i = 0; i < ck->n; i++) {
		/* a merged set's or a sharded save's rank files are not the model's files: one file */
		const char *f = ck->t[i].src >= 0 && !ck->rank_sources ? ck->src[ck->t[i].src].path : NULL;
		ord[i] = (order_key){f ? f : "", ck->t[i].name, i};
	}
	qsort(ord, ck->n, sizeof(*ord), by_file_then_name);
	for (size_t k = 0; k < ck->n && !ret; k++)
		if (!skipped(w->cv->spec, ord[k].name) && !past_layer(w, ord[k].name))
			ret = walk_one(w, ord[k].i);
	for (uint64_t l = 0; !ret && w->xgot && l < w->layers; l++)
		if (w->xgot[l] && w->xgot[l] < 3 * w->n_exp)
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, NULL,
					 "layer %llu has %llu of its %llu expert tensors", (unsigned long long)l,
					 (unsigned long long)w->xgot[l], (unsigned long long)(3 * w->n_exp));
	free(ord);
	return ret;
}

/* a tensor of n F32 values computed here (v, taken, freed on error) */
static int push_mem(walk *w, const char *name, float *v, int64_t n)
{
	tpc_tensor rt;
	if (tpc_tensor_init_zero(&rt, TPC_F32, 1, &n)) {
		free(v);
		return tpc_err_nomem(w->cv->e);
	}
	rt.flags = 0;
	if (tl_push(&w->out, name, &rt, TPC_ROLE_NONE, w->cv->e)) {
		free(v);
		return -1;
	}
	w->out.t[w->out.n - 1].mem = v;
	return 0;
}

/* a number of the rope parameters, or dflt when absent */
static double rope_num(const cfg *c, const char *name, double dflt)
{
	const cJSON *v = rope_member(c, name);
	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* LlamaModel.generate_extra_tensors for rope_type llama3: rope_freqs.weight,
 * F32 [head_dim / 2], the first tensor. Each step as torch computes it in
 * F32: a Python scalar joins an F32 tensor as an F32, `x / t` is
 * t.reciprocal() * x, the power is rounded once from double (torch's own
 * pow is within an ulp of it; exact for the tiny fixture's). */
static int rope_freqs(walk *w)
{
	const cfg *c = &w->cv->c;
	const cJSON *t = rope_member(c, "rope_type");
	char tl[16] = "";
	for (size_t i = 0; cJSON_IsString(t) && t->valuestring[i] && i + 1 < sizeof(tl); i++)
		tl[i] = (char)tolower((unsigned char)t->valuestring[i]);
	if (!w->cv->spec->rope_freqs || strcmp(tl, "llama3"))
		return 0;
	uint64_t dim = 0, h = 0, heads = 0;
	const cJSON *hd = cfg_get(c, "head_dim");
	if (hd && !cJSON_IsNull(hd) ? cfg_u32(c, hd, "head_dim", &dim, w->cv->e)
				    : two_u32(c, "hidden_size", "num_attention_heads", &h, &heads, w->cv->e))
		return -1;
	if (!hd || cJSON_IsNull(hd))
		dim = h / heads;
	if (dim < 2 || dim > 65536)
		return cfg_err(c, w->cv->e, "config.json: a head_dim of %s cannot take llama3 rope factors", "that size");
	float base = (float)rope_num(c, "rope_theta", 10000.0), factor = (float)rope_num(c, "factor", 8.0);
	double lff = rope_num(c, "low_freq_factor", 1.0), hff = rope_num(c, "high_freq_factor", 4.0);
	double ctx = rope_num(c, "original_max_position_embeddings", 8192);
	float lo_wl = (float)(ctx / lff), hi_wl = (float)(ctx / hff), two_pi = (float)(2 * M_PI);
	int64_t n = (int64_t)((dim + 1) / 2);
	float *v = malloc((size_t)n * sizeof(float));
	if (!v)
		return tpc_err_nomem(w->cv->e);
	for (int64_t i = 0; i < n; i++) {
		float x = (float)(2 * i) / (float)dim;
		float fr = 1.0f / (float)pow((double)base, (double)x);
		float wl = (1.0f / fr) * two_pi;
		if (wl < hi_wl) {
			v[i] = 1.0f;
		} else if (wl > lo_wl) {
			v[i] = factor;
		} else {
			float sm = ((1.0f / wl) * (float)ctx - (float)lff) / (float)(hff - lff);
			v[i] = 1.0f / ((1.0f - sm) / factor + sm);
		}
	}
	return push_mem(w, "rope_freqs.weight", v, n);
}

/* Phi3MiniModel.generate_extra_tensors: with a long_factor, the attention
 * factor (a key the caller writes after general.architecture, where the
 * reference's prepare_tensors put it) and rope_factors_long / _short */
static int phi3_factors(walk *w)
{
	const cfg *c = &w->cv->c;
	const cJSON *lf = rope_member(c, "long_factor"), *sf = rope_member(c, "short_factor"),
		    *t = rope_member(c, "rope_type");
	uint64_t h = 0, heads = 0, mx = 0, orig = 0;
	char buf[64];
	if (!w->cv->spec->rope_factors || !cJSON_IsArray(lf) || !cJSON_GetArraySize(lf))
		return 0;
	const char *ty = cJSON_IsString(t) ? t->valuestring : "";
	if (two_u32(c, "hidden_size|n_embd", "num_attention_heads|n_head", &h, &heads, w->cv->e) ||
	    cfg_req_u32(c, "n_positions|max_position_embeddings", &mx, w->cv->e))
		return -1;
	const cJSON *o = rope_member(c, "original_max_position_embeddings");
	if (!o || cfg_u32(c, o, "original_max_position_embeddings", &orig, w->cv->e) || !orig)
		return o ? -1 : cfg_err(c, w->cv->e, "config.json has no %s", "original_max_position_embeddings");
	double scale = (double)mx / (double)orig;
	if (!strcasecmp(ty, "su") || !strcasecmp(ty, "longrope"))
		w->cv->attn_factor = scale > 1.0 ? sqrt(1 + log(scale) / log((double)orig)) : 1.0;
	else if (!strcasecmp(ty, "yarn"))
		w->cv->attn_factor = scale > 1.0 ? 0.1 * log(scale) + 1.0 : 1.0;
	else
		return cfg_err(c, w->cv->e, "config.json: rope_type '%s' with long_factor is not one Phi-3 takes", ty);
	w->cv->has_attn = true;
	double pct = rope_num(c, "partial_rotary_factor", 1.0);
	int64_t dims = (int64_t)(uint64_t)(pct * (double)h) / (int64_t)heads, n = cJSON_GetArraySize(lf);
	if (!cJSON_IsArray(sf) || cJSON_GetArraySize(sf) != n || 2 * n != dims)
		return cfg_err(c, w->cv->e, "config.json: rope long_factor and short_factor must have %s entries each",
			       (snprintf(buf, sizeof(buf), "%lld", (long long)(dims / 2)), buf));
	for (int k = 0; k < 2; k++) {
		const cJSON *a = k ? sf : lf, *x;
		float *v = malloc((size_t)n * sizeof(float));
		int64_t i = 0;
		if (!v)
			return tpc_err_nomem(w->cv->e);
		cJSON_ArrayForEach(x, a) {
			if (!cJSON_IsNumber(x)) {
				free(v);
				return cfg_err(c, w->cv->e, "config.json: rope %s holds a non-number", k ? "short_factor" : "long_factor");
			}
			v[i++] = (float)x->valuedouble;
		}
		if (push_mem(w, k ? "rope_factors_short.weight" : "rope_factors_long.weight", v, n))
			return -1;
	}
	return 0;
}

/* ModelBase.__init__ for --outtype auto: the first tensor of two or more
 * dimensions decides (bf16 -> bf16, f16 -> f16), else f16 */
static int guess_ftype(const tpc_ckpt *ck, const tpc_gguf_arch *sp)
{
	const tpc_tensor *first = NULL;
	for (size_t i = 0; i < ck->n; i++) {
		const tpc_tensor *t = &ck->t[i];
		if (t->ndim < 2 || (sp->no_lm_head && !strcmp(t->name, "lm_head.weight")))
			continue;
		bool own = !ck->rank_sources; /* as walk_tensors: a merged set is one file */
		const char *f = own && t->src >= 0 ? ck->src[t->src].path : "",
			   *g = own && first && first->src >= 0 ? ck->src[first->src].path : "";
		int c = first ? strcmp(f ? f : "", g ? g : "") : -1;
		if (!first || c < 0 || (!c && strcmp(t->name, first->name) < 0))
			first = t;
	}
	if (first && first->dtype == TPC_BF16)
		return FT_MOSTLY_BF16;
	return FT_MOSTLY_F16;
}

static int parse_outtype(const char *outtype, const tpc_ckpt *ck, const tpc_gguf_arch *sp, int *ft, tpc_err *e)
{
	static const struct { const char *name; int ft; } t[] = {
		{"f32", FT_ALL_F32}, {"f16", FT_MOSTLY_F16}, {"bf16", FT_MOSTLY_BF16}, {"q8_0", FT_MOSTLY_Q8_0},
	};
	if (!outtype || !strcmp(outtype, "auto")) {
		*ft = guess_ftype(ck, sp);
		return 0;
	}
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(outtype, t[i].name)) {
			*ft = t[i].ft;
			return 0;
		}
	char safe[64];
	tpc_sanitize(safe, sizeof(safe), outtype);
	return tpc_err_set(e, TPC_EUSAGE, "--outtype '%s': %s%s", safe, tpc_gguf_outtypes(),
				   tpc_gguf_outtype_note(outtype));
}

/* what AutoConfig's to_dict() holds for head_dim when config.json has none */
static int default_head_dim(cfg *c, int dflt, tpc_err *e)
{
	cJSON *o = (cJSON *)(c->text ? c->text : c->root), *v = cJSON_GetObjectItemCaseSensitive(o, "head_dim");
	uint64_t h = 0, heads = 0;
	if (v && !cJSON_IsNull(v))
		return 0;
	if (dflt < 0 && two_u32(c, "hidden_size", "num_attention_heads", &h, &heads, e))
		return -1;
	cJSON_DeleteItemFromObjectCaseSensitive(o, "head_dim");
	return cJSON_AddNumberToObject(o, "head_dim", dflt < 0 ? (double)(h / heads) : dflt) ? 0 : tpc_err_nomem(e);
}

static int load_config(const char *dir, cfg *c, const tpc_family **fam, tpc_err *e)
{
	char *path = dir ? tpc_path_join(dir, "config.json") : NULL;
	int ret = 0;
	if (!dir)
		return tpc_err_set(e, TPC_EUSAGE, "a GGUF needs the model folder (config.json) to write its metadata");
	if (!path)
		return tpc_err_nomem(e);
	c->path = path;
	if ((ret = tpc_cfg_from_file(&c->doc, path, e)))
		return ret;
	c->root = (cJSON *)tpc_cfg_root(c->doc);
	c->text = tpc_cfg_text(c->doc);
	c->rope = tpc_cfg_rope(c->doc, TPC_CFG_TEXT);
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(c->root, "architectures");
	const char *arch = cJSON_IsArray(a) && cJSON_IsString(a->child) ? a->child->valuestring : NULL;
	int64_t experts = cfg_int_or(c, "num_local_experts", cfg_int_or(c, "num_experts", cfg_int_or(c, "n_routed_experts", -1)));
	*fam = tpc_family_by_gguf_hf_experts(arch, experts);
	if (*fam && (*fam)->gguf->head_dim)
		return default_head_dim(c, (*fam)->gguf->head_dim, e);
	if (!*fam) {
		char safe[160], list[512];
		tpc_sanitize(safe, sizeof(safe), arch ? arch : "(none)");
		tpc_family_gguf_list(true, list, sizeof(list));
		return tpc_err_at(e, TPC_EINPUT, c->path, NULL,
				  "config.json: architecture '%s' is not one tpconv writes GGUF for (%s)", safe, list);
	}
	return 0;
}

/* The layers the GGUF holds: its block_count rule's value (Glm4MoeModel
 * counts the next-token-prediction layers too), else config.json's */
static int block_count(conv *cv, uint64_t *n)
{
	bool put = false;
	double f = 0;
	for (const tpc_gguf_kv_rule *r = cv->spec->kv; r->how != TPC_KH_END; r++)
		if (!strcmp(r->key, "block_count")) {
			if (rule_eval(cv, r, &put, n, &f))
				return -1;
			if (put)
				return 0;
			break;
		}
	return cfg_req_u32(&cv->c, "n_layers|num_hidden_layers|n_layer|num_layers", n, cv->e);
}

static int walk_init(walk *w, conv *cv, const tpc_ckpt *ck)
{
	const cfg *c = &cv->c;
	char buf[64];
	memset(w, 0, sizeof(*w));
	w->cv = cv;
	w->ck = ck;
	if (block_count(cv, &w->layers) || cfg_req_u32(c, "n_heads|num_attention_heads|n_head", &w->heads, cv->e))
		return -1;
	w->kv_heads = w->heads;
	const cJSON *v = cfg_find(c, "n_kv_heads|num_key_value_heads", NULL, buf, sizeof(buf));
	if (cv->spec->permute_qk && v && cfg_u32(c, v, "num_key_value_heads", &w->kv_heads, cv->e))
		return -1;
	if (!cv->spec->experts[0])
		return 0;
	/* any of the usual names, else the record's expert count member (ERNIE 4.5 MoE's moe_num_experts) */
	char xm[160];
	snprintf(xm, sizeof(xm), "num_local_experts|num_experts|n_routed_experts%s%s", cv->spec->experts_member ? "|" : "",
		 cv->spec->experts_member ? cv->spec->experts_member : "");
	if (cfg_req_u32(c, xm, &w->n_exp, cv->e))
		return -1;
	uint64_t n = 0;
	if (!w->n_exp || tpc_mul_u64(w->layers, 3 * w->n_exp, &n) || n > ((uint64_t)1 << 26))
		return cfg_err(c, cv->e, "config.json: %s experts over the layers is not a count tpconv stacks", "the");
	w->xidx = malloc(n * sizeof(*w->xidx));
	w->xgot = tpc_calloc(w->layers ? w->layers : 1, sizeof(*w->xgot));
	if (!w->xidx || !w->xgot)
		return tpc_err_nomem(cv->e);
	for (uint64_t i = 0; i < n; i++)
		w->xidx[i] = -1;
	return 0;
}

int tpc_gguf_from_hf_pre(const tpc_ckpt *ck, const char *dir, const char *outtype, const char *pre, tpc_gguf_kvs *kv,
			 tpc_gguf_wtensor **t, size_t *n, tpc_err *e)
{
	conv cv = {.kv = kv, .e = e};
	walk w;
	char label[64], *title = NULL;
	int ret = load_config(dir, &cv.c, &cv.fam, e);
	memset(&w, 0, sizeof(w));
	*t = NULL;
	*n = 0;
	if (!ret)
		cv.spec = cv.fam->gguf;
	if (!ret)
		ret = parse_outtype(outtype, ck, cv.spec, &cv.ftype, e);
	if (!ret)
		ret = walk_init(&w, &cv, ck);
	if (!ret)
		ret = rope_freqs(&w);
	if (!ret)
		ret = phi3_factors(&w);
	if (!ret)
		ret = walk_tensors(&w);
	for (size_t i = 0; !ret && i < w.out.n; i++)
		w.out.t[i].type = tensor_type(cv.ftype, w.out.role[i], &w.out.t[i]);
	/* prepare_metadata: general.*, the architecture's keys, then the vocabulary */
	if (!ret && !(title = tpc__gguf_title(dir)))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = kv_str(&cv, "general.architecture", cv.spec->arch) ? -1 : 0;
	if (!ret && cv.has_attn)
		ret = kv_put(&cv, "rope.scaling.attn_factor", F32, cv.attn_factor, 0);
	if (!ret)
		ret = kv_str(&cv, "general.type", "model");
	if (!ret)
		ret = sampling_keys(&cv, dir);
	if (!ret) {
		size_label(w.out.t, w.out.n, label, sizeof(label));
		ret = kv_str(&cv, "general.name", title) || kv_str(&cv, "general.size_label", label) ? -1 : 0;
	}
	if (!ret)
		ret = arch_keys(&cv);
	if (!ret && tpc_gguf_kvs_uint(kv, "general.quantization_version", U32, 2))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = tpc_gguf_vocab_pre(dir, cv.spec->arch, cfg_int_or(&cv.c, "vocab_size", 0), pre, kv, e);
	if (!ret) {
		*t = w.out.t;
		*n = w.out.n;
		w.out.t = NULL;
		w.out.n = 0;
	}
	tpc_gguf_wtensors_release(w.out.t, w.out.n);
	free(w.out.role);
	free(w.xidx);
	free(w.xgot);
	free(title);
	tpc_cfg_free(cv.c.doc);
	free((char *)cv.c.path);
	return ret;
}

int tpc_gguf_from_hf(const tpc_ckpt *ck, const char *dir, const char *outtype, tpc_gguf_kvs *kv,
		     tpc_gguf_wtensor **t, size_t *n, tpc_err *e)
{
	return tpc_gguf_from_hf_pre(ck, dir, outtype, NULL, kv, t, n, e);
}
