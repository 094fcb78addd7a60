/* safetensors.c - safetensors reader and writer (FORMATS.md §3).
 *
 * The reader builds the whole tensor table from the header, then validates it
 * as a unit the way the reference implementation does (sorted by offset, each
 * tensor starting where the previous ended, the file ending at the last one),
 * plus what the reference leaves out: duplicate names, unknown keys, and
 * non-integer numbers are rejected, so no two parsers can disagree on what a
 * file holds. Tensor bytes are never touched: they stay in the mapping. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "torch/torch.h"
#include "tpc_buf.h"
#include "tpc_util.h"

#define ALIAS_META "tpconv.aliases" /* --dedup-tied: {"alias": "stored name"} */
#define FLAGS_META "tpconv.tensor_flags" /* {"name": "parameter,requires_grad"}: torch attributes */
#define MAX_EXACT 9007199254740992.0 /* 2^53: beyond this a JSON number is not exact in a double */

static const char *const st_exts[] = {".safetensors", NULL};

static int detect(const char *path, const uint8_t *head, size_t n)
{
	(void)path;
	if (!head || n < 10)
		return 0;
	uint64_t N = tpc_rd64le(head);
	/* The first non-space header byte must open the JSON object. A length
	 * over the cap still scores, so the reader can say what is wrong. */
	for (size_t i = 8; i < n; i++) {
		if (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')
			continue;
		if (head[i] != '{')
			return 0;
		return (N >= 2 && N <= TPC_ST_MAX_HEADER) ? 90 : 60;
	}
	return 0;
}

static int get_u64(const cJSON *v, uint64_t *out)
{
	if (!cJSON_IsNumber(v))
		return -1;
	double d = v->valuedouble;
	if (!(d >= 0) || d > MAX_EXACT || d != (double)(uint64_t)d)
		return -1;
	*out = (uint64_t)d;
	return 0;
}

static int cmp_str_ptr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Duplicate __metadata__ keys, found by sorting: a pairwise check made a
 * header with 100 000 keys take 40 s. */
static int meta_unique(const cJSON *meta, const char *path, tpc_err *e)
{
	size_t n = (size_t)cJSON_GetArraySize(meta), i = 0;
	int ret = 0;
	const char **k = tpc_calloc(n ? n : 1, sizeof(*k));
	if (!k)
		return tpc_err_nomem(e);
	for (const cJSON *m = meta->child; m && i < n; m = m->next)
		k[i++] = m->string;
	qsort(k, i, sizeof(*k), cmp_str_ptr);
	for (size_t j = 1; j < i && !ret; j++)
		if (!strcmp(k[j - 1], k[j]))
			ret = TPC_CORRUPT(e, path, 8, NULL, "duplicate __metadata__ key '%s'", k[j]);
	free(k);
	return ret;
}

/* Does the JSON text hold a "\u0000" escape? cJSON ends the decoded string
 * there, so "a\u0000b" would silently be read as "a" while other readers
 * keep the whole name: a parser differential, refused. */
static bool json_has_nul_escape(const char *s, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		if (s[i] == '\\') {
			if (s[i + 1] == 'u' && i + 5 < n && !memcmp(s + i + 2, "0000", 4))
				return true;
			i++; /* the escaped character */
		}
	return false;
}

typedef struct entry {
	const char *name;
	uint64_t begin, end;
	int64_t index;
} entry;

static int cmp_entry(const void *a, const void *b)
{
	const entry *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return 0;
}

/* The 8-byte length and the JSON header it announces, parsed into *root (a
 * JSON object) with *data0 where the tensor data begins. */
static int parse_header(const uint8_t *p, uint64_t n, const char *path, cJSON **root,
			uint64_t *data0, tpc_err *e)
{
	int ret = 0;
	uint64_t N;
	const char *end = NULL;

	if (n >= 23 && !memcmp(p, "version https://git-lfs", 23))
		return TPC_CORRUPT(e, path, 0, NULL,
				   "this is a Git LFS pointer, not the checkpoint; run 'git lfs pull'");
	if (n < 8)
		return TPC_CORRUPT(e, path, 0, NULL,
				   "file is %llu bytes, too short for the 8-byte safetensors header length",
				   (unsigned long long)n);
	N = tpc_rd64le(p);
	/* a length whose 8 bytes are all text is the start of a text file (a
	 * README, an HTML error page saved under the name), not a length */
	bool text = N > n - 8;
	for (int i = 0; i < 8 && text; i++)
		text = (p[i] >= 0x20 && p[i] < 0x7f) || p[i] == '\t' || p[i] == '\n' || p[i] == '\r';
	if (text) {
		char head[9], shown[32];
		memcpy(head, p, 8);
		head[8] = 0;
		tpc_sanitize(shown, sizeof(shown), head);
		return TPC_CORRUPT(e, path, 0, NULL,
				   "not a safetensors file: it starts with the text '%s' where the 8-byte header length should be",
				   shown);
	}
	if (N > TPC_ST_MAX_HEADER)
		return TPC_CORRUPT(e, path, 0, NULL,
				   "header length %llu exceeds the %llu-byte limit", (unsigned long long)N,
				   TPC_ST_MAX_HEADER);
	if (N > n - 8)
		return TPC_CORRUPT(e, path, 0, NULL,
				   "header length %llu runs past the end of the file (%llu bytes)",
				   (unsigned long long)N, (unsigned long long)n);
	*data0 = 8 + N;
	if (!tpc_utf8_valid((const char *)p + 8, (size_t)N))
		return TPC_CORRUPT(e, path, 8, NULL, "header is not valid UTF-8");
	if (json_has_nul_escape((const char *)p + 8, (size_t)N))
		return TPC_CORRUPT(e, path, 8, NULL,
				   "header has a NUL character (\\u0000) in a string; names and metadata with NUL are refused");
	*root = cJSON_ParseWithLengthOpts((const char *)p + 8, (size_t)N, &end, 0);
	if (!*root) {
		int64_t off = end ? 8 + (int64_t)(end - (const char *)p - 8) : 8;
		ret = TPC_CORRUPT(e, path, off, NULL, "header is not valid JSON");
		goto out;
	}
	for (const char *q = end; q < (const char *)p + *data0; q++)
		if (*q != ' ' && *q != '\t' && *q != '\n' && *q != '\r' && *q != '\0') {
			ret = TPC_CORRUPT(e, path, q - (const char *)p, NULL,
					  "unexpected bytes after the header's JSON object");
			goto out;
		}
	if (!cJSON_IsObject(*root))
		ret = TPC_CORRUPT(e, path, 8, NULL, "header is not a JSON object");
out:
	return ret;
}

/* __metadata__: null, or an object of unique string values, which become the
 * checkpoint's metadata. */
static int read_metadata(tpc_ckpt *ck, const cJSON *it, const char *path, tpc_err *e)
{
	int ret = 0;
	if (cJSON_IsNull(it))
		goto out;
	if (!cJSON_IsObject(it)) {
		ret = TPC_CORRUPT(e, path, 8, NULL, "__metadata__ is not an object");
		goto out;
	}
	for (cJSON *m = it->child; m; m = m->next) {
		if (!cJSON_IsString(m)) {
			ret = TPC_CORRUPT(e, path, 8, NULL,
					  "__metadata__ value for '%s' is not a string", m->string);
			goto out;
		}
	}
	if ((ret = meta_unique(it, path, e)))
		goto out;
	for (cJSON *m = it->child; m; m = m->next)
		if ((ret = tpc_ckpt_meta_set(ck, m->string, m->valuestring, e)))
			goto out;
out:
	return ret;
}

/* The keys of one tensor's entry: exactly "dtype" (a string), "shape" and
 * "data_offsets" (arrays), each once. */
static int entry_keys(const cJSON *it, const char *name, const char *path, cJSON **dt,
		      cJSON **sh, cJSON **off, tpc_err *e)
{
	*dt = *sh = *off = NULL;
	for (cJSON *f = it->child; f; f = f->next) {
		cJSON **slot = !strcmp(f->string, "dtype") ? dt
			     : !strcmp(f->string, "shape") ? sh
			     : !strcmp(f->string, "data_offsets") ? off : NULL;
		if (!slot)
			return TPC_CORRUPT(e, path, 8, name, "unexpected key '%s' in the header entry",
					   f->string);
		if (*slot)
			return TPC_CORRUPT(e, path, 8, name, "duplicate key '%s'", f->string);
		*slot = f;
	}
	if (!cJSON_IsString(*dt) || !cJSON_IsArray(*sh) || !cJSON_IsArray(*off))
		return TPC_CORRUPT(e, path, 8, name,
				   "header entry needs \"dtype\" (string), \"shape\" and \"data_offsets\" (arrays)");
	return 0;
}

/* One tensor's header entry, checked and added to the checkpoint; *ent
 * records where its bytes lie for the layout check. */
static int add_entry(tpc_ckpt *ck, const cJSON *it, int src, uint64_t data0, const char *path,
		     entry *ent, tpc_err *e)
{
	int ret = 0;
	const char *name = it->string;
	cJSON *dt, *sh, *off;

	if (!cJSON_IsObject(it)) {
		ret = TPC_CORRUPT(e, path, 8, name, "header entry is not an object");
		goto out;
	}
	if ((ret = entry_keys(it, name, path, &dt, &sh, &off, e)))
		goto out;
	tpc_dtype dtype = tpc_dtype_from_st(dt->valuestring);
	if (!dtype) {
		ret = TPC_CORRUPT(e, path, 8, name, "unknown dtype '%s'", dt->valuestring);
		goto out;
	}
	int ndim = cJSON_GetArraySize(sh);
	int64_t shape[TPC_MAX_NDIM];
	if (ndim > TPC_MAX_NDIM) {
		ret = TPC_CORRUPT(e, path, 8, name, "%d dimensions (at most %d supported)", ndim,
				  TPC_MAX_NDIM);
		goto out;
	}
	int d = 0;
	for (cJSON *s = sh->child; s; s = s->next, d++) {
		uint64_t v;
		if (get_u64(s, &v)) {
			ret = TPC_CORRUPT(e, path, 8, name,
					  "shape[%d] is not an integer between 0 and 2^53", d);
			goto out;
		}
		shape[d] = (int64_t)v;
	}
	uint64_t b, en;
	if (cJSON_GetArraySize(off) != 2 || get_u64(off->child, &b) || get_u64(off->child->next, &en)) {
		ret = TPC_CORRUPT(e, path, 8, name, "data_offsets must be two integers [begin, end]");
		goto out;
	}
	if (en < b) {
		ret = TPC_CORRUPT(e, path, (int64_t)(data0 + b), name,
				  "data_offsets [%llu, %llu] end before they begin",
				  (unsigned long long)b, (unsigned long long)en);
		goto out;
	}
	int64_t ix = tpc_ckpt_add_tensor(ck, name, dtype, ndim, shape, NULL, src, data0 + b, e);
	if (ix < 0) {
		ret = (int)ix;
		tpc_err_path(e, path);
		tpc_err_offset(e, 8);
		goto out;
	}
	if (ck->t[ix].nbytes != en - b) {
		char sbuf[128];
		ret = TPC_CORRUPT(e, path, (int64_t)(data0 + b), name,
				  "shape %s of %s needs %llu bytes but data_offsets [%llu, %llu] hold %llu",
				  tpc_shape_str(&ck->t[ix], sbuf, sizeof(sbuf)), tpc_dtype_name(dtype),
				  (unsigned long long)ck->t[ix].nbytes, (unsigned long long)b,
				  (unsigned long long)en, (unsigned long long)(en - b));
		goto out;
	}
	ent->name = ck->t[ix].name;
	ent->begin = b;
	ent->end = en;
	ent->index = ix;
out:
	return ret;
}

/* The reference rule: sorted by offsets, each tensor begins where the
 * previous one ended, and the file ends where the last one does; this
 * excludes overlaps, holes and reordering. Leaves ents[] sorted. */
static int check_layout(entry *ents, size_t nents, uint64_t data0, uint64_t n, const char *path,
			tpc_err *e)
{
	int ret = 0;
	qsort(ents, nents, sizeof(*ents), cmp_entry);
	uint64_t pos = 0;
	for (size_t i = 0; i < nents; i++) {
		if (ents[i].begin != pos) {
			ret = TPC_CORRUPT(e, path, (int64_t)(data0 + ents[i].begin), ents[i].name,
					  ents[i].begin < pos
						  ? "data_offsets [%llu, %llu] overlap the previous tensor, which ends at %llu"
						  : "data_offsets [%llu, %llu] leave a hole after the previous tensor, which ends at %llu",
					  (unsigned long long)ents[i].begin, (unsigned long long)ents[i].end,
					  (unsigned long long)pos);
			goto out;
		}
		pos = ents[i].end;
	}
	if (data0 + pos != n) {
		if (data0 + pos > n)
			ret = TPC_CORRUPT(e, path, (int64_t)n, nents ? ents[nents - 1].name : NULL,
					  "tensor data ends at %llu but the file is only %llu bytes (truncated?)",
					  (unsigned long long)(data0 + pos), (unsigned long long)n);
		else
			ret = TPC_CORRUPT(e, path, (int64_t)(data0 + pos), NULL,
					  "%llu unexpected bytes after the last tensor (the data should end at %llu)",
					  (unsigned long long)(n - data0 - pos), (unsigned long long)(data0 + pos));
	}
out:
	return ret;
}

/* Keep the checkpoint in file (data) order, as a reader of the file sees it:
 * the tensors added from first_tensor on follow the sorted ents[]. */
static int file_order(tpc_ckpt *ck, size_t first_tensor, const entry *ents, size_t nents,
		      tpc_err *e)
{
	int ret = 0;
	if (nents <= 1)
		return 0;
	int64_t *order = tpc_malloc(ck->n * sizeof(*order));
	if (!order)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < first_tensor; i++)
		order[i] = (int64_t)i;
	for (size_t i = 0; i < nents; i++)
		order[first_tensor + i] = ents[i].index;
	ret = tpc_ckpt_permute(ck, order, e);
	free(order);
	return ret;
}

