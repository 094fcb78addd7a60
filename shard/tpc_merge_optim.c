/* tpc_merge_optim.c - a shard set's optimizer state joined as its
 * parameters are; see tpc_merge_optim.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_buf.h"
#include "tpc_layout.h"
#include "tpc_merge_optim.h"
#include "tpc_shard_optim.h"
#include "tpc_util.h"

/* the state keys as the reader names them (optim.state.NAME.KEY) */
static const char *const keys[TPC_MERGE_OPTIM_KEYS] = {"fp32_param", "exp_avg", "exp_avg_sq"};

void tpc_merge_optim_init(tpc_merge_optim *mo)
{
	memset(mo, 0, sizeof(*mo));
	tpc_ckpt_init(&mo->ck);
}

void tpc_merge_optim_release(tpc_merge_optim *mo)
{
	if (!mo)
		return;
	tpc__return_sources(&mo->ck); /* borrowed from the merges */
	tpc_ckpt_release(&mo->ck);
	for (int k = 0; k < TPC_MERGE_OPTIM_KEYS; k++)
		if (mo->opened[k])
			tpc_merge_release(&mo->state[k]);
	tpc_merge_optim_init(mo);
}

static const tpc_value *arg(const tpc_value *args, const char *k)
{
	return args && args->kind == TPC_V_CALL && args->n >= 3 ? tpc_value_get(args->items[2], k) : NULL;
}

/* One distributed optimizer's param groups (pg): one, or Megatron's
 * standard two (one with wd_mult 0: *nowd its index, from `at` on). */
static int part_groups(const tpc_value *pg, size_t at, int *nowd, const char *path, const char *part, tpc_err *e)
{
	double w0 = 0, w1 = 0;
	if (!pg || (pg->kind != TPC_V_LIST && pg->kind != TPC_V_TUPLE) || !pg->n || pg->n > 2 ||
	    (pg->n == 2 && (!tpc_value_number(tpc_value_get(pg->items[0], "wd_mult"), &w0) || !tpc_value_number(tpc_value_get(pg->items[1], "wd_mult"), &w1) ||
			    (w0 == 0) == (w1 == 0))))
		return tpc_err_at(e, TPC_EINPUT, path, NULL,
				  "%s.param_groups is not one group or Megatron's standard two (one with wd_mult 0)", part);
	*nowd = pg->n == 2 ? (int)at + (w0 == 0 ? 0 : 1) : -1;
	return 0;
}

/* Rank 0's param groups (its model_optim_rng.pt: optimizer.optimizer.
 * param_groups, each with wd_mult and step), as the torch reader read them
 * for every rank; nowd[0]: the wd_mult-0 group of two (-1: one group). A
 * model with experts has a chained optimizer, a dense and an
 * expert-parallel one (optimizer.py:1567-1571: optimizer the list of their
 * state dicts): their groups one after the other, *ndense the dense
 * part's, nowd[1] the expert part's wd_mult-0 group. */
static int rank0_groups(const tpc_merge *model, const char *dir, tpc_value **groups, int nowd[2], size_t *ndense,
			tpc_err *e)
{
	char *path = model->layout->foreign_rank_path(dir, 0, 0, model->tp);
	tpc_ckpt r0;
	int ret;
	tpc_ckpt_init(&r0);
	nowd[0] = nowd[1] = -1;
	*ndense = 0;
	if (!path)
		return tpc_err_nomem(e);
	if ((ret = tpc_ckpt_open(&r0, path, NULL, e)))
		goto out;
	const tpc_value *opt = tpc_value_get(r0.root, "optimizer");
	const tpc_value *qk = arg(tpc_value_get(r0.root, "args"), "apply_wd_to_qk_layernorm");
	bool chained = opt && (opt->kind == TPC_V_LIST || opt->kind == TPC_V_TUPLE) && opt->n == 2;
	const tpc_value *pg = tpc_value_get(tpc_value_get(chained ? opt->items[0] : opt, "optimizer"), "param_groups");
	const tpc_value *px = chained ? tpc_value_get(tpc_value_get(opt->items[1], "optimizer"), "param_groups") : NULL;
	if ((ret = part_groups(pg, 0, &nowd[0], path, chained ? "optimizer[0].optimizer" : "optimizer.optimizer", e)) ||
	    (chained && (ret = part_groups(px, pg->n, &nowd[1], path, "optimizer[1].optimizer", e))))
		goto out;
	if (qk && qk->kind == TPC_V_BOOL && qk->ival) {
		ret = tpc_err_at(e, TPC_EINPUT, path, NULL,
				 "args say apply_wd_to_qk_layernorm: which group the q/k layer norms are in is not joined yet");
		goto out;
	}
	*ndense = pg->n;
	if (!chained) {
		*groups = tpc_value_ref((tpc_value *)pg);
		goto out;
	}
	if (!(*groups = tpc_value_new(TPC_V_LIST)))
		ret = tpc_err_nomem(e);
	for (size_t k = 0; !ret && k < 2; k++)
		for (size_t g = 0; !ret && g < (k ? px : pg)->n; g++)
			if (tpc_value_append(*groups, tpc_value_ref((k ? px : pg)->items[g])))
				ret = tpc_err_nomem(e);
out:
	tpc_ckpt_release(&r0);
	free(path);
	return ret;
}

