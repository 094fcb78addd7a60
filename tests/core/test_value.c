/*
 * test_value.c - the value tree: ownership, dict semantics and scale, depth
 * without recursion, and JSON text that restores the exact tree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpc_err.h"
#include "tpc_value.h"

static tpc_value *S(const char *s)
{
	tpc_value *v = tpc_value_str(s, strlen(s));
	assert_non_null(v);
	return v;
}

static char *json(const tpc_value *v)
{
	char *j = tpc_value_to_json(v, NULL, NULL);
	assert_non_null(j);
	return j;
}

/* to_json -> from_json must give an equal tree, and the same text again. */
static void assert_json_round_trip(const tpc_value *v)
{
	tpc_err e;
	tpc_err_init(&e);
	char *j = json(v);
	tpc_value *back = tpc_value_from_json(j, strlen(j), NULL, NULL, &e);
	if (!back)
		fail_msg("from_json failed on %s: %s", j, e.msg);
	assert_true(tpc_value_equal(v, back));
	char *j2 = json(back);
	assert_string_equal(j, j2);
	free(j2);
	free(j);
	tpc_value_unref(back);
}

static void test_scalars_and_kinds(void **state)
{
	(void)state;
	tpc_value *i = tpc_value_int(-7), *b = tpc_value_bool(5), *f = tpc_value_float(2.5);
	tpc_value *g = tpc_value_global("torch._utils", "_rebuild_tensor_v2");
	tpc_value *y = tpc_value_bytes("\0\1", 2);
	assert_int_equal(i->ival, -7);
	assert_int_equal(b->ival, 1);
	assert_true(f->fval == 2.5);
	assert_string_equal(g->str, "torch._utils._rebuild_tensor_v2");
	const char *name;
	assert_int_equal(tpc_value_global_split(g, &name), strlen("torch._utils"));
	assert_string_equal(name, "_rebuild_tensor_v2");
	assert_int_equal(y->len, 2);
	assert_int_equal(y->str[2], 0); /* NUL-terminated */
	assert_string_equal(tpc_vkind_name(TPC_V_STORAGE), "storage");
	assert_string_equal(tpc_vkind_name((tpc_vkind)99), "unknown");
	/* append takes the item even when it fails */
	assert_int_equal(tpc_value_append(i, S("leak?")), -1);
	assert_int_equal(tpc_value_set(i, S("k"), S("v")), -1);
	assert_int_equal(tpc_value_set_origin(i, tpc_value_new(TPC_V_CALL)), -1);
	tpc_value_unref(tpc_value_ref(i));
	tpc_value_unref(i);
	tpc_value_unref(b);
	tpc_value_unref(f);
	tpc_value_unref(g);
	tpc_value_unref(y);
	tpc_value_unref(NULL);
}

