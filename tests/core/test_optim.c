/* test_optim.c - optimizer state tied to its parameters (lib/tpc_optim.h):
 * the mapping, its refusals by name, and torch.optim's state_dict built from
 * it, on small trees made here (the DCP and ZeRO fixtures are tests/dcp and
 * tests/deepspeed). */
#include "test_util.h"

#include "tpc_ckpt.h"
#include "tpc_optim.h"
#include "tpc_util.h"

static tpc_value *S(const char *s)
{
	return tpc_value_str(s, strlen(s));
}

static void dset(tpc_value *d, const char *k, tpc_value *v)
{
	assert_int_equal(tpc_value_set(d, S(k), v), 0);
}

/* model.w [2, 3], model.b [3], optim.state.w.exp_avg (shape `mw`),
 * optim.state.w.step []; groups [{"lr": 0.1, "params": names}]; the
 * state keyed by `key_w` */
typedef struct fx {
	tpc_ckpt ck;
	tpc_value *state, *groups, *params;
} fx;

static void build(fx *f, int mw_rows, tpc_value *key_w)
{
	int64_t sw[2] = {2, 3}, sb[1] = {3}, sm[2] = {mw_rows, 3};
	uint8_t *mem = calloc(1, 64);
	int src;
	tpc_err e;
	tpc_err_init(&e);
	tpc_ckpt_init(&f->ck);
	assert_int_equal(tpc_ckpt_add_mem(&f->ck, "mem", mem, 64, &src, &e), 0);
	assert_true(tpc_ckpt_add_tensor(&f->ck, "model.w", TPC_F32, 2, sw, NULL, src, 0, &e) == 0);
	assert_true(tpc_ckpt_add_tensor(&f->ck, "model.b", TPC_F32, 1, sb, NULL, src, 24, &e) == 1);
	assert_true(tpc_ckpt_add_tensor(&f->ck, "optim.state.w.exp_avg", TPC_F32, 2, sm, NULL, src, 0, &e) == 2);
	assert_true(tpc_ckpt_add_tensor(&f->ck, "optim.state.w.step", TPC_F32, 0, NULL, NULL, src, 60, &e) == 3);
	tpc_value *root = tpc_value_new(TPC_V_DICT), *model = tpc_value_new(TPC_V_DICT), *opt = tpc_value_new(TPC_V_DICT);
	tpc_value *sw_ = tpc_value_new(TPC_V_DICT), *g0 = tpc_value_new(TPC_V_DICT);
	f->state = tpc_value_new(TPC_V_DICT);
	f->groups = tpc_value_new(TPC_V_LIST);
	f->params = tpc_value_new(TPC_V_LIST);
	dset(model, "w", tpc_value_tensor(0));
	dset(model, "b", tpc_value_tensor(1));
	dset(sw_, "exp_avg", tpc_value_tensor(2));
	dset(sw_, "step", tpc_value_tensor(3));
	assert_int_equal(tpc_value_set(f->state, key_w, sw_), 0);
	dset(g0, "lr", tpc_value_float(0.1));
	dset(g0, "params", tpc_value_ref(f->params));
	assert_int_equal(tpc_value_append(f->groups, g0), 0);
	dset(opt, "state", tpc_value_ref(f->state));
	dset(opt, "param_groups", tpc_value_ref(f->groups));
	dset(root, "model", model);
	dset(root, "optim", opt);
	f->ck.root = root;
}

static void release(fx *f)
{
	tpc_value_unref(f->state);
	tpc_value_unref(f->groups);
	tpc_value_unref(f->params);
	tpc_ckpt_release(&f->ck);
}

