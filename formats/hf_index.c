/* hf_index.c - Hugging Face sharded checkpoints (FORMATS.md §3.5).
 *
 * Reading: a directory or a `*.index.json`. The index's weight_map names the
 * shard of every tensor; each shard is opened through the registry (so
 * safetensors and torch shards both work) into the same checkpoint, then the
 * map and the files are checked against each other in both directions.
 *
 * Writing: tensors are packed greedily in checkpoint order, a new shard
 * starting when the next tensor would push the current one past
 * max_shard_size (a bigger tensor gets a shard of its own), as
 * huggingface_hub does, tied tensors in one shard (see hf_pack). Shards are
 * written first, the index last, and the
 * shards this run wrote are removed again if anything fails, so a set is
 * complete or absent; but when the disk is full the finished shards stay
 * (o->left counts them): without an index the folder is incomplete, and the
 * same command resumes from them once there is room. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats.h"
#include "tpc_buf.h"
#include "tpc_util.h"

#define INDEX_CAP (256u << 20)

static int detect(const char *path, const uint8_t *head, size_t n)
{
	if (!head)
		return 50; /* a directory: we are the only format that reads those */
	if (tpc_ends_with(path, ".json")) {
		for (size_t i = 0; i < n; i++) {
			if (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')
				continue;
			return head[i] == '{' ? 80 : 0;
		}
	}
	return 0;
}

static void free_list(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool safe_rel_name(const char *f)
{
	if (!*f || f[0] == '/')
		return false;
	for (const char *p = f; *p;) {
		const char *s = strchr(p, '/');
		size_t l = s ? (size_t)(s - p) : strlen(p);
		if ((l == 2 && !strncmp(p, "..", 2)) || l == 0)
			return false;
		p += l + (s ? 1 : 0);
	}
	return true;
}

int tpc_hf_index_from_buffer(const char *text, size_t len, const char *path, char ***names,
			     char ***files, size_t *n, uint64_t *total_size, tpc_err *e)
{
	cJSON *root = cJSON_ParseWithLength(text, len);
	cJSON *wm, *md;
	size_t cnt = 0, cap = 0, cap2 = 0;
	char **nv = NULL, **fv = NULL;
	int ret = 0;
	*total_size = 0;
	if (!root || !cJSON_IsObject(root)) {
		ret = TPC_CORRUPT(e, path, -1, NULL, "index is not a JSON object");
		goto out;
	}
	wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(wm)) {
		ret = TPC_CORRUPT(e, path, -1, NULL, "index has no \"weight_map\" object");
		goto out;
	}
	md = cJSON_GetObjectItemCaseSensitive(root, "metadata");
	if (md && cJSON_IsObject(md)) {
		cJSON *ts = cJSON_GetObjectItemCaseSensitive(md, "total_size");
		if (cJSON_IsNumber(ts) && ts->valuedouble >= 0 && ts->valuedouble < 18446744073709551616.0)
			*total_size = (uint64_t)ts->valuedouble;
	}
	for (cJSON *it = wm->child; it; it = it->next) {
		if (!cJSON_IsString(it)) {
			ret = TPC_CORRUPT(e, path, -1, it->string, "weight_map value is not a file name");
			goto out;
		}
		if (!safe_rel_name(it->valuestring)) {
			ret = TPC_CORRUPT(e, path, -1, it->string,
					  "weight_map names '%s', which is not a plain relative file name",
					  it->valuestring);
			goto out;
		}
		if (tpc_grow((void **)&nv, &cap, cnt + 1, sizeof(char *)) ||
		    tpc_grow((void **)&fv, &cap2, cnt + 1, sizeof(char *))) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		nv[cnt] = tpc_strdup(it->string);
		fv[cnt] = tpc_strdup(it->valuestring);
		cnt++;
		if (!nv[cnt - 1] || !fv[cnt - 1]) {
			ret = tpc_err_nomem(e);
			goto out;
		}
	}
	/* duplicates by sorting a copy: a pairwise check made a 50 000-entry
	 * index take 8 s (and a hostile one with millions, hours) */
	if (cnt > 1) {
		char **sorted = tpc_malloc(cnt * sizeof(char *));
		if (!sorted) {
			ret = tpc_err_nomem(e);
			goto out;
		}
		memcpy(sorted, nv, cnt * sizeof(char *));
		qsort(sorted, cnt, sizeof(char *), cmp_str);
		for (size_t i = 1; i < cnt && !ret; i++)
			if (!strcmp(sorted[i - 1], sorted[i]))
				ret = TPC_CORRUPT(e, path, -1, sorted[i], "tensor listed twice in weight_map");
		free(sorted);
	}
out:
	cJSON_Delete(root);
	if (ret) {
		free_list(nv, cnt);
		free_list(fv, cnt);
	} else {
		*names = nv;
		*files = fv;
		*n = cnt;
	}
	return ret;
}

