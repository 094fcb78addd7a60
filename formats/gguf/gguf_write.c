/* gguf_write.c - the GGUF writer (tpc_gguf_write) and the registry's write.
 *
 * The header (KVs, tensor infos) is built in memory, then each tensor's
 * bytes are streamed from the checkpoint: kept types in the kernel
 * (tpc_ckpt_write_tensor: an f32 tensor stored as F32, packed blocks written
 * back as they were read), casts through bounded buffers, Q8_0 quantized a
 * window at a time. Each tensor is padded to the alignment, the last one
 * too, as llama.cpp and gguf-py write them. A gguf-split set's files are
 * all written before any takes its name: the set is complete or absent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "gguf.h"
#include "tpc_buf.h"
#include "tpc_cast.h"
#include "tpc_io.h"
#include "tpc_util.h"

#define Q_WINDOW (1u << 20) /* elements quantized at a time (whole rows, at least one) */

void tpc_gguf_wtensors_release(tpc_gguf_wtensor *t, size_t n)
{
	for (size_t i = 0; t && i < n; i++) {
		free(t[i].name);
		free(t[i].mem);
		tpc_tensor_release(&t[i].t);
	}
	free(t);
}

/* ---- the header ---- */

static void put_u32(tpc_buf *b, uint32_t v)
{
	uint8_t x[4];
	tpc_wr32le(x, v);
	tpc_buf_add(b, x, 4);
}

static void put_u64(tpc_buf *b, uint64_t v)
{
	uint8_t x[8];
	tpc_wr64le(x, v);
	tpc_buf_add(b, x, 8);
}

static void put_str(tpc_buf *b, const char *s, uint64_t n)
{
	put_u64(b, n);
	tpc_buf_add(b, s, (size_t)n);
}


static void put_scalar(tpc_buf *b, const tpc_gguf_kv *k)
{
	uint8_t x[8];
	tpc_buf_add(b, x, (size_t)tpc__gguf_kv_scalar(k, x));
}

static int put_kv(tpc_buf *b, const tpc_gguf_kv *k, tpc_err *e)
{
	put_str(b, k->key, strlen(k->key));
	put_u32(b, (uint32_t)k->type);
	if (k->type == TPC_GV_STRING) {
		put_str(b, k->s, k->slen);
	} else if (k->type == TPC_GV_ARRAY) {
		put_u32(b, (uint32_t)k->atype);
		put_u64(b, k->n);
		if (k->atype == TPC_GV_STRING)
			for (uint64_t i = 0; i < k->n; i++)
				put_str(b, k->astr[i], k->alen[i]);
		else if (tpc__gguf_vt_width(k->atype))
			tpc_buf_add(b, k->arr, (size_t)(k->n * (uint64_t)tpc__gguf_vt_width(k->atype)));
		else
			return tpc_err_set(e, TPC_EINPUT, "GGUF key '%s': array of unknown type %d", k->key, k->atype);
	} else if (tpc__gguf_vt_width(k->type)) {
		put_scalar(b, k);
	} else {
		return tpc_err_set(e, TPC_EINPUT, "GGUF key '%s': unknown value type %d", k->key, k->type);
	}
	return 0;
}

/* Bytes tensor t takes in the file as `type` (ne[0] checked against the block). */
static int file_bytes(const tpc_gguf_wtensor *w, uint64_t *nb, tpc_err *e)
{
	const tpc_ggml_info *in = tpc_ggml_info_of(w->type);
	const tpc_tensor *t = &w->t;
	if (!in)
		return tpc_err_at(e, TPC_EINPUT, NULL, w->name, "unknown ggml type %d", w->type);
	if (t->ndim < 1 || t->ndim > 4)
		return tpc_err_at(e, TPC_EINPUT, NULL, w->name, "%d dimensions; GGUF holds 1 to 4", t->ndim);
	int64_t ne0 = t->shape[t->ndim - 1];
	if (ne0 % in->block)
		return tpc_err_at(e, TPC_EINPUT, NULL, w->name, "%s needs ne[0] (%lld) to be a multiple of %d", in->name,
				  (long long)ne0, in->block);
	*nb = t->numel / (uint64_t)in->block * (uint64_t)in->size;
	return 0;
}

