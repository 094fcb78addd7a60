/* layout_megatron_dist.c - a Megatron-Core torch_dist checkpoint (the folder
 * megatron.core.dist_checkpointing loads; FRAMEWORKS.md §2b), for the dense
 * decoders whose family records list the layout (LLaMA's names).
 *
 * On disk (Megatron-LM at d98e8a6; megatron/training/checkpointing.py
 * get_checkpoint_name / read_metadata, megatron/core/dist_checkpointing/):
 *   latest_checkpointed_iteration.txt  "release", as the legacy layout and
 *                                      tools/checkpoint's savers write it
 *   release/__R_0.distcp   rank R's items (R = pp_rank * tp + tp_rank, Megatron's
 *                          default order tp-cp-ep-dp-pp with dp 1), each a torch.save
 *                          of one bare tensor: DCP's FileSystemWriter bytes, as the
 *                          dcp layout writes them (layout_dcp.c)
 *   release/.metadata      torch's DCP Metadata over every rank's items: each
 *                          ShardedTensor key with its GLOBAL shape and one chunk
 *                          (offsets, sizes) per stored shard
 *   release/common.pt      torch.save of the common state dict: args (an
 *                          argparse.Namespace), checkpoint_version 3.0, iteration 0,
 *                          content_metadata {singleton_local_shards: False,
 *                          chained_optim_avoid_prefix: True}
 *                          (dist_checkpointing/strategies/common.py:15,29 save_common;
 *                          serialization.py:192-217 still loads it before the newer
 *                          "common_state" ShardedObject; training/checkpointing.py:
 *                          560-561 _build_sharded_state_dict_metadata)
 *   release/metadata.json  {"sharded_backend": "torch_dist", "sharded_backend_version": 1,
 *                          "common_backend": "torch", "common_backend_version": 1}
 *                          (dist_checkpointing/core.py:23-33 CheckpointingConfig,
 *                          69 save_config; older releases had the common_* fields,
 *                          newer ones drop unknown fields on load: core.py:64-65)
 *   tpconv-manifest.json, the model folder's companions   as every layout
 *
 * The keys and their sharding (Megatron's sharded_state_dict for GPTModel with
 * the TransformerEngine layer spec, homogeneous layers):
 *   - decoder layers are STACKED: one key per parameter, no layer number
 *     ("decoder.layers.self_attention.linear_qkv.weight"), global shape
 *     [num_layers, ...], layer L's chunk at offset L of the leading axis and its
 *     item [1, ...] (transformer/transformer_block.py:839-842 sharded_prefix and
 *     sharded_pp_offset (0, global_layer_offset, num_layers);
 *     dist_checkpointing/strategies/torch.py:188-189 the data viewed as
 *     (1,) * prepend_axis_num + local_shape). Global layer numbers: any pipeline
 *     split, even or not (--pp-layers), stores the same keys, only in other files.
 *   - tensor-parallel weights: one chunk per tp rank at tp_rank * local rows
 *     (columns for linear_proj / linear_fc2, axis 1), replica_id (0, 0, dp);
 *     replicated ones (the norms: linear_qkv.layer_norm_weight,
 *     linear_fc1.layer_norm_weight, final_layernorm) have replica_id
 *     (0, tp_rank, dp): only tp rank 0's copy is stored
 *     (transformer/utils.py:96-175 make_sharded_tensors_for_checkpoint).
 *   - linear_qkv: per query group [q_g; k_g; v_g] (the layout Megatron's
 *     loaders build: tools/checkpoint/loader_llama_mistral.py), tp splits the
 *     groups, so a rank's rows are one contiguous box; groups % tp == 0.
 *   - linear_fc1 (SwiGLU): TWO chunks per rank, the gate half at
 *     tp_rank * f and the up half at tp * f + tp_rank * f of a global
 *     [gate; up] (transformer/mlp.py:427-497 apply_swiglu_sharded_factory,
 *     offset_w / offset_v with axis_frag * 2).
 *   - embedding.word_embeddings.weight and output_layer.weight: vocab rows
 *     padded to a multiple of 128 * tp (make_vocab_size_divisible_by), zeros;
 *     tied embeddings store no output_layer (pp 1: it is the embedding; pp > 1:
 *     the last stage's copy has replica_id (1, 0, dp),
 *     models/common/language_module/language_module.py:505-520).
 * TransformerEngine's _extra_state ShardedObjects are not written (no FP8
 * state exists for a converted model): load with --dist-ckpt-strictness
 * log_all (or ignore_all), as the legacy layout needs strict=False. No
 * optimizer state. MoE families are refused by name (no record lists this
 * layout for them yet).
 *
 * Reading back: tpconv's torch_dist reader (formats/megatron_dist.c) opens the
 * folder as one checkpoint (the layers un-stacked under Megatron's names), and
 * `convert --rules megatron-llama --vocab V` gives the Hugging Face tensors.
 * As a set tpconv wrote (merge, reshard, verify, convert of the set folder):
 * the folder read whole, the names mapped back (layout_megatron.c's
 * tpc__mcore_to_hf), the padded vocab rows dropped, and each rank's slices
 * cut by the manifest's splits (layout_dcp.c's tpc__dcp_open_rank).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpc_buf.h"
#include "tpc_family.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_layout.h"
#include "tpc_manifest.h"
#include "tpc_shard.h"
#include "tpc_util.h"

#define LAYOUT_NAME "megatron-dist"
#define TRACKER "latest_checkpointed_iteration.txt"
#define ITER "release"

static char *rank_name(int t, int p, int tp, int pp, const char *format)
{
	char buf[64];
	(void)pp;
	(void)format;
	snprintf(buf, sizeof(buf), ITER "/__%d_0.distcp", p * tp + t);
	return tpc_strdup(buf);
}

static const tpc_tensor_row *row_of(const char *n, int64_t *l, bool *bias, const tpc_family **of)
{
	const tpc_tensor_row *w = tpc_family_classify_for(NULL, LAYOUT_NAME, TPC_ECO_HF, n, l, NULL, bias, of);
	return w && w->name[TPC_ECO_MEGATRON] ? w : NULL;
}

/* ---- what each rank stores ---- */

