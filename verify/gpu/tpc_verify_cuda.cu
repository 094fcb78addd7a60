/* tpc_verify_cuda.cu - the CUDA + NCCL module of `tpconv verify --device cuda`
 * (tpconv_cuda.so); the ABI is in tpc_gpu.h.
 *
 * Per rank: one device, one stream, one cuBLAS handle, one NCCL
 * communicator, device buffers that grow to the largest request (the plan of
 * tpc_gpu_buffer_plan), and one pinned host staging buffer, so every copy is
 * an asynchronous cudaMemcpyAsync from page-locked memory. Every CUDA,
 * cuBLAS and NCCL call goes through CUDA_CHECK / CUBLAS_CHECK / NCCL_CHECK,
 * in the style of NCCL's checks.h: on failure the message names the call and
 * the library's error string, the status lands in *sys, and the function
 * returns TPC_EGPU (-5). Matmuls are fp32 in, fp32 out, fp32 compute
 * (CUBLAS_COMPUTE_32F: no TF32), so the GPU results stay within the fp32
 * tolerances of the CPU path. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "tpc_gpu.h"
}

#define TPC_EGPU_ (-5)
#define TPC_EIO_ (-4)

/* A CUDA, cuBLAS or NCCL call: on failure, its status in *sys and the call
 * with the library's message in msg, then TPC_EGPU_ (NCCL's checks.h style). */
#define GPU_CHECK(T, call, ok, str)                                                                 \
	do {                                                                                        \
		T v_ = (call);                                                                      \
		if (v_ != (ok)) {                                                                   \
			*sys = (int)v_;                                                             \
			snprintf(msg, len, "%s: %s", #call, str(v_));                               \
			return TPC_EGPU_;                                                           \
		}                                                                                   \
	} while (0)
#define CUDA_CHECK(call) GPU_CHECK(cudaError_t, call, cudaSuccess, cudaGetErrorString)
#define CUBLAS_CHECK(call) GPU_CHECK(cublasStatus_t, call, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)
#define NCCL_CHECK(call) GPU_CHECK(ncclResult_t, call, ncclSuccess, ncclGetErrorString)

struct tpc_gpu_ctx {
	int device;
	ncclComm_t comm;
	cudaStream_t stream;
	cublasHandle_t blas;
	void *d[3];       /* device buffers: input / weight / output (or send / recv) */
	size_t dcap[3];
	void *host;       /* pinned staging */
	size_t hcap;
};

/* Grow device buffer i to at least n bytes. */
static int dbuf(tpc_gpu_ctx *c, int i, size_t n, int *sys, char *msg, size_t len)
{
	if (n <= c->dcap[i])
		return 0;
	if (c->d[i])
		CUDA_CHECK(cudaFree(c->d[i]));
	c->d[i] = NULL;
	c->dcap[i] = 0;
	n = (n + 255) / 256 * 256;
	CUDA_CHECK(cudaMalloc(&c->d[i], n));
	c->dcap[i] = n;
	return 0;
}

static int hbuf(tpc_gpu_ctx *c, size_t n, int *sys, char *msg, size_t len)
{
	if (n <= c->hcap)
		return 0;
	if (c->host)
		CUDA_CHECK(cudaFreeHost(c->host));
	c->host = NULL;
	c->hcap = 0;
	n = (n + 4095) / 4096 * 4096;
	CUDA_CHECK(cudaMallocHost(&c->host, n));
	c->hcap = n;
	return 0;
}

/* host -> device buffer i through the pinned stage (rows of `row` bytes,
 * source stride `ld` bytes) */
static int upload(tpc_gpu_ctx *c, int i, const void *src, size_t rows, size_t row, size_t ld, int *sys, char *msg,
		  size_t len)
{
	size_t n = rows * row;
	int r;
	if ((r = dbuf(c, i, n ? n : 1, sys, msg, len)) || (r = hbuf(c, n ? n : 1, sys, msg, len)))
		return r;
	for (size_t k = 0; k < rows; k++)
		memcpy((char *)c->host + k * row, (const char *)src + k * ld, row);
	CUDA_CHECK(cudaMemcpyAsync(c->d[i], c->host, n, cudaMemcpyHostToDevice, c->stream));
	/* the stage is reused by the next upload: wait for this copy */
	CUDA_CHECK(cudaStreamSynchronize(c->stream));
	return 0;
}

static int download(tpc_gpu_ctx *c, int i, void *dst, size_t rows, size_t row, size_t ld, int *sys, char *msg,
		    size_t len)
{
	size_t n = rows * row;
	int r;
	if ((r = hbuf(c, n ? n : 1, sys, msg, len)))
		return r;
	CUDA_CHECK(cudaMemcpyAsync(c->host, c->d[i], n, cudaMemcpyDeviceToHost, c->stream));
	CUDA_CHECK(cudaStreamSynchronize(c->stream));
	for (size_t k = 0; k < rows; k++)
		memcpy((char *)dst + k * ld, (const char *)c->host + k * row, row);
	return 0;
}

static const char *g_version(void)
{
	static char buf[128];
	int rt = 0, drv = 0, nv = 0, bl = 0;
	cudaRuntimeGetVersion(&rt);
	cudaDriverGetVersion(&drv);
	ncclGetVersion(&nv);
	cublasGetProperty(MAJOR_VERSION, &bl);
	snprintf(buf, sizeof(buf), "CUDA runtime %d, driver %d, NCCL %d, cuBLAS %d", rt, drv, nv, bl);
	return buf;
}

static int g_device_count(int *n, int *sys, char *msg, size_t len)
{
	cudaError_t e = cudaGetDeviceCount(n);
	if (e == cudaErrorNoDevice) {
		*n = 0;
		return 0;
	}
	if (e != cudaSuccess) {
		*n = 0;
		*sys = (int)e;
		snprintf(msg, len, "no usable CUDA device: %s", cudaGetErrorString(e));
		return TPC_EGPU_;
	}
	return 0;
}

static int g_unique_id(uint8_t id[TPC_GPU_ID_BYTES], int *sys, char *msg, size_t len)
{
	ncclUniqueId u;
	static_assert(sizeof(u) == TPC_GPU_ID_BYTES, "NCCL unique id size");
	NCCL_CHECK(ncclGetUniqueId(&u));
	memcpy(id, &u, sizeof(u));
	return 0;
}

static int ctx_new(tpc_gpu_ctx **out, int device, int *sys, char *msg, size_t len)
{
	tpc_gpu_ctx *c = (tpc_gpu_ctx *)calloc(1, sizeof(*c));
	if (!c) {
		snprintf(msg, len, "out of memory");
		return TPC_EIO_;
	}
	*out = c;
	c->device = device;
	CUDA_CHECK(cudaSetDevice(device));
	CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
	CUBLAS_CHECK(cublasCreate(&c->blas));
	CUBLAS_CHECK(cublasSetStream(c->blas, c->stream));
	CUBLAS_CHECK(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH)); /* no TF32 */
	return 0;
}

