/* verify_desc.c - the shard set as verify sees it.
 *
 * This file translates what the set says about itself - the manifest's split
 * of every tensor (kind, dim, parts, padding, replicas, row bias), the plan's
 * `transposed`, the model facts, the checksums - or, for a set without a
 * manifest, what --preset/--plan resolve, into verify's neutral description
 * (verify/tpc_verify.h). cmd/ is the one layer that sees both shard/ and
 * verify/. Under mpirun each process opens only its own rank files (every
 * pipeline stage of its tp rank) and rank 0 reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tpc_family.h"
#include "tpc_io.h"
#include "tpc_qsplit.h"
#include "tpc_shard.h"
#include "tpc_util.h"
#include "verify_desc.h"

/* Is tpc_split's kind the same number in verify's enum? (both list
 * replicate, col, row, vocab, dim in this order) */
_Static_assert((int)TPC_SPLIT_COL == (int)TPC_VSPLIT_COL && (int)TPC_SPLIT_ROW == (int)TPC_VSPLIT_ROW &&
		       (int)TPC_SPLIT_VOCAB == (int)TPC_VSPLIT_VOCAB && (int)TPC_SPLIT_DIM == (int)TPC_VSPLIT_DIM,
	       "split kinds");

static int64_t add_tensor(tpc_verify_set *s, const char *name, const char *as, const tpc_ckpt *ref,
			  const tpc_split *sp, bool transposed, tpc_err *e)
{
	int64_t ri = tpc_ckpt_find(ref, name);
	if (ri < 0)
		return tpc_err_set(e, TPC_EINPUT, "tensor '%s' of the shard set is not in the reference", name);
	tpc_vpart parts[TPC_VERIFY_MAX_PARTS];
	int np = sp->dim < 0 ? 0 : sp->nparts;
	if (np > TPC_VERIFY_MAX_PARTS)
		return tpc_err_set(e, TPC_EINPUT, "tensor '%s': %d fused parts", name, np);
	for (int k = 0; k < np; k++)
		parts[k] = (tpc_vpart){sp->part[k].size, sp->part[k].pad, sp->part[k].replicas > 0 ? sp->part[k].replicas : 1};
	tpc_vsplit vs = sp->dim < 0 ? TPC_VSPLIT_REPLICATE : (tpc_vsplit)sp->kind;
	int64_t ix = tpc_verify_set_add(s, as ? as : name, ref, &ref->t[ri], vs, sp->dim, transposed, sp->row_bias, np,
					parts, e);
	if (ix < 0)
		return ix;
	/* a plan's transposed rule applies to a 2-D weight (Conv1D) only */
	tpc_vtensor *vt = &s->t[ix];
	vt->transposed = transposed && vt->ref->ndim == 2;
	if (sp->ep > 1) {
		vt->ep = sp->ep;
		vt->ep_group = sp->ep_group;
	} else if (sp->dp > 1) { /* a dense tensor of a stage of tp x dp ranks: dp group 0's */
		vt->dp = sp->dp;
	}
	return ix;
}

/*
 * Is rank file r where it belongs? A file that holds another rank's tensors
 * (two files swapped or renamed on disk) would otherwise show only as slices
 * that differ from the reference; say it first, naming the file and the rank
 * whose tensors it holds. The file's own word (tpconv.rank in its metadata)
 * decides where there is one; else the content: the smallest tensor whose
 * slices differ between ranks, hashed and looked up among the manifest's
 * rank checksums. Returns the rank whose tensors file r holds, r when it is
 * in place or nothing tells, or a negative status.
 */
static int rank_file_holds(const tpc_manifest *man, const tpc_ckpt *rk, int r, int tp, tpc_err *e)
{
	const char *v = tpc_ckpt_meta_get(rk, "tpconv.rank");
	uint64_t said;
	tpc_err e2;
	tpc_err_init(&e2);
	if (v && !tpc_parse_u64(v, (uint64_t)INT32_MAX, &said, &e2))
		return (int)said;
	if (!man || man->checksum == TPC_HASH_NONE)
		return r;
	int stage = r / tp, t = r % tp;
	const tpc_tensor *best = NULL;
	const tpc_manifest_tensor *bm = NULL;
	for (size_t i = 0; i < man->n; i++) {
		const tpc_manifest_tensor *mt = &man->t[i];
		if (mt->stage != stage || !mt->rank_hash)
			continue;
		bool distinct = false;
		for (int q = 0; q < tp && !distinct; q++)
			distinct = memcmp(mt->rank_hash[q], mt->rank_hash[t], tpc_hash_len(man->checksum)) != 0;
		int64_t k = distinct ? tpc_ckpt_find(rk, mt->name) : -1;
		if (k >= 0 && (!best || rk->t[k].nbytes < best->nbytes)) {
			best = &rk->t[k];
			bm = mt;
		}
	}
	if (!best)
		return r;
	uint8_t h[TPC_HASH_MAX];
	size_t hl = tpc_hash_len(man->checksum);
	int ret = tpc_ckpt_hash_tensor(rk, best, man->checksum, h, e);
	if (ret)
		return ret;
	if (!memcmp(h, bm->rank_hash[t], hl))
		return r;
	for (int q = 0; q < tp; q++)
		if (!memcmp(h, bm->rank_hash[q], hl))
			return stage * tp + q;
	return r; /* another set's or a corrupted file: the structure check says which tensor */
}

/* What every rank holds for a layer's shape split `sp` (is_shape): the
 * reference's two values with entry shape_dim = shape_len, as tensor `name`
 * of aux (its bytes in memory aux owns). */
static int expected_shape(tpc_ckpt *aux, const tpc_ckpt *ref, const char *name, const tpc_split *sp, tpc_err *e)
{
	int64_t ri = tpc_ckpt_find(ref, name), v[2];
	int ret, idx;
	if (ri < 0)
		return tpc_err_set(e, TPC_EINPUT, "tensor '%s' of the shard set is not in the reference", name);
	const tpc_tensor *t = &ref->t[ri];
	if ((ret = tpc__shape_read(ref, t, v, e)))
		return ret;
	v[sp->shape_dim] = sp->shape_len;
	if ((ret = tpc__shape_add(aux, t, v, "a layer's shape per rank", &idx, e)))
		return ret;
	tpc_tensor d;
	if (tpc_tensor_copy(&d, t))
		return tpc_err_nomem(e);
	d.src = idx;
	d.offset = 0;
	d.storage = -1;
	d.alias_of = -1;
	d.flags &= ~(uint32_t)TPC_TF_BYTESWAP;
	tpc_tensor_set_contiguous(&d);
	int64_t k = tpc_ckpt_add_copy(aux, name, &d, e);
	tpc_tensor_release(&d);
	return k < 0 ? (int)k : 0;
}

