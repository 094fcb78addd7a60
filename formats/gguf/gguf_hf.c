/* gguf_hf.c - a GGUF read back into the Hugging Face model it came from:
 * the inverse of gguf_arch.c, from the same family records and their GGUF
 * parts (lib/tpc_family_gguf.h), so there is one record per family for both
 * directions.
 *
 * general.architecture picks the record (tpc_family_by_gguf; llama:
 * LlamaForCausalLM, or MixtralForCausalLM when {arch}.expert_count is set:
 * the first record of that architecture that stacks experts); each tensor's GGUF
 * name is matched against the family's TPC_ECO_GGUF column and renamed to
 * its TPC_ECO_HF name; what the reference transformed is transformed back,
 * as descriptions where it can be (no byte copied):
 *   - llama's attn_q / attn_k rows (weight and bias): Meta's interleaved
 *     rotary order back to Hugging Face's halves (tpc_tensor_rope_permute
 *     to_halves; a block tensor through its dequantizer's rope_hd);
 *   - stacked experts [E, rows, cols]: one tensor per expert (select0; a
 *     block tensor as a window of its packed rows);
 *   - Gemma's norms: the reference stored w + 1, computed here as x - 1 in
 *     F32 (F16 stays F16, rounded once): exact when w + 1 was (a bf16 or
 *     f16 model's norms), else within one rounding of w;
 *   - GPT-2's Conv1D weights transposed back to [in, out];
 *   - GPT-NeoX's attn_qkv rows [3, heads, hd] back to [heads, 3, hd];
 *   - a tensor the GGUF holds as two parts split per head (the record's
 *     head_split: DeepSeek's attn_k_b, attn_v_b) joined head by head.
 *   - value heads the reference wrote tiled (the record's head_tile:
 *     Qwen3.5's DeltaNet) back in their groups by key head.
 * A missing output.weight is a tied head: no lm_head, and config.json says
 * tie_word_embeddings; the record's bias_flags say in config.json which
 * biases the GGUF holds (Seed-OSS's attention_bias, attention_out_bias;
 * GLM-4's attention_bias, ERNIE 4.5's use_bias). A tensor with no Hugging Face name is refused by
 * name (never a guessed name): `convert --gguf-names` keeps GGUF's. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tpc_cast.h"
#include "tpc_extras.h"
#include "tpc_family.h"
#include "tpc_family_gguf.h"
#include "tpc_util.h"

#define NORM_MAX ((uint64_t)1 << 28) /* elements of a norm computed in memory */

/* ---- the metadata ---- */

/* `key` under "{arch}." (arch NULL: as is), or NULL */
static const tpc_gguf_kv *kv_get(const tpc_gguf_kvs *kv, const char *arch, const char *key)
{
	char full[192];
	int n = arch ? snprintf(full, sizeof(full), "%s.%s", arch, key) : snprintf(full, sizeof(full), "%s", key);
	if (n < 0 || (size_t)n >= sizeof(full))
		return NULL;
	ptrdiff_t i = tpc_gguf_kvs_find(kv, full);
	return i >= 0 ? &kv->kv[i] : NULL;
}

/* An integer KV, -1 when absent or of another type */
static int64_t kv_int(const tpc_gguf_kv *k)
{
	if (!k)
		return -1;
	switch (k->type) {
	case TPC_GV_U8: case TPC_GV_U16: case TPC_GV_U32: case TPC_GV_U64: case TPC_GV_BOOL:
		return k->v.u > INT64_MAX ? -1 : (int64_t)k->v.u;
	case TPC_GV_I8: case TPC_GV_I16: case TPC_GV_I32: case TPC_GV_I64:
		return k->v.i;
	default:
		return -1;
	}
}

/* An integer KV or an integer array's first nonzero entry (a per-layer
 * count, 0 for the layers without it: GraniteHybridModel's head_count_kv),
 * -1 when absent or of another type */
static int64_t kv_int_or_first(const tpc_gguf_kv *k)
{
	if (!k || k->type != TPC_GV_ARRAY)
		return kv_int(k);
	for (uint64_t i = 0; i < k->n; i++) {
		int64_t v = k->atype == TPC_GV_I32 ? ((const int32_t *)k->arr)[i]
			    : k->atype == TPC_GV_U32 ? (int64_t)((const uint32_t *)k->arr)[i] : -1;
		if (v)
			return v;
	}
	return -1;
}

static bool kv_has(const void *ctx, const char *key)
{
	return tpc_gguf_kvs_find(ctx, key) >= 0;
}

typedef struct hfctx {
	const tpc_gguf_arch *a; /* fam->gguf */
	const tpc_family *fam;
	const char *arch; /* general.architecture */
	int64_t heads, kv_heads, n_exp;
	int64_t layers; /* the decoder's: block_count less nextn_predict_layers (the
			 * record's multi-token-prediction block past them, tpc_family_mtp);
			 * -1 without such a block */
	tpc_ckpt *ck;
	const tpc_gguf_kvs *kv;
	tpc_err *e;
} hfctx;

static int hf_init(hfctx *h, const tpc_ckpt *ck, const tpc_gguf_kvs *kv, tpc_err *e)
{
	const tpc_gguf_kv *a = kv_get(kv, NULL, "general.architecture");
	char safe[64];
	if (!a || a->type != TPC_GV_STRING)
		return tpc_err_at(e, TPC_EINPUT, ck->path, NULL,
				  "no general.architecture: the GGUF names have no Hugging Face form (--gguf-names keeps them)");
	h->arch = a->s;
	h->e = e;
	h->n_exp = kv_int(kv_get(kv, h->arch, "expert_count"));
	if (!(h->fam = tpc_family_by_gguf_keys(h->arch, h->n_exp > 0, kv_has, kv))) {
		char list[256];
		tpc_sanitize(safe, sizeof(safe), h->arch);
		tpc_family_gguf_list(false, list, sizeof(list));
		return tpc_err_at(e, TPC_EINPUT, ck->path, NULL,
				  "GGUF architecture '%s'%s has no Hugging Face form tpconv knows (%s; --gguf-names keeps the GGUF names)",
				  safe, h->n_exp > 0 ? " with experts" : "", list);
	}
	h->a = h->fam->gguf;
	h->layers = -1;
	if (h->fam->mtp) {
		int64_t nl = kv_int(kv_get(kv, h->arch, "block_count")), m = kv_int(kv_get(kv, h->arch, "nextn_predict_layers"));
		h->layers = nl - (m > 0 ? m : 0);
	}
	h->heads = kv_int(kv_get(kv, h->arch, "attention.head_count"));
	h->kv_heads = kv_int_or_first(kv_get(kv, h->arch, "attention.head_count_kv"));
	if (h->kv_heads < 0)
		h->kv_heads = h->heads;
	return 0;
}

/* ---- one tensor ---- */

/* The family row of GGUF tensor t. llama.cpp names Phi-3's fused
 * gate_up ffn_up like a plain up projection: it is the fused one when the
 * layer has no ffn_gate. NULL when there is no Hugging Face name. */
static const tpc_tensor_row *hf_row(const hfctx *h, const tpc_tensor *t, int64_t *l, bool *bias)
{
	int64_t x = -1;
	const tpc_tensor_row *row = tpc_family_classify(h->fam, TPC_ECO_GGUF, t->name, l, &x, bias);
	const tpc_tensor_row *gu = tpc_family_row(h->fam, TPC_ROLE_FFN_GATE_UP),
			     *gate = tpc_family_row(h->fam, TPC_ROLE_FFN_GATE);
	char g[256];
	int part;
	if (row && row->role == TPC_ROLE_FFN_UP && gu && gate &&
	    tpc_family_name(gate, TPC_ECO_GGUF, *l, -1, false, g, sizeof(g), &part) && tpc_ckpt_find(h->ck, g) < 0)
		row = gu;
	return row && row->name[TPC_ECO_HF] ? row : NULL;
}

