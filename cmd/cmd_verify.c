/* cmd_verify.c - `tpconv verify --reference ORIG --shards DIR`: check a shard
 * set against the unsplit checkpoint. The arguments are read here, the set is
 * described for verify in verify_desc.c, verify/tpc_verify.h does the checks,
 * and rank 0 writes the report. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_buf.h"
#include "tpc_io.h"
#include "tpc_util.h"
#include "tpc_verify.h"
#include "verify_desc.h"

static const char *help =
	"usage: tpconv verify --reference ORIG --shards DIR [options]\n\n"
	"Check a tensor-parallel shard set against the unsplit checkpoint it came from:\n"
	"  structure  every rank file present, every rank tensor shaped as the split says\n"
	"             and bit for bit its slice of the original (padding zero, KV replicas\n"
	"             equal, manifest checksums confirmed);\n"
	"  layers     each split weight with seeded inputs: the unsplit layer against the\n"
	"             tensor-parallel one with real collectives (column: all-gather, fused\n"
	"             parts re-assembled per part; row: all-reduce, bias added once; vocab:\n"
	"             masked lookup + all-reduce, and all-gathered logits);\n"
	"  blocks     (llama, gpt2) each layer's attention (per head, GQA replicas) and MLP\n"
	"             (SwiGLU on fused gate/up) as the ranks run them;\n"
	"  model      (llama, gpt2) a forward pass on --tokens tokens, unsplit vs\n"
	"             tensor-parallel: logits max abs/rel difference and top-1 agreement.\n"
	"Ranks compute in fp32 against an fp64 reference. Tolerances by dtype: F32 rtol\n"
	"1e-5 (model 1e-4), F16/BF16 1e-2; attention with huge scores is allowed more\n"
	"(the report shows the rtol used). The report is a '#' table on stdout; --json and\n"
	"--junit write it for programs and CI. On stderr: a progress line when it is a\n"
	"terminal, and one line that sums the run up (PASS or FAIL, tensors, layers, the\n"
	"largest relative error, tp, seconds).\n\n"
	"Backends: ranks are threads of this process (default); under 'mpirun -np TP\n"
	"tpconv verify ...' each process opens only its own rank files and rank 0 reports;\n"
	"--device cuda runs the matmuls with cuBLAS and the collectives with NCCL (the\n"
	"tpconv_cuda module; exit 5 without it or without a visible GPU); with more ranks\n"
	"than GPUs the ranks share them (rank r on GPU r mod GPUs) and the collectives\n"
	"stay on the host, so a tp-8 set can be checked on one GPU.\n\n"
	"Options:\n"
	"  --reference ORIG         the unsplit checkpoint (any format tpconv reads)\n"
	"  --shards DIR             the shard set (a tpconv manifest, OSLO or TensorRT-LLM files)\n"
	"  --preset NAME, --plan FILE   the plan of a set without a manifest (neither: the\n"
	"                           preset of the architecture config.json names)\n"
	"  --preset-force           use --preset though config.json names an architecture\n"
	"                           its family does not list (else exit 2)\n"
	"  --ranks N (--tp N)       tensor-parallel degree of a set without a manifest\n"
	"  --pp M                   pipeline stages (a set with a manifest: must be its own)\n"
	"  --config FILE            model facts from a Hugging Face config.json\n"
	"  --heads N, --kv-heads N, --head-dim N, --hidden N, --vocab N   model facts\n"
	"  --select PATH            the reference is the subtree PATH of a nested checkpoint\n"
	"                           (as the set was sharded with 'shard --select PATH')\n"
	"  --rules ..., --rename ... (below)   rename the reference's tensors first, as the set\n"
	"                           was sharded with them (a Megatron-named reference of an\n"
	"                           HF-named set: --rules megatron-llama)\n"
	"  --arch NAME|none         model structure for block and model checks: a family whose\n"
	"                           record describes its layers (tpconv plan --list), or none\n"
	"                           (default: the architecture of the plan's family)\n"
	"  --checks LIST            comma-separated: structure,layers,blocks,model (default all)\n"
	"  --no-dequantize          a quantized set (FP8, GPTQ, AWQ: the reference's config.json\n"
	"                           quantization_config) is checked as stored only; by default\n"
	"                           every weight is also dequantized on each rank from the pieces\n"
	"                           it holds and checked (structure, layers, blocks) against the\n"
	"                           dequantized reference, its raw tensors as 'NAME (F8_E4M3)'\n"
	"  --device cpu|cuda        where the ranks compute (default cpu)\n"
	"  --tokens T               tokens per check (default 8)\n"
	"  --seed S                 seed of the inputs (default 1)\n"
	"  --rtol X, --atol X       tolerances for every check (default: by dtype)\n"
	"  --threads N              OpenMP threads per rank (default: cores / ranks)\n"
	"  --json FILE              the report as JSON (schema in tpc_verify.h); '-': stdout,\n"
	"                           instead of the table\n"
	"  --junit FILE             the report as JUnit XML; '-': stdout, instead of the table\n"
	"  --progress               show progress even when stderr is not a terminal\n"
	"  -q, --quiet              print only failing checks, no progress and no summary\n"
	"  -v, --verbose            say more\n"
	"  -h, --help               this help\n\n"
	"Exit status: 0 every check passed, 1 a check failed (the report names the tensor,\n"
	"rank and first differing values), 2 usage error, 3 bad or unsupported input,\n"
	"4 output or I/O failure, 5 GPU/NCCL/MPI failure.\n\n"
	"Rename/remap options (the reference, before it is compared):\n%s";

enum {
	O_REF = 256, O_SHARDS, O_ARCH, O_CHECKS, O_DEVICE,
	O_TOKENS, O_SEED, O_RTOL, O_ATOL, O_THREADS, O_JSON, O_JUNIT, O_NODQ, O_PROGRESS,
};

static int parse_double(const char *flag, const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !(v >= 0))
		return tpc_cli_usage("verify", "%s: expected a number >= 0, got '%s'", flag, s);
	*out = v;
	return 0;
}

/* The options into the set's arguments `a`, verify's options `o` and the
 * report files. Returns -1 to go on, or the exit status (after --help, 0). */
