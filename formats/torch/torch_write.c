/* torch_write.c - torch.save zip writer (FORMATS.md §1.12), and the object
 * tree's trip through safetensors metadata.
 *
 * What torch 2.x writes, minus `.format_version` (which would promise the
 * exact miniz layout, §1.4): data.pkl (protocol 2, inside the weights_only
 * allow-list), byteorder, data/0..N (64-byte aligned by the zip writer),
 * version. Each tensor gets its own contiguous storage, except tied tensors
 * (tpc_ckpt_ties: the same view of one storage in the input, or tied by record,
 * as merge and the DeepSpeed reader restore ties): those share one, as
 * torch.save would keep them. The pickled object is the input's tree
 * when it still names exactly the tensors being written (non-tensor values
 * survive a torch -> torch or torch -> safetensors -> torch trip); otherwise an
 * OrderedDict of name -> tensor, which is what a state_dict is. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pickle.h"
#include "torch.h"
#include "tpc_io.h"
#include "tpc_util.h"
#include "tpc_zip.h"

typedef struct wstore {
	int64_t tensor;   /* the tensor whose bytes fill it */
	uint64_t nbytes;
} wstore;

typedef struct writer {
	const tpc_ckpt *ck;
	int64_t *key_of;  /* per checkpoint tensor: storage number, or -1 when not written */
	wstore *st;
	size_t nst;
} writer;

/* One tensor expression: _rebuild_tensor_v2((pid), 0, size, stride, rg, OrderedDict()) */
static int emit_tensor(void *ctx, tpc_pickle_writer *w, const tpc_value *tv, tpc_err *e)
{
	writer *wr = ctx;
	const tpc_ckpt *ck = wr->ck;
	int64_t ix = tv->ival;
	if (ix < 0 || (size_t)ix >= ck->n || wr->key_of[ix] < 0)
		return tpc_err_set(e, TPC_EINPUT, "internal: tensor leaf %lld is not being written", (long long)ix);
	const tpc_tensor *t = &ck->t[ix];
	const tpc_dtype_info *di = tpc_dtype_get(t->dtype);
	bool param = t->flags & TPC_TF_PARAMETER;
	char key[32];
	snprintf(key, sizeof(key), "%lld", (long long)wr->key_of[ix]);
	if (param)
		tpc_pickle_emit_global(w, "torch._utils", "_rebuild_parameter");
	tpc_pickle_emit_global(w, "torch._utils", di->storage ? "_rebuild_tensor_v2" : "_rebuild_tensor_v3");
	tpc_pickle_emit_op(w, TPC_PK_MARK);
	/* persistent id */
	tpc_pickle_emit_op(w, TPC_PK_MARK);
	tpc_pickle_emit_str(w, "storage", 7, true);
	if (di->storage) {
		tpc_pickle_emit_global(w, "torch", di->storage);
	} else {
		tpc_pickle_emit_global(w, "torch.storage", "UntypedStorage");
	}
	tpc_pickle_emit_str(w, key, strlen(key), false);
	tpc_pickle_emit_str(w, "cpu", 3, true);
	tpc_pickle_emit_int(w, (int64_t)(di->storage ? t->numel : t->nbytes));
	tpc_pickle_emit_op(w, TPC_PK_TUPLE);
	tpc_pickle_emit_put(w);
	tpc_pickle_emit_op(w, TPC_PK_BINPERSID);
	tpc_pickle_emit_int(w, 0);
	/* size and stride (C-contiguous: the bytes are written that way) */
	int64_t stride[TPC_MAX_NDIM], s = 1;
	for (int d = t->ndim - 1; d >= 0; d--) {
		stride[d] = s;
		s *= t->shape[d] ? t->shape[d] : 1;
	}
	for (int pass = 0; pass < 2; pass++) {
		const int64_t *v = pass ? stride : t->shape;
		if (t->ndim == 0) {
			tpc_pickle_emit_op(w, TPC_PK_EMPTY_TUPLE);
			continue;
		}
		if (t->ndim > 3)
			tpc_pickle_emit_op(w, TPC_PK_MARK);
		for (int d = 0; d < t->ndim; d++)
			tpc_pickle_emit_int(w, v[d]);
		tpc_pickle_emit_op(w, t->ndim == 1 ? TPC_PK_TUPLE1 : t->ndim == 2 ? TPC_PK_TUPLE2
				   : t->ndim == 3 ? TPC_PK_TUPLE3 : TPC_PK_TUPLE);
		tpc_pickle_emit_put(w);
	}
	tpc_pickle_emit_bool(w, (t->flags & TPC_TF_REQUIRES_GRAD) && !param);
	tpc_pickle_emit_global(w, "collections", "OrderedDict");
	tpc_pickle_emit_op(w, TPC_PK_EMPTY_TUPLE);
	tpc_pickle_emit_op(w, TPC_PK_REDUCE);
	tpc_pickle_emit_put(w);
	if (!di->storage)
		tpc_pickle_emit_global(w, "torch", di->torch);
	tpc_pickle_emit_op(w, TPC_PK_TUPLE);
	tpc_pickle_emit_put(w);
	tpc_pickle_emit_op(w, TPC_PK_REDUCE);
	if (param) {
		tpc_pickle_emit_put(w);
		tpc_pickle_emit_bool(w, t->flags & TPC_TF_REQUIRES_GRAD);
		tpc_pickle_emit_global(w, "collections", "OrderedDict");
		tpc_pickle_emit_op(w, TPC_PK_EMPTY_TUPLE);
		tpc_pickle_emit_op(w, TPC_PK_REDUCE);
		tpc_pickle_emit_put(w);
		tpc_pickle_emit_op(w, TPC_PK_TUPLE3);
		tpc_pickle_emit_put(w);
		tpc_pickle_emit_op(w, TPC_PK_REDUCE);
	}
	return 0;
}

