"""A Megatron-Core `torch_dist` checkpoint, written the way Megatron writes it, by
real torch 2.x DCP (Megatron itself is not installable here).

    python3 make_megatron.py OUTDIR      (torch >= 2.4; the trixie chroot, README.md)
    python3 make_megatron.py OUTDIR --from-hf HFDIR --name NAME [--tp N]

Megatron-Core (megatron/core/dist_checkpointing/strategies/torch.py,
`_mcore_to_torch_sharded_tensor` and `MCoreSavePlanner`) turns every ShardedTensor
fragment into a torch.distributed._shard ShardedTensor local shard and saves the
state dict with DCP, flatten_state_dict=False. Layers of a homogeneous decoder are
one key per parameter with the layer axis prepended (transformer_block.py:
`sharded_pp_offset`), each layer a chunk at offset (layer, ...); tensor-parallel
ranks hold chunks along the split axis; SwiGLU fc1 is the global [gate; up]
(mlp.py `apply_swiglu_sharded_factory`), so a rank's chunk is two fragments;
replicated parameters are saved by replica 0 only. Beside the DCP files:
metadata.json {"sharded_backend": "torch_dist", ...}, common.pt (args Namespace,
iteration), and the save folder's latest_checkpointed_iteration.txt.

Writes OUTDIR/megatron/ (the save folder: latest_checkpointed_iteration.txt and
iter_0000010/) and OUTDIR/megatron_expected.pt: the per-layer model tensors
(decoder.layers.N.* names, what Megatron's model.state_dict() holds, TP merged)
that a reader must give back. Optimizer state is saved too (optimizer.* keys) and
must not appear in the model output.

--from-hf HFDIR takes a LLaMA-family Hugging Face state dict (HFDIR/model.pt and
HFDIR/config.json, e.g. from make_llama_hf.py) and lays it out as Megatron's own
converter does (tools/checkpoint/loader_llama_mistral.py and the mcore saver):
linear_qkv = cat([q.reshape(G, hpg*d, H), k.reshape(G, d, H), v.reshape(G, d,
H)], dim=1) per query group, linear_fc1 = cat([gate, up]), the norms fused into
the TransformerEngine linears (linear_qkv.layer_norm_weight,
linear_fc1.layer_norm_weight), the vocabulary padded to a multiple of
make_vocab_size_divisible_by (128) * tp with copies of the last row (the saver's
padding), and args with the facts Megatron records (num_query_groups,
kv_channels, ...). Writes OUTDIR/NAME/ and OUTDIR/NAME_expected.pt.
"""
import argparse
import io
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed._shard.sharded_tensor import Shard, ShardedTensor, ShardedTensorMetadata
from torch.distributed._shard.sharded_tensor.metadata import TensorProperties
from torch.distributed._shard.metadata import ShardMetadata
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner

L, H, NH, NG, D, I, V, TP = 2, 16, 4, 2, 4, 24, 40, 2
HF = None  # with --from-hf: the Megatron-layout tensors built from it


def set_shape(l, h, nh, ng, d, i, v, tp):
    global L, H, NH, NG, D, I, V, TP
    L, H, NH, NG, D, I, V, TP = l, h, nh, ng, d, i, v, tp


