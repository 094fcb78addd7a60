/* fuzz_zip.c - the zip container reader (formats/torch/tpc_zip.h) on arbitrary bytes:
 * open, look records up, read every entry (STORED in place, DEFLATED through
 * the bounded inflater) and check CRCs, as the torch reader does. */
#include "fuzz.h"
#include "torch/tpc_zip.h"

#define CAP (8u << 20) /* inflate cap: a deflate bomb must stop here */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc_zip z;
	tpc_err e;
	tpc_zip_init(&z);
	tpc_err_init(&e);
	int r = tpc_zip_open_from_buffer(&z, data, size, "fuzz.zip", &e);
	fuzz_check_status(r, &e);
	if (!r) {
		(void)tpc_zip_is_torchscript(&z);
		(void)tpc_zip_find(&z, "data.pkl");
		tpc_err_init(&e);
		fuzz_check_status(tpc_zip_check_prefix(&z, &e), &e);
		for (size_t i = 0; i < tpc_zip_count(&z); i++) {
			const tpc_zip_entry *ent = tpc_zip_entry_at(&z, i);
			const uint8_t *p;
			uint64_t len;
			uint8_t *owned = NULL;
			FUZZ_CHECK(tpc_zip_find_raw(&z, ent->name) != NULL);
			FUZZ_CHECK(ent->data_offset <= size && ent->csize <= size - ent->data_offset);
			tpc_err_init(&e);
			r = tpc_zip_read(&z, ent, CAP, &p, &len, &owned, &e);
			fuzz_check_status(r, &e);
			if (!r) {
				FUZZ_CHECK(len <= CAP || ent->method == TPC_ZIP_STORED);
				if (len) /* every byte readable */
					FUZZ_CHECK(p[0] == p[0] && p[len - 1] == p[len - 1]);
				if (ent->method == TPC_ZIP_STORED) {
					tpc_err_init(&e);
					fuzz_check_status(tpc_zip_verify_crc(&z, ent, &e), &e);
				}
			}
			free(owned);
		}
	}
	tpc_zip_release(&z);
	return 0;
}
