/* cli_mix.c - merge --recipe FILE: checkpoints of one architecture merged
 * tensor by tensor as a mergekit recipe says (lib/tpc_mix.h), written as
 * convert writes. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include <cjson/cJSON.h>
#include <stdio.h>

#include "tpc_extras.h"
#include "tpc_family.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_mix.h"
#include "tpc_shard.h"
#include "tpc_util.h"

/* passthrough's output: not a GGUF (its block count would be the model's
 * config's), and a config.json without per-layer lists it does not restack */
static int pass_prepare(const tpc_mix_recipe *r, const tpc_cli_set *set, const tpc_cli_mix_args *a)
{
	if (a->outf && !strcmp(a->outf->name, "gguf"))
		return tpc_cli_usage("merge", "passthrough writes a checkpoint with its config.json (num_hidden_layers restacked); write that, then 'tpconv convert DIR -o OUT.gguf'");
	char *cfg = tpc_cli_model_config(r->model[tpc_mix_primary(r)], set), *text = NULL;
	size_t len;
	tpc_err e;
	tpc_err_init(&e);
	int ret = 0;
	if (cfg && !tpc_read_file(cfg, 1u << 24, &text, &len, &e)) {
		cJSON *j = cJSON_ParseWithLength(text, len);
		static const char *const per_layer[] = {"layer_types", "no_rope_layers", "mlp_only_layers", "swa_layers"};
		for (size_t i = 0; j && i < sizeof(per_layer) / sizeof(*per_layer) && !ret; i++)
			if (cJSON_GetObjectItemCaseSensitive(j, per_layer[i])) {
				tpc_err_at(&e, TPC_EINPUT, cfg, NULL, "'%s' (a list per layer) is not restacked by passthrough", per_layer[i]);
				ret = tpc_cli_fail(&e);
			}
		cJSON_Delete(j);
	}
	free(text);
	free(cfg);
	return ret;
}

/* The written model's companions, config.json's num_hidden_layers set */
static int pass_companions(const char *model, const char *out, const tpc_write_opts *wo, size_t kept, tpc_dtype dt,
			   const char *cfg_merge)
{
	char *srcdir = tpc_extras_source_dir(model);
	tpc_err e;
	if (!srcdir)
		return 0;
	tpc_err_init(&e);
	tpc_extras_opts xo = {.flags = ((wo->flags & TPC_W_FORCE) || kept) ? TPC_OUT_FORCE : 0, .config_merge = cfg_merge};
	if (dt)
		xo.torch_dtype = tpc_dtype_get(dt)->torch;
	size_t copied = 0;
	int xr = tpc_extras_copy(srcdir, out, &xo, &copied, &e);
	free(srcdir);
	return xr ? tpc_cli_fail(&e) : 0;
}

