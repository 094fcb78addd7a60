/* cli_input.c - one way to open what a command is given (cli.h,
 * tpc_cli_input_open): inspect, convert, shard, merge and diff classify the
 * path once (a set is merged on the fly, nothing copied), take the
 * plan from --preset/--plan or the set's manifest, and resolve the model facts
 * in one order: the flags, --config, a config.json beside the input file or
 * inside the folder or set, the manifest or the checkpoint's or set's own
 * record (Megatron's args), the plan's defaults; the shapes fill the rest
 * where the command asks and every fact is checked against them
 * (tpc_facts_from_shapes, tpc_facts_check). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_manifest.h"
#include "tpc_cfg.h"
#include "tpc_family.h"
#include "tpc_extras.h"
#include "tpc_io.h"
#include "tpc_layout.h"
#include "tpc_merge_optim.h"
#include "tpc_util.h"

void tpc_cli_input_init(tpc_cli_input *in)
{
	memset(in, 0, sizeof(*in));
	tpc_ckpt_init(&in->ck);
	tpc_plan_init(&in->plan);
}

void tpc_cli_input_release(tpc_cli_input *in)
{
	tpc_merge_optim_release(in->optim); /* before the merge whose sources it borrows */
	free(in->optim);
	if (in->have_mg)
		tpc_merge_release(&in->mg);
	tpc_ckpt_release(&in->ck);
	tpc_plan_release(&in->plan);
	free(in->hf_config);
	free(in->rank0);
	tpc_cli_input_init(in);
}

int tpc_cli_input_opt(tpc_cli_set *s, tpc_cli_remap *rm, const char *cmd, int code, const char *flag, const char *arg)
{
	if (rm && code >= TPC_OPT_RULES && code < TPC_OPT_REMAP_END)
		return tpc_cli_remap_opt(rm, cmd, code, arg);
	if (s && code >= TPC_OPT_TP && code < TPC_OPT_SET_END)
		return tpc_cli_set_opt(s, cmd, code, flag, arg);
	return -1;
}

static int flags_plan(tpc_cli_input *in, const char *preset, const tpc_cli_set *set, tpc_err *e)
{
	int ret;
	if (in->have_plan || (!preset && !set->plan_file))
		return 0;
	if ((ret = tpc_cli_load_plan(preset, set->plan_file, &in->plan, e)))
		return ret;
	in->have_plan = true;
	return 0;
}

char *tpc_cli_model_config(const char *path, const tpc_cli_set *set)
{
	if (set->config)
		return tpc_strdup(set->config);
	const tpc_layout *lay = NULL;
	char *dir = tpc_extras_source_dir(path), *cfg = dir ? tpc_path_join(dir, "config.json") : NULL;
	free(dir);
	if (cfg && tpc_exists(cfg))
		return cfg;
	free(cfg);
	cfg = NULL;
	/* a set that keeps the config in each rank's folder (hf) */
	char *r0 = tpc_set_detect(path, &lay) == TPC_SET_FOREIGN && lay && lay->foreign_rank_path
			   ? lay->foreign_rank_path(path, 0, 0, 1) : NULL;
	dir = r0 ? tpc_path_dir(r0) : NULL;
	cfg = dir ? tpc_path_join(dir, "config.json") : NULL;
	free(r0);
	free(dir);
	if (cfg && tpc_exists(cfg))
		return cfg;
	free(cfg);
	return NULL;
}

/* The architecture a config.json names: architectures[0], else the hf_arch
 * its model_type stands for, else model_type itself; "" if none. */
static void config_arch(const cJSON *c, char *arch, size_t n)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(c, "architectures");
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(c, "model_type");
	const char *name = NULL;
	arch[0] = 0;
	if (cJSON_IsArray(a) && cJSON_IsString(a->child))
		name = a->child->valuestring;
	else if (cJSON_IsString(mt) && !tpc_family_by_model_type(mt->valuestring, &name))
		name = mt->valuestring;
	if (name)
		snprintf(arch, n, "%s", name);
}

