/* tpc_keys.c - expected keys: the names a load_state_dict(strict=True) would
 * accept, from a key list or a checkpoint, and the check against them (see
 * tpc_rules.h). */
#include "tpc_rules.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_rules_int.h"
#include "tpc_util.h"

#define MAX_KEYS_FILE (256u << 20)

void tpc_keys_release(tpc_keys *k)
{
	if (!k)
		return;
	tpc_free_strv(k->v, k->n);
	memset(k, 0, sizeof(*k));
}

static int keys_push(tpc_keys *k, const char *s, size_t n, tpc_err *e)
{
	if (tpc_grow((void **)&k->v, &k->cap, k->n + 1, sizeof(*k->v)))
		return tpc_err_nomem(e);
	if (!(k->v[k->n] = tpc_strndup(s, n)))
		return tpc_err_nomem(e);
	k->n++;
	return 0;
}

int tpc_keys_from_buffer(tpc_keys *k, const char *text, size_t len, const char *label,
			 tpc_err *e)
{
	size_t i = 0;
	int ret = 0;
	while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
		i++;
	if (i < len && text[i] == '[') {
		const char *end = NULL;
		cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
		if (!root || !cJSON_IsArray(root)) {
			cJSON_Delete(root);
			ret = tpc_err_set(e, TPC_EINPUT, "key list: invalid JSON near byte %zu",
					  end && end >= text ? (size_t)(end - text) : (size_t)0);
			goto out;
		}
		for (const cJSON *it = root->child; it && !ret; it = it->next) {
			if (!cJSON_IsString(it))
				ret = tpc_err_set(e, TPC_EINPUT, "key list: every entry must be a string");
			else
				ret = keys_push(k, it->valuestring, strlen(it->valuestring), e);
		}
		cJSON_Delete(root);
		goto out;
	}
	for (i = 0; i < len && !ret;) {
		size_t a = i, b;
		while (i < len && text[i] != '\n')
			i++;
		b = i++;
		while (a < b && (text[a] == ' ' || text[a] == '\t'))
			a++;
		while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\r'))
			b--;
		if (b > a) {
			if (memchr(text + a, '\0', b - a)) {
				ret = tpc_err_set(e, TPC_EINPUT, "key list: a line holds a NUL byte; not a text key list");
				break;
			}
			ret = keys_push(k, text + a, b - a, e);
		}
	}
out:
	if (ret && label)
		tpc_err_path(e, label);
	return ret;
}

int tpc_keys_load(tpc_keys *k, const char *path, tpc_err *e)
{
	tpc_err scratch;
	char *text = NULL;
	size_t len = 0;
	int ret;
	tpc_err_init(&scratch);
	if (tpc_exists(path) && tpc_format_detect(path, &scratch)) {
		tpc_ckpt ck;
		tpc_ckpt_init(&ck);
		ret = tpc_ckpt_open(&ck, path, NULL, e);
		for (size_t i = 0; i < ck.n && !ret; i++)
			ret = keys_push(k, ck.t[i].name, strlen(ck.t[i].name), e);
		tpc_ckpt_release(&ck);
		return ret;
	}
	if ((ret = tpc_read_file(path, MAX_KEYS_FILE, &text, &len, e))) {
		tpc_err_path(e, path);
		return ret;
	}
	ret = tpc_keys_from_buffer(k, text, len, path, e);
	free(text);
	return ret;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int tpc_keys_check(char *const *have, size_t nhave, const tpc_keys *want, tpc_buf *report,
		   tpc_err *e)
{
	char **h = tpc_malloc(nhave * sizeof(*h));
	char **w = tpc_malloc(want->n * sizeof(*w));
	size_t nh = 0, nw = want->n, i = 0, j = 0, nmiss = 0, nunexp = 0;
	tpc_buf miss = TPC_BUF_INIT, unexp = TPC_BUF_INIT;
	int ret = 0;
	if (!h || !w) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t x = 0; x < nhave; x++)
		if (have[x])
			h[nh++] = have[x];
	memcpy(w, want->v, nw * sizeof(*w));
	qsort(h, nh, sizeof(*h), cmp_str);
	qsort(w, nw, sizeof(*w), cmp_str);
	/* Merge; a key listed twice in the expected list counts once. */
	while (i < nh || j < nw) {
		int c = i >= nh ? 1 : j >= nw ? -1 : strcmp(h[i], w[j]);
		if (c == 0) {
			const char *s = h[i];
			while (i < nh && !strcmp(h[i], s))
				i++;
			while (j < nw && !strcmp(w[j], s))
				j++;
		} else if (c < 0) {
			nunexp++;
			tpc_buf_adds(&unexp, "  ");
			tpc__add_name(&unexp, h[i]);
			tpc_buf_addc(&unexp, '\n');
			i++;
		} else {
			const char *s = w[j];
			nmiss++;
			tpc_buf_adds(&miss, "  ");
			tpc__add_name(&miss, s);
			tpc_buf_addc(&miss, '\n');
			while (j < nw && !strcmp(w[j], s))
				j++;
		}
	}
	if (miss.oom || unexp.oom) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (nmiss || nunexp) {
		if (report) {
			if (nmiss) {
				tpc_buf_addf(report, "missing (%zu):\n", nmiss);
				tpc_buf_add(report, miss.p, miss.len);
			}
			if (nunexp) {
				tpc_buf_addf(report, "unexpected (%zu):\n", nunexp);
				tpc_buf_add(report, unexp.p, unexp.len);
			}
		}
		ret = tpc_err_set(e, TPC_EMISMATCH, "%zu missing and %zu unexpected keys", nmiss, nunexp);
	}
out:
	tpc_buf_release(&miss);
	tpc_buf_release(&unexp);
	free(h);
	free(w);
	return ret;
}
