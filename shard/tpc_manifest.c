/* tpc_manifest.c - manifest JSON out and back in; see tpc_manifest.h. */
#include "tpc_manifest.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_io.h"
#include "tpc_util.h"

#define MAX_EXACT 9007199254740992.0

/* ---- reading ---- */

#define BAD(...) TPC_CORRUPT(e, path, -1, NULL, __VA_ARGS__)
#define BADT(name, ...) TPC_CORRUPT(e, path, -1, (name), __VA_ARGS__)

static int get_i64(const cJSON *o, const char *k, int64_t lo, int64_t hi, int64_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!cJSON_IsNumber(v) || v->valuedouble > MAX_EXACT || v->valuedouble < -MAX_EXACT ||
	    v->valuedouble != (double)(int64_t)v->valuedouble || v->valuedouble < (double)lo ||
	    v->valuedouble > (double)hi)
		return -1;
	*out = (int64_t)v->valuedouble;
	return 0;
}

static const char *get_str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A relative path inside the set folder: components joined by '/' (a layout's
 * rank folders, Megatron's release/mp_rank_TT/...), none empty or starting with
 * '.', no backslash. */
static bool safe_file_name(const char *f)
{
	if (!f || !*f || strlen(f) >= 256 || strchr(f, '\\'))
		return false;
	for (const char *c = f; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
		if (*c == '/' || *c == '.' || *c == '\0')
			return false;
	return true;
}

void tpc_manifest_release(tpc_manifest *m)
{
	if (!m)
		return;
	free(m->tool);
	free(m->set_id);
	free(m->format);
	free(m->plan_json);
	tpc_free_strv(m->files, m->files ? (size_t)m->tp * (size_t)m->pp : 0);
	tpc_free_strv(m->meta_k, m->nmeta);
	tpc_free_strv(m->meta_v, m->nmeta);
	for (size_t i = 0; i < m->n; i++) {
		free(m->t[i].name);
		free(m->t[i].shape);
		free(m->t[i].rank_hash);
	}
	free(m->t);
	memset(m, 0, sizeof(*m));
}

/* The tensor's "<checksum>" and "rank_<checksum>" members: both required
 * when the manifest names a checksum (a manifest that drops them would let a
 * tampered rank file through unchecked). */
static int parse_hashes(const tpc_manifest *m, tpc_manifest_tensor *mt, const cJSON *o, const char *name,
			const char *path, tpc_err *e)
{
	const char *hn = tpc_hash_name(m->checksum);
	size_t hl = tpc_hash_len(m->checksum);
	char rk[32];
	if (m->checksum == TPC_HASH_NONE)
		return 0;
	snprintf(rk, sizeof(rk), "rank_%s", hn);
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, hn);
	if (tpc_unhex(cJSON_IsString(h) ? h->valuestring : NULL, mt->hash, hl))
		return BADT(name, "manifest: \"%s\" is missing or not %zu lowercase hex digits", hn, 2 * hl);
	mt->has_hash = true;
	const cJSON *rh = cJSON_GetObjectItemCaseSensitive(o, rk);
	if (!cJSON_IsArray(rh) || cJSON_GetArraySize(rh) != m->tp)
		return BADT(name, "manifest: \"%s\" must list %d checksums", rk, m->tp);
	mt->rank_hash = tpc_calloc((size_t)m->tp, TPC_HASH_MAX);
	if (!mt->rank_hash)
		return tpc_err_nomem(e);
	int r = 0;
	for (const cJSON *x = rh->child; x; x = x->next, r++) {
		if (!tpc_split_holds(&mt->split, m->tp, r)) {
			/* an expert on another EP group: no tensor, no checksum */
			if (!cJSON_IsNull(x))
				return BADT(name, "manifest: %s[%d] must be null: rank %d does not hold expert %lld", rk, r,
					    r, (long long)mt->split.expert);
			continue;
		}
		if (tpc_unhex(cJSON_IsString(x) ? x->valuestring : NULL, mt->rank_hash[r], hl))
			return BADT(name, "manifest: %s[%d] is not %zu lowercase hex digits", rk, r, 2 * hl);
	}
	return 0;
}

/* A part's "rank_sizes" (an uneven split: vLLM's cut of gpt-oss's MXFP4
 * intermediate, the pad not stored): absent, or each rank's rows, which must
 * be (size + pad) / gtp but past the part's end (none on a rank that starts
 * past it). 0 or -1. */
static int uneven_part(tpc_split_part *pt, const cJSON *rs, int gtp)
{
	if (!rs)
		return 0;
	if (!cJSON_IsArray(rs) || cJSON_GetArraySize(rs) != gtp || !pt->pad || pt->replicas > 1 || pt->heads)
		return -1;
	int64_t len = (pt->size + pt->pad) / gtp;
	int r = 0;
	for (const cJSON *v = rs->child; v; v = v->next, r++) {
		int64_t start = r * len, want = start >= pt->size ? 0 : start + len > pt->size ? pt->size - start : len;
		if (!cJSON_IsNumber(v) || v->valuedouble != (double)want)
			return -1;
	}
	pt->uneven = true;
	return 0;
}

/* "tied_to": an earlier tensor, itself untied, of the same dtype and shape
 * (and checksum): the two were one storage in the input. */
static int parse_tie(tpc_manifest *m, tpc_manifest_tensor *mt, const cJSON *o, size_t idx, const char *path,
		     tpc_err *e)
{
	const cJSON *tv = cJSON_GetObjectItemCaseSensitive(o, "tied_to");
	mt->tied_to = -1;
	if (!tv)
		return 0;
	for (size_t j = 0; cJSON_IsString(tv) && j < idx && mt->tied_to < 0; j++)
		if (!strcmp(m->t[j].name, tv->valuestring))
			mt->tied_to = (int64_t)j;
	if (mt->tied_to < 0)
		return BADT(mt->name, "manifest: \"tied_to\" must name a tensor listed before this one");
	const tpc_manifest_tensor *to = &m->t[mt->tied_to];
	if (to->tied_to >= 0)
		return BADT(mt->name, "manifest: \"tied_to\" names a tensor that is itself tied to another");
	if (to->dtype != mt->dtype || to->ndim != mt->ndim ||
	    memcmp(to->shape, mt->shape, (size_t)mt->ndim * sizeof(int64_t)))
		return BADT(mt->name, "manifest: tied to a tensor of another dtype or shape");
	if (to->has_hash && mt->has_hash && memcmp(to->hash, mt->hash, tpc_hash_len(m->checksum)))
		return BADT(mt->name, "manifest: tied to a tensor with another checksum");
	return 0;
}

static int parse_tensor(tpc_manifest *m, tpc_manifest_tensor *mt, const cJSON *o, size_t idx, const char *path,
			tpc_err *e)
{
	const char *name = get_str(o, "name");
	int64_t v;
	if (!cJSON_IsObject(o) || !name)
		return BAD("manifest tensor %zu: needs a \"name\"", idx);
	if (!(mt->name = tpc_strdup(name)))
		return tpc_err_nomem(e);
	mt->dtype = tpc_dtype_from_st(get_str(o, "dtype") ? get_str(o, "dtype") : "");
	if (!mt->dtype)
		mt->dtype = tpc_dtype_from_torch(get_str(o, "dtype") ? get_str(o, "dtype") : "");
	if (!mt->dtype)
		return BADT(name, "manifest: unknown dtype");
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shape");
	if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > TPC_MAX_NDIM)
		return BADT(name, "manifest: \"shape\" must be an array of at most %d sizes", TPC_MAX_NDIM);
	mt->ndim = cJSON_GetArraySize(sh);
	mt->shape = tpc_calloc((size_t)(mt->ndim ? mt->ndim : 1), sizeof(int64_t));
	if (!mt->shape)
		return tpc_err_nomem(e);
	int d = 0;
	for (const cJSON *s = sh->child; s; s = s->next, d++) {
		if (!cJSON_IsNumber(s) || s->valuedouble < 0 || s->valuedouble > MAX_EXACT ||
		    s->valuedouble != (double)(int64_t)s->valuedouble)
			return BADT(name, "manifest: shape[%d] is not a size", d);
		mt->shape[d] = (int64_t)s->valuedouble;
	}
	if (get_i64(o, "stage", 0, m->pp - 1, &v))
		return BADT(name, "manifest: \"stage\" must be 0 to %d", m->pp - 1);
	mt->stage = (int)v;
	tpc_split *sp = &mt->split;
	memset(sp, 0, sizeof(*sp));
	const char *kind = get_str(o, "split");
	static const char *const kinds[] = {"replicate", "col", "row", "vocab", "dim"};
	int kk = -1;
	for (int k = 0; kind && k < 5; k++)
		if (!strcmp(kind, kinds[k]))
			kk = k;
	if (kk < 0)
		return BADT(name, "manifest: unknown split");
	sp->kind = (tpc_split_kind)kk;
	if (get_i64(o, "dim", -1, mt->ndim - 1, &v))
		return BADT(name, "manifest: \"dim\" must be -1 to %d", mt->ndim - 1);
	sp->dim = (int)v;
	if ((sp->kind == TPC_SPLIT_REPLICATE) != (sp->dim < 0))
		return BADT(name, "manifest: split and dim disagree");
	if (get_i64(o, "rule", -1, TPC_PLAN_MAX_RULES, &v))
		return BADT(name, "manifest: bad \"rule\"");
	sp->rule = (int)v;
	sp->row_bias = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "row_bias"));
	mt->matched = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "matched"));
	sp->scalar = mt->ndim == 0;
	const cJSON *ex = cJSON_GetObjectItemCaseSensitive(o, "expert"), *stk = cJSON_GetObjectItemCaseSensitive(o, "stacked");
	if (stk && (!cJSON_IsTrue(stk) || ex || mt->ndim < 1))
		return BADT(name, "manifest: \"stacked\" is true on a tensor of at least one dim, without \"expert\"");
	if (stk) {
		sp->stacked = true;
		if (m->ep > 1 && mt->shape[0] != m->experts)
			return BADT(name, "manifest: %lld experts stacked in dim 0, the set has %lld", (long long)mt->shape[0],
				    (long long)m->experts);
		if (m->ep > 1) {
			sp->ep = m->ep;
			sp->ep_group = -1;
			sp->ep_placement = m->ep_placement;
		}
		if (sp->dim == 0)
			return BADT(name, "manifest: a stacked tensor is split inside its experts (dim 1 on), not along dim 0");
	}
	if (ex) {
		int64_t g;
		if (m->ep <= 1)
			return BADT(name, "manifest: an \"expert\" in a set without expert parallelism");
		if (get_i64(o, "expert", 0, m->experts - 1, &v) || get_i64(o, "ep_group", 0, m->ep - 1, &g))
			return BADT(name, "manifest: \"expert\" must be 0 to %lld and \"ep_group\" 0 to %d",
				    (long long)m->experts - 1, m->ep - 1);
		if (g != tpc_ep_owner(m->ep_placement, v, m->experts, m->ep))
			return BADT(name, "manifest: expert %lld is on group %lld, but %s placement puts it on group %d",
				    (long long)v, (long long)g, tpc_ep_placement_name(m->ep_placement),
				    tpc_ep_owner(m->ep_placement, v, m->experts, m->ep));
		sp->ep = m->ep;
		sp->ep_group = (int)g;
		sp->expert = v;
	}
	if (!sp->ep && !sp->stacked)
		sp->dp = m->dp; /* a dense tensor: the same slices on every data-parallel rank */
	int gtp = tpc_split_tp(sp, m->tp); /* the ranks it is split over */
	const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "shape_of_rank");
	if (so) {
		int64_t d, len;
		if (get_i64(so, "dim", 0, 1, &d) || get_i64(so, "len", 1, INT64_MAX / 4 / TPC_MAX_TP, &len) ||
		    mt->ndim != 1 || mt->shape[0] != 2 || (mt->dtype != TPC_I64 && mt->dtype != TPC_I32) ||
		    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "split")) ||
		    strcmp(cJSON_GetObjectItemCaseSensitive(o, "split")->valuestring, "replicate"))
			return BADT(name, "manifest: \"shape_of_rank\" needs a replicated [2] integer tensor, \"dim\" 0 or 1 and a \"len\"");
		sp->is_shape = true;
		sp->shape_dim = (int)d;
		sp->shape_len = len;
	}
	const cJSON *parts = cJSON_GetObjectItemCaseSensitive(o, "parts");
	if (!cJSON_IsArray(parts) || cJSON_GetArraySize(parts) > TPC_PLAN_MAX_PARTS)
		return BADT(name, "manifest: \"parts\" must be an array of at most %d", TPC_PLAN_MAX_PARTS);
	if (sp->dim >= 0) {
		int np = cJSON_GetArraySize(parts);
		int64_t sum = 0;
		if (np < 1)
			return BADT(name, "manifest: a split tensor needs parts");
		sp->nparts = np;
		int k = 0;
		for (const cJSON *p = parts->child; p; p = p->next, k++) {
			tpc_split_part *pt = &sp->part[k];
			int64_t rep;
			if (get_i64(p, "size", 0, INT64_MAX / 4, &pt->size) || get_i64(p, "pad", 0, INT64_MAX / 4, &pt->pad) ||
			    get_i64(p, "heads", 0, INT64_MAX / 4, &pt->heads) || get_i64(p, "replicas", 1, gtp, &rep))
				return BADT(name, "manifest: part %d needs size, pad, heads and replicas", k);
			pt->replicas = (int)rep;
			pt->head_kind = pt->replicas > 1 ? TPC_HEADS_KV : pt->heads ? TPC_HEADS_Q : TPC_HEADS_NONE;
			if (pt->replicas > 1) {
				if (pt->pad || !pt->heads || pt->heads * pt->replicas != gtp || pt->size % pt->heads)
					return BADT(name, "manifest: part %d: %lld heads on %d replicas do not fit tp %d", k,
						    (long long)pt->heads, pt->replicas, gtp);
			} else if ((pt->size + pt->pad) % gtp) {
				return BADT(name, "manifest: part %d: %lld + %lld padding rows do not divide by tp %d", k,
					    (long long)pt->size, (long long)pt->pad, gtp);
			}
			int ret = uneven_part(pt, cJSON_GetObjectItemCaseSensitive(p, "rank_sizes"), gtp);
			if (ret)
				return BADT(name, "manifest: part %d: \"rank_sizes\" must list the rows each of its %d ranks holds of %lld + %lld unstored padding rows, %lld a rank and the last ones fewer",
					    k, gtp, (long long)pt->size, (long long)pt->pad, (long long)((pt->size + pt->pad) / gtp));
			if (tpc_add_i64(sum, pt->size, &sum))
				return BADT(name, "manifest: part sizes overflow");
		}
		if (sum != mt->shape[sp->dim])
			return BADT(name, "manifest: parts add up to %lld but dim %d has %lld", (long long)sum, sp->dim,
				    (long long)mt->shape[sp->dim]);
	}
	int ret = parse_hashes(m, mt, o, name, path, e);
	return ret ? ret : parse_tie(m, mt, o, idx, path, e);
}

