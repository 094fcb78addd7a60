/* gguf_lora.c - PEFT LoRA adapters as llama.cpp adapter GGUF files, both
 * ways (gguf.h: tpc_gguf_lora_from_peft, tpc__gguf_lora_to_peft).
 *
 * Writing follows ggml-org/llama.cpp convert_lora_to_gguf.py @0b03adaa (by
 * function: the file is not in Debian's llama.cpp-tools 0.7.0, whose
 * conversion/ package it runs over here):
 *   get_base_tensor_name            the base weight a key belongs to
 *   LoraModel.get_tensors           the keys paired per base weight, in the
 *                                   adapter file's order (safetensors'
 *                                   load_file: sorted by name)
 *   LoraModel.modify_tensors        the base model class's own modify_tensors
 *                                   over LoraTorchTensor(A, B): a permute or
 *                                   reshape that keeps the last axis acts on B
 *                                   only (LoraTorchTensor.permute), so
 *                                   LlamaModel.permute of q/k reorders
 *                                   lora_b's rows; then token_embd's lora_a
 *                                   transposed
 *   LoraModel.set_type, set_gguf_parameters, set_vocab  general.type
 *                                   "adapter", adapter.type "lora",
 *                                   adapter.lora.alpha (f32), nothing else of
 *                                   the base (no vocabulary, no {arch}.* keys,
 *                                   no general.file_type)
 * and Debian's conversion/base.py: prepare_metadata (L1353) writes general.name
 * from the adapter folder's name (Metadata.load of dir_model_card, the
 * adapter folder) and no size_label (gguf_writer.py
 * get_total_parameter_count negates a LoRA's total); prepare_tensors' type
 * rule (L1283) quantizes .lora_a/.lora_b as weights.
 *
 * What the family does to a weight is the record's GGUF column
 * (tpc_family_gguf.h): permute_qk is applied to lora_b; a transform the
 * reference cannot apply to a LoRA pair (its LoraTorchTensor raises, or
 * swaps A and B as GPT-2's Conv1D transpose does) or that tpconv does not
 * write for one is refused naming the tensor.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_arch_int.h"
#include "tpc_extras.h"
#include "tpc_family.h"
#include "tpc_family_gguf.h"
#include "tpc_lora.h"
#include "tpc_util.h"

#define PEFT_PREFIX "base_model.model."

/* One adapted module: its A and B (indices into the adapter checkpoint) */
typedef struct lmod {
	const char *key; /* A's key (the module's place in the file's order) */
	char *module;    /* between PEFT_PREFIX and the suffix */
	int64_t a, b;
	bool emb;        /* lora_embedding_A / _B */
} lmod;

static const struct {
	const char *suffix;
	bool b, emb;
} suffixes[] = {
	{".lora_A.weight", false, false}, {".lora_B.weight", true, false},
	{".lora_embedding_A", false, true}, {".lora_embedding_B", true, true},
};

static int by_key(const void *x, const void *y)
{
	return strcmp(((const lmod *)x)->key, ((const lmod *)y)->key);
}

static void mods_free(lmod *m, size_t n)
{
	for (size_t i = 0; m && i < n; i++)
		free(m[i].module);
	free(m);
}

/* Pair the adapter's keys per module (get_tensors); anything that is not a
 * LoRA A or B is refused: a DoRA magnitude, a lora_B bias or a
 * modules_to_save tensor has no place in an adapter GGUF (llama.cpp's loader
 * knows .lora_a and .lora_b only) */
static int collect(const tpc_ckpt *ad, lmod **out, size_t *nout, tpc_err *e)
{
	lmod *m = tpc_calloc(ad->n ? ad->n : 1, sizeof(*m));
	size_t n = 0;
	int ret = m ? 0 : tpc_err_nomem(e);
	for (size_t i = 0; !ret && i < ad->n; i++) {
		const char *k = ad->t[i].name;
		size_t len = strlen(k), s = 0, pl = strlen(PEFT_PREFIX);
		while (s < sizeof(suffixes) / sizeof(suffixes[0]) && !tpc_ends_with(k, suffixes[s].suffix))
			s++;
		if (s == sizeof(suffixes) / sizeof(suffixes[0]) || strncmp(k, PEFT_PREFIX, pl) ||
		    len <= pl + strlen(suffixes[s].suffix)) {
			ret = tpc_err_at(e, TPC_EINPUT, ad->path, k,
					 "not a LoRA A or B weight (base_model.model.<module>.lora_A.weight ...): an adapter GGUF holds .lora_a/.lora_b pairs only (no DoRA magnitudes, lora_B biases or modules_to_save)");
			break;
		}
		size_t ml = len - pl - strlen(suffixes[s].suffix);
		size_t j = 0;
		while (j < n && (strlen(m[j].module) != ml || memcmp(m[j].module, k + pl, ml)))
			j++;
		if (j == n) {
			if (!(m[n].module = tpc_strndup(k + pl, ml))) {
				ret = tpc_err_nomem(e);
				break;
			}
			m[n].a = m[n].b = -1;
			m[n].emb = suffixes[s].emb;
			n++;
		}
		if (m[j].emb != suffixes[s].emb || (suffixes[s].b ? m[j].b : m[j].a) >= 0) {
			ret = tpc_err_at(e, TPC_EINPUT, ad->path, k, "a second LoRA %s for module '%s'",
					 suffixes[s].b ? "B" : "A", m[j].module);
			break;
		}
		if (suffixes[s].b)
			m[j].b = (int64_t)i;
		else
			m[j].a = (int64_t)i;
	}
	for (size_t j = 0; !ret && j < n; j++) {
		if (m[j].a < 0 || m[j].b < 0) {
			ret = tpc_err_at(e, TPC_EINPUT, ad->path, ad->t[m[j].a < 0 ? m[j].b : m[j].a].name,
					 "LoRA %s without its %s", m[j].a < 0 ? "B" : "A", m[j].a < 0 ? "A" : "B");
			break;
		}
		m[j].key = ad->t[m[j].a].name;
	}
	if (ret) {
		mods_free(m, n);
		return ret;
	}
	qsort(m, n, sizeof(*m), by_key); /* load_file's order: by name */
	*out = m;
	*nout = n;
	return 0;
}

/* What llama.cpp's adapter cannot say: it scales every pair by
 * adapter.lora.alpha / (the pair's rank), nothing else (QUANT-ADAPTERS-TRAINING.md
 * §5.2). The reference ignores these members; tpconv refuses them by name. */
