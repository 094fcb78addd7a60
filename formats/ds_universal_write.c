/* ds_universal_write.c - a DeepSpeed universal checkpoint from any
 * optimizer state tpconv ties to its parameters (tpc_optim.h); the layout
 * is in ds_universal.h.
 *
 * OUT is the tag folder (ds_to_universal.py --output_folder). Written, for
 * each parameter in torch.optim's order: zero/NAME/fp32.pt (the parameter),
 * zero/NAME/KEY.pt for each moment (exp_avg, exp_avg_sq: shaped as the
 * parameter, so element i stays on element i) and, for stage 1/2, step.pt;
 * each stage 1/2 file with the parameter's tensor-parallel split (cat_dim,
 * param_n_sub_params, vocab_tensor) from its family's record; then the model
 * states file and zero/optimizer_state.pt; then
 * OUT/../latest_universal naming OUT, last (main() of ds_to_universal.py).
 * Each file is written atomically; on failure the ones written go again. */
#include "ds_universal.h"
#include "deepspeed.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "torch/torch.h"
#include "tpc_buf.h"
#include "tpc_cfg.h"
#include "tpc_facts.h"
#include "tpc_family_tp.h"
#include "tpc_flat.h"
#include "tpc_io.h"
#include "tpc_optim.h"
#include "tpc_util.h"

/* the DeepSpeed whose source the layout follows (version.txt at 38327e0):
 * stage 1/2's _load_global_state asserts a ds_version */
#define DS_VERSION "0.16.5"
#define NAME_MAX_LEN 1000 /* a parameter's name, a folder's (paths are built in 1200 bytes) */

/* How DeepSpeed's loader is to cut a parameter for its tensor-parallel rank
 * (universal_checkpoint.py load_hp_checkpoint_state l. 92-119: chunk along
 * cat_dim, param_n_sub_params parts each chunked, l. 65-74: a vocab_tensor
 * zero-padded to the target's rows first), from its family's split. */
typedef enum pkind { P_REPLICATED, P_SPLIT, P_VOCAB, P_TP1 } pkind;
typedef struct ptp {
	pkind kind;  /* P_REPLICATED: {"param"} alone, as merge_tp_slices writes a
		      * TP_REPLICATED_PARAMETER_PATTERNS match (the loader takes the
		      * whole when the target's shape is the full one, l. 57-59);
		      * P_TP1: split unknown, cat_dim 0 under --tp1-only */
	int cat_dim;
	int nsub;    /* param_n_sub_params; 0: none */
	bool vocab;  /* vocab_tensor */
	bool subshape; /* sub_param_shape: nsubs parts of sizes sub[] along cat_dim */
	int nsubs;
	int64_t sub[TPC_TP_MAX_PARTS];
} ptp;

typedef struct uwrite {
	const tpc_ckpt *ck;
	const tpc_optim *o;
	const tpc_write_opts *wo;
	const char *dir;
	int stage;
	bool replace;         /* files already there are replaced: --force, or no
			       * zero/optimizer_state.pt yet (an interrupted write's) */
	tpc_ckpt sc;          /* descriptions written: sc's tensors over ck's sources */
	ptp *tp;              /* stage 1/2: each parameter's split, in o->p order */
	const tpc_family *fam;/* whose record gave them; NULL: none known */
	int64_t vocab_rows;   /* a vocab_tensor's rows (original_vocab_size); -1: none */
	tpc_model_facts facts; /* config.json's, when have_facts */
	bool have_facts;
	char **done;          /* files written, removed on failure */
	size_t ndone, capdone;
} uwrite;

static int tset(tpc_value *d, const char *k, tpc_value *v)
{
	return tpc_value_set(d, tpc_value_str(k, strlen(k)), v);
}

static tpc_value *call1(const char *mod, const char *name, tpc_value *arg)
{
	tpc_value *c = tpc_value_new(TPC_V_CALL), *args = tpc_value_new(TPC_V_TUPLE);
	if (!c || !args || tpc_value_append(c, tpc_value_global(mod, name)) || tpc_value_append(args, arg) ||
	    tpc_value_append(c, args)) {
		tpc_value_unref(c);
		tpc_value_unref(args);
		return NULL;
	}
	return c;
}

/* torch.Size((a, b, ...)), as engine.py _get_zero_param_shapes saves param.shape */
static tpc_value *torch_size(const tpc_tensor *t)
{
	tpc_value *tu = tpc_value_new(TPC_V_TUPLE);
	for (int d = 0; tu && d < t->ndim; d++)
		if (tpc_value_append(tu, tpc_value_int(t->shape[d]))) {
			tpc_value_unref(tu);
			return NULL;
		}
	return tu ? call1("torch", "Size", tu) : NULL;
}

/* torch.save of `what` at DIR/rel, its TENSOR leaves sc's tensors sel[0..n) */
static int save(uwrite *u, const char *rel, const tpc_value *what, const int64_t *sel, size_t n, tpc_err *e)
{
	static const int64_t none = -1;
	char *p = tpc_path_join(u->dir, rel), *pd = p ? tpc_path_dir(p) : NULL;
	tpc_write_opts wo = {.flags = (u->wo ? u->wo->flags : 0) | (u->replace ? TPC_W_FORCE : 0),
			     .progress = u->wo ? u->wo->progress : NULL};
	int ret = 0;
	if (!p || !pd)
		ret = tpc_err_nomem(e);
	if (!ret && u->ndone == u->capdone) {
		char **nv = realloc(u->done, (u->capdone = u->capdone ? u->capdone * 2 : 16) * sizeof(char *));
		if (!nv)
			ret = tpc_err_nomem(e);
		else
			u->done = nv;
	}
	if (!ret && !(ret = tpc_mkdirs(pd, e)) &&
	    !(ret = tpc__torch_write_obj(&u->sc, n ? sel : &none, n, what, p, &wo, e))) {
		u->done[u->ndone++] = p;
		p = NULL;
	}
	free(p);
	free(pd);
	return ret;
}

