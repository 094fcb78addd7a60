/* tpc_mix.c - model merging (tpc_mix.h): the recipe, the descriptions with
 * their whole-tensor facts, and the elements while written. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_cast.h"
#include "tpc_dtype.h"
#include "tpc_lora.h"
#include "tpc_mix.h"
#include "tpc_mix_int.h"
#include "tpc_io.h"
#include "tpc_util.h"
#include "tpc_yaml.h"

#define MIX_STEP 16384 /* elements of each input per step */

/* ---- the recipe ---- */

typedef struct method_def {
	const char *name;
	tpc_mix_method m;
	int sparsify;       /* 0, 1 magnitude, 2 random */
	bool consensus, normalize, rescale;
} method_def;

static const method_def methods[] = {
	{"linear", TPC_MIX_LINEAR, 0, false, true, false},
	{"task_arithmetic", TPC_MIX_TASK_ARITHMETIC, 0, false, false, false},
	{"ties", TPC_MIX_TIES, 1, true, true, false},
	{"dare_ties", TPC_MIX_DARE_TIES, 2, true, false, true},
	{"dare_linear", TPC_MIX_DARE_LINEAR, 2, false, false, true},
	{"slerp", TPC_MIX_SLERP, 0, false, false, false},
	{"model_stock", TPC_MIX_MODEL_STOCK, 0, false, false, false},
	{"passthrough", TPC_MIX_PASSTHROUGH, 0, false, false, false},
	{"breadcrumbs", TPC_MIX_BREADCRUMBS, 3, false, false, false},
	{"breadcrumbs_ties", TPC_MIX_BREADCRUMBS_TIES, 3, true, false, false},
	{"della", TPC_MIX_DELLA, 4, true, true, true},
	{"della_linear", TPC_MIX_DELLA_LINEAR, 4, false, false, true},
};

static const method_def *method_of(tpc_mix_method m)
{
	for (size_t i = 0; i < sizeof(methods) / sizeof(*methods); i++)
		if (methods[i].m == m)
			return &methods[i];
	return &methods[0];
}

/* The method's parameters: global ones (the recipe's `parameters` only) and
 * per-model ones (a model's, with the recipe's as defaults). */
static bool is_global(tpc_mix_method m, const char *p)
{
	if (m == TPC_MIX_LINEAR)
		return !strcmp(p, "normalize");
	if (m == TPC_MIX_SLERP)
		return !strcmp(p, "t");
	if (m == TPC_MIX_MODEL_STOCK)
		return !strcmp(p, "filter_wise");
	if (m == TPC_MIX_PASSTHROUGH)
		return false;
	return !strcmp(p, "normalize") || !strcmp(p, "rescale") || !strcmp(p, "lambda") || !strcmp(p, "int8_mask");
}

static bool is_tensor_param(tpc_mix_method m, const char *p)
{
	if (m == TPC_MIX_SLERP || m == TPC_MIX_MODEL_STOCK)
		return false;
	if (m == TPC_MIX_PASSTHROUGH)
		return !strcmp(p, "scale");
	if (m == TPC_MIX_LINEAR)
		return !strcmp(p, "weight");
	if (method_of(m)->sparsify == 3 && !strcmp(p, "gamma"))
		return true;
	if (method_of(m)->sparsify == 4 && !strcmp(p, "epsilon"))
		return true;
	return !strcmp(p, "weight") || !strcmp(p, "density");
}

static int bad_recipe(const tpc_mix_recipe *r, tpc_err *e, const char *fmt, const char *a, const char *b)
{
	return tpc_err_at(e, TPC_EINPUT, r->path, NULL, fmt, a ? a : "", b ? b : "");
}

/* A setting: a number or bool, a non-empty list of numbers, or a non-empty
 * list of {filter, value} with value a number or a list of numbers. */
static bool setting_ok(const cJSON *v, bool top)
{
	if (cJSON_IsNumber(v) || cJSON_IsBool(v))
		return true;
	if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v))
		return false;
	bool nums = true, conds = true;
	const cJSON *it;
	cJSON_ArrayForEach(it, v) {
		nums &= cJSON_IsNumber(it);
		if (!cJSON_IsObject(it) || !top) {
			conds = false;
			continue;
		}
		const cJSON *k;
		bool has_value = false;
		cJSON_ArrayForEach(k, it) {
			if (!strcmp(k->string, "value"))
				has_value = setting_ok(k, false) && !cJSON_IsBool(k);
			else if (strcmp(k->string, "filter") || !(cJSON_IsString(k) || cJSON_IsNull(k)))
				has_value = false, conds = false;
		}
		conds &= has_value;
	}
	return nums || (top && conds);
}

static int check_params(const tpc_mix_recipe *r, const cJSON *p, bool model, tpc_err *e)
{
	const cJSON *it;
	if (!p || cJSON_IsNull(p))
		return 0;
	if (!cJSON_IsObject(p))
		return bad_recipe(r, e, "%s'parameters' must be a mapping%s", model ? "a model's " : "", NULL);
	cJSON_ArrayForEach(it, p) {
		bool g = is_global(r->method, it->string), t = is_tensor_param(r->method, it->string);
		if (!g && !t)
			return tpc_err_at(e, TPC_EINPUT, r->path, NULL, "parameter '%s' is not one merge_method %s takes", it->string,
					  r->method_name);
		if (model && g)
			return tpc_err_at(e, TPC_EINPUT, r->path, NULL, "parameter '%s' is the merge's, not a model's: give it in the recipe's parameters",
					  it->string);
		if (!setting_ok(it, true))
			return tpc_err_at(e, TPC_EINPUT, r->path, NULL,
					  "parameter '%s': a number, a list of numbers or a list of {filter, value} is read", it->string);
	}
	return 0;
}

static int add_input(tpc_mix_recipe *r, const char *path, const cJSON *params, tpc_err *e)
{
	for (size_t k = 0; k < r->n; k++)
		if (!strcmp(r->model[k], path))
			return bad_recipe(r, e, "model '%s' is given twice%s", path, NULL);
	if (r->n == TPC_MIX_MAX_INPUTS)
		return tpc_err_at(e, TPC_EINPUT, r->path, NULL, "more than %d inputs", TPC_MIX_MAX_INPUTS);
	if (strchr(path, '+'))
		return bad_recipe(r, e, "model '%s': a model+LoRA reference is not read (merge the adapter first: convert --lora)%s",
				  path, NULL);
	r->model[r->n] = path;
	r->mparams[r->n++] = params;
	return 0;
}

/* mergekit's slices (config.py OutputSliceDefinition, InputSliceDefinition;
 * plan.py plan_slice L267-298): passthrough only, one source a slice, each
 * {model, layer_range: [a, b], parameters: {scale}}; a model in several
 * slices is one input. */
