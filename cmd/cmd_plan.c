/* cmd_plan.c - `tpconv plan --list | NAME | --check FILE`: the sharding plans. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tpc_plan.h"

static const char *help =
	"usage: tpconv plan --list\n"
	"       tpconv plan NAME\n"
	"       tpconv plan --check FILE\n\n"
	"Show the built-in sharding plans (presets) and check plan files. 'tpconv plan\n"
	"NAME' prints a preset as JSON, the format --plan FILE takes, so a copy of it is\n"
	"the starting point for a model the presets do not cover. The schema: a list of\n"
	"rules, each a regular expression \"match\" (searched in the tensor name; the first\n"
	"matching rule decides, and a later matching rule that disagrees is an error) and\n"
	"a \"split\": col, row, vocab, replicate or dim (with \"dim\": N); options\n"
	"\"transposed\" (Conv1D [in, out]), \"heads\": \"q\"|\"kv\" (split on head\n"
	"boundaries; kv heads are replicated when tp exceeds them), \"head_block\" (rows\n"
	"per head in head_dim units for [nh, 3, hd] layouts), \"parts\": N or [sizes | \"q\" |\n"
	"\"kv\"] (fused tensors, each part split on its own), \"pad_multiple\" (vocab);\n"
	"plus \"fallback\" (replicate or error), \"layers\", \"first_stage\" and \"last_stage\"\n"
	"patterns for pipeline stages, and default \"model\" facts.\n\n"
	"Options:\n"
	"  --list          list the presets with a line each\n"
	"  --check FILE    parse and validate a plan file (exit 3 with the reason if bad)\n"
	"  -q, --quiet     errors only\n"
	"  -h, --help      this help\n\n" TPC_EXIT_HELP;

int cmd_plan(int argc, char **argv)
{
	bool list;
	const char *check, *name;
	int st = tpc_cli_catalog_args("plan", help, argc, argv, &list, &check, &name);
	if (st >= 0)
		return st;
	if (list) {
		for (size_t i = 0; i < tpc_plan_preset_count(); i++)
			printf("%-10s %s\n", tpc_plan_preset_name(i), tpc_plan_preset_desc(i));
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
	const char *json = tpc_plan_preset_json(name);
	if (!json) {
		tpc_plan p;
		tpc_err e;
		tpc_err_init(&e);
		tpc_plan_preset(&p, name, &e);
		return tpc_cli_fail(&e);
	}
	fputs(json, stdout);
	return 0;
}
