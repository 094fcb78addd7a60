/* tpc_family_classic.c - the records of the families before decoder layer
 * parts were records' data, kept as they were: GPT-2, GPT-NeoX / Pythia,
 * BERT, LiBai, and the diffusion transformers (DiT, DALLE2-pytorch) that
 * verify finds by module names (tpc_family.h TPC_PART_BLOCKS_*). Listed
 * after tpc_family.c's decoders (tpc_family_at). Sources as tpc_family.c's
 * header says. */
#include <stddef.h>

#include "tpc_family.h"
#include "tpc_family_gguf.h"
#include "tpc_family_int.h"

/* ---- tensor tables ---- */

#define HF_ONLY(R, B, NAME) ROW(R, B, NAME, NULL, NULL, NULL, NULL)
/* GPT-2: Conv1D weights stored [in, out] (the family's conv1d: TensorRT-LLM
 * holds the linear weights transposed, [out, in]; models/gpt/convert.py
 * load_weights_from_hf_model, "transpose for Conv1D"), c_attn fused [q|k|v]
 * by the checkpoint itself and kept fused there (attention.qkv). */
#define G2_L "transformer.h.{L}."
static const tpc_tensor_row gpt2_tensors[] = {
	ROW(TOKEN_EMBD, false, "transformer.wte.weight", NULL, NULL, "transformer.vocab_embedding.weight", "token_embd.weight"),
	ROW(POS_EMBD, false, "transformer.wpe.weight", NULL, NULL, "transformer.position_embedding.weight",
	    "position_embd.weight"),
	ROW(OUTPUT_NORM, true, "transformer.ln_f.weight", NULL, NULL, "transformer.ln_f.weight", "output_norm.weight"),
	ROW(OUTPUT, false, "lm_head.weight", NULL, NULL, "lm_head.weight", "output.weight"),
	ROW(ATTN_NORM, true, G2_L "ln_1.weight", NULL, NULL, TR_L "input_layernorm.weight", GG_L "attn_norm.weight"),
	ROW(ATTN_QKV, true, G2_L "attn.c_attn.weight", NULL, NULL, TR_L "attention.qkv.weight", GG_L "attn_qkv.weight"),
	ROW(ATTN_OUT, true, G2_L "attn.c_proj.weight", NULL, NULL, TR_L "attention.dense.weight", GG_L "attn_output.weight"),
	ROW(FFN_NORM, true, G2_L "ln_2.weight", NULL, NULL, TR_L "post_layernorm.weight", GG_L "ffn_norm.weight"),
	ROW(FFN_UP, true, G2_L "mlp.c_fc.weight", NULL, NULL, TR_L "mlp.fc.weight", GG_L "ffn_up.weight"),
	ROW(FFN_DOWN, true, G2_L "mlp.c_proj.weight", NULL, NULL, TR_L "mlp.proj.weight", GG_L "ffn_down.weight"),
	END_ROW,
};

/* GPT-NeoX / Pythia: query_key_value holds [q, k, v] per head ([heads, 3,
 * hd] rows, each head's three kept together); llama.cpp regroups it [q; k;
 * v] under attn_qkv (convert_hf_to_gguf.py GPTNeoXModel). Only Hugging Face
 * and GGUF names so far. */
#define NX_L "gpt_neox.layers.{L}."
static const tpc_tensor_row gptneox_tensors[] = {
	ROW(TOKEN_EMBD, false, "gpt_neox.embed_in.weight", NULL, NULL, NULL, "token_embd.weight"),
	ROW(OUTPUT_NORM, true, "gpt_neox.final_layer_norm.weight", NULL, NULL, NULL, "output_norm.weight"),
	ROW(OUTPUT, false, "embed_out.weight", NULL, NULL, NULL, "output.weight"),
	ROW(ATTN_NORM, true, NX_L "input_layernorm.weight", NULL, NULL, NULL, GG_L "attn_norm.weight"),
	ROW(ATTN_QKV, true, NX_L "attention.query_key_value.weight", NULL, NULL, NULL, GG_L "attn_qkv.weight"),
	ROW(ATTN_OUT, true, NX_L "attention.dense.weight", NULL, NULL, NULL, GG_L "attn_output.weight"),
	ROW(FFN_NORM, true, NX_L "post_attention_layernorm.weight", NULL, NULL, NULL, GG_L "ffn_norm.weight"),
	ROW(FFN_UP, true, NX_L "mlp.dense_h_to_4h.weight", NULL, NULL, NULL, GG_L "ffn_up.weight"),
	ROW(FFN_DOWN, true, NX_L "mlp.dense_4h_to_h.weight", NULL, NULL, NULL, GG_L "ffn_down.weight"),
	END_ROW,
};

