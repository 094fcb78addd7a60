/* tpc_qsplit.c - the splits of quantized layers' companion tensors; see tpc_qsplit.h. */
#include "tpc_qsplit.h"

#include <stdio.h>
#include <string.h>

#include "tpc_shard.h"
#include "tpc_util.h"

typedef enum { AX_WHOLE = -1 } axis_kind;

/* How one companion lies against its layer's weight [out, in]. */
typedef struct comp {
	int out_axis, in_axis;   /* AX_WHOLE: not split along that feature axis */
	int64_t out_unit, in_unit;
} comp;

static const char *suffix_of(const char *name, const char *const *sufs, size_t *base_len)
{
	size_t n = strlen(name);
	for (; *sufs; sufs++) {
		size_t l = strlen(*sufs);
		if (n > l + 1 && name[n - l - 1] == '.' && !strcmp(name + n - l, *sufs)) {
			*base_len = n - l - 1;
			return *sufs;
		}
	}
	return NULL;
}

int tpc__shape_read(const tpc_ckpt *ck, const tpc_tensor *t, int64_t v[2], tpc_err *e)
{
	uint8_t b[16];
	int ret;
	if (t->ndim != 1 || t->shape[0] != 2 || (t->src_dtype != TPC_I64 && t->src_dtype != TPC_I32)) {
		return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "weight_shape must be 2 integers (I32 or I64), not %s", tpc_dtype_name(t->src_dtype));
	}
	if ((ret = tpc_ckpt_read_bytes(ck, t, 0, t->src_dtype == TPC_I64 ? 16 : 8, b, e)))
		return ret;
	for (int i = 0; i < 2; i++) {
		if (t->src_dtype == TPC_I64) {
			memcpy(&v[i], b + 8 * i, 8);
		} else {
			int32_t x;
			memcpy(&x, b + 4 * i, 4);
			v[i] = x;
		}
		if (v[i] < 1) {
			return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "weight_shape[%d] is %lld", i, (long long)v[i]);
		}
	}
	return 0;
}

int tpc__shape_add(tpc_ckpt *ck, const tpc_tensor *t, const int64_t v[2], const char *label, int *idx, tpc_err *e)
{
	uint8_t *b = tpc_malloc(16);
	if (!b)
		return tpc_err_nomem(e);
	for (int i = 0; i < 2; i++) {
		if (t->src_dtype == TPC_I64) {
			memcpy(b + 8 * i, &v[i], 8);
		} else {
			int32_t x = (int32_t)v[i];
			memcpy(b + 4 * i, &x, 4);
		}
	}
	return tpc_ckpt_add_mem(ck, label, b, t->src_dtype == TPC_I64 ? 16 : 8, idx, e);
}

static const tpc_tensor *sibling(const tpc_ckpt *in, const char *name, size_t base_len, const char *suf)
{
	char buf[1024];
	if (base_len + strlen(suf) + 2 > sizeof(buf))
		return NULL;
	snprintf(buf, sizeof(buf), "%.*s.%s", (int)base_len, name, suf);
	int64_t i = tpc_ckpt_find(in, buf);
	return i >= 0 ? &in->t[i] : NULL;
}

/* --pad for an FP8 block-quantized layer: each part of its weight's split
 * whose rank slices would cut a block is zero-padded at its end to a multiple
 * of block x tp, so every rank's slice is whole blocks. Head splits are left
 * alone (a slice must be whole heads; padding would move the boundaries), as
 * is a part one rank holds whole (its last block may be partial as stored). */
static void fp8_block_pad(tpc_split *ws, int64_t unit, int tp, unsigned flags)
{
	if (!(flags & TPC_RESOLVE_PAD) || ws->dim < 0 || ws->row_bias || ws->kind == TPC_SPLIT_VOCAB || unit < 1)
		return;
	int g = tpc_split_tp(ws, tp);
	for (int k = 0; k < ws->nparts; k++) {
		tpc_split_part *pt = &ws->part[k];
		if (pt->heads || pt->replicas > 1 || g == 1 || tpc_split_rank_len(ws, k, tp) % unit == 0)
			continue;
		int64_t m = unit * g;
		pt->pad = (m - pt->size % m) % m;
	}
}