static int slices_from_json(tpc_mix_recipe *r, const cJSON *j, tpc_err *e)
{
	const cJSON *sl = cJSON_GetObjectItemCaseSensitive(j, "slices"), *it, *k;
	int ret;
	if (r->method != TPC_MIX_PASSTHROUGH)
		return bad_recipe(r, e, "'slices' are read with merge_method passthrough only (a frankenmerge), not %s%s",
				  r->method_name, NULL);
	if (!sl)
		return bad_recipe(r, e, "passthrough reads 'slices' (each {sources: [{model, layer_range}]})%s%s", NULL, NULL);
	if (cJSON_GetObjectItemCaseSensitive(j, "models") || cJSON_GetObjectItemCaseSensitive(j, "base_model"))
		return bad_recipe(r, e, "'slices' with 'models' or 'base_model' is not read: the slices name the models%s%s", NULL,
				  NULL);
	if (!cJSON_IsArray(sl) || !cJSON_GetArraySize(sl))
		return bad_recipe(r, e, "'slices' must be a list of {sources: [...]}%s%s", NULL, NULL);
	cJSON_ArrayForEach(it, sl) {
		const cJSON *src = cJSON_GetObjectItemCaseSensitive(it, "sources");
		if (!cJSON_IsObject(it) || cJSON_GetArraySize(it) != 1 || !cJSON_IsArray(src))
			return bad_recipe(r, e, "each of 'slices' is {sources: [...]} (nothing else is read)%s%s", NULL, NULL);
		if (cJSON_GetArraySize(src) != 1)
			return bad_recipe(r, e, "a passthrough slice has one source (passthrough.py: exactly one tensor)%s%s", NULL,
					  NULL);
		const cJSON *s0 = cJSON_GetArrayItem(src, 0), *m = cJSON_GetObjectItemCaseSensitive(s0, "model");
		const cJSON *lr = cJSON_GetObjectItemCaseSensitive(s0, "layer_range"), *p = cJSON_GetObjectItemCaseSensitive(s0, "parameters");
		if (!cJSON_IsObject(s0) || !cJSON_IsString(m))
			return bad_recipe(r, e, "a slice's source is {model: PATH, layer_range: [a, b], parameters: {scale}}%s%s", NULL,
					  NULL);
		cJSON_ArrayForEach(k, s0)
			if (strcmp(k->string, "model") && strcmp(k->string, "layer_range") && strcmp(k->string, "parameters"))
				return bad_recipe(r, e, "'%s' in a slice's source is not read (model, layer_range, parameters)%s", k->string,
						  NULL);
		const cJSON *a = cJSON_GetArrayItem(lr, 0), *b = cJSON_GetArrayItem(lr, 1);
		if (!cJSON_IsArray(lr) || cJSON_GetArraySize(lr) != 2 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) ||
		    a->valuedouble != floor(a->valuedouble) || b->valuedouble != floor(b->valuedouble) || a->valuedouble < 0 ||
		    b->valuedouble <= a->valuedouble || b->valuedouble > 1e6)
			return bad_recipe(r, e, "model '%s': layer_range is [a, b], whole numbers, 0 <= a < b%s", m->valuestring, NULL);
		if ((ret = check_params(r, p, true, e)))
			return ret;
		if (r->nslices == TPC_MIX_MAX_SLICES)
			return tpc_err_at(e, TPC_EINPUT, r->path, NULL, "more than %d slices", TPC_MIX_MAX_SLICES);
		size_t in = 0;
		while (in < r->n && strcmp(r->model[in], m->valuestring))
			in++;
		if (in == r->n && (ret = add_input(r, m->valuestring, NULL, e)))
			return ret;
		r->slice[r->nslices++] = (struct tpc_mix_slice){(int)in, (int64_t)a->valuedouble, (int64_t)b->valuedouble,
								cJSON_IsObject(p) ? p : NULL};
	}
	return 0;
}

static int recipe_from_json(tpc_mix_recipe *r, tpc_err *e)
{
	const cJSON *j = r->json, *it;
	static const char *const known[] = {"models", "base_model", "merge_method", "parameters", "dtype", "out_dtype",
					    "tokenizer_source", "slices"};
	if (!cJSON_IsObject(j))
		return bad_recipe(r, e, "a recipe is a mapping (models, merge_method, ...)%s%s", NULL, NULL);
	cJSON_ArrayForEach(it, j) {
		bool ok = false;
		for (size_t i = 0; i < sizeof(known) / sizeof(*known); i++)
			ok |= !strcmp(it->string, known[i]);
		if (!ok && !strcmp(it->string, "modules"))
			return bad_recipe(r, e, "'%s' (layer ranges per module) is not read: give 'models' or 'slices'%s", it->string, NULL);
		if (!ok)
			return bad_recipe(r, e, "'%s' is not read (models, base_model, merge_method, parameters, dtype, out_dtype, tokenizer_source: base)%s",
					  it->string, NULL);
	}
	const cJSON *mm = cJSON_GetObjectItemCaseSensitive(j, "merge_method");
	if (!cJSON_IsString(mm))
		return bad_recipe(r, e, "no merge_method%s%s", NULL, NULL);
	for (size_t i = 0; i < sizeof(methods) / sizeof(*methods); i++)
		if (!strcmp(mm->valuestring, methods[i].name)) {
			r->method = methods[i].m;
			r->method_name = methods[i].name;
		}
	if (!r->method)
		return bad_recipe(r, e, "merge_method '%s' is not read (linear, task_arithmetic, ties, dare_ties, dare_linear, breadcrumbs, breadcrumbs_ties, della, della_linear, slerp, model_stock, passthrough)%s",
				  mm->valuestring, NULL);
	const cJSON *models = cJSON_GetObjectItemCaseSensitive(j, "models");
	int ret;
	if (cJSON_GetObjectItemCaseSensitive(j, "slices") || r->method == TPC_MIX_PASSTHROUGH) {
		const cJSON *gp = cJSON_GetObjectItemCaseSensitive(j, "parameters");
		if ((ret = slices_from_json(r, j, e)) || (ret = check_params(r, gp, false, e)))
			return ret;
		r->params = cJSON_IsObject(gp) ? gp : NULL;
		r->base = -1;
		goto tail;
	}
	if (!cJSON_IsArray(models) || !cJSON_GetArraySize(models))
		return bad_recipe(r, e, "'models' must be a list of {model, parameters}%s%s", NULL, NULL);
	cJSON_ArrayForEach(it, models) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(it, "model"), *k;
		if (!cJSON_IsObject(it) || !cJSON_IsString(m))
			return bad_recipe(r, e, "each of 'models' is {model: PATH, parameters: {...}}%s%s", NULL, NULL);
		cJSON_ArrayForEach(k, it)
			if (strcmp(k->string, "model") && strcmp(k->string, "parameters"))
				return bad_recipe(r, e, "'%s' in a model's entry is not read (model, parameters)%s", k->string, NULL);
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(it, "parameters");
		if ((ret = check_params(r, p, true, e)) || (ret = add_input(r, m->valuestring, cJSON_IsObject(p) ? p : NULL, e)))
			return ret;
	}
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "base_model");
	r->base = -1;
	if (b && !cJSON_IsNull(b)) {
		if (!cJSON_IsString(b))
			return bad_recipe(r, e, "base_model must be a path%s%s", NULL, NULL);
		for (size_t k = 0; k < r->n; k++)
			if (!strcmp(r->model[k], b->valuestring))
				r->base = (int)k;
		if (r->base < 0) {
			if ((ret = add_input(r, b->valuestring, NULL, e)))
				return ret;
			r->base = (int)r->n - 1;
		}
	}
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "parameters");
	if ((ret = check_params(r, p, false, e)))
		return ret;
	r->params = cJSON_IsObject(p) ? p : NULL;
	if (r->method != TPC_MIX_LINEAR && r->base < 0)
		return bad_recipe(r, e, "merge_method %s needs a base_model%s", r->method_name, NULL);
	if (r->method == TPC_MIX_SLERP && r->n != 2)
		return bad_recipe(r, e, "slerp merges two models: the base_model and one more%s%s", NULL, NULL);
	if (r->method == TPC_MIX_MODEL_STOCK && r->n < 3)
		return bad_recipe(r, e, "model_stock merges the base_model and two models or more (model_stock.py L36-45)%s%s", NULL, NULL);
