/*
 * gguf_special.c - gguf-py's SpecialVocab (gguf/vocab.py, llama.cpp 0.7.0)
 * in C: what it takes from tokenizer.json, tokenizer_config.json,
 * chat_template.jinja / chat_template.json and config.json, and the keys
 * its add_to_gguf() writes, in its order. Where the Python would raise (a
 * negative id, a value of a type it cannot write), the folder is refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_vocab_int.h"
#include "tpc_buf.h"
#include "tpc_io.h"
#include "tpc_util.h"

#define SV_MAX 16
#define SV_JSON_CAP ((uint64_t)512 << 20)

typedef struct sv {
	const tpc__vocab_dir *vd;
	tpc_err *e;
	const char *types[SV_MAX];
	size_t ntypes;
	const char *id_type[SV_MAX];
	int64_t id[SV_MAX];
	size_t nid;
	const char *add_type[SV_MAX];
	bool add[SV_MAX];
	size_t nadd;
	int64_t n_vocab;
	bool load_merges;
	cJSON *merges;   /* a string array (owned) */
	cJSON *cfg;      /* this instance's copy of tokenizer_config.json (it edits it) */
	cJSON *template; /* chat template (owned), NULL: None */
	cJSON *alt;      /* chat_template.jinja / .json (owned) */
	int nfc, lower, strip; /* -1: None */
} sv;

bool tpc__json_truthy(const cJSON *v)
{
	if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v))
		return false;
	if (cJSON_IsNumber(v))
		return v->valuedouble != 0;
	if (cJSON_IsString(v))
		return v->valuestring[0] != '\0';
	if (cJSON_IsArray(v) || cJSON_IsObject(v))
		return v->child != NULL;
	return true;
}

bool tpc__json_int(const cJSON *v, int64_t *out)
{
	if (cJSON_IsBool(v)) {
		*out = cJSON_IsTrue(v);
		return true;
	}
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || fabs(v->valuedouble) > 9007199254740992.0 ||
	    v->valuedouble != floor(v->valuedouble))
		return false;
	*out = (int64_t)v->valuedouble;
	return true;
}

int tpc__vocab_json(const char *dir, const char *name, cJSON **out, tpc_err *e)
{
	*out = NULL;
	char *path = tpc_path_join(dir, name);
	if (!path)
		return tpc_err_set(e, TPC_EIO, "out of memory");
	int ret = 0;
	char *text = NULL;
	size_t len = 0;
	if (!tpc_exists(path))
		goto out;
	if ((ret = tpc_read_file(path, SV_JSON_CAP, &text, &len, e)))
		goto out;
	*out = cJSON_ParseWithLength(text, len);
	if (!*out) {
		const char *at = cJSON_GetErrorPtr();
		int64_t off = at && at >= text && at <= text + len ? (int64_t)(at - text) : -1;
		ret = TPC_CORRUPT(e, path, off, NULL, "not valid JSON");
	}
out:
	free(text);
	free(path);
	return ret;
}

