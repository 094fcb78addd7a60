/*
 * tpc_format.h - the format registry.
 *
 * Formats plug into a small table so `shard/` and `cmd/` can read and write
 * any of them by name without including a format's header. A format supplies:
 *
 *   detect(path, head, n)  how sure it is (0..100) that the file is its own,
 *                          from the first bytes (n <= 4096; head == NULL and
 *                          n == 0 when `path` is a directory). Content decides,
 *                          never the extension.
 *   open(ck, path, o, e)   append the file's tensors to `ck` (a checkpoint may
 *                          hold several files: HF shards, rank files).
 *   write(ck, sel, n, path, o, e)
 *                          write tensors sel[0..n) of `ck` (all when sel is
 *                          NULL) as one file at `path`, atomically.
 *   exts                   output name endings that select this writer by
 *                          default (".safetensors"; ".pt", ".bin", ".pth").
 *   part_exts              endings of the other files its checkpoints are made
 *                          of, never output names (".distcp", ".index.json").
 *                          A file ending in one of exts or part_exts is a
 *                          weight file: never a model folder's companion
 *                          (lib/tpc_extras.h).
 *   sharded                the folder is a training framework's sharded save
 *                          (DCP): `merge` consolidates it. write may be NULL
 *                          for a format tpconv only reads.
 *   write_part, part_items, write_index
 *                          a sharded format written one part file at a time by
 *                          a shard-set layout (dcp: shard/layout_dcp.c; NULL in
 *                          every other format). A part file holds items back to
 *                          back, each one tensor (a chunk of a global tensor);
 *                          the index over all parts is written last. See the
 *                          hooks below.
 *
 * formats/ registers its formats with tpc_formats_register_all() (declared
 * in formats/formats.h); lib/ itself knows none.
 */
#ifndef TPC_FORMAT_H
#define TPC_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tpc_ckpt.h"
#include "tpc_err.h"
#include "tpc_progress.h"

enum {
	TPC_OPEN_STRICT = 1u << 0,     /* refuse any pickle global outside torch's allow-list */
	TPC_OPEN_DEQUANTIZE = 1u << 1, /* torch quantized tensors (qint8...) become f32 (convert
					* --dequantize; FP8/GPTQ/AWQ weights are a later step
					* over the whole checkpoint: tpc_ckpt_dequantize, tpc_quant.h) */
	TPC_OPEN_HF_NAMES = 1u << 2,   /* a format with its own tensor names (GGUF) gives the
					* Hugging Face names and layout its model had; a tensor
					* without one is refused by name */
	TPC_OPEN_OPTIMIZER = 1u << 3,  /* a format that keeps the optimizer state apart (DeepSpeed
	                                  ZeRO) gives it too, as get_state_dict shapes it: the tree
	                                  {"model": {NAME: t}, "optim": {"state": {NAME: {exp_avg,
	                                  exp_avg_sq, step}}, "param_groups": {0: {..., "params":
	                                  [NAME...]}}}}, tensors named model.NAME, optim.state.NAME.KEY
	                                  (tpc_optim.h) */
};

typedef struct tpc_open_opts {
	unsigned flags;
	const char *select; /* dotted path of a subtree to take ("ema_model"), or NULL */
	tpc_value *globals; /* if non-NULL (a DICT), receives "module.name" -> count for every pickle global */
} tpc_open_opts;

enum {
	TPC_W_FORCE = 1u << 0,      /* overwrite an existing output (= TPC_OUT_FORCE) */
	TPC_W_DEDUP_TIED = 1u << 1, /* safetensors (also HF shards): keep one copy of tied tensors, the
	                               first, record the others in tpconv.aliases (merge always) */
	TPC_W_NO_INDEX = 1u << 2,   /* HF sharding: write the shards, not the index */
	TPC_W_INDEX_ONLY = 1u << 3, /* HF sharding: write only the index; every shard must exist */
	TPC_W_RESUME = 1u << 4,     /* HF sharding, several shards, no index yet (an interrupted run):
				     * a shard already there is kept when every tensor is byte-equal
				     * to what would be written, else replaced (*kept counts) */
};

struct tpc_lora_cfg; /* tpc_lora.h */

