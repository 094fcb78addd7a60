/* tpc_shard.c - split planning, rank checkpoints and writing; see tpc_shard.h.
 *
 * Memory: every rank tensor is a description; bytes move only inside the
 * registry writers (copy_file_range for contiguous slices, a bounded gather
 * buffer for the rest) and the hashing pass (bounded windows). Pages of the
 * input mapping that a gather or a hash has read are dropped from the resident
 * set again (tpc_map_drop), so peak RSS does not grow with the model. */
#include "tpc_shard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tpc_config.h"
#include "tpc_extras.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_manifest.h"
#include "tpc_qsplit.h"
#include "tpc_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define WINDOW (8u << 20)

int tpc__borrow_sources(tpc_ckpt *dst, const tpc_ckpt *const *srcs, size_t n, int *base, tpc_err *e)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += srcs[i]->nsrc;
	dst->src = tpc_calloc(total ? total : 1, sizeof(*dst->src));
	dst->src_owned_mem = tpc_calloc(total ? total : 1, sizeof(bool));
	if (!dst->src || !dst->src_owned_mem) {
		free(dst->src);
		free(dst->src_owned_mem);
		dst->src = NULL;
		dst->src_owned_mem = NULL;
		return tpc_err_nomem(e);
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (base)
			base[i] = (int)k;
		for (size_t j = 0; j < srcs[i]->nsrc; j++)
			dst->src[k++] = srcs[i]->src[j]; /* shallow: the owner keeps the mapping */
	}
	dst->nsrc = dst->capsrc = total;
	return 0;
}

void tpc__return_sources(tpc_ckpt *dst)
{
	/* borrowed maps stay with their owners; memory added since is dst's */
	for (size_t k = 0; dst->src && dst->src_owned_mem && k < dst->nsrc; k++)
		if (dst->src_owned_mem[k]) {
			free((void *)dst->src[k].data);
			free(dst->src[k].path);
		}
	free(dst->src);
	free(dst->src_owned_mem);
	dst->src = NULL;
	dst->src_owned_mem = NULL;
	dst->nsrc = dst->capsrc = 0;
}

/* ---- streaming with bounded residency ---- */

static void drop_view(const tpc_ckpt *ck, const tpc_tensor *t)
{
	if (t->nparts) {
		for (int k = 0; k < t->nparts; k++)
			drop_view(ck, &t->parts[k]);
		return;
	}
	if (t->flags & (TPC_TF_ZERO | TPC_TF_NODATA))
		return;
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	uint64_t lo, hi;
	if (!m)
		return;
	tpc_tensor_extent(t, &lo, &hi);
	if (hi > lo && hi != UINT64_MAX)
		tpc_map_drop(m, lo, hi - lo);
}

void tpc__drop_tensor(const tpc_ckpt *ck, const tpc_tensor *t)
{
	drop_view(ck, t);
}

/* Drop what rows [r0, r1) of t (along dim 0) read. */
static void drop_rows(const tpc_ckpt *ck, const tpc_tensor *t, int64_t r0, int64_t r1)
{
	tpc_tensor sub;
	if (t->ndim == 0 || r1 <= r0) {
		drop_view(ck, t);
		return;
	}
	if (tpc_tensor_narrow(&sub, t, 0, r0, r1 - r0))
		return;
	drop_view(ck, &sub);
	tpc_tensor_release(&sub);
}

typedef int (*sink_fn)(void *ctx, const uint8_t *p, size_t n);

/* Bytes of window that stream_tensor needs for t: the whole tensor when it
 * is smaller than WINDOW (every branch then reads it in one piece). */
static size_t stream_window(const tpc_tensor *t)
{
	uint64_t nb = t->numel * tpc_dtype_bits(t->src_dtype) / 8;
	uint64_t need = (nb > t->nbytes ? nb : t->nbytes) * 2; /* the cast branch halves it */
	return need && need < WINDOW ? (size_t)need : WINDOW;
}

/* Feed tensor t's C-order bytes to fn in windows of at most `cap` bytes
 * (buf's size, stream_window(t) or more), dropping the source pages behind
 * each window. */
static int stream_tensor(const tpc_ckpt *ck, const tpc_tensor *t, uint8_t *buf, size_t cap, sink_fn fn,
			 void *ctx, tpc_err *e)
{
	const tpc_map *m = tpc_ckpt_source(ck, t->src);
	uint64_t nb = t->numel * tpc_dtype_bits(t->src_dtype) / 8;
	unsigned es = tpc_dtype_size(t->src_dtype);
	int ret = 0;
	if (!nb || (t->flags & TPC_TF_NODATA))
		return 0;
	if (t->dtype != t->src_dtype) {
		/* a pending cast (remap stage): hash what the writer writes */
		unsigned os = tpc_dtype_size(t->dtype);
		uint64_t ob = t->nbytes, chunk = cap / 2 / os * os;
		uint64_t orow = t->ndim && t->shape[0] ? ob / (uint64_t)t->shape[0] : ob;
		for (uint64_t off = 0; off < ob && !ret; off += chunk) {
			uint64_t k = ob - off < chunk ? ob - off : chunk;
			ret = tpc_ckpt_read_out(ck, t, off, k, buf, e);
			if (!ret)
				ret = fn(ctx, buf, (size_t)k);
			if (orow)
				drop_rows(ck, t, (int64_t)(off / orow), (int64_t)((off + k + orow - 1) / orow));
		}
		return ret;
	}
	if (m && !t->nparts && !(t->flags & TPC_TF_ZERO) && tpc_tensor_is_contiguous(t) &&
	    !(t->flags & TPC_TF_BYTESWAP)) {
		/* a cache-sized piece at a time, read so as not to unmap what a
		 * writer beside this (merge's check) copies from: tpc_map_bytes */
		uint64_t piece = cap < (1u << 20) ? cap : (1u << 20);
		for (uint64_t off = 0; off < nb && !ret; off += piece) {
			uint64_t k = nb - off < piece ? nb - off : piece;
			const uint8_t *p = tpc_map_bytes(m, t->offset + off, k, buf);
			ret = fn(ctx, p, (size_t)k);
			tpc_map_bytes_done(m, p, t->offset + off, k);
		}
		return ret;
	}
	if (tpc_dtype_bits(t->src_dtype) < 8) {
		/* sub-byte types are contiguous views or zero fills: bytes at any offset */
		for (uint64_t off = 0; off < nb && !ret; off += cap) {
			uint64_t k = nb - off < cap ? nb - off : cap;
			if (!(ret = tpc_ckpt_read_bytes(ck, t, off, k, buf, e)))
				ret = fn(ctx, buf, (size_t)k);
		}
		return ret;
	}
	uint64_t row = t->ndim ? t->numel / (uint64_t)(t->shape[0] ? t->shape[0] : 1) * es : nb;
	uint64_t chunk = cap / es * es;
	for (uint64_t off = 0; off < nb && !ret; off += chunk) {
		uint64_t k = nb - off < chunk ? nb - off : chunk;
		ret = tpc_ckpt_read_bytes(ck, t, off, k, buf, e);
		if (!ret)
			ret = fn(ctx, buf, (size_t)k);
		if (row)
			drop_rows(ck, t, (int64_t)(off / row), (int64_t)((off + k + row - 1) / row));
	}
	return ret;
}

static int hash_sink(void *ctx, const uint8_t *p, size_t n)
{
	tpc_hash_update(ctx, p, n);
	return 0;
}

int tpc__hash_tensor(const tpc_ckpt *ck, const tpc_tensor *t, tpc_hash_alg alg, uint8_t out[TPC_HASH_MAX],
		     tpc_err *e)
{
	tpc_hash s;
	uint8_t *buf = NULL;
	size_t cap = stream_window(t), len = 0;
	int ret;
	if ((ret = tpc_hash_begin(&s, alg, e)))
		return ret;
	if (!(buf = tpc_scratch_get(cap, &len)))
		ret = tpc_err_nomem(e);
	else
		ret = stream_tensor(ck, t, buf, cap, hash_sink, &s, e);
	if (ret)
		tpc_hash_release(&s);
	else
		tpc_hash_final(&s, out);
	tpc_scratch_put(buf, len);
	return ret;
}

int tpc__tensors_equal(const tpc_ckpt *ck, const tpc_tensor *a, const tpc_tensor *b, bool *eq,
		       tpc_err *e)
{
	uint64_t na = a->numel * tpc_dtype_bits(a->src_dtype) / 8;
	uint64_t nb = b->numel * tpc_dtype_bits(b->src_dtype) / 8;
	unsigned es = tpc_dtype_size(a->src_dtype);
	uint8_t *x = NULL, *y = NULL;
	int ret = 0;
	*eq = false;
	if (na != nb || a->src_dtype != b->src_dtype || a->ndim != b->ndim)
		return 0;
	for (int d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d])
			return 0;
	size_t cap = na && na < WINDOW ? (size_t)na : WINDOW, len = 0;
	if (!(x = tpc_scratch_get(2 * cap, &len)))
		return tpc_err_nomem(e);
	y = x + cap;
	*eq = true;
	uint64_t chunk = es ? cap / es * es : cap;
	if (tpc_dtype_bits(a->src_dtype) < 8)
		chunk = na; /* contiguous by construction; small in practice */
	for (uint64_t off = 0; off < na && *eq && !ret; off += chunk) {
		uint64_t k = na - off < chunk ? na - off : chunk;
		if (k > cap) {
			ret = tpc_err_set(e, TPC_EINPUT, "internal: sub-byte tensor too large to compare");
			break;
		}
		if (!(ret = tpc_ckpt_read_bytes(ck, a, off, k, x, e)) &&
		    !(ret = tpc_ckpt_read_bytes(ck, b, off, k, y, e)))
			*eq = !memcmp(x, y, (size_t)k);
	}
	drop_view(ck, a);
	drop_view(ck, b);
	tpc_scratch_put(x, len);
	if (ret)
		*eq = false;
	return ret;
}

