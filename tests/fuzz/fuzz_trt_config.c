/* fuzz_trt_config.c - a TensorRT-LLM set's config.json, read back by merge,
 * reshard and inspect (tpc__trt_model_read) and turned into a Hugging Face
 * config by merge (tpc__trt_hf_config), both in shard/tpc_trtllm_config.c;
 * its member scanner is hand-written, so hostile JSON must stay in bounds. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz.h"
#include "tpc_layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char dir[] = "/tmp/tpc-fuzz-trt-XXXXXX", path[64];
	if (!mkdtemp(dir))
		return 0;
	snprintf(path, sizeof(path), "%s/config.json", dir);
	FILE *f = fopen(path, "wb");
	if (f && (size == 0 || fwrite(data, 1, size, f) == size) && !fclose(f)) {
		tpc__trt_model m;
		tpc_err e;
		tpc_err_init(&e);
		fuzz_check_status(tpc__trt_model_read(dir, &m, &e), &e);
		tpc_err_init(&e);
		char *hf = tpc__trt_hf_config(dir, &e);
		FUZZ_CHECK(hf || e.code);
		if (!hf)
			fuzz_check_status(e.code, &e);
		free(hf);
	} else if (f) {
		fclose(f);
	}
	unlink(path);
	rmdir(dir);
	return 0;
}