/* Merge the top-level items of a shard's object tree into the checkpoint's. */
static int merge_root(tpc_ckpt *ck, tpc_value *prev, tpc_err *e)
{
	tpc_value *cur = ck->root;
	if (!prev)
		return 0;
	if (!cur) {
		ck->root = prev;
		return 0;
	}
	if (prev->kind != TPC_V_DICT || cur->kind != TPC_V_DICT) {
		tpc_value_unref(prev);
		tpc_value_unref(cur);
		ck->root = NULL; /* not mergeable: fall back to the flat tensor list */
		return 0;
	}
	for (size_t i = 0; i < cur->n; i++)
		if (tpc_value_set(prev, tpc_value_ref(cur->keys[i]), tpc_value_ref(cur->items[i]))) {
			tpc_value_unref(prev);
			return tpc_err_nomem(e);
		}
	tpc_value_unref(cur);
	ck->root = prev;
	return 0;
}

static int open_shard(tpc_ckpt *ck, const char *file, const tpc_open_opts *o, tpc_err *e)
{
	const tpc_format *f = tpc_format_detect(file, e);
	tpc_value *prev = ck->root;
	int ret;
	if (!f)
		return TPC_EINPUT;
	if (f == &tpc_fmt_hf_index) {
		return tpc_err_at(e, TPC_EINPUT, file, NULL, "a shard cannot itself be a sharded checkpoint");
	}
	ck->root = NULL;
	ret = f->open(ck, file, o, e);
	if (ret) {
		tpc_err_path(e, file);
		tpc_value_unref(ck->root);
		ck->root = prev;
		return ret;
	}
	return merge_root(ck, prev, e);
}

/* The tensors of the shards (ck->t[first..]) the weight_map does not list
 * must be tied to one it lists: a name a safetensors shard stores once
 * (tpconv.aliases, as save_pretrained drops it from the map). */
static int unlisted_ties(tpc_ckpt *ck, size_t first, char **names, size_t n, tpc_err *e)
{
	size_t m = ck->n - first;
	int64_t *sel = tpc_malloc((m + 1) * sizeof(int64_t)), *tie = tpc_malloc((m + 1) * sizeof(int64_t));
	bool *listed = tpc_calloc(m + 1, sizeof(bool)), *group_listed = tpc_calloc(m + 1, sizeof(bool));
	int ret = sel && tie && listed && group_listed ? 0 : tpc_err_nomem(e);
	/* names is no longer needed in map order: sort it for lookups */
	qsort(names, n, sizeof(char *), cmp_str);
	for (size_t k = 0; k < m && !ret; k++)
		sel[k] = (int64_t)(first + k);
	if (!ret)
		ret = tpc_ckpt_ties(ck, sel, m, tie, e);
	for (size_t k = 0; k < m && !ret; k++) {
		const char *key = ck->t[first + k].name;
		listed[k] = bsearch(&key, names, n, sizeof(char *), cmp_str) != NULL;
		group_listed[tie[k]] = group_listed[tie[k]] || listed[k];
	}
	for (size_t k = 0; k < m && !ret; k++)
		if (!listed[k] && !group_listed[tie[k]]) {
			const tpc_map *mp = tpc_ckpt_source(ck, ck->t[first + k].src);
			ret = TPC_CORRUPT(e, mp ? mp->path : "", -1, ck->t[first + k].name,
					  "tensor is not listed in the index's weight_map");
		}
	free(sel);
	free(tie);
	free(listed);
	free(group_listed);
	return ret;
}

