/* tpc_rules_doc.c - rules documents (JSON, see tpc_rules.h) and the built-in
 * presets. A document is parsed into tpc_rule_spec values and added through
 * tpc_rules_add, the door the command-line shorthands use too. */
#include "tpc_rules.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpc_io.h"
#include "tpc_rules_int.h"
#include "tpc_util.h"

#define MAX_EXTENDS_DEPTH 8
#define MAX_RULES_FILE (16u << 20)

/* ---- presets ---- */

static const struct preset {
	const char *name, *desc, *text;
} presets[] = {
	{"dalle2",
	 "DALLE2-pytorch decoder: ema_model if present, drop clip.*, .g -> .gamma in cross_attn and fn.fn. blocks",
	 "{\n"
	 "  \"description\": \"DALLE2-pytorch Decoder: take ema_model when present; skip keys containing 'clip.'; when 'cross_attn' or 'fn.fn.' is in the key and it ends with '.g', the final 'g' becomes 'gamma'\",\n"
	 "  \"rules\": [\n"
	 "    {\"select\": \"ema_model\", \"optional\": true},\n"
	 "    {\"drop\": \"clip\\\\.\"},\n"
	 "    {\"rename\": \"\\\\.g$\", \"to\": \".gamma\", \"when\": \"cross_attn|fn\\\\.fn\\\\.\"}\n"
	 "  ]\n"
	 "}\n"},
	{"libai",
	 "LiBai's loader (_fix_key): 'gamma' -> 'weight', 'beta' -> 'bias' (a key with both: only beta)",
	 "{\n"
	 "  \"description\": \"LiBai base_loader._fix_key: a key containing 'beta' has every 'beta' replaced by 'bias'; otherwise every 'gamma' by 'weight'\",\n"
	 "  \"rules\": [\n"
	 "    {\"rename\": \"gamma\", \"to\": \"weight\", \"unless\": \"beta\", \"optional\": true},\n"
	 "    {\"rename\": \"beta\", \"to\": \"bias\", \"optional\": true}\n"
	 "  ]\n"
	 "}\n"},
	{"strip-module",
	 "strip the 'module.' prefix that torch.nn.DataParallel / DistributedDataParallel add",
	 "{\n"
	 "  \"description\": \"torch.nn.DataParallel and DistributedDataParallel state dicts: strip 'module.'\",\n"
	 "  \"rules\": [\n"
	 "    {\"strip_prefix\": \"module.\"}\n"
	 "  ]\n"
	 "}\n"},
	{"gpt2-conv1d",
	 "transpose GPT-2 Conv1D weights [in, out] to Linear [out, in] (c_attn, q_attn, c_proj, c_fc)",
	 "{\n"
	 "  \"description\": \"HF GPT-2 Conv1D stores weight as [in, out]; nn.Linear wants [out, in]\",\n"
	 "  \"rules\": [\n"
	 "    {\"transpose\": \"(^|\\\\.)(c_attn|q_attn|c_proj|c_fc)\\\\.weight$\"}\n"
	 "  ]\n"
	 "}\n"},
	{"megatron-llama",
	 "Megatron-Core (torch_dist, legacy tp 1) LLaMA to HF names: un-fuse linear_qkv per query group and linear_fc1 [gate; up]; TE norms; vocab unpadded",
	 "{\n"
	 "  \"description\": \"Megatron-Core GPTModel (LLaMA family: RMSNorm, SwiGLU, rope; TransformerEngine or local layer spec) to Hugging Face LlamaForCausalLM names. linear_qkv is [q (heads/kv_heads*head_dim); k (head_dim); v (head_dim)] per query group; linear_fc1 is [gate; up] (a torch_dist checkpoint or one merged rank: legacy sets with tp > 1 go through 'tpconv merge'); TE's fused norms are the layer norms; the vocabulary loses Megatron's padding. Facts: heads, kv_heads, head_dim from the checkpoint's args or --config/flags; vocab from --config or --vocab.\",\n"
	 "  \"rules\": [\n"
	 "    {\"drop\": \"\\\\._extra_state$\", \"optional\": true, \"comment\": \"TransformerEngine FP8 state, no weights\"},\n"
	 "    {\"unfuse\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.linear_qkv\\\\.(weight|bias)$\", \"groups\": \"kv_heads\", \"parts\": [{\"to\": \"model.layers.\\\\1.self_attn.q_proj.\\\\2\", \"size\": \"heads/kv_heads*head_dim\"}, {\"to\": \"model.layers.\\\\1.self_attn.k_proj.\\\\2\", \"size\": \"head_dim\"}, {\"to\": \"model.layers.\\\\1.self_attn.v_proj.\\\\2\", \"size\": \"head_dim\"}]},\n"
	 "    {\"unfuse\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.linear_fc1\\\\.weight$\", \"parts\": [{\"to\": \"model.layers.\\\\1.mlp.gate_proj.weight\"}, {\"to\": \"model.layers.\\\\1.mlp.up_proj.weight\"}]},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.linear_qkv\\\\.layer_norm_weight$\", \"to\": \"model.layers.\\\\1.input_layernorm.weight\", \"optional\": true},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.input_layernorm\\\\.weight$\", \"to\": \"model.layers.\\\\1.input_layernorm.weight\", \"optional\": true},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.linear_fc1\\\\.layer_norm_weight$\", \"to\": \"model.layers.\\\\1.post_attention_layernorm.weight\", \"optional\": true},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.pre_mlp_layernorm\\\\.weight$\", \"to\": \"model.layers.\\\\1.post_attention_layernorm.weight\", \"optional\": true},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.linear_proj\\\\.(weight|bias)$\", \"to\": \"model.layers.\\\\1.self_attn.o_proj.\\\\2\"},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.q_layernorm\\\\.weight$\", \"to\": \"model.layers.\\\\1.self_attn.q_norm.weight\", \"optional\": true},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.k_layernorm\\\\.weight$\", \"to\": \"model.layers.\\\\1.self_attn.k_norm.weight\", \"optional\": true},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.linear_fc2\\\\.weight$\", \"to\": \"model.layers.\\\\1.mlp.down_proj.weight\"},\n"
	 "    {\"rename\": \"^decoder\\\\.final_layernorm\\\\.weight$\", \"to\": \"model.norm.weight\"},\n"
	 "    {\"unfuse\": \"^embedding\\\\.word_embeddings\\\\.weight$\", \"parts\": [{\"to\": \"model.embed_tokens.weight\", \"size\": \"vocab\"}, {\"size\": \"rest\", \"comment\": \"Megatron's vocabulary padding\"}]},\n"
	 "    {\"unfuse\": \"^output_layer\\\\.weight$\", \"optional\": true, \"parts\": [{\"to\": \"lm_head.weight\", \"size\": \"vocab\"}, {\"size\": \"rest\", \"comment\": \"Megatron's vocabulary padding\"}]}\n"
	 "  ]\n"
	 "}\n"},
	{"megatron-mixtral",
	 "Megatron-Core (torch_dist) Mixtral to HF names: megatron-llama's rules, the router, each routed expert's linear_fc1 [gate; up] and linear_fc2",
	 "{\n"
	 "  \"description\": \"Megatron-Core GPTModel with routed experts (Mixtral: LLaMA's attention and norms, pre_mlp_layernorm, the router, SequentialMLP or TEGroupedMLP experts, which a torch_dist checkpoint stores alike and tpconv's reader gives back per expert as decoder.layers.L.mlp.experts.local_experts.E.*, E the global number) to Hugging Face MixtralForCausalLM names: the megatron-llama rules, then each expert's linear_fc1 [gate; up] un-fused and linear_fc2 renamed. Facts as megatron-llama's.\",\n"
	 "  \"extends\": \"megatron-llama\",\n"
	 "  \"rules\": [\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.router\\\\.weight$\", \"to\": \"model.layers.\\\\1.block_sparse_moe.gate.weight\"},\n"
	 "    {\"unfuse\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.experts\\\\.local_experts\\\\.(\\\\d+)\\\\.linear_fc1\\\\.weight$\", \"parts\": [{\"to\": \"model.layers.\\\\1.block_sparse_moe.experts.\\\\2.w1.weight\"}, {\"to\": \"model.layers.\\\\1.block_sparse_moe.experts.\\\\2.w3.weight\"}]},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.experts\\\\.local_experts\\\\.(\\\\d+)\\\\.linear_fc2\\\\.weight$\", \"to\": \"model.layers.\\\\1.block_sparse_moe.experts.\\\\2.w2.weight\"}\n"
	 "  ]\n"
	 "}\n"},
	{"megatron-qwen3-moe",
	 "Megatron-Core (torch_dist) Qwen3-MoE to HF names: megatron-llama's rules, the router, each routed expert's linear_fc1 [gate; up] and linear_fc2",
	 "{\n"
	 "  \"description\": \"Megatron-Core GPTModel with routed experts (Qwen3-MoE: LLaMA's attention and norms, pre_mlp_layernorm, the router, SequentialMLP or TEGroupedMLP experts, which a torch_dist checkpoint stores alike and tpconv's reader gives back per expert as decoder.layers.L.mlp.experts.local_experts.E.*, E the global number) to Hugging Face Qwen3MoeForCausalLM names: the megatron-llama rules, then each expert's linear_fc1 [gate; up] un-fused and linear_fc2 renamed. Facts as megatron-llama's.\",\n"
	 "  \"extends\": \"megatron-llama\",\n"
	 "  \"rules\": [\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.router\\\\.weight$\", \"to\": \"model.layers.\\\\1.mlp.gate.weight\"},\n"
	 "    {\"unfuse\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.experts\\\\.local_experts\\\\.(\\\\d+)\\\\.linear_fc1\\\\.weight$\", \"parts\": [{\"to\": \"model.layers.\\\\1.mlp.experts.\\\\2.gate_proj.weight\"}, {\"to\": \"model.layers.\\\\1.mlp.experts.\\\\2.up_proj.weight\"}]},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.experts\\\\.local_experts\\\\.(\\\\d+)\\\\.linear_fc2\\\\.weight$\", \"to\": \"model.layers.\\\\1.mlp.experts.\\\\2.down_proj.weight\"}\n"
	 "  ]\n"
	 "}\n"},
	{"megatron-deepseek-v3",
	 "Megatron-Core (torch_dist) DeepSeek-V3 to HF names: MLA's linear_q/kv_down/up_proj and their fused norms, input_layernorm, the router and its expert_bias, routed and shared experts' linear_fc1 [gate; up] and linear_fc2; vocab unpadded",
	 "{\n"
	 "  \"description\": \"Megatron-Core GPTModel with multi-latent attention and routed plus shared experts (DeepSeek-V3: the TransformerEngine spec with qk_layernorm, the q_a/kv_a norms fused into linear_q_up_proj/linear_kv_up_proj, first_k_dense_replace dense layers with their norm in linear_fc1, the MoE layers' in pre_mlp_layernorm; routed experts as tpconv's reader gives them back per expert, decoder.layers.L.mlp.experts.local_experts.E.*, E the global number) to Hugging Face DeepseekV3ForCausalLM names. No weight changes: Megatron's MLA keeps Hugging Face's row orders (kv_a's [latent; rope key], each head's [nope; rope] and [nope; v]). Facts: vocab from --config or --vocab.\",\n"
	 "  \"rules\": [\n"
	 "    {\"drop\": \"\\\\._extra_state$\", \"optional\": true, \"comment\": \"TransformerEngine FP8 state, no weights\"},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.input_layernorm\\\\.weight$\", \"to\": \"model.layers.\\\\1.input_layernorm.weight\"},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.linear_q_down_proj\\\\.weight$\", \"to\": \"model.layers.\\\\1.self_attn.q_a_proj.weight\"},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.linear_q_up_proj\\\\.layer_norm_weight$\", \"to\": \"model.layers.\\\\1.self_attn.q_a_layernorm.weight\"},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.linear_q_up_proj\\\\.weight$\", \"to\": \"model.layers.\\\\1.self_attn.q_b_proj.weight\"},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.linear_kv_down_proj\\\\.weight$\", \"to\": \"model.layers.\\\\1.self_attn.kv_a_proj_with_mqa.weight\"},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.linear_kv_up_proj\\\\.layer_norm_weight$\", \"to\": \"model.layers.\\\\1.self_attn.kv_a_layernorm.weight\"},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.linear_kv_up_proj\\\\.weight$\", \"to\": \"model.layers.\\\\1.self_attn.kv_b_proj.weight\"},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.linear_proj\\\\.weight$\", \"to\": \"model.layers.\\\\1.self_attn.o_proj.weight\"},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.pre_mlp_layernorm\\\\.weight$\", \"to\": \"model.layers.\\\\1.post_attention_layernorm.weight\", \"optional\": true, \"comment\": \"an MoE layer's norm\"},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.linear_fc1\\\\.layer_norm_weight$\", \"to\": \"model.layers.\\\\1.post_attention_layernorm.weight\", \"optional\": true, \"comment\": \"a dense layer's, fused\"},\n"
	 "    {\"unfuse\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.linear_fc1\\\\.weight$\", \"optional\": true, \"parts\": [{\"to\": \"model.layers.\\\\1.mlp.gate_proj.weight\"}, {\"to\": \"model.layers.\\\\1.mlp.up_proj.weight\"}]},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.linear_fc2\\\\.weight$\", \"to\": \"model.layers.\\\\1.mlp.down_proj.weight\", \"optional\": true},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.router\\\\.weight$\", \"to\": \"model.layers.\\\\1.mlp.gate.weight\", \"optional\": true},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.router\\\\.expert_bias$\", \"to\": \"model.layers.\\\\1.mlp.gate.e_score_correction_bias\", \"optional\": true},\n"
	 "    {\"unfuse\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.experts\\\\.local_experts\\\\.(\\\\d+)\\\\.linear_fc1\\\\.weight$\", \"optional\": true, \"parts\": [{\"to\": \"model.layers.\\\\1.mlp.experts.\\\\2.gate_proj.weight\"}, {\"to\": \"model.layers.\\\\1.mlp.experts.\\\\2.up_proj.weight\"}]},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.experts\\\\.local_experts\\\\.(\\\\d+)\\\\.linear_fc2\\\\.weight$\", \"to\": \"model.layers.\\\\1.mlp.experts.\\\\2.down_proj.weight\", \"optional\": true},\n"
	 "    {\"unfuse\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.shared_experts\\\\.linear_fc1\\\\.weight$\", \"optional\": true, \"parts\": [{\"to\": \"model.layers.\\\\1.mlp.shared_experts.gate_proj.weight\"}, {\"to\": \"model.layers.\\\\1.mlp.shared_experts.up_proj.weight\"}]},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.shared_experts\\\\.linear_fc2\\\\.weight$\", \"to\": \"model.layers.\\\\1.mlp.shared_experts.down_proj.weight\", \"optional\": true},\n"
	 "    {\"rename\": \"^decoder\\\\.final_layernorm\\\\.weight$\", \"to\": \"model.norm.weight\"},\n"
	 "    {\"unfuse\": \"^embedding\\\\.word_embeddings\\\\.weight$\", \"parts\": [{\"to\": \"model.embed_tokens.weight\", \"size\": \"vocab\"}, {\"size\": \"rest\", \"comment\": \"Megatron's vocabulary padding\"}]},\n"
	 "    {\"unfuse\": \"^output_layer\\\\.weight$\", \"optional\": true, \"parts\": [{\"to\": \"lm_head.weight\", \"size\": \"vocab\"}, {\"size\": \"rest\", \"comment\": \"Megatron's vocabulary padding\"}]}\n"
	 "  ]\n"
	 "}\n"},
	{"megatron-gpt",
	 "Megatron-Core GPT to HF GPT-2 names: linear_qkv per head -> c_attn [q; k; v], Conv1D weights transposed; vocab unpadded",
	 "{\n"
	 "  \"description\": \"Megatron-Core GPTModel (GPT-2 style: LayerNorm with biases, GeLU MLP, learned positions; TransformerEngine or local layer spec) to Hugging Face GPT2LMHeadModel names. linear_qkv per head [q_h; k_h; v_h] (per query group in general) becomes c_attn's [q; k; v]; Conv1D weights are stored [in, out], so c_attn, c_proj and c_fc are transposed; the vocabulary loses Megatron's padding. Facts: heads, kv_heads, head_dim from the checkpoint's args or --config/flags; vocab from --config or --vocab.\",\n"
	 "  \"rules\": [\n"
	 "    {\"drop\": \"\\\\._extra_state$\", \"optional\": true, \"comment\": \"TransformerEngine FP8 state, no weights\"},\n"
	 "    {\"unfuse\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.linear_qkv\\\\.(weight|bias)$\", \"groups\": \"kv_heads\", \"to\": \"transformer.h.\\\\1.attn.c_attn.\\\\2\", \"parts\": [{\"size\": \"heads/kv_heads*head_dim\", \"comment\": \"q\"}, {\"size\": \"head_dim\", \"comment\": \"k\"}, {\"size\": \"head_dim\", \"comment\": \"v\"}]},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.linear_qkv\\\\.layer_norm_(weight|bias)$\", \"to\": \"transformer.h.\\\\1.ln_1.\\\\2\", \"optional\": true},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.input_layernorm\\\\.(weight|bias)$\", \"to\": \"transformer.h.\\\\1.ln_1.\\\\2\", \"optional\": true},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.linear_fc1\\\\.layer_norm_(weight|bias)$\", \"to\": \"transformer.h.\\\\1.ln_2.\\\\2\", \"optional\": true},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.pre_mlp_layernorm\\\\.(weight|bias)$\", \"to\": \"transformer.h.\\\\1.ln_2.\\\\2\", \"optional\": true},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.self_attention\\\\.linear_proj\\\\.(weight|bias)$\", \"to\": \"transformer.h.\\\\1.attn.c_proj.\\\\2\"},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.linear_fc1\\\\.(weight|bias)$\", \"to\": \"transformer.h.\\\\1.mlp.c_fc.\\\\2\"},\n"
	 "    {\"rename\": \"^decoder\\\\.layers\\\\.(\\\\d+)\\\\.mlp\\\\.linear_fc2\\\\.(weight|bias)$\", \"to\": \"transformer.h.\\\\1.mlp.c_proj.\\\\2\"},\n"
	 "    {\"transpose\": \"^transformer\\\\.h\\\\.\\\\d+\\\\.(attn\\\\.c_attn|attn\\\\.c_proj|mlp\\\\.c_fc|mlp\\\\.c_proj)\\\\.weight$\"},\n"
	 "    {\"rename\": \"^decoder\\\\.final_layernorm\\\\.(weight|bias)$\", \"to\": \"transformer.ln_f.\\\\1\"},\n"
	 "    {\"rename\": \"^embedding\\\\.position_embeddings\\\\.weight$\", \"to\": \"transformer.wpe.weight\"},\n"
	 "    {\"unfuse\": \"^embedding\\\\.word_embeddings\\\\.weight$\", \"parts\": [{\"to\": \"transformer.wte.weight\", \"size\": \"vocab\"}, {\"size\": \"rest\", \"comment\": \"Megatron's vocabulary padding\"}]},\n"
	 "    {\"unfuse\": \"^output_layer\\\\.weight$\", \"optional\": true, \"parts\": [{\"to\": \"lm_head.weight\", \"size\": \"vocab\"}, {\"size\": \"rest\", \"comment\": \"Megatron's vocabulary padding\"}]}\n"
	 "  ]\n"
	 "}\n"},
	{"torchtitan",
	 "torchtitan llama3 to HF LLaMA names (its convert_to_hf): wq/wk rows from rotary pairs to halves per head; tok_embeddings, attention.w*, feed_forward.w1/w2/w3, norms, output",
	 "{\n"
	 "  \"description\": \"torchtitan's llama3 Transformer (models/llama3 state_dict_adapter to_hf, scripts/checkpoint_conversion) to Hugging Face LlamaForCausalLM names. wq and wk keep Meta's rotary layout (rows 2i and 2i+1 of a head rotate together); Hugging Face's rotates rows i and i + head_dim/2, so their rows are reordered per head as transformers' convert_llama_weights_to_hf.py permute does: wq over heads, wk over kv_heads. w1 is gate_proj, w3 up_proj, w2 down_proj. Facts: heads, kv_heads, head_dim from --config (a Hugging Face config.json) or --heads, --kv-heads, --head-dim.\",\n"
	 "  \"rules\": [\n"
	 "    {\"drop\": \"^freqs_cis$\", \"optional\": true, \"comment\": \"the rotary table, a buffer torchtitan can save\"},\n"
	 "    {\"rope_halves\": \"^layers\\\\.[0-9]+\\\\.attention\\\\.wq\\\\.weight$\", \"heads\": \"heads\", \"head_dim\": \"head_dim\"},\n"
	 "    {\"rope_halves\": \"^layers\\\\.[0-9]+\\\\.attention\\\\.wk\\\\.weight$\", \"heads\": \"kv_heads\", \"head_dim\": \"head_dim\"},\n"
	 "    {\"rename\": \"^tok_embeddings\\\\.weight$\", \"to\": \"model.embed_tokens.weight\"},\n"
	 "    {\"rename\": \"^layers\\\\.([0-9]+)\\\\.attention\\\\.w([qkvo])\\\\.weight$\", \"to\": \"model.layers.\\\\1.self_attn.\\\\2_proj.weight\"},\n"
	 "    {\"rename\": \"^layers\\\\.([0-9]+)\\\\.attention_norm\\\\.weight$\", \"to\": \"model.layers.\\\\1.input_layernorm.weight\"},\n"
	 "    {\"rename\": \"^layers\\\\.([0-9]+)\\\\.ffn_norm\\\\.weight$\", \"to\": \"model.layers.\\\\1.post_attention_layernorm.weight\"},\n"
	 "    {\"rename\": \"^layers\\\\.([0-9]+)\\\\.feed_forward\\\\.w1\\\\.weight$\", \"to\": \"model.layers.\\\\1.mlp.gate_proj.weight\"},\n"
	 "    {\"rename\": \"^layers\\\\.([0-9]+)\\\\.feed_forward\\\\.w2\\\\.weight$\", \"to\": \"model.layers.\\\\1.mlp.down_proj.weight\"},\n"
	 "    {\"rename\": \"^layers\\\\.([0-9]+)\\\\.feed_forward\\\\.w3\\\\.weight$\", \"to\": \"model.layers.\\\\1.mlp.up_proj.weight\"},\n"
	 "    {\"rename\": \"^norm\\\\.weight$\", \"to\": \"model.norm.weight\"},\n"
	 "    {\"rename\": \"^output\\\\.weight$\", \"to\": \"lm_head.weight\", \"optional\": true, \"comment\": \"absent when the embedding is tied\"}\n"
	 "  ]\n"
	 "}\n"},
	{"hf-torchtitan",
	 "HF LLaMA names to torchtitan llama3 (its convert_from_hf): q_proj/k_proj rows from halves back to rotary pairs per head",
	 "{\n"
	 "  \"description\": \"Hugging Face LlamaForCausalLM names to torchtitan's llama3 Transformer (models/llama3 state_dict_adapter from_hf): the inverse of the torchtitan preset. q_proj and k_proj rows go back from Hugging Face's rotary halves to Meta's interleaved pairs per head (q over heads, k over kv_heads); rotary_emb.inv_freq buffers are dropped. Facts: heads, kv_heads, head_dim from --config (the model's config.json is read from its folder) or --heads, --kv-heads, --head-dim.\",\n"
	 "  \"rules\": [\n"
	 "    {\"drop\": \"\\\\.rotary_emb\\\\.inv_freq$\", \"optional\": true},\n"
	 "    {\"rope_pairs\": \"^model\\\\.layers\\\\.[0-9]+\\\\.self_attn\\\\.q_proj\\\\.weight$\", \"heads\": \"heads\", \"head_dim\": \"head_dim\"},\n"
	 "    {\"rope_pairs\": \"^model\\\\.layers\\\\.[0-9]+\\\\.self_attn\\\\.k_proj\\\\.weight$\", \"heads\": \"kv_heads\", \"head_dim\": \"head_dim\"},\n"
	 "    {\"rename\": \"^model\\\\.embed_tokens\\\\.weight$\", \"to\": \"tok_embeddings.weight\"},\n"
	 "    {\"rename\": \"^model\\\\.layers\\\\.([0-9]+)\\\\.self_attn\\\\.([qkvo])_proj\\\\.weight$\", \"to\": \"layers.\\\\1.attention.w\\\\2.weight\"},\n"
	 "    {\"rename\": \"^model\\\\.layers\\\\.([0-9]+)\\\\.input_layernorm\\\\.weight$\", \"to\": \"layers.\\\\1.attention_norm.weight\"},\n"
	 "    {\"rename\": \"^model\\\\.layers\\\\.([0-9]+)\\\\.post_attention_layernorm\\\\.weight$\", \"to\": \"layers.\\\\1.ffn_norm.weight\"},\n"
	 "    {\"rename\": \"^model\\\\.layers\\\\.([0-9]+)\\\\.mlp\\\\.gate_proj\\\\.weight$\", \"to\": \"layers.\\\\1.feed_forward.w1.weight\"},\n"
	 "    {\"rename\": \"^model\\\\.layers\\\\.([0-9]+)\\\\.mlp\\\\.down_proj\\\\.weight$\", \"to\": \"layers.\\\\1.feed_forward.w2.weight\"},\n"
	 "    {\"rename\": \"^model\\\\.layers\\\\.([0-9]+)\\\\.mlp\\\\.up_proj\\\\.weight$\", \"to\": \"layers.\\\\1.feed_forward.w3.weight\"},\n"
	 "    {\"rename\": \"^model\\\\.norm\\\\.weight$\", \"to\": \"norm.weight\"},\n"
	 "    {\"rename\": \"^lm_head\\\\.weight$\", \"to\": \"output.weight\", \"optional\": true, \"comment\": \"absent when the embedding is tied\"}\n"
	 "  ]\n"
	 "}\n"},
};
#define NPRESETS (sizeof(presets) / sizeof(presets[0]))

