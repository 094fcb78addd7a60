/* tpc_lora_nemo.c - a NeMo / Megatron tensor-parallel LoRA save merged into a
 * PEFT adapter (see tpc_lora_nemo.h for the layout and its sources). */
#include "tpc_lora_nemo.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_dtype.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_util.h"
#include "tpc_yaml.h"

#define NEMO_CFG "model_config.yaml"
#define NEMO_FILE "model_weights.ckpt"
#define NEMO_MAX (1ll << 31)

enum { M_QKV, M_DENSE, M_FC1, M_FC2, M_N };

/* A module's NeMo 1 and NeMo 2 / Megatron-Bridge names, and whether its base
 * is column-parallel (A split over the rank dim) or row-parallel (over in). */
static const struct {
	const char *nemo1, *nemo2;
	bool row;
} mods[M_N] = {
	{"self_attention.adapter_layer.lora_kqv_adapter", "self_attention.linear_qkv.adapter", false},
	{"self_attention.adapter_layer.lora_dense_attention_adapter", "self_attention.linear_proj.adapter", true},
	{"mlp.adapter_layer.lora_hto4h_adapter", "mlp.linear_fc1.adapter", false},
	{"mlp.adapter_layer.lora_4htoh_adapter", "mlp.linear_fc2.adapter", true},
};

typedef struct rank_file {
	tpc_ckpt ck;
	char *path;
	bool open;
} rank_file;

/* where each (layer, module, in/out, tp rank) is: rank file index and tensor */
typedef struct slot {
	int file;
	int64_t t;
} slot;

typedef struct nemo {
	tpc_lora_nemo_info *in;
	rank_file *f;    /* [pp * tp], p * tp + t */
	slot *s;         /* [layers][M_N][2][tp] */
	tpc_dtype dtype;
	bool have_dtype, gated;
} nemo;

static slot *slot_at(const nemo *n, int64_t l, int m, int io, int t)
{
	return &n->s[((l * M_N + m) * 2 + io) * n->in->tp + t];
}

static int cfg_bad(tpc_err *e, const char *path, const char *member, const char *why)
{
	return tpc_err_at(e, TPC_EINPUT, path, NULL, "'%s': %s", member, why);
}

/* An integer member of o: *v (dflt when absent or null and dflt >= 0). */
static int cfg_int(const cJSON *o, const char *k, int64_t dflt, int64_t *v, const char *path, tpc_err *e)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!j || cJSON_IsNull(j)) {
		if (dflt < 0)
			return cfg_bad(e, path, k, "missing: a NeMo LoRA save's model_config.yaml has it");
		*v = dflt;
		return 0;
	}
	if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) || j->valuedouble < 1 ||
	    j->valuedouble >= (double)NEMO_MAX)
		return cfg_bad(e, path, k, "not a whole number from 1 to 2^31");
	*v = (int64_t)j->valuedouble;
	return 0;
}

