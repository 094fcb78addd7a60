/* main.c - the tpconv command: subcommand dispatch, --help, --version. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "formats.h"
#include "tpc_config.h"
#include "tpc_io.h"
#include "tpc_util.h"

int tpc_cli_verbose;

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
	bool job; /* runs as a job under mpirun (its processes share the output) */
} cmds[] = {
	{"inspect", cmd_inspect, "list the tensors, dtypes, shapes and sizes of a checkpoint", false},
	{"convert", cmd_convert, "convert between formats (safetensors, HF shards, torch, DCP, GGUF)", true},
	{"shard", cmd_shard, "split a checkpoint for tensor/pipeline parallelism (or reshard a set)", false},
	{"merge", cmd_merge, "rebuild the unsplit checkpoint from a shard set", true},
	{"diff", cmd_diff, "compare two checkpoints tensor by tensor (values, dtypes, shapes, names)", false},
	{"verify", cmd_verify, "check a shard set against the unsplit model (structure, layers, blocks, logits)", false},
	{"plan", cmd_plan, "list, print and check sharding plans", false},
	{"rules", cmd_rules, "list and show the rename/remap rule presets", false},
};

static const char *cmd_name(size_t i, void *ctx)
{
	(void)ctx;
	return i < sizeof(cmds) / sizeof(cmds[0]) ? cmds[i].name : NULL;
}

/* "--name" of option i of a getopt table (ctx), into a static buffer. */
static const char *opt_name(size_t i, void *ctx)
{
	static char buf[64];
	const struct option *lo = ctx;
	for (size_t k = 0; k <= i; k++)
		if (!lo[k].name)
			return NULL;
	snprintf(buf, sizeof(buf), "--%s", lo[i].name);
	return buf;
}

int tpc_cli_bad_option(const char *cmd, const char *token, const struct option *lo)
{
	char name[64], hint[96] = "";
	size_t n = strcspn(token, "=");
	snprintf(name, sizeof(name), "%.*s", (int)(n < sizeof(name) ? n : sizeof(name) - 1), token);
	for (size_t i = 0; lo && lo[i].name; i++)
		if (!strncmp(name, "--", 2) && !strcmp(name + 2, lo[i].name) && lo[i].has_arg == required_argument)
			return tpc_cli_usage(cmd, "option '%s' needs a value", name);
	if (lo && !strncmp(name, "--", 2))
		tpc_did_you_mean(name, opt_name, (void *)lo, hint, sizeof(hint));
	if (hint[0])
		hint[strlen(hint) - 1] = '\0'; /* the trailing space */
	return tpc_cli_usage(cmd, "unknown or incomplete option '%s'%s%s", token, hint[0] ? "; " : "", hint);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tpconv [--version] [--help] <command> [<args>]\n\n"
		   "A streaming converter and tensor-parallel sharder for model checkpoints.\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "\nRun 'tpconv <command> --help' for a command's options.\n\n"
		   "Formats read (detected by content, not by name):");
	for (size_t i = 0; i < tpc_format_count(); i++)
		fprintf(f, "%s %s", i ? "," : "", tpc_format_at(i)->name);
	fprintf(f, ".\n\n" TPC_EXIT_HELP);
}

int tpc_cli_fail(const tpc_err *e)
{
	char buf[4096];
	tpc_err_format(e, buf, sizeof(buf));
	fprintf(stderr, "tpconv: error: %s\n", buf);
	if (tpc_cli_verbose > 1 && e->where)
		fprintf(stderr, "tpconv: (detected at %s)\n", e->where);
	return tpc_status_exit(e->code ? e->code : TPC_EIO);
}

void tpc_cli_note_left(size_t n, const char *what)
{
	if (n && tpc_cli_verbose >= 0)
		fprintf(stderr,
			"tpconv: no room left: kept %zu finished %s%s (each complete; the unfinished ones were removed); "
			"make room and run the same command again (without --force): it checks them and writes the rest\n",
			n, what, n == 1 ? "" : "s");
}