const tpc_family *tpc_cli_config_family(const char *cfg_path)
{
	char *text = NULL, arch[128];
	size_t len = 0;
	tpc_err e;
	tpc_err_init(&e);
	if (!cfg_path || tpc_read_file(cfg_path, 1u << 24, &text, &len, &e))
		return NULL;
	cJSON *c = cJSON_ParseWithLength(text, len);
	free(text);
	config_arch(c, arch, sizeof(arch));
	cJSON_Delete(c);
	return tpc_family_by_arch(arch);
}

int tpc_cli_text_model(const char *path, const tpc_cli_set *set, tpc_ckpt *ck)
{
	char *cfg = tpc_cli_model_config(path, set), *text = NULL, arch[128] = "", groups[256];
	size_t len = 0, nleft = 0;
	tpc_err e;
	tpc_err_init(&e);
	if (cfg && !tpc_read_file(cfg, 1u << 24, &text, &len, &e)) {
		cJSON *c = cJSON_ParseWithLength(text, len);
		config_arch(c, arch, sizeof(arch));
		cJSON_Delete(c);
	}
	free(text);
	free(cfg);
	const tpc_family *f = tpc_family_by_wrap(arch);
	if (!f)
		return 0;
	if (tpc_family_text_model(f, ck, &nleft, groups, sizeof(groups), &e))
		return tpc_cli_fail(&e);
	tpc_cli_warn("'%s' is a %s: its text model (%s) is read, as convert_hf_to_gguf.py reads it ('language_model.' taken out of the names); %zu tensor%s left out%s%s",
		     path, arch, f->name, nleft, nleft == 1 ? "" : "s", nleft ? ": " : "", nleft ? groups : "");
	return 0;
}

int tpc_cli_preset_for(const char *cmd, const tpc_cli_set *set, const char *cfg_path, const char *cfg_json,
		       const char **preset)
{
	char *text = NULL, arch[128], what[TPC_ERR_PATH_MAX + 16];
	size_t len = 0;
	tpc_err e;
	tpc_err_init(&e);
	*preset = set->preset;
	if (set->plan_file || (!cfg_path && !cfg_json))
		return 0;
	/* an unreadable config.json is the facts' to report */
	if (!cfg_json && tpc_read_file(cfg_path, 64u << 20, &text, &len, &e))
		return 0;
	cJSON *c = cJSON_Parse(cfg_json ? cfg_json : text);
	free(text);
	config_arch(c, arch, sizeof(arch));
	cJSON_Delete(c);
	if (!arch[0])
		return 0;
	if (cfg_path)
		snprintf(what, sizeof(what), "'%s'", cfg_path);
	else
		snprintf(what, sizeof(what), "the GGUF's metadata");
	const tpc_family *own = tpc_family_by_arch(arch), *pf = tpc_family_find(set->preset), *wrap = tpc_family_by_wrap(arch);
	/* a multimodal checkpoint: its tensors are not the text model's names
	 * (model.language_model.*) and its towers have no plan */
	if (wrap && !own) {
		char safe[128];
		tpc_sanitize(safe, sizeof(safe), arch);
		tpc_err_at(&e, TPC_EINPUT, cfg_path, NULL,
			   "architecture '%s' is a multimodal model (its text model is %s's): %s does not take it yet; its text model's GGUF is written by 'tpconv convert IN -o OUT.gguf'",
			   safe, wrap->name, cmd);
		return tpc_cli_fail(&e);
	}
	if (!set->preset) {
		if (own && own->plan) {
			*preset = own->name;
			tpc_cli_info("preset %s, from %s architecture %s", own->name, what, arch);
		}
		return 0;
	}
	if (!pf || set->preset_force || tpc_family_fits(pf, arch))
		return 0;
	char hint[96] = "";
	if (own && own->plan)
		snprintf(hint, sizeof(hint), "--preset %s, or ", own->name);
	return tpc_cli_usage(cmd, "--preset %s is for %s, but %s names %s: give %s--preset-force to split it with the %s plan anyway",
			     set->preset, pf->hf_arch && pf->hf_arch[0] ? pf->hf_arch[0] : "no architecture", what, arch, hint,
			     set->preset);
}

int tpc_cli_input_facts(const tpc_cli_input *in, const tpc_cli_set *set, tpc_model_facts *out, tpc_err *e)
{
	return tpc_cli_facts(&set->facts, set->config, in->path, in->have_mg ? &in->mg.facts : &in->own,
			     in->have_plan ? &in->plan : NULL, out, e);
}

