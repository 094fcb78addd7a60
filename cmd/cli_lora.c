/* cli_lora.c - convert --lora DIR[:WEIGHT]: a PEFT LoRA adapter folder merged
 * into the checkpoint being converted (lib/tpc_lora.h), as descriptions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_lora.h"
#include "tpc_util.h"

/* DIR[:WEIGHT]: the weight when what follows the last ':' is a number (a
 * folder whose name ends that way is written DIR:1). */
static int split_arg(const char *arg, char **dir, double *w)
{
	const char *colon = strrchr(arg, ':');
	*w = 1.0;
	if (colon && colon[1]) {
		char *end = NULL;
		double v = strtod(colon + 1, &end);
		if (end && !*end && isfinite(v)) {
			*w = v;
			*dir = tpc_strndup(arg, (size_t)(colon - arg));
			return *dir ? 0 : -1;
		}
	}
	*dir = tpc_strdup(arg);
	return *dir ? 0 : -1;
}

int tpc_cli_adapter_open(tpc_cli_adapter *a, const char *dir, bool strict, tpc_err *e)
{
	char *cfg_path = tpc_path_join(dir, "adapter_config.json"), *st = tpc_path_join(dir, "adapter_model.safetensors"),
	     *bin = tpc_path_join(dir, "adapter_model.bin");
	const char *wpath = NULL;
	int ret = 0;
	memset(a, 0, sizeof(*a));
	tpc_ckpt_init(&a->ad);
	if (!cfg_path || !st || !bin)
		ret = tpc_err_nomem(e);
	else if (!tpc_exists(cfg_path))
		ret = tpc_err_at(e, TPC_EINPUT, cfg_path, NULL, "no such file: not a PEFT adapter folder");
	else if (!(ret = tpc_lora_cfg_from_file(&a->cfg, cfg_path, e)))
		a->have_cfg = true;
	if (!ret && !tpc_exists(wpath = tpc_exists(st) ? st : bin))
		ret = tpc_err_at(e, TPC_EINPUT, dir, NULL, "neither adapter_model.safetensors nor adapter_model.bin is there");
	if (!ret) {
		tpc_open_opts oo;
		memset(&oo, 0, sizeof(oo));
		oo.flags = strict ? TPC_OPEN_STRICT : 0;
		ret = tpc_ckpt_open(&a->ad, wpath, &oo, e);
	}
	free(cfg_path);
	free(st);
	free(bin);
	return ret;
}

void tpc_cli_adapter_close(tpc_cli_adapter *a)
{
	if (a->have_cfg)
		tpc_lora_cfg_release(&a->cfg);
	tpc_ckpt_release(&a->ad);
	memset(a, 0, sizeof(*a));
}

int tpc_cli_lora(const char *arg, tpc_ckpt *ck, bool strict, const char *base, const tpc_cli_set *set)
{
	char *dir = NULL;
	tpc_cli_adapter a;
	tpc_lora_stats st;
	tpc_err e;
	double w;
	int ret = 0;
	tpc_err_init(&e);
	memset(&a, 0, sizeof(a));
	if (split_arg(arg, &dir, &w)) {
		tpc_err_nomem(&e);
		goto fail;
	}
	if (!tpc_is_dir(dir)) {
		tpc_err_at(&e, TPC_EINPUT, dir, NULL, "--lora takes a PEFT adapter folder (adapter_config.json, adapter_model.safetensors)");
		goto fail;
	}
	if (tpc_cli_adapter_open(&a, dir, strict, &e))
		goto fail;
	/* the base's family: how its fused experts are laid out */
	char *cfg_path = base ? tpc_cli_model_config(base, set) : NULL;
	a.cfg.family = tpc_cli_config_family(cfg_path);
	free(cfg_path);
	if (tpc_lora_merge(ck, &a.ad, &a.cfg, w, &st, &e))
		goto fail;
	tpc_cli_info("merged the adapter '%s' (weight %g): %zu LoRA weight%s%s, %zu bias%s, %zu tensor%s replaced (modules_to_save)",
		     dir, w, st.merged, st.merged == 1 ? "" : "s", st.dora ? " (DoRA)" : "", st.biases,
		     st.biases == 1 ? "" : "es", st.replaced, st.replaced == 1 ? "" : "s");
	goto out;
fail:
	ret = tpc_cli_fail(&e);
out:
	tpc_cli_adapter_close(&a);
	free(dir);
	return ret;
}
