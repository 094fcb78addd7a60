/* tpc_extras.c - companion files of a model folder; see tpc_extras.h. */
#include "tpc_extras.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tpc_buf.h"
#include "tpc_cfg.h"
#include "tpc_ckpt.h"
#include "tpc_format.h"
#include "tpc_io.h"
#include "tpc_util.h"

bool tpc_extras_is_companion(const char *name)
{
	/* weights are what the format registry reads: a .gguf, a .distcp or a
	 * format added later is never copied as a companion */
	if (!*name || name[0] == '.' || tpc_format_weight_name(name))
		return false;
	/* a training run's bookkeeping, not the model's: DeepSpeed's tag file and
	 * consolidation script, Megatron's tracker, the Trainer's state */
	static const char *const training[] = {"tpconv-manifest.json", TPC_EXTRAS_KEPT_CONFIG, "latest", "zero_to_fp32.py",
					       "latest_checkpointed_iteration.txt", "trainer_state.json", NULL};
	for (int i = 0; training[i]; i++)
		if (!strcmp(name, training[i]))
			return false;
	return true;
}

char *tpc_extras_megatron_iter(const char *dir)
{
	char *t = tpc_path_join(dir, "latest_checkpointed_iteration.txt"), *text = NULL, *out = NULL;
	size_t len;
	tpc_err e;
	tpc_err_init(&e);
	if (t && tpc_exists(t) && !tpc_read_file(t, 4096, &text, &len, &e)) {
		char name[32], *end;
		while (len && (text[len - 1] == '\n' || text[len - 1] == ' ' || text[len - 1] == '\r'))
			text[--len] = '\0';
		unsigned long long it = strtoull(text, &end, 10);
		if (!strcmp(text, "release"))
			out = tpc_path_join(dir, "release");
		else if (len && !*end && it <= 9999999999ull && snprintf(name, sizeof(name), "iter_%07llu", it) > 0)
			out = tpc_path_join(dir, name);
	}
	free(t);
	free(text);
	return out;
}

static const tpc_value *ns_field(const tpc_value *args, const char *k)
{
	if (!args || args->kind != TPC_V_CALL || args->n < 3 || args->items[2]->kind != TPC_V_DICT)
		return NULL;
	return tpc_value_get(args->items[2], k);
}

static int64_t ns_int(const tpc_value *args, const char *k)
{
	const tpc_value *v = ns_field(args, k);
	return v && v->kind == TPC_V_INT && v->ival > 0 ? v->ival : 0;
}

bool tpc_extras_megatron_args(const tpc_value *root, tpc_megatron_args *a)
{
	const tpc_value *args = root && root->kind == TPC_V_DICT ? tpc_value_get(root, "args") : NULL;
	memset(a, 0, sizeof(*a));
	if (!args || !ns_field(args, "num_attention_heads"))
		return false;
	const tpc_value *gqa = ns_field(args, "group_query_attention");
	a->heads = ns_int(args, "num_attention_heads");
	a->query_groups = gqa && gqa->kind == TPC_V_BOOL && !gqa->ival ? a->heads : ns_int(args, "num_query_groups");
	if (!a->query_groups && !gqa)
		a->query_groups = a->heads; /* an older Megatron without GQA */
	a->hidden = ns_int(args, "hidden_size");
	a->kv_channels = ns_int(args, "kv_channels");
	if (!a->kv_channels && a->heads && a->hidden % a->heads == 0)
		a->kv_channels = a->hidden / a->heads;
	a->ffn_hidden = ns_int(args, "ffn_hidden_size");
	a->layers = ns_int(args, "num_layers");
	a->tp = ns_int(args, "tensor_model_parallel_size");
	a->pp = ns_int(args, "pipeline_model_parallel_size");
	a->padded_vocab = ns_int(args, "padded_vocab_size");
	a->experts = ns_int(args, "num_experts");
	a->ep = ns_int(args, "expert_model_parallel_size");
	a->vpp = ns_int(args, "virtual_pipeline_model_parallel_size");
	a->etp = ns_int(args, "expert_tensor_parallel_size");
	/* transformer_layer.py:65-215 (d98e8a6): a layout, first/last stage
	 * counts (their config names and the args'), or the embedding or loss
	 * counted as a layer */
	/* first/last stage counts last: uneven names one of them only when no
	 * other of these is set (readers that follow first/last refuse the others) */
	static const char *const uneven[] = {"pipeline_model_parallel_layout", "num_layers_in_first_pipeline_stage",
					     "num_layers_in_last_pipeline_stage", "account_for_embedding_in_pipeline_split",
					     "account_for_loss_in_pipeline_split", "decoder_first_pipeline_num_layers",
					     "decoder_last_pipeline_num_layers"};
	for (size_t k = 0; k < sizeof(uneven) / sizeof(*uneven) && !a->uneven; k++) {
		const tpc_value *v = ns_field(args, uneven[k]);
		if (v && v->kind != TPC_V_NONE && !((v->kind == TPC_V_INT || v->kind == TPC_V_BOOL) && !v->ival))
			a->uneven = uneven[k];
	}
	a->first = ns_int(args, "decoder_first_pipeline_num_layers");
	a->last = ns_int(args, "decoder_last_pipeline_num_layers");
	a->vocab = ns_int(args, "orig_vocab_size");
	if (!a->vocab)
		a->vocab = ns_int(args, "true_vocab_size");
	if (!a->vocab && (a->vocab = ns_int(args, "vocab_size"))) {
		const tpc_value *tk = ns_field(args, "tokenizer_type");
		if (tk && tk->kind == TPC_V_STR && tk->len == 13 && !memcmp(tk->str, "NullTokenizer", 13))
			a->vocab++; /* its EOD token comes after the vocab_size others */
	}
	if (a->padded_vocab && a->vocab > a->padded_vocab)
		a->vocab = 0; /* not this embedding's vocabulary */
	return true;
}

