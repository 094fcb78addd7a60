/* fuzz_gguf.c - the GGUF reader (formats/gguf/gguf.c) and the block decoders.
 *
 * tpc_gguf_from_buffer() over an exact-size heap copy, so AddressSanitizer
 * sees any read past the end; for inputs it accepts, every tensor is hashed
 * (block tensors dequantized through TPC_DQ_GGML), then the registry's open
 * on the same bytes as a file (KV list kept, inspect's text built), and
 * the GGUF writer's header for that checkpoint, written to /dev/null's
 * neighbour: a memory file. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "formats.h"
#include "fuzz.h"
#include "gguf.h"

/* The base an adapter GGUF is read back over (lora_to_peft): a tiny llama's
 * config.json in a folder made once (seeds: make_seeds.py's adapter_gguf) */
static char lora_dir[64];

static void lora_base_rm(void)
{
	char path[96];
	snprintf(path, sizeof(path), "%s/config.json", lora_dir);
	remove(path);
	rmdir(lora_dir);
}

static const char *lora_base(void)
{
	char *dir = lora_dir;
	static const char cfg[] = "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 8, "
				  "\"intermediate_size\": 16, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, "
				  "\"num_hidden_layers\": 1, \"vocab_size\": 16, \"rms_norm_eps\": 1e-06}";
	if (dir[0])
		return dir;
	snprintf(dir, sizeof(lora_dir), "/tmp/tpc-fuzz-lora.XXXXXX");
	if (!mkdtemp(dir)) {
		dir[0] = '\0';
		return NULL;
	}
	atexit(lora_base_rm);
	char path[96];
	snprintf(path, sizeof(path), "%s/config.json", dir);
	FILE *f = fopen(path, "w");
	if (!f || fwrite(cfg, 1, sizeof(cfg) - 1, f) != sizeof(cfg) - 1) {
		if (f)
			fclose(f);
		return NULL;
	}
	fclose(f);
	return dir;
}

/* an opened GGUF keeps its KV list on the checkpoint; an adapter is read
 * back to PEFT's names (gguf_lora.c) */
static void kvs_kept(tpc_ckpt *ck)
{
	const tpc_gguf_kvs *kv = tpc_gguf_ckpt_kvs(ck);
	FUZZ_CHECK(kv != NULL);
	ptrdiff_t t = tpc_gguf_kvs_find(kv, "general.type");
	const char *base = t >= 0 && kv->kv[t].type == TPC_GV_STRING && kv->kv[t].slen == 7 && !memcmp(kv->kv[t].s, "adapter", 7)
				   ? lora_base()
				   : NULL;
	if (!base)
		return;
	char *json = NULL;
	tpc_err e;
	tpc_err_init(&e);
	int r = tpc_fmt_gguf.lora_to_peft(ck, base, &json, &e);
	fuzz_check_status(r, &e);
	FUZZ_CHECK(!r == (json != NULL));
	if (!r)
		fuzz_consume_ckpt(ck);
	free(json);
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
