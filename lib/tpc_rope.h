/*
 * tpc_rope.h - a model's rope scaling, as config.json says it: what the
 * plan's facts carry and verify's attention computes with.
 */
#ifndef TPC_ROPE_H
#define TPC_ROPE_H

#include <stdbool.h>
#include <stdint.h>

/* A rope_scaling (or transformers 5's rope_parameters) of rope_type "yarn",
 * as transformers' _compute_yarn_parameters reads it: factor > 1 when there
 * is one (0: none); the others 0 when unsaid (transformers' defaults). */
typedef struct tpc_yarn {
	double factor, mscale, mscale_all_dim, attn_factor, beta_fast, beta_slow;
	int64_t orig_max; /* original_max_position_embeddings */
	int truncate;     /* 1 true, -1 false, 0 unsaid (true) */
} tpc_yarn;

/* A rope of rope_type "llama3" (Llama 3.1, Llama 4), as transformers'
 * _compute_llama3_parameters reads it: the frequencies whose wavelength is
 * above original_max_position_embeddings / low_freq_factor divided by
 * factor, those below it / high_freq_factor kept, the ones between
 * smoothed. factor 0: none; every member said (refused otherwise). */
typedef struct tpc_rope_llama3 {
	double factor, low_freq_factor, high_freq_factor;
	int64_t orig_max;
} tpc_rope_llama3;

/* A rope of rope_type "longrope" (Phi-3-mini-128k, Phi-3.5, Phi-4-mini), as
 * transformers' _compute_longrope_parameters reads it: frequency i is
 * 1 / (ext[i] * theta ^ (2i / rot)), ext long_factor when the sequence is
 * longer than original_max_position_embeddings (dynamic_rope_update's
 * longrope_frequency_update: max(position_ids) + 1 > it), else
 * short_factor; cos and sin times attention_factor, or unsaid sqrt(1 +
 * ln(factor) / ln(original_max_position_embeddings)) (1 when factor <= 1),
 * factor unsaid max_position_embeddings / original_max_position_embeddings.
 * n_short, n_long: the lists' lengths (-1: not a list of numbers, or longer
 * than TPC_LONGROPE_MAX); orig_rope, orig_top: original_max_position_embeddings
 * in the rope object and at the top of config.json (0: unsaid); factor,
 * attn_factor 0 unsaid; max_pos: max_position_embeddings (0: unsaid). */
#define TPC_LONGROPE_MAX 256
typedef struct tpc_rope_longrope {
	bool on;
	int alias; /* on false, rope_type "su" (1) or "yarn" (2) with the lists:
		      Phi3Config's older names of longrope (the record's
		      longrope_alias reads them so) */
	int n_short, n_long;
	double short_f[TPC_LONGROPE_MAX], long_f[TPC_LONGROPE_MAX];
	double factor, attn_factor;
	int64_t orig_rope, orig_top, max_pos;
} tpc_rope_longrope;

#endif