size_t tpc_rules_preset_count(void)
{
	return NPRESETS;
}
const char *tpc_rules_preset_name(size_t i)
{
	return i < NPRESETS ? presets[i].name : NULL;
}
const char *tpc_rules_preset_desc(size_t i)
{
	return i < NPRESETS ? presets[i].desc : NULL;
}
const char *tpc_rules_preset_text(const char *name)
{
	for (size_t i = 0; i < NPRESETS; i++)
		if (!strcmp(presets[i].name, name))
			return presets[i].text;
	return NULL;
}

static void preset_list(char *buf, size_t n)
{
	size_t len = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < NPRESETS && len < n; i++)
		len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? ", " : "", presets[i].name);
}

static const char *preset_at(size_t i, void *ctx)
{
	(void)ctx;
	return i < NPRESETS ? presets[i].name : NULL;
}

/* ---- JSON rules documents ---- */

/* An error in the document itself, reported against its label (file name).
 * Errors from tpc_rules_add already name their origin ("FILE rule N"). */
#define doc_err(e, label, ...) tpc_err_at((e), TPC_EUSAGE, (label), NULL, __VA_ARGS__)

static const char *const action_keys[] = {
	"select", "drop", "keep", "rename", "strip_prefix", "add_prefix", "transpose", "dtype", "unfuse",
	"rope_halves", "rope_pairs",
};

