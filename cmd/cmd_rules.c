/*
 * cmd_rules.c - `tpconv rules --list | NAME | --check FILE`, and the remap
 * options that convert (and shard) share: --rules, the shorthands, and
 * --expect-keys (see cli.h, tpc_cli_remap).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_buf.h"
#include "tpc_extras.h"
#include "tpc_family.h"
#include "tpc_io.h"
#include "tpc_rules.h"
#include "tpc_util.h"

const char tpc_cli_remap_help[] =
	"Rename / remap (applied in the order given, between reading and writing):\n"
	"  --rules FILE|PRESET      a rules file (JSON) or a preset; repeatable\n"
	"                           ('tpconv rules --list' lists the presets)\n"
	"  --rename 'RE=REPL'       replace every match of RE (POSIX ERE; \\1..\\9 groups);\n"
	"                           the first '=' not written '\\=' separates the two\n"
	"  --when RE                the next rule applies only to names matching RE\n"
	"  --drop RE                drop the tensors whose name matches RE\n"
	"  --keep RE                drop the tensors whose name does not match RE\n"
	"  --strip-prefix P         remove the prefix P (e.g. 'module.') where present\n"
	"  --add-prefix P           prepend P to every name\n"
	"  --transpose RE           transpose the 2-D tensors matching RE ([in,out] -> [out,in])\n"
	"  --dtype DT               cast every floating tensor to DT (bf16, f16, f32, f64);\n"
	"  --dtype 'RE=DT'          or those matching RE (a later --dtype wins); integer and\n"
	"                           bool tensors are never cast (a rules file can ask)\n"
	"  --expect-keys FILE       the result must have exactly these names, as\n"
	"                           load_state_dict(strict=True): FILE is one key per line,\n"
	"                           a JSON list, or a checkpoint; missing and unexpected keys\n"
	"                           are listed and the exit status is 1\n";

const char tpc_cli_remap_fact_help[] =
	"Model facts for unfuse rules (sizes such as heads/kv_heads*head_dim, as in the\n"
	"megatron-llama and megatron-gpt presets). A flag wins; then a Megatron checkpoint's\n"
	"own args (heads, query groups, kv_channels, hidden); then --config, which must\n"
	"agree with the args:\n"
	"  --config FILE            a Hugging Face config.json (default: IN/config.json)\n"
	"  --heads N, --kv-heads N, --head-dim N, --hidden N\n"
	"  --vocab N                the tokenizer's vocabulary (Megatron pads it)\n";

void tpc_cli_remap_init(tpc_cli_remap *r)
{
	memset(r, 0, sizeof(*r));
}

void tpc_cli_remap_release(tpc_cli_remap *r)
{
	tpc_rules_free(r->rules);
	memset(r, 0, sizeof(*r));
}

int tpc_cli_with_remap(int argc, char **argv, int (*body)(int argc, char **argv, tpc_cli_remap *rm))
{
	tpc_cli_remap rm;
	tpc_cli_remap_init(&rm);
	int ret = body(argc, argv, &rm);
	tpc_cli_remap_release(&rm);
	return ret;
}

static const char *opt_name(int code)
{
	switch (code) {
	case TPC_OPT_RULES: return "--rules";
	case TPC_OPT_RENAME: return "--rename";
	case TPC_OPT_WHEN: return "--when";
	case TPC_OPT_DROP: return "--drop";
	case TPC_OPT_KEEP: return "--keep";
	case TPC_OPT_STRIP_PREFIX: return "--strip-prefix";
	case TPC_OPT_ADD_PREFIX: return "--add-prefix";
	case TPC_OPT_TRANSPOSE: return "--transpose";
	case TPC_OPT_DTYPE: return "--dtype";
	case TPC_OPT_EXPECT_KEYS: return "--expect-keys";
	case TPC_OPT_FACT_CONFIG: return "--config";
	case TPC_OPT_FACT_HEADS: return "--heads";
	case TPC_OPT_FACT_KV_HEADS: return "--kv-heads";
	case TPC_OPT_FACT_HEAD_DIM: return "--head-dim";
	case TPC_OPT_FACT_HIDDEN: return "--hidden";
	case TPC_OPT_FACT_VOCAB: return "--vocab";
	}
	return "?";
}

/* Split "RE=REPL" at the first '=' not preceded by a backslash; "\=" in RE
 * becomes "=". Returns malloc'd pattern, *repl points into arg. */
