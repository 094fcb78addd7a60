/*
 * cli_mpi.c - tpconv's commands under mpirun: several machines (or processes)
 * writing one shard set on a shared filesystem.
 *
 * `mpirun -np N tpconv shard ...` divides the set's rank files among the N
 * processes (file r goes to process r mod N), each writing its own with the
 * --rank machinery of tpc_shard_write but never the manifest
 * (defer_manifest). Then every process reports its status (MPI_Allreduce
 * MAX). All well: process 0 completes the set with a run that writes no rank
 * file, so it checks every file on disk as belonging to this set, computes
 * the checksums and writes the manifest last; its status is agreed again.
 * Anything wrong anywhere: every process removes the files it wrote and the
 * whole job exits with the worst status; no manifest is written. A process
 * that dies (killed, out of memory) never reports, and mpirun ends the job
 * before process 0 can complete the set, so a killed job leaves no manifest.
 * A process that fails before the agreement (an unreadable input on one host)
 * ends the job with MPI_Abort, as verify does.
 *
 * merge and convert to a Hugging Face folder divide its shard files the same
 * way (shard s to process s mod N, no index); all well, process 0 checks that
 * every shard is in place and writes the index, then the companions. A single
 * output file is written by process 0 while the others wait for its status
 * (so N copies do not race to write one file).
 *
 * Without mpirun, or with one process, nothing here runs and the commands
 * behave as they always did, and the MPI module (verify/tpc_mpi.h) is not
 * loaded. A tpconv without it (built without MPI, or the module or libmpi
 * missing here) started by mpirun with more than one process refuses
 * (exit 5) rather than have N processes write the same files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "cli.h"
#include "formats.h"
#include "tpc_layout.h"
#include "tpc_shard.h"
#include "tpc_util.h"

/* The job size mpirun announces (OpenMPI, MPICH/Hydra, PMIx), or 0 when not
 * under mpirun. */
static int launcher_size(void)
{
	static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", NULL};
	for (int i = 0; vars[i]; i++) {
		const char *v = getenv(vars[i]);
		uint64_t n;
		tpc_err e;
		tpc_err_init(&e);
		if (v && !tpc_parse_u64(v, 1u << 20, &n, &e))
			return (int)n;
	}
	return getenv("PMIX_RANK") ? 1 : 0;
}

int tpc_cli_mpi_start(tpc_cli_mpi *m, const char *cmd)
{
	tpc_err e;
	memset(m, 0, sizeof(*m));
	m->size = 1;
	int n = launcher_size();
	if (n <= 1)
		return 0;
	tpc_err_init(&e);
	if (tpc_verify_mpi_load(getenv("TPCONV_MPI_MODULE"), &e)) {
		fprintf(stderr, "tpconv: error: started by mpirun with %d processes, but %s; run '%s' without mpirun\n", n,
			e.msg, cmd);
		return 5;
	}
	if (tpc_verify_mpi_init(&m->me, &m->size, &e))
		return tpc_cli_fail(&e);
	m->on = m->size > 1;
	if (!m->on)
		tpc_verify_mpi_finalize();
	return 0;
}

void tpc_cli_mpi_end(tpc_cli_mpi *m, int status)
{
	if (!m->on)
		return;
	if (status && !m->agreed)
		tpc_verify_mpi_abort(status); /* the others may wait in a collective for this one */
	tpc_verify_mpi_finalize();
	m->on = false;
}

/* Everyone's worst exit status (0: all ok). A failing collective is exit 5. */
static int agree(tpc_cli_mpi *m, int status)
{
	tpc_err e;
	int v = status;
	tpc_err_init(&e);
	if (tpc_verify_mpi_allmax(&v, &e)) {
		tpc_cli_fail(&e);
		return 5;
	}
	m->agreed = true;
	return v;
}

static void take_back(const tpc_shard_plan *sp, const char *dir, const bool *mine)
{
	for (int r = 0; r < sp->tp * sp->pp; r++) {
		if (!mine[r])
			continue;
		char *p = tpc_path_join(dir, sp->rank_file[r]);
		if (p)
			tpc_layout_remove_rank(sp->layout, p);
		free(p);
	}
}

