/* cli_input.c - one way to open what a command is given (cli.h,
 * tpc_cli_input_open): shard, merge and diff classify the path once, take the
 * plan from --preset/--plan or the set's manifest, and resolve the model facts
 * in one order: the flags, --config, a config.json beside the input file or
 * inside the folder or set, the manifest or the set's own record (Megatron's
 * args), the plan's defaults; the shapes fill the rest where the command asks
 * (tpc_facts_from_shapes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_layout.h"
#include "tpc_util.h"

void tpc_cli_input_init(tpc_cli_input *in)
{
	memset(in, 0, sizeof(*in));
	tpc_ckpt_init(&in->ck);
	tpc_plan_init(&in->plan);
}

void tpc_cli_input_release(tpc_cli_input *in)
{
	if (in->have_mg)
		tpc_merge_release(&in->mg);
	tpc_ckpt_release(&in->ck);
	tpc_plan_release(&in->plan);
	tpc_cli_input_init(in);
}

static int flags_plan(tpc_cli_input *in, const tpc_cli_set *set, tpc_err *e)
{
	int ret;
	if (in->have_plan || (!set->preset && !set->plan_file))
		return 0;
	if ((ret = tpc_cli_load_plan(set->preset, set->plan_file, &in->plan, e)))
		return ret;
	in->have_plan = true;
	return 0;
}

int tpc_cli_input_facts(const tpc_cli_input *in, const tpc_cli_set *set, tpc_model_facts *out, tpc_err *e)
{
	return tpc_cli_facts(&set->facts, set->config, in->path, in->have_mg ? &in->mg.facts : NULL,
			     in->have_plan ? &in->plan : NULL, out, e);
}

/* A set: merged on the fly through its manifest or, for a foreign one, the
 * plan it was split with. */
static int open_set(tpc_cli_input *in, const char *cmd, const tpc_cli_set *set, unsigned flags,
		    const tpc_layout *lay, tpc_err *e)
{
	tpc_merge_opts mo;
	tpc_model_facts own;
	int ret;
	memset(&mo, 0, sizeof(mo));
	memset(&own, 0, sizeof(own));
	mo.checksums = flags & TPC_CLI_IN_CHECKSUMS;
	mo.defer_checksums = flags & TPC_CLI_IN_DEFER;
	mo.take_rank0 = flags & TPC_CLI_IN_TAKE_RANK0;
	mo.tp = (int)set->tp;
	mo.pp = (int)set->pp;
	if (in->kind == TPC_SET_FOREIGN) {
		/* a set whose own files name the model (TensorRT-LLM's config.json) */
		const char *fp = !in->have_plan && lay && lay->foreign_preset ? lay->foreign_preset(in->path) : NULL;
		if (fp && (ret = tpc_cli_load_plan(fp, NULL, &in->plan, e)))
			return ret;
		in->have_plan = in->have_plan || fp;
		if (!in->have_plan)
			return tpc_cli_usage(cmd,
					     "'%s' is a shard set without a tpconv manifest: give the --preset or --plan it was split with",
					     in->path);
		if (lay && lay->foreign_facts)
			lay->foreign_facts(in->path, &own);
	}
	if (in->have_plan)
		mo.plan = &in->plan;
	if ((ret = tpc_cli_facts(&set->facts, set->config, in->path, &own, mo.plan, &mo.facts, e)))
		return ret;
	if ((ret = tpc_merge_open(&in->mg, in->path, &mo, e)))
		return ret;
	in->have_mg = true;
	in->view = &in->mg.out;
	if (!in->have_plan && (flags & TPC_CLI_IN_SET_PLAN) && in->mg.plan_json) {
		if ((ret = tpc_plan_from_buffer(&in->plan, in->mg.plan_json, strlen(in->mg.plan_json),
						"the input manifest's plan", e)))
			return ret;
		in->have_plan = true;
	}
	return 0;
}

int tpc_cli_input_open(tpc_cli_input *in, const char *cmd, const char *path, const tpc_cli_set *set, unsigned flags,
		       tpc_err *e)
{
	const tpc_layout *lay = NULL;
	int ret;
	tpc_cli_input_init(in);
	in->path = path;
	in->kind = tpc_set_detect(path, &lay);
	if ((ret = flags_plan(in, set, e)))
		return ret; /* the plan's own error, not the input's */
	if (in->kind != TPC_SET_NONE || (flags & TPC_CLI_IN_SET)) {
		ret = open_set(in, cmd, set, flags, lay, e);
		goto out;
	}
	tpc_open_opts oo;
	memset(&oo, 0, sizeof(oo));
	if (flags & TPC_CLI_IN_DEQUANTIZE)
		oo.flags |= TPC_OPEN_DEQUANTIZE;
	if (!(ret = tpc_ckpt_open(&in->ck, path, &oo, e))) {
		in->have_ck = true;
		in->view = &in->ck;
	}
out:
	if (ret < 0 && !e->path[0])
		tpc_err_path(e, path);
	return ret;
}
