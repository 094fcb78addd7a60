/* cmd_convert.c - `tpconv convert IN -o OUT`. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_extras.h"
#include "tpc_family.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_optim.h"
#include "tpc_shard.h"
#include "tpc_util.h"

static const char *help =
	"usage: tpconv convert [options] IN -o OUT\n\n"
	"Convert a checkpoint. IN is a file, an HF sharded directory or a *.index.json\n"
	"(format detected from content), or a shard set (any layout 'tpconv merge'\n"
	"reads), merged on the fly as merge merges it: the same bytes, no temporary\n"
	"file (a set without a tpconv manifest takes --preset/--plan and --tp/--pp; the\n"
	"rename rules, --select and --strict apply to one checkpoint and are refused on\n"
	"a set). The output format is --format, else taken\n"
	"from OUT's name (Output formats, below). With --max-shard-size,\n"
	"or when OUT is a directory, ends in '/' or has no file suffix (\"out\", as\n"
	"save_pretrained(\"out\") makes), OUT becomes an HF sharded folder:\n"
	"model-0000N-of-0000M.safetensors + model.safetensors.index.json (one shard:\n"
	"model.safetensors and no index). Tensor bytes are streamed from the input\n"
	"mapping; the output appears atomically (temporary file, fsync, rename).\n"
	"Rename/remap rules and casts (below) run between reading and writing; a\n"
	"cast is done while streaming, with no whole-model buffer.\n"
	"Under 'mpirun -np N' the shards of a folder output are divided among the N\n"
	"processes (shard s to process s mod N); process 0 writes the index last, once\n"
	"every process has succeeded (a failure leaves no index); one file: process 0.\n\n"
	"Options:\n"
	"  -o, --output OUT         output file or directory (required unless --dry-run)\n"
	"  --format NAME            %s (Output formats, below)\n"
	"  --max-shard-size SIZE    HF sharding: largest shard (default 5GB; K/M/G/T = 1000^n,\n"
	"                           Ki/Mi/Gi/Ti = 1024^n); GGUF output: a gguf-split set\n"
	"                           OUT-0000K-of-0000N.gguf\n"
	"  --outtype TYPE           GGUF output: f32, f16, bf16, q8_0 or auto (the default: as\n"
	"                           convert_hf_to_gguf.py; from a GGUF input, types kept), or\n"
	"                           a llama-quantize type, the file it writes (no imatrix):\n"
	"                           q4_0 q4_1 q5_0 q5_1 q2_k q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m\n"
	"                           q5_k_s q5_k_m q6_k iq4_nl iq4_xs tq1_0 tq2_0 (q3_k, q4_k,\n"
	"                           q5_k: the _m mixtures)\n"
	"  --gguf-names             a GGUF input keeps its GGUF tensor names and layout (default:\n"
	"                           the Hugging Face model's names, Q/K rows, experts and norms,\n"
	"                           and a folder output gets the config.json and tokenizer files\n"
	"                           its metadata gives;\n"
	"                           a GGUF output always keeps them)\n"
	"  --gguf-pre NAME          GGUF output of a BPE tokenizer: tokenizer.ggml.pre (default:\n"
	"                           the llama.cpp name for tokenizer.json's pre_tokenizer)\n"
	"  --no-mtp                 GGUF output of a Hugging Face model: leave its multi-token-\n"
	"                           prediction layers out, as convert_hf_to_gguf.py --no-mtp\n"
	"                           (Qwen3-Next, Qwen3.5, Qwen3.5-MoE's mtp.*, GLM-4.5's\n"
	"                           nextn layers; the default keeps them, as the reference)\n"
	"  --select PATH            take only the subtree PATH of a nested checkpoint\n"
	"  --optimizer              write the optimizer state of IN (a DCP save's optim, a\n"
	"                           DeepSpeed ZeRO 1/2/3 or universal folder's Adam state,\n"
	"                           Megatron's distributed optimizer in torch_dist or a\n"
	"                           legacy save: a rank file, or the whole set joined as its\n"
	"                           parameters are merged, with --preset; each moment tied\n"
	"                           to its parameter, element for element) as\n"
	"                           torch.optim.Optimizer.state_dict() gives it, to a torch\n"
	"                           file OUT (optimizer.pt, what the HF Trainer and\n"
	"                           load_state_dict read): state by parameter number in\n"
	"                           param_groups order, each group's hyper-parameters; with\n"
	"                           --format dcp, a DCP folder of the model and that state as\n"
	"                           get_state_dict names them (model.NAME, optim.state.NAME.*)\n"
	"  --dcp-ranks N            --format dcp: write the chunks N processes of an FSDP2 mesh\n"
	"                           hold (every tensor Shard(0) as torch.chunk cuts it, a\n"
	"                           parameter's moments cut as it is) into __R_0.distcp, R < N\n"
	"  --format ds-universal    (implies --optimizer) a DeepSpeed universal checkpoint, the\n"
	"                           tag folder OUT (zero/NAME/fp32.pt, exp_avg.pt, ...) and\n"
	"                           OUT/../latest_universal, what DeepSpeed loads with\n"
	"                           \"load_universal\": true at any world size\n"
	"  --zero-stage N           --format ds-universal: the layout the ZeRO stage N engine\n"
	"                           loads (1 or 2; 3: flat tensors, one param group); default\n"
	"                           the source's stage (a ZeRO save), else 2\n"
	"  --preset NAME            --format ds-universal: the model's family (default: the one\n"
	"                           config.json beside IN or in its parent names), whose split\n"
	"                           rules give each parameter's cat_dim, vocab_tensor,\n"
	"                           param_n_sub_params or sub_param_shape, so DeepSpeed loads it\n"
	"                           right at any tensor-parallel degree; a matrix of unknown\n"
	"                           split is refused\n"
	"  --tp1-only               --format ds-universal: write a matrix of unknown split with\n"
	"                           cat_dim 0 (loads right at tensor parallel 1 only)\n"
	"  --preset NAME, --plan FILE, --tp N, --pp M\n"
	"                           the plan and degrees of a shard set without a manifest\n"
	"  --strict                 refuse pickle globals outside torch's weights_only allow-list,\n"
	"                           and make a rule that matches no tensor an error\n"
	"  --dry-run                print the old -> new name table (and dropped names), check\n"
	"                           --expect-keys, write nothing\n"
	"  --dequantize             dequantize quantized weights: FP8 (block, per-tensor or per-channel\n"
	"                           scales), GPTQ, AWQ, compressed-tensors pack-quantized and NVFP4/\n"
	"                           MXFP4 (compressed-tensors, ModelOpt), as the model folder's config.json\n"
	"                           (or hf_quant_config.json)\n"
	"                           quantization_config says, to its torch_dtype (else bf16; --dtype\n"
	"                           chooses), streamed; scales and packed tensors are dropped and the\n"
	"                           copied config.json loses its quantization_config. torch quantized\n"
	"                           tensors (qint8...) become float32\n"
	"  --lora DIR[:WEIGHT]      merge the PEFT LoRA adapter in folder DIR (adapter_config.json,\n"
	"                           adapter_model.safetensors or .bin) into IN, scaled by WEIGHT\n"
	"                           (default 1): W + WEIGHT*alpha/r * B@A in f32 (rsLoRA, DoRA,\n"
	"                           Conv1D, embeddings, lora_bias, modules_to_save, rank_pattern),\n"
	"                           computed while streaming, written in the base's dtype;\n"
	"                           repeat for several adapters, applied in order (after\n"
	"                           --dequantize, before the rename rules). Keys or settings it\n"
	"                           cannot merge exactly are refused by name (exit 3)\n"
	"  --base BASE              LoRA adapters and llama.cpp: IN a PEFT adapter folder, OUT.gguf\n"
	"                           the adapter GGUF convert_lora_to_gguf.py --base BASE writes\n"
	"                           (--outtype f32, the default, f16, bf16 or q8_0); IN an adapter\n"
	"                           GGUF, OUT the PEFT adapter folder it was. BASE is the base\n"
	"                           model's folder: its config.json (doc/lora-gguf.md)\n"
	"  --dedup-tied             safetensors: store tied tensors once, record aliases in metadata\n"
	"  --no-extras              do not copy the model folder's config, tokenizer and other\n"
	"                           non-weight files beside a folder output (default: copy them)\n"
	"  -f, --force              overwrite existing outputs\n"
	"  --progress               show progress even when stderr is not a terminal\n"
	"  -q, --quiet              errors only\n"
	"  -v, --verbose            say more\n"
	"  -h, --help               this help\n\n"
	"%s\n"
	"%s\n"
	"%s\n"
	"Exit status 1 also means --expect-keys found missing or unexpected keys.\n" TPC_EXIT_HELP;

static void print_help(void)
{
	char *formats = tpc_cli_out_formats_help(false);
	printf(help, tpc_cli_out_formats(), formats ? formats : "", tpc_cli_remap_help, tpc_cli_remap_fact_help);
	free(formats);
}

enum { O_DRY_RUN = 0x1200, O_OUTTYPE, O_GGUF_NAMES, O_GGUF_PRE, O_LORA, O_BASE, O_OPTIMIZER, O_DCP_RANKS, O_NO_MTP, O_ZERO_STAGE, O_TP1_ONLY };

/* A folder output of a checkpoint whose file holds its configuration
 * (GGUF): the config.json its metadata gives, unless one was copied. 0 or
 * the exit status. */
