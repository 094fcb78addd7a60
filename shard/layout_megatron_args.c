/* layout_megatron_args.c - the position-embedding, sliding-window and
 * tokenizer args of a Megatron set (common.pt's / a legacy rank file's
 * argparse.Namespace), and the config.json features Megatron's arguments
 * cannot say, refused by name before anything is written.
 *
 * Megatron-LM at d98e8a6:
 *   - training/arguments.py:2384-2430 (the flags and their types):
 *     --window-size (tuple_type: a tuple), --window-attn-skip-freq (an int or
 *     a list, 1 a sliding layer), --rotary-percent (float),
 *     --rotary-seq-len-interpolation-factor (int), --use-rope-scaling and
 *     --rope-scaling-factor (float), --no-rope-freq (an int or a list, 1 a
 *     layer without rope); --rotary-interleaved is
 *     transformer_config.py's rotary_interleaved (:243).
 *   - transformer/utils.py:43-50 get_sliding_window_causal_mask: query i sees
 *     keys i - window_size[0] ... i + window_size[1]; transformers 5.12
 *     masking_utils.py:88-97 sliding_window_overlay: kv_idx > q_idx -
 *     sliding_window. So a config's window w is window_size (w - 1, 0).
 *   - transformer/utils.py:531-547 is_layer_window_attention: every layer
 *     slides without window_attn_skip_freq; a list says it layer by layer.
 *   - models/common/embeddings/rotary_pos_embedding.py:83-125: the llama3
 *     rope (_apply_scaling) with low_freq_factor 1, high_freq_factor 4 and
 *     original_max_position_embeddings 8192 fixed, factor its argument;
 *     seq_len_interpolation_factor divides the positions (transformers'
 *     "linear" rope). No dynamic NTK or longrope rope.
 *   - core/tokenizers/utils/build_tokenizer.py:12-21, 66-75:
 *     HuggingFaceTokenizer loads tokenizer_model (a folder) with
 *     AutoTokenizer, as Megatron-Bridge's recipes set it (TokenizerConfig(
 *     tokenizer_type="HuggingFaceTokenizer", tokenizer_model=<the Hugging
 *     Face folder>)).
 *
 * What --use-checkpoint-args takes back (training/checkpointing.py:2271-2350):
 * rotary_percent and rotary_interleaved (force), and with
 * use_tokenizer_model_from_checkpoint_args (default true,
 * training/config/training_config.py:480) tokenizer_model and tokenizer_type;
 * not window_size, window_attn_skip_freq, use_rope_scaling,
 * rope_scaling_factor, rotary_seq_len_interpolation_factor or no_rope_freq,
 * which the run's command line must give (doc/layouts.md). check_checkpoint_args (:207-212)
 * compares tokenizer_type and max_position_embeddings for a --vocab-file run.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_family.h"
#include "tpc_io.h"
#include "tpc_layout.h"
#include "tpc_shard.h"

#define LLAMA3_LOW 1.0
#define LLAMA3_HIGH 4.0
#define LLAMA3_ORIG 8192
#define QWEN2_MAX_WINDOW_LAYERS 28 /* transformers 5.12 configuration_qwen2.py:76 */

/* multi-head latent attention keeps its own rope (yarn by default: the
 * mla args), which these args do not describe */
static bool is_mla(const tpc_shard_plan *sp)
{
	return sp->facts.kv_lora_rank > 0;
}

static bool bit(const uint64_t *m, int64_t l)
{
	return (m[l / 64] >> (l % 64)) & 1;
}

/* Whether layer l slides, as transformers 5.12 reads config.json: no window
 * (sliding_window null or unsaid), or use_sliding_window false, none does;
 * layer_types says it layer by layer; else use_sliding_window true: the
 * layers from max_window_layers on (configuration_qwen2.py:84-94); else
 * (Mistral: sliding_window alone) every layer. */
static bool slides(const tpc_model_facts *f, int64_t l)
{
	if (!f->sliding_window || f->use_swa < 0)
		return false;
	if (f->n_typed)
		return l < f->n_typed && bit(f->swa_layers, l);
	if (f->use_swa > 0)
		return l >= (f->max_window_said ? f->max_window_layers : QWEN2_MAX_WINDOW_LAYERS);
	return true;
}

