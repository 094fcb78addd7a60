/* tpc_lora.c - PEFT LoRA adapters merged into a checkpoint as computed
 * tensors (tpc_lora.h): the config, the plan (every adapter key placed and
 * checked before the checkpoint changes), the rows computed while written. */
#include <cjson/cJSON.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_cast.h"
#include "tpc_family.h"
#include "tpc_io.h"
#include "tpc_lora.h"
#include "tpc_regex.h"
#include "tpc_util.h"

#define LORA_PREFIX "base_model.model."
#define LORA_STEP_ELEMS (1u << 20) /* image elements computed per step */
#define LORA_TILE_ROWS 32          /* rows a thread reads and merges at a time */

/* ---- adapter_config.json ---- */

static int cfg_bad(tpc_err *e, const char *path, const char *fmt, const char *what)
{
	char msg[400];
	snprintf(msg, sizeof(msg), fmt, what);
	return tpc_err_at(e, TPC_EINPUT, path, NULL, "%s", msg);
}

static bool json_set(const cJSON *o, const char *k)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!it || cJSON_IsNull(it) || cJSON_IsFalse(it))
		return false;
	if (cJSON_IsArray(it) || cJSON_IsObject(it))
		return cJSON_GetArraySize(it) > 0;
	if (cJSON_IsString(it))
		return it->valuestring[0] != 0;
	return true;
}

static int json_bool(const cJSON *o, const char *k, bool *v, const char *path, tpc_err *e)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
	*v = false;
	if (!it || cJSON_IsNull(it))
		return 0;
	if (!cJSON_IsBool(it))
		return cfg_bad(e, path, "'%s' is not true or false", k);
	*v = cJSON_IsTrue(it);
	return 0;
}

int tpc_lora_cfg_from_buffer(tpc_lora_cfg *c, const char *text, size_t len, const char *path, tpc_err *e)
{
	/* members whose adapter a merge into the unchanged base cannot express */
	static const char *const refused[] = {
		"use_qalora", "layer_replication",
		"trainable_token_indices", "arrow_config", "use_bdlora",
	};
	int ret = 0;
	memset(c, 0, sizeof(*c));
	cJSON *j = cJSON_ParseWithLength(text, len);
	if (!j || !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return tpc_err_at(e, TPC_EINPUT, path, NULL, "not a JSON object");
	}
	c->json = j;
	if (!(c->path = tpc_strdup(path ? path : "adapter_config.json"))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	const cJSON *pt = cJSON_GetObjectItemCaseSensitive(j, "peft_type");
	if (!cJSON_IsString(pt)) {
		ret = cfg_bad(e, path, "%s: no peft_type; not a PEFT adapter config", "");
		goto out;
	}
	if (strcmp(pt->valuestring, "LORA")) {
		char nm[64];
		tpc_sanitize(nm, sizeof(nm), pt->valuestring);
		ret = cfg_bad(e, path, "peft_type '%s': tpconv merges LORA adapters only", nm);
		goto out;
	}
	for (size_t k = 0; k < sizeof(refused) / sizeof(*refused); k++)
		if (json_set(j, refused[k])) {
			ret = cfg_bad(e, path, "'%s' is set: such an adapter is not a weight delta tpconv can merge", refused[k]);
			goto out;
		}
	const cJSON *il = cJSON_GetObjectItemCaseSensitive(j, "init_lora_weights");
	if (cJSON_IsString(il)) {
		/* these change the base weights at initialisation: the adapter is a
		 * delta over a modified base unless PEFT converted it when saving */
		static const char *const moved[] = {"pissa", "olora", "corda", "loftq", "lora_ga"};
		for (size_t k = 0; k < sizeof(moved) / sizeof(*moved); k++)
			if (!strncmp(il->valuestring, moved[k], strlen(moved[k]))) {
				ret = cfg_bad(e, path,
					      "init_lora_weights '%s' changes the base weights: the adapter applies to that "
					      "changed base (save it with path_initial_model_for_weight_conversion for a plain LoRA)",
					      moved[k]);
				goto out;
			}
	}
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "r"), *a = cJSON_GetObjectItemCaseSensitive(j, "lora_alpha");
	c->r = 8;
	c->alpha = 8;
	if (r && (!cJSON_IsNumber(r) || r->valuedouble < 1 || r->valuedouble > 1e6 || r->valuedouble != (double)(int64_t)r->valuedouble)) {
		ret = cfg_bad(e, path, "'%s' is not a positive integer", "r");
		goto out;
	}
	if (a && (!cJSON_IsNumber(a) || !isfinite(a->valuedouble))) {
		ret = cfg_bad(e, path, "'%s' is not a number", "lora_alpha");
		goto out;
	}
	if (r)
		c->r = (int64_t)r->valuedouble;
	if (a)
		c->alpha = a->valuedouble;
	if ((ret = json_bool(j, "use_rslora", &c->rslora, path, e)) || (ret = json_bool(j, "fan_in_fan_out", &c->fifo, path, e)) ||
	    (ret = json_bool(j, "use_dora", &c->dora, path, e)) || (ret = json_bool(j, "lora_bias", &c->lora_bias, path, e)))
		goto out;
	const cJSON *tp = cJSON_GetObjectItemCaseSensitive(j, "target_parameters"), *it;
	if (tp && !cJSON_IsNull(tp) && !cJSON_IsArray(tp)) {
		ret = cfg_bad(e, path, "'%s' is not a list", "target_parameters");
		goto out;
	}
	cJSON_ArrayForEach(it, tp)
	{
		if (!cJSON_IsString(it) || !it->valuestring[0]) {
			ret = cfg_bad(e, path, "'%s' holds something that is not a parameter name", "target_parameters");
			goto out;
		}
	}
	/* PEFT's ParamWrapper refuses these (tuners/lora/layer.py at 5d602fd,
	 * ParamWrapper.__init__ L2275-2283): no such adapter is saved */
	c->params = json_set(j, "target_parameters");
	if (c->params && (c->dora || c->lora_bias || c->fifo)) {
		ret = cfg_bad(e, path, "target_parameters with %s: PEFT's ParamWrapper does not make such an adapter",
			      c->dora ? "use_dora" : c->lora_bias ? "lora_bias" : "fan_in_fan_out");
		goto out;
	}
	static const char *const pats[] = {"rank_pattern", "alpha_pattern"};
	for (int k = 0; k < 2; k++) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, pats[k]);
		if (p && !cJSON_IsNull(p) && !cJSON_IsObject(p)) {
			ret = cfg_bad(e, path, "'%s' is not an object", pats[k]);
			goto out;
		}
		cJSON_ArrayForEach(it, p)
		{
			if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) ||
			    (k == 0 && (it->valuedouble < 1 || it->valuedouble > 1e6 || it->valuedouble != (double)(int64_t)it->valuedouble))) {
				ret = cfg_bad(e, path, "'%s' has a value that is not a rank or alpha", pats[k]);
				goto out;
			}
		}
	}
out:
	if (ret)
		tpc_lora_cfg_release(c);
	return ret;
}

int tpc_lora_cfg_from_file(tpc_lora_cfg *c, const char *path, tpc_err *e)
{
	char *text = NULL;
	size_t len = 0;
	int ret = tpc_read_file(path, 16u << 20, &text, &len, e);
	if (!ret)
		ret = tpc_lora_cfg_from_buffer(c, text, len, path, e);
	free(text);
	return ret;
}

void tpc_lora_cfg_release(tpc_lora_cfg *c)
{
	cJSON_Delete(c->json);
	free(c->path);
	memset(c, 0, sizeof(*c));
}

/* ---- names ---- */

/* Python's re.fullmatch(pat, name) (wrap "^(" ")$") or re.match of
 * "(.*\.)?(pat)$" (pattern keys): 1 match, 0 none, <0 error set. */