int tpc_safetensors_from_buffer(tpc_ckpt *ck, const uint8_t *p, uint64_t n, int src,
				const char *path, tpc_err *e)
{
	cJSON *root = NULL;
	entry *ents = NULL;
	size_t nents = 0;
	int ret = 0;
	uint64_t data0 = 0;
	size_t first_tensor = ck->n;
	bool seen_meta = false;

	if ((ret = parse_header(p, n, path, &root, &data0, e)))
		goto out;
	ents = tpc_calloc((size_t)cJSON_GetArraySize(root), sizeof(*ents));
	if (!ents) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (cJSON *it = root->child; it; it = it->next) {
		if (!strcmp(it->string, "__metadata__")) {
			if (seen_meta) {
				ret = TPC_CORRUPT(e, path, 8, NULL, "duplicate __metadata__");
				goto out;
			}
			seen_meta = true;
			if ((ret = read_metadata(ck, it, path, e)))
				goto out;
			continue;
		}
		if ((ret = add_entry(ck, it, src, data0, path, &ents[nents], e)))
			goto out;
		nents++;
	}
	if (!(ret = check_layout(ents, nents, data0, n, path, e)))
		ret = file_order(ck, first_tensor, ents, nents, e);
out:
	cJSON_Delete(root);
	free(ents);
	return ret;
}