static int parse_args(int argc, char **argv, tpc_cli_vargs *a, tpc_verify_opts *o, const char **json,
		      const char **junit, bool *progress)
{
	/* the set's and the remap stage's options as shard and diff take them */
	static const struct option lo[] = {
		{"reference", required_argument, NULL, O_REF}, {"shards", required_argument, NULL, O_SHARDS},
		TPC_CLI_SET_LONGOPTS, TPC_CLI_REMAP_LONGOPTS, {"ranks", required_argument, NULL, TPC_OPT_TP},
		{"arch", required_argument, NULL, O_ARCH}, {"checks", required_argument, NULL, O_CHECKS},
		{"device", required_argument, NULL, O_DEVICE}, {"tokens", required_argument, NULL, O_TOKENS},
		{"seed", required_argument, NULL, O_SEED}, {"rtol", required_argument, NULL, O_RTOL},
		{"atol", required_argument, NULL, O_ATOL}, {"threads", required_argument, NULL, O_THREADS},
		{"json", required_argument, NULL, O_JSON}, {"junit", required_argument, NULL, O_JUNIT},
		{"no-dequantize", no_argument, NULL, O_NODQ}, {"progress", no_argument, NULL, O_PROGRESS},
		{"quiet", no_argument, NULL, 'q'}, {"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	const char *checks = NULL;
	int64_t v = 0;
	int c, ret;
	tpc_err e;
	tpc_err_init(&e);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "qvh", lo, NULL)) != -1) {
		if ((ret = tpc_cli_input_opt(&a->set, a->rm, "verify", c, argv[optind - 1], optarg)) >= 0) {
			if (ret)
				return ret;
			continue;
		}
		switch (c) {
		case O_REF: a->ref_path = optarg; break;
		case O_SHARDS: a->dir = optarg; break;
		case O_ARCH: a->arch = optarg; break;
		case O_CHECKS: checks = optarg; break;
		case O_DEVICE:
			if (!strcmp(optarg, "cuda"))
				o->device = TPC_VDEV_CUDA;
			else if (strcmp(optarg, "cpu"))
				return tpc_cli_usage("verify", "--device: 'cpu' or 'cuda', not '%s'", optarg);
			break;
		case O_TOKENS:
			if ((ret = tpc_cli_count("verify", "--tokens", optarg, TPC_VERIFY_MAX_TOKENS, &v)))
				return ret;
			if (!v)
				return tpc_cli_usage("verify", "--tokens must be at least 1");
			o->tokens = (int)v;
			break;
		case O_SEED:
			if (tpc_parse_u64(optarg, UINT64_MAX, &o->seed, &e))
				return tpc_cli_usage("verify", "--seed: %s", e.msg);
			break;
		case O_RTOL:
		case O_ATOL:
			if ((ret = parse_double(c == O_RTOL ? "--rtol" : "--atol", optarg, c == O_RTOL ? &o->rtol : &o->atol)))
				return ret;
			break;
		case O_THREADS:
			if ((ret = tpc_cli_count("verify", "--threads", optarg, 4096, &v)))
				return ret;
			o->threads_per_rank = (int)v;
			break;
		case O_JSON: *json = optarg; break;
		case O_JUNIT: *junit = optarg; break;
		case O_NODQ: a->no_dq = true; break;
		case O_PROGRESS: *progress = true; break;
		case 'q': tpc_cli_verbose = -1; break;
		case 'v': tpc_cli_verbose++; break;
		case 'h': printf(help, tpc_cli_remap_help); return 0;
		default: return tpc_cli_bad_option("verify", argv[optind - 1], lo);
		}
	}
	if (optind < argc)
		return tpc_cli_usage("verify", "unexpected argument '%s'", argv[optind]);
	if (a->set.tp > TPC_VERIFY_MAX_TP)
		return tpc_cli_usage("verify", "--ranks %lld: at most %d", (long long)a->set.tp, TPC_VERIFY_MAX_TP);
	/* unfuse rules take the same facts (the megatron presets) */
	a->rm->facts = a->set.facts;
	a->rm->config = a->set.config;
	a->rm->in = a->ref_path;
	if (!a->ref_path || !a->dir)
		return tpc_cli_usage("verify", "missing %s", !a->ref_path ? "--reference ORIG" : "--shards DIR");
	if (a->set.preset && a->set.plan_file)
		return tpc_cli_usage("verify", "give --preset or --plan, not both");
	if (*json && *junit && !strcmp(*json, "-") && !strcmp(*junit, "-"))
		return tpc_cli_usage("verify", "only one of --json and --junit can go to stdout");
	if (checks) {
		o->checks = 0;
		char *dup = tpc_strdup(checks), *save = NULL;
		for (char *tok = dup ? strtok_r(dup, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
			unsigned f = !strcmp(tok, "structure") ? TPC_VCHECK_STRUCTURE : !strcmp(tok, "layers") ? TPC_VCHECK_LAYERS
				     : !strcmp(tok, "blocks") ? TPC_VCHECK_BLOCKS : !strcmp(tok, "model") ? TPC_VCHECK_MODEL : 0;
			if (!f) {
				int us = tpc_cli_usage("verify", "--checks: unknown check '%s'", tok);
				free(dup);
				return us;
			}
			o->checks |= f;
		}
		free(dup);
	}
	a->checks = o->checks;
	return -1;
}