static int lora_re_match(const char *pre, const char *pat, const char *name, const char *what, const char *path, tpc_err *e)
{
	size_t n = strlen(pre) + strlen(pat) + 8;
	char *full = tpc_malloc(n), why[256];
	regex_t re;
	if (!full)
		return tpc_err_nomem(e);
	snprintf(full, n, "%s(%s)$", pre, pat);
	int rc = tpc_regex_compile(&re, full, REG_NOSUB, why, sizeof(why));
	free(full);
	if (rc < 0)
		return tpc_err_nomem(e);
	if (rc > 0) {
		char p[200];
		tpc_sanitize(p, sizeof(p), pat);
		return tpc_err_at(e, TPC_EINPUT, path, NULL, "%s pattern '%s': %s", what, p, why);
	}
	rc = regexec(&re, name, 0, NULL, 0) == 0;
	regfree(&re);
	return rc;
}

/* PEFT's check_target_module_exists (tuners_utils.py) for a list or a
 * string of target_modules / exclude_modules: 1, 0, or <0. A missing or
 * null member: `dflt`. */
static int names_module(const tpc_lora_cfg *c, const char *member, const char *mod, int dflt, tpc_err *e)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive((const cJSON *)c->json, member), *it;
	if (!t || cJSON_IsNull(t))
		return dflt;
	if (cJSON_IsString(t)) {
		if (!strcmp(t->valuestring, "all-linear"))
			return 1; /* every linear layer but the output head: the base's shapes decide */
		return lora_re_match("^", t->valuestring, mod, member, c->path, e);
	}
	if (!cJSON_IsArray(t))
		return tpc_err_at(e, TPC_EINPUT, c->path, NULL, "'%s' is neither a list nor a string", member);
	size_t ml = strlen(mod);
	cJSON_ArrayForEach(it, t)
	{
		if (!cJSON_IsString(it))
			return tpc_err_at(e, TPC_EINPUT, c->path, NULL, "'%s' holds something that is not a string", member);
		size_t l = strlen(it->valuestring);
		if (!strcmp(mod, it->valuestring) || (ml > l && mod[ml - l - 1] == '.' && !strcmp(mod + ml - l, it->valuestring)))
			return 1;
	}
	return 0;
}

int tpc_lora_rank_alpha(const tpc_lora_cfg *c, const char *name, int64_t *r, double *alpha, tpc_err *e)
{
	static const char *const pats[] = {"rank_pattern", "alpha_pattern"};
	*r = c->r;
	*alpha = c->alpha;
	for (int k = 0; k < 2; k++) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive((const cJSON *)c->json, pats[k]), *it;
		cJSON_ArrayForEach(it, p)
		{
			int m = lora_re_match("^(.*\\.)?", it->string, name, pats[k], c->path, e);
			if (m < 0)
				return m;
			if (m) {
				if (k == 0)
					*r = (int64_t)it->valuedouble;
				else
					*alpha = it->valuedouble;
				break;
			}
		}
	}
	return 0;
}

/* ---- the plan ---- */

enum { K_A, K_B, K_BB, K_EA, K_EB, K_M, K_FULL, K_NKIND };

static const struct {
	const char *suffix;
	int kind;
} key_kinds[] = {
	{".lora_A.weight", K_A}, {".lora_B.weight", K_B}, {".lora_B.bias", K_BB}, {".lora_embedding_A", K_EA},
	{".lora_embedding_B", K_EB}, {".lora_magnitude_vector.weight", K_M}, {".lora_magnitude_vector", K_M},
};

typedef struct lmod {
	char *name;          /* the module, without base_model.model. */
	int64_t t[K_NKIND];  /* adapter tensor per kind, -1 */
	char *full_param;    /* K_FULL: weight / bias ... (one per module entry) */
	/* resolved */
	int64_t base, bias;  /* ck tensors */
	int mode, dora;
	float s;
	int64_t ne, epr;     /* experts (a ParamWrapper over a 3-D parameter): count, rows each */
	int64_t *pieces;     /* a fused parameter the base stores one expert a tensor: expert e's
				part k is ck tensor pieces[e * nparts + k], rows k * prow .. of B */
	int npieces, nparts;
	int64_t prow;
} lmod;

typedef struct plan {
	lmod *m;
	size_t n, cap;
} plan;

static void plan_release(plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->m[i].name);
		free(p->m[i].full_param);
		free(p->m[i].pieces);
	}
	free(p->m);
}

static lmod *plan_get(plan *p, const char *name, size_t len, const char *param, tpc_err *e)
{
	for (size_t i = 0; i < p->n; i++)
		if (strlen(p->m[i].name) == len && !memcmp(p->m[i].name, name, len) &&
		    (!param == !p->m[i].full_param) && (!param || !strcmp(param, p->m[i].full_param)))
			return &p->m[i];
	if (tpc_grow((void **)&p->m, &p->cap, p->n + 1, sizeof(*p->m))) {
		tpc_err_nomem(e);
		return NULL;
	}
	lmod *m = &p->m[p->n];
	memset(m, 0, sizeof(*m));
	for (int k = 0; k < K_NKIND; k++)
		m->t[k] = -1;
	m->base = m->bias = -1;
	if (!(m->name = tpc_strndup(name, len)) || (param && !(m->full_param = tpc_strdup(param)))) {
		free(m->name);
		tpc_err_nomem(e);
		return NULL;
	}
	p->n++;
	return m;
}

static int bad_key(tpc_err *e, const char *key, const char *fmt, const char *arg)
{
	char msg[1600];
	snprintf(msg, sizeof(msg), fmt, arg);
	return tpc_err_at(e, TPC_EINPUT, NULL, key, "%s", msg);
}

/* Every adapter key into its module. */
static int place_keys(plan *p, const tpc_ckpt *ad, const tpc_lora_cfg *c, tpc_err *e)
{
	size_t pl = strlen(LORA_PREFIX);
	for (size_t i = 0; i < ad->n; i++) {
		const tpc_tensor *t = &ad->t[i];
		const char *k = t->name;
		if (strncmp(k, LORA_PREFIX, pl))
			return bad_key(e, k, "not a PEFT LoRA key (they begin '%s')", LORA_PREFIX);
		if (t->dtype != TPC_F32 && t->dtype != TPC_F16 && t->dtype != TPC_BF16 && t->dtype != TPC_F64)
			return bad_key(e, k, "dtype %s: LoRA tensors are float", tpc_dtype_name(t->dtype));
		if (t->dq || (t->flags & TPC_TF_NODATA))
			return bad_key(e, k, "%s", "a computed or data-less adapter tensor");
		const char *rest = k + pl;
		size_t rl = strlen(rest);
		int kind = -1;
		size_t ml = 0;
		for (size_t q = 0; q < sizeof(key_kinds) / sizeof(*key_kinds) && kind < 0; q++) {
			size_t sl = strlen(key_kinds[q].suffix);
			if (rl > sl && !strcmp(rest + rl - sl, key_kinds[q].suffix)) {
				kind = key_kinds[q].kind;
				ml = rl - sl;
			}
		}
		const char *param = NULL;
		if (kind < 0) {
			/* a module saved whole: modules_to_save */
			const char *dot = strrchr(rest, '.');
			if (!dot || strstr(rest, ".lora_") || !strncmp(rest, "lora_", 5))
				return bad_key(e, k, "%s", "not a key PEFT's LoRA writes (lora_A/B.weight, lora_B.bias, "
							   "lora_embedding_A/B, lora_magnitude_vector, a modules_to_save tensor)");
			ml = (size_t)(dot - rest);
			char *mod = tpc_strndup(rest, ml);
			if (!mod)
				return tpc_err_nomem(e);
			int in = names_module(c, "modules_to_save", mod, 0, e);
			free(mod);
			if (in < 0)
				return in;
			if (!in)
				return bad_key(e, k, "%s",
					       "a whole tensor whose module modules_to_save does not name (save_embedding_layers?); "
					       "tpconv does not guess whether it replaces the base's");
			kind = K_FULL;
			param = dot + 1;
		}
		lmod *m = plan_get(p, rest, ml, param, e);
		if (!m)
			return TPC_EIO;
		if (m->t[kind] >= 0)
			return bad_key(e, k, "%s", "a second tensor of the same kind for its module");
		m->t[kind] = (int64_t)i;
	}
	return 0;
}

static bool shape2(const tpc_tensor *t, int64_t a, int64_t b)
{
	return t->ndim == 2 && t->shape[0] == a && t->shape[1] == b;
}

