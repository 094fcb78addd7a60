/* coll_mpi.c - collectives between MPI processes (MPI_COMM_WORLD).
 *
 * The all-reduce is an MPI_Allgather followed by the rank-order sum every
 * backend uses (tpc_coll_sum_ranks): MPI_Allreduce leaves the order of the
 * additions to the library, and verify promises the same bits as the threads
 * backend. The buffers are a few tokens' activations, so the extra traffic
 * (size times the data) does not matter. Built only when meson finds MPI;
 * coll_nompi.c stands in otherwise. */
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>

#include "coll.h"
#include "tpc_util.h"
#include "tpc_verify.h"

static int mpi_fail(tpc_err *e, int rc, const char *what)
{
	char s[MPI_MAX_ERROR_STRING];
	int n = 0;
	if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS)
		s[0] = 0;
	e->sys = rc;
	return tpc_err_set(e, TPC_EGPU, "%s failed: %s", what, s);
}

static int mpi_allgather(tpc_coll *c, const void *send, size_t bytes, void *recv, tpc_err *e)
{
	(void)c;
	if (bytes > INT_MAX)
		return tpc_err_set(e, TPC_EGPU, "MPI_Allgather of %zu bytes is too large", bytes);
	int rc = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
	return rc == MPI_SUCCESS ? 0 : mpi_fail(e, rc, "MPI_Allgather");
}

static int mpi_allreduce(tpc_coll *c, void *buf, size_t n, tpc_dtype dt, tpc_err *e)
{
	size_t es = dt == TPC_F64 ? 8 : 4, total;
	if (__builtin_mul_overflow(n * es, (size_t)c->size, &total))
		return tpc_err_nomem(e);
	void *all = tpc_malloc(total);
	/* every rank must enter the collective even when its allocation failed */
	int bad = all ? 0 : 1, anybad = 0;
	int rc = MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS) {
		free(all);
		return mpi_fail(e, rc, "MPI_Allreduce");
	}
	if (anybad) {
		free(all);
		return bad ? tpc_err_nomem(e) : tpc_err_set(e, TPC_EGPU, "another MPI rank ran out of memory");
	}
	int ret = mpi_allgather(c, buf, n * es, all, e);
	if (!ret)
		tpc_coll_sum_ranks(buf, all, c->size, n, dt);
	free(all);
	return ret;
}

static int mpi_bcast(tpc_coll *c, void *buf, size_t bytes, int root, tpc_err *e)
{
	(void)c;
	if (bytes > INT_MAX)
		return tpc_err_set(e, TPC_EGPU, "MPI_Bcast of %zu bytes is too large", bytes);
	int rc = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
	return rc == MPI_SUCCESS ? 0 : mpi_fail(e, rc, "MPI_Bcast");
}

static int mpi_barrier(tpc_coll *c, tpc_err *e)
{
	(void)c;
	int rc = MPI_Barrier(MPI_COMM_WORLD);
	return rc == MPI_SUCCESS ? 0 : mpi_fail(e, rc, "MPI_Barrier");
}

/* no abort: an MPI job is ended by the caller (tpc_verify_mpi_abort) once it has reported */
static const tpc_coll_ops mpi_ops = {"mpi", mpi_allgather, mpi_allreduce, mpi_bcast, mpi_barrier, NULL};

bool tpc_verify_have_mpi(void)
{
	return true;
}

int tpc_verify_mpi_init(int *rank, int *size, tpc_err *e)
{
	int inited = 0, provided = 0, rc;
	MPI_Initialized(&inited);
	if (!inited) {
		/* FUNNELED: only the main thread calls MPI; OpenMP threads compute */
		rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
		if (rc != MPI_SUCCESS)
			return mpi_fail(e, rc, "MPI_Init_thread");
		/* errors come back as codes, so they reach tpc_err (exit 5) */
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, size);
	return 0;
}

void tpc_verify_mpi_finalize(void)
{
	int inited = 0, done = 0;
	MPI_Initialized(&inited);
	MPI_Finalized(&done);
	if (inited && !done)
		MPI_Finalize();
}

void tpc_verify_mpi_abort(int code)
{
	int inited = 0, done = 0;
	MPI_Initialized(&inited);
	MPI_Finalized(&done);
	if (inited && !done)
		MPI_Abort(MPI_COMM_WORLD, code);
}

int tpc_verify_mpi_allmax(int *v, tpc_err *e)
{
	int out = 0, rc = MPI_Allreduce(v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		return mpi_fail(e, rc, "MPI_Allreduce");
	*v = out;
	return 0;
}

int tpc_coll_mpi(tpc_coll *c, tpc_err *e)
{
	int rank, size, ret = tpc_verify_mpi_init(&rank, &size, e);
	if (ret)
		return ret;
	c->ops = &mpi_ops;
	c->rank = rank;
	c->size = size;
	c->impl = NULL;
	return 0;
}
