/* tpc_shard_optim.c - optimizer state split as its parameters are
 * (tpc_shard_optim.h).
 *
 * Megatron-LM at d98e8a6 (the form a layout writes, megatron-dist):
 * - DistributedOptimizer.sharded_param_state_fully_reshardable
 *   (megatron/core/optimizer/distrib_optimizer.py:1692-1836): for every model
 *   parameter, each key of get_parameter_state_dp_zero's buffers except
 *   'step' (:1802-1806; the keys: ('param',) + optimizer_state_keys, :2518,
 *   Adam's ('exp_avg', 'exp_avg_sq'), :806-815) becomes
 *   'optimizer.state.<key>.<model key>', data reshaped to the parameter's
 *   shape and replica_id as the model's (replace(sharded_metadata, ...),
 *   :1789-1832): the model's ShardedTensor with another key.
 * - state_dict (:825-885): the inner optimizer's param_groups without
 *   'params', each with the 'step' (one for all parameters, :836-840 and
 *   :866-878), and sharded_state_dict (:1462-1582) adds
 *   'param_state_sharding_type': both go to common.pt.
 * - the groups (optimizer/__init__.py): the standard override puts 1-D
 *   parameters and biases at wd_mult 0 (:94-120, apply_wd_to_qk_layernorm
 *   off), groups are sorted with the default one (no override) first (:374)
 *   and carry is_expert_parallel, default_config, wd_mult, lr_mult,
 *   is_decoupled_lr beside torch's hyper-parameters (:389-412). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_buf.h"
#include "tpc_shard_optim.h"
#include "tpc_util.h"

void tpc_mcore_train_init(tpc_mcore_train *t)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->lr_decay_style, sizeof(t->lr_decay_style), "linear");
	t->weight_decay = 0.01;
}

bool tpc_mcore_train_schedule_known(const tpc_mcore_train *t)
{
	return t->lr > 0 && t->train_iters > 0;
}

int64_t tpc_shard_optim_iteration(const tpc_shard_optim *so)
{
	return so->train.iteration > 0 ? so->train.iteration : so->step;
}

void tpc_shard_optim_init(tpc_shard_optim *so)
{
	memset(so, 0, sizeof(*so));
	tpc_mcore_train_init(&so->train);
	tpc_optim_init(&so->map);
	tpc_ckpt_init(&so->model);
	for (int k = 0; k < TPC_SHARD_OPTIM_KEYS; k++)
		tpc_ckpt_init(&so->state[k]);
}

void tpc_shard_optim_release(tpc_shard_optim *so)
{
	for (int k = 0; k < TPC_SHARD_OPTIM_KEYS; k++) {
		if (so->planned[k])
			tpc_shard_plan_release(&so->sp[k]);
		tpc_ckpt_release(&so->state[k]);
	}
	tpc_ckpt_release(&so->model);
	tpc_value_unref(so->groups);
	tpc_optim_release(&so->map);
	memset(so, 0, sizeof(*so));
}

static const tpc_optim_entry *entry(const tpc_optim_param *p, const char *key)
{
	for (size_t j = 0; j < p->ns; j++)
		if (!strcmp(p->s[j].key, key))
			return &p->s[j];
	return NULL;
}

/* A step as a number: a scalar tensor (f32, f64, i64, i32) or a value. */
static int step_of(const tpc_ckpt *ck, const tpc_optim_entry *s, int64_t *out, tpc_err *e)
{
	double d = -1;
	if (s->t >= 0) {
		const tpc_tensor *t = &ck->t[s->t];
		uint8_t b[8];
		if (t->ndim || t->nbytes > sizeof(b) || tpc_ckpt_read_bytes(ck, t, 0, t->nbytes, b, e))
			return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "a step that is not one number");
		float f;
		double g;
		int64_t i;
		int32_t j;
		switch (t->dtype) {
		case TPC_F32: memcpy(&f, b, 4); d = f; break;
		case TPC_F64: memcpy(&g, b, 8); d = g; break;
		case TPC_I64: memcpy(&i, b, 8); d = (double)i; break;
		case TPC_I32: memcpy(&j, b, 4); d = j; break;
		default: return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "a step of dtype %s", tpc_dtype_name(t->dtype));
		}
	} else if (s->v && s->v->kind == TPC_V_INT) {
		d = (double)s->v->ival;
	} else if (s->v && s->v->kind == TPC_V_FLOAT) {
		d = s->v->fval;
	}
	if (!(d >= 0 && d < 9e15) || d != (double)(int64_t)d)
		return tpc_err_set(e, TPC_EINPUT, "a step that is not a count of steps");
	*out = (int64_t)d;
	return 0;
}

