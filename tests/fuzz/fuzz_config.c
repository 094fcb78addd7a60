/* fuzz_config.c - model facts from a Hugging Face config.json
 * (tpc_facts_from_buffer, shard/tpc_plan.c): read from a model folder. */
#include "fuzz.h"
#include "tpc_plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc_model_facts f;
	tpc_err e;
	memset(&f, 0, sizeof(f));
	tpc_err_init(&e);
	int r = tpc_facts_from_buffer(&f, (const char *)data, size, "config.json", &e);
	fuzz_check_status(r, &e);
	if (!r)
		tpc_facts_finish(&f);
	return 0;
}