/* Expert j of a stacked block tensor: a window of its packed rows */
static int dq_expert(tpc_tensor *dst, const tpc_tensor *src, int64_t j)
{
	const tpc_dequant *sq = src->dq;
	memset(dst, 0, sizeof(*dst));
	if (src->ndim < 2 || sq->nc != 1 || sq->rope_hd || sq->O || sq->r0 || sq->c0 || sq->c[0].ndim != 1 ||
	    sq->c[0].shape[0] % src->shape[0])
		return -1;
	int64_t per = sq->c[0].shape[0] / src->shape[0];
	tpc_dequant *dq = tpc_dequant_dup(sq);
	if (!dq)
		return -1;
	int ret = tpc_tensor_narrow(&dq->c[0], &sq->c[0], 0, j * per, per);
	if (!ret)
		dq->nc = 1;
	if (!ret && sq->c[0].name && !(dq->c[0].name = tpc_strdup(sq->c[0].name)))
		ret = -1;
	if (!ret)
		ret = tpc_tensor_init_zero(dst, TPC_F32, src->ndim - 1, src->shape + 1);
	if (ret) {
		free(dq->c[0].name);
		tpc_tensor_release(&dq->c[0]);
		free(dq);
		return -1;
	}
	dst->flags = 0;
	dst->dq = dq;
	return 0;
}

/* Stacked experts [E, ...]: one tensor per expert under its HF name */
/* name, a decoder-layer name past the decoder's layers, as the record's
 * multi-token-prediction block names it (_QwenMtpMixin's renaming undone);
 * else as it is */
static void mtp_back(const hfctx *h, char *name, size_t n)
{
	char m[256];
	if (h->layers >= 0 && tpc_family_mtp_name(h->fam, name, h->layers, m, sizeof(m)) && strlen(m) < n)
		memcpy(name, m, strlen(m) + 1);
}

static int unstack(hfctx *h, const tpc_tensor *src, const char *gname, const tpc_tensor_row *row, int64_t l)
{
	char name[256];
	int part;
	if (src->ndim < 2 || src->shape[0] != h->n_exp)
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "%lld experts stacked, but %s.expert_count says %lld",
				  src->ndim ? (long long)src->shape[0] : 0LL, h->arch, (long long)h->n_exp);
	for (int64_t j = 0; j < src->shape[0]; j++) {
		tpc_tensor t;
		if (!tpc_family_name(row, TPC_ECO_HF, l, j, false, name, sizeof(name), &part))
			return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "no Hugging Face name for expert %lld",
					  (long long)j);
		mtp_back(h, name, sizeof(name));
		if (src->dq ? dq_expert(&t, src, j) : tpc_tensor_select0(&t, src, j))
			return tpc_err_nomem(h->e);
		int64_t ix = tpc_ckpt_add_copy(h->ck, name, &t, h->e);
		tpc_tensor_release(&t);
		if (ix < 0)
			return (int)ix;
	}
	return 0;
}

/* Gemma's norm: the reference stored w + 1; x - 1 here (F16 stays F16) */
/* src's values as F32 into *v (malloc'd), a vector of at most NORM_MAX */
static int f32_values(hfctx *h, const tpc_tensor *src, const char *name, const char *what, float **v)
{
	tpc_tensor t;
	*v = NULL;
	if (src->numel > NORM_MAX)
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, name, "%s of %llu elements is not one tpconv computes", what,
				  (unsigned long long)src->numel);
	if (tpc_tensor_copy(&t, src))
		return tpc_err_nomem(h->e);
	t.dtype = TPC_F32;
	t.nbytes = t.numel * 4;
	*v = malloc(t.nbytes ? t.nbytes : 1);
	int ret = *v ? tpc_ckpt_read_out(h->ck, &t, 0, t.nbytes, *v, h->e) : tpc_err_nomem(h->e);
	tpc_tensor_release(&t);
	if (ret) {
		free(*v);
		*v = NULL;
	}
	return ret;
}

static int norm_minus_one(hfctx *h, const tpc_tensor *src, const char *name)
{
	bool half = !src->dq && src->src_dtype == TPC_F16;
	int s, ret;
	float *v;
	if ((ret = f32_values(h, src, name, "a norm", &v)))
		return ret;
	uint16_t *v16 = (uint16_t *)v;
	for (uint64_t i = 0; i < src->numel; i++) {
		float x = v[i] - 1.0f;
		if (half)
			v16[i] = tpc_f32_to_f16(x); /* i <= 2i: never overwrites an unread value */
		else
			v[i] = x;
	}
	if ((ret = tpc_ckpt_add_mem(h->ck, name, (uint8_t *)v, src->numel * (half ? 2 : 4), &s, h->e)))
		return ret; /* the checkpoint owns v either way */
	int64_t ix = tpc_ckpt_add_tensor(h->ck, name, half ? TPC_F16 : TPC_F32, src->ndim, src->shape, NULL, s, 0, h->e);
	return ix < 0 ? (int)ix : 0;
}

/* A_log for a GGUF's A = -exp(A_log): the float whose torch exp gives -A
 * back (tpc__gguf_torch_expf), searched a few ulps around log(-A), so that
 * the GGUF written again holds A to the bit; log(-A) itself when none does */
static float a_log_of(float a)
{
	float x = (float)log(-(double)a), best = x;
	for (int d = 0; d <= 8; d++)
		for (int sgn = -1; sgn <= 1; sgn += 2) {
			float y = x;
			for (int k = 0; k < d; k++)
				y = nextafterf(y, sgn < 0 ? -INFINITY : INFINITY);
			if (-tpc__gguf_torch_expf(y) == a)
				return y;
		}
	return best;
}

/* The Mamba-2 mixer's tensors back to transformers' shapes (the record's
 * mamba2): conv1d [C, K] -> [C, 1, K], ssm_a [H, 1] -> A_log [H]
 * (a_log_of), ssm_d [H, 1] -> D [H], ssm_norm [G, I / G] -> [I]; F32 */
static int mamba2_back(hfctx *h, const tpc_tensor *src, tpc_role role, const char *name)
{
	tpc_tensor t;
	int64_t shape[3];
	int nd = 0, s, ret;
	if (src->numel > NORM_MAX || src->ndim != 2)
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, name, "not the 2-D Mamba-2 %s tpconv reads back",
				  tpc_role_name(role));
	if (role == TPC_ROLE_SSM_CONV1D) {
		shape[nd++] = src->shape[0];
		shape[nd++] = 1;
		shape[nd++] = src->shape[1];
	} else {
		shape[nd++] = (int64_t)src->numel;
	}
	if (tpc_tensor_copy(&t, src))
		return tpc_err_nomem(h->e);
	t.dtype = TPC_F32;
	t.nbytes = t.numel * 4;
	float *v = malloc(t.nbytes ? t.nbytes : 1);
	ret = v ? tpc_ckpt_read_out(h->ck, &t, 0, t.nbytes, v, h->e) : tpc_err_nomem(h->e);
	tpc_tensor_release(&t);
	for (uint64_t i = 0; !ret && role == TPC_ROLE_SSM_A && i < src->numel; i++) {
		if (!(v[i] < 0))
			ret = tpc_err_at(h->e, TPC_EINPUT, h->ck->path, name, "A = %g is not negative: no A_log gives it",
					 (double)v[i]);
		else
			v[i] = a_log_of(v[i]);
	}
	if (ret) {
		free(v);
		return ret;
	}
	if ((ret = tpc_ckpt_add_mem(h->ck, name, (uint8_t *)v, src->numel * 4, &s, h->e)))
		return ret; /* the checkpoint owns v either way */
	int64_t ix = tpc_ckpt_add_tensor(h->ck, name, TPC_F32, nd, shape, NULL, s, 0, h->e);
	return ix < 0 ? (int)ix : 0;
}

/* GPT-NeoX: rows [3, heads, hd] (q, k, v each by head) back to [heads, 3, hd] */
static int neox_ungroup(const tpc_tensor *src, int64_t heads, tpc_tensor *dst)
{
	memset(dst, 0, sizeof(*dst));
	if (heads < 1 || heads > INT32_MAX || src->ndim < 1 || src->shape[0] % (3 * heads))
		return -1;
	int64_t hd = src->shape[0] / (3 * heads);
	tpc_tensor *p = tpc_calloc((size_t)heads, sizeof(*p));
	int ret = p ? 0 : -1, n = 0;
	for (; n < heads && !ret; n++)
		ret = tpc_tensor_ungroup(&p[n], src, 0, 3, heads * hd, n * hd, hd);
	if (!ret)
		ret = tpc_tensor_init_cat(dst, p, (int)heads, 0);
	for (int i = 0; i < n - (ret ? 1 : 0); i++)
		tpc_tensor_release(&p[i]);
	free(p);
	return ret ? -1 : 0;
}

