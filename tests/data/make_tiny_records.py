# Writes tests/data/tiny_<family>.safetensors and tiny_<family>.json (tiny
# checkpoints of families added as records alone, as transformers' save_pretrained
# writes them, and their config.json) and tiny_records_out.safetensors: real
# transformers' (5.12, run in float64) logits on fixed token ids, one key per
# family. tests/verify/test_verify_{records,moe,forward}.c run verify's fp64
# reference forward, composed from each record's layer parts alone, against
# them.
#   qwen3-moe   Qwen3MoeForCausalLM: per-head q/k norms, head_dim 16 (not
#               hidden / heads), softmax top-2 of 4 experts renormalised
#               (norm_topk_prob), no shared expert
#   olmoe       OlmoeForCausalLM: q/k norms over the whole projection, pre-norm,
#               softmax top-2 of 4 experts not renormalised
#   granite     GraniteForCausalLM: embedding_multiplier, residual_multiplier,
#               attention_multiplier (the scores' scale), logits_scaling
#   starcoder2  Starcoder2ForCausalLM: LayerNorm with biases, q/k/v/o biases,
#               c_fc/c_proj with biases and gelu_pytorch_tanh, RoPE
#   smollm3     SmolLM3ForCausalLM, 4 layers: no_rope_layers [1, 0, 1, 1] (layer
#               1 without RoPE, not the default every 4th) and, with
#               use_sliding_window, that layer attending within a 4-token window
#   seed_oss    SeedOssForCausalLM: q/k/v biases and an o_proj bias
#               (attention_out_bias), head_dim 16 (not hidden / heads)
#   glm         GlmForCausalLM: LLaMA's names with a fused gate_up_proj, q/k/v
#               biases, half of each head (partial_rotary_factor 0.5) rotated
#               in interleaved pairs
#   glm4        Glm4ForCausalLM: GLM's attention and MLP, sandwich norms (no
#               1 + w)
#   ernie4_5    Ernie4_5ForCausalLM: LLaMA with the rope on interleaved pairs,
#               use_bias: every projection with a bias
#   exaone4     Exaone4ForCausalLM: OLMo 2's post norms, per-head q/k norms, a
#               4-token window on layer 0, layer 1 global without rope
#   phi         PhiForCausalLM: attention and MLP in parallel under one
#               LayerNorm (with bias), rotate-half RoPE on half of each head
#               (partial_rotary_factor), q/k/v/dense and fc1/fc2 biases,
#               gelu_new, lm_head with a bias
#   cohere2     Cohere2ForCausalLM: attention and SwiGLU in parallel under one
#               mean-centred weight-only LayerNorm, interleaved RoPE on the
#               sliding layer only (a 4-token window), none on the full one,
#               the logits times logit_scale, a tied head
#   granitemoe  GraniteMoeForCausalLM: Granite's four multipliers, 4 experts
#               stacked in input_linear [4, 64, 32] (gate, up) and
#               output_linear [4, 32, 32], the softmax of the top-2 router
#               logits (computed in float32 by transformers, whatever the
#               model's dtype); the last to draw from the shared generator,
#               so that no other family's random weights move
#   granitemoe_shared  GraniteMoeSharedForCausalLM: granitemoe's, and a shared
#               expert shared_mlp (input_linear [96, 32]: gate, up;
#               output_linear [32, 48]) added ungated
#   glm4_moe    Glm4MoeForCausalLM: layer 0 dense (first_k_dense_replace),
#               layer 1 4 experts in 2 groups under a sigmoid router with its
#               e_score_correction_bias (one group kept, top-2 renormalised
#               times routed_scaling_factor 2.5) beside a shared expert; q/k/v
#               biases, per-head q/k norms, rotate-half RoPE on half of each
#               16-wide head; a next-token-prediction layer 2 (eh_proj, enorm,
#               hnorm, shared_head.norm and a MoE layer's tensors) in the
#               checkpoint, which transformers' model leaves out; a generator
#               of its own
#   gpt_oss     GptOssForCausalLM (f32 on disk as from_config saves it, run in
#               float64): q/k/v/o biases, a sink logit per query head, the
#               default yarn rope (factor 32 over 4096 original positions),
#               layer 0 within a 4-token window and layer 1 global
#               (layer_types' default), a router with a bias and the softmax
#               of its top-2 of 4 experts, experts stacked [in, out] with
#               gate and up interleaved, their biases, the clamped SwiGLU
#               (limit 7, alpha 1.702); a generator of its own (SEEDS)
#   phimoe      PhimoeForCausalLM (Phi-3.5-MoE): LayerNorms with biases, q/k/v/o
#               and lm_head biases, 4 experts under the sparsemixer router
#               (router_jitter_noise 0.25: some second choices weighted
#               below 1); a generator of its own
#   hunyuan_moe HunYuanMoEV1ForCausalLM: every layer 4 experts (top-2 of the
#               softmax, renormalised) beside an ungated shared_mlp, the router
#               mlp.gate.wg; q/k/v/o biases; per-head query_layernorm and
#               key_layernorm after the rotary embedding; a generator of its own
#   ernie4_5_moe  Ernie4_5_MoeForCausalLM: 3 layers, layer 1 alone of 4 experts
#               (moe_layer_start_index 1, moe_layer_end_index 1), the softmax's
#               top-2 chosen with moe_statics' e_score_correction_bias,
#               renormalised, beside a shared expert; use_bias's biases,
#               interleaved-pair rope; a generator of its own
#   llama4      Llama4ForCausalLM (llama4_text), 4 layers: MoE on layers 1 and 3
#               (interleave_moe_layer_step 2: 4 experts stacked [in, out],
#               gate_up_proj [gate | up], the top-2 router logits' sigmoids on
#               the experts' inputs, a shared expert), dense MLPs of
#               intermediate_size_mlp on 0 and 2; no_rope_layers [1, 1, 0, 1]
#               (layer 2 without RoPE: its queries temperature-tuned, floor_scale
#               3, attn_scale 0.5), the L2 q/k norm on the others, which attend
#               in chunks of 4 tokens (attention_chunk_size; layer_types'
#               default); the rope on interleaved pairs with a llama3 scaling
#               (its middle band met); q/k/v/o biases; a generator of its own
#   granitemoehybrid  GraniteMoeHybridForCausalLM (Granite 4): 4 layers, 0 and 2
#               Mamba-2 mixers (4 heads of 16, one group of B and C 8 wide, a
#               conv1d of 4 taps with its bias; transformers' torch path: the
#               chunked SSD in float32 with chunks of 4 tokens), 1 and 3
#               attention with RoPE (position_embedding_type "rope"); every
#               layer 4 experts (top-2) beside a shared MLP; Granite's
#               multipliers; a generator of its own
#   granitemoehybrid_dense  the same without experts (num_local_experts 0:
#               the shared MLP alone), in_proj and out_proj biases
#               (mamba_proj_bias), attention without positions (unsaid)
#   qwen3_next  Qwen3NextForCausalLM: 4 layers, gated DeltaNet (linear_attn: 2
#               key heads of 8, 4 value heads of 8, conv kernel 4) then gated
#               full attention (full_attention_interval 2), per-head q/k
#               norms, a quarter of each 16-wide head rotated, zero-centred
#               RMSNorms (1 + w); 4 experts (top-2, renormalised) beside a
#               shared expert with its sigmoid gate, layer 2 a dense MLP
#               (mlp_only_layers); transformers' torch path (no fla, no
#               causal-conv1d: its chunked delta rule and gated norm in
#               float32 whatever the model's dtype); a generator of its own
#   qwen3_5     Qwen3_5ForCausalLM (the text model): qwen3_next's layers but the
#               DeltaNet's projections four tensors over all heads
#               (in_proj_qkv [q | k | v], in_proj_z, in_proj_b, in_proj_a), a
#               dense MLP on every layer; the interleaved mrope of one text
#               position is the plain rope; a generator of its own
#   qwen3_5_moe Qwen3_5MoeForCausalLM: the same with 4 experts (top-2, always
#               renormalised: no norm_topk_prob) beside a shared expert with
#               its sigmoid gate on every layer; a generator of its own
# usage (in the forky chroot): python3 make_tiny_records.py OUTDIR
import json, os, sys, tempfile
import torch
import transformers as tf
from safetensors.torch import load_file, save_file

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(53)
H, V, L, NH, KVH, I = 32, 48, 2, 4, 2, 64
C = dict(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, num_key_value_heads=KVH,
         intermediate_size=I, max_position_embeddings=64, tie_word_embeddings=False)
