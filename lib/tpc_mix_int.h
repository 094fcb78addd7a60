/* tpc_mix_int.h - what tpc_mix.c lends tpc_mix_pass.c (not an API). */
#ifndef TPC_MIX_INT_H
#define TPC_MIX_INT_H

#include <stdbool.h>

#include "tpc_ckpt.h"
#include "tpc_err.h"

/* config.py evaluate_setting of the setting sv (cJSON) for a tensor at layer
 * position t; *found false for a list of filters none matches */
void tpc__mix_evaluate(const void *sv, const char *tensor, double t, double *v, bool *found);
/* a float tensor (or one computed) */
bool tpc__mix_is_float(const tpc_tensor *t);
/* t's sources (its parts', its companions') renumbered by map (tpc__import_sources) */
void tpc__mix_remap(tpc_tensor *t, const int *map);
/* ck->t[ix] becomes the computed tensor over dq, written as out (0: f32, or
 * its own f16/bf16/f64) */
int tpc__mix_install(tpc_ckpt *ck, size_t ix, tpc_dequant *dq, tpc_dtype out, tpc_err *e);

#endif
