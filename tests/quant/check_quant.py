"""Compare tpconv's dequantized output with an independent torch dequantization.

usage: check_quant.py IN_FOLDER OUT DTYPE [--all-cast]
  IN_FOLDER  a folder make_quant.py wrote (config.json + weights)
  OUT        tpconv's output: *.safetensors, *.pt, or an HF folder
  DTYPE      the dequantized weights' expected dtype: bf16, f16 or f32
  --all-cast every other floating tensor was cast to DTYPE too (--dtype DT)
The reference computes each weight in float32 the way the layouts define it
(FP8: e4m3(code) * scale_inv block; GPTQ/AWQ: (q - z) * s) and rounds with
torch's .to(dtype). Bits must be equal (NaN: both NaN). Every scale, zero,
g_idx and packed tensor must be gone; everything else kept (or cast).
"""
import glob
import json
import os
import struct
import sys

import torch

inp, outp, dt = sys.argv[1], sys.argv[2], sys.argv[3]
all_cast = "--all-cast" in sys.argv
TD = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
want = TD[dt]
STD = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I32": torch.int32,
       "I64": torch.int64, "U8": torch.uint8, "F8_E4M3": torch.uint8}


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    res = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        a, z = v["data_offsets"]
        raw = bytearray(b[8 + n + a:8 + n + z])
        dtn = v["dtype"]
        tdt = STD[dtn]
        if tdt == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16) if raw else torch.empty(0, dtype=tdt)
        else:
            t = torch.frombuffer(raw, dtype=tdt) if raw else torch.empty(0, dtype=tdt)
        res[k] = (dtn, t.reshape(v["shape"]).clone())
    return res


def load(path):
    if os.path.isdir(path):
        res = {}
        files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
        for f in files:
            res.update(read_st(f))
        for f in sorted(glob.glob(os.path.join(path, "*.bin"))):
            res.update(load(f))
        return res
    if path.endswith(".safetensors"):
        return read_st(path)
    sd = torch.load(path, weights_only=True) if "weights_only" in torch.load.__code__.co_varnames else torch.load(path)
    return {k: (str(v.dtype), v) for k, v in sd.items()}


def e4m3_value(c):
    s = -1.0 if c & 0x80 else 1.0
    ex, m = (c >> 3) & 15, c & 7
    if ex == 15 and m == 7:
        return float("nan")
    if ex == 0:
        return s * m * 2.0 ** -9
    return s * (1 + m / 8.0) * 2.0 ** (ex - 7)


E4M3 = torch.tensor([e4m3_value(c) for c in range(256)], dtype=torch.float32)
AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]

cfg = json.load(open(os.path.join(inp, "config.json"))).get("quantization_config")
if cfg is None:  # AutoGPTQ before quantization_config
    cfg = dict(json.load(open(os.path.join(inp, "quantize_config.json"))), quant_method="gptq")
meth = cfg["quant_method"]
src = load(inp)
out = load(outp)
ref, gone = {}, set()


def u32(t):
    return t.long() & 0xFFFFFFFF


def unpack_rows(w, bits):
    per, mask = 32 // bits, 2 ** bits - 1
    R, C = w.shape
    v = torch.empty(R * per, C, dtype=torch.long)
    for k in range(per):
        v[k::per] = (u32(w) >> (bits * k)) & mask
    return v


if meth in ("fp8", "compressed-tensors"):
    blk = cfg.get("weight_block_size") or [0, 0]
    for k, (dtn, t) in src.items():
        if dtn != "F8_E4M3":
            continue
        O, I = t.shape
        sk = k + "_scale_inv" if k + "_scale_inv" in src else k + "_scale"
        s = src[sk][1].float()
        if s.numel() == 1:
            s = s.reshape(1, 1).expand(O, I)
        elif list(s.shape) in ([O, 1], [O]):
            s = s.reshape(O, 1).expand(O, I)
        else:
            s = s.repeat_interleave(blk[0], 0)[:O].repeat_interleave(blk[1], 1)[:, :I]
        ref[k] = (E4M3[t.long()] * s).to(want)
        gone.add(sk)
        if k.endswith("weight") and k[:-6] + "input_scale" in src:
            gone.add(k[:-6] + "input_scale")
else:
    bits, group = cfg["bits"], cfg["group_size"]
    v1 = cfg.get("checkpoint_format") != "gptq_v2"
    for k, (dtn, qw) in src.items():
        if not k.endswith("qweight"):
            continue
        pre = k[:-len("qweight")]
        s, qz = src[pre + "scales"][1], src[pre + "qzeros"][1]
        if meth == "awq":
            I, O = qw.shape[0], qw.shape[1] * 8
            q = torch.empty(I, O, dtype=torch.long)
            z = torch.empty(qz.shape[0], O, dtype=torch.long)
            for n in range(8):
                q[:, n::8] = (u32(qw) >> (4 * AWQ_REVERSE_ORDER[n])) & 15
                z[:, n::8] = (u32(qz) >> (4 * AWQ_REVERSE_ORDER[n])) & 15
            g = torch.arange(I) // group
        else:
            q = unpack_rows(qw, bits)
            I = q.shape[0]
            z = unpack_rows(qz.t().contiguous(), bits).t()
            if v1:
                z = (z + 1) & (2 ** bits - 1)
            g = src[pre + "g_idx"][1].long() if pre + "g_idx" in src else torch.arange(I) // group
            gone.add(pre + "g_idx")
        w = (q - z[g]).float() * s.float()[g]
        ref[pre + "weight"] = w.t().contiguous().to(want)
        gone.update({k, pre + "scales", pre + "qzeros"})

bad = []


def bits_of(t):
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.contiguous().view(torch.int16)
    if t.dtype == torch.float32:
        return t.contiguous().view(torch.int32)
    return t


def same(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return "dtype/shape %s %s vs %s %s" % (a.dtype, list(a.shape), b.dtype, list(b.shape))
    if a.dtype in (torch.bfloat16, torch.float16, torch.float32):
        nan = torch.isnan(a.float()) & torch.isnan(b.float())
        diff = (bits_of(a) != bits_of(b)) & ~nan
        if diff.any():
            i = diff.flatten().nonzero()[0].item()
            return "%d of %d elements differ; first at flat %d: %r vs %r" % (
                int(diff.sum()), a.numel(), i, a.flatten()[i].item(), b.flatten()[i].item())
        return None
    return None if torch.equal(a, b) else "values differ"


for k, r in ref.items():
    if k not in out:
        bad.append("missing %s" % k)
        continue
    m = same(out[k][1], r)
    if m:
        bad.append("%s: %s" % (k, m))
for k in gone:
    if k in out:
        bad.append("%s should have been dropped" % k)
for k, (dtn, t) in src.items():
    if k in ref or k in gone:
        continue
    if k not in out:
        bad.append("lost %s" % k)
        continue
    e = t.to(want) if all_cast and t.is_floating_point() else t
    m = same(out[k][1], e)
    if m:
        bad.append("%s (kept): %s" % (k, m))
extra = set(out) - set(ref) - (set(src) - gone)
if extra:
    bad.append("unexpected tensors: %s" % sorted(extra))
if bad:
    print("\n".join(bad[:20]))
    sys.exit(1)
print("ok: %d dequantized, %d kept, %d dropped" % (len(ref), len(out) - len(ref), len(gone)))
