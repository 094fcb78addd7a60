/* fuzz_spm.c - SentencePiece's tokenizer.model protobuf
 * (tpc_spm_from_buffer, formats/gguf/spm.c), read for GGUF tokenizer keys. */
#include "fuzz.h"
#include "spm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc_spm m;
	tpc_err e;
	tpc_err_init(&e);
	int r = tpc_spm_from_buffer(data, size, "tokenizer.model", &m, &e);
	fuzz_check_status(r, &e);
	FUZZ_CHECK(r || m.n > 0);
	size_t unk = 0;
	for (size_t i = 0; !r && i < m.n; i++) {
		FUZZ_CHECK(m.p[i].len > 0 && strlen(m.p[i].s) == m.p[i].len);
		FUZZ_CHECK(m.p[i].type >= TPC_SPM_NORMAL && m.p[i].type <= TPC_SPM_BYTE);
		unk += m.p[i].type == TPC_SPM_UNKNOWN;
	}
	FUZZ_CHECK(r || unk == 1);
	if (!r)
		tpc_spm_release(&m);
	return 0;
}
