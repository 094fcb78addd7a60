/* tpc_merge.c - a shard set back into one checkpoint description; see tpc_shard.h.
 *
 * The merged checkpoint borrows the source tables of all opened rank files
 * (one union table), and each original tensor is a composite of rank views:
 * for every part, the tp rank slices concatenated along the split dimension
 * and narrowed to the part's true size (padding dropped); for replicated KV
 * heads, one replica per head after checking the others are equal; for a
 * replicated tensor, rank 0's copy after checking the others. Nothing is
 * read but what these checks need until a writer (or a reshard) runs. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_manifest.h"
#include "tpc_shard.h"
#include "tpc_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- what kind of set ---- */

tpc_set_kind tpc_set_detect(const char *dir, const tpc_layout **layout)
{
	const tpc_layout *l = NULL;
	tpc_set_kind k = TPC_SET_NONE;
	if (layout)
		*layout = NULL;
	if (!tpc_is_dir(dir))
		return TPC_SET_NONE;
	char *man = tpc_path_join(dir, TPC_MANIFEST_NAME);
	bool have = man && tpc_exists(man);
	free(man);
	if (have)
		return TPC_SET_MANIFEST;
	if ((l = tpc_layout_detect_foreign(dir)))
		k = TPC_SET_FOREIGN;
	if (layout)
		*layout = l;
	return k;
}

/* ---- opening ---- */

void tpc_merge_release(tpc_merge *m)
{
	if (!m)
		return;
	if (m->kind != TPC_SET_CKPT)
		tpc__return_sources(&m->out); /* borrowed from the rank files */
	tpc__merge_check_free(m->check); /* before the sources it reads go */
	tpc_ckpt_release(&m->out);
	for (int r = 0; m->rank && r < m->nranks; r++)
		tpc_ckpt_release(&m->rank[r]);
	free(m->rank);
	free(m->plan_json);
	memset(m, 0, sizeof(*m));
}

/* Open every rank through its layout (which gives the tensors back as split).
 * names[r] / nnames[r]: the original names of rank r's stage, when known. */
static int open_ranks(tpc_merge *m, char **paths, const tpc_model_facts *facts, char **const *names,
		      const size_t *nnames, tpc_err *e)
{
	m->rank = tpc_calloc((size_t)m->nranks, sizeof(*m->rank));
	if (!m->rank)
		return tpc_err_nomem(e);
	for (int r = 0; r < m->nranks; r++) {
		tpc_ckpt_init(&m->rank[r]);
		if (!tpc_layout_rank_exists(m->layout, paths[r])) {
			return tpc_err_at(e, TPC_EINPUT, paths[r], NULL, "rank %d (tp %d, pp %d) of the shard set is missing", r, r % m->tp,
				    r / m->tp);
		}
	}
	int ret = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
	for (int r = 0; r < m->nranks; r++) {
		tpc_err le;
		tpc_err_init(&le);
		tpc_layout_rank_ctx c = {r, r % m->tp, r / m->tp, m->tp, m->pp, facts, NULL, 0, m->state};
		if (names) {
			c.names = names[r / m->tp];
			c.nnames = nnames[r / m->tp];
		}
		int rr = tpc_layout_open_rank(m->layout, paths[r], &c, &m->rank[r], &le);
		if (rr) {
#ifdef _OPENMP
#pragma omp critical(tpc_merge_err)
#endif
			{
				if (!ret) {
					ret = rr;
					*e = le;
				}
			}
		}
	}
	return ret;
}

static int union_sources(tpc_merge *m, int *base, tpc_err *e)
{
	const tpc_ckpt **srcs = tpc_calloc((size_t)m->nranks, sizeof(*srcs));
	int ret;
	if (!srcs)
		return tpc_err_nomem(e);
	for (int r = 0; r < m->nranks; r++)
		srcs[r] = &m->rank[r];
	ret = tpc_ckpt_borrow_all(&m->out, srcs, (size_t)m->nranks, base, true, e);
	free(srcs);
	return ret;
}

void tpc__tensor_shift_src(tpc_tensor *t, int by)
{
	if (t->src >= 0)
		t->src += by;
	t->storage = -1;
	t->alias_of = -1;
	for (int k = 0; k < t->nparts; k++)
		tpc__tensor_shift_src(&t->parts[k], by);
}

/* Rank r's tensor `name` as a view in the union, or an error naming the file. */
static int rank_view(tpc_merge *m, const int *base, char **paths, int r, const char *name, tpc_tensor *out,
		     tpc_err *e)
{
	int64_t ix = tpc_ckpt_find(&m->rank[r], name);
	if (ix < 0) {
		return tpc_err_at(e, TPC_EINPUT, paths[r], name, "rank %d's file lacks this tensor (a rank file from another set?)", r);
	}
	if (tpc_tensor_copy(out, &m->rank[r].t[ix]))
		return tpc_err_nomem(e);
	tpc__tensor_shift_src(out, base[r]);
	return 0;
}

/* Rank r's shape (an uneven split: the rows that rank stores). */
static void rank_shape(const int64_t *shape, int ndim, const tpc_split *s, int tp, int r, int64_t *out)
{
	memcpy(out, shape, (size_t)ndim * sizeof(int64_t));
	if (s->dim >= 0)
		out[s->dim] = tpc_split_rank_off(s, s->nparts, tp, r);
	if (s->stacked && s->ep > 1 && ndim >= 1)
		out[0] = shape[0] / s->ep; /* the group's experts */
}

