# Writes tests/data/tiny_deepseek_v3.safetensors (a tiny DeepSeek-V3 with the
# Hugging Face checkpoint names: MLA with q_a/q_b, a first_k_dense_replace
# dense layer, MoE layers with sigmoid noaux_tc group-limited routing, the
# correction bias and a shared expert) and tiny_deepseek_v3_logits.safetensors:
# real transformers' DeepseekV3ForCausalLM (5.x, run in float64) logits on
# fixed token ids under two configs: "yarn" (rope_scaling yarn with mscale and
# mscale_all_dim, interleaved rope: DeepSeek-V3's own) and "plain" (default
# rope, rope_interleave false). tests/verify/test_verify_forward.c compares verify's fp64
# reference forward with them.
# usage: python3 make_tiny_deepseek.py OUTDIR   (torch >= 2.4, transformers >= 5)
import copy, json, os, sys, tempfile
import torch
from safetensors.torch import save_file
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

out = sys.argv[1]
g = torch.Generator().manual_seed(35)
def r(*s, k=0.2): return torch.randn(*s, generator=g, dtype=torch.float64).float() * k
H, V, L, nh, nope, rope, vd, qlr, kvlr, E, MI, I = 32, 48, 3, 4, 8, 4, 6, 12, 10, 8, 16, 40
sd = {"model.embed_tokens.weight": r(V, H, k=1.0), "lm_head.weight": r(V, H), "model.norm.weight": 1 + r(H)}
for l in range(L):
    p = f"model.layers.{l}."
    sd[p + "input_layernorm.weight"] = 1 + r(H); sd[p + "post_attention_layernorm.weight"] = 1 + r(H)
    a = p + "self_attn."
    sd[a + "q_a_proj.weight"] = r(qlr, H); sd[a + "q_a_layernorm.weight"] = 1 + r(qlr)
    sd[a + "q_b_proj.weight"] = r(nh * (nope + rope), qlr, k=0.4)
    sd[a + "kv_a_proj_with_mqa.weight"] = r(kvlr + rope, H, k=0.4); sd[a + "kv_a_layernorm.weight"] = 1 + r(kvlr)
    sd[a + "kv_b_proj.weight"] = r(nh * (nope + vd), kvlr, k=0.4); sd[a + "o_proj.weight"] = r(H, nh * vd)
    m = p + "mlp."
    if l == 0:
        sd[m + "gate_proj.weight"] = r(I, H); sd[m + "up_proj.weight"] = r(I, H); sd[m + "down_proj.weight"] = r(H, I)
        continue
    sd[m + "gate.weight"] = r(E, H, k=1.0); sd[m + "gate.e_score_correction_bias"] = r(E, k=0.05)
    for e in range(E):
        for n, s in (("gate_proj", (MI, H)), ("up_proj", (MI, H)), ("down_proj", (H, MI))):
            sd[m + f"experts.{e}.{n}.weight"] = r(*s)
    for n, s in (("gate_proj", (MI, H)), ("up_proj", (MI, H)), ("down_proj", (H, MI))):
        sd[m + f"shared_experts.{n}.weight"] = r(*s)
cfg = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": H,
       "intermediate_size": I, "moe_intermediate_size": MI, "num_hidden_layers": L, "num_attention_heads": nh,
       "num_key_value_heads": nh, "n_shared_experts": 1, "n_routed_experts": E, "num_experts_per_tok": 2,
       "first_k_dense_replace": 1, "n_group": 2, "topk_group": 1, "norm_topk_prob": True,
       "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
       "q_lora_rank": qlr, "kv_lora_rank": kvlr, "qk_nope_head_dim": nope, "qk_rope_head_dim": rope,
       "v_head_dim": vd, "vocab_size": V, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu",
       "max_position_embeddings": 64, "tie_word_embeddings": False, "attention_bias": False,
       "rope_scaling": {"type": "yarn", "factor": 4.0, "mscale": 1.0, "mscale_all_dim": 0.5,
                        "original_max_position_embeddings": 16, "beta_fast": 32, "beta_slow": 1}}
plain = copy.deepcopy(cfg); del plain["rope_scaling"]; plain["rope_interleave"] = False
os.makedirs(out, exist_ok=True)
save_file(sd, os.path.join(out, "tiny_deepseek_v3.safetensors"))
ids = torch.tensor([[3, 17, 41, 0, 29, 8, 47, 12, 33, 21]])
res = {"ids": ids[0].to(torch.int64)}
for name, c in (("yarn", cfg), ("plain", plain)):
    with tempfile.TemporaryDirectory() as d:
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        json.dump(c, open(os.path.join(d, "config.json"), "w"))
        model = DeepseekV3ForCausalLM.from_pretrained(d, attn_implementation="eager", experts_implementation="eager").double().eval()
        with torch.no_grad():
            res["logits." + name] = model(input_ids=ids).logits[0].contiguous()
    json.dump(c, open(os.path.join(out, f"tiny_deepseek_v3.{name}.json"), "w"), indent=1)
save_file(res, os.path.join(out, "tiny_deepseek_v3_logits.safetensors"))
print("ok", {k: tuple(v.shape) for k, v in res.items()})
