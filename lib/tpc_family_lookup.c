/* tpc_family_lookup.c - finding a family record (by name, architecture,
 * model_type, TensorRT-LLM architecture) and a tensor's row in one (name
 * templates matched and filled in, fused parts, stacked experts), and what a
 * record says of a checkpoint's tensors (kept in float32). The records
 * themselves are tpc_family.c; tpc_family.h says what a record holds. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_ckpt.h"
#include "tpc_family.h"
#include "tpc_family_gguf.h"
#include "tpc_util.h"

const tpc_family *tpc_family_find(const char *name)
{
	for (size_t i = 0; name && i < tpc_family_count(); i++)
		if (!strcmp(tpc_family_at(i)->name, name))
			return tpc_family_at(i);
	return NULL;
}

bool tpc_family_lists(const char *const *list, const char *s)
{
	for (size_t i = 0; list && s && list[i]; i++)
		if (!strcmp(list[i], s))
			return true;
	return false;
}

const tpc_family *tpc_family_by_arch(const char *arch)
{
	for (size_t i = 0; arch && i < tpc_family_count(); i++)
		if (tpc_family_lists(tpc_family_at(i)->hf_arch, arch))
			return tpc_family_at(i);
	return NULL;
}

const tpc_family *tpc_family_by_wrap(const char *arch)
{
	for (size_t i = 0; arch && i < tpc_family_count(); i++)
		if (tpc_family_lists(tpc_family_at(i)->hf_wrap, arch))
			return tpc_family_at(i);
	return NULL;
}

/* name with every "language_model." taken out, into buf; false if none */
static bool text_name(const char *name, char *buf, size_t n)
{
	static const char lm[] = "language_model.";
	const char *p = strstr(name, lm);
	size_t k = 0;
	if (!p)
		return false;
	for (const char *s = name; *s && k + 1 < n;) {
		if (!strncmp(s, lm, sizeof(lm) - 1)) {
			s += sizeof(lm) - 1;
			continue;
		}
		buf[k++] = *s++;
	}
	buf[k] = 0;
	return true;
}

/* a left-out tensor's group ("model.visual.*", "mtp.*") added to groups
 * when not there yet */
static void add_group(const char *name, char *groups, size_t n)
{
	char g[96];
	const char *dot = strchr(name, '.');
	if (dot && !strncmp(name, "model.", 6) && strchr(dot + 1, '.'))
		dot = strchr(dot + 1, '.');
	snprintf(g, sizeof(g), "%.*s.*", dot ? (int)(dot - name) : (int)strlen(name), name);
	size_t gl = strlen(g), have = strlen(groups);
	for (const char *p = groups; (p = strstr(p, g)) != NULL; p += gl)
		if ((p == groups || p[-1] == ' ') && (p[gl] == ',' || !p[gl]))
			return;
	snprintf(groups + have, n > have ? n - have : 0, "%s%s", have ? ", " : "", g);
}

int tpc_family_text_model(const tpc_family *f, tpc_ckpt *ck, size_t *nleft, char *groups, size_t n, tpc_err *e)
{
	bool *keep = tpc_calloc(ck->n ? ck->n : 1, sizeof(*keep));
	int ret = keep ? 0 : tpc_err_nomem(e);
	*nleft = 0;
	if (n)
		groups[0] = 0;
	for (size_t i = 0; !ret && i < ck->n; i++) {
		char nm[512];
		int64_t l, x;
		bool b;
		if (text_name(ck->t[i].name, nm, sizeof(nm))) {
			keep[i] = true;
			if (tpc_ckpt_find(ck, nm) >= 0)
				ret = tpc_err_at(e, TPC_EINPUT, ck->path, ck->t[i].name,
						 "its text model's name '%s' is another tensor's too", nm);
			else
				ret = tpc_ckpt_rename(ck, (int64_t)i, nm, e);
		} else if (!(keep[i] = tpc_family_classify(f, TPC_ECO_HF, ck->t[i].name, &l, &x, &b) != NULL ||
			     (f->mtp && !strncmp(ck->t[i].name, f->mtp->prefix, strlen(f->mtp->prefix))))) {
			(*nleft)++;
			add_group(ck->t[i].name, groups, n);
		}
	}
	if (!ret && *nleft)
		ret = tpc_ckpt_filter(ck, keep, e);
	free(keep);
	return ret;
}

