/* cmd_convert.c - `tpconv convert IN -o OUT`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_util.h"

static const char *help =
	"usage: tpconv convert [options] IN -o OUT\n\n"
	"Convert a checkpoint. IN is a file, an HF sharded directory or a *.index.json\n"
	"(format detected from content). The output format is --format, else taken\n"
	"from OUT's name (.safetensors; .pt .pth .bin for torch). With --max-shard-size,\n"
	"or when OUT is a directory (or ends in '/'), OUT becomes an HF sharded folder:\n"
	"model-0000N-of-0000M.safetensors + model.safetensors.index.json (one shard:\n"
	"model.safetensors and no index). Tensor bytes are streamed from the input\n"
	"mapping; the output appears atomically (temporary file, fsync, rename).\n\n"
	"Options:\n"
	"  -o, --output OUT         output file or directory (required)\n"
	"  --format NAME            safetensors or torch\n"
	"  --max-shard-size SIZE    HF sharding: largest shard (default 5GB; K/M/G/T = 1000^n,\n"
	"                           Ki/Mi/Gi/Ti = 1024^n)\n"
	"  --select PATH            take only the subtree PATH of a nested checkpoint\n"
	"  --strict                 refuse pickle globals outside torch's weights_only allow-list\n"
	"  --dequantize             dequantize quantized tensors to float32 instead of refusing\n"
	"  --dedup-tied             safetensors: store tied tensors once, record aliases in metadata\n"
	"  -f, --force              overwrite existing outputs\n"
	"  --progress               show progress even when stderr is not a terminal\n"
	"  -q, --quiet              errors only\n"
	"  -v, --verbose            say more\n"
	"  -h, --help               this help\n\n" TPC_EXIT_HELP;

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && !strcmp(s + a - b, suf);
}

int cmd_convert(int argc, char **argv)
{
	static const struct option lo[] = {
		{"output", required_argument, NULL, 'o'},
		{"format", required_argument, NULL, 'F'},
		{"max-shard-size", required_argument, NULL, 'M'},
		{"select", required_argument, NULL, 's'},
		{"strict", no_argument, NULL, 'S'},
		{"dequantize", no_argument, NULL, 'D'},
		{"dedup-tied", no_argument, NULL, 'T'},
		{"force", no_argument, NULL, 'f'},
		{"progress", no_argument, NULL, 'P'},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	const char *out = NULL, *fmt_name = NULL, *shard_arg = NULL;
	tpc_open_opts oo = {0, NULL, NULL};
	tpc_write_opts wo;
	tpc_progress prog;
	bool force_progress = false;
	tpc_ckpt ck;
	tpc_err e;
	int c, ret = 0;

	memset(&wo, 0, sizeof(wo));
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:fqvh", lo, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'F': fmt_name = optarg; break;
		case 'M': shard_arg = optarg; break;
		case 's': oo.select = optarg; break;
		case 'S': oo.flags |= TPC_OPEN_STRICT; break;
		case 'D': oo.flags |= TPC_OPEN_DEQUANTIZE; break;
		case 'T': wo.flags |= TPC_W_DEDUP_TIED; break;
		case 'f': wo.flags |= TPC_W_FORCE; break;
		case 'P': force_progress = true; break;
		case 'q': tpc_cli_verbose = -1; break;
		case 'v': tpc_cli_verbose++; break;
		case 'h': fputs(help, stdout); return 0;
		default:
			return tpc_cli_usage("convert", "unknown or incomplete option '%s'", argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		return tpc_cli_usage("convert", optind >= argc ? "missing IN" : "expected one IN, got '%s' too",
				     optind < argc - 1 ? argv[optind + 1] : "");
	if (!out)
		return tpc_cli_usage("convert", "missing -o OUT");
	const char *in = argv[optind];
	tpc_err_init(&e);
	if (shard_arg && tpc_parse_size(shard_arg, &wo.max_shard_size, &e))
		return tpc_cli_usage("convert", "--max-shard-size: %s", e.msg);
	if (shard_arg && wo.max_shard_size == 0)
		return tpc_cli_usage("convert", "--max-shard-size must be greater than 0");

	/* Choose the writer. */
	const tpc_format *outf = NULL, *inner = NULL;
	bool sharded = shard_arg || tpc_is_dir(out) || ends_with(out, "/");
	if (fmt_name) {
		inner = tpc_format_by_name(fmt_name);
		if (!inner || !strcmp(fmt_name, "hf-index"))
			return tpc_cli_usage("convert", "unknown --format '%s' (safetensors or torch)", fmt_name);
	}
	if (sharded) {
		outf = tpc_format_by_name("hf-index");
		if (!inner) {
			const tpc_format *byname = tpc_format_for_output(out);
			inner = byname ? byname : tpc_format_by_name("safetensors");
		}
		wo.inner_format = inner->name;
	} else {
		outf = inner ? inner : tpc_format_for_output(out);
		if (!outf)
			return tpc_cli_usage("convert",
					     "cannot tell the output format from '%s'; name it *.safetensors, *.pt or *.bin, or give --format",
					     out);
	}
	if (!outf)
		return tpc_cli_usage("convert", "output format is not available in this build");

	tpc_ckpt_init(&ck);
	if (tpc_ckpt_open(&ck, in, &oo, &e)) {
		ret = tpc_cli_fail(&e);
		goto out;
	}
	uint64_t total = 0;
	for (size_t i = 0; i < ck.n; i++)
		total += ck.t[i].nbytes;
	tpc_progress_init(&prog, stderr, tpc_cli_progress_wanted(force_progress), "convert", total);
	wo.progress = &prog;
	double t0 = tpc_now();
	if (outf->write(&ck, NULL, 0, out, &wo, &e)) {
		tpc_err_path(&e, out);
		ret = tpc_cli_fail(&e);
		goto out;
	}
	tpc_progress_end(&prog);
	if (tpc_cli_verbose > 0) {
		char sz[32];
		tpc_cli_info("wrote %zu tensors (%s) to '%s' in %.2f s", ck.n, tpc_fmt_size(total, sz, sizeof(sz)),
			     out, tpc_now() - t0);
	}
out:
	tpc_ckpt_release(&ck);
	return ret;
}
