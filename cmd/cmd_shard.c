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
#include "tpc_shard_optim.h"
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
	"the flags below, else --config or IN/config.json, else what IN records (a set's\n"
	"manifest, a Megatron checkpoint's args), else the plan's; each is checked against\n"
	"the shapes of the tensors it governs (a contradiction is exit 2, naming it).\n\n"
	"Options:\n"
	"  -o, --output DIR         output folder (required unless --dry-run)\n"
	"  --tp N                   tensor-parallel ranks (required)\n"
	"  --pp M                   pipeline stages (default 1): layers spread evenly,\n"
	"                           embeddings on the first stage, final norm and head on the last\n"
	"  --pp-layers A,B,...      the layers of each stage instead (M counts adding up to the\n"
	"                           model's; a stage may have none: shorter first and last stages);\n"
	"                           layouts that hold uneven stages: megatron-dist, megatron\n"
	"  --preset NAME            a built-in plan, one per model family (tpconv plan --list):\n"
	"%s"
	"  --plan FILE              a plan in JSON\n"
	"                           (neither: the preset of the architecture config.json names,\n"
	"                           or a GGUF's metadata; a GGUF is read as its Hugging Face model)\n"
	"  --preset-force           the --preset even where config.json names an architecture\n"
	"                           its family does not list (else exit 2)\n"
	"  --config FILE            model facts from a Hugging Face config.json\n"
	"  --heads N, --kv-heads N, --head-dim N, --hidden N, --vocab N\n"
	"                           model facts (override --config and the plan)\n"
	"  --select PATH            take only the subtree PATH of a nested checkpoint\n"
	"  --vocab-multiple N       pad vocab rows to a multiple of N * tp (Megatron's\n"
	"                           make_vocab_size_divisible_by; default: the plan's, 1)\n"
	"  --ep N                   expert parallelism: the tp ranks form N groups of tp/N\n"
	"                           (N divides tp; TensorRT-LLM's moe_ep_size N, moe_tp_size\n"
	"                           tp/N); attention and dense layers split over all tp ranks,\n"
	"                           each routed expert (the plan's \"experts\" patterns) on one\n"
	"                           group only, split tp/N ways inside it, under its global name.\n"
	"                           megatron-dist also takes N a multiple of tp: N/tp data-parallel\n"
	"                           replicas a stage (tp x N/tp x pp files), one expert rank each\n"
	"  --ep-placement P         contiguous (default: group g owns experts g*E/N ..; Megatron,\n"
	"                           vLLM) or round-robin (expert e on group e %% N)\n"
	"  --moe-grouped-gemm       megatron-dist: say in common.pt's args that the experts are\n"
	"                           TEGroupedMLP's (moe_grouped_gemm), not SequentialMLP's; the\n"
	"                           weights are the same bytes either way\n"
	"  --optimizer              megatron-dist: IN's optimizer state too (a DCP save's optim,\n"
	"                           a ZeRO folder's, Megatron's distributed optimizer's: Adam's\n"
	"                           exp_avg, exp_avg_sq, the fp32 master) as Megatron's\n"
	"                           'fully_reshardable' form, each tensor split as its parameter\n"
	"                           (optimizer.state.{param,exp_avg,exp_avg_sq}.KEY; doc/training.md)\n"
	"                           in iter_NNNNNNN/ (the step), which Megatron resumes from\n"
	"  --iteration N            with --optimizer: the iteration saved (default: the step)\n"
	"  --megatron-train K=V,... with --optimizer: the run's Megatron flags a resume needs:\n"
	"                           global-batch-size (required), lr, min-lr, lr-warmup-iters,\n"
	"                           lr-decay-iters, train-iters, lr-decay-style, weight-decay\n"
	"                           (no lr and train-iters: resume with\n"
	"                           --override-opt_param-scheduler)\n"
	"  --dequantize             FP8 (block, per-tensor, per-channel), GPTQ, AWQ and pack-quantized weights\n"
	"                           (config.json quantization_config) become dense: each rank\n"
	"                           gets its slice computed from the packed tensors while it is\n"
	"                           written (config.json's torch_dtype, else bf16); the set's config.json\n"
	"                           loses quantization_config. No block or group limits the tp\n"
	"  --lora DIR[:WEIGHT]      merge a PEFT LoRA adapter first, as convert --lora does: each\n"
	"                           rank's slice of a merged weight is computed while it is\n"
	"                           written (repeatable; after --dequantize; not for a shard set)\n"
	"  --base BASE              IN is a PEFT LoRA adapter folder: split it beside BASE (the\n"
	"                           checkpoint it adapts, whose plan and facts apply) into\n"
	"                           tpTT_ppPP/ adapter folders (--layout peft): B of a base split\n"
	"                           along its output split as the base (fused parts each), A of\n"
	"                           one split along its input split as the base, the rest whole;\n"
	"                           'convert RANKFILE --lora DIR' merges a rank (doc/shard.md)\n"
	"  --pad                    zero-pad splits that do not divide evenly (recorded in the\n"
	"                           manifest, stripped on merge) instead of refusing them; an\n"
	"                           FP8 block layer whose slices would cut a block is padded\n"
	"                           to a multiple of block x tp (weight_scale_inv to match)\n"
	"  --strict                 refuse tensors that no rule of the plan matches\n"
	"                           (otherwise they are listed and replicated)\n"
	"  --layout NAME            how rank files are named and what goes beside them:\n"
	"%s"
	"  --format NAME            rank file format: %s\n"
	"                           (default safetensors; dcp goes with --layout dcp)\n"
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
	"                           files (a trtllm set still gets its config.json, hf-mapping its mapping)\n"
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
	case TPC_OPT_PRESET_FORCE: s->preset_force = true; return 0;
	case TPC_OPT_CONFIG: s->config = arg; return 0;
	case TPC_OPT_SELECT: s->select = arg; return 0;
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
	/* each flag says where its fact came from */
	static const char *const flag_name[TPC_NFACTS] = {"--heads", "--kv-heads", "--head-dim", "--hidden", "--vocab"};
	const int64_t given[TPC_NFACTS] = {flags->heads, flags->kv_heads, flags->head_dim, flags->hidden, flags->vocab};
	memset(out->origin, 0, sizeof(out->origin));
	for (int k = 0; k < TPC_NFACTS; k++)
		if (given[k])
			snprintf(out->origin[k], sizeof(out->origin[k]), "%s", flag_name[k]);
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
	O_VMULT = 256, O_PAD, O_STRICT, O_EP, O_EP_PLACE, O_DEQ, O_LORA, O_PPL,
	O_LAYOUT, O_FORMAT, O_MAXSZ, O_RANK, O_NOSUM, O_CKSUM, O_DRY, O_JSON, O_PROGRESS, O_NOX,
	O_GROUPED, O_BASE, O_OPTIM, O_ITER, O_TRAIN,
};

