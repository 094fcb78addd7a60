/* cmd_shard.c - `tpconv shard IN --tp N (--preset NAME | --plan FILE) -o DIR`,
 * and the plan / model-fact options shard and merge share. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tpc_buf.h"
#include "tpc_extras.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_manifest.h"
#include "tpc_family.h"
#include "tpc_plan.h"
#include "tpc_shard.h"
#include "tpc_util.h"

static const char *help =
	"usage: tpconv shard [options] IN --tp N (--preset NAME | --plan FILE) -o DIR\n\n"
	"Split a checkpoint for N-way tensor parallelism (and M pipeline stages): one\n"
	"file per rank, then DIR/tpconv-manifest.json, written last, recording every\n"
	"tensor's split, padding, KV replicas, original shape and dtype, and checksums\n"
	"(XXH3-128; --checksum sha256). IN is a file, an HF folder or *.index.json, or\n"
	"a shard set (a folder with a tpconv manifest, OSLO or TensorRT-LLM rank files):\n"
	"a set is resharded (TP 4 -> 2) without an intermediate file; with a manifest\n"
	"its plan is reused unless --preset/--plan is given.\n\n"
	"Plans: 'tpconv plan --list' shows the presets, 'tpconv plan NAME' prints one as\n"
	"JSON (the --plan format). Splits fall on attention-head boundaries; K/V heads are\n"
	"replicated when tp exceeds their number (tp %% kv_heads == 0); vocab-parallel\n"
	"tensors are zero-padded to a multiple of tp. Head splits need the model facts:\n"
	"from --config, else IN/config.json when IN is a folder, else the flags below.\n\n"
	"Options:\n"
	"  -o, --output DIR         output folder (required unless --dry-run)\n"
	"  --tp N                   tensor-parallel ranks (required)\n"
	"  --pp M                   pipeline stages (default 1): layers spread evenly,\n"
	"                           embeddings on the first stage, final norm and head on the last\n"
	"  --preset NAME            a built-in plan, one per model family (tpconv plan --list):\n"
	"%s"
	"  --plan FILE              a plan in JSON\n"
	"  --config FILE            model facts from a Hugging Face config.json\n"
	"  --heads N, --kv-heads N, --head-dim N, --hidden N, --vocab N\n"
	"                           model facts (override --config and the plan)\n"
	"  --vocab-multiple N       pad vocab rows to a multiple of N * tp (Megatron's\n"
	"                           make_vocab_size_divisible_by; default: the plan's, 1)\n"
	"  --ep N                   expert parallelism: the tp ranks form N groups of tp/N\n"
	"                           (N divides tp; TensorRT-LLM's moe_ep_size N, moe_tp_size\n"
	"                           tp/N); attention and dense layers split over all tp ranks,\n"
	"                           each routed expert (the plan's \"experts\" patterns) on one\n"
	"                           group only, split tp/N ways inside it, under its global name\n"
	"  --ep-placement P         contiguous (default: group g owns experts g*E/N ..; Megatron,\n"
	"                           vLLM) or round-robin (expert e on group e %% N)\n"
	"  --dequantize             FP8 (block, per-tensor, per-channel), GPTQ, AWQ and pack-quantized weights\n"
	"                           (config.json quantization_config) become dense: each rank\n"
	"                           gets its slice computed from the packed tensors while it is\n"
	"                           written (config.json's torch_dtype, else bf16); the set's config.json\n"
	"                           loses quantization_config. No block or group limits the tp\n"
	"  --pad                    zero-pad splits that do not divide evenly (recorded in the\n"
	"                           manifest, stripped on merge) instead of refusing them; an\n"
	"                           FP8 block layer whose slices would cut a block is padded\n"
	"                           to a multiple of block x tp (weight_scale_inv to match)\n"
	"  --strict                 refuse tensors that no rule of the plan matches\n"
	"                           (otherwise they are listed and replicated)\n"
	"  --layout NAME            how rank files are named and what goes beside them:\n"
	"%s"
	"  --format NAME            rank file format: safetensors (default) or torch (dcp: the dcp layout)\n"
	"  --max-shard-size SIZE    hf and vllm layouts: split each rank into files of at most SIZE\n"
	"  (an output folder an interrupted run left, with rank files but no manifest,\n"
	"   is resumed: rank files byte-equal to the plan are kept, the rest written)\n"
	"  --rank R                 write only rank R (repeatable; 'A-B' and 'A,B' too), for\n"
	"                           several machines writing one set; the run that completes\n"
	"                           the set writes the manifest\n"
	"                           ('mpirun -np N tpconv shard ...' divides the rank files\n"
	"                           among N processes: file r to process r mod N, the hosts\n"
	"                           sharing the output folder; process 0 checks every file\n"
	"                           and writes the manifest once all have succeeded; a\n"
	"                           process that fails or dies fails the job: no manifest,\n"
	"                           the files written are removed)\n"
	"  --checksum ALG           the manifest's checksum of every original and rank tensor:\n"
	"                           xxh3-128 (default; fast, catches corruption and mixed-up\n"
	"                           files), sha256 (also resists deliberate tampering), or none\n"
	"                           (merge then checks shapes and set ids only); a reshard\n"
	"                           checks the input set's checksums unless ALG is none\n"
	"  --no-checksums           the same as --checksum none\n"
	"  --dry-run                print the plan (per tensor the split and rank shape, per rank\n"
	"                           the bytes, unmatched tensors); write nothing\n"
	"  --json                   with --dry-run: the manifest that would be written\n"
	"  --no-extras              do not copy the model's config, tokenizer and other companion\n"
	"                           files (a trtllm set still gets its config.json with mapping)\n"
	"  -f, --force              replace existing rank files and manifest\n"
	"  --progress               show progress even when stderr is not a terminal\n"
	"  -q, --quiet              errors only\n"
	"  -v, --verbose            say more\n"
	"  -h, --help               this help\n\n"
	"%s\n"
	"Rank r = pp_rank * tp + tp_rank. Each safetensors rank file carries tpconv.rank,\n"
	"tpconv.tp_rank, tpconv.pp_rank, tpconv.tp, tpconv.pp and tpconv.set_id metadata\n"
	"(with --ep also tpconv.ep and tpconv.ep_rank, its group).\n\n" TPC_EXIT_HELP;

int tpc_cli_count(const char *cmd, const char *flag, const char *arg, uint64_t max, int64_t *out)
{
	tpc_err e;
	uint64_t v;
	tpc_err_init(&e);
	if (tpc_parse_u64(arg, max, &v, &e) || v == 0)
		return tpc_cli_usage(cmd, "%s: '%s' is not a count from 1 to %llu", flag, arg, (unsigned long long)max);
	*out = (int64_t)v;
	return 0;
}

void tpc_cli_set_init(tpc_cli_set *s, int64_t pp_default)
{
	memset(s, 0, sizeof(*s));
	s->pp = pp_default;
}

int tpc_cli_set_opt(tpc_cli_set *s, const char *cmd, int code, const char *flag, const char *arg)
{
	int64_t *fact = NULL;
	switch (code) {
	case TPC_OPT_TP: return tpc_cli_count(cmd, "--tp", arg, TPC_MAX_TP, &s->tp);
	case TPC_OPT_PP: return tpc_cli_count(cmd, "--pp", arg, TPC_MAX_TP, &s->pp);
	case TPC_OPT_PRESET: s->preset = arg; return 0;
	case TPC_OPT_PLAN: s->plan_file = arg; return 0;
	case TPC_OPT_CONFIG: s->config = arg; return 0;
	case TPC_OPT_HEADS: fact = &s->facts.heads; break;
	case TPC_OPT_KV_HEADS: fact = &s->facts.kv_heads; break;
	case TPC_OPT_HEAD_DIM: fact = &s->facts.head_dim; break;
	case TPC_OPT_HIDDEN: fact = &s->facts.hidden; break;
	case TPC_OPT_VOCAB: fact = &s->facts.vocab; break;
	default: return -1;
	}
	return tpc_cli_count(cmd, flag, arg, (uint64_t)1 << 40, fact);
}

int tpc_cli_load_plan(const char *preset, const char *file, tpc_plan *p, tpc_err *e)
{
	if (file)
		return tpc_plan_from_file(p, file, e);
	return tpc_plan_preset(p, preset, e);
}

int tpc_cli_facts(const tpc_model_facts *flags, const char *config, const char *in, const tpc_model_facts *more,
		  const tpc_plan *plan, tpc_model_facts *out, tpc_err *e)
{
	tpc_model_facts cfg;
	char *auto_cfg = NULL;
	int ret = 0;
	memset(&cfg, 0, sizeof(cfg));
	*out = *flags;
	if (!config && in) {
		char *d = tpc_extras_source_dir(in);
		if (d) {
			auto_cfg = tpc_path_join(d, "config.json");
			free(d);
			if (auto_cfg && tpc_exists(auto_cfg))
				config = auto_cfg;
		}
	}
	if (config) {
		if ((ret = tpc_facts_from_file(&cfg, config, e)))
			goto out;
		tpc_cli_info("model facts from '%s'", config);
	}
	tpc_facts_fill(out, &cfg);
	if (more)
		tpc_facts_fill(out, more);
	if (plan)
		tpc_facts_fill(out, &plan->facts);
	tpc_facts_finish(out);
out:
	free(auto_cfg);
	return ret;
}

/* --rank values: "3", "0-3", "1,5" */
static int parse_ranks(const char *arg, bool **sel, int *nsel_cap)
{
	const char *p = arg;
	if (!*sel) {
		*sel = calloc(TPC_MAX_RANKS, sizeof(bool));
		*nsel_cap = TPC_MAX_RANKS;
		if (!*sel)
			return -1;
	}
	while (*p) {
		char *end;
		if (*p < '0' || *p > '9')
			return -1;
		unsigned long a = strtoul(p, &end, 10), b = a;
		if (*end == '-') {
			p = end + 1;
			if (*p < '0' || *p > '9')
				return -1;
			b = strtoul(p, &end, 10);
		}
		if (a > b || b >= TPC_MAX_RANKS)
			return -1;
		for (unsigned long r = a; r <= b; r++)
			(*sel)[r] = true;
		p = end;
		if (*p == ',')
			p++;
		else if (*p)
			return -1;
	}
	return 0;
}

