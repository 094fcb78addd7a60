/* test_rules.c - lib/tpc_rules: parsing and its errors, regex renames, conditions,
 * collisions, unmatched rules, presets, select/transpose/dtype on a checkpoint,
 * expected keys. */
#include "test_util.h"

#include <time.h>

#include "tpc_buf.h"
#include "tpc_ckpt.h"
#include "tpc_rules.h"
#include "tpc_util.h"
#include "tpc_value.h"

/* A checkpoint of f32 [2, 3] tensors (and the odd other type) over one
 * owned memory source. */
static void make_ckpt(tpc_ckpt *ck, const char *const *names, size_t n)
{
	tpc_err e;
	int src;
	uint8_t *mem = calloc(1, 4096);
	tpc_ckpt_init(ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_mem(ck, "mem", mem, 4096, &src, &e), 0);
	for (size_t i = 0; i < n; i++) {
		int64_t shape[3] = {2, 3, 1};
		tpc_dtype dt = TPC_F32;
		int nd = 2;
		if (strstr(names[i], "step"))
			dt = TPC_I64;
		if (strstr(names[i], "half"))
			dt = TPC_F16;
		if (strstr(names[i], "vec"))
			nd = 1;
		if (strstr(names[i], "cube"))
			nd = 3;
		assert_true(tpc_ckpt_add_tensor(ck, names[i], dt, nd, shape, NULL, src, 64 * i, &e) >= 0);
	}
}

static tpc_rules *rules_json(const char *text, tpc_err *e)
{
	tpc_rules *r = tpc_rules_new();
	assert_non_null(r);
	tpc_err_init(e);
	if (tpc_rules_from_buffer(r, text, strlen(text), "t.json", e)) {
		tpc_rules_free(r);
		return NULL;
	}
	return r;
}

/* Plan `text` over names[] and compare the outcome with want[] (NULL: dropped). */
static void expect_plan(const char *text, const char *const *names, size_t n,
			const char *const *want)
{
	tpc_ckpt ck;
	tpc_remap m;
	tpc_err e;
	tpc_rules *r = rules_json(text, &e);
	if (!r)
		fail_msg("rules did not parse: %s", e.msg);
	make_ckpt(&ck, names, n);
	if (tpc_rules_plan(r, &ck, &m, &e))
		fail_msg("plan failed: %s", e.msg);
	for (size_t i = 0; i < n; i++) {
		if (!want[i]) {
			if (m.name[i])
				fail_msg("'%s' kept as '%s', wanted dropped", names[i], m.name[i]);
		} else if (!m.name[i] || strcmp(m.name[i], want[i])) {
			fail_msg("'%s' -> '%s', wanted '%s'", names[i], m.name[i] ? m.name[i] : "(dropped)",
				 want[i]);
		}
	}
	tpc_remap_release(&m);
	tpc_ckpt_release(&ck);
	tpc_rules_free(r);
}

static void expect_parse_error(const char *text, const char *msg)
{
	tpc_err e;
	char buf[2048];
	tpc_rules *r = rules_json(text, &e);
	if (r) {
		tpc_rules_free(r);
		fail_msg("'%s' parsed; wanted an error with '%s'", text, msg);
	}
	assert_int_equal(e.code, TPC_EUSAGE);
	tpc_err_format(&e, buf, sizeof(buf));
	if (!strstr(buf, msg))
		fail_msg("error '%s' lacks '%s'", buf, msg);
}

static void test_parse_errors(void **st)
{
	(void)st;
	expect_parse_error("{\"rules\": [{\"renam\": \"x\", \"to\": \"y\"}]}", "'t.json': rule 1: unknown key 'renam'");
	expect_parse_error("[{\"drop\": \"a\"}, {\"drop\": \"a(\"}]", "t.json rule 2: bad pattern 'a(':");
	expect_parse_error("[{\"drop\": \"[a\"}]", "unterminated [ ] bracket expression");
	expect_parse_error("[{\"drop\": \"(?=x)\"}]", "(?...) groups and lookaround");
	expect_parse_error("[{\"drop\": \"a+?\"}]", "lazy quantifiers");
	expect_parse_error("[{\"drop\": \"a\\\\\"}]", "trailing backslash");
	expect_parse_error("[{\"dtype\": \"int8\"}]", "rule 1: bad dtype 'int8' (bf16, f16, f32 or f64)");
	expect_parse_error("[{\"dtype\": 16}]", "rule 1: 'dtype' must be a string");
	expect_parse_error("[{\"rename\": \"(a)(b)\", \"to\": \"\\\\3\"}]", "refers to group \\3 but the pattern has 2 groups");
	expect_parse_error("[{\"rename\": \"a\", \"to\": \"\\\\n\"}]", "unknown escape '\\n'");
	expect_parse_error("[{\"rename\": \"a\"}]", "rename needs a replacement");
	expect_parse_error("[{\"drop\": \"a\", \"to\": \"b\"}]", "only rename and unfuse take a replacement");
	expect_parse_error("[{\"drop\": \"a\", \"keep\": \"b\"}]", "more than one action ('drop' and 'keep')");
	expect_parse_error("[{\"when\": \"a\"}]", "rule 1: no action");
	expect_parse_error("[{\"select\": \"a\", \"when\": \"b\"}]", "select takes no condition");
	expect_parse_error("[{\"select\": \"\"}]", "empty prefix");
	expect_parse_error("[{\"drop\": \"a\", \"ints\": true}]", "\"ints\" applies to dtype rules only");
	expect_parse_error("[{\"drop\": \"a\", \"optional\": 1}]", "'optional' must be true or false");
	expect_parse_error("[{\"dtype\": \"f32\", \"when\": \"a\", \"match\": \"b\"}]", "not both");
	expect_parse_error("[\"drop\"]", "rule 1: not an object");
	expect_parse_error("{\"rules\": [}", "invalid JSON near byte");
	expect_parse_error("{\"rule\": []}", "unknown key 'rule'");
	expect_parse_error("{\"rules\": {}}", "'rules' must be a list");
	expect_parse_error("\"x\"", "a rules file is a JSON object or a list of rules");
	expect_parse_error("{\"extends\": \"dalle3\"}", "unknown preset 'dalle3' (presets: dalle2, libai, strip-module, gpt2-conv1d, megatron-llama, megatron-mixtral, megatron-qwen3-moe, megatron-deepseek-v3, megatron-gpt, torchtitan, hf-torchtitan)");
	expect_parse_error("{\"extends\": 3}", "'extends' must name a preset");
	/* the good ones */
	tpc_err e;
	tpc_rules *r = rules_json("{\"extends\": [\"dalle2\", \"strip-module\"], \"description\": \"x\", \"comment\": \"y\","
				  " \"rules\": [{\"dtype\": \"bf16\", \"comment\": \"all\"}, {\"dtype\": \"f32\", \"match\": \"norm\"}]}",
				  &e);
	assert_non_null(r);
	assert_int_equal(tpc_rules_count(r), 6);
	char d[512];
	assert_string_equal(tpc_rules_describe(r, 2, d, sizeof(d)),
			    "rename '\\.g$' -> '.gamma' when 'cross_attn|fn\\.fn\\.' (preset dalle2 rule 3)");
	assert_string_equal(tpc_rules_describe(r, 5, d, sizeof(d)), "dtype F32 for 'norm' (t.json rule 2)");
	assert_string_equal(tpc_rules_describe(r, 99, d, sizeof(d)), "");
	tpc_rules_free(r);
	tpc_rules_free(NULL);
	/* a bad --rules argument */
	r = tpc_rules_new();
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_load(r, "nonesuch", &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "neither a rules preset"));
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_load(r, "/nonexistent/rules.json", &e), TPC_EUSAGE);
	assert_string_equal(e.path, "/nonexistent/rules.json");
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_add_preset(r, "nope", &e), TPC_EUSAGE);
	tpc_rules_free(r);
}