static int st_open(tpc_ckpt *ck, const char *path, const tpc_open_opts *o, tpc_err *e)
{
	int src, ret;
	(void)o;
	if ((ret = tpc_ckpt_add_file(ck, path, &src, e)))
		return ret;
	const tpc_map *m = tpc_ckpt_source(ck, src);
	ret = tpc_safetensors_from_buffer(ck, m->data, m->size, src, path, e);
	if (!ret)
		ret = tpc_ckpt_validate(ck, e);
	const char *al = ret ? NULL : tpc_ckpt_meta_get(ck, ALIAS_META);
	if (al) {
		/* --dedup-tied: names stored once under another name */
		cJSON *j = cJSON_Parse(al);
		for (cJSON *it = j ? j->child : NULL; it && !ret; it = it->next) {
			int64_t k = cJSON_IsString(it) ? tpc_ckpt_find(ck, it->valuestring) : -1;
			if (k < 0) {
				ret = TPC_CORRUPT(e, path, 8, it->string, "alias of a tensor that is not in the file");
				break;
			}
			if (ck->t[k].storage < 0) {
				/* one storage for the pair, so a torch output keeps them tied */
				tpc_tensor *t = &ck->t[k];
				int64_t s = tpc_ckpt_add_storage(ck, t->name, NULL, t->src_dtype, t->src, t->offset,
								 t->nbytes, e);
				if (s < 0) {
					ret = (int)s;
					break;
				}
				ck->t[k].storage = s;
			}
			tpc_tensor copy = ck->t[k];
			int64_t ix = tpc_ckpt_add_copy(ck, it->string, &copy, e);
			if (ix < 0)
				ret = (int)ix;
		}
		if (!j && !ret)
			ret = TPC_CORRUPT(e, path, 8, NULL, "__metadata__ '%s' is not a JSON object", ALIAS_META);
		cJSON_Delete(j);
		if (!ret)
			tpc_ckpt_meta_del(ck, ALIAS_META);
	}
	const char *fl = ret ? NULL : tpc_ckpt_meta_get(ck, FLAGS_META);
	if (fl) {
		cJSON *j = cJSON_Parse(fl);
		for (cJSON *it = j ? j->child : NULL; it; it = it->next) {
			int64_t k = tpc_ckpt_find(ck, it->string);
			if (k < 0 || !cJSON_IsString(it))
				continue; /* informational: a renamed or dropped tensor loses nothing */
			if (strstr(it->valuestring, "parameter"))
				ck->t[k].flags |= TPC_TF_PARAMETER;
			if (strstr(it->valuestring, "requires_grad"))
				ck->t[k].flags |= TPC_TF_REQUIRES_GRAD;
		}
		cJSON_Delete(j);
		tpc_ckpt_meta_del(ck, FLAGS_META);
	}
	const char *tree = ret ? NULL : tpc_ckpt_meta_get(ck, TPC_TREE_META);
	if (tree) {
		/* written by tpconv from a pickled checkpoint: restore its object tree */
		ret = tpc__tree_from_meta(ck, tree, e);
		if (!ret)
			tpc_ckpt_meta_del(ck, TPC_TREE_META);
		else
			tpc_err_path(e, path);
	}
	return ret;
}

