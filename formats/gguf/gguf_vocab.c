/*
 * gguf_vocab.c - the tokenizer.* keys convert_hf_to_gguf.py (llama.cpp
 * 0.7.0) writes, for the families tpconv converts:
 *   llama (llama, mistral, mixtral)  tokenizer_config add_prefix_space, then
 *        tokenizer.model (SentencePiece) or, without one, tokenizer.json: a
 *        SentencePiece-style BPE (byte_fallback, a Sequence decoder: what
 *        transformers 5 saves for Llama; LlamaHfVocab) or a GPT-2 style BPE
 *        (Llama 3); CodeLlama's FIM ids (vocab 32016)
 *   gemma   SentencePiece, its fixed eot id 107, add_space_prefix false
 *   gemma2  SentencePiece, add_space_prefix false; gemma3 the same when
 *           there is a tokenizer.model, else BPE
 *   phi3    its own SentencePiece loop (tokenizer.json added_tokens too),
 *           or BPE when tokenizer_config names GPT2Tokenizer
 *   qwen2, qwen3  SentencePiece when there is a tokenizer.model, else BPE
 *   qwen2moe, qwen3moe, gpt2, gptneox  BPE from tokenizer.json
 * then gguf-py's SpecialVocab (gguf_special.c).
 *
 * tokenizer.ggml.pre for BPE: the reference encodes a check text with
 * Hugging Face tokenizers and looks the SHA-256 of the ids up in a table of
 * published tokenizers (get_vocab_base_pre). tpconv does not run
 * tokenizers: the name is the caller's (tpc_gguf_vocab_pre) or, without
 * one, the llama.cpp pre-tokenizer that splits as tokenizer.json's
 * pre_tokenizer does (gguf_pre.c); a tokenizer it cannot map is refused,
 * naming the key: a guessed name would make llama.cpp split text
 * differently without a word.
 */
#include <stdlib.h>
#include <string.h>

#include "gguf_vocab_int.h"
#include "spm.h"
#include "tpc_family_gguf.h"
#include "tpc_io.h"
#include "tpc_util.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

typedef struct vocab {
	tpc__vocab_dir vd;
	tpc_err *e;
	const tpc_gguf_arch *g; /* the record's GGUF part; NULL: none */
	char **tok;
	uint64_t *len;
	float *score;
	int32_t *type;
	size_t n;
	int64_t size;    /* config.json's vocab_size */
	const char *pre; /* tokenizer.ggml.pre given by the caller, or NULL */
} vocab;

static int v_alloc(vocab *v, size_t n)
{
	v->tok = calloc(n ? n : 1, sizeof(*v->tok));
	v->len = calloc(n ? n : 1, sizeof(*v->len));
	v->score = calloc(n ? n : 1, sizeof(*v->score));
	v->type = calloc(n ? n : 1, sizeof(*v->type));
	if (!v->tok || !v->len || !v->score || !v->type)
		return tpc_err_set(v->e, TPC_EIO, "out of memory");
	v->n = n;
	return 0;
}

static void v_release(vocab *v)
{
	tpc_free_strv(v->tok, v->n);
	free(v->len);
	free(v->score);
	free(v->type);
	cJSON_Delete(v->vd.tok_json);
	cJSON_Delete(v->vd.tok_cfg);
	tpc_cfg_free(v->vd.config);
}

/* tok[i] = s[0..n) (copied); with `space`, U+2581 becomes ' ' (the
 * reference's "pre-normalize user-defined spaces"). */
static int v_set(vocab *v, size_t i, const char *s, size_t n, bool space)
{
	char *c = malloc(n + 1);
	if (!c)
		return tpc_err_set(v->e, TPC_EIO, "out of memory");
	size_t k = 0;
	for (size_t j = 0; j < n; j++) {
		if (space && n - j >= 3 && !memcmp(s + j, "\xe2\x96\x81", 3)) {
			c[k++] = ' ';
			j += 2;
		} else {
			c[k++] = s[j];
		}
	}
	c[k] = '\0';
	free(v->tok[i]);
	v->tok[i] = c;
	v->len[i] = k;
	return 0;
}

static int v_pad(vocab *v, size_t i, float score)
{
	char b[32];
	int n = snprintf(b, sizeof(b), "[PAD%zu]", i);
	v->score[i] = score;
	v->type[i] = TT_UNUSED;
	return v_set(v, i, b, (size_t)n, false);
}

static int v_refuse(vocab *v, const char *file, const char *fmt, const char *what)
{
	char *path = tpc_path_join(v->vd.dir, file);
	int ret = tpc_err_at(v->e, TPC_EINPUT, path ? path : file, NULL, fmt, what);
	free(path);
	return ret;
}

static bool v_has(const vocab *v, const char *name)
{
	char *p = tpc_path_join(v->vd.dir, name);
	bool r = p && tpc_exists(p);
	free(p);
	return r;
}

/* ModelBase.does_token_look_special */
static bool v_looks_special(const char *t)
{
	size_t n = strlen(t);
	static const char *const exact[] = {"<pad>", "<mask>", "<2mass>", "[@BOS@]"};
	for (size_t i = 0; i < 4; i++)
		if (!strcmp(t, exact[i]))
			return true;
#define PFX(p) (n >= strlen(p) && !strncmp(t, p, strlen(p)))
#define SFX(p) (n >= strlen(p) && !strcmp(t + n - strlen(p), p))
	return (PFX("<|") && SFX("|>")) || (PFX("<\xef\xbd\x9c") && SFX("\xef\xbd\x9c>")) || (PFX("<unused") && SFX(">"));
#undef PFX
#undef SFX
}

/* A token id from a JSON key (added_tokens_decoder's "12"): decimal only. */
static bool v_key_id(const char *k, int64_t *id)
{
	char *end;
	if (!k[0] || (k[0] < '0' || k[0] > '9'))
		return false;
	unsigned long long x = strtoull(k, &end, 10);
	if (*end || x > INT64_MAX)
		return false;
	*id = (int64_t)x;
	return true;
}

/* The pieces of tokenizer.model into tok[0..vocab_size), the rest
 * [PAD{i}] at -10000. phi3's loop has no range check (an index error in
 * the Python: refused). */
