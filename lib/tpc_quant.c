/* tpc_quant.c - FP8 / GPTQ / AWQ dequantization as tensor descriptions; see tpc_quant.h. */
#include "tpc_quant.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tpc_buf.h"
#include "tpc_cast.h"
#include "tpc_cfg.h"
#include "tpc_ggml.h"
#include "tpc_io.h"
#include "tpc_lora.h"
#include "tpc_mix.h"
#include "tpc_util.h"

/* Value i of a g_idx buffer of I32 (es 4) or I64 entries. */
static int64_t gidx_at(const uint8_t *g, unsigned es, int64_t i)
{
	if (es == 4) {
		int32_t x;
		memcpy(&x, g + 4 * i, 4);
		return x;
	}
	int64_t v;
	memcpy(&v, g + 8 * i, 8);
	return v;
}

/* Rows unpacked per step: about this many output elements (at least one row). */
#define DQ_STEP_ELEMS (1u << 20)

/* ---- quantization_config ---- */

static int cfg_err(tpc_err *e, const char *path, const char *fmt, const char *a, const char *b)
{
	return tpc_err_at(e, TPC_EINPUT, path, NULL, fmt, a ? a : "", b ? b : "");
}

/* Integer member `k` of o: 1 when present and integral, 0 when absent, -1 when not an integer. */
static int get_int(const cJSON *o, const char *k, int64_t *v)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!it || cJSON_IsNull(it))
		return 0;
	/* range first: converting a double outside int64 (1e300, inf) is undefined */
	if (!cJSON_IsNumber(it) || it->valuedouble < -1e15 || it->valuedouble > 1e15 ||
	    it->valuedouble != (double)(int64_t)it->valuedouble)
		return -1;
	*v = (int64_t)it->valuedouble;
	return 1;
}

static const char *get_str(const cJSON *o, const char *k)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* A [rows, cols] block size array; 0 when absent, -1 when malformed. */
static int get_block(const cJSON *o, const char *k, int64_t blk[2])
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!it || cJSON_IsNull(it))
		return 0;
	if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2)
		return -1;
	for (int d = 0; d < 2; d++) {
		const cJSON *x = cJSON_GetArrayItem(it, d);
		if (!cJSON_IsNumber(x) || x->valuedouble < 1 || x->valuedouble > 1e9 ||
		    x->valuedouble != (double)(int64_t)x->valuedouble)
			return -1;
		blk[d] = (int64_t)x->valuedouble;
	}
	return 1;
}

static int parse_gptq(tpc_quant_cfg *q, const cJSON *qc, const char *path, tpc_err *e)
{
	int64_t bits = 0, g = -1;
	int r = get_int(qc, "bits", &bits);
	if (r <= 0)
		return cfg_err(e, path, "GPTQ quantization config has no integer 'bits'%s%s", NULL, NULL);
	if (bits != 2 && bits != 4 && bits != 8) {
		char b[32];
		snprintf(b, sizeof(b), "%lld", (long long)bits);
		return cfg_err(e, path, "GPTQ with %s bits is not supported (2, 4 or 8)%s", b, NULL);
	}
	if ((r = get_int(qc, "group_size", &g)) < 0 || (r && g != -1 && g < 1))
		return cfg_err(e, path, "GPTQ 'group_size' must be -1 or a positive integer%s%s", NULL, NULL);
	const char *fmt = get_str(qc, "checkpoint_format");
	q->method = TPC_QM_GPTQ;
	q->bits = (int)bits;
	q->group_size = r ? g : -1;
	q->zero_plus_one = !(fmt && !strcasecmp(fmt, "gptq_v2"));
	return 0;
}

static int parse_awq(tpc_quant_cfg *q, const cJSON *qc, const char *path, tpc_err *e)
{
	int64_t bits = 0, g = 0;
	int rb = get_int(qc, "bits", &bits), rg = get_int(qc, "group_size", &g);
	if (!rb)
		rb = get_int(qc, "w_bit", &bits);
	if (!rg)
		rg = get_int(qc, "q_group_size", &g);
	const char *ver = get_str(qc, "version");
	const cJSON *zp = cJSON_GetObjectItemCaseSensitive(qc, "zero_point");
	if (rb <= 0 || bits != 4)
		return cfg_err(e, path, "AWQ quantization config must have bits 4%s%s", NULL, NULL);
	if (rg <= 0 || g < 1)
		return cfg_err(e, path, "AWQ quantization config has no positive 'group_size'%s%s", NULL, NULL);
	if (ver && strcasecmp(ver, "gemm"))
		return cfg_err(e, path, "AWQ version '%s' is not supported (only 'gemm')%s", ver, NULL);
	if (zp && cJSON_IsFalse(zp))
		return cfg_err(e, path, "AWQ without zero points (zero_point false) is not supported%s%s", NULL, NULL);
	q->method = TPC_QM_AWQ;
	q->bits = 4;
	q->group_size = g;
	return 0;
}

#define NO_BITS INT64_MIN

/* compressed-tensors' config_groups: the first group (NULL when none) */
static const cJSON *first_group(const cJSON *qc)
{
	const cJSON *groups = cJSON_GetObjectItemCaseSensitive(qc, "config_groups");
	return cJSON_IsObject(groups) ? groups->child : NULL;
}

/* A config group's "weights" scheme (NULL when the group has none); *ok
 * when its type is `type` (or absent); its num_bits in *nb (NO_BITS when
 * absent or not an integer). */
static const cJSON *group_weights(const cJSON *g, const char *type, int64_t *nb, bool *ok)
{
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(g, "weights");
	const char *ty = get_str(w, "type");
	*ok = false;
	if (get_int(w, "num_bits", nb) != 1)
		*nb = NO_BITS;
	if (!cJSON_IsObject(w))
		return NULL;
	*ok = !(ty && strcmp(ty, type));
	return w;
}

/* compressed-tensors "pack-quantized": int4/int8 weights packed into int32,
 * one scheme for every config group (num_bits, group or channel strategy,
 * symmetric, actorder). */
static int parse_ct_packed(tpc_quant_cfg *q, const cJSON *qc, const char *path, tpc_err *e)
{
	bool first = true;
	for (const cJSON *g = first_group(qc); g; g = g->next) {
		int64_t nb, gs = 0;
		bool ok;
		const cJSON *w = group_weights(g, "int", &nb, &ok);
		const char *st = get_str(w, "strategy");
		if (!w)
			continue;
		if (!ok || (nb != 4 && nb != 8))
			return cfg_err(e, path, "compressed-tensors group '%s' is not 4- or 8-bit integer weights%s",
				       g->string ? g->string : "?", NULL);
		if (!st || (strcmp(st, "group") && strcmp(st, "channel")) ||
		    (!strcmp(st, "group") && (get_int(w, "group_size", &gs) != 1 || gs < 1)))
			return cfg_err(e, path, "compressed-tensors group '%s': strategy must be 'group' (with a group_size) or 'channel'%s",
				       g->string ? g->string : "?", NULL);
		bool sym = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(w, "symmetric"));
		int64_t gv = !strcmp(st, "group") ? gs : -1;
		if (!first && (q->bits != (int)nb || q->group_size != gv || q->symmetric != sym))
			return cfg_err(e, path, "compressed-tensors config groups with different weight schemes are not supported%s%s",
				       NULL, NULL);
		q->bits = (int)nb;
		q->group_size = gv;
		q->symmetric = sym;
		first = false;
	}
	if (first)
		return cfg_err(e, path, "compressed-tensors pack-quantized without config_groups weights%s%s", NULL, NULL);
	q->method = TPC_QM_PACKED;
	return 0;
}

/* compressed-tensors nvfp4-pack-quantized / mxfp4-pack-quantized: 4-bit
 * float weights in groups of 16 (NVFP4) or 32 (MXFP4). */
static int parse_ct_fp4(tpc_quant_cfg *q, const cJSON *qc, const char *fmt, const char *path, tpc_err *e)
{
	int64_t want = !strcmp(fmt, "nvfp4-pack-quantized") ? 16 : 32;
	for (const cJSON *g = first_group(qc); g; g = g->next) {
		int64_t nb, gs = 0;
		bool ok;
		const cJSON *w = group_weights(g, "float", &nb, &ok);
		if (!w)
			continue;
		if (!ok || nb != 4 || (get_int(w, "group_size", &gs) == 1 && gs != want))
			return cfg_err(e, path, "compressed-tensors %s group '%s' is not 4-bit float weights in groups of the format's size",
				       fmt, g->string ? g->string : "?");
	}
	q->method = TPC_QM_FP4;
	q->fp4_group = (int)want;
	return 0;
}

/* NVIDIA ModelOpt: quantization_config {"quant_method": "modelopt",
 * "quant_algo": ...} or hf_quant_config.json's "quantization" object. */
