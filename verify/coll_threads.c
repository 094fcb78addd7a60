/* coll_threads.c - collectives between the threads of one process.
 *
 * Ranks publish a pointer to their buffer in a shared slot, meet at a
 * barrier, read what they need from the others' buffers, and meet again
 * before anyone may reuse a buffer. The barrier is a mutex and a condition
 * variable rather than pthread_barrier_t so that a rank that fails can abort
 * the group: every rank waiting, and every later arrival, then returns an
 * error instead of waiting for a rank that will never come. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "tpc_util.h"

struct tpc_coll_group {
	int size;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int arrived;
	uint64_t gen;
	bool aborted;
	const void **slot;
};

/* d[i] = the sum over ranks r of AT(T, r, i), in rank order (the order every
 * rank must see), for i < n. */
#define SUM_RANKS(T, d_, n_, size_, AT)                             \
	do {                                                        \
		T *d = (d_);                                        \
		for (size_t i = 0; i < (n_); i++) {                 \
			T acc = AT(T, 0, i);                        \
			for (int r = 1; r < (size_); r++)           \
				acc += AT(T, r, i);                 \
			d[i] = acc;                                 \
		}                                                   \
	} while (0)
/* element i of rank r's block in src (blocks of n, rank after rank) */
#define IN_BLOCK(T, r, i) ((const T *)src)[(size_t)(r) * n + (i)]
void tpc_coll_sum_ranks(void *dst, const void *src, int size, size_t n, tpc_dtype dt)
{
	if (dt == TPC_F64)
		SUM_RANKS(double, dst, n, size, IN_BLOCK);
	else
		SUM_RANKS(float, dst, n, size, IN_BLOCK);
}
#undef IN_BLOCK

int tpc_coll_agree(tpc_coll *c, int status, int *who, tpc_err *e)
{
	int32_t mine = status, small[64];
	int32_t *v = c->size <= 64 ? small : tpc_malloc(sizeof(int32_t) * (size_t)c->size);
	if (!v)
		return tpc_err_nomem(e);
	int ret = tpc_coll_allgather(c, &mine, sizeof(mine), v, e);
	if (who)
		*who = -1;
	if (!ret)
		for (int r = 0; r < c->size; r++)
			if (v[r]) {
				ret = v[r];
				if (who)
					*who = r;
				break;
			}
	if (v != small)
		free(v);
	return ret;
}

static int aborted(tpc_err *e)
{
	int r = tpc_err_set(e, TPC_EGPU, "another rank failed");
	e->sys = TPC_COLL_ABORTED;
	return r;
}

static int wait_bar(tpc_coll_group *g, tpc_err *e)
{
	pthread_mutex_lock(&g->mu);
	if (g->aborted) {
		pthread_mutex_unlock(&g->mu);
		return aborted(e);
	}
	uint64_t gen = g->gen;
	if (++g->arrived == g->size) {
		g->arrived = 0;
		g->gen++;
		pthread_cond_broadcast(&g->cv);
	} else {
		while (g->gen == gen && !g->aborted)
			pthread_cond_wait(&g->cv, &g->mu);
	}
	bool ab = g->aborted && g->gen == gen;
	pthread_mutex_unlock(&g->mu);
	return ab ? aborted(e) : 0;
}

static int th_allgather(tpc_coll *c, const void *send, size_t bytes, void *recv, tpc_err *e)
{
	tpc_coll_group *g = c->impl;
	int ret;
	g->slot[c->rank] = send;
	if ((ret = wait_bar(g, e)))
		return ret;
	for (int r = 0; r < g->size; r++)
		memcpy((uint8_t *)recv + (size_t)r * bytes, g->slot[r], bytes);
	return wait_bar(g, e);
}

static int th_allreduce(tpc_coll *c, void *buf, size_t n, tpc_dtype dt, tpc_err *e)
{
	tpc_coll_group *g = c->impl;
	size_t es = dt == TPC_F64 ? 8 : 4;
	void *tmp = tpc_malloc(n * es);
	int ret;
	if (!tmp) {
		tpc_coll_abort(c);
		return tpc_err_nomem(e);
	}
	g->slot[c->rank] = buf;
	if ((ret = wait_bar(g, e)))
		goto out;
	/* the rank-order sum of tpc_coll_sum_ranks, reading the others in place */
#define IN_SLOT(T, r, i) ((const T *)g->slot[r])[i]
	if (dt == TPC_F64)
		SUM_RANKS(double, tmp, n, g->size, IN_SLOT);
	else
		SUM_RANKS(float, tmp, n, g->size, IN_SLOT);
#undef IN_SLOT
	if (!(ret = wait_bar(g, e)))
		memcpy(buf, tmp, n * es);
out:
	free(tmp);
	return ret;
}

static int th_bcast(tpc_coll *c, void *buf, size_t bytes, int root, tpc_err *e)
{
	tpc_coll_group *g = c->impl;
	int ret;
	if (c->rank == root)
		g->slot[root] = buf;
	if ((ret = wait_bar(g, e)))
		return ret;
	if (c->rank != root)
		memcpy(buf, g->slot[root], bytes);
	return wait_bar(g, e);
}

static int th_barrier(tpc_coll *c, tpc_err *e)
{
	return wait_bar(c->impl, e);
}

static void th_abort(tpc_coll *c)
{
	tpc_coll_group *g = c->impl;
	pthread_mutex_lock(&g->mu);
	g->aborted = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

static const tpc_coll_ops threads_ops = {"threads", th_allgather, th_allreduce, th_bcast, th_barrier, th_abort};

int tpc_coll_group_new(tpc_coll_group **out, int size, tpc_err *e)
{
	tpc_coll_group *g = tpc_calloc(1, sizeof(*g));
	if (!g || !(g->slot = tpc_calloc((size_t)size, sizeof(void *)))) {
		free(g);
		return tpc_err_nomem(e);
	}
	g->size = size;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	*out = g;
	return 0;
}

void tpc_coll_group_free(tpc_coll_group *g)
{
	if (!g)
		return;
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cv);
	free(g->slot);
	free(g);
}

void tpc_coll_threads_rank(tpc_coll_group *g, int rank, tpc_coll *c)
{
	c->ops = &threads_ops;
	c->rank = rank;
	c->size = g->size;
	c->impl = g;
}