/* MXFP4 held as E2M1 pairs and E8M0 scales, whole (gguf_arch.c's
 * mx_tensor: gpt-oss's X_blocks / X_scales), 32 to a scale */
static bool mx_pairs(const tpc_tensor *t)
{
	const tpc_dequant *dq = t->dq;
	return dq && dq->kind == TPC_DQ_FP4 && dq->fp4_mx && dq->group == 32 && dq->nc == 2 && !dq->O && !dq->r0 &&
	       !dq->c0 && dq->c[1].numel * 16 == dq->c[0].numel && dq->c[1].numel * 32 == t->numel &&
	       tpc_dtype_size(dq->c[0].src_dtype) == 1 && tpc_dtype_size(dq->c[1].src_dtype) == 1;
}

/* How tensor w is written: 'p' packed blocks copied, 'x' MXFP4 repacked from
 * E2M1 pairs (mx_pairs), 'c' values (cast
 * pending as needed), 'q' quantized (tpc_ggml_quantize); an error for what
 * cannot be. */
static int how_of(const tpc_gguf_wtensor *w, char *how, tpc_err *e)
{
	const tpc_tensor *t = &w->t;
	tpc_dtype pd = tpc_ggml_plain_dtype(w->type);
	if (tpc_gguf_packed(t) == w->type && w->type != TPC_GGML_NONE)
		*how = 'p';
	else if (w->type == TPC_GGML_MXFP4 && mx_pairs(t))
		*how = 'x';
	else if (pd && tpc_cast_supported(t->src_dtype, pd) &&
		 (pd == t->dtype || (tpc_dtype_get(pd)->flags & TPC_DTF_FLOAT)))
		*how = 'c';
	else if (tpc_ggml_quantizes(w->type) && (tpc_dtype_get(t->dtype)->flags & TPC_DTF_FLOAT) &&
		 tpc_cast_supported(t->src_dtype, TPC_F32))
		*how = 'q';
	else
		return tpc_err_at(e, TPC_EINPUT, NULL, w->name, "cannot store a %s tensor%s as GGUF %s",
				  tpc_dtype_name(t->dtype), t->dq ? " (dequantized)" : "", tpc_ggml_info_of(w->type)->name);
	int g = t->dq && t->dq->kind == TPC_DQ_GGML ? t->dq->gtype : TPC_GGML_NONE;
	if (*how != 'p' && g != TPC_GGML_NONE && !tpc_ggml_decodes(g))
		return tpc_err_at(e, TPC_EINPUT, NULL, w->name,
				  "tpconv cannot dequantize ggml type %s, which GGUF %s needs (without --outtype "
				  "its blocks are copied unchanged)",
				  tpc_ggml_info_of(g)->name, tpc_ggml_info_of(w->type)->name);
	if (t->flags & (TPC_TF_NODATA | TPC_TF_QUANTIZED))
		return tpc_err_at(e, TPC_EINPUT, NULL, w->name, "tensor has no plain data (meta or torch-quantized tensor)");
	return 0;
}

/* One file's header: kv (NULL: none), then split.* when split_n > 0, then
 * the infos of t[0..n), padded to the alignment. */
