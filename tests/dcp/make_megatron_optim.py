"""Megatron-Core torch_dist saves with the distributed optimizer's state, as
Megatron writes them, by real torch DCP (Megatron is not packaged in Debian):
a small re-implementation of the writer, each rule cited to Megatron-LM
(d98e8a6 = d98e8a64ddf34856e74b24714e3bedb2f5a39553; 5ab481c^ = the parent
of 5ab481cb45, the last tree with the flattened form).

    python3 make_megatron_optim.py OUTDIR [reshard|fsms|dpr|dpz|vpp|vppz|vppuz|moe|moez|moeb|mtp|dsv3|dsv3z...]   (torch >= 2.4: the forky chroot)

Writes OUTDIR/megatron_optim_reshard/ (param_state_sharding_type
'fully_reshardable') and OUTDIR/megatron_optim_fsms/ ('fully_sharded_model_space',
flattened) and OUTDIR/megatron_optim_dpr/ ('dp_reshardable', the buckets
themselves, at tp 2 x dp 2 x pp 2: below), each a save folder (latest_checkpointed_iteration.txt,
iter_0000007/ with .metadata, one __R_0.distcp per rank, common.pt,
metadata.json) of the same tiny GPT (2 layers, hidden 8; the first two at
tp 2, dp 4: eight gloo processes; dp 4 so that, with Megatron's 64-element alignment, two
parameters' ranges cross DP ranks, one of them the SwiGLU fc1 whose range
is also cut at its gate/up halves).

Every optimizer value names its parameter and element: for the parameter
with id k in PARAMS (an id; Megatron's named_parameters order, which only
the dp_reshardable buffers depend on, is LAYER_ORDER below) element i
(C order, TP merged) holds exp_avg k*1024 + i + 0.25, exp_avg_sq + 0.5 and the
fp32 master + 0.75; the model weights are the masters in bf16. The common
state holds two param groups as Megatron's standard override splits them
(megatron/core/optimizer/__init__.py:94-128, d98e8a6: wd_mult 0 for 1-D
parameters and biases), each with step 7 (distrib_optimizer.py:866-878).
"""
import argparse
import math
import os
import sys

import torch

L, H, QKV, PROJ_IN, I, V, TP, DP = 2, 8, 24, 8, 16, 40, 2, 4
HEADS, GROUPS = 2, 2
# the virtual-pipeline save (OUTDIR vpp) is of the same GPT with 4 layers at
# tp 1; these set L and TP for it and for megatron_optim_check.py
L = int(os.environ.get("MEGATRON_OPTIM_LAYERS", L))
TP = int(os.environ.get("MEGATRON_OPTIM_TP", TP))
# bench/mcore_optim_bench.sh writes the same GPT at bench scale with these
# (unset, the fixtures' sizes above): hidden, SwiGLU ffn, padded vocab,
# attention heads and query groups (linear_qkv has H + 2 H GROUPS / HEADS
# rows, Megatron's GQA layout; linear_proj takes H), the data-parallel size
# of every form (DP here, DPR_DP below), the dp_reshardable pipeline size
# and --ddp-bucket-size (DPR_PP, DPR_BUCKET below)
H = int(os.environ.get("MEGATRON_OPTIM_HIDDEN", H))
I = int(os.environ.get("MEGATRON_OPTIM_FFN", I))
V = int(os.environ.get("MEGATRON_OPTIM_VOCAB", V))
HEADS = int(os.environ.get("MEGATRON_OPTIM_HEADS", HEADS))
GROUPS = int(os.environ.get("MEGATRON_OPTIM_GROUPS", GROUPS))
QKV, PROJ_IN = H + 2 * H // HEADS * GROUPS, H
DP = int(os.environ.get("MEGATRON_OPTIM_DP", DP))
STEP = 7

# stacked key -> (per-layer shape, TP split: ('rows'|'cols'|'swiglu'|None))
# (transformer_layer / mlp / TE linear sharded_state_dict: column-parallel
# weights and biases split dim 0, row-parallel dim 1, SwiGLU fc1 as
# [gate; up] with each rank's halves two fragments, mlp.py:264-360 at 5ab481c^)
KEYS = [
    ("embedding.word_embeddings.weight", (V, H), "rows", False),
    ("decoder.layers.self_attention.linear_qkv.layer_norm_weight", (H,), None, True),
    ("decoder.layers.self_attention.linear_qkv.weight", (QKV, H), "rows", True),
    ("decoder.layers.self_attention.linear_qkv.bias", (QKV,), "rows", True),
    ("decoder.layers.self_attention.linear_proj.weight", (H, PROJ_IN), "cols", True),
    ("decoder.layers.mlp.linear_fc1.layer_norm_weight", (H,), None, True),
    ("decoder.layers.mlp.linear_fc1.weight", (2 * I, H), "swiglu", True),
    ("decoder.layers.mlp.linear_fc2.weight", (H, I), "cols", True),
    ("decoder.final_layernorm.weight", (H,), None, False),
    ("output_layer.weight", (V, H), "rows", False),
]


# multi-token prediction (OUTDIR mtp, MEGATRON_OPTIM_MTP=1): mtp_num_layers 1,
# its layer after the decoder's final norm and before the output layer
# (GPTModel registers embedding, decoder, mtp, output_layer, gpt_model.py
# :174-277 at d98e8a6); a MultiTokenPredictionLayer registers enorm, hnorm,
# eh_proj (column-parallel, [h, 2h]), its transformer layer, final_layernorm
# (multi_token_prediction.py:1157-1247), each key its layer's own, unstacked
# ('mtp.layers.0.', :2142-2168), the transformer layer's saved as
# 'transformer_layer.' (:1740-1766)
MTP = int(os.environ.get("MEGATRON_OPTIM_MTP", 0))
MTP_KEYS = [("enorm.weight", (H,), None), ("hnorm.weight", (H,), None), ("eh_proj.weight", (H, 2 * H), "rows")]
MTP_TAIL = [("final_layernorm.weight", (H,), None)]


def mtp_params():
    """The MTP layers' parameters in named_parameters order: (name, key, None, shape, split)."""
    out = []
    for m in range(MTP):
        pre = "mtp.layers.%d." % m
        tl = [(pre + "transformer_layer." + k[len("decoder.layers."):], s, sp) for k, s, sp, st in KEYS if st]
        order = {k: i for i, k in enumerate(LAYER_ORDER_MTP)}
        tl.sort(key=lambda t: order[t[0][len(pre + "transformer_layer."):]])
        out += [(pre + k, pre + k, None, s, sp) for k, s, sp in MTP_KEYS]
        out += [(k, k, None, s, sp) for k, s, sp in tl]
        out += [(pre + k, pre + k, None, s, sp) for k, s, sp in MTP_TAIL]
    return out


LAYER_ORDER_MTP = [  # LAYER_ORDER below, without its prefix
    "self_attention.linear_proj.weight", "self_attention.linear_qkv.layer_norm_weight",
    "self_attention.linear_qkv.weight", "self_attention.linear_qkv.bias", "mlp.linear_fc1.layer_norm_weight",
    "mlp.linear_fc1.weight", "mlp.linear_fc2.weight",
]


def per_layer(key, l):
    return key.replace("decoder.layers.", "decoder.layers.%d." % l, 1)


def params():
    """Per-layer parameters in named_parameters order (embedding, layer 0's,
    layer 1's, final norm, output layer): (name, key, layer, shape, split)."""
    out = [(k, k, None, s, sp) for k, s, sp, st in KEYS[:1]]
    for l in range(L):
        out += [(per_layer(k, l), k, l, s, sp) for k, s, sp, st in KEYS if st]
    out += [(k, k, None, s, sp) for k, s, sp, st in KEYS[-2:-1]]
    out += mtp_params()
    out += [(k, k, None, s, sp) for k, s, sp, st in KEYS[-1:]]
    return out


PARAMS = params()


def tagged(k, shape, add):
    n = math.prod(shape)
    return (torch.arange(n, dtype=torch.float64) + k * 1024 + add).to(torch.float32).reshape(shape)


def no_wd(name, shape):
    return len(shape) == 1 or name.endswith(".bias")


def local(t, split, r):
    """TP rank r's local shard of a per-layer tensor t, and its fragments:
    [(offsets in the per-layer tensor, data)]; a replicated tensor: rank 0's."""
    if split is None:
        return [((0,) * t.dim(), t)] if r == 0 else []
    if split == "rows":
        n = t.shape[0] // TP
        return [((r * n,) + (0,) * (t.dim() - 1), t[r * n:(r + 1) * n])]
    if split == "cols":
        n = t.shape[1] // TP
        return [((0, r * n), t[:, r * n:(r + 1) * n])]
    n = I // TP  # swiglu
    return [((r * n, 0), t[r * n:(r + 1) * n]), ((I + r * n, 0), t[I + r * n:I + (r + 1) * n])]


