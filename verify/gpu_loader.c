/* gpu_loader.c - find and load the CUDA module at run time (dlopen), and
 * adapt it to the checks: the fp32 matmul chunks go to cuBLAS, the
 * collectives to NCCL. Nothing here includes a CUDA header, so tpconv builds
 * and runs where CUDA is absent; `--device cuda` there fails with exit 5. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/tpc_gpu.h"
#include "tpc_util.h"
#include "vint.h"

#define GMSG 512

static int gfail(tpc_err *e, int sys, const char *msg)
{
	int r = tpc_err_set(e, TPC_EGPU, "%s", msg);
	e->sys = sys;
	return r;
}

/* The module at `path` (TPCONV_CUDA_MODULE, read in cmd/) when given, else
 * where tpc__module_load looks. */
int tpc__gpu_load(const char *path, const tpc_gpu_api **out, tpc_err *e)
{
	char why[GMSG];
	const void *api;
	if (!tpc__module_load(path, TPC_GPU_MODULE, "CUDA", "tpc_gpu_get_api", TPC_GPU_ABI, RTLD_NOW | RTLD_LOCAL,
			      &api, why, sizeof(why))) {
		*out = api;
		return 0;
	}
	if (!why[0])
		snprintf(why, sizeof(why),
			 "--device cuda needs the CUDA module %s (build with -Dcuda=enabled, or set TPCONV_CUDA_MODULE)",
			 TPC_GPU_MODULE);
	return gfail(e, 0, why);
}

int tpc__gpu_devices(const tpc_gpu_api *api, int *ndev, tpc_err *e)
{
	char msg[GMSG] = "";
	int sys = 0, r = api->device_count(ndev, &sys, msg, sizeof(msg));
	if (r)
		return gfail(e, sys, msg);
	if (*ndev <= 0)
		return gfail(e, 0, "no CUDA device is visible (--device cuda)");
	return 0;
}

/* Contexts without a communicator, rank r on device r % ndev: the ranks
 * outnumber the GPUs, so NCCL (one rank per device) is out and the caller
 * keeps its host collectives. */
static int open_local(const tpc_gpu_api *api, tpc_gpu_ctx **ctx, int device, tpc_err *e)
{
	char msg[GMSG] = "";
	int sys = 0;
	return api->open_local(ctx, device, &sys, msg, sizeof(msg)) ? gfail(e, sys, msg) : 0;
}

int tpc__gpu_open_threads(const tpc_gpu_api *api, int tp, tpc_gpu_ctx **ctx, bool *host_coll, tpc_err *e)
{
	char msg[GMSG] = "";
	int ndev, sys = 0, ret = tpc__gpu_devices(api, &ndev, e);
	if (ret)
		return ret;
	*host_coll = tp > ndev;
	if (*host_coll) {
		for (int r = 0; r < tp; r++)
			if ((ret = open_local(api, &ctx[r], r % ndev, e)))
				return ret; /* the caller closes what was opened */
		return 0;
	}
	if (api->open_all(ctx, tp, &sys, msg, sizeof(msg)))
		return gfail(e, sys, msg);
	return 0;
}

int tpc__gpu_open_mpi(const tpc_gpu_api *api, tpc_coll *c, int lr, int ls, tpc_gpu_ctx **ctx, bool *host_coll,
		      tpc_err *e)
{
	char msg[GMSG] = "";
	uint8_t id[TPC_GPU_ID_BYTES];
	int ndev = 0, sys = 0, st, ret = tpc__gpu_devices(api, &ndev, e);
	/* every rank enters the collectives even when its own setup failed */
	st = ret;
	if (lr < 0 || ls <= 0) { /* no launcher variables: one process per node */
		lr = 0;
		ls = 1;
	}
	/* one node with more ranks than GPUs puts every rank on MPI's collectives */
	double over = !st && ls > ndev;
	if ((ret = tpc_coll_allreduce(c, &over, 1, TPC_F64, e)))
		return ret;
	*host_coll = over > 0;
	int dev = st ? -1 : *host_coll ? lr % ndev : tpc_gpu_device_for(lr, ls, ndev, msg, sizeof(msg));
	if (!st && dev < 0)
		st = gfail(e, 0, msg);
	memset(id, 0, sizeof(id));
	if (!st && !*host_coll && c->rank == 0 && api->unique_id(id, &sys, msg, sizeof(msg)))
		st = gfail(e, sys, msg);
	int who, agreed = tpc_coll_agree(c, st, &who, e);
	if (agreed) {
		if (!st)
			tpc_err_set(e, agreed, "rank %d could not set up its GPU", who);
		return agreed;
	}
	if (*host_coll)
		return open_local(api, ctx, dev, e);
	if ((ret = tpc_coll_bcast(c, id, sizeof(id), 0, e)))
		return ret;
	if (api->open(ctx, dev, c->rank, c->size, id, &sys, msg, sizeof(msg)))
		return gfail(e, sys, msg);
	return 0;
}

