/* tpc_facts.c - a model's facts from its config.json; see tpc_facts.h. */
#include "tpc_facts.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_cfg.h"
#include "tpc_extras.h"

/* Every fact is read leniently under the text_config rule (tpc_cfg.h). */
#define T TPC_CFG_TEXT
#define L TPC_CFG_LENIENT

/* a count: an integer in [1, 2^53], else 0 */
static int64_t count(const tpc_cfg *c, const char *names)
{
	int64_t v = 0;
	tpc_cfg_int(c, T, names, L, 1, INT64_C(9007199254740992), &v, NULL);
	return v;
}

static double pos(double v)
{
	return v > 0 && v < 1e12 ? v : 0;
}

/* a positive number under 1e12, else 0 */
static double num(const tpc_cfg *c, const char *name)
{
	double v = 0;
	tpc_cfg_num(c, T, name, L, &v, NULL);
	return pos(v);
}

/* a member of the rope object (tpc_cfg_rope_num), positive, else 0 */
static double rope(const tpc_cfg *c, const char *name, const char *top)
{
	double v = 0;
	tpc_cfg_rope_num(c, T, name, top, L, &v, NULL);
	return pos(v);
}

static int flag(const tpc_cfg *c, const char *name)
{
	int v = 0;
	tpc_cfg_bool(c, T, name, L, &v, NULL);
	return v;
}

static const char *str(const tpc_cfg *c, const char *name)
{
	const char *v = NULL;
	tpc_cfg_str(c, T, name, L, &v, NULL);
	return v;
}

/* The counts, each under every name a config.json gives it (the first
 * present wins). */
#define COUNT(field, names) {offsetof(tpc_model_facts, field), names}
static const struct {
	size_t off;
	const char *names;
} counts[] = {
	COUNT(heads, "num_attention_heads|n_head|num_heads|n_heads|encoder_attention_heads"),
	COUNT(kv_heads, "num_key_value_heads|num_kv_heads|n_head_kv|n_kv_heads|num_query_groups"),
	COUNT(head_dim, "head_dim|kv_channels|d_kv|attention_head_size|attention_head_dim"),
	COUNT(hidden, "hidden_size|n_embd|d_model|dim"),
	COUNT(vocab, "vocab_size|n_vocab"),
	COUNT(layers, "num_hidden_layers|n_layer|num_layers|n_layers"),
	/* mixtures of experts, DeepSeek's routing and its MLA */
	COUNT(experts_per_tok, "num_experts_per_tok|num_selected_experts|moe_topk|moe_k"),
	COUNT(experts, "num_local_experts|num_experts|n_routed_experts|moe_num_experts"),
	COUNT(n_group, "n_group"),
	COUNT(topk_group, "topk_group"),
	COUNT(q_lora_rank, "q_lora_rank"),
	COUNT(kv_lora_rank, "kv_lora_rank"),
	COUNT(qk_nope_head_dim, "qk_nope_head_dim"),
	COUNT(qk_rope_head_dim, "qk_rope_head_dim"),
	COUNT(v_head_dim, "v_head_dim"),
	COUNT(first_dense, "first_k_dense_replace"),
	COUNT(nextn, "num_nextn_predict_layers"),
	/* a Mamba-2 mixer (mamba_d_head may also be "auto": ssm_facts) */
	COUNT(ssm_heads, "mamba_n_heads"),
	COUNT(ssm_head_dim, "mamba_d_head"),
	COUNT(ssm_groups, "mamba_n_groups"),
	COUNT(ssm_state, "mamba_d_state"),
	COUNT(ssm_conv, "mamba_d_conv"),
	/* linear attention (gated DeltaNet) */
	COUNT(lin_k_heads, "linear_num_key_heads"),
	COUNT(lin_v_heads, "linear_num_value_heads"),
	COUNT(lin_k_dim, "linear_key_head_dim"),
	COUNT(lin_v_dim, "linear_value_head_dim"),
};
#undef COUNT

