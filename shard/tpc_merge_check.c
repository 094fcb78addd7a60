/* tpc_merge_check.c - confirming a shard set's manifest checksums, before a
 * merge uses the set or while it writes the merged file.
 *
 * Merging reads every rank byte once to copy it (mostly in the kernel) and,
 * with checksums, once more to hash it. Done first, the hashing pass is a
 * second trip over the set; done on another core while the writer copies, it
 * costs nothing in wall time, and the writer's before_commit gate (one call
 * before the output is renamed into place) waits for it, so a set that fails
 * its checksums still leaves no output behind. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_manifest.h"
#include "tpc_shard.h"
#include "tpc_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

struct tpc__merge_check {
	const tpc_ckpt *ck;             /* the merged description: reads go through its sources */
	tpc_hash_alg alg;
	int tp, nranks;
	size_t n;                       /* views: tensor i, tp rank t at i * tp + t */
	tpc_tensor *views;              /* [n] */
	bool own_views;
	uint8_t (*want)[TPC_HASH_MAX];  /* [n] */
	bool *skip;                     /* [n]: no recorded checksum */
	_Atomic unsigned char *state;   /* [n]: CHK_OPEN, CLAIMED or SETTLED */
	char **name;                    /* [n / tp] */
	int *stage;                     /* [n / tp] */
	char **path;                    /* [nranks] */
	pthread_t th;
	bool running;
	int ret;
	tpc_err err;
};

void tpc__merge_check_free(tpc__merge_check *c)
{
	if (!c)
		return;
	if (c->running)
		pthread_join(c->th, NULL);
	for (size_t i = 0; c->own_views && i < c->n; i++)
		tpc_tensor_release(&c->views[i]);
	if (c->own_views)
		free(c->views);
	tpc_free_strv(c->name, c->name ? c->n / (size_t)c->tp : 0);
	tpc_free_strv(c->path, c->path ? (size_t)c->nranks : 0);
	free(c->stage);
	free(c->want);
	free(c->skip);
	free((void *)c->state);
	free(c);
}