/* ---- RSS guard ----
 * The registry writers gather strided and composite tensors straight from the
 * input mapping; those pages would stay in this process's resident set until
 * the mapping is closed (a full pass over a 100 GB model would count 100 GB of
 * RSS, though it is all clean page cache). The writers drop what they read
 * as they go (tpc_ckpt_drop_pages, the gather's spans); as a safety net a
 * helper thread looks at the resident set every 10 ms and, when it has grown
 * past RSS_GUARD_BYTES, drops the resident pages of the input mappings, the
 * shared ones and each writer's own (views_open). A
 * page a gather is still reading is faulted back from the page cache (a
 * minor fault), so the result is unchanged and peak RSS stays bounded. It
 * does not drop unconditionally: a drop of all 4.7 GB every 10 ms cost a
 * page-table walk of the whole mapping each time, and a drop between the
 * moment a writer's batch is faulted in and the kernel's copy from it makes
 * the copy come up short (the kernel then writes the rest of the call in
 * smaller pieces). */
#define RSS_GUARD_BYTES (96u << 20)

typedef struct rss_guard {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, running;
	const tpc_map *maps;
	size_t nmaps;
	/* the rank checkpoints being written, each through mappings of its
	 * writer's own (views_open); NULL where none. Under mu. */
	const tpc_ckpt **live;
	int nlive;
} rss_guard;

/* This process's resident set in bytes (/proc/self/statm), or 0 when that
 * cannot be read (then the guard drops every period, as a bound). */
static uint64_t resident_bytes(int fd)
{
	char b[128];
	ssize_t n = fd >= 0 ? pread(fd, b, sizeof(b) - 1, 0) : -1;
	unsigned long long size, res;
	if (n <= 0)
		return 0;
	b[n] = 0;
	if (sscanf(b, "%llu %llu", &size, &res) != 2)
		return 0;
	long pg = sysconf(_SC_PAGESIZE);
	return (uint64_t)res * (uint64_t)(pg > 0 ? pg : 4096);
}

static void *guard_main(void *arg)
{
	rss_guard *g = arg;
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	pthread_mutex_lock(&g->mu);
	while (!g->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&g->cv, &g->mu, &ts);
		uint64_t rss = g->stop ? 0 : resident_bytes(fd);
		if (rss && rss < RSS_GUARD_BYTES)
			continue;
		for (size_t i = 0; i < g->nmaps && !g->stop; i++)
			tpc_map_drop(&g->maps[i], 0, g->maps[i].size);
		for (int r = 0; r < g->nlive && !g->stop; r++)
			for (size_t k = 0; g->live[r] && k < g->live[r]->nsrc; k++)
				tpc_map_drop(&g->live[r]->src[k], 0, g->live[r]->src[k].size);
	}
	pthread_mutex_unlock(&g->mu);
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void guard_start(rss_guard *g, const tpc_ckpt *ck)
{
	memset(g, 0, sizeof(*g));
	g->maps = ck->src;
	g->nmaps = ck->nsrc;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	if (!tpc_io_settings()->rss_guard)
		return;
	g->running = pthread_create(&g->th, NULL, guard_main, g) == 0;
}

void *tpc__rss_guard_start(const tpc_ckpt *ck)
{
	rss_guard *g = tpc_malloc(sizeof(*g));
	if (g)
		guard_start(g, ck);
	return g;
}

static void guard_stop(rss_guard *g);
void tpc__rss_guard_stop(void *g)
{
	if (g) {
		guard_stop(g);
		free(g);
	}
}

/* Rank r's checkpoint reads its input files through mappings of its own while
 * it is written (tpc_map_alias): a drop of this writer's batches then unmaps
 * nothing another writer's copy is reading. keep[] holds the shared
 * mappings, which views_close puts back. */
static void views_open(rss_guard *g, int r, tpc_ckpt *ck, const uint8_t **keep)
{
	pthread_mutex_lock(&g->mu);
	for (size_t k = 0; k < ck->nsrc; k++) {
		const uint8_t *a = ck->src_owned_mem && !ck->src_owned_mem[k] ? tpc_map_alias(&ck->src[k]) : NULL;
		keep[k] = a ? ck->src[k].data : NULL;
		if (a)
			ck->src[k].data = a;
	}
	if (r < g->nlive)
		g->live[r] = ck;
	pthread_mutex_unlock(&g->mu);
}

static void views_close(rss_guard *g, int r, tpc_ckpt *ck, const uint8_t **keep)
{
	pthread_mutex_lock(&g->mu);
	if (r < g->nlive)
		g->live[r] = NULL;
	for (size_t k = 0; k < ck->nsrc; k++)
		if (keep[k]) {
			tpc_map_alias_close(&ck->src[k], ck->src[k].data);
			ck->src[k].data = keep[k];
		}
	pthread_mutex_unlock(&g->mu);
}

static void guard_stop(rss_guard *g)
{
	if (g->running) {
		pthread_mutex_lock(&g->mu);
		g->stop = true;
		pthread_cond_signal(&g->cv);
		pthread_mutex_unlock(&g->mu);
		pthread_join(g->th, NULL);
	}
	for (size_t i = 0; i < g->nmaps; i++)
		tpc_map_drop(&g->maps[i], 0, g->maps[i].size);
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cv);
}

/* ---- rank descriptions ---- */

static void clear_storage(tpc_tensor *t)
{
	t->storage = -1;
	t->alias_of = -1;
	for (int k = 0; k < t->nparts; k++)
		clear_storage(&t->parts[k]);
}

int tpc__rank_tensor(const tpc_tensor *t, const tpc_split *s, int tp, int r, tpc_tensor *out)
{
	tpc_tensor pieces[2 * TPC_PLAN_MAX_PARTS];
	int np = 0, ret = 0;
	if (s->dim < 0) {
		ret = tpc_tensor_copy(out, t);
		if (!ret)
			clear_storage(out);
		return ret;
	}
	int d = s->dim;
	int64_t poff = 0;
	for (int k = 0; k < s->nparts && !ret; k++) {
		const tpc_split_part *p = &s->part[k];
		int64_t len = tpc_split_rank_len(s, k, tp), start = tpc_split_rank_start(s, k, tp, r);
		int64_t a = start < p->size ? start : p->size;
		int64_t b = start + len < p->size ? start + len : p->size;
		if (b > a || (len == 0 && k == 0)) {
			if (tpc_tensor_narrow(&pieces[np], t, d, poff + a, b - a))
				ret = -1;
			else
				np++;
		}
		if (!ret && start + len > b && b >= a) {
			int64_t z = start + len - (start > p->size ? start : p->size);
			int64_t shp[TPC_MAX_NDIM];
			memcpy(shp, t->shape, (size_t)t->ndim * sizeof(int64_t));
			shp[d] = z;
			if (z > 0) {
				if (tpc_tensor_init_zero(&pieces[np], t->src_dtype, t->ndim, shp)) {
					ret = -1;
				} else {
					pieces[np].dtype = t->dtype;
					/* nbytes follows the logical dtype, as in tpc_tensor_narrow */
					pieces[np].nbytes = pieces[np].numel * tpc_dtype_bits(t->dtype) / 8;
					np++;
				}
			}
		}
		poff += p->size;
	}
	if (!ret) {
		if (np == 1) {
			*out = pieces[0];
			np = 0;
		} else if (np == 0) {
			ret = -1;
		} else {
			ret = tpc_tensor_init_cat(out, pieces, np, d);
			if (!ret) {
				out->dtype = t->dtype;
				out->nbytes = out->numel * tpc_dtype_bits(t->dtype) / 8;
			}
		}
	}
	for (int i = 0; i < np; i++)
		tpc_tensor_release(&pieces[i]);
	if (!ret)
		clear_storage(out);
	return ret;
}

/* ---- the plan ---- */

int tpc__flat_root(tpc_ckpt *ck, tpc_err *e)
{
	tpc_value *d = tpc_value_new(TPC_V_DICT), *call = tpc_value_new(TPC_V_CALL);
	tpc_value *od = tpc_value_global("collections", "OrderedDict"), *args = tpc_value_new(TPC_V_TUPLE);
	int ret = 0;
	if (!d || !call || !od || !args || tpc_value_append(call, od) || tpc_value_append(call, args)) {
		if (!call) {
			tpc_value_unref(od);
			tpc_value_unref(args);
		}
		tpc_value_unref(call);
		tpc_value_unref(d);
		return tpc_err_nomem(e);
	}
	if (tpc_value_set_origin(d, call)) {
		tpc_value_unref(d);
		return tpc_err_nomem(e);
	}
	for (size_t i = 0; i < ck->n && !ret; i++)
		if (tpc_value_set(d, tpc_value_str(ck->t[i].name, strlen(ck->t[i].name)), tpc_value_tensor((int64_t)i)))
			ret = tpc_err_nomem(e);
	if (ret) {
		tpc_value_unref(d);
		return ret;
	}
	tpc_value_unref(ck->root);
	ck->root = d;
	return 0;
}

static bool matches_any(const tpc_plan_re *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (regexec(&v[i].re, name, 0, NULL, 0) == 0)
			return true;
	return false;
}