/* The numbers, each under its config.json name: positive, else 0. */
#define NUM(field, name) {offsetof(tpc_model_facts, field), name}
static const struct {
	size_t off;
	const char *name;
} nums[] = {
	/* Gemma 2/3: the score scale and softcaps */
	NUM(attn_scalar, "query_pre_attn_scalar"),
	NUM(attn_softcap, "attn_logit_softcapping"),
	NUM(final_softcap, "final_logit_softcapping"),
	/* Granite: its four multipliers */
	NUM(embed_mul, "embedding_multiplier"),
	NUM(resid_mul, "residual_multiplier"),
	NUM(attn_mul, "attention_multiplier"),
	NUM(logit_div, "logits_scaling"),
	/* Cohere: the logits' multiplier */
	NUM(logit_mul, "logit_scale"),
	/* gpt-oss: its experts' clamped SwiGLU's limit */
	NUM(swiglu_limit, "swiglu_limit"),
};
#undef NUM

/* Rope parameters per layer type (transformers 5's Gemma 3:
 * rope_parameters {"full_attention": {...}, "sliding_attention": {...}}),
 * or the sliding layers' theta at the top level (rope_local_base_freq, as
 * Gemma 3 configs before transformers 5 say it). */
static void layer_rope(tpc_model_facts *f, const tpc_cfg *c)
{
	const cJSON *r = tpc_cfg_rope(c, T);
	const cJSON *full = cJSON_GetObjectItemCaseSensitive(r, "full_attention");
	const cJSON *swa = cJSON_GetObjectItemCaseSensitive(r, "sliding_attention");
	const cJSON *ft = cJSON_GetObjectItemCaseSensitive(full, "rope_theta");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(swa, "rope_theta");
	const cJSON *top = full ? full : r, *ty = cJSON_GetObjectItemCaseSensitive(top, "rope_type");
	const cJSON *fa = cJSON_GetObjectItemCaseSensitive(top, "factor");
	if (!cJSON_IsString(ty))
		ty = cJSON_GetObjectItemCaseSensitive(top, "type");
	static const char *const known[] = {"default", "linear", "dynamic", "yarn", "llama3", "longrope"};
	bool ok = !cJSON_IsString(ty);
	for (size_t i = 0; !ok && i < sizeof(known) / sizeof(known[0]); i++)
		ok = !strcmp(ty->valuestring, known[i]);
	if (!ok)
		snprintf(f->rope_unknown, sizeof(f->rope_unknown), "%s", ty->valuestring);
	if (cJSON_IsString(ty) && !strcmp(ty->valuestring, "linear") && cJSON_IsNumber(fa))
		f->rope_linear = pos(fa->valuedouble);
	if (cJSON_IsString(ty) && !strcmp(ty->valuestring, "dynamic")) {
		const cJSON *al = cJSON_GetObjectItemCaseSensitive(top, "alpha");
		f->rope_dynamic = true;
		f->rope_alpha = cJSON_IsNumber(al) ? pos(al->valuedouble) : 0;
	}
	if (cJSON_IsNumber(ft))
		f->rope_theta = pos(ft->valuedouble);
	f->rope_theta_local = cJSON_IsNumber(st) ? pos(st->valuedouble) : num(c, "rope_local_base_freq");
}

/* Attention extras: the numbers above, the sliding window and which layers
 * use it (layer_types). */
