/*
 * test_gguf_vocab.c - the tokenizer.* keys tpc_gguf_vocab writes, against
 * what llama.cpp's convert_hf_to_gguf.py wrote for the same folders
 * (tests/gguf/vocab/<name>/expected.json, made by make_vocab_fixtures.py in
 * the forky chroot): key order, value types, every value. Then the
 * SentencePiece reader on damaged files, and the BPE pre-tokenizer name
 * (tokenizer.ggml.pre) read from tokenizer.json, given, or refused.
 * Last the other way (gguf_tok.c): the tokenizer files rebuilt from a GGUF
 * whose tokenizer.* arrays were made to disagree, each refused naming the
 * key; a pre-tokenizer name it cannot express skipped with the reason.
 */
#include "test_util.h"

#include <cjson/cJSON.h>

#include "gguf.h"
#include "formats.h"
#include "gguf_vocab_int.h"
#include "spm.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_util.h"

static char *vocab_dir(const char *name)
{
	const char *src = getenv("TPC_SRC");
	char *p = malloc(4096);
	snprintf(p, 4096, "%s/tests/gguf/vocab/%s", src ? src : "../../..", name);
	return p;
}

static cJSON *load_json(const char *dir, const char *name)
{
	char *p = tpc_path_join(dir, name), *text = NULL;
	size_t len = 0;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_read_file(p, 1 << 26, &text, &len, &e), 0);
	cJSON *j = cJSON_ParseWithLength(text, len);
	assert_non_null(j);
	free(text);
	free(p);
	return j;
}