static bool ends_with(const char *s, const char *t)
{
	size_t a = strlen(s), b = strlen(t);
	return a >= b && !strcmp(s + a - b, t);
}

/* Megatron's standard override (optimizer/__init__.py:113-120): wd_mult 0 */
bool tpc_shard_optim_no_decay(const tpc_tensor *t, const char *name)
{
	return t->ndim == 1 || ends_with(name, ".bias");
}

static bool truthy(const tpc_value *v)
{
	return v && (v->kind == TPC_V_BOOL || v->kind == TPC_V_INT) && v->ival;
}

/* Each source group holds parameters of one side of the standard split (of
 * one optimizer: a Megatron save's chained expert-parallel groups are their
 * own); so->src[expert][no decay]: the source group of each, or -1. */
static int check_groups(tpc_shard_optim *so, const tpc_ckpt *ck, tpc_err *e)
{
	const tpc_optim *o = &so->map;
	const char *first[2][2] = {{NULL, NULL}, {NULL, NULL}};
	static const char *const what[2][2] = {{"2-D or more", "1-D or a bias"},
					       {"expert-parallel 2-D or more", "expert-parallel 1-D or bias"}};
	memset(so->src, 0xff, sizeof(so->src));
	if (o->ng > 4)
		return tpc_err_set(e, TPC_EINPUT,
				   "%zu param groups: Megatron's standard split makes two (weight decay, and wd_mult 0 for 1-D parameters and biases: optimizer/__init__.py:94-120), each again for expert-parallel parameters; other groupings are not written",
				   o->ng);
	for (size_t i = 0; i < o->np; i++) {
		const tpc_optim_param *p = &o->p[i];
		int x = truthy(tpc_value_get(o->groups[p->group], "is_expert_parallel"));
		int k = tpc_shard_optim_no_decay(&ck->t[p->param], p->fqn);
		if (so->src[x][k] < 0) {
			so->src[x][k] = p->group;
			first[x][k] = p->fqn;
		} else if (so->src[x][k] != p->group) {
			return tpc_err_at(e, TPC_EINPUT, NULL, p->fqn,
					  "in param group %d, '%s' (%s) in group %d: Megatron's standard split puts every %s in one group (optimizer/__init__.py:94-120); not written",
					  p->group, first[x][k], what[x][k], so->src[x][k], k ? "1-D parameter and bias" : "other parameter");
		}
	}
	for (int a = 0; a < 4; a++)
		for (int b = a + 1; b < 4; b++)
			if (so->src[a / 2][a % 2] >= 0 && so->src[a / 2][a % 2] == so->src[b / 2][b % 2])
				return tpc_err_at(e, TPC_EINPUT, NULL, first[b / 2][b % 2],
						  "param group %d holds it (%s) and '%s' (%s) alike: Megatron's standard split gives 1-D parameters and biases a group of their own (wd_mult 0, optimizer/__init__.py:94-120); not written",
						  so->src[a / 2][a % 2], what[b / 2][b % 2], first[a / 2][a % 2], what[a / 2][a % 2]);
	return 0;
}

/* Megatron's group dict: the source's hyper-parameters (no params), its
 * own keys for the standard split, and the step. */
static tpc_value *mcore_group(const tpc_value *g, bool nowd, bool expert, int64_t step)
{
	tpc_value *d = tpc_value_new(TPC_V_DICT);
	bool bad = !d;
	for (size_t k = 0; !bad && g && k < g->n; k++) {
		const tpc_value *key = g->keys[k];
		if (key->kind == TPC_V_STR && (!strcmp(key->str, "params") || !strcmp(key->str, "step")))
			continue;
		bad = tpc_value_set(d, tpc_value_ref(g->keys[k]), tpc_value_ref(g->items[k]));
	}
	bad = bad || tpc_value_set(d, tpc_value_str("is_expert_parallel", 18), tpc_value_bool(expert)) ||
	      tpc_value_set(d, tpc_value_str("default_config", 14), tpc_value_bool(1)) ||
	      tpc_value_set(d, tpc_value_str("wd_mult", 7), tpc_value_float(nowd ? 0.0 : 1.0)) ||
	      tpc_value_set(d, tpc_value_str("lr_mult", 7), tpc_value_float(1.0)) ||
	      tpc_value_set(d, tpc_value_str("is_decoupled_lr", 15), tpc_value_bool(0)) ||
	      tpc_value_set(d, tpc_value_str("step", 4), tpc_value_int(step));
	if (bad) {
		tpc_value_unref(d);
		return NULL;
	}
	return d;
}