static int build_header(const tpc_gguf_kvs *kv, int split_k, int split_n, int64_t total, const tpc_gguf_wtensor *t,
			size_t n, const uint64_t *nb, uint64_t al, tpc_buf *b, tpc_err *e)
{
	tpc_gguf_kvs sp = {0};
	int ret = 0;
	if (split_n > 0 && (tpc_gguf_kvs_uint(&sp, "split.no", TPC_GV_U16, (uint64_t)split_k) ||
			    tpc_gguf_kvs_uint(&sp, "split.count", TPC_GV_U16, (uint64_t)split_n) ||
			    tpc_gguf_kvs_int(&sp, "split.tensors.count", TPC_GV_I32, total))) {
		tpc_gguf_kvs_release(&sp);
		return tpc_err_nomem(e);
	}
	size_t nkv = (kv ? kv->n : 0) + sp.n;
	for (size_t i = 0; kv && i < kv->n; i++)
		nkv -= tpc_gguf_kvs_find(&sp, kv->kv[i].key) >= 0; /* split.* replaced in place */
	put_u32(b, TPC_GGUF_MAGIC);
	put_u32(b, TPC_GGUF_VERSION);
	put_u64(b, n);
	put_u64(b, nkv);
	for (size_t i = 0; kv && i < kv->n && !ret; i++) {
		ptrdiff_t s = tpc_gguf_kvs_find(&sp, kv->kv[i].key);
		ret = put_kv(b, s >= 0 ? &sp.kv[s] : &kv->kv[i], e);
	}
	for (size_t i = 0; i < sp.n && !ret; i++)
		if (tpc_gguf_kvs_find(kv, sp.kv[i].key) < 0)
			ret = put_kv(b, &sp.kv[i], e);
	uint64_t off = 0;
	for (size_t i = 0; i < n && !ret; i++) {
		const tpc_tensor *x = &t[i].t;
		put_str(b, t[i].name, strlen(t[i].name));
		int nd = t[i].ndims > 0 && t[i].ndims < x->ndim ? t[i].ndims : x->ndim;
		put_u32(b, (uint32_t)nd);
		for (int d = x->ndim - 1; d >= x->ndim - nd; d--)
			put_u64(b, (uint64_t)x->shape[d]);
		put_u32(b, (uint32_t)t[i].type);
		put_u64(b, off);
		off += (nb[i] + al - 1) / al * al;
	}
	tpc_buf_addn(b, 0, (size_t)((al - b->len % al) % al));
	tpc_gguf_kvs_release(&sp);
	if (!ret && b->oom)
		ret = tpc_err_nomem(e);
	return ret;
}

/* ---- the data ---- */

static int write_quant(const tpc_ckpt *ck, const tpc_gguf_wtensor *w, tpc_out *out, tpc_err *e)
{
	const tpc_tensor *t = &w->t;
	const tpc_ggml_info *in = tpc_ggml_info_of(w->type);
	tpc_tensor v = *t;
	uint64_t n = t->numel, cols = t->ndim ? (uint64_t)t->shape[t->ndim - 1] : 1;
	uint64_t win = cols ? (Q_WINDOW / cols > 0 ? Q_WINDOW / cols : 1) * cols : 1;
	if (win > n)
		win = n;
	v.dtype = TPC_F32;
	v.nbytes = n * 4;
	float *x = tpc_malloc((size_t)win * sizeof(float) + 1);
	uint8_t *q = tpc_malloc((size_t)(win / (uint64_t)in->block * (uint64_t)in->size) + 1);
	int ret = x && q ? 0 : tpc_err_nomem(e);
	for (uint64_t e0 = 0; e0 < n && !ret; e0 += win) {
		uint64_t c = n - e0 < win ? n - e0 : win;
		if (!(ret = tpc_ckpt_read_out(ck, &v, e0 * 4, c * 4, x, e))) {
			tpc_ggml_quantize(w->type, x, q, c / cols, cols);
			ret = tpc_out_write(out, q, (size_t)(c / (uint64_t)in->block * (uint64_t)in->size), e);
		}
	}
	tpc_ckpt_drop_pages(ck, t);
	free(x);
	free(q);
	return ret;
}

/* 'x': ggml's block_mxfp4 from the pairs and scales, a bounded number of
 * blocks at a time; bits moved, no value computed */
