/* ds_universal.c - DeepSpeed universal checkpoints, read (see ds_universal.h;
 * the writer is ds_universal_write.c).
 *
 * Read as the model's fp32 masters (zero/NAME/fp32.pt), and with
 * TPC_OPEN_OPTIMIZER the optimizer state beside them as get_state_dict shapes
 * it (tpc_optim.h): every file's tensor is the whole parameter (stage 1/2) or
 * the whole parameter flat (stage 3), so element i of exp_avg.pt is element i
 * of fp32.pt; each is checked against the parameter's shape in the model
 * states' param_shapes. The parameters and their order come from
 * param_shapes (what the engine's param_names name the folders by), the
 * groups' hyper-parameters from zero/optimizer_state.pt. */
#include "ds_universal.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torch/torch.h"
#include "tpc_buf.h"
#include "tpc_io.h"
#include "tpc_util.h"

#define TMP "\x01" "u/"
#define LATEST_U "latest_universal"
#define OPT_STATE "zero/optimizer_state.pt"
#define MS_12 "mp_rank_00_model_states.pt"
#define MS_3 "zero_pp_rank_0_mp_rank_00_model_states.pt"
#define MAX_DIM ((int64_t)1 << 48)

static bool is_seq(const tpc_value *v)
{
	return v && (v->kind == TPC_V_LIST || v->kind == TPC_V_TUPLE);
}

static bool has_file(const char *dir, const char *name)
{
	char *p = tpc_path_join(dir, name);
	bool y = p && tpc_exists(p) && !tpc_is_dir(p);
	free(p);
	return y;
}

/* The tag folder: `path` itself when it holds zero/optimizer_state.pt, else
 * the folder `path`/latest_universal names (engine.py load_checkpoint reads
 * that file when load_universal is set). NULL (e set) when neither. */
static char *tag_dir(const char *path, tpc_err *e)
{
	if (has_file(path, OPT_STATE))
		return tpc_strdup(path);
	char *lp = tpc_path_join(path, LATEST_U), *text = NULL, *out = NULL;
	size_t len;
	if (!lp || tpc_read_file(lp, 4096, &text, &len, e)) {
		if (!lp)
			tpc_err_nomem(e);
		free(lp);
		return NULL;
	}
	while (len && isspace((unsigned char)text[len - 1]))
		text[--len] = '\0';
	if (!len || strchr(text, '/') || !strcmp(text, ".") || !strcmp(text, ".."))
		tpc_err_at(e, TPC_EINPUT, lp, NULL, "'latest_universal' must name a folder beside it (a tag such as global_step14_universal)");
	else if (!(out = tpc_path_join(path, text)))
		tpc_err_nomem(e);
	else if (!has_file(out, OPT_STATE)) {
		tpc_err_at(e, TPC_EINPUT, lp, NULL, "'latest_universal' names %s, which holds no %s", text, OPT_STATE);
		free(out);
		out = NULL;
	}
	free(lp);
	free(text);
	return out;
}

static int u_detect(const char *path, const uint8_t *head, size_t n)
{
	(void)n;
	if (head)
		return 0;
	if (has_file(path, OPT_STATE))
		return 100;
	/* beside a `latest` too (ds_to_universal writes into the save's root):
	 * the ZeRO save is what `latest` names; point at the tag folder */
	return has_file(path, LATEST_U) && !has_file(path, "latest") ? 96 : 0;
}

typedef struct uread {
	tpc_ckpt *ck;
	const char *dir;        /* the tag folder (or the label of vf) */
	const tpc_ds_universal_file *vf; /* the files as images (tests, the fuzzer), or NULL: dir's */
	size_t nvf;
	int stage;              /* 2 (stage 1 or 2) or 3 */
	bool optim;
	tpc_value *os, *ms;     /* optimizer_state.pt, the model states */
	const char *ms_name;
	const tpc_value *step3; /* stage 3: optimizer_state_dict.state[0].step */
	tpc_value *state, *groups, *model;
	size_t nfile, nparams, nmoments;
	/* stage 1/2 fp32.pt's tensor-parallel keys: cat_dim not 0 (the first
	 * such parameter), no cat_dim (a replicated one), vocab_tensor,
	 * param_n_sub_params */
	size_t ncat, nwhole, nvocab, nsub, nsps;
	char cat_first[160];
	char **keys;            /* the current group's state keys (from its first parameter) */
	size_t nkeys;
	bool keys_set;
} uread;

