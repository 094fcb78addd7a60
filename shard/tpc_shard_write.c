/* tpc_shard_write.c - writing a planned shard set, step by step (see
 * tpc_shard_write below): the output folder and its lock, the ranks this run
 * writes, the rank files in parallel (in joint groups where ranks share the
 * slices they read), completeness under the exclusive lock, then checksums,
 * the layout's extras and the companions, and the manifest last. The RSS
 * guard that bounds the writers' resident set is here too; merge borrows it
 * (tpc__rss_guard_start). See tpc_shard.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_manifest.h"
#include "tpc_shard.h"
#include "tpc_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

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
	int ret;
	*same = false;
	if ((ret = rank_file_ok(sp, r, path, same, e)) || !*same)
		return ret;
	*same = tpc_ckpt_file_holds(path, want, NULL, want->n);
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

/* The dead temporaries of this set (runs killed with SIGKILL left them): in
 * its folder, in each rank file's folder (Megatron's mp_rank_TT/) and inside
 * each rank folder (the hf layout's). */
static void sweep_set(const char *dir, const tpc_shard_plan *sp)
{
	char *top = tpc_path_join(dir, "x"), *topdir = top ? tpc_path_dir(top) : NULL;
	tpc_out_sweep(dir);
	for (int r = 0; topdir && r < sp->tp * sp->pp; r++) {
		char *p = tpc_path_join(dir, sp->rank_file[r]), *pd = p ? tpc_path_dir(p) : NULL;
		if (p && tpc_is_dir(p))
			tpc_out_sweep(p);
		if (pd && strcmp(pd, topdir))
			tpc_out_sweep(pd);
		free(p);
		free(pd);
	}
	free(top);
	free(topdir);
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
		return tpc_err_at(e, TPC_EUSAGE, dir, NULL, "the output folder is the input folder or inside it; choose another");
	}
	if (tpc_exists(dir) && !tpc_is_dir(dir)) {
		return tpc_err_at(e, TPC_EUSAGE, dir, NULL, "output exists and is not a folder");
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
	sweep_set(dir, sp);
	if (!(w->manifest = tpc_path_join(dir, TPC_MANIFEST_NAME)))
		return tpc_err_nomem(e);
	if (!tpc_exists(w->manifest))
		return 0;
	if (!o->force) {
		return tpc_err_at(e, TPC_EUSAGE, w->manifest, NULL, "output folder already holds a complete shard set; use --force to replace it");
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
				return tpc_err_at(e, TPC_EINPUT, w->paths[r], NULL,
					    "rank %d's file belongs to another shard set (not set %s); remove it or write it with --rank %d --force",
					    r, sp->set_id, r);
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
	    !(f = sp->layout->folders ? tpc_format_index() : tpc_format_by_name(sp->format)))
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

/* The tensor bytes of rank r's file: what it needs of a full disk, near
 * enough to tell that it cannot fit where a larger or equal one did not. */
static uint64_t rank_bytes(const tpc_shard_plan *sp, int r)
{
	const tpc_ckpt *ck = sp->stored ? &sp->stored[r] : &sp->rank[r];
	uint64_t n = 0;
	for (size_t i = 0; i < ck->n; i++)
		n += ck->t[i].nbytes;
	return n;
}

/* Step 3: the rank files, in parallel; the lowest failing rank's error wins.
 * When the disk fills, the files finished before it stay (tpc_shard_write
 * takes back everything else): a writer thread goes on to its next rank
 * unless a smaller one of its own did not fit, and a joint group that
 * filled it goes again rank by rank. */
static int write_ranks(shard_run *w, tpc_shard_plan *sp, const tpc_shard_opts *o, tpc_err *e)
{
	tpc_write_opts wo;
	int64_t first_bad = -1;
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
			if (!rg)
				continue;
			if (!tpc_out_no_room(&ge)) {
				tpc__keep_first(bad_r, &ge, &first_bad, &first_err);
				continue;
			}
			/* The disk filled with every file of the group half written
			 * (their temporaries are gone again): the group's ranks once
			 * more one by one, so that those that fit are finished and
			 * kept for a rerun to resume from, as rank by rank writing
			 * keeps them (TPCONV_JOINT=0). */
		}
		uint64_t no_room_at = UINT64_MAX; /* the bytes of the smallest rank that did not fit */
		for (int i = i0; i < i0 + n; i++) {
			int r = w->todo[i];
			if (w->done[r])
				continue; /* committed by the group before the disk filled */
			uint64_t bytes = rank_bytes(sp, r);
			if (bytes >= no_room_at)
				continue; /* cannot fit where a smaller one did not: its error stands */
			tpc_err le;
			tpc_err_init(&le);
			tpc_write_opts wr = wo;
			if (w->redo[r])
				wr.flags |= TPC_W_FORCE;
			int rr = write_one_rank(sp, r, w->paths[r], &wr, &guard, &le);
			if (rr) {
				if (!le.path[0])
					tpc_err_path(&le, w->paths[r]);
				tpc__keep_first(r, &le, &first_bad, &first_err);
				if (tpc_out_no_room(&le) && bytes < no_room_at)
					no_room_at = bytes;
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
			return tpc_err_at(e, TPC_EIO, w->paths[r], NULL,
				    "rank %d's file was replaced by another run writing the same folder; the set is not complete",
				    r);
		}
	}
	return 0;
}

/* Step 4 too, the set complete: was it completed by another run? A manifest
 * here now was written by a run writing this folder beside this one
 * (open_output refused or removed any older one) after every writer's
 * shared lock was gone, so after it had checked every rank file, this
 * run's too, as its set's. When it names this set the work is done; writing
 * the manifest again would fail (it exists) and take back this run's rank
 * files from under the other's manifest. */
static int completed_by_other(shard_run *w, tpc_shard_plan *sp, tpc_err *e)
{
	tpc_manifest m;
	int ret;
	if (!tpc_exists(w->manifest))
		return 0;
	if (!(ret = tpc_manifest_from_file(&m, w->manifest, e))) {
		if (m.set_id && !strcmp(m.set_id, sp->set_id))
			sp->manifest_other = true;
		else
			ret = tpc_err_at(e, TPC_EIO, w->manifest, NULL,
					 "another run writing this folder completed it as shard set %s, not this run's %s",
					 m.set_id ? m.set_id : "(none)", sp->set_id);
	}
	tpc_manifest_release(&m);
	return ret;
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
	sp->manifest_other = false;
	sp->npresent = 0;
	sp->nkept = 0;
	sp->nleft = 0;
	if (!(ret = open_output(&w, sp, o, e)) && !(ret = plan_ranks(&w, sp, o, e)) &&
	    !(ret = input_check(&w, sp, o, e))) {
		hash_beside hb;
		hash_beside_start(&hb, &w, sp, o);
		ret = hash_beside_join(&hb, &w, write_ranks(&w, sp, o, e), e);
	}
	if (!ret && !(ret = count_present(&w, sp, e)) && sp->npresent == (size_t)nr && !o->defer_manifest &&
	    !(ret = completed_by_other(&w, sp, e)) && !sp->manifest_other)
		ret = finish_set(&w, sp, o, e);
	/* otherwise another run completes the set */
	if (ret && w.done) {
		/* The set is complete or absent: take back what this run wrote. But
		 * the disk is full: the finished files stay (without a manifest the
		 * set is incomplete to merge and verify) for the same command to
		 * resume from, once there is room (under mpirun the job takes back). */
		bool keep = tpc_out_no_room(e) && !o->defer_manifest;
		for (int r = 0; r < nr; r++)
			if (w.done[r] && keep)
				sp->nleft++;
			else if (w.done[r])
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