static int v_spm_pieces(vocab *v, int64_t vocab_size, bool phi3)
{
	tpc_spm m;
	char *path = tpc_path_join(v->vd.dir, "tokenizer.model");
	int ret = path ? tpc_spm_from_file(path, &m, v->e) : tpc_err_set(v->e, TPC_EIO, "out of memory");
	free(path);
	if (ret)
		return ret;
	size_t n = vocab_size > 0 ? (size_t)vocab_size : m.n;
	if (phi3 && n < m.n)
		ret = v_refuse(v, "config.json", "%s is smaller than tokenizer.model's pieces (the reference fails)",
			       "vocab_size");
	if (!ret)
		ret = v_alloc(v, n);
	for (size_t i = 0; i < n && !ret; i++) {
		if (i >= m.n) {
			ret = v_pad(v, i, -10000.0f);
			continue;
		}
		const tpc_spm_piece *p = &m.p[i];
		static const int32_t tt[7] = {0, TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_NORMAL, TT_UNUSED, TT_BYTE};
		v->score[i] = p->score;
		v->type[i] = tt[p->type]; /* USER_DEFINED pieces: none of IsUnknown .. IsByte, so NORMAL */
		ret = v_set(v, i, p->s, p->len, false);
	}
	tpc_spm_release(&m);
	return ret;
}

/* added_tokens.json: {token: id}, ids past the vocabulary ignored. */
static int v_added_tokens_json(vocab *v)
{
	cJSON *j = NULL;
	int ret = tpc__vocab_json(v->vd.dir, "added_tokens.json", &j, v->e);
	const cJSON *it;
	if (!ret && j && !cJSON_IsObject(j))
		ret = v_refuse(v, "added_tokens.json", "%s is not an object", "added_tokens.json");
	cJSON_ArrayForEach(it, (ret ? (cJSON *)NULL : j)) {
		int64_t id;
		if (!tpc__json_int(it, &id) || id < 0) {
			ret = v_refuse(v, "added_tokens.json", "token '%s': its id is not a token id", it->string);
			break;
		}
		if ((uint64_t)id >= v->n)
			continue;
		v->score[id] = -1000.0f;
		v->type[id] = TT_USER;
		ret = v_set(v, (size_t)id, it->string, strlen(it->string), false);
	}
	cJSON_Delete(j);
	return ret;
}

/* One entry of tokenizer_config's added_tokens_decoder or tokenizer.json's
 * added_tokens at `id`: llama style (looks-special, U+2581 -> ' ', range
 * check) or phi3's (special flag only, no range check). */
static int v_added_entry(vocab *v, int64_t id, const cJSON *data, bool phi3, const char *file)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(data, "content");
	if (!cJSON_IsString(c))
		return v_refuse(v, file, "added token %s has no text content", "");
	if (id < 0 || (uint64_t)id >= v->n) {
		if (!phi3 && id >= 0)
			return 0; /* ignored, as the reference warns */
		return v_refuse(v, file, "added token '%s': id outside the vocabulary (the reference fails)",
				c->valuestring);
	}
	bool special = tpc__json_truthy(cJSON_GetObjectItemCaseSensitive(data, "special"));
	v->score[id] = -1000.0f;
	if (phi3) {
		v->type[id] = special ? TT_CONTROL : TT_USER;
		return v_set(v, (size_t)id, c->valuestring, strlen(c->valuestring), false);
	}
	special = special || v_looks_special(c->valuestring);
	v->type[id] = special ? TT_CONTROL : TT_USER;
	return v_set(v, (size_t)id, c->valuestring, strlen(c->valuestring), !special);
}

static int v_added_decoder(vocab *v, bool phi3)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(v->vd.tok_cfg, "added_tokens_decoder"), *it;
	int ret = 0;
	cJSON_ArrayForEach(it, (cJSON_IsObject(d) ? d : (cJSON *)NULL)) {
		int64_t id;
		if (!v_key_id(it->string, &id) || !cJSON_IsObject(it))
			return v_refuse(v, "tokenizer_config.json", "added_tokens_decoder: '%s' is not a token id",
					it->string);
		if ((ret = v_added_entry(v, id, it, phi3, "tokenizer_config.json")))
			return ret;
	}
	if (!phi3)
		return 0;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(v->vd.tok_json, "added_tokens");
	cJSON_ArrayForEach(it, (cJSON_IsArray(a) ? a : (cJSON *)NULL)) {
		int64_t id;
		if (!tpc__json_int(cJSON_GetObjectItemCaseSensitive(it, "id"), &id))
			return v_refuse(v, "tokenizer.json", "added_tokens: %s without an integer id", "an entry");
		if ((ret = v_added_entry(v, id, it, true, "tokenizer.json")))
			return ret;
	}
	return 0;
}

/* Arrays as gguf-py packs them: f32 and i32, little-endian. */
static int v_add_arrays(vocab *v, tpc_gguf_kvs *kv, bool scores)
{
	uint8_t *b = malloc(v->n * 4 + 1);
	if (!b)
		return tpc_err_set(v->e, TPC_EIO, "out of memory");
	int bad = tpc_gguf_kvs_strs(kv, "tokenizer.ggml.tokens", (const char *const *)v->tok, v->len, v->n);
	if (scores) {
		for (size_t i = 0; i < v->n; i++) {
			uint32_t u;
			memcpy(&u, &v->score[i], 4);
			tpc_wr32le(b + 4 * i, u);
		}
		bad = bad || tpc_gguf_kvs_arr(kv, "tokenizer.ggml.scores", TPC_GV_F32, b, v->n);
	}
	for (size_t i = 0; i < v->n; i++)
		tpc_wr32le(b + 4 * i, (uint32_t)v->type[i]);
	bad = bad || tpc_gguf_kvs_arr(kv, "tokenizer.ggml.token_type", TPC_GV_I32, b, v->n);
	free(b);
	return bad ? tpc_err_set(v->e, TPC_EIO, "out of memory") : 0;
}

static int v_kv_str(vocab *v, tpc_gguf_kvs *kv, const char *key, const char *s)
{
	return tpc_gguf_kvs_str(kv, key, s, strlen(s)) ? tpc_err_set(v->e, TPC_EIO, "out of memory") : 0;
}

/* What a "llama" vocabulary (SentencePiece or LlamaHfVocab) writes after its
 * tokens: the model and pre names, the arrays, then SpecialVocab. */
