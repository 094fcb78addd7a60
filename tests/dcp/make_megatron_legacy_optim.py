"""A legacy Megatron save with the distributed optimizer's state in
distrib_optim.pt beside each rank's model_optim_rng.pt, as Megatron writes it
(a re-implementation: Megatron is not packaged in Debian; Megatron-LM d98e8a6
= d98e8a64ddf34856e74b24714e3bedb2f5a39553).

    /usr/bin/python3 make_megatron_legacy_optim.py OUTDIR [legacy|tp2pp2|tied...]   (torch 1.13 or later)
    /usr/bin/python3 make_megatron_legacy_optim.py --hostile SET OUTDIR   (variants: hostile())
    /usr/bin/python3 make_megatron_legacy_optim.py --vpp OUTDIR   (the 4-layer sets: main_vpp())
    /usr/bin/python3 make_megatron_legacy_optim.py --hostile-vpp VPPSET OUTDIR   (hostile_vpp())

Writes two saves of the tiny GPT of make_megatron_optim.py (2 layers, hidden
8, 2 heads in 2 query groups of kv_channels 4, SwiGLU fc1, vocab 40, untied
output layer), each at dp 4 with --overlap-grad-reduce and --ddp-bucket-size
300 so that every buffer has several buckets; values tagged as there
(parameter k, element i of the TP-merged tensor: exp_avg k*1024 + i + 0.25,
exp_avg_sq + 0.5, master + 0.75; the model weights the masters in bf16):

- OUTDIR/megatron_optim_legacy/: tp 1 x pp 1, iter_0000007/mp_rank_00/;
- OUTDIR/megatron_optim_legacy_tp2pp2/: tp 2 x pp 2, iter_0000007/
  mp_rank_TT_PPP/ (training/checkpointing.py:267-270: mp_rank_{tp:02d}, with
  _{pp:03d} when pp > 1), each rank its own slices: column-parallel weights
  and biases (linear_qkv, whose rows are per query group, so rank r holds
  group r; the embedding and output layer's vocab rows) split on dim 0,
  row-parallel (linear_proj, linear_fc2) on dim 1, the SwiGLU fc1 as
  [gate_r; up_r], layer norms whole on every rank; stage 0 the embedding and
  layer 0, stage 1 layer 1 (numbered 0 in its state dict: the block's local
  module list) with the final norm and output layer;
- OUTDIR/megatron_optim_legacy_tied/: the same at tp 2 x pp 2 with the
  output layer tied to the word embeddings (its copy on the last stage holds
  the embeddings' values), each in a bucket of its own: a last stage whose
  output-layer slice (20 x 8 = 160 elements) is not a multiple of 64, so the
  parameters after it lie where only that rule puts them.

With --vpp, the same GPT with 4 layers (the layers tagged as make_megatron_
optim.py tags them with MEGATRON_OPTIM_LAYERS=4):

- OUTDIR/megatron_optim_legacy_l4/: tp 1 x pp 1;
- OUTDIR/megatron_optim_legacy_vpp/: tp 1 x pp 2 with 2 virtual pipeline
  stages (--num-layers-per-virtual-pipeline-stage 1): each rank file holds
  model0 and model1 (training/checkpointing.py generate_state_dict), chunk v
  of stage p layer 2v + p (transformer_layer.py get_transformer_layer_offset),
  numbered 0 in its state dict; distrib_optim.pt one buffer per chunk, gbuf v
  (distrib_optimizer.py:714-726, the chunks' buffers chained).

Only the first model chunk of the first stage is bucketed (training.py:
2504-2514, distributed_data_parallel.py:164-171: no bucketing past the first
pipeline stage or model chunk).

Each rank file:
- model_optim_rng.pt: {"args", "model" (the per-layer state dict of the
  rank's modules, TE's _extra_state entries as None), "optimizer":
  DistributedOptimizer.state_dict() (distrib_optimizer.py:825-885: the param
  groups without params, each with step), "iteration"} (training/
  checkpointing.py generate_state_dict).
- distrib_optim.pt: get_parameter_state_dp_zero() (:1262-1411) of the rank's
  DP group, as DP rank 0 saves it (save_parameter_state :1413-1422): per
  buffer, the buckets' world tensors with their end padding stripped, back
  to back, and numel_unpadded; the buffer layout is
  _compute_per_buffer_param_layout (:506-589) over the rank's own parameters
  with param_layout.py's 64-element starts and lcm(dp, 128) bucket ends (the
  end padding is stripped, so only the bucket boundaries matter).
"""
import argparse
import math
import os
import sys

