/* spm.c - SentencePiece ModelProto reader (see spm.h). */
#include "spm.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_buf.h"
#include "tpc_io.h"
#include "tpc_util.h"

/* A tokenizer.model of a 256k-piece vocabulary is about 4 MiB. */
#define SPM_FILE_CAP ((uint64_t)256 << 20)

/* A varint of at most 10 bytes; ok=false when it runs past the buffer or
 * is longer. */
static uint64_t spm_varint(tpc_cursor *c)
{
	uint64_t v = 0;
	for (int i = 0; i < 10; i++) {
		uint8_t b = tpc_cursor_u8(c);
		if (!c->ok)
			return 0;
		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80))
			return v;
	}
	c->ok = false;
	return 0;
}

typedef struct spm_field {
	uint64_t num;
	int wt;
	uint64_t v;         /* varint, fixed32, fixed64 */
	const uint8_t *p;   /* length-delimited bytes */
	uint64_t len;
	uint64_t at;        /* offset of the field's key */
} spm_field;

/* Read one field of the message in c; `base` is c's offset in the file. */
static int spm_field_next(tpc_cursor *c, uint64_t base, const char *path, spm_field *f, tpc_err *e)
{
	f->at = base + c->pos;
	uint64_t key = spm_varint(c);
	if (!c->ok)
		return TPC_CORRUPT(e, path, (int64_t)f->at, NULL, "tokenizer.model: truncated field key");
	f->num = key >> 3;
	f->wt = (int)(key & 7);
	if (f->num == 0)
		return TPC_CORRUPT(e, path, (int64_t)f->at, NULL, "tokenizer.model: field number 0");
	switch (f->wt) {
	case 0:
		f->v = spm_varint(c);
		break;
	case 1:
		f->v = tpc_cursor_u64le(c);
		break;
	case 5:
		f->v = tpc_cursor_u32le(c);
		break;
	case 2:
		f->len = spm_varint(c);
		if (c->ok && f->len > tpc_cursor_left(c))
			return TPC_CORRUPT(e, path, (int64_t)f->at, NULL,
					   "tokenizer.model: field %llu is %llu bytes but %llu are left",
					   (unsigned long long)f->num, (unsigned long long)f->len,
					   (unsigned long long)tpc_cursor_left(c));
		f->p = tpc_cursor_take(c, f->len);
		break;
	default:
		return TPC_CORRUPT(e, path, (int64_t)f->at, NULL,
				   "tokenizer.model: field %llu has wire type %d (groups and unknown types are not read)",
				   (unsigned long long)f->num, f->wt);
	}
	if (!c->ok)
		return TPC_CORRUPT(e, path, (int64_t)f->at, NULL, "tokenizer.model: field %llu runs past the end",
				   (unsigned long long)f->num);
	return 0;
}

