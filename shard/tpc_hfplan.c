/* tpc_hfplan.c - a tpconv plan from a transformers tensor-parallel plan.
 *
 * transformers describes tensor parallelism per model class as a dict from
 * module patterns to styles (`base_model_tp_plan` in the config class, e.g.
 * {"layers.*.self_attn.q_proj": "colwise", "layers.*.self_attn.o_proj":
 * "rowwise"}; the styles are those of transformers/integrations/
 * tensor_parallel.py's ParallelInterface). The input is a config.json that
 * carries `base_model_tp_plan` (and its model facts), or such a dict alone.
 * Each pattern becomes a rule over the module's weight and bias:
 *
 *   colwise, colwise_rep, local_colwise   col (output features), on head
 *                                         boundaries for q/k/v projections;
 *                                         vocab for embeddings and lm_head
 *   rowwise, rowwise_rep, local_rowwise   row (input features); o_proj on
 *                                         head boundaries; vocab for embeddings
 *   packed_colwise, local_packed_colwise  col in parts: [q|k|v] for a fused
 *                                         qkv, 2 equal parts ([gate|up]) else
 *   packed_rowwise, local_packed_rowwise  row in 2 equal parts
 *   embedding                             vocab
 *   replicate, local, gather, sequence_parallel, isolated
 *                                         replicated
 *   ep_router, grouped_gemm, local_experts, moe_tp_experts and anything else
 *                                         refused by name (expert parallelism
 *                                         is not supported yet; an unknown style
 *                                         is never guessed)
 *
 * The plan gets the config's heads, KV heads and head_dim as model facts,
 * LLaMA-style pipeline patterns, and the replicate fallback (which shard
 * still refuses for tensors of split layers: tpc_shard.c check_fallback).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "tpc_cfg.h"
#include "tpc_plan.h"
#include "tpc_util.h"

typedef enum { S_COL, S_ROW, S_PACKED_COL, S_PACKED_ROW, S_VOCAB, S_REPL, S_UNSUPPORTED, S_UNKNOWN } style;

static style parse_style(const char *s)
{
	static const struct {
		const char *n;
		style s;
	} t[] = {
		{"colwise", S_COL}, {"colwise_rep", S_COL}, {"local_colwise", S_COL},
		{"rowwise", S_ROW}, {"rowwise_rep", S_ROW}, {"local_rowwise", S_ROW},
		{"packed_colwise", S_PACKED_COL}, {"local_packed_colwise", S_PACKED_COL},
		{"packed_rowwise", S_PACKED_ROW}, {"local_packed_rowwise", S_PACKED_ROW},
		{"embedding", S_VOCAB},
		{"replicate", S_REPL}, {"local", S_REPL}, {"gather", S_REPL}, {"sequence_parallel", S_REPL},
		{"isolated", S_REPL},
		{"ep_router", S_UNSUPPORTED}, {"grouped_gemm", S_UNSUPPORTED}, {"local_experts", S_UNSUPPORTED},
		{"moe_tp_experts", S_UNSUPPORTED},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(s, t[i].n))
			return t[i].s;
	return S_UNKNOWN;
}

static bool ends(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && !strcmp(s + a - b, suf) && (a == b || s[a - b - 1] == '.');
}

/* "layers.*.self_attn.q_proj" -> (^|\.)layers\.[0-9]+\.self_attn\.q_proj\.(weight|bias)$, as a JSON string */
static void add_pattern(tpc_buf *b, const char *key)
{
	tpc_buf re = TPC_BUF_INIT;
	tpc_buf_adds(&re, "(^|\\.)");
	for (const char *c = key; *c; c++) {
		if (*c == '*')
			tpc_buf_adds(&re, "[0-9]+");
		else if (strchr(".^$[]()|+?{}\\", *c)) {
			tpc_buf_addc(&re, '\\');
			tpc_buf_addc(&re, *c);
		} else {
			tpc_buf_addc(&re, *c);
		}
	}
	tpc_buf_adds(&re, "\\.(weight|bias)$");
	tpc_buf_json_str(b, re.p ? re.p : "", re.len, false);
	tpc_buf_release(&re);
}

