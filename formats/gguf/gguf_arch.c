/* gguf_arch.c - what convert_hf_to_gguf.py (llama.cpp 0.7) writes for a
 * Hugging Face model: general.* and {arch}.* keys (gguf_keys.c), then the
 * tokenizer's (gguf_vocab.c), and the tensor list in the reference's order.
 *
 * Sources (Debian's llama.cpp-tools 0.7.0): conversion/base.py (ModelBase:
 * index_tensors, prepare_tensors, prepare_metadata; TextModel:
 * set_gguf_parameters), conversion/llama.py, qwen.py, gemma.py, phi.py,
 * gpt2.py, gptneox.py; gguf-py metadata.py (general.name, size_label).
 *
 * The reference walks the tensors of each model part sorted by name, maps
 * each HF name to its GGUF name (here: the family records' TPC_ECO_GGUF
 * column), transforms some (Q/K rows back to Meta's interleaved rotary order
 * for the llama architecture, Gemma's norms + 1, GPT-2's Conv1D transposed,
 * GPT-NeoX's head-interleaved qkv regrouped) and stacks a layer's experts
 * once the last of them has come. What differs per family is data on its
 * record (the GGUF part, lib/tpc_family_gguf.h: keys as rules, transforms
 * as fields); code only where a value is computed.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gguf.h"
#include "gguf_arch_int.h"
#include "tpc_cast.h"
#include "tpc_cfg.h"
#include "tpc_facts.h"
#include "tpc_family.h"
#include "tpc_family_gguf.h"
#include "tpc_io.h"
#include "tpc_util.h"

/* ---- tensors ---- */

typedef struct tlist {
	tpc_gguf_wtensor *t;
	size_t n, cap;
	tpc_role *role; /* parallel to t: for the type rule */
} tlist;

static int tl_push(tlist *l, const char *name, tpc_tensor *t, tpc_role role, tpc_err *e)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		tpc_gguf_wtensor *nt = realloc(l->t, cap * sizeof(*nt));
		if (nt)
			l->t = nt;
		tpc_role *nr = nt ? realloc(l->role, cap * sizeof(*nr)) : NULL;
		if (!nr) {
			tpc_tensor_release(t);
			return tpc_err_nomem(e);
		}
		l->role = nr;
		l->cap = cap;
	}
	tpc_gguf_wtensor *w = &l->t[l->n];
	memset(w, 0, sizeof(*w));
	if (!(w->name = tpc_strdup(name))) {
		tpc_tensor_release(t);
		return tpc_err_nomem(e);
	}
	w->t = *t;
	w->type = TPC_GGML_F32;
	l->role[l->n++] = role;
	memset(t, 0, sizeof(*t));
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !memcmp(s + n - k, suffix, k);
}

/* prepare_tensors' type rule for one output tensor (base.py: a name ending
 * other than .weight, .lora_a or .lora_b is F32; an adapter's pairs go by
 * the outtype like weights) */
int tpc__gga_tensor_type(int ftype, tpc_role role, const tpc_gguf_wtensor *w)
{
	if (w->t.ndim <= 1 || ends_with(w->name, "_norm.weight") ||
	    !(ends_with(w->name, ".weight") || ends_with(w->name, ".lora_a") || ends_with(w->name, ".lora_b")) ||
	    role == TPC_ROLE_FFN_GATE_INP || role == TPC_ROLE_FFN_GATE_INP_SHEXP || role == TPC_ROLE_POS_EMBD ||
	    role == TPC_ROLE_SSM_CONV1D)
		return TPC_GGML_F32;
	switch (ftype) {
	case FT_ALL_F32:
		return TPC_GGML_F32;
	case FT_MOSTLY_BF16:
		return TPC_GGML_BF16;
	case FT_MOSTLY_Q8_0: /* gguf.quants refuses a row that is not whole blocks: F16 instead */
		return w->t.shape[w->t.ndim - 1] % 32 ? TPC_GGML_F16 : TPC_GGML_Q8_0;
	default:
		return TPC_GGML_F16;
	}
}

/* dst: src as F32 values computed here, read into *v (malloc'd; the
 * caller sets them and hands them to the tensor list) */
static int f32_values(const tpc_ckpt *ck, const tpc_tensor *src, tpc_tensor *dst, float **v, tpc_err *e)
{
	if (tpc_tensor_copy(dst, src))
		return tpc_err_nomem(e);
	dst->dtype = TPC_F32;
	dst->nbytes = dst->numel * 4;
	*v = dst->numel <= ((uint64_t)1 << 28) ? malloc(dst->nbytes ? dst->nbytes : 1) : NULL;
	if (!*v)
		return tpc_err_nomem(e);
	if (tpc_ckpt_read_out(ck, dst, 0, dst->nbytes, *v, e)) {
		free(*v);
		*v = NULL;
		return -1;
	}
	return 0;
}

/* Gemma's norm + 1, computed as the reference does: f16 stays f16 (the sum
 * rounded to f16), any other dtype goes through f32 */
static int norm_plus_one(const tpc_ckpt *ck, const tpc_tensor *src, tpc_tensor *dst, void **mem, tpc_err *e)
{
	float *v;
	if (f32_values(ck, src, dst, &v, e))
		return -1;
	for (uint64_t i = 0; i < dst->numel; i++)
		v[i] = src->dtype == TPC_F16 ? tpc_f16_to_f32(tpc_f32_to_f16(v[i] + 1.0f)) : v[i] + 1.0f;
	*mem = v;
	return 0;
}

static float pow2i(int q)
{
	uint32_t b = (uint32_t)(q + 0x7f) << 23;
	float f;
	memcpy(&f, &b, 4);
	return f;
}

float tpc__gguf_torch_expf(float d)
{
	/* SLEEF's xexpf (sleefsimdsp.c), each vmla an FMA as on AVX2/AVX512 */
	if (isnan(d))
		return d;
	int q = (int)nearbyintf(d * 1.442695040888963407359924681001892137426645954152985934135449406931f);
	float s = fmaf((float)q, -0.693145751953125f, d);
	s = fmaf((float)q, -1.428606765330187045e-06f, s);
	float u = 0.000198527617612853646278381f;
	u = fmaf(u, s, 0.00139304355252534151077271f);
	u = fmaf(u, s, 0.00833336077630519866943359f);
	u = fmaf(u, s, 0.0416664853692054748535156f);
	u = fmaf(u, s, 0.166666671633720397949219f);
	u = fmaf(u, s, 0.5f);
	u = 1.0f + fmaf(s * s, u, s);
	if (d < -104)
		return 0;
	if (d > 100)
		return INFINITY;
	return u * pow2i(q >> 1) * pow2i(q - (q >> 1)); /* vldexp2 */
}

/* Qwen3NextModel.modify_tensors' -torch.exp(A_log) as prepare_tensors hands
 * it the tensor: f16 stays f16 (torch computes in float and rounds to f16),
 * any other dtype is float32 first (norm_plus_one's rule); written F32 */
static int neg_exp(const tpc_ckpt *ck, const tpc_tensor *src, tpc_tensor *dst, void **mem, tpc_err *e)
{
	float *v;
	if (f32_values(ck, src, dst, &v, e))
		return -1;
	for (uint64_t i = 0; i < dst->numel; i++) {
		float x = -tpc__gguf_torch_expf(v[i]);
		v[i] = src->dtype == TPC_F16 ? tpc_f16_to_f32(tpc_f32_to_f16(x)) : x;
	}
	*mem = v;
	return 0;
}

