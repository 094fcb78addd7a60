/* tpc_shard_manifest.c - the manifest of a planned set, rendered in the schema
 * tpc_manifest.h documents (tpc_manifest.c reads it back). Writing lives with
 * the plan it describes, reading with the schema: tpc_manifest.c depends on
 * neither the sharder nor the merger. */
#include <stdio.h>
#include <string.h>

#include "tpc_config.h"
#include "tpc_hash.h"
#include "tpc_manifest.h"
#include "tpc_shard.h"
#include "tpc_util.h"

static void json_shape(tpc_buf *b, int ndim, const int64_t *shape)
{
	tpc_buf_addc(b, '[');
	for (int d = 0; d < ndim; d++)
		tpc_buf_addf(b, d ? ", %lld" : "%lld", (long long)shape[d]);
	tpc_buf_addc(b, ']');
}

static void json_hash(tpc_buf *b, const uint8_t *h, size_t n)
{
	char hx[2 * TPC_HASH_MAX + 1];
	tpc_hex(h, n, hx);
	tpc_buf_addf(b, "\"%s\"", hx);
}

void tpc_shard_manifest_render(const tpc_shard_plan *sp, tpc_buf *b)
{
	const tpc_model_facts *f = &sp->facts;
	const tpc_ckpt *in = sp->in;
	int nr = sp->tp * sp->pp;
	bool hashes = sp->checksum != TPC_HASH_NONE && sp->n && sp->t[0].hashed;
	if (!sp->n)
		hashes = sp->checksum != TPC_HASH_NONE;
	const char *hname = tpc_hash_name(hashes ? sp->checksum : TPC_HASH_NONE);
	size_t hlen = tpc_hash_len(sp->checksum);
	tpc_buf_addf(b, "{\n  \"tpconv_manifest\": 1,\n  \"tool\": \"tpconv %s\",\n  \"set_id\": \"%s\",\n", TPC_VERSION,
		     sp->set_id);
	tpc_buf_addf(b, "  \"tp\": %d,\n  \"pp\": %d,\n  \"layout\": \"%s\",\n  \"format\": \"%s\",\n", sp->tp / sp->dp, sp->pp,
		     sp->layout->name, sp->format);
	if (sp->dp > 1)
		tpc_buf_addf(b, "  \"dp\": %d,\n", sp->dp);
	if (sp->ep > 1)
		tpc_buf_addf(b, "  \"ep\": %d,\n  \"ep_placement\": \"%s\",\n  \"experts\": %lld,\n", sp->ep,
			     tpc_ep_placement_name(sp->ep_placement), (long long)sp->experts);
	tpc_buf_addf(b, "  \"checksum\": \"%s\",\n  \"model\": {", hname);
	{
		const char *k[] = {"heads", "kv_heads", "head_dim", "hidden", "vocab", "layers"};
		int64_t v[] = {f->heads, f->kv_heads, f->head_dim, f->hidden, f->vocab, sp->layers ? sp->layers : f->layers};
		bool first = true;
		for (int i = 0; i < 6; i++)
			if (v[i]) {
				tpc_buf_addf(b, "%s\"%s\": %lld", first ? "" : ", ", k[i], (long long)v[i]);
				first = false;
			}
		/* a Mamba-2 mixer's sizes, which its plan parts are made of (a set
		 * resharded from this one has no config.json to read them from) */
		const char *sk[] = {"ssm_heads", "ssm_head_dim", "ssm_groups", "ssm_state"};
		int64_t sv[] = {f->ssm_heads, f->ssm_head_dim, f->ssm_groups, f->ssm_state};
		for (int i = 0; i < 4; i++)
			if (sv[i]) {
				tpc_buf_addf(b, "%s\"%s\": %lld", first ? "" : ", ", sk[i], (long long)sv[i]);
				first = false;
			}
		/* a linear attention's heads (the plan's "lin_k" / "lin_v"), by
		 * config.json's names: a set resharded or read back splits with them */
		const char *lk[] = {"linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
				    "linear_value_head_dim"};
		int64_t lv[] = {f->lin_k_heads, f->lin_v_heads, f->lin_k_dim, f->lin_v_dim};
		for (int i = 0; i < 4; i++)
			if (lv[i]) {
				tpc_buf_addf(b, "%s\"%s\": %lld", first ? "" : ", ", lk[i], (long long)lv[i]);
				first = false;
			}
		if (tpc_ff_act_name(f->ff_act))
			tpc_buf_addf(b, "%s\"activation_fn\": \"%s\"", first ? "" : ", ", tpc_ff_act_name(f->ff_act));
		/* head facts only a command line gave (an origin "--heads"): no
		 * config confirmed them, so verify does not take them for what a
		 * head is (issue 41) */
		static const int hk[] = {TPC_FACT_HEADS, TPC_FACT_KV_HEADS, TPC_FACT_HEAD_DIM};
		const int64_t hv[] = {f->heads, f->kv_heads, f->head_dim};
		bool ufirst = true;
		for (int i = 0; i < 3; i++)
			if (hv[i] && !strncmp(f->origin[hk[i]], "--", 2)) {
				tpc_buf_addf(b, "%s\"%s\"", ufirst ? ", \"unverified\": [" : ", ", tpc_fact_name(hk[i]));
				ufirst = false;
			}
		if (!ufirst)
			tpc_buf_adds(b, "]");
	}
	tpc_buf_addf(b, "},\n  \"plan\": %s,\n  \"metadata\": {", sp->plan->json ? sp->plan->json : "null");
	bool mfirst = true;
	for (size_t i = 0; i < in->nmeta; i++) {
		if (!strncmp(in->meta_k[i], "tpconv.", 7) && strcmp(in->meta_k[i], "tpconv.tree"))
			continue; /* a resharded set's own rank metadata */
		tpc_buf_adds(b, mfirst ? "" : ", ");
		mfirst = false;
		tpc_buf_json_str(b, in->meta_k[i], strlen(in->meta_k[i]), false);
		tpc_buf_adds(b, ": ");
		tpc_buf_json_str(b, in->meta_v[i], strlen(in->meta_v[i]), false);
	}
	tpc_buf_adds(b, "},\n  \"ranks\": [\n");
	for (int r = 0; r < nr; r++) {
		uint64_t bytes = 0;
		for (size_t i = 0; i < sp->rank[r].n; i++)
			bytes += sp->rank[r].t[i].nbytes;
		if (sp->dp > 1)
			tpc_buf_addf(b, "    {\"rank\": %d, \"tp_rank\": %d, \"dp_rank\": %d, \"pp_rank\": %d, \"file\": ", r,
				     r % sp->tp % (sp->tp / sp->dp), r % sp->tp / (sp->tp / sp->dp), r / sp->tp);
		else
			tpc_buf_addf(b, "    {\"rank\": %d, \"tp_rank\": %d, \"pp_rank\": %d, \"file\": ", r, r % sp->tp, r / sp->tp);
		tpc_buf_json_str(b, sp->rank_file[r], strlen(sp->rank_file[r]), false);
		tpc_buf_addf(b, ", \"tensors\": %zu, \"bytes\": %llu}%s\n", sp->rank[r].n, (unsigned long long)bytes,
			     r + 1 < nr ? "," : "");
	}
	tpc_buf_adds(b, "  ],\n  \"tensors\": [\n");
	for (size_t i = 0; i < sp->n; i++) {
		const tpc_shard_entry *en = &sp->t[i];
		const tpc_tensor *t = &in->t[en->in];
		const tpc_split *s = &en->split;
		int r0 = tpc_split_first_rank(s, sp->tp);
		const tpc_tensor *rt = &sp->rank[en->stage * sp->tp + r0].t[en->rank_ix[r0]];
		tpc_buf_adds(b, "    {\"name\": ");
		tpc_buf_json_str(b, t->name, strlen(t->name), false);
		tpc_buf_addf(b, ", \"dtype\": \"%s\", \"shape\": ", tpc_dtype_name(t->dtype));
		json_shape(b, t->ndim, t->shape);
		tpc_buf_addf(b, ", \"stage\": %d, \"split\": \"%s\", \"dim\": %d, \"rule\": %d, \"matched\": %s, \"row_bias\": %s, \"parts\": [",
			     en->stage, s->dim < 0 ? "replicate" : tpc_split_kind_name(s->kind), s->dim, s->rule,
			     en->matched ? "true" : "false", s->row_bias ? "true" : "false");
		for (int k = 0; s->dim >= 0 && k < s->nparts; k++) {
			tpc_buf_addf(b, "%s{\"size\": %lld, \"pad\": %lld, \"heads\": %lld, \"replicas\": %d", k ? ", " : "",
				     (long long)s->part[k].size, (long long)s->part[k].pad, (long long)s->part[k].heads,
				     s->part[k].replicas);
			/* an uneven part: the rows each rank of its group holds (the pad unstored) */
			for (int r = 0, g = tpc_split_tp(s, sp->tp); s->part[k].uneven && r < g; r++)
				tpc_buf_addf(b, "%s%lld", r ? ", " : ", \"rank_sizes\": [",
					     (long long)tpc_split_rank_take(s, k, sp->tp, r));
			tpc_buf_adds(b, s->part[k].uneven ? "]}" : "}");
		}
		tpc_buf_adds(b, "], \"rank_shape\": ");
		json_shape(b, rt->ndim, rt->shape);
		if (s->stacked)
			tpc_buf_adds(b, ", \"stacked\": true");
		else if (s->ep > 1)
			tpc_buf_addf(b, ", \"expert\": %lld, \"ep_group\": %d", (long long)s->expert, s->ep_group);
		if (s->is_shape)
			tpc_buf_addf(b, ", \"shape_of_rank\": {\"dim\": %d, \"len\": %lld}", s->shape_dim,
				     (long long)s->shape_len);
		if (en->tie >= 0) {
			const char *to = in->t[sp->t[en->tie].in].name;
			tpc_buf_adds(b, ", \"tied_to\": ");
			tpc_buf_json_str(b, to, strlen(to), false);
		}
		if (hashes && en->hashed) {
			tpc_buf_addf(b, ", \"%s\": ", hname);
			json_hash(b, en->hash, hlen);
			tpc_buf_addf(b, ", \"rank_%s\": [", hname);
			for (int r = 0; r < sp->tp; r++) {
				tpc_buf_adds(b, r ? ", " : "");
				if (tpc_split_holds(s, sp->tp, r))
					json_hash(b, en->rank_hash[r], hlen);
				else
					tpc_buf_adds(b, "null");
			}
			tpc_buf_addc(b, ']');
		}
		tpc_buf_addf(b, "}%s\n", i + 1 < sp->n ? "," : "");
	}
	tpc_buf_adds(b, "  ]\n}\n");
}
