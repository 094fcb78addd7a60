/* layout_megatron_train.c - what a megatron-dist set with optimizer state
 * (shard --optimizer) holds so that Megatron RESUMES from it: the
 * iteration's folder, and common.pt's training state beside the optimizer.
 *
 * Megatron-LM at d98e8a6, megatron/training/checkpointing.py:
 *   - read_metadata (:388-410): a tracker holding "release" is a release
 *     checkpoint, iteration 0; a number N names iter_{N:07d}/
 *     (get_checkpoint_name, :230-246).
 *   - load_checkpoint never loads an optimizer from a release checkpoint
 *     (:2612-2618 builds no optimizer state dict, :2958 skips the load, both
 *     `not release and ... not args.no_load_optim`): the state of a release
 *     folder is silently dropped and training resumes with a fresh Adam. So
 *     with optimizer state the set is iter_{N:07d}/ with tracker "N", N the
 *     optimizer's step or --iteration.
 *   - the content metadata (:2594-2601, load_content_metadata: common.pt's
 *     'content_metadata', dist_checkpointing/serialization.py:314-333) decides
 *     the optimizer's sharded form at load: DistributedOptimizer.
 *     sharded_state_dict (core/optimizer/distrib_optimizer.py:1511-1512)
 *     falls back to 'fully_sharded_model_space' without
 *     'distrib_optim_sharding_type', another form than the one written; the
 *     resharding check (:2649-2656) indexes it. Written as
 *     _build_sharded_state_dict_metadata (:521-566) writes it for
 *     --dist-ckpt-optim-fully-reshardable: 'fully_reshardable' and
 *     'distrib_optim_fully_reshardable_mem_efficient' False (read at
 *     distrib_optimizer.py:1731). Its 'dp_cp_group' is a process group the
 *     save drops (dist_checkpointing/utils.py:297-311
 *     _clean_metadata_for_serialization, called at :903) and the load sets
 *     (:2681).
 *   - 'opt_param_scheduler' (:3001-3005; a KeyError there exits "Unable to
 *     load optimizer from checkpoint"): OptimizerParamScheduler.state_dict
 *     (core/optimizer_param_scheduler.py:302-316), in samples as
 *     get_optimizer_param_scheduler builds it for iteration-based training
 *     (training/training.py:2558-2569: steps x global_batch_size). Its
 *     load_state_dict (:341-404) takes num_steps always and, for the other
 *     fields, _check_and_set (:318-339): the run's flag value with
 *     --override-opt_param-scheduler, the checkpoint's with
 *     --use-checkpoint-opt_param-scheduler, else an assert that they are
 *     equal. A schedule tpconv is not told is written as None: the default
 *     asserts (naming the field), --use-checkpoint-opt_param-scheduler fails
 *     in step() on None, and --override-opt_param-scheduler takes the run's
 *     flags; never a made-up schedule taken silently.
 *   - args (:2873-2881): consumed_train_samples (the data's position and,
 *     with the override, the scheduler's num_steps: :3036-3041),
 *     skipped_train_samples, consumed_valid_samples; no_save_rng True, as a
 *     run saved with --no-save-rng: Megatron then loads no RNG state
 *     (:2574-2593 ignore_rng_state, :3071), which tpconv does not have.
 *   - num_floating_point_operations_so_far (:2867): 0, not known.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_layout.h"
#include "tpc_shard.h"
#include "tpc_shard_optim.h"
#include "tpc_util.h"

char *tpc__mcore_iter_dir(const tpc_shard_plan *sp)
{
	char buf[40];
	if (!sp->optim)
		return tpc_strdup("release");
	snprintf(buf, sizeof(buf), "iter_%07lld", (long long)tpc_shard_optim_iteration(sp->optim));
	return tpc_strdup(buf);
}

int tpc__mcore_train_check(const tpc_shard_plan *sp, tpc_err *e)
{
	static const char *const styles[] = {"constant", "linear", "cosine", "inverse-square-root", NULL};
	if (!sp->optim)
		return 0;
	const tpc_mcore_train *t = &sp->optim->train;
	int64_t it = tpc_shard_optim_iteration(sp->optim);
	if (it <= 0)
		return tpc_err_set(e, TPC_EINPUT,
				   "the optimizer's step is 0: a set with optimizer state is Megatron's iter_NNNNNNN/ folder of the iteration it was saved at (a 'release' folder's optimizer is never loaded: training/checkpointing.py:2612-2618, 2958); give --iteration N");
	if (it > 9999999)
		return tpc_err_set(e, TPC_EUSAGE, "iteration %lld: Megatron's folder name iter_{:07d} holds 7 digits", (long long)it);
	if (t->global_batch_size <= 0)
		return tpc_err_set(e, TPC_EUSAGE,
				   "--optimizer with --layout megatron-dist needs --megatron-train global-batch-size=N: Megatron resumes the data at consumed_train_samples = iteration x N (training/checkpointing.py:2878), which the optimizer state does not hold");
	if (it > INT64_MAX / t->global_batch_size || (t->train_iters > 0 && t->train_iters > INT64_MAX / t->global_batch_size) ||
	    (t->lr_decay_iters > 0 && t->lr_decay_iters > INT64_MAX / t->global_batch_size))
		return tpc_err_set(e, TPC_EUSAGE, "--megatron-train: iterations x global-batch-size overflow");
	if (!tpc_mcore_train_schedule_known(t))
		return 0;
	/* OptimizerParamScheduler.__init__'s asserts (:150-169) and styles (:245-293) */
	int64_t decay = t->lr_decay_iters > 0 ? t->lr_decay_iters : t->train_iters;
	size_t k = 0;
	while (styles[k] && strcmp(styles[k], t->lr_decay_style))
		k++;
	if (!styles[k])
		return tpc_err_set(e, TPC_EUSAGE,
				   "--megatron-train lr-decay-style=%s: constant, linear, cosine or inverse-square-root (WSD's own steps are not written)",
				   t->lr_decay_style);
	if (!(t->min_lr >= 0 && t->lr >= t->min_lr) || !isfinite(t->lr))
		return tpc_err_set(e, TPC_EUSAGE, "--megatron-train: lr %g, min-lr %g: Megatron asserts 0 <= min-lr <= lr", t->lr, t->min_lr);
	if (t->lr_warmup_iters < 0 || t->lr_warmup_iters >= decay)
		return tpc_err_set(e, TPC_EUSAGE,
				   "--megatron-train: lr-warmup-iters %lld, lr-decay-iters %lld: Megatron asserts warmup < decay",
				   (long long)t->lr_warmup_iters, (long long)decay);
	if (!(t->weight_decay >= 0) || !isfinite(t->weight_decay))
		return tpc_err_set(e, TPC_EUSAGE, "--megatron-train weight-decay=%g: not a weight decay", t->weight_decay);
	return 0;
}

