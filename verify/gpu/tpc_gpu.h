/*
 * tpc_gpu.h - the C ABI between tpconv and its CUDA + NCCL module.
 *
 * The module (tpconv_cuda.so, built by nvcc from tpc_verify_cuda.cu when the
 * `cuda` option finds CUDA) is loaded with dlopen only when `verify --device
 * cuda` asks for it, so tpconv itself links no CUDA library and runs on
 * machines without one. The module exports one symbol,
 *
 *   const tpc_gpu_api *tpc_gpu_get_api(void);
 *
 * returning a table of plain C function pointers. Every entry returns 0 or a
 * negative tpc_status (TPC_EGPU for CUDA, cuBLAS and NCCL failures, TPC_EIO
 * out of memory) and writes a one-line message ("cudaMalloc: out of memory",
 * "ncclCommInitRank: unhandled system error") into msg[n]; `sys` receives
 * the CUDA/NCCL status code. The loader checks `abi` before using anything
 * else. All buffers passed in are host memory; the module stages them
 * through pinned host buffers and device buffers it owns (see the buffer
 * plan below), with asynchronous copies on one stream per rank.
 *
 * Ranks and devices. Two ways to run:
 *   - one process, all local GPUs: tpconv starts one thread per rank and the
 *     module creates every communicator at once with ncclCommInitAll
 *     (open_all); rank r uses device r;
 *   - one process per GPU under MPI (multi-node): rank 0 makes an ncclUniqueId
 *     (unique_id), MPI broadcasts it, as nccl-tests does, and every process
 *     opens its communicator with ncclCommInitRank on the device given by
 *     tpc_gpu_device_for (its node-local rank modulo the visible devices).
 *
 *   - more ranks than GPUs (a tp-8 set checked on a one-GPU machine): NCCL
 *     refuses two ranks on one device, so each rank opens a context without
 *     a communicator (open_local) on device rank % devices, computes there,
 *     and the collectives stay on the host (threads or MPI). The report says
 *     which collectives ran.
 *
 * The host-side logic that needs no GPU - which device a rank takes, how big
 * the staging buffers are, how per-rank statuses reduce to one - is plain C
 * in gpu_host.c, compiled into the module and into the unit tests.
 */
#ifndef TPC_GPU_H
#define TPC_GPU_H

#include <stddef.h>
#include <stdint.h>

#define TPC_GPU_ABI 2
#define TPC_GPU_ID_BYTES 128 /* NCCL_UNIQUE_ID_BYTES */
#define TPC_GPU_MODULE "tpconv_cuda.so"

typedef struct tpc_gpu_ctx tpc_gpu_ctx;

typedef struct tpc_gpu_api {
	int abi;
	/* "CUDA runtime 13000, driver 13000, NCCL 22703, cuBLAS 130000" */
	const char *(*version)(void);
	/* Visible devices (>= 0); a negative status when the driver is absent. */
	int (*device_count)(int *n, int *sys, char *msg, size_t len);
	int (*unique_id)(uint8_t id[TPC_GPU_ID_BYTES], int *sys, char *msg, size_t len);
	/* One communicator of nranks for this process's rank on `device`. */
	int (*open)(tpc_gpu_ctx **ctx, int device, int rank, int nranks, const uint8_t id[TPC_GPU_ID_BYTES],
		    int *sys, char *msg, size_t len);
	/* ndev communicators at once (ncclCommInitAll), ctx[r] on device r. */
	int (*open_all)(tpc_gpu_ctx **ctx, int ndev, int *sys, char *msg, size_t len);
	void (*close)(tpc_gpu_ctx *ctx);
	/* Make ctx's device current on the calling thread. */
	int (*bind)(tpc_gpu_ctx *ctx, int *sys, char *msg, size_t len);
	/*
	 * One chunk of a streamed matmul, fp32 in and out, fp32 compute
	 * (cublasGemmEx, CUBLAS_COMPUTE_32F): with transposed == 0,
	 * out[T, 0:nr] = in[T, cols] W^T for W [nr, cols]; with transposed != 0,
	 * out[T, cols] += in[T, 0:nr] W for W [nr, cols]. Leading dims in elements.
	 */
	int (*gemm)(tpc_gpu_ctx *ctx, int transposed, int64_t T, int64_t nr, int64_t cols, const float *in,
		    int64_t ldi, const float *w, float *out, int64_t ldo, int *sys, char *msg, size_t len);
	/* Activation in place (tpc_vact numbering), on the device. */
	int (*act)(tpc_gpu_ctx *ctx, int act, float *v, size_t n, int *sys, char *msg, size_t len);
	/* Causal softmax over the first (row + 1) of n entries of each of rows
	 * rows; the rest set to 0. */
	int (*softmax_causal)(tpc_gpu_ctx *ctx, float *v, int64_t rows, int64_t n, int *sys, char *msg,
			      size_t len);
	/* NCCL collectives on host buffers (staged through the device). */
	int (*allgather)(tpc_gpu_ctx *ctx, const void *send, size_t bytes, void *recv, int *sys, char *msg,
			 size_t len);
	int (*allreduce)(tpc_gpu_ctx *ctx, void *buf, size_t n, int f64, int *sys, char *msg, size_t len);
	int (*bcast)(tpc_gpu_ctx *ctx, void *buf, size_t bytes, int root, int *sys, char *msg, size_t len);
	/* A context on `device` with no communicator (ABI 2): compute only, the
	 * caller runs the collectives; allgather/allreduce/bcast refuse it. */
	int (*open_local)(tpc_gpu_ctx **ctx, int device, int *sys, char *msg, size_t len);
} tpc_gpu_api;

typedef const tpc_gpu_api *(*tpc_gpu_get_api_fn)(void);

/* ---- host logic (gpu_host.c): no CUDA needed ---- */

/*
 * The device a rank uses: its node-local rank modulo the visible devices,
 * refusing more local ranks than devices (two ranks on one GPU would
 * deadlock NCCL). local_rank/local_size from OMPI_COMM_WORLD_LOCAL_RANK/
 * _SIZE (or the threads backend's rank and tp). Returns the device (>= 0) or
 * -1 with a message.
 */
int tpc_gpu_device_for(int local_rank, int local_size, int ndev, char *msg, size_t len);

/* Node-local rank and size from the launcher's variables (OpenMPI, MPICH,
 * Slurm) as `lookup` (getenv, in cmd/) gives them; -1 when none is set. */
void tpc_gpu_local_rank(char *(*lookup)(const char *name), int *local_rank, int *local_size);

/*
 * Device and pinned host buffers one rank needs for a check with T tokens,
 * activations at most `max_in` wide in and `max_out` wide out, and weight
 * chunks of at most `chunk_bytes` of fp32: every size rounded up to 256
 * bytes, each computed with overflow checks. Returns 0 or -1 on overflow.
 */
typedef struct tpc_gpu_plan {
	uint64_t in_bytes, out_bytes, w_bytes, coll_bytes, total;
} tpc_gpu_plan;
int tpc_gpu_buffer_plan(int64_t T, int64_t max_in, int64_t max_out, uint64_t chunk_bytes, int tp,
			tpc_gpu_plan *p);

/* Rows of a [rows, cols] fp32 weight that fit a chunk of chunk_bytes (>= 1). */
int64_t tpc_gpu_chunk_rows(int64_t cols, uint64_t chunk_bytes);

/*
 * Reduce per-rank statuses to one: the first rank (lowest) with a nonzero
 * status that is not "another rank failed" (peer[r] != 0 marks those);
 * returns that rank or -1 when all are 0.
 */
int tpc_gpu_first_error(const int *status, const int *peer, int n);

#endif