/* ---- writer ---- */

/* qsort's context; thread-local so rank files can be written in parallel */
static _Thread_local const tpc_ckpt *sort_ck;
static int cmp_canon(const void *a, const void *b)
{
	const tpc_tensor *x = &sort_ck->t[*(const int64_t *)a], *y = &sort_ck->t[*(const int64_t *)b];
	int rx = tpc_dtype_get(x->dtype)->st_rank, ry = tpc_dtype_get(y->dtype)->st_rank;
	if (rx != ry)
		return rx > ry ? -1 : 1;
	return strcmp(x->name, y->name);
}

void tpc_safetensors_sort(const tpc_ckpt *ck, int64_t *sel, size_t n)
{
	sort_ck = ck; /* qsort has no context argument in C11 */
	qsort(sel, n, sizeof(*sel), cmp_canon);
	sort_ck = NULL;
}

/* The header, with up to two extra metadata pairs (xk[i] NULL: none). */
#define NX 3
static int header_ex(const tpc_ckpt *ck, const int64_t *order, size_t n, const char *const xk[NX],
		     const char *const xv[NX], char **out, size_t *len, tpc_err *e)
{
	tpc_buf b = TPC_BUF_INIT;
	uint64_t pos = 0;
	const char *fmt = tpc_ckpt_meta_get(ck, "format");
	tpc_buf_adds(&b, "{\"__metadata__\":{\"format\":");
	tpc_buf_json_str(&b, fmt ? fmt : "pt", fmt ? strlen(fmt) : 2, false);
	for (int x = 0; xk && x < NX; x++) {
		if (!xk[x])
			continue;
		tpc_buf_addc(&b, ',');
		tpc_buf_json_str(&b, xk[x], strlen(xk[x]), false);
		tpc_buf_addc(&b, ':');
		tpc_buf_json_str(&b, xv[x], strlen(xv[x]), false);
	}
	for (size_t i = 0; i < ck->nmeta; i++) {
		bool skip = !strcmp(ck->meta_k[i], "format");
		for (int x = 0; xk && x < NX && !skip; x++)
			skip = xk[x] && !strcmp(ck->meta_k[i], xk[x]);
		if (skip)
			continue;
		tpc_buf_addc(&b, ',');
		tpc_buf_json_str(&b, ck->meta_k[i], strlen(ck->meta_k[i]), false);
		tpc_buf_addc(&b, ':');
		tpc_buf_json_str(&b, ck->meta_v[i], strlen(ck->meta_v[i]), false);
	}
	tpc_buf_addc(&b, '}');
	for (size_t i = 0; i < n; i++) {
		const tpc_tensor *t = &ck->t[order[i]];
		const char *dn = tpc_dtype_get(t->dtype)->st;
		if (t->flags & TPC_TF_QUANTIZED) {
			tpc_buf_release(&b);
			return tpc_err_at(e, TPC_EINPUT, NULL, t->name,
				    "quantized tensor (%s): tpconv does not write quantized tensors; use --dequantize",
				    tpc_dtype_name(t->dtype));
		}
		if (!dn) {
			tpc_buf_release(&b);
			return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "dtype %s cannot be stored in safetensors",
				    tpc_dtype_name(t->dtype));
		}
		if (t->flags & TPC_TF_NODATA) {
			tpc_buf_release(&b);
			return tpc_err_at(e, TPC_EINPUT, NULL, t->name, "tensor has no data (meta tensor)");
		}
		tpc_buf_addc(&b, ',');
		tpc_buf_json_str(&b, t->name, strlen(t->name), false);
		tpc_buf_addf(&b, ":{\"dtype\":\"%s\",\"shape\":[", dn);
		for (int d = 0; d < t->ndim; d++)
			tpc_buf_addf(&b, d ? ",%lld" : "%lld", (long long)t->shape[d]);
		tpc_buf_addf(&b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)pos,
			     (unsigned long long)(pos + t->nbytes));
		pos += t->nbytes;
	}
	tpc_buf_addc(&b, '}');
	tpc_buf_addn(&b, ' ', (8 - b.len % 8) % 8);
	if (b.oom) {
		tpc_buf_release(&b);
		return tpc_err_nomem(e);
	}
	if (b.len > TPC_ST_MAX_HEADER) {
		size_t l = b.len;
		tpc_buf_release(&b);
		return tpc_err_set(e, TPC_EINPUT,
				   "the safetensors header would be %zu bytes, over the 100 MB limit readers enforce; write HF shards (--max-shard-size) or fewer tensors",
				   l);
	}
	*out = tpc_buf_detach(&b, len);
	return *out ? 0 : tpc_err_nomem(e);
}

