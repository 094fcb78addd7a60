/* pickle_test.h - what the pickle tests share (pickle_test.c): pickles
 * written by CPython 3.11 and torch 1.13, the loaders that assert their
 * result, the tree writer and the seed of the random tests. */
#ifndef TPC_PICKLE_TEST_H
#define TPC_PICKLE_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "torch/pickle.h"
#include "tpc_hash.h"
#include "tpc_util.h"

#define LEN(a) (sizeof(a) / sizeof((a)[0]))
#define MARKER "/tmp/tpconv_pickle_pwned"

/* The fixtures (pickle_test.c says how they were made); the sizes are checked
 * by the definitions there. */
extern const uint8_t PK_SIMPLE_P2[180];
extern const uint8_t PK_MIXED_P4[263];
extern const uint8_t PK_MIXED_P5[241];
extern const uint8_t PK_INTS_P2[83];
extern const uint8_t PK_FLOATS_P2[62];
extern const uint8_t PK_NAMESPACE_P2[59];
extern const uint8_t PK_SUBCLASS_P2[67];
extern const uint8_t PK_STATE_DICT[290];
extern const uint8_t PK_OS_SYSTEM_P2[62];
extern const uint8_t PK_EVAL_P2[93];
extern const uint8_t PK_POPEN_P4[78];
extern const uint8_t PK_CYCLE_P2[13];

/* Loading: load_opts returns NULL on an error (in e), load_ok fails the
 * test on one; expect_bad* fail it unless the pickle is refused as bad input
 * with a message holding msg at offset (-1: any). permissive() allows every
 * global, persistent ids becoming STORAGE nodes (storage_persid). */
tpc_value *load_opts(const void *p, size_t n, const tpc_pickle_opts *o, tpc_err *e);
tpc_value *load_ok(const void *p, size_t n, const tpc_pickle_opts *o);
void expect_bad_opts(const void *p, size_t n, const tpc_pickle_opts *o, const char *msg, int64_t offset);
void expect_bad(const char *p, size_t n, const char *msg, int64_t offset);
tpc_value *ok_lit(const char *p, size_t n);
int storage_persid(void *ctx, tpc_value *pid, tpc_value **out, tpc_err *e);
tpc_pickle_opts permissive(void);

/* Writing: a tree as PROTO 2 .. STOP into b (the caller releases it); read
 * -> write must give p's bytes back */
void write_tree(const tpc_value *v, tpc_buf *b, bool share);
void assert_rewrites_identically(const uint8_t *p, size_t n);

/* A str of s; a 2-tuple owning a and b; the SHA-256 of p in hex */
tpc_value *S(const char *s);
tpc_value *tuple2(tpc_value *a, tpc_value *b);
void sha_hex(const void *p, size_t n, char out[65]);

/* srand() from the time or TPC_TEST_SEED, the seed printed under name */
unsigned test_seed(const char *name);

/* A pickle written as a C string literal (the terminating NUL excluded):
 * BAD must be refused as bad input with a message holding msg at offset off
 * (-1: any), OK loaded. */
#define BAD(lit, msg, off) expect_bad(lit, sizeof(lit) - 1, msg, off)
#define OK(lit) ok_lit(lit, sizeof(lit) - 1)

#endif
