/* tpc_optim.c - optimizer state beside its parameters (tpc_optim.h).
 *
 * The layouts followed: torch/optim/optimizer.py Optimizer.state_dict (state
 * keyed by the parameter's number in param_groups order, each group's
 * hyper-parameters with "params" last) and torch/distributed/checkpoint/
 * state_dict.py _get_optim_state_dict (the same keyed by FQN, what
 * get_state_dict returns and FSDP2 / torchtitan save through DCP). */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_optim.h"
#include "tpc_util.h"

void tpc_optim_init(tpc_optim *o)
{
	memset(o, 0, sizeof(*o));
}

void tpc_optim_release(tpc_optim *o)
{
	for (size_t i = 0; o->p && i < o->np; i++)
		free(o->p[i].s);
	free(o->p);
	free(o->groups);
	free(o->prefix);
	tpc_optim_init(o);
}

static bool is_dict(const tpc_value *v)
{
	return v && v->kind == TPC_V_DICT;
}

/* param_groups: a list, or what the DCP reader leaves of one (a dict keyed
 * 0, 1, ...); its j-th group or NULL */
static const tpc_value *group_at(const tpc_value *pg, size_t j)
{
	if (pg->kind == TPC_V_LIST || pg->kind == TPC_V_TUPLE)
		return pg->items[j];
	if (pg->kind == TPC_V_DICT && pg->keys[j]->kind == TPC_V_INT && pg->keys[j]->ival == (int64_t)j)
		return pg->items[j];
	return NULL;
}

/* The top-level key holding {"state": {...}, "param_groups": [...]} */
static size_t find_optim(const tpc_value *root)
{
	for (size_t i = 0; is_dict(root) && i < root->n; i++) {
		const tpc_value *v = root->items[i];
		if (root->keys[i]->kind != TPC_V_STR || !is_dict(v))
			continue;
		const tpc_value *st = tpc_value_get(v, "state"), *pg = tpc_value_get(v, "param_groups");
		if (is_dict(st) && pg && (pg->kind == TPC_V_LIST || pg->kind == TPC_V_TUPLE || pg->kind == TPC_V_DICT))
			return i;
	}
	return (size_t)-1;
}

/* The parameter tensor of `fqn`: under o->prefix once known, else under the
 * first of the tree's other top-level dicts ("model.") or at the top level
 * where it is found, which fixes o->prefix. -1 when absent. */
static int64_t find_param(tpc_optim *o, const tpc_ckpt *ck, const char *fqn, tpc_err *e)
{
	tpc_buf b = TPC_BUF_INIT;
	int64_t ix = -1;
	for (size_t i = 0; ix < 0 && i <= ck->root->n; i++) {
		const char *pre;
		if (o->prefix) {
			if (i)
				break;
			pre = o->prefix;
		} else if (i < ck->root->n) {
			const tpc_value *k = ck->root->keys[i];
			if (k->kind != TPC_V_STR || !is_dict(ck->root->items[i]) || !strcmp(k->str, o->okey))
				continue;
			pre = k->str;
		} else {
			pre = "";
		}
		b.len = 0;
		tpc_buf_addf(&b, "%s%s%s", pre, *pre && !o->prefix ? "." : "", fqn);
		if (b.oom) {
			ix = -2;
			break;
		}
		ix = tpc_ckpt_find(ck, b.p);
		if (ix >= 0 && !o->prefix) {
			b.len -= strlen(fqn);
			b.p[b.len] = '\0';
			if (!(o->prefix = tpc_strdup(b.p)))
				ix = -2;
		}
	}
	tpc_buf_release(&b);
	if (ix == -2)
		tpc_err_nomem(e);
	return ix;
}

/* One state entry of parameter p: a tensor of the tree that is still the
 * checkpoint's (the name it was read under), shaped as the parameter or a
 * scalar; refused by name otherwise. */
