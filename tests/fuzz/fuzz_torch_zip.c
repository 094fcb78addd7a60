/* fuzz_torch_zip.c - torch.save zip checkpoints (formats/torch/torch_read.c, zip
 * path): the container, data.pkl through the pickle VM, persistent ids,
 * rebuild calls, storages and views. Inputs that do not start with a local
 * file header would take another path; they are skipped. */
#include "fuzz_torch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4 || memcmp(data, "PK\x03\x04", 4))
		return 0;
	fuzz_torch_once(data, size, false);
	fuzz_torch_once(data, size, true);
	return 0;
}