/* Q/K rows back to Hugging Face's halves per head */
static int unpermute(hfctx *h, const tpc_tensor *src, const char *gname, bool q, tpc_tensor *t)
{
	int64_t n = q ? h->heads : h->kv_heads;
	if (n < 1 || src->ndim < 1 || src->shape[0] % (2 * n))
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname,
				  "%lld rows are not whole heads of even size (%s.attention.head_count%s %lld)",
				  src->ndim ? (long long)src->shape[0] : 0LL, h->arch, q ? "" : "_kv", (long long)n);
	if (!src->dq)
		return tpc_tensor_rope_permute(t, src, n, true) ? tpc_err_nomem(h->e) : 0;
	if (src->dq->rope_hd || src->dq->O)
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "internal: a block tensor permuted twice");
	if (tpc_tensor_copy(t, src))
		return tpc_err_nomem(h->e);
	t->dq->rope_hd = src->shape[0] / n;
	return 0;
}

/* The parts p[0..n) (each [..., len] along dim d) interleaved along d:
 * element j is part j % n's element j / n (gpt-oss's gate_up_proj), a
 * composite of single-element views */
static int interleave(tpc_tensor *dst, const tpc_tensor *p, int n, int d)
{
	int64_t len = p[0].shape[d], m = 0;
	if (len < 1 || (uint64_t)len * (uint64_t)n > INT32_MAX)
		return -1;
	tpc_tensor *one = tpc_calloc((size_t)(len * n), sizeof(*one));
	int ret = one ? 0 : -1;
	for (int64_t j = 0; !ret && j < len * n; j++, m++)
		ret = tpc_tensor_narrow(&one[j], &p[j % n], d, j / n, 1);
	if (!ret)
		ret = tpc_tensor_init_cat(dst, one, (int)m, d);
	for (int64_t j = 0; one && j < m - (ret && m ? 1 : 0); j++)
		tpc_tensor_release(&one[j]);
	free(one);
	return ret;
}

/* The GGUF tensors of the parts of a tensor the Hugging Face checkpoint fuses
 * itself (a "#K" name: Granite-MoE's ffn_gate_exps and ffn_up_exps back into
 * input_linear [E, 2I, H]), concatenated along dim 1 when it stacks experts,
 * else dim 0, in K order, under its name; read at part 0, the others only
 * checked to have it. A row stored [in, out] (hf_in_out) has each part
 * transposed back first and the parts joined along the out dim, the last
 * (Llama 4's gate_up_proj [E, H, 2I]: [gate | up]); parts that interleave
 * (hf_interleaved) are interleaved there, and a row's fused bias (gpt-oss's gate_up_proj_bias [E, 2I])
 * is rebuilt the same way. */
static int hf_fused(hfctx *h, const tpc_tensor_row *row, int64_t l, int part, bool bias, const char *name,
		    const char *gname)
{
	const tpc_tensor_row *rows[TPC_ROLE_COUNT];
	tpc_tensor p[TPC_ROLE_COUNT], t;
	char g[256];
	int gp, n = tpc_family_parts(h->fam, row, TPC_ECO_HF, rows, TPC_ROLE_COUNT), d = tpc_family_stacked(row, TPC_ECO_HF);
	int have = 0, ret = 0;
	if (n < 2)
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "internal: a fused tensor of %d parts", n);
	for (int k = 0; k < (part ? 1 : n) && !ret; k++) {
		int64_t ix = tpc_family_name(rows[k], TPC_ECO_GGUF, l, -1, bias, g, sizeof(g), &gp) ? tpc_ckpt_find(h->ck, g) : -1;
		if (ix < 0)
			ret = tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "part %d of Hugging Face's '%s' is not in the GGUF (%s)",
					 k, name, tpc_role_name(rows[k]->role));
		else if (part == 0 && h->ck->t[ix].dq)
			ret = tpc_err_at(h->e, TPC_EINPUT, h->ck->path, g,
					 "a quantized part of Hugging Face's fused '%s' is not read into Hugging Face form by tpconv yet (--gguf-names keeps the GGUF names)",
					 name);
		else if (part == 0 && tpc_tensor_copy(&p[have], &h->ck->t[ix]))
			ret = tpc_err_nomem(h->e);
		else if (part == 0 && row->hf_in_out && !bias &&
			 (p[have].ndim < 2 || tpc_tensor_swap_dims(&p[have], p[have].ndim - 2, p[have].ndim - 1)))
			ret = tpc_err_at(h->e, TPC_EINPUT, h->ck->path, g, "cannot transpose this tensor's experts (%d-D)",
					 p[have++].ndim);
		else if (part == 0)
			have++;
	}
	/* the out dim: after the transpose back, the last */
	int od = row->hf_in_out && !bias && have ? p[0].ndim - 1 : d;
	if (!ret && part == 0) {
		if (row->hf_interleaved ? interleave(&t, p, have, od) : tpc_tensor_init_cat(&t, p, have, od)) {
			ret = tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "the parts of Hugging Face's '%s' differ in shape or dtype",
					 name);
		} else {
			int64_t ix = tpc_ckpt_add_copy(h->ck, name, &t, h->e);
			ret = ix < 0 ? (int)ix : 0;
			tpc_tensor_release(&t);
		}
	}
	for (int k = 0; k < have; k++)
		tpc_tensor_release(&p[k]);
	return ret;
}

/* The two GGUF tensors one Hugging Face tensor of `role` is written as
 * (names[2], "blk.{L}." templates) when gname is one of them: 1 when it is
 * neither, 2 when it is the second (the first exists too: nothing to do),
 * 0 when it is the first: ix[] their indices, g[] their names, name[256] the
 * Hugging Face name, neither part quantized; -1 with the error. */
static int two_parts(hfctx *h, tpc_role role, const char *const *names, const char *gname, int64_t ix[2],
		     char g[2][256], char *name)
{
	const tpc_tensor_row *row = tpc_family_row(h->fam, role);
	int64_t l = -1;
	int k = 0, part;
	while (k < 2 && !(role && tpc_family_match(names[k], gname, false, &l, NULL, NULL)))
		k++;
	if (k == 2 || !row)
		return 1;
	for (int j = 0; j < 2; j++) {
		tpc_tensor_row pr = {.role = role};
		pr.name[TPC_ECO_GGUF] = names[j];
		if (!tpc_family_name(&pr, TPC_ECO_GGUF, l, -1, false, g[j], 256, &part))
			return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "no GGUF name for part %d of %s", j,
					  tpc_role_name(role));
		if ((ix[j] = tpc_ckpt_find(h->ck, g[j])) < 0)
			return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "the GGUF has no '%s', the other part of %s",
					  g[j], tpc_role_name(role));
	}
	if (k == 1)
		return 2;
	if (!tpc_family_name(row, TPC_ECO_HF, l, -1, false, name, 256, &part))
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "no Hugging Face name for this tensor");
	if (h->ck->t[ix[0]].dq || h->ck->t[ix[1]].dq)
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, h->ck->t[ix[0]].dq ? g[0] : g[1],
				  "a quantized part of Hugging Face's '%s' is not read into Hugging Face form by tpconv yet (--gguf-names keeps the GGUF names)",
				  name);
	return 0;
}

/* A tensor the GGUF holds as two parts split per head (the record's
 * head_split: attn_k_b and attn_v_b back into DeepSeek's kv_b_proj), joined
 * under its Hugging Face name at part 0; at part 1 only checked to have part
 * 0. 1: gname is no part of it. */
static int head_join(hfctx *h, const char *gname)
{
	const tpc_gguf_head_split *hs = &h->a->head_split;
	int64_t ix[2] = {-1, -1};
	char g[2][256], name[256];
	int r = two_parts(h, hs->role, hs->name, gname, ix, g, name);
	if (r)
		return r == 2 ? 0 : r;
	tpc_tensor t, p0, p1;
	if (tpc_tensor_copy(&p0, &h->ck->t[ix[0]]))
		return tpc_err_nomem(h->e);
	if (tpc_tensor_copy(&p1, &h->ck->t[ix[1]])) {
		tpc_tensor_release(&p0);
		return tpc_err_nomem(h->e);
	}
	int ret = 0;
	if (tpc_tensor_join_heads(&t, &p0, &p1, hs->transpose0)) {
		ret = tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "'%s' and '%s' are not the parts of one tensor split per head",
				 g[0], g[1]);
	} else {
		int64_t x = tpc_ckpt_add_copy(h->ck, name, &t, h->e);
		ret = x < 0 ? (int)x : 0;
		tpc_tensor_release(&t);
	}
	tpc_tensor_release(&p0);
	tpc_tensor_release(&p1);
	return ret;
}

