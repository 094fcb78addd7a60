"""Tiny quantized model folders, shaped like the real ones, for dequant_test.sh.

Run with real torch 1.13 (/usr/bin/python3). Every packing here is written
from the layouts' definitions, independently of tpconv:
  fp8       DeepSeek-V3 style: F8_E4M3 weights + F32 weight_scale_inv blocks
            [ceil(O/128), ceil(I/128)], two safetensors shards + index
  fp8ct     compressed-tensors float-quantized: per-channel [O, 1] and
            per-tensor weight_scale, input_scale
  gptq4     AutoGPTQ v1, 4 bits, group 32, desc_act (permuted g_idx), torch .bin
  gptq8     GPTQ 8 bits, group 64, no g_idx, safetensors
  gptqv2    GPTQModel gptq_v2 (zeros stored as is), 4 bits, group 32
  awq       AutoAWQ gemm, 4 bits, group 32, safetensors
  bad_*     refusals
torch 1.13 has no float8: E4M3 is encoded through an explicit table of its 256
codes. usage: make_quant.py OUTDIR SEED
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import tpctest  # noqa: E402

out, seed = sys.argv[1], int(sys.argv[2])
torch.manual_seed(seed)


def e4m3_value(c):
    """E4M3FN code -> float (None for NaN), from the format's definition."""
    s = -1.0 if c & 0x80 else 1.0
    ex, m = (c >> 3) & 15, c & 7
    if ex == 15 and m == 7:
        return None
    if ex == 0:
        return s * m * 2.0 ** -9
    return s * (1 + m / 8.0) * 2.0 ** (ex - 7)


FINITE = [(c, e4m3_value(c)) for c in range(256) if e4m3_value(c) is not None]
VALS = torch.tensor([v for _, v in FINITE], dtype=torch.float64)
CODES = torch.tensor([c for c, _ in FINITE], dtype=torch.uint8)


def e4m3_encode(x):
    """Nearest finite E4M3 code of each element (saturating at +-448)."""
    d = (x.double().reshape(-1, 1) - VALS.reshape(1, -1)).abs()
    return CODES[d.argmin(dim=1)].reshape(x.shape)


def save_st(path, tensors):
    """A value (dtype_name, shape, bytes) is stored as given; no __metadata__."""
    tpctest.save_safetensors(path, tensors, metadata=None)


def folder(name, cfg):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    base = {"architectures": ["LlamaForCausalLM"], "hidden_size": 256}
    base.update(cfg)
    json.dump(base, open(os.path.join(d, "config.json"), "w"), indent=1)
    return d


def fp8_weight(O, I, bo=128, bi=128):
    """(codes u8 [O, I], scale_inv f32 [ceil(O/bo), ceil(I/bi)]) quantizing a random weight per block."""
    w = torch.randn(O, I) * 0.05
    so, si = math.ceil(O / bo), math.ceil(I / bi)
    s = torch.empty(so, si)
    codes = torch.empty(O, I, dtype=torch.uint8)
    for a in range(so):
        for b in range(si):
            blk = w[a * bo:(a + 1) * bo, b * bi:(b + 1) * bi]
            s[a, b] = float(blk.abs().max()) / 448.0
            codes[a * bo:(a + 1) * bo, b * bi:(b + 1) * bi] = e4m3_encode(blk / s[a, b])
    return codes, s


def f8(codes):
    return ("F8_E4M3", list(codes.shape), codes.numpy().tobytes())