/* A shard run: its arguments, its input and the plan it builds. */
typedef struct shard_cmd {
	const char *in, *out, *maxsz;
	int64_t vmult;
	int64_t *ppl;                /* --pp-layers: layers of each stage */
	int nppl;
	bool dry, json, force_progress, dequant;
	bool *ranks;                 /* --rank: the rank files this run writes; NULL: all */
	int ranks_cap;
	size_t ndq;                  /* weights dequantized while written */
	const char *lora[TPC_CLI_LORA_MAX]; /* --lora DIR[:W], in order */
	int nlora;
	tpc_cli_set set;
	tpc_shard_opts so;
	tpc_cli_remap rm;
	tpc_cli_input input;
	tpc_model_facts facts;
	tpc_shard_plan sp;
	bool have_sp;
	const char *base;            /* --base: IN is a PEFT adapter split beside this base */
	tpc_cli_lora_set lsh;
	bool optimizer;              /* --optimizer: IN's optimizer state split beside the model */
	tpc_mcore_train train;       /* --iteration, --megatron-train: the resume's facts */
	bool have_train;
	tpc_shard_optim opt;
	bool have_opt;
} shard_cmd;

static void print_help(void)
{
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
		tpc_buf_addf(&lb, "                             %-7s %s%s\n", tpc_layout_at(i)->name, tpc_layout_at(i)->desc,
			     i ? "" : " (default)");
	printf(help, pb.p ? pb.p : "", lb.p ? lb.p : "", tpc_cli_rank_formats(), tpc_cli_remap_help);
	tpc_buf_release(&lb);
	tpc_buf_release(&pb);
}

