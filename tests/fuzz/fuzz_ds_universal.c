/* fuzz_ds_universal.c - a DeepSpeed universal checkpoint (formats/
 * ds_universal.c) given as file images: the torch zip reader and safe pickle
 * VM over each, then the walk of param_shapes and param_groups, each
 * parameter's folder of state files (cat_dim, shapes, the same keys across a
 * group, the step) as the optimizer reads it.
 * Input: u8 file count (1..32), u8 flags (bit 0: read the optimizer state),
 * then per file a u8 path length, the path ("zero/optimizer_state.pt",
 * "mp_rank_00_model_states.pt", "zero/NAME/fp32.pt", ...), a u32 LE length
 * and its bytes. Whatever is read must describe every tensor inside its
 * sources. */
#include <string.h>

#include "ds_universal.h"
#include "fuzz.h"

#define MAX_FILES 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc_ds_universal_file f[MAX_FILES];
	char names[MAX_FILES][256];
	size_t nf, pos = 2;
	if (size < 2)
		return 0;
	nf = data[0] % MAX_FILES + 1;
	for (size_t i = 0; i < nf; i++) {
		uint32_t l;
		if (pos + 1 > size)
			return 0;
		size_t nl = data[pos++];
		if (nl > size - pos)
			return 0;
		memcpy(names[i], data + pos, nl);
		names[i][nl] = '\0';
		pos += nl;
		if (pos + 4 > size)
			return 0;
		memcpy(&l, data + pos, 4);
		pos += 4;
		if (l > size - pos)
			l = (uint32_t)(size - pos);
		f[i].rel = names[i];
		f[i].p = data + pos;
		f[i].n = l;
		pos += l;
	}
	tpc_ckpt ck;
	tpc_err e;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	int r = tpc_ds_universal_from_buffers(&ck, f, nf, data[1] & 1, "fuzz/universal", &e);
	fuzz_check_status(r, &e);
	if (!r) {
		tpc_err e2;
		tpc_err_init(&e2);
		FUZZ_CHECK(tpc_ckpt_validate(&ck, &e2) == 0);
		fuzz_consume_ckpt(&ck);
	}
	tpc_ckpt_release(&ck);
	return 0;
}