static int open_index(tpc_ckpt *ck, const char *path, const tpc_open_opts *o, tpc_err *e)
{
	char *text = NULL, *dir = NULL, **names = NULL, **files = NULL, **uniq = NULL;
	size_t len = 0, n = 0, nu = 0;
	uint64_t total = 0;
	int ret;
	size_t first = ck->n;
	if ((ret = tpc_read_file(path, INDEX_CAP, &text, &len, e)))
		return ret;
	tpc_io_note_input(path);
	if ((ret = tpc_hf_index_from_buffer(text, len, path, &names, &files, &n, &total, e)))
		goto out;
	dir = tpc_path_dir(path);
	uniq = tpc_malloc(n * sizeof(char *));
	if (!dir || !uniq) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	memcpy(uniq, files, n * sizeof(char *));
	qsort(uniq, n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < n; i++)
		if (!nu || strcmp(uniq[nu - 1], uniq[i]))
			uniq[nu++] = uniq[i];
	for (size_t i = 0; i < nu && !ret; i++) {
		char *f = tpc_path_join(dir, uniq[i]);
		if (!f) {
			ret = tpc_err_nomem(e);
			break;
		}
		ret = open_shard(ck, f, o, e);
		free(f);
	}
	if (ret)
		goto out;
	/* Every tensor in the map is in the file it names, and every tensor read is in the map. */
	for (size_t i = 0; i < n; i++) {
		int64_t ix = tpc_ckpt_find(ck, names[i]);
		if (ix < 0 || (size_t)ix < first) {
			ret = TPC_CORRUPT(e, path, -1, names[i], "weight_map lists it in '%s', which does not hold it",
					  files[i]);
			goto out;
		}
		const tpc_map *m = tpc_ckpt_source(ck, ck->t[ix].src);
		if (m && strcmp(tpc_path_base(m->path), tpc_path_base(files[i])) &&
		    !strstr(m->path, files[i])) {
			ret = TPC_CORRUPT(e, path, -1, names[i], "weight_map says '%s' but the tensor is in '%s'",
					  files[i], m->path);
			goto out;
		}
	}
	if (ck->n - first != n)
		ret = unlisted_ties(ck, first, names, n, e);
	(void)total; /* informational: HF computes it from storages, which need not match file sizes */
out:
	free(text);
	free(dir);
	free(uniq);
	free_list(names, n);
	free_list(files, n);
	return ret;
}

/* Open the first of names[] that exists in `dir` with `opener`; *found says
 * whether one did. */
static int open_first(tpc_ckpt *ck, const char *dir, const char *const *names,
		      int (*opener)(tpc_ckpt *, const char *, const tpc_open_opts *, tpc_err *),
		      const tpc_open_opts *o, bool *found, tpc_err *e)
{
	int ret = 0;
	*found = false;
	for (int i = 0; names[i] && !*found; i++) {
		char *p = tpc_path_join(dir, names[i]);
		if (!p)
			return tpc_err_nomem(e);
		if (tpc_exists(p)) {
			*found = true;
			ret = opener(ck, p, o, e);
		}
		free(p);
	}
	return ret;
}

static int hf_open(tpc_ckpt *ck, const char *path, const tpc_open_opts *o, tpc_err *e)
{
	static const char *const idx_names[] = {"model.safetensors.index.json", "pytorch_model.bin.index.json",
						 NULL};
	static const char *const single[] = {"model.safetensors", "pytorch_model.bin", "model.pt", NULL};
	int ret = 0;
	bool found = false;
	if (!ck->format && !(ck->format = tpc_strdup("hf-index")))
		return tpc_err_nomem(e);
	if (!tpc_is_dir(path))
		return open_index(ck, path, o, e);
	ret = open_first(ck, path, idx_names, open_index, o, &found, e);
	if (!ret && !found)
		ret = open_first(ck, path, single, open_shard, o, &found, e);
	if (ret || found)
		return ret;
	/* Otherwise every *.safetensors file, in name order. */
	DIR *d = opendir(path);
	char **list = NULL;
	size_t n = 0, cap = 0;
	if (!d) {
		tpc_err_sys(e, TPC_EINPUT, errno, "cannot read directory");
		return TPC_EINPUT;
	}
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] == '.' || !tpc_ends_with(de->d_name, ".safetensors"))
			continue;
		if (tpc_grow((void **)&list, &cap, n + 1, sizeof(char *)) ||
		    !(list[n] = tpc_path_join(path, de->d_name))) {
			ret = tpc_err_nomem(e);
			break;
		}
		n++;
	}
	closedir(d);
	if (!ret && !n)
		ret = tpc_err_set(e, TPC_EINPUT,
				  "directory holds no checkpoint (no index, model.safetensors, pytorch_model.bin or *.safetensors)");
	if (!ret)
		qsort(list, n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < n && !ret; i++)
		ret = open_shard(ck, list[i], o, e);
	free_list(list, n);
	return ret;
}

/* ---- writer ---- */

/* qsort has no context argument in C11; thread-local so that the sharder can
 * write several rank folders at once */