int tpc__quant_pad_weight(const tpc_model_facts *f, const tpc_ckpt *in, const tpc_tensor *t, int tp, unsigned flags,
			  tpc_split *s)
{
	const tpc_qs_cfg *q = &f->quant;
	static const char *const w[] = {"weight", NULL};
	size_t bl = 0;
	if (q->method != TPC_QS_FP8 || !q->block[0] || !(flags & TPC_RESOLVE_PAD) || t->ndim != 2 || s->dim < 0 ||
	    s->dim > 1 || !suffix_of(t->name, w, &bl))
		return 0;
	const tpc_tensor *sc = sibling(in, t->name, bl, "weight_scale_inv");
	if (!sc || sc->ndim != 2)
		return 0;
	fp8_block_pad(s, q->block[s->dim], tp, flags);
	return 1;
}

/* GPTQ and AWQ: qweight, qzeros, scales (and GPTQ's g_idx) against the layer's
 * weight [out, in] as the packed qweight implies it (vshape). 1: a companion
 * (*c how it lies), 0: not one. */
static int comp_gptq_awq(const tpc_qs_cfg *q, const tpc_ckpt *in, const char *name, const char **suf, size_t *bl,
			 int64_t vshape[2], comp *c)
{
	static const char *const packed[] = {"qweight", "qzeros", "scales", "g_idx", NULL};
	if (!(*suf = suffix_of(name, packed, bl)) || !q->bits)
		return 0;
	int64_t pk = 32 / q->bits;
	const tpc_tensor *qw = sibling(in, name, *bl, "qweight");
	if (!qw || qw->ndim != 2)
		return 0;
	bool gptq = q->method == TPC_QS_GPTQ;
	/* the layer's weight [out, in] as the packed qweight implies it */
	vshape[0] = gptq ? qw->shape[1] : qw->shape[1] * pk;
	vshape[1] = gptq ? qw->shape[0] * pk : qw->shape[0];
	int64_t g = q->group > 0 ? q->group : vshape[1];
	if (!strcmp(*suf, "qweight"))
		*c = gptq ? (comp){1, 0, 1, pk} : (comp){1, 0, pk, 1};
	else if (!strcmp(*suf, "qzeros"))
		*c = (comp){1, 0, pk, g};
	else if (!strcmp(*suf, "scales"))
		*c = (comp){1, 0, 1, g};
	else if (gptq) /* g_idx */
		*c = (comp){AX_WHOLE, 0, 1, 1};
	else
		return 0;
	if (gptq && q->desc_act && (!strcmp(*suf, "qzeros") || !strcmp(*suf, "scales")))
		c->in_axis = AX_WHOLE; /* act-order: groups are not contiguous in the input */
	return 1;
}

/* compressed-tensors pack-quantized: weight_packed, weight_scale,
 * weight_zero_point, weight_g_idx and weight_shape against the layer's weight
 * as weight_shape gives it. 1: a companion, 0: not one, or an error. */