/* the records' decoder layers (HF_L) */
static const char mtp_decoder[] = "model.layers.";

/* the digits of a layer number at p (1-9 of them, no leading zero but "0"),
 * then a dot: its value, *end past the dot; -1 when not one */
static int64_t layer_at(const char *p, const char **end)
{
	int64_t v = 0;
	const char *q = p;
	while (*q >= '0' && *q <= '9' && q - p < 9)
		v = v * 10 + (*q++ - '0');
	if (q == p || *q != '.' || (*p == '0' && q - p > 1))
		return -1;
	*end = q + 1;
	return v;
}

bool tpc_family_mtp_as_layer(const tpc_family *f, const char *name, int64_t layers, char *buf, size_t n)
{
	const tpc_family_mtp *m = f ? f->mtp : NULL;
	const char *rest;
	int k;
	if (!m || layers < 0 || !n)
		return false;
	size_t pl = strlen(m->layers);
	if (!strncmp(name, m->layers, pl)) {
		int64_t v = layer_at(name + pl, &rest);
		if (v < 0)
			return false;
		k = snprintf(buf, n, "%s%lld.%s", mtp_decoder, (long long)(layers + v), rest);
		return k > 0 && (size_t)k < n;
	}
	for (int i = 0; i < 4 && m->names[i][0]; i++)
		if (!strcmp(name, m->names[i][0])) {
			k = snprintf(buf, n, "%s%lld.%s", mtp_decoder, (long long)layers, m->names[i][1]);
			return k > 0 && (size_t)k < n;
		}
	return false;
}

bool tpc_family_mtp_name(const tpc_family *f, const char *name, int64_t layers, char *buf, size_t n)
{
	const tpc_family_mtp *m = f ? f->mtp : NULL;
	const char *rest;
	int k;
	if (!m || layers < 0 || !n || strncmp(name, mtp_decoder, sizeof(mtp_decoder) - 1))
		return false;
	int64_t v = layer_at(name + sizeof(mtp_decoder) - 1, &rest);
	if (v < layers)
		return false;
	for (int i = 0; v == layers && i < 4 && m->names[i][0]; i++)
		if (!strcmp(rest, m->names[i][1])) {
			k = snprintf(buf, n, "%s", m->names[i][0]);
			return k > 0 && (size_t)k < n;
		}
	k = snprintf(buf, n, "%s%lld.%s", m->layers, (long long)(v - layers), rest);
	return k > 0 && (size_t)k < n;
}

int64_t tpc_family_mtp_count(const tpc_family *f, const tpc_ckpt *ck)
{
	const tpc_family_mtp *m = f ? f->mtp : NULL;
	int64_t most = 0;
	const char *rest;
	for (size_t i = 0; m && i < ck->n; i++)
		if (!strncmp(ck->t[i].name, m->layers, strlen(m->layers))) {
			int64_t v = layer_at(ck->t[i].name + strlen(m->layers), &rest);
			if (v >= most)
				most = v + 1;
		}
	return most;
}

const tpc_family *tpc_family_by_trtllm_arch(const char *arch)
{
	for (size_t i = 0; arch && i < tpc_family_count(); i++)
		if (tpc_family_lists(tpc_family_at(i)->trtllm.arch, arch))
			return tpc_family_at(i);
	return tpc_family_by_arch(arch);
}

/* The stem of an architecture name, lowercase, without '_' (as the
 * model_type it is compared with): "Qwen2MoeForCausalLM" -> "qwen2moe",
 * "GPT2LMHeadModel" -> "gpt2", "BertModel" -> "bert", "Ernie4_5ForCausalLM"
 * -> "ernie45". */
