/*
 * gguf_tiktoken.c - a tiktoken vocabulary file, as HunYuan's checkpoints ship
 * it (hy.tiktoken), and what convert_hf_to_gguf.py makes of it.
 *
 * The file: one token a line, its bytes in base64 (the standard alphabet,
 * padded), a space, its rank; ranks count the lines from 0. Tencent's
 * tokenization_hy.py (_load_tiktoken_bpe) numbers the tokens by line and
 * ignores the written rank; tpconv requires it to be the line's number and
 * refuses a token given twice (one version of the module raises on it, the
 * other skips it: the ids would differ), a line that is not two fields,
 * base64 it cannot decode and an empty token, each by line number.
 *
 * HunYuanMoEModel.set_vocab (conversion/hunyuan.py) rebuilds the BPE merges
 * from the ranks with QwenModel.bpe (conversion/qwen.py): a token of rank r
 * split into its bytes, the adjacent pair whose join has the lowest rank
 * below r merged until none is left; two parts make the merge "A B"
 * (tpc__tiktoken_merge). Each token's text is its bytes through GPT-2's
 * bytes_to_unicode (QwenModel.token_bytes_to_string: tpc__gpt2_bytes_str).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_vocab_int.h"
#include "tpc_util.h"

enum { TT_MAX_TOKENS = 1 << 24, TT_MAX_TOKEN_BYTES = 1 << 16 };

static int b64_val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* s[0..n) as padded base64 into out (room for n / 4 * 3): its length, -1 if not base64 */
static int64_t b64_decode(const char *s, size_t n, uint8_t *out)
{
	size_t o = 0, pad = 0;
	if (!n || n % 4)
		return -1;
	while (pad < 2 && s[n - 1 - pad] == '=')
		pad++;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		for (int k = 0; k < 4; k++) {
			bool padded = i + (size_t)k >= n - pad;
			v[k] = padded ? 0 : b64_val((unsigned char)s[i + (size_t)k]);
			if (v[k] < 0)
				return -1;
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
		uint8_t b[3] = {(uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w};
		size_t take = i + 4 < n ? 3 : 3 - pad;
		memcpy(out + o, b, take);
		o += take;
	}
	return (int64_t)o;
}

static uint64_t fnv(const uint8_t *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 1099511628211ull;
	return h;
}

int64_t tpc__tiktoken_rank(const tpc__tiktoken *t, const uint8_t *s, size_t n)
{
	if (!t->cap)
		return -1;
	for (size_t i = (size_t)fnv(s, n) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		uint32_t r = t->slot[i];
		if (!r)
			return -1;
		r--;
		if (t->off[r + 1] - t->off[r] == n && !memcmp(t->bytes + t->off[r], s, n))
			return r;
	}
}

/* ASCII whitespace as Python's bytes.split() takes it */
static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int tt_line(tpc__tiktoken *t, const char *l, size_t n, uint64_t line, const char *path, tpc_err *e)
{
	const char *f[3];
	size_t fl[3], nf = 0;
	for (size_t i = 0; i < n;) {
		while (i < n && is_ws(l[i]))
			i++;
		if (i == n)
			break;
		size_t s = i;
		while (i < n && !is_ws(l[i]))
			i++;
		if (nf == 3)
			break;
		f[nf] = l + s;
		fl[nf++] = i - s;
	}
	char what[96];
	snprintf(what, sizeof(what), "line %llu", (unsigned long long)line);
	if (nf != 2)
		return tpc_err_at(e, TPC_EINPUT, path, NULL, "%s: not a base64 token and its rank", what);
	char *end;
	char num[24];
	snprintf(num, sizeof(num), "%.*s", (int)(fl[1] < 23 ? fl[1] : 23), f[1]);
	unsigned long long rank = strtoull(num, &end, 10);
	if (fl[1] > 20 || *end || num[0] < '0' || num[0] > '9' || rank != t->n)
		return tpc_err_at(e, TPC_EINPUT, path, NULL,
				  "%s: rank '%.20s' is not the line's (tokenization_hy.py numbers the tokens by line)",
				  what, num);
	if (fl[0] / 4 * 3 > TT_MAX_TOKEN_BYTES)
		return tpc_err_at(e, TPC_EINPUT, path, NULL, "%s: a token of more than 65536 bytes", what);
	int64_t len = b64_decode(f[0], fl[0], t->bytes + t->off[t->n]);
	if (len <= 0)
		return tpc_err_at(e, TPC_EINPUT, path, NULL, "%s: the token is not base64 of one byte or more", what);
	int64_t dup = tpc__tiktoken_rank(t, t->bytes + t->off[t->n], (size_t)len);
	if (dup >= 0)
		return tpc_err_at(e, TPC_EINPUT, path, NULL, "%s: the token of line %lld again", what, (long long)dup);
	t->off[t->n + 1] = t->off[t->n] + (uint64_t)len;
	for (size_t i = (size_t)fnv(t->bytes + t->off[t->n], (size_t)len) & (t->cap - 1);; i = (i + 1) & (t->cap - 1))
		if (!t->slot[i]) {
			t->slot[i] = (uint32_t)t->n + 1;
			break;
		}
	t->n++;
	return 0;
}

int tpc__tiktoken_from_buffer(const char *p, size_t len, const char *path, tpc__tiktoken *t, tpc_err *e)
{
	size_t lines = 0;
	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < len; i++)
		lines += p[i] == '\n';
	lines += len && p[len - 1] != '\n';
	if (lines > TT_MAX_TOKENS)
		return tpc_err_at(e, TPC_EINPUT, path, NULL, "%s", "more than 16777216 tokens");
	for (t->cap = 16; t->cap < 2 * lines; t->cap *= 2)
		;
	t->bytes = malloc(len / 4 * 3 + 1);
	t->off = calloc(lines + 1, sizeof(*t->off));
	t->slot = calloc(t->cap, sizeof(*t->slot));
	if (!t->bytes || !t->off || !t->slot) {
		tpc__tiktoken_release(t);
		return tpc_err_nomem(e);
	}
	uint64_t line = 0;
	int ret = 0;
	for (size_t i = 0; i < len && !ret;) {
		const char *nl = memchr(p + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - (p + i)) : len - i;
		ret = tt_line(t, p + i, n, ++line, path, e);
		i += n + (nl != NULL);
	}
	if (!ret && !t->n)
		ret = tpc_err_at(e, TPC_EINPUT, path, NULL, "%s", "no tokens");
	if (ret)
		tpc__tiktoken_release(t);
	return ret;
}