static int comp_packed(const tpc_qs_cfg *q, const tpc_ckpt *in, const char *name, const char **suf, size_t *bl,
		       int64_t vshape[2], comp *c, tpc_err *e)
{
	static const char *const ct[] = {"weight_packed", "weight_scale", "weight_zero_point", "weight_g_idx",
					 "weight_shape", NULL};
	if (!(*suf = suffix_of(name, ct, bl)) || !q->bits)
		return 0;
	int64_t pk = 32 / q->bits;
	const tpc_tensor *wp = sibling(in, name, *bl, "weight_packed");
	const tpc_tensor *wsh = sibling(in, name, *bl, "weight_shape");
	if (!wp || wp->ndim != 2)
		return 0;
	/* the layer's weight [out, in]: weight_shape says (the packed input may be padded) */
	vshape[0] = wp->shape[0];
	vshape[1] = wp->shape[1] * pk;
	if (wsh && tpc__shape_read(in, wsh, vshape, e))
		return TPC_EINPUT;
	if (vshape[0] != wp->shape[0] || (vshape[1] + pk - 1) / pk != wp->shape[1]) {
		return tpc_err_at(e, TPC_EINPUT, NULL, wsh->name, "weight_shape says [%lld, %lld], but weight_packed is [%lld, %lld] (%lld values per int32)",
			    (long long)vshape[0], (long long)vshape[1], (long long)wp->shape[0], (long long)wp->shape[1],
			    (long long)pk);
	}
	int64_t g = q->group > 0 ? q->group : vshape[1];
	if (!strcmp(*suf, "weight_packed"))
		*c = (comp){0, 1, 1, pk};
	else if (!strcmp(*suf, "weight_scale"))
		*c = (comp){0, q->group > 0 ? 1 : AX_WHOLE, 1, g};
	else if (!strcmp(*suf, "weight_zero_point"))
		*c = (comp){0, q->group > 0 ? 1 : AX_WHOLE, pk, g};
	else if (!strcmp(*suf, "weight_g_idx"))
		*c = (comp){AX_WHOLE, 0, 1, 1};
	else
		*c = (comp){AX_WHOLE, AX_WHOLE, 1, 1}; /* weight_shape: rewritten (shape_split) */
	if (q->desc_act && (!strcmp(*suf, "weight_scale") || !strcmp(*suf, "weight_zero_point")))
		c->in_axis = AX_WHOLE; /* actorder "group": groups are not contiguous in the input */
	if (vshape[1] % pk && strcmp(*suf, "weight_shape")) {
		/* padded packing: a row split would move the padding into the middle */
		c->in_axis = c->in_axis == AX_WHOLE ? AX_WHOLE : -2;
	}
	return 1;
}

/* FP8: weight_scale_inv (per block), weight_scale (per output channel or per
 * tensor) and input_scale against the layer's weight. 1: a companion, 0: not
 * one. */
static int comp_fp8(const tpc_qs_cfg *q, const tpc_ckpt *in, const tpc_tensor *t, const char **suf, size_t *bl,
		    int64_t vshape[2], comp *c)
{
	static const char *const fp8[] = {"weight_scale_inv", "weight_scale", "input_scale", NULL};
	if (!(*suf = suffix_of(t->name, fp8, bl)))
		return 0;
	const tpc_tensor *w = sibling(in, t->name, *bl, "weight");
	if (!w || w->ndim != 2)
		return 0;
	vshape[0] = w->shape[0];
	vshape[1] = w->shape[1];
	if (!strcmp(*suf, "weight_scale_inv")) {
		if (!q->block[0] || t->ndim != 2)
			return 0;
		*c = (comp){0, 1, q->block[0], q->block[1]};
	} else if (!strcmp(*suf, "weight_scale") && t->ndim >= 1 && t->shape[0] == vshape[0] && vshape[0] > 1) {
		*c = (comp){0, AX_WHOLE, 1, 1}; /* per output channel */
	} else {
		*c = (comp){AX_WHOLE, AX_WHOLE, 1, 1}; /* per tensor */
	}
	return 1;
}

/* NVFP4 / MXFP4 (compressed-tensors, ModelOpt): the packed u8 [out, in/2]
 * two values a byte, the scales one per group of inputs, the per-tensor
 * scales whole (vLLM's loaders give every rank the same). 1: a companion, 0:
 * not one. */