int tpc_cli_mpi_shard(tpc_cli_mpi *m, tpc_shard_plan *sp, const char *dir, const tpc_shard_opts *o)
{
	int nr = sp->tp * sp->pp, status, ret = 0;
	bool *mine = tpc_calloc((size_t)nr, sizeof(bool)), *none = tpc_calloc((size_t)nr, sizeof(bool));
	size_t nmine = 0;
	tpc_shard_opts po = *o;
	tpc_err e;

	tpc_err_init(&e);
	if (!mine || !none) {
		tpc_err_nomem(&e);
		ret = agree(m, tpc_cli_fail(&e)); /* the others must not wait for us */
		goto out;
	}
	for (int r = 0; r < nr; r++)
		if ((!o->write_rank || o->write_rank[r]) && r % m->size == m->me) {
			mine[r] = true;
			nmine++;
		}
	/* 1: every process its own rank files, no manifest */
	po.write_rank = mine;
	po.defer_manifest = true;
	status = nmine ? tpc_shard_write(sp, dir, &po, &e) : 0;
	if (status) {
		char msg[4096];
		tpc_err_format(&e, msg, sizeof(msg));
		fprintf(stderr, "tpconv: error: process %d of %d: %s\n", m->me, m->size, msg);
		status = tpc_status_exit(e.code ? e.code : TPC_EIO);
	}
	sp->nwritten = status ? 0 : nmine;
	if ((ret = agree(m, status))) {
		if (!status)
			take_back(sp, dir, mine); /* the set is complete or absent */
		if (m->me == 0)
			fprintf(stderr, "tpconv: error: %s; the rank files this job wrote were removed and no manifest written\n",
				status ? "the set is not complete" : "another process failed");
		sp->nwritten = 0;
		goto out;
	}
	/* 2: process 0 checks every file on disk and writes the manifest last */
	status = 0;
	if (m->me == 0) {
		tpc_shard_opts fo = *o;
		fo.write_rank = none;
		fo.defer_manifest = false;
		fo.progress = NULL;
		size_t nwritten = sp->nwritten;
		tpc_err_init(&e);
		if ((status = tpc_shard_write(sp, dir, &fo, &e)))
			status = tpc_cli_fail(&e);
		sp->nwritten = nwritten;
	}
	m->agreed = false;
	if ((ret = agree(m, status))) {
		take_back(sp, dir, mine);
		sp->nwritten = 0;
	}
out:
	free(mine);
	free(none);
	return ret;
}

/* Print this process's error on one line and return its exit status. */
static int process_fail(const tpc_cli_mpi *m, const tpc_err *e)
{
	char msg[4096];
	tpc_err_format(e, msg, sizeof(msg));
	fprintf(stderr, "tpconv: error: process %d of %d: %s\n", m->me, m->size, msg);
	return tpc_status_exit(e->code ? e->code : TPC_EIO);
}

static void unlink_ours(const tpc_ckpt *ck, const char *out, const tpc_write_opts *po)
{
	char **paths = NULL;
	size_t n = 0;
	tpc_err e;
	tpc_err_init(&e);
	if (tpc_hf_shard_paths(ck, NULL, 0, out, po, &paths, &n, &e) == 0)
		for (size_t i = 0; i < n; i++)
			unlink(paths[i]);
	tpc_free_strv(paths, n);
}

int tpc_cli_mpi_write(tpc_cli_mpi *m, tpc_cli_write_fn wr, void *ctx, const tpc_ckpt *ck, const tpc_format *f,
		      bool sharded, const char *out, const tpc_write_opts *wo)
{
	tpc_write_opts po = *wo;
	tpc_err e;
	int status = 0, ret;
	tpc_err_init(&e);
	if (!sharded) {
		/* one file: process 0 writes it */
		if (m->me == 0 && wr(ctx, f, out, wo, &e)) {
			tpc_err_path(&e, out);
			status = process_fail(m, &e);
		}
		return agree(m, status);
	}
	/* 1: every process its share of the shards (s mod N), no index */
	po.procs = m->size;
	po.proc = m->me;
	po.flags |= TPC_W_NO_INDEX;
	if (wr(ctx, f, out, &po, &e))
		status = process_fail(m, &e);
	if ((ret = agree(m, status))) {
		if (!status)
			unlink_ours(ck, out, &po); /* complete or absent */
		if (m->me == 0)
			fprintf(stderr, "tpconv: error: %s; the shards this job wrote were removed and no index written\n",
				status ? "the output is not complete" : "another process failed");
		return ret;
	}
	/* 2: process 0 writes the index once every shard is in place */
	status = 0;
	if (m->me == 0) {
		tpc_write_opts io = *wo;
		io.flags |= TPC_W_INDEX_ONLY;
		io.progress = NULL;
		tpc_err_init(&e);
		if (wr(ctx, f, out, &io, &e))
			status = process_fail(m, &e);
	}
	m->agreed = false;
	if ((ret = agree(m, status)))
		unlink_ours(ck, out, &po);
	return ret;
}