static int set_id_compute(tpc_shard_plan *sp, tpc_err *e)
{
	tpc_hash s;
	uint8_t h[TPC_HASH_MAX];
	char hx[2 * TPC_HASH_MAX + 1], line[512];
	int ret;
	/* SHA-256, as before libcrypto: sets written by older versions keep their id */
	if ((ret = tpc_hash_begin(&s, TPC_HASH_SHA256, e)))
		return ret;
	snprintf(line, sizeof(line), "tpconv-set 1\n%s\ntp %d pp %d %s %s\n", TPC_VERSION, sp->tp, sp->pp,
		 sp->layout->name, sp->format);
	tpc_hash_update(&s, line, strlen(line));
	if (sp->ep > 1) {
		/* sets without expert parallelism keep the id they always had */
		snprintf(line, sizeof(line), "ep %d %s %lld\n", sp->ep, tpc_ep_placement_name(sp->ep_placement),
			 (long long)sp->experts);
		tpc_hash_update(&s, line, strlen(line));
	}
	if (sp->plan->json)
		tpc_hash_update(&s, sp->plan->json, strlen(sp->plan->json));
	for (size_t i = 0; i < sp->n; i++) {
		const tpc_shard_entry *en = &sp->t[i];
		const tpc_tensor *t = &sp->in->t[en->in];
		tpc_hash_update(&s, t->name, strlen(t->name) + 1);
		snprintf(line, sizeof(line), "%s %d %d %d %d", tpc_dtype_name(t->dtype), t->ndim, en->split.kind,
			 en->split.dim, en->stage);
		tpc_hash_update(&s, line, strlen(line));
		for (int d = 0; d < t->ndim; d++)
			tpc_hash_update(&s, &t->shape[d], sizeof(t->shape[d]));
		for (int k = 0; k < en->split.nparts; k++)
			tpc_hash_update(&s, &en->split.part[k], sizeof(en->split.part[k]));
		if (en->split.ep > 1) {
			snprintf(line, sizeof(line), "expert %lld group %d", (long long)en->split.expert,
				 en->split.ep_group);
			tpc_hash_update(&s, line, strlen(line));
		}
		if (en->split.is_shape) {
			snprintf(line, sizeof(line), "shape %d %lld", en->split.shape_dim, (long long)en->split.shape_len);
			tpc_hash_update(&s, line, strlen(line));
		}
	}
	for (size_t i = 0; i < sp->in->nsrc; i++) {
		const tpc_map *m = &sp->in->src[i];
		struct stat st;
		int64_t v[3] = {(int64_t)m->size, 0, 0};
		if (m->fd >= 0 && fstat(m->fd, &st) == 0) {
			v[1] = (int64_t)st.st_mtim.tv_sec;
			v[2] = (int64_t)st.st_mtim.tv_nsec;
		}
		tpc_hash_update(&s, v, sizeof(v));
	}
	tpc_hash_final(&s, h);
	tpc_hex(h, 8, hx);
	memcpy(sp->set_id, hx, 16);
	sp->set_id[16] = '\0';
	return 0;
}

/* Is `name` part of a layer the plan splits: the plan splits "<module>.weight"
 * (a quantized weight's qweight/qzeros/scales/g_idx, an FP8 weight_scale_inv,
 * compressed-tensors' weight_packed/weight_scale sit beside it), or is it an
 * expert of a mixture of experts ("experts.N.", or the fused "experts." tensors
 * of Qwen3-MoE / gpt-oss)? Then replicating it whole would be wrong. */
static int check_fallback(const tpc_plan *plan, const char *name, tpc_err *e)
{
	const char *dot = strrchr(name, '.');
	char nm[256];
	if (dot && dot != name) {
		tpc_buf w = TPC_BUF_INIT;
		tpc_buf_add(&w, name, (size_t)(dot - name));
		tpc_buf_adds(&w, ".weight");
		int rule = w.p && strcmp(w.p, name) ? tpc_plan_match(plan, w.p) : -1;
		bool row_bias = false;
		if (rule >= 0 && plan->rules[rule].kind != TPC_SPLIT_REPLICATE &&
		    tpc_plan_rule_dim(plan, rule, 2, &row_bias) >= 0) {
			tpc_sanitize(nm, sizeof(nm), w.p);
			tpc_err_set(e, TPC_EINPUT,
				    "no rule of the plan says how to split this tensor, but the plan splits its layer ('%s', rule %d: %s); "
				    "replicating it would make a wrong set. Add a rule for it (quantized weights: split with their layer), or drop it with --rules",
				    nm, rule, tpc_split_kind_name(plan->rules[rule].kind));
			tpc_err_tensor(e, name);
			tpc_buf_release(&w);
			return TPC_EINPUT;
		}
		tpc_buf_release(&w);
	}
	const char *x = strstr(name, "experts.");
	if (x && (x == name || x[-1] == '.')) {
		tpc_err_set(e, TPC_EINPUT,
			    "an expert's weight that no rule of the plan places: a mixture-of-experts layer needs expert-parallel or per-expert tensor-parallel rules (the plan has none for it); replicating it would make a wrong set");
		tpc_err_tensor(e, name);
		return TPC_EINPUT;
	}
	return 0;
}

/* Expert parallelism: the geometry, the layout and the experts the checkpoint
 * and the config agree on; sets sp->experts. */
static int ep_check(tpc_shard_plan *sp, const tpc_ckpt *in, const tpc_plan *plan, const tpc_model_facts *f,
		    tpc_err *e)
{
	if (sp->tp % sp->ep)
		return tpc_err_set(e, TPC_EUSAGE,
				   "--ep %d does not divide --tp %d: the %d ranks of a stage form --ep groups of tp/ep ranks, each expert split over its group (moe_ep_size x moe_tp_size = tp, as TensorRT-LLM maps them)",
				   sp->ep, sp->tp, sp->tp);
	if (!sp->layout->expert_parallel)
		return tpc_err_set(e, TPC_EUSAGE,
				   "the %s layout does not hold expert-parallel sets (--ep); tpconv, hf and trtllm do",
				   sp->layout->name);
	if (!plan->nexperts)
		return tpc_err_set(e, TPC_EUSAGE,
				   "--ep needs a plan that names its routed experts (an \"experts\" pattern, as the mixtral and qwen2-moe presets have); plan '%s' has none",
				   plan->name ? plan->name : "(unnamed)");
	int64_t top = -1;
	size_t first = 0;
	for (size_t i = 0; i < in->n; i++) {
		int64_t x = tpc_plan_expert(plan, in->t[i].name);
		if (x > top) {
			top = x;
			first = i;
		}
	}
	if (top < 0)
		return tpc_err_set(e, TPC_EINPUT, "--ep %d: no tensor of the checkpoint matches the plan's expert patterns",
				   sp->ep);
	if (f->experts && top >= f->experts) {
		tpc_err_set(e, TPC_EINPUT,
			    "expert index %lld, but the model has %lld routed experts (config.json num_local_experts / num_experts / n_routed_experts)",
			    (long long)top, (long long)f->experts);
		tpc_err_tensor(e, in->t[first].name);
		return TPC_EINPUT;
	}
	sp->experts = f->experts ? f->experts : top + 1;
	if (sp->experts % sp->ep)
		return tpc_err_set(e, TPC_EINPUT,
				   "%lld routed experts do not divide over --ep %d groups (each group must own as many experts)",
				   (long long)sp->experts, sp->ep);
	return 0;
}

/* The bytes every rank holds for a tensor of its layer's shape (is_shape):
 * the input's two values, entry shape_dim replaced by the rank's length; a
 * memory source of sp->aux (*idx). */
static int shape_bytes(tpc_shard_plan *sp, const tpc_shard_entry *en, int *idx, tpc_err *e)
{
	const tpc_tensor *t = &sp->in->t[en->in];
	int64_t v[2];
	int ret = tpc__shape_read(sp->in, t, v, e);
	if (ret)
		return ret;
	v[en->split.shape_dim] = en->split.shape_len;
	return tpc__shape_add(&sp->aux, t, v, "a layer's shape per rank", idx, e);
}

/* The rank file format: the layout's default, or one it writes. */
static int choose_format(tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	const char *const *fl = sp->layout->formats;
	const char *f = o->format ? o->format : fl[0];
	size_t i = 0;
	while (fl[i] && strcmp(fl[i], f))
		i++;
	if (!fl[i]) {
		if (strcmp(f, "safetensors") && strcmp(f, "torch") && strcmp(f, "dcp"))
			return tpc_err_set(e, TPC_EUSAGE, "unknown rank file format '%s' (safetensors, torch or dcp)", f);
		return tpc_err_set(e, TPC_EUSAGE, "the %s layout writes %s files, not %s", sp->layout->name, fl[0], f);
	}
	sp->format = fl[i]; /* static */
	if (!tpc_format_by_name(sp->format) || (sp->layout->folders && !tpc_format_by_name("hf-index")))
		return tpc_err_set(e, TPC_EUSAGE, "the %s writer is not available in this build", sp->format);
	return 0;
}