static int write_hf_config(const tpc_ckpt *ck, const char *out, const tpc_write_opts *wo)
{
	const tpc_format *f = ck->format ? tpc_format_by_name(ck->format) : NULL;
	char *path = NULL, *json = NULL;
	tpc_err e;
	int ret = 0;
	if (!f || !f->hf_config)
		return 0;
	tpc_err_init(&e);
	if (!(path = tpc_path_join(out, "config.json")))
		ret = tpc_err_nomem(&e);
	else if (tpc_exists(path))
		goto out; /* the model folder's own, copied */
	if (!ret)
		ret = f->hf_config(ck, &json, &e);
	if (!ret)
		ret = tpc_write_file_atomic(path, json, strlen(json), wo->flags & TPC_W_FORCE ? TPC_OUT_FORCE : 0, &e);
	if (!ret)
		tpc_cli_info("wrote config.json from the %s metadata", ck->format);
out:
	free(json);
	free(path);
	return ret ? tpc_cli_fail(&e) : 0;
}

/* A folder output of a GGUF: the tokenizer files its metadata gives,
 * computed (and checked) before any weight is written, unless --no-extras
 * or --gguf-names. 0 or the exit status; *n 0 when there are none (a word
 * says why when the GGUF has a tokenizer that is not expressed). */