static _Thread_local const tpc_ckpt *sort_by_name_ck;
static _Thread_local const int64_t *sort_by_name_all;
static int cmp_by_name(const void *a, const void *b)
{
	const char *x = sort_by_name_ck->t[sort_by_name_all[*(const int64_t *)a]].name;
	const char *y = sort_by_name_ck->t[sort_by_name_all[*(const int64_t *)b]].name;
	return strcmp(x, y);
}

/* The shard layout every run over the same tensors computes alike: indices
 * into ck in `all`, shard s holds all[start[s] .. start[s+1]). Tied tensors
 * (tpc_ckpt_ties) share a shard, as huggingface_hub keeps one storage in one
 * shard: torch shards write them as one storage, safetensors shards with
 * TPC_W_DEDUP_TIED once (save_pretrained's rule), the others not `listed` in
 * the index. */
typedef struct hf_pack {
	const char *prefix, *ext;
	int64_t *all;
	int64_t *first; /* [nsel]: the position in all of the first tensor tied to all[k]; k: untied */
	bool *listed;   /* [nsel]: in the weight_map (the shard holds it under its name) */
	size_t *start, nshard, nsel;
	size_t cap;
	uint64_t total;
} hf_pack;

static void pack_release(hf_pack *p)
{
	free(p->all);
	free(p->first);
	free(p->listed);
	free(p->start);
}

/* Greedy packing in the order of all: a tied tensor after the first of its
 * ties costs nothing. */
static int pack_greedy(hf_pack *p, const tpc_ckpt *ck, uint64_t max, tpc_err *e)
{
	uint64_t cur = 0;
	p->nshard = 0;
	p->total = 0;
	for (size_t i = 0; i < p->nsel; i++) {
		bool tied = p->first[i] != (int64_t)i;
		uint64_t sz = tied ? 0 : ck->t[p->all[i]].nbytes;
		if (!p->nshard || (!tied && cur + sz > max && cur > 0)) {
			if (tpc_grow((void **)&p->start, &p->cap, p->nshard + 2, sizeof(*p->start)))
				return tpc_err_nomem(e);
			p->start[p->nshard++] = i;
			cur = 0;
		}
		cur += sz;
		p->total += sz;
	}
	if (!p->nshard) {
		if (tpc_grow((void **)&p->start, &p->cap, 2, sizeof(*p->start)))
			return tpc_err_nomem(e);
		p->start[p->nshard++] = 0;
	}
	p->start[p->nshard] = p->nsel;
	return 0;
}

/* Does a tied tensor land in another shard than the first of its ties? */
static bool ties_split(const hf_pack *p)
{
	for (size_t s = 0; s < p->nshard; s++)
		for (size_t i = p->start[s]; i < p->start[s + 1]; i++)
			if (p->first[i] < (int64_t)p->start[s])
				return true;
	return false;
}

/* Each tied tensor moved right after the first of its ties. */
static int group_ties(hf_pack *p, tpc_err *e)
{
	size_t n = p->nsel, w = 0;
	int64_t *next = tpc_malloc(n * sizeof(int64_t)), *last = tpc_malloc(n * sizeof(int64_t));
	int64_t *all = tpc_malloc(n * sizeof(int64_t)), *first = tpc_malloc(n * sizeof(int64_t));
	int ret = 0;
	if (!next || !last || !all || !first) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		int64_t f = p->first[k];
		next[k] = -1;
		last[k] = (int64_t)k;
		if (f != (int64_t)k) {
			next[last[f]] = (int64_t)k;
			last[f] = (int64_t)k;
		}
	}
	for (size_t k = 0; k < n; k++) {
		if (p->first[k] != (int64_t)k)
			continue;
		size_t head = w;
		for (int64_t j = (int64_t)k; j >= 0; j = next[j]) {
			all[w] = p->all[j];
			first[w++] = (int64_t)head;
		}
	}
	memcpy(p->all, all, n * sizeof(int64_t));
	memcpy(p->first, first, n * sizeof(int64_t));
out:
	free(next);
	free(last);
	free(all);
	free(first);
	return ret;
}

