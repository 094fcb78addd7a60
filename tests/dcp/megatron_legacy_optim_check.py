"""Checks an optimizer.pt tpconv joined from a legacy Megatron set of
make_megatron_legacy_optim.py (convert SET --optimizer --preset llama): the
state of the merged model's Hugging Face parameters (q/k/v_proj unfused from
linear_qkv per query group, gate/up_proj from linear_fc1's halves), every
moment and master on its own parameter's element, step and groups right, and
torch.optim.AdamW loads it and steps.

    /usr/bin/python3 megatron_legacy_optim_check.py optimizer.pt [more.pt ...]
    /usr/bin/python3 megatron_legacy_optim_check.py --weights HF.bin optimizer.pt [...]

(MEGATRON_OPTIM_LAYERS=4 for the 4-layer sets of make_megatron_legacy_optim.py
--vpp.) With --weights, the state comes from make_megatron_legacy_ep.py
--optimizer, whose values are functions of their own parameter's weight W
(fp32 master W, exp_avg 2 W, exp_avg_sq 4 W) and HF.bin is the Hugging Face
model the set was made from: each state must be one HF tensor's, every
tensor's once, a routed expert's (".experts.") in an is_expert_parallel
group (the chained optimizer's expert part), 1-D ones at wd_mult 0.

Prints one TAP-ish line per file ("ok FILE: ..." or "not ok FILE: why").
Megatron parameter k's element i carries k*1024 + i + 0.25 (exp_avg), + 0.5
(exp_avg_sq), + 0.75 (master), so the first exp_avg value of a state names
its Megatron parameter and where in it the Hugging Face tensor begins.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_megatron_optim import I, PARAMS, STEP, tagged  # noqa: E402

HEADS, GROUPS, D = 2, 2, 4  # make_megatron_legacy_optim.py's args


def hf_parts():
    """{(k, first element): (HF-ish label, slicer of Megatron tensor k)}"""
    out = {}
    hpg = HEADS // GROUPS
    per = (hpg + 2) * D
    for k, (name, key, l, shape, split) in enumerate(PARAMS):
        if "linear_qkv.weight" in name or "linear_qkv.bias" in name:
            row = shape[1] if len(shape) == 2 else 1
            for j, (off, n) in enumerate(((0, hpg * D), (hpg * D, D), ((hpg + 1) * D, D))):
                rows = [g * per + off + r for g in range(GROUPS) for r in range(n)]
                out[(k, off * row)] = ("%s[%s]" % (name, "qkv"[j]), lambda t, rows=rows: t[rows])
        elif "linear_fc1.weight" in name:
            out[(k, 0)] = (name + "[gate]", lambda t: t[:I])
            out[(k, I * shape[1])] = (name + "[up]", lambda t: t[I:])
        else:
            out[(k, 0)] = (name, lambda t: t)
    return out


def check(path):
    sd = torch.load(path)
    groups, state = sd["param_groups"], sd["state"]
    parts = hf_parts()
    seen, shapes, found = {}, {}, set()
    for g, grp in enumerate(groups):
        for k in grp["params"]:
            if k in seen:
                return "parameter %d in two groups" % k
            seen[k] = g
    if len(seen) != len(parts) or len(state) != len(parts):
        return "%d parameters, %d states, want %d" % (len(seen), len(state), len(parts))
    for n, st in state.items():
        first = int(st["exp_avg"].reshape(-1)[0].item() - 0.25)
        key = (first // 1024, first % 1024)
        if key not in parts or key in found:
            return "state %d: exp_avg begins with %r: no Hugging Face tensor begins there" % (n, first + 0.25)
        found.add(key)
        label, cut = parts[key]
        shape = PARAMS[key[0]][3]
        for name, add in (("exp_avg", 0.25), ("exp_avg_sq", 0.5), ("fp32_param", 0.75)):
            t = st[name]
            want = cut(tagged(key[0], shape, add))
            if t.dtype != torch.float32 or t.shape != want.shape:
                return "%s %s: %s %s, want %s" % (label, name, t.dtype, tuple(t.shape), tuple(want.shape))
            if not torch.equal(t, want):
                bad = (t != want).nonzero()[0].tolist()
                return "%s %s: element %s is %r, want %r" % (label, name, bad, t[tuple(bad)].item(), want[tuple(bad)].item())
        if st["step"].item() != STEP:
            return "%s: step %r" % (label, st["step"])
        nowd = st["exp_avg"].dim() == 1  # 1-D: the layer norms and the q/k/v biases
        if (groups[seen[n]]["wd_mult"] == 0) != nowd:
            return "%s in group %d (wd_mult %r)" % (label, seen[n], groups[seen[n]]["wd_mult"])
        shapes[n] = st["exp_avg"].shape
    ps = {k: torch.nn.Parameter(torch.zeros(shapes[k])) for k in shapes}
    opt = torch.optim.AdamW([{"params": [ps[k] for k in g["params"]]} for g in groups])
    opt.load_state_dict(sd)
    for p in ps.values():
        p.grad = torch.ones_like(p)
    opt.step()
    return None


def check_weights(path, hf):
    sd = torch.load(path)
    groups, state = sd["param_groups"], sd["state"]
    seen, used = {}, set()
    for g, grp in enumerate(groups):
        for k in grp["params"]:
            seen[k] = g
    if len(seen) != len(hf) or len(state) != len(hf):
        return "%d parameters, %d states, want %d" % (len(seen), len(state), len(hf))
    for n, st in state.items():
        w = [name for name, t in hf.items() if t.shape == st["fp32_param"].shape and torch.equal(t.float(), st["fp32_param"])]
        if len(w) != 1 or w[0] in used:
            return "state %d: its master is %s" % (n, "no Hugging Face tensor" if not w else "%r (again)" % w)
        used.add(w[0])
        t = hf[w[0]].float()
        for key, mul in (("exp_avg", 2.0), ("exp_avg_sq", 4.0)):
            if st[key].dtype != torch.float32 or not torch.equal(st[key], t * mul):
                return "%s %s: not %g x its weight" % (w[0], key, mul)
        if st["step"].item() != STEP:
            return "%s: step %r" % (w[0], st["step"])
        grp = groups[seen[n]]
        if grp["is_expert_parallel"] != (".experts." in w[0]) or (grp["wd_mult"] == 0) != (t.dim() == 1):
            return "%s in group %d (is_expert_parallel %r, wd_mult %r)" % (w[0], seen[n], grp["is_expert_parallel"], grp["wd_mult"])
    ps = {k: torch.nn.Parameter(torch.zeros(state[k]["exp_avg"].shape)) for k in state}
    opt = torch.optim.AdamW([{"params": [ps[k] for k in g["params"]]} for g in groups])
    opt.load_state_dict(sd)
    for q in ps.values():
        q.grad = torch.ones_like(q)
    opt.step()
    return None


bad = 0
if sys.argv[1] == "--weights":
    hf = torch.load(sys.argv[2])
    for f in sys.argv[3:]:
        why = check_weights(f, hf)
        bad += why is not None
        f = os.path.join(os.path.basename(os.path.dirname(os.path.abspath(f))), os.path.basename(f))
        print(("not ok %s: %s" % (f, why)) if why else
              ("ok %s: %d Hugging Face parameters, each master and moment its own weight's, experts in the expert-parallel groups, AdamW loads and steps"
               % (f, len(hf))))
    sys.exit(1 if bad else 0)
for f in sys.argv[1:]:
    why = check(f)
    bad += why is not None
    f = os.path.join(os.path.basename(os.path.dirname(os.path.abspath(f))), os.path.basename(f))
    print(("not ok %s: %s" % (f, why)) if why else
          ("ok %s: %d Hugging Face parameters, each moment and master on its own Megatron element, step %d, AdamW loads and steps"
           % (f, len(hf_parts()), STEP)))
sys.exit(1 if bad else 0)