/* "model": the facts the set was split with */
static void read_model(tpc_manifest *m, const cJSON *model)
{
	if (cJSON_IsObject(model)) {
		get_i64(model, "heads", 1, INT64_MAX / 4, &m->facts.heads);
		get_i64(model, "kv_heads", 1, INT64_MAX / 4, &m->facts.kv_heads);
		get_i64(model, "head_dim", 1, INT64_MAX / 4, &m->facts.head_dim);
		get_i64(model, "hidden", 1, INT64_MAX / 4, &m->facts.hidden);
		get_i64(model, "vocab", 1, INT64_MAX / 4, &m->facts.vocab);
		get_i64(model, "layers", 1, INT64_MAX / 4, &m->facts.layers);
		get_i64(model, "ssm_heads", 1, INT64_MAX / 4, &m->facts.ssm_heads);
		get_i64(model, "ssm_head_dim", 1, INT64_MAX / 4, &m->facts.ssm_head_dim);
		get_i64(model, "ssm_groups", 1, INT64_MAX / 4, &m->facts.ssm_groups);
		get_i64(model, "ssm_state", 1, INT64_MAX / 4, &m->facts.ssm_state);
		get_i64(model, "linear_num_key_heads", 1, INT64_MAX / 4, &m->facts.lin_k_heads);
		get_i64(model, "linear_num_value_heads", 1, INT64_MAX / 4, &m->facts.lin_v_heads);
		get_i64(model, "linear_key_head_dim", 1, INT64_MAX / 4, &m->facts.lin_k_dim);
		get_i64(model, "linear_value_head_dim", 1, INT64_MAX / 4, &m->facts.lin_v_dim);
		/* head facts only shard's command line gave: their origin says so,
		 * and a set sharded from this one records them again */
		const cJSON *unv = cJSON_GetObjectItemCaseSensitive(model, "unverified"), *u;
		if (!cJSON_IsArray(unv))
			unv = NULL;
		cJSON_ArrayForEach(u, unv) {
			for (int k = TPC_FACT_HEADS; k <= TPC_FACT_HEAD_DIM && cJSON_IsString(u); k++)
				if (!strcmp(u->valuestring, tpc_fact_name(k)))
					snprintf(m->facts.origin[k], sizeof(m->facts.origin[k]),
						 "%s at shard, unverified (the set's manifest)",
						 k == TPC_FACT_HEADS ? "--heads" : k == TPC_FACT_KV_HEADS ? "--kv-heads" : "--head-dim");
		}
		const cJSON *act = cJSON_GetObjectItemCaseSensitive(model, "activation_fn");
		if (cJSON_IsString(act))
			m->facts.ff_act = tpc_ff_act_parse(act->valuestring);
	}
}