int tpc__merge_check_new(tpc__merge_check **out, const tpc_ckpt *ck, const tpc_manifest *man, tpc_tensor *views,
			 char *const *paths, int nranks, tpc_err *e)
{
	tpc__merge_check *c = tpc_calloc(1, sizeof(*c));
	int ret = 0;
	size_t nt = man->n;
	*out = NULL;
	if (!c)
		return tpc_err_nomem(e);
	c->ck = ck;
	c->alg = man->checksum;
	c->tp = man->tp;
	c->nranks = nranks;
	c->n = nt * (size_t)man->tp;
	c->views = views;
	c->want = tpc_calloc(c->n ? c->n : 1, TPC_HASH_MAX);
	c->skip = tpc_calloc(c->n ? c->n : 1, sizeof(bool));
	c->state = tpc_calloc(c->n ? c->n : 1, sizeof(*c->state));
	c->name = tpc_calloc(nt ? nt : 1, sizeof(char *));
	c->stage = tpc_calloc(nt ? nt : 1, sizeof(int));
	c->path = tpc_calloc((size_t)nranks, sizeof(char *));
	if (!c->want || !c->skip || !c->state || !c->name || !c->stage || !c->path) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < nt; i++) {
		if (!(c->name[i] = tpc_strdup(man->t[i].name))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		c->stage[i] = man->t[i].stage;
		for (int t = 0; t < c->tp; t++) {
			size_t k = i * (size_t)c->tp + (size_t)t;
			c->skip[k] = !man->t[i].rank_hash || !tpc_split_holds(&man->t[i].split, man->tp, t);
			if (man->t[i].rank_hash)
				memcpy(c->want[k], man->t[i].rank_hash[t], TPC_HASH_MAX);
		}
	}
	for (int r = 0; r < nranks; r++)
		if (!(c->path[r] = tpc_strdup(paths[r] ? paths[r] : ""))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
out:
	if (ret)
		tpc__merge_check_free(c);
	else
		*out = c;
	return ret;
}

void tpc__merge_check_take_views(tpc__merge_check *c)
{
	c->own_views = true;
}

enum { CHK_OPEN, CHK_CLAIMED, CHK_SETTLED };

/* Compare item k's digest with the manifest's; the error names rank, tensor
 * and file. */
static int compare(const tpc__merge_check *c, size_t k, const uint8_t *h, tpc_err *e)
{
	if (!memcmp(h, c->want[k], tpc_hash_len(c->alg)))
		return 0;
	size_t i = k / (size_t)c->tp;
	int r = c->stage[i] * c->tp + (int)(k % (size_t)c->tp);
	/* another rank's slice in this rank's file: files swapped or renamed */
	for (int q = 0; q < c->tp; q++) {
		int rq = c->stage[i] * c->tp + q;
		if (rq != r && !memcmp(h, c->want[i * (size_t)c->tp + (size_t)q], tpc_hash_len(c->alg)))
			return tpc_err_at(e, TPC_EINPUT, c->path[r], c->name[i],
					  "rank file holds rank %d's tensors, not rank %d's (files swapped or renamed?)", rq, r);
	}
	return tpc_err_at(e, TPC_EINPUT, c->path[r], c->name[i],
		    "rank %d's copy does not match the manifest checksum (%s; a rank file from another set, or a corrupted one)",
		    r, tpc_hash_name(c->alg));
}

int64_t tpc__merge_check_claim(tpc__merge_check *c, const tpc_tensor *leaf)
{
	if (!c || leaf->nparts || leaf->dq || leaf->src < 0 || (leaf->flags & TPC_TF_ZERO) ||
	    !tpc_tensor_is_contiguous(leaf))
		return -1;
	for (size_t k = 0; k < c->n; k++) {
		const tpc_tensor *v = &c->views[k];
		if (c->skip[k] || v->src != leaf->src || v->offset != leaf->offset || v->nbytes != leaf->nbytes ||
		    v->src_dtype != leaf->src_dtype || v->flags != leaf->flags || v->nparts || v->dq ||
		    !tpc_tensor_is_contiguous(v))
			continue;
		unsigned char open = CHK_OPEN;
		return atomic_compare_exchange_strong(&c->state[k], &open, CHK_CLAIMED) ? (int64_t)k : -1;
	}
	return -1;
}

tpc_hash_alg tpc__merge_check_alg(const tpc__merge_check *c)
{
	return c->alg;
}

int tpc__merge_check_settle(tpc__merge_check *c, int64_t k, const uint8_t digest[TPC_HASH_MAX], tpc_err *e)
{
	int ret = compare(c, (size_t)k, digest, e);
	if (!ret)
		atomic_store(&c->state[k], CHK_SETTLED);
	return ret;
}

int tpc__merge_check_run(tpc__merge_check *c, bool parallel, tpc_err *e)
{
	int64_t ni = (int64_t)c->n, bad = -1;
	tpc_err first;
	tpc_err_init(&first);
	(void)parallel;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
#endif
	for (int64_t it = 0; it < ni; it++) {
		uint8_t h[TPC_HASH_MAX];
		tpc_err le;
		int64_t b = tpc__first_bad(&bad);
		if (c->skip[it] || (b >= 0 && b < it) || atomic_load(&c->state[it]) == CHK_SETTLED)
			continue;
		tpc_err_init(&le);
		int rr = tpc_ckpt_hash_tensor(c->ck, &c->views[it], c->alg, h, &le);
		if (!rr && !(rr = compare(c, (size_t)it, h, &le)))
			atomic_store(&c->state[it], CHK_SETTLED);
		if (rr)
			tpc__keep_first(it, &le, &bad, &first);
	}
	if (bad >= 0) {
		*e = first;
		return first.code ? first.code : TPC_EINPUT;
	}
	return 0;
}

static void *check_thread(void *arg)
{
	tpc__merge_check *c = arg;
	tpc_err_init(&c->err);
	/* one core: the writer has the other */
	c->ret = tpc__merge_check_run(c, false, &c->err);
	return NULL;
}

int tpc__merge_check_start(tpc__merge_check *c, tpc_err *e)
{
	(void)e;
	if (pthread_create(&c->th, NULL, check_thread, c) != 0) {
		c->ret = tpc__merge_check_run(c, true, &c->err); /* no thread: check now */
		return 0;
	}
	c->running = true;
	return 0;
}

int tpc__merge_check_finish(void *ctx, tpc_err *e)
{
	tpc__merge_check *c = ctx;
	if (c->running) {
		pthread_join(c->th, NULL);
		c->running = false;
	}
	if (c->ret)
		*e = c->err;
	return c->ret;
}