bool tpc_shard_optim_has_state(const tpc_shard_optim *so, const char *name)
{
	return tpc_ckpt_find(&so->state[0], name) >= 0;
}

tpc_value *tpc_shard_optim_groups(const tpc_shard_optim *so, bool expert, bool wd, bool nowd)
{
	tpc_value *l = tpc_value_new(TPC_V_LIST);
	/* the default group first (:374), then wd_mult 0; from the source's
	 * expert-parallel groups (a Megatron save) or its only ones */
	const bool on[2] = {wd, nowd};
	for (int i = 0; l && i < 2; i++) {
		int src = so->src[expert][i] >= 0 ? so->src[expert][i] : so->src[0][i];
		if (!on[i] || src < 0)
			continue;
		tpc_value *d = mcore_group(so->map.groups[src], i == 1, expert, so->step);
		if (!d || tpc_value_append(l, d)) {
			tpc_value_unref(l);
			return NULL;
		}
	}
	return l;
}

static int build_groups(tpc_shard_optim *so, const tpc_ckpt *ck, tpc_err *e)
{
	int ret = check_groups(so, ck, e);
	if (!ret && !(so->groups = tpc_shard_optim_groups(so, false, true, true)))
		ret = tpc_err_nomem(e);
	return ret;
}

/* Parameter p's tensor for state key k ("param", "exp_avg", "exp_avg_sq"). */
static int state_tensor(tpc_shard_optim *so, const tpc_ckpt *ck, const tpc_optim_param *p, int k, const tpc_tensor **t,
			tpc_err *e)
{
	static const char *const from[] = {"fp32_param", "exp_avg", "exp_avg_sq"};
	const tpc_optim_entry *s = entry(p, from[k]);
	const tpc_tensor *pt = &ck->t[p->param];
	if (s && (!s->moment || s->t < 0))
		return tpc_err_at(e, TPC_EINPUT, NULL, p->fqn, "its %s is not shaped as the parameter", from[k]);
	if (s) {
		*t = &ck->t[s->t];
		if (k == 0)
			so->master_from = "fp32_param";
		return 0;
	}
	if (k == 0 && pt->dtype == TPC_F32) {
		/* trained in f32: the parameter is its own master */
		*t = pt;
		if (!so->master_from)
			so->master_from = "the parameter (f32)";
		return 0;
	}
	if (k == 0)
		return tpc_err_at(e, TPC_EINPUT, NULL, p->fqn,
				  "a %s parameter without its fp32 master (fp32_param): Megatron's distributed optimizer stores the master ('param', distrib_optimizer.py:2518), which the save does not hold",
				  tpc_dtype_name(pt->dtype));
	return tpc_err_at(e, TPC_EINPUT, NULL, p->fqn,
			  "no %s: Megatron's Adam state is exp_avg and exp_avg_sq for every parameter (distrib_optimizer.py:806-815); a parameter without state (frozen, never stepped) is not written",
			  from[k]);
}

/* A tensor of the model's subtree that no param group lists (a buffer, a
 * frozen weight): its name without the prefix, or NULL when it is not the
 * model's (the optimizer's own, another top-level key's). */
static const char *unlisted(const tpc_shard_optim *so, const tpc_tensor *t, bool is_param)
{
	const char *pre = so->map.prefix ? so->map.prefix : "", *nm = t->name;
	size_t pl = strlen(pre), ol = strlen(so->map.okey);
	if (is_param || (!strncmp(nm, so->map.okey, ol) && nm[ol] == '.'))
		return NULL;
	return !pl || !strncmp(nm, pre, pl) ? nm + pl : NULL;
}

