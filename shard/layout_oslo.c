/* layout_oslo.c - OSLO's save_parallelized: pytorch_model_tp_{t}_pp_{p}.bin,
 * torch files (SHARDING.md, OSLO section). Sets OSLO wrote have no manifest;
 * they are recognised by their names, including the _ep_0 suffix of newer
 * OSLO and the tp={t}_pp={p} spelling of older releases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_io.h"
#include "tpc_layout.h"
#include "tpc_shard.h"
#include "tpc_util.h"

/* "pytorch_model_tp_{t}_pp_{p}.bin", "..._ep_0.bin" or "pytorch_model_tp={t}_pp={p}.bin" */
static bool parse(const char *n, int *t, int *p)
{
	int a, b, k = -1;
	if (sscanf(n, "pytorch_model_tp_%d_pp_%d%n", &a, &b, &k) == 2 && k > 0 &&
	    (!strcmp(n + k, ".bin") || !strcmp(n + k, "_ep_0.bin")))
		goto ok;
	k = -1;
	if (sscanf(n, "pytorch_model_tp=%d_pp=%d%n", &a, &b, &k) == 2 && k > 0 && !strcmp(n + k, ".bin"))
		goto ok;
	return false;
ok:
	if (a < 0 || b < 0 || a >= TPC_MAX_TP || b >= TPC_MAX_TP)
		return false;
	*t = a;
	*p = b;
	return true;
}

static int geometry(const char *dir, int tp_flag, int pp_flag, int *tp, int *pp, tpc_err *e)
{
	int maxt, maxp;
	tpc__layout_max_ranks(dir, parse, &maxt, &maxp);
	*tp = tp_flag ? tp_flag : maxt + 1;
	*pp = pp_flag ? pp_flag : maxp + 1;
	if (*tp < maxt + 1 || *pp < maxp + 1) {
		return tpc_err_at(e, TPC_EINPUT, dir, NULL, "files for tp rank %d / pp rank %d exist but --tp %d / --pp %d was given", maxt,
			    maxp, *tp, *pp);
	}
	return 0;
}

static char *rank_path(const char *dir, int t, int p, int tp)
{
	static const char *const spell[] = {"pytorch_model_tp_%d_pp_%d.bin", "pytorch_model_tp_%d_pp_%d_ep_0.bin",
					    "pytorch_model_tp=%d_pp=%d.bin"};
	(void)tp;
	for (size_t i = 0; i < sizeof(spell) / sizeof(spell[0]); i++) {
		char buf[96];
		snprintf(buf, sizeof(buf), spell[i], t, p);
		char *path = tpc_path_join(dir, buf);
		if (!path || tpc_exists(path))
			return path;
		free(path);
	}
	/* none exists: the canonical name, so the error names what is missing */
	char buf[96];
	snprintf(buf, sizeof(buf), spell[0], t, p);
	return tpc_path_join(dir, buf);
}

static const char *const formats[] = {"torch", NULL};

const tpc_layout tpc_layout_oslo = {
	.name = "oslo", .desc = "pytorch_model_tp_T_pp_P.bin torch files (OSLO save_parallelized)",
	.formats = formats, .set_format = "oslo-shards",
	.companions_at_top = true,
	.rank_fmt = "pytorch_model_tp_%d_pp_%d.bin",
	.parse_rank_file = parse, .foreign_geometry = geometry, .foreign_rank_path = rank_path,
};
