/* cmd_verify.c - `tpconv verify --reference ORIG --shards DIR`: check a shard
 * set against the unsplit checkpoint (verify/tpc_verify.h does the checks).
 *
 * This file translates what the set says about itself - the manifest's split
 * of every tensor (kind, dim, parts, padding, replicas, row bias), the plan's
 * `transposed`, the model facts, the checksums - or, for a set without a
 * manifest, what --preset/--plan resolve, into verify's neutral description.
 * Under mpirun each process opens only its own rank files (every pipeline
 * stage of its tp rank) and rank 0 reports. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tpc_buf.h"
#include "tpc_format.h"
#include "tpc_family.h"
#include "tpc_io.h"
#include "tpc_manifest.h"
#include "tpc_plan.h"
#include "tpc_quant.h"
#include "tpc_shard.h"
#include "tpc_util.h"
#include "tpc_verify.h"

static const char *help =
	"usage: tpconv verify --reference ORIG --shards DIR [options]\n\n"
	"Check a tensor-parallel shard set against the unsplit checkpoint it came from:\n"
	"  structure  every rank file present, every rank tensor shaped as the split says\n"
	"             and bit for bit its slice of the original (padding zero, KV replicas\n"
	"             equal, manifest checksums confirmed);\n"
	"  layers     each split weight with seeded inputs: the unsplit layer against the\n"
	"             tensor-parallel one with real collectives (column: all-gather, fused\n"
	"             parts re-assembled per part; row: all-reduce, bias added once; vocab:\n"
	"             masked lookup + all-reduce, and all-gathered logits);\n"
	"  blocks     (llama, gpt2) each layer's attention (per head, GQA replicas) and MLP\n"
	"             (SwiGLU on fused gate/up) as the ranks run them;\n"
	"  model      (llama, gpt2) a forward pass on --tokens tokens, unsplit vs\n"
	"             tensor-parallel: logits max abs/rel difference and top-1 agreement.\n"
	"Ranks compute in fp32 against an fp64 reference. Tolerances by dtype: F32 rtol\n"
	"1e-5 (model 1e-4), F16/BF16 1e-2; attention with huge scores is allowed more\n"
	"(the report shows the rtol used). The report is a '#' table on stdout; --json and\n"
	"--junit write it for programs and CI.\n\n"
	"Backends: ranks are threads of this process (default); under 'mpirun -np TP\n"
	"tpconv verify ...' each process opens only its own rank files and rank 0 reports;\n"
	"--device cuda runs the matmuls with cuBLAS and the collectives with NCCL (the\n"
	"tpconv_cuda module; exit 5 without it or without a visible GPU); with more ranks\n"
	"than GPUs the ranks share them (rank r on GPU r mod GPUs) and the collectives\n"
	"stay on the host, so a tp-8 set can be checked on one GPU.\n\n"
	"Options:\n"
	"  --reference ORIG         the unsplit checkpoint (any format tpconv reads)\n"
	"  --shards DIR             the shard set (a tpconv manifest, OSLO or TensorRT-LLM files)\n"
	"  --preset NAME, --plan FILE   the plan of a set without a manifest\n"
	"  --ranks N (--tp N)       tensor-parallel degree of a set without a manifest\n"
	"  --config FILE            model facts from a Hugging Face config.json\n"
	"  --heads N, --kv-heads N, --head-dim N   model facts\n"
	"  --arch llama|gpt2|dit|none   model structure for block and model checks (default: the\n"
	"                           plan's name when it is llama or gpt2)\n"
	"  --checks LIST            comma-separated: structure,layers,blocks,model (default all)\n"
	"  --no-dequantize          a quantized set (FP8, GPTQ, AWQ: the reference's config.json\n"
	"                           quantization_config) is checked as stored only; by default\n"
	"                           every weight is also dequantized on each rank from the pieces\n"
	"                           it holds and checked (structure, layers, blocks) against the\n"
	"                           dequantized reference, its raw tensors as 'NAME (F8_E4M3)'\n"
	"  --device cpu|cuda        where the ranks compute (default cpu)\n"
	"  --tokens T               tokens per check (default 8)\n"
	"  --seed S                 seed of the inputs (default 1)\n"
	"  --rtol X, --atol X       tolerances for every check (default: by dtype)\n"
	"  --threads N              OpenMP threads per rank (default: cores / ranks)\n"
	"  --json FILE              the report as JSON (schema in tpc_verify.h)\n"
	"  --junit FILE             the report as JUnit XML\n"
	"  -q, --quiet              print only failing checks\n"
	"  -v, --verbose            say more\n"
	"  -h, --help               this help\n\n"
	"Exit status: 0 every check passed, 1 a check failed (the report names the tensor,\n"
	"rank and first differing values), 2 usage error, 3 bad or unsupported input,\n"
	"4 output or I/O failure, 5 GPU/NCCL/MPI failure.\n";

enum {
	O_REF = 256, O_SHARDS, O_PRESET, O_PLAN, O_TP, O_CONFIG, O_HEADS, O_KV, O_HD, O_ARCH, O_CHECKS, O_DEVICE,
	O_TOKENS, O_SEED, O_RTOL, O_ATOL, O_THREADS, O_JSON, O_JUNIT, O_NODQ,
};

static int parse_double(const char *flag, const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !(v >= 0))
		return tpc_cli_usage("verify", "%s: expected a number >= 0, got '%s'", flag, s);
	*out = v;
	return 0;
}

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
	return tpc_verify_set_add(s, as ? as : name, ref, &ref->t[ri], vs, sp->dim, transposed, sp->row_bias, np, parts,
				  e);
}

int tpc_varch_parse(const char *name, tpc_varch *out)
{
	/* verify's own names, or a family whose record says which it runs as */
	static const char *const names[] = {"llama", "gpt2", "dit"};
	static const tpc_varch archs[] = {TPC_VARCH_LLAMA, TPC_VARCH_GPT2, TPC_VARCH_DIT};
	const tpc_family *f = tpc_family_find(name);
	if (f)
		name = f->verify;
	for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i])) {
			*out = archs[i];
			return 0;
		}
	return -1;
}