/* GPT-NeoX's query_key_value: rows [heads, 3, hd] regrouped [3, heads, hd] */
static int neox_qkv(const tpc_tensor *src, int64_t heads, tpc_tensor *dst)
{
	tpc_tensor p[3];
	int ret = 0, k = 0;
	if (heads < 1 || src->ndim < 1 || src->shape[0] % (3 * heads))
		return -1;
	int64_t hd = src->shape[0] / (3 * heads);
	for (; k < 3 && !ret; k++)
		ret = tpc_tensor_ungroup(&p[k], src, 0, heads, 3 * hd, k * hd, hd);
	if (!ret)
		ret = tpc_tensor_init_cat(dst, p, 3, 0);
	for (int i = 0; i < k - (ret ? 1 : 0); i++)
		tpc_tensor_release(&p[i]);
	return ret;
}

/* Elements k, k + n, k + 2n ... of dim d of a plain view (a strided view:
 * gpt-oss's gate at even, up at odd columns) */
static int every_nth(tpc_tensor *dst, const tpc_tensor *src, int d, int k, int n)
{
	tpc_tensor t;
	if (src->ndim <= d || src->shape[d] % n || tpc_tensor_copy(&t, src))
		return -1;
	int ret = tpc_tensor_swap_dims(&t, 0, d) || tpc_tensor_rows_every(dst, &t, k, n, t.shape[0] / n) ? -1 : 0;
	tpc_tensor_release(&t);
	if (!ret && tpc_tensor_swap_dims(dst, 0, d)) {
		tpc_tensor_release(dst);
		ret = -1;
	}
	return ret;
}

typedef struct walk {
	conv *cv;
	const tpc_ckpt *ck;
	tlist out;
	uint64_t layers, n_exp, heads, kv_heads;
	int64_t *xidx;  /* [layer][3][expert] ck index, -1 */
	uint64_t *xgot; /* [layer] */
	const char *as; /* the tensor walked's name as the reference reads it (a
			 * multi-token-prediction tensor's decoder-layer name) */
} walk;

/* Mamba2Model.modify_tensors on one of the mixer's tensors: its values (as
 * F32, computed in the checkpoint's dtype as torch does for A) with the
 * shape llama.cpp reads */
static int mamba2_tensor(walk *w, const tpc_tensor *src, tpc_role role, tpc_tensor *dst, void **mem)
{
	const tpc_ckpt *ck = w->ck;
	int64_t shape[TPC_MAX_NDIM];
	int nd = 0;
	uint64_t groups = 0;
	if (src->numel > ((uint64_t)1 << 28) || src->dq)
		return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, src->name, "a Mamba-2 %s tpconv does not compute (%llu elements%s)",
				  tpc_role_name(role), (unsigned long long)src->numel, src->dq ? ", quantized" : "");
	if (role == TPC_ROLE_SSM_CONV1D) { /* torch's squeeze(): every dim of 1 dropped */
		for (int d = 0; d < src->ndim; d++)
			if (src->shape[d] != 1)
				shape[nd++] = src->shape[d];
	} else if (role == TPC_ROLE_SSM_NORM) {
		if (tpc__gk_cfg_req_u32(&w->cv->c, w->cv->spec->ssm_groups, &groups, w->cv->e))
			return -1;
		if (!groups || src->ndim != 1 || src->shape[0] % (int64_t)groups)
			return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, src->name, "not a vector of %llu groups (config.json's %s)",
					  (unsigned long long)groups, w->cv->spec->ssm_groups);
		shape[nd++] = (int64_t)groups;
		shape[nd++] = src->shape[0] / (int64_t)groups;
	} else { /* A and D: (*shape, 1) */
		if (src->ndim >= TPC_MAX_NDIM)
			return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, src->name, "too many dimensions");
		for (int d = 0; d < src->ndim; d++)
			shape[nd++] = src->shape[d];
		shape[nd++] = 1;
	}
	tpc_tensor t;
	if (tpc_tensor_copy(&t, src))
		return tpc_err_nomem(w->cv->e);
	t.dtype = TPC_F32;
	t.nbytes = t.numel * 4;
	float *v = malloc(t.nbytes ? t.nbytes : 1);
	int ret = v ? tpc_ckpt_read_out(ck, &t, 0, t.nbytes, v, w->cv->e) : tpc_err_nomem(w->cv->e);
	tpc_tensor_release(&t);
	for (uint64_t i = 0; !ret && role == TPC_ROLE_SSM_A && i < src->numel; i++) {
		float a = tpc__gguf_torch_expf(v[i]); /* -torch.exp(A_log) in A_log's dtype */
		a = src->dtype == TPC_BF16 ? tpc_bf16_to_f32(tpc_f32_to_bf16(a))
		    : src->dtype == TPC_F16 ? tpc_f16_to_f32(tpc_f32_to_f16(a)) : a;
		v[i] = -a;
	}
	if (!ret && tpc_tensor_init_zero(dst, TPC_F32, nd, shape))
		ret = tpc_err_nomem(w->cv->e);
	if (ret) {
		free(v);
		return ret;
	}
	dst->flags = 0;
	*mem = v;
	return 0;
}

/* members_product's twin below, for head_tile */
static int members_product(conv *cv, const char *names, uint64_t *u);

/* The record's head_tile of one tensor (src: its description, a depthwise
 * convolution already squeezed): its value heads grouped by key head
 * reordered tiled, as _LinearAttentionVReorderBase.modify_tensors does */
static int head_tile(walk *w, const tpc_tensor *src, const char *sname, const tpc_gguf_tile_row *tr, tpc_tensor *dst)
{
	const tpc_gguf_head_tile *ht = &w->cv->spec->head_tile;
	uint64_t groups = 0, heads = 0, span = 0;
	if (tpc__gk_cfg_req_u32(&w->cv->c, ht->groups, &groups, w->cv->e) ||
	    tpc__gk_cfg_req_u32(&w->cv->c, ht->heads, &heads, w->cv->e) || members_product(w->cv, tr->span, &span))
		return -1;
	int64_t n = tr->dim < src->ndim ? src->shape[tr->dim] : 0;
	if (!groups || !heads || heads % groups || span % heads || span > (uint64_t)n ||
	    tpc_tensor_tile_groups(dst, src, tr->dim, n - (int64_t)span, (int64_t)groups, (int64_t)(heads / groups),
				   (int64_t)(span / heads)))
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, sname,
				  "the last %llu entries of dim %d are not %llu heads grouped by %llu (config.json's %s, %s)%s",
				  (unsigned long long)span, tr->dim, (unsigned long long)heads, (unsigned long long)groups,
				  ht->heads, ht->groups, src->dq ? ": a quantized tensor's heads are not reordered by tpconv yet" : "");
	return 0;
}

/* One checkpoint tensor that is not an expert's: its description as the
 * reference writes it. */