/* LiBai's GPT (OneFlow; its loader's gamma / beta are weight / bias by the
 * libai rules): GPT-NeoX's layer under GPT_model.transformer.layers, with
 * learned positions, the head tied to the token embeddings (no row). Hugging
 * Face column only (LiBai's own names). */
#define LB_L "GPT_model.transformer.layers.{L}."
static const tpc_tensor_row libai_tensors[] = {
	HF_ONLY(TOKEN_EMBD, false, "GPT_model.embeddings.token_embeddings.weight"),
	HF_ONLY(POS_EMBD, false, "GPT_model.embeddings.position_embeddings.weight"),
	HF_ONLY(OUTPUT_NORM, true, "GPT_model.transformer.layernorm_f.weight"),
	HF_ONLY(ATTN_NORM, true, LB_L "input_layernorm.weight"),
	HF_ONLY(ATTN_QKV, true, LB_L "self_attention.query_key_value.weight"),
	HF_ONLY(ATTN_OUT, true, LB_L "self_attention.dense.weight"),
	HF_ONLY(FFN_NORM, true, LB_L "post_attention_layernorm.weight"),
	HF_ONLY(FFN_UP, true, LB_L "mlp.dense_h_to_4h.weight"),
	HF_ONLY(FFN_DOWN, true, LB_L "mlp.dense_4h_to_h.weight"),
	END_ROW,
};

/* BERT (BertModel, BertForMaskedLM, BertForPreTraining): word, position and
 * token type embeddings and their LayerNorm; per layer self query / key /
 * value and attention.output.dense, the LayerNorm after the attention's
 * residual add (ATTN_NORM: the record's after_add place), intermediate.dense,
 * output.dense and the LayerNorm after its add (FFN_NORM); the MLM head
 * under cls.predictions: transform.dense (OUTPUT_DENSE), transform.LayerNorm
 * (OUTPUT_NORM), the decoder (OUTPUT; absent: tied to the word embeddings)
 * with its own bias, else predictions.bias (OUTPUT_BIAS). Hugging Face names
 * only. */
#define BE_L "bert.encoder.layer.{L}."
static const tpc_tensor_row bert_tensors[] = {
	HF_ONLY(TOKEN_EMBD, false, "bert.embeddings.word_embeddings.weight"),
	HF_ONLY(POS_EMBD, false, "bert.embeddings.position_embeddings.weight"),
	HF_ONLY(TOKEN_TYPES, false, "bert.embeddings.token_type_embeddings.weight"),
	HF_ONLY(TOKEN_EMBD_NORM, true, "bert.embeddings.LayerNorm.weight"),
	HF_ONLY(ATTN_Q, true, BE_L "attention.self.query.weight"),
	HF_ONLY(ATTN_K, true, BE_L "attention.self.key.weight"),
	HF_ONLY(ATTN_V, true, BE_L "attention.self.value.weight"),
	HF_ONLY(ATTN_OUT, true, BE_L "attention.output.dense.weight"),
	HF_ONLY(ATTN_NORM, true, BE_L "attention.output.LayerNorm.weight"),
	HF_ONLY(FFN_UP, true, BE_L "intermediate.dense.weight"),
	HF_ONLY(FFN_DOWN, true, BE_L "output.dense.weight"),
	HF_ONLY(FFN_NORM, true, BE_L "output.LayerNorm.weight"),
	HF_ONLY(OUTPUT_DENSE, true, "cls.predictions.transform.dense.weight"),
	HF_ONLY(OUTPUT_NORM, true, "cls.predictions.transform.LayerNorm.weight"),
	HF_ONLY(OUTPUT, true, "cls.predictions.decoder.weight"),
	HF_ONLY(OUTPUT_BIAS, false, "cls.predictions.bias"),
	END_ROW,
};
#undef HF_ONLY

/* ---- plans ---- */

