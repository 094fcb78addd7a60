/* tpc_lora_shard.c - the plan that splits a PEFT LoRA adapter beside its base
 * (see tpc_lora_shard.h for the rules and where they come from). */
#include "tpc_lora_shard.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_util.h"

#define PEFT_PREFIX "base_model.model."

/* What an adapter key holds, and which of the base's dimensions its own
 * dimension `dim` carries. */
enum { R_A, R_B, R_BIAS, R_EMB_A, R_EMB_B, R_MAG, R_SAVED };
enum { D_OUT, D_IN, D_NONE };

static const struct {
	const char *suffix;
	int role, carries, dim;
} roles[] = {
	{".lora_A.weight", R_A, D_IN, 1},
	{".lora_B.weight", R_B, D_OUT, 0},
	{".lora_B.bias", R_BIAS, D_OUT, 0},
	{".lora_embedding_A", R_EMB_A, D_IN, 1},
	{".lora_embedding_B", R_EMB_B, D_OUT, 0},
	{".lora_magnitude_vector.weight", R_MAG, D_OUT, 0},
	{".lora_magnitude_vector", R_MAG, D_OUT, 0},
};
#define NROLES (sizeof(roles) / sizeof(roles[0]))

static char *cat2(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 1);
	if (s) {
		memcpy(s, a, la);
		memcpy(s + la, b, lb + 1);
	}
	return s;
}

typedef struct item {
	char *pat;   /* the name with its digit runs as [0-9]+, anchored */
	cJSON *rule; /* the rule without "match" */
	char *str;   /* rule printed, to compare */
	int group;   /* index of the first item with the same pattern */
} item;

/* ^name$ as a rule expression, each run of digits [0-9]+ when `general`. */
static char *name_pattern(const char *name, bool general)
{
	tpc_buf b = TPC_BUF_INIT;
	tpc_buf_addc(&b, '^');
	for (const char *p = name; *p; p++) {
		if (general && *p >= '0' && *p <= '9') {
			while (p[1] >= '0' && p[1] <= '9')
				p++;
			tpc_buf_adds(&b, "[0-9]+");
			continue;
		}
		if (strchr(".[]()*+?{}|^$\\", *p))
			tpc_buf_addc(&b, '\\');
		tpc_buf_addc(&b, *p);
	}
	tpc_buf_addc(&b, '$');
	if (b.oom) {
		tpc_buf_release(&b);
		return NULL;
	}
	return tpc_buf_detach(&b, NULL);
}

static int refuse(tpc_err *e, const char *key, const char *fmt, const char *a, const char *b)
{
	char msg[1024];
	snprintf(msg, sizeof(msg), fmt, a, b);
	return tpc_err_at(e, TPC_EINPUT, NULL, key, "%s", msg);
}

/* The base rule `ri` of the parsed plan, its "match" (and with `retarget` its
 * split, dim and transposition) removed. */
static cJSON *rule_copy(cJSON *const *rules, int ri, bool retarget)
{
	cJSON *r = cJSON_Duplicate(rules[ri], 1);
	if (!r)
		return NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(r, "match");
	if (retarget) {
		cJSON_DeleteItemFromObjectCaseSensitive(r, "split");
		cJSON_DeleteItemFromObjectCaseSensitive(r, "dim");
		cJSON_DeleteItemFromObjectCaseSensitive(r, "transposed");
		cJSON_DeleteItemFromObjectCaseSensitive(r, "stacked"); /* the adapter's pair is 2-D */
	}
	return r;
}

/* The rule of adapter key `key` (role q, module base tensor `bt` split by s):
 * *rule NULL with e set on a refusal. */
static int derive(const char *key, int q, const tpc_tensor *bt, const tpc_split *s, bool emb, int out_dim, int in_dim,
		  bool dora, cJSON *const *rules, cJSON **rule, tpc_lora_shard_stats *st, tpc_err *e)
{
	*rule = NULL;
	int carries = roles[q].carries;
	if (s->kind == TPC_SPLIT_REPLICATE) {
		st->whole++;
		*rule = cJSON_CreateObject();
		if (!*rule || !cJSON_AddStringToObject(*rule, "split", "replicate"))
			return tpc_err_nomem(e);
		return 0;
	}
	int along = s->dim == out_dim ? D_OUT : s->dim == in_dim ? D_IN : D_NONE;
	if (along == D_NONE)
		return refuse(e, key, "its base tensor '%s' is split along dim %s, neither its input nor its output", bt->name,
			      s->dim == 0 ? "0" : s->dim == 1 ? "1" : "?");
	if (along == D_IN && dora)
		return refuse(e, key,
			      "DoRA on '%s', which the plan splits along its input%s: the norm of each output row spans "
			      "every rank's columns, so no rank can merge its slice alone",
			      bt->name, emb ? " (the vocabulary)" : "");
	if (along != carries) {
		st->whole++;
		*rule = cJSON_CreateObject();
		if (!*rule || !cJSON_AddStringToObject(*rule, "split", "replicate"))
			return tpc_err_nomem(e);
		return 0;
	}
	int td = roles[q].dim;
	if (!(*rule = rule_copy(rules, s->rule, true)))
		return tpc_err_nomem(e);
	const char *kind = s->kind == TPC_SPLIT_VOCAB ? "vocab" : td == 0 ? "col" : "row";
	if (!cJSON_AddStringToObject(*rule, "split", kind) ||
	    (s->kind == TPC_SPLIT_VOCAB && !cJSON_AddNumberToObject(*rule, "dim", td)))
		return tpc_err_nomem(e);
	if (along == D_OUT)
		st->out_split++;
	else
		st->in_split++;
	return 0;
}