/* An unfuse size or group count: a string, or a positive integer. */
static int expr_text(const cJSON *it, char *num, size_t n, const char **out)
{
	if (cJSON_IsString(it)) {
		*out = it->valuestring;
		return 0;
	}
	if (cJSON_IsNumber(it) && it->valuedouble >= 1 && it->valuedouble <= 1e12 &&
	    it->valuedouble == (double)(int64_t)it->valuedouble) {
		snprintf(num, n, "%lld", (long long)it->valuedouble);
		*out = num;
		return 0;
	}
	return -1;
}

static int parse_parts(const cJSON *a, tpc_rule_part *parts, char (*num)[24], int *np, const char *label, size_t no,
		       tpc_err *e)
{
	int k = 0;
	if (!cJSON_IsArray(a))
		return doc_err(e, label, "rule %zu: 'parts' must be a list of objects", no);
	for (const cJSON *p = a->child; p; p = p->next, k++) {
		if (k == TPC_RULES_MAX_PARTS)
			return doc_err(e, label, "rule %zu: more than %d parts", no, TPC_RULES_MAX_PARTS);
		if (!cJSON_IsObject(p))
			return doc_err(e, label, "rule %zu: part %d: not an object", no, k + 1);
		parts[k].to = parts[k].size = NULL;
		for (const cJSON *it = p->child; it; it = it->next) {
			if (!strcmp(it->string, "to")) {
				if (!cJSON_IsString(it))
					return doc_err(e, label, "rule %zu: part %d: 'to' must be a string", no, k + 1);
				parts[k].to = it->valuestring;
			} else if (!strcmp(it->string, "size")) {
				if (expr_text(it, num[k], sizeof(num[k]), &parts[k].size))
					return doc_err(e, label, "rule %zu: part %d: 'size' must be a positive integer or a string (\"heads/kv_heads*head_dim\", \"rest\")",
						       no, k + 1);
			} else if (strcmp(it->string, "comment")) {
				char san[128];
				tpc_sanitize(san, sizeof(san), it->string);
				return doc_err(e, label, "rule %zu: part %d: unknown key '%s' (to, size, comment)", no, k + 1, san);
			}
		}
	}
	*np = k;
	return 0;
}