static int map_entry(tpc_optim *o, const tpc_ckpt *ck, tpc_optim_param *p, const tpc_value *key, const tpc_value *v,
		     tpc_err *e)
{
	char want[1024], a[160], b[160];
	tpc_optim_entry *en = &p->s[p->ns];
	if (key->kind != TPC_V_STR)
		return tpc_err_at(e, TPC_EINPUT, NULL, p->fqn, "optimizer state of '%s' has a %s key; torch.optim's keys are names",
				  p->fqn, tpc_vkind_name(key->kind));
	snprintf(want, sizeof(want), "%s.state.%s.%s", o->okey, p->fqn, key->str);
	memset(en, 0, sizeof(*en));
	en->key = key->str;
	en->v = v;
	en->t = -1;
	p->ns++;
	if (v->kind != TPC_V_TENSOR) {
		o->nvalues++;
		return 0;
	}
	if (v->ival < 0 || (size_t)v->ival >= ck->n || strcmp(ck->t[v->ival].name, want))
		return tpc_err_at(e, TPC_EINPUT, NULL, want,
				  "the optimizer state's tensors are no longer the ones read (renamed or dropped since): map the optimizer state from the checkpoint as read");
	const tpc_tensor *t = &ck->t[v->ival], *pt = &ck->t[p->param];
	en->t = v->ival;
	bool same = t->ndim == pt->ndim && !memcmp(t->shape, pt->shape, (size_t)t->ndim * sizeof(int64_t));
	if (same && strcmp(key->str, "step")) {
		en->moment = true;
		o->nmoments++;
	} else if (t->ndim == 0) {
		o->nscalars++;
	} else {
		return tpc_err_at(e, TPC_EINPUT, NULL, want, "%s is not shaped as its parameter '%s' %s",
				  tpc_shape_str(t, a, sizeof(a)), pt->name, tpc_shape_str(pt, b, sizeof(b)));
	}
	return 0;
}