static int make_hf_tokenizer(const tpc_ckpt *ck, tpc_hf_file *f, size_t *n)
{
	const tpc_format *fmt = ck->format ? tpc_format_by_name(ck->format) : NULL;
	char why[256];
	tpc_err e;
	*n = 0;
	if (!fmt || !fmt->hf_tokenizer)
		return 0;
	tpc_err_init(&e);
	if (fmt->hf_tokenizer(ck, f, n, why, sizeof(why), &e))
		return tpc_cli_fail(&e);
	if (!*n)
		tpc_cli_warn("no tokenizer files written: %s", why);
	return 0;
}

/* The files make_hf_tokenizer made, beside the weights, each unless the
 * model folder's own was copied. 0 or the exit status. */
static int write_hf_tokenizer(const tpc_hf_file *f, size_t n, const char *out, const tpc_write_opts *wo)
{
	tpc_err e;
	int ret = 0;
	size_t wrote = 0;
	tpc_err_init(&e);
	for (size_t i = 0; i < n && !ret; i++) {
		char *path = tpc_path_join(out, f[i].name);
		if (!path)
			ret = tpc_err_nomem(&e);
		else if (!tpc_exists(path) && !(ret = tpc_write_file_atomic(path, f[i].data, f[i].len,
									      wo->flags & TPC_W_FORCE ? TPC_OUT_FORCE : 0, &e)))
			wrote++;
		free(path);
	}
	if (!ret && wrote)
		tpc_cli_info("wrote %zu tokenizer file%s from the GGUF metadata", wrote, wrote == 1 ? "" : "s");
	return ret ? tpc_cli_fail(&e) : 0;
}

/* The input folder's companions (config, tokenizer...) beside a folder
 * output; config.json says the dtype the weights now have, and loses its
 * quantization_config when they were dequantized. 0 or the exit status. */
