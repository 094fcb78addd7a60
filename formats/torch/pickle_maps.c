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


static struct tpc__u64ent *u64_slot(const tpc__u64map *m, uint64_t k)
{
	size_t mask = m->cap - 1;
	for (size_t i = (size_t)tpc_mix64(k) & mask;; i = (i + 1) & mask)
		if (!m->e[i].used || m->e[i].k == k)
			return &m->e[i];
}

int tpc__u64map_put(tpc__u64map *m, uint64_t k, uint64_t v)
{
	if ((m->n + 1) * 2 > m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 16;
		if (nc <= m->cap || nc > SIZE_MAX / sizeof(struct tpc__u64ent))
			return -1;
		tpc__u64map big = {calloc(nc, sizeof(struct tpc__u64ent)), nc, m->n};
		if (!big.e)
			return -1;
		for (size_t i = 0; i < m->cap; i++)
			if (m->e[i].used)
				*u64_slot(&big, m->e[i].k) = m->e[i];
		free(m->e);
		*m = big;
	}
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
	if ((m->n + 1) * 2 > m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 16;
		if (nc <= m->cap || nc > SIZE_MAX / sizeof(struct tpc__strent))
			return -1;
		tpc__strmap big = {calloc(nc, sizeof(struct tpc__strent)), nc, m->n};
		if (!big.e)
			return -1;
		for (size_t i = 0; i < m->cap; i++)
			if (m->e[i].k)
				*str_slot(&big, m->e[i].k, m->e[i].n, m->e[i].h) = m->e[i];
		free(m->e);
		*m = big;
	}
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