int tpc_safetensors_header(const tpc_ckpt *ck, const int64_t *order, size_t n, char **out,
			   size_t *len, tpc_err *e)
{
	return header_ex(ck, order, n, NULL, NULL, out, len, e);
}

/* Pad the header with spaces (as the format allows) so the data section
 * starts in the page phase of the tensors' sources, where the in-kernel copy
 * runs fastest (tpc_ckpt_copy_residue): under 4 KiB more header, and only in
 * files with copies of 1 MiB or more. */
static int pad_for_copy(const tpc_ckpt *ck, const int64_t *order, size_t n, char **hdr, size_t *hlen, tpc_err *e)
{
	int64_t r = tpc_ckpt_copy_residue(ck, order, n, 8);
	if (r < 0)
		return 0;
	uint64_t pad = ((uint64_t)r - (8 + *hlen)) & (TPC_PAGE_PHASE - 1);
	if (!pad || *hlen + pad > TPC_ST_MAX_HEADER)
		return 0;
	char *p = tpc_realloc(*hdr, *hlen + pad);
	if (!p)
		return tpc_err_nomem(e);
	memset(p + *hlen, ' ', pad);
	*hdr = p;
	*hlen += pad;
	return 0;
}

/* What a file holds before its data: the tensors in the order written and
 * the header that describes them. */
