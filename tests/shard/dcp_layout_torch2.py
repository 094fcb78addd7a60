"""A `tpconv shard --layout dcp` set, loaded by real torch 2.x (run in the trixie
chroot: tests/dcp/README.md; dcp_layout_test.sh does it when /opt/trixie exists).

    python3 dcp_layout_torch2.py SETDIR REF.pt

torch's own dcp_to_torch_save of the set, and dcp.load into preallocated
tensors (as a training job resumes: every chunk of every rank file read into
the global tensor), must give the original state dict REF.pt bit for bit.
"""
import sys
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

d, ref = sys.argv[1], sys.argv[2]
b = torch.load(ref, weights_only=True)


def same(a, at):
    assert set(a) == set(b), (at, sorted(set(a) ^ set(b)))
    for k in b:
        x, y = a[k], b[k]
        assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), (at, k)


out = d.rstrip("/") + ".torch2.pt"
dcp_to_torch_save(d, out)
same(torch.load(out, weights_only=True), "dcp_to_torch_save")
sd = {k: torch.zeros_like(v) for k, v in b.items()}
dcp.load(sd, checkpoint_id=d)
same(sd, "dcp.load")
print("torch %s: dcp_to_torch_save and dcp.load give the original %d tensors bit for bit" % (torch.__version__, len(b)))
