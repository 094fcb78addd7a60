/* mpi_loader.c - MPI_COMM_WORLD as a tpc_coll, through the MPI module
 * (tpc_mpi.h) loaded at run time: nothing here includes mpi.h, so tpconv
 * links no MPI library. Without the module (a build without MPI, or one
 * whose module or libmpi is missing here) every entry says why, as a build
 * without MPI always did (exit 5). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "tpc_mpi.h"
#include "tpc_util.h"
#include "vint.h"

#define MMSG 512

/* The loaded module: process-wide, as MPI itself is. Set once, by the main
 * thread, before any collective. */
static const tpc_mpi_api *mpi;

static int mfail(tpc_err *e, int sys, const char *msg)
{
	int r = tpc_err_set(e, TPC_EGPU, "%s", msg);
	e->sys = sys;
	return r;
}

int tpc_verify_mpi_load(const char *path, tpc_err *e)
{
	char why[MMSG];
	const void *api;
	if (mpi)
		return 0;
	/* RTLD_GLOBAL: Open MPI opens its own plugins, and a build whose
	 * plugins are not linked to libmpi and open-pal (Debian's are: it
	 * runs either way) finds their symbols only in the global scope */
	if (!tpc__module_load(path, TPC_MPI_MODULE, "MPI", "tpc_mpi_get_api", TPC_MPI_ABI, RTLD_NOW | RTLD_GLOBAL,
			      &api, why, sizeof(why))) {
		mpi = api;
		return 0;
	}
	if (!why[0])
#ifdef TPC_MPI_BUILT
		snprintf(why, sizeof(why), "this tpconv's MPI module %s is not found (TPCONV_MPI_MODULE names its path)",
			 TPC_MPI_MODULE);
#else
		snprintf(why, sizeof(why), "this tpconv was built without MPI (meson -Dmpi=enabled)");
#endif
	return mfail(e, 0, why);
}

int tpc_verify_mpi_init(int *rank, int *size, tpc_err *e)
{
	char msg[MMSG] = "";
	int sys = 0;
	*rank = 0;
	*size = 1;
	if (!mpi && tpc_verify_mpi_load(NULL, e))
		return TPC_EGPU;
	return mpi->init(rank, size, &sys, msg, sizeof(msg)) ? mfail(e, sys, msg) : 0;
}

void tpc_verify_mpi_finalize(void)
{
	if (mpi)
		mpi->finalize();
}

void tpc_verify_mpi_abort(int code)
{
	if (mpi)
		mpi->abort(code);
}

int tpc_verify_mpi_allmax(int *v, tpc_err *e)
{
	char msg[MMSG] = "";
	int sys = 0;
	if (!mpi && tpc_verify_mpi_load(NULL, e))
		return TPC_EGPU;
	return mpi->allmax(v, &sys, msg, sizeof(msg)) ? mfail(e, sys, msg) : 0;
}

static int mpi_allgather(tpc_coll *c, const void *send, size_t bytes, void *recv, tpc_err *e)
{
	char msg[MMSG] = "";
	int sys = 0;
	(void)c;
	return mpi->allgather(send, bytes, recv, &sys, msg, sizeof(msg)) ? mfail(e, sys, msg) : 0;
}

/* MPI_Allreduce would add in an order of the library's choosing: gather and
 * sum in rank order, as every backend does. The buffers are a few tokens'
 * activations, so the extra traffic (size times the data) does not matter. */
static int mpi_allreduce(tpc_coll *c, void *buf, size_t n, tpc_dtype dt, tpc_err *e)
{
	size_t es = dt == TPC_F64 ? 8 : 4, total;
	if (__builtin_mul_overflow(n * es, (size_t)c->size, &total))
		return tpc_err_nomem(e);
	void *all = tpc_malloc(total);
	/* every rank must enter the collective even when its allocation failed */
	int bad = all ? 0 : 1, anybad = bad, ret = tpc_verify_mpi_allmax(&anybad, e);
	if (ret) {
		free(all);
		return ret;
	}
	if (anybad) {
		free(all);
		return bad ? tpc_err_nomem(e) : tpc_err_set(e, TPC_EGPU, "another MPI rank ran out of memory");
	}
	ret = mpi_allgather(c, buf, n * es, all, e);
	if (!ret)
		tpc_coll_sum_ranks(buf, all, c->size, n, dt);
	free(all);
	return ret;
}

static int mpi_bcast(tpc_coll *c, void *buf, size_t bytes, int root, tpc_err *e)
{
	char msg[MMSG] = "";
	int sys = 0;
	(void)c;
	return mpi->bcast(buf, bytes, root, &sys, msg, sizeof(msg)) ? mfail(e, sys, msg) : 0;
}

static int mpi_barrier(tpc_coll *c, tpc_err *e)
{
	char msg[MMSG] = "";
	int sys = 0;
	(void)c;
	return mpi->barrier(&sys, msg, sizeof(msg)) ? mfail(e, sys, msg) : 0;
}

/* no abort: an MPI job is ended by the caller (tpc_verify_mpi_abort) once it has reported */
static const tpc_coll_ops mpi_ops = {"mpi", mpi_allgather, mpi_allreduce, mpi_bcast, mpi_barrier, NULL};

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