static const char plan_gpt2[] =
	 "{\n"
	 "  \"name\": \"gpt2\",\n"
	 "  \"description\": \"GPT-2 with Hugging Face names. Conv1D stores [in, out], so col splits dim 1 and row dim 0 (transposed). c_attn is [q | k | v] along its output: each third is split on head boundaries and rank r gets [q_r ; k_r ; v_r]. wte and lm_head vocab-parallel; wpe, layer norms and the causal-mask buffers replicated.\",\n"
	 "  \"layers\": [\"(^|\\\\.)h\\\\.([0-9]+)\\\\.\"],\n"
	 "  \"first_stage\": [\"(^|\\\\.)wte\\\\.\", \"(^|\\\\.)wpe\\\\.\"],\n"
	 "  \"last_stage\": [\"(^|\\\\.)ln_f\\\\.\", \"^lm_head\\\\.\"],\n"
	 "  \"rules\": [\n"
	 "    {\"match\": \"attn\\\\.c_attn\\\\.(weight|bias)$\", \"split\": \"col\", \"transposed\": true, \"parts\": 3, \"heads\": \"q\"},\n"
	 "    {\"match\": \"attn\\\\.c_proj\\\\.weight$\", \"split\": \"row\", \"transposed\": true, \"heads\": \"q\"},\n"
	 "    {\"match\": \"attn\\\\.c_proj\\\\.bias$\", \"split\": \"row\", \"transposed\": true},\n"
	 "    {\"match\": \"mlp\\\\.c_fc\\\\.(weight|bias)$\", \"split\": \"col\", \"transposed\": true},\n"
	 "    {\"match\": \"mlp\\\\.c_proj\\\\.(weight|bias)$\", \"split\": \"row\", \"transposed\": true},\n"
	 "    {\"match\": \"(^|\\\\.)wte\\\\.weight$\", \"split\": \"vocab\"},\n"
	 "    {\"match\": \"^lm_head\\\\.weight$\", \"split\": \"vocab\"},\n"
	 "    {\"match\": \"(^|\\\\.)wpe\\\\.weight$|ln_(1|2|f)\\\\.(weight|bias)$|(^|\\\\.)attn\\\\.(bias|masked_bias)$\", \"split\": \"replicate\"}\n"
	 "  ],\n"
	 "  \"fallback\": \"replicate\"\n"
	 "}\n";

static const char plan_gpt_neox[] =
	 "{\n"
	 "  \"name\": \"gpt-neox\",\n"
	 "  \"description\": \"GPT-NeoX and Pythia with Hugging Face names. query_key_value is head-interleaved ([nh, 3, hd] rows), so a plain contiguous split on head boundaries (3 * head_dim rows per head) is correct. attention.dense row, dense_h_to_4h col, dense_4h_to_h row, embed_in and embed_out vocab-parallel.\",\n"
	 "  \"layers\": [\"layers\\\\.([0-9]+)\\\\.\"],\n"
	 "  \"first_stage\": [\"embed_in\\\\.\"],\n"
	 "  \"last_stage\": [\"final_layer_norm\\\\.\", \"^embed_out\\\\.\"],\n"
	 "  \"rules\": [\n"
	 "    {\"match\": \"attention\\\\.query_key_value\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"q\", \"head_block\": 3},\n"
	 "    {\"match\": \"attention\\\\.dense\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\"},\n"
	 "    {\"match\": \"attention\\\\.dense\\\\.bias$\", \"split\": \"row\"},\n"
	 "    {\"match\": \"mlp\\\\.dense_h_to_4h\\\\.(weight|bias)$\", \"split\": \"col\"},\n"
	 "    {\"match\": \"mlp\\\\.dense_4h_to_h\\\\.(weight|bias)$\", \"split\": \"row\"},\n"
	 "    {\"match\": \"embed_in\\\\.weight$\", \"split\": \"vocab\"},\n"
	 "    {\"match\": \"^embed_out\\\\.weight$\", \"split\": \"vocab\"},\n"
	 "    {\"match\": \"layernorm\\\\.(weight|bias)$|final_layer_norm\\\\.(weight|bias)$|rotary_emb\\\\.inv_freq$|attention\\\\.(bias|masked_bias)$\", \"split\": \"replicate\"}\n"
	 "  ],\n"
	 "  \"fallback\": \"replicate\"\n"
	 "}\n";