static void attn_facts(tpc_model_facts *f, const tpc_cfg *c)
{
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		*(double *)((char *)f + nums[i].off) = num(c, nums[i].name);
	f->sliding_window = count(c, "sliding_window");
	f->use_swa = flag(c, "use_sliding_window");
	int64_t mw = -1;
	tpc_cfg_int(c, T, "max_window_layers", L, 0, INT64_C(9007199254740992), &mw, NULL);
	if (mw >= 0) {
		f->max_window_layers = mw;
		f->max_window_said = true;
	}
	f->chunk_size = count(c, "attention_chunk_size");
	f->use_qk_norm = flag(c, "use_qk_norm");
	f->temp_tuning = flag(c, "attn_temperature_tuning");
	f->temp_floor = num(c, "floor_scale");
	double ts = -1;
	tpc_cfg_num(c, T, "attn_scale", L, &ts, NULL);
	if (ts >= 0 && ts < 1e6) {
		f->temp_scale = ts;
		f->temp_scale_said = true;
	}
	const cJSON *lt = tpc_cfg_get(c, T, "layer_types", NULL);
	int n = cJSON_IsArray(lt) ? cJSON_GetArraySize(lt) : 0;
	if (n < 1 || n > TPC_FACTS_MAX_TYPED)
		return;
	for (int i = 0; i < n; i++) {
		const cJSON *v = cJSON_GetArrayItem(lt, i);
		if (cJSON_IsString(v) && !strcmp(v->valuestring, "sliding_attention"))
			f->swa_layers[i / 64] |= UINT64_C(1) << (i % 64);
		if (cJSON_IsString(v) && !strcmp(v->valuestring, "chunked_attention"))
			f->chunk_layers[i / 64] |= UINT64_C(1) << (i % 64);
		if (cJSON_IsString(v) && !strcmp(v->valuestring, "mamba"))
			f->ssm_layers[i / 64] |= UINT64_C(1) << (i % 64);
	}
	f->n_typed = n;
}

/* A Mamba-2 mixer's head size when mamba_d_head is "auto" or unsaid:
 * transformers' GraniteMoeHybridConfig, mamba_expand x hidden_size /
 * mamba_n_heads (whole heads only; mamba_expand must be said) */
static void ssm_facts(tpc_model_facts *f, const tpc_cfg *c)
{
	int64_t expand = count(c, "mamba_expand");
	const char *pt = str(c, "position_embedding_type");
	f->pos_rope_said = pt && !strcmp(pt, "rope");
	if (f->ssm_head_dim || !f->ssm_heads || !expand || !f->hidden || expand > INT64_MAX / f->hidden)
		return;
	if (expand * f->hidden % f->ssm_heads == 0)
		f->ssm_head_dim = expand * f->hidden / f->ssm_heads;
}

bool tpc_facts_ssm_layer(const tpc_model_facts *f, int64_t l)
{
	return f && l >= 0 && l < f->n_typed && l < TPC_FACTS_MAX_TYPED &&
	       (f->ssm_layers[l / 64] >> (l % 64) & 1);
}

/* Python's truth of a JSON value: false, null, 0, "", [] and {} are false */
static bool truthy(const cJSON *v)
{
	if (cJSON_IsNumber(v))
		return v->valuedouble != 0;
	if (cJSON_IsString(v))
		return v->valuestring[0] != 0;
	if (cJSON_IsArray(v) || cJSON_IsObject(v))
		return v->child != NULL;
	return cJSON_IsTrue(v);
}

/* Layers without RoPE: no_rope_layers (transformers' SmolLM3 and Llama 4
 * attention: use_rope = config.no_rope_layers[layer_idx]), else the period
 * no_rope_layer_interval fills that list with. */
static void rope_off_facts(tpc_model_facts *f, const tpc_cfg *c)
{
	const cJSON *nr = tpc_cfg_get(c, T, "no_rope_layers", NULL);
	int n = cJSON_IsArray(nr) ? cJSON_GetArraySize(nr) : 0;
	f->rope_off_every = count(c, "no_rope_layer_interval");
	if (n < 1 || n > TPC_FACTS_MAX_TYPED)
		return;
	for (int i = 0; i < n; i++)
		if (!truthy(cJSON_GetArrayItem(nr, i)))
			f->rope_off[i / 64] |= UINT64_C(1) << (i % 64);
	f->n_rope_listed = n;
}

bool tpc_facts_rope_off(const tpc_model_facts *f, int64_t l, int64_t every)
{
	if (l < 0)
		return false;
	if (f && f->n_rope_listed)
		return l < f->n_rope_listed && (f->rope_off[l / 64] >> (l % 64) & 1);
	int64_t period = f && f->rope_off_every ? f->rope_off_every : every;
	return period > 0 && (l + 1) % period == 0;
}

/* A list of numbers into out (at most TPC_LONGROPE_MAX): its length, -1 when
 * it is not one */