static int parse_modelopt(tpc_quant_cfg *q, const cJSON *qc, const char *path, tpc_err *e)
{
	const char *algo = get_str(qc, "quant_algo");
	int64_t gs = 16;
	char safe[64];
	if (!algo || strcmp(algo, "NVFP4")) {
		tpc_sanitize(safe, sizeof(safe), algo ? algo : "(none)");
		return cfg_err(e, path, "ModelOpt quant_algo '%s' is not one tpconv can dequantize (NVFP4 is)%s", safe, NULL);
	}
	if (cJSON_GetObjectItemCaseSensitive(qc, "group_size") && (get_int(qc, "group_size", &gs) != 1 || gs != 16))
		return cfg_err(e, path, "ModelOpt NVFP4 with a group_size other than 16%s%s", NULL, NULL);
	q->method = TPC_QM_FP4;
	q->fp4_group = 16;
	q->fp4_modelopt = true;
	return 0;
}

/* compressed-tensors: the packed and FP4 formats above, else
 * "float-quantized": FP8 weights with weight_scale; a block strategy names
 * its block in config_groups.*.weights.block_structure. */
static int parse_ct(tpc_quant_cfg *q, const cJSON *qc, const char *path, tpc_err *e)
{
	const char *fmt = get_str(qc, "format");
	if (fmt && !strcmp(fmt, "pack-quantized"))
		return parse_ct_packed(q, qc, path, e);
	if (fmt && (!strcmp(fmt, "nvfp4-pack-quantized") || !strcmp(fmt, "mxfp4-pack-quantized")))
		return parse_ct_fp4(q, qc, fmt, path, e);
	if (!fmt || strcmp(fmt, "float-quantized"))
		return cfg_err(e, path, "compressed-tensors format '%s' is not supported (float-quantized FP8, pack-quantized int4/int8, nvfp4-pack-quantized and mxfp4-pack-quantized are)%s",
			       fmt ? fmt : "(none)", NULL);
	q->method = TPC_QM_FP8;
	for (const cJSON *g = first_group(qc); g; g = g->next) {
		int64_t nb;
		bool ok;
		const cJSON *w = group_weights(g, "float", &nb, &ok);
		const char *st = get_str(w, "strategy");
		if (!w)
			continue;
		if (!ok || (nb != NO_BITS && nb != 8))
			return cfg_err(e, path, "compressed-tensors group '%s' is not 8-bit float weights%s",
				       g->string ? g->string : "?", NULL);
		if (st && !strcmp(st, "block") && get_block(w, "block_structure", q->block) < 0)
			return cfg_err(e, path, "compressed-tensors 'block_structure' is not two positive integers%s%s",
				       NULL, NULL);
	}
	return 0;
}

int tpc_quant_cfg_from_buffer(tpc_quant_cfg *q, const char *text, size_t len, const char *path,
			      bool gptq_file, tpc_err *e)
{
	int ret = 0;
	memset(q, 0, sizeof(*q));
	q->torch_dtype = TPC_DT_INVALID;
	tpc_cfg *c = NULL;
	const char *dt = NULL, *dt5 = NULL;
	tpc_err scratch;
	tpc_err_init(&scratch);
	if (tpc_cfg_from_buffer(&c, text, len, path, &scratch)) {
		ret = cfg_err(e, path, "%s is not a JSON object%s", gptq_file ? "quantize_config.json" : "config.json", NULL);
		goto out;
	}
	/* the top level: quantization is the whole model's (from_pretrained
	 * reads quantization_config there), and so is its dtype */
	tpc_cfg_str(c, TPC_CFG_TOP, "torch_dtype", TPC_CFG_LENIENT, &dt, e);
	tpc_cfg_str(c, TPC_CFG_TOP, "dtype", TPC_CFG_LENIENT, &dt5, e);
	q->torch_dtype = tpc_dtype_float_named(dt);
	if (!q->torch_dtype)
		q->torch_dtype = tpc_dtype_float_named(dt5);
	const cJSON *qc = gptq_file ? tpc_cfg_root(c) : tpc_cfg_get(c, TPC_CFG_TOP, "quantization_config", NULL);
	/* ModelOpt's hf_quant_config.json: {"producer": ..., "quantization": {"quant_algo": ...}} */
	const cJSON *mo = !gptq_file && !qc && tpc_cfg_get(c, TPC_CFG_TOP, "producer", NULL)
				  ? tpc_cfg_get(c, TPC_CFG_TOP, "quantization", NULL) : NULL;
	if (cJSON_IsObject(mo)) {
		ret = parse_modelopt(q, mo, path, e);
		goto out;
	}
	if (!qc || cJSON_IsNull(qc))
		goto out;
	if (!cJSON_IsObject(qc)) {
		ret = cfg_err(e, path, "quantization_config is not a JSON object%s%s", NULL, NULL);
		goto out;
	}
	const char *m = gptq_file ? "gptq" : get_str(qc, "quant_method");
	if (!m) {
		ret = cfg_err(e, path, "quantization_config has no quant_method%s%s", NULL, NULL);
	} else if (!strcasecmp(m, "fp8")) {
		q->method = TPC_QM_FP8;
		if (get_block(qc, "weight_block_size", q->block) < 0)
			ret = cfg_err(e, path, "quantization_config.weight_block_size is not two positive integers%s%s",
				      NULL, NULL);
	} else if (!strcasecmp(m, "gptq")) {
		ret = parse_gptq(q, qc, path, e);
	} else if (!strcasecmp(m, "awq")) {
		ret = parse_awq(q, qc, path, e);
	} else if (!strcasecmp(m, "compressed-tensors")) {
		ret = parse_ct(q, qc, path, e);
	} else if (!strcasecmp(m, "modelopt")) {
		ret = parse_modelopt(q, qc, path, e);
	} else if (!strcasecmp(m, "mxfp4")) { /* gpt-oss: its experts' X_blocks / X_scales */
		q->method = TPC_QM_FP4;
		q->fp4_group = 32;
		q->fp4_blocks = true;
	} else {
		char safe[128];
		tpc_sanitize(safe, sizeof(safe), m);
		ret = cfg_err(e, path,
			      "quantization_config.quant_method '%s' is not one tpconv can dequantize (fp8, gptq, awq, compressed-tensors, modelopt NVFP4, mxfp4)%s",
			      safe, NULL);
	}
out:
	tpc_cfg_free(c);
	if (ret)
		q->method = TPC_QM_NONE;
	return ret;
}

int tpc_quant_cfg_from_file(tpc_quant_cfg *q, const char *path, bool gptq_file, tpc_err *e)
{
	char *text = NULL;
	size_t len = 0;
	int ret = tpc_read_file(path, 16u << 20, &text, &len, e);
	if (ret) {
		tpc_err_path(e, path);
		return ret;
	}
	ret = tpc_quant_cfg_from_buffer(q, text, len, path, gptq_file, e);
	free(text);
	return ret;
}

/* ---- finding the families ---- */

static bool is_f8(tpc_dtype d)
{
	return d == TPC_F8_E4M3 || d == TPC_F8_E5M2 || d == TPC_F8_E4M3FNUZ || d == TPC_F8_E5M2FNUZ ||
	       d == TPC_F8_E8M0;
}

const char *tpc_quant_find_quantized(const tpc_ckpt *ck)
{
	for (size_t i = 0; i < ck->n; i++) {
		const char *n = ck->t[i].name;
		if (is_f8(ck->t[i].src_dtype) || tpc_ends_with(n, "qweight") || tpc_ends_with(n, "weight_scale_inv") ||
		    tpc_ends_with(n, "weight_packed") || tpc_ends_with(n, "weight_scale_2") ||
		    (tpc_ends_with(n, "_blocks") && ck->t[i].src_dtype == TPC_U8))
			return n;
	}
	return NULL;
}

/* Index of the tensor named prefix+suffix, or -1 (-2: out of memory). */
static int64_t find_cat(const tpc_ckpt *ck, tpc_buf *b, const char *prefix, size_t plen, const char *suffix)
{
	tpc_buf_reset(b);
	tpc_buf_add(b, prefix, plen);
	tpc_buf_adds(b, suffix);
	if (b->oom)
		return -2;
	return tpc_ckpt_find(ck, b->p);
}

static bool float_type(tpc_dtype d)
{
	return d == TPC_F32 || d == TPC_F16 || d == TPC_BF16 || d == TPC_F64;
}

#define bad_tensor(e, t, ...) tpc_err_at((e), TPC_EINPUT, NULL, (t)->name, __VA_ARGS__)

static bool shape_is(const tpc_tensor *t, int ndim, int64_t a, int64_t b)
{
	return t->ndim == ndim && (ndim < 1 || t->shape[0] == a) && (ndim < 2 || t->shape[1] == b);
}

/*
 * Turn ck->t[ix] into the dequantized tensor described by `tmpl`, of shape
 * [O, I] and output dtype `out`, owning copies of the tensors comp[0..nc)
 * (comp[0] may be ix itself); the others are marked in drop[]. `newname`:
 * rename to it (GPTQ/AWQ qweight -> weight), or NULL.
 */