/* Every parameter of group g, in order, with its state. */
static int map_group(tpc_optim *o, const tpc_ckpt *ck, const tpc_value *st, tpc_value *seen, int g, tpc_err *e)
{
	const tpc_value *params = tpc_value_get(o->groups[g], "params");
	if (!params || (params->kind != TPC_V_LIST && params->kind != TPC_V_TUPLE))
		return tpc_err_at(e, TPC_EINPUT, NULL, NULL, "optimizer state '%s': param group %d has no list of params", o->okey, g);
	for (size_t j = 0; j < params->n; j++) {
		const tpc_value *f = params->items[j];
		if (f->kind != TPC_V_STR)
			return tpc_err_at(e, TPC_EINPUT, NULL, NULL,
					  "optimizer state '%s': param group %d names its parameters by number (%s), so which tensor each is cannot be known; save it by name (torch.distributed.checkpoint.state_dict.get_state_dict)",
					  o->okey, g, tpc_vkind_name(f->kind));
		if (tpc_value_get(seen, f->str))
			return tpc_err_at(e, TPC_EINPUT, NULL, f->str, "optimizer state '%s': the parameter is in two param groups", o->okey);
		tpc_value *k = tpc_value_str(f->str, f->len), *one = tpc_value_int(1);
		if (!k || !one || tpc_value_set(seen, k, one))
			return tpc_err_nomem(e);
		tpc_optim_param *p = &o->p[o->np];
		memset(p, 0, sizeof(*p));
		p->fqn = f->str;
		p->group = g;
		const tpc_value *ps = tpc_value_get(st, f->str);
		o->np++;
		if ((p->param = find_param(o, ck, f->str, e)) == -2)
			return tpc_err_nomem(e);
		if (p->param < 0) {
			char where[512];
			if (ps)
				snprintf(where, sizeof(where), "%s.state.%s", o->okey, f->str);
			else
				snprintf(where, sizeof(where), "%s.param_groups.%d.params", o->okey, g);
			return tpc_err_at(e, TPC_EINPUT, NULL, where, "its parameter '%s%s' is not in the checkpoint%s",
					  o->prefix ? o->prefix : "", f->str,
					  o->prefix ? "" : " (looked under each top-level key and at the top level)");
		}
		if (!ps)
			continue; /* never stepped: torch keeps no state for it */
		if (!is_dict(ps))
			return tpc_err_at(e, TPC_EINPUT, NULL, f->str, "optimizer state of '%s' is a %s, not a dict", f->str,
					  tpc_vkind_name(ps->kind));
		if (!(p->s = tpc_calloc(ps->n + 1, sizeof(*p->s))))
			return tpc_err_nomem(e);
		for (size_t q = 0; q < ps->n; q++) {
			int ret = map_entry(o, ck, p, ps->keys[q], ps->items[q], e);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int tpc_optim_map(tpc_optim *o, const tpc_ckpt *ck, tpc_err *e)
{
	tpc_value *seen = NULL;
	int ret = 0;
	tpc_optim_init(o);
	size_t oi = ck->root ? find_optim(ck->root) : (size_t)-1;
	if (oi == (size_t)-1)
		return 0;
	const tpc_value *ov = ck->root->items[oi], *st = tpc_value_get(ov, "state"), *pg = tpc_value_get(ov, "param_groups");
	o->okey = ck->root->keys[oi]->str;
	if (!(o->groups = tpc_calloc(pg->n + 1, sizeof(*o->groups))) || !(seen = tpc_value_new(TPC_V_DICT))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t g = 0; g < pg->n; g++) {
		const tpc_value *gv = group_at(pg, g);
		if (!is_dict(gv)) {
			ret = tpc_err_at(e, TPC_EINPUT, NULL, NULL, "optimizer state '%s': param group %zu is not a dict", o->okey, g);
			goto out;
		}
		o->groups[o->ng++] = gv;
	}
	size_t total = 0;
	for (size_t g = 0; g < o->ng; g++) {
		const tpc_value *params = tpc_value_get(o->groups[g], "params");
		total += params && (params->kind == TPC_V_LIST || params->kind == TPC_V_TUPLE) ? params->n : 0;
	}
	if (!(o->p = tpc_calloc(total + 1, sizeof(*o->p)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t g = 0; g < o->ng && !ret; g++)
		ret = map_group(o, ck, st, seen, (int)g, e);
	/* state for a parameter no group holds: nothing says where it goes */
	for (size_t i = 0; !ret && i < st->n; i++) {
		const tpc_value *k = st->keys[i];
		if (k->kind != TPC_V_STR)
			ret = tpc_err_at(e, TPC_EINPUT, NULL, NULL,
					 "optimizer state '%s' is keyed by parameter number (%s), so which tensor each is cannot be known; save it by name (torch.distributed.checkpoint.state_dict.get_state_dict)",
					 o->okey, tpc_vkind_name(k->kind));
		else if (!tpc_value_get(seen, k->str)) {
			char where[512];
			snprintf(where, sizeof(where), "%s.state.%s", o->okey, k->str);
			ret = tpc_err_at(e, TPC_EINPUT, NULL, where, "belongs to no param group (no group's params names '%s')", k->str);
		}
	}
out:
	tpc_value_unref(seen);
	if (ret)
		tpc_optim_release(o);
	return ret;
}

/* a hyper-parameter as Python prints it, roughly */
static void put_value(tpc_buf *b, const tpc_value *v, int depth)
{
	switch (v->kind) {
	case TPC_V_NONE: tpc_buf_addf(b, "None"); break;
	case TPC_V_BOOL: tpc_buf_addf(b, "%s", v->ival ? "True" : "False"); break;
	case TPC_V_INT: tpc_buf_addf(b, "%lld", (long long)v->ival); break;
	case TPC_V_FLOAT: tpc_buf_addf(b, "%.9g", v->fval); break;
	case TPC_V_STR: tpc_buf_addf(b, "'%.60s'", v->str); break;
	case TPC_V_LIST:
	case TPC_V_TUPLE:
		tpc_buf_addf(b, "%c", v->kind == TPC_V_LIST ? '[' : '(');
		for (size_t i = 0; i < v->n && depth < 4; i++) {
			tpc_buf_addf(b, "%s", i ? ", " : "");
			put_value(b, v->items[i], depth + 1);
		}
		tpc_buf_addf(b, "%c", v->kind == TPC_V_LIST ? ']' : ')');
		break;
	default: tpc_buf_addf(b, "<%s>", tpc_vkind_name(v->kind)); break;
	}
}

void tpc_optim_describe(const tpc_optim *o, const tpc_ckpt *ck, bool each, tpc_buf *b)
{
	const char *keys[8];
	size_t nk = 0;
	char sh[160];
	for (size_t i = 0; i < o->np; i++)
		for (size_t q = 0; q < o->p[i].ns && nk < 8; q++) {
			size_t k = 0;
			while (k < nk && strcmp(keys[k], o->p[i].s[q].key))
				k++;
			if (k == nk)
				keys[nk++] = o->p[i].s[q].key;
		}
	tpc_buf_addf(b, "optimizer state '%s': %zu parameters in %zu param group%s, %zu moments shaped as their parameters (element for element), %zu scalars, %zu values; state keys",
		     o->okey, o->np, o->ng, o->ng == 1 ? "" : "s", o->nmoments, o->nscalars, o->nvalues);
	for (size_t k = 0; k < nk; k++)
		tpc_buf_addf(b, "%s %s", k ? "," : "", keys[k]);
	tpc_buf_addf(b, "\nparameters: '%s' + each name", o->prefix ? o->prefix : "");
	for (size_t g = 0; g < o->ng; g++) {
		const tpc_value *gv = o->groups[g], *params = tpc_value_get(gv, "params");
		tpc_buf_addf(b, "\nparam group %zu: %zu parameters;", g, params ? params->n : 0);
		for (size_t k = 0; k < gv->n; k++) {
			if (gv->keys[k]->kind != TPC_V_STR || !strcmp(gv->keys[k]->str, "params"))
				continue;
			tpc_buf_addf(b, " %s=", gv->keys[k]->str);
			put_value(b, gv->items[k], 0);
		}
	}
	for (size_t i = 0; each && i < o->np; i++) {
		const tpc_optim_param *p = &o->p[i];
		const tpc_tensor *pt = &ck->t[p->param];
		tpc_buf_addf(b, "\n[%zu] %s %s %s (group %d):", i, pt->name, tpc_dtype_name(pt->dtype),
			     tpc_shape_str(pt, sh, sizeof(sh)), p->group);
		for (size_t q = 0; q < p->ns; q++) {
			const tpc_optim_entry *en = &p->s[q];
			tpc_buf_addf(b, "%s %s", q ? "," : "", en->key);
			if (en->t >= 0)
				tpc_buf_addf(b, " %s%s", tpc_dtype_name(ck->t[en->t].dtype), en->moment ? "" : " []");
			else
				tpc_buf_addf(b, " = "), put_value(b, en->v, 0);
		}
		if (!p->ns)
			tpc_buf_addf(b, " no state");
	}
}

tpc_value *tpc_optim_group_numbered(const tpc_value *gv, int64_t first, int64_t n)
{
	tpc_value *d = tpc_value_new(TPC_V_DICT), *pl = tpc_value_new(TPC_V_LIST);
	int bad = !d || !pl;
	for (size_t i = 0; !bad && i < gv->n; i++)
		if (!(gv->keys[i]->kind == TPC_V_STR && !strcmp(gv->keys[i]->str, "params")))
			bad = tpc_value_set(d, tpc_value_ref(gv->keys[i]), tpc_value_ref(gv->items[i]));
	for (int64_t j = 0; !bad && j < n; j++)
		bad = tpc_value_append(pl, tpc_value_int(first + j));
	if (!bad) {
		bad = tpc_value_set(d, tpc_value_str("params", 6), pl);
		pl = NULL;
	}
	tpc_value_unref(pl);
	if (bad) {
		tpc_value_unref(d);
		return NULL;
	}
	return d;
}

tpc_value *tpc_optim_group_named(const tpc_value *gv, tpc_value *names)
{
	tpc_value *d = tpc_value_new(TPC_V_DICT);
	int bad = !d;
	for (size_t k = 0; !bad && gv->kind == TPC_V_DICT && k < gv->n; k++) {
		const tpc_value *key = gv->keys[k];
		if (key->kind == TPC_V_STR && (!strcmp(key->str, "step") || !strcmp(key->str, "params")))
			continue;
		bad = tpc_value_set(d, tpc_value_ref(gv->keys[k]), tpc_value_ref(gv->items[k]));
	}
	if (!bad)
		bad = tpc_value_set(d, tpc_value_str("params", 6), tpc_value_ref(names));
	if (bad) {
		tpc_value_unref(d);
		return NULL;
	}
	return d;
}

int tpc_optim_add_group_steps(tpc_ckpt *ck, const tpc_value *groups, int *src, size_t *bad, tpc_err *e)
{
	uint8_t *mem = tpc_calloc(groups->n + 1, 4);
	if (!mem)
		return tpc_err_nomem(e);
	for (size_t g = 0; g < groups->n; g++) {
		double s;
		if (!tpc_value_number(tpc_value_get(groups->items[g], "step"), &s) || !(s >= 0 && s < 16777216.0) || s != floor(s)) {
			free(mem);
			*bad = g;
			return -1;
		}
		float f = (float)s;
		uint32_t u;
		memcpy(&u, &f, 4);
		for (int b = 0; b < 4; b++)
			mem[g * 4 + (size_t)b] = (uint8_t)(u >> (8 * b));
	}
	return tpc_ckpt_add_mem(ck, "megatron param group steps", mem, (uint64_t)groups->n * 4, src, e);
}

/* param group g as Optimizer.state_dict packs it: its hyper-parameters, then
 * "params" as numbers from *k on */
static tpc_value *torch_group(const tpc_value *gv, size_t *k)
{
	const tpc_value *params = tpc_value_get(gv, "params");
	if (!params)
		return NULL;
	tpc_value *d = tpc_optim_group_numbered(gv, (int64_t)*k, (int64_t)params->n);
	*k += params->n;
	return d;
}

int tpc_optim_torch(const tpc_optim *o, const tpc_ckpt *ck, tpc_ckpt *out, tpc_err *e)
{
	tpc_value *root = tpc_value_new(TPC_V_DICT), *state = tpc_value_new(TPC_V_DICT), *groups = tpc_value_new(TPC_V_LIST);
	char name[256];
	int ret = 0;
	if (!root || !state || !groups || (ret = tpc_ckpt_borrow_sources(out, ck, e))) {
		ret = ret ? ret : tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < o->np && !ret; i++) {
		const tpc_optim_param *p = &o->p[i];
		if (!p->ns)
			continue;
		tpc_value *sd = tpc_value_new(TPC_V_DICT);
		if (!sd || tpc_value_set(state, tpc_value_int((int64_t)i), sd)) {
			ret = tpc_err_nomem(e);
			break;
		}
		for (size_t q = 0; q < p->ns && !ret; q++) {
			const tpc_optim_entry *en = &p->s[q];
			tpc_value *v;
			if (en->t >= 0) {
				snprintf(name, sizeof(name), "state.%zu.%s", i, en->key);
				int64_t ix = tpc_ckpt_add_copy(out, name, &ck->t[en->t], e);
				if (ix < 0) {
					ret = (int)ix;
					break;
				}
				out->t[ix].storage = -1; /* ck's storages are not out's */
				out->t[ix].storage_offset = 0;
				v = tpc_value_tensor(ix);
			} else {
				v = tpc_value_ref((tpc_value *)en->v);
			}
			if (!v || tpc_value_set(sd, tpc_value_str(en->key, strlen(en->key)), v))
				ret = tpc_err_nomem(e);
		}
	}
	size_t k = 0;
	for (size_t g = 0; g < o->ng && !ret; g++) {
		tpc_value *d = torch_group(o->groups[g], &k);
		if (!d || tpc_value_append(groups, d))
			ret = tpc_err_nomem(e);
	}
	if (!ret && (tpc_value_set(root, tpc_value_str("state", 5), tpc_value_ref(state)) ||
		     tpc_value_set(root, tpc_value_str("param_groups", 12), tpc_value_ref(groups))))
		ret = tpc_err_nomem(e);
	if (!ret) {
		out->root = root;
		root = NULL;
		if (!(out->format = tpc_strdup("torch-zip")))
			ret = tpc_err_nomem(e);
	}
out:
	tpc_value_unref(root);
	tpc_value_unref(state);
	tpc_value_unref(groups);
	return ret;
}
