/*
 * tpc_family_tp.h - how tensor parallelism splits one Hugging Face tensor of
 * a family's models, read from the family record's plan (tpc_family.h's
 * `plan`: the rules in shard/tpc_plan.h's schema) without the model facts:
 * which dim is split, whether the tensor is a vocabulary, whether it fuses
 * parts that are split each on its own.
 *
 * For writers that record a split rather than perform it (a DeepSpeed
 * universal checkpoint's cat_dim, vocab_tensor and param_n_sub_params:
 * formats/ds_universal_write.c), which must not depend on shard/. The rules
 * are read as shard/tpc_plan.c reads them: searched in order, the first whose
 * "match" expression (lib/tpc_regex.h) is found in the name decides; the
 * split dim is tpc_plan_rule_dim's (col: dim 0, or dim 1 when "transposed";
 * row: dim 1, or 0; a 1-D tensor under "row" is replicated, the bias added
 * once after the all-reduce; "stacked": the rule's dim + 1; "dim" given:
 * that dim). tests/shard/test_family_tp.c holds every preset's answer to the
 * planner's.
 */
#ifndef TPC_FAMILY_TP_H
#define TPC_FAMILY_TP_H

#include <stdbool.h>
#include <stdint.h>

#include "tpc_err.h"
#include "tpc_family.h"

typedef enum tpc_tp_kind {
	TPC_TP_UNKNOWN = 0, /* no rule of the plan matches: its fallback ("replicate"
			     * or "error") decides, which is a guess, not a rule */
	TPC_TP_REPLICATE,   /* whole on every rank: a rule says so, a row split's 1-D
			     * bias, or a 0-D tensor */
	TPC_TP_SPLIT,       /* split along `dim` */
	TPC_TP_VOCAB,       /* a vocabulary split along `dim` (0), padded to tp */
} tpc_tp_kind;

#define TPC_TP_MAX_PARTS 8

/* A listed part of a fused tensor: a size, or what the model facts make of
 * sym ("q": heads x head_dim rows, "kv": kv_heads x head_dim, "rest": what
 * the others leave; others as shard/tpc_plan.h lists them) */
typedef struct tpc_tp_part {
	char sym[12];       /* "" for a size */
	int64_t size;
} tpc_tp_part;

typedef struct tpc_tp_split {
	tpc_tp_kind kind;
	int dim;            /* the split dim; -1 when not split */
	int parts;          /* a fused tensor's equal parts, each split on its own
			     * (Phi-3's gate_up_proj: 2); 0: not fused */
	bool uneven_parts;  /* parts whose sizes come from the model facts ("q",
			     * "kv", "rest": a fused qkv_proj) or the config ("gated":
			     * 2 parts or 1): not equal slices of the tensor */
	int nlisted;        /* uneven_parts from a list: its parts (else 0) */
	tpc_tp_part part[TPC_TP_MAX_PARTS];
	bool heads;         /* the split falls on attention-head boundaries */
	bool stacked;       /* dim 0 stacks routed experts, each split alike */
	int rule;           /* the deciding rule's index in the plan; -1: none */
	const char *match;  /* its "match" expression (the tp object's); NULL: none */
} tpc_tp_split;

typedef struct tpc_family_tp tpc_family_tp;

/* The rules of family f's plan, compiled. TPC_EINPUT for a record without a
 * plan or with one these rules cannot read (a record bug the family tests
 * catch). */
int tpc_family_tp_open(tpc_family_tp **out, const tpc_family *f, tpc_err *e);
void tpc_family_tp_free(tpc_family_tp *tp);
/* The family it was opened for. */
const tpc_family *tpc_family_tp_family(const tpc_family_tp *tp);
/* The split of the Hugging Face tensor `name` of ndim dimensions into *out;
 * 0, or TPC_EINPUT naming the tensor when the deciding rule's "dim" is out of
 * its range (never a guess). */
int tpc_family_tp_split(const tpc_family_tp *tp, const char *name, int ndim, tpc_tp_split *out, tpc_err *e);

#endif