static int bad_shape(tpc_err *e, const tpc_ckpt *ad, int64_t ai, const tpc_tensor *base, const char *why)
{
	char s1[64], s2[64];
	return tpc_err_at(e, TPC_EINPUT, NULL, ad->t[ai].name, "shape %s does not fit base tensor '%s' %s%s%s",
			  tpc_shape_str(&ad->t[ai], s1, sizeof(s1)), base->name, tpc_shape_str(base, s2, sizeof(s2)),
			  why ? ": " : "", why ? why : "");
}

/* Whether base tensor W [E, d1, d2] (or [out, in], E 1) fits PEFT's
 * ParamWrapper A [E * r, in], B [out, r * E] (tuners/lora/layer.py
 * _get_in_out_features, update_layer): mode 0 the experts' matrices are
 * [out, in] ([E, d1, d2] with in = d2: transformers' fused experts), mode 1
 * [in, out] (is_transposed: gpt-oss, Llama 4); -1 neither, 2 both (square). */
static int param_fit(const tpc_tensor *W, const tpc_tensor *A, const tpc_tensor *B, int64_t r)
{
	if (W->ndim == 2)
		return A->shape[0] == r && B->shape[1] == r && A->shape[1] == W->shape[1] && B->shape[0] == W->shape[0] ? 0 : -1;
	if (W->ndim != 3 || W->shape[0] < 1 || A->shape[0] != r * W->shape[0] || B->shape[1] != r * W->shape[0])
		return -1;
	bool n = A->shape[1] == W->shape[2] && B->shape[0] == W->shape[1];
	bool t = A->shape[1] == W->shape[1] && B->shape[0] == W->shape[2];
	return n && t ? 2 : n ? 0 : t ? 1 : -1;
}

/* The base tensor transformers 5's parameter `key` is, when it only renamed
 * it (the family record's hf_fused without "{E}": Mixtral's mlp.gate.weight
 * is the checkpoint's block_sparse_moe.gate.weight); -1 if none. */
static int64_t renamed(const tpc_ckpt *ck, const tpc_lora_cfg *c, const char *key)
{
	const tpc_tensor_row *rows[2];
	int64_t L;
	char nm[600];
	int part;
	if (!c->family || tpc_family_fused_rows(c->family, key, &L, rows, 2) != 1 || strchr(rows[0]->hf_fused, '#') ||
	    strstr(rows[0]->name[TPC_ECO_HF], "{E}") || !tpc_family_name(rows[0], TPC_ECO_HF, L, -1, false, nm, sizeof(nm), &part))
		return -1;
	return tpc_ckpt_find(ck, nm);
}

/* Whether a fit is a float weight of its own (not tied): 0, or the refusal. */
static int float_untied(const tpc_ckpt *ck, int64_t bi, const char *an, tpc_err *e)
{
	const tpc_tensor *W = &ck->t[bi];
	char msg[1400];
	if (W->dtype != TPC_F32 && W->dtype != TPC_BF16 && W->dtype != TPC_F16 && W->dtype != TPC_F64) {
		snprintf(msg, sizeof(msg), "its base tensor '%s' is %s, not a float weight (quantized? give --dequantize)",
			 W->name, tpc_dtype_name(W->dtype));
		return bad_key(e, an, "%s", msg);
	}
	for (size_t j = 0; j < ck->n; j++)
		if ((int64_t)j != bi && (tpc_tensor_same_view(&ck->t[j], W) || ck->t[j].alias_of == bi || W->alias_of == (int64_t)j))
			return bad_key(e, an, "its base tensor is tied to '%s' (one storage): merging into tied weights is not supported",
				       ck->t[j].name);
	return 0;
}

/* transformers' fused parameter `key` [E, parts x rows, in] (not
 * is_transposed: Mixtral's and Qwen-MoE's experts) where the base stores
 * its experts one by one (the family record's hf_fused rows): expert e's
 * part k is its own tensor [rows, in], the rows k * rows .. of the fused
 * matrix. 1 and m filled when every expert's parts are there and fit A
 * [E * r, in] and B [parts x rows, r * E], 0 when not, <0 an error. */
static int split_fit(lmod *m, const tpc_ckpt *ck, const tpc_tensor *A, const tpc_tensor *B, const tpc_lora_cfg *c,
		     const char *key, int64_t r, tpc_err *e)
{
	const tpc_tensor_row *rows[4];
	int64_t L;
	char nm[600];
	int part, np = c->family ? tpc_family_fused_rows(c->family, key, &L, rows, 4) : 0, ret = 0;
	if (np <= 0 || A->shape[0] % r || B->shape[1] != A->shape[0] || B->shape[0] % np)
		return 0;
	int64_t E = A->shape[0] / r, pr = B->shape[0] / np;
	int64_t *pc = tpc_calloc((size_t)(E * np), sizeof(int64_t));
	if (!pc)
		return tpc_err_nomem(e);
	for (int64_t x = 0; x <= E && ret >= 0; x++)
		for (int k = 0; k < np && ret >= 0; k++) {
			if (!tpc_family_name(rows[k], TPC_ECO_HF, L, x, false, nm, sizeof(nm), &part)) {
				ret = -1;
				break;
			}
			int64_t bi = tpc_ckpt_find(ck, nm);
			/* experts 0 .. E-1, each [pr, in], and no expert E */
			if (x == E ? bi >= 0 : bi < 0 || !shape2(&ck->t[bi], pr, A->shape[1]))
				ret = -1;
			else if (x < E)
				pc[x * np + k] = bi;
		}
	if (ret < 0) {
		free(pc);
		return 0;
	}
	free(m->pieces);
	m->pieces = pc;
	m->npieces = (int)(E * np);
	m->nparts = np;
	m->prow = pr;
	m->ne = E;
	m->epr = 0;
	m->mode = 0;
	m->base = pc[0];
	return 1;
}

/* A module of PEFT's ParamWrapper (target_parameters, PEFT >= 0.17): its
 * lora_A/B adapt one parameter of the module named by the key less its
 * ".base_layer"s (a wrapper around a wrapper: the same module's next
 * parameter; tuners_utils.py _inject_parameters). The parameter is the one
 * target_parameters names for that module whose base tensor fits the shapes;
 * none or two: refused. */