TPC_PARSE_FN(parse_manifest, tpc_manifest_from_buffer)

int tpc_manifest_from_file(tpc_manifest *m, const char *path, tpc_err *e)
{
	memset(m, 0, sizeof(*m));
	return tpc_parse_file(path, TPC_MANIFEST_MAX_BYTES, parse_manifest, m, e);
}

int tpc_manifest_from_buffer(tpc_manifest *m, const char *text, size_t len, const char *path, tpc_err *e)
{
	cJSON *root = NULL;
	int ret = 0;
	int64_t v;
	memset(m, 0, sizeof(*m));
	if (len > TPC_MANIFEST_MAX_BYTES)
		return BAD("manifest is %zu bytes, over the limit", len);
	root = cJSON_ParseWithLength(text, len);
	if (!root || !cJSON_IsObject(root)) {
		ret = BAD("manifest is not a JSON object");
		goto out;
	}
	if (get_i64(root, "tpconv_manifest", 1, 1, &v)) {
		ret = BAD("not a tpconv manifest of version 1");
		goto out;
	}
	const char *tool = get_str(root, "tool"), *id = get_str(root, "set_id"), *fmt = get_str(root, "format");
	const char *lay = get_str(root, "layout"), *ck = get_str(root, "checksum");
	bool fmt_ok = false;
	if (lay && (m->layout = tpc_layout_by_name(lay)))
		for (const char *const *f = m->layout->formats; fmt && *f; f++)
			fmt_ok = fmt_ok || !strcmp(fmt, *f); /* a format the layout writes */
	if (!tool || !id || !fmt || !lay || strlen(id) > 64 || !fmt_ok || !m->layout) {
		ret = BAD("manifest: bad or missing tool, set_id, layout or format");
		goto out;
	}
	if (!(m->tool = tpc_strdup(tool)) || !(m->set_id = tpc_strdup(id)) || !(m->format = tpc_strdup(fmt))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if (ck && !tpc_hash_from_name(ck, &m->checksum)) {
		ret = BAD("manifest: unknown checksum '%s' (this tpconv knows xxh3-128, sha256 and none)", ck);
		goto out;
	}
	int64_t tp, pp, dp = 1;
	if (get_i64(root, "tp", 1, TPC_MAX_TP, &tp) || get_i64(root, "pp", 1, TPC_MAX_TP, &pp) ||
	    (cJSON_GetObjectItemCaseSensitive(root, "dp") && get_i64(root, "dp", 1, TPC_MAX_TP, &dp)) ||
	    tp * dp > TPC_MAX_TP || tp * dp * pp > TPC_MAX_RANKS) {
		ret = BAD("manifest: bad tp, dp or pp");
		goto out;
	}
	/* the stage's ranks: tensor-parallel x data-parallel (tpc_shard.h) */
	m->dp = (int)dp;
	tp *= dp;
	m->tp = (int)tp;
	m->pp = (int)pp;
	m->ep = 1;
	if (cJSON_GetObjectItemCaseSensitive(root, "ep")) {
		const char *pl = get_str(root, "ep_placement");
		if (get_i64(root, "ep", 1, tp, &v) || tp % v || get_i64(root, "experts", v, INT64_MAX / 4, &m->experts) ||
		    m->experts % v || !pl || (strcmp(pl, "contiguous") && strcmp(pl, "round-robin"))) {
			ret = BAD("manifest: \"ep\" must divide tp x dp, with \"experts\" a multiple of it and \"ep_placement\" contiguous or round-robin");
			goto out;
		}
		m->ep = (int)v;
		m->ep_placement = !strcmp(pl, "round-robin") ? TPC_EP_ROUND_ROBIN : TPC_EP_CONTIGUOUS;
	}
	read_model(m, cJSON_GetObjectItemCaseSensitive(root, "model"));
	const cJSON *plan = cJSON_GetObjectItemCaseSensitive(root, "plan");
	if (cJSON_IsObject(plan) && !(m->plan_json = cJSON_PrintUnformatted(plan))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
	if (meta && !cJSON_IsObject(meta)) {
		ret = BAD("manifest: \"metadata\" must be an object of strings");
		goto out;
	}
	size_t nm = meta ? (size_t)cJSON_GetArraySize(meta) : 0;
	m->meta_k = tpc_calloc(nm ? nm : 1, sizeof(char *));
	m->meta_v = tpc_calloc(nm ? nm : 1, sizeof(char *));
	if (!m->meta_k || !m->meta_v) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (const cJSON *x = meta ? meta->child : NULL; x; x = x->next) {
		if (!cJSON_IsString(x)) {
			ret = BAD("manifest: metadata value for '%s' is not a string", x->string);
			goto out;
		}
		m->meta_k[m->nmeta] = tpc_strdup(x->string);
		m->meta_v[m->nmeta] = tpc_strdup(x->valuestring);
		if (!m->meta_k[m->nmeta++] || !m->meta_v[m->nmeta - 1]) {
			ret = tpc_err_nomem(e);
			goto out;
		}
	}
	const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(root, "ranks");
	int nr = m->tp * m->pp;
	if (!cJSON_IsArray(ranks) || cJSON_GetArraySize(ranks) != nr) {
		ret = BAD("manifest: \"ranks\" must list %d rank files", nr);
		goto out;
	}
	m->files = tpc_calloc((size_t)nr, sizeof(char *));
	if (!m->files) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	int r = 0;
	for (const cJSON *x = ranks->child; x; x = x->next, r++) {
		const char *f = get_str(x, "file");
		if (get_i64(x, "rank", r, r, &v) || !safe_file_name(f)) {
			ret = BAD("manifest: rank entry %d needs \"rank\": %d and a plain \"file\" name", r, r);
			goto out;
		}
		for (int q = 0; q < r; q++)
			if (!strcmp(m->files[q], f)) {
				ret = BAD("manifest: ranks %d and %d name the same file '%s'", q, r, f);
				goto out;
			}
		if (!(m->files[r] = tpc_strdup(f))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
	}
	const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
	if (!cJSON_IsArray(tensors)) {
		ret = BAD("manifest: \"tensors\" must be an array");
		goto out;
	}
	size_t nt = (size_t)cJSON_GetArraySize(tensors);
	m->t = tpc_calloc(nt ? nt : 1, sizeof(*m->t));
	if (!m->t) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (const cJSON *x = tensors->child; x; x = x->next) {
		size_t i = m->n++;
		if ((ret = parse_tensor(m, &m->t[i], x, i, path, e)))
			goto out;
	}
out:
	cJSON_Delete(root);
	if (ret)
		tpc_manifest_release(m);
	return ret;
}