static void arch_stem(const char *arch, char *out, size_t n)
{
	static const char *const ends[] = {"For", "LMHeadModel", "Model"};
	size_t len = strlen(arch), k = 0;
	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
		const char *p = strstr(arch, ends[i]);
		if (p && p > arch && (size_t)(p - arch) < len)
			len = (size_t)(p - arch);
	}
	for (size_t i = 0; i < len && k + 1 < n; i++)
		if (arch[i] != '_')
			out[k++] = (char)tolower((unsigned char)arch[i]);
	out[k] = 0;
}

const tpc_family *tpc_family_by_model_type(const char *model_type, const char **arch)
{
	char want[64], stem[64];
	size_t k = 0;
	for (const char *p = model_type; p && *p && k + 1 < sizeof(want); p++)
		if (*p != '_' && *p != '-')
			want[k++] = (char)tolower((unsigned char)*p);
	want[k] = 0;
	for (size_t i = 0; k && i < tpc_family_count(); i++)
		for (size_t j = 0; tpc_family_at(i)->hf_arch && tpc_family_at(i)->hf_arch[j]; j++) {
			arch_stem(tpc_family_at(i)->hf_arch[j], stem, sizeof(stem));
			if (!strcmp(stem, want)) {
				if (arch)
					*arch = tpc_family_at(i)->hf_arch[j];
				return tpc_family_at(i);
			}
		}
	/* else a model_type a record's GGUF column names (Llama 4 text's
	 * llama4_text; after the stems, so that granitemoehybrid stays the record
	 * of that stem, not the one that reads its GGUF without experts) */
	for (size_t i = 0; model_type && i < tpc_family_count(); i++) {
		const tpc_family *f = tpc_family_at(i);
		if (f->gguf && f->gguf->model_type && f->hf_arch && !strcmp(f->gguf->model_type, model_type)) {
			if (arch)
				*arch = f->hf_arch[0];
			return f;
		}
	}
	return NULL;
}

/* A plan's text after its "name" member: two presets of one plan. */
static const char *plan_body(const char *plan)
{
	const char *p = plan ? strstr(plan, "\"name\"") : NULL;
	p = p ? strstr(p + 6, "\",") : NULL;
	return p ? p + 2 : plan;
}

/* Whether verify computes the same layer from both records' parts (the
 * biases a model may carry and a tied head are the checkpoint's to say). */
static bool same_layer(const tpc_family *a, const tpc_family *b)
{
	const tpc_layer_parts *x = &a->parts, *y = &b->parts;
	return a->has_parts == b->has_parts && x->model == y->model && x->norm == y->norm &&
	       x->norm_offset == y->norm_offset && x->norm_eps == y->norm_eps && x->place == y->place && x->attn == y->attn &&
	       x->qk_norm == y->qk_norm && x->qk_after_rope == y->qk_after_rope && x->qkv == y->qkv && x->rope == y->rope && x->partial_rope == y->partial_rope &&
	       x->rope_fraction == y->rope_fraction && x->pos == y->pos && x->mlp == y->mlp && x->router == y->router &&
	       x->experts_per_tok == y->experts_per_tok && x->router_jitter == y->router_jitter && x->resid == y->resid &&
	       x->embed_scale == y->embed_scale && x->swa_every == y->swa_every && x->nope_global == y->nope_global &&
	       x->rope_off_every == y->rope_off_every && x->logit_scale == y->logit_scale &&
	       x->temp_floor == y->temp_floor && x->temp_scale == y->temp_scale && x->chunk_rope == y->chunk_rope &&
	       x->rope_if_said == y->rope_if_said && x->ssm == y->ssm && x->attn_gate == y->attn_gate &&
	       x->linear_attn == y->linear_attn && x->rope_orig_top == y->rope_orig_top &&
	       x->longrope_alias == y->longrope_alias;
}

bool tpc_family_fits(const tpc_family *f, const char *arch)
{
	if (!f || tpc_family_lists(f->hf_arch, arch))
		return f != NULL;
	const tpc_family *own = tpc_family_by_arch(arch);
	return own && own->plan && f->plan && !strcmp(plan_body(own->plan), plan_body(f->plan)) && same_layer(own, f);
}