static int read_cfg(nemo *n, const char *path, bool *gated, tpc_err *e)
{
	cJSON *root = NULL;
	tpc_lora_nemo_info *in = n->in;
	int64_t tp, pp;
	int ret = tpc_yaml_from_file(path, &root, e);
	if (ret)
		return ret;
	const cJSON *peft = cJSON_GetObjectItemCaseSensitive(root, "peft");
	const cJSON *lt = cJSON_GetObjectItemCaseSensitive(peft, "lora_tuning");
	const cJSON *sch = cJSON_GetObjectItemCaseSensitive(peft, "peft_scheme");
	const cJSON *var = cJSON_GetObjectItemCaseSensitive(lt, "variant");
	const cJSON *alpha = cJSON_GetObjectItemCaseSensitive(lt, "alpha");
	const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "activation");
	if (!cJSON_IsObject(lt)) {
		ret = cfg_bad(e, path, "peft.lora_tuning", "missing: not a LoRA save");
	} else if (sch && !(cJSON_IsString(sch) && !strcmp(sch->valuestring, "lora"))) {
		ret = cfg_bad(e, path, "peft.peft_scheme", "not lora");
	} else if (var && !cJSON_IsNull(var) && !(cJSON_IsString(var) && !strcmp(var->valuestring, "nemo"))) {
		ret = cfg_bad(e, path, "peft.lora_tuning.variant",
			      "not \"nemo\" (the fused kqv / hto4h adapters); a canonical save has other keys");
	} else if (!(ret = cfg_int(root, "tensor_model_parallel_size", 1, &tp, path, e)) &&
		   !(ret = cfg_int(root, "pipeline_model_parallel_size", 1, &pp, path, e)) &&
		   !(ret = cfg_int(root, "num_layers", -1, &in->layers, path, e)) &&
		   !(ret = cfg_int(root, "hidden_size", -1, &in->hidden, path, e)) &&
		   !(ret = cfg_int(root, "ffn_hidden_size", -1, &in->ffn, path, e)) &&
		   !(ret = cfg_int(root, "num_attention_heads", -1, &in->heads, path, e)) &&
		   !(ret = cfg_int(root, "num_query_groups", in->heads, &in->groups, path, e)) &&
		   !(ret = cfg_int(root, "kv_channels", in->hidden / in->heads, &in->head_dim, path, e)) &&
		   !(ret = cfg_int(lt, "adapter_dim", -1, &in->r, path, e))) {
		if (tp > 256 || pp > 1024)
			ret = cfg_bad(e, path, "tensor_model_parallel_size", "more than 256 ranks (pipeline: 1024)");
		else if (in->layers % pp)
			ret = cfg_bad(e, path, "num_layers", "not a multiple of pipeline_model_parallel_size (stages uneven)");
		else if (!in->head_dim)
			ret = cfg_bad(e, path, "kv_channels", "null and hidden_size / num_attention_heads is 0");
		in->tp = (int)tp;
		in->pp = (int)pp;
	}
	if (!ret) {
		if (!alpha || cJSON_IsNull(alpha) ||
		    (cJSON_IsString(alpha) && !strcmp(alpha->valuestring, "${peft.lora_tuning.adapter_dim}")))
			in->alpha = (double)in->r; /* NeMo's default: alpha = adapter_dim */
		else if (cJSON_IsNumber(alpha) && isfinite(alpha->valuedouble))
			in->alpha = alpha->valuedouble;
		else
			ret = cfg_bad(e, path, "peft.lora_tuning.alpha", "neither a number nor ${peft.lora_tuning.adapter_dim}");
	}
	/* Megatron's gated activations: fc1 holds [gate; up] */
	static const char *const gated_acts[] = {"swiglu", "fast-swiglu", "geglu", "fast-geglu", "reglu", "fast-reglu"};
	*gated = false;
	for (size_t i = 0; cJSON_IsString(act) && i < sizeof(gated_acts) / sizeof(*gated_acts); i++)
		*gated = *gated || !strcmp(act->valuestring, gated_acts[i]);
	cJSON_Delete(root);
	return ret;
}

static char *rank_path(const char *dir, const tpc_lora_nemo_info *in, int p, int t)
{
	char sub[96];
	if (in->tp == 1 && in->pp == 1)
		snprintf(sub, sizeof(sub), "%s", NEMO_FILE);
	else if (in->pp == 1)
		snprintf(sub, sizeof(sub), "mp_rank_%02d/%s", t, NEMO_FILE);
	else
		snprintf(sub, sizeof(sub), "tp_rank_%02d_pp_rank_%03d/%s", t, p, NEMO_FILE);
	return tpc_path_join(dir, sub);
}

