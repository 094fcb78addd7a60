/*
 * tpc_optim.h - optimizer state beside its parameters.
 *
 * A training save keeps, beside the model, the optimizer's state: for Adam
 * and AdamW (torch/optim/adamw.py, _init_group) per parameter `step` (a
 * scalar tensor), `exp_avg` and `exp_avg_sq` (the first and second moments,
 * shaped as the parameter: element i of a moment belongs to element i of the
 * parameter), and `param_groups`, the hyper-parameters of each group and the
 * parameters it holds. torch.optim.Optimizer.state_dict() keys the state by
 * parameter NUMBER (the order of param_groups' params lists);
 * torch.distributed.checkpoint.state_dict.get_state_dict (what FSDP2,
 * torchtitan and accelerate save through DCP) keys it by parameter NAME:
 *
 *   {"model": {FQN: tensor, ...},
 *    "optim": {"state": {FQN: {"exp_avg": t, "exp_avg_sq": t, "step": t}},
 *              "param_groups": [{"lr": .., "betas": (..), .., "params": [FQN, ...]}]}}
 *
 * (DCP flattens it to keys model.FQN, optim.state.FQN.exp_avg, ...,
 * optim.param_groups.0.lr; the reader gives the tree back.) A DCP save
 * stores each moment in the chunks its parameter has (FSDP2 shards both
 * Shard(0) on one mesh), and the reader assembles both as global tensors, so
 * element i of the moment read is element i of the parameter read.
 *
 * tpc_optim_map finds that state in a checkpoint's object tree and ties
 * every state entry to its parameter tensor, or refuses it by name: a
 * parameter the checkpoint lacks, a moment whose shape is not its
 * parameter's, a state entry for a parameter in no group, parameters known
 * only by number (a plain Optimizer.state_dict() saved through DCP: which
 * tensor is which cannot be known). What it builds is then written as
 * torch.optim's own state_dict (tpc_optim_torch: the optimizer.pt the HF
 * Trainer and Optimizer.load_state_dict read), or kept in the tree and
 * written by any writer that writes trees (a DCP folder for another mesh).
 */
#ifndef TPC_OPTIM_H
#define TPC_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpc_buf.h"
#include "tpc_ckpt.h"
#include "tpc_err.h"
#include "tpc_value.h"

typedef struct tpc_optim_entry {
	const char *key;        /* "exp_avg", "exp_avg_sq", "step", ... (borrowed from the tree) */
	int64_t t;              /* the tensor's index in the checkpoint, or -1: a value */
	const tpc_value *v;     /* the value (a tensor leaf or a plain value), borrowed */
	bool moment;            /* shaped as the parameter: element for element */
} tpc_optim_entry;

typedef struct tpc_optim_param {
	const char *fqn;        /* as param_groups names it (borrowed from the tree) */
	int64_t param;          /* the parameter's tensor index in the checkpoint */
	int group;
	tpc_optim_entry *s;     /* its state, in the tree's order (none: never stepped) */
	size_t ns;
} tpc_optim_param;

typedef struct tpc_optim {
	const char *okey;       /* the tree's key of the optimizer state ("optim"), NULL: none */
	char *prefix;           /* what the parameters' tensor names begin with ("model.", or "") */
	tpc_optim_param *p;     /* in param_groups order: index k is torch.optim's parameter k */
	size_t np;
	const tpc_value **groups; /* each group's dict, borrowed from the tree */
	size_t ng;
	size_t nmoments, nscalars, nvalues;
} tpc_optim;

void tpc_optim_init(tpc_optim *o);
void tpc_optim_release(tpc_optim *o);

/* Find the optimizer state in ck's tree (a top-level key whose value holds
 * "state" and "param_groups") and map it. 0 with o->okey NULL when there is
 * none; a negative status (TPC_EINPUT naming the state entry, its parameter
 * and the numbers) when it cannot be mapped. o stays valid while ck and its
 * tree are. */
int tpc_optim_map(tpc_optim *o, const tpc_ckpt *ck, tpc_err *e);

/* What inspect says about it: a summary, each group's hyper-parameters and,
 * with `each`, one line per parameter (its number, name, shape and state). */
void tpc_optim_describe(const tpc_optim *o, const tpc_ckpt *ck, bool each, tpc_buf *b);

/* out (initialised, empty) becomes torch.optim.Optimizer.state_dict() of
 * it: {"state": {k: {key: tensor, ...}}, "param_groups": [{hyper-parameters,
 * "params": [k, ...]}]}, parameter k the k-th of the groups' lists, its
 * tensors descriptions over ck's sources (borrowed: ck must outlive out),
 * named "state.K.KEY". Write it with the torch format. */
int tpc_optim_torch(const tpc_optim *o, const tpc_ckpt *ck, tpc_ckpt *out, tpc_err *e);

/* A param group as Optimizer.state_dict packs it: gv's entries but "params",
 * then "params" as the numbers first .. first + n - 1. NULL when out of
 * memory. */
tpc_value *tpc_optim_group_numbered(const tpc_value *gv, int64_t first, int64_t n);

/* A param group's hyper-parameters as torch keeps them, from a group saved
 * by Megatron (whose "step" moves to each parameter's state): gv's entries
 * but "step" and "params", then "params" as `names` (a reference taken).
 * NULL when out of memory. */
tpc_value *tpc_optim_group_named(const tpc_value *gv, tpc_value *names);

/* Each of the param groups' (a list of dicts) "step" (torch's Adam's, which
 * Megatron keeps per group: distrib_optimizer.py:866-878) as f32 scalars in
 * one memory source added to ck (*src). A group without an integer step
 * below 2^24: -1, *bad its index, nothing added and e untouched (the caller
 * names its file); else 0 or an error. */
int tpc_optim_add_group_steps(tpc_ckpt *ck, const tpc_value *groups, int *src, size_t *bad, tpc_err *e);

#endif
