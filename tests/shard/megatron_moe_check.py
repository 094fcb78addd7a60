"""Megatron legacy MoE rank files (Mixtral), checked against an independent construction.

    megatron_moe_check.py HF.safetensors SET:TP:PP:EP ...
    megatron_moe_check.py make DIR   # a float32 Mixtral of 4 kv heads (tp 4), 4 layers, 4 experts


For every rank of every set, loads release/mp_rank_TT[_PPP][_EEE]/model_optim_rng.pt with
real torch and checks what Megatron-LM (d98e8a6) would hold there:
  - the folder: mp_rank_TT, _PPP when pp > 1, _EEE (the EP rank) when ep > 1
    (megatron/training/checkpointing.py:267-274);
  - tp rank t is EP rank t // etp, etp = tp // ep (core/parallel_state.py:886-895), and
    holds experts g*E/ep + i as local_experts.i (moe/moe_layer.py:187-195,
    moe/experts.py:1442-1451);
  - local_experts.i.linear_fc1 = cat([w1.chunk(etp)[t % etp], w3.chunk(etp)[t % etp]]),
    linear_fc2 = w2.chunk(etp, dim=1)[t % etp] (experts over expt_tp, the swiglu layout);
  - mlp.router.weight = gate.weight and pre_mlp_layernorm.weight = post_attention_layernorm
    whole on every rank, layers numbered per stage;
  - args: num_experts, moe_ffn_hidden_size, moe_router_topk, expert_model_parallel_size,
    expert_tensor_parallel_size, moe_grouped_gemm False.
Exit 0 when all match; prints one line per set.
"""
import json, os, struct, sys
import numpy as np
import torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import tpctest  # noqa: E402


def load_st(path):
    out = {}
    for k, (dt, shape, raw) in tpctest.read_safetensors(path).items():
        assert dt == "F32", dt
        out[k] = torch.from_numpy(np.frombuffer(raw, dtype=np.float32).reshape(shape).copy())
    return out


def make(out):
    """config.json + model.safetensors with transformers' MixtralForCausalLM names (numpy, seeded)"""
    H, I, L, E, NH, KV, V = 64, 96, 4, 4, 4, 4, 256
    D = H // NH
    rng = np.random.default_rng(44)
    t = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,), "lm_head.weight": (V, H)}
    for n in range(L):
        p = "model.layers.%d." % n
        t.update({p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
                  p + "self_attn.q_proj.weight": (NH * D, H), p + "self_attn.k_proj.weight": (KV * D, H),
                  p + "self_attn.v_proj.weight": (KV * D, H), p + "self_attn.o_proj.weight": (H, NH * D),
                  p + "block_sparse_moe.gate.weight": (E, H)})
        for e in range(E):
            q = "%sblock_sparse_moe.experts.%d." % (p, e)
            t.update({q + "w1.weight": (I, H), q + "w2.weight": (H, I), q + "w3.weight": (I, H)})
    hdr, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for k, shape in t.items():
        a = rng.standard_normal(shape, dtype=np.float32).tobytes()
        hdr[k] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + len(a)]}
        off += len(a)
        blobs.append(a)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    cfg = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": H, "intermediate_size": I,
           "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": KV, "head_dim": D,
           "num_local_experts": E, "num_experts_per_tok": 2, "vocab_size": V, "rms_norm_eps": 1e-5,
           "tie_word_embeddings": False, "torch_dtype": "float32"}
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"))


if sys.argv[1] == "make":
    make(sys.argv[2])
    sys.exit(0)
hf = load_st(sys.argv[1])
L = 1 + max(int(k.split(".")[2]) for k in hf if k.startswith("model.layers."))
E = 1 + max(int(k.split(".")[5]) for k in hf if ".experts." in k)
F = hf["model.layers.0.block_sparse_moe.experts.0.w1.weight"].shape[0]
bad = 0
for spec in sys.argv[2:]:
    d, tp, pp, ep = spec.rsplit(":", 3)
    tp, pp, ep = int(tp), int(pp), int(ep)
    etp, per, nloc = tp // ep, L // pp, E // ep
    errs = []
    for p in range(pp):
        for t in range(tp):
            g = t // etp
            name = "mp_rank_%02d" % t + ("_%03d" % p if pp > 1 else "") + ("_%03d" % g if ep > 1 else "")
            path = os.path.join(d, "release", name, "model_optim_rng.pt")
            if not os.path.exists(path):
                errs.append("missing " + path)
                continue
            ck = torch.load(path, weights_only=False)
            a, m = vars(ck["args"]), ck["model"]
            want = {"num_experts": E, "moe_ffn_hidden_size": F, "expert_model_parallel_size": ep,
                    "expert_tensor_parallel_size": etp, "moe_grouped_gemm": False, "moe_router_topk": 2}
            for k, v in want.items():
                if a.get(k) != v:
                    errs.append("%s: args.%s %r, want %r" % (name, k, a.get(k), v))
            got = {k for k in m if ".experts." in k}
            exp = set()
            for ll in range(per):
                gl = p * per + ll
                pre = "decoder.layers.%d." % ll
                hp = "model.layers.%d." % gl
                checks = {pre + "mlp.router.weight": hf[hp + "block_sparse_moe.gate.weight"],
                          pre + "pre_mlp_layernorm.weight": hf[hp + "post_attention_layernorm.weight"]}
                for i in range(nloc):
                    x = g * nloc + i
                    q = "%sblock_sparse_moe.experts.%d." % (hp, x)
                    k1 = "%smlp.experts.local_experts.%d.linear_fc1.weight" % (pre, i)
                    k2 = "%smlp.experts.local_experts.%d.linear_fc2.weight" % (pre, i)
                    exp |= {k1, k2}
                    checks[k1] = torch.cat([hf[q + "w1.weight"].chunk(etp)[t % etp], hf[q + "w3.weight"].chunk(etp)[t % etp]])
                    checks[k2] = hf[q + "w2.weight"].chunk(etp, dim=1)[t % etp]
                for k, v in checks.items():
                    if k not in m or m[k].shape != v.shape or not torch.equal(m[k], v):
                        errs.append("%s: %s differs or is missing" % (name, k))
            if got != exp:
                errs.append("%s: expert keys %s, want %s" % (name, sorted(got ^ exp)[:4], "the local ones"))
    bad += len(errs)
    print("%s tp %d pp %d ep %d: %s" % (os.path.basename(d), tp, pp, ep, "ok" if not errs else "; ".join(errs[:5])))
sys.exit(1 if bad else 0)