static void test_shorthand_specs(void **st)
{
	(void)st;
	tpc_rules *r = tpc_rules_new();
	tpc_err e;
	tpc_rule_spec s;
	memset(&s, 0, sizeof(s));
	tpc_err_init(&e);
	s.kind = TPC_RULE_DROP;
	assert_int_equal(tpc_rules_add(r, &s, "--drop", &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "--drop: drop needs a pattern"));
	tpc_err_init(&e);
	s.kind = TPC_RULE_DTYPE;
	s.dtype = TPC_I8;
	assert_int_equal(tpc_rules_add(r, &s, "--dtype 'x'", &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "dtype must be bf16, f16, f32 or f64"));
	tpc_err_init(&e);
	s.kind = TPC_RULE_RENAME;
	s.arg = "a(";
	s.to = "b";
	assert_int_equal(tpc_rules_add(r, &s, "--rename 'a(=b'", &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "--rename 'a(=b': bad pattern 'a('"));
	tpc_err_init(&e);
	s.arg = "(a)";
	s.to = "[\\1]";
	s.when = "x";
	assert_int_equal(tpc_rules_add(r, &s, NULL, &e), 0);
	assert_int_equal(tpc_rules_count(r), 1);
	tpc_rules_free(r);
}

static void test_rename(void **st)
{
	(void)st;
	const char *names[] = {"banana", "abxd", "h.0.attn", "layers.12.mlp.w", "a.b.c"};
	/* every match is replaced, as re.sub; groups and \0 */
	const char *w1[] = {"bbnbnb", "bbxd", "h.0.bttn", "lbyers.12.mlp.w", "b.b.c"};
	expect_plan("[{\"rename\": \"a\", \"to\": \"b\"}]", names, 5, w1);
	/* empty matches: Python re.sub('x*', '-', 'abxd') == '-a-b--d-' */
	const char *w2[] = {"-b-a-n-a-n-a-", "-a-b--d-", "-h-.-0-.-a-t-t-n-", "-l-a-y-e-r-s-.-1-2-.-m-l-p-.-w-",
			    "-a-.-b-.-c-"};
	expect_plan("[{\"rename\": \"x*\", \"to\": \"-\"}]", names, 5, w2);
	/* ^ anchors once; \d is [0-9]; groups reorder */
	const char *w3[] = {"p.banana", "p.abxd", "p.h.0.attn", "p.layers.12.mlp.w", "p.a.b.c"};
	expect_plan("[{\"rename\": \"^\", \"to\": \"p.\"}]", names, 5, w3);
	const char *w4[] = {"banana", "abxd", "attn<0>.h", "mlp<12>.layers.w", "a.b.c"};
	expect_plan("[{\"rename\": \"^([a-z]+)\\\\.(\\\\d+)\\\\.([a-z]+)\", \"to\": \"\\\\3<\\\\2>.\\\\1\"}]", names, 5, w4);
	const char *w5[] = {"[banana]", "[abxd]", "[h.0.attn]", "[layers.12.mlp.w]", "[a.b.c]"};
	expect_plan("[{\"rename\": \".+\", \"to\": \"[\\\\0]\"}]", names, 5, w5);
	const char *w6[] = {"banana", "abxd", "h\\0.attn", "layers\\12.mlp.w", "a.b.c"};
	expect_plan("[{\"rename\": \"[.]([0-9]+)\", \"to\": \"\\\\\\\\\\\\1\"}]", names, 5, w6);
	/* conditions: when / unless / match; the name each rule sees is the one the
	 * rules before it left */
	const char *w7[] = {"banana", "abxd", "h.0.ATTN", "layers.12.mlp.w", "a.b.c"};
	expect_plan("[{\"rename\": \"attn\", \"to\": \"ATTN\", \"when\": \"^h\\\\.\", \"unless\": \"mlp\"}]", names, 5, w7);
	const char *w8[] = {"banana", "abxd", "h.0.x", "layers.12.mlp.w", "a.b.c"};
	expect_plan("[{\"rename\": \"attn$\", \"to\": \"y\"}, {\"rename\": \"y$\", \"to\": \"x\", \"when\": \"^h\"}]", names, 5, w8);
	/* strip and add prefixes: literal, where present */
	const char *w9[] = {"banana", "abxd", "0.attn", "layers.12.mlp.w", "a.b.c"};
	expect_plan("[{\"strip_prefix\": \"h.\"}]", names, 5, w9);
	const char *w10[] = {"m.banana", "m.abxd", "h.0.attn", "m.layers.12.mlp.w", "m.a.b.c"};
	expect_plan("[{\"add_prefix\": \"m.\", \"unless\": \"^h\"}]", names, 5, w10);
	/* drop / keep */
	const char *w11[] = {NULL, NULL, "h.0.attn", "layers.12.mlp.w", NULL};
	expect_plan("[{\"keep\": \"\\\\.\"}, {\"drop\": \"^a\\\\.\"}]", names, 5, w11);
	const char *w12[] = {"banana", NULL, "h.0.attn", "layers.12.mlp.w", NULL};
	expect_plan("[{\"keep\": \"^h\", \"when\": \"^a\"}]", names, 5, w12);
}