static int cfg_fits(const tpc_lora_cfg *c, tpc_err *e)
{
	const char *why = c->rslora	? "use_rslora (llama.cpp scales by alpha / r, not alpha / sqrt(r))"
			  : c->dora	? "use_dora (llama.cpp has no DoRA magnitudes)"
			  : c->lora_bias ? "lora_bias (llama.cpp has no LoRA bias)"
			  : c->fifo	? "fan_in_fan_out (a Conv1D base: the reference's transpose swaps A and B)"
					: NULL;
	const cJSON *ap = c->json ? cJSON_GetObjectItemCaseSensitive((const cJSON *)c->json, "alpha_pattern") : NULL;
	const cJSON *ms = c->json ? cJSON_GetObjectItemCaseSensitive((const cJSON *)c->json, "modules_to_save") : NULL;
	if (!why && cJSON_IsObject(ap) && ap->child)
		why = "alpha_pattern (one adapter.lora.alpha for every pair)";
	if (!why && cJSON_IsArray(ms) && ms->child)
		why = "modules_to_save (an adapter GGUF holds LoRA pairs only)";
	if (!why && c->params)
		why = "target_parameters (LoRA on parameters, PEFT's ParamWrapper: the reference takes each key's '<module>.weight', "
		      "which such a module does not have; merge it instead, convert BASE --lora ADAPTER -o MODEL.gguf)";
	return why ? tpc_err_at(e, TPC_EINPUT, c->path, NULL, "%s: an adapter GGUF cannot express it", why) : 0;
}

/* set_gguf_parameters after the alpha: an activated LoRA's
 * adapter.alora.invocation_tokens, a u32 array (convert_lora_to_gguf.py at
 * 0b03adaa; llama.cpp applies the adapter only after that sequence). A
 * config with only invocation_string the reference tokenizes with the base's
 * tokenizer, dropping the first token: refused, not guessed. */
static int alora_tokens(const tpc_lora_cfg *c, tpc_gguf_kvs *kv, tpc_err *e)
{
	const cJSON *a = c->json ? cJSON_GetObjectItemCaseSensitive((const cJSON *)c->json, "alora_invocation_tokens") : NULL, *it;
	const cJSON *is = c->json ? cJSON_GetObjectItemCaseSensitive((const cJSON *)c->json, "invocation_string") : NULL;
	int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0, k = 0, ret = 0;
	if (!n && cJSON_IsString(is) && is->valuestring[0])
		return tpc_err_at(e, TPC_EINPUT, c->path, NULL, "invocation_string without alora_invocation_tokens: the reference "
				  "tokenizes it with the base's tokenizer, which tpconv does not");
	if (a && !cJSON_IsNull(a) && !cJSON_IsArray(a))
		return tpc_err_at(e, TPC_EINPUT, c->path, NULL, "'alora_invocation_tokens' is not a list");
	if (!n)
		return 0;
	uint32_t *v = tpc_calloc((size_t)n, sizeof(uint32_t));
	if (!v)
		return tpc_err_nomem(e);
	cJSON_ArrayForEach(it, a)
	{
		double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
		if (d < 0 || d > 4294967295.0 || d != (double)(uint32_t)d) {
			ret = tpc_err_at(e, TPC_EINPUT, c->path, NULL, "'alora_invocation_tokens' holds something that is not a token id");
			break;
		}
		v[k++] = (uint32_t)d;
	}
	if (!ret && tpc_gguf_kvs_arr(kv, "adapter.alora.invocation_tokens", U32, v, (uint64_t)n))
		ret = tpc_err_nomem(e);
	free(v);
	return ret;
}

typedef struct lctx {
	const tpc_ckpt *ad;
	const tpc_family *fam;
	const tpc_gguf_arch *sp;
	uint64_t layers, heads, kv_heads;
	bool tied; /* the output is the token embedding */
	int ftype;
	tpc_gguf_wtensor *t;
	size_t n;
	tpc_err *e;
	/* experts the GGUF stacks (record's experts[]): module of layer l's stack
	 * k, expert x at xm[(l * 3 + k) * n_exp + x] (NULL: none yet) */
	uint64_t n_exp;
	const lmod **xm;
	uint64_t *xgot;
} lctx;

/* The reference's transform of this role that no LoRA pair gets here, or NULL */
static const char *unsupported(const lctx *x, const tpc_tensor_row *row, const char *hf)
{
	const tpc_gguf_arch *sp = x->sp;
	tpc_role r = row->role;
	if (strchr(row->name[TPC_ECO_HF], '#'))
		return "a fused weight split into parts";
	if (strstr(row->name[TPC_ECO_HF], "{E}") && !strstr(row->name[TPC_ECO_GGUF], "{E}") &&
	    (!tpc_gguf_arch_stacks_experts(sp) || (r != sp->experts[0] && r != sp->experts[1] && r != sp->experts[2])))
		return "experts stacked";
	if ((sp->head_split.role && r == sp->head_split.role) || (sp->group_split.role && r == sp->group_split.role))
		return "one weight written as two";
	if (tpc_gguf_tile_of(sp, r))
		return "heads tiled";
	if ((sp->neg_exp && r == sp->neg_exp) || (sp->squeeze && r == sp->squeeze) ||
	    (sp->mamba2 && (r == TPC_ROLE_SSM_CONV1D || r == TPC_ROLE_SSM_A || r == TPC_ROLE_SSM_D || r == TPC_ROLE_SSM_NORM)))
		return "a state-space weight rewritten";
	if (sp->neox_qkv && r == TPC_ROLE_ATTN_QKV)
		return "GPT-NeoX's qkv rows regrouped";
	if (row->hf_in_out)
		return "experts stored [in, out] transposed";
	if (x->fam->conv1d && r != TPC_ROLE_TOKEN_EMBD && r != TPC_ROLE_POS_EMBD && r != TPC_ROLE_OUTPUT)
		return "GPT-2's Conv1D transposed (LoraTorchTensor.transpose swaps A and B)";
	if (sp->no_lm_head && !strcmp(hf, "lm_head.weight"))
		return "lm_head left out (tied to the embeddings: the reference raises)";
	return NULL;
}

