"""A ZeRO checkpoint's model and Adam state as tpconv writes them into a DCP
folder (convert ZERO --optimizer --format dcp --dcp-ranks N), loaded by real
torch 2.x the way FSDP2 / torchtitan resume: get_state_dict of a module with
the same names, dcp.load, set_state_dict (run by tests/interop/optim.sh in the
forky chroot).

    zero_dcp_load.py DCP_DIR SEED STAGE OUT.json

make_zero.py wrote the ZeRO folder from model_tensors(SEED), every moment
derived from its own master element (exp_avg = master / 2, exp_avg_sq =
master * master), step 14. DeepSpeed's param_groups carry lr, betas, eps and
weight_decay only; torch's AdamW asks for its other hyper-parameters too, so
the load allows them to be absent (DefaultLoadPlanner(allow_partial_load=True):
AdamW keeps its own defaults for them). OUT.json lists what does not match."""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_zero  # noqa: E402

src, seed, stage, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
params, buffers, frozen, shared = make_zero.model_tensors(seed)
root = torch.nn.Module()


def owner(name):
    *path, last = name.split(".")
    m = root
    for c in path:
        if not hasattr(m, c):
            m.add_module(c, torch.nn.Module())
        m = getattr(m, c)
    return m, last


made = {}
for n, t in params.items():
    m, last = owner(n)
    made[n] = torch.nn.Parameter(torch.zeros_like(t), requires_grad=n not in frozen)
    m.register_parameter(last, made[n])
for n, b in buffers.items():
    m, last = owner(n)
    m.register_buffer(last, torch.zeros_like(b))
for a, s in shared.items():
    m, last = owner(a)
    setattr(m, last, made[s])
groups = make_zero.groups_of(params, frozen)
if stage == 3:
    groups = [[n for g in groups for n in g]]
    wds = [0.0]
else:
    wds = [0.01, 0.0]
opt = torch.optim.AdamW([{"params": [made[n] for n in g], "weight_decay": wd} for g, wd in zip(groups, wds)], lr=1e-4)
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29561", USE_LIBUV="0")
dist.init_process_group("gloo", rank=0, world_size=1)
msd, osd = get_state_dict(root, opt)
state = {"model": msd, "optim": osd}
dcp.load(state, checkpoint_id=src, planner=DefaultLoadPlanner(allow_partial_load=True))
set_state_dict(root, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
bad = []
for n, p in made.items():
    # frozen parameters are saved at training precision (make_zero's default bf16)
    want = params[n].to(torch.bfloat16).float() if n in frozen else params[n]
    if not torch.equal(p.detach(), want):
        bad.append((n, "weight"))
    if n in frozen:
        continue
    st = opt.state.get(p, {})
    if not (torch.equal(st.get("exp_avg", torch.zeros(0)), params[n] * 0.5) and
            torch.equal(st.get("exp_avg_sq", torch.zeros(0)), params[n] * params[n]) and float(st.get("step", -1)) == 14.0):
        bad.append((n, "state"))
dist.destroy_process_group()
with open(out, "w") as f:
    json.dump({"bad": bad, "params": len(made), "trainable": sum(len(g) for g in groups),
               "groups": [g["weight_decay"] for g in opt.param_groups]}, f, indent=1)
