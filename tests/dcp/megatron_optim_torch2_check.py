"""Real torch 2.x reads the DCP folder tpconv makes from a Megatron
distributed-optimizer save: every moment, master and step on its parameter's
elements (the values make_megatron_optim.py tags). Not in `make test` (needs
torch >= 2.4: the forky chroot):

    tpconv convert tests/data/dcp/megatron_optim_fsms --optimizer --format dcp --dcp-ranks 2 -o $R/tmp/gen/x2
    cp tests/dcp/make_megatron_optim.py tests/dcp/megatron_optim_torch2_check.py $R/tmp/gen/
    chroot $R sh -c 'cd /tmp/gen && python3 megatron_optim_torch2_check.py x2'

Last run: torch 2.14.1 (forky), 17 parameters, all values on their elements.
"""
import math
import sys

import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

from make_megatron_optim import PARAMS, STEP

src = sys.argv[1]
dcp_to_torch_save(src, src + ".pt")
sd = torch.load(src + ".pt", weights_only=False)
st, bad = sd["optim"]["state"], 0
for k, (name, _, _, shape, _) in enumerate(PARAMS):
    for key, add in (("exp_avg", 0.25), ("exp_avg_sq", 0.5), ("fp32_param", 0.75)):
        want = (torch.arange(math.prod(shape), dtype=torch.float64) + k * 1024 + add).float().reshape(shape)
        bad += not torch.equal(st[name][key], want)
    bad += float(st[name]["step"]) != STEP
    bad += sd["model"][name].shape != torch.Size(shape)
print("torch", torch.__version__, "dcp_to_torch_save:", len(st), "parameters,",
      "all values on their elements" if not bad else "%d MISMATCHES" % bad)
sys.exit(1 if bad else 0)