static const char *arch_of(const char *hf)
{
	static const char *const map[][2] = {
		{"LlamaForCausalLM", "llama"}, {"MistralForCausalLM", "llama"}, {"GemmaForCausalLM", "gemma"},
		{"Phi3ForCausalLM", "phi3"}, {"Qwen2ForCausalLM", "qwen2"}, {"GPT2LMHeadModel", "gpt2"},
		{"GPTNeoXForCausalLM", "gptneox"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(map[i][0], hf))
			return map[i][1];
	fail_msg("no arch for %s", hf);
	return NULL;
}

/* One element of kv k (string, number or f32 bits) against the JSON. */
static void check_elem(const tpc_gguf_kv *k, int type, uint64_t i, const cJSON *want)
{
	if (type == TPC_GV_STRING) {
		const char *s = k->type == TPC_GV_ARRAY ? k->astr[i] : k->s;
		uint64_t n = k->type == TPC_GV_ARRAY ? k->alen[i] : k->slen;
		char *hex = malloc(2 * n + 1);
		for (uint64_t j = 0; j < n; j++)
			sprintf(hex + 2 * j, "%02x", (unsigned char)s[j]);
		hex[2 * n] = '\0';
		if (strcmp(hex, want->valuestring))
			fail_msg("%s[%llu]: '%.*s' (%s), want %s", k->key, (unsigned long long)i, (int)n, s, hex,
				 want->valuestring);
		free(hex);
		return;
	}
	uint64_t got;
	if (k->type == TPC_GV_ARRAY) {
		const uint8_t *b = (const uint8_t *)k->arr + 4 * i; /* f32, i32 arrays */
		got = (uint64_t)b[0] | (uint64_t)b[1] << 8 | (uint64_t)b[2] << 16 | (uint64_t)b[3] << 24;
		if (type == TPC_GV_I32)
			got = (uint64_t)(int64_t)(int32_t)got;
	} else {
		got = k->v.u;
	}
	if ((int64_t)got != (int64_t)want->valuedouble)
		fail_msg("%s[%llu]: %lld, want %.0f", k->key, (unsigned long long)i, (long long)got, want->valuedouble);
}

/* The index of the string whose hex is `hex` in array k (k->n if none). */
static uint64_t find_str(const tpc_gguf_kv *k, const char *hex)
{
	for (uint64_t i = 0; i < k->n; i++) {
		char *h = malloc(2 * k->alen[i] + 1);
		for (uint64_t j = 0; j < k->alen[i]; j++)
			sprintf(h + 2 * j, "%02x", (unsigned char)k->astr[i][j]);
		h[2 * k->alen[i]] = '\0';
		bool eq = !strcmp(h, hex);
		free(h);
		if (eq)
			return i;
	}
	fail_msg("%s: no element %s", k->key, hex);
	return 0;
}

static void check_folder(const char *name)
{
	char *dir = vocab_dir(name);
	cJSON *cfg = load_json(dir, "config.json"), *want = load_json(dir, "expected.json");
	cJSON *pre = load_json(dir, "../pre.json");
	const char *arch = arch_of(cJSON_GetArrayItem(cJSON_GetObjectItem(cfg, "architectures"), 0)->valuestring);
	int64_t vs = (int64_t)cJSON_GetObjectItem(cfg, "vocab_size")->valuedouble;
	tpc_gguf_kvs kv = {0};
	tpc_err e;
	tpc_err_init(&e);
	/* tokenizer.ggml.pre as gguf_pre.c names it from tokenizer.json: the
	 * name pre.json gave the reference */
	int r = tpc_gguf_vocab(dir, arch, vs, &kv, &e);
	if (r)
		fail_msg("%s: %s (%s)", name, e.msg, e.path);
	assert_int_equal(kv.n, (size_t)cJSON_GetArraySize(want));
	for (size_t i = 0; i < kv.n; i++) {
		const cJSON *w = cJSON_GetArrayItem(want, (int)i);
		const tpc_gguf_kv *k = &kv.kv[i];
		assert_string_equal(k->key, cJSON_GetArrayItem(w, 0)->valuestring);
		assert_int_equal(k->type, (int)cJSON_GetArrayItem(w, 1)->valuedouble);
		const cJSON *val = cJSON_GetArrayItem(w, 3);
		if (k->type != TPC_GV_ARRAY) {
			check_elem(k, k->type, 0, val);
			continue;
		}
		assert_int_equal(k->atype, (int)cJSON_GetArrayItem(w, 2)->valuedouble);
		assert_int_equal(k->n, (uint64_t)cJSON_GetArraySize(val));
		for (uint64_t j = 0; j < k->n; j++) {
			/* tokenizer.chat_templates: the reference's order is a Python set's
			 * (hash-randomised); tpconv keeps the list's: compared as a set */
			uint64_t jj = j;
			if (!strcmp(k->key, "tokenizer.chat_templates"))
				jj = find_str(k, cJSON_GetArrayItem(val, (int)j)->valuestring);
			check_elem(k, k->atype, jj, cJSON_GetArrayItem(val, (int)j));
		}
	}
	tpc_gguf_kvs_release(&kv);
	cJSON_Delete(cfg);
	cJSON_Delete(want);
	cJSON_Delete(pre);
	free(dir);
}

static void test_llama_spm(void **st) { (void)st; check_folder("llama-spm"); }
static void test_mistral_spm(void **st) { (void)st; check_folder("mistral-spm"); }
static void test_gemma_spm(void **st) { (void)st; check_folder("gemma-spm"); }
static void test_phi3_spm(void **st) { (void)st; check_folder("phi3-spm"); }
static void test_qwen2_bpe(void **st) { (void)st; check_folder("qwen2-bpe"); }
static void test_gpt2_bpe(void **st) { (void)st; check_folder("gpt2-bpe"); }
static void test_gptneox_bpe(void **st) { (void)st; check_folder("gptneox-bpe"); }

/* tokenizer.json's pre_tokenizer -> the llama.cpp name; a name given wins;
 * a pre-tokenizer tpconv cannot map is refused, naming the key. */
static const char *pre_of(cJSON *tj, const char *edit_path, const char *edit)
{
	const char *name = NULL, *why = NULL;
	if (edit_path) {
		cJSON *o = tj, *parent = NULL;
		char key[64];
		const char *p = edit_path;
		while (*p) { /* "a.b.0.c": walk, then replace the last item with `edit` (JSON) */
			size_t n = strcspn(p, ".");
			snprintf(key, sizeof(key), "%.*s", (int)n, p);
			parent = o;
			o = cJSON_IsArray(o) ? cJSON_GetArrayItem(o, atoi(key)) : cJSON_GetObjectItem(o, key);
			p += n + (p[n] == '.');
		}
		cJSON *v = cJSON_Parse(edit);
		assert_non_null(v);
		if (cJSON_IsArray(parent))
			cJSON_ReplaceItemInArray(parent, atoi(key), v);
		else if (o)
			cJSON_ReplaceItemInObject(parent, key, v);
		else
			cJSON_AddItemToObject(parent, key, v);
	}
	return tpc__gguf_pre_detect(tj, &name, &why) ? NULL : name;
}

static void test_bpe_pre(void **st)
{
	(void)st;
	char *dir = vocab_dir("qwen2-bpe");
	cJSON *q = load_json(dir, "tokenizer.json");
	assert_string_equal(pre_of(q, NULL, NULL), "qwen2");
	/* Llama 3's regex (digits in threes) with ignore_merges: llama-bpe */
	const char *re = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(q,
		"pre_tokenizer"), "pretokenizers"), 0), "pattern")->child->valuestring;
	char l3[512];
	const char *pn = strstr(re, "\\p{N}|");
	assert_non_null(pn);
	snprintf(l3, sizeof(l3), "%.*s\\p{N}{1,3}|%s", (int)(pn - re), re, pn + 6);
	cJSON *l = cJSON_Duplicate(q, true);
	cJSON *pat = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(l,
		"pre_tokenizer"), "pretokenizers"), 0), "pattern");
	cJSON_SetValuestring(cJSON_GetObjectItem(pat, "Regex"), l3);
	assert_null(pre_of(l, NULL, NULL)); /* ignore_merges false: not llama-bpe */
	assert_string_equal(pre_of(l, "model.ignore_merges", "true"), "llama-bpe");
	cJSON_Delete(l);
	/* refusals: a prefix space, a lowercasing normalizer, another regex, ignore_merges with qwen2's */
	l = cJSON_Duplicate(q, true);
	assert_null(pre_of(l, "pre_tokenizer.pretokenizers.1.add_prefix_space", "true"));
	cJSON_Delete(l);
	l = cJSON_Duplicate(q, true);
	assert_null(pre_of(l, "normalizer", "{\"type\": \"Lowercase\"}"));
	cJSON_Delete(l);
	l = cJSON_Duplicate(q, true);
	assert_null(pre_of(l, "pre_tokenizer.pretokenizers.0.pattern", "{\"Regex\": \"\\\\s+\"}"));
	cJSON_Delete(l);
	l = cJSON_Duplicate(q, true);
	assert_null(pre_of(l, "model.ignore_merges", "true"));
	cJSON_Delete(l);
	cJSON_Delete(q);
	char *g = vocab_dir("gpt2-bpe");
	q = load_json(g, "tokenizer.json");
	assert_string_equal(pre_of(q, NULL, NULL), "gpt-2");
	/* GPT-NeoX-20B's: NFC before the same ByteLevel, "olmo" as the reference's hash names it */
	assert_string_equal(pre_of(q, "normalizer", "{\"type\": \"NFC\"}"), "olmo");
	assert_string_equal(pre_of(q, "normalizer", "null"), "gpt-2");
	assert_null(pre_of(q, "pre_tokenizer.add_prefix_space", "true"));
	cJSON_Delete(q);
	free(g);

	/* a name given wins; a folder tpconv cannot map is refused, naming the key */
	tpc_gguf_kvs kv = {0};
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_gguf_vocab_pre(dir, "qwen2", 419, "stablelm2", &kv, &e), 0);
	ptrdiff_t k = tpc_gguf_kvs_find(&kv, "tokenizer.ggml.pre");
	assert_true(k >= 0);
	assert_memory_equal(kv.kv[k].s, "stablelm2", 9);
	tpc_gguf_kvs_release(&kv);
	free(dir);
	char tmp[] = "/tmp/tpc_pre_XXXXXX";
	assert_non_null(mkdtemp(tmp));
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "cp %s/tests/gguf/vocab/gpt2-bpe/* %s && sed -i "
		 "'s/\"use_regex\": true/\"use_regex\": false/' %s/tokenizer.json",
		 getenv("TPC_SRC") ? getenv("TPC_SRC") : "../../..", tmp, tmp);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(tpc_gguf_vocab(tmp, "gpt2", 400, &kv, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "tokenizer.ggml.pre"));
	assert_non_null(strstr(e.path, "tokenizer.json"));
	tpc_gguf_kvs_release(&kv);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	assert_int_equal(system(cmd), 0);
}