static int differ(tpc_merge *m, const tpc_merge_opts *o, const char *name, const char *what, int ra, int rb,
		  tpc_err *e)
{
	if (o->take_rank0) {
		if (!m->ndiffer++)
			snprintf(m->differ_first, sizeof(m->differ_first), "%s (ranks %d and %d)", name, ra, rb);
		return 0;
	}
	return tpc_err_at(e, TPC_EINPUT, NULL, name, "%s differs between rank %d and rank %d (use --take-rank0 to keep rank %d's copy)",
		    what, ra, rb, ra);
}

/* Part k of an uneven split (one part, no replicas: tpc__quant_mx_cut) from
 * the views v[0..tp): each rank's rows of it, concatenated along d. */
static int uneven_part(const tpc_split *s, int k, int stp, tpc_tensor *v, int d, int tp, tpc_tensor *out, tpc_err *e)
{
	tpc_tensor *sl = tpc_calloc((size_t)tp, sizeof(*sl));
	int have = 0, ret = sl ? 0 : tpc_err_nomem(e);
	for (int t = 0; t < tp && !ret; t++) {
		int64_t n = tpc_split_rank_take(s, k, stp, t);
		if (!n)
			continue;
		if (tpc_tensor_narrow(&sl[have], &v[t], d, tpc_split_rank_off(s, k, stp, t), n))
			ret = tpc_err_set(e, TPC_EINPUT, "internal: cannot slice rank %d's part %d", t, k);
		else
			have++;
	}
	if (!ret && have == 1) {
		*out = sl[0];
		have = 0;
	} else if (!ret && (have == 0 || tpc_tensor_init_cat(out, sl, have, d))) {
		ret = tpc_err_nomem(e);
	}
	for (int j = 0; j < have; j++)
		tpc_tensor_release(&sl[j]);
	free(sl);
	return ret;
}

/* The original tensor from the views v[0..tp) of the ranks it is split over
 * (tp = tpc_split_tp: all of a stage, or an expert's EP group), rank r0 the
 * first of them. */
static int rebuild(tpc_merge *m, const tpc_merge_opts *o, const char *name, const tpc_split *s, tpc_tensor *v,
		   int r0, bool replicas_known_equal, const uint8_t (*rh)[TPC_HASH_MAX], size_t hlen, tpc_tensor *out,
		   tpc_err *e)
{
	int tp = tpc_split_tp(s, m->tp), ret = 0;
	const tpc_ckpt *ck = &m->out;
	bool eq;
	if (s->dim < 0) {
		for (int t = 1; t < tp && !replicas_known_equal; t++) {
			if ((ret = tpc_tensors_equal(ck, &v[0], &v[t], &eq, e)))
				return ret;
			if (!eq && (ret = differ(m, o, name, "replicated tensor", r0, r0 + t, e)))
				return ret;
			if (!eq)
				break;
		}
		return tpc_tensor_copy(out, &v[0]) ? tpc_err_nomem(e) : 0;
	}
	int d = s->dim;
	tpc_tensor parts[TPC_PLAN_MAX_PARTS];
	int np = 0;
	int64_t roff = 0;
	memset(parts, 0, sizeof(parts));
	for (int k = 0; k < s->nparts && !ret; k++) {
		const tpc_split_part *p = &s->part[k];
		int64_t len = tpc_split_rank_len(s, k, m->tp);
		if (p->uneven) { /* each rank its own rows, the pad unstored: nothing to cut */
			ret = uneven_part(s, k, m->tp, v, d, tp, &parts[np], e);
			np += !ret;
			continue;
		}
		int nsl = p->replicas > 1 ? (int)p->heads : tp;
		tpc_tensor *sl = tpc_calloc((size_t)nsl, sizeof(*sl));
		int have = 0;
		if (!sl) {
			ret = tpc_err_nomem(e);
			break;
		}
		for (int j = 0; j < nsl && !ret; j++) {
			int t = p->replicas > 1 ? j * p->replicas : j;
			if (tpc_tensor_narrow(&sl[j], &v[t], d, roff, len)) {
				ret = tpc_err_set(e, TPC_EINPUT, "internal: cannot slice rank %d's part %d", t, k);
				break;
			}
			have++;
			for (int q = 1; q < p->replicas && !ret; q++) {
				tpc_tensor other;
				if (tpc_tensor_narrow(&other, &v[t + q], d, roff, len)) {
					ret = tpc_err_set(e, TPC_EINPUT, "internal: cannot slice rank %d", t + q);
					break;
				}
				/* a KV head that is the whole of both rank tensors:
				 * equal checked checksums (rh, the manifest's, checked
				 * before anything merged is used) stand for equal bytes */
				if (rh && hlen && s->nparts == 1 && sl[j].numel == v[t].numel &&
				    other.numel == v[t + q].numel && !memcmp(rh[t], rh[t + q], hlen))
					eq = true;
				else
					ret = tpc_tensors_equal(ck, &sl[j], &other, &eq, e);
				tpc_tensor_release(&other);
				if (!ret && !eq) {
					char what[96];
					snprintf(what, sizeof(what), "replicated key/value head %d%s", j,
						 s->nparts > 1 ? " of a fused part" : "");
					ret = differ(m, o, name, what, r0 + t, r0 + t + q, e);
					break;
				}
			}
		}
		if (!ret) {
			tpc_tensor whole;
			if (have == 1) {
				whole = sl[0];
				have = 0;
			} else if (tpc_tensor_init_cat(&whole, sl, have, d)) {
				ret = tpc_err_nomem(e);
			}
			if (!ret && p->pad) {
				tpc_tensor cut;
				if (tpc_tensor_narrow(&cut, &whole, d, 0, p->size))
					ret = tpc_err_nomem(e);
				tpc_tensor_release(&whole);
				whole = cut;
			}
			if (!ret)
				parts[np++] = whole;
		}
		for (int j = 0; j < have; j++)
			tpc_tensor_release(&sl[j]);
		free(sl);
		roff += len;
	}
	if (!ret) {
		if (np == 1) {
			*out = parts[0];
			np = 0;
		} else if (tpc_tensor_init_cat(out, parts, np, d)) {
			ret = tpc_err_nomem(e);
		}
	}
	for (int k = 0; k < np; k++)
		tpc_tensor_release(&parts[k]);
	if (!ret) {
		out->dtype = v[0].dtype;
		out->nbytes = out->numel * tpc_dtype_bits(out->dtype) / 8;
	}
	return ret;
}