static int pack(hf_pack *p, const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const tpc_write_opts *o,
		tpc_err *e)
{
	const char *inner_name = (o && o->inner_format) ? o->inner_format : "safetensors";
	bool torch = !strcmp(inner_name, "torch"), dedup = o && (o->flags & TPC_W_DEDUP_TIED);
	uint64_t max = (o && o->max_shard_size) ? o->max_shard_size : 5000000000ull;
	int ret;
	memset(p, 0, sizeof(*p));
	p->prefix = (o && o->shard_prefix) ? o->shard_prefix : torch ? "pytorch_model" : "model";
	p->ext = torch ? ".bin" : ".safetensors";
	if (!sel)
		nsel = ck->n;
	p->nsel = nsel;
	p->all = tpc_malloc((nsel ? nsel : 1) * sizeof(*p->all));
	p->first = tpc_malloc((nsel ? nsel : 1) * sizeof(*p->first));
	p->listed = tpc_malloc((nsel ? nsel : 1) * sizeof(*p->listed));
	if (!p->all || !p->first || !p->listed)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < nsel; i++)
		p->all[i] = sel ? sel[i] : (int64_t)i;
	if (torch || dedup) {
		if ((ret = tpc_ckpt_ties(ck, p->all, nsel, p->first, e)))
			return ret;
	} else {
		for (size_t i = 0; i < nsel; i++)
			p->first[i] = (int64_t)i; /* safetensors keeps a copy of each */
	}
	/* checkpoint order, unless that puts tied tensors in different shards */
	if ((ret = pack_greedy(p, ck, max, e)) ||
	    (ties_split(p) && ((ret = group_ties(p, e)) || (ret = pack_greedy(p, ck, max, e)))))
		return ret;
	for (size_t i = 0; i < nsel; i++)
		p->listed[i] = torch || p->first[i] == (int64_t)i;
	return 0;
}

static char *shard_path(const hf_pack *p, const char *dir, size_t s)
{
	char name[256];
	if (p->nshard == 1)
		snprintf(name, sizeof(name), "%s%s", p->prefix, p->ext);
	else
		snprintf(name, sizeof(name), "%s-%05zu-of-%05zu%s", p->prefix, s + 1, p->nshard, p->ext);
	return tpc_path_join(dir, name);
}

static bool shard_is_ours(const tpc_write_opts *o, size_t s)
{
	return !o || o->procs <= 1 || (int)(s % (size_t)o->procs) == o->proc;
}

int tpc_hf_shard_paths(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *dir, const tpc_write_opts *o,
		       char ***paths, size_t *n, tpc_err *e)
{
	hf_pack p;
	int ret = pack(&p, ck, sel, nsel, o, e);
	*paths = NULL;
	*n = 0;
	if (!ret && !(*paths = tpc_calloc(p.nshard, sizeof(char *))))
		ret = tpc_err_nomem(e);
	for (size_t s = 0; !ret && s < p.nshard; s++) {
		if (!shard_is_ours(o, s))
			continue;
		if (!((*paths)[(*n)++] = shard_path(&p, dir, s)))
			ret = tpc_err_nomem(e);
	}
	pack_release(&p);
	return ret;
}