/* Bytes of the output image of t at [off, off+len): what is written. */
static int read_out(const tpc_ckpt *ck, const tpc_tensor *t, uint64_t off, uint64_t len, void *dst,
		    tpc_err *e)
{
	return tpc_ckpt_read_out(ck, t, off, len, dst, e);
}

/* Each tensor's storage: its own, or the one of a tensor it is tied to
 * (tpc_ckpt_ties), as torch.save keeps tied weights. */
static int place_storages(writer *wr, const int64_t *sel, size_t nsel, tpc_err *e)
{
	const tpc_ckpt *ck = wr->ck;
	int64_t *first = tpc_malloc((nsel + 1) * sizeof(int64_t));
	int ret = first ? tpc_ckpt_ties(ck, sel, nsel, first, e) : tpc_err_nomem(e);
	for (size_t i = 0; i < ck->n; i++)
		wr->key_of[i] = -1;
	for (size_t k = 0; k < nsel && !ret; k++) {
		int64_t i = sel ? sel[k] : (int64_t)k;
		const tpc_tensor *t = &ck->t[i];
		if (t->flags & TPC_TF_QUANTIZED) {
			ret = tpc_err_at(e, TPC_EINPUT, NULL, t->name,
					  "quantized tensor (%s): tpconv does not write quantized tensors; use --dequantize",
					  tpc_dtype_name(t->dtype));
		} else if (!tpc_dtype_get(t->dtype)->torch || (t->flags & TPC_TF_NODATA)) {
			ret = tpc_err_at(e, TPC_EINPUT, NULL, t->name, "dtype %s cannot be written to a torch file",
					  tpc_dtype_name(t->dtype));
		} else if (first[k] != (int64_t)k) {
			/* tied to a tensor already placed */
			wr->key_of[i] = wr->key_of[sel ? sel[first[k]] : first[k]];
		} else {
			wr->key_of[i] = (int64_t)wr->nst;
			wr->st[wr->nst].tensor = i;
			wr->st[wr->nst].nbytes = t->nbytes;
			wr->nst++;
		}
	}
	free(first);
	return ret;
}

/* The storage's bytes read (gathered, cast) and written, their CRC taken on
 * the way. While the output stages direct writes, each piece is read straight
 * into the staging buffer (tpc_out_room): the bytes are copied once, by the
 * read, and the CRC reads them while they are in cache. Otherwise, and for a
 * room too small for one element, a piece goes through a scratch buffer and
 * tpc_out_write. */
static int write_read(const tpc_ckpt *ck, const tpc_tensor *t, tpc_out *out, uint32_t *crc, tpc_progress *prog,
		      tpc_err *e)
{
	unsigned es = tpc_dtype_size(t->dtype);
	uint64_t chunk = TPC_GATHER_CHUNK / es * es, small = (64u << 10) / es * es, piece = (1u << 20) / es * es;
	size_t buflen = 0;
	uint8_t *buf = NULL;
	int ret = 0;
	uint32_t c = 0;
	for (uint64_t off = 0, k; off < t->nbytes && !ret; off += k) {
		size_t room = 0;
		uint8_t *dst = tpc_out_room(out, &room);
		k = t->nbytes - off < chunk ? t->nbytes - off : chunk;
		if (dst && room >= es && (uintptr_t)dst % es == 0) {
			if (k > piece) /* read, then CRC while it is in cache */
				k = piece;
			if (k > room)
				k = room / es * es;
			if (!(ret = read_out(ck, t, off, k, dst, e))) {
				c = tpc_crc32_update(c, dst, k);
				ret = tpc_out_room_used(out, (size_t)k, e);
			}
		} else {
			if (dst && k > small) /* a ragged end of a staging buffer: a small piece */
				k = small;
			if (!buf && !(buf = tpc_scratch_get((size_t)(chunk < t->nbytes ? chunk : t->nbytes), &buflen)))
				ret = tpc_err_nomem(e);
			else if (!(ret = read_out(ck, t, off, k, buf, e))) {
				c = tpc_crc32_update(c, buf, k);
				ret = tpc_out_write(out, buf, (size_t)k, e);
			}
		}
		if (!ret) {
			tpc_progress_add(prog, k);
			tpc_ckpt_drop_range(ck, t, off, k);
		}
	}
	if (buf)
		tpc_scratch_put(buf, buflen);
	tpc_ckpt_drop_pages(ck, t);
	*crc = c;
	return ret;
}