static int64_t n_sliding(const tpc_shard_plan *sp)
{
	int64_t n = 0;
	for (int64_t l = 0; l < sp->layers; l++)
		n += slides(&sp->facts, l);
	return n;
}

/* The rope's refusals: a rope Megatron's RotaryEmbedding does not compute. */
static int check_rope(const tpc_model_facts *f, const char *layout, tpc_err *e)
{
	if (f->rope_unknown[0])
		return tpc_err_set(e, TPC_EINPUT, "config.json: rope_type '%s' has no Megatron equivalent; not written by the %s layout",
				   f->rope_unknown, layout);
	if (f->yarn.factor)
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json: a yarn rope (factor %g): the %s layout writes no yarn args (Megatron's --position-embedding-type yarn is not checked against transformers' yarn here); not written",
				   f->yarn.factor, layout);
	if (f->longrope.on || f->longrope.alias)
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json: a longrope rope (short_factor / long_factor): Megatron's RotaryEmbedding has none (rotary_pos_embedding.py); not written by the %s layout",
				   layout);
	if (f->rope_dynamic)
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json: a dynamic (NTK) rope: Megatron's RotaryEmbedding has none (rotary_pos_embedding.py); not written by the %s layout",
				   layout);
	if (f->rope_linear && (f->rope_linear != (double)(int64_t)f->rope_linear || f->rope_linear > INT_MAX))
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json: a linear rope of factor %g: Megatron's --rotary-seq-len-interpolation-factor is an integer (training/arguments.py); not written by the %s layout",
				   f->rope_linear, layout);
	if (f->llama3_bad)
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json: rope_type llama3 without factor, low_freq_factor, high_freq_factor and original_max_position_embeddings all said; not written by the %s layout",
				   layout);
	if (f->llama3.factor && (f->llama3.low_freq_factor != LLAMA3_LOW || f->llama3.high_freq_factor != LLAMA3_HIGH ||
				 f->llama3.orig_max != LLAMA3_ORIG))
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json: a llama3 rope of low_freq_factor %g, high_freq_factor %g, original_max_position_embeddings %lld: Megatron's --use-rope-scaling fixes them at 1, 4 and 8192 (rotary_pos_embedding.py:92-99); not written by the %s layout",
				   f->llama3.low_freq_factor, f->llama3.high_freq_factor, (long long)f->llama3.orig_max,
				   layout);
	return 0;
}

int tpc__mcore_args_check(const tpc_shard_plan *sp, const char *layout, tpc_err *e)
{
	const tpc_model_facts *f = &sp->facts;
	int ret;
	if (!is_mla(sp) && (ret = check_rope(f, layout, e)))
		return ret;
	if (f->chunk_size)
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json: chunked local attention (attention_chunk_size %lld): Megatron has no such mask; not written by the %s layout",
				   (long long)f->chunk_size, layout);
	if (!n_sliding(sp))
		return 0;
	if (is_mla(sp))
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json: a sliding window (%lld) with multi-latent attention: not written by the %s layout",
				   (long long)f->sliding_window, layout);
	if (f->rope_theta_local && f->rope_theta_local != f->rope_theta)
		return tpc_err_set(e, TPC_EINPUT,
				   "config.json: the sliding layers rotate by their own rope theta (%g, the others %g): Megatron's rotary_base is one for every layer; not written by the %s layout",
				   f->rope_theta_local, f->rope_theta, layout);
	return 0;
}

/* Whether layer l has no rope, as verify's model reads the record's parts
 * (verify/vset.c: a global layer of a nope_global record with a window,
 * config.json's no_rope_layers / no_rope_layer_interval or the record's
 * rope_off_every) */
static bool no_rope(const tpc_shard_plan *sp, const tpc_family *pf, int64_t l)
{
	const tpc_model_facts *f = &sp->facts;
	if (pf && pf->parts.nope_global && f->sliding_window > 0 && !slides(f, l))
		return true;
	return tpc_facts_rope_off(f, l, pf ? pf->parts.rope_off_every : 0);
}

static tpc_value *kv(tpc_value *d, const char *k, tpc_value *v)
{
	if (!d) { /* tpc_value_set takes v also on failure */
		tpc_value_unref(v);
		return NULL;
	}
	if (!v || tpc_value_set(d, tpc_value_str(k, strlen(k)), v)) {
		tpc_value_unref(d);
		return NULL;
	}
	return d;
}

