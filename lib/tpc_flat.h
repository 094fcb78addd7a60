/*
 * tpc_flat.h - a tensor's elements as one flat (1-D) tensor, as
 * torch.Tensor.flatten() gives them, described over the same bytes.
 *
 * DeepSpeed's stage 3 universal checkpoint keeps each parameter's state flat
 * (formats/ds_universal.h); a parameter read from a sharded save is a view,
 * a zero fill or a composite of such (tpc_ckpt.h), which this views as 1-D
 * without copying a byte: a C-contiguous view or zero fill as one 1-D view;
 * a composite whose dimensions before its cat_dim are all 1 as its parts
 * flattened and joined; any other composite row by row (dim 0), each row
 * flattened. A strided view (a transpose) or a computed (dequantized)
 * tensor has no flat view over its bytes: -1.
 */
#ifndef TPC_FLAT_H
#define TPC_FLAT_H

#include "tpc_ckpt.h"

/* dst (uninitialised) becomes the 1-D view of src's numel elements in C
 * order; 0, or -1 (dst empty) when it cannot be or memory ran out. */
int tpc_tensor_flatten(tpc_tensor *dst, const tpc_tensor *src);

#endif