typedef struct mchunk {
	char *key;                 /* Megatron's sharded key (stacked: without a layer number) */
	tpc_tensor t;              /* the item: over the rank's tensors (stacked: [1, ...]) */
	int64_t shape[TPC_MAX_NDIM], off[TPC_MAX_NDIM]; /* the key's global shape, the chunk's box */
} mchunk;

typedef struct mlist {
	mchunk *v;
	size_t n, cap;
} mlist;

static void mlist_release(mlist *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].key);
		tpc_tensor_release(&m->v[i].t);
	}
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static void clear_storage(tpc_tensor *t)
{
	t->storage = -1;
	t->alias_of = -1;
	for (int k = 0; k < t->nparts; k++)
		clear_storage(&t->parts[k]);
}

/* "decoder.layers.12.mlp.linear_fc2.weight" -> "decoder.layers.mlp.linear_fc2.weight" */
static void unnumber(char *s)
{
	for (char *p = strstr(s, "layers."); p; p = strstr(p + 1, "layers.")) {
		char *q = p + 7, *d = q;
		while (*d >= '0' && *d <= '9')
			d++;
		if (d > q && *d == '.') {
			memmove(q, d + 1, strlen(d + 1) + 1);
			return;
		}
	}
}

/* Add the chunk of `t` (owned by the list from here) under `key`: rows
 * [at, at + t's rows) of a global dim-`dim` extent `global` (dim -1: the whole
 * tensor); layer l >= 0 stacks it at l of sp->layers. */
static int add_chunk(mlist *m, const tpc_shard_plan *sp, const char *key, tpc_tensor *t, int dim, int64_t at,
		     int64_t global, int64_t l, tpc_err *e)
{
	mchunk c;
	int ret = 0;
	memset(&c, 0, sizeof(c));
	int lead = l >= 0 ? 1 : 0;
	if (t->ndim + lead > TPC_MAX_NDIM) {
		tpc_tensor_release(t);
		return tpc_err_at(e, TPC_EINPUT, NULL, key, "too many dimensions to stack");
	}
	if (lead) {
		c.shape[0] = sp->layers;
		c.off[0] = l;
		if (tpc_tensor_init_stack(&c.t, t, 1))
			ret = tpc_err_nomem(e);
		tpc_tensor_release(t);
	} else {
		c.t = *t;
	}
	memset(t, 0, sizeof(*t));
	for (int d = 0; d < c.t.ndim - lead && !ret; d++) {
		c.shape[d + lead] = d == dim ? global : c.t.shape[d + lead];
		c.off[d + lead] = d == dim ? at : 0;
	}
	if (!ret && !(c.key = tpc_strdup(key)))
		ret = tpc_err_nomem(e);
	if (!ret && tpc_grow((void **)&m->v, &m->cap, m->n + 1, sizeof(*m->v)))
		ret = tpc_err_nomem(e);
	if (ret) {
		free(c.key);
		tpc_tensor_release(&c.t);
		return ret;
	}
	clear_storage(&c.t);
	m->v[m->n++] = c;
	return 0;
}