void tpc_megatron_chunk_layers(int64_t layers, int64_t pp, int64_t vpp, int64_t first, int64_t last, int64_t p,
			       int64_t v, int64_t *l0, int64_t *n)
{
	*l0 = *n = 0;
	if (pp < 1 || vpp < 1)
		return;
	int64_t f = first > 0 ? first : 0, t = last > 0 ? last : 0, mid = layers - f - t;
	int64_t ms = pp - (first > 0) - (last > 0);
	int64_t total = f / vpp + mid / vpp + t / vpp;
	*l0 = v * total + (p == 0 ? 0 : f / vpp + (p - (first > 0)) * (ms > 0 ? mid / vpp / ms : 0));
	if (p == 0 && first > 0)
		*n = f / vpp;
	else if (p == pp - 1 && last > 0)
		*n = t / vpp;
	else
		*n = ms > 0 ? mid / ms / vpp : 0;
}

int64_t tpc_megatron_chunk_first_layer(int64_t layers, int64_t pp, int64_t vpp, int64_t p, int64_t v)
{
	int64_t l0, n;
	tpc_megatron_chunk_layers(layers, pp, vpp, 0, 0, p, v, &l0, &n);
	return l0;
}

bool tpc_extras_megatron_args_at(const char *path, tpc_megatron_args *a)
{
	char *iter = NULL, *file = NULL;
	bool found = false;
	tpc_ckpt ck;
	tpc_err e;
	memset(a, 0, sizeof(*a));
	tpc_err_init(&e);
	tpc_ckpt_init(&ck);
	if (tpc_is_dir(path)) {
		iter = tpc_extras_megatron_iter(path);
		file = tpc_path_join(iter ? iter : path, "common.pt");
		if (!file || !tpc_exists(file))
			goto out;
	}
	if (!tpc_ckpt_open(&ck, file ? file : path, NULL, &e))
		found = tpc_extras_megatron_args(ck.root, a);
out:
	tpc_ckpt_release(&ck);
	free(file);
	free(iter);
	return found;
}

char *tpc_extras_source_dir(const char *in)
{
	if (tpc_is_dir(in))
		return tpc_strdup(in);
	if (tpc_ends_with(in, ".index.json"))
		return tpc_path_dir(in);
	return NULL;
}