int tpc_shard_optim_build(tpc_shard_optim *so, const tpc_ckpt *ck, tpc_err *e)
{
	static const char *const keys[] = {"param", "exp_avg", "exp_avg_sq"};
	bool *is_param = NULL;
	int64_t *pix = NULL;
	int ret;
	tpc_shard_optim_init(so);
	if ((ret = tpc_optim_map(&so->map, ck, e)))
		return ret;
	if (!so->map.okey)
		return tpc_err_set(e, TPC_EINPUT,
				   "holds no optimizer state (a top-level key with 'state' and 'param_groups': a DCP save's optim, a ZeRO folder's, Megatron's distributed optimizer's)");
	if (!so->map.np)
		return tpc_err_set(e, TPC_EINPUT, "the optimizer state lists no parameters");
	so->nkeys = 3;
	for (int k = 0; k < 3; k++)
		so->key[k] = keys[k];
	if ((ret = tpc_ckpt_borrow_sources(&so->model, ck, e)))
		return ret;
	for (int k = 0; k < 3 && !ret; k++)
		ret = tpc_ckpt_borrow_sources(&so->state[k], ck, e);
	if (ret)
		return ret;
	if (!(is_param = tpc_calloc(ck->n + 1, sizeof(*is_param))) || !(pix = tpc_calloc(ck->n + 1, sizeof(*pix)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < so->map.np; i++) {
		is_param[so->map.p[i].param] = true;
		pix[so->map.p[i].param] = (int64_t)i;
	}
	/* one step for all (Megatron keeps it per group, one value: :836-840) */
	const char *step_at = NULL;
	for (size_t i = 0; i < so->map.np && !ret; i++) {
		const tpc_optim_param *p = &so->map.p[i];
		const tpc_optim_entry *s = entry(p, "step");
		int64_t st = 0;
		if (!s) {
			ret = tpc_err_at(e, TPC_EINPUT, NULL, p->fqn, "no step in its state: Megatron keeps one per param group");
			break;
		}
		if ((ret = step_of(ck, s, &st, e)))
			break;
		if (step_at && st != so->step)
			ret = tpc_err_at(e, TPC_EINPUT, NULL, p->fqn,
					 "step %lld, '%s' step %lld: Megatron's optimizer keeps one step for all parameters (distrib_optimizer.py:836-840); not written",
					 (long long)st, step_at, (long long)so->step);
		so->step = st;
		step_at = p->fqn;
	}
	if (ret || (ret = build_groups(so, ck, e)))
		goto out;
	/* the model and each state key, in the checkpoint's order; the model's
	 * tensors without state go with the model, for the layout to take
	 * (a buffer of its consumer's) or refuse */
	for (size_t i = 0; i < ck->n && !ret; i++) {
		const char *u = unlisted(so, &ck->t[i], is_param[i]);
		if (u) {
			int64_t ix = tpc_ckpt_add_copy(&so->model, u, &ck->t[i], e);
			ret = ix < 0 ? (int)ix : 0;
			continue;
		}
		if (!is_param[i])
			continue;
		const tpc_optim_param *p = &so->map.p[pix[i]];
		int64_t ix = tpc_ckpt_add_copy(&so->model, p->fqn, &ck->t[i], e);
		if (ix < 0) {
			ret = (int)ix;
			break;
		}
		for (int k = 0; k < 3 && !ret; k++) {
			const tpc_tensor *t = NULL;
			if (!(ret = state_tensor(so, ck, p, k, &t, e)) && (ix = tpc_ckpt_add_copy(&so->state[k], p->fqn, t, e)) < 0)
				ret = (int)ix;
		}
	}
out:
	free(is_param);
	free(pix);
	if (ret)
		tpc_shard_optim_release(so);
	return ret;
}

int tpc_shard_optim_plans(tpc_shard_optim *so, const tpc_plan *plan, const tpc_model_facts *facts,
			  const tpc_shard_opts *o, tpc_err *e)
{
	tpc_shard_opts mo = *o;
	mo.optim = NULL;
	mo.progress = NULL;
	/* the state's ranks are read by the layout through the model's plan
	 * (its stored ranks hold them): its own plans need no stored form */
	so->layout = o->layout ? *o->layout : *tpc_layout_default();
	so->layout.stored_rank = NULL;
	mo.layout = &so->layout;
	for (int k = 0; k < so->nkeys; k++) {
		int ret = tpc_shard_plan_build(&so->sp[k], &so->state[k], plan, facts, &mo, e);
		if (ret) {
			char m[sizeof(e->msg)], t[sizeof(e->tensor)];
			snprintf(m, sizeof(m), "%s", e->msg);
			snprintf(t, sizeof(t), "%s", e->tensor);
			tpc_err_at(e, e->code, NULL, t[0] ? t : NULL, "the optimizer's %s, split as the model: %s", so->key[k], m);
			return ret;
		}
		so->planned[k] = true;
		if (so->sp[k].aux.nsrc)
			return tpc_err_set(e, TPC_EINPUT, "the optimizer's %s: its ranks hold rewritten tensors, which state does not have", so->key[k]);
	}
	return 0;
}
