/* cmd_merge.c - `tpconv merge DIR -o OUT`: a shard set back into one
 * checkpoint; `tpconv merge --recipe FILE -o OUT`: models merged by a
 * mergekit recipe (cli_mix.c). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_buf.h"
#include "tpc_extras.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_lora_nemo.h"
#include "tpc_plan.h"
#include "tpc_shard.h"
#include "tpc_util.h"

static const char *help =
	"usage: tpconv merge [options] DIR -o OUT\n"
	"       tpconv merge --recipe FILE [--seed N] -o OUT\n\n"
	"Rebuild the unsplit checkpoint from the shard set in DIR. With a tpconv manifest\n"
	"the set describes itself; a set written by another tool (OSLO's\n"
	"pytorch_model_tp_T_pp_P.bin, TensorRT-LLM's rankN.safetensors) needs the plan it\n"
	"was split with (--preset/--plan), --tp unless the names or config.json tell it,\n"
	"and the model facts when K/V heads were replicated or the vocab padded (a\n"
	"Megatron set's args give its head counts; its true vocabulary, when they do not\n"
	"record it, comes from config.json or --vocab, else merge refuses, exit 2).\n"
	"Replicated tensors are compared across ranks (a difference is an error naming\n"
	"the tensor and ranks, or --take-rank0 keeps rank 0's copy), replicated K/V heads\n"
	"are de-duplicated after checking they are equal, padding is stripped. With a\n"
	"manifest, every rank tensor is checked against its checksum (a rank file\n"
	"from another set is refused). OUT is written like 'tpconv convert' writes it:\n"
	"format from --format or the name; a folder for HF shards when OUT is a folder,\n"
	"ends in '/', has no file suffix (-o merged, as save_pretrained(\"merged\")) or\n"
	"--max-shard-size is given. Tied weights the manifest records (lm_head.weight\n"
	"tied to model.embed_tokens.weight) are checked equal and come back tied: one\n"
	"storage in torch output; in safetensors the later name is not stored (nor in\n"
	"an index's weight_map), as save_pretrained writes a tied model, and is\n"
	"recorded in the tpconv.aliases metadata.\n"
	"Under 'mpirun -np N' the shards of a folder output are divided among the N\n"
	"processes (shard s to process s mod N); process 0 writes the index last, once\n"
	"every process has succeeded (a failure leaves no index); one file: process 0.\n\n"
	"A NeMo / Megatron LoRA saved per tensor-parallel rank (DIR holding\n"
	"model_config.yaml with peft.lora_tuning and mp_rank_TT/model_weights.ckpt:\n"
	"a .nemo archive extracted) merges into a PEFT adapter folder OUT\n"
	"(adapter_model.safetensors, adapter_config.json): the fused kqv and fc1\n"
	"adapters unfused into q/k/v_proj and gate/up_proj as NeMo's converter does.\n"
	"A set of adapter folders that 'shard ADAPTER --base BASE' wrote merges into\n"
	"the adapter folder again, byte for byte. See doc/shard.md, LoRA adapters.\n\n"
	"With --recipe, no DIR: the models a mergekit YAML recipe names (any checkpoint\n"
	"tpconv reads; one architecture) are merged tensor by tensor in one pass:\n"
	"merge_method linear, task_arithmetic, ties, dare_ties, dare_linear,\n"
	"breadcrumbs(_ties), della(_linear), model_stock or slerp, with the models'\n"
	"weight/density/gamma/epsilon, base_model, parameters (per-tensor filters,\n"
	"gradients across layers), dtype; or passthrough with slices (layers stacked,\n"
	"renamed by the family record). Math in f32, rounded once to the output\n"
	"dtype. A tensor missing from a model or of another shape is refused by name\n"
	"(exit 3). The output keeps the base's (else the first model's) metadata and\n"
	"companions. See doc/convert.md, Merging models.\n\n"
	"Options:\n"
	"  -o, --output OUT         output file or folder (required unless --dry-run)\n"
	"  --recipe FILE            merge models by this mergekit YAML recipe (no DIR)\n"
	"  --seed N                 with --recipe: DARE's and DELLA's random seed (default 0)\n"
	"  --format NAME            %s (Output formats, below)\n"
	"  --max-shard-size SIZE    HF-sharded output with files of at most SIZE\n"
	"  --outtype TYPE, --gguf-pre NAME   a GGUF output's types and BPE pre-tokenizer,\n"
	"                           as 'tpconv convert' takes them\n"
	"  --dedup-tied             safetensors: store tied tensors once (as convert)\n"
	"  --preset NAME, --plan FILE   the plan of a set without a manifest (neither: the\n"
	"                           preset of the architecture its config.json names)\n"
	"  --preset-force           use --preset though config.json names an architecture\n"
	"                           its family does not list (else exit 2)\n"
	"  --tp N, --pp M           the set's degrees, for sets without a manifest\n"
	"  --config FILE            model facts from a Hugging Face config.json\n"
	"  --heads N, --kv-heads N, --head-dim N, --hidden N, --vocab N   model facts\n"
	"  --take-rank0             replicated tensors that differ: keep rank 0's (warns)\n"
	"  --no-checksums           do not verify the manifest checksums\n"
	"  --dequantize             a quantized set (FP8, GPTQ, AWQ: the set's config.json\n"
	"                           quantization_config) merges into dense weights, as\n"
	"                           'convert --dequantize' writes them\n"
"  --dry-run                print what would be merged; write nothing\n"
	"  --optimizer              not here: 'tpconv convert DIR --optimizer -o optimizer.pt'\n"
	"                           joins a set's optimizer state (a Megatron legacy save's)\n"
	"  --no-extras              do not copy the set's config, tokenizer and other companion\n"
	"                           files into a folder output\n"
	"  -f, --force              overwrite existing outputs\n"
	"  --progress               show progress even when stderr is not a terminal\n"
	"  -q, --quiet              errors only\n"
	"  -v, --verbose            say more\n"
	"  -h, --help               this help\n\n"
	"%s\n" TPC_EXIT_HELP;

static void print_help(void)
{
	char *formats = tpc_cli_out_formats_help(true); /* ds-universal is refused as usage */
	printf(help, tpc_cli_model_formats(), formats ? formats : "");
	free(formats);
}