static int single(walk *w, size_t i, const tpc_tensor_row *row, int64_t l, bool bias)
{
	const tpc_ckpt *ck = w->ck;
	const tpc_tensor *src = &ck->t[i];
	const tpc_gguf_arch *sp = w->cv->spec;
	const tpc_gguf_tile_row *tr = bias ? NULL : tpc_gguf_tile_of(sp, row->role);
	tpc_tensor t, tiled;
	void *mem = NULL;
	char name[256];
	int part, ret = 0;
	bool squeezed = false;
	memset(&t, 0, sizeof(t));
	memset(&tiled, 0, sizeof(tiled));
	if (!tpc_family_name(row, TPC_ECO_GGUF, l, -1, bias, name, sizeof(name), &part))
		return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, ck->t[i].name, "no GGUF name for this tensor (%s)",
				  tpc_role_name(row->role));
	if (tr) { /* heads tiled first: the reference's subclass reorders before its base transforms */
		tpc_tensor base;
		if (tpc_tensor_copy(&base, src))
			return tpc_err_nomem(w->cv->e);
		squeezed = sp->squeeze && row->role == sp->squeeze;
		if (squeezed && (base.ndim != 3 || tpc_tensor_unit_dim(&base, 1, false)))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, ck->t[i].name,
					 "not a depthwise convolution [channels, 1, kernel] (%d-D)", src->ndim);
		if (!ret)
			ret = head_tile(w, &base, ck->t[i].name, tr, &tiled);
		tpc_tensor_release(&base);
		if (ret)
			return ret;
		src = &tiled;
	}
	bool q = row->role == TPC_ROLE_ATTN_Q, k = row->role == TPC_ROLE_ATTN_K;
	if (sp->permute_qk && (q || k)) {
		if (tpc_tensor_rope_permute(&t, src, q ? (int64_t)w->heads : (int64_t)w->kv_heads, false))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, ck->t[i].name,
					 "%lld rows are not whole heads of even size (%llu heads)", (long long)src->shape[0],
					 (unsigned long long)(q ? w->heads : w->kv_heads));
	} else if (sp->neg_exp && row->role == sp->neg_exp && !bias) {
		ret = neg_exp(ck, src, &t, &mem, w->cv->e);
	} else if (sp->squeeze && row->role == sp->squeeze && !bias) {
		if (tpc_tensor_copy(&t, src))
			ret = tpc_err_nomem(w->cv->e);
		else if (!squeezed && (t.ndim != 3 || tpc_tensor_unit_dim(&t, 1, false)))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, ck->t[i].name,
					 "not a depthwise convolution [channels, 1, kernel] (%d-D)", src->ndim);
	} else if (sp->norm_plus_1 && ends_with(w->as, "norm.weight") && !(sp->norm_plain && row->role == sp->norm_plain)) {
		ret = norm_plus_one(ck, src, &t, &mem, w->cv->e);
	} else if (sp->mamba2 && !bias &&
		   (row->role == TPC_ROLE_SSM_CONV1D || row->role == TPC_ROLE_SSM_A || row->role == TPC_ROLE_SSM_D ||
		    row->role == TPC_ROLE_SSM_NORM)) {
		ret = mamba2_tensor(w, src, row->role, &t, &mem);
	} else if (sp->neox_qkv && row->role == TPC_ROLE_ATTN_QKV) {
		if (neox_qkv(src, (int64_t)w->heads, &t))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, ck->t[i].name,
					 "%lld rows are not 3 x %llu heads", src->ndim ? (long long)src->shape[0] : 0LL,
					 (unsigned long long)w->heads);
	} else if (tpc_tensor_copy(&t, src)) {
		ret = tpc_err_nomem(w->cv->e);
	} else if (row->hf_in_out && !bias && t.ndim >= 2) {
		/* gpt-oss's down_proj [E, I, H]: each expert's [in, out] transposed */
		if (tpc_tensor_swap_dims(&t, t.ndim - 2, t.ndim - 1))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, ck->t[i].name, "cannot transpose this tensor's experts%s",
					 ck->t[i].dq ? " once dequantized (without --dequantize MXFP4 blocks go to GGUF as MXFP4)" : "");
	} else if (w->cv->fam->conv1d && !bias && t.ndim == 2 && row->role != TPC_ROLE_TOKEN_EMBD &&
		   row->role != TPC_ROLE_POS_EMBD && row->role != TPC_ROLE_OUTPUT) {
		tpc_tensor_transpose2d(&t); /* GPT2Model.modify_tensors: Conv1D [in, out] */
	}
	if (!ret)
		ret = tl_push(&w->out, name, &t, row->role, w->cv->e);
	else
		tpc_tensor_release(&t);
	if (!ret && mem)
		w->out.t[w->out.n - 1].mem = mem;
	else
		free(mem);
	tpc_tensor_release(&tiled);
	return ret;
}

/* An expert's tensor: kept until the layer's last one, then the layer's
 * stacks in the family's order. */
static int expert(walk *w, size_t i, const tpc_tensor_row *row, int64_t l, int64_t x)
{
	const tpc_gguf_arch *sp = w->cv->spec;
	int k = 0;
	while (k < 3 && sp->experts[k] != row->role)
		k++;
	if (k == 3 || x < 0 || (uint64_t)x >= w->n_exp)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, w->ck->t[i].name,
				  "not an expert tensor the GGUF stacks (expert %lld of %llu)", (long long)x,
				  (unsigned long long)w->n_exp);
	int64_t *slot = &w->xidx[((uint64_t)l * 3 + (uint64_t)k) * w->n_exp + (uint64_t)x];
	if (*slot < 0)
		w->xgot[l]++;
	*slot = (int64_t)i;
	if (w->xgot[l] < 3 * w->n_exp)
		return 0;
	for (k = 0; k < 3; k++) {
		const tpc_tensor_row *r = tpc_family_row(w->cv->fam, sp->experts[k]);
		tpc_tensor *parts = tpc_calloc(w->n_exp, sizeof(*parts)), st;
		char name[256];
		int part, ret = parts ? 0 : tpc_err_nomem(w->cv->e);
		for (uint64_t e = 0; !ret && e < w->n_exp; e++)
			parts[e] = w->ck->t[w->xidx[((uint64_t)l * 3 + (uint64_t)k) * w->n_exp + e]];
		if (!ret && !tpc_family_name(r, TPC_ECO_GGUF, l, -1, false, name, sizeof(name), &part))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, w->ck->t[i].name, "no GGUF name for the %s stack",
					 tpc_role_name(sp->experts[k]));
		if (!ret && tpc_tensor_init_stack(&st, parts, (int)w->n_exp))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, name,
					 "layer %lld's experts differ in shape or dtype", (long long)l);
		free(parts); /* shallow copies of ck's tensors */
		if (!ret)
			ret = tl_push(&w->out, name, &st, r->role, w->cv->e);
		if (ret)
			return ret;
	}
	return 0;
}

static bool ends_with_at(const char *s, const char *suffix, size_t *stem)
{
	size_t n = strlen(s), k = strlen(suffix);
	if (n < k || memcmp(s + n - k, suffix, k))
		return false;
	*stem = n - k;
	return true;
}

/* dst: the n-th part's rows (dim d) of src, as hf_fused cuts the values:
 * every n-th row from k when interleaved, else the k-th equal slice */
static int part_rows(tpc_tensor *dst, const tpc_tensor *src, int d, int k, int n, bool interleaved)
{
	if (n == 1)
		return tpc_tensor_copy(dst, src);
	return interleaved ? every_nth(dst, src, d, k, n) : tpc_tensor_narrow(dst, src, d, k * (src->shape[d] / n), src->shape[d] / n);
}

/* GptOssModel.generate_extra_tensors for one X_scales (the record's
 * mxfp4_blocks): X_blocks U8 [E, R, G, 16] and X_scales [E, R, G] (rows
 * dim 1 when the row stacks its experts, else dim 0) become GGUF MXFP4 [E,
 * R, G * 32], one tensor per part of a fused X (its rows cut as hf_fused
 * cuts the values), each a description of E2M1 pairs and E8M0 scales (a
 * TPC_DQ_FP4 with fp4_mx whose values nothing reads: the writer repacks the
 * bytes, tpc_ggml_mxfp4_from_pairs). The reference trusts the shapes; here
 * they are checked, the tensor named. */
