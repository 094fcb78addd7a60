/* test_shard.c - shard/: rank descriptions (fused GQA parts with KV replicas,
 * vocab padding, row slices), write -> merge round trips through the registry,
 * the set being complete or absent on failure, manifests (bad ones first),
 * shard set detection and output-inside-input checks. */
#include "test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include "formats.h"
#include "tpc_ckpt.h"
#include "tpc_manifest.h"
#include "tpc_plan.h"
#include "tpc_shard.h"
#include "tpc_shard_optim.h"

/* q: 8 heads, k/v: 2 heads each, head_dim 2, in 3: a fused [q | k | v] of
 * [24, 3] int32 whose element (i, j) is i * 3 + j; an embedding [10, 3]; a
 * row-parallel [3, 8]; a norm [3]. */
static void build(tpc_ckpt *ck)
{
	tpc_err e;
	int src;
	size_t nel = 24 * 3 + 10 * 3 + 3 * 8 + 3;
	int32_t *mem = malloc(nel * sizeof(int32_t));
	for (size_t i = 0; i < nel; i++)
		mem[i] = (int32_t)i;
	tpc_ckpt_init(ck);
	tpc_err_init(&e);
	assert_int_equal(tpc_ckpt_add_mem(ck, "mem", (uint8_t *)mem, nel * sizeof(int32_t), &src, &e), 0);
	int64_t s1[2] = {24, 3}, s2[2] = {10, 3}, s3[2] = {3, 8}, s4[1] = {3};
	assert_true(tpc_ckpt_add_tensor(ck, "l.0.qkv.weight", TPC_I32, 2, s1, NULL, src, 0, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(ck, "emb.weight", TPC_I32, 2, s2, NULL, src, 72 * 4, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(ck, "l.0.o.weight", TPC_I32, 2, s3, NULL, src, 102 * 4, &e) >= 0);
	assert_true(tpc_ckpt_add_tensor(ck, "l.0.norm.weight", TPC_I32, 1, s4, NULL, src, 126 * 4, &e) >= 0);
	assert_int_equal(tpc_ckpt_validate(ck, &e), 0);
}

static const char *PLAN = "{\"name\": \"t\", \"layers\": [\"l\\\\.([0-9]+)\\\\.\"], \"rules\": ["
			  "{\"match\": \"qkv\", \"split\": \"col\", \"parts\": [\"q\", \"kv\", \"kv\"]},"
			  "{\"match\": \"^emb\\\\.\", \"split\": \"vocab\"},"
			  "{\"match\": \"\\\\.o\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\"},"
			  "{\"match\": \"norm\", \"split\": \"replicate\"}]}";
static const tpc_model_facts FACTS = {.heads = 8, .kv_heads = 2, .head_dim = 2};

static void load_plan(tpc_plan *p)
{
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_plan_from_buffer(p, PLAN, strlen(PLAN), "t", &e), 0);
}

static void test_rank_descriptions(void **st)
{
	(void)st;
	tpc_ckpt ck;
	tpc_plan p;
	tpc_shard_plan sp;
	tpc_shard_opts o;
	tpc_err e;
	build(&ck);
	load_plan(&p);
	memset(&o, 0, sizeof(o));
	o.tp = 4;
	o.pp = 1;
	tpc_err_init(&e);
	assert_int_equal(tpc_shard_plan_build(&sp, &ck, &p, &FACTS, &o, &e), 0);
	for (int r = 0; r < 4; r++) {
		const tpc_ckpt *rk = &sp.rank[r];
		int32_t got[64];
		/* fused: q rows [4r, 4r+4), k head r/2 (rows 16 + 2*(r/2)), v head r/2 */
		const tpc_tensor *t = &rk->t[tpc_ckpt_find(rk, "l.0.qkv.weight")];
		assert_int_equal(t->shape[0], 8);
		assert_int_equal(tpc_ckpt_read_bytes(rk, t, 0, 8 * 3 * 4, got, &e), 0);
		int rows[8] = {4 * r, 4 * r + 1, 4 * r + 2, 4 * r + 3, 16 + 2 * (r / 2), 17 + 2 * (r / 2), 20 + 2 * (r / 2),
			       21 + 2 * (r / 2)};
		for (int i = 0; i < 8; i++)
			for (int j = 0; j < 3; j++)
				assert_int_equal(got[i * 3 + j], rows[i] * 3 + j);
		/* vocab: 10 rows padded to 12, 3 per rank; rank 3 = row 9 + two zero rows */
		t = &rk->t[tpc_ckpt_find(rk, "emb.weight")];
		assert_int_equal(t->shape[0], 3);
		assert_int_equal(tpc_ckpt_read_bytes(rk, t, 0, 9 * 4, got, &e), 0);
		for (int i = 0; i < 3; i++)
			for (int j = 0; j < 3; j++) {
				int row = 3 * r + i;
				assert_int_equal(got[i * 3 + j], row < 10 ? 72 + row * 3 + j : 0);
			}
		/* row: columns [2r, 2r+2) of every row */
		t = &rk->t[tpc_ckpt_find(rk, "l.0.o.weight")];
		assert_int_equal(t->shape[1], 2);
		assert_int_equal(tpc_ckpt_read_bytes(rk, t, 0, 6 * 4, got, &e), 0);
		for (int i = 0; i < 3; i++)
			for (int j = 0; j < 2; j++)
				assert_int_equal(got[i * 2 + j], 102 + i * 8 + 2 * r + j);
	}
	/* replicas share a slice; describe names them */
	const tpc_shard_entry *qkv = &sp.t[0];
	assert_int_equal(qkv->split.part[1].replicas, 2);
	assert_int_equal(qkv->same_as[1], 1); /* q rows differ, so the fused tensor does */
	assert_int_equal(sp.t[3].same_as[3], 0);
	tpc_buf b = TPC_BUF_INIT;
	tpc_shard_describe(&sp, &b, false);
	assert_non_null(strstr(b.p, "parts 16(q8)|4(kv2x2)|4(kv2x2)"));
	assert_non_null(strstr(b.p, "pad 2"));
	assert_non_null(strstr(b.p, "# rank 3 (tp 3, pp 0): model_tp03_pp00.safetensors      4 tensors"));
	assert_non_null(strstr(b.p, "########################\n# balance: largest rank 1.000x the smallest\n"));
	tpc_buf_release(&b);
	tpc_shard_plan_release(&sp);
	/* an uneven split fails the whole plan, naming the tensor */
	o.tp = 3;
	tpc_err_init(&e);
	assert_int_equal(tpc_shard_plan_build(&sp, &ck, &p, &FACTS, &o, &e), TPC_EINPUT);
	assert_string_equal(e.tensor, "l.0.qkv.weight");
	/* strict: nothing unmatched here, so it passes; a fallback-only plan does not */
	tpc_plan p2;
	const char *only = "{\"rules\": [{\"match\": \"^nothing$\", \"split\": \"col\"}]}";
	assert_int_equal(tpc_plan_from_buffer(&p2, only, strlen(only), "t2", &e), 0);
	o.tp = 2;
	o.strict = true;
	tpc_err_init(&e);
	assert_int_equal(tpc_shard_plan_build(&sp, &ck, &p2, &FACTS, &o, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "4 tensors match no rule of the plan (--strict): 'l.0.qkv.weight'"));
	tpc_plan_release(&p2);
	tpc_plan_release(&p);
	tpc_ckpt_release(&ck);
}

static int count_files(const char *dir)
{
	char cmd[8400];
	snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 0", dir);
	return system(cmd) == 0 ? 0 : 1;
}

static void test_write_merge(void **st)
{
	(void)st;
	char *dir = test_tmpdir();
	char out[4200], path[8400];
	tpc_ckpt ck;
	tpc_plan p;
	tpc_shard_plan sp;
	tpc_shard_opts o;
	tpc_err e;
	snprintf(out, sizeof(out), "%s/set", dir);
	build(&ck);
	load_plan(&p);
	memset(&o, 0, sizeof(o));
	o.tp = 4;
	o.pp = 1;
	o.checksum = TPC_HASH_DEFAULT;
	tpc_err_init(&e);
	assert_int_equal(tpc_shard_plan_build(&sp, &ck, &p, &FACTS, &o, &e), 0);
	assert_int_equal(tpc_shard_write(&sp, out, &o, &e), 0);
	assert_true(sp.manifest_written);
	assert_int_equal(sp.nwritten, 4);
	/* a complete set is not replaced without force */
	tpc_err_init(&e);
	assert_int_equal(tpc_shard_write(&sp, out, &o, &e), TPC_EUSAGE);
	tpc_shard_plan_release(&sp);

	tpc_merge m;
	tpc_merge_opts mo;
	memset(&mo, 0, sizeof(mo));
	mo.checksums = true;
	tpc_err_init(&e);
	assert_int_equal(tpc_set_detect(out, NULL), TPC_SET_MANIFEST);
	assert_int_equal(tpc_merge_open(&m, out, &mo, &e), 0);
	assert_int_equal(m.tp, 4);
	assert_int_equal(m.out.n, ck.n);
	for (size_t i = 0; i < ck.n; i++) {
		uint8_t a[TPC_HASH_MAX], b[TPC_HASH_MAX];
		const tpc_tensor *t = &m.out.t[i];
		assert_string_equal(t->name, ck.t[i].name);
		assert_int_equal(tpc_ckpt_hash_tensor(&ck, &ck.t[i], TPC_HASH_XXH3_128, a, &e), 0);
		assert_int_equal(tpc_ckpt_hash_tensor(&m.out, t, TPC_HASH_XXH3_128, b, &e), 0);
		assert_memory_equal(a, b, 32);
	}
	/* reshard 4 -> 2 straight from the merged description */
	o.tp = 2;
	snprintf(path, sizeof(path), "%s/set2", dir);
	assert_int_equal(tpc_shard_plan_build(&sp, &m.out, &p, &FACTS, &o, &e), 0);
	tpc_err_init(&e);
	assert_int_equal(tpc_shard_write(&sp, out, &o, &e), TPC_EUSAGE); /* into the input set: refused */
	assert_non_null(strstr(e.msg, "inside"));
	tpc_err_init(&e);
	assert_int_equal(tpc_shard_write(&sp, path, &o, &e), 0);
	tpc_shard_plan_release(&sp);
	tpc_merge_release(&m);

	/* a failure takes back every rank file this run wrote: rank 2's name is a folder */
	char bad[4400];
	snprintf(bad, sizeof(bad), "%s/fail", dir);
	mkdir(bad, 0777);
	snprintf(path, sizeof(path), "%s/model_tp02_pp00.safetensors", bad);
	mkdir(path, 0777);
	o.tp = 4;
	o.force = true;
	assert_int_equal(tpc_shard_plan_build(&sp, &ck, &p, &FACTS, &o, &e), 0);
	tpc_err_init(&e);
	assert_true(tpc_shard_write(&sp, bad, &o, &e) != 0);
	rmdir(path);
	assert_int_equal(count_files(bad), 0);
	tpc_shard_plan_release(&sp);

	/* --rank: two runs; the second completes the set and writes the manifest */
	bool first[4] = {true, false, true, false}, second[4] = {false, true, false, true};
	snprintf(path, sizeof(path), "%s/parts", dir);
	o.force = false;
	o.write_rank = first;
	assert_int_equal(tpc_shard_plan_build(&sp, &ck, &p, &FACTS, &o, &e), 0);
	assert_int_equal(tpc_shard_write(&sp, path, &o, &e), 0);
	assert_false(sp.manifest_written);
	assert_int_equal(sp.npresent, 2);
	tpc_shard_plan_release(&sp);
	o.write_rank = second;
	assert_int_equal(tpc_shard_plan_build(&sp, &ck, &p, &FACTS, &o, &e), 0);
	assert_int_equal(tpc_shard_write(&sp, path, &o, &e), 0);
	assert_true(sp.manifest_written);
	tpc_shard_plan_release(&sp);

	tpc_plan_release(&p);
	tpc_ckpt_release(&ck);
	test_rmrf(dir);
	free(dir);
}

static void test_manifest_bad(void **st)
{
	(void)st;
	tpc_ckpt ck;
	tpc_plan p;
	tpc_shard_plan sp;
	tpc_shard_opts o;
	tpc_err e;
	tpc_buf b = TPC_BUF_INIT;
	build(&ck);
	load_plan(&p);
	memset(&o, 0, sizeof(o));
	o.tp = 2;
	o.pp = 1;
	tpc_err_init(&e);
	assert_int_equal(tpc_shard_plan_build(&sp, &ck, &p, &FACTS, &o, &e), 0);
	tpc_shard_manifest_render(&sp, &b);
	tpc_manifest m;
	assert_int_equal(tpc_manifest_from_buffer(&m, b.p, b.len, "m.json", &e), 0);
	assert_int_equal(m.tp, 2);
	assert_int_equal(m.n, 4);
	assert_int_equal(m.t[0].split.nparts, 3);
	assert_int_equal(m.t[1].split.part[0].pad, 0);
	assert_string_equal(m.files[1], "model_tp01_pp00.safetensors");
	assert_string_equal(m.set_id, sp.set_id);
	tpc_manifest_release(&m);
	{
		/* "dp": the stage's ranks are tp x dp, dense splits over tp */
		const char *at = strstr(b.p, "\"tp\": 2");
		tpc_buf x = TPC_BUF_INIT;
		tpc_buf_add(&x, b.p, (size_t)(at - b.p));
		tpc_buf_adds(&x, "\"tp\": 1, \"dp\": 2");
		tpc_buf_adds(&x, at + 7);
		assert_int_equal(tpc_manifest_from_buffer(&m, x.p, x.len, "m.json", &e), 0);
		assert_true(m.tp == 2 && m.dp == 2 && m.t[1].split.dp == 2 && tpc_split_tp(&m.t[1].split, m.tp) == 1);
		tpc_manifest_release(&m);
		tpc_buf_release(&x);
		/* a layout without data-parallel ranks refuses dp by name */
		tpc_shard_plan dsp;
		o.dp = 2;
		o.ep = 2;
		tpc_err_init(&e);
		assert_int_equal(tpc_shard_plan_build(&dsp, &ck, &p, &FACTS, &o, &e), TPC_EUSAGE);
		assert_non_null(strstr(e.msg, "the tpconv layout holds tp x pp ranks"));
		tpc_shard_plan_release(&dsp);
		o.dp = o.ep = 0;
	}
	static const struct {
		const char *from, *to, *msg;
	} cases[] = {
		{"\"model_tp01_pp00.safetensors\"", "\"../evil.safetensors\"", "plain \"file\" name"},
		{"\"model_tp01_pp00.safetensors\"", "\"model_tp00_pp00.safetensors\"", "name the same file"},
		{"\"tp\": 2", "\"tp\": 3", "\"ranks\" must list 3 rank files"},
		{"\"tp\": 2", "\"tp\": 2, \"dp\": 0", "manifest: bad tp, dp or pp"},
		{"\"tp\": 2", "\"tp\": 1, \"dp\": 3", "\"ranks\" must list 3 rank files"},
		{"\"tp\": 2", "\"tp\": 4096, \"dp\": 2", "manifest: bad tp, dp or pp"},
		{"\"tpconv_manifest\": 1", "\"tpconv_manifest\": 2", "not a tpconv manifest of version 1"},
		{"{\"size\": 16, \"pad\": 0", "{\"size\": 17, \"pad\": 0", "do not divide by tp 2"},
		{"{\"size\": 4, \"pad\": 0, \"heads\": 2, \"replicas\": 1}", "{\"size\": 4, \"pad\": 0, \"heads\": 2, \"replicas\": 2}",
		 "2 heads on 2 replicas do not fit tp 2"},
		{"{\"size\": 4, \"pad\": 0, \"heads\": 2, \"replicas\": 1}", "{\"size\": 3, \"pad\": 1, \"heads\": 2, \"replicas\": 1}",
		 "parts add up to 23 but dim 0 has 24"},
		{"\"dtype\": \"I32\"", "\"dtype\": \"Q9\"", "unknown dtype"},
		{"\"stage\": 0", "\"stage\": 5", "\"stage\" must be 0 to 0"},
		{"\"layout\": \"tpconv\"", "\"layout\": \"nemo\"", "bad or missing tool, set_id, layout or format"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *at = strstr(b.p, cases[i].from);
		assert_non_null(at);
		tpc_buf x = TPC_BUF_INIT;
		tpc_buf_add(&x, b.p, (size_t)(at - b.p));
		tpc_buf_adds(&x, cases[i].to);
		tpc_buf_adds(&x, at + strlen(cases[i].from));
		tpc_err_init(&e);
		int r = tpc_manifest_from_buffer(&m, x.p, x.len, "m.json", &e);
		if (r != TPC_EINPUT || !strstr(e.msg, cases[i].msg))
			fail_msg("case %zu: got %d '%s', wanted '%s'", i, r, e.msg, cases[i].msg);
		tpc_buf_release(&x);
	}
	/* truncations never crash */
	for (size_t len = 0; len < b.len; len += 7) {
		tpc_err_init(&e);
		if (tpc_manifest_from_buffer(&m, b.p, len, "m.json", &e) == 0)
			tpc_manifest_release(&m);
	}
	tpc_buf_release(&b);
	tpc_shard_plan_release(&sp);
	tpc_plan_release(&p);
	tpc_ckpt_release(&ck);
}

static void test_paths_and_detect(void **st)
{
	(void)st;
	char *dir = test_tmpdir();
	char a[4300], b2[4300];
	snprintf(a, sizeof(a), "%s/set", dir);
	mkdir(a, 0777);
	assert_true(tpc_shard_path_inside(a, a));
	snprintf(b2, sizeof(b2), "%s/set/new/deeper", dir);
	assert_true(tpc_shard_path_inside(b2, a));
	snprintf(b2, sizeof(b2), "%s/set/../set/x", dir);
	assert_true(tpc_shard_path_inside(b2, a));
	snprintf(b2, sizeof(b2), "%s/settle", dir);
	assert_false(tpc_shard_path_inside(b2, a));
	snprintf(b2, sizeof(b2), "%s", dir);
	assert_false(tpc_shard_path_inside(b2, a));
	const tpc_layout *lay = NULL;
	assert_int_equal(tpc_set_detect(a, &lay), TPC_SET_NONE);
	assert_null(lay);
	snprintf(b2, sizeof(b2), "%s/set/rank0.safetensors", dir);
	assert_int_equal(test_write_file(b2, "x", 1), 0);
	assert_int_equal(tpc_set_detect(a, &lay), TPC_SET_FOREIGN);
	assert_string_equal(lay->name, "hf-mapping"); /* no TensorRT-LLM config.json: HF names */
	char cfg[4300];
	snprintf(cfg, sizeof(cfg), "%s/set/config.json", dir);
	const char *hfm = "{\"architectures\": [\"LlamaForCausalLM\"], \"mapping\": {}}";
	assert_int_equal(test_write_file(cfg, hfm, strlen(hfm)), 0);
	assert_int_equal(tpc_set_detect(a, &lay), TPC_SET_FOREIGN);
	assert_string_equal(lay->name, "hf-mapping");
	const char *trt = "{\"architecture\": \"LlamaForCausalLM\", \"mapping\": {\"tp_size\": 1}}";
	assert_int_equal(test_write_file(cfg, trt, strlen(trt)), 0);
	assert_int_equal(tpc_set_detect(a, &lay), TPC_SET_FOREIGN);
	assert_string_equal(lay->name, "trtllm");
	unlink(cfg);
	unlink(b2);
	snprintf(b2, sizeof(b2), "%s/set/pytorch_model_tp_1_pp_0.bin", dir);
	assert_int_equal(test_write_file(b2, "x", 1), 0);
	assert_int_equal(tpc_set_detect(a, &lay), TPC_SET_FOREIGN);
	assert_string_equal(lay->name, "oslo");
	unlink(b2);
	snprintf(b2, sizeof(b2), "%s/set/model-rank-1-part-0.safetensors", dir);
	assert_int_equal(test_write_file(b2, "x", 1), 0);
	assert_int_equal(tpc_set_detect(a, &lay), TPC_SET_FOREIGN);
	assert_string_equal(lay->name, "vllm");
	unlink(b2);
	snprintf(b2, sizeof(b2), "%s/set/model-rank-1-part-0.safetensors.tmp", dir);
	assert_int_equal(test_write_file(b2, "x", 1), 0);
	assert_int_equal(tpc_set_detect(a, NULL), TPC_SET_NONE);
	unlink(b2);
	snprintf(b2, sizeof(b2), "%s/set/pytorch_model_tp_1_pp_0.binx", dir);
	assert_int_equal(test_write_file(b2, "x", 1), 0);
	assert_int_equal(tpc_set_detect(a, NULL), TPC_SET_NONE);
	assert_int_equal(tpc_set_detect(b2, NULL), TPC_SET_NONE);
	/* a set folder with a missing rank: exit-3 error naming the rank */
	unlink(b2);
	snprintf(b2, sizeof(b2), "%s/set/rank1.safetensors", dir);
	assert_int_equal(test_write_file(b2, "x", 1), 0);
	tpc_merge m;
	tpc_merge_opts mo;
	tpc_plan p;
	memset(&mo, 0, sizeof(mo));
	load_plan(&p);
	mo.plan = &p;
	mo.tp = 2;
	tpc_err e;
	tpc_err_init(&e);
	assert_int_equal(tpc_merge_open(&m, a, &mo, &e), TPC_EINPUT);
	assert_non_null(strstr(e.msg, "rank 0 (tp 0, pp 0) of the shard set is missing"));
	tpc_plan_release(&p);
	test_rmrf(dir);
	free(dir);
}

/* A layout's merged_file: the peft layout's merge into a folder is one
 * adapter_model.safetensors; every other layout's an HF checkpoint (NULL). */
static void test_layout_merged_file(void **state)
{
	(void)state;
	const tpc_layout *p = tpc_layout_by_name("peft");
	assert_non_null(p);
	assert_string_equal(p->merged_file, "adapter_model.safetensors");
	for (size_t i = 0; i < tpc_layout_count(); i++)
		if (tpc_layout_at(i) != p)
			assert_null(tpc_layout_at(i)->merged_file);
}

/* A layout's optimizer field: megatron-dist alone stores optimizer state
 * (shard --optimizer), in its rank files' sharded format (cli_input.c reads
 * such a set with it); a plan for another layout with state is refused. */
static void test_layout_optimizer(void **state)
{
	(void)state;
	const tpc_layout *m = tpc_layout_by_name("megatron-dist");
	assert_non_null(m);
	assert_true(m->optimizer);
	assert_non_null(m->formats);
	const tpc_format *f = tpc_format_by_name(m->formats[0]);
	assert_non_null(f);
	assert_true(f->sharded);
	for (size_t i = 0; i < tpc_layout_count(); i++)
		if (tpc_layout_at(i) != m)
			assert_false(tpc_layout_at(i)->optimizer);
	tpc_shard_plan sp;
	tpc_shard_opts o;
	tpc_ckpt ck;
	tpc_plan p;
	tpc_model_facts f0;
	tpc_err e;
	memset(&o, 0, sizeof(o));
	memset(&p, 0, sizeof(p));
	memset(&f0, 0, sizeof(f0));
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	o.tp = 2;
	o.layout = tpc_layout_by_name("dcp");
	o.optim = (const struct tpc_shard_optim *)&o; /* any non-NULL: refused before it is read */
	assert_int_equal(tpc_shard_plan_build(&sp, &ck, &p, &f0, &o, &e), TPC_EUSAGE);
	assert_non_null(strstr(e.msg, "the dcp layout stores no optimizer state"));
	tpc_ckpt_release(&ck);
}

/* A layout's rank_name_ep sees the rank's EP group; the others name a rank
 * the same with or without one. */
static void test_rank_name_ep(void **state)
{
	(void)state;
	for (size_t i = 0; i < tpc_layout_count(); i++) {
		const tpc_layout *l = tpc_layout_at(i);
		if (l->rank_name_ep || !l->formats || !l->formats[0])
			continue;
		char *a = tpc_layout_rank_name(l, 1, 1, 2, 2, -1, l->formats[0]);
		char *b = tpc_layout_rank_name(l, 1, 1, 2, 2, 1, l->formats[0]);
		assert_non_null(a);
		assert_non_null(b);
		assert_string_equal(a, b);
		free(a);
		free(b);
	}
}

/* rank_name_plan: megatron-dist names its rank files by the plan, release/
 * for a model, iter_NNNNNNN/ (the optimizer's step, or the iteration given)
 * with optimizer state; the other layouts need no plan to name a rank. */
static void test_rank_name_plan(void **state)
{
	(void)state;
	const tpc_layout *m = tpc_layout_by_name("megatron-dist");
	assert_non_null(m);
	assert_non_null(m->rank_name_plan);
	for (size_t i = 0; i < tpc_layout_count(); i++)
		if (tpc_layout_at(i) != m)
			assert_null(tpc_layout_at(i)->rank_name_plan);
	tpc_shard_plan sp;
	tpc_shard_optim so;
	memset(&sp, 0, sizeof(sp));
	tpc_shard_optim_init(&so);
	sp.tp = 2;
	sp.pp = 2;
	char *a = m->rank_name_plan(&sp, 3);
	assert_string_equal(a, "release/__3_0.distcp");
	free(a);
	so.step = 7;
	sp.optim = &so;
	a = m->rank_name_plan(&sp, 3);
	assert_string_equal(a, "iter_0000007/__3_0.distcp");
	free(a);
	so.train.iteration = 1234;
	a = m->rank_name_plan(&sp, 0);
	assert_string_equal(a, "iter_0001234/__0_0.distcp");
	free(a);
	assert_int_equal(tpc_shard_optim_iteration(&so), 1234);
	assert_string_equal(so.train.lr_decay_style, "linear"); /* Megatron's defaults */
	assert_true(so.train.weight_decay == 0.01);
	assert_false(tpc_mcore_train_schedule_known(&so.train));
	so.train.lr = 3e-4;
	so.train.train_iters = 100;
	assert_true(tpc_mcore_train_schedule_known(&so.train));
	tpc_shard_optim_release(&so);
}

int main(void)
{
	tpc_formats_register_all();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rank_descriptions),
		cmocka_unit_test(test_write_merge),
		cmocka_unit_test(test_manifest_bad),
		cmocka_unit_test(test_paths_and_detect),
		cmocka_unit_test(test_layout_merged_file),
		cmocka_unit_test(test_layout_optimizer),
		cmocka_unit_test(test_rank_name_ep),
		cmocka_unit_test(test_rank_name_plan),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