static int resolve_param(lmod *m, const tpc_ckpt *ck, const tpc_ckpt *ad, const tpc_lora_cfg *c, double w, tpc_err *e)
{
	char mod[512], key[600], tried[600] = "", msg[1400];
	const tpc_tensor *A = &ad->t[m->t[K_A]], *B = &ad->t[m->t[K_B]];
	const char *an = A->name;
	size_t n = 0;
	for (const char *p = m->name; *p && n + 1 < sizeof(mod);) {
		if (!strncmp(p, ".base_layer", 11) && (!p[11] || p[11] == '.')) {
			p += 11;
			continue;
		}
		mod[n++] = *p++;
	}
	mod[n] = 0;
	if (A->ndim != 2 || B->ndim != 2)
		return bad_key(e, an, "module '%s' (target_parameters): lora_A and lora_B are not 2-D", m->name);
	const cJSON *it, *tp = cJSON_GetObjectItemCaseSensitive((const cJSON *)c->json, "target_parameters");
	int64_t found = -1;
	cJSON_ArrayForEach(it, tp)
	{
		const char *pn = it->valuestring, *dot = strrchr(pn, '.');
		snprintf(key, sizeof(key), "%s.%s", mod, dot ? dot + 1 : pn);
		size_t kl = strlen(key), pl = strlen(pn);
		if (strcmp(key, pn) && !(kl > pl && key[kl - pl - 1] == '.' && !strcmp(key + kl - pl, pn)))
			continue;
		int64_t bi = tpc_ckpt_find(ck, key), r;
		double alpha;
		int ret = tpc_lora_rank_alpha(c, key, &r, &alpha, e);
		if (ret)
			return ret;
		if (bi < 0)
			bi = renamed(ck, c, key);
		if (bi < 0) {
			/* the base may keep this parameter's experts one by one */
			lmod t = *m;
			t.pieces = NULL;
			int sf = split_fit(&t, ck, A, B, c, key, r, e);
			if (sf < 0)
				return sf;
			if (sf && found >= 0) {
				free(t.pieces);
				snprintf(msg, sizeof(msg), "module '%s' (target_parameters) fits both '%s' and '%s': which one it "
					 "adapts cannot be told from the shapes", m->name, ck->t[found].name, key);
				return bad_key(e, an, "%s", msg);
			}
			for (int q = 0; sf && q < t.npieces; q++)
				if ((ret = float_untied(ck, t.pieces[q], an, e))) {
					free(t.pieces);
					return ret;
				}
			if (sf) {
				*m = t;
				found = m->base;
				m->s = (float)(c->rslora ? w * alpha / sqrt((double)r) : w * alpha / (double)r);
				continue;
			}
		}
		if (bi < 0 || param_fit(&ck->t[bi], A, B, r) < 0) {
			size_t tl = strlen(tried);
			snprintf(tried + tl, sizeof(tried) - tl, "%s'%s'%s", tl ? ", " : "",
				 key, bi < 0 ? (c->family ? " (not in the base, nor its experts one by one)" : " (not in the base)") : "");
			continue;
		}
		const tpc_tensor *W = &ck->t[bi];
		int fit = param_fit(W, A, B, r);
		int64_t L, X;
		bool isb;
		const tpc_tensor_row *row = fit == 2 && c->family ? tpc_family_classify(c->family, TPC_ECO_HF, key, &L, &X, &isb) : NULL;
		if (row && !isb)
			fit = row->hf_in_out; /* the family's record knows */
		if (found >= 0) {
			snprintf(msg, sizeof(msg), "module '%s' (target_parameters) fits both '%s' and '%s': which one it adapts "
				 "cannot be told from the shapes", m->name, ck->t[found].name, key);
			return bad_key(e, an, "%s", msg);
		}
		if (fit == 2) {
			snprintf(msg, sizeof(msg), "module '%s' (target_parameters) fits '%s' both as [experts, out, in] and as "
				 "[experts, in, out] (square experts), and no family record of the base (config.json) says which",
				 m->name, key);
			return bad_key(e, an, "%s", msg);
		}
		if ((ret = float_untied(ck, bi, an, e)))
			return ret;
		found = bi;
		m->base = bi;
		m->mode = fit;
		m->ne = W->ndim == 3 ? W->shape[0] : 0;
		m->epr = W->ndim == 3 ? W->shape[1] : 0;
		m->s = (float)(c->rslora ? w * alpha / sqrt((double)r) : w * alpha / (double)r);
	}
	if (found < 0) {
		snprintf(msg, sizeof(msg), "module '%s' (target_parameters) adapts none of the base's parameters that fit "
			 "lora_A %lld x %lld and lora_B %lld x %lld (tried %s)", m->name, (long long)A->shape[0],
			 (long long)A->shape[1], (long long)B->shape[0], (long long)B->shape[1], tried[0] ? tried : "none: no name matches");
		return bad_key(e, an, "%s", msg);
	}
	return 0;
}

int tpc_lora_param_base(const tpc_ckpt *ck, const tpc_ckpt *ad, const tpc_lora_cfg *c, const char *module, int64_t *base,
			bool *in_out, tpc_err *e)
{
	char ka[1200], kb[1200];
	lmod m;
	memset(&m, 0, sizeof(m));
	for (int k = 0; k < K_NKIND; k++)
		m.t[k] = -1;
	m.base = m.bias = -1;
	snprintf(ka, sizeof(ka), LORA_PREFIX "%s.lora_A.weight", module);
	snprintf(kb, sizeof(kb), LORA_PREFIX "%s.lora_B.weight", module);
	m.t[K_A] = tpc_ckpt_find(ad, ka);
	m.t[K_B] = tpc_ckpt_find(ad, kb);
	if (m.t[K_A] < 0 || m.t[K_B] < 0)
		return tpc_err_at(e, TPC_EINPUT, NULL, m.t[K_A] < 0 ? kb : ka, "module '%s' has only one of lora_A and lora_B",
				  module);
	if (!(m.name = tpc_strdup(module)))
		return tpc_err_nomem(e);
	int ret = resolve_param(&m, ck, ad, c, 1.0, e);
	if (!ret && m.pieces)
		ret = tpc_err_at(e, TPC_EINPUT, NULL, ka,
				 "module '%s' (target_parameters) adapts a fused parameter the base keeps one tensor an expert: "
				 "its pairs are not split by expert; shard the base with it merged (shard BASE --lora ADAPTER)",
				 module);
	if (!ret) {
		*base = m.base;
		*in_out = m.mode == 1;
	}
	free(m.name);
	free(m.pieces);
	return ret;
}

/* A module's tensors against the config and the base: its mode, DoRA kind
 * and scale. */
static int resolve(lmod *m, const tpc_ckpt *ck, const tpc_ckpt *ad, const tpc_lora_cfg *c, double w, tpc_err *e)
{
	char bn[1024];
	int ret = 0;
	if (m->full_param) {
		snprintf(bn, sizeof(bn), "%s.%s", m->name, m->full_param);
		const tpc_tensor *a = &ad->t[m->t[K_FULL]];
		if ((m->base = tpc_ckpt_find(ck, bn)) < 0)
			return bad_key(e, a->name, "replaces '%s' (modules_to_save), which the base does not have", bn);
		const tpc_tensor *b = &ck->t[m->base];
		if (a->ndim != b->ndim || memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof(int64_t)))
			return bad_shape(e, ad, m->t[K_FULL], b, "a modules_to_save tensor replaces its base whole");
		return 0;
	}
	bool lin = m->t[K_A] >= 0 || m->t[K_B] >= 0, emb = m->t[K_EA] >= 0 || m->t[K_EB] >= 0;
	int64_t any = -1;
	for (int k = 0; k < K_NKIND && any < 0; k++)
		any = m->t[k];
	const char *an = ad->t[any].name;
	if (lin && emb)
		return bad_key(e, an, "module '%s' has both lora_A/B and lora_embedding_A/B", m->name);
	if (!lin && !emb)
		return bad_key(e, an, "module '%s' has no lora_A/lora_B pair", m->name);
	int64_t ia = m->t[lin ? K_A : K_EA], ib = m->t[lin ? K_B : K_EB];
	if (ia < 0 || ib < 0)
		return bad_key(e, an, lin ? "module '%s' has only one of lora_A and lora_B"
					  : "module '%s' has only one of lora_embedding_A and lora_embedding_B",
			       m->name);
	if (lin && json_set(c->json, "target_parameters") &&
	    (strstr(m->name, ".base_layer") || (ret = names_module(c, "target_modules", m->name, 0, e)) == 0))
		return resolve_param(m, ck, ad, c, w, e);
	if (ret < 0)
		return ret;
	if ((ret = names_module(c, "target_modules", m->name, 1, e)) <= 0)
		return ret < 0 ? ret : bad_key(e, an, "module '%s' is not among the config's target_modules", m->name);
	if ((ret = names_module(c, "exclude_modules", m->name, 0, e)))
		return ret < 0 ? ret : bad_key(e, an, "module '%s' is among the config's exclude_modules", m->name);
	if (m->t[K_M] >= 0 && !c->dora)
		return bad_key(e, ad->t[m->t[K_M]].name, "%s", "a DoRA magnitude, but the config's use_dora is not true");
	if (c->dora && m->t[K_M] < 0)
		return bad_key(e, an, "use_dora is true but module '%s' has no lora_magnitude_vector", m->name);
	if (m->t[K_BB] >= 0 && !c->lora_bias)
		return bad_key(e, ad->t[m->t[K_BB]].name, "%s", "a lora_B bias, but the config's lora_bias is not true");
	if (c->lora_bias && lin && m->t[K_BB] < 0)
		return bad_key(e, an, "lora_bias is true but module '%s' has no lora_B.bias", m->name);
	snprintf(bn, sizeof(bn), "%s.weight", m->name);
	if ((m->base = tpc_ckpt_find(ck, bn)) < 0)
		return bad_key(e, an, "its base tensor '%s' is not in the base checkpoint", bn);
	const tpc_tensor *W = &ck->t[m->base], *A = &ad->t[ia], *B = &ad->t[ib];
	if (W->dtype != TPC_F32 && W->dtype != TPC_BF16 && W->dtype != TPC_F16 && W->dtype != TPC_F64) {
		char msg[1600];
		snprintf(msg, sizeof(msg), "its base tensor '%s' is %s, not a float weight (quantized? give --dequantize)", bn,
			 tpc_dtype_name(W->dtype));
		return bad_key(e, an, "%s", msg);
	}
	/* a weight tied to another (one storage, a recorded alias): PEFT's merge
	 * changes both, a description of one would leave the other behind */
	for (size_t j = 0; j < ck->n; j++)
		if ((int64_t)j != m->base && (tpc_tensor_same_view(&ck->t[j], W) || ck->t[j].alias_of == m->base ||
					      W->alias_of == (int64_t)j))
			return bad_key(e, an, "its base tensor is tied to '%s' (one storage): merging into tied weights is not supported",
				       ck->t[j].name);
	if (W->ndim != 2)
		return bad_key(e, an, c->dora ? "DoRA on '%s', which is not a 2-D weight (a convolution?): not supported"
					      : "LoRA on '%s', which is not a 2-D weight (a convolution?): not supported",
			       bn);
	int64_t r;
	double alpha;
	if ((ret = tpc_lora_rank_alpha(c, m->name, &r, &alpha, e)))
		return ret;
	if (A->ndim != 2 || B->ndim != 2 || A->shape[0] != B->shape[1])
		return bad_shape(e, ad, ia, W, "lora_A is [r, in] and lora_B [out, r]");
	if (A->shape[0] != r) {
		char msg[160];
		snprintf(msg, sizeof(msg), "its rank is %lld but the config (r, rank_pattern) gives %lld",
			 (long long)A->shape[0], (long long)r);
		return bad_key(e, A->name, "%s", msg);
	}
	int64_t in = A->shape[1], out = B->shape[0];
	if (emb) {
		if (!shape2(W, in, out))
			return bad_shape(e, ad, ia, W, "an embedding's lora_embedding_A is [r, vocab], lora_embedding_B [dim, r]");
		m->mode = 1;
	} else {
		bool normal = shape2(W, out, in), trans = shape2(W, in, out);
		if (!normal && !trans)
			return bad_shape(e, ad, ia, W, NULL);
		/* a square weight: the config's fan_in_fan_out says (PEFT sets it
		 * for a Conv1D); a non-square one shows its layout */
		m->mode = normal && trans ? c->fifo : trans;
	}
	if (m->t[K_M] >= 0) {
		const tpc_tensor *M = &ad->t[m->t[K_M]];
		if (M->ndim != 1 || M->shape[0] != out)
			return bad_shape(e, ad, m->t[K_M], W, "the magnitude has one value per output");
		m->dora = m->mode ? 2 : 1;
	}
	if (m->t[K_BB] >= 0) {
		const tpc_tensor *bb = &ad->t[m->t[K_BB]];
		snprintf(bn, sizeof(bn), "%s.bias", m->name);
		if ((m->bias = tpc_ckpt_find(ck, bn)) < 0)
			return bad_key(e, bb->name, "lora_bias, but the base has no '%s'", bn);
		if (bb->ndim != 1 || bb->shape[0] != out || ck->t[m->bias].ndim != 1 || ck->t[m->bias].shape[0] != out)
			return bad_shape(e, ad, m->t[K_BB], &ck->t[m->bias], NULL);
	}
	m->s = (float)(c->rslora ? w * alpha / sqrt((double)r) : w * alpha / (double)r);
	return 0;
}