/* sc's copy of ck's tensor i, with `flat` 1-D for stage 3; its index */
static int64_t desc(uwrite *u, int64_t i, const char *name, bool flat, tpc_err *e)
{
	tpc_tensor f;
	const tpc_tensor *t = &u->ck->t[i];
	if (!flat || u->stage != 3 || t->ndim == 1) {
		int64_t ix = tpc_ckpt_add_copy(&u->sc, name, t, e);
		if (ix >= 0) {
			u->sc.t[ix].storage = -1; /* ck's storages are not sc's */
			u->sc.t[ix].storage_offset = 0;
		}
		return ix;
	}
	if (tpc_tensor_flatten(&f, t))
		return tpc_err_at(e, TPC_EINPUT, NULL, t->name,
				  "cannot be written flat (stage 3 keeps each parameter as one flat tensor): a strided or computed tensor");
	int64_t ix = tpc_ckpt_add_copy(&u->sc, name, &f, e);
	tpc_tensor_release(&f);
	return ix;
}

static tpc_value *name_pattern(const char *name);

/* A fused parameter's parts as DeepSpeed's SubparamShape (universal_checkpoint.py
 * l. 15-19) holds them: patterns (the parameter's name), shape (its dims, the
 * split dim a tuple of the parts' sizes), partition_dim. as_dict: the dict
 * universal_checkpoint_info's parameter_with_sub_params lists (ds_to_universal
 * builds SubparamShape(**it)); else the object, pickled as
 * SubparamShape(patterns, shape, partition_dim), which the loader reads (l. 94-101). */
static tpc_value *subparam_shape(const char *name, const tpc_tensor *t, const ptp *pt, bool as_dict)
{
	tpc_value *pats = tpc_value_new(TPC_V_LIST), *shape = tpc_value_new(TPC_V_TUPLE), *parts = tpc_value_new(TPC_V_TUPLE);
	int bad = !pats || !shape || !parts || tpc_value_append(pats, name_pattern(name));
	for (int k = 0; k < pt->nsubs && !bad; k++)
		bad = tpc_value_append(parts, tpc_value_int(pt->sub[k]));
	for (int d = 0; d < t->ndim && !bad; d++)
		bad = tpc_value_append(shape, d == pt->cat_dim ? tpc_value_ref(parts) : tpc_value_int(t->shape[d]));
	tpc_value *out = NULL;
	if (!bad && as_dict) {
		out = tpc_value_new(TPC_V_DICT);
		if (!out || tset(out, "patterns", tpc_value_ref(pats)) || tset(out, "shape", tpc_value_ref(shape)) ||
		    tset(out, "partition_dim", tpc_value_int(pt->cat_dim))) {
			tpc_value_unref(out);
			out = NULL;
		}
	} else if (!bad) {
		tpc_value *c = tpc_value_new(TPC_V_CALL), *args = tpc_value_new(TPC_V_TUPLE);
		if (c && args && !tpc_value_append(c, tpc_value_global("deepspeed.checkpoint.universal_checkpoint", "SubparamShape")) &&
		    !tpc_value_append(args, tpc_value_ref(pats)) && !tpc_value_append(args, tpc_value_ref(shape)) &&
		    !tpc_value_append(args, tpc_value_int(pt->cat_dim)) && !tpc_value_append(c, tpc_value_ref(args)))
			out = tpc_value_ref(c);
		tpc_value_unref(c);
		tpc_value_unref(args);
	}
	tpc_value_unref(pats);
	tpc_value_unref(shape);
	tpc_value_unref(parts);
	return out;
}

/* One state file: stage 1/2 the dict merge_tp_slices (ds_to_universal.py
 * l. 280-333) writes, in its key order: sub_param_shape or cat_dim (neither
 * for a replicated parameter), param_n_sub_params, vocab_tensor, param, the
 * parameter whole;
 * stage 3 the bare flat tensor (merge_zero3_slices). */
static int put_tensor(uwrite *u, const char *pname, const char *key, int64_t i, const ptp *pt, tpc_err *e)
{
	char rel[1200], nm[1200];
	snprintf(rel, sizeof(rel), "zero/%s/%s.pt", pname, key);
	snprintf(nm, sizeof(nm), "%s.%s", pname, key);
	int64_t ix = desc(u, i, nm, true, e);
	if (ix < 0)
		return (int)ix;
	tpc_value *leaf = tpc_value_tensor(ix), *d = NULL;
	int ret = 0;
	if (u->stage != 3 &&
	    (!(d = tpc_value_new(TPC_V_DICT)) ||
	     (pt->subshape && tset(d, "sub_param_shape", subparam_shape(pname, &u->ck->t[i], pt, false))) ||
	     (pt->kind != P_REPLICATED && !pt->subshape && tset(d, "cat_dim", tpc_value_int(pt->cat_dim))) ||
	     (pt->nsub > 1 && tset(d, "param_n_sub_params", tpc_value_int(pt->nsub))) ||
	     (pt->vocab && tset(d, "vocab_tensor", tpc_value_bool(1))) || tset(d, "param", tpc_value_ref(leaf))))
		ret = tpc_err_nomem(e);
	if (!ret && !leaf)
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = save(u, rel, d ? d : leaf, &ix, 1, e);
	tpc_value_unref(d);
	tpc_value_unref(leaf);
	return ret;
}

/* A step's value, to compare and to give global_steps: the scalar tensor's
 * bytes or the number. */