static void test_dict_semantics(void **state)
{
	(void)state;
	tpc_value *d = tpc_value_new(TPC_V_DICT);
	assert_int_equal(tpc_value_set(d, S("b"), tpc_value_int(1)), 0);
	assert_int_equal(tpc_value_set(d, S("a"), tpc_value_int(2)), 0);
	assert_int_equal(tpc_value_set(d, S("b"), tpc_value_int(3)), 0); /* replaces in place */
	assert_int_equal(d->n, 2);
	assert_string_equal(d->keys[0]->str, "b");
	assert_int_equal(d->items[0]->ival, 3);
	assert_int_equal(tpc_value_get(d, "a")->ival, 2);
	assert_null(tpc_value_get(d, "c"));
	/* same kind required: 1 and True and "1" are three keys */
	assert_int_equal(tpc_value_set(d, tpc_value_int(1), S("int")), 0);
	assert_int_equal(tpc_value_set(d, tpc_value_bool(1), S("bool")), 0);
	assert_int_equal(tpc_value_set(d, S("1"), S("str")), 0);
	assert_int_equal(d->n, 5);
	/* -0.0 and 0.0 are one key (Python); a NaN matches its own bits */
	assert_int_equal(tpc_value_set(d, tpc_value_float(0.0), S("z")), 0);
	assert_int_equal(tpc_value_set(d, tpc_value_float(-0.0), S("z2")), 0);
	assert_int_equal(d->n, 6);
	assert_int_equal(tpc_value_set(d, tpc_value_float(NAN), S("n")), 0);
	assert_int_equal(tpc_value_set(d, tpc_value_float(NAN), S("n2")), 0);
	assert_int_equal(d->n, 7);
	/* keys with NUL bytes differ from their prefix */
	assert_int_equal(tpc_value_set(d, tpc_value_str("a\0x", 3), S("nul")), 0);
	assert_int_equal(d->n, 8);
	assert_int_equal(tpc_value_get(d, "a")->ival, 2);
	/* containers compare by identity */
	tpc_value *t = tpc_value_new(TPC_V_TUPLE);
	assert_int_equal(tpc_value_set(d, tpc_value_ref(t), S("t1")), 0);
	assert_int_equal(tpc_value_set(d, t, S("t2")), 0);
	assert_int_equal(tpc_value_set(d, tpc_value_new(TPC_V_TUPLE), S("t3")), 0);
	assert_int_equal(d->n, 10);
	assert_json_round_trip(d);
	tpc_value_unref(d);
}

/* 200k distinct keys, then replace all of them: O(n) with the index. */
static void test_dict_large(void **state)
{
	(void)state;
	enum { N = 200000 };
	char key[32];
	clock_t t0 = clock();
	tpc_value *d = tpc_value_new(TPC_V_DICT);
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < N; i++) {
			snprintf(key, sizeof(key), "layer.%d.weight", i);
			assert_int_equal(tpc_value_set(d, S(key), tpc_value_int(i + pass)), 0);
		}
	}
	assert_int_equal(d->n, N);
	for (int i = 0; i < N; i += 997) {
		snprintf(key, sizeof(key), "layer.%d.weight", i);
		tpc_value *v = tpc_value_get(d, key);
		assert_non_null(v);
		assert_int_equal(v->ival, i + 1);
		assert_string_equal(d->keys[i]->str, key); /* insertion order kept */
	}
	double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
	/* quadratic would be ~4e10 comparisons; generous even under sanitizers */
	assert_true(secs < 20.0);
	tpc_value_unref(d);
}

/* A million-deep list: release, equality and JSON without C recursion. */
static void test_deep_nesting(void **state)
{
	(void)state;
	enum { DEPTH = 1000000 };
	tpc_value *a = tpc_value_int(1), *b = tpc_value_int(1);
	for (int i = 0; i < DEPTH; i++) {
		tpc_value *la = tpc_value_new(TPC_V_LIST), *lb = tpc_value_new(TPC_V_LIST);
		assert_int_equal(tpc_value_append(la, a), 0);
		assert_int_equal(tpc_value_append(lb, b), 0);
		a = la;
		b = lb;
	}
	assert_true(tpc_value_equal(a, b));
	char *j = json(a);
	assert_int_equal(strlen(j), 2 * (size_t)DEPTH + 1);
	assert_int_equal(j[DEPTH], '1');
	free(j);
	/* a difference at the bottom is found */
	tpc_value *x = b;
	while (x->kind == TPC_V_LIST)
		x = x->items[0];
	x->ival = 2;
	assert_false(tpc_value_equal(a, b));
	tpc_value_unref(a);
	tpc_value_unref(b);
}

static const char *namer(void *ctx, int64_t index)
{
	(void)ctx;
	return index == 0 ? "model.w" : NULL;
}

static int64_t resolver(void *ctx, const char *name)
{
	(void)ctx;
	return strcmp(name, "model.w") ? -1 : 0;
}