/* Each group's step as an f32 scalar in one memory source of ck. */
static int add_steps(tpc_ckpt *ck, const tpc_value *pg, int *src, tpc_err *e)
{
	size_t bad = 0;
	int ret = tpc_optim_add_group_steps(ck, pg, src, &bad, e);
	if (ret < 0)
		ret = tpc_err_set(e, TPC_EINPUT, "param group %zu of rank 0 has no step (an integer, as Megatron saves torch's Adam's)", bad);
	return ret;
}

/* src's tensor i into ck as `name`, its sources found from base on. */
static int64_t add_from(tpc_ckpt *ck, const tpc_ckpt *src, size_t i, int base, const char *name, tpc_err *e)
{
	tpc_tensor t;
	if (tpc_tensor_copy(&t, &src->t[i]))
		return tpc_err_nomem(e);
	tpc__tensor_shift_src(&t, base);
	int64_t a = tpc_ckpt_add_copy(ck, name, &t, e);
	tpc_tensor_release(&t);
	return a;
}

/* Parameter i of the merged model (its tensor p in ck): its state tensors
 * and step into a new dict *sd. */
static int param_state(tpc_merge_optim *mo, const int *base, const char *name, int src, int g, tpc_value **sd,
		       tpc_err *e)
{
	tpc_buf b = TPC_BUF_INIT;
	int ret = 0;
	if (!(*sd = tpc_value_new(TPC_V_DICT)))
		return tpc_err_nomem(e);
	for (int k = 0; k < TPC_MERGE_OPTIM_KEYS && !ret; k++) {
		int64_t s = tpc_ckpt_find(&mo->state[k].out, name);
		if (s < 0) {
			ret = tpc_err_at(e, TPC_EINPUT, NULL, name, "the set's %s has no such tensor", keys[k]);
			break;
		}
		b.len = 0;
		tpc_buf_addf(&b, "optim.state.%s.%s", name, keys[k]);
		int64_t a = b.oom ? tpc_err_nomem(e) : add_from(&mo->ck, &mo->state[k].out, (size_t)s, base[k + 1], b.p, e);
		if (a < 0)
			ret = (int)a;
		else if (tpc_value_set(*sd, tpc_value_str(keys[k], strlen(keys[k])), tpc_value_tensor(a)))
			ret = tpc_err_nomem(e);
	}
	b.len = 0;
	tpc_buf_addf(&b, "optim.state.%s.step", name);
	int64_t st = ret ? -1 : b.oom ? tpc_err_nomem(e) : tpc_ckpt_add_tensor(&mo->ck, b.p, TPC_F32, 0, NULL, NULL, src, (uint64_t)g * 4, e);
	if (!ret && st < 0)
		ret = (int)st;
	if (!ret && tpc_value_set(*sd, tpc_value_str("step", 4), tpc_value_tensor(st)))
		ret = tpc_err_nomem(e);
	tpc_buf_release(&b);
	return ret;
}

