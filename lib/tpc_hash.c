/* tpc_hash.c - checksums over libxxhash and libcrypto; see tpc_hash.h. */
#include "tpc_hash.h"

#include <openssl/evp.h>
#include <string.h>
#include <xxhash.h>

#include "tpc_config.h"

/* The XXH3 update the CPU runs fastest: libxxhash's x86 dispatcher (AVX2 or
 * AVX-512 where the CPU has them; the plain export is the SSE2 build, a
 * quarter of the speed, and hashing was the largest cost of a shard's
 * checksum pass after the reads). The digests are the same. */
#if TPC_HAVE_XXH_DISPATCH
#define XXH_DISPATCH_DISABLE_REPLACE 1
#include <xxh_x86dispatch.h>
#define xxh3_update XXH3_128bits_update_dispatch
#else
#define xxh3_update XXH3_128bits_update
#endif

static const char *const names[] = {"none", "xxh3-128", "sha256"};

int tpc_hash_begin(tpc_hash *h, tpc_hash_alg alg, tpc_err *e)
{
	int ret = 0;
	h->alg = alg;
	h->state = NULL;
	switch (alg) {
	case TPC_HASH_XXH3_128:
		if (!(h->state = XXH3_createState())) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		if (XXH3_128bits_reset(h->state) != XXH_OK)
			ret = tpc_err_set(e, TPC_EIO, "cannot start an xxh3-128 hash");
		break;
	case TPC_HASH_SHA256:
		if (!(h->state = EVP_MD_CTX_new())) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		if (EVP_DigestInit_ex(h->state, EVP_sha256(), NULL) != 1)
			ret = tpc_err_set(e, TPC_EIO, "libcrypto cannot start a sha256 hash");
		break;
	default:
		ret = tpc_err_set(e, TPC_EUSAGE, "no hash algorithm %d", (int)alg);
		break;
	}
out:
	if (ret)
		tpc_hash_release(h);
	return ret;
}

void tpc_hash_update(tpc_hash *h, const void *data, size_t n)
{
	if (!h->state || !n)
		return;
	if (h->alg == TPC_HASH_XXH3_128)
		xxh3_update(h->state, data, n);
	else if (h->alg == TPC_HASH_SHA256)
		EVP_DigestUpdate(h->state, data, n);
}

void tpc_hash_final(tpc_hash *h, uint8_t out[TPC_HASH_MAX])
{
	memset(out, 0, TPC_HASH_MAX);
	if (h->state && h->alg == TPC_HASH_XXH3_128) {
		XXH128_canonical_t c;
		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h->state));
		memcpy(out, c.digest, sizeof(c.digest));
	} else if (h->state && h->alg == TPC_HASH_SHA256) {
		unsigned int len = 0;
		EVP_DigestFinal_ex(h->state, out, &len);
	}
	tpc_hash_release(h);
}

void tpc_hash_release(tpc_hash *h)
{
	if (h->state && h->alg == TPC_HASH_XXH3_128)
		XXH3_freeState(h->state);
	else if (h->state && h->alg == TPC_HASH_SHA256)
		EVP_MD_CTX_free(h->state);
	h->state = NULL;
}

int tpc_hash_buf(tpc_hash_alg alg, const void *data, size_t n, uint8_t out[TPC_HASH_MAX], tpc_err *e)
{
	tpc_hash h;
	int ret = tpc_hash_begin(&h, alg, e);
	if (!ret) {
		tpc_hash_update(&h, data, n);
		tpc_hash_final(&h, out);
	}
	return ret;
}

size_t tpc_hash_len(tpc_hash_alg alg)
{
	return alg == TPC_HASH_XXH3_128 ? 16 : alg == TPC_HASH_SHA256 ? 32 : 0;
}

const char *tpc_hash_name(tpc_hash_alg alg)
{
	return (unsigned)alg < sizeof(names) / sizeof(names[0]) ? names[alg] : NULL;
}

bool tpc_hash_from_name(const char *name, tpc_hash_alg *out)
{
	for (unsigned i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i])) {
			*out = (tpc_hash_alg)i;
			return true;
		}
	return false;
}

int tpc_unhex(const char *s, uint8_t *out, size_t n)
{
	if (!s || strlen(s) != 2 * n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int v = 0;
		for (int j = 0; j < 2; j++) {
			char c = s[2 * i + j];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (d < 0)
				return -1;
			v = v * 16 + d;
		}
		out[i] = (uint8_t)v;
	}
	return 0;
}
