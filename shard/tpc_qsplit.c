/* tpc_qsplit.c - the splits of quantized layers' companion tensors; see tpc_qsplit.h. */
#include "tpc_qsplit.h"

#include <stdio.h>
#include <string.h>

#include "tpc_util.h"

void tpc_qs_from_json(tpc_qs_cfg *q, const cJSON *qc)
{
	memset(q, 0, sizeof(*q));
	if (!cJSON_IsObject(qc))
		return;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(qc, "quant_method");
	const cJSON *bits = cJSON_GetObjectItemCaseSensitive(qc, "bits");
	const cJSON *gs = cJSON_GetObjectItemCaseSensitive(qc, "group_size");
	const cJSON *da = cJSON_GetObjectItemCaseSensitive(qc, "desc_act");
	const cJSON *bs = cJSON_GetObjectItemCaseSensitive(qc, "weight_block_size");
	const char *name = cJSON_IsString(m) ? m->valuestring : "";
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->method = !strcmp(name, "gptq") ? TPC_QS_GPTQ
		    : !strcmp(name, "awq") ? TPC_QS_AWQ
		    : !strcmp(name, "fp8") ? TPC_QS_FP8
					    : TPC_QS_OTHER;
	if (cJSON_IsNumber(bits) && (bits->valueint == 2 || bits->valueint == 4 || bits->valueint == 8))
		q->bits = bits->valueint; /* 3-bit packs across words: not split here */
	if (cJSON_IsNumber(gs) && (gs->valuedouble == -1 || (gs->valuedouble >= 1 && gs->valuedouble <= (1 << 20))))
		q->group = (int64_t)gs->valuedouble;
	q->desc_act = cJSON_IsTrue(da);
	if (cJSON_IsArray(bs) && cJSON_GetArraySize(bs) == 2) {
		for (int i = 0; i < 2; i++) {
			const cJSON *b = cJSON_GetArrayItem(bs, i);
			if (cJSON_IsNumber(b) && b->valuedouble >= 1 && b->valuedouble <= (1 << 20))
				q->block[i] = (int64_t)b->valuedouble;
		}
		if (!q->block[0] || !q->block[1])
			q->block[0] = q->block[1] = 0;
	}
}

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

