/*
 * tpc_buf.h - a growable byte buffer (git's strbuf), and JSON text helpers.
 *
 * The buffer is always NUL-terminated after a successful append. An append
 * that fails to allocate sets `oom` and turns every later append into a no-op,
 * so a writer can build a whole header and check once (the sticky-flag idea of
 * the bounded cursor, for output).
 */
#ifndef TPC_BUF_H
#define TPC_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tpc_buf {
	char *p;
	size_t len, cap;
	bool oom;
} tpc_buf;

#define TPC_BUF_INIT {NULL, 0, 0, false}

void tpc_buf_init(tpc_buf *b);
void tpc_buf_release(tpc_buf *b);
void tpc_buf_reset(tpc_buf *b); /* len = 0, keep memory */
void tpc_buf_add(tpc_buf *b, const void *p, size_t n);
void tpc_buf_adds(tpc_buf *b, const char *s);
void tpc_buf_addc(tpc_buf *b, char c);
void tpc_buf_addf(tpc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tpc_buf_addn(tpc_buf *b, char c, size_t n); /* n copies of c */
/* A bar of `width` cells for value/max, padded with spaces: Unicode blocks in
 * eighths of a cell (a terminal), else '#' per whole cell (logs, pipes). A
 * nonzero value always shows at least one mark. */
void tpc_buf_bar(tpc_buf *b, uint64_t value, uint64_t max, int width, bool unicode);
/* Detach the buffer (caller frees); NULL if oom. */
char *tpc_buf_detach(tpc_buf *b, size_t *len);

/* Append `s` (n bytes, UTF-8) as a JSON string with quotes. With `ascii`,
 * non-ASCII is written as \uXXXX escapes (surrogate pairs above U+FFFF), the
 * way Python's json.dumps does by default; invalid UTF-8 bytes become U+FFFD. */
void tpc_buf_json_str(tpc_buf *b, const char *s, size_t n, bool ascii);
/* Append v as a JSON number with `digits` significant digits (%.*g): NaN as
 * null, an infinity as 1e999 / -1e999 (JSON has neither; Python's json reads
 * 1e999 back as inf). */
void tpc_buf_json_num(tpc_buf *b, double v, int digits);
/* Append s[0..n) as XML 1.0 character data or attribute text: the five
 * entities escaped, control characters other than tab and newline as '?',
 * bytes that are not UTF-8 as U+FFFD (JUnit reports: the document parses). */
void tpc_buf_xml_str(tpc_buf *b, const char *s, size_t n);

/* Is `s` (n bytes) valid UTF-8 (no overlongs, no surrogates)? */
bool tpc_utf8_valid(const char *s, size_t n);

#endif