static int v_llama_keys(vocab *v, tpc_gguf_kvs *kv)
{
	int ret = v_kv_str(v, kv, "tokenizer.ggml.model", "llama");
	if (!ret)
		ret = v_kv_str(v, kv, "tokenizer.ggml.pre", "default");
	if (!ret)
		ret = v_add_arrays(v, kv, true);
	if (!ret)
		ret = tpc__special_vocab(&v->vd, false, NULL, 0, (int64_t)v->n, NULL, 0, false, kv, v->e);
	return ret;
}

/* _set_vocab_sentencepiece, or Phi3MiniModel.set_vocab's loop. */
static int v_spm(vocab *v, int64_t vocab_size, bool phi3, tpc_gguf_kvs *kv)
{
	int ret = v_spm_pieces(v, vocab_size, phi3);
	if (!ret)
		ret = v_added_tokens_json(v);
	if (!ret)
		ret = v_added_decoder(v, phi3);
	if (!ret)
		ret = v_llama_keys(v, kv);
	return ret;
}

/* ModelBase.get_vocab_base for a tokenizer.json BPE: the model vocabulary
 * and added_tokens by id, [PAD{i}] for ids neither has; an added token is
 * CONTROL when special or looking special, else USER_DEFINED. */
static int v_bpe_tokens(vocab *v, int64_t vocab_size)
{
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(v->vd.tok_json, "model");
	const cJSON *voc = cJSON_GetObjectItemCaseSensitive(model, "vocab"), *it;
	const cJSON *added = cJSON_GetObjectItemCaseSensitive(v->vd.tok_json, "added_tokens");
	const char *mt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(model, "type"));
	if (!mt || strcmp(mt, "BPE") || !cJSON_IsObject(voc))
		return v_refuse(v, "tokenizer.json", "%s: a BPE model with a vocab object is read (no other)", "model");
	int64_t maxid = -1, count = 0, id;
	cJSON_ArrayForEach(it, voc) {
		if (!tpc__json_int(it, &id) || id < 0 || id > INT32_MAX)
			return v_refuse(v, "tokenizer.json", "model.vocab: token '%s' has no valid id", it->string);
		maxid = id > maxid ? id : maxid;
		count++;
	}
	cJSON_ArrayForEach(it, (cJSON_IsArray(added) ? added : (cJSON *)NULL)) {
		if (!tpc__json_int(cJSON_GetObjectItemCaseSensitive(it, "id"), &id) || id < 0 || id > INT32_MAX ||
		    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(it, "content")))
			return v_refuse(v, "tokenizer.json", "added_tokens: %s without an id and a text content", "an entry");
		maxid = id > maxid ? id : maxid;
		count += !cJSON_GetObjectItemCaseSensitive(voc, cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring);
	}
	int64_t n = vocab_size > 0 ? vocab_size : count;
	if (maxid >= n)
		return v_refuse(v, "config.json", "%s is not above every token id of tokenizer.json (the reference fails)",
				"vocab_size");
	int ret = v_alloc(v, (size_t)n);
	cJSON_ArrayForEach(it, (ret ? (cJSON *)NULL : voc)) {
		tpc__json_int(it, &id);
		if (v->tok[id] && strcmp(v->tok[id], it->string))
			return v_refuse(v, "tokenizer.json", "model.vocab: two tokens have the id of '%s'", it->string);
		v->type[id] = TT_NORMAL;
		if ((ret = v_set(v, (size_t)id, it->string, strlen(it->string), false)))
			return ret;
	}
	cJSON_ArrayForEach(it, (ret || !cJSON_IsArray(added) ? (cJSON *)NULL : added)) {
		const char *c = cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring;
		tpc__json_int(cJSON_GetObjectItemCaseSensitive(it, "id"), &id);
		if (v->tok[id] && strcmp(v->tok[id], c))
			return v_refuse(v, "tokenizer.json", "added token '%s' takes the id of another token", c);
		const cJSON *norm = cJSON_GetObjectItemCaseSensitive(it, "normalized");
		if (norm && !cJSON_IsBool(norm))
			return v_refuse(v, "tokenizer.json", "added token '%s': normalized is not a bool", c);
		bool special = tpc__json_truthy(cJSON_GetObjectItemCaseSensitive(it, "special")) || v_looks_special(c);
		v->type[id] = special ? TT_CONTROL : TT_USER;
		if ((ret = v_set(v, (size_t)id, c, strlen(c), !special)))
			return ret;
	}
	for (size_t i = 0; i < v->n && !ret; i++)
		if (!v->tok[i])
			ret = v_pad(v, i, 0.0f);
	return ret;
}

/* Special tokens tokenizer_config.json names that tokenizer.json does not
 * list among added_tokens: transformers registers them as added tokens
 * (CONTROL in the reference's list); tpconv does not follow that yet. */
static int v_bpe_specials_listed(vocab *v)
{
	static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
					   "cls_token", "mask_token"};
	const cJSON *added = cJSON_GetObjectItemCaseSensitive(v->vd.tok_json, "added_tokens"), *it;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(v->vd.tok_cfg, keys[k]);
		const char *c = cJSON_IsString(t) ? t->valuestring
						  : cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "content"));
		bool found = !c;
		cJSON_ArrayForEach(it, (found || !cJSON_IsArray(added) ? (cJSON *)NULL : added))
			found = found || !strcmp(cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring, c);
		if (!found)
			return v_refuse(v, "tokenizer_config.json",
					"%s is not among tokenizer.json's added_tokens (transformers would add it; not followed yet)",
					keys[k]);
	}
	return 0;
}

/* The record's special ids by added token text (special_text): each token's
 * id among tokenizer.json's added_tokens into fx[0..*n) */
static int v_text_ids(vocab *v, tpc__special_fix *fx, size_t *n)
{
	const cJSON *added = cJSON_GetObjectItemCaseSensitive(v->vd.tok_json, "added_tokens"), *it;
	size_t max = sizeof(v->g->special_text) / sizeof(v->g->special_text[0]);
	*n = 0;
	for (size_t k = 0; v->g && k < max && v->g->special_text[k].type; k++) {
		const char *want = v->g->special_text[k].token;
		int64_t id = -1;
		cJSON_ArrayForEach(it, (cJSON_IsArray(added) ? added : (cJSON *)NULL)) {
			const char *c = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "content"));
			if (c && !strcmp(c, want) && tpc__json_int(cJSON_GetObjectItemCaseSensitive(it, "id"), &id))
				break;
			id = -1;
		}
		if (id < 0)
			return v_refuse(v, "tokenizer.json",
					"added_tokens: no '%s', whose id the reference sets as a special token (it fails)",
					want);
		fx[(*n)++] = (tpc__special_fix){v->g->special_text[k].type, id};
	}
	return 0;
}

