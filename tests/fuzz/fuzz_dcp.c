/* fuzz_dcp.c - a DCP .metadata pickle (formats/dcp.c): the safe VM with the
 * DCP allow-list, then the entries, chunks and item locations read from the
 * object tree. Whatever parses must name files inside the folder and chunks
 * inside their tensors. */
#include <string.h>

#include "dcp.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc_dcp_meta m;
	tpc_err e;
	tpc_err_init(&e);
	int r = tpc_dcp_meta_from_buffer(&m, data, size, "fuzz/.metadata", &e);
	fuzz_check_status(r, &e);
	if (!r) {
		for (size_t i = 0; i < m.n; i++) {
			const tpc_dcp_entry *en = &m.e[i];
			FUZZ_CHECK(en->fqn && (en->tensor || en->nc == 1));
			for (size_t k = 0; k < en->nc; k++) {
				const tpc_dcp_chunk *c = &en->c[k];
				FUZZ_CHECK(c->file && c->file[0] && !strchr(c->file, '/') && strcmp(c->file, ".."));
				for (int d = 0; en->tensor && d < en->ndim; d++)
					FUZZ_CHECK(c->off[d] >= 0 && c->size[d] >= 0 && c->off[d] + c->size[d] <= en->shape[d]);
			}
		}
		tpc_dcp_meta_release(&m);
	}
	return 0;
}