static void g_close(tpc_gpu_ctx *c)
{
	if (!c)
		return;
	cudaSetDevice(c->device);
	if (c->comm)
		ncclCommDestroy(c->comm);
	if (c->blas)
		cublasDestroy(c->blas);
	for (int i = 0; i < 3; i++)
		if (c->d[i])
			cudaFree(c->d[i]);
	if (c->host)
		cudaFreeHost(c->host);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	free(c);
}

static int g_open_local(tpc_gpu_ctx **out, int device, int *sys, char *msg, size_t len)
{
	int r = ctx_new(out, device, sys, msg, len);
	if (r) {
		g_close(*out);
		*out = NULL;
	}
	return r;
}

static int g_open(tpc_gpu_ctx **out, int device, int rank, int nranks, const uint8_t id[TPC_GPU_ID_BYTES], int *sys,
		  char *msg, size_t len)
{
	ncclUniqueId u;
	int r = g_open_local(out, device, sys, msg, len);
	if (r)
		return r;
	memcpy(&u, id, sizeof(u));
	ncclResult_t nr = ncclCommInitRank(&(*out)->comm, nranks, u, rank);
	if (nr != ncclSuccess) {
		*sys = (int)nr;
		snprintf(msg, len, "ncclCommInitRank(rank %d of %d, device %d): %s", rank, nranks, device,
			 ncclGetErrorString(nr));
		g_close(*out);
		*out = NULL;
		return TPC_EGPU_;
	}
	return 0;
}

static int g_open_all(tpc_gpu_ctx **ctx, int ndev, int *sys, char *msg, size_t len)
{
	ncclComm_t *comms = (ncclComm_t *)calloc((size_t)ndev, sizeof(ncclComm_t));
	int *devs = (int *)calloc((size_t)ndev, sizeof(int));
	int r = 0;
	if (!comms || !devs) {
		free(comms);
		free(devs);
		snprintf(msg, len, "out of memory");
		return TPC_EIO_;
	}
	for (int i = 0; i < ndev; i++)
		devs[i] = i;
	ncclResult_t nr = ncclCommInitAll(comms, ndev, devs);
	if (nr != ncclSuccess) {
		*sys = (int)nr;
		snprintf(msg, len, "ncclCommInitAll(%d devices): %s", ndev, ncclGetErrorString(nr));
		r = TPC_EGPU_;
	}
	for (int i = 0; !r && i < ndev; i++) {
		if ((r = ctx_new(&ctx[i], i, sys, msg, len)))
			break;
		ctx[i]->comm = comms[i];
		comms[i] = NULL;
	}
	for (int i = 0; i < ndev; i++)
		if (comms[i])
			ncclCommDestroy(comms[i]);
	if (r)
		for (int i = 0; i < ndev; i++) {
			g_close(ctx[i]);
			ctx[i] = NULL;
		}
	free(comms);
	free(devs);
	return r;
}

