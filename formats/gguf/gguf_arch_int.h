/*
 * gguf_arch_int.h - what gguf_arch.c (the tensors of the GGUF
 * convert_hf_to_gguf.py writes) and gguf_keys.c (its keys: config.json read
 * under the family record's key rules, general.*) share. Internal to
 * formats/gguf.
 */
#ifndef TPC_GGUF_ARCH_INT_H
#define TPC_GGUF_ARCH_INT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "tpc_cfg.h"
#include "tpc_family.h"
#include "tpc_family_gguf.h"

#define CONFIG_CAP ((uint64_t)64 << 20)

/* LlamaFileType */
enum { FT_ALL_F32 = 0, FT_MOSTLY_F16 = 1, FT_MOSTLY_Q8_0 = 7, FT_MOSTLY_BF16 = 32, FT_MOSTLY_MXFP4_MOE = 38 };

#define U32 TPC_GV_U32
#define F32 TPC_GV_F32

/* config.json through lib's reader (tpc_cfg.h), under its text_config rule:
 * text_config's members win, as TextModel.__init__ merges them */
typedef struct cfg {
	const char *path;
	tpc_cfg *doc;
	cJSON *root;
	const cJSON *text; /* text_config (NULL when none) */
	const cJSON *rope; /* rope_parameters, else rope_scaling (an object or NULL) */
} cfg;

typedef struct conv {
	const tpc_gguf_arch *spec;
	const tpc_family *fam;
	cfg c;
	int ftype; /* LlamaFileType after `auto` is resolved */
	bool mxfp4; /* the record's mxfp4_blocks under quant_method "mxfp4": X_blocks/X_scales repacked */
	bool has_attn;      /* Phi-3's rope.scaling.attn_factor (long_factor) */
	double attn_factor;
	uint64_t mtp; /* the record's multi-token-prediction layers (tpc_family_mtp) the GGUF
		       * holds past the decoder's: config.json's count member, else the
		       * checkpoint's; the GGUF part's mtp_count member; 0: none, and
		       * always under --no-mtp */
	bool no_mtp;  /* convert --no-mtp: those layers' tensors left out */
	tpc_gguf_kvs *kv;
	tpc_err *e;
} conv;

const cJSON *tpc__gk_cfg_get(const cfg *c, const char *name);
const cJSON *tpc__gk_cfg_find(const cfg *c, const char *names, const char **which, char *buf, size_t n);
int tpc__gk_cfg_err(const cfg *c, tpc_err *e, const char *fmt, const char *a);
int tpc__gk_cfg_u32(const cfg *c, const cJSON *v, const char *name, uint64_t *out, tpc_err *e);
int tpc__gk_cfg_req_u32(const cfg *c, const char *names, uint64_t *out, tpc_err *e);
int tpc__gk_kv_put(conv *cv, const char *key, int type, double f, uint64_t u);
int tpc__gk_kv_str(conv *cv, const char *key, const char *s);
int64_t tpc__gk_cfg_int_or(const cfg *c, const char *name, int64_t dflt);
const cJSON *tpc__gk_rope_member(const cfg *c, const char *name);
int tpc__gk_two_u32(const cfg *c, const char *a, const char *b, uint64_t *x, uint64_t *y, tpc_err *e);
int tpc__gk_sum_members(conv *cv, const char *names, char op, uint64_t *u);
int tpc__gk_rule_eval(conv *cv, const tpc_gguf_kv_rule *r, bool *put, uint64_t *u, double *f);
int tpc__gk_arch_keys(conv *cv);
/* gguf_arch.c, for gguf_lora.c: config.json of model folder `dir` and the
 * family record convert_hf_to_gguf.py writes it as (c released by
 * tpc_cfg_free(c->doc) and free(c->path)); prepare_tensors' type of a tensor
 * for LlamaFileType ftype */
int tpc__gga_load_config(const char *dir, cfg *c, const tpc_family **fam, tpc_err *e);
int tpc__gga_tensor_type(int ftype, tpc_role role, const tpc_gguf_wtensor *w);
void tpc__gk_size_label(const tpc_gguf_wtensor *t, size_t nt, char *buf, size_t n);
int tpc__gk_sampling_keys(conv *cv, const char *dir);

#endif
