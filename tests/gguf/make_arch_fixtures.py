#!/usr/bin/env python3
"""Tiny Hugging Face models, one per family convert_hf_to_gguf.py converts,
and the reference converter's GGUF of each (llama.cpp 0.7, in the forky
chroot: transformers 5.12, torch 2.14, python3-gguf, sentencepiece).

usage (inside the chroot): make_arch_fixtures.py OUT
  OUT/models/tiny-<family>/   config.json, model.safetensors, tokenizer files
  OUT/ref/<family>-<outtype>.gguf and .txt (gguf_arch_dump.py of it)
  OUT/ref/whole.sha256   the sha256 of each reference GGUF (arch_test.sh
                         converts with tpconv and compares whole files)

Models: hidden 32, 2 layers, 4 heads (2 kv heads), seeded random weights
(norm weights 1 + noise, biases random, so that permutations, norm offsets
and biases all show). Tokenizers trained here: SentencePiece (byte_fallback,
320 pieces) for the llama-arch families, gemma and phi3; a byte-level BPE
(tokenizers, 320 tokens) for qwen2, qwen3, qwen2-moe, gpt2 and gpt-neox. The
reference refuses a BPE tokenizer whose pre-tokenizer hash it does not know:
ref_convert.py runs it with get_vocab_base_pre answering the family's usual
pre-tokenizer name when the hash is unknown (TPC_PRE), nothing else changed;
the qwen families' tokenizers get Qwen2's own pre-tokenizer (Split regex +
ByteLevel, NFC), GPT-2's its ByteLevel, GPT-NeoX's its NFC + ByteLevel and
<|endoftext|>, <|padding|> (transformers' GPTNeoXTokenizer; "olmo", the name
the reference's hash gives GPT-NeoX-20B's tokenizer, which Pythia uses), so
that the name is the one the tokenizer's pre_tokenizer stands for.
phi3's tokenizer is laid out as Phi-3-mini's: 300 SentencePiece pieces, then
its 11 added tokens (<|endoftext|>, <|assistant|>, ... <|end|>, <|user|>) in
added_tokens.json and tokenizer_config.json's added_tokens_decoder, ids past
them up to vocab_size 320 padded (Phi-3: 32011 tokens, vocab_size 32064);
llama.cpp looks <|endoftext|> up by name in a model named phi3 and refuses
the vocabulary without it. (No tokenizer.json: transformers 5 cannot convert
a tokenizer.model without protobuf; its added_tokens path is in
tests/gguf/vocab/phi3-spm.)
gpt-neox: the reference reads hparams through transformers 5's AutoConfig,
which drops rotary_pct (now rope_parameters.partial_rotary_factor), then
fails on it (KeyError); ref_convert.py gives the hparams the rotary_pct
config.json holds.
hunyuan-moe: as tencent/Hunyuan-A13B lays its folder out, a tiktoken
vocabulary (hy.tiktoken: the 256 bytes and 54 merges of a byte-level BPE
trained here, ranks in line order) and the remote tokenizer module its
tokenizer_config.json's auto_map names, tokenization_hy.py, which
HunYuanMoEModel.set_vocab loads with AutoTokenizer(trust_remote_code=True)
for mergeable_ranks, special_tokens and vocab_size. That module is ours
(hy_tokenizer.py, copied in), written to the interface of Tencent's
tokenization_hy.py (HYTokenizer: _load_tiktoken_bpe numbering tokens by line,
SPECIAL_TOKENS <|endoftext|>, <|startoftext|>, <|bos|>, <|eos|>, <|pad|>,
<|extra_N|> after the last rank, PAT_STR) read through the search tools; no
code of Tencent's, and no tiktoken (the chroot has none: a plain rank-ordered
BPE). The reference's get_vocab_base_pre hashes the module's encoding of its
check text; a tiny vocabulary's hash is in no table, so ref_convert.py's
TPC_PRE gives "hunyuan", the name its table holds for Hunyuan-A13B's
tokenizer (base.py: chkhsh 7e57df22...), nothing else changed. config.json
gets the lists A13B's has (moe_intermediate_size, moe_topk, num_shared_expert,
one entry a layer; HunYuanMoEModel asserts on them) and the ids of <|bos|>,
<|eos|>, <|pad|> (the reference then writes bos_token_id 127959, A13B's
<|bos|>, whatever the vocabulary: llama.cpp warns and keeps its default).
Two llamas whose tokenizer is tokenizer.json alone (tokenizer_folders; issue
41 item 6), f32 only (the tokenizer does not depend on the outtype):
tiny-llama-hf as transformers 5's LlamaTokenizer saves a SentencePiece-derived
BPE (byte_fallback, Metaspace, a Sequence decoder; chat_template.jinja; the
reference's LlamaHfVocab path): 318 pieces of a tokenizer.model trained here
(vocab and merges read with sentencepiece, as transformers would without
protobuf), then <|user|> (an extra special token) and <|tool|> (a plain added
token); tiny-llama3 with a Llama 3 style tokenizer.json (byte-level BPE,
Llama 3's Split regex, ignore_merges, no byte_fallback; the reference's
_set_vocab_gpt2 with TPC_PRE=llama-bpe).
"""
import hashlib, json, os, shutil, subprocess, sys
import torch
import transformers as tf

OUT = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
V = 320
TEXT = [
    "the quick brown fox jumps over the lazy dog %d times." % i for i in range(50)
] + [
    "hello world, tensors are sharded and converted to gguf files; llama.cpp loads them. %s" % w
    for w in ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")
] * 10

# Phi-3-mini's added tokens (added_tokens.json), from id PHI3_N on
PHI3_ADDED = ["<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>",
              "<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>", "<|placeholder6|>", "<|user|>"]
PHI3_N = 300
PHI3_TEMPLATE = ("{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + "
                 "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + "
                 "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + "
                 "message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}"
                 "{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}")