/* A stacked tensor under expert parallelism: each group's experts rebuilt
 * from its ranks (v[g * tp/ep ..]), then put back in expert order along dim
 * 0 (contiguous: the groups one after the other; round-robin: expert e is
 * row e / ep of group e % ep's). */
static int rebuild_stacked(tpc_merge *m, const tpc_merge_opts *o, const char *name, const tpc_split *s,
			   const int64_t *shape, tpc_tensor *v, int r0, const bool *known_equal,
			   const uint8_t (*rh)[TPC_HASH_MAX], size_t hlen, tpc_tensor *out, tpc_err *e)
{
	int gtp = tpc_split_tp(s, m->tp), ep = s->ep, ret = 0, ng = 0;
	int64_t n = shape[0];
	tpc_tensor *grp = tpc_calloc((size_t)ep, sizeof(*grp)), *rows = NULL;
	if (!grp)
		return tpc_err_nomem(e);
	for (; ng < ep && !ret; ng++)
		if ((ret = rebuild(m, o, name, s, &v[ng * gtp], r0 + ng * gtp, known_equal[ng], rh ? rh + ng * gtp : NULL,
				   hlen, &grp[ng], e)))
			break;
	if (!ret && s->ep_placement != TPC_EP_ROUND_ROBIN) {
		ret = tpc_tensor_init_cat(out, grp, ep, 0) ? tpc_err_nomem(e) : 0;
	} else if (!ret) {
		int64_t k = 0;
		if (!(rows = tpc_calloc((size_t)n, sizeof(*rows))))
			ret = tpc_err_nomem(e);
		for (; !ret && k < n; k++)
			if (tpc_tensor_narrow(&rows[k], &grp[k % ep], 0, k / ep, 1))
				ret = tpc_err_nomem(e);
		if (!ret && tpc_tensor_init_cat(out, rows, (int)n, 0))
			ret = tpc_err_nomem(e);
		for (int64_t j = 0; j < k - (ret && k < n ? 1 : 0); j++)
			tpc_tensor_release(&rows[j]);
		free(rows);
	}
	if (!ret) {
		out->dtype = v[0].dtype;
		out->nbytes = out->numel * tpc_dtype_bits(out->dtype) / 8;
	}
	for (int g = 0; g < ng; g++)
		tpc_tensor_release(&grp[g]);
	free(grp);
	return ret;
}

/* A layer's shape (compressed-tensors weight_shape): every rank holds its
 * slice's, entry shape_dim = shape_len; the original has shape_len * gtp
 * there. *t (rank's copy) becomes the original, in memory the merged
 * checkpoint owns, confirmed against the manifest checksum when there is one. */
static int merged_shape(tpc_merge *m, const tpc_manifest_tensor *mt, tpc_hash_alg alg, int gtp, tpc_tensor *t,
			const char *path, tpc_err *e)
{
	int64_t v[2];
	int ret, idx;
	if ((ret = tpc__shape_read(&m->out, t, v, e)))
		return ret;
	if (v[mt->split.shape_dim] != mt->split.shape_len) {
		return tpc_err_at(e, TPC_EINPUT, path, mt->name, "the rank's copy says %lld in entry %d, the manifest %lld (a rank file from another set?)",
			    (long long)v[mt->split.shape_dim], mt->split.shape_dim, (long long)mt->split.shape_len);
	}
	v[mt->split.shape_dim] *= gtp;
	if ((ret = tpc__shape_add(&m->out, t, v, "a layer's shape, merged", &idx, e)))
		return ret;
	if (mt->has_hash && alg != TPC_HASH_NONE) {
		const tpc_map *src = &m->out.src[idx];
		uint8_t d[TPC_HASH_MAX];
		tpc_hash h;
		if ((ret = tpc_hash_begin(&h, alg, e)))
			return ret;
		tpc_hash_update(&h, src->data, (size_t)src->size);
		tpc_hash_final(&h, d);
		if (memcmp(d, mt->hash, tpc_hash_len(alg))) {
			return tpc_err_at(e, TPC_EINPUT, NULL, mt->name, "the rebuilt shape does not match the manifest checksum of the original");
		}
	}
	t->src = idx;
	t->offset = 0;
	t->flags &= ~(uint32_t)TPC_TF_BYTESWAP;
	tpc_tensor_set_contiguous(t);
	return 0;
}

static int add_merged(tpc_merge *m, const char *name, tpc_tensor *t, tpc_err *e)
{
	int64_t ix = tpc_ckpt_add_copy(&m->out, name, t, e);
	tpc_tensor_release(t);
	return ix < 0 ? (int)ix : 0;
}