/* config.json's <type>_token_id, read as gguf-py's SpecialVocab reads it:
 * the top level first, text_config only where the top level has none or
 * None (not lib/tpc_cfg.h's text_config rule, where text_config wins). */
static uint64_t id_of(const tpc_gguf_kvs *kv, const char *key)
{
	ptrdiff_t k = tpc_gguf_kvs_find(kv, key);
	assert_true(k >= 0);
	return kv->kv[k].v.u;
}

static void test_config_ids(void **st)
{
	(void)st;
	char tmp[] = "/tmp/tpc_ids_XXXXXX", cmd[512];
	assert_non_null(mkdtemp(tmp));
	snprintf(cmd, sizeof(cmd), "cp %s/tests/gguf/vocab/gpt2-bpe/* %s", getenv("TPC_SRC") ? getenv("TPC_SRC") : "../..",
		 tmp);
	assert_int_equal(system(cmd), 0);
	char *cfg = tpc_path_join(tmp, "config.json");
	FILE *f = fopen(cfg, "w");
	assert_non_null(f);
	fputs("{\"architectures\": [\"GPT2LMHeadModel\"], \"vocab_size\": 400, \"pad_token_id\": 3, "
	      "\"sep_token_id\": null, \"text_config\": {\"pad_token_id\": 7, \"sep_token_id\": 8, "
	      "\"mask_token_id\": 9}}", f);
	assert_int_equal(fclose(f), 0);
	tpc_gguf_kvs kv = {0};
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_gguf_vocab(tmp, "gpt2", 400, &kv, &e), 0);
	assert_int_equal(id_of(&kv, "tokenizer.ggml.padding_token_id"), 3);   /* the top level's */
	assert_int_equal(id_of(&kv, "tokenizer.ggml.seperator_token_id"), 8); /* top level None */
	assert_int_equal(id_of(&kv, "tokenizer.ggml.mask_token_id"), 9);      /* top level none */
	tpc_gguf_kvs_release(&kv);
	free(cfg);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	assert_int_equal(system(cmd), 0);
}