void tpc__tiktoken_release(tpc__tiktoken *t)
{
	free(t->bytes);
	free(t->off);
	free(t->slot);
	memset(t, 0, sizeof(*t));
}

int tpc__tiktoken_merge(const tpc__tiktoken *t, size_t r, size_t *split)
{
	const uint8_t *s = t->bytes + t->off[r];
	size_t n = (size_t)(t->off[r + 1] - t->off[r]), np = n;
	size_t *at = malloc((n + 1) * sizeof(*at)); /* part k: s[at[k] .. at[k + 1]) */
	if (!at)
		return -1;
	for (size_t i = 0; i <= n; i++)
		at[i] = i;
	while (np > 1) {
		int64_t best = -1;
		size_t bi = 0;
		for (size_t k = 0; k + 1 < np; k++) {
			int64_t x = tpc__tiktoken_rank(t, s + at[k], at[k + 2] - at[k]);
			if (x >= 0 && (best < 0 || x < best)) {
				best = x;
				bi = k;
			}
		}
		if (best < 0 || (size_t)best >= r)
			break;
		memmove(at + bi + 1, at + bi + 2, (np - bi - 1) * sizeof(*at));
		np--;
	}
	int two = np == 2;
	*split = two ? at[1] : 0;
	free(at);
	return two;
}

size_t tpc__gpt2_bytes_str(const uint8_t *b, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned c = b[i], u = c;
		if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174)) {
			/* bytes_to_unicode: the others, in order, from U+0100 */
			unsigned k = 0;
			for (unsigned x = 0; x < c; x++)
				k += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174);
			u = 256 + k;
		}
		if (u < 0x80) {
			out[o++] = (char)u;
		} else {
			out[o++] = (char)(0xC0 | (u >> 6));
			out[o++] = (char)(0x80 | (u & 0x3F));
		}
	}
	return o;
}

/* GPT-2's bytes_to_unicode: byte c's code point */
static unsigned gpt2_point(unsigned c)
{
	unsigned k = 0;
	if ((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174)
		return c;
	for (unsigned x = 0; x < c; x++)
		k += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174);
	return 256 + k;
}

int64_t tpc__gpt2_str_bytes(const char *s, size_t n, uint8_t *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		unsigned u;
		if (c < 0x80) {
			u = c;
			i++;
		} else if ((c & 0xE0) == 0xC0 && i + 1 < n && ((unsigned char)s[i + 1] & 0xC0) == 0x80) {
			u = (unsigned)(c & 0x1F) << 6 | ((unsigned char)s[i + 1] & 0x3F);
			i += 2;
		} else {
			return -1;
		}
		int b = -1;
		for (unsigned x = 0; x < 256 && b < 0; x++)
			if (gpt2_point(x) == u)
				b = (int)x;
		if (b < 0)
			return -1;
		out[o++] = (uint8_t)b;
	}
	return (int64_t)o;
}

size_t tpc__b64_encode(const uint8_t *b, size_t n, char *out)
{
	static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
		out[o++] = al[w >> 18 & 63];
		out[o++] = al[w >> 12 & 63];
		out[o++] = i + 1 < n ? al[w >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? al[w & 63] : '=';
	}
	return o;
}

const char *tpc__hy_special(size_t k, char *buf, size_t n)
{
	static const char *const named[] = {"<|endoftext|>", "<|startoftext|>", "<|bos|>", "<|eos|>", "<|pad|>"};
	if (k < 5)
		return named[k];
	snprintf(buf, n, "<|extra_%zu|>", k - 5);
	return buf;
}
