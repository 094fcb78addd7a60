/*
 * gguf_vocab_int.h - shared by gguf_vocab.c (the token list) and
 * gguf_special.c (gguf-py's SpecialVocab: merges, special token ids,
 * add_*_token flags, chat template, normalizer flags). Private to formats/.
 */
#ifndef TPC_GGUF_VOCAB_INT_H
#define TPC_GGUF_VOCAB_INT_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "gguf.h"
#include "tpc_cfg.h"

/* JSON files of the model folder, each NULL when absent. */
typedef struct tpc__vocab_dir {
	const char *dir;
	cJSON *tok_json; /* tokenizer.json */
	cJSON *tok_cfg;  /* tokenizer_config.json */
	tpc_cfg *config; /* config.json, through lib's reader */
} tpc__vocab_dir;

/* Read dir/name as JSON into *out (NULL, and 0, when the file is absent). */
int tpc__vocab_json(const char *dir, const char *name, cJSON **out, tpc_err *e);

/* One SpecialVocab(dir, load_merges, special_token_types, n_vocab) and its
 * add_to_gguf(). types: NULL for the default (bos eos unk sep pad cls mask).
 * fixed[k] = {type, id}: _set_special_token calls made after loading (gemma,
 * codellama); drop_template: chat_template set to None before adding. */
typedef struct tpc__special_fix {
	const char *type;
	int64_t id;
} tpc__special_fix;

int tpc__special_vocab(const tpc__vocab_dir *vd, bool load_merges, const char *const *types, size_t ntypes,
		       int64_t n_vocab, const tpc__special_fix *fixed, size_t nfixed, bool drop_template,
		       tpc_gguf_kvs *kv, tpc_err *e);

/* Python truthiness of a JSON value (None, false, 0, "", [], {} are false). */
bool tpc__json_truthy(const cJSON *v);
/* A JSON number holding an integer (or a bool, which Python counts as
 * one) -> *out; false otherwise. */
bool tpc__json_int(const cJSON *v, int64_t *out);

/* gguf_tiktoken.c: a tiktoken vocabulary file (HunYuan's hy.tiktoken): the
 * tokens in rank order, their bytes one after another, and a hash of them. */
typedef struct tpc__tiktoken {
	uint8_t *bytes;
	uint64_t *off; /* token r: bytes[off[r] .. off[r + 1]) */
	size_t n;
	uint32_t *slot; /* open addressing: rank + 1, 0 empty */
	size_t cap;     /* a power of two */
} tpc__tiktoken;
/* Parse p[0..len) (path: for errors); every fault refused by line number */
int tpc__tiktoken_from_buffer(const char *p, size_t len, const char *path, tpc__tiktoken *t, tpc_err *e);
void tpc__tiktoken_release(tpc__tiktoken *t);
/* The rank of the token s[0..n), -1 when there is none */
int64_t tpc__tiktoken_rank(const tpc__tiktoken *t, const uint8_t *s, size_t n);
/* QwenModel.bpe(mergeable_ranks, token r, max_rank=r): 1 when it ends in
 * two parts (the first *split bytes long), 0 otherwise, -1 out of memory */
int tpc__tiktoken_merge(const tpc__tiktoken *t, size_t r, size_t *split);
/* b[0..n) through GPT-2's bytes_to_unicode, UTF-8 into out (room for 2n):
 * its length */
size_t tpc__gpt2_bytes_str(const uint8_t *b, size_t n, char *out);
/* The other way: s[0..n) (UTF-8 of GPT-2's code points) into out (room
 * for n): its length, -1 when s is not such a string */
int64_t tpc__gpt2_str_bytes(const char *s, size_t n, uint8_t *out);
/* b[0..n) as padded base64 into out (room for 4 * (n + 2) / 3): its length */
size_t tpc__b64_encode(const uint8_t *b, size_t n, char *out);
/* HunYuan's special token k after the last rank (tokenization_hy.py's
 * SPECIAL_TOKENS: <|endoftext|>, <|startoftext|>, <|bos|>, <|eos|>, <|pad|>,
 * then <|extra_N|> from 0); buf (32 bytes) holds the extra ones' text */
const char *tpc__hy_special(size_t k, char *buf, size_t n);

/* s[0..len) is "<0xNN>" (two hex digits, either case): a byte token, BYTE
 * in gguf-py's LlamaHfVocab whatever else it is. */
bool tpc__vocab_is_byte(const char *s, size_t len);

/* gguf_pre.c: the llama.cpp pre-tokenizer name (tokenizer.ggml.pre) that
 * splits text as tokenizer.json's normalizer, pre_tokenizer and
 * model.ignore_merges do -> *name (static), 0; -1 and *why (static) when
 * tpconv knows none. */
int tpc__gguf_pre_detect(const cJSON *tok_json, const char **name, const char **why);

/* gguf_pre.c: the pre-tokenizers (tokenizer.ggml.pre) tpconv names and
 * writes back into a tokenizer.json, one table; ends with name NULL. */
typedef struct tpc__gguf_pre {
	const char *name;      /* llama.cpp's name */
	const char *regex;     /* Split's regex as tokenizer.json spells it; NULL: ByteLevel's own (GPT-2's) */
	bool nfc;              /* with an NFC normalizer (ByteLevel ones) */
	bool ignore_merges;    /* model.ignore_merges */
	const char *tok_class; /* tokenizer_class when the family's record names none */
} tpc__gguf_pre;
extern const tpc__gguf_pre tpc__gguf_pres[];
/* The row named `name`, or NULL. */
const tpc__gguf_pre *tpc__gguf_pre_find(const char *name);

#endif