static char **rank_paths(const char *dir, char **files, int n)
{
	char **p = tpc_calloc((size_t)n, sizeof(*p));
	for (int r = 0; p && r < n; r++)
		if (!(p[r] = tpc_path_join(dir, files[r]))) {
			for (int q = 0; q < r; q++)
				free(p[q]);
			free(p);
			return NULL;
		}
	return p;
}

/* The set's geometry, layout and facts, as its manifest records them. */
static int take_manifest(tpc_merge *m, const tpc_manifest *man, tpc_err *e)
{
	m->tp = man->tp;
	m->pp = man->pp;
	m->dp = man->dp;
	m->ep = man->ep;
	m->ep_placement = man->ep_placement;
	m->experts = man->experts;
	m->layout = man->layout;
	m->nranks = man->tp * man->pp;
	m->facts = man->facts;
	tpc_facts_label(&m->facts, "the set's manifest");
	if (man->plan_json && !(m->plan_json = tpc_strdup(man->plan_json)))
		return tpc_err_nomem(e);
	return 0;
}

/* Open the rank files, each told the original names of its stage's tensors. */
static int open_stages(tpc_merge *m, const tpc_manifest *man, char **paths, tpc_err *e)
{
	char ***stage_names = tpc_calloc((size_t)m->pp, sizeof(*stage_names));
	size_t *stage_n = tpc_calloc((size_t)m->pp, sizeof(*stage_n));
	int ret = 0;
	if (!stage_names || !stage_n)
		ret = tpc_err_nomem(e);
	for (int st = 0; st < m->pp && !ret; st++) {
		if (!(stage_names[st] = tpc_calloc(man->n ? man->n : 1, sizeof(char *))))
			ret = tpc_err_nomem(e);
		for (size_t i = 0; !ret && i < man->n; i++)
			if (man->t[i].stage == st)
				stage_names[st][stage_n[st]++] = man->t[i].name;
	}
	if (!ret)
		ret = open_ranks(m, paths, &man->facts, stage_names, stage_n, e);
	for (int st = 0; stage_names && st < m->pp; st++)
		free(stage_names[st]);
	free(stage_names);
	free(stage_n);
	return ret;
}

/* Set membership: the id in each file's metadata, the tensor count. */
static int check_members(tpc_merge *m, const tpc_manifest *man, char **paths, tpc_err *e)
{
	int ret = 0;
	size_t *per_rank = tpc_calloc((size_t)m->nranks, sizeof(size_t));
	if (!per_rank)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < man->n; i++)
		for (int t = 0; t < m->tp; t++)
			if (tpc_split_holds(&man->t[i].split, m->tp, t))
				per_rank[man->t[i].stage * m->tp + t]++;
	for (int r = 0; r < m->nranks && !ret; r++) {
		const char *id = tpc_ckpt_meta_get(&m->rank[r], "tpconv.set_id");
		if (id && strcmp(id, man->set_id)) {
			tpc_err_at(e, TPC_EINPUT, paths[r], NULL, "rank %d's file belongs to another shard set (set id %.16s, the manifest says %.16s)",
				    r, id, man->set_id);
			ret = TPC_EINPUT;
		} else if (m->rank[r].n != per_rank[r]) {
			tpc_err_at(e, TPC_EINPUT, paths[r], NULL, "rank %d's file holds %zu tensors, the manifest lists %zu (a rank file from another set?)",
				    r, m->rank[r].n, per_rank[r]);
			ret = TPC_EINPUT;
		}
	}
	free(per_rank);
	return ret;
}

/* Every rank view of every manifest tensor in the union (views[i * tp + t];
 * none where an expert of another EP group is not on the rank), each
 * shape-checked against the manifest. */
static int rank_views(tpc_merge *m, const tpc_manifest *man, const int *base, char **paths, tpc_tensor *views,
		      tpc_err *e)
{
	int ret = 0;
	for (size_t i = 0; i < man->n && !ret; i++) {
		const tpc_manifest_tensor *mt = &man->t[i];
		int64_t want[TPC_MAX_NDIM];
		for (int t = 0; t < m->tp && !ret; t++) {
			int r = mt->stage * m->tp + t;
			tpc_tensor *v = &views[i * (size_t)m->tp + (size_t)t];
			if (!tpc_split_holds(&mt->split, m->tp, t))
				continue; /* an expert of another EP group: not on this rank */
			rank_shape(mt->shape, mt->ndim, &mt->split, m->tp, t, want);
			if ((ret = rank_view(m, base, paths, r, mt->name, v, e)))
				break;
			if (v->ndim != mt->ndim || v->dtype != mt->dtype ||
			    memcmp(v->shape, want, (size_t)mt->ndim * sizeof(int64_t))) {
				char got[128], exp[128];
				tpc_tensor tmp = *v;
				tpc_shape_str(&tmp, got, sizeof(got));
				tmp.shape = want;
				tmp.ndim = mt->ndim;
				tpc_shape_str(&tmp, exp, sizeof(exp));
				tpc_err_at(e, TPC_EINPUT, paths[r], mt->name, "rank %d's copy is %s %s, the manifest says %s %s (a rank file from another set?)",
					    r, tpc_dtype_name(v->dtype), got, tpc_dtype_name(mt->dtype), exp);
				ret = TPC_EINPUT;
			}
		}
	}
	return ret;
}

/* Each original rebuilt from its rank views, in manifest order, then the
 * manifest's metadata. `verified`: the rank tensors' checksums are checked
 * (now or while the merge is written) before anything merged is used, so
 * equal recorded checksums stand for equal replicas. */