tpc_vfacts tpc_cli_vfacts(const tpc_model_facts *f)
{
	tpc_vfacts v;
	memset(&v, 0, sizeof(v));
	v.heads = f->heads;
	v.kv_heads = f->kv_heads;
	v.head_dim = f->head_dim;
	v.hidden = f->hidden;
	v.vocab = f->vocab;
	v.layers = f->layers;
	v.moe_top_k = f->experts_per_tok;
	v.moe_renorm = f->norm_topk;
	v.moe_sigmoid = f->scoring == TPC_MOE_SIGMOID ? 1 : f->scoring == TPC_MOE_SOFTMAX ? -1 : 0;
	v.moe_group_max = f->topk_method == TPC_MOE_GROUP_LIMITED;
	if (f->topk_method == TPC_MOE_GROUP_LIMITED || f->topk_method == TPC_MOE_NOAUX_TC) {
		v.moe_n_group = f->n_group;
		v.moe_topk_group = f->topk_group;
	}
	v.moe_scale = f->routed_scale;
	if (f->ff_act) {
		v.ff_glu = tpc_ff_act_gated(f->ff_act) ? 1 : -1;
		v.ff_act = f->ff_act == TPC_FF_GELU || f->ff_act == TPC_FF_GEGLU ? TPC_VACT_GELU
			   : f->ff_act == TPC_FF_SWIGLU || f->ff_act == TPC_FF_OTHER ? TPC_VACT_SILU
										 : TPC_VACT_GELU_TANH;
	}
	return v;
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

/*
 * Dense check of a quantized set: refd's dequantized weight k (computed from
 * the reference's packed tensors) against each rank's, dequantized from the
 * pieces that rank holds (rankd). The split: the manifest's for an FP8
 * weight (same name, same shape); for GPTQ/AWQ, whose weight has no entry,
 * the plan's rule for it, on the stage and EP group of its first companion.
 */
static int add_dense(tpc_verify_set *set, const tpc_manifest *man, const tpc_plan *plan, bool have_plan,
		     const tpc_model_facts *facts, const tpc_ckpt *refd, tpc_ckpt *rankd, size_t k, int tp, bool mpi,
		     int me, tpc_err *e)
{
	const tpc_tensor *t = &refd->t[k];
	if (!t->dq)
		return 0;
	const tpc_manifest_tensor *mt = NULL, *mc = NULL;
	for (size_t i = 0; i < man->n; i++) {
		if (!strcmp(man->t[i].name, t->name))
			mt = &man->t[i];
		if (t->dq->c[0].name && !strcmp(man->t[i].name, t->dq->c[0].name))
			mc = &man->t[i];
	}
	if (!mt && !mc)
		return 0; /* not in the set (dropped by its rules) */
	tpc_split sp;
	bool transposed = false;
	if (mt) {
		sp = mt->split;
	} else {
		int rtp = tpc_split_tp(&mc->split, tp);
		if (!have_plan) {
			tpc_cli_info("verify: no plan in the manifest: '%s' is checked as stored only", t->name);
			return 0;
		}
		int ret = tpc_plan_resolve(plan, facts, t->name, t->ndim, t->shape, rtp, TPC_RESOLVE_PAD, &sp, NULL, e);
		if (ret)
			return ret;
		sp.ep = mc->split.ep;
		sp.ep_group = mc->split.ep_group;
		sp.expert = mc->split.expert;
	}
	if (sp.rule >= 0 && (size_t)sp.rule < plan->nrules)
		transposed = plan->rules[sp.rule].transposed;
	int stage = (mt ? mt : mc)->stage;
	int64_t ix = add_tensor(set, t->name, NULL, refd, &sp, transposed, e);
	if (ix < 0)
		return (int)ix;
	tpc_vtensor *vt = &set->t[ix];
	vt->transposed = transposed && vt->ref->ndim == 2;
	if (sp.ep > 1) {
		vt->ep = sp.ep;
		vt->ep_group = sp.ep_group;
	}
	for (int r = 0; r < tp; r++) {
		tpc_ckpt *rk = &rankd[stage * tp + r];
		if (mpi && r != me)
			continue;
		int64_t j = tpc_ckpt_find(rk, t->name);
		tpc_verify_set_rank(set, ix, r, rk, j >= 0 ? &rk->t[j] : NULL);
	}
	return 0;
}

int cmd_verify(int argc, char **argv)
{
	static const struct option lo[] = {
		{"reference", required_argument, NULL, O_REF}, {"shards", required_argument, NULL, O_SHARDS},
		{"preset", required_argument, NULL, O_PRESET}, {"plan", required_argument, NULL, O_PLAN},
		{"ranks", required_argument, NULL, O_TP}, {"tp", required_argument, NULL, O_TP},
		{"config", required_argument, NULL, O_CONFIG}, {"heads", required_argument, NULL, O_HEADS},
		{"kv-heads", required_argument, NULL, O_KV}, {"head-dim", required_argument, NULL, O_HD},
		{"arch", required_argument, NULL, O_ARCH}, {"checks", required_argument, NULL, O_CHECKS},
		{"device", required_argument, NULL, O_DEVICE}, {"tokens", required_argument, NULL, O_TOKENS},
		{"seed", required_argument, NULL, O_SEED}, {"rtol", required_argument, NULL, O_RTOL},
		{"atol", required_argument, NULL, O_ATOL}, {"threads", required_argument, NULL, O_THREADS},
		{"json", required_argument, NULL, O_JSON}, {"junit", required_argument, NULL, O_JUNIT},
		{"no-dequantize", no_argument, NULL, O_NODQ},
		{"quiet", no_argument, NULL, 'q'}, {"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	const char *ref_path = NULL, *dir = NULL, *preset = NULL, *plan_file = NULL, *config = NULL, *arch = NULL;
	const char *json = NULL, *junit = NULL, *checks = NULL;
	int64_t tp_flag = 0, v = 0;
	tpc_model_facts flags, facts;
	tpc_verify_opts o;
	tpc_plan plan;
	tpc_manifest man;
	tpc_ckpt ref, refd, vaux;
	tpc_ckpt *rank = NULL, *rankd = NULL;
	size_t ndq = 0;
	bool no_dq = false;
	tpc_verify_set set;
	tpc_verify_report rep;
	tpc_err e;
	bool have_man = false, mpi = false, have_plan = false;
	int c, ret = 0, me = 0, size = 1, nfiles = 0;

	memset(&flags, 0, sizeof(flags));
	tpc_verify_opts_init(&o);
	tpc_plan_init(&plan);
	tpc_ckpt_init(&ref);
	tpc_ckpt_init(&refd);
	tpc_ckpt_init(&vaux);
	tpc_verify_set_init(&set, 1);
	tpc_verify_report_init(&rep);
	memset(&man, 0, sizeof(man));
	tpc_err_init(&e);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "qvh", lo, NULL)) != -1) {
		switch (c) {
		case O_REF: ref_path = optarg; break;
		case O_SHARDS: dir = optarg; break;
		case O_PRESET: preset = optarg; break;
		case O_PLAN: plan_file = optarg; break;
		case O_TP:
			if ((ret = tpc_cli_count("verify", argv[optind - 1], optarg, TPC_VERIFY_MAX_TP, &tp_flag)))
				goto done;
			break;
		case O_CONFIG: config = optarg; break;
		case O_HEADS: case O_KV: case O_HD:
			if ((ret = tpc_cli_count("verify", argv[optind - 1], optarg, (uint64_t)1 << 40, &v)))
				goto done;
			*(c == O_HEADS ? &flags.heads : c == O_KV ? &flags.kv_heads : &flags.head_dim) = v;
			break;
		case O_ARCH: arch = optarg; break;
		case O_CHECKS: checks = optarg; break;
		case O_DEVICE:
			if (!strcmp(optarg, "cuda"))
				o.device = TPC_VDEV_CUDA;
			else if (strcmp(optarg, "cpu")) {
				ret = tpc_cli_usage("verify", "--device: 'cpu' or 'cuda', not '%s'", optarg);
				goto done;
			}
			break;
		case O_TOKENS:
			if ((ret = tpc_cli_count("verify", "--tokens", optarg, TPC_VERIFY_MAX_TOKENS, &v)))
				goto done;
			if (!v) {
				ret = tpc_cli_usage("verify", "--tokens must be at least 1");
				goto done;
			}
			o.tokens = (int)v;
			break;
		case O_SEED:
			if (tpc_parse_u64(optarg, UINT64_MAX, &o.seed, &e)) {
				ret = tpc_cli_usage("verify", "--seed: %s", e.msg);
				goto done;
			}
			break;
		case O_RTOL:
			if ((ret = parse_double("--rtol", optarg, &o.rtol)))
				goto done;
			break;
		case O_ATOL:
			if ((ret = parse_double("--atol", optarg, &o.atol)))
				goto done;
			break;
		case O_THREADS:
			if ((ret = tpc_cli_count("verify", "--threads", optarg, 4096, &v)))
				goto done;
			o.threads_per_rank = (int)v;
			break;
		case O_JSON: json = optarg; break;
		case O_JUNIT: junit = optarg; break;
		case O_NODQ: no_dq = true; break;
		case 'q': tpc_cli_verbose = -1; break;
		case 'v': tpc_cli_verbose++; break;
		case 'h': fputs(help, stdout); goto done;
		default:
			ret = tpc_cli_usage("verify", "unknown or incomplete option '%s'", argv[optind - 1]);
			goto done;
		}
	}
	if (optind < argc) {
		ret = tpc_cli_usage("verify", "unexpected argument '%s'", argv[optind]);
		goto done;
	}
	if (!ref_path || !dir) {
		ret = tpc_cli_usage("verify", "missing %s", !ref_path ? "--reference ORIG" : "--shards DIR");
		goto done;
	}
	if (preset && plan_file) {
		ret = tpc_cli_usage("verify", "give --preset or --plan, not both");
		goto done;
	}
	if (checks) {
		o.checks = 0;
		char *dup = tpc_strdup(checks), *save = NULL;
		for (char *tok = dup ? strtok_r(dup, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
			unsigned f = !strcmp(tok, "structure") ? TPC_VCHECK_STRUCTURE : !strcmp(tok, "layers") ? TPC_VCHECK_LAYERS
				     : !strcmp(tok, "blocks") ? TPC_VCHECK_BLOCKS : !strcmp(tok, "model") ? TPC_VCHECK_MODEL : 0;
			if (!f) {
				ret = tpc_cli_usage("verify", "--checks: unknown check '%s'", tok);
				free(dup);
				goto done;
			}
			o.checks |= f;
		}
		free(dup);
	}
	o.cuda_module = getenv("TPCONV_CUDA_MODULE");
	/* under mpirun: one process per tp rank */
	if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK")) {
		if (tpc_verify_have_mpi()) {
			mpi = true;
			o.backend = TPC_VB_MPI;
			tpc_verify_local_rank(getenv, &o.local_rank, &o.local_size);
			if (tpc_verify_mpi_init(&me, &size, &e)) {
				ret = tpc_cli_fail(&e);
				goto done;
			}
		} else {
			tpc_cli_warn("started by mpirun, but this tpconv was built without MPI: every process checks the whole set");
		}
	}

	/* the set's description: a manifest, or a plan resolved on the reference */
	if ((ret = tpc_ckpt_open(&ref, ref_path, NULL, &e)))
		goto fail;
	char *mpath = tpc_path_join(dir, TPC_MANIFEST_NAME);
	if (!mpath) {
		ret = tpc_err_nomem(&e);
		goto fail;
	}
	if (tpc_exists(mpath)) {
		ret = tpc_manifest_from_file(&man, mpath, &e);
		have_man = !ret;
	}
	free(mpath);
	if (ret)
		goto fail;
	int tp, pp = 1;
	const tpc_layout *layout = NULL;
	if (have_man) {
		tp = man.tp;
		pp = man.pp;
		layout = man.layout;
		if (tp_flag && tp_flag != tp) {
			ret = tpc_cli_usage("verify", "--ranks %lld, but the manifest says tp %d", (long long)tp_flag, tp);
			goto done;
		}
		if (man.plan_json && !preset && !plan_file) {
			if ((ret = tpc_plan_from_buffer(&plan, man.plan_json, strlen(man.plan_json), "manifest plan", &e)))
				goto fail;
			have_plan = true;
		}
	} else {
		if (tpc_set_detect(dir, &layout) != TPC_SET_FOREIGN) {
			ret = tpc_err_set(&e, TPC_EINPUT, "'%s' has no %s and no rank files tpconv knows", dir,
					  TPC_MANIFEST_NAME);
			goto fail;
		}
		if (!preset && !plan_file) {
			ret = tpc_cli_usage("verify", "a set without a manifest needs --preset or --plan");
			goto done;
		}
		if (!tp_flag) {
			ret = tpc_cli_usage("verify", "a set without a manifest needs --ranks N");
			goto done;
		}
		tp = (int)tp_flag;
	}
	if (preset || plan_file) {
		tpc_plan_release(&plan);
		tpc_plan_init(&plan);
		if ((ret = tpc_cli_load_plan(preset, plan_file, &plan, &e)))
			goto fail;
		have_plan = true;
	}
	/* a set without a manifest may record its model facts itself (Megatron's args) */
	tpc_model_facts own;
	memset(&own, 0, sizeof(own));
	if (!have_man && layout && layout->foreign_facts)
		layout->foreign_facts(dir, &own);
	if ((ret = tpc_cli_facts(&flags, config, ref_path, have_man ? &man.facts : &own, have_plan ? &plan : NULL,
				 &facts, &e)))
		goto fail;
	if (have_plan) {
		char note[1024];
		if ((ret = tpc_facts_from_shapes(&facts, &plan, &ref, note, sizeof(note), &e)))
			goto fail;
		if (note[0])
			tpc_cli_info("%s", note);
	}
	/* a set without a manifest was split the way its layout's consumer splits
	 * (vLLM pads the vocabulary its own way) */
	if (!have_man && have_plan && layout->adjust_plan && (ret = layout->adjust_plan(&plan, &ref, &facts, tp, &e)))
		goto fail;
	if (mpi && size != tp) {
		ret = tpc_err_set(&e, TPC_EGPU, "mpirun started %d processes for a tp %d set (run -np %d)", size, tp, tp);
		goto fail;
	}
	/* a quantized reference (FP8, GPTQ, AWQ with its quantization_config)
	 * whose set has a manifest: also check every weight dense */
	tpc_quant_cfg qcfg;
	tpc_dtype qdt = TPC_F32;
	bool dense_set = false;
	memset(&qcfg, 0, sizeof(qcfg));
	if (have_man && !no_dq && tpc_quant_find_quantized(&ref)) {
		if ((ret = tpc_cli_quant_cfg(ref_path, &qcfg, NULL, &e)))
			goto fail;
		if (qcfg.method != TPC_QM_NONE) {
			/* f32: the dense values exactly, whatever the model's torch_dtype */
			if ((ret = tpc_ckpt_open(&refd, ref_path, NULL, &e)) ||
			    (ret = tpc_ckpt_dequantize(&refd, &qcfg, qdt, &ndq, &e)))
				goto fail;
			/* a set sharded with --dequantize holds the dense weights
			 * themselves (in the dtype the manifest names): compare them
			 * with the reference dequantized to that dtype */
			for (size_t i = 0; ndq && i < man.n && !dense_set; i++) {
				int64_t dk = tpc_ckpt_find(&refd, man.t[i].name), ri = tpc_ckpt_find(&ref, man.t[i].name);
				if (dk >= 0 && refd.t[dk].dq && (ri < 0 || ref.t[ri].src_dtype != man.t[i].dtype)) {
					dense_set = true;
					qdt = man.t[i].dtype;
				}
			}
			if (dense_set && qdt != TPC_F32) {
				/* verify compares bytes of the reference's own dtype; the
				 * dequantized reference is F32 until a writer casts it */
				ret = tpc_err_set(&e, TPC_EINPUT,
						  "the set holds dequantized %s weights (shard --dequantize): verify it against the reference dequantized the same way ('tpconv convert --dequantize %s -o dense/', then --reference dense/)",
						  tpc_dtype_name(qdt), ref_path);
				goto fail;
			}
			if (ndq)
				tpc_cli_info(dense_set ? "verify: the set holds %zu weights dequantized (shard --dequantize): checked against the reference dequantized"
						       : "verify: %zu quantized weights are also checked dense, dequantized on every rank",
					     ndq);
		}
	}

	/* rank files: file r = pp_rank * tp + tp_rank; under MPI only ours */
	nfiles = tp * pp;
	if (!(rank = tpc_calloc((size_t)nfiles, sizeof(*rank)))) {
		ret = tpc_err_nomem(&e);
		goto fail;
	}
	for (int r = 0; r < nfiles; r++)
		tpc_ckpt_init(&rank[r]);
	if (ndq && !dense_set && !(rankd = tpc_calloc((size_t)nfiles, sizeof(*rankd)))) {
		ret = tpc_err_nomem(&e);
		goto fail;
	}
	for (int r = 0; rankd && r < nfiles; r++)
		tpc_ckpt_init(&rankd[r]);
	for (int r = 0; r < nfiles; r++) {
		if (mpi && r % tp != me)
			continue;
		char *p = have_man ? tpc_path_join(dir, man.files[r]) : layout->foreign_rank_path(dir, r % tp, r / tp, tp);
		if (!p) {
			ret = tpc_err_nomem(&e);
			goto fail;
		}
		if (!tpc_layout_rank_exists(layout, p)) {
			ret = tpc_err_set(&e, TPC_EINPUT, "the set in '%s' lacks the file of rank %d", dir, r);
			tpc_err_path(&e, p);
			free(p);
			goto fail;
		}
		/* through the layout: a rank that stores fused or renamed tensors
		 * (vLLM) gives them back as split */
		char **names = NULL;
		size_t nnames = 0;
		if (have_man && !(names = tpc_calloc(man.n ? man.n : 1, sizeof(*names)))) {
			free(p);
			ret = tpc_err_nomem(&e);
			goto fail;
		}
		for (size_t i = 0; have_man && i < man.n; i++)
			if (man.t[i].stage == r / tp)
				names[nnames++] = man.t[i].name;
		tpc_layout_rank_ctx rc = {r, r % tp, r / tp, tp, pp, &facts, names, nnames};
		ret = tpc_layout_open_rank(layout, p, &rc, &rank[r], &e);
		if (!ret && rankd) { /* the same rank again, its quantized weights dense */
			size_t nr = 0;
			tpc_quant_cfg rq = qcfg;
			rq.rank_piece = true;
			if (!(ret = tpc_layout_open_rank(layout, p, &rc, &rankd[r], &e)))
				ret = tpc_ckpt_dequantize(&rankd[r], &rq, qdt, &nr, &e);
			if (ret)
				tpc_err_path(&e, p);
		}
		free(names);
		free(p);
		if (ret)
			goto fail;
		const char *id = tpc_ckpt_meta_get(&rank[r], "tpconv.set_id");
		if (have_man && id && strcmp(id, man.set_id)) {
			ret = tpc_err_set(&e, TPC_EINPUT, "rank file '%s' belongs to set %s, the manifest is set %s",
					  man.files[r], id, man.set_id);
			goto fail;
		}
	}

	/* rank files in the wrong place come first in the report */
	for (int r = 0; r < nfiles; r++) {
		if (mpi && r % tp != me)
			continue;
		int holds = rank_file_holds(have_man ? &man : NULL, &rank[r], r, tp, &e);
		if (holds < 0) {
			ret = holds;
			goto fail;
		}
		if (holds == r)
			continue;
		tpc_vresult res;
		char *fp = have_man ? NULL : layout->foreign_rank_path(dir, r % tp, r / tp, tp);
		const char *fname = have_man ? man.files[r] : fp ? fp : "?";
		memset(&res, 0, sizeof(res));
		res.kind = TPC_VC_STRUCTURE;
		res.status = TPC_VR_FAIL;
		tpc_sanitize(res.name, sizeof(res.name), fname);
		snprintf(res.dtype, sizeof(res.dtype), "-");
		snprintf(res.msg, sizeof(res.msg),
			 "rank file holds rank %d's tensors: '%.120s' is rank %d's place (files swapped or renamed?)", holds,
			 res.name, r);
		free(fp);
		tpc_cli_warn("rank file '%s' holds rank %d's tensors, not rank %d's", res.name, holds, r);
		if (me == 0 && (ret = tpc_verify_report_add(&rep, &res)))
			goto fail;
	}

	/* the shapes ranks hold of their slices, before anything points into vaux */
	for (size_t i = 0; have_man && i < man.n; i++)
		if (man.t[i].split.is_shape && (ret = expected_shape(&vaux, &ref, man.t[i].name, &man.t[i].split, &e)))
			goto fail;
	/* the description */
	tpc_verify_set_release(&set);
	tpc_verify_set_init(&set, tp);
	size_t nt = have_man ? man.n : ref.n;
	for (size_t i = 0; i < nt; i++) {
		tpc_split sp;
		const char *name;
		int stage = 0;
		if (have_man) {
			sp = man.t[i].split;
			name = man.t[i].name;
			stage = man.t[i].stage;
		} else {
			const tpc_tensor *t = &ref.t[i];
			name = t->name;
			if ((ret = tpc_plan_resolve(&plan, &facts, name, t->ndim, t->shape, tp, TPC_RESOLVE_PAD, &sp, NULL, &e)))
				goto fail;
		}
		bool transposed = have_plan && sp.rule >= 0 && (size_t)sp.rule < plan.nrules && plan.rules[sp.rule].transposed;
		/* a quantized weight also checked dense (below) keeps its own name
		 * for that; its raw bytes are checked as "NAME (F8_E4M3)" */
		char raw[TPC_ERR_NAME_MAX + 32];
		const char *as = NULL;
		int64_t dk = ndq ? tpc_ckpt_find(&refd, name) : -1, rk0 = tpc_ckpt_find(&ref, name);
		/* a layer's shape rewritten per rank (compressed-tensors weight_shape):
		 * the ranks are compared with the shape of their slice */
		const tpc_ckpt *rck = sp.is_shape ? &vaux : &ref; /* built above */
		if (dk >= 0 && refd.t[dk].dq && dense_set) {
			rck = &refd; /* dequantized by shard --dequantize */
		} else if (dk >= 0 && refd.t[dk].dq && rk0 >= 0) {
			snprintf(raw, sizeof(raw), "%s (%s)", name, tpc_dtype_name(ref.t[rk0].src_dtype));
			as = raw;
		}
		int64_t ix = add_tensor(&set, name, as, rck, &sp, transposed, &e);
		if (ix < 0) {
			ret = (int)ix;
			goto fail;
		}
		tpc_vtensor *vt = &set.t[ix];
		vt->transposed = transposed && vt->ref->ndim == 2;
		if (sp.ep > 1) {
			vt->ep = sp.ep;
			vt->ep_group = sp.ep_group;
		}
		if (have_man)
			vt->hash_alg = man.checksum;
		if (have_man && man.t[i].has_hash && !sp.is_shape) {
			vt->has_hash = true;
			memcpy(vt->hash, man.t[i].hash, TPC_HASH_MAX);
		}
		if (have_man && man.t[i].rank_hash) {
			if (!(vt->rank_hash = tpc_malloc((size_t)tp * TPC_HASH_MAX))) {
				ret = tpc_err_nomem(&e);
				goto fail;
			}
			memcpy(vt->rank_hash, man.t[i].rank_hash, (size_t)tp * TPC_HASH_MAX);
		}
		for (int t = 0; t < tp; t++) {
			tpc_ckpt *rk = &rank[stage * tp + t];
			if (mpi && t != me)
				continue;
			int64_t k = tpc_ckpt_find(rk, name);
			tpc_verify_set_rank(&set, ix, t, rk, k >= 0 ? &rk->t[k] : NULL);
		}
	}
	/* a quantized set: every weight dequantized on each rank from its pieces
	 * against the matching window of the dequantized reference */
	for (size_t k = 0; rankd && k < refd.n && !ret; k++)
		ret = add_dense(&set, &man, &plan, have_plan, &facts, &refd, rankd, k, tp, mpi, me, &e);
	if (ret)
		goto fail;
	tpc_verify_link_biases(&set);
	/* rank files holding tensors the description does not know */
	for (int r = 0; r < nfiles; r++)
		for (size_t k = 0; k < rank[r].n; k++)
			if (tpc_verify_set_find(&set, rank[r].t[k].name) < 0) {
				tpc_vresult res;
				memset(&res, 0, sizeof(res));
				res.kind = TPC_VC_STRUCTURE;
				res.status = TPC_VR_FAIL;
				tpc_sanitize(res.name, sizeof(res.name), rank[r].t[k].name);
				snprintf(res.dtype, sizeof(res.dtype), "%s", tpc_dtype_name(rank[r].t[k].dtype));
				snprintf(res.msg, sizeof(res.msg), "rank file %d holds a tensor the set does not list", r);
				if (me == 0 && (ret = tpc_verify_report_add(&rep, &res)))
					goto fail;
			}
	/* block and model checks when the structure is known */
	const char *an = arch ? arch : (have_plan && plan.name ? plan.name : "none");
	if (strcmp(an, "none") && (o.checks & (TPC_VCHECK_BLOCKS | TPC_VCHECK_MODEL))) {
		tpc_varch va;
		if (tpc_varch_parse(an, &va)) {
			if (arch) {
				ret = tpc_cli_usage("verify", "--arch: llama, gpt2, dit or none, not '%s'", arch);
				goto done;
			}
		} else {
			tpc_vfacts vf = tpc_cli_vfacts(&facts);
			if ((ret = tpc_verify_model_from_names(&set, va, &vf, &e)))
				goto fail;
		}
	}
	tpc_cli_info("verify: %zu tensors, tp %d, pp %d, %s", set.n, tp, pp, mpi ? "mpi" : "threads");
	ret = tpc_verify_execute(&set, &o, me == 0 ? &rep : NULL, &e);
	if (ret && ret != TPC_EMISMATCH)
		goto fail;
	if (me == 0) {
		tpc_buf b = TPC_BUF_INIT;
		tpc_verify_report_table(&rep, tpc_cli_verbose < 0, &b);
		fwrite(b.p, 1, b.len, stdout);
		fflush(stdout);
		int wr = 0;
		if (json) {
			tpc_buf_reset(&b);
			tpc_verify_report_json(&rep, &b);
			wr = b.oom ? tpc_err_nomem(&e) : tpc_write_file_atomic(json, b.p, b.len, TPC_OUT_FORCE, &e);
		}
		if (!wr && junit) {
			tpc_buf_reset(&b);
			tpc_verify_report_junit(&rep, &b);
			wr = b.oom ? tpc_err_nomem(&e) : tpc_write_file_atomic(junit, b.p, b.len, TPC_OUT_FORCE, &e);
		}
		tpc_buf_release(&b);
		if (wr) {
			ret = wr;
			goto fail;
		}
	}
	ret = rep.nfail || ret == TPC_EMISMATCH ? 1 : 0;
	goto done;
fail:
	if (ret == TPC_EUSAGE || ret > 0)
		goto done;
	ret = tpc_cli_fail(&e);
	if (mpi)
		tpc_verify_mpi_abort(ret); /* ranks may wait in a collective for this one */
done:
	tpc_verify_report_release(&rep);
	tpc_verify_set_release(&set);
	for (int r = 0; rank && r < nfiles; r++)
		tpc_ckpt_release(&rank[r]);
	free(rank);
	for (int r = 0; rankd && r < nfiles; r++)
		tpc_ckpt_release(&rankd[r]);
	free(rankd);
	tpc_ckpt_release(&refd);
	tpc_ckpt_release(&vaux);
	if (have_man)
		tpc_manifest_release(&man);
	tpc_plan_release(&plan);
	tpc_ckpt_release(&ref);
	if (mpi)
		tpc_verify_mpi_finalize();
	return ret;
}
