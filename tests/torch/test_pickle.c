/*
 * test_pickle.c - the pickle VM.
 *
 * Bad input first: every hardening rule has a handcrafted pickle and the error
 * it must produce. Then real pickles written by CPython 3.11 and torch 1.13
 * (pickle_test.c), read and written back byte for byte; seeded mutations that
 * print their seed (TPC_TEST_SEED replays one). The writer's own tests are in
 * test_pickle_writer.c.
 */
#include "pickle_test.h"

/* ---- hardening: one bad pickle per rule ---- */

static void test_bad_type_confusion(void **state)
{
	(void)state;
	BAD("\x80\x02]K\x01K\x02s.", "SETITEM: needs a dict below it, found a list", 7);
	BAD("\x80\x02}K\x01" "a.", "APPEND: needs a list below it, found a dict", 5);
	BAD("\x80\x02)(K\x01" "e.", "APPENDS: needs a list below it, found a tuple", 6);
	BAD("\x80\x02](K\x01K\x02u.", "SETITEMS: needs a dict below it, found a list", 8);
	BAD("\x80\x02](K\x01\x90.", "ADDITEMS: needs a set below it, found a list", 6);
	BAD("\x80\x02}]K\x01s.", "dict key is an unhashable list", 6);
	BAD("\x80\x02}(K\x01u.", "odd number of items", 6);
	BAD("\x80\x02]}K\x01K\x01sb.", "cannot set state on a list", 9);
	BAD("\x80\x02" "cx\ny\n)R}b}b.", "object built twice", 12);
	BAD("\x80\x02" "cx\ny\n]R.", "arguments are a list, not a tuple", 8);
	BAD("\x80\x02" "cx\ny\n]\x81.", "NEWOBJ: expects a class, an argument tuple", 8);
	BAD("\x80\x02K\x01K\x02\x93.", "module and name must be strings", 6);
	BAD("\x80\x02K\x01Q.", "persistent id without a loader", 4);
	/* BUILD with an empty state on a plain list is a no-op, as in Python */
	tpc_value *v = OK("\x80\x02]}b.");
	assert_int_equal(v->kind, TPC_V_LIST);
	tpc_value_unref(v);
	v = OK("\x80\x02]Nb.");
	tpc_value_unref(v);
}

static void test_bad_memo(void **state)
{
	(void)state;
	BAD("\x80\x02h\x05.", "memo slot 5 read before it was set", 2);
	BAD("\x80\x02j\xff\xff\xff\xff.", "memo slot 4294967295 read before it was set", 2);
	BAD("\x80\x02g7\n.", "memo slot 7 read before it was set", 2);
	BAD("\x80\x02gx\n.", "malformed memo index", 2);
	BAD("\x80\x02q\x00.", "stack underflow", 2);
	/* a lone LONG_BINPUT 0xffffffff is over the index limit: refused, no 32 GiB memo */
	BAD("\x80\x02Nr\xff\xff\xff\xff.", "memo index 4294967295 exceeds the limit", 3);
	/* sparse indices under the limit cost one entry each */
	tpc_value *v = OK("\x80\x02Nr\xff\xff\xff\x00\x30K\x07r\x00\x00\x00\x00\x30j\xff\xff\xff\x00.");
	assert_int_equal(v->kind, TPC_V_NONE);
	tpc_value_unref(v);
	/* PUT over an existing slot replaces it; MEMOIZE numbers by entry count */
	v = OK("\x80\x04K\x01\x94K\x02\x94\x30\x30K\x03q\x01\x30h\x01.");
	assert_int_equal(v->ival, 3);
	tpc_value_unref(v);
	v = OK("\x80\x04K\x01\x94K\x02\x94\x30\x30h\x01.");
	assert_int_equal(v->ival, 2);
	tpc_value_unref(v);
	tpc_pickle_opts o;
	tpc_pickle_opts_init(&o);
	o.max_memo = 10;
	expect_bad_opts("\x80\x02Nq\x0a.", 6, &o, "memo index 10 exceeds the limit of 10", 3);
}

static void test_bad_stack(void **state)
{
	(void)state;
	BAD("\x80\x02.", "STOP: stack underflow", 2);
	BAD("\x80\x02\x30.", "POP: stack underflow", 2);
	BAD("\x80\x02\x32.", "DUP: stack underflow", 2);
	BAD("\x80\x02K\x01(a.", "APPEND: stack underflow", 5);
	BAD("\x80\x02K\x01(\x85.", "TUPLE1: stack underflow", 5);
	BAD("\x80\x02K\x01(K\x02\x86.", "TUPLE2: stack underflow", 7);
	BAD("\x80\x02K\x01(.", "STOP: stack underflow", 5);
	BAD("\x80\x02K\x01t.", "TUPLE: no MARK to close", 4);
	BAD("\x80\x02]K\x01" "e.", "APPENDS: no MARK to close", 5);
	BAD("\x80\x02(K\x01" "e.", "APPENDS: stack underflow", 5);
	BAD("\x80\x02\x31.", "POP_MARK: no MARK to close", 2);
	BAD("\x80\x02R.", "REDUCE: stack underflow", 2);
	BAD("\x80\x02" "b.", "BUILD: stack underflow", 2);
	/* POP at a MARK pops the mark, as CPython does */
	tpc_value *v = OK("\x80\x02K\x05(\x30.");
	assert_int_equal(v->ival, 5);
	tpc_value_unref(v);
	tpc_pickle_opts o;
	tpc_pickle_opts_init(&o);
	o.max_stack = 3;
	expect_bad_opts("\x80\x02NNNN", 6, &o, "stack deeper than 3 values", 5);
	o.max_stack = 0;
	o.max_objects = 3;
	expect_bad_opts("\x80\x02NNNN", 6, &o, "creates more than 3 values", 5);
}

/* Python >= 3.11 pickles an enum member as getattr(EnumClass, 'name')
 * (DeepSpeed's ZeroStageEnum): accepted as data in that form only. */