static const struct option shard_lo[] = {
	{"output", required_argument, NULL, 'o'}, TPC_CLI_SET_LONGOPTS,
	{"vocab-multiple", required_argument, NULL, O_VMULT},
	{"pad", no_argument, NULL, O_PAD}, {"strict", no_argument, NULL, O_STRICT},
	{"pp-layers", required_argument, NULL, O_PPL}, {"ep", required_argument, NULL, O_EP}, {"ep-placement", required_argument, NULL, O_EP_PLACE},
	{"dequantize", no_argument, NULL, O_DEQ}, {"lora", required_argument, NULL, O_LORA},
	{"base", required_argument, NULL, O_BASE},
	{"layout", required_argument, NULL, O_LAYOUT}, {"format", required_argument, NULL, O_FORMAT},
	{"max-shard-size", required_argument, NULL, O_MAXSZ}, {"rank", required_argument, NULL, O_RANK},
	{"no-checksums", no_argument, NULL, O_NOSUM}, {"checksum", required_argument, NULL, O_CKSUM},
	{"dry-run", no_argument, NULL, O_DRY},
	{"json", no_argument, NULL, O_JSON}, {"no-extras", no_argument, NULL, O_NOX},
	{"moe-grouped-gemm", no_argument, NULL, O_GROUPED}, {"optimizer", no_argument, NULL, O_OPTIM}, TPC_CLI_REMAP_LONGOPTS,
	{"iteration", required_argument, NULL, O_ITER}, {"megatron-train", required_argument, NULL, O_TRAIN},
	{"force", no_argument, NULL, 'f'}, {"progress", no_argument, NULL, O_PROGRESS},
	{"quiet", no_argument, NULL, 'q'}, {"verbose", no_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};

static const char *layout_name(size_t i, void *ctx)
{
	(void)ctx;
	return i < tpc_layout_count() ? tpc_layout_at(i)->name : NULL;
}

/* --pp-layers A,B,C: the layers of each stage (a stage may have none). */
static int parse_pp_layers(shard_cmd *s, const char *arg)
{
	const char *p = arg;
	free(s->ppl);
	s->ppl = NULL;
	s->nppl = 0;
	while (*p) {
		char *end;
		if (*p < '0' || *p > '9' || s->nppl >= TPC_MAX_TP)
			return tpc_cli_usage("shard", "--pp-layers: '%s' is not a list of layer counts (1,3,3,1)", arg);
		unsigned long long v = strtoull(p, &end, 10);
		if (v > (1ull << 40) || (*end && *end != ','))
			return tpc_cli_usage("shard", "--pp-layers: '%s' is not a list of layer counts (1,3,3,1)", arg);
		int64_t *g = realloc(s->ppl, (size_t)(s->nppl + 1) * sizeof(*g));
		if (!g)
			return tpc_cli_usage("shard", "--pp-layers: out of memory");
		s->ppl = g;
		s->ppl[s->nppl++] = (int64_t)v;
		p = *end ? end + 1 : end;
		if (*end && !*p)
			return tpc_cli_usage("shard", "--pp-layers: '%s' ends with a comma", arg);
	}
	return s->nppl ? 0 : tpc_cli_usage("shard", "--pp-layers: give the layers of each stage (1,3,3,1)");
}

/* --megatron-train KEY=VALUE,...: the training run's flags a resume from a
 * megatron-dist set with optimizer state needs (tpc_mcore_train), each key
 * named as Megatron's flag. */
static int train_opt(tpc_mcore_train *t, const char *arg)
{
	static const char *const keys[] = {"global-batch-size", "lr", "min-lr", "lr-warmup-iters", "lr-decay-iters",
					   "train-iters", "lr-decay-style", "weight-decay", NULL};
	const char *p = arg;
	while (*p) {
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		size_t kl = eq && eq < end ? (size_t)(eq - p) : 0, k = 0;
		while (keys[k] && (strlen(keys[k]) != kl || strncmp(keys[k], p, kl)))
			k++;
		if (!kl || !keys[k])
			return tpc_cli_usage("shard", "--megatron-train: '%.*s' is not KEY=VALUE with KEY one of global-batch-size, lr, min-lr, lr-warmup-iters, lr-decay-iters, train-iters, lr-decay-style, weight-decay",
					     (int)(end - p), p);
		char v[64], *ve;
		size_t vl = (size_t)(end - eq - 1);
		if (!vl || vl >= sizeof(v))
			return tpc_cli_usage("shard", "--megatron-train %s: a value, please", keys[k]);
		memcpy(v, eq + 1, vl);
		v[vl] = 0;
		if (k == 6) {
			if (vl >= sizeof(t->lr_decay_style))
				return tpc_cli_usage("shard", "--megatron-train lr-decay-style: '%s' is not a decay style", v);
			memcpy(t->lr_decay_style, v, vl + 1);
		} else if (k == 1 || k == 2 || k == 7) {
			double d = strtod(v, &ve);
			if (ve == v || *ve || !(d >= 0) || d > 1e30)
				return tpc_cli_usage("shard", "--megatron-train %s: expected a number >= 0, got '%s'", keys[k], v);
			*(k == 1 ? &t->lr : k == 2 ? &t->min_lr : &t->weight_decay) = d;
		} else {
			int64_t *dst = k == 0 ? &t->global_batch_size : k == 3 ? &t->lr_warmup_iters
								   : k == 4 ? &t->lr_decay_iters : &t->train_iters;
			tpc_err e;
			uint64_t n;
			tpc_err_init(&e);
			if (tpc_parse_u64(v, 1ull << 40, &n, &e) || (n == 0 && k != 3))
				return tpc_cli_usage("shard", "--megatron-train %s: '%s' is not a count", keys[k], v);
			*dst = (int64_t)n;
		}
		p = *end ? end + 1 : end;
	}
	return 0;
}

/* One option of shard's own: 0, or the exit status (message said). */
static int shard_opt(shard_cmd *s, int c, const char *flag)
{
	int64_t ep = 0;
	int ret;
	switch (c) {
	case 'o': s->out = optarg; return 0;
	case O_VMULT: return tpc_cli_count("shard", "--vocab-multiple", optarg, 1 << 20, &s->vmult);
	case O_PAD: s->so.resolve_flags |= TPC_RESOLVE_PAD; return 0;
	case O_DEQ: s->dequant = true; return 0;
	case O_BASE: s->base = optarg; return 0;
	case O_LORA:
		if (s->nlora == TPC_CLI_LORA_MAX)
			return tpc_cli_usage("shard", "more than %d --lora adapters", TPC_CLI_LORA_MAX);
		s->lora[s->nlora++] = optarg;
		return 0;
	case O_PPL:
		return parse_pp_layers(s, optarg);
	case O_EP:
		if ((ret = tpc_cli_count("shard", "--ep", optarg, TPC_MAX_TP, &ep)))
			return ret;
		s->so.ep = (int)ep;
		return 0;
	case O_EP_PLACE:
		if (!strcmp(optarg, "contiguous") || !strcmp(optarg, "linear"))
			s->so.ep_placement = TPC_EP_CONTIGUOUS;
		else if (!strcmp(optarg, "round-robin") || !strcmp(optarg, "round_robin"))
			s->so.ep_placement = TPC_EP_ROUND_ROBIN;
		else
			return tpc_cli_usage("shard", "unknown --ep-placement '%s' (contiguous or round-robin)", optarg);
		return 0;
	case O_STRICT: s->so.strict = true; return 0;
	case O_LAYOUT:
		if (!(s->so.layout = tpc_layout_by_name(optarg))) {
			char names[256], hint[96];
			tpc_did_you_mean(optarg, layout_name, NULL, hint, sizeof(hint));
			return tpc_cli_usage("shard", "unknown --layout '%s' (%s%s)", optarg, hint, tpc_layout_names(names, sizeof(names)));
		}
		return 0;
	case O_FORMAT: s->so.format = optarg; return 0;
	case O_MAXSZ: s->maxsz = optarg; return 0;
	case O_RANK:
		if (parse_ranks(optarg, &s->ranks, &s->ranks_cap))
			return tpc_cli_usage("shard", "--rank: '%s' is not a rank, list (1,3) or range (0-3)", optarg);
		return 0;
	case O_NOSUM: s->so.checksum = TPC_HASH_NONE; return 0;
	case O_CKSUM:
		if (!tpc_hash_from_name(optarg, &s->so.checksum))
			return tpc_cli_usage("shard", "unknown --checksum '%s' (xxh3-128, sha256, none)", optarg);
		return 0;
	case O_DRY: s->dry = true; return 0;
	case O_NOX: s->so.no_extras = true; return 0;
	case O_GROUPED: s->so.moe_grouped_gemm = true; return 0;
	case O_OPTIM: s->optimizer = true; return 0;
	case O_ITER:
		s->have_train = true;
		return tpc_cli_count("shard", "--iteration", optarg, 9999999, &s->train.iteration);
	case O_TRAIN: s->have_train = true; return train_opt(&s->train, optarg);
	case O_JSON: s->json = true; return 0;
	case 'f': s->so.force = true; return 0;
	case O_PROGRESS: s->force_progress = true; return 0;
	case 'q': tpc_cli_verbose = -1; return 0;
	case 'v': tpc_cli_verbose++; return 0;
	default: return tpc_cli_bad_option("shard", flag, shard_lo);
	}
}

/* The arguments and their consistency: -1 to go on, else the exit status. */
static int parse_args(shard_cmd *s, int argc, char **argv)
{
	int c, ret;
	tpc_err e;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:fqvh", shard_lo, NULL)) != -1) {
		if (c == 'h') {
			print_help();
			return 0;
		}
		if (c >= TPC_OPT_RULES && c < TPC_OPT_REMAP_END)
			ret = tpc_cli_remap_opt(&s->rm, "shard", c, optarg);
		else if (c >= TPC_OPT_TP && c < TPC_OPT_SET_END)
			ret = tpc_cli_set_opt(&s->set, "shard", c, argv[optind - 1], optarg);
		else
			ret = shard_opt(s, c, argv[optind - 1]);
		if (ret)
			return ret;
	}
	if (optind != argc - 1)
		return tpc_cli_usage("shard", optind >= argc ? "missing IN" : "expected one IN, got '%s' too",
				     optind < argc - 1 ? argv[optind + 1] : "");
	s->in = argv[optind];
	if (!s->set.tp)
		return tpc_cli_usage("shard", "missing --tp N");
	if (!s->out && !s->dry)
		return tpc_cli_usage("shard", "missing -o DIR");
	if (s->set.preset && s->set.plan_file)
		return tpc_cli_usage("shard", "give --preset or --plan, not both");
	if (s->json && !s->dry)
		return tpc_cli_usage("shard", "--json goes with --dry-run");
	if (s->base && (s->nlora || s->dequant || s->rm.rules || s->rm.expect_keys))
		return tpc_cli_usage("shard", "--base splits an adapter as it is: no --lora, --dequantize or rename rules");
	if (s->have_train && !s->optimizer)
		return tpc_cli_usage("shard", "--iteration and --megatron-train go with --optimizer (a model-only megatron-dist set is Megatron's 'release' folder)");
	if (s->so.moe_grouped_gemm && s->so.layout != &tpc_layout_megatron_dist)
		return tpc_cli_usage("shard", "--moe-grouped-gemm goes with --layout megatron-dist");
	const tpc_format *f = s->so.format ? tpc_format_by_name(s->so.format) : NULL;
	if (s->so.format && (!f || !f->rank_file))
		return tpc_cli_usage("shard", "unknown --format '%s' (%s; dcp with --layout dcp)",
				     s->so.format, tpc_cli_rank_formats());
	tpc_err_init(&e);
	if (s->maxsz) {
		if (tpc_parse_size(s->maxsz, &s->so.max_shard_size, &e) || !s->so.max_shard_size)
			return tpc_cli_usage("shard", "--max-shard-size: %s", e.msg[0] ? e.msg : "must be greater than 0");
		if (!s->so.layout || !s->so.layout->sized)
			return tpc_cli_usage("shard", "--max-shard-size goes with a layout of several files per rank (hf, vllm)");
	}
	/* --ep over --tp (a multiple of it): Megatron's expert-parallel ranks
	 * span ep / tp data-parallel replicas of the tensor-parallel group */
	int dp = s->so.ep > s->set.tp && s->so.ep % s->set.tp == 0 ? (int)(s->so.ep / s->set.tp) : 1;
	if (s->ranks) {
		for (int r = (int)(s->set.tp * dp * s->set.pp); r < s->ranks_cap; r++)
			if (s->ranks[r])
				return tpc_cli_usage("shard", "--rank %d: the set has ranks 0 to %lld", r,
						     (long long)(s->set.tp * dp * s->set.pp - 1));
		s->so.write_rank = s->ranks;
	}
	s->so.tp = (int)s->set.tp;
	s->so.dp = dp;
	s->so.pp = (int)s->set.pp;
	if (s->nppl && s->nppl != s->so.pp)
		return tpc_cli_usage("shard", "--pp-layers names %d stages, --pp is %d", s->nppl, s->so.pp);
	s->so.pp_layers = s->ppl;
	return -1;
}