/* _set_vocab_gpt2 (and the record's special ids by text after loading) */
static int v_gpt2_types(vocab *v, tpc_gguf_kvs *kv, const char *const *types, size_t ntypes);
static int v_gpt2(vocab *v, tpc_gguf_kvs *kv)
{
	return v_gpt2_types(v, kv, NULL, 0);
}

/* _set_vocab_gpt2 with SpecialVocab's special_token_types `types` (NULL: its default) */
static int v_gpt2_types(vocab *v, tpc_gguf_kvs *kv, const char *const *types, size_t ntypes)
{
	const char *pre = v->pre;
	tpc__special_fix fx[4];
	size_t nfx = 0;
	if (!v->vd.tok_json)
		return v_refuse(v, "tokenizer.json", "%s: a BPE vocabulary is read from tokenizer.json (missing)",
				"tokenizer.json");
	int ret = v_bpe_tokens(v, v->size);
	if (!ret)
		ret = v_bpe_specials_listed(v);
	const char *why = NULL;
	if (!ret && !pre && tpc__gguf_pre_detect(v->vd.tok_json, &pre, &why))
		ret = v_refuse(v, "tokenizer.json", "tokenizer.ggml.pre: %s", why);
	if (!ret)
		ret = v_kv_str(v, kv, "tokenizer.ggml.model", "gpt2");
	if (!ret)
		ret = v_kv_str(v, kv, "tokenizer.ggml.pre", pre);
	if (!ret)
		ret = v_add_arrays(v, kv, false);
	if (!ret)
		ret = v_text_ids(v, fx, &nfx);
	if (!ret)
		ret = tpc__special_vocab(&v->vd, true, types, ntypes, -1, fx, nfx, false, kv, v->e);
	return ret;
}

/* LlamaHfVocab (gguf-py vocab.py), what _set_vocab_llama_hf reads through
 * transformers' AutoTokenizer: model.vocab by id, then the added tokens past
 * it in id order; every score -1000; <0xNN> is BYTE, a special token
 * CONTROL, the rest NORMAL, an added token that is not special
 * USER_DEFINED; texts as they are (no U+2581 rewriting); no merges.
 * "Special" is transformers' all_special_tokens: tokenizer_config's
 * bos/eos/unk/sep/pad/cls/mask_token and its extra_special_tokens (else
 * additional_special_tokens), not an added token's own special flag.
 * What transformers would change on loading is refused by name: a special
 * token in neither vocabulary (it would be added), bos/eos/unk_token left
 * out (the tokenizer class's defaults), ids with a hole, an
 * added_tokens_decoder that is not tokenizer.json's added_tokens. */
typedef struct hf_added {
	const char *s;
	int64_t id;
	bool special;
} hf_added;

/* A token as tokenizer_config writes it: "text" or {"content": "text", ...} */
static const char *hf_tok_text(const cJSON *t)
{
	return cJSON_IsString(t) ? t->valuestring : cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "content"));
}

bool tpc__vocab_is_byte(const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdefABCDEF";
	return len == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && s[3] && strchr(hex, s[3]) && s[4] &&
	       strchr(hex, s[4]);
}

/* Marks the special token `text` (from tokenizer_config's `key`) in
 * add[0..na) or, failing that, in model.vocab's tok[0..nb). */
static int hf_mark(vocab *v, bool *special, size_t nb, hf_added *add, size_t na, const char *text, const char *key)
{
	for (size_t k = 0; k < na; k++)
		if (!strcmp(add[k].s, text)) {
			add[k].special = true;
			if ((uint64_t)add[k].id < nb)
				special[add[k].id] = true;
			return 0;
		}
	for (size_t i = 0; i < nb; i++)
		if (!strcmp(v->tok[i], text)) {
			special[i] = true;
			return 0;
		}
	return v_refuse(v, "tokenizer_config.json",
			"%s names a token tokenizer.json does not have (transformers would add it; not followed)", key);
}

static int hf_specials(vocab *v, bool *special, size_t nb, hf_added *add, size_t na)
{
	static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
					   "cls_token", "mask_token"};
	const cJSON *cfg = v->vd.tok_cfg, *it;
	int ret = 0;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]) && !ret; k++) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, keys[k]);
		if (!t && k < 3)
			return v_refuse(v, "tokenizer_config.json",
					"%s is not set (transformers takes the tokenizer class's default; not followed)", keys[k]);
		if (!t || cJSON_IsNull(t))
			continue;
		if (!hf_tok_text(t))
			return v_refuse(v, "tokenizer_config.json", "%s is not a token", keys[k]);
		ret = hf_mark(v, special, nb, add, na, hf_tok_text(t), keys[k]);
	}
	const char *xk = "extra_special_tokens";
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(cfg, xk);
	if (!x) {
		xk = "additional_special_tokens";
		x = cJSON_GetObjectItemCaseSensitive(cfg, xk);
	}
	if (x && !cJSON_IsNull(x) && !cJSON_IsArray(x) && !cJSON_IsObject(x))
		return v_refuse(v, "tokenizer_config.json", "%s is not a list", xk);
	cJSON_ArrayForEach(it, (ret || !x ? (cJSON *)NULL : x)) {
		if (!hf_tok_text(it))
			return v_refuse(v, "tokenizer_config.json", "%s: an entry is not a token", xk);
		if ((ret = hf_mark(v, special, nb, add, na, hf_tok_text(it), xk)))
			return ret;
	}
	return ret;
}

/* tokenizer_config's added_tokens_decoder, where there is one, must be
 * tokenizer.json's added_tokens: transformers re-adds it over them. */