static void test_enum_getattr(void **state)
{
	(void)state;
#define GA "\x80\x02" "cbuiltins\ngetattr\n"
#define ZS "cdeepspeed.runtime.zero.config\nZeroStageEnum\n"
	/* getattr(ZeroStageEnum, 'gradients') */
	static const char member[] = GA ZS "X\x09\x00\x00\x00gradients\x86R.";
	tpc_value *v = load_ok(member, sizeof(member) - 1, NULL);
	assert_int_equal(v->kind, TPC_V_CALL);
	assert_string_equal(v->items[0]->str, "builtins.getattr");
	assert_string_equal(v->items[1]->items[0]->str, "deepspeed.runtime.zero.config.ZeroStageEnum");
	tpc_value_unref(v);
	/* strict (weights_only-like) still refuses getattr */
	tpc_pickle_opts o;
	tpc_pickle_opts_init(&o);
	o.policy = TPC_PICKLE_REFUSE_UNKNOWN;
	expect_bad_opts(member, sizeof(member) - 1, &o, "refusing global 'builtins.getattr'", -1);
	/* a private member, a builtin class, a non-class object, a bare getattr,
	 * getattr in a list, and an enum member called: all refused */
	const char *msg = "uses builtins.getattr other than as getattr(class, 'member')";
	BAD(GA ZS "X\x07\x00\x00\x00__dict_\x86R.", msg, -1);
	BAD(GA "cbuiltins\nobject\nX\x0e\x00\x00\x00__subclasses__\x86R.", msg, -1);
	BAD(GA "cbuiltins\nobject\nX\x04\x00\x00\x00mro_\x86R.", msg, -1);
	BAD(GA "K\x01K\x02\x86X\x05\x00\x00\x00" "count\x86R.", msg, -1);
	BAD(GA ".", msg, -1);
	BAD(GA "\x94]h\x00" "a.", msg, -1);
	BAD(GA ZS "X\x09\x00\x00\x00gradients\x86R)R.", msg, -1);
#undef GA
#undef ZS
}

static void test_bad_lengths(void **state)
{
	(void)state;
	BAD("\x80\x02\x8b\xff\xff\xff\x7f", "LONG4: integer of 2147483647 bytes exceeds the limit", 2);
	BAD("\x80\x02\x8b\x00\x00\x00\x80", "LONG4: negative length", 2);
	BAD("\x80\x02\x8b\xe8\x03\x00\x00" "abc", "truncated pickle: LONG4 needs 1000 bytes, 3 left", 2);
	BAD("\x80\x02X\xff\xff\xff\xff", "BINUNICODE: object of 4294967295 bytes exceeds the limit", 2);
	BAD("\x80\x02X\x10\x00\x00\x00" "abc", "truncated pickle: BINUNICODE needs 16 bytes, 3 left", 2);
	BAD("\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x80", "BINUNICODE8: object of 9223372036854775808", 2);
	BAD("\x80\x04\x8e\x64\x00\x00\x00\x00\x00\x00\x00xyz", "BINBYTES8 needs 100 bytes, 3 left", 2);
	BAD("\x80\x05\x96\xff\xff\xff\xff\xff\xff\xff\xff", "BYTEARRAY8: object of", 2);
	BAD("\x80\x02T\xff\xff\xff\xff", "BINSTRING: negative length", 2);
	BAD("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xffN.", "FRAME of 18446744073709551615 bytes", 2);
	BAD("\x80\x02\x8a\x09\x01", "LONG1 needs 9 bytes, 1 left", 2);
	BAD("\x80\x02" "cos", "GLOBAL argument has no end of line", 2);
	BAD("\x80\x02" "c\nx\n", "empty global name", 2);
	BAD("\x80\x02Ifoo\n.", "pickle INT: malformed integer", 2);
	BAD("\x80\x02L12a3L\n.", "pickle LONG: malformed integer", 2);
	BAD("\x80\x02L-\n.", "pickle LONG: malformed integer", 2);
	BAD("\x80\x02" "F1.5x\n.", "FLOAT: malformed number", 2);
	tpc_pickle_opts o;
	tpc_pickle_opts_init(&o);
	o.max_str = 2;
	expect_bad_opts("\x80\x02X\x03\x00\x00\x00" "abc.", 11, &o, "exceeds the limit of 2", 2);
	/* a line longer than the cap is refused without scanning the whole input */
	size_t n = (1u << 20) + 16;
	char *p = malloc(n);
	memset(p, 'a', n);
	p[0] = (char)0x80;
	p[1] = 2;
	p[2] = 'c';
	expect_bad(p, n, "text argument longer than", 2);
	free(p);
}

static void test_bad_opcodes(void **state)
{
	(void)state;
	BAD("\x80\x02\xff", "unknown pickle opcode 0xff", 2);
	BAD("N\x00", "unknown pickle opcode 0x00", 1);
	BAD("\x80\x06N.", "unsupported pickle protocol 6", 0);
	BAD("\x80\x02(i__main__\nX\n.", "unsupported pickle opcode INST (0x69)", 3);
	BAD("\x80\x02S'x'\n.", "unsupported pickle opcode STRING (0x53)", 2);
	BAD("\x80\x02\x82\x01.", "unsupported pickle opcode EXT1", 2);
	BAD("\x80\x05\x97.", "unsupported pickle opcode NEXT_BUFFER", 2);
	BAD("", "truncated pickle: data ends before STOP", 0);
	BAD("\x80\x02N", "truncated pickle: data ends before STOP", 3);
	/* the path and the base offset are in the error */
	tpc_pickle_opts o;
	tpc_pickle_opts_init(&o);
	o.path = "model.pt";
	o.base_offset = 0x1000;
	tpc_err e;
	assert_null(load_opts("\x80\x02\xfe", 3, &o, &e));
	assert_string_equal(e.path, "model.pt");
	assert_int_equal(e.offset, 0x1002);
	char buf[512];
	tpc_err_format(&e, buf, sizeof(buf));
	assert_non_null(strstr(buf, "'model.pt': unknown pickle opcode 0xfe (at byte offset 4098"));
}