int tpc_shard_plan_build(tpc_shard_plan *sp, const tpc_ckpt *in, const tpc_plan *plan,
			 const tpc_model_facts *facts, const tpc_shard_opts *o, tpc_err *e)
{
	int ret = 0;
	tpc_buf um = TPC_BUF_INIT;
	size_t numshown = 0;
	int *aux_src = NULL;
	memset(sp, 0, sizeof(*sp));
	tpc_ckpt_init(&sp->aux);
	sp->in = in;
	sp->plan = plan;
	sp->facts = *facts;
	sp->tp = o->tp;
	sp->pp = o->pp ? o->pp : 1;
	sp->layout = o->layout ? o->layout : tpc_layout_default();
	sp->checksum = o->checksum;
	sp->max_shard_size = o->max_shard_size;
	sp->ep = o->ep > 1 ? o->ep : 1;
	sp->ep_placement = o->ep_placement;
	if (sp->tp < 1 || sp->tp > TPC_MAX_TP)
		return tpc_err_set(e, TPC_EUSAGE, "--tp must be 1 to %d", TPC_MAX_TP);
	if (sp->pp < 1 || sp->pp > TPC_MAX_TP || (int64_t)sp->tp * sp->pp > TPC_MAX_RANKS)
		return tpc_err_set(e, TPC_EUSAGE, "--pp must be 1 to %d with tp * pp at most %d", TPC_MAX_TP,
				   TPC_MAX_RANKS);
	if (sp->layout->max_pp && sp->pp > sp->layout->max_pp)
		return tpc_err_set(e, TPC_EUSAGE, "the %s layout names ranks for --pp up to %d, not %d", sp->layout->name,
				   sp->layout->max_pp, sp->pp);
	if (sp->max_shard_size && !sp->layout->sized)
		return tpc_err_set(e, TPC_EUSAGE, "--max-shard-size does not go with the %s layout (one file per rank)",
				   sp->layout->name);
	if ((ret = choose_format(sp, o, e)))
		return ret;

	/* layers, for pipeline stages */
	sp->layers = 0;
	for (size_t i = 0; i < in->n; i++) {
		int64_t l = tpc_plan_layer(plan, in->t[i].name);
		if (l >= sp->layers)
			sp->layers = l + 1;
	}
	if (sp->pp > 1 && sp->layers < sp->pp)
		return tpc_err_set(e, TPC_EUSAGE,
				   "--pp %d needs at least %d layers, but the plan's layer patterns find %lld in the checkpoint",
				   sp->pp, sp->pp, (long long)sp->layers);

	if (sp->ep > 1 && (ret = ep_check(sp, in, plan, facts, e)))
		return ret;

	sp->t = tpc_calloc(in->n, sizeof(*sp->t));
	int nr = sp->tp * sp->pp;
	sp->rank = tpc_calloc((size_t)nr, sizeof(*sp->rank));
	sp->rank_file = tpc_calloc((size_t)nr, sizeof(*sp->rank_file));
	if (!sp->t || !sp->rank || !sp->rank_file) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	sp->n = in->n;
	for (size_t i = 0; i < in->n; i++) {
		tpc_shard_entry *en = &sp->t[i];
		const tpc_tensor *t = &in->t[i];
		en->in = (int64_t)i;
		/* an expert's tensor (with --ep) is split over its EP group's ranks */
		int64_t ex = sp->ep > 1 ? tpc_plan_expert(plan, t->name) : -1;
		int rtp = ex >= 0 ? sp->tp / sp->ep : sp->tp;
		ret = tpc_plan_resolve(plan, facts, t->name, t->ndim, t->shape, rtp, o->resolve_flags, &en->split,
				       &en->matched, e);
		if (!ret && !en->matched && facts && facts->quant.method) {
			/* a quantized layer's companion splits with its layer */
			int q = tpc__quant_split(plan, facts, in, t, rtp, o->resolve_flags, &en->split, e);
			if (q < 0)
				ret = q;
			else if (q > 0)
				en->matched = true;
		} else if (!ret && facts) {
			/* --pad: an FP8 block weight padded to whole blocks per rank */
			tpc__quant_pad_weight(facts, in, t, rtp, o->resolve_flags, &en->split);
		}
		if (ret)
			goto out;
		en->split.ep = ex >= 0 ? sp->ep : 0;
		en->split.ep_group = ex >= 0 ? tpc_ep_owner(sp->ep_placement, ex, sp->experts, sp->ep) : 0;
		en->split.expert = ex >= 0 ? ex : 0;
		int64_t l = tpc_plan_layer(plan, t->name);
		en->stage = tpc_plan_stage(plan, t->name, sp->pp, sp->layers);
		en->staged = l >= 0 || matches_any(plan->first, plan->nfirst, t->name) ||
			     matches_any(plan->last, plan->nlast, t->name);
		if (!en->staged)
			sp->nunstaged++;
		if (!en->matched) {
			sp->nunmatched++;
			if (numshown++ < 8) {
				char nm[256];
				tpc_sanitize(nm, sizeof(nm), t->name);
				tpc_buf_addf(&um, "%s'%s'", numshown > 1 ? ", " : "", nm);
			}
		}
	}
	/* Never silently wrong: a tensor only the fallback would place (whole on
	 * every rank) must not belong to a layer the plan splits, nor be an
	 * expert's weight. */
	for (size_t i = 0; i < sp->n && !ret; i++)
		if (!sp->t[i].matched && sp->t[i].split.dim < 0)
			ret = check_fallback(plan, in->t[sp->t[i].in].name, e);
	if (ret)
		goto out;
	if (o->strict && sp->nunmatched) {
		ret = tpc_err_set(e, TPC_EINPUT, "%zu tensor%s match%s no rule of the plan (--strict): %s%s",
				  sp->nunmatched, sp->nunmatched == 1 ? "" : "s", sp->nunmatched == 1 ? "es" : "",
				  um.p ? um.p : "", sp->nunmatched > 8 ? ", ..." : "");
		goto out;
	}
	if (sp->layout->check && (ret = sp->layout->check(sp, o, e)))
		goto out;
	/* the rewritten tensors' bytes (a layer's shape per rank), then the rank
	 * checkpoints over the input's sources and those */
	aux_src = tpc_calloc(sp->n ? sp->n : 1, sizeof(int));
	if (!aux_src) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t i = 0; i < sp->n && !ret; i++)
		if (sp->t[i].split.is_shape)
			ret = shape_bytes(sp, &sp->t[i], &aux_src[i], e);
	int base[2] = {0, 0};
	for (int r = 0; r < nr && !ret; r++) {
		const tpc_ckpt *srcs[2] = {in, &sp->aux};
		tpc_ckpt_init(&sp->rank[r]);
		ret = tpc__borrow_sources(&sp->rank[r], srcs, 2, base, e);
	}
	for (int r = 0; r < nr && !ret; r++)
		if (!(sp->rank_file[r] = sp->layout->rank_name(r % sp->tp, r / sp->tp, sp->tp, sp->pp, sp->format)))
			ret = tpc_err_nomem(e);
	if (ret)
		goto out;
	for (size_t i = 0; i < sp->n; i++) {
		tpc_shard_entry *en = &sp->t[i];
		const tpc_tensor *t = &in->t[en->in];
		en->rank_ix = tpc_calloc((size_t)sp->tp, sizeof(*en->rank_ix));
		en->same_as = tpc_calloc((size_t)sp->tp, sizeof(*en->same_as));
		if (!en->rank_ix || !en->same_as) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		for (int r = 0; r < sp->tp; r++) {
			tpc_tensor desc;
			if (!tpc_split_holds(&en->split, sp->tp, r)) {
				en->rank_ix[r] = -1;
				en->same_as[r] = -1;
				continue;
			}
			if (tpc__rank_tensor(t, &en->split, sp->tp, r, &desc)) {
				ret = tpc_err_set(e, TPC_EINPUT, "cannot slice this tensor for rank %d (sub-byte dtype %s?)", r,
						  tpc_dtype_name(t->src_dtype));
				tpc_err_tensor(e, t->name);
				goto out;
			}
			if (en->split.is_shape) { /* the rank's own shape, from aux */
				desc.src = base[1] + aux_src[i];
				desc.offset = 0;
				desc.flags &= ~(uint32_t)TPC_TF_BYTESWAP;
				tpc_tensor_set_contiguous(&desc);
			}
			int64_t ix = tpc_ckpt_add_copy(&sp->rank[en->stage * sp->tp + r], t->name, &desc, e);
			tpc_tensor_release(&desc);
			if (ix < 0) {
				ret = (int)ix;
				goto out;
			}
			en->rank_ix[r] = ix;
			/* which lower rank holds the same bytes: a part that is split
			 * gives every rank its own rows; parts of replicated heads are
			 * shared by the R ranks of a group, so the lowest rank with the
			 * same head in every part is the largest group start */
			int lr = tpc_split_local(&en->split, sp->tp, r), q = 0;
			for (int k = 0; k < en->split.nparts && q <= lr; k++) {
				const tpc_split_part *pt = &en->split.part[k];
				int rep = pt->replicas > 1 ? pt->replicas : 1;
				if (rep == 1 && tpc_split_rank_len(&en->split, k, sp->tp) > 0)
					q = lr;
				else if (lr / rep * rep > q)
					q = lr / rep * rep;
			}
			en->same_as[r] = r - lr + q;
		}
	}
	if ((ret = set_id_compute(sp, e)))
		goto out;
	for (int r = 0; r < nr; r++) {
		char v[32];
		tpc_ckpt *rk = &sp->rank[r];
		/* torch rank files: the state dict torch.save would write */
		if (!strcmp(sp->format, "torch") && (ret = tpc__flat_root(rk, e)))
			goto out;
		if ((ret = tpc_ckpt_meta_set(rk, "format", "pt", e)) ||
		    (ret = tpc_ckpt_meta_set(rk, "tpconv.set_id", sp->set_id, e)))
			goto out;
		snprintf(v, sizeof(v), "%d", r);
		if ((ret = tpc_ckpt_meta_set(rk, "tpconv.rank", v, e)))
			goto out;
		snprintf(v, sizeof(v), "%d", r % sp->tp);
		if ((ret = tpc_ckpt_meta_set(rk, "tpconv.tp_rank", v, e)))
			goto out;
		snprintf(v, sizeof(v), "%d", r / sp->tp);
		if ((ret = tpc_ckpt_meta_set(rk, "tpconv.pp_rank", v, e)))
			goto out;
		snprintf(v, sizeof(v), "%d", sp->tp);
		if ((ret = tpc_ckpt_meta_set(rk, "tpconv.tp", v, e)))
			goto out;
		snprintf(v, sizeof(v), "%d", sp->pp);
		if ((ret = tpc_ckpt_meta_set(rk, "tpconv.pp", v, e)))
			goto out;
		if (sp->ep > 1) {
			snprintf(v, sizeof(v), "%d", sp->ep);
			if ((ret = tpc_ckpt_meta_set(rk, "tpconv.ep", v, e)))
				goto out;
			snprintf(v, sizeof(v), "%d", r % sp->tp / (sp->tp / sp->ep));
			if ((ret = tpc_ckpt_meta_set(rk, "tpconv.ep_rank", v, e)))
				goto out;
		}
	}
	/* the ranks as the layout stores them */
	if (sp->layout->stored_rank) {
		if (!(sp->stored = tpc_calloc((size_t)nr, sizeof(*sp->stored)))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		for (int r = 0; r < nr; r++)
			tpc_ckpt_init(&sp->stored[r]);
		for (int r = 0; r < nr && !ret; r++) {
			const tpc_ckpt *srcs[2] = {in, &sp->aux};
			if (!(ret = tpc__borrow_sources(&sp->stored[r], srcs, 2, NULL, e)))
				ret = sp->layout->stored_rank(sp, r, &sp->stored[r], e);
		}
		if (ret)
			goto out;
	}
out:
	free(aux_src);
	tpc_buf_release(&um);
	if (ret)
		tpc_shard_plan_release(sp);
	return ret;
}