/* HunYuanModel's ids (hunyuan-dense, tests/gguf/arch/tiny-hunyuan-dense's
 * tokenizer files under edited config.json / generation_config.json): bos
 * 127958 at hidden_size 4096 only, eos eod_token_id's, eot the first of
 * generation_config.json's two eos ids, none for one; a negative or textual
 * eod_token_id and a textual first eos id refused by name */
static int hy_dense(const char *tmp, const char *cfg, const char *gen, tpc_gguf_kvs *kv, tpc_err *e)
{
	static const char *const names[] = {"config.json", "generation_config.json"};
	const char *text[] = {cfg, gen};
	for (int i = 0; i < 2; i++) {
		char *p = tpc_path_join(tmp, names[i]);
		FILE *f = fopen(p, "w");
		assert_non_null(f);
		fputs(text[i], f);
		assert_int_equal(fclose(f), 0);
		free(p);
	}
	memset(kv, 0, sizeof(*kv));
	tpc_err_init(e);
	return tpc_gguf_vocab(tmp, "hunyuan-dense", 320, kv, e);
}

static void test_hy_dense_ids(void **st)
{
	(void)st;
	char tmp[] = "/tmp/tpc_hyd_XXXXXX", cmd[512];
	tpc_gguf_kvs kv;
	tpc_err e;
	assert_non_null(mkdtemp(tmp));
	const char *src = getenv("TPC_SRC") ? getenv("TPC_SRC") : "../..";
	snprintf(cmd, sizeof(cmd), "cp %s/tests/gguf/arch/tiny-hunyuan-dense/hy.tiktoken "
		 "%s/tests/gguf/arch/tiny-hunyuan-dense/tokenizer_config.json %s", src, src, tmp);
	assert_int_equal(system(cmd), 0);
	static const char two[] = "{\"eos_token_id\": [315, 313]}";
	assert_int_equal(hy_dense(tmp, "{\"hidden_size\": 4096, \"bos_token_id\": 312, \"eos_token_id\": 313, \"eod_token_id\": 310}",
				  two, &kv, &e), 0);
	assert_int_equal(id_of(&kv, "tokenizer.ggml.bos_token_id"), 127958);
	assert_int_equal(id_of(&kv, "tokenizer.ggml.eos_token_id"), 310);
	assert_int_equal(id_of(&kv, "tokenizer.ggml.eot_token_id"), 315);
	assert_true(tpc_gguf_kvs_find(&kv, "tokenizer.ggml.eos_token_id") < tpc_gguf_kvs_find(&kv, "tokenizer.ggml.eot_token_id"));
	tpc_gguf_kvs_release(&kv);
	assert_int_equal(hy_dense(tmp, "{\"hidden_size\": 32, \"bos_token_id\": 312}", "{\"eos_token_id\": 313}", &kv, &e), 0);
	assert_int_equal(id_of(&kv, "tokenizer.ggml.bos_token_id"), 312);
	assert_int_equal(id_of(&kv, "tokenizer.ggml.eos_token_id"), 3); /* HunYuanDenseV1Config's default */
	assert_true(tpc_gguf_kvs_find(&kv, "tokenizer.ggml.eot_token_id") < 0);
	tpc_gguf_kvs_release(&kv);
	assert_int_equal(hy_dense(tmp, "{\"eod_token_id\": -1}", two, &kv, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "'eod_token_id' is negative: not a token id"));
	tpc_gguf_kvs_release(&kv);
	assert_int_equal(hy_dense(tmp, "{\"eod_token_id\": \"x\"}", two, &kv, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "'eod_token_id' is not an integer"));
	tpc_gguf_kvs_release(&kv);
	assert_int_equal(hy_dense(tmp, "{}", "{\"eos_token_id\": [\"a\", 3]}", &kv, &e), TPC_EINPUT);
	assert_non_null(strstr(e.path, "generation_config.json"));
	assert_non_null(strstr(e.msg, "eos_token_id: its first is not a token id"));
	tpc_gguf_kvs_release(&kv);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	assert_int_equal(system(cmd), 0);
}

