/* cli_dequant.c - --dequantize for FP8 / GPTQ / AWQ / compressed-tensors / FP4 folders: find the
 * quantization config beside the input and apply lib/tpc_quant. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_extras.h"
#include "tpc_io.h"
#include "tpc_quant.h"
#include "tpc_util.h"

static const char *method_name(tpc_quant_method m)
{
	switch (m) {
	case TPC_QM_FP8: return "FP8";
	case TPC_QM_GPTQ: return "GPTQ";
	case TPC_QM_AWQ: return "AWQ";
	case TPC_QM_PACKED: return "compressed-tensors integer";
	case TPC_QM_FP4: return "FP4";
	default: return "none";
	}
}

int tpc_cli_quant_cfg(const char *in, tpc_quant_cfg *q, char **cfg_path, tpc_err *e)
{
	int ret = 0;
	char *dir = tpc_extras_source_dir(in), *cfg = NULL, *gq = NULL;
	memset(q, 0, sizeof(*q));
	if (cfg_path)
		*cfg_path = NULL;
	if (!dir)
		dir = tpc_path_dir(in); /* a single weight file: its folder's config */
	cfg = dir ? tpc_path_join(dir, "config.json") : NULL;
	gq = dir ? tpc_path_join(dir, "quantize_config.json") : NULL;
	char *hq = dir ? tpc_path_join(dir, "hf_quant_config.json") : NULL;
	if (!dir || !cfg || !gq || !hq) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (tpc_exists(cfg) && (ret = tpc_quant_cfg_from_file(q, cfg, false, e)))
		goto out;
	if (q->method == TPC_QM_NONE && tpc_exists(gq)) {
		/* an AutoGPTQ folder from before quantization_config (torch_dtype stays config.json's) */
		tpc_dtype td = q->torch_dtype;
		if ((ret = tpc_quant_cfg_from_file(q, gq, true, e)))
			goto out;
		q->torch_dtype = td;
	}
	if (q->method == TPC_QM_NONE && tpc_exists(hq)) {
		/* NVIDIA ModelOpt's export: the scheme in hf_quant_config.json */
		tpc_dtype td = q->torch_dtype;
		if ((ret = tpc_quant_cfg_from_file(q, hq, false, e)))
			goto out;
		q->torch_dtype = td;
	}
	if (cfg_path) {
		*cfg_path = cfg;
		cfg = NULL;
	}
out:
	free(dir);
	free(cfg);
	free(gq);
	free(hq);
	return ret;
}

int tpc_cli_dequantize(const char *in, tpc_ckpt *ck, size_t *ndq)
{
	tpc_quant_cfg q;
	tpc_err e;
	int ret = 0;
	char *cfg = NULL;
	*ndq = 0;
	tpc_err_init(&e);
	if (tpc_cli_quant_cfg(in, &q, &cfg, &e)) {
		ret = tpc_cli_fail(&e);
		goto out;
	}
	if (q.method == TPC_QM_NONE) {
		const char *name = tpc_quant_find_quantized(ck);
		if (name) {
			const tpc_tensor *t = &ck->t[tpc_ckpt_find(ck, name)];
			tpc_err_at(&e, TPC_EINPUT, NULL, name,
				    "looks quantized (%s %s) but %s'%s'%s; tpconv cannot tell how to dequantize it",
				    tpc_dtype_name(t->src_dtype), strstr(name, "qweight") ? "packed weight" : "tensor",
				    tpc_exists(cfg) ? "" : "there is no ", cfg,
				    tpc_exists(cfg) ? " has no quantization_config" : " with a quantization_config");
			ret = tpc_cli_fail(&e);
		}
		goto out;
	}
	tpc_dtype out = q.torch_dtype ? q.torch_dtype : TPC_BF16;
	if (tpc_ckpt_dequantize(ck, &q, out, ndq, &e)) {
		ret = tpc_cli_fail(&e);
		goto out;
	}
	const char *left = tpc_quant_find_quantized(ck);
	if (left) {
		/* e.g. a weight_scale_inv beside a weight that is not F8 */
		char nm[512];
		tpc_sanitize(nm, sizeof(nm), left);
		tpc_cli_warn("tensor '%s' looks quantized but is part of no %s weight; copied as it is", nm,
			     method_name(q.method));
	}
	if (*ndq)
		tpc_cli_info("dequantized %zu %s weight%s to %s", *ndq, method_name(q.method), *ndq == 1 ? "" : "s",
			     tpc_dtype_name(out));
	else
		tpc_cli_warn("the quantization_config says %s, but no tensor is quantized that way; nothing dequantized",
			     method_name(q.method));
out:
	free(cfg);
	return ret;
}
