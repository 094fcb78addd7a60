"""The optimizer state tpconv wrote, checked by value in Debian's torch 1.13
(optim_test.sh runs it once; one TAP line per check on stdout).

    optim_check.py FIXTURE OPTIMIZER.pt MODEL.pt D4

FIXTURE is tests/data/dcp/optim_tagged (make_optim.py: parameter number k of
named_parameters, element i of its C order holds k*10000 + i + 0.25, its
exp_avg k*10000 + i, its exp_avg_sq 1e6 + k*10000 + i, its step 100 + k;
names.json the names and param_groups' order). OPTIMIZER.pt is tpconv's
`convert --optimizer`, MODEL.pt its `convert --select model`, D4 its
`convert --format dcp --dcp-ranks 4` folder (its .metadata read without torch
through dcp_meta.py)."""
import json
import os
import sys

import torch

fix, opt_path, model_path, d4 = sys.argv[1:5]
names = json.load(open(os.path.join(fix, "names.json")))
n = 0


def tap(good, what, why=""):
    global n
    n += 1
    print(("ok %d - %s" if good else "not ok %d - %s") % (n, what))
    if not good and why:
        print("# " + str(why)[:400])


# torch 1.13's weights_only unpickler lacks BINFLOAT (opcode G, the learning rate):
# the default unpickler here; torch 2.x loads it with weights_only=True (interop)
opt = torch.load(opt_path)
model = torch.load(model_path, weights_only=True)
order = names["param_groups"]           # parameter k of optimizer.pt is order[k]
tag_of = {nm: k for k, nm in enumerate(names["named_parameters"])}
tap(sorted(opt) == ["param_groups", "state"] and isinstance(opt["param_groups"], list),
    "optimizer.pt is {'state', 'param_groups': [...]}", sorted(opt))
g = opt["param_groups"]
tap(len(g) == 2 and g[0]["params"] == list(range(16)) and g[1]["params"] == list(range(16, 21))
    and g[0]["weight_decay"] == 0.1 and g[1]["weight_decay"] == 0.0 and g[0]["betas"] == (0.9, 0.95)
    and g[0]["lr"] == 0.01 and g[0]["eps"] == 1e-8 and list(g[0])[-1] == "params",
    "param_groups: two groups, params numbered 0-15 and 16-20 in order, hyper-parameters kept, params last",
    g)
bad = []
for k, nm in enumerate(order):
    t = tag_of[nm]
    st = opt["state"].get(k)
    w = model.get(nm)
    if st is None or w is None:
        bad.append((k, nm, "missing"))
        continue
    want = (torch.arange(w.numel(), dtype=torch.float64) + t * 10000).reshape(w.shape)
    if list(st) != ["exp_avg", "exp_avg_sq", "step"]:
        bad.append((k, nm, list(st)))
    elif not (torch.equal(st["exp_avg"].double(), want) and torch.equal(st["exp_avg_sq"].double(), want + 1e6)
              and torch.equal(w.double(), want + 0.25) and st["step"].shape == () and float(st["step"]) == 100 + t):
        bad.append((k, nm, "values"))
tap(not bad and len(opt["state"]) == 21,
    "each of 21 parameters (numbered in param_groups order): exp_avg, exp_avg_sq and step are its own, element i on the parameter's element i",
    bad)
# torch.optim takes it: the parameters in the groups' order, AdamW as it was built
params = [torch.nn.Parameter(model[nm].clone()) for nm in order]
adam = torch.optim.AdamW([{"params": params[:16], "weight_decay": 0.1}, {"params": params[16:], "weight_decay": 0.0}],
                         lr=0.01, betas=(0.9, 0.95), eps=1e-8)
try:
    adam.load_state_dict(opt)
    p0 = params[order.index("model.layers.1.mlp.up_proj.weight")]
    s0 = adam.state[p0]
    ok = torch.equal(s0["exp_avg"], opt["state"][order.index("model.layers.1.mlp.up_proj.weight")]["exp_avg"])
    for p in params:
        p.grad = torch.ones_like(p)
    adam.step()
    ok = ok and float(adam.state[p0]["step"]) == 100 + tag_of["model.layers.1.mlp.up_proj.weight"] + 1
    tap(ok, "torch.optim.AdamW.load_state_dict takes it (torch %s) and steps from it" % torch.__version__)
except Exception as ex:  # noqa: BLE001 - reported as a failing check
    tap(False, "torch.optim.AdamW.load_state_dict takes it", repr(ex))

# the 4-process folder: each moment cut exactly as its parameter, rows as torch.chunk cuts them
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dcp_meta  # noqa: E402

md = dcp_meta.load(os.path.join(d4, ".metadata"))
sdm = md.state_dict_metadata


def boxes(key):
    return sorted((tuple(c.offsets), tuple(c.sizes)) for c in sdm[key].chunks)


bad = []
for nm in order:
    pb = boxes("model." + nm)
    rows = sdm["model." + nm].size[0]
    per = -(-rows // 4)
    want = [((r * per,) + (0,) * (len(sdm["model." + nm].size) - 1),
             (min(per, rows - r * per),) + tuple(sdm["model." + nm].size[1:])) for r in range(4) if r * per < rows]
    if pb != sorted(want):
        bad.append(("model." + nm, pb))
    for m in ("exp_avg", "exp_avg_sq"):
        if boxes("optim.state.%s.%s" % (nm, m)) != pb:
            bad.append((nm, m, boxes("optim.state.%s.%s" % (nm, m))))
    if boxes("optim.state.%s.step" % nm) != [((), ())]:
        bad.append((nm, "step"))
files = {}
for k, v in md.storage_data.items():
    if k.fqn.startswith("optim.state.") and k.fqn.endswith(".exp_avg"):
        files.setdefault(v.relative_path, 0)
        files[v.relative_path] += 1
tap(not bad and sorted(files) == ["__%d_0.distcp" % r for r in range(4)],
    "dcp-ranks 4: every parameter's rows cut as torch.chunk over 4 (70 -> 18/18/18/16), each moment in exactly its parameter's chunks, steps whole",
    bad or files)
print("1..%d" % n)