/* ---- building the descriptions ---- */

static void remap_src(tpc_tensor *t, const int *map)
{
	if (t->src >= 0)
		t->src = map[t->src];
	for (int k = 0; k < t->nparts; k++)
		remap_src(&t->parts[k], map);
}

static int companion(tpc_tensor *dst, const tpc_tensor *src, const int *map, tpc_err *e)
{
	if (tpc_tensor_copy(dst, src))
		return tpc_err_nomem(e);
	if (!(dst->name = tpc_strdup(src->name ? src->name : "?"))) {
		tpc_tensor_release(dst);
		return tpc_err_nomem(e);
	}
	if (map)
		remap_src(dst, map);
	return 0;
}

void tpc__dq_free(tpc_dequant *dq)
{
	for (int k = 0; dq && k < dq->nc; k++) {
		free(dq->c[k].name);
		tpc_tensor_release(&dq->c[k]);
	}
	free(dq);
}

/* ck->t[ix] becomes the computed tensor over dq (its old description dq's c[0]). */
static int install(tpc_ckpt *ck, int64_t ix, tpc_dequant *dq, tpc_err *e)
{
	tpc_tensor *old = &ck->t[ix], nt;
	if (tpc_tensor_init_zero(&nt, TPC_F32, old->ndim, old->shape)) {
		tpc__dq_free(dq);
		return tpc_err_nomem(e);
	}
	nt.flags = 0;
	nt.dq = dq;
	nt.dtype = old->dtype == TPC_F16 || old->dtype == TPC_BF16 || old->dtype == TPC_F64 ? old->dtype : TPC_F32;
	nt.nbytes = nt.numel * tpc_dtype_size(nt.dtype);
	nt.name = old->name;
	old->name = NULL;
	tpc_tensor_release(old);
	*old = nt;
	return 0;
}

/* ck->t[ix] with the LoRA of module m: A, B, magnitude from ad (sources
 * through map). */
static int add_lora(tpc_ckpt *ck, const tpc_ckpt *ad, const lmod *m, const int *map, tpc_err *e)
{
	tpc_dequant *dq = tpc_dequant_new(TPC_DQ_NC, false);
	float *f = NULL;
	double *ss = NULL;
	int ret = 0;
	if (!dq)
		return tpc_err_nomem(e);
	bool emb = m->t[K_EA] >= 0;
	dq->kind = TPC_DQ_LORA;
	dq->lora_mode = m->mode;
	dq->lora_scale = m->s;
	dq->lora_ne = m->ne;
	dq->lora_epr = m->epr;
	if ((ret = companion(&dq->c[0], &ck->t[m->base], NULL, e)))
		goto fail;
	dq->nc = 1;
	if ((ret = companion(&dq->c[1], &ad->t[m->t[emb ? K_EA : K_A]], map, e)))
		goto fail;
	dq->nc = 2;
	if ((ret = companion(&dq->c[2], &ad->t[m->t[emb ? K_EB : K_B]], map, e)))
		goto fail;
	dq->nc = 3;
	if (m->dora && (ret = companion(&dq->c[3], &ad->t[m->t[K_M]], map, e)))
		goto fail;
	if (m->dora)
		dq->nc = 4;
	dq->lora_dora = m->dora == 1;
	if ((ret = install(ck, m->base, dq, e)))
		return ret;
	if (m->dora != 2)
		return 0;
	/* per-column DoRA: the norms of the merged columns, from one read of
	 * the undecorated image, then the factors m / n as a source of ck */
	tpc_tensor *t = &ck->t[m->base];
	int64_t R = t->shape[0], C = t->shape[1];
	uint64_t per = LORA_STEP_ELEMS / (uint64_t)C + 1;
	float *rows = tpc_malloc((size_t)(per * (uint64_t)C) * sizeof(float));
	ss = tpc_calloc((size_t)C, sizeof(double));
	f = tpc_malloc((size_t)C * sizeof(float));
	if (!rows || !ss || !f) {
		free(rows);
		ret = tpc_err_nomem(e);
		goto fail_col;
	}
	for (int64_t r0 = 0; r0 < R && !ret; r0 += (int64_t)per) {
		int64_t nr = R - r0 < (int64_t)per ? R - r0 : (int64_t)per;
		ret = tpc_ckpt_read_bytes(ck, t, (uint64_t)r0 * (uint64_t)C * 4, (uint64_t)nr * (uint64_t)C * 4, rows, e);
		for (int64_t i = 0; i < nr && !ret; i++)
			for (int64_t j = 0; j < C; j++) {
				double v = rows[i * C + j];
				ss[j] += v * v;
			}
	}
	free(rows);
	tpc_tensor *mag = &t->dq->c[3];
	if (!ret && mag->src_dtype == TPC_F32)
		ret = tpc_ckpt_read_bytes(ck, mag, 0, (uint64_t)C * 4, f, e);
	else if (!ret) {
		void *tmp = tpc_malloc((size_t)C * tpc_dtype_size(mag->src_dtype));
		ret = !tmp ? tpc_err_nomem(e) : tpc_ckpt_read_bytes(ck, mag, 0, (uint64_t)C * tpc_dtype_size(mag->src_dtype), tmp, e);
		if (!ret)
			ret = tpc_cast(f, TPC_F32, tmp, mag->src_dtype, (uint64_t)C, e);
		free(tmp);
	}
	if (ret)
		goto fail_col;
	for (int64_t j = 0; j < C; j++)
		f[j] = f[j] / (float)sqrt(ss[j]);
	int idx;
	char label[600];
	snprintf(label, sizeof(label), "DoRA factors of '%s'", t->name);
	ret = tpc_ckpt_add_mem(ck, label, (uint8_t *)f, (uint64_t)C * 4, &idx, e);
	f = NULL; /* the checkpoint's, or freed */
	if (ret)
		goto fail_col;
	free(mag->name);
	tpc_tensor_release(mag);
	memset(mag, 0, sizeof(*mag));
	if (tpc_tensor_init_zero(mag, TPC_F32, 1, &C) || !(mag->name = tpc_strdup(label))) {
		ret = tpc_err_nomem(e);
		goto fail_col;
	}
	mag->flags = 0;
	mag->src = idx;
	t->dq->lora_dora = 2;
fail_col:
	free(ss);
	free(f);
	return ret;
fail:
	tpc__dq_free(dq);
	return ret;
}

