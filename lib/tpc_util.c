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

/* ---- SHA-256 (FIPS 180-4) ---- */
static const uint32_t K256[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const uint8_t *b)
{
	uint32_t w[64], a, bb, c, d, e, f, g, hh;
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
		       (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = h[0]; bb = h[1]; c = h[2]; d = h[3]; e = h[4]; f = h[5]; g = h[6]; hh = h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t S1 = ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25);
		uint32_t ch = (e & f) ^ (~e & g);
		uint32_t t1 = hh + S1 + ch + K256[i] + w[i];
		uint32_t S0 = ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22);
		uint32_t mj = (a & bb) ^ (a & c) ^ (bb & c);
		uint32_t t2 = S0 + mj;
		hh = g; g = f; f = e; e = d + t1; d = c; c = bb; bb = a; a = t1 + t2;
	}
	h[0] += a; h[1] += bb; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

/* SHA-NI (x86 SHA extensions): about 5-10x the portable code on CPUs that
 * have it. Chosen once at run time from CPUID; TPCONV_NO_SHA_NI=1 forces the
 * portable code (tests compare the two). Same results bit for bit. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

__attribute__((target("sha,sse4.1,ssse3"))) static void sha256_blocks_ni(uint32_t h[8], const uint8_t *p, size_t n)
{
	const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
	__m128i tmp = _mm_loadu_si128((const __m128i *)&h[0]);
	__m128i st1 = _mm_loadu_si128((const __m128i *)&h[4]);
	tmp = _mm_shuffle_epi32(tmp, 0xB1);         /* CDAB */
	st1 = _mm_shuffle_epi32(st1, 0x1B);         /* EFGH */
	__m128i st0 = _mm_alignr_epi8(tmp, st1, 8); /* ABEF */
	st1 = _mm_blend_epi16(st1, tmp, 0xF0);      /* CDGH */
	for (; n; n--, p += 64) {
		__m128i save0 = st0, save1 = st1, w[4], msg;
#pragma GCC unroll 16
		for (int i = 0; i < 16; i++) {
			if (i < 4)
				w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), mask);
			msg = _mm_add_epi32(w[i & 3], _mm_loadu_si128((const __m128i *)&K256[4 * i]));
			st1 = _mm_sha256rnds2_epu32(st1, st0, msg);
			if (i >= 3 && i <= 14) {
				/* finish the next group's schedule words */
				__m128i t = _mm_alignr_epi8(w[i & 3], w[(i - 1) & 3], 4);
				w[(i + 1) & 3] = _mm_sha256msg2_epu32(_mm_add_epi32(w[(i + 1) & 3], t), w[i & 3]);
			}
			msg = _mm_shuffle_epi32(msg, 0x0E);
			st0 = _mm_sha256rnds2_epu32(st0, st1, msg);
			if (i >= 1 && i <= 12)
				w[(i - 1) & 3] = _mm_sha256msg1_epu32(w[(i - 1) & 3], w[i & 3]);
		}
		st0 = _mm_add_epi32(st0, save0);
		st1 = _mm_add_epi32(st1, save1);
	}
	tmp = _mm_shuffle_epi32(st0, 0x1B);    /* FEBA */
	st1 = _mm_shuffle_epi32(st1, 0xB1);    /* DCHG */
	st0 = _mm_blend_epi16(tmp, st1, 0xF0); /* DCBA */
	st1 = _mm_alignr_epi8(st1, tmp, 8);    /* ABEF */
	_mm_storeu_si128((__m128i *)&h[0], st0);
	_mm_storeu_si128((__m128i *)&h[4], st1);
}

static int sha_ni_available(void)
{
	unsigned a, b, c, d;
	const char *off = getenv("TPCONV_NO_SHA_NI");
	if (off && *off && strcmp(off, "0"))
		return 0;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3))
		return 0;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return 0;
	return (b >> 29) & 1; /* CPUID.(EAX=7,ECX=0):EBX.SHA[bit 29] */
}
#endif

static void sha256_blocks(uint32_t h[8], const uint8_t *p, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
	static int mode = -1; /* -1 unknown, 0 portable, 1 SHA-NI; set once, same value from any thread */
	int m = __atomic_load_n(&mode, __ATOMIC_RELAXED);
	if (m < 0) {
		m = sha_ni_available();
		__atomic_store_n(&mode, m, __ATOMIC_RELAXED);
	}
	if (m == 1) {
		sha256_blocks_ni(h, p, n);
		return;
	}
#endif
	for (; n; n--, p += 64)
		sha256_block(h, p);
}

void tpc_sha256_init(tpc_sha256 *s)
{
	static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
				       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	memcpy(s->h, iv, sizeof(iv));
	s->len = 0;
	s->nbuf = 0;
}

void tpc_sha256_update(tpc_sha256 *s, const void *data, size_t n)
{
	const uint8_t *p = data;
	s->len += n;
	if (s->nbuf) {
		size_t k = 64 - s->nbuf < n ? 64 - s->nbuf : n;
		memcpy(s->buf + s->nbuf, p, k);
		s->nbuf += k;
		p += k;
		n -= k;
		if (s->nbuf == 64) {
			sha256_blocks(s->h, s->buf, 1);
			s->nbuf = 0;
		}
	}
	if (n >= 64) {
		sha256_blocks(s->h, p, n / 64);
		p += n / 64 * 64;
		n %= 64;
	}
	if (n) {
		memcpy(s->buf, p, n);
		s->nbuf = n;
	}
}

void tpc_sha256_final(tpc_sha256 *s, uint8_t out[32])
{
	uint64_t bits = s->len * 8;
	uint8_t pad = 0x80, zero = 0, l[8];
	tpc_sha256_update(s, &pad, 1);
	while (s->nbuf != 56)
		tpc_sha256_update(s, &zero, 1);
	for (int i = 0; i < 8; i++)
		l[i] = (uint8_t)(bits >> (56 - 8 * i));
	tpc_sha256_update(s, l, 8);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(s->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)s->h[i];
	}
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
