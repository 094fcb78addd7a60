/*
 * verify_driver.c - run verify/ on in-memory shard sets, correct or broken.
 *
 * The sharder's plan resolver (shard/tpc_plan.h) decides every tensor's
 * split; the driver then builds each rank's tensor as a description over the
 * reference bytes (tpc_tensor_narrow / tpc_tensor_init_cat, no copies) - the
 * way a correct sharder would, or broken in one of the ways a buggy sharder
 * breaks a set (--mutate) - and describes the set to verify/ the way
 * cmd_verify does from a manifest. Tests only: verify/ itself never sees
 * shard/.
 *
 * usage: verify_driver --ref FILE --preset NAME --tp N [--config FILE]
 *          [--mutate KIND] [--mpi] [--seed S] [--tokens T] [--checks LIST]
 *          [--json FILE] [--junit FILE] [-q] [--swap NAME]
 * KIND: naive-qkv naive-gateup kv-split row-col-swap row-col-plan ranks-swap
 *       vocab-off-by-one bias-tp
 * --swap NAME: ranks 0 and 1 hold each other's slice of tensor NAME
 * Prints the report table; exit status as tpconv's (0, 1 mismatch, 3 bad
 * input, 5 GPU/MPI). With a mutation, the tensors it broke are printed on
 * stderr as "broken: NAME" (the mutation suite checks the report names one).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_plan.h"
#include "tpc_util.h"
#include "tpc_verify.h"

enum mut { M_NONE, M_NAIVE_QKV, M_NAIVE_GATEUP, M_KV_SPLIT, M_ROW_COL, M_ROW_COL_PLAN, M_RANKS, M_VOCAB, M_BIAS };
static const char *mut_names[] = {"none", "naive-qkv", "naive-gateup", "kv-split", "row-col-swap",
				  "row-col-plan", "ranks-swap", "vocab-off-by-one", "bias-tp"};

typedef struct entry {
	int64_t ref;          /* index in the checkpoint */
	tpc_split sp;
	bool transposed;
	int64_t rank_ix[TPC_VERIFY_MAX_TP > 64 ? 64 : TPC_VERIFY_MAX_TP];
} entry;

static int fail(tpc_err *e)
{
	char buf[2048];
	tpc_err_format(e, buf, sizeof(buf));
	fprintf(stderr, "verify_driver: error: %s\n", buf);
	return tpc_status_exit(e->code ? e->code : TPC_EINPUT);
}

/* rank t's tensor of a (possibly padded, fused) split, built correctly; with
 * `no_replicas`, KV heads are split evenly instead of replicated (what a
 * sharder unaware of tp > kv heads writes: a fraction of a head per rank) */
static int build_split(const tpc_tensor *ref, const tpc_split *sp, int tp, int t, bool no_replicas,
		       tpc_tensor *out)
{
	tpc_tensor pieces[2 * TPC_PLAN_MAX_PARTS];
	int np = 0, ret = 0;
	int64_t poff = 0;
	for (int k = 0; k < sp->nparts; k++) {
		const tpc_split_part *p = &sp->part[k];
		int64_t len = tpc_split_rank_len(sp, k, tp), start = tpc_split_rank_start(sp, k, tp, t);
		if (no_replicas && p->replicas > 1) {
			len = p->size / tp;
			start = (int64_t)t * len;
		}
		int64_t real = p->size - start;
		real = real < 0 ? 0 : (real > len ? len : real);
		if (real > 0 && tpc_tensor_narrow(&pieces[np++], ref, sp->dim, poff + start, real))
			ret = -1;
		if (len > real) {
			int64_t sh[TPC_MAX_NDIM];
			memcpy(sh, ref->shape, sizeof(int64_t) * (size_t)ref->ndim);
			sh[sp->dim] = len - real;
			if (tpc_tensor_init_zero(&pieces[np++], ref->src_dtype, ref->ndim, sh))
				ret = -1;
		}
		poff += p->size;
	}
	if (!ret)
		ret = tpc_tensor_init_cat(out, pieces, np, sp->dim) ? -1 : 0;
	for (int i = 0; i < np; i++)
		tpc_tensor_release(&pieces[i]);
	return ret;
}

