/* cli_lora_shard.c - shard ADAPTER --base BASE: a PEFT LoRA adapter split for
 * tensor parallelism beside its base (shard/tpc_lora_shard.h), written as the
 * peft layout's rank folders. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_io.h"
#include "tpc_lora_shard.h"
#include "tpc_util.h"

void tpc_cli_lora_set_init(tpc_cli_lora_set *ls)
{
	memset(ls, 0, sizeof(*ls));
	tpc_ckpt_init(&ls->ad);
	tpc_plan_init(&ls->plan);
}

void tpc_cli_lora_set_release(tpc_cli_lora_set *ls)
{
	tpc_plan_release(&ls->plan);
	if (ls->have_cfg)
		tpc_lora_cfg_release(&ls->cfg);
	tpc_ckpt_release(&ls->ad);
	memset(ls, 0, sizeof(*ls));
}

/* The adapter folder: its config and its tensors. */
static int open_adapter(tpc_cli_lora_set *ls, const char *dir, bool strict, tpc_err *e)
{
	char *cfg = tpc_path_join(dir, "adapter_config.json"), *st = tpc_path_join(dir, "adapter_model.safetensors");
	char *bin = tpc_path_join(dir, "adapter_model.bin");
	int ret = 0;
	if (!cfg || !st || !bin) {
		ret = tpc_err_nomem(e);
	} else if (!tpc_is_dir(dir) || !tpc_exists(cfg)) {
		ret = tpc_err_at(e, TPC_EINPUT, dir, NULL,
				 "shard --base takes a PEFT adapter folder as IN (adapter_config.json, adapter_model.safetensors)");
	} else if (!(ret = tpc_lora_cfg_from_file(&ls->cfg, cfg, e))) {
		ls->have_cfg = true;
		const char *w = tpc_exists(st) ? st : bin;
		tpc_open_opts oo;
		memset(&oo, 0, sizeof(oo));
		if (strict)
			oo.flags |= TPC_OPEN_STRICT;
		if (!tpc_exists(w))
			ret = tpc_err_at(e, TPC_EINPUT, dir, NULL, "neither adapter_model.safetensors nor adapter_model.bin is there");
		else
			ret = tpc_ckpt_open(&ls->ad, w, &oo, e);
	}
	free(cfg);
	free(st);
	free(bin);
	return ret;
}

int tpc_cli_lora_shard_build(tpc_cli_lora_set *ls, const char *adapter, const tpc_cli_input *base,
			     const tpc_model_facts *f, tpc_shard_opts *so, bool strict, tpc_shard_plan *sp, tpc_err *e)
{
	tpc_buf pj = TPC_BUF_INIT;
	tpc_lora_shard_stats st;
	int ret;
	if (so->layout && so->layout != &tpc_layout_peft)
		return tpc_cli_usage("shard", "--base writes the peft layout (rank folders of PEFT adapters), not --layout %s",
				     so->layout->name);
	if (so->pp > 1 || so->ep > 1)
		return tpc_cli_usage("shard", "--base splits an adapter for tensor parallelism only: no --pp or --ep");
	if (!base->have_ck)
		return tpc_cli_usage("shard", "--base takes the base checkpoint, not a shard set: merge it first");
	if ((ret = open_adapter(ls, adapter, strict, e)))
		return ret;
	if ((ret = tpc_lora_shard_plan(base->view, &base->plan, f, so->tp, so->resolve_flags, &ls->ad, &ls->cfg, &pj, &st,
				       e)))
		goto out;
	if ((ret = tpc_plan_from_buffer(&ls->plan, pj.p, pj.len, "(the adapter's plan)", e)))
		goto out;
	tpc_cli_info("adapter '%s' beside plan '%s': %zu tensor%s split with their base's output, %zu with its input, "
		     "%zu whole, %zu modules_to_save (%zu rules)",
		     adapter, base->plan.name ? base->plan.name : "?", st.out_split, st.out_split == 1 ? "" : "s", st.in_split,
		     st.whole, st.saved, st.rules);
	so->layout = &tpc_layout_peft;
	so->config_dir = tpc_strdup(adapter);
	if (!so->config_dir) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	ret = tpc_shard_plan_build(sp, &ls->ad, &ls->plan, f, so, e);
out:
	tpc_buf_release(&pj);
	return ret;
}
