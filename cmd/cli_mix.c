/* cli_mix.c - merge --recipe FILE: checkpoints of one architecture merged
 * tensor by tensor as a mergekit recipe says (lib/tpc_mix.h), written as
 * convert writes. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_mix.h"
#include "tpc_shard.h"
#include "tpc_util.h"

int tpc_cli_mix(const tpc_cli_mix_args *a)
{
	tpc_mix_recipe r;
	tpc_cli_input in[TPC_MIX_MAX_INPUTS];
	const tpc_ckpt *cks[TPC_MIX_MAX_INPUTS];
	tpc_mix_stats st;
	tpc_cli_set set;
	tpc_write_opts wo = *a->wo;
	tpc_err e;
	char *model_dir = NULL;
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
	if ((ret = tpc_mix_apply(in[P].view, cks, &r, a->seed, &st, &e))) {
		ret = tpc_cli_fail(&e);
		goto out;
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
		ret = tpc_cli_copy_companions(in[P].view, r.model[P], a->out, &wo, kept, 0);
out:
	free(model_dir);
	for (size_t k = nin; k-- > 0;)
		tpc_cli_input_release(&in[k]);
	tpc_mix_recipe_release(&r);
	return ret;
}