static char *split_rename(const char *arg, const char **repl)
{
	tpc_buf b = TPC_BUF_INIT;
	const char *p = arg;
	for (; *p; p++) {
		if (p[0] == '\\' && p[1] == '=') {
			tpc_buf_addc(&b, '=');
			p++;
			continue;
		}
		if (p[0] == '\\' && p[1]) {
			tpc_buf_add(&b, p, 2);
			p++;
			continue;
		}
		if (*p == '=')
			break;
		tpc_buf_addc(&b, *p);
	}
	if (!*p) {
		tpc_buf_release(&b);
		return NULL;
	}
	*repl = p + 1;
	tpc_buf_addc(&b, '\0');
	return tpc_buf_detach(&b, NULL);
}

int tpc_cli_remap_opt(tpc_cli_remap *r, const char *cmd, int code, const char *arg)
{
	tpc_rule_spec s;
	tpc_err e;
	char origin[600], *pat = NULL;
	int ret = 0;
	if (code < TPC_OPT_RULES || code >= TPC_OPT_REMAP_END)
		return -1;
	if (code == TPC_OPT_EXPECT_KEYS) {
		r->expect_keys = arg;
		return 0;
	}
	if (code == TPC_OPT_FACT_CONFIG) {
		r->config = arg;
		return 0;
	}
	if (code >= TPC_OPT_FACT_HEADS && code <= TPC_OPT_FACT_VOCAB) {
		int64_t *f = code == TPC_OPT_FACT_HEADS ? &r->facts.heads : code == TPC_OPT_FACT_KV_HEADS ? &r->facts.kv_heads :
			     code == TPC_OPT_FACT_HEAD_DIM ? &r->facts.head_dim : code == TPC_OPT_FACT_HIDDEN ? &r->facts.hidden :
			     &r->facts.vocab;
		return tpc_cli_count(cmd, opt_name(code), arg, INT64_C(1) << 40, f);
	}
	if (code == TPC_OPT_WHEN) {
		if (r->when)
			return tpc_cli_usage(cmd, "--when '%s' follows --when '%s'; give one condition per rule",
					     arg, r->when);
		r->when = arg;
		return 0;
	}
	tpc_err_init(&e);
	if (!r->rules && !(r->rules = tpc_rules_new())) {
		tpc_err_nomem(&e);
		return tpc_cli_fail(&e);
	}
	if (code == TPC_OPT_RULES) {
		if (r->when)
			return tpc_cli_usage(cmd, "--when '%s' must be followed by a rule shorthand, not --rules",
					     r->when);
		if (tpc_rules_load(r->rules, arg, &e))
			return tpc_cli_fail(&e);
		return 0;
	}
	memset(&s, 0, sizeof(s));
	snprintf(origin, sizeof(origin), "%s '%s'", opt_name(code), arg);
	s.arg = arg;
	s.when = r->when;
	switch (code) {
	case TPC_OPT_RENAME:
		s.kind = TPC_RULE_RENAME;
		pat = split_rename(arg, &s.to);
		if (!pat)
			return tpc_cli_usage(cmd, "--rename '%s': expected 'REGEX=REPLACEMENT'", arg);
		s.arg = pat;
		break;
	case TPC_OPT_DROP: s.kind = TPC_RULE_DROP; break;
	case TPC_OPT_KEEP: s.kind = TPC_RULE_KEEP; break;
	case TPC_OPT_STRIP_PREFIX: s.kind = TPC_RULE_STRIP_PREFIX; break;
	case TPC_OPT_ADD_PREFIX: s.kind = TPC_RULE_ADD_PREFIX; break;
	case TPC_OPT_TRANSPOSE: s.kind = TPC_RULE_TRANSPOSE; break;
	case TPC_OPT_DTYPE: {
		const char *eq = strrchr(arg, '=');
		const char *dt = eq ? eq + 1 : arg;
		s.kind = TPC_RULE_DTYPE;
		s.arg = NULL;
		s.dtype = tpc_dtype_parse(dt);
		if (s.dtype != TPC_BF16 && s.dtype != TPC_F16 && s.dtype != TPC_F32 && s.dtype != TPC_F64)
			return tpc_cli_usage(cmd, "--dtype '%s': unknown dtype '%s' (bf16, f16, f32 or f64)", arg, dt);
		if (eq) {
			if (r->when)
				return tpc_cli_usage(cmd, "--dtype '%s' has a pattern; --when '%s' would be a second one",
						     arg, r->when);
			pat = tpc_strndup(arg, (size_t)(eq - arg));
			if (!pat) {
				tpc_err_nomem(&e);
				return tpc_cli_fail(&e);
			}
			s.match = pat;
		}
		break;
	}
	}
	r->when = NULL;
	if (tpc_rules_add(r->rules, &s, origin, &e))
		ret = tpc_cli_fail(&e);
	free(pat);
	return ret;
}