/* The documented encoding, byte for byte. */
static void test_json_encoding(void **state)
{
	(void)state;
	tpc_value *l = tpc_value_new(TPC_V_LIST);
	tpc_value_append(l, tpc_value_new(TPC_V_NONE));
	tpc_value_append(l, tpc_value_bool(0));
	tpc_value_append(l, tpc_value_int(-3));
	tpc_value_append(l, tpc_value_int(INT64_MAX));
	tpc_value_append(l, tpc_value_float(-0.0));
	tpc_value_append(l, tpc_value_float(INFINITY));
	tpc_value_append(l, tpc_value_float(0.1));
	tpc_value_append(l, S("q\"\n\xc3\xa9"));
	tpc_value_append(l, tpc_value_str("\xff\0", 2));
	tpc_value_append(l, tpc_value_bytes("\x01\xab", 2));
	tpc_value *t = tpc_value_new(TPC_V_TUPLE);
	tpc_value_append(t, tpc_value_int(1));
	tpc_value_append(l, t);
	tpc_value *s = tpc_value_new(TPC_V_SET);
	tpc_value_append(l, s);
	tpc_value *d = tpc_value_new(TPC_V_DICT);
	tpc_value_set(d, S("k"), tpc_value_int(1));
	tpc_value_append(l, d);
	tpc_value *di = tpc_value_new(TPC_V_DICT);
	tpc_value_set(di, tpc_value_int(5), S("five"));
	tpc_value_append(l, di);
	tpc_value_append(l, tpc_value_global("pkg.mod", "Outer.Inner"));
	tpc_value *c = tpc_value_new(TPC_V_CALL);
	tpc_value_append(c, tpc_value_global("argparse", "Namespace"));
	tpc_value_append(c, tpc_value_new(TPC_V_TUPLE));
	tpc_value_append(l, c);
	tpc_value_append(l, tpc_value_tensor(0));
	tpc_value_append(l, tpc_value_tensor(7));
	tpc_value *big = tpc_value_bytes("\x00\x00\x00\x00\x00\x00\x00\x00\x01", 9);
	big->kind = TPC_V_BIGINT;
	tpc_value_append(l, big);
	tpc_value *st = tpc_value_new(TPC_V_STORAGE);
	tpc_value_append(st, S("0"));
	tpc_value_append(l, st);
	tpc_value *od = tpc_value_new(TPC_V_DICT);
	tpc_value *oc = tpc_value_new(TPC_V_CALL);
	tpc_value_append(oc, tpc_value_global("collections", "OrderedDict"));
	tpc_value_append(oc, tpc_value_new(TPC_V_TUPLE));
	assert_int_equal(tpc_value_set_origin(od, oc), 0);
	assert_ptr_equal(tpc_value_origin(od), oc);
	tpc_value_append(l, od);

	char *j = tpc_value_to_json(l, namer, NULL);
	assert_string_equal(
		j, "[null,false,-3,{\"int\":\"9223372036854775807\"},{\"float\":\"-0\"},"
		   "{\"float\":\"inf\"},{\"float\":\"0.10000000000000001\"},\"q\\\"\\n\xc3\xa9\","
		   "{\"strhex\":\"ff00\"},{\"bytes\":\"01ab\"},{\"tuple\":[1]},{\"set\":[]},"
		   "{\"dict\":{\"k\":1}},{\"dict_items\":[[5,\"five\"]]},"
		   "{\"global\":\"pkg.mod.Outer.Inner\",\"module\":\"pkg.mod\"},"
		   "{\"call\":[{\"global\":\"argparse.Namespace\"},{\"tuple\":[]}]},"
		   "{\"tensor\":\"model.w\"},{\"tensor\":7},{\"bigint\":\"000000000000000001\"},"
		   "{\"storage\":\"0\"},{\"dict\":{},\"origin\":{\"call\":[{\"global\":"
		   "\"collections.OrderedDict\"},{\"tuple\":[]}]}}]");
	tpc_err e;
	tpc_err_init(&e);
	tpc_value *back = tpc_value_from_json(j, strlen(j), resolver, NULL, &e);
	assert_non_null(back);
	assert_true(tpc_value_equal(l, back));
	assert_int_equal(tpc_value_global_split(back->items[14], NULL), strlen("pkg.mod"));
	free(j);
	tpc_value_unref(back);
	tpc_value_unref(l);
}

