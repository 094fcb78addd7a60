/* tpc_format.c - the format registry and content detection; see tpc_format.h. */
#include "tpc_util.h"
#include "tpc_format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpc_io.h"

#define MAX_FORMATS 16
static const tpc_format *formats[MAX_FORMATS];
static size_t n_formats;

int tpc_format_register(const tpc_format *f)
{
	for (size_t i = 0; i < n_formats; i++)
		if (formats[i] == f || !strcmp(formats[i]->name, f->name))
			return 0;
	if (n_formats == MAX_FORMATS)
		return -1;
	formats[n_formats++] = f;
	return 0;
}

const tpc_format *tpc_format_by_name(const char *name)
{
	for (size_t i = 0; i < n_formats; i++)
		if (!strcmp(formats[i]->name, name))
			return formats[i];
	return NULL;
}

const tpc_format *tpc_format_index(void)
{
	for (size_t i = 0; i < tpc_format_count(); i++)
		if (tpc_format_at(i)->index)
			return tpc_format_at(i);
	return NULL;
}

const tpc_format *tpc_format_for_output(const char *path)
{
	for (size_t i = 0; i < n_formats; i++)
		for (const char *const *x = formats[i]->exts; x && *x; x++)
			if (tpc_ends_with(path, *x))
				return formats[i];
	return NULL;
}

bool tpc_format_weight_name(const char *name)
{
	for (size_t i = 0; i < n_formats; i++) {
		for (const char *const *x = formats[i]->exts; x && *x; x++)
			if (tpc_ends_with(name, *x))
				return true;
		for (const char *const *x = formats[i]->part_exts; x && *x; x++)
			if (tpc_ends_with(name, *x))
				return true;
	}
	return false;
}

size_t tpc_format_count(void)
{
	return n_formats;
}

const tpc_format *tpc_format_at(size_t i)
{
	return i < n_formats ? formats[i] : NULL;
}

/* A short printable description of the first bytes, for "unknown format" errors. */
static void describe_head(const uint8_t *h, size_t n, char *out, size_t cap)
{
	size_t k = 0;
	for (size_t i = 0; i < n && i < 16 && k + 4 < cap; i++)
		k += (size_t)snprintf(out + k, cap - k, "%02x ", h[i]);
	if (k)
		out[k - 1] = '\0';
	else
		snprintf(out, cap, "(empty file)");
}

const tpc_format *tpc_format_detect(const char *path, tpc_err *e)
{
	uint8_t head[4096];
	size_t n = 0;
	const tpc_format *best = NULL;
	int best_score = 0;
	bool dir = tpc_is_dir(path);
	if (!dir) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			tpc_err_sys(e, TPC_EINPUT, errno, "cannot open");
			tpc_err_path(e, path);
			return NULL;
		}
		while (n < sizeof(head)) {
			ssize_t r = read(fd, head + n, sizeof(head) - n);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			n += (size_t)r;
		}
		close(fd);
	}
	for (size_t i = 0; i < n_formats; i++) {
		int s = formats[i]->detect ? formats[i]->detect(path, dir ? NULL : head, dir ? 0 : n) : 0;
		if (s > best_score) {
			best_score = s;
			best = formats[i];
		}
	}
	if (!best && !dir) {
		/* Nothing recognises the content. If the name says what it should
		 * be, let that format's reader explain what is wrong with it (a
		 * truncated download, a 3-byte file); content still decides for
		 * every file that is valid. */
		best = tpc_format_for_output(path);
		if (best && n >= 23 && !memcmp(head, "version https://git-lfs", 23))
			best = NULL;
	}
	if (!best) {
		char desc[80];
		if (dir) {
			tpc_err_set(e, TPC_EINPUT,
				    "directory holds no checkpoint (no *.safetensors, index or torch files)");
		} else if (n >= 24 && !memcmp(head, "version https://git-lfs", 23)) {
			tpc_err_set(e, TPC_EINPUT,
				    "this is a Git LFS pointer, not the checkpoint; run 'git lfs pull'");
		} else {
			describe_head(head, n, desc, sizeof(desc));
			tpc_err_set(e, TPC_EINPUT,
				    "unknown checkpoint format (first bytes: %s); expected safetensors or a torch.save file",
				    desc);
		}
		tpc_err_path(e, path);
	}
	return best;
}

int tpc_ckpt_open(tpc_ckpt *ck, const char *path, const tpc_open_opts *o, tpc_err *e)
{
	const tpc_format *f = tpc_format_detect(path, e);
	if (!f)
		return TPC_EINPUT;
	return tpc_ckpt_open_as(ck, f, path, o, e);
}

int tpc_ckpt_open_as(tpc_ckpt *ck, const tpc_format *f, const char *path, const tpc_open_opts *o, tpc_err *e)
{
	static const tpc_open_opts none = {0, NULL, NULL};
	int ret;
	if (!ck->path && !(ck->path = strdup(path)))
		return tpc_err_nomem(e);
	ret = f->open(ck, path, o ? o : &none, e);
	if (!ret && !ck->format && !(ck->format = strdup(f->name)))
		ret = tpc_err_nomem(e);
	if (!ret && f->sharded)
		ck->rank_sources = true;
	if (ret)
		tpc_err_path(e, path);
	return ret;
}

void tpc_hf_files_release(tpc_hf_file *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(f[i].data);
		f[i].data = NULL;
		f[i].len = 0;
	}
}
