/*
 * tpc_cfg.h - one reader for a Hugging Face config.json (and the few
 * documents shaped like it): parsed once, read through typed getters.
 *
 * (Not tpc_config.h: that is the header the build generates.)
 *
 * A getter names its keys as "a|b|c": the first alias present wins, as
 * convert_hf_to_gguf.py's find_hparam. JSON null counts as present (a Python
 * None in the dict); the typed getters treat a null as absent. Each call says
 *
 *   - where to look, the scope:
 *       TPC_CFG_TOP   the top level only;
 *       TPC_CFG_TEXT  the text_config rule: for each alias in order, a member
 *                     of a "text_config" object wins over the same member at
 *                     the top level. This is the one text_config rule.
 *   - how strict to be, the flags:
 *       TPC_CFG_REQUIRED  absent is an error ("key 'a' not found");
 *       TPC_CFG_LENIENT   a value of the wrong type or out of range counts as
 *                         absent and the next alias is tried (the model facts
 *                         read this way: a config may hold a member of the
 *                         same name that means something else);
 *       0                 optional: absent leaves *out untouched and returns
 *                         0; the wrong type is an error.
 *
 * Getters return 1 when a value was stored, 0 when absent (optional), or a
 * negative tpc_status. Errors have one shape, naming the file and the key:
 *   'config.json': key 'num_attention_heads' not found
 *   'config.json': key 'rope_theta' is not a number
 *   'config.json': key 'num_attention_heads' (7.5) is not an integer in [1, 9007199254740992]
 *
 * Why the text_config rule is "its members win": before this reader there
 * were three rules. shard/tpc_plan.c read the facts from text_config only when
 * the top level had no heads (and then from text_config alone);
 * formats/gguf_arch.c let text_config's members win (convert_hf_to_gguf.py's
 * TextModel.__init__ merges {**hparams, **text_config}); formats/gguf_special.c
 * read member by member, the top level first. A multimodal config
 * (Llava, Gemma 3, Mistral 3) keeps the language model in text_config and the
 * whole model's members at the top, and transformers' get_text_config() hands
 * the language model text_config: its members are the language model's, so
 * they win, and what it lacks comes from the top (the reference converter's
 * merge). The three agree on every config with no text_config, and on every
 * config where text_config and the top level do not name the same member;
 * no existing test or fixture has one that does.
 *
 * The rope: tpc_cfg_rope() is the one place that picks the rope object:
 * "rope_parameters" (transformers 5), else "rope_scaling" (before), each an
 * object or ignored, under the text_config rule. tpc_cfg_rope_num() reads a
 * member of it with the top-level mirror transformers 5 applies
 * (rope_theta and partial_rotary_factor may sit at the top level, "type" is
 * the old name of "rope_type"). Before, shard/tpc_plan.c preferred
 * rope_scaling and the top-level rope_theta, formats/gguf_arch.c
 * rope_parameters: the latter is what transformers 5 writes and reads, so it
 * is the rule; the two differ only on a config that has both, with
 * different values.
 */
#ifndef TPC_CFG_H
#define TPC_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_err.h"

struct cJSON;

/* config.json files larger than this are refused (a real one is a few KiB) */
#define TPC_CFG_MAX_BYTES (64u << 20)

typedef enum tpc_cfg_scope {
	TPC_CFG_TOP = 0, /* the top level only */
	TPC_CFG_TEXT,    /* text_config's member wins, else the top level's */
} tpc_cfg_scope;

enum {
	TPC_CFG_REQUIRED = 1u << 0,
	TPC_CFG_LENIENT = 1u << 1,
};

typedef struct tpc_cfg tpc_cfg;

/* Parse `len` bytes (a JSON object, else TPC_EINPUT) labelled `path` in
 * errors ("config.json" when NULL). *out is freed with tpc_cfg_free. */
int tpc_cfg_from_buffer(tpc_cfg **out, const char *text, size_t len, const char *path, tpc_err *e);
int tpc_cfg_from_file(tpc_cfg **out, const char *path, tpc_err *e);
void tpc_cfg_free(tpc_cfg *c);

/* The file name errors use; the parsed tree (read-only) and text_config
 * (NULL when there is none) for what the getters do not cover. */
const char *tpc_cfg_path(const tpc_cfg *c);
const struct cJSON *tpc_cfg_root(const tpc_cfg *c);
const struct cJSON *tpc_cfg_text(const tpc_cfg *c);

/* The raw value of the first alias present (JSON null included), NULL when
 * none is; *which (may be NULL) gets the alias found, valid until the next
 * call on c. */
const struct cJSON *tpc_cfg_get(const tpc_cfg *c, tpc_cfg_scope s, const char *names, const char **which);

/* An integer (a number with no fraction) in [lo, hi]. */
int tpc_cfg_int(const tpc_cfg *c, tpc_cfg_scope s, const char *names, unsigned flags, int64_t lo, int64_t hi,
		int64_t *out, tpc_err *e);
/* A number. */
int tpc_cfg_num(const tpc_cfg *c, tpc_cfg_scope s, const char *names, unsigned flags, double *out, tpc_err *e);
/* true or false: *out 1 or -1. */
int tpc_cfg_bool(const tpc_cfg *c, tpc_cfg_scope s, const char *names, unsigned flags, int *out, tpc_err *e);
/* A string, borrowed from c. */
int tpc_cfg_str(const tpc_cfg *c, tpc_cfg_scope s, const char *names, unsigned flags, const char **out,
		tpc_err *e);

/* The rope object (rope_parameters, else rope_scaling; NULL when neither is
 * an object), and a number from it: `name` in the object, else for
 * "rope_theta" and "partial_rotary_factor" the top-level `top` aliases (may
 * be NULL), under scope s. Same returns as the getters. */
const struct cJSON *tpc_cfg_rope(const tpc_cfg *c, tpc_cfg_scope s);
int tpc_cfg_rope_num(const tpc_cfg *c, tpc_cfg_scope s, const char *name, const char *top, unsigned flags,
		     double *out, tpc_err *e);
/* The rope type: rope_type, else the older "type" (NULL when unsaid). */
const char *tpc_cfg_rope_type(const tpc_cfg *c, tpc_cfg_scope s);

#endif