static int merge_tensors(tpc_merge *m, const tpc_merge_opts *o, const tpc_manifest *man, tpc_tensor *views,
			 char **paths, bool verified, tpc_err *e)
{
	size_t hlen = tpc_hash_len(man->checksum);
	int ret = 0;
	for (size_t i = 0; i < man->n && !ret; i++) {
		const tpc_manifest_tensor *mt = &man->t[i];
		bool known_equal[TPC_MAX_TP];
		int t0 = tpc_split_first_rank(&mt->split, m->tp), gtp = tpc_split_tp(&mt->split, m->tp);
		bool stk = mt->split.stacked && mt->split.ep > 1;
		int ngroups = stk ? mt->split.ep : 1;
		for (int g = 0; g < ngroups; g++) {
			int g0 = t0 + g * gtp;
			known_equal[g] = verified && mt->rank_hash;
			for (int t = g0 + 1; known_equal[g] && t < g0 + gtp; t++)
				known_equal[g] = !memcmp(mt->rank_hash[t], mt->rank_hash[g0], hlen);
		}
		tpc_tensor whole;
		const uint8_t(*rh)[TPC_HASH_MAX] = verified && mt->rank_hash ? mt->rank_hash + t0 : NULL;
		if (stk)
			ret = rebuild_stacked(m, o, mt->name, &mt->split, mt->shape, &views[i * (size_t)m->tp], mt->stage * m->tp,
					      known_equal, rh, hlen, &whole, e);
		else
			ret = rebuild(m, o, mt->name, &mt->split, &views[i * (size_t)m->tp + (size_t)t0], mt->stage * m->tp + t0,
				      known_equal[0], rh, hlen, &whole, e);
		if (!ret && mt->split.is_shape)
			ret = merged_shape(m, mt, man->checksum, gtp, &whole, paths[mt->stage * m->tp + t0], e);
		if (!ret)
			ret = add_merged(m, mt->name, &whole, e);
	}
	for (size_t i = 0; i < man->nmeta && !ret; i++)
		ret = tpc_ckpt_meta_set(&m->out, man->meta_k[i], man->meta_v[i], e);
	return ret;
}

/* Do two splits give every rank the same rows of their tensors? */
static bool same_split(const tpc_split *a, const tpc_split *b)
{
	if (a->dim != b->dim || a->nparts != b->nparts || a->is_shape != b->is_shape ||
	    (a->is_shape && (a->shape_dim != b->shape_dim || a->shape_len != b->shape_len)) || a->ep != b->ep ||
	    (a->ep > 1 && a->ep_group != b->ep_group) || a->stacked != b->stacked)
		return false;
	for (int k = 0; a->dim >= 0 && k < a->nparts; k++)
		if (a->part[k].size != b->part[k].size || a->part[k].pad != b->part[k].pad ||
		    a->part[k].replicas != b->part[k].replicas || a->part[k].heads != b->part[k].heads ||
		    a->part[k].uneven != b->part[k].uneven)
			return false;
	return true;
}

/* The ties the manifest records, restored: a tied tensor becomes the
 * description of the one it is tied to (alias_of), which the writers keep as
 * one storage, once they hold the same values: the same checked checksums on
 * every rank where both are split alike (`verified`, as merge_tensors), else
 * compared byte for byte. */
static int restore_ties(tpc_merge *m, const tpc_manifest *man, bool verified, tpc_err *e)
{
	size_t hlen = tpc_hash_len(man->checksum);
	int ret = 0;
	for (size_t i = 0; i < man->n && !ret; i++) {
		const tpc_manifest_tensor *mt = &man->t[i], *to = mt->tied_to >= 0 ? &man->t[mt->tied_to] : NULL;
		if (!to)
			continue;
		int64_t a = tpc_ckpt_find(&m->out, to->name), b = tpc_ckpt_find(&m->out, mt->name);
		bool eq = verified && mt->rank_hash && to->rank_hash && same_split(&mt->split, &to->split);
		for (int t = 0; eq && t < m->tp; t++)
			eq = !tpc_split_holds(&mt->split, m->tp, t) || !memcmp(mt->rank_hash[t], to->rank_hash[t], hlen);
		if (a < 0 || b < 0)
			return tpc_err_set(e, TPC_EINPUT, "internal: tied tensors '%s' and '%s' are not merged", to->name,
					   mt->name);
		if (!eq && (ret = tpc_tensors_equal(&m->out, &m->out.t[a], &m->out.t[b], &eq, e)))
			break;
		if (!eq) {
			char nm[256];
			tpc_sanitize(nm, sizeof(nm), to->name);
			return tpc_err_at(e, TPC_EINPUT, NULL, mt->name, "the manifest ties it to '%s', but the rank files hold other values for the two",
				    nm);
		}
		tpc_tensor cp;
		if (tpc_tensor_copy(&cp, &m->out.t[a]))
			return tpc_err_nomem(e);
		cp.name = m->out.t[b].name;
		cp.alias_of = a;
		tpc_tensor_release(&m->out.t[b]);
		m->out.t[b] = cp;
	}
	return ret;
}

