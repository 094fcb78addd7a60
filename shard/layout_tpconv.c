/* layout_tpconv.c - tpconv's own layout: model_tp{t:02}_pp{p:02}.safetensors
 * (.bin with --format torch), the model's companions at the set's top. */
#include <stdio.h>
#include <string.h>

#include "tpc_layout.h"
#include "tpc_util.h"

static char *rank_name(int t, int p, int tp, int pp, const char *format)
{
	(void)pp;
	char buf[64];
	(void)tp;
	snprintf(buf, sizeof(buf), "model_tp%02d_pp%02d.%s", t, p, !strcmp(format, "torch") ? "bin" : "safetensors");
	return tpc_strdup(buf);
}

static const char *const formats[] = {"safetensors", "torch", NULL};

const tpc_layout tpc_layout_tpconv = {
	.name = "tpconv", .desc = "model_tpTT_ppPP.safetensors (.bin with --format torch), companions beside",
	.formats = formats, .set_format = "tpconv-shards",
	.companions_at_top = true, .expert_parallel = true,
	.rank_name = rank_name,
};