/* Forward declarations: the experts' views (below, with the stored ones). */
static int describe_stacked(tpc_cli_vdesc *d, tpc_verify_set *set, const tpc_split *sp, const char *name, int stage,
			    bool transposed, const tpc_ckpt *vexp, tpc_ckpt *vexr, tpc_ckpt *rank, tpc_err *e);
static bool stacked_in(const tpc_ckpt *vexp, const char *name);

/* The split of refd's dequantized weight t: 1 when the set lacks it (or has
 * no plan to say), 0 with *sp, *transposed and *stage, or a negative status.
 * gpt-oss's MXFP4 experts cut as their blocks were (tpc__quant_mx_layer). */
static int dense_split(tpc_cli_vdesc *d, const tpc_tensor *t, tpc_split *sp, bool *transposed, int *stage, tpc_err *e)
{
	const tpc_manifest *man = &d->man;
	const tpc_manifest_tensor *mt = NULL, *mc = NULL;
	for (size_t i = 0; i < man->n; i++) {
		if (!strcmp(man->t[i].name, t->name))
			mt = &man->t[i];
		if (t->dq->c[0].name && !strcmp(man->t[i].name, t->dq->c[0].name))
			mc = &man->t[i];
	}
	if (!mt && !mc)
		return 1; /* not in the set (dropped by its rules) */
	*transposed = false;
	*stage = (mt ? mt : mc)->stage;
	if (mt) {
		*sp = mt->split;
	} else {
		int rtp = tpc_split_tp(&mc->split, d->tp), ret;
		if (!d->have_plan) {
			tpc_cli_info("verify: no plan in the manifest: '%s' is checked as stored only", t->name);
			return 1;
		}
		if ((ret = tpc_plan_resolve(&d->plan, &d->facts, t->name, t->ndim, t->shape, rtp, TPC_RESOLVE_PAD, sp, NULL, e)))
			return ret;
		if (d->facts.quant.mx_blocks && sp->stacked && !sp->row_bias &&
		    (ret = tpc__quant_mx_layer(&d->plan, rtp, sp, t->name, e)))
			return ret;
		sp->ep = mc->split.ep;
		sp->ep_group = mc->split.ep_group;
		sp->expert = mc->split.expert;
		sp->ep_placement = mc->split.ep_placement;
	}
	if (sp->rule >= 0 && (size_t)sp->rule < d->plan.nrules)
		*transposed = d->plan.rules[sp->rule].transposed;
	return 0;
}

/*
 * Dense check of a quantized set: refd's dequantized weight k (computed from
 * the reference's packed tensors) against each rank's, dequantized from the
 * pieces that rank holds (rankd). The split: the manifest's for an FP8
 * weight (same name, same shape); for GPTQ/AWQ, whose weight has no entry,
 * the plan's rule for it, on the stage and EP group of its first companion.
 * A dequantized stack of experts (gpt-oss's MXFP4 X [E, I, R] from
 * X_blocks / X_scales) is checked expert by expert, as a dense stack is
 * (dense_expert_views): each expert computed from its blocks when read.
 */
static int add_dense(tpc_cli_vdesc *d, tpc_verify_set *set, size_t k, tpc_err *e)
{
	const tpc_ckpt *refd = &d->refd;
	int tp = d->tp, stage;
	const tpc_tensor *t = &refd->t[k];
	if (!t->dq)
		return 0;
	tpc_split sp;
	bool transposed;
	int ret = dense_split(d, t, &sp, &transposed, &stage, e);
	if (ret)
		return ret < 0 ? ret : 0;
	if (sp.stacked) {
		if (stacked_in(&d->vexpd, t->name))
			return describe_stacked(d, set, &sp, t->name, stage, transposed, &d->vexpd, d->vexrd, d->rankd, e);
		tpc_cli_info("verify: '%s' stacks its experts quantized: checked as stored (its blocks and scales), not dense",
			     t->name);
		return 0;
	}
	int64_t ix = add_tensor(set, t->name, NULL, refd, &sp, transposed, e);
	if (ix < 0)
		return (int)ix;
	for (int r = 0; r < tp; r++) {
		tpc_ckpt *rk = &d->rankd[stage * tp + r];
		if (d->a->mpi && r != d->a->me)
			continue;
		int64_t j = tpc_ckpt_find(rk, t->name);
		tpc_verify_set_rank(set, ix, r, rk, j >= 0 ? &rk->t[j] : NULL);
	}
	return 0;
}

void tpc_cli_vdesc_init(tpc_cli_vdesc *d, const tpc_cli_vargs *a)
{
	memset(d, 0, sizeof(*d));
	d->a = a;
	tpc_ckpt_init(&d->ref);
	tpc_ckpt_init(&d->refd);
	tpc_ckpt_init(&d->vaux);
	tpc_ckpt_init(&d->vexp);
	tpc_ckpt_init(&d->vexpd);
	tpc_plan_init(&d->plan);
	d->qdt = TPC_F32;
}

/* n checkpoints (lent sources given back first when `lent`), then the array */
static void release_all(tpc_ckpt *v, int n, bool lent)
{
	for (int r = 0; v && r < n; r++) {
		if (lent)
			tpc__return_sources(&v[r]);
		tpc_ckpt_release(&v[r]);
	}
	free(v);
}

void tpc_cli_vdesc_release(tpc_cli_vdesc *d)
{
	release_all(d->rank, d->nfiles, false);
	release_all(d->rankd, d->nfiles, false);
	tpc_ckpt_release(&d->refd);
	tpc_ckpt_release(&d->vaux);
	release_all(d->vexr, d->nfiles, true);
	tpc__return_sources(&d->vexp);
	tpc_ckpt_release(&d->vexp);
	release_all(d->vexrd, d->nfiles, true);
	tpc__return_sources(&d->vexpd);
	tpc_ckpt_release(&d->vexpd);
	if (d->have_man)
		tpc_manifest_release(&d->man);
	tpc_plan_release(&d->plan);
	tpc_ckpt_release(&d->ref);
	memset(d, 0, sizeof(*d));
}

