/*
 * tpc_hash.h - the tensor checksums: one streaming interface over the
 * algorithms a manifest may name.
 *
 *   "xxh3-128"  XXH3 128-bit (libxxhash). Not cryptographic, but tens of GB/s
 *               per core: it catches corruption, truncation and mixed-up rank
 *               files at a cost that vanishes next to the copy. The default
 *               of `shard` since manifests name their algorithm.
 *               Digest: the canonical (big-endian) 16 bytes, the same bytes
 *               `xxh128sum` prints.
 *   "sha256"    SHA-256 (FIPS 180-4) from OpenSSL's libcrypto. What manifests
 *               written before the "checksum" name existed hold, and what a
 *               user asks for with `--checksum sha256` when a checksum must
 *               also resist deliberate tampering. `inspect --hash` prints it.
 *   "none"      no checksum.
 *
 * Usage:
 *
 *     tpc_hash h;
 *     if ((ret = tpc_hash_begin(&h, TPC_HASH_XXH3_128, e)))
 *             goto out;
 *     tpc_hash_update(&h, p, n);          any number of times
 *     tpc_hash_final(&h, digest);         digest holds tpc_hash_len(alg) bytes
 *
 * tpc_hash_begin allocates (the OpenSSL and libxxhash states live on the
 * heap), hence "begin" rather than "init"; tpc_hash_final and
 * tpc_hash_release free it, and either may be called on a tpc_hash that
 * tpc_hash_begin failed on or that was zeroed. A tpc_hash is not shared
 * between threads; separate ones run in parallel.
 */
#ifndef TPC_HASH_H
#define TPC_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_err.h"

typedef enum tpc_hash_alg {
	TPC_HASH_NONE = 0,
	TPC_HASH_XXH3_128 = 1,
	TPC_HASH_SHA256 = 2,
} tpc_hash_alg;

/* The largest digest, in bytes (SHA-256's). */
#define TPC_HASH_MAX 32
/* The default checksum of new shard sets. */
#define TPC_HASH_DEFAULT TPC_HASH_XXH3_128

typedef struct tpc_hash {
	tpc_hash_alg alg;
	void *state; /* XXH3_state_t * or EVP_MD_CTX * */
} tpc_hash;

/* Start a hash of alg (not TPC_HASH_NONE). Fails only when out of memory or
 * when libcrypto refuses SHA-256 (a FIPS configuration gone wrong). */
int tpc_hash_begin(tpc_hash *h, tpc_hash_alg alg, tpc_err *e);
void tpc_hash_update(tpc_hash *h, const void *data, size_t n);
/* Write the digest (tpc_hash_len(h->alg) bytes) and free the state. */
void tpc_hash_final(tpc_hash *h, uint8_t out[TPC_HASH_MAX]);
/* Free the state without a digest (an abandoned hash). */
void tpc_hash_release(tpc_hash *h);

/* One buffer's digest. */
int tpc_hash_buf(tpc_hash_alg alg, const void *data, size_t n, uint8_t out[TPC_HASH_MAX], tpc_err *e);

/* Digest length in bytes: 16, 32, or 0 for TPC_HASH_NONE. */
size_t tpc_hash_len(tpc_hash_alg alg);
/* "xxh3-128", "sha256", "none"; NULL for a value outside the enum. */
const char *tpc_hash_name(tpc_hash_alg alg);
/* The algorithm of a name above (exact, lowercase); false when unknown. */
bool tpc_hash_from_name(const char *name, tpc_hash_alg *out);

/* The reverse of tpc_hex (tpc_util.h): exactly 2n lowercase hex digits into
 * n bytes; -1 for anything else (NULL, another length, another character). */
int tpc_unhex(const char *s, uint8_t *out, size_t n);

#endif
