#!/usr/bin/env python3
"""An independent re-implementation, in torch, of DeepSpeed's
deepspeed/utils/zero_to_fp32.py consolidation (get_fp32_state_dict_from_zero_checkpoint):
the reference tpconv's DeepSpeed reader is checked against. It loads the files
with torch.load (DeepSpeed's classes from make_zero's stand-ins) and follows
the script step by step: natural file order, partition_count check, stage <= 2
groups cat'ed across ranks with the 2 x world-size alignment sanity check,
stage 3 per-parameter ceil(numel / world) pieces, frozen fragments, buffers,
shared params. One deliberate difference, as tpconv documents: integer
buffers keep their dtype (zero_to_fp32's v.float() would make them float).

usage: zero_ref.py CHECKPOINT_DIR OUT.pt
"""
import glob
import math
import os
import re
import sys
from collections import OrderedDict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_zero  # noqa: E402

make_zero.install_stand_ins()


def natural_keys(text):
    return [int(c) if c.isdigit() else c for c in re.split(r'(\d+)', text)]


def files(d, pat):
    return sorted(glob.glob(os.path.join(d, pat)), key=natural_keys)


def consolidate(top):
    with open(os.path.join(top, 'latest')) as f:
        d = os.path.join(top, f.read().strip())
    models = [torch.load(f) for f in files(d, '*_model_states.pt')]
    optims = [torch.load(f)['optimizer_state_dict'] for f in files(d, '*_optim_states.pt')]
    stage = int(optims[0]['zero_stage'])
    ws = optims[0]['partition_count']
    ws = max(ws) if isinstance(ws, list) else ws
    assert ws == len(optims), (ws, len(optims))
    m0 = models[0]
    out = OrderedDict()
    for k, v in m0['module'].items():
        if k in m0['buffer_names']:
            out[k] = v.float() if v.is_floating_point() else v
    fshapes = m0.get('frozen_param_shapes') or {}
    for name, shape in fshapes.items():
        if stage <= 2:
            out[name] = m0['frozen_param_fragments'][name]
        else:
            frags = [m['frozen_param_fragments'][name] for m in models]
            out[name] = torch.cat(frags, 0).narrow(0, 0, shape.numel()).view(shape)
    if stage <= 2:
        groups = [o['single_partition_of_fp32_groups'] for o in optims]
        for gi, shapes in enumerate(m0['param_shapes']):
            full = torch.cat([g[gi] for g in groups], 0)
            off = 0
            for name, shape in shapes.items():
                n = shape.numel()
                out[name] = full.narrow(0, off, n).view(shape).clone()
                off += n
            align = 2 * ws
            assert align * math.ceil(off / align) == align * math.ceil(full.numel() / align)
    else:
        flat = [torch.cat(o['fp32_flat_groups'], 0) for o in optims]
        shapes = {k: v for dct in m0['param_shapes'] for k, v in dct.items()}
        off = 0
        for name, shape in shapes.items():
            n = shape.numel()
            pn = math.ceil(n / ws)
            out[name] = torch.cat([f[off:off + pn] for f in flat], 0)[:n].view(shape).clone()
            off += pn
        assert off == flat[0].numel()
    for alias, src in m0['shared_params'].items():
        if src in out:
            out[alias] = out[src]
    return out


if __name__ == '__main__':
    torch.save(consolidate(sys.argv[1]), sys.argv[2])