FAMILIES = {
    "qwen3_moe": (tf.Qwen3MoeConfig, dict(C, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                          moe_intermediate_size=32, norm_topk_prob=True, rms_norm_eps=1e-6)),
    "olmoe": (tf.OlmoeConfig, dict(C, num_experts=4, num_experts_per_tok=2, rms_norm_eps=1e-5)),
    "granite": (tf.GraniteConfig, dict(C, embedding_multiplier=12.0, residual_multiplier=0.22,
                                       attention_multiplier=0.0625, logits_scaling=8.0, rms_norm_eps=1e-6)),
    "starcoder2": (tf.Starcoder2Config, dict(C, norm_epsilon=1e-5, use_bias=True)),
    "smollm3": (tf.SmolLM3Config, dict(C, num_hidden_layers=4, no_rope_layers=[1, 0, 1, 1], use_sliding_window=True,
                                       sliding_window=4, rms_norm_eps=1e-6, pad_token_id=None)),
    "seed_oss": (tf.SeedOssConfig, dict(C, head_dim=16, attention_bias=True, attention_out_bias=True,
                                        rms_norm_eps=1e-6)),
    "glm": (tf.GlmConfig, dict(C, head_dim=8, rms_norm_eps=1e-5, pad_token_id=0, eos_token_id=1)),
    "glm4": (tf.Glm4Config, dict(C, head_dim=8, rms_norm_eps=1e-5, pad_token_id=0, eos_token_id=1)),
    "ernie4_5": (tf.Ernie4_5Config, dict(C, head_dim=8, use_bias=True)),
    "exaone4": (tf.Exaone4Config, dict(C, sliding_window=4, layer_types=["sliding_attention", "full_attention"])),
    "phi": (tf.PhiConfig, dict(C, partial_rotary_factor=0.5, layer_norm_eps=1e-5)),
    "cohere2": (tf.Cohere2Config, dict(C, tie_word_embeddings=True, logit_scale=0.25, sliding_window=4,
                                       layer_types=["sliding_attention", "full_attention"], layer_norm_eps=1e-5)),
    "granitemoe": (tf.GraniteMoeConfig, dict(C, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2,
                                             embedding_multiplier=12.0, residual_multiplier=0.22,
                                             attention_multiplier=0.0625, logits_scaling=8.0, rms_norm_eps=1e-6)),
    "granitemoe_shared": (tf.GraniteMoeSharedConfig, dict(C, intermediate_size=32, shared_intermediate_size=48,
                                                           num_local_experts=4, num_experts_per_tok=2,
                                                           embedding_multiplier=12.0, residual_multiplier=0.22,
                                                           attention_multiplier=0.0625, logits_scaling=8.0,
                                                           rms_norm_eps=1e-6)),
    "glm4_moe": (tf.Glm4MoeConfig, dict(C, head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
                                        moe_intermediate_size=16, n_shared_experts=1, n_group=2, topk_group=1,
                                        first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True,
                                        use_qk_norm=True, attention_bias=True, partial_rotary_factor=0.5,
                                        num_nextn_predict_layers=1, rms_norm_eps=1e-5)),
    "gpt_oss": (tf.GptOssConfig, dict(C, head_dim=8, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2,
                                      sliding_window=4, rms_norm_eps=1e-5)),
    "phimoe": (tf.PhimoeConfig, dict(C, num_local_experts=4, num_experts_per_tok=2, router_jitter_noise=0.25,
                                     attention_bias=True, lm_head_bias=True, rms_norm_eps=1e-5)),
    "hunyuan_moe": (tf.HunYuanMoEV1Config, dict(C, head_dim=8, num_experts=4, moe_topk=2, attention_bias=True,
                                                 rms_norm_eps=1e-5)),
    "ernie4_5_moe": (tf.Ernie4_5_MoeConfig, dict(C, num_hidden_layers=3, head_dim=8, moe_num_experts=4, moe_k=2,
                                                 moe_intermediate_size=32, moe_num_shared_experts=1,
                                                 moe_layer_start_index=1, moe_layer_end_index=1, moe_layer_interval=1,
                                                 use_bias=True, rms_norm_eps=1e-5)),
    "llama4": (tf.Llama4TextConfig, dict(C, num_hidden_layers=4, head_dim=8, intermediate_size=32,
                                         intermediate_size_mlp=64, num_local_experts=4, num_experts_per_tok=2,
                                         interleave_moe_layer_step=2, no_rope_layers=[1, 1, 0, 1],
                                         attention_chunk_size=4, floor_scale=3, attn_scale=0.5, attention_bias=True,
                                         rms_norm_eps=1e-5,
                                         rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0,
                                                              low_freq_factor=1.0, high_freq_factor=4.0,
                                                              original_max_position_embeddings=256))),
    "granitemoehybrid": (tf.GraniteMoeHybridConfig, dict(C, num_hidden_layers=4, intermediate_size=32,
                                                         shared_intermediate_size=48, num_local_experts=4,
                                                         num_experts_per_tok=2, embedding_multiplier=12.0,
                                                         residual_multiplier=0.22, attention_multiplier=0.0625,
                                                         logits_scaling=8.0, position_embedding_type="rope",
                                                         layer_types=["mamba", "attention", "mamba", "attention"],
                                                         mamba_n_heads=4, mamba_n_groups=1, mamba_d_state=8,
                                                         mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=4)),
    "granitemoehybrid_dense": (tf.GraniteMoeHybridConfig, dict(C, num_hidden_layers=4, shared_intermediate_size=48,
                                                               num_local_experts=0, embedding_multiplier=12.0,
                                                               residual_multiplier=0.22, attention_multiplier=0.0625,
                                                               logits_scaling=8.0, mamba_proj_bias=True,
                                                               layer_types=["mamba", "attention", "mamba", "attention"],
                                                               mamba_n_heads=4, mamba_n_groups=1, mamba_d_state=8,
                                                               mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=4)),
    "qwen3_next": (tf.Qwen3NextConfig, dict(C, num_hidden_layers=4, head_dim=16, full_attention_interval=2,
                                            linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                                            linear_value_head_dim=8, linear_conv_kernel_dim=4, num_experts=4,
                                            num_experts_per_tok=2, moe_intermediate_size=16,
                                            shared_expert_intermediate_size=32, norm_topk_prob=True,
                                            mlp_only_layers=[2], rms_norm_eps=1e-6)),
    "qwen3_5": (tf.Qwen3_5TextConfig, dict(C, num_hidden_layers=4, head_dim=16, full_attention_interval=2,
                                           linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                                           linear_value_head_dim=8, linear_conv_kernel_dim=4, rms_norm_eps=1e-6)),
    "qwen3_5_moe": (tf.Qwen3_5MoeTextConfig, dict({k: v for k, v in C.items() if k != "intermediate_size"},
                                                  num_hidden_layers=4, head_dim=16, full_attention_interval=2,
                                                  linear_num_key_heads=2, linear_num_value_heads=4,
                                                  linear_key_head_dim=8, linear_value_head_dim=8,
                                                  linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
                                                  moe_intermediate_size=16, shared_expert_intermediate_size=32,
                                                  rms_norm_eps=1e-6)),
}


