"""A legacy Megatron set with expert parallelism over data-parallel ranks, as
Megatron writes it (a re-implementation: Megatron is not packaged in Debian;
Megatron-LM d98e8a6), from a tp 1 legacy set of the same Mixtral-like model
(tpconv's `shard --layout megatron --tp T [--pp N]`, whose rank files hold
the model under Megatron-Core names and its experts as SequentialMLP's
local_experts.0 .. E-1, each tp rank its slices).

    /usr/bin/python3 make_megatron_legacy_ep.py --hf OUTDIR     (the tiny Mixtral: hf_model())
    /usr/bin/python3 make_megatron_legacy_ep.py TP1_SET OUTDIR EP [--drop EEE] [--optimizer [--swap EEE]]

The committed fixtures (tests/data/dcp/megatron_legacy_ep_hf, the tiny
Mixtral, and tests/data/dcp/megatron_legacy_ep, its tp 1 x ep 2 set with the
optimizer state) were made with

    make_megatron_legacy_ep.py --hf HF
    tpconv shard HF --preset mixtral --tp 1 --layout megatron -o TP1 && rm TP1/tpconv-manifest.json
    make_megatron_legacy_ep.py TP1 tests/data/dcp/megatron_legacy_ep 2 --optimizer

Writes OUTDIR/iter_0000001/mp_rank_TT[_PPP]_EEE/model_optim_rng.pt for EEE
in 0 .. EP-1 (for each tp rank TT, and each stage PPP of a pp > 1 set) and
latest_checkpointed_iteration.txt (1):

- the folder: mp_rank_{tp:02d}, _{pp:03d} only when pp > 1, then
  _{ep rank:03d} when expert_model_parallel_size > 1 (training/
  checkpointing.py:267-274, get_checkpoint_name);
- which ranks write: every rank whose dp rank or expert-dp rank is 0
  (checkpointing.py:780-797): at tp T x ep EP with EP data-parallel ranks
  (etp = tp, Megatron's default: the expert RankGenerator's tp-cp-ep-dp-pp
  order, parallel_state.py:886-895), DP rank d is EP rank d, each the
  expert-dp rank 0 of its EP group, so each (tp rank, EP rank) writes its
  folder, the experts cut over tp as the tp 1 ... T set cuts them;
- what each holds: generate_state_dict's {"args", "checkpoint_version",
  "iteration", "model"}: the whole dense model (every DP rank holds it) and
  its EP rank's E / EP experts, numbered locally by SequentialMLP
  (moe/experts.py:1442-1451: local_experts.i), EP rank g holding experts
  g E/EP .. (g + 1) E/EP - 1 (moe/moe_layer.py:187-195);
- args: expert_model_parallel_size EP, expert_tensor_parallel_size T,
  data_parallel_size EP, no tpconv manifest.

--drop EEE leaves that EP rank's folder out (a hostile set).

--optimizer adds the distributed optimizer's state as such a save holds it
(--use-distributed-optimizer, no --overlap-grad-reduce: one bucket per
buffer), every value a function of its own parameter's weight W at the same
element (fp32 master W, exp_avg 2 W, exp_avg_sq 4 W, exact in fp32), so that
a value on another element or parameter shows:

- the optimizer is ChainedOptimizer of a dense and an expert-parallel
  DistributedOptimizer (optimizer/__init__.py:1213-1245): model_optim_rng.pt's
  "optimizer" the list of their state_dict()s (optimizer.py:1567-1571), each
  {"optimizer": {"param_groups"}} with the standard two groups
  (is_expert_parallel in the expert part's);
- distrib_optim.pt the list of their get_parameter_state_dp_zero()
  (optimizer.py:1972-1997, distrib_optimizer.py:1262-1411), None where the
  rank is not its DP group's rank 0: the dense part's DP group spans the EP
  ranks (dp EP), so only EP rank 0's file holds it; each EP rank is its own
  expert DP group's rank 0 (expert dp 1);
- each buffer's layout (_compute_per_buffer_param_layout, :506-589): its
  parameters (the dense ones, or the rank's experts) in reverse state-dict
  order, each start aligned to 64 elements, one bucket.

--swap EEE (with --optimizer) puts that EP rank's first two expert
parameters of one shape in each other's place in its state dict (a hostile
set: the buffer layout then puts each on the other's range).
"""
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_megatron_optim import groups  # noqa: E402