/* Key k's role (index in roles[], or R_SAVED as -1) and its module / tensor
 * name in the base into *base (malloc'd). */
static int classify(const char *k, int *q, char **base, tpc_err *e)
{
	size_t pl = strlen(PEFT_PREFIX), kl = strlen(k);
	*base = NULL;
	*q = -1;
	if (strncmp(k, PEFT_PREFIX, pl))
		return refuse(e, k, "not a PEFT LoRA key (they begin '%s')%s", PEFT_PREFIX, "");
	for (size_t i = 0; i < NROLES; i++) {
		size_t sl = strlen(roles[i].suffix);
		if (kl > pl + sl && !strcmp(k + kl - sl, roles[i].suffix)) {
			*q = (int)i;
			char *mod = tpc_strndup(k + pl, kl - pl - sl);
			if (!mod || !(*base = cat2(mod, ".weight"))) {
				free(mod);
				return tpc_err_nomem(e);
			}
			free(mod);
			return 0;
		}
	}
	if (strstr(k + pl, ".lora_") || !strncmp(k + pl, "lora_", 5))
		return refuse(e, k,
			      "not a key PEFT's LoRA writes (lora_A/B.weight, lora_B.bias, lora_embedding_A/B, "
			      "lora_magnitude_vector, a modules_to_save tensor)%s%s",
			      "", "");
	/* modules_to_save: the base tensor itself, saved whole */
	return (*base = tpc_strdup(k + pl)) ? 0 : tpc_err_nomem(e);
}

/* Does the base tensor fit the adapter tensor's carried dimension? */
static bool fits(const tpc_tensor *at, int q, const tpc_tensor *bt, bool emb, bool fifo)
{
	int out_dim = (emb || fifo) ? 1 : 0, in_dim = 1 - out_dim;
	int bd = roles[q].carries == D_OUT ? out_dim : in_dim;
	int ad = roles[q].dim;
	int want_nd = (roles[q].role == R_BIAS || roles[q].role == R_MAG) ? 1 : 2;
	return at->ndim == want_nd && bt->ndim == 2 && at->shape[ad] == bt->shape[bd];
}

