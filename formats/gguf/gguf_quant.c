/* gguf_quant.c - llama-quantize's file types (--outtype q4_k_m ...): which
 * ggml type each tensor gets, the tensor order and the KVs, as llama.cpp's
 * src/llama-quant.cpp (llama_model_quantize_impl) writes them without an
 * importance matrix (tpc_gguf_mix_apply, gguf.h).
 *
 * The choice is llama_tensor_get_type: tensor_allows_quantization, then the
 * output / tied-embedding rule, then llama_tensor_get_type_impl's chains,
 * then tensor_type_fallback. The chains are the table `rules` below, read
 * top down, the first row that fits wins (as the if / else-if chains do);
 * every mixture-dependent fact is a row, none is code. The counters
 * (i_attention_wv, i_ffn_down) run in the output order, which is the model
 * loader's weights_map order (weight_name_comparer: layer number, then the
 * name). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "formats.h"
#include "gguf.h"
#include "tpc_util.h"

/* llama_ftype values (general.file_type) */
enum {
	FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q5_0 = 8, FT_Q5_1 = 9, FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12,
	FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_Q6_K = 18,
	FT_IQ4_NL = 25, FT_IQ4_XS = 30, FT_TQ1_0 = 36, FT_TQ2_0 = 37,
};

/* --outtype name -> file type and its default tensor type
 * (llama_ftype_get_default_type); q3_k / q4_k / q5_k are llama-quantize's
 * aliases of the _m mixtures */
static const tpc_gguf_mix mixes[] = {
	{"q4_0", FT_Q4_0, TPC_GGML_Q4_0},     {"q4_1", FT_Q4_1, TPC_GGML_Q4_1},
	{"q5_0", FT_Q5_0, TPC_GGML_Q5_0},     {"q5_1", FT_Q5_1, TPC_GGML_Q5_1},
	{"q2_k", FT_Q2_K, TPC_GGML_Q2_K},     {"q3_k_s", FT_Q3_K_S, TPC_GGML_Q3_K},
	{"q3_k_m", FT_Q3_K_M, TPC_GGML_Q3_K}, {"q3_k_l", FT_Q3_K_L, TPC_GGML_Q3_K},
	{"q4_k_s", FT_Q4_K_S, TPC_GGML_Q4_K}, {"q4_k_m", FT_Q4_K_M, TPC_GGML_Q4_K},
	{"q5_k_s", FT_Q5_K_S, TPC_GGML_Q5_K}, {"q5_k_m", FT_Q5_K_M, TPC_GGML_Q5_K},
	{"q6_k", FT_Q6_K, TPC_GGML_Q6_K},     {"q3_k", FT_Q3_K_M, TPC_GGML_Q3_K},
	{"q4_k", FT_Q4_K_M, TPC_GGML_Q4_K},   {"q5_k", FT_Q5_K_M, TPC_GGML_Q5_K},
	{"iq4_nl", FT_IQ4_NL, TPC_GGML_IQ4_NL}, {"iq4_xs", FT_IQ4_XS, TPC_GGML_IQ4_XS},
	{"tq1_0", FT_TQ1_0, TPC_GGML_TQ1_0},   {"tq2_0", FT_TQ2_0, TPC_GGML_TQ2_0},
};

const tpc_gguf_mix *tpc_gguf_mix_by_name(const char *name)
{
	for (size_t i = 0; name && i < sizeof(mixes) / sizeof(mixes[0]); i++)
		if (!strcasecmp(name, mixes[i].name))
			return &mixes[i];
	return NULL;
}

/* A GGUF input's --outtype q8_0 is llama-quantize's Q8_0 file type (the
 * reference for GGUF -> GGUF); a Hugging Face model's stays
 * convert_hf_to_gguf.py's q8_0 (gguf_write.c) */
