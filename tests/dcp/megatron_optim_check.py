"""Checks an optimizer.pt tpconv made from a Megatron distributed-optimizer
save of make_megatron_optim.py: every moment and master on its own
parameter's elements, step and groups right, and torch.optim.AdamW loads it
and steps.

    /usr/bin/python3 megatron_optim_check.py optimizer.pt [more.pt ...]

Prints one TAP-ish line per file ("ok FILE: ..." or "not ok FILE: why").
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_megatron_optim import PARAMS, STEP, no_wd  # noqa: E402


def check(path):
    sd = torch.load(path)
    groups, state = sd["param_groups"], sd["state"]
    seen, shapes = {}, {}
    for g, grp in enumerate(groups):
        for k in grp["params"]:
            if k in seen:
                return "parameter %d in two groups" % k
            seen[k] = g
    if len(seen) != len(PARAMS) or len(state) != len(PARAMS):
        return "%d parameters, %d states, want %d" % (len(seen), len(state), len(PARAMS))
    ids = set()
    for k, st in state.items():
        ea = st["exp_avg"]
        pid = int(ea.reshape(-1)[0].item()) // 1024
        if pid < 0 or pid >= len(PARAMS) or pid in ids:
            return "state %d: exp_avg starts with %r (parameter id %d)" % (k, ea.reshape(-1)[0].item(), pid)
        ids.add(pid)
        name, _, _, shape, _ = PARAMS[pid]
        for key, add in (("exp_avg", 0.25), ("exp_avg_sq", 0.5), ("fp32_param", 0.75)):
            t = st[key]
            if tuple(t.shape) != tuple(shape) or t.dtype != torch.float32:
                return "%s %s: %s %s, want %s" % (name, key, t.dtype, tuple(t.shape), tuple(shape))
            want = (torch.arange(math.prod(shape), dtype=torch.float64) + pid * 1024 + add).float().reshape(shape)
            if not torch.equal(t, want):
                bad = (t != want).nonzero()[0].tolist()
                return "%s %s: element %s is %r, want %r" % (name, key, bad, t[tuple(bad)].item(), want[tuple(bad)].item())
        if st["step"].item() != STEP:
            return "%s: step %r" % (name, st["step"])
        # two groups, or four: a chained optimizer's dense then expert-parallel ones
        want = (1 if no_wd(name, shape) else 0) + (2 if len(groups) == 4 and ".mlp.experts." in name else 0)
        if seen[k] != want:
            return "%s in group %d (weight decay %r)" % (name, seen[k], groups[seen[k]]["weight_decay"])
        shapes[k] = shape
    # torch.optim loads it and steps
    ps = {k: torch.nn.Parameter(torch.zeros(shapes[k])) for k in shapes}
    opt = torch.optim.AdamW([{"params": [ps[k] for k in g["params"]]} for g in groups])
    opt.load_state_dict(sd)
    for p in ps.values():
        p.grad = torch.ones_like(p)
    opt.step()
    return None


bad = 0
for f in sys.argv[1:]:
    why = check(f)
    bad += why is not None
    f = os.path.join(os.path.basename(os.path.dirname(os.path.abspath(f))), os.path.basename(f))
    print(("not ok %s: %s" % (f, why)) if why else ("ok %s: %d parameters, each moment and master on its own elements, step %d, AdamW loads and steps" % (f, len(PARAMS), STEP)))
sys.exit(1 if bad else 0)
