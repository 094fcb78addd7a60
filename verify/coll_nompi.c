/* coll_nompi.c - the MPI entry points of a build without MPI: they say so
 * (exit 5) instead of failing to link. */
#include "coll.h"
#include "tpc_verify.h"

bool tpc_verify_have_mpi(void)
{
	return false;
}

int tpc_verify_mpi_init(int *rank, int *size, tpc_err *e)
{
	*rank = 0;
	*size = 1;
	return tpc_err_set(e, TPC_EGPU, "this tpconv was built without MPI (meson -Dmpi=enabled)");
}

void tpc_verify_mpi_finalize(void)
{
}

void tpc_verify_mpi_abort(int code)
{
	(void)code;
}

int tpc_verify_mpi_allmax(int *v, tpc_err *e)
{
	(void)v;
	return tpc_err_set(e, TPC_EGPU, "this tpconv was built without MPI (meson -Dmpi=enabled)");
}

int tpc_coll_mpi(tpc_coll *c, tpc_err *e)
{
	(void)c;
	return tpc_err_set(e, TPC_EGPU, "this tpconv was built without MPI (meson -Dmpi=enabled)");
}
