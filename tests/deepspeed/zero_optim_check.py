"""tpconv's optimizer.pt of a ZeRO checkpoint, checked by value in torch 1.13
(zero_test.sh runs it once; one TAP line per file on stdout).

    zero_optim_check.py OPTIMIZER.pt:SEED ...

make_zero.py wrote the checkpoint from model_tensors(SEED), every Adam moment
derived from its own fp32 master element (exp_avg = master / 2, exp_avg_sq =
master * master), step 14, HF Trainer's groups (decay: 2-D and up, then the
rest; frozen parameters in none). Parameter k of optimizer.pt must be the
k-th of those groups' lists, and AdamW must load it."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_zero  # noqa: E402

n = 0
for arg in sys.argv[1:]:
    path, seed = arg.rsplit(":", 1)
    params, _, frozen, _ = make_zero.model_tensors(int(seed))
    order = [nm for grp in make_zero.groups_of(params, frozen) for nm in grp]
    opt = torch.load(path)
    bad = []
    for k, nm in enumerate(order):
        st, w = opt["state"].get(k), params[nm]
        if st is None or not (torch.equal(st["exp_avg"], w * 0.5) and torch.equal(st["exp_avg_sq"], w * w)
                              and float(st["step"]) == 14.0 and st["exp_avg"].shape == w.shape):
            bad.append(nm)
    flat = [i for g in opt["param_groups"] for i in g["params"]]
    if flat != list(range(len(order))) or len(opt["state"]) != len(order):
        bad.append(("params", flat))
    try:
        ps = [torch.nn.Parameter(params[nm].clone()) for nm in order]
        groups, at = [], 0
        for g in opt["param_groups"]:
            groups.append({"params": ps[at:at + len(g["params"])], "weight_decay": g["weight_decay"]})
            at += len(g["params"])
        adam = torch.optim.AdamW(groups, lr=1e-4)
        adam.load_state_dict(opt)
        for p in ps:
            p.grad = torch.ones_like(p)
        adam.step()
    except Exception as ex:  # noqa: BLE001 - reported as a failing check
        bad.append(repr(ex))
    n += 1
    print(("ok %d - %s" if not bad else "not ok %d - %s") % (
        n, "%s: each of %d parameters' exp_avg, exp_avg_sq and step from its own master's elements, in the groups' order; AdamW loads it and steps" % (
            os.path.basename(os.path.dirname(path)) or path, len(order))))
    if bad:
        print("# " + repr(bad)[:400])