static int write_mx(const tpc_ckpt *ck, const tpc_gguf_wtensor *w, tpc_out *out, tpc_err *e)
{
	const tpc_tensor *pk = &w->t.dq->c[0], *sc = &w->t.dq->c[1];
	const uint64_t chunk = 1u << 16, nb = sc->numel;
	uint8_t *p = tpc_malloc(chunk * 16), *s = tpc_malloc(chunk), *o = tpc_malloc(chunk * 17);
	int ret = p && s && o ? 0 : tpc_err_nomem(e);
	for (uint64_t b0 = 0; b0 < nb && !ret; b0 += chunk) {
		uint64_t c = nb - b0 < chunk ? nb - b0 : chunk;
		if (!(ret = tpc_ckpt_read_bytes(ck, pk, b0 * 16, c * 16, p, e)) && !(ret = tpc_ckpt_read_bytes(ck, sc, b0, c, s, e))) {
			tpc_ggml_mxfp4_from_pairs(p, s, o, c);
			ret = tpc_out_write(out, o, (size_t)(c * 17), e);
		}
	}
	tpc_ckpt_drop_pages(ck, pk);
	tpc_ckpt_drop_pages(ck, sc);
	free(p);
	free(s);
	free(o);
	return ret;
}

/* Values gguf_arch.c computed (w->mem: F32 in C order, small: Gemma's norms) */
static int write_mem(const tpc_gguf_wtensor *w, char how, tpc_out *out, tpc_err *e)
{
	uint64_t n = w->t.numel;
	tpc_dtype to = how == 'q' ? TPC_F32 : tpc_ggml_plain_dtype(w->type);
	if (w->t.dtype != TPC_F32 || how == 'p' || !to)
		return tpc_err_set(e, TPC_EINPUT, "computed values of %s are not float32", w->name);
	if (how == 'q') {
		const tpc_ggml_info *in = tpc_ggml_info_of(w->type);
		uint64_t cols = w->t.ndim ? (uint64_t)w->t.shape[w->t.ndim - 1] : 1, nb = n / (uint64_t)in->block * (uint64_t)in->size;
		uint8_t *q = tpc_malloc((size_t)nb + 1);
		if (!q)
			return tpc_err_nomem(e);
		tpc_ggml_quantize(w->type, w->mem, q, cols ? n / cols : 0, cols);
		int ret = tpc_out_write(out, q, (size_t)nb, e);
		free(q);
		return ret;
	}
	size_t nb = (size_t)(n * tpc_dtype_size(to));
	uint8_t *b = tpc_malloc(nb + 1);
	int ret = b ? tpc_cast(b, to, w->mem, TPC_F32, n, e) : tpc_err_nomem(e);
	if (!ret)
		ret = tpc_out_write(out, b, nb, e);
	free(b);
	return ret;
}

static int write_data(const tpc_ckpt *ck, const tpc_gguf_wtensor *w, char how, uint64_t nb, uint64_t al,
		      tpc_out *out, tpc_err *e)
{
	static const uint8_t zero[64];
	int ret;
	if (w->mem) {
		ret = write_mem(w, how, out, e);
	} else if (how == 'p') {
		ret = tpc_ckpt_write_tensor(ck, &w->t.dq->c[0], out, e);
	} else if (how == 'x') {
		ret = write_mx(ck, w, out, e);
	} else if (how == 'q') {
		ret = write_quant(ck, w, out, e);
	} else {
		tpc_tensor v = w->t;
		v.dtype = tpc_ggml_plain_dtype(w->type);
		v.nbytes = v.numel * tpc_dtype_size(v.dtype);
		ret = tpc_ckpt_write_tensor(ck, &v, out, e);
	}
	uint64_t pad = (al - nb % al) % al;
	while (!ret && pad) {
		size_t k = pad < sizeof(zero) ? (size_t)pad : sizeof(zero);
		ret = tpc_out_write(out, zero, k, e);
		pad -= k;
	}
	if (ret)
		tpc_err_tensor(e, w->name);
	return ret;
}