/* Damaged tokenizer.model: every truncation of a real one, and
 * hand-made ones, each refused with the file and an offset. */
static void test_spm_hostile(void **st)
{
	(void)st;
	char *dir = vocab_dir("llama-spm");
	char *p = tpc_path_join(dir, "tokenizer.model"), *buf = NULL;
	size_t n = 0;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_read_file(p, 1 << 24, &buf, &n, &e), 0);
	tpc_spm m;
	assert_int_equal(tpc_spm_from_buffer((const uint8_t *)buf, n, "tokenizer.model", &m, &e), 0);
	assert_int_equal(m.n, 400);
	assert_string_equal(m.p[0].s, "<unk>");
	assert_int_equal(m.p[0].type, TPC_SPM_UNKNOWN);
	assert_int_equal(m.p[3].type, TPC_SPM_BYTE);
	tpc_spm_release(&m);
	size_t fails = 0;
	for (size_t cut = 1; cut < 200; cut++) { /* inside the first pieces */
		tpc_err_init(&e);
		int r = tpc_spm_from_buffer((const uint8_t *)buf, cut, "tokenizer.model", &m, &e);
		fails += r != 0;
		if (r) {
			assert_int_equal(r, TPC_EINPUT);
			assert_string_equal(e.path, "tokenizer.model");
		}
		assert_true(r || m.n);
		tpc_spm_release(&m);
	}
	assert_true(fails > 0 && fails < 199); /* prefixes ending between pieces load */
	static const struct { const char *b; size_t n; const char *msg; } bad[] = {
		{"\x0a\x05\x0a\x03<u>", 7, "UNKNOWN"},                  /* no unk piece */
		{"\x0a\x09\x0a\x03<u>\x18\x02", 9, "bytes but"},        /* piece length past the file */
		{"\x0a\x04\x0a\x03<u", 6, "bytes but"},                   /* string past its piece */
		{"\x0a\x02\x15\x00", 4, "runs past"},                     /* fixed32 past its piece */
		{"\x0a\x07\x0a\x03<u>\x18\x09", 9, "type 9"},          /* unknown type */
		{"\x0a\x02\x18\x02", 4, "empty"},                        /* no piece string */
		{"\x0a\x07\x0a\x03\xff\xfe\x41\x18\x02", 9, "UTF-8"},     /* not UTF-8 */
		{"\x0a\x07\x0a\x03<u>\x18\x02\x0a\x07\x0a\x03<u>\x18\x01", 18, "both"}, /* defined twice */
		{"\x0b\x00", 2, "wire type 3"},                             /* group */
		{"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12, "runs past"}, /* an 11-byte varint length */
		{"\x0a\xff\xff\xff\xff\x0f", 6, "bytes but"},              /* length past the file */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tpc_err_init(&e);
		int r = tpc_spm_from_buffer((const uint8_t *)bad[i].b, bad[i].n, "t.model", &m, &e);
		if (r != TPC_EINPUT || !strstr(e.msg, bad[i].msg))
			fail_msg("case %zu: %d '%s'", i, r, e.msg);
		assert_true(e.offset >= 0 || strstr(e.msg, "UNKNOWN") || strstr(e.msg, "both"));
	}
	free(buf);
	free(p);
	free(dir);
}

