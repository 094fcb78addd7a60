/* layout_hf.c - one Hugging Face checkpoint per rank: tp{t:02}_pp{p:02}/ folders,
 * each written by the hf-index writer (model.safetensors, or
 * model-0000N-of-0000M.safetensors + index with --max-shard-size) with the
 * model's companions, so every rank folder loads with from_pretrained. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpc_io.h"
#include "tpc_layout.h"
#include "tpc_shard.h"
#include "tpc_util.h"

/* The weight files and index the writer made */
static bool is_weights(const char *n, const void *ctx)
{
	(void)ctx;
	return (!strncmp(n, "model", 5) || !strncmp(n, "pytorch_model", 13)) &&
	       (tpc_ends_with(n, ".safetensors") || tpc_ends_with(n, ".bin") || tpc_ends_with(n, ".index.json"));
}

/* Those, then the folder itself if that leaves it empty (companions copied
 * by another run stay). */
static void remove_rank(const char *p)
{
	tpc__layout_unlink_if(p, is_weights, NULL);
	rmdir(p);
}

/* each rank folder is a loadable HF checkpoint: companions in every one */
static int write_extras(const tpc_shard_plan *sp, const char *dir, const tpc_shard_opts *o, tpc_err *e)
{
	return o->no_extras ? 0 : tpc__layout_companions_per_rank(sp, dir, o, e);
}

static const char *const formats[] = {"safetensors", "torch", NULL};

const tpc_layout tpc_layout_hf = {
	.name = "hf", .desc = "tpTT_ppPP/ folders, each a Hugging Face checkpoint with the model's companions",
	.formats = formats, .set_format = "hf-shards",
	.folders = true, .sized = true, .expert_parallel = true,
	.rank_fmt = "tp%02d_pp%02d",
	.remove_rank = remove_rank,
	.write_extras = write_extras, .merge_extras = tpc__layout_rank0_extras,
};