const char *tpc_cli_set_companions(const tpc_merge *mg, const char *dir, tpc_extras_opts *xo)
{
	if (!mg->layout)
		return dir; /* a DCP folder: its config beside the items */
	return tpc_layout_merge_extras(mg->layout, dir, mg->nranks > 0 && mg->rank ? mg->rank[0].path : NULL, xo);
}

int tpc_cli_set_copy_companions(const tpc_merge *mg, const char *dir, const char *out, const tpc_write_opts *wo,
				size_t kept, size_t ndq)
{
	tpc_err e;
	tpc_err_init(&e);
	/* a resumed folder's companions (an interrupted run copied them) are refreshed */
	tpc_extras_opts xo = {.flags = ((wo->flags & TPC_W_FORCE) || kept) ? TPC_OUT_FORCE : 0};
	const char *from = tpc_cli_set_companions(mg, dir, &xo);
	/* dense now: loaders must not read it as quantized (beside what the
	 * layout drops, TensorRT-LLM's mapping) */
	const char *drop[16] = {NULL};
	size_t nd = 0;
	for (const char *const *d = xo.config_drop; d && *d && nd < 14; d++)
		drop[nd++] = *d;
	if (ndq) {
		drop[nd++] = "quantization_config";
		xo.config_drop = drop;
	}
	if (from && tpc_extras_copy(from, out, &xo, NULL, &e))
		return tpc_cli_fail(&e);
	/* a set that keeps no Hugging Face config (TensorRT-LLM): the layout rebuilds it */
	char *cfg = mg->layout && mg->layout->merge_config ? tpc_path_join(out, "config.json") : NULL, *text = NULL;
	int ret = 0;
	if (cfg && !tpc_exists(cfg)) {
		if (!(text = mg->layout->merge_config(dir, &e)) ||
		    tpc_write_file_atomic(cfg, text, strlen(text), xo.flags, &e))
			ret = tpc_cli_fail(&e);
	}
	free(text);
	free(cfg);
	return ret;
}

int tpc_cli_input_model_dir(const tpc_cli_input *in, const char *cmd, const tpc_format *f, tpc_write_opts *wo,
			    char **dir)
{
	*dir = NULL;
	if (!in->have_mg) {
		wo->model_dir = *dir = tpc_extras_source_dir(in->path);
		return 0;
	}
	tpc_extras_opts xo;
	memset(&xo, 0, sizeof(xo));
	const char *from = tpc_cli_set_companions(&in->mg, in->path, &xo);
	/* a config.json the layout rewrites (TensorRT-LLM's engine mapping) is
	 * not what a GGUF's metadata is made from */
	if (from && (xo.config_drop || xo.config_marker || xo.config_from) && f && !strcmp(f->name, "gguf"))
		return tpc_cli_usage(cmd,
				     "'%s' is a %s set: its config.json is not the model's; merge it to a folder first ('tpconv merge SET -o DIR'), then write the GGUF from DIR",
				     in->path, in->mg.layout ? in->mg.layout->name : "foreign");
	if (from && !(*dir = tpc_strdup(from))) {
		tpc_err e;
		tpc_err_init(&e);
		tpc_err_nomem(&e);
		return tpc_cli_fail(&e);
	}
	wo->model_dir = *dir;
	wo->model_name = in->path;
	return 0;
}

int tpc_cli_input_write(void *ctx, const tpc_format *f, const char *out, const tpc_write_opts *wo, tpc_err *e)
{
	tpc_cli_input *in = ctx;
	if (in->have_mg && !in->optim)
		return tpc_merge_write(&in->mg, f, out, wo, e);
	return f->write(in->view, NULL, 0, out, wo, e);
}

/* The config.json a checkpoint's own metadata gives, read once: its facts
 * into f (the unknown ones) and, when fam is not NULL, the family its
 * top-level architectures[0] names (the whole model's class). */
