/* tpc_presets.c - the built-in sharding plans (tpc_plan.h has the schema).
 *
 * Each preset is plain plan JSON, parsed by the same tpc_plan_from_buffer a
 * user's --plan file goes through, so `tpconv plan NAME > my.json` is a
 * starting point that behaves exactly like --preset NAME. Sources for the
 * splits: ../shared/reference/SHARDING.md §1-2. Rules are written to be
 * disjoint; the resolver refuses two rules that disagree about one tensor. */
#include <string.h>

#include "tpc_plan.h"

typedef struct preset {
	const char *name, *desc, *json;
} preset;

/* The LLaMA family's attention and dense MLP (HF names), shared by the dense
 * presets and the mixture-of-experts ones. */
#define LLAMA_STAGES \
	"  \"layers\": [\"layers\\\\.([0-9]+)\\\\.\"],\n" \
	"  \"first_stage\": [\"embed_tokens\\\\.\"],\n" \
	"  \"last_stage\": [\"(^|\\\\.)norm\\\\.\", \"^lm_head\\\\.\"],\n"
#define LLAMA_ATTN_RULES \
	"    {\"match\": \"self_attn\\\\.q_proj\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"q\"},\n" \
	"    {\"match\": \"self_attn\\\\.(k_proj|v_proj)\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"kv\"},\n" \
	"    {\"match\": \"self_attn\\\\.qkv_proj\\\\.(weight|bias)$\", \"split\": \"col\", \"parts\": [\"q\", \"kv\", \"kv\"]},\n" \
	"    {\"match\": \"self_attn\\\\.o_proj\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\"},\n" \
	"    {\"match\": \"self_attn\\\\.o_proj\\\\.bias$\", \"split\": \"row\"},\n"
#define LLAMA_MLP_RULES \
	"    {\"match\": \"mlp\\\\.(gate_proj|up_proj)\\\\.(weight|bias)$\", \"split\": \"col\"},\n" \
	"    {\"match\": \"mlp\\\\.gate_up_proj\\\\.(weight|bias)$\", \"split\": \"col\", \"parts\": 2},\n" \
	"    {\"match\": \"mlp\\\\.down_proj\\\\.(weight|bias)$\", \"split\": \"row\"},\n"
#define LLAMA_EDGE_RULES \
	"    {\"match\": \"embed_tokens\\\\.weight$\", \"split\": \"vocab\"},\n" \
	"    {\"match\": \"^lm_head\\\\.weight$\", \"split\": \"vocab\"},\n" \
	"    {\"match\": \"(layernorm|(^|\\\\.)norm|(^|\\\\.)(q_norm|k_norm))\\\\.(weight|bias)$|rotary_emb\\\\.inv_freq$\", \"split\": \"replicate\"}\n"
#define LLAMA_JSON(NAME) \
	"{\n" \
	"  \"name\": \"" NAME "\",\n" \
	"  \"description\": \"LLaMA, Mistral, Qwen2/Qwen3, Gemma, Phi-3 and similar decoders with Hugging Face names. q/k/v col on head boundaries (K/V heads replicated when tp > kv heads, as TensorRT-LLM and vLLM do; head_dim from the config when it is not hidden/heads, as Gemma's), o_proj row, gate/up col, down row, embed_tokens and lm_head vocab-parallel; Qwen2-style q/k/v biases split with their weights; Qwen3 q_norm/k_norm replicated; fused qkv_proj [q|k|v] and gate_up_proj [gate|up] (Phi-3) split per part.\",\n" \
	LLAMA_STAGES \
	"  \"rules\": [\n" LLAMA_ATTN_RULES LLAMA_MLP_RULES LLAMA_EDGE_RULES "  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"