/* a plain chunk t of `tp` along dim (what a sharder that ignores the fused
 * layout, the KV replicas or the split kind writes) */
static int build_chunk(const tpc_tensor *ref, int dim, int tp, int t, tpc_tensor *out)
{
	int64_t n = ref->shape[dim] / tp;
	return tpc_tensor_narrow(out, ref, dim, (int64_t)t * n, n) ? -1 : 0;
}

/* vocab padding off by one: one zero row in front of the rows, then chunked */
static int build_vocab_shift(const tpc_tensor *ref, const tpc_split *sp, int tp, int t, tpc_tensor *out)
{
	int64_t V = sp->part[0].size, padded = V + sp->part[0].pad, len = padded / tp;
	int64_t keep = sp->part[0].pad ? V : V - 1; /* the padded size stays; a row falls off the end when no pad */
	tpc_tensor all[3], cat;
	int64_t sh[TPC_MAX_NDIM];
	memcpy(sh, ref->shape, sizeof(int64_t) * (size_t)ref->ndim);
	sh[0] = 1;
	int n = 0, ret = 0;
	if (tpc_tensor_init_zero(&all[n++], ref->src_dtype, ref->ndim, sh) ||
	    tpc_tensor_narrow(&all[n++], ref, 0, 0, keep))
		ret = -1;
	if (!ret && padded - 1 - keep > 0) {
		sh[0] = padded - 1 - keep;
		if (tpc_tensor_init_zero(&all[n++], ref->src_dtype, ref->ndim, sh))
			ret = -1;
	}
	if (!ret)
		ret = tpc_tensor_init_cat(&cat, all, n, 0) ? -1 : 0;
	for (int i = 0; i < n; i++)
		tpc_tensor_release(&all[i]);
	if (ret)
		return ret;
	ret = tpc_tensor_narrow(out, &cat, 0, (int64_t)t * len, len) ? -1 : 0;
	tpc_tensor_release(&cat);
	return ret;
}

/* the command line */
typedef struct args {
	const char *ref_path, *preset, *config, *json, *junit, *checks, *swap;
	int tp, mut, quiet;
	bool mpi;
} args;

/* argv into *A and o: 0, or the exit status of a usage error (2) */
static int parse_args(int argc, char **argv, args *A, tpc_verify_opts *o)
{
	memset(A, 0, sizeof(*A));
	A->mut = M_NONE;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && v && (i++, 1))
		if (ARG("--ref"))
			A->ref_path = v;
		else if (ARG("--preset"))
			A->preset = v;
		else if (ARG("--config"))
			A->config = v;
		else if (ARG("--tp"))
			A->tp = atoi(v);
		else if (ARG("--seed"))
			o->seed = strtoull(v, NULL, 10);
		else if (ARG("--swap"))
			A->swap = v;
		else if (ARG("--tokens"))
			o->tokens = atoi(v);
		else if (ARG("--json"))
			A->json = v;
		else if (ARG("--junit"))
			A->junit = v;
		else if (ARG("--checks"))
			A->checks = v;
		else if (ARG("--threads"))
			o->threads_per_rank = atoi(v);
		else if (!strcmp(a, "--mpi"))
			A->mpi = true;
		else if (!strcmp(a, "--cuda"))
			o->device = TPC_VDEV_CUDA;
		else if (!strcmp(a, "-q"))
			A->quiet = 1;
		else if (ARG("--mutate")) {
			A->mut = -1;
			for (int k = 0; k < (int)(sizeof(mut_names) / sizeof(*mut_names)); k++)
				if (!strcmp(v, mut_names[k]))
					A->mut = k;
			if (A->mut < 0) {
				fprintf(stderr, "verify_driver: unknown mutation '%s'\n", v);
				return 2;
			}
		} else {
			fprintf(stderr, "verify_driver: unknown argument '%s'\n", a);
			return 2;
		}