/* The folders missing above file `out`: made (*made: the topmost one, to
 * take back), 0 or the exit status. */
static int make_parents(const char *out, char **made)
{
	char *dir = tpc_path_dir(out), *top = NULL;
	tpc_err e;
	tpc_err_init(&e);
	if (!dir)
		return 0;
	char *d = tpc_strdup(dir);
	while (d && *d && strcmp(d, ".") && strcmp(d, "/") && !tpc_exists(d)) {
		free(top);
		top = d;
		d = tpc_path_dir(top);
		if (d && !strcmp(d, top)) {
			free(d);
			d = NULL;
		}
	}
	free(d);
	int ret = top ? tpc_mkdirs(dir, &e) : 0;
	free(dir);
	if (ret) {
		free(top);
		return tpc_cli_fail(&e);
	}
	*made = top;
	return 0;
}

/* Remove the folders make_parents made, deepest first, while empty. */
static void unmake_parents(const char *out, const char *top)
{
	char *d = tpc_path_dir(out);
	while (d && rmdir(d) == 0 && strcmp(d, top)) {
		char *up = tpc_path_dir(d);
		free(d);
		d = up;
	}
	free(d);
}

int tpc_cli_write_out(const char *cmd, tpc_cli_write_fn wr, void *ctx, const tpc_ckpt *ck, const tpc_format *f,
		      bool sharded, const char *out, tpc_write_opts *wo, bool force_progress, size_t *kept, bool *go_on)
{
	tpc_progress prog;
	tpc_err e;
	uint64_t total = 0;
	int ret;
	*go_on = false;
	tpc_err_init(&e);
	for (size_t i = 0; i < ck->n; i++)
		total += ck->t[i].nbytes;
	tpc_progress_init(&prog, stderr, tpc_cli_progress_wanted(force_progress), cmd, total);
	wo->progress = &prog;
	if (sharded && !(wo->flags & TPC_W_FORCE)) {
		wo->flags |= TPC_W_RESUME; /* an interrupted run's shards (no index yet) */
		wo->kept = kept;
	}
	size_t left = 0;
	wo->left = &left; /* a full disk: the shards finished stay */
	/* a file's missing folders are made, as a folder output's are, and taken
	 * back when nothing was written into them */
	char *made = NULL;
	if (!sharded && (ret = make_parents(out, &made)))
		return ret;
	if (tpc_cli_job.on) {
		/* under mpirun: the shards divided among the processes; process 0 goes on */
		ret = tpc_cli_mpi_write(&tpc_cli_job, wr, ctx, ck, f, sharded, out, wo);
		*go_on = !ret && tpc_cli_job.me == 0;
	} else if ((ret = wr(ctx, f, out, wo, &e))) {
		tpc_err_path(&e, out);
		ret = tpc_cli_fail(&e);
		tpc_cli_note_left(left + *kept, "shard file");
	} else {
		*go_on = true;
	}
	wo->progress = NULL; /* prog lives here */
	wo->left = NULL;
	if (ret && made)
		unmake_parents(out, made);
	free(made);
	if (!*go_on)
		return ret;
	tpc_progress_end(&prog);
	if (*kept && tpc_cli_verbose >= 0)
		fprintf(stderr, "tpconv: resumed: kept %zu shard file%s an interrupted run left (every tensor byte-equal), wrote the rest\n",
			*kept, *kept == 1 ? "" : "s");
	return 0;
}