static int write_storage(const tpc_ckpt *ck, const tpc_tensor *t, tpc_zipw *zw, tpc_out *out,
			 const char *name, tpc_progress *prog, tpc_err *e)
{
	int ret;
	uint32_t crc = 0;
	if ((ret = tpc_zipw_begin(zw, name, t->nbytes, NULL, e)))
		return ret;
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	if (t->nbytes && m && tpc_tensor_is_contiguous(t) && !(t->flags & TPC_TF_BYTESWAP) &&
	    t->dtype == t->src_dtype) {
		/* CRC in windows, dropping each window's pages from our resident set
		 * (the copy itself runs in the kernel and maps nothing). A window is
		 * what the process holds mapped at once: 32 MiB keeps a 262 MB
		 * embedding from putting 256 MiB in the peak RSS, and still gives
		 * tpc_crc32_parallel 8 MiB a thread on 4 threads. */
		const uint64_t win = 32u << 20;
		for (uint64_t o = 0; o < t->nbytes; o += win) {
			uint64_t k = t->nbytes - o < win ? t->nbytes - o : win;
			crc = o ? (uint32_t)crc32_combine64(crc, tpc_crc32_parallel(m->data + t->offset + o, k), (z_off64_t)k)
				: tpc_crc32_parallel(m->data + t->offset, k);
			tpc_map_drop(m, t->offset + o, k);
		}
		ret = tpc_out_copy(out, m, t->offset, t->nbytes, e);
		tpc_progress_add(prog, t->nbytes);
	} else if (t->nbytes) {
		ret = write_read(ck, t, out, &crc, prog, e);
	}
	if (ret) {
		tpc_err_tensor(e, t->name);
		return ret;
	}
	return tpc_zipw_end(zw, crc, e);
}

/* The archive folder torch uses: the file's base name without its extension. */
static char *archive_prefix(const char *path)
{
	const char *b = tpc_path_base(path);
	const char *dot = strrchr(b, '.');
	size_t n = dot && dot != b ? (size_t)(dot - b) : strlen(b);
	if (!n)
		return tpc_strdup("archive");
	return tpc_strndup(b, n);
}

int tpc__torch_write(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *path,
		     const tpc_write_opts *o, tpc_err *e)
{
	return tpc__torch_write_obj(ck, sel, nsel, NULL, path, o, e);
}

int tpc__torch_write_into(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const tpc_value *what, tpc_out *out,
			  const char *prefix, const tpc_write_opts *o, tpc_err *e)
{
	writer wr;
	tpc_zipw zw;
	tpc_buf pk = TPC_BUF_INIT;
	tpc_pickle_writer pw;
	tpc_value *flat = NULL, *call = NULL;
	int ret = 0;
	bool zw_init = false;
	memset(&wr, 0, sizeof(wr));
	tpc_pickle_writer_init(&pw, &pk);
	if ((ret = tpc_ckpt_check_writable(ck, e)))
		goto out;
	if (!sel)
		nsel = ck->n;
	wr.ck = ck;
	wr.key_of = tpc_malloc((ck->n + 1) * sizeof(int64_t));
	wr.st = tpc_malloc((nsel + 1) * sizeof(wstore));
	if (!wr.key_of || !wr.st) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = place_storages(&wr, sel, nsel, e)))
		goto out;
	/* the object to pickle */
	bool whole = !sel || nsel == ck->n;
	const tpc_value *obj = what;
	if (obj) {
		/* the caller's object (its tensors among sel) */
	} else if (whole && ck->root && tpc__torch_tree_matches(ck)) {
		obj = ck->root;
	} else {
		/* an OrderedDict: DICT whose origin is CALL[collections.OrderedDict, ()] */
		flat = tpc_value_new(TPC_V_DICT);
		call = tpc_value_new(TPC_V_CALL);
		int bad = !flat || !call;
		/* append and set_origin take their argument's reference, also on failure */
		bad = bad || tpc_value_append(call, tpc_value_global("collections", "OrderedDict"));
		bad = bad || tpc_value_append(call, tpc_value_new(TPC_V_TUPLE));
		if (!bad) {
			bad = tpc_value_set_origin(flat, call);
			call = NULL;
		}
		if (bad) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		for (size_t k = 0; k < nsel; k++) {
			int64_t i = sel ? sel[k] : (int64_t)k;
			if (tpc_value_set(flat, tpc_value_str(ck->t[i].name, strlen(ck->t[i].name)),
					  tpc_value_tensor(i))) {
				ret = tpc_err_nomem(e);
				goto out;
			}
		}
		obj = flat;
	}
	pw.tensor = emit_tensor;
	pw.ctx = &wr;
	if ((ret = tpc_pickle_write(&pw, obj, e)))
		goto out;
	tpc_zipw_init(&zw, out, prefix);
	zw_init = true;
	if ((ret = tpc_zipw_add(&zw, "data.pkl", pk.p, pk.len, e)) ||
	    (ret = tpc_zipw_add(&zw, "byteorder", "little", 6, e)))
		goto out;
	for (size_t s = 0; s < wr.nst && !ret; s++) {
		char name[48];
		snprintf(name, sizeof(name), "data/%zu", s);
		ret = write_storage(ck, &ck->t[wr.st[s].tensor], &zw, out, name, o ? o->progress : NULL, e);
	}
	if (!ret && !(ret = tpc_zipw_add(&zw, "version", "3\n", 2, e)))
		ret = tpc_zipw_finish(&zw, e);