static void test_collisions(void **st)
{
	(void)st;
	const char *names[] = {"x.g", "x.gamma", "y.g", "a", "b"};
	tpc_ckpt ck;
	tpc_remap m;
	tpc_err e;
	tpc_rules *r = rules_json("[{\"rename\": \"\\\\.g$\", \"to\": \".gamma\"}]", &e);
	make_ckpt(&ck, names, 5);
	assert_int_equal(tpc_rules_plan(r, &ck, &m, &e), TPC_EUSAGE);
	assert_string_equal(e.msg, "name collision: tensors 'x.g' and 'x.gamma' would both be named 'x.gamma'");
	tpc_rules_free(r);
	/* a swap is no collision, and applies */
	r = rules_json("[{\"rename\": \"^a$\", \"to\": \"t\"}, {\"rename\": \"^b$\", \"to\": \"a\"}, {\"rename\": \"^t$\", \"to\": \"b\"}]", &e);
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_plan(r, &ck, &m, &e), 0);
	assert_int_equal(tpc_remap_apply(&ck, &m, &e), 0);
	assert_string_equal(ck.t[3].name, "b");
	assert_string_equal(ck.t[4].name, "a");
	assert_int_equal(tpc_ckpt_find(&ck, "a"), 4);
	assert_int_equal(tpc_ckpt_find(&ck, "b"), 3);
	tpc_remap_release(&m);
	tpc_rules_free(r);
	/* a rename to the empty string */
	r = rules_json("[{\"rename\": \"^a$\", \"to\": \"\"}]", &e);
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_plan(r, &ck, &m, &e), TPC_EUSAGE);
	assert_string_equal(e.tensor, "a");
	assert_non_null(strstr(e.msg, "turns the name into an empty string"));
	tpc_rules_free(r);
	tpc_ckpt_release(&ck);
}

static void test_unmatched(void **st)
{
	(void)st;
	const char *names[] = {"a.w", "b.w"};
	tpc_ckpt ck;
	tpc_remap m;
	tpc_err e;
	tpc_rules *r = rules_json("[{\"drop\": \"zzz\"}, {\"drop\": \"yyy\", \"optional\": true}, {\"rename\": \"w$\", \"to\": \"weight\"},"
				  " {\"select\": \"q\"}, {\"dtype\": \"f16\"}, {\"dtype\": \"f32\", \"ints\": true}]",
				  &e);
	make_ckpt(&ck, names, 2);
	assert_int_equal(tpc_rules_plan(r, &ck, &m, &e), 0);
	assert_true(tpc_remap_unmatched(r, &m, 0));
	assert_false(tpc_remap_unmatched(r, &m, 1)); /* optional */
	assert_false(tpc_remap_unmatched(r, &m, 2));
	assert_true(tpc_remap_unmatched(r, &m, 3)); /* select with nothing under 'q.': no effect */
	assert_string_equal(m.name[0], "a.weight");
	assert_int_equal(m.hits[2], 2);
	assert_int_equal(m.hits[4], 2);
	tpc_remap_release(&m);
	tpc_rules_free(r);
	tpc_ckpt_release(&ck);
}