/* 1e6 nested MARKs, a million TUPLE1s, and a deep list built through the memo. */
static void test_bad_depth(void **state)
{
	(void)state;
	size_t n = 1000000;
	char *p = malloc(n + 4);
	p[0] = (char)0x80;
	p[1] = 2;
	memset(p + 2, '(', n);
	p[n + 2] = '.';
	expect_bad(p, n + 3, "MARK: more than 65536 nested marks", 2 + 65536);
	/* N then TUPLE1 x 1e6: constant stack, a million levels */
	p[2] = 'N';
	memset(p + 3, 0x85, n);
	p[n + 3] = '.';
	expect_bad(p, n + 4, "nests deeper than 10000 containers", (int64_t)n + 3);
	/* with the limit raised it loads, and every walker copes without recursion */
	tpc_pickle_opts o;
	tpc_pickle_opts_init(&o);
	o.max_depth = 2 * n;
	tpc_value *v = load_ok(p, n + 4, &o);
	char *j = tpc_value_to_json(v, NULL, NULL);
	assert_non_null(j);
	free(j);
	tpc_buf b;
	write_tree(v, &b, false);
	tpc_value *back = load_ok(b.p, b.len, &o);
	assert_true(tpc_value_equal(v, back));
	tpc_buf_release(&b);
	tpc_value_unref(back);
	tpc_value_unref(v);
	free(p);
	/* x = []; repeat: x = [x]  through BINPUT/BINGET (constant stack) */
	size_t reps = 20000;
	p = malloc(5 + reps * 7 + 4);
	size_t k = 0;
	p[k++] = (char)0x80;
	p[k++] = 2;
	p[k++] = ']';
	p[k++] = 'q';
	p[k++] = 0;
	for (size_t i = 0; i < reps; i++) {
		memcpy(p + k, "0]h\x00" "aq\x00", 7);
		k += 7;
	}
	p[k++] = '.';
	expect_bad(p, k, "nests deeper than 10000 containers", (int64_t)k - 1);
	free(p);
}

/* x = (x, x) forty times: 80 bytes that expand to 2^40 values. */
static void test_bad_shared_blowup(void **state)
{
	(void)state;
	char p[512];
	size_t k = 0;
	p[k++] = (char)0x80;
	p[k++] = 2;
	p[k++] = 'N';
	for (int i = 0; i < 40; i++) {
		p[k++] = 0x32; /* DUP */
		p[k++] = (char)0x86;
	}
	p[k++] = '.';
	expect_bad(p, k, "expands to more than 67108864 values through shared subtrees",
		   (int64_t)k - 1);
}

static void test_bad_cycles(void **state)
{
	(void)state;
	BAD("\x80\x02]q\x00h\x00" "a.", "APPEND: a list would contain itself", 7);
	/* CPython's pickle of a = []; a.append([a]) */
	expect_bad((const char *)PK_CYCLE_P2, sizeof(PK_CYCLE_P2), "APPEND: makes a reference cycle",
		   11);
	/* through a dict value and through a call's state */
	BAD("\x80\x02}q\x00]q\x01h\x00" "a0K\x01h\x01s.", "SETITEM: makes a reference cycle", 16);
	BAD("\x80\x02" "cm\nC\n)Rq\x00]q\x01h\x00" "ab.", "BUILD: makes a reference cycle", 17);
	/* shared but acyclic is fine */
	tpc_value *v = OK("\x80\x02]q\x00]h\x00" "ah\x00\x86.");
	assert_int_equal(v->kind, TPC_V_TUPLE);
	assert_ptr_equal(v->items[0]->items[0], v->items[1]);
	tpc_value_unref(v);
}

static void expect_every_prefix_fails(const uint8_t *p, size_t n)
{
	tpc_pickle_opts o = permissive();
	for (size_t cut = 0; cut < n; cut++) {
		tpc_err e;
		tpc_value *v = load_opts(p, cut, &o, &e);
		if (v)
			fail_msg("prefix of %zu/%zu bytes accepted", cut, n);
		assert_int_equal(e.code, TPC_EINPUT);
		assert_true(e.msg[0] != '\0');
		assert_true(e.offset >= 0 && (size_t)e.offset <= cut);
	}
}

static void test_truncation_everywhere(void **state)
{
	(void)state;
	expect_every_prefix_fails(PK_SIMPLE_P2, sizeof(PK_SIMPLE_P2));
	expect_every_prefix_fails(PK_MIXED_P4, sizeof(PK_MIXED_P4));
	expect_every_prefix_fails(PK_MIXED_P5, sizeof(PK_MIXED_P5));
	expect_every_prefix_fails(PK_STATE_DICT, sizeof(PK_STATE_DICT));
	expect_every_prefix_fails(PK_INTS_P2, sizeof(PK_INTS_P2));
	expect_every_prefix_fails(PK_SUBCLASS_P2, sizeof(PK_SUBCLASS_P2));
}