typedef struct tpc_write_opts {
	unsigned flags;
	uint64_t max_shard_size;   /* HF sharding: 0 = one file */
	const char *inner_format;  /* HF sharding: format of each shard ("safetensors", "torch") */
	const char *shard_prefix;  /* HF sharding: "model" (safetensors) / "pytorch_model" (torch) */
	tpc_progress *progress;    /* may be NULL */
	/* HF sharding by several processes (mpirun): this run writes only the
	 * shards s with s % procs == proc; procs 0 or 1: every shard */
	int procs, proc;
	/* Called by the single-file writers (safetensors, torch) once every byte
	 * is written, before the output is committed: nonzero abandons it with
	 * that error. Merge confirms the set's checksums here, checked on another
	 * core while the file was written. NULL: none. */
	int (*before_commit)(void *ctx, tpc_err *e);
	void *before_commit_ctx;
	const char *model_dir;     /* GGUF: the model folder (config.json, tokenizer files); NULL: none */
	const char *model_name;    /* GGUF: the folder whose name general.name is (NULL: model_dir's) */
	const char *outtype;       /* GGUF: tensor type, "f32" "f16" "bf16" "q8_0" or "auto" (NULL: auto),
	                              or a llama-quantize file type "q4_k_m"... (formats/gguf/gguf.h) */
	const char *gguf_pre;      /* GGUF: tokenizer.ggml.pre for a BPE tokenizer (NULL: from tokenizer.json) */
	bool gguf_no_mtp;          /* GGUF: the multi-token-prediction layers left out (convert --no-mtp) */
	/* GGUF: ck is a PEFT LoRA adapter's tensors (config `lora`, folder
	 * model_dir), written as llama.cpp's adapter GGUF over the base model
	 * in folder lora_base (its config.json); NULL: a model */
	const char *lora_base;
	const struct tpc_lora_cfg *lora;
	size_t *kept;              /* TPC_W_RESUME: shards kept (may be NULL) */
	int dcp_ranks;             /* DCP: the processes whose chunks to write (every tensor
				    * Shard(0) as torch.chunk cuts it, one __R_0.distcp each);
				    * 0 or 1: one file, every tensor whole */
	int zero_stage;            /* ds-universal: the DeepSpeed ZeRO stage whose loader reads it
				    * (1 or 2: {"param": t} files and step.pt; 3: flat tensors, the
				    * step in optimizer_state.pt); 0: the source's (a ZeRO-3 save) or 2 */
	/* ds-universal (stage 1/2): the model's family, whose record gives each
	 * parameter's tensor-parallel split (cat_dim, vocab_tensor,
	 * param_n_sub_params; lib/tpc_family_tp.h); NULL: the family config.json
	 * names, in model_dir or the folder above it (a ZeRO tag folder inside
	 * a Hugging Face Trainer checkpoint) */
	const struct tpc_family *family;
	bool tp1_only;             /* ds-universal: a matrix whose split is unknown is written
				    * with cat_dim 0, which loads right at tensor parallel 1 only,
				    * instead of refused by name */
	size_t *left;              /* HF sharding that failed for want of room (tpc_out_no_room):
				    * the shards it finished stay for a resume, counted here
				    * (may be NULL); other failures take them back */
} tpc_write_opts;

/* One chunk of a global tensor as a sharded format's index records it: the
 * box [offset, offset + size) of the global tensor `fqn` and the item that
 * holds its bytes, [foff, foff + flen) of part file `file`. */
typedef struct tpc_chunk {
	const char *fqn;
	tpc_dtype dtype;
	int ndim;
	const int64_t *shape;   /* the global (unsplit) shape */
	const int64_t *offset;  /* [ndim] */
	const int64_t *size;    /* [ndim] */
	const char *file;       /* relative to the folder */
	uint64_t foff, flen;
} tpc_chunk;

/* A file of a Hugging Face model folder, made in memory (hf_tokenizer). */
#define TPC_HF_FILES_MAX 4
typedef struct tpc_hf_file {
	char name[32];
	uint8_t *data; /* malloc'd */
	size_t len;
} tpc_hf_file;
void tpc_hf_files_release(tpc_hf_file *f, size_t n);

