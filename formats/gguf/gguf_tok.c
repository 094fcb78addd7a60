/*
 * gguf_tok.c - the tokenizer files of the Hugging Face model a GGUF came
 * from, rebuilt from its tokenizer.* keys: the inverse of gguf_vocab.c and
 * gguf_special.c, so that converting the rebuilt folder to GGUF again gives
 * the same keys (tests/gguf/hf_test.sh checks the whole file byte-identical).
 *
 * tokenizer.ggml.model "llama" (SentencePiece) -> tokenizer.model: one piece
 * per token with its score and type, a BPE model (llama.cpp's SPM tokenizer
 * merges by score, as SentencePiece's BPE does), byte_fallback when there
 * are BYTE pieces, identity normalization, add_dummy_prefix from
 * tokenizer.ggml.add_space_prefix (default true, llama.cpp's), no removal of
 * extra whitespace (llama.cpp removes none).
 * What the reference lost and how it is taken back:
 *   - the [PAD{i}] tokens it appended up to config.json's vocab_size (type
 *     UNUSED, score -10000, the text naming its own id) are not pieces:
 *     they are left out, and the rebuilt config.json's vocab_size makes the
 *     reference pad again;
 *   - tokens it took from added_tokens_decoder / added_tokens.json (score
 *     -1000, CONTROL or USER_DEFINED) go back to tokenizer_config.json's
 *     added_tokens_decoder (special when CONTROL); those past the last piece
 *     are not pieces;
 *   - the UNKNOWN piece sentencepiece needs, when added_tokens_decoder made
 *     it CONTROL: tokenizer.ggml.unknown_token_id, else the piece "<unk>"
 *     (sentencepiece's default unk_piece); neither: no tokenizer.model;
 *   - USER_DEFINED pieces it wrote as NORMAL stay NORMAL (as llama.cpp
 *     tokenizes them), their original scores are gone (added ones get 0).
 * Beside it, tokenizer.json: what transformers 5.12 builds from that
 * tokenizer.model (tk_spm_json), which it loads without protobuf. The
 * reference reads unknown_token_id and add_sep_token from it; the rest of
 * the GGUF comes back the same. A "llama" vocabulary in the shape gguf-py's
 * LlamaHfVocab writes (every score -1000, no UNKNOWN token: tk_hf_base)
 * came from a tokenizer.json: it gets the folder transformers 5 saves
 * instead (tk_hf), tokenizer.json and tokenizer_config.json without a
 * tokenizer.model, which LlamaHfVocab reads back into the same keys.
 * tokenizer.ggml.model "gpt2" (BPE) -> tokenizer.json: model.vocab (every
 * token but the padding), model.merges (each "a b" with a, b and ab among
 * the tokens), added_tokens (CONTROL: special, USER_DEFINED: not), and the
 * normalizer and pre_tokenizer gguf_pre.c maps to the tokenizer.ggml.pre
 * name (gpt-2, olmo, qwen2, llama-bpe); another name is not expressed: the
 * tokenizer is then skipped, with the reason (`why`).
 * Both get tokenizer_config.json: the special tokens by text, add_bos/eos,
 * the chat template(s), tokenizer_class, model_max_length (context_length).
 * Arrays that disagree (lengths, a type outside 1..6, an id past the
 * tokens, a merge naming an unknown token, a token twice) are refused,
 * naming the key (TPC_EINPUT).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_vocab_int.h"
#include "spm.h"
#include "tpc_buf.h"
#include "tpc_family_gguf.h"
#include "tpc_util.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

typedef struct tk_ent {
	const char *s;
	uint64_t len, id;
} tk_ent;

typedef struct tok {
	const tpc_ckpt *ck;
	const tpc_gguf_kvs *kv;
	tpc_err *e;
	const char *arch;
	const tpc_gguf_arch *g; /* arch's family record's GGUF part; NULL: none */
	const tpc_gguf_kv *tokens;
	uint64_t n;
	int32_t *type;
	float *score;   /* NULL: no tokenizer.ggml.scores */
	bool *pad;      /* the reference's [PAD{i}] */
	struct tk_ent *ix; /* the tokens sorted by text */
	char *why;
	size_t whylen;
} tok;

static const tpc_gguf_kv *tk_get(const tok *t, const char *key)
{
	ptrdiff_t i = tpc_gguf_kvs_find(t->kv, key);
	return i >= 0 ? &t->kv->kv[i] : NULL;
}

static int tk_bad(const tok *t, const char *key, const char *fmt, uint64_t i)
{
	char msg[160];
	snprintf(msg, sizeof(msg), fmt, (unsigned long long)i);
	return tpc_err_at(t->e, TPC_EINPUT, t->ck->path, NULL, "%s: %s (the tokenizer files are not rebuilt)", key, msg);
}

static const char *tk_text(const tok *t, uint64_t i, uint64_t *len)
{
	*len = t->tokens->alen[i];
	return t->tokens->astr[i];
}

/* An array KV of element type atype (per_token: one per token), or NULL when absent. */
static int tk_arr(const tok *t, const char *key, int atype, bool per_token, const tpc_gguf_kv **out)
{
	const tpc_gguf_kv *k = tk_get(t, key);
	*out = NULL;
	if (!k)
		return 0;
	if (k->type != TPC_GV_ARRAY || k->atype != atype)
		return tk_bad(t, key, "not an array of the type the reference writes%.0llu", 0);
	if (per_token && k->n != t->n)
		return tk_bad(t, key, "%llu elements, not one per token of tokenizer.ggml.tokens", k->n);
	*out = k;
	return 0;
}

/* A u32 id key: -1 when absent; an error when past the tokens. */
static int tk_id(const tok *t, const char *key, int64_t *id)
{
	const tpc_gguf_kv *k = tk_get(t, key);
	*id = -1;
	if (!k)
		return 0;
	if (k->type != TPC_GV_U32 && k->type != TPC_GV_I32 && k->type != TPC_GV_U64 && k->type != TPC_GV_I64)
		return tk_bad(t, key, "not an integer%.0llu", 0);
	bool neg = (k->type == TPC_GV_I32 || k->type == TPC_GV_I64) && k->v.i < 0;
	if (neg || k->v.u >= t->n)
		return tk_bad(t, key, "id %llu is not one of tokenizer.ggml.tokens", neg ? 0 : k->v.u);
	*id = (int64_t)k->v.u;
	return 0;
}

/* A bool key: 1, 0, or -1 when absent (or not a bool). */
static int tk_bool(const tok *t, const char *key)
{
	const tpc_gguf_kv *k = tk_get(t, key);
	return k && k->type == TPC_GV_BOOL ? (k->v.u != 0) : -1;
}

static int tk_cmp(const void *a, const void *b)
{
	const tk_ent *x = a, *y = b;
	int r = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
	return r ? r : (x->len > y->len) - (x->len < y->len);
}

/* The id of the token s[0..n), or -1. */
static int64_t tk_find(const tok *t, const char *s, uint64_t n)
{
	tk_ent k = {s, n, 0};
	const tk_ent *f = bsearch(&k, t->ix, t->n, sizeof(*t->ix), tk_cmp);
	return f ? (int64_t)f->id : -1;
}

/* [PAD{i}] at id i, type UNUSED (score -10000 in a SentencePiece vocabulary) */
static bool tk_is_pad(const tok *t, uint64_t i)
{
	char b[32];
	uint64_t len;
	const char *s = tk_text(t, i, &len);
	int n = snprintf(b, sizeof(b), "[PAD%llu]", (unsigned long long)i);
	return t->type[i] == TT_UNUSED && (uint64_t)n == len && !memcmp(s, b, len) &&
	       (!t->score || t->score[i] == -10000.0f || t->score[i] == 0.0f);
}

