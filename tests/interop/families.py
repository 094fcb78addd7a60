"""The model families tested against transformers: tpconv preset, the
transformers config (tiny: hidden 64, 2 layers, random weights), the Auto class
and the tp degrees the heads allow. Shared by the scripts that run in the chroot."""

# Attention for the llama-like families: 8 query heads of 8, 4 KV heads, so tp 8
# replicates KV heads (tp % kv_heads == 0) and tp 2/4 split them.
ATT = dict(hidden_size=64, num_attention_heads=8, num_key_value_heads=4, head_dim=8,
           intermediate_size=128, num_hidden_layers=2, vocab_size=256,
           max_position_embeddings=64)

# name: (preset, model_type, auto class, config overrides, tp degrees)
FAMILIES = {
    "llama": ("llama", "llama", "causal", dict(ATT, tie_word_embeddings=False), (2, 4, 8)),
    # vocab 250: tp 4 and 8 zero-pad the vocab-split embeddings (stripped on merge)
    "llama-tied": ("llama", "llama", "causal", dict(ATT, tie_word_embeddings=True, vocab_size=250), (2, 4, 8)),
    "mistral": ("mistral", "mistral", "causal", dict(ATT, tie_word_embeddings=False, sliding_window=None), (2, 4, 8)),
    "qwen2": ("qwen2", "qwen2", "causal", dict(ATT, tie_word_embeddings=False), (2, 4, 8)),
    "qwen3": ("qwen3", "qwen3", "causal", dict(ATT, tie_word_embeddings=False), (2, 4, 8)),
    "gemma": ("gemma", "gemma", "causal", dict(ATT), (2, 4, 8)),
    "gemma2": ("gemma2", "gemma2", "causal", dict(ATT), (2, 4, 8)),
    "gemma3": ("gemma3", "gemma3_text", "causal", dict(ATT), (2, 4, 8)),
    "phi3": ("phi3", "phi3", "causal", dict(ATT, tie_word_embeddings=False, pad_token_id=0), (2, 4, 8)),
    "olmo2": ("olmo2", "olmo2", "causal", dict(ATT, tie_word_embeddings=False), (2, 4, 8)),
    "olmo3": ("olmo3", "olmo3", "causal", dict(ATT, tie_word_embeddings=False, sliding_window=4), (2, 4, 8)),
    "starcoder2": ("starcoder2", "starcoder2", "causal", dict(ATT, tie_word_embeddings=False), (2, 4, 8)),
    # GraniteConfig has no head_dim (convert_hf_to_gguf.py drops one); its
    # four multipliers away from 1.0 so that each shows
    "granite": ("granite", "granite", "causal",
                dict({k: v for k, v in ATT.items() if k != "head_dim"}, tie_word_embeddings=False,
                     embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.0625,
                     logits_scaling=8.0), (2, 4, 8)),
    # SmolLM3Config has no head_dim; four layers, so that the fourth is without
    # RoPE (its default no_rope_layers); no pad id (its default, 128004, is
    # past the vocabulary); its tied head
    "smollm3": ("smollm3", "smollm3", "causal",
                dict({k: v for k, v in ATT.items() if k != "head_dim"}, num_hidden_layers=4, pad_token_id=None),
                (2, 4, 8)),
    # q/k/v biases (its default) and an o_proj bias, split with its weight
    "seed-oss": ("seed-oss", "seed_oss", "causal", dict(ATT, tie_word_embeddings=False, attention_out_bias=True),
                 (2, 4, 8)),
    # GLM-4: sandwich norms, fused gate_up_proj, q/k/v biases, half of each head
    # rotated in interleaved pairs (Glm4Config's partial_rotary_factor 0.5)
    "glm4": ("glm4", "glm4", "causal", dict(ATT, tie_word_embeddings=False, pad_token_id=0), (2, 4, 8)),
    # ERNIE 4.5 dense: LLaMA with the rope in interleaved pairs (use_bias false,
    # as its checkpoints; the biases are test_verify's)
    "ernie4_5": ("ernie4_5", "ernie4_5", "causal", dict(ATT, tie_word_embeddings=True), (2, 4, 8)),
    # EXAONE 4: post norms, per-head q/k norms; a sliding layer of a 4-token
    # window, then a global one without rope
    "exaone4": ("exaone4", "exaone4", "causal",
                dict({k: v for k, v in ATT.items() if k != "head_dim"}, tie_word_embeddings=False, sliding_window=4,
                     layer_types=["sliding_attention", "full_attention"]), (2, 4, 8)),
    # Phi: MHA and an intermediate 4 x hidden (Phi2Model writes head_count_kv
    # and feed_forward_length so whatever config.json says), a rotary fraction
    # of a quarter of each 8-wide head
    "phi": ("phi", "phi", "causal",
            dict({k: v for k, v in ATT.items() if k not in ("head_dim", "num_key_value_heads")},
                 intermediate_size=256, tie_word_embeddings=False, partial_rotary_factor=0.25), (2, 4, 8)),
    # Cohere 2: four layers, three sliding ones of a 4-token window then a full
    # one (Cohere2Config's default pattern, the one llama.cpp assumes), a tied
    # head, logit_scale away from 1; rotary_pct, which Cohere2Model requires
    "cohere2": ("cohere2", "cohere2", "causal",
                dict(ATT, num_hidden_layers=4, sliding_window=4, logit_scale=0.25, rotary_pct=1.0), (2, 4, 8)),
    "mixtral": ("mixtral", "mixtral", "causal",
                dict(ATT, tie_word_embeddings=False, num_local_experts=4, num_experts_per_tok=2), (2, 4, 8)),
    "qwen2-moe": ("qwen2-moe", "qwen2_moe", "causal",
                  dict(ATT, tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=64, shared_expert_intermediate_size=128,
                       decoder_sparse_step=1, mlp_only_layers=[]), (2, 4, 8)),
    "qwen3-moe": ("qwen3-moe", "qwen3_moe", "causal",
                  dict(ATT, tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=64, decoder_sparse_step=1, mlp_only_layers=[]), (2, 4, 8)),
    "olmoe": ("olmoe", "olmoe", "causal",
              dict(ATT, tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2), (2, 4, 8)),
    # Granite's multipliers around experts stacked in the checkpoint itself
    # (input_linear [E, 2I, H], output_linear [E, H, I])
    "granitemoe": ("granitemoe", "granitemoe", "causal",
                   dict({k: v for k, v in ATT.items() if k != "head_dim"}, tie_word_embeddings=False,
                        num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=12.0,
                        residual_multiplier=0.22, attention_multiplier=0.0625, logits_scaling=8.0), (2, 4, 8)),
    # and with a shared expert (shared_mlp) beside the routed ones
    "granitemoeshared": ("granitemoeshared", "granitemoeshared", "causal",
                         dict({k: v for k, v in ATT.items() if k != "head_dim"}, tie_word_embeddings=False,
                              num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=64,
                              embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.0625,
                              logits_scaling=8.0), (2, 4, 8)),
    # Granite 4 (GraniteMoeHybrid): Mamba-2 layers 0 and 2 (8 heads of 16,
    # one group of B and C, d_state 16; tp 8 still divides the heads, the
    # group is replicated), attention layers 1 and 3 without a rotary
    # embedding (position_embedding_type unsaid, as granite-4.0-h); the
    # experts and the shared MLP of granitemoeshared; -dense: no experts
    "granitemoehybrid": ("granitemoehybrid", "granitemoehybrid", "causal",
                         dict({k: v for k, v in ATT.items() if k != "head_dim"}, num_hidden_layers=4,
                              tie_word_embeddings=False, num_local_experts=4, num_experts_per_tok=2,
                              shared_intermediate_size=64, embedding_multiplier=12.0, residual_multiplier=0.22,
                              attention_multiplier=0.0625, logits_scaling=8.0,
                              layer_types=["mamba", "attention", "mamba", "attention"], mamba_n_heads=8,
                              mamba_n_groups=1, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2,
                              mamba_chunk_size=16), (2, 4, 8)),
    "granitemoehybrid-dense": ("granitemoehybrid", "granitemoehybrid", "causal",
                               dict({k: v for k, v in ATT.items() if k != "head_dim"}, num_hidden_layers=4,
                                    tie_word_embeddings=False, num_local_experts=0, shared_intermediate_size=64,
                                    embedding_multiplier=12.0, residual_multiplier=0.22,
                                    attention_multiplier=0.0625, logits_scaling=8.0,
                                    layer_types=["mamba", "attention", "mamba", "attention"], mamba_n_heads=8,
                                    mamba_n_groups=1, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2,
                                    mamba_chunk_size=16), (2, 4, 8)),
    # GLM-4.5 MoE: a dense layer 0, then 4 experts in 2 groups under the
    # sigmoid router with its correction bias, a shared expert; q/k/v biases,
    # per-head q/k norms, a half of each head rotated
    "glm4-moe": ("glm4-moe", "glm4_moe", "causal",
                 dict(ATT, tie_word_embeddings=False, n_routed_experts=4, num_experts_per_tok=2,
                      moe_intermediate_size=32, n_shared_experts=1, n_group=2, topk_group=1,
                      first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True,
                      use_qk_norm=True, attention_bias=True, partial_rotary_factor=0.5), (2, 4, 8)),
    # gpt-oss (bf16/f32 weights, not MXFP4): sinks, its default yarn rope, a
    # 4-token window on layer 0 (layer_types' default), 4 experts stacked [in,
    # out] with gate and up interleaved (2I / 8 even), a router bias
    "gpt-oss": ("gpt-oss", "gpt_oss", "causal",
                dict(ATT, tie_word_embeddings=False, num_local_experts=4, num_experts_per_tok=2, sliding_window=4),
                (2, 4, 8)),
    # Phi-3.5-MoE: LayerNorms with biases, q/k/v/o and lm_head biases, 4
    # experts under the sparsemixer router (router_jitter_noise 0.25: some
    # second choices weighted below 1)
    "phimoe": ("phimoe", "phimoe", "causal",
               dict({k: v for k, v in ATT.items() if k != "head_dim"}, tie_word_embeddings=False,
                    num_local_experts=4, num_experts_per_tok=2, router_jitter_noise=0.25, attention_bias=True,
                    lm_head_bias=True), (2, 4, 8)),
    # HunYuan MoE: 4 experts (top-2 of the softmax, renormalised) beside an
    # ungated shared expert, q/k/v/o biases, per-head q/k norms after the rope
    "hunyuan-moe": ("hunyuan-moe", "hunyuan_v1_moe", "causal",
                    dict(ATT, tie_word_embeddings=False, num_experts=4, moe_topk=2, attention_bias=True), (2, 4, 8)),
    # HunYuan dense: q/k/v/o biases, per-head q/k norms after the rope,
    # Hunyuan-7B's dynamic rope with alpha (transformers' base rope_theta x
    # alpha^(head_dim / (head_dim - 2))); use_qk_norm as Tencent's
    # config.json has it (vLLM's HunYuanAttention reads it; the vllm layout
    # refuses a config.json without it)
    "hunyuan-dense": ("hunyuan-dense", "hunyuan_v1_dense", "causal",
                      dict(ATT, tie_word_embeddings=False, attention_bias=True, use_qk_norm=True,
                           rope_parameters={"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0,
                                            "rope_theta": 10000.0}), (2, 4, 8)),
    # ERNIE 4.5 MoE: layer 0 dense, layer 1 4 experts (the softmax's top-2
    # chosen with moe_statics' correction bias) beside a shared expert
    "ernie4_5-moe": ("ernie4_5-moe", "ernie4_5_moe", "causal",
                     dict(ATT, tie_word_embeddings=False, moe_num_experts=4, moe_k=2, moe_intermediate_size=64,
                          moe_num_shared_experts=1, moe_layer_start_index=1), (2, 4, 8)),
    "deepseek-v3": ("deepseek-v3", "deepseek_v3", "causal",
                    dict(hidden_size=64, num_attention_heads=8, num_key_value_heads=8,
                         intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                         vocab_size=256, max_position_embeddings=64, q_lora_rank=32,
                         kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8,
                         n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
                         n_group=1, topk_group=1, first_k_dense_replace=1,
                         tie_word_embeddings=False, rope_scaling=None), (2, 4, 8)),
    # Llama 4 text: four layers, MoE on 1 and 3 (interleave_moe_layer_step 2:
    # 4 experts stacked [in, out] as [gate | up], the top-1 sigmoid router on
    # their input, a shared expert), dense MLPs of intermediate_size_mlp on 0
    # and 2; layer 3 without RoPE (the default, llama.cpp's), the L2 q/k norm
    # on the others; q/k/v/o biases
    "llama4": ("llama4", "llama4_text", "causal",
               dict(ATT, num_hidden_layers=4, intermediate_size=64, intermediate_size_mlp=128,
                    tie_word_embeddings=False, num_local_experts=4, num_experts_per_tok=1,
                    interleave_moe_layer_step=2, attention_bias=True, pad_token_id=0), (2, 4, 8)),
    # Qwen3-Next: 4 layers, gated DeltaNet (8 key heads of 8, 16 value heads
    # of 8: tp 8 keeps whole key-head groups) then gated full attention
    # (full_attention_interval 2), 4 experts (top-2) beside a gated shared
    # expert
    "qwen3-next": ("qwen3-next", "qwen3_next", "causal",
                   dict(ATT, tie_word_embeddings=False, num_hidden_layers=4, full_attention_interval=2,
                        linear_num_key_heads=8, linear_num_value_heads=16, linear_key_head_dim=8,
                        linear_value_head_dim=8, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
                        moe_intermediate_size=32, shared_expert_intermediate_size=64), (2, 4, 8)),
    # Qwen3.5 and Qwen3.5-MoE text: Qwen3-Next's layers with the DeltaNet's
    # projections over all heads (in_proj_qkv, in_proj_z, in_proj_b,
    # in_proj_a), 8 key heads and 16 value heads of 8 (tp 8 keeps whole
    # key heads); a dense MLP on every layer, or 4 experts (top-2) beside a
    # gated shared expert on every layer
    "qwen3_5": ("qwen3_5", "qwen3_5_text", "causal",
                dict(ATT, tie_word_embeddings=False, num_hidden_layers=4, full_attention_interval=2,
                     linear_num_key_heads=8, linear_num_value_heads=16, linear_key_head_dim=8,
                     linear_value_head_dim=8, linear_conv_kernel_dim=4), (2, 4, 8)),
    "qwen3_5-moe": ("qwen3_5-moe", "qwen3_5_moe_text", "causal",
                    dict({k: v for k, v in ATT.items() if k != "intermediate_size"}, tie_word_embeddings=False,
                         num_hidden_layers=4, full_attention_interval=2, linear_num_key_heads=8,
                         linear_num_value_heads=16, linear_key_head_dim=8, linear_value_head_dim=8,
                         linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                         shared_expert_intermediate_size=64), (2, 4, 8)),
    "gpt2": ("gpt2", "gpt2", "causal",
             dict(n_embd=64, n_head=8, n_layer=2, vocab_size=256, n_positions=64), (2, 4, 8)),
    "gpt-neox": ("gpt-neox", "gpt_neox", "causal",
                 dict(hidden_size=64, num_attention_heads=8, intermediate_size=128,
                      num_hidden_layers=2, vocab_size=256, max_position_embeddings=64,
                      tie_word_embeddings=False), (2, 4, 8)),
    "bert": ("bert", "bert", "masked",
             dict(hidden_size=64, num_attention_heads=8, intermediate_size=128,
                  num_hidden_layers=2, vocab_size=256, max_position_embeddings=64), (2, 4, 8)),
}

# TPCONV_INTEROP_FAMILIES (run.sh passes it in): only the families named
ONLY = __import__("os").environ.get("TPC_INTEROP_FAMILIES", "").split()
if ONLY:
    FAMILIES = {k: v for k, v in FAMILIES.items() if k in ONLY}


def auto_class(kind):
    import transformers
    return transformers.AutoModelForMaskedLM if kind == "masked" else transformers.AutoModelForCausalLM


def input_ids(vocab):
    import torch
    g = torch.Generator().manual_seed(1234)
    return torch.randint(0, vocab, (2, 12), generator=g)


def result(work, consumer, family, op, case, status, detail):
    """One line of results.tsv."""
    if isinstance(detail, BaseException):
        detail = f"{type(detail).__name__}: {detail}"
    detail = " ".join(str(detail).split())[:600]
    with open(f"{work}/results.tsv", "a") as f:
        f.write("\t".join((consumer, family, op, case, status, detail)) + "\n")