int tpc_cli_usage(const char *cmd, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "tpconv: error: %s (see 'tpconv %s --help')\n", msg, cmd);
	return 2;
}

int tpc_cli_report_check(const char *path, tpc_err *e)
{
	tpc_out o;
	int ret;
	if (!path || !strcmp(path, "-"))
		return 0;
	/* the temporary the report will be written through, opened and removed */
	memset(&o, 0, sizeof(o));
	if ((ret = tpc_out_open(&o, path, TPC_OUT_FORCE, e)))
		return ret;
	tpc_out_abort(&o);
	return 0;
}

int tpc_cli_write_report(const char *path, const tpc_buf *b, tpc_err *e)
{
	if (b->oom)
		return tpc_err_nomem(e);
	if (strcmp(path, "-"))
		return tpc_write_file_atomic(path, b->p, b->len, TPC_OUT_FORCE, e);
	fwrite(b->p, 1, b->len, stdout);
	return fflush(stdout) ? tpc_err_sys(e, TPC_EIO, 0, "cannot write the report to stdout") : 0;
}

/* One diagnostic line on stderr, when the verbosity reaches `level`. */
static void say(int level, const char *prefix, const char *fmt, va_list ap)
{
	if (tpc_cli_verbose < level)
		return;
	fputs(prefix, stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void tpc_cli_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	say(0, "tpconv: warning: ", fmt, ap);
	va_end(ap);
}

void tpc_cli_info(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	say(1, "tpconv: ", fmt, ap);
	va_end(ap);
}

int tpc_cli_catalog_args(const char *cmd, const char *help, int argc, char **argv, bool *list, const char **check,
			 const char **name)
{
	static const struct option lo[] = {
		{"list", no_argument, NULL, 'l'}, {"check", required_argument, NULL, 'c'},
		{"quiet", no_argument, NULL, 'q'}, {"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	int c;
	*list = false;
	*check = *name = NULL;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "qvh", lo, NULL)) != -1) {
		switch (c) {
		case 'l': *list = true; break;
		case 'c': *check = optarg; break;
		case 'q': tpc_cli_verbose = -1; break;
		case 'v': tpc_cli_verbose++; break;
		case 'h': fputs(help, stdout); return 0;
		default:
			return tpc_cli_bad_option(cmd, argv[optind - 1], lo);
		}
	}
	int nargs = argc - optind;
	if ((*list ? 1 : 0) + (*check ? 1 : 0) + (nargs ? 1 : 0) != 1 || nargs > 1)
		return tpc_cli_usage(cmd, "give one of --list, NAME or --check FILE");
	if (nargs)
		*name = argv[optind];
	return -1;
}

void tpc_cli_bar(FILE *f, uint64_t value, uint64_t max, int width)
{
	tpc_buf b = TPC_BUF_INIT;
	tpc_buf_bar(&b, value, max, width, isatty(fileno(f)));
	if (b.p)
		fputs(b.p, f);
	tpc_buf_release(&b);
}

