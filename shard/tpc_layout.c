/* tpc_layout.c - the layout table and the hooks' defaults; see tpc_layout.h. */
#include "tpc_layout.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpc_family.h"
#include "tpc_io.h"
#include "tpc_shard.h"
#include "tpc_util.h"

/* The table: a new layout is one line here and one file. The first entry is
 * the default. Detection of sets without a manifest asks them in this order. */
static const tpc_layout *const layouts[] = {
	&tpc_layout_tpconv, &tpc_layout_oslo, &tpc_layout_trtllm, &tpc_layout_hf, &tpc_layout_vllm,
	&tpc_layout_megatron, &tpc_layout_megatron_dist, &tpc_layout_dcp, &tpc_layout_hf_mapping, &tpc_layout_peft,
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

char *tpc_layout_rank_name(const tpc_layout *l, int t, int p, int tp, int pp, int ep_rank, const char *format)
{
	char buf[128];
	if (l->rank_name_ep)
		return l->rank_name_ep(t, p, tp, pp, ep_rank, format);
	if (l->rank_name)
		return l->rank_name(t, p, tp, pp, format);
	snprintf(buf, sizeof(buf), l->rank_fmt, t, p);
	return tpc_strdup(buf);
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
			int t, p;
			if (layouts[i]->parse_rank_file && layouts[i]->parse_rank_file(de->d_name, &t, &p)) {
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
	tpc_extras_opts xo;
	const char *drop[16] = {NULL};
	tpc__layout_companion_opts(o, config_merge, only_config, &xo, drop, 16);
	return tpc_extras_copy(o->config_dir, dir, &xo, NULL, e);
}

void tpc__layout_companion_opts(const tpc_shard_opts *o, const char *config_merge, bool only_config,
				tpc_extras_opts *xo, const char **drop, size_t cap)
{
	size_t nd = 0;
	memset(xo, 0, sizeof(*xo));
	xo->flags = o->force ? TPC_OUT_FORCE : 0;
	xo->config_merge = config_merge;
	xo->config_marker = o->config_marker;
	xo->config_from = o->config_from;
	if (only_config)
		xo->only = "config.json";
	/* a reshard: what the input set's layout added to the model's config */
	for (const char *const *d = o->config_drop; d && *d && nd + 2 < cap; d++)
		drop[nd++] = *d;
	/* dequantized while sharding: loaders must not read the weights as quantized */
	if (o->dequantized)
		drop[nd++] = "quantization_config";
	drop[nd] = NULL;
	xo->config_drop = nd ? drop : NULL;
}

bool tpc__layout_listed(const tpc_layout_rank_ctx *c, const char *name)
{
	for (size_t i = 0; c->names && i < c->nnames; i++)
		if (!strcmp(c->names[i], name))
			return true;
	return false;
}

bool tpc__layout_max_ranks(const char *dir, bool (*parse)(const char *name, int *t, int *p), int *maxt, int *maxp)
{
	bool any = false;
	*maxt = *maxp = -1;
	DIR *d = dir ? opendir(dir) : NULL;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		int t, p;
		if (parse(de->d_name, &t, &p)) {
			any = true;
			*maxt = t > *maxt ? t : *maxt;
			*maxp = p > *maxp ? p : *maxp;
		}
	}
	if (d)
		closedir(d);
	return any;
}

void tpc__layout_unlink_if(const char *dir, bool (*match)(const char *name, const void *ctx), const void *ctx)
{
	DIR *d = dir ? opendir(dir) : NULL;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!match(de->d_name, ctx))
			continue;
		char *f = tpc_path_join(dir, de->d_name);
		if (f)
			unlink(f);
		free(f);
	}
	if (d)
		closedir(d);
}

int tpc__layout_write_file(const tpc_format *f, bool part, const tpc_ckpt *ck, const char *path,
			   const tpc_write_opts *wo, tpc_err *e)
{
	char *dir = tpc_path_dir(path);
	if (!dir)
		return tpc_err_nomem(e);
	int ret = tpc_mkdirs(dir, e);
	free(dir);
	if (ret)
		return ret;
	return part ? f->write_part(ck, NULL, 0, path, wo, e) : f->write(ck, NULL, 0, path, wo, e);
}

int tpc__layout_add_copy(tpc_ckpt *ck, const char *name, const tpc_tensor *t, tpc_err *e)
{
	tpc_tensor c;
	if (tpc_tensor_copy(&c, t))
		return tpc_err_nomem(e);
	int64_t ix = tpc_ckpt_add_copy(ck, name, &c, e);
	tpc_tensor_release(&c);
	return ix < 0 ? (int)ix : 0;
}

/* ---- renaming by the family tables (trtllm, vllm) ---- */

bool tpc__layout_stacked(const tpc_tensor_row *w, tpc_eco eco)
{
	return w->name[TPC_ECO_HF] && w->name[eco] && strstr(w->name[TPC_ECO_HF], "{E}") && !strstr(w->name[eco], "{E}");
}

