/* cmd_plan.c - `tpconv plan --list | NAME | --check FILE`: the sharding plans. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_family.h"
#include "tpc_io.h"
#include "tpc_plan.h"

static const char *help =
	"usage: tpconv plan --list\n"
	"       tpconv plan NAME\n"
	"       tpconv plan --check FILE\n"
	"       tpconv plan --from-hf CONFIG_OR_PLAN.json\n\n"
	"Show the built-in sharding plans (presets) and check plan files. 'tpconv plan\n"
	"NAME' prints a preset as JSON, the format --plan FILE takes, so a copy of it is\n"
	"the starting point for a model the presets do not cover. The schema: a list of\n"
	"rules, each a regular expression \"match\" (searched in the tensor name; the first\n"
	"matching rule decides, and a later matching rule that disagrees is an error) and\n"
	"a \"split\": col, row, vocab, replicate or dim (with \"dim\": N); options\n"
	"\"transposed\" (Conv1D [in, out]), \"heads\": \"q\"|\"kv\" (split on head\n"
	"boundaries; kv heads are replicated when tp exceeds them), \"head_count\": true\n"
	"(with \"heads\": \"q\": num_attention_heads heads of any size, as MLA's q_b_proj\n"
	"and kv_b_proj), \"head_block\" (rows\n"
	"per head in head_dim units for [nh, 3, hd] layouts), \"parts\": N or [sizes | \"q\" |\n"
	"\"kv\"] (fused tensors, each part split on its own), \"pad_multiple\" (vocab);\n"
	"plus \"fallback\" (replicate or error), \"layers\", \"first_stage\" and \"last_stage\"\n"
	"patterns for pipeline stages, and default \"model\" facts.\n\n"
	"Options:\n"
	"  --list          list the presets with a line each\n"
	"  --check FILE    parse and validate a plan file (exit 3 with the reason if bad)\n"
	"  --from-hf FILE  print a plan made from a transformers tensor-parallel plan: a\n"
	"                  config.json with base_model_tp_plan (heads and kv heads taken\n"
	"                  from it) or the plan dict alone; styles colwise, rowwise,\n"
	"                  *_rep, local_*, packed_*, embedding, replicate, gather, ...;\n"
	"                  expert-parallel and unknown styles are refused by name\n"
	"  -q, --quiet     errors only\n"
	"  -h, --help      this help\n\n" TPC_EXIT_HELP;

static int from_hf(const char *path)
{
	char *text = NULL;
	size_t len;
	tpc_buf b = TPC_BUF_INIT;
	tpc_plan p;
	tpc_err e;
	int ret;
	tpc_err_init(&e);
	if ((ret = tpc_read_file(path, 64u << 20, &text, &len, &e)) || (ret = tpc_plan_from_hf(text, len, path, &b, &e)))
		goto out;
	/* what it made must be a valid plan */
	if ((ret = tpc_plan_from_buffer(&p, b.p, b.len, "the generated plan", &e)))
		goto out;
	tpc_plan_release(&p);
	fwrite(b.p, 1, b.len, stdout);
out:
	free(text);
	tpc_buf_release(&b);
	return ret ? tpc_cli_fail(&e) : 0;
}

int cmd_plan(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--from-hf")) {
			if (argc != 3)
				return tpc_cli_usage("plan", "--from-hf FILE takes no other arguments");
			return from_hf(argv[i + 1]);
		}
	bool list;
	const char *check, *name;
	int st = tpc_cli_catalog_args("plan", help, argc, argv, &list, &check, &name);
	if (st >= 0)
		return st;
	if (list) {
		for (size_t i = 0; i < tpc_family_count(); i++)
			printf("%-10s %s\n", tpc_family_at(i)->name, tpc_family_at(i)->desc);
		return 0;
	}
	if (check) {
		tpc_plan p;
		tpc_err e;
		tpc_err_init(&e);
		if (tpc_plan_from_file(&p, check, &e))
			return tpc_cli_fail(&e);
		if (tpc_cli_verbose >= 0)
			printf("%s: plan '%s' is valid: %zu rules, fallback %s\n", check, p.name ? p.name : "(unnamed)",
			       p.nrules, p.fallback_error ? "error" : "replicate");
		tpc_plan_release(&p);
		return 0;
	}
	const tpc_family *fam = tpc_family_find(name);
	if (!fam) {
		tpc_plan p;
		tpc_err e;
		tpc_err_init(&e);
		tpc_plan_preset(&p, name, &e);
		return tpc_cli_fail(&e);
	}
	fputs(fam->plan, stdout);
	return 0;
}