/* Whether s[0..n) is UTF-8 without NUL, overlong forms or surrogates. */
static bool spm_utf8(const uint8_t *s, uint64_t n)
{
	for (uint64_t i = 0; i < n;) {
		uint8_t b = s[i];
		int k = b < 0x80 ? 0 : (b & 0xe0) == 0xc0 ? 1 : (b & 0xf0) == 0xe0 ? 2 : (b & 0xf8) == 0xf0 ? 3 : -1;
		if (b == 0 || k < 0 || n - i <= (uint64_t)k)
			return false;
		uint32_t cp = k ? b & (0x3f >> k) : b;
		for (int j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		static const uint32_t min[4] = {0, 0x80, 0x800, 0x10000};
		if (cp < min[k] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
			return false;
		i += (uint64_t)k + 1;
	}
	return true;
}

static int spm_piece(const uint8_t *p, uint64_t n, uint64_t base, const char *path, size_t idx, tpc_spm_piece *out,
		     tpc_err *e)
{
	tpc_cursor c;
	tpc_cursor_init(&c, p, n);
	const uint8_t *s = NULL;
	uint64_t slen = 0, s_at = base;
	out->type = TPC_SPM_NORMAL;
	out->score = 0.0f;
	while (tpc_cursor_left(&c)) {
		spm_field f;
		int ret = spm_field_next(&c, base, path, &f, e);
		if (ret)
			return ret;
		if (f.num == 1 && f.wt == 2) {
			s = f.p;
			slen = f.len;
			s_at = f.at;
		} else if (f.num == 2 && f.wt == 5) {
			uint32_t bits = (uint32_t)f.v;
			memcpy(&out->score, &bits, 4);
		} else if (f.num == 3 && f.wt == 0) {
			if (f.v < TPC_SPM_NORMAL || f.v > TPC_SPM_BYTE)
				return TPC_CORRUPT(e, path, (int64_t)f.at, NULL,
						   "tokenizer.model: piece %zu has type %llu (known: 1 to 6)", idx,
						   (unsigned long long)f.v);
			out->type = (int)f.v;
		} else if (f.num <= 3) {
			return TPC_CORRUPT(e, path, (int64_t)f.at, NULL,
					   "tokenizer.model: piece %zu field %llu has wire type %d", idx,
					   (unsigned long long)f.num, f.wt);
		}
	}
	if (!s || !slen)
		return TPC_CORRUPT(e, path, (int64_t)base, NULL, "tokenizer.model: piece %zu is empty", idx);
	if (slen > UINT32_MAX || !spm_utf8(s, slen))
		return TPC_CORRUPT(e, path, (int64_t)s_at, NULL,
				   "tokenizer.model: piece %zu is not UTF-8 text (or holds a NUL)", idx);
	out->s = malloc(slen + 1);
	if (!out->s)
		return tpc_err_set(e, TPC_EIO, "out of memory");
	memcpy(out->s, s, slen);
	out->s[slen] = '\0';
	out->len = (uint32_t)slen;
	return 0;
}

static int spm_cmp(const void *a, const void *b)
{
	const tpc_spm_piece *x = *(const tpc_spm_piece *const *)a, *y = *(const tpc_spm_piece *const *)b;
	size_t n = x->len < y->len ? x->len : y->len;
	int r = memcmp(x->s, y->s, n);
	return r ? r : (x->len > y->len) - (x->len < y->len);
}

/* SentencePieceProcessor's load checks: one UNKNOWN piece, no piece twice. */
static int spm_check(const tpc_spm *m, const char *path, tpc_err *e)
{
	size_t unk = 0;
	for (size_t i = 0; i < m->n; i++)
		unk += m->p[i].type == TPC_SPM_UNKNOWN;
	if (unk != 1)
		return TPC_CORRUPT(e, path, -1, NULL, "tokenizer.model: %zu pieces of type UNKNOWN (sentencepiece needs one)",
				   unk);
	const tpc_spm_piece **ix = malloc(m->n * sizeof(*ix));
	if (!ix)
		return tpc_err_set(e, TPC_EIO, "out of memory");
	for (size_t i = 0; i < m->n; i++)
		ix[i] = &m->p[i];
	qsort(ix, m->n, sizeof(*ix), spm_cmp);
	int ret = 0;
	for (size_t i = 1; i < m->n && !ret; i++) {
		if (spm_cmp(&ix[i - 1], &ix[i]))
			continue;
		size_t a = (size_t)(ix[i - 1] - m->p), b = (size_t)(ix[i] - m->p);
		ret = TPC_CORRUPT(e, path, -1, NULL, "tokenizer.model: pieces %zu and %zu are both '%s'", a < b ? a : b,
				  a < b ? b : a, ix[i]->s);
	}
	free(ix);
	return ret;
}

int tpc_spm_from_buffer(const uint8_t *buf, size_t n, const char *path, tpc_spm *m, tpc_err *e)
{
	int ret = 0;
	tpc_cursor c;
	tpc_cursor_init(&c, buf, n);
	size_t cap = 0;
	m->p = NULL;
	m->n = 0;
	while (tpc_cursor_left(&c)) {
		spm_field f;
		if ((ret = spm_field_next(&c, 0, path, &f, e)))
			goto out;
		if (f.num != 1)
			continue;
		if (f.wt != 2) {
			ret = TPC_CORRUPT(e, path, (int64_t)f.at, NULL, "tokenizer.model: pieces field has wire type %d",
					  f.wt);
			goto out;
		}
		if (m->n == cap) { /* a piece takes 2 bytes at least, so n bounds the count */
			size_t nc = cap ? cap * 2 : 256;
			tpc_spm_piece *np = realloc(m->p, nc * sizeof(*np));
			if (!np) {
				ret = tpc_err_set(e, TPC_EIO, "out of memory");
				goto out;
			}
			m->p = np;
			cap = nc;
		}
		uint64_t body = f.at + (uint64_t)(f.p - (buf + f.at));
		if ((ret = spm_piece(f.p, f.len, body, path, m->n, &m->p[m->n], e)))
			goto out;
		m->n++;
	}
	if (!m->n) {
		ret = TPC_CORRUPT(e, path, 0, NULL, "tokenizer.model: no pieces");
		goto out;
	}
	ret = spm_check(m, path, e);
out:
	if (ret)
		tpc_spm_release(m);
	return ret;
}

int tpc_spm_from_file(const char *path, tpc_spm *m, tpc_err *e)
{
	char *text = NULL;
	size_t len = 0;
	m->p = NULL;
	m->n = 0;
	int ret = tpc_read_file(path, SPM_FILE_CAP, &text, &len, e);
	if (!ret)
		ret = tpc_spm_from_buffer((const uint8_t *)text, len, path, m, e);
	free(text);
	return ret;
}

void tpc_spm_release(tpc_spm *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->p[i].s);
	free(m->p);
	m->p = NULL;
	m->n = 0;
}

/* ---- the writer ---- */

static void spm_put_varint(tpc_buf *b, uint64_t v)
{
	do {
		tpc_buf_addc(b, (char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
		v >>= 7;
	} while (v);
}

/* An int32 field as protobuf writes it: a negative value sign-extended to 64 bits. */
static void spm_put_int(tpc_buf *b, uint32_t num, int64_t v)
{
	spm_put_varint(b, (uint64_t)num << 3);
	spm_put_varint(b, (uint64_t)v);
}

static void spm_put_bytes(tpc_buf *b, uint32_t num, const void *p, size_t n)
{
	spm_put_varint(b, (uint64_t)num << 3 | 2);
	spm_put_varint(b, n);
	tpc_buf_add(b, p, n);
}

static void spm_put_piece(tpc_buf *b, tpc_buf *tmp, const tpc_spm_piece *p)
{
	uint32_t bits;
	uint8_t f[4];
	tpc_buf_reset(tmp);
	spm_put_bytes(tmp, 1, p->s, p->len);
	memcpy(&bits, &p->score, 4);
	tpc_wr32le(f, bits);
	spm_put_varint(tmp, 2 << 3 | 5);
	tpc_buf_add(tmp, f, 4);
	if (p->type != TPC_SPM_NORMAL)
		spm_put_int(tmp, 3, p->type);
	spm_put_bytes(b, 1, tmp->p, tmp->len);
}

int tpc_spm_to_buffer(const tpc_spm *m, const tpc_spm_spec *spec, const char *what, uint8_t **out, size_t *n,
		      tpc_err *e)
{
	tpc_buf b = TPC_BUF_INIT, tmp = TPC_BUF_INIT;
	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < m->n; i++) {
		const tpc_spm_piece *p = &m->p[i];
		if (!p->len || !spm_utf8((const uint8_t *)p->s, p->len) || p->type < TPC_SPM_NORMAL || p->type > TPC_SPM_BYTE)
			return tpc_err_at(e, TPC_EINPUT, what, NULL, "piece %zu is empty, not UTF-8 text or of type %d", i,
					  p->type);
	}
	int ret = m->n ? spm_check(m, what, e) : tpc_err_at(e, TPC_EINPUT, what, NULL, "no pieces");
	if (ret)
		return ret;
	for (size_t i = 0; i < m->n; i++)
		spm_put_piece(&b, &tmp, &m->p[i]);
	tpc_buf_reset(&tmp);
	spm_put_int(&tmp, 3, spec->model_type);
	spm_put_int(&tmp, 4, (int64_t)m->n);
	spm_put_int(&tmp, 35, spec->byte_fallback);
	const int32_t ids[4] = {spec->unk_id, spec->bos_id, spec->eos_id, spec->pad_id};
	for (int k = 0; k < 4; k++)
		spm_put_int(&tmp, 40 + (uint32_t)k, ids[k]);
	spm_put_bytes(&b, 2, tmp.p, tmp.len);
	tpc_buf_reset(&tmp);
	spm_put_bytes(&tmp, 1, spec->normalizer, strlen(spec->normalizer));
	spm_put_int(&tmp, 3, spec->add_dummy_prefix);
	spm_put_int(&tmp, 4, spec->remove_extra_whitespaces);
	spm_put_int(&tmp, 5, spec->escape_whitespaces);
	spm_put_bytes(&b, 3, tmp.p, tmp.len);
	bool oom = b.oom || tmp.oom;
	tpc_buf_release(&tmp);
	if (oom) {
		tpc_buf_release(&b);
		return tpc_err_nomem(e);
	}
	*out = (uint8_t *)tpc_buf_detach(&b, n);
	return 0;
}
