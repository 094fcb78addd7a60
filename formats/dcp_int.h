/*
 * dcp_int.h - what dcp.c and megatron_dist.c share, private to the two.
 *
 * dcp.c parses .metadata (dcp.h), writes DCP folders and registers the
 * format; megatron_dist.c opens a folder as one checkpoint, Megatron-Core's
 * torch_dist save folders included, through the entries below.
 */
#ifndef TPC_DCP_INT_H
#define TPC_DCP_INT_H

#include "dcp.h"
#include "formats.h"

/* Free one parsed entry's chunks, names and path, and zero it (an entry
 * dropped before the items are read). */
void tpc__dcp_entry_release(tpc_dcp_entry *en);

/* The format's detect and open hooks (tpc_fmt_dcp). */
int tpc__dcp_detect(const char *path, const uint8_t *head, size_t n);
int tpc__dcp_open(tpc_ckpt *ck, const char *dir, const tpc_open_opts *o, tpc_err *e);

/* Megatron-Core's distributed optimizer state in a torch_dist save, read
 * when TPC_OPEN_OPTIMIZER asks (megatron_optim.c, which cites the layouts):
 * begin reads common.pt (the sharding type, refused unless a model-space
 * one, and the param groups); keep says which optimizer.* entries to read
 * (1) or refuses one (< 0); the flattened form of fully_sharded_model_space
 * (an entry one dim longer than its parameter's, param_entry) is rebuilt in
 * the parameter's shape by unflat from its chunks' pieces; tree makes the
 * object tree get_state_dict saves, tensors renamed model.NAME and
 * optim.state.NAME.KEY (tpc_format.h, TPC_OPEN_OPTIMIZER). */
typedef struct tpc__mcore_optim {
	bool on;
	char *type;          /* param_state_sharding_type */
	char *common;        /* the common.pt it came from */
	tpc_value *groups;   /* common.pt's optimizer.optimizer.param_groups (a chained
	                        optimizer's: the dense part's, then the expert part's) */
	size_t ndense;       /* groups [0, ndense) are the dense parameters' */
	bool chained;        /* two distributed optimizers: dense, expert-parallel */
	tpc_value *args;     /* common.pt's args, or NULL */
	bool dp;             /* 'dp_reshardable' or 'dp_zero_gather_scatter': the buckets,
	                        mapped by megatron_dp_optim.c */
	bool dpz;            /* 'dp_zero_gather_scatter': each DP group's buffers
	                        gathered in one ShardedObject, 'param_state' */
	size_t nparams, nstate;
	int64_t iteration;   /* common.pt's iteration (-1: none) */
	int64_t consumed;    /* args' consumed_train_samples (-1: none) */
	int sched;           /* opt_param_scheduler: 0 none, 1 its schedule None (unknown), 2 whole */
} tpc__mcore_optim;

/* An optimizer entry of a torch_dist save: "optimizer.*", or a chained
 * optimizer's "chained_N.optimizer.*" (optimizer.py:1573-1603) */
bool tpc__mcore_optim_key(const char *fqn);
int tpc__mcore_optim_begin(tpc__mcore_optim *mo, const char *iterdir, tpc_err *e);
void tpc__mcore_optim_release(tpc__mcore_optim *mo);
int tpc__mcore_optim_keep(const tpc__mcore_optim *mo, const tpc_dcp_entry *en, const char *path, tpc_err *e);
const tpc_dcp_entry *tpc__mcore_optim_param_entry(const tpc_dcp_meta *m, const tpc_dcp_entry *en);
bool tpc__mcore_optim_is_flat(const tpc_dcp_entry *en, const tpc_dcp_entry *pe);
int tpc__mcore_optim_unflat(const tpc_dcp_entry *en, const tpc_dcp_entry *pe, const tpc_tensor *piece,
			    const size_t *idx, size_t nlive, tpc_tensor *out, const char *path, tpc_err *e);
int tpc__mcore_optim_tree(tpc__mcore_optim *mo, tpc_ckpt *ck, const char *path, tpc_err *e);
struct tpc_buf;
void tpc__mcore_optim_about(const tpc__mcore_optim *mo, struct tpc_buf *b);

/* 'dp_reshardable' (megatron_dp_optim.c, which cites the layout): once every
 * entry of the folder is read into ck (the model's tensors per layer, the
 * buckets 'optimizer.distributed.dp_group_idx_G....' as 1-D tensors, the
 * ShardedObjects as vals[i] of m's bytes entries), each parameter's master
 * and moments are added as "optimizer.state.{param,exp_avg,exp_avg_sq}.NAME"
 * in the model's shape, every master checked against its weight, and
 * mo->groups set from the save's param groups; the caller then drops the
 * 'optimizer.distributed.' entries and tensors and calls tree. */
int tpc__mcore_dp_map(tpc__mcore_optim *mo, tpc_ckpt *ck, const tpc_dcp_meta *m, tpc_value *const *vals,
		      const char *path, tpc_err *e);