void tpc_shard_plan_release(tpc_shard_plan *sp)
{
	if (!sp)
		return;
	for (size_t i = 0; i < sp->n; i++) {
		free(sp->t[i].rank_ix);
		free(sp->t[i].same_as);
		free(sp->t[i].rank_hash);
	}
	free(sp->t);
	int nr = sp->tp * sp->pp;
	for (int r = 0; sp->rank && r < nr; r++) {
		tpc__return_sources(&sp->rank[r]);
		tpc_ckpt_release(&sp->rank[r]);
	}
	free(sp->rank);
	for (int r = 0; sp->stored && r < nr; r++) {
		tpc__return_sources(&sp->stored[r]);
		tpc_ckpt_release(&sp->stored[r]);
	}
	free(sp->stored);
	for (int r = 0; sp->rank_file && r < nr; r++)
		free(sp->rank_file[r]);
	free(sp->rank_file);
	tpc_ckpt_release(&sp->aux);
	memset(sp, 0, sizeof(*sp));
}

/* ---- --dry-run ---- */

static void shape_into(tpc_buf *b, int ndim, const int64_t *shape)
{
	tpc_buf_addc(b, '[');
	for (int d = 0; d < ndim; d++)
		tpc_buf_addf(b, d ? ", %lld" : "%lld", (long long)shape[d]);
	tpc_buf_addc(b, ']');
}

static void notes_into(tpc_buf *b, const tpc_split *s)
{
	bool any = false;
#define NOTE(...)                                   \
	do {                                        \
		tpc_buf_adds(b, any ? "; " : "");   \
		tpc_buf_addf(b, __VA_ARGS__);       \
		any = true;                         \
	} while (0)
	if (s->row_bias)
		NOTE("row-parallel bias: add once after the reduce");
	if (s->scalar)
		NOTE("0-dim");
	if (s->dim < 0)
		return;
	if (s->nparts > 1) {
		/* parts 64(q8)|32(kv4x2)|32(kv4x2); 125+3pad */
		tpc_buf_adds(b, any ? "; parts " : "parts ");
		for (int k = 0; k < s->nparts; k++) {
			const tpc_split_part *p = &s->part[k];
			tpc_buf_addf(b, "%s%lld", k ? "|" : "", (long long)p->size);
			if (p->pad)
				tpc_buf_addf(b, "+%lldpad", (long long)p->pad);
			if (p->heads)
				tpc_buf_addf(b, "(%s%lld", p->head_kind == TPC_HEADS_KV ? "kv" : "q", (long long)p->heads);
			if (p->heads && p->replicas > 1)
				tpc_buf_addf(b, "x%d", p->replicas);
			if (p->heads)
				tpc_buf_addc(b, ')');
		}
		return;
	}
	const tpc_split_part *p = &s->part[0];
	if (p->heads && p->replicas > 1)
		NOTE("%lld %s heads, each on %d ranks", (long long)p->heads, p->head_kind == TPC_HEADS_KV ? "kv" : "q",
		     p->replicas);
	else if (p->heads)
		NOTE("%lld %s heads", (long long)p->heads, p->head_kind == TPC_HEADS_KV ? "kv" : "q");
	if (p->pad)
		NOTE("pad %lld", (long long)p->pad);
#undef NOTE
}

static uint64_t rank_bytes(const tpc_shard_plan *sp, int r)
{
	uint64_t bytes = 0;
	for (size_t i = 0; i < sp->rank[r].n; i++)
		bytes += sp->rank[r].t[i].nbytes;
	return bytes;
}

void tpc_shard_describe(const tpc_shard_plan *sp, tpc_buf *out, bool unicode)
{
	const tpc_model_facts *f = &sp->facts;
	int nr = sp->tp * sp->pp;
	int w = 4;
	tpc_buf_addf(out, "# plan '%s': tp %d, pp %d, layout %s, format %s, %zu tensors, %d rank %s\n",
		     sp->plan->name ? sp->plan->name : "(unnamed)", sp->tp, sp->pp, sp->layout->name,
		     sp->format, sp->n, nr, sp->layout->folders ? "folders" : "files");
	tpc_buf_adds(out, "# model:");
	if (!f->heads && !f->kv_heads && !f->head_dim && !f->hidden && !f->vocab)
		tpc_buf_adds(out, " no facts");
	if (f->heads)
		tpc_buf_addf(out, " heads %lld", (long long)f->heads);
	if (f->kv_heads)
		tpc_buf_addf(out, " kv_heads %lld", (long long)f->kv_heads);
	if (f->head_dim)
		tpc_buf_addf(out, " head_dim %lld", (long long)f->head_dim);
	if (f->hidden)
		tpc_buf_addf(out, " hidden %lld", (long long)f->hidden);
	if (f->vocab)
		tpc_buf_addf(out, " vocab %lld", (long long)f->vocab);
	if (sp->pp > 1)
		tpc_buf_addf(out, " layers %lld", (long long)sp->layers);
	tpc_buf_addc(out, '\n');
	if (sp->ep > 1) {
		int g = sp->tp / sp->ep;
		int64_t per = sp->experts / sp->ep;
		tpc_buf_addf(out,
			     "# experts: %lld routed per layer over ep %d groups of %d rank%s (moe_ep_size %d x moe_tp_size %d), %s",
			     (long long)sp->experts, sp->ep, g, g == 1 ? "" : "s", sp->ep, g,
			     tpc_ep_placement_name(sp->ep_placement));
		for (int k = 0; k < sp->ep; k++) {
			tpc_buf_addf(out, "%s group %d (ranks %d..%d): ", k ? ";" : ":", k, k * g, k * g + g - 1);
			if (sp->ep_placement == TPC_EP_ROUND_ROBIN)
				tpc_buf_addf(out, "experts %d, %d, ... (every %d%s)", k, k + sp->ep, sp->ep,
					     sp->ep == 2 ? "nd" : sp->ep == 3 ? "rd" : "th");
			else
				tpc_buf_addf(out, "experts %lld..%lld", (long long)(k * per), (long long)(k * per + per - 1));
		}
		tpc_buf_addc(out, '\n');
	}
	for (size_t i = 0; i < sp->n; i++) {
		int l = (int)strlen(sp->in->t[sp->t[i].in].name);
		if (l > w)
			w = l < 72 ? l : 72;
	}
	tpc_buf_addf(out, "%-*s  %-6s %-16s %-11s %-16s%s notes\n", w, "name", "dtype", "shape", "split",
		     "rank shape", sp->pp > 1 ? " stage" : "");
	for (size_t i = 0; i < sp->n; i++) {
		const tpc_shard_entry *en = &sp->t[i];
		const tpc_tensor *t = &sp->in->t[en->in];
		int r0 = tpc_split_first_rank(&en->split, sp->tp);
		const tpc_tensor *rt = &sp->rank[en->stage * sp->tp + r0].t[en->rank_ix[r0]];
		char nm[1024], split[32];
		tpc_buf sb = TPC_BUF_INIT, rb = TPC_BUF_INIT, nb = TPC_BUF_INIT;
		tpc_sanitize(nm, sizeof(nm), t->name);
		shape_into(&sb, t->ndim, t->shape);
		shape_into(&rb, rt->ndim, rt->shape);
		notes_into(&nb, &en->split);
		if (en->split.ep > 1)
			tpc_buf_addf(&nb, "%sexpert %lld: ep group %d", nb.len ? "; " : "", (long long)en->split.expert,
				     en->split.ep_group);
		if (en->split.is_shape)
			tpc_buf_addf(&nb, "%sthe layer's shape: each rank holds its slice's (%s %lld)", nb.len ? "; " : "",
				     en->split.shape_dim ? "in" : "out", (long long)en->split.shape_len);
		if (!en->matched)
			tpc_buf_addf(&nb, "%sno rule matched", nb.len ? "; " : "");
		if (en->split.dim >= 0)
			snprintf(split, sizeof(split), "%s:%d", tpc_split_kind_name(en->split.kind), en->split.dim);
		else
			snprintf(split, sizeof(split), "replicate");
		tpc_buf line = TPC_BUF_INIT;
		tpc_buf_addf(&line, "%-*s  %-6s %-16s %-11s %-16s", w, nm, tpc_dtype_name(t->dtype), sb.p ? sb.p : "",
			     split, rb.p ? rb.p : "");
		if (sp->pp > 1)
			tpc_buf_addf(&line, " %5d", en->stage);
		tpc_buf_addf(&line, " %s", nb.p ? nb.p : "");
		while (line.len && line.p[line.len - 1] == ' ')
			line.p[--line.len] = '\0';
		tpc_buf_add(out, line.p ? line.p : "", line.len);
		tpc_buf_addc(out, '\n');
		tpc_buf_release(&line);
		tpc_buf_release(&sb);
		tpc_buf_release(&rb);
		tpc_buf_release(&nb);
	}
	uint64_t most = 0, least = UINT64_MAX;
	int fw = 0;
	for (int r = 0; r < nr; r++) {
		uint64_t bytes = rank_bytes(sp, r);
		most = bytes > most ? bytes : most;
		least = bytes < least ? bytes : least;
		int l = (int)strlen(sp->rank_file[r]);
		fw = l > fw ? (l < 48 ? l : 48) : fw;
	}
	for (int r = 0; r < nr; r++) {
		uint64_t bytes = rank_bytes(sp, r);
		char sz[32];
		tpc_buf_addf(out, "# rank %d (tp %d, pp %d): %-*s %5zu tensors %12llu bytes %9s  ", r, r % sp->tp, r / sp->tp,
			     fw + 1, sp->rank_file[r], sp->rank[r].n, (unsigned long long)bytes,
			     tpc_fmt_size(bytes, sz, sizeof(sz)));
		tpc_buf_bar(out, bytes, most, 24, unicode);
		while (out->len && out->p[out->len - 1] == ' ')
			out->p[--out->len] = '\0';
		tpc_buf_addc(out, '\n');
	}
	if (nr > 1)
		tpc_buf_addf(out, "# balance: largest rank %.3fx the smallest%s\n",
			     least ? (double)most / (double)least : 0.0,
			     least && most > least + least / 10 ? " (pipeline stages or replicated tensors weigh unevenly)" : "");
	size_t nrep = 0;
	for (size_t i = 0; i < sp->n; i++)
		nrep += sp->t[i].split.dim < 0;
	tpc_buf_addf(out, "# replicated (whole on every rank of its stage): %zu tensor%s\n", nrep, nrep == 1 ? "" : "s");
	for (size_t i = 0; i < sp->n; i++) {
		const tpc_split *x = &sp->t[i].split;
		char nm[1024], why[96];
		if (x->dim >= 0)
			continue;
		tpc_sanitize(nm, sizeof(nm), sp->in->t[sp->t[i].in].name);
		if (!sp->t[i].matched)
			snprintf(why, sizeof(why), "no rule: the fallback");
		else if (x->scalar)
			snprintf(why, sizeof(why), "rule %d; a 0-d tensor", x->rule);
		else if (x->row_bias)
			snprintf(why, sizeof(why), "rule %d: bias of a row-parallel layer, added once", x->rule);
		else
			snprintf(why, sizeof(why), "rule %d (%s)", x->rule,
				 x->rule >= 0 && (size_t)x->rule < sp->plan->nrules ? tpc_split_kind_name(sp->plan->rules[x->rule].kind) : "?");
		tpc_buf_addf(out, "#   %s  %s\n", nm, why);
	}
	tpc_buf_addf(out, "# unmatched: %zu tensor%s (%s)\n", sp->nunmatched, sp->nunmatched == 1 ? "" : "s",
		     sp->plan->fallback_error ? "error" : "replicated by the fallback");
	for (size_t i = 0; i < sp->n; i++)
		if (!sp->t[i].matched) {
			char nm[1024];
			tpc_sanitize(nm, sizeof(nm), sp->in->t[sp->t[i].in].name);
			tpc_buf_addf(out, "#   %s\n", nm);
		}
	if (sp->pp > 1 && sp->nunstaged) {
		tpc_buf_addf(out, "# unstaged (no layer, first_stage or last_stage pattern; on stage 0): %zu\n",
			     sp->nunstaged);
		for (size_t i = 0; i < sp->n; i++)
			if (!sp->t[i].staged) {
				char nm[1024];
				tpc_sanitize(nm, sizeof(nm), sp->in->t[sp->t[i].in].name);
				tpc_buf_addf(out, "#   %s\n", nm);
			}
	}
}