/* window_size (w - 1, 0) and, when some layers do not slide,
 * window_attn_skip_freq as a list (1 a sliding layer) */
static tpc_value *window_args(tpc_value *st, const tpc_shard_plan *sp)
{
	int64_t n = n_sliding(sp);
	if (!st || !n)
		return st;
	tpc_value *ws = tpc_value_new(TPC_V_TUPLE);
	if (ws && (tpc_value_append(ws, tpc_value_int(sp->facts.sliding_window - 1)) ||
		   tpc_value_append(ws, tpc_value_int(0)))) {
		tpc_value_unref(ws);
		ws = NULL;
	}
	st = kv(st, "window_size", ws);
	if (n == sp->layers || !st)
		return st;
	tpc_value *fr = tpc_value_new(TPC_V_LIST);
	for (int64_t l = 0; fr && l < sp->layers; l++)
		if (tpc_value_append(fr, tpc_value_int(slides(&sp->facts, l)))) {
			tpc_value_unref(fr);
			fr = NULL;
		}
	return kv(st, "window_attn_skip_freq", fr);
}

/* no_rope_freq as a list, 1 a layer without rope (attention.py:1322), when
 * some layer has none */
static tpc_value *no_rope_args(tpc_value *st, const tpc_shard_plan *sp)
{
	const tpc_family *pf = sp->plan && sp->plan->name ? tpc_family_find(sp->plan->name) : NULL;
	int64_t n = 0;
	for (int64_t l = 0; l < sp->layers; l++)
		n += no_rope(sp, pf, l);
	if (!st || !n)
		return st;
	tpc_value *fr = tpc_value_new(TPC_V_LIST);
	for (int64_t l = 0; fr && l < sp->layers; l++)
		if (tpc_value_append(fr, tpc_value_int(no_rope(sp, pf, l)))) {
			tpc_value_unref(fr);
			fr = NULL;
		}
	return kv(st, "no_rope_freq", fr);
}

tpc_value *tpc__mcore_rope_args(tpc_value *st, const tpc_shard_plan *sp)
{
	const tpc_model_facts *f = &sp->facts;
	if (is_mla(sp))
		return st;
	/* rotate_half's pairs (x_i, x_{i + d/2}), as the q/k rows are kept */
	st = kv(st, "rotary_interleaved", tpc_value_bool(0));
	if (f->rotary_pct > 0 && f->rotary_pct < 1)
		st = kv(st, "rotary_percent", tpc_value_float(f->rotary_pct));
	if (f->llama3.factor) {
		st = kv(st, "use_rope_scaling", tpc_value_bool(1));
		st = kv(st, "rope_scaling_factor", tpc_value_float(f->llama3.factor));
	}
	if (f->rope_linear && f->rope_linear != 1)
		st = kv(st, "rotary_seq_len_interpolation_factor", tpc_value_int((int64_t)f->rope_linear));
	return no_rope_args(window_args(st, sp), sp);
}

/* tokenizer_type / tokenizer_model: a Hugging Face tokenizer folder (its
 * tokenizer.json or tokenizer_config.json) as Megatron-Bridge names it */
int tpc__mcore_tokenizer_args(tpc_value *args, const char *dir)
{
	tpc_value *st = args && args->kind == TPC_V_CALL && args->n == 3 ? args->items[2] : NULL;
	if (!st || !dir)
		return 0;
	char *tj = tpc_path_join(dir, "tokenizer.json"), *tc = tpc_path_join(dir, "tokenizer_config.json");
	bool hf = tj && tc && (tpc_exists(tj) || tpc_exists(tc));
	free(tj);
	free(tc);
	if (!hf)
		return 0;
	char *abs = realpath(dir, NULL);
	if (!abs)
		return 0;
	int bad = tpc_value_set(st, tpc_value_str("tokenizer_type", 14), tpc_value_str("HuggingFaceTokenizer", 20)) ||
		  tpc_value_set(st, tpc_value_str("tokenizer_model", 15), tpc_value_str(abs, strlen(abs)));
	free(abs);
	return bad ? -1 : 0;
}
