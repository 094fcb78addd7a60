/*
 * tpc_rope.h - a model's rope scaling, as config.json says it: what the
 * plan's facts carry and verify's attention computes with.
 */
#ifndef TPC_ROPE_H
#define TPC_ROPE_H

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

#endif