COMMON = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
# family: (config class, kwargs, tokenizer kind, dtype, pre-tokenizer for BPE)
FAMILIES = {
    "llama": (tf.LlamaConfig, dict(COMMON, tie_word_embeddings=False), "spm", torch.float32, None),
    "mistral": (tf.MistralConfig, dict(COMMON, tie_word_embeddings=False), "spm", torch.bfloat16, None),
    "qwen2": (tf.Qwen2Config, dict(COMMON, tie_word_embeddings=True), "bpe", torch.float32, "qwen2"),
    "qwen3": (tf.Qwen3Config, dict(COMMON, head_dim=16, tie_word_embeddings=False), "bpe", torch.float32, "qwen2"),
    "gemma": (tf.GemmaConfig, dict(COMMON, head_dim=16), "spm", torch.float32, None),
    # Gemma 2: sliding layers of a 4-token window; query_pre_attn_scalar its
    # head_dim, as llama.cpp assumes for Gemma 2 (a GGUF read back gets it so)
    "gemma2": (tf.Gemma2Config, dict(COMMON, head_dim=16, query_pre_attn_scalar=16, sliding_window=4), "spm",
               torch.float32, None),
    # Gemma 3 text (Gemma3ForCausalLM): six layers, five sliding (a 4-token
    # window) then a full one (layer_types' default; llama.cpp's gemma3
    # assumes that pattern, set_swa_pattern(6)), each layer type its own rope
    # as google/gemma-3-4b's config.json (full: linear factor 8 on theta 1e6;
    # sliding: theta 1e4), the final softcap (Gemma3TextConfig's default
    # None), query_pre_attn_scalar its head_dim (as Gemma 2's)
    "gemma3": (tf.Gemma3TextConfig, dict(COMMON, num_hidden_layers=6, head_dim=16, query_pre_attn_scalar=16,
                                         sliding_window=4,
                                         final_logit_softcapping=30.0,
                                         rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0,
                                                                             "rope_theta": 1000000.0},
                                                          "sliding_attention": {"rope_type": "default",
                                                                                "rope_theta": 10000.0}}),
               "spm", torch.float32, None),
    "phi3": (tf.Phi3Config, dict(COMMON, tie_word_embeddings=False, bos_token_id=1, eos_token_id=PHI3_N,
                                 pad_token_id=PHI3_N), "phi3", torch.float32, None),
    "mixtral": (tf.MixtralConfig, dict(COMMON, num_local_experts=4, num_experts_per_tok=2,
                                       tie_word_embeddings=False), "spm", torch.float32, None),
    "qwen2-moe": (tf.Qwen2MoeConfig, dict(COMMON, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                          shared_expert_intermediate_size=64, decoder_sparse_step=1,
                                          tie_word_embeddings=False), "bpe", torch.float32, "qwen2"),
    "olmo2": (tf.Olmo2Config, dict(COMMON, tie_word_embeddings=False, rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=0,
                                   pad_token_id=1), "bpe", torch.float32, "olmo"),
    "qwen3-moe": (tf.Qwen3MoeConfig, dict(COMMON, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                          moe_intermediate_size=32, decoder_sparse_step=1, norm_topk_prob=True,
                                          tie_word_embeddings=False), "bpe", torch.float32, "qwen2"),
    # four layers, a 4-token window: layer_types' default, three sliding then one full
    "olmo3": (tf.Olmo3Config, dict(COMMON, num_hidden_layers=4, sliding_window=4, tie_word_embeddings=False,
                                   rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=0, pad_token_id=1),
              "bpe", torch.float32, "olmo"),
    # rms_norm_eps 1e-6: OlmoeModel writes 1e-5 whatever the config says
    "olmoe": (tf.OlmoeConfig, dict(COMMON, num_experts=4, num_experts_per_tok=2, tie_word_embeddings=False,
                                   rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=0, pad_token_id=1),
              "bpe", torch.float32, "olmo"),
    # granite: LLaMA with its four multipliers (config.json facts)
    "granite": (tf.GraniteConfig, dict(COMMON, tie_word_embeddings=False, embedding_multiplier=12.0,
                                       residual_multiplier=0.22, attention_multiplier=0.0625, logits_scaling=8.0),
                "spm", torch.float32, None),
    # smollm3: four layers, so that the fourth is without RoPE (SmolLM3Config's
    # default no_rope_layers, the step llama.cpp assumes); its tied head
    "smollm3": (tf.SmolLM3Config, dict(COMMON, num_hidden_layers=4, bos_token_id=1, eos_token_id=2, pad_token_id=None),
                "spm", torch.float32, None),
    # seed-oss: q/k/v biases (attention_bias, its default), no o_proj bias (its
    # attention_out_bias default), head_dim 16 (not hidden / heads); a plain
    # byte-level BPE, as starcoder2's
    "seed-oss": (tf.SeedOssConfig, dict(COMMON, head_dim=16, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0,
                                        pad_token_id=None), "bpe", torch.float32, "gpt-2"),
    # granitemoe: Granite's multipliers, its experts fused on disk as [E, 2I, H]
    # (input_linear: gate then up) and [E, H, I] (output_linear)
    "granitemoe": (tf.GraniteMoeConfig, dict(COMMON, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2,
                                             tie_word_embeddings=False, embedding_multiplier=12.0,
                                             residual_multiplier=0.22, attention_multiplier=0.0625,
                                             logits_scaling=8.0), "spm", torch.float32, None),
    # granitemoeshared: Granite-MoE with a shared expert (shared_mlp.input_linear
    # [2 x 48, H]: gate then up; output_linear), added to the routed experts
    "granitemoeshared": (tf.GraniteMoeSharedConfig, dict(COMMON, intermediate_size=32, shared_intermediate_size=48,
                                                         num_local_experts=4, num_experts_per_tok=2,
                                                         tie_word_embeddings=False, embedding_multiplier=12.0,
                                                         residual_multiplier=0.22, attention_multiplier=0.0625,
                                                         logits_scaling=8.0), "spm", torch.float32, None),
    # granitemoehybrid (Granite 4): layers 0 and 2 Mamba-2 mixers (4 heads of
    # 16 channels, one group of B and C 8 wide, a conv1d of 4 taps, conv and no
    # proj biases, GraniteMoeHybridConfig's defaults), 1 and 3 attention without
    # a rotary embedding (position_embedding_type unsaid: nope, as
    # granite-4.0-h); every layer Granite-MoE's experts beside a shared MLP;
    # Granite's multipliers. -dense: num_local_experts 0 (the shared MLP alone),
    # two groups of B and C
    "granitemoehybrid": (tf.GraniteMoeHybridConfig, dict(COMMON, num_hidden_layers=4, intermediate_size=32,
                                                         shared_intermediate_size=48, num_local_experts=4,
                                                         num_experts_per_tok=2, tie_word_embeddings=False,
                                                         embedding_multiplier=12.0, residual_multiplier=0.22,
                                                         attention_multiplier=0.0625, logits_scaling=8.0,
                                                         layer_types=["mamba", "attention", "mamba", "attention"],
                                                         mamba_n_heads=4, mamba_n_groups=1, mamba_d_state=8,
                                                         mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=8),
                         "spm", torch.float32, None),
    "granitemoehybrid-dense": (tf.GraniteMoeHybridConfig, dict(COMMON, num_hidden_layers=4, shared_intermediate_size=48,
                                                               num_local_experts=0, tie_word_embeddings=False,
                                                               embedding_multiplier=12.0, residual_multiplier=0.22,
                                                               attention_multiplier=0.0625, logits_scaling=8.0,
                                                               layer_types=["mamba", "attention", "mamba", "attention"],
                                                               mamba_n_heads=4, mamba_n_groups=2, mamba_d_state=8,
                                                               mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=8),
                               "spm", torch.float32, None),
    # a plain byte-level BPE: llama.cpp's name for it is gpt-2 (StarCoder2's own
    # tokenizer splits digits first, its "starcoder"), so that tpconv reads the name given
    "starcoder2": (tf.Starcoder2Config, dict(COMMON, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0),
                   "bpe", torch.float32, "gpt-2"),
    # GLM-4: fused gate_up, q/k/v biases, sandwich norms, a half of each head
    # rotated in interleaved pairs; Glm4Model.set_vocab looks <|endoftext|> and
    # <|user|> up among the added tokens
    "glm4": (tf.Glm4Config, dict(COMMON, head_dim=8, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0,
                                 pad_token_id=0), "bpe", torch.float32, "gpt-2"),
    # ERNIE 4.5: LLaMA with interleaved-pair rope, _set_vocab_sentencepiece
    "ernie4_5": (tf.Ernie4_5Config, dict(COMMON, head_dim=8, tie_word_embeddings=True), "spm", torch.float32, None),
    # EXAONE 4: OLMo 2's post norms, per-head q/k norms; four layers of a
    # 4-token window by sliding_window_pattern's default, three sliding then one
    # full (without rope)
    "exaone4": (tf.Exaone4Config, dict(COMMON, num_hidden_layers=4, sliding_window=4, tie_word_embeddings=False,
                                       bos_token_id=0, eos_token_id=0), "bpe", torch.float32, "gpt-2"),
    # Phi-2: parallel attention and MLP under one LayerNorm, partial rotary
    # (a half of each 8-wide head), biases everywhere, lm_head's too; MHA and
    # intermediate 4 x hidden, as Phi2Model writes head_count_kv and
    # feed_forward_length whatever config.json says
    "phi": (tf.PhiConfig, dict(vocab_size=V, hidden_size=32, intermediate_size=128, num_hidden_layers=2,
                                num_attention_heads=4, max_position_embeddings=128, partial_rotary_factor=0.5,
                                bos_token_id=0, eos_token_id=0, tie_word_embeddings=False),
             "bpe", torch.float32, "gpt-2"),
    # Cohere 2: four layers, a 4-token window (three sliding with RoPE, then a
    # full one without), logit_scale, a tied head; rotary_pct as Command R7B's
    # config.json has it (Cohere2Model reads it; Cohere2Config does not)
    "cohere2": (tf.Cohere2Config, dict(COMMON, num_hidden_layers=4, sliding_window=4, logit_scale=0.25,
                                       rotary_pct=1.0, bos_token_id=0, eos_token_id=0, pad_token_id=0),
                "bpe", torch.float32, "gpt-2"),
    # GLM-4.5 MoE: layer 0 dense (first_k_dense_replace), layer 1 a mixture of
    # 4 experts in 2 groups (sigmoid router with e_score_correction_bias, one
    # group kept, top-2 renormalised times routed_scaling_factor) beside a
    # shared expert; q/k/v biases, per-head q/k norms, a half of each 16-wide
    # head rotated (rotate-half); one next-token-prediction layer (layer 2,
    # num_nextn_predict_layers, added to the checkpoint: glm4moe_mtp) that
    # transformers leaves out and convert_hf_to_gguf.py keeps
    "glm4-moe": (tf.Glm4MoeConfig, dict(COMMON, head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
                                        moe_intermediate_size=16, n_shared_experts=1, n_group=2, topk_group=1,
                                        first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True,
                                        use_qk_norm=True, attention_bias=True, partial_rotary_factor=0.5,
                                        num_nextn_predict_layers=1, tie_word_embeddings=False,
                                        bos_token_id=0, eos_token_id=0, pad_token_id=0),
                 "bpe", torch.float32, "gpt-2"),
    # DeepSeek-V3 (the record deepseek-v3; folder tiny-deepseek: "-v3" would
    # be general.version and general.basename to the reference): 3 layers, the first dense (first_k_dense_replace), then
    # sigmoid-routed experts (4, 2 per token, 2 groups) with
    # e_score_correction_bias and a shared expert; MLA with q's low rank
    # (q_a_proj/q_b_proj), kv_lora_rank 32 (attn_v_b q8_0-able) and
    # qk_nope_head_dim 16 (attn_k_b f16 at q8_0); a yarn rope with
    # mscale_all_dim (rope.scaling.yarn_log_multiplier); scoring_func and
    # topk_method as DeepSeek-V3's config.json has them (expert_gating_func)
    "deepseek": (tf.DeepseekV3Config, dict(COMMON, num_hidden_layers=3, num_key_value_heads=4,
                                              moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2,
                                              n_shared_experts=1, n_group=2, topk_group=1, first_k_dense_replace=1,
                                              routed_scaling_factor=2.5, norm_topk_prob=True, kv_lora_rank=32,
                                              q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16,
                                              v_head_dim=16, scoring_func="sigmoid", topk_method="noaux_tc",
                                              tie_word_embeddings=False, bos_token_id=0,
                                              eos_token_id=0, pad_token_id=None,
                                              rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                                                                   original_max_position_embeddings=32,
                                                                   beta_fast=32.0, beta_slow=1.0, mscale=1.0,
                                                                   mscale_all_dim=1.0)),
                    "bpe", torch.float32, "gpt-2"),
    # gpt-oss (bf16, not MXFP4): attention sinks, two layers (sliding of a
    # 4-token window, then full: layer_types' default), YaRN rope (its
    # default rope_parameters), q/k/v/o biases, 4 experts fused on disk
    # [E, H, 2I] with gate and up interleaved, their biases, a router bias
    "gpt-oss": (tf.GptOssConfig, dict(COMMON, intermediate_size=32, head_dim=8, num_local_experts=4,
                                      num_experts_per_tok=2, sliding_window=4, tie_word_embeddings=False,
                                      bos_token_id=0, eos_token_id=0, pad_token_id=0),
                "bpe", torch.bfloat16, "gpt-2"),
    # Phi-3.5-MoE: LayerNorms with biases, q/k/v/o and lm_head biases, 4 experts
    # (block_sparse_moe.experts.N w1/w2/w3) under the sparsemixer router (its
    # two experts chosen apart; router_jitter_noise 0.25, so that the second
    # softmax masks some and not all); Phi-3's SentencePiece vocabulary
    "phimoe": (tf.PhimoeConfig, dict(COMMON, num_local_experts=4, num_experts_per_tok=2, router_jitter_noise=0.25,
                                     attention_bias=True, lm_head_bias=True, tie_word_embeddings=False,
                                     bos_token_id=1, eos_token_id=PHI3_N, pad_token_id=PHI3_N),
               "phi3", torch.float32, None),
    # ERNIE 4.5 MoE: layer 0 dense (moe_layer_start_index), layer 1 4 experts
    # (top-2 of the softmax chosen with moe_statics' e_score_correction_bias,
    # made nonzero, renormalised) beside a shared expert; ERNIE 4.5's
    # interleaved-pair rope and SentencePiece vocabulary, a tied head
    "ernie4_5-moe": (tf.Ernie4_5_MoeConfig, dict(COMMON, head_dim=8, moe_num_experts=4, moe_k=2,
                                                 moe_intermediate_size=32, moe_num_shared_experts=1,
                                                 moe_layer_start_index=1, moe_layer_interval=1,
                                                 tie_word_embeddings=True), "spm", torch.float32, None),
    # Llama 4 text: four layers, MoE on every second one (interleave_moe_layer_step
    # 2: layers 1 and 3, 4 experts fused on disk [E, H, 2I] as [gate | up] and
    # down_proj [E, I, H], top-1 sigmoid router, a shared expert), dense MLPs of
    # intermediate_size_mlp on 0 and 2; the default NoPE pattern (layer 3
    # without RoPE, the one llama.cpp assumes), L2 q/k norms on the RoPE
    # layers; no attention biases (llama.cpp's llama4 loads no attn_output
    # bias: test_verify's tiny_llama4 has them); the default rope (a GGUF's
    # llama3 rope_freqs is not read back: arch/rope/variants.json's
    # llama4-llama3 has it)
    "llama4": (tf.Llama4TextConfig, dict(COMMON, num_hidden_layers=4, head_dim=8, intermediate_size=32,
                                         intermediate_size_mlp=64, num_local_experts=4, num_experts_per_tok=1,
                                         interleave_moe_layer_step=2, tie_word_embeddings=False,
                                         bos_token_id=0, eos_token_id=0, pad_token_id=0),
               "bpe", torch.float32, "gpt-2"),
    # Qwen3-Next: four layers, gated DeltaNet linear attention then gated full
    # attention (full_attention_interval 2: layers 1 and 3 full), 4 key heads
    # of 8 and 8 value heads of 8 in the linear layers (two value heads a key
    # head), a conv kernel of 4; full attention's q_proj emitting query and
    # gate per head, per-head q/k norms, a quarter of each 16-wide head rotated;
    # zero-centred RMSNorms (weight + 1); 4 experts (top-2) beside a shared
    # expert with its sigmoid gate
    "qwen3-next": (tf.Qwen3NextConfig, dict(COMMON, num_hidden_layers=4, head_dim=16, full_attention_interval=2,
                                            linear_num_key_heads=4, linear_num_value_heads=8,
                                            linear_key_head_dim=8, linear_value_head_dim=8,
                                            linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
                                            moe_intermediate_size=16, shared_expert_intermediate_size=32,
                                            decoder_sparse_step=1, norm_topk_prob=True,
                                            tie_word_embeddings=False), "bpe", torch.float32, "qwen2"),
    # Qwen3.5 (Qwen3_5ForCausalLM, the text model): Qwen3-Next's four layers
    # (DeltaNet on 0 and 2: 4 key heads of 8, 8 value heads of 8, conv kernel
    # 4; gated full attention on 1 and 3) with the DeltaNet's projections as
    # four tensors over all heads (in_proj_qkv [q | k | v], in_proj_z,
    # in_proj_b, in_proj_a), a dense SwiGLU on every layer; Qwen3.5-MoE the
    # same with 4 experts (top-2, always renormalised) beside a gated shared
    # expert on every layer
    "qwen3_5": (tf.Qwen3_5TextConfig, dict(COMMON, num_hidden_layers=4, head_dim=16, full_attention_interval=2,
                                           linear_num_key_heads=4, linear_num_value_heads=8,
                                           linear_key_head_dim=8, linear_value_head_dim=8,
                                           linear_conv_kernel_dim=4, tie_word_embeddings=False),
                "bpe", torch.float32, "qwen2"),
    "qwen3_5-moe": (tf.Qwen3_5MoeTextConfig, dict({k: v for k, v in COMMON.items() if k != "intermediate_size"},
                                                  num_hidden_layers=4, head_dim=16, full_attention_interval=2,
                                                  linear_num_key_heads=4, linear_num_value_heads=8,
                                                  linear_key_head_dim=8, linear_value_head_dim=8,
                                                  linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
                                                  moe_intermediate_size=16, shared_expert_intermediate_size=32,
                                                  tie_word_embeddings=False), "bpe", torch.float32, "qwen2"),
    # HunYuan MoE (HunYuanMoEV1ForCausalLM, as tencent/Hunyuan-A13B): per-head
    # q/k norms (query_layernorm, key_layernorm), 4 experts top-2 beside the
    # ungated shared MLP, no attention biases (A13B's attention_bias false;
    # llama.cpp's hunyuan-moe loads none); moe_intermediate_size, moe_topk and
    # num_shared_expert as lists a layer each, as A13B's config.json has them
    # (HunYuanMoEModel.set_gguf_parameters asserts on the lists); a tiktoken
    # vocabulary (hy_tokenizer below)
    "hunyuan-moe": (tf.HunYuanMoEV1Config, dict(COMMON, head_dim=8, num_experts=4, moe_topk=[2, 2],
                                               attention_bias=False, tie_word_embeddings=False,
                                               bos_token_id=None, eos_token_id=None, pad_token_id=None,
                                               sep_token_id=None, eod_token_id=None), "hy", torch.float32, "hunyuan"),
    # HunYuan dense (HunYuanDenseV1ForCausalLM, as tencent/Hunyuan-7B-Instruct):
    # LLaMA with per-head q/k norms after the rope (query_layernorm,
    # key_layernorm), a tied head, no attention biases, head_dim 8 (HunYuanModel
    # reads config.json's head_dim), Hunyuan-7B's rope (rope_type "dynamic",
    # alpha 1000, rope_theta 10000, max_position_embeddings 32768: its
    # NTK-alpha base, which the reference asserts on theta and the context
    # but not on alpha or the head); the tiktoken vocabulary of hunyuan-moe
    # (hy_tokenizer), eod_token_id (HunYuanModel's eos) and
    # generation_config.json's two eos ids (its eot: the first)
    "hunyuan-dense": (tf.HunYuanDenseV1Config, dict(COMMON, head_dim=8, attention_bias=False, tie_word_embeddings=True,
                                                   max_position_embeddings=32768,
                                                   rope_parameters={"rope_type": "dynamic", "alpha": 1000.0,
                                                                    "factor": 1.0, "rope_theta": 10000.0},
                                                   bos_token_id=None, eos_token_id=None, pad_token_id=None,
                                                   eod_token_id=None), "hy", torch.float32, "hunyuan-dense"),
    "gpt2": (tf.GPT2Config, dict(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=128,
                                 bos_token_id=0, eos_token_id=0), "bpe", torch.float32, "gpt-2"),
    "gpt-neox": (tf.GPTNeoXConfig, dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, max_position_embeddings=128, rotary_pct=0.25,
                                        bos_token_id=0, eos_token_id=0, tie_word_embeddings=False),
                 "bpe", torch.float32, "olmo"),
}