int tpc_plan_from_hf(const char *text, size_t len, const char *path, tpc_buf *out, tpc_err *e)
{
	tpc_cfg *c = NULL;
	const cJSON *plan = NULL, *ep = NULL;
	tpc_model_facts f;
	int ret = 0, nrules = 0;
	tpc_err scratch;
	tpc_err_init(&scratch);
	memset(&f, 0, sizeof(f));
	if (tpc_cfg_from_buffer(&c, text, len, path, &scratch)) {
		ret = TPC_CORRUPT(e, path, -1, NULL, "not a JSON object (a config.json with base_model_tp_plan, or the plan)");
		goto out;
	}
	/* the top level: the plan's module names are the whole model's (a
	 * text_config's plan would name the language model's alone) */
	plan = tpc_cfg_get(c, TPC_CFG_TOP, "base_model_tp_plan", NULL);
	ep = tpc_cfg_get(c, TPC_CFG_TOP, "base_model_ep_plan", NULL);
	if (plan) {
		if ((ret = tpc_facts_from_cfg(&f, c, e)))
			goto out;
	} else {
		plan = tpc_cfg_root(c); /* the dict alone */
		for (const cJSON *it = plan->child; it; it = it->next)
			if (!cJSON_IsString(it)) {
				ret = TPC_CORRUPT(e, path, -1, NULL,
						  "no \"base_model_tp_plan\" here, and the object is not a plan (\"%s\" is not a style string)",
						  it->string ? it->string : "?");
				goto out;
			}
	}
	if (!cJSON_IsObject(plan) || !plan->child) {
		ret = TPC_CORRUPT(e, path, -1, NULL, "base_model_tp_plan is empty or not an object");
		goto out;
	}
	if (cJSON_IsObject(ep) && ep->child) {
		ret = TPC_CORRUPT(e, path, -1, NULL,
				  "the config has a base_model_ep_plan (expert parallelism), which tpconv does not shard yet; refusing rather than replicating experts");
		goto out;
	}
	tpc_buf_adds(out, "{\n  \"name\": \"from-hf\",\n  \"description\": \"generated by tpconv plan --from-hf from a transformers tensor-parallel plan\",\n");
	if (f.heads || f.kv_heads || f.head_dim || f.hidden || f.vocab) {
		const char *k[] = {"heads", "kv_heads", "head_dim", "hidden", "vocab"};
		int64_t v[] = {f.heads, f.kv_heads, f.head_dim, f.hidden, f.vocab};
		bool first = true;
		tpc_buf_adds(out, "  \"model\": {");
		for (int i = 0; i < 5; i++)
			if (v[i]) {
				tpc_buf_addf(out, "%s\"%s\": %lld", first ? "" : ", ", k[i], (long long)v[i]);
				first = false;
			}
		tpc_buf_adds(out, "},\n");
	}
	tpc_buf_adds(out, "  \"layers\": [\"layers\\\\.([0-9]+)\\\\.\"],\n"
			  "  \"first_stage\": [\"embed_tokens\\\\.\", \"(^|\\\\.)wte\\\\.\", \"word_embeddings\\\\.\"],\n"
			  "  \"last_stage\": [\"(^|\\\\.)norm\\\\.\", \"^lm_head\\\\.\"],\n  \"rules\": [\n");
	for (const cJSON *it = plan->child; it; it = it->next) {
		const char *key = it->string ? it->string : "";
		const char *sv = cJSON_IsString(it) ? it->valuestring : NULL;
		char kn[256];
		tpc_sanitize(kn, sizeof(kn), key);
		if (!sv) {
			ret = TPC_CORRUPT(e, path, -1, NULL, "tp plan entry '%s' is not a style string", kn);
			goto out;
		}
		style st = parse_style(sv);
		char sn[64];
		tpc_sanitize(sn, sizeof(sn), sv);
		if (st == S_UNSUPPORTED || st == S_UNKNOWN) {
			ret = TPC_CORRUPT(e, path, -1, NULL,
					  st == S_UNSUPPORTED ? "tp plan entry '%s' has style '%s' (expert parallelism), which tpconv does not shard yet"
							      : "tp plan entry '%s' has style '%s', which tpconv does not know; refusing rather than guessing",
					  kn, sn);
			goto out;
		}
		bool embed = ends(key, "embed_tokens") || ends(key, "wte") || ends(key, "word_embeddings") || ends(key, "lm_head");
		bool q = ends(key, "q_proj") || ends(key, "query") || ends(key, "q");
		bool kv = ends(key, "k_proj") || ends(key, "v_proj") || ends(key, "key") || ends(key, "value");
		bool o = ends(key, "o_proj") || (ends(key, "dense") && strstr(key, "attn"));
		bool qkv = ends(key, "qkv_proj") || ends(key, "query_key_value") || ends(key, "c_attn");
		tpc_buf_adds(out, nrules++ ? ",\n    {\"match\": " : "    {\"match\": ");
		add_pattern(out, key);
		if (st == S_REPL) {
			tpc_buf_adds(out, ", \"split\": \"replicate\"}");
		} else if (st == S_VOCAB || (embed && (st == S_COL || st == S_ROW))) {
			tpc_buf_adds(out, ", \"split\": \"vocab\"}");
		} else if (st == S_COL) {
			tpc_buf_addf(out, ", \"split\": \"col\"%s}", q ? ", \"heads\": \"q\"" : kv ? ", \"heads\": \"kv\"" : "");
		} else if (st == S_ROW) {
			tpc_buf_addf(out, ", \"split\": \"row\"%s}", o ? ", \"heads\": \"q\"" : "");
		} else if (st == S_PACKED_COL) {
			tpc_buf_addf(out, ", \"split\": \"col\", \"parts\": %s}", qkv ? "[\"q\", \"kv\", \"kv\"]" : "2");
		} else {
			tpc_buf_adds(out, ", \"split\": \"row\", \"parts\": 2}");
		}
	}
	tpc_buf_adds(out, "\n  ],\n  \"fallback\": \"replicate\"\n}\n");
	if (out->oom)
		ret = tpc_err_nomem(e);
out:
	tpc_cfg_free(c);
	return ret;
}