static int num_list(const cJSON *a, double *out)
{
	int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
	if (n > TPC_LONGROPE_MAX)
		return -1;
	for (int i = 0; i < n; i++) {
		const cJSON *v = cJSON_GetArrayItem(a, i);
		if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
			return -1;
		out[i] = v->valuedouble;
	}
	return n;
}

/* A longrope rope (Phi-3's): its lists and numbers as config.json says them
 * (tpc_rope_longrope; verify resolves them) */
static void longrope_facts(tpc_rope_longrope *lr, const tpc_cfg *c, const char *ty)
{
	const cJSON *r = tpc_cfg_rope(c, T);
	lr->on = !strcmp(ty, "longrope");
	lr->alias = !strcmp(ty, "su") ? 1 : !strcmp(ty, "yarn") ? 2 : 0;
	lr->n_short = num_list(cJSON_GetObjectItemCaseSensitive(r, "short_factor"), lr->short_f);
	lr->n_long = num_list(cJSON_GetObjectItemCaseSensitive(r, "long_factor"), lr->long_f);
	lr->factor = rope(c, "factor", NULL);
	lr->attn_factor = rope(c, "attention_factor", NULL);
	lr->orig_rope = (int64_t)rope(c, "original_max_position_embeddings", NULL);
	lr->orig_top = count(c, "original_max_position_embeddings");
	lr->max_pos = count(c, "max_position_embeddings");
}

/* The norm's epsilon and the rotary embedding: rope_theta in transformers
 * 5's rope_parameters or at the top, and a yarn rope scaling (either name). */
static void rope_facts(tpc_model_facts *f, const tpc_cfg *c)
{
	f->norm_eps = num(c, "rms_norm_eps");
	if (!f->norm_eps) /* LayerNorm models: GPT-NeoX and BERT, GPT-2 */
		f->norm_eps = num(c, "layer_norm_eps");
	if (!f->norm_eps)
		f->norm_eps = num(c, "layer_norm_epsilon");
	/* rotary_emb_base: GPT-NeoX's name before transformers 5 */
	f->rope_theta = rope(c, "rope_theta", "rope_theta|rotary_emb_base");
	f->max_pos = count(c, "max_position_embeddings");
	layer_rope(f, c);
	/* GPT-NeoX's partial rope: rotary_pct, or transformers 5's partial_rotary_factor (in the
	 * rope object, or at the top as Phi-4-mini says it) */
	f->rotary_pct = rope(c, "partial_rotary_factor", "partial_rotary_factor|rotary_pct");
	f->parallel_residual = flag(c, "use_parallel_residual");
	f->rope_interleave = flag(c, "rope_interleave");
	const char *ty = tpc_cfg_rope_type(c, T);
	if (ty && !strcmp(ty, "llama3")) {
		f->llama3 = (tpc_rope_llama3){rope(c, "factor", NULL), rope(c, "low_freq_factor", NULL),
					      rope(c, "high_freq_factor", NULL),
					      (int64_t)rope(c, "original_max_position_embeddings", NULL)};
		f->llama3_bad = !f->llama3.factor || !f->llama3.low_freq_factor || !f->llama3.high_freq_factor ||
				f->llama3.orig_max < 1;
		return;
	}
	if (ty && (!strcmp(ty, "longrope") || !strcmp(ty, "su") || !strcmp(ty, "yarn")))
		longrope_facts(&f->longrope, c, ty);
	if (ty && !strcmp(ty, "longrope"))
		return;
	if (!ty || strcmp(ty, "yarn"))
		return;
	f->yarn = (tpc_yarn){rope(c, "factor", NULL), rope(c, "mscale", NULL), rope(c, "mscale_all_dim", NULL),
			     rope(c, "attention_factor", NULL), rope(c, "beta_fast", NULL), rope(c, "beta_slow", NULL),
			     (int64_t)rope(c, "original_max_position_embeddings", NULL), 0};
	const cJSON *tr = cJSON_GetObjectItemCaseSensitive(tpc_cfg_rope(c, T), "truncate");
	if (cJSON_IsBool(tr))
		f->yarn.truncate = cJSON_IsTrue(tr) ? 1 : -1;
}

