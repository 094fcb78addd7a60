/*
 * tpc_shard_optim.h - optimizer state written into a shard set beside the
 * model (shard --optimizer; layouts with tpc_layout.optimizer).
 *
 * The input's optimizer state (tpc_optim_map: a DCP save's optim, a ZeRO
 * folder's, Megatron's distributed optimizer's) is taken apart per state
 * key: for each key a checkpoint holding that state of every parameter under
 * the PARAMETER's name and shape (moment element i is parameter element i),
 * which is split by the model's own plan (tpc_shard_plan_build with the same
 * plan, facts and options): each rank gets the moments of exactly the
 * slices it gets of the parameters, and the layout stores them as it stores
 * the model (the same keys, chunks, stacking and expert numbers) under its
 * own names for the state. The model itself is the parameters under their
 * names (the optimizer's prefix, "model.", dropped), and the model's tensors
 * no group lists (buffers, frozen weights), which have no state: the layout
 * takes those its consumer keeps as buffers and refuses the others.
 *
 * Megatron's form (distrib_optimizer.py, Megatron-LM d98e8a6): 'param' (the
 * fp32 master), 'exp_avg', 'exp_avg_sq' per parameter (:2518, :1746-1836),
 * one 'step' per param group (state_dict, :866-878), the groups as
 * optimizer/__init__.py builds them (:94-120 the weight-decay split, :374-412
 * the group dicts, the default group first).
 */
#ifndef TPC_SHARD_OPTIM_H
#define TPC_SHARD_OPTIM_H

#include <stdbool.h>

#include "tpc_ckpt.h"
#include "tpc_err.h"
#include "tpc_optim.h"
#include "tpc_shard.h"
#include "tpc_value.h"

#define TPC_SHARD_OPTIM_KEYS 3

/* What a training run resumed from the set needs beside the state, which
 * the source does not hold (shard --iteration, --megatron-train; Megatron-LM
 * d98e8a6, training/training.py:2553-2606 get_optimizer_param_scheduler, the
 * iteration-based branch): the iteration (0: the optimizer's step), samples
 * an iteration (0: unknown), and the learning-rate schedule in Megatron's
 * flags. A schedule field unknown is written as None (lr 0 or train_iters 0:
 * the whole schedule unknown; the others default as Megatron's flags do:
 * training/config/training_config.py). */
typedef struct tpc_mcore_train {
	int64_t iteration;          /* --iteration N */
	int64_t global_batch_size;  /* --global-batch-size */
	double lr, min_lr;          /* --lr (0: unknown), --min-lr (default 0.0) */
	int64_t lr_warmup_iters;    /* --lr-warmup-iters (default 0) */
	int64_t lr_decay_iters;     /* --lr-decay-iters (0: train_iters) */
	int64_t train_iters;        /* --train-iters (0: unknown) */
	char lr_decay_style[24];    /* --lr-decay-style (default "linear") */
	double weight_decay;        /* --weight-decay (default 0.01): start and end, constant */
} tpc_mcore_train;

/* Megatron's defaults for the fields that have one. */
void tpc_mcore_train_init(tpc_mcore_train *t);
/* The whole learning-rate schedule is known (lr and train_iters given). */
bool tpc_mcore_train_schedule_known(const tpc_mcore_train *t);

typedef struct tpc_shard_optim {
	tpc_optim map;                       /* the input's state tied to its parameters */
	tpc_ckpt model;                      /* the parameters under their names (borrowed sources) */
	int nkeys;
	const char *key[TPC_SHARD_OPTIM_KEYS];   /* the layout's state names: "param", "exp_avg", "exp_avg_sq" */
	tpc_ckpt state[TPC_SHARD_OPTIM_KEYS];    /* each key's tensors under the parameters' names */
	tpc_shard_plan sp[TPC_SHARD_OPTIM_KEYS]; /* each split by the model's plan */
	bool planned[TPC_SHARD_OPTIM_KEYS];
	tpc_layout layout;                   /* the model's, without stored ranks: the state plans' */
	tpc_value *groups;                   /* Megatron's param_groups: hyper-parameters, step, no params */
	int src[2][2];                       /* [expert-parallel][wd_mult 0]: the source's group of each
	                                        side of the split, or -1 */
	const char *master_from;             /* "fp32_param" (the save's master) or "the parameter" (f32 training) */
	int64_t step;                        /* the optimizer's step (one for every parameter) */
	tpc_mcore_train train;               /* the run's facts the state lacks (set after build) */
} tpc_shard_optim;

/* The iteration a set of this state is saved at: train.iteration, else the
 * step (0: unknown, which the layout refuses). */
int64_t tpc_shard_optim_iteration(const tpc_shard_optim *so);

void tpc_shard_optim_init(tpc_shard_optim *so);
void tpc_shard_optim_release(tpc_shard_optim *so);

/* Tie ck's optimizer state to its parameters and build so->model and the
 * per-key checkpoints and groups in Megatron's form. Refused by name
 * (TPC_EINPUT): no optimizer state, a parameter without exp_avg /
 * exp_avg_sq, a bf16 / f16 parameter without its fp32 master, steps that
 * differ, param groups Megatron's standard split does not make. ck must
 * outlive so. */
int tpc_shard_optim_build(tpc_shard_optim *so, const tpc_ckpt *ck, tpc_err *e);

/* Megatron's standard split puts t (named name) at wd_mult 0: 1-D, or a bias
 * (optimizer/__init__.py:113-120) */
bool tpc_shard_optim_no_decay(const tpc_tensor *t, const char *name);

/* The model tensor `name` has optimizer state (a parameter some group lists) */
bool tpc_shard_optim_has_state(const tpc_shard_optim *so, const char *name);

/* One distributed optimizer's param_groups (its parameters expert-parallel
 * or not; the sides of the split it holds: weight decay, wd_mult 0), in
 * Megatron's order, from the source's groups; NULL: out of memory. */
tpc_value *tpc_shard_optim_groups(const tpc_shard_optim *so, bool expert, bool wd, bool nowd);

/* Split each key's checkpoint by the plan the model is split by (o without
 * an optimizer: the state's plans carry none). */
int tpc_shard_optim_plans(tpc_shard_optim *so, const tpc_plan *plan, const tpc_model_facts *facts,
			  const tpc_shard_opts *o, tpc_err *e);

#endif