static int mx_tensor(walk *w, size_t is, size_t stem)
{
	const tpc_ckpt *ck = w->ck;
	const tpc_tensor *s = &ck->t[is];
	char base[512], bname[520], s1[128], s2[128];
	if (stem >= sizeof(base))
		return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, s->name, "name too long");
	memcpy(base, s->name, stem);
	base[stem] = 0;
	snprintf(bname, sizeof(bname), "%s_blocks", base);
	int64_t ib = tpc_ckpt_find(ck, bname);
	if (ib < 0)
		return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, s->name, "MXFP4 scales without their blocks tensor '%s'", bname);
	const tpc_tensor *b = &ck->t[ib];
	int64_t l = -1, x = -1;
	bool bias = false;
	const tpc_tensor_row *row = tpc_family_classify(w->cv->fam, TPC_ECO_HF, base, &l, &x, &bias);
	if (!row || bias || !row->name[TPC_ECO_GGUF] || x >= 0)
		return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, s->name,
				  "convert_hf_to_gguf.py has no GGUF name for the MXFP4 tensor '%s' of a %s model", base,
				  w->cv->spec->hf_arch[0]);
	if (l >= 0 && (uint64_t)l >= w->layers)
		return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, s->name, "layer %lld, but config.json has %llu layers", (long long)l,
				  (unsigned long long)w->layers);
	int d = tpc_family_stacked(row, TPC_ECO_HF) ? 1 : 0;
	if (b->src_dtype != TPC_U8 || b->ndim != d + 3 || b->shape[d + 2] != 16 || b->dq || b->nparts ||
	    (b->flags & (TPC_TF_NODATA | TPC_TF_QUANTIZED)))
		return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, b->name, "MXFP4 blocks must be U8 [%srows, blocks, 16], not %s %s",
				  d ? "experts, " : "", tpc_dtype_name(b->src_dtype), tpc_shape_str(b, s1, sizeof(s1)));
	bool same = s->ndim == d + 2;
	for (int k = 0; same && k < d + 2; k++)
		same = s->shape[k] == b->shape[k];
	if ((s->src_dtype != TPC_U8 && s->src_dtype != TPC_F8_E8M0) || !same || s->dq || s->nparts ||
	    (s->flags & (TPC_TF_NODATA | TPC_TF_QUANTIZED)))
		return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, s->name,
				  "MXFP4 scales must be U8 (E8M0), one per block of '%s' %s: its shape without the last dim; they are %s %s",
				  b->name, tpc_shape_str(b, s1, sizeof(s1)), tpc_dtype_name(s->src_dtype), tpc_shape_str(s, s2, sizeof(s2)));
	if (d && (uint64_t)b->shape[0] != w->n_exp)
		return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, b->name, "%lld experts, but config.json has %llu",
				  (long long)b->shape[0], (unsigned long long)w->n_exp);
	const tpc_tensor_row *parts[TPC_ROLE_COUNT];
	int n = 1;
	if (strchr(row->name[TPC_ECO_HF], '#'))
		n = tpc_family_parts(w->cv->fam, row, TPC_ECO_HF, parts, TPC_ROLE_COUNT);
	else
		parts[0] = row;
	if (n < 1 || b->shape[d] % n)
		return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, b->name, "%lld rows are not %d equal parts", (long long)b->shape[d], n);
	int ret = 0;
	for (int k = 0; k < n && !ret; k++) {
		char name[256];
		int part;
		tpc_tensor t;
		/* [E, R / n, G * 32] (d 1) or [R / n, G * 32] */
		int64_t shp[3] = {d ? b->shape[0] : b->shape[0] / n, d ? b->shape[1] / n : b->shape[1] * 32, b->shape[2] * 32};
		tpc_dequant *dq = tpc_dequant_new(TPC_DQ_NC, false);
		if (!dq)
			return tpc_err_nomem(w->cv->e);
		dq->kind = TPC_DQ_FP4;
		dq->fp4_mx = true;
		dq->group = 32;
		if (!tpc_family_name(parts[k], TPC_ECO_GGUF, l, -1, false, name, sizeof(name), &part) || part >= 0) {
			free(dq);
			return tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, s->name, "no GGUF name for part %d of '%s' (%s)", k, base,
					  tpc_role_name(parts[k]->role));
		}
		if (part_rows(&dq->c[0], b, d, k, n, row->hf_interleaved) ||
		    (dq->nc = 1, part_rows(&dq->c[1], s, d, k, n, row->hf_interleaved)) ||
		    (dq->nc = 2, tpc_tensor_init_zero(&t, TPC_F32, d + 2, shp))) {
			for (int c = 0; c < dq->nc; c++)
				tpc_tensor_release(&dq->c[c]);
			free(dq);
			return tpc_err_nomem(w->cv->e);
		}
		t.flags = 0;
		t.dq = dq;
		if (!(ret = tl_push(&w->out, name, &t, parts[k]->role, w->cv->e)))
			w->out.t[w->out.n - 1].type = TPC_GGML_MXFP4;
	}
	return ret;
}

/* A tensor the Hugging Face checkpoint fuses itself (its name "#K" in the
 * table: Granite-MoE's input_linear [E, 2I, H], gate then up): one GGUF
 * tensor per part, in K order, each an equal slice of the rows (of every
 * expert's rows when it stacks them: dim 1), as GraniteMoeModel.modify_tensors
 * splits it; a row stored [in, out] (hf_in_out: gpt-oss's gate_up_proj [E,
 * H, 2I]) transposed first, parts that interleave (hf_interleaved) taken as
 * every n-th row, and a fused bias ([E, 2I], a row with a bias) the same
 * way, as GptOssModel.modify_tensors. Views: no byte copied. */
static int hf_fused(walk *w, size_t i, const tpc_tensor_row *row, int64_t l, bool bias)
{
	const tpc_tensor *src = &w->ck->t[i];
	const tpc_tensor_row *parts[TPC_ROLE_COUNT];
	int n = tpc_family_parts(w->cv->fam, row, TPC_ECO_HF, parts, TPC_ROLE_COUNT), d = tpc_family_stacked(row, TPC_ECO_HF);
	if ((bias && !row->bias) || n < 2 || src->ndim <= d || src->shape[d] % n)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name,
				  "a fused tensor whose %d parts are not equal slices of dim %d%s", n, d,
				  bias ? " (a fused bias: not written by tpconv yet)" : "");
	tpc_tensor base;
	if (tpc_tensor_copy(&base, src))
		return tpc_err_nomem(w->cv->e);
	if (row->hf_in_out && !bias && (base.ndim < 2 || tpc_tensor_swap_dims(&base, base.ndim - 2, base.ndim - 1))) {
		tpc_tensor_release(&base);
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "cannot transpose this tensor's experts%s",
				  src->dq ? " once dequantized (without --dequantize MXFP4 blocks go to GGUF as MXFP4)" : "");
	}
	int64_t len = base.shape[d] / n;
	int ret = 0;
	for (int k = 0; k < n && !ret; k++) {
		char name[256];
		int part;
		tpc_tensor t;
		if (!tpc_family_name(parts[k], TPC_ECO_GGUF, l, -1, bias, name, sizeof(name), &part) || part >= 0)
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "no GGUF name for part %d of this tensor (%s)",
					 k, tpc_role_name(parts[k]->role));
		else if (row->hf_interleaved ? every_nth(&t, &base, d, k, n) : tpc_tensor_narrow(&t, &base, d, k * len, len))
			ret = tpc_err_nomem(w->cv->e);
		else
			ret = tl_push(&w->out, name, &t, parts[k]->role, w->cv->e);
	}
	tpc_tensor_release(&base);
	return ret;
}

/* A tensor the GGUF holds as two, split per head (the record's head_split:
 * DeepSeek's kv_b_proj as attn_k_b and attn_v_b): descriptions, no byte
 * copied. */