static int hf_decoder_agrees(vocab *v, const hf_added *all, size_t nall)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(v->vd.tok_cfg, "added_tokens_decoder"), *it;
	cJSON_ArrayForEach(it, (cJSON_IsObject(d) ? d : (cJSON *)NULL)) {
		int64_t id;
		const char *c = hf_tok_text(it);
		bool found = false;
		for (size_t k = 0; c && v_key_id(it->string, &id) && k < nall && !found; k++)
			found = all[k].id == id && !strcmp(all[k].s, c);
		if (!found)
			return v_refuse(v, "tokenizer_config.json",
					"added_tokens_decoder: '%s' is not tokenizer.json's added token of that id "
					"(transformers would re-add it; not followed)", it->string);
	}
	return 0;
}

static int hf_cmp_id(const void *a, const void *b)
{
	int64_t x = ((const hf_added *)a)->id, y = ((const hf_added *)b)->id;
	return (x > y) - (x < y);
}

static int v_llama_hf(vocab *v, tpc_gguf_kvs *kv)
{
	const cJSON *voc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v->vd.tok_json, "model"), "vocab");
	const cJSON *added = cJSON_GetObjectItemCaseSensitive(v->vd.tok_json, "added_tokens"), *it;
	hf_added *add = NULL;
	bool *special = NULL;
	size_t nb = 0, nall = 0, na = 0;
	int64_t id;
	int ret = 0;
	if (!v->vd.tok_cfg)
		return v_refuse(v, "tokenizer_config.json",
				"%s is missing: which tokens are special is then transformers' guess (not followed)",
				"tokenizer_config.json");
	if (!cJSON_IsObject(voc))
		return v_refuse(v, "tokenizer.json", "%s is not an object", "model.vocab");
	if (added && !cJSON_IsArray(added))
		return v_refuse(v, "tokenizer.json", "%s is not a list", "added_tokens");
	cJSON_ArrayForEach(it, voc)
		nb++;
	nall = (size_t)cJSON_GetArraySize(added);
	add = calloc(nall ? nall : 1, sizeof(*add));
	if (!add)
		return tpc_err_set(v->e, TPC_EIO, "out of memory");
	cJSON_ArrayForEach(it, added) {
		const char *c = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "content"));
		if (!tpc__json_int(cJSON_GetObjectItemCaseSensitive(it, "id"), &id) || id < 0 || id > INT32_MAX || !c) {
			ret = v_refuse(v, "tokenizer.json", "added_tokens: %s without an id and a text content", "an entry");
			goto out;
		}
		for (size_t k = 0; k < na; k++)
			if (!strcmp(add[k].s, c) || add[k].id == id) {
				ret = v_refuse(v, "tokenizer.json", "added_tokens: '%s' shares its id or text with another", c);
				goto out;
			}
		add[na++] = (hf_added){c, id, false};
	}
	size_t past = 0; /* added tokens past model.vocab */
	for (size_t k = 0; k < na; k++)
		past += (uint64_t)add[k].id >= nb;
	if ((ret = v_alloc(v, nb + past)))
		goto out;
	special = calloc(nb + past + 1, sizeof(*special));
	if (!special) {
		ret = tpc_err_set(v->e, TPC_EIO, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(it, voc) {
		if (!tpc__json_int(it, &id) || id < 0 || (uint64_t)id >= nb || v->tok[id]) {
			ret = v_refuse(v, "tokenizer.json",
				       "model.vocab: the id of '%s' is not one of 0 .. its size - 1 once (the reference fails)",
				       it->string);
			goto out;
		}
		if ((ret = v_set(v, (size_t)id, it->string, strlen(it->string), false)))
			goto out;
	}
	qsort(add, na, sizeof(*add), hf_cmp_id);
	for (size_t k = 0, next = nb; k < na; k++) {
		bool base = (uint64_t)add[k].id < nb;
		if (base ? strcmp(v->tok[add[k].id], add[k].s) != 0 : (uint64_t)add[k].id != next++) {
			ret = v_refuse(v, "tokenizer.json",
				       base ? "added token '%s' has the id of another model.vocab token (the reference "
					      "would write the token list shifted)"
					    : "added token '%s' leaves a hole after model.vocab's ids (the reference would "
					      "write the token list shifted)", add[k].s);
			goto out;
		}
		const cJSON *dup = base ? NULL : cJSON_GetObjectItemCaseSensitive(voc, add[k].s);
		if (dup) {
			ret = v_refuse(v, "tokenizer.json", "added token '%s' is in model.vocab under another id", add[k].s);
			goto out;
		}
	}
	if ((ret = hf_decoder_agrees(v, add, na)) || (ret = hf_specials(v, special, nb, add, na)))
		goto out;
	for (size_t i = 0; i < nb; i++) {
		v->score[i] = -1000.0f;
		v->type[i] = tpc__vocab_is_byte(v->tok[i], strlen(v->tok[i])) ? TT_BYTE : special[i] ? TT_CONTROL : TT_NORMAL;
	}
	for (size_t k = 0; k < na && !ret; k++) {
		if ((uint64_t)add[k].id < nb)
			continue;
		v->score[add[k].id] = -1000.0f;
		v->type[add[k].id] = add[k].special ? TT_CONTROL : TT_USER;
		ret = v_set(v, (size_t)add[k].id, add[k].s, strlen(add[k].s), false);
	}
	if (!ret)
		ret = v_llama_keys(v, kv);
out:
	free(special);
	free(add);
	return ret;
}

/* LlamaModel.set_vocab (llama, mistral, mixtral) */
static int v_llama(vocab *v, tpc_gguf_kvs *kv)
{
	const cJSON *cfg = v->vd.tok_cfg;
	const cJSON *aps = cJSON_GetObjectItemCaseSensitive(cfg, "add_prefix_space");
	if (aps && !cJSON_IsNull(aps)) {
		if (!cJSON_IsBool(aps))
			return v_refuse(v, "tokenizer_config.json", "%s is not a bool", "add_prefix_space");
		if (tpc_gguf_kvs_uint(kv, "tokenizer.ggml.add_space_prefix", TPC_GV_BOOL, cJSON_IsTrue(aps)))
			return tpc_err_set(v->e, TPC_EIO, "out of memory");
	}
	const char *cls = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "tokenizer_class"));
	if (cls && !strcmp(cls, "HybridDNATokenizer"))
		return v_refuse(v, "tokenizer_config.json", "tokenizer_class %s is not converted", cls);
	if (v_has(v, "tekken.json") && !v->vd.tok_json)
		return v_refuse(v, "tekken.json", "%s: Mistral's own tokenizer format is not converted", "tekken.json");
	int ret;
	if (v_has(v, "tokenizer.model")) {
		ret = v_spm(v, v->size, false, kv);
	} else {
		/* LlamaHfVocab: a BPE with byte_fallback and a Sequence decoder */
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(v->vd.tok_json, "model");
		const cJSON *dec = cJSON_GetObjectItemCaseSensitive(v->vd.tok_json, "decoder");
		const char *mt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "type"));
		const cJSON *bf = cJSON_GetObjectItemCaseSensitive(m, "byte_fallback");
		const cJSON *im = cJSON_GetObjectItemCaseSensitive(m, "ignore_merges");
		bool llama3 = mt && !strcmp(mt, "BPE") && tpc__json_truthy(im) && bf && !tpc__json_truthy(bf);
		const char *dt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dec, "type"));
		if (!llama3 && mt && !strcmp(mt, "BPE") && tpc__json_truthy(bf) && dt && !strcmp(dt, "Sequence"))
			ret = v_llama_hf(v, kv);
		else
			ret = v_gpt2(v, kv);
	}
	if (ret)
		return ret;
	if (v->size == 32016) { /* CodeLlama */
		static const char *const t[] = {"prefix", "suffix", "middle", "eot"};
		static const tpc__special_fix fx[] = {{"prefix", 32007}, {"suffix", 32008}, {"middle", 32009}, {"eot", 32010}};
		ret = tpc__special_vocab(&v->vd, false, t, 4, -1, fx, 4, false, kv, v->e);
	}
	if (!ret && v->size == 49152 && tpc_gguf_kvs_uint(kv, "tokenizer.ggml.add_bos_token", TPC_GV_BOOL, 0))
		ret = tpc_err_set(v->e, TPC_EIO, "out of memory");
	return ret;
}