static void test_presets(void **st)
{
	(void)st;
	tpc_err e;
	assert_int_equal(tpc_rules_preset_count(), 11);
	for (size_t i = 0; i < tpc_rules_preset_count(); i++) {
		tpc_rules *r = tpc_rules_new();
		tpc_err_init(&e);
		if (tpc_rules_add_preset(r, tpc_rules_preset_name(i), &e))
			fail_msg("preset %s: %s", tpc_rules_preset_name(i), e.msg);
		assert_true(tpc_rules_count(r) > 0);
		assert_non_null(tpc_rules_preset_desc(i));
		tpc_rules_free(r);
	}
	assert_null(tpc_rules_preset_text("nope"));
	/* dalle2: the seed loop, including the substring traps */
	const char *names[] = {
		"ema_model.unets.0.downs.0.1.fn.fn.norm.g",
		"ema_model.unets.0.mid_attn.fn.fn.to_out.1.g",
		"ema_model.unets.0.downs.1.2.cross_attn.norm.g",
		"ema_model.unets.0.final_resnet_block.block1.project.0.g",
		"ema_model.clip.transformer.x.weight",
		"ema_model.xclip.foo",
		"ema_model.unets.0.cross_attn.gg",
		"ema_model.unets.0.cross_attn_g",
		"ema_model.unets.0.fn.fn.g",
		"model.unets.0.w",
		"ema_model_2.x",
		"ema_model",
	};
	const char *want[] = {
		"unets.0.downs.0.1.fn.fn.norm.gamma",
		"unets.0.mid_attn.fn.fn.to_out.1.gamma",
		"unets.0.downs.1.2.cross_attn.norm.gamma",
		"unets.0.final_resnet_block.block1.project.0.g",
		NULL,
		NULL,
		"unets.0.cross_attn.gg",
		"unets.0.cross_attn_g",
		"unets.0.fn.fn.gamma",
		NULL,
		NULL,
		NULL,
	};
	expect_plan("{\"extends\": \"dalle2\"}", names, 12, want);
	/* without ema_model the select is a no-op */
	const char *plain[] = {"unets.0.fn.fn.norm.g", "clip.x", "other.g"};
	const char *wplain[] = {"unets.0.fn.fn.norm.gamma", NULL, "other.g"};
	expect_plan("{\"extends\": \"dalle2\"}", plain, 3, wplain);
	/* libai: _fix_key's order (a key with both only gets beta -> bias) */
	const char *ln[] = {"ln.gamma", "ln.beta", "x.gamma_beta", "gammagamma", "w"};
	const char *wl[] = {"ln.weight", "ln.bias", "x.gamma_bias", "weightweight", "w"};
	expect_plan("{\"extends\": \"libai\"}", ln, 5, wl);
	const char *dp[] = {"module.a", "module.module.b", "c.module.d"};
	const char *wdp[] = {"a", "module.b", "c.module.d"};
	expect_plan("{\"extends\": \"strip-module\"}", dp, 3, wdp);
}

/* unfuse: every parse error with its message; then a fused tensor of 2
 * query groups, [q (2 heads x 1); k (1); v (1)] x 2 over rows holding their
 * row number, taken apart (and regrouped and transposed) on a checkpoint,
 * read back element by element. */