# ---- the distributed optimizer's buffer (which DP rank holds which range) ----

def pad_to(x, d):
    return (x + d - 1) // d * d


def dp_ranges(tp_rank):
    """For each parameter, TP rank tp_rank's local flat range [s, e) on each
    DP rank: the buffer lays params out in reverse order (distrib_optimizer.py
    :506-589, d98e8a6, bucket_size None: one bucket), each start aligned to 64
    elements (param_layout.py pad_param_start), the bucket end padded to a
    multiple of lcm(dp, 128) (pad_bucket_end); DP rank r owns
    [r * size / dp, (r + 1) * size / dp) (:200-257) and a parameter's
    piece there is its 'param' range (:134-197)."""
    start, index = 0, {}
    for name, key, l, shape, split in reversed(PARAMS):
        start = pad_to(start, 64)
        numel = math.prod(shape) if split is None else math.prod(shape) // TP
        index[name] = (start, start + numel)
        start += numel
    size = pad_to(start, math.lcm(DP, 128))
    per = size // DP
    out = {}
    for name, (ps, pe) in index.items():
        out[name] = []
        for r in range(DP):
            lo, hi = max(ps, r * per), min(pe, (r + 1) * per)
            if hi > lo:
                out[name].append((r, lo - ps, hi - ps))
    return out


# ---- ShardedTensors as torch_dist saves them ----

def sharded_tensor(global_shape, shards_all, mine, dtype):
    """A torch ShardedTensor of global_shape: shards_all lists every rank's
    (rank, offsets, sizes), mine this rank's (offsets, tensor)
    (strategies/torch.py sharded_tensor_to_torch_sharded_tensor)."""
    from torch.distributed._shard.sharded_tensor import Shard, ShardedTensor, ShardedTensorMetadata
    from torch.distributed._shard.sharded_tensor.metadata import TensorProperties
    from torch.distributed._shard.metadata import ShardMetadata
    rank = torch.distributed.get_rank()
    local = [Shard(tensor=t.contiguous().clone(), metadata=ShardMetadata(list(o), list(t.shape), "rank:%d/cpu" % rank))
             for o, t in mine]
    md = [ShardMetadata(list(o), list(s), "rank:%d/cpu" % r) for r, o, s in shards_all]
    gmd = ShardedTensorMetadata(shards_metadata=md, size=torch.Size(global_shape),
                                tensor_properties=TensorProperties(dtype=dtype, requires_grad=False))
    return ShardedTensor._init_from_local_shards_and_global_metadata(local, gmd)


def rank_of(tp, dp):
    return dp * TP + tp


def model_space(key, value_of, dtype, rank):
    """key's global tensor (layers stacked on a prepended axis,
    transformer_block.py sharded_pp_offset) as the model saves it: TP
    fragments, DP replica 0 only (the model's replica_id, which
    fully_reshardable keeps, distrib_optimizer.py:1793-1794)."""
    ps = [p for p in PARAMS if p[1] == key]
    stacked = ps[0][2] is not None
    gshape = ((L,) if stacked else ()) + ps[0][3]
    all_, mine = [], []
    for name, _, l, shape, split in ps:
        t = value_of(name, shape).to(dtype)
        for tp in range(TP):
            for off, frag in local(t, split, tp):
                o = ((l,) if stacked else ()) + off
                d = frag.unsqueeze(0) if stacked else frag
                all_.append((rank_of(tp, 0), o, tuple(d.shape)))
                if rank == rank_of(tp, 0):
                    mine.append((o, d))
    return sharded_tensor(gshape, all_, mine, dtype)


