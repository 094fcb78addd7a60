#!/usr/bin/env python3
"""Make tests/gguf/kquant/: llama-quantize's Q4_K_M and Q6_K of tpconv's f16
GGUF of a tiny llama whose rows are 256 wide (so the K-quants apply), and what
python3-gguf's gguf.quants.dequantize gives for each tensor.

Two steps in the forky chroot (transformers, llama-quantize, python3-gguf)
around one on the host (tpconv):

  chroot: python3 make_quant_fixture.py model DIR        DIR/tiny: the HF model
  host:   tpconv convert DIR/tiny -o DIR/f16.gguf --outtype f16
  chroot: python3 make_quant_fixture.py quant DIR OUT    OUT/{q4_k_m,q6_k}.gguf
                                                         OUT/expected.txt

expected.txt: per quantized file and tensor, "FILE NAME TYPE SHA_GGUF SHA_HF":
the SHA-256 of the F32 values dequantize gives, in the GGUF's row order, and in
the Hugging Face model's (attn_q / attn_k rows un-permuted as
convert_hf_to_gguf.py's LlamaModel.permute reversed; the others as they are).
"""
import hashlib
import os
import shutil
import subprocess
import sys

import numpy as np


def model(d):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(33)
    cfg = LlamaConfig(hidden_size=256, intermediate_size=256, num_attention_heads=2, num_key_value_heads=1,
                      num_hidden_layers=1, vocab_size=64, max_position_embeddings=64, tie_word_embeddings=False,
                      rms_norm_eps=1e-5)
    m = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.05)
    m.save_pretrained(os.path.join(d, "tiny"), safe_serialization=True)


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def quant(d, out):
    import gguf
    os.makedirs(out, exist_ok=True)
    lines = []
    for qt in ("Q4_K_M", "Q6_K"):
        f = os.path.join(out, qt.lower() + ".gguf")
        subprocess.run(["llama-quantize", os.path.join(d, "f16.gguf"), f, qt], check=True, capture_output=True)
        r = gguf.GGUFReader(f)
        heads = int(r.fields["llama.attention.head_count"].parts[-1][0])
        kv = int(r.fields["llama.attention.head_count_kv"].parts[-1][0])
        for t in r.tensors:
            v = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            v = v.reshape([int(x) for x in reversed(t.shape)])
            h = v
            if t.name.endswith("attn_q.weight"):
                h = unpermute(v, heads)
            elif t.name.endswith("attn_k.weight"):
                h = unpermute(v, kv)
            sha = lambda a: hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
            lines.append(f"{os.path.basename(f)} {t.name} {t.tensor_type.name} {sha(v)} {sha(h)}")
    with open(os.path.join(out, "expected.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "model":
        model(sys.argv[2])
    else:
        quant(sys.argv[2], sys.argv[3])