/* The rank's tensor of role `r` of family f beside (layer l, bias). */
static const tpc_tensor *partner(const tpc_family *f, const tpc_ckpt *rk, tpc_role r, int64_t l, bool bias)
{
	char nm[512];
	const tpc_tensor_row *w = tpc_family_row(f, r);
	int64_t i = w && tpc_family_name(w, TPC_ECO_HF, l, -1, bias, nm, sizeof(nm), NULL) ? tpc_ckpt_find(rk, nm) : -1;
	return i >= 0 ? &rk->t[i] : NULL;
}

/* Rank r's chunks, in the input's tensor order (linear_fc1: gate, then up). */
static int rank_chunks(const tpc_shard_plan *sp, int r, mlist *m, tpc_err *e)
{
	const tpc_ckpt *rk = &sp->rank[r];
	int stage = r / sp->tp, t = r % sp->tp, tp = sp->tp, ret = 0;
	tpc__mcore_facts mf;
	memset(m, 0, sizeof(*m));
	if ((ret = tpc__mcore_facts_of(&sp->facts, &mf, e)))
		return ret;
	for (size_t i = 0; i < sp->n && !ret; i++) {
		const tpc_shard_entry *en = &sp->t[i];
		if (en->stage != stage || !en->rank_ix || en->rank_ix[t] < 0)
			continue;
		const tpc_tensor *x = &rk->t[en->rank_ix[t]];
		const tpc_split *s = &en->split;
		int64_t l = -1;
		bool bias = false;
		int part = -1;
		const tpc_family *f = NULL;
		char key[512];
		const tpc_tensor_row *w = row_of(x->name, &l, &bias, &f);
		if (!w || !tpc_family_name(w, TPC_ECO_MEGATRON, l, -1, bias, key, sizeof(key), &part)) {
			ret = tpc_err_at(e, TPC_EINPUT, NULL, x->name, "no Megatron-Core name for this tensor");
			break;
		}
		if (part > 0)
			continue; /* k, v, up: with their q / gate */
		char *hash = strchr(key, '#');
		if (hash)
			*hash = '\0';
		unnumber(key);
		tpc_tensor v;
		memset(&v, 0, sizeof(v));
		if (w->role == TPC_ROLE_ATTN_Q) {
			const tpc_tensor *kk = partner(f, rk, TPC_ROLE_ATTN_K, l, bias), *vv = partner(f, rk, TPC_ROLE_ATTN_V, l, bias);
			if (!kk || !vv || tpc__mcore_fuse_qkv(x, kk, vv, &mf, &v)) {
				ret = tpc_err_at(e, TPC_EINPUT, NULL, x->name, "cannot lay q, k and v out per query group (partners missing or sizes off)");
				break;
			}
			int64_t rows = v.shape[0];
			ret = add_chunk(m, sp, key, &v, 0, t * rows, tp * rows, l, e);
		} else if (w->role == TPC_ROLE_FFN_GATE) {
			const tpc_tensor *up = partner(f, rk, TPC_ROLE_FFN_UP, l, bias);
			int64_t g = x->shape[0];
			if (!up || up->shape[0] != g) {
				ret = tpc_err_at(e, TPC_EINPUT, NULL, x->name, "gate_proj without an up_proj of its rows");
				break;
			}
			tpc_tensor u;
			if (tpc_tensor_copy(&v, x) || tpc_tensor_copy(&u, up)) {
				tpc_tensor_release(&v);
				ret = tpc_err_nomem(e);
				break;
			}
			ret = add_chunk(m, sp, key, &v, 0, t * g, 2 * tp * g, l, e);
			if (!ret)
				ret = add_chunk(m, sp, key, &u, 0, tp * g + t * g, 2 * tp * g, l, e);
			else
				tpc_tensor_release(&u);
		} else if (s->dim < 0) {
			if (t == 0) /* replica_id (0, tp_rank, dp): tp rank 0 stores it */
				ret = tpc_tensor_copy(&v, x) ? tpc_err_nomem(e) : add_chunk(m, sp, key, &v, -1, 0, 0, l, e);
		} else {
			int64_t len = x->shape[s->dim];
			ret = tpc_tensor_copy(&v, x) ? tpc_err_nomem(e) : add_chunk(m, sp, key, &v, s->dim, t * len, tp * len, l, e);
		}
	}
	if (ret)
		mlist_release(m);
	return ret;
}