static int make_dq(tpc_ckpt *ck, size_t ix, const tpc_dequant *tmpl, const int64_t *comp, int nc, int64_t O,
		   int64_t I, tpc_dtype out, const char *newname, bool *drop, tpc_err *e)
{
	tpc_dequant *dq = tpc_dequant_dup(tmpl);
	tpc_tensor nt;
	int64_t shp[2] = {O, I};
	if (!dq)
		return tpc_err_nomem(e);
	for (int k = 0; k < nc; k++, dq->nc++) {
		if (tpc_tensor_copy(&dq->c[k], &ck->t[comp[k]]))
			goto nomem;
		if (!(dq->c[k].name = tpc_strdup(ck->t[comp[k]].name))) {
			dq->nc++;
			goto nomem;
		}
	}
	if (tpc_tensor_init_zero(&nt, TPC_F32, 2, shp))
		goto nomem;
	nt.flags = ck->t[ix].flags & (TPC_TF_PARAMETER | TPC_TF_REQUIRES_GRAD);
	nt.dq = dq;
	nt.dtype = out;
	nt.nbytes = nt.numel * tpc_dtype_size(out);
	nt.name = ck->t[ix].name;
	ck->t[ix].name = NULL;
	tpc_tensor_release(&ck->t[ix]);
	ck->t[ix] = nt;
	for (int k = 0; k < nc; k++)
		if ((size_t)comp[k] != ix)
			drop[comp[k]] = true;
	return newname ? tpc_ckpt_rename(ck, (int64_t)ix, newname, e) : 0;
nomem:
	for (int k = 0; k < dq->nc; k++) {
		free(dq->c[k].name);
		tpc_tensor_release(&dq->c[k]);
	}
	free(dq);
	return tpc_err_nomem(e);
}

static int fp8_family(tpc_ckpt *ck, const tpc_quant_cfg *q, size_t ix, tpc_dtype out, bool *drop, tpc_buf *b,
		      tpc_err *e)
{
	const tpc_tensor *w = &ck->t[ix];
	char s1[128], s2[128];
	if (w->src_dtype != TPC_F8_E4M3)
		return bad_tensor(e, w, "cannot dequantize %s weights (only F8_E4M3)", tpc_dtype_name(w->src_dtype));
	if (w->ndim != 2)
		return bad_tensor(e, w, "F8_E4M3 tensor %s has %d dimensions; dequantization handles 2-D weights",
				  tpc_shape_str(w, s1, sizeof(s1)), w->ndim);
	size_t nl = strlen(w->name);
	int64_t O = w->shape[0], I = w->shape[1];
	int64_t si = find_cat(ck, b, w->name, nl, "_scale_inv"), ss = -1;
	if (si == -2 || (si == -1 && (ss = find_cat(ck, b, w->name, nl, "_scale")) == -2))
		return tpc_err_nomem(e);
	if (si < 0 && ss < 0)
		return bad_tensor(e, w,
				  "F8_E4M3 weight without a scale: neither '%s_scale_inv' nor '%s_scale' is in the checkpoint",
				  w->name, w->name);
	const tpc_tensor *s = &ck->t[si >= 0 ? si : ss];
	if (!float_type(s->src_dtype) || drop[si >= 0 ? si : ss])
		return bad_tensor(e, s, "scale of F8_E4M3 weight '%s' is %s, not a float type", w->name,
				  tpc_dtype_name(s->src_dtype));
	tpc_dequant dq;
	memset(&dq, 0, sizeof(dq));
	dq.kind = TPC_DQ_FP8;
	int64_t bo = q->block[0], bi = q->block[1];
	if (s->numel == 1 && s->ndim <= 2) {
		dq.bo = O; /* per tensor */
		dq.bi = I;
	} else if (ss >= 0 && (shape_is(s, 2, O, 1) || shape_is(s, 1, O, 0))) {
		dq.bo = 1; /* per output channel */
		dq.bi = I;
	} else if (bo > 0 && shape_is(s, 2, (O + bo - 1) / bo, (I + bi - 1) / bi)) {
		dq.bo = bo;
		dq.bi = bi;
	} else if (bo > 0) {
		return bad_tensor(e, s,
				  "scale tensor has shape %s; F8_E4M3 weight '%s' %s with weight_block_size [%lld, %lld] needs [%lld, %lld]",
				  tpc_shape_str(s, s1, sizeof(s1)), w->name, tpc_shape_str(w, s2, sizeof(s2)),
				  (long long)bo, (long long)bi, (long long)((O + bo - 1) / bo),
				  (long long)((I + bi - 1) / bi));
	} else {
		return bad_tensor(e, s,
				  "scale tensor has shape %s, which is neither one value nor one per output channel of F8_E4M3 weight '%s' %s, and the quantization_config names no weight_block_size",
				  tpc_shape_str(s, s1, sizeof(s1)), w->name, tpc_shape_str(w, s2, sizeof(s2)));
	}
	if (dq.bo < 1)
		dq.bo = 1; /* O == 0: nothing to read */
	if (dq.bi < 1)
		dq.bi = 1;
	int64_t comp[2] = {(int64_t)ix, si >= 0 ? si : ss};
	/* a static activation scale goes with the weight it served */
	if (tpc_ends_with(w->name, "weight")) {
		int64_t in = find_cat(ck, b, w->name, nl - strlen("weight"), "input_scale");
		if (in == -2)
			return tpc_err_nomem(e);
		if (in >= 0 && ck->t[in].numel <= 1)
			drop[in] = true;
	}
	return make_dq(ck, ix, &dq, comp, 2, O, I, out, NULL, drop, e);
}

/* Every group index of g_idx g (I entries) inside the G groups of scales
 * s: checked once, when the description is built. A rank's piece of a
 * row-split layer (q->rank_piece) may hold global group numbers: *base is
 * then the smallest, subtracted from every entry. */
static int check_gidx(const tpc_ckpt *ck, const tpc_quant_cfg *q, const tpc_tensor *g, const tpc_tensor *s,
		      int64_t I, int64_t G, int64_t *base, tpc_err *e)
{
	unsigned es = tpc_dtype_size(g->src_dtype);
	uint8_t *buf = tpc_malloc(I ? (size_t)I * es : 1);
	if (!buf)
		return tpc_err_nomem(e);
	int r = tpc_ckpt_read_bytes(ck, g, 0, (uint64_t)I * es, buf, e);
	int64_t lo = INT64_MAX, hi = INT64_MIN;
	*base = 0;
	for (int64_t i = 0; i < I && !r; i++) {
		int64_t v = gidx_at(buf, es, i);
		lo = v < lo ? v : lo;
		hi = v > hi ? v : hi;
	}
	if (q->rank_piece && I && hi >= G && lo >= 0 && hi - lo < G)
		*base = lo; /* a rank's rows of a row-split layer: global group numbers */
	for (int64_t i = 0; i < I && !r; i++) {
		int64_t v = gidx_at(buf, es, i) - *base;
		if (v < 0 || v >= G) {
			r = bad_tensor(e, g, "g_idx[%lld] is %lld, outside the %lld groups of '%s'", (long long)i,
				       (long long)v, (long long)G, s->name);
			const tpc_map *m = tpc_ckpt_source(ck, g->src);
			if (m && tpc_tensor_is_contiguous(g))
				tpc_err_offset(e, (int64_t)(g->offset + (uint64_t)i * es));
			if (m)
				tpc_err_path(e, m->path);
		}
	}
	free(buf);
	return r;
}

/* Packed weight ix (GPTQ/AWQ qweight, compressed-tensors weight_packed)
 * with companions comp[1..nc) becomes the dequantized X.weight, X being its
 * name's first pl characters (tpc_ckpt_dequantize's families). */
static int install_dq(tpc_ckpt *ck, size_t ix, const tpc_dequant *dq, const int64_t *comp, int nc, int64_t O,
		      int64_t I, tpc_dtype out, size_t pl, bool *drop, tpc_buf *b, tpc_err *e)
{
	const tpc_tensor *w = &ck->t[ix];
	for (int k = 1; k < nc; k++)
		if (drop[comp[k]])
			return bad_tensor(e, &ck->t[comp[k]], "tensor belongs to two quantized weights");
	tpc_buf_reset(b);
	tpc_buf_add(b, w->name, pl);
	tpc_buf_adds(b, "weight");
	if (b->oom)
		return tpc_err_nomem(e);
	char *nn = tpc_strdup(b->p);
	if (!nn)
		return tpc_err_nomem(e);
	int64_t clash = tpc_ckpt_find(ck, nn);
	int ret;
	if (clash >= 0 && clash != (int64_t)ix && !drop[clash])
		ret = bad_tensor(e, w, "dequantized weight would be named '%s', which the checkpoint already has", nn);
	else /* ModelOpt's packed X.weight keeps its name */
		ret = make_dq(ck, ix, dq, comp, nc, O, I, out, clash == (int64_t)ix ? NULL : nn, drop, e);
	free(nn);
	return ret;
}