int tpc_cli_copy_companions(const tpc_ckpt *ck, const char *in, const char *out, const tpc_write_opts *wo, size_t kept,
			    size_t ndq)
{
	char *srcdir = tpc_extras_source_dir(in);
	tpc_err e;
	if (!srcdir)
		return 0;
	tpc_err_init(&e);
	/* a resumed folder's companions (an interrupted run copied them) are refreshed */
	tpc_extras_opts xo = {.flags = ((wo->flags & TPC_W_FORCE) || kept) ? TPC_OUT_FORCE : 0};
	static const char *const no_quant[] = {"quantization_config", NULL};
	if (ndq)
		xo.config_drop = no_quant;
	tpc_dtype fdt = TPC_DT_INVALID;
	bool cast = false, one = true;
	for (size_t i = 0; i < ck->n; i++) {
		const tpc_tensor *t = &ck->t[i];
		/* what a cast left in f32 as transformers keeps it is not the model's dtype */
		if (!(tpc_dtype_get(t->dtype)->flags & TPC_DTF_FLOAT) || (t->flags & TPC_TF_KEPT_F32))
			continue;
		cast = cast || t->dtype != t->src_dtype || t->dq;
		one = one && (!fdt || fdt == t->dtype);
		fdt = t->dtype;
	}
	if (cast && one && fdt)
		xo.torch_dtype = tpc_dtype_get(fdt)->torch; /* config.json says what the weights are */
	size_t copied = 0;
	int xr = tpc_extras_copy(srcdir, out, &xo, &copied, &e);
	free(srcdir);
	if (xr)
		return tpc_cli_fail(&e);
	if (copied)
		tpc_cli_info("copied %zu companion file%s (config, tokenizer, ...)", copied, copied == 1 ? "" : "s");
	return 0;
}

/* What convert is asked, beside the remap stage's options. */
typedef struct conv {
	const char *in, *out, *fmt_name, *shard_arg;
	const char *base;          /* --base: an adapter to or from GGUF */
	tpc_cli_set set;           /* --preset/--plan/--tp/--pp of a set, --select */
	tpc_write_opts wo;
	unsigned flags;            /* TPC_CLI_IN_* */
	bool force_progress, no_extras, dequant, gguf_names, optimizer;
	const char *lora[TPC_CLI_LORA_MAX]; /* --lora DIR[:W], in order */
	int nlora;
	const tpc_format *outf;
	bool sharded;
} conv;