static int comp_fp4(const tpc_qs_cfg *q, const tpc_ckpt *in, const tpc_tensor *t, const char **suf, size_t *bl,
		    int64_t vshape[2], comp *c)
{
	static const char *const ct[] = {"weight_packed", "weight_scale", "weight_global_scale", "input_global_scale",
					 NULL};
	static const char *const mo[] = {"weight", "weight_scale_2", "weight_scale", "input_scale", NULL};
	if (!(*suf = suffix_of(t->name, q->modelopt ? mo : ct, bl)) || q->group < 1)
		return 0;
	const tpc_tensor *wp = sibling(in, t->name, *bl, q->modelopt ? "weight" : "weight_packed");
	if (!wp || wp->ndim != 2 || wp->src_dtype != TPC_U8)
		return 0;
	vshape[0] = wp->shape[0];
	vshape[1] = wp->shape[1] * 2;
	if (t == wp)
		*c = (comp){0, 1, 1, 2};
	else if (!strcmp(*suf, "weight_scale"))
		*c = (comp){0, 1, 1, q->group};
	else
		*c = (comp){AX_WHOLE, AX_WHOLE, 1, 1}; /* one value for the tensor */
	return 1;
}

/* X_blocks u8 [E, R, G, 16] and X_scales [E, R, G] (quant_method "mxfp4",
 * gpt-oss): the companions of layer X, which transformers builds [E, G * 32,
 * R] (stacked experts, [in, out]); *lname gets X. 1: a companion, 0: not
 * one (or not of this shape). */
int tpc__quant_blocks_layer(const tpc_model_facts *f, const tpc_ckpt *in, const tpc_tensor *t, char *lname, size_t n,
			    int64_t vshape[3])
{
	size_t l = strlen(t->name), k;
	const char *suf = NULL;
	if (!f || f->quant.method != TPC_QS_FP4 || !f->quant.mx_blocks)
		return 0;
	if (l > 7 && !strcmp(t->name + l - 7, "_blocks"))
		suf = "_blocks";
	else if (l > 7 && !strcmp(t->name + l - 7, "_scales"))
		suf = "_scales";
	k = l - 7;
	if (!suf || k + 8 > n)
		return 0;
	snprintf(lname, n, "%.*s_blocks", (int)k, t->name);
	int64_t ib = tpc_ckpt_find(in, lname);
	const tpc_tensor *b = ib >= 0 ? &in->t[ib] : NULL;
	lname[k] = 0;
	if (!b || b->ndim != 4 || b->shape[3] != 16 || b->src_dtype != TPC_U8)
		return 0;
	vshape[0] = b->shape[0];
	vshape[1] = b->shape[2] * 32;
	vshape[2] = b->shape[1];
	return 1;
}

static int64_t unit_parts(const tpc_qs_cfg *q, const tpc_split *ws, int64_t unit, int tp, const char *wname,
			  const char *name, tpc_split *out, tpc_err *e);

/*
 * vLLM's cut of gpt-oss's MXFP4 intermediate (vllm/model_executor/models/
 * gpt_oss.py @0025d69 GptOssModel.load_weights): with nb = intermediate / 32
 * blocks, per_rank_intermediate_size_block = cdiv(nb, tp_size), tp_rank_start
 * = tp_rank * per_rank * 32, tp_rank_end = min(start + per_rank * 32,
 * intermediate); down_proj's blocks and scales narrowed on those inputs,
 * gate_up_proj's blocks, scales and bias on rows 2*start .. 2*end. The last
 * ranks hold fewer blocks, unpadded: FusedMoE.weight_loader copies an mxfp4
 * slice into the corner of its parameter (fused_moe/layer.py,
 * param.data[:, :dim1, :dim2].copy_), whose zeros after it are the kernel's
 * padding (quantization/mxfp4.py @007d500 Mxfp4MoEMethod.create_weights:
 * round_up(intermediate_size_per_partition, 64/128/256)), not the slice's;
 * MLPBlock asserts intermediate_size % world_size == 0. A rank past the
 * last block holds none (an empty slice, as vLLM narrows and loads it:
 * gpt-oss-20b's 90 blocks over 16 ranks, 6 each, the 16th none). s's dimension (one
 * part, size entries) holds nb blocks of blk entries (32 inputs, or 64
 * interleaved [gate, up] rows: the rule's unit x 32), cut over g ranks.
 * An even cut is the plan's own; other shapes are left to unit_parts.
 */