static int parse_rule(tpc_rules *r, const cJSON *o, const char *label, size_t no, tpc_err *e)
{
	tpc_rule_spec s;
	tpc_rule_part parts[TPC_RULES_MAX_PARTS];
	char origin[512], num[TPC_RULES_MAX_PARTS + 3][24];
	const char *action = NULL;
	int ret;
	memset(&s, 0, sizeof(s));
	snprintf(origin, sizeof(origin), "%s rule %zu", label, no);
	if (!cJSON_IsObject(o))
		return doc_err(e, label, "rule %zu: not an object", no);
	for (const cJSON *it = o->child; it; it = it->next) {
		const char *k = it->string;
		bool is_action = false;
		for (size_t a = 0; a < sizeof(action_keys) / sizeof(action_keys[0]); a++)
			if (!strcmp(k, action_keys[a])) {
				if (action)
					return doc_err(e, label, "rule %zu: more than one action ('%s' and '%s'); use one rule each",
							   no, action, k);
				action = k;
				s.kind = (tpc_rule_kind)(TPC_RULE_SELECT + (int)a);
				is_action = true;
			}
		if (!strcmp(k, "parts")) {
			if ((ret = parse_parts(it, parts, num, &s.nparts, label, no, e)))
				return ret;
			s.parts = parts;
			continue;
		}
		if (!strcmp(k, "groups") || !strcmp(k, "heads") || !strcmp(k, "head_dim")) {
			int w = k[0] == 'g' ? 0 : k[4] == '_' ? 2 : 1;
			const char **dst = w == 0 ? &s.groups : w == 1 ? &s.heads : &s.head_dim;
			if (expr_text(it, num[TPC_RULES_MAX_PARTS + w], sizeof(num[0]), dst))
				return doc_err(e, label, "rule %zu: '%s' must be a positive integer or a string (\"%s\")", no, k,
					       w == 2 ? "head_dim" : "kv_heads");
			continue;
		}
		if (!strcmp(k, "dim")) {
			if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= TPC_MAX_NDIM ||
			    it->valuedouble != (double)(int)it->valuedouble)
				return doc_err(e, label, "rule %zu: 'dim' must be an integer 0..%d", no, TPC_MAX_NDIM - 1);
			s.dim = (int)it->valuedouble;
			continue;
		}
		if (!strcmp(k, "optional") || !strcmp(k, "ints")) {
			if (!cJSON_IsBool(it))
				return doc_err(e, label, "rule %zu: '%s' must be true or false", no, k);
			if (k[0] == 'o')
				s.optional = cJSON_IsTrue(it);
			else
				s.ints = cJSON_IsTrue(it);
			continue;
		}
		bool known = is_action || !strcmp(k, "to") || !strcmp(k, "when") ||
			     !strcmp(k, "unless") || !strcmp(k, "match") || !strcmp(k, "comment");
		if (!known) {
			char san[128];
			tpc_sanitize(san, sizeof(san), k);
			return doc_err(e, label, "rule %zu: unknown key '%s' (actions: select drop keep rename strip_prefix add_prefix transpose dtype unfuse rope_halves rope_pairs; modifiers: to when unless match optional ints parts groups dim heads head_dim comment)",
					   no, san);
		}
		if (!cJSON_IsString(it))
			return doc_err(e, label, "rule %zu: '%s' must be a string", no, k);
		const char *v = it->valuestring;
		if (is_action && s.kind == TPC_RULE_DTYPE) {
			s.dtype = tpc_dtype_parse(v);
			if (!tpc__cast_target(s.dtype)) {
				char san[64];
				tpc_sanitize(san, sizeof(san), v);
				return doc_err(e, label, "rule %zu: bad dtype '%s' (bf16, f16, f32 or f64)", no, san);
			}
		} else if (is_action) {
			s.arg = v;
		} else if (!strcmp(k, "to")) {
			s.to = v;
		} else if (!strcmp(k, "when")) {
			s.when = v;
		} else if (!strcmp(k, "unless")) {
			s.unless = v;
		} else if (!strcmp(k, "match")) {
			s.match = v;
		}
	}
	if (!action)
		return doc_err(e, label, "rule %zu: no action (one of select drop keep rename strip_prefix add_prefix transpose dtype unfuse rope_halves rope_pairs)",
				   no);
	return tpc_rules_add(r, &s, origin, e);
}

