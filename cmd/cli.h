/*
 * cli.h - what the subcommands share: option parsing helpers, reporting of
 * tpc_err objects as "tpconv: error: ..." lines, and the exit codes.
 *
 * Exit status (also in --help, the README and the man page):
 *   0 ok; 1 verify or diff found differences; 2 usage; 3 bad or unsupported input;
 *   4 output or I/O failure; 5 GPU/NCCL/MPI failure.
 */
#ifndef TPC_CLI_H
#define TPC_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tpc_ckpt.h"
#include "tpc_lora.h"
#include "tpc_err.h"
#include "tpc_format.h"
#include "tpc_lora.h"
#include "tpc_plan.h"
#include "tpc_rules.h"
#include "tpc_shard.h"
#include "tpc_verify.h"

#define TPC_EXIT_HELP \
	"Exit status: 0 ok, 1 verify or diff found differences, 2 usage error,\n" \
	"3 bad or unsupported input, 4 output or I/O failure (a full disk keeps a folder's\n" \
	"finished files), 5 GPU/NCCL/MPI failure; 130 (143) interrupted by SIGINT (SIGTERM):\n" \
	"temporaries removed, finished files kept. The same command again resumes.\n"

extern int tpc_cli_verbose; /* -v count; -1 with -q */

/* From the registries (cli_lists.c): the formats convert and merge write,
 * "safetensors, torch, dcp or gguf"; their output names, "*.safetensors, ...
 * or *.gguf"; the "Output formats" block of --help, one entry per format and
 * the folder output (caller frees); `tpconv __complete OPTION`, the values the shell
 * completion offers for OPTION, one a line (exit 2 when it has none). */
const char *tpc_cli_out_formats(void);
const char *tpc_cli_out_names(void);
const char *tpc_cli_rank_formats(void); /* what shard --format takes: "safetensors, torch or dcp" */
const char *tpc_cli_model_formats(void); /* those that hold a model: merge's (not ds-universal) */
/* malloc'd; NULL when out of memory. models: only the formats that hold a model */
char *tpc_cli_out_formats_help(bool models);
int tpc_cli_complete(int argc, char **argv);

/* Print "tpconv: error: <formatted>" and return the exit status for e. */
int tpc_cli_fail(const tpc_err *e);
/* After a folder output failed for want of room (tpc_out_no_room): the n
 * finished files ("rank file", "shard file") it kept and how to resume. */
void tpc_cli_note_left(size_t n, const char *what);
/* An option getopt did not take (`token` as written): a missing value, or
 * an unknown name with the nearest of the command's long options; exit 2. */
struct option;
int tpc_cli_bad_option(const char *cmd, const char *token, const struct option *lo);
/* Print "tpconv: error: <msg>" for a usage problem with a hint; returns 2. */
int tpc_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tpc_cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tpc_cli_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Progress is shown when stderr is a terminal, or with --progress; never with -q. */
bool tpc_cli_progress_wanted(bool forced);

/* Does output name OUT mean a folder (HF shards, as save_pretrained("merged")
 * makes)? Yes for an existing directory, a name ending in '/', and a name
 * that does not exist and has no file suffix ("merged", "out/llama-3.1");
 * no for "model.safetensors", "x.gguf" and any existing file. */
bool tpc_cli_folder_output(const char *out);

/* A report (--json, --junit) to `path`, atomically; "-" is standard output. */
struct tpc_buf;
int tpc_cli_write_report(const char *path, const struct tpc_buf *b, tpc_err *e);
/* Can a report be written to `path` (NULL and "-": yes)? Checked before a
 * long run, so that an unwritable path fails at once (exit 4). */
int tpc_cli_report_check(const char *path, tpc_err *e);

/* The writer of OUT for convert and merge: --format NAME (`fmt_name`) when
 * given, a folder format (dcp) laying out its own files; else the index
 * format (HF shards) over --format's, OUT's suffix's or safetensors' files
 * for a folder output or with --max-shard-size (`max_size`); else the
 * format OUT's suffix names. Fills *outf, *sharded (an HF folder) and
 * wo->inner_format; returns 0 or the usage exit status, said for `cmd`. */