/* ---- NCCL as a tpc_coll ---- */

typedef struct gcoll {
	const tpc_gpu_api *api;
	tpc_gpu_ctx *ctx;
} gcoll;

static int g_allgather(tpc_coll *c, const void *send, size_t bytes, void *recv, tpc_err *e)
{
	gcoll *g = c->impl;
	char msg[GMSG] = "";
	int sys = 0;
	return g->api->allgather(g->ctx, send, bytes, recv, &sys, msg, sizeof(msg)) ? gfail(e, sys, msg) : 0;
}

static int g_allreduce(tpc_coll *c, void *buf, size_t n, tpc_dtype dt, tpc_err *e)
{
	gcoll *g = c->impl;
	char msg[GMSG] = "";
	int sys = 0;
	return g->api->allreduce(g->ctx, buf, n, dt == TPC_F64, &sys, msg, sizeof(msg)) ? gfail(e, sys, msg) : 0;
}

static int g_bcast(tpc_coll *c, void *buf, size_t bytes, int root, tpc_err *e)
{
	gcoll *g = c->impl;
	char msg[GMSG] = "";
	int sys = 0;
	return g->api->bcast(g->ctx, buf, bytes, root, &sys, msg, sizeof(msg)) ? gfail(e, sys, msg) : 0;
}

static int g_barrier(tpc_coll *c, tpc_err *e)
{
	float one = 1;
	return g_allreduce(c, &one, 1, TPC_F32, e);
}

static const tpc_coll_ops nccl_ops = {"nccl", g_allgather, g_allreduce, g_bcast, g_barrier, NULL};

int tpc__gpu_coll(const tpc_gpu_api *api, tpc_gpu_ctx *ctx, int rank, int size, tpc_coll *c, tpc_err *e)
{
	gcoll *g = tpc_calloc(1, sizeof(*g));
	if (!g)
		return tpc_err_nomem(e);
	g->api = api;
	g->ctx = ctx;
	c->ops = &nccl_ops;
	c->rank = rank;
	c->size = size;
	c->impl = g;
	return 0;
}

void tpc__gpu_coll_free(tpc_coll *c)
{
	free(c->impl);
	c->impl = NULL;
}

int tpc__gpu_gemm(vctx *x, bool transposed, int64_t T, int64_t nr, int64_t cols, const float *in, int64_t ldi,
		  const float *w, float *out, int64_t ldo)
{
	char msg[GMSG] = "";
	int sys = 0;
	if (x->gpu->gemm(x->gpu_ctx, transposed, T, nr, cols, in, ldi, w, out, ldo, &sys, msg, sizeof(msg)))
		return gfail(x->e, sys, msg);
	return 0;
}

int tpc__gpu_act(vctx *x, tpc_vact a, float *v, size_t n)
{
	char msg[GMSG] = "";
	int sys = 0;
	return x->gpu->act(x->gpu_ctx, (int)a, v, n, &sys, msg, sizeof(msg)) ? gfail(x->e, sys, msg) : 0;
}

int tpc__gpu_softmax(vctx *x, float *p, int64_t rows, int64_t n)
{
	char msg[GMSG] = "";
	int sys = 0;
	return x->gpu->softmax_causal(x->gpu_ctx, p, rows, n, &sys, msg, sizeof(msg)) ? gfail(x->e, sys, msg) : 0;
}