static const char plan_bert[] =
	 "{\n"
	 "  \"name\": \"bert\",\n"
	 "  \"description\": \"BERT with Hugging Face names. attention.self.query/key/value col on head boundaries, attention.output.dense row, intermediate.dense col, layer output.dense row, word_embeddings and the MLM decoder (weight and bias) vocab-parallel; position and token-type embeddings, LayerNorms, pooler and the prediction transform replicated.\",\n"
	 "  \"layers\": [\"layer\\\\.([0-9]+)\\\\.\"],\n"
	 "  \"first_stage\": [\"embeddings\\\\.\"],\n"
	 "  \"last_stage\": [\"pooler\\\\.\", \"^cls\\\\.\"],\n"
	 "  \"rules\": [\n"
	 "    {\"match\": \"attention\\\\.self\\\\.(query|key|value)\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"q\"},\n"
	 "    {\"match\": \"attention\\\\.output\\\\.dense\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\"},\n"
	 "    {\"match\": \"attention\\\\.output\\\\.dense\\\\.bias$\", \"split\": \"row\"},\n"
	 "    {\"match\": \"intermediate\\\\.dense\\\\.(weight|bias)$\", \"split\": \"col\"},\n"
	 "    {\"match\": \"layer\\\\.[0-9]+\\\\.output\\\\.dense\\\\.(weight|bias)$\", \"split\": \"row\"},\n"
	 "    {\"match\": \"word_embeddings\\\\.weight$\", \"split\": \"vocab\"},\n"
	 "    {\"match\": \"predictions\\\\.decoder\\\\.(weight|bias)$|predictions\\\\.bias$\", \"split\": \"vocab\"},\n"
	 "    {\"match\": \"LayerNorm\\\\.(weight|bias|gamma|beta)$|(position|token_type)_embeddings\\\\.weight$|position_ids$|pooler\\\\.|predictions\\\\.transform\\\\.|seq_relationship\\\\.\", \"split\": \"replicate\"}\n"
	 "  ],\n"
	 "  \"fallback\": \"replicate\"\n"
	 "}\n";

static const char plan_libai[] =
	 "{\n"
	 "  \"name\": \"libai\",\n"
	 "  \"description\": \"LiBai (OneFlow) naming, as its layers declare parallel='col'/'row': self_attention.query_key_value col (head-interleaved [nh, 3, hd], split on head boundaries), attention dense row, mlp.dense_h_to_4h col, mlp.dense_4h_to_h row; cross-attention query col and key_value col ([nh, 2, hd]); token/word/vocab embeddings vocab-parallel (SBP S(0)); layer norms and position embeddings replicated (B).\",\n"
	 "  \"layers\": [\"layers\\\\.([0-9]+)\\\\.\"],\n"
	 "  \"first_stage\": [\"embeddings\\\\.\"],\n"
	 "  \"last_stage\": [\"layernorm_f\\\\.\", \"final_layernorm\\\\.\", \"lm_head\\\\.\", \"cls_head\\\\.\"],\n"
	 "  \"rules\": [\n"
	 "    {\"match\": \"query_key_value\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"q\", \"head_block\": 3},\n"
	 "    {\"match\": \"cross_attention\\\\.query\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"q\"},\n"
	 "    {\"match\": \"cross_attention\\\\.key_value\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"q\", \"head_block\": 2},\n"
	 "    {\"match\": \"attention\\\\.dense\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\"},\n"
	 "    {\"match\": \"attention\\\\.dense\\\\.bias$\", \"split\": \"row\"},\n"
	 "    {\"match\": \"mlp\\\\.dense_h_to_4h\\\\.(weight|bias)$\", \"split\": \"col\"},\n"
	 "    {\"match\": \"mlp\\\\.dense_4h_to_h\\\\.(weight|bias)$\", \"split\": \"row\"},\n"
	 "    {\"match\": \"(token|word|vocab)_embeddings\\\\.weight$\", \"split\": \"vocab\"},\n"
	 "    {\"match\": \"layernorm[^.]*\\\\.(weight|bias)$|position_embeddings\\\\.weight$|tokentype_embeddings\\\\.weight$\", \"split\": \"replicate\"}\n"
	 "  ],\n"
	 "  \"fallback\": \"replicate\"\n"
	 "}\n";

