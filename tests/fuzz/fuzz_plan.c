/* fuzz_plan.c - sharding plan JSON (shard/tpc_plan.c, the --plan file and the
 * plan a shard set's manifest carries). An accepted plan is then used as
 * `tpconv shard` uses it: a few tensor names resolved for tp = 1..8 with and
 * without padding, and their pipeline stages. */
#include "fuzz.h"
#include "tpc_plan.h"

static const struct {
	const char *name;
	int ndim;
	int64_t shape[3];
} names[] = {
	{"model.embed_tokens.weight", 2, {32000, 64}},
	{"model.layers.0.self_attn.q_proj.weight", 2, {64, 64}},
	{"model.layers.3.self_attn.k_proj.weight", 2, {16, 64}},
	{"model.layers.1.mlp.down_proj.weight", 2, {64, 172}},
	{"transformer.h.2.attn.c_attn.weight", 2, {64, 192}},
	{"transformer.h.2.attn.c_attn.bias", 1, {192}},
	{"lm_head.weight", 2, {32003, 64}},
	{"model.norm.weight", 1, {64}},
	{"scalar", 0, {0}},
	{"conv.weight", 3, {8, 4, 3}},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc_plan p;
	tpc_err e;
	tpc_err_init(&e);
	int r = tpc_plan_from_buffer(&p, (const char *)data, size, "fuzz-plan.json", &e);
	fuzz_check_status(r, &e);
	if (!r) {
		tpc_model_facts f = p.facts;
		tpc_model_facts d = {.heads = 8, .kv_heads = 2, .head_dim = 8, .hidden = 64, .vocab = 32000, .layers = 4, .ff_act = TPC_FF_GEGLU};
		tpc_facts_fill(&f, &d);
		tpc_facts_finish(&f);
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			(void)tpc_plan_match(&p, names[i].name);
			(void)tpc_plan_layer(&p, names[i].name);
			(void)tpc_plan_stage(&p, names[i].name, 2, 4);
			for (int tp = 1; tp <= 8; tp *= 2)
				for (unsigned fl = 0; fl <= TPC_RESOLVE_PAD; fl += TPC_RESOLVE_PAD) {
					tpc_split s;
					bool matched;
					tpc_err_init(&e);
					r = tpc_plan_resolve(&p, &f, names[i].name, names[i].ndim, names[i].shape,
							     tp, fl, &s, &matched, &e);
					fuzz_check_status(r, &e);
					if (r || s.kind == TPC_SPLIT_REPLICATE)
						continue;
					FUZZ_CHECK(s.dim >= 0 && s.dim < names[i].ndim);
					FUZZ_CHECK(s.nparts >= 1 && s.nparts <= TPC_PLAN_MAX_PARTS);
					int64_t sum = 0;
					for (int k = 0; k < s.nparts; k++) {
						FUZZ_CHECK(s.part[k].size >= 0 && s.part[k].pad >= 0);
						sum += s.part[k].size;
						int64_t len = tpc_split_rank_len(&s, k, tp);
						for (int t = 0; t < tp; t++) {
							int64_t st = tpc_split_rank_start(&s, k, tp, t);
							/* every rank's rows lie inside the padded part */
							FUZZ_CHECK(st >= 0 && len >= 0 &&
								   st + len <= s.part[k].size + s.part[k].pad);
						}
					}
					FUZZ_CHECK(sum == names[i].shape[s.dim]);
				}
		}
	}
	tpc_plan_release(&p);
	return 0;
}