bool tpc_lora_nemo_detect(const char *dir)
{
	char *cfg = tpc_path_join(dir, NEMO_CFG);
	bool ok = false;
	cJSON *root = NULL;
	tpc_err e;
	tpc_err_init(&e);
	if (cfg && tpc_exists(cfg)) {
		if (!tpc_yaml_from_file(cfg, &root, &e)) {
			const cJSON *peft = cJSON_GetObjectItemCaseSensitive(root, "peft");
			ok = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(peft, "lora_tuning"));
		} else {
			/* a config that names a LoRA but does not parse: the reader says why */
			size_t n = 0;
			char *text = NULL;
			tpc_err e2;
			tpc_err_init(&e2);
			ok = !tpc_read_file(cfg, 1u << 24, &text, &n, &e2) && text && memmem(text, n, "lora_tuning", 11);
			free(text);
		}
	}
	cJSON_Delete(root);
	free(cfg);
	return ok;
}

/* One key of rank file fi (stage p, tp rank t) into its slot. */
static int place(nemo *n, int fi, int p, int t, int64_t ti, tpc_err *e)
{
	const tpc_lora_nemo_info *in = n->in;
	const tpc_tensor *x = &n->f[fi].ck.t[ti];
	const char *k = x->name, *path = n->f[fi].path;
	const char *ly = strstr(k, "layers.");
	int io = tpc_ends_with(k, ".linear_in.weight") ? 0 : tpc_ends_with(k, ".linear_out.weight") ? 1 : -1;
	if (!ly || io < 0 || (ly != k && ly[-1] != '.'))
		return tpc_err_at(e, TPC_EINPUT, path, k,
				  "not a key of a NeMo LoRA adapter (<prefix>layers.L.<module>.linear_in/linear_out.weight)");
	char *end = NULL;
	const char *num = ly + strlen("layers.");
	unsigned long long l = (*num >= '0' && *num <= '9') ? strtoull(num, &end, 10) : 0;
	if (!end || *end != '.' || (int64_t)l >= in->layers / in->pp)
		return tpc_err_at(e, TPC_EINPUT, path, k, "its layer number is not one of the stage's %lld layers",
				  (long long)(in->layers / in->pp));
	const char *mod = end + 1;
	size_t ml = strlen(mod) - strlen(io ? ".linear_out.weight" : ".linear_in.weight");
	int m = -1;
	for (int q = 0; q < M_N && m < 0; q++)
		if ((strlen(mods[q].nemo1) == ml && !strncmp(mod, mods[q].nemo1, ml)) ||
		    (strlen(mods[q].nemo2) == ml && !strncmp(mod, mods[q].nemo2, ml)))
			m = q;
	if (m < 0)
		return tpc_err_at(e, TPC_EINPUT, path, k,
				  "not a NeMo LoRA module (lora_kqv_adapter, lora_dense_attention_adapter, lora_hto4h_adapter, "
				  "lora_4htoh_adapter, or linear_qkv/linear_proj/linear_fc1/linear_fc2.adapter)");
	if (x->dtype != TPC_F32 && x->dtype != TPC_F16 && x->dtype != TPC_BF16)
		return tpc_err_at(e, TPC_EINPUT, path, k, "dtype %s: LoRA tensors are float", tpc_dtype_name(x->dtype));
	if (n->have_dtype && x->dtype != n->dtype)
		return tpc_err_at(e, TPC_EINPUT, path, k, "dtype %s, where the others are %s", tpc_dtype_name(x->dtype),
				  tpc_dtype_name(n->dtype));
	if (x->dq || (x->flags & TPC_TF_NODATA) || x->ndim != 2)
		return tpc_err_at(e, TPC_EINPUT, path, k, "not a 2-D tensor with data");
	n->dtype = x->dtype;
	n->have_dtype = true;
	slot *s = slot_at(n, (int64_t)l + in->layers / in->pp * p, m, io, t);
	if (s->file >= 0)
		return tpc_err_at(e, TPC_EINPUT, path, k, "a second tensor for the same module");
	s->file = fi;
	s->t = ti;
	return 0;
}