/*
 * The facts the rules' unfuse sizes name: flags, then what a Megatron
 * checkpoint says about itself (its args), then a config.json; the
 * checkpoint and the config must not disagree on a fact the rules use.
 */
static int remap_facts(tpc_cli_remap *r, const tpc_ckpt *ck, tpc_err *e)
{
	unsigned used = tpc_rules_facts_used(r->rules);
	tpc_megatron_args a;
	tpc_model_facts cfg;
	char *auto_cfg = NULL, from[600];
	const char *config = r->config;
	bool have_args;
	int ret = 0;
	if (!used)
		return 0;
	const int64_t flag[TPC_NFACTS] = {r->facts.heads, r->facts.kv_heads, r->facts.head_dim, r->facts.hidden,
					  r->facts.vocab};
	static const char *const flag_name[TPC_NFACTS] = {"--heads", "--kv-heads", "--head-dim", "--hidden", "--vocab"};
	for (int f = 0; f < TPC_NFACTS && !ret; f++)
		if (flag[f])
			ret = tpc_rules_set_fact(r->rules, f, flag[f], flag_name[f], e);
	have_args = tpc_extras_megatron_args(ck->root, &a) || (r->in && tpc_extras_megatron_args_at(r->in, &a));
	/* one rank's slices: the facts of the whole model do not tile them */
	char what[128], how[TPC_ERR_PATH_MAX + 128];
	if (!ret && ck->n &&
	    tpc_cli_megatron_rank(r->in, have_args ? &a : NULL, what, sizeof(what), how, sizeof(how))) {
		return tpc_err_at(e, TPC_EUSAGE, r->in, NULL, "%s, whose tensors are that rank's slices: the rules need the whole model; "
					   "merge the set, then convert OUT: %s", what, how);
	}
	const int64_t mg[TPC_NFACTS] = {a.heads, a.query_groups, a.kv_channels, a.hidden, 0};
	memset(&cfg, 0, sizeof(cfg));
	if (!config && r->in) {
		char *d = tpc_extras_source_dir(r->in);
		if (d && (auto_cfg = tpc_path_join(d, "config.json")) && tpc_exists(auto_cfg))
			config = auto_cfg;
		free(d);
	}
	if (!ret && config && !(ret = tpc_facts_from_file(&cfg, config, e)))
		tpc_facts_finish(&cfg);
	const int64_t cf[TPC_NFACTS] = {cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.hidden, cfg.vocab};
	for (int f = 0; f < TPC_NFACTS && !ret; f++) {
		if (!(used & (1u << f)) || flag[f])
			continue;
		if (have_args && mg[f] && cf[f] && mg[f] != cf[f]) {
			ret = tpc_err_set(e, TPC_EINPUT,
					  "the checkpoint's Megatron args say %s %lld, '%s' says %lld; give --%s to say which is right",
					  tpc_rules_fact_name(f), (long long)mg[f], config, (long long)cf[f], flag_name[f] + 2);
			break;
		}
		if (have_args && mg[f]) {
			snprintf(from, sizeof(from), "the checkpoint's Megatron args");
			ret = tpc_rules_set_fact(r->rules, f, mg[f], from, e);
		} else if (cf[f]) {
			snprintf(from, sizeof(from), "'%s'", config);
			ret = tpc_rules_set_fact(r->rules, f, cf[f], from, e);
		}
	}
	for (int f = 0; f < TPC_NFACTS && !ret; f++) {
		const char *src;
		int64_t v = tpc_rules_get_fact(r->rules, f, &src);
		if ((used & (1u << f)) && v)
			tpc_cli_info("model fact %s = %lld (%s)", tpc_rules_fact_name(f), (long long)v, src);
	}
	free(auto_cfg);
	return ret;
}

/* A cast to f16 or bf16 leaves in f32 what transformers keeps there when it
 * loads the model in that dtype (the family's record: routers, correction
 * biases), so the model loads as the cast original does. */