typedef struct stepv {
	bool set, tensor;
	tpc_dtype dt;
	uint8_t b[16];
	double num;
} stepv;

static int step_of(uwrite *u, const tpc_optim_entry *en, stepv *s, tpc_err *e)
{
	memset(s, 0, sizeof(*s));
	s->set = true;
	if (en->t < 0) {
		const tpc_value *v = en->v;
		if (v->kind != TPC_V_INT && v->kind != TPC_V_FLOAT)
			return tpc_err_at(e, TPC_EINPUT, NULL, en->key, "step is a %s, not a number", tpc_vkind_name(v->kind));
		s->num = v->kind == TPC_V_INT ? (double)v->ival : v->fval;
		return 0;
	}
	const tpc_tensor *t = &u->ck->t[en->t];
	if (t->numel != 1 || t->nbytes > sizeof(s->b))
		return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "step is not one number");
	s->tensor = true;
	s->dt = t->dtype;
	int ret = tpc_ckpt_read_out(u->ck, t, 0, t->nbytes, s->b, e);
	if (ret)
		return ret;
	switch (t->dtype) {
	case TPC_F32: { float f; memcpy(&f, s->b, 4); s->num = f; break; }
	case TPC_F64: memcpy(&s->num, s->b, 8); break;
	case TPC_I64: { int64_t i; memcpy(&i, s->b, 8); s->num = (double)i; break; }
	case TPC_I32: { int32_t i; memcpy(&i, s->b, 4); s->num = i; break; }
	default: return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "step is a %s tensor", tpc_dtype_name(t->dtype));
	}
	return 0;
}

/* Whether the state fits what DeepSpeed's loaders take: per group, every
 * parameter with the same moments (shaped as it) and one step
 * (base_optimizer.py: assert all(step == steps[0])); stage 3 one group, each
 * parameter with exp_avg, exp_avg_sq and the step (stage3.py reads those
 * three keys and state[0]). Refused by name otherwise. */
static int check_state(uwrite *u, stepv *gstep, tpc_err *e)
{
	const tpc_optim *o = u->o;
	if (u->stage == 3 && o->ng != 1)
		return tpc_err_at(e, TPC_EINPUT, NULL, NULL,
				  "%zu param groups: DeepSpeed's stage 3 universal loader (stage3.py load_hp_checkpoint_state_from_checkpoint_dir_stage3) restores param group 0 only; write the stage 1/2 layout (--zero-stage 2)",
				  o->ng);
	for (size_t i = 0; i < o->np; i++) {
		const tpc_optim_param *p = &o->p[i], *f = p;
		const char *nm = p->fqn;
		for (size_t j = 0; j < i; j++)
			if (o->p[j].group == p->group) {
				f = &o->p[j];
				break;
			}
		if (!*nm || strchr(nm, '/') || !strcmp(nm, ".") || !strcmp(nm, "..") || strlen(nm) > NAME_MAX_LEN)
			return tpc_err_at(e, TPC_EINPUT, NULL, nm, "a universal checkpoint keeps each parameter in a folder of its name, which this name cannot be");
		size_t nmom = 0, fmom = 0;
		bool has_step = false, f_step = false;
		for (size_t q = 0; q < f->ns; q++) {
			fmom += f->s[q].moment;
			f_step |= !strcmp(f->s[q].key, "step");
		}
		for (size_t q = 0; q < p->ns; q++) {
			const tpc_optim_entry *en = &p->s[q];
			if (en->moment) {
				bool in_first = false;
				for (size_t r = 0; r < f->ns; r++)
					in_first |= f->s[r].moment && !strcmp(f->s[r].key, en->key);
				if (!in_first)
					return tpc_err_at(e, TPC_EINPUT, NULL, nm,
							  "has %s, which %s, the first parameter of its group, has not: DeepSpeed's loader gives every parameter of a group the same state keys",
							  en->key, f->fqn);
				if (u->stage == 3 && strcmp(en->key, "exp_avg") && strcmp(en->key, "exp_avg_sq"))
					return tpc_err_at(e, TPC_EINPUT, NULL, nm, "has %s: DeepSpeed's stage 3 universal loader reads exp_avg and exp_avg_sq only", en->key);
				nmom++;
				continue;
			}
			if (strcmp(en->key, "step"))
				return tpc_err_at(e, TPC_EINPUT, NULL, nm,
						  "its state '%s' is neither shaped as the parameter nor the step: a universal checkpoint holds per-parameter tensors and one step per group",
						  en->key);
			stepv s;
			int ret = step_of(u, en, &s, e);
			if (ret)
				return ret;
			has_step = true;
			stepv *g = &gstep[p->group];
			if (!g->set)
				*g = s;
			else if (g->num != s.num || g->tensor != s.tensor)
				return tpc_err_at(e, TPC_EINPUT, NULL, nm,
						  "step %.17g differs from the step of the other parameters of param group %d (%.17g): DeepSpeed keeps one step per group",
						  s.num, p->group, g->num);
		}
		if (nmom != fmom || has_step != f_step)
			return tpc_err_at(e, TPC_EINPUT, NULL, nm,
					  "has %zu moments%s; %s, the first parameter of its group, %zu%s: DeepSpeed's loader gives every parameter of a group the same state keys",
					  nmom, has_step ? " and a step" : "", f->fqn, fmom, f_step ? " and a step" : "");
		if (u->stage == 3 && (nmom != 2 || !has_step))
			return tpc_err_at(e, TPC_EINPUT, NULL, nm,
					  "has %zu moments%s: DeepSpeed's stage 3 universal loader needs exp_avg, exp_avg_sq and the step",
					  nmom, has_step ? " and a step" : " and no step");
	}
	return 0;
}

