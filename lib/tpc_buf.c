/* tpc_buf.c - growable buffer and JSON string output; see tpc_buf.h. */
#include "tpc_buf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tpc_buf_init(tpc_buf *b)
{
	b->p = NULL;
	b->len = b->cap = 0;
	b->oom = false;
}

void tpc_buf_release(tpc_buf *b)
{
	free(b->p);
	tpc_buf_init(b);
}

void tpc_buf_reset(tpc_buf *b)
{
	b->len = 0;
	if (b->p)
		b->p[0] = '\0';
}

static bool reserve(tpc_buf *b, size_t extra)
{
	size_t need;
	if (b->oom)
		return false;
	if (__builtin_add_overflow(b->len, extra, &need) || need == SIZE_MAX) {
		b->oom = true;
		return false;
	}
	need += 1;
	if (need <= b->cap)
		return true;
	size_t nc = b->cap ? b->cap : 64;
	while (nc < need) {
		if (nc > SIZE_MAX / 2) {
			nc = need;
			break;
		}
		nc *= 2;
	}
	char *q = realloc(b->p, nc);
	if (!q) {
		b->oom = true;
		return false;
	}
	b->p = q;
	b->cap = nc;
	return true;
}

void tpc_buf_add(tpc_buf *b, const void *p, size_t n)
{
	if (!reserve(b, n))
		return;
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void tpc_buf_adds(tpc_buf *b, const char *s)
{
	tpc_buf_add(b, s, strlen(s));
}

void tpc_buf_addc(tpc_buf *b, char c)
{
	tpc_buf_add(b, &c, 1);
}

void tpc_buf_addn(tpc_buf *b, char c, size_t n)
{
	if (!reserve(b, n))
		return;
	memset(b->p + b->len, c, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void tpc_buf_json_num(tpc_buf *b, double v, int digits)
{
	if (isnan(v))
		tpc_buf_adds(b, "null");
	else if (isinf(v))
		tpc_buf_adds(b, v > 0 ? "1e999" : "-1e999");
	else
		tpc_buf_addf(b, "%.*g", digits, v);
}

void tpc_buf_addf(tpc_buf *b, const char *fmt, ...)
{
	va_list ap;
	char tmp[256];
	va_start(ap, fmt);
	int k = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (k < 0) {
		b->oom = true;
		return;
	}
	if ((size_t)k < sizeof(tmp)) {
		tpc_buf_add(b, tmp, (size_t)k);
		return;
	}
	if (!reserve(b, (size_t)k))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)k + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)k;
}

char *tpc_buf_detach(tpc_buf *b, size_t *len)
{
	char *r;
	if (b->oom) {
		tpc_buf_release(b);
		return NULL;
	}
	if (!b->p && !reserve(b, 0))
		return NULL;
	if (!b->p) {
		return NULL;
	}
	b->p[b->len] = '\0';
	r = b->p;
	if (len)
		*len = b->len;
	tpc_buf_init(b);
	return r;
}

/* Decode one UTF-8 sequence; returns its length, or 0 if invalid. */
static size_t utf8_dec(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t k;
	uint32_t v, min;
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if ((c & 0xe0) == 0xc0) {
		k = 2; v = c & 0x1f; min = 0x80;
	} else if ((c & 0xf0) == 0xe0) {
		k = 3; v = c & 0x0f; min = 0x800;
	} else if ((c & 0xf8) == 0xf0) {
		k = 4; v = c & 0x07; min = 0x10000;
	} else {
		return 0;
	}
	if (k > n)
		return 0;
	for (size_t i = 1; i < k; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return k;
}

bool tpc_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	uint32_t cp;
	while (i < n) {
		size_t k = utf8_dec(p + i, n - i, &cp);
		if (!k)
			return false;
		i += k;
	}
	return true;
}

void tpc_buf_xml_str(tpc_buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		switch (c) {
		case '<': tpc_buf_adds(b, "&lt;"); break;
		case '>': tpc_buf_adds(b, "&gt;"); break;
		case '&': tpc_buf_adds(b, "&amp;"); break;
		case '"': tpc_buf_adds(b, "&quot;"); break;
		case '\'': tpc_buf_adds(b, "&apos;"); break;
		default:
			if (c >= 0x80) {
				/* bytes that are not UTF-8 (a Latin-1 file name) would make
				 * the document unparsable: U+FFFD for each, as a decoder shows them */
				uint32_t cp;
				size_t k = utf8_dec((const unsigned char *)s + i, n - i, &cp);
				if (!k || cp == 0xFFFE || cp == 0xFFFF) {
					tpc_buf_adds(b, "\xEF\xBF\xBD");
				} else {
					tpc_buf_add(b, s + i, k);
					i += k - 1;
				}
				break;
			}
			/* XML 1.0 has no control characters but tab and newline */
			tpc_buf_addc(b, (c < 0x20 && c != '\t' && c != '\n') ? '?' : (char)c);
		}
	}
}

void tpc_buf_json_str(tpc_buf *b, const char *s, size_t n, bool ascii)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0;
	tpc_buf_addc(b, '"');
	while (i < n) {
		unsigned char c = p[i];
		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
			run++;
			i++;
			continue;
		}
		if (run)
			tpc_buf_add(b, s + i - run, run);
		run = 0;
		if (c == '"' || c == '\\') {
			tpc_buf_addc(b, '\\');
			tpc_buf_addc(b, (char)c);
			i++;
		} else if (c < 0x20) {
			switch (c) {
			case '\n': tpc_buf_adds(b, "\\n"); break;
			case '\r': tpc_buf_adds(b, "\\r"); break;
			case '\t': tpc_buf_adds(b, "\\t"); break;
			case '\b': tpc_buf_adds(b, "\\b"); break;
			case '\f': tpc_buf_adds(b, "\\f"); break;
			default: tpc_buf_addf(b, "\\u%04x", c); break;
			}
			i++;
		} else {
			uint32_t cp;
			size_t k = utf8_dec(p + i, n - i, &cp);
			if (!k) {
				cp = 0xfffd;
				k = 1;
				if (!ascii) {
					tpc_buf_adds(b, "\xef\xbf\xbd");
					i += k;
					continue;
				}
			}
			if (!ascii) {
				tpc_buf_add(b, s + i, k);
			} else if (cp >= 0x10000) {
				uint32_t v = cp - 0x10000;
				tpc_buf_addf(b, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
			} else {
				tpc_buf_addf(b, "\\u%04x", cp);
			}
			i += k;
		}
	}
	if (run)
		tpc_buf_add(b, s + n - run, run);
	tpc_buf_addc(b, '"');
}

void tpc_buf_bar(tpc_buf *b, uint64_t value, uint64_t max, int width, bool unicode)
{
	static const char *const part[8] = {"", "\u258f", "\u258e", "\u258d", "\u258c", "\u258b", "\u258a", "\u2589"};
	uint64_t steps = (uint64_t)(width > 0 ? width : 0) * (unicode ? 8 : 1);
	uint64_t n = max ? (uint64_t)((double)value / (double)max * (double)steps + 0.5) : 0;
	if (n > steps)
		n = steps;
	if (value && !n)
		n = 1;
	int cells = 0;
	if (unicode) {
		for (uint64_t i = 0; i < n / 8; i++, cells++)
			tpc_buf_adds(b, "\u2588");
		if (n % 8) {
			tpc_buf_adds(b, part[n % 8]);
			cells++;
		}
	} else {
		tpc_buf_addn(b, '#', (size_t)n);
		cells = (int)n;
	}
	if (cells < width)
		tpc_buf_addn(b, ' ', (size_t)(width - cells));
}