static int own_read(const tpc_ckpt *ck, char **json, tpc_model_facts *f, const tpc_family **fam, tpc_err *e)
{
	const tpc_format *fmt = ck->format ? tpc_format_by_name(ck->format) : NULL;
	tpc_model_facts cf;
	tpc_cfg *c = NULL;
	int ret;
	*json = NULL;
	if (!fmt || !fmt->hf_config)
		return 0;
	if ((ret = fmt->hf_config(ck, json, e)) ||
	    (ret = tpc_cfg_from_buffer(&c, *json, strlen(*json), "the GGUF metadata", e)) ||
	    (ret = tpc_facts_from_cfg(&cf, c, e)))
		goto out;
	tpc_facts_fill(f, &cf);
	const cJSON *a = fam ? tpc_cfg_get(c, TPC_CFG_TOP, "architectures", NULL) : NULL;
	if (cJSON_IsArray(a) && cJSON_IsString(a->child))
		*fam = tpc_family_by_arch(a->child->valuestring);
out:
	tpc_cfg_free(c);
	return ret;
}

/* A checkpoint whose file holds its configuration (GGUF's metadata): the
 * config.json it gives, its facts as the checkpoint's own, and its family's
 * preset when no flag named a plan. */
int tpc_cli_own_config(const tpc_ckpt *ck, char **json, tpc_model_facts *f, tpc_err *e)
{
	return own_read(ck, json, f, NULL, e);
}

static int own_config(tpc_cli_input *in, const char *cmd, const tpc_cli_set *set, tpc_err *e)
{
	const char *preset;
	const tpc_family *fam = NULL;
	int ret = own_read(&in->ck, &in->hf_config, &in->own, in->have_plan ? NULL : &fam, e);
	if (!ret && in->hf_config && set->preset)
		ret = tpc_cli_preset_for(cmd, set, NULL, in->hf_config, &preset);
	if (ret || !in->hf_config || in->have_plan)
		return ret;
	if (fam && fam->plan && !(ret = tpc_cli_load_plan(fam->name, NULL, &in->plan, e))) {
		in->have_plan = true;
		tpc_cli_info("preset %s, from the GGUF's general.architecture", fam->name);
	}
	return ret;
}

/* A foreign set that nothing says how to merge: rank 0's file, as it is. */
static int open_rank0(tpc_cli_input *in, const tpc_layout *lay, const tpc_open_opts *oo, tpc_err *e)
{
	int ret;
	if (!(in->rank0 = lay->foreign_rank_path(in->path, 0, 0, 1)))
		return tpc_err_nomem(e);
	if ((ret = tpc_ckpt_open(&in->ck, in->rank0, oo, e)))
		return ret;
	in->have_ck = true;
	in->view = &in->ck;
	return 0;
}

/* A set: merged on the fly through its manifest or, for a foreign one, the
 * plan it was split with. */
