/*
 * test_pickle_writer.c - the pickle writer: CPython's batching byte for byte,
 * the low-level emitters, seeded random trees written and read back (the seed
 * printed; TPC_TEST_SEED replays one), and CPython loading what it writes.
 */
#include "pickle_test.h"

static void assert_sha(const tpc_value *v, const char *hex, size_t len)
{
	tpc_buf b;
	char got[65];
	write_tree(v, &b, false);
	assert_int_equal(b.len, len);
	sha_hex(b.p, b.len, got);
	assert_string_equal(got, hex);
	tpc_value *back = load_ok(b.p, b.len, NULL);
	assert_true(tpc_value_equal(v, back));
	tpc_value_unref(back);
	tpc_buf_release(&b);
}

/* CPython's batching, including its empty MARK SETITEMS after 1000 items
 * (sizes and SHA-256 of pickle.dumps(x, protocol=2) for {i: i for i in
 * range(1000)}, list(range(1001)) and OrderedDict((i, i) for i in range(1001))). */
static void test_writer_batches(void **state)
{
	(void)state;
	tpc_value *d = tpc_value_new(TPC_V_DICT), *l = tpc_value_new(TPC_V_LIST);
	tpc_value *od = tpc_value_new(TPC_V_DICT), *oc = tpc_value_new(TPC_V_CALL);
	for (int i = 0; i < 1000; i++)
		tpc_value_set(d, tpc_value_int(i), tpc_value_int(i));
	for (int i = 0; i < 1001; i++) {
		tpc_value_append(l, tpc_value_int(i));
		tpc_value_set(od, tpc_value_int(i), tpc_value_int(i));
	}
	tpc_value_append(oc, tpc_value_global("collections", "OrderedDict"));
	tpc_value_append(oc, tpc_value_new(TPC_V_TUPLE));
	tpc_value_set_origin(od, oc);
	assert_sha(d, "eb316fcf8ef21e40a9527c2dbcc965f288ee00973c4bfe3d61452701b55ebd32", 5498);
	assert_sha(l, "ce66e289147d5c0923016225d5d7c546d0f0061e438184a23c47db924e6cdbd5", 2757);
	assert_sha(od, "eb8fcfc93fc6bba759389d4e4b614052eef0ca7f28edb06a2e6866643686e665", 5531);
	tpc_value_unref(d);
	tpc_value_unref(l);
	tpc_value_unref(od);
}

/* Opcodes of a protocol-2 pickle we wrote: all inside torch's weights_only
 * set (FORMATS.md §1.11). */
static bool weights_only_opcodes(const uint8_t *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		uint8_t op = p[i++];
		size_t arg;
		switch (op) {
		case TPC_PK_MARK: case TPC_PK_STOP: case TPC_PK_NONE: case TPC_PK_NEWTRUE:
		case TPC_PK_NEWFALSE: case TPC_PK_EMPTY_TUPLE: case TPC_PK_EMPTY_LIST:
		case TPC_PK_EMPTY_DICT: case TPC_PK_TUPLE: case TPC_PK_TUPLE1: case TPC_PK_TUPLE2:
		case TPC_PK_TUPLE3: case TPC_PK_APPEND: case TPC_PK_APPENDS: case TPC_PK_SETITEM:
		case TPC_PK_SETITEMS: case TPC_PK_REDUCE: case TPC_PK_BUILD: case TPC_PK_NEWOBJ:
		case TPC_PK_BINPERSID:
			arg = 0;
			break;
		case TPC_PK_PROTO: case TPC_PK_BININT1: case TPC_PK_BINGET: case TPC_PK_BINPUT:
			arg = 1;
			break;
		case TPC_PK_BININT2:
			arg = 2;
			break;
		case TPC_PK_BININT: case TPC_PK_LONG_BINGET: case TPC_PK_LONG_BINPUT:
			arg = 4;
			break;
		case TPC_PK_BINFLOAT:
			arg = 8;
			break;
		case TPC_PK_LONG1:
			if (i >= n)
				return false;
			arg = 1 + (size_t)p[i];
			break;
		case TPC_PK_BINUNICODE:
			if (i + 4 > n)
				return false;
			arg = 4 + (size_t)tpc_rd32le(p + i);
			break;
		case TPC_PK_GLOBAL: {
			const uint8_t *a = memchr(p + i, '\n', n - i);
			const uint8_t *b = a ? memchr(a + 1, '\n', n - (size_t)(a + 1 - p)) : NULL;
			if (!b)
				return false;
			arg = (size_t)(b + 1 - (p + i));
			break;
		}
		default:
			return false;
		}
		if (arg > n - i)
			return false;
		i += arg;
	}
	return true;
}