/* A fused parameter kept one expert a tensor: expert x's part k is a LoRA of
 * its own, over the whole of A and B's rows of part k (tpc_ckpt.h: lora_ne
 * experts, lora_e0 x). */
static int add_pieces(tpc_ckpt *ck, const tpc_ckpt *ad, const lmod *m, const int *map, tpc_err *e)
{
	int ret = 0;
	for (int q = 0; q < m->npieces && !ret; q++) {
		tpc_dequant *dq = tpc_dequant_new(TPC_DQ_NC, false);
		tpc_tensor bk;
		if (!dq)
			return tpc_err_nomem(e);
		dq->kind = TPC_DQ_LORA;
		dq->lora_mode = 0;
		dq->lora_scale = m->s;
		dq->lora_ne = m->ne;
		dq->lora_e0 = q / m->nparts;
		if (tpc_tensor_narrow(&bk, &ad->t[m->t[K_B]], 0, (q % m->nparts) * m->prow, m->prow)) {
			tpc__dq_free(dq);
			return tpc_err_set(e, TPC_EINPUT, "internal: cannot take rows of '%s'", ad->t[m->t[K_B]].name);
		}
		if (!(ret = companion(&dq->c[0], &ck->t[m->pieces[q]], NULL, e)))
			dq->nc = 1;
		if (!ret && !(ret = companion(&dq->c[1], &ad->t[m->t[K_A]], map, e)))
			dq->nc = 2;
		if (!ret && !(ret = companion(&dq->c[2], &bk, map, e)))
			dq->nc = 3;
		tpc_tensor_release(&bk);
		if (ret)
			tpc__dq_free(dq);
		else
			ret = install(ck, m->pieces[q], dq, e);
	}
	return ret;
}

static int add_bias(tpc_ckpt *ck, const tpc_ckpt *ad, const lmod *m, const int *map, tpc_err *e)
{
	tpc_dequant *dq = tpc_dequant_new(TPC_DQ_NC, false);
	int ret;
	if (!dq)
		return tpc_err_nomem(e);
	dq->kind = TPC_DQ_LORA;
	dq->lora_mode = 2;
	dq->lora_scale = m->s;
	if ((ret = companion(&dq->c[0], &ck->t[m->bias], NULL, e)))
		goto fail;
	dq->nc = 1;
	if ((ret = companion(&dq->c[1], &ad->t[m->t[K_BB]], map, e)))
		goto fail;
	dq->nc = 2;
	return install(ck, m->bias, dq, e);
fail:
	tpc__dq_free(dq);
	return ret;
}

/* A modules_to_save tensor: the adapter's description, in the base's dtype. */
static int replace(tpc_ckpt *ck, const tpc_ckpt *ad, const lmod *m, const int *map, tpc_err *e)
{
	tpc_tensor *old = &ck->t[m->base], nt;
	tpc_dtype out = old->dtype;
	if (tpc_tensor_copy(&nt, &ad->t[m->t[K_FULL]]))
		return tpc_err_nomem(e);
	remap_src(&nt, map);
	if (nt.dtype != out && !tpc_cast_supported(nt.src_dtype, out)) {
		tpc_tensor_release(&nt);
		return bad_key(e, ad->t[m->t[K_FULL]].name, "cannot be cast to the base's %s", tpc_dtype_name(out));
	}
	nt.dtype = out;
	nt.nbytes = nt.numel * tpc_dtype_size(out);
	nt.storage = -1;
	nt.alias_of = -1;
	nt.name = old->name;
	old->name = NULL;
	tpc_tensor_release(old);
	*old = nt;
	return 0;
}

/* ad's sources added to ck: map[j] is ad's source j's index in ck. */
int tpc__import_sources(tpc_ckpt *ck, const tpc_ckpt *ad, int **map, tpc_err *e)
{
	int *mp = tpc_calloc(ad->nsrc ? ad->nsrc : 1, sizeof(int));
	int ret = 0;
	if (!mp)
		return tpc_err_nomem(e);
	for (size_t j = 0; j < ad->nsrc && !ret; j++) {
		const tpc_map *s = &ad->src[j];
		if (s->fd >= 0 && s->path) {
			ret = tpc_ckpt_add_file(ck, s->path, &mp[j], e);
		} else {
			uint8_t *mem = tpc_malloc(s->size ? (size_t)s->size : 1);
			if (!mem)
				ret = tpc_err_nomem(e);
			else {
				memcpy(mem, s->data, (size_t)s->size);
				ret = tpc_ckpt_add_mem(ck, s->path ? s->path : "adapter", mem, s->size, &mp[j], e);
			}
		}
	}
	if (ret)
		free(mp);
	else
		*map = mp;
	return ret;
}

/* Every adapter key placed and checked against ck (nothing changed). */
static int plan_build(plan *p, const tpc_ckpt *ck, const tpc_ckpt *ad, const tpc_lora_cfg *c, double w, tpc_err *e)
{
	int ret = place_keys(p, ad, c, e);
	for (size_t i = 0; i < p->n && !ret; i++)
		ret = resolve(&p->m[i], ck, ad, c, w, e);
	/* a tensor changed twice: a module both replaced and adapted, two
	 * replacements, or a fused parameter's expert that a LoRA of its own
	 * adapts too */
	int64_t *hit = NULL;
	size_t nh = 0, cap = 0;
	for (size_t i = 0; i < p->n && !ret; i++) {
		const lmod *m = &p->m[i];
		for (int q = 0; q < (m->pieces ? m->npieces : 1) + (m->bias >= 0) && !ret; q++) {
			if (tpc_grow((void **)&hit, &cap, nh + 1, sizeof(*hit))) {
				ret = tpc_err_nomem(e);
				break;
			}
			int64_t t = m->pieces && q < m->npieces ? m->pieces[q] : q ? m->bias : m->base;
			for (size_t k = 0; k < nh && !ret; k++)
				if (hit[k] == t)
					ret = tpc_err_at(e, TPC_EINPUT, c->path, ck->t[t].name,
							 "changed twice by one adapter (a LoRA and a modules_to_save tensor, or two LoRAs)");
			hit[nh++] = t;
		}
	}
	free(hit);
	if (!ret && !p->n)
		ret = tpc_err_at(e, TPC_EINPUT, c->path, NULL, "the adapter holds no tensor");
	return ret;
}

int tpc_lora_check(const tpc_ckpt *ck, const tpc_ckpt *ad, const tpc_lora_cfg *c, tpc_err *e)
{
	plan p = {0};
	int ret = plan_build(&p, ck, ad, c, 1.0, e);
	plan_release(&p);
	return ret;
}

