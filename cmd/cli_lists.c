/*
 * cli_lists.c - the registries in words: the output formats that convert's
 * and merge's --help list and the messages name, and the values of `tpconv
 * __complete OPTION`, which the bash completion (doc/tpconv.bash) offers.
 *
 * The formats and layouts are read from their registries, so a format added
 * there appears in the help, the man page (doc/mkman.py reads the help), the
 * messages and the completion without a word written here. The option values
 * that have no registry are one table below; tests/cli_test.sh checks each
 * value against the help line of its option.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tpc_buf.h"
#include "tpc_family.h"
#include "tpc_layout.h"

/* A format convert and merge can write as named (not the index over files
 * of another format: that is the folder output). */
static bool writable(const tpc_format *f)
{
	return f->write && !f->index;
}

/* One merge writes: a model, not an optimizer's state alone */
static bool model_writable(const tpc_format *f)
{
	return writable(f) && !f->optimizer_only;
}

static bool rank_file(const tpc_format *f)
{
	return f->rank_file;
}

/* "a, b or c": the names of the formats `pick` keeps, into list[n] */
static const char *format_names(bool (*pick)(const tpc_format *), char *list, size_t n)
{
	size_t want = 0, k = 0, m = 0;
	for (size_t i = 0; i < tpc_format_count(); i++)
		want += pick(tpc_format_at(i));
	list[0] = '\0';
	for (size_t i = 0; i < tpc_format_count() && k < n; i++) {
		const tpc_format *f = tpc_format_at(i);
		if (!pick(f))
			continue;
		m++;
		k += (size_t)snprintf(list + k, n - k, "%s%s", m == 1 ? "" : m == want ? " or " : ", ", f->name);
	}
	return list;
}

const char *tpc_cli_out_formats(void)
{
	static char list[256];
	return format_names(writable, list, sizeof(list));
}

const char *tpc_cli_model_formats(void)
{
	static char list[256];
	return format_names(model_writable, list, sizeof(list));
}

const char *tpc_cli_rank_formats(void)
{
	static char list[256];
	return format_names(rank_file, list, sizeof(list));
}

const char *tpc_cli_out_names(void)
{
	static char list[256];
	size_t n = 0, k = 0, m = 0;
	for (size_t i = 0; i < tpc_format_count(); i++)
		for (const char *const *x = tpc_format_at(i)->exts; writable(tpc_format_at(i)) && x && *x; x++)
			n++;
	list[0] = '\0';
	for (size_t i = 0; i < tpc_format_count() && k < sizeof(list); i++) {
		const tpc_format *f = tpc_format_at(i);
		for (const char *const *x = f->exts; writable(f) && x && *x && k < sizeof(list); x++) {
			m++;
			k += (size_t)snprintf(list + k, sizeof(list) - k, "%s*%s", m == 1 ? "" : m == n ? " or " : ", ",
					      *x);
		}
	}
	return list;
}

/* `text` after `indent` spaces, wrapped to 79 columns (breaks at spaces). */
static void wrapped(tpc_buf *b, const char *text, size_t indent, size_t col)
{
	const char *p = text;
	while (*p) {
		size_t len = strcspn(p, " ");
		if (col > indent && col + 1 + len > 79) {
			tpc_buf_addc(b, '\n');
			tpc_buf_addn(b, ' ', indent);
			col = indent;
		} else if (col > indent) {
			tpc_buf_addc(b, ' ');
			col++;
		}
		tpc_buf_add(b, p, len);
		col += len;
		p += len;
		while (*p == ' ')
			p++;
	}
	tpc_buf_addc(b, '\n');
}

char *tpc_cli_out_formats_help(bool models)
{
	tpc_buf b = TPC_BUF_INIT;
	const tpc_format *ix = tpc_format_index();
	tpc_buf_adds(&b, "Output formats (--format NAME, else OUT's name):\n");
	for (size_t i = 0; i < tpc_format_count(); i++) {
		const tpc_format *fm = tpc_format_at(i);
		tpc_buf t = TPC_BUF_INIT;
		if (!(models ? model_writable(fm) : writable(fm)))
			continue;
		tpc_buf_addf(&t, "%s;", fm->desc);
		for (const char *const *x = fm->exts; x && *x; x++)
			tpc_buf_addf(&t, " *%s", *x);
		if (!fm->exts || !*fm->exts)
			tpc_buf_addf(&t, " with --format %s", fm->name);
		tpc_buf_addf(&b, "  %-13s", fm->name);
		wrapped(&b, t.p ? t.p : "", 15, 15);
		tpc_buf_release(&t);
	}
	if (ix) {
		tpc_buf t = TPC_BUF_INIT;
		tpc_buf_addf(&t, "%s; when OUT is a folder, ends in '/', has no file suffix, or with "
				 "--max-shard-size; its shards in the format --format or OUT's suffix names (else "
				 "safetensors)",
			     ix->desc);
		tpc_buf_adds(&b, "  folder       ");
		wrapped(&b, t.p ? t.p : "", 15, 15);
		tpc_buf_release(&t);
	}
	if (b.oom) {
		tpc_buf_release(&b);
		return NULL;
	}
	return b.p;
}

/* Values of options that no registry lists (each also in its --help line). */
static const struct {
	const char *opt;
	const char *values;
} fixed[] = {
	{"--outtype", "f32 f16 bf16 q8_0 auto q4_0 q4_1 q5_0 q5_1 q2_k q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m q6_k iq4_nl iq4_xs tq1_0 tq2_0 q3_k q4_k q5_k"},
	{"--checks", "structure layers blocks model"},
	{"--dtype", "bf16 f16 f32 f64"},
	{"--checksum", "xxh3-128 sha256 none"},
	{"--device", "cpu cuda"},
};

int tpc_cli_complete(int argc, char **argv)
{
	const char *opt = argc > 1 ? argv[1] : "";
	if (!strcmp(opt, "--options")) {
		for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
			printf("%s\n", fixed[i].opt);
		printf("--format\n--layout\n--arch\n");
		return 0;
	}
	if (!strcmp(opt, "--arch")) {
		/* the records that describe their layers, as verify's --arch takes them */
		for (size_t i = 0; i < tpc_family_count(); i++)
			if (tpc_family_at(i)->has_parts)
				printf("%s\n", tpc_family_at(i)->name);
		printf("none\n");
		return 0;
	}
	if (!strcmp(opt, "--format")) {
		for (size_t i = 0; i < tpc_format_count(); i++)
			if (writable(tpc_format_at(i)))
				printf("%s\n", tpc_format_at(i)->name);
		return 0;
	}
	if (!strcmp(opt, "--layout")) {
		for (size_t i = 0; i < tpc_layout_count(); i++)
			printf("%s\n", tpc_layout_at(i)->name);
		return 0;
	}
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (!strcmp(opt, fixed[i].opt)) {
			for (const char *p = fixed[i].values; *p;) {
				size_t len = strcspn(p, " ");
				printf("%.*s\n", (int)len, p);
				p += len + (p[len] == ' ');
			}
			return 0;
		}
	return 2; /* nothing to offer: the shell completes file names */
}