def hf_model(out):
    """A tiny Mixtral (2 layers, hidden 16, 4 heads in 2 KV groups, 4
    experts of 8, vocab 32), bf16 weights from a seeded generator."""
    import json
    g = torch.Generator().manual_seed(5)

    def r(*s):
        return torch.randn(*s, generator=g).to(torch.bfloat16)
    H, V, L, E, I = 16, 32, 2, 4, 8
    sd = {"model.embed_tokens.weight": r(V, H), "model.norm.weight": r(H), "lm_head.weight": r(V, H)}
    for l in range(L):
        p = "model.layers.%d." % l
        for n, o in (("q_proj", 16), ("k_proj", 8), ("v_proj", 8)):
            sd[p + "self_attn.%s.weight" % n] = r(o, H)
        sd[p + "self_attn.o_proj.weight"] = r(H, 16)
        sd[p + "input_layernorm.weight"] = r(H)
        sd[p + "post_attention_layernorm.weight"] = r(H)
        sd[p + "block_sparse_moe.gate.weight"] = r(E, H)
        for e in range(E):
            q = p + "block_sparse_moe.experts.%d." % e
            sd[q + "w1.weight"] = r(I, H)
            sd[q + "w3.weight"] = r(I, H)
            sd[q + "w2.weight"] = r(H, I)
    os.makedirs(out)
    torch.save(sd, os.path.join(out, "pytorch_model.bin"))
    json.dump({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": H,
               "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": I, "num_local_experts": E,
               "num_experts_per_tok": 2, "num_hidden_layers": L, "vocab_size": V, "torch_dtype": "bfloat16"},
              open(os.path.join(out, "config.json"), "w"))


def part_groups(expert):
    gs = groups()
    for g in gs:
        g.pop("params", None)
        g["is_expert_parallel"] = expert
    return gs


def buffer(params):
    """get_parameter_state_dp_zero of one buffer: params [(key, weight)] in
    reverse order, 64-aligned starts, one bucket (its end not padded)."""
    start, at = 0, []
    for k, w in reversed(params):
        start = (start + 63) // 64 * 64
        at.append((start, w))
        start += w.numel()
    world = {}
    for key, mul in (("param", 1.0), ("exp_avg", 2.0), ("exp_avg_sq", 4.0)):
        b = torch.zeros(start)
        for a, w in at:
            b[a:a + w.numel()] = w.float().reshape(-1) * mul
        world[key] = b
    world["numel_unpadded"] = start
    return {"buckets_coalesced": True, 0: {(torch.bfloat16, torch.float32): world}}


def swapped(sd, pat):
    keys = list(sd)
    ex = [k for k in keys if pat.match(k) and torch.is_tensor(sd[k])]
    a = ex[0]
    b = next(k for k in ex[1:] if sd[k].shape == sd[a].shape)
    i, j = keys.index(a), keys.index(b)
    keys[i], keys[j] = keys[j], keys[i]
    return {k: sd[k] for k in keys}


def main(src, out, ep, drop=None, optim=False, swap=None):
    it = open(os.path.join(src, "latest_checkpointed_iteration.txt")).read().strip()
    it = "iter_%07d" % int(it) if it != "release" else "release"
    pat = re.compile(r"^(.*\.mlp\.experts\.local_experts\.)(\d+)(\..*)$")
    for r in sorted(os.listdir(os.path.join(src, it))):
        m = re.match(r"^mp_rank_(\d\d)(?:_(\d\d\d))?$", r)
        d = torch.load(os.path.join(src, it, r, "model_optim_rng.pt"))
        args, model = d["args"], d["model"]
        E, pp = args.num_experts, args.pipeline_model_parallel_size
        assert m and E % ep == 0
        per = E // ep
        args.expert_model_parallel_size = ep
        args.expert_tensor_parallel_size = args.tensor_model_parallel_size  # Megatron's default: etp = tp
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
            top = {"args": args, "checkpoint_version": 3.0, "iteration": 1, "model": sd}
            if optim:
                args.use_distributed_optimizer, args.overlap_grad_reduce = True, False
                dense = [(k, v) for k, v in sd.items() if torch.is_tensor(v) and not pat.match(k)]
                experts = [(k, v) for k, v in sd.items() if torch.is_tensor(v) and pat.match(k)]
                if swap == g:  # the model's order only: the buffer keeps the true one
                    top["model"] = swapped(sd, pat)
                top["optimizer"] = [{"optimizer": {"param_groups": part_groups(False)}},
                                    {"optimizer": {"param_groups": part_groups(True)}}]
                torch.save([buffer(dense) if g == 0 else None, buffer(experts)],
                           os.path.join(folder, "distrib_optim.pt"))
            torch.save(top, os.path.join(folder, "model_optim_rng.pt"))
    with open(os.path.join(out, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write("1")


if __name__ == "__main__":
    if sys.argv[1] == "--hf":
        hf_model(sys.argv[2])
        sys.exit(0)
    a = sys.argv[1:]
    opt = "--optimizer" in a
    a = [x for x in a if x != "--optimizer"]
    drop = int(a[a.index("--drop") + 1]) if "--drop" in a else None
    swap = int(a[a.index("--swap") + 1]) if "--swap" in a else None
    main(a[0], a[1], int(a[2]), drop, opt, swap)