/* Does the file at `path` hold exactly tensors sel[0..n) of ck, byte for byte? */
static int hf_write(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *dir,
		    const tpc_write_opts *o, tpc_err *e)
{
	const char *inner_name = (o && o->inner_format) ? o->inner_format : "safetensors";
	const tpc_format *inner = tpc_format_by_name(inner_name);
	bool index_only = o && (o->flags & TPC_W_INDEX_ONLY), no_index = o && (o->flags & TPC_W_NO_INDEX);
	hf_pack p;
	char **written = NULL; /* [nshard] every shard's path */
	bool *ours = NULL;     /* [nshard] written by this run */
	size_t nwritten = 0;
	tpc_buf idx = TPC_BUF_INIT;
	int ret = 0;
	memset(&p, 0, sizeof(p));
	if (!inner || inner == &tpc_fmt_hf_index)
		return tpc_err_set(e, TPC_EUSAGE, "unknown shard format '%s'", inner_name);
	if ((ret = pack(&p, ck, sel, nsel, o, e)))
		goto out;
	nsel = p.nsel;
	if ((ret = tpc_mkdirs(dir, e)))
		goto out;
	tpc_out_sweep(dir); /* a killed run's temporaries */
	written = tpc_calloc(p.nshard, sizeof(char *));
	ours = tpc_calloc(p.nshard, sizeof(bool));
	if (!written || !ours) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	/* resume only an interrupted run's folder: several shards and no index yet */
	bool resume = false;
	if (o && (o->flags & TPC_W_RESUME) && !(o->flags & TPC_W_FORCE) && p.nshard > 1 && !index_only) {
		char iname[256];
		snprintf(iname, sizeof(iname), "%s%s.index.json", p.prefix, p.ext);
		char *ip = tpc_path_join(dir, iname);
		resume = ip && !tpc_exists(ip);
		free(ip);
	}
	tpc_buf_adds(&idx, "{\n  \"metadata\": {\n");
	tpc_buf_addf(&idx, "    \"total_size\": %llu\n  },\n  \"weight_map\": {", (unsigned long long)p.total);
	/* weight_map sorted by tensor name (json.dumps sort_keys=True) */
	int64_t *byname = tpc_malloc((nsel ? nsel : 1) * sizeof(*byname));
	size_t *shard_of = tpc_malloc((nsel ? nsel : 1) * sizeof(*shard_of));
	if (!byname || !shard_of) {
		free(byname);
		free(shard_of);
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (size_t s = 0; s < p.nshard && !ret; s++) {
		char *path = shard_path(&p, dir, s);
		if (!path) {
			ret = tpc_err_nomem(e);
			break;
		}
		for (size_t i = p.start[s]; i < p.start[s + 1]; i++)
			shard_of[i] = s;
		written[nwritten++] = path;
		if (index_only || !shard_is_ours(o, s)) {
			/* another run (process) writes it; the index needs it in place */
			if (index_only && !tpc_exists(path)) {
				ret = tpc_err_at(e, TPC_EIO, path, NULL, "shard '%s' is missing; the index is not written",
						  tpc_path_base(path));
			}
			continue;
		}
		tpc_write_opts wr = o ? *o : (tpc_write_opts){0};
		if (resume && tpc_exists(path)) {
			if (tpc_ckpt_file_holds(path, ck, p.all + p.start[s], p.start[s + 1] - p.start[s])) {
				if (o->kept)
					(*o->kept)++;
				continue; /* an interrupted run's shard, exactly this one: kept */
			}
			wr.flags |= TPC_W_FORCE; /* an interrupted run's, not this one: replaced */
		}
		ret = inner->write(ck, p.all + p.start[s], p.start[s + 1] - p.start[s], path, &wr, e);
		ours[s] = !ret;
	}
	if (!ret && p.nshard > 1 && !no_index) {
		/* sort indices 0..nsel by name */
		size_t nlisted = 0;
		for (size_t i = 0; i < nsel; i++)
			if (p.listed[i])
				byname[nlisted++] = (int64_t)i;
		sort_by_name_ck = ck;
		sort_by_name_all = p.all;
		qsort(byname, nlisted, sizeof(*byname), cmp_by_name);
		for (size_t k = 0; k < nlisted; k++) {
			size_t i = (size_t)byname[k];
			const char *tn = ck->t[p.all[i]].name;
			tpc_buf_adds(&idx, k ? ",\n    " : "\n    ");
			tpc_buf_json_str(&idx, tn, strlen(tn), true);
			tpc_buf_adds(&idx, ": ");
			tpc_buf_json_str(&idx, tpc_path_base(written[shard_of[i]]),
					 strlen(tpc_path_base(written[shard_of[i]])), true);
		}
		tpc_buf_adds(&idx, nsel ? "\n  }\n}\n" : "}\n}\n");
		if (idx.oom) {
			ret = tpc_err_nomem(e);
		} else {
			char iname[256];
			snprintf(iname, sizeof(iname), "%s%s.index.json", p.prefix, p.ext);
			char *ip = tpc_path_join(dir, iname);
			if (!ip)
				ret = tpc_err_nomem(e);
			else
				ret = tpc_write_file_atomic(ip, idx.p, idx.len,
							    (o && (o->flags & TPC_W_FORCE)) ? TPC_OUT_FORCE : 0, e);
			free(ip);
		}
	}
	free(byname);
	free(shard_of);
	/* the set is complete or absent: remove the shards this run wrote; but
	 * the disk is full: the finished ones stay for a resume (not under
	 * mpirun, where the job takes back what it wrote) */
	bool keep = ret && tpc_out_no_room(e) && (!o || o->procs <= 1);
	for (size_t i = 0; ret && i < nwritten; i++)
		if (ours[i] && keep && o && o->left)
			(*o->left)++;
		else if (ours[i] && !keep)
			unlink(written[i]);
out:
	free_list(written, nwritten);
	free(ours);
	pack_release(&p);
	tpc_buf_release(&idx);
	return ret;
}

static const char *const hf_parts[] = {".index.json", NULL};

const tpc_format tpc_fmt_hf_index = {
	.name = "hf-index", .desc = "Hugging Face sharded checkpoint (directory or *.index.json)",
	.detect = detect, .open = hf_open, .write = hf_write, .part_exts = hf_parts,
	.index = true,
};