static int push(lctx *x, const char *name, const char *suf, tpc_tensor *t)
{
	tpc_gguf_wtensor *nt = realloc(x->t, (x->n + 1) * sizeof(*nt));
	if (!nt) {
		tpc_tensor_release(t);
		return tpc_err_nomem(x->e);
	}
	x->t = nt;
	tpc_gguf_wtensor *w = &x->t[x->n];
	memset(w, 0, sizeof(*w));
	size_t len = strlen(name) + strlen(suf) + 1;
	if (!(w->name = malloc(len))) {
		tpc_tensor_release(t);
		return tpc_err_nomem(x->e);
	}
	snprintf(w->name, len, "%s%s", name, suf);
	w->t = *t;
	memset(t, 0, sizeof(*t));
	x->n++;
	w->type = tpc__gga_tensor_type(x->ftype, TPC_ROLE_NONE, w);
	return 0;
}

/* the dtypes the reference reads as they are or converts to f32 */
static bool float_dtype(tpc_dtype d)
{
	return d == TPC_F32 || d == TPC_F16 || d == TPC_BF16;
}

/* An expert's pair: kept until the layer's last expert module (in the
 * file's order), then the layer's three stacks in the record's order, each
 * A [E, r, in] and B [E, out, r]: the reference's LoraTorchTensor under
 * torch.stack when its model class stacks the experts (conversion/llama.py
 * Mixtral: once a layer has all n_experts x 3). */
static int expert_pair(lctx *x, const lmod *m, const tpc_tensor_row *row, int64_t l, int64_t xe)
{
	const tpc_gguf_arch *sp = x->sp;
	int k = 0;
	while (k < 3 && sp->experts[k] != row->role)
		k++;
	if (k == 3 || (uint64_t)xe >= x->n_exp)
		return tpc_err_at(x->e, TPC_EINPUT, x->ad->path, x->ad->t[m->a].name,
				  "module '%s': expert %lld, but the base's config.json has %llu", m->module, (long long)xe,
				  (unsigned long long)x->n_exp);
	const lmod **slot = &x->xm[((uint64_t)l * 3 + (uint64_t)k) * x->n_exp + (uint64_t)xe];
	if (!*slot)
		x->xgot[l]++;
	*slot = m;
	if (x->xgot[l] < 3 * x->n_exp)
		return 0;
	for (k = 0; k < 3; k++) {
		const tpc_tensor_row *r = tpc_family_row(x->fam, sp->experts[k]);
		tpc_tensor *pa = tpc_calloc(x->n_exp, sizeof(*pa)), *pb = tpc_calloc(x->n_exp, sizeof(*pb)), sa, sb;
		char name[256];
		int part, ret = pa && pb ? 0 : tpc_err_nomem(x->e);
		for (uint64_t e = 0; !ret && e < x->n_exp; e++) {
			const lmod *q = x->xm[((uint64_t)l * 3 + (uint64_t)k) * x->n_exp + e];
			pa[e] = x->ad->t[q->a];
			pb[e] = x->ad->t[q->b];
		}
		if (!ret && !tpc_family_name(r, TPC_ECO_GGUF, l, -1, false, name, sizeof(name), &part))
			ret = tpc_err_at(x->e, TPC_EINPUT, x->ad->path, m->module, "no GGUF name for the %s stack",
					 tpc_role_name(sp->experts[k]));
		memset(&sa, 0, sizeof(sa));
		memset(&sb, 0, sizeof(sb));
		if (!ret && (tpc_tensor_init_stack(&sa, pa, (int)x->n_exp) || tpc_tensor_init_stack(&sb, pb, (int)x->n_exp)))
			ret = tpc_err_at(x->e, TPC_EINPUT, x->ad->path, name,
					 "layer %lld's experts' LoRA pairs differ in shape or dtype (torch.stack in the reference fails)",
					 (long long)l);
		free(pa); /* shallow copies of the adapter's tensors */
		free(pb);
		if (ret) {
			tpc_tensor_release(&sa);
			tpc_tensor_release(&sb);
			return ret;
		}
		/* push takes each tensor (and releases it on failure) */
		if ((ret = push(x, name, ".lora_a", &sa))) {
			tpc_tensor_release(&sb);
			return ret;
		}
		if ((ret = push(x, name, ".lora_b", &sb)))
			return ret;
	}
	return 0;
}