/* Rank 0: the '#' table on stdout (unless a report goes there), then --json
 * and --junit ("-": standard output). */
static int write_reports(const tpc_verify_report *rep, const char *json, const char *junit, tpc_err *e)
{
	tpc_buf b = TPC_BUF_INIT;
	int wr = 0;
	bool json_out = json && !strcmp(json, "-"), junit_out = junit && !strcmp(junit, "-");
	if (!json_out && !junit_out) {
		tpc_verify_report_table(rep, tpc_cli_verbose < 0, &b);
		fwrite(b.p, 1, b.len, stdout);
		fflush(stdout);
	}
	if (json) {
		tpc_buf_reset(&b);
		tpc_verify_report_json(rep, &b);
		wr = tpc_cli_write_report(json, &b, e);
	}
	if (!wr && junit) {
		tpc_buf_reset(&b);
		tpc_verify_report_junit(rep, &b);
		wr = tpc_cli_write_report(junit, &b, e);
	}
	tpc_buf_release(&b);
	return wr;
}

/* A run that ended before its checks (a missing or unreadable rank file,
 * exit 3): the failure as one test case of the JUnit report, so that CI
 * shows why. The report's own error, if any, is only warned about. */
static void junit_failure(tpc_verify_report *rep, const char *junit, const tpc_err *why)
{
	tpc_vresult res;
	tpc_err e2;
	tpc_buf b = TPC_BUF_INIT;
	memset(&res, 0, sizeof(res));
	tpc_err_init(&e2);
	res.kind = TPC_VC_STRUCTURE;
	res.status = TPC_VR_FAIL;
	tpc_sanitize(res.name, sizeof(res.name), why->path[0] ? why->path : "input");
	snprintf(res.dtype, sizeof(res.dtype), "-");
	tpc_sanitize(res.msg, sizeof(res.msg), why->msg);
	if (!tpc_verify_report_add(rep, &res)) {
		tpc_verify_report_junit(rep, &b);
		if (tpc_cli_write_report(junit, &b, &e2))
			tpc_cli_warn("the JUnit report was not written: %s", e2.msg);
	}
	tpc_buf_release(&b);
}