/* tokens, token_type, scores: read, checked against each other, indexed */
static int tk_load(tok *t)
{
	const tpc_gguf_kv *ty, *sc;
	int ret = tk_arr(t, "tokenizer.ggml.tokens", TPC_GV_STRING, false, &t->tokens);
	if (!ret && !t->tokens)
		return tk_bad(t, "tokenizer.ggml.tokens", "missing%.0llu", 0);
	if (ret)
		return ret;
	t->n = t->tokens->n;
	if (!t->n || t->n > INT32_MAX)
		return tk_bad(t, "tokenizer.ggml.tokens", "%llu tokens", t->n);
	if ((ret = tk_arr(t, "tokenizer.ggml.token_type", TPC_GV_I32, true, &ty)) ||
	    (ret = tk_arr(t, "tokenizer.ggml.scores", TPC_GV_F32, true, &sc)))
		return ret;
	if (!ty)
		return tk_bad(t, "tokenizer.ggml.token_type", "missing%.0llu", 0);
	t->type = tpc_calloc(t->n, sizeof(*t->type));
	t->pad = tpc_calloc(t->n, sizeof(*t->pad));
	t->ix = tpc_calloc(t->n, sizeof(*t->ix));
	t->score = sc ? tpc_calloc(t->n, sizeof(*t->score)) : NULL;
	if (!t->type || !t->pad || !t->ix || (sc && !t->score))
		return tpc_err_nomem(t->e);
	for (uint64_t i = 0; i < t->n; i++) {
		uint64_t len;
		const char *s = tk_text(t, i, &len);
		t->type[i] = (int32_t)tpc_rd32le((const uint8_t *)ty->arr + 4 * i);
		if (t->type[i] < TT_NORMAL || t->type[i] > TT_BYTE)
			return tk_bad(t, "tokenizer.ggml.token_type", "token %llu has a type outside 1..6", i);
		if (sc) {
			uint32_t u = tpc_rd32le((const uint8_t *)sc->arr + 4 * i);
			memcpy(&t->score[i], &u, 4);
		}
		if (memchr(s, 0, len) || !tpc_utf8_valid(s, len))
			return tk_bad(t, "tokenizer.ggml.tokens", "token %llu is not UTF-8 text without NUL", i);
		t->ix[i] = (tk_ent){s, len, i};
	}
	for (uint64_t i = 0; i < t->n; i++)
		t->pad[i] = tk_is_pad(t, i);
	qsort(t->ix, t->n, sizeof(*t->ix), tk_cmp);
	for (uint64_t k = 1; k < t->n; k++)
		if (!tk_cmp(&t->ix[k - 1], &t->ix[k]))
			return tk_bad(t, "tokenizer.ggml.tokens", "token %llu has the text of another",
				      t->ix[k].id > t->ix[k - 1].id ? t->ix[k].id : t->ix[k - 1].id);
	return 0;
}

static void tk_release(tok *t)
{
	free(t->type);
	free(t->score);
	free(t->pad);
	free(t->ix);
}

static void tk_skip(tok *t, const char *why)
{
	snprintf(t->why, t->whylen, "%s", why);
}

/* ---- JSON helpers ---- */

/* f[*nf] = the JSON text of j under `name` */
static int tk_emit(const tok *t, tpc_hf_file *f, size_t *nf, const char *name, const cJSON *j)
{
	char *text = cJSON_Print(j);
	if (!text)
		return tpc_err_nomem(t->e);
	snprintf(f[*nf].name, sizeof(f[*nf].name), "%s", name);
	f[*nf].data = (uint8_t *)text;
	f[*nf].len = strlen(text);
	(*nf)++;
	return 0;
}

static cJSON *tk_str(const tok *t, uint64_t i)
{
	uint64_t len;
	const char *s = tk_text(t, i, &len);
	char *c = tpc_calloc(len + 1, 1);
	cJSON *j = NULL;
	if (c) {
		memcpy(c, s, len);
		j = cJSON_CreateString(c);
	}
	free(c);
	return j;
}

/* Add v under k to o (v NULL: out of memory); 0 or -1. */
static int add(cJSON *o, const char *k, cJSON *v)
{
	if (!v || !cJSON_AddItemToObject(o, k, v)) {
		cJSON_Delete(v);
		return -1;
	}
	return 0;
}

/* Append v to the array a (v NULL: out of memory); 0 or -1. */
static int add_item(cJSON *a, cJSON *v)
{
	if (!v || !cJSON_AddItemToArray(a, v)) {
		cJSON_Delete(v);
		return -1;
	}
	return 0;
}

/* An added token as transformers writes it, with its id (tokenizer.json)
 * or without (tokenizer_config.json's added_tokens_decoder) */
static cJSON *tk_added_as(const tok *t, uint64_t i, bool with_id, bool normalized, bool special)
{
	cJSON *o = cJSON_CreateObject();
	int bad = !o || (with_id && add(o, "id", cJSON_CreateNumber((double)i))) || add(o, "content", tk_str(t, i)) ||
		  add(o, "single_word", cJSON_CreateFalse()) || add(o, "lstrip", cJSON_CreateFalse()) ||
		  add(o, "rstrip", cJSON_CreateFalse()) || add(o, "normalized", cJSON_CreateBool(normalized)) ||
		  add(o, "special", cJSON_CreateBool(special));
	if (bad) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* special: CONTROL; a BPE's tokenizer.json entry is normalized unless special */
static cJSON *tk_added(const tok *t, uint64_t i, bool with_id)
{
	bool special = t->type[i] == TT_CONTROL;
	return tk_added_as(t, i, with_id, with_id && !special, special);
}

/* The class transformers loads the family's tokenizer with: the record's,
 * else LlamaTokenizer for a SentencePiece vocabulary and, for a BPE, the
 * class of its pre-tokenizer (Llama 3's fast tokenizer, or GPT-2's) */
static const char *tk_class(const tok *t, bool spm, const char *pre)
{
	const char *cls = t->g ? (spm ? t->g->tok_class_spm : t->g->tok_class_bpe) : NULL;
	if (cls)
		return cls;
	const tpc__gguf_pre *p = spm ? NULL : tpc__gguf_pre_find(pre);
	if (spm)
		return "LlamaTokenizer";
	return p ? p->tok_class : "GPT2Tokenizer";
}

/* chat_template: the string, or [{name, template}...] then "default" */
static int tk_templates(const tok *t, cJSON *cfg)
{
	const tpc_gguf_kv *def = tk_get(t, "tokenizer.chat_template"), *names = tk_get(t, "tokenizer.chat_templates");
	if (def && def->type != TPC_GV_STRING)
		return tk_bad(t, "tokenizer.chat_template", "not a string%.0llu", 0);
	if (names && (names->type != TPC_GV_ARRAY || names->atype != TPC_GV_STRING))
		return tk_bad(t, "tokenizer.chat_templates", "not an array of strings%.0llu", 0);
	if (!names)
		return def && add(cfg, "chat_template", cJSON_CreateString(def->s)) ? tpc_err_nomem(t->e) : 0;
	cJSON *list = cJSON_CreateArray();
	if (add(cfg, "chat_template", list))
		return tpc_err_nomem(t->e);
	for (uint64_t k = 0; k <= names->n; k++) {
		const char *nm = k < names->n ? names->astr[k] : "default";
		const tpc_gguf_kv *tv = def;
		if (k < names->n) {
			char key[256];
			snprintf(key, sizeof(key), "tokenizer.chat_template.%s", nm);
			tv = tk_get(t, key);
			if (!tv || tv->type != TPC_GV_STRING)
				return tk_bad(t, "tokenizer.chat_templates", "template %llu has no string key of its name", k);
		}
		if (!tv)
			continue;
		cJSON *o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(list, o) || add(o, "name", cJSON_CreateString(nm)) ||
		    add(o, "template", cJSON_CreateString(tv->s)))
			return tpc_err_nomem(t->e);
	}
	return 0;
}

/* Where the reference took special id `key` from: SpecialVocab reads
 * tokenizer_config.json's tokens in its type order (bos eos unk sep pad cls
 * mask), then config.json's bos/eos/pad_token_id for the types still unset,
 * then the family sets some by an added token's text (special_text, in its
 * order). The GGUF keeps the ids in that order, so: the last ones, a
 * subsequence of special_text each on its token, were set by text
 * (TK_TEXT); before them, the longest run in type order is
 * tokenizer_config.json's, and what follows it, when it is bos/eos/pad in
 * type order, config.json's (TK_CONFIG). Either left out of the rebuilt
 * tokenizer_config.json, the reference sets them again in their place. */