/* ---- writing ---- */

bool tpc_shard_path_inside(const char *out, const char *in_dir)
{
	char a[PATH_MAX], b[PATH_MAX];
	char *cur = tpc_strdup(out);
	tpc_buf tail = TPC_BUF_INIT, full = TPC_BUF_INIT;
	bool r = false;
	if (!cur || !realpath(in_dir, b))
		goto out;
	/* `out` may not exist yet: resolve its nearest existing ancestor and
	 * append the rest */
	for (;;) {
		if (realpath(cur, a)) {
			tpc_buf_adds(&full, strcmp(a, "/") ? a : "");
			break;
		}
		char *s = strrchr(cur, '/');
		tpc_buf t2 = TPC_BUF_INIT;
		tpc_buf_addc(&t2, '/');
		tpc_buf_adds(&t2, s ? s + 1 : cur);
		tpc_buf_add(&t2, tail.p ? tail.p : "", tail.len);
		tpc_buf_release(&tail);
		tail = t2;
		if (!s) {
			if (!getcwd(a, sizeof(a)))
				goto out;
			tpc_buf_adds(&full, strcmp(a, "/") ? a : "");
			break;
		}
		if (s == cur) {
			break; /* the root: full stays "" */
		}
		*s = '\0';
	}
	tpc_buf_add(&full, tail.p ? tail.p : "", tail.len);
	if (full.oom)
		goto out;
	{
		const char *f = full.len ? full.p : "/";
		size_t lb = strlen(b);
		r = !strcmp(b, "/") || (!strncmp(f, b, lb) && (f[lb] == '\0' || f[lb] == '/'));
	}
out:
	free(cur);
	tpc_buf_release(&tail);
	tpc_buf_release(&full);
	return r;
}

/* Does the existing rank file at `path` belong to this set? Safetensors files
 * say so in their metadata; for files without metadata (torch) the tensor names
 * and shapes must be the plan's; a layout whose rank files cannot be read
 * alone (dcp) decides itself. */
static int rank_file_ok(const tpc_shard_plan *sp, int r, const char *path, bool *ok, tpc_err *e)
{
	tpc_ckpt ck;
	tpc_err e2;
	*ok = false;
	if (sp->layout->rank_file_ok)
		return sp->layout->rank_file_ok(sp, r, path, ok, e);
	tpc_ckpt_init(&ck);
	tpc_err_init(&e2);
	if (tpc_ckpt_open(&ck, path, NULL, &e2)) {
		tpc_ckpt_release(&ck);
		return 0;
	}
	const char *id = tpc_ckpt_meta_get(&ck, "tpconv.set_id");
	if (id) {
		*ok = !strcmp(id, sp->set_id);
	} else {
		const tpc_ckpt *want = sp->stored ? &sp->stored[r] : &sp->rank[r];
		*ok = ck.n == want->n;
		for (size_t i = 0; *ok && i < want->n; i++) {
			int64_t j = tpc_ckpt_find(&ck, want->t[i].name);
			*ok = j >= 0 && ck.t[j].ndim == want->t[i].ndim && ck.t[j].dtype == want->t[i].dtype &&
			      !memcmp(ck.t[j].shape, want->t[i].shape, (size_t)want->t[i].ndim * sizeof(int64_t));
		}
	}
	tpc_ckpt_release(&ck);
	(void)e;
	return 0;
}

/* Does the existing rank file (or folder) at `path` hold exactly what this
 * plan writes for rank r: this set's file (rank_file_ok), the same tensors,
 * each byte-equal (compared by hash, streaming both)? */
static int rank_file_same(const tpc_shard_plan *sp, int r, const char *path, bool *same, tpc_err *e)
{
	const tpc_ckpt *want = sp->stored ? &sp->stored[r] : &sp->rank[r];
	tpc_ckpt ck;
	tpc_err e2;
	int ret;
	*same = false;
	if ((ret = rank_file_ok(sp, r, path, same, e)) || !*same)
		return ret;
	*same = false;
	tpc_ckpt_init(&ck);
	tpc_err_init(&e2);
	if (tpc_ckpt_open(&ck, path, NULL, &e2) || ck.n != want->n)
		goto out; /* unreadable or another shape of set: replaced */
	*same = true;
	for (size_t i = 0; *same && i < want->n; i++) {
		const tpc_tensor *a = &want->t[i];
		int64_t j = tpc_ckpt_find(&ck, a->name);
		uint8_t ha[TPC_HASH_MAX], hb[TPC_HASH_MAX];
		*same = j >= 0 && ck.t[j].dtype == a->dtype && ck.t[j].ndim == a->ndim &&
			!memcmp(ck.t[j].shape, a->shape, (size_t)a->ndim * sizeof(int64_t));
		if (*same && (tpc_ckpt_hash_tensor(want, a, TPC_HASH_XXH3_128, ha, &e2) ||
			      tpc_ckpt_hash_tensor(&ck, &ck.t[j], TPC_HASH_XXH3_128, hb, &e2) ||
			      memcmp(ha, hb, tpc_hash_len(TPC_HASH_XXH3_128))))
			*same = false;
	}
out:
	tpc_ckpt_release(&ck);
	return 0;
}

/* ---- tpc_shard_write, step by step ---- */

/* What one write run holds between its steps. */
typedef struct shard_run {
	const char *dir;
	char *manifest;      /* dir/tpconv-manifest.json */
	char **paths;        /* [nr] rank file or folder paths */
	int *todo, ntodo;    /* ranks this run writes */
	bool *done;          /* [nr] written by this run (taken back on failure) */
	bool *redo;          /* [nr] an existing file this run replaces (not this set's, or not whole) */
	bool resumed;        /* rank files of an interrupted run were there: its companions may be too */
	bool hashed;         /* the checksums were taken beside the writers (hash_beside) */
	bool made_dir;       /* this run created the output folder (removed again, if empty, on failure) */
	int lockfd;
} shard_run;

/* The manifest's checksums are of the input's bytes (each rank slice as the
 * plan cuts it), not of the written files, so when this run writes every
 * rank they are taken on a thread of their own while the writers copy: the
 * hashing reads with pread into a small buffer and the kernel's copies keep
 * the other core busy. A run that writes some ranks of a set (--rank) hashes
 * after the set is complete, as before. A reshard's check of its input set
 * rides on the same pass (input_check): the rank tensors the pass reads
 * whole are hashed as they are read, the rest after it. (Run beside the
 * writers as a pass of its own it measured 0.3 s slower and 1.5 s more system
 * time for tp 2 -> 4 of the 4.74 GB model than before them.) */