static int packed_family(tpc_ckpt *ck, const tpc_quant_cfg *q, size_t ix, tpc_dtype out, bool *drop, tpc_buf *b,
			 tpc_err *e)
{
	const tpc_tensor *w = &ck->t[ix];
	bool awq = q->method == TPC_QM_AWQ;
	const char *meth = awq ? "AWQ" : "GPTQ";
	char s1[128], s2[128];
	size_t pl = strlen(w->name) - strlen("qweight");
	int64_t pack = 32 / q->bits;
	if (w->src_dtype != TPC_I32 || w->ndim != 2)
		return bad_tensor(e, w, "%s qweight must be a 2-D I32 tensor, not %s %s", meth,
				  tpc_dtype_name(w->src_dtype), tpc_shape_str(w, s1, sizeof(s1)));
	int64_t isc = find_cat(ck, b, w->name, pl, "scales"), iz = find_cat(ck, b, w->name, pl, "qzeros");
	int64_t ig = awq ? -1 : find_cat(ck, b, w->name, pl, "g_idx");
	if (isc == -2 || iz == -2 || ig == -2)
		return tpc_err_nomem(e);
	if (isc < 0 || iz < 0) {
		find_cat(ck, b, w->name, pl, isc < 0 ? "scales" : "qzeros");
		return bad_tensor(e, w, "%s qweight without its '%s' tensor", meth, b->oom ? "?" : b->p);
	}
	const tpc_tensor *s = &ck->t[isc], *z = &ck->t[iz], *g = ig >= 0 ? &ck->t[ig] : NULL;
	int64_t O, I, G;
	if (awq) {
		I = w->shape[0];
		O = w->shape[1] * 8;
	} else {
		I = w->shape[0] * pack;
		O = w->shape[1];
	}
	if (!float_type(s->src_dtype) || s->ndim != 2 || s->shape[1] != O)
		return bad_tensor(e, s, "%s scales must be a 2-D float tensor [groups, %lld] for qweight '%s' %s; it is %s %s",
				  meth, (long long)O, w->name, tpc_shape_str(w, s2, sizeof(s2)),
				  tpc_dtype_name(s->src_dtype), tpc_shape_str(s, s1, sizeof(s1)));
	G = s->shape[0];
	if (z->src_dtype != TPC_I32 || !shape_is(z, 2, G, O / pack) || O % pack)
		return bad_tensor(e, z, "%s qzeros must be I32 [%lld, %lld] for scales '%s' %s; it is %s %s", meth,
				  (long long)G, (long long)(O / pack), s->name, tpc_shape_str(s, s2, sizeof(s2)),
				  tpc_dtype_name(z->src_dtype), tpc_shape_str(z, s1, sizeof(s1)));
	tpc_dequant dq;
	memset(&dq, 0, sizeof(dq));
	dq.kind = awq ? TPC_DQ_AWQ : TPC_DQ_GPTQ;
	dq.bits = q->bits;
	dq.zero_plus_one = !awq && q->zero_plus_one;
	dq.group = q->group_size > 0 ? q->group_size : (I > 0 ? I : 1);
	if (g) {
		if (g->src_dtype != TPC_I32 && g->src_dtype != TPC_I64)
			return bad_tensor(e, g, "GPTQ g_idx must be I32 or I64, not %s", tpc_dtype_name(g->src_dtype));
		if (!shape_is(g, 1, I, 0))
			return bad_tensor(e, g, "GPTQ g_idx has shape %s; qweight '%s' %s needs [%lld]",
					  tpc_shape_str(g, s1, sizeof(s1)), w->name, tpc_shape_str(w, s2, sizeof(s2)),
					  (long long)I);
		int r = check_gidx(ck, q, g, s, I, G, &dq.gidx_base, e);
		if (r)
			return r;
	} else if (G != (I + dq.group - 1) / dq.group || (I == 0 && G != 0)) {
		return bad_tensor(e, s, "%s scales have %lld groups; qweight '%s' %s with group_size %lld needs %lld",
				  meth, (long long)G, w->name, tpc_shape_str(w, s1, sizeof(s1)), (long long)q->group_size,
				  (long long)((I + dq.group - 1) / dq.group));
	}
	if (!awq && q->group_size > 0 && !g && I % q->group_size)
		return bad_tensor(e, w, "GPTQ input size %lld is not a multiple of group_size %lld and there is no g_idx",
				  (long long)I, (long long)q->group_size);
	int64_t comp[4] = {(int64_t)ix, isc, iz, ig};
	return install_dq(ck, ix, &dq, comp, g ? 4 : 3, O, I, out, pl, drop, b, e);
}

/* compressed-tensors pack-quantized: X.weight_packed with X.weight_scale,
 * X.weight_zero_point (asymmetric), X.weight_g_idx (actorder) and
 * X.weight_shape ([O, I]; it leaves the checkpoint with the others). */
static int ct_family(tpc_ckpt *ck, const tpc_quant_cfg *q, size_t ix, tpc_dtype out, bool *drop, tpc_buf *b,
		     tpc_err *e)
{
	const tpc_tensor *w = &ck->t[ix];
	char s1[128], s2[128];
	size_t pl = strlen(w->name) - strlen("weight_packed");
	int64_t pack = 32 / q->bits;
	if (w->src_dtype != TPC_I32 || w->ndim != 2)
		return bad_tensor(e, w, "weight_packed must be a 2-D I32 tensor, not %s %s", tpc_dtype_name(w->src_dtype),
				  tpc_shape_str(w, s1, sizeof(s1)));
	int64_t isc = find_cat(ck, b, w->name, pl, "weight_scale"), iz = find_cat(ck, b, w->name, pl, "weight_zero_point");
	int64_t ig = find_cat(ck, b, w->name, pl, "weight_g_idx"), ish = find_cat(ck, b, w->name, pl, "weight_shape");
	if (isc == -2 || iz == -2 || ig == -2 || ish == -2)
		return tpc_err_nomem(e);
	if (isc < 0)
		return bad_tensor(e, w, "weight_packed without its weight_scale tensor");
	if (!q->symmetric && iz < 0)
		return bad_tensor(e, w, "weight_packed of an asymmetric scheme without its weight_zero_point tensor");
	const tpc_tensor *s = &ck->t[isc], *z = iz >= 0 ? &ck->t[iz] : NULL, *g = ig >= 0 ? &ck->t[ig] : NULL;
	int64_t O = w->shape[0], I = w->shape[1] * pack, G;
	if (ish >= 0) { /* the true input size: the packing pads each row to whole words */
		const tpc_tensor *sh = &ck->t[ish];
		uint8_t v[16];
		unsigned es = tpc_dtype_size(sh->src_dtype);
		int64_t o2 = 0, i2 = 0;
		if (sh->ndim != 1 || sh->shape[0] != 2 || (sh->src_dtype != TPC_I64 && sh->src_dtype != TPC_I32))
			return bad_tensor(e, sh, "weight_shape must be 2 integers, not %s %s", tpc_dtype_name(sh->src_dtype),
					  tpc_shape_str(sh, s1, sizeof(s1)));
		int r = tpc_ckpt_read_bytes(ck, sh, 0, 2 * es, v, e);
		if (r)
			return r;
		if (es == 8) {
			memcpy(&o2, v, 8);
			memcpy(&i2, v + 8, 8);
		} else {
			int32_t a, c;
			memcpy(&a, v, 4);
			memcpy(&c, v + 4, 4);
			o2 = a;
			i2 = c;
		}
		if (o2 != O || i2 < 1 || (i2 + pack - 1) / pack != w->shape[1])
			return bad_tensor(e, sh, "weight_shape says [%lld, %lld], but weight_packed '%s' is %s (%lld values per int32)",
					  (long long)o2, (long long)i2, w->name, tpc_shape_str(w, s1, sizeof(s1)), (long long)pack);
		I = i2;
	}
	if (!float_type(s->src_dtype) || s->ndim != 2 || s->shape[0] != O)
		return bad_tensor(e, s, "weight_scale must be a 2-D float tensor [%lld, groups] for weight_packed '%s' %s; it is %s %s",
				  (long long)O, w->name, tpc_shape_str(w, s2, sizeof(s2)), tpc_dtype_name(s->src_dtype),
				  tpc_shape_str(s, s1, sizeof(s1)));
	G = s->shape[1];
	if (z && (z->src_dtype != TPC_I32 || !shape_is(z, 2, (O + pack - 1) / pack, G)))
		return bad_tensor(e, z, "weight_zero_point must be I32 [%lld, %lld] for weight_scale '%s' %s; it is %s %s",
				  (long long)((O + pack - 1) / pack), (long long)G, s->name, tpc_shape_str(s, s2, sizeof(s2)),
				  tpc_dtype_name(z->src_dtype), tpc_shape_str(z, s1, sizeof(s1)));
	tpc_dequant dq;
	memset(&dq, 0, sizeof(dq));
	dq.kind = TPC_DQ_CT;
	dq.bits = q->bits;
	dq.group = q->group_size > 0 ? q->group_size : (I > 0 ? I : 1);
	dq.ct_zp = z != NULL;
	dq.ct_gidx = g != NULL;
	if (g) {
		if ((g->src_dtype != TPC_I32 && g->src_dtype != TPC_I64) || !shape_is(g, 1, I, 0))
			return bad_tensor(e, g, "weight_g_idx must be I32 or I64 [%lld], not %s %s", (long long)I,
					  tpc_dtype_name(g->src_dtype), tpc_shape_str(g, s1, sizeof(s1)));
		int r = check_gidx(ck, q, g, s, I, G, &dq.gidx_base, e);
		if (r)
			return r;
	} else if (G != (I + dq.group - 1) / dq.group) {
		return bad_tensor(e, s, "weight_scale has %lld groups; weight '%s' of %lld inputs with group_size %lld needs %lld",
				  (long long)G, w->name, (long long)I, (long long)q->group_size,
				  (long long)((I + dq.group - 1) / dq.group));
	}
	int64_t comp[4] = {(int64_t)ix, isc, -1, -1};
	int nc = 2;
	if (z)
		comp[nc++] = iz;
	if (g)
		comp[nc++] = ig;
	int ret = install_dq(ck, ix, &dq, comp, nc, O, I, out, pl, drop, b, e);
	if (!ret && ish >= 0)
		drop[ish] = true; /* said what it had to */
	return ret;
}