out:
	if (zw_init)
		tpc_zipw_release(&zw);
	tpc_pickle_writer_release(&pw);
	tpc_buf_release(&pk);
	tpc_value_unref(flat);
	tpc_value_unref(call);
	free(wr.key_of);
	free(wr.st);
	return ret;
}

int tpc__torch_write_obj(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const tpc_value *what,
			 const char *path, const tpc_write_opts *o, tpc_err *e)
{
	tpc_out out;
	char *prefix = archive_prefix(path);
	int ret = 0;
	memset(&out, 0, sizeof(out));
	out.fd = -1;
	if (!prefix) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = tpc_ckpt_check_writable(ck, e)))
		goto out;
	if ((ret = tpc_out_open(&out, path, (o && (o->flags & TPC_W_FORCE)) ? TPC_OUT_FORCE : 0, e)))
		goto out;
	if ((ret = tpc__torch_write_into(ck, sel, nsel, what, &out, prefix, o, e)))
		goto out;
	if (o && o->before_commit && (ret = o->before_commit(o->before_commit_ctx, e)))
		goto out;
	ret = tpc_out_commit(&out, e);
out:
	tpc_out_abort(&out);
	free(prefix);
	return ret;
}

/* ---- the object tree through safetensors metadata ---- */

static const char *namer(void *ctx, int64_t index)
{
	const tpc_ckpt *ck = ctx;
	return index >= 0 && (size_t)index < ck->n ? ck->t[index].name : NULL;
}

static int64_t resolver(void *ctx, const char *name)
{
	return tpc_ckpt_find(ctx, name);
}

int tpc__tree_to_meta(const tpc_ckpt *ck, char **json, tpc_err *e)
{
	*json = NULL;
	if (!ck->root || !tpc__torch_tree_matches(ck))
		return 0;
	/* Without a tree, reading the safetensors file back gives an OrderedDict
	 * of its tensors (in file order). A flat state dict (a dict or an
	 * OrderedDict of names to tensors) is that already: no tree to restore
	 * (its key order is the one thing lost, as in every safetensors file;
	 * 50,000 names would cost 2 MB of header). */
	const tpc_value *r = ck->root, *org = tpc_value_origin(r);
	bool plain = r->kind == TPC_V_DICT &&
		     (!org || (org->kind == TPC_V_CALL && org->n == 2 && org->items[0]->kind == TPC_V_GLOBAL &&
			       !strcmp(org->items[0]->str, "collections.OrderedDict") &&
			       org->items[1]->kind == TPC_V_TUPLE && org->items[1]->n == 0));
	for (size_t i = 0; plain && i < r->n; i++)
		plain = r->items[i]->kind == TPC_V_TENSOR && r->keys[i]->kind == TPC_V_STR;
	if (plain)
		return 0;
	*json = tpc_value_to_json(ck->root, namer, (void *)ck);
	return *json ? 0 : tpc_err_nomem(e);
}

int tpc__tree_from_meta(tpc_ckpt *ck, const char *json, tpc_err *e)
{
	tpc_value *v = tpc_value_from_json(json, strlen(json), resolver, ck, e);
	if (!v)
		return e->code ? e->code : TPC_EINPUT;
	tpc_value_unref(ck->root);
	ck->root = v;
	return 0;
}
