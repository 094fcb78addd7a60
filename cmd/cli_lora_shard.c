/* cli_lora_shard.c - shard ADAPTER --base BASE: a PEFT LoRA adapter split for
 * tensor parallelism beside its base (shard/tpc_lora_shard.h), written as the
 * peft layout's rank folders. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_io.h"
#include "tpc_lora_nemo.h"
#include "tpc_lora_shard.h"
#include "tpc_util.h"

void tpc_cli_lora_set_init(tpc_cli_lora_set *ls)
{
	memset(ls, 0, sizeof(*ls));
	tpc_plan_init(&ls->plan);
}

void tpc_cli_lora_set_release(tpc_cli_lora_set *ls)
{
	tpc_plan_release(&ls->plan);
	tpc_cli_adapter_close(&ls->a);
	memset(ls, 0, sizeof(*ls));
}

/* The adapter folder: its config and its tensors. */
static int open_adapter(tpc_cli_lora_set *ls, const char *dir, bool strict, tpc_err *e)
{
	if (!tpc_is_dir(dir))
		return tpc_err_at(e, TPC_EINPUT, dir, NULL,
				  "shard --base takes a PEFT adapter folder as IN (adapter_config.json, adapter_model.safetensors)");
	return tpc_cli_adapter_open(&ls->a, dir, strict, e);
}

int tpc_cli_lora_shard_build(tpc_cli_lora_set *ls, const char *adapter, const tpc_cli_input *base, const tpc_cli_set *set,
			     const tpc_model_facts *f, tpc_shard_opts *so, bool strict, tpc_shard_plan *sp, tpc_err *e)
{
	tpc_buf pj = TPC_BUF_INIT;
	tpc_lora_shard_stats st;
	int ret;
	if (so->layout && so->layout != &tpc_layout_peft)
		return tpc_cli_usage("shard", "--base writes the peft layout (rank folders of PEFT adapters), not --layout %s",
				     so->layout->name);
	if (so->pp > 1)
		return tpc_cli_usage("shard", "--base splits an adapter for tensor (and expert) parallelism only: no --pp");
	if (!base->have_ck)
		return tpc_cli_usage("shard", "--base takes the base checkpoint, not a shard set: merge it first");
	if ((ret = open_adapter(ls, adapter, strict, e)))
		return ret;
	/* the base's family: how its fused experts are laid out (target_parameters) */
	char *cfg_path = base->path ? tpc_cli_model_config(base->path, set) : NULL;
	ls->a.cfg.family = tpc_cli_config_family(cfg_path);
	free(cfg_path);
	if ((ret = tpc_lora_shard_plan(base->view, &base->plan, f, so->tp, so->ep, so->resolve_flags, &ls->a.ad, &ls->a.cfg,
				       &pj, &st, e)))
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
	ret = tpc_shard_plan_build(sp, &ls->a.ad, &ls->plan, f, so, e);
out:
	tpc_buf_release(&pj);
	return ret;
}

/* merge NEMO_DIR -o ADAPTER/: a NeMo / Megatron tensor-parallel LoRA save as
 * one PEFT adapter folder (shard/tpc_lora_nemo.h). */
int tpc_cli_lora_nemo_merge(const char *dir, const char *out, const tpc_write_opts *wo, bool dry)
{
	tpc_ckpt ck;
	tpc_buf cfg = TPC_BUF_INIT;
	tpc_lora_nemo_info in;
	tpc_err e;
	char *st = NULL, *cj = NULL;
	int ret = 0;
	tpc_err_init(&e);
	tpc_ckpt_init(&ck);
	if (out && (tpc_ends_with(out, ".safetensors") || tpc_ends_with(out, ".bin") || tpc_ends_with(out, ".gguf"))) {
		ret = tpc_cli_usage("merge", "'%s' is a NeMo LoRA save: it merges into a PEFT adapter folder (-o DIR), not '%s'",
				    dir, out);
		goto done;
	}
	if (tpc_lora_nemo_read(&ck, &cfg, dir, &in, &e))
		goto fail;
	tpc_cli_info("NeMo LoRA '%s': tp %d, pp %d, %lld layers, r %lld, alpha %g: %zu PEFT modules", dir, in.tp, in.pp,
		     (long long)in.layers, (long long)in.r, in.alpha, in.modules);
	if (dry) {
		printf("# merge %s: NeMo LoRA, tp %d, pp %d, %zu tensors -> adapter_model.safetensors, adapter_config.json\n",
		       dir, in.tp, in.pp, ck.n);
		for (size_t i = 0; i < ck.n; i++) {
			char shp[64];
			printf("%s  %s %s\n", ck.t[i].name, tpc_dtype_name(ck.t[i].dtype), tpc_shape_str(&ck.t[i], shp, sizeof(shp)));
		}
		goto done;
	}
	if (tpc_shard_path_inside(out, dir)) {
		tpc_err_at(&e, TPC_EUSAGE, out, NULL, "the output is inside the NeMo save being merged; choose another place");
		goto fail;
	}
	const tpc_format *f = tpc_format_by_name("safetensors");
	if (!(st = tpc_path_join(out, "adapter_model.safetensors")) || !(cj = tpc_path_join(out, "adapter_config.json"))) {
		tpc_err_nomem(&e);
		goto fail;
	}
	if (!f || tpc_mkdirs(out, &e) || f->write(&ck, NULL, 0, st, wo, &e) ||
	    tpc_write_file_atomic(cj, cfg.p, cfg.len, (wo->flags & TPC_W_FORCE) ? TPC_OUT_FORCE : 0, &e))
		goto fail;
	goto done;
fail:
	ret = tpc_cli_fail(&e);
done:
	free(st);
	free(cj);
	tpc_buf_release(&cfg);
	tpc_ckpt_release(&ck);
	return ret;
}
