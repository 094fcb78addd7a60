"""Genuine PyTorch Distributed Checkpoint (DCP) fixtures, written by real torch 2.x.

Run with torch >= 2.4 (Debian trixie's python3-torch 2.6 in a chroot; see
tests/dcp/README.md), not in `make test`:

    python3 make_dcp.py OUTDIR

writes, each a DCP folder (.metadata + __R_N.distcp) and beside it the file
real torch consolidates it to (torch.distributed.checkpoint.format_utils.
dcp_to_torch_save), which the tests compare tpconv's reading against:

  fsdp2/      2 gloo processes on a CPU mesh: DTensors sharded on dim 0 (even),
              dim 0 ragged (10 rows over 2 -> 5/5; 7 rows -> 4/3), dim 1, a
              replicated tensor (saved once: DCP dedups replicas), bf16, f16,
              int64 and bool tensors, and non-tensor items (step, nested dict).
  fsdp4/      4 processes: ragged dim 0 (10 rows -> 3/3/3/1), a 2-D mesh
              (2 x 2: Shard(0) x Shard(1)), dim 1, replicated.
  llama2/      a tiny LLaMA (HF names, GQA, vocab 100) as FSDP2 saves it on 2
              processes: every weight Shard(0) (vocab 100 -> 50/50, kv rows 16 -> 8/8,
              norms 32 -> 16/16); with llama2/config.json, for shard/merge tests.
  from_torch/ torch_save_to_dcp of a plain torch.save state dict (one chunk per
              tensor, one rank).
  *.pt        dcp_to_torch_save of each.
"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save, torch_save_to_dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor


def full_tensors(world):
    g = torch.Generator().manual_seed(1234 + world)
    r = lambda *s, dt=torch.float32: torch.randn(*s, generator=g).to(dt)
    return {
        "model.embed.weight": (r(10, 8), "shard0"),
        "model.layers.0.attn.qkv.weight": (r(12, 8), "shard0"),
        "model.layers.0.attn.o.weight": (r(8, 12), "shard1"),
        "model.layers.0.mlp.up.weight": (r(7, 8, dt=torch.bfloat16), "shard0"),
        "model.layers.0.mlp.down.weight": (r(8, 6, dt=torch.float16), "shard1"),
        "model.norm.weight": (r(8), "replicate"),
        "model.pos_ids": (torch.arange(10, dtype=torch.int64), "shard0"),
        "model.mask": (torch.rand(6, 4, generator=g) > 0.5, "shard0"),
        "model.grid": (r(6, 10), "grid"),
    }


def worker(rank, world, out, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["USE_LIBUV"] = "0"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    mesh2 = init_device_mesh("cpu", (2, world // 2)) if world == 4 else None
    model = {}
    for k, (t, how) in full_tensors(world).items():
        if how == "grid":
            if mesh2 is None:
                model[k] = distribute_tensor(t, mesh, [Shard(1)])
            else:
                model[k] = distribute_tensor(t, mesh2, [Shard(0), Shard(1)])
            continue
        pl = {"shard0": [Shard(0)], "shard1": [Shard(1)], "replicate": [Replicate()]}[how]
        model[k] = distribute_tensor(t, mesh, pl)
    state = {"model": model, "step": 7, "extra": {"lr": 0.125, "names": ["a", "b"], "epoch": 3}}
    dcp.save(state, checkpoint_id=out)
    dist.barrier()
    dist.destroy_process_group()


def llama_state():
    g = torch.Generator().manual_seed(4321)
    r = lambda *s: torch.randn(*s, generator=g)
    H, I, V, hd, nh, nkv = 32, 48, 100, 8, 4, 2
    sd = {"model.embed_tokens.weight": r(V, H)}
    for i in range(2):
        p = "model.layers.%d." % i
        sd[p + "self_attn.q_proj.weight"] = r(nh * hd, H)
        sd[p + "self_attn.k_proj.weight"] = r(nkv * hd, H)
        sd[p + "self_attn.v_proj.weight"] = r(nkv * hd, H)
        sd[p + "self_attn.o_proj.weight"] = r(H, nh * hd)
        sd[p + "mlp.gate_proj.weight"] = r(I, H)
        sd[p + "mlp.up_proj.weight"] = r(I, H)
        sd[p + "mlp.down_proj.weight"] = r(H, I)
        sd[p + "input_layernorm.weight"] = r(H)
        sd[p + "post_attention_layernorm.weight"] = r(H)
    sd["model.norm.weight"] = r(H)
    sd["lm_head.weight"] = r(V, H)
    cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": H, "intermediate_size": I,
           "num_attention_heads": nh, "num_key_value_heads": nkv, "vocab_size": V,
           "num_hidden_layers": 2, "tie_word_embeddings": False}
    return sd, cfg


def llama_worker(rank, world, out, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["USE_LIBUV"] = "0"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    sd, _ = llama_state()
    # what FSDP2's fully_shard holds: every parameter Shard(0) on the mesh
    model = {k: distribute_tensor(t, mesh, [Shard(0)]) for k, t in sd.items()}
    dcp.save(model, checkpoint_id=out)
    dist.barrier()
    dist.destroy_process_group()


def write_dist(out, world, port):
    os.makedirs(out, exist_ok=True)
    mp.spawn(worker, args=(world, out, port), nprocs=world, join=True)


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    write_dist(os.path.join(outdir, "fsdp2"), 2, 29511)
    write_dist(os.path.join(outdir, "fsdp4"), 4, 29512)
    ld = os.path.join(outdir, "llama2")
    os.makedirs(ld, exist_ok=True)
    mp.spawn(llama_worker, args=(2, ld, 29513), nprocs=2, join=True)
    import json
    with open(os.path.join(ld, "config.json"), "w") as f:
        json.dump(llama_state()[1], f, indent=2)
    # torch_save_to_dcp: a plain state dict, one chunk per tensor
    g = torch.Generator().manual_seed(99)
    sd = {"w": torch.randn(4, 6, generator=g), "b": torch.randn(6, generator=g).to(torch.bfloat16),
          "n": torch.tensor(5), "meta": {"epoch": 2}}
    with tempfile.TemporaryDirectory() as td:
        p = os.path.join(td, "plain.pt")
        torch.save(sd, p)
        torch_save_to_dcp(p, os.path.join(outdir, "from_torch"))
    for name in ("fsdp2", "fsdp4", "llama2", "from_torch"):
        dcp_to_torch_save(os.path.join(outdir, name), os.path.join(outdir, name + ".pt"))
    print("wrote", sorted(os.listdir(outdir)))


if __name__ == "__main__":
    main(sys.argv[1])