/* GemmaModel.set_vocab */
static int v_gemma(vocab *v, tpc_gguf_kvs *kv)
{
	static const char *const t[] = {"prefix", "suffix", "middle", "fsep", "eot"};
	static const tpc__special_fix fx[] = {{"prefix", 67}, {"suffix", 69}, {"middle", 68}, {"fsep", 70}, {"eot", 107}};
	int ret = v_spm(v, v->size, false, kv);
	if (!ret)
		ret = tpc__special_vocab(&v->vd, false, t, 5, -1, fx, 5, true, kv, v->e);
	if (!ret && tpc_gguf_kvs_uint(kv, "tokenizer.ggml.add_space_prefix", TPC_GV_BOOL, 0))
		ret = tpc_err_set(v->e, TPC_EIO, "out of memory");
	return ret;
}

/* Gemma2Model.set_vocab (and Gemma3Model's with a tokenizer.model):
 * _set_vocab_sentencepiece, then add_space_prefix false */
static int v_spm_nospace(vocab *v, tpc_gguf_kvs *kv)
{
	int ret = v_spm(v, v->size, false, kv);
	if (!ret && tpc_gguf_kvs_uint(kv, "tokenizer.ggml.add_space_prefix", TPC_GV_BOOL, 0))
		ret = tpc_err_set(v->e, TPC_EIO, "out of memory");
	return ret;
}

/* Ernie4_5Model.set_vocab: _set_vocab_sentencepiece, then
 * tokenizer_config.json's add_prefix_space, when it has the member, as
 * add_space_prefix (a bool: another value is refused) */
static int v_spm_cfg_space(vocab *v, tpc_gguf_kvs *kv)
{
	const cJSON *aps = cJSON_GetObjectItemCaseSensitive(v->vd.tok_cfg, "add_prefix_space");
	if (aps && !cJSON_IsBool(aps))
		return v_refuse(v, "tokenizer_config.json", "%s is not a bool", "add_prefix_space");
	int ret = v_spm(v, v->size, false, kv);
	if (!ret && aps && tpc_gguf_kvs_uint(kv, "tokenizer.ggml.add_space_prefix", TPC_GV_BOOL, cJSON_IsTrue(aps)))
		ret = tpc_err_set(v->e, TPC_EIO, "out of memory");
	return ret;
}

/* config.json through lib's reader (tpc_cfg.h); absent is no error */
static int v_config(vocab *v)
{
	char *path = tpc_path_join(v->vd.dir, "config.json");
	int ret = path ? tpc_cfg_from_file(&v->vd.config, path, v->e) : tpc_err_set(v->e, TPC_EIO, "out of memory");
	free(path);
	return ret;
}

/* Phi3MiniModel.set_vocab */
static int v_phi3(vocab *v, tpc_gguf_kvs *kv)
{
	if (v->vd.tok_cfg) {
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(v->vd.tok_cfg, "tokenizer_class");
		if (!c) /* the reference reads it unconditionally */
			return v_refuse(v, "tokenizer_config.json", "%s is missing (the reference fails)", "tokenizer_class");
		if (cJSON_IsString(c) && !strcmp(c->valuestring, "GPT2Tokenizer"))
			return v_gpt2(v, kv);
	}
	if (!v_has(v, "tokenizer.model"))
		return v_refuse(v, "tokenizer.model", "%s is missing (phi3 reads it)", "tokenizer.model");
	return v_spm(v, v->size, true, kv);
}

/* _set_vocab_sentencepiece */
static int v_spm_space(vocab *v, tpc_gguf_kvs *kv)
{
	return v_spm(v, v->size, false, kv);
}

/* HunYuanMoEModel.set_vocab (conversion/hunyuan.py), from the files a
 * HunYuan checkpoint ships, without its remote code: the tokens of
 * hy.tiktoken by rank (gguf_tiktoken.c), NORMAL; after the last rank the
 * special tokens tokenization_hy.py defines (SPECIAL_TOKENS: <|endoftext|>,
 * <|startoftext|>, <|bos|>, <|eos|>, <|pad|>, then <|extra_N|> from 0),
 * CONTROL, up to config.json's vocab_size (the reference asserts the
 * tokenizer's size is vocab_size; fewer than five ids left is refused);
 * the merges QwenModel.bpe rebuilds from the ranks; tokenizer.ggml.pre
 * the record's (hy part: "hunyuan", the name llama.cpp's hash table gives
 * Hunyuan-A13B's tokenizer; the split is tokenization_hy.py's PAT_STR, which
 * no file holds) unless given; SpecialVocab without merges; then the hy
 * part's bos_token_id whatever the vocabulary (HunYuanMoEModel's
 * add_bos_token_id: A13B's <|bos|> 127959; HunYuanModel's 127958 where
 * hidden_size is 4096). */