/* the rest of the experts' routing: its flags, scale and methods */
static void moe_facts(tpc_model_facts *f, const tpc_cfg *c)
{
	f->norm_topk = flag(c, "norm_topk_prob");
	double rs = 0;
	tpc_cfg_num(c, T, "routed_scaling_factor", L, &rs, NULL);
	if (rs > 0 && rs < 1e6)
		f->routed_scale = rs;
	double rj = -1;
	tpc_cfg_num(c, T, "router_jitter_noise", L, &rj, NULL);
	if (rj >= 0 && rj < 1e6) {
		f->router_jitter = rj;
		f->router_jitter_said = true;
	}
	const char *sf = str(c, "scoring_func");
	if (sf)
		f->scoring = !strcmp(sf, "softmax")   ? TPC_MOE_SOFTMAX
			     : !strcmp(sf, "sigmoid") ? TPC_MOE_SIGMOID
						      : TPC_MOE_SCORE_UNKNOWN;
	const char *tm = str(c, "topk_method");
	if (tm)
		f->topk_method = !strcmp(tm, "greedy")		     ? TPC_MOE_GREEDY
				 : !strcmp(tm, "group_limited_greedy") ? TPC_MOE_GROUP_LIMITED
				 : !strcmp(tm, "noaux_tc")	     ? TPC_MOE_NOAUX_TC
								     : TPC_MOE_TOPK_UNKNOWN;
}

static void facts_from_cfg(tpc_model_facts *f, const tpc_cfg *c)
{
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		*(int64_t *)((char *)f + counts[i].off) = count(c, counts[i].names);
	if (!f->kv_heads && flag(c, "multi_query") > 0)
		f->kv_heads = 1;
	if (!f->vocab) /* a padded size is not the vocabulary (Megatron's _vocab_size_with_padding) */
		f->padded_vocab = count(c, "padded_vocab_size");
	moe_facts(f, c);
	rope_facts(f, c);
	attn_facts(f, c);
	ssm_facts(f, c);
	rope_off_facts(f, c);
	tpc_qs_from_json(&f->quant, tpc_cfg_get(c, T, "quantization_config", NULL));
	/* diffusers: the feed-forward activation, by name or by model class */
	const char *a = str(c, "activation_fn"), *cls = str(c, "_class_name");
	if (a)
		f->ff_act = tpc_ff_act_parse(a);
	else if (cls && (!strcmp(cls, "SD3Transformer2DModel") || !strcmp(cls, "FluxTransformer2DModel")))
		f->ff_act = TPC_FF_GELU_TANH; /* their blocks build FeedForward(activation_fn="gelu-approximate") */
	/* diffusers names no hidden size: heads x head dim */
	if (!f->hidden && f->heads && f->head_dim && tpc_cfg_get(c, T, "attention_head_dim", NULL) &&
	    f->heads <= INT64_MAX / f->head_dim)
		f->hidden = f->heads * f->head_dim;
}

int tpc_facts_from_cfg(tpc_model_facts *f, const tpc_cfg *c, tpc_err *e)
{
	(void)e;
	memset(f, 0, sizeof(*f));
	facts_from_cfg(f, c);
	char origin[TPC_FACT_ORIGIN_MAX];
	snprintf(origin, sizeof(origin), "'%s'", tpc_cfg_path(c));
	tpc_facts_label(f, origin);
	return 0;
}

int tpc_facts_from_buffer(tpc_model_facts *f, const char *text, size_t len, const char *path, tpc_err *e)
{
	tpc_cfg *c = NULL;
	memset(f, 0, sizeof(*f));
	int ret = tpc_cfg_from_buffer(&c, text, len, path ? path : "config", e);
	if (!ret)
		ret = tpc_facts_from_cfg(f, c, e);
	tpc_cfg_free(c);
	return ret;
}

int tpc_facts_from_file(tpc_model_facts *f, const char *path, tpc_err *e)
{
	tpc_cfg *c = NULL;
	memset(f, 0, sizeof(*f));
	int ret = tpc_cfg_from_file(&c, path, e);
	if (!ret)
		ret = tpc_facts_from_cfg(f, c, e);
	tpc_cfg_free(c);
	return ret;
}