/* Rows and columns a rank's linear_in / linear_out of module m hold. */
static void want_shape(const nemo *n, int m, int io, int64_t *rows, int64_t *cols)
{
	const tpc_lora_nemo_info *in = n->in;
	int64_t tp = in->tp, q = in->heads * in->head_dim;
	int64_t out[M_N] = {(in->heads + 2 * in->groups) * in->head_dim, in->hidden, (n->gated ? 2 : 1) * in->ffn,
			    in->hidden};
	int64_t inw[M_N] = {in->hidden, q, in->hidden, in->ffn};
	if (io) {
		*rows = out[m] / tp;
		*cols = in->r;
	} else if (mods[m].row) {
		*rows = in->r;
		*cols = inw[m] / tp;
	} else {
		*rows = in->r / tp;
		*cols = inw[m];
	}
}

/* Every module of a layer on every tp rank, whole (in and out), in shape. */
static int check(const nemo *n, tpc_err *e)
{
	const tpc_lora_nemo_info *in = n->in;
	int64_t tp = in->tp;
	if (in->r % tp || in->groups % tp || in->hidden % tp || in->ffn % tp || (in->heads * in->head_dim) % tp ||
	    in->heads % in->groups)
		return tpc_err_at(e, TPC_EINPUT, NULL, NULL,
				  "adapter_dim %lld, query groups %lld of %lld heads, hidden %lld, ffn %lld: tp %d must divide "
				  "each (and the groups the heads)",
				  (long long)in->r, (long long)in->groups, (long long)in->heads, (long long)in->hidden,
				  (long long)in->ffn, in->tp);
	for (int64_t l = 0; l < in->layers; l++)
		for (int m = 0; m < M_N; m++) {
			const slot *s0 = slot_at(n, l, m, 0, 0);
			for (int io = 0; io < 2; io++)
				for (int t = 0; t < in->tp; t++) {
					const slot *s = slot_at(n, l, m, io, t);
					if ((s->file < 0) != (s0->file < 0)) {
						/* name the tensor that is there, and what lacks its partner */
						const slot *h = s->file >= 0 ? s : s0;
						return tpc_err_at(e, TPC_EINPUT, n->f[h->file].path, n->f[h->file].ck.t[h->t].name,
								  "layer %lld's module is here, but its %s of tp rank %d is missing",
								  (long long)l, s->file >= 0 ? "linear_in" : io ? "linear_out" : "linear_in",
								  s->file >= 0 ? 0 : t);
					}
					if (s->file < 0)
						continue;
					if (m == M_FC1 && !n->gated)
						return tpc_err_at(e, TPC_EINPUT, n->f[s->file].path, n->f[s->file].ck.t[s->t].name,
								  "an hto4h adapter of a model whose activation is not gated: NeMo's "
								  "converter names only gate_proj / up_proj");
					const tpc_tensor *x = &n->f[s->file].ck.t[s->t];
					int64_t r, c;
					want_shape(n, m, io, &r, &c);
					if (x->shape[0] != r || x->shape[1] != c) {
						char sh[64];
						return tpc_err_at(e, TPC_EINPUT, n->f[s->file].path, x->name,
								  "shape %s, where model_config.yaml split by tp %d gives [%lld, %lld]",
								  tpc_shape_str(x, sh, sizeof(sh)), in->tp, (long long)r, (long long)c);
					}
				}
		}
	return 0;
}

/* The gathered A (or B) of module m of layer l into dst: rows of each rank
 * (col-parallel linear_in, every linear_out), or its columns (row-parallel
 * linear_in). */