/* The options into c and rm: -1 to go on, or the exit status. */
static int parse_args(conv *c, int argc, char **argv, tpc_cli_remap *rm)
{
	static const struct option lo[] = {
		{"output", required_argument, NULL, 'o'}, {"format", required_argument, NULL, 'F'},
		{"max-shard-size", required_argument, NULL, 'M'}, {"select", required_argument, NULL, TPC_OPT_SELECT},
		{"strict", no_argument, NULL, 'S'}, {"dequantize", no_argument, NULL, 'D'},
		{"dedup-tied", no_argument, NULL, 'T'}, {"no-extras", no_argument, NULL, 'X'},
		{"force", no_argument, NULL, 'f'}, {"progress", no_argument, NULL, 'P'}, {"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'}, {"help", no_argument, NULL, 'h'},
		{"dry-run", no_argument, NULL, O_DRY_RUN}, {"outtype", required_argument, NULL, O_OUTTYPE},
		{"gguf-names", no_argument, NULL, O_GGUF_NAMES},
		{"gguf-pre", required_argument, NULL, O_GGUF_PRE}, {"no-mtp", no_argument, NULL, O_NO_MTP},
		{"lora", required_argument, NULL, O_LORA},
		{"base", required_argument, NULL, O_BASE},
		{"optimizer", no_argument, NULL, O_OPTIMIZER}, {"dcp-ranks", required_argument, NULL, O_DCP_RANKS},
		{"zero-stage", required_argument, NULL, O_ZERO_STAGE}, {"tp1-only", no_argument, NULL, O_TP1_ONLY},
		TPC_CLI_REMAP_LONGOPTS, TPC_CLI_REMAP_FACT_LONGOPTS, TPC_CLI_SET_PLAN_LONGOPTS,
		{NULL, 0, NULL, 0}};
	int ch, ret;
	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "o:fqvh", lo, NULL)) != -1) {
		if ((ret = tpc_cli_input_opt(&c->set, rm, "convert", ch, argv[optind - 1], optarg)) >= 0) {
			if (ret)
				return ret;
			continue;
		}
		switch (ch) {
		case 'o': c->out = optarg; break;
		case 'F': c->fmt_name = optarg; break;
		case 'M': c->shard_arg = optarg; break;
		case 'S': c->flags |= TPC_CLI_IN_STRICT; rm->strict = true; break;
		case O_DRY_RUN: rm->dry_run = true; break;
		case O_OUTTYPE: c->wo.outtype = optarg; break;
		case O_GGUF_NAMES: c->gguf_names = true; break;
		case O_GGUF_PRE: c->wo.gguf_pre = optarg; break;
		case O_NO_MTP: c->wo.gguf_no_mtp = true; break;
		case O_BASE: c->base = optarg; break;
		case O_OPTIMIZER: c->optimizer = true; c->flags |= TPC_CLI_IN_OPTIMIZER; break;
		case O_DCP_RANKS: {
			char *end;
			errno = 0;
			unsigned long long v = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || v < 1 || v > 65536)
				return tpc_cli_usage("convert", "--dcp-ranks takes a number of processes from 1 to 65536, not '%s'", optarg);
			c->wo.dcp_ranks = (int)v;
			break;
		}
		case O_ZERO_STAGE:
			if (strlen(optarg) != 1 || optarg[0] < '1' || optarg[0] > '3')
				return tpc_cli_usage("convert", "--zero-stage takes 1, 2 or 3, not '%s'", optarg);
			c->wo.zero_stage = optarg[0] - '0';
			break;
		case O_TP1_ONLY: c->wo.tp1_only = true; break;
		case O_LORA:
			if (c->nlora == TPC_CLI_LORA_MAX)
				return tpc_cli_usage("convert", "more than %d --lora adapters", TPC_CLI_LORA_MAX);
			c->lora[c->nlora++] = optarg;
			break;
		case 'D': c->flags |= TPC_CLI_IN_DEQUANTIZE; c->dequant = true; break;
		case 'T': c->wo.flags |= TPC_W_DEDUP_TIED; break;
		case 'f': c->wo.flags |= TPC_W_FORCE; break;
		case 'X': c->no_extras = true; break;
		case 'P': c->force_progress = true; break;
		case 'q': tpc_cli_verbose = -1; break;
		case 'v': tpc_cli_verbose++; break;
		case 'h': print_help(); return 0;
		default:
			return tpc_cli_bad_option("convert", argv[optind - 1], lo);
		}
	}
	if (optind != argc - 1)
		return tpc_cli_usage("convert", optind >= argc ? "missing IN" : "expected one IN, got '%s' too",
				     optind < argc - 1 ? argv[optind + 1] : "");
	c->in = rm->in = argv[optind];
	if (!c->out && !rm->dry_run)
		return tpc_cli_usage("convert", "missing -o OUT");
	if (rm->when)
		return tpc_cli_usage("convert", "--when '%s' is not followed by a rule", rm->when);
	if (c->set.preset && c->set.plan_file)
		return tpc_cli_usage("convert", "give --preset or --plan, not both");
	return -1;
}