static int hy_merges(vocab *v, const tpc__tiktoken *t, tpc_gguf_kvs *kv)
{
	char **m = calloc(t->n ? t->n : 1, sizeof(*m));
	uint64_t *ml = calloc(t->n ? t->n : 1, sizeof(*ml));
	size_t nm = 0;
	int ret = m && ml ? 0 : tpc_err_set(v->e, TPC_EIO, "out of memory");
	for (size_t r = 0; r < t->n && !ret; r++) {
		size_t split = 0, n = (size_t)(t->off[r + 1] - t->off[r]);
		int two = n > 1 ? tpc__tiktoken_merge(t, r, &split) : 0;
		if (two < 0 || (two && !(m[nm] = malloc(4 * n + 2)))) {
			ret = tpc_err_set(v->e, TPC_EIO, "out of memory");
			break;
		}
		if (!two)
			continue;
		const uint8_t *s = t->bytes + t->off[r];
		size_t a = tpc__gpt2_bytes_str(s, split, m[nm]);
		m[nm][a] = ' ';
		ml[nm] = a + 1 + tpc__gpt2_bytes_str(s + split, n - split, m[nm] + a + 1);
		nm++;
	}
	if (!ret && tpc_gguf_kvs_strs(kv, "tokenizer.ggml.merges", (const char *const *)m, ml, nm))
		ret = tpc_err_set(v->e, TPC_EIO, "out of memory");
	tpc_free_strv(m, nm);
	free(ml);
	return ret;
}

static int hy_tokens(vocab *v, const tpc__tiktoken *t)
{
	char name[32];
	if (v->size < 0 || (uint64_t)v->size < t->n + 5 || (uint64_t)v->size > t->n + ((uint64_t)1 << 20))
		return v_refuse(v, "config.json", "vocab_size: not hy.tiktoken's ranks and 5 to 2^20 special tokens (%s)",
				"tokenization_hy.py's SPECIAL_TOKENS follow the last rank");
	if (v_alloc(v, (size_t)v->size))
		return -1;
	for (size_t i = 0; i < v->n; i++) {
		size_t k = i - t->n;
		const char *s = name;
		size_t n;
		if (i < t->n) {
			char *c = malloc(2 * (size_t)(t->off[i + 1] - t->off[i]) + 1);
			if (!c)
				return tpc_err_set(v->e, TPC_EIO, "out of memory");
			n = tpc__gpt2_bytes_str(t->bytes + t->off[i], (size_t)(t->off[i + 1] - t->off[i]), c);
			c[n] = '\0';
			v->tok[i] = c;
			v->len[i] = n;
			v->type[i] = TT_NORMAL;
			continue;
		}
		s = tpc__hy_special(k, name, sizeof(name));
		n = strlen(s);
		if (tpc__tiktoken_rank(t, (const uint8_t *)s, n) >= 0) /* {**vocab, **special_tokens} would lose a rank */
			return v_refuse(v, "hy.tiktoken", "holds the special token %s as a token", s);
		if (v_set(v, i, s, n, false))
			return -1;
		v->type[i] = TT_CONTROL;
	}
	return 0;
}

/* config.json's integer member `name` (a bool counts, as in Python): 1 with
 * it in *out, 0 when absent, 2 when null; refused (TPC_EINPUT) when another
 * type */
static int v_cfg_id(vocab *v, const char *name, int64_t *out)
{
	const cJSON *root = v->vd.config ? tpc_cfg_root(v->vd.config) : NULL;
	const cJSON *x = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, name) : NULL;
	if (!x)
		return 0;
	if (cJSON_IsNull(x))
		return 2;
	if (!tpc__json_int(x, out))
		return v_refuse(v, "config.json", "'%s' is not an integer", name);
	return 1;
}

static int v_hy_tiktoken(vocab *v, tpc_gguf_kvs *kv)
{
	const tpc_gguf_hy_vocab *hy = v->g ? v->g->hy : NULL;
	int64_t hidden = 0;
	tpc__tiktoken t;
	char *path = tpc_path_join(v->vd.dir, "hy.tiktoken"), *buf = NULL;
	size_t len = 0;
	memset(&t, 0, sizeof(t));
	int ret = path ? tpc_read_file(path, (uint64_t)1 << 30, &buf, &len, v->e) : tpc_err_set(v->e, TPC_EIO, "out of memory");
	if (!ret)
		ret = tpc__tiktoken_from_buffer(buf, len, path, &t, v->e);
	if (!ret)
		ret = hy_tokens(v, &t);
	if (!ret)
		ret = v_kv_str(v, kv, "tokenizer.ggml.model", "gpt2");
	if (!ret && !hy)
		ret = tpc_err_set(v->e, TPC_EINPUT, "internal: a tiktoken vocabulary without the record's hy part");
	if (!ret)
		ret = v_kv_str(v, kv, "tokenizer.ggml.pre", v->pre ? v->pre : hy->pre);
	if (!ret)
		ret = v_add_arrays(v, kv, false);
	if (!ret)
		ret = hy_merges(v, &t, kv);
	if (!ret)
		ret = tpc__special_vocab(&v->vd, false, NULL, 0, -1, NULL, 0, false, kv, v->e);
	if (!ret && hy->bos_hidden)
		ret = v_cfg_id(v, "hidden_size", &hidden) < 0 ? TPC_EINPUT : 0;
	if (!ret && hy->bos && (!hy->bos_hidden || hidden == hy->bos_hidden) &&
	    tpc_gguf_kvs_uint(kv, "tokenizer.ggml.bos_token_id", TPC_GV_U32, (uint64_t)hy->bos))
		ret = tpc_err_set(v->e, TPC_EIO, "out of memory");
	tpc__tiktoken_release(&t);
	free(buf);
	free(path);
	return ret;
}

/* HunYuanModel.set_vocab's ids after either vocabulary: eos_token_id
 * config.json's eos_member (its default where unsaid, none where null),
 * written over SpecialVocab's in its place; eot_token_id the first of
 * generation_config.json's eos_token_id when that is a list of two or more.
 * A negative or non-integer id (the reference's writer packs a uint32)
 * refused by name. */
