/* fuzz_torch.h - the body shared by fuzz_torch_zip.c and fuzz_torch_legacy.c:
 * read a torch.save image with tpc_torch_from_buffer() as `convert` does
 * (default policy) and as `inspect --globals` does (every global listed,
 * none refused, nothing run), validate the checkpoint and read its tensors. */
#ifndef TPC_FUZZ_TORCH_H
#define TPC_FUZZ_TORCH_H

#include "formats.h"
#include "fuzz.h"

static inline void fuzz_torch_once(const uint8_t *data, size_t size, bool globals)
{
	tpc_ckpt ck;
	tpc_err e;
	tpc_open_opts o;
	memset(&o, 0, sizeof(o));
	if (globals)
		o.globals = tpc_value_new(TPC_V_DICT);
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	int r = tpc_torch_from_buffer(&ck, data, size, "fuzz.pt", &o, &e);
	fuzz_check_status(r, &e);
	if (!r) {
		tpc_err_init(&e);
		r = tpc_ckpt_validate(&ck, &e);
		FUZZ_CHECK(r == 0); /* the reader validated already */
		fuzz_consume_ckpt(&ck);
	}
	tpc_ckpt_release(&ck);
	tpc_value_unref(o.globals);
}

#endif
