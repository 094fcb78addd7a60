/* fuzz_gguf.c - the GGUF reader (formats/gguf/gguf.c) and the block decoders.
 *
 * tpc_gguf_from_buffer() over an exact-size heap copy, so AddressSanitizer
 * sees any read past the end; for inputs it accepts, every tensor is hashed
 * (block tensors dequantized through TPC_DQ_GGML), then the registry's open
 * on the same bytes as a file (KV list kept, inspect's text built), and
 * the GGUF writer's header for that checkpoint, written to /dev/null's
 * neighbour: a memory file. */
#include "formats.h"
#include "fuzz.h"
#include "gguf.h"

/* an opened GGUF keeps its KV list on the checkpoint */
static void kvs_kept(tpc_ckpt *ck)
{
	FUZZ_CHECK(tpc_gguf_ckpt_kvs(ck) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc_ckpt ck;
	tpc_err e;
	tpc_gguf_kvs kv = {0};
	int src, r;
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	if (size)
		memcpy(copy, data, size);
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	r = tpc_ckpt_add_mem(&ck, "fuzz.gguf", copy, size, &src, &e);
	FUZZ_CHECK(r == 0);
	r = tpc_gguf_from_buffer(&ck, copy, size, src, "fuzz.gguf", &kv, &e);
	fuzz_check_status(r, &e);
	if (!r) {
		tpc_err_init(&e);
		r = tpc_ckpt_validate(&ck, &e);
		fuzz_check_status(r, &e);
		if (!r)
			fuzz_consume_ckpt(&ck);
	}
	tpc_gguf_kvs_release(&kv);
	tpc_ckpt_release(&ck);
	if (r)
		return 0;

	fuzz_open_as_file(&tpc_fmt_gguf, data, size, kvs_kept);
	return 0;
}