const char *tpc_role_name(tpc_role r)
{
	static const char *const names[TPC_ROLE_COUNT] = {
		[TPC_ROLE_NONE] = "none",
		[TPC_ROLE_TOKEN_EMBD] = "token_embd",
		[TPC_ROLE_POS_EMBD] = "position_embd",
		[TPC_ROLE_OUTPUT_NORM] = "output_norm",
		[TPC_ROLE_OUTPUT] = "output",
		[TPC_ROLE_ATTN_NORM] = "attn_norm",
		[TPC_ROLE_ATTN_Q] = "attn_q",
		[TPC_ROLE_ATTN_K] = "attn_k",
		[TPC_ROLE_ATTN_V] = "attn_v",
		[TPC_ROLE_ATTN_QKV] = "attn_qkv",
		[TPC_ROLE_ATTN_OUT] = "attn_output",
		[TPC_ROLE_ATTN_Q_NORM] = "attn_q_norm",
		[TPC_ROLE_ATTN_K_NORM] = "attn_k_norm",
		[TPC_ROLE_FFN_NORM] = "ffn_norm",
		[TPC_ROLE_FFN_GATE] = "ffn_gate",
		[TPC_ROLE_FFN_UP] = "ffn_up",
		[TPC_ROLE_FFN_GATE_UP] = "ffn_gate_up",
		[TPC_ROLE_FFN_DOWN] = "ffn_down",
		[TPC_ROLE_FFN_GATE_INP] = "ffn_gate_inp",
		[TPC_ROLE_FFN_GATE_EXP] = "ffn_gate_exp",
		[TPC_ROLE_FFN_UP_EXP] = "ffn_up_exp",
		[TPC_ROLE_FFN_DOWN_EXP] = "ffn_down_exp",
		[TPC_ROLE_FFN_GATE_SHEXP] = "ffn_gate_shexp",
		[TPC_ROLE_FFN_UP_SHEXP] = "ffn_up_shexp",
		[TPC_ROLE_FFN_DOWN_SHEXP] = "ffn_down_shexp",
		[TPC_ROLE_FFN_GATE_INP_SHEXP] = "ffn_gate_inp_shexp",
		[TPC_ROLE_ATTN_POST_NORM] = "attn_post_norm",
		[TPC_ROLE_FFN_POST_NORM] = "ffn_post_norm",
		[TPC_ROLE_TOKEN_TYPES] = "token_types",
		[TPC_ROLE_TOKEN_EMBD_NORM] = "token_embd_norm",
		[TPC_ROLE_OUTPUT_DENSE] = "output_dense",
		[TPC_ROLE_OUTPUT_BIAS] = "output_bias",
		[TPC_ROLE_FFN_EXP_PROBS_B] = "exp_probs_b",
		[TPC_ROLE_ATTN_Q_A] = "attn_q_a",
		[TPC_ROLE_ATTN_Q_A_NORM] = "attn_q_a_norm",
		[TPC_ROLE_ATTN_Q_B] = "attn_q_b",
		[TPC_ROLE_ATTN_KV_A_MQA] = "attn_kv_a_mqa",
		[TPC_ROLE_ATTN_KV_A_NORM] = "attn_kv_a_norm",
		[TPC_ROLE_ATTN_KV_B] = "attn_kv_b",
		[TPC_ROLE_NEXTN_EH_PROJ] = "nextn_eh_proj",
		[TPC_ROLE_NEXTN_EMBD] = "nextn_embed_tokens",
		[TPC_ROLE_NEXTN_ENORM] = "nextn_enorm",
		[TPC_ROLE_NEXTN_HNORM] = "nextn_hnorm",
		[TPC_ROLE_NEXTN_HEAD] = "nextn_shared_head_head",
		[TPC_ROLE_NEXTN_HEAD_NORM] = "nextn_shared_head_norm",
		[TPC_ROLE_ATTN_SINKS] = "attn_sinks",
		[TPC_ROLE_SSM_IN] = "ssm_in",
		[TPC_ROLE_SSM_BA] = "ssm_ba",
		[TPC_ROLE_SSM_CONV1D] = "ssm_conv1d",
		[TPC_ROLE_SSM_DT] = "ssm_dt",
		[TPC_ROLE_SSM_A] = "ssm_a",
		[TPC_ROLE_SSM_D] = "ssm_d",
		[TPC_ROLE_SSM_NORM] = "ssm_norm",
		[TPC_ROLE_SSM_OUT] = "ssm_out",
		[TPC_ROLE_SSM_QKV] = "ssm_qkv",
		[TPC_ROLE_SSM_Z] = "ssm_z",
		[TPC_ROLE_SSM_BETA] = "ssm_beta",
		[TPC_ROLE_SSM_ALPHA] = "ssm_alpha",
	};
	return (unsigned)r < TPC_ROLE_COUNT ? names[r] : "?";
}