/* The product of the '*'-separated {arch}.* integer keys, -1 when one is
 * absent or the product past 2^40 */
static int64_t key_product(const hfctx *h, const char *keys)
{
	char k[96];
	int64_t p = 1;
	for (const char *s = keys; s && *s;) {
		size_t n = strcspn(s, "*");
		if (n >= sizeof(k))
			return -1;
		snprintf(k, sizeof(k), "%.*s", (int)n, s);
		int64_t v = kv_int(kv_get(h->kv, h->arch, k));
		if (v < 0 || (v && p > ((int64_t)1 << 40) / v))
			return -1;
		p *= v;
		s += n + (s[n] == '*');
	}
	return p;
}

/* A tensor the GGUF holds as two with its grouped rows gathered (the
 * record's group_split: attn_qkv and attn_gate back into Qwen3-Next's
 * in_proj_qkvz, [q k v z] per key head's group), regrouped under its
 * Hugging Face name at part 0; at part 1 only checked to have part 0.
 * Views: no byte copied. 1: gname is no part of it. */
static int group_join(hfctx *h, const char *gname)
{
	const tpc_gguf_group_split *gs = &h->a->group_split;
	int64_t ix[2] = {-1, -1};
	char g[2][256], name[256];
	int r = two_parts(h, gs->role, gs->name, gname, ix, g, name);
	if (r)
		return r == 2 ? 0 : r;
	const tpc_tensor *t0 = &h->ck->t[ix[0]], *t1 = &h->ck->t[ix[1]];
	int64_t groups = key_product(h, gs->key_groups), rows[4], off[2] = {0, 0};
	int np = 0;
	for (; np < 4 && gs->key_rows[np]; np++) {
		rows[np] = key_product(h, gs->key_rows[np]);
		if (rows[np] < 1 || groups < 1 || rows[np] % groups)
			return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "%s.%s is not whole groups of %s.%s", h->arch,
					  gs->key_rows[np], h->arch, gs->key_groups);
		off[np < gs->first ? 0 : 1] += rows[np];
	}
	if (t0->ndim != 2 || t1->ndim != 2 || t0->shape[0] != off[0] || t1->shape[0] != off[1] || t0->shape[1] != t1->shape[1] ||
	    groups > 1 << 20)
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname,
				  "'%s' and '%s' are not %lld and %lld rows of equal width (the %s.%s keys)", g[0], g[1],
				  (long long)off[0], (long long)off[1], h->arch, gs->key_groups);
	tpc_tensor *p = tpc_calloc((size_t)(groups * np), sizeof(*p)), t;
	int made = 0, ret = p ? 0 : tpc_err_nomem(h->e);
	for (int64_t gi = 0; gi < groups && !ret; gi++) {
		int64_t at[2] = {0, 0};
		for (int j = 0; j < np && !ret; j++) {
			int side = j < gs->first ? 0 : 1;
			int64_t len = rows[j] / groups;
			if (tpc_tensor_narrow(&p[made], side ? t1 : t0, 0, at[side] + gi * len, len))
				ret = tpc_err_nomem(h->e);
			else
				made++;
			at[side] += rows[j];
		}
	}
	if (!ret && tpc_tensor_init_cat(&t, p, made, 0))
		ret = tpc_err_nomem(h->e);
	if (!ret) {
		int64_t x = tpc_ckpt_add_copy(h->ck, name, &t, h->e);
		ret = x < 0 ? (int)x : 0;
		tpc_tensor_release(&t);
	}
	for (int j = 0; j < made; j++)
		tpc_tensor_release(&p[j]);
	free(p);
	return ret;
}

/* Qwen3-Next's A_log from ssm_a = -exp(A_log): the float whose
 * -torch.exp is the value (searched about log(-x): the reference's values
 * have one), else the nearest; written F32 */
static int neg_log(hfctx *h, const tpc_tensor *src, const char *name)
{
	int s, ret;
	float *v;
	ret = f32_values(h, src, name, "a vector whose log is taken", &v);
	for (uint64_t i = 0; !ret && i < src->numel; i++) {
		float x = v[i];
		if (!(x <= 0)) {
			ret = tpc_err_at(h->e, TPC_EINPUT, h->ck->path, name, "element %llu is %g: not -exp of a number",
					 (unsigned long long)i, (double)x);
			break;
		}
		float a = (float)log(-(double)x), best = a;
		for (int k = 0; k <= 8; k++) {
			float up = a, dn = a;
			for (int j = 0; j < k; j++) {
				up = nextafterf(up, INFINITY);
				dn = nextafterf(dn, -INFINITY);
			}
			if (-tpc__gguf_torch_expf(up) == x) {
				best = up;
				break;
			}
			if (-tpc__gguf_torch_expf(dn) == x) {
				best = dn;
				break;
			}
		}
		v[i] = best;
	}
	if (ret) {
		free(v);
		return ret;
	}
	if ((ret = tpc_ckpt_add_mem(h->ck, name, (uint8_t *)v, src->numel * 4, &s, h->e)))
		return ret; /* the checkpoint owns v either way */
	int64_t ix = tpc_ckpt_add_tensor(h->ck, name, TPC_F32, src->ndim, src->shape, NULL, s, 0, h->e);
	return ix < 0 ? (int)ix : 0;
}

/* The record's head_tile undone on src (a depthwise convolution given its
 * unit dim back first): the heads back in groups, as the Hugging Face
 * checkpoint holds them; src replaced by the view */
static int head_untile(hfctx *h, tpc_tensor *src, const char *gname, const tpc_gguf_tile_row *tr, bool unsqueeze)
{
	const tpc_gguf_head_tile *ht = &h->a->head_tile;
	int64_t groups = key_product(h, ht->key_groups), heads = key_product(h, ht->key_heads),
		span = key_product(h, tr->key_span);
	tpc_tensor u;
	int dim = tr->dim;
	if (unsqueeze && (src->ndim != 2 || tpc_tensor_unit_dim(src, 1, true)))
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname,
				  "not a depthwise convolution [channels, kernel] tpconv reads back (%d-D%s)", src->ndim,
				  src->dq ? ", quantized" : "");
	int64_t n = dim < src->ndim ? src->shape[dim] : 0;
	if (groups < 1 || heads < 1 || heads % groups || span < 1 || span % heads || span > n ||
	    tpc_tensor_tile_groups(&u, src, dim, n - span, heads / groups, groups, span / heads))
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname,
				  "the last %lld entries of dim %d are not %lld heads tiled over %lld groups (the %s.%s and %s keys)%s",
				  (long long)span, dim, (long long)heads, (long long)groups, h->arch, ht->key_heads, ht->key_groups,
				  src->dq ? ": a quantized tensor's heads are not read back by tpconv yet" : "");
	tpc_tensor_release(src);
	*src = u;
	return 0;
}

