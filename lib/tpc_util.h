/*
 * tpc_util.h - small helpers every parser and writer uses.
 *
 * Checked size arithmetic: every size or offset derived from file contents
 * goes through tpc_add_u64 / tpc_mul_u64 (git's st_add/st_mult, libzip's
 * zip_buffer). They return nonzero on overflow and leave *r undefined.
 *
 * The bounded cursor reads untrusted bytes: every read checks the bytes left;
 * the first failed read clears `ok` and every later read returns zero, so a
 * parser can read a whole record and test `ok` once (libzip zip_buffer.c).
 * Integers are assembled from bytes, so host byte order and alignment do not
 * matter.
 */
#ifndef TPC_UTIL_H
#define TPC_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_err.h"

/* splitmix64's finaliser: a 64-bit hash of x (the hash maps' mixer). */
static inline uint64_t tpc_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static inline int tpc_add_u64(uint64_t a, uint64_t b, uint64_t *r)
{
	return __builtin_add_overflow(a, b, r);
}
static inline int tpc_mul_u64(uint64_t a, uint64_t b, uint64_t *r)
{
	return __builtin_mul_overflow(a, b, r);
}
static inline int tpc_mul_i64(int64_t a, int64_t b, int64_t *r)
{
	return __builtin_mul_overflow(a, b, r);
}
static inline int tpc_add_i64(int64_t a, int64_t b, int64_t *r)
{
	return __builtin_add_overflow(a, b, r);
}

typedef struct tpc_cursor {
	const uint8_t *p; /* start of the buffer */
	uint64_t n;       /* its size */
	uint64_t pos;     /* next byte to read */
	bool ok;          /* false after the first read past the end */
} tpc_cursor;

static inline void tpc_cursor_init(tpc_cursor *c, const void *p, uint64_t n)
{
	c->p = (const uint8_t *)p;
	c->n = n;
	c->pos = 0;
	c->ok = true;
}
static inline uint64_t tpc_cursor_left(const tpc_cursor *c)
{
	return c->ok ? c->n - c->pos : 0;
}
/* Returns a pointer to the next `len` bytes and advances, or NULL (and ok=false). */
static inline const uint8_t *tpc_cursor_take(tpc_cursor *c, uint64_t len)
{
	if (!c->ok || len > c->n - c->pos) {
		c->ok = false;
		return NULL;
	}
	const uint8_t *r = c->p + c->pos;
	c->pos += len;
	return r;
}
static inline uint8_t tpc_cursor_u8(tpc_cursor *c)
{
	const uint8_t *b = tpc_cursor_take(c, 1);
	return b ? b[0] : 0;
}
static inline uint16_t tpc_rd16le(const uint8_t *b)
{
	return (uint16_t)(b[0] | (uint16_t)b[1] << 8);
}
static inline uint32_t tpc_rd32le(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}
static inline uint64_t tpc_rd64le(const uint8_t *b)
{
	return (uint64_t)tpc_rd32le(b) | (uint64_t)tpc_rd32le(b + 4) << 32;
}
static inline void tpc_wr16le(uint8_t *b, uint16_t v)
{
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
}
static inline void tpc_wr32le(uint8_t *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}
static inline void tpc_wr64le(uint8_t *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t tpc_cursor_u16le(tpc_cursor *c)
{
	const uint8_t *b = tpc_cursor_take(c, 2);
	return b ? tpc_rd16le(b) : 0;
}
static inline uint32_t tpc_cursor_u32le(tpc_cursor *c)
{
	const uint8_t *b = tpc_cursor_take(c, 4);
	return b ? tpc_rd32le(b) : 0;
}
static inline uint64_t tpc_cursor_u64le(tpc_cursor *c)
{
	const uint8_t *b = tpc_cursor_take(c, 8);
	return b ? tpc_rd64le(b) : 0;
}

/* Levenshtein distance of two names of at most 32 bytes (SIZE_MAX past). */
size_t tpc_edit_distance(const char *a, const char *b);
/* "did you mean 'X'? " for the candidate nearest to `name`, at most two edits
 * away (the first of equals), else "", into hint[n]. next(i, ctx) yields the
 * candidates for i = 0, 1, ... until it returns NULL. */
void tpc_did_you_mean(const char *name, const char *(*next)(size_t i, void *ctx), void *ctx, char *hint, size_t n);

/* Whether s ends with suf (both NUL-terminated). */
bool tpc_ends_with(const char *s, const char *suf);

/* Append printf output at buf[*len] (of n bytes), truncating; *len grows by
 * what was written and stops growing once the buffer is full. */
void tpc_appendf(char *buf, size_t n, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/*
 * Parse a byte size: decimal digits with an optional suffix K M G T (powers of
 * 1000, as Hugging Face's "5GB") or Ki Mi Gi Ti (powers of 1024), an optional
 * trailing 'B' ("5GB", "4GiB"), no sign, no spaces. Returns 0 or TPC_EUSAGE
 * with a message quoting the token.
 */
int tpc_parse_size(const char *s, uint64_t *out, tpc_err *e);

/* Parse a non-negative decimal integer that fits in `max`; strict, as above. */
int tpc_parse_u64(const char *s, uint64_t max, uint64_t *out, tpc_err *e);

/* Human-readable size into buf: "4.74 GB" (powers of 1000, 3 significant digits). */
const char *tpc_fmt_size(uint64_t v, char *buf, size_t n);

/* Monotonic clock in seconds. */
double tpc_now(void);

/* malloc/calloc/realloc that never return NULL for a zero size. They return
 * NULL on failure (the caller reports tpc_err_nomem). */
void *tpc_malloc(size_t n);
void *tpc_calloc(size_t count, size_t size);
void *tpc_realloc(void *p, size_t n);
char *tpc_strdup(const char *s);
/* Free v[0..n) and then v (NULL: nothing). */
void tpc_free_strv(char **v, size_t n);
char *tpc_strndup(const char *s, size_t n);

/* Grow *p (an array of elem-sized items with capacity *cap) to hold at least
 * `need` items. Returns 0 or -1 on overflow / out of memory. */
int tpc_grow(void **p, size_t *cap, size_t need, size_t elem);

/* Lowercase hex of n bytes into out (2n+1 bytes, NUL-terminated). Checksums
 * are in tpc_hash.h. */
void tpc_hex(const uint8_t *in, size_t n, char *out /* 2n+1 */);

#endif