static void test_unfuse(void **st)
{
	(void)st;
	expect_parse_error("[{\"unfuse\": \"a\"}]", "t.json rule 1: unfuse needs \"parts\" (a list of {\"to\": ..., \"size\": ...})");
	expect_parse_error("[{\"unfuse\": \"a\", \"parts\": [{\"size\": 2}]}]",
			   "t.json rule 1: unfuse names no part (give parts a \"to\", or the rule one \"to\")");
	expect_parse_error("[{\"unfuse\": \"a\", \"parts\": [{\"to\": \"x\", \"size\": 2}, {\"to\": \"y\"}]}]",
			   "t.json rule 1: unfuse gives 1 of 2 parts a size; give every part one, or none (equal parts)");
	expect_parse_error("[{\"unfuse\": \"a\", \"to\": \"z\", \"parts\": [{\"to\": \"x\"}]}]",
			   "t.json rule 1: unfuse has \"to\" on the rule (one tensor) and on part 1; give one or the other");
	expect_parse_error("[{\"unfuse\": \"a\", \"parts\": [{\"to\": \"x\", \"size\": \"heads+1\"}]}]",
			   "t.json rule 1: part 1 size 'heads+1': unexpected '+' (terms are joined by * and /)");
	expect_parse_error("[{\"unfuse\": \"a\", \"parts\": [{\"to\": \"x\", \"size\": \"nheads/2\"}]}]",
			   "t.json rule 1: part 1 size 'nheads/2': unknown fact 'nheads' (facts: heads, kv_heads, head_dim, hidden, vocab)");
	expect_parse_error("[{\"unfuse\": \"a\", \"groups\": \"kv_heads*\", \"parts\": [{\"to\": \"x\"}]}]",
			   "t.json rule 1: groups 'kv_heads*': expected a number or a fact");
	expect_parse_error("[{\"unfuse\": \"a\", \"parts\": [{\"to\": \"x\", \"size\": 0}]}]",
			   "'t.json': rule 1: part 1: 'size' must be a positive integer or a string");
	expect_parse_error("[{\"unfuse\": \"a\", \"parts\": [{\"to\": \"x\", \"size\": \"rest\"}, {\"to\": \"y\", \"size\": \"rest\"}]}]",
			   "t.json rule 1: unfuse has 2 parts of size \"rest\" (at most one)");
	expect_parse_error("[{\"unfuse\": \"a\", \"parts\": [{\"to\": \"x\", \"sz\": 1}]}]",
			   "'t.json': rule 1: part 1: unknown key 'sz' (to, size, comment)");
	expect_parse_error("[{\"unfuse\": \"a\", \"parts\": {}}]", "'t.json': rule 1: 'parts' must be a list of objects");
	expect_parse_error("[{\"drop\": \"a\", \"parts\": [{\"to\": \"x\"}]}]",
			   "t.json rule 1: \"parts\", \"groups\" and \"dim\" apply to unfuse rules only");
	expect_parse_error("[{\"unfuse\": \"a\", \"dim\": -1, \"parts\": [{\"to\": \"x\"}]}]",
			   "'t.json': rule 1: 'dim' must be an integer 0..63");
	expect_parse_error("[{\"unfuse\": \"(a)\", \"parts\": [{\"to\": \"\\\\2\"}]}]",
			   "t.json rule 1: replacement '\\2' refers to group \\2 but the pattern has 1 group");
	expect_parse_error("[{\"unfuse\": \"a\", \"parts\": [{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{\"to\": \"x\"}]}]",
			   "'t.json': rule 1: more than 16 parts");

	/* [8, 3] f32, element (r, c) = 10 * r + c */
	tpc_ckpt ck;
	tpc_remap m;
	tpc_err e;
	tpc_buf b = TPC_BUF_INIT;
	int src;
	float *mem = calloc(64, sizeof(float));
	for (int i = 0; i < 24; i++)
		mem[i] = (float)(10 * (i / 3) + i % 3);
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_mem(&ck, "mem", (uint8_t *)mem, 64 * sizeof(float), &src, &e), 0);
	int64_t shape[2] = {8, 3}, vshape[1] = {5};
	assert_true(tpc_ckpt_add_tensor(&ck, "l.0.qkv.weight", TPC_F32, 2, shape, NULL, src, 0, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(&ck, "l.0.qkv.bias", TPC_F32, 1, shape, NULL, src, 0, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(&ck, "embed", TPC_F32, 1, vshape, NULL, src, 96, &e) >= 0);
	const char *text = "[{\"unfuse\": \"^l\\\\.(\\\\d+)\\\\.qkv\\\\.weight$\", \"groups\": \"kv_heads\", \"parts\": ["
			   "{\"to\": \"l.\\\\1.q\", \"size\": \"heads/kv_heads*head_dim\"}, {\"to\": \"l.\\\\1.k\", \"size\": \"head_dim\"},"
			   " {\"to\": \"l.\\\\1.v\", \"size\": \"rest\"}]},"
			   " {\"unfuse\": \"qkv\\\\.bias$\", \"to\": \"c_attn.bias\", \"groups\": 2, \"parts\": [{\"size\": 2}, {\"size\": 1}, {\"size\": 1}]},"
			   " {\"unfuse\": \"^embed$\", \"parts\": [{\"to\": \"wte\", \"size\": \"vocab\"}, {\"size\": \"rest\"}]},"
			   " {\"transpose\": \"^l\\\\.0\\\\.q$\"}, {\"dtype\": \"f64\", \"match\": \"k$\"}]";
	tpc_rules *r = rules_json(text, &e);
	if (!r)
		fail_msg("%s", e.msg);
	/* without the facts: refused, naming the fact, the rule and the tensor */
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_plan(r, &ck, &m, &e), TPC_EUSAGE);
	assert_string_equal(e.tensor, "l.0.qkv.weight");
	assert_string_equal(e.msg, "unfuse '^l\\.(\\d+)\\.qkv\\.weight$' (t.json rule 1): the group count needs the number of key/value heads"
			     " (Megatron's query groups) ('kv_heads'), which is not known: give --kv-heads N or --config config.json"
			     " (a Megatron checkpoint records it in its args)");
	assert_int_equal(tpc_rules_facts_used(r), (1u << TPC_FACT_HEADS) | (1u << TPC_FACT_KV_HEADS) |
							 (1u << TPC_FACT_HEAD_DIM) | (1u << TPC_FACT_VOCAB));
	assert_int_equal(tpc_rules_set_fact(r, TPC_FACT_HEADS, 4, "test", &e), 0);
	assert_int_equal(tpc_rules_set_fact(r, TPC_FACT_KV_HEADS, 2, "test", &e), 0);
	assert_int_equal(tpc_rules_set_fact(r, TPC_FACT_KV_HEADS, 4, "later", &e), 0); /* the first wins */
	assert_int_equal(tpc_rules_set_fact(r, TPC_FACT_HEAD_DIM, 1, "test", &e), 0);
	assert_int_equal(tpc_rules_set_fact(r, TPC_FACT_VOCAB, 3, "test", &e), 0);
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_plan(r, &ck, &m, &e), 0);
	tpc_remap_table(&ck, &m, r, &b);
	assert_non_null(strstr(b.p, "# 3 tensors: 0 kept (0 renamed), 3 unfused into 5, 0 dropped\n"
				    "l.0.qkv.weight -> l.0.q  unfused: [0, 2) of each of 2 groups of 4 [8, 3] -> [4, 3]  transposed [4, 3] -> [3, 4]\n"
				    "l.0.qkv.weight -> l.0.k  unfused: [2, 3) of each of 2 groups of 4 [8, 3] -> [2, 3]  F32 -> F64\n"
				    "l.0.qkv.weight -> l.0.v  unfused: [3, 4) of each of 2 groups of 4 [8, 3] -> [2, 3]\n"
				    "l.0.qkv.bias -> l.0.c_attn.bias  regrouped: 3 parts x 2 groups -> part by part [8] -> [8]\n"
				    "embed -> wte  unfused: [0, 3) [5] -> [3]\n"));
	assert_int_equal(tpc_remap_apply(&ck, &m, &e), 0);
	tpc_remap_release(&m);
	assert_int_equal(ck.n, 5);
	assert_string_equal(ck.t[0].name, "l.0.q");
	assert_string_equal(ck.t[3].name, "l.0.c_attn.bias"); /* the match replaced, as rename does */
	/* q, transposed: element (c, i) is row {0, 1, 4, 5}[i], column c */
	static const int qrows[4] = {0, 1, 4, 5};
	float q[12], v[6], cb[8], wte[3];
	double k[6];
	assert_int_equal(ck.t[0].shape[0], 3);
	assert_int_equal(tpc_ckpt_read_out(&ck, &ck.t[0], 0, sizeof(q), q, &e), 0);
	for (int c = 0; c < 3; c++)
		for (int i = 0; i < 4; i++)
			assert_true(q[c * 4 + i] == (float)(10 * qrows[i] + c));
	assert_int_equal(ck.t[1].dtype, TPC_F64);
	assert_int_equal(tpc_ckpt_read_out(&ck, &ck.t[1], 0, sizeof(k), k, &e), 0);
	assert_int_equal(tpc_ckpt_read_out(&ck, &ck.t[2], 0, sizeof(v), v, &e), 0);
	for (int c = 0; c < 3; c++) {
		assert_true(k[c] == 20 + c && k[3 + c] == 60 + c);
		assert_true(v[c] == 30 + c && v[3 + c] == 70 + c);
	}
	/* the bias (elements 0..7 of the same bytes) part by part: q q q q k k v v */
	static const int order[8] = {0, 1, 4, 5, 2, 6, 3, 7};
	assert_int_equal(tpc_ckpt_read_out(&ck, &ck.t[3], 0, sizeof(cb), cb, &e), 0);
	for (int i = 0; i < 8; i++)
		assert_true(cb[i] == mem[order[i]]);
	assert_int_equal(tpc_ckpt_read_out(&ck, &ck.t[4], 0, sizeof(wte), wte, &e), 0);
	assert_true(wte[0] == mem[24] && wte[2] == mem[26]);
	tpc_rules_free(r);
	tpc_buf_release(&b);

	/* sizes that do not tile the tensor */
	r = rules_json("[{\"unfuse\": \"qkv\\\\.weight\", \"groups\": 3, \"parts\": [{\"to\": \"x\"}]}]", &e);
	tpc_ckpt ck2;
	const char *one[] = {"a.qkv.weight"};
	make_ckpt(&ck2, one, 1);
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_plan(r, &ck2, &m, &e), TPC_EUSAGE);
	assert_string_equal(e.msg, "unfuse 'qkv\\.weight' (t.json rule 1): 3 groups do not divide dim 0 (2) of [2, 3]");
	tpc_rules_free(r);
	r = rules_json("[{\"unfuse\": \"qkv\\\\.weight\", \"dim\": 1, \"parts\": [{\"to\": \"x\", \"size\": 2}, {\"to\": \"y\", \"size\": 2}]}]", &e);
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_plan(r, &ck2, &m, &e), TPC_EUSAGE);
	assert_string_equal(e.msg, "unfuse 'qkv\\.weight' (t.json rule 1): the parts (2 + 2) do not add up to 3, dim 1 of [2, 3] in 1 group");
	tpc_rules_free(r);
	r = rules_json("[{\"unfuse\": \"qkv\\\\.weight\", \"dim\": 2, \"parts\": [{\"to\": \"x\"}]}]", &e);
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_plan(r, &ck2, &m, &e), TPC_EUSAGE);
	assert_string_equal(e.msg, "unfuse 'qkv\\.weight' (t.json rule 1): dim 2, but the tensor has 2 dimensions");
	tpc_rules_free(r);
	/* a part named like another tensor: the collision names both sources */
	r = rules_json("[{\"unfuse\": \"qkv\\\\.weight\", \"dim\": 1, \"parts\": [{\"to\": \"x\"}, {\"to\": \"x\"}, {\"to\": \"y\"}]}]", &e);
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_plan(r, &ck2, &m, &e), TPC_EUSAGE);
	assert_string_equal(e.msg, "name collision: tensors 'a.qkv.weight' and 'a.qkv.weight' would both be named 'a.x'");
	tpc_rules_free(r);
	tpc_ckpt_release(&ck2);
	tpc_ckpt_release(&ck);
}