/* The family config.json in folder dir names (architectures[0], else
 * model_type) and its model facts (head counts, for fused parts); *found
 * false when dir has no config.json. */
static int config_in(uwrite *u, const char *dir, bool *found, tpc_err *e)
{
	char *p = dir ? tpc_path_join(dir, "config.json") : NULL;
	tpc_cfg *c = NULL;
	int ret = 0;
	*found = p && tpc_exists(p);
	if (*found && !(ret = tpc_cfg_from_file(&c, p, e))) {
		const cJSON *a = tpc_cfg_get(c, TPC_CFG_TOP, "architectures", NULL);
		const cJSON *mt = tpc_cfg_get(c, TPC_CFG_TOP, "model_type", NULL);
		if (cJSON_IsArray(a) && cJSON_IsString(a->child))
			u->fam = tpc_family_by_arch(a->child->valuestring);
		if (!u->fam && cJSON_IsString(mt))
			u->fam = tpc_family_by_model_type(mt->valuestring, NULL);
		tpc_err fe; /* facts it cannot give stay unknown: the parts they size are refused */
		tpc_err_init(&fe);
		u->have_facts = !tpc_facts_from_cfg(&u->facts, c, &fe);
	}
	tpc_cfg_free(c);
	free(p);
	return ret;
}

/* The model's family: --preset's, else that of the config.json beside the
 * input or in the folder above it (a ZeRO tag folder inside a Trainer
 * checkpoint-N), whose facts size fused parts. */
static int find_family(uwrite *u, tpc_err *e)
{
	const char *md = u->wo ? u->wo->model_dir : NULL;
	bool found = false;
	int ret = config_in(u, md, &found, e);
	if (!ret && !found && md) {
		char *up = tpc_path_join(md, "..");
		ret = up ? config_in(u, up, &found, e) : tpc_err_nomem(e);
		free(up);
	}
	if (u->wo && u->wo->family)
		u->fam = u->wo->family;
	return ret;
}

/* The sizes of a fused tensor's listed parts along its split dim (t's
 * shape[dim]) from the model facts: "q" heads x head_dim rows, "kv" kv_heads
 * x head_dim, a number itself, "rest" what the others leave. false when a
 * fact is missing or they do not add up to the dim. */
static bool part_sizes(const uwrite *u, const tpc_tensor *t, const tpc_tp_split *s, int64_t *sz)
{
	const tpc_model_facts *f = &u->facts;
	int64_t hd = f->head_dim ? f->head_dim : f->heads > 0 ? f->hidden / f->heads : 0, sum = 0;
	int rest = -1;
	if (!u->have_facts || s->nlisted < 2 || s->dim < 0 || s->dim >= t->ndim)
		return false;
	for (int k = 0; k < s->nlisted; k++) {
		const char *y = s->part[k].sym;
		sz[k] = !*y ? s->part[k].size : !strcmp(y, "q") ? f->heads * hd : !strcmp(y, "kv") ? f->kv_heads * hd : 0;
		if (!strcmp(y, "rest") && rest < 0)
			rest = k;
		else if (sz[k] <= 0)
			return false;
		sum += sz[k];
	}
	if (rest >= 0)
		sum += sz[rest] = t->shape[s->dim] - sum;
	return (rest < 0 || sz[rest] > 0) && sum == t->shape[s->dim];
}

/* pt for split s of t, in the form universal_checkpoint_info's pattern
 * lists can name, so that the files are what ds_to_universal.py writes for
 * this folder's own info: dim 0 (cat_dim 0; a 2-D vocabulary: vocab_tensor,
 * as the loader pads rows with F.pad(t, (0, 0, 0, n)), 2-D only), dim 1
 * (cat_dim 1: row parallelism), 2 equal parts along dim 0
 * (param_n_sub_params 2); every other split - listed parts (their sizes
 * from the facts), equal parts elsewhere, a dim past 1 - as sub_param_shape,
 * the parts (or the one) along partition_dim, each narrowed and chunked
 * (l. 94-111). false: the split cannot be sized here. */
static bool set_split(const uwrite *u, const tpc_tensor *t, const tpc_tp_split *s, ptp *pt)
{
	if (s->dim < 0 || s->dim >= t->ndim)
		return false;
	int64_t len = t->shape[s->dim];
	pt->cat_dim = s->dim;
	if (s->uneven_parts) {
		if (!part_sizes(u, t, s, pt->sub))
			return false;
		pt->nsubs = s->nlisted;
	} else if (s->parts > 1) {
		if (s->parts > TPC_TP_MAX_PARTS || len % s->parts)
			return false;
		pt->nsubs = s->parts;
		for (int k = 0; k < s->parts; k++)
			pt->sub[k] = len / s->parts;
	} else {
		pt->nsubs = 1;
		pt->sub[0] = len;
	}
	bool equal = true;
	for (int k = 1; k < pt->nsubs; k++)
		equal &= pt->sub[k] == pt->sub[0];
	if (pt->nsubs == 2 && equal && s->dim == 0)
		pt->nsub = 2;
	else
		pt->subshape = pt->nsubs > 1 || s->dim > 1;
	pt->vocab = s->kind == TPC_TP_VOCAB && t->ndim == 2 && s->dim == 0 && pt->nsubs == 1;
	return true;
}

/* Each stage 1/2 parameter's split from its family's record
 * (lib/tpc_family_tp.h). A matrix whose split is unknown (no family, no rule
 * of its plan, parts of sizes a universal file cannot give) is refused by
 * name: DeepSpeed's loader would cut it along dim 0 at any tensor-parallel
 * degree, silently wrong for a row-parallel one (o_proj, down_proj), unless
 * --tp1-only says the folder is for tensor parallel 1. A 1-D tensor has one
 * dim to cut: never unknown. */