/* The next number of JSON text p..end (outside strings), its length in *len. */
static const char *next_number(const char *p, const char *end, size_t *len)
{
	while (p < end) {
		if (*p == '"') {
			for (p++; p < end && *p != '"'; p++)
				if (*p == '\\')
					p++;
			p++;
		} else if (*p == '-' || (*p >= '0' && *p <= '9')) {
			const char *s = p;
			while (p < end && ((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == '.' ||
					   *p == 'e' || *p == 'E'))
				p++;
			*len = (size_t)(p - s);
			return s;
		} else {
			p++;
		}
	}
	return NULL;
}

/* cJSON prints a number from its double: 30.0 comes back as 30 (transformers 5
 * refuses an int for a float field such as final_logit_softcapping) and a
 * 20-digit integer as 1.2345678901234567e+19. Every number keeps the text the
 * model's config.json gave it instead: the numbers of the text, in document
 * order, are the number items of a depth-first walk of the tree, and each
 * becomes a raw item of its own text (checked to parse to the same value). */
static int keep_number_text(cJSON *node, const char **p, const char *end)
{
	for (cJSON *it = node->child; it; it = it->next) {
		if (it->child && keep_number_text(it, p, end))
			return -1;
		if (!cJSON_IsNumber(it))
			continue;
		size_t len = 0;
		const char *s = next_number(*p, end, &len);
		char *text = s ? tpc_strndup(s, len) : NULL;
		if (!text || strtod(text, NULL) != it->valuedouble) {
			free(text);
			return -1;
		}
		*p = s + len;
		it->type = cJSON_Raw | (it->type & cJSON_StringIsConst);
		it->valuestring = text; /* freed by cJSON_Delete (default hooks) */
	}
	return 0;
}

/* A member set where it is (a new one at the end): the model's key order kept. */
static void set_string(cJSON *j, const char *key, const char *value)
{
	cJSON *v = cJSON_CreateString(value);
	if (v && cJSON_GetObjectItemCaseSensitive(j, key))
		cJSON_ReplaceItemInObjectCaseSensitive(j, key, v);
	else if (v)
		cJSON_AddItemToObject(j, key, v);
}

/* A number as Python's repr writes it where cJSON can tell: integral values
 * as integers, others in the fewest digits that read back the same. */
static void print_number(tpc_buf *b, double v)
{
	char num[40];
	if (v == (double)(int64_t)v && v > -9007199254740992.0 && v < 9007199254740992.0) {
		tpc_buf_addf(b, "%lld", (long long)v);
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(num, sizeof(num), "%.*g", prec, v);
		if (strtod(num, NULL) == v)
			break;
	}
	tpc_buf_adds(b, num);
}

static void print_item(tpc_buf *b, const cJSON *it, int depth)
{
	if (cJSON_IsObject(it) || cJSON_IsArray(it)) {
		bool obj = cJSON_IsObject(it);
		if (!it->child) {
			tpc_buf_adds(b, obj ? "{}" : "[]");
			return;
		}
		tpc_buf_addc(b, obj ? '{' : '[');
		for (const cJSON *c = it->child; c; c = c->next) {
			tpc_buf_addf(b, "\n%*s", 2 * (depth + 1), "");
			if (obj) {
				tpc_buf_json_str(b, c->string ? c->string : "", c->string ? strlen(c->string) : 0, true);
				tpc_buf_adds(b, ": ");
			}
			print_item(b, c, depth + 1);
			if (c->next)
				tpc_buf_addc(b, ',');
		}
		tpc_buf_addf(b, "\n%*s%c", 2 * depth, "", obj ? '}' : ']');
	} else if (cJSON_IsString(it)) {
		tpc_buf_json_str(b, it->valuestring, strlen(it->valuestring), true);
	} else if (cJSON_IsRaw(it)) {
		tpc_buf_adds(b, it->valuestring); /* a number's own text (keep_number_text) */
	} else if (cJSON_IsNumber(it)) {
		print_number(b, it->valuedouble);
	} else {
		tpc_buf_adds(b, cJSON_IsTrue(it) ? "true" : cJSON_IsFalse(it) ? "false" : "null");
	}
}

char *tpc_extras_config_text(const cJSON *j)
{
	tpc_buf b = TPC_BUF_INIT;
	print_item(&b, j, 0);
	tpc_buf_addc(&b, '\n');
	if (b.oom) {
		tpc_buf_release(&b);
		return NULL;
	}
	return b.p;
}

/* config.json with torch_dtype (and dtype), merged or dropped members, re-serialised.
 * *skipped: the config lacks o->config_marker and was not written. */
static int rewrite_config(const char *src, const char *dst, const tpc_extras_opts *o, bool *skipped, tpc_err *e)
{
	char *text = NULL, *out = NULL;
	size_t len;
	cJSON *j = NULL, *m = NULL;
	tpc_cfg *c = NULL;
	tpc_err scratch;
	tpc_err_init(&scratch);
	int ret = tpc_read_file(src, 64u << 20, &text, &len, e);
	if (ret)
		return ret;
	/* parsed by the one reader, then copied: this tree is edited */
	if (tpc_cfg_from_buffer(&c, text, len, src, &scratch)) {
		ret = tpc_err_at(e, TPC_EINPUT, src, NULL, "config.json is not a JSON object");
		goto out;
	}
	if (!(j = cJSON_Duplicate(tpc_cfg_root(c), true))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	const char *pos = text;
	if (keep_number_text(j, &pos, text + len)) {
		ret = tpc_err_set(e, TPC_EINPUT, "config.json: cannot keep the text of its numbers");
		tpc_err_path(e, src);
		goto out;
	}
	*skipped = o->config_marker && !cJSON_GetObjectItemCaseSensitive(j, o->config_marker);
	if (*skipped)
		goto out;
	for (size_t i = 0; o->config_drop && o->config_drop[i]; i++)
		cJSON_DeleteItemFromObjectCaseSensitive(j, o->config_drop[i]);
	/* transformers 5 writes "dtype" and reads it before "torch_dtype": a
	 * cast names the new dtype under each key the config has (torch_dtype
	 * when it has neither) */
	if (o->torch_dtype) {
		bool has_dtype = cJSON_GetObjectItemCaseSensitive(j, "dtype") != NULL;
		if (has_dtype)
			set_string(j, "dtype", o->torch_dtype);
		if (!has_dtype || cJSON_GetObjectItemCaseSensitive(j, "torch_dtype"))
			set_string(j, "torch_dtype", o->torch_dtype);
	}
	if (o->config_merge) {
		m = cJSON_Parse(o->config_merge);
		if (!m || !cJSON_IsObject(m)) {
			ret = tpc_err_set(e, TPC_EINPUT, "internal: config members to merge are not a JSON object");
			goto out;
		}
		for (cJSON *it = m->child; it; it = it->next) {
			cJSON *v = cJSON_Duplicate(it, 1);
			if (v && cJSON_GetObjectItemCaseSensitive(j, it->string))
				cJSON_ReplaceItemInObjectCaseSensitive(j, it->string, v);
			else if (v)
				cJSON_AddItemToObject(j, it->string, v);
		}
	}
	/* as transformers writes it: 2-space indent, the keys in the model's order */
	if (!(out = tpc_extras_config_text(j))) {
		ret = tpc_err_nomem(e);
		goto out;
	}
	ret = tpc_write_file_atomic(dst, out, strlen(out), o->flags, e);
out:
	cJSON_Delete(j);
	cJSON_Delete(m);
	tpc_cfg_free(c);
	free(text);
	free(out);
	return ret;
}

static int copy_file(const char *src, const char *dst, unsigned flags, tpc_err *e)
{
	tpc_map m;
	tpc_out o;
	int ret = tpc_map_open(&m, src, e);
	if (ret)
		return ret;
	memset(&o, 0, sizeof(o));
	o.fd = -1;
	if (!(ret = tpc_out_open(&o, dst, flags, e)) && !(ret = tpc_out_copy(&o, &m, 0, m.size, e)))
		ret = tpc_out_commit(&o, e);
	tpc_out_abort(&o);
	tpc_map_close(&m);
	return ret;
}

bool tpc_extras_copies_config(const char *src_dir, const tpc_extras_opts *o)
{
	const char *name = o && o->config_from ? o->config_from : "config.json";
	char *src = src_dir ? tpc_path_join(src_dir, name) : NULL;
	tpc_cfg *c = NULL;
	bool r = false;
	tpc_err e;
	tpc_err_init(&e);
	if (!src || !tpc_exists(src) || (o && o->only && strcmp(o->only, "config.json")))
		goto out;
	if (!o || !o->config_marker) {
		r = true;
		goto out;
	}
	/* the marker is a member of the layout's own config, at its top */
	if (!tpc_cfg_from_file(&c, src, &e))
		r = tpc_cfg_get(c, TPC_CFG_TOP, o->config_marker, NULL) != NULL;
out:
	tpc_cfg_free(c);
	free(src);
	return r;
}

int tpc_extras_copy(const char *src_dir, const char *dst_dir, const tpc_extras_opts *o, size_t *copied,
		    tpc_err *e)
{
	static const tpc_extras_opts none = {0};
	DIR *d = NULL;
	int ret = 0;
	size_t n = 0;
	if (!o)
		o = &none;
	if (copied)
		*copied = 0;
	d = opendir(src_dir);
	if (!d) {
		tpc_err_sys(e, TPC_EINPUT, errno, "cannot read the model folder");
		tpc_err_path(e, src_dir);
		return TPC_EINPUT;
	}
	for (struct dirent *de; !ret && (de = readdir(d));) {
		struct stat st;
		/* name: what the file is to the model (a kept config is its config.json) */
		const char *name = de->d_name;
		if (o->config_from && !strcmp(name, o->config_from))
			name = "config.json";
		else if (!tpc_extras_is_companion(name) || (o->config_from && !strcmp(name, "config.json")))
			continue;
		if (o->only && strcmp(name, o->only))
			continue;
		bool cfg = !strcmp(name, "config.json");
		char *src = tpc_path_join(src_dir, de->d_name),
		     *dst = tpc_path_join(dst_dir, cfg && o->config_as ? o->config_as : name);
		if (!src || !dst) {
			ret = tpc_err_nomem(e);
		} else if (stat(src, &st) == 0 && S_ISREG(st.st_mode)) {
			bool skipped = false;
			if (!n && (ret = tpc_mkdirs(dst_dir, e))) {
				/* reported */
			} else if (cfg && (o->torch_dtype || o->config_merge || o->config_drop)) {
				ret = rewrite_config(src, dst, o, &skipped, e);
			} else {
				ret = copy_file(src, dst, o->flags, e);
			}
			if (!ret && !skipped)
				n++;
		}
		free(src);
		free(dst);
	}
	closedir(d);
	if (copied)
		*copied = n;
	return ret;
}