/* The writer, and what it forbids. -1 to go on, or the exit status. */
static int check_output(conv *c, const tpc_cli_remap *rm)
{
	tpc_err e;
	tpc_err_init(&e);
	if (c->shard_arg && tpc_parse_size(c->shard_arg, &c->wo.max_shard_size, &e))
		return tpc_cli_usage("convert", "--max-shard-size: %s", e.msg);
	if (c->shard_arg && c->wo.max_shard_size == 0)
		return tpc_cli_usage("convert", "--max-shard-size must be greater than 0");
	int us = tpc_cli_writer("convert", c->out, c->fmt_name, c->shard_arg != NULL, &c->wo, &c->outf, &c->sharded);
	if (us)
		return us;
	if (c->wo.dcp_ranks && (!c->outf || strcmp(c->outf->name, "dcp")))
		return tpc_cli_usage("convert", "--dcp-ranks goes with a DCP output (--format dcp)");
	bool uni = c->outf && !strcmp(c->outf->name, "ds-universal");
	if (c->wo.zero_stage && !uni)
		return tpc_cli_usage("convert", "--zero-stage goes with a DeepSpeed universal output (--format ds-universal)");
	if (c->wo.tp1_only && !uni)
		return tpc_cli_usage("convert", "--tp1-only goes with a DeepSpeed universal output (--format ds-universal)");
	if (uni) { /* the optimizer's state is what it holds; no model companions */
		c->optimizer = c->no_extras = true;
		c->flags |= TPC_CLI_IN_OPTIMIZER;
		/* --preset names the model's family, whose record gives each
		 * parameter's tensor-parallel split (cat_dim) */
		if (c->set.preset && !(c->wo.family = tpc_family_find(c->set.preset)))
			return tpc_cli_usage("convert", "--preset: unknown family '%s' (tpconv plan --list)", c->set.preset);
		c->set.preset = NULL;
	}
	if (c->optimizer && (rm->rules || c->dequant || c->nlora || c->set.select))
		return tpc_cli_usage("convert", "--optimizer writes the optimizer state as it was saved: no rename rules, --dequantize, --lora or --select");
	if (c->optimizer && !rm->dry_run && !uni && (!c->outf || (strcmp(c->outf->name, "torch") && strcmp(c->outf->name, "dcp")) ||
						     (c->sharded && strcmp(c->outf->name, "dcp"))))
		return tpc_cli_usage("convert", "--optimizer writes torch.optim's state_dict (a torch file: OUT ending in .pt, or --format torch), a DCP folder with the model (--format dcp) or a DeepSpeed universal checkpoint (--format ds-universal)");
	if ((c->wo.outtype || c->wo.gguf_pre || c->wo.gguf_no_mtp) && !rm->dry_run && strcmp(c->outf->name, "gguf"))
		return tpc_cli_usage("convert", "%s goes with a GGUF output",
				     c->wo.outtype ? "--outtype" : c->wo.gguf_pre ? "--gguf-pre" : "--no-mtp");
	/* An output inside the folder of an input shard set (a folder, or the
	 * folder of a *.index.json) is refused like an output equal to an input:
	 * the set is being read. */
	if (c->out) {
		char *set_dir = tpc_is_dir(c->in) ? tpc_strdup(c->in) : tpc_ends_with(c->in, ".index.json") ? tpc_path_dir(c->in) : NULL;
		bool inside = set_dir && tpc_shard_path_inside(c->out, set_dir);
		free(set_dir);
		/* a new universal folder beside the save it is made of, as
		 * ds_to_universal.py makes it (ckpt/global_stepN_universal): nothing
		 * in it is read */
		if (inside && !(uni && !tpc_exists(c->out))) {
			/* a plain model folder is read whole too, but it is no shard set */
			bool set = tpc_set_detect(c->in, NULL) != TPC_SET_NONE;
			tpc_err_at(&e, TPC_EUSAGE, c->out, NULL, "the output is inside the input %s folder '%s', which is being read; choose another place",
				   set ? "shard set's" : "model's", c->in);
			return tpc_cli_fail(&e);
		}
	}
	/* GGUF read as the Hugging Face model it was, unless written as GGUF again */
	if (!c->gguf_names && (!c->outf || strcmp(c->outf->name, "gguf")))
		c->flags |= TPC_CLI_IN_HF_NAMES;
	/* a set is merged as merge does: its checksums checked while writing */
	c->flags |= TPC_CLI_IN_CHECKSUMS | (rm->dry_run ? 0 : TPC_CLI_IN_DEFER);
	return -1;
}

/* IN through the one opener (a shard set merged on the fly), dequantized,
 * renamed by the remap stage. 0 or the exit status (said). */