static int gather(const nemo *n, int64_t l, int m, int io, uint8_t *dst, tpc_err *e)
{
	int64_t r, c;
	size_t es = tpc_dtype_size(n->dtype);
	want_shape(n, m, io, &r, &c);
	uint64_t part = (uint64_t)r * (uint64_t)c * es;
	uint8_t *tmp = malloc(part ? part : 1);
	if (!tmp)
		return tpc_err_nomem(e);
	int ret = 0;
	bool cols = !io && mods[m].row;
	for (int t = 0; t < n->in->tp && !ret; t++) {
		const slot *s = slot_at(n, l, m, io, t);
		if ((ret = tpc_ckpt_read_bytes(&n->f[s->file].ck, &n->f[s->file].ck.t[s->t], 0, part, tmp, e)))
			break;
		if (!cols) {
			memcpy(dst + (uint64_t)t * part, tmp, part);
			continue;
		}
		for (int64_t i = 0; i < r; i++) /* row i: tp slices of c columns */
			memcpy(dst + ((uint64_t)i * (uint64_t)n->in->tp + (uint64_t)t) * (uint64_t)c * es,
			       tmp + (uint64_t)i * (uint64_t)c * es, (uint64_t)c * es);
	}
	free(tmp);
	return ret;
}

/* The PEFT tensors being laid out: names and places in one buffer. */
typedef struct outt {
	char name[160];
	int64_t rows, cols;
	uint64_t off;
} outt;

typedef struct outs {
	outt *t;
	size_t n, cap;
	uint8_t *buf;
	uint64_t len, cap_b;
	size_t es;
} outs;

/* Append tensor `name` [rows, cols] copied from src (rows src_stride bytes
 * apart when not 0: a block of rows of a bigger matrix). */
static int put(outs *o, const char *name, const uint8_t *src, int64_t rows, int64_t cols, tpc_err *e)
{
	uint64_t nb = (uint64_t)rows * (uint64_t)cols * o->es;
	if (tpc_grow((void **)&o->t, &o->cap, o->n + 1, sizeof(*o->t)))
		return tpc_err_nomem(e);
	if (o->len + nb > o->cap_b) {
		uint64_t nc = (o->len + nb) * 2;
		uint8_t *b = realloc(o->buf, nc);
		if (!b)
			return tpc_err_nomem(e);
		o->buf = b;
		o->cap_b = nc;
	}
	outt *t = &o->t[o->n++];
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->rows = rows;
	t->cols = cols;
	t->off = o->len;
	memcpy(o->buf + o->len, src, nb);
	o->len += nb;
	return 0;
}

/* Module m of layer l, gathered, unfused and named as PEFT's. */
static int emit(const nemo *n, int64_t l, int m, outs *o, tpc_err *e)
{
	const tpc_lora_nemo_info *in = n->in;
	int64_t ar, ac, br, bc;
	want_shape(n, m, 0, &ar, &ac);
	want_shape(n, m, 1, &br, &bc);
	if (mods[m].row)
		ac *= in->tp;
	else
		ar *= in->tp;
	br *= in->tp;
	size_t es = o->es;
	uint8_t *A = malloc((size_t)((uint64_t)ar * (uint64_t)ac * es)), *B = malloc((size_t)((uint64_t)br * (uint64_t)bc * es));
	uint8_t *P = NULL;
	char pre[96], nm[160];
	int ret = 0;
	snprintf(pre, sizeof(pre), "base_model.model.model.layers.%lld.", (long long)l);
	if (!A || !B) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = gather(n, l, m, 0, A, e)) || (ret = gather(n, l, m, 1, B, e)))
		goto out;
	uint64_t row = (uint64_t)bc * es;
