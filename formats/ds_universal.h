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
 *   ROOT/TAG/zero/NAME/exp_avg_sq.pt      {"cat_dim": D, "param": the whole parameter},
 *                                         cat_dim the tensor-parallel split's dim (absent:
 *                                         replicated), with "param_n_sub_params": N for N
 *                                         equal fused parts, "vocab_tensor": True for a
 *                                         vocabulary without padding rows;
 *   ROOT/TAG/zero/NAME/step.pt            step.pt the group's step as saved (a scalar
 *                                         tensor or a number). Stage 3
 *                                         (merge_zero3_slices): the bare tensor, flat
 *                                         (numel,), no step.pt
 *   ROOT/TAG/mp_rank_00_model_states.pt   stage 1/2: the save's model states, copied
 *                                         (universal_checkpoint_info: the client's
 *                                         patterns for those keys, read by the converter);
 *   ROOT/TAG/zero_pp_rank_0_mp_rank_00_model_states.pt
 *                                         stage 3 (engine.py _get_ckpt_name reads rank 0's)
 *
 * The universal loader is stage-specific: stage 1/2
 * (runtime/base_optimizer.py load_hp_checkpoint_state_from_checkpoint_dir,
 * l. 20-63 -> checkpoint/universal_checkpoint.py load_hp_checkpoint_state,
 * l. 22-141) reads every "(.+).pt" of the parameter's folder,
 * ckpt_dict["param"] chunked along ckpt_dict.get("cat_dim", 0), one step per
 * group (assert all(step == steps[0])) and each group's hyper-parameters from
 * optimizer_state.pt's param_groups (runtime/bf16_optimizer.py
 * _load_universal_checkpoint, l. 519, reads the same way); stage 3 (runtime/zero/stage3.py
 * load_hp_checkpoint_state_from_checkpoint_dir_stage3, l. 2756-2808, and
 * load_hp_checkpoint_state, l. 2815-2833) reads fp32, exp_avg, exp_avg_sq of
 * each parameter of param_shapes[0] as the bare tensor .view(-1), and the
 * step from optimizer_state.pt (optimizer_state_dict.state[0]). The engine
 * (runtime/engine.py load_checkpoint, l. 2872-2960) takes the tag from
 * latest_universal, reads dp_world_size, global_steps, skipped_steps and
 * mp_world_size from the model states file (_load_checkpoint, l. 2962-3076)
 * and does not load its module (l. 3006). ds_to_universal.py's lines:
 * extract_zero_shards l. 112-149, extract_zero_shards_stage3 l. 152-172,
 * dump_param_fragment l. 179-195, _merge_zero_shards l. 198-229,
 * merge_tp_slices l. 232-335, merge_zero3_slices l. 338-345,
 * _save_optimizer_state l. 410-419, _save_optimizer_state_stage3 l. 422-428,
 * main l. 469-.
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