/* rows of a free-standing description, element (r, 0) of an [n, 3] f32 */
static void read_col0(const tpc_ckpt *ck, const tpc_tensor *t, float *col)
{
	float buf[3 * 16];
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_read_bytes(ck, t, 0, t->nbytes, buf, &e), 0);
	for (int64_t r = 0; r < t->shape[0]; r++)
		col[r] = buf[3 * r];
}

static void test_rope(void **st)
{
	(void)st;
	expect_parse_error("[{\"rope_halves\": \"wq\"}]", "t.json rule 1: rope_halves needs \"heads\"");
	expect_parse_error("[{\"drop\": \"wq\", \"heads\": \"heads\"}]",
			   "t.json rule 1: \"heads\" and \"head_dim\" apply to rope_halves and rope_pairs rules only");
	expect_parse_error("[{\"rope_pairs\": \"wq\", \"heads\": \"nh\"}]", "t.json rule 1: heads 'nh': unknown fact 'nh'");

	/* [8, 3] f32, element (r, c) = 10 * r + c: 2 heads of 4 rows */
	tpc_ckpt ck;
	tpc_remap m;
	tpc_err e;
	tpc_buf b = TPC_BUF_INIT;
	int src;
	float *mem = calloc(64, sizeof(float)), col[16];
	for (int i = 0; i < 24; i++)
		mem[i] = (float)(10 * (i / 3) + i % 3);
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_mem(&ck, "mem", (uint8_t *)mem, 64 * sizeof(float), &src, &e), 0);
	int64_t shape[2] = {8, 3};
	assert_true(tpc_ckpt_add_tensor(&ck, "l.0.wq", TPC_F32, 2, shape, NULL, src, 0, &e) >= 0);
	tpc_rules *r = rules_json("[{\"rope_halves\": \"wq$\", \"heads\": \"heads\", \"head_dim\": \"head_dim\"},"
				  " {\"rename\": \"wq$\", \"to\": \"q_proj\"}]", &e);
	assert_non_null(r);
	assert_int_equal(tpc_rules_plan(r, &ck, &m, &e), TPC_EUSAGE);
	assert_string_equal(e.tensor, "l.0.wq");
	assert_string_equal(e.msg, "rope_halves 'wq$' (t.json rule 1): the head count needs the number of attention heads ('heads'), which is not known: give --heads N or --config config.json");
	assert_int_equal(tpc_rules_set_fact(r, TPC_FACT_HEADS, 2, "test", &e), 0);
	assert_int_equal(tpc_rules_set_fact(r, TPC_FACT_HEAD_DIM, 2, "test", &e), 0);
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_plan(r, &ck, &m, &e), TPC_EUSAGE);
	assert_string_equal(e.msg, "rope_halves 'wq$' (t.json rule 1): 8 rows are not 2 heads of head_dim 2: a model fact is wrong");
	tpc_rules_free(r);
	r = rules_json("[{\"rope_halves\": \"wq$\", \"heads\": 2}, {\"rename\": \"wq$\", \"to\": \"q_proj\"}]", &e);
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_plan(r, &ck, &m, &e), 0);
	tpc_remap_table(&ck, &m, r, &b);
	assert_non_null(strstr(b.p, "# 1 tensors: 1 kept (0 renamed, 1 with rotary rows reordered), 0 dropped\n"
				    "l.0.wq -> l.0.q_proj  rotary rows: pairs -> halves, 2 heads of 4 [8, 3] -> [8, 3]\n"));
	assert_int_equal(tpc_remap_apply(&ck, &m, &e), 0);
	tpc_remap_release(&m);
	assert_int_equal(ck.n, 1);
	assert_string_equal(ck.t[0].name, "l.0.q_proj");
	/* each head's even rows, then its odd ones */
	static const int halves[8] = {0, 2, 1, 3, 4, 6, 5, 7};
	read_col0(&ck, &ck.t[0], col);
	for (int i = 0; i < 8; i++)
		assert_true(col[i] == (float)(10 * halves[i]));
	/* back to pairs, on a composite (rows 0..2 and 3..7 of the source, a zero
	 * part between them) as a sharded source reads: the rows come back */
	tpc_tensor parts[3], cat, half, pairs;
	int64_t zshape[2] = {4, 3};
	assert_int_equal(tpc_ckpt_add_tensor(&ck, "src", TPC_F32, 2, shape, NULL, src, 0, &e), 1);
	assert_int_equal(tpc_tensor_narrow(&parts[0], &ck.t[1], 0, 0, 3), 0);
	assert_int_equal(tpc_tensor_init_zero(&parts[1], TPC_F32, 2, zshape), 0);
	assert_int_equal(tpc_tensor_narrow(&parts[2], &ck.t[1], 0, 3, 5), 0);
	assert_int_equal(tpc_tensor_init_cat(&cat, parts, 3, 0), 0);
	assert_int_equal(tpc_tensor_rope_permute(&half, &cat, 3, true), 0);
	assert_int_equal(tpc_tensor_rope_permute(&pairs, &half, 3, false), 0);
	read_col0(&ck, &pairs, col);
	for (int i = 0; i < 12; i++)
		assert_true(col[i] == (i < 3 ? (float)(10 * i) : i < 7 ? 0.0f : (float)(10 * (i - 4))));
	read_col0(&ck, &half, col); /* head 0 = rows 0 1 2 (0 from the zero part): even rows 0, 2, odd 1, 3 */
	assert_true(col[0] == 0 && col[1] == 20 && col[2] == 10 && col[3] == 0);
	tpc_tensor none;
	assert_int_equal(tpc_tensor_rope_permute(&none, &half, 5, true), -1); /* 12 rows are not 5 heads */
	tpc_tensor_release(&cat);
	for (int i = 0; i < 3; i++)
		tpc_tensor_release(&parts[i]);
	tpc_tensor_release(&half);
	tpc_tensor_release(&pairs);
	tpc_rules_free(r);
	tpc_buf_release(&b);
	tpc_ckpt_release(&ck);
}