/* The input (a checkpoint, or a shard set to reshard), its plan, the remap
 * stage, the facts and the layout's own adjustments: the shard plan built
 * whole. 0, a negative status in e, or an exit status already said. */
/* Head facts the user alone gives (issue 41): --heads, --kv-heads or
 * --head-dim that no config.json or record of the input confirms. Counts
 * wrong in proportion (heads and kv heads doubled, head_dim halved) fit
 * every shape, so nothing else catches them: say so loudly. They keep their
 * flag as origin, which the manifest records as unverified and verify does
 * not take for what a head is; a flag the config confirms takes the
 * config's origin. */
static int head_facts_alone(const tpc_cli_input *in, const tpc_cli_set *set, tpc_model_facts *f, tpc_err *e)
{
	static const int k3[] = {TPC_FACT_HEADS, TPC_FACT_KV_HEADS, TPC_FACT_HEAD_DIM};
	tpc_model_facts none, ind;
	memset(&none, 0, sizeof(none));
	int ret = tpc_cli_facts(&none, set->config, in->path, in->have_mg ? &in->mg.facts : &in->own, NULL, &ind, e);
	if (ret)
		return ret;
	const int64_t fv[] = {f->heads, f->kv_heads, f->head_dim}, iv[] = {ind.heads, ind.kv_heads, ind.head_dim};
	tpc_buf b = TPC_BUF_INIT;
	for (int i = 0; i < 3; i++) {
		int k = k3[i];
		if (!fv[i] || strncmp(f->origin[k], "--", 2) || strstr(f->origin[k], "unverified"))
			continue;
		if (iv[i] == fv[i] && ind.origin[k][0]) {
			snprintf(f->origin[k], sizeof(f->origin[k]), "%s", ind.origin[k]);
			continue;
		}
		tpc_buf_addf(&b, "%s%s %lld (%s%s", b.len ? ", " : "", tpc_fact_name(k), (long long)fv[i], f->origin[k],
			     iv[i] ? "; " : ")");
		if (iv[i])
			tpc_buf_addf(&b, "%s says %lld)", ind.origin[k][0] ? ind.origin[k] : "the input", (long long)iv[i]);
	}
	if (b.len)
		tpc_cli_warn("%s: the command line's alone, with no config.json to check them against. Head counts wrong in "
			     "proportion (heads and kv heads doubled, head_dim halved) fit every shape and write half heads "
			     "that no runtime can run; the manifest records them as unverified, and verify fails the set "
			     "until --config gives what a head is",
			     b.p);
	tpc_buf_release(&b);
	return 0;
}