static void test_map_and_torch(void **st)
{
	(void)st;
	fx f;
	tpc_optim o;
	tpc_ckpt out;
	tpc_err e;
	tpc_err_init(&e);
	build(&f, 2, S("w"));
	tpc_value_append(f.params, S("w"));
	tpc_value_append(f.params, S("b"));
	assert_int_equal(tpc_optim_map(&o, &f.ck, &e), 0);
	assert_string_equal(o.okey, "optim");
	assert_string_equal(o.prefix, "model.");
	assert_int_equal(o.np, 2);
	assert_int_equal(o.p[0].param, 0);
	assert_int_equal(o.p[1].param, 1);
	assert_int_equal(o.p[0].ns, 2);
	assert_true(o.p[0].s[0].moment);
	assert_false(o.p[0].s[1].moment);
	assert_int_equal(o.p[1].ns, 0); /* never stepped */
	assert_int_equal(o.nmoments, 1);
	assert_int_equal(o.nscalars, 1);
	tpc_ckpt_init(&out);
	assert_int_equal(tpc_optim_torch(&o, &f.ck, &out, &e), 0);
	assert_int_equal(out.n, 2);
	assert_string_equal(out.t[0].name, "state.0.exp_avg");
	const tpc_value *state = tpc_value_get(out.root, "state"), *pg = tpc_value_get(out.root, "param_groups");
	assert_non_null(state);
	assert_int_equal(state->n, 1);
	assert_int_equal(state->keys[0]->kind, TPC_V_INT);
	assert_int_equal(state->keys[0]->ival, 0);
	assert_int_equal(pg->kind, TPC_V_LIST);
	const tpc_value *params = tpc_value_get(pg->items[0], "params");
	assert_int_equal(params->n, 2);
	assert_int_equal(params->items[1]->ival, 1);
	assert_string_equal(pg->items[0]->keys[pg->items[0]->n - 1]->str, "params"); /* last, as torch packs it */
	tpc_ckpt_release(&out);
	tpc_optim_release(&o);
	release(&f);
}

/* each refusal: the code, the entry named, the words */
static void refused(fx *f, const char *tensor, const char *words)
{
	tpc_optim o;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_optim_map(&o, &f->ck, &e), TPC_EINPUT);
	if (tensor)
		assert_string_equal(e.tensor, tensor);
	if (!strstr(e.msg, words))
		fail_msg("'%s' lacks '%s'", e.msg, words);
	assert_null(o.p);
	release(f);
}

static void test_refusals(void **st)
{
	(void)st;
	fx f;
	/* a moment not shaped as its parameter */
	build(&f, 1, S("w"));
	tpc_value_append(f.params, S("w"));
	refused(&f, "optim.state.w.exp_avg", "[1, 3] is not shaped as its parameter 'model.w' [2, 3]");
	/* the parameter absent */
	build(&f, 2, S("w"));
	tpc_value_append(f.params, S("w"));
	tpc_value_append(f.params, S("gone"));
	refused(&f, "optim.param_groups.0.params", "its parameter 'model.gone' is not in the checkpoint");
	/* state no group holds */
	build(&f, 2, S("w"));
	tpc_value_append(f.params, S("b"));
	refused(&f, "optim.state.w", "belongs to no param group");
	/* a parameter in two groups (twice in one list, the same check) */
	build(&f, 2, S("w"));
	tpc_value_append(f.params, S("w"));
	tpc_value_append(f.params, S("w"));
	refused(&f, "w", "in two param groups");
	/* parameters by number: which tensor each is cannot be known */
	build(&f, 2, tpc_value_int(0));
	tpc_value_append(f.params, tpc_value_int(0));
	refused(&f, NULL, "names its parameters by number");
	/* state by number, params by name */
	build(&f, 2, tpc_value_int(0));
	tpc_value_append(f.params, S("w"));
	refused(&f, NULL, "keyed by parameter number");
}

static void test_none(void **st)
{
	(void)st;
	tpc_ckpt ck;
	tpc_optim o;
	tpc_err e;
	tpc_err_init(&e);
	tpc_ckpt_init(&ck);
	ck.root = tpc_value_new(TPC_V_DICT);
	dset(ck.root, "step", tpc_value_int(7));
	assert_int_equal(tpc_optim_map(&o, &ck, &e), 0);
	assert_null(o.okey);
	assert_int_equal(e.code, 0);
	tpc_ckpt_release(&ck);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_map_and_torch),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_none),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
