"""A LoRA adapter split for tensor parallelism, checked against vLLM's slicing,
written from vLLM's source, not from tpconv's code.

  lora_tp_check.py ADAPTER_DIR SET_DIR TP HEADS KV_HEADS HEAD_DIM [ADAPTER_DIR ...]

reads ADAPTER_DIR/adapter_model.safetensors and every SET_DIR/tpTT_pp00/
adapter_model.safetensors (a header parser of its own) and builds what each
rank must hold the way vLLM's LoRA layers slice a PEFT adapter
(vllm-project/vllm 4f54575c, vllm/lora/layers/column_parallel_linear.py;
7626577c, row_parallel_linear.py):

  q_proj, k_proj, v_proj   MergedQKVParallelLinearWithLoRA.slice_lora_b: B's
                           rows of rank t's q heads (shard id t), of its K/V
                           heads (shard id t // num_kv_head_replicas, the
                           replicas tp / kv_heads when tp > kv_heads); A whole
  qkv_proj                 QKVParallelLinearWithLoRA.slice_lora_b: the same
                           three slices of one B, concatenated; A whole
  gate_up_proj             ColumnParallelLinearWithLoRA.slice_lora_b of a
                           MergedColumnParallelLinear: [gate_t; up_t]; A whole
  gate_proj, up_proj       ColumnParallelLinearWithLoRA.slice_lora_b: rows
  o_proj, down_proj        RowParallelLinearWithLoRA.slice_lora_a: A's columns
                           [t*in/tp, (t+1)*in/tp); B whole
  lora_B.bias              sliced as B's rows (vLLM's slice_bias for column
                           layers; whole for row layers)
  lora_magnitude_vector    (DoRA, which vLLM does not serve) as B's rows
  lm_head (modules_to_save) rows [t*V/tp, (t+1)*V/tp) (ParallelLMHead, the
                           vocab divisible by tp here)

and compares names, shapes and bytes. Exit 0 when every rank matches.
"""
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import tpctest  # noqa: E402

load = tpctest.load_safetensors


def check(ad_dir, set_dir, tp, heads, kvh, hd):
    ad = load(os.path.join(ad_dir, "adapter_model.safetensors"))
    rep = tp // kvh if tp > kvh else 1
    bad = 0
    for t in range(tp):
        got = load(os.path.join(set_dir, f"tp{t:02d}_pp00", "adapter_model.safetensors"))
        qs, ks = heads * hd // tp, max(kvh // tp, 1) * hd
        qid, kid = t, t // rep

        def qkv(B, part):
            if part == "q":
                return B[qid * qs:(qid + 1) * qs]
            return B[kid * ks:(kid + 1) * ks]

        def rows(B):
            n = B.shape[0] // tp
            return B[t * n:(t + 1) * n]

        want = {}
        for k, v in ad.items():
            mod = k.rsplit(".lora_", 1)[0] if ".lora_" in k else k
            leaf = mod.rsplit(".", 1)[-1]
            is_a = k.endswith(".lora_A.weight")
            if leaf in ("q_proj", "k_proj", "v_proj"):
                want[k] = v if is_a else qkv(v, "q" if leaf == "q_proj" else "kv")
            elif leaf == "qkv_proj":
                if is_a:
                    want[k] = v
                else:
                    q, kv = heads * hd, kvh * hd
                    want[k] = torch.cat([qkv(v[:q], "q"), qkv(v[q:q + kv], "kv"), qkv(v[q + kv:], "kv")])
            elif leaf == "gate_up_proj":
                h = v.shape[0] // 2
                want[k] = v if is_a else torch.cat([rows(v[:h]), rows(v[h:])])
            elif leaf in ("gate_proj", "up_proj"):
                want[k] = v if is_a else rows(v)
            elif leaf in ("o_proj", "down_proj"):
                n = v.shape[1] // tp if is_a else 0
                want[k] = v[:, t * n:(t + 1) * n] if is_a else v
            elif k.endswith("lm_head.weight"):
                want[k] = rows(v)
            else:
                print(f"rank {t}: no vLLM rule in this check for '{k}'")
                bad += 1
        if set(want) != set(got):
            print(f"rank {t}: keys differ: {sorted(set(want) ^ set(got))}")
            bad += 1
            continue
        for k in want:
            w, g = want[k].contiguous(), got[k]
            if w.shape != g.shape or w.dtype != g.dtype or not torch.equal(w.view(torch.uint8) if w.numel() else w,
                                                                         g.view(torch.uint8) if g.numel() else g):
                print(f"rank {t}: '{k}': want {tuple(w.shape)}, got {tuple(g.shape)} or other bytes")
                bad += 1
    print(f"{'ok' if not bad else 'not ok'}: {tp} ranks of {ad_dir} checked against vLLM's slicing")
    return bad


if __name__ == "__main__":
    a = sys.argv[1:]
    sys.exit(1 if sum(check(a[i], a[i + 1], *map(int, a[i + 2:i + 6])) for i in range(0, len(a), 6)) else 0)