/* --optimizer: the input's state tied to its parameters; the model to
 * split becomes those parameters under their own names. */
static int optimizer_input(shard_cmd *s, tpc_err *e)
{
	tpc_cli_input *in = &s->input;
	if (in->have_mg)
		return tpc_cli_usage("shard",
				     "--optimizer reads the state of a checkpoint (a DCP save, a ZeRO folder, a Megatron torch_dist save); '%s' is read as a shard set, whose manifest covers the model only",
				     s->in);
	if (s->base || s->nlora || s->dequant)
		return tpc_cli_usage("shard", "--optimizer splits the state as it was saved: no --base, --lora or --dequantize");
	if (!s->so.layout || !s->so.layout->optimizer)
		return tpc_cli_usage("shard", "--optimizer goes with --layout megatron-dist (the layout that stores optimizer state)");
	int ret = tpc_shard_optim_build(&s->opt, &in->ck, e);
	if (ret) {
		tpc_err_path(e, s->in);
		return ret;
	}
	s->have_opt = true;
	s->opt.train = s->train;
	in->view = &s->opt.model;
	return 0;
}

static int build(shard_cmd *s, tpc_err *e)
{
	tpc_cli_input *in = &s->input;
	int ret;
	/* a set's checksums are checked in the reads that hash the new set
	 * (tpc_shard_opts.input_check), not in a pass of their own */
	unsigned fl = TPC_CLI_IN_WHOLE | TPC_CLI_IN_SET_PLAN | (s->so.checksum != TPC_HASH_NONE ? TPC_CLI_IN_CHECKSUMS : 0) |
		      (s->dry ? 0 : TPC_CLI_IN_DEFER) | (s->dequant ? TPC_CLI_IN_DEQUANTIZE : 0) | TPC_CLI_IN_HF_NAMES;
	if (s->optimizer)
		fl |= TPC_CLI_IN_OPTIMIZER;
	if ((ret = tpc_cli_input_open(in, "shard", s->base ? s->base : s->in, &s->set, fl, e)))
		return ret;
	if (s->optimizer && (ret = optimizer_input(s, e)))
		return ret;
	if (in->have_mg) {
		s->so.input_check = in->mg.check;
		tpc_cli_info("input is a shard set of tp %d, pp %d", in->mg.tp, in->mg.pp);
		if (!in->have_plan && in->kind == TPC_SET_MANIFEST)
			return tpc_cli_usage("shard", "the input set's manifest records no plan: give --preset or --plan");
		if (s->nlora)
			return tpc_cli_usage("shard", "--lora merges into a checkpoint, not a shard set: merge '%s' first, or convert it with --lora",
					     s->in);
	} else if (s->dequant && (ret = tpc_cli_dequantize(s->in, &in->ck, &s->ndq))) {
		/* FP8 / GPTQ / AWQ weights become dense descriptions, computed
		 * slice by slice while each rank file is written */
		return ret;
	}
	/* LoRA adapters: the merged weights computed slice by slice as well */
	for (int k = 0; k < s->nlora; k++)
		if ((ret = tpc_cli_lora(s->lora[k], &in->ck, s->so.strict, s->in, &s->set)))
			return ret;
	if (!in->have_plan)
		return tpc_cli_usage("shard", "missing --preset NAME or --plan FILE (see 'tpconv plan --list')");
	if (s->vmult)
		in->plan.pad_multiple = s->vmult;
	/* the remap stage (rename, drop, transpose, cast) runs before splitting;
	 * it changes descriptions only */
	if (s->rm.rules || s->rm.expect_keys) {
		if (!in->have_ck)
			return tpc_cli_usage("shard", "rename/remap rules apply to a checkpoint, not to a shard set");
		s->rm.strict = s->so.strict;
		s->rm.facts = s->set.facts; /* for unfuse rules (the megatron presets) */
		s->rm.config = s->set.config;
		s->rm.in = s->in;
		/* with optimizer state: the parameters and each state key alike
		 * (a Megatron save's fused q/k/v taken apart in the moments as in
		 * the weights), each tensor keeping its parameter's name */
		if (!s->have_opt && (ret = tpc_cli_remap_run(&s->rm, "shard", &in->ck)))
			return ret;
		for (int k = -1; s->have_opt && k < s->opt.nkeys; k++)
			if ((ret = tpc_cli_remap_run(&s->rm, "shard", k < 0 ? &s->opt.model : &s->opt.state[k])))
				return ret;
	}
	if ((ret = tpc_cli_input_facts(in, &s->set, &s->facts, e)) || (ret = head_facts_alone(in, &s->set, &s->facts, e)))
		return ret;
	if (s->ndq) { /* nothing quantized is left to split with its layer */
		memset(&s->facts.quant, 0, sizeof(s->facts.quant));
		s->so.dequantized = true;
	}
	char note[1024];
	if ((ret = tpc_facts_from_shapes(&s->facts, &in->plan, in->view, note, sizeof(note), e)))
		return ret;
	if (note[0])
		tpc_cli_info("%s", note);
	if (s->base) { /* IN is an adapter: split by the plan its base's rules give */
		if ((ret = tpc_cli_lora_shard_build(&s->lsh, s->in, in, &s->set, &s->facts, &s->so, s->so.strict, &s->sp, e)))
			return ret;
		s->have_sp = true;
		return 0;
	}
	/* a layout whose consumer pads or places things its own way (vLLM's vocab) */
	const tpc_layout *lay = s->so.layout ? s->so.layout : tpc_layout_default();
	if (lay->adjust_plan) {
		if (s->vmult)
			return tpc_cli_usage("shard", "the %s layout pads the vocabulary the way its consumer does; drop --vocab-multiple",
					     lay->name);
		if ((ret = lay->adjust_plan(&in->plan, in->view, &s->facts, s->so.tp, e)))
			return ret;
	}
	/* companions (config.json, tokenizer ...) travel with the set; a set given
	 * as input carries them where a merge finds them (an hf set in each rank
	 * folder; a TensorRT-LLM set's config.json loses its old mapping) */
	s->so.config_file = s->set.config; /* the trtllm layout's config.json is written from it */
	if (in->have_ck) {
		s->so.config_dir = tpc_extras_source_dir(s->in);
	} else {
		tpc_extras_opts xo;
		memset(&xo, 0, sizeof(xo));
		const char *from = tpc_cli_set_companions(&in->mg, s->in, &xo);
		s->so.config_dir = from ? tpc_strdup(from) : NULL;
		s->so.config_drop = xo.config_drop;
		s->so.config_marker = xo.config_marker;
		s->so.config_from = xo.config_from;
	}
	/* the state first, split by the model's plan; the model's ranks then store it */
	if (s->have_opt) {
		if ((ret = tpc_shard_optim_plans(&s->opt, &in->plan, &s->facts, &s->so, e)))
			return ret;
		s->so.optim = &s->opt;
	}
	if ((ret = tpc_shard_plan_build(&s->sp, in->view, &in->plan, &s->facts, &s->so, e)))
		return ret;
	s->have_sp = true;
	if (s->have_opt) {
		int64_t it = tpc_shard_optim_iteration(&s->opt);
		tpc_cli_info("optimizer state: %zu parameters, exp_avg, exp_avg_sq and the master (from %s) split as the parameters, step %lld",
			     s->opt.map.np, s->opt.master_from ? s->opt.master_from : "?", (long long)s->opt.step);
		tpc_cli_info("Megatron resumes at iteration %lld (iter_%07lld/), consumed_train_samples %lld", (long long)it,
			     (long long)it, (long long)(it * s->train.global_batch_size));
		if (!tpc_mcore_train_schedule_known(&s->train))
			tpc_cli_warn("the learning-rate schedule is not known (--megatron-train lr=X,train-iters=N,...): common.pt's opt_param_scheduler holds None for it beside num_steps; resume with --override-opt_param-scheduler (the schedule from Megatron's flags, num_steps from the checkpoint)");
	}
	return 0;
}