# families added after olmo2: seeds of their own (gemma2's 101 and the others'
# 21.. were chosen apart, on two branches), so that no other family's seed moves
SEEDS = {"qwen3-moe": 21, "olmoe": 22, "granite": 23, "starcoder2": 24, "gemma2": 101, "olmo3": 25, "smollm3": 41,
         "seed-oss": 42, "glm4": 26, "ernie4_5": 27, "exaone4": 28, "phi": 26, "cohere2": 27, "granitemoe": 57,
         "granitemoeshared": 58, "olmo2": 7, "glm4-moe": 59, "deepseek": 61, "gpt-oss": 61, "phimoe": 60, "ernie4_5-moe": 61,
         "llama4": 63, "granitemoehybrid": 62, "granitemoehybrid-dense": 63,
         "qwen3-next": 62, "qwen3_5": 64, "qwen3_5-moe": 65, "hunyuan-moe": 66, "gemma3": 102,
         "hunyuan-dense": 68}

# the reference's own flags for a family (none now: the Qwen families'
# checkpoints hold their multi-token-prediction block, qwen_mtp, which
# Qwen3NextModel's _QwenMtpMixin asserts unless run with --no-mtp)
REF_ARGS = {}


def spm_model(d, n):
    import sentencepiece as spm
    # identity normalization, as Llama's own tokenizer.model (and a 6 KB file
    # rather than 245 KB of NFKC tables)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(TEXT), model_prefix=os.path.join(d, "tokenizer"),
                                   vocab_size=n, model_type="bpe", byte_fallback=True, character_coverage=1.0,
                                   num_threads=1, minloglevel=2, normalization_rule_name="identity")
    os.remove(os.path.join(d, "tokenizer.vocab"))


