"""A legacy Megatron set with expert parallelism over data-parallel ranks, as
Megatron writes it (a re-implementation: Megatron is not packaged in Debian;
Megatron-LM d98e8a6), from a tp 1 legacy set of the same Mixtral-like model
(tpconv's `shard --layout megatron --tp 1 [--pp N]`, whose rank files hold
the model under Megatron-Core names and its experts as SequentialMLP's
local_experts.0 .. E-1).

    /usr/bin/python3 make_megatron_legacy_ep.py TP1_SET OUTDIR EP [--drop EEE]

Writes OUTDIR/iter_0000001/mp_rank_00[_PPP]_EEE/model_optim_rng.pt for EEE
in 0 .. EP-1 (and each stage PPP of a pp > 1 set) and
latest_checkpointed_iteration.txt (1):

- the folder: mp_rank_{tp:02d}, _{pp:03d} only when pp > 1, then
  _{ep rank:03d} when expert_model_parallel_size > 1 (training/
  checkpointing.py:267-274, get_checkpoint_name);
- which ranks write: every rank whose dp rank or expert-dp rank is 0
  (checkpointing.py:780-797): at tp 1 x ep EP with EP data-parallel ranks
  (etp 1 = tp, Megatron's default), DP rank d is EP rank d, each the
  expert-dp rank 0 of its EP group, so each EP rank writes its folder;
- what each holds: generate_state_dict's {"args", "checkpoint_version",
  "iteration", "model"}: the whole dense model (every DP rank holds it) and
  its EP rank's E / EP experts, numbered locally by SequentialMLP
  (moe/experts.py:1442-1451: local_experts.i), EP rank g holding experts
  g E/EP .. (g + 1) E/EP - 1 (moe/moe_layer.py:187-195);
- args: expert_model_parallel_size EP, expert_tensor_parallel_size 1,
  data_parallel_size EP, no tpconv manifest.

--drop EEE leaves that EP rank's folder out (a hostile set).
"""
import os
import re
import sys

import torch


def main(src, out, ep, drop=None):
    it = open(os.path.join(src, "latest_checkpointed_iteration.txt")).read().strip()
    it = "iter_%07d" % int(it) if it != "release" else "release"
    pat = re.compile(r"^(.*\.mlp\.experts\.local_experts\.)(\d+)(\..*)$")
    for r in sorted(os.listdir(os.path.join(src, it))):
        m = re.match(r"^mp_rank_(\d\d)(?:_(\d\d\d))?$", r)
        d = torch.load(os.path.join(src, it, r, "model_optim_rng.pt"))
        args, model = d["args"], d["model"]
        E, pp = args.num_experts, args.pipeline_model_parallel_size
        assert m and E % ep == 0 and args.tensor_model_parallel_size == 1
        per = E // ep
        args.expert_model_parallel_size = ep
        args.expert_tensor_parallel_size = 1
        args.data_parallel_size = ep
        for g in range(ep):
            if drop is not None and g == drop:
                continue
            sd = {}
            for k, v in model.items():
                x = pat.match(k)
                if not x:
                    sd[k] = v  # dense: every data-parallel rank holds it
                elif g * per <= int(x.group(2)) < (g + 1) * per:
                    sd[x.group(1) + str(int(x.group(2)) - g * per) + x.group(3)] = v.clone()
            name = "mp_rank_%s%s_%03d" % (m.group(1), "_" + m.group(2) if pp > 1 else "", g)
            folder = os.path.join(out, "iter_0000001", name)
            os.makedirs(folder, exist_ok=True)
            torch.save({"args": args, "checkpoint_version": 3.0, "iteration": 1, "model": sd},
                       os.path.join(folder, "model_optim_rng.pt"))
    with open(os.path.join(out, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write("1")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]),
         int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--drop" else None)