/* ---- the tokenizer files rebuilt from a GGUF (gguf_tok.c) ---- */

/* A GGUF of tests/gguf/vocab/<name> (the tokenizer keys only), opened as a checkpoint into ck */
static void tok_gguf(const char *name, const char *tmp, tpc_ckpt *ck)
{
	char *dir = vocab_dir(name), path[4096];
	tpc_gguf_kvs kv = {NULL, 0, 0};
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_gguf_kvs_str(&kv, "general.architecture", "qwen2", 5), 0);
	assert_int_equal(tpc_gguf_vocab(dir, strstr(name, "spm") ? "llama" : "qwen2", -1, &kv, &e), 0);
	snprintf(path, sizeof(path), "%s/%s.gguf", tmp, name);
	tpc_ckpt empty;
	tpc_ckpt_init(&empty);
	tpc_write_opts wo;
	memset(&wo, 0, sizeof(wo));
	wo.flags = TPC_W_FORCE;
	assert_int_equal(tpc_gguf_write(&empty, &kv, NULL, 0, path, &wo, &e), 0);
	tpc_ckpt_release(&empty);
	tpc_gguf_kvs_release(&kv);
	tpc_ckpt_init(ck);
	if (tpc_fmt_gguf.open(ck, path, NULL, &e))
		fail_msg("%s", e.msg);
	free(dir);
}

/* The hook on ck: its status; *n files, why */
static int tok_files(const tpc_ckpt *ck, size_t *n, char *why, tpc_err *e)
{
	tpc_hf_file f[TPC_HF_FILES_MAX];
	tpc_err_init(e);
	int r = tpc__gguf_hf_tokenizer(ck, f, n, why, 256, e);
	tpc_hf_files_release(f, *n);
	return r;
}

static void tok_refused(const tpc_ckpt *ck, const char *key, const char *what)
{
	size_t n = 9;
	char why[256];
	tpc_err e;
	int r = tok_files(ck, &n, why, &e);
	if (r != TPC_EINPUT || !strstr(e.msg, key) || !strstr(e.msg, what) || n)
		fail_msg("%s: %d '%s'", key, r, e.msg);
}