static const char plan_dit[] =
	 "{\n"
	 "  \"name\": \"dit\",\n"
	 "  \"description\": \"Diffusion transformers with diffusers names (PixArt, SD3, Flux, CogVideoX, DiT): attn1/attn2/attn to_q, to_k, to_v col on head boundaries (heads from config.json num_attention_heads and attention_head_dim), to_out.0 row; joint attention's add_q_proj/add_k_proj/add_v_proj col and to_add_out row; ff and ff_context net.0.proj col, in 2 parts [value | gate] when the config's activation_fn is gated (geglu, swiglu), net.2 row; Flux single blocks: proj_mlp col, proj_out row over [attention heads | mlp] in 2 parts. Norms, qk norms, AdaLN modulation, timestep/caption/pooled embedders, patch embedding, pos_embed, scale_shift_table and proj_out replicated.\",\n"
	 "  \"layers\": [\"^transformer_blocks\\\\.([0-9]+)\\\\.\"],\n"
	 "  \"first_stage\": [\"^(pos_embed|patch_embed|x_embedder|context_embedder|time_text_embed|time_embedding|adaln_single|caption_projection)\\\\.\"],\n"
	 "  \"last_stage\": [\"^norm_out\\\\.\", \"^proj_out\\\\.\", \"^scale_shift_table$\", \"^norm_final\\\\.\"],\n"
	 "  \"rules\": [\n"
	 "    {\"match\": \"(^|\\\\.)attn[12]?\\\\.(to_q|to_k|to_v|add_q_proj|add_k_proj|add_v_proj)\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"q\"},\n"
	 "    {\"match\": \"(^|\\\\.)attn[12]?\\\\.(to_out\\\\.0|to_add_out)\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\"},\n"
	 "    {\"match\": \"(^|\\\\.)attn[12]?\\\\.(to_out\\\\.0|to_add_out)\\\\.bias$\", \"split\": \"row\"},\n"
	 "    {\"match\": \"(^|\\\\.)(ff|ff_context)\\\\.net\\\\.0\\\\.proj\\\\.(weight|bias)$\", \"split\": \"col\", \"gated\": true},\n"
	 "    {\"match\": \"(^|\\\\.)(ff|ff_context)\\\\.net\\\\.2\\\\.(weight|bias)$\", \"split\": \"row\"},\n"
	 "    {\"match\": \"single_transformer_blocks\\\\.[0-9]+\\\\.proj_mlp\\\\.(weight|bias)$\", \"split\": \"col\"},\n"
	 "    {\"match\": \"single_transformer_blocks\\\\.[0-9]+\\\\.proj_out\\\\.weight$\", \"split\": \"row\", \"parts\": [\"q\", \"rest\"]},\n"
	 "    {\"match\": \"single_transformer_blocks\\\\.[0-9]+\\\\.proj_out\\\\.bias$\", \"split\": \"row\"},\n"
	 "    {\"match\": \"(norm[0-9]*|norm_q|norm_k|norm_added_q|norm_added_k|norm1_context|norm_out|norm_final)\\\\.|scale_shift_table$|(pos_embed|patch_embed|x_embedder|context_embedder|time_text_embed|time_embedding|adaln_single|caption_projection)\\\\.|^proj_out\\\\.\", \"split\": \"replicate\"}\n"
	 "  ],\n"
	 "  \"fallback\": \"replicate\"\n"
	 "}\n";

/* DALLE2-pytorch (dalle2_pytorch.py): the prior's CausalTransformer and the
 * decoder's Unets. Its attentions are split by heads: Attention and
 * CrossAttention (to_q col, to_out.0 row) and the Unet's LinearAttention,
 * whose 1x1 convs to_qkv ([q | k | v], col in 3 parts) and to_out.0 (row)
 * must go together (each rank's heads are its own linear attentions). The
 * self-attentions are multi-query (to_kv one head of dim_head): the prior's
 * as kv heads (replicated when tp exceeds them), the Unet's, whose dim_head
 * (attn_dim_head, default 32) need not be head_dim, replicated; a
 * CrossAttention's to_kv holds every head. Convolutions, norms, time and
 * condition embeddings and the noise schedules are replicated, by name so
 * that --strict can tell a tensor nobody placed. */