if "--vpp" in sys.argv:  # the virtual-pipeline set is of the same GPT with 4 layers (before the import)
    os.environ["MEGATRON_OPTIM_LAYERS"] = "4"

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_megatron_optim import GROUPS, H, HEADS, I, L, PARAMS, STEP, V, groups, tagged  # noqa: E402

DP, BUCKET = 4, 300
# at bench scale (bench/mcore_optim_bench.sh), with make_megatron_optim.py's
# size variables: its MEGATRON_OPTIM_DP and MEGATRON_OPTIM_BUCKET
DP = int(os.environ.get("MEGATRON_OPTIM_DP", DP))
BUCKET = int(os.environ.get("MEGATRON_OPTIM_BUCKET", BUCKET))


def pad_to(x, d):
    return (x + d - 1) // d * d


SHARED = ("embedding.word_embeddings.weight", "output_layer.weight")


def buckets(params, shared=False, bucket=BUCKET):
    """[(bucket size, [(index in params, start in bucket)])] by the layout
    rules over params [(name, k, local tensor)]; bucket None: one bucket
    (DDP turns bucketing off past the first pipeline stage and the first
    model chunk: training.py:2504-2514, distributed_data_parallel.py:
    164-171); with shared (tied embeddings at pp > 1: language_module.py:
    263-290 marks the first stage's word embeddings and the last stage's
    output-layer copy shared_embedding) those in a bucket of their own
    (:530-531, 555-562)."""
    out, cur, start, bstart = [], [], 0, 0
    for j in reversed(range(len(params))):
        start = pad_to(start, 64)  # pad_param_start
        numel = params[j][2].numel()
        own = shared and params[j][0] in SHARED
        if own and cur:  # :555-562: the bucket before it closed
            out.append((start - bstart, cur))
            cur, start = [], pad_to(start, math.lcm(DP, 128))
            bstart = start
        cur.append((j, start - bstart))
        end = start + numel
        if (bucket is not None and end - bstart >= bucket) or own:  # :566-577
            out.append((end - bstart, cur))
            cur, start = [], pad_to(end, math.lcm(DP, 128))  # pad_bucket_end
            bstart = start
        else:
            start = end
    if cur:
        out.append((end - bstart, cur))
    return out


def local(t, split, tp, r):
    """TP rank r's slice of the merged tensor t (tensor_parallel layers.py:
    ColumnParallelLinear / VocabParallelEmbedding dim 0, RowParallelLinear
    dim 1; mlp.py: fc1 holds [gate_r; up_r])."""
    if split is None or tp == 1:
        return t
    if split == "rows":
        n = t.shape[0] // tp
        return t[r * n:(r + 1) * n]
    if split == "cols":
        n = t.shape[1] // tp
        return t[:, r * n:(r + 1) * n]
    n = I // tp  # swiglu
    return torch.cat([t[r * n:(r + 1) * n], t[I + r * n:I + (r + 1) * n]])


def stage_params(pp, p, tied=False, vpp=1, v=0):
    """Model chunk v of stage p: its parameters [(name in its state dict,
    k)]: layers split evenly, chunk v of stage p holding those from
    v L / VPP + p L / (PP VPP) (transformer_layer.py:65-215,
    get_transformer_layer_offset's even branch), numbered locally; the
    embedding in chunk 0 of stage 0, the final norm and output layer in the
    last chunk of the last stage; tied, the output layer holds the word
    embeddings' values (parameter 0: the copy Megatron keeps in step)."""
    layers = sorted({l for _, _, l, _, _ in PARAMS if l is not None})
    per = len(layers) // (pp * vpp)
    first = v * len(layers) // vpp + p * per
    out = []
    for k, (name, key, l, shape, split) in enumerate(PARAMS):
        if l is None:
            if (name.startswith("embedding.") and p == 0 and v == 0) or \
                    (not name.startswith("embedding.") and p == pp - 1 and v == vpp - 1):
                out.append((name, 0 if tied and name == "output_layer.weight" else k))
        elif first <= l < first + per:
            out.append((name.replace("decoder.layers.%d." % l, "decoder.layers.%d." % (l - first), 1), k))
    return out


