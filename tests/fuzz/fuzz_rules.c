/* fuzz_rules.c - remap rules (lib/tpc_rules.h: the --rules file, JSON) and
 * expected-key lists (tpc_keys_from_buffer). An accepted rule list is then
 * run as `convert --rules` runs it: planned over a small checkpoint, applied,
 * and rendered as the --dry-run table. Model facts are set so that unfuse
 * sizes such as "heads/kv_heads*head_dim" tile the 4-row tensors (and a
 * rule naming hidden leaves it unknown, the refusal path). */
#include "fuzz.h"
#include "tpc_rules.h"

static const char *const names[] = {
	"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
	"module.transformer.h.1.attn.c_attn.weight", "ema_model.layers.2.mlp.fc.bias",
	"model.norm.weight", "lm_head.weight",
};

static void plan(tpc_rules *r)
{
	tpc_ckpt ck;
	tpc_remap m;
	tpc_err e;
	int src;
	const size_t nt = sizeof(names) / sizeof(names[0]);
	uint8_t *mem = calloc(nt * 64, 1);
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	if (!mem || tpc_ckpt_add_mem(&ck, "mem", mem, nt * 64, &src, &e))
		goto out;
	for (size_t i = 0; i < nt; i++) {
		int64_t shape[2] = {4, 4};
		if (tpc_ckpt_add_tensor(&ck, names[i], i % 2 ? TPC_F32 : TPC_BF16, i == 3 ? 1 : 2, shape,
					NULL, src, i * 64, &e) < 0)
			goto out;
	}
	/* 2 heads of 1 over 1 query group: q 2 rows, k 1, v 1 */
	if (tpc_rules_set_fact(r, TPC_FACT_HEADS, 2, "fuzz", &e) || tpc_rules_set_fact(r, TPC_FACT_KV_HEADS, 1, "fuzz", &e) ||
	    tpc_rules_set_fact(r, TPC_FACT_HEAD_DIM, 1, "fuzz", &e) || tpc_rules_set_fact(r, TPC_FACT_VOCAB, 3, "fuzz", &e))
		goto out;
	tpc_remap_init(&m);
	int ret = tpc_rules_plan(r, &ck, &m, &e);
	fuzz_check_status(ret, &e);
	if (!ret) {
		tpc_buf b = TPC_BUF_INIT;
		for (size_t i = 0; i < tpc_rules_count(r); i++)
			(void)tpc_remap_unmatched(r, &m, i);
		tpc_remap_table(&ck, &m, r, &b);
		tpc_buf_release(&b);
		tpc_err_init(&e);
		ret = tpc_remap_apply(&ck, &m, &e);
		fuzz_check_status(ret, &e);
		if (!ret) {
			tpc_err_init(&e);
			FUZZ_CHECK(tpc_ckpt_validate(&ck, &e) == 0);
			for (size_t i = 0; i < ck.n; i++) /* names stay unique */
				FUZZ_CHECK(tpc_ckpt_find(&ck, ck.t[i].name) == (int64_t)i);
		}
	}
	tpc_remap_release(&m);
out:
	tpc_ckpt_release(&ck);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc_err e;
	tpc_rules *r = tpc_rules_new();
	if (!r)
		return 0;
	tpc_err_init(&e);
	int ret = tpc_rules_from_buffer(r, (const char *)data, size, "fuzz-rules.json", &e);
	fuzz_check_status(ret, &e);
	if (!ret) {
		char line[1024];
		for (size_t i = 0; i < tpc_rules_count(r); i++)
			tpc_rules_describe(r, i, line, sizeof(line));
		plan(r);
	}
	tpc_rules_free(r);

	tpc_keys k;
	memset(&k, 0, sizeof(k));
	tpc_err_init(&e);
	ret = tpc_keys_from_buffer(&k, (const char *)data, size, "keys.txt", &e);
	fuzz_check_status(ret, &e);
	tpc_keys_release(&k);
	return 0;
}