static const cJSON *sv_get(const cJSON *o, const char *k)
{
	return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

static const char *sv_str(const cJSON *o, const char *k)
{
	const cJSON *v = sv_get(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The JSON value `v` equals the string s (Python's ==, a str against
 * anything). */
static bool sv_eq(const cJSON *v, const char *s)
{
	return s && cJSON_IsString(v) && !strcmp(v->valuestring, s);
}

static int sv_refuse(sv *s, const char *file, const char *fmt, const char *what)
{
	char *path = tpc_path_join(s->vd->dir, file);
	int ret = tpc_err_at(s->e, TPC_EINPUT, path ? path : file, NULL, fmt, what);
	free(path);
	return ret;
}

static bool sv_has_type(const sv *s, const char *t)
{
	for (size_t i = 0; i < s->ntypes; i++)
		if (!strcmp(s->types[i], t))
			return true;
	return false;
}

static void sv_set_add(sv *s, const char *t, bool v, bool only_default)
{
	for (size_t i = 0; i < s->nadd; i++)
		if (!strcmp(s->add_type[i], t)) {
			if (!only_default)
				s->add[i] = v;
			return;
		}
	if (s->nadd < SV_MAX) {
		s->add_type[s->nadd] = t;
		s->add[s->nadd++] = v;
	}
}

static int sv_set_special(sv *s, const char *typ, const cJSON *v, int64_t fixed, const char *file)
{
	int64_t id = fixed;
	if (v && !tpc__json_int(v, &id))
		return 0; /* not an int: ignored */
	if (id < 0 || id > (int64_t)UINT32_MAX)
		return sv_refuse(s, file, "invalid value for special token type %s (a u32 id)", typ);
	if (s->n_vocab >= 0 && id >= s->n_vocab)
		return 0; /* out of range: skipped with a warning */
	for (size_t i = 0; i < s->nid; i++)
		if (!strcmp(s->id_type[i], typ))
			return 0;
	if (s->nid < SV_MAX) {
		s->id_type[s->nid] = typ;
		s->id[s->nid++] = id;
	}
	return 0;
}

/* _parse_normalizer, Sequence nesting bounded. */
static void sv_normalizer(sv *s, const cJSON *n, int depth)
{
	const char *t = sv_str(n, "type");
	if (!t || depth > 32)
		return;
	if (!strcmp(t, "Lowercase"))
		s->lower = 1;
	else if (!strcmp(t, "NFC"))
		s->nfc = 1;
	else if (!strcmp(t, "StripAccents"))
		s->strip = 1;
	else if (!strcmp(t, "BertNormalizer")) {
		if (sv_get(n, "lowercase"))
			s->lower = tpc__json_truthy(sv_get(n, "lowercase"));
		if (sv_get(n, "strip_accents"))
			s->strip = tpc__json_truthy(sv_get(n, "strip_accents"));
	} else if (!strcmp(t, "Sequence")) {
		const cJSON *it;
		cJSON_ArrayForEach(it, sv_get(n, "normalizers"))
			sv_normalizer(s, it, depth + 1);
	}
}

/* model.merges: "a b" strings, or [a, b] lists joined with a space, a space
 * inside a part written as U+0120. */
static int sv_merges(sv *s, const cJSON *m)
{
	if (!cJSON_IsArray(m) || !m->child)
		return 0;
	s->merges = cJSON_CreateArray();
	if (!s->merges)
		return tpc_err_set(s->e, TPC_EIO, "out of memory");
	bool strs = cJSON_IsString(m->child);
	if (!strs && !(cJSON_IsArray(m->child) && cJSON_GetArraySize(m->child) == 2 &&
		       cJSON_IsString(m->child->child)))
		return sv_refuse(s, "tokenizer.json", "%s: unknown tokenizer merges format", "model.merges");
	const cJSON *it;
	cJSON_ArrayForEach(it, m) {
		tpc_buf b;
		tpc_buf_init(&b);
		int bad = 0;
		if (strs) {
			bad = !cJSON_IsString(it);
			if (!bad)
				tpc_buf_add(&b, it->valuestring, strlen(it->valuestring));
		} else {
			const cJSON *part;
			bad = !cJSON_IsArray(it);
			cJSON_ArrayForEach(part, it) {
				if (!cJSON_IsString(part)) {
					bad = 1;
					break;
				}
				if (part != it->child)
					tpc_buf_add(&b, " ", 1);
				for (const char *c = part->valuestring; *c; c++)
					tpc_buf_add(&b, *c == ' ' ? "\xc4\xa0" : c, *c == ' ' ? 2 : 1);
			}
		}
		cJSON *str = bad || b.oom ? NULL : cJSON_CreateString(b.len ? b.p : "");
		tpc_buf_release(&b);
		if (bad)
			return sv_refuse(s, "tokenizer.json", "%s: a merge that is not text", "model.merges");
		if (!str || !cJSON_AddItemToArray(s->merges, str)) {
			cJSON_Delete(str);
			return tpc_err_set(s->e, TPC_EIO, "out of memory");
		}
	}
	return 0;
}

/* The Python's locals special_bos, _cls, _eos, _sep: copies of JSON values
 * (a dict is no string but is true), kept apart from tokenizer_config. */
enum { L_BOS, L_CLS, L_EOS, L_SEP, L_N };
static const char *const sv_lkey[L_N] = {"bos_token", "cls_token", "eos_token", "sep_token"};

/* dst = a copy of v (NULL: None); 0 or out of memory. */
static int sv_copy(sv *s, cJSON **dst, const cJSON *v)
{
	cJSON *c = v ? cJSON_Duplicate(v, true) : NULL;
	if (v && !c)
		return tpc_err_set(s->e, TPC_EIO, "out of memory");
	cJSON_Delete(*dst);
	*dst = c;
	return 0;
}

/* tokenizer_config[key] = v (None when NULL), as the Python edits its dict. */
static int sv_cfg_set(sv *s, const char *key, const cJSON *v)
{
	cJSON *c = v ? cJSON_Duplicate(v, true) : cJSON_CreateNull();
	if (!c)
		return tpc_err_set(s->e, TPC_EIO, "out of memory");
	cJSON_DeleteItemFromObjectCaseSensitive(s->cfg, key);
	cJSON_AddItemToObject(s->cfg, key, c);
	return 0;
}

/* local l = v and tokenizer_config[its key] = v */
static int sv_both(sv *s, cJSON **loc, int l, const cJSON *v)
{
	int ret = sv_copy(s, &loc[l], v);
	return ret ? ret : sv_cfg_set(s, sv_lkey[l], v);
}

static const cJSON *sv_tmpl_special(const cJSON *item)
{
	const cJSON *id = sv_get(sv_get(item, "SpecialToken"), "id");
	return tpc__json_truthy(id) ? id : NULL;
}

static bool sv_in2(const cJSON *x, const cJSON *a, const cJSON *b)
{
	return cJSON_IsString(x) && (sv_eq(a, x->valuestring) || sv_eq(b, x->valuestring));
}

/* TemplateProcessing <single>: add_bos / add_eos, eos moved to eot/eom. */
static int sv_single(sv *s, const cJSON *single, cJSON **loc, const cJSON **first, const cJSON **last)
{
	bool cfg = tpc__json_truthy(s->cfg);
	int ret = 0, n = cJSON_GetArraySize(single);
	if ((*first = sv_tmpl_special(cJSON_GetArrayItem(single, 0)))) {
		if (!cfg) {
			ret = sv_copy(s, &loc[L_BOS], *first);
		} else if (!sv_in2(*first, loc[L_BOS], loc[L_CLS])) {
			if (!ret && !tpc__json_truthy(loc[L_BOS]))
				ret = sv_both(s, loc, L_BOS, *first);
			if (!ret && !tpc__json_truthy(loc[L_CLS]))
				ret = sv_both(s, loc, L_CLS, *first);
		}
		if (ret)
			return ret;
		sv_set_add(s, "bos", sv_in2(*first, loc[L_BOS], loc[L_CLS]), false);
	}
	if ((*last = sv_tmpl_special(cJSON_GetArrayItem(single, n - 1)))) {
		if (!cfg) {
			ret = sv_copy(s, &loc[L_EOS], *last);
		} else if (!sv_in2(*last, loc[L_EOS], NULL)) {
			const char *slot = !sv_has_type(s, "eot") ? "eot" : !sv_has_type(s, "eom") ? "eom" : NULL;
			if (slot && s->ntypes < SV_MAX) {
				s->types[s->ntypes++] = slot;
				ret = sv_cfg_set(s, !strcmp(slot, "eot") ? "eot_token" : "eom_token", loc[L_EOS]);
			}
			if (!ret)
				ret = sv_both(s, loc, L_EOS, *last);
		}
		if (ret)
			return ret;
		sv_set_add(s, "eos", true, false);
	}
	return 0;
}

/* TemplateProcessing <pair>: A [sep] [eos] B sets add_sep. */
static int sv_pair(sv *s, const cJSON *pair, cJSON **loc, const cJSON *first, const cJSON *last)
{
	int np = cJSON_GetArraySize(pair);
	int start = first && sv_in2(first, sv_get(sv_get(cJSON_GetArrayItem(pair, 0), "SpecialToken"), "id"), NULL);
	int stop = last && sv_in2(last, sv_get(sv_get(cJSON_GetArrayItem(pair, np - 1), "SpecialToken"), "id"), NULL)
			   ? np - 1 : np;
	if (stop - start <= 0)
		return 0;
	const cJSON *a = sv_get(sv_get(cJSON_GetArrayItem(pair, start), "Sequence"), "id");
	const cJSON *b = sv_get(sv_get(cJSON_GetArrayItem(pair, stop - 1), "Sequence"), "id");
	int mid = stop - start - 2;
	if (!sv_eq(a, "A") || !sv_eq(b, "B") || mid <= 0)
		return 0;
	bool add_sep = false;
	const cJSON *ent = sv_tmpl_special(cJSON_GetArrayItem(pair, start + 1));
	if (ent && sv_in2(ent, loc[L_SEP], loc[L_EOS]) && !last)
		add_sep = true;
	if (mid == 2 && (ent = sv_tmpl_special(cJSON_GetArrayItem(pair, start + 2))) &&
	    sv_in2(ent, loc[L_SEP], loc[L_EOS]))
		add_sep = true;
	sv_set_add(s, "sep", add_sep, false);
	if (add_sep && !tpc__json_truthy(loc[L_SEP]) && tpc__json_truthy(s->cfg))
		return sv_cfg_set(s, "sep_token", loc[L_EOS]);
	return 0;
}

static int sv_roberta(sv *s, const cJSON *proc, cJSON **loc)
{
	static const char *const t[3] = {"bos", "eos", "sep"};
	int ret = 0;
	for (int i = 0; i < 3; i++)
		sv_set_add(s, t[i], true, false);
	bool cfg = tpc__json_truthy(s->cfg);
	for (int k = 0; k < 2 && !ret; k++) { /* cls from 'cls' or bos; sep from 'sep' or eos */
		int l = k ? L_SEP : L_CLS, from = k ? L_EOS : L_BOS;
		if (tpc__json_truthy(loc[l]) || !cfg)
			continue;
		const cJSON *pv = sv_get(proc, k ? "sep" : "cls");
		ret = sv_both(s, loc, l, pv ? cJSON_GetArrayItem(pv, 0) : loc[from]);
	}
	return ret;
}

/* The tokenizer.json half of _try_load_from_tokenizer_json. */
static int sv_post(sv *s, const cJSON *tok)
{
	cJSON *loc[L_N] = {NULL};
	int ret = 0;
	for (int l = 0; l < L_N && !ret; l++)
		ret = sv_copy(s, &loc[l], sv_get(s->cfg, sv_lkey[l]));
	bool cfg = tpc__json_truthy(s->cfg);
	if (!ret && !tpc__json_truthy(loc[L_BOS]) && tpc__json_truthy(loc[L_CLS]) && cfg)
		ret = sv_both(s, loc, L_BOS, loc[L_CLS]);
	if (!ret && !tpc__json_truthy(loc[L_EOS]) && tpc__json_truthy(loc[L_SEP]) && cfg)
		ret = sv_both(s, loc, L_EOS, loc[L_SEP]);
	const cJSON *post = sv_get(tok, "post_processor");
	if (ret || !tpc__json_truthy(post))
		goto out;
	if (!cJSON_IsObject(post)) {
		ret = sv_refuse(s, "tokenizer.json", "%s is not an object", "post_processor");
		goto out;
	}
	const cJSON *procs = sv_get(post, "processors"), *p;
	if (procs && !cJSON_IsArray(procs)) {
		ret = sv_refuse(s, "tokenizer.json", "%s is not a list", "post_processor.processors");
		goto out;
	}
	for (p = procs ? procs->child : post; p && !ret; p = procs ? p->next : NULL) {
		const char *t = sv_str(p, "type");
		const cJSON *first = NULL, *last = NULL;
		if (!t)
			continue;
		if (!strcmp(t, "ByteLevel")) {
			sv_set_add(s, "bos", false, true);
			sv_set_add(s, "eos", false, true);
		} else if (!strcmp(t, "RobertaProcessing")) {
			ret = sv_roberta(s, p, loc);
		} else if (!strcmp(t, "TemplateProcessing")) {
			const cJSON *single = sv_get(p, "single"), *pair = sv_get(p, "pair");
			if (cJSON_IsArray(single) && cJSON_GetArraySize(single) > 1)
				ret = sv_single(s, single, loc, &first, &last);
			if (!ret && cJSON_IsArray(pair) && cJSON_GetArraySize(pair) > 0)
				ret = sv_pair(s, pair, loc, first, last);
		}
	}
out:
	for (int l = 0; l < L_N; l++)
		cJSON_Delete(loc[l]);
	return ret;
}

/* chat_template.jinja, else chat_template.json's "chat_template". */
static int sv_alt_template(sv *s)
{
	char *path = tpc_path_join(s->vd->dir, "chat_template.jinja");
	char *extra = tpc_path_join(s->vd->dir, "additional_chat_templates");
	if (!path || !extra) {
		free(path);
		free(extra);
		return tpc_err_set(s->e, TPC_EIO, "out of memory");
	}
	bool more = tpc_is_dir(extra);
	free(extra);
	int ret = 0;
	if (tpc_exists(path) && more) { /* the Python lists them in directory order: refused, not guessed */
		ret = sv_refuse(s, "additional_chat_templates", "%s: more chat templates are not read yet",
				"additional_chat_templates");
	} else if (tpc_exists(path)) {
		char *text = NULL;
		size_t len = 0;
		if (!(ret = tpc_read_file(path, SV_JSON_CAP, &text, &len, s->e))) {
			if (strlen(text) != len)
				ret = sv_refuse(s, "chat_template.jinja", "%s holds a NUL byte", "chat_template.jinja");
			else if (!(s->alt = cJSON_CreateString(text)))
				ret = tpc_err_set(s->e, TPC_EIO, "out of memory");
		}
		free(text);
	} else {
		cJSON *j = NULL;
		if (!(ret = tpc__vocab_json(s->vd->dir, "chat_template.json", &j, s->e)) && j) {
			cJSON *t = cJSON_DetachItemFromObjectCaseSensitive(j, "chat_template");
			s->alt = t;
		}
		cJSON_Delete(j);
	}
	free(path);
	return ret;
}

/* The tokenizer_config.json half: chat template, add_*_token, *_token ids
 * looked up among tokenizer.json's added_tokens. */
static int sv_config_tokens(sv *s, const cJSON *added)
{
	int ret = sv_alt_template(s);
	if (ret)
		return ret;
	const cJSON *ct = cJSON_IsObject(s->cfg) && cJSON_HasObjectItem(s->cfg, "chat_template")
				  ? sv_get(s->cfg, "chat_template") : s->alt;
	if (ct && (cJSON_IsString(ct) || cJSON_IsArray(ct)) && !(s->template = cJSON_Duplicate(ct, true)))
		return tpc_err_set(s->e, TPC_EIO, "out of memory");
	for (size_t i = 0; i < s->ntypes && !ret; i++) {
		char key[32];
		snprintf(key, sizeof(key), "add_%s_token", s->types[i]);
		const cJSON *a = sv_get(s->cfg, key);
		if (cJSON_IsBool(a))
			sv_set_add(s, s->types[i], cJSON_IsTrue(a), true);
		snprintf(key, sizeof(key), "%s_token", s->types[i]);
		const cJSON *ent = sv_get(s->cfg, key);
		const char *content = cJSON_IsString(ent) ? ent->valuestring : sv_str(ent, "content");
		if (!content)
			continue;
		const cJSON *at, *id = NULL;
		cJSON_ArrayForEach(at, (cJSON_IsArray(added) ? added : (cJSON *)NULL))
			if (sv_eq(sv_get(at, "content"), content)) {
				id = sv_get(at, "id");
				break;
			}
		if (id)
			ret = sv_set_special(s, s->types[i], id, 0, "tokenizer_config.json");
	}
	return ret;
}

/* _try_load_from_config_json: each <type>_token_id from the top level, and
 * from text_config only when the top level has none or None. This is not
 * lib/tpc_cfg.h's text_config rule (text_config's member wins) on purpose:
 * the ids written must be the reference's, and gguf-py asks the top level
 * first (Kimi-VL keeps them in text_config alone). */
static int sv_config_json(sv *s)
{
	const tpc_cfg *c = s->vd->config;
	int ret = 0;
	for (size_t i = 0; c && i < s->ntypes && !ret; i++) {
		char key[32];
		snprintf(key, sizeof(key), "%s_token_id", s->types[i]);
		const cJSON *v = tpc_cfg_get(c, TPC_CFG_TOP, key, NULL);
		if ((!v || cJSON_IsNull(v)) && tpc_cfg_text(c))
			v = sv_get(tpc_cfg_text(c), key);
		if (v)
			ret = sv_set_special(s, s->types[i], v, 0, "config.json");
	}
	return ret;
}

static int sv_load(sv *s)
{
	const cJSON *tok = s->vd->tok_json, *added = NULL;
	int ret = 0;
	if (tok) {
		if (s->load_merges && (ret = sv_merges(s, sv_get(sv_get(tok, "model"), "merges"))))
			return ret;
		if (tpc__json_truthy(sv_get(tok, "normalizer")))
			sv_normalizer(s, sv_get(tok, "normalizer"), 0);
		added = sv_get(tok, "added_tokens");
		if ((ret = sv_post(s, tok)))
			return ret;
	}
	if (tpc__json_truthy(s->cfg) && (ret = sv_config_tokens(s, added)))
		return ret;
	if ((ret = sv_config_json(s)))
		return ret;
	if (s->load_merges && !s->merges) {
		char *path = tpc_path_join(s->vd->dir, "merges.txt");
		bool has = path && tpc_exists(path);
		free(path);
		if (has)
			return sv_refuse(s, "merges.txt", "%s: merges from merges.txt are not read yet", "merges.txt");
	}
	return 0;
}

static const char *sv_id_key(const char *t)
{
	static const char *const map[][2] = {
		{"bos", "tokenizer.ggml.bos_token_id"}, {"eos", "tokenizer.ggml.eos_token_id"},
		{"unk", "tokenizer.ggml.unknown_token_id"}, {"sep", "tokenizer.ggml.seperator_token_id"},
		{"pad", "tokenizer.ggml.padding_token_id"}, {"mask", "tokenizer.ggml.mask_token_id"},
		{"eot", "tokenizer.ggml.eot_token_id"}, {"eom", "tokenizer.ggml.eom_token_id"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(map[i][0], t))
			return map[i][1];
	return NULL; /* no add_<t>_token_id in gguf-py's writer: skipped */
}

static int sv_kv_str(sv *s, tpc_gguf_kvs *kv, const char *key, const cJSON *v)
{
	if (!cJSON_IsString(v))
		return sv_refuse(s, "tokenizer_config.json", "%s: a chat template that is not text", key);
	return tpc_gguf_kvs_str(kv, key, v->valuestring, strlen(v->valuestring)) ? -1 : 0;
}

/* GGUFWriter.add_chat_template: a list gives tokenizer.chat_template.NAME
 * keys (NAME with characters other than ASCII letters and digits as '_'),
 * tokenizer.chat_templates, then the "default" one. The Python collects the
 * names in a set, whose order is its string hash's (randomised per
 * process): tpconv writes them in the list's order. */
static int sv_chat_templates(sv *s, tpc_gguf_kvs *kv)
{
	const cJSON *it, *def = NULL;
	char **names = calloc((size_t)cJSON_GetArraySize(s->template) + 1, sizeof(*names));
	size_t nn = 0;
	int ret = names ? 0 : tpc_err_set(s->e, TPC_EIO, "out of memory");
	cJSON_ArrayForEach(it, (ret ? (cJSON *)NULL : s->template)) {
		const cJSON *nm = sv_get(it, "name"), *t = sv_get(it, "template");
		if (!cJSON_IsObject(it) || (nm && !cJSON_IsString(nm))) {
			ret = sv_refuse(s, "tokenizer_config.json", "%s: an entry without a text name", "chat_template");
			break;
		}
		tpc_buf b = TPC_BUF_INIT;
		tpc_buf_adds(&b, "tokenizer.chat_template.");
		for (const unsigned char *c = nm ? (const unsigned char *)nm->valuestring : (const unsigned char *)""; *c; c++)
			if ((*c & 0xc0) != 0x80) /* one '_' a code point */
				tpc_buf_addc(&b, (*c >= '0' && *c <= '9') || ((*c | 0x20) >= 'a' && (*c | 0x20) <= 'z') ? (char)*c : '_');
		size_t pre = strlen("tokenizer.chat_template.");
		if (b.oom) {
			ret = tpc_err_set(s->e, TPC_EIO, "out of memory");
		} else if (b.len > pre && t && !cJSON_IsNull(t)) {
			if (!strcmp(b.p + pre, "default")) {
				def = t;
			} else if (!(ret = sv_kv_str(s, kv, b.p, t))) {
				size_t k = 0;
				while (k < nn && strcmp(names[k], b.p + pre))
					k++;
				if (k == nn && !(names[nn++] = strdup(b.p + pre)))
					ret = tpc_err_set(s->e, TPC_EIO, "out of memory");
			}
		}
		tpc_buf_release(&b);
		if (ret)
			break;
	}
	if (!ret && nn && tpc_gguf_kvs_strs(kv, "tokenizer.chat_templates", (const char *const *)names, NULL, nn))
		ret = -1;
	if (!ret && def)
		ret = sv_kv_str(s, kv, "tokenizer.chat_template", def);
	tpc_free_strv(names, nn);
	return ret;
}

/* SpecialVocab.add_to_gguf */
static int sv_add(sv *s, tpc_gguf_kvs *kv)
{
	int ret = 0;
	size_t nm = s->merges ? (size_t)cJSON_GetArraySize(s->merges) : 0;
	if (nm) {
		const char **m = malloc(nm * sizeof(*m));
		const cJSON *it;
		size_t k = 0;
		if (!m)
			return tpc_err_set(s->e, TPC_EIO, "out of memory");
		cJSON_ArrayForEach(it, s->merges)
			m[k++] = it->valuestring;
		ret = tpc_gguf_kvs_strs(kv, "tokenizer.ggml.merges", m, NULL, nm) ? -1 : 0;
		free(m);
	}
	for (size_t i = 0; i < s->nid && !ret; i++) {
		const char *key = sv_id_key(s->id_type[i]);
		if (key && tpc_gguf_kvs_uint(kv, key, TPC_GV_U32, (uint64_t)s->id[i]))
			ret = -1;
	}
	for (size_t i = 0; i < s->nadd && !ret; i++) {
		const char *t = s->add_type[i];
		char key[48];
		snprintf(key, sizeof(key), "tokenizer.ggml.add_%s_token", t);
		if ((!strcmp(t, "bos") || !strcmp(t, "eos") || !strcmp(t, "sep")) &&
		    tpc_gguf_kvs_uint(kv, key, TPC_GV_BOOL, s->add[i]))
			ret = -1;
	}
	if (!ret && s->template)
		ret = cJSON_IsString(s->template) ? sv_kv_str(s, kv, "tokenizer.chat_template", s->template)
						  : sv_chat_templates(s, kv);
	static const char *const nk[3] = {"tokenizer.ggml.normalizer.nfc", "tokenizer.ggml.normalizer.lowercase",
					  "tokenizer.ggml.normalizer.strip_accents"};
	const int nv[3] = {s->nfc, s->lower, s->strip};
	for (int k = 0; k < 3 && !ret; k++)
		if (nv[k] >= 0 && tpc_gguf_kvs_uint(kv, nk[k], TPC_GV_BOOL, (uint64_t)nv[k]))
			ret = -1;
	if (ret == -1)
		ret = tpc_err_set(s->e, TPC_EIO, "out of memory");
	return ret;
}

int tpc__special_vocab(const tpc__vocab_dir *vd, bool load_merges, const char *const *types, size_t ntypes,
		       int64_t n_vocab, const tpc__special_fix *fixed, size_t nfixed, bool drop_template,
		       tpc_gguf_kvs *kv, tpc_err *e)
{
	static const char *const def[] = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
	sv s;
	memset(&s, 0, sizeof(s));
	s.vd = vd;
	s.e = e;
	s.n_vocab = n_vocab;
	s.load_merges = load_merges;
	s.nfc = s.lower = s.strip = -1;
	if (!types) {
		types = def;
		ntypes = sizeof(def) / sizeof(def[0]);
	}
	for (size_t i = 0; i < ntypes && i < SV_MAX - 2; i++)
		s.types[s.ntypes++] = types[i];
	int ret = 0;
	if (vd->tok_cfg && !(s.cfg = cJSON_Duplicate(vd->tok_cfg, true)))
		ret = tpc_err_set(e, TPC_EIO, "out of memory");
	if (!ret)
		ret = sv_load(&s);
	for (size_t i = 0; i < nfixed && !ret; i++)
		ret = sv_set_special(&s, fixed[i].type, NULL, fixed[i].id, "tokenizer.model");
	if (!ret && drop_template) {
		cJSON_Delete(s.template);
		s.template = NULL;
	}
	if (!ret)
		ret = sv_add(&s, kv);
	cJSON_Delete(s.merges);
	cJSON_Delete(s.cfg);
	cJSON_Delete(s.template);
	cJSON_Delete(s.alt);
	return ret;
}
