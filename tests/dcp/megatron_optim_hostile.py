"""Hostile variants of a make_megatron_optim.py save: common.pt rewritten.

    /usr/bin/python3 megatron_optim_hostile.py SRC_SAVE DST MUTATION|SAVE...

copies the save folder SRC_SAVE (or the last SAVE named before it) to DST/N
for the N-th MUTATION (from 0) and
rewrites its iteration's common.pt (torch 1.13 or later) with it (one
process for all: importing torch is the cost):
  type:NAME   param_state_sharding_type is NAME ('fully_sharded_bucket_space':
              not read)
  groups3     a third param group (decoupled lr: membership not recorded)
  nostep      the param groups lose their step
  nooptim     no 'optimizer' at all
  args:K=V    args.K = V (an int)
and of a legacy save (make_megatron_legacy_optim.py), its rank file's args or
its distrib_optim.pt:
  args:K=V    args.K = V (an int)
  uncoalesced distrib_optim.pt without buckets_coalesced (the pre-2024 form)
  twobuffers  a second parameter buffer
"""
import os
import shutil
import sys

import torch

def mutate(src, dst, mut):
    shutil.copytree(src, dst)
    it = os.path.join(dst, "iter_0000007", "common.pt")
    rank = os.path.join(dst, "iter_0000007", "mp_rank_00")
    if not os.path.exists(it):  # a legacy save: its rank file and distrib_optim.pt
        mf, of = os.path.join(rank, "model_optim_rng.pt"), os.path.join(rank, "distrib_optim.pt")
        m, d = torch.load(mf), torch.load(of)
        if mut.startswith("args:"):
            k, v = mut[5:].split("=")
            setattr(m["args"], k, int(v))
        elif mut == "uncoalesced":
            del d["buckets_coalesced"]
        elif mut == "twobuffers":
            d[1] = {k: {kk: (vv.clone() if torch.is_tensor(vv) else vv) for kk, vv in v.items()} for k, v in d[0].items()}
        else:
            sys.exit("unknown mutation " + mut)
        torch.save(m, mf)
        torch.save(d, of)
        return
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
    elif mut.startswith("args:"):
        k, v = mut[5:].split("=")
        setattr(c["args"], k, int(v))
    else:
        sys.exit("unknown mutation " + mut)
    torch.save(c, it)


src, i = sys.argv[1], 0
for m in sys.argv[3:]:
    if os.path.isdir(m):  # the saves that follow mutate this one
        src = m
        continue
    mutate(src, os.path.join(sys.argv[2], str(i)), m)
    i += 1