#define DALLE2_NORMS "(^|\\\\.)(norm|norm_context|to_out\\\\.1|1\\\\.0)\\\\.(g|gamma|b|beta|weight|bias)$|null_kv$|rotary_emb\\\\."
#define DALLE2_UNET \
	"(^|\\\\.)(init_conv|to_time_hiddens|to_time_tokens|to_time_cond|image_to_tokens|to_image_hiddens|text_to_cond|to_lowres_noise_cond|norm_cond|norm_mid_cond|time_mlp|block1|block2|res_conv|upsample_combiner)\\\\." \
	"|(^|\\\\.)(downs\\\\.[0-9]+\\\\.(0|4)|ups\\\\.[0-9]+\\\\.3)\\\\.|^(unets\\\\.[0-9]+\\\\.)?(to_out|final_conv)\\\\.(weight|bias)$" \
	"|(^|\\\\.)(noise_schedulers?|vaes|lowres_conds)\\\\."
#define DALLE2_PRIOR \
	"(^|\\\\.)(to_text_embeds|to_time_embeds|to_image_embeds|rel_pos_bias|init_norm|project_out)\\\\." \
	"|(^|\\\\.)(learned_query|null_text_encodings|null_text_embeds|null_image_embed|null_image_hiddens|null_text_embed)$"
static const char plan_dalle2[] =
	 "{\n"
	 "  \"name\": \"dalle2\",\n"
	 "  \"description\": \"DALLE2-pytorch, the prior's CausalTransformer (layers.N.0 = Attention, layers.N.1 = FeedForward) and the decoder's Unets. Attention and CrossAttention: to_q col on head boundaries, to_out.0 row; the self-attentions are multi-query (to_kv is one head of k and v): replicated on every rank (the prior's as one kv head, the Unet's fn.fn. whole); CrossAttention's to_kv = [k | v] of every head, col in 2 parts. LinearAttention (1x1 convs): to_qkv = [q | k | v] col in 3 parts on head boundaries, to_out.0 row, so that each rank runs its heads. FeedForward: Sequential(LayerNorm, Linear(dim, inner*2), SwiGLU, LayerNorm|Identity, Dropout, Linear(inner, dim)): index 1 col in 2 parts [x | gate], the post-activation norm over inner col (its statistics must be all-reduced), index 5 row. Convolutions, norms, time and condition embeddings, null embeddings, relative position bias and noise schedules replicated. head_dim 64 is the dim_head of Attention and CrossAttention; a Unet's attn_dim_head (default 32) must divide it.\",\n"
	 "  \"model\": {\"head_dim\": 64},\n"
	 "  \"layers\": [\"layers\\\\.([0-9]+)\\\\.\"],\n"
	 "  \"first_stage\": [],\n"
	 "  \"last_stage\": [\"final_norm\\\\.\", \"project_out\\\\.\", \"to_logits\\\\.\"],\n"
	 "  \"rules\": [\n"
	 "    {\"match\": \"to_q\\\\.weight$\", \"split\": \"col\", \"heads\": \"q\"},\n"
	 "    {\"match\": \"to_qkv\\\\.weight$\", \"split\": \"col\", \"parts\": 3, \"heads\": \"q\"},\n"
	 "    {\"match\": \"(^|\\\\.)(cross_attn\\\\.(fn\\\\.)?|layers\\\\.[0-9]+\\\\.0\\\\.)to_kv\\\\.weight$\", \"split\": \"col\", \"parts\": 2, \"heads\": \"kv\"},\n"
	 "    {\"match\": \"(^|\\\\.)fn\\\\.fn\\\\.to_kv\\\\.weight$\", \"split\": \"replicate\"},\n"
	 "    {\"match\": \"to_out\\\\.0\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\"},\n"
	 "    {\"match\": \"to_out\\\\.0\\\\.bias$\", \"split\": \"row\"},\n"
	 "    {\"match\": \"layers\\\\.[0-9]+\\\\.1\\\\.1\\\\.weight$\", \"split\": \"col\", \"parts\": 2},\n"
	 "    {\"match\": \"layers\\\\.[0-9]+\\\\.1\\\\.3\\\\.(g|gamma|weight|bias)$\", \"split\": \"col\"},\n"
	 "    {\"match\": \"layers\\\\.[0-9]+\\\\.1\\\\.5\\\\.weight$\", \"split\": \"row\"},\n"
	 "    {\"match\": \"" DALLE2_NORMS "\", \"split\": \"replicate\"},\n"
	 "    {\"match\": \"" DALLE2_UNET "\", \"split\": \"replicate\"},\n"
	 "    {\"match\": \"" DALLE2_PRIOR "\", \"split\": \"replicate\"}\n"
	 "  ],\n"
	 "  \"fallback\": \"replicate\"\n"
	 "}\n";