static int open_set(tpc_cli_input *in, const char *cmd, const tpc_cli_set *set, unsigned flags,
		    const tpc_layout *lay, const tpc_open_opts *oo, tpc_err *e)
{
	tpc_merge_opts mo;
	tpc_model_facts own;
	int ret;
	memset(&mo, 0, sizeof(mo));
	memset(&own, 0, sizeof(own));
	mo.checksums = flags & TPC_CLI_IN_CHECKSUMS;
	mo.defer_checksums = flags & TPC_CLI_IN_DEFER;
	mo.take_rank0 = flags & TPC_CLI_IN_TAKE_RANK0;
	mo.tp = (int)set->tp;
	mo.pp = (int)set->pp;
	if (in->kind == TPC_SET_FOREIGN) {
		/* a set whose own files name the model (TensorRT-LLM's config.json) */
		const char *fp = !in->have_plan && lay && lay->foreign_preset ? lay->foreign_preset(in->path) : NULL;
		if (fp && (ret = tpc_cli_load_plan(fp, NULL, &in->plan, e)))
			return ret;
		in->have_plan = in->have_plan || fp;
		in->plan_name = fp ? fp : in->plan_name ? in->plan_name : set->plan_file;
		if (!in->have_plan && (flags & TPC_CLI_IN_RANK0) && lay && lay->foreign_rank_path)
			return open_rank0(in, lay, oo, e);
	}
	/* a set's rank files are read as they are; these say how to read one file */
	if (set->select || (flags & TPC_CLI_IN_STRICT))
		return tpc_err_at(e, TPC_EUSAGE, in->path, NULL, "%s, not of a shard set",
				  set->select ? "--select takes a subtree of one checkpoint"
					      : "--strict checks the pickle globals of one checkpoint");
	if (in->kind == TPC_SET_FOREIGN) {
		if (!in->have_plan)
			return tpc_cli_usage(cmd,
					     "'%s' is a shard set without a tpconv manifest: give the --preset or --plan it was split with",
					     in->path);
		if (lay && lay->foreign_facts)
			lay->foreign_facts(in->path, &own);
	}
	if (in->have_plan)
		mo.plan = &in->plan;
	if ((ret = tpc_cli_facts(&set->facts, set->config, in->path, &own, mo.plan, &mo.facts, e)))
		return ret;
	if ((ret = tpc_merge_open(&in->mg, in->path, &mo, e)))
		return ret;
	in->have_mg = true;
	in->view = &in->mg.out;
	/* a set whose rank files hold optimizer state: joined as the model */
	if ((flags & TPC_CLI_IN_OPTIMIZER) && in->kind == TPC_SET_FOREIGN && lay && lay->merge_state) {
		if (!(in->optim = tpc_calloc(1, sizeof(*in->optim))))
			return tpc_err_nomem(e);
		if ((ret = tpc_merge_optim_open(in->optim, &in->mg, in->path, &mo, e)))
			return ret;
		in->have_ck = true;
		in->view = &in->optim->ck;
	}
	if (!in->have_plan && (flags & TPC_CLI_IN_SET_PLAN) && in->mg.plan_json) {
		if ((ret = tpc_plan_from_buffer(&in->plan, in->mg.plan_json, strlen(in->mg.plan_json),
						"the input manifest's plan", e)))
			return ret;
		in->have_plan = true;
	}
	return 0;
}

/* The format that reads the set in dir whole as a training save, when its
 * manifest's layout stores optimizer state (megatron-dist: its rank files'
 * format, dcp, reads the torch_dist folder), or NULL. */
static const tpc_format *state_format(const char *dir)
{
	tpc_manifest m;
	tpc_err e;
	const tpc_format *f = NULL;
	char *p = tpc_path_join(dir, "tpconv-manifest.json");
	tpc_err_init(&e);
	memset(&m, 0, sizeof(m));
	if (p && !tpc_manifest_from_file(&m, p, &e)) {
		const tpc_layout *lay = m.layout;
		if (lay && lay->optimizer && lay->formats && lay->formats[0] && (f = tpc_format_by_name(lay->formats[0])) &&
		    !f->sharded)
			f = NULL;
		tpc_manifest_release(&m);
	}
	free(p);
	return f;
}