/* ---- shard ---- */

static int check(tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	tpc__mcore_facts mf;
	int ret;
	(void)o;
	if (!tpc__dcp_format(e))
		return TPC_EUSAGE;
	if ((ret = tpc__mcore_check_groups(sp, &mf, e)))
		return ret;
	if (sp->ep > 1)
		return tpc_err_set(e, TPC_EUSAGE, "the megatron-dist layout writes dense models; expert parallelism is not written yet");
	for (size_t i = 0; i < sp->n; i++) {
		const char *n = sp->in->t[sp->t[i].in].name;
		if (!row_of(n, NULL, NULL, NULL)) {
			const tpc_family *pf = sp->plan && sp->plan->name ? tpc_family_find(sp->plan->name) : NULL;
			if (pf && !tpc_family_lists(pf->layouts, LAYOUT_NAME))
				return tpc_err_at(e, TPC_EINPUT, NULL, n,
						  "family '%s' is not written by the megatron-dist layout (its Megatron-Core names are not mapped); this tensor has none",
						  pf->name);
			return tpc_err_at(e, TPC_EINPUT, NULL, n,
					  "the megatron-dist layout knows Megatron-Core names for the LLaMA family; this tensor has none (drop it with --rules)");
		}
		const tpc_split *s = &sp->t[i].split;
		if (s->dim >= 0 && s->nparts != 1)
			return tpc_err_at(e, TPC_EINPUT, NULL, n, "a tensor split in parts has no Megatron-Core chunk layout here");
		for (int k = 0; k < s->nparts && s->dim >= 0; k++)
			if (s->part[k].replicas > 1)
				return tpc_err_at(e, TPC_EINPUT, NULL, n, "Megatron does not replicate key/value heads over ranks");
	}
	return 0;
}

/* The rank as stored: its chunks, in order (names never reach the disk:
 * items are bare tensors; a repeated key gets "#" and its index). */
static int stored_rank(const tpc_shard_plan *sp, int r, tpc_ckpt *out, tpc_err *e)
{
	mlist m;
	int ret = rank_chunks(sp, r, &m, e);
	for (size_t k = 0; k < m.n && !ret; k++) {
		tpc_buf nb = TPC_BUF_INIT;
		tpc_buf_addf(&nb, "%s#%zu", m.v[k].key, k);
		int64_t ix = nb.oom ? tpc_err_nomem(e) : tpc_ckpt_add_copy(out, nb.p, &m.v[k].t, e);
		tpc_buf_release(&nb);
		if (ix < 0)
			ret = (int)ix;
	}
	mlist_release(&m);
	return ret;
}

/* the iteration folder's files describe the rank files: a set taken back loses them */
static void remove_rank(const char *path)
{
	static const char *const side[] = {".metadata", "common.pt", "metadata.json"};
	char *dir = tpc_path_dir(path);
	unlink(path);
	for (size_t i = 0; dir && i < sizeof(side) / sizeof(side[0]); i++) {
		char *p = tpc_path_join(dir, side[i]);
		if (p)
			unlink(p);
		free(p);
	}
	if (dir)
		rmdir(dir); /* release/, when empty */
	free(dir);
}

/* The items of the file at `path`, in order, have the dtypes and shapes of
 * rank r's chunks. */
static int rank_file_ok(const tpc_shard_plan *sp, int r, const char *path, bool *ok, tpc_err *e)
{
	mlist m;
	tpc__dcp_item *w = NULL;
	int ret = rank_chunks(sp, r, &m, e);
	*ok = false;
	if (ret)
		return ret;
	if (!(w = tpc_calloc(m.n + 1, sizeof(*w))))
		ret = tpc_err_nomem(e);
	for (size_t k = 0; k < m.n && !ret; k++) {
		w[k].dtype = m.v[k].t.dtype;
		w[k].ndim = m.v[k].t.ndim;
		memcpy(w[k].shape, m.v[k].t.shape, (size_t)m.v[k].t.ndim * sizeof(int64_t));
	}
	if (!ret)
		*ok = tpc__dcp_items_ok(path, w, m.n);
	free(w);
	mlist_release(&m);
	return ret;
}