tail:;
	static const char *const dts[] = {"out_dtype", "dtype"};
	for (int i = 0; i < 2 && !r->dtype; i++) {
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, dts[i]);
		if (!d || cJSON_IsNull(d))
			continue;
		if (!cJSON_IsString(d) || (r->dtype = tpc_dtype_float_named(d->valuestring)) == TPC_DT_INVALID)
			return bad_recipe(r, e, "%s: float32, float16 or bfloat16 is read%s", dts[i], NULL);
	}
	const cJSON *tk = cJSON_GetObjectItemCaseSensitive(j, "tokenizer_source");
	if (tk && !cJSON_IsNull(tk) &&
	    !(cJSON_IsString(tk) && (!strcmp(tk->valuestring, "base") ||
				     !strcmp(tk->valuestring, r->model[tpc_mix_primary(r)]))))
		return bad_recipe(r, e, "tokenizer_source: only 'base' is read (the output keeps %s's tokenizer and embeddings)%s",
				  r->model[tpc_mix_primary(r)], NULL);
	return 0;
}

int tpc_mix_recipe_from_buffer(tpc_mix_recipe *r, const char *text, size_t len, const char *path, tpc_err *e)
{
	cJSON *j = NULL;
	memset(r, 0, sizeof(*r));
	r->base = -1;
	if (!(r->path = tpc_strdup(path ? path : "recipe")))
		return tpc_err_nomem(e);
	int ret = tpc_yaml_from_buffer(text, len, r->path, &j, e);
	r->json = j;
	if (!ret)
		ret = recipe_from_json(r, e);
	if (ret)
		tpc_mix_recipe_release(r);
	return ret;
}

TPC_PARSE_FN(parse_cb, tpc_mix_recipe_from_buffer)

int tpc_mix_recipe_from_file(tpc_mix_recipe *r, const char *path, tpc_err *e)
{
	memset(r, 0, sizeof(*r));
	r->base = -1;
	return tpc_parse_file(path, 16u << 20, parse_cb, r, e);
}

void tpc_mix_recipe_release(tpc_mix_recipe *r)
{
	cJSON_Delete(r->json);
	free(r->path);
	memset(r, 0, sizeof(*r));
	r->base = -1;
}

/* config.py evaluate_setting: *found false for a list of filters none matches */
void tpc__mix_evaluate(const void *sv, const char *tensor, double t, double *v, bool *found)
{
	const cJSON *s = sv;
	*found = true;
	if (cJSON_IsBool(s)) {
		*v = cJSON_IsTrue(s);
		return;
	}
	if (cJSON_IsNumber(s)) {
		*v = s->valuedouble;
		return;
	}
	int n = cJSON_GetArraySize(s);
	if (cJSON_IsNumber(cJSON_GetArrayItem(s, 0))) {
		double scaled = t * (double)(n - 1);
		int i0 = (int)scaled, i1 = i0 + 1 < n - 1 ? i0 + 1 : n - 1;
		double frac = scaled - (double)i0;
		*v = (1 - frac) * cJSON_GetArrayItem(s, i0)->valuedouble + frac * cJSON_GetArrayItem(s, i1)->valuedouble;
		return;
	}
	const cJSON *c;
	cJSON_ArrayForEach(c, s) {
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "filter");
		if (!f || cJSON_IsNull(f) || !strcmp(f->valuestring, "*") || (tensor && strstr(tensor, f->valuestring))) {
			tpc__mix_evaluate(cJSON_GetObjectItemCaseSensitive(c, "value"), tensor, t, v, found);
			return;
		}
	}
	*found = false;
}

int tpc_mix_param(const tpc_mix_recipe *r, const char *name, int k, const char *tensor, double t, double *v,
		  bool *found, tpc_err *e)
{
	(void)e;
	*found = false;
	if (k >= 0 && (size_t)k < r->n && r->mparams[k]) {
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(r->mparams[k], name);
		if (s)
			tpc__mix_evaluate(s, tensor, t, v, found);
	}
	if (!*found && r->params) {
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(r->params, name);
		if (s)
			tpc__mix_evaluate(s, tensor, t, v, found);
	}
	return 0;
}

/* ---- DARE's generator ---- */