typedef struct tpc_format {
	const char *name;
	const char *desc;
	int (*detect)(const char *path, const uint8_t *head, size_t n);
	int (*open)(tpc_ckpt *ck, const char *path, const tpc_open_opts *o, tpc_err *e);
	int (*write)(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *path,
		     const tpc_write_opts *o, tpc_err *e);
	/* Several whole files at once (NULL: not offered): ck[k] to path[k] for
	 * k in [0, n), each as write(ck[k], NULL, 0, path[k], o) would write
	 * it, the files written in step so that bytes they share in the source
	 * are read once (a shard set's row-parallel slices). committed[k] says
	 * which files took their final name; on failure *bad is the file whose
	 * error is returned, and the files not committed are gone. */
	int (*write_many)(const tpc_ckpt *const *ck, const char *const *path, int n, const tpc_write_opts *o,
			  bool *committed, int *bad, tpc_err *e);
	const char *const *exts;
	/* Endings of the part and index files a checkpoint of this format is
	 * made of that select no writer (DCP's ".distcp"), or NULL. */
	const char *const *part_exts;
	/* An index over files written in another format (hf-index): the writer
	 * of folder outputs, never one that --format names. */
	bool index;
	/* May be a shard set's rank file format (--format of shard). */
	bool rank_file;
	/* Writes the checkpoint's object tree (torch.save's pickle): a rank file
	 * or a merged checkpoint is given a flat state dict to write. */
	bool object_tree;
	/* A single-file writer that calls o->before_commit before the file
	 * takes its name (merge checks checksums while it writes). */
	bool gates_commit;
	/* A folder of per-rank files that reads as one checkpoint (a training
	 * framework's sharded save): merge accepts it like a shard set. */
	bool sharded;
	/* max_shard_size splits the output itself, as a set of whole files of
	 * this format beside `path` (GGUF: gguf-split), not an HF folder. */
	bool self_split;
	/* What it writes is an optimizer's state only (a DeepSpeed universal
	 * checkpoint), from `convert --optimizer`: merge and shard, which write
	 * models, neither list nor take it. */
	bool optimizer_only;
	/* Sharded formats written part by part (NULL elsewhere):
	 * write_part   tensors sel[0..n) of ck (all when sel is NULL), each as one
	 *              self-contained item, in order and back to back in one part
	 *              file at `path`, atomically (DCP: a rank's __R_0.distcp);
	 * part_items   the items of the part file at `path`, in order: each item's
	 *              tensor appended to ck (named "0", "1", ...), where it lies in
	 *              *off / *len (malloc'd arrays of *n; free them); the items
	 *              must fill the file exactly;
	 * write_index  the index over the part files in `dir` (DCP: .metadata),
	 *              describing chunks c[0..n) (grouped by fqn in order of first
	 *              appearance), atomically, last. */
	int (*write_part)(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *path,
			  const tpc_write_opts *o, tpc_err *e);
	int (*part_items)(tpc_ckpt *ck, const char *path, uint64_t **off, uint64_t **len, size_t *n, tpc_err *e);
	int (*write_index)(const char *dir, const tpc_chunk *c, size_t n, const tpc_write_opts *o, tpc_err *e);
	/* A format whose file holds the model's configuration itself (GGUF's
	 * metadata): the Hugging Face config.json it gives for ck, a checkpoint
	 * this format opened (*json malloc'd). NULL elsewhere. */
	int (*hf_config)(const tpc_ckpt *ck, char **json, tpc_err *e);
	/* The same format's Hugging Face tokenizer files (tokenizer.model or
	 * tokenizer.json, tokenizer_config.json) into f[0..*n), at most
	 * TPC_HF_FILES_MAX, all computed before any is written. 0 with *n 0 and
	 * `why` (whylen bytes) saying why when they cannot be expressed (the
	 * caller warns and goes on); an error when the metadata contradicts
	 * itself. NULL elsewhere. */
	int (*hf_tokenizer)(const tpc_ckpt *ck, tpc_hf_file *f, size_t *n, char *why, size_t whylen,
			    tpc_err *e);
	/* A format that holds LoRA adapters of its own kind (GGUF's general.type
	 * "adapter"): ck, opened under its own names, renamed and laid out in
	 * place as the PEFT adapter it was made from, over the base model in
	 * folder `base` (its config.json), and the adapter_config.json that goes
	 * with it (*json malloc'd). An input that is no such adapter is refused
	 * (TPC_EINPUT). NULL elsewhere. */
	int (*lora_to_peft)(tpc_ckpt *ck, const char *base, char **json, tpc_err *e);
} tpc_format;

int tpc_format_register(const tpc_format *f);
const tpc_format *tpc_format_by_name(const char *name);
/* The registered index format (folder outputs: HF shards); NULL if none. */
const tpc_format *tpc_format_index(void);
/* The format whose extension list matches the end of `path`, or NULL. */
const tpc_format *tpc_format_for_output(const char *path);
/* Does the base name `name` end as a registered format's file does (its exts
 * or part_exts)? Such a file holds weights, never a companion. */
bool tpc_format_weight_name(const char *name);
/* Registered formats, for --help listings. */
size_t tpc_format_count(void);
const tpc_format *tpc_format_at(size_t i);

/* Detect the format of `path` (a file or directory) and open it into `ck`.
 * Unknown content is TPC_EINPUT naming what the first bytes look like. */
int tpc_ckpt_open(tpc_ckpt *ck, const char *path, const tpc_open_opts *o, tpc_err *e);
/* The same with format f, not the one detected (a folder two formats
 * claim: a shard set of a layout whose folder is also a training save). */
int tpc_ckpt_open_as(tpc_ckpt *ck, const tpc_format *f, const char *path, const tpc_open_opts *o, tpc_err *e);
/* Name of the format detected for `path`, or NULL. */
const tpc_format *tpc_format_detect(const char *path, tpc_err *e);

#endif