/* --dry-run: the plan on stdout (process 0 under mpirun). */
static int show_plan(shard_cmd *s, const tpc_cli_mpi *mpi, tpc_err *e)
{
	if (mpi->me != 0)
		return 0;
	tpc_buf b = TPC_BUF_INIT;
	int ret = 0;
	if (s->json)
		tpc_shard_manifest_render(&s->sp, &b);
	else
		tpc_shard_describe(&s->sp, &b, isatty(STDOUT_FILENO));
	if (b.oom) {
		tpc_err_nomem(e);
		ret = tpc_cli_fail(e);
	} else {
		fwrite(b.p, 1, b.len, stdout);
	}
	tpc_buf_release(&b);
	return ret;
}

static void warn_unmatched(const shard_cmd *s)
{
	const tpc_shard_plan *sp = &s->sp;
	size_t shown = 0;
	if (!sp->nunmatched)
		return;
	tpc_cli_warn("%zu tensor%s matched no rule of plan '%s' and %s replicated%s", sp->nunmatched,
		     sp->nunmatched == 1 ? "" : "s", s->input.plan.name ? s->input.plan.name : "?",
		     sp->nunmatched == 1 ? "is" : "are", sp->nunmatched > 10 ? " (first 10 below)" : ":");
	for (size_t i = 0; i < sp->n && shown < 10; i++)
		if (!sp->t[i].matched) {
			char nm[512];
			tpc_sanitize(nm, sizeof(nm), s->input.view->t[sp->t[i].in].name);
			if (tpc_cli_verbose >= 0)
				fprintf(stderr, "tpconv:   %s\n", nm);
			shown++;
		}
}