uint64_t tpc_mix_splitmix64(uint64_t x)
{
	uint64_t z = x + 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t fnv1a64(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* ---- the descriptions ---- */

bool tpc__mix_is_float(const tpc_tensor *t)
{
	return t->dq || (tpc_dtype_get(t->dtype)->flags & TPC_DTF_FLOAT);
}

static bool is_int(const tpc_tensor *t)
{
	return !t->dq && (tpc_dtype_get(t->dtype)->flags & TPC_DTF_INT);
}

void tpc__mix_remap(tpc_tensor *t, const int *map)
{
	if (t->src >= 0)
		t->src = map[t->src];
	for (int k = 0; k < t->nparts; k++)
		tpc__mix_remap(&t->parts[k], map);
	for (int k = 0; t->dq && k < t->dq->nc; k++)
		tpc__mix_remap(&t->dq->c[k], map);
}

/* Elements [e0, e0+n) of t's image as f32. */
static int read_f32(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t e0, uint64_t n, float *dst, void **tmp,
		    size_t *tmpcap, tpc_err *e)
{
	tpc_dtype sd = t->src_dtype;
	if (sd == TPC_F32)
		return tpc_ckpt_read_bytes(ck, t, e0 * 4, n * 4, dst, e);
	unsigned es = tpc_dtype_size(sd);
	if (*tmpcap < n * es) {
		void *nt = realloc(*tmp, (size_t)(n * es));
		if (!nt)
			return tpc_err_nomem(e);
		*tmp = nt;
		*tmpcap = (size_t)(n * es);
	}
	int ret = tpc_ckpt_read_bytes(ck, t, e0 * es, n * es, *tmp, e);
	if (!ret)
		ret = tpc_cast(dst, TPC_F32, *tmp, sd, n, e);
	return ret;
}

static bool dare_kept(const tpc_mix_coef *m, int k, uint64_t j)
{
	return (tpc_mix_splitmix64(m->key[k] + j) >> 40) < m->keep[k];
}

/* Whether input k's delta at element j (of magnitude ad) survives its
 * sparsification (true where none) */
static bool kept(const tpc_mix_coef *m, int k, uint64_t j, float ad)
{
	switch (m->sparsify) {
	case 1:
		return ad >= m->thr[k];
	case 2:
		return m->keep[k] >= (1ull << 24) || dare_kept(m, k, j);
	case 3:
		return ad >= m->thr[k] && (m->thr_hi[k] < 0 || ad < m->thr_hi[k]);
	default:
		return true;
	}
}

/* Whether input k's delta is sparsified at all */
static bool masked(const tpc_mix_coef *m, int k)
{
	return (m->sparsify == 1 && m->thr[k] >= 0) || (m->sparsify == 2 && m->keep[k] < (1ull << 24)) ||
	       (m->sparsify == 3 && (m->thr[k] >= 0 || m->thr_hi[k] >= 0)) || (m->sparsify == 4 && m->keep[k] < (1ull << 24));
}

/* The bucket of a 65536-bin histogram (from the top) that holds the k-th
 * largest; *k becomes its rank within the bucket. */
static uint32_t bucket_of(const uint64_t *h, uint64_t *k)
{
	for (uint32_t b = 65536; b-- > 0;) {
		if (h[b] >= *k)
			return b;
		*k -= h[b];
	}
	return 0;
}

/* Elements [e0, e0+n) of inputs a and b as f32. */
static int read_pair(const tpc_ckpt *ck, const tpc_dequant *dq, int a, int b, uint64_t e0, uint64_t n, float *xa,
		     float *xb, void **tmp, size_t *tmpcap, tpc_err *e)
{
	int ret = read_f32(ck, &dq->c[a], e0, n, xa, tmp, tmpcap, e);
	return ret ? ret : read_f32(ck, &dq->c[b], e0, n, xb, tmp, tmpcap, e);
}

/* |delta|'s kk-th largest (1 <= kk <= N) into *thr: its f32 bit patterns
 * order as its values, so by a histogram of the high 16 bits, then of the
 * low 16 in that bucket (no copy of the tensor held: the pairs read twice) */
static int kth_largest(const tpc_ckpt *ck, const tpc_dequant *dq, int k, uint64_t kk, uint64_t *h, float *xb, float *xk,
		       void **tmp, size_t *tmpcap, float *thr, tpc_err *e)
{
	uint64_t N = dq->c[k].numel;
	uint32_t hi = 0;
	int B = dq->mix->base, ret = 0;
	for (int pass = 0; pass < 2 && !ret; pass++) {
		memset(h, 0, 65536 * sizeof(uint64_t));
		for (uint64_t e0 = 0; e0 < N && !ret; e0 += MIX_STEP) {
			uint64_t n = N - e0 < MIX_STEP ? N - e0 : MIX_STEP;
			if ((ret = read_pair(ck, dq, B, k, e0, n, xb, xk, tmp, tmpcap, e)))
				break;
			for (uint64_t j = 0; j < n; j++) {
				float d = fabsf(xk[j] - xb[j]);
				uint32_t u;
				memcpy(&u, &d, 4);
				if (pass == 0)
					h[u >> 16]++;
				else if (u >> 16 == hi)
					h[u & 0xffff]++;
			}
		}
		if (!ret && pass == 0)
			hi = bucket_of(h, &kk);
		else if (!ret) {
			uint32_t u = hi << 16 | bucket_of(h, &kk);
			memcpy(thr, &u, 4);
		}
	}
	return ret;
}

/* DELLA's MagPrune (sparsify.py della_magprune L138-176 at a6e40288): each
 * delta's elements ranked by magnitude within their row (dim 1 of a 2-D
 * tensor; a 1-D one is one row), r = 0.. n-1 from the smallest (equal
 * magnitudes by index: torch.argsort leaves their order open), kept with
 * p = (density - eps) + (r / (n - 1) * 2) * eps in f32 (n = 1: r / (n - 1)
 * is 0; mergekit's is NaN), drawn as DARE's: (splitmix64(key + j) >> 40) <
 * floor(p * 2^24). One row of every input's bits held at a time. */
typedef struct della_rows {
	uint64_t I;                  /* a row's elements */
	int64_t row[TPC_DQ_MAXC];    /* the row in bits[k], or -1 */
	float *xb, *xk;              /* the row's elements (the last filled) */
	uint64_t *key, *key2;        /* the ranking's keys, and the radix sort's other buffer */
	uint8_t *bits;               /* nc rows of I: kept */
	float *xs;                   /* model_stock filter_wise: nc rows of I */
	int64_t srow;                /* the row xs holds, or -1 */
	float s0, s1;                /* its t and 1 - t */
} della_rows;

static void della_free(della_rows *d)
{
	if (!d)
		return;
	free(d->xb);
	free(d->xk);
	free(d->key);
	free(d->key2);
	free(d->bits);
	free(d->xs);
	free(d);
}

static della_rows *della_new(const tpc_dequant *dq)
{
	const tpc_tensor *c = &dq->c[dq->mix->base];
	della_rows *d = tpc_calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	bool stock = dq->mix->method == TPC_MIX_MODEL_STOCK;
	/* DELLA's rows: dim 1 of a 2-D tensor; model_stock's: the last dim */
	d->I = c->ndim == 2 || (stock && c->ndim > 2) ? (uint64_t)c->shape[c->ndim - 1] : c->numel;
	for (int k = 0; k < TPC_DQ_MAXC; k++)
		d->row[k] = -1;
	d->srow = -1;
	size_t I = (size_t)(d->I ? d->I : 1);
	d->xb = tpc_malloc(I * sizeof(float));
	d->xk = tpc_malloc(I * sizeof(float));
	d->key = tpc_malloc(I * sizeof(uint64_t));
	d->key2 = tpc_malloc(I * sizeof(uint64_t));
	d->bits = tpc_malloc((size_t)dq->nc * I);
	if (stock)
		d->xs = tpc_malloc((size_t)dq->nc * I * sizeof(float));
	if (!d->xb || !d->xk || !d->key || !d->key2 || !d->bits || (stock && !d->xs)) {
		della_free(d);
		return NULL;
	}
	return d;
}

/* key[0..n) (a magnitude's bits above its index, indices ascending) in
 * ascending order: an LSD radix sort of the upper 32 bits, 8 at a time,
 * stable, so equal magnitudes stay in index order -- the order of sorting
 * the whole 64-bit keys (a comparison sort of them took two thirds of a
 * della merge's time). tmp: n more keys. */
static void sort_keys(uint64_t *key, uint64_t *tmp, size_t n)
{
	uint64_t *src = key, *dst = tmp;
	for (int shift = 32; shift < 64; shift += 8) {
		size_t cnt[257] = {0};
		for (size_t i = 0; i < n; i++)
			cnt[((src[i] >> shift) & 0xff) + 1]++;
		if (cnt[((src[0] >> shift) & 0xff) + 1] == n)
			continue; /* one bucket: this byte orders nothing */
		for (int b = 0; b < 256; b++)
			cnt[b + 1] += cnt[b];
		for (size_t i = 0; i < n; i++)
			dst[cnt[(src[i] >> shift) & 0xff]++] = src[i];
		uint64_t *t = src;
		src = dst;
		dst = t;
	}
	if (src != key)
		memcpy(key, src, n * sizeof(*key));
}

/* Input k's kept bits of row `row` into d (its pair left in d->xb, d->xk) */
static int della_fill(const tpc_ckpt *ck, const tpc_dequant *dq, della_rows *d, int k, uint64_t row, void **tmp,
		      size_t *tmpcap, tpc_err *e)
{
	const tpc_mix_coef *m = dq->mix;
	uint64_t I = d->I, e0 = row * I;
	int ret = read_pair(ck, dq, m->base, k, e0, I, d->xb, d->xk, tmp, tmpcap, e);
	if (ret)
		return ret;
	for (uint64_t j = 0; j < I; j++) {
		float ad = fabsf(d->xk[j] - d->xb[j]);
		uint32_t u;
		memcpy(&u, &ad, 4);
		d->key[j] = (uint64_t)u << 32 | j;
	}
	if (I)
		sort_keys(d->key, d->key2, (size_t)I);
	uint8_t *bits = d->bits + (size_t)k * I;
	for (uint64_t r = 0; r < I; r++) {
		uint64_t j = d->key[r] & 0xffffffffu;
		float rn = I > 1 ? (float)r / (float)(I - 1) : 0.0f, p = rn * 2.0f;
		p = m->plo[k] + p * m->eps[k];
		bits[j] = (tpc_mix_splitmix64(m->key[k] + e0 + j) >> 40) < (uint64_t)floor((double)p * 16777216.0);
	}
	d->row[k] = (int64_t)row;
	return 0;
}

/* Model Stock's t (model_stock.py L59-82 at a6e40288, the whole tensor as
 * one vector): the offsets o_i = x_i - base of the N models, the cosine of
 * each pair i < j (the dot over the norms' product clamped to >= 1e-6, then
 * to [-1, 1]), their mean c, t = N c / (1 + (N - 1) c); in f32 but for the
 * norms and dots, f64 sums in index order rounded once. s0 = t, s1 = 1 - t.
 * filter_wise (L50-56): the same per row (the last dimension; a 1-D tensor
 * is one row), computed while written (stock_row). */
/* the offsets' dot products of n elements (x_k at x + k * stride) into g */
static void stock_accum(const float *x, size_t stride, uint64_t n, int K, int B, double g[][TPC_DQ_MAXC])
{
	for (uint64_t j = 0; j < n; j++)
		for (int a = 0; a < K; a++) {
			if (a == B)
				continue;
			float oa = x[(size_t)a * stride + j] - x[(size_t)B * stride + j];
			for (int b = a; b < K; b++)
				if (b != B)
					g[a][b] += (double)oa * (double)(x[(size_t)b * stride + j] - x[(size_t)B * stride + j]);
		}
}

/* t from the offsets' dot products: *s0 = t, *s1 = 1 - t */
static void stock_t(double g[][TPC_DQ_MAXC], int K, int B, float *s0, float *s1)
{
	float csum = 0;
	int pairs = 0;
	for (int a = 0; a < K; a++)
		for (int b = a + 1; b < K && a != B; b++) {
			if (b == B)
				continue;
			float np = (float)sqrt(g[a][a]) * (float)sqrt(g[b][b]), c = (float)g[a][b] / (np > 1e-6f ? np : 1e-6f);
			c = c < -1 ? -1 : c > 1 ? 1 : c;
			csum = csum + c;
			pairs++;
		}
	float c = csum / (float)pairs, nn = (float)(K - 1);
	float num = nn * c, den = (nn - 1) * c;
	den = 1 + den;
	*s0 = num / den;
	*s1 = 1 - *s0;
}

static int stock_facts(const tpc_ckpt *ck, const tpc_dequant *dq, uint64_t N, void **tmp, size_t *tmpcap, tpc_err *e)
{
	tpc_mix_coef *m = dq->mix;
	int K = dq->nc, B = m->base, ret = 0;
	double g[TPC_DQ_MAXC][TPC_DQ_MAXC] = {{0}};
	if (m->rows)
		return 0; /* filter_wise: a t per row, while written */
	float *x = tpc_malloc((size_t)K * MIX_STEP * sizeof(float));
	if (!x)
		return tpc_err_nomem(e);
	for (uint64_t e0 = 0; e0 < N && !ret; e0 += MIX_STEP) {
		uint64_t n = N - e0 < MIX_STEP ? N - e0 : MIX_STEP;
		for (int k = 0; k < K && !ret; k++)
			ret = read_f32(ck, &dq->c[k], e0, n, x + (size_t)k * MIX_STEP, tmp, tmpcap, e);
		if (!ret)
			stock_accum(x, MIX_STEP, n, K, B, g);
	}
	free(x);
	if (!ret)
		stock_t(g, K, B, &m->s0, &m->s1);
	return ret;
}

/* The whole-tensor facts: TIES' thresholds, the rescale ratios, SLERP's
 * coefficients; reads of each input before writing (SLERP 2, DARE 1,
 * TIES 2, 3 with rescale), nothing held but a chunk. */
static int facts(const tpc_ckpt *ck, tpc_tensor *t, const double *density, const double *gamma, bool rescale, double tval,
		 tpc_mix_stats *st, tpc_err *e)
{
	tpc_dequant *dq = t->dq;
	tpc_mix_coef *m = dq->mix;
	uint64_t N = t->numel;
	int B = m->base, ret = 0;
	void *tmp = NULL;
	size_t tmpcap = 0;
	float *xb = tpc_malloc(MIX_STEP * sizeof(float)), *xk = tpc_malloc(MIX_STEP * sizeof(float));
	uint64_t *h = NULL;
	della_rows *dr = NULL;
	if (!xb || !xk) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (dq->kind == TPC_DQ_MIX && m->method == TPC_MIX_SLERP) {
		int K = B == 0 ? 1 : 0;
		double s00 = 0, s11 = 0, s01 = 0;
		for (uint64_t e0 = 0; e0 < N && !ret; e0 += MIX_STEP) {
			uint64_t n = N - e0 < MIX_STEP ? N - e0 : MIX_STEP;
			if ((ret = read_pair(ck, dq, B, K, e0, n, xb, xk, &tmp, &tmpcap, e)))
				break;
			for (uint64_t j = 0; j < n; j++) {
				s00 += (double)xb[j] * xb[j];
				s11 += (double)xk[j] * xk[j];
			}
		}
		float n0 = (float)sqrt(s00), n1 = (float)sqrt(s11);
		/* the dot of the normalized tensors (each element divided in f32) */
		for (uint64_t e0 = 0; e0 < N && !ret; e0 += MIX_STEP) {
			uint64_t n = N - e0 < MIX_STEP ? N - e0 : MIX_STEP;
			if ((ret = read_pair(ck, dq, B, K, e0, n, xb, xk, &tmp, &tmpcap, e)))
				break;
			for (uint64_t j = 0; j < n; j++) {
				float a = n0 > 1e-8f ? xb[j] / n0 : xb[j], b = n1 > 1e-8f ? xk[j] / n1 : xk[j];
				s01 += (double)a * b;
			}
		}
		if (ret)
			goto out;
		float dot = (float)s01;
		if (fabs((double)dot) > 0.9995) {
			m->s0 = (float)(1 - tval);
			m->s1 = (float)tval;
			st->lerped++;
		} else {
			double th0 = acos((double)dot), s = sin(th0), tht = th0 * tval;
			m->s0 = (float)(sin(th0 - tht) / s);
			m->s1 = (float)(sin(tht) / s);
		}
		goto out;
	}
	if (m->method == TPC_MIX_MODEL_STOCK) {
		ret = stock_facts(ck, dq, N, &tmp, &tmpcap, e);
		goto out;
	}
	if (!m->sparsify)
		goto out;
	uint64_t row_len = t->ndim == 2 ? (uint64_t)t->shape[1] : N;
	if (m->sparsify == 4 && N && (t->ndim > 2 || row_len > (1u << 24))) {
		char sh[128];
		ret = tpc_err_set(e, TPC_EINPUT, "della ranks a delta within its rows (of a 1-D or 2-D tensor, up to 2^24 a row): %s is not one",
				  tpc_shape_str(t, sh, sizeof(sh)));
		goto out;
	}
	if (m->sparsify == 4 && rescale && N && !(dr = della_new(dq))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (m->sparsify != 2 && m->sparsify != 4 && !(h = tpc_malloc(65536 * sizeof(uint64_t)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (int k = 0; k < dq->nc && !ret; k++) {
		if (k == B || density[k] >= 1)
			continue;
		uint64_t kk = (uint64_t)(density[k] * (double)N);
		if ((m->sparsify == 1 || m->sparsify == 3) && !kk) {
			ret = tpc_err_set(e, TPC_EINPUT, "density %g of input %d keeps no element of %llu", density[k], k,
					  (unsigned long long)N);
			break;
		}
		if (m->sparsify == 1) {
			ret = kth_largest(ck, dq, k, kk, h, xb, xk, &tmp, &tmpcap, &m->thr[k], e);
		} else if (m->sparsify == 3) {
			/* sparsify.py magnitude_outliers: the gamma * N largest dropped,
			 * then the smallest down to density * N (fewer of the largest
			 * dropped when both do not fit) */
			uint64_t top = (uint64_t)(gamma[k] * (double)N);
			if (kk + top > N)
				top = N - kk;
			if (kk + top < N)
				ret = kth_largest(ck, dq, k, kk + top, h, xb, xk, &tmp, &tmpcap, &m->thr[k], e);
			if (!ret && top)
				ret = kth_largest(ck, dq, k, top, h, xb, xk, &tmp, &tmpcap, &m->thr_hi[k], e);
		}
		/* sparsify.py rescaled_masked_tensor: l1, unless either norm < 1e-7 */
		double before = 0, after = 0;
		for (uint64_t row = 0; dr && rescale && !ret && row < N / dr->I; row++) {
			if ((ret = della_fill(ck, dq, dr, k, row, &tmp, &tmpcap, e)))
				break;
			for (uint64_t j = 0; j < dr->I; j++) {
				float d = fabsf(dr->xk[j] - dr->xb[j]);
				before += d;
				if (dr->bits[(size_t)k * dr->I + j])
					after += d;
			}
		}
		for (uint64_t e0 = 0; e0 < N && !dr && rescale && !ret; e0 += MIX_STEP) {
			uint64_t n = N - e0 < MIX_STEP ? N - e0 : MIX_STEP;
			if ((ret = read_pair(ck, dq, B, k, e0, n, xb, xk, &tmp, &tmpcap, e)))
				break;
			for (uint64_t j = 0; j < n; j++) {
				float d = fabsf(xk[j] - xb[j]);
				before += d;
				if (kept(m, k, e0 + j, d))
					after += d;
			}
		}
		if (!ret && rescale) {
			float bf = (float)before, af = (float)after;
			m->scale[k] = bf < 1e-7f || af < 1e-7f ? 1.0f : bf / af;
		}
	}
out:
	della_free(dr);
	free(tmp);
	free(xb);
	free(xk);
	free(h);
	return ret;
}

/* the layer position: the first all-digit component of the name, or -1 */
static int64_t layer_of(const char *name)
{
	for (const char *c = name; *c;) {
		const char *d = strchr(c, '.');
		size_t n = d ? (size_t)(d - c) : strlen(c);
		if (n && n < 10 && strspn(c, "0123456789") == n)
			return strtoll(c, NULL, 10);
		if (!d)
			break;
		c = d + 1;
	}
	return -1;
}

static int tensor_param(const tpc_mix_recipe *r, const char *p, int k, const char *name, double t, double dflt,
			bool required, double *v, tpc_err *e)
{
	bool found;
	tpc_mix_param(r, p, k, name, t, v, &found, e);
	if (found)
		return 0;
	if (required)
		return tpc_err_at(e, TPC_EINPUT, r->path, name, "no '%s' for model '%s' (its parameters or the recipe's)", p,
				  r->model[k]);
	*v = dflt;
	return 0;
}

/* DELLA's epsilon (0.15 unless given: merge_methods/generalized_task_arithmetic.py
 * L70-77 at a6e40288) into m; sparsify.py della_magprune L150-153 refuses
 * density +- epsilon outside (0, 1) */
static int della_param(const tpc_mix_recipe *r, const char *name, double t, int k, double density, tpc_mix_coef *m,
		       tpc_err *e)
{
	double eps;
	int ret = tensor_param(r, "epsilon", k, name, t, 0.15, false, &eps, e);
	if (ret || density >= 1)
		return ret;
	if (!(density + eps < 1) || !(density - eps > 0))
		return tpc_err_at(e, TPC_EINPUT, r->path, name,
				  "epsilon %g with density %g of model '%s': density - epsilon and density + epsilon must be inside (0, 1)",
				  eps, density, r->model[k]);
	m->plo[k] = (float)(density - eps);
	m->eps[k] = (float)eps;
	return 0;
}

/* The coefficients of tensor `name` (numel elements) into m. */
static int coefficients(const tpc_mix_recipe *r, const char *name, double t, uint64_t seed, tpc_mix_coef *m,
			double *density, double *gamma, bool *rescale, double *tval, tpc_err *e)
{
	const method_def *md = method_of(r->method);
	double v;
	int ret = 0;
	memset(m, 0, sizeof(*m));
	m->method = r->method;
	m->base = r->method == TPC_MIX_LINEAR ? -1 : r->base;
	m->sparsify = md->sparsify;
	m->consensus = md->consensus;
	m->lambda = 1;
	*rescale = false;
	for (size_t k = 0; k < TPC_DQ_MAXC; k++)
		m->scale[k] = 1;
	if (r->method == TPC_MIX_MODEL_STOCK) {
		if ((ret = tensor_param(r, "filter_wise", -1, name, t, 0, false, &v, e)))
			return ret;
		m->rows = v != 0;
		return 0;
	}
	if (r->method == TPC_MIX_SLERP) {
		bool found;
		tpc_mix_param(r, "t", -1, name, t, tval, &found, e);
		if (!found)
			return tpc_err_at(e, TPC_EINPUT, r->path, name, "slerp needs the parameter 't'");
		return 0;
	}
	if ((ret = tensor_param(r, "normalize", -1, name, t, md->normalize, false, &v, e)))
		return ret;
	m->normalize = v != 0;
	if (r->method != TPC_MIX_LINEAR) {
		double rs, lam;
		tensor_param(r, "rescale", -1, name, t, md->rescale, false, &rs, e);
		tensor_param(r, "lambda", -1, name, t, 1, false, &lam, e);
		m->lambda = (float)lam;
		*rescale = rs != 0 && m->sparsify;
	}
	float wsum = 0;
	for (size_t k = 0; k < r->n; k++) {
		int kk = (int)k;
		m->thr[k] = m->thr_hi[k] = -1;
		density[k] = 1;
		gamma[k] = 0;
		if (kk == m->base)
			continue;
		if ((ret = tensor_param(r, "weight", kk, name, t, 0, true, &v, e)))
			return ret;
		m->w[k] = (float)v;
		wsum = wsum + m->w[k];
		if (r->method == TPC_MIX_LINEAR)
			continue;
		if ((ret = tensor_param(r, "density", kk, name, t, 1, false, &density[k], e)))
			return ret;
		if (!(density[k] > 0) || density[k] > 1)
			return tpc_err_at(e, TPC_EINPUT, r->path, name, "density %g of model '%s' is outside (0, 1]", density[k],
					  r->model[k]);
		/* merge_methods/generalized_task_arithmetic.py: gamma 0.01 unless given */
		if (md->sparsify == 3 && (ret = tensor_param(r, "gamma", kk, name, t, 0.01, false, &gamma[k], e)))
			return ret;
		if (!(gamma[k] >= 0) || gamma[k] >= 1)
			return tpc_err_at(e, TPC_EINPUT, r->path, name, "gamma %g of model '%s' is outside [0, 1)", gamma[k],
					  r->model[k]);
		if (md->sparsify == 4 && (ret = della_param(r, name, t, kk, density[k], m, e)))
			return ret;
		m->keep[k] = density[k] >= 1 ? (1ull << 24) : (uint64_t)floor(density[k] * 16777216.0);
		m->key[k] = tpc_mix_splitmix64(tpc_mix_splitmix64(tpc_mix_splitmix64(seed) ^ fnv1a64(name)) + k);
	}
	m->wsum = wsum;
	return 0;
}

int tpc__mix_install(tpc_ckpt *ck, size_t ix, tpc_dequant *dq, tpc_dtype out, tpc_err *e)
{
	tpc_tensor *old = &ck->t[ix], nt;
	if (tpc_tensor_init_zero(&nt, TPC_F32, old->ndim, old->shape))
		return tpc_err_nomem(e);
	nt.flags = 0;
	nt.dq = dq;
	nt.dtype = out ? out : old->dtype == TPC_F16 || old->dtype == TPC_BF16 || old->dtype == TPC_F64 ? old->dtype : TPC_F32;
	nt.nbytes = nt.numel * tpc_dtype_size(nt.dtype);
	nt.name = old->name;
	old->name = NULL;
	tpc_tensor_release(old);
	*old = nt;
	return 0;
}

/* A filter that no tensor name holds is a recipe written for other names
 * (mergekit's are Hugging Face's; a GGUF written as GGUF is read with its
 * own): refused rather than silently never applied. */
static int check_filters(const tpc_ckpt *ck, const tpc_mix_recipe *r, const cJSON *params, tpc_err *e)
{
	const cJSON *p, *c;
	cJSON_ArrayForEach(p, params) {
		if (!cJSON_IsArray(p))
			continue;
		cJSON_ArrayForEach(c, p) {
			const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "filter");
			if (!cJSON_IsString(f) || !strcmp(f->valuestring, "*"))
				continue;
			size_t i = 0;
			while (i < ck->n && !strstr(ck->t[i].name, f->valuestring))
				i++;
			if (i == ck->n)
				return tpc_err_at(e, TPC_EINPUT, r->path, NULL,
						  "parameter '%s': filter '%s' is in no tensor's name (names as read, e.g. '%s')",
						  p->string, f->valuestring, ck->n ? ck->t[ck->n - 1].name : "");
		}
	}
	return 0;
}

/* The written input's ties (tpc_ckpt_ties: one storage, a recorded alias)
 * into *tiep (the first tensor of each one's tie); each must be a tie in
 * every input, or the merge would have to untie them. */
static int check_ties(const tpc_ckpt *ck, const tpc_ckpt *const *in, const tpc_mix_recipe *r, const int64_t *ix,
		      int64_t **tiep, tpc_err *e)
{
	size_t n = ck->n, m = 0;
	int P = tpc_mix_primary(r), ret = 0;
	for (size_t k = 0; k < r->n; k++)
		m = in[k]->n > m ? in[k]->n : m;
	int64_t *tie = *tiep = tpc_malloc((n ? n : 1) * sizeof(int64_t)), *tk = tpc_malloc((m ? m : 1) * sizeof(int64_t));
	if (!tie || !tk) {
		free(tk);
		return tpc_err_nomem(e);
	}
	ret = tpc_ckpt_ties(ck, NULL, 0, tie, e);
	for (size_t k = 0; k < r->n && !ret; k++) {
		if ((int)k == P || (ret = tpc_ckpt_ties(in[k], NULL, 0, tk, e)))
			continue;
		for (size_t i = 0; i < n && !ret; i++) {
			int64_t f = tie[i];
			if (f != (int64_t)i && tk[ix[i * r->n + k]] != tk[ix[(size_t)f * r->n + k]])
				ret = tpc_err_at(e, TPC_EINPUT, r->model[k], ck->t[i].name,
						 "not tied to '%s' as in '%s' (one weight there): merged it would be two", ck->t[f].name,
						 r->model[P]);
		}
	}
	free(tk);
	return ret;
}

int tpc_mix_apply(tpc_ckpt *ck, const tpc_ckpt *const *in, const tpc_mix_recipe *r, uint64_t seed,
		  tpc_mix_stats *st, tpc_err *e)
{
	int P = tpc_mix_primary(r), ret = 0;
	int *map[TPC_MIX_MAX_INPUTS] = {0};
	int64_t *ix = NULL, *tie = NULL;
	size_t n = ck->n;
	memset(st, 0, sizeof(*st));
	if ((ret = check_filters(ck, r, r->params, e)))
		return ret;
	for (size_t k = 0; k < r->n; k++)
		if (r->mparams[k] && (ret = check_filters(ck, r, r->mparams[k], e)))
			return ret;
	/* every tensor in every input, of one shape, before ck changes */
	if (n && !(ix = tpc_calloc(n * r->n, sizeof(int64_t))))
		return tpc_err_nomem(e);
	for (size_t k = 0; k < r->n && !ret; k++) {
		const tpc_ckpt *c = in[k];
		for (size_t i = 0; i < c->n && !ret; i++)
			if (tpc_ckpt_find(ck, c->t[i].name) < 0)
				ret = tpc_err_at(e, TPC_EINPUT, r->model[k], c->t[i].name, "not in '%s' (the merged tensors are every input's)",
						 r->model[P]);
		for (size_t i = 0; i < n && !ret; i++) {
			const tpc_tensor *a = &ck->t[i], *b;
			int64_t j = tpc_ckpt_find(c, a->name);
			ix[i * r->n + k] = j;
			if (j < 0) {
				ret = tpc_err_at(e, TPC_EINPUT, r->model[k], a->name, "missing: it is in '%s'", r->model[P]);
				break;
			}
			b = &c->t[j];
			bool same = a->ndim == b->ndim;
			for (int d = 0; same && d < a->ndim; d++)
				same = a->shape[d] == b->shape[d];
			char sa[128], sb[128];
			if (!same)
				ret = tpc_err_at(e, TPC_EINPUT, r->model[k], a->name, "shape %s, in '%s' %s", tpc_shape_str(b, sb, sizeof(sb)),
						 r->model[P], tpc_shape_str(a, sa, sizeof(sa)));
			else if (tpc__mix_is_float(a) != tpc__mix_is_float(b) || is_int(a) != is_int(b))
				ret = tpc_err_at(e, TPC_EINPUT, r->model[k], a->name, "%s, in '%s' %s", tpc_dtype_name(b->dtype), r->model[P],
						 tpc_dtype_name(a->dtype));
			else if (!tpc__mix_is_float(a) && !is_int(a))
				ret = tpc_err_at(e, TPC_EINPUT, r->model[k], a->name, "%s is not a float type to merge (FP8: --dequantize first)",
						 tpc_dtype_name(a->dtype));
		}
	}
	if (ret || (ret = check_ties(ck, in, r, ix, &tie, e)))
		goto out;
	for (size_t k = 0; k < r->n && !ret; k++)
		if ((int)k != P)
			ret = tpc__import_sources(ck, in[k], &map[k], e);
	if (ret)
		goto out;
	/* the layer count, for the position of a layer's tensors */
	int64_t L = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t l = layer_of(ck->t[i].name);
		L = l + 1 > L ? l + 1 : L;
	}
	for (size_t i = 0; i < n && !ret; i++) {
		tpc_tensor *a = &ck->t[i];
		if (!tpc__mix_is_float(a)) {
			st->kept++;
			continue;
		}
		if (tie[i] != (int64_t)i) {
			/* tied in the written input: its merge is the first's, tied to it */
			tpc_tensor nt;
			if (tpc_tensor_copy(&nt, &ck->t[tie[i]])) {
				ret = tpc_err_nomem(e);
				break;
			}
			nt.name = a->name;
			a->name = NULL;
			tpc_tensor_release(a);
			*a = nt;
			a->alias_of = tie[i];
			st->tied++;
			continue;
		}
		int64_t l = layer_of(a->name);
		double t = l < 0 ? 0 : L > 1 ? (double)l / (double)(L - 1) : 1, density[TPC_DQ_MAXC], gamma[TPC_DQ_MAXC];
		double tval = 0;
		bool rescale;
		tpc_dequant *dq = tpc_dequant_new(TPC_DQ_MAXC, true);
		if (!dq) {
			ret = tpc_err_nomem(e);
			break;
		}
		dq->kind = TPC_DQ_MIX;
		if ((ret = coefficients(r, a->name, t, seed, dq->mix, density, gamma, &rescale, &tval, e))) {
			free(dq);
			break;
		}
		for (size_t k = 0; k < r->n && !ret; k++) {
			const tpc_tensor *src = (int)k == P ? a : &in[k]->t[ix[i * r->n + k]];
			tpc_tensor *c = &dq->c[k];
			if (tpc_tensor_copy(c, src) || !(c->name = tpc_strdup(src->name))) {
				tpc_tensor_release(c);
				ret = tpc_err_nomem(e);
				break;
			}
			dq->nc++;
			if ((int)k != P)
				tpc__mix_remap(c, map[k]);
		}
		if (ret || (ret = tpc__mix_install(ck, i, dq, r->dtype, e))) {
			tpc__dq_free(dq);
			break;
		}
		if ((ret = facts(ck, a, density, gamma, rescale, tval, st, e))) {
			tpc_err_tensor(e, a->name);
			break;
		}
		st->merged++;
	}
out:
	for (size_t k = 0; k < r->n; k++)
		free(map[k]);
	free(ix);
	free(tie);
	return ret;
}

/* ---- the elements, while written ---- */

/* model_stock filter_wise: row `row`'s t into d (model_stock.py L50-82 per row) */
static int stock_row(const tpc_ckpt *ck, const tpc_dequant *dq, della_rows *d, uint64_t row, void **tmp, size_t *tmpcap,
		     tpc_err *e)
{
	int K = dq->nc, ret = 0;
	double g[TPC_DQ_MAXC][TPC_DQ_MAXC] = {{0}};
	for (int k = 0; k < K && !ret; k++)
		ret = read_f32(ck, &dq->c[k], row * d->I, d->I, d->xs + (size_t)k * d->I, tmp, tmpcap, e);
	if (!ret) {
		stock_accum(d->xs, (size_t)d->I, d->I, K, dq->mix->base, g);
		stock_t(g, K, dq->mix->base, &d->s0, &d->s1);
	}
	return ret;
}

/* Elements [e0, e0+cnt) of the whole merged image (the inputs' element
 * indices) into dst; x: K * MIX_STEP floats. */
static int span(const tpc_ckpt *ck, const tpc_dequant *dq, uint64_t e0, uint64_t cnt, float *dst, float *x, void **tmpp,
		size_t *tmpcap, della_rows *dr, tpc_err *e)
{
	const tpc_mix_coef *m = dq->mix;
	int K = dq->nc, B = m->base, ret = 0;
	while (cnt && !ret) {
		uint64_t n = cnt < MIX_STEP ? cnt : MIX_STEP;
		const uint8_t *bits = NULL; /* DELLA: the row's kept bits, from e0 */
		float s0 = m->s0, s1 = m->s1;
		if (dr && m->method == TPC_MIX_MODEL_STOCK) {
			uint64_t row = e0 / dr->I, in = dr->I - e0 % dr->I;
			n = n < in ? n : in;
			if (dr->srow != (int64_t)row && !(ret = stock_row(ck, dq, dr, row, tmpp, tmpcap, e)))
				dr->srow = (int64_t)row;
			s0 = dr->s0;
			s1 = dr->s1;
		} else if (dr) {
			uint64_t row = e0 / dr->I, in = dr->I - e0 % dr->I;
			n = n < in ? n : in;
			for (int k = 0; k < K && !ret; k++)
				if (masked(m, k) && dr->row[k] != (int64_t)row)
					ret = della_fill(ck, dq, dr, k, row, tmpp, tmpcap, e);
			bits = dr->bits + e0 % dr->I;
		}
		for (int k = 0; k < K && !ret; k++)
			ret = read_f32(ck, &dq->c[k], e0, n, x + (size_t)k * MIX_STEP, tmpp, tmpcap, e);
		if (ret)
			break;
		/* elements are independent (DARE's mask keyed by the index): any
		 * thread count, the same bits */
		if (m->method == TPC_MIX_LINEAR) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n >= 4096)
#endif
			for (uint64_t j = 0; j < n; j++) {
				float acc = 0;
				for (int k = 0; k < K; k++) {
					float p = m->w[k] * x[(size_t)k * MIX_STEP + j];
					acc = acc + p;
				}
				dst[j] = m->normalize ? acc / m->wsum : acc;
			}
		} else if (m->method == TPC_MIX_PASSTHROUGH) {
			/* passthrough.py: the tensor times its scale */
			for (uint64_t j = 0; j < n; j++)
				dst[j] = m->w[0] * x[j];
		} else if (m->method == TPC_MIX_MODEL_STOCK) {
			/* model_stock.py L84-85: t * the models' mean + (1 - t) * the base */
			const float *x0 = x + (size_t)B * MIX_STEP;
			float nk = (float)(K - 1);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n >= 4096)
#endif
			for (uint64_t j = 0; j < n; j++) {
				float acc = 0;
				for (int k = 0; k < K; k++)
					if (k != B)
						acc = acc + x[(size_t)k * MIX_STEP + j];
				float a = s0 * (acc / nk), b = s1 * x0[j];
				dst[j] = a + b;
			}
		} else if (m->method == TPC_MIX_SLERP) {
			const float *v0 = x + (size_t)B * MIX_STEP, *v1 = x + (size_t)(B == 0 ? 1 : 0) * MIX_STEP;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n >= 4096)
#endif
			for (uint64_t j = 0; j < n; j++) {
				float a = m->s0 * v0[j], b = m->s1 * v1[j];
				dst[j] = a + b;
			}
		} else {
			const float *xb = x + (size_t)B * MIX_STEP;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n >= 4096)
#endif
			for (uint64_t j = 0; j < n; j++) {
				float wd[TPC_DQ_MAXC], sum = 0;
				for (int k = 0; k < K; k++) {
					if (k == B)
						continue;
					float d = x[(size_t)k * MIX_STEP + j] - xb[j];
					if (masked(m, k)) {
						bool kp = bits ? bits[(size_t)k * dr->I + j] != 0 : kept(m, k, e0 + j, fabsf(d));
						float mk = kp ? 1.0f : 0.0f;
						d = d * mk;
						d = d * m->scale[k];
					}
					wd[k] = d * m->w[k];
					sum = sum + wd[k];
				}
				float mixed = sum, div = m->wsum;
				if (m->consensus) {
					/* get_mask 'sum': the sign of the summed weighted deltas */
					float maj = sum >= 0 ? 1.0f : -1.0f, dv = 0;
					mixed = 0;
					for (int k = 0; k < K; k++) {
						if (k == B)
							continue;
						float sg = wd[k] > 0 ? 1.0f : wd[k] < 0 ? -1.0f : 0.0f;
						float mk = sg == maj ? 1.0f : 0.0f;
						float p = wd[k] * mk, q = m->w[k] * mk;
						mixed = mixed + p;
						dv = dv + q;
					}
					div = dv == 0 ? 1.0f : dv;
				} else if (fabsf(div) < 1e-8f) {
					div = 1;
				}
				if (m->normalize)
					mixed = mixed / div;
				if (m->lambda != 1)
					mixed = mixed * m->lambda;
				dst[j] = xb[j] + mixed;
			}
		}
		dst += n;
		e0 += n;
		cnt -= n;
	}
	return ret;
}