/* The set's description: its manifest (and the plan it records), or a plan
 * to resolve on the reference for a foreign set; tp, pp and the layout. */
static int open_description(tpc_cli_vdesc *d, tpc_err *e)
{
	const tpc_cli_vargs *a = d->a;
	int ret;
	char *mpath = tpc_path_join(a->dir, TPC_MANIFEST_NAME);
	if (!mpath)
		return tpc_err_nomem(e);
	ret = tpc_exists(mpath) ? tpc_manifest_from_file(&d->man, mpath, e) : 0;
	d->have_man = !ret && tpc_exists(mpath);
	free(mpath);
	if (ret)
		return ret;
	d->pp = 1;
	/* the preset checked against the reference's config.json (else the
	 * set's), or inferred from it for a set without a manifest */
	const char *preset = a->set.preset;
	char *cfg = tpc_cli_model_config(a->ref_path, &a->set);
	if (!cfg)
		cfg = tpc_cli_model_config(a->dir, &a->set);
	ret = cfg ? tpc_cli_preset_for("verify", &a->set, cfg, NULL, &preset) : 0;
	free(cfg);
	if (ret)
		return ret;
	if (d->have_man && !a->set.preset)
		preset = NULL; /* the manifest's plan */
	if (d->have_man) {
		d->tp = d->man.tp;
		d->pp = d->man.pp;
		d->layout = d->man.layout;
		if (a->set.tp && a->set.tp != d->tp)
			return tpc_cli_usage("verify", "--ranks %lld, but the manifest says tp %d", (long long)a->set.tp, d->tp);
		if (a->set.pp && a->set.pp != d->pp)
			return tpc_cli_usage("verify", "--pp %lld, but the manifest says pp %d", (long long)a->set.pp, d->pp);
		if (d->man.plan_json && !a->set.preset && !a->set.plan_file) {
			if ((ret = tpc_plan_from_buffer(&d->plan, d->man.plan_json, strlen(d->man.plan_json), "manifest plan", e)))
				return ret;
			d->have_plan = true;
		}
	} else {
		if (tpc_set_detect(a->dir, &d->layout) != TPC_SET_FOREIGN)
			return tpc_err_set(e, TPC_EINPUT, "'%s' has no %s and no rank files tpconv knows", a->dir,
					   TPC_MANIFEST_NAME);
		if (!preset && !a->set.plan_file)
			return tpc_cli_usage("verify", "a set without a manifest needs --preset or --plan (or a config.json naming its architecture)");
		if (!a->set.tp)
			return tpc_cli_usage("verify", "a set without a manifest needs --ranks N");
		if (a->set.pp > 1) /* nothing says which stage holds a tensor */
			return tpc_cli_usage("verify", "a set without a manifest is checked as one pipeline stage, not --pp %lld",
					     (long long)a->set.pp);
		d->tp = (int)a->set.tp;
	}
	if (preset || a->set.plan_file) {
		tpc_plan_release(&d->plan);
		tpc_plan_init(&d->plan);
		if ((ret = tpc_cli_load_plan(preset, a->set.plan_file, &d->plan, e)))
			return ret;
		d->have_plan = true;
	}
	return 0;
}

/* The model facts: flags, --config, the manifest or the foreign set's own
 * record (Megatron's args), the shapes; then a foreign set's plan as its
 * layout's consumer splits (vLLM pads the vocabulary its own way). */
static int resolve_facts(tpc_cli_vdesc *d, tpc_err *e)
{
	const tpc_cli_vargs *a = d->a;
	tpc_model_facts own;
	int ret;
	memset(&own, 0, sizeof(own));
	if (!d->have_man && d->layout && d->layout->foreign_facts)
		d->layout->foreign_facts(a->dir, &own);
	if ((ret = tpc_cli_facts(&a->set.facts, a->set.config, a->ref_path, d->have_man ? &d->man.facts : &own,
				 d->have_plan ? &d->plan : NULL, &d->facts, e)))
		return ret;
	char *cfg = NULL; /* a GGUF reference's metadata: what the manifest does not record */
	ret = tpc_cli_own_config(&d->ref, &cfg, &d->facts, e);
	free(cfg);
	if (ret)
		return ret;
	if (d->have_plan) {
		char note[1024];
		if ((ret = tpc_facts_from_shapes(&d->facts, &d->plan, &d->ref, note, sizeof(note), e)))
			return ret;
		if (note[0])
			tpc_cli_info("%s", note);
	}
	if (!d->have_man && d->have_plan && d->layout->adjust_plan &&
	    (ret = d->layout->adjust_plan(&d->plan, &d->ref, &d->facts, d->tp, e)))
		return ret;
	if (a->mpi && a->size != d->tp)
		return tpc_err_set(e, TPC_EGPU, "mpirun started %d processes for a tp %d set (run -np %d)", a->size, d->tp,
				   d->tp);
	return 0;
}

/* A quantized reference (FP8, GPTQ, AWQ with its quantization_config) whose
 * set has a manifest: every weight is also checked dense. */