#define PUT(proj, src, rows, cols)                                                   \
	do {                                                                         \
		snprintf(nm, sizeof(nm), "%s%s.lora_%s.weight", pre, proj, src == A ? "A" : "B"); \
		if ((ret = put(o, nm, src, rows, cols, e)))                          \
			goto out;                                                    \
	} while (0)
	if (m == M_DENSE || m == M_FC2) {
		const char *proj = m == M_DENSE ? "self_attn.o_proj" : "mlp.down_proj";
		PUT(proj, A, ar, ac);
		PUT(proj, B, br, bc);
	} else {
		/* unfused: kqv by query groups [q heads; k; v] (lora_converter.py
		 * q_slice / k_slice / v_slice), fc1 by rank [gate_t; up_t] */
		int np = m == M_QKV ? 3 : 2;
		int64_t hd = in->head_dim, hpg = in->heads / in->groups, f = in->ffn / in->tp;
		int64_t prow[3] = {in->heads * hd, in->groups * hd, in->groups * hd};
		if (m == M_FC1)
			prow[0] = prow[1] = in->ffn;
		static const char *const qkv[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"};
		static const char *const fc1[] = {"mlp.gate_proj", "mlp.up_proj"};
		for (int p = 0; p < np; p++) {
			if (!(P = malloc((size_t)((uint64_t)prow[p] * row)))) {
				ret = tpc_err_nomem(e);
				goto out;
			}
			uint64_t at = 0;
			if (m == M_QKV) {
				for (int64_t g = 0; g < in->groups; g++) {
					int64_t first = g * (hpg + 2) + (p == 0 ? 0 : hpg + p - 1), cnt = p == 0 ? hpg : 1;
					memcpy(P + at, B + (uint64_t)(first * hd) * row, (uint64_t)(cnt * hd) * row);
					at += (uint64_t)(cnt * hd) * row;
				}
			} else {
				for (int t = 0; t < in->tp; t++) {
					memcpy(P + at, B + (uint64_t)((2 * t + p) * f) * row, (uint64_t)f * row);
					at += (uint64_t)f * row;
				}
			}
			const char *proj = m == M_QKV ? qkv[p] : fc1[p];
			PUT(proj, A, ar, ac);
			snprintf(nm, sizeof(nm), "%s%s.lora_B.weight", pre, proj);
			if ((ret = put(o, nm, P, prow[p], bc, e)))
				goto out;
			free(P);
			P = NULL;
		}
	}
#undef PUT
out:
	free(P);
	free(A);
	free(B);
	return ret;
}

static int open_ranks(nemo *n, const char *dir, tpc_err *e)
{
	const tpc_lora_nemo_info *in = n->in;
	int ret = 0;
	for (int p = 0; p < in->pp && !ret; p++)
		for (int t = 0; t < in->tp && !ret; t++) {
			rank_file *f = &n->f[p * in->tp + t];
			if (!(f->path = rank_path(dir, in, p, t)))
				return tpc_err_nomem(e);
			if (!tpc_exists(f->path))
				return tpc_err_at(e, TPC_EINPUT, f->path, NULL,
						  "no such file: model_config.yaml says tp %d, pp %d", in->tp, in->pp);
			tpc_open_opts oo;
			memset(&oo, 0, sizeof(oo));
			oo.flags |= TPC_OPEN_STRICT;
			tpc_ckpt_init(&f->ck);
			f->open = true; /* released whatever the open leaves */
			if ((ret = tpc_ckpt_open(&f->ck, f->path, &oo, e)))
				break;
			for (size_t i = 0; i < f->ck.n && !ret; i++)
				ret = place(n, p * in->tp + t, p, t, (int64_t)i, e);
		}
	return ret;
}

/* adapter_config.json as PEFT's LoraConfig writes its members */
static int write_cfg(const tpc_lora_nemo_info *in, const bool *present, tpc_buf *cfg, tpc_err *e)
{
	static const char *const names[M_N][3] = {
		{"q_proj", "k_proj", "v_proj"}, {"o_proj", NULL, NULL}, {"gate_proj", "up_proj", NULL}, {"down_proj", NULL, NULL}};
	cJSON *c = cJSON_CreateObject(), *tm = cJSON_CreateArray();
	if (!c || !tm) {
		cJSON_Delete(c);
		cJSON_Delete(tm);
		return tpc_err_nomem(e);
	}
	cJSON_AddNullToObject(c, "base_model_name_or_path");
	cJSON_AddStringToObject(c, "bias", "none");
	cJSON_AddBoolToObject(c, "fan_in_fan_out", 0);
	cJSON_AddBoolToObject(c, "inference_mode", 1);
	cJSON_AddNumberToObject(c, "lora_alpha", in->alpha);
	cJSON_AddNumberToObject(c, "lora_dropout", 0);
	cJSON_AddNullToObject(c, "modules_to_save");
	cJSON_AddStringToObject(c, "peft_type", "LORA");
	cJSON_AddNumberToObject(c, "r", (double)in->r);
	for (int m = 0; m < M_N; m++)
		for (int k = 0; k < 3 && present[m] && names[m][k]; k++)
			cJSON_AddItemToArray(tm, cJSON_CreateString(names[m][k]));
	cJSON_AddItemToObject(c, "target_modules", tm);
	cJSON_AddStringToObject(c, "task_type", "CAUSAL_LM");
	cJSON_AddBoolToObject(c, "use_dora", 0);
	cJSON_AddBoolToObject(c, "use_rslora", 0);
	char *s = cJSON_Print(c);
	cJSON_Delete(c);
	if (!s)
		return tpc_err_nomem(e);
	tpc_buf_adds(cfg, s);
	tpc_buf_addc(cfg, '\n');
	free(s);
	return cfg->oom ? tpc_err_nomem(e) : 0;
}