# phi and cohere2: a generator of their own, so that families another branch
# adds before them move no weight of theirs, and they none of the families
# after them that draw from the shared one (granitemoe, granitemoe_shared)
SEEDS = {"phi": 61, "cohere2": 62, "glm4_moe": 63, "gpt_oss": 63, "phimoe": 64, "hunyuan_moe": 65, "ernie4_5_moe": 66,
         "llama4": 67, "granitemoehybrid": 67, "granitemoehybrid_dense": 68, "qwen3_next": 67, "qwen3_5": 69,
         "qwen3_5_moe": 70}


def randomize(model, gen):
    with torch.no_grad():
        for n, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen, dtype=torch.float64).float()
            if "norm" in n and n.endswith("weight"):
                p.copy_(1 + 0.2 * r)
            elif n.endswith("bias"):
                p.copy_(0.1 * r)
            elif "embed" in n:
                p.copy_(r)
            else:
                p.copy_(0.25 * r)


ids = torch.tensor([[3, 17, 41, 0, 29, 8, 47, 12, 33, 21]])
res = {"ids": ids[0].to(torch.int64)}
for name, (cls, kw) in FAMILIES.items():
    # eager experts: the grouped_mm kernels take no float64
    # gpt-oss: the eager attention (its sinks)
    # llama4: the eager attention (its chunked mask)
    extra = dict(attn_implementation="eager") if name in ("gpt_oss", "llama4") else {}
    m = tf.AutoModelForCausalLM.from_config(cls(**kw), experts_implementation="eager", **extra)
    gen = torch.Generator().manual_seed(SEEDS[name]) if name in SEEDS else g
    randomize(m, gen)
    with torch.no_grad():  # DeepSeek-style score correction biases (buffers): not zero
        for n, b in m.named_buffers():
            if n.endswith("e_score_correction_bias"):
                b.copy_(0.3 * torch.randn(b.shape, generator=gen, dtype=torch.float64).float())
    with tempfile.TemporaryDirectory() as d:
        m.save_pretrained(d)
        sd = load_file(os.path.join(d, "model.safetensors"))
        cfg = json.load(open(os.path.join(d, "config.json")))
    if cfg.get("num_nextn_predict_layers"):  # the MTP layer: the last layer's tensors again, and its own
        L = cfg["num_hidden_layers"]
        for n in sorted(k for k in sd if k.startswith("model.layers.%d." % (L - 1))):
            r = torch.randn(sd[n].shape, generator=gen, dtype=torch.float64).float()
            sd[n.replace("layers.%d." % (L - 1), "layers.%d." % L)] = 1 + 0.2 * r if "norm" in n else 0.25 * r
        sd["model.layers.%d.eh_proj.weight" % L] = 0.25 * torch.randn(H, 2 * H, generator=gen, dtype=torch.float64).float()
        for n in ("enorm", "hnorm", "shared_head.norm"):
            sd["model.layers.%d.%s.weight" % (L, n)] = 1 + 0.2 * torch.randn(H, generator=gen, dtype=torch.float64).float()
    save_file(sd, os.path.join(out, "tiny_%s.safetensors" % name), metadata={"format": "pt"})
    json.dump(cfg, open(os.path.join(out, "tiny_%s.json" % name), "w"), indent=1)
    m = m.double().eval()
    with torch.no_grad():
        res[name] = m(input_ids=ids).logits[0].contiguous()
save_file(res, os.path.join(out, "tiny_records_out.safetensors"))
print("ok", {k: tuple(v.shape) for k, v in res.items()})