/* torch.load of `rel` under the tag folder: its root (caller's), tensors
 * named TMP + counter. */
static const tpc_ds_universal_file *vfile(const uread *u, const char *rel)
{
	for (size_t i = 0; i < u->nvf; i++)
		if (u->vf[i].rel && !strcmp(u->vf[i].rel, rel))
			return &u->vf[i];
	return NULL;
}

static bool u_has(const uread *u, const char *rel)
{
	return u->vf ? vfile(u, rel) != NULL : has_file(u->dir, rel);
}

static int load(uread *u, const char *rel, tpc_value **root, tpc_err *e)
{
	char *p = tpc_path_join(u->dir, rel), pre[40];
	const tpc_ds_universal_file *f = vfile(u, rel);
	int src, ret;
	*root = NULL;
	if (!p)
		return tpc_err_nomem(e);
	if (u->vf ? !f : !tpc_exists(p)) {
		ret = tpc_err_at(e, TPC_EINPUT, p, NULL, "is missing");
		free(p);
		return ret;
	}
	snprintf(pre, sizeof(pre), TMP "%zu", u->nfile++);
	if (f) {
		uint8_t *copy = tpc_malloc(f->n ? (size_t)f->n : 1);
		if (!copy)
			ret = tpc_err_nomem(e);
		else if (f->n)
			memcpy(copy, f->p, (size_t)f->n);
		ret = copy ? tpc_ckpt_add_mem(u->ck, p, copy, f->n, &src, e) : ret;
	} else {
		ret = tpc_ckpt_add_file(u->ck, p, &src, e);
	}
	if (!ret) {
		const tpc_map *m = tpc_ckpt_source(u->ck, src);
		ret = tpc__torch_open_item(u->ck, src, 0, m ? m->size : 0, p, pre, false, root, e);
	}
	free(p);
	return ret;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The state keys a parameter's folder holds: every KEY.pt but fp32 and step
 * (universal_checkpoint.py load_hp_checkpoint_state takes each "(.+).pt"),
 * sorted. */
static int folder_keys(const uread *u, const char *rel, char ***out, size_t *n, tpc_err *e)
{
	char *dir = tpc_path_join(u->dir, rel);
	DIR *d = u->vf || !dir ? NULL : opendir(dir);
	char **v = NULL;
	size_t k = 0, cap = 0, rl = strlen(rel), at = 0;
	bool oom = !dir;
	*out = NULL;
	*n = 0;
	if (!oom && !u->vf && !d) {
		int ret = tpc_err_at(e, TPC_EINPUT, dir, NULL, "the parameter's folder is missing");
		free(dir);
		return ret;
	}
	free(dir);
	for (;;) {
		const char *nm;
		struct dirent *de;
		if (oom)
			break;
		if (u->vf) { /* rel/NAME among the images */
			if (at == u->nvf)
				break;
			const char *r = u->vf[at++].rel;
			if (!r || strncmp(r, rel, rl) || r[rl] != '/' || strchr(r + rl + 1, '/'))
				continue;
			nm = r + rl + 1;
		} else {
			if (!(de = readdir(d)))
				break;
			nm = de->d_name;
		}
		size_t l = strlen(nm);
		if (l <= 3 || strcmp(nm + l - 3, ".pt") || !strcmp(nm, "fp32.pt") || !strcmp(nm, "step.pt"))
			continue;
		if (k == cap) {
			char **nv = realloc(v, (cap = cap ? cap * 2 : 4) * sizeof(*v));
			if (!(oom = !nv))
				v = nv;
		}
		if (!oom && !(oom = !(v[k] = tpc_strndup(nm, l - 3))))
			k++;
	}
	if (d)
		closedir(d);
	if (oom) {
		tpc_free_strv(v, k);
		return tpc_err_nomem(e);
	}
	if (k)
		qsort(v, k, sizeof(*v), cmp_str);
	*out = v;
	*n = k;
	return 0;
}

/* The tensor a state file holds, checked against the parameter (shape sh,
 * nd dims): stage 1/2 the dict's "param" (cat_dim and param_n_sub_params
 * must fit it: universal_checkpoint.py chunks along cat_dim), stage 3 the
 * bare flat tensor. Its index in *ix (a scratch tensor); err names `rel`. */
static int state_tensor(uread *u, const char *rel, const tpc_value *root, const int64_t *sh, int nd, int64_t *ix,
			tpc_err *e)
{
	char a[160], b[160];
	const tpc_value *t = root;
	char *p = tpc_path_join(u->dir, rel);
	int ret = 0;
	if (!p)
		return tpc_err_nomem(e);
	if (u->stage != 3) {
		const tpc_value *cd = tpc_value_get(root, "cat_dim"), *ns = tpc_value_get(root, "param_n_sub_params");
		t = tpc_value_get(root, "param");
		if (!root || root->kind != TPC_V_DICT || !t || t->kind != TPC_V_TENSOR) {
			ret = TPC_CORRUPT(e, p, -1, NULL, "holds no 'param' tensor (a stage 1/2 universal file is {'cat_dim': 0, 'param': tensor})");
			goto out;
		}
		const tpc_tensor *tt = &u->ck->t[t->ival];
		if (cd && (cd->kind != TPC_V_INT || cd->ival < 0 || cd->ival >= (tt->ndim ? tt->ndim : 1))) {
			ret = TPC_CORRUPT(e, p, -1, NULL, "cat_dim %s is out of range for the %d-D parameter %s",
					  cd->kind == TPC_V_INT ? (snprintf(a, sizeof(a), "%lld", (long long)cd->ival), a) : tpc_vkind_name(cd->kind),
					  tt->ndim, tpc_shape_str(tt, b, sizeof(b)));
			goto out;
		}
		if (ns && (ns->kind != TPC_V_INT || ns->ival < 1 || (tt->ndim && tt->shape[cd ? cd->ival : 0] % ns->ival))) {
			ret = TPC_CORRUPT(e, p, -1, NULL, "param_n_sub_params does not divide the parameter %s along cat_dim",
					  tpc_shape_str(tt, b, sizeof(b)));
			goto out;
		}
	}
	if (!t || t->kind != TPC_V_TENSOR) {
		ret = TPC_CORRUPT(e, p, -1, NULL, "does not hold a tensor (a stage 3 universal file is the parameter's flat tensor)");
		goto out;
	}
	const tpc_tensor *tt = &u->ck->t[t->ival];
	uint64_t want = 1;
	for (int d = 0; d < nd; d++)
		want *= (uint64_t)sh[d];
	bool fits = u->stage == 3 ? tt->ndim == 1 && tt->numel == want
				  : tt->ndim == nd && !memcmp(tt->shape, sh, (size_t)nd * sizeof(int64_t));
	if (!fits) {
		tpc_tensor ref;
		memset(&ref, 0, sizeof(ref));
		ref.ndim = nd;
		ref.shape = (int64_t *)sh;
		const tpc_value *vt = u->stage == 3 ? NULL : tpc_value_get(root, "vocab_tensor");
		ret = TPC_CORRUPT(e, p, -1, NULL, "%s %s is not the parameter's shape %s (param_shapes of %s)%s",
				  u->stage == 3 ? "the flat tensor" : "param", tpc_shape_str(tt, a, sizeof(a)),
				  tpc_shape_str(&ref, b, sizeof(b)), u->ms_name,
				  u->stage == 3 ? ": stage 3 keeps each parameter flat, numel elements"
				  : vt && vt->kind == TPC_V_BOOL && vt->ival
					  ? ": a vocab_tensor, its padding rows stripped (ds_to_universal.py merge_tp_slices); the padded parameter is not supported"
					  : "");
		goto out;
	}
	*ix = t->ival;
out:
	free(p);
	return ret;
}

/* Add scratch tensor ix as `name`, shaped sh (stage 3: the flat file's
 * elements in C order). Its new index in *out. */
static int add_as(uread *u, int64_t ix, const char *name, const int64_t *sh, int nd, int64_t *out, tpc_err *e)
{
	tpc_tensor flat;
	const tpc_tensor *src = &u->ck->t[ix];
	if (u->stage == 3 && nd != 1) {
		memset(&flat, 0, sizeof(flat));
		if (tpc_tensor_init_flat(&flat, nd, sh, src, 1))
			return TPC_CORRUPT(e, NULL, -1, name, "cannot view the flat tensor as the parameter's shape (not a contiguous, whole-byte tensor)");
		*out = tpc_ckpt_add_copy(u->ck, name, &flat, e);
		tpc_tensor_release(&flat);
	} else {
		*out = tpc_ckpt_add_copy(u->ck, name, src, e);
	}
	return *out < 0 ? (int)*out : 0;
}

static int tset(tpc_value *d, const char *k, tpc_value *v)
{
	return tpc_value_set(d, tpc_value_str(k, strlen(k)), v);
}

/* One parameter: fp32.pt as the model's tensor, with the optimizer its
 * state files beside it. */
static int one_param(uread *u, const char *name, const tpc_value *shape, tpc_value *names, tpc_err *e)
{
	int64_t sh[TPC_MAX_NDIM], ix, at;
	int nd = 0, ret;
	char rel[1200], nb[1200];
	tpc_value *root = NULL;
	char **keys = NULL;
	size_t nk = 0;
	if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") || strlen(name) > 1000)
		return TPC_CORRUPT(e, NULL, -1, name, "param_shapes of %s names a parameter no folder can be named after", u->ms_name);
	if (!tpc__torch_size(shape, sh, &nd, MAX_DIM))
		return TPC_CORRUPT(e, NULL, -1, name, "param_shapes of %s gives it no shape", u->ms_name);
	snprintf(rel, sizeof(rel), "zero/%s/fp32.pt", name);
	snprintf(nb, sizeof(nb), "%s%s", u->optim ? "model." : "", name);
	if ((ret = load(u, rel, &root, e)) || (ret = state_tensor(u, rel, root, sh, nd, &ix, e)) ||
	    (ret = add_as(u, ix, nb, sh, nd, &at, e)))
		goto out;
	u->nparams++;
	if (u->stage != 3) { /* state_tensor checked their kinds */
		const tpc_value *cd = tpc_value_get(root, "cat_dim"), *vt = tpc_value_get(root, "vocab_tensor"), *ns = tpc_value_get(root, "param_n_sub_params");
		const tpc_value *sps = tpc_value_get(root, "sub_param_shape");
		if (cd && cd->ival && !u->ncat++)
			snprintf(u->cat_first, sizeof(u->cat_first), "%s: %lld", name, (long long)cd->ival);
		u->nwhole += !cd && !sps;
		u->nsps += sps != NULL;
		u->nvocab += vt && vt->kind == TPC_V_BOOL && vt->ival;
		u->nsub += ns && ns->ival > 1;
	}
	if (!u->optim)
		goto out;
	tpc_value *sd = tpc_value_new(TPC_V_DICT);
	if (!sd || tset(u->state, name, sd) || tpc_value_append(names, tpc_value_str(name, strlen(name))) ||
	    tset(u->model, name, tpc_value_tensor(at))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	snprintf(rel, sizeof(rel), "zero/%s", name);
	if ((ret = folder_keys(u, rel, &keys, &nk, e)))
		goto out;
	/* every parameter of a group has the same state keys: base_optimizer.py
	 * load_hp_checkpoint_state_from_checkpoint_dir maps them onto the group's
	 * one flat state together */
	if (!u->keys_set) {
		u->keys = keys;
		u->nkeys = nk;
		u->keys_set = true;
		keys = NULL;
	}
	for (size_t k = 0; keys && k < u->nkeys + nk; k++) {
		bool mine = k >= u->nkeys; /* a key of this folder, else of the group's first */
		const char *want = mine ? keys[k - u->nkeys] : u->keys[k];
		const char *const *in = mine ? (const char *const *)u->keys : (const char *const *)keys;
		size_t nin = mine ? u->nkeys : nk, j = 0;
		while (j < nin && strcmp(in[j], want))
			j++;
		if (j < nin)
			continue;
		snprintf(rel, sizeof(rel), "zero/%s/%s.pt", name, want);
		char *p = tpc_path_join(u->dir, rel);
		ret = TPC_CORRUPT(e, p, -1, NULL, mine ? "is there, but the group's other parameters have no %s.pt (DeepSpeed's loader gives every parameter of a group the same state keys)"
						     : "is missing: the group's other parameters have %s.pt (DeepSpeed's loader gives every parameter of a group the same state keys)",
				  want);
		free(p);
		goto out;
	}
	for (size_t k = 0; k < u->nkeys && !ret; k++) {
		tpc_value_unref(root);
		snprintf(rel, sizeof(rel), "zero/%s/%s.pt", name, u->keys[k]);
		snprintf(nb, sizeof(nb), "optim.state.%s.%s", name, u->keys[k]);
		if (!(ret = load(u, rel, &root, e)) && !(ret = state_tensor(u, rel, root, sh, nd, &ix, e)) &&
		    !(ret = add_as(u, ix, nb, sh, nd, &at, e))) {
			u->nmoments++;
			if (tset(sd, u->keys[k], tpc_value_tensor(at)))
				ret = tpc_err_nomem(e);
		}
	}
	if (ret)
		goto out;
	/* step: stage 1/2 step.pt (the group's step as saved, a tensor or a
	 * number: ds_to_universal.py dump_param_fragment keeps it whole); stage
	 * 3 the one in optimizer_state.pt */
	tpc_value_unref(root);
	root = NULL;
	snprintf(rel, sizeof(rel), "zero/%s/step.pt", name);
	snprintf(nb, sizeof(nb), "optim.state.%s.step", name);
	const tpc_value *st = u->step3;
	if (u->stage != 3 && u_has(u, rel)) {
		if ((ret = load(u, rel, &root, e)))
			goto out;
		st = root;
	}
	if (st && st->kind == TPC_V_TENSOR) {
		const tpc_tensor *t = &u->ck->t[st->ival];
		if (t->numel != 1) {
			char *p = tpc_path_join(u->dir, u->stage == 3 ? OPT_STATE : rel), a[160];
			ret = TPC_CORRUPT(e, p, -1, NULL, "step is a tensor of %s, not a scalar", tpc_shape_str(t, a, sizeof(a)));
			free(p);
			goto out;
		}
		at = tpc_ckpt_add_copy(u->ck, nb, t, e);
		if (at < 0 || tset(sd, "step", tpc_value_tensor(at)))
			ret = at < 0 ? (int)at : tpc_err_nomem(e);
	} else if (st && (st->kind == TPC_V_INT || st->kind == TPC_V_FLOAT)) {
		if (tset(sd, "step", tpc_value_ref((tpc_value *)st)))
			ret = tpc_err_nomem(e);
	} else if (st) {
		ret = TPC_CORRUPT(e, NULL, -1, nb, "step is a %s, not a number or a scalar tensor", tpc_vkind_name(st->kind));
	}
out:
	tpc_free_strv(keys, nk);
	tpc_value_unref(root);
	return ret;
}

/* A param group: its hyper-parameters (params left out), the parameters
 * filled in as they are read, keyed gi as DCP gives groups back. */
static tpc_value *new_group(uread *u, const tpc_value *g, size_t gi, tpc_value **names)
{
	tpc_value *d = tpc_value_new(TPC_V_DICT);
	*names = tpc_value_new(TPC_V_LIST);
	int bad = !d || !*names;
	for (size_t k = 0; !bad && k < g->n; k++)
		if (!(g->keys[k]->kind == TPC_V_STR && !strcmp(g->keys[k]->str, "params")))
			bad = tpc_value_set(d, tpc_value_ref(g->keys[k]), tpc_value_ref(g->items[k]));
	bad = bad || tset(d, "params", tpc_value_ref(*names));
	bad = bad || tpc_value_set(u->groups, tpc_value_int((int64_t)gi), tpc_value_ref(d));
	tpc_value_unref(d);
	return bad ? NULL : *names;
}

/* Every parameter, group by group: stage 1/2 param_shapes[i] is the
 * optimizer's group i (engine.py _get_zero_param_shapes walks the bit16
 * groups; base_optimizer.py zips them with optimizer_state.pt's
 * param_groups); stage 3 one group, every sub-group's parameters in order
 * (stage3.py reads param group 0 and state[0] only). */
static int read_params(uread *u, const tpc_value *pg, const tpc_value *shapes, tpc_err *e)
{
	int ret = 0;
	char *osp = tpc_path_join(u->dir, OPT_STATE);
	if (!osp)
		return tpc_err_nomem(e);
	if (!is_seq(pg) || !pg->n) {
		ret = TPC_CORRUPT(e, osp, -1, NULL, "has no param_groups list");
	} else if (u->stage == 3 && pg->n != 1) {
		ret = tpc_err_at(e, TPC_EINPUT, osp, NULL,
				 "a stage 3 universal checkpoint with %zu param groups: DeepSpeed's stage 3 loader (stage3.py load_hp_checkpoint_state_from_checkpoint_dir_stage3) restores group 0 only",
				 pg->n);
	} else if (u->stage != 3 && pg->n != shapes->n) {
		ret = tpc_err_at(e, TPC_EINPUT, osp, NULL, "has %zu param groups, param_shapes of %s %zu: they are zipped group by group",
				 pg->n, u->ms_name, shapes->n);
	}
	for (size_t gi = 0; !ret && gi < pg->n; gi++) {
		const tpc_value *g = pg->items[gi];
		tpc_value *names = NULL;
		if (g->kind != TPC_V_DICT) {
			ret = TPC_CORRUPT(e, osp, -1, NULL, "param_groups[%zu] is not a dict", gi);
			break;
		}
		if (u->optim && !new_group(u, g, gi, &names)) {
			tpc_value_unref(names);
			ret = tpc_err_nomem(e);
			break;
		}
		tpc_free_strv(u->keys, u->nkeys);
		u->keys = NULL;
		u->nkeys = 0;
		u->keys_set = false;
		for (size_t s = u->stage == 3 ? 0 : gi; s < (u->stage == 3 ? shapes->n : gi + 1) && !ret; s++) {
			const tpc_value *d = shapes->items[s];
			if (d->kind != TPC_V_DICT) {
				ret = TPC_CORRUPT(e, NULL, -1, NULL, "param_shapes[%zu] of %s is not a dict", s, u->ms_name);
				break;
			}
			for (size_t i = 0; i < d->n && !ret; i++)
				ret = d->keys[i]->kind != TPC_V_STR
					      ? TPC_CORRUPT(e, NULL, -1, NULL, "param_shapes[%zu] of %s has a key that is not a name", s, u->ms_name)
					      : one_param(u, d->keys[i]->str, d->items[i], names, e);
		}
		tpc_value_unref(names);
	}
	free(osp);
	return ret;
}

/* The tree's tensor leaves, built before the scratch tensors went, to the
 * indices their names have now (model.NAME, optim.state.NAME.KEY). */
static int reindex(uread *u, tpc_err *e)
{
	char nb[1200];
	for (size_t i = 0; i < u->model->n; i++) {
		snprintf(nb, sizeof(nb), "model.%s", u->model->keys[i]->str);
		if ((u->model->items[i]->ival = tpc_ckpt_find(u->ck, nb)) < 0)
			return tpc_err_at(e, TPC_EINPUT, NULL, nb, "is not among the tensors read");
	}
	for (size_t i = 0; i < u->state->n; i++) {
		tpc_value *sd = u->state->items[i];
		for (size_t k = 0; k < sd->n; k++) {
			if (sd->items[k]->kind != TPC_V_TENSOR)
				continue;
			snprintf(nb, sizeof(nb), "optim.state.%s.%s", u->state->keys[i]->str, sd->keys[k]->str);
			if ((sd->items[k]->ival = tpc_ckpt_find(u->ck, nb)) < 0)
				return tpc_err_at(e, TPC_EINPUT, NULL, nb, "is not among the tensors read");
		}
	}
	return 0;
}

/* What inspect says: the layout, the stage, what was read. */
static void set_about(uread *u)
{
	tpc_buf b = TPC_BUF_INIT;
	const tpc_value *v = tpc_value_get(u->os, "ds_version");
	if (!v || v->kind != TPC_V_STR) /* stage 3's optimizer_state_dict may hold none */
		v = tpc_value_get(u->ms, "ds_version");
	tpc_buf_addf(&b, "DeepSpeed universal checkpoint (ds_to_universal.py layout for ZeRO stage %s), deepspeed %s",
		     u->stage == 3 ? "3" : "1/2", v && v->kind == TPC_V_STR ? v->str : "(no ds_version)");
	tpc_buf_addf(&b, "\n%zu parameters from zero/NAME/fp32.pt (the fp32 masters, whole), in the order of param_shapes in %s",
		     u->nparams, u->ms_name);
	if (u->ncat || u->nwhole || u->nvocab || u->nsub || u->nsps)
		tpc_buf_addf(&b, "\ntensor-parallel cuts (universal_checkpoint.py): cat_dim not 0 for %zu parameter%s%s%s%s, "
				 "no cat_dim (replicated) %zu, vocab_tensor %zu, param_n_sub_params %zu, sub_param_shape %zu",
			     u->ncat, u->ncat == 1 ? "" : "s", u->ncat ? " (" : "", u->cat_first, u->ncat ? ", ...)" : "", u->nwhole,
			     u->nvocab, u->nsub, u->nsps);
	if (u->optim)
		tpc_buf_addf(&b, "\noptimizer state (read): %zu moments shaped as their parameters, from zero/NAME/KEY.pt", u->nmoments);
	else
		tpc_buf_addf(&b, "\noptimizer state (not read): zero/NAME/exp_avg.pt, exp_avg_sq.pt, step (--optimizer reads it)");
	tpc_ckpt_set_about(u->ck, &b);
}

/* A model-parallel save: another mp rank's model states beside rank 0's */
static bool mp_other(const char *name)
{
	const char *m = strstr(name, "mp_rank_");
	return m && strstr(name, "_model_states.pt") && strncmp(m + 8, "00_", 3);
}

static char *other_mp_rank(const uread *u)
{
	DIR *d = u->vf ? NULL : opendir(u->dir);
	char *out = NULL;
	for (size_t i = 0; u->vf && !out && i < u->nvf; i++)
		if (u->vf[i].rel && mp_other(u->vf[i].rel))
			out = tpc_strdup(u->vf[i].rel);
	for (struct dirent *de; d && !out && (de = readdir(d));)
		if (mp_other(de->d_name))
			out = tpc_strdup(de->d_name);
	if (d)
		closedir(d);
	return out;
}

/* The tree get_state_dict saves, from what was read */
static int set_tree(uread *u, tpc_err *e)
{
	tpc_value *root = tpc_value_new(TPC_V_DICT), *opt = tpc_value_new(TPC_V_DICT);
	int bad = !root || !opt || tset(opt, "state", tpc_value_ref(u->state)) ||
		  tset(opt, "param_groups", tpc_value_ref(u->groups)) || tset(root, "model", tpc_value_ref(u->model));
	if (!bad) {
		bad = tset(root, "optim", opt);
		opt = NULL;
	}
	tpc_value_unref(opt);
	if (bad) {
		tpc_value_unref(root);
		return tpc_err_nomem(e);
	}
	u->ck->root = root;
	return 0;
}

/* Everything once u's tag folder (or images) and options are set. */
static int read_all(uread *u, tpc_err *e)
{
	tpc_ckpt *ck = u->ck;
	size_t first = ck->n;
	uint64_t hidden = ck->hidden_tensors;
	char *hidden_note = ck->hidden_note, *mp = NULL;
	int ret = 0;
	ck->hidden_note = NULL;
	if ((mp = other_mp_rank(u))) {
		ret = tpc_err_at(e, TPC_EINPUT, u->dir, NULL,
				 "a model-parallel universal checkpoint (%s): param_shapes give each rank's slices, not the whole parameters the zero/ files hold; not supported",
				 mp);
		goto out;
	}
	if ((ret = load(u, OPT_STATE, &u->os, e)))
		goto out;
	if (!u->os || u->os->kind != TPC_V_DICT) {
		char *p = tpc_path_join(u->dir, OPT_STATE);
		ret = TPC_CORRUPT(e, p, -1, NULL, "does not hold a dict");
		free(p);
		goto out;
	}
	/* stage 3's is the whole optimizer_state_dict of rank 0 */
	const tpc_value *osd = tpc_value_get(u->os, "optimizer_state_dict"), *pg = tpc_value_get(u->os, "param_groups");
	u->stage = osd ? 3 : 2;
	if (osd) {
		const tpc_value *st = tpc_value_get(osd, "state"), *s0 = NULL;
		for (size_t i = 0; st && st->kind == TPC_V_DICT && i < st->n && !s0; i++)
			if (st->keys[i]->kind == TPC_V_INT && st->keys[i]->ival == 0)
				s0 = st->items[i];
		u->step3 = tpc_value_get(s0, "step");
		pg = tpc_value_get(osd, "param_groups");
	}
	u->ms_name = u->stage == 3 ? MS_3 : MS_12;
	if ((ret = load(u, u->ms_name, &u->ms, e)))
		goto out;
	const tpc_value *shapes = tpc_value_get(u->ms, "param_shapes");
	if (!is_seq(shapes)) {
		char *p = tpc_path_join(u->dir, u->ms_name);
		ret = TPC_CORRUPT(e, p, -1, NULL, "param_shapes is not a list of dicts (not a DeepSpeed model-states file)");
		free(p);
		goto out;
	}
	u->state = tpc_value_new(TPC_V_DICT);
	u->groups = tpc_value_new(TPC_V_DICT);
	u->model = tpc_value_new(TPC_V_DICT);
	if (!u->state || !u->groups || !u->model) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = read_params(u, pg, shapes, e)) || (ret = tpc_ckpt_drop_prefixed(ck, first, TMP, e)) ||
	    (u->optim && (ret = reindex(u, e))))
		goto out;
	/* the tensors of optimizer_state.pt (stage 3's step) are not the model's */
	tpc_value_unref(ck->root);
	ck->root = NULL;
	if (u->optim && (ret = set_tree(u, e)))
		goto out;
	set_about(u);
	free(ck->format);
	if (!(ck->format = tpc_strdup("ds-universal")))
		ret = tpc_err_nomem(e);
	else /* every tensor inside its file (a truncated state file says so here) */
		ret = tpc_ckpt_validate(ck, e);
out:
	/* tensors inside DeepSpeed's own objects (the loss scaler) are no one's */
	ck->hidden_tensors = hidden;
	free(ck->hidden_note);
	ck->hidden_note = hidden_note;
	tpc_free_strv(u->keys, u->nkeys);
	tpc_value_unref(u->os);
	tpc_value_unref(u->ms);
	tpc_value_unref(u->state);
	tpc_value_unref(u->groups);
	tpc_value_unref(u->model);
	free(mp);
	return ret;
}

