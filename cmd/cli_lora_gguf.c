/* cli_lora_gguf.c - convert --base BASE: a PEFT LoRA adapter folder to
 * llama.cpp's adapter GGUF (as convert_lora_to_gguf.py --base BASE writes
 * it), or an adapter GGUF back to a PEFT adapter folder
 * (formats/gguf/gguf_lora.c through the registry). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_lora.h"
#include "tpc_util.h"

/* Does the folder hold weight files (a name a registered format writes)? */
static bool base_weights(const char *base)
{
	DIR *d = opendir(base);
	struct dirent *de;
	bool any = false;
	while (d && !any && (de = readdir(d)))
		any = de->d_name[0] != '.' && tpc_format_weight_name(de->d_name);
	if (d)
		closedir(d);
	return any;
}

static int check_against(const char *base, const tpc_ckpt *ad, const tpc_lora_cfg *cfg, tpc_err *e)
{
	tpc_ckpt ck;
	tpc_open_opts oo;
	memset(&oo, 0, sizeof(oo));
	tpc_ckpt_init(&ck);
	int ret = tpc_ckpt_open(&ck, base, &oo, e);
	if (!ret)
		ret = tpc_lora_check(&ck, ad, cfg, e);
	tpc_ckpt_release(&ck);
	return ret;
}

/* The PEFT folder `in` to the adapter GGUF `out` */
static int to_gguf(const char *in, const char *out, const char *base, const tpc_write_opts *wo0, bool strict)
{
	const tpc_format *gg = tpc_format_by_name("gguf"), *of = tpc_format_for_output(out);
	tpc_cli_adapter a;
	tpc_err e;
	int ret = 0;
	tpc_err_init(&e);
	memset(&a, 0, sizeof(a));
	if (!gg || of != gg)
		return tpc_cli_usage("convert", "a PEFT adapter folder with --base converts to an adapter GGUF: -o NAME.gguf");
	/* A base with its weights: the adapter is checked against them as a merge
	 * checks it (every key placed, shapes, target_modules), on a copy that is
	 * dropped; the reference reads only config.json, and so does a base
	 * folder without weights here */
	/* (a LoRA on parameters: the writer refuses it, by name, first) */
	if (tpc_cli_adapter_open(&a, in, strict, &e) || (!a.cfg.params && base_weights(base) && check_against(base, &a.ad, &a.cfg, &e)))
		goto fail;
	tpc_write_opts wo = *wo0;
	wo.lora_base = base;
	wo.lora = &a.cfg;
	wo.model_dir = in;
	if (gg->write(&a.ad, NULL, 0, out, &wo, &e))
		goto fail;
	tpc_cli_info("wrote the adapter GGUF '%s' (%zu LoRA tensors, alpha %g)", out, a.ad.n, a.cfg.alpha);
	goto out;
fail:
	ret = tpc_cli_fail(&e);
out:
	tpc_cli_adapter_close(&a);
	return ret;
}

/* The adapter file `in` (a format with lora_to_peft: GGUF) to the PEFT
 * folder `out`: adapter_model.safetensors, then adapter_config.json */
static int to_peft(const char *in, const char *out, const char *base, const tpc_write_opts *wo0)
{
	const tpc_format *f, *st = tpc_format_by_name("safetensors");
	char *json = NULL, *wpath = NULL, *cpath = NULL;
	tpc_ckpt ck;
	tpc_err e;
	int ret = 0;
	tpc_err_init(&e);
	tpc_ckpt_init(&ck);
	if (!(f = tpc_format_detect(in, &e)))
		goto fail;
	if (!f->lora_to_peft || !st) {
		tpc_err_at(&e, TPC_EINPUT, in, NULL, "--base goes with a PEFT adapter folder or an adapter GGUF, not a %s file",
			   f->name);
		goto fail;
	}
	if (!(wpath = tpc_path_join(out, "adapter_model.safetensors")) || !(cpath = tpc_path_join(out, "adapter_config.json"))) {
		tpc_err_nomem(&e);
		goto fail;
	}
	tpc_open_opts oo;
	memset(&oo, 0, sizeof(oo));
	if (tpc_ckpt_open(&ck, in, &oo, &e) || f->lora_to_peft(&ck, base, &json, &e))
		goto fail;
	if (tpc_mkdirs(out, &e) || st->write(&ck, NULL, 0, wpath, wo0, &e) ||
	    tpc_write_file_atomic(cpath, json, strlen(json), (wo0->flags & TPC_W_FORCE) ? TPC_OUT_FORCE : 0, &e))
		goto fail;
	tpc_cli_info("wrote the PEFT adapter '%s' (%zu LoRA tensors)", out, ck.n);
	goto out;
fail:
	ret = tpc_cli_fail(&e);
out:
	tpc_ckpt_release(&ck);
	free(json);
	free(wpath);
	free(cpath);
	return ret;
}

int tpc_cli_lora_gguf(const char *in, const char *out, const char *base, const tpc_write_opts *wo, bool strict)
{
	if (!tpc_is_dir(base))
		return tpc_cli_usage("convert", "--base takes the base model's folder (its config.json), not '%s'", base);
	if (!out)
		return tpc_cli_usage("convert", "missing -o OUT");
	if (!tpc_is_dir(in) && (wo->outtype || wo->gguf_pre))
		return tpc_cli_usage("convert", "%s goes with a GGUF output; an adapter GGUF is read back as it is",
				     wo->outtype ? "--outtype" : "--gguf-pre");
	return tpc_is_dir(in) ? to_gguf(in, out, base, wo, strict) : to_peft(in, out, base, wo);
}
