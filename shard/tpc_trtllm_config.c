/* tpc_trtllm_config.c - the config.json of a TensorRT-LLM checkpoint (the
 * trtllm layout, layout_trtllm_ckpt.c): written from the model's Hugging Face
 * config.json as TensorRT-LLM's converters write it, and read back.
 *
 * What convert_checkpoint.py writes is PretrainedConfig.to_dict()
 * (tensorrt_llm/models/modeling_utils.py): the constructor's fields, "mapping"
 * as Mapping.to_dict() less "rank" (tensorrt_llm/mapping.py), "quantization"
 * as QuantConfig.to_dict(). The values come from the family's
 * from_hugging_face:
 *   llama, mistral, mixtral   models/llama/config.py LLaMAConfig: head_size =
 *                             kv_channels, else head_dim, else hidden / heads;
 *                             norm_epsilon = rms_norm_eps; rotary_base =
 *                             rope_theta; rotary_scaling = rope_scaling;
 *                             attn_bias = bias or attention_bias;
 *                             position_embedding_type rope_gpt_neox; Mixtral:
 *                             hidden_act "swiglu", moe {num_experts =
 *                             num_local_experts, top_k = num_experts_per_tok,
 *                             normalization_mode RENORMALIZE (1)}
 *   qwen2                     models/qwen/config.py QWenConfig: qwen_type =
 *                             model_type, attn_bias true, seq_length (8192),
 *                             moe normalization_mode NONE (0)
 *   gpt2                      models/gpt/config.py GPTConfig: n_embd, n_head,
 *                             n_layer, n_positions, n_inner (else 4 x n_embd),
 *                             layer_norm_epsilon, activation_function,
 *                             learned_absolute positions, gpt_variant "gpt2"
 * Keys left out are the constructors' defaults (mapping's gpus_per_node,
 * cp_size, attn_tp_size ...; QuantConfig's group_size ...), which is what
 * from_dict makes of them on load. Numbers are copied as the model's config
 * spells them (an int stays an int, 1e-05 stays a float: json.load and dump
 * keep both as they were); a key TensorRT-LLM reads from the model's config
 * that it does not have is refused by name rather than guessed, except the
 * few with a plain default (num_key_value_heads, head_dim, rope_scaling,
 * attention_bias, tie_word_embeddings, n_inner, seq_length).
 *
 * dtype is the weights' own (tpconv does not cast): what convert_checkpoint.py
 * --dtype of that type writes. A resharded TensorRT-LLM set's config is kept
 * member for member with the new "mapping".
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_buf.h"
#include "tpc_cfg.h"
#include "tpc_family.h"
#include "tpc_io.h"
#include "tpc_layout.h"
#include "tpc_shard.h"
#include "tpc_util.h"

/* ---- top-level members of a JSON object, as spelled ---- */

static size_t skip_ws(const char *s, size_t i, size_t n)
{
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	return i;
}