/* One module's pair: GGUF name, B's transform, A transposed for token_embd */
static int one_pair(lctx *x, const lmod *m)
{
	const tpc_tensor *A = &x->ad->t[m->a], *B = &x->ad->t[m->b];
	char hf[512], name[256];
	int64_t l = -1, xe = -1;
	bool bias = false;
	int part;
	snprintf(hf, sizeof(hf), "%s.weight", m->module);
	if (A->ndim != 2 || B->ndim != 2 || A->shape[0] != B->shape[1] || A->shape[0] < 1)
		return tpc_err_at(x->e, TPC_EINPUT, x->ad->path, B->name,
				  "shapes do not fit: lora_A [r, in] is [%lld, %lld], lora_B [out, r] is [%lld, %lld] (%d-D, %d-D)",
				  A->ndim > 0 ? (long long)A->shape[0] : 0LL, A->ndim > 1 ? (long long)A->shape[1] : 0LL,
				  B->ndim > 0 ? (long long)B->shape[0] : 0LL, B->ndim > 1 ? (long long)B->shape[1] : 0LL,
				  A->ndim, B->ndim);
	if (!float_dtype(A->dtype) || !float_dtype(B->dtype) || A->dq || B->dq)
		return tpc_err_at(x->e, TPC_EINPUT, x->ad->path, A->name, "LoRA weights must be plain floats");
	const tpc_tensor_row *row = tpc_family_classify(x->fam, TPC_ECO_HF, hf, &l, &xe, &bias);
	if (!row || bias || !row->name[TPC_ECO_GGUF] || !tpc_family_name(row, TPC_ECO_GGUF, l, -1, false, name, sizeof(name), &part))
		return tpc_err_at(x->e, TPC_EINPUT, x->ad->path, A->name,
				  "module '%s': convert_hf_to_gguf.py has no GGUF name for its weight in a %s model", m->module,
				  x->sp->hf_arch[0]);
	if (l >= 0 && (uint64_t)l >= x->layers)
		return tpc_err_at(x->e, TPC_EINPUT, x->ad->path, A->name, "layer %lld, but the base's config.json has %llu layers",
				  (long long)l, (unsigned long long)x->layers);
	const char *why = unsupported(x, row, hf);
	if (why)
		return tpc_err_at(x->e, TPC_EINPUT, x->ad->path, A->name,
				  "module '%s' (%s): the reference's transform of this weight (%s) is not written for a LoRA pair by tpconv",
				  m->module, tpc_role_name(row->role), why);
	if (row->role == TPC_ROLE_TOKEN_EMBD && x->tied)
		return tpc_err_at(x->e, TPC_EINPUT, x->ad->path, A->name,
				  "module '%s' (token_embd): the base ties its output projection to the token embedding "
				  "(tie_word_embeddings), and llama.cpp 0.7 then applies token_embd's pair to the output too and "
				  "aborts (ggml_can_mul_mat in build_lora_mm); convert_lora_to_gguf.py writes such a file all the same",
				  m->module);
	if (m->emb && row->role != TPC_ROLE_TOKEN_EMBD)
		return tpc_err_at(x->e, TPC_EINPUT, x->ad->path, A->name, "an embedding LoRA on '%s', which is not the token embedding",
				  m->module);
	if (xe >= 0 && tpc_gguf_arch_stacks_experts(x->sp) && !strstr(row->name[TPC_ECO_GGUF], "{E}"))
		return expert_pair(x, m, row, l, xe);
	tpc_tensor a, b;
	memset(&b, 0, sizeof(b));
	if (tpc_tensor_copy(&a, A))
		return tpc_err_nomem(x->e);
	bool q = row->role == TPC_ROLE_ATTN_Q, k = row->role == TPC_ROLE_ATTN_K;
	int ret = 0;
	if (x->sp->permute_qk && (q || k)) { /* LlamaModel.permute on B's rows */
		uint64_t h = q ? x->heads : x->kv_heads;
		if (!h || B->shape[0] % (int64_t)(2 * h) || tpc_tensor_rope_permute(&b, B, (int64_t)h, false))
			ret = tpc_err_at(x->e, TPC_EINPUT, x->ad->path, B->name,
					 "%lld rows are not whole heads of even size (%llu heads)", (long long)B->shape[0],
					 (unsigned long long)h);
	} else if (tpc_tensor_copy(&b, B)) {
		ret = tpc_err_nomem(x->e);
	}
	if (!ret && row->role == TPC_ROLE_TOKEN_EMBD)
		tpc_tensor_transpose2d(&a); /* lora_a = lora_a.T (llm_build_inp_embd) */
	if (ret) {
		tpc_tensor_release(&a);
		tpc_tensor_release(&b);
		return ret;
	}
	if ((ret = push(x, name, ".lora_a", &a))) {
		tpc_tensor_release(&b);
		return ret;
	}
	return push(x, name, ".lora_b", &b);
}

static int parse_ftype(const char *outtype, int *ft, tpc_err *e)
{
	static const struct { const char *name; int ft; } t[] = {
		{"f32", FT_ALL_F32}, {"f16", FT_MOSTLY_F16}, {"bf16", FT_MOSTLY_BF16}, {"q8_0", FT_MOSTLY_Q8_0},
	};
	const char *o = outtype ? outtype : "f32"; /* the script's default */
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(o, t[i].name)) {
			*ft = t[i].ft;
			return 0;
		}
	char safe[64];
	tpc_sanitize(safe, sizeof(safe), o);
	return tpc_err_set(e, TPC_EUSAGE,
			   "--outtype '%s': an adapter GGUF is f32 (the default), f16, bf16 or q8_0 (convert_lora_to_gguf.py's "
			   "'auto' fails on its LoRA tensors)",
			   safe);
}

int tpc_gguf_lora_from_peft(const tpc_ckpt *ad, const tpc_lora_cfg *lc, const char *base_dir, const char *adapter_dir,
			    const char *outtype, tpc_gguf_kvs *kv, tpc_gguf_wtensor **t, size_t *n, tpc_err *e)
{
	conv cv = {.kv = kv, .e = e};
	lctx x = {.ad = ad, .e = e};
	lmod *m = NULL;
	size_t nm = 0;
	char *title = NULL;
	int ret = parse_ftype(outtype, &x.ftype, e);
	*t = NULL;
	*n = 0;
	if (!ret)
		ret = cfg_fits(lc, e);
	if (!ret)
		ret = tpc__gga_load_config(base_dir, &cv.c, &cv.fam, e);
	if (!ret) {
		cv.spec = x.sp = cv.fam->gguf;
		x.fam = cv.fam;
		ret = tpc__gk_cfg_req_u32(&cv.c, "n_layers|num_hidden_layers|n_layer|num_layers", &x.layers, e);
	}
	if (!ret) { /* config.json's flag; without one, the record's word (Gemma: no lm_head written) */
		const cJSON *tw = tpc__gk_cfg_get(&cv.c, "tie_word_embeddings");
		x.tied = cJSON_IsBool(tw) ? cJSON_IsTrue(tw) : x.sp->no_lm_head;
	}
	if (!ret && x.sp->permute_qk) {
		char buf[64];
		ret = tpc__gk_cfg_req_u32(&cv.c, "n_heads|num_attention_heads", &x.heads, e);
		const cJSON *v = ret ? NULL : tpc__gk_cfg_find(&cv.c, "n_kv_heads|num_key_value_heads", NULL, buf, sizeof(buf));
		x.kv_heads = x.heads;
		if (v && tpc__gk_cfg_u32(&cv.c, v, "num_key_value_heads", &x.kv_heads, e))
			ret = -1;
	}
	if (!ret && tpc_gguf_arch_stacks_experts(x.sp)) {
		char xmn[160];
		uint64_t nx = 0;
		snprintf(xmn, sizeof(xmn), "num_local_experts|num_experts|n_routed_experts%s%s", x.sp->experts_member ? "|" : "",
			 x.sp->experts_member ? x.sp->experts_member : "");
		ret = tpc__gk_cfg_req_u32(&cv.c, xmn, &x.n_exp, e);
		if (!ret && (!x.n_exp || tpc_mul_u64(x.layers, 3 * x.n_exp, &nx) || nx > ((uint64_t)1 << 26)))
			ret = tpc_err_at(e, TPC_EINPUT, base_dir, NULL, "config.json: %llu experts over %llu layers is not a count tpconv stacks",
					 (unsigned long long)x.n_exp, (unsigned long long)x.layers);
		if (!ret && (!(x.xm = tpc_calloc(nx ? nx : 1, sizeof(*x.xm))) ||
			     !(x.xgot = tpc_calloc(x.layers ? x.layers : 1, sizeof(*x.xgot)))))
			ret = tpc_err_nomem(e);
	}
	if (!ret)
		ret = collect(ad, &m, &nm, e);
	if (!ret && !nm)
		ret = tpc_err_at(e, TPC_EINPUT, ad->path, NULL, "the adapter holds no LoRA weights");
	for (size_t i = 0; !ret && i < nm; i++)
		ret = one_pair(&x, &m[i]);
	/* a layer whose experts are not all adapted: the reference never writes
	 * its stacks (it waits for all n_experts x 3), dropping those pairs */
	for (uint64_t l = 0; !ret && x.xgot && l < x.layers; l++)
		if (x.xgot[l] && x.xgot[l] < 3 * x.n_exp)
			ret = tpc_err_at(e, TPC_EINPUT, ad->path, NULL,
					 "layer %llu: LoRA pairs on %llu of its %llu experts' weights (%s, %s, %s of each): the "
					 "reference stacks a layer's experts only when all have one, and drops the rest silently",
					 (unsigned long long)l, (unsigned long long)x.xgot[l], (unsigned long long)(3 * x.n_exp),
					 tpc_role_name(x.sp->experts[0]), tpc_role_name(x.sp->experts[1]), tpc_role_name(x.sp->experts[2]));
	/* prepare_metadata: the writer's architecture, set_type, the model card's
	 * keys, set_gguf_parameters, the quantization version */
	if (!ret && !(title = tpc__gguf_title(adapter_dir)))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = tpc__gk_kv_str(&cv, "general.architecture", x.sp->arch) || tpc__gk_kv_str(&cv, "general.type", "adapter") ||
				      tpc__gk_kv_str(&cv, "adapter.type", "lora")
			      ? -1
			      : 0;
	if (!ret)
		ret = tpc__gk_sampling_keys(&cv, adapter_dir);
	if (!ret)
		ret = tpc__gk_kv_str(&cv, "general.name", title);
	if (!ret && tpc_gguf_kvs_float(kv, "adapter.lora.alpha", TPC_GV_F32, (double)(float)lc->alpha))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = alora_tokens(lc, kv, e);
	if (!ret && tpc_gguf_kvs_uint(kv, "general.quantization_version", U32, 2))
		ret = tpc_err_nomem(e);
	if (!ret) {
		*t = x.t;
		*n = x.n;
	} else {
		tpc_gguf_wtensors_release(x.t, x.n);
	}
	mods_free(m, nm);
	free(x.xm);
	free(x.xgot);
	free(title);
	tpc_cfg_free(cv.c.doc);
	free((char *)cv.c.path);
	return ret;
}

