/* fuzz_hf_index.c - the Hugging Face shard index (model.safetensors.index.json,
 * formats/hf_index.c): JSON, weight_map entries, file names that must stay
 * inside the folder. */
#include "formats.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char **names = NULL, **files = NULL;
	size_t n = 0;
	uint64_t total = 0;
	tpc_err e;
	tpc_err_init(&e);
	int r = tpc_hf_index_from_buffer((const char *)data, size, "fuzz.index.json", &names, &files,
					 &n, &total, &e);
	fuzz_check_status(r, &e);
	if (!r) {
		for (size_t i = 0; i < n; i++) {
			FUZZ_CHECK(names[i] && files[i]);
			/* relative, and no ".." component: the file stays in the folder */
			FUZZ_CHECK(files[i][0] != '/');
			for (const char *c = files[i]; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
				FUZZ_CHECK(strncmp(c, "..", 2) || (c[2] != '/' && c[2] != '\0'));
			free(names[i]);
			free(files[i]);
		}
		free(names);
		free(files);
	}
	return 0;
}