static int vllm_refuses(const char *lname, const char *name, int64_t nb, int g, tpc_err *e)
{
	return tpc_err_at(e, TPC_EINPUT, NULL, name,
		    "its layer '%s' has %lld intermediate features (%lld MXFP4 blocks of 32), not a multiple of the %d ranks splitting it: vLLM's gpt_oss.py does not load that (MLPBlock asserts intermediate_size %% world_size == 0); choose a tp that divides it",
		    lname, (long long)nb * 32, (long long)nb, g);
}

/* Before the plan's split (whose refusal would suggest --pad, which blocks
 * cannot take): layer X [E, I, R] (vs) by rule `rule` over g ranks is one
 * vLLM loads, as far as its intermediate goes. */
static int mx_precondition(const tpc_plan *p, const int64_t vs[3], int g, const char *lname, const char *name,
			   tpc_err *e)
{
	int rule = tpc_plan_match(p, lname), d = rule >= 0 ? tpc_plan_rule_dim(p, rule, 3, NULL) : -1;
	if (d != 1 && d != 2)
		return 0;
	int64_t blk = d == 1 ? 32 : 32 * (p->rules[rule].unit > 1 ? p->rules[rule].unit : 1);
	if (vs[d] % blk == 0 && (vs[d] / blk * 32) % g)
		return vllm_refuses(lname, name, vs[d] / blk, g, e);
	return 0;
}

static int mx_cut(tpc_split *s, int64_t blk, int g, const char *lname, const char *name, tpc_err *e)
{
	tpc_split_part *pt = &s->part[0];
	if (s->dim < 0 || s->row_bias || g <= 1 || s->nparts != 1 || pt->heads || pt->replicas > 1 || pt->pad ||
	    blk < 32 || pt->size % blk || (pt->size / blk) % g == 0)
		return 0;
	int64_t nb = pt->size / blk, per = (nb + g - 1) / g, inter = nb * 32;
	if (inter % g)
		return vllm_refuses(lname, name, nb, g, e);
	pt->pad = per * g * blk - pt->size;
	pt->uneven = true;
	return 0;
}

int tpc__quant_mx_cut(const tpc_plan *p, const tpc_model_facts *f, const tpc_ckpt *in, const tpc_tensor *t, int tp,
		      tpc_split *s, tpc_err *e)
{
	char bname[1024];
	size_t l = strlen(t->name);
	if (!f || f->quant.method != TPC_QS_FP4 || !f->quant.mx_blocks || s->dim < 0 || s->dim != t->ndim - 1 ||
	    l <= 5 || strcmp(t->name + l - 5, "_bias") || l + 3 > sizeof(bname))
		return 0;
	snprintf(bname, sizeof(bname), "%.*s_blocks", (int)(l - 5), t->name);
	if (tpc_ckpt_find(in, bname) < 0)
		return 0;
	int64_t u = s->rule >= 0 && (size_t)s->rule < p->nrules && p->rules[s->rule].unit > 1 ? p->rules[s->rule].unit : 1;
	bname[l - 5] = 0;
	return mx_cut(s, 32 * u, tp, bname, t->name, e);
}

int tpc__quant_mx_check(const tpc_plan *p, const tpc_model_facts *f, const tpc_ckpt *in, const tpc_tensor *t, int tp,
			tpc_err *e)
{
	char lname[1024];
	int64_t vs[3];
	size_t l = strlen(t->name);
	if (!f || f->quant.method != TPC_QS_FP4 || !f->quant.mx_blocks)
		return 0;
	if (tpc__quant_blocks_layer(f, in, t, lname, sizeof(lname), vs))
		return mx_precondition(p, vs, tp, lname, t->name, e);
	if (l <= 5 || strcmp(t->name + l - 5, "_bias") || l + 3 > sizeof(lname))
		return 0;
	snprintf(lname, sizeof(lname), "%.*s_blocks", (int)(l - 5), t->name);
	int64_t ib = tpc_ckpt_find(in, lname);
	const tpc_tensor *b = ib >= 0 ? &in->t[ib] : NULL;
	if (!b || b->ndim != 4 || b->shape[3] != 16)
		return 0;
	lname[l - 5] = 0;
	int64_t bs[3] = {b->shape[0], b->shape[2] * 32, b->shape[1]};
	return mx_precondition(p, bs, tp, lname, t->name, e);
}