/* A random tree that the writer and reader both represent exactly. At most
 * about `budget` nodes, so that big containers (2100 items, to cross the
 * 1000-item batches) cannot multiply. */
static long budget;

static tpc_value *random_tree(int depth, tpc_value **pool, size_t *npool)
{
	int k = rand() % (depth > 0 && budget > 0 ? 14 : 8);
	tpc_value *v = NULL;
	budget--;
	if (*npool && rand() % 8 == 0)
		return tpc_value_ref(pool[(size_t)rand() % *npool]); /* shared subtree */
	switch (k) {
	case 0:
		v = tpc_value_new(TPC_V_NONE);
		break;
	case 1:
		v = tpc_value_bool(rand() % 2);
		break;
	case 2: {
		uint64_t u = ((uint64_t)rand() << 40) ^ ((uint64_t)rand() << 16) ^ (uint64_t)rand();
		int64_t x = (int64_t)(u >> (rand() % 64));
		v = tpc_value_int(rand() % 2 ? x : -x);
		break;
	}
	case 3: {
		uint64_t u = ((uint64_t)rand() << 42) ^ ((uint64_t)rand() << 21) ^ (uint64_t)rand();
		double d;
		memcpy(&d, &u, sizeof(d)); /* any bits, NaNs included */
		v = tpc_value_float(d);
		break;
	}
	case 4: {
		char s[40];
		size_t n = (size_t)rand() % sizeof(s);
		for (size_t i = 0; i < n; i++)
			s[i] = (char)rand();
		v = rand() % 2 ? tpc_value_str(s, n) : tpc_value_bytes(s, n);
		break;
	}
	case 5: {
		uint8_t b[20];
		size_t n = 9 + (size_t)rand() % 11;
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t)rand();
		b[n - 1] = (uint8_t)(rand() % 2 ? 0x40 : 0x80); /* not a redundant sign byte */
		v = tpc_value_bytes(b, n);
		v->kind = TPC_V_BIGINT;
		break;
	}
	case 6:
		v = tpc_value_global(rand() % 2 ? "pkg.mod" : "m", rand() % 2 ? "Name" : "Outer.Inner");
		break;
	case 7:
		v = S(rand() % 2 ? "storage" : "cpu");
		break;
	case 8:
	case 9:
	case 10: {
		static const tpc_vkind kinds[] = {TPC_V_LIST, TPC_V_TUPLE, TPC_V_SET};
		v = tpc_value_new(kinds[k - 8]);
		int n = rand() % (rand() % 10 == 0 ? 2100 : 6);
		for (int i = 0; i < n; i++)
			tpc_value_append(v, random_tree(depth - 1, pool, npool));
		break;
	}
	case 11:
	case 12: {
		v = tpc_value_new(TPC_V_DICT);
		int n = rand() % (rand() % 10 == 0 ? 2100 : 6);
		for (int i = 0; i < n; i++) {
			char key[32];
			snprintf(key, sizeof(key), "k%d", i);
			tpc_value *kv = rand() % 2 ? S(key) : tpc_value_int(i);
			tpc_value_set(v, kv, random_tree(depth - 1, pool, npool));
		}
		if (n && k == 12) { /* an OrderedDict, maybe with a state */
			tpc_value *c = tpc_value_new(TPC_V_CALL);
			tpc_value_append(c, tpc_value_global("collections", "OrderedDict"));
			tpc_value_append(c, tpc_value_new(TPC_V_TUPLE));
			if (rand() % 2) {
				tpc_value *st = tpc_value_new(TPC_V_DICT);
				tpc_value_set(st, S("_metadata"), random_tree(depth - 1, pool, npool));
				tpc_value_append(c, st);
			}
			tpc_value_set_origin(v, c);
		}
		break;
	}
	default: { /* an opaque call, maybe with a state */
		v = tpc_value_new(TPC_V_CALL);
		tpc_value_append(v, tpc_value_global("argparse", "Namespace"));
		tpc_value *a = tpc_value_new(TPC_V_TUPLE);
		int n = rand() % 5;
		for (int i = 0; i < n; i++)
			tpc_value_append(a, random_tree(depth - 1, pool, npool));
		tpc_value_append(v, a);
		if (rand() % 2)
			tpc_value_append(v, random_tree(depth - 1, pool, npool));
		break;
	}
	}
	if (*npool < 64)
		pool[(*npool)++] = v;
	return v;
}