/* ---- files ---- */

static uint64_t alignment_of(const tpc_gguf_kvs *kv)
{
	ptrdiff_t i = kv ? tpc_gguf_kvs_find(kv, "general.alignment") : -1;
	if (i >= 0 && kv->kv[i].type == TPC_GV_U32 && kv->kv[i].v.u && !(kv->kv[i].v.u & (kv->kv[i].v.u - 1)))
		return kv->kv[i].v.u;
	return TPC_GGUF_DEFAULT_ALIGNMENT;
}

/* File k of the output: path itself, or STEM-0000K-of-0000N.gguf. */
static char *file_name(const char *path, int k, int n)
{
	if (!n)
		return tpc_strdup(path);
	size_t l = strlen(path);
	if (tpc_ends_with(path, ".gguf"))
		l -= 5;
	char *p = tpc_malloc(l + 32);
	if (p)
		snprintf(p, l + 32, "%.*s-%05d-of-%05d.gguf", (int)l, path, k + 1, n);
	return p;
}

/* Tensors t[first[k]..first[k+1]) go to file k of nfiles (split when
 * max_shard_size is set: a new file before a tensor that would take the
 * current one past it, as gguf-split counts, tensor bytes only). */
static int plan_files(const uint64_t *nb, size_t n, uint64_t al, uint64_t max, size_t **first, int *nfiles, tpc_err *e)
{
	size_t *f = tpc_malloc((n + 2) * sizeof(size_t));
	int k = 0;
	uint64_t cur = 0;
	if (!f)
		return tpc_err_nomem(e);
	f[0] = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t b = (nb[i] + al - 1) / al * al;
		if (max && cur && cur + b > max) {
			f[++k] = i;
			cur = 0;
		}
		cur += b;
	}
	f[++k] = n;
	if (k > 65535) {
		free(f);
		return tpc_err_set(e, TPC_EUSAGE, "a gguf-split set of %d files; at most 65535 (raise --max-shard-size)", k);
	}
	*first = f;
	*nfiles = k;
	return 0;
}

static int write_file(const tpc_ckpt *ck, const tpc_gguf_kvs *kv, const tpc_gguf_wtensor *t, const uint64_t *nb,
		      const char *how, size_t n, int k, int nsplit, int64_t total, uint64_t al, const tpc_write_opts *o,
		      tpc_out *out, tpc_err *e)
{
	tpc_buf b = TPC_BUF_INIT;
	int ret = build_header(k == 0 ? kv : NULL, k, nsplit, total, t, n, nb, al, &b, e);
	uint64_t size = b.len;
	for (size_t i = 0; i < n; i++)
		size += (nb[i] + al - 1) / al * al;
	if (!ret && !(ret = tpc_out_write(out, b.p, b.len, e)))
		ret = tpc_out_reserve(out, size, e);
	for (size_t i = 0; i < n && !ret; i++) {
		ret = write_data(ck, &t[i], how[i], nb[i], al, out, e);
		tpc_progress_add(o ? o->progress : NULL, nb[i]);
	}
	tpc_buf_release(&b);
	return ret;
}