int tpc_cli_writer(const char *cmd, const char *out, const char *fmt_name, bool max_size, tpc_write_opts *wo,
		   const tpc_format **outf, bool *sharded);

/* A horizontal bar for `value` out of `max`, `width` cells wide: block
 * characters on a terminal, '#' otherwise (no escape codes either way). */
void tpc_cli_bar(FILE *f, uint64_t value, uint64_t max, int width);

/* The argument handling of the catalogue commands (plan, rules): exactly one
 * of --list, NAME or --check FILE, plus -q/-v/-h. Returns -1 to go on with
 * *list, *check or *name set, or the exit status (help printed: 0). */
int tpc_cli_catalog_args(const char *cmd, const char *help, int argc, char **argv, bool *list, const char **check,
			 const char **name);

/* --dequantize (convert, inspect): read the quantization_config of the
 * model folder of `in` (config.json, else AutoGPTQ's quantize_config.json; a
 * single weight file: its folder) and dequantize ck's FP8 / GPTQ / AWQ
 * weights (lib/tpc_quant.h) to config.json's torch_dtype, else bf16.
 * Tensors that look quantized with no quantization_config are refused.
 * *ndq: how many weights. Returns 0 or an exit status (message printed). */
int tpc_cli_dequantize(const char *in, tpc_ckpt *ck, size_t *ndq);
/* --lora DIR[:WEIGHT] (convert, shard): the PEFT LoRA adapter in folder DIR
 * (adapter_config.json, adapter_model.safetensors or .bin) merged into ck
 * with weight WEIGHT (default 1) as computed tensors (lib/tpc_lora.h).
 * `strict`: the .bin's pickle under --strict; `base` (may be NULL) the base
 * checkpoint's path, whose config.json (with `set`'s --config) names its
 * family. 0 or an exit status (said). */
struct tpc_cli_set;
int tpc_cli_lora(const char *arg, tpc_ckpt *ck, bool strict, const char *base, const struct tpc_cli_set *set);
/* A PEFT adapter folder opened: its adapter_config.json and its weights
 * (adapter_model.safetensors, else adapter_model.bin). Closing one that
 * failed to open, or was never opened but zeroed, is fine. */
typedef struct tpc_cli_adapter {
	tpc_lora_cfg cfg;
	tpc_ckpt ad;
	bool have_cfg;
} tpc_cli_adapter;
int tpc_cli_adapter_open(tpc_cli_adapter *a, const char *dir, bool strict, tpc_err *e);
void tpc_cli_adapter_close(tpc_cli_adapter *a);
/* convert --base BASE (cli_lora_gguf.c): IN a PEFT adapter folder, OUT the
 * adapter GGUF llama.cpp's convert_lora_to_gguf.py --base BASE writes; IN an
 * adapter GGUF, OUT the PEFT adapter folder it was. The exit status. */
int tpc_cli_lora_gguf(const char *in, const char *out, const char *base, const tpc_write_opts *wo, bool strict);
/* shard ADAPTER --base BASE (cli_lora_shard.c): the PEFT adapter folder split
 * beside the base checkpoint `base` (opened with its plan; facts f checked
 * against it) by the plan shard/tpc_lora_shard.h derives, into sp with the
 * peft layout (so->layout, so->config_dir set). ls owns the adapter and its
 * plan, which sp reads: release sp first. 0, a negative status in e, or an
 * exit status already said. */
typedef struct tpc_cli_lora_set {
	tpc_cli_adapter a;
	tpc_plan plan;
} tpc_cli_lora_set;
void tpc_cli_lora_set_init(tpc_cli_lora_set *ls);
void tpc_cli_lora_set_release(tpc_cli_lora_set *ls);
struct tpc_cli_input;
int tpc_cli_lora_shard_build(tpc_cli_lora_set *ls, const char *adapter, const struct tpc_cli_input *base,
			     const struct tpc_cli_set *set, const tpc_model_facts *f, tpc_shard_opts *so, bool strict,
			     tpc_shard_plan *sp, tpc_err *e);