int tpc__quant_split(const tpc_plan *p, const tpc_model_facts *f, const tpc_ckpt *in, const tpc_tensor *t, int tp,
		     unsigned flags, tpc_split *out, tpc_err *e)
{
	static const char *const packed[] = {"qweight", "qzeros", "scales", "g_idx", NULL};
	static const char *const fp8[] = {"weight_scale_inv", "weight_scale", "input_scale", NULL};
	const tpc_qs_cfg *q = &f->quant;
	const char *name = t->name, *suf;
	size_t bl = 0;
	int64_t vshape[2];
	comp c = {AX_WHOLE, AX_WHOLE, 1, 1};
	if (q->method == TPC_QS_GPTQ || q->method == TPC_QS_AWQ) {
		if (!(suf = suffix_of(name, packed, &bl)) || !q->bits)
			return 0;
		int64_t pk = 32 / q->bits;
		const tpc_tensor *qw = sibling(in, name, bl, "qweight");
		if (!qw || qw->ndim != 2)
			return 0;
		bool gptq = q->method == TPC_QS_GPTQ;
		/* the layer's weight [out, in] as the packed qweight implies it */
		vshape[0] = gptq ? qw->shape[1] : qw->shape[1] * pk;
		vshape[1] = gptq ? qw->shape[0] * pk : qw->shape[0];
		int64_t g = q->group > 0 ? q->group : vshape[1];
		if (!strcmp(suf, "qweight"))
			c = gptq ? (comp){1, 0, 1, pk} : (comp){1, 0, pk, 1};
		else if (!strcmp(suf, "qzeros"))
			c = (comp){1, 0, pk, g};
		else if (!strcmp(suf, "scales"))
			c = (comp){1, 0, 1, g};
		else if (gptq) /* g_idx */
			c = (comp){AX_WHOLE, 0, 1, 1};
		else
			return 0;
		if (gptq && q->desc_act && (!strcmp(suf, "qzeros") || !strcmp(suf, "scales")))
			c.in_axis = AX_WHOLE; /* act-order: groups are not contiguous in the input */
	} else if (q->method == TPC_QS_FP8) {
		if (!(suf = suffix_of(name, fp8, &bl)))
			return 0;
		const tpc_tensor *w = sibling(in, name, bl, "weight");
		if (!w || w->ndim != 2)
			return 0;
		vshape[0] = w->shape[0];
		vshape[1] = w->shape[1];
		if (!strcmp(suf, "weight_scale_inv")) {
			if (!q->block[0] || t->ndim != 2)
				return 0;
			c = (comp){0, 1, q->block[0], q->block[1]};
		} else if (!strcmp(suf, "weight_scale") && t->ndim >= 1 && t->shape[0] == vshape[0] && vshape[0] > 1) {
			c = (comp){0, AX_WHOLE, 1, 1}; /* per output channel */
		} else {
			c = (comp){AX_WHOLE, AX_WHOLE, 1, 1}; /* per tensor */
		}
	} else {
		return 0;
	}
	/* the split the layer's weight would get */
	char wname[1024];
	snprintf(wname, sizeof(wname), "%.*s.weight", (int)bl, name);
	tpc_split ws;
	bool matched = false;
	tpc_err e2;
	tpc_err_init(&e2);
	if (tpc_plan_resolve(p, f, wname, 2, vshape, tp, flags, &ws, &matched, &e2)) {
		tpc_err_set(e, TPC_EINPUT, "its layer '%s' (as [%lld, %lld] from the %s tensors) cannot be split: %s", wname,
			    (long long)vshape[0], (long long)vshape[1], q->name, e2.msg);
		tpc_err_tensor(e, name);
		return TPC_EINPUT;
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
	if (axis == AX_WHOLE)
		return 1;
	bool blocks = q->method == TPC_QS_FP8 && !strcmp(suf, "weight_scale_inv");
	if (blocks && ws.dim <= 1)
		fp8_block_pad(&ws, unit, tp, flags); /* as its weight was padded (tpc__quant_pad_weight) */
	if (axis >= t->ndim) {
		tpc_err_set(e, TPC_EINPUT, "a %s companion of %d dimensions, expected %d", q->name, t->ndim, axis + 1);
		tpc_err_tensor(e, name);
		return TPC_EINPUT;
	}
	*out = ws;
	out->dim = axis;
	int64_t total = 0;
	for (int k = 0; k < ws.nparts && blocks; k++) {
		/* FP8 blocks: weight_scale_inv holds ceil(rows / block) entries, the
		 * last one possibly for a partial block. A rank's slice must be whole
		 * blocks, except a part one rank holds whole; a block may not straddle
		 * two parts. Padded blocks' scales are zero (the pad is zero bytes, as
		 * every pad; their weights are zero, so any scale dequantizes them to
		 * zero) and merge strips them. */
		tpc_split_part *pt = &out->part[k];
		int64_t len = tpc_split_rank_len(&ws, k, tp), padded = pt->size + pt->pad;
		bool whole = len == padded && !pt->pad && k == ws.nparts - 1;
		if (k < ws.nparts - 1 && pt->size % unit) {
			tpc_err_set(e, TPC_EINPUT,
				    "its layer '%s' has a part %d of %lld %s, not a multiple of %lld (the fp8 weight_block_size): a block would straddle two parts",
				    wname, k, (long long)pt->size, ws.dim == 0 ? "output features" : "input features",
				    (long long)unit);
			tpc_err_tensor(e, name);
			return TPC_EINPUT;
		}
		if (len % unit && !whole) {
			char hint[160];
			if (pt->heads || pt->replicas > 1)
				snprintf(hint, sizeof(hint), "a head split is not padded (a slice must be whole heads); choose a tp where it divides");
			else
				snprintf(hint, sizeof(hint), "use --pad to zero-pad it to a multiple of %lld (block x tp), or choose a tp where it divides",
					 (long long)unit * tpc_split_tp(&ws, tp));
			tpc_err_set(e, TPC_EINPUT,
				    "its layer '%s' is split %s into %lld %s per rank%s, not a multiple of %lld (the fp8 weight_block_size): a rank's slice at tp %d would cut a %lld x %lld block; %s",
				    wname, tpc_split_kind_name(ws.kind), (long long)len,
				    ws.dim == 0 ? "output features" : "input features", ws.nparts > 1 ? " in a part" : "",
				    (long long)unit, tpc_split_tp(&ws, tp), (long long)q->block[0], (long long)q->block[1], hint);
			tpc_err_tensor(e, name);
			return TPC_EINPUT;
		}
		int64_t cs = (pt->size + unit - 1) / unit;
		pt->pad = (padded + unit - 1) / unit - cs;
		pt->size = cs;
		total += cs;
	}
	for (int k = 0; k < ws.nparts && !blocks; k++) {
		tpc_split_part *pt = &out->part[k];
		int64_t len = tpc_split_rank_len(&ws, k, tp);
		if (pt->size % unit || pt->pad % unit || len % unit) {
			tpc_err_set(e, TPC_EINPUT,
				    "its layer '%s' is split %s into %lld %s per rank%s, not a multiple of %lld (%s): a rank's slice would cut one (choose a tp where it divides)",
				    wname, tpc_split_kind_name(ws.kind), (long long)len,
				    ws.dim == 0 ? "output features" : "input features",
				    ws.nparts > 1 ? " in a part" : "", (long long)unit,
				    q->method == TPC_QS_FP8 ? "the fp8 weight_block_size"
				    : unit == q->group ? "the group_size" : "the features packed in one int32");
			tpc_err_tensor(e, name);
			return TPC_EINPUT;
		}
		pt->size /= unit;
		pt->pad /= unit;
		total += pt->size;
	}
	if (total != t->shape[axis]) {
		tpc_err_set(e, TPC_EINPUT, "dimension %d is %lld, but its layer '%s' [%lld, %lld] implies %lld", axis,
			    (long long)t->shape[axis], wname, (long long)vshape[0], (long long)vshape[1], (long long)total);
		tpc_err_tensor(e, name);
		return TPC_EINPUT;
	}
	return 1;
}