static int g_bind(tpc_gpu_ctx *c, int *sys, char *msg, size_t len)
{
	CUDA_CHECK(cudaSetDevice(c->device));
	return 0;
}

static int g_gemm(tpc_gpu_ctx *c, int transposed, int64_t T, int64_t nr, int64_t cols, const float *in, int64_t ldi,
		  const float *w, float *out, int64_t ldo, int *sys, char *msg, size_t len)
{
	int r;
	const float one = 1.0f, zero = 0.0f;
	tpc_gpu_plan plan;
	if (!T || !nr || !cols)
		return 0;
	/* the buffers this chunk needs, sized once by the host-side plan */
	if (tpc_gpu_buffer_plan(T, transposed ? nr : cols, transposed ? cols : nr, (uint64_t)nr * (uint64_t)cols * 4, 1,
				&plan)) {
		snprintf(msg, len, "matmul of [%lld, %lld] x [%lld, %lld] is too large", (long long)T, (long long)cols,
			 (long long)nr, (long long)cols);
		return TPC_EGPU_;
	}
	if ((r = dbuf(c, 0, plan.in_bytes, sys, msg, len)) || (r = dbuf(c, 1, plan.w_bytes, sys, msg, len)) ||
	    (r = dbuf(c, 2, plan.out_bytes, sys, msg, len)) || (r = hbuf(c, plan.w_bytes, sys, msg, len)))
		return r;
	if ((r = upload(c, 1, w, (size_t)nr, (size_t)cols * 4, (size_t)cols * 4, sys, msg, len)))
		return r;
	if (!transposed) {
		/* row-major Y[T, nr] = X[T, cols] W[nr, cols]^T is, column-major,
		 * Y^c[nr, T] = (W^c)^T X^c with W^c [cols, nr], X^c [cols, T] */
		if ((r = upload(c, 0, in, (size_t)T, (size_t)cols * 4, (size_t)ldi * 4, sys, msg, len)) ||
		    (r = dbuf(c, 2, (size_t)(T * nr) * 4, sys, msg, len)))
			return r;
		CUBLAS_CHECK(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)nr, (int)T, (int)cols, &one, c->d[1],
					  CUDA_R_32F, (int)cols, c->d[0], CUDA_R_32F, (int)cols, &zero, c->d[2], CUDA_R_32F,
					  (int)nr, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
		return download(c, 2, out, (size_t)T, (size_t)nr * 4, (size_t)ldo * 4, sys, msg, len);
	}
	/* row-major O[T, cols] += I[T, nr] W[nr, cols]: column-major
	 * O^c[cols, T] += W^c[cols, nr] I^c[nr, T] */
	if ((r = upload(c, 0, in, (size_t)T, (size_t)nr * 4, (size_t)ldi * 4, sys, msg, len)) ||
	    (r = upload(c, 2, out, (size_t)T, (size_t)cols * 4, (size_t)ldo * 4, sys, msg, len)))
		return r;
	CUBLAS_CHECK(cublasGemmEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)cols, (int)T, (int)nr, &one, c->d[1],
				  CUDA_R_32F, (int)cols, c->d[0], CUDA_R_32F, (int)nr, &one, c->d[2], CUDA_R_32F, (int)cols,
				  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	return download(c, 2, out, (size_t)T, (size_t)cols * 4, (size_t)ldo * 4, sys, msg, len);
}

/* tpc_vact numbering: 0 silu, 1 gelu (erf), 2 gelu tanh, 3 relu */
__global__ void act_kernel(int act, float *v, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	float z = v[i];
	switch (act) {
	case 0:
		v[i] = z / (1.0f + expf(-z));
		break;
	case 1:
		v[i] = 0.5f * z * (1.0f + erff(z * 0.70710678118654752440f));
		break;
	case 2:
		v[i] = 0.5f * z * (1.0f + tanhf(0.79788456080286535588f * (z + 0.044715f * z * z * z)));
		break;
	default:
		v[i] = z > 0.0f ? z : 0.0f;
	}
}