/* Write this run's rank files (this process's share under mpirun) and say
 * what was kept, written and left. */
static int write_set(shard_cmd *s, tpc_cli_mpi *mpi, tpc_err *e)
{
	tpc_shard_plan *sp = &s->sp;
	tpc_progress prog;
	uint64_t total = 0;
	int ret;
	warn_unmatched(s);
	for (int r = 0; r < s->so.tp * s->so.dp * s->so.pp; r++)
		if (!s->ranks || s->ranks[r])
			for (size_t i = 0; i < sp->rank[r].n; i++)
				total += sp->rank[r].t[i].nbytes;
	tpc_progress_init(&prog, stderr, tpc_cli_progress_wanted(s->force_progress), "shard", total);
	s->so.progress = &prog;
	double t0 = tpc_now();
	if (mpi->on) {
		if ((ret = tpc_cli_mpi_shard(mpi, sp, s->out, &s->so)) || mpi->me != 0)
			return ret; /* process 0 reports for the job */
	} else if (tpc_shard_write(sp, s->out, &s->so, e)) {
		ret = tpc_cli_fail(e);
		tpc_cli_note_left(sp->nleft + sp->nkept, "rank file");
		return ret;
	}
	tpc_progress_end(&prog);
	if (sp->nkept && tpc_cli_verbose >= 0)
		fprintf(stderr,
			"tpconv: resumed: kept %zu rank file%s an interrupted run left (every tensor byte-equal to this plan), wrote %zu\n",
			sp->nkept, sp->nkept == 1 ? "" : "s", sp->nwritten);
	if (mpi->on)
		tpc_cli_info("%d processes wrote the set's %d rank files (this one %zu)%s", mpi->size, s->so.tp * s->so.dp * s->so.pp,
			     sp->nwritten, sp->manifest_written ? "; process 0 checked them and wrote the manifest" : "");
	if (sp->manifest_other && tpc_cli_verbose >= 0)
		fprintf(stderr, "tpconv: wrote %zu rank file%s; another run writing '%s' completed the set and wrote its manifest\n",
			sp->nwritten, sp->nwritten == 1 ? "" : "s", s->out);
	else if (!sp->manifest_written && tpc_cli_verbose >= 0)
		fprintf(stderr,
			"tpconv: wrote %zu rank file%s; the set has %zu of %d (the run that completes it writes the manifest)\n",
			sp->nwritten, sp->nwritten == 1 ? "" : "s", sp->npresent, s->so.tp * s->so.dp * s->so.pp);
	else if (tpc_cli_verbose > 0) {
		char sz[32];
		tpc_cli_info("wrote %zu rank files (%s) to '%s' in %.2f s%s", sp->nwritten, tpc_fmt_size(total, sz, sizeof(sz)),
			     s->out, tpc_now() - t0, sp->manifest_written ? ", manifest last" : "");
	}
	return 0;
}