static int one(hfctx *h, size_t i)
{
	tpc_tensor src, t;
	const char *gname = h->ck->t[i].name; /* the string stays where it is when ck->t moves */
	char name[256];
	int64_t l = -1;
	bool bias = false;
	int part, ret = 0;
	const tpc_tensor_row *row = hf_row(h, &h->ck->t[i], &l, &bias);
	if (!row && (ret = head_join(h, gname)) <= 0)
		return ret;
	if (!row && (ret = group_join(h, gname)) <= 0)
		return ret;
	if (!row)
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname,
				  "no Hugging Face name for this tensor of a GGUF %s model (%s; --gguf-names keeps the GGUF names)",
				  h->arch, h->a->hf_arch[0]);
	if (tpc_tensor_copy(&src, &h->ck->t[i]))
		return tpc_err_nomem(h->e);
	memset(&t, 0, sizeof(t));
	bool stacked = strstr(row->name[TPC_ECO_HF], "{E}") && !strstr(row->name[TPC_ECO_GGUF], "{E}");
	bool q = row->role == TPC_ROLE_ATTN_Q, k = row->role == TPC_ROLE_ATTN_K;
	bool conv = h->fam->conv1d && !bias && src.ndim == 2 && row->role != TPC_ROLE_TOKEN_EMBD &&
		    row->role != TPC_ROLE_POS_EMBD && row->role != TPC_ROLE_OUTPUT;
	if (stacked) {
		ret = bias ? tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "stacked expert biases are not read by tpconv yet")
			   : unstack(h, &src, gname, row, l);
		goto out;
	}
	if (!tpc_family_name(row, TPC_ECO_HF, l, -1, bias, name, sizeof(name), &part)) {
		ret = tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "no Hugging Face name for this tensor");
		goto out;
	}
	bool norm = tpc_ends_with(name, "norm.weight"); /* the reference's test, on the decoder-layer name */
	mtp_back(h, name, sizeof(name));
	if (part >= 0) {
		ret = bias && !row->bias ? tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "fused biases are not read by tpconv yet")
					 : hf_fused(h, row, l, part, bias, name, gname);
		goto out;
	}
	const tpc_gguf_tile_row *tr = bias ? NULL : tpc_gguf_tile_of(h->a, row->role);
	bool unsqueezed = tr && h->a->squeeze && row->role == h->a->squeeze;
	if (tr && (ret = head_untile(h, &src, gname, tr, unsqueezed)))
		goto out;
	if (src.dq && (conv || (h->a->neox_qkv && row->role == TPC_ROLE_ATTN_QKV))) {
		ret = tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname,
				 "a quantized %s is not read into Hugging Face form by tpconv yet (--gguf-names keeps the GGUF names)",
				 conv ? "Conv1D weight" : "GPT-NeoX query_key_value");
		goto out;
	}
	if (h->a->permute_qk && (q || k)) {
		ret = unpermute(h, &src, gname, q, &t);
	} else if (h->a->neg_exp && row->role == h->a->neg_exp && !bias) {
		ret = neg_log(h, &src, name);
		goto out;
	} else if (h->a->squeeze && row->role == h->a->squeeze && !bias) {
		if (tpc_tensor_copy(&t, &src) || (!unsqueezed && (src.ndim != 2 || tpc_tensor_unit_dim(&t, 1, true))))
			ret = tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname,
					 "not a depthwise convolution [channels, kernel] tpconv reads back (%d-D%s)", src.ndim,
					 src.dq ? ", quantized" : "");
	} else if (h->a->norm_plus_1 && norm &&
		   !(h->a->norm_plain && row->role == h->a->norm_plain)) {
		ret = norm_minus_one(h, &src, name);
		goto out;
	} else if (h->a->mamba2 && !bias &&
		   (row->role == TPC_ROLE_SSM_CONV1D || row->role == TPC_ROLE_SSM_A || row->role == TPC_ROLE_SSM_D ||
		    row->role == TPC_ROLE_SSM_NORM)) {
		ret = src.dq ? tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname,
					  "a quantized Mamba-2 %s is not read into Hugging Face form by tpconv yet",
					  tpc_role_name(row->role))
			     : mamba2_back(h, &src, row->role, name);
		goto out;
	} else if (h->a->neox_qkv && row->role == TPC_ROLE_ATTN_QKV) {
		if (neox_ungroup(&src, h->heads, &t))
			ret = tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname, "%lld rows are not 3 x %lld heads",
					 src.ndim ? (long long)src.shape[0] : 0LL, (long long)h->heads);
	} else if (tpc_tensor_copy(&t, &src)) {
		ret = tpc_err_nomem(h->e);
	} else if (conv) {
		tpc_tensor_transpose2d(&t); /* back to Conv1D's [in, out] */
	} else if (row->hf_in_out && !bias && t.ndim >= 2 && tpc_tensor_swap_dims(&t, t.ndim - 2, t.ndim - 1)) {
		ret = tpc_err_at(h->e, TPC_EINPUT, h->ck->path, gname,
				 "a quantized expert stack stored [in, out] is not read into Hugging Face form by tpconv yet (--gguf-names keeps the GGUF names)");
	}
	if (!ret) {
		int64_t ix = tpc_ckpt_add_copy(h->ck, name, &t, h->e);
		ret = ix < 0 ? (int)ix : 0;
	}
out:
	tpc_tensor_release(&t);
	tpc_tensor_release(&src);
	return ret;
}

int tpc__gguf_to_hf(tpc_ckpt *ck, const tpc_gguf_kvs *kv, tpc_err *e)
{
	hfctx h;
	size_t n0 = ck->n;
	memset(&h, 0, sizeof(h));
	h.ck = ck;
	int ret = hf_init(&h, ck, kv, e);
	h.kv = kv;
	for (size_t i = 0; i < n0 && !ret; i++)
		ret = one(&h, i);
	bool *keep = ret ? NULL : tpc_calloc(ck->n ? ck->n : 1, sizeof(*keep));
	if (!ret && !keep)
		ret = tpc_err_nomem(e);
	for (size_t i = n0; !ret && i < ck->n; i++)
		keep[i] = true;
	if (!ret)
		ret = tpc_ckpt_filter(ck, keep, e);
	free(keep);
	return ret;
}

/* ---- config.json from the metadata ---- */

/* An F32 value as the shortest decimal that reads back to it (1e-06, not
 * 9.99999997e-07: what the model's config.json said) */
static double short_f32(double f)
{
	char buf[48];
	float x = (float)f;
	for (int p = 1; p <= 9; p++) {
		snprintf(buf, sizeof(buf), "%.*g", p, (double)x);
		if (strtof(buf, NULL) == x)
			return strtod(buf, NULL);
	}
	return f;
}

/* A float member: a whole value written "30.0", as Python's json writes a
 * float, for the config classes that take only a float there (transformers
 * 5's strict Gemma2Config.final_logit_softcapping refuses 30) */
static cJSON *float_item(double v)
{
	char buf[48];
	if (v != floor(v) || fabs(v) >= 1e15)
		return cJSON_CreateNumber(v);
	snprintf(buf, sizeof(buf), "%.1f", v);
	return cJSON_CreateRaw(buf);
}

/* The tensor of a role (layer 0) under its HF or its GGUF name, or NULL */
static const tpc_tensor *role_tensor(const hfctx *h, tpc_role r, bool bias)
{
	const tpc_tensor_row *row = tpc_family_row(h->fam, r);
	char name[256];
	int part;
	for (int eco = 0; row && eco < 2; eco++) {
		int64_t ix = tpc_family_name(row, eco ? TPC_ECO_GGUF : TPC_ECO_HF, 0, 0, bias, name, sizeof(name), &part)
				     ? tpc_ckpt_find(h->ck, name)
				     : -1;
		if (ix >= 0)
			return &h->ck->t[ix];
	}
	return NULL;
}

/* layer_types from a bool per layer (true: `type`, else full_attention), the
 * first n (the decoder's layers, not a multi-token-prediction block's); NULL
 * out of memory */
static cJSON *layer_types(const tpc_gguf_kv *k, const char *type, uint64_t n)
{
	cJSON *a = cJSON_CreateArray();
	for (uint64_t i = 0; a && i < k->n && i < n; i++) {
		const char *t = ((const uint8_t *)k->arr)[i] ? type : "full_attention";
		cJSON *s = cJSON_CreateString(t);
		if (!s || !cJSON_AddItemToArray(a, s)) {
			cJSON_Delete(s);
			cJSON_Delete(a);
			return NULL;
		}
	}
	return a;
}

/* what a rule takes off its key's value: TPC_CK_LAYERS the GGUF's
 * next-token-prediction layers, else nothing */
static int64_t less(const hfctx *h, const tpc_gguf_kvs *kv, const tpc_gguf_cfg_rule *r)
{
	int64_t m = r->kind == TPC_CK_LAYERS ? kv_int(kv_get(kv, h->arch, "nextn_predict_layers")) : 0;
	return m > 0 ? m : 0;
}

/* TPC_CK_INT_DIFF "K1-K2" (op '-') and TPC_CK_INT_QUOT "K1/K2" (op '/'):
 * the first key's integer less, or divided by, the second's; NULL when
 * either is absent or not an integer, the difference negative or the
 * quotient not whole */
