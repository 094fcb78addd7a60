# Write a real-data Mixtral-shaped Hugging Face folder for bench/mdist_bench.sh:
# config.json, model.safetensors.index.json and one bf16 safetensors file per
# decoder layer (plus one for the embeddings, final norm and lm_head), the
# names and shapes transformers' MixtralForCausalLM saves
# (model.layers.N.block_sparse_moe.experts.E.w1/w2/w3.weight, .gate.weight the
# router), values random normal * 0.02 (numpy, seeded; bf16 by truncating
# float32, as mix_bench.sh), norms 1.0. Every byte is written (no holes), so a
# converter that reads it reads the disk or the page cache.
# usage: make_moe_hf.py OUT_DIR HIDDEN FFN LAYERS EXPERTS HEADS KV_HEADS VOCAB
# the bench's defaults: 1024 3584 16 8 16 4 32000 -> 2.89 GB
import json, os, struct, sys
import numpy as np

out = sys.argv[1]
H, I, L, E, NH, KV, V = (int(x) for x in sys.argv[2:9])
D = H // NH
rng = np.random.default_rng(44)
os.makedirs(out, exist_ok=True)


def bf16(shape, ones=False):
    if ones:
        return np.full(shape, 0x3F80, dtype=np.uint16)
    x = (rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)).view(np.uint32)
    return (x >> 16).astype(np.uint16)


def layer(n):
    p = f"model.layers.{n}."
    t = [(p + "input_layernorm.weight", (H,), True),
         (p + "self_attn.q_proj.weight", (NH * D, H), False),
         (p + "self_attn.k_proj.weight", (KV * D, H), False),
         (p + "self_attn.v_proj.weight", (KV * D, H), False),
         (p + "self_attn.o_proj.weight", (H, NH * D), False),
         (p + "post_attention_layernorm.weight", (H,), True),
         (p + "block_sparse_moe.gate.weight", (E, H), False)]
    for e in range(E):
        q = f"{p}block_sparse_moe.experts.{e}."
        t += [(q + "w1.weight", (I, H), False), (q + "w2.weight", (H, I), False), (q + "w3.weight", (I, H), False)]
    return t


files = [layer(n) for n in range(L)]
files.append([("model.embed_tokens.weight", (V, H), False), ("model.norm.weight", (H,), True),
              ("lm_head.weight", (V, H), False)])
weight_map, total = {}, 0
for k, tensors in enumerate(files):
    name = f"model-{k + 1:05d}-of-{len(files):05d}.safetensors"
    hdr, off = {"__metadata__": {"format": "pt"}}, 0
    for tname, shape, _ in tensors:
        n = int(np.prod(shape)) * 2
        hdr[tname] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
        weight_map[tname] = name
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    path = os.path.join(out, name)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for tname, shape, ones in tensors:
            f.write(bf16(shape, ones).tobytes())
    os.rename(path + ".tmp", path)
    total += off
cfg = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": H,
       "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": KV,
       "head_dim": D, "num_local_experts": E, "num_experts_per_tok": 2, "vocab_size": V, "hidden_act": "silu",
       "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 1e6, "tie_word_embeddings": False,
       "torch_dtype": "bfloat16", "sliding_window": None, "router_aux_loss_coef": 0.02}
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(cfg, f, indent=2)
with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
print(f"# {out}: {len(files)} files, {total / 1e9:.2f} GB")