static int open_dequantized(tpc_cli_vdesc *d, tpc_err *e)
{
	const tpc_cli_vargs *a = d->a;
	int ret;
	if (!d->have_man || a->no_dq || !tpc_quant_find_quantized(&d->ref))
		return 0;
	if ((ret = tpc_cli_quant_cfg(a->ref_path, &d->qcfg, NULL, e)))
		return ret;
	if (d->qcfg.method == TPC_QM_NONE)
		return 0;
	if (a->rm && a->rm->rules)
		return tpc_cli_usage("verify",
				     "the dense check of a quantized reference does not take rename rules; give --no-dequantize to check the set as stored");
	/* f32: the dense values exactly, whatever the model's torch_dtype */
	tpc_open_opts oo = {0, a->set.select, NULL};
	if ((ret = tpc_ckpt_open(&d->refd, a->ref_path, &oo, e)) ||
	    (ret = tpc_ckpt_dequantize(&d->refd, &d->qcfg, d->qdt, &d->ndq, e)))
		return ret;
	/* a set sharded with --dequantize holds the dense weights themselves (in
	 * the dtype the manifest names): compare them with the reference
	 * dequantized to that dtype */
	for (size_t i = 0; d->ndq && i < d->man.n && !d->dense_set; i++) {
		int64_t dk = tpc_ckpt_find(&d->refd, d->man.t[i].name), ri = tpc_ckpt_find(&d->ref, d->man.t[i].name);
		if (dk >= 0 && d->refd.t[dk].dq && (ri < 0 || d->ref.t[ri].src_dtype != d->man.t[i].dtype)) {
			d->dense_set = true;
			d->qdt = d->man.t[i].dtype;
		}
	}
	if (d->dense_set && d->qdt != TPC_F32)
		/* verify compares bytes of the reference's own dtype; the
		 * dequantized reference is F32 until a writer casts it */
		return tpc_err_set(e, TPC_EINPUT,
				   "the set holds dequantized %s weights (shard --dequantize): verify it against the reference dequantized the same way ('tpconv convert --dequantize %s -o dense/', then --reference dense/)",
				   tpc_dtype_name(d->qdt), a->ref_path);
	if (d->ndq)
		tpc_cli_info(d->dense_set ? "verify: the set holds %zu weights dequantized (shard --dequantize): checked against the reference dequantized"
					  : "verify: %zu quantized weights are also checked dense, dequantized on every rank",
			     d->ndq);
	return 0;
}

/* Rank file r through the layout (a rank that stores fused or renamed
 * tensors, as vLLM's, gives them back as split), and again with its
 * quantized weights dense when the set is checked dense. */
static int open_rank(tpc_cli_vdesc *d, int r, tpc_err *e)
{
	const tpc_cli_vargs *a = d->a;
	int tp = d->tp, ret;
	char *p = d->have_man ? tpc_path_join(a->dir, d->man.files[r]) : d->layout->foreign_rank_path(a->dir, r % tp, r / tp, tp);
	char **names = NULL;
	size_t nnames = 0;
	if (!p)
		return tpc_err_nomem(e);
	if (!tpc_layout_rank_exists(d->layout, p)) {
		ret = tpc_err_at(e, TPC_EINPUT, p, NULL, "the set in '%s' lacks the file of rank %d", a->dir, r);
		goto out;
	}
	if (d->have_man && !(names = tpc_calloc(d->man.n ? d->man.n : 1, sizeof(*names)))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; d->have_man && i < d->man.n; i++)
		if (d->man.t[i].stage == r / tp)
			names[nnames++] = d->man.t[i].name;
	tpc_layout_rank_ctx rc = {r, r % tp, r / tp, tp, d->pp, &d->facts, names, nnames, NULL};
	ret = tpc_layout_open_rank(d->layout, p, &rc, &d->rank[r], e);
	if (!ret && d->rankd) {
		size_t nr = 0;
		tpc_quant_cfg rq = d->qcfg;
		rq.rank_piece = true;
		if (!(ret = tpc_layout_open_rank(d->layout, p, &rc, &d->rankd[r], e)))
			ret = tpc_ckpt_dequantize(&d->rankd[r], &rq, d->qdt, &nr, e);
		if (ret)
			tpc_err_path(e, p);
	}
	if (ret)
		goto out;
	const char *id = tpc_ckpt_meta_get(&d->rank[r], "tpconv.set_id");
	if (d->have_man && id && strcmp(id, d->man.set_id))
		ret = tpc_err_set(e, TPC_EINPUT, "rank file '%s' belongs to set %s, the manifest is set %s", d->man.files[r],
				  id, d->man.set_id);
out:
	free(names);
	free(p);
	return ret;
}

/* Rank files: file r = pp_rank * tp + tp_rank; under MPI only ours. */
static int open_ranks(tpc_cli_vdesc *d, tpc_err *e)
{
	int ret;
	d->nfiles = d->tp * d->pp;
	if (!(d->rank = tpc_calloc((size_t)d->nfiles, sizeof(*d->rank))))
		return tpc_err_nomem(e);
	for (int r = 0; r < d->nfiles; r++)
		tpc_ckpt_init(&d->rank[r]);
	if (d->ndq && !d->dense_set && !(d->rankd = tpc_calloc((size_t)d->nfiles, sizeof(*d->rankd))))
		return tpc_err_nomem(e);
	for (int r = 0; d->rankd && r < d->nfiles; r++)
		tpc_ckpt_init(&d->rankd[r]);
	for (int r = 0; r < d->nfiles; r++)
		if (!(d->a->mpi && r % d->tp != d->a->me) && (ret = open_rank(d, r, e)))
			return ret;
	return 0;
}

/* verify --dtype (a rule casting the reference, as the help says): the
 * checks compare the reference's bytes as they are stored, so a pending cast
 * is carried out once, into a temporary safetensors file (streamed: memory
 * stays bounded), which is then the reference. Its name is unlinked at once;
 * the mapping keeps the bytes. */