static int put(tpc_value *d, const char *k, tpc_value *v)
{
	return !v || tpc_value_set(d, tpc_value_str(k, strlen(k)), v) ? -1 : 0;
}

/* OptimizerParamScheduler.state_dict() of the run, in samples
 * (training.py:2558-2569); None where the schedule is not known. */
static tpc_value *scheduler(const tpc_mcore_train *t, int64_t it)
{
	tpc_value *d = tpc_value_new(TPC_V_DICT);
	int64_t g = t->global_batch_size, decay = t->lr_decay_iters > 0 ? t->lr_decay_iters : t->train_iters;
	bool k = tpc_mcore_train_schedule_known(t);
#define OR_NONE(v) (k ? (v) : tpc_value_new(TPC_V_NONE))
	if (!d || put(d, "max_lr", OR_NONE(tpc_value_float(t->lr))) ||
	    put(d, "lr_warmup_steps", OR_NONE(tpc_value_int(t->lr_warmup_iters * g))) ||
	    put(d, "num_steps", tpc_value_int(it * g)) ||
	    put(d, "lr_decay_style", OR_NONE(tpc_value_str(t->lr_decay_style, strlen(t->lr_decay_style)))) ||
	    put(d, "lr_decay_steps", OR_NONE(tpc_value_int(decay * g))) ||
	    put(d, "min_lr", OR_NONE(tpc_value_float(t->min_lr))) ||
	    put(d, "start_wd", OR_NONE(tpc_value_float(t->weight_decay))) ||
	    put(d, "end_wd", OR_NONE(tpc_value_float(t->weight_decay))) ||
	    put(d, "wd_incr_style", OR_NONE(tpc_value_str("constant", 8))) ||
	    put(d, "wd_incr_steps", OR_NONE(tpc_value_int(t->train_iters * g)))) {
		tpc_value_unref(d);
		return NULL;
	}
#undef OR_NONE
	return d;
}

int tpc__mcore_train_common(const tpc_shard_plan *sp, tpc_value *root, tpc_value *args, tpc_value *cm)
{
	if (!sp->optim)
		return 0;
	const tpc_mcore_train *t = &sp->optim->train;
	int64_t it = tpc_shard_optim_iteration(sp->optim), g = t->global_batch_size;
	tpc_value *st = args && args->kind == TPC_V_CALL && args->n == 3 ? args->items[2] : NULL;
	if (!st || st->kind != TPC_V_DICT)
		return -1;
	if (put(cm, "distrib_optim_sharding_type", tpc_value_str("fully_reshardable", 17)) ||
	    put(cm, "distrib_optim_fully_reshardable_mem_efficient", tpc_value_bool(0)) ||
	    put(st, "consumed_train_samples", tpc_value_int(it * g)) || put(st, "skipped_train_samples", tpc_value_int(0)) ||
	    put(st, "consumed_valid_samples", tpc_value_int(0)) || put(st, "global_batch_size", tpc_value_int(g)) ||
	    put(st, "use_distributed_optimizer", tpc_value_bool(1)) ||
	    put(st, "dist_ckpt_optim_fully_reshardable", tpc_value_bool(1)) || put(st, "no_save_rng", tpc_value_bool(1)) ||
	    put(root, "opt_param_scheduler", scheduler(t, it)) ||
	    put(root, "num_floating_point_operations_so_far", tpc_value_int(0)))
		return -1;
	if (tpc_mcore_train_schedule_known(t) &&
	    (put(st, "train_iters", tpc_value_int(t->train_iters)) || put(st, "lr", tpc_value_float(t->lr)) ||
	     put(st, "min_lr", tpc_value_float(t->min_lr))))
		return -1;
	return 0;
}
