/* fuzz_zero.c - a DeepSpeed ZeRO checkpoint (formats/deepspeed.c) given as
 * file images: the torch zip reader and safe pickle VM over each, then the
 * consolidation walking param_shapes, partition counts and flat groups.
 * Input: u8 model-file count (1..4), u8 optim-file count (1..8), then per
 * file a u32 LE length and its bytes. Whatever consolidates must describe
 * every tensor inside its sources. */
#include <string.h>

#include "deepspeed.h"
#include "fuzz.h"

#define MAX_FILES 12

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *bufs[MAX_FILES];
	uint64_t lens[MAX_FILES];
	size_t nm, no, pos = 2;
	if (size < 2)
		return 0;
	nm = data[0] % 4 + 1;
	no = data[1] % 8 + 1;
	for (size_t i = 0; i < nm + no; i++) {
		uint32_t l;
		if (pos + 4 > size)
			return 0;
		memcpy(&l, data + pos, 4);
		pos += 4;
		if (l > size - pos)
			l = (uint32_t)(size - pos);
		bufs[i] = data + pos;
		lens[i] = l;
		pos += l;
	}
	tpc_ckpt ck;
	tpc_err e;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	int r = tpc_zero_from_buffers(&ck, bufs, lens, nm, no, "fuzz/zero", &e);
	fuzz_check_status(r, &e);
	if (!r) {
		tpc_err e2;
		tpc_err_init(&e2);
		FUZZ_CHECK(tpc_ckpt_validate(&ck, &e2) == 0);
	}
	tpc_ckpt_release(&ck);
	return 0;
}