int tpc__quant_mx_layer(const tpc_plan *p, int tp, tpc_split *ws, const char *lname, tpc_err *e)
{
	int64_t u = ws->rule >= 0 && (size_t)ws->rule < p->nrules && p->rules[ws->rule].unit > 1 ? p->rules[ws->rule].unit : 1;
	return ws->dim == 1 || ws->dim == 2 ? mx_cut(ws, ws->dim == 1 ? 32 : 32 * u, tp, lname, lname, e) : 0;
}

/* A blocks/scales companion (tpc__quant_blocks_layer) splits as its layer
 * [E, I, R]: by experts (dim 0), by whole rows R (blocks and scales dim 1)
 * or by whole blocks of 32 inputs I (dim 2), as vLLM's gpt_oss.py
 * load_weights narrows w13 / w2 and their scales. */
static int blocks_split(const tpc_plan *p, const tpc_model_facts *f, const tpc_ckpt *in, const tpc_tensor *t, int tp,
			unsigned flags, tpc_split *out, tpc_err *e)
{
	char lname[1024];
	int64_t vs[3];
	if (!tpc__quant_blocks_layer(f, in, t, lname, sizeof(lname), vs))
		return 0;
	bool blk = t->ndim == 4;
	if (t->ndim != (blk ? 4 : 3) || t->shape[0] != vs[0] || t->shape[1] != vs[2] || t->shape[2] != vs[1] / 32) {
		char s1[128];
		return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "MXFP4 scales must be [%lld, %lld, %lld] (one per block of '%s_blocks'), not %s",
				  (long long)vs[0], (long long)vs[2], (long long)(vs[1] / 32), lname, tpc_shape_str(t, s1, sizeof(s1)));
	}
	tpc_split ws;
	bool matched = false;
	tpc_err e2;
	tpc_err_init(&e2);
	if (tpc_plan_resolve(p, f, lname, 3, vs, tp, flags, &ws, &matched, &e2))
		return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "its layer '%s' (as [%lld, %lld, %lld] from the MXFP4 blocks) cannot be split: %s",
				  lname, (long long)vs[0], (long long)vs[1], (long long)vs[2], e2.msg);
	if (!matched)
		return 0;
	int cut = ws.row_bias ? 0 : tpc__quant_mx_layer(p, tp, &ws, lname, e);
	if (cut)
		return cut;
	*out = ws;
	if (ws.dim < 0 || ws.row_bias) {
		out->dim = -1;
		return 1;
	}
	static const int axis[3] = {0, 2, 1};
	if (ws.dim > 2)
		return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "its layer '%s' is split on dim %d of 3", lname, ws.dim);
	out->dim = axis[ws.dim];
	int64_t total = unit_parts(&f->quant, &ws, ws.dim == 1 ? 32 : 1, tp, lname, t->name, out, e);
	if (total < 0)
		return (int)total;
	if (total != t->shape[out->dim])
		return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "dimension %d is %lld, but its layer '%s' implies %lld", out->dim,
				  (long long)t->shape[out->dim], lname, (long long)total);
	return 1;
}

/* compressed-tensors' weight_shape beside a layer split as ws: every rank
 * holds the shape of its slice of the layer. */
static int shape_split(const tpc_split *ws, int tp, const tpc_tensor *t, const char *wname, tpc_split *out,
		       tpc_err *e)
{
	if (t->ndim != 1 || t->shape[0] != 2 || ws->dim > 1 || ws->nparts < 1) {
		return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "weight_shape must be [2] beside a 2-D layer split on dim 0 or 1");
	}
	for (int k = 0; k < ws->nparts; k++)
		if (ws->part[k].pad) {
			return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "its layer '%s' is padded: a compressed-tensors layer splits evenly or not at all", wname);
		}
	out->is_shape = true;
	out->shape_dim = ws->dim;
	out->shape_len = tpc_split_rank_dim(ws, tp);
	return 1;
}