/* Random byte flips, inserts and cuts: a clean result or a clean error. */
static void test_mutations(void **state)
{
	(void)state;
	test_seed("test_mutations");
	const struct {
		const uint8_t *p;
		size_t n;
	} fx[] = {
		{PK_SIMPLE_P2, sizeof(PK_SIMPLE_P2)}, {PK_MIXED_P4, sizeof(PK_MIXED_P4)},
		{PK_STATE_DICT, sizeof(PK_STATE_DICT)}, {PK_NAMESPACE_P2, sizeof(PK_NAMESPACE_P2)},
		{PK_SUBCLASS_P2, sizeof(PK_SUBCLASS_P2)}, {PK_MIXED_P5, sizeof(PK_MIXED_P5)},
	};
	tpc_pickle_opts o = permissive();
	uint8_t buf[1024];
	for (int round = 0; round < 3000; round++) {
		size_t f = (size_t)rand() % LEN(fx), n = fx[f].n;
		memcpy(buf, fx[f].p, n);
		int edits = 1 + rand() % 4;
		for (int k = 0; k < edits; k++) {
			size_t at = (size_t)rand() % n;
			switch (rand() % 4) {
			case 0:
				buf[at] = (uint8_t)rand();
				break;
			case 1:
				buf[at] ^= (uint8_t)(1u << (rand() % 8));
				break;
			case 2:
				n = at + 1; /* cut */
				break;
			default:
				if (n + 1 < sizeof(buf)) {
					memmove(buf + at + 1, buf + at, n - at);
					buf[at] = (uint8_t)rand();
					n++;
				}
				break;
			}
		}
		tpc_err e;
		tpc_value *v = NULL;
		uint64_t used = 0;
		tpc_err_init(&e);
		int ret = tpc_pickle_load_from_buffer(buf, n, &o, &v, &used, &e);
		if (ret) {
			assert_int_equal(ret, TPC_EINPUT);
			assert_null(v);
			assert_true(e.msg[0] != '\0');
			continue;
		}
		assert_true(used <= n);
		/* anything accepted must also write and read back */
		tpc_buf b;
		write_tree(v, &b, false);
		tpc_value *back = load_ok(b.p, b.len, &o);
		tpc_buf_release(&b);
		tpc_value_unref(back);
		tpc_value_unref(v);
	}
}

/* ---- dangerous globals: never run, classified, refused by default ---- */

static void test_dangerous_globals(void **state)
{
	(void)state;
	unlink(MARKER);
	expect_bad((const char *)PK_OS_SYSTEM_P2, sizeof(PK_OS_SYSTEM_P2),
		   "refusing global 'posix.system'", 2);
	expect_bad((const char *)PK_EVAL_P2, sizeof(PK_EVAL_P2), "refusing global 'builtins.eval'", 2);
	expect_bad((const char *)PK_POPEN_P4, sizeof(PK_POPEN_P4),
		   "refusing global 'subprocess.Popen'", -1);
	BAD("\x80\x02" "cnt\nsystem\n.", "refusing global 'nt.system'", 2);
	BAD("\x80\x02" "cos\nsystem\n.", "refusing global 'os.system'", 2);

	/* allowed through: data only, with the classification recorded */
	tpc_pickle_globals g = {0};
	tpc_pickle_opts o = permissive();
	o.globals = &g;
	tpc_value *v = load_ok(PK_OS_SYSTEM_P2, sizeof(PK_OS_SYSTEM_P2), &o);
	assert_int_equal(v->kind, TPC_V_CALL);
	assert_string_equal(v->items[0]->str, "posix.system");
	assert_string_equal(v->items[1]->items[0]->str, "touch " MARKER);
	tpc_value_unref(v);
	tpc_value_unref(load_ok(PK_EVAL_P2, sizeof(PK_EVAL_P2), &o));
	tpc_value_unref(load_ok(PK_POPEN_P4, sizeof(PK_POPEN_P4), &o));
	tpc_value_unref(load_ok(PK_OS_SYSTEM_P2, sizeof(PK_OS_SYSTEM_P2), &o));
	assert_int_equal(g.n, 3);
	assert_string_equal(g.v[0].module, "posix");
	assert_string_equal(g.v[0].name, "system");
	assert_int_equal(g.v[0].count, 2);
	assert_int_equal(g.v[0].cls, TPC_PICKLE_DANGEROUS);
	assert_string_equal(g.v[1].module, "builtins"); /* __builtin__ mapped */
	assert_string_equal(g.v[1].name, "eval");
	assert_int_equal(g.v[1].cls, TPC_PICKLE_DANGEROUS);
	assert_string_equal(g.v[2].module, "subprocess");
	assert_int_equal(g.v[2].cls, TPC_PICKLE_DANGEROUS);
	tpc_pickle_globals_release(&g);
	o.globals = NULL;
	/* and nothing ran */
	assert_int_equal(access(MARKER, F_OK), -1);

	/* the strict policy takes torch's allow-list only */
	o.policy = TPC_PICKLE_REFUSE_UNKNOWN;
	expect_bad_opts(PK_NAMESPACE_P2, sizeof(PK_NAMESPACE_P2), &o,
			"global 'argparse.Namespace' is not on the allow-list", 2);
	tpc_value_unref(load_ok(PK_STATE_DICT, sizeof(PK_STATE_DICT), &o));
	tpc_value_unref(load_ok(PK_SIMPLE_P2, sizeof(PK_SIMPLE_P2), &o));
}