enum {
	O_FORMAT = 256, O_MAXSZ,
	O_TAKE0, O_NOSUM, O_DRY, O_PROGRESS, O_NOX, O_DEQ, O_OUTTYPE, O_GGUF_PRE, O_DEDUP, O_RECIPE, O_SEED, O_OPTIM,
};

/* --dry-run: the merged model's tensors, nothing written */
static void print_dry_run(const tpc_merge *mg, const char *dir, uint64_t total)
{
	char sz[32];
	printf("# merge %s: %s set, tp %d, pp %d, %zu tensors, %s\n", dir,
	       mg->kind == TPC_SET_MANIFEST ? "tpconv" : mg->layout ? mg->layout->name : mg->out.format, mg->tp, mg->pp,
	       mg->out.n, tpc_fmt_size(total, sz, sizeof(sz)));
	for (size_t i = 0; i < mg->out.n; i++) {
		char nm[512], shp[256];
		tpc_sanitize(nm, sizeof(nm), mg->out.t[i].name);
		printf("%s  %s %s", nm, tpc_dtype_name(mg->out.t[i].dtype), tpc_shape_str(&mg->out.t[i], shp, sizeof(shp)));
		int64_t a = mg->out.t[i].alias_of;
		if (a >= 0 && (size_t)a < mg->out.n) {
			tpc_sanitize(nm, sizeof(nm), mg->out.t[a].name);
			printf("  tied to %s", nm);
		}
		printf("\n");
	}
}

/* merge --recipe: model merging (cli_mix.c); the shard set's options do not apply */
static int merge_recipe(const char *recipe, const char *seed_arg, int npos, const char *out, const char *fmt_name,
			const char *maxsz, tpc_write_opts *wo, bool dry, bool force_progress, bool no_extras, bool set_opts)
{
	tpc_cli_mix_args a = {.recipe = recipe, .out = out, .dry = dry, .force_progress = force_progress,
			      .no_extras = no_extras, .wo = wo};
	tpc_err e;
	tpc_err_init(&e);
	if (!recipe)
		return tpc_cli_usage("merge", "--seed goes with --recipe");
	if (npos)
		return tpc_cli_usage("merge", "--recipe names the models: no DIR (a shard set is merged without --recipe)");
	if (set_opts)
		return tpc_cli_usage("merge", "--preset/--plan/--tp/--pp, --take-rank0, --no-checksums and --dequantize are a shard set's options, not --recipe's");
	if (!out && !dry)
		return tpc_cli_usage("merge", "missing -o OUT");
	if (seed_arg && tpc_parse_u64(seed_arg, UINT64_MAX, &a.seed, &e))
		return tpc_cli_usage("merge", "--seed: %s", e.msg);
	if (maxsz && (tpc_parse_size(maxsz, &wo->max_shard_size, &e) || !wo->max_shard_size))
		return tpc_cli_usage("merge", "--max-shard-size: %s", e.msg[0] ? e.msg : "must be greater than 0");
	int ret = tpc_cli_writer("merge", out, fmt_name, maxsz != NULL, wo, &a.outf, &a.sharded);
	if (ret)
		return ret;
	if ((wo->outtype || wo->gguf_pre) && !dry && strcmp(a.outf->name, "gguf"))
		return tpc_cli_usage("merge", "%s goes with a GGUF output", wo->outtype ? "--outtype" : "--gguf-pre");
	return tpc_cli_mix(&a);
}

