/* fuzz_lora_cfg.c - a PEFT adapter_config.json (tpc_lora_cfg_from_buffer,
 * lib/tpc_lora.c), read by convert --lora, and its rank_pattern /
 * alpha_pattern regular expressions matched against module names. */
#include "fuzz.h"
#include "tpc_lora.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {"model.layers.0.self_attn.q_proj", "transformer.h.11.attn.c_attn", "lm_head", ""};
	tpc_lora_cfg c;
	tpc_err e;
	tpc_err_init(&e);
	int r = tpc_lora_cfg_from_buffer(&c, (const char *)data, size, "adapter_config.json", &e);
	fuzz_check_status(r, &e);
	if (r)
		return 0;
	FUZZ_CHECK(c.r >= 1);
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		int64_t rk;
		double alpha;
		tpc_err_init(&e);
		int q = tpc_lora_rank_alpha(&c, names[i], &rk, &alpha, &e);
		fuzz_check_status(q, &e);
		FUZZ_CHECK(q || rk >= 1);
	}
	tpc_lora_cfg_release(&c);
	return 0;
}