static void test_global_classes(void **state)
{
	(void)state;
	static const char *const safe[][2] = {
		{"collections", "OrderedDict"}, {"torch._utils", "_rebuild_tensor_v2"},
		{"torch._utils", "_rebuild_parameter"}, {"torch", "FloatStorage"},
		{"torch", "BFloat16Storage"}, {"torch.storage", "UntypedStorage"},
		{"torch", "bfloat16"}, {"torch", "float8_e4m3fn"}, {"torch", "Size"},
		{"torch", "per_channel_affine"}, {"torch.nn.parameter", "Parameter"},
		{"_codecs", "encode"}, {"__builtin__", "set"}, {"torch._tensor", "_rebuild_from_type_v2"},
		{"torch", "FloatTensor"},
	};
	static const char *const dangerous[][2] = {
		{"os", "system"}, {"posix", "system"}, {"nt", "system"}, {"os.path", "join"},
		{"subprocess", "Popen"}, {"subprocess", "check_output"}, {"sys", "exit"},
		{"builtins", "eval"}, {"builtins", "exec"}, {"builtins", "compile"},
		{"builtins", "open"}, {"builtins", "getattr"}, {"builtins", "__import__"},
		{"__builtin__", "apply"}, {"__builtin__", "eval"}, {"runpy", "_run_code"},
		{"socket", "create_connection"}, {"shutil", "rmtree"}, {"pty", "spawn"},
		{"commands", "getoutput"}, {"webbrowser", "open"}, {"importlib", "import_module"},
		{"pickle", "loads"}, {"_pickle", "loads"}, {"marshal", "loads"}, {"ctypes", "CDLL"},
		{"code", "InteractiveInterpreter"}, {"pdb", "run"}, {"torch", "load"},
		{"torch.hub", "load"}, {"torch.serialization", "load"}, {"operator", "attrgetter"},
		{"functools", "partial"}, {"asyncio", "subprocess"},
	};
	static const char *const unknown[][2] = {
		{"argparse", "Namespace"}, {"numpy.core.multiarray", "scalar"}, {"builtins", "len"},
		{"torch", "nonexistent"}, {"collections", "defaultdict"}, {"copyreg", "__newobj__"},
		{"osx", "thing"}, {"torch", "FloatStorageX"},
	};
	for (size_t i = 0; i < LEN(safe); i++)
		if (tpc_pickle_global_class(safe[i][0], safe[i][1]) != TPC_PICKLE_SAFE)
			fail_msg("%s.%s should be safe", safe[i][0], safe[i][1]);
	for (size_t i = 0; i < LEN(dangerous); i++)
		if (tpc_pickle_global_class(dangerous[i][0], dangerous[i][1]) != TPC_PICKLE_DANGEROUS)
			fail_msg("%s.%s should be dangerous", dangerous[i][0], dangerous[i][1]);
	for (size_t i = 0; i < LEN(unknown); i++)
		if (tpc_pickle_global_class(unknown[i][0], unknown[i][1]) != TPC_PICKLE_UNKNOWN)
			fail_msg("%s.%s should be unknown", unknown[i][0], unknown[i][1]);
	assert_string_equal(tpc_pickle_gclass_name(TPC_PICKLE_DANGEROUS), "dangerous");
	const char *m = "copy_reg", *n = "_reconstructor";
	tpc_pickle_map_name(&m, &n);
	assert_string_equal(m, "copyreg");
	m = "__builtin__";
	n = "unicode";
	tpc_pickle_map_name(&m, &n);
	assert_string_equal(m, "builtins");
	assert_string_equal(n, "str");
}

/* ---- real pickles ---- */

static void test_cpython_simple(void **state)
{
	(void)state;
	tpc_value *v = load_ok(PK_SIMPLE_P2, sizeof(PK_SIMPLE_P2), NULL);
	assert_int_equal(v->kind, TPC_V_DICT);
	assert_int_equal(v->n, 7);
	assert_int_equal(tpc_value_get(v, "a")->ival, 1);
	tpc_value *b = tpc_value_get(v, "b");
	assert_int_equal(b->kind, TPC_V_LIST);
	assert_true(b->items[1]->fval == 2.5);
	assert_string_equal(b->items[2]->str, "x");
	assert_int_equal(tpc_value_get(v, "c")->kind, TPC_V_TUPLE);
	assert_int_equal(tpc_value_get(v, "d")->kind, TPC_V_NONE);
	assert_int_equal(tpc_value_get(v, "e")->kind, TPC_V_BOOL);
	tpc_value *f = tpc_value_get(v, "f");
	assert_int_equal(f->kind, TPC_V_BYTES); /* _codecs.encode('\x00\xff', 'latin1') */
	assert_int_equal(f->len, 2);
	assert_memory_equal(f->str, "\x00\xff", 2);
	tpc_value *g = tpc_value_get(v, "g");
	assert_int_equal(g->kind, TPC_V_SET);
	assert_int_equal(g->n, 2);
	tpc_value_unref(v);
	assert_rewrites_identically(PK_SIMPLE_P2, sizeof(PK_SIMPLE_P2));

	/* the same tree built by hand writes CPython's bytes */
	tpc_value *d = tpc_value_new(TPC_V_DICT);
	tpc_value_set(d, S("a"), tpc_value_int(1));
	tpc_value *l = tpc_value_new(TPC_V_LIST);
	tpc_value_append(l, tpc_value_int(1));
	tpc_value_append(l, tpc_value_float(2.5));
	tpc_value_append(l, S("x"));
	tpc_value_set(d, S("b"), l);
	tpc_value_set(d, S("c"), tuple2(tpc_value_int(1), tpc_value_int(2)));
	tpc_value_set(d, S("d"), tpc_value_new(TPC_V_NONE));
	tpc_value_set(d, S("e"), tpc_value_bool(1));
	tpc_value_set(d, S("f"), tpc_value_bytes("\x00\xff", 2));
	tpc_value *s = tpc_value_new(TPC_V_SET);
	tpc_value_append(s, tpc_value_int(1));
	tpc_value_append(s, tpc_value_int(2));
	tpc_value_set(d, S("g"), s);
	tpc_buf out;
	write_tree(d, &out, false);
	assert_int_equal(out.len, sizeof(PK_SIMPLE_P2));
	assert_memory_equal(out.p, PK_SIMPLE_P2, sizeof(PK_SIMPLE_P2));
	tpc_buf_release(&out);
	tpc_value_unref(d);
}

