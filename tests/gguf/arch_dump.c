/* arch_dump - what tpc_gguf_from_hf makes of a Hugging Face model folder,
 * printed as tests/gguf/gguf_arch_dump.py prints a GGUF file: the KVs in
 * order, then each tensor's name, type, ne[] and the sha256 (first 16 hex
 * digits) of the bytes a GGUF holds for it (F32, F16 and BF16 computed here
 * from the description; other types "-").
 *
 * usage: arch_dump MODEL_DIR [OUTTYPE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "gguf.h"
#include "tpc_cast.h"
#include "tpc_hash.h"
#include "tpc_io.h"

static const char *vt_name(int t)
{
	static const char *const n[] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
					"BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
	return t >= 0 && t < TPC_GV_COUNT ? n[t] : "?";
}

static void print_kv(const tpc_gguf_kv *kv)
{
	if (kv->type == TPC_GV_ARRAY && kv->atype == TPC_GV_BOOL) {
		/* a bool per layer (sliding_window_pattern), as gguf_arch_dump.py prints it */
		printf("kv %s ARRAY[BOOL] [", kv->key);
		for (uint64_t i = 0; i < kv->n; i++)
			printf("%s%s", i ? ", " : "", ((const uint8_t *)kv->arr)[i] ? "True" : "False");
		printf("]\n");
		return;
	}
	printf("kv %s %s ", kv->key, vt_name(kv->type));
	switch (kv->type) {
	case TPC_GV_STRING:
		printf("'%.*s'\n", (int)kv->slen, kv->s);
		break;
	case TPC_GV_F32:
	case TPC_GV_F64:
		printf("%.9g\n", kv->type == TPC_GV_F32 ? (double)(float)kv->v.f : kv->v.f);
		break;
	case TPC_GV_BOOL:
		printf("%s\n", kv->v.u ? "True" : "False");
		break;
	case TPC_GV_I8:
	case TPC_GV_I16:
	case TPC_GV_I32:
	case TPC_GV_I64:
		printf("%lld\n", (long long)kv->v.i);
		break;
	case TPC_GV_ARRAY:
		printf("n=%llu\n", (unsigned long long)kv->n);
		break;
	default:
		printf("%llu\n", (unsigned long long)kv->v.u);
	}
}

/* the tensor's values as f32, then in the GGUF type */
static int tensor_hash(const tpc_ckpt *ck, const tpc_gguf_wtensor *w, char hex[17], tpc_err *e)
{
	tpc_tensor t;
	int ret = 0;
	size_t es = w->type == TPC_GGML_F32 ? 4 : 2;
	strcpy(hex, "-");
	if (w->type != TPC_GGML_F32 && w->type != TPC_GGML_F16 && w->type != TPC_GGML_BF16)
		return 0;
	if (tpc_tensor_copy(&t, &w->t))
		return tpc_err_nomem(e);
	t.dtype = TPC_F32;
	t.nbytes = t.numel * 4;
	float *v = malloc(t.nbytes + 1);
	uint8_t *out = malloc(t.numel * es + 1), md[TPC_HASH_MAX];
	if (!v || !out)
		ret = tpc_err_nomem(e);
	else if (w->mem)
		memcpy(v, w->mem, t.nbytes);
	else
		ret = tpc_ckpt_read_out(ck, &t, 0, t.nbytes, v, e);
	for (uint64_t i = 0; !ret && i < t.numel; i++) {
		uint16_t h = w->type == TPC_GGML_F16 ? tpc_f32_to_f16(v[i]) : tpc_f32_to_bf16(v[i]);
		if (es == 4)
			memcpy(out + 4 * i, &v[i], 4);
		else
			memcpy(out + 2 * i, &h, 2);
	}
	if (!ret && !(ret = tpc_hash_buf(TPC_HASH_SHA256, out, t.numel * es, md, e)))
		for (int i = 0; i < 8; i++)
			sprintf(hex + 2 * i, "%02x", md[i]);
	free(v);
	free(out);
	tpc_tensor_release(&t);
	return ret;
}

int main(int argc, char **argv)
{
	tpc_ckpt ck;
	tpc_err e;
	tpc_gguf_kvs kv = {0};
	tpc_gguf_wtensor *t = NULL;
	size_t n = 0;
	if (argc < 2) {
		fprintf(stderr, "usage: arch_dump MODEL_DIR [OUTTYPE]\n");
		return 2;
	}
	tpc_formats_register_all();
	tpc_ckpt_init(&ck);
	tpc_err_init(&e);
	int ret = tpc_ckpt_open(&ck, argv[1], NULL, &e);
	if (!ret)
		ret = tpc_gguf_from_hf(&ck, argv[1], argc > 2 ? argv[2] : NULL, &kv, &t, &n, &e);
	for (size_t i = 0; !ret && i < kv.n; i++)
		print_kv(&kv.kv[i]);
	for (size_t i = 0; !ret && i < n; i++) {
		char hex[17], ne[256] = "";
		const tpc_ggml_info *gi = tpc_ggml_info_of(t[i].type);
		for (int d = t[i].t.ndim - 1; d >= 0; d--)
			snprintf(ne + strlen(ne), sizeof(ne) - strlen(ne), "%s%lld", d == t[i].t.ndim - 1 ? "" : ",",
				 (long long)t[i].t.shape[d]);
		if (!(ret = tensor_hash(&ck, &t[i], hex, &e)))
			printf("tensor %s %s [%s] sha256=%s\n", t[i].name, gi ? gi->name : "?", ne, hex);
	}
	if (ret)
		fprintf(stderr, "arch_dump: error: %s%s%s%s%s\n", e.path, e.path[0] ? ": " : "",
			e.tensor[0] ? "tensor '" : "", e.tensor, e.tensor[0] ? "': " : "");
	if (ret)
		fprintf(stderr, "  %s\n", e.msg);
	tpc_gguf_wtensors_release(t, n);
	tpc_gguf_kvs_release(&kv);
	tpc_ckpt_release(&ck);
	return ret ? 3 : 0;
}