/* Mixture of experts with tensor parallelism inside every expert (vLLM's
 * default for Mixtral and Qwen-MoE without --enable-expert-parallel:
 * vllm/model_executor/layers/fused_moe/layer.py shards w13 on the output and
 * w2 on the input per tp rank): each expert's w1/w3 (gate/up) col, w2 (down)
 * row; the router, Qwen's shared-expert gate and DeepSeek-style score
 * correction bias replicated; a shared expert split like a dense MLP; dense
 * layers (decoder_sparse_step, mlp_only_layers) as LLaMA's. */
#define MOE_RULES \
	"    {\"match\": \"experts\\\\.[0-9]+\\\\.(w1|w3|gate_proj|up_proj)\\\\.(weight|bias)$\", \"split\": \"col\"},\n" \
	"    {\"match\": \"experts\\\\.[0-9]+\\\\.(w2|down_proj)\\\\.(weight|bias)$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"shared_experts?\\\\.(gate_proj|up_proj)\\\\.(weight|bias)$\", \"split\": \"col\"},\n" \
	"    {\"match\": \"shared_experts?\\\\.down_proj\\\\.(weight|bias)$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"(block_sparse_moe|mlp)\\\\.gate\\\\.(weight|bias|e_score_correction_bias)$|shared_expert_gate\\\\.weight$\", \"split\": \"replicate\"},\n"
#define MOE_JSON(NAME, DESC) \
	"{\n" \
	"  \"name\": \"" NAME "\",\n" \
	"  \"description\": \"" DESC " Attention as LLaMA's. Every expert split by tensor parallelism inside it: experts.N w1/w3 (gate_proj/up_proj) col, w2 (down_proj) row; the shared expert like a dense MLP; the router (gate), shared_expert_gate and e_score_correction_bias replicated on every rank; dense layers as LLaMA's. With --ep N every expert (experts.N.) lives on one EP group of tp/N ranks, split tp/N ways there.\",\n" \
	LLAMA_STAGES \
	"  \"experts\": [\"experts\\\\.([0-9]+)\\\\.\"],\n" \
	"  \"rules\": [\n" LLAMA_ATTN_RULES LLAMA_MLP_RULES MOE_RULES \
	LLAMA_EDGE_RULES "  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"

/* DeepSeek-V2/V3 (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM) with HF
 * names, split as vLLM's deepseek_v2.py does: multi-head latent attention's
 * low-rank down projections (q_a_proj, kv_a_proj_with_mqa) and their norms
 * ReplicatedLinear; q_b_proj (or V2-Lite's q_proj) and kv_b_proj
 * ColumnParallelLinear over the heads, o_proj RowParallelLinear. Their heads
 * are not head_dim rows (qk_nope + qk_rope in q_b_proj, qk_nope + v in
 * kv_b_proj, v columns in o_proj), so the rules count heads
 * ("head_count"): tp must divide num_attention_heads. Routed experts as the
 * MoE presets (FusedMoE: TP inside every expert), shared_experts as a dense
 * MLP, the router and its e_score_correction_bias replicated, the
 * first_k_dense_replace dense layers as LLaMA's. */
