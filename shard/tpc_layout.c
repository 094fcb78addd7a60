/* tpc_layout.c - the layout table and the hooks' defaults; see tpc_layout.h. */
#include "tpc_layout.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpc_io.h"
#include "tpc_shard.h"
#include "tpc_util.h"

/* The table: a new layout is one line here and one file. The first entry is
 * the default. Detection of sets without a manifest asks them in this order. */
static const tpc_layout *const layouts[] = {
	&tpc_layout_tpconv, &tpc_layout_oslo, &tpc_layout_trtllm, &tpc_layout_hf, &tpc_layout_vllm,
	&tpc_layout_megatron, &tpc_layout_dcp,
};
#define NLAYOUTS (sizeof(layouts) / sizeof(layouts[0]))

size_t tpc_layout_count(void)
{
	return NLAYOUTS;
}

const tpc_layout *tpc_layout_at(size_t i)
{
	return i < NLAYOUTS ? layouts[i] : NULL;
}

const tpc_layout *tpc_layout_default(void)
{
	return layouts[0];
}

const tpc_layout *tpc_layout_by_name(const char *name)
{
	for (size_t i = 0; name && i < NLAYOUTS; i++)
		if (!strcmp(layouts[i]->name, name))
			return layouts[i];
	return NULL;
}

const char *tpc_layout_names(char *buf, size_t n)
{
	size_t off = 0;
	if (!n)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; i < NLAYOUTS; i++) {
		int k = snprintf(buf + off, n - off, "%s%s", i ? ", " : "", layouts[i]->name);
		if (k < 0 || (size_t)k >= n - off)
			break;
		off += (size_t)k;
	}
	return buf;
}

const tpc_layout *tpc_layout_detect_foreign(const char *dir)
{
	const tpc_layout *found = NULL;
	size_t best = NLAYOUTS;
	for (size_t i = 0; i < NLAYOUTS; i++)
		if (layouts[i]->detect_dir && layouts[i]->detect_dir(dir))
			return layouts[i];
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		for (size_t i = 0; i < best; i++) {
			if (layouts[i]->is_rank_file && layouts[i]->is_rank_file(de->d_name)) {
				found = layouts[i];
				best = i;
				break;
			}
		}
	}
	if (d)
		closedir(d);
	return found;
}

int tpc_layout_open_rank(const tpc_layout *l, const char *path, const tpc_layout_rank_ctx *c, tpc_ckpt *ck,
			 tpc_err *e)
{
	if (l->open_rank)
		return l->open_rank(path, c, ck, e);
	return tpc_ckpt_open(ck, path, NULL, e);
}

bool tpc_layout_rank_exists(const tpc_layout *l, const char *path)
{
	return l->rank_exists ? l->rank_exists(path) : tpc_exists(path);
}

void tpc_layout_remove_rank(const tpc_layout *l, const char *path)
{
	if (l->remove_rank)
		l->remove_rank(path);
	else
		unlink(path);
}

const char *tpc_layout_merge_extras(const tpc_layout *l, const char *dir, const char *rank0, tpc_extras_opts *xo)
{
	if (l->merge_extras)
		return l->merge_extras(dir, rank0, xo);
	return l->companions_at_top ? dir : NULL;
}

int tpc__layout_copy_companions(const tpc_shard_plan *sp, const char *dir, const tpc_shard_opts *o,
				const char *config_merge, bool only_config, tpc_err *e)
{
	(void)sp;
	if (!o->config_dir)
		return 0;
	tpc_extras_opts xo = {o->force ? TPC_OUT_FORCE : 0, NULL, NULL, NULL, NULL, NULL};
	xo.config_merge = config_merge;
	xo.config_marker = o->config_marker;
	if (only_config)
		xo.only = "config.json";
	/* what the input set's layout added, and once dequantized while sharding
	 * quantization_config (loaders must not read the weights as quantized) */
	const char *drop[16] = {NULL};
	size_t nd = 0;
	for (const char *const *d = o->config_drop; d && *d && nd < 14; d++)
		drop[nd++] = *d;
	if (o->dequantized)
		drop[nd++] = "quantization_config";
	xo.config_drop = nd ? drop : NULL; /* none: config.json is copied byte for byte */
	return tpc_extras_copy(o->config_dir, dir, &xo, NULL, e);
}
