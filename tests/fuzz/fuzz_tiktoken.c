/* fuzz_tiktoken.c - a tiktoken vocabulary file (HunYuan's hy.tiktoken,
 * tpc__tiktoken_from_buffer, formats/gguf/gguf_tiktoken.c), read for GGUF
 * tokenizer keys; then QwenModel.bpe's merge of every rank and GPT-2's
 * string of each token. */
#include <stdlib.h>

#include "fuzz.h"
#include "gguf_vocab_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tpc__tiktoken t;
	tpc_err e;
	tpc_err_init(&e);
	int r = tpc__tiktoken_from_buffer((const char *)data, size, "hy.tiktoken", &t, &e);
	fuzz_check_status(r, &e);
	FUZZ_CHECK(r || t.n > 0);
	for (size_t i = 0; !r && i < t.n && i < 4096; i++) {
		size_t n = (size_t)(t.off[i + 1] - t.off[i]), split = 0;
		FUZZ_CHECK(n > 0 && tpc__tiktoken_rank(&t, t.bytes + t.off[i], n) == (int64_t)i);
		int two = tpc__tiktoken_merge(&t, i, &split);
		FUZZ_CHECK(two == 0 || (two == 1 && split > 0 && split < n));
		char *s = malloc(2 * n);
		FUZZ_CHECK(s && tpc__gpt2_bytes_str(t.bytes + t.off[i], n, s) >= n);
		free(s);
	}
	if (!r)
		tpc__tiktoken_release(&t);
	return 0;
}