/* merge NEMO_DIR -o DIR (cli_lora_shard.c): a NeMo / Megatron LoRA saved per
 * tensor-parallel rank, as one PEFT adapter folder (shard/tpc_lora_nemo.h);
 * --dry-run lists it. 0 or an exit status (said). */
int tpc_cli_lora_nemo_merge(const char *dir, const char *out, const tpc_write_opts *wo, bool dry);
/* merge --recipe FILE (cli_mix.c): the recipe's models merged (lib/tpc_mix.h)
 * and written to out as convert writes. 0 or the exit status (said). */
typedef struct tpc_cli_mix_args {
	const char *recipe, *out;
	const struct tpc_format *outf;
	bool sharded, dry, force_progress, no_extras;
	const tpc_write_opts *wo;
	uint64_t seed;           /* DARE's */
} tpc_cli_mix_args;
int tpc_cli_mix(const tpc_cli_mix_args *a);
/* A checkpoint's companions (config, tokenizer...) from beside `in` into the
 * folder output `out` (convert's; config.json's torch_dtype set to the
 * written dtype, quantization_config dropped when ndq). 0 or the exit status. */
int tpc_cli_copy_companions(const tpc_ckpt *ck, const char *in, const char *out, const tpc_write_opts *wo, size_t kept,
			    size_t ndq);
/* the most --lora options one command takes */
#define TPC_CLI_LORA_MAX 64
/* The quantization config of `in` (config.json's quantization_config beside
 * it, else an AutoGPTQ quantize_config.json); q->method NONE when there is
 * none. *cfg_path (may be NULL) receives config.json's path (free it). */
struct tpc_quant_cfg;
int tpc_cli_quant_cfg(const char *in, struct tpc_quant_cfg *q, char **cfg_path, tpc_err *e);