/* Megatron's buffer layout, for both bucket readers (megatron_optim.c;
 * distrib_optimizer.py:506-589 and param_layout.py at d98e8a6): n
 * parameters in named_parameters order, numel[j] elements each, laid out in
 * reverse, each start aligned to 64 elements, a bucket closed at a
 * parameter's end once it holds `bucket` elements or more (bucket 0: one
 * bucket), the shared embedding (shared[j]) in a bucket of its own. With
 * want (nwant sizes a save records), a bucket closes instead where it
 * reaches want[b] exactly: -1 when a parameter would run past it or past
 * the last bucket (*bad = that parameter, sizes[*nb] how far it would
 * reach) or the parameters end first (*bad = n, sizes[*nb] the last
 * bucket's fill). bk[j]: parameter j's bucket, at[j]: its start inside it;
 * sizes[0..*nb): each bucket's unpadded size (room for n + 1 entries; the
 * end padding to lcm(dp, 128) is not in it). */
int tpc__mcore_layout(const int64_t *numel, const bool *shared, size_t n, int64_t bucket, const int64_t *want,
		      size_t nwant, int64_t *bk, int64_t *at, int64_t *sizes, size_t *nb, size_t *bad);
/* The proof of an inferred layout: do a model tensor's elements (`model`, a
 * view of BF16, F16 or F32) equal its fp32 master's (`master`, a view of
 * the same element count) rounded to the model's dtype? Every element of
 * tensors of up to TPC__MCORE_PROOF_ALL elements, else TPC__MCORE_PROOF_RUNS
 * runs of TPC__MCORE_PROOF_RUN spread evenly over it, each run read at once.
 * 0 with *at -1 when they agree; 0 with the first differing element's flat
 * index in *at, the master's value in *f and the model's bits in *want;
 * an error when unreadable. */
#define TPC__MCORE_PROOF_ALL 65536
#define TPC__MCORE_PROOF_RUNS 64
#define TPC__MCORE_PROOF_RUN 64
int tpc__mcore_prove(const tpc_ckpt *ck, const tpc_tensor *master, const tpc_tensor *model, int64_t *at, float *f,
		     uint32_t *want, tpc_err *e);
/* Is parameter `name` (Megatron's key) in a bucket of its own? The word
 * embeddings on the first stage and the output layer's copy of them on the
 * last, when tied (no untie) across pp > 1 stages: 'shared_embedding'
 * (models/common/language_module.py:258-283 at d98e8a6 sets it only at
 * pp > 1; with one stage it returns before), distrib_optimizer.py:530-531. */
bool tpc__mcore_shared_embedding(const char *name, int64_t untie, int64_t pp);
/* A routed expert's parameter (the chained optimizer's expert part):
 * "...mlp.experts.local_experts.E..." as the readers name it */
bool tpc__mcore_is_expert(const char *name);
/* The same layout as get_parameter_state_dp_zero (distrib_optimizer.py
 * :1262-1411) coalesces it, bucket after bucket, each without its end
 * padding: pos[j], parameter j's offset; *total, the sum of the buckets'
 * unpadded sizes (the save's numel_unpadded); *nb, the buckets. -1: no
 * memory. */
int tpc__mcore_coalesced(const int64_t *numel, const bool *shared, size_t n, int64_t bucket, int64_t *pos,
			 int64_t *total, size_t *nb);
/* A coalesced distrib_optim.pt dict (get_parameter_state_dp_zero: a legacy
 * save's distrib_optim.pt, a dp_zero_gather_scatter save's param_state)
 * holding ngbuf buffers (one per model chunk), one dtype each: buffer v's
 * "param", "exp_avg", "exp_avg_sq" tensors (ix[], indices into ck), each
 * numel_unpadded (*unpadded) f32 elements, checked; where (a file) and name
 * (an entry of it, or NULL) name it in errors. */
int tpc__mcore_world_tensors(const tpc_ckpt *ck, const tpc_value *dv, int64_t ngbuf, int64_t v, const char *where,
			     const char *name, int64_t ix[3], int64_t *unpadded, tpc_err *e);
/* DDP's bucket size for pipeline stage pp_rank (distributed_data_parallel.py
 * :131-171: --ddp-bucket-size, else max(40000000, 1000000 x dp x cp), none
 * without --overlap-grad-reduce or past the first stage): 0 for none. */
int tpc__mcore_bucket_size(const tpc_value *args, int64_t pp_rank, int64_t *bucket, const char *path, tpc_err *e);
/* argparse.Namespace field k as an int (def when absent or None; false then) */
bool tpc__mcore_arg_int(const tpc_value *args, const char *k, int64_t def, int64_t *v);

/* A legacy rank file (model_optim_rng.pt, opened by the torch format) with
 * distrib_optim.pt beside it: its state mapped by the buffer layout and given
 * as the tree above (megatron_legacy_optim.c); 0 doing nothing for any other
 * torch file. */
int tpc__megatron_legacy_optim(tpc_ckpt *ck, const char *path, tpc_err *e);

#endif