static int head_split(walk *w, size_t i, const tpc_tensor_row *row, int64_t l, bool bias)
{
	const tpc_gguf_head_split *hs = &w->cv->spec->head_split;
	const tpc_tensor *src = &w->ck->t[i];
	uint64_t heads = 0, a = 0, b = 0;
	tpc_tensor p[2];
	if (bias)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "a bias split per head is not written by tpconv yet");
	if (tpc__gk_cfg_req_u32(&w->cv->c, hs->heads, &heads, w->cv->e) || tpc__gk_cfg_req_u32(&w->cv->c, hs->rows[0], &a, w->cv->e) ||
	    tpc__gk_cfg_req_u32(&w->cv->c, hs->rows[1], &b, w->cv->e))
		return -1;
	/* the reference asserts heads * (rows0 + rows1) rows */
	if (src->ndim != 2 || src->shape[0] < 0 || (uint64_t)src->shape[0] != heads * (a + b) || src->dq ||
	    tpc_tensor_split_heads(&p[0], &p[1], src, (int64_t)heads, (int64_t)a, hs->transpose0))
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name,
				  "not %llu heads of %s + %s = %llu rows (config.json's %s)", (unsigned long long)heads,
				  hs->rows[0], hs->rows[1], (unsigned long long)(a + b), hs->heads);
	int ret = 0, k = 0;
	for (; k < 2 && !ret; k++) {
		tpc_tensor_row part = {.role = row->role};
		char name[256];
		int fused;
		part.name[TPC_ECO_GGUF] = hs->name[k];
		if (tpc_family_name(&part, TPC_ECO_GGUF, l, -1, false, name, sizeof(name), &fused)) {
			ret = tl_push(&w->out, name, &p[k], row->role, w->cv->e); /* takes p[k] either way */
		} else {
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "no GGUF name for part %d of this tensor", k);
			tpc_tensor_release(&p[k]);
		}
	}
	for (; k < 2; k++) /* the parts not pushed */
		tpc_tensor_release(&p[k]);
	return ret;
}

/* rows of a group_split part: config.json's members multiplied */
static int members_product(conv *cv, const char *names, uint64_t *u)
{
	return tpc__gk_sum_members(cv, names, '*', u);
}

/* A tensor the GGUF holds as two, its grouped rows gathered (the record's
 * group_split: Qwen3-Next's in_proj_qkvz as attn_qkv and attn_gate):
 * descriptions, no byte copied. */
static int group_split(walk *w, size_t i, const tpc_tensor_row *row, int64_t l, bool bias)
{
	const tpc_gguf_group_split *gs = &w->cv->spec->group_split;
	const tpc_tensor *src = &w->ck->t[i];
	uint64_t groups = 0, rows[4] = {0}, per = 0;
	int np = 0;
	if (bias)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "a bias of grouped rows is not written by tpconv yet");
	if (tpc__gk_cfg_req_u32(&w->cv->c, gs->groups, &groups, w->cv->e))
		return -1;
	for (; np < 4 && gs->rows[np]; np++) {
		if (members_product(w->cv, gs->rows[np], &rows[np]))
			return -1;
		if (!groups || rows[np] % groups)
			return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "%s (%llu) is not whole groups of %s (%llu)",
					  gs->rows[np], (unsigned long long)rows[np], gs->groups, (unsigned long long)groups);
		per += rows[np] / groups;
	}
	if (src->ndim != 2 || src->dq || src->shape[0] < 0 || (uint64_t)src->shape[0] != groups * per)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "not %llu groups of %llu rows (config.json's %s)",
				  (unsigned long long)groups, (unsigned long long)per, gs->groups);
	tpc_tensor p[4];
	int made = 0, ret = 0;
	uint64_t off = 0;
	for (; made < np && !ret; made++) {
		int64_t len = (int64_t)(rows[made] / groups);
		if (tpc_tensor_ungroup(&p[made], src, 0, (int64_t)groups, (int64_t)per, (int64_t)off, len))
			ret = tpc_err_nomem(w->cv->e);
		off += (uint64_t)len;
	}
	if (ret)
		made--;
	for (int k = 0; k < 2 && !ret; k++) {
		tpc_tensor_row part = {.role = row->role};
		tpc_tensor t;
		char name[256];
		int fused, a = k ? gs->first : 0, n = k ? np - gs->first : gs->first;
		part.name[TPC_ECO_GGUF] = gs->name[k];
		if (n < 1 || !tpc_family_name(&part, TPC_ECO_GGUF, l, -1, false, name, sizeof(name), &fused))
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "no GGUF name for part %d of this tensor", k);
		else if (tpc_tensor_init_cat(&t, &p[a], n, 0))
			ret = tpc_err_nomem(w->cv->e);
		else
			ret = tl_push(&w->out, name, &t, row->role, w->cv->e);
	}
	for (int k = 0; k < made; k++)
		tpc_tensor_release(&p[k]);
	return ret;
}

/* index_tensors: each part file's tensors sorted by name, parts in name order */
typedef struct order_key {
	const char *file, *name;
	size_t i;
} order_key;

static int by_file_then_name(const void *a, const void *b)
{
	const order_key *x = a, *y = b;
	int c = strcmp(x->file, y->file);
	return c ? c : strcmp(x->name, y->name);
}

static bool skipped(const tpc_gguf_arch *sp, const char *name)
{
	/* prepare_tensors drops these buffers; GPT-2's attn.bias too (its
	 * causal mask, not a weight) */
	return ends_with(name, ".attention.masked_bias") || ends_with(name, ".attention.bias") ||
	       ends_with(name, ".rotary_emb.inv_freq") || ends_with(name, ".attn.bias") ||
	       ends_with(name, ".attn.masked_bias") || (sp->no_lm_head && !strcmp(name, "lm_head.weight"));
}

/* The decoder layers' prefix of a record's mtp_count layers (Glm4MoeModel's
 * re.match(r"model\.layers\.(\d+)\.", name)) */
static const char mtp_decoder[] = "model.layers.";

/* A tensor of a layer past config.json's count the record leaves out
 * (past_layers, the reference's re.match(r"model.layers.(\d+)", name)), or
 * one of the multi-token-prediction layers --no-mtp leaves out (the record's
 * mtp_count layers, the family's mtp.* block: filter_tensors under no_mtp) */
static bool past_layer(const walk *w, const char *name)
{
	const conv *cv = w->cv;
	const char *pre = cv->spec->past_layers ? cv->spec->past_layers
			  : cv->no_mtp && cv->spec->mtp_count ? mtp_decoder : NULL;
	size_t n = pre ? strlen(pre) : 0;
	uint64_t l = 0;
	if (cv->no_mtp && cv->fam->mtp && !strncmp(name, cv->fam->mtp->prefix, strlen(cv->fam->mtp->prefix)))
		return true;
	if (!pre || strncmp(name, pre, n) || name[n] < '0' || name[n] > '9')
		return false;
	for (const char *p = name + n; *p >= '0' && *p <= '9' && l <= w->layers; p++)
		l = l * 10 + (uint64_t)(*p - '0');
	return l >= w->layers;
}

static int walk_one(walk *w, size_t i)
{
	const tpc_tensor *src = &w->ck->t[i];
	int64_t l = -1, x = -1;
	bool bias = false;
	char as[512];
	/* _QwenMtpMixin.filter_tensors: mtp.* as layers past num_hidden_layers */
	w->as = w->cv->mtp && tpc_family_mtp_as_layer(w->cv->fam, src->name, (int64_t)(w->layers - w->cv->mtp), as, sizeof(as))
			? as : src->name;
	const tpc_tensor_row *row = tpc_family_classify(w->cv->fam, TPC_ECO_HF, w->as, &l, &x, &bias);
	if (row && w->cv->spec->head_split.role && row->role == w->cv->spec->head_split.role &&
	    (l < 0 || (uint64_t)l < w->layers))
		return head_split(w, i, row, l, bias);
	if (row && w->cv->spec->group_split.role && row->role == w->cv->spec->group_split.role &&
	    (l < 0 || (uint64_t)l < w->layers))
		return group_split(w, i, row, l, bias);
	if (!row || !row->name[TPC_ECO_GGUF])
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name,
				  "convert_hf_to_gguf.py has no GGUF name for this tensor of a %s model", w->cv->spec->hf_arch[0]);
	if (l >= 0 && (uint64_t)l >= w->layers)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name,
				  "layer %lld, but config.json has %llu layers", (long long)l, (unsigned long long)w->layers);
	if (strchr(row->name[TPC_ECO_HF], '#'))
		return hf_fused(w, i, row, l, bias);
	bool stacked = strstr(row->name[TPC_ECO_HF], "{E}") && !strstr(row->name[TPC_ECO_GGUF], "{E}");
	if (stacked && !bias)
		return expert(w, i, row, l, x);
	if (stacked)
		return tpc_err_at(w->cv->e, TPC_EINPUT, w->ck->path, src->name, "expert biases are not stacked by tpconv yet");
	return single(w, i, row, l, bias);
}