/* Write the merged set in (its folder dir) to out, then its companions. */
static int merge_write(tpc_cli_input *in, const char *dir, const char *out, const tpc_format *outf, bool sharded,
		       bool has_maxsz, tpc_write_opts *wo, bool force_progress, bool no_extras, size_t ndq, uint64_t total)
{
	tpc_merge *mg = &in->mg;
	tpc_err e;
	int ret = 0;
	tpc_err_init(&e);
	if (tpc_shard_path_inside(out, dir)) {
		tpc_err_at(&e, TPC_EUSAGE, out, NULL, "the output is inside the shard set being merged; choose another place");
		return tpc_cli_fail(&e);
	}
	double t0 = tpc_now();
	size_t kept = 0;
	bool go_on;
	/* a GGUF's metadata comes from the model's config and tokenizer, which
	 * the set keeps as its companions */
	char *model_dir = NULL;
	if ((ret = tpc_cli_input_model_dir(in, "merge", outf, wo, &model_dir)))
		return ret;
	/* a layout whose merged folder is one file (a PEFT adapter's
	 * adapter_model.safetensors), not an HF checkpoint */
	char *one = NULL;
	if (sharded && mg->layout && mg->layout->merged_file && !has_maxsz) {
		if (tpc_mkdirs(out, &e) || !(one = tpc_path_join(out, mg->layout->merged_file))) {
			free(model_dir);
			return tpc_cli_fail(&e);
		}
		outf = tpc_format_by_name("safetensors");
	}
	ret = tpc_cli_write_out("merge", tpc_cli_input_write, in, &mg->out, outf, sharded && !one, one ? one : out, wo,
				force_progress, &kept, &go_on);
	free(one);
	free(model_dir);
	if (ret || !go_on)
		return ret;
	/* the model's companion files (config, tokenizer) go with an HF folder; a
	 * TensorRT-LLM set's config.json describes the engine mapping, not the model */
	if (sharded && !no_extras && (ret = tpc_cli_set_copy_companions(mg, dir, out, wo, kept, ndq)))
		return ret;
	if (tpc_cli_verbose > 0) {
		char sz[32];
		tpc_cli_info("merged %d rank files into %zu tensors (%s) in '%s' in %.2f s", mg->nranks, mg->out.n,
			     tpc_fmt_size(total, sz, sizeof(sz)), out, tpc_now() - t0);
	}
	return ret;
}