def spm_tokenizer(d):
    spm_model(d, V)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True,
                   "add_eos_token": False, "tokenizer_class": "LlamaTokenizer"}, f, indent=2)


def phi3_tokenizer(d):
    """Phi-3-mini-4k-instruct's tokenizer files, on a 300-piece tokenizer.model."""
    spm_model(d, PHI3_N)
    with open(os.path.join(d, "added_tokens.json"), "w") as f:
        json.dump({t: PHI3_N + i for i, t in enumerate(PHI3_ADDED)}, f, indent=2, sort_keys=True)

    def entry(t, rstrip, special):
        return {"content": t, "lstrip": False, "normalized": False, "rstrip": rstrip, "single_word": False,
                "special": special}
    dec = {"0": entry("<unk>", False, True), "1": entry("<s>", False, True), "2": entry("</s>", True, False)}
    for i, t in enumerate(PHI3_ADDED):
        dec[str(PHI3_N + i)] = entry(t, t != "<|endoftext|>", True)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": False, "add_eos_token": False, "added_tokens_decoder": dec, "bos_token": "<s>",
                   "chat_template": PHI3_TEMPLATE, "clean_up_tokenization_spaces": False,
                   "eos_token": "<|endoftext|>", "legacy": False, "model_max_length": 4096,
                   "pad_token": "<|endoftext|>", "padding_side": "left", "sp_model_kwargs": {},
                   "tokenizer_class": "LlamaTokenizer", "unk_token": "<unk>", "use_default_system_prompt": False},
                  f, indent=2)


# Qwen2's split regex (its tokenizer.json); llama.cpp's "qwen2" pre-tokenizer
QWEN2_RE = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
            "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def bpe_tokenizer(d, pre, glm=False):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    if pre == "qwen2":  # the family's own pre-tokenizer, so that the name tpconv reads from it is the one given
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        if pre == "olmo":  # GPT-NeoX-20B's (transformers' GPTNeoXTokenizer): NFC, then GPT-2's ByteLevel
            tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|padding|>"] if pre == "olmo" else ["<|endoftext|>"]
    if glm:  # Glm4Model.set_vocab's eot; Glm4MoeModel's (_set_vocab_glm) bos, eot, eom
        specials += ["<|user|>"] if glm == 1 else ["[gMASK]", "<|user|>", "<|observation|>"]
    tr = trainers.BpeTrainer(vocab_size=V, special_tokens=specials, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXT, tr)
    kw = dict(unk_token="<|endoftext|>", pad_token="<|padding|>") if pre == "olmo" else {}
    ft = tf.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>", **kw)
    ft.save_pretrained(d)


# HunYuan's special tokens (tokenization_hy.py's SPECIAL_TOKENS): five named
# ones, then <|extra_N|> up to the vocabulary size, numbered on from the last
# rank (hy_tokenizer.py's N_EXTRAS)
HY_EXTRAS = 5


def hy_tokenizer(d, fam="hunyuan-moe"):
    """A tiny HunYuan tokenizer folder as tencent/Hunyuan-A13B-Instruct's is
    laid out: hy.tiktoken (a byte-level BPE trained here: the 256 bytes, then
    each merge, a base64 token and its rank a line), tokenization_hy.py (ours,
    hy_tokenizer.py: the interface convert_hf_to_gguf.py's HunYuanMoEModel
    reads, no code of Tencent's) named by tokenizer_config.json's auto_map;
    config.json's token ids those of <|bos|>, <|eos|>, <|pad|> (the
    reference's SpecialVocab reads them there: no tokenizer.json); the MoE's
    lists a layer each; the dense one's eod_token_id <|endoftext|> and
    generation_config.json's eos_token_id [<|extra_0|>, <|eos|>] (as
    Hunyuan-7B-Instruct's folder: two ids, HunYuanModel's eot the first)"""
    import base64
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers.convert_slow_tokenizer import bytes_to_unicode
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    n = V - 5 - HY_EXTRAS
    tr = trainers.BpeTrainer(vocab_size=n, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXT, tr)
    back = {c: b for b, c in bytes_to_unicode().items()}
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    assert len(vocab) == n and [i for _, i in vocab] == list(range(n))
    with open(os.path.join(d, "hy.tiktoken"), "w") as f:
        for t, i in vocab:
            f.write("%s %d\n" % (base64.b64encode(bytes(back[c] for c in t)).decode(), i))
    shutil.copy(os.path.join(HERE, "hy_tokenizer.py"), os.path.join(d, "tokenization_hy.py"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"auto_map": {"AutoTokenizer": ["tokenization_hy.HYTokenizer", None]},
                   "tokenizer_class": "HYTokenizer", "model_max_length": 128,
                   "chat_template": "{% for m in messages %}<|startoftext|>{{ m['content'] }}<|eos|>{% endfor %}"},
                  f, indent=2)
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    c.update(bos_token_id=n + 2, eos_token_id=n + 3, pad_token_id=n + 4)
    if fam == "hunyuan-moe":
        c.update(moe_intermediate_size=[64, 64], num_shared_expert=[1, 1])
    else:
        c.update(eod_token_id=n)
        with open(os.path.join(d, "generation_config.json")) as f:
            g = json.load(f)
        g.update(bos_token_id=n + 2, eos_token_id=[n + 5, n + 3], pad_token_id=n + 4)
        with open(os.path.join(d, "generation_config.json"), "w") as f:
            json.dump(g, f, indent=2, sort_keys=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)