static void test_cpython_protocols_4_5(void **state)
{
	(void)state;
	tpc_value *v4 = load_ok(PK_MIXED_P4, sizeof(PK_MIXED_P4), NULL);
	tpc_value *v5 = load_ok(PK_MIXED_P5, sizeof(PK_MIXED_P5), NULL);
	assert_true(tpc_value_equal(v4, v5));
	assert_string_equal(tpc_value_get(v4, "s")->str, "h\xc3\xa9llo \xe6\x97\xa5\xe6\x9c\xac");
	tpc_value *b = tpc_value_get(v4, "b"), *ba = tpc_value_get(v5, "ba");
	assert_int_equal(b->kind, TPC_V_BYTES);
	assert_memory_equal(b->str, "raw\0", 4);
	assert_int_equal(ba->kind, TPC_V_BYTES); /* BYTEARRAY8 in protocol 5, REDUCE in 4 */
	assert_string_equal(ba->str, "ba");
	assert_int_equal(tpc_value_get(v4, "set")->kind, TPC_V_SET);
	assert_int_equal(tpc_value_get(v4, "fs")->kind, TPC_V_SET);
	tpc_value *big = tpc_value_get(v4, "big");
	assert_int_equal(big->kind, TPC_V_BIGINT); /* 2**70 */
	assert_int_equal(big->len, 9);
	assert_int_equal((uint8_t)big->str[8], 0x40);
	assert_int_equal(tpc_value_get(v4, "neg")->ival, -5);
	assert_int_equal(tpc_value_get(v4, "t")->n, 4);
	tpc_value *l = tpc_value_get(v4, "l");
	assert_ptr_equal(l->items[0], l->items[2]); /* one interned 'x', memoized */
	tpc_value *ns = tpc_value_get(v4, "ns");
	assert_int_equal(ns->kind, TPC_V_CALL);
	assert_string_equal(ns->items[0]->str, "copyreg.__newobj__");
	assert_string_equal(ns->items[1]->items[0]->str, "argparse.Namespace");
	assert_true(tpc_value_get(ns->items[2], "lr")->fval == 0.5);
	tpc_value *od = tpc_value_get(v4, "od");
	assert_int_equal(od->kind, TPC_V_DICT);
	assert_string_equal(tpc_value_origin(od)->items[0]->str, "collections.OrderedDict");
	/* written as protocol 2 and read back: the same tree */
	tpc_buf out;
	write_tree(v4, &out, false);
	tpc_value *back = load_ok(out.p, out.len, NULL);
	assert_true(tpc_value_equal(v4, back));
	tpc_buf_release(&out);
	tpc_value_unref(back);
	tpc_value_unref(v4);
	tpc_value_unref(v5);
}

