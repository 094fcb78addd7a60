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
 * a weight file or index (a name ending as a registered format's files do,
 * tpc_format_weight_name: *.safetensors, *.bin, *.pt, *.pth, *.ckpt, *.gguf,
 * *.distcp, *.index.json; so formats must be registered first), not a tpconv manifest, not a training run's bookkeeping
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
#include <stdint.h>

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
	/* The model's config.json kept under another name beside a config.json
	 * that is not the model's (TensorRT-LLM sets, TPC_EXTRAS_KEPT_CONFIG):
	 * config_from is copied from src_dir as config.json (src_dir's own
	 * config.json is then not copied); config_as is the name config.json
	 * gets in dst_dir. NULL: config.json itself. */
	const char *config_from;
	const char *config_as;
} tpc_extras_opts;

/* Where a TensorRT-LLM set keeps the model's own config.json, byte for byte,
 * beside TensorRT-LLM's config.json; merge restores it as config.json. Never
 * a companion under this name. */
#define TPC_EXTRAS_KEPT_CONFIG "tpconv-hf-config.json"

/* A Megatron save folder's latest iteration: `dir`/latest_checkpointed_iteration.txt
 * names a number N (iter_{N:07d}) or "release". The folder's path (malloc'd, not
 * checked to exist), or NULL when there is no such file or it says neither. */
char *tpc_extras_megatron_iter(const char *dir);

/* What Megatron-LM records about the model in the `args` Namespace it saves
 * (megatron/training/arguments.py) beside every checkpoint: in each legacy
 * rank file (mp_rank_TT[_PPP]/model_optim_rng.pt) and in a torch_dist
 * iteration's common.pt. 0 = not recorded. query_groups is num_query_groups
 * when group_query_attention is set, else the head count (Megatron ignores
 * num_query_groups then); kv_channels defaults to hidden_size /
 * num_attention_heads as Megatron's validate_args sets it.
 *
 * The vocabulary: padded_vocab_size is what the embedding holds (the
 * tokenizer's size padded to a multiple of make_vocab_size_divisible_by x tp,
 * _vocab_size_with_padding). The true size is recorded only sometimes: as
 * orig_vocab_size (what transformers' Megatron converters read, and tpconv's
 * megatron layout writes), true_vocab_size (Megatron's tools/checkpoint), or
 * vocab_size (--vocab-size, "size of vocab before EOD or padding": with
 * tokenizer_type NullTokenizer the tokenizer adds the EOD token, one more).
 * vocab is that true size when recorded and not above the padded one. */
typedef struct tpc_megatron_args {
	int64_t heads, query_groups, kv_channels, hidden, ffn_hidden, layers, tp, pp;
	int64_t vocab, padded_vocab;
	int64_t experts, ep; /* num_experts, expert_model_parallel_size (0: not said) */
	int64_t etp;         /* expert_tensor_parallel_size (0: not said, or None: Megatron takes tp) */
	int64_t vpp;         /* virtual_pipeline_model_parallel_size (0: not said, or None) */
	const char *uneven;  /* the first arg set that moves layers off the even split of
			      * get_transformer_layer_offset (decoder_first_pipeline_num_layers,
			      * pipeline_model_parallel_layout, ...: static), or NULL */
	int64_t first, last; /* decoder_first/last_pipeline_num_layers (0: not said) */
} tpc_megatron_args;

/* The first (global) layer of model chunk v of pipeline stage p with even
 * stages: chunk v of stage p holds layers from v L / VPP + p L / (PP VPP)
 * (Megatron-LM d98e8a6 transformer/transformer_layer.py:65-215,
 * get_transformer_layer_offset's even branch; vpp 1: p L / PP). */
int64_t tpc_megatron_chunk_first_layer(int64_t layers, int64_t pp, int64_t vpp, int64_t p, int64_t v);

/* The same with uneven stages (first, last: decoder_first/last_pipeline_
 * num_layers, <= 0 when not given): model chunk v of stage p's first layer
 * (*l0) and layer count (*n), get_transformer_layer_offset's uneven branch
 * (transformer_layer.py:65-177) and get_num_layers_to_build
 * (transformer_block.py:103-182): stage 0 holds F = first, the last stage
 * T = last, the stages between (and those not given) the rest, M, evenly;
 * each stage's layers split evenly over its VPP chunks. Chunk v of stage 0
 * starts at v (F + M + T) / VPP, of stage p > 0 at v (F + M + T) / VPP +
 * F / VPP + (p - [F given]) (M / VPP) / (middle stages), each term rounded
 * down as Megatron rounds it (callers check that they divide). */
void tpc_megatron_chunk_layers(int64_t layers, int64_t pp, int64_t vpp, int64_t first, int64_t last, int64_t p,
			       int64_t v, int64_t *l0, int64_t *n);

struct tpc_value;
/* From a loaded checkpoint's object tree: a dict whose "args" is the
 * argparse.Namespace (REDUCE + BUILD). Returns true when there was one. */
bool tpc_extras_megatron_args(const struct tpc_value *root, tpc_megatron_args *a);
/* From a path: a torch_dist iteration folder (its common.pt), a save folder
 * (its latest iteration's), or a torch file holding "args" (a legacy rank
 * file). Returns true when args were found; unreadable files are no args. */
bool tpc_extras_megatron_args_at(const char *path, tpc_megatron_args *a);

/* Is `name` (a base name) a companion file? */
bool tpc_extras_is_companion(const char *name);

/* The folder whose companions go with the checkpoint at `in` (a directory, or
 * the folder of a *.index.json), or NULL when `in` is a single weight file
 * (its neighbours may belong to other models). Caller frees. */
char *tpc_extras_source_dir(const char *in);

/* Does tpc_extras_copy(src_dir, ..., o) write a config.json: src_dir holds
 * one and, with o->config_marker, it has that member? (A layout that needs a
 * config writes a minimal one otherwise.) */
bool tpc_extras_copies_config(const char *src_dir, const tpc_extras_opts *o);

/* A config.json's text as transformers writes one (json.dumps(indent=2) and
 * a newline; non-ASCII as \uXXXX): 2-space indent, members in j's order.
 * malloc'd; NULL when out of memory. */
struct cJSON;
char *tpc_extras_config_text(const struct cJSON *j);

/* Copy the companions of `src_dir` into `dst_dir` (created if missing).
 * *copied receives how many files were written (may be NULL). */
int tpc_extras_copy(const char *src_dir, const char *dst_dir, const tpc_extras_opts *o, size_t *copied,
		    tpc_err *e);

#endif
