/* verify_desc.h - the shard set as verify sees it (verify_desc.c): cmd/ is
 * the one layer that sees both shard/ (manifests, plans, layouts) and
 * verify/ (the neutral description), so the translation lives here. */
#ifndef TPC_VERIFY_DESC_H
#define TPC_VERIFY_DESC_H

#include "cli.h"
#include "tpc_ckpt.h"
#include "tpc_manifest.h"
#include "tpc_plan.h"
#include "tpc_quant.h"
#include "tpc_verify.h"

/* What the command line says about the set (cmd_verify parses it). */
typedef struct tpc_cli_vargs {
	const char *ref_path, *dir;          /* --reference, --shards */
	/* the set's options as shard and diff take them: --preset, --plan,
	 * --config, --select (the reference's subtree), --tp/--ranks (0: the
	 * manifest's), --pp (0: the manifest's, 1 without one), the facts */
	tpc_cli_set set;
	const char *arch;
	tpc_cli_remap *rm;                   /* --rules ...: the reference renamed first */
	bool no_dq;                          /* --no-dequantize */
	unsigned checks;                     /* TPC_VCHECK_* */
	bool mpi;                            /* one process per tp rank: open only rank `me`'s files */
	int me, size;
} tpc_cli_vargs;

typedef struct tpc_cli_vdesc {
	const tpc_cli_vargs *a;
	tpc_ckpt ref;                        /* the reference */
	tpc_ckpt refd;                       /* the reference with its quantized weights dense */
	tpc_ckpt vaux;                       /* per-rank shapes of layers whose shape is split */
	tpc_ckpt vexp;                       /* the reference's experts of tensors stacking them, one
	                                        view each (TPC_VERIFY_EXPERT_NAME), over its mappings */
	tpc_ckpt *vexr;                      /* [nfiles]: rank file r's, over its mappings */
	tpc_ckpt vexpd;                      /* the same of refd's dequantized stacks (gpt-oss's
	                                        MXFP4 experts), each expert computed when read */
	tpc_ckpt *vexrd;                     /* [nfiles]: rankd[r]'s */
	tpc_manifest man;
	bool have_man, have_plan;
	tpc_plan plan;                       /* the manifest's, or --preset/--plan */
	tpc_model_facts facts;
	const tpc_layout *layout;
	int tp, pp, nfiles;
	tpc_ckpt *rank, *rankd;              /* [nfiles]: file r = pp_rank * tp + tp_rank */
	tpc_quant_cfg qcfg;
	tpc_dtype qdt;
	size_t ndq;                          /* quantized weights also checked dense */
	bool dense_set;                      /* the set holds them dequantized (shard --dequantize) */
} tpc_cli_vdesc;

void tpc_cli_vdesc_init(tpc_cli_vdesc *d, const tpc_cli_vargs *a);
void tpc_cli_vdesc_release(tpc_cli_vdesc *d);
/* Open the reference, the set's description (manifest, or plan on the
 * reference), its facts and rank files. Returns 0, a negative status in e,
 * or a positive exit status already reported (a usage error). */
int tpc_cli_vdesc_open(tpc_cli_vdesc *d, tpc_err *e);
/* Fill `set` (and rank 0's report with structure failures found while
 * describing: misplaced rank files, tensors the set does not list).
 * Returns as tpc_cli_vdesc_open. */
int tpc_cli_vdesc_build(tpc_cli_vdesc *d, tpc_verify_set *set, tpc_verify_report *rep, tpc_err *e);

#endif