int tpc_cli_mix(const tpc_cli_mix_args *a)
{
	tpc_mix_recipe r;
	tpc_cli_input in[TPC_MIX_MAX_INPUTS];
	const tpc_ckpt *cks[TPC_MIX_MAX_INPUTS];
	tpc_mix_stats st;
	tpc_cli_set set;
	tpc_write_opts wo = *a->wo;
	tpc_err e;
	char *model_dir = NULL, *cfg_merge = NULL, *cfg_path = NULL;
	int ret = 0;
	size_t nin = 0;

	tpc_err_init(&e);
	tpc_cli_set_init(&set, 0);
	if (tpc_mix_recipe_from_file(&r, a->recipe, &e))
		return tpc_cli_fail(&e);
	/* a GGUF output from GGUF inputs keeps their names; else Hugging Face names */
	unsigned flags = (!a->outf || strcmp(a->outf->name, "gguf") ? TPC_CLI_IN_HF_NAMES : 0);
	int P = tpc_mix_primary(&r);
	for (size_t k = 0; k < r.n; k++) {
		tpc_cli_input_init(&in[k]);
		nin++;
		if (!a->dry && a->out && tpc_shard_path_inside(a->out, r.model[k])) {
			tpc_err_at(&e, TPC_EUSAGE, a->out, NULL, "the output is inside the input '%s'; choose another place",
				   r.model[k]);
			ret = tpc_cli_fail(&e);
			goto out;
		}
		if ((ret = tpc_cli_input_open(&in[k], "merge", r.model[k], &set, flags, &e))) {
			if (ret < 0)
				ret = tpc_cli_fail(&e);
			goto out;
		}
		if ((int)k == P && in[k].have_mg) {
			ret = tpc_cli_usage("merge", "'%s' is a shard set: the written input (the base, else the first model) must be a checkpoint; 'tpconv merge %s -o DIR' first",
					    r.model[k], r.model[k]);
			goto out;
		}
		cks[k] = in[k].view;
	}
	int64_t layers = 0;
	if (r.nslices && (ret = pass_prepare(&r, &set, a)))
		goto out;
	/* passthrough renames layers by the family config.json's architecture names */
	if (r.nslices)
		cfg_path = tpc_cli_model_config(r.model[P], &set);
	if (r.nslices ? tpc_mix_passthrough(in[P].view, cks, &r, cfg_path ? tpc_cli_config_family(cfg_path) : NULL, &layers, &st, &e)
		      : tpc_mix_apply(in[P].view, cks, &r, a->seed, &st, &e)) {
		ret = tpc_cli_fail(&e);
		goto out;
	}
	if (r.nslices) {
		if (!(cfg_merge = tpc_malloc(64))) {
			tpc_err_nomem(&e);
			ret = tpc_cli_fail(&e);
			goto out;
		}
		snprintf(cfg_merge, 64, "{\"num_hidden_layers\": %lld}", (long long)layers);
		tpc_cli_info("passthrough of %zu slices: %lld layers (config.json's num_hidden_layers), %zu tensors scaled or cast",
			     r.nslices, (long long)layers, st.merged);
	}
	tpc_cli_info("%s of %zu inputs: %zu tensor%s merged in f32 (%zu by lerp, nearly colinear; %zu tied to another, as '%s' holds them)",
		     r.method_name, r.n, st.merged, st.merged == 1 ? "" : "s", st.lerped, st.tied, r.model[P]);
	if (st.kept)
		tpc_cli_warn("%zu integer tensor%s not merged: written as '%s' holds %s", st.kept, st.kept == 1 ? "" : "s",
			     r.model[P], st.kept == 1 ? "it" : "them");
	if (a->dry) {
		const tpc_ckpt *ck = in[P].view;
		for (size_t i = 0; i < ck->n; i++) {
			char nm[512], shp[256];
			tpc_sanitize(nm, sizeof(nm), ck->t[i].name);
			printf("%s  %s %s%s\n", nm, tpc_dtype_name(ck->t[i].dtype), tpc_shape_str(&ck->t[i], shp, sizeof(shp)),
			       ck->t[i].dq ? "" : "  (kept)");
		}
		goto out;
	}
	if ((ret = tpc_cli_input_model_dir(&in[P], "merge", a->outf, &wo, &model_dir)))
		goto out;
	size_t kept = 0;
	bool go_on;
	ret = tpc_cli_write_out("merge", tpc_cli_input_write, &in[P], in[P].view, a->outf, a->sharded, a->out, &wo,
				a->force_progress, &kept, &go_on);
	if (ret || !go_on)
		goto out;
	if (!a->no_extras && tpc_is_dir(a->out))
		ret = cfg_merge ? pass_companions(r.model[P], a->out, &wo, kept, r.dtype, cfg_merge)
				: tpc_cli_copy_companions(in[P].view, r.model[P], a->out, &wo, kept, 0);
out:
	free(model_dir);
	free(cfg_merge);
	free(cfg_path);
	for (size_t k = nin; k-- > 0;)
		tpc_cli_input_release(&in[k]);
	tpc_mix_recipe_release(&r);
	return ret;
}