typedef struct st_plan {
	int64_t *order;
	size_t n;
	char *hdr;
	size_t hlen;
} st_plan;

static void st_plan_release(st_plan *pl)
{
	free(pl->order);
	free(pl->hdr);
	memset(pl, 0, sizeof(*pl));
}

/* The first of each group of tied tensors among order[0..*n) stays (the one
 * Hugging Face's save_pretrained keeps when the head comes last, as in every
 * state dict of a causal LM); the others leave order and are recorded as
 * {"alias": "stored name"} in *aliases. */
static int dedup_tied(const tpc_ckpt *ck, int64_t *order, size_t *n, tpc_buf *aliases, tpc_err *e)
{
	int64_t *first = tpc_malloc((*n + 1) * sizeof(int64_t)), *was = tpc_malloc((*n + 1) * sizeof(int64_t));
	size_t kept = 0;
	int ret = first && was ? tpc_ckpt_ties(ck, order, *n, first, e) : tpc_err_nomem(e);
	if (!ret) {
		memcpy(was, order, *n * sizeof(int64_t));
		tpc_buf_adds(aliases, "{");
	}
	for (size_t i = 0; i < *n && !ret; i++) {
		const char *name = ck->t[was[i]].name, *to = ck->t[was[first[i]]].name;
		if (first[i] == (int64_t)i) {
			order[kept++] = was[i];
			continue;
		}
		tpc_buf_adds(aliases, aliases->len > 1 ? "," : "");
		tpc_buf_json_str(aliases, name, strlen(name), false);
		tpc_buf_addc(aliases, ':');
		tpc_buf_json_str(aliases, to, strlen(to), false);
	}
	if (!ret) {
		tpc_buf_addc(aliases, '}');
		*n = kept;
	}
	if (!ret && aliases->oom)
		ret = tpc_err_nomem(e);
	free(first);
	free(was);
	return ret;
}