enum {
	O_VMULT = 256, O_PAD, O_STRICT, O_EP, O_EP_PLACE, O_DEQ,
	O_LAYOUT, O_FORMAT, O_MAXSZ, O_RANK, O_NOSUM, O_CKSUM, O_DRY, O_JSON, O_PROGRESS, O_NOX,
};

int cmd_shard(int argc, char **argv)
{
	static const struct option lo[] = {
		{"output", required_argument, NULL, 'o'}, TPC_CLI_SET_LONGOPTS,
		{"vocab-multiple", required_argument, NULL, O_VMULT},
		{"pad", no_argument, NULL, O_PAD}, {"strict", no_argument, NULL, O_STRICT},
		{"ep", required_argument, NULL, O_EP}, {"ep-placement", required_argument, NULL, O_EP_PLACE},
		{"dequantize", no_argument, NULL, O_DEQ},
		{"layout", required_argument, NULL, O_LAYOUT}, {"format", required_argument, NULL, O_FORMAT},
		{"max-shard-size", required_argument, NULL, O_MAXSZ}, {"rank", required_argument, NULL, O_RANK},
		{"no-checksums", no_argument, NULL, O_NOSUM}, {"checksum", required_argument, NULL, O_CKSUM},
		{"dry-run", no_argument, NULL, O_DRY},
		{"json", no_argument, NULL, O_JSON}, {"no-extras", no_argument, NULL, O_NOX}, TPC_CLI_REMAP_LONGOPTS,
		{"force", no_argument, NULL, 'f'}, {"progress", no_argument, NULL, O_PROGRESS},
		{"quiet", no_argument, NULL, 'q'}, {"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	const char *out = NULL;
	const char *maxsz = NULL;
	int64_t vmult = 0;
	tpc_cli_set set;
	tpc_shard_opts so;
	bool dry = false, json = false, force_progress = false, dequant = false;
	size_t ndq = 0;
	bool *ranks = NULL;
	int ranks_cap = 0, c, ret = 0;
	tpc_plan plan;
	tpc_ckpt ck;
	tpc_merge mg;
	bool have_ck = false, have_mg = false, have_plan = false, have_sp = false;
	tpc_shard_plan sp;
	tpc_progress prog;
	tpc_err e;
	tpc_cli_remap rm;
	tpc_cli_mpi mpi = {false, false, 0, 1};

	tpc_cli_remap_init(&rm);
	tpc_cli_set_init(&set, 1);
	memset(&so, 0, sizeof(so));
	so.checksum = TPC_HASH_DEFAULT;
	tpc_plan_init(&plan);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:fqvh", lo, NULL)) != -1) {
		if (c >= TPC_OPT_RULES && c < TPC_OPT_REMAP_END) {
			if ((ret = tpc_cli_remap_opt(&rm, "shard", c, optarg)))
				goto done;
			continue;
		}
		if (c >= TPC_OPT_TP && c < TPC_OPT_SET_END) {
			if ((ret = tpc_cli_set_opt(&set, "shard", c, argv[optind - 1], optarg)))
				goto done;
			continue;
		}
		switch (c) {
		case 'o': out = optarg; break;
		case O_VMULT:
			if ((ret = tpc_cli_count("shard", "--vocab-multiple", optarg, 1 << 20, &vmult)))
				goto done;
			break;
		case O_PAD: so.resolve_flags |= TPC_RESOLVE_PAD; break;
		case O_DEQ: dequant = true; break;
		case O_EP: {
			int64_t ep = 0;
			if ((ret = tpc_cli_count("shard", "--ep", optarg, TPC_MAX_TP, &ep)))
				goto done;
			so.ep = (int)ep;
			break;
		}
		case O_EP_PLACE:
			if (!strcmp(optarg, "contiguous") || !strcmp(optarg, "linear")) {
				so.ep_placement = TPC_EP_CONTIGUOUS;
			} else if (!strcmp(optarg, "round-robin") || !strcmp(optarg, "round_robin")) {
				so.ep_placement = TPC_EP_ROUND_ROBIN;
			} else {
				ret = tpc_cli_usage("shard", "unknown --ep-placement '%s' (contiguous or round-robin)", optarg);
				goto done;
			}
			break;
		case O_STRICT: so.strict = true; break;
		case O_LAYOUT:
			if (!(so.layout = tpc_layout_by_name(optarg))) {
				char names[256];
				ret = tpc_cli_usage("shard", "unknown --layout '%s' (%s)", optarg,
						    tpc_layout_names(names, sizeof(names)));
				goto done;
			}
			break;
		case O_FORMAT: so.format = optarg; break;
		case O_MAXSZ: maxsz = optarg; break;
		case O_RANK:
			if (parse_ranks(optarg, &ranks, &ranks_cap)) {
				ret = tpc_cli_usage("shard", "--rank: '%s' is not a rank, list (1,3) or range (0-3)", optarg);
				goto done;
			}
			break;
		case O_NOSUM: so.checksum = TPC_HASH_NONE; break;
		case O_CKSUM:
			if (!tpc_hash_from_name(optarg, &so.checksum)) {
				ret = tpc_cli_usage("shard", "unknown --checksum '%s' (xxh3-128, sha256, none)", optarg);
				goto done;
			}
			break;
		case O_DRY: dry = true; break;
		case O_NOX: so.no_extras = true; break;
		case O_JSON: json = true; break;
		case 'f': so.force = true; break;
		case O_PROGRESS: force_progress = true; break;
		case 'q': tpc_cli_verbose = -1; break;
		case 'v': tpc_cli_verbose++; break;
		case 'h': {
			tpc_buf lb = TPC_BUF_INIT, pb = TPC_BUF_INIT;
			size_t col = 0;
			for (size_t i = 0; i < tpc_family_count(); i++) {
				const char *nm = tpc_family_at(i)->name;
				if (!col || col + strlen(nm) + 2 > 80) {
					tpc_buf_addf(&pb, "%s%27s", col ? ",\n" : "", "");
					col = 27;
				} else {
					tpc_buf_adds(&pb, ", ");
					col += 2;
				}
				tpc_buf_adds(&pb, nm);
				col += strlen(nm);
			}
			tpc_buf_adds(&pb, "\n");
			for (size_t i = 0; i < tpc_layout_count(); i++)
				tpc_buf_addf(&lb, "                             %-7s %s%s\n", tpc_layout_at(i)->name,
					     tpc_layout_at(i)->desc, i ? "" : " (default)");
			printf(help, pb.p ? pb.p : "", lb.p ? lb.p : "", tpc_cli_remap_help);
			tpc_buf_release(&lb);
			tpc_buf_release(&pb);
			ret = 0;
			goto done;
		}
		default:
			ret = tpc_cli_usage("shard", "unknown or incomplete option '%s'", argv[optind - 1]);
			goto done;
		}
	}
	if (optind != argc - 1) {
		ret = tpc_cli_usage("shard", optind >= argc ? "missing IN" : "expected one IN, got '%s' too",
				    optind < argc - 1 ? argv[optind + 1] : "");
		goto done;
	}
	const char *in = argv[optind];
	if (!set.tp) {
		ret = tpc_cli_usage("shard", "missing --tp N");
		goto done;
	}
	if (!out && !dry) {
		ret = tpc_cli_usage("shard", "missing -o DIR");
		goto done;
	}
	if (set.preset && set.plan_file) {
		ret = tpc_cli_usage("shard", "give --preset or --plan, not both");
		goto done;
	}
	if (json && !dry) {
		ret = tpc_cli_usage("shard", "--json goes with --dry-run");
		goto done;
	}
	if (so.format && strcmp(so.format, "safetensors") && strcmp(so.format, "torch") && strcmp(so.format, "dcp")) {
		ret = tpc_cli_usage("shard", "unknown --format '%s' (safetensors, torch, or dcp with --layout dcp)", so.format);
		goto done;
	}
	tpc_err_init(&e);
	if (maxsz) {
		if (tpc_parse_size(maxsz, &so.max_shard_size, &e) || !so.max_shard_size) {
			ret = tpc_cli_usage("shard", "--max-shard-size: %s", e.msg[0] ? e.msg : "must be greater than 0");
			goto done;
		}
		if (!so.layout || !so.layout->sized) {
			ret = tpc_cli_usage("shard", "--max-shard-size goes with a layout of several files per rank (hf, vllm)");
			goto done;
		}
	}
	if (ranks) {
		for (int r = (int)(set.tp * set.pp); r < ranks_cap; r++)
			if (ranks[r]) {
				ret = tpc_cli_usage("shard", "--rank %d: the set has ranks 0 to %lld", r, (long long)(set.tp * set.pp - 1));
				goto done;
			}
		so.write_rank = ranks;
	}
	so.tp = (int)set.tp;
	so.pp = (int)set.pp;

	/* under mpirun: this process writes its share of the rank files */
	if ((ret = tpc_cli_mpi_start(&mpi, "shard")))
		goto done;
	/* the input: a checkpoint, or a shard set to reshard */
	const tpc_ckpt *input;
	const tpc_model_facts *more = NULL;
	tpc_set_kind sk = tpc_set_detect(in, NULL);
	if (sk != TPC_SET_NONE) {
		tpc_merge_opts mo;
		memset(&mo, 0, sizeof(mo));
		mo.checksums = so.checksum != TPC_HASH_NONE;
		/* the input's checksums are checked in the reads that hash the new
		 * set (tpc_shard_opts.input_check), not in a pass of their own */
		mo.defer_checksums = !dry;
		if (sk != TPC_SET_MANIFEST) {
			/* a set from another tool: it was split with the plan given here */
			if (!set.preset && !set.plan_file) {
				ret = tpc_cli_usage("shard", "IN is a shard set without a tpconv manifest: give --preset or --plan");
				goto done;
			}
			if ((ret = tpc_cli_load_plan(set.preset, set.plan_file, &plan, &e))) {
				ret = tpc_cli_fail(&e);
				goto done;
			}
			have_plan = true;
			if ((ret = tpc_cli_facts(&set.facts, set.config, in, NULL, &plan, &mo.facts, &e))) {
				ret = tpc_cli_fail(&e);
				goto done;
			}
			mo.plan = &plan;
		}
		if (tpc_merge_open(&mg, in, &mo, &e)) {
			ret = tpc_cli_fail(&e);
			goto done;
		}
		have_mg = true;
		so.input_check = mg.check;
		input = &mg.out;
		more = &mg.facts;
		tpc_cli_info("input is a shard set of tp %d, pp %d", mg.tp, mg.pp);
		if (!have_plan && !set.preset && !set.plan_file) {
			if (!mg.plan_json) {
				ret = tpc_cli_usage("shard", "the input set's manifest records no plan: give --preset or --plan");
				goto done;
			}
			if (tpc_plan_from_buffer(&plan, mg.plan_json, strlen(mg.plan_json), "the input manifest's plan", &e)) {
				ret = tpc_cli_fail(&e);
				goto done;
			}
			have_plan = true;
		}
	} else {
		tpc_ckpt_init(&ck);
		have_ck = true;
		tpc_open_opts oo;
		memset(&oo, 0, sizeof(oo));
		if (dequant)
			oo.flags |= TPC_OPEN_DEQUANTIZE;
		if (tpc_ckpt_open(&ck, in, &oo, &e)) {
			ret = tpc_cli_fail(&e);
			goto done;
		}
		input = &ck;
		/* FP8 / GPTQ / AWQ weights become dense descriptions, computed
		 * slice by slice while each rank file is written */
		if (dequant && (ret = tpc_cli_dequantize(in, &ck, &ndq)))
			goto done;
	}
	if (!have_plan) {
		if (!set.preset && !set.plan_file) {
			ret = tpc_cli_usage("shard", "missing --preset NAME or --plan FILE (see 'tpconv plan --list')");
			goto done;
		}
		if (tpc_cli_load_plan(set.preset, set.plan_file, &plan, &e)) {
			ret = tpc_cli_fail(&e);
			goto done;
		}
		have_plan = true;
	}
	if (vmult)
		plan.pad_multiple = vmult;
	/* the remap stage (rename, drop, transpose, cast) runs before splitting;
	 * it changes descriptions only */
	if (rm.rules || rm.expect_keys) {
		if (!have_ck) {
			ret = tpc_cli_usage("shard", "rename/remap rules apply to a checkpoint, not to a shard set");
			goto done;
		}
		rm.strict = so.strict;
		rm.facts = set.facts; /* for unfuse rules (the megatron presets) */
		rm.config = set.config;
		rm.in = in;
		if ((ret = tpc_cli_remap_run(&rm, "shard", &ck)))
			goto done;
	}
	tpc_model_facts facts;
	if (tpc_cli_facts(&set.facts, set.config, have_ck ? in : NULL, more, &plan, &facts, &e)) {
		ret = tpc_cli_fail(&e);
		goto done;
	}
	if (ndq) { /* nothing quantized is left to split with its layer */
		memset(&facts.quant, 0, sizeof(facts.quant));
		so.dequantized = true;
	}
	char note[1024];
	if (tpc_facts_from_shapes(&facts, &plan, input, note, sizeof(note), &e)) {
		ret = tpc_cli_fail(&e);
		goto done;
	}
	if (note[0])
		tpc_cli_info("%s", note);
	/* companions (config.json, tokenizer ...) travel with the set; a set given
	 * as input carries them at its top (hf-layout sets keep them per rank, and
	 * a TensorRT-LLM set's config.json holds its old mapping) */
	/* a layout whose consumer pads or places things its own way (vLLM's vocab) */
	const tpc_layout *lay = so.layout ? so.layout : tpc_layout_default();
	if (lay->adjust_plan) {
		if (vmult) {
			ret = tpc_cli_usage("shard", "the %s layout pads the vocabulary the way its consumer does; drop --vocab-multiple",
					    lay->name);
			goto done;
		}
		if (lay->adjust_plan(&plan, input, &facts, so.tp, &e)) {
			ret = tpc_cli_fail(&e);
			goto done;
		}
	}
	so.config_dir = have_ck ? tpc_extras_source_dir(in) : mg.layout->companions_at_top ? tpc_strdup(in) : NULL;
	if (tpc_shard_plan_build(&sp, input, &plan, &facts, &so, &e)) {
		ret = tpc_cli_fail(&e);
		goto done;
	}
	have_sp = true;
	if (dry) {
		if (mpi.me != 0)
			goto done; /* under mpirun, process 0 shows the plan */
		tpc_buf b = TPC_BUF_INIT;
		if (json)
			tpc_shard_manifest_render(&sp, &b);
		else
			tpc_shard_describe(&sp, &b, isatty(STDOUT_FILENO));
		if (b.oom) {
			tpc_err_nomem(&e);
			ret = tpc_cli_fail(&e);
		} else {
			fwrite(b.p, 1, b.len, stdout);
		}
		tpc_buf_release(&b);
		goto done;
	}
	if (sp.nunmatched) {
		size_t shown = 0;
		tpc_cli_warn("%zu tensor%s matched no rule of plan '%s' and %s replicated%s", sp.nunmatched,
			     sp.nunmatched == 1 ? "" : "s", plan.name ? plan.name : "?", sp.nunmatched == 1 ? "is" : "are",
			     sp.nunmatched > 10 ? " (first 10 below)" : ":");
		for (size_t i = 0; i < sp.n && shown < 10; i++)
			if (!sp.t[i].matched) {
				char nm[512];
				tpc_sanitize(nm, sizeof(nm), input->t[sp.t[i].in].name);
				if (tpc_cli_verbose >= 0)
					fprintf(stderr, "tpconv:   %s\n", nm);
				shown++;
			}
	}
	uint64_t total = 0;
	for (int r = 0; r < so.tp * so.pp; r++)
		if (!ranks || ranks[r])
			for (size_t i = 0; i < sp.rank[r].n; i++)
				total += sp.rank[r].t[i].nbytes;
	tpc_progress_init(&prog, stderr, tpc_cli_progress_wanted(force_progress), "shard", total);
	so.progress = &prog;
	double t0 = tpc_now();
	if (mpi.on) {
		if ((ret = tpc_cli_mpi_shard(&mpi, &sp, out, &so)) || mpi.me != 0)
			goto done; /* process 0 reports for the job */
	} else if (tpc_shard_write(&sp, out, &so, &e)) {
		ret = tpc_cli_fail(&e);
		goto done;
	}
	tpc_progress_end(&prog);
	if (sp.nkept && tpc_cli_verbose >= 0)
		fprintf(stderr,
			"tpconv: resumed: kept %zu rank file%s an interrupted run left (every tensor byte-equal to this plan), wrote %zu\n",
			sp.nkept, sp.nkept == 1 ? "" : "s", sp.nwritten);
	if (mpi.on)
		tpc_cli_info("%d processes wrote the set's %d rank files (this one %zu)%s", mpi.size, so.tp * so.pp,
			     sp.nwritten, sp.manifest_written ? "; process 0 checked them and wrote the manifest" : "");
	if (!sp.manifest_written && tpc_cli_verbose >= 0)
		fprintf(stderr,
			"tpconv: wrote %zu rank file%s; the set has %zu of %d (the run that completes it writes the manifest)\n",
			sp.nwritten, sp.nwritten == 1 ? "" : "s", sp.npresent, so.tp * so.pp);
	else if (tpc_cli_verbose > 0) {
		char sz[32];
		tpc_cli_info("wrote %zu rank files (%s) to '%s' in %.2f s%s", sp.nwritten, tpc_fmt_size(total, sz, sizeof(sz)),
			     out, tpc_now() - t0, sp.manifest_written ? ", manifest last" : "");
	}
done:
	if (have_sp)
		tpc_shard_plan_release(&sp);
	free((void *)so.config_dir);
	if (have_mg)
		tpc_merge_release(&mg);
	if (have_ck)
		tpc_ckpt_release(&ck);
	tpc_plan_release(&plan);
	tpc_cli_remap_release(&rm);
	free(ranks);
	tpc_cli_mpi_end(&mpi, ret);
	return ret;
}