int cmd_merge(int argc, char **argv)
{
	static const struct option lo[] = {
		{"output", required_argument, NULL, 'o'}, TPC_CLI_SET_LONGOPTS,
		{"format", required_argument, NULL, O_FORMAT},
		{"max-shard-size", required_argument, NULL, O_MAXSZ}, {"take-rank0", no_argument, NULL, O_TAKE0},
		{"no-checksums", no_argument, NULL, O_NOSUM}, {"dry-run", no_argument, NULL, O_DRY},
		{"no-extras", no_argument, NULL, O_NOX}, {"force", no_argument, NULL, 'f'},
		{"dequantize", no_argument, NULL, O_DEQ},
		{"outtype", required_argument, NULL, O_OUTTYPE}, {"gguf-pre", required_argument, NULL, O_GGUF_PRE},
		{"dedup-tied", no_argument, NULL, O_DEDUP},
		{"recipe", required_argument, NULL, O_RECIPE}, {"seed", required_argument, NULL, O_SEED},
		{"optimizer", no_argument, NULL, O_OPTIM},
		{"progress", no_argument, NULL, O_PROGRESS},
		{"quiet", no_argument, NULL, 'q'}, {"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	const char *out = NULL, *fmt_name = NULL, *maxsz = NULL, *recipe = NULL, *seed_arg = NULL;
	bool set_opts = false;
	tpc_cli_set set;
	tpc_write_opts wo;
	bool dry = false, force_progress = false, no_extras = false, dequant = false, checksums = true;
	unsigned take0 = 0;
	size_t ndq = 0;
	tpc_cli_input in;
	tpc_err e;
	int c, ret = 0;

	tpc_cli_set_init(&set, 0);
	memset(&wo, 0, sizeof(wo));
	tpc_cli_input_init(&in);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:fqvh", lo, NULL)) != -1) {
		if (c >= TPC_OPT_TP && c < TPC_OPT_SET_END) {
			if ((ret = tpc_cli_set_opt(&set, "merge", c, argv[optind - 1], optarg)))
				goto done;
			set_opts = true;
			continue;
		}
		switch (c) {
		case 'o': out = optarg; break;
		case O_FORMAT: fmt_name = optarg; break;
		case O_MAXSZ: maxsz = optarg; break;
		case O_TAKE0: take0 = TPC_CLI_IN_TAKE_RANK0; break;
		case O_NOSUM: checksums = false; break;
		case O_DRY: dry = true; break;
		case O_NOX: no_extras = true; break;
		case O_DEQ: dequant = true; break;
		case O_OUTTYPE: wo.outtype = optarg; break;
		case O_GGUF_PRE: wo.gguf_pre = optarg; break;
		case O_DEDUP: wo.flags |= TPC_W_DEDUP_TIED; break;
		case O_RECIPE: recipe = optarg; break;
		case O_SEED: seed_arg = optarg; break;
		case O_OPTIM:
			ret = tpc_cli_usage("merge", "merge writes the model; a set's optimizer state (a Megatron legacy save's distrib_optim.pt, joined as the parameters): tpconv convert DIR --optimizer -o optimizer.pt");
			goto done;
		case 'f': wo.flags |= TPC_W_FORCE; break;
		case O_PROGRESS: force_progress = true; break;
		case 'q': tpc_cli_verbose = -1; break;
		case 'v': tpc_cli_verbose++; break;
		case 'h': print_help(); goto done;
		default:
			ret = tpc_cli_bad_option("merge", argv[optind - 1], lo);
			goto done;
		}
	}
	if (recipe || seed_arg) {
		ret = merge_recipe(recipe, seed_arg, argc - optind, out, fmt_name, maxsz, &wo, dry, force_progress, no_extras,
				   set_opts || take0 || !checksums || dequant);
		goto done;
	}
	if (optind != argc - 1) {
		ret = tpc_cli_usage("merge", optind >= argc ? "missing DIR" : "expected one DIR, got '%s' too",
				    optind < argc - 1 ? argv[optind + 1] : "");
		goto done;
	}
	const char *dir = argv[optind];
	if (!out && !dry) {
		ret = tpc_cli_usage("merge", "missing -o OUT");
		goto done;
	}
	if (set.preset && set.plan_file) {
		ret = tpc_cli_usage("merge", "give --preset or --plan, not both");
		goto done;
	}
	tpc_err_init(&e);
	if (maxsz && (tpc_parse_size(maxsz, &wo.max_shard_size, &e) || !wo.max_shard_size)) {
		ret = tpc_cli_usage("merge", "--max-shard-size: %s", e.msg[0] ? e.msg : "must be greater than 0");
		goto done;
	}
	/* a NeMo / Megatron LoRA saved per rank: into a PEFT adapter folder */
	if (tpc_lora_nemo_detect(dir)) {
		if (set_opts || take0 || !checksums || dequant || fmt_name || maxsz || wo.outtype || wo.gguf_pre)
			ret = tpc_cli_usage("merge", "'%s' is a NeMo LoRA save: it describes itself (no set, format or output-type options)", dir);
		else
			ret = tpc_cli_lora_nemo_merge(dir, out, &wo, dry);
		goto done;
	}
	/* the writer, as convert chooses it */
	const tpc_format *outf;
	bool sharded;
	if ((ret = tpc_cli_writer("merge", out, fmt_name, maxsz != NULL, &wo, &outf, &sharded)))
		goto done;
	if ((wo.outtype || wo.gguf_pre) && !dry && strcmp(outf->name, "gguf")) {
		ret = tpc_cli_usage("merge", "%s goes with a GGUF output", wo.outtype ? "--outtype" : "--gguf-pre");
		goto done;
	}
	/* a real merge checks the checksums while it writes (before the commit) */
	if ((ret = tpc_cli_input_open(&in, "merge", dir, &set, TPC_CLI_IN_SET | take0 | (checksums ? TPC_CLI_IN_CHECKSUMS : 0) |
						       (dry ? 0 : TPC_CLI_IN_DEFER), &e))) {
		if (ret < 0)
			ret = tpc_cli_fail(&e);
		goto done;
	}
	tpc_merge *mg = &in.mg;
	/* a quantized set (FP8 / GPTQ / AWQ split with their layers) merged into
	 * dense weights: computed from the merged companions while writing */
	if (dequant && (ret = tpc_cli_dequantize(dir, &mg->out, &ndq)))
		goto done;
	if (mg->ndiffer)
		tpc_cli_warn("%zu replicated tensor%s differed between ranks; kept rank 0's copy (--take-rank0); first: %s",
			     mg->ndiffer, mg->ndiffer == 1 ? "" : "s", mg->differ_first);
	uint64_t total = 0;
	for (size_t i = 0; i < mg->out.n; i++)
		total += mg->out.t[i].nbytes;
	if (dry) {
		print_dry_run(mg, dir, total);
		goto done;
	}
	ret = merge_write(&in, dir, out, outf, sharded, maxsz != NULL, &wo, force_progress, no_extras, ndq, total);
done:
	tpc_cli_input_release(&in);
	return ret;
}
