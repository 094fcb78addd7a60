/* fuzz_pickle.c - the pickle VM (formats/torch/pickle.h) on arbitrary bytes.
 *
 * Each input is run three times, as the three policies see it (the default
 * refusing dangerous globals, the weights_only-like strict one, and the
 * show-everything one of `inspect --globals`), with a persistent-id loader
 * that accepts any id, so BINPERSID is reached. A tree the VM accepts is
 * rendered as JSON and written back with the pickle writer; what the writer
 * produces must load again (a writer that emits a pickle its own reader
 * refuses is a finding). */
#include "fuzz.h"
#include "torch/pickle.h"

static int any_pid(void *ctx, tpc_value *pid, tpc_value **out, tpc_err *e)
{
	(void)ctx;
	(void)e;
	tpc_value *s = tpc_value_new(TPC_V_STORAGE);
	if (!s || tpc_value_append(s, tpc_value_ref(pid))) {
		tpc_value_unref(s);
		return tpc_err_nomem(e);
	}
	*out = s;
	return 0;
}

static void run(const uint8_t *data, size_t size, tpc_pickle_policy pol)
{
	tpc_pickle_opts o;
	tpc_pickle_globals g;
	tpc_value *v = NULL;
	uint64_t used = 0;
	tpc_err e;
	memset(&g, 0, sizeof(g));
	tpc_pickle_opts_init(&o);
	o.path = "fuzz.pkl";
	o.policy = pol;
	o.globals = &g;
	o.persistent_load = any_pid;
	tpc_err_init(&e);
	int r = tpc_pickle_load_from_buffer(data, size, &o, &v, &used, &e);
	fuzz_check_status(r, &e);
	if (r) {
		FUZZ_CHECK(v == NULL);
	} else {
		FUZZ_CHECK(v != NULL && used >= 1 && used <= size && data[used - 1] == TPC_PK_STOP);
		/* no dangerous global gets through, but getattr in the one form an
		 * enum member pickles as (Python >= 3.11), under the default policy */
		for (size_t i = 0; i < g.n; i++)
			FUZZ_CHECK(pol == TPC_PICKLE_ALLOW_ALL || g.v[i].cls != TPC_PICKLE_DANGEROUS ||
				   (pol == TPC_PICKLE_REFUSE_DANGEROUS && !strcmp(g.v[i].module, "builtins") &&
				    !strcmp(g.v[i].name, "getattr")));
		if (pol == TPC_PICKLE_ALLOW_ALL) {
			free(tpc_value_to_json(v, NULL, NULL));
			tpc_buf b = TPC_BUF_INIT;
			tpc_pickle_writer w;
			tpc_pickle_writer_init(&w, &b);
			tpc_err_init(&e);
			r = tpc_pickle_write(&w, v, &e);
			fuzz_check_status(r, &e);
			if (!r) {
				tpc_value *v2 = NULL;
				tpc_err_init(&e);
				r = tpc_pickle_load_from_buffer((const uint8_t *)b.p, b.len, &o, &v2, &used, &e);
				if (r) {
					char line[2048];
					tpc_err_format(&e, line, sizeof(line));
					fprintf(stderr, "re-reading the written pickle failed: %s\n", line);
				}
				FUZZ_CHECK(r == 0 && used == b.len);
				tpc_value_unref(v2);
			}
			tpc_pickle_writer_release(&w);
			tpc_buf_release(&b);
		}
	}
	tpc_value_unref(v);
	tpc_pickle_globals_release(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run(data, size, TPC_PICKLE_REFUSE_DANGEROUS);
	run(data, size, TPC_PICKLE_REFUSE_UNKNOWN);
	run(data, size, TPC_PICKLE_ALLOW_ALL);
	return 0;
}