/* common.pt: {args, checkpoint_version, iteration, content_metadata} */
static int write_common(const tpc_shard_plan *sp, const char *path, bool force, tpc_err *e)
{
	const tpc_format *tf = tpc_format_by_name("torch");
	tpc__mcore_facts mf;
	int64_t ffn = 0, vocab = 0, orig = 0;
	int ret;
	if (!tf)
		return tpc_err_set(e, TPC_EUSAGE, "the torch writer is not available in this build");
	if ((ret = tpc__mcore_facts_of(&sp->facts, &mf, e)))
		return ret;
	for (size_t i = 0; i < sp->n; i++) {
		const tpc_tensor *t = &sp->in->t[sp->t[i].in];
		const tpc_tensor_row *w = row_of(t->name, NULL, NULL, NULL);
		if (!ffn && w && w->role == TPC_ROLE_FFN_GATE)
			ffn = t->shape[0];
		if (!orig && sp->t[i].split.kind == TPC_SPLIT_VOCAB && sp->t[i].split.dim == 0) {
			orig = sp->t[i].split.part[0].size;
			vocab = orig + sp->t[i].split.part[0].pad;
		}
	}
	tpc_value *root = tpc_value_new(TPC_V_DICT), *cm = tpc_value_new(TPC_V_DICT);
	tpc_value *args = tpc__mcore_args(sp, &mf, ffn, vocab, orig);
	bool bad = !root || !cm || !args;
	bad = bad || tpc_value_set(cm, tpc_value_str("singleton_local_shards", 22), tpc_value_bool(0)) ||
	      tpc_value_set(cm, tpc_value_str("chained_optim_avoid_prefix", 26), tpc_value_bool(1));
	if (!bad) {
		bad = tpc_value_set(root, tpc_value_str("args", 4), args);
		args = NULL;
	}
	bad = bad || tpc_value_set(root, tpc_value_str("checkpoint_version", 18), tpc_value_float(3.0)) ||
	      tpc_value_set(root, tpc_value_str("iteration", 9), tpc_value_int(0));
	if (!bad) {
		bad = tpc_value_set(root, tpc_value_str("content_metadata", 16), cm);
		cm = NULL;
	}
	tpc_value_unref(args);
	tpc_value_unref(cm);
	if (bad) {
		tpc_value_unref(root);
		return tpc_err_nomem(e);
	}
	tpc_ckpt ck;
	tpc_write_opts wo;
	tpc_ckpt_init(&ck);
	ck.root = root;
	memset(&wo, 0, sizeof(wo));
	wo.flags = force ? TPC_W_FORCE : 0;
	ret = tf->write(&ck, NULL, 0, path, &wo, e);
	tpc_ckpt_release(&ck);
	return ret;
}

/* Every rank file is there: .metadata over all of them, common.pt,
 * metadata.json, the tracker, then the companions. */