int tpc_gguf_write(const tpc_ckpt *ck, const tpc_gguf_kvs *kv, const tpc_gguf_wtensor *t, size_t n, const char *path,
		   const tpc_write_opts *o, tpc_err *e)
{
	uint64_t al = alignment_of(kv), *nb = tpc_calloc(n + 1, sizeof(uint64_t));
	char *how = tpc_calloc(n + 1, 1);
	size_t *first = NULL;
	tpc_out *out = NULL;
	int nfiles = 0, ret = nb && how ? 0 : tpc_err_nomem(e);
	if (!ret)
		ret = tpc_ckpt_check_writable(ck, e);
	for (size_t i = 0; i < n && !ret; i++)
		if (!(ret = file_bytes(&t[i], &nb[i], e)))
			ret = how_of(&t[i], &how[i], e);
	if (!ret && n > INT32_MAX)
		ret = tpc_err_set(e, TPC_EINPUT, "%zu tensors; GGUF counts them in an i32 for gguf-split", n);
	if (!ret)
		ret = plan_files(nb, n, al, o ? o->max_shard_size : 0, &first, &nfiles, e);
	if (!ret && !(out = tpc_calloc((size_t)nfiles, sizeof(*out))))
		ret = tpc_err_nomem(e);
	for (int k = 0; k < nfiles && out; k++)
		out[k].fd = -1;
	int nsplit = o && o->max_shard_size ? nfiles : 0;
	for (int k = 0; k < nfiles && !ret; k++) {
		char *p = file_name(path, k, nsplit);
		if (!p) {
			ret = tpc_err_nomem(e);
			break;
		}
		if (!(ret = tpc_out_open(&out[k], p, (o && (o->flags & TPC_W_FORCE)) ? TPC_OUT_FORCE : 0, e)))
			ret = write_file(ck, kv, t + first[k], nb + first[k], how + first[k], first[k + 1] - first[k], k,
					 nsplit, (int64_t)n, al, o, &out[k], e);
		if (ret)
			tpc_err_path(e, p);
		free(p);
	}
	if (!ret && o && o->before_commit)
		ret = o->before_commit(o->before_commit_ctx, e);
	for (int k = 0; k < nfiles && !ret; k++)
		ret = tpc_out_commit(&out[k], e);
	for (int k = 0; k < nfiles && out; k++)
		tpc_out_abort(&out[k]);
	free(out);
	free(first);
	free(nb);
	free(how);
	return ret;
}

/* ---- the registry's write ---- */

/* The type a tensor read from GGUF is written back as: its own, or for a
 * float tensor of 2 or more dims the --outtype (1-D ones, norms and biases,
 * stay F32 as the reference keeps them). */
static int back_type(const tpc_tensor *t, int outtype)
{
	int packed = tpc_gguf_packed(t);
	bool fl = tpc_dtype_get(t->dtype)->flags & TPC_DTF_FLOAT;
	if (outtype != TPC_GGML_NONE && fl)
		return t->ndim >= 2 ? outtype : TPC_GGML_F32;
	if (packed != TPC_GGML_NONE && t->dtype == TPC_F32)
		return packed;
	switch (t->dtype) {
	case TPC_F32: return TPC_GGML_F32;
	case TPC_F16: return TPC_GGML_F16;
	case TPC_BF16: return TPC_GGML_BF16;
	case TPC_F64: return TPC_GGML_F64;
	case TPC_I8: return TPC_GGML_I8;
	case TPC_I16: return TPC_GGML_I16;
	case TPC_I32: return TPC_GGML_I32;
	case TPC_I64: return TPC_GGML_I64;
	default: return TPC_GGML_NONE;
	}
}

static int from_gguf(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const tpc_write_opts *o,
		     tpc_gguf_wtensor **wt, size_t *nw, tpc_err *e)
{
	const char *ot = o && o->outtype && strcmp(o->outtype, "auto") && !tpc_gguf_requant_by_name(o->outtype)
				 ? o->outtype : NULL;
	int outtype = ot ? tpc_ggml_by_name(ot) : TPC_GGML_NONE;
	if (ot && outtype != TPC_GGML_F32 && outtype != TPC_GGML_F16 && outtype != TPC_GGML_BF16 &&
	    outtype != TPC_GGML_Q8_0) {
		char safe[64];
		tpc_sanitize(safe, sizeof(safe), ot);
		return tpc_err_set(e, TPC_EUSAGE, "--outtype '%s': %s%s", safe, tpc_gguf_outtypes(),
				   tpc_gguf_outtype_note(ot));
	}
	size_t n = sel ? nsel : ck->n;
	tpc_gguf_wtensor *w = tpc_calloc(n + 1, sizeof(*w));
	if (!w)
		return tpc_err_nomem(e);
	int ret = 0;
	for (size_t i = 0; i < n && !ret; i++) {
		const tpc_tensor *t = &ck->t[sel ? sel[i] : (int64_t)i];
		w[i].type = back_type(t, outtype);
		if (!(w[i].name = tpc_strdup(t->name)) || tpc_tensor_copy(&w[i].t, t))
			ret = tpc_err_nomem(e);
		else if (w[i].type == TPC_GGML_NONE)
			ret = tpc_err_at(e, TPC_EINPUT, NULL, t->name, "a %s tensor has no GGUF type",
					 tpc_dtype_name(t->dtype));
	}
	*wt = w;
	*nw = n;
	return ret;
}

