/*
 * deepspeed.h - DeepSpeed ZeRO checkpoints (stage 1, 2 and 3), read as the
 * consolidated model that DeepSpeed's zero_to_fp32.py gives, without
 * DeepSpeed. Private to formats/; the format is registered as "deepspeed".
 *
 * Folder (deepspeed/runtime/engine.py _get_ckpt_name, _get_zero_ckpt_name,
 * _save_checkpoint, _save_zero_checkpoint; FRAMEWORKS.md §7):
 *   latest                       the tag of the newest save ("global_step14")
 *   global_step14/
 *     mp_rank_00_model_states.pt                       stage 1 and 2
 *     zero_pp_rank_R_mp_rank_00_model_states.pt        stage 3, one per rank
 *     zero_pp_rank_R_mp_rank_00_optim_states.pt        every stage, one per rank
 *     (bf16_zero_pp_rank_R_... with the BF16 optimizer)
 * A model-states file is a torch.save of {"module": state_dict (buffers; the
 * parameters at training precision for stage <= 2, empty placeholders for
 * stage 3), "buffer_names", "param_shapes": [OrderedDict name -> torch.Size
 * per parameter group], "frozen_param_shapes", "frozen_param_fragments",
 * "shared_params": {alias: source}, "ds_version", "global_steps", ...}; an
 * optim-states file of {"optimizer_state_dict": {"zero_stage": ZeroStageEnum,
 * "partition_count", "single_partition_of_fp32_groups" (stage <= 2: this
 * rank's slice of each group's flat fp32 buffer) or "fp32_flat_groups"
 * (stage 3: this rank's piece of every parameter, back to back), the base
 * optimizer's state (Adam's exp_avg/exp_avg_sq), the loss scaler ...},
 * "ds_config", "ds_version"}. DeepSpeed's own classes (ZeroStageEnum, the
 * loss scaler, DeepSpeedConfig) stay opaque values: nothing is called.
 *
 * Consolidation (deepspeed/utils/zero_to_fp32.py, followed step by step):
 *   stage <= 2  group g's flat buffer is the ranks' partitions end to end; its
 *               parameters lie back to back from offset 0 in param_shapes
 *               order; the group ends padded to a multiple of 2 * world size
 *               (stage_1_and_2.py nccl_start_alignment_factor = 2).
 *   stage 3     every parameter is cut into world-size pieces of
 *               ceil(numel / world size) elements (the last padded); rank r
 *               keeps piece r of each parameter back to back across its flat
 *               groups; a parameter is the ranks' pieces end to end, trimmed.
 *   frozen      stage <= 2: rank 0's frozen_param_fragments whole; stage 3:
 *               every rank's fragment end to end, trimmed.
 *   buffers     rank 0's module entries named in buffer_names, floating
 *               ones as f32 (zero_to_fp32 calls .float(); integer buffers
 *               keep their type here rather than becoming float).
 *   shared      an alias is the same tensor as its source.
 * Output order is zero_to_fp32's: buffers, frozen, trainable, aliases. Every
 * parameter is a description over the mapped optimizer files (a view, or
 * composites where a partition boundary cuts it): nothing is copied until the
 * writer streams it, so memory stays bounded whatever the model's size.
 * Checked: the number of optim files equals partition_count, every rank has
 * the same groups, parameters fit their group and use it up exactly as
 * zero_to_fp32's sanity check demands (else "these model states do not
 * belong to these optimizer files").
 *
 * Refused by name: pipeline-parallel saves (layer_NN-model_states.pt),
 * model-parallel ranks (mp_rank_01 ...), expert groups whose data-parallel
 * size differs from the others (partition_count lists that disagree), the
 * BF16 optimizer without ZeRO (no zero_stage). Universal checkpoints
 * (ds_to_universal.py) are another format: ds_universal.h.
 */
#ifndef TPC_DEEPSPEED_H
#define TPC_DEEPSPEED_H

#include <stddef.h>
#include <stdint.h>

#include "tpc_ckpt.h"
#include "tpc_err.h"

/* With the optimizer read, ck->ext holds (tag TPC_ZERO_MODEL_STATES) a DICT
 * of what the engine restores from rank 0's model states beside the
 * optimizer (engine.py _load_checkpoint: lr_scheduler, data_sampler,
 * random_ltd, global_steps, global_samples, skipped_steps; those the file
 * has), for the universal writer, which keeps them as ds_to_universal.py
 * keeps the file (main: copied). Its values may hold TENSOR leaves, which
 * index no tensor of ck. */
#define TPC_ZERO_MODEL_STATES "deepspeed-model-states"

/* Consolidate a ZeRO checkpoint given as file images (for tests and the
 * fuzzer): bufs[0..nmodel) are model-states files (rank order), the next
 * noptim are optim-states files. `label` names them in errors. */
int tpc_zero_from_buffers(tpc_ckpt *ck, const uint8_t *const *bufs, const uint64_t *lens, size_t nmodel,
			  size_t noptim, const char *label, tpc_err *e);

#endif
