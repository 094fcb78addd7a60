/*
 * tpc_rules.h - the remap stage: rename, select, drop, keep, prefix,
 * transpose and cast rules, applied between a reader and a writer.
 *
 * Every checkpoint passes through this stage in `convert` and in `shard`. It
 * changes descriptions only: names, the tensor list, shape/stride order for a
 * transpose, and the output dtype. Bytes move once, when the writer streams the
 * tensor (a pending cast is done then, by tpc_ckpt_read_out / write_tensor).
 *
 * Rules
 * -----
 * A rule list comes from JSON (a file, a built-in preset) and from command
 * line shorthands; rules run in the order given, each over every tensor still
 * present, on the name as the rules before it left it. One JSON object per
 * rule, with exactly one action key:
 *
 *   {"select": "P"}           keep only tensors under "P." and drop that prefix
 *                             ("ema_model.a.b" -> "a.b"); with a pickled tree
 *                             (ck->root) the tree becomes its subtree P
 *   {"drop": "RE"}            remove tensors whose name matches RE (a search, so
 *                             "clip\\." is Python's `'clip.' in k`)
 *   {"keep": "RE"}            remove tensors whose name does not match RE
 *   {"rename": "RE", "to": "REPL"}
 *                             replace every match of RE, as Python's re.sub:
 *                             \1..\9 are capture groups, \0 the whole match,
 *                             \\ a backslash
 *   {"strip_prefix": "S"}     remove the literal prefix S where present
 *   {"add_prefix": "S"}       prepend the literal S
 *   {"transpose": "RE"}       2-D tensors matching RE become their transpose
 *                             ([in, out] -> [out, in]); a second match swaps back
 *   {"dtype": "bf16"}         cast floating tensors (F64 F32 F16 BF16) to bf16,
 *                             f16, f32 or f64; a later dtype rule wins
 *   {"unfuse": "RE", "groups": "G", "dim": 0,
 *    "parts": [{"to": "REPL", "size": "S"}, ...]}
 *                             a tensor matching RE is taken apart along dim
 *                             (default 0), seen as G repetitions (default 1) of
 *                             [part 0; part 1; ...]: part k is the
 *                             concatenation over the groups of its slice, a
 *                             tensor named as rename names it with the part's
 *                             "to" (a part without "to" is left out: padding).
 *                             With "to" on the rule instead of on the parts the
 *                             tensor stays one, its parts brought together:
 *                             [part 0 of every group; part 1 of every group; ...]
 *                             (Megatron GPT's per-head [q_h; k_h; v_h] becomes
 *                             [q; k; v]). Sizes are given for every part or for
 *                             none (equal parts); one may be "rest" (what the
 *                             others leave of a group). The slices are views:
 *                             no byte is copied.
 *   {"rope_halves": "RE", "heads": "H", "head_dim": "D"}
 *                             the rows (dim 0) of a tensor matching RE are H
 *                             heads whose rotary pairs are interleaved, as
 *                             Meta's llama and torchtitan keep q and k (rows 2i
 *                             and 2i+1 of a head rotate together); they are
 *                             reordered to Hugging Face's halves (rows i and
 *                             i + D/2): transformers' convert_llama_weights_to_hf
 *                             .py permute, w.view(H, D/2, 2, in).transpose(1, 2)
 *                             .reshape(H*D, in). "head_dim" is optional; given,
 *                             the rows must be H * D. Views: no byte is copied.
 *   {"rope_pairs": "RE", "heads": "H", "head_dim": "D"}
 *                             the inverse (torchtitan's from_hf), halves to pairs
 *
 * Modifiers: "when": "RE" and "unless": "RE" (the rule applies only to names
 * that match / do not match; any rule but select), "match": "RE" (another
 * spelling of "when" that reads better on dtype rules: {"dtype": "f32",
 * "match": "norm"}), "optional": true (no warning when the rule matches nothing; for select: if
 * no name is under "P.", nothing is selected and nothing dropped),
 * "ints": true (a dtype rule also casts integer and bool tensors, which are
 * otherwise never cast), "comment": "..." (ignored). Anything else is an
 * error naming the key.
 *
 * A rules file is {"extends": "PRESET" or ["P1", ...], "description": "...",
 * "rules": [...]} (the preset's rules first), or just the list [...]. Example:
 *
 *   {"extends": "dalle2",
 *    "rules": [{"strip_prefix": "module."},
 *              {"transpose": "(^|\\.)c_attn\\.weight$"},
 *              {"dtype": "bf16"},
 *              {"dtype": "f32", "match": "norm"}]}
 *
 * Regular expressions (lib/tpc_regex.h, the dialect plans use too) are
 * POSIX extended (regcomp REG_EXTENDED, glibc), plus
 * \d and \D, which are rewritten to [0-9] and [^0-9]. Not available, and
 * refused with a message rather than misread: lookaround and other (?...)
 * groups, lazy quantifiers (*? +? ??). Inside a bracket expression a
 * backslash is a literal character (POSIX), so write [.] rather than [\.].
 * Matching is leftmost-longest (POSIX), not Python's leftmost-first; for the
 * anchored and literal patterns rename rules use, the two agree.
 *
 * Presets (tpc_rules_preset_*): dalle2, libai, strip-module, gpt2-conv1d,
 * megatron-llama, megatron-gpt, torchtitan, hf-torchtitan; the
 * text of each is its JSON, shown by `tpconv rules NAME`.
 *
 * Applying
 * --------
 * tpc_rules_plan() runs the rules over the names and records the outcome in a
 * tpc_remap without touching the checkpoint: new name or the rule that dropped
 * it, transpose, output dtype, and how many names each rule matched. It fails
 * (TPC_EUSAGE) when two tensors end with the same name, naming both sources,
 * when a name becomes empty, on a transpose of a tensor that is not 2-D, on
 * a cast tpc_cast cannot do, and on an unfuse whose sizes are unknown (a
 * missing fact) or do not tile the tensor. Unmatched rules are reported by
 * tpc_remap_unmatched(); the caller warns, or fails under --strict.
 * tpc_remap_apply() then changes the checkpoint in place. tpc_remap_table()
 * renders the dry-run table.
 */
