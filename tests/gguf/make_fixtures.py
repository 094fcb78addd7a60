#!/usr/bin/env python3
"""Make tests/gguf's fixtures in the forky chroot (python3-gguf, llama-quantize):

  quants.gguf   one small tensor per ggml type tpconv decodes, the blocks
                llama-quantize made (--pure) from a tiny llama model's
                blk.0.attn_q.weight, first 4 rows, plus an F16 and BF16 one
  quants.sha256 "name sha256" of each tensor's F32 values as python3-gguf's
                gguf.quants.dequantize gives them (what tpconv must equal)

usage (host): /tmp/inchroot.sh /var/cache/tpconv-interop/forky/tmp/gguf \
              'python3 make_fixtures.py OUTDIR'
"""
import hashlib
import subprocess
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

out = sys.argv[1] if len(sys.argv) > 1 else "."
rng = np.random.default_rng(33)
H, L = 256, 1

w = gguf.GGUFWriter("tiny.gguf", "llama")
w.add_block_count(L)
w.add_context_length(64)
w.add_embedding_length(H)
w.add_feed_forward_length(H)
w.add_head_count(2)
w.add_head_count_kv(2)
w.add_layer_norm_rms_eps(1e-5)
w.add_vocab_size(32)
w.add_file_type(0)


def t(name, shape):
    return (rng.standard_normal(shape) * 0.05).astype(np.float32)


w.add_tensor("token_embd.weight", t("e", (32, H)))
w.add_tensor("output_norm.weight", np.ones(H, np.float32))
w.add_tensor("output.weight", t("o", (32, H)))
for n in ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]:
    w.add_tensor(f"blk.0.{n}.weight", t(n, (H, H)))
for n in ["attn_norm", "ffn_norm"]:
    w.add_tensor(f"blk.0.{n}.weight", np.ones(H, np.float32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

types = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
ftype = {"Q3_K": "Q3_K_S", "Q4_K": "Q4_K_S", "Q5_K": "Q5_K_S"}
fx = gguf.GGUFWriter(f"{out}/quants.gguf", "llama")
sums = []
for ty in types:
    subprocess.run(["llama-quantize", "--pure", "tiny.gguf", f"tiny-{ty}.gguf", ftype.get(ty, ty)],
                   check=True, capture_output=True)
    r = gguf.GGUFReader(f"tiny-{ty}.gguf")
    q = [x for x in r.tensors if x.name == "blk.0.attn_q.weight"][0]
    assert q.tensor_type == T[ty], (ty, q.tensor_type)
    rows = np.array(q.data[:4])  # 4 rows of packed bytes
    name = f"{ty.lower()}.weight"
    fx.add_tensor(name, rows, raw_shape=rows.shape, raw_dtype=T[ty])
    deq = gguf.quants.dequantize(rows, T[ty]).astype(np.float32)
    assert deq.shape == (4, H)
    sums.append((name, hashlib.sha256(deq.tobytes()).hexdigest()))
for name, dt, npdt in [("f16.weight", T.F16, np.float16), ("f32.weight", T.F32, np.float32)]:
    x = t(name, (4, H)).astype(npdt)
    fx.add_tensor(name, x, raw_dtype=dt)
    sums.append((name, hashlib.sha256(x.astype(np.float32).tobytes()).hexdigest()))
fx.add_tensor("norm.weight", np.ones(H, np.float32))
sums.append(("norm.weight", hashlib.sha256(np.ones(H, np.float32).tobytes()).hexdigest()))
fx.write_header_to_file()
fx.write_kv_data_to_file()
fx.write_tensors_to_file()
fx.close()
with open(f"{out}/quants.sha256", "w") as f:
    for n, s in sums:
        f.write(f"{n} {s}\n")