def model(fam, d):
    cls, kw, tk, dtype, _ = FAMILIES[fam]
    # the seed is the family's place in the sorted names of the first
    # families; olmo2 (added later) and every family after it have seeds of
    # their own (SEEDS: olmo2's 7 is the place it was generated with), so that
    # a regeneration reproduces every committed fixture (phi3 and qwen* had
    # moved one place when olmo2 joined the sorted names).
    torch.manual_seed(SEEDS[fam] if fam in SEEDS else sorted(set(FAMILIES) - set(SEEDS)).index(fam) + 1)
    m = tf.AutoModelForCausalLM.from_config(cls(**kw))
    with torch.no_grad():
        for n, p in m.named_parameters():
            base = 1.0 if ("norm" in n or "ln_" in n) and n.endswith("weight") else 0.0
            p.copy_(base + torch.randn_like(p) * (0.1 if base else 0.3))
        for n, b in m.named_buffers():  # DeepSeek-style score correction biases: not zero
            if n.endswith("e_score_correction_bias"):
                b.copy_(torch.randn_like(b) * 0.3)
    m.to(dtype).save_pretrained(d)
    if fam == "glm4-moe":
        glm4moe_mtp(d)
    if fam in ("qwen3-next", "qwen3_5", "qwen3_5-moe"):
        qwen_mtp(d, fam)
    if fam == "phimoe":
        # as microsoft/Phi-3.5-MoE-instruct's config.json: the remote code's
        # architecture name (the one convert_hf_to_gguf.py registers;
        # transformers 5 writes PhimoeForCausalLM) and Phi3MiniModel's
        # original_max_position_embeddings
        with open(os.path.join(d, "config.json")) as f:
            c = json.load(f)
        c["architectures"] = ["PhiMoEForCausalLM"]
        c["original_max_position_embeddings"] = 4096
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f, indent=2, sort_keys=True)
    if fam in ("gpt2", "gpt-neox"):
        # transformers 5 no longer writes GPT-2's n_ctx nor GPT-NeoX's rotary_pct
        # (now rope_parameters.partial_rotary_factor), which the reference reads
        # (every GPT-2 and Pythia on the Hub has them)
        with open(os.path.join(d, "config.json")) as f:
            c = json.load(f)
        if fam == "gpt2":
            c["n_ctx"] = c["n_positions"]
        else:
            c["rotary_pct"] = 0.25
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f, indent=2, sort_keys=True)
    if tk == "spm":
        spm_tokenizer(d)
    elif tk == "phi3":
        phi3_tokenizer(d)
    elif tk == "hy":
        hy_tokenizer(d, fam)
    else:
        bpe_tokenizer(d, FAMILIES[fam][4], glm={"glm4": 1, "glm4-moe": 2}.get(fam, 0))


def glm4moe_mtp(d):
    """GLM-4.5's next-token-prediction layer as its checkpoints hold it, after
    the num_hidden_layers layers (transformers' Glm4MoeForCausalLM has no
    module for it): a MoE layer's tensors (layer 1's shapes, weights of its
    own) and eh_proj [H, 2H], enorm, hnorm, shared_head.norm"""
    from safetensors.torch import load_file, save_file
    f = os.path.join(d, "model.safetensors")
    sd = load_file(f)
    L = json.load(open(os.path.join(d, "config.json")))["num_hidden_layers"]
    for n in sorted(k for k in sd if k.startswith("model.layers.%d." % (L - 1))):
        base = 1.0 if "norm" in n else 0.0
        sd[n.replace("layers.%d." % (L - 1), "layers.%d." % L)] = base + torch.randn_like(sd[n]) * (0.1 if base else 0.3)
    H = sd["model.norm.weight"].shape[0]
    sd["model.layers.%d.eh_proj.weight" % L] = torch.randn(H, 2 * H) * 0.3
    for n in ("enorm", "hnorm", "shared_head.norm"):
        sd["model.layers.%d.%s.weight" % (L, n)] = 1.0 + torch.randn(H) * 0.1
    save_file(sd, f, metadata={"format": "pt"})


def qwen_mtp(d, fam):
    """The multi-token-prediction block of the published Qwen3-Next and
    Qwen3.5 checkpoints (mtp.*; transformers has no module for it, vLLM's
    qwen3_next_mtp.py / qwen3_5_mtp.py load it): fc [H, 2H],
    pre_fc_norm_embedding, pre_fc_norm_hidden, norm, and one decoder layer
    mtp.layers.0 with full attention (the last layer's shapes, weights of
    its own). Qwen3.5's config.json says mtp_num_hidden_layers 1, as its
    checkpoints' text_config does; Qwen3-Next's says nothing (the reference
    counts the layers in the checkpoint)."""
    from safetensors.torch import load_file, save_file
    f = os.path.join(d, "model.safetensors")
    sd = load_file(f)
    c = json.load(open(os.path.join(d, "config.json")))
    L = c["num_hidden_layers"]
    dt = sd["model.norm.weight"].dtype
    for n in sorted(k for k in sd if k.startswith("model.layers.%d." % (L - 1))):
        base = 1.0 if "norm" in n else 0.0
        sd[n.replace("model.layers.%d." % (L - 1), "mtp.layers.0.")] = (
            base + torch.randn_like(sd[n].float()) * (0.1 if base else 0.3)).to(dt)
    H = sd["model.norm.weight"].shape[0]
    sd["mtp.fc.weight"] = (torch.randn(H, 2 * H) * 0.3).to(dt)
    for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        sd["mtp.%s.weight" % n] = (1.0 + torch.randn(H) * 0.1).to(dt)
    save_file(sd, f, metadata={"format": "pt"})
    if fam != "qwen3-next":
        c["mtp_num_hidden_layers"] = 1
        with open(os.path.join(d, "config.json"), "w") as fo:
            json.dump(c, fo, indent=2, sort_keys=True)


def granite_nomul(d):
    """tiny-granite without its four multipliers in config.json: the
    reference writes each as GraniteConfig's default 1.0 (ref/granite-nomul.sha256)"""
    n = os.path.join(OUT, "nomul", "tiny-granite")
    shutil.rmtree(n, ignore_errors=True)
    shutil.copytree(d, n)
    c = json.load(open(os.path.join(n, "config.json")))
    for k in ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling"):
        del c[k]
    json.dump(c, open(os.path.join(n, "config.json"), "w"), indent=2)
    g = os.path.join(OUT, "ref", "granite-nomul-f32.gguf")
    subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), n, "--outtype", "f32", "--outfile", g],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(g, "rb") as f, open(os.path.join(OUT, "ref", "granite-nomul.sha256"), "w") as s:
        s.write("%s  granite-nomul-f32.gguf\n" % hashlib.sha256(f.read()).hexdigest())


def deepseek_noqlora():
    """tiny-deepseek's config with q_lora_rank null (V2-Lite's q_proj
    instead of q_a_proj/q_a_layernorm/q_b_proj) and 2 layers, its own
    weights (seed 62): OUT/noqlora/tiny-deepseek and the reference's f32
    GGUF of it, ref/deepseek-noqlora.sha256"""
    cls, kw, _, _, pre = FAMILIES["deepseek"]
    n = os.path.join(OUT, "noqlora", "tiny-deepseek")
    shutil.rmtree(n, ignore_errors=True)
    os.makedirs(n)
    torch.manual_seed(62)
    m = tf.AutoModelForCausalLM.from_config(cls(**dict(kw, q_lora_rank=None, num_hidden_layers=2)))
    with torch.no_grad():
        for name, p in m.named_parameters():
            base = 1.0 if "norm" in name and name.endswith("weight") else 0.0
            p.copy_(base + torch.randn_like(p) * (0.1 if base else 0.3))
    m.save_pretrained(n)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(OUT, "models", "tiny-deepseek", f), n)
    g = os.path.join(OUT, "ref", "deepseek-noqlora-f32.gguf")
    subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), n, "--outtype", "f32", "--outfile", g],
                   check=True, env=dict(os.environ, TPC_PRE=pre), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(g[:-5] + ".txt", "w") as f:
        subprocess.run([sys.executable, os.path.join(HERE, "gguf_arch_dump.py"), g], check=True, stdout=f)
    with open(g, "rb") as f, open(os.path.join(OUT, "ref", "deepseek-noqlora.sha256"), "w") as s:
        s.write("%s  deepseek-noqlora-f32.gguf\n" % hashlib.sha256(f.read()).hexdigest())