static int open_input(conv *c, tpc_cli_remap *rm, tpc_cli_input *in, size_t *ndq)
{
	tpc_err e;
	int ret;
	tpc_err_init(&e);
	c->set.facts = rm->facts; /* a set without a manifest: its K/V replicas, padding */
	c->set.config = rm->config;
	if ((ret = tpc_cli_input_open(in, "convert", c->in, &c->set, c->flags, &e)))
		return ret < 0 ? tpc_cli_fail(&e) : ret;
	if (in->have_mg) {
		if (rm->rules || rm->expect_keys)
			return tpc_cli_usage("convert",
					     "rename/remap rules apply to a checkpoint, not to a shard set: merge '%s' first, then convert the result",
					     c->in);
		tpc_cli_info("'%s' is a shard set of tp %d, pp %d, merged on the fly", c->in, in->mg.tp, in->mg.pp);
	} else if (c->set.preset || c->set.plan_file || c->set.tp || c->set.pp) {
		return tpc_cli_usage("convert", "--preset, --plan, --tp and --pp tell how a shard set without a tpconv manifest was split; '%s' is not a shard set",
				     c->in);
	}
	/* a multimodal checkpoint into GGUF: its text model, as the reference reads it */
	if (in->have_ck && c->outf && !strcmp(c->outf->name, "gguf") && (ret = tpc_cli_text_model(c->in, &c->set, &in->ck)))
		return ret;
	/* FP8 / GPTQ / AWQ weights become descriptions computed while writing */
	if (c->dequant && (ret = tpc_cli_dequantize(c->in, in->view, ndq)))
		return ret;
	/* LoRA adapters: computed descriptions over the (dequantized) weights */
	for (int k = 0; k < c->nlora; k++)
		if ((ret = tpc_cli_lora(c->lora[k], in->view, c->flags & TPC_CLI_IN_STRICT, c->in, &c->set)))
			return ret;
	/* one rank file of a Megatron set is converted as it is, with a word */
	tpc_megatron_args mga;
	char rank_what[128], rank_how[TPC_ERR_PATH_MAX + 128];
	bool rank = in->have_ck && in->ck.n &&
		    tpc_cli_megatron_rank(c->in, tpc_extras_megatron_args(in->ck.root, &mga) ? &mga : NULL, rank_what,
					  sizeof(rank_what), rank_how, sizeof(rank_how));
	/* The remap stage: rename, drop, transpose, cast (descriptions only). */
	if ((ret = tpc_cli_remap_run(rm, "convert", in->view)))
		return ret;
	if (rank && c->optimizer)
		tpc_cli_warn("'%s': %s: its optimizer state, that rank's slices, is written as it is; the whole set's: 'tpconv convert SAVE_DIR --optimizer' with the set's --preset",
			     c->in, rank_what);
	else if (rank)
		tpc_cli_warn("'%s': %s: its tensors, that rank's slices, are written as they are; the whole model: %s",
			     c->in, rank_what, rank_how);
	return 0;
}

static int write_ckpt(void *ctx, const tpc_format *f, const char *out, const tpc_write_opts *wo, tpc_err *e)
{
	return f->write(ctx, NULL, 0, out, wo, e);
}

/* The optimizer state of ck, tied to its parameters (refused by name when
 * it cannot be), or none; with `write`, written as torch.optim's state_dict
 * to c->out. 0 or the exit status (said). */
static int optimizer(conv *c, const tpc_ckpt *ck, bool write, bool renamed)
{
	tpc_optim o;
	tpc_ckpt oc;
	tpc_err e;
	int ret = 0;
	tpc_err_init(&e);
	tpc_ckpt_init(&oc);
	if (tpc_optim_map(&o, ck, &e)) {
		tpc_err_path(&e, c->in);
		if (renamed)
			tpc_cli_warn("rename rules ran first: the optimizer state keeps the names it was saved with; the model alone: --select model");
		return tpc_cli_fail(&e);
	}
	if (!o.okey) {
		if (write) {
			tpc_err_at(&e, TPC_EINPUT, c->in, NULL, "holds no optimizer state (a top-level key with 'state' and 'param_groups', as get_state_dict saves it)");
			ret = tpc_cli_fail(&e);
		}
		goto out;
	}
	tpc_cli_info("optimizer state '%s': %zu parameters in %zu param groups, %zu moments tied to their parameters",
		     o.okey, o.np, o.ng, o.nmoments);
	if (!write)
		goto out;
	if (tpc_optim_torch(&o, ck, &oc, &e)) {
		ret = tpc_cli_fail(&e);
		goto out;
	}
	size_t kept = 0;
	bool go_on;
	ret = tpc_cli_write_out("convert", write_ckpt, &oc, &oc, c->outf, false, c->out, &c->wo, c->force_progress, &kept,
				&go_on);
	if (!ret && go_on)
		tpc_cli_info("wrote the optimizer state of %zu parameters (%zu tensors) to '%s'", o.np, oc.n, c->out);
out:
	tpc_ckpt_release(&oc);
	tpc_optim_release(&o);
	return ret;
}