static void keep_f32(const tpc_cli_remap *r, tpc_ckpt *ck)
{
	bool narrowed = false;
	for (size_t i = 0; i < ck->n && !narrowed; i++)
		narrowed = ck->t[i].dtype != ck->t[i].src_dtype &&
			   (ck->t[i].dtype == TPC_BF16 || ck->t[i].dtype == TPC_F16);
	if (!narrowed)
		return;
	char *cfg = r->config ? tpc_strdup(r->config) : NULL, *d = NULL;
	if (!cfg && r->in && (d = tpc_extras_source_dir(r->in)))
		cfg = tpc_path_join(d, "config.json");
	const tpc_family *f = cfg && tpc_exists(cfg) ? tpc_cli_config_family(cfg) : NULL;
	size_t n = tpc_family_keep_f32(f, ck);
	if (n)
		tpc_cli_info("%zu tensor%s left in f32, as transformers keeps %s when it loads a %s model in a narrower dtype",
			     n, n == 1 ? "" : "s", n == 1 ? "it" : "them", f->name);
	free(cfg);
	free(d);
}

int tpc_cli_remap_run(tpc_cli_remap *r, const char *cmd, tpc_ckpt *ck)
{
	tpc_remap m;
	tpc_keys keys = {NULL, 0, 0};
	tpc_buf b = TPC_BUF_INIT;
	tpc_err e;
	char d[1024];
	int ret = 0;
	tpc_remap_init(&m);
	tpc_err_init(&e);
	if (r->when)
		return tpc_cli_usage(cmd, "--when '%s' is not followed by a rule", r->when);
	if (!r->rules && !r->expect_keys && !r->dry_run)
		return 0;
	if (!r->rules && !(r->rules = tpc_rules_new())) {
		tpc_err_nomem(&e);
		return tpc_cli_fail(&e);
	}
	if (r->expect_keys && tpc_keys_load(&keys, r->expect_keys, &e)) {
		ret = tpc_cli_fail(&e);
		goto out;
	}
	if (remap_facts(r, ck, &e) || tpc_rules_plan(r->rules, ck, &m, &e)) {
		ret = tpc_cli_fail(&e);
		goto out;
	}
	for (size_t i = 0; i < tpc_rules_count(r->rules); i++) {
		if (!tpc_remap_unmatched(r->rules, &m, i))
			continue;
		tpc_rules_describe(r->rules, i, d, sizeof(d));
		if (r->strict) {
			tpc_err_set(&e, TPC_EUSAGE, "rule %s matched no tensor (--strict)", d);
			ret = tpc_cli_fail(&e);
			goto out;
		}
		tpc_cli_warn("rule %s matched no tensor", d);
	}
	if (r->dry_run) {
		tpc_remap_table(ck, &m, r->rules, &b);
		if (b.oom) {
			tpc_err_nomem(&e);
			ret = tpc_cli_fail(&e);
			goto out;
		}
		fwrite(b.p, 1, b.len, stdout);
		fflush(stdout);
		tpc_buf_reset(&b);
	}
	if (r->expect_keys && tpc_keys_check(m.name, m.n, &keys, &b, &e)) {
		char msg[1200];
		tpc_err_format(&e, msg, sizeof(msg));
		fprintf(stderr, "tpconv: error: the result does not match the keys of '%s': %s\n", r->expect_keys, msg);
		if (b.p)
			fwrite(b.p, 1, b.len, stderr);
		ret = tpc_status_exit(e.code);
		goto out;
	}
	if (!r->dry_run && tpc_remap_apply(ck, &m, &e)) {
		ret = tpc_cli_fail(&e);
		goto out;
	}
	if (!r->dry_run)
		keep_f32(r, ck);
	if (r->expect_keys)
		tpc_cli_info("the result has the %zu keys of '%s'", keys.n, r->expect_keys);
out:
	tpc_buf_release(&b);
	tpc_keys_release(&keys);
	tpc_remap_release(&m);
	return ret;
}