#undef ARG
	}
	if (!A->ref_path || !A->preset || A->tp < 1 || A->tp > 64) {
		fprintf(stderr, "usage: verify_driver --ref FILE --preset NAME --tp N [--config FILE] [--mutate KIND]\n");
		return 2;
	}
	if (A->checks) {
		o->checks = 0;
		o->checks |= strstr(A->checks, "structure") ? TPC_VCHECK_STRUCTURE : 0;
		o->checks |= strstr(A->checks, "layers") ? TPC_VCHECK_LAYERS : 0;
		o->checks |= strstr(A->checks, "blocks") ? TPC_VCHECK_BLOCKS : 0;
		o->checks |= strstr(A->checks, "model") ? TPC_VCHECK_MODEL : 0;
	}
	return 0;
}

/* Every rank's view of the first n0 tensors of ck added to it as
 * "rankT/NAME" (ent[i].rank_ix), built as a correct sharder would or broken
 * by mutation mut (the tensors it broke named on stderr by rank me 0) */
static int build_ranks(tpc_ckpt *ck, entry *ent, size_t n0, int tp, int mut, int me, tpc_err *e)
{
	int ret = 0;
	for (size_t i = 0; i < n0 && !ret; i++) {
		tpc_split *sp = &ent[i].sp;
		const char *name = ck->t[i].name;
		bool fused3 = sp->dim >= 0 && sp->nparts == 3, fused2 = sp->dim >= 0 && sp->nparts == 2;
		bool repl_kv = false;
		for (int k = 0; k < sp->nparts; k++)
			repl_kv |= sp->part[k].replicas > 1;
		bool is_row = sp->kind == TPC_SPLIT_ROW && sp->dim >= 0;
		bool broken = (mut == M_NAIVE_QKV && fused3) || (mut == M_NAIVE_GATEUP && fused2 && ck->t[i].ndim == 2) ||
			      (mut == M_KV_SPLIT && repl_kv) || ((mut == M_ROW_COL || mut == M_ROW_COL_PLAN) && is_row && ck->t[i].ndim == 2) ||
			      (mut == M_VOCAB && sp->kind == TPC_SPLIT_VOCAB) || mut == M_RANKS;
		if (mut == M_BIAS && sp->row_bias)
			broken = true;
		if (broken && mut != M_RANKS && me == 0)
			fprintf(stderr, "broken: %s\n", name);
		for (int t = 0; t < tp && !ret; t++) {
			tpc_tensor view;
			tpc_tensor *ref = &ck->t[i];
			char nm[TPC_ERR_NAME_MAX + 32];
			snprintf(nm, sizeof(nm), "rank%d/%s", t, name);
			if (sp->dim < 0)
				ret = tpc_tensor_copy(&view, ref) ? -1 : 0;
			else if (broken && mut == M_KV_SPLIT)
				ret = build_split(ref, sp, tp, t, true, &view);
			else if (broken && (mut == M_NAIVE_QKV || mut == M_NAIVE_GATEUP))
				ret = build_chunk(ref, sp->dim, tp, t, &view);
			else if (broken && (mut == M_ROW_COL || mut == M_ROW_COL_PLAN))
				ret = build_chunk(ref, ent[i].transposed ? 1 : 0, tp, t, &view);
			else if (broken && mut == M_VOCAB)
				ret = build_vocab_shift(ref, sp, tp, t, &view);
			else
				ret = build_split(ref, sp, tp, t, false, &view);
			if (ret) {
				ret = tpc_err_set(e, TPC_EINPUT, "cannot build rank %d of '%s'", t, name);
				break;
			}
			int64_t ix = tpc_ckpt_add_copy(ck, nm, &view, e);
			tpc_tensor_release(&view);
			if (ix < 0) {
				ret = (int)ix;
				break;
			}
			ent[i].rank_ix[t] = ix;
		}
		if (!ret && mut == M_ROW_COL_PLAN && broken) {
			/* the plan itself has the swap: the description says col too */
			sp->kind = TPC_SPLIT_COL;
			sp->dim = ent[i].transposed ? 1 : 0;
			sp->nparts = 1;
			sp->part[0] = (tpc_split_part){ck->t[i].shape[sp->dim], 0, 0, 1, TPC_HEADS_NONE, false};
		}
	}
	return ret;
}