static cJSON *int_op(const hfctx *h, const tpc_gguf_kvs *kv, const char *keys, int op)
{
	const char *at = strchr(keys, op);
	char k1[96];
	if (!at || (size_t)(at - keys) >= sizeof(k1))
		return NULL;
	snprintf(k1, sizeof(k1), "%.*s", (int)(at - keys), keys);
	int64_t a = kv_int(kv_get(kv, h->arch, k1)), b = kv_int(kv_get(kv, h->arch, at + 1));
	if (a < 0 || b < 0 || (op == '-' ? a < b : !b || a % b))
		return NULL;
	return cJSON_CreateNumber((double)(op == '-' ? a - b : a / b));
}

static cJSON *gating_name(const tpc_gguf_kv *k)
{
	int64_t v = kv_int(k);
	const char *n = v == 1 ? "softmax" : v == 2 ? "sigmoid" : v == 4 ? "sqrtsoftplus" : NULL;
	return n && k->type != TPC_GV_BOOL ? cJSON_CreateString(n) : NULL;
}

/* TPC_CK_ARR_NZ and TPC_CK_LAYER_KINDS from an integer array: its nonzero
 * entries' value (NULL when they differ or there is none), or layer_types
 * ("A" where nonzero, else "B", from kinds "A/B") */
static cJSON *arr_item(const tpc_gguf_kv *k, const char *kinds)
{
	if (!k || k->type != TPC_GV_ARRAY || (k->atype != TPC_GV_I32 && k->atype != TPC_GV_U32))
		return NULL;
	const char *slash = kinds ? strchr(kinds, '/') : NULL;
	char a[64];
	if (kinds && (!slash || (size_t)(slash - kinds) >= sizeof(a)))
		return NULL;
	if (kinds)
		snprintf(a, sizeof(a), "%.*s", (int)(slash - kinds), kinds);
	cJSON *arr = kinds ? cJSON_CreateArray() : NULL;
	int64_t nz = 0;
	for (uint64_t i = 0; i < k->n; i++) {
		int64_t v = k->atype == TPC_GV_I32 ? ((const int32_t *)k->arr)[i] : (int64_t)((const uint32_t *)k->arr)[i];
		if (kinds) {
			cJSON *s = cJSON_CreateString(v ? a : slash + 1);
			if (!arr || !s || !cJSON_AddItemToArray(arr, s)) {
				cJSON_Delete(s);
				cJSON_Delete(arr);
				return NULL;
			}
		} else if (v && nz && v != nz) {
			return NULL;
		} else if (v) {
			nz = v;
		}
	}
	return kinds ? arr : nz > 0 ? cJSON_CreateNumber((double)nz) : NULL;
}

/* The record's alpha rope (tpc_gguf_rope_alpha: HunYuanMoEModel's "dynamic"),
 * which the reference writes as a plain one: a GGUF with rope scaling "none"
 * and an original context gets its rope parameters back when freq_base is
 * the one of the only alpha and theta the reference writes (alpha is not in
 * the GGUF), max_position_embeddings the context written (the checkpoint's
 * 32768 is not in it either); another freq_base is refused, never read as a
 * plain rope of that base. Before the record's rows (its rope_theta written
 * here). */
/* The shortest decimal alpha (up to 17 digits) whose freq_base theta x
 * alpha ^ (dim / (dim - 2)), as an F32, is fb; 0 when none is */
static double alpha_of(double fb, double theta, int64_t dim)
{
	double e = (double)dim / (double)(dim - 2), a0 = pow(fb / theta, 1.0 / e);
	char buf[40];
	for (int p = 1; p <= 17 && isfinite(a0) && a0 > 0; p++) {
		snprintf(buf, sizeof(buf), "%.*g", p, a0);
		double a = strtod(buf, NULL);
		if ((float)(theta * pow(a, e)) == (float)fb)
			return a;
	}
	return 0;
}

static int cfg_rope_alpha(cJSON *o, const hfctx *h, const tpc_gguf_kvs *kv)
{
	const tpc_gguf_rope_alpha *ra = h->a->rope_alpha;
	const tpc_gguf_kv *t = kv_get(kv, h->arch, "rope.scaling.type"), *fb = kv_get(kv, h->arch, "rope.freq_base");
	int64_t orig = kv_int(kv_get(kv, h->arch, "rope.scaling.original_context_length"));
	int64_t hidden = kv_int(kv_get(kv, h->arch, "embedding_length"));
	if (!ra || !ra->rope_type || !t || t->type != TPC_GV_STRING || strcmp(t->s, "none") || orig < 0)
		return 0;
	int64_t dim = ra->dim_member ? kv_int(kv_get(kv, h->arch, "attention.key_length"))
		      : hidden > 0 && h->heads > 0 ? hidden / h->heads : 0;
	double alpha = ra->alpha;
	if (ra->any_alpha && fb && fb->type == TPC_GV_F32 && dim > 2)
		alpha = alpha_of(fb->v.f, ra->theta, dim);
	float want = dim > 2 && alpha > 0 ? (float)(ra->theta * pow(alpha, (double)dim / (double)(dim - 2))) : 0;
	if (!fb || fb->type != TPC_GV_F32 || (float)fb->v.f != want || orig != ra->ctx || (ra->dim && dim != ra->dim)) {
		char al[40];
		snprintf(al, sizeof(al), ra->any_alpha ? "any alpha" : "alpha %g", ra->alpha);
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, NULL,
				  "%s.rope.freq_base %g with rope.scaling.type 'none' and an original context of %lld: not the %s rope of %s, rope_theta %g and a %lld-dim head convert_hf_to_gguf.py writes (%.9g, %lld), and alpha is not in the GGUF: not rebuilt into config.json",
				  h->arch, fb && fb->type == TPC_GV_F32 ? fb->v.f : -1.0, (long long)orig, ra->rope_type, al,
				  ra->theta, (long long)dim, (double)want, (long long)ra->ctx);
	}
	cJSON *rp = cJSON_AddObjectToObject(o, "rope_parameters");
	if (!rp || !cJSON_AddStringToObject(rp, "rope_type", ra->rope_type) ||
	    !cJSON_AddItemToObject(rp, "alpha", float_item(alpha)) ||
	    !cJSON_AddItemToObject(rp, "factor", float_item(1.0)) ||
	    !cJSON_AddItemToObject(rp, "rope_theta", float_item(ra->theta)) ||
	    !cJSON_AddItemToObject(o, "rope_theta", float_item(ra->theta)))
		return tpc_err_nomem(h->e);
	return 0;
}