/* ---- an adapter GGUF back to PEFT ---- */

/* A string KV, NULL when absent or not a string */
static const char *kv_str(const tpc_gguf_kvs *kv, const char *key, bool *present)
{
	ptrdiff_t i = tpc_gguf_kvs_find(kv, key);
	*present = i >= 0;
	if (i < 0 || kv->kv[i].type != TPC_GV_STRING)
		return NULL;
	return kv->kv[i].s;
}

/* What makes a GGUF llama.cpp's LoRA adapter (llama-adapter.cpp
 * llama_adapter_lora_init_impl: general.type "adapter", adapter.type
 * "lora"; tpconv also needs adapter.lora.alpha, which PEFT's config holds) */
static int adapter_kvs(const tpc_ckpt *ck, const tpc_gguf_kvs *kv, double *alpha, const char **arch, tpc_err *e)
{
	bool has;
	char safe[64];
	const char *ty = kv_str(kv, "general.type", &has);
	if (!ty || strcmp(ty, "adapter")) {
		tpc_sanitize(safe, sizeof(safe), ty ? ty : "");
		return tpc_err_at(e, TPC_EINPUT, ck->path, NULL, "general.type %s%s%s: not an adapter GGUF (\"adapter\")",
				  ty ? "'" : has ? "is not a string" : "missing", ty ? safe : "", ty ? "'" : "");
	}
	const char *at = kv_str(kv, "adapter.type", &has);
	if (!at || strcmp(at, "lora")) {
		tpc_sanitize(safe, sizeof(safe), at ? at : "");
		return tpc_err_at(e, TPC_EINPUT, ck->path, NULL, "adapter.type %s%s%s: tpconv reads LoRA adapters (\"lora\")",
				  at ? "'" : has ? "is not a string" : "missing", at ? safe : "", at ? "'" : "");
	}
	ptrdiff_t i = tpc_gguf_kvs_find(kv, "adapter.lora.alpha");
	if (i < 0 || (kv->kv[i].type != TPC_GV_F32 && kv->kv[i].type != TPC_GV_F64) || !isfinite(kv->kv[i].v.f) ||
	    kv->kv[i].v.f <= 0)
		return tpc_err_at(e, TPC_EINPUT, ck->path, NULL,
				  "adapter.lora.alpha %s: PEFT's lora_alpha cannot be known (llama.cpp would scale by 1)",
				  i < 0 ? "missing" : "is not a positive float");
	/* the f32 as the shortest decimal that reads back to it: what
	 * adapter_config.json said (16, 0.1), not 0.10000000149011612 */
	float x = (float)kv->kv[i].v.f;
	*alpha = x;
	for (int p = 1; p <= 9; p++) {
		char buf[48];
		snprintf(buf, sizeof(buf), "%.*g", p, (double)x);
		if (strtof(buf, NULL) == x) {
			*alpha = strtod(buf, NULL);
			break;
		}
	}
	if (!(*arch = kv_str(kv, "general.architecture", &has)))
		return tpc_err_at(e, TPC_EINPUT, ck->path, NULL, "general.architecture missing");
	return 0;
}

/* The pair of `gname` (".lora_a" stem): the index of the other, or -1 */
static int64_t partner(const tpc_ckpt *ck, const char *name, size_t stem, bool is_a)
{
	char buf[520];
	if (stem > 500)
		return -1;
	snprintf(buf, sizeof(buf), "%.*s.lora_%c", (int)stem, name, is_a ? 'b' : 'a');
	return tpc_ckpt_find(ck, buf);
}

typedef struct rctx {
	tpc_ckpt *ck;
	lctx x;
	cJSON *targets; /* leaf names, a set */
	cJSON *ranks;   /* rank_pattern */
	int64_t r;      /* the first pair's rank: r */
	uint64_t inter; /* config.json's intermediate_size, where the family fuses gate_up (0: none) */
} rctx;

