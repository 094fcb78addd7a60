"""tpconv's DCP output, loaded by real torch 2.x (run in the trixie chroot, see README.md).

    tpconv convert tests/data/dcp/fsdp4 -o DIR/fsdp4_dcp --format dcp
    tpconv convert tests/data/dcp/llama2.pt -o DIR/llama_dcp --format dcp
    cp tests/data/dcp/fsdp4.pt tests/data/dcp/llama2.pt DIR/
    (in the chroot) cd DIR && python3 torch2_check.py

Checks that torch's own dcp_to_torch_save and dcp.load (into preallocated
tensors, as a training job resumes) give the reference checkpoints bit for bit.
"""
import torch, torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
import sys
def eq(x, y, at=""):
    if isinstance(x, torch.Tensor):
        assert isinstance(y, torch.Tensor) and x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), at
    elif isinstance(x, dict):
        assert set(x) == set(y), (at, set(x) ^ set(y))
        for k in x: eq(x[k], y[k], at + "." + str(k))
    elif isinstance(x, (list, tuple)):
        assert len(x) == len(y)
        for i, (a, b) in enumerate(zip(x, y)): eq(a, b, at + str(i))
    else:
        assert x == y, (at, x, y)
for d, ref in (("fsdp4_dcp", "fsdp4.pt"), ("llama_dcp", "llama2.pt")):
    dcp_to_torch_save(d, d + ".pt")
    a = torch.load(d + ".pt", weights_only=False); b = torch.load(ref, weights_only=False)
    eq(a, b)
    # dcp.load into preallocated tensors, as a training job resumes (no process group)
    sd = {k: torch.zeros_like(v) if isinstance(v, torch.Tensor) else v for k, v in b.items()} if d == "llama_dcp" else \
         {"model": {k: torch.zeros_like(v) for k, v in b["model"].items()}, "step": 0, "extra": {}}
    dcp.load(sd, checkpoint_id=d)
    if d == "llama_dcp":
        eq(sd, b)
    else:
        eq(sd["model"], b["model"]); assert sd["step"] == 7, sd["step"]
    print(d, "ok: dcp_to_torch_save and dcp.load give the reference bit for bit")
