"""A legacy Megatron save (tp 1 x pp 1) with the distributed optimizer's
state in distrib_optim.pt, as Megatron writes it (a re-implementation: Megatron
is not packaged in Debian; Megatron-LM d98e8a6 =
d98e8a64ddf34856e74b24714e3bedb2f5a39553).

    /usr/bin/python3 make_megatron_legacy_optim.py OUTDIR     (torch 1.13 or later)

Writes OUTDIR/megatron_optim_legacy/ (latest_checkpointed_iteration.txt,
iter_0000007/mp_rank_00/model_optim_rng.pt and distrib_optim.pt) of the tiny
GPT of make_megatron_optim.py at tp 1 (its PARAMS, TP merged), dp 4,
--overlap-grad-reduce with --ddp-bucket-size 300 so that the buffer has
several buckets; values tagged as there (parameter k, element i: exp_avg
k*1024 + i + 0.25, exp_avg_sq + 0.5, master + 0.75).

- model_optim_rng.pt: {"args", "model" (the per-layer state dict, TE's
  _extra_state entries as None), "optimizer": DistributedOptimizer.state_dict()
  (distrib_optimizer.py:825-885: the param groups without params, each with
  step), "iteration"} (training/checkpointing.py generate_state_dict).
- distrib_optim.pt: get_parameter_state_dp_zero() (:1262-1411): per buffer, the
  buckets' world tensors with their end padding stripped, back to back, and
  numel_unpadded; the buffer layout is _compute_per_buffer_param_layout
  (:506-589) with param_layout.py's 64-element starts and lcm(dp, 128) bucket
  ends (the end padding is stripped, so only the bucket boundaries matter).
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_megatron_optim import PARAMS, STEP, groups, tagged  # noqa: E402

DP, BUCKET = 4, 300


def pad_to(x, d):
    return (x + d - 1) // d * d


def buckets():
    """[(bucket, [(param index, start in bucket)])] by the layout rules (no
    shared embedding: the output layer is untied)."""
    out, cur, start, bstart = [], [], 0, 0
    for j in reversed(range(len(PARAMS))):
        start = pad_to(start, 64)  # pad_param_start
        numel = math.prod(PARAMS[j][3])
        cur.append((j, start - bstart))
        end = start + numel
        if end - bstart >= BUCKET:  # :566-577
            out.append((end - bstart, cur))
            cur, start = [], pad_to(end, math.lcm(DP, 128))  # pad_bucket_end
            bstart = start
        else:
            start = end
    if cur:
        out.append((end - bstart, cur))
    return out


def main(out):
    save = os.path.join(out, "megatron_optim_legacy")
    rank = os.path.join(save, "iter_0000007", "mp_rank_00")
    os.makedirs(rank, exist_ok=True)
    model = {}
    for k, (name, _, _, shape, _) in enumerate(PARAMS):
        model[name] = tagged(k, shape, 0.75).to(torch.bfloat16)
        if name.endswith("linear_qkv.weight") or name.endswith("linear_fc1.weight"):
            model[name.rsplit(".", 1)[0] + "._extra_state"] = None  # TE's FP8 metadata
    args = argparse.Namespace(tensor_model_parallel_size=1, pipeline_model_parallel_size=1, data_parallel_size=DP,
                              context_parallel_size=1, use_distributed_optimizer=True, overlap_grad_reduce=True,
                              ddp_bucket_size=BUCKET, untie_embeddings_and_output_weights=True, num_experts=None,
                              num_layers=2, hidden_size=8, bf16=True)
    gs = groups()
    for g in gs:
        g.pop("params", None)
    torch.save({"args": args, "checkpoint_version": 3.0, "iteration": STEP, "model": model,
                "optimizer": {"optimizer": {"param_groups": gs}}}, os.path.join(rank, "model_optim_rng.pt"))
    world = {}
    for key, add in (("param", 0.75), ("exp_avg", 0.25), ("exp_avg_sq", 0.5)):
        parts = []
        for size, ps in buckets():
            b = torch.zeros(size)
            for j, at in ps:
                n = math.prod(PARAMS[j][3])
                b[at:at + n] = tagged(j, PARAMS[j][3], add).reshape(-1)
            parts.append(b)
        world[key] = torch.cat(parts)
    world["numel_unpadded"] = world["param"].numel()
    torch.save({"buckets_coalesced": True, 0: {(torch.bfloat16, torch.float32): world}},
               os.path.join(rank, "distrib_optim.pt"))
    with open(os.path.join(save, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(STEP))
    print("wrote", save, len(buckets()), "buckets", world["param"].numel(), "elements")


if __name__ == "__main__":
    main(sys.argv[1])