static void test_tok_hostile(void **st)
{
	(void)st;
	char tmp[] = "/tmp/tpc_tokXXXXXX", why[256];
	assert_non_null(mkdtemp(tmp));
	static const char *const names[] = {"llama-spm", "qwen2-bpe"};
	for (int k = 0; k < 2; k++) {
		tpc_ckpt ck;
		tok_gguf(names[k], tmp, &ck);
		tpc_gguf_kvs *kv = (tpc_gguf_kvs *)tpc_gguf_ckpt_kvs(&ck); /* edited in place: the test's own */
		size_t n = 0;
		tpc_err e;
		assert_int_equal(tok_files(&ck, &n, why, &e), 0);
		assert_int_equal(n, k ? 2 : 3); /* tokenizer.model and .json, or .json; the config */
		ptrdiff_t ti = tpc_gguf_kvs_find(kv, "tokenizer.ggml.token_type");
		assert_true(ti >= 0);
		uint64_t nt = kv->kv[ti].n;
		uint8_t *ty = malloc(nt * 4 + 4), *save = malloc(nt * 4);
		memcpy(save, kv->kv[ti].arr, nt * 4);
		/* one type fewer than tokens; a type 9 */
		assert_int_equal(tpc_gguf_kvs_arr(kv, "tokenizer.ggml.token_type", TPC_GV_I32, save, nt - 1), 0);
		tok_refused(&ck, "tokenizer.ggml.token_type", "not one per token");
		memcpy(ty, save, nt * 4);
		tpc_wr32le(ty + 4 * 7, 9);
		assert_int_equal(tpc_gguf_kvs_arr(kv, "tokenizer.ggml.token_type", TPC_GV_I32, ty, nt), 0);
		tok_refused(&ck, "tokenizer.ggml.token_type", "token 7 has a type outside 1..6");
		assert_int_equal(tpc_gguf_kvs_arr(kv, "tokenizer.ggml.token_type", TPC_GV_I32, save, nt), 0);
		/* an id past the tokens */
		assert_int_equal(tpc_gguf_kvs_uint(kv, "tokenizer.ggml.eos_token_id", TPC_GV_U32, nt), 0);
		tok_refused(&ck, "tokenizer.ggml.eos_token_id", "not one of tokenizer.ggml.tokens");
		assert_int_equal(tpc_gguf_kvs_uint(kv, "tokenizer.ggml.eos_token_id", TPC_GV_U32, 0), 0);
		/* a token twice */
		ptrdiff_t tk = tpc_gguf_kvs_find(kv, "tokenizer.ggml.tokens");
		char *t5 = kv->kv[tk].astr[5];
		uint64_t l5 = kv->kv[tk].alen[5];
		kv->kv[tk].astr[5] = kv->kv[tk].astr[6];
		kv->kv[tk].alen[5] = kv->kv[tk].alen[6];
		tok_refused(&ck, "tokenizer.ggml.tokens", "text of another");
		kv->kv[tk].astr[5] = t5;
		kv->kv[tk].alen[5] = l5;
		if (k == 0) { /* scores of another length */
			float sc[3] = {0, 0, 0};
			assert_int_equal(tpc_gguf_kvs_arr(kv, "tokenizer.ggml.scores", TPC_GV_F32, sc, 3), 0);
			tok_refused(&ck, "tokenizer.ggml.scores", "3 elements");
		} else { /* a merge naming an unknown token; a pre-tokenizer not expressed */
			const char *m[2] = {"h e", "zz q"};
			assert_int_equal(tpc_gguf_kvs_strs(kv, "tokenizer.ggml.merges", m, NULL, 2), 0);
			tok_refused(&ck, "tokenizer.ggml.merges", "merge 1 is not two tokens");
			assert_int_equal(tpc_gguf_kvs_str(kv, "tokenizer.ggml.pre", "deepseek-llm", 12), 0);
			assert_int_equal(tok_files(&ck, &n, why, &e), 0);
			assert_int_equal(n, 0);
			assert_non_null(strstr(why, "'deepseek-llm' is not one"));
		}
		free(ty);
		free(save);
		tpc_ckpt_release(&ck);
	}
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	assert_int_equal(system(cmd), 0);
}

/* HunYuan's hy.tiktoken (gguf_tiktoken.c): ranks by line, QwenModel.bpe's
 * merges, GPT-2's byte strings; each damaged file refused by line */