int cmd_shard(int argc, char **argv)
{
	shard_cmd s;
	tpc_err e;
	tpc_cli_mpi mpi = {false, false, 0, 1};
	int ret;

	memset(&s, 0, sizeof(s));
	tpc_mcore_train_init(&s.train);
	tpc_cli_remap_init(&s.rm);
	tpc_cli_set_init(&s.set, 1);
	tpc_cli_input_init(&s.input);
	tpc_cli_lora_set_init(&s.lsh);
	s.so.checksum = TPC_HASH_DEFAULT;
	tpc_err_init(&e);
	if ((ret = parse_args(&s, argc, argv)) >= 0)
		goto done;
	/* under mpirun: this process writes its share of the rank files */
	if ((ret = tpc_cli_mpi_start(&mpi, "shard")))
		goto done;
	if ((ret = build(&s, &e))) {
		if (ret < 0)
			ret = tpc_cli_fail(&e);
		goto done;
	}
	ret = s.dry ? show_plan(&s, &mpi, &e) : write_set(&s, &mpi, &e);
done:
	if (s.have_sp)
		tpc_shard_plan_release(&s.sp);
	if (s.have_opt)
		tpc_shard_optim_release(&s.opt);
	tpc_cli_lora_set_release(&s.lsh);
	free((void *)s.so.config_dir);
	tpc_cli_input_release(&s.input);
	tpc_cli_remap_release(&s.rm);
	free(s.ranks);
	free(s.ppl);
	tpc_cli_mpi_end(&mpi, ret);
	return ret;
}