static int classify(uwrite *u, tpc_err *e)
{
	const tpc_optim *o = u->o;
	tpc_family_tp *ft = NULL;
	tpc_buf names;
	size_t nunk = 0, nparts = 0; /* unknown, of which fused parts of unknown sizes */
	const char *why = NULL;
	int ret;
	u->vocab_rows = -1;
	if (u->stage == 3) /* stage3.py's loader cuts no tensor-parallel slice */
		return 0;
	if (!(u->tp = tpc_calloc(o->np, sizeof(*u->tp))))
		return tpc_err_nomem(e);
	if ((ret = find_family(u, e)) || (u->fam && u->fam->plan && (ret = tpc_family_tp_open(&ft, u->fam, e))))
		return ret;
	tpc_buf_init(&names);
	for (size_t i = 0; i < o->np && !ret; i++) {
		const tpc_tensor *t = &u->ck->t[o->p[i].param];
		ptp *pt = &u->tp[i];
		tpc_tp_split s;
		memset(&s, 0, sizeof(s));
		if (ft && (ret = tpc_family_tp_split(ft, o->p[i].fqn, t->ndim, &s, e)))
			break;
		pt->kind = P_SPLIT;
		if (s.kind == TPC_TP_REPLICATE) {
			pt->kind = P_REPLICATED;
		} else if ((s.kind == TPC_TP_SPLIT || s.kind == TPC_TP_VOCAB) && set_split(u, t, &s, pt)) {
			if (pt->vocab && u->vocab_rows < 0)
				u->vocab_rows = t->shape[0];
		} else if (t->ndim >= 2) {
			pt->kind = P_TP1;
			if (s.uneven_parts) {
				nparts++;
				why = s.nlisted ? "parts sized by the model's head counts, which no config.json beside the input gives (or they do not add up to the tensor)"
						: "2 parts or 1 as the model's activation is gated or not (unsaid here)";
			}
			if (nunk++ < 3)
				tpc_buf_addf(&names, "%s%s", nunk > 1 ? ", " : "", o->p[i].fqn);
		}
	}
	if (!ret && names.oom)
		ret = tpc_err_nomem(e);
	if (!ret && nunk && !(u->wo && u->wo->tp1_only)) {
		char fam[320];
		if (!u->fam)
			snprintf(fam, sizeof(fam), "no model family is known (no config.json naming one beside the input, no --preset)");
		else if (!ft)
			snprintf(fam, sizeof(fam), "family '%s' has no split plan", u->fam->name);
		else if (nparts == nunk)
			snprintf(fam, sizeof(fam), "family '%s' splits %s in %s", u->fam->name, nunk == 1 ? "it" : "them", why);
		else
			snprintf(fam, sizeof(fam), "no rule of family '%s' splits %s%s", u->fam->name,
				 nparts ? "some, the others fused in " : nunk == 1 ? "it" : "them", nparts ? why : "");
		ret = tpc_err_at(e, TPC_EINPUT, NULL, NULL,
				 "the tensor-parallel split of %zu parameter%s is unknown (%s%s): %s; DeepSpeed's loader cuts each along cat_dim for its tensor-parallel rank, so cat_dim 0 loads right at tensor parallel 1 only: %s or write for tensor parallel 1 (--tp1-only)",
				 nunk, nunk == 1 ? "" : "s", names.p ? names.p : "", nunk > 3 ? ", ..." : "", fam,
				 u->fam && ft && nparts == nunk ? "put the model's config.json beside the input" : "name the family (--preset)");
	}
	tpc_buf_release(&names);
	tpc_family_tp_free(ft);
	return ret;
}

/* A KEY.pt already in the parameter's folder that this write does not
 * replace: universal_checkpoint.py would load it as the parameter's state
 * (every "(.+).pt"), so it is refused by name, never removed. */
static int stale_file(uwrite *u, const tpc_optim_param *p, tpc_err *e)
{
	char rel[1200];
	snprintf(rel, sizeof(rel), "zero/%s", p->fqn);
	char *dir = tpc_path_join(u->dir, rel);
	DIR *d = dir ? opendir(dir) : NULL;
	int ret = dir ? 0 : tpc_err_nomem(e);
	for (struct dirent *de; d && !ret && (de = readdir(d));) {
		size_t l = strlen(de->d_name);
		if (l <= 3 || strcmp(de->d_name + l - 3, ".pt"))
			continue;
		bool ours = !strcmp(de->d_name, "fp32.pt") || (u->stage != 3 && !strcmp(de->d_name, "step.pt"));
		for (size_t q = 0; q < p->ns && !ours; q++)
			ours = p->s[q].moment && strlen(p->s[q].key) == l - 3 && !strncmp(p->s[q].key, de->d_name, l - 3);
		if (!ours)
			ret = tpc_err_at(e, TPC_EUSAGE, dir, NULL,
					 "holds %s, which this write does not replace and DeepSpeed's loader would read as the parameter's state; remove it",
					 de->d_name);
	}
	if (d)
		closedir(d);
	free(dir);
	return ret;
}