static int hy_ids(vocab *v, const tpc_gguf_hy_vocab *hy, tpc_gguf_kvs *kv)
{
	int64_t eos = hy->eos_default, eot = -1;
	int has = hy->eos_member ? v_cfg_id(v, hy->eos_member, &eos) : 2;
	if (has < 0)
		return has;
	if (has != 2 && eos < 0)
		return v_refuse(v, "config.json", "'%s' is negative: not a token id (the reference writes it as eos_token_id, a uint32)",
				hy->eos_member);
	if (has != 2 && tpc_gguf_kvs_uint(kv, "tokenizer.ggml.eos_token_id", TPC_GV_U32, (uint64_t)eos))
		return tpc_err_set(v->e, TPC_EIO, "out of memory");
	if (!hy->eot_gen)
		return 0;
	cJSON *g = NULL;
	int ret = tpc__vocab_json(v->vd.dir, "generation_config.json", &g, v->e);
	const cJSON *l = ret || !cJSON_IsObject(g) ? NULL : cJSON_GetObjectItemCaseSensitive(g, "eos_token_id");
	if (!ret && cJSON_IsArray(l) && cJSON_GetArraySize(l) >= 2) {
		if (!tpc__json_int(cJSON_GetArrayItem(l, 0), &eot) || eot < 0)
			ret = v_refuse(v, "generation_config.json", "%s: its first is not a token id (the reference writes it as eot_token_id)",
				       "eos_token_id");
		else if (tpc_gguf_kvs_uint(kv, "tokenizer.ggml.eot_token_id", TPC_GV_U32, (uint64_t)eot))
			ret = tpc_err_set(v->e, TPC_EIO, "out of memory");
	}
	cJSON_Delete(g);
	return ret;
}

/* HunYuanModel.set_vocab (conversion/hunyuan.py:162-246): with
 * tokenizer.json, _set_vocab_gpt2's BPE, its SpecialVocab without the pad
 * id where config.json's pad_token_id is negative (HunyuanVL's -1); without,
 * the hy.tiktoken vocabulary (v_hy_tiktoken); then hy_ids */
static int v_hy_or_bpe(vocab *v, tpc_gguf_kvs *kv)
{
	const tpc_gguf_hy_vocab *hy = v->g ? v->g->hy : NULL;
	int64_t pad = 0;
	if (!hy)
		return tpc_err_set(v->e, TPC_EINPUT, "internal: a HunYuan vocabulary without the record's hy part");
	if (!v->vd.tok_json) {
		int ret = v_hy_tiktoken(v, kv);
		return ret ? ret : hy_ids(v, hy, kv);
	}
	if (v_cfg_id(v, "pad_token_id", &pad) < 0)
		return TPC_EINPUT;
	static const char *const no_pad[] = {"bos", "eos", "unk", "sep", "cls", "mask"};
	int ret = pad < 0 ? v_gpt2_types(v, kv, no_pad, 6) : v_gpt2(v, kv);
	return ret ? ret : hy_ids(v, hy, kv);
}

/* Each kind of the record's vocab field (tpc_family_gguf.h): what reads a
 * folder with tokenizer.model, and one without. */
typedef int (*vocab_fn)(vocab *v, tpc_gguf_kvs *kv);
static const struct {
	vocab_fn spm, bpe;
} by_kind[] = {
	[TPC_GGUF_VOCAB_LLAMA] = {v_llama, v_llama},
	[TPC_GGUF_VOCAB_GEMMA] = {v_gemma, v_gemma},
	[TPC_GGUF_VOCAB_PHI3] = {v_phi3, v_phi3},
	[TPC_GGUF_VOCAB_SPM_OR_BPE] = {v_spm_space, v_gpt2},
	[TPC_GGUF_VOCAB_BPE] = {v_gpt2, v_gpt2},
	[TPC_GGUF_VOCAB_SPM_NOSPACE] = {v_spm_nospace, v_spm_nospace},
	[TPC_GGUF_VOCAB_SPM_NOSPACE_OR_BPE] = {v_spm_nospace, v_gpt2},
	[TPC_GGUF_VOCAB_SPM_CFG_SPACE] = {v_spm_cfg_space, v_spm_cfg_space},
	[TPC_GGUF_VOCAB_HY_TIKTOKEN] = {v_hy_tiktoken, v_hy_tiktoken},
	[TPC_GGUF_VOCAB_HY_TIKTOKEN_OR_BPE] = {v_hy_or_bpe, v_hy_or_bpe},
};

int tpc_gguf_vocab_pre(const char *dir, const char *arch, int64_t vocab_size, const char *pre, tpc_gguf_kvs *kv,
		       tpc_err *e)
{
	vocab v;
	memset(&v, 0, sizeof(v));
	v.vd.dir = dir;
	v.e = e;
	int ret = tpc__vocab_json(dir, "tokenizer.json", &v.vd.tok_json, e);
	if (!ret)
		ret = tpc__vocab_json(dir, "tokenizer_config.json", &v.vd.tok_cfg, e);
	if (!ret && v_has(&v, "config.json"))
		ret = v_config(&v);
	if (ret)
		goto out;
	if (!v.vd.tok_json && !v_has(&v, "tokenizer.model") && !v_has(&v, "hy.tiktoken"))
		goto out; /* no tokenizer: nothing added, the caller decides */
	bool spm = v_has(&v, "tokenizer.model");
	const tpc_family *fam = tpc_family_by_gguf(arch, -1);
	v.g = fam ? fam->gguf : NULL;
	int k = fam ? (int)fam->gguf->vocab : TPC_GGUF_VOCAB_NONE;
	vocab_fn fn = k > 0 && k < (int)(sizeof(by_kind) / sizeof(by_kind[0])) ? (spm ? by_kind[k].spm : by_kind[k].bpe) : NULL;
	v.size = vocab_size;
	v.pre = pre;
	ret = fn ? fn(&v, kv) : tpc_err_set(e, TPC_EINPUT, "architecture '%s': its tokenizer is not converted to GGUF", arch);
out:
	v_release(&v);
	return ret;
}

int tpc_gguf_vocab(const char *dir, const char *arch, int64_t vocab_size, tpc_gguf_kvs *kv, tpc_err *e)
{
	return tpc_gguf_vocab_pre(dir, arch, vocab_size, NULL, kv, e);
}
