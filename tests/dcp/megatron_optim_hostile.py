"""Hostile variants of a make_megatron_optim.py save: common.pt rewritten.

    /usr/bin/python3 megatron_optim_hostile.py SRC_SAVE DST MUTATION...

copies the save folder SRC_SAVE to DST/N for the N-th MUTATION (from 0) and
rewrites its iteration's common.pt (torch 1.13 or later) with it (one
process for all: importing torch is the cost):
  type:NAME   param_state_sharding_type is NAME ('dp_reshardable': Megatron's
              current default, flat buckets without parameter names)
  groups3     a third param group (decoupled lr: membership not recorded)
  nostep      the param groups lose their step
  nooptim     no 'optimizer' at all
"""
import os
import shutil
import sys

import torch

def mutate(src, dst, mut):
    shutil.copytree(src, dst)
    it = os.path.join(dst, "iter_0000007", "common.pt")
    c = torch.load(it)
    o = c["optimizer"]
    if mut.startswith("type:"):
        o["param_state_sharding_type"] = mut[5:]
    elif mut == "groups3":
        o["optimizer"]["param_groups"].append(dict(o["optimizer"]["param_groups"][0], max_lr=3e-3))
    elif mut == "nostep":
        for g in o["optimizer"]["param_groups"]:
            del g["step"]
    elif mut == "nooptim":
        del c["optimizer"]
    else:
        sys.exit("unknown mutation " + mut)
    torch.save(c, it)


for i, m in enumerate(sys.argv[3:]):
    mutate(sys.argv[1], os.path.join(sys.argv[2], str(i)), m)