static int u_open(tpc_ckpt *ck, const char *path, const tpc_open_opts *o, tpc_err *e)
{
	uread u;
	int ret;
	memset(&u, 0, sizeof(u));
	if (o && o->select)
		return tpc_err_set(e, TPC_EUSAGE, "--select is not supported for DeepSpeed universal checkpoints (--optimizer reads the optimizer state)");
	char *dir = tag_dir(path, e);
	if (!dir)
		return e->code ? e->code : TPC_EINPUT;
	u.ck = ck;
	u.dir = dir;
	u.optim = o && (o->flags & TPC_OPEN_OPTIMIZER);
	ret = read_all(&u, e);
	free(dir);
	return ret;
}

int tpc_ds_universal_from_buffers(tpc_ckpt *ck, const tpc_ds_universal_file *files, size_t n, bool optim,
				  const char *label, tpc_err *e)
{
	uread u;
	memset(&u, 0, sizeof(u));
	u.ck = ck;
	u.dir = label;
	u.vf = files;
	u.nvf = n;
	u.optim = optim;
	return read_all(&u, e);
}

int tpc__ds_universal_write(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *path,
			    const tpc_write_opts *o, tpc_err *e);

const tpc_format tpc_fmt_ds_universal = {
	.name = "ds-universal",
	.desc = "DeepSpeed universal checkpoint (ds_to_universal.py: zero/NAME/fp32.pt, exp_avg.pt, ...), its optimizer state read and written",
	.detect = u_detect, .open = u_open, .write = tpc__ds_universal_write,
	.sharded = true,
	.optimizer_only = true,
};