/* One parameter's files: fp32.pt, each moment, stage 1/2 step.pt. */
static int put_param(uwrite *u, const tpc_optim_param *p, const ptp *pt, tpc_err *e)
{
	int ret = put_tensor(u, p->fqn, "fp32", p->param, pt, e);
	for (size_t q = 0; q < p->ns && !ret; q++) {
		const tpc_optim_entry *en = &p->s[q];
		if (en->moment) {
			ret = put_tensor(u, p->fqn, en->key, en->t, pt, e);
		} else if (u->stage != 3) {
			/* the group's step as saved (dump_param_fragment: not narrowed) */
			char rel[1200], nm[1200];
			snprintf(rel, sizeof(rel), "zero/%s/step.pt", p->fqn);
			snprintf(nm, sizeof(nm), "%s.step", p->fqn);
			int64_t ix = en->t >= 0 ? desc(u, en->t, nm, false, e) : -1;
			tpc_value *v = en->t >= 0 ? (ix >= 0 ? tpc_value_tensor(ix) : NULL) : tpc_value_ref((tpc_value *)en->v);
			if (en->t >= 0 && ix < 0)
				return (int)ix;
			ret = v ? save(u, rel, v, &ix, ix >= 0 ? 1 : 0, e) : tpc_err_nomem(e);
			tpc_value_unref(v);
		}
	}
	return ret;
}

/* A name as a regular expression re.match takes for exactly it (Python's
 * re.escape of the specials, then "$"). */
static tpc_value *name_pattern(const char *name)
{
	tpc_buf b;
	tpc_buf_init(&b);
	for (const char *c = name; *c; c++) {
		if (strchr(".^$*+?{}[]\\|()", *c))
			tpc_buf_addc(&b, '\\');
		tpc_buf_addc(&b, *c);
	}
	tpc_buf_addc(&b, '$');
	tpc_value *v = b.oom ? NULL : tpc_value_str(b.p, b.len);
	tpc_buf_release(&b);
	return v;
}

/* universal_checkpoint_info, the client state ds_to_universal.py reads from
 * the model states file (deepspeed_checkpoint.py get_checkpoint_info ->
 * _get_checkpoint_value; merge_tp_slices l. 238-244, 323-328): each
 * parameter under the pattern list its file follows, by its exact name, and
 * the vocabulary's rows; a converter run on this folder's save finds the
 * splits the files have. */
static tpc_value *checkpoint_info(const uwrite *u)
{
	static const char *const lists[] = {"tp_replicated_parameter_patterns", "parameter_with_row_parallelism_patterns",
					    "vocabulary_parameter_patterns", "parameter_with_2_sub_params_cat_dim_0",
					    "parameter_with_sub_params"};
	tpc_value *d = tpc_value_new(TPC_V_DICT), *l[5];
	int bad = !d || tset(d, "universal_checkpoint_version", tpc_value_float(0.2));
	for (int k = 0; k < 5; k++)
		bad = bad || !(l[k] = tpc_value_new(TPC_V_LIST)) || tset(d, lists[k], l[k]);
	for (size_t i = 0; i < u->o->np && !bad; i++) {
		const ptp *pt = &u->tp[i];
		const char *nm = u->o->p[i].fqn;
		int in[4] = {pt->kind == P_REPLICATED, pt->kind == P_SPLIT && pt->cat_dim == 1 && pt->nsub < 2 && !pt->subshape,
			     pt->vocab, pt->kind == P_SPLIT && pt->cat_dim == 0 && pt->nsub == 2};
		for (int k = 0; k < 4 && !bad; k++)
			bad = in[k] && tpc_value_append(l[k], name_pattern(nm));
		if (!bad && pt->subshape)
			bad = tpc_value_append(l[4], subparam_shape(nm, &u->ck->t[u->o->p[i].param], pt, true));
	}
	if (!bad && u->vocab_rows >= 0)
		bad = tset(d, "original_vocab_size", tpc_value_int(u->vocab_rows));
	if (bad) {
		tpc_value_unref(d);
		return NULL;
	}
	return d;
}

/* What the ZeRO save's model states keep that the engine restores
 * (deepspeed.h TPC_ZERO_MODEL_STATES); NULL for another input. */
static const tpc_value *kept_states(const uwrite *u)
{
	const tpc_ckpt *ck = u->ck;
	return ck->ext && ck->ext_tag && !strcmp(ck->ext_tag, TPC_ZERO_MODEL_STATES) ? ck->ext : NULL;
}

/* The kept value of `key` (a new reference), else dflt */
static tpc_value *kept(const uwrite *u, const char *key, tpc_value *dflt)
{
	tpc_value *v = tpc_value_get(kept_states(u), key);
	if (!v)
		return dflt;
	tpc_value_unref(dflt);
	return tpc_value_ref(v);
}

static bool holds_tensor(const tpc_value *v, int depth)
{
	if (!v || depth > 64)
		return v != NULL;
	if (v->kind == TPC_V_TENSOR || v->kind == TPC_V_STORAGE)
		return true;
	for (size_t i = 0; i < v->n; i++)
		if ((v->items && holds_tensor(v->items[i], depth + 1)) || (v->keys && holds_tensor(v->keys[i], depth + 1)))
			return true;
	return false;
}

/* The kept states are written as they are: one holding tensors is refused
 * by name (this writer saves the model states without tensors) rather than
 * dropped, which the loading engine's lr_scheduler.load_state_dict would
 * not survive. */
static int check_kept(const uwrite *u, tpc_err *e)
{
	const tpc_value *d = kept_states(u);
	for (size_t i = 0; d && d->kind == TPC_V_DICT && i < d->n; i++)
		if (holds_tensor(d->items[i], 0))
			return tpc_err_at(e, TPC_EINPUT, NULL, NULL,
					  "the model states' %s holds tensors, which a universal folder written by tpconv does not carry; the universal folder ds_to_universal.py makes keeps the model states file",
					  d->keys[i]->kind == TPC_V_STR ? d->keys[i]->str : "?");
	return 0;
}