int tpc__gguf_write_fmt(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *path,
			const tpc_write_opts *o, tpc_err *e)
{
	const tpc_gguf_kvs *src = tpc_gguf_ckpt_kvs(ck);
	tpc_gguf_kvs kv = {0};
	tpc_gguf_wtensor *w = NULL;
	size_t n = 0;
	int ret;
	const tpc_gguf_mix *mix = !o ? NULL : src ? tpc_gguf_requant_by_name(o->outtype) : tpc_gguf_mix_by_name(o->outtype);
	if (o && o->gguf_no_mtp && (o->lora_base || src)) /* convert_hf_to_gguf.py's option */
		return tpc_err_set(e, TPC_EUSAGE, "--no-mtp goes with a Hugging Face model into GGUF, not %s",
				   src ? "a GGUF input" : "a LoRA adapter");
	if (o && o->lora_base) {
		ret = tpc_gguf_lora_from_peft(ck, o->lora, o->lora_base, o->model_dir, o->outtype, &kv, &w, &n, e);
		mix = NULL;
	} else if (src) {
		ret = from_gguf(ck, sel, nsel, o, &w, &n, e);
		for (size_t i = 0; i < src->n && !ret; i++) {
			/* the list is shared with the checkpoint: copy it (kv_slot semantics) */
			const tpc_gguf_kv *k = &src->kv[i];
			int r = k->type == TPC_GV_STRING  ? tpc_gguf_kvs_str(&kv, k->key, k->s, (size_t)k->slen)
				: k->type != TPC_GV_ARRAY ? tpc_gguf_kvs_uint(&kv, k->key, k->type, k->v.u)
				: k->atype == TPC_GV_STRING
					? tpc_gguf_kvs_strs(&kv, k->key, (const char *const *)k->astr, k->alen, k->n)
					: tpc_gguf_kvs_arr(&kv, k->key, k->atype, k->arr, k->n);
			if (r)
				ret = tpc_err_nomem(e);
			else if (k->type != TPC_GV_STRING && k->type != TPC_GV_ARRAY)
				kv.kv[kv.n - 1].v = k->v;
		}
	} else {
		/* a llama-quantize file type: over the f32 GGUF, which it quantizes */
		ret = tpc_gguf_from_hf_pre(ck, o ? o->model_dir : NULL, mix ? "f32" : o ? o->outtype : NULL,
					   o ? o->gguf_pre : NULL, o && o->gguf_no_mtp ? TPC_GGUF_NO_MTP : 0, &kv, &w, &n, e);
		/* a shard set's companions sit in a rank folder: the name is the set's */
		char *title = !ret && o && o->model_name ? tpc__gguf_title(o->model_name) : NULL;
		if (!ret && o && o->model_name && (!title || tpc_gguf_kvs_str(&kv, "general.name", title, strlen(title))))
			ret = tpc_err_nomem(e);
		free(title);
		(void)sel;
		(void)nsel;
	}
	if (!ret && mix)
		ret = tpc_gguf_mix_apply(mix, &kv, w, n, e);
	if (!ret)
		ret = tpc_gguf_write(ck, &kv, w, n, path, o, e);
	tpc_gguf_wtensors_release(w, n);
	tpc_gguf_kvs_release(&kv);
	return ret;
}