/* Rank 0, unless -q: the run in one line on stderr. */
static void summary(const tpc_verify_report *rep, const tpc_verify_set *set)
{
	double rel = 0;
	const tpc_vresult *first = NULL;
	for (size_t i = 0; i < rep->n; i++) {
		const tpc_vresult *r = &rep->r[i];
		if (r->status == TPC_VR_FAIL && !first)
			first = r;
		if (r->kind != TPC_VC_STRUCTURE && r->status != TPC_VR_SKIP && r->max_rel > rel)
			rel = r->max_rel;
	}
	fprintf(stderr, "tpconv: verify: %s: ", first ? "FAIL" : "PASS");
	if (first)
		fprintf(stderr, "%zu of %zu checks failed (the first: %s %s), ", rep->nfail, rep->npass + rep->nfail + rep->nskip,
			tpc_vcheck_name((tpc_vcheck)first->kind), first->name);
	else
		fprintf(stderr, "%zu checks, ", rep->npass + rep->nskip);
	fprintf(stderr, "%zu tensors, %lld layer%s", set->n, (long long)(set->model ? set->model->nlayers : 0),
		set->model && set->model->nlayers == 1 ? "" : "s");
	if (rep->nskip)
		fprintf(stderr, ", %zu skipped", rep->nskip);
	if (rep->dp > 1)
		fprintf(stderr, ", max rel err %.2g (tp %d x dp %d, %.2f s)\n", rel, rep->tp / rep->dp, rep->dp, rep->seconds);
	else
		fprintf(stderr, ", max rel err %.2g (tp %d, %.2f s)\n", rel, rep->tp, rep->seconds);
}