# ---- FP8 block (DeepSeek-V3 / Qwen3-FP8) ----
d = folder("fp8", {"torch_dtype": "bfloat16", "quantization_config": {
    "activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}})
p = "model.layers.0."
s1, s2 = {}, {}
s1["model.embed_tokens.weight"] = torch.randn(64, 300).bfloat16()
c, s = fp8_weight(300, 260)          # edges not multiples of 128
c[0, :16] = torch.tensor([0x00, 0x80, 0x01, 0x81, 0x07, 0x08, 0x7E, 0xFE, 0x7F, 0xFF, 0x3F, 0x40, 0x38, 0xB8, 0x06, 0x86],
                         dtype=torch.uint8)  # zeros, subnormals, +-448, NaN codes, 1.0
s1[p + "self_attn.q_proj.weight"] = f8(c)
s1[p + "self_attn.q_proj.weight_scale_inv"] = s
c, s = fp8_weight(128, 300)
s1[p + "self_attn.o_proj.weight"] = f8(c)
s1[p + "self_attn.o_proj.weight_scale_inv"] = s
s1[p + "input_layernorm.weight"] = torch.randn(300).bfloat16()
c, s = fp8_weight(520, 300)           # spans the 1M-element step? no: several rows per step; 5 row blocks
s2[p + "mlp.gate_proj.weight"] = f8(c)
s2[p + "mlp.gate_proj.weight_scale_inv"] = s
c, s = fp8_weight(300, 520)
s2[p + "mlp.down_proj.weight"] = f8(c)
s2[p + "mlp.down_proj.weight_scale_inv"] = s
s2["lm_head.weight"] = torch.randn(64, 300).bfloat16()
save_st(os.path.join(d, "model-00001-of-00002.safetensors"), s1)
save_st(os.path.join(d, "model-00002-of-00002.safetensors"), s2)
wm = {k: "model-00001-of-00002.safetensors" for k in s1}
wm.update({k: "model-00002-of-00002.safetensors" for k in s2})
json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, open(os.path.join(d, "model.safetensors.index.json"), "w"))
json.dump({"bos_token": "<s>"}, open(os.path.join(d, "tokenizer_config.json"), "w"))

# ---- FP8 per-channel / per-tensor (compressed-tensors float-quantized) ----
d = folder("fp8ct", {"torch_dtype": "bfloat16", "quantization_config": {
    "quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True},
        "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False}}}}})
t = {}
w = torch.randn(96, 80)
sc = w.abs().amax(dim=1, keepdim=True) / 448.0
t[p + "mlp.up_proj.weight"] = f8(e4m3_encode(w / sc))
t[p + "mlp.up_proj.weight_scale"] = sc
t[p + "mlp.up_proj.input_scale"] = torch.tensor([0.02])
w = torch.randn(40, 96)
st = w.abs().max() / 448.0
t[p + "mlp.down_proj.weight"] = f8(e4m3_encode(w / st))
t[p + "mlp.down_proj.weight_scale"] = st.reshape(1)
t[p + "mlp.down_proj.input_scale"] = torch.tensor([0.03])
t["model.norm.weight"] = torch.randn(96).bfloat16()
save_st(os.path.join(d, "model.safetensors"), t)


# ---- GPTQ ----
def gptq_quant(O, I, bits, group, act_order):
    """Quantize a random [O, I] weight the GPTQ way: per (group, output) min/max scale and zero.
    Returns q [I, O], zeros [G, O], scales f16 [G, O], g_idx [I]."""
    maxq = 2 ** bits - 1
    w = torch.randn(O, I) * 0.02
    if act_order:
        perm = torch.randperm(I)
        g_idx = torch.empty(I, dtype=torch.int32)
        g_idx[perm] = (torch.arange(I) // group).int()
    else:
        g_idx = (torch.arange(I) // group).int()
    G = math.ceil(I / group)
    scales = torch.empty(G, O, dtype=torch.float16)
    zeros = torch.empty(G, O, dtype=torch.int32)
    q = torch.empty(I, O, dtype=torch.int32)
    for g in range(G):
        cols = (g_idx == g).nonzero().flatten()
        blk = w[:, cols]                                  # [O, n]
        lo = torch.minimum(blk.min(dim=1).values, torch.zeros(O))
        hi = torch.maximum(blk.max(dim=1).values, torch.zeros(O))
        s = ((hi - lo) / maxq).clamp(min=1e-6).half()
        z = torch.round(-lo / s.float()).clamp(0, maxq).int()
        z[0] = 0                                          # a zero point of 0 (v1 stores it as -1)
        z[1] = maxq
        scales[g], zeros[g] = s, z
        q[cols] = torch.clamp(torch.round(blk / s.float()[:, None]) + z[:, None], 0, maxq).int().t()
    return q, zeros, scales, g_idx


def pack_rows(v, bits):
    """[R, C] values -> int32 [R*bits/32, C]: word r holds rows per*r + k in bits [k*bits, ...)."""
    per = 32 // bits
    v = v.long() & (2 ** bits - 1)
    R, C = v.shape
    out = torch.zeros(R // per, C, dtype=torch.long)
    for k in range(per):
        out |= v[k::per] << (bits * k)
    return (((out + 2 ** 31) % 2 ** 32) - 2 ** 31).int()


def pack_cols(v, bits):
    return pack_rows(v.t().contiguous(), bits).t().contiguous()


def gptq_layer(t, pre, O, I, bits, group, act_order, v1=True, g_idx_tensor=True):
    q, z, s, g = gptq_quant(O, I, bits, group, act_order)
    t[pre + "qweight"] = pack_rows(q, bits)
    t[pre + "qzeros"] = pack_cols(z - 1 if v1 else z, bits)   # AutoGPTQ v1 pack(): zeros -= 1
    t[pre + "scales"] = s
    if g_idx_tensor:
        t[pre + "g_idx"] = g


d = folder("gptq4", {"torch_dtype": "float16", "quantization_config": {
    "quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True, "sym": False}})
t = {"model.embed_tokens.weight": torch.randn(50, 64).half()}
gptq_layer(t, p + "self_attn.q_proj.", 64, 128, 4, 32, True)
gptq_layer(t, p + "mlp.down_proj.", 48, 96, 4, 32, True)
t[p + "mlp.down_proj.bias"] = torch.randn(48).half()
torch.save(t, os.path.join(d, "pytorch_model.bin"))

d = folder("gptq8", {"torch_dtype": "float16", "quantization_config": {
    "quant_method": "gptq", "bits": 8, "group_size": 64, "desc_act": False}})
t = {}
gptq_layer(t, p + "mlp.up_proj.", 40, 128, 8, 64, False, g_idx_tensor=False)
save_st(os.path.join(d, "model.safetensors"), t)

d = folder("gptqv2", {"torch_dtype": "bfloat16", "quantization_config": {
    "quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False, "checkpoint_format": "gptq_v2"}})
t = {}
gptq_layer(t, p + "mlp.gate_proj.", 32, 64, 4, 32, False, v1=False)
save_st(os.path.join(d, "model.safetensors"), t)

# ---- AWQ (gemm) ----
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def awq_pack(v):
    """[R, C] 4-bit values -> int32 [R, C/8]: word j nibble k holds column 8j + AWQ_ORDER[k] (AutoAWQ pack)."""
    v = v.long() & 15
    R, C = v.shape
    out = torch.zeros(R, C // 8, dtype=torch.long)
    for k in range(8):
        out |= v[:, AWQ_ORDER[k]::8] << (4 * k)
    return (((out + 2 ** 31) % 2 ** 32) - 2 ** 31).int()


d = folder("awq", {"torch_dtype": "float16", "quantization_config": {
    "quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemm", "zero_point": True}})
t = {}
for name, (O, I) in {"self_attn.k_proj.": (64, 96), "mlp.up_proj.": (136, 64)}.items():
    q, z, s, _ = gptq_quant(O, I, 4, 32, False)
    t[p + name + "qweight"] = awq_pack(q)
    t[p + name + "qzeros"] = awq_pack(z)
    t[p + name + "scales"] = s
t["model.norm.weight"] = torch.randn(64).half()
save_st(os.path.join(d, "model.safetensors"), t)

# ---- refusals ----
c, s = fp8_weight(64, 64)
d = folder("bad_noconfig", {"torch_dtype": "bfloat16"})
save_st(os.path.join(d, "model.safetensors"), {"a.weight": f8(c), "a.weight_scale_inv": s})
d = folder("bad_method", {"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}})
save_st(os.path.join(d, "model.safetensors"), {"a.weight": f8(c), "a.weight_scale_inv": s})
fp8cfg = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
d = folder("bad_noscale", fp8cfg)
save_st(os.path.join(d, "model.safetensors"), {"a.weight": f8(c), "b.weight_scale_inv": s})
d = folder("bad_scaleshape", fp8cfg)
save_st(os.path.join(d, "model.safetensors"), {"a.weight": f8(c), "a.weight_scale_inv": torch.rand(2, 1)})
d = folder("bad_gptq", {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32}})
t = {}
gptq_layer(t, "l.", 16, 64, 4, 32, False)
del t["l.qzeros"]
save_st(os.path.join(d, "model.safetensors"), t)
d = folder("bad_gidx", {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True}})
t = {}
gptq_layer(t, "l.", 16, 64, 4, 32, True)
t["l.g_idx"][5] = 7
save_st(os.path.join(d, "model.safetensors"), t)

d = folder("fp8orphan", fp8cfg)
c, s = fp8_weight(64, 64)
save_st(os.path.join(d, "model.safetensors"), {"a.weight": f8(c), "a.weight_scale_inv": s,
                                               "b.weight": torch.randn(64, 64).bfloat16(), "b.weight_scale_inv": s})

# ---- streaming: one larger FP8 weight (32 MiB in, 64 MiB of bf16 out) ----
d = folder("fp8big", {"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})
codes = torch.randint(0, 0x7E, (4096, 8192), dtype=torch.uint8)
save_st(os.path.join(d, "model.safetensors"), {"big.weight": f8(codes), "big.weight_scale_inv": torch.rand(32, 64)})
print("ok")
