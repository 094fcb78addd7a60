"""A Qwen3-MoE with a dense first layer (mlp_only_layers [0]) from
tests/gguf/arch/tiny-qwen3-moe, without torch: layer 0's router and experts
replaced by a dense SwiGLU MLP of intermediate_size rows made of its experts'
weights (gate: experts 0 and 1's, up: 2 and 3's, down: 0 and 1's side by
side; all finite, no tensor left equal to another), config.json's
mlp_only_layers [0]. usage: mixed_moe.py SRC_DIR OUT_DIR"""
import json, os, shutil, struct, sys

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
cfg = json.load(open(os.path.join(src, "config.json")))
cfg["mlp_only_layers"] = [0]
json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
for f in os.listdir(src):
    if f.startswith("tokenizer"):
        shutil.copy(os.path.join(src, f), out)
d = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", d[:8])[0]
hdr, base = json.loads(d[8:8 + n]), 8 + n
t = {k: (v, d[base + v["data_offsets"][0]:base + v["data_offsets"][1]]) for k, v in hdr.items() if k != "__metadata__"}
H, I = cfg["hidden_size"], cfg["intermediate_size"]
p = "model.layers.0.mlp."
x = lambda e, n: t[p + "experts.%d.%s.weight" % (e, n)][1]
row = H * 4  # bytes of one row of an expert's down_proj [H, moe_intermediate_size = H here]
dense = {"gate_proj": ([I, H], x(0, "gate_proj") + x(1, "gate_proj")),
         "up_proj": ([I, H], x(2, "up_proj") + x(3, "up_proj")),
         "down_proj": ([H, I], b"".join(x(0, "down_proj")[r * row:(r + 1) * row] + x(1, "down_proj")[r * row:(r + 1) * row]
                                        for r in range(H)))}
assert I == 2 * cfg["moe_intermediate_size"] and cfg["moe_intermediate_size"] == H
for k in [k for k in t if k.startswith(p)]:
    del t[k]
for name, (shape, b) in dense.items():
    t[p + name + ".weight"] = ({"dtype": "F32", "shape": shape}, b)
h, off, data = {}, 0, []
for k in sorted(t):
    m, b = t[k]
    h[k] = {"dtype": m["dtype"], "shape": m["shape"], "data_offsets": [off, off + len(b)]}
    off += len(b)
    data.append(b)
hb = json.dumps(h, separators=(",", ":")).encode()
hb += b" " * (-len(hb) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(hb)) + hb + b"".join(data))
