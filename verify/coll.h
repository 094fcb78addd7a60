/*
 * coll.h - the one collectives interface the checks are written against.
 *
 * Four operations, each called by every rank of the group in the same order
 * (a rank that has failed still takes part, so no rank is left waiting):
 *
 *   allgather   every rank sends `bytes` bytes; recv gets size * bytes, in
 *               rank order, on every rank
 *   allreduce   in-place sum of n F32 or F64 values. The sum is taken in rank
 *               order, ((x0 + x1) + x2) + ..., on every rank, whatever the
 *               backend does underneath: the threads and MPI backends give
 *               the same bits (MPI_Allreduce promises no order, so the MPI
 *               backend gathers and sums itself)
 *   bcast       `bytes` bytes from root to every rank
 *   barrier
 *
 * Backends: threads in one process (coll_threads.c), MPI processes
 * (mpi_loader.c, through the MPI module coll_mpi.c built with -Dmpi), NCCL
 * through the CUDA module (gpu/).
 * A failed operation returns TPC_EGPU (or TPC_EIO out of memory) on the
 * rank that saw it. A rank that fails between collectives calls abort: the
 * threads backend wakes every rank waiting in (or later entering) a
 * collective, which then returns TPC_EGPU with e->sys = TPC_COLL_ABORTED; an
 * MPI group cannot be unwound that way, so there abort does nothing and the
 * caller, once it has reported the error, ends the job with
 * tpc_verify_mpi_abort().
 */
#ifndef TPC_COLL_H
#define TPC_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "tpc_dtype.h"
#include "tpc_err.h"

typedef struct tpc_coll tpc_coll;

typedef struct tpc_coll_ops {
	const char *name;
	int (*allgather)(tpc_coll *c, const void *send, size_t bytes, void *recv, tpc_err *e);
	int (*allreduce)(tpc_coll *c, void *buf, size_t n, tpc_dtype dt, tpc_err *e);
	int (*bcast)(tpc_coll *c, void *buf, size_t bytes, int root, tpc_err *e);
	int (*barrier)(tpc_coll *c, tpc_err *e);
	void (*abort)(tpc_coll *c);
} tpc_coll_ops;

struct tpc_coll {
	const tpc_coll_ops *ops;
	int rank, size;
	void *impl;
};

static inline int tpc_coll_allgather(tpc_coll *c, const void *send, size_t bytes, void *recv, tpc_err *e)
{
	return c->ops->allgather(c, send, bytes, recv, e);
}
static inline int tpc_coll_allreduce(tpc_coll *c, void *buf, size_t n, tpc_dtype dt, tpc_err *e)
{
	return c->size == 1 ? 0 : c->ops->allreduce(c, buf, n, dt, e);
}
static inline int tpc_coll_bcast(tpc_coll *c, void *buf, size_t bytes, int root, tpc_err *e)
{
	return c->size == 1 ? 0 : c->ops->bcast(c, buf, bytes, root, e);
}
static inline int tpc_coll_barrier(tpc_coll *c, tpc_err *e)
{
	return c->size == 1 ? 0 : c->ops->barrier(c, e);
}

#define TPC_COLL_ABORTED (-77) /* e->sys of an error that only says "another rank failed" */

static inline void tpc_coll_abort(tpc_coll *c)
{
	if (c->size > 1 && c->ops->abort)
		c->ops->abort(c);
}

/* Every rank passes its status; returns the status of the lowest rank that
 * has a nonzero one (0 when all are 0) on every rank, and that rank in
 * *who (-1 when none). A failing collective gives TPC_EGPU. */
int tpc_coll_agree(tpc_coll *c, int status, int *who, tpc_err *e);

/* The reference sum the backends implement: dst = sum over r of src[r] in
 * rank order (src: size arrays of n values, contiguous). */
void tpc_coll_sum_ranks(void *dst, const void *src, int size, size_t n, tpc_dtype dt);

/* ---- threads backend ---- */

typedef struct tpc_coll_group tpc_coll_group; /* shared by the threads of one group */

/* A group of `size` ranks; each thread then takes its tpc_coll with
 * tpc_coll_threads_rank. */
int tpc_coll_group_new(tpc_coll_group **g, int size, tpc_err *e);
void tpc_coll_group_free(tpc_coll_group *g);
void tpc_coll_threads_rank(tpc_coll_group *g, int rank, tpc_coll *c);

/* ---- MPI backend (the MPI module, loaded at run time) ---- */

/* MPI_COMM_WORLD as a group; TPC_EGPU when the module cannot load. */
int tpc_coll_mpi(tpc_coll *c, tpc_err *e);

#endif
