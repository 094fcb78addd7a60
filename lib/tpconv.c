/* tpconv.c - the library's public functions over the core (see tpconv_ckpt.h).
 * Thin: each one reads a field or calls the function the command uses, so a
 * program and the command read and write the same bytes. */
#include "tpconv.h"

#include <stdlib.h>
#include <string.h>

#include "tpc_ckpt.h"
#include "tpc_config.h"
#include "tpc_format.h"

const char *tpc_version(void)
{
	return TPC_VERSION;
}

const char *tpc_format_name(size_t i)
{
	return i < tpc_format_count() ? tpc_format_at(i)->name : NULL;
}

int tpc_ckpt_load(tpc_ckpt **out, const char *path, tpc_err *e)
{
	*out = NULL;
	tpc_ckpt *ck = malloc(sizeof(*ck));
	if (!ck)
		return tpc_err_nomem(e);
	tpc_ckpt_init(ck);
	int ret = tpc_ckpt_open(ck, path, NULL, e);
	if (ret) {
		tpc_ckpt_free(ck);
		return ret;
	}
	*out = ck;
	return 0;
}

void tpc_ckpt_free(tpc_ckpt *ck)
{
	if (!ck)
		return;
	tpc_ckpt_release(ck);
	free(ck);
}

/* The readers: one field each (an index past the end reads NULL). */
#define FIELD(type, name, obj, expr) \
	type name(const obj *x) { return x->expr; }
#define ITEM(type, name, obj, count, expr) \
	type name(const obj *x, size_t i) { return i < x->count ? x->expr : NULL; }

FIELD(const char *, tpc_ckpt_format_name, tpc_ckpt, format)
FIELD(size_t, tpc_ckpt_count, tpc_ckpt, n)
ITEM(const tpc_tensor *, tpc_ckpt_tensor, tpc_ckpt, n, t + i)
FIELD(size_t, tpc_ckpt_meta_count, tpc_ckpt, nmeta)
ITEM(const char *, tpc_ckpt_meta_key, tpc_ckpt, nmeta, meta_k[i])
ITEM(const char *, tpc_ckpt_meta_value, tpc_ckpt, nmeta, meta_v[i])
FIELD(const char *, tpc_tensor_name, tpc_tensor, name)
FIELD(tpc_dtype, tpc_tensor_dtype, tpc_tensor, dtype)
FIELD(int, tpc_tensor_ndim, tpc_tensor, ndim)
FIELD(const int64_t *, tpc_tensor_shape, tpc_tensor, shape)
FIELD(uint64_t, tpc_tensor_numel, tpc_tensor, numel)
FIELD(uint64_t, tpc_tensor_nbytes, tpc_tensor, nbytes)

#undef FIELD
#undef ITEM

static bool is_float(tpc_dtype d)
{
	return d == TPC_F16 || d == TPC_BF16 || d == TPC_F32 || d == TPC_F64;
}

/* As a {"dtype": ...} rule does it (tpc_rules.c): the cast is pending on the
 * description and done when the bytes are read or written. */
int tpc_ckpt_cast(tpc_ckpt *ck, tpc_dtype to, tpc_err *e)
{
	if (!is_float(to))
		return tpc_err_set(e, TPC_EUSAGE, "cannot cast to %s: not f16, bf16, f32 or f64", tpc_dtype_name(to));
	for (size_t i = 0; i < ck->n; i++) {
		tpc_tensor *t = &ck->t[i];
		if (!is_float(t->src_dtype) || (t->flags & (TPC_TF_QUANTIZED | TPC_TF_NODATA)))
			continue;
		t->dtype = to;
		t->nbytes = t->numel * tpc_dtype_bits(to) / 8;
	}
	return 0;
}

int tpc_ckpt_save(const tpc_ckpt *ck, const char *path, const char *format, unsigned flags, tpc_err *e)
{
	const tpc_format *f;
	size_t n = strlen(path);
	if (format)
		f = tpc_format_by_name(format);
	else if (n && path[n - 1] == '/')
		f = tpc_format_index();
	else
		f = tpc_format_for_output(path);
	if (!f && format)
		return tpc_err_at(e, TPC_EUSAGE, path, NULL, "no format named '%s'", format);
	if (!f)
		return tpc_err_at(e, TPC_EUSAGE, path, NULL, "no format writes this name; name one");
	if (!f->write)
		return tpc_err_at(e, TPC_EUSAGE, path, NULL, "format '%s' is read only", f->name);
	tpc_write_opts wo = {0};
	if (flags & TPC_SAVE_FORCE)
		wo.flags |= TPC_W_FORCE;
	return f->write(ck, NULL, 0, path, &wo, e);
}
