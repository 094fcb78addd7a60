/* fuzz_safetensors.c - the safetensors reader (formats/safetensors.c).
 *
 * First tpc_safetensors_from_buffer() over an exact-size heap copy, so
 * AddressSanitizer sees any read past the end; then, for inputs it accepts,
 * the registry's open on the same bytes as a file, which adds what `open`
 * does after the header (tied-tensor aliases, the pickled object tree kept
 * in __metadata__). */
#include "formats.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc_ckpt ck;
	tpc_err e;
	int src, r;
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	if (size)
		memcpy(copy, data, size);
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	r = tpc_ckpt_add_mem(&ck, "fuzz.safetensors", copy, size, &src, &e);
	FUZZ_CHECK(r == 0);
	r = tpc_safetensors_from_buffer(&ck, copy, size, src, "fuzz.safetensors", &e);
	fuzz_check_status(r, &e);
	if (!r) {
		tpc_err_init(&e);
		fuzz_check_status(tpc_ckpt_validate(&ck, &e), &e);
	}
	tpc_ckpt_release(&ck);
	if (r)
		return 0;

	fuzz_open_as_file(&tpc_fmt_safetensors, data, size, fuzz_consume_ckpt);
	return 0;
}