const char *tpc_eco_name(tpc_eco e)
{
	static const char *const names[TPC_ECO_COUNT] = {"hf", "megatron", "vllm", "trtllm", "gguf"};
	return (unsigned)e < TPC_ECO_COUNT ? names[e] : "?";
}

const tpc_tensor_row *tpc_family_row(const tpc_family *f, tpc_role r)
{
	for (const tpc_tensor_row *w = f ? f->tensors : NULL; w && w->role; w++)
		if (w->role == r)
			return w;
	return NULL;
}

/* "{L}" / "{E}" at p: which, else 0 */
static char placeholder(const char *p)
{
	return p[0] == '{' && (p[1] == 'L' || p[1] == 'E') && p[2] == '}' ? p[1] : 0;
}

/* Match `name` against pattern[0, plen): placeholders take 1-9 digits (no
 * leading zeros but "0"). */
static bool match_span(const char *pat, size_t plen, const char *name, size_t nlen, int64_t *layer,
		       int64_t *expert)
{
	size_t i = 0, j = 0;
	while (i < plen) {
		char ph = placeholder(pat + i);
		if (ph && i + 3 <= plen) {
			size_t k = j;
			int64_t v = 0;
			while (k < nlen && k - j < 9 && name[k] >= '0' && name[k] <= '9')
				v = v * 10 + (name[k++] - '0');
			if (k == j || (name[j] == '0' && k - j > 1))
				return false;
			*(ph == 'L' ? layer : expert) = v;
			j = k;
			i += 3;
			continue;
		}
		if (j >= nlen || pat[i] != name[j])
			return false;
		i++;
		j++;
	}
	return j == nlen;
}

bool tpc_family_match(const char *pattern, const char *name, bool weight_or_bias, int64_t *layer,
		      int64_t *expert, bool *bias)
{
	int64_t l = -1, x = -1;
	const char *hash = strchr(pattern, '#');
	size_t plen = hash ? (size_t)(hash - pattern) : strlen(pattern), nlen = strlen(name);
	bool b = false, ok = match_span(pattern, plen, name, nlen, &l, &x);
	bool w = plen >= 6 && !memcmp(pattern + plen - 6, "weight", 6);
	/* the bias: the pattern's final "weight" as "bias"; a pattern not
	 * ending in "weight", with "_bias" after it */
	if (!ok && weight_or_bias && w && nlen >= 4 && !memcmp(name + nlen - 4, "bias", 4)) {
		l = x = -1;
		ok = b = match_span(pattern, plen - 6, name, nlen - 4, &l, &x);
	} else if (!ok && weight_or_bias && !w && nlen >= 5 && !memcmp(name + nlen - 5, "_bias", 5)) {
		l = x = -1;
		ok = b = match_span(pattern, plen, name, nlen - 5, &l, &x);
	}
	if (ok) {
		if (layer)
			*layer = l;
		if (expert)
			*expert = x;
		if (bias)
			*bias = b;
	}
	return ok;
}

