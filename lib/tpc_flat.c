/* tpc_flat.c - a tensor viewed flat (tpc_flat.h). */
#include <stdlib.h>
#include <string.h>

#include "tpc_flat.h"
#include "tpc_util.h"

int tpc_tensor_flatten(tpc_tensor *dst, const tpc_tensor *t)
{
	int64_t n = (int64_t)t->numel;
	memset(dst, 0, sizeof(*dst));
	if (t->dq)
		return -1;
	if (!t->nparts) {
		if (!(t->flags & TPC_TF_ZERO) && !tpc_tensor_is_contiguous(t))
			return -1;
		if (tpc_tensor_init_zero(dst, t->dtype, 1, &n))
			return -1;
		dst->src_dtype = t->src_dtype;
		dst->src = t->src;
		dst->offset = t->offset;
		dst->flags = t->flags;
		return 0;
	}
	bool outer_one = true;
	for (int d = 0; d < t->cat_dim; d++)
		outer_one &= t->shape[d] == 1;
	int np = outer_one ? t->nparts : (int)t->shape[0], k = 0, ret = 0;
	if (!outer_one && (t->shape[0] < 1 || t->shape[0] > INT32_MAX))
		return -1;
	tpc_tensor *fp = tpc_calloc((size_t)np, sizeof(*fp));
	if (!fp)
		return -1;
	for (; k < np && !ret; k++) {
		if (outer_one) {
			ret = tpc_tensor_flatten(&fp[k], &t->parts[k]);
		} else {
			tpc_tensor row;
			ret = tpc_tensor_select0(&row, t, k);
			if (!ret) {
				ret = tpc_tensor_flatten(&fp[k], &row);
				tpc_tensor_release(&row);
			}
		}
	}
	if (!ret)
		ret = tpc_tensor_init_cat(dst, fp, k, 0);
	for (int i = 0; i < k; i++)
		tpc_tensor_release(&fp[i]);
	free(fp);
	return ret;
}