/* The source file a tensor's bytes come from: a computed tensor's (a
 * dequantized or LoRA-merged weight) is its first companion's, a composite's
 * its first part's, so it keeps its place in its file's order. -1: none. */
static int home_src(const tpc_tensor *t)
{
	while (t->src < 0 && (t->dq || t->nparts))
		t = t->dq ? &t->dq->c[0] : &t->parts[0];
	return t->src;
}

static int walk_tensors(walk *w)
{
	const tpc_ckpt *ck = w->ck;
	int ret = 0;
	order_key *ord = tpc_calloc(ck->n ? ck->n : 1, sizeof(*ord));
	if (!ord)
		return tpc_err_nomem(w->cv->e);
	for (size_t i = 0; i < ck->n; i++) {
		/* a merged set's or a sharded save's rank files are not the model's files: one file */
		int hs = home_src(&ck->t[i]);
		const char *f = hs >= 0 && !ck->rank_sources ? ck->src[hs].path : NULL;
		ord[i] = (order_key){f ? f : "", ck->t[i].name, i};
	}
	qsort(ord, ck->n, sizeof(*ord), by_file_then_name);
	/* GptOssModel.generate_extra_tensors: the MXFP4 tensors first, each at its
	 * X_scales; modify_tensors then writes nothing for X_blocks / X_scales */
	size_t stem;
	for (size_t k = 0; w->cv->mxfp4 && k < ck->n && !ret; k++)
		if (ends_with_at(ord[k].name, "_scales", &stem) && !past_layer(w, ord[k].name))
			ret = mx_tensor(w, ord[k].i, stem);
	for (size_t k = 0; k < ck->n && !ret; k++) {
		if (skipped(w->cv->spec, ord[k].name) || past_layer(w, ord[k].name) ||
		    (w->cv->mxfp4 && ends_with_at(ord[k].name, "_scales", &stem)))
			continue;
		if (w->cv->mxfp4 && ends_with_at(ord[k].name, "_blocks", &stem)) {
			char sn[520];
			snprintf(sn, sizeof(sn), "%.*s_scales", (int)(stem < 500 ? stem : 500), ord[k].name);
			if (tpc_ckpt_find(ck, sn) < 0)
				ret = tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, ord[k].name, "MXFP4 blocks without their _scales tensor");
			continue;
		}
		ret = walk_one(w, ord[k].i);
	}
	for (uint64_t l = 0; !ret && w->xgot && l < w->layers; l++)
		if (w->xgot[l] && w->xgot[l] < 3 * w->n_exp)
			ret = tpc_err_at(w->cv->e, TPC_EINPUT, ck->path, NULL,
					 "layer %llu has %llu of its %llu expert tensors", (unsigned long long)l,
					 (unsigned long long)w->xgot[l], (unsigned long long)(3 * w->n_exp));
	free(ord);
	return ret;
}

/* a tensor of n F32 values computed here (v, taken, freed on error) */
static int push_mem(walk *w, const char *name, float *v, int64_t n)
{
	tpc_tensor rt;
	if (tpc_tensor_init_zero(&rt, TPC_F32, 1, &n)) {
		free(v);
		return tpc_err_nomem(w->cv->e);
	}
	rt.flags = 0;
	if (tl_push(&w->out, name, &rt, TPC_ROLE_NONE, w->cv->e)) {
		free(v);
		return -1;
	}
	w->out.t[w->out.n - 1].mem = v;
	return 0;
}