/* The model states file the engine loads beside zero/ (engine.py
 * _load_checkpoint: dp_world_size, global_steps, skipped_steps,
 * mp_world_size; the module is not loaded from it when load_universal is
 * set, engine.py "if not self.load_universal_checkpoint():
 * self.load_module_state_dict"), with param_shapes naming each group's
 * parameters in order as _save_checkpoint keeps them. From a ZeRO save, what
 * its model states give the engine beside the optimizer (lr_scheduler, which
 * l. 3038-3039 hands to lr_scheduler.load_state_dict whenever the engine has
 * a scheduler, data_sampler, random_ltd, global_steps, global_samples,
 * skipped_steps) as ds_to_universal.py's copy of the file keeps them; stage
 * 1/2: universal_checkpoint_info. */
static int put_model_states(uwrite *u, const stepv *gstep, tpc_err *e)
{
	const tpc_optim *o = u->o;
	tpc_value *sd = tpc_value_new(TPC_V_DICT), *shapes = tpc_value_new(TPC_V_LIST);
	int bad = !sd || !shapes;
	for (size_t g = 0; g < o->ng && !bad; g++) {
		if (u->stage == 3 && g)
			break;
		tpc_value *d = tpc_value_new(TPC_V_DICT);
		for (size_t i = 0; d && !bad && i < o->np; i++)
			if (u->stage == 3 || o->p[i].group == (int)g)
				bad = tset(d, o->p[i].fqn, torch_size(&u->ck->t[o->p[i].param]));
		bad = bad || !d || tpc_value_append(shapes, d);
	}
	bad = bad || tset(sd, "module", tpc_value_new(TPC_V_DICT)) || tset(sd, "buffer_names", tpc_value_new(TPC_V_LIST)) ||
	      tset(sd, "optimizer", tpc_value_new(TPC_V_NONE));
	if (!bad) {
		bad = tset(sd, "param_shapes", shapes);
		shapes = NULL;
	}
	int64_t steps = gstep[0].set ? (int64_t)gstep[0].num : 0;
	bad = bad || tset(sd, "frozen_param_shapes", tpc_value_new(TPC_V_NONE)) ||
	      tset(sd, "shared_params", tpc_value_new(TPC_V_DICT)) || tset(sd, "frozen_param_fragments", tpc_value_new(TPC_V_NONE)) ||
	      tset(sd, "lr_scheduler", kept(u, "lr_scheduler", tpc_value_new(TPC_V_NONE))) ||
	      tset(sd, "data_sampler", kept(u, "data_sampler", tpc_value_new(TPC_V_NONE))) ||
	      tset(sd, "random_ltd", kept(u, "random_ltd", tpc_value_new(TPC_V_NONE))) ||
	      tset(sd, "sparse_tensor_module_names", tpc_value_new(TPC_V_SET)) ||
	      tset(sd, "skipped_steps", kept(u, "skipped_steps", tpc_value_int(0))) ||
	      tset(sd, "global_steps", kept(u, "global_steps", tpc_value_int(steps))) ||
	      (tpc_value_get(kept_states(u), "global_samples") && tset(sd, "global_samples", kept(u, "global_samples", NULL))) ||
	      tset(sd, "dp_world_size", tpc_value_int(1)) || tset(sd, "mp_world_size", tpc_value_int(1)) ||
	      tset(sd, "ds_version", tpc_value_str(DS_VERSION, strlen(DS_VERSION))) ||
	      (u->tp && tset(sd, "universal_checkpoint_info", checkpoint_info(u)));
	int ret = bad ? tpc_err_nomem(e)
		      : save(u, u->stage == 3 ? "zero_pp_rank_0_mp_rank_00_model_states.pt" : "mp_rank_00_model_states.pt", sd, NULL, 0, e);
	tpc_value_unref(sd);
	tpc_value_unref(shapes);
	return ret;
}

/* zero/optimizer_state.pt: stage 1/2 what _save_optimizer_state keeps
 * (zero_stage, partition_count, ds_version, param_groups: the base
 * optimizer's, one flat parameter per group); stage 3 the
 * optimizer_state_dict _save_optimizer_state_stage3 keeps, state[0] holding
 * the step (stage3.py fills exp_avg and exp_avg_sq in from zero/NAME/). The
 * loss scaler and clip_grad stay the loading engine's (_load_global_state
 * reads them with .get). */
static int put_optimizer_state(uwrite *u, const tpc_optim_param *p0, tpc_err *e)
{
	const tpc_optim *o = u->o;
	tpc_value *sd = tpc_value_new(TPC_V_DICT), *groups = tpc_value_new(TPC_V_LIST), *pc = tpc_value_new(TPC_V_LIST);
	int64_t ix = -1;
	int bad = !sd || !groups || !pc;
	for (size_t g = 0; g < o->ng && !bad; g++) {
		tpc_value *d = tpc_optim_group_numbered(o->groups[g], (int64_t)g, 1);
		bad = !d || tpc_value_append(groups, d) || tpc_value_append(pc, tpc_value_int(1));
	}
	bad = bad || tset(sd, "zero_stage", tpc_value_int(u->stage));
	if (!bad && u->stage == 3) {
		tpc_value *osd = tpc_value_new(TPC_V_DICT), *st = tpc_value_new(TPC_V_DICT), *s0 = tpc_value_new(TPC_V_DICT);
		const tpc_optim_entry *en = NULL;
		for (size_t q = 0; q < p0->ns; q++)
			if (!strcmp(p0->s[q].key, "step"))
				en = &p0->s[q];
		tpc_value *sv = !en ? NULL : en->t >= 0 ? ((ix = desc(u, en->t, "\x01step", false, e)) >= 0 ? tpc_value_tensor(ix) : NULL)
						     : tpc_value_ref((tpc_value *)en->v);
		bad = !osd || !st || !s0 || !sv || tset(s0, "step", sv) || tpc_value_set(st, tpc_value_int(0), tpc_value_ref(s0)) ||
		      tset(osd, "state", tpc_value_ref(st)) || tset(osd, "param_groups", tpc_value_ref(groups)) ||
		      tset(sd, "partition_count", tpc_value_int(1)) || tset(sd, "optimizer_state_dict", tpc_value_ref(osd));
		tpc_value_unref(osd);
		tpc_value_unref(st);
		tpc_value_unref(s0);
	} else if (!bad) {
		bad = tset(sd, "partition_count", tpc_value_ref(pc));
	}
	bad = bad || tset(sd, "ds_version", tpc_value_str(DS_VERSION, strlen(DS_VERSION))) ||
	      tset(sd, "param_groups", tpc_value_ref(groups));
	int ret = bad ? (e->code ? e->code : tpc_err_nomem(e)) : save(u, "zero/optimizer_state.pt", sd, &ix, ix >= 0 ? 1 : 0, e);
	tpc_value_unref(sd);
	tpc_value_unref(groups);
	tpc_value_unref(pc);
	return ret;
}

