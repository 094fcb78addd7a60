/* fuzz_dcp_part.c - a part file of the dcp layout (formats/dcp.c
 * part_items): torch.save archives back to back, found from the end of the
 * file by their zip end records, each opened as one tensor. Whatever is found
 * must tile the file and describe tensors inside it. */
#include <stdlib.h>

#include "dcp.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc_ckpt ck;
	tpc_err e;
	uint64_t *off = NULL, *len = NULL;
	size_t n = 0;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	int r = tpc_dcp_part_items_from_buffer(&ck, data, size, "fuzz/__0_0.distcp", &off, &len, &n, &e);
	fuzz_check_status(r, &e);
	if (!r) {
		uint64_t at = 0;
		for (size_t i = 0; i < n; i++) {
			FUZZ_CHECK(off[i] == at && len[i] > 0);
			at += len[i];
		}
		FUZZ_CHECK(at == size || n == 0);
		FUZZ_CHECK(ck.n == n);
		tpc_err e2;
		tpc_err_init(&e2);
		FUZZ_CHECK(tpc_ckpt_validate(&ck, &e2) == 0);
	}
	free(off);
	free(len);
	tpc_ckpt_release(&ck);
	return 0;
}