enum { TK_FILE = 0, TK_CONFIG, TK_TEXT };
static int tk_origin(const tok *t, const char *key)
{
	static const char *const map[][2] = {
		{"bos", "tokenizer.ggml.bos_token_id"}, {"eos", "tokenizer.ggml.eos_token_id"},
		{"unk", "tokenizer.ggml.unknown_token_id"}, {"sep", "tokenizer.ggml.seperator_token_id"},
		{"pad", "tokenizer.ggml.padding_token_id"}, {"cls", "tokenizer.ggml.cls_token_id"},
		{"mask", "tokenizer.ggml.mask_token_id"}, {"eot", "tokenizer.ggml.eot_token_id"},
		{"eom", "tokenizer.ggml.eom_token_id"}};
	enum { NMAP = sizeof(map) / sizeof(map[0]), NDEF = 7 }; /* the first NDEF: the default types, in order */
	size_t ix[NMAP], n = 0, at = NMAP;
	int origin[NMAP];
	for (size_t i = 0; i < t->kv->n && n < NMAP; i++)
		for (size_t m = 0; m < NMAP; m++)
			if (!strcmp(t->kv->kv[i].key, map[m][1])) {
				if (!strcmp(map[m][1], key))
					at = n;
				origin[n] = TK_FILE;
				ix[n++] = m;
			}
	if (at == NMAP)
		return TK_FILE;
	/* the suffix set by text */
	const size_t nst = t->g ? sizeof(t->g->special_text) / sizeof(t->g->special_text[0]) : 0;
	size_t j = 0, end = n;
	while (j < nst && t->g->special_text[j].type)
		j++;
	for (; end > 0 && j > 0; end--, j--) {
		const char *type = map[ix[end - 1]][0], *want;
		int64_t id;
		uint64_t len;
		while (j > 0 && strcmp(t->g->special_text[j - 1].type, type))
			j--;
		if (!j || tk_id(t, map[ix[end - 1]][1], &id) || id < 0)
			break;
		const char *s = tk_text(t, (uint64_t)id, &len);
		want = t->g->special_text[j - 1].token;
		if (len != strlen(want) || memcmp(s, want, len))
			break;
		origin[end - 1] = TK_TEXT;
	}
	/* tokenizer_config.json's run in type order, then config.json's */
	size_t k = 1;
	while (k < end && ix[k] < NDEF && ix[k] > ix[k - 1])
		k++;
	bool cfg = ix[0] < NDEF;
	for (size_t i = k; i < end && cfg; i++)
		cfg = (ix[i] == 0 || ix[i] == 1 || ix[i] == 4) && (i == k || ix[i] > ix[i - 1]);
	for (size_t i = k; i < end && cfg; i++)
		origin[i] = TK_CONFIG;
	return origin[at];
}

/* tokenizer_config.json. A SentencePiece vocabulary names its UNKNOWN piece
 * `unk`; a BPE names only its added tokens (the reference looks the text up
 * among them). A token the GGUF has no id for is left out: transformers then
 * takes the class's default, or none, as it did for the original folder. */
static int tk_config(const tok *t, bool spm, int64_t unk, const char *pre, const bool *added, cJSON *cfg)
{
	static const char *const sp[][2] = {
		{"bos_token", "tokenizer.ggml.bos_token_id"}, {"eos_token", "tokenizer.ggml.eos_token_id"},
		{"unk_token", "tokenizer.ggml.unknown_token_id"}, {"sep_token", "tokenizer.ggml.seperator_token_id"},
		{"pad_token", "tokenizer.ggml.padding_token_id"}, {"mask_token", "tokenizer.ggml.mask_token_id"}};
	int ret = 0;
	if (t->g && t->g->add_space_prefix && tk_bool(t, "tokenizer.ggml.add_space_prefix") >= 0 &&
	    add(cfg, "add_prefix_space", cJSON_CreateBool(tk_bool(t, "tokenizer.ggml.add_space_prefix"))))
		return tpc_err_nomem(t->e);
	static const char *const flags[][2] = {{"add_bos_token", "tokenizer.ggml.add_bos_token"},
					       {"add_eos_token", "tokenizer.ggml.add_eos_token"}};
	for (size_t k = 0; k < 2; k++) {
		int b = tk_bool(t, flags[k][1]);
		if (b >= 0 && add(cfg, flags[k][0], cJSON_CreateBool(b)))
			return tpc_err_nomem(t->e);
	}
	for (size_t k = 0; k < sizeof(sp) / sizeof(sp[0]) && !ret; k++) {
		int64_t id;
		if ((ret = tk_id(t, sp[k][1], &id)))
			return ret;
		if (spm && k == 2)
			id = unk;
		if (id >= 0 && (spm || added[id]) && tk_origin(t, sp[k][1]) == TK_FILE &&
		    add(cfg, sp[k][0], tk_str(t, (uint64_t)id)))
			return tpc_err_nomem(t->e);
	}
	if ((ret = tk_templates(t, cfg)))
		return ret;
	const tpc_gguf_kv *ctx = NULL;
	char key[96];
	snprintf(key, sizeof(key), "%s.context_length", t->arch);
	ctx = tk_get(t, key);
	if (add(cfg, "tokenizer_class", cJSON_CreateString(tk_class(t, spm, pre))) ||
	    (ctx && ctx->type == TPC_GV_U32 && add(cfg, "model_max_length", cJSON_CreateNumber((double)ctx->v.u))))
		return tpc_err_nomem(t->e);
	return 0;
}

/* ---- SentencePiece ---- */

static bool tk_spm_added(const tok *t, uint64_t i)
{
	return (t->type[i] == TT_CONTROL || t->type[i] == TT_USER) && t->score[i] == -1000.0f;
}

/* The UNKNOWN piece among [0, np): -1 when there is none to name. */
static int tk_spm_unk(const tok *t, uint64_t np, int64_t *unk)
{
	int64_t id;
	*unk = -1;
	for (uint64_t i = 0; i < np; i++) {
		if (t->type[i] != TT_UNKNOWN)
			continue;
		if (*unk >= 0)
			return tk_bad(t, "tokenizer.ggml.token_type", "token %llu is a second UNKNOWN", i);
		*unk = (int64_t)i;
	}
	int ret = tk_id(t, "tokenizer.ggml.unknown_token_id", &id);
	if (ret || *unk >= 0)
		return ret;
	if (id >= 0 && (uint64_t)id < np)
		*unk = id;
	else if ((id = tk_find(t, "<unk>", 5)) >= 0 && (uint64_t)id < np)
		*unk = id;
	return 0;
}

static int tk_spm_model(tok *t, uint64_t np, int64_t unk, uint8_t **out, size_t *len)
{
	tpc_spm m = {tpc_calloc(np, sizeof(tpc_spm_piece)), np};
	tpc_spm_spec sp = {2, false, true, false, true, (int32_t)unk, -1, -1, -1, "identity"};
	int64_t ids[3];
	int ret = m.p ? 0 : tpc_err_nomem(t->e);
	static const char *const keys[3] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
					    "tokenizer.ggml.padding_token_id"};
	for (int k = 0; k < 3 && !ret; k++)
		ret = tk_id(t, keys[k], &ids[k]);
	if (!ret) {
		int32_t *dst[3] = {&sp.bos_id, &sp.eos_id, &sp.pad_id};
		for (int k = 0; k < 3; k++)
			*dst[k] = ids[k] >= 0 && (uint64_t)ids[k] < np && ids[k] != unk ? (int32_t)ids[k] : -1;
		sp.add_dummy_prefix = tk_bool(t, "tokenizer.ggml.add_space_prefix") != 0;
	}
	for (uint64_t i = 0; i < np && !ret; i++) {
		uint64_t n;
		static const int st[7] = {0, TPC_SPM_NORMAL, TPC_SPM_NORMAL, TPC_SPM_CONTROL, TPC_SPM_USER_DEFINED,
					  TPC_SPM_UNUSED, TPC_SPM_BYTE};
		const char *s = tk_text(t, i, &n);
		m.p[i].s = (char *)s; /* borrowed: not released through tpc_spm_release */
		m.p[i].len = (uint32_t)n;
		m.p[i].type = (int64_t)i == unk ? TPC_SPM_UNKNOWN : st[t->type[i]];
		m.p[i].score = tk_spm_added(t, i) ? 0.0f : t->score[i];
		sp.byte_fallback = sp.byte_fallback || t->type[i] == TT_BYTE;
	}
	if (!ret)
		ret = tpc_spm_to_buffer(&m, &sp, "tokenizer.ggml.tokens", out, len, t->e);
	free(m.p);
	return ret;
}