const tpc_tensor_row *tpc_family_classify(const tpc_family *f, tpc_eco eco, const char *name, int64_t *layer,
					  int64_t *expert, bool *bias)
{
	for (const tpc_tensor_row *w = f ? f->tensors : NULL; w && w->role; w++) {
		bool b;
		if (w->name[eco] && tpc_family_match(w->name[eco], name, w->bias, layer, expert, &b)) {
			if (bias)
				*bias = b;
			return w;
		}
	}
	return NULL;
}

bool tpc_family_name(const tpc_tensor_row *row, tpc_eco eco, int64_t layer, int64_t expert, bool bias,
		     char *buf, size_t n, int *part)
{
	const char *p = row ? row->name[eco] : NULL;
	if (part)
		*part = -1;
	if (!p || !n)
		return false;
	const char *hash = strchr(p, '#');
	size_t plen = hash ? (size_t)(hash - p) : strlen(p), k = 0;
	/* a bias: "weight" as "bias", or a name not ending in "weight" (of a
	 * row with a bias) + "_bias" */
	bool w = plen >= 6 && !memcmp(p + plen - 6, "weight", 6);
	if (bias && !w && !row->bias)
		return false;
	const char *bs = !bias ? "" : w ? "bias" : "_bias";
	size_t stem = bias && w ? plen - 6 : plen;
	for (size_t i = 0; i < stem;) {
		char ph = placeholder(p + i);
		char num[24];
		const char *s = p + i;
		size_t len = 1;
		if (ph) {
			int64_t v = ph == 'L' ? layer : expert;
			if (v < 0)
				return false;
			len = (size_t)snprintf(num, sizeof(num), "%lld", (long long)v);
			s = num;
			i += 3;
		} else {
			i++;
		}
		if (k + len >= n)
			return false;
		memcpy(buf + k, s, len);
		k += len;
	}
	if (k + strlen(bs) >= n)
		return false;
	memcpy(buf + k, bs, strlen(bs));
	k += strlen(bs);
	buf[k] = '\0';
	if (hash && part) /* a single digit: no fused tensor has ten parts */
		*part = hash[1] >= '0' && hash[1] <= '9' ? hash[1] - '0' : -1;
	return true;
}

bool tpc_family_named_in(const tpc_family *f, tpc_eco eco)
{
	if (!f || !f->tensors)
		return false;
	for (const tpc_tensor_row *w = f->tensors; w->role; w++)
		if (!w->name[eco])
			return false;
	return true;
}

static bool expert_role(tpc_role r)
{
	return r == TPC_ROLE_FFN_GATE_EXP || r == TPC_ROLE_FFN_UP_EXP || r == TPC_ROLE_FFN_DOWN_EXP;
}

bool tpc_family_stacked(const tpc_tensor_row *row, tpc_eco eco)
{
	const char *p = row && (unsigned)eco < TPC_ECO_COUNT ? row->name[eco] : NULL;
	return p && expert_role(row->role) && !strstr(p, "{E}");
}

int tpc_family_parts(const tpc_family *f, const tpc_tensor_row *row, tpc_eco eco, const tpc_tensor_row **out,
		     int n)
{
	const char *p = row && (unsigned)eco < TPC_ECO_COUNT ? row->name[eco] : NULL, *h = p ? strchr(p, '#') : NULL;
	int cnt = 0;
	if (!h)
		return 0;
	size_t stem = (size_t)(h - p) + 1;
	for (int k = 0; k < TPC_ROLE_COUNT; k++) { /* part k: exactly one row */
		const tpc_tensor_row *got = NULL;
		for (const tpc_tensor_row *w = f ? f->tensors : NULL; w && w->role; w++) {
			const char *q = w->name[eco];
			if (q && !strncmp(q, p, stem) && q[stem] >= '0' && q[stem] <= '9' && !q[stem + 1] && q[stem] - '0' == k) {
				if (got)
					return -1;
				got = w;
			}
		}
		if (!got)
			break;
		if (cnt >= n)
			return -1;
		out[cnt++] = got;
	}
	/* every row of the tensor is one of the parts counted */
	for (const tpc_tensor_row *w = f ? f->tensors : NULL; w && w->role; w++) {
		const char *q = w->name[eco];
		if (q && !strncmp(q, p, stem) && (q[stem] < '0' || q[stem] > '9' || q[stem + 1] || q[stem] - '0' >= cnt))
			return -1;
	}
	return cnt;
}