/* One-element F32 tensor t's value into *v. */
static int read_scalar(const tpc_ckpt *ck, const tpc_tensor *t, const char *what, float *v, tpc_err *e)
{
	if (t->src_dtype != TPC_F32 || t->numel != 1)
		return bad_tensor(e, t, "%s must be one F32 value, not %s with %llu elements", what,
				  tpc_dtype_name(t->src_dtype), (unsigned long long)t->numel);
	return tpc_ckpt_read_bytes(ck, t, 0, 4, v, e);
}

/* FP4 (NVFP4, MXFP4): X.weight_packed (compressed-tensors) or X.weight
 * (ModelOpt) U8 [O, I/2] with X.weight_scale [O, I/group] and, for NVFP4,
 * the tensor's scale (weight_global_scale, weight_scale_2); the activation
 * scales (input_global_scale, input_scale) leave with them. */
static int fp4_family(tpc_ckpt *ck, const tpc_quant_cfg *q, size_t ix, tpc_dtype out, bool *drop, tpc_buf *b,
		      tpc_err *e)
{
	const tpc_tensor *w = &ck->t[ix];
	char s1[128], s2[128];
	bool mo = q->fp4_modelopt;
	size_t pl = strlen(w->name) - strlen(mo ? "weight" : "weight_packed");
	int64_t grp = q->fp4_group;
	if (w->src_dtype != TPC_U8 || w->ndim != 2)
		return bad_tensor(e, w, "an FP4 weight must be a 2-D U8 tensor of packed pairs, not %s %s",
				  tpc_dtype_name(w->src_dtype), tpc_shape_str(w, s1, sizeof(s1)));
	const char *gname = mo ? "weight_scale_2" : "weight_global_scale", *iname = mo ? "input_scale" : "input_global_scale";
	int64_t isc = find_cat(ck, b, w->name, pl, "weight_scale"), ig = find_cat(ck, b, w->name, pl, gname);
	int64_t ii = find_cat(ck, b, w->name, pl, iname);
	if (isc == -2 || ig == -2 || ii == -2)
		return tpc_err_nomem(e);
	if (isc < 0)
		return bad_tensor(e, w, "FP4 weight without its weight_scale tensor");
	const tpc_tensor *s = &ck->t[isc];
	bool mx = s->src_dtype == TPC_U8 || s->src_dtype == TPC_F8_E8M0;
	int64_t O = w->shape[0], I = w->shape[1] * 2;
	if (mx && grp != 32)
		return bad_tensor(e, s, "E8M0 (MXFP4) scales, but the config says NVFP4 (groups of %lld)", (long long)grp);
	if (!mx && s->src_dtype != TPC_F8_E4M3)
		return bad_tensor(e, s, "NVFP4 scales must be F8_E4M3 and MXFP4 scales U8 (E8M0), not %s",
				  tpc_dtype_name(s->src_dtype));
	if (s->ndim != 2 || s->shape[0] != O || s->shape[1] != (I + grp - 1) / grp || I % grp)
		return bad_tensor(e, s, "weight_scale must be [%lld, %lld] for the %s weight '%s' %s (%lld values per scale); it is %s%s",
				  (long long)O, (long long)((I + grp - 1) / grp), mx ? "MXFP4" : "NVFP4", w->name,
				  tpc_shape_str(w, s2, sizeof(s2)), (long long)grp, tpc_shape_str(s, s1, sizeof(s1)),
				  s->ndim == 1 ? " (a 1-D scale is cutlass's swizzled layout, which tpconv does not read)" : "");
	float gv = 0;
	if (!mx) {
		if (ig < 0)
			return bad_tensor(e, w, "NVFP4 weight without its %s tensor", gname);
		int r = read_scalar(ck, &ck->t[ig], gname, &gv, e);
		if (r)
			return r;
		if (!(gv > 0) || gv > 3.0e38f)
			return bad_tensor(e, &ck->t[ig], "%s is %g: a positive finite scale is needed", gname, (double)gv);
	}
	tpc_dequant dq;
	memset(&dq, 0, sizeof(dq));
	dq.kind = TPC_DQ_FP4;
	dq.group = grp;
	dq.fp4_mx = mx;
	dq.fp4_div = !mo;
	int64_t comp[3] = {(int64_t)ix, isc, ig};
	int ret = install_dq(ck, ix, &dq, comp, mx ? 2 : 3, O, I, out, pl, drop, b, e);
	if (!ret && ii >= 0)
		drop[ii] = true; /* an activation scale means nothing to a dense weight */
	if (!ret && mx && ig >= 0)
		drop[ig] = true;
	return ret;
}

/* gpt-oss's X_blocks U8 [E, R, G, 16] with X_scales U8 [E, R, G] become X
 * [E, G * 32, R] (tpc_dequant MXFP4_T). */
static int blocks_family(tpc_ckpt *ck, size_t ix, tpc_dtype out, bool *drop, tpc_buf *b, tpc_err *e)
{
	const tpc_tensor *w = &ck->t[ix];
	char s1[128], s2[128];
	size_t pl = strlen(w->name) - strlen("_blocks");
	if (w->src_dtype != TPC_U8 || w->ndim != 4 || w->shape[3] != 16)
		return bad_tensor(e, w, "gpt-oss MXFP4 blocks must be U8 [experts, rows, blocks, 16], not %s %s",
				  tpc_dtype_name(w->src_dtype), tpc_shape_str(w, s1, sizeof(s1)));
	int64_t isc = find_cat(ck, b, w->name, pl, "_scales");
	if (isc == -2)
		return tpc_err_nomem(e);
	if (isc < 0)
		return bad_tensor(e, w, "gpt-oss MXFP4 blocks without their _scales tensor");
	const tpc_tensor *s = &ck->t[isc];
	if ((s->src_dtype != TPC_U8 && s->src_dtype != TPC_F8_E8M0) || s->ndim != 3 || s->shape[0] != w->shape[0] ||
	    s->shape[1] != w->shape[1] || s->shape[2] != w->shape[2])
		return bad_tensor(e, s, "gpt-oss MXFP4 scales must be U8 [%lld, %lld, %lld] for blocks '%s' %s; they are %s %s",
				  (long long)w->shape[0], (long long)w->shape[1], (long long)w->shape[2], w->name,
				  tpc_shape_str(w, s2, sizeof(s2)), tpc_dtype_name(s->src_dtype),
				  tpc_shape_str(s, s1, sizeof(s1)));
	tpc_buf_reset(b);
	tpc_buf_add(b, w->name, pl);
	if (b->oom)
		return tpc_err_nomem(e);
	if (tpc_ckpt_find(ck, b->p) >= 0)
		return bad_tensor(e, w, "dequantized weight would be named '%s', which the checkpoint already has", b->p);
	char *nn = tpc_strdup(b->p);
	if (!nn)
		return tpc_err_nomem(e);
	tpc_dequant dq;
	memset(&dq, 0, sizeof(dq));
	dq.kind = TPC_DQ_MXFP4_T;
	dq.group = 32;
	dq.fp4_mx = true;
	int64_t E = w->shape[0], R = w->shape[1], I = w->shape[2] * 32, comp[2] = {(int64_t)ix, isc};
	int ret = make_dq(ck, ix, &dq, comp, 2, E * I, R, out, nn, drop, e);
	free(nn);
	if (ret)
		return ret;
	/* [E * I, R] -> [E, I, R]: the rows are (expert, input) */
	tpc_tensor *t = &ck->t[tpc_ckpt_find(ck, b->p)], nt;
	int64_t shp[3] = {E, I, R};
	if (tpc_tensor_init_zero(&nt, TPC_F32, 3, shp))
		return tpc_err_nomem(e);
	nt.flags = t->flags;
	nt.dq = t->dq;
	nt.dtype = t->dtype;
	nt.nbytes = t->nbytes;
	nt.name = t->name;
	t->dq = NULL;
	t->name = NULL;
	tpc_tensor_release(t);
	*t = nt;
	return 0;
}