static void test_json_floats_exact(void **state)
{
	(void)state;
	const double xs[] = {0.0, -0.0, NAN, -NAN, INFINITY, -INFINITY, 5e-324, 1.7976931348623157e308,
			     0.1, 1.0 / 3.0};
	tpc_value *l = tpc_value_new(TPC_V_LIST);
	for (size_t i = 0; i < sizeof(xs) / sizeof(xs[0]); i++)
		tpc_value_append(l, tpc_value_float(xs[i]));
	tpc_value_append(l, tpc_value_int(INT64_MIN));
	tpc_value_append(l, tpc_value_int((int64_t)1 << 53));
	tpc_value_append(l, tpc_value_int(((int64_t)1 << 53) + 1));
	assert_json_round_trip(l);
	tpc_value_unref(l);
}

static void expect_bad_json(const char *text, const char *msg)
{
	tpc_err e;
	tpc_err_init(&e);
	tpc_value *v = tpc_value_from_json(text, strlen(text), resolver, NULL, &e);
	if (v)
		fail_msg("accepted bad json %s", text);
	assert_int_equal(e.code, TPC_EINPUT);
	if (!strstr(e.msg, msg))
		fail_msg("json %s: message '%s' lacks '%s'", text, e.msg, msg);
}

static void test_json_malformed(void **state)
{
	(void)state;
	expect_bad_json("", "malformed");
	expect_bad_json("[1,", "malformed");
	expect_bad_json("[1] x", "trailing");
	expect_bad_json("{\"what\": 1}", "unknown tagged");
	expect_bad_json("{\"bytes\": \"abc\"}", "odd length");
	expect_bad_json("{\"bytes\": \"zz\"}", "non-hex");
	expect_bad_json("{\"float\": \"1.5x\"}", "tagged");
	expect_bad_json("{\"int\": \"99999999999999999999\"}", "tagged");
	expect_bad_json("{\"dict\": {\"a\": 1, \"a\": 2}}", "duplicate");
	expect_bad_json("{\"tensor\": \"nope\"}", "unknown tensor");
	expect_bad_json("{\"call\": [1]}", "tagged");
	expect_bad_json("{\"tuple\": [], \"origin\": {\"call\": [1, {\"tuple\": []}]}}", "tagged");
	expect_bad_json("{\"dict\": {}, \"origin\": 5}", "tagged");
	expect_bad_json("{\"global\": \"nodot\"}", "tagged");
	/* deeper than cJSON's nesting limit: refused, not a crash */
	size_t n = 100000;
	char *deep = malloc(2 * n + 1);
	memset(deep, '[', n);
	memset(deep + n, ']', n);
	deep[2 * n] = '\0';
	expect_bad_json(deep, "nested deeper");
	free(deep);
}

/* x = [x, x] forty times: 2^40 values of text. Refused at once, not after a
 * gigabyte of output. */
static void test_json_shared_blowup(void **state)
{
	(void)state;
	tpc_value *x = tpc_value_int(0);
	for (int i = 0; i < 40; i++) {
		tpc_value *l = tpc_value_new(TPC_V_LIST);
		tpc_value_append(l, tpc_value_ref(x));
		tpc_value_append(l, x);
		x = l;
	}
	clock_t t0 = clock();
	assert_null(tpc_value_to_json(x, NULL, NULL));
	assert_true((double)(clock() - t0) / CLOCKS_PER_SEC < 5.0);
	tpc_value_unref(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scalars_and_kinds),
		cmocka_unit_test(test_dict_semantics),
		cmocka_unit_test(test_dict_large),
		cmocka_unit_test(test_deep_nesting),
		cmocka_unit_test(test_json_encoding),
		cmocka_unit_test(test_json_floats_exact),
		cmocka_unit_test(test_json_malformed),
		cmocka_unit_test(test_json_shared_blowup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
