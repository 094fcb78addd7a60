/* layout_peft.c - a PEFT LoRA adapter split beside its base (shard ADAPTER
 * --base BASE, shard/tpc_lora_shard.h): tp{t:02}_pp{p:02}/ folders, each a
 * PEFT adapter folder (adapter_model.safetensors and the adapter's
 * adapter_config.json, README.md ...) that `convert RANK --lora FOLDER` merges
 * into the base's rank file of the same tp rank. A merge of the set into a
 * folder writes the adapter folder again (adapter_model.safetensors). A rank
 * folder is read back as the folder it is (its one weight file). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpc_io.h"
#include "tpc_layout.h"
#include "tpc_shard.h"
#include "tpc_util.h"

#define ADAPTER_FILE "adapter_model.safetensors"

static char *rank_name(int t, int p, int tp, int pp, const char *format)
{
	char buf[64];
	(void)tp;
	(void)pp;
	(void)format;
	snprintf(buf, sizeof(buf), "tp%02d_pp%02d", t, p);
	return tpc_strdup(buf);
}

static int write_rank(const tpc_shard_plan *sp, int r, const tpc_ckpt *ck, const char *path, const tpc_write_opts *wo,
		      tpc_err *e)
{
	(void)sp;
	(void)r;
	const tpc_format *f = tpc_format_by_name("safetensors");
	char *file = tpc_path_join(path, ADAPTER_FILE);
	int ret = !f ? tpc_err_set(e, TPC_EUSAGE, "the safetensors writer is not available in this build")
	          : file ? tpc__layout_write_file(f, false, ck, file, wo, e) : tpc_err_nomem(e);
	free(file);
	return ret;
}

static bool rank_exists(const char *path)
{
	char *file = tpc_path_join(path, ADAPTER_FILE);
	bool ok = file && tpc_exists(file);
	free(file);
	return ok;
}

/* the weight file, then the folder if that leaves it empty (companions
 * another run copied stay) */
static void remove_rank(const char *path)
{
	char *file = tpc_path_join(path, ADAPTER_FILE);
	if (file)
		unlink(file);
	free(file);
	rmdir(path);
}

static const char *const formats[] = {"safetensors", NULL};

const tpc_layout tpc_layout_peft = {
	.name = "peft", .desc = "tpTT_ppPP/ folders, each a PEFT LoRA adapter (shard ADAPTER --base BASE)",
	.formats = formats, .set_format = "peft-shards", .merged_file = ADAPTER_FILE,
	.expert_parallel = true, /* an expert's LoRA by its global name, in its EP group's folders */
	.rank_name = rank_name,
	.write_rank = write_rank, .rank_exists = rank_exists, .remove_rank = remove_rank,
	.write_extras = tpc__layout_companions_per_rank, /* the adapter's companions in every rank folder */
	.merge_extras = tpc__layout_rank0_extras,
};