static void test_apply(void **st)
{
	(void)st;
	const char *names[] = {"m.h.0.attn.c_attn.weight", "m.h.0.ln.vec", "m.step", "m.half.w", "other.x",
			       "m.h.0.mlp.c_fc.weight"};
	tpc_ckpt ck;
	tpc_remap m;
	tpc_err e;
	tpc_buf b = TPC_BUF_INIT;
	make_ckpt(&ck, names, 6);
	/* a tree {"m": {"h.0.attn.c_attn.weight": T0, ...}, "other": {"x": T4}} */
	tpc_value *root = tpc_value_new(TPC_V_DICT), *sub = tpc_value_new(TPC_V_DICT), *oth = tpc_value_new(TPC_V_DICT);
	for (int i = 0; i < 6; i++)
		if (i != 4)
			assert_int_equal(tpc_value_set(sub, tpc_value_str(names[i] + 2, strlen(names[i] + 2)), tpc_value_tensor(i)), 0);
	assert_int_equal(tpc_value_set(oth, tpc_value_str("x", 1), tpc_value_tensor(4)), 0);
	assert_int_equal(tpc_value_set(root, tpc_value_str("m", 1), sub), 0);
	assert_int_equal(tpc_value_set(root, tpc_value_str("other", 5), oth), 0);
	ck.root = root;
	tpc_rules *r = rules_json("{\"extends\": \"gpt2-conv1d\", \"rules\": [{\"select\": \"m\"}, {\"dtype\": \"bf16\"},"
				  " {\"dtype\": \"f32\", \"match\": \"\\\\.ln\\\\.\"}, {\"transpose\": \"c_fc\"}]}",
				  &e);
	assert_non_null(r);
	assert_int_equal(tpc_rules_plan(r, &ck, &m, &e), 0);
	tpc_remap_table(&ck, &m, r, &b);
	assert_non_null(strstr(b.p, "# 6 tensors: 5 kept (5 renamed), 1 dropped\n"));
	assert_non_null(strstr(b.p, "m.h.0.attn.c_attn.weight -> h.0.attn.c_attn.weight  F32 -> BF16  transposed [2, 3] -> [3, 2]\n"));
	assert_non_null(strstr(b.p, "m.step -> step\n"));
	assert_non_null(strstr(b.p, "other.x  by select 'm' (t.json rule 1)\n"));
	assert_int_equal(tpc_remap_apply(&ck, &m, &e), 0);
	tpc_remap_release(&m);
	assert_int_equal(ck.n, 5);
	const tpc_tensor *t = &ck.t[0];
	assert_string_equal(t->name, "h.0.attn.c_attn.weight");
	assert_int_equal(t->shape[0], 3);
	assert_int_equal(t->shape[1], 2);
	assert_int_equal(t->stride[0], 1);
	assert_int_equal(t->stride[1], 3);
	assert_int_equal(t->dtype, TPC_BF16);
	assert_int_equal(t->src_dtype, TPC_F32);
	assert_int_equal(t->nbytes, 12);
	assert_int_equal(ck.t[1].dtype, TPC_F32);        /* norms kept in f32 */
	assert_int_equal(ck.t[2].dtype, TPC_I64);        /* integers not cast */
	assert_int_equal(ck.t[3].dtype, TPC_BF16);       /* f16 -> bf16 */
	assert_int_equal(ck.t[3].src_dtype, TPC_F16);
	assert_int_equal(ck.t[4].shape[0], 2);           /* transposed twice: as it was */
	assert_int_equal(tpc_ckpt_find(&ck, "step"), 2);
	/* the tree became the subtree "m" */
	assert_non_null(ck.root);
	assert_non_null(tpc_value_get(ck.root, "h.0.attn.c_attn.weight"));
	assert_null(tpc_value_get(ck.root, "m"));
	tpc_rules_free(r);
	tpc_buf_release(&b);
	/* transpose of a 1-D or 3-D tensor is an error naming it */
	r = rules_json("[{\"transpose\": \"vec|cube\"}]", &e);
	const char *bad[] = {"a.vec"};
	tpc_ckpt ck2;
	make_ckpt(&ck2, bad, 1);
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_plan(r, &ck2, &m, &e), TPC_EUSAGE);
	assert_string_equal(e.tensor, "a.vec");
	assert_non_null(strstr(e.msg, "1 dimension; only 2-D tensors can be transposed"));
	tpc_rules_free(r);
	/* ints: cast only with "ints": true */
	r = rules_json("[{\"dtype\": \"f16\", \"match\": \"step\", \"ints\": true}]", &e);
	tpc_err_init(&e);
	assert_int_equal(tpc_rules_plan(r, &ck, &m, &e), 0);
	assert_int_equal(m.dtype[2], TPC_F16);
	tpc_remap_release(&m);
	tpc_rules_free(r);
	tpc_ckpt_release(&ck2);
	tpc_ckpt_release(&ck);
}