typedef struct hash_beside {
	pthread_t th;
	tpc_shard_plan *sp;
	tpc_err e;
	int ret;
	bool running;
} hash_beside;

static void *hash_beside_main(void *arg)
{
	hash_beside *h = arg;
	h->ret = tpc__shard_hash_all(h->sp, &h->e);
	return NULL;
}

/* Does this run hash the set (it writes every rank and the manifest)? */
static bool hashes_set(const shard_run *w, const tpc_shard_plan *sp, const tpc_shard_opts *o)
{
	return sp->checksum != TPC_HASH_NONE && !o->defer_manifest && w->ntodo == sp->tp * sp->pp;
}

static void hash_beside_start(hash_beside *h, shard_run *w, tpc_shard_plan *sp, const tpc_shard_opts *o)
{
	memset(h, 0, sizeof(*h));
	h->sp = sp;
	tpc_err_init(&h->e);
	if (!hashes_set(w, sp, o))
		return;
	h->running = pthread_create(&h->th, NULL, hash_beside_main, h) == 0;
}

/* A reshard's input checksums: checked in the hashing pass's reads when this
 * run hashes the set (tpc__shard_hash_all, before the manifest), else now,
 * before anything is written. */
static int input_check(shard_run *w, tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	sp->input_check = NULL;
	if (!o->input_check)
		return 0;
	if (hashes_set(w, sp, o)) {
		sp->input_check = o->input_check;
		return 0;
	}
	return tpc__merge_check_run(o->input_check, true, e);
}

/* Join the hashing thread; its error when the writers succeeded. */
static int hash_beside_join(hash_beside *h, shard_run *w, int ret, tpc_err *e)
{
	if (!h->running)
		return ret;
	pthread_join(h->th, NULL);
	h->running = false;
	if (!ret && h->ret) {
		*e = h->e;
		return h->ret;
	}
	w->hashed = !ret && !h->ret;
	return ret;
}

/* Step 1: the output folder exists, is no input, and is locked shared; an old
 * manifest is refused or (--force) removed, so the set reads as incomplete
 * until this run's manifest exists.
 *
 * Two runs writing one folder must never leave a manifest over a mixed set.
 * Writers hold a shared flock on the folder while they check and write rank
 * files (runs writing different --rank parts of one set go together); the
 * completeness check and the manifest happen under the exclusive lock, so no
 * rank file changes in between, and a run that starts later sees the manifest
 * (and, with --force, removes it first). */
static int open_output(shard_run *w, const tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	const char *dir = w->dir;
	int ret;
	if (sp->in->path && tpc_is_dir(sp->in->path) && tpc_shard_path_inside(dir, sp->in->path)) {
		tpc_err_set(e, TPC_EUSAGE, "the output folder is the input folder or inside it; choose another");
		tpc_err_path(e, dir);
		return TPC_EUSAGE;
	}
	if (tpc_exists(dir) && !tpc_is_dir(dir)) {
		tpc_err_set(e, TPC_EUSAGE, "output exists and is not a folder");
		tpc_err_path(e, dir);
		return TPC_EUSAGE;
	}
	w->made_dir = !tpc_exists(dir);
	if ((ret = tpc_mkdirs(dir, e)))
		return ret;
	w->lockfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->lockfd < 0 || flock(w->lockfd, LOCK_SH) != 0) {
		tpc_err_sys(e, TPC_EIO, errno, "cannot lock the output folder");
		tpc_err_path(e, dir);
		return TPC_EIO;
	}
	if (!(w->manifest = tpc_path_join(dir, TPC_MANIFEST_NAME)))
		return tpc_err_nomem(e);
	if (!tpc_exists(w->manifest))
		return 0;
	if (!o->force) {
		tpc_err_set(e, TPC_EUSAGE, "output folder already holds a complete shard set; use --force to replace it");
		tpc_err_path(e, w->manifest);
		return TPC_EUSAGE;
	}
	if (unlink(w->manifest) != 0 && errno != ENOENT) { /* a run beside this one removed it first */
		tpc_err_sys(e, TPC_EIO, errno, "cannot remove the old manifest");
		tpc_err_path(e, w->manifest);
		return TPC_EIO;
	}
	return 0;
}

/* Step 2: every rank's path; the ranks this run writes must not exist
 * (unless --force), the others, where present, must belong to this set. */
static int plan_ranks(shard_run *w, tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	int nr = sp->tp * sp->pp, ret;
	w->paths = tpc_calloc((size_t)nr, sizeof(*w->paths));
	w->todo = tpc_calloc((size_t)nr, sizeof(*w->todo));
	w->done = tpc_calloc((size_t)nr, sizeof(*w->done));
	w->redo = tpc_calloc((size_t)nr, sizeof(*w->redo));
	if (!w->paths || !w->todo || !w->done || !w->redo)
		return tpc_err_nomem(e);
	for (int r = 0; r < nr; r++) {
		if (!(w->paths[r] = tpc_path_join(w->dir, sp->rank_file[r])))
			return tpc_err_nomem(e);
		bool exists = tpc_layout_rank_exists(sp->layout, w->paths[r]);
		if (!o->write_rank || o->write_rank[r]) {
			if (exists && !o->force) {
				/* an interrupted run's file (no manifest yet: open_output
				 * refused a complete set): kept when it holds exactly what
				 * this plan writes, else replaced */
				bool same;
				w->resumed = true;
				if ((ret = rank_file_same(sp, r, w->paths[r], &same, e)))
					return ret;
				if (same) {
					sp->nkept++;
					continue;
				}
				w->redo[r] = true;
			}
			w->todo[w->ntodo++] = r;
		} else if (exists && !o->defer_manifest) { /* deferred: the completing run checks */
			bool ok;
			if ((ret = rank_file_ok(sp, r, w->paths[r], &ok, e)))
				return ret;
			if (!ok) {
				tpc_err_set(e, TPC_EINPUT,
					    "rank %d's file belongs to another shard set (not set %s); remove it or write it with --rank %d --force",
					    r, sp->set_id, r);
				tpc_err_path(e, w->paths[r]);
				return TPC_EINPUT;
			}
		}
	}
	return 0;
}

/* One rank as the layout stores it: its own writer, an HF folder, or one file. */
static int write_one_rank(const tpc_shard_plan *sp, int r, const char *path, const tpc_write_opts *wo,
			  rss_guard *g, tpc_err *e)
{
	tpc_ckpt *ck = sp->stored ? &sp->stored[r] : &sp->rank[r];
	const tpc_format *f = NULL;
	if (!sp->layout->write_rank &&
	    !(f = tpc_format_by_name(sp->layout->folders ? "hf-index" : sp->format)))
		return tpc_err_set(e, TPC_EUSAGE, "the %s writer is not available in this build", sp->format);
	const uint8_t **keep = tpc_calloc(ck->nsrc ? ck->nsrc : 1, sizeof(*keep));
	if (!keep)
		return tpc_err_nomem(e);
	views_open(g, r, ck, keep);
	int ret = f ? f->write(ck, NULL, 0, path, wo, e) : sp->layout->write_rank(sp, r, ck, path, wo, e);
	views_close(g, r, ck, keep);
	free(keep);
	return ret;
}

/* Ranks written in step by one thread (tpc_format.write_many): a row-parallel
 * weight's slices are then read once per group, not once per rank (at tp 8
 * on 2 threads the writers read 15.5 GB of the 4.74 GB model for 4.7 GB
 * written, rank by rank: each rank's slice of a row is an eighth of the row,
 * and the window holding it is the whole row). Each output in a group holds
 * its staging buffers (lib/tpc_io.c), so a group is at most JOINT_GROUP
 * ranks. tpc_io_config.joint off (TPCONV_JOINT=0) writes rank by rank. */
#define JOINT_GROUP 4

static bool joint_on(void)
{
	return tpc_io_settings()->joint;
}

/* Do ranks todo[i0, i0 + n) hold some tensor whose slices are read jointly
 * (the same name at the same place in each, tpc_ckpt_joint_ok)? Without
 * one, writing in step only interleaves the files: a reshard's row-parallel
 * slices come from several rank files, and tp 4 -> 8 in step measured 0.9 s
 * more system time than rank by rank (0.3 s in groups written rank by
 * rank). */
static bool group_shares(const shard_run *w, const tpc_shard_plan *sp, int i0, int n)
{
	const tpc_ckpt *cks[JOINT_GROUP];
	const tpc_tensor *ts[JOINT_GROUP];
	if (n > JOINT_GROUP)
		return false;
	for (int j = 0; j < n; j++) {
		int r = w->todo[i0 + j];
		cks[j] = sp->stored ? &sp->stored[r] : &sp->rank[r];
	}
	for (size_t i = 0; i < cks[0]->n; i++) {
		int j = 0;
		for (; j < n && i < cks[j]->n && !strcmp(cks[j]->t[i].name, cks[0]->t[i].name); j++)
			ts[j] = &cks[j]->t[i];
		if (j == n && tpc_ckpt_joint_ok(cks, ts, n))
			return true;
	}
	return false;
}

/* Does the layout write each rank as one file of a format that writes
 * several in step? */
static bool group_can(const tpc_shard_plan *sp)
{
	const tpc_format *f;
	return !sp->layout->write_rank && !sp->layout->folders && (f = tpc_format_by_name(sp->format)) &&
	       f->write_many;
}

/* Ranks todo[i0, i0 + n) written in step; false (nothing done) when the
 * layout or format cannot, or a rank is to be replaced (--force semantics
 * are per rank: those go one by one). */
