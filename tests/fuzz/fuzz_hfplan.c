/* fuzz_hfplan.c - tpconv plan --from-hf (shard/tpc_hfplan.c): a transformers
 * tensor-parallel plan or a config.json carrying one. Whatever it accepts must
 * give a plan the plan parser accepts. */
#include "fuzz.h"
#include "tpc_plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc_buf b = TPC_BUF_INIT;
	tpc_err e;
	tpc_err_init(&e);
	int r = tpc_plan_from_hf((const char *)data, size, "fuzz.json", &b, &e);
	fuzz_check_status(r, &e);
	if (!r) {
		tpc_plan p;
		tpc_err e2;
		tpc_err_init(&e2);
		FUZZ_CHECK(tpc_plan_from_buffer(&p, b.p, b.len, "generated", &e2) == 0);
		tpc_plan_release(&p);
	}
	tpc_buf_release(&b);
	return 0;
}
