"""Inside the chroot: build the tiny models with transformers (from_config,
random fp32 weights, save_pretrained; no hub) and write families.tsv for the
driver; then genuine torch DCP saves for tpconv to read (genuine/NAME/, the
full tensors they hold in genuine/NAME.ref.pt); versions.txt.
usage: gen.py WORK"""
import os
import subprocess
import sys

import torch
import torch.distributed.checkpoint as dcp
import transformers

import dist_util
from families import FAMILIES, ONLY, auto_class, result


def versions(work):
    import accelerate
    import numpy
    import safetensors
    deb = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", "python3-torch",
                          "python3-transformers", "python3-safetensors", "python3-accelerate",
                          "llama.cpp-tools", "python3-gguf"], capture_output=True, text=True).stdout
    with open(f"{work}/versions.txt", "w") as f:
        f.write(f"torch={torch.__version__}\ntransformers={transformers.__version__}\n"
                f"safetensors={safetensors.__version__}\naccelerate={accelerate.__version__}\n"
                f"numpy={numpy.__version__}\n")
        for line in deb.splitlines():
            f.write("deb:" + line + "\n")


def models(work):
    os.makedirs(f"{work}/models", exist_ok=True)
    with open(f"{work}/families.tsv", "w") as tsv:
        for i, (name, (preset, mtype, kind, over, tps)) in enumerate(FAMILIES.items()):
            try:
                cfg = transformers.AutoConfig.for_model(mtype, bos_token_id=1, eos_token_id=2, **over)
                cfg.dtype = "float32"
                torch.manual_seed(100 + i)
                model = auto_class(kind).from_config(cfg, dtype=torch.float32)
                # from_config leaves norms at 1 and biases at 0: make every value
                # distinct so a swapped or misplaced slice shows
                with torch.no_grad():
                    for p in model.parameters():
                        p.normal_(0, 0.05 if p.dim() > 1 else 1.0)
                model.save_pretrained(f"{work}/models/{name}")
                tsv.write(f"{name}\t{preset}\t{' '.join(map(str, tps))}\t{kind}\n")
                print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters")
            except Exception as e:
                result(work, "transformers", name, "build the model (from_config)", "", "fail", e)


def flatten(obj, prefix, out):
    """DCP's flattening of a nested state dict: keys joined by '.', list items by index."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flatten(v, f"{prefix}.{i}", out)
    elif isinstance(obj, torch.Tensor):
        out[prefix] = obj.detach().clone()
    return out


def train_step(model, opt, vocab):
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, vocab, (2, 8), generator=g)
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()


def fsdp2(rank, world, work):
    """FSDP2 fully_shard on a 1-D CPU mesh, one AdamW step: model and optimizer."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (world,))
    m = transformers.AutoModelForCausalLM.from_pretrained(f"{work}/models/llama", dtype=torch.float32)
    for layer in m.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    train_step(m, opt, m.config.vocab_size)
    msd, osd = get_state_dict(m, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=f"{work}/genuine/fsdp2-adamw")
    fmsd, fosd = get_state_dict(m, opt, options=StateDictOptions(full_state_dict=True))
    if rank == 0:
        torch.save(flatten({"model": fmsd, "optim": fosd}, "", {}), f"{work}/genuine/fsdp2-adamw.ref.pt")


def fsdp_tp(rank, world, work):
    """2-D mesh: tensor parallel (dim 'tp', torch's Colwise/Rowwise) inside,
    FSDP2 over 'dp': dim-0 sharded twice, saved as _StridedShard."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp", "tp"))
    m = transformers.AutoModelForCausalLM.from_pretrained(f"{work}/models/llama", dtype=torch.float32)
    col, row = ColwiseParallel(), RowwiseParallel()
    plan = {"self_attn.q_proj": col, "self_attn.k_proj": col, "self_attn.v_proj": col,
            "self_attn.o_proj": row, "mlp.gate_proj": col, "mlp.up_proj": col, "mlp.down_proj": row}
    for layer in m.model.layers:
        parallelize_module(layer, mesh["tp"], plan)
        fully_shard(layer, mesh=mesh["dp"])
    fully_shard(m, mesh=mesh["dp"])
    msd, _ = get_state_dict(m, [])
    kinds = sorted({str(v.placements) for v in msd.values() if hasattr(v, "placements")})
    dcp.save({"model": msd}, checkpoint_id=f"{work}/genuine/fsdp-tp-2x2")
    full, _ = get_state_dict(m, [], options=StateDictOptions(full_state_dict=True))
    if rank == 0:
        torch.save(flatten({"model": full}, "", {}), f"{work}/genuine/fsdp-tp-2x2.ref.pt")
        with open(f"{work}/genuine/fsdp-tp-2x2.placements", "w") as f:
            f.write(" ".join(kinds))


def genuine(work):
    os.makedirs(f"{work}/genuine", exist_ok=True)
    # plain state dicts, one process, no process group
    for fam in ("llama", "gpt2", "mixtral"):
        try:
            sd = auto_class("causal").from_pretrained(f"{work}/models/{fam}", dtype=torch.float32).state_dict()
            dcp.save(sd, checkpoint_id=f"{work}/genuine/plain-{fam}", no_dist=True)
            torch.save(flatten(sd, "", {}), f"{work}/genuine/plain-{fam}.ref.pt")
        except Exception as e:
            result(work, "torch", f"plain-{fam}", "tpconv reads a torch DCP save", "dcp.save", "fail", e)
    for name, fn, world in (("fsdp2-adamw", fsdp2, 2), ("fsdp-tp-2x2", fsdp_tp, 4)):
        why = dist_util.launch(fn, world, work)
        if why:
            result(work, "torch", name, "tpconv reads a torch DCP save", "dcp.save", "fail",
                   f"the torch save itself failed: {why}")


if __name__ == "__main__":
    work = os.path.abspath(sys.argv[1])
    versions(work)
    models(work)
    if not ONLY:  # the genuine saves are of llama, gpt2 and mixtral, not of the families asked for
        genuine(work)
