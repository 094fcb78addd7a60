/* fuzz_torch_legacy.c - legacy torch.save files (formats/torch/torch_read.c, legacy
 * path): five pickles back to back, then the storages with their element
 * counts. The input is the file after its 15-byte protocol-2 magic pickle
 * (put back here), so no mutation is wasted on the magic, unless the input
 * starts with a magic pickle of its own (protocols 0-1 write it as text, 4-5
 * inside a FRAME): then it is the whole file. */
#include "fuzz_torch.h"

static const uint8_t magic[15] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
				  0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size >= 4 && !memcmp(data, "PK\x03\x04", 4))
		return 0; /* a zip: fuzz_torch_zip's */
	if (tpc_fmt_torch.detect(NULL, data, size) > 0) {
		fuzz_torch_once(data, size, false);
		fuzz_torch_once(data, size, true);
		return 0;
	}
	uint8_t *buf = malloc(size + sizeof(magic));
	if (!buf)
		return 0;
	memcpy(buf, magic, sizeof(magic));
	if (size)
		memcpy(buf + sizeof(magic), data, size);
	fuzz_torch_once(buf, size + sizeof(magic), false);
	fuzz_torch_once(buf, size + sizeof(magic), true);
	free(buf);
	return 0;
}