/* FP8 blocks: weight_scale_inv holds ceil(rows / block) entries, the last one
 * possibly for a partial block. A rank's slice must be whole blocks, except a
 * part one rank holds whole; a block may not straddle two parts. Padded
 * blocks' scales are zero (the pad is zero bytes, as every pad; their weights
 * are zero, so any scale dequantizes them to zero) and merge strips them.
 * out's parts (those of the layer's split ws) become counts of blocks; the
 * entries in all, or an error. */
static int64_t block_parts(const tpc_qs_cfg *q, const tpc_split *ws, int64_t unit, int tp, const char *wname,
			   const char *name, tpc_split *out, tpc_err *e)
{
	int64_t total = 0;
	for (int k = 0; k < ws->nparts; k++) {
		tpc_split_part *pt = &out->part[k];
		int64_t len = tpc_split_rank_len(ws, k, tp), padded = pt->size + pt->pad;
		bool whole = len == padded && !pt->pad && k == ws->nparts - 1;
		if (k < ws->nparts - 1 && pt->size % unit) {
			return tpc_err_at(e, TPC_EINPUT, NULL, name,
				    "its layer '%s' has a part %d of %lld %s, not a multiple of %lld (the fp8 weight_block_size): a block would straddle two parts",
				    wname, k, (long long)pt->size, ws->dim == 0 ? "output features" : "input features",
				    (long long)unit);
		}
		if (len % unit && !whole) {
			char hint[160];
			if (pt->heads || pt->replicas > 1)
				snprintf(hint, sizeof(hint), "a head split is not padded (a slice must be whole heads); choose a tp where it divides");
			else
				snprintf(hint, sizeof(hint), "use --pad to zero-pad it to a multiple of %lld (block x tp), or choose a tp where it divides",
					 (long long)unit * tpc_split_tp(ws, tp));
			return tpc_err_at(e, TPC_EINPUT, NULL, name,
				    "its layer '%s' is split %s into %lld %s per rank%s, not a multiple of %lld (the fp8 weight_block_size): a rank's slice at tp %d would cut a %lld x %lld block; %s",
				    wname, tpc_split_kind_name(ws->kind), (long long)len,
				    ws->dim == 0 ? "output features" : "input features", ws->nparts > 1 ? " in a part" : "",
				    (long long)unit, tpc_split_tp(ws, tp), (long long)q->block[0], (long long)q->block[1], hint);
		}
		int64_t cs = (pt->size + unit - 1) / unit;
		pt->pad = (padded + unit - 1) / unit - cs;
		pt->size = cs;
		total += cs;
	}
	return total;
}

/* Packed values, groups or per-channel entries: out's parts (those of the
 * layer's split ws) become counts of whole units, each rank's slice too; the
 * entries in all, or an error. */
static int64_t unit_parts(const tpc_qs_cfg *q, const tpc_split *ws, int64_t unit, int tp, const char *wname,
			  const char *name, tpc_split *out, tpc_err *e)
{
	int64_t total = 0;
	for (int k = 0; k < ws->nparts; k++) {
		tpc_split_part *pt = &out->part[k];
		int64_t len = tpc_split_rank_len(ws, k, tp);
		if (pt->size % unit || pt->pad % unit || len % unit) {
			return tpc_err_at(e, TPC_EINPUT, NULL, name,
				    "its layer '%s' is split %s into %lld %s per rank%s, not a multiple of %lld (%s): a rank's slice would cut one (choose a tp where it divides)",
				    wname, tpc_split_kind_name(ws->kind), (long long)len,
				    ws->dim == 0 ? "output features" : "input features",
				    ws->nparts > 1 ? " in a part" : "", (long long)unit,
				    q->method == TPC_QS_FP8 ? "the fp8 weight_block_size"
				    : q->method == TPC_QS_FP4 ? (unit == 2 ? "the two 4-bit values of a byte"
								 : "the inputs of one FP4 scale")
				    : q->method == TPC_QS_PACKED && unit == (32 / q->bits) && ws->dim == 1 ? "the features packed in one int32"
				    : unit == q->group ? "the group_size" : "the features packed in one int32");
		}
		pt->size /= unit;
		pt->pad /= unit;
		total += pt->size;
	}
	return total;
}

