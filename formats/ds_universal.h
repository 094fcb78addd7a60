/*
 * ds_universal.h - DeepSpeed universal checkpoints (private to formats/).
 *
 * What deepspeed/checkpoint/ds_to_universal.py writes (DeepSpeed 0.16.5,
 * commit 38327e07f6cd39b63418f60cedd1651b0be3e7c3) and the engine loads with
 * {"checkpoint": {"load_universal": true}}:
 *
 *   ROOT/latest_universal                 the tag folder's name (main(): written in
 *                                         the output folder's parent, last)
 *   ROOT/TAG/zero/optimizer_state.pt      the optimizer's state without its tensors
 *                                         (_save_optimizer_state: the rank-0
 *                                         optimizer_state_dict less base_optimizer_state,
 *                                         param_slice_mappings and the fp32 partitions,
 *                                         plus param_groups; stage 3,
 *                                         _save_optimizer_state_stage3: the whole rank-0
 *                                         optimizer_state_dict, state[0].step kept)
 *   ROOT/TAG/zero/NAME/fp32.pt            per parameter NAME (model.named_parameters()):
 *   ROOT/TAG/zero/NAME/exp_avg.pt         stage 1/2 (merge_tp_slices): torch.save of
 *   ROOT/TAG/zero/NAME/exp_avg_sq.pt      {"cat_dim": 0, "param": the whole parameter};
 *   ROOT/TAG/zero/NAME/step.pt            step.pt the group's step as saved (a scalar
 *                                         tensor or a number). Stage 3
 *                                         (merge_zero3_slices): the bare tensor, flat
 *                                         (numel,), no step.pt
 *   ROOT/TAG/mp_rank_00_model_states.pt   stage 1/2: the save's model states, copied;
 *   ROOT/TAG/zero_pp_rank_0_mp_rank_00_model_states.pt
 *                                         stage 3 (engine.py _get_ckpt_name reads rank 0's)
 *
 * The universal loader is stage-specific: stage 1/2
 * (runtime/base_optimizer.py load_hp_checkpoint_state_from_checkpoint_dir ->
 * checkpoint/universal_checkpoint.py load_hp_checkpoint_state) reads
 * ckpt_dict["param"] and one step per group; stage 3 (runtime/zero/stage3.py
 * load_hp_checkpoint_state_from_checkpoint_dir_stage3) reads the bare tensor
 * .view(-1) and the step from optimizer_state.pt.
 */
#ifndef TPC_DS_UNIVERSAL_H
#define TPC_DS_UNIVERSAL_H

#include <stdbool.h>

#include "formats.h"

extern const tpc_format tpc_fmt_ds_universal;

/* A universal checkpoint given as file images (for tests and the fuzzer):
 * each file's path under the tag folder ("zero/optimizer_state.pt",
 * "mp_rank_00_model_states.pt", "zero/NAME/fp32.pt", ...) and bytes, read as
 * the folder is (with `optim`, as TPC_OPEN_OPTIMIZER reads it). `label`
 * stands for the folder in errors. */
typedef struct tpc_ds_universal_file {
	const char *rel;
	const uint8_t *p;
	uint64_t n;
} tpc_ds_universal_file;

int tpc_ds_universal_from_buffers(tpc_ckpt *ck, const tpc_ds_universal_file *files, size_t n, bool optim,
				  const char *label, tpc_err *e);

#endif