static int st_prepare(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const tpc_write_opts *o, st_plan *pl,
		      tpc_err *e)
{
	int64_t *order = NULL;
	char *hdr = NULL, *tree = NULL;
	size_t hlen = 0, nsel_all;
	tpc_buf aliases = TPC_BUF_INIT, flags = TPC_BUF_INIT;
	int ret;
	memset(pl, 0, sizeof(*pl));
	if ((ret = tpc_ckpt_check_writable(ck, e)))
		return ret;
	if (!sel)
		nsel = ck->n;
	nsel_all = nsel;
	order = tpc_malloc((nsel ? nsel : 1) * sizeof(*order));
	if (!order)
		return tpc_err_nomem(e);
	for (size_t i = 0; i < nsel; i++)
		order[i] = sel ? sel[i] : (int64_t)i;
	/* safetensors forbids shared bytes: each tied name keeps its own copy,
	 * or with TPC_W_DEDUP_TIED one copy and an alias in the metadata */
	if (o && (o->flags & TPC_W_DEDUP_TIED) && (ret = dedup_tied(ck, order, &nsel, &aliases, e)))
		goto out;
	tpc_safetensors_sort(ck, order, nsel);
	/* non-tensor values of a pickled checkpoint travel as JSON metadata */
	if ((!sel || nsel_all == ck->n) && (ret = tpc__tree_to_meta(ck, &tree, e)))
		goto out;
	for (size_t i = 0; i < nsel; i++) {
		const tpc_tensor *t = &ck->t[order[i]];
		if (!(t->flags & (TPC_TF_PARAMETER | TPC_TF_REQUIRES_GRAD)))
			continue;
		tpc_buf_adds(&flags, flags.len ? "," : "{");
		tpc_buf_json_str(&flags, t->name, strlen(t->name), false);
		tpc_buf_addf(&flags, ":\"%s%s%s\"", (t->flags & TPC_TF_PARAMETER) ? "parameter" : "",
			     (t->flags & TPC_TF_PARAMETER) && (t->flags & TPC_TF_REQUIRES_GRAD) ? "," : "",
			     (t->flags & TPC_TF_REQUIRES_GRAD) ? "requires_grad" : "");
	}
	if (flags.len)
		tpc_buf_addc(&flags, '}');
	{
		const char *xk[NX] = {tree ? TPC_TREE_META : NULL, aliases.len > 2 ? ALIAS_META : NULL,
				      flags.len ? FLAGS_META : NULL};
		const char *xv[NX] = {tree, aliases.p, flags.p};
		if ((ret = header_ex(ck, order, nsel, xk, xv, &hdr, &hlen, e)))
			goto out;
	}
	if ((ret = pad_for_copy(ck, order, nsel, &hdr, &hlen, e)))
		goto out;
	pl->order = order;
	pl->n = nsel;
	pl->hdr = hdr;
	pl->hlen = hlen;
	order = NULL;
	hdr = NULL;
out:
	free(order);
	free(hdr);
	free(tree);
	tpc_buf_release(&aliases);
	tpc_buf_release(&flags);
	return ret;
}

/* Open the output, write the header and set the file's size (known now, so
 * no direct write extends it). */
static int st_begin(const tpc_ckpt *ck, const st_plan *pl, const char *path, const tpc_write_opts *o, tpc_out *out,
		    tpc_err *e)
{
	uint8_t lenb[8];
	int ret;
	if ((ret = tpc_out_open(out, path, (o && (o->flags & TPC_W_FORCE)) ? TPC_OUT_FORCE : 0, e)))
		return ret;
	tpc_wr64le(lenb, pl->hlen);
	if ((ret = tpc_out_write(out, lenb, 8, e)) || (ret = tpc_out_write(out, pl->hdr, pl->hlen, e)))
		return ret;
	uint64_t total = out->size;
	for (size_t i = 0; i < pl->n; i++)
		total += ck->t[pl->order[i]].nbytes;
	return tpc_out_reserve(out, total, e);
}

