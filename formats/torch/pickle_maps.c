/*
 * pickle_maps.c - the small open-addressing hash maps the pickle reader (memo,
 * shared nodes) and writer (storage and string de-duplication) use; private to
 * formats/, declared in pickle.h.
 */
#include "pickle.h"

#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"

/* ---- small hash maps (private, shared with pickle_write.c) ---- */

/* Double a table of *cap entries of esz bytes (16 when empty): each entry in
 * use (hash returns true and its hash) moved to the first free slot from its
 * hash, linear probing as the lookups do. 0, or -1 out of memory. */
static int grow(void **tab, size_t *cap, size_t esz, bool (*hash)(const void *ent, uint64_t *h))
{
	size_t nc = *cap ? *cap * 2 : 16, mask = nc - 1;
	if (nc <= *cap || nc > SIZE_MAX / esz)
		return -1;
	char *big = calloc(nc, esz), *old = *tab;
	if (!big)
		return -1;
	for (size_t i = 0; i < *cap; i++) {
		uint64_t h;
		if (!hash(old + i * esz, &h))
			continue;
		size_t j = (size_t)h & mask;
		while (hash(big + j * esz, &(uint64_t){0}))
			j = (j + 1) & mask;
		memcpy(big + j * esz, old + i * esz, esz);
	}
	free(old);
	*tab = big;
	*cap = nc;
	return 0;
}

static bool u64_hash(const void *ent, uint64_t *h)
{
	const struct tpc__u64ent *x = ent;
	*h = tpc_mix64(x->k);
	return x->used;
}


static struct tpc__u64ent *u64_slot(const tpc__u64map *m, uint64_t k)
{
	size_t mask = m->cap - 1;
	for (size_t i = (size_t)tpc_mix64(k) & mask;; i = (i + 1) & mask)
		if (!m->e[i].used || m->e[i].k == k)
			return &m->e[i];
}

int tpc__u64map_put(tpc__u64map *m, uint64_t k, uint64_t v)
{
	if ((m->n + 1) * 2 > m->cap && grow((void **)&m->e, &m->cap, sizeof(*m->e), u64_hash))
		return -1;
	struct tpc__u64ent *s = u64_slot(m, k);
	if (!s->used) {
		s->used = true;
		s->k = k;
		m->n++;
	}
	s->v = v;
	return 0;
}

uint64_t *tpc__u64map_get(const tpc__u64map *m, uint64_t k)
{
	if (!m->cap)
		return NULL;
	struct tpc__u64ent *s = u64_slot(m, k);
	return s->used ? &s->v : NULL;
}

void tpc__u64map_release(tpc__u64map *m)
{
	free(m->e);
	m->e = NULL;
	m->cap = m->n = 0;
}

struct tpc__strent {
	char *k;
	size_t n;
	uint64_t h, v;
};

static uint64_t str_hash(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return tpc_mix64(h);
}

static bool str_ent_hash(const void *ent, uint64_t *h)
{
	const struct tpc__strent *x = ent;
	*h = x->h;
	return x->k != NULL;
}

static struct tpc__strent *str_slot(const tpc__strmap *m, const char *k, size_t n, uint64_t h)
{
	size_t mask = m->cap - 1;
	for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
		struct tpc__strent *s = &m->e[i];
		if (!s->k || (s->h == h && s->n == n && memcmp(s->k, k, n) == 0))
			return s;
	}
}

int tpc__strmap_put(tpc__strmap *m, const char *k, size_t n, uint64_t v)
{
	uint64_t h = str_hash(k, n);
	if ((m->n + 1) * 2 > m->cap && grow((void **)&m->e, &m->cap, sizeof(*m->e), str_ent_hash))
		return -1;
	struct tpc__strent *s = str_slot(m, k, n, h);
	if (!s->k) {
		char *copy = tpc_strndup(k, n);
		if (!copy)
			return -1;
		s->k = copy;
		s->n = n;
		s->h = h;
		m->n++;
	}
	s->v = v;
	return 0;
}

uint64_t *tpc__strmap_get(const tpc__strmap *m, const char *k, size_t n)
{
	if (!m->cap)
		return NULL;
	struct tpc__strent *s = str_slot(m, k, n, str_hash(k, n));
	return s->k ? &s->v : NULL;
}

void tpc__strmap_release(tpc__strmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->e[i].k);
	free(m->e);
	m->e = NULL;
	m->cap = m->n = 0;
}