static void test_writer_random_round_trip(void **state)
{
	(void)state;
	test_seed("test_writer_random_round_trip");
	for (int round = 0; round < 200; round++) {
		tpc_value *pool[64];
		size_t npool = 0;
		budget = 6000;
		tpc_value *v = random_tree(5, pool, &npool);
		for (int share = 0; share < 2; share++) {
			tpc_buf b;
			write_tree(v, &b, share);
			if (!weights_only_opcodes((const uint8_t *)b.p, b.len))
				fail_msg("round %d: opcode outside the weights_only set", round);
			tpc_pickle_opts o = permissive();
			o.max_tree = UINT64_MAX;
			tpc_value *back = load_ok(b.p, b.len, &o);
			if (!tpc_value_equal(v, back))
				fail_msg("round %d: tree changed through write/read", round);
			/* a second write of what we read is byte-identical */
			tpc_buf b2;
			write_tree(back, &b2, share);
			assert_int_equal(b.len, b2.len);
			assert_memory_equal(b.p, b2.p, b.len);
			tpc_buf_release(&b2);
			tpc_buf_release(&b);
			tpc_value_unref(back);
		}
		tpc_value_unref(v);
	}
}

static void test_writer_low_level(void **state)
{
	(void)state;
	tpc_buf b;
	tpc_pickle_writer w;
	tpc_err e;
	tpc_err_init(&e);
	tpc_buf_init(&b);
	tpc_pickle_writer_init(&w, &b);
	tpc_pickle_emit_proto(&w);
	tpc_pickle_emit_op(&w, TPC_PK_MARK);
	tpc_pickle_emit_str(&w, "storage", 7, true);
	tpc_pickle_emit_str(&w, "storage", 7, true);  /* BINGET 0 */
	tpc_pickle_emit_global(&w, "builtins", "set"); /* protocol-2 name */
	tpc_pickle_emit_global(&w, "builtins", "set"); /* BINGET 1 */
	tpc_pickle_emit_int(&w, -129);
	tpc_pickle_emit_int(&w, (int64_t)1 << 40);
	tpc_pickle_emit_float(&w, 1.0);
	tpc_pickle_emit_bool(&w, false);
	tpc_pickle_emit_none(&w);
	tpc_pickle_emit_op(&w, TPC_PK_TUPLE);
	assert_int_equal(tpc_pickle_writer_finish(&w, &e), 0);
	static const char want[] =
		"\x80\x02(X\x07\x00\x00\x00storageq\x00h\x00" "c__builtin__\nset\nq\x01h\x01"
		"J\x7f\xff\xff\xff\x8a\x06\x00\x00\x00\x00\x00\x01G?\xf0\x00\x00\x00\x00\x00\x00\x89Nt.";
	assert_int_equal(b.len, sizeof(want) - 1);
	assert_memory_equal(b.p, want, sizeof(want) - 1);
	/* memo indices past 255 use LONG_BINPUT / LONG_BINGET */
	w.memo_next = 300;
	tpc_buf_reset(&b);
	assert_int_equal(tpc_pickle_emit_put(&w), 300);
	tpc_pickle_emit_get(&w, 300);
	assert_memory_equal(b.p, "r\x2c\x01\x00\x00j\x2c\x01\x00\x00", 10);
	tpc_pickle_writer_release(&w);
	tpc_buf_release(&b);
}

/* CPython itself loads what we write (skipped without /usr/bin/python3). */
static void test_writer_python_loads(void **state)
{
	(void)state;
	if (access("/usr/bin/python3", X_OK)) {
		skip();
		return;
	}
	tpc_pickle_opts o = permissive();
	tpc_value *v = load_ok(PK_MIXED_P4, sizeof(PK_MIXED_P4), &o);
	tpc_buf b;
	write_tree(v, &b, false);
	char path[] = "/tmp/tpc_pickle_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b.p, b.len), (ssize_t)b.len);
	close(fd);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "cd / && /usr/bin/python3 -c \"import pickle, argparse, collections as c, sys; "
		 "o = pickle.load(open('%s', 'rb')); "
		 "w = {'s': 'h\\u00e9llo \\u65e5\\u672c', 'b': b'raw\\x00', 'ba': b'ba', 'set': {3}, "
		 "'fs': {4}, 'ns': argparse.Namespace(lr=0.5), 'big': 2**70, 'neg': -5, "
		 "'t': (1, 2, 3, 4), 'l': ['x'] * 3, 'od': c.OrderedDict(k=1)}; "
		 "sys.exit(0 if o == w and type(o['od']) is c.OrderedDict else 1)\"",
		 path);
	int rc = system(cmd);
	unlink(path);
	assert_int_equal(rc, 0);
	tpc_buf_release(&b);
	tpc_value_unref(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_writer_batches),
		cmocka_unit_test(test_writer_low_level),
		cmocka_unit_test(test_writer_random_round_trip),
		cmocka_unit_test(test_writer_python_loads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