int tpc_ckpt_dequantize(tpc_ckpt *ck, const tpc_quant_cfg *q, tpc_dtype out, size_t *n, tpc_err *e)
{
	bool *drop = NULL;
	size_t count = 0;
	int ret = 0;
	tpc_buf b;
	tpc_buf_init(&b);
	if (n)
		*n = 0;
	if (out != TPC_F32 && out != TPC_F16 && out != TPC_BF16)
		return tpc_err_set(e, TPC_EUSAGE, "dequantize to %s: only f32, f16 or bf16", tpc_dtype_name(out));
	if (q->method == TPC_QM_NONE || !ck->n)
		return 0;
	if (!(drop = tpc_calloc(ck->n, sizeof(*drop))))
		return tpc_err_nomem(e);
	for (size_t i = 0; i < ck->n && !ret; i++) {
		const tpc_tensor *t = &ck->t[i];
		if (drop[i] || t->dq)
			continue;
		if (q->method == TPC_QM_FP8 && is_f8(t->src_dtype))
			ret = fp8_family(ck, q, i, out, drop, &b, e);
		else if ((q->method == TPC_QM_GPTQ || q->method == TPC_QM_AWQ) && tpc_ends_with(t->name, "qweight") &&
			 (!strcmp(t->name, "qweight") || tpc_ends_with(t->name, ".qweight")))
			ret = packed_family(ck, q, i, out, drop, &b, e);
		else if (q->method == TPC_QM_PACKED && tpc_ends_with(t->name, "weight_packed") &&
			 (!strcmp(t->name, "weight_packed") || tpc_ends_with(t->name, ".weight_packed")))
			ret = ct_family(ck, q, i, out, drop, &b, e);
		else if (q->method == TPC_QM_FP4 && q->fp4_blocks && tpc_ends_with(t->name, "_blocks"))
			ret = blocks_family(ck, i, out, drop, &b, e);
		else if (q->method == TPC_QM_FP4 && !q->fp4_modelopt && tpc_ends_with(t->name, "weight_packed") &&
			 (!strcmp(t->name, "weight_packed") || tpc_ends_with(t->name, ".weight_packed")))
			ret = fp4_family(ck, q, i, out, drop, &b, e);
		else if (q->method == TPC_QM_FP4 && q->fp4_modelopt && t->src_dtype == TPC_U8 &&
			 (!strcmp(t->name, "weight") || tpc_ends_with(t->name, ".weight")))
			ret = fp4_family(ck, q, i, out, drop, &b, e);
		else
			continue;
		if (!ret)
			count++;
	}
	if (!ret && count) {
		bool *keep = tpc_malloc(ck->n * sizeof(*keep));
		if (!keep) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		for (size_t i = 0; i < ck->n; i++)
			keep[i] = !drop[i];
		ret = tpc_ckpt_filter(ck, keep, e);
		free(keep);
		/* the pickled object tree no longer describes these tensors: writers
		 * save a flat state dict */
		tpc_value_unref(ck->root);
		ck->root = NULL;
	}
	if (!ret && n)
		*n = count;
out:
	if (ret && ck->path)
		tpc_err_path(e, ck->path);
	tpc_buf_release(&b);
	free(drop);
	return ret;
}

/* ---- computing the values ---- */

/* Companion c's C-order image, elements [e0, e0+cnt) as F32 (float types) into dst. */
static int read_f32(const tpc_ckpt *ck, const tpc_tensor *c, uint64_t e0, uint64_t cnt, float *dst, tpc_err *e)
{
	unsigned es = tpc_dtype_size(c->src_dtype);
	if (c->src_dtype == TPC_F32)
		return tpc_ckpt_read_bytes(ck, c, e0 * 4, cnt * 4, dst, e);
	uint8_t *tmp = tpc_malloc(cnt ? (size_t)(cnt * es) : 1);
	if (!tmp)
		return tpc_err_nomem(e);
	int ret = tpc_ckpt_read_bytes(ck, c, e0 * es, cnt * es, tmp, e);
	if (!ret)
		ret = tpc_cast(dst, TPC_F32, tmp, c->src_dtype, cnt, e);
	free(tmp);
	return ret;
}

/* Columns [c0, c0+nc) of 2-D companion c (all its rows), C order, into dst:
 * F32 when c is a float type, else its own bytes. */
static int read_cols(const tpc_ckpt *ck, const tpc_tensor *c, int64_t c0, int64_t nc, void *dst, tpc_err *e)
{
	tpc_tensor v;
	if (tpc_tensor_narrow(&v, c, 1, c0, nc))
		return tpc_err_set(e, TPC_EINPUT, "internal: cannot take columns of '%s'", c->name ? c->name : "?");
	int ret = float_type(c->src_dtype) ? read_f32(ck, &v, 0, v.numel, dst, e)
					   : tpc_ckpt_read_bytes(ck, &v, 0, v.numel * tpc_dtype_size(v.src_dtype), dst, e);
	tpc_tensor_release(&v);
	return ret;
}

/* grp[0..I): the scale group of every input feature, from g_idx gi (minus
 * dq->gidx_base) or i / group; checked against the G groups. */
static int load_groups(const tpc_ckpt *ck, const tpc_dequant *dq, const tpc_tensor *gi, const tpc_tensor *sc,
		       int64_t I, int64_t G, int64_t *grp, tpc_err *e)
{
	unsigned ges = gi ? tpc_dtype_size(gi->src_dtype) : 0;
	uint8_t *g = gi ? tpc_malloc((size_t)I * ges + 8) : NULL;
	int ret = 0;
	if (gi && !g)
		return tpc_err_nomem(e);
	if (gi && (ret = tpc_ckpt_read_bytes(ck, gi, 0, (uint64_t)I * ges, g, e))) {
		free(g);
		return ret;
	}
	for (int64_t i = 0; i < I && !ret; i++) {
		grp[i] = gi ? gidx_at(g, ges, i) - dq->gidx_base : i / dq->group;
		if (grp[i] < 0 || grp[i] >= G) { /* checked when the description was built */
			ret = tpc_err_at(e, TPC_EINPUT, NULL, gi ? gi->name : sc->name, "g_idx[%lld] is %lld, outside the %lld groups", (long long)i,
					  (long long)grp[i], (long long)G);
		}
	}
	free(g);
	return ret;
}

/* The words, zero points, scales and group index a packed-integer window
 * reads (GPTQ, AWQ, compressed-tensors); z may be left unallocated. */
typedef struct qbufs {
	uint32_t *q, *z;
	float *s;
	int64_t *grp;
} qbufs;

static int qbufs_alloc(qbufs *b, int64_t nq, int64_t nz, int64_t ns, int64_t I, tpc_err *e)
{
	b->q = tpc_malloc((size_t)nq * 4 + 4);
	b->z = nz ? tpc_malloc((size_t)nz * 4 + 4) : NULL;
	b->s = tpc_malloc((size_t)ns * sizeof(float) + 4);
	b->grp = tpc_malloc((size_t)I * sizeof(int64_t) + 8);
	return !b->q || (nz && !b->z) || !b->s || !b->grp ? tpc_err_nomem(e) : 0;
}

static void qbufs_free(qbufs *b)
{
	free(b->q);
	free(b->z);
	free(b->s);
	free(b->grp);
}

/* Rows [o0, o0+nr) of a compressed-tensors pack-quantized weight of I
 * input features, columns [c0, c0+n) of each, into out [nr, n]. */
static int rows_ct(const tpc_ckpt *ck, const tpc_dequant *dq, int64_t o0, int64_t nr, int64_t I, int64_t c0,
		   int64_t n, float *out, tpc_err *e)
{
	const tpc_tensor *wp = &dq->c[0], *sc = &dq->c[1];
	const tpc_tensor *zp = dq->ct_zp ? &dq->c[2] : NULL, *gi = dq->ct_gidx ? &dq->c[dq->nc - 1] : NULL;
	int bits = dq->bits;
	int64_t pack = 32 / bits, W = wp->shape[1], G = sc->shape[1];
	uint32_t mask = (1u << bits) - 1;
	int32_t off = 1 << (bits - 1);
	int64_t z0 = o0 / pack, nz = (o0 + nr - 1) / pack - z0 + 1;
	qbufs b;
	int ret = qbufs_alloc(&b, nr * W, zp ? nz * G : 0, nr * G, I, e);
	uint32_t *q = b.q, *z = b.z;
	float *s = b.s;
	int64_t *grp = b.grp;
	if (ret)
		goto out;
	if ((ret = tpc_ckpt_read_bytes(ck, wp, (uint64_t)(o0 * W) * 4, (uint64_t)(nr * W) * 4, q, e)) ||
	    (ret = read_f32(ck, sc, (uint64_t)(o0 * G), (uint64_t)(nr * G), s, e)) ||
	    (zp && (ret = tpc_ckpt_read_bytes(ck, zp, (uint64_t)(z0 * G) * 4, (uint64_t)(nz * G) * 4, z, e))) ||
	    (ret = load_groups(ck, dq, gi, sc, I, G, grp, e)))
		goto out;
	tpc_ckpt_drop_range(ck, wp, (uint64_t)(o0 * W) * 4, (uint64_t)(nr * W) * 4);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nr * n >= (1 << 16))