static const char *const ff_names[] = {NULL, "gelu", "gelu-approximate", "geglu", "geglu-approximate", "swiglu",
				       "other", "gated", "ungated"};

const char *tpc_ff_act_name(tpc_ff_act a)
{
	return (unsigned)a < sizeof(ff_names) / sizeof(ff_names[0]) ? ff_names[a] : NULL;
}

tpc_ff_act tpc_ff_act_parse(const char *name)
{
	if (!name)
		return TPC_FF_UNKNOWN;
	for (size_t i = 1; i < sizeof(ff_names) / sizeof(ff_names[0]); i++)
		if (!strcmp(name, ff_names[i]))
			return (tpc_ff_act)i;
	return TPC_FF_OTHER;
}

bool tpc_ff_act_gated(tpc_ff_act a)
{
	return a == TPC_FF_GEGLU || a == TPC_FF_GEGLU_TANH || a == TPC_FF_SWIGLU || a == TPC_FF_GATED;
}

/* The checked fact k of f (TPC_FACT_...). */
static int64_t *checked(tpc_model_facts *f, int k)
{
	int64_t *const v[TPC_FACT_NCHECKED] = {&f->heads, &f->kv_heads, &f->head_dim, &f->hidden, &f->vocab, &f->experts};
	return v[k];
}

static int64_t fact_value(const tpc_model_facts *f, int k)
{
	const int64_t v[TPC_FACT_NCHECKED] = {f->heads, f->kv_heads, f->head_dim, f->hidden, f->vocab, f->experts};
	return v[k];
}

const char *tpc_fact_name(int k)
{
	static const char *const n[TPC_FACT_NCHECKED] = {"heads", "kv_heads", "head_dim", "hidden", "vocab", "experts"};
	return k >= 0 && k < TPC_FACT_NCHECKED ? n[k] : "?";
}

void tpc_facts_label(tpc_model_facts *f, const char *origin)
{
	for (int k = 0; k < TPC_FACT_NCHECKED; k++)
		if (fact_value(f, k) && !f->origin[k][0])
			snprintf(f->origin[k], sizeof(f->origin[k]), "%s", origin);
}

void tpc_facts_fill(tpc_model_facts *dst, const tpc_model_facts *src)
{
	for (int k = 0; k < TPC_FACT_NCHECKED; k++)
		if (!*checked(dst, k) && fact_value(src, k)) {
			*checked(dst, k) = fact_value(src, k);
			memcpy(dst->origin[k], src->origin[k], sizeof(dst->origin[k]));
		}
#define FILL(m) do { if (!dst->m) dst->m = src->m; } while (0)
	FILL(padded_vocab); FILL(layers); FILL(ff_act); FILL(norm_eps);
	/* mixture of experts: routing */
	FILL(experts_per_tok); FILL(norm_topk); FILL(scoring); FILL(topk_method);
	FILL(n_group); FILL(topk_group); FILL(first_dense); FILL(routed_scale);
	FILL(nextn);
	if (!dst->router_jitter_said) {
		dst->router_jitter = src->router_jitter;
		dst->router_jitter_said = src->router_jitter_said;
	}
	if (!dst->quant.method)
		dst->quant = src->quant;
	/* multi-head latent attention */
	FILL(q_lora_rank); FILL(kv_lora_rank); FILL(qk_nope_head_dim); FILL(qk_rope_head_dim); FILL(v_head_dim);
	/* linear attention */
	FILL(lin_k_heads); FILL(lin_v_heads); FILL(lin_k_dim); FILL(lin_v_dim);
	/* rotary embedding */
	FILL(rope_theta); FILL(rope_interleave); FILL(rotary_pct); FILL(rope_theta_local); FILL(rope_linear);
	FILL(rope_dynamic); FILL(rope_alpha); FILL(max_pos);
	if (!dst->rope_unknown[0])
		memcpy(dst->rope_unknown, src->rope_unknown, sizeof(dst->rope_unknown));
	if (!dst->yarn.factor)
		dst->yarn = src->yarn;
	if (!dst->longrope.on && !dst->longrope.alias)
		dst->longrope = src->longrope;
	if (!dst->llama3.factor && !dst->llama3_bad) {
		dst->llama3 = src->llama3;
		dst->llama3_bad = src->llama3_bad;
	}
	FILL(rope_off_every);
	if (!dst->n_rope_listed) {
		dst->n_rope_listed = src->n_rope_listed;
		memcpy(dst->rope_off, src->rope_off, sizeof(dst->rope_off));
	}
	/* attention, residual and logit scales */
	FILL(parallel_residual); FILL(attn_scalar); FILL(attn_softcap); FILL(final_softcap);
	FILL(embed_mul); FILL(resid_mul); FILL(attn_mul); FILL(logit_div); FILL(logit_mul); FILL(swiglu_limit);
	FILL(sliding_window); FILL(chunk_size); FILL(use_swa);
	if (!dst->max_window_said) {
		dst->max_window_layers = src->max_window_layers;
		dst->max_window_said = src->max_window_said;
	}
	FILL(use_qk_norm); FILL(temp_tuning); FILL(temp_floor);
	FILL(ssm_heads); FILL(ssm_head_dim); FILL(ssm_groups); FILL(ssm_state); FILL(ssm_conv); FILL(pos_rope_said);
	if (!dst->temp_scale_said) {
		dst->temp_scale = src->temp_scale;
		dst->temp_scale_said = src->temp_scale_said;
	}
	if (!dst->n_typed) {
		dst->n_typed = src->n_typed;
		memcpy(dst->swa_layers, src->swa_layers, sizeof(dst->swa_layers));
		memcpy(dst->chunk_layers, src->chunk_layers, sizeof(dst->chunk_layers));
		memcpy(dst->ssm_layers, src->ssm_layers, sizeof(dst->ssm_layers));
	}
#undef FILL
}

