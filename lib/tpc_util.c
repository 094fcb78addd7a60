/* tpc_util.c - numbers, allocation and SHA-256; see tpc_util.h. */
#include "tpc_util.h"

#include <errno.h>
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

/* ---- regular expressions ---- */

/*
 * glibc's regcomp copies the subexpression under a repetition (x+ becomes
 * x x*, x{m,n} n copies), so stacked or nested repetitions grow the compiled
 * form exponentially: "([0-9]+)" followed by 22 '+' takes 400 MB, and
 * "((a{1,100}){1,100}){1,10}" 8 GB; one interval x{1,n} grows as n^2
 * ("a{1,9999}": 790 MB). Copies of a subexpression that can match the empty
 * string are far worse: "x?++++*++++++++*" and ten nested "(...x*)+" take
 * minutes. Back-references make regexec exponential in the name's length.
 * Patterns come in plans, which shard-set manifests carry, and in rules
 * files: untrusted input. See tpc_util.h.
 *
 * The walk keeps, per open group, the atoms so far (sum), whether the
 * current branch can match empty without its last item (seq) and whether an
 * earlier branch can (alt); for the last item, its atoms and nullability.
 */
#define RE_MAX_DEPTH 64
uint64_t tpc_regex_cost(const char *p)
{
	uint64_t sum[RE_MAX_DEPTH + 1], last = 0, copies;
	bool seq[RE_MAX_DEPTH + 1], alt[RE_MAX_DEPTH + 1], last_null = true;
	int depth = 0;
	sum[0] = 0;
	seq[0] = true;
	alt[0] = false;
	for (; *p; p++) {
		bool null = false; /* the new atom's nullability */
		switch (*p) {
		case '(':
			if (++depth > RE_MAX_DEPTH)
				return UINT64_MAX;
			seq[depth - 1] = seq[depth - 1] && last_null;
			sum[depth] = 0;
			seq[depth] = true;
			alt[depth] = false;
			last = 0;
			last_null = true;
			continue;
		case ')':
			if (depth) {
				bool g = alt[depth] || (seq[depth] && last_null);
				last = sum[depth--];
				sum[depth] += last;
				last_null = g;
				goto check;
			}
			break; /* a literal ')' */
		case '|':
			alt[depth] = alt[depth] || (seq[depth] && last_null);
			seq[depth] = true;
			last = 0;
			last_null = true;
			continue;
		case '*':
		case '?':
			last_null = true; /* one loop node over x: no copy */
			continue;
		case '+':
			copies = 2;
			goto repeat;
		case '{': {
			uint64_t m = 0, n = 0;
			char *end;
			if (!strchr(p, '}'))
				break; /* not an interval: a literal '{' */
			m = strtoull(p + 1, &end, 10);
			n = m;
			if (*end == ',')
				n = end[1] == '}' ? m + 1 : strtoull(end + 1, &end, 10);
			if (n > TPC_REGEX_MAX_DUP || m > TPC_REGEX_MAX_DUP)
				return UINT64_MAX; /* the copies nest: n^2 memory */
			copies = n > m ? n : m;
			while (*p != '}')
				p++;
			if (copies > 1) {
				if (last_null)
					return UINT64_MAX; /* copies of something that can match empty */
				sum[depth] += last * (copies - 1);
				last *= copies;
			}
			if (m == 0)
				last_null = true;
			goto check;
		}
		case '^':
		case '$':
			null = true; /* anchors match the empty string */
			break;
		case '\\':
			if (p[1] >= '1' && p[1] <= '9')
				return UINT64_MAX; /* back-references make matching exponential */
			if (p[1])
				p++;
			break;
		case '[':
			/* a bracket expression is one atom: "[]a]", "[^]a]", "[[:alpha:]]" */
			p++;
			if (*p == '^')
				p++;
			if (*p == ']')
				p++;
			while (*p && *p != ']') {
				if (p[0] == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
					char c = p[1];
					for (p += 2; *p && !(p[0] == c && p[1] == ']'); p++)
						;
					if (!*p)
						return 0;
					p++;
				}
				p++;
			}
			if (!*p)
				return 0; /* unterminated: regcomp says so */
			break;
		default:
			break;
		}
		/* an atom: the item before it is final */
		seq[depth] = seq[depth] && last_null;
		last = 1;
		last_null = null;
		sum[depth] += 1;
		goto check;
	repeat:
		if (copies > 1) {
			if (last_null)
				return UINT64_MAX; /* copies of something that can match empty */
			sum[depth] += last * (copies - 1);
			last *= copies;
		}
	check:
		if (sum[depth] > TPC_REGEX_MAX_COST || last > TPC_REGEX_MAX_COST)
			return UINT64_MAX;
	}
	return sum[0];
}