/* One adapter tensor's rule into it->rule. */
static int one(const tpc_ckpt *base, const tpc_plan *bp, const tpc_model_facts *f, int tp, int ep, unsigned rflags,
	       const tpc_ckpt *ad, size_t i, const tpc_lora_cfg *c, cJSON *const *rules, item *it,
	       tpc_lora_shard_stats *st, tpc_err *e)
{
	const char *k = ad->t[i].name;
	char *bname = NULL, *emb_key = NULL;
	int q, ret = 0;
	if ((ret = classify(k, &q, &bname, e)))
		goto out;
	int64_t bi = tpc_ckpt_find(base, bname);
	/* PEFT's ParamWrapper (target_parameters): the parameter its module
	 * adapts, found as a merge finds it; on fused experts [E, out, in] (or
	 * [E, in, out]) its A [E * r, in] and B [out, r * E] follow in and out */
	bool pw = false, in_out = false;
	if (q >= 0 && (roles[q].role == R_A || roles[q].role == R_B) && c->json &&
	    cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive((const cJSON *)c->json, "target_parameters")) > 0 &&
	    (bi < 0 || base->t[bi].ndim == 3 || strstr(bname, ".base_layer"))) {
		char *mod = tpc_strndup(bname, strlen(bname) - strlen(".weight"));
		if (!mod) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		ret = tpc_lora_param_base(base, ad, c, mod, &bi, &in_out, e);
		free(mod);
		if (ret)
			goto out;
		pw = base->t[bi].ndim == 3;
	}
	if (bi < 0) {
		ret = refuse(e, k, "no base tensor '%s' for it%s", bname, "");
		goto out;
	}
	const tpc_tensor *bt = &base->t[bi];
	tpc_split s;
	bool matched = false;
	/* an expert's tensor with --ep: split over its EP group's tp/ep ranks */
	int rtp = ep > 1 && tpc_plan_expert(bp, bt->name) >= 0 ? tp / ep : tp;
	if ((ret = tpc_plan_resolve(bp, f, bt->name, bt->ndim, bt->shape, rtp, rflags, &s, &matched, e)))
		goto out;
	if (!matched) {
		ret = refuse(e, k,
			     "its base tensor '%s' is matched by no rule of plan '%s': how it is split is not known, so "
			     "neither is the adapter's (a --plan with a rule for it)",
			     bt->name, bp->name ? bp->name : "?");
		goto out;
	}
	if (pw && ep > 1) {
		ret = refuse(e, k,
			     "a LoRA of target_parameters on the fused experts '%s' with --ep: its A holds the experts' ranks in "
			     "rows and its B in interleaved columns (rank k of expert e at column k x E + e), which no plan rule "
			     "cuts by expert; shard the base with it merged (shard BASE --lora ADAPTER --ep)%s",
			     bt->name, "");
		goto out;
	}
	if ((s.stacked && !pw) || s.ep > 1) {
		ret = refuse(e, k, "its base tensor '%s' is an expert's (plan '%s'): LoRA on experts is not split", bt->name,
			     bp->name ? bp->name : "?");
		goto out;
	}
	if (pw && !s.stacked && s.kind != TPC_SPLIT_REPLICATE) {
		ret = refuse(e, k, "its base tensor '%s' holds experts in dim 0, but plan '%s' does not split it as stacked experts",
			     bt->name, bp->name ? bp->name : "?");
		goto out;
	}
	if (q < 0) { /* modules_to_save: exactly as the base tensor */
		const tpc_tensor *at = &ad->t[i];
		if (at->ndim != bt->ndim || memcmp(at->shape, bt->shape, sizeof(int64_t) * (size_t)at->ndim)) {
			ret = refuse(e, k, "a modules_to_save tensor whose shape is not its base tensor's ('%s')%s", bt->name, "");
			goto out;
		}
		st->saved++;
		if (!(it->rule = rule_copy(rules, s.rule, false)))
			ret = tpc_err_nomem(e);
		goto out;
	}
	/* the module is an embedding when the adapter holds lora_embedding_A for it */
	size_t ml = strlen(bname) - strlen(".weight");
	char *mod = tpc_strndup(bname, ml);
	char *mag = NULL;
	emb_key = mod ? cat2(PEFT_PREFIX, mod) : NULL;
	char *ek = emb_key ? cat2(emb_key, ".lora_embedding_A") : NULL;
	mag = emb_key ? cat2(emb_key, ".lora_magnitude_vector") : NULL;
	char *magw = mag ? cat2(mag, ".weight") : NULL;
	bool ok = mod && ek && magw;
	bool emb = ok && tpc_ckpt_find(ad, ek) >= 0;
	bool dora = ok && (tpc_ckpt_find(ad, mag) >= 0 || tpc_ckpt_find(ad, magw) >= 0);
	free(mod);
	free(ek);
	free(mag);
	free(magw);
	if (!ok) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	/* the base's dims: a Linear [out, in]; a Conv1D [in, out]; an
	 * embedding [vocab (in), hidden (out)]; fused experts [E, out, in] or
	 * [E, in, out] */
	int out_dim = pw ? (in_out ? 2 : 1) : (emb || (c->fifo && !emb)) ? 1 : 0;
	int in_dim = pw ? (in_out ? 1 : 2) : 1 - out_dim;
	if (pw ? ad->t[i].ndim != 2 || ad->t[i].shape[roles[q].dim] != bt->shape[roles[q].carries == D_OUT ? out_dim : in_dim]
	       : !fits(&ad->t[i], q, bt, emb, c->fifo && !emb)) {
		char sh[2][128];
		tpc_shape_str(&ad->t[i], sh[0], sizeof(sh[0]));
		tpc_shape_str(bt, sh[1], sizeof(sh[1]));
		char both[300];
		snprintf(both, sizeof(both), "%s against '%s' %s", sh[0], bt->name, sh[1]);
		ret = refuse(e, k, "shape %s: not a LoRA tensor of that base tensor%s", both, "");
		goto out;
	}
	ret = derive(k, q, bt, &s, emb, out_dim, in_dim, dora, rules, &it->rule, st, e);
out:
	free(bname);
	free(emb_key);
	return ret;
}

/* The plan's rules: a rule per pattern group whose members agree, else a rule
 * per member. */