void tpc_facts_finish(tpc_model_facts *f)
{
	if (!f->head_dim && f->heads && f->hidden && f->hidden % f->heads == 0) {
		f->head_dim = f->hidden / f->heads;
		snprintf(f->origin[TPC_FACT_HEAD_DIM], sizeof(f->origin[0]), "hidden %lld / heads %lld, from %.80s",
			 (long long)f->hidden, (long long)f->heads,
			 f->origin[TPC_FACT_HIDDEN][0] ? f->origin[TPC_FACT_HIDDEN] : "?");
	}
}

void tpc_facts_from_megatron(tpc_model_facts *f, const tpc_megatron_args *a, const char *origin)
{
	tpc_model_facts m;
	memset(&m, 0, sizeof(m));
	m.heads = a->heads;
	m.kv_heads = a->query_groups;
	m.head_dim = a->kv_channels;
	m.hidden = a->hidden;
	m.vocab = a->vocab;
	if (!a->vocab)
		m.padded_vocab = a->padded_vocab;
	tpc_facts_label(&m, origin);
	tpc_facts_fill(f, &m);
}

/* ---- quantization_config ---- */

/* compressed-tensors: "format": "pack-quantized" and every config group's
 * "weights" the same integer scheme (num_bits 4 or 8, strategy group or
 * channel, actorder); anything else stays TPC_QS_OTHER (refused). */