static int add_target(rctx *h, const char *module)
{
	const char *leaf = strrchr(module, '.');
	leaf = leaf ? leaf + 1 : module;
	for (const cJSON *c = h->targets->child; c; c = c->next)
		if (!strcmp(c->valuestring, leaf))
			return 0;
	cJSON *s = cJSON_CreateString(leaf);
	if (s && cJSON_AddItemToArray(h->targets, s))
		return 0;
	cJSON_Delete(s);
	return tpc_err_nomem(h->x.e);
}

/* One .lora_a (index ia) and its .lora_b under PEFT's names */
/* A layer's stacked experts' pair (ffn_*_exps, lora_a [E, r, in], lora_b
 * [E, out, r]): each expert's own pair again, under its Hugging Face
 * module (the reverse of expert_pair). */
static int back_experts(rctx *h, int64_t ia, int64_t ib, const tpc_tensor_row *row, int64_t l, const char *gname)
{
	tpc_ckpt *ck = h->ck;
	const tpc_tensor *A = &ck->t[ia], *B = &ck->t[ib];
	char hf[512], key[600];
	int part, ret = 0;
	if (A->ndim != 3 || B->ndim != 3 || A->shape[0] != B->shape[0] || (uint64_t)A->shape[0] != h->x.n_exp ||
	    A->shape[1] != B->shape[2] || A->shape[1] < 1)
		return tpc_err_at(h->x.e, TPC_EINPUT, ck->path, B->name,
				  "%s: not %llu experts' rank-r pairs (lora_a [E, r, in], lora_b [E, out, r], GGUF ne reversed)", gname,
				  (unsigned long long)h->x.n_exp);
	if (A->dq || B->dq)
		return tpc_err_at(h->x.e, TPC_EINPUT, ck->path, A->dq ? A->name : B->name,
				  "a quantized stack of experts' LoRA pairs is not read back by tpconv yet");
	int64_t r = A->shape[1], ne = A->shape[0];
	for (int64_t x = 0; !ret && x < ne; x++) {
		tpc_tensor a, b;
		/* ck->t moves as pairs are added: A and B by index */
		if (!tpc_family_name(row, TPC_ECO_HF, l, x, false, hf, sizeof(hf), &part) || part >= 0 || !tpc_ends_with(hf, ".weight"))
			return tpc_err_at(h->x.e, TPC_EINPUT, ck->path, ck->t[ia].name, "no Hugging Face module for expert %lld of '%s'",
					  (long long)x, gname);
		hf[strlen(hf) - strlen(".weight")] = '\0';
		if (tpc_tensor_select0(&a, &ck->t[ia], x))
			return tpc_err_nomem(h->x.e);
		if (tpc_tensor_select0(&b, &ck->t[ib], x)) {
			tpc_tensor_release(&a);
			return tpc_err_nomem(h->x.e);
		}
		snprintf(key, sizeof(key), PEFT_PREFIX "%s.lora_A.weight", hf);
		if (tpc_ckpt_add_copy(ck, key, &a, h->x.e) < 0)
			ret = -1;
		snprintf(key, sizeof(key), PEFT_PREFIX "%s.lora_B.weight", hf);
		if (!ret && tpc_ckpt_add_copy(ck, key, &b, h->x.e) < 0)
			ret = -1;
		tpc_tensor_release(&a);
		tpc_tensor_release(&b);
		if (!ret)
			ret = add_target(h, hf);
		if (!ret && h->r < 0)
			h->r = r;
		if (!ret && r != h->r) {
			cJSON *v = cJSON_CreateNumber((double)r);
			if (!v || !cJSON_AddItemToObject(h->ranks, hf, v))
				ret = tpc_err_nomem(h->x.e);
		}
	}
	return ret;
}

