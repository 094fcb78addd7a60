#!/usr/bin/env python3
"""Broken and hostile variants of a ZeRO checkpoint written by make_zero.py:
each rewrites one file of the tag folder with real torch.save.

usage: zero_hostile.py DIR KIND
  lying_shapes     param_shapes claims a larger first parameter
  extra_param      param_shapes names one more parameter than the partitions hold
  os_system        an optim-states file holds a pickled os.system call
  getattr_misuse   an optim-states file holds getattr on a non-class object
  mixed_partition  partition_count lists two data-parallel sizes
  no_zero_stage    optimizer_state_dict without zero_stage (BF16 optimizer, stage 0)
  not_flat         single_partition_of_fp32_groups holds a 2-D tensor
"""
import glob
import os
import sys
from collections import OrderedDict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_zero  # noqa: E402

make_zero.install_stand_ins()


class SystemCall:
    def __reduce__(self):
        return (os.system, ('true',))


class GetattrMisuse:
    def __reduce__(self):
        return (getattr, ((1, 2), 'count'))


def tagdir(top):
    with open(os.path.join(top, 'latest')) as f:
        return os.path.join(top, f.read().strip())


def main():
    top, kind = sys.argv[1], sys.argv[2]
    d = tagdir(top)
    model = sorted(glob.glob(os.path.join(d, '*_model_states.pt')))[0]
    optim = sorted(glob.glob(os.path.join(d, '*_optim_states.pt')))[0]
    if kind in ('lying_shapes', 'extra_param'):
        sd = torch.load(model)
        g0 = sd['param_shapes'][0]
        if kind == 'lying_shapes':
            first = next(iter(g0))
            g0[first] = torch.Size([g0[first][0] * 50, g0[first][1]])
        else:
            g0['model.extra.weight'] = torch.Size([3, 4])
        torch.save(sd, model)
        return
    sd = torch.load(optim)
    o = sd['optimizer_state_dict']
    if kind == 'os_system':
        o['hook'] = SystemCall()
    elif kind == 'getattr_misuse':
        o['hook'] = GetattrMisuse()
    elif kind == 'mixed_partition':
        o['partition_count'] = [o['partition_count'][0], o['partition_count'][0] * 2]
    elif kind == 'no_zero_stage':
        del o['zero_stage']
    elif kind == 'not_flat':
        t = o['single_partition_of_fp32_groups'][0]
        o['single_partition_of_fp32_groups'][0] = t.view(2, -1)
    else:
        sys.exit('unknown kind ' + kind)
    torch.save(sd, optim)


if __name__ == '__main__':
    main()