static void packed_from_json(tpc_qs_cfg *q, const cJSON *qc)
{
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(qc, "format");
	const cJSON *groups = cJSON_GetObjectItemCaseSensitive(qc, "config_groups");
	if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "pack-quantized") || !cJSON_IsObject(groups) ||
	    !groups->child)
		return;
	int bits = 0;
	int64_t group = 0;
	bool act = false;
	for (const cJSON *g = groups->child; g; g = g->next) {
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(g, "weights");
		const cJSON *nb = cJSON_GetObjectItemCaseSensitive(w, "num_bits");
		const cJSON *ty = cJSON_GetObjectItemCaseSensitive(w, "type");
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(w, "strategy");
		const cJSON *gs = cJSON_GetObjectItemCaseSensitive(w, "group_size");
		const cJSON *ao = cJSON_GetObjectItemCaseSensitive(w, "actorder");
		if (!cJSON_IsObject(w) || !cJSON_IsNumber(nb) || (nb->valueint != 4 && nb->valueint != 8) ||
		    (ty && (!cJSON_IsString(ty) || strcmp(ty->valuestring, "int"))) || !cJSON_IsString(st))
			return;
		int64_t gv;
		if (!strcmp(st->valuestring, "group") && cJSON_IsNumber(gs) && gs->valuedouble >= 1 &&
		    gs->valuedouble <= (1 << 20))
			gv = (int64_t)gs->valuedouble;
		else if (!strcmp(st->valuestring, "channel"))
			gv = -1;
		else
			return;
		bool a = cJSON_IsString(ao) && !strcmp(ao->valuestring, "group");
		if ((bits && (bits != nb->valueint || group != gv || act != a)))
			return; /* groups that differ: not one scheme */
		bits = nb->valueint;
		group = gv;
		act = a;
	}
	q->method = TPC_QS_PACKED;
	q->bits = bits;
	q->group = group;
	q->desc_act = act;
}

void tpc_qs_from_json(tpc_qs_cfg *q, const cJSON *qc)
{
	memset(q, 0, sizeof(*q));
	if (!cJSON_IsObject(qc))
		return;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(qc, "quant_method");
	const cJSON *bits = cJSON_GetObjectItemCaseSensitive(qc, "bits");
	const cJSON *gs = cJSON_GetObjectItemCaseSensitive(qc, "group_size");
	const cJSON *da = cJSON_GetObjectItemCaseSensitive(qc, "desc_act");
	const cJSON *bs = cJSON_GetObjectItemCaseSensitive(qc, "weight_block_size");
	const char *name = cJSON_IsString(m) ? m->valuestring : "";
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->method = !strcmp(name, "gptq") ? TPC_QS_GPTQ
		    : !strcmp(name, "awq") ? TPC_QS_AWQ
		    : !strcmp(name, "fp8") ? TPC_QS_FP8
					    : TPC_QS_OTHER;
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(qc, "format");
	const cJSON *algo = cJSON_GetObjectItemCaseSensitive(qc, "quant_algo");
	if (!strcmp(name, "compressed-tensors") && cJSON_IsString(fmt) &&
	    (!strcmp(fmt->valuestring, "nvfp4-pack-quantized") || !strcmp(fmt->valuestring, "mxfp4-pack-quantized"))) {
		q->method = TPC_QS_FP4;
		q->group = fmt->valuestring[0] == 'n' ? 16 : 32;
		return;
	}
	if (!strcmp(name, "mxfp4")) { /* gpt-oss's own: transformers' integrations/mxfp4.py */
		q->method = TPC_QS_FP4;
		q->group = 32;
		q->mx_blocks = true;
		return;
	}
	if (!strcmp(name, "modelopt") && cJSON_IsString(algo) && !strcmp(algo->valuestring, "NVFP4")) {
		q->method = TPC_QS_FP4;
		q->group = 16;
		q->modelopt = true;
		return;
	}
	if (!strcmp(name, "compressed-tensors")) {
		packed_from_json(q, qc);
		return;
	}
	if (cJSON_IsNumber(bits) && (bits->valueint == 2 || bits->valueint == 4 || bits->valueint == 8))
		q->bits = bits->valueint; /* 3-bit packs across words: not split here */
	if (cJSON_IsNumber(gs) && (gs->valuedouble == -1 || (gs->valuedouble >= 1 && gs->valuedouble <= (1 << 20))))
		q->group = (int64_t)gs->valuedouble;
	q->desc_act = cJSON_IsTrue(da);
	if (cJSON_IsArray(bs) && cJSON_GetArraySize(bs) == 2) {
		for (int i = 0; i < 2; i++) {
			const cJSON *b = cJSON_GetArrayItem(bs, i);
			if (cJSON_IsNumber(b) && b->valuedouble >= 1 && b->valuedouble <= (1 << 20))
				q->block[i] = (int64_t)b->valuedouble;
		}
		if (!q->block[0] || !q->block[1])
			q->block[0] = q->block[1] = 0;
	}
}

