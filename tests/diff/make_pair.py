"""Inputs for tests/diff/diff_test.sh, built with real torch (/usr/bin/python3).

usage: make_pair.py OUTDIR SEED
Writes into OUTDIR:
  a.pt            an HF-llama-named state dict (f32, plus a bf16, an int64, a bool
                  and a complex tensor), torch.save'd
  one.pt          a.pt with one element of model.layers.1.mlp.down_proj.weight
                  changed at [2, 3]; one.txt holds "A_VALUE B_VALUE"
  missing.pt      a.pt without model.norm.weight, with an extra "extra.bias", one
                  tensor with another shape and one with another dtype
  bf16.pt         a.pt with every floating tensor cast by torch .to(bfloat16)
  bf16ulp.pt      bf16.pt with one element one representable value higher
  noise.pt        a.pt with every f32 element moved by at most 1e-6 (relative)
  meg.pt          the same tensors under Megatron-core names (meg_rules.json maps
                  HF names to them); meg_one.pt has one element changed
"""
import json, sys, torch

out, seed = sys.argv[1], int(sys.argv[2])
g = torch.Generator().manual_seed(seed)
H, I, V, L = 32, 64, 50, 2


def r(*s):
    return torch.randn(*s, generator=g)


sd = {"model.embed_tokens.weight": r(V, H)}
for i in range(L):
    p = f"model.layers.{i}."
    sd[p + "input_layernorm.weight"] = r(H)
    sd[p + "self_attn.o_proj.weight"] = r(H, H)
    sd[p + "post_attention_layernorm.weight"] = r(H)
    sd[p + "mlp.down_proj.weight"] = r(H, I)
sd["model.norm.weight"] = r(H)
sd["lm_head.weight"] = r(V, H)
sd["extra.half"] = r(7, 3).to(torch.float16)
sd["extra.bf"] = r(5).to(torch.bfloat16)
sd["extra.steps"] = torch.arange(12, dtype=torch.int64).reshape(3, 4)
sd["extra.mask"] = torch.rand(9, generator=g) > 0.5
sd["extra.cplx"] = torch.complex(r(4), r(4))
torch.save(sd, f"{out}/a.pt")

one = {k: v.clone() for k, v in sd.items()}
t = one["model.layers.1.mlp.down_proj.weight"]
before = t[2, 3].item()
t[2, 3] = before + 0.5
torch.save(one, f"{out}/one.pt")
with open(f"{out}/one.txt", "w") as f:
    f.write("%.9g %.9g\n" % (before, t[2, 3].item()))

m = {k: v.clone() for k, v in sd.items() if k != "model.norm.weight"}
m["extra.bias"] = r(3)
m["lm_head.weight"] = m["lm_head.weight"][:, :16].clone()
m["extra.steps"] = m["extra.steps"].to(torch.int32)
torch.save(m, f"{out}/missing.pt")

bf = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in sd.items()}
torch.save(bf, f"{out}/bf16.pt")
ulp = {k: v.clone() for k, v in bf.items()}
w = ulp["model.layers.0.self_attn.o_proj.weight"].view(torch.int16)
w[1, 1] += 1  # the next representable bf16 value (same sign, not at a boundary in practice)
torch.save(ulp, f"{out}/bf16ulp.pt")

noise = {}
for k, v in sd.items():
    if v.dtype == torch.float32:
        v = v * (1 + 1e-6 * (2 * torch.rand(v.shape, generator=g) - 1))
    noise[k] = v
torch.save(noise, f"{out}/noise.pt")

ren = {"model.embed_tokens.weight": "embedding.word_embeddings.weight",
       "model.norm.weight": "decoder.final_layernorm.weight",
       "lm_head.weight": "output_layer.weight"}
meg = {}
for k, v in sd.items():
    n = ren.get(k, k)
    if n.startswith("model.layers."):
        n = (n.replace("model.layers.", "decoder.layers.")
              .replace("self_attn.o_proj", "self_attention.linear_proj")
              .replace("mlp.down_proj", "mlp.linear_fc2")
              .replace("post_attention_layernorm", "pre_mlp_layernorm"))
    meg[n] = v
torch.save(meg, f"{out}/meg.pt")
meg_one = {k: v.clone() for k, v in meg.items()}
meg_one["decoder.layers.0.self_attention.linear_proj.weight"][0, 5] += 1
torch.save(meg_one, f"{out}/meg_one.pt")
rules = {"description": "HF llama names -> Megatron-core names (unfused tensors)",
         "rules": [
             {"rename": "^model\\.embed_tokens\\.", "to": "embedding.word_embeddings."},
             {"rename": "^model\\.norm\\.", "to": "decoder.final_layernorm."},
             {"rename": "^lm_head\\.", "to": "output_layer."},
             {"rename": "^model\\.layers\\.", "to": "decoder.layers."},
             {"rename": "\\.self_attn\\.o_proj\\.", "to": ".self_attention.linear_proj."},
             {"rename": "\\.mlp\\.down_proj\\.", "to": ".mlp.linear_fc2."},
             {"rename": "\\.post_attention_layernorm\\.", "to": ".pre_mlp_layernorm."}]}
with open(f"{out}/meg_rules.json", "w") as f:
    json.dump(rules, f, indent=1)