/* OUT/../latest_universal: OUT's name, as ds_to_universal.py's main()
 * writes it last (engine.py load_checkpoint reads it when no tag is given) */
static int put_latest(uwrite *u, tpc_err *e)
{
	char *d = tpc_strdup(u->dir);
	int ret = 0;
	if (!d)
		return tpc_err_nomem(e);
	size_t n = strlen(d);
	while (n > 1 && d[n - 1] == '/')
		d[--n] = '\0';
	const char *base = strrchr(d, '/');
	base = base ? base + 1 : d;
	char *parent = base > d ? tpc_strndup(d, (size_t)(base - d)) : tpc_strdup(".");
	char *lp = parent ? tpc_path_join(parent, "latest_universal") : NULL;
	if (!lp)
		ret = tpc_err_nomem(e);
	else if (!strcmp(base, ".") || !strcmp(base, "..") || !*base)
		ret = tpc_err_at(e, TPC_EUSAGE, u->dir, NULL, "name the output folder itself (its name goes into latest_universal)");
	else
		ret = tpc_write_file_atomic(lp, base, strlen(base), TPC_OUT_FORCE, e);
	free(lp);
	free(parent);
	free(d);
	return ret;
}

int tpc__ds_universal_write(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *path,
			    const tpc_write_opts *wo, tpc_err *e);

int tpc__ds_universal_write(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *path,
			    const tpc_write_opts *wo, tpc_err *e)
{
	uwrite u;
	tpc_optim o;
	stepv *gstep = NULL;
	int ret;
	(void)nsel;
	memset(&u, 0, sizeof(u));
	tpc_ckpt_init(&u.sc);
	if (sel)
		return tpc_err_at(e, TPC_EUSAGE, path, NULL, "a universal checkpoint is written from the whole checkpoint");
	if ((ret = tpc_optim_map(&o, ck, e)))
		return ret;
	u.ck = ck;
	u.o = &o;
	u.wo = wo;
	u.dir = path;
	u.stage = wo && wo->zero_stage ? wo->zero_stage : ck->format && !strcmp(ck->format, "deepspeed-zero3") ? 3 : 2;
	if (!o.okey) {
		ret = tpc_err_at(e, TPC_EINPUT, NULL, NULL,
				 "not written: the input holds no optimizer state (a top-level key with 'state' and 'param_groups', as get_state_dict saves it), and a universal checkpoint is the optimizer's state");
		goto out;
	}
	if (!o.np) {
		ret = tpc_err_at(e, TPC_EINPUT, NULL, NULL, "the optimizer state names no parameters");
		goto out;
	}
	{
		char *op = tpc_path_join(path, "zero/optimizer_state.pt");
		bool there = op && tpc_exists(op);
		free(op);
		if (tpc_exists(path) && !tpc_is_dir(path))
			ret = tpc_err_at(e, TPC_EUSAGE, path, NULL, "output exists and is not a folder");
		else if (there && !(wo && (wo->flags & TPC_W_FORCE)))
			ret = tpc_err_at(e, TPC_EUSAGE, path, NULL, "output folder already holds a universal checkpoint; use --force to replace it");
		if (ret)
			goto out;
		/* without optimizer_state.pt (written after every parameter's
		 * files) the folder is no universal checkpoint: what is there
		 * is an interrupted write's, replaced file by file */
		u.replace = !there || (wo && (wo->flags & TPC_W_FORCE));
	}
	if (!(gstep = tpc_calloc(o.ng + 1, sizeof(*gstep)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = check_state(&u, gstep, e)) || (ret = check_kept(&u, e)) || (ret = classify(&u, e)) || (ret = tpc_ckpt_borrow_sources(&u.sc, ck, e)) ||
	    (ret = tpc_mkdirs(path, e)))
		goto out;
	tpc_out_sweep(path);
	for (size_t i = 0; i < o.np && !ret; i++) /* before any file is written */
		ret = stale_file(&u, &o.p[i], e);
	for (size_t i = 0; i < o.np && !ret; i++)
		ret = put_param(&u, &o.p[i], u.tp ? &u.tp[i] : NULL, e);
	if (!ret)
		ret = put_model_states(&u, gstep, e);
	if (!ret)
		ret = put_optimizer_state(&u, &o.p[0], e);
	if (!ret)
		ret = put_latest(&u, e);
out:
	for (size_t i = 0; i < u.ndone; i++) {
		if (ret) { /* the file, and its parameter's folder when that empties */
			char *d = tpc_path_dir(u.done[i]);
			unlink(u.done[i]);
			if (d)
				rmdir(d);
			free(d);
		}
		free(u.done[i]);
	}
	free(u.done);
	free(u.tp);
	free(gstep);
	tpc_ckpt_release(&u.sc);
	tpc_optim_release(&o);
	return ret;
}
