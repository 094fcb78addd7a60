/* fuzz_tree_json.c - the JSON form of a pickled object tree (tpc_value_from_json,
 * lib/tpc_value.c), which a safetensors file written from a torch checkpoint
 * carries in __metadata__["tpconv.tree"] and `convert` turns back into a
 * pickle. What it accepts must render back to JSON that parses again and
 * renders to the same text (rendering is a fixed point; it is not a strict
 * inverse because invalid UTF-8 in a string is rendered as U+FFFD). */
#include "fuzz.h"

static int64_t resolve(void *ctx, const char *name)
{
	(void)ctx;
	return name[0] == 't' ? (int64_t)strlen(name) : -1; /* some names exist */
}

static const char *namer(void *ctx, int64_t index)
{
	static char buf[4096];
	(void)ctx;
	if (index < 1 || index >= (int64_t)sizeof(buf))
		return NULL;
	memset(buf, 't', (size_t)index);
	buf[index] = '\0';
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc_err e;
	tpc_err_init(&e);
	tpc_value *v = tpc_value_from_json((const char *)data, size, resolve, NULL, &e);
	fuzz_check_status(v ? 0 : e.code, &e);
	if (v) {
		char *j = tpc_value_to_json(v, namer, NULL);
		if (j) {
			tpc_err_init(&e);
			tpc_value *w = tpc_value_from_json(j, strlen(j), resolve, NULL, &e);
			if (!w)
				fprintf(stderr, "re-parse failed: %s\n", e.msg);
			FUZZ_CHECK(w != NULL);
			char *j2 = tpc_value_to_json(w, namer, NULL);
			FUZZ_CHECK(j2 == NULL || !strcmp(j, j2));
			tpc_value_unref(w);
			free(j2);
			free(j);
		}
		tpc_value_unref(v);
	}
	return 0;
}
