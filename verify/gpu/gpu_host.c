/* gpu_host.c - the GPU module's host logic that needs no GPU: rank to device
 * layout, buffer plans, status reduction. Compiled into tpconv_cuda.so and
 * into tests/verify/test_verify.c. See tpc_gpu.h. */
#include <stdio.h>
#include <stdlib.h>

#include "tpc_gpu.h"

int tpc_gpu_device_for(int local_rank, int local_size, int ndev, char *msg, size_t len)
{
	if (ndev <= 0) {
		snprintf(msg, len, "no CUDA device is visible");
		return -1;
	}
	if (local_rank < 0 || local_size < 1 || local_rank >= local_size) {
		snprintf(msg, len, "bad local rank %d of %d", local_rank, local_size);
		return -1;
	}
	if (local_size > ndev) {
		snprintf(msg, len, "%d ranks on this node but %d visible CUDA device%s: one rank per GPU", local_size,
			 ndev, ndev == 1 ? "" : "s");
		return -1;
	}
	return local_rank % ndev;
}

static int env_int(char *(*lookup)(const char *), const char *name)
{
	const char *s = lookup(name);
	if (!s || !*s)
		return -1;
	char *end;
	long v = strtol(s, &end, 10);
	return (*end || v < 0 || v > 1 << 20) ? -1 : (int)v;
}

void tpc_gpu_local_rank(char *(*lookup)(const char *name), int *local_rank, int *local_size)
{
	static const char *pairs[][2] = {
		{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
		{"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
		{"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
	};
	*local_rank = *local_size = -1;
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		int r = env_int(lookup, pairs[i][0]), n = env_int(lookup, pairs[i][1]);
		if (r >= 0 && n > 0) {
			*local_rank = r;
			*local_size = n;
			return;
		}
	}
}

static int round256(uint64_t v, uint64_t *out)
{
	if (v > UINT64_MAX - 255)
		return -1;
	*out = (v + 255) / 256 * 256;
	return 0;
}

static int mul3(int64_t a, int64_t b, int64_t c, uint64_t *out)
{
	uint64_t r;
	if (a < 0 || b < 0 || c < 0 || __builtin_mul_overflow((uint64_t)a, (uint64_t)b, &r) ||
	    __builtin_mul_overflow(r, (uint64_t)c, &r))
		return -1;
	*out = r;
	return 0;
}

int tpc_gpu_buffer_plan(int64_t T, int64_t max_in, int64_t max_out, uint64_t chunk_bytes, int tp, tpc_gpu_plan *p)
{
	uint64_t in, out, w, coll;
	if (T < 1 || tp < 1 || mul3(T, max_in, 4, &in) || mul3(T, max_out, 4, &out) ||
	    mul3(T, max_out > max_in ? max_out : max_in, 4, &coll) ||
	    __builtin_mul_overflow(coll, (uint64_t)tp, &coll))
		return -1;
	w = chunk_bytes;
	if (round256(in, &p->in_bytes) || round256(out, &p->out_bytes) || round256(w, &p->w_bytes) ||
	    round256(coll, &p->coll_bytes))
		return -1;
	uint64_t t = p->in_bytes;
	if (__builtin_add_overflow(t, p->out_bytes, &t) || __builtin_add_overflow(t, p->w_bytes, &t) ||
	    __builtin_add_overflow(t, p->coll_bytes, &t))
		return -1;
	p->total = t;
	return 0;
}

int64_t tpc_gpu_chunk_rows(int64_t cols, uint64_t chunk_bytes)
{
	if (cols <= 0)
		return 1;
	uint64_t r = chunk_bytes / ((uint64_t)cols * 4);
	return r < 1 ? 1 : (int64_t)r;
}

int tpc_gpu_first_error(const int *status, const int *peer, int n)
{
	for (int pass = 0; pass < 2; pass++)
		for (int r = 0; r < n; r++)
			if (status[r] && (pass || !peer || !peer[r]))
				return r;
	return -1;
}
