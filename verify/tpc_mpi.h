/*
 * tpc_mpi.h - the C ABI between tpconv and its MPI module.
 *
 * The module (tpconv_mpi.so, built from coll_mpi.c when the `mpi` option
 * finds MPI, installed beside tpconv_cuda.so) is loaded with dlopen only when
 * a run is started by mpirun (cmd/ sees the launcher's variables), so tpconv
 * itself links no MPI library: every other start is spared relocating
 * libmpi, open-rte, open-pal, hwloc, libevent and udev. Without the module,
 * or without the MPI library it needs, tpconv behaves as a build without MPI
 * (coll.h's tpc_coll_mpi and tpc_verify_mpi_load say why).
 *
 * The module exports one symbol,
 *
 *   const tpc_mpi_api *tpc_mpi_get_api(void);
 *
 * returning a table of plain C function pointers on MPI_COMM_WORLD. Each
 * entry returns 0, or -1 with the MPI error code in *sys and a one-line
 * message ("MPI_Allgather failed: MPI_ERR_TRUNCATE: message truncated") in
 * msg[len]. The loader checks `abi` before using anything else. What is not
 * MPI - the rank-order sum of an all-reduce, tpconv's errors - stays on
 * tpconv's side (mpi_loader.c), so the module needs nothing of tpconv.
 */
#ifndef TPC_MPI_H
#define TPC_MPI_H

#include <stddef.h>

#define TPC_MPI_ABI 1
#define TPC_MPI_MODULE "tpconv_mpi.so"

typedef struct tpc_mpi_api {
	int abi;
	/* MPI_Init_thread (FUNNELED: only the main thread calls MPI) unless MPI
	 * is initialised already, errors returned as codes from then on; this
	 * process's rank and the job's size. */
	int (*init)(int *rank, int *size, int *sys, char *msg, size_t len);
	/* MPI_Finalize, once, if initialised. */
	void (*finalize)(void);
	/* MPI_Abort of the whole job with `code`, if initialised. */
	void (*abort)(int code);
	/* Every rank sends `bytes` (at most INT_MAX); recv gets size * bytes in
	 * rank order. */
	int (*allgather)(const void *send, size_t bytes, void *recv, int *sys, char *msg, size_t len);
	int (*bcast)(void *buf, size_t bytes, int root, int *sys, char *msg, size_t len);
	int (*barrier)(int *sys, char *msg, size_t len);
	/* *v becomes the largest *v of all ranks (MPI_Allreduce MAX). */
	int (*allmax)(int *v, int *sys, char *msg, size_t len);
} tpc_mpi_api;

typedef const tpc_mpi_api *(*tpc_mpi_get_api_fn)(void);

#endif