int cmd_inspect(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_shard(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_rules(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_diff(int argc, char **argv);

/*
 * The remap stage's options (cmd_rules.c), shared by convert and shard:
 * splice TPC_CLI_REMAP_LONGOPTS into the getopt_long table, hand every code in
 * [TPC_OPT_RULES, TPC_OPT_REMAP_END) to tpc_cli_remap_opt in command-line
 * order (rules apply in that order), set dry_run / strict from the command's
 * own flags, and call tpc_cli_remap_run between opening and writing.
 */
enum {
	TPC_OPT_RULES = 0x1000, TPC_OPT_RENAME, TPC_OPT_WHEN, TPC_OPT_DROP, TPC_OPT_KEEP,
	TPC_OPT_STRIP_PREFIX, TPC_OPT_ADD_PREFIX, TPC_OPT_TRANSPOSE, TPC_OPT_DTYPE,
	TPC_OPT_EXPECT_KEYS, TPC_OPT_FACT_CONFIG, TPC_OPT_FACT_HEADS, TPC_OPT_FACT_KV_HEADS,
	TPC_OPT_FACT_HEAD_DIM, TPC_OPT_FACT_HIDDEN, TPC_OPT_FACT_VOCAB, TPC_OPT_REMAP_END,
};
#define TPC_CLI_REMAP_LONGOPTS \
	{"rules", required_argument, NULL, TPC_OPT_RULES}, {"rename", required_argument, NULL, TPC_OPT_RENAME}, \
	{"when", required_argument, NULL, TPC_OPT_WHEN}, {"drop", required_argument, NULL, TPC_OPT_DROP}, \
	{"keep", required_argument, NULL, TPC_OPT_KEEP}, {"strip-prefix", required_argument, NULL, TPC_OPT_STRIP_PREFIX}, \
	{"add-prefix", required_argument, NULL, TPC_OPT_ADD_PREFIX}, {"transpose", required_argument, NULL, TPC_OPT_TRANSPOSE}, \
	{"dtype", required_argument, NULL, TPC_OPT_DTYPE}, {"expect-keys", required_argument, NULL, TPC_OPT_EXPECT_KEYS}
/* The model facts unfuse rules may need, for commands without their own
 * (convert; shard has them in TPC_CLI_SET_LONGOPTS and hands them over). */
#define TPC_CLI_REMAP_FACT_LONGOPTS \
	{"config", required_argument, NULL, TPC_OPT_FACT_CONFIG}, {"heads", required_argument, NULL, TPC_OPT_FACT_HEADS}, \
	{"kv-heads", required_argument, NULL, TPC_OPT_FACT_KV_HEADS}, {"head-dim", required_argument, NULL, TPC_OPT_FACT_HEAD_DIM}, \
	{"hidden", required_argument, NULL, TPC_OPT_FACT_HIDDEN}, {"vocab", required_argument, NULL, TPC_OPT_FACT_VOCAB}

typedef struct tpc_cli_remap {
	tpc_rules *rules;        /* NULL until a rule is given */
	const char *when;        /* a --when waiting for its rule */
	const char *expect_keys; /* --expect-keys FILE */
	bool dry_run;            /* print the old -> new table, apply nothing */
	bool strict;             /* a rule that matches nothing is an error */
	/* Model facts for unfuse rules: flags first, then the args a Megatron
	 * checkpoint records, then --config (or IN/config.json); the last two
	 * must agree. */
	tpc_model_facts facts;
	const char *config;
	const char *in;          /* the input (set by the command) */
} tpc_cli_remap;

/* Help text for the options above (ends with a newline). */
extern const char tpc_cli_remap_help[];
extern const char tpc_cli_remap_fact_help[];
void tpc_cli_remap_init(tpc_cli_remap *r);
void tpc_cli_remap_release(tpc_cli_remap *r);
/* Run a command body with a fresh remap stage, released after. */
int tpc_cli_with_remap(int argc, char **argv, int (*body)(int argc, char **argv, tpc_cli_remap *rm));
/* One option: 0, an exit status (message printed), or -1 if `code` is not a
 * remap option. */
int tpc_cli_remap_opt(tpc_cli_remap *r, const char *cmd, int code, const char *arg);
/* Plan the rules over ck; warn about rules that matched nothing (error with
 * strict); with dry_run print the table on stdout; check --expect-keys (exit
 * status 1 with the missing and unexpected keys on stderr); unless dry_run,
 * apply. Returns 0 or an exit status (message printed). Does nothing without
 * rules, --expect-keys or dry_run. */
int tpc_cli_remap_run(tpc_cli_remap *r, const char *cmd, tpc_ckpt *ck);

/*
 * The options naming a shard set's degrees, plan and model facts, shared by
 * shard and merge (cmd_shard.c): splice TPC_CLI_SET_LONGOPTS into the table
 * and hand every code in [TPC_OPT_TP, TPC_OPT_SET_END) to tpc_cli_set_opt.
 */
enum {
	TPC_OPT_TP = 0x1100, TPC_OPT_PP, TPC_OPT_PRESET, TPC_OPT_PLAN, TPC_OPT_CONFIG, TPC_OPT_HEADS,
	TPC_OPT_KV_HEADS, TPC_OPT_HEAD_DIM, TPC_OPT_HIDDEN, TPC_OPT_VOCAB, TPC_OPT_SELECT, TPC_OPT_PRESET_FORCE,
	TPC_OPT_SET_END,
};
/* the degrees and plan alone (convert, inspect: the facts come with the remap options) */
#define TPC_CLI_SET_PLAN_LONGOPTS \
	{"tp", required_argument, NULL, TPC_OPT_TP}, {"pp", required_argument, NULL, TPC_OPT_PP}, \
	{"preset", required_argument, NULL, TPC_OPT_PRESET}, {"plan", required_argument, NULL, TPC_OPT_PLAN}, \
	{"preset-force", no_argument, NULL, TPC_OPT_PRESET_FORCE}
#define TPC_CLI_SET_LONGOPTS \
	TPC_CLI_SET_PLAN_LONGOPTS, {"config", required_argument, NULL, TPC_OPT_CONFIG}, {"heads", required_argument, NULL, TPC_OPT_HEADS}, \
	{"kv-heads", required_argument, NULL, TPC_OPT_KV_HEADS}, {"head-dim", required_argument, NULL, TPC_OPT_HEAD_DIM}, \
	{"hidden", required_argument, NULL, TPC_OPT_HIDDEN}, {"vocab", required_argument, NULL, TPC_OPT_VOCAB}, \
	{"select", required_argument, NULL, TPC_OPT_SELECT}

typedef struct tpc_cli_set {
	int64_t tp, pp;           /* 0: not given */
	const char *preset, *plan_file, *config;
	bool preset_force;        /* --preset-force: the preset even where config.json names
				   * an architecture its record does not list */
	const char *select;       /* --select: a subtree of a checkpoint file */
	tpc_model_facts facts;    /* --heads, --kv-heads, --head-dim, --hidden, --vocab */
	tpc_value *globals;       /* a checkpoint's pickle globals collected here (inspect --globals), or NULL */
} tpc_cli_set;

void tpc_cli_set_init(tpc_cli_set *s, int64_t pp_default);
/* One option of a command that takes the set's and the remap stage's (either
 * may be NULL): 0, an exit status (message printed), or -1 if it is neither. */
int tpc_cli_input_opt(tpc_cli_set *s, tpc_cli_remap *rm, const char *cmd, int code, const char *flag, const char *arg);
/* One option (`flag` as written, for messages): 0, an exit status (message
 * printed), or -1 if `code` is not one of these. */
int tpc_cli_set_opt(tpc_cli_set *s, const char *cmd, int code, const char *flag, const char *arg);

/*
 * One way to open an input (cli_input.c): a checkpoint, or a shard set merged
 * on the fly (a tpconv manifest set, a foreign set with the plan it was split
 * with, a training framework's sharded folder). The plan: --preset/--plan,
 * else (TPC_CLI_IN_SET_PLAN) the set's manifest's. Returns 0, a negative
 * status in e (path set), or a positive exit status already reported.
 */
enum {
	TPC_CLI_IN_CHECKSUMS = 1u << 0,  /* check a set's rank tensors against its manifest */
	TPC_CLI_IN_DEFER = 1u << 1,      /* ... in the reads that follow (tpc_merge_opts) */
	TPC_CLI_IN_DEQUANTIZE = 1u << 2, /* a checkpoint's FP8/GPTQ/AWQ weights dense (TPC_OPEN_DEQUANTIZE) */
	TPC_CLI_IN_SET_PLAN = 1u << 3,   /* take a manifest set's plan when no flag names one */
	TPC_CLI_IN_SET = 1u << 4,        /* the input must be a set (merge): a folder no layout claims is
					  * left to tpc_merge_open to refuse */
	TPC_CLI_IN_TAKE_RANK0 = 1u << 5, /* replicated tensors that differ: rank 0's copy */
	TPC_CLI_IN_WHOLE = 1u << 6,      /* the command needs the whole model (shard): one rank
					  * file of a Megatron set is refused (exit 2) */
	TPC_CLI_IN_HF_NAMES = 1u << 7,   /* a GGUF read as its Hugging Face model (TPC_OPEN_HF_NAMES);
					  * with TPC_CLI_IN_SET_PLAN the facts from its metadata, and
					  * its family's preset when no flag names a plan */
	TPC_CLI_IN_STRICT = 1u << 8,     /* a checkpoint's pickle globals within torch's allow-list
					  * (TPC_OPEN_STRICT); refused on a set (exit 2) */
	TPC_CLI_IN_RANK0 = 1u << 9,      /* a set without a manifest and no plan to merge it with:
					  * rank 0's file as it is (inspect), in->rank0 its path */
	TPC_CLI_IN_OPTIMIZER = 1u << 10, /* the optimizer state too (TPC_OPEN_OPTIMIZER) */
};
typedef struct tpc_cli_input {
	const char *path;
	tpc_set_kind kind;
	tpc_ckpt ck;          /* a checkpoint (have_ck) */
	tpc_merge mg;         /* a set (have_mg) */
	bool have_ck, have_mg, have_plan;
	tpc_ckpt *view;       /* &ck or &mg.out */
	tpc_plan plan;
	tpc_model_facts own;  /* what a checkpoint records of itself (Megatron's args, GGUF's metadata) */
	char *hf_config;      /* the config.json a GGUF's metadata gives (TPC_CLI_IN_HF_NAMES), or NULL */
	const tpc_layout *layout; /* a foreign set's layout */
	const char *plan_name;    /* what a foreign set is merged with: a preset, a plan file */
	char *rank0;          /* TPC_CLI_IN_RANK0: the rank file read instead of the set, or NULL */
	struct tpc_merge_optim *optim; /* TPC_CLI_IN_OPTIMIZER on a set whose rank files hold optimizer
	                                  state: the model and that state joined (view), or NULL */
} tpc_cli_input;
void tpc_cli_input_init(tpc_cli_input *in);
int tpc_cli_input_open(tpc_cli_input *in, const char *cmd, const char *path, const struct tpc_cli_set *set,
		       unsigned flags, tpc_err *e);
void tpc_cli_input_release(tpc_cli_input *in);
/* The preset of a model whose config.json (the file cfg_path, or the text
 * cfg_json; neither: none) names its architecture (architectures[0], else
 * its model_type): --preset checked against it (a record that does not
 * list it is refused, exit 2 naming both, unless --preset-force), else the
 * family that lists it when no --plan is given. *preset: set->preset, the
 * inferred name (said with -v), or NULL. 0 or the exit status (said). */
int tpc_cli_preset_for(const char *cmd, const struct tpc_cli_set *set, const char *cfg_path, const char *cfg_json,
		       const char **preset);
/* The config.json that describes the model at `path` (--config; a model
 * folder's or a set's own; a set's rank 0 folder's), or NULL (malloc'd). */
char *tpc_cli_model_config(const char *path, const struct tpc_cli_set *set);
/* The family whose record lists the architecture config.json at cfg_path
 * names (architectures[0], else its model_type's); NULL if none or unreadable. */
const struct tpc_family *tpc_cli_config_family(const char *cfg_path);
/* A multimodal checkpoint (config.json's architectures[0] a record's
 * hf_wrap) read as its text model, as convert_hf_to_gguf.py does
 * (tpc_family_text_model), with a warning naming what was left out; nothing
 * for any other. 0 or the exit status (said). */
struct tpc_ckpt;
int tpc_cli_text_model(const char *path, const struct tpc_cli_set *set, struct tpc_ckpt *ck);
/* A checkpoint whose file holds its configuration (GGUF): the config.json
 * it gives (*json, malloc'd; NULL for other formats) and its facts filled
 * into *f where *f has none. */
int tpc_cli_own_config(const tpc_ckpt *ck, char **json, tpc_model_facts *f, tpc_err *e);
/* The facts in the one order (flags, --config, config.json beside or
 * inside the input, the set's manifest or the checkpoint's or set's own
 * record (Megatron's args), the plan's), each labelled with its origin; the
 * shapes come last (tpc_facts_from_shapes, which checks them all). */
int tpc_cli_input_facts(const tpc_cli_input *in, const struct tpc_cli_set *set, tpc_model_facts *out, tpc_err *e);
/* The folder whose companions (config.json, tokenizer ...) go with the set
 * mg read from `dir`, as its layout keeps them (tpc_layout_merge_extras:
 * an hf set's rank 0 folder; a TensorRT-LLM set's top, its config.json
 * losing the mapping through xo; a DCP folder itself), or NULL: merge's
 * and reshard's one answer. */
const char *tpc_cli_set_companions(const tpc_merge *mg, const char *dir, tpc_extras_opts *xo);
/* Those companions into the folder output `out` of a merged set (a resumed
 * one's, `kept` shards, refreshed); a set that keeps no Hugging Face config
 * (TensorRT-LLM) has it rebuilt by its layout; `ndq` weights dequantized:
 * config.json loses quantization_config. 0 or the exit status (said). */
int tpc_cli_set_copy_companions(const tpc_merge *mg, const char *dir, const char *out, const tpc_write_opts *wo,
				size_t kept, size_t ndq);
/* The model folder (config.json, tokenizer files) of what `in` opened, for
 * a writer that reads them (GGUF) in wo->model_dir and *dir (malloc'd, or
 * NULL; the caller frees it): a set's companions, the set's folder naming
 * the model (wo->model_name); else the folder of the input
 * (tpc_extras_source_dir). A set whose config.json is not the model's
 * (TensorRT-LLM) is refused when `f` reads it. 0 or the exit status (said). */
int tpc_cli_input_model_dir(const tpc_cli_input *in, const char *cmd, const tpc_format *f, tpc_write_opts *wo,
			    char **dir);
/* The write of what `in` (the ctx) opened: a set through tpc_merge_write
 * (ties, checksums), a checkpoint with f->write. */
int tpc_cli_input_write(void *ctx, const tpc_format *f, const char *out, const tpc_write_opts *wo, tpc_err *e);

/* Is `path` (not a folder) one rank file of a Megatron set of several ranks?
 * Its args (a: tp and pp; NULL or 0 when unknown) say so, else its
 * SAVE/ITER/mp_rank_TT[_PPP]/ folder among others (the megatron layout's
 * geometry of SAVE). Then `what` says what it is ("this is one rank file of
 * a Megatron set (tp 2 x pp 1, from its args)") and `how` the merge command
 * that gives the whole model. */
bool tpc_cli_megatron_rank(const char *path, const tpc_megatron_args *a, char *what, size_t n, char *how,
			   size_t hn);

/* Shared by shard and merge (cmd_shard.c). A count option: 0, or exit status 2
 * after the message. */
int tpc_cli_count(const char *cmd, const char *flag, const char *arg, uint64_t max, int64_t *out);
/* --preset NAME or --plan FILE into p. */
int tpc_cli_load_plan(const char *preset, const char *file, tpc_plan *p, tpc_err *e);
/* Model facts: flags, then --config (or IN/config.json when IN is a model
 * folder), then `more` (a manifest's), then the plan's defaults. */
int tpc_cli_facts(const tpc_model_facts *flags, const char *config, const char *in, const tpc_model_facts *more,
		  const tpc_plan *plan, tpc_model_facts *out, tpc_err *e);

/*
 * Under mpirun (cli_mpi.c). tpc_cli_mpi_start: 0 and m->on when this process
 * is one of several (MPI initialised), 0 and !m->on otherwise, or an exit
 * status (message printed). tpc_cli_mpi_shard: this process's share of the
 * rank files, then process 0 completes the set; returns the job's exit status
 * (0 everywhere or the worst of all, with this process's files taken back).
 * tpc_cli_mpi_end: finalise, or MPI_Abort when `status` is an error the other
 * processes have not agreed on.
 */
typedef struct tpc_cli_mpi {
	bool on, agreed;
	int me, size;
} tpc_cli_mpi;
struct tpc_shard_plan;
struct tpc_shard_opts;
int tpc_cli_mpi_start(tpc_cli_mpi *m, const char *cmd);
int tpc_cli_mpi_shard(tpc_cli_mpi *m, struct tpc_shard_plan *sp, const char *dir, const struct tpc_shard_opts *o);
/* The job's write of one output (merge, convert) through wr(ctx, ...): a
 * sharded (HF folder) output divided among the processes, process 0 writing
 * the index last; a single file by process 0. Returns the job's status; on 0
 * process 0 goes on (companions, messages), the others are done. */
typedef int (*tpc_cli_write_fn)(void *ctx, const tpc_format *f, const char *out, const tpc_write_opts *wo,
				tpc_err *e);
int tpc_cli_mpi_write(tpc_cli_mpi *m, tpc_cli_write_fn wr, void *ctx, const tpc_ckpt *ck, const tpc_format *f,
		      bool sharded, const char *out, const tpc_write_opts *wo);
/* Convert's and merge's write of ck with f to out through wr: progress on
 * stderr, an interrupted folder output's shards kept unless --force (*kept
 * counts them), under mpirun the shards divided among the processes. 0 with
 * *go_on when this process goes on (the others are done), else the exit
 * status (said). */
int tpc_cli_write_out(const char *cmd, tpc_cli_write_fn wr, void *ctx, const tpc_ckpt *ck, const tpc_format *f,
		      bool sharded, const char *out, tpc_write_opts *wo, bool force_progress, size_t *kept, bool *go_on);
/* The job of this process (main.c starts it for merge and convert). */
extern tpc_cli_mpi tpc_cli_job;
void tpc_cli_mpi_end(tpc_cli_mpi *m, int status);


#endif