def chunk(tp, pp, t, p, tied, vpp, v):
    """Model chunk v of rank (t, p): its state dict and its buffer's world
    tensors (get_parameter_state_dp_zero's per-buffer dict)."""
    model, params = {}, []
    for name, k in stage_params(pp, p, tied, vpp, v):
        split, shape = PARAMS[k][4], PARAMS[k][3]
        w = local(tagged(k, shape, 0.75), split, tp, t).to(torch.bfloat16).clone()
        model[name] = w
        params.append((name, k, w))
        if name.endswith("linear_qkv.weight") or name.endswith("linear_fc1.weight"):
            model[name.rsplit(".", 1)[0] + "._extra_state"] = None  # TE's FP8 metadata
    world, bs = {}, buckets(params, tied and pp > 1, BUCKET if p == 0 and v == 0 else None)
    for key, add in (("param", 0.75), ("exp_avg", 0.25), ("exp_avg_sq", 0.5)):
        parts = []
        for size, ps in bs:
            b = torch.zeros(size)
            for j, at in ps:
                name, k, w = params[j]
                x = local(tagged(k, PARAMS[k][3], add), PARAMS[k][4], tp, t).reshape(-1)
                b[at:at + x.numel()] = x
            parts.append(b)
        world[key] = torch.cat(parts)
    world["numel_unpadded"] = world["param"].numel()
    return model, world, len(bs)


def write_rank(rank, tp, pp, t, p, tied=False, vpp=1):
    """One rank file and its distrib_optim.pt; with virtual pipeline stages
    (vpp > 1) its model chunks as model0, model1, ... (checkpointing.py
    generate_state_dict) and one buffer each, gbuf v for chunk v (the
    optimizer chains the chunks' buffers, distrib_optimizer.py:714-726)."""
    os.makedirs(rank, exist_ok=True)
    layers = len({l for _, _, l, _, _ in PARAMS if l is not None})
    args = argparse.Namespace(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, data_parallel_size=DP,
                              virtual_pipeline_model_parallel_size=vpp if vpp > 1 else None,
                              context_parallel_size=1, use_distributed_optimizer=True, overlap_grad_reduce=True,
                              ddp_bucket_size=BUCKET, untie_embeddings_and_output_weights=not tied, num_experts=None,
                              num_layers=layers, hidden_size=H, num_attention_heads=HEADS, num_query_groups=GROUPS,
                              group_query_attention=True, kv_channels=H // HEADS, ffn_hidden_size=I, swiglu=True,
                              padded_vocab_size=V, bf16=True)
    gs = groups()
    for g in gs:
        g.pop("params", None)
    sd = {"args": args, "checkpoint_version": 3.0, "iteration": STEP}
    distrib, nbs = {"buckets_coalesced": True}, []
    for v in range(vpp):
        model, world, nb = chunk(tp, pp, t, p, tied, vpp, v)
        sd["model%d" % v if vpp > 1 else "model"] = model
        distrib[v] = {(torch.bfloat16, torch.float32): world}
        nbs.append((nb, world["param"].numel()))
    sd["optimizer"] = {"optimizer": {"param_groups": gs}}
    torch.save(sd, os.path.join(rank, "model_optim_rng.pt"))
    torch.save(distrib, os.path.join(rank, "distrib_optim.pt"))
    return nbs