#define DEEPSEEK_JSON \
	"{\n" \
	"  \"name\": \"deepseek-v3\",\n" \
	"  \"description\": \"DeepSeek-V3 and DeepSeek-V2 (DeepseekV3ForCausalLM, DeepseekV2ForCausalLM) with Hugging Face names, split as vLLM does. Multi-head latent attention: q_a_proj, kv_a_proj_with_mqa and their q_a_layernorm/kv_a_layernorm replicated; q_b_proj (V2-Lite: q_proj) col by heads (num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim) rows), kv_b_proj col by heads (num_attention_heads x (qk_nope_head_dim + v_head_dim) rows), o_proj row by heads (num_attention_heads x v_head_dim columns); tp must divide num_attention_heads. Routed experts mlp.experts.N gate_proj/up_proj col, down_proj row (tensor parallelism inside every expert); mlp.shared_experts like a dense MLP; the router mlp.gate and its e_score_correction_bias replicated; the first_k_dense_replace dense layers' mlp as LLaMA's; embed_tokens and lm_head vocab-parallel. With --ep N every expert lives on one EP group of tp/N ranks. FP8 block checkpoints (quantization_config fp8, weight_block_size) split their weight_scale_inv with each layer; --pad pads a layer whose slices would cut a block.\",\n" \
	LLAMA_STAGES \
	"  \"experts\": [\"experts\\\\.([0-9]+)\\\\.\"],\n" \
	"  \"rules\": [\n" \
	"    {\"match\": \"self_attn\\\\.(q_proj|q_b_proj|kv_b_proj)\\\\.(weight|bias)$\", \"split\": \"col\", \"heads\": \"q\", \"head_count\": true},\n" \
	"    {\"match\": \"self_attn\\\\.o_proj\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\", \"head_count\": true},\n" \
	"    {\"match\": \"self_attn\\\\.o_proj\\\\.bias$\", \"split\": \"row\"},\n" \
	"    {\"match\": \"self_attn\\\\.(q_a_proj|kv_a_proj_with_mqa|q_a_layernorm|kv_a_layernorm)\\\\.(weight|bias)$\", \"split\": \"replicate\"},\n" \
	LLAMA_MLP_RULES MOE_RULES LLAMA_EDGE_RULES "  ],\n" \
	"  \"fallback\": \"replicate\"\n" \
	"}\n"

