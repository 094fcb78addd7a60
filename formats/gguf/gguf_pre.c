/*
 * gguf_pre.c - tokenizer.ggml.pre for a tokenizer.json BPE, from the
 * tokenizer's own description rather than the reference's hash.
 *
 * convert_hf_to_gguf.py names the pre-tokenizer by hashing the ids Hugging
 * Face tokenizers gives for a check text, and refuses a tokenizer whose hash
 * its table lacks. What llama.cpp does with the name is pick a list of split
 * regexes and a few flags (src/llama-vocab.cpp, llm_tokenizer_bpe and
 * llama_vocab::impl::load). So tpconv reads what decides the split -
 * tokenizer.json's normalizer, pre_tokenizer and model.ignore_merges - and
 * names the llama.cpp pre-tokenizer that splits the same way:
 *
 *   ByteLevel(add_prefix_space false, use_regex true)  -> "gpt-2"
 *       (GPT-2's regex inside ByteLevel; llama.cpp's LLAMA_VOCAB_PRE_TYPE_GPT2)
 *   the same after an NFC normalizer                   -> "olmo"
 *       (GPT-NeoX-20B's tokenizer: Pythia, MPT, OLMo 1; the reference's hash
 *       table names it "olmo", its last entry for that hash; the GPT-2 regex)
 *   Sequence[Split(QWEN2 regex, Isolated), ByteLevel(use_regex false)]
 *                                                     -> "qwen2"
 *   Sequence[Split(LLAMA3 regex, Isolated), ByteLevel(use_regex false)],
 *       model.ignore_merges true                      -> "llama-bpe"
 *
 * Several names select one regex in llama.cpp (gpt-2, phi-2, mpt, olmo...;
 * qwen2, deepseek-r1-qwen, stablelm2...): the name written is the one the
 * reference writes for the model the regex comes from, and may differ from
 * the name its hash would pick for another model with the same split.
 * Anything else (another regex, a normalizer other than NFC, a prefix space,
 * ignore_merges not as the name implies) is refused: a wrong name makes
 * llama.cpp split text differently without a word.
 */
#include <string.h>

#include "gguf_vocab_int.h"

/* The regexes as tokenizer.json spells them (Qwen2 and Llama 3). */
static const char qwen2_re[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
			       " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char llama3_re[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
				" ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The pre-tokenizers tpconv names and writes back: the regex of a
 * Sequence[Split, ByteLevel] (NULL: GPT-2's, inside ByteLevel), whether an NFC
 * normalizer goes with it (only told apart for the ByteLevel ones),
 * model.ignore_merges, and the tokenizer_class transformers loads it with
 * when the family's record names none. */
const tpc__gguf_pre tpc__gguf_pres[] = {
	{"gpt-2", NULL, false, false, "GPT2Tokenizer"},
	{"olmo", NULL, true, false, "GPT2Tokenizer"},
	{"qwen2", qwen2_re, false, false, "GPT2Tokenizer"},
	{"llama-bpe", llama3_re, false, true, "PreTrainedTokenizerFast"},
	{NULL, NULL, false, false, NULL},
};

const tpc__gguf_pre *tpc__gguf_pre_find(const char *name)
{
	for (const tpc__gguf_pre *p = tpc__gguf_pres; name && p->name; p++)
		if (!strcmp(p->name, name))
			return p;
	return NULL;
}

static const cJSON *item(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static bool type_is(const cJSON *o, const char *t)
{
	const char *s = cJSON_GetStringValue(item(o, "type"));
	return s && !strcmp(s, t);
}

/* A ByteLevel step without a prefix space; *regex: its use_regex (default true). */
static bool byte_level(const cJSON *o, bool *regex)
{
	if (!cJSON_IsObject(o) || !type_is(o, "ByteLevel") || tpc__json_truthy(item(o, "add_prefix_space")))
		return false;
	const cJSON *r = item(o, "use_regex");
	*regex = !r || cJSON_IsTrue(r);
	return !r || cJSON_IsBool(r);
}

/* Split(pattern {"Regex": ...}, behavior Isolated, invert false): its regex, or NULL. */
static const char *split_regex(const cJSON *o)
{
	const char *b = cJSON_GetStringValue(item(o, "behavior"));
	if (!cJSON_IsObject(o) || !type_is(o, "Split") || !b || strcmp(b, "Isolated") ||
	    tpc__json_truthy(item(o, "invert")))
		return NULL;
	return cJSON_GetStringValue(item(item(o, "pattern"), "Regex"));
}

int tpc__gguf_pre_detect(const cJSON *tok_json, const char **name, const char **why)
{
	const cJSON *pre = item(tok_json, "pre_tokenizer"), *norm = item(tok_json, "normalizer");
	const cJSON *im = item(item(tok_json, "model"), "ignore_merges");
	bool ignore_merges = cJSON_IsTrue(im), regex = false;
	*name = NULL;
	if (norm && !cJSON_IsNull(norm) && !type_is(norm, "NFC")) {
		*why = "its normalizer is not one llama.cpp's BPE pre-tokenizers follow (none or NFC)";
		return -1;
	}
	if (im && !cJSON_IsBool(im)) {
		*why = "model.ignore_merges is not a bool";
		return -1;
	}
	bool nfc = norm && type_is(norm, "NFC"), gpt2 = byte_level(pre, &regex) && regex;
	const char *re = NULL;
	if (type_is(pre, "Sequence")) {
		const cJSON *p = item(pre, "pretokenizers");
		re = cJSON_GetArraySize(p) == 2 ? split_regex(cJSON_GetArrayItem(p, 0)) : NULL;
		if (re && !(byte_level(cJSON_GetArrayItem(p, 1), &regex) && !regex))
			re = NULL;
	}
	for (const tpc__gguf_pre *r = tpc__gguf_pres; r->name && !*name; r++)
		if ((r->regex ? re && !strcmp(re, r->regex) : gpt2 && r->nfc == nfc) && r->ignore_merges == ignore_merges)
			*name = r->name;
	if (!*name) {
		*why = "its pre_tokenizer (with model.ignore_merges) is not one tpconv maps to a llama.cpp pre-tokenizer "
		       "(GPT-2's ByteLevel, Qwen2's or Llama 3's Split regex); give the name with --gguf-pre NAME";
		return -1;
	}
	return 0;
}
