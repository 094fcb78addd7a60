/* verify_test.h - what the verify/ unit tests share: the tiny models of
 * tests/data with transformers' float64 outputs beside them, the reference
 * forward compared with those outputs, and sets built as a family record's
 * plan would split them (verify_test.c). Each test_verify*.c includes it. */
#ifndef TPC_VERIFY_TEST_H
#define TPC_VERIFY_TEST_H

#include "test_util.h"

#include "formats.h"
#include "tpc_format.h"
#include "tpc_verify.h"
#include "vint.h"

/* tests/data/FILE as *ck, its transformers outputs OUT as *ex, an empty
 * tp-1 set s. */
void tiny_open(const char *file, const char *out, tpc_ckpt *ck, tpc_ckpt *ex, tpc_verify_set *s, tpc_err *e);

/* The reference forward of set s on the T = 10 ids in ex's "ids" against
 * ex's outputs `key` [T, W] from transformers: max |tpconv - transformers|
 * / rms of theirs (printed with `what`). vs_transformers asserts it is
 * within 1e-5. */
double vs_worst(const tpc_verify_set *s, tpc_ckpt *ex, const char *key, int64_t W, const char *what);
void vs_transformers(const tpc_verify_set *s, tpc_ckpt *ex, const char *key, int64_t W, const char *what);

/* Families added as records alone (lib/tpc_family.c): tests/data/tiny_FAM
 * .safetensors as transformers 5.12 saves them, their config.json (tiny_FAM
 * .json) and transformers' float64 logits (tests/data/make_tiny_records.py).
 * Every tensor whole (tp 1), split as the record's plan would (the router
 * replicated), the facts read from the config.json; verify's fp64 reference
 * forward, composed from the record's layer parts, gives transformers'
 * logits within 1e-5 of their rms (vs_transformers). */

/* Every tensor of ck into s whole (tp 1), split as the record's plan would
 * (the router replicated; a fused [gate | up] col in 2 parts; an expert's
 * view of a matrix stored [in, out] transposed; stacked experts left to
 * their views) */
void add_as_plan(const tpc_family *fam, tpc_ckpt *ck, tpc_verify_set *s);

/* The set of tests/data/tiny_FILE (every tensor whole, split as the plan
 * would at tp 1), its facts from tiny_FILE.json and the model of record fam
 * built; ck and ex (transformers' logits, tiny_records_out.safetensors) stay
 * open for the caller. record_set_of: the weights of tiny_FILE, the
 * config.json tiny_CFG.json and transformers' logits in OUT. */
void record_set(const tpc_family *fam, const char *file, tpc_ckpt *ck, tpc_ckpt *ex, tpc_verify_set *s,
		tpc_model_facts *f);
void record_set_of(const tpc_family *fam, const char *file, const char *cfg, const char *out, tpc_ckpt *ck,
		   tpc_ckpt *ex, tpc_verify_set *s, tpc_model_facts *f);

/* record_set's model against transformers' logits `file` (vs_transformers)
 * for the record named fam; record_case_of with the record given, and s,
 * when not NULL, gets the model built (its release the caller's) */
void record_case(const char *fam, const char *file);
void record_case_of(const tpc_family *fam, const char *file, tpc_model_facts *f, tpc_verify_set *s);

#endif