# the families whose reference class has --no-mtp (--no-nextn; its
# supports_mtp_export: _QwenMtpMixin, Glm4MoeModel): with it the reference
# leaves the multi-token-prediction layers out (their tensors, their place in
# block_count, nextn_predict_layers)
NOMTP = ("glm4-moe", "qwen3-next", "qwen3_5", "qwen3_5-moe")


def nomtp_refs():
    """The reference run with --no-mtp on each NOMTP family's committed model
    (tests/gguf/arch/tiny-FAM), f32, f16 and q8_0: ref/nomtp.sha256; and its
    refusal of the option for a family without it (DeepSeek-V3, whose
    DeepseekV2Model drops the layer always): ref/nomtp-refused.txt"""
    with open(os.path.join(OUT, "ref", "nomtp.sha256"), "w") as s:
        for fam in NOMTP:
            d = os.path.join(HERE, "arch", "tiny-" + fam)
            for ot in ("f32", "f16", "q8_0"):
                g = os.path.join(OUT, "ref", "%s-nomtp-%s.gguf" % (fam, ot))
                subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), d, "--outtype", ot,
                                "--outfile", g, "--no-mtp"], check=True, env=dict(os.environ, TPC_PRE=FAMILIES[fam][4]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                with open(g, "rb") as f:
                    s.write("%s  %s-nomtp-%s.gguf\n" % (hashlib.sha256(f.read()).hexdigest(), fam, ot))
            print("nomtp", fam, "ok", flush=True)
    r = subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), os.path.join(HERE, "arch", "tiny-deepseek"),
                        "--outtype", "f32", "--outfile", os.path.join(OUT, "ref", "x.gguf"), "--no-mtp"],
                       env=dict(os.environ, TPC_PRE="gpt-2"), capture_output=True, text=True)
    with open(os.path.join(OUT, "ref", "nomtp-refused.txt"), "w") as f:
        f.write("exit %d\n%s" % (r.returncode, "".join(l + "\n" for l in r.stderr.splitlines() if "--no-nextn" in l)))


# HunYuan MoE with Hunyuan-A13B's rope: rope_type "dynamic" with alpha 1000
# (NTK-aware alpha scaling: transformers' HunYuanMoEV1RotaryEmbedding takes
# rope_theta * alpha ** (head_dim / (head_dim - 2)) as its base), rope_theta
# 10000, max_position_embeddings 32768, which HunYuanMoEModel.set_gguf_parameters
# asserts, with a 128-dim head (hidden_size // num_attention_heads, also
# asserted): hidden 128, one head of 128 (one kv head), 4 experts of 16 top-2,
# a shared MLP of 16, 2 layers, bf16 on disk, seed 67; tiny-hunyuan-moe's
# tokenizer files (hy.tiktoken, its tokenization_hy.py). OUT/hydyn/tiny-hunyuan-moe,
# the reference's GGUF of it at f32/f16/bf16/q8_0 (ref/hunyuan-moe-dyn.sha256,
# ref/hunyuan-moe-dyn-f32.txt), and its refusals of edited configs (alpha 500;
# two heads of 64: a 64-dim head; rope_theta 20000; max_position_embeddings
# 4096): ref/hunyuan-moe-dyn-refused.txt, each one's exit and its error line
HY_DYN_ROPE = {"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": 10000.0}
HY_DYN_BAD = {"alpha500": lambda c: c["rope_parameters"].update(alpha=500.0),
              "dim64": lambda c: c.update(num_attention_heads=2, num_key_value_heads=2, head_dim=64),
              "theta20000": lambda c: c["rope_parameters"].update(rope_theta=20000.0),
              "ctx4096": lambda c: c.update(max_position_embeddings=4096)}


def hunyuan_dyn():
    src = os.path.join(HERE, "arch", "tiny-hunyuan-moe")
    d = os.path.join(OUT, "hydyn", "tiny-hunyuan-moe")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    torch.manual_seed(67)
    cfg = tf.HunYuanMoEV1Config(vocab_size=V, hidden_size=128, intermediate_size=16, num_hidden_layers=2,
                                num_attention_heads=1, num_key_value_heads=1, head_dim=128, num_experts=4,
                                moe_topk=[2, 2], attention_bias=False, tie_word_embeddings=False,
                                max_position_embeddings=32768, rope_parameters=dict(HY_DYN_ROPE), bos_token_id=None,
                                eos_token_id=None, pad_token_id=None, sep_token_id=None, eod_token_id=None)
    m = tf.AutoModelForCausalLM.from_config(cfg)
    rot = m.model.rotary_emb
    assert rot.rope_type == "dynamic"  # the alpha-scaled base, not the default
    base = 10000.0 * 1000.0 ** (128 / 126)
    want = 1.0 / (base ** (torch.arange(0, 128, 2).float() / 128))
    assert torch.equal(rot.inv_freq, want), "transformers does not build HunYuan's alpha rope"
    with torch.no_grad():
        for n, p in m.named_parameters():
            b = 1.0 if "norm" in n and n.endswith("weight") else 0.0
            p.copy_(b + torch.randn_like(p) * (0.1 if b else 0.3))
    m.to(torch.bfloat16).save_pretrained(d)
    for f in ("hy.tiktoken", "tokenization_hy.py", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), d)
    c = json.load(open(os.path.join(d, "config.json")))
    s = json.load(open(os.path.join(src, "config.json")))
    c.update({k: s[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id")}, moe_intermediate_size=[16, 16],
             num_shared_expert=[1, 1])
    json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=2, sort_keys=True)
    env = dict(os.environ, TPC_PRE="hunyuan")
    with open(os.path.join(OUT, "ref", "hunyuan-moe-dyn.sha256"), "w") as s:
        for ot in ("f32", "f16", "bf16", "q8_0"):
            g = os.path.join(OUT, "ref", "hunyuan-moe-dyn-%s.gguf" % ot)
            subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), d, "--outtype", ot, "--outfile", g],
                           check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(g, "rb") as f:
                s.write("%s  hunyuan-moe-dyn-%s.gguf\n" % (hashlib.sha256(f.read()).hexdigest(), ot))
    g = os.path.join(OUT, "ref", "hunyuan-moe-dyn-f32.gguf")
    with open(g[:-5] + ".txt", "w") as f:
        subprocess.run([sys.executable, os.path.join(HERE, "gguf_arch_dump.py"), g], check=True, stdout=f)
    with open(os.path.join(OUT, "ref", "hunyuan-moe-dyn-refused.txt"), "w") as out:
        for name, edit in HY_DYN_BAD.items():
            b = os.path.join(OUT, "hydyn-" + name, "tiny-hunyuan-moe")
            shutil.rmtree(b, ignore_errors=True)
            shutil.copytree(d, b)
            c = json.load(open(os.path.join(b, "config.json")))
            edit(c)
            json.dump(c, open(os.path.join(b, "config.json"), "w"), indent=2)
            r = subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), b, "--outtype", "f32", "--outfile",
                                os.path.join(OUT, "ref", "x.gguf")], env=env, capture_output=True, text=True)
            err = [l for l in r.stderr.splitlines() if "Error" in l][-1:]
            out.write("%s exit %d %s\n" % (name, r.returncode, "".join(err)))
    print("hydyn ok", flush=True)