static int convert(int argc, char **argv, tpc_cli_remap *rm)
{
	conv c;
	size_t ndq = 0, ntok = 0;
	tpc_hf_file tok[TPC_HF_FILES_MAX];
	tpc_cli_input in;
	int ret;

	memset(&c, 0, sizeof(c));
	tpc_cli_set_init(&c.set, 0);
	tpc_cli_input_init(&in);
	if ((ret = parse_args(&c, argc, argv, rm)) >= 0)
		return ret;
	if (c.base) {
		if (rm->dry_run || rm->rules || c.nlora || c.shard_arg || c.dequant || c.set.preset || c.set.plan_file ||
		    c.optimizer || c.wo.dcp_ranks)
			return tpc_cli_usage("convert", "--base converts one LoRA adapter as it is: no --dry-run, --lora, "
							"--max-shard-size, --dequantize, --optimizer, --dcp-ranks, shard set or rename rules with it");
		return tpc_cli_lora_gguf(c.in, c.out, c.base, &c.wo, c.flags & TPC_CLI_IN_STRICT);
	}
	if ((ret = check_output(&c, rm)) >= 0)
		return ret;
	if ((ret = open_input(&c, rm, &in, &ndq)))
		goto out;
	/* optimizer state goes out tied to its parameters, or not at all */
	/* the whole tree goes to these writers, the optimizer state in it */
	bool dcp_out = c.outf && (!strcmp(c.outf->name, "dcp") || !strcmp(c.outf->name, "ds-universal"));
	if (c.optimizer && !in.have_ck) {
		/* a shard set's manifest covers the model only (a megatron-dist
		 * set is read as the torch_dist save it is: cli_input.c) */
		ret = tpc_cli_usage("convert", "--optimizer: '%s' is a shard set whose layout stores no optimizer state; give the training save it came from",
				    c.in);
		goto out;
	}
	if (in.have_ck && (c.optimizer || dcp_out) &&
	    ((ret = optimizer(&c, in.view, c.optimizer && !dcp_out && !rm->dry_run, rm->rules != NULL)) ||
	     (c.optimizer && !dcp_out)))
		goto out;
	if (rm->dry_run)
		goto out;
	if (!c.no_extras && !c.gguf_names && c.sharded && (ret = make_hf_tokenizer(in.view, tok, &ntok)))
		goto out;
	/* GGUF reads the model's config and tokenizer: its folder, a set's companions */
	char *model_dir = NULL;
	if ((ret = tpc_cli_input_model_dir(&in, "convert", c.outf, &c.wo, &model_dir)))
		goto out;
	const tpc_ckpt *ck = in.view;
	uint64_t total = 0;
	for (size_t i = 0; i < ck->n; i++)
		total += ck->t[i].nbytes;
	double t0 = tpc_now();
	size_t kept = 0;
	bool go_on;
	ret = tpc_cli_write_out("convert", tpc_cli_input_write, &in, ck, c.outf, c.sharded, c.out, &c.wo,
				c.force_progress, &kept, &go_on);
	free(model_dir);
	if (ret || !go_on)
		goto out;
	/* a model folder's (a set's) companions (config, tokenizer...) go beside a folder output */
	bool extras = !c.no_extras && tpc_is_dir(c.out);
	if (extras && (ret = in.have_mg ? tpc_cli_set_copy_companions(&in.mg, c.in, c.out, &c.wo, kept, ndq)
					 : tpc_cli_copy_companions(ck, c.in, c.out, &c.wo, kept, ndq)))
		goto out;
	if (extras && !c.gguf_names && (ret = write_hf_config(ck, c.out, &c.wo)))
		goto out;
	if (ntok && tpc_is_dir(c.out) && (ret = write_hf_tokenizer(tok, ntok, c.out, &c.wo)))
		goto out;
	if (tpc_cli_verbose > 0) {
		char sz[32];
		tpc_cli_info("wrote %zu tensors (%s) to '%s' in %.2f s", ck->n, tpc_fmt_size(total, sz, sizeof(sz)), c.out,
			     tpc_now() - t0);
	}
out:
	tpc_hf_files_release(tok, ntok);
	tpc_cli_input_release(&in);
	return ret;
}

int cmd_convert(int argc, char **argv)
{
	return tpc_cli_with_remap(argc, argv, convert);
}