static int verify(int argc, char **argv, tpc_cli_remap *rm)
{
	const char *json = NULL, *junit = NULL;
	tpc_cli_vargs a;
	tpc_cli_vdesc d;
	tpc_verify_opts o;
	tpc_verify_set set;
	tpc_verify_report rep;
	tpc_progress prog;
	tpc_err e;
	bool force_progress = false, reports_ok = false;
	int ret;

	memset(&a, 0, sizeof(a));
	tpc_cli_set_init(&a.set, 0);
	a.rm = rm;
	tpc_verify_opts_init(&o);
	tpc_cli_vdesc_init(&d, &a);
	tpc_verify_set_init(&set, 1);
	tpc_verify_report_init(&rep);
	tpc_err_init(&e);
	if ((ret = parse_args(argc, argv, &a, &o, &json, &junit, &force_progress)) >= 0)
		goto done;
	o.cuda_module = getenv("TPCONV_CUDA_MODULE");
	o.blas = getenv("TPCONV_BLAS");
	/* under mpirun: one process per tp rank */
	if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK")) {
		tpc_err why;
		tpc_err_init(&why);
		if (!tpc_verify_mpi_load(getenv("TPCONV_MPI_MODULE"), &why)) {
			a.mpi = true;
			o.backend = TPC_VB_MPI;
			tpc_verify_local_rank(getenv, &o.local_rank, &o.local_size);
			if (tpc_verify_mpi_init(&a.me, &a.size, &e)) {
				ret = tpc_cli_fail(&e);
				goto done;
			}
		} else {
			tpc_cli_warn("started by mpirun, but %s: every process checks the whole set", why.msg);
		}
	}
	/* an unwritable report path fails before the check, not after it */
	if (a.me == 0 && ((ret = tpc_cli_report_check(json, &e)) || (ret = tpc_cli_report_check(junit, &e))))
		goto fail;
	reports_ok = true;
	if ((ret = tpc_cli_vdesc_open(&d, &e)) || (ret = tpc_cli_vdesc_build(&d, &set, &rep, &e)))
		goto fail;
	if (set.dp > 1)
		tpc_cli_info("verify: %zu tensors, tp %d x dp %d, pp %d, %s", set.n, d.tp / set.dp, set.dp, d.pp, a.mpi ? "mpi" : "threads");
	else
		tpc_cli_info("verify: %zu tensors, tp %d, pp %d, %s", set.n, d.tp, d.pp, a.mpi ? "mpi" : "threads");
	tpc_progress_init(&prog, stderr, a.me == 0 && tpc_cli_progress_wanted(force_progress), "verify", 0);
	prog.unit = "steps";
	o.progress = &prog;
	ret = tpc_verify_execute(&set, &o, a.me == 0 ? &rep : NULL, &e);
	if (prog.done) /* rank 0 got as far as the checks */
		tpc_progress_end(&prog);
	if (ret && ret != TPC_EMISMATCH)
		goto fail;
	if (a.me == 0) {
		int wr = write_reports(&rep, json, junit, &e);
		if (wr) {
			ret = wr;
			goto fail;
		}
		if (tpc_cli_verbose >= 0)
			summary(&rep, &set);
	}
	ret = rep.nfail || ret == TPC_EMISMATCH ? 1 : 0;
	goto done;
fail:
	if (ret > 0)
		goto done; /* an exit status, its message said */
	if (a.me == 0 && junit && reports_ok && ret == TPC_EINPUT)
		junit_failure(&rep, junit, &e);
	ret = tpc_cli_fail(&e); /* TPC_EUSAGE (an unknown preset) is exit 2 with its message */
	if (a.mpi)
		tpc_verify_mpi_abort(ret); /* ranks may wait in a collective for this one */
done:
	tpc_verify_report_release(&rep);
	tpc_verify_set_release(&set);
	tpc_cli_vdesc_release(&d);
	if (a.mpi)
		tpc_verify_mpi_finalize();
	return ret;
}

int cmd_verify(int argc, char **argv)
{
	return tpc_cli_with_remap(argc, argv, verify);
}