static void test_keys(void **st)
{
	(void)st;
	tpc_keys k = {NULL, 0, 0};
	tpc_err e;
	tpc_buf rep = TPC_BUF_INIT;
	const char text[] = "  a.w \r\n\nb.w\n\tc.w\n";
	tpc_err_init(&e);
	assert_int_equal(tpc_keys_from_buffer(&k, text, strlen(text), "k.txt", &e), 0);
	assert_int_equal(k.n, 3);
	assert_string_equal(k.v[0], "a.w");
	assert_string_equal(k.v[2], "c.w");
	char *have[] = {"c.w", NULL, "a.w", "b.w"};
	assert_int_equal(tpc_keys_check(have, 4, &k, &rep, &e), 0);
	char *have2[] = {"a.w", "x.w", "b.w", "y\x01"};
	assert_int_equal(tpc_keys_check(have2, 4, &k, &rep, &e), TPC_EMISMATCH);
	assert_string_equal(e.msg, "1 missing and 2 unexpected keys");
	assert_string_equal(rep.p, "missing (1):\n  c.w\nunexpected (2):\n  x.w\n  y?\n");
	tpc_keys_release(&k);
	const char js[] = " [\"a\", \"b\"]";
	tpc_err_init(&e);
	assert_int_equal(tpc_keys_from_buffer(&k, js, strlen(js), NULL, &e), 0);
	assert_int_equal(k.n, 2);
	tpc_keys_release(&k);
	tpc_err_init(&e);
	assert_int_equal(tpc_keys_from_buffer(&k, "[1]", 3, "k.json", &e), TPC_EINPUT);
	assert_string_equal(e.path, "k.json");
	tpc_keys_release(&k);
	tpc_err_init(&e);
	assert_int_equal(tpc_keys_from_buffer(&k, "a\0b\n", 4, "k.bin", &e), TPC_EINPUT);
	tpc_keys_release(&k);
	tpc_buf_release(&rep);
}

/* tpc_rules_from_buffer on mutated documents: errors, never crashes (a
 * seeded stand-in for the fuzz target; prints its seed). */
static void test_mutations(void **st)
{
	(void)st;
	const char *base = tpc_rules_preset_text("dalle2");
	size_t n = strlen(base);
	char *buf = malloc(n + 1);
	unsigned seed = (unsigned)time(NULL);
	const char *env = getenv("TPC_SEED");
	if (env)
		seed = (unsigned)strtoul(env, NULL, 10);
	printf("# mutation seed %u\n", seed);
	srand(seed);
	for (int it = 0; it < 3000; it++) {
		memcpy(buf, base, n + 1);
		for (int k = 0; k < 1 + rand() % 4; k++)
			buf[rand() % n] = (char)(rand() % 256);
		size_t len = (size_t)rand() % (n + 1);
		tpc_rules *r = tpc_rules_new();
		tpc_err e;
		tpc_err_init(&e);
		int ret = tpc_rules_from_buffer(r, buf, len, "m", &e);
		assert_true(ret == 0 || ret == TPC_EUSAGE || ret == TPC_EIO);
		tpc_rules_free(r);
	}
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_errors), cmocka_unit_test(test_shorthand_specs),
		cmocka_unit_test(test_rename),       cmocka_unit_test(test_collisions),
		cmocka_unit_test(test_unmatched),    cmocka_unit_test(test_presets),
		cmocka_unit_test(test_apply),        cmocka_unit_test(test_keys),
		cmocka_unit_test(test_unfuse),       cmocka_unit_test(test_rope),
		cmocka_unit_test(test_mutations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