static int cfg_rules(cJSON *o, const hfctx *h, const tpc_gguf_kvs *kv, const tpc_gguf_cfg_rule *r)
{
	for (; r->member; r++) {
		const tpc_gguf_kv *k = r->kind == TPC_CK_CONST ? NULL : kv_get(kv, h->arch, r->key);
		int64_t v = kv_int(k);
		cJSON *item = NULL;
		if (cJSON_GetObjectItemCaseSensitive(o, r->member) || r->kind == TPC_CK_ROPE_DIV)
			continue; /* an earlier row wrote it; a rope member (cfg_rope) */
		if (r->kind == TPC_CK_CONST) {
			if (!(item = cJSON_Parse(r->key)))
				return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, NULL,
						  "internal: config.json's %s: the record's value is not JSON", r->member);
			if (!cJSON_AddItemToObject(o, r->member, item)) {
				cJSON_Delete(item);
				return tpc_err_nomem(h->e);
			}
			continue;
		}
		if (r->kind == TPC_CK_ARR_NZ || r->kind == TPC_CK_LAYER_KINDS || r->kind == TPC_CK_INT_QUOT) {
			char key[96];
			const char *eq = strchr(r->key, '=');
			snprintf(key, sizeof(key), "%.*s", eq ? (int)(eq - r->key) : (int)strlen(r->key), r->key);
			item = r->kind == TPC_CK_INT_QUOT ? int_op(h, kv, r->key, '/')
			       : arr_item(kv_get(kv, h->arch, key), r->kind == TPC_CK_LAYER_KINDS && eq ? eq + 1 : NULL);
			if (!item)
				return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, NULL,
						  "%s.%s: not what config.json's %s is read from (a per-layer count, equal where nonzero; or whole quotients)",
						  h->arch, key, r->member);
			if (!cJSON_AddItemToObject(o, r->member, item)) {
				cJSON_Delete(item);
				return tpc_err_nomem(h->e);
			}
			continue;
		}
		if (r->kind == TPC_CK_LAYER_LIST) {
			int64_t layers = kv_int(kv_get(kv, h->arch, "block_count"));
			cJSON *a = v >= 0 && layers > 0 && layers <= 65536 ? cJSON_AddArrayToObject(o, r->member) : NULL;
			if (v < 0 || layers <= 0 || layers > 65536)
				return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, NULL,
						  "%s.%s (and block_count): missing, which config.json's %s is rebuilt from",
						  h->arch, r->key, r->member);
			for (int64_t j = 0; a && j < layers; j++)
				if (!cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v)))
					a = NULL;
			if (!a)
				return tpc_err_nomem(h->e);
			continue;
		}
		if (r->kind == TPC_CK_ROPE_SECTIONS) {
			const tpc_gguf_kv *ft = kv_get(kv, NULL, "general.file_type");
			if (!k || k->type != TPC_GV_ARRAY || k->atype != TPC_GV_I32 || (ft && k > ft))
				continue; /* none, or the record's default (written after TextModel's keys) */
			cJSON *rp = cJSON_GetObjectItemCaseSensitive(o, "rope_parameters"), *a = cJSON_CreateArray();
			if (!rp)
				rp = cJSON_AddObjectToObject(o, "rope_parameters");
			if (!rp || !a || (!cJSON_GetObjectItemCaseSensitive(rp, "rope_type") &&
					  !cJSON_AddStringToObject(rp, "rope_type", "default"))) {
				cJSON_Delete(a);
				return tpc_err_nomem(h->e);
			}
			for (uint64_t j = 0; j < k->n; j++) {
				cJSON *x = cJSON_CreateNumber(((const int32_t *)k->arr)[j]);
				if (!x || !cJSON_AddItemToArray(a, x)) {
					cJSON_Delete(x);
					cJSON_Delete(a);
					return tpc_err_nomem(h->e);
				}
			}
			if (!cJSON_AddItemToObject(rp, r->member, a)) {
				cJSON_Delete(a);
				return tpc_err_nomem(h->e);
			}
			continue;
		}
		if (r->kind == TPC_CK_INT_DIFF) {
			if (!(item = int_op(h, kv, r->key, '-')))
				return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, NULL,
						  "%s: the GGUF lacks the keys config.json's %s is computed from", r->key, r->member);
			if (!cJSON_AddItemToObject(o, r->member, item)) {
				cJSON_Delete(item);
				return tpc_err_nomem(h->e);
			}
			continue;
		}
		if (!k && r->kind == TPC_CK_BOOL_OR_FALSE && !cJSON_AddFalseToObject(o, r->member))
			return tpc_err_nomem(h->e);
		if (!k && r->kind == TPC_CK_INT_OR_NULL && !cJSON_AddNullToObject(o, r->member))
			return tpc_err_nomem(h->e);
		if (!k)
			continue;
		if (r->kind == TPC_CK_FLOAT && (k->type == TPC_GV_F32 || k->type == TPC_GV_F64))
			item = float_item(k->type == TPC_GV_F32 ? short_f32(k->v.f) : k->v.f);
		else if ((r->kind == TPC_CK_BOOL || r->kind == TPC_CK_BOOL_OR_FALSE) && k->type == TPC_GV_BOOL)
			item = cJSON_CreateBool(k->v.u != 0);
		else if ((r->kind == TPC_CK_LAYER_TYPES || r->kind == TPC_CK_LAYER_TYPES_LINEAR) && k->type == TPC_GV_ARRAY &&
			 k->atype == TPC_GV_BOOL)
			item = layer_types(k, r->kind == TPC_CK_LAYER_TYPES ? "sliding_attention" : "linear_attention",
					   h->layers >= 0 ? (uint64_t)h->layers : k->n); /* the decoder's layers */
		else if (r->kind == TPC_CK_GATING_FUNC && (item = gating_name(k)) != NULL)
			;
		else if ((r->kind == TPC_CK_INT || r->kind == TPC_CK_INT_NZ || r->kind == TPC_CK_INT_OR_NULL ||
			  r->kind == TPC_CK_LAYERS) && v >= 0 &&
			 k->type != TPC_GV_BOOL && (v -= less(h, kv, r)) >= 0)
			item = r->kind == TPC_CK_INT_NZ && !v ? NULL : cJSON_CreateNumber((double)v);
		else
			return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, NULL, "%s.%s: not the type config.json's %s takes",
					  h->arch, r->key, r->member);
		if ((r->kind == TPC_CK_LAYER_TYPES || r->kind == TPC_CK_LAYER_TYPES_LINEAR) && !item)
			return tpc_err_nomem(h->e);
		if (item && !cJSON_AddItemToObject(o, r->member, item)) {
			cJSON_Delete(item);
			return tpc_err_nomem(h->e);
		}
	}
	return 0;
}

/* yarn's members from the keys TextModel.set_gguf_parameters writes, then
 * the record's TPC_CK_ROPE_DIV rows */
static int cfg_yarn(cJSON *s, const hfctx *h, const tpc_gguf_kvs *kv)
{
	static const char *const num[][2] = {{"extrapolation_factor", "rope.scaling.yarn_ext_factor"},
					     {"attention_factor", "rope.scaling.yarn_attn_factor"},
					     {"beta_fast", "rope.scaling.yarn_beta_fast"},
					     {"beta_slow", "rope.scaling.yarn_beta_slow"}};
	int64_t orig = kv_int(kv_get(kv, h->arch, "rope.scaling.original_context_length"));
	const tpc_gguf_kv *tr = kv_get(kv, h->arch, "rope.scaling.yarn_truncate");
	if (orig < 0)
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, NULL, "a yarn rope without %s.rope.scaling.original_context_length",
				  h->arch);
	if (!cJSON_AddNumberToObject(s, "original_max_position_embeddings", (double)orig) ||
	    (tr && tr->type == TPC_GV_BOOL && !cJSON_AddBoolToObject(s, "truncate", tr->v.u != 0)))
		return tpc_err_nomem(h->e);
	for (size_t i = 0; i < sizeof(num) / sizeof(num[0]); i++) {
		const tpc_gguf_kv *k = kv_get(kv, h->arch, num[i][1]);
		if (k && k->type == TPC_GV_F32 && !cJSON_AddItemToObject(s, num[i][0], float_item(short_f32(k->v.f))))
			return tpc_err_nomem(h->e);
	}
	for (const tpc_gguf_cfg_rule *r = h->a->hf_cfg; r->member; r++) {
		const char *slash = r->kind == TPC_CK_ROPE_DIV ? strchr(r->key, '/') : NULL;
		char key[96], *end = NULL;
		if (!slash || (size_t)(slash - r->key) >= sizeof(key))
			continue;
		snprintf(key, sizeof(key), "%.*s", (int)(slash - r->key), r->key);
		double d = strtod(slash + 1, &end);
		const tpc_gguf_kv *k = kv_get(kv, h->arch, key);
		if (!k || k->type != TPC_GV_F32 || !end || *end || d == 0)
			continue;
		if (!cJSON_AddItemToObject(s, r->member, float_item(short_f32(k->v.f) / d)))
			return tpc_err_nomem(h->e);
	}
	return 0;
}

/* With rope.freq_base_swa (TextModel writes it from the per-layer-type rope
 * parameters): rope_parameters' full_attention (rope_theta from freq_base,
 * in place of the top-level one) and sliding_attention (its theta, the
 * default rope: the GGUF's reader scales no sliding layer); *full is
 * full_attention, the rope scaling's place. NULL *full without the key. */
static int cfg_rope_per_type(cJSON *o, const hfctx *h, const tpc_gguf_kvs *kv, cJSON **full)
{
	const tpc_gguf_kv *swa = kv_get(kv, h->arch, "rope.freq_base_swa"), *fb = kv_get(kv, h->arch, "rope.freq_base");
	*full = NULL;
	if (!swa)
		return 0;
	if (swa->type != TPC_GV_F32 || !fb || fb->type != TPC_GV_F32)
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, NULL,
				  "%s.rope.freq_base_swa without an F32 rope.freq_base beside it: not rebuilt into config.json",
				  h->arch);
	cJSON_DeleteItemFromObjectCaseSensitive(o, "rope_theta");
	cJSON *rp = cJSON_AddObjectToObject(o, "rope_parameters");
	cJSON *fa = rp ? cJSON_AddObjectToObject(rp, "full_attention") : NULL;
	cJSON *sa = rp ? cJSON_AddObjectToObject(rp, "sliding_attention") : NULL;
	if (!fa || !sa || !cJSON_AddStringToObject(fa, "rope_type", "default") ||
	    !cJSON_AddNumberToObject(fa, "rope_theta", short_f32(fb->v.f)) ||
	    !cJSON_AddStringToObject(sa, "rope_type", "default") ||
	    !cJSON_AddNumberToObject(sa, "rope_theta", short_f32(swa->v.f)))
		return tpc_err_nomem(h->e);
	*full = fa;
	return 0;
}