#ifndef TPC_RULES_H
#define TPC_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_buf.h"
#include "tpc_ckpt.h"
#include "tpc_dtype.h"
#include "tpc_err.h"

typedef enum tpc_rule_kind {
	TPC_RULE_SELECT = 1,
	TPC_RULE_DROP,
	TPC_RULE_KEEP,
	TPC_RULE_RENAME,
	TPC_RULE_STRIP_PREFIX,
	TPC_RULE_ADD_PREFIX,
	TPC_RULE_TRANSPOSE,
	TPC_RULE_DTYPE,
	TPC_RULE_UNFUSE,
	TPC_RULE_ROPE_HALVES,
	TPC_RULE_ROPE_PAIRS,
} tpc_rule_kind;

/*
 * Sizes and group counts of unfuse rules are integers or products and
 * quotients of integers and model facts: "heads/kv_heads*head_dim", "2",
 * "kv_heads". A quotient must divide exactly. The facts are what the caller
 * knows about the model (tpc_rules_set_fact: flags, a config.json, the args a
 * Megatron checkpoint records); a rule that needs one nobody gave fails at
 * planning (TPC_EUSAGE naming the fact, the rule and the tensor) rather than
 * guess.
 *
 * The heads and head_dim of rope rules are such expressions too.
 *
 * Megatron presets: megatron-llama and megatron-gpt map Megatron-Core names
 * (a torch_dist checkpoint as tpconv reads it, or a legacy tp-1 rank file's
 * "model") to Hugging Face's, un-fusing linear_qkv per query group and
 * linear_fc1 = [gate; up].
 */
typedef struct tpc_rules tpc_rules; /* compiled rule list (opaque) */
#define TPC_RULES_MAX_PARTS 16

typedef enum tpc_rules_fact {
	TPC_FACT_HEADS,      /* "heads": attention heads */
	TPC_FACT_KV_HEADS,   /* "kv_heads": key/value heads = Megatron's query groups */
	TPC_FACT_HEAD_DIM,   /* "head_dim": Megatron's kv_channels */
	TPC_FACT_HIDDEN,     /* "hidden" */
	TPC_FACT_VOCAB,      /* "vocab": the tokenizer's vocabulary, unpadded */
	TPC_NFACTS
} tpc_rules_fact;

/* "heads", "kv_heads", ...; NULL out of range. */
const char *tpc_rules_fact_name(int f);
/* Set a fact (> 0) unless it is set already: the first source given wins.
 * `from` says where it came from in messages ("--kv-heads", "config.json"). */
int tpc_rules_set_fact(tpc_rules *r, int f, int64_t value, const char *from, tpc_err *e);
/* A fact's value (0: unknown) and where it came from (NULL: unknown). */
int64_t tpc_rules_get_fact(const tpc_rules *r, int f, const char **from);
/* Bit (1u << f) for every fact some rule's sizes or groups name. */
unsigned tpc_rules_facts_used(const tpc_rules *r);

/* One part of an unfuse rule: its name replacement (NULL: left out, or the
 * rule has one "to") and size expression (NULL: equal parts; "rest"). */
typedef struct tpc_rule_part {
	const char *to;
	const char *size;
} tpc_rule_part;

/* One rule as text, for tpc_rules_add (command-line shorthands). NULL fields
 * are absent. `arg` is the action's value: the prefix for select and the
 * prefix rules, the pattern for drop/keep/rename/transpose (NULL for dtype). */
typedef struct tpc_rule_spec {
	tpc_rule_kind kind;
	const char *arg;
	const char *to;     /* rename replacement */
	const char *when;
	const char *unless;
	const char *match;  /* same as `when` (one of the two) */
	tpc_dtype dtype;    /* dtype rules */
	bool optional;
	bool ints;
	/* unfuse */
	const char *groups; /* expression; NULL: 1 */
	int dim;
	const tpc_rule_part *parts;
	int nparts;
	/* rope_halves / rope_pairs: expressions */
	const char *heads, *head_dim;
} tpc_rule_spec;