/* The model's tensors as model.NAME, each with its state; the tree. */
static int build(tpc_merge_optim *mo, const tpc_merge *model, const tpc_plan *plan, const tpc_value *pg, const int nowd[2],
		 size_t ndense, const int *base, tpc_err *e)
{
	tpc_value *root = tpc_value_new(TPC_V_DICT), *md = tpc_value_new(TPC_V_DICT), *opt = tpc_value_new(TPC_V_DICT);
	tpc_value *state = tpc_value_new(TPC_V_DICT), *groups = tpc_value_new(TPC_V_DICT), *names[4] = {NULL, NULL, NULL, NULL};
	tpc_buf b = TPC_BUF_INIT;
	int src = -1, ret = 0;
	bool chained = ndense < pg->n;
	for (size_t g = 0; g < pg->n && g < 4; g++)
		if (!(names[g] = tpc_value_new(TPC_V_LIST)))
			ret = tpc_err_nomem(e);
	if (!root || !md || !opt || !state || !groups || pg->n > 4)
		ret = ret ? ret : pg->n > 4 ? tpc_err_set(e, TPC_EINPUT, "%zu param groups", pg->n) : tpc_err_nomem(e);
	if (!ret)
		ret = add_steps(&mo->ck, pg, &src, e);
	for (size_t i = 0; !ret && i < model->out.n; i++) {
		const tpc_tensor *t = &model->out.t[i];
		tpc_value *sd = NULL;
		/* a routed expert's parameter: the chained optimizer's expert part */
		int part = chained && plan && tpc_plan_expert(plan, t->name) >= 0, at = part ? (int)ndense : 0;
		int g = nowd[part] < 0 ? at : tpc_shard_optim_no_decay(t, t->name) ? nowd[part] : 2 * at + 1 - nowd[part];
		b.len = 0;
		tpc_buf_addf(&b, "model.%s", t->name);
		int64_t a = b.oom ? tpc_err_nomem(e) : add_from(&mo->ck, &model->out, i, base[0], b.p, e);
		if (a < 0 || (ret = param_state(mo, base, t->name, src, g, &sd, e))) {
			ret = ret ? ret : (int)a;
			tpc_value_unref(sd);
			break;
		}
		if (tpc_value_set(md, tpc_value_str(t->name, strlen(t->name)), tpc_value_tensor(a)) ||
		    tpc_value_set(state, tpc_value_str(t->name, strlen(t->name)), sd) ||
		    tpc_value_append(names[g], tpc_value_str(t->name, strlen(t->name))))
			ret = tpc_err_nomem(e);
		mo->nparams++;
	}
	for (size_t g = 0; g < pg->n && !ret; g++) {
		tpc_value *d = tpc_optim_group_named(pg->items[g], names[g]);
		if (!d || tpc_value_set(groups, tpc_value_int((int64_t)g), d))
			ret = tpc_err_nomem(e);
	}
	if (!ret && (tpc_value_set(opt, tpc_value_str("state", 5), tpc_value_ref(state)) ||
		     tpc_value_set(opt, tpc_value_str("param_groups", 12), tpc_value_ref(groups)) ||
		     tpc_value_set(root, tpc_value_str("model", 5), tpc_value_ref(md)) ||
		     tpc_value_set(root, tpc_value_str("optim", 5), tpc_value_ref(opt))))
		ret = tpc_err_nomem(e);
	if (!ret) {
		mo->ck.root = root;
		root = NULL;
	}
	tpc_buf_release(&b);
	for (int g = 0; g < 4; g++)
		tpc_value_unref(names[g]);
	tpc_value_unref(root);
	tpc_value_unref(md);
	tpc_value_unref(opt);
	tpc_value_unref(state);
	tpc_value_unref(groups);
	return ret;
}

int tpc_merge_optim_open(tpc_merge_optim *mo, const tpc_merge *model, const char *dir, const tpc_merge_opts *o,
			 tpc_err *e)
{
	tpc_merge_opts so = *o;
	tpc_value *pg = NULL;
	const tpc_ckpt *srcs[1 + TPC_MERGE_OPTIM_KEYS];
	int base[1 + TPC_MERGE_OPTIM_KEYS], nowd[2] = {-1, -1}, ret = 0;
	size_t ndense = 0;
	tpc_merge_optim_init(mo);
	if (model->kind != TPC_SET_FOREIGN || !model->layout || !model->layout->merge_state)
		return tpc_err_at(e, TPC_EINPUT, dir, NULL, "a %s set: its rank files hold no optimizer state tpconv joins",
				  model->kind == TPC_SET_MANIFEST ? "tpconv" : model->layout ? model->layout->name : "sharded");
	so.defer_checksums = false;
	srcs[0] = &model->out;
	for (int k = 0; k < TPC_MERGE_OPTIM_KEYS && !ret; k++) {
		so.state = keys[k];
		if (!(ret = tpc_merge_open(&mo->state[k], dir, &so, e)))
			mo->opened[k] = true;
		else if (e->tensor[0] && !strstr(e->path, "distrib_optim.pt")) { /* the merge's own check */
			char m[sizeof(e->msg)];
			if (snprintf(m, sizeof(m), "its optimizer state %s, joined as the parameter: %s", keys[k], e->msg) > 0)
				memcpy(e->msg, m, sizeof(m)); /* truncated where it must be */
		}
		srcs[k + 1] = &mo->state[k].out;
	}
	if (!ret)
		ret = rank0_groups(model, dir, &pg, nowd, &ndense, e);
	if (!ret)
		ret = tpc_ckpt_borrow_all(&mo->ck, srcs, 1 + TPC_MERGE_OPTIM_KEYS, base, true, e);
	if (!ret)
		ret = build(mo, model, o->plan, pg, nowd, ndense, base, e);
	if (!ret && (!(mo->ck.path = tpc_strdup(dir)) || !(mo->ck.format = tpc_strdup(model->out.format))))
		ret = tpc_err_nomem(e);
	if (!ret) {
		tpc_buf b = TPC_BUF_INIT;
		tpc_buf_addf(&b, "%s set (tp %d x pp %d) with its optimizer state, each rank's joined as its parameters: %zu parameters, %d state tensors each and step",
			     model->layout->name, model->tp, model->pp, mo->nparams, TPC_MERGE_OPTIM_KEYS);
		tpc_ckpt_set_about(&mo->ck, &b);
	}
	tpc_value_unref(pg);
	if (ret)
		tpc_merge_optim_release(mo);
	return ret;
}