static int back_pair(rctx *h, int64_t ia, int64_t ib, size_t stem)
{
	tpc_ckpt *ck = h->ck;
	char gname[512], hf[512], key[600];
	const char *an = ck->t[ia].name;
	snprintf(gname, sizeof(gname), "%.*s", (int)stem, an);
	int64_t l = -1, xe = -1;
	bool bias = false;
	int part;
	const tpc_tensor_row *row = tpc_family_classify(h->x.fam, TPC_ECO_GGUF, gname, &l, &xe, &bias);
	if (row && !bias && row->name[TPC_ECO_HF] && strstr(row->name[TPC_ECO_HF], "{E}") && h->x.n_exp &&
	    (row->role == h->x.sp->experts[0] || row->role == h->x.sp->experts[1] || row->role == h->x.sp->experts[2])) {
		if (l < 0 || (uint64_t)l >= h->x.layers)
			return tpc_err_at(h->x.e, TPC_EINPUT, ck->path, an, "layer %lld, but the base's config.json has %llu layers",
					  (long long)l, (unsigned long long)h->x.layers);
		return back_experts(h, ia, ib, row, l, gname);
	}
	if (!row || bias || !row->name[TPC_ECO_HF] || !tpc_family_name(row, TPC_ECO_HF, l, -1, false, hf, sizeof(hf), &part) ||
	    part >= 0 || !tpc_ends_with(hf, ".weight"))
		return tpc_err_at(h->x.e, TPC_EINPUT, ck->path, an, "no Hugging Face module for '%s' in a %s model", gname,
				  h->x.sp->hf_arch[0]);
	if (l >= 0 && (uint64_t)l >= h->x.layers)
		return tpc_err_at(h->x.e, TPC_EINPUT, ck->path, an, "layer %lld, but the base's config.json has %llu layers",
				  (long long)l, (unsigned long long)h->x.layers);
	/* llama.cpp names Phi-3's fused gate_up ffn_up, as a plain up
	 * projection: the fused one when lora_b has 2 x intermediate_size rows
	 * (gguf_hf.c tells a model's apart by the layer's ffn_gate, which an
	 * adapter may not adapt) */
	const tpc_tensor_row *gu = tpc_family_row(h->x.fam, TPC_ROLE_FFN_GATE_UP);
	if (row->role == TPC_ROLE_FFN_UP && gu && h->inter) {
		const tpc_tensor *bt = &ck->t[ib];
		int64_t rows = bt->ndim == 2 ? bt->shape[0] : -1;
		if (rows == (int64_t)(2 * h->inter) && tpc_family_name(gu, TPC_ECO_HF, l, -1, false, hf, sizeof(hf), &part) && part < 0)
			row = gu;
		else if (rows != (int64_t)h->inter)
			return tpc_err_at(h->x.e, TPC_EINPUT, ck->path, bt->name,
					  "%lld rows: neither up_proj's %llu nor the fused gate_up_proj's %llu (intermediate_size)",
					  (long long)rows, (unsigned long long)h->inter, (unsigned long long)(2 * h->inter));
	}
	const char *why = unsupported(&h->x, row, hf);
	if (why)
		return tpc_err_at(h->x.e, TPC_EINPUT, ck->path, an, "%s: the reference's transform of this weight (%s) is not read back by tpconv",
				  tpc_role_name(row->role), why);
	hf[strlen(hf) - strlen(".weight")] = '\0';
	bool emb = row->role == TPC_ROLE_TOKEN_EMBD;
	tpc_tensor a, b;
	if (tpc_tensor_copy(&a, &ck->t[ia]))
		return tpc_err_nomem(h->x.e);
	if (tpc_tensor_copy(&b, &ck->t[ib])) {
		tpc_tensor_release(&a);
		return tpc_err_nomem(h->x.e);
	}
	int ret = 0;
	int64_t r = b.ndim == 2 ? b.shape[1] : -1;
	/* PyTorch shapes: lora_a [r, in] (token_embd: [vocab, r]), lora_b [out, r] */
	if (a.ndim != 2 || b.ndim != 2 || r < 1 || (emb ? a.shape[1] : a.shape[0]) != r)
		ret = tpc_err_at(h->x.e, TPC_EINPUT, ck->path, ck->t[ib].name,
				 "shapes do not fit: %s.lora_a is [%lld, %lld] and .lora_b [%lld, %lld] (GGUF ne reversed), not a rank-%lld pair",
				 gname, a.ndim > 0 ? (long long)a.shape[0] : 0LL, a.ndim > 1 ? (long long)a.shape[1] : 0LL,
				 b.ndim > 0 ? (long long)b.shape[0] : 0LL, b.ndim > 1 ? (long long)b.shape[1] : 0LL, (long long)r);
	else if (emb && a.dq)
		ret = tpc_err_at(h->x.e, TPC_EINPUT, ck->path, an, "a quantized token_embd lora_a is not read back by tpconv yet");
	if (!ret && emb)
		tpc_tensor_transpose2d(&a);
	bool q = row->role == TPC_ROLE_ATTN_Q, k = row->role == TPC_ROLE_ATTN_K;
	if (!ret && h->x.sp->permute_qk && (q || k)) {
		int64_t n = (int64_t)(q ? h->x.heads : h->x.kv_heads);
		tpc_tensor u;
		memset(&u, 0, sizeof(u));
		if (n < 1 || b.shape[0] % (2 * n))
			ret = tpc_err_at(h->x.e, TPC_EINPUT, ck->path, ck->t[ib].name,
					 "%lld rows are not whole heads of even size (%lld heads in the base's config.json)",
					 (long long)b.shape[0], (long long)n);
		else if (!b.dq)
			ret = tpc_tensor_rope_permute(&u, &b, n, true) ? tpc_err_nomem(h->x.e) : 0;
		else if (b.dq->rope_hd || b.dq->O)
			ret = tpc_err_at(h->x.e, TPC_EINPUT, ck->path, ck->t[ib].name, "internal: a block tensor permuted twice");
		else if (tpc_tensor_copy(&u, &b))
			ret = tpc_err_nomem(h->x.e);
		else
			u.dq->rope_hd = b.shape[0] / n; /* gguf_hf.c's unpermute of a block tensor */
		tpc_tensor_release(&b);
		b = u;
	}
	snprintf(key, sizeof(key), PEFT_PREFIX "%s%s", hf, emb ? ".lora_embedding_A" : ".lora_A.weight");
	if (!ret && tpc_ckpt_add_copy(ck, key, &a, h->x.e) < 0)
		ret = -1;
	snprintf(key, sizeof(key), PEFT_PREFIX "%s%s", hf, emb ? ".lora_embedding_B" : ".lora_B.weight");
	if (!ret && tpc_ckpt_add_copy(ck, key, &b, h->x.e) < 0)
		ret = -1;
	if (!ret)
		ret = add_target(h, hf);
	if (!ret && h->r < 0)
		h->r = r;
	if (!ret && r != h->r) { /* rank_pattern: get_pattern_key matches the module's whole name */
		cJSON *v = cJSON_CreateNumber((double)r);
		if (!v || !cJSON_AddItemToObject(h->ranks, hf, v))
			ret = tpc_err_nomem(h->x.e);
	}
	tpc_tensor_release(&a);
	tpc_tensor_release(&b);
	return ret;
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* adapter_config.json as PEFT's save_pretrained writes a LoraConfig
 * (json.dump(indent=2, sort_keys=True)): what an adapter GGUF says (r,
 * rank_pattern, lora_alpha, target_modules), the rest LoraConfig's defaults */
static char *peft_config(const rctx *h, double alpha, const tpc_gguf_kv *alora)
{
	cJSON *c = cJSON_CreateObject();
	char *text = NULL;
	bool ok = c != NULL;
	if (ok && alora) {
		/* an activated LoRA's invocation tokens (LoraConfig.alora_invocation_tokens) */
		cJSON *a = cJSON_AddArrayToObject(c, "alora_invocation_tokens");
		const uint8_t *p = alora->arr;
		for (uint64_t k = 0; a && ok && k < alora->n; k++, p += 4)
			ok = cJSON_AddItemToArray(a, cJSON_CreateNumber((double)((uint32_t)p[0] | (uint32_t)p[1] << 8 |
										   (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24)));
		ok = ok && a;
	}
	ok = ok && cJSON_AddItemToObject(c, "alpha_pattern", cJSON_CreateObject());
	ok = ok && cJSON_AddNullToObject(c, "base_model_name_or_path") && cJSON_AddStringToObject(c, "bias", "none");
	ok = ok && cJSON_AddFalseToObject(c, "fan_in_fan_out") && cJSON_AddTrueToObject(c, "inference_mode");
	ok = ok && cJSON_AddTrueToObject(c, "init_lora_weights");
	ok = ok && cJSON_AddNumberToObject(c, "lora_alpha", alpha) && cJSON_AddNumberToObject(c, "lora_dropout", 0.0);
	ok = ok && cJSON_AddNullToObject(c, "modules_to_save") && cJSON_AddStringToObject(c, "peft_type", "LORA");
	ok = ok && cJSON_AddNumberToObject(c, "r", (double)h->r);
	/* target_modules: PEFT keeps a set, written as a list: sorted here */
	int nt = cJSON_GetArraySize(h->targets), k = 0;
	const char **names = tpc_calloc(nt > 0 ? (size_t)nt : 1, sizeof(*names));
	for (const cJSON *t = h->targets->child; names && t; t = t->next)
		names[k++] = t->valuestring;
	if (names)
		qsort(names, (size_t)nt, sizeof(*names), by_str);
	cJSON *rp = ok ? cJSON_Duplicate(h->ranks, true) : NULL, *tm = ok && names ? cJSON_CreateStringArray(names, nt) : NULL;
	free(names);
	bool rp_in = ok && rp && cJSON_AddItemToObject(c, "rank_pattern", rp);
	bool tm_in = rp_in && tm && cJSON_AddItemToObject(c, "target_modules", tm);
	if (!rp_in)
		cJSON_Delete(rp);
	if (!tm_in)
		cJSON_Delete(tm);
	ok = tm_in;
	ok = ok && cJSON_AddStringToObject(c, "task_type", "CAUSAL_LM");
	ok = ok && cJSON_AddFalseToObject(c, "use_dora") && cJSON_AddFalseToObject(c, "use_rslora");
	if (ok)
		text = tpc_extras_config_text(c);
	cJSON_Delete(c);
	return text;
}

int tpc__gguf_lora_to_peft(tpc_ckpt *ck, const char *base, char **json, tpc_err *e)
{
	const tpc_gguf_kvs *kv = tpc_gguf_ckpt_kvs(ck);
	rctx h = {.ck = ck, .x = {.e = e}, .r = -1};
	cfg c = {0};
	double alpha = 0;
	const char *arch = NULL;
	bool *keep = NULL;
	size_t n0 = ck->n;
	int ret = kv ? adapter_kvs(ck, kv, &alpha, &arch, e) : tpc_err_at(e, TPC_EINPUT, ck->path, NULL, "not a GGUF file");
	*json = NULL;
	if (!ret)
		ret = tpc__gga_load_config(base, &c, &h.x.fam, e);
	if (!ret) {
		h.x.sp = h.x.fam->gguf;
		ret = tpc__gk_cfg_req_u32(&c, "n_layers|num_hidden_layers|n_layer|num_layers", &h.x.layers, e);
	}
	if (!ret && strcmp(arch, h.x.sp->arch)) {
		char safe[64];
		tpc_sanitize(safe, sizeof(safe), arch);
		ret = tpc_err_at(e, TPC_EINPUT, ck->path, NULL, "general.architecture '%s', but the base '%s' is %s ('%s' in GGUF)",
				 safe, base, h.x.sp->hf_arch[0], h.x.sp->arch);
	}
	if (!ret && h.x.sp->permute_qk) {
		char buf[64];
		ret = tpc__gk_cfg_req_u32(&c, "n_heads|num_attention_heads", &h.x.heads, e);
		const cJSON *v = ret ? NULL : tpc__gk_cfg_find(&c, "n_kv_heads|num_key_value_heads", NULL, buf, sizeof(buf));
		h.x.kv_heads = h.x.heads;
		if (v && tpc__gk_cfg_u32(&c, v, "num_key_value_heads", &h.x.kv_heads, e))
			ret = -1;
	}
	if (!ret && tpc_family_row(h.x.fam, TPC_ROLE_FFN_GATE_UP))
		ret = tpc__gk_cfg_req_u32(&c, "intermediate_size", &h.inter, e);
	if (!ret && tpc_gguf_arch_stacks_experts(h.x.sp)) {
		char xmn[160];
		snprintf(xmn, sizeof(xmn), "num_local_experts|num_experts|n_routed_experts%s%s", h.x.sp->experts_member ? "|" : "",
			 h.x.sp->experts_member ? h.x.sp->experts_member : "");
		ret = tpc__gk_cfg_req_u32(&c, xmn, &h.x.n_exp, e);
	}
	if (!ret && (!(h.targets = cJSON_CreateArray()) || !(h.ranks = cJSON_CreateObject())))
		ret = tpc_err_nomem(e);
	if (!ret && !n0)
		ret = tpc_err_at(e, TPC_EINPUT, ck->path, NULL, "the adapter holds no tensors");
	for (size_t i = 0; !ret && i < n0; i++) {
		const char *nm = ck->t[i].name;
		bool a = tpc_ends_with(nm, ".lora_a"), b = tpc_ends_with(nm, ".lora_b");
		size_t stem = strlen(nm) - (a || b ? 7 : 0);
		int64_t j = a || b ? partner(ck, nm, stem, a) : -1;
		if (!a && !b)
			ret = tpc_err_at(e, TPC_EINPUT, ck->path, nm,
					 "not a .lora_a or .lora_b tensor (mergekit's norms have no place in a PEFT LoRA adapter)");
		else if (j < 0)
			ret = tpc_err_at(e, TPC_EINPUT, ck->path, nm, "%s without its %s", a ? "lora_a" : "lora_b", a ? "lora_b" : "lora_a");
		else if (a)
			ret = back_pair(&h, (int64_t)i, j, stem);
	}
	ptrdiff_t ai = kv ? tpc_gguf_kvs_find(kv, "adapter.alora.invocation_tokens") : -1;
	const tpc_gguf_kv *alora = ai >= 0 ? &kv->kv[ai] : NULL;
	if (!ret && alora && (alora->type != TPC_GV_ARRAY || alora->atype != TPC_GV_U32 || !alora->n))
		ret = tpc_err_at(e, TPC_EINPUT, ck->path, NULL, "adapter.alora.invocation_tokens is not a u32 array of tokens");
	if (!ret && !(*json = peft_config(&h, alpha, alora)))
		ret = tpc_err_nomem(e);
	if (!ret && !(keep = tpc_calloc(ck->n, sizeof(*keep))))
		ret = tpc_err_nomem(e);
	for (size_t i = n0; !ret && i < ck->n; i++)
		keep[i] = true;
	if (!ret)
		ret = tpc_ckpt_filter(ck, keep, e);
	if (!ret) /* as PEFT's save_file */
		ret = tpc_ckpt_meta_set(ck, "format", "pt", e);
	if (ret) {
		free(*json);
		*json = NULL;
	}
	free(keep);
	cJSON_Delete(h.targets);
	cJSON_Delete(h.ranks);
	tpc_cfg_free(c.doc);
	free((char *)c.path);
	return ret;
}