static const tpc_gguf_mix requant[] = {{"q8_0", 7 /* LLAMA_FTYPE_MOSTLY_Q8_0 */, TPC_GGML_Q8_0}};

const tpc_gguf_mix *tpc_gguf_requant_by_name(const char *name)
{
	const tpc_gguf_mix *m = tpc_gguf_mix_by_name(name);
	for (size_t i = 0; !m && name && i < sizeof(requant) / sizeof(requant[0]); i++)
		if (!strcasecmp(name, requant[i].name))
			m = &requant[i];
	return m;
}

const char *tpc_gguf_outtypes(void)
{
	return "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k_s, q3_k_m (q3_k), q3_k_l, q4_k_s, "
	       "q4_k_m (q4_k), q5_k_s, q5_k_m (q5_k), q6_k, iq4_nl, iq4_xs, tq1_0, tq2_0 or auto";
}

const char *tpc_gguf_outtype_note(const char *name)
{
	static const char *const imatrix[] = {"q2_k_s", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m", "iq1_s", "iq1_m", "iq3_xxs"};
	static const char *const other[] = {"iq3_xs", "iq3_s", "iq3_m", "mxfp4_moe", "q1_0", "q2_0"};
	for (size_t i = 0; name && i < sizeof(imatrix) / sizeof(imatrix[0]); i++)
		if (!strcasecmp(name, imatrix[i]))
			return " (llama-quantize needs an importance matrix for it, which tpconv does not take)";
	for (size_t i = 0; name && i < sizeof(other) / sizeof(other[0]); i++)
		if (!strcasecmp(name, other[i]))
			return " (a llama-quantize type whose quantizer tpconv does not have)";
	return "";
}

/* tensor_get_category */
enum cat { C_OUTPUT, C_TOKEN_EMBD, C_ATTN_QKV, C_ATTN_KV_B, C_ATTN_V, C_ATTN_K, C_ATTN_Q, C_ATTN_OUT, C_FFN_UP,
	   C_FFN_GATE, C_FFN_DOWN, C_OTHER };

static enum cat category(const char *name)
{
	static const struct { const char *sub; enum cat c; } subs[] = {
		{"attn_qkv.weight", C_ATTN_QKV}, {"attn_kv_b.weight", C_ATTN_KV_B}, {"attn_v.weight", C_ATTN_V},
		{"attn_k.weight", C_ATTN_K},     {"attn_q.weight", C_ATTN_Q},       {"attn_output.weight", C_ATTN_OUT},
		{"ffn_up", C_FFN_UP},            {"ffn_gate", C_FFN_GATE},          {"ffn_down", C_FFN_DOWN},
	};
	if (!strcmp(name, "output.weight"))
		return C_OUTPUT;
	if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight"))
		return C_TOKEN_EMBD;
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (strstr(name, subs[i].sub))
			return subs[i].c;
	return C_OTHER;
}

static bool attn_v_like(enum cat c)
{
	return c == C_ATTN_V || c == C_ATTN_QKV || c == C_ATTN_KV_B;
}

/* ggml_n_dims: 1 + the last dimension of ne[] (innermost first) above 1 */
static int n_dims(const tpc_tensor *t)
{
	for (int i = t->ndim - 1; i >= 1; i--)
		if (t->shape[t->ndim - 1 - i] > 1)
			return i + 1;
	return 1;
}

/* tensor_allows_quantization (quantize_output_tensor on, not only_copy):
 * 2 or more dims, a name ending in "weight", none of these parts */
static bool allows(const char *name, int ndim)
{
	static const char *const never[] = {
		"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
		"per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
		"indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
		"time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
		"time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
		"time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
		"time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.",
		"sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
	};
	if (ndim < 2 || !tpc_ends_with(name, "weight"))
		return false;
	/* LLM_TN(arch)(POS_EMBD / TOKEN_TYPES, "weight") */
	if (!strcmp(name, "position_embd.weight") || !strcmp(name, "token_types.weight"))
		return false;
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		if (strstr(name, never[i]))
			return false;
	return true;
}

/* ---- llama_tensor_get_type_impl as data ---- */

/* A row's condition on the model and the tensor's place */
enum cond {
	ALWAYS,
	GQA4,      /* n_gqa() >= 4 */
	V_LT2,     /* i_attention_wv < 2 */
	V_LT4,     /* i_attention_wv < 4 */
	V_MORE,    /* use_more_bits(i_attention_wv, n_attention_wv) */
	L_LT8,     /* layer < n_layer / 8 */
	L_LT16,    /* layer < n_layer / 16 */
	L_MORE,    /* use_more_bits(layer, n_layer) */
	FALCON,    /* arch falcon */
	NOT_FALCON,
	FALCON_L_LT16,
	FALCON_L_MORE,
	NOT_FALCON_L_LT8,
};

#define M(f) (1ull << (f))
#define KMIX (M(FT_Q2_K) | M(FT_Q3_K_S) | M(FT_Q3_K_M) | M(FT_Q4_K_S) | M(FT_Q4_K_M))
#define IQ4 (M(FT_IQ4_NL) | M(FT_IQ4_XS))

/* Rows for the mixtures tpconv writes (file types in `ft`), in the order of
 * llama_tensor_get_type_impl's branches; `cat` C_OTHER: any attn_v-like */
static const struct rule {
	unsigned long long ft;
	enum cat cat;
	enum cond cond;
	int type;
} rules[] = {
	/* token_embd when output.weight is its own tensor */
	{M(FT_TQ1_0) | M(FT_TQ2_0), C_TOKEN_EMBD, ALWAYS, TPC_GGML_Q4_K},
	/* attn_v, attn_qkv, attn_kv_b */
	{M(FT_Q2_K), C_ATTN_V, GQA4, TPC_GGML_Q4_K},
	{M(FT_Q2_K), C_ATTN_V, ALWAYS, TPC_GGML_Q3_K},
	{M(FT_Q3_K_M), C_ATTN_V, V_LT2, TPC_GGML_Q5_K},
	{M(FT_Q3_K_M), C_ATTN_V, ALWAYS, TPC_GGML_Q4_K},
	{M(FT_Q3_K_L), C_ATTN_V, ALWAYS, TPC_GGML_Q5_K},
	{IQ4, C_ATTN_V, GQA4, TPC_GGML_Q5_K},
	{M(FT_Q4_K_M) | M(FT_Q5_K_M), C_ATTN_V, V_MORE, TPC_GGML_Q6_K},
	{M(FT_Q4_K_S), C_ATTN_V, V_LT4, TPC_GGML_Q5_K},
	/* ffn_down (ffn_down_exps, ffn_down_shexp) */
	{M(FT_Q2_K), C_FFN_DOWN, ALWAYS, TPC_GGML_Q3_K},
	{M(FT_Q3_K_M), C_FFN_DOWN, L_LT16, TPC_GGML_Q5_K},
	{M(FT_Q3_K_M), C_FFN_DOWN, NOT_FALCON, TPC_GGML_Q4_K},
	{M(FT_Q3_K_M), C_FFN_DOWN, L_MORE, TPC_GGML_Q4_K},
	{M(FT_Q3_K_M), C_FFN_DOWN, ALWAYS, TPC_GGML_Q3_K},
	{M(FT_Q3_K_L), C_FFN_DOWN, FALCON, TPC_GGML_Q4_K},
	{M(FT_Q3_K_L), C_FFN_DOWN, ALWAYS, TPC_GGML_Q5_K},
	{M(FT_Q4_K_M), C_FFN_DOWN, FALCON_L_LT16, TPC_GGML_Q6_K},
	{M(FT_Q4_K_M), C_FFN_DOWN, FALCON_L_MORE, TPC_GGML_Q5_K},
	{M(FT_Q4_K_M), C_FFN_DOWN, FALCON, TPC_GGML_Q4_K},
	{IQ4, C_FFN_DOWN, L_LT8, TPC_GGML_Q5_K}, /* no importance matrix */
	{M(FT_Q4_K_M) | M(FT_Q5_K_M), C_FFN_DOWN, L_MORE, TPC_GGML_Q6_K},
	{M(FT_Q4_K_S), C_FFN_DOWN, NOT_FALCON_L_LT8, TPC_GGML_Q5_K},
	/* attn_output (8 experts: the rows below the Falcon one are not read) */
	{M(FT_Q3_K_L), C_ATTN_OUT, FALCON, TPC_GGML_Q4_K},
	{M(FT_Q2_K), C_ATTN_OUT, NOT_FALCON, TPC_GGML_Q3_K},
	{M(FT_Q3_K_M), C_ATTN_OUT, NOT_FALCON, TPC_GGML_Q4_K},
	{M(FT_Q3_K_L), C_ATTN_OUT, NOT_FALCON, TPC_GGML_Q5_K},
};

/* What llama-quantize knows of a GGUF architecture (general.architecture)
 * beyond its keys: n_layer_70b, the layer count llama.cpp's
 * load_arch_hparams calls LLM_TYPE_70B (the only model type the mixtures
 * read: attn_v Q3_K / Q4_K -> Q5_K), gqa: only with fewer KV heads than
 * heads (LLaMA-2 70B, not 65B); falcon: llama_tensor_get_type_impl's
 * LLM_ARCH_FALCON rules. */
static const struct {
	const char *arch;
	int n_layer_70b;
	bool gqa, falcon;
} arch_rules[] = {
	{"llama", 80, true, false}, {"qwen2", 80, false, false}, {"deci", 80, false, false},
	{"jais2", 68, false, false}, {"falcon", 0, false, true},
};

typedef struct model {
	bool falcon, l70b;
	int n_expert, n_gqa, n_layer, n_attn_v, i_attn_v, i_ffn_down;
} model;

static bool more_bits(int i, int n)
{
	return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool holds(const model *m, enum cond c, int layer)
{
	int n = m->n_layer;
	switch (c) {
	case ALWAYS: return true;
	case GQA4: return m->n_gqa >= 4;
	case V_LT2: return m->i_attn_v < 2;
	case V_LT4: return m->i_attn_v < 4;
	case V_MORE: return more_bits(m->i_attn_v, m->n_attn_v);
	case L_LT8: return layer < n / 8;
	case L_LT16: return layer < n / 16;
	case L_MORE: return more_bits(layer, n);
	case FALCON: return m->falcon;
	case NOT_FALCON: return !m->falcon;
	case FALCON_L_LT16: return m->falcon && layer < n / 16;
	case FALCON_L_MORE: return m->falcon && more_bits(layer, n);
	case NOT_FALCON_L_LT8: return !m->falcon && layer < n / 8;
	}
	return false;
}

/* layer_info: the ffn_down counter, or with experts the name's layer */
static int layer_of(const model *m, const char *name, int counter, tpc_err *e)
{
	int l = counter;
	if (m->n_expert > 1) {
		if (sscanf(name, "blk.%d.", &l) != 1 || l < 0 || l >= m->n_layer)
			return tpc_err_at(e, TPC_EINPUT, NULL, name, "no layer number below %d in the name, which "
					  "llama-quantize's mixtures need for an expert model", m->n_layer);
	}
	return l;
}

/* llama_tensor_get_type_impl for the mixtures of `mixes` */
static int type_impl(model *m, const tpc_gguf_mix *mx, const char *name, enum cat c, tpc_err *e)
{
	int t = mx->base;
	unsigned long long ft = M(mx->ftype);
	int layer = 0;
	if (c == C_FFN_DOWN && (layer = layer_of(m, name, m->i_ffn_down, e)) < 0)
		return -1;
	enum cat rc = attn_v_like(c) ? C_ATTN_V : c;
	bool eight = m->n_expert == 8;
	if (rc == C_ATTN_OUT && eight && !m->falcon) {
		if (ft & (KMIX | IQ4))
			t = TPC_GGML_Q5_K;
		return t;
	}
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if (rules[i].cat == rc && (rules[i].ft & ft) && holds(m, rules[i].cond, layer)) {
			t = rules[i].type;
			break;
		}
	if (rc == C_ATTN_V) {
		if (m->l70b && (t == TPC_GGML_Q3_K || t == TPC_GGML_Q4_K))
			t = TPC_GGML_Q5_K;
		if (eight)
			t = TPC_GGML_Q8_0;
		m->i_attn_v++;
	} else if (c == C_ATTN_K && eight) {
		t = TPC_GGML_Q8_0;
	} else if (c == C_FFN_DOWN) {
		m->i_ffn_down++;
	}
	return t;
}

/* tensor_type_fallback */
static int fallback(int t, int64_t ne0)
{
	const tpc_ggml_info *in = tpc_ggml_info_of(t);
	if (!in || ne0 % in->block == 0)
		return t;
	switch (t) {
	case TPC_GGML_IQ4_XS: t = TPC_GGML_IQ4_NL; break;
	case TPC_GGML_Q2_K: case TPC_GGML_Q3_K: case TPC_GGML_TQ1_0: case TPC_GGML_TQ2_0: t = TPC_GGML_Q4_0; break;
	case TPC_GGML_Q4_K: t = TPC_GGML_Q5_0; break;
	case TPC_GGML_Q5_K: t = TPC_GGML_Q5_1; break;
	case TPC_GGML_Q6_K: t = TPC_GGML_Q8_0; break;
	/* a 32-block type (IQ4_NL, Q4_0 ... Q8_0, the output's Q8_0 too) on
	 * rows not a multiple of 32: llama.cpp 0.7 (Debian 0.7.0, upstream
	 * b11669) writes F16 ("must use F16 due to unusual shape"; the "odd"
	 * sums of tests/gguf/qmix_test.sh); later sources (src/llama-quant.cpp
	 * @007dbbf3, tensor_type_fallback's default) throw "no tensor type
	 * fallback is defined for type %s" instead */
	default: return TPC_GGML_F16;
	}
	return ne0 % 32 ? TPC_GGML_F16 : t;
}

/* ---- the model's numbers, from the KVs ---- */

static int64_t kv_num(const tpc_gguf_kvs *kv, const char *arch, const char *suffix, int64_t dflt)
{
	char key[192];
	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	ptrdiff_t i = tpc_gguf_kvs_find(kv, key);
	if (i < 0)
		return dflt;
	const tpc_gguf_kv *k = &kv->kv[i];
	int t = k->type;
	uint64_t u = k->v.u;
	if (t == TPC_GV_ARRAY) { /* per-layer: layer 0's */
		if (!k->n || !k->arr)
			return dflt;
		t = k->atype;
		const uint8_t *p = k->arr;
		switch (t) {
		case TPC_GV_U8: case TPC_GV_I8: u = p[0]; break;
		case TPC_GV_U16: case TPC_GV_I16: u = tpc_rd16le(p); break;
		case TPC_GV_U32: case TPC_GV_I32: u = tpc_rd32le(p); break;
		case TPC_GV_U64: case TPC_GV_I64: u = tpc_rd64le(p); break;
		default: return dflt;
		}
	}
	switch (t) {
	case TPC_GV_I8: return (int8_t)u;
	case TPC_GV_I16: return (int16_t)u;
	case TPC_GV_I32: return (int32_t)u;
	case TPC_GV_U8: case TPC_GV_U16: case TPC_GV_U32: case TPC_GV_U64: case TPC_GV_I64: return (int64_t)u;
	default: return dflt;
	}
}

/* weight_name_comparer: layer number ("blk.%d.", else -1), then strcmp */
static int layer_num(const char *s)
{
	int l = -1;
	if (sscanf(s, "blk.%d.", &l) != 1)
		l = -1;
	return l;
}

static int by_weights_map(const void *a, const void *b)
{
	const tpc_gguf_wtensor *x = a, *y = b;
	int la = layer_num(x->name), lb = layer_num(y->name);
	if (la != lb)
		return la < lb ? -1 : 1;
	return strcmp(x->name, y->name);
}

int tpc_gguf_mix_apply(const tpc_gguf_mix *mx, tpc_gguf_kvs *kv, tpc_gguf_wtensor *t, size_t n, tpc_err *e)
{
	ptrdiff_t ai = tpc_gguf_kvs_find(kv, "general.architecture");
	const char *arch = ai >= 0 && kv->kv[ai].type == TPC_GV_STRING ? kv->kv[ai].s : "";
	model m = {0};
	bool tied = true;
	m.n_expert = (int)kv_num(kv, arch, "expert_count", 0);
	m.n_layer = (int)kv_num(kv, arch, "block_count", 0);
	int64_t heads = kv_num(kv, arch, "attention.head_count", 0),
		kvh = kv_num(kv, arch, "attention.head_count_kv", heads);
	m.n_gqa = kvh > 0 ? (int)(heads / kvh) : 0;
	for (size_t i = 0; i < sizeof(arch_rules) / sizeof(arch_rules[0]); i++) {
		if (strcmp(arch, arch_rules[i].arch))
			continue;
		m.falcon = arch_rules[i].falcon;
		m.l70b = arch_rules[i].n_layer_70b > 0 && m.n_layer == arch_rules[i].n_layer_70b &&
			 (!arch_rules[i].gqa || heads != kvh);
	}
	qsort(t, n, sizeof(*t), by_weights_map);
	for (size_t i = 0; i < n; i++) {
		enum cat c = category(t[i].name);
		m.n_attn_v += attn_v_like(c);
		tied &= c != C_OUTPUT;
	}
	for (size_t i = 0; i < n; i++) {
		tpc_gguf_wtensor *w = &t[i];
		int64_t ne0 = w->t.ndim ? w->t.shape[w->t.ndim - 1] : 1;
		w->ndims = n_dims(&w->t);
		if (!allows(w->name, w->ndims))
			continue; /* its own type */
		enum cat c = category(w->name);
		int ty;
		if (c == C_OUTPUT || (tied && c == C_TOKEN_EMBD)) {
			/* the output rule: Q8_0 for Falcon, a row that is not whole
			 * blocks of the default type or a Q8_0 default, else Q6_K */
			const tpc_ggml_info *in = tpc_ggml_info_of(mx->base);
			ty = m.falcon || ne0 % in->block || mx->base == TPC_GGML_Q8_0 ? TPC_GGML_Q8_0 : TPC_GGML_Q6_K;
		} else if ((ty = type_impl(&m, mx, w->name, c, e)) < 0) {
			return -1;
		}
		w->type = fallback(ty, ne0);
	}
	/* the KVs: llama-quantize's gguf_set_val_u32 drops a key and appends it */
	tpc_gguf_kvs_del(kv, "general.quantization_version");
	tpc_gguf_kvs_del(kv, "general.file_type");
	tpc_gguf_kvs_del(kv, "split.no");
	tpc_gguf_kvs_del(kv, "split.count");
	tpc_gguf_kvs_del(kv, "split.tensors.count");
	if (tpc_gguf_kvs_uint(kv, "general.quantization_version", TPC_GV_U32, 2) ||
	    tpc_gguf_kvs_uint(kv, "general.file_type", TPC_GV_U32, (uint64_t)mx->ftype))
		return tpc_err_nomem(e);
	return 0;
}