static const preset presets[] = {
	{"llama",
	 "LLaMA / Mistral / Qwen2 / Qwen3 / Gemma / Phi-3 (HF names): GQA q/k/v col on head boundaries, o row, gate/up col, down row, vocab-parallel embed and lm_head",
	 LLAMA_JSON("llama")},
	{"mistral", "Mistral (HF names): the llama plan", LLAMA_JSON("mistral")},
	{"qwen2", "Qwen2 / Qwen2.5 / Qwen3 dense (HF names): the llama plan (q/k/v biases, q_norm/k_norm)", LLAMA_JSON("qwen2")},
	{"gemma", "Gemma 1/2/3 text (HF names): the llama plan; head_dim from config.json (not hidden/heads)", LLAMA_JSON("gemma")},
	{"phi3", "Phi-3 (HF names): the llama plan; fused qkv_proj [q|k|v] and gate_up_proj [gate|up] split per part", LLAMA_JSON("phi3")},
	{"mixtral",
	 "Mixtral (HF names): llama attention; block_sparse_moe.experts.N w1/w3 col, w2 row (tp inside each expert); router replicated",
	 MOE_JSON("mixtral", "Mixtral (MixtralForCausalLM) with Hugging Face names.")},
	{"qwen2-moe",
	 "Qwen2-MoE / Qwen3-MoE (HF names): llama attention; mlp.experts.N gate/up col, down row; shared_expert like a dense MLP; router and shared_expert_gate replicated",
	 MOE_JSON("qwen2-moe", "Qwen2-MoE and Qwen3-MoE (Qwen2MoeForCausalLM, Qwen3MoeForCausalLM) with Hugging Face names.")},
	{"deepseek-v3",
	 "DeepSeek-V3 / DeepSeek-V2 (HF names): MLA q_a/kv_a replicated, q_b_proj/kv_b_proj col and o_proj row by heads; mlp.experts.N gate/up col, down row; shared_experts like a dense MLP; router and e_score_correction_bias replicated",
	 DEEPSEEK_JSON},
	{"gpt2",
	 "GPT-2 (HF names): Conv1D [in,out] weights, fused c_attn [q|k|v] col per part, c_proj row, c_fc col, wte/lm_head vocab",
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
	 "}\n"},
	{"gpt-neox",
	 "GPT-NeoX / Pythia (HF names): head-interleaved query_key_value [nh,3,hd] col on head boundaries, dense row, h_to_4h col, 4h_to_h row",
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
	 "}\n"},
	{"bert",
	 "BERT (HF names): self query/key/value col on head boundaries, attention output row, intermediate col, output row, word embeddings and MLM decoder vocab",
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
	 "}\n"},
	{"libai",
	 "LiBai (OneFlow) names: head-interleaved query_key_value col, dense row, dense_h_to_4h col, dense_4h_to_h row, vocab embeddings",
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
	 "}\n"},
	{"dit",
	 "diffusers DiT / PixArt / SD3 / Flux / CogVideoX: attn q/k/v (and add_*_proj) col on heads, to_out.0 and to_add_out row, ff.net.0.proj col (2 parts when GEGLU/SwiGLU), ff.net.2 row",
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
	 "}\n"},
	{"dalle2",
	 "DALLE2-pytorch transformer: to_q col, fused to_kv col in 2 parts, to_out.0 row; feed-forward Linear(dim, inner*2) col in 2 parts (SwiGLU), Linear(inner, dim) row",
	 "{\n"
	 "  \"name\": \"dalle2\",\n"
	 "  \"description\": \"DALLE2-pytorch attention and feed-forward blocks (layers.N.0 = Attention, layers.N.1 = FeedForward). to_q col on head boundaries; to_kv = [k | v] col in 2 parts (one kv head of dim_head rows each in the prior's multi-query Attention: replicated on every rank, as MQA needs; nh heads in CrossAttention: split); to_out.0 row. FeedForward: Sequential(LayerNorm, Linear(dim, inner*2), SwiGLU, LayerNorm|Identity, Dropout, Linear(inner, dim)): index 1 col in 2 parts [x | gate], the post-activation norm over inner col, index 5 row. dim_head defaults to 64 as in the library.\",\n"
	 "  \"model\": {\"head_dim\": 64},\n"
	 "  \"layers\": [\"layers\\\\.([0-9]+)\\\\.\"],\n"
	 "  \"first_stage\": [],\n"
	 "  \"last_stage\": [\"final_norm\\\\.\", \"project_out\\\\.\", \"to_logits\\\\.\"],\n"
	 "  \"rules\": [\n"
	 "    {\"match\": \"to_q\\\\.weight$\", \"split\": \"col\", \"heads\": \"q\"},\n"
	 "    {\"match\": \"to_kv\\\\.weight$\", \"split\": \"col\", \"parts\": 2, \"heads\": \"kv\"},\n"
	 "    {\"match\": \"to_out\\\\.0\\\\.weight$\", \"split\": \"row\", \"heads\": \"q\"},\n"
	 "    {\"match\": \"to_out\\\\.0\\\\.bias$\", \"split\": \"row\"},\n"
	 "    {\"match\": \"layers\\\\.[0-9]+\\\\.1\\\\.1\\\\.weight$\", \"split\": \"col\", \"parts\": 2},\n"
	 "    {\"match\": \"layers\\\\.[0-9]+\\\\.1\\\\.3\\\\.(g|weight|bias)$\", \"split\": \"col\"},\n"
	 "    {\"match\": \"layers\\\\.[0-9]+\\\\.1\\\\.5\\\\.weight$\", \"split\": \"row\"},\n"
	 "    {\"match\": \"(^|\\\\.)(norm|to_out\\\\.1|1\\\\.0)\\\\.(g|b|weight|bias)$|null_kv$|rotary_emb\\\\.\", \"split\": \"replicate\"}\n"
	 "  ],\n"
	 "  \"fallback\": \"replicate\"\n"
	 "}\n"},
};

size_t tpc_plan_preset_count(void)
{
	return sizeof(presets) / sizeof(presets[0]);
}

const char *tpc_plan_preset_name(size_t i)
{
	return i < tpc_plan_preset_count() ? presets[i].name : NULL;
}

const char *tpc_plan_preset_desc(size_t i)
{
	return i < tpc_plan_preset_count() ? presets[i].desc : NULL;
}

const char *tpc_plan_preset_json(const char *name)
{
	for (size_t i = 0; i < tpc_plan_preset_count(); i++)
		if (!strcmp(presets[i].name, name))
			return presets[i].json;
	return NULL;
}