static const char *help =
	"usage: tpconv rules --list\n"
	"       tpconv rules NAME\n"
	"       tpconv rules --check FILE\n\n"
	"Show the built-in rename/remap presets and check rules files. 'tpconv rules NAME'\n"
	"prints a preset as JSON, the format --rules FILE takes; a file can start from\n"
	"a preset with \"extends\". A rules file is {\"extends\": \"PRESET\", \"rules\": [...]}\n"
	"or just the list; each rule has one action:\n"
	"  {\"select\": \"P\"}                  keep names under 'P.', without that prefix\n"
	"  {\"drop\": \"RE\"}, {\"keep\": \"RE\"}     by regular expression (searched in the name)\n"
	"  {\"rename\": \"RE\", \"to\": \"REPL\"}    every match; \\1..\\9 groups, \\0 the match\n"
	"  {\"strip_prefix\": \"S\"}, {\"add_prefix\": \"S\"}\n"
	"  {\"transpose\": \"RE\"}               2-D tensors: [in, out] -> [out, in]\n"
	"  {\"dtype\": \"bf16\"}                 cast floating tensors (bf16 f16 f32 f64)\n"
	"  {\"unfuse\": \"RE\", \"groups\": \"kv_heads\", \"dim\": 0,\n"
	"   \"parts\": [{\"to\": \"REPL\", \"size\": \"heads/kv_heads*head_dim\"}, ...]}\n"
	"                                   take a fused tensor apart: along dim it is\n"
	"                                   `groups` repetitions of the parts; each part\n"
	"                                   with a \"to\" becomes a tensor (views); with one\n"
	"                                   \"to\" on the rule, one tensor, part by part.\n"
	"                                   Sizes: numbers, the facts heads kv_heads\n"
	"                                   head_dim hidden vocab, * and /; \"rest\"\n"
	"and optional modifiers: \"when\" / \"unless\" (a condition on the name), \"match\"\n"
	"(the same as when), \"optional\": true (no warning when it matches nothing),\n"
	"\"ints\": true (a dtype rule also casts integer and bool tensors). Patterns are\n"
	"POSIX extended regular expressions plus \\d; there is no lookaround and no lazy\n"
	"quantifier, and a backslash inside [...] is literal.\n\n"
	"Options:\n"
	"  --list          list the presets with a line each (-v: and the plans, --preset,\n"
	"                  whose names each brings a model to)\n"
	"  --check FILE    parse a rules file and list the rules it expands to\n"
	"  -q, --quiet     errors only\n"
	"  -v, --verbose   say more\n"
	"  -h, --help      this help\n\n" TPC_EXIT_HELP;

/* -v: the plans (family records) whose models a preset brings to their names */
static void list_families(const char *preset)
{
	const char *sep = "";
	for (size_t f = 0; f < tpc_family_count(); f++) {
		if (!tpc_family_lists(tpc_family_at(f)->rules, preset))
			continue;
		printf("%s%s", *sep ? sep : "                for --preset ", tpc_family_at(f)->name);
		sep = ", ";
	}
	if (*sep)
		putchar('\n');
}

int cmd_rules(int argc, char **argv)
{
	bool list;
	const char *check, *name;
	tpc_err e;
	int st = tpc_cli_catalog_args("rules", help, argc, argv, &list, &check, &name);
	if (st >= 0)
		return st;
	tpc_err_init(&e);
	if (list) {
		for (size_t i = 0; i < tpc_rules_preset_count(); i++) {
			printf("%-15s %s\n", tpc_rules_preset_name(i), tpc_rules_preset_desc(i));
			if (tpc_cli_verbose > 0)
				list_families(tpc_rules_preset_name(i));
		}
		return 0;
	}
	if (check) {
		tpc_rules *r = tpc_rules_new();
		char d[1024];
		if (!r) {
			tpc_err_nomem(&e);
			return tpc_cli_fail(&e);
		}
		if (tpc_rules_from_file(r, check, &e)) {
			tpc_rules_free(r);
			return tpc_cli_fail(&e);
		}
		if (tpc_cli_verbose >= 0) {
			printf("%s: %zu rules\n", check, tpc_rules_count(r));
			for (size_t i = 0; i < tpc_rules_count(r); i++)
				printf("  %zu. %s\n", i + 1, tpc_rules_describe(r, i, d, sizeof(d)));
		}
		tpc_rules_free(r);
		return 0;
	}
	const char *text = tpc_rules_preset_text(name);
	if (!text) {
		tpc_rules *r = tpc_rules_new();
		if (!r)
			tpc_err_nomem(&e);
		else
			tpc_rules_add_preset(r, name, &e);
		tpc_rules_free(r);
		return tpc_cli_fail(&e);
	}
	fputs(text, stdout);
	return 0;
}