int tpc_cli_writer(const char *cmd, const char *out, const char *fmt_name, bool max_size, tpc_write_opts *wo,
		   const tpc_format **outf, bool *sharded)
{
	const tpc_format *inner = NULL;
	*outf = NULL;
	*sharded = out && (max_size || (!fmt_name && tpc_cli_folder_output(out)) || tpc_is_dir(out) ||
			   tpc_ends_with(out, "/"));
	if (fmt_name) {
		inner = tpc_format_by_name(fmt_name);
		bool models = strcmp(cmd, "convert") != 0; /* merge, shard: a model's formats only */
		if (inner && inner->write && models && inner->optimizer_only)
			return tpc_cli_usage(cmd, "--format %s holds an optimizer's state only, not a model (tpconv convert SRC --format %s)",
					     inner->name, inner->name);
		if (!inner || !inner->write || inner->index) {
			char list[256];
			size_t k = 0, m = 0;
			list[0] = '\0';
			for (size_t i = 0; i < tpc_format_count() && k < sizeof(list); i++) {
				const tpc_format *f = tpc_format_at(i);
				if (f->write && !f->index && !(models && f->optimizer_only))
					k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%s", m++ ? ", " : "", f->name);
			}
			return tpc_cli_usage(cmd, "unknown --format '%s' (%s)", fmt_name, list);
		}
	}
	const tpc_format *named = inner ? inner : out ? tpc_format_for_output(out) : NULL;
	if (named && named->self_split && !tpc_is_dir(out) && !tpc_ends_with(out, "/")) {
		/* a set of whole files it names itself (gguf-split) */
		*outf = named;
		*sharded = false;
	} else if (inner && inner->sharded) {
		/* a folder format of its own (dcp): it lays out its files */
		if (max_size)
			return tpc_cli_usage(cmd, "--max-shard-size does not go with --format %s", inner->name);
		*outf = inner;
		*sharded = false;
	} else if (*sharded) {
		*outf = tpc_format_index();
		if (!inner) {
			const tpc_format *byname = tpc_format_for_output(out);
			inner = byname ? byname : tpc_format_by_name("safetensors");
		}
		wo->inner_format = inner ? inner->name : NULL;
	} else if (out) {
		*outf = inner ? inner : tpc_format_for_output(out);
		if (!*outf)
			return tpc_cli_usage(cmd,
					     "cannot tell the output format from '%s'; name it %s, or without a suffix for an HF folder, or give --format (%s)",
					     out, tpc_cli_out_names(), tpc_cli_out_formats());
	}
	if (out && (!*outf || (*sharded && !inner)))
		return tpc_cli_usage(cmd, "output format is not available in this build");
	return 0;
}