static int st_write(const tpc_ckpt *ck, const int64_t *sel, size_t nsel, const char *path,
		    const tpc_write_opts *o, tpc_err *e)
{
	st_plan pl;
	tpc_out out;
	int ret;
	memset(&out, 0, sizeof(out));
	out.fd = -1;
	if ((ret = st_prepare(ck, sel, nsel, o, &pl, e)))
		return ret;
	if ((ret = st_begin(ck, &pl, path, o, &out, e)))
		goto out;
	for (size_t i = 0; i < pl.n; i++) {
		const tpc_tensor *t = &ck->t[pl.order[i]];
		if ((ret = tpc_ckpt_write_tensor(ck, t, &out, e))) {
			tpc_err_tensor(e, t->name);
			goto out;
		}
		tpc_progress_add(o ? o->progress : NULL, t->nbytes);
	}
	if (o && o->before_commit && (ret = o->before_commit(o->before_commit_ctx, e)))
		goto out;
	ret = tpc_out_commit(&out, e);
out:
	tpc_out_abort(&out);
	st_plan_release(&pl);
	return ret;
}

/* Several files in step (tpc_format.write_many): tensor i of every file,
 * then tensor i + 1, so that the rank slices of a row-parallel weight, at
 * the same place in every rank's sorted list, are read once for all of them
 * (tpc_ckpt_write_joint). */
static int st_write_many(const tpc_ckpt *const *ck, const char *const *path, int n, const tpc_write_opts *o,
			 bool *committed, int *bad, tpc_err *e)
{
	st_plan *pl = tpc_calloc((size_t)n, sizeof(*pl));
	tpc_out *out = tpc_calloc((size_t)n, sizeof(*out));
	tpc_out **op = tpc_calloc((size_t)n, sizeof(*op));
	const tpc_ckpt **cs = tpc_calloc((size_t)n, sizeof(*cs));
	const tpc_tensor **ts = tpc_calloc((size_t)n, sizeof(*ts));
	int *who = tpc_calloc((size_t)n, sizeof(*who));
	int ret = 0;
	size_t most = 0;
	*bad = 0;
	if (!pl || !out || !op || !cs || !ts || !who) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	for (int k = 0; k < n; k++) {
		out[k].fd = -1;
		committed[k] = false;
	}
	for (int k = 0; k < n && !ret; k++) {
		if ((ret = st_prepare(ck[k], NULL, 0, o, &pl[k], e)) ||
		    (ret = st_begin(ck[k], &pl[k], path[k], o, &out[k], e)))
			*bad = k;
		most = pl[k].n > most ? pl[k].n : most;
	}
	for (size_t i = 0; i < most && !ret; i++) {
		int m = 0, at = 0;
		bool joint = false;
		for (int k = 0; k < n; k++) {
			if (i >= pl[k].n)
				continue;
			who[m] = k;
			cs[m] = ck[k];
			ts[m] = &ck[k]->t[pl[k].order[i]];
			op[m++] = &out[k];
		}
		if (m > 1 && (ret = tpc_ckpt_write_joint(cs, ts, op, m, &joint, &at, e))) {
			*bad = who[at];
			tpc_err_tensor(e, ts[at]->name);
			break;
		}
		for (int j = 0; j < m && !joint && !ret; j++)
			if ((ret = tpc_ckpt_write_tensor(cs[j], ts[j], op[j], e))) {
				*bad = who[j];
				tpc_err_tensor(e, ts[j]->name);
			}
		for (int j = 0; j < m && !ret; j++)
			tpc_progress_add(o ? o->progress : NULL, ts[j]->nbytes);
	}
	for (int k = 0; k < n && !ret; k++)
		if (o && o->before_commit && (ret = o->before_commit(o->before_commit_ctx, e)))
			*bad = k;
	for (int k = 0; k < n && !ret; k++) {
		if ((ret = tpc_out_commit(&out[k], e)))
			*bad = k;
		else
			committed[k] = true;
	}
out:
	for (int k = 0; k < n && out; k++)
		tpc_out_abort(&out[k]);
	for (int k = 0; k < n && pl; k++)
		st_plan_release(&pl[k]);
	free(pl);
	free(out);
	free(op);
	free(cs);
	free(ts);
	free(who);
	return ret;
}

const tpc_format tpc_fmt_safetensors = {
	.name = "safetensors", .desc = "safetensors (one file)",
	.detect = detect, .open = st_open, .write = st_write, .write_many = st_write_many, .exts = st_exts,
	.rank_file = true, .gates_commit = true,
};