/* tokenizer.json beside tokenizer.model: what transformers 5.12 saves for
 * the folder when it can read tokenizer.model (it needs protobuf for that;
 * with tokenizer.json it does not). Its SentencePieceExtractor gives the
 * vocabulary (the pieces, by id) and generate_merges(vocab): for each piece
 * in id order, each split into two pieces, the shorter left part first;
 * the merges rank by the joined piece's id, which is sentencepiece's score
 * order when scores fall with the id, as a trained BPE's do. The added
 * tokens are the UNKNOWN piece and the CONTROL (special) and USER_DEFINED
 * tokens, normalized false. The pipeline is the tokenizer class's own
 * (the record's spm_json): LlamaTokenizer's Metaspace, prepending U+2581
 * to the first section when tokenizer.ggml.add_space_prefix (default
 * true, llama.cpp's) and stripping it back in the decoder, or
 * GemmaTokenizer's; the post-processor adds bos / eos as
 * tokenizer.ggml.add_bos_token / add_eos_token say (llama.cpp's defaults:
 * bos yes, eos no). */
#define SPC "\xe2\x96\x81" /* U+2581, SentencePiece's space */

/* vocab and merges into model; 0 or -1 (out of memory) */
static int tk_spm_vocab(const tok *t, uint64_t np, cJSON *model)
{
	cJSON *voc = cJSON_AddObjectToObject(model, "vocab");
	cJSON *list = voc ? cJSON_AddArrayToObject(model, "merges") : NULL;
	if (!list)
		return -1;
	for (uint64_t i = 0; i < np; i++) {
		cJSON *key = t->pad[i] ? NULL : tk_str(t, i);
		int bad = !t->pad[i] && (!key || add(voc, key->valuestring, cJSON_CreateNumber((double)i)));
		cJSON_Delete(key);
		if (bad)
			return -1;
	}
	for (uint64_t i = 0; i < np; i++) {
		uint64_t len;
		const char *s = tk_text(t, i, &len);
		for (uint64_t k = 1; !t->pad[i] && k < len; k++) {
			if (((uint8_t)s[k] & 0xc0) == 0x80) /* inside a code point */
				continue;
			int64_t l = tk_find(t, s, k), r = tk_find(t, s + k, len - k);
			if (l < 0 || r < 0 || (uint64_t)l >= np || (uint64_t)r >= np || t->pad[l] || t->pad[r])
				continue;
			cJSON *pair = cJSON_CreateArray();
			if (add_item(list, pair) || add_item(pair, tk_str(t, (uint64_t)l)) ||
			    add_item(pair, tk_str(t, (uint64_t)r)))
				return -1;
		}
	}
	return 0;
}

/* {"SpecialToken": {"id": text, "type_id": k}} or {"Sequence": {"id": "A", ...}} */
static int tk_tpl_item(const tok *t, cJSON *list, int64_t id, const char *seq, int type_id)
{
	cJSON *o = cJSON_CreateObject(), *in = cJSON_CreateObject();
	if (add_item(list, o) || add(o, id >= 0 ? "SpecialToken" : "Sequence", in) ||
	    add(in, "id", id >= 0 ? tk_str(t, (uint64_t)id) : cJSON_CreateString(seq)) ||
	    add(in, "type_id", cJSON_CreateNumber(type_id)))
		return -1;
	return 0;
}

/* TemplateProcessing as update_post_processor builds it: [bos] $A [eos],
 * then [bos] $B [eos] of type 1 for a pair (bos, eos: -1 when not added) */