static int open_manifest_set(tpc_merge *m, const char *dir, const tpc_merge_opts *o, tpc_err *e)
{
	tpc_manifest man;
	char *mpath = tpc_path_join(dir, TPC_MANIFEST_NAME);
	char **paths = NULL;
	int *base = NULL, ret;
	tpc_tensor *views = NULL;
	tpc__merge_check *check = NULL;
	size_t nviews = 0;
	if (!mpath)
		return tpc_err_nomem(e);
	ret = tpc_manifest_from_file(&man, mpath, e);
	if (ret) {
		free(mpath);
		return ret;
	}
	if ((ret = take_manifest(m, &man, e)))
		goto out;
	paths = rank_paths(dir, man.files, m->nranks);
	base = tpc_calloc((size_t)m->nranks, sizeof(int));
	if (!paths || !base) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = open_stages(m, &man, paths, e)) || (ret = check_members(m, &man, paths, e)) ||
	    (ret = union_sources(m, base, e)))
		goto out;
	nviews = man.n * (size_t)m->tp;
	views = tpc_calloc(nviews ? nviews : 1, sizeof(*views));
	if (!views) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	if ((ret = rank_views(m, &man, base, paths, views, e)))
		goto out;
	/* checksums: every rank tensor against the manifest, in parallel, now
	 * or (defer_checksums) while tpc_merge_write writes; either way before
	 * anything merged is used (merge_tensors) */
	bool verified = false;
	if (o->checksums && man.checksum != TPC_HASH_NONE) {
		if ((ret = tpc__merge_check_new(&check, &m->out, &man, views, paths, m->nranks, e)))
			goto out;
		if (!o->defer_checksums && (ret = tpc__merge_check_run(check, true, e)))
			goto out;
		verified = true;
	}
	if (!(ret = merge_tensors(m, o, &man, views, paths, verified, e)) && !(ret = restore_ties(m, &man, verified, e)) &&
	    check && o->defer_checksums) {
		tpc__merge_check_take_views(check);
		m->check = check;
		check = NULL;
		views = NULL;
	}
out:
	tpc__merge_check_free(check);
	for (size_t i = 0; views && i < nviews; i++)
		tpc_tensor_release(&views[i]);
	free(views);
	free(base);
	tpc_free_strv(paths, m->nranks > 0 ? (size_t)m->nranks : 0);
	free(mpath);
	tpc_manifest_release(&man);
	return ret;
}

/* ---- sets written by other tools ---- */

/* The vocabulary rows of a vocab-split tensor the ranks hold `full` rows of
 * (padding included): the vocab fact's, or all of them unless the set says
 * they are padded (Megatron's padded_vocab_size, with no true size recorded):
 * then only the user knows how many are real. */
static int foreign_vocab(const tpc_model_facts *f, const char *name, const int64_t *rshape, int d, int tp,
			 int64_t *full, tpc_err *e)
{
	const char *o = f->origin[TPC_FACT_VOCAB][0] ? f->origin[TPC_FACT_VOCAB] : "given";
	if (f->vocab && f->vocab <= *full) {
		*full = f->vocab;
		return 0;
	}
	if (!f->vocab && !f->padded_vocab)
		return 0; /* nothing says the rows are padded: all are the vocabulary */
	if (f->vocab)
		return tpc_err_at(e, TPC_EUSAGE, NULL, name,
				       "vocab %lld (%s) contradicts the ranks: they hold %lld rows in dim %d (tp %d x %lld), fewer than the vocabulary",
				       (long long)f->vocab, o, (long long)*full, d, tp, (long long)rshape[d]);
	return tpc_err_at(e, TPC_EUSAGE, NULL, name,
			       "the ranks hold %lld rows in dim %d (tp %d x %lld), a padded vocabulary (padded_vocab_size %lld in the set's Megatron args) whose true size nothing gives: give --vocab N or --config config.json (vocab_size) to strip the padding, or --vocab %lld to keep it",
			       (long long)*full, d, tp, (long long)rshape[d], (long long)f->padded_vocab, (long long)*full);
}

/* The original shape and split of a tensor seen as `rshape` on every rank,
 * following the plan: parts given in full sizes (or "q"/"kv" from the facts)
 * stay; everything else is tp times the rank size, except KV heads the facts
 * say are fewer than tp (replicated) and a vocab the facts say is smaller than
 * the padded rows (padding to strip). */
static int resolve_foreign(const tpc_plan *p, const tpc_model_facts *f, const char *name, int ndim,
			   const int64_t *rshape, int tp, unsigned flags, tpc_split *s, tpc_err *e)
{
	int ri = tpc_plan_match(p, name);
	bool row_bias;
	int d = tpc_plan_rule_dim(p, ri, ndim, &row_bias);
	int64_t shape[TPC_MAX_NDIM];
	int ret;
	memcpy(shape, rshape, (size_t)ndim * sizeof(int64_t));
	if (ri < 0 && p->fallback_error) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "no rule of the plan matches this tensor (the plan's fallback is \"error\")");
	}
	if (d >= 0) {
		const tpc_plan_rule *r = &p->rules[ri];
		int64_t L = rshape[d], full = 0;
		int np = r->nparts ? r->nparts : 1;
		if (r->parts_listed) {
			for (int k = 0; k < np; k++) {
				const tpc_plan_part *pp = &r->parts[k];
				full += pp->sym ? tpc_plan_sym_rows(pp->sym, f, NULL) : pp->size; /* checked by the resolver */
			}
		} else {
			int64_t l = L / np;
			for (int k = 0; k < np; k++) {
				if (r->heads == TPC_HEADS_KV && f->kv_heads && f->kv_heads < tp)
					full += f->kv_heads * l; /* each rank holds one replicated head */
				else
					full += l * tp;
			}
			if (r->kind == TPC_SPLIT_VOCAB && np == 1 && (ret = foreign_vocab(f, name, rshape, d, tp, &full, e)))
				return ret;
		}
		shape[d] = full;
	}
	if ((ret = tpc_plan_resolve(p, f, name, ndim, shape, tp, flags, s, NULL, e)))
		return ret;
	if (s->dim >= 0 && s->kind == TPC_SPLIT_VOCAB && s->nparts == 1) {
		/* the padding the other tool used: whatever fills tp equal slices */
		s->part[0].pad = rshape[s->dim] * tp - s->part[0].size;
	}
	if (s->dim >= 0 && tpc_split_rank_dim(s, tp) != rshape[s->dim]) {
		return tpc_err_at(e, TPC_EINPUT, NULL, name,
			    "ranks hold %lld rows in dim %d, which does not fit the plan's split of %lld rows over tp %d (check --tp and the model facts)",
			    (long long)rshape[s->dim], s->dim, (long long)shape[s->dim], tp);
	}
	return 0;
}