# HunYuan dense (tests/gguf/arch/tiny-hunyuan-dense) with config.json edited:
# the reference's f32 GGUF of each file variant (ref/hunyuan-dense-var.sha256:
# alpha 500, which HunYuanModel does not assert; the default rope; no
# eod_token_id in config.json, which it reads through AutoConfig as
# HunYuanDenseV1Config's default 3; eod_token_id null: no eos written over
# SpecialVocab's), and its exit and error line for the others
# (ref/hunyuan-dense-refused.txt: rope_theta 20000 and max_position_embeddings
# 4096, its AssertionErrors; no alpha, which it writes as alpha 50 where
# transformers' HunYuanDenseV1RotaryEmbedding rotates by rope_theta: tpconv
# refuses it)
HY_DENSE_VAR = {"alpha500": lambda c: c["rope_parameters"].update(alpha=500.0),
                "defrope": lambda c: c.update(rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
                "noeod": lambda c: c.pop("eod_token_id"),
                "eodnull": lambda c: c.update(eod_token_id=None)}
HY_DENSE_BAD = {"theta20000": lambda c: c["rope_parameters"].update(rope_theta=20000.0),
                "ctx4096": lambda c: c.update(max_position_embeddings=4096),
                "noalpha": lambda c: c["rope_parameters"].pop("alpha")}


def hunyuan_dense_variants():
    src = os.path.join(HERE, "arch", "tiny-hunyuan-dense")
    env = dict(os.environ, TPC_PRE="hunyuan-dense")
    sums = open(os.path.join(OUT, "ref", "hunyuan-dense-var.sha256"), "w")
    out = open(os.path.join(OUT, "ref", "hunyuan-dense-refused.txt"), "w")
    for name, edit in list(HY_DENSE_VAR.items()) + list(HY_DENSE_BAD.items()):
        b = os.path.join(OUT, "hydense-" + name, "tiny-hunyuan-dense")
        shutil.rmtree(b, ignore_errors=True)
        shutil.copytree(src, b)
        c = json.load(open(os.path.join(b, "config.json")))
        edit(c)
        json.dump(c, open(os.path.join(b, "config.json"), "w"), indent=2)
        g = os.path.join(OUT, "ref", "hunyuan-dense-%s-f32.gguf" % name)
        r = subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), b, "--outtype", "f32", "--outfile", g],
                           env=env, capture_output=True, text=True)
        if name in HY_DENSE_VAR:
            assert r.returncode == 0, r.stderr[-2000:]
            with open(g, "rb") as f:
                sums.write("%s  hunyuan-dense-%s-f32.gguf\n" % (hashlib.sha256(f.read()).hexdigest(), name))
        else:
            err = [l for l in r.stderr.splitlines() if "Error" in l][-1:]
            out.write("%s exit %d %s\n" % (name, r.returncode, "".join(err)))
    # with a tokenizer.json instead of hy.tiktoken (HunYuanModel's
    # _set_vocab_gpt2 path; a plain byte-level BPE, TPC_PRE gpt-2), its files
    # in OUT/hydense-tokjson (arch/hydense-tokjson); and with pad_token_id -1
    # (HunyuanVL's: SpecialVocab without the pad id)
    t = os.path.join(OUT, "hydense-tokjson")
    shutil.rmtree(t, ignore_errors=True)
    os.makedirs(t)
    bpe_tokenizer(t, "gpt-2")
    for name, pad in (("tokjson", None), ("tokjson-nopad", -1)):
        b = os.path.join(OUT, "hydense-" + name + "-m", "tiny-hunyuan-dense")
        shutil.rmtree(b, ignore_errors=True)
        shutil.copytree(src, b)
        for f in ("hy.tiktoken", "tokenization_hy.py", "tokenizer_config.json"):
            os.remove(os.path.join(b, f))
        for f in os.listdir(t):
            shutil.copy(os.path.join(t, f), b)
        if pad is not None:
            c = json.load(open(os.path.join(b, "config.json")))
            c["pad_token_id"] = pad
            json.dump(c, open(os.path.join(b, "config.json"), "w"), indent=2)
        g = os.path.join(OUT, "ref", "hunyuan-dense-%s-f32.gguf" % name)
        subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), b, "--outtype", "f32", "--outfile", g],
                       check=True, env=dict(os.environ, TPC_PRE="gpt-2"), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        with open(g, "rb") as f:
            sums.write("%s  hunyuan-dense-%s-f32.gguf\n" % (hashlib.sha256(f.read()).hexdigest(), name))
    print("hydense ok", flush=True)


def tok_cfg_variant(d, fam, name, edit, file="tokenizer_config.json"):
    """tiny-FAM with its tokenizer_config.json (or `file`) edited (edit(c)
    changes the dict), the reference's f32 GGUF of it: ref/FAM-NAME.sha256"""
    n = os.path.join(OUT, name, "tiny-" + fam)
    shutil.rmtree(n, ignore_errors=True)
    shutil.copytree(d, n)
    c = json.load(open(os.path.join(n, file)))
    edit(c)
    json.dump(c, open(os.path.join(n, file), "w"), indent=2)
    g = os.path.join(OUT, "ref", "%s-%s-f32.gguf" % (fam, name))
    env = dict(os.environ, TPC_PRE=FAMILIES[fam][4] or "")
    subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), n, "--outtype", "f32", "--outfile", g]
                   + REF_ARGS.get(fam, []), check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(g, "rb") as f, open(os.path.join(OUT, "ref", "%s-%s.sha256" % (fam, name)), "w") as s:
        s.write("%s  %s-%s-f32.gguf\n" % (hashlib.sha256(f.read()).hexdigest(), fam, name))


# tokenizer_config.json variants: GLM-4's without bos_token (as GLM-4-0414's:
# bos then comes from Glm4Model.set_vocab's <|endoftext|>, after eot and unk),
# ERNIE 4.5's with add_prefix_space false (Ernie4_5Model writes it)
TOK_CFG_VARIANTS = {"glm4": ("nobos", lambda c: c.pop("bos_token")),
                    "ernie4_5": ("nospace", lambda c: c.update(add_prefix_space=False)),
                    # EXAONE 4 without a window (config.json's sliding_window null):
                    # no window keys; every layer has its rope
                    "exaone4": ("nowindow", lambda c: c.update(sliding_window=None), "config.json"),
                    # Phi without partial_rotary_factor in config.json (at the top and in
                    # rope_parameters): the reference reads PhiConfig's default 0.5
                    # Qwen3.5 with mrope_section in its rope parameters, as the published
                    # checkpoints: rope.dimension_sections from it, after the rope scaling
                    # keys, not _Qwen35MRopeMixin's default at the end
                    # final_logit_softcapping 0: Gemma3Model writes no key (`if v :=`)
                    "gemma3": ("nosoftcap", lambda c: c.update(final_logit_softcapping=0.0), "config.json"),
                    "qwen3_5": ("mrope", lambda c: c["rope_parameters"].update(mrope_section=[1, 1, 0]), "config.json"),
                    "phi": ("nopct", lambda c: (c.pop("partial_rotary_factor"),
                                                c["rope_parameters"].pop("partial_rotary_factor")), "config.json")}


def main():
    # families named (and t4: the transformers 4 style llama below; rope: the
    # rope variants of tiny-llama and tiny-phi3; nomtp: the --no-mtp runs on
    # the committed models), or all
    fams = sys.argv[2:] or list(FAMILIES) + ["t4", "rope"] + list(TOK_FOLDERS) + ["nomtp", "hydyn", "hydense"]
    os.makedirs(os.path.join(OUT, "ref"), exist_ok=True)
    for fam in (f for f in fams if f in FAMILIES):
        d = os.path.join(OUT, "models", "tiny-" + fam)
        os.makedirs(d, exist_ok=True)
        model(fam, d)
        env = dict(os.environ, TPC_PRE=FAMILIES[fam][4] or "")
        for ot in ("f32", "f16", "bf16", "q8_0", "auto"):
            g = os.path.join(OUT, "ref", "%s-%s.gguf" % (fam, ot))
            subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), d, "--outtype", ot,
                            "--outfile", g] + REF_ARGS.get(fam, []), check=True, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            with open(g[:-5] + ".txt", "w") as f:
                subprocess.run([sys.executable, os.path.join(HERE, "gguf_arch_dump.py"), g], check=True, stdout=f)
            with open(g, "rb") as f, open(os.path.join(OUT, "ref", "whole.sha256"), "a") as s:
                s.write("%s  %s-%s.gguf\n" % (hashlib.sha256(f.read()).hexdigest(), fam, ot))
        if fam == "granite":
            granite_nomul(d)
        if fam == "deepseek":
            deepseek_noqlora()
        if fam in TOK_CFG_VARIANTS:
            tok_cfg_variant(d, fam, *TOK_CFG_VARIANTS[fam])
        print(fam, "ok", flush=True)
    if "t4" in fams:
        t4_llama()
    if "rope" in fams:
        rope_variants()
    for f in fams:
        if f.startswith("rope-"):  # one rope variant: rope-<name>
            rope_variants(f[5:])
    for fam in (f for f in fams if f in TOK_FOLDERS):
        tokenizer_folder(fam)
    if "llama-hf" in fams:
        llama_hf_variants()
    if "nomtp" in fams:
        nomtp_refs()
    if "hydyn" in fams:
        hunyuan_dyn()
    if "hydense" in fams:
        hunyuan_dense_variants()


