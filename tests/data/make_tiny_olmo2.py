# Writes tests/data/tiny_olmo2.safetensors, a tiny checkpoint shaped as
# Olmo2ForCausalLM's (no input norms; post_attention_layernorm on the
# attention's output and post_feedforward_layernorm on the MLP's, each before
# the residual add; q_norm and k_norm RMSNorms over the whole q and k
# projections, before RoPE), and tiny_olmo2_out.safetensors: its logits on
# fixed ids computed here in plain torch, float64 ("ids", "logits").
# tests/verify/test_verify_forward.c runs verify's reference forward, composed from the
# layer parts of a record as the OLMo 2 one would be, against them.
# usage: /usr/bin/python3 make_tiny_olmo2.py OUTDIR   (torch >= 1.13, nothing else)
import json, os, struct, sys
import torch

out = sys.argv[1]
g = torch.Generator().manual_seed(41)
H, V, L, NH, KVH, I, T = 32, 48, 2, 4, 2, 64, 10
HD, EPS, THETA = H // NH, 1e-6, 10000.0


def rnd(*shape, scale=0.25, one=False):
    r = torch.randn(*shape, generator=g, dtype=torch.float64).float()
    return (1 + 0.2 * r) if one else scale * r


w = {"model.embed_tokens.weight": rnd(V, H, scale=1.0), "model.norm.weight": rnd(H, one=True),
     "lm_head.weight": rnd(V, H)}
for l in range(L):
    p = "model.layers.%d." % l
    w[p + "self_attn.q_proj.weight"] = rnd(NH * HD, H)
    w[p + "self_attn.k_proj.weight"] = rnd(KVH * HD, H)
    w[p + "self_attn.v_proj.weight"] = rnd(KVH * HD, H)
    w[p + "self_attn.o_proj.weight"] = rnd(H, NH * HD)
    w[p + "self_attn.q_norm.weight"] = rnd(NH * HD, one=True)
    w[p + "self_attn.k_norm.weight"] = rnd(KVH * HD, one=True)
    w[p + "post_attention_layernorm.weight"] = rnd(H, one=True)
    w[p + "mlp.gate_proj.weight"] = rnd(I, H)
    w[p + "mlp.up_proj.weight"] = rnd(I, H)
    w[p + "mlp.down_proj.weight"] = rnd(H, I)
    w[p + "post_feedforward_layernorm.weight"] = rnd(H, one=True)


def rms(x, wt):
    return wt * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


def rope(x):  # [T, n, HD], rotate-half
    inv = 1.0 / THETA ** (torch.arange(0, HD, 2, dtype=torch.float64) / HD)
    f = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    cos, sin = torch.cat([f, f], -1).cos()[:, None], torch.cat([f, f], -1).sin()[:, None]
    rot = torch.cat([-x[..., HD // 2:], x[..., :HD // 2]], -1)
    return x * cos + rot * sin


d = {k: v.double() for k, v in w.items()}
ids = torch.randint(0, V, (T,), generator=g)
x = d["model.embed_tokens.weight"][ids]
mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
for l in range(L):
    p = "model.layers.%d." % l
    q = rms(x @ d[p + "self_attn.q_proj.weight"].T, d[p + "self_attn.q_norm.weight"])
    k = rms(x @ d[p + "self_attn.k_proj.weight"].T, d[p + "self_attn.k_norm.weight"])
    v = x @ d[p + "self_attn.v_proj.weight"].T
    q, k, v = rope(q.view(T, NH, HD)), rope(k.view(T, KVH, HD)), v.view(T, KVH, HD)
    k, v = k.repeat_interleave(NH // KVH, 1), v.repeat_interleave(NH // KVH, 1)
    s = torch.einsum("thd,shd->hts", q, k) / HD ** 0.5 + mask
    ctx = torch.einsum("hts,shd->thd", s.softmax(-1), v).reshape(T, NH * HD)
    x = x + rms(ctx @ d[p + "self_attn.o_proj.weight"].T, d[p + "post_attention_layernorm.weight"])
    m = torch.nn.functional.silu(x @ d[p + "mlp.gate_proj.weight"].T) * (x @ d[p + "mlp.up_proj.weight"].T)
    x = x + rms(m @ d[p + "mlp.down_proj.weight"].T, d[p + "post_feedforward_layernorm.weight"])
logits = rms(x, d["model.norm.weight"]) @ d["lm_head.weight"].T


def save(tensors, path):  # safetensors: header length, JSON header, raw little-endian data
    hdr, blobs, off = {}, [], 0
    for k, t in tensors.items():
        b = t.contiguous().numpy().tobytes()
        dt = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}[t.dtype]
        hdr[k] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


save(w, os.path.join(out, "tiny_olmo2.safetensors"))
save({"ids": ids, "logits": logits}, os.path.join(out, "tiny_olmo2_out.safetensors"))