/* The first n0 tensors of ck described to s as cmd_verify does from a
 * manifest, each rank's view its own (ranks 0 and 1 swapped for mutation
 * ranks-swap and tensor A->swap; under MPI rank me's alone) */
static int describe_set(tpc_verify_set *s, tpc_ckpt *ck, const entry *ent, size_t n0, const args *A, int me,
			tpc_err *e)
{
	int ret = 0, tp = A->tp, mut = A->mut;
	for (size_t i = 0; i < n0 && !ret; i++) {
		const tpc_split *sp = &ent[i].sp;
		tpc_vpart parts[TPC_VERIFY_MAX_PARTS];
		for (int k = 0; k < sp->nparts; k++)
			parts[k] = (tpc_vpart){sp->part[k].size, sp->part[k].pad, sp->part[k].replicas};
		tpc_vsplit vs = sp->dim < 0 ? TPC_VSPLIT_REPLICATE : (tpc_vsplit)sp->kind;
		bool row_bias = sp->row_bias && mut != M_BIAS;
		int64_t ix = tpc_verify_set_add(s, ck->t[i].name, ck, &ck->t[i], vs, sp->dim, ent[i].transposed, row_bias,
						sp->nparts, parts, e);
		if (ix < 0) {
			ret = (int)ix;
			break;
		}
		for (int t = 0; t < tp; t++) {
			int src = t;
			if ((mut == M_RANKS || (A->swap && !strcmp(A->swap, ck->t[i].name))) && tp > 1 && t < 2)
				src = 1 - t;
			if (!A->mpi || t == me)
				tpc_verify_set_rank(s, ix, t, ck, &ck->t[ent[i].rank_ix[src]]);
		}
	}
	return ret;
}

/* The report's table on stdout, its JSON and JUnit files if asked; ret the
 * run's status so far, the driver's returned */
static int report(const tpc_verify_report *rep, const args *A, int ret, tpc_err *e)
{
	tpc_buf b = TPC_BUF_INIT;
	tpc_verify_report_table(rep, A->quiet, &b);
	fwrite(b.p, 1, b.len, stdout);
	if (A->json) {
		tpc_buf_reset(&b);
		tpc_verify_report_json(rep, &b);
		if (tpc_write_file_atomic(A->json, b.p, b.len, TPC_OUT_FORCE, e))
			ret = TPC_EIO;
	}
	if (A->junit && !ret) {
		tpc_buf_reset(&b);
		tpc_verify_report_junit(rep, &b);
		if (tpc_write_file_atomic(A->junit, b.p, b.len, TPC_OUT_FORCE, e))
			ret = TPC_EIO;
	}
	if (!ret && rep->nfail)
		ret = TPC_EMISMATCH;
	tpc_buf_release(&b);
	return ret;
}