/* rope scaling: linear and yarn as the reference writes them; another type
 * is not rebuilt (a config without it would be silently wrong) */
static int cfg_rope(cJSON *o, const hfctx *h, const tpc_gguf_kvs *kv, int64_t hidden)
{
	const tpc_gguf_kv *t = kv_get(kv, h->arch, "rope.scaling.type"), *f = kv_get(kv, h->arch, "rope.scaling.factor");
	int64_t dim = kv_int(kv_get(kv, h->arch, "rope.dimension_count"));
	char safe[64];
	cJSON *full = NULL;
	if (cfg_rope_per_type(o, h, kv, &full))
		return -1;
	if (t && t->type == TPC_GV_STRING && strcmp(t->s, "none")) {
		bool yarn = !strcmp(t->s, "yarn");
		cJSON *s = (strcmp(t->s, "linear") && !yarn) || !f || f->type != TPC_GV_F32 ? NULL
			   : full ? full
				  : cJSON_AddObjectToObject(o, "rope_scaling");
		if (s == full && s)
			cJSON_DeleteItemFromObjectCaseSensitive(s, "rope_type");
		tpc_sanitize(safe, sizeof(safe), t->s);
		if (!s)
			return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, NULL,
					  "%s.rope.scaling.type '%s' is not rebuilt into config.json by tpconv yet (linear and yarn are)",
					  h->arch, safe);
		if (!cJSON_AddStringToObject(s, "rope_type", yarn ? "yarn" : "linear") ||
		    !cJSON_AddNumberToObject(s, "factor", short_f32(f->v.f)))
			return tpc_err_nomem(h->e);
		if (yarn && cfg_yarn(s, h, kv))
			return -1;
	}
	/* a partial rotary dimension (Phi-3, GPT-NeoX); none for a record whose
	 * rotary dimension is a member of its own (rope_pct NULL: DeepSeek's
	 * qk_rope_head_dim, an hf_cfg row) */
	if (!h->a->rope_pct)
		return 0;
	int64_t hd = kv_int(kv_get(kv, h->arch, "attention.key_length"));
	if (hd <= 0 && hidden > 0 && h->heads > 0)
		hd = hidden / h->heads;
	if (dim > 0 && hd > 0 && dim != hd) {
		double pct = (double)dim / (double)hd;
		if (!cJSON_AddNumberToObject(o, h->a->rope_pct, pct))
			return tpc_err_nomem(h->e);
	} else if (h->a->rope_pct_always && !cJSON_AddNumberToObject(o, h->a->rope_pct, 1.0)) {
		return tpc_err_nomem(h->e);
	}
	return 0;
}

/* model_type, vocab, tie, dtype, experts, token ids */
static int cfg_common(cJSON *o, const hfctx *h, const tpc_gguf_kvs *kv)
{
	char mt[32];
	/* the family's name is transformers' model_type unless the record says */
	snprintf(mt, sizeof(mt), "%s", h->a->model_type ? h->a->model_type : h->fam->name);
	for (char *p = mt; *p; p++)
		*p = *p == '-' ? '_' : *p;
	cJSON *arr = cJSON_AddArrayToObject(o, "architectures");
	if (!arr || !cJSON_AddItemToArray(arr, cJSON_CreateString(h->a->hf_arch[0])) || !cJSON_AddStringToObject(o, "model_type", mt))
		return tpc_err_nomem(h->e);
	const tpc_tensor *emb = role_tensor(h, TPC_ROLE_TOKEN_EMBD, false);
	int64_t vocab = kv_int(kv_get(kv, h->arch, "vocab_size"));
	if (vocab < 0 && emb && emb->ndim == 2)
		vocab = emb->shape[0];
	if (vocab < 0)
		return tpc_err_at(h->e, TPC_EINPUT, h->ck->path, NULL, "no %s.vocab_size and no token embedding", h->arch);
	bool tied = role_tensor(h, TPC_ROLE_OUTPUT, false) == NULL;
	const char *dt = emb ? tpc_dtype_get(emb->dtype)->torch : NULL;
	if (!cJSON_AddNumberToObject(o, "vocab_size", (double)vocab) || !cJSON_AddBoolToObject(o, "tie_word_embeddings", tied) ||
	    (dt && !cJSON_AddStringToObject(o, "torch_dtype", dt)))
		return tpc_err_nomem(h->e);
	if (h->a->permute_qk && role_tensor(h, TPC_ROLE_ATTN_Q, true) && !cJSON_AddBoolToObject(o, "attention_bias", true))
		return tpc_err_nomem(h->e);
	for (const tpc_gguf_bias_flag *b = h->a->bias_flags; b && b->member; b++)
		if (!cJSON_AddBoolToObject(o, b->member, role_tensor(h, b->role, true) != NULL))
			return tpc_err_nomem(h->e);
	for (const tpc_gguf_bias_flag *b = h->a->weight_flags; b && b->member; b++)
		if (!cJSON_AddBoolToObject(o, b->member, role_tensor(h, b->role, false) != NULL))
			return tpc_err_nomem(h->e);
	if (h->n_exp > 0 &&
	    !cJSON_AddNumberToObject(o, h->a->experts_member ? h->a->experts_member : "num_experts", (double)h->n_exp))
		return tpc_err_nomem(h->e);
	/* the token ids the GGUF holds; a GGUF without a padding id says the
	 * model has none: null, not the config class's default (SmolLM3Config's
	 * 128004, past a small vocabulary: from_pretrained fails; Gemma's 0,
	 * GLM-4's 151329, OLMo's 1) */
	static const struct {
		const char *member, *key;
		bool null;
	} ids[] = {{"bos_token_id", "tokenizer.ggml.bos_token_id", false},
		   {"eos_token_id", "tokenizer.ggml.eos_token_id", false},
		   {"pad_token_id", "tokenizer.ggml.padding_token_id", true}};
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		int64_t v = kv_int(kv_get(kv, NULL, ids[i].key));
		if (v >= 0 ? !cJSON_AddNumberToObject(o, ids[i].member, (double)v)
			   : ids[i].null && !cJSON_AddNullToObject(o, ids[i].member))
			return tpc_err_nomem(h->e);
	}
	/* a HunYuan vocabulary's eos member (HunYuanModel's eod_token_id, written
	 * as the eos id): the GGUF's eos, null without one (not its default) */
	const char *em = h->a->hy ? h->a->hy->eos_member : NULL;
	int64_t eos = kv_int(kv_get(kv, NULL, "tokenizer.ggml.eos_token_id"));
	if (em && (eos >= 0 ? !cJSON_AddNumberToObject(o, em, (double)eos) : !cJSON_AddNullToObject(o, em)))
		return tpc_err_nomem(h->e);
	return 0;
}

int tpc__gguf_hf_config(const tpc_ckpt *ck, char **json, tpc_err *e)
{
	const tpc_gguf_kvs *kv = tpc_gguf_ckpt_kvs(ck);
	hfctx h;
	memset(&h, 0, sizeof(h));
	h.ck = (tpc_ckpt *)ck; /* only looked up */
	*json = NULL;
	if (!kv)
		return tpc_err_at(e, TPC_EINPUT, ck->path, NULL, "internal: not a checkpoint read from GGUF");
	int ret = hf_init(&h, ck, kv, e);
	if (ret)
		return ret;
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return tpc_err_nomem(e);
	ret = cfg_common(o, &h, kv);
	if (!ret)
		ret = cfg_rope_alpha(o, &h, kv);
	if (!ret)
		ret = cfg_rules(o, &h, kv, h.a->hf_cfg);
	if (!ret)
		ret = cfg_rope(o, &h, kv, kv_int(kv_get(kv, h.arch, "embedding_length")));
	if (!ret && !(*json = tpc_extras_config_text(o)))
		ret = tpc_err_nomem(e);
	cJSON_Delete(o);
	return ret;
}
