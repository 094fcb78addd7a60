/* tpc_util.c - numbers, allocation and SHA-256; see tpc_util.h. */
#include "tpc_util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int tpc_parse_u64(const char *s, uint64_t max, uint64_t *out, tpc_err *e)
{
	char *end = NULL;
	if (!s || !*s || *s < '0' || *s > '9')
		return tpc_err_set(e, TPC_EUSAGE, "'%s' is not a non-negative integer", s ? s : "");
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno == ERANGE || *end || v > max)
		return tpc_err_set(e, TPC_EUSAGE, "'%s' is not an integer between 0 and %llu", s,
				   (unsigned long long)max);
	*out = v;
	return 0;
}

size_t tpc_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[33];
	if (la > 32 || lb > 32)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

void tpc_did_you_mean(const char *name, const char *(*next)(size_t i, void *ctx), void *ctx, char *hint, size_t n)
{
	size_t best = 3; /* names at most 2 edits away */
	const char *c;
	if (n)
		hint[0] = '\0';
	for (size_t i = 0; (c = next(i, ctx)); i++) {
		size_t d = tpc_edit_distance(name, c);
		if (d < best) {
			best = d;
			snprintf(hint, n, "did you mean '%s'? ", c);
		}
	}
}

void tpc_appendf(char *buf, size_t n, size_t *len, const char *fmt, ...)
{
	va_list ap;
	if (*len >= n)
		return;
	va_start(ap, fmt);
	int k = vsnprintf(buf + *len, n - *len, fmt, ap);
	va_end(ap);
	if (k > 0)
		*len += (size_t)k;
}

bool tpc_ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && !memcmp(s + a - b, suf, b);
}

int tpc_parse_size(const char *s, uint64_t *out, tpc_err *e)
{
	char *end = NULL;
	uint64_t mult = 1, v;
	if (!s || !*s || *s < '0' || *s > '9')
		goto bad;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		goto bad;
	if (*end) {
		const char *u = end;
		uint64_t base = 1000;
		int pw;
		switch (*u) {
		case 'k': case 'K': pw = 1; break;
		case 'm': case 'M': pw = 2; break;
		case 'g': case 'G': pw = 3; break;
		case 't': case 'T': pw = 4; break;
		case 'b': case 'B': pw = 0; break;
		default: goto bad;
		}
		if (pw) {
			u++;
			if (*u == 'i') {
				base = 1024;
				u++;
			}
		}
		if (*u == 'B' || *u == 'b')
			u++;
		if (*u)
			goto bad;
		for (int i = 0; i < pw; i++)
			mult *= base;
	}
	if (tpc_mul_u64(v, mult, out))
		goto bad;
	return 0;
bad:
	return tpc_err_set(e, TPC_EUSAGE,
			   "'%s' is not a size (digits with an optional K, M, G, T, Ki, Mi, Gi or Ti suffix)",
			   s ? s : "");
}

const char *tpc_fmt_size(uint64_t v, char *buf, size_t n)
{
	static const char *u[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
	double d = (double)v;
	int i = 0;
	while (d >= 1000.0 && i < 6) {
		d /= 1000.0;
		i++;
	}
	if (i == 0)
		snprintf(buf, n, "%llu B", (unsigned long long)v);
	else
		snprintf(buf, n, d < 10 ? "%.2f %s" : d < 100 ? "%.1f %s" : "%.0f %s", d, u[i]);
	return buf;
}

double tpc_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void *tpc_malloc(size_t n)
{
	return malloc(n ? n : 1);
}
void *tpc_calloc(size_t count, size_t size)
{
	return calloc(count ? count : 1, size ? size : 1);
}
void *tpc_realloc(void *p, size_t n)
{
	return realloc(p, n ? n : 1);
}
void tpc_free_strv(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

char *tpc_strdup(const char *s)
{
	return s ? tpc_strndup(s, strlen(s)) : NULL;
}
char *tpc_strndup(const char *s, size_t n)
{
	char *r = malloc(n + 1);
	if (!r)
		return NULL;
	memcpy(r, s, n);
	r[n] = '\0';
	return r;
}

int tpc_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap : 8;
	while (nc < need) {
		if (nc > SIZE_MAX / 2)
			return -1;
		nc *= 2;
	}
	size_t bytes;
	if (__builtin_mul_overflow(nc, elem, &bytes))
		return -1;
	void *q = realloc(*p, bytes ? bytes : 1);
	if (!q)
		return -1;
	*p = q;
	*cap = nc;
	return 0;
}

void tpc_hex(const uint8_t *in, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[in[i] >> 4];
		out[2 * i + 1] = d[in[i] & 15];
	}
	out[2 * n] = '\0';
}