/* End of the JSON value starting at i (the text is valid JSON: cJSON parsed it). */
static size_t skip_value(const char *s, size_t i, size_t n)
{
	int depth = 0;
	bool str = false;
	for (; i < n; i++) {
		char c = s[i];
		if (str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				str = false;
			if (!str && !depth)
				return i + 1;
			continue;
		}
		if (c == '"')
			str = true;
		else if (c == '{' || c == '[')
			depth++;
		else if (c == '}' || c == ']') {
			if (--depth <= 0)
				return depth < 0 ? i : i + 1;
		} else if (!depth && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'))
			return i;
	}
	return i;
}

/* Calls fn for each member of the top-level object: its key (between the
 * quotes, as spelled) and its value's text. */
typedef void (*member_fn)(void *ctx, const char *key, size_t kl, const char *val, size_t vl);
static void members(const char *s, size_t n, member_fn fn, void *ctx)
{
	size_t i = skip_ws(s, 0, n);
	if (i >= n || s[i] != '{')
		return;
	for (i++;;) {
		i = skip_ws(s, i, n);
		if (i >= n || s[i] != '"')
			return;
		size_t k0 = i + 1, k1 = skip_value(s, i, n) - 1;
		i = skip_ws(s, k1 + 1, n);
		if (i >= n || s[i] != ':')
			return;
		i = skip_ws(s, i + 1, n);
		size_t v0 = i, v1 = skip_value(s, i, n);
		fn(ctx, s + k0, k1 - k0, s + v0, v1 - v0);
		i = skip_ws(s, v1, n);
		if (i >= n || s[i] != ',')
			return;
		i++;
	}
}

typedef struct find_ctx {
	const char *key;
	const char *val;
	size_t vl;
} find_ctx;

static void find_fn(void *ctx, const char *key, size_t kl, const char *val, size_t vl)
{
	find_ctx *f = ctx;
	if (!f->val && strlen(f->key) == kl && !memcmp(f->key, key, kl)) {
		f->val = val;
		f->vl = vl;
	}
}

/* The text of member `key` of the source config, "a.b" a member of an
 * object member (transformers 5 keeps rope_theta in rope_parameters); NULL
 * when absent or null. */
static const char *raw(const tpc__trt_source *s, const char *key, size_t *vl)
{
	const char *text = s->text;
	size_t len = s->len;
	for (;;) {
		char part[64];
		const char *dot = strchr(key, '.');
		size_t n = dot ? (size_t)(dot - key) : strlen(key);
		if (n >= sizeof(part))
			return NULL;
		memcpy(part, key, n);
		part[n] = '\0';
		find_ctx f = {part, NULL, 0};
		members(text, len, find_fn, &f);
		if (!f.val || (f.vl == 4 && !memcmp(f.val, "null", 4)))
			return NULL;
		if (!dot) {
			*vl = f.vl;
			return f.val;
		}
		text = f.val;
		len = f.vl;
		key = dot + 1;
	}
}

/* ---- the source: the model's config.json, or a TensorRT-LLM set's ---- */

void tpc__trt_source_release(tpc__trt_source *s)
{
	tpc_cfg_free(s->cfg);
	free(s->text);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

static char *candidate(const char *dir)
{
	char *p = dir && tpc_is_dir(dir) ? tpc_path_join(dir, "config.json") : NULL;
	if (p && !tpc_exists(p)) {
		free(p);
		p = NULL;
	}
	return p;
}

int tpc__trt_source_open(const tpc_shard_plan *sp, const tpc_shard_opts *o, tpc__trt_source *s, tpc_err *e)
{
	int ret;
	memset(s, 0, sizeof(*s));
	if (o->config_file && tpc_exists(o->config_file))
		s->path = tpc_strdup(o->config_file);
	if (!s->path)
		s->path = candidate(o->config_dir);
	if (!s->path)
		s->path = candidate(sp->in->path); /* a set resharded: its own config.json */
	if (!s->path)
		return tpc_err_set(e, TPC_EINPUT,
				   "the trtllm layout writes TensorRT-LLM's config.json from the model's Hugging Face config.json, and there is none: give --config or shard the model's folder");
	if ((ret = tpc_read_file(s->path, 64u << 20, &s->text, &s->len, e)))
		return ret;
	tpc_err scratch;
	tpc_err_init(&scratch);
	if (tpc_cfg_from_buffer(&s->cfg, s->text, s->len, s->path, &scratch))
		return tpc_err_at(e, TPC_EINPUT, s->path, NULL, "config.json is not a JSON object");
	/* the top level throughout: raw() copies top-level members as spelled,
	 * TensorRT-LLM's from_hugging_face reads the families it takes there,
	 * and a TensorRT-LLM config has no text_config */
	s->root = tpc_cfg_root(s->cfg);
	const cJSON *a = tpc_cfg_get(s->cfg, TPC_CFG_TOP, "architectures", NULL);
	const cJSON *t = tpc_cfg_get(s->cfg, TPC_CFG_TOP, "architecture", NULL);
	s->trt = cJSON_IsString(t) && cJSON_IsObject(tpc_cfg_get(s->cfg, TPC_CFG_TOP, "mapping", NULL));
	a = s->trt ? t : cJSON_GetArrayItem(a, 0);
	if (cJSON_IsString(a))
		snprintf(s->arch, sizeof(s->arch), "%s", a->valuestring);
	s->fam = s->trt ? tpc_family_by_trtllm_arch(s->arch) : tpc_family_by_arch(s->arch);
	s->tied = cJSON_IsTrue(tpc_cfg_get(s->cfg, TPC_CFG_TOP, "tie_word_embeddings", NULL));
	return 0;
}

/* ---- writing ---- */

/* How one TensorRT-LLM key is made from the model's config. */
typedef enum kind {
	K_COPY,     /* the first of hf[] the config has, as spelled; else dflt (NULL: refused) */
	K_CONST,    /* dflt, whatever the config says */
	K_OR,       /* true when any of hf[] is true (attn_bias = bias or attention_bias) */
	K_HEAD,     /* kv_channels, head_dim, else hidden / heads (also rotary_embedding_dim) */
	K_INNER,    /* n_inner, else 4 x n_embd (GPT-2) */
	K_VARIANT,  /* the record's qwen_type or gpt_variant, a JSON string */
	K_ROPE,     /* rope_scaling, else a rope_parameters whose rope_type is not
		     * "default" (transformers 5's config.rope_scaling, which
		     * from_hugging_face reads, is that object), else null */
} kind;

typedef struct ckey {
	const char *trt;
	kind k;
	const char *hf[3];
	const char *dflt;
} ckey;

/* The members every family writes first; the hidden-size, head and layer
 * names differ between the LLaMA and GPT-2 configs. */
#define LLAMA_SIZES \
	{"vocab_size", K_COPY, {"vocab_size"}, NULL}, {"hidden_size", K_COPY, {"hidden_size"}, NULL}, \
	{"num_hidden_layers", K_COPY, {"num_hidden_layers"}, NULL}, \
	{"num_attention_heads", K_COPY, {"num_attention_heads"}, NULL}, \
	{"num_key_value_heads", K_COPY, {"num_key_value_heads", "num_attention_heads"}, NULL}, \
	{"intermediate_size", K_COPY, {"intermediate_size"}, NULL}, \
	{"max_position_embeddings", K_COPY, {"max_position_embeddings"}, NULL}, \
	{"norm_epsilon", K_COPY, {"rms_norm_eps"}, NULL}, {"head_size", K_HEAD, {NULL}, NULL}, \
	{"rotary_embedding_dim", K_HEAD, {NULL}, NULL}, \
	{"position_embedding_type", K_CONST, {NULL}, "\"rope_gpt_neox\""}, \
	{"rotary_base", K_COPY, {"rope_theta", "rope_parameters.rope_theta"}, NULL}, \
	{"rotary_scaling", K_ROPE, {NULL}, "null"}, \
	{"mlp_bias", K_CONST, {NULL}, "false"}, \
	{"tie_word_embeddings", K_COPY, {"tie_word_embeddings"}, "false"}

/* models/llama/config.py LLaMAConfig.from_hugging_face and to_dict */
static const ckey llama_keys[] = {
	LLAMA_SIZES,
	{"hidden_act", K_COPY, {"hidden_act"}, NULL},
	{"attn_bias", K_OR, {"bias", "attention_bias"}, "false"},
	{"residual_mlp", K_CONST, {NULL}, "false"},
	{"moe", K_CONST, {NULL}, "{\"num_experts\": 0, \"top_k\": 0, \"normalization_mode\": null}"},
	{NULL, K_CONST, {NULL}, NULL},
};

/* Mixtral through the same class: swiglu made explicit, the MoE config. */
static const ckey mixtral_keys[] = {
	LLAMA_SIZES,
	{"hidden_act", K_CONST, {NULL}, "\"swiglu\""},
	{"attn_bias", K_OR, {"bias", "attention_bias"}, "false"},
	{"residual_mlp", K_CONST, {NULL}, "false"},
	{NULL, K_CONST, {NULL}, NULL},
};

/* models/qwen/config.py QWenConfig.from_hugging_face and to_dict (qwen2) */
static const ckey qwen2_keys[] = {
	LLAMA_SIZES,
	{"hidden_act", K_COPY, {"hidden_act"}, "\"silu\""},
	{"attn_bias", K_CONST, {NULL}, "true"},
	{"qwen_type", K_VARIANT, {NULL}, NULL},
	{"seq_length", K_COPY, {"seq_length"}, "8192"},
	{"use_logn_attn", K_COPY, {"use_logn_attn"}, "false"},
	{"moe_intermediate_size", K_COPY, {"moe_intermediate_size"}, "0"},
	{"moe_shared_expert_intermediate_size", K_COPY, {"shared_expert_intermediate_size"}, "0"},
	{"num_labels", K_CONST, {NULL}, "1"},
	{"moe", K_CONST, {NULL}, "{\"num_experts\": 0, \"top_k\": 0, \"normalization_mode\": 0}"},
	{NULL, K_CONST, {NULL}, NULL},
};

/* models/gpt/config.py GPTConfig.from_hugging_face and to_dict (gpt2) */
static const ckey gpt2_keys[] = {
	{"vocab_size", K_COPY, {"vocab_size"}, NULL},
	{"hidden_size", K_COPY, {"n_embd", "hidden_size"}, NULL},
	{"num_hidden_layers", K_COPY, {"n_layer", "num_hidden_layers"}, NULL},
	{"num_attention_heads", K_COPY, {"n_head", "num_attention_heads"}, NULL},
	{"num_key_value_heads", K_COPY, {"n_head", "num_attention_heads"}, NULL},
	{"intermediate_size", K_INNER, {NULL}, NULL},
	{"max_position_embeddings", K_COPY, {"n_positions", "max_position_embeddings"}, NULL},
	{"norm_epsilon", K_COPY, {"layer_norm_epsilon"}, NULL},
	{"hidden_act", K_COPY, {"activation_function"}, NULL},
	{"head_size", K_HEAD, {NULL}, NULL},
	{"rotary_embedding_dim", K_HEAD, {NULL}, NULL},
	{"position_embedding_type", K_CONST, {NULL}, "\"learned_absolute\""},
	{"gpt_variant", K_VARIANT, {NULL}, NULL},
	{"bias", K_CONST, {NULL}, "true"},
	{"q_scaling", K_CONST, {NULL}, "1"},
	{"embedding_scale", K_CONST, {NULL}, "null"},
	{"apply_query_key_layer_scaling", K_CONST, {NULL}, "false"},
	{"rotary_pct", K_CONST, {NULL}, "1.0"},
	{"rotary_base", K_CONST, {NULL}, "10000.0"},
	{"rotary_scaling", K_CONST, {NULL}, "null"},
	{"inner_layernorm", K_CONST, {NULL}, "false"},
	{"norm_before_bmm1", K_CONST, {NULL}, "false"},
	{NULL, K_CONST, {NULL}, NULL},
};

/* The config class the family's record names (tpc_family_trtllm). */
static const ckey *keys_of(const tpc_family *f)
{
	if (f->trtllm.gpt_variant)
		return gpt2_keys;
	if (f->trtllm.qwen_type)
		return qwen2_keys;
	if (tpc_family_has_experts(f))
		return mixtral_keys;
	return llama_keys;
}

static const char *dtype_name(tpc_dtype d)
{
	switch (d) {
	case TPC_F32: return "float32";
	case TPC_F16: return "float16";
	case TPC_BF16: return "bfloat16";
	default: return NULL;
	}
}

/* An integer member of the source (0 when absent or not an integer). */
static int64_t num(const tpc__trt_source *s, const char *key)
{
	const cJSON *v = tpc_cfg_get(s->cfg, TPC_CFG_TOP, key, NULL);
	return cJSON_IsNumber(v) && v->valuedouble == (double)(int64_t)v->valuedouble ? (int64_t)v->valuedouble : 0;
}

static int missing(const tpc__trt_source *s, const char *trt, const char *hf, tpc_err *e)
{
	return tpc_err_at(e, TPC_EINPUT, s->path, NULL, "the model's config.json has no %s, which TensorRT-LLM's %s comes from", hf, trt);
}

/* One member's value text into b. */
static int value_of(const tpc__trt_source *s, const ckey *k, tpc_buf *b, tpc_err *e)
{
	const char *v = NULL;
	size_t vl = 0;
	bool gpt = keys_of(s->fam) == gpt2_keys;
	switch (k->k) {
	case K_CONST:
		tpc_buf_adds(b, k->dflt);
		return 0;
	case K_VARIANT:
		v = s->fam->trtllm.qwen_type ? s->fam->trtllm.qwen_type : s->fam->trtllm.gpt_variant;
		tpc_buf_json_str(b, v ? v : "", v ? strlen(v) : 0, false);
		return 0;
	case K_OR: {
		bool any = false;
		for (int i = 0; i < 3 && k->hf[i]; i++)
			any = any || cJSON_IsTrue(tpc_cfg_get(s->cfg, TPC_CFG_TOP, k->hf[i], NULL));
		tpc_buf_adds(b, any ? "true" : "false");
		return 0;
	}
	case K_HEAD: {
		if ((v = raw(s, "kv_channels", &vl)) || (!gpt && (v = raw(s, "head_dim", &vl))))
			break;
		int64_t h = num(s, gpt ? "n_embd" : "hidden_size"), n = num(s, gpt ? "n_head" : "num_attention_heads");
		if (!h || !n || h % n)
			return missing(s, k->trt, gpt ? "n_embd / n_head" : "head_dim (or hidden_size / num_attention_heads)", e);
		tpc_buf_addf(b, "%lld", (long long)(h / n));
		return 0;
	}
	case K_INNER: {
		if ((v = raw(s, "n_inner", &vl)))
			break;
		int64_t h = num(s, "n_embd");
		if (!h)
			return missing(s, k->trt, "n_embd", e);
		tpc_buf_addf(b, "%lld", (long long)(4 * h));
		return 0;
	}
	case K_ROPE: {
		size_t tl = 0;
		const char *rt = raw(s, "rope_parameters.rope_type", &tl);
		if (!(v = raw(s, "rope_scaling", &vl)) && rt && !(tl == 9 && !memcmp(rt, "\"default\"", 9)))
			v = raw(s, "rope_parameters", &vl);
		if (!v || (vl == 4 && !memcmp(v, "null", 4))) {
			tpc_buf_adds(b, "null");
			return 0;
		}
		break;
	}
	case K_COPY:
		for (int i = 0; i < 3 && k->hf[i] && !v; i++)
			v = raw(s, k->hf[i], &vl);
		if (!v && !k->dflt)
			return missing(s, k->trt, k->hf[0], e);
		if (!v) {
			tpc_buf_adds(b, k->dflt);
			return 0;
		}
		break;
	}
	tpc_buf_add(b, v, vl);
	return 0;
}

static void mapping_into(tpc_buf *b, const tpc_shard_plan *sp)
{
	tpc_buf_addf(b, "{\"world_size\": %d, \"tp_size\": %d, \"pp_size\": %d, \"moe_tp_size\": %d, \"moe_ep_size\": %d}",
		     sp->tp * sp->pp, sp->tp, sp->pp, sp->tp / sp->ep, sp->ep);
}

/* A TensorRT-LLM config resharded: every member as it was, "mapping" new. */
typedef struct keep_ctx {
	tpc_buf *b;
	const tpc_shard_plan *sp;
	int n;
} keep_ctx;

static void keep_fn(void *ctx, const char *key, size_t kl, const char *val, size_t vl)
{
	keep_ctx *k = ctx;
	tpc_buf_adds(k->b, k->n++ ? ",\n    \"" : "{\n    \"");
	tpc_buf_add(k->b, key, kl);
	tpc_buf_adds(k->b, "\": ");
	if (kl == 7 && !memcmp(key, "mapping", 7))
		mapping_into(k->b, k->sp);
	else
		tpc_buf_add(k->b, val, vl);
}

/* ---- back to Hugging Face: the config a merge writes ---- */


/* member hf of the output from member trt of the set's config, as spelled */
static void back_member(tpc_buf *b, const tpc__trt_source *s, const char *hf, const char *trt)
{
	size_t vl;
	const char *v = raw(s, trt, &vl);
	char key[80];
	snprintf(key, sizeof(key), "\"%s\":", hf);
	if (!v || strchr(hf, '.') || (b->p && memmem(b->p, b->len, key, strlen(key))))
		return; /* a nested name, or one written already (GPT-2's n_head twice) */
	tpc_buf_addf(b, ",\n  %s ", key);
	tpc_buf_add(b, v, vl);
}

char *tpc__trt_hf_config(const char *dir, tpc_err *e)
{
	tpc__trt_source s;
	tpc_buf b = TPC_BUF_INIT;
	size_t al = 0;
	memset(&s, 0, sizeof(s));
	if (!(s.path = tpc_path_join(dir, "config.json")))
		return tpc_err_nomem(e), NULL;
	if (tpc_read_file(s.path, 64u << 20, &s.text, &s.len, e)) {
		tpc__trt_source_release(&s);
		return NULL;
	}
	/* TensorRT-LLM's architecture -> the family record (its own name for
	 * it, trtllm.arch, or the Hugging Face class GPTConfig.from_hugging_face
	 * keeps), then the Hugging Face class: the same one when the record
	 * lists it, else the record's first */
	const char *a = raw(&s, "architecture", &al);
	char arch[96];
	const tpc_family *f = NULL;
	if (a && al >= 2 && al - 2 < sizeof(arch) && a[0] == '"' && !memchr(a + 1, '\\', al - 2)) {
		memcpy(arch, a + 1, al - 2);
		arch[al - 2] = '\0';
		f = tpc_family_by_trtllm_arch(arch);
	}
	if (f && !(f->hf_arch && f->hf_arch[0] && tpc_family_lists(f->layouts, "trtllm")))
		f = NULL;
	if (!f) {
		tpc_err_at(e, TPC_EINPUT, s.path, NULL, "architecture %.*s: no Hugging Face config is rebuilt for it",
			   (int)(al < 60 ? al : 60), a ? a : "(none)");
		tpc__trt_source_release(&s);
		return NULL;
	}
	/* the record's name is transformers' model_type (as formats/gguf_hf.c takes it) */
	tpc_buf_addf(&b, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\"",
		     tpc_family_lists(f->hf_arch, arch) ? arch : f->hf_arch[0], f->name);
	back_member(&b, &s, "torch_dtype", "dtype");
	for (const ckey *k = keys_of(f); k->trt; k++) {
		if (k->k == K_COPY && k->hf[0])
			back_member(&b, &s, k->hf[0], k->trt);
		else if (k->k == K_OR && k->hf[1])
			back_member(&b, &s, k->hf[1], k->trt); /* attention_bias */
		else if (k->k == K_HEAD && !strcmp(k->trt, "head_size") && keys_of(f) != gpt2_keys)
			back_member(&b, &s, "head_dim", k->trt);
		else if (k->k == K_INNER)
			back_member(&b, &s, "n_inner", k->trt);
	}
	if (keys_of(f) == mixtral_keys) {
		tpc_buf_adds(&b, ",\n  \"hidden_act\": \"silu\"");
		back_member(&b, &s, "num_local_experts", "moe.num_experts");
		back_member(&b, &s, "num_experts_per_tok", "moe.top_k");
	}
	tpc_buf_adds(&b, "\n}\n");
	tpc__trt_source_release(&s);
	if (b.oom) {
		tpc_buf_release(&b);
		return tpc_err_nomem(e), NULL;
	}
	return tpc_buf_detach(&b, NULL);
}

int tpc__trt_config_render(const tpc_shard_plan *sp, const tpc__trt_source *s, tpc_dtype dtype, tpc_buf *b,
			   tpc_err *e)
{
	int ret = 0;
	const char *dt = dtype_name(dtype);
	if (s->trt) {
		keep_ctx k = {b, sp, 0};
		members(s->text, s->len, keep_fn, &k);
		tpc_buf_adds(b, "\n}\n");
		return b->oom ? tpc_err_nomem(e) : 0;
	}
	if (!dt)
		return tpc_err_set(e, TPC_EINPUT, "TensorRT-LLM checkpoints hold float32, float16 or bfloat16 weights, not %s",
				   tpc_dtype_name(dtype));
	tpc_buf_adds(b, "{\n    \"architecture\": ");
	tpc_buf_json_str(b, s->arch, strlen(s->arch), false);
	tpc_buf_addf(b, ",\n    \"dtype\": \"%s\",\n    \"logits_dtype\": \"float32\"", dt);
	for (const ckey *k = keys_of(s->fam); k->trt && !ret; k++) {
		tpc_buf_addf(b, ",\n    \"%s\": ", k->trt);
		ret = value_of(s, k, b, e);
	}
	if (ret)
		return ret;
	if (keys_of(s->fam) == mixtral_keys) {
		ckey n = {"moe.num_experts", K_COPY, {"num_local_experts"}, NULL};
		ckey t = {"moe.top_k", K_COPY, {"num_experts_per_tok"}, NULL};
		tpc_buf_adds(b, ",\n    \"moe\": {\"num_experts\": ");
		if (!(ret = value_of(s, &n, b, e))) {
			tpc_buf_adds(b, ", \"top_k\": ");
			ret = value_of(s, &t, b, e);
		}
		tpc_buf_adds(b, ", \"normalization_mode\": 1}");
	}
	tpc_buf_adds(b, ",\n    \"mapping\": ");
	mapping_into(b, sp);
	tpc_buf_adds(b, ",\n    \"quantization\": {\"quant_algo\": null, \"kv_cache_quant_algo\": null},\n"
			"    \"use_parallel_embedding\": false,\n    \"embedding_sharding_dim\": 0,\n"
			"    \"qk_layernorm\": false\n}\n");
	if (!ret && b->oom)
		ret = tpc_err_nomem(e);
	return ret;
}

/* ---- reading ---- */

static int64_t get_int(const cJSON *o, const char *key, int64_t dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsNumber(v))
		return dflt;
	return v->valuedouble >= 0 && v->valuedouble < 9.0e15 && v->valuedouble == (double)(int64_t)v->valuedouble
		       ? (int64_t)v->valuedouble
		       : -1;
}

/* o has member key, and it is not null. */
static bool given(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return v && !cJSON_IsNull(v);
}

static int bad_cfg(const char *path, tpc_err *e, const char *what)
{
	return tpc_err_at(e, TPC_EINPUT, path, NULL, "TensorRT-LLM config.json: %s", what);
}

int tpc__trt_model_read(const char *dir, tpc__trt_model *m, tpc_err *e)
{
	char *path = tpc_path_join(dir, "config.json"), *text = NULL;
	size_t len;
	tpc_cfg *cfg = NULL;
	const cJSON *root = NULL;
	int ret;
	tpc_err scratch;
	tpc_err_init(&scratch);
	memset(m, 0, sizeof(*m));
	if (!path)
		return tpc_err_nomem(e);
	if (!tpc_exists(path)) {
		ret = bad_cfg(path, e, "missing (it names the architecture, the head counts and the mapping)");
		goto out;
	}
	if ((ret = tpc_read_file(path, 64u << 20, &text, &len, e)))
		goto out;
	/* TensorRT-LLM's own config, its members at the top; one that is not
	 * a JSON object is refused below as naming no architecture */
	if (!tpc_cfg_from_buffer(&cfg, text, len, path, &scratch))
		root = tpc_cfg_root(cfg);
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "architecture");
	const cJSON *mp = cJSON_GetObjectItemCaseSensitive(root, "mapping");
	const cJSON *moe = cJSON_GetObjectItemCaseSensitive(root, "moe");
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "quantization");
	if (!cJSON_IsString(a) || !cJSON_IsObject(mp)) {
		ret = bad_cfg(path, e, "no \"architecture\" or \"mapping\" (not a TensorRT-LLM checkpoint's config)");
		goto out;
	}
	snprintf(m->arch, sizeof(m->arch), "%s", a->valuestring);
	m->fam = tpc_family_by_trtllm_arch(m->arch);
	if (!m->fam || !tpc_family_lists(m->fam->layouts, "trtllm")) {
		char arch[128];
		tpc_sanitize(arch, sizeof(arch), m->arch);
		tpc_err_at(e, TPC_EINPUT, path, NULL, "TensorRT-LLM architecture '%s' is not one tpconv reads back (it knows LLaMA, Mistral, Mixtral, Qwen2 and GPT-2 checkpoints)", arch);
		ret = TPC_EINPUT;
		goto out;
	}
	m->heads = get_int(root, "num_attention_heads", 0);
	m->kv_heads = get_int(root, "num_key_value_heads", m->heads);
	m->hidden = get_int(root, "hidden_size", 0);
	m->head_size = get_int(root, "head_size", m->heads > 0 ? m->hidden / m->heads : 0);
	m->layers = get_int(root, "num_hidden_layers", 0);
	m->vocab = get_int(root, "vocab_size", 0);
	m->experts = get_int(moe, "num_experts", 0);
	m->tp = (int)get_int(mp, "tp_size", 1);
	m->pp = (int)get_int(mp, "pp_size", 1);
	m->moe_ep = (int)get_int(mp, "moe_ep_size", -1);
	m->moe_tp = (int)get_int(mp, "moe_tp_size", -1);
	if (m->moe_ep <= 0 && m->moe_tp <= 0)
		m->moe_ep = 1; /* Mapping.__init__: neither given */
	if (m->moe_ep <= 0 && m->moe_tp > 0)
		m->moe_ep = m->tp / m->moe_tp;
	if (m->moe_tp <= 0)
		m->moe_tp = m->moe_ep > 0 ? m->tp / m->moe_ep : m->tp;
	m->parallel_embedding = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "use_parallel_embedding"));
	m->sharding_dim = (int)get_int(root, "embedding_sharding_dim", 0);
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(root, "dtype");
	m->dtype = !cJSON_IsString(dt) ? TPC_DT_INVALID
		   : !strcmp(dt->valuestring, "float32") ? TPC_F32
		   : !strcmp(dt->valuestring, "float16") ? TPC_F16
		   : !strcmp(dt->valuestring, "bfloat16") ? TPC_BF16 : TPC_DT_INVALID;
	if (m->heads <= 0 || m->kv_heads <= 0 || m->head_size <= 0 || m->hidden <= 0 || m->layers <= 0 ||
	    m->vocab <= 0 || m->experts < 0 || m->tp < 1 || m->tp > TPC_MAX_TP || m->pp < 1 || m->pp > TPC_MAX_TP ||
	    (int64_t)m->tp * m->pp > TPC_MAX_RANKS || m->moe_ep < 1 || m->moe_tp < 1 ||
	    (int64_t)m->moe_ep * m->moe_tp != m->tp || m->heads % m->kv_heads)
		ret = bad_cfg(path, e,
			      "num_attention_heads, num_key_value_heads, head_size, hidden_size, num_hidden_layers, vocab_size and mapping (tp_size x pp_size, moe_tp_size x moe_ep_size = tp_size) must be positive sizes that fit together");
	else if (given(q, "quant_algo") || given(q, "kv_cache_quant_algo"))
		ret = bad_cfg(path, e, "a quantized checkpoint (quantization.quant_algo or kv_cache_quant_algo set): its scales and packed weights are not read back");
	else if (m->dtype == TPC_DT_INVALID)
		ret = bad_cfg(path, e, "\"dtype\" must be float32, float16 or bfloat16");
	else if (m->parallel_embedding && m->sharding_dim != 0)
		ret = bad_cfg(path, e, "an embedding split on the hidden dimension (embedding_sharding_dim 1) is not read back");
	else if (m->experts && (m->experts % m->moe_ep))
		ret = bad_cfg(path, e, "moe.num_experts is no multiple of mapping.moe_ep_size");
out:
	tpc_cfg_free(cfg);
	free(text);
	free(path);
	return ret;
}