/* ---- records ---- */

const tpc_family tpc__family_classic[] = {
	{.name = "gpt2",
	 .desc = "GPT-2 (HF names): Conv1D [in,out] weights, fused c_attn [q|k|v] col per part, c_proj row, c_fc col, wte/lm_head vocab",
	 .plan = plan_gpt2,
	 .hf_arch = A("GPT2LMHeadModel"),
	 .gguf = &tpc__gguf_gpt2,
	 .layouts = A("trtllm"),
	 .tensors = gpt2_tensors,
	 .conv1d = true,
	 .trtllm = {.arch = A("GPTForCausalLM"), .gpt_variant = "gpt2"},
	 .rules = A("megatron-gpt"),
	 PARTS(.norm = TPC_PART_LAYERNORM, .attn_bias = true, .pos = TPC_PART_POS_LEARNED, .mlp = TPC_PART_MLP_GELU_NEW, .tied_head = true)},
	{.name = "gpt-neox",
	 .desc = "GPT-NeoX / Pythia (HF names): head-interleaved query_key_value [nh,3,hd] col on head boundaries, dense row, h_to_4h col, 4h_to_h row",
	 .plan = plan_gpt_neox,
	 .hf_arch = A("GPTNeoXForCausalLM"),
	 .gguf = &tpc__gguf_gptneox,
	 .tensors = gptneox_tensors,
	 PARTS(.norm = TPC_PART_LAYERNORM, .qkv = TPC_PART_QKV_PER_HEAD, .partial_rope = true, .rope_fraction = 0.25,
	       .attn_bias = true, .mlp = TPC_PART_MLP_GELU, .resid = TPC_PART_PARALLEL)},
	{.name = "bert",
	 .desc = "BERT (HF names): self query/key/value col on head boundaries, attention output row, intermediate col, output row, word embeddings and MLM decoder vocab",
	 .plan = plan_bert,
	 .hf_arch = A("BertModel", "BertForMaskedLM", "BertForPreTraining"),
	 .tensors = bert_tensors,
	 PARTS(.model = TPC_PART_ENCODER, .norm = TPC_PART_LAYERNORM, .norm_eps = 1e-12, .place = TPC_PART_AFTER_ADD,
	       .attn_bias = true, .pos = TPC_PART_POS_LEARNED, .mlp = TPC_PART_MLP_GELU, .tied_head = true)},
	{.name = "libai",
	 .desc = "LiBai (OneFlow) names: head-interleaved query_key_value col, dense row, dense_h_to_4h col, dense_4h_to_h row, vocab embeddings",
	 .plan = plan_libai,
	 .rules = A("libai"),
	 .tensors = libai_tensors,
	 PARTS(.norm = TPC_PART_LAYERNORM, .qkv = TPC_PART_QKV_PER_HEAD, .attn_bias = true, .pos = TPC_PART_POS_LEARNED,
	       .mlp = TPC_PART_MLP_GELU, .tied_head = true)},
	{.name = "dit",
	 .desc = "diffusers DiT / PixArt / SD3 / Flux / CogVideoX: attn q/k/v (and add_*_proj) col on heads, to_out.0 and to_add_out row, ff.net.0.proj col (2 parts when GEGLU/SwiGLU), ff.net.2 row",
	 .plan = plan_dit,
	 PARTS(.model = TPC_PART_BLOCKS_DIFFUSERS)},
	{.name = "dalle2",
	 .desc = "DALLE2-pytorch transformer: to_q col, fused to_kv col in 2 parts, to_out.0 row; feed-forward Linear(dim, inner*2) col in 2 parts (SwiGLU), Linear(inner, dim) row",
	 .plan = plan_dalle2,
	 .rules = A("dalle2"),
	 PARTS(.model = TPC_PART_BLOCKS_DALLE2)},
};

const size_t tpc__family_classic_count = sizeof(tpc__family_classic) / sizeof(tpc__family_classic[0]);