int tpc__layout_group(const tpc_family *f, tpc_eco eco, const tpc_tensor_row *w, const tpc_tensor_row **g)
{
	const char *p = w->name[eco], *h = p ? strchr(p, '#') : NULL;
	int n = 0;
	if (!p)
		return 0;
	if (!h) {
		g[0] = w;
		return 1;
	}
	size_t stem = (size_t)(h - p);
	memset(g, 0, TPC_LAYOUT_MAXG * sizeof(*g));
	for (const tpc_tensor_row *r = f->tensors; r->role; r++) {
		const char *q = r->name[eco];
		if (q && !strncmp(q, p, stem) && q[stem] == '#' && q[stem + 1] >= '0' && q[stem + 1] < '0' + TPC_LAYOUT_MAXG) {
			g[q[stem + 1] - '0'] = r;
			n++;
		}
	}
	for (int k = 0; k < n; k++)
		if (!g[k])
			return 0;
	return n;
}

/* Rank q's tensor of row w (layer l, expert x), or NULL. */
static const tpc_tensor *find_row(const tpc_ckpt *q, const tpc_tensor_row *w, int64_t l, int64_t x, bool bias)
{
	char nm[512];
	int64_t i = tpc_family_name(w, TPC_ECO_HF, l, x, bias, nm, sizeof(nm), NULL) ? tpc_ckpt_find(q, nm) : -1;
	return i >= 0 ? &q->t[i] : NULL;
}

int tpc__layout_fuse(const tpc_ckpt *q, const tpc_tensor_row *const *g, int n, int64_t l, int64_t x, bool bias,
		     tpc_tensor *out)
{
	tpc_tensor parts[TPC_LAYOUT_MAXG];
	for (int k = 0; k < n; k++) {
		const tpc_tensor *p = find_row(q, g[k], l, x, bias);
		if (!p)
			return -1;
		parts[k] = *p;
	}
	return n == 1 ? tpc_tensor_copy(out, &parts[0]) : tpc_tensor_init_cat(out, parts, n, 0);
}

/* One stacked tensor: every expert of layer l rank q holds for the rows g[0..n). */
static int stack_group(const tpc_family *f, const tpc_ckpt *q, const tpc_tensor_row *const *g, int n, int64_t l,
		       const char *nm, tpc_ckpt *out, tpc_err *e)
{
	int64_t top = -1;
	int ne = 0, ret = 0;
	for (size_t i = 0; i < q->n; i++) {
		int64_t ll, x;
		if (tpc_family_classify(f, TPC_ECO_HF, q->t[i].name, &ll, &x, NULL) == g[0] && ll == l && x > top)
			top = x;
	}
	if (top < 0)
		return 0;
	tpc_tensor *each = tpc_calloc((size_t)(top + 1), sizeof(*each)), st;
	if (!each)
		return tpc_err_nomem(e);
	for (int64_t x = 0; x <= top && !ret; x++) {
		if (!find_row(q, g[0], l, x, false))
			continue; /* an expert this rank does not hold */
		if (tpc__layout_fuse(q, g, n, l, x, false, &each[ne]))
			ret = tpc_err_set(e, TPC_EINPUT, "expert %lld of layer %lld lacks a part of %s", (long long)x, (long long)l, nm);
		else
			ne++;
	}
	if (!ret && tpc_tensor_init_stack(&st, each, ne))
		ret = tpc_err_set(e, TPC_EINPUT, "cannot stack the experts of %s (their shapes differ)", nm);
	else if (!ret) {
		ret = tpc__layout_add_copy(out, nm, &st, e);
		tpc_tensor_release(&st);
	}
	for (int i = 0; i < ne; i++)
		tpc_tensor_release(&each[i]);
	free(each);
	return ret;
}

int tpc__layout_add_stacked(const tpc_family *f, tpc_eco eco, const tpc_ckpt *q, int64_t l, int64_t local,
			    tpc_ckpt *out, tpc_err *e)
{
	int ret = 0;
	for (const tpc_tensor_row *w = f->tensors; w->role && !ret; w++) {
		const tpc_tensor_row *g[TPC_LAYOUT_MAXG];
		char nm[512];
		int part, n = tpc__layout_stacked(w, eco) ? tpc__layout_group(f, eco, w, g) : 0;
		if (n && g[0] == w && tpc_family_name(w, eco, local, -1, false, nm, sizeof(nm), &part))
			ret = stack_group(f, q, g, n, l, nm, out, e);
	}
	return ret;
}

int tpc__layout_companions_per_rank(const struct tpc_shard_plan *sp, const char *dir, const struct tpc_shard_opts *o,
				    tpc_err *e)
{
	int nr = sp->tp * sp->pp, ret = 0;
	for (int r = 0; r < nr && !ret; r++) {
		char *sub = tpc_path_join(dir, sp->rank_file[r]);
		ret = sub ? tpc__layout_copy_companions(sp, sub, o, NULL, false, e) : tpc_err_nomem(e);
		free(sub);
	}
	return ret;
}

const char *tpc__layout_rank0_extras(const char *dir, const char *rank0, tpc_extras_opts *xo)
{
	(void)dir;
	(void)xo;
	return rank0 && tpc_is_dir(rank0) ? rank0 : NULL;
}