static int emit(cJSON *arr, item *it, size_t n, const tpc_ckpt *ad, tpc_lora_shard_stats *st, tpc_err *e)
{
	for (size_t i = 0; i < n; i++) {
		it[i].group = (int)i;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(it[j].pat, it[i].pat)) {
				it[i].group = it[j].group;
				break;
			}
	}
	bool *split_group = tpc_calloc(n ? n : 1, sizeof(bool));
	if (!split_group)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < n; i++)
		if (strcmp(it[i].str, it[it[i].group].str))
			split_group[it[i].group] = true;
	int ret = 0;
	for (size_t i = 0; i < n && !ret; i++) {
		bool lead = it[i].group == (int)i;
		if (!lead && !split_group[it[i].group])
			continue;
		char *exact = split_group[it[i].group] ? name_pattern(ad->t[i].name, false) : NULL;
		cJSON *r = cJSON_CreateObject();
		if ((split_group[it[i].group] && !exact) || !r ||
		    !cJSON_AddStringToObject(r, "match", exact ? exact : it[i].pat)) {
			cJSON_Delete(r);
			free(exact);
			ret = tpc_err_nomem(e);
			break;
		}
		free(exact);
		for (cJSON *m = it[i].rule->child; m; m = m->next) {
			cJSON *d = cJSON_Duplicate(m, 1);
			if (!d) {
				ret = tpc_err_nomem(e);
				break;
			}
			cJSON_AddItemToObject(r, m->string, d);
		}
		cJSON_AddItemToArray(arr, r);
		st->rules++;
	}
	free(split_group);
	return ret;
}

int tpc_lora_shard_plan(const tpc_ckpt *base, const tpc_plan *bp, const tpc_model_facts *f, int tp, int ep,
			unsigned rflags, const tpc_ckpt *ad, const tpc_lora_cfg *c, tpc_buf *out, tpc_lora_shard_stats *st,
			tpc_err *e)
{
	cJSON *bj = NULL, *root = NULL, *arr = NULL;
	cJSON **rules = NULL;
	item *it = NULL;
	char *text = NULL;
	int ret = 0;
	memset(st, 0, sizeof(*st));
	if (!bp->json || !(bj = cJSON_Parse(bp->json))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	const cJSON *br = cJSON_GetObjectItemCaseSensitive(bj, "rules");
	size_t nr = (size_t)cJSON_GetArraySize(br);
	if (nr != bp->nrules || !(rules = tpc_calloc(nr ? nr : 1, sizeof(*rules))) ||
	    !(it = tpc_calloc(ad->n ? ad->n : 1, sizeof(*it)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	size_t k = 0;
	for (cJSON *r = br->child; r && k < nr; r = r->next)
		rules[k++] = r;
	for (size_t i = 0; i < ad->n && !ret; i++) {
		if ((ret = one(base, bp, f, tp, ep, rflags, ad, i, c, rules, &it[i], st, e)))
			break;
		if (!(it[i].pat = name_pattern(ad->t[i].name, true)) || !(it[i].str = cJSON_PrintUnformatted(it[i].rule)))
			ret = tpc_err_nomem(e);
	}
	if (ret)
		goto out;
	if (!(root = cJSON_CreateObject()) || !(arr = cJSON_CreateArray())) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	char name[256], desc[512];
	snprintf(name, sizeof(name), "%s-lora", bp->name ? bp->name : "plan");
	snprintf(desc, sizeof(desc),
		 "a PEFT LoRA adapter split beside its base (plan '%s'): B, lora_B.bias and DoRA magnitudes of a base "
		 "split along its output as the base, A of a base split along its input as the base, the rest whole",
		 bp->name ? bp->name : "?");
	cJSON_AddStringToObject(root, "name", name);
	cJSON_AddStringToObject(root, "description", desc);
	cJSON_AddNumberToObject(root, "pad_multiple", (double)bp->pad_multiple);
	/* the experts' patterns: an expert's adapter tensors go with it (--ep) */
	const cJSON *ex = cJSON_GetObjectItemCaseSensitive(bj, "experts");
	if (ex && !cJSON_AddItemToObject(root, "experts", cJSON_Duplicate(ex, 1))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	cJSON_AddItemToObject(root, "rules", arr);
	if ((ret = emit(arr, it, ad->n, ad, st, e)))
		goto out;
	cJSON_AddStringToObject(root, "fallback", "error");
	if (!(text = cJSON_PrintUnformatted(root))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	tpc_buf_adds(out, text);
	if (out->oom)
		ret = tpc_err_nomem(e);
out:
	for (size_t i = 0; it && i < ad->n; i++) {
		free(it[i].pat);
		free(it[i].str);
		cJSON_Delete(it[i].rule);
	}
	free(it);
	free(rules);
	free(text);
	cJSON_Delete(root);
	cJSON_Delete(bj);
	return ret;
}