int main(int argc, char **argv)
{
	args A;
	tpc_verify_opts o;
	tpc_verify_opts_init(&o);
	int rc = parse_args(argc, argv, &A, &o);
	if (rc)
		return rc;
	const char *preset = A.preset, *swap = A.swap;
	int tp = A.tp;
	bool mpi = A.mpi;
	int me = 0, size = 1;
	tpc_err e;
	tpc_err_init(&e);
	/* what cmd/verify hands the library from the environment */
	o.cuda_module = getenv("TPCONV_CUDA_MODULE");
	o.blas = getenv("TPCONV_BLAS");
	if (mpi) {
		o.backend = TPC_VB_MPI;
		tpc_verify_local_rank(getenv, &o.local_rank, &o.local_size);
		if (tpc_verify_mpi_load(getenv("TPCONV_MPI_MODULE"), &e) || tpc_verify_mpi_init(&me, &size, &e))
			return fail(&e);
	}
	tpc_formats_register_all();
	tpc_ckpt ck;
	tpc_plan plan;
	tpc_model_facts facts;
	tpc_verify_set s;
	tpc_verify_report rep;
	entry *ent = NULL;
	int ret = 0;
	tpc_ckpt_init(&ck);
	tpc_plan_init(&plan);
	tpc_verify_set_init(&s, tp);
	tpc_verify_report_init(&rep);
	memset(&facts, 0, sizeof(facts));
	if ((ret = tpc_ckpt_open(&ck, A.ref_path, NULL, &e)) || (ret = tpc_plan_preset(&plan, preset, &e)) ||
	    (A.config && (ret = tpc_facts_from_file(&facts, A.config, &e))))
		goto out;
	tpc_facts_fill(&facts, &plan.facts);
	tpc_facts_finish(&facts);
	size_t n0 = ck.n;
	ent = calloc(n0, sizeof(*ent));
	/* resolve every tensor, then add every rank's view to the checkpoint
	 * (pointers into ck.t are taken only once it has stopped growing) */
	for (size_t i = 0; i < n0 && !ret; i++) {
		tpc_tensor *t = &ck.t[i];
		bool matched;
		ent[i].ref = (int64_t)i;
		ret = tpc_plan_resolve(&plan, &facts, t->name, t->ndim, t->shape, tp, TPC_RESOLVE_PAD, &ent[i].sp,
				       &matched, &e);
		if (ret)
			break;
		int rule = ent[i].sp.rule;
		ent[i].transposed = rule >= 0 && plan.rules[rule].transposed && t->ndim == 2;
	}
	if (!ret)
		ret = build_ranks(&ck, ent, n0, tp, A.mut, me, &e);
	if (ret)
		goto out;
	if ((ret = describe_set(&s, &ck, ent, n0, &A, me, &e)))
		goto out;
	tpc_verify_link_biases(&s);
	bool neox = !strcmp(preset, "gpt-neox") || !strcmp(preset, "libai"), bert = !strcmp(preset, "bert");
	if (swap && me == 0)
		fprintf(stderr, "broken: %s\n", swap);
	/* a decoder record with a tensor table (llama, gpt2, gemma2, olmo2, ...),
	 * GPT-NeoX and LiBai, BERT, DiT: block and model checks */
	const tpc_family *fam = tpc_family_find(preset);
	if ((fam && fam->has_parts && fam->tensors) || !strcmp(preset, "dit") || neox || bert) {
		tpc_model_facts vf = {.heads = facts.heads, .kv_heads = facts.kv_heads, .head_dim = facts.head_dim,
				      .hidden = facts.hidden, .ff_act = facts.ff_act, .norm_eps = facts.norm_eps,
				      .rope_theta = facts.rope_theta, .rotary_pct = facts.rotary_pct,
				      .parallel_residual = facts.parallel_residual, .attn_scalar = facts.attn_scalar,
				      .attn_softcap = facts.attn_softcap, .final_softcap = facts.final_softcap,
				      .rope_theta_local = facts.rope_theta_local, .rope_linear = facts.rope_linear,
				      .sliding_window = facts.sliding_window, .n_typed = facts.n_typed,
				      .n_rope_listed = facts.n_rope_listed, .rope_off_every = facts.rope_off_every};
		memcpy(vf.swa_layers, facts.swa_layers, sizeof(vf.swa_layers));
		memcpy(vf.rope_off, facts.rope_off, sizeof(vf.rope_off));
		if ((ret = tpc_verify_model_from_names(&s, tpc_family_find(preset), &vf, &e)))
			goto out;
	}
	ret = tpc_verify_execute(&s, &o, me == 0 ? &rep : NULL, &e);
	if (ret && ret != TPC_EMISMATCH)
		goto out;
	if (me == 0)
		ret = report(&rep, &A, ret, &e);
out:
	;
	int code = ret == TPC_EMISMATCH ? 1 : ret ? fail(&e) : 0;
	if (mpi && ret && ret != TPC_EMISMATCH)
		tpc_verify_mpi_abort(code);
	free(ent);
	tpc_verify_report_release(&rep);
	tpc_verify_set_release(&s);
	tpc_plan_release(&plan);
	tpc_ckpt_release(&ck);
	if (mpi)
		tpc_verify_mpi_finalize();
	return code;
}