static int write_extras(const tpc_shard_plan *sp, const char *dir, const tpc_shard_opts *o, tpc_err *e)
{
	static const char config[] = "{\"sharded_backend\": \"torch_dist\", \"sharded_backend_version\": 1, "
				     "\"common_backend\": \"torch\", \"common_backend_version\": 1}";
	const tpc_format *f = tpc__dcp_format(e);
	int nr = sp->tp * sp->pp, ret = 0;
	mlist *ch = tpc_calloc((size_t)nr, sizeof(*ch));
	uint64_t **off = tpc_calloc((size_t)nr, sizeof(*off)), **len = tpc_calloc((size_t)nr, sizeof(*len));
	tpc_chunk *all = NULL;
	size_t total = 0, k = 0;
	char *it = tpc_path_join(dir, ITER), *p = NULL;
	if (!f)
		ret = TPC_EUSAGE;
	else if (!ch || !off || !len || !it)
		ret = tpc_err_nomem(e);
	for (int r = 0; r < nr && !ret; r++) {
		char *rp = tpc_path_join(dir, sp->rank_file[r]);
		tpc_ckpt ck;
		size_t n = 0;
		tpc_ckpt_init(&ck);
		if (!rp)
			ret = tpc_err_nomem(e);
		else if (!(ret = rank_chunks(sp, r, &ch[r], e)) && !(ret = f->part_items(&ck, rp, &off[r], &len[r], &n, e)) &&
			 n != ch[r].n)
			ret = tpc_err_at(e, TPC_EINPUT, rp, NULL, "rank %d's file holds %zu items, the plan gives the rank %zu chunks", r,
					  n, ch[r].n);
		tpc_ckpt_release(&ck);
		free(rp);
		if (!ret)
			total += ch[r].n;
	}
	if (!ret && !(all = tpc_calloc(total + 1, sizeof(*all))))
		ret = tpc_err_nomem(e);
	for (int r = 0; r < nr && !ret; r++)
		for (size_t j = 0; j < ch[r].n; j++, k++) {
			mchunk *c = &ch[r].v[j];
			all[k] = (tpc_chunk){.fqn = c->key, .dtype = c->t.dtype, .ndim = c->t.ndim, .shape = c->shape,
					     .offset = c->off, .size = c->t.shape, .file = tpc_path_base(sp->rank_file[r]),
					     .foff = off[r][j], .flen = len[r][j]};
		}
	if (!ret) {
		tpc_write_opts wo;
		memset(&wo, 0, sizeof(wo));
		wo.flags = TPC_W_FORCE; /* under the set's lock, every rank file checked */
		ret = f->write_index(it, all, k, &wo, e);
	}
	if (!ret && !(p = tpc_path_join(it, "common.pt")))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = write_common(sp, p, true, e);
	free(p);
	p = NULL;
	if (!ret && !(p = tpc_path_join(it, "metadata.json")))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = tpc_write_file_atomic(p, config, sizeof(config) - 1, TPC_OUT_FORCE, e);
	free(p);
	p = NULL;
	if (!ret && !(p = tpc_path_join(dir, TRACKER)))
		ret = tpc_err_nomem(e);
	if (!ret)
		ret = tpc_write_file_atomic(p, ITER, strlen(ITER), o->force ? TPC_OUT_FORCE : 0, e);
	free(p);
	if (!ret && !o->no_extras)
		ret = tpc__layout_copy_companions(sp, dir, o, NULL, false, e);
	for (int r = 0; r < nr; r++) {
		if (ch)
			mlist_release(&ch[r]);
		if (off)
			free(off[r]);
		if (len)
			free(len[r]);
	}
	free(ch);
	free(off);
	free(len);
	free(all);
	free(it);
	return ret;
}

/* ---- reading back ---- */

/* The folder's Megatron tensors ck->t[n0...] as the manifest's global
 * tensors: Hugging Face names (layers numbered globally already), the padded
 * vocab rows narrowed away. */
static int globals(tpc_ckpt *ck, size_t n0, const tpc_manifest *man, const tpc_layout_rank_ctx *c, const char *dir,
		   tpc_err *e)
{
	tpc__mcore_facts mf;
	int ret = tpc__mcore_facts_of(c->facts, &mf, e);
	if (ret || (ret = tpc__mcore_to_hf(ck, n0, ck->n, "", LAYOUT_NAME, 0, &mf, dir, e)))
		return ret;
	for (size_t i = 0; i < man->n; i++) {
		const tpc_manifest_tensor *mt = &man->t[i];
		int64_t g = mt->split.kind == TPC_SPLIT_VOCAB && mt->ndim >= 1 ? tpc_ckpt_find(ck, mt->name) : -1;
		if (g < (int64_t)n0 || ck->t[g].ndim != mt->ndim || ck->t[g].shape[0] <= mt->shape[0])
			continue;
		tpc_tensor v, *t = &ck->t[g];
		char *nm = t->name;
		if (tpc_tensor_narrow(&v, t, 0, 0, mt->shape[0]))
			return tpc_err_nomem(e);
		tpc_tensor_release(t);
		*t = v;
		t->name = nm;
	}
	return 0;
}

static int open_rank(const char *path, const tpc_layout_rank_ctx *c, tpc_ckpt *ck, tpc_err *e)
{
	char *it = tpc_path_dir(path), *dir = it ? tpc_path_dir(it) : NULL;
	int ret = dir ? tpc__dcp_open_rank(path, dir, it, c, globals, ck, e) : tpc_err_nomem(e);
	free(dir);
	free(it);
	return ret;
}

static const char *const formats[] = {"dcp", NULL};

const tpc_layout tpc_layout_megatron_dist = {
	.name = LAYOUT_NAME,
	.desc = "Megatron-Core torch_dist: release/__R_0.distcp + .metadata + common.pt + metadata.json, stacked layers",
	.formats = formats, .set_format = "megatron-torch_dist",
	.companions_at_top = true, .uneven_stages = true,
	.rank_name = rank_name, .check = check, .adjust_plan = tpc__mcore_adjust_plan,
	.stored_rank = stored_rank, .write_rank = tpc__dcp_write_rank, .rank_file_ok = rank_file_ok, .remove_rank = remove_rank,
	.open_rank = open_rank, .write_extras = write_extras,
};
