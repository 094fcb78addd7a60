/*
 * tpc_extras.h - the non-weight files of a model folder.
 *
 * A Hugging Face model folder holds more than weights: config.json,
 * generation_config.json, tokenizer files (tokenizer.json, tokenizer.model,
 * vocab.json, merges.txt, special_tokens_map.json ...), README.md, custom code.
 * Converting, sharding or merging a folder carries them along, as vLLM's
 * sharded-state saver and OSLO's merge do, so the output loads with
 * `from_pretrained` like the input did.
 *
 * What is a companion: every regular file directly in the folder that is not
 * a weight file (*.safetensors, *.bin, *.pt, *.pth, *.ckpt), not a weight
 * index (*.index.json), not a tpconv manifest, not a training run's bookkeeping
 * (DeepSpeed's `latest` and zero_to_fp32.py, Megatron's
 * latest_checkpointed_iteration.txt, trainer_state.json) and not hidden. Files are copied
 * byte for byte (atomically, refusing to overwrite without force), except
 * config.json when the caller asks for a change: `torch_dtype` after a cast,
 * extra top-level members (TensorRT-LLM's "mapping"), or members taken out
 * again when such a set is merged.
 */
#ifndef TPC_EXTRAS_H
#define TPC_EXTRAS_H

#include <stdbool.h>
#include <stddef.h>

#include "tpc_err.h"

typedef struct tpc_extras_opts {
	unsigned flags;            /* TPC_OUT_FORCE */
	const char *torch_dtype;   /* set config.json's torch_dtype ("bfloat16"), or NULL */
	const char *config_merge;  /* JSON object whose members are set in config.json, or NULL */
	/* Members removed from config.json (NULL-terminated), or NULL: merging a
	 * TensorRT-LLM layout takes its "mapping" back out. With config_marker,
	 * config.json is copied only when it has that member (a config tpconv
	 * wrote from the model's); a config without it is left out. */
	const char *const *config_drop;
	const char *config_marker;
	const char *only;          /* copy just this companion (a layout's required file), or NULL */
} tpc_extras_opts;

/* A Megatron save folder's latest iteration: `dir`/latest_checkpointed_iteration.txt
 * names a number N (iter_{N:07d}) or "release". The folder's path (malloc'd, not
 * checked to exist), or NULL when there is no such file or it says neither. */
char *tpc_extras_megatron_iter(const char *dir);

/* Is `name` (a base name) a companion file? */
bool tpc_extras_is_companion(const char *name);

/* The folder whose companions go with the checkpoint at `in` (a directory, or
 * the folder of a *.index.json), or NULL when `in` is a single weight file
 * (its neighbours may belong to other models). Caller frees. */
char *tpc_extras_source_dir(const char *in);

/* Copy the companions of `src_dir` into `dst_dir` (created if missing).
 * *copied receives how many files were written (may be NULL). */
int tpc_extras_copy(const char *src_dir, const char *dst_dir, const tpc_extras_opts *o, size_t *copied,
		    tpc_err *e);

#endif