static void test_cpython_numbers(void **state)
{
	(void)state;
	static const int64_t ints[] = {0, 255, 256, 65535, 65536, INT32_MAX, (int64_t)INT32_MAX + 1,
				       -1, INT32_MIN, (int64_t)INT32_MIN - 1, INT64_MAX, INT64_MIN};
	tpc_value *v = load_ok(PK_INTS_P2, sizeof(PK_INTS_P2), NULL);
	assert_int_equal(v->n, LEN(ints) + 1);
	for (size_t i = 0; i < LEN(ints); i++) {
		assert_int_equal(v->items[i]->kind, TPC_V_INT);
		assert_int_equal(v->items[i]->ival, ints[i]);
	}
	assert_int_equal(v->items[LEN(ints)]->kind, TPC_V_BIGINT); /* 2**64 */
	tpc_value_unref(v);
	assert_rewrites_identically(PK_INTS_P2, sizeof(PK_INTS_P2));

	v = load_ok(PK_FLOATS_P2, sizeof(PK_FLOATS_P2), NULL);
	assert_true(v->items[0]->fval == 0.0 && !signbit(v->items[0]->fval));
	assert_true(v->items[1]->fval == 0.0 && signbit(v->items[1]->fval));
	assert_true(isinf(v->items[2]->fval) && v->items[2]->fval > 0);
	assert_true(isinf(v->items[3]->fval) && v->items[3]->fval < 0);
	assert_true(isnan(v->items[4]->fval));
	assert_true(v->items[5]->fval == 1.5e-300);
	tpc_value_unref(v);
	assert_rewrites_identically(PK_FLOATS_P2, sizeof(PK_FLOATS_P2));

	/* protocol 0/1 text forms */
	v = OK("I01\nI00\nL7L\n\x87.");
	assert_int_equal(v->items[0]->kind, TPC_V_BOOL);
	assert_int_equal(v->items[0]->ival, 1);
	assert_int_equal(v->items[1]->ival, 0);
	assert_int_equal(v->items[2]->kind, TPC_V_INT);
	assert_int_equal(v->items[2]->ival, 7);
	tpc_value_unref(v);
	v = OK("(I-42\nL123L\nF2.5\nl.");
	assert_int_equal(v->kind, TPC_V_LIST);
	assert_int_equal(v->items[0]->ival, -42);
	assert_int_equal(v->items[1]->ival, 123);
	assert_true(v->items[2]->fval == 2.5);
	tpc_value_unref(v);
	v = OK("(K\x01K\x02" "d.");
	assert_int_equal(v->kind, TPC_V_DICT);
	tpc_value_unref(v);
	/* protocol 0/1 longs past int64 (the legacy torch magic number is one):
	 * the BIGINT that LONG1 gives for the same value, minimal bytes */
	static const struct {
		const char *text, *le;
		size_t n;
	} big[] = {
		{"L119547037146038801333356L\n.", "\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 10},
		{"I99999999999999999999\n.", "\xff\xff\x0f\x63\x2d\x5e\xc7\x6b\x05", 9},
		{"L9223372036854775808\n.", "\x00\x00\x00\x00\x00\x00\x00\x80\x00", 9},
		{"L-9223372036854775809L\n.", "\xff\xff\xff\xff\xff\xff\xff\x7f\xff", 9},
		{"L-119547037146038801333356L\n.", "\x94\x03\x63\xb9\x06\xdf\x95\x57\xaf\xe6", 10},
		{"L+18446744073709551616L\n.", "\x00\x00\x00\x00\x00\x00\x00\x00\x01", 9},
	};
	for (size_t i = 0; i < LEN(big); i++) {
		v = load_ok(big[i].text, strlen(big[i].text), NULL);
		assert_int_equal(v->kind, TPC_V_BIGINT);
		assert_int_equal(v->len, big[i].n);
		assert_memory_equal(v->str, big[i].le, big[i].n);
		tpc_value_unref(v);
	}
	v = OK("L-9223372036854775808L\n."); /* INT64_MIN still fits */
	assert_int_equal(v->kind, TPC_V_INT);
	assert_true(v->ival == INT64_MIN);
	tpc_value_unref(v);
	char digits[700];
	memset(digits, '9', sizeof(digits));
	digits[0] = 'L';
	digits[642] = '\n';
	digits[643] = '.';
	expect_bad(digits, 644, "LONG: malformed integer, or one of more than 640 digits", 0);
	digits[641] = '\n'; /* 640 digits: a BIGINT of 266 bytes */
	digits[642] = '.';
	v = load_ok(digits, 643, NULL);
	assert_int_equal(v->kind, TPC_V_BIGINT);
	assert_int_equal(v->len, 266);
	tpc_value_unref(v);
	/* LONG1 with redundant sign bytes still fits: INT */
	v = OK("\x80\x02\x8a\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff.");
	assert_int_equal(v->kind, TPC_V_INT);
	assert_int_equal(v->ival, -1);
	tpc_value_unref(v);
	v = OK("\x80\x02\x8a\x00.");
	assert_int_equal(v->ival, 0);
	tpc_value_unref(v);
	/* BININT2 is unsigned */
	v = OK("\x80\x02M\xff\xff.");
	assert_int_equal(v->ival, 65535);
	tpc_value_unref(v);
}

static void test_objects_and_subclasses(void **state)
{
	(void)state;
	assert_rewrites_identically(PK_NAMESPACE_P2, sizeof(PK_NAMESPACE_P2));
	assert_rewrites_identically(PK_SUBCLASS_P2, sizeof(PK_SUBCLASS_P2));
	tpc_value *v = load_ok(PK_SUBCLASS_P2, sizeof(PK_SUBCLASS_P2), NULL);
	tpc_value *d = v->items[0], *l = v->items[1];
	assert_int_equal(d->kind, TPC_V_DICT); /* NEWOBJ then SETITEM: a dict subclass */
	assert_int_equal(tpc_value_get(d, "a")->ival, 1);
	assert_string_equal(tpc_value_origin(d)->items[1]->items[0]->str, "tpcmod.MyDict");
	assert_int_equal(l->kind, TPC_V_LIST);
	assert_int_equal(l->n, 2);
	assert_string_equal(tpc_value_origin(l)->items[1]->items[0]->str, "tpcmod.MyList");
	tpc_value_unref(v);
	/* the built-in data constructors */
	v = OK("\x80\x02" "c__builtin__\nbytearray\nX\x02\x00\x00\x00\xc3\xa9X\x07\x00\x00\x00latin-1\x86R.");
	assert_int_equal(v->kind, TPC_V_BYTES);
	assert_memory_equal(v->str, "\xe9", 1);
	tpc_value_unref(v);
	v = OK("\x80\x02" "ccollections\nCounter\n}X\x01\x00\x00\x00" "aK\x02s\x85R.");
	assert_int_equal(v->kind, TPC_V_DICT);
	assert_int_equal(tpc_value_get(v, "a")->ival, 2);
	tpc_value_unref(v);
	v = OK("\x80\x02" "ccollections\ndefaultdict\nc__builtin__\nlist\n\x85R.");
	assert_int_equal(v->kind, TPC_V_DICT);
	assert_string_equal(tpc_value_origin(v)->items[1]->items[0]->str, "builtins.list");
	tpc_value_unref(v);
	BAD("\x80\x02" "c_codecs\nencode\nX\x03\x00\x00\x00\xe6\x97\xa5X\x06\x00\x00\x00latin1\x86R.",
	    "the string is not latin-1", 38);
	/* unknown encodings stay a call */
	v = OK("\x80\x02" "c_codecs\nencode\nX\x01\x00\x00\x00" "aX\x03\x00\x00\x00hex\x86R.");
	assert_int_equal(v->kind, TPC_V_CALL);
	tpc_value_unref(v);
}

/* A stand-in for the torch reader and writer: _rebuild_tensor_v2 calls become
 * TENSOR leaves, and the tensor writer emits them again with the low-level
 * API. The result must be torch's own data.pkl, byte for byte. */
typedef struct fake_torch {
	tpc_value *args[8]; /* the args tuple of each tensor */
	int n;
	int builds;
} fake_torch;

static int ft_reduce(void *ctx, tpc_value *callable, tpc_value *args, tpc_value **out, tpc_err *e)
{
	fake_torch *t = ctx;
	if (callable->kind != TPC_V_GLOBAL || strcmp(callable->str, "torch._utils._rebuild_tensor_v2"))
		return 1;
	if (t->n >= 8 || args->n != 6 || args->items[0]->kind != TPC_V_STORAGE)
		return tpc_err_set(e, TPC_EINPUT, "bad tensor");
	t->args[t->n] = tpc_value_ref(args);
	*out = tpc_value_tensor(t->n++);
	return 0;
}

static int ft_build(void *ctx, tpc_value *obj, tpc_value *state, tpc_err *e)
{
	(void)obj;
	(void)state;
	(void)e;
	((fake_torch *)ctx)->builds++;
	return 1; /* let the VM keep the state */
}

static int ft_tensor(void *ctx, tpc_pickle_writer *w, const tpc_value *tensor, tpc_err *e)
{
	fake_torch *t = ctx;
	const tpc_value *a = t->args[tensor->ival];
	tpc_pickle_emit_global(w, "torch._utils", "_rebuild_tensor_v2");
	tpc_pickle_emit_op(w, TPC_PK_MARK);
	for (size_t i = 0; i < a->n; i++) {
		int ret = tpc_pickle_write_value(w, a->items[i], e);
		if (ret)
			return ret;
	}
	tpc_pickle_emit_op(w, TPC_PK_TUPLE);
	tpc_pickle_emit_put(w);
	tpc_pickle_emit_op(w, TPC_PK_REDUCE);
	return 0;
}

static void test_torch_state_dict(void **state)
{
	(void)state;
	fake_torch t = {0};
	tpc_pickle_opts o;
	tpc_pickle_globals g = {0};
	tpc_pickle_opts_init(&o);
	o.policy = TPC_PICKLE_REFUSE_UNKNOWN;
	o.ctx = &t;
	o.reduce = ft_reduce;
	o.build = ft_build;
	o.persistent_load = storage_persid;
	o.globals = &g;
	tpc_value *sd = load_ok(PK_STATE_DICT, sizeof(PK_STATE_DICT), &o);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.builds, 1);
	assert_int_equal(sd->kind, TPC_V_DICT);
	assert_int_equal(sd->n, 2);
	assert_string_equal(sd->keys[0]->str, "weight");
	assert_int_equal(sd->items[0]->kind, TPC_V_TENSOR);
	assert_int_equal(sd->items[1]->ival, 1);
	/* the OrderedDict with its _metadata attribute */
	tpc_value *origin = tpc_value_origin(sd);
	assert_string_equal(origin->items[0]->str, "collections.OrderedDict");
	assert_int_equal(origin->n, 3);
	tpc_value *meta = tpc_value_get(origin->items[2], "_metadata");
	assert_int_equal(tpc_value_get(tpc_value_get(meta, ""), "version")->ival, 1);
	/* pid ('storage', torch.FloatStorage, '0', 'cpu', 2), strings shared by the memo */
	tpc_value *pid = t.args[0]->items[0]->items[0], *pid1 = t.args[1]->items[0]->items[0];
	assert_string_equal(pid->items[1]->str, "torch.FloatStorage");
	assert_int_equal(pid->items[4]->ival, 2);
	assert_ptr_equal(pid->items[0], pid1->items[0]);
	assert_int_equal(g.n, 3);
	for (size_t i = 0; i < g.n; i++)
		assert_int_equal(g.v[i].cls, TPC_PICKLE_SAFE);
	tpc_pickle_globals_release(&g);

	tpc_buf out;
	tpc_pickle_writer w;
	tpc_err e;
	tpc_err_init(&e);
	tpc_buf_init(&out);
	tpc_pickle_writer_init(&w, &out);
	w.tensor = ft_tensor;
	w.ctx = &t;
	assert_int_equal(tpc_pickle_write(&w, sd, &e), 0);
	assert_int_equal(out.len, sizeof(PK_STATE_DICT));
	assert_memory_equal(out.p, PK_STATE_DICT, sizeof(PK_STATE_DICT));
	/* a tensor leaf without a tensor writer is an error, not a crash */
	tpc_pickle_writer_release(&w);
	tpc_buf_reset(&out);
	tpc_pickle_writer_init(&w, &out);
	assert_int_equal(tpc_pickle_write(&w, sd, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "no tensor writer"));
	tpc_pickle_writer_release(&w);
	tpc_buf_release(&out);
	for (int i = 0; i < t.n; i++)
		tpc_value_unref(t.args[i]);
	tpc_value_unref(sd);
}