#endif
	for (int64_t r = 0; r < nr; r++) {
		int64_t o = o0 + r;
		const uint32_t *qr = q + r * W;
		const float *sr = s + r * G;
		float *orow = out + r * n - c0;
		for (int64_t i = c0; i < c0 + n; i++) {
			int64_t gr = grp[i];
			int32_t qv = (int32_t)((qr[i / pack] >> (bits * (int)(i % pack))) & mask) - off;
			int32_t zv = z ? (int32_t)((z[(o / pack - z0) * G + gr] >> (bits * (int)(o % pack))) & mask) - off : 0;
			orow[i] = (float)(qv - zv) * sr[gr];
		}
	}
out:
	qbufs_free(&b);
	return ret;
}

/* Rows [o0, o0+nr) of an FP8 weight of I input features, columns
 * [c0, c0+n) of each, into out [nr, n]. */
static int rows_fp8(const tpc_ckpt *ck, const tpc_dequant *dq, int64_t o0, int64_t nr, int64_t I, int64_t c0,
		    int64_t n, float *out, tpc_err *e)
{
	float lut[256];
	int64_t SI = (I + dq->bi - 1) / dq->bi, r0 = o0 / dq->bo, r1 = (o0 + nr - 1) / dq->bo;
	uint8_t *w = tpc_malloc((size_t)(nr * I));
	float *s = tpc_malloc((size_t)((r1 - r0 + 1) * SI) * sizeof(float));
	int ret = 0;
	if (!w || !s) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (int k = 0; k < 256; k++)
		lut[k] = tpc_f8e4m3_to_f32((uint8_t)k);
	if ((ret = tpc_ckpt_read_bytes(ck, &dq->c[0], (uint64_t)(o0 * I), (uint64_t)(nr * I), w, e)) ||
	    (ret = read_f32(ck, &dq->c[1], (uint64_t)(r0 * SI), (uint64_t)((r1 - r0 + 1) * SI), s, e)))
		goto out;
	/* these weight rows are done: keep the resident set bounded */
	tpc_ckpt_drop_range(ck, &dq->c[0], (uint64_t)(o0 * I), (uint64_t)(nr * I));
	/* rows are independent and each element is computed on its own: the
	 * result does not depend on the thread count */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nr * n >= (1 << 16))
#endif
	for (int64_t r = 0; r < nr; r++) {
		const float *srow = s + ((o0 + r) / dq->bo - r0) * SI;
		const uint8_t *wr = w + r * I;
		float *orow = out + r * n - c0;
		/* the window's columns, block by block */
		for (int64_t k = c0 / dq->bi, b0 = k * dq->bi; b0 < c0 + n; b0 += dq->bi, k++) {
			int64_t a = b0 > c0 ? b0 : c0, b1 = b0 + dq->bi < c0 + n ? b0 + dq->bi : c0 + n;
			float sk = srow[k];
			for (int64_t i = a; i < b1; i++)
				orow[i] = lut[wr[i]] * sk;
		}
	}
out:
	free(w);
	free(s);
	return ret;
}


/* Rows [o0, o0+nr) of a GPTQ or AWQ weight of I input features, columns
 * [c0, c0+n) of each, into out [nr, n]. */
static int rows_packed(const tpc_ckpt *ck, const tpc_dequant *dq, int64_t o0, int64_t nr, int64_t I, int64_t c0,
		       int64_t n, float *out, tpc_err *e)
{
	static const int awq_rev[8] = {0, 4, 1, 5, 2, 6, 3, 7};
	bool awq = dq->kind == TPC_DQ_AWQ;
	const tpc_tensor *qw = &dq->c[0], *sc = &dq->c[1], *qz = &dq->c[2], *gi = dq->nc > 3 ? &dq->c[3] : NULL;
	int bits = dq->bits;
	int64_t pack = 32 / bits, G = sc->shape[0];
	uint32_t mask = (1u << bits) - 1;
	int64_t w0 = o0 / pack, nw = (o0 + nr - 1) / pack - w0 + 1; /* output-packed word columns */
	int64_t qrows = qw->shape[0], qcols = awq ? nw : nr;
	qbufs b;
	int ret = qbufs_alloc(&b, qrows * qcols, G * nw, G * nr, I, e);
	uint32_t *q = b.q, *z = b.z;
	float *s = b.s;
	int64_t *grp = b.grp;
	if (ret)
		goto out;
	if ((ret = read_cols(ck, qw, awq ? w0 : o0, qcols, q, e)) || (ret = read_cols(ck, qz, w0, nw, z, e)) ||
	    (ret = read_cols(ck, sc, o0, nr, s, e)) || (ret = load_groups(ck, dq, gi, sc, I, G, grp, e)))
		goto out;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nr * n >= (1 << 16))
#endif
	for (int64_t r = 0; r < nr; r++) {
		int64_t o = o0 + r, wc = o / pack - w0;
		int zs = awq ? 4 * awq_rev[o % 8] : bits * (int)(o % pack);
		float *orow = out + r * n - c0;
		for (int64_t i = c0; i < c0 + n; i++) {
			int64_t gr = grp[i];
			uint32_t qv, zv = (z[gr * nw + wc] >> zs) & mask;
			if (awq) {
				qv = (q[i * nw + wc] >> zs) & mask;
			} else {
				qv = (q[(i / pack) * nr + r] >> (bits * (int)(i % pack))) & mask;
				if (dq->zero_plus_one)
					zv = (zv + 1) & mask;
			}
			orow[i] = (float)((int32_t)qv - (int32_t)zv) * s[gr * nr + r];
		}
	}
out:
	qbufs_free(&b);
	return ret;
}

/* Rows [o0, o0+nr) of an FP4 weight of I input features, columns [c0,
 * c0+n) of each, into out [nr, n]. */
static int rows_fp4(const tpc_ckpt *ck, const tpc_dequant *dq, int64_t o0, int64_t nr, int64_t I, int64_t c0,
		    int64_t n, float *out, tpc_err *e)
{
	static const float e2m1[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -.5f, -1, -1.5f, -2, -3, -4, -6};
	int64_t W = I / 2, G = I / dq->group;
	uint8_t *w = tpc_malloc((size_t)(nr * W) + 1), *sb = tpc_malloc((size_t)(nr * G) + 1);
	float *s = tpc_malloc((size_t)(nr * G) * sizeof(float) + 4), g = 1;
	int ret = 0;
	if (!w || !sb || !s) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = tpc_ckpt_read_bytes(ck, &dq->c[0], (uint64_t)(o0 * W), (uint64_t)(nr * W), w, e)) ||
	    (ret = tpc_ckpt_read_bytes(ck, &dq->c[1], (uint64_t)(o0 * G), (uint64_t)(nr * G), sb, e)) ||
	    (!dq->fp4_mx && (ret = tpc_ckpt_read_bytes(ck, &dq->c[2], 0, 4, &g, e))))
		goto out;
	tpc_ckpt_drop_range(ck, &dq->c[0], (uint64_t)(o0 * W), (uint64_t)(nr * W));
	for (int64_t k = 0; k < nr * G && !ret; k++) {
		if (dq->fp4_mx) {
			if (sb[k] == 255) /* NaN in OCP MX v1.0 */
				ret = tpc_err_at(e, TPC_EINPUT, NULL, dq->c[1].name, "E8M0 scale 255 (NaN) at byte offset %llu",
						 (unsigned long long)(o0 * G + k));
			s[k] = ldexpf(1.0f, (int)sb[k] - 127);
		} else {
			float f = tpc_f8e4m3_to_f32(sb[k]);
			s[k] = dq->fp4_div ? f / g : f * g;
		}
	}
	if (ret)
		goto out;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (nr * n >= (1 << 16))
#endif
	for (int64_t r = 0; r < nr; r++) {
		const uint8_t *wr = w + r * W;
		const float *sr = s + r * G;
		float *orow = out + r * n - c0;
		for (int64_t i = c0; i < c0 + n; i++)
			orow[i] = e2m1[(wr[i / 2] >> (4 * (i & 1))) & 15] * sr[i / dq->group];
	}
out:
	free(w);
	free(sb);
	free(s);
	return ret;
}

/* gpt-oss MXFP4 experts: rows [q0, q0+nr) of the [E * I, R] image (row q
 * is expert q / I's input q % I), columns [c0, c0+n) of R, into out [nr, n].
 * The rows of one block (32 inputs of one expert) share the bytes read: each
 * output column's 16 bytes and scale of that block. */