int tpc_lora_nemo_read(tpc_ckpt *out, tpc_buf *cfg, const char *dir, tpc_lora_nemo_info *info, tpc_err *e)
{
	nemo n;
	outs o;
	bool present[M_N] = {false};
	char *cpath = tpc_path_join(dir, NEMO_CFG);
	int ret;
	memset(&n, 0, sizeof(n));
	memset(&o, 0, sizeof(o));
	memset(info, 0, sizeof(*info));
	n.in = info;
	if (!cpath)
		return tpc_err_nomem(e);
	if ((ret = read_cfg(&n, cpath, &n.gated, e)))
		goto out;
	size_t nf = (size_t)info->tp * (size_t)info->pp, ns = (size_t)info->layers * M_N * 2 * (size_t)info->tp;
	if (!(n.f = tpc_calloc(nf, sizeof(*n.f))) || !(n.s = tpc_calloc(ns, sizeof(*n.s)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < ns; i++)
		n.s[i].file = -1;
	if ((ret = open_ranks(&n, dir, e)) || (ret = check(&n, e)))
		goto out;
	if (!n.have_dtype) {
		ret = tpc_err_at(e, TPC_EINPUT, dir, NULL, "the rank files hold no LoRA tensor");
		goto out;
	}
	o.es = tpc_dtype_size(n.dtype);
	for (int64_t l = 0; l < info->layers && !ret; l++)
		for (int m = 0; m < M_N && !ret; m++)
			if (slot_at(&n, l, m, 0, 0)->file >= 0) {
				present[m] = true;
				info->modules += m == M_QKV ? 3 : m == M_FC1 ? 2 : 1;
				ret = emit(&n, l, m, &o, e);
			}
	int src = -1;
	if (ret || (ret = write_cfg(info, present, cfg, e)) ||
	    (ret = tpc_ckpt_add_mem(out, "(the merged NeMo LoRA)", o.buf, o.len, &src, e)))
		goto out;
	o.buf = NULL; /* the checkpoint owns it */
	for (size_t i = 0; i < o.n && !ret; i++) {
		int64_t shape[2] = {o.t[i].rows, o.t[i].cols};
		int64_t ix = tpc_ckpt_add_tensor(out, o.t[i].name, n.dtype, 2, shape, NULL, src, o.t[i].off, e);
		ret = ix < 0 ? (int)ix : 0;
	}
	if (!ret)
		ret = tpc_ckpt_meta_set(out, "format", "pt", e);
	if (!ret && !out->format && !(out->format = tpc_strdup("nemo-lora")))
		ret = tpc_err_nomem(e);
out:
	for (size_t i = 0; n.f && i < (size_t)info->tp * (size_t)info->pp; i++) {
		if (n.f[i].open)
			tpc_ckpt_release(&n.f[i].ck);
		free(n.f[i].path);
	}
	free(n.f);
	free(n.s);
	free(o.t);
	free(o.buf);
	free(cpath);
	return ret;
}