int tpc__quant_split(const tpc_plan *p, const tpc_model_facts *f, const tpc_ckpt *in, const tpc_tensor *t, int tp,
		     unsigned flags, tpc_split *out, tpc_err *e)
{
	const tpc_qs_cfg *q = &f->quant;
	const char *name = t->name, *suf = NULL;
	size_t bl = 0;
	int64_t vshape[2] = {0, 0};
	comp c = {AX_WHOLE, AX_WHOLE, 1, 1};
	int ret = 0;
	if (q->method == TPC_QS_FP4 && q->mx_blocks)
		return blocks_split(p, f, in, t, tp, flags, out, e);
	if (q->method == TPC_QS_GPTQ || q->method == TPC_QS_AWQ)
		ret = comp_gptq_awq(q, in, name, &suf, &bl, vshape, &c);
	else if (q->method == TPC_QS_PACKED)
		ret = comp_packed(q, in, name, &suf, &bl, vshape, &c, e);
	else if (q->method == TPC_QS_FP8)
		ret = comp_fp8(q, in, t, &suf, &bl, vshape, &c);
	else if (q->method == TPC_QS_FP4)
		ret = comp_fp4(q, in, t, &suf, &bl, vshape, &c);
	if (ret <= 0)
		return ret;
	/* the split the layer's weight would get */
	char wname[1024];
	snprintf(wname, sizeof(wname), "%.*s.weight", (int)bl, name);
	tpc_split ws;
	bool matched = false;
	tpc_err e2;
	tpc_err_init(&e2);
	if (tpc_plan_resolve(p, f, wname, 2, vshape, tp, flags, &ws, &matched, &e2)) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "its layer '%s' (as [%lld, %lld] from the %s tensors) cannot be split: %s", wname,
			    (long long)vshape[0], (long long)vshape[1], q->name, e2.msg);
	}
	if (!matched)
		return 0;
	memset(out, 0, sizeof(*out));
	out->kind = ws.kind;
	out->rule = ws.rule;
	out->dim = -1;
	if (ws.dim < 0 || ws.row_bias)
		return 1; /* a replicated layer: its companions too */
	int axis = ws.dim == 0 ? c.out_axis : c.in_axis;
	int64_t unit = ws.dim == 0 ? c.out_unit : c.in_unit;
	if (q->method == TPC_QS_PACKED && !strcmp(suf, "weight_shape"))
		return shape_split(&ws, tp, t, wname, out, e);
	if (axis == -2) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name,
			    "its layer '%s' has %lld input features, not a multiple of the %d packed in one int32: the packing is padded at the end of each row, and a row split would put the padding inside a rank's slice",
			    wname, (long long)vshape[1], 32 / q->bits);
	}
	if (axis == AX_WHOLE)
		return 1;
	bool blocks = q->method == TPC_QS_FP8 && !strcmp(suf, "weight_scale_inv");
	if (blocks && ws.dim <= 1)
		fp8_block_pad(&ws, unit, tp, flags); /* as its weight was padded (tpc__quant_pad_weight) */
	if (axis >= t->ndim) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "a %s companion of %d dimensions, expected %d", q->name, t->ndim, axis + 1);
	}
	*out = ws;
	out->dim = axis;
	int64_t total = blocks ? block_parts(q, &ws, unit, tp, wname, name, out, e)
			       : unit_parts(q, &ws, unit, tp, wname, name, out, e);
	if (total < 0)
		return (int)total;
	if (total != t->shape[axis]) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "dimension %d is %lld, but its layer '%s' [%lld, %lld] implies %lld", axis,
			    (long long)t->shape[axis], wname, (long long)vshape[0], (long long)vshape[1], (long long)total);
	}
	return 1;
}