int tpc_cli_input_open(tpc_cli_input *in, const char *cmd, const char *path, const tpc_cli_set *set, unsigned flags,
		       tpc_err *e)
{
	const tpc_layout *lay = NULL;
	int ret;
	tpc_cli_input_init(in);
	in->path = path;
	in->kind = tpc_set_detect(path, &lay);
	/* a set of a layout that stores optimizer state is a training save of
	 * its own (megatron-dist: a torch_dist folder, read whole by its rank
	 * files' format, dcp); its manifest covers the model only, so the state
	 * is read from the save as it is */
	const tpc_format *as = (flags & TPC_CLI_IN_OPTIMIZER) && in->kind == TPC_SET_MANIFEST ? state_format(path) : NULL;
	if (as)
		in->kind = TPC_SET_NONE;
	in->layout = lay;
	/* the preset checked against the model's config.json, or inferred from it
	 * where the command takes a plan and no flag or manifest names one */
	const char *preset = set->preset;
	bool infer = (in->kind == TPC_SET_NONE && (flags & TPC_CLI_IN_SET_PLAN)) ||
		     (in->kind == TPC_SET_FOREIGN && !(flags & TPC_CLI_IN_RANK0));
	if (set->preset || infer) {
		char *cfg = tpc_cli_model_config(path, set);
		ret = tpc_cli_preset_for(cmd, set, cfg, NULL, &preset);
		free(cfg);
		if (ret)
			return ret;
	}
	if ((ret = flags_plan(in, preset, set, e)))
		return ret; /* the plan's own error, not the input's */
	in->plan_name = preset;
	tpc_open_opts oo;
	memset(&oo, 0, sizeof(oo));
	oo.select = set->select;
	oo.globals = set->globals;
	if (flags & TPC_CLI_IN_DEQUANTIZE)
		oo.flags |= TPC_OPEN_DEQUANTIZE;
	if (flags & TPC_CLI_IN_HF_NAMES)
		oo.flags |= TPC_OPEN_HF_NAMES;
	if (flags & TPC_CLI_IN_STRICT)
		oo.flags |= TPC_OPEN_STRICT;
	if (flags & TPC_CLI_IN_OPTIMIZER)
		oo.flags |= TPC_OPEN_OPTIMIZER;
	if (in->kind != TPC_SET_NONE || (flags & TPC_CLI_IN_SET)) {
		ret = open_set(in, cmd, set, flags, lay, &oo, e);
		goto out;
	}
	if (!(ret = as ? tpc_ckpt_open_as(&in->ck, as, path, &oo, e) : tpc_ckpt_open(&in->ck, path, &oo, e))) {
		in->have_ck = true;
		in->view = &in->ck;
		if ((flags & TPC_CLI_IN_HF_NAMES) && (flags & TPC_CLI_IN_SET_PLAN) && (ret = own_config(in, cmd, set, e)))
			goto out;
		/* a Megatron checkpoint's args (a legacy rank file's own, a
		 * torch_dist folder's common.pt): the facts convert's rules use */
		tpc_megatron_args a;
		bool have_args = tpc_extras_megatron_args(in->ck.root, &a) ||
				 ((tpc_is_dir(path) || oo.select) && tpc_extras_megatron_args_at(path, &a));
		if (have_args)
			tpc_facts_from_megatron(&in->own, &a, "the checkpoint's Megatron args");
		char what[160], how[TPC_ERR_PATH_MAX + 96];
		/* its slices taken for the whole model would make a set silently wrong */
		if ((flags & TPC_CLI_IN_WHOLE) && in->ck.n &&
		    tpc_cli_megatron_rank(path, have_args ? &a : NULL, what, sizeof(what), how, sizeof(how)))
			ret = tpc_err_at(e, TPC_EUSAGE, path, NULL, "%s, not a whole model: %s first", what, how);
	}
out:
	if (ret < 0 && !e->path[0])
		tpc_err_path(e, path);
	return ret;
}

bool tpc_cli_megatron_rank(const char *path, const tpc_megatron_args *a, char *what, size_t n, char *how,
			   size_t hn)
{
	const tpc_layout *mg = tpc_layout_by_name("megatron");
	if (!path || tpc_is_dir(path))
		return false; /* a folder is read as a whole set */
	char *real = realpath(path, NULL), *dir[3] = {NULL, NULL, NULL};
	int tp = a ? (int)a->tp : 0, pp = a && a->pp ? (int)a->pp : 1;
	bool from_args = tp > 0, set = false;
	for (int i = 0; i < 3 && real; i++)
		dir[i] = tpc_path_dir(i ? dir[i - 1] : real);
	/* SAVE/ITER/mp_rank_TT[_PPP]/FILE: the save folder, as merge takes it */
	bool saved = dir[2] && !strncmp(tpc_path_base(dir[0]), "mp_rank_", 8) && mg && mg->detect_dir &&
		     mg->detect_dir(dir[2]);
	if (!from_args && saved) {
		tpc_err e;
		tpc_err_init(&e);
		if (mg->foreign_geometry(dir[2], 0, 0, &tp, &pp, &e))
			tp = 0;
	}
	if (tp > 0 && (int64_t)tp * pp > 1) {
		set = true;
		snprintf(what, n, "this is one rank file of a Megatron set (tp %d x pp %d, from its %s)", tp, pp,
			 from_args ? "args" : "mp_rank folders");
		snprintf(how, hn, "tpconv merge %s%s%s -o OUT (--preset llama when the set has no tpconv manifest)",
			 saved ? "'" : "", saved ? dir[2] : "<save folder>", saved ? "'" : "");
	}
	free(real);
	for (int i = 0; i < 3; i++)
		free(dir[i]);
	return set;
}