bool tpc_cli_folder_output(const char *out)
{
	size_t n = strlen(out);
	if (!n)
		return false;
	if (out[n - 1] == '/' || tpc_is_dir(out))
		return true;
	if (tpc_exists(out))
		return false; /* an existing file is never turned into a folder */
	/* a file suffix is a short word after the last dot of the last component
	 * ("model.gguf"); "merged", "llama-3.1-merged" and "v1.5" have none */
	const char *base = strrchr(out, '/');
	base = base ? base + 1 : out;
	const char *dot = strrchr(base, '.');
	if (!dot || dot == base)
		return true;
	size_t len = strlen(dot + 1);
	bool letter = false;
	for (const char *c = dot + 1; *c; c++) {
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
			return true;
		letter |= (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z');
	}
	return !(len >= 1 && len <= 12 && letter);
}

bool tpc_cli_progress_wanted(bool forced)
{
	if (tpc_cli_verbose < 0)
		return false;
	return forced || isatty(STDERR_FILENO);
}

tpc_cli_mpi tpc_cli_job = {false, false, 0, 1};

/* merge and convert under mpirun: every process runs the command and the
 * write divides the output among them (tpc_cli_mpi_write) */
static int run_as_job(int (*fn)(int, char **), const char *name, int argc, char **argv)
{
	int ret = tpc_cli_mpi_start(&tpc_cli_job, name);
	if (ret)
		return ret;
	ret = fn(argc, argv);
	tpc_cli_mpi_end(&tpc_cli_job, ret);
	return ret;
}

/* The library's I/O settings from the TPCONV_* switches (lib/tpc_io.h says
 * what each does): the only place the environment reaches the library. */
static void io_config_from_env(void)
{
	tpc_io_config c;
	tpc_io_config_defaults(&c);
	const char *s;
	if ((s = getenv("TPCONV_DIRECT")) && (!strcmp(s, "0") || !strcmp(s, "1")))
		c.direct = s[0] - '0';
	c.direct_async = !((s = getenv("TPCONV_DIRECT_ASYNC")) && !strcmp(s, "0"));
	c.direct_stage = !((s = getenv("TPCONV_DIRECT_STAGE")) && !strcmp(s, "0"));
	c.write_behind = !((s = getenv("TPCONV_WRITE_BEHIND")) && !strcmp(s, "0"));
	c.joint = !((s = getenv("TPCONV_JOINT")) && !strcmp(s, "0"));
	c.rss_guard = !getenv("TPCONV_NO_RSS_GUARD");
	if ((s = getenv("TPCONV_INFLATE_CAP"))) {
		uint64_t v;
		tpc_err e;
		tpc_err_init(&e);
		if (!tpc_parse_size(s, &v, &e))
			c.inflate_cap = v;
	}
	tpc_io_configure(&c);
}

/* After SIGINT/SIGTERM/SIGHUP: what the run leaves (async-signal-safe). The
 * signal then ends the process, so the shell sees 128 + its number. */
static void interrupted(int sig)
{
	static const char msg[] =
		"tpconv: interrupted: temporary files removed, every finished file kept; the same command again "
		"(without --force) resumes a shard set or an HF folder from them\n";
	(void)sig;
	if (tpc_cli_verbose >= 0 && write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		return;
}

/*
 * verify, and convert / shard --lora: OpenMP threads that wait sleep
 * (OMP_WAIT_POLICY=passive) unless the environment says otherwise. A LoRA
 * merge runs a parallel region per few MB between the writer's waits: with
 * threads spinning after each, a 4.7 GB merge took 9.2 s of CPU time on 2
 * busy cores, 3.7 s without (the same bits). For verify: its ranks and rank 0's reference share the
 * cores in turns, and libgomp's default spins a waiting thread for a while
 * after every parallel region: on 2 cores, a third of verify's CPU time went
 * to that spinning, taken from the ranks. libgomp reads the variable when it
 * loads, before main, so the run starts once more with it set; without
 * /proc it goes on as it is. convert --outtype q4_k_m (any GGUF type but
 * the plain f32 / f16 / bf16): the block math runs a parallel region per
 * 4 MB window between single-threaded reads and writes, and the threads
 * spinning through those took a third of the CPU time of a 436 MB model's
 * q4_k_m (1.52 s; 0.99 s passive, the same bytes).
 */
static bool quant_outtype(const char *t)
{
	return strcmp(t, "f32") && strcmp(t, "f16") && strcmp(t, "bf16") && strcmp(t, "auto");
}

static void omp_passive(int argc, char **argv)
{
	bool want = argc >= 2 && !strcmp(argv[1], "verify");
	for (int i = 2; !want && i < argc && strcmp(argv[i], "--"); i++) {
		want = (!strcmp(argv[1], "convert") || !strcmp(argv[1], "shard")) &&
		       (!strcmp(argv[i], "--lora") || !strncmp(argv[i], "--lora=", 7));
		want = want || (!strcmp(argv[1], "convert") &&
				((!strcmp(argv[i], "--outtype") && i + 1 < argc && quant_outtype(argv[i + 1])) ||
				 (!strncmp(argv[i], "--outtype=", 10) && quant_outtype(argv[i] + 10))));
	}
	if (!want || getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
		return;
	if (setenv("OMP_WAIT_POLICY", "passive", 0))
		return;
	execv("/proc/self/exe", argv);
	unsetenv("OMP_WAIT_POLICY");
}

/* Inputs stay open while they are read (mapped, and their descriptors for
 * in-kernel copies): a DeepSpeed universal checkpoint is some four files per
 * parameter, thousands for a large model, past the usual soft limit of 1024
 * descriptors. Take what the hard limit allows. */
static void more_files(void)
{
	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	more_files();
	omp_passive(argc, argv);
	io_config_from_env();
	tpc_formats_register_all();
	tpc_io_on_interrupt(interrupted);
	tpc_io_install_signals();
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("tpconv %s\n", TPC_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "__complete")) /* for doc/tpconv.bash; not listed */
		return tpc_cli_complete(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			if (cmds[i].job)
				return run_as_job(cmds[i].fn, cmds[i].name, argc - 1, argv + 1);
			return cmds[i].fn(argc - 1, argv + 1);
		}
	char hint[96];
	tpc_did_you_mean(argv[1], cmd_name, NULL, hint, sizeof(hint));
	fprintf(stderr, "tpconv: error: unknown command '%s' (%ssee 'tpconv --help')\n", argv[1], hint);
	return 2;
}
