/*
 * tpc_merge_optim.h - a shard set's optimizer state, joined as its
 * parameters are (convert SET --optimizer of a Megatron legacy set).
 *
 * The inverse of tpc_shard_optim.h. Each rank file of the set holds the
 * state of that rank's local parameters (Megatron's legacy save:
 * distrib_optim.pt beside model_optim_rng.pt, mapped by the torch reader to
 * the rank's own tensors). For each state key the set is merged once more,
 * every rank giving that state in place of each parameter, under the
 * parameter's name and shape (tpc_merge_opts.state, the layout's open_rank):
 * the same renames, unfusing, TP joins, replica checks, padding and stage
 * numbering as the model, so element i of a merged moment is element i of
 * the merged parameter. What comes out is one checkpoint over the merges'
 * sources with the tree get_state_dict saves (tpc_optim.h):
 *
 *   {"model": {NAME: t}, "optim": {"state": {NAME: {"exp_avg", "exp_avg_sq",
 *    "fp32_param", "step"}}, "param_groups": {g: {..., "params": [NAME...]}}}}
 *
 * tensors named model.NAME and optim.state.NAME.KEY. The param groups are
 * rank 0's (Megatron saves them without 'params', each with its step:
 * distrib_optimizer.py:825-885 at Megatron-LM d98e8a6), each merged
 * parameter in the one its name and shape put it in by Megatron's standard
 * split (tpc_shard_optim_no_decay: wd_mult 0 for 1-D parameters and
 * biases), the rule the rank files were read by; a split by other rules
 * (apply_wd_to_qk_layernorm) is refused by name.
 */
#ifndef TPC_MERGE_OPTIM_H
#define TPC_MERGE_OPTIM_H

#include <stdbool.h>

#include "tpc_ckpt.h"
#include "tpc_err.h"
#include "tpc_shard.h"

#define TPC_MERGE_OPTIM_KEYS 3

typedef struct tpc_merge_optim {
	tpc_merge state[TPC_MERGE_OPTIM_KEYS]; /* fp32_param, exp_avg, exp_avg_sq, each merged */
	bool opened[TPC_MERGE_OPTIM_KEYS];
	tpc_ckpt ck;                           /* the model and its state, the tree above */
	size_t nparams;
} tpc_merge_optim;

void tpc_merge_optim_init(tpc_merge_optim *mo);
void tpc_merge_optim_release(tpc_merge_optim *mo);

/* The state of the set in dir whose model `model` is (opened with o, o->state
 * NULL), joined as the model. mo->ck borrows the sources of model and of
 * mo's merges: model must outlive mo. TPC_EINPUT naming the file and tensor
 * when a rank's state is missing or does not fit (tpc_merge_open's checks,
 * the reader's: the buffer layout, the masters against the weights). */
int tpc_merge_optim_open(tpc_merge_optim *mo, const tpc_merge *model, const char *dir, const tpc_merge_opts *o,
			 tpc_err *e);

#endif
