/* coll_mpi.c - the MPI module (tpconv_mpi.so, tpc_mpi.h): MPI_COMM_WORLD's
 * collectives as plain C entries, built only when meson finds MPI. It is the
 * one file that includes mpi.h, and tpconv loads it only under mpirun
 * (mpi_loader.c), so no other start pays for libmpi and its libraries.
 *
 * The all-reduce tpconv needs is not here: MPI_Allreduce leaves the order of
 * the additions to the library, and verify promises the same bits as the
 * threads backend, so the loader gathers (allgather) and sums in rank order
 * itself. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>

#include "tpc_mpi.h"

static int fail(int rc, const char *what, int *sys, char *msg, size_t len)
{
	char s[MPI_MAX_ERROR_STRING];
	int n = 0;
	if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS)
		s[0] = 0;
	*sys = rc;
	snprintf(msg, len, "%s failed: %s", what, s);
	return -1;
}

static int too_large(const char *what, size_t bytes, int *sys, char *msg, size_t len)
{
	*sys = 0;
	snprintf(msg, len, "%s of %zu bytes is too large", what, bytes);
	return -1;
}

static int m_init(int *rank, int *size, int *sys, char *msg, size_t len)
{
	int inited = 0, provided = 0, rc;
	MPI_Initialized(&inited);
	if (!inited) {
		/* FUNNELED: only the main thread calls MPI; OpenMP threads compute */
		rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
		if (rc != MPI_SUCCESS)
			return fail(rc, "MPI_Init_thread", sys, msg, len);
		/* errors come back as codes, so they reach tpc_err (exit 5) */
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, size);
	return 0;
}

static void m_finalize(void)
{
	int inited = 0, done = 0;
	MPI_Initialized(&inited);
	MPI_Finalized(&done);
	if (inited && !done)
		MPI_Finalize();
}

static void m_abort(int code)
{
	int inited = 0, done = 0;
	MPI_Initialized(&inited);
	MPI_Finalized(&done);
	if (inited && !done)
		MPI_Abort(MPI_COMM_WORLD, code);
}

static int m_allgather(const void *send, size_t bytes, void *recv, int *sys, char *msg, size_t len)
{
	if (bytes > INT_MAX)
		return too_large("MPI_Allgather", bytes, sys, msg, len);
	int rc = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
	return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Allgather", sys, msg, len);
}

static int m_bcast(void *buf, size_t bytes, int root, int *sys, char *msg, size_t len)
{
	if (bytes > INT_MAX)
		return too_large("MPI_Bcast", bytes, sys, msg, len);
	int rc = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
	return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Bcast", sys, msg, len);
}

static int m_barrier(int *sys, char *msg, size_t len)
{
	int rc = MPI_Barrier(MPI_COMM_WORLD);
	return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Barrier", sys, msg, len);
}

static int m_allmax(int *v, int *sys, char *msg, size_t len)
{
	int out = 0, rc = MPI_Allreduce(v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		return fail(rc, "MPI_Allreduce", sys, msg, len);
	*v = out;
	return 0;
}

static const tpc_mpi_api api = {TPC_MPI_ABI, m_init, m_finalize, m_abort, m_allgather, m_bcast, m_barrier, m_allmax};

__attribute__((visibility("default"))) const tpc_mpi_api *tpc_mpi_get_api(void)
{
	return &api;
}