static int rows_mxfp4_t(const tpc_ckpt *ck, const tpc_dequant *dq, int64_t q0, int64_t nr, int64_t c0,
			int64_t n, float *out, tpc_err *e)
{
	static const float e2m1[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -.5f, -1, -1.5f, -2, -3, -4, -6};
	const tpc_tensor *bl = &dq->c[0], *sc = &dq->c[1];
	int64_t G = bl->shape[2], I = G * 32;
	uint8_t *w = tpc_malloc((size_t)n * 16 + 1), *sb = tpc_malloc((size_t)n + 1);
	float *s = tpc_malloc((size_t)n * sizeof(float) + 4);
	int ret = 0;
	if (!w || !sb || !s)
		ret = tpc_err_nomem(e);
	for (int64_t q = q0; q < q0 + nr && !ret;) {
		int64_t ex = q / I, j = (q % I) / 32, end = (ex * I) + (j + 1) * 32;
		if (end > q0 + nr)
			end = q0 + nr;
		tpc_tensor vb, vs, tb, ts;
		/* expert ex, block column j, rows c0.. of the blocks' matrix */
		int rb = tpc_tensor_narrow(&tb, bl, 0, ex, 1) || tpc_tensor_narrow(&vb, &tb, 2, j, 1);
		if (!rb) {
			tpc_tensor_release(&tb);
			rb = tpc_tensor_narrow(&tb, &vb, 1, c0, n);
			tpc_tensor_release(&vb);
		}
		int rs = tpc_tensor_narrow(&ts, sc, 0, ex, 1) || tpc_tensor_narrow(&vs, &ts, 2, j, 1);
		if (!rs) {
			tpc_tensor_release(&ts);
			rs = tpc_tensor_narrow(&ts, &vs, 1, c0, n);
			tpc_tensor_release(&vs);
		}
		if (rb || rs) {
			ret = tpc_err_set(e, TPC_EINPUT, "internal: cannot take block %lld of '%s'", (long long)j, bl->name);
		} else if (!(ret = tpc_ckpt_read_bytes(ck, &tb, 0, (uint64_t)n * 16, w, e)) &&
			   !(ret = tpc_ckpt_read_bytes(ck, &ts, 0, (uint64_t)n, sb, e))) {
			for (int64_t r = 0; r < n && !ret; r++) {
				if (sb[r] == 255)
					ret = tpc_err_at(e, TPC_EINPUT, NULL, sc->name, "E8M0 scale 255 (NaN) at byte offset %llu",
							 (unsigned long long)(((ex * sc->shape[1]) + c0 + r) * G + j));
				s[r] = ldexpf(1.0f, (int)sb[r] - 127);
			}
			for (int64_t qq = q; qq < end && !ret; qq++) {
				int k = (int)((qq % I) % 32);
				float *orow = out + (qq - q0) * n;
				for (int64_t r = 0; r < n; r++)
					orow[r] = e2m1[(w[r * 16 + k / 2] >> (4 * (k & 1))) & 15] * s[r];
			}
		}
		if (!rb)
			tpc_tensor_release(&tb);
		if (!rs)
			tpc_tensor_release(&ts);
		q = end;
	}
	free(w);
	free(sb);
	free(s);
	return ret;
}

/* GGML blocks: rows [o0, o0 + nr) of the image, columns [c0, c0 + I) of FI */
static int rows_ggml(const tpc_ckpt *ck, const tpc_dequant *dq, int64_t o0, int64_t nr, int64_t FI, int64_t c0,
		     int64_t I, float *orow, tpc_err *e)
{
	const tpc_ggml_info *in = tpc_ggml_info_of(dq->gtype);
	if (in && !tpc_ggml_decodes(dq->gtype))
		return tpc_err_set(e, TPC_EINPUT,
				   "tpconv cannot dequantize ggml type %s (it decodes Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
				   "Q2_K to Q6_K, MXFP4 and NVFP4); a GGUF output copies its blocks unchanged",
				   in->name);
	if (!in || FI % in->block)
		return tpc_err_set(e, TPC_EINPUT, "internal: ggml type %d cannot be decoded", dq->gtype);
	uint64_t nb = (uint64_t)(FI / in->block), rb = nb * (uint64_t)in->size;
	bool direct = !dq->rope_hd && c0 == 0 && I == FI;
	/* whole rows in order: one read, decoded in place of the output */
	int64_t run = direct ? nr : 1;
	uint8_t *pk = tpc_malloc((size_t)(rb * (uint64_t)run));
	float *row = direct ? NULL : tpc_malloc((size_t)FI * sizeof(float));
	int ret = 0;
	if (!pk || (!direct && !row))
		ret = tpc_err_nomem(e);
	for (int64_t r = 0; r < nr && !ret; r += run) {
		int64_t o = o0 + r, src = o;
		if (dq->rope_hd) {
			int64_t hd = dq->rope_hd, h = o / hd, q = o % hd, half = hd / 2;
			src = h * hd + 2 * (q % half) + q / half;
		}
		if ((ret = tpc_ckpt_read_bytes(ck, &dq->c[0], (uint64_t)src * rb, rb * (uint64_t)run, pk, e)))
			break;
		if (direct) {
			tpc_ggml_dequant(dq->gtype, pk, orow, nb * (uint64_t)run);
		} else {
			tpc_ggml_dequant(dq->gtype, pk, row, nb);
			memcpy(orow + r * I, row + c0, (size_t)I * sizeof(float));
		}
	}
	free(pk);
	free(row);
	return ret;
}

int tpc__dequant_read(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t e0, uint64_t cnt, void *dst, tpc_err *e)
{
	const tpc_dequant *dq = t->dq;
	float *d = dst, *rows = NULL;
	int ret = 0;
	if (!cnt)
		return 0;
	if (dq && dq->kind == TPC_DQ_LORA)
		return tpc__lora_read(ck, t, e0, cnt, dst, e);
	if (dq && dq->kind == TPC_DQ_MIX)
		return tpc__mix_read(ck, t, e0, cnt, dst, e);
	/* GGML: any ndim, rows of the last dim */
	int nd = dq && (dq->kind == TPC_DQ_GGML || dq->kind == TPC_DQ_MXFP4_T) && t->ndim >= 1 ? t->ndim : 2;
	if (!dq || t->ndim != nd || t->shape[nd - 1] <= 0 || e0 > t->numel || cnt > t->numel - e0)
		return tpc_err_set(e, TPC_EINPUT, "internal: bad read of dequantized '%s'", t->name ? t->name : "?");
	/* a window (one rank's slice): rows r0.. of the full image, I of its FI
	 * columns from c0 */
	int64_t I = t->shape[nd - 1], FI = dq->I ? dq->I : I;
	uint64_t per = DQ_STEP_ELEMS / (uint64_t)FI;
	if (per < 1)
		per = 1;
	uint64_t span = (e0 % (uint64_t)I + cnt + (uint64_t)I - 1) / (uint64_t)I; /* rows the read touches */
	if (per > span)
		per = span; /* a small read gets a small buffer */
	rows = tpc_malloc((size_t)(per * (uint64_t)I) * sizeof(float));
	if (!rows)
		return tpc_err_nomem(e);
	while (cnt && !ret) {
		int64_t o0 = (int64_t)(e0 / (uint64_t)I);
		uint64_t skip = e0 % (uint64_t)I;
		uint64_t need = (skip + cnt + (uint64_t)I - 1) / (uint64_t)I;
		int64_t nr = (int64_t)(need < per ? need : per);
		/* only the window's columns are computed (a row-split rank's slice) */
		ret = dq->kind == TPC_DQ_GGML ? rows_ggml(ck, dq, dq->r0 + o0, nr, FI, dq->c0, I, rows, e)
		      : dq->kind == TPC_DQ_FP8 ? rows_fp8(ck, dq, dq->r0 + o0, nr, FI, dq->c0, I, rows, e)
		      : dq->kind == TPC_DQ_CT ? rows_ct(ck, dq, dq->r0 + o0, nr, FI, dq->c0, I, rows, e)
		      : dq->kind == TPC_DQ_FP4 ? rows_fp4(ck, dq, dq->r0 + o0, nr, FI, dq->c0, I, rows, e)
		      : dq->kind == TPC_DQ_MXFP4_T ? rows_mxfp4_t(ck, dq, dq->r0 + o0, nr, dq->c0, I, rows, e)
					      : rows_packed(ck, dq, dq->r0 + o0, nr, FI, dq->c0, I, rows, e);
		if (ret)
			break;
		uint64_t take = (uint64_t)nr * (uint64_t)I - skip;
		if (take > cnt)
			take = cnt;
		memcpy(d, rows + skip, (size_t)take * sizeof(float));
		d += take;
		e0 += take;
		cnt -= take;
	}
	free(rows);
	if (ret)
		tpc_err_tensor(e, t->name);
	return ret;
}