static void test_tiktoken(void **st)
{
	(void)st;
	/* a b c ab abc " " "\n" */
	static const char ok_file[] = "YQ== 0\nYg== 1\nYw== 2\nYWI= 3\nYWJj 4\nIA== 5\r\nCg== 6";
	tpc__tiktoken t;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc__tiktoken_from_buffer(ok_file, sizeof(ok_file) - 1, "hy.tiktoken", &t, &e), 0);
	assert_int_equal(t.n, 7);
	assert_int_equal(tpc__tiktoken_rank(&t, (const uint8_t *)"abc", 3), 4);
	assert_int_equal(tpc__tiktoken_rank(&t, (const uint8_t *)"bc", 2), -1);
	size_t split = 9;
	assert_int_equal(tpc__tiktoken_merge(&t, 3, &split), 1); /* ab: a b */
	assert_int_equal(split, 1);
	assert_int_equal(tpc__tiktoken_merge(&t, 4, &split), 1); /* abc: ab c (abc's own rank is not below 4) */
	assert_int_equal(split, 2);
	assert_int_equal(tpc__tiktoken_merge(&t, 0, &split), 0);
	char out[16];
	assert_int_equal(tpc__gpt2_bytes_str((const uint8_t *)" \n\xff\xad!", 5, out), 9);
	assert_memory_equal(out, "\xc4\xa0\xc4\x8a\xc3\xbf\xc5\x83!", 9); /* U+0120 U+010A U+00FF U+0143 ! */
	uint8_t back[16];
	assert_int_equal(tpc__gpt2_str_bytes(out, 9, back), 5); /* and back */
	assert_memory_equal(back, " \n\xff\xad!", 5);
	assert_int_equal(tpc__gpt2_str_bytes("\xc3", 1, back), -1);          /* cut UTF-8 */
	assert_int_equal(tpc__gpt2_str_bytes("\xe2\x82\xac", 3, back), -1); /* U+20AC: no byte's */
	assert_int_equal(tpc__gpt2_str_bytes("\xc4\xa1", 2, back), 1);      /* U+0121: byte 0x7f */
	assert_int_equal(back[0], 0x7f);
	char b64[16];
	assert_int_equal(tpc__b64_encode((const uint8_t *)"abcd", 4, b64), 8);
	assert_memory_equal(b64, "YWJjZA==", 8);
	assert_int_equal(tpc__b64_encode((const uint8_t *)"ab", 2, b64), 4);
	assert_memory_equal(b64, "YWI=", 4);
	char nb[32];
	assert_string_equal(tpc__hy_special(0, nb, sizeof(nb)), "<|endoftext|>");
	assert_string_equal(tpc__hy_special(4, nb, sizeof(nb)), "<|pad|>");
	assert_string_equal(tpc__hy_special(5, nb, sizeof(nb)), "<|extra_0|>");
	assert_string_equal(tpc__hy_special(209, nb, sizeof(nb)), "<|extra_204|>");
	tpc__tiktoken_release(&t);
	static const struct { const char *f, *msg; } bad[] = {
		{"YQ== 0\nYQ== 1\n", "line 2: the token of line 0 again"},
		{"YQ== 1\n", "line 1: rank '1' is not the line's"},
		{"YQ== 0\nYg==\n", "line 2: not a base64 token and its rank"},
		{"YQ== 0 x\n", "line 1: not a base64 token and its rank"},
		{"\n", "line 1: not a base64 token and its rank"},
		{"Y!== 0\n", "line 1: the token is not base64"},
		{"YQ= 0\n", "line 1: the token is not base64"},
		{"==== 0\n", "line 1: the token is not base64"},
		{"YQ== -1\n", "line 1: rank '-1'"},
		{"", "no tokens"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tpc_err_init(&e);
		int r = tpc__tiktoken_from_buffer(bad[i].f, strlen(bad[i].f), "hy.tiktoken", &t, &e);
		if (r != TPC_EINPUT || !strstr(e.msg, bad[i].msg) || strcmp(e.path, "hy.tiktoken"))
			fail_msg("case %zu: %d '%s'", i, r, e.msg);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_llama_spm), cmocka_unit_test(test_mistral_spm),
		cmocka_unit_test(test_gemma_spm), cmocka_unit_test(test_phi3_spm),
		cmocka_unit_test(test_qwen2_bpe), cmocka_unit_test(test_gpt2_bpe),
		cmocka_unit_test(test_gptneox_bpe), cmocka_unit_test(test_bpe_pre), cmocka_unit_test(test_config_ids),
		cmocka_unit_test(test_spm_hostile), cmocka_unit_test(test_tok_hostile), cmocka_unit_test(test_tiktoken),
		cmocka_unit_test(test_hy_dense_ids),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
