/* cmd_diff.c - `tpconv diff A B`: are two checkpoints the same model? */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_buf.h"
#include "tpc_diff.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_shard.h"
#include "tpc_util.h"

static const char *help =
	"usage: tpconv diff [options] A B\n\n"
	"Compare two checkpoints tensor by tensor: any two inputs tpconv reads (torch, DCP,\n"
	"safetensors, an HF-sharded folder or index, a shard set folder, merged on the fly\n"
	"and checked against its manifest). For each name: equal, values differ (how\n"
	"many elements, the first differing index with both values, max abs, max rel,\n"
	"max ULPs), dtype or shape differ, or only in A / only in B. Without tolerances\n"
	"equal means bit for bit. Both sides are streamed in 4 MiB chunks (bounded\n"
	"memory); chunks whose bytes are identical are not decoded.\n\n"
	"Options:\n"
	"  --atol [DT=]X[,...]      absolute tolerance, for every dtype or per dtype of B\n"
	"                           (--atol 1e-6 --atol bf16=1e-2); an element is within the\n"
	"                           tolerances when |a - b| <= atol + rtol * |b| ...\n"
	"  --rtol [DT=]X[,...]      relative tolerance (B is the reference, as numpy.allclose)\n"
	"  --ulps [DT=]N[,...]      ... or when a and b (floats of one dtype) are at most N\n"
	"                           representable values apart\n"
	"  --cast                   where A and B are floats of different dtypes (B is A cast\n"
	"                           to bf16), compare A cast to B's dtype, bit for bit\n"
	"  --json FILE              the result as JSON, every tensor ('-': stdout, no table)\n"
	"  --junit FILE             the result as JUnit XML, one test case per tensor\n"
	"  --no-checksums           shard sets: do not check rank tensors against the manifest\n"
	"  --preset NAME, --plan FILE, --tp N, --pp M, --config FILE, --heads N, --kv-heads N,\n"
	"  --head-dim N, --hidden N, --vocab N\n"
	"                           for a shard set without a tpconv manifest, as for merge\n"
	"  --select PATH            compare only the subtree PATH of a nested checkpoint\n"
	"  --gguf-names             a GGUF keeps its GGUF tensor names and layout (default: read\n"
	"                           as its Hugging Face model, as convert, shard and verify do)\n"
	"  --progress               show progress even when stderr is not a terminal\n"
	"  -q, --quiet              print nothing; the exit status says it\n"
	"  -v, --verbose            list equal tensors too\n"
	"  -h, --help               this help\n\n"
	"%s"
	"  The rules above rename A's tensors before the names are matched (an HF model\n"
	"  against its Megatron-named conversion: a rules file from one naming to the\n"
	"  other); to map B instead, swap A and B.\n\n"
	"Exit status: 0 same, 1 different (or only on one side), 2 usage error,\n"
	"3 an input cannot be read, 4 a report cannot be written.\n";

enum {
	O_ATOL = 256, O_RTOL, O_ULPS, O_CAST, O_JSON, O_JUNIT, O_NOSUM, O_PROGRESS, O_GGUF_NAMES,
};

/* One side: a checkpoint, or a shard set merged on the fly (cli_input.c). */
static int open_side(tpc_cli_input *s, const char *path, const tpc_cli_set *set, bool checksums, bool gguf_names,
		     tpc_err *e)
{
	/* a GGUF as its Hugging Face model (names, Q/K rows), as convert reads it */
	unsigned fl = (checksums ? TPC_CLI_IN_CHECKSUMS : 0) | (gguf_names ? 0 : TPC_CLI_IN_HF_NAMES);
	int ret = tpc_cli_input_open(s, "diff", path, set, fl, e);
	if (!ret && s->have_mg)
		tpc_cli_info("'%s' is a shard set of tp %d, pp %d, merged on the fly", path, s->mg.tp, s->mg.pp);
	return ret;
}