int tpc__mix_read(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t e0, uint64_t cnt, float *dst, tpc_err *e)
{
	const tpc_dequant *dq = t->dq;
	void *tmp = NULL;
	size_t tmpcap = 0;
	int ret = 0;
	if (e0 > t->numel || cnt > t->numel - e0 || (dq->O && (t->ndim != 2 || t->shape[1] <= 0)))
		return tpc_err_set(e, TPC_EINPUT, "internal: bad read of merged '%s'", t->name ? t->name : "?");
	float *x = tpc_malloc((size_t)dq->nc * MIX_STEP * sizeof(float));
	della_rows *dr = NULL;
	bool rows = dq->mix->sparsify == 4 || (dq->mix->method == TPC_MIX_MODEL_STOCK && dq->mix->rows);
	if (!x || (rows && t->numel && !(dr = della_new(dq)))) {
		free(x);
		return tpc_err_nomem(e);
	}
	if (!dq->O) {
		ret = span(ck, dq, e0, cnt, dst, x, &tmp, &tmpcap, dr, e);
	} else {
		/* a window (a rank's slice, GGUF's permuted rows): rows r0.. and
		 * columns c0.. of the [O, I] image, a row's run at a time */
		uint64_t w = (uint64_t)t->shape[1];
		while (cnt && !ret) {
			uint64_t o = e0 / w, col = e0 % w, n = w - col < cnt ? w - col : cnt;
			uint64_t f0 = ((uint64_t)dq->r0 + o) * (uint64_t)dq->I + (uint64_t)dq->c0 + col;
			ret = span(ck, dq, f0, n, dst, x, &tmp, &tmpcap, dr, e);
			dst += n;
			e0 += n;
			cnt -= n;
		}
	}
	free(x);
	free(tmp);
	della_free(dr);
	if (ret)
		tpc_err_tensor(e, t->name);
	return ret;
}