def tok_variant(d, v):
    # a variant of arch/llama-hf/variants.json on a tokenizer folder: per
    # file, members set ("set") and removed ("del")
    for name, ed in v.items():
        with open(os.path.join(d, name)) as f:
            c = json.load(f)
        c.update(ed.get("set", {}))
        for k in ed.get("del", []):
            c.pop(k, None)
        with open(os.path.join(d, name), "w") as f:
            json.dump(c, f, indent=2)


def llama_hf_variants():
    # tiny-llama-hf with the tokenizer_config.json of each
    # arch/llama-hf/variants.json entry (v4: as transformers 4's
    # LlamaTokenizerFast saved it; specials: which tokens are special),
    # f32: ref/llama-hf.sha256. The folder keeps its name (general.name).
    with open(os.path.join(HERE, "arch", "llama-hf", "variants.json")) as f:
        variants = json.load(f)
    for name, v in variants.items():
        d = os.path.join(OUT, "models", "llama-hf-" + name, "tiny-llama-hf")
        subprocess.run(["rm", "-rf", d], check=True)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        subprocess.run(["cp", "-r", os.path.join(OUT, "models", "tiny-llama-hf"), d], check=True)
        tok_variant(d, v)
        g = os.path.join(OUT, "ref", "llama-hf-%s-f32.gguf" % name)
        subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), d, "--outtype", "f32", "--outfile", g],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(g, "rb") as f, open(os.path.join(OUT, "ref", "llama-hf.sha256"), "a") as s:
            s.write("%s  llama-hf-%s-f32.gguf\n" % (hashlib.sha256(f.read()).hexdigest(), name))
        print("llama-hf", name, "ok", flush=True)


def llama_hf_tokenizer(d):
    """tokenizer.json, tokenizer_config.json and chat_template.jinja as
    transformers 5 saves a Llama tokenizer (LlamaTokenizer, now a tokenizers
    backend): no tokenizer.model."""
    import io
    import sentencepiece as spm
    from tokenizers import AddedToken
    from transformers.tokenization_utils_base import generate_merges
    f = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(TEXT), model_writer=f, vocab_size=V - 2, model_type="bpe",
                                   byte_fallback=True, character_coverage=1.0, num_threads=1, minloglevel=2,
                                   normalization_rule_name="identity")
    sp = spm.SentencePieceProcessor(model_proto=f.getvalue())
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    t = tf.LlamaTokenizer(vocab=vocab, merges=generate_merges(vocab), extra_special_tokens=["<|user|>"],
                          add_bos_token=True)
    t.add_tokens([AddedToken("<|tool|>", special=False)])
    t.chat_template = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
    t.save_pretrained(d)


# Llama 3's split regex (its tokenizer.json); llama.cpp's "llama-bpe"
LLAMA3_RE = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
             "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def llama3_tokenizer(d):
    """A Llama 3 style tokenizer.json: byte-level BPE, Llama 3's Split regex,
    ignore_merges, no byte_fallback; <|begin_of_text|>, <|end_of_text|>."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE(ignore_merges=True, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    tr = trainers.BpeTrainer(vocab_size=V, special_tokens=specials, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXT, tr)
    tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B",
                                                       special_tokens=[("<|begin_of_text|>", 0)])
    ft = tf.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>")
    ft.save_pretrained(d)


# name: (tokenizer maker, TPC_PRE for the reference, seed)
TOK_FOLDERS = {"llama-hf": (llama_hf_tokenizer, "", 101), "llama3": (llama3_tokenizer, "llama-bpe", 102)}


def tokenizer_folder(name):
    # a tiny llama (the llama record's config) with the tokenizer files
    # TOK_FOLDERS makes, its reference GGUF (f32): ref/NAME-f32.txt and a line
    # in ref/whole.sha256; seeded apart from FAMILIES, so that no family's
    # seed moves
    make, pre, seed = TOK_FOLDERS[name]
    d = os.path.join(OUT, "models", "tiny-" + name)
    subprocess.run(["rm", "-rf", d], check=True)
    os.makedirs(d)
    cls, kw = FAMILIES["llama"][:2]
    torch.manual_seed(seed)
    m = tf.AutoModelForCausalLM.from_config(cls(**kw))
    with torch.no_grad():
        for n, p in m.named_parameters():
            base = 1.0 if "norm" in n and n.endswith("weight") else 0.0
            p.copy_(base + torch.randn_like(p) * (0.1 if base else 0.3))
    m.save_pretrained(d)
    make(d)
    g = os.path.join(OUT, "ref", "%s-f32.gguf" % name)
    subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), d, "--outtype", "f32", "--outfile", g],
                   check=True, env=dict(os.environ, TPC_PRE=pre), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(g[:-5] + ".txt", "w") as f:
        subprocess.run([sys.executable, os.path.join(HERE, "gguf_arch_dump.py"), g], check=True, stdout=f)
    with open(g, "rb") as f, open(os.path.join(OUT, "ref", "whole.sha256"), "a") as s:
        s.write("%s  %s-f32.gguf\n" % (hashlib.sha256(f.read()).hexdigest(), name))
    print(name, "ok", flush=True)


def rope_config(c, v):
    # a variant of arch/rope/variants.json on a family's config.json: its
    # members replace the model's (rope_scaling: the legacy form, without
    # rope_parameters)
    for k, x in v.items():
        if k != "family":
            c[k] = x
    if "rope_scaling" in v:
        c.pop("rope_parameters", None)
    return c


def rope_variants(only=None):
    # tests/gguf/arch/tiny-llama and tiny-phi3 (and tiny-llama4) with each
    # rope type the reference writes (issue 41 item 5), f32:
    # ref/rope-<variant>-f32.txt and ref/rope.sha256. The folder keeps the
    # family's name (general.name). `only`: that variant alone.
    with open(os.path.join(HERE, "arch", "rope", "variants.json")) as f:
        variants = json.load(f)
    for name, v in variants.items():
        if only and name != only:
            continue
        d = os.path.join(OUT, "models", "rope-" + name, "tiny-" + v["family"])
        subprocess.run(["rm", "-rf", d], check=True)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        subprocess.run(["cp", "-r", os.path.join(HERE, "arch", "tiny-" + v["family"]), d], check=True)
        with open(os.path.join(d, "config.json")) as f:
            c = rope_config(json.load(f), v)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f, indent=2)
        g = os.path.join(OUT, "ref", "rope-%s-f32.gguf" % name)
        subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), d, "--outtype", "f32", "--outfile", g],
                       check=True, env=dict(os.environ, TPC_PRE=FAMILIES[v["family"]][4] or ""),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(g[:-5] + ".txt", "w") as f:
            subprocess.run([sys.executable, os.path.join(HERE, "gguf_arch_dump.py"), g], check=True, stdout=f)
        with open(g, "rb") as f, open(os.path.join(OUT, "ref", "rope.sha256"), "a") as s:
            s.write("%s  rope-%s-f32.gguf\n" % (hashlib.sha256(f.read()).hexdigest(), name))
        print("rope", name, "ok", flush=True)


def t4_llama():
    # a transformers 4 style llama config.json (no head_dim, rope_theta at the
    # top level): the reference reads it through AutoConfig, which fills in head_dim
    d = os.path.join(OUT, "models", "t4", "tiny-llama")
    os.makedirs(d, exist_ok=True)
    subprocess.run(["cp", "-r", os.path.join(OUT, "models", "tiny-llama"), os.path.dirname(d)], check=True)
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    t4_config(c)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    g = os.path.join(OUT, "ref", "llama-t4-f32.gguf")
    subprocess.run([sys.executable, os.path.join(HERE, "ref_convert.py"), d, "--outtype", "f32", "--outfile", g],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(g[:-5] + ".txt", "w") as f:
        subprocess.run([sys.executable, os.path.join(HERE, "gguf_arch_dump.py"), g], check=True, stdout=f)


def t4_config(c):
    del c["head_dim"], c["rope_parameters"]
    c["rope_theta"] = 500000.0
    c["torch_dtype"] = c.pop("dtype")


main()