static int from_buffer(tpc_rules *r, const char *text, size_t len, const char *label, int depth,
		       tpc_err *e);

static int add_extends(tpc_rules *r, const cJSON *x, const char *label, int depth, tpc_err *e)
{
	if (!cJSON_IsString(x))
		return doc_err(e, label, "'extends' must name a preset (a string or a list of strings)");
	const char *text = tpc_rules_preset_text(x->valuestring);
	if (!text) {
		char list[256], san[128];
		preset_list(list, sizeof(list));
		tpc_sanitize(san, sizeof(san), x->valuestring);
		return doc_err(e, label, "'extends': unknown preset '%s' (presets: %s)", san, list);
	}
	char plabel[160];
	snprintf(plabel, sizeof(plabel), "preset %s", x->valuestring);
	return from_buffer(r, text, strlen(text), plabel, depth + 1, e);
}

static int from_buffer(tpc_rules *r, const char *text, size_t len, const char *label, int depth,
		       tpc_err *e)
{
	const char *end = NULL;
	const cJSON *list = NULL;
	cJSON *root;
	int ret = 0;
	if (depth > MAX_EXTENDS_DEPTH)
		return doc_err(e, label, "'extends' nests deeper than %d", MAX_EXTENDS_DEPTH);
	root = cJSON_ParseWithLengthOpts(text, len, &end, false);
	if (!root) {
		size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
		ret = doc_err(e, label, "invalid JSON near byte %zu", at);
		goto out;
	}
	if (cJSON_IsArray(root)) {
		list = root;
	} else if (cJSON_IsObject(root)) {
		for (const cJSON *it = root->child; it; it = it->next) {
			const char *k = it->string;
			if (!strcmp(k, "extends")) {
				if (cJSON_IsArray(it)) {
					for (const cJSON *x = it->child; x && !ret; x = x->next)
						ret = add_extends(r, x, label, depth, e);
				} else {
					ret = add_extends(r, it, label, depth, e);
				}
				if (ret)
					goto out;
			} else if (!strcmp(k, "rules")) {
				if (!cJSON_IsArray(it)) {
					ret = doc_err(e, label, "'rules' must be a list");
					goto out;
				}
				list = it;
			} else if (strcmp(k, "description") && strcmp(k, "comment")) {
				char san[128];
				tpc_sanitize(san, sizeof(san), k);
				ret = doc_err(e, label, "unknown key '%s' (a rules file has extends, rules, description, comment)",
						  san);
				goto out;
			}
		}
	} else {
		ret = doc_err(e, label, "a rules file is a JSON object or a list of rules");
		goto out;
	}
	size_t no = 1;
	for (const cJSON *it = list ? list->child : NULL; it; it = it->next, no++)
		if ((ret = parse_rule(r, it, label, no, e)))
			goto out;
out:
	cJSON_Delete(root);
	return ret;
}