/* a number of the rope parameters, or dflt when absent */
static double rope_num(const cfg *c, const char *name, double dflt)
{
	const cJSON *v = tpc__gk_rope_member(c, name);
	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* LlamaModel.generate_extra_tensors for rope_type llama3: rope_freqs.weight,
 * F32 [head_dim / 2], the first tensor. Each step as torch computes it in
 * F32: a Python scalar joins an F32 tensor as an F32, `x / t` is
 * t.reciprocal() * x, the power is rounded once from double (torch's own
 * pow is within an ulp of it; exact for the tiny fixture's). */
static int rope_freqs(walk *w)
{
	const cfg *c = &w->cv->c;
	const cJSON *t = tpc__gk_rope_member(c, "rope_type");
	char tl[16] = "";
	for (size_t i = 0; cJSON_IsString(t) && t->valuestring[i] && i + 1 < sizeof(tl); i++)
		tl[i] = (char)tolower((unsigned char)t->valuestring[i]);
	if (!w->cv->spec->rope_freqs || strcmp(tl, "llama3"))
		return 0;
	uint64_t dim = 0, h = 0, heads = 0;
	const cJSON *hd = tpc__gk_cfg_get(c, "head_dim");
	if (hd && !cJSON_IsNull(hd) ? tpc__gk_cfg_u32(c, hd, "head_dim", &dim, w->cv->e)
				    : tpc__gk_two_u32(c, "hidden_size", "num_attention_heads", &h, &heads, w->cv->e))
		return -1;
	if (!hd || cJSON_IsNull(hd))
		dim = h / heads;
	if (dim < 2 || dim > 65536)
		return tpc__gk_cfg_err(c, w->cv->e, "config.json: a head_dim of %s cannot take llama3 rope factors", "that size");
	float base = (float)rope_num(c, "rope_theta", 10000.0), factor = (float)rope_num(c, "factor", 8.0);
	double lff = rope_num(c, "low_freq_factor", 1.0), hff = rope_num(c, "high_freq_factor", 4.0);
	double ctx = rope_num(c, "original_max_position_embeddings", 8192);
	float lo_wl = (float)(ctx / lff), hi_wl = (float)(ctx / hff), two_pi = (float)(2 * M_PI);
	int64_t n = (int64_t)((dim + 1) / 2);
	float *v = malloc((size_t)n * sizeof(float));
	if (!v)
		return tpc_err_nomem(w->cv->e);
	for (int64_t i = 0; i < n; i++) {
		float x = (float)(2 * i) / (float)dim;
		float fr = 1.0f / (float)pow((double)base, (double)x);
		float wl = (1.0f / fr) * two_pi;
		if (wl < hi_wl) {
			v[i] = 1.0f;
		} else if (wl > lo_wl) {
			v[i] = factor;
		} else {
			float sm = ((1.0f / wl) * (float)ctx - (float)lff) / (float)(hff - lff);
			v[i] = 1.0f / ((1.0f - sm) / factor + sm);
		}
	}
	return push_mem(w, "rope_freqs.weight", v, n);
}

/* Phi3MiniModel.generate_extra_tensors: with a long_factor, the attention
 * factor (a key the caller writes after general.architecture, where the
 * reference's prepare_tensors put it) and rope_factors_long / _short */
static int phi3_factors(walk *w)
{
	const cfg *c = &w->cv->c;
	const cJSON *lf = tpc__gk_rope_member(c, "long_factor"), *sf = tpc__gk_rope_member(c, "short_factor"),
		    *t = tpc__gk_rope_member(c, "rope_type");
	uint64_t h = 0, heads = 0, mx = 0, orig = 0;
	char buf[64];
	if (!w->cv->spec->rope_factors || !cJSON_IsArray(lf) || !cJSON_GetArraySize(lf))
		return 0;
	const char *ty = cJSON_IsString(t) ? t->valuestring : "";
	if (tpc__gk_two_u32(c, "hidden_size|n_embd", "num_attention_heads|n_head", &h, &heads, w->cv->e) ||
	    tpc__gk_cfg_req_u32(c, "n_positions|max_position_embeddings", &mx, w->cv->e))
		return -1;
	const cJSON *o = tpc__gk_rope_member(c, "original_max_position_embeddings");
	if (!o || tpc__gk_cfg_u32(c, o, "original_max_position_embeddings", &orig, w->cv->e) || !orig)
		return o ? -1 : tpc__gk_cfg_err(c, w->cv->e, "config.json has no %s", "original_max_position_embeddings");
	double scale = (double)mx / (double)orig;
	if (!strcasecmp(ty, "su") || !strcasecmp(ty, "longrope"))
		w->cv->attn_factor = scale > 1.0 ? sqrt(1 + log(scale) / log((double)orig)) : 1.0;
	else if (!strcasecmp(ty, "yarn"))
		w->cv->attn_factor = scale > 1.0 ? 0.1 * log(scale) + 1.0 : 1.0;
	else
		return tpc__gk_cfg_err(c, w->cv->e, "config.json: rope_type '%s' with long_factor is not one Phi-3 takes", ty);
	w->cv->has_attn = true;
	double pct = rope_num(c, "partial_rotary_factor", 1.0);
	int64_t dims = (int64_t)(uint64_t)(pct * (double)h) / (int64_t)heads, n = cJSON_GetArraySize(lf);
	if (!cJSON_IsArray(sf) || cJSON_GetArraySize(sf) != n || 2 * n != dims)
		return tpc__gk_cfg_err(c, w->cv->e, "config.json: rope long_factor and short_factor must have %s entries each",
			       (snprintf(buf, sizeof(buf), "%lld", (long long)(dims / 2)), buf));
	for (int k = 0; k < 2; k++) {
		const cJSON *a = k ? sf : lf, *x;
		float *v = malloc((size_t)n * sizeof(float));
		int64_t i = 0;
		if (!v)
			return tpc_err_nomem(w->cv->e);
		cJSON_ArrayForEach(x, a) {
			if (!cJSON_IsNumber(x)) {
				free(v);
				return tpc__gk_cfg_err(c, w->cv->e, "config.json: rope %s holds a non-number", k ? "short_factor" : "long_factor");
			}
			v[i++] = (float)x->valuedouble;
		}
		if (push_mem(w, k ? "rope_factors_short.weight" : "rope_factors_long.weight", v, n))
			return -1;
	}
	return 0;
}

/* ModelBase.__init__ for --outtype auto: the first tensor of two or more
 * dimensions decides (bf16 -> bf16, f16 -> f16), else f16 */
static int guess_ftype(const tpc_ckpt *ck, const tpc_gguf_arch *sp)
{
	const tpc_tensor *first = NULL;
	for (size_t i = 0; i < ck->n; i++) {
		const tpc_tensor *t = &ck->t[i];
		if (t->ndim < 2 || (sp->no_lm_head && !strcmp(t->name, "lm_head.weight")))
			continue;
		bool own = !ck->rank_sources; /* as walk_tensors: a merged set is one file */
		const char *f = own && t->src >= 0 ? ck->src[t->src].path : "",
			   *g = own && first && first->src >= 0 ? ck->src[first->src].path : "";
		int c = first ? strcmp(f ? f : "", g ? g : "") : -1;
		if (!first || c < 0 || (!c && strcmp(t->name, first->name) < 0))
			first = t;
	}
	if (first && first->dtype == TPC_BF16)
		return FT_MOSTLY_BF16;
	return FT_MOSTLY_F16;
}

static int parse_outtype(const char *outtype, const tpc_ckpt *ck, const tpc_gguf_arch *sp, int *ft, tpc_err *e)
{
	static const struct { const char *name; int ft; } t[] = {
		{"f32", FT_ALL_F32}, {"f16", FT_MOSTLY_F16}, {"bf16", FT_MOSTLY_BF16}, {"q8_0", FT_MOSTLY_Q8_0},
	};
	if (!outtype || !strcmp(outtype, "auto")) {
		*ft = guess_ftype(ck, sp);
		return 0;
	}
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(outtype, t[i].name)) {
			*ft = t[i].ft;
			return 0;
		}
	char safe[64];
	tpc_sanitize(safe, sizeof(safe), outtype);
	return tpc_err_set(e, TPC_EUSAGE, "--outtype '%s': %s%s", safe, tpc_gguf_outtypes(),
				   tpc_gguf_outtype_note(outtype));
}

/* what AutoConfig's to_dict() holds for head_dim when config.json has none */
static int default_head_dim(cfg *c, int dflt, tpc_err *e)
{
	cJSON *o = (cJSON *)(c->text ? c->text : c->root), *v = cJSON_GetObjectItemCaseSensitive(o, "head_dim");
	uint64_t h = 0, heads = 0;
	if (v && !cJSON_IsNull(v))
		return 0;
	if (dflt < 0 && tpc__gk_two_u32(c, "hidden_size", "num_attention_heads", &h, &heads, e))
		return -1;
	cJSON_DeleteItemFromObjectCaseSensitive(o, "head_dim");
	return cJSON_AddNumberToObject(o, "head_dim", dflt < 0 ? (double)(h / heads) : dflt) ? 0 : tpc_err_nomem(e);
}

static int load_config(const char *dir, cfg *c, const tpc_family **fam, tpc_err *e)
{
	char *path = dir ? tpc_path_join(dir, "config.json") : NULL;
	int ret = 0;
	if (!dir)
		return tpc_err_set(e, TPC_EUSAGE, "a GGUF needs the model folder (config.json) to write its metadata");
	if (!path)
		return tpc_err_nomem(e);
	c->path = path;
	if ((ret = tpc_cfg_from_file(&c->doc, path, e)))
		return ret;
	c->root = (cJSON *)tpc_cfg_root(c->doc);
	c->text = tpc_cfg_text(c->doc);
	c->rope = tpc_cfg_rope(c->doc, TPC_CFG_TEXT);
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(c->root, "architectures");
	const char *arch = cJSON_IsArray(a) && cJSON_IsString(a->child) ? a->child->valuestring : NULL;
	int64_t experts = tpc__gk_cfg_int_or(c, "num_local_experts", tpc__gk_cfg_int_or(c, "num_experts", tpc__gk_cfg_int_or(c, "n_routed_experts", -1)));
	*fam = tpc_family_by_gguf_hf_experts(arch, experts);
	if (*fam && (*fam)->gguf->head_dim)
		return default_head_dim(c, (*fam)->gguf->head_dim, e);
	if (!*fam) {
		char safe[160], list[512];
		tpc_sanitize(safe, sizeof(safe), arch ? arch : "(none)");
		tpc_family_gguf_list(true, list, sizeof(list));
		return tpc_err_at(e, TPC_EINPUT, c->path, NULL,
				  "config.json: architecture '%s' is not one tpconv writes GGUF for (%s)", safe, list);
	}
	return 0;
}

int tpc__gga_load_config(const char *dir, cfg *c, const tpc_family **fam, tpc_err *e)
{
	return load_config(dir, c, fam, e);
}

/* The layers the GGUF holds: its block_count rule's value (Glm4MoeModel
 * counts the next-token-prediction layers too), else config.json's */
static int block_count(conv *cv, uint64_t *n)
{
	bool put = false;
	double f = 0;
	for (const tpc_gguf_kv_rule *r = cv->spec->kv; r->how != TPC_KH_END; r++)
		if (!strcmp(r->key, "block_count")) {
			if (tpc__gk_rule_eval(cv, r, &put, n, &f))
				return -1;
			if (put)
				return 0;
			break;
		}
	return tpc__gk_cfg_req_u32(&cv->c, "n_layers|num_hidden_layers|n_layer|num_layers", n, cv->e);
}

/* The record's multi-token-prediction layers (_QwenMtpMixin.__init__):
 * config.json's count member when above 0, else the checkpoint's (an
 * mtp_count member: config.json's alone, absent 0, Glm4MoeModel's
 * hparams.get(..., 0)); none with --no-mtp, which a record without such
 * layers refuses (convert_hf_to_gguf.py: "--mtp / --no-nextn are not
 * supported for" a class without supports_mtp_export) */
static int mtp_layers(conv *cv, const tpc_ckpt *ck)
{
	if (cv->no_mtp && !tpc_gguf_arch_has_mtp(cv->fam))
		return tpc_err_at(cv->e, TPC_EINPUT, cv->c.path, NULL,
				  "--no-mtp: a %s GGUF holds no multi-token-prediction layers to leave out "
				  "(convert_hf_to_gguf.py refuses --no-mtp for it too)", cv->spec->hf_arch[0]);
	if (cv->no_mtp || !tpc_gguf_arch_has_mtp(cv->fam))
		return 0;
	const char *m = cv->fam->mtp ? cv->fam->mtp->count : cv->spec->mtp_count;
	const cJSON *v = m ? tpc__gk_cfg_get(&cv->c, m) : NULL;
	if (v && !cJSON_IsNull(v) && tpc__gk_cfg_u32(&cv->c, v, m, &cv->mtp, cv->e))
		return -1;
	if (!cv->mtp && cv->fam->mtp)
		cv->mtp = (uint64_t)tpc_family_mtp_count(cv->fam, ck);
	return 0;
}

static int walk_init(walk *w, conv *cv, const tpc_ckpt *ck)
{
	const cfg *c = &cv->c;
	char buf[64];
	memset(w, 0, sizeof(*w));
	w->cv = cv;
	w->ck = ck;
	if (block_count(cv, &w->layers) || tpc__gk_cfg_req_u32(c, "n_heads|num_attention_heads|n_head", &w->heads, cv->e))
		return -1;
	w->kv_heads = w->heads;
	const cJSON *v = tpc__gk_cfg_find(c, "n_kv_heads|num_key_value_heads", NULL, buf, sizeof(buf));
	if (cv->spec->permute_qk && v && tpc__gk_cfg_u32(c, v, "num_key_value_heads", &w->kv_heads, cv->e))
		return -1;
	if (!cv->spec->experts[0])
		return 0;
	/* any of the usual names, else the record's expert count member (ERNIE 4.5 MoE's moe_num_experts) */
	char xm[160];
	snprintf(xm, sizeof(xm), "num_local_experts|num_experts|n_routed_experts%s%s", cv->spec->experts_member ? "|" : "",
		 cv->spec->experts_member ? cv->spec->experts_member : "");
	if (tpc__gk_cfg_req_u32(c, xm, &w->n_exp, cv->e))
		return -1;
	uint64_t n = 0;
	if (!w->n_exp || tpc_mul_u64(w->layers, 3 * w->n_exp, &n) || n > ((uint64_t)1 << 26))
		return tpc__gk_cfg_err(c, cv->e, "config.json: %s experts over the layers is not a count tpconv stacks", "the");
	w->xidx = malloc(n * sizeof(*w->xidx));
	w->xgot = tpc_calloc(w->layers ? w->layers : 1, sizeof(*w->xgot));
	if (!w->xidx || !w->xgot)
		return tpc_err_nomem(cv->e);
	for (uint64_t i = 0; i < n; i++)
		w->xidx[i] = -1;
	return 0;
}

int tpc_gguf_from_hf_pre(const tpc_ckpt *ck, const char *dir, const char *outtype, const char *pre, unsigned flags,
			 tpc_gguf_kvs *kv, tpc_gguf_wtensor **t, size_t *n, tpc_err *e)
{
	conv cv = {.kv = kv, .e = e, .no_mtp = (flags & TPC_GGUF_NO_MTP) != 0};
	walk w;
	char label[64], *title = NULL;
	int ret = load_config(dir, &cv.c, &cv.fam, e);
	memset(&w, 0, sizeof(w));
	*t = NULL;
	*n = 0;
	if (!ret)
		cv.spec = cv.fam->gguf;
	if (!ret && cv.spec->mxfp4_blocks) { /* base.py: quant_method == "mxfp4" */
		const cJSON *qc = cJSON_GetObjectItemCaseSensitive(cv.c.root, "quantization_config"),
			    *qm = cJSON_GetObjectItemCaseSensitive(qc, "quant_method");
		cv.mxfp4 = cJSON_IsString(qm) && !strcmp(qm->valuestring, "mxfp4");
	}
	if (!ret)
		ret = parse_outtype(outtype, ck, cv.spec, &cv.ftype, e);
	if (!ret)
		ret = mtp_layers(&cv, ck);
	if (!ret)
		ret = walk_init(&w, &cv, ck);
	if (!ret)
		ret = rope_freqs(&w);
	if (!ret)
		ret = phi3_factors(&w);
	if (!ret)
		ret = walk_tensors(&w);
	for (size_t i = 0; !ret && i < w.out.n; i++)
		if (w.out.t[i].type != TPC_GGML_MXFP4) /* mx_tensor's, whatever the outtype */
			w.out.t[i].type = tpc__gga_tensor_type(cv.ftype, w.out.role[i], &w.out.t[i]);
	/* prepare_metadata: general.*, the architecture's keys, then the vocabulary */
	if (!ret && !(title = tpc__gguf_title(dir)))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = tpc__gk_kv_str(&cv, "general.architecture", cv.spec->arch) ? -1 : 0;
	if (!ret && cv.has_attn)
		ret = tpc__gk_kv_put(&cv, "rope.scaling.attn_factor", F32, cv.attn_factor, 0);
	if (!ret)
		ret = tpc__gk_kv_str(&cv, "general.type", "model");
	if (!ret)
		ret = tpc__gk_sampling_keys(&cv, dir);
	if (!ret) {
		tpc__gk_size_label(w.out.t, w.out.n, label, sizeof(label));
		ret = tpc__gk_kv_str(&cv, "general.name", title) || tpc__gk_kv_str(&cv, "general.size_label", label) ? -1 : 0;
	}
	if (!ret)
		ret = tpc__gk_arch_keys(&cv);
	if (!ret && tpc_gguf_kvs_uint(kv, "general.quantization_version", U32, 2))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = tpc_gguf_vocab_pre(dir, cv.spec->arch, tpc__gk_cfg_int_or(&cv.c, "vocab_size", 0), pre, kv, e);
	if (!ret) {
		*t = w.out.t;
		*n = w.out.n;
		w.out.t = NULL;
		w.out.n = 0;
	}
	tpc_gguf_wtensors_release(w.out.t, w.out.n);
	free(w.out.role);
	free(w.xidx);
	free(w.xgot);
	free(title);
	tpc_cfg_free(cv.c.doc);
	free((char *)cv.c.path);
	return ret;
}

int tpc_gguf_from_hf(const tpc_ckpt *ck, const char *dir, const char *outtype, tpc_gguf_kvs *kv,
		     tpc_gguf_wtensor **t, size_t *n, tpc_err *e)
{
	return tpc_gguf_from_hf_pre(ck, dir, outtype, NULL, 0, kv, t, n, e);
}