/* one block per row; row t keeps entries 0..t (causal), the rest become 0 */
__global__ void softmax_causal_kernel(float *p, int64_t n)
{
	int64_t t = blockIdx.x;
	float *row = p + t * n;
	__shared__ float red[256];
	float mx = -INFINITY;
	for (int64_t s = threadIdx.x; s <= t && s < n; s += blockDim.x)
		mx = fmaxf(mx, row[s]);
	red[threadIdx.x] = mx;
	__syncthreads();
	for (int w = blockDim.x / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w)
			red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
		__syncthreads();
	}
	mx = red[0];
	__syncthreads();
	float sum = 0.0f;
	for (int64_t s = threadIdx.x; s < n; s += blockDim.x) {
		float e = s <= t ? expf(row[s] - mx) : 0.0f;
		row[s] = e;
		sum += e;
	}
	red[threadIdx.x] = sum;
	__syncthreads();
	for (int w = blockDim.x / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w)
			red[threadIdx.x] += red[threadIdx.x + w];
		__syncthreads();
	}
	sum = red[0];
	for (int64_t s = threadIdx.x; s < n; s += blockDim.x)
		row[s] /= sum;
}

static int g_act(tpc_gpu_ctx *c, int act, float *v, size_t n, int *sys, char *msg, size_t len)
{
	int r;
	if (!n)
		return 0;
	if ((r = upload(c, 0, v, 1, n * 4, n * 4, sys, msg, len)))
		return r;
	act_kernel<<<(unsigned)((n + 255) / 256), 256, 0, c->stream>>>(act, (float *)c->d[0], n);
	CUDA_CHECK(cudaGetLastError());
	return download(c, 0, v, 1, n * 4, n * 4, sys, msg, len);
}

static int g_softmax(tpc_gpu_ctx *c, float *v, int64_t rows, int64_t n, int *sys, char *msg, size_t len)
{
	int r;
	if (!rows || !n)
		return 0;
	if ((r = upload(c, 0, v, 1, (size_t)(rows * n) * 4, (size_t)(rows * n) * 4, sys, msg, len)))
		return r;
	softmax_causal_kernel<<<(unsigned)rows, 256, 0, c->stream>>>((float *)c->d[0], n);
	CUDA_CHECK(cudaGetLastError());
	return download(c, 0, v, 1, (size_t)(rows * n) * 4, (size_t)(rows * n) * 4, sys, msg, len);
}

static int no_comm(const tpc_gpu_ctx *c, const char *what, char *msg, size_t len)
{
	if (c->comm)
		return 0;
	snprintf(msg, len, "%s: this GPU context has no NCCL communicator (more ranks than GPUs)", what);
	return TPC_EGPU_;
}

static int g_allgather(tpc_gpu_ctx *c, const void *send, size_t bytes, void *recv, int *sys, char *msg, size_t len)
{
	int nranks = 0, r;
	if ((r = no_comm(c, "allgather", msg, len)))
		return r;
	NCCL_CHECK(ncclCommCount(c->comm, &nranks));
	if ((r = upload(c, 0, send, 1, bytes, bytes, sys, msg, len)) ||
	    (r = dbuf(c, 2, bytes * (size_t)nranks + 1, sys, msg, len)))
		return r;
	NCCL_CHECK(ncclAllGather(c->d[0], c->d[2], bytes, ncclChar, c->comm, c->stream));
	return download(c, 2, recv, 1, bytes * (size_t)nranks, bytes * (size_t)nranks, sys, msg, len);
}

static int g_allreduce(tpc_gpu_ctx *c, void *buf, size_t n, int f64, int *sys, char *msg, size_t len)
{
	size_t bytes = n * (f64 ? 8 : 4);
	int r;
	if ((r = no_comm(c, "allreduce", msg, len)))
		return r;
	if ((r = upload(c, 0, buf, 1, bytes, bytes, sys, msg, len)))
		return r;
	NCCL_CHECK(ncclAllReduce(c->d[0], c->d[0], n, f64 ? ncclDouble : ncclFloat, ncclSum, c->comm, c->stream));
	return download(c, 0, buf, 1, bytes, bytes, sys, msg, len);
}

static int g_bcast(tpc_gpu_ctx *c, void *buf, size_t bytes, int root, int *sys, char *msg, size_t len)
{
	int r;
	if ((r = no_comm(c, "broadcast", msg, len)))
		return r;
	if ((r = upload(c, 0, buf, 1, bytes, bytes, sys, msg, len)))
		return r;
	NCCL_CHECK(ncclBroadcast(c->d[0], c->d[0], bytes, ncclChar, root, c->comm, c->stream));
	return download(c, 0, buf, 1, bytes, bytes, sys, msg, len);
}

static const tpc_gpu_api api = {
	TPC_GPU_ABI, g_version,   g_device_count, g_unique_id, g_open,  g_open_all,  g_close, g_bind,
	g_gemm,      g_act,       g_softmax,      g_allgather, g_allreduce, g_bcast, g_open_local,
};

extern "C" __attribute__((visibility("default"))) const tpc_gpu_api *tpc_gpu_get_api(void)
{
	return &api;
}