static bool write_group(shard_run *w, tpc_shard_plan *sp, int i0, int n, const tpc_write_opts *wo,
			rss_guard *g, int *bad_r, tpc_err *e, int *ret)
{
	const tpc_format *f;
	*ret = 0;
	*bad_r = -1;
	if (n < 2 || !group_can(sp) || !(f = tpc_format_by_name(sp->format)))
		return false;
	for (int j = 0; j < n; j++)
		if (w->redo[w->todo[i0 + j]])
			return false;
	const tpc_ckpt **cks = tpc_calloc((size_t)n, sizeof(*cks));
	const char **paths = tpc_calloc((size_t)n, sizeof(*paths));
	const uint8_t ***keep = tpc_calloc((size_t)n, sizeof(*keep));
	bool *committed = tpc_calloc((size_t)n, sizeof(*committed));
	int opened = 0, bad = 0;
	if (!cks || !paths || !keep || !committed) {
		*ret = tpc_err_nomem(e);
		goto out;
	}
	for (int j = 0; j < n; j++) {
		int r = w->todo[i0 + j];
		tpc_ckpt *ck = sp->stored ? &sp->stored[r] : &sp->rank[r];
		if (!(keep[j] = tpc_calloc(ck->nsrc ? ck->nsrc : 1, sizeof(**keep)))) {
			*ret = tpc_err_nomem(e);
			goto out;
		}
		views_open(g, r, ck, keep[j]);
		opened = j + 1;
		cks[j] = ck;
		paths[j] = w->paths[r];
	}
	*ret = f->write_many(cks, paths, n, wo, committed, &bad, e);
	for (int j = 0; j < n; j++)
		if (committed[j])
			w->done[w->todo[i0 + j]] = true;
	if (*ret) {
		*bad_r = w->todo[i0 + bad];
		if (!e->path[0])
			tpc_err_path(e, w->paths[*bad_r]);
	}
out:
	for (int j = 0; j < opened; j++) {
		int r = w->todo[i0 + j];
		views_close(g, r, sp->stored ? &sp->stored[r] : &sp->rank[r], keep[j]);
	}
	for (int j = 0; keep && j < n; j++)
		free(keep[j]);
	free(keep);
	free(cks);
	free(paths);
	free(committed);
	if (*ret && *bad_r < 0)
		*bad_r = w->todo[i0];
	return true;
}

/* Rank r failed with *le: kept when it is the lowest failing rank so far. */
static void keep_first(int r, const tpc_err *le, int *first_bad, tpc_err *first_err)
{
#ifdef _OPENMP
#pragma omp critical(tpc_shard_err)
#endif
	{
		if (*first_bad < 0 || r < *first_bad) {
			*first_bad = r;
			*first_err = *le;
		}
	}
}

/* Step 3: the rank files, in parallel; the lowest failing rank's error wins. */
static int write_ranks(shard_run *w, tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	tpc_write_opts wo;
	int first_bad = -1;
	tpc_err first_err;
	memset(&wo, 0, sizeof(wo));
	wo.flags = o->force ? TPC_W_FORCE : 0;
	wo.progress = o->progress;
	if (sp->layout->folders) {
		wo.inner_format = sp->format;
		wo.max_shard_size = sp->max_shard_size ? sp->max_shard_size : UINT64_MAX / 2;
	} else {
		wo.max_shard_size = sp->max_shard_size;
	}
	tpc_err_init(&first_err);
	rss_guard guard;
	const tpc_ckpt **live = tpc_calloc((size_t)(sp->tp * sp->pp), sizeof(*live));
	if (!live)
		return tpc_err_nomem(e);
	guard_start(&guard, sp->in);
	guard.live = live;
	guard.nlive = sp->tp * sp->pp;
	/* groups of ranks, one group per writer thread where that makes
	 * groups of two or more (else one rank a group) */
	int threads = 1, per = 1;
#ifdef _OPENMP
	threads = omp_get_max_threads();
#endif
	if (joint_on() && threads > 0 && group_can(sp)) {
		per = (w->ntodo + threads - 1) / threads;
		per = per > JOINT_GROUP ? JOINT_GROUP : per < 1 ? 1 : per;
		/* the first group stands for all: without a shared tensor the
		 * ranks go one by one, in the order they always did (a reshard
		 * tp 4 -> 8 in groups of rank files read by one thread each
		 * measured 0.3 s more system time) */
		if (per > 1 && !group_shares(w, sp, 0, per))
			per = 1;
	}
	int ngroups = (w->ntodo + per - 1) / per;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
	for (int gi = 0; gi < ngroups; gi++) {
		int i0 = gi * per, n = w->ntodo - i0 < per ? w->ntodo - i0 : per, rg = 0, bad_r;
		tpc_err ge;
		tpc_err_init(&ge);
		if (write_group(w, sp, i0, n, &wo, &guard, &bad_r, &ge, &rg)) {
			if (rg)
				keep_first(bad_r, &ge, &first_bad, &first_err);
			continue;
		}
		for (int i = i0; i < i0 + n; i++) {
			int r = w->todo[i];
			tpc_err le;
			tpc_err_init(&le);
			tpc_write_opts wr = wo;
			if (w->redo[r])
				wr.flags |= TPC_W_FORCE;
			int rr = write_one_rank(sp, r, w->paths[r], &wr, &guard, &le);
			if (rr) {
				if (!le.path[0])
					tpc_err_path(&le, w->paths[r]);
				keep_first(r, &le, &first_bad, &first_err);
			} else {
				w->done[r] = true;
			}
		}
	}
	guard_stop(&guard);
	free(live);
	if (first_bad >= 0) {
		*e = first_err;
		return first_err.code ? first_err.code : TPC_EIO;
	}
	sp->nwritten = (size_t)w->ntodo;
	return 0;
}

/* Step 4, under the exclusive lock: is the set complete? Every rank file, this
 * run's included, must (still) be of this set: another run may have replaced
 * one before the lock. */
static int count_present(shard_run *w, tpc_shard_plan *sp, tpc_err *e)
{
	int nr = sp->tp * sp->pp, ret;
	if (flock(w->lockfd, LOCK_EX) != 0) {
		tpc_err_sys(e, TPC_EIO, errno, "cannot lock the output folder");
		tpc_err_path(e, w->dir);
		return TPC_EIO;
	}
	for (int r = 0; r < nr; r++) {
		bool ok;
		if (!w->done[r] && !tpc_layout_rank_exists(sp->layout, w->paths[r]))
			continue;
		if ((ret = rank_file_ok(sp, r, w->paths[r], &ok, e)))
			return ret;
		if (ok) {
			sp->npresent++;
		} else if (w->done[r]) {
			/* another run's files now are not ours to take back */
			for (int q = r; q < nr; q++)
				if (w->done[q] && (rank_file_ok(sp, q, w->paths[q], &ok, e) || !ok))
					w->done[q] = false;
			tpc_err_set(e, TPC_EIO,
				    "rank %d's file was replaced by another run writing the same folder; the set is not complete",
				    r);
			tpc_err_path(e, w->paths[r]);
			return TPC_EIO;
		}
	}
	return 0;
}

/* Step 5, when the set is complete: checksums, the layout's extra files and
 * the model's companions, then the manifest, last. */
static int finish_set(shard_run *w, tpc_shard_plan *sp, const tpc_shard_opts *opts, tpc_err *e)
{
	int ret;
	tpc_shard_opts o_resume = *opts, *o = &o_resume;
	o->force = opts->force || w->resumed; /* companions an interrupted run copied are replaced */
	if (sp->checksum != TPC_HASH_NONE && !w->hashed && (ret = tpc__shard_hash_all(sp, e)))
		return ret;
	if (sp->layout->write_extras)
		ret = sp->layout->write_extras(sp, w->dir, o, e);
	else
		ret = o->no_extras ? 0 : tpc__layout_copy_companions(sp, w->dir, o, NULL, false, e);
	if (ret)
		return ret;
	tpc_buf mb = TPC_BUF_INIT;
	tpc_shard_manifest_render(sp, &mb);
	if (mb.oom)
		ret = tpc_err_nomem(e);
	else
		ret = tpc_write_file_atomic(w->manifest, mb.p, mb.len, o->force ? TPC_OUT_FORCE : 0, e);
	tpc_buf_release(&mb);
	if (!ret)
		sp->manifest_written = true;
	return ret;
}

int tpc_shard_write(tpc_shard_plan *sp, const char *dir, const tpc_shard_opts *o, tpc_err *e)
{
	int nr = sp->tp * sp->pp, ret;
	shard_run w;
	memset(&w, 0, sizeof(w));
	w.dir = dir;
	w.lockfd = -1;
	sp->nwritten = 0;
	sp->manifest_written = false;
	sp->npresent = 0;
	sp->nkept = 0;
	if (!(ret = open_output(&w, sp, o, e)) && !(ret = plan_ranks(&w, sp, o, e)) &&
	    !(ret = input_check(&w, sp, o, e))) {
		hash_beside hb;
		hash_beside_start(&hb, &w, sp, o);
		ret = hash_beside_join(&hb, &w, write_ranks(&w, sp, o, e), e);
	}
	if (!ret && !(ret = count_present(&w, sp, e)) && sp->npresent == (size_t)nr && !o->defer_manifest)
		ret = finish_set(&w, sp, o, e);
	/* otherwise another run completes the set */
	if (ret && w.done) {
		/* the set is complete or absent: take back what this run wrote */
		for (int r = 0; r < nr; r++)
			if (w.done[r])
				tpc_layout_remove_rank(sp->layout, w.paths[r]);
		sp->nwritten = 0;
	}
	if (ret && w.made_dir)
		rmdir(dir); /* only when empty: nothing of another run's goes */
	if (w.lockfd >= 0)
		close(w.lockfd); /* the unlock, after any take-back: another run's check never sees it half done */
	for (int r = 0; w.paths && r < nr; r++)
		free(w.paths[r]);
	free(w.paths);
	free(w.todo);
	free(w.done);
	free(w.redo);
	free(w.manifest);
	return ret;
}