def flattened(key, value_of, rank):
    """key's optimizer state in fully_sharded_model_space as torch_dist saved
    it (5ab481c^: distrib_optimizer.py sharded_param_state_fs_model_space,
    each DP rank its flattened_range of the TP-local shard; strategies/
    torch.py type 3 and resharding.py: global shape axis_fragmentations +
    (prod(local_shape),), a chunk at local_chunk_offset_in_global() +
    (flattened_range.start,)). TP replicas (replica_id's TP coordinate) are
    saved by TP rank 0; every DP rank saves its own range."""
    ps = [p for p in PARAMS if p[1] == key]
    stacked = ps[0][2] is not None
    shape, split = ps[0][3], ps[0][4]
    frag = [1] * len(shape)
    if split in ("rows", "swiglu"):
        frag[0] = TP * (2 if split == "swiglu" else 1)
    elif split == "cols":
        frag[1] = TP
    loc = [s // f for s, f in zip(shape, frag)]
    n = math.prod(loc)
    gshape = ((L,) if stacked else ()) + tuple(frag) + (n,)
    all_, mine = [], []
    for tp in range(TP if split else 1):
        ranges = dp_ranges(tp)
        for name, _, l, shp, _ in ps:
            t = value_of(name, shp)
            tl = torch.cat([f.reshape(-1) for _, f in local(t, split, tp)])  # the TP-local shard, flat
            for dp, s, e in ranges[name]:
                pieces = []
                if split == "swiglu":  # mlp.py:322-360 at 5ab481c^: the range cut at the halves
                    if s < n:
                        pieces.append(((tp, 0), s, min(e, n), 0))
                    if e > n:
                        pieces.append(((tp + TP, 0), max(s, n) - n, e - n, n))
                else:
                    fo = [0] * len(shape)
                    if split == "rows":
                        fo[0] = tp
                    elif split == "cols":
                        fo[1] = tp
                    pieces.append((tuple(fo), s, e, 0))
                for fo, a, b, base in pieces:
                    o = ((l,) if stacked else ()) + fo + (a,)
                    sz = (1,) * (len(o) - 1) + (b - a,)
                    all_.append((rank_of(tp, dp), o, sz))
                    if rank == rank_of(tp, dp):
                        mine.append((o, tl[base + a:base + b].reshape(sz)))
    return sharded_tensor(gshape, all_, mine, torch.float32)


def pid(name):
    return [p[0] for p in PARAMS].index(name)


def worker(rank, world, iterdir, port, kind):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    val = lambda add: (lambda name, shape: tagged(pid(name), shape, add))
    sd = {}
    for key, *_ in KEYS:
        sd[key] = model_space(key, val(0.75), torch.bfloat16, rank)
        if kind == "fully_reshardable":  # distrib_optimizer.py:1823-1832 (d98e8a6)
            for sk, add in (("param", 0.75), ("exp_avg", 0.25), ("exp_avg_sq", 0.5)):
                sd["optimizer.state.%s.%s" % (sk, key)] = model_space(key, val(add), torch.float32, rank)
        else:  # :1669-1750 at 5ab481c^, 'param' renamed fp32_param (:1697)
            for sk, add in (("fp32_param", 0.75), ("exp_avg", 0.25), ("exp_avg_sq", 0.5)):
                sd["optimizer.state.%s.%s" % (sk, key)] = flattened(key, val(add), rank)
    dcp.save(sd, checkpoint_id=iterdir, planner=DefaultSavePlanner(flatten_state_dict=False))
    dist.barrier()
    dist.destroy_process_group()


def groups():
    base = {"lr": 1e-3, "betas": (0.9, 0.95), "eps": 1e-8, "amsgrad": False, "maximize": False, "foreach": None,
            "capturable": False, "differentiable": False, "fused": None, "is_expert_parallel": False,
            "default_config": True, "lr_mult": 1.0, "is_decoupled_lr": False, "max_lr": 1e-3, "min_lr": 1e-5,
            "step": STEP}
    return [dict(base, weight_decay=0.1, wd_mult=1.0), dict(base, weight_decay=0.0, wd_mult=0.0)]


def save(out, name, kind, port):
    import torch.multiprocessing as mp
    save_dir = os.path.join(out, name)
    iterdir = os.path.join(save_dir, "iter_0000007")
    os.makedirs(iterdir, exist_ok=True)
    mp.spawn(worker, args=(TP * DP, iterdir, port, kind), nprocs=TP * DP, join=True)
    with open(os.path.join(iterdir, "metadata.json"), "w") as f:
        f.write('{"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch", "common_backend_version": 1}')
    args = argparse.Namespace(num_layers=L, hidden_size=H, num_attention_heads=HEADS, num_query_groups=GROUPS,
                              ffn_hidden_size=I, padded_vocab_size=V, tensor_model_parallel_size=TP,
                              data_parallel_size=DP, swiglu=True, use_distributed_optimizer=True,
                              apply_wd_to_qk_layernorm=False, bf16=True)
    # common state: DistributedOptimizer.state_dict() (:825-885) and the
    # sharding type (:1581), under 'optimizer' (training/checkpointing.py)
    common = {"args": args, "checkpoint_version": 3.0, "iteration": STEP,
              "optimizer": {"optimizer": {"param_groups": groups()}, "param_state_sharding_type": kind}}
    torch.save(common, os.path.join(iterdir, "common.pt"))
    with open(os.path.join(save_dir, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(STEP))
    print("wrote", save_dir)


# ---- 'dp_reshardable', Megatron's default since 0.13: the buckets themselves ----
#
# distrib_optimizer.py at d98e8a6: sharded_param_state_dp_reshardable
# (:1838-1986) over get_parameter_state_dp_reshardable (:1227-1260), the
# buffer layout _compute_per_buffer_param_layout (:506-589) with
# param_layout.py's pad_param_start / pad_bucket_end, and sharded_state_dict
# (:1462-1582): the non-parameter state as ShardedObjects of each DP group.
# Written at tp 2 x dp 2 x pp 2 (eight gloo processes, ranks in
# parallel_state.py's default order tp-cp-ep-dp-pp: rank = tp + 2 dp + 4 pp;
# the DP group's index, optimizer/__init__.py:1086 and 1143, is the rank in
# the tp-pp group: tp + 2 pp), --overlap-grad-reduce with --ddp-bucket-size
# 200 so that stage 0 has several buckets (stage 1 has one: DDP turns
# bucketing off past the first stage, distributed_data_parallel.py:164-171).

DPR_DP, DPR_PP, DPR_BUCKET = 2, 2, 200
DPR_DP = int(os.environ.get("MEGATRON_OPTIM_DP", DPR_DP))
DPR_PP = int(os.environ.get("MEGATRON_OPTIM_PP", DPR_PP))  # 1 for the MTP save
# --ddp-bucket-size; the expert-bias saves (moeb) take 1000: fewer, larger buckets, a smaller fixture
DPR_BUCKET = int(os.environ.get("MEGATRON_OPTIM_BUCKET", DPR_BUCKET))
# model chunks per pipeline rank (virtual pipeline stages): 2 for OUTDIR vpp
DPR_VPP = int(os.environ.get("MEGATRON_OPTIM_VPP", 1))
DPR_DTYPE = (torch.bfloat16, torch.float32)  # (param, grad) dtype: the buffer's key

# One layer's parameters in named_parameters order, i.e. module registration
# order: TransformerLayer registers input_layernorm, self_attention, ...,
# mlp (transformer_layer.py:368-456); Attention registers core_attention and
# linear_proj (attention.py:382, 413) before SelfAttention's linear_qkv
# (:1692); TransformerEngine's LayerNormLinear registers layer_norm_weight
# (and layer_norm_bias) before weight and bias (layernorm_linear.py at
# TransformerEngine 3ec8787, __init__); MLP linear_fc1 before linear_fc2
# (mlp.py:219, 240). The model's embedding comes first and its
# final_layernorm and output_layer last (gpt_model.py, transformer_block.py).
LAYER_ORDER = [
    "decoder.layers.self_attention.linear_proj.weight",
    "decoder.layers.self_attention.linear_qkv.layer_norm_weight",
    "decoder.layers.self_attention.linear_qkv.weight",
    "decoder.layers.self_attention.linear_qkv.bias",
    "decoder.layers.mlp.linear_fc1.layer_norm_weight",
    "decoder.layers.mlp.linear_fc1.weight",
    "decoder.layers.mlp.linear_fc2.weight",
]


# uneven stages (OUTDIR vppuz): decoder_first/last_pipeline_num_layers, None unset
DPR_FIRST = int(os.environ["MEGATRON_OPTIM_FIRST"]) if os.environ.get("MEGATRON_OPTIM_FIRST") else None
DPR_LAST = int(os.environ["MEGATRON_OPTIM_LAST"]) if os.environ.get("MEGATRON_OPTIM_LAST") else None


def chunk_layers(pp, v):
    """Model chunk v of pipeline rank pp: its first layer and layer count,
    get_transformer_layer_offset (transformer_layer.py:65-215 at d98e8a6)
    and get_num_layers_to_build (transformer_block.py:76-200): evenly, chunk
    v of rank p from v L / VPP + p L / (PP VPP); with uneven stages the first
    (last) stage's F (T) layers split over its chunks, the middle stages'
    rest evenly, chunk v of rank p > 0 from v (F + M + T) / VPP + F / VPP +
    (p - [F given]) (M / VPP) / (middle stages)."""
    if DPR_FIRST is None and DPR_LAST is None:
        n = L // (DPR_PP * DPR_VPP)
        return (v * DPR_PP + pp) * n, n
    f, t = DPR_FIRST or 0, DPR_LAST or 0
    ms = DPR_PP - (DPR_FIRST is not None) - (DPR_LAST is not None)
    fv, tv, mv = f // DPR_VPP, t // DPR_VPP, (L - f - t) // DPR_VPP
    total = fv + mv + tv
    first = v * total if pp == 0 else v * total + fv + (pp - (DPR_FIRST is not None)) * (mv // ms if ms else 0)
    if pp == 0 and DPR_FIRST is not None:
        return first, fv
    if pp == DPR_PP - 1 and DPR_LAST is not None:
        return first, tv
    return first, (L - f - t) // ms // DPR_VPP


def chunk_of(name):
    """The (pipeline rank, model chunk) holding a parameter: a layer's by
    chunk_layers, the embedding chunk 0 of rank 0, the final norm and output
    layer the last chunk of the last rank."""
    if name.startswith("decoder.layers."):
        l = int(name.split(".")[2])
        return next((p, v) for p in range(DPR_PP) for v in range(DPR_VPP)
                    if chunk_layers(p, v)[0] <= l < sum(chunk_layers(p, v)))
    return (0, 0) if name.startswith("embedding.") else (DPR_PP - 1, DPR_VPP - 1)


def stage_of(name):
    return chunk_of(name)[0]


def stage_params(pp, v=0):
    """Model chunk v of pipeline rank pp: its parameters in named_parameters
    order, (name, shape, split)."""
    info = {p[0]: p for p in PARAMS}
    names = [n for n in ["embedding.word_embeddings.weight"] if chunk_of(n) == (pp, v)]
    if MTP and pp == DPR_PP - 1 and pp > 0:  # the MTP stage's own copy of the embeddings, first (gpt_model.py:173-181)
        names.append("embedding.word_embeddings.weight")
    l0, n = chunk_layers(pp, v)
    for l in range(l0, l0 + n):
        names += [per_layer(k, l) for k in LAYER_ORDER]
    last = ["decoder.final_layernorm.weight"] + [p[0] for p in mtp_params()] + ["output_layer.weight"]
    names += [n for n in last if chunk_of(n) == (pp, v)]
    return [(n, info[n][3], info[n][4]) for n in names]


def local_param(t, split, tp):
    """TP rank tp's local parameter (every rank holds a replicated one whole)."""
    return t if split is None else torch.cat([f for _, f in local(t, split, tp)])


def dpr_layout(pp, v=0):
    """Model chunk v of stage pp: its one buffer as buckets:
    [(numel_unpadded, numel, [(name, start in the bucket, local numel)])]:
    params in reverse order, starts aligned to 64, a bucket closed once it
    holds bucket_size elements or more (only in the first chunk of the first
    stage: training.py:2505-2514, distributed_data_parallel.py:164-171), its
    end padded to lcm(dp, 128) (no shared embedding: untied)."""
    # with MTP over stages both copies of the embeddings are shared_embedding,
    # each in a bucket of its own (language_module.py:258-291)
    shared = ("embedding.word_embeddings.weight",) if MTP and DPR_PP > 1 else ()
    return layout_buckets(stage_params(pp, v), DPR_BUCKET if pp == 0 and v == 0 else None, DPR_DP, shared)


def layout_buckets(params, bucket, ndp, shared=()):
    """A buffer of params [(name, shape, split)] (split None: whole on every
    rank; else 1/TP of it, an expert's whole) laid out as dpr_layout says,
    its bucket ends padded to lcm(ndp, 128); a parameter named in shared
    (the tied embeddings over several stages) in a bucket of its own
    (distrib_optimizer.py:530-577)."""
    div = math.lcm(ndp, 128)
    out, cur, start, bstart, end = [], [], 0, 0, 0
    for name, shape, split in reversed(params):
        start = pad_to(start, 64)
        if name in shared and cur:  # the bucket so far closed at this start
            out.append((start - bstart, pad_to(start, div) - bstart, cur))
            cur, start = [], pad_to(start, div)
            bstart = start
        n = math.prod(shape) // (1 if split is None or split == "expert" else TP)
        cur.append((name, start - bstart, n))
        end = start + n
        if (bucket is not None and end - bstart >= bucket) or name in shared:
            out.append((end - bstart, pad_to(end, div) - bstart, cur))
            cur, start = [], pad_to(end, div)
            bstart = start
        else:
            start = end
    if cur:
        out.append((end - bstart, pad_to(end, div) - bstart, cur))
    return out


def dpr_items(bk, dp, ndp=None):
    """DP rank dp's pieces of one bucket, as :1890-1986 cut them: [(name or
    None for padding, [a, b) in the local parameter, [s, e) in the rank's
    shard)]: the parameters' ranges, and padding wherever they leave a gap
    before the unpadded end (the intra-param padding; the end padding is
    dropped)."""
    unpadded, numel, params = bk
    per = numel // (ndp or DPR_DP)
    lo, hi = dp * per, (dp + 1) * per
    items = []
    for name, s, n in params:
        a, b = max(s, lo), min(s + n, hi)
        if b > a:
            items.append((name, a - s, b - s, a - lo, b - lo))
    assert items, "empty bucket encountered"
    out = []
    for i in range(-1, len(items)):
        if i >= 0:
            out.append(items[i])
        nxt = per if i == len(items) - 1 else items[i + 1][3]
        cur = 0 if i == -1 else items[i][4]
        if nxt != cur and lo + cur < unpadded:
            out.append((None, 0, 0, cur, nxt))
    return out


def dpr_rank(tp, dp, pp):
    return tp + TP * dp + TP * DPR_DP * pp


def dpr_model(key, rank):
    """key's global tensor as the model saves it (TP fragments, on DP rank 0
    of the stage that holds each layer)."""
    ps = [p for p in PARAMS if p[1] == key]
    stacked = ps[0][2] is not None
    gshape = ((L,) if stacked else ()) + ps[0][3]
    all_, mine = [], []
    for name, _, l, shape, split in ps:
        t = tagged(pid(name), shape, 0.75).to(torch.bfloat16)
        for tp in range(TP):
            for off, frag in local(t, split, tp):
                o = ((l,) if stacked else ()) + off
                d = frag.unsqueeze(0) if stacked else frag
                r = dpr_rank(tp, 0, stage_of(name))
                all_.append((r, o, tuple(d.shape)))
                if rank == r:
                    mine.append((o, d))
    return sharded_tensor(gshape, all_, mine, torch.bfloat16)


def dpr_object(obj):
    """A ShardedObject as Megatron's torch strategy saves it: a list of the
    rank's objects under the key, torch.save'd (strategies/torch.py:317-322)."""
    import io
    b = io.BytesIO()
    torch.save([obj], b)
    b.seek(0)
    return b


def dpr_bucket(sd, rank, pre, g_tp, g_pp, v, b, bk, info):
    """Bucket b of gbuf v of DP group (g_tp, g_pp): rank's pieces of its
    param, exp_avg and exp_avg_sq tensors into sd."""
    per = bk[1] // DPR_DP
    for sk, add in (("param", 0.75), ("exp_avg", 0.25), ("exp_avg_sq", 0.5)):
        all_, mine = [], []
        for g_dp in range(DPR_DP):
            r = dpr_rank(g_tp, g_dp, g_pp)
            for name, a, e, s, s_end in dpr_items(bk, g_dp):
                all_.append((r, (g_dp * per + s,), (s_end - s,)))
                if r != rank:
                    continue
                if name is None:  # torch.empty in Megatron: any bytes
                    mine.append(((g_dp * per + s,), torch.full((s_end - s,), -1.0)))
                else:
                    shape, split = info[name][3], info[name][4]
                    val = local_param(tagged(pid(name), shape, add), split, g_tp).reshape(-1)
                    mine.append(((g_dp * per + s,), val[a:e].clone()))
        key = "%s.gbuf_idx_%d.dtype_%s.bucket_idx_%d.%s" % (pre, v, DPR_DTYPE, b, sk)
        if any(r == rank for r, _, _ in all_):
            sd[key] = sharded_tensor((bk[0],), all_, mine, torch.float32)


def dpz_state(g_tp, chunks, info):
    """DP group (g_tp, stage)'s get_parameter_state_dp_zero() (distrib_optimizer.py
    :1262-1411, d98e8a6): {"buckets_coalesced": True, gbuf v: {(param dtype,
    grad dtype): {"param", "exp_avg", "exp_avg_sq": the buffer's buckets back
    to back, each without its end padding (the padding between parameters
    zeros: torch.zeros, :1318-1346), "numel_unpadded": their total}}}."""
    state = {"buckets_coalesced": True}
    for v, buckets in enumerate(chunks):
        total = sum(b[0] for b in buckets)
        world = {}
        for sk, add in (("param", 0.75), ("exp_avg", 0.25), ("exp_avg_sq", 0.5)):
            t, off = torch.zeros(total), 0
            for unpadded, _, params in buckets:
                for name, s, n in params:
                    shape, split = info[name][3], info[name][4]
                    t[off + s:off + s + n] = local_param(tagged(pid(name), shape, add), split, g_tp).reshape(-1)
                off += unpadded
            world[sk] = t
        world["numel_unpadded"] = total
        state[v] = {DPR_DTYPE: world}
    return state


def dpr_worker(rank, world, iterdir, port, kind="dp_reshardable"):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    tp, dp, pp = rank % TP, rank // TP % DPR_DP, rank // (TP * DPR_DP)
    sd = {key: dpr_model(key, rank) for key in dict.fromkeys(p[1] for p in PARAMS)}
    info = {p[0]: p for p in PARAMS}
    for g_pp in range(DPR_PP):
        chunks = [dpr_layout(g_pp, v) for v in range(DPR_VPP)]  # one buffer per model chunk: gbuf v
        for g_tp in range(TP):
            G = g_tp + TP * g_pp
            pre = "optimizer.distributed.dp_group_idx_%d" % G
            if kind == "dp_zero_gather_scatter":  # :1659-1690: on DP rank 0, one ShardedObject
                if (g_tp, g_pp) == (tp, pp) and dp == 0:
                    sd[pre + ".optimizer/shard_0_1"] = dpr_object({"param_groups": groups()})
                    sd[pre + ".param_state/shard_0_1"] = dpr_object(dpz_state(g_tp, chunks, info))
                continue
            if (g_tp, g_pp) == (tp, pp) and dp == 0:  # replica_id (0, 0, dp rank)
                sd[pre + ".per_bucket_numel/shard_0_1"] = dpr_object([{DPR_DTYPE: [b[1] for b in bs]} for bs in chunks])
                sd[pre + ".per_bucket_numel_unpadded/shard_0_1"] = dpr_object(
                    [{DPR_DTYPE: [b[0] for b in bs]} for bs in chunks])
                sd[pre + ".optimizer/shard_0_1"] = dpr_object({"param_groups": groups()})
            for v, buckets in enumerate(chunks):
                for b, bk in enumerate(buckets):
                    dpr_bucket(sd, rank, pre, g_tp, g_pp, v, b, bk, info)

    class Planner(DefaultSavePlanner):
        """Megatron's MCoreSavePlanner (strategies/torch.py:407-468): the
        ShardedObjects' bytes are written as they are, not torch.save'd again."""

        def transform_object(self, write_item, object):
            return object

    dcp.save(sd, checkpoint_id=iterdir, planner=Planner(flatten_state_dict=False))
    dist.barrier()
    dist.destroy_process_group()


def save_dp_reshardable(out, name, port, kind="dp_reshardable"):
    import torch.multiprocessing as mp
    save_dir = os.path.join(out, name)
    iterdir = os.path.join(save_dir, "iter_0000007")
    os.makedirs(iterdir, exist_ok=True)
    world = TP * DPR_DP * DPR_PP
    mp.spawn(dpr_worker, args=(world, iterdir, port, kind), nprocs=world, join=True)
    with open(os.path.join(iterdir, "metadata.json"), "w") as f:
        f.write('{"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch", "common_backend_version": 1}')
    args = argparse.Namespace(num_layers=L, hidden_size=H, num_attention_heads=HEADS, num_query_groups=GROUPS,
                              ffn_hidden_size=I, padded_vocab_size=V, tensor_model_parallel_size=TP,
                              pipeline_model_parallel_size=DPR_PP, data_parallel_size=DPR_DP,
                              context_parallel_size=1,
                              virtual_pipeline_model_parallel_size=DPR_VPP if DPR_VPP > 1 else None,
                              decoder_first_pipeline_num_layers=DPR_FIRST, decoder_last_pipeline_num_layers=DPR_LAST,
                              overlap_grad_reduce=True, ddp_bucket_size=DPR_BUCKET,
                              untie_embeddings_and_output_weights=True, num_experts=None, swiglu=True,
                              mtp_num_layers=MTP or None,
                              use_distributed_optimizer=True, apply_wd_to_qk_layernorm=False, bf16=True)
    # the common state: the sharding type only (the param groups are the
    # ShardedObjects above, :1531-1546)
    common = {"args": args, "checkpoint_version": 3.0, "iteration": STEP,
              "optimizer": {"param_state_sharding_type": kind}}
    torch.save(common, os.path.join(iterdir, "common.pt"))
    with open(os.path.join(save_dir, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(STEP))
    print("wrote", save_dir, [[[(b[0], b[1]) for b in dpr_layout(p, v)] for v in range(DPR_VPP)] for p in range(DPR_PP)])


# ---- a mixture of experts in 'dp_reshardable' form: two optimizers ----
#
# With routed experts Megatron chains two distributed optimizers
# (optimizer/__init__.py:1170-1245): the dense parameters' (DP group index
# the tp-pp rank) and the experts' (allreduce False: expert parallelism > 1,
# param_and_grad_buffer.py:888-933; DP group index the rank in the
# expert tp-ep-pp group, :1229-1245, parallel_state.py's expert
# RankGenerator: etp + ETP (ep + EP pp)), each over its own buffers and DP
# group (the expert one: world / (ETP EP PP) ranks). ChainedOptimizer
# prefixes every key 'chained_N.' for the bucket forms (optimizer.py
# :1573-1603), and the common state is {0: dense, 1: expert}. The model: 2
# layers of attention and a router over 4 experts (SequentialMLP,
# experts.py:1409-1451: local_experts.i, fc1 then fc2, no SwiGLU), tp 1,
# ep 2, dp 4 (expert dp 2): four gloo processes, global rank = ep + 2 edp.

E, FF, EP = 4, 16, 2
MOE = os.environ.get("MEGATRON_OPTIM_MOE") == "1"
MOE_KEYS = [
    ("embedding.word_embeddings.weight", (V, H), "rows", False),
    ("decoder.layers.self_attention.linear_qkv.layer_norm_weight", (H,), None, True),
    ("decoder.layers.self_attention.linear_qkv.weight", (QKV, H), "rows", True),
    ("decoder.layers.self_attention.linear_qkv.bias", (QKV,), "rows", True),
    ("decoder.layers.self_attention.linear_proj.weight", (H, PROJ_IN), "cols", True),
    ("decoder.layers.pre_mlp_layernorm.weight", (H,), None, True),
    ("decoder.layers.mlp.router.weight", (E, H), None, True),
    ("decoder.layers.mlp.experts.experts.linear_fc1.weight", (FF, H), "expert", True),
    ("decoder.layers.mlp.experts.experts.linear_fc2.weight", (H, FF), "expert", True),
    ("decoder.final_layernorm.weight", (H,), None, False),
    ("output_layer.weight", (V, H), "rows", False),
]
# one layer's dense parameters in named_parameters order (TransformerLayer:
# pre_mlp_layernorm before mlp; MoELayer: router before experts,
# moe_layer.py:260, 334), and an expert's (MLP: fc1, fc2)
MOE_LAYER_ORDER = [
    "decoder.layers.self_attention.linear_proj.weight",
    "decoder.layers.self_attention.linear_qkv.layer_norm_weight",
    "decoder.layers.self_attention.linear_qkv.weight",
    "decoder.layers.self_attention.linear_qkv.bias",
    "decoder.layers.pre_mlp_layernorm.weight",
    "decoder.layers.mlp.router.weight",
]
MOE_EXPERT_ORDER = ["linear_fc1.weight", "linear_fc2.weight"]
# --add-bias-linear (OUTDIR moeb, moebg): every linear's bias, the experts'
# too (MLP: fc1's weight and bias, then fc2's; the router's bias after its
# weight, router.py:64-72; linear_proj's after its weight); with
# MEGATRON_OPTIM_MOE_GROUPED=1 the experts are TEGroupedMLP's (moe_grouped_gemm):
# linear_fc1 then linear_fc2 (experts.py:217, 236), each a TE GroupedLinear
# registering weight0, bias0, weight1, bias1, ... (GroupedLinear.__init__ at
# TransformerEngine 0069563); the model's save names both alike
# (experts.experts.linear_fc1.bias, experts.py:1049-1091, 1526-1566)
MOE_BIAS = os.environ.get("MEGATRON_OPTIM_MOE_BIAS") == "1"
MOE_GROUPED = os.environ.get("MEGATRON_OPTIM_MOE_GROUPED") == "1"
if MOE_BIAS:
    MOE_KEYS[5:5] = [("decoder.layers.self_attention.linear_proj.bias", (H,), None, True)]
    MOE_KEYS[8:8] = [("decoder.layers.mlp.router.bias", (E,), None, True)]
    MOE_KEYS[10:10] = [("decoder.layers.mlp.experts.experts.linear_fc1.bias", (FF,), "expert", True)]
    MOE_KEYS[12:12] = [("decoder.layers.mlp.experts.experts.linear_fc2.bias", (H,), "expert", True)]
    MOE_LAYER_ORDER[1:1] = ["decoder.layers.self_attention.linear_proj.bias"]
    MOE_LAYER_ORDER.append("decoder.layers.mlp.router.bias")
    MOE_EXPERT_ORDER = ["linear_fc1.weight", "linear_fc1.bias", "linear_fc2.weight", "linear_fc2.bias"]


def expert_name(l, e, what):
    return "decoder.layers.%d.mlp.experts.local_experts.%d.%s" % (l, e, what)


def moe_params():
    """(name, key, layer, shape, split), an expert's split ('expert', e)."""
    out = [(k, k, None, s, sp) for k, s, sp, st in MOE_KEYS[:1]]
    for l in range(L):
        for k, s, sp, st in MOE_KEYS:
            if not st:
                continue
            if sp == "expert":
                out += [(expert_name(l, e, k.split(".experts.experts.")[1]), k, l, s, ("expert", e)) for e in range(E)]
            else:
                out.append((per_layer(k, l), k, l, s, sp))
    out += [(k, k, None, s, sp) for k, s, sp, st in MOE_KEYS[-2:-1]]
    for m in range(MTP):  # an MTP layer of the same MoE layer (OUTDIR mtpmoe), before the output layer
        pre, tl = "mtp.layers.%d." % m, "mtp.layers.%d.transformer_layer." % m
        out += [(pre + k, pre + k, None, s, None) for k, s, sp in MTP_KEYS]
        for k, s, sp, st in MOE_KEYS:
            if st and sp == "expert":
                out += [(mtp_expert_name(m, e, k.split(".experts.experts.")[1]), tl + k[15:], None, s, ("expert", e))
                        for e in range(E)]
            elif st:
                out.append((tl + k[15:], tl + k[15:], None, s, sp))
        out += [(pre + k, pre + k, None, s, None) for k, s, sp in MTP_TAIL]
    out += [(k, k, None, s, sp) for k, s, sp, st in MOE_KEYS[-1:]]
    return out


def mtp_expert_name(m, e, what):
    return "mtp.layers.%d.transformer_layer.mlp.experts.local_experts.%d.%s" % (m, e, what)


if MOE:  # megatron_optim_check.py reads the MoE model's parameters
    KEYS, PARAMS = MOE_KEYS, moe_params()


def moe_dense_params():
    info = {p[0]: p for p in PARAMS}
    names = ["embedding.word_embeddings.weight"]
    for l in range(L):
        names += [per_layer(k, l) for k in MOE_LAYER_ORDER]
    names += ["decoder.final_layernorm.weight"]
    for m in range(MTP):  # enorm, hnorm, eh_proj, the layer's dense part, final_layernorm
        pre = "mtp.layers.%d." % m
        names += [pre + k for k, s, sp in MTP_KEYS] + [pre + "transformer_layer." + k[15:] for k in MOE_LAYER_ORDER]
        names += [pre + k for k, s, sp in MTP_TAIL]
    names += ["output_layer.weight"]
    return [(n, info[n][3], info[n][4]) for n in names]


def moe_expert_params(ep):
    info = {p[0]: p for p in PARAMS}
    names = []
    for l in range(L):
        xs = range(ep * (E // EP), (ep + 1) * (E // EP))
        if MOE_GROUPED:  # linear by linear, expert by expert within each
            for lin in ("linear_fc1.", "linear_fc2."):
                names += [expert_name(l, x, w) for x in xs for w in MOE_EXPERT_ORDER if w.startswith(lin)]
        else:
            names += [expert_name(l, x, w) for x in xs for w in MOE_EXPERT_ORDER]
    for m in range(MTP):  # the MTP layers' experts after the decoder's (named_parameters order)
        names += [mtp_expert_name(m, x, w) for x in range(ep * (E // EP), (ep + 1) * (E // EP)) for w in MOE_EXPERT_ORDER]
    return [(n, info[n][3], "expert") for n in names]


def moe_model(key, rank):
    """key's global tensor as the model saves it: dense keys from rank 0
    (tp 1, DP replica 0), the experts' stack [layers, experts, ...] each
    expert from expert DP rank 0 of the ep rank holding it (rank ep)."""
    ps = [p for p in PARAMS if p[1] == key]
    stacked = ps[0][2] is not None
    expert = isinstance(ps[0][4], tuple)
    gshape = ((L,) if stacked else ()) + ((E,) if expert else ()) + ps[0][3]
    all_, mine = [], []
    for name, _, l, shape, split in ps:
        t = tagged(pid(name), shape, 0.75).to(torch.bfloat16)
        pre = ((l,) if stacked else ()) + ((split[1],) if expert else ())
        r = split[1] // (E // EP) if expert else 0
        d = t.reshape((1,) * len(pre) + tuple(shape))
        all_.append((r, pre + (0,) * len(shape), tuple(d.shape)))
        if rank == r:
            mine.append((pre + (0,) * len(shape), d))
    return sharded_tensor(gshape, all_, mine, torch.bfloat16)


def moe_buffer(sd, rank, pre, buckets, ranks):
    """One optimizer's buffer (buckets) of a DP group whose DP ranks are
    ranks[0..]: rank's pieces of each bucket's param, exp_avg, exp_avg_sq."""
    info = {p[0]: p for p in PARAMS}
    ndp = len(ranks)
    for b, bk in enumerate(buckets):
        per = bk[1] // ndp
        for sk, add in (("param", 0.75), ("exp_avg", 0.25), ("exp_avg_sq", 0.5)):
            all_, mine = [], []
            for g_dp, r in enumerate(ranks):
                for name, a, e, s0, s1 in dpr_items(bk, g_dp, ndp):
                    all_.append((r, (g_dp * per + s0,), (s1 - s0,)))
                    if r != rank:
                        continue
                    if name is None:
                        mine.append(((g_dp * per + s0,), torch.full((s1 - s0,), -1.0)))
                    else:
                        src = ALIAS.get(name, name)  # a tied copy holds its original's values
                        val = tagged(pid(src), info[src][3], add).reshape(-1)
                        mine.append(((g_dp * per + s0,), val[a:e].clone()))
            key = "%s.gbuf_idx_0.dtype_%s.bucket_idx_%d.%s" % (pre, DPR_DTYPE, b, sk)
            if any(r == rank for r, _, _ in all_):
                sd[key] = sharded_tensor((bk[0],), all_, mine, torch.float32)


def dpz_objects(sd, pre, buckets, gr):
    """dp_zero_gather_scatter: one optimizer's DP group state as DP rank 0
    saves it (sharded_param_state_dp_zero, distrib_optimizer.py:1659-1690):
    its param groups and get_parameter_state_dp_zero's dict of its one
    buffer, the buckets coalesced (dpz_state; tp 1, a tied copy its
    original's values)."""
    info = {p[0]: p for p in PARAMS}
    total, world = sum(b[0] for b in buckets), {}
    for sk, add in (("param", 0.75), ("exp_avg", 0.25), ("exp_avg_sq", 0.5)):
        t, off = torch.zeros(total), 0
        for unpadded, _, params in buckets:
            for name, s, n in params:
                src = ALIAS.get(name, name)
                t[off + s:off + s + n] = tagged(pid(src), info[src][3], add).reshape(-1)
            off += unpadded
        world[sk] = t
    world["numel_unpadded"] = total
    sd[pre + ".optimizer/shard_0_1"] = dpr_object({"param_groups": gr})
    sd[pre + ".param_state/shard_0_1"] = dpr_object({"buckets_coalesced": True, 0: {DPR_DTYPE: world}})


def moe_worker(rank, world, iterdir, port, kind="dp_reshardable"):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    sd = {key: moe_model(key, rank) for key in dict.fromkeys(p[1] for p in PARAMS)}
    egroups = [dict(g, is_expert_parallel=True) for g in groups()]
    parts = [("chained_0", 0, layout_buckets(moe_dense_params(), DPR_BUCKET, world), list(range(world)), groups())]
    for ep in range(EP):  # expert DP group ep: ranks ep, ep + EP, ...
        parts.append(("chained_1", ep, layout_buckets(moe_expert_params(ep), DPR_BUCKET, world // EP),
                      list(range(ep, world, EP)), egroups))
    for chain, g, buckets, ranks, gr in parts:
        pre = "%s.optimizer.distributed.dp_group_idx_%d" % (chain, g)
        if kind == "dp_zero_gather_scatter":  # the prefix too (optimizer.py:1573-1603)
            if rank == ranks[0]:
                dpz_objects(sd, pre, buckets, gr)
            continue
        if rank == ranks[0]:  # replica_id (0, 0, dp rank): DP rank 0 writes them
            sd[pre + ".per_bucket_numel/shard_0_1"] = dpr_object([{DPR_DTYPE: [b[1] for b in buckets]}])
            sd[pre + ".per_bucket_numel_unpadded/shard_0_1"] = dpr_object([{DPR_DTYPE: [b[0] for b in buckets]}])
            sd[pre + ".optimizer/shard_0_1"] = dpr_object({"param_groups": gr})
        moe_buffer(sd, rank, pre, buckets, ranks)

    class Planner(DefaultSavePlanner):
        def transform_object(self, write_item, object):  # MCoreSavePlanner, as above
            return object

    dcp.save(sd, checkpoint_id=iterdir, planner=Planner(flatten_state_dict=False))
    dist.barrier()
    dist.destroy_process_group()


def save_moe(out, name, port, kind="dp_reshardable"):
    import torch.multiprocessing as mp
    save_dir = os.path.join(out, name)
    iterdir = os.path.join(save_dir, "iter_0000007")
    os.makedirs(iterdir, exist_ok=True)
    world = 2 if MOE_BIAS or MTP else 4  # the expert-bias saves at dp 2 (expert dp 1): fewer chunks, a smaller fixture
    mp.spawn(moe_worker, args=(world, iterdir, port, kind), nprocs=world, join=True)
    with open(os.path.join(iterdir, "metadata.json"), "w") as f:
        f.write('{"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch", "common_backend_version": 1}')
    args = argparse.Namespace(num_layers=L, hidden_size=H, num_attention_heads=HEADS, num_query_groups=GROUPS,
                              ffn_hidden_size=I, moe_ffn_hidden_size=FF, padded_vocab_size=V,
                              tensor_model_parallel_size=1, pipeline_model_parallel_size=1, data_parallel_size=world,
                              context_parallel_size=1, virtual_pipeline_model_parallel_size=None,
                              num_experts=E, expert_model_parallel_size=EP, expert_tensor_parallel_size=1,
                              moe_grouped_gemm=MOE_GROUPED, add_bias_linear=MOE_BIAS, overlap_grad_reduce=True,
                              ddp_bucket_size=DPR_BUCKET, untie_embeddings_and_output_weights=True, swiglu=False,
                              mtp_num_layers=MTP or None,
                              use_distributed_optimizer=True, apply_wd_to_qk_layernorm=False, bf16=True)
    common = {"args": args, "checkpoint_version": 3.0, "iteration": STEP,
              "optimizer": {0: {"param_state_sharding_type": kind}, 1: {"param_state_sharding_type": kind}}}
    torch.save(common, os.path.join(iterdir, "common.pt"))
    with open(os.path.join(save_dir, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(STEP))
    print("wrote", save_dir, [(b[0], b[1]) for b in layout_buckets(moe_dense_params(), DPR_BUCKET, world)],
          [[(b[0], b[1]) for b in layout_buckets(moe_expert_params(ep), DPR_BUCKET, world // EP)] for ep in range(EP)])


# ---- a DeepSeek-V3-shaped GPT in 'dp_reshardable' form ----
#
# Multi-latent attention (MLASelfAttention with q_lora_rank, its q and kv
# norms fused into the up projections as TransformerEngine builds them:
# linear_q_up_proj.layer_norm_weight, linear_kv_up_proj.layer_norm_weight;
# multi_latent_attention.py:207-626 at d98e8a6); layer 0 dense (SwiGLU, its
# pre-MLP norm fused into linear_fc1), layers 1-3 a MoE of 2 routed experts
# (SequentialMLP, SwiGLU), a shared expert (shared_experts.py) and the
# router's expert_bias (a buffer: in the model's save, not in the
# optimizer, router.py:191-192): moe_layer_freq [0, 1, 1, 1], so each
# layer's keys carry its number, unstacked (non-homogeneous layers,
# transformer_block.py:793-838), the experts still stacked [E, ...]. 4
# layers on 2 uneven pipeline stages (--decoder-last-pipeline-num-layers 1:
# layers 0-2 on stage 0, layer 3 on stage 1, transformer_layer.py
# get_transformer_layer_offset), tied embeddings over the stages (the last
# stage's output_layer.weight a copy of the word embeddings, each in a
# bucket of its own: language_module.py:258-283, distrib_optimizer.py
# :530-577; the model's save keeps the embedding only). tp 1 x ep 2 x pp 2,
# dp 2 (expert dp 1): four gloo processes, rank = dp + 2 pp, the expert rank
# ep = dp; dense DP groups G = pp, expert ones ep + 2 pp.

DS = os.environ.get("MEGATRON_OPTIM_DSV3") == "1"
DS_L, DS_PP, DS_LAST, DS_DENSE, DE = 4, 2, 1, 1, 2
NH, QKD, PED, VD, QR, KVR, DFF, SFF = 2, 4, 2, 4, 6, 6, 8, 8
A = "decoder.layers.self_attention."
DS_ATTN = [  # a layer's attention in named_parameters order (megatron_dp_optim.c's table cites each)
    ("decoder.layers.input_layernorm.weight", (H,), None),
    (A + "linear_proj.weight", (H, NH * VD), None),
    (A + "linear_q_down_proj.weight", (QR, H), None),
    (A + "linear_q_up_proj.layer_norm_weight", (QR,), None),
    (A + "linear_q_up_proj.weight", (NH * (QKD + PED), QR), None),
    (A + "linear_kv_down_proj.weight", (KVR + PED, H), None),
    (A + "linear_kv_up_proj.layer_norm_weight", (KVR,), None),
    (A + "linear_kv_up_proj.weight", (NH * (QKD + VD), KVR), None),
]
DS_DENSE_MLP = [
    ("decoder.layers.mlp.linear_fc1.layer_norm_weight", (H,), None),
    ("decoder.layers.mlp.linear_fc1.weight", (2 * I, H), None),
    ("decoder.layers.mlp.linear_fc2.weight", (H, I), None),
]
DS_MOE = [
    ("decoder.layers.pre_mlp_layernorm.weight", (H,), None),
    ("decoder.layers.mlp.router.weight", (DE, H), None),
    ("decoder.layers.mlp.experts.experts.linear_fc1.weight", (2 * DFF, H), "expert"),
    ("decoder.layers.mlp.experts.experts.linear_fc2.weight", (H, DFF), "expert"),
    ("decoder.layers.mlp.shared_experts.linear_fc1.weight", (2 * SFF, H), None),
    ("decoder.layers.mlp.shared_experts.linear_fc2.weight", (H, SFF), None),
]
ALIAS = {"output_layer.weight": "embedding.word_embeddings.weight"} if DS else {}  # the tied copy


def ds_layer(l):
    return DS_ATTN + (DS_DENSE_MLP if l < DS_DENSE else DS_MOE)


def ds_params():
    """(name, key, layer, shape, split): every key a layer's own."""
    out = [("embedding.word_embeddings.weight", "embedding.word_embeddings.weight", None, (V, H), None)]
    for l in range(DS_L):
        for k, s, sp in ds_layer(l):
            if sp == "expert":
                out += [(expert_name(l, e, k.split(".experts.experts.")[1]), per_layer(k, l), l, s, ("expert", e))
                        for e in range(DE)]
            else:
                out.append((per_layer(k, l), per_layer(k, l), l, s, sp))
    out.append(("decoder.final_layernorm.weight", "decoder.final_layernorm.weight", None, (H,), None))
    return out


if DS:  # megatron_optim_check.py reads this model's parameters
    PARAMS, TP = ds_params(), 1


def ds_stage(l):
    return 0 if l < DS_L - DS_LAST else DS_PP - 1


def ds_dense(pp):
    """Stage pp's dense buffer: its parameters in named_parameters order
    (the routed experts in the expert optimizer's), (name, shape, split)."""
    info = {p[0]: p for p in PARAMS}
    names = ["embedding.word_embeddings.weight"] if pp == 0 else []
    for l in [l for l in range(DS_L) if ds_stage(l) == pp]:
        names += [per_layer(k, l) for k, s, sp in ds_layer(l) if sp != "expert"]
    if pp == DS_PP - 1:
        names += ["decoder.final_layernorm.weight"]
    out = [(n, info[n][3], info[n][4]) for n in names]
    if pp == DS_PP - 1:  # the output layer's copy of the tied embeddings
        out.append(("output_layer.weight", (V, H), None))
    return out


def ds_experts(ep, pp):
    info = {p[0]: p for p in PARAMS}
    names = []
    for l in [l for l in range(DS_DENSE, DS_L) if ds_stage(l) == pp]:
        for i in range(DE // EP):
            names += [expert_name(l, ep * (DE // EP) + i, w) for w in MOE_EXPERT_ORDER]
    return [(n, info[n][3], "expert") for n in names]


def ds_model(key, rank):
    """key's tensor as the model saves it, from DP rank 0 of its stage (an
    expert's: its ep rank); the router's expert_bias [E] f32, 60000 + 16 l + e."""
    ps = [p for p in PARAMS if p[1] == key]
    bias = key.endswith(".router.expert_bias")
    if bias:
        l = int(key.split(".")[2])
        ps = [(key, key, l, (DE,), None)]
    expert = isinstance(ps[0][4], tuple)
    gshape = ((DE,) if expert else ()) + ps[0][3]
    dtype = torch.float32 if bias else torch.bfloat16
    all_, mine = [], []
    for name, _, l, shape, split in ps:
        t = (torch.arange(DE, dtype=torch.float32) + 60000 + 16 * l) if bias else tagged(pid(name), shape, 0.75).to(dtype)
        stage = ds_stage(l) if l is not None else (0 if name.startswith("embedding.") else DS_PP - 1)
        pre = (split[1],) if expert else ()
        r = (split[1] // (DE // EP) if expert else 0) + 2 * stage
        d = t.reshape((1,) * len(pre) + tuple(shape))
        all_.append((r, pre + (0,) * len(shape), tuple(d.shape)))
        if rank == r:
            mine.append((pre + (0,) * len(shape), d))
    return sharded_tensor(gshape, all_, mine, dtype)


def ds_worker(rank, world, iterdir, port, kind="dp_reshardable"):
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    keys = list(dict.fromkeys(p[1] for p in PARAMS))
    keys += ["decoder.layers.%d.mlp.router.expert_bias" % l for l in range(DS_DENSE, DS_L)]
    sd = {key: ds_model(key, rank) for key in keys}
    egroups = [dict(g, is_expert_parallel=True) for g in groups()]
    tied = ("embedding.word_embeddings.weight", "output_layer.weight")
    parts = []
    for pp in range(DS_PP):
        bucket = DPR_BUCKET if pp == 0 else None  # none past the first stage
        parts.append(("chained_0", pp, layout_buckets(ds_dense(pp), bucket, 2, tied), [2 * pp, 2 * pp + 1], groups()))
        for ep in range(EP):
            parts.append(("chained_1", ep + 2 * pp, layout_buckets(ds_experts(ep, pp), bucket, 1), [ep + 2 * pp], egroups))
    for chain, g, buckets, ranks, gr in parts:
        pre = "%s.optimizer.distributed.dp_group_idx_%d" % (chain, g)
        if kind == "dp_zero_gather_scatter":
            if rank == ranks[0]:
                dpz_objects(sd, pre, buckets, gr)
            continue
        if rank == ranks[0]:
            sd[pre + ".per_bucket_numel/shard_0_1"] = dpr_object([{DPR_DTYPE: [b[1] for b in buckets]}])
            sd[pre + ".per_bucket_numel_unpadded/shard_0_1"] = dpr_object([{DPR_DTYPE: [b[0] for b in buckets]}])
            sd[pre + ".optimizer/shard_0_1"] = dpr_object({"param_groups": gr})
        moe_buffer(sd, rank, pre, buckets, ranks)

    class Planner(DefaultSavePlanner):
        def transform_object(self, write_item, object):  # MCoreSavePlanner, as above
            return object

    dcp.save(sd, checkpoint_id=iterdir, planner=Planner(flatten_state_dict=False))
    dist.barrier()
    dist.destroy_process_group()


def save_dsv3(out, name, port, kind="dp_reshardable"):
    import torch.multiprocessing as mp
    save_dir = os.path.join(out, name)
    iterdir = os.path.join(save_dir, "iter_0000007")
    os.makedirs(iterdir, exist_ok=True)
    world = 4
    mp.spawn(ds_worker, args=(world, iterdir, port, kind), nprocs=world, join=True)
    with open(os.path.join(iterdir, "metadata.json"), "w") as f:
        f.write('{"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch", "common_backend_version": 1}')
    args = argparse.Namespace(num_layers=DS_L, hidden_size=H, num_attention_heads=NH, ffn_hidden_size=I,
                              moe_layer_freq=[0] * DS_DENSE + [1] * (DS_L - DS_DENSE),
                              multi_latent_attention=True, q_lora_rank=QR, kv_lora_rank=KVR, qk_head_dim=QKD,
                              qk_pos_emb_head_dim=PED, v_head_dim=VD, moe_ffn_hidden_size=DFF,
                              moe_shared_expert_intermediate_size=SFF, moe_router_enable_expert_bias=True,
                              padded_vocab_size=V, tensor_model_parallel_size=1, pipeline_model_parallel_size=DS_PP,
                              decoder_first_pipeline_num_layers=None, decoder_last_pipeline_num_layers=DS_LAST,
                              data_parallel_size=2, context_parallel_size=1, virtual_pipeline_model_parallel_size=None,
                              num_experts=DE, expert_model_parallel_size=EP, expert_tensor_parallel_size=1,
                              moe_grouped_gemm=False, overlap_grad_reduce=True, ddp_bucket_size=DPR_BUCKET,
                              untie_embeddings_and_output_weights=False, swiglu=True,
                              use_distributed_optimizer=True, apply_wd_to_qk_layernorm=False, bf16=True)
    common = {"args": args, "checkpoint_version": 3.0, "iteration": STEP,
              "optimizer": {0: {"param_state_sharding_type": kind}, 1: {"param_state_sharding_type": kind}}}
    torch.save(common, os.path.join(iterdir, "common.pt"))
    with open(os.path.join(save_dir, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(STEP))
    tied = ("embedding.word_embeddings.weight", "output_layer.weight")
    print("wrote", save_dir, [[(b[0], b[1]) for b in layout_buckets(ds_dense(pp), DPR_BUCKET if pp == 0 else None, 2, tied)]
                              for pp in range(DS_PP)])


if __name__ == "__main__":
    out = sys.argv[1]
    which = sys.argv[2:] or ["reshard", "fsms", "dpr"]
    if "reshard" in which:
        save(out, "megatron_optim_reshard", "fully_reshardable", 29561)
    if "fsms" in which:
        save(out, "megatron_optim_fsms", "fully_sharded_model_space", 29562)
    if "dpr" in which:
        save_dp_reshardable(out, "megatron_optim_dpr", 29563)
    if "dpz" in which:  # Megatron 0.8-0.12's default without --ckpt-fully-parallel-save
        save_dp_reshardable(out, "megatron_optim_dpz", 29566, "dp_zero_gather_scatter")
    if "vpp" in which:  # with MEGATRON_OPTIM_LAYERS=4 MEGATRON_OPTIM_TP=1
        assert L == 4 and TP == 1, "vpp: run with MEGATRON_OPTIM_LAYERS=4 MEGATRON_OPTIM_TP=1"
        os.environ["MEGATRON_OPTIM_VPP"] = "2"  # the spawned ranks import this file again
        DPR_VPP = 2
        save_dp_reshardable(out, "megatron_optim_vpp", 29564)
    if "vppz" in which:  # the same, dp_zero_gather_scatter
        assert L == 4 and TP == 1, "vppz: run with MEGATRON_OPTIM_LAYERS=4 MEGATRON_OPTIM_TP=1"
        os.environ["MEGATRON_OPTIM_VPP"] = "2"
        DPR_VPP = 2
        save_dp_reshardable(out, "megatron_optim_vppz", 29568, "dp_zero_gather_scatter")
    if "moe" in which:  # with MEGATRON_OPTIM_MOE=1 MEGATRON_OPTIM_TP=1
        assert MOE and TP == 1, "moe: run with MEGATRON_OPTIM_MOE=1 MEGATRON_OPTIM_TP=1"
        save_moe(out, "megatron_optim_moe", 29565)
    if "moeb" in which:  # with MEGATRON_OPTIM_MOE=1 MEGATRON_OPTIM_MOE_BIAS=1 MEGATRON_OPTIM_TP=1 MEGATRON_OPTIM_LAYERS=1
        # (and MEGATRON_OPTIM_BUCKET=1000): dp_zero_gather_scatter, whose one
        # param_state per DP group keeps the fixture small (the dp_reshardable
        # buckets of these 27 parameters, a chunk per parameter piece, take 340 KB)
        assert MOE and MOE_BIAS and TP == 1 and L == 1, "moeb: run with MEGATRON_OPTIM_MOE=1 MEGATRON_OPTIM_MOE_BIAS=1 ..."
        save_moe(out, "megatron_optim_moebg" if MOE_GROUPED else "megatron_optim_moeb", 29571, "dp_zero_gather_scatter")
    if "mtp" in which:  # with MEGATRON_OPTIM_MTP=1 MEGATRON_OPTIM_LAYERS=1 MEGATRON_OPTIM_TP=1 MEGATRON_OPTIM_PP=1
        assert MTP and DPR_PP == 1, "mtp: run with MEGATRON_OPTIM_MTP=1 MEGATRON_OPTIM_PP=1 ..."
        save_dp_reshardable(out, "megatron_optim_mtp", 29572)
    if "vppuz" in which:  # uneven stages with virtual ones, dp_zero_gather_scatter: with
        # MEGATRON_OPTIM_LAYERS=6 MEGATRON_OPTIM_TP=1 MEGATRON_OPTIM_FIRST=2 (stage 0: layers 0 and 3)
        assert TP == 1 and (DPR_FIRST or DPR_LAST), "vppuz: run with MEGATRON_OPTIM_LAYERS=6 MEGATRON_OPTIM_TP=1 MEGATRON_OPTIM_FIRST=2"
        os.environ["MEGATRON_OPTIM_VPP"] = "2"
        DPR_VPP = 2
        save_dp_reshardable(out, "megatron_optim_vppuz", 29573, "dp_zero_gather_scatter")
    if "mtpmoe" in which:  # with MEGATRON_OPTIM_MOE=1 MEGATRON_OPTIM_MTP=1 MEGATRON_OPTIM_TP=1 MEGATRON_OPTIM_LAYERS=1
        assert MOE and MTP and TP == 1, "mtpmoe: run with MEGATRON_OPTIM_MOE=1 MEGATRON_OPTIM_MTP=1 ..."
        save_moe(out, "megatron_optim_mtpmoe", 29574, "dp_zero_gather_scatter")
    if "mtppz" in which:  # MTP over 2 stages, dp_zero_gather_scatter: with MEGATRON_OPTIM_MTP=1
        # MEGATRON_OPTIM_LAYERS=2 MEGATRON_OPTIM_TP=1 (the last stage's embedding copy in a bucket of its own)
        assert MTP and DPR_PP == 2 and TP == 1, "mtppz: run with MEGATRON_OPTIM_MTP=1 MEGATRON_OPTIM_LAYERS=2 MEGATRON_OPTIM_TP=1"
        save_dp_reshardable(out, "megatron_optim_mtppz", 29575, "dp_zero_gather_scatter")
    if "moez" in which:  # the same, dp_zero_gather_scatter (the chained prefix kept)
        assert MOE and TP == 1, "moez: run with MEGATRON_OPTIM_MOE=1 MEGATRON_OPTIM_TP=1"
        save_moe(out, "megatron_optim_moez", 29569, "dp_zero_gather_scatter")
    if "dsv3" in which:  # with MEGATRON_OPTIM_DSV3=1
        assert DS, "dsv3: run with MEGATRON_OPTIM_DSV3=1"
        save_dsv3(out, "megatron_optim_dsv3", 29567)
    if "dsv3z" in which:  # the same, dp_zero_gather_scatter
        assert DS, "dsv3z: run with MEGATRON_OPTIM_DSV3=1"
        save_dsv3(out, "megatron_optim_dsv3z", 29570, "dp_zero_gather_scatter")
