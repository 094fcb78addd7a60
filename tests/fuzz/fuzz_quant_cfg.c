/* fuzz_quant_cfg.c - a model folder's quantization_config (config.json) or
 * AutoGPTQ quantize_config.json (tpc_quant_cfg_from_buffer, lib/tpc_quant.c),
 * read by convert --dequantize. */
#include "fuzz.h"
#include "tpc_quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int gptq_file = 0; gptq_file < 2; gptq_file++) {
		tpc_quant_cfg q;
		tpc_err e;
		tpc_err_init(&e);
		int r = tpc_quant_cfg_from_buffer(&q, (const char *)data, size, "config.json", gptq_file, &e);
		fuzz_check_status(r, &e);
		FUZZ_CHECK(!r || q.method == TPC_QM_NONE);
		if (!r && q.method == TPC_QM_GPTQ)
			FUZZ_CHECK(q.bits == 2 || q.bits == 4 || q.bits == 8);
		if (!r && q.method == TPC_QM_AWQ)
			FUZZ_CHECK(q.bits == 4 && q.group_size > 0);
		if (!r && q.block[0])
			FUZZ_CHECK(q.block[0] > 0 && q.block[1] > 0);
	}
	return 0;
}