/* The merged tensors' order: stage by stage, in tp rank 0's order; where
 * the stages interleave layers (a stage holds a layer above one of the
 * next stage's: Megatron's virtual pipeline stages, stage 0 holding layers
 * 0 and 2 of 4), then stably by the layer number the plan finds in a name
 * (a tensor without one keeps the number of the layer before it), so that
 * they come out in layer order; any other set as it was. ord[k] = stage <<
 * 32 | index in its tp rank 0. */
typedef struct {
	int64_t layer;
	size_t seq;
	uint64_t at;
} order_item;

static int by_layer(const void *a, const void *b)
{
	const order_item *x = a, *y = b;
	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int foreign_order(const tpc_merge *m, const tpc_plan *plan, uint64_t **ord, size_t *n, tpc_err *e)
{
	size_t cap = 1;
	int64_t last = -1, hi = -1;
	bool interleaved = false;
	for (int st = 0; st < m->pp; st++)
		cap += m->rank[st * m->tp].n;
	order_item *it = tpc_calloc(cap, sizeof(*it));
	*ord = tpc_calloc(cap, sizeof(uint64_t));
	*n = 0;
	if (!it || !*ord) {
		free(it);
		return tpc_err_nomem(e);
	}
	for (int st = 0; st < m->pp; st++) {
		const tpc_ckpt *r0 = &m->rank[st * m->tp];
		int64_t shi = -1;
		for (size_t i = 0; i < r0->n; i++) {
			int64_t l = plan ? tpc_plan_layer(plan, r0->t[i].name) : -1;
			last = l >= 0 ? l : last;
			interleaved = interleaved || (l >= 0 && l < hi);
			shi = l > shi ? l : shi;
			it[*n] = (order_item){.layer = last, .seq = *n, .at = (uint64_t)st << 32 | (uint64_t)i};
			(*n)++;
		}
		hi = shi > hi ? shi : hi; /* the highest layer of the stages before */
	}
	if (interleaved)
		qsort(it, *n, sizeof(*it), by_layer);
	for (size_t k = 0; k < *n; k++)
		(*ord)[k] = it[k].at;
	free(it);
	return 0;
}

static int open_foreign_set(tpc_merge *m, const char *dir, const tpc_merge_opts *o, tpc_err *e)
{
	int ret = 0;
	char **paths = NULL;
	int *base = NULL;
	if (!o->plan) {
		return tpc_err_at(e, TPC_EUSAGE, dir, NULL, "this shard set has no tpconv manifest; give the plan it was split with (--preset or --plan) and --tp");
	}
	if ((ret = m->layout->foreign_geometry(dir, o->tp, o->pp, &m->tp, &m->pp, e)))
		return ret;
	if (m->tp < 1 || m->pp < 1 || (int64_t)m->tp * m->pp > TPC_MAX_RANKS)
		return tpc_err_set(e, TPC_EINPUT, "no rank files in '%s'", dir);
	m->nranks = m->tp * m->pp;
	paths = tpc_calloc((size_t)m->nranks, sizeof(*paths));
	base = tpc_calloc((size_t)m->nranks, sizeof(int));
	if (!paths || !base) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (int r = 0; r < m->nranks && !ret; r++)
		if (!(paths[r] = m->layout->foreign_rank_path(dir, r % m->tp, r / m->tp, m->tp)))
			ret = tpc_err_nomem(e);
	if (ret)
		goto out;
	tpc_model_facts f = o->facts;
	if (m->layout->foreign_facts) {
		tpc_model_facts own;
		memset(&own, 0, sizeof(own));
		m->layout->foreign_facts(dir, &own);
		tpc_facts_fill(&f, &own);
	}
	tpc_facts_fill(&f, &o->plan->facts);
	tpc_facts_finish(&f);
	if ((ret = open_ranks(m, paths, &f, NULL, NULL, e)) || (ret = union_sources(m, base, e)))
		goto out;
	/* tensor order: foreign_order's; each name once */
	uint64_t *ord = NULL;
	size_t nord = 0;
	ret = foreign_order(m, o->plan, &ord, &nord, e);
	for (size_t k = 0; k < nord && !ret; k++) {
		int st = (int)(ord[k] >> 32);
		size_t i = (size_t)(ord[k] & 0xffffffffu);
		{
			const char *name = m->rank[st * m->tp].t[i].name;
			if (tpc_ckpt_find(&m->out, name) >= 0)
				continue; /* also on an earlier stage (tied weights) */
			tpc_tensor *v = tpc_calloc((size_t)m->tp, sizeof(*v));
			int have = 0;
			if (!v) {
				ret = tpc_err_nomem(e);
				break;
			}
			for (int t = 0; t < m->tp && !ret; t++) {
				if ((ret = rank_view(m, base, paths, st * m->tp + t, name, &v[t], e)))
					break;
				have++;
				if (v[t].ndim != v[0].ndim || v[t].dtype != v[0].dtype ||
				    memcmp(v[t].shape, v[0].shape, (size_t)v[0].ndim * sizeof(int64_t))) {
					tpc_err_at(e, TPC_EINPUT, paths[st * m->tp + t], name, "rank %d's copy has another shape or dtype than rank %d's",
						    st * m->tp + t, st * m->tp);
					ret = TPC_EINPUT;
				}
			}
			tpc_split s;
			tpc_tensor whole;
			if (!ret)
				ret = resolve_foreign(o->plan, &f, name, v[0].ndim, v[0].shape, m->tp, o->resolve_flags, &s, e);
			if (!ret)
				ret = rebuild(m, o, name, &s, v, st * m->tp, false, NULL, 0, &whole, e);
			if (!ret)
				ret = add_merged(m, name, &whole, e);
			for (int t = 0; t < have; t++)
				tpc_tensor_release(&v[t]);
			free(v);
		}
	}
	free(ord);
	for (size_t i = 0; i < m->rank[0].nmeta && !ret; i++)
		if (strncmp(m->rank[0].meta_k[i], "tpconv.", 7))
			ret = tpc_ckpt_meta_set(&m->out, m->rank[0].meta_k[i], m->rank[0].meta_v[i], e);
	/* the facts against what the ranks make of the tensors */
	if (!ret)
		ret = tpc_facts_check(&f, o->plan, &m->out, e);
	m->facts = f;
out:
	tpc_free_strv(paths, m->nranks > 0 ? (size_t)m->nranks : 0);
	free(base);
	return ret;
}

int tpc_merge_open(tpc_merge *m, const char *dir, const tpc_merge_opts *o, tpc_err *e)
{
	int ret;
	memset(m, 0, sizeof(*m));
	tpc_ckpt_init(&m->out);
	m->kind = tpc_set_detect(dir, &m->layout);
	if (m->kind == TPC_SET_NONE && tpc_is_dir(dir)) {
		/* a training framework's sharded checkpoint: its reader assembles it */
		tpc_err e2;
		tpc_err_init(&e2);
		const tpc_format *f = tpc_format_detect(dir, &e2);
		if (f && f->sharded) {
			m->kind = TPC_SET_CKPT;
			tpc_io_note_input(dir);
			ret = tpc_ckpt_open(&m->out, dir, NULL, e);
			m->nranks = (int)m->out.nsrc;
			m->tp = m->nranks;
			m->pp = 1;
			if (ret)
				tpc_merge_release(m);
			return ret;
		}
	}
	if (m->kind == TPC_SET_NONE) {
		return tpc_err_at(e, TPC_EINPUT, dir, NULL,
			    "not a shard set (no %s, no pytorch_model_tp_*_pp_*.bin, no rank*.safetensors)",
			    TPC_MANIFEST_NAME);
	}
	if (o->state && (m->kind != TPC_SET_FOREIGN || !m->layout->merge_state))
		return tpc_err_at(e, TPC_EINPUT, dir, NULL, "a %s set: its rank files hold no optimizer state tpconv joins",
				  m->kind == TPC_SET_MANIFEST ? "tpconv" : m->layout->name);
	m->state = o->state;
	tpc_io_note_input(dir);
	ret = m->kind == TPC_SET_MANIFEST ? open_manifest_set(m, dir, o, e) : open_foreign_set(m, dir, o, e);
	if (!ret && (!(m->out.path = tpc_strdup(dir)) ||
		     !(m->out.format = tpc_strdup(m->kind == TPC_SET_MANIFEST ? "tpconv-shards" : m->layout->set_format))))
		ret = tpc_err_nomem(e);
	if (ret)
		tpc_merge_release(m);
	return ret;
}

int tpc_merge_write(tpc_merge *m, const tpc_format *f, const char *path, const tpc_write_opts *o, tpc_err *e)
{
	const tpc_format *inner = o && o->inner_format ? tpc_format_by_name(o->inner_format) : NULL;
	/* torch writers emit the object tree: the state dict of the merged tensors */
	bool tree = f->object_tree || (inner && inner->object_tree);
	int ret = tree && m->kind != TPC_SET_CKPT ? tpc__flat_root(&m->out, e) : 0;
	if (ret)
		return ret;
	tpc_write_opts wo;
	memset(&wo, 0, sizeof(wo));
	if (o)
		wo = *o;
	/* tied tensors once in safetensors, as save_pretrained writes them (the
	 * dropped names recorded in tpconv.aliases); torch keeps one storage */
	wo.flags |= TPC_W_DEDUP_TIED;
	if (m->check) {
		/* the single-file writers call the gate before they commit */
		bool gated = f->gates_commit && !wo.max_shard_size &&
			     !wo.before_commit;
		if (!gated)
			ret = tpc__merge_check_run(m->check, true, e);
		else if (!(ret = tpc__merge_check_start(m->check, e))) {
			wo.before_commit = tpc__merge_check_finish;
			wo.before_commit_ctx = m->check;
		}
		if (ret)
			return ret;
	}
	void *g = tpc__rss_guard_start(&m->out);
	ret = f->write(&m->out, NULL, 0, path, &wo, e);
	tpc__rss_guard_stop(g);
	if (m->check) {
		/* joined by the gate, or now when the writer failed before it */
		tpc_err ce;
		tpc_err_init(&ce);
		int cr = tpc__merge_check_finish(m->check, &ce);
		if (!ret && cr) {
			/* cannot happen: a gated writer returned the check's error */
			*e = ce;
			ret = cr;
		}
		tpc__merge_check_free(m->check);
		m->check = NULL;
	}
	return ret;
}