/* A new empty list (NULL on out of memory); free with tpc_rules_free (NULL ok). */
tpc_rules *tpc_rules_new(void);
void tpc_rules_free(tpc_rules *r);

/* Append one rule. `origin` says where it came from in messages
 * ("--rename '\\.g$=.gamma'"; copied). Bad patterns, bad group references and
 * missing fields are TPC_EUSAGE naming the origin. */
int tpc_rules_add(tpc_rules *r, const tpc_rule_spec *s, const char *origin, tpc_err *e);

/* Parse a rules document (JSON text, `len` bytes) and append its rules (its
 * presets' first). `label` names it in messages ("rules.json", "preset
 * dalle2"). Errors are TPC_EUSAGE: "rules.json: rule 3: unknown key 'foo'". */
int tpc_rules_from_buffer(tpc_rules *r, const char *text, size_t len, const char *label,
			  tpc_err *e);
int tpc_rules_from_file(tpc_rules *r, const char *path, tpc_err *e);
/* Append a preset's rules; unknown name -> TPC_EUSAGE listing the presets. */
int tpc_rules_add_preset(tpc_rules *r, const char *name, tpc_err *e);
/* --rules ARG: a preset name, else a file (./dalle2 for a file named like a
 * preset). A bare word that is neither is TPC_EUSAGE listing the presets. */
int tpc_rules_load(tpc_rules *r, const char *arg, tpc_err *e);

size_t tpc_rules_count(const tpc_rules *r);
/* One line describing rule i: "preset dalle2 rule 3: rename '\\.g$' -> '.gamma' when 'cross_attn|fn\\.fn\\.'". */
const char *tpc_rules_describe(const tpc_rules *r, size_t i, char *buf, size_t n);

/* Built-in presets: count, name, one-line description, JSON text. */
size_t tpc_rules_preset_count(void);
const char *tpc_rules_preset_name(size_t i);
const char *tpc_rules_preset_desc(size_t i);
const char *tpc_rules_preset_text(const char *name); /* NULL if unknown */

/* The outcome of running the rules over a checkpoint's names. Arrays are
 * indexed by entry, except hits (by rule): entries [0, n0) are ck's tensors
 * at plan time, the rest the parts unfuse rules took from them. */
typedef struct tpc_remap {
	size_t n;            /* entries */
	size_t n0;           /* the checkpoint's tensors */
	size_t cap;
	int64_t *parent;     /* the entry an unfused part was taken from; -1 for ck's */
	bool *unfused;       /* entry i was replaced by its parts */
	tpc_tensor *derived; /* entries >= n0: their description (derived[i - n0]) */
	char **how;          /* entries >= n0: what they are, for the table */
	char **name;         /* final name; NULL when dropped */
	int64_t *dropped_by; /* rule that dropped tensor i, or -1 */
	bool *transpose;     /* swap dims 0 and 1 */
	tpc_dtype *dtype;    /* output dtype */
	size_t nrules;
	uint64_t *hits;      /* per rule: names it matched (acted on) */
	char **select;       /* prefixes selected, in order (for the tree) */
	size_t nselect;
	size_t nkept;
} tpc_remap;

void tpc_remap_init(tpc_remap *m);
void tpc_remap_release(tpc_remap *m);

int tpc_rules_plan(const tpc_rules *r, const tpc_ckpt *ck, tpc_remap *m, tpc_err *e);
/* Rule i matched nothing and is not optional. */
bool tpc_remap_unmatched(const tpc_rules *r, const tpc_remap *m, size_t i);
/* Apply a plan made for `ck` (same tensor list): renames, drops, transposes,
 * casts, and the selected subtree of ck->root. */
int tpc_remap_apply(tpc_ckpt *ck, const tpc_remap *m, tpc_err *e);
/* Dry-run table: "old -> new" per kept tensor (with dtype and transpose
 * changes), then the dropped names with the rule that dropped them. */
void tpc_remap_table(const tpc_ckpt *ck, const tpc_remap *m, const tpc_rules *r, tpc_buf *out);

/* ---- expected keys (load_state_dict(strict=True)) ---- */

typedef struct tpc_keys {
	char **v;
	size_t n, cap;
} tpc_keys;

void tpc_keys_release(tpc_keys *k);
/* Parse a key list: a JSON list of strings, else one key per line (blank
 * lines and surrounding spaces ignored, "\r\n" accepted). */
int tpc_keys_from_buffer(tpc_keys *k, const char *text, size_t len, const char *label,
			 tpc_err *e);
/* Load a key list from any checkpoint tpc_ckpt_open can read (its tensor
 * names), else from a text or JSON key file. */
int tpc_keys_load(tpc_keys *k, const char *path, tpc_err *e);

/*
 * Compare names have[0..nhave) (NULL entries skipped) with the expected keys.
 * Returns 0 when they are the same set; else TPC_EMISMATCH with
 * "N missing and M unexpected keys" in e, and the two lists appended to
 * `report` (if not NULL) as "missing (N):\n  key\n...unexpected (M):\n  key\n".
 */
int tpc_keys_check(char *const *have, size_t nhave, const tpc_keys *want, tpc_buf *report,
		   tpc_err *e);

#endif