static int cast_reference(tpc_cli_vdesc *d, tpc_err *e)
{
	bool cast = false;
	for (size_t i = 0; i < d->ref.n && !cast; i++)
		cast = d->ref.t[i].dtype != d->ref.t[i].src_dtype;
	if (!cast)
		return 0;
	const char *tmp = getenv("TMPDIR");
	char path[4096];
	tpc_write_opts wo;
	const tpc_format *st = tpc_format_by_name("safetensors");
	int ret, n = snprintf(path, sizeof(path), "%s/tpconv-verify-ref-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (n < 0 || (size_t)n >= sizeof(path) || !st)
		return tpc_err_set(e, TPC_EIO, "no temporary file for the reference cast by --dtype (TMPDIR too long)");
	int fd = mkstemp(path);
	if (fd < 0)
		return tpc_err_at(e, TPC_EIO, path, NULL, "cannot create a temporary file for the reference cast by --dtype");
	close(fd);
	memset(&wo, 0, sizeof(wo));
	wo.flags = TPC_W_FORCE;
	if (!(ret = st->write(&d->ref, NULL, 0, path, &wo, e))) {
		tpc_ckpt_release(&d->ref);
		tpc_ckpt_init(&d->ref);
		ret = tpc_ckpt_open(&d->ref, path, NULL, e);
	}
	unlink(path);
	if (!ret)
		tpc_cli_info("verify: the reference cast as --dtype says, through a temporary file");
	return ret;
}

int tpc_cli_vdesc_open(tpc_cli_vdesc *d, tpc_err *e)
{
	int ret;
	/* a GGUF reference as the Hugging Face model shard split (its names and
	 * rows); --select's subtree, renamed by the rules as shard renamed it */
	tpc_open_opts hf = {TPC_OPEN_HF_NAMES, d->a->set.select, NULL};
	if ((ret = tpc_ckpt_open(&d->ref, d->a->ref_path, &hf, e)) ||
	    (d->a->rm && (ret = tpc_cli_remap_run(d->a->rm, "verify", &d->ref))) || (ret = cast_reference(d, e)) ||
	    (ret = open_description(d, e)) ||
	    (ret = resolve_facts(d, e)) || (ret = open_dequantized(d, e)) || (ret = open_ranks(d, e)))
		return ret;
	return 0;
}

/* A structure failure found while describing the set, on rank 0's report. */
static int report_structure(tpc_cli_vdesc *d, tpc_verify_report *rep, const char *name, const char *dtype,
			    const char *msg)
{
	tpc_vresult res;
	memset(&res, 0, sizeof(res));
	res.kind = TPC_VC_STRUCTURE;
	res.status = TPC_VR_FAIL;
	tpc_sanitize(res.name, sizeof(res.name), name);
	snprintf(res.dtype, sizeof(res.dtype), "%s", dtype);
	snprintf(res.msg, sizeof(res.msg), "%s", msg);
	return d->a->me == 0 ? tpc_verify_report_add(rep, &res) : 0;
}

/* Rank files in the wrong place come first in the report. */
static int report_misplaced(tpc_cli_vdesc *d, tpc_verify_report *rep, tpc_err *e)
{
	int tp = d->tp, ret = 0;
	for (int r = 0; r < d->nfiles && !ret; r++) {
		if (d->a->mpi && r % tp != d->a->me)
			continue;
		int holds = rank_file_holds(d->have_man ? &d->man : NULL, &d->rank[r], r, tp, e);
		if (holds < 0)
			return holds;
		if (holds == r)
			continue;
		char *fp = d->have_man ? NULL : d->layout->foreign_rank_path(d->a->dir, r % tp, r / tp, tp);
		char name[TPC_ERR_NAME_MAX], msg[320];
		tpc_sanitize(name, sizeof(name), d->have_man ? d->man.files[r] : fp ? fp : "?");
		snprintf(msg, sizeof(msg),
			 "rank file holds rank %d's tensors: '%.120s' is rank %d's place (files swapped or renamed?)", holds,
			 name, r);
		free(fp);
		tpc_cli_warn("rank file '%s' holds rank %d's tensors, not rank %d's", name, holds, r);
		ret = report_structure(d, rep, name, "-", msg);
	}
	return ret;
}

/* Bytes of the items part file r stores (a format with part files: DCP's
 * __R_0.distcp), into *got. */
static int part_bytes(tpc_cli_vdesc *d, const tpc_format *f, int r, uint64_t *got, tpc_err *e)
{
	char *p = tpc_path_join(d->a->dir, d->man.files[r]);
	uint64_t *off = NULL, *len = NULL;
	size_t n = 0;
	tpc_ckpt items;
	tpc_ckpt_init(&items);
	int ret = p ? f->part_items(&items, p, &off, &len, &n, e) : tpc_err_nomem(e);
	*got = 0;
	for (size_t k = 0; !ret && k < items.n; k++)
		*got += items.t[k].nbytes;
	free(off);
	free(len);
	tpc_ckpt_release(&items);
	free(p);
	return ret;
}

/*
 * A set with data-parallel replicas (Megatron's ep over tp): the file of a
 * rank past dp group 0 stores its experts' chunks and nothing else, as
 * Megatron saves them (a dense chunk's replica id ends in the dp rank, so
 * only dp rank 0 stores it: core/utils.py:1052-1055,1123-1124,1183-1196;
 * layout_megatron_dist.c). The rank views are cut from what the whole
 * folder's index assembles, so a dense chunk stored again in such a file, or
 * another rank's expert, shows only here: by the bytes of its items.
 */
static int report_dp_files(tpc_cli_vdesc *d, tpc_verify_report *rep, tpc_err *e)
{
	const tpc_format *f = d->have_man && d->man.dp > 1 && d->man.format ? tpc_format_by_name(d->man.format) : NULL;
	int tp = d->tp, dtp = tp / (d->have_man && d->man.dp > 1 ? d->man.dp : 1), ret = 0;
	if (!f || !f->part_items)
		return 0;
	if (d->a->me != 0)
		return 0; /* rank 0 reports, under mpirun too: from the manifest and the files alone */
	for (int r = 0; r < d->nfiles && !ret; r++) {
		int t = r % tp;
		if (t < dtp)
			continue;
		/* its experts whole (ep is the stage's ranks, etp 1): a tensor per
		 * expert, or its share of one stacking them */
		uint64_t got, want = 0;
		for (size_t i = 0; i < d->man.n; i++) {
			const tpc_manifest_tensor *mt = &d->man.t[i];
			if (mt->stage != r / tp || mt->split.ep <= 1 || !tpc_split_holds(&mt->split, tp, t))
				continue;
			uint64_t b = tpc_dtype_size(mt->dtype);
			bool over = false;
			for (int k = 0; k < mt->ndim; k++)
				over |= mt->shape[k] < 0 || tpc_mul_u64(b, (uint64_t)mt->shape[k], &b) != 0;
			if (over || tpc_add_u64(want, mt->split.stacked ? b / (uint64_t)mt->split.ep : b, &want))
				return tpc_err_set(e, TPC_EINPUT, "tensor '%s' of the manifest: its size overflows", mt->name);
		}
		if ((ret = part_bytes(d, f, r, &got, e)) || got == want)
			continue;
		char name[TPC_ERR_NAME_MAX], msg[320];
		tpc_sanitize(name, sizeof(name), d->man.files[r]);
		snprintf(msg, sizeof(msg),
			 "rank file stores %llu bytes of chunks, but rank %d (tp %d, dp %d) stores its experts' %llu only: the dense chunks are dp rank 0's",
			 (unsigned long long)got, t, t % dtp, t / dtp, (unsigned long long)want);
		tpc_cli_warn("verify: '%s': %s", name, msg);
		ret = report_structure(d, rep, name, "-", msg);
	}
	return ret;
}

/* Tensor i's split: the manifest's, or the plan's resolved on the
 * reference (a set without a manifest); its name and stage. */
static int split_of(tpc_cli_vdesc *d, size_t i, tpc_split *sp, const char **name, int *stage, tpc_err *e)
{
	if (d->have_man) {
		*sp = d->man.t[i].split;
		*name = d->man.t[i].name;
		*stage = d->man.t[i].stage;
		return 0;
	}
	const tpc_tensor *t = &d->ref.t[i];
	*name = t->name;
	*stage = 0;
	return tpc_plan_resolve(&d->plan, &d->facts, t->name, t->ndim, t->shape, d->tp, TPC_RESOLVE_PAD, sp, NULL, e);
}

/* How a rank's expert view is completed: an uneven split's rank (vLLM's
 * MXFP4 cut) that stores `take` rows of dim `dim` (the expert's) gets the
 * pad it does not store as zeros up to `len`, so verify sees the even split
 * it is cut from (whose pad rows must be zero). dim -1: as stored. */
typedef struct vpad {
	int dim;
	int64_t take, len;
} vpad;

static vpad pad_of(const tpc_split *sp, int tp, int r)
{
	vpad p = {-1, 0, 0};
	if (sp->dim >= 1 && sp->stacked && sp->nparts == 1 && tpc_split_uneven(sp))
		p = (vpad){sp->dim - 1, tpc_split_rank_take(sp, 0, tp, r), tpc_split_rank_len(sp, 0, tp)};
	return p;
}

/* dst (its sources borrowed from src, once) gets src's tensor t's index j
 * of dim 0 as TPC_VERIFY_EXPERT_NAME of name and expert x: a view (with pad
 * p's zeros when it stores exactly p.take rows). */
static int expert_view(tpc_ckpt *dst, const tpc_ckpt *src, const tpc_tensor *t, const char *name, int64_t j, int64_t x,
		       vpad p, tpc_err *e)
{
	char nm[TPC_ERR_NAME_MAX];
	tpc_tensor v;
	int ret = 0;
	if (!dst->src && (ret = tpc_ckpt_borrow_all(dst, &src, 1, NULL, true, e)))
		return ret;
	if (snprintf(nm, sizeof(nm), TPC_VERIFY_EXPERT_NAME, name, (long long)x) >= (int)sizeof(nm))
		return tpc_err_at(e, TPC_EINPUT, NULL, name, "name too long for its experts' names");
	if (tpc_tensor_select0(&v, t, j))
		return 0; /* not that many experts: the structure check says the rank lacks it */
	if (p.dim >= 0 && p.dim < v.ndim && v.shape[p.dim] == p.take && p.take < p.len) {
		tpc_tensor w;
		ret = tpc_tensor_pad_zero(&w, &v, p.dim, p.len);
		tpc_tensor_release(&v);
		if (ret)
			return tpc_err_nomem(e);
		v = w;
	}
	v.storage = -1;
	v.alias_of = -1;
	int64_t k = tpc_ckpt_add_copy(dst, nm, &v, e);
	tpc_tensor_release(&v);
	return k < 0 ? (int)k : 0;
}

/* The experts of every tensor that stacks them (split.stacked), one view
 * each: the reference's in vexp, each loaded rank file's (its group's
 * experts, in their order along its dim 0) in vexr[r]. Built whole before
 * anything points into them. */
static int expert_views(tpc_cli_vdesc *d, tpc_err *e)
{
	int ret = 0;
	for (size_t i = 0, nt = d->have_man ? d->man.n : d->ref.n; i < nt && !ret; i++) {
		tpc_split sp;
		const char *name;
		int stage;
		if ((ret = split_of(d, i, &sp, &name, &stage, e)))
			return ret;
		int64_t ri = tpc_ckpt_find(&d->ref, name);
		if (!sp.stacked || ri < 0 || d->ref.t[ri].ndim < 1)
			continue;
		const tpc_tensor *rt = &d->ref.t[ri];
		int64_t n = rt->shape[0];
		if (!d->vexr) {
			if (!(d->vexr = tpc_calloc((size_t)d->nfiles, sizeof(*d->vexr))))
				return tpc_err_nomem(e);
			for (int r = 0; r < d->nfiles; r++)
				tpc_ckpt_init(&d->vexr[r]);
		}
		for (int64_t x = 0; x < n && !ret; x++)
			ret = expert_view(&d->vexp, &d->ref, rt, name, x, x, (vpad){-1, 0, 0}, e);
		for (int t = 0; t < d->tp && !ret; t++) {
			tpc_ckpt *rk = &d->rank[stage * d->tp + t];
			int64_t k = tpc_ckpt_find(rk, name), first, step, cnt;
			if (k < 0)
				continue; /* not loaded here (MPI), or missing: the structure check says so */
			tpc_split_experts(&sp, n, d->tp, t, &first, &step, &cnt);
			for (int64_t j = 0; j < cnt && !ret; j++)
				ret = expert_view(&d->vexr[stage * d->tp + t], rk, &rk->t[k], name, j, first + j * step,
						  pad_of(&sp, d->tp, t), e);
		}
	}
	return ret;
}

/* The experts of every dequantized tensor that stacks them (gpt-oss's MXFP4
 * X [E, I, R]: its blocks' split is stacked), one view each whose values are
 * computed from its blocks and scales when read (tpc_tensor_select0): refd's
 * in vexpd, each loaded rank's dense tensors' in vexrd[r]. Built whole before
 * anything points into them. */
static int dense_expert_views(tpc_cli_vdesc *d, tpc_err *e)
{
	int ret = 0;
	for (size_t k = 0; d->rankd && k < d->refd.n && !ret; k++) {
		const tpc_tensor *t = &d->refd.t[k];
		const tpc_manifest_tensor *mc = NULL;
		for (size_t i = 0; t->dq && t->ndim == 3 && t->dq->c[0].name && !mc && i < d->man.n; i++)
			if (!strcmp(d->man.t[i].name, t->dq->c[0].name))
				mc = &d->man.t[i];
		if (!mc || !mc->split.stacked)
			continue;
		tpc_split sp; /* the dense tensor's (its uneven rank slices padded) */
		bool tr;
		int stage;
		if ((ret = dense_split(d, t, &sp, &tr, &stage, e)) < 0)
			return ret;
		if (ret) {
			ret = 0;
			continue;
		}
		if (!d->vexrd) {
			if (!(d->vexrd = tpc_calloc((size_t)d->nfiles, sizeof(*d->vexrd))))
				return tpc_err_nomem(e);
			for (int r = 0; r < d->nfiles; r++)
				tpc_ckpt_init(&d->vexrd[r]);
		}
		int64_t n = t->shape[0];
		for (int64_t x = 0; x < n && !ret; x++)
			ret = expert_view(&d->vexpd, &d->refd, t, t->name, x, x, (vpad){-1, 0, 0}, e);
		for (int r = 0; r < d->tp && !ret; r++) {
			int f = mc->stage * d->tp + r;
			int64_t j = tpc_ckpt_find(&d->rankd[f], t->name), first, step, cnt;
			if (j < 0)
				continue; /* not loaded here (MPI), or missing: the structure check says so */
			tpc_split_experts(&mc->split, n, d->tp, r, &first, &step, &cnt);
			for (int64_t x = 0; x < cnt && !ret; x++)
				ret = expert_view(&d->vexrd[f], &d->rankd[f], &d->rankd[f].t[j], t->name, x, first + x * step,
						  pad_of(&sp, d->tp, r), e);
		}
	}
	return ret;
}

/* Whether `name` stacks experts described one by one in vexp (expert_views,
 * dense_expert_views). */
static bool stacked_in(const tpc_ckpt *vexp, const char *name)
{
	char nm[TPC_ERR_NAME_MAX];
	snprintf(nm, sizeof(nm), TPC_VERIFY_EXPERT_NAME, name, 0LL);
	return tpc_ckpt_find(vexp, nm) >= 0;
}

static bool stacked_name(const tpc_cli_vdesc *d, const char *name)
{
	return stacked_in(&d->vexp, name);
}

/* A tensor stacking the experts, as one tensor per expert: each split as
 * the rule splits one (its dims less the first), an expert of its EP group
 * under --ep; its reference and rank tensors the views expert_views (vexp,
 * vexr over the rank files `rank`) or dense_expert_views made. */
static int describe_stacked(tpc_cli_vdesc *d, tpc_verify_set *set, const tpc_split *sp, const char *name, int stage,
			    bool transposed, const tpc_ckpt *vexp, tpc_ckpt *vexr, tpc_ckpt *rank, tpc_err *e)
{
	int64_t n = 0;
	for (char nm[TPC_ERR_NAME_MAX]; snprintf(nm, sizeof(nm), TPC_VERIFY_EXPERT_NAME, name, (long long)n) > 0 &&
					tpc_ckpt_find(vexp, nm) >= 0;)
		n++;
	if (!n)
		return tpc_err_set(e, TPC_EINPUT, "tensor '%s' of the shard set is not in the reference", name);
	for (int64_t x = 0; x < n; x++) {
		char nm[TPC_ERR_NAME_MAX];
		tpc_split one = *sp;
		snprintf(nm, sizeof(nm), TPC_VERIFY_EXPERT_NAME, name, (long long)x);
		one.stacked = false;
		one.dim = sp->dim > 0 ? sp->dim - 1 : -1;
		one.ep = sp->ep > 1 ? sp->ep : 0;
		one.ep_group = sp->ep > 1 ? tpc_ep_owner(sp->ep_placement, x, n, sp->ep) : 0;
		one.expert = x;
		int64_t ix = add_tensor(set, nm, NULL, vexp, &one, transposed, e);
		if (ix < 0)
			return (int)ix;
		for (int t = 0; t < d->tp; t++) {
			tpc_ckpt *rk = vexr ? &vexr[stage * d->tp + t] : NULL;
			if (d->a->mpi && t != d->a->me)
				continue;
			int64_t k = rk ? tpc_ckpt_find(rk, nm) : -1;
			tpc_verify_set_rank(set, ix, t, rk ? rk : &rank[stage * d->tp + t], k >= 0 ? &rk->t[k] : NULL);
		}
	}
	return 0;
}

/* One tensor of the set: its split (the manifest's, or the plan's resolved
 * on the reference), its reference (the dense one for a set sharded with
 * --dequantize; a quantized weight also checked dense is checked raw as
 * "NAME (F8_E4M3)"), checksums, and each rank's tensor. */
static int describe_tensor(tpc_cli_vdesc *d, tpc_verify_set *set, size_t i, tpc_err *e)
{
	const tpc_cli_vargs *a = d->a;
	tpc_split sp;
	const char *name;
	int stage = 0, tp = d->tp, ret;
	if ((ret = split_of(d, i, &sp, &name, &stage, e)))
		return ret;
	bool transposed = d->have_plan && sp.rule >= 0 && (size_t)sp.rule < d->plan.nrules && d->plan.rules[sp.rule].transposed;
	if (sp.stacked && stacked_name(d, name))
		return describe_stacked(d, set, &sp, name, stage, transposed, &d->vexp, d->vexr, d->rank, e);
	char raw[TPC_ERR_NAME_MAX + 32];
	const char *as = NULL;
	int64_t dk = d->ndq ? tpc_ckpt_find(&d->refd, name) : -1, rk0 = tpc_ckpt_find(&d->ref, name);
	/* a layer's shape rewritten per rank (compressed-tensors weight_shape):
	 * the ranks are compared with the shape of their slice */
	const tpc_ckpt *rck = sp.is_shape ? &d->vaux : &d->ref;
	if (dk >= 0 && d->refd.t[dk].dq && d->dense_set) {
		rck = &d->refd;
	} else if (dk >= 0 && d->refd.t[dk].dq && rk0 >= 0) {
		snprintf(raw, sizeof(raw), "%s (%s)", name, tpc_dtype_name(d->ref.t[rk0].src_dtype));
		as = raw;
	}
	int64_t ix = add_tensor(set, name, as, rck, &sp, transposed, e);
	if (ix < 0)
		return (int)ix;
	tpc_vtensor *vt = &set->t[ix];
	if (d->have_man) {
		const tpc_manifest_tensor *mt = &d->man.t[i];
		vt->hash_alg = d->man.checksum;
		if (mt->has_hash && !sp.is_shape) {
			vt->has_hash = true;
			memcpy(vt->hash, mt->hash, TPC_HASH_MAX);
		}
		if (mt->rank_hash) {
			if (!(vt->rank_hash = tpc_malloc((size_t)tp * TPC_HASH_MAX)))
				return tpc_err_nomem(e);
			memcpy(vt->rank_hash, mt->rank_hash, (size_t)tp * TPC_HASH_MAX);
		}
	}
	for (int t = 0; t < tp; t++) {
		tpc_ckpt *rk = &d->rank[stage * tp + t];
		if (a->mpi && t != a->me)
			continue;
		int64_t k = tpc_ckpt_find(rk, name);
		tpc_verify_set_rank(set, ix, t, rk, k >= 0 ? &rk->t[k] : NULL);
	}
	return 0;
}

/* Block and model checks when the structure is known: --arch, else the
 * plan's family; its record's layer parts say what verify computes. */
static int attach_model(tpc_cli_vdesc *d, tpc_verify_set *set, tpc_err *e)
{
	const char *arch = d->a->arch;
	const char *an = arch ? arch : (d->have_plan && d->plan.name ? d->plan.name : "none");
	if (!strcmp(an, "none") || !(d->a->checks & (TPC_VCHECK_BLOCKS | TPC_VCHECK_MODEL)))
		return 0;
	if (d->facts.quant.method == TPC_QS_FP4 && d->facts.quant.mx_blocks && !d->dense_set && !d->vexrd) {
		/* no dense view of the MXFP4 experts (--no-dequantize, no manifest) */
		tpc_cli_info("verify: the experts are MXFP4 blocks (quant_method mxfp4) checked as stored: no block or model "
			     "check without their dense view (a set with a manifest, without --no-dequantize)");
		return 0;
	}
	const tpc_family *fam = tpc_family_find(an);
	if (!fam || !fam->has_parts)
		return arch ? tpc_cli_usage("verify", "--arch: a preset whose record describes its layers (tpconv plan --list) or none, not '%s'",
					    arch)
			    : 0;
	return tpc_verify_model_from_names(set, fam, &d->facts, e);
}

/* Head facts the set's manifest records as unverified (shard was given them
 * on the command line alone) that nothing independent gives verify either:
 * every check would run with them, and a set of half heads, which no runtime
 * can run, would pass. The model check fails naming them; --config (the
 * model's config.json) gives what a head really is, and the checks then use
 * it (issue 41). */
static int report_unverified(tpc_cli_vdesc *d, tpc_verify_report *rep)
{
	static const int hk[] = {TPC_FACT_HEADS, TPC_FACT_KV_HEADS, TPC_FACT_HEAD_DIM};
	const int64_t hv[] = {d->facts.heads, d->facts.kv_heads, d->facts.head_dim};
	char list[256] = "";
	size_t n = 0;
	for (int i = 0; d->have_man && i < 3; i++) {
		int k = hk[i];
		if (!strstr(d->man.facts.origin[k], "unverified") || strncmp(d->facts.origin[k], "--", 2))
			continue;
		int w = snprintf(list + n, sizeof(list) - n, "%s%s %lld", n ? ", " : "", tpc_fact_name(k), (long long)hv[i]);
		if (w > 0 && (size_t)w < sizeof(list) - n)
			n += (size_t)w;
	}
	if (!n)
		return 0;
	tpc_vresult res;
	memset(&res, 0, sizeof(res));
	res.kind = TPC_VC_MODEL;
	res.status = TPC_VR_FAIL;
	snprintf(res.name, sizeof(res.name), "head facts");
	snprintf(res.dtype, sizeof(res.dtype), "-");
	if (snprintf(res.msg, sizeof(res.msg),
		     "%s were given to shard on the command line alone (the manifest records them as unverified): slices of "
		     "whole heads by these counts may be half heads of the real model; give --config (its config.json)",
		     list) >= (int)sizeof(res.msg))
		memcpy(res.msg + sizeof(res.msg) - 4, "...", 4); /* a long list: cut, and saying so */
	tpc_cli_warn("verify: %s", res.msg);
	return d->a->me == 0 ? tpc_verify_report_add(rep, &res) : 0;
}

int tpc_cli_vdesc_build(tpc_cli_vdesc *d, tpc_verify_set *set, tpc_verify_report *rep, tpc_err *e)
{
	int ret;
	if ((ret = report_misplaced(d, rep, e)) || (ret = report_dp_files(d, rep, e)) || (ret = report_unverified(d, rep)))
		return ret;
	/* the shapes ranks hold of their slices, before anything points into vaux */
	for (size_t i = 0; d->have_man && i < d->man.n; i++)
		if (d->man.t[i].split.is_shape &&
		    (ret = expected_shape(&d->vaux, &d->ref, d->man.t[i].name, &d->man.t[i].split, e)))
			return ret;
	if ((ret = expert_views(d, e)) || (ret = dense_expert_views(d, e)))
		return ret;
	tpc_verify_set_release(set);
	tpc_verify_set_init(set, d->tp);
	/* a stage of tp x dp ranks (Megatron's ep over tp): d->tp counts them all */
	set->dp = d->have_man && d->man.dp > 1 ? d->man.dp : 1;
	for (size_t i = 0, nt = d->have_man ? d->man.n : d->ref.n; i < nt; i++)
		if ((ret = describe_tensor(d, set, i, e)))
			return ret;
	/* a quantized set: every weight dequantized on each rank from its pieces
	 * against the matching window of the dequantized reference */
	for (size_t k = 0; d->rankd && k < d->refd.n; k++)
		if ((ret = add_dense(d, set, k, e)))
			return ret;
	tpc_verify_link_biases(set);
	/* rank files holding tensors the description does not know */
	for (int r = 0; r < d->nfiles; r++)
		for (size_t k = 0; k < d->rank[r].n; k++)
			if (tpc_verify_set_find(set, d->rank[r].t[k].name) < 0 && !stacked_name(d, d->rank[r].t[k].name)) {
				char msg[96];
				snprintf(msg, sizeof(msg), "rank file %d holds a tensor the set does not list", r);
				if ((ret = report_structure(d, rep, d->rank[r].t[k].name, tpc_dtype_name(d->rank[r].t[k].dtype),
							    msg)))
					return ret;
			}
	return attach_model(d, set, e);
}