def save(out, name, tp, pp, tied=False, vpp=1):
    save_dir = os.path.join(out, name)
    for p in range(pp):
        for t in range(tp):
            folder = "mp_rank_%02d" % t if pp == 1 else "mp_rank_%02d_%03d" % (t, p)
            nbs = write_rank(os.path.join(save_dir, "iter_0000007", folder), tp, pp, t, p, tied, vpp)
            print("wrote", folder, "(buckets, elements) per model chunk:", nbs)
    with open(os.path.join(save_dir, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(STEP))


def main_vpp(out):
    """The 4-layer GPT at tp 1 x pp 1 and at tp 1 x pp 2 x vpp 2."""
    save(out, "megatron_optim_legacy_l4", 1, 1)
    save(out, "megatron_optim_legacy_vpp", 1, 2, vpp=2)


def main(out, which):
    if "legacy" in which:
        save(out, "megatron_optim_legacy", 1, 1)
    if "tp2pp2" in which:
        save(out, "megatron_optim_legacy_tp2pp2", 2, 2)
    if "tied" in which:
        save(out, "megatron_optim_legacy_tied", 2, 2, tied=True)


def hostile(src, out, rank="mp_rank_01_001"):
    """Copies of the set src in out/NAME, one rank (tp 1, pp 1) changed:
    nodistrib (its distrib_optim.pt missing), total (its buffer 64 elements
    longer, numel_unpadded with it), swap (its model's two layer norms of
    layer 0 in each other's place in the state dict, so the buffer layout
    puts each on the other's range), replica (rank tp 1, pp 0: every exp_avg
    value 1 higher, so its layer norms' moments differ from tp rank 0's)."""
    import shutil
    for name in ("nodistrib", "total", "swap", "replica"):
        dst = os.path.join(out, name)
        shutil.copytree(src, dst)
        r = os.path.join(dst, "iter_0000007", rank if name != "replica" else "mp_rank_01_000")
        if name == "replica":
            f = os.path.join(r, "distrib_optim.pt")
            d = torch.load(f)
            next(iter(d[0].values()))["exp_avg"] += 1
            torch.save(d, f)
        elif name == "nodistrib":
            os.remove(os.path.join(r, "distrib_optim.pt"))
        elif name == "total":
            f = os.path.join(r, "distrib_optim.pt")
            d = torch.load(f)
            w = next(iter(d[0].values()))
            for k in ("param", "exp_avg", "exp_avg_sq"):
                w[k] = torch.cat([w[k], torch.zeros(64)])
            w["numel_unpadded"] += 64
            torch.save(d, f)
        else:
            f = os.path.join(r, "model_optim_rng.pt")
            d = torch.load(f)
            a = "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight"
            b = "decoder.layers.0.mlp.linear_fc1.layer_norm_weight"
            keys = list(d["model"])
            i, j = keys.index(a), keys.index(b)
            keys[i], keys[j] = keys[j], keys[i]
            d["model"] = {k: d["model"][k] for k in keys}
            torch.save(d, f)


def hostile_vpp(src, out):
    """Copies of the virtual-pipeline set src in out/NAME: vswap (stage 1's
    model chunk 1, layer 3, its two layer norms in each other's place in the
    state dict, so the buffer layout puts each on the other's range), vchunk
    (stage 0's model1 gone), vuneven (stage 1's args with
    decoder_first_pipeline_num_layers 1)."""
    import shutil
    for name in ("vswap", "vchunk", "vuneven"):
        dst = os.path.join(out, name)
        shutil.copytree(src, dst)
        ranks = ["mp_rank_00_000"] if name == "vchunk" else ["mp_rank_00_001"]
        for rank in ranks:
            f = os.path.join(dst, "iter_0000007", rank, "model_optim_rng.pt")
            d = torch.load(f)
            if name == "vswap":
                a = "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight"
                b = "decoder.layers.0.mlp.linear_fc1.layer_norm_weight"
                keys = list(d["model1"])
                i, j = keys.index(a), keys.index(b)
                keys[i], keys[j] = keys[j], keys[i]
                d["model1"] = {k: d["model1"][k] for k in keys}
            elif name == "vchunk":
                del d["model1"]
            else:
                d["args"].decoder_first_pipeline_num_layers = 1
            torch.save(d, f)


if __name__ == "__main__":
    if sys.argv[1] == "--hostile":
        hostile(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "--vpp":
        main_vpp(sys.argv[2])
    elif sys.argv[1] == "--hostile-vpp":
        hostile_vpp(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1], sys.argv[2:] or ["legacy", "tp2pp2", "tied"])