bool tpc_family_has_experts(const tpc_family *f)
{
	for (const tpc_tensor_row *w = f ? f->tensors : NULL; w && w->role; w++)
		if (expert_role(w->role))
			return true;
	return false;
}

bool tpc_family_keeps_f32(const tpc_family *f, const char *hf_name, tpc_dtype to)
{
	int64_t layer, expert;
	bool bias;
	if (!f || (to != TPC_F16 && to != TPC_BF16) || (!f->f32_roles && !f->f32_roles_f16))
		return false;
	const tpc_tensor_row *w = tpc_family_classify(f, TPC_ECO_HF, hf_name, &layer, &expert, &bias);
	for (int k = 0; w && k < 2; k++)
		for (const tpc_role *r = k ? f->f32_roles_f16 : f->f32_roles; r && *r; r++)
			if (*r == w->role && (!k || to == TPC_F16))
				return true;
	return false;
}

size_t tpc_family_keep_f32(const tpc_family *f, tpc_ckpt *ck)
{
	size_t n = 0;
	for (size_t i = 0; f && i < ck->n; i++) {
		tpc_tensor *t = &ck->t[i];
		if (t->dtype == t->src_dtype || !(tpc_dtype_get(t->src_dtype)->flags & TPC_DTF_FLOAT) ||
		    !tpc_family_keeps_f32(f, t->name, t->dtype))
			continue;
		t->dtype = TPC_F32;
		t->nbytes = t->numel * 4;
		t->flags |= TPC_TF_KEPT_F32;
		n++;
	}
	return n;
}

const tpc_tensor_row *tpc_family_classify_for(const tpc_family *f, const char *layout, tpc_eco eco,
					     const char *name, int64_t *layer, int64_t *expert, bool *bias,
					     const tpc_family **of)
{
	const tpc_tensor_row *w = tpc_family_classify(f, eco, name, layer, expert, bias);
	for (size_t i = 0; !w && layout && i < tpc_family_count(); i++)
		if (tpc_family_lists(tpc_family_at(i)->layouts, layout) &&
		    (w = tpc_family_classify(tpc_family_at(i), eco, name, layer, expert, bias)))
			f = tpc_family_at(i);
	if (of)
		*of = w ? f : NULL;
	return w;
}

int tpc_family_fused_rows(const tpc_family *f, const char *name, int64_t *layer, const tpc_tensor_row **out, int n)
{
	int cnt = 0;
	*layer = -1;
	for (int k = 0; k < TPC_ROLE_COUNT; k++) { /* part k: exactly one row */
		const tpc_tensor_row *got = NULL;
		for (const tpc_tensor_row *w = f ? f->tensors : NULL; w && w->role; w++) {
			int64_t L, E;
			bool b;
			const char *h = w->hf_fused ? strchr(w->hf_fused, '#') : NULL;
			int part = h ? atoi(h + 1) : 0;
			if (!w->hf_fused || part != k || !tpc_family_match(w->hf_fused, name, false, &L, &E, &b))
				continue;
			if (got || (*layer >= 0 && L != *layer))
				return -1;
			got = w;
			*layer = L;
		}
		if (!got)
			break;
		if (cnt >= n)
			return -1;
		out[cnt++] = got;
	}
	/* no row of the parameter left uncounted (a part past a gap) */
	for (const tpc_tensor_row *w = f ? f->tensors : NULL; w && w->role; w++) {
		int64_t L, E;
		bool b;
		const char *h = w->hf_fused ? strchr(w->hf_fused, '#') : NULL;
		if (w->hf_fused && tpc_family_match(w->hf_fused, name, false, &L, &E, &b) && (h ? atoi(h + 1) : 0) >= cnt)
			return -1;
	}
	return cnt;
}