static cJSON *tk_spm_post(const tok *t, int64_t bos, int64_t eos)
{
	cJSON *o = cJSON_CreateObject(), *single = NULL, *pair = NULL, *sp = NULL;
	int bad = !o || add(o, "type", cJSON_CreateString("TemplateProcessing")) ||
		  !(single = cJSON_AddArrayToObject(o, "single")) || !(pair = cJSON_AddArrayToObject(o, "pair")) ||
		  !(sp = cJSON_AddObjectToObject(o, "special_tokens"));
	for (int k = 0; k < 2 && !bad; k++) {
		cJSON *list = k ? pair : single;
		for (int part = 0; part <= k && !bad; part++)
			bad = (bos >= 0 && tk_tpl_item(t, list, bos, NULL, part)) ||
			      tk_tpl_item(t, list, -1, part ? "B" : "A", part) ||
			      (eos >= 0 && tk_tpl_item(t, list, eos, NULL, part));
	}
	int64_t ids[2] = {bos, eos};
	for (int k = 0; k < 2 && !bad; k++) {
		cJSON *key = ids[k] >= 0 ? tk_str(t, (uint64_t)ids[k]) : NULL, *e = NULL, *a = NULL, *b = NULL;
		if (ids[k] < 0 || (key && cJSON_HasObjectItem(sp, key->valuestring))) {
			cJSON_Delete(key);
			continue;
		}
		bad = !key || !(e = cJSON_CreateObject()) || !cJSON_AddItemToObject(sp, key->valuestring, e);
		if (bad)
			cJSON_Delete(e);
		bad = bad || add(e, "id", tk_str(t, (uint64_t)ids[k])) || !(a = cJSON_AddArrayToObject(e, "ids")) ||
		      add_item(a, cJSON_CreateNumber((double)ids[k])) || !(b = cJSON_AddArrayToObject(e, "tokens")) ||
		      add_item(b, tk_str(t, (uint64_t)ids[k]));
		cJSON_Delete(key);
	}
	if (bad) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* normalizer, pre_tokenizer, the decoder's list, the model's unk_token (NULL: null) */
static void tk_spm_pipe(const tok *t, const char **norm, const char **pre, const char **dec, bool *unk)
{
	bool gemma = t->g && t->g->spm_json == TPC_GGUF_SPM_JSON_GEMMA;
	bool prefix = tk_bool(t, "tokenizer.ggml.add_space_prefix") != 0;
	static const char *const metaspace[2] = {
		"{\"type\": \"Metaspace\", \"replacement\": \"" SPC "\", \"prepend_scheme\": \"never\", \"split\": false}",
		"{\"type\": \"Metaspace\", \"replacement\": \"" SPC "\", \"prepend_scheme\": \"first\", \"split\": false}"};
#define DEC "{\"type\": \"Replace\", \"pattern\": {\"String\": \"" SPC "\"}, \"content\": \" \"}, " \
	    "{\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}"
	static const char *const llama_dec[2] = {
		"[" DEC "]", "[" DEC ", {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]"};
	*norm = gemma ? "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"" SPC "\"}" : "null";
	*pre = gemma ? "{\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, \"behavior\": \"MergedWithPrevious\", "
		       "\"invert\": false}"
		     : metaspace[prefix];
	*dec = gemma ? "[" DEC "]" : llama_dec[prefix];
	*unk = gemma;
#undef DEC
}

/* hf: the LlamaHfVocab shape (tk_hf): model.vocab is [0, np), the added
 * tokens are the CONTROL ones and all past np, normalized unless special
 * (transformers' AddedToken default), and the post-processor adds bos /
 * eos only where the GGUF says true (an absent add_bos_token came from a
 * tokenizer.json that added none). */
static int tk_spm_json(tok *t, uint64_t np, int64_t unk, bool hf, tpc_hf_file *f, size_t *nf)
{
	const char *norm, *pre, *dec;
	bool model_unk;
	int64_t bos, eos;
	int ret = tk_id(t, "tokenizer.ggml.bos_token_id", &bos);
	if (!ret)
		ret = tk_id(t, "tokenizer.ggml.eos_token_id", &eos);
	if (ret)
		return ret;
	int add_bos = tk_bool(t, "tokenizer.ggml.add_bos_token");
	bos = add_bos == 1 || (!hf && add_bos < 0) ? bos : -1;
	eos = tk_bool(t, "tokenizer.ggml.add_eos_token") == 1 ? eos : -1;
	tk_spm_pipe(t, &norm, &pre, &dec, &model_unk);
	cJSON *tj = cJSON_CreateObject(), *at = NULL, *model = NULL, *d = NULL;
	int bad = !tj || add(tj, "version", cJSON_CreateString("1.0")) || add(tj, "truncation", cJSON_CreateNull()) ||
		  add(tj, "padding", cJSON_CreateNull()) || !(at = cJSON_AddArrayToObject(tj, "added_tokens"));
	for (uint64_t i = 0; i < t->n && !bad; i++) {
		bool special = (int64_t)i == unk || t->type[i] == TT_CONTROL;
		if (hf && (special || i >= np))
			bad = add_item(at, tk_added_as(t, i, true, !special, special));
		else if (!hf && !t->pad[i] && (special || t->type[i] == TT_USER))
			bad = add_item(at, tk_added_as(t, i, true, false, special));
	}
	bad = bad || add(tj, "normalizer", cJSON_Parse(norm)) || add(tj, "pre_tokenizer", cJSON_Parse(pre)) ||
	      add(tj, "post_processor", tk_spm_post(t, bos, eos)) || !(d = cJSON_AddObjectToObject(tj, "decoder")) ||
	      add(d, "type", cJSON_CreateString("Sequence")) || add(d, "decoders", cJSON_Parse(dec)) ||
	      !(model = cJSON_AddObjectToObject(tj, "model")) || add(model, "type", cJSON_CreateString("BPE")) ||
	      add(model, "dropout", cJSON_CreateNull()) ||
	      add(model, "unk_token", model_unk ? tk_str(t, (uint64_t)unk) : cJSON_CreateNull()) ||
	      add(model, "continuing_subword_prefix", cJSON_CreateNull()) ||
	      add(model, "end_of_word_suffix", cJSON_CreateNull()) || add(model, "fuse_unk", cJSON_CreateTrue()) ||
	      add(model, "byte_fallback", cJSON_CreateTrue()) || add(model, "ignore_merges", cJSON_CreateFalse()) ||
	      tk_spm_vocab(t, np, model);
	ret = bad ? tpc_err_nomem(t->e) : tk_emit(t, f, nf, "tokenizer.json", tj);
	cJSON_Delete(tj);
	return ret;
}
#undef SPC

/* ---- LlamaHfVocab ---- */

/* The size of model.vocab when the GGUF is in the shape gguf-py's
 * LlamaHfVocab writes (a llama-vocabulary family: every score -1000, no
 * UNKNOWN or UNUSED token, the <0xNN> tokens and only they BYTE below the
 * last NORMAL or BYTE token, no USER_DEFINED there: the added tokens past
 * it), else 0. A trained SentencePiece model has scores that differ and
 * an UNKNOWN piece, and the reference's SentencePiece path types <unk>
 * UNKNOWN and pads with -10000: neither is ever in this shape. */
static uint64_t tk_hf_base(const tok *t)
{
	uint64_t nb = 0;
	if (!t->score || !t->g || t->g->vocab != TPC_GGUF_VOCAB_LLAMA)
		return 0;
	for (uint64_t i = 0; i < t->n; i++) {
		if (t->score[i] != -1000.0f || t->type[i] == TT_UNKNOWN || t->type[i] == TT_UNUSED)
			return 0;
		if (t->type[i] == TT_NORMAL || t->type[i] == TT_BYTE)
			nb = i + 1;
	}
	for (uint64_t i = 0; i < nb; i++) {
		uint64_t len;
		const char *s = tk_text(t, i, &len);
		if (t->type[i] == TT_USER || (t->type[i] == TT_BYTE) != tpc__vocab_is_byte(s, len))
			return 0;
	}
	return nb;
}

static int tk_key_cmp(const void *a, const void *b)
{
	return strcmp((*(cJSON *const *)a)->string, (*(cJSON *const *)b)->string);
}

/* o's members in key order, as Python's json.dump(sort_keys=True) writes
 * them (a handful: the object's own list is relinked in place) */
static void tk_sort_keys(cJSON *o)
{
	cJSON *m[32], *it;
	size_t n = 0;
	cJSON_ArrayForEach(it, o)
		if (n++ < sizeof(m) / sizeof(m[0]))
			m[n - 1] = it;
	if (!n || n > sizeof(m) / sizeof(m[0])) /* more than m holds: left as it is */
		return;
	qsort(m, n, sizeof(*m), tk_key_cmp);
	for (size_t k = 0; k < n; k++) {
		m[k]->prev = k ? m[k - 1] : m[n - 1]; /* cJSON: the head's prev is the tail */
		m[k]->next = k + 1 < n ? m[k + 1] : NULL;
	}
	o->child = m[0];
}

/* tokenizer_config.json as transformers 5 saves a Llama tokenizer (its keys
 * sorted): a role names its token when the GGUF's id for it is a CONTROL
 * token (bos, eos, unk null otherwise: LlamaHfVocab refuses them left out),
 * every other CONTROL token is in extra_special_tokens, so that
 * LlamaHfVocab types the same tokens CONTROL and gguf-py's SpecialVocab
 * finds the same ids among tokenizer.json's added tokens. */
static int tk_hf_config(const tok *t, bool *named, cJSON *cfg)
{
	static const char *const roles[][2] = {
		{"bos_token", "tokenizer.ggml.bos_token_id"}, {"eos_token", "tokenizer.ggml.eos_token_id"},
		{"mask_token", "tokenizer.ggml.mask_token_id"}, {"pad_token", "tokenizer.ggml.padding_token_id"},
		{"sep_token", "tokenizer.ggml.seperator_token_id"}, {"unk_token", "tokenizer.ggml.unknown_token_id"}};
	enum { NR = sizeof(roles) / sizeof(roles[0]) };
	int64_t id[NR];
	int ret = 0;
	for (size_t k = 0; k < NR && !ret; k++) {
		ret = tk_id(t, roles[k][1], &id[k]);
		if (!ret && id[k] >= 0 && t->type[id[k]] != TT_CONTROL)
			id[k] = -1;
		if (!ret && id[k] >= 0)
			named[id[k]] = true;
	}
	if (ret)
		return ret;
	static const char *const flags[][2] = {{"add_bos_token", "tokenizer.ggml.add_bos_token"},
					       {"add_eos_token", "tokenizer.ggml.add_eos_token"},
					       {"add_prefix_space", "tokenizer.ggml.add_space_prefix"}};
	for (size_t k = 0; k < 3; k++) {
		int b = tk_bool(t, flags[k][1]);
		if ((b >= 0 || k == 2) && add(cfg, flags[k][0], b >= 0 ? cJSON_CreateBool(b) : cJSON_CreateNull()))
			return tpc_err_nomem(t->e);
	}
	cJSON *extra = NULL;
	for (size_t k = 0; k < NR; k++) {
		bool always = k < 2 || k == NR - 1; /* bos, eos, unk */
		if ((id[k] >= 0 || always) &&
		    add(cfg, roles[k][0], id[k] >= 0 ? tk_str(t, (uint64_t)id[k]) : cJSON_CreateNull()))
			return tpc_err_nomem(t->e);
	}
	for (uint64_t i = 0; i < t->n; i++)
		if (t->type[i] == TT_CONTROL && !named[i] &&
		    ((!extra && add(cfg, "extra_special_tokens", extra = cJSON_CreateArray())) ||
		     add_item(extra, tk_str(t, i))))
			return tpc_err_nomem(t->e);
	if (tk_get(t, "tokenizer.chat_templates") && (ret = tk_templates(t, cfg)))
		return ret;
	char key[96];
	snprintf(key, sizeof(key), "%s.context_length", t->arch);
	const tpc_gguf_kv *ctx = tk_get(t, key);
	if ((ctx && ctx->type == TPC_GV_U32 && add(cfg, "model_max_length", cJSON_CreateNumber((double)ctx->v.u))) ||
	    add(cfg, "tokenizer_class", cJSON_CreateString(tk_class(t, true, NULL))))
		return tpc_err_nomem(t->e);
	tk_sort_keys(cfg);
	return 0;
}

/* A GGUF the reference wrote through LlamaHfVocab (tk_hf_base): the folder
 * transformers 5 saves for it, from which LlamaHfVocab reads the same
 * tokenizer.* keys back. tokenizer.json: model.vocab [0, nb) by id and the
 * merges transformers' generate_merges makes of it (tk_spm_vocab), the
 * added tokens and pipeline of tk_spm_json; tokenizer_config.json
 * (tk_hf_config); the chat template in chat_template.jinja (named ones in
 * tokenizer_config.json); no tokenizer.model. What the GGUF does not
 * keep: an added token's lstrip / rstrip / single_word and its normalized
 * flag (taken as transformers' default, not special), a special token
 * below nb that was not among the added tokens, extra special tokens that
 * are BYTE or NORMAL (LlamaHfVocab's types hide them), model_max_length
 * (the context length is written). */
static int tk_hf(tok *t, uint64_t nb, tpc_hf_file *f, size_t *nf, cJSON *cfg)
{
	bool *named = tpc_calloc(t->n, sizeof(*named));
	int ret = named ? tk_hf_config(t, named, cfg) : tpc_err_nomem(t->e);
	free(named);
	if (!ret)
		ret = tk_spm_json(t, nb, -1, true, f, nf);
	const tpc_gguf_kv *tpl = tk_get(t, "tokenizer.chat_template");
	if (ret || tk_get(t, "tokenizer.chat_templates") || !tpl)
		return ret;
	if (tpl->type != TPC_GV_STRING)
		return tk_bad(t, "tokenizer.chat_template", "not a string%.0llu", 0);
	snprintf(f[*nf].name, sizeof(f[*nf].name), "chat_template.jinja");
	f[*nf].len = strlen(tpl->s);
	if (!(f[*nf].data = tpc_calloc(f[*nf].len + 1, 1)))
		return tpc_err_nomem(t->e);
	memcpy(f[*nf].data, tpl->s, f[*nf].len);
	(*nf)++;
	return 0;
}

static int tk_spm(tok *t, tpc_hf_file *f, size_t *nf, cJSON *cfg)
{
	if (!t->score)
		return tk_bad(t, "tokenizer.ggml.scores", "missing (a SentencePiece vocabulary has scores)%.0llu", 0);
	uint64_t np = tk_hf_base(t);
	if (np)
		return tk_hf(t, np, f, nf, cfg);
	for (uint64_t i = 0; i < t->n; i++)
		if (!t->pad[i] && !tk_spm_added(t, i))
			np = i + 1;
	int64_t unk = -1;
	int ret = np ? tk_spm_unk(t, np, &unk) : tk_bad(t, "tokenizer.ggml.tokens", "no piece%.0llu", 0);
	if (ret)
		return ret;
	if (unk < 0) {
		tk_skip(t, "no UNKNOWN piece (no tokenizer.ggml.unknown_token_id, no '<unk>'): sentencepiece needs one");
		return 0;
	}
	cJSON *dec = cJSON_AddObjectToObject(cfg, "added_tokens_decoder");
	for (uint64_t i = 0; dec && i < t->n; i++) {
		char id[24];
		snprintf(id, sizeof(id), "%llu", (unsigned long long)i);
		if (tk_spm_added(t, i) && add(dec, id, tk_added(t, i, false)))
			dec = NULL;
	}
	if (!dec)
		return tpc_err_nomem(t->e);
	if ((ret = tk_config(t, true, unk, NULL, NULL, cfg)))
		return ret;
	snprintf(f[*nf].name, sizeof(f[*nf].name), "tokenizer.model");
	if ((ret = tk_spm_model(t, np, unk, &f[*nf].data, &f[*nf].len)))
		return ret;
	(*nf)++;
	return tk_spm_json(t, np, unk, false, f, nf);
}

/* ---- BPE ---- */

static cJSON *byte_level(bool regex, bool trim)
{
	cJSON *o = cJSON_CreateObject();
	if (add(o, "type", cJSON_CreateString("ByteLevel")) || add(o, "add_prefix_space", cJSON_CreateFalse()) ||
	    add(o, "trim_offsets", cJSON_CreateBool(trim)) || add(o, "use_regex", cJSON_CreateBool(regex))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* post_processor: a TemplateProcessing putting the BOS token first when
 * tokenizer.ggml.add_bos_token is true (Llama 3's: transformers 5 adds no
 * BOS from tokenizer_config's add_bos_token for a plain tokenizer.json;
 * gguf-py reads the same flag back from it), else null. */
static cJSON *tk_post(const tok *t)
{
	int64_t bos = -1;
	if (tk_bool(t, "tokenizer.ggml.add_bos_token") != 1 || tk_id(t, "tokenizer.ggml.bos_token_id", &bos) || bos < 0 ||
	    (uint64_t)bos >= t->n)
		return cJSON_CreateNull();
	cJSON *b = tk_str(t, (uint64_t)bos), *p = cJSON_CreateObject(), *st, *e, *ids, *toks;
	bool bad = !b || !p || add(p, "type", cJSON_CreateString("TemplateProcessing"));
	static const char *const tmpl[2] = {"single", "pair"};
	for (int k = 0; k < 2 && !bad; k++) {
		cJSON *l = cJSON_AddArrayToObject(p, tmpl[k]), *x, *y;
		bad = !l || add_item(l, x = cJSON_CreateObject()) || !(y = cJSON_AddObjectToObject(x, "SpecialToken")) ||
		      add(y, "id", cJSON_CreateString(b->valuestring)) || add(y, "type_id", cJSON_CreateNumber(0));
		for (int s = 0; s <= k && !bad; s++)
			bad = add_item(l, x = cJSON_CreateObject()) || !(y = cJSON_AddObjectToObject(x, "Sequence")) ||
			      add(y, "id", cJSON_CreateString(s ? "B" : "A")) || add(y, "type_id", cJSON_CreateNumber(s));
	}
	bad = bad || !(st = cJSON_AddObjectToObject(p, "special_tokens")) ||
	      !(e = cJSON_AddObjectToObject(st, b->valuestring)) || add(e, "id", cJSON_CreateString(b->valuestring)) ||
	      !(ids = cJSON_AddArrayToObject(e, "ids")) || add_item(ids, cJSON_CreateNumber((double)bos)) ||
	      !(toks = cJSON_AddArrayToObject(e, "tokens")) || add_item(toks, cJSON_CreateString(b->valuestring));
	cJSON_Delete(b);
	if (bad) {
		cJSON_Delete(p);
		return NULL;
	}
	return p;
}

/* normalizer, pre_tokenizer, decoder, model.ignore_merges for `pre`; 1: not expressed */
static int tk_pre(tok *t, const char *pre, cJSON *tj, cJSON *model)
{
	const tpc__gguf_pre *row = tpc__gguf_pre_find(pre);
	if (!row) {
		snprintf(t->why, t->whylen,
			 "tokenizer.ggml.pre '%.40s' is not one tpconv writes a tokenizer.json for (gpt-2, olmo, qwen2, llama-bpe)",
			 pre);
		return 1;
	}
	const char *re = row->regex;
	bool nfc = tk_bool(t, "tokenizer.ggml.normalizer.nfc") == 1 || row->nfc;
	if (tk_bool(t, "tokenizer.ggml.normalizer.lowercase") == 1 || tk_bool(t, "tokenizer.ggml.normalizer.strip_accents") == 1) {
		tk_skip(t, "tokenizer.ggml.normalizer.lowercase / strip_accents are not written into a tokenizer.json yet");
		return 1;
	}
	cJSON *norm = nfc ? cJSON_CreateObject() : cJSON_CreateNull(), *pt = NULL;
	if (add(tj, "normalizer", norm) || (nfc && add(norm, "type", cJSON_CreateString("NFC"))))
		return -1;
	if (!re) {
		pt = byte_level(true, true);
	} else {
		cJSON *list = NULL, *split = NULL, *pat = NULL;
		pt = cJSON_CreateObject();
		if (add(pt, "type", cJSON_CreateString("Sequence")) || !(list = cJSON_AddArrayToObject(pt, "pretokenizers")) ||
		    !(split = cJSON_CreateObject()) || !cJSON_AddItemToArray(list, split) ||
		    add(split, "type", cJSON_CreateString("Split")) || !(pat = cJSON_AddObjectToObject(split, "pattern")) ||
		    add(pat, "Regex", cJSON_CreateString(re)) || add(split, "behavior", cJSON_CreateString("Isolated")) ||
		    add(split, "invert", cJSON_CreateFalse()) || add_item(list, byte_level(false, false))) {
			if (split && !split->prev) /* not attached */
				cJSON_Delete(split);
			cJSON_Delete(pt);
			return -1;
		}
	}
	if (add(tj, "pre_tokenizer", pt) || add(tj, "post_processor", tk_post(t)) ||
	    add(tj, "decoder", byte_level(true, true)) ||
	    add(model, "ignore_merges", cJSON_CreateBool(row->ignore_merges)))
		return -1;
	return 0;
}

/* model.merges: each "a b" with a, b and ab tokens */
static int tk_merges(const tok *t, cJSON *model)
{
	const tpc_gguf_kv *m;
	int ret = tk_arr(t, "tokenizer.ggml.merges", TPC_GV_STRING, false, &m);
	cJSON *list = cJSON_CreateArray();
	if (ret || add(model, "merges", list))
		return ret ? ret : tpc_err_nomem(t->e);
	for (uint64_t k = 0; m && k < m->n; k++) {
		const char *s = m->astr[k], *sp = memchr(s, ' ', m->alen[k]);
		uint64_t n = m->alen[k], a = sp ? (uint64_t)(sp - s) : 0;
		char *ab = tpc_calloc(n + 1, 1);
		if (!ab)
			return tpc_err_nomem(t->e);
		if (sp) {
			memcpy(ab, s, a);
			memcpy(ab + a, sp + 1, n - a - 1);
		}
		bool ok = sp && a && a + 1 < n && !memchr(sp + 1, ' ', n - a - 1) && !memchr(s, 0, n) &&
			  tk_find(t, s, a) >= 0 && tk_find(t, sp + 1, n - a - 1) >= 0 && tk_find(t, ab, n - 1) >= 0;
		free(ab);
		if (!ok)
			return tk_bad(t, "tokenizer.ggml.merges",
				      "merge %llu is not two tokens of tokenizer.ggml.tokens whose join is one", k);
		cJSON *str = cJSON_CreateString(s);
		if (!str || !cJSON_AddItemToArray(list, str))
			return tpc_err_nomem(t->e);
	}
	return 0;
}

/* Out of memory, or the tokenizer.json of a "gpt2" vocabulary */
static int tk_bpe_json(tok *t, const char *pre, bool *added, cJSON *tj)
{
	cJSON *model = cJSON_CreateObject(), *voc = NULL, *at = NULL;
	int ret = model ? 0 : -1;
	if (!ret && (add(tj, "version", cJSON_CreateString("1.0")) || add(tj, "truncation", cJSON_CreateNull()) ||
		     add(tj, "padding", cJSON_CreateNull()) || !(at = cJSON_AddArrayToObject(tj, "added_tokens"))))
		ret = -1;
	if (!ret && (add(model, "type", cJSON_CreateString("BPE")) || add(model, "dropout", cJSON_CreateNull()) ||
		     add(model, "unk_token", cJSON_CreateNull()) || add(model, "continuing_subword_prefix", cJSON_CreateNull()) ||
		     add(model, "end_of_word_suffix", cJSON_CreateNull()) || add(model, "fuse_unk", cJSON_CreateFalse()) ||
		     add(model, "byte_fallback", cJSON_CreateFalse()) || !(voc = cJSON_AddObjectToObject(model, "vocab"))))
		ret = -1;
	for (uint64_t i = 0; !ret && i < t->n; i++) {
		if (t->pad[i])
			continue;
		added[i] = t->type[i] == TT_CONTROL || t->type[i] == TT_USER;
		cJSON *key = tk_str(t, i);
		if ((added[i] && add_item(at, tk_added(t, i, true))) || !key ||
		    add(voc, key->valuestring, cJSON_CreateNumber((double)i)))
			ret = -1;
		cJSON_Delete(key);
	}
	if (!ret)
		ret = tk_pre(t, pre, tj, model);
	if (!ret) {
		ret = add(tj, "model", model);
		model = NULL;
	}
	cJSON_Delete(model);
	return ret;
}

static int tk_bpe(tok *t, tpc_hf_file *f, size_t *nf, cJSON *cfg)
{
	const tpc_gguf_kv *pk = tk_get(t, "tokenizer.ggml.pre");
	const char *pre = pk && pk->type == TPC_GV_STRING ? pk->s : "default";
	bool *added = tpc_calloc(t->n, sizeof(*added));
	cJSON *tj = cJSON_CreateObject();
	int ret = added && tj ? tk_bpe_json(t, pre, added, tj) : -1;
	if (ret == -1)
		ret = tpc_err_nomem(t->e);
	if (ret == 1) /* not expressed: t->why says why */
		ret = 0;
	else if (!ret)
		ret = tk_merges(t, cJSON_GetObjectItem(tj, "model"));
	if (!ret && !t->why[0])
		ret = tk_config(t, false, -1, pre, added, cfg);
	if (!ret && !t->why[0])
		ret = tk_emit(t, f, nf, "tokenizer.json", tj);
	cJSON_Delete(tj);
	free(added);
	return ret;
}

/* ---- HunYuan's tiktoken (TPC_GGUF_VOCAB_HY_TIKTOKEN) ---- */

/* hy.tiktoken from the NORMAL tokens before the first other one (each its
 * GPT-2 byte text, base64, its rank): what HunYuanMoEModel.set_vocab wrote
 * them from. The rest must be tokenization_hy.py's special tokens in their
 * order (CONTROL), and tokenizer.ggml.merges the merges the ranks give
 * (gguf_tiktoken.c), else the file would not convert back to this GGUF:
 * refused by name. Returns the text in *out. */
static int tk_hy_file(tok *t, char **out, size_t *olen)
{
	uint64_t nr = 0, cap = 1;
	char name[32];
	while (nr < t->n && t->type[nr] == TT_NORMAL)
		nr++;
	for (uint64_t i = nr; i < t->n; i++) {
		uint64_t len;
		const char *s = tk_text(t, i, &len), *want = tpc__hy_special((size_t)(i - nr), name, sizeof(name));
		if (t->type[i] != TT_CONTROL || len != strlen(want) || memcmp(s, want, len))
			return tk_bad(t, "tokenizer.ggml.tokens", "token %llu is not tokenization_hy.py's special token of its place",
				      i);
	}
	if (t->n < nr + 5 || !nr)
		return tk_bad(t, "tokenizer.ggml.tokens", "%llu special tokens after the ranks, not 5 or more", t->n - nr);
	for (uint64_t i = 0; i < nr; i++)
		cap += 4 * (t->tokens->alen[i] + 2) / 3 + 24;
	char *txt = malloc(cap);
	uint8_t *b = malloc(cap);
	size_t o = 0;
	int ret = txt && b ? 0 : tpc_err_nomem(t->e);
	for (uint64_t i = 0; i < nr && !ret; i++) {
		uint64_t len;
		const char *s = tk_text(t, i, &len);
		int64_t n = tpc__gpt2_str_bytes(s, len, b);
		if (n <= 0)
			ret = tk_bad(t, "tokenizer.ggml.tokens", "token %llu is not GPT-2 byte text", i);
		else
			o += tpc__b64_encode(b, (size_t)n, txt + o);
		o += (size_t)snprintf(txt + o, cap - o, " %llu\n", (unsigned long long)i);
	}
	free(b);
	if (ret) {
		free(txt);
		return ret;
	}
	*out = txt;
	*olen = o;
	return 0;
}

static int tk_hy_merges(tok *t, const char *txt, size_t len)
{
	tpc__tiktoken tt;
	const tpc_gguf_kv *mg = NULL;
	int ret = tk_arr(t, "tokenizer.ggml.merges", TPC_GV_STRING, false, &mg);
	if (!ret)
		ret = tpc__tiktoken_from_buffer(txt, len, "hy.tiktoken", &tt, t->e);
	if (ret)
		return ret;
	uint64_t m = 0;
	char *s = NULL;
	for (size_t r = 0; r < tt.n && !ret; r++) {
		size_t split = 0, n = (size_t)(tt.off[r + 1] - tt.off[r]);
		int two = n > 1 ? tpc__tiktoken_merge(&tt, r, &split) : 0;
		if (two < 0 || (two && !(s = realloc(s, 4 * n + 2)))) {
			ret = tpc_err_nomem(t->e);
			break;
		}
		if (!two)
			continue;
		size_t a = tpc__gpt2_bytes_str(tt.bytes + tt.off[r], split, s);
		s[a] = ' ';
		a += 1 + tpc__gpt2_bytes_str(tt.bytes + tt.off[r] + split, n - split, s + a + 1);
		if (!mg || m >= mg->n || mg->alen[m] != a || memcmp(mg->astr[m], s, a))
			ret = tk_bad(t, "tokenizer.ggml.merges", "merge %llu is not the one hy.tiktoken's ranks give", m);
		m++;
	}
	if (!ret && (mg ? mg->n : 0) != m)
		ret = tk_bad(t, "tokenizer.ggml.merges", "%llu merges, not the ones hy.tiktoken's ranks give", mg ? mg->n : 0);
	free(s);
	tpc__tiktoken_release(&tt);
	return ret;
}

/* hy.tiktoken and a tokenizer_config.json naming tokenization_hy.HYTokenizer
 * (Tencent's module itself is not written: transformers needs it beside
 * them; the reference reads the ids from config.json); the pre-tokenizer
 * must be the record's (hy part: "hunyuan", "hunyuan-dense"), what the
 * vocabulary converts back to */
static int tk_hy(tok *t, tpc_hf_file *f, size_t *nf, cJSON *cfg)
{
	const tpc_gguf_kv *pk = tk_get(t, "tokenizer.ggml.pre");
	const char *want = t->g->hy ? t->g->hy->pre : "";
	char *txt = NULL;
	size_t len = 0;
	if (!pk || pk->type != TPC_GV_STRING || strcmp(pk->s, want)) {
		snprintf(t->why, t->whylen, "tokenizer.ggml.pre is not '%s', the one a HunYuan hy.tiktoken converts back to",
			 want);
		return 0;
	}
	int ret = tk_hy_file(t, &txt, &len);
	if (!ret)
		ret = tk_hy_merges(t, txt, len);
	if (ret) {
		free(txt);
		return ret;
	}
	snprintf(f[*nf].name, sizeof(f[*nf].name), "hy.tiktoken");
	f[*nf].data = (uint8_t *)txt;
	f[(*nf)++].len = len;
	static const char *const flags[][2] = {{"add_bos_token", "tokenizer.ggml.add_bos_token"},
					       {"add_eos_token", "tokenizer.ggml.add_eos_token"}};
	for (size_t k = 0; k < 2; k++) {
		int b = tk_bool(t, flags[k][1]);
		if (b >= 0 && add(cfg, flags[k][0], cJSON_CreateBool(b)))
			return tpc_err_nomem(t->e);
	}
	if ((ret = tk_templates(t, cfg)))
		return ret;
	cJSON *am = cJSON_CreateObject(), *at = cJSON_CreateArray();
	if (!am || !at || add(am, "AutoTokenizer", at) || add(cfg, "auto_map", am) ||
	    !cJSON_AddItemToArray(at, cJSON_CreateString("tokenization_hy.HYTokenizer")) ||
	    !cJSON_AddItemToArray(at, cJSON_CreateNull()) ||
	    add(cfg, "tokenizer_class", cJSON_CreateString("HYTokenizer")))
		return tpc_err_nomem(t->e);
	return 0;
}

/* Whether the GGUF's vocabulary is a HunYuan hy.tiktoken one: the record's
 * kind says so, or may (HunYuanModel's; then its pre-tokenizer says) */
static bool tk_is_hy(const tok *t)
{
	const tpc_gguf_kv *pk = tk_get(t, "tokenizer.ggml.pre");
	if (!t->g || !t->g->hy)
		return false;
	if (t->g->vocab == TPC_GGUF_VOCAB_HY_TIKTOKEN)
		return true;
	return t->g->vocab == TPC_GGUF_VOCAB_HY_TIKTOKEN_OR_BPE && pk && pk->type == TPC_GV_STRING &&
	       !strcmp(pk->s, t->g->hy->pre);
}

/* generation_config.json where the record's hy part takes eot from it
 * (HunYuanModel: the first of two or more eos ids): eos_token_id [eot,
 * eos] (eos the GGUF's, else eot again), what converts back to both */
static int tk_hy_gen(tok *t, tpc_hf_file *f, size_t *nf)
{
	int64_t eot = -1, eos = -1;
	if (!t->g || !t->g->hy || !t->g->hy->eot_gen)
		return 0;
	int ret = tk_id(t, "tokenizer.ggml.eot_token_id", &eot);
	if (!ret)
		ret = tk_id(t, "tokenizer.ggml.eos_token_id", &eos);
	if (ret || eot < 0)
		return ret;
	if (*nf >= TPC_HF_FILES_MAX)
		return tpc_err_at(t->e, TPC_EINPUT, t->ck->path, NULL, "internal: more than %d tokenizer files", TPC_HF_FILES_MAX);
	cJSON *g = cJSON_CreateObject(), *l = g ? cJSON_AddArrayToObject(g, "eos_token_id") : NULL;
	if (!l || !cJSON_AddItemToArray(l, cJSON_CreateNumber((double)eot)) ||
	    !cJSON_AddItemToArray(l, cJSON_CreateNumber((double)(eos >= 0 ? eos : eot)))) {
		cJSON_Delete(g);
		return tpc_err_nomem(t->e);
	}
	ret = tk_emit(t, f, nf, "generation_config.json", g);
	cJSON_Delete(g);
	return ret;
}

int tpc__gguf_hf_tokenizer(const tpc_ckpt *ck, tpc_hf_file *f, size_t *nf, char *why, size_t whylen, tpc_err *e)
{
	tok t;
	memset(&t, 0, sizeof(t));
	t.ck = ck;
	t.kv = tpc_gguf_ckpt_kvs(ck);
	t.e = e;
	t.why = why;
	t.whylen = whylen;
	*nf = 0;
	why[0] = '\0';
	if (!t.kv)
		return tpc_err_at(e, TPC_EINPUT, ck->path, NULL, "internal: not a checkpoint read from GGUF");
	const tpc_gguf_kv *a = tk_get(&t, "general.architecture"), *m = tk_get(&t, "tokenizer.ggml.model");
	t.arch = a && a->type == TPC_GV_STRING ? a->s : "";
	const tpc_family *fam = tpc_family_by_gguf(t.arch, -1);
	t.g = fam ? fam->gguf : NULL;
	if (!m || m->type != TPC_GV_STRING) {
		tk_skip(&t, "the GGUF has no tokenizer.ggml.model");
		return 0;
	}
	bool spm = !strcmp(m->s, "llama");
	if (!spm && strcmp(m->s, "gpt2")) {
		snprintf(why, whylen, "tokenizer.ggml.model '%.40s' is not one tpconv writes (llama, gpt2)", m->s);
		return 0;
	}
	cJSON *cfg = cJSON_CreateObject();
	int ret = cfg ? tk_load(&t) : tpc_err_nomem(e);
	if (!ret && !spm && tk_is_hy(&t))
		ret = tk_hy(&t, f, nf, cfg);
	else if (!ret)
		ret = spm ? tk_spm(&t, f, nf, cfg) : tk_bpe(&t, f, nf, cfg);
	if (!ret && !why[0])
		ret = tk_emit(&t, f, nf, "tokenizer_config.json", cfg);
	if (!ret && !why[0])
		ret = tk_hy_gen(&t, f, nf);
	if (ret || why[0]) {
		tpc_hf_files_release(f, *nf);
		*nf = 0;
	}
	cJSON_Delete(cfg);
	tk_release(&t);
	return ret;
}