int tpc_lora_merge(tpc_ckpt *ck, const tpc_ckpt *ad, const tpc_lora_cfg *c, double w, tpc_lora_stats *st, tpc_err *e)
{
	plan p = {0};
	int *map = NULL, ret;
	memset(st, 0, sizeof(*st));
	/* an activated LoRA acts only after its invocation tokens: PEFT cannot
	 * merge one (tuners/lora/variants.py at 5d602fdb, ALoraLinearVariant
	 * merge_safe / merge_unsafe L562-567 raise); it still shards and
	 * converts to an adapter GGUF */
	if (json_set(c->json, "alora_invocation_tokens"))
		return tpc_err_at(e, TPC_EINPUT, c->path, NULL,
				  "'alora_invocation_tokens' is set: an activated LoRA (aLoRA) acts only after its invocation "
				  "tokens, which a merged weight cannot express; PEFT does not merge one either (keep it an "
				  "adapter: shard it, or convert it to an adapter GGUF)");
	if ((ret = plan_build(&p, ck, ad, c, w, e)))
		goto out;
	if ((ret = tpc__import_sources(ck, ad, &map, e)))
		goto out;
	for (size_t i = 0; i < p.n && !ret; i++) {
		lmod *m = &p.m[i];
		if (m->full_param) {
			ret = replace(ck, ad, m, map, e);
			st->replaced++;
			continue;
		}
		if (m->pieces) {
			ret = add_pieces(ck, ad, m, map, e);
			st->merged += (size_t)m->npieces;
			continue;
		}
		ret = add_lora(ck, ad, m, map, e);
		st->merged++;
		st->dora += m->dora != 0;
		if (!ret && m->bias >= 0) {
			ret = add_bias(ck, ad, m, map, e);
			st->biases++;
		}
	}
out:
	free(map);
	plan_release(&p);
	return ret;
}

/* ---- the rows, while written ---- */

/* Elements [e0, e0+n) of t's image as f32. */
static int read_f32(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t e0, uint64_t n, float *dst, tpc_err *e)
{
	tpc_dtype sd = t->src_dtype;
	if (sd == TPC_F32)
		return tpc_ckpt_read_bytes(ck, t, e0 * 4, n * 4, dst, e);
	unsigned es = tpc_dtype_size(sd);
	void *tmp = tpc_malloc(n ? (size_t)(n * es) : 1);
	int ret = !tmp ? tpc_err_nomem(e) : tpc_ckpt_read_bytes(ck, t, e0 * es, n * es, tmp, e);
	if (!ret)
		ret = tpc_cast(dst, TPC_F32, tmp, sd, n, e);
	free(tmp);
	return ret;
}

/* The LoRA's fixed operand for a whole read: A [r, C] (Linear) or B
 * transposed, [r, C] (Conv1D, Embedding). */
static int operand(const tpc_ckpt *ck, const tpc_dequant *dq, int64_t r, int64_t C, float **out, tpc_err *e)
{
	float *x = tpc_malloc((size_t)(r * C) * sizeof(float)), *b = NULL;
	int ret = 0;
	if (!x)
		return tpc_err_nomem(e);
	if (dq->lora_mode == 0) {
		ret = read_f32(ck, &dq->c[1], 0, (uint64_t)(r * C), x, e);
	} else if (!(b = tpc_malloc((size_t)(r * C) * sizeof(float)))) {
		ret = tpc_err_nomem(e);
	} else if (!(ret = read_f32(ck, &dq->c[2], 0, (uint64_t)(r * C), b, e))) {
		for (int64_t j = 0; j < C; j++)
			for (int64_t k = 0; k < r; k++)
				x[k * C + j] = b[j * r + k];
	}
	free(b);
	if (ret)
		free(x);
	else
		*out = x;
	return ret;
}

/* Full rows [R0, R0 + nr) of the image [.., C] into V, the delta added to
 * columns [j0, j0 + J) (the rest is the base's, for a window). op: operand(). */
static int lora_rows(const tpc_ckpt *ck, const tpc_dequant *dq, int64_t R0, int64_t nr, int64_t C, int64_t r,
		     const float *op, float *V, float *co, int64_t j0, int64_t J, tpc_err *e)
{
	/* experts: co made by the caller (expert_co), R0 a row of the base */
	int ret = 0;
	/* a plain base is read by the threads, each its own rows; a computed
	 * one (another adapter, a dequantized weight) here, as it reads itself */
	const bool plain = !dq->c[0].dq;
	if (!plain && (ret = read_f32(ck, &dq->c[0], (uint64_t)(R0 * C), (uint64_t)(nr * C), V, e)))
		return ret;
	/* the row's coefficients: B[o, :] (Linear), A[:, i] (transposed) */
	if (dq->lora_ne) {
		/* made by the caller */
	} else if (dq->lora_mode == 0) {
		ret = read_f32(ck, &dq->c[2], (uint64_t)(R0 * r), (uint64_t)(nr * r), co, e);
	} else {
		tpc_tensor v;
		if (tpc_tensor_narrow(&v, &dq->c[1], 1, R0, nr))
			return tpc_err_set(e, TPC_EINPUT, "internal: cannot take columns of '%s'", dq->c[1].name);
		float *tmp = tpc_malloc((size_t)(r * nr) * sizeof(float));
		ret = !tmp ? tpc_err_nomem(e) : read_f32(ck, &v, 0, (uint64_t)(r * nr), tmp, e);
		for (int64_t k = 0; !ret && k < r; k++)
			for (int64_t i = 0; i < nr; i++)
				co[i * r + k] = tmp[k * nr + i];
		free(tmp);
		tpc_tensor_release(&v);
	}
	if (ret)
		return ret;
	const float s = dq->lora_scale;
	/* rows are independent: threads take LORA_TILE_ROWS at a time (a busy
	 * core's share goes to the other), read them and add their delta */
	const int64_t nchunk = (nr + LORA_TILE_ROWS - 1) / LORA_TILE_ROWS;
	int failed = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (nchunk > 1 && (uint64_t)nr * (uint64_t)C * (uint64_t)r >= (1u << 18))
#endif
	for (int64_t q = 0; q < nchunk; q++) {
		const int64_t lo = q * LORA_TILE_ROWS, n = nr - lo < LORA_TILE_ROWS ? nr - lo : LORA_TILE_ROWS;
		if (__atomic_load_n(&failed, __ATOMIC_RELAXED))
			continue;
		if (plain) {
			tpc_err le;
			tpc_err_init(&le);
			int rc = read_f32(ck, &dq->c[0], (uint64_t)((R0 + lo) * C), (uint64_t)(n * C), V + lo * C, &le);
			if (rc) {
#ifdef _OPENMP
#pragma omp critical(tpc_lora_err)
#endif
				if (!failed) {
					*e = le;
					__atomic_store_n(&failed, rc, __ATOMIC_RELAXED);
				}
				continue;
			}
		}
		tpc__lora_kernel(V + lo * C + j0, co + lo * r, op + j0, n, J, C, r, s);
	}
	if (failed)
		return failed;
	if (dq->lora_dora == 1) {
		float *mg = tpc_malloc((size_t)nr * sizeof(float));
		ret = !mg ? tpc_err_nomem(e) : read_f32(ck, &dq->c[3], (uint64_t)R0, (uint64_t)nr, mg, e);
		for (int64_t o = 0; !ret && o < nr; o++) {
			float *row = V + o * C;
			double ss = 0;
			for (int64_t j = 0; j < C; j++)
				ss += (double)row[j] * (double)row[j];
			float f = mg[o] / (float)sqrt(ss);
			for (int64_t j = 0; j < C; j++)
				row[j] = f * row[j];
		}
		free(mg);
	} else if (dq->lora_dora == 2) {
		float *fc = tpc_malloc((size_t)C * sizeof(float));
		ret = !fc ? tpc_err_nomem(e) : read_f32(ck, &dq->c[3], 0, (uint64_t)C, fc, e);
		for (int64_t o = 0; !ret && o < nr; o++)
			for (int64_t j = 0; j < C; j++)
				V[o * C + j] = fc[j] * V[o * C + j];
		free(fc);
	}
	return ret;
}

