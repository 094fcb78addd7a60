/* fuzz_yaml.c - the YAML subset (tpc_yaml_from_buffer, lib/tpc_yaml.c) and a
 * merge recipe read from it (tpc_mix_recipe_from_buffer, lib/tpc_mix.c), its
 * parameters evaluated for a few tensor names at a few layer positions, and
 * passthrough's slices checked. */
#include <cjson/cJSON.h>

#include "fuzz.h"
#include "tpc_mix.h"
#include "tpc_yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {"model.layers.0.self_attn.q_proj.weight", "model.layers.3.mlp.up_proj.weight",
					    "lm_head.weight", ""};
	static const char *const params[] = {"weight", "density", "t", "normalize", "lambda", "gamma", "epsilon", "scale",
					     "filter_wise"};
	struct cJSON *j = NULL;
	tpc_err e;
	tpc_err_init(&e);
	int r = tpc_yaml_from_buffer((const char *)data, size, "recipe.yaml", &j, &e);
	fuzz_check_status(r, &e);
	FUZZ_CHECK(r ? !j : j != NULL);
	cJSON_Delete(j);
	tpc_mix_recipe rc;
	tpc_err_init(&e);
	r = tpc_mix_recipe_from_buffer(&rc, (const char *)data, size, "recipe.yaml", &e);
	fuzz_check_status(r, &e);
	if (r)
		return 0;
	FUZZ_CHECK(rc.n >= 1 && rc.n <= TPC_MIX_MAX_INPUTS && rc.base < (int)rc.n);
	/* passthrough's slices: each a known input, a layer range [a, b), a < b */
	FUZZ_CHECK(rc.nslices <= TPC_MIX_MAX_SLICES && (rc.nslices == 0) == (rc.method != TPC_MIX_PASSTHROUGH));
	for (size_t s = 0; s < rc.nslices; s++)
		FUZZ_CHECK(rc.slice[s].input >= 0 && (size_t)rc.slice[s].input < rc.n && rc.slice[s].a >= 0 &&
			   rc.slice[s].a < rc.slice[s].b);
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		for (size_t p = 0; p < sizeof(params) / sizeof(*params); p++)
			for (int k = -1; k < (int)rc.n; k++) {
				double v;
				bool found;
				tpc_mix_param(&rc, params[p], k, names[i], (double)(i % 3) / 2, &v, &found, &e);
			}
	tpc_mix_recipe_release(&rc);
	return 0;
}