def from_hf(sd, cfg, tp):
    """HF LLaMA names -> Megatron-Core, layer-stacked, as Megatron's converter lays them out."""
    h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    ng = cfg.get("num_key_value_heads", nh)
    d = cfg.get("head_dim", h // nh)
    layers, ffn, vocab = cfg["num_hidden_layers"], cfg["intermediate_size"], cfg["vocab_size"]
    mult = 128 * tp  # _vocab_size_with_padding: make_vocab_size_divisible_by * tp
    padded = (vocab + mult - 1) // mult * mult
    set_shape(layers, h, nh, ng, d, ffn, padded, tp)

    def pad(w):  # the saver's padding: the last row repeated
        return torch.cat([w, w[-1:].expand(padded - vocab, -1)]) if padded > vocab else w

    def qkv(p):
        q, k, v = sd[p + "self_attn.q_proj.weight"], sd[p + "self_attn.k_proj.weight"], sd[p + "self_attn.v_proj.weight"]
        return torch.cat([q.reshape(ng, nh // ng * d, h), k.reshape(ng, d, h), v.reshape(ng, d, h)], dim=1).reshape(-1, h)

    lay = lambda f: torch.stack([f("model.layers.%d." % l) for l in range(layers)])
    m = {
        "embedding.word_embeddings.weight": pad(sd["model.embed_tokens.weight"]),
        "decoder.layers.self_attention.linear_qkv.layer_norm_weight": lay(lambda p: sd[p + "input_layernorm.weight"]),
        "decoder.layers.self_attention.linear_qkv.weight": lay(qkv),
        "decoder.layers.self_attention.linear_proj.weight": lay(lambda p: sd[p + "self_attn.o_proj.weight"]),
        "decoder.layers.mlp.linear_fc1.layer_norm_weight": lay(lambda p: sd[p + "post_attention_layernorm.weight"]),
        "decoder.layers.mlp.linear_fc1.weight": lay(lambda p: torch.cat([sd[p + "mlp.gate_proj.weight"], sd[p + "mlp.up_proj.weight"]])),
        "decoder.layers.mlp.linear_fc2.weight": lay(lambda p: sd[p + "mlp.down_proj.weight"]),
        "decoder.final_layernorm.weight": sd["model.norm.weight"],
    }
    if "lm_head.weight" in sd:
        m["output_layer.weight"] = pad(sd["lm_head.weight"])
    return {k: v.contiguous() for k, v in m.items()}


def full_model():
    if HF is not None:
        return {k: v.clone() for k, v in HF.items()}
    g = torch.Generator().manual_seed(77)
    r = lambda *s: torch.randn(*s, generator=g)
    qkv_rows = (NH + 2 * NG) * D
    return {
        "embedding.word_embeddings.weight": r(V, H),
        "decoder.layers.self_attention.linear_qkv.layer_norm_weight": r(L, H),
        "decoder.layers.self_attention.linear_qkv.weight": r(L, qkv_rows, H),
        "decoder.layers.self_attention.linear_proj.weight": r(L, H, NH * D),
        "decoder.layers.mlp.linear_fc1.layer_norm_weight": r(L, H),
        "decoder.layers.mlp.linear_fc1.weight": r(L, 2 * I, H),
        "decoder.layers.mlp.linear_fc2.weight": r(L, H, I),
        "decoder.final_layernorm.weight": r(H),
        "output_layer.weight": r(V, H),
    }


def fragments(key, t, rank):
    """(offsets, local tensor) of what TP rank `rank` saves for key."""
    out = []
    stacked = key.startswith("decoder.layers.")
    layers = range(L) if stacked else [None]
    for l in layers:
        x = t[l] if l is not None else t
        pre = [l] if l is not None else []
        if key.endswith("linear_qkv.weight") or key == "embedding.word_embeddings.weight" or key == "output_layer.weight":
            n = x.shape[0] // TP
            out.append((pre + [rank * n, 0], x[rank * n:(rank + 1) * n]))
        elif key.endswith("linear_proj.weight") or key.endswith("linear_fc2.weight"):
            n = x.shape[1] // TP
            out.append((pre + [0, rank * n], x[:, rank * n:(rank + 1) * n]))
        elif key.endswith("linear_fc1.weight"):
            n = I // TP  # [gate; up]: each rank two fragments
            out.append((pre + [rank * n, 0], x[rank * n:(rank + 1) * n]))
            out.append((pre + [I + rank * n, 0], x[I + rank * n:I + (rank + 1) * n]))
        else:  # replicated: replica 0 (rank 0) saves it
            if rank == 0:
                out.append((pre + [0] * x.dim(), x))
    return [(o, v.unsqueeze(0) if stacked else v) for o, v in out]


def sharded(key, t, rank, world):
    shards = []
    for off, loc in fragments(key, t, rank):
        md = ShardMetadata(shard_offsets=list(off), shard_sizes=list(loc.shape), placement="rank:%d/cpu" % rank)
        shards.append(Shard(tensor=loc.contiguous().clone(), metadata=md))
    all_md = []
    for r in range(world):
        for off, loc in fragments(key, t, r):
            all_md.append(ShardMetadata(shard_offsets=list(off), shard_sizes=list(loc.shape), placement="rank:%d/cpu" % r))
    gmd = ShardedTensorMetadata(shards_metadata=all_md, size=t.shape,
                                tensor_properties=TensorProperties(dtype=t.dtype, requires_grad=False))
    return ShardedTensor._init_from_local_shards_and_global_metadata(shards, gmd)


def worker(rank, world, iterdir, port, shape=None, hf=None):
    global HF
    if shape is not None:  # spawned processes start from the module's defaults
        set_shape(*shape)
        HF = hf
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = full_model()
    sd = {k: sharded(k, t, rank, world) for k, t in model.items()}
    # optimizer state beside the weights (distributed optimizer, fp32)
    sd["optimizer.state.exp_avg.decoder.layers.mlp.linear_fc2.weight"] = sharded(
        "decoder.layers.mlp.linear_fc2.weight", torch.full((L, H, I), 0.5), rank, world)
    # a TransformerEngine _extra_state ShardedObject: a BytesIO, replica 0 only
    if rank == 0:
        sd["decoder.layers.self_attention.linear_qkv._extra_state/shard_0.0_1.2"] = io.BytesIO(b"te-fp8-meta")
    dcp.save(sd, checkpoint_id=iterdir, planner=DefaultSavePlanner(flatten_state_dict=False))
    dist.barrier()
    dist.destroy_process_group()


def main(out, name="megatron", extra_args=None):
    save = os.path.join(out, name)
    iterdir = os.path.join(save, "iter_0000010")
    os.makedirs(iterdir, exist_ok=True)
    shape = (L, H, NH, NG, D, I, V, TP)
    mp.spawn(worker, args=(TP, iterdir, 29531, shape, HF), nprocs=TP, join=True)
    with open(os.path.join(iterdir, "metadata.json"), "w") as f:
        json.dump({"sharded_backend": "torch_dist", "sharded_backend_version": 1,
                   "common_backend": "torch"}, f)
    args = argparse.Namespace(num_layers=L, hidden_size=H, num_attention_heads=NH, num_query_groups=NG,
                              ffn_hidden_size=I, padded_vocab_size=V, tensor_model_parallel_size=TP,
                              swiglu=True, group_query_attention=True, **(extra_args or {}))
    torch.save({"args": args, "checkpoint_version": 3.0, "iteration": 10}, os.path.join(iterdir, "common.pt"))
    with open(os.path.join(save, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write("10")
    # what the model's state_dict holds, per layer, TP merged
    exp = {}
    for k, t in full_model().items():
        if k.startswith("decoder.layers."):
            for l in range(L):
                exp["decoder.layers.%d.%s" % (l, k[len("decoder.layers."):])] = t[l].clone()
        else:
            exp[k] = t
    torch.save(exp, os.path.join(out, name + "_expected.pt"))
    print("wrote", save)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--from-hf")
    ap.add_argument("--name", default="megatron")
    ap.add_argument("--tp", type=int, default=2)
    a = ap.parse_args()
    extra = None
    if a.from_hf:
        with open(os.path.join(a.from_hf, "config.json")) as f:
            cfg = json.load(f)
        HF = from_hf(torch.load(os.path.join(a.from_hf, "model.pt")), cfg, a.tp)
        extra = dict(kv_channels=D, make_vocab_size_divisible_by=128, pipeline_model_parallel_size=1,
                     normalization="RMSNorm", position_embedding_type="rope",
                     untie_embeddings_and_output_weights="output_layer.weight" in HF,
                     add_bias_linear=False, add_qkv_bias=False, bf16=True)
    main(a.out, a.name, extra)