/* Experts (lora_ne): expert x's A_x = rows x * r .. of A [r, a1] and B_x =
 * columns x, x + ne, ... of B [b0, r] (rank k's column k * ne + x: a
 * strided view), read when the expert changes. */
typedef struct lora_ex {
	float *A, *B;
	int64_t ne, r, a1, b0;
} lora_ex;

static int expert_load(const tpc_ckpt *ck, const tpc_dequant *dq, int64_t ex, lora_ex *x, tpc_err *e)
{
	const tpc_tensor *A = &dq->c[1], *B = &dq->c[2];
	tpc_tensor va, vb, bt;
	int ret = 0;
	if (!x->A) {
		x->ne = dq->lora_ne;
		x->r = A->shape[0] / x->ne;
		x->a1 = A->shape[1];
		x->b0 = B->shape[0];
		x->A = tpc_malloc((size_t)(x->r * x->a1 + 1) * sizeof(float));
		x->B = tpc_malloc((size_t)(x->r * x->b0 + 1) * sizeof(float));
		if (!x->A || !x->B)
			return tpc_err_nomem(e);
	}
	if (tpc_tensor_narrow(&va, A, 0, ex * x->r, x->r))
		return tpc_err_set(e, TPC_EINPUT, "internal: cannot take expert %lld of '%s'", (long long)ex, A->name);
	ret = read_f32(ck, &va, 0, (uint64_t)(x->r * x->a1), x->A, e);
	tpc_tensor_release(&va);
	if (ret)
		return ret;
	/* B's columns as rows of its transpose, every ne-th from ex */
	if (tpc_tensor_copy(&bt, B))
		return tpc_err_nomem(e);
	tpc_tensor_transpose2d(&bt);
	ret = tpc_tensor_rows_every(&vb, &bt, ex, x->ne, x->r);
	tpc_tensor_release(&bt);
	if (ret)
		return tpc_err_set(e, TPC_EINPUT, "internal: cannot take expert %lld of '%s'", (long long)ex, B->name);
	/* vb is B_x transposed: [r, b0] */
	float *tmp = tpc_malloc((size_t)(x->r * x->b0 + 1) * sizeof(float));
	ret = !tmp ? tpc_err_nomem(e) : read_f32(ck, &vb, 0, (uint64_t)(x->r * x->b0), tmp, e);
	for (int64_t k = 0; !ret && k < x->r; k++)
		for (int64_t o = 0; o < x->b0; o++)
			x->B[o * x->r + k] = tmp[k * x->b0 + o];
	free(tmp);
	tpc_tensor_release(&vb);
	return ret;
}

/* The loaded expert's operand [r, C]: A_x (mode 0), B_x transposed (mode 1). */
static void expert_op(const lora_ex *x, const tpc_dequant *dq, int64_t C, float *op)
{
	for (int64_t k = 0; k < x->r; k++)
		for (int64_t j = 0; j < C; j++)
			op[k * C + j] = dq->lora_mode == 0 ? x->A[k * x->a1 + j] : x->B[j * x->r + k];
}

/* The coefficients of rows m0 .. m0 + nr of the loaded expert's matrix:
 * B_x[o, k] (mode 0), A_x[k, i] (mode 1). */
static void expert_co(const lora_ex *x, const tpc_dequant *dq, int64_t m0, int64_t nr, float *co)
{
	for (int64_t i = 0; i < nr; i++)
		for (int64_t k = 0; k < x->r; k++)
			co[i * x->r + k] = dq->lora_mode == 0 ? x->B[(m0 + i) * x->r + k] : x->A[k * x->a1 + m0 + i];
}

int tpc__lora_read(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t e0, uint64_t cnt, float *dst, tpc_err *e)
{
	const tpc_dequant *dq = t->dq;
	int ret = 0;
	if (dq->lora_mode == 2) {
		/* a bias: b + lora_B.bias * s */
		float *x = tpc_malloc((size_t)cnt * sizeof(float));
		if (!x)
			return tpc_err_nomem(e);
		if (!(ret = read_f32(ck, &dq->c[0], e0, cnt, dst, e)) && !(ret = read_f32(ck, &dq->c[1], e0, cnt, x, e)))
			for (uint64_t i = 0; i < cnt; i++) {
				float d = x[i] * dq->lora_scale;
				dst[i] = dst[i] + d;
			}
		free(x);
		goto out;
	}
	/* experts: a 3-D [E, d1, d2] is read as its [E * d1, d2] rows; a weight
	 * stacked with others (an expert of a GGUF stack) as [1, O, I] */
	const int nd = t->ndim == 3 && ((dq->lora_ne && dq->lora_epr) || t->shape[0] == 1) ? 3 : 2;
	if (t->ndim != nd || t->shape[nd - 1] <= 0 || e0 > t->numel || cnt > t->numel - e0)
		return tpc_err_set(e, TPC_EINPUT, "internal: bad read of merged '%s'", t->name ? t->name : "?");
	/* a window: rows r0.. of the full image, I of its C columns from c0 */
	int64_t I = t->shape[nd - 1], C = dq->I ? dq->I : I;
	int64_t r = dq->lora_ne ? dq->c[1].shape[0] / dq->lora_ne : dq->c[1].shape[0], cur = -1;
	lora_ex x = {0};
	uint64_t per = LORA_STEP_ELEMS / (uint64_t)C + 1;
	uint64_t span = (e0 % (uint64_t)I + cnt + (uint64_t)I - 1) / (uint64_t)I;
	if (per > span)
		per = span;
	float *op = NULL, *V = tpc_malloc((size_t)(per * (uint64_t)C) * sizeof(float));
	float *co = tpc_malloc((size_t)(per * (uint64_t)r) * sizeof(float));
	if (!V || !co)
		ret = tpc_err_nomem(e);
	else if (dq->lora_ne)
		ret = !(op = tpc_malloc((size_t)(r * C) * sizeof(float))) ? tpc_err_nomem(e) : 0;
	else
		ret = operand(ck, dq, r, C, &op, e);
	while (!ret && cnt) {
		int64_t o0 = (int64_t)(e0 / (uint64_t)I);
		uint64_t skip = e0 % (uint64_t)I, need = (skip + cnt + (uint64_t)I - 1) / (uint64_t)I;
		int64_t nr = (int64_t)(need < per ? need : per);
		if (dq->lora_ne) {
			/* one expert's rows at a time */
			int64_t R = dq->r0 + o0, epr = dq->lora_epr, ex = dq->lora_e0 + (epr ? R / epr : 0);
			int64_t m0 = epr ? R % epr : R;
			if (epr && nr > epr - m0)
				nr = epr - m0;
			if (ex != cur) {
				if ((ret = expert_load(ck, dq, ex, &x, e)))
					break;
				expert_op(&x, dq, C, op);
			}
			cur = ex;
			expert_co(&x, dq, m0, nr, co);
		}
		uint64_t take = (uint64_t)nr * (uint64_t)I - skip;
		if (take > cnt)
			take = cnt;
		/* whole rows of a full-width image are made where they go */
		bool direct = I == C && !skip && take == (uint64_t)nr * (uint64_t)C;
		/* the delta of the window's columns only, but for DoRA's row norms */
		const bool all = dq->lora_dora == 1;
		if ((ret = lora_rows(ck, dq, dq->r0 + o0, nr, C, r, op, direct ? dst : V, co, all ? 0 : dq->c0,
				     all ? C : I, e)))
			break;
		/* else the window's columns of each row, from `skip` of the first */
		for (uint64_t q = 0; !direct && q < take;) {
			uint64_t at = skip + q, col = at % (uint64_t)I, run = (uint64_t)I - col;
			if (run > take - q)
				run = take - q;
			memcpy(dst + q, V + (at / (uint64_t)I) * (uint64_t)C + (uint64_t)dq->c0 + col, (size_t)run * sizeof(float));
			q += run;
		}
		dst += take;
		e0 += take;
		cnt -= take;
	}
	free(op);
	free(V);
	free(co);
	free(x.A);
	free(x.B);
out:
	if (ret)
		tpc_err_tensor(e, t->name);
	return ret;
}