/* Legacy torch files: several pickles back to back, offsets absolute. */
static void test_consecutive_pickles(void **state)
{
	(void)state;
	size_t n1 = sizeof(PK_INTS_P2), n2 = sizeof(PK_SIMPLE_P2);
	uint8_t *p = malloc(n1 + n2 + 3);
	memcpy(p, PK_INTS_P2, n1);
	memcpy(p + n1, PK_SIMPLE_P2, n2);
	memcpy(p + n1 + n2, "\x80\x02\xee", 3);
	tpc_pickle_opts o;
	tpc_pickle_opts_init(&o);
	tpc_value *v = NULL;
	uint64_t used = 0, pos = 0;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_pickle_load_from_buffer(p, n1 + n2 + 3, &o, &v, &used, &e), 0);
	assert_int_equal(used, n1);
	assert_int_equal(v->kind, TPC_V_LIST);
	tpc_value_unref(v);
	pos += used;
	o.base_offset = pos;
	assert_int_equal(tpc_pickle_load_from_buffer(p + pos, n1 + n2 + 3 - pos, &o, &v, &used, &e), 0);
	assert_int_equal(used, n2);
	tpc_value_unref(v);
	pos += used;
	o.base_offset = pos;
	assert_int_equal(tpc_pickle_load_from_buffer(p + pos, 3, &o, &v, &used, &e), TPC_EINPUT);
	assert_int_equal(e.offset, (int64_t)(n1 + n2 + 2));
	assert_null(v);
	free(p);
}

static int fail_reduce(void *ctx, tpc_value *c, tpc_value *a, tpc_value **out, tpc_err *e)
{
	(void)ctx;
	(void)c;
	(void)a;
	(void)out;
	return tpc_err_set(e, TPC_EINPUT, "custom reduce failure");
}

static int fail_persid(void *ctx, tpc_value *pid, tpc_value **out, tpc_err *e)
{
	(void)ctx;
	(void)pid;
	(void)out;
	(void)e;
	return -7; /* no message: the VM supplies one */
}

static void test_callback_errors(void **state)
{
	(void)state;
	tpc_pickle_opts o;
	tpc_pickle_opts_init(&o);
	o.reduce = fail_reduce;
	expect_bad_opts("\x80\x02" "cx\ny\n)R.", 11, &o, "custom reduce failure", -1);
	o.reduce = NULL;
	o.persistent_load = fail_persid;
	expect_bad_opts("\x80\x02K\x01Q.", 6, &o, "the persistent id loader failed", 4);
	o.persistent_load = storage_persid;
	tpc_value *v = load_ok("\x80\x02P42\n.", 7, &o);
	assert_int_equal(v->kind, TPC_V_STORAGE);
	assert_string_equal(v->items[0]->str, "42");
	tpc_value_unref(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_type_confusion),
		cmocka_unit_test(test_bad_memo),
		cmocka_unit_test(test_bad_stack),
		cmocka_unit_test(test_bad_lengths),
		cmocka_unit_test(test_enum_getattr),
		cmocka_unit_test(test_bad_opcodes),
		cmocka_unit_test(test_bad_depth),
		cmocka_unit_test(test_bad_shared_blowup),
		cmocka_unit_test(test_bad_cycles),
		cmocka_unit_test(test_truncation_everywhere),
		cmocka_unit_test(test_mutations),
		cmocka_unit_test(test_dangerous_globals),
		cmocka_unit_test(test_global_classes),
		cmocka_unit_test(test_cpython_simple),
		cmocka_unit_test(test_cpython_protocols_4_5),
		cmocka_unit_test(test_cpython_numbers),
		cmocka_unit_test(test_objects_and_subclasses),
		cmocka_unit_test(test_torch_state_dict),
		cmocka_unit_test(test_consecutive_pickles),
		cmocka_unit_test(test_callback_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
