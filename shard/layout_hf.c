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
	int nr = sp->tp * sp->pp, ret = 0;
	if (o->no_extras)
		return 0;
	for (int r = 0; r < nr && !ret; r++) {
		char *sub = tpc_path_join(dir, sp->rank_file[r]);
		ret = sub ? tpc__layout_copy_companions(sp, sub, o, NULL, false, e) : tpc_err_nomem(e);
		free(sub);
	}
	return ret;
}

/* every rank folder holds the companions; a merge takes rank 0's */
static const char *merge_extras(const char *dir, const char *rank0, tpc_extras_opts *xo)
{
	(void)dir;
	(void)xo;
	return rank0 && tpc_is_dir(rank0) ? rank0 : NULL;
}

static const char *const formats[] = {"safetensors", "torch", NULL};

const tpc_layout tpc_layout_hf = {
	.name = "hf", .desc = "tpTT_ppPP/ folders, each a Hugging Face checkpoint with the model's companions",
	.formats = formats, .set_format = "hf-shards",
	.folders = true, .sized = true, .expert_parallel = true,
	.rank_fmt = "tp%02d_pp%02d",
	.remove_rank = remove_rank,
	.write_extras = write_extras, .merge_extras = merge_extras,
};