static int diff(int argc, char **argv, tpc_cli_remap *rm)
{
	static const struct option lo[] = {
		{"atol", required_argument, NULL, O_ATOL}, {"rtol", required_argument, NULL, O_RTOL},
		{"ulps", required_argument, NULL, O_ULPS}, {"cast", no_argument, NULL, O_CAST},
		{"json", required_argument, NULL, O_JSON}, {"junit", required_argument, NULL, O_JUNIT},
		{"no-checksums", no_argument, NULL, O_NOSUM}, {"progress", no_argument, NULL, O_PROGRESS},
		{"gguf-names", no_argument, NULL, O_GGUF_NAMES},
		{"quiet", no_argument, NULL, 'q'}, {"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'}, TPC_CLI_REMAP_LONGOPTS, TPC_CLI_SET_LONGOPTS,
		{NULL, 0, NULL, 0}};
	const char *json = NULL, *junit = NULL;
	bool checksums = true, force_progress = false, opened_a = false, opened_b = false, gguf_names = false;
	tpc_cli_set set;
	tpc_diff_opts o;
	tpc_diff d;
	tpc_progress prog;
	tpc_cli_input sa, sb;
	tpc_buf b = TPC_BUF_INIT;
	tpc_err e;
	int c, ret = 0;

	tpc_cli_set_init(&set, 0);
	tpc_diff_opts_init(&o);
	tpc_diff_init(&d);
	tpc_err_init(&e);
	tpc_cli_input_init(&sa);
	tpc_cli_input_init(&sb);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "qvh", lo, NULL)) != -1) {
		int r = tpc_cli_input_opt(&set, rm, "diff", c, argv[optind - 1], optarg);
		if (r > 0) {
			ret = r;
			goto done;
		}
		if (r == 0)
			continue;
		switch (c) {
		case O_ATOL:
		case O_RTOL:
		case O_ULPS:
			if (tpc_diff_opts_tol(&o, c == O_ATOL ? 'a' : c == O_RTOL ? 'r' : 'u', optarg, &e)) {
				ret = tpc_cli_usage("diff", "%s", e.msg);
				goto done;
			}
			break;
		case O_CAST: o.cast = true; break;
		case O_JSON: json = optarg; break;
		case O_JUNIT: junit = optarg; break;
		case O_NOSUM: checksums = false; break;
		case O_PROGRESS: force_progress = true; break;
		case O_GGUF_NAMES: gguf_names = true; break;
		case 'q': tpc_cli_verbose = -1; break;
		case 'v': tpc_cli_verbose++; break;
		case 'h': printf(help, tpc_cli_remap_help); goto done;
		default:
			ret = tpc_cli_bad_option("diff", argv[optind - 1], lo);
			goto done;
		}
	}
	if (argc - optind != 2) {
		ret = tpc_cli_usage("diff", argc - optind < 2 ? "give two inputs, A and B" : "expected two inputs, got '%s' too",
				    argc - optind > 2 ? argv[optind + 2] : "");
		goto done;
	}
	if (json && junit && !strcmp(json, "-") && !strcmp(junit, "-")) {
		ret = tpc_cli_usage("diff", "only one of --json and --junit can go to stdout");
		goto done;
	}
	if (set.preset && set.plan_file) {
		ret = tpc_cli_usage("diff", "give --preset or --plan, not both");
		goto done;
	}
	const char *pa = argv[optind], *pb = argv[optind + 1];
	tpc_err_init(&e);
	/* an unwritable report path fails before the comparison, not after it */
	if (tpc_cli_report_check(json, &e) || tpc_cli_report_check(junit, &e))
		goto fail;
	opened_a = true;
	if ((ret = open_side(&sa, pa, &set, checksums, gguf_names, &e)))
		goto opened;
	opened_b = true;
	if ((ret = open_side(&sb, pb, &set, checksums, gguf_names, &e)))
		goto opened;
	/* the remap stage renames (and casts, transposes) A's side */
	if ((ret = tpc_cli_remap_run(rm, "diff", sa.view)))
		goto done;
	uint64_t total = 0;
	for (size_t i = 0; i < sb.view->n; i++)
		total += sb.view->t[i].nbytes;
	tpc_progress_init(&prog, stderr, tpc_cli_progress_wanted(force_progress), "diff", total);
	o.progress = &prog;
	if ((ret = tpc_diff_run(sa.view, sb.view, &o, &d, &e)))
		goto fail;
	tpc_progress_end(&prog);
	bool table_to_stdout = tpc_cli_verbose >= 0 && !(json && !strcmp(json, "-")) && !(junit && !strcmp(junit, "-"));
	if (table_to_stdout) {
		tpc_diff_report_text(&d, pa, pb, tpc_cli_verbose > 0, &b);
		if ((ret = tpc_cli_write_report("-", &b, &e)))
			goto fail;
	}
	if (json) {
		tpc_buf_reset(&b);
		tpc_diff_report_json(&d, pa, pb, &b);
		if ((ret = tpc_cli_write_report(json, &b, &e)))
			goto fail;
	}
	if (junit) {
		tpc_buf_reset(&b);
		tpc_diff_report_junit(&d, pa, pb, &b);
		if ((ret = tpc_cli_write_report(junit, &b, &e)))
			goto fail;
	}
	ret = tpc_diff_same(&d) ? 0 : 1;
	goto done;
opened:
	if (ret > 0)
		goto done; /* a usage error, said */
fail:
	ret = tpc_cli_fail(&e);
done:
	tpc_buf_release(&b);
	tpc_diff_release(&d);
	if (opened_b)
		tpc_cli_input_release(&sb);
	if (opened_a)
		tpc_cli_input_release(&sa);
	return ret;
}

int cmd_diff(int argc, char **argv)
{
	return tpc_cli_with_remap(argc, argv, diff);
}