int tpc_rules_from_buffer(tpc_rules *r, const char *text, size_t len, const char *label,
			  tpc_err *e)
{
	return from_buffer(r, text, len, label ? label : "rules", 0, e);
}

int tpc_rules_from_file(tpc_rules *r, const char *path, tpc_err *e)
{
	char *text = NULL;
	size_t len = 0;
	int ret = tpc_read_file(path, MAX_RULES_FILE, &text, &len, e);
	if (ret) {
		/* a rules file that cannot be read is a bad argument (exit 2) */
		tpc_err_path(e, path);
		if (ret == TPC_EINPUT)
			e->code = ret = TPC_EUSAGE;
		return ret;
	}
	ret = tpc_rules_from_buffer(r, text, len, path, e);
	free(text);
	return ret;
}

int tpc_rules_add_preset(tpc_rules *r, const char *name, tpc_err *e)
{
	const char *text = tpc_rules_preset_text(name);
	char label[160];
	if (!text) {
		char list[256], hint[96];
		preset_list(list, sizeof(list));
		tpc_did_you_mean(name, preset_at, NULL, hint, sizeof(hint));
		return tpc_err_set(e, TPC_EUSAGE, "unknown rules preset '%s' (%spresets: %s)", name, hint, list);
	}
	snprintf(label, sizeof(label), "preset %s", name);
	return from_buffer(r, text, strlen(text), label, 0, e);
}

int tpc_rules_load(tpc_rules *r, const char *arg, tpc_err *e)
{
	if (tpc_rules_preset_text(arg))
		return tpc_rules_add_preset(r, arg, e);
	if (!tpc_exists(arg) && !strchr(arg, '/') && !strchr(arg, '.')) {
		char list[256], hint[96];
		preset_list(list, sizeof(list));
		tpc_did_you_mean(arg, preset_at, NULL, hint, sizeof(hint));
		return tpc_err_set(e, TPC_EUSAGE, "'%s' is neither a rules preset (%s) nor a file%s%.*s", arg, list,
				   hint[0] ? "; " : "", hint[0] ? (int)strlen(hint) - 1 : 0, hint);
	}
	return tpc_rules_from_file(r, arg, e);
}
