"""Optimizer state into a Megatron torch_dist set (shard --layout megatron-dist
--optimizer): the source and the check (tests/dcp/megatron_optim_out_test.sh).

    /usr/bin/python3 make_mcore_optim_out.py gen OUTDIR
        OUTDIR/train.pt: what torch.save(get_state_dict(model, optim)) holds for
        a tiny LLaMA (HF names, GQA, vocab 70, untied lm_head) trained in bf16
        with fp32 masters: {"model": {name: bf16}, "optim": {"state": {name:
        {"exp_avg", "exp_avg_sq", "fp32_param", "step"}}, "param_groups": [two
        groups as the HF Trainer makes them: weight decay, then none for 1-D
        parameters]}}; every state value names its place: parameter number k
        (model order), element i (C order) has exp_avg k * 10000 + i,
        exp_avg_sq 1e6 + k * 10000 + i, fp32_param k * 10000 + i + 0.25 (exact
        in f32); step 7. OUTDIR/config.json beside it, model_f32.pt (the model
        in f32, for a ZeRO folder: make_zero.py --from); hostile variants
        (steps.pt: one parameter at step 6, mixed.pt: a 1-D parameter in the
        weight-decay group, three.pt: three groups, frozen.pt: the final norm in
        no group (frozen), nomaster.pt: bf16 without fp32_param, step0.pt: never
        stepped, step 0: no iteration to save at); OUTDIR/moe/ the same
        as a Mixtral (4 experts of 8 a layer and the router: train.pt, config.json).
    /usr/bin/python3 make_mcore_optim_out.py check SRC/train.pt OPT.pt [OPT.pt ...] [SRC2/train.pt OPT.pt ...]
        each OPT.pt (tpconv's optimizer.pt of a megatron-dist set written from
        SRC, read back by tpconv's Megatron reader: Megatron's parameters, q/k/v
        fused per query group, gate/up fused, vocab padded) holds, for every
        Megatron parameter, exactly the source's values rebuilt in Megatron's
        layout (padding rows 0), step 7, the groups' hyper-parameters.
        Prints "ok N" or "not ok: why".
    /usr/bin/python3 make_mcore_optim_out.py tag MODEL.pt OUT.pt
        OUT.pt: the state dict MODEL.pt with that tagged AdamW state (every tensor
        but a router's e_score_correction_bias, a buffer), in the same form.
    /usr/bin/python3 make_mcore_optim_out.py check-zero ZOPT.pt NAMES.txt ZMODEL.pt OPT.pt...
        the same check with a ZeRO folder as the source: its optimizer.pt and
        fp32 model as tpconv gives them, NAMES.txt its inspect --optimizer.
    python3 make_mcore_optim_out.py torch2 SRC/train.pt SET/iter_0000007
        (torch >= 2.4, the forky chroot) torch's own DCP reader reads the set's
        .distcp files: every optimizer.state.{param,exp_avg,exp_avg_sq}.KEY, layer-
        stacked as the model's KEY (experts [layers, experts, ...]), holds the
        source's values. Last run: torch 2.14.1 (forky) on the tp 2 x pp 2 and
        tp 1 LLaMA sets (45 state tensors each) and the Mixtral sets at tp 2 x
        ep 2 x pp 2, tp 2 x ep 4 and tp 1 (87 each): all equal.
    python3 make_mcore_optim_out.py torch2-chunks SET/iter_0000007 ...
        (torch >= 2.4) the .metadata as torch reads it: each optimizer.state.
        {param,exp_avg,exp_avg_sq}.KEY has KEY's global shape and chunks. Last
        run: torch 2.14.1 (forky), the LLaMA sets (27 state keys), the Mixtral
        sets (30) and DeepSeek-V3 at tp 2 x pp 2 x ep 2 (126): all alike.
    /usr/bin/python3 make_mcore_optim_out.py check-pt A.pt B.pt
        the two optimizer.pt hold the same values (torch.equal per tensor,
        groups equal).
"""
import json
import os
import sys

import torch

LAYERS, HIDDEN, HEADS, KV, FFN, VOCAB = 2, 16, 4, 2, 24, 70
HD = HIDDEN // HEADS
EXPERTS, EFFN = 4, 8  # the Mixtral variant (moe/): routed experts of EFFN


def params(moe=False):
    out = [("model.embed_tokens.weight", (VOCAB, HIDDEN))]
    for l in range(LAYERS):
        p = "model.layers.%d." % l
        out += [(p + "input_layernorm.weight", (HIDDEN,)),
                (p + "self_attn.q_proj.weight", (HEADS * HD, HIDDEN)),
                (p + "self_attn.k_proj.weight", (KV * HD, HIDDEN)),
                (p + "self_attn.v_proj.weight", (KV * HD, HIDDEN)),
                (p + "self_attn.o_proj.weight", (HIDDEN, HEADS * HD)),
                (p + "post_attention_layernorm.weight", (HIDDEN,))]
        if moe:
            out += [(p + "block_sparse_moe.gate.weight", (EXPERTS, HIDDEN))]
            for e in range(EXPERTS):
                q = p + "block_sparse_moe.experts.%d." % e
                out += [(q + "w1.weight", (EFFN, HIDDEN)), (q + "w2.weight", (HIDDEN, EFFN)),
                        (q + "w3.weight", (EFFN, HIDDEN))]
            continue
        out += [(p + "mlp.gate_proj.weight", (FFN, HIDDEN)),
                (p + "mlp.up_proj.weight", (FFN, HIDDEN)),
                (p + "mlp.down_proj.weight", (HIDDEN, FFN))]
    out += [("model.norm.weight", (HIDDEN,)), ("lm_head.weight", (VOCAB, HIDDEN))]
    return out


def tag(k, shape, base):
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.float64) + k * 10000 + base).to(torch.float32).reshape(shape)


def gen(out, moe=False):
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(44)
    model, state, groups = {}, {}, [[], []]
    for k, (n, shape) in enumerate(params(moe)):
        model[n] = torch.randn(*shape, generator=g).to(torch.bfloat16)
        state[n] = {"step": torch.tensor(7.0), "exp_avg": tag(k, shape, 0), "exp_avg_sq": tag(k, shape, 1e6),
                    "fp32_param": tag(k, shape, 0.25)}
        groups[len(shape) == 1].append(n)
    hp = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, amsgrad=False, foreach=None, maximize=False,
              capturable=False, differentiable=False, fused=None)
    pg = [dict(hp, weight_decay=0.1, params=groups[0]), dict(hp, weight_decay=0.0, params=groups[1])]
    torch.save({"model": model, "optim": {"state": state, "param_groups": pg}}, os.path.join(out, "train.pt"))
    if not moe:  # the model in f32, for tests/deepspeed/make_zero.py --from
        torch.save({n: t.float() for n, t in model.items()}, os.path.join(out, "model_f32.pt"))
    # hostile variants (what Megatron's optimizer cannot hold), each one change
    bad = {}
    st2 = dict(state)
    st2["model.norm.weight"] = dict(state["model.norm.weight"], step=torch.tensor(6.0))
    bad["steps"] = (model, st2, pg)
    mixed = [dict(pg[0], params=groups[0] + ["model.norm.weight"]),
             dict(pg[1], params=[n for n in groups[1] if n != "model.norm.weight"])]
    bad["mixed"] = (model, state, mixed)
    three = [dict(pg[0], params=groups[0][:3]), dict(pg[0], lr=2e-3, params=groups[0][3:]), pg[1]]
    bad["three"] = (model, state, three)
    frozen = {n: st for n, st in state.items() if n != "model.norm.weight"}
    bad["frozen"] = (model, frozen, [pg[0], dict(pg[1], params=[n for n in groups[1] if n != "model.norm.weight"])])
    nomaster = {n: {k: v for k, v in st.items() if k != "fp32_param"} for n, st in state.items()}
    bad["nomaster"] = (model, nomaster, pg)
    step0 = {n: dict(st, step=torch.tensor(0.0)) for n, st in state.items()}
    bad["step0"] = (model, step0, pg)
    for name, (m, st, groups_) in bad.items():
        torch.save({"model": m, "optim": {"state": st, "param_groups": groups_}}, os.path.join(out, name + ".pt"))
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
           "num_attention_heads": HEADS, "num_key_value_heads": KV, "intermediate_size": FFN,
           "num_hidden_layers": LAYERS, "vocab_size": VOCAB, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
           "torch_dtype": "bfloat16"}
    if moe:
        cfg.update(architectures=["MixtralForCausalLM"], model_type="mixtral", intermediate_size=EFFN,
                   num_local_experts=EXPERTS, num_experts_per_tok=2)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    if moe:
        return


def megatron(src, key, vpad):
    """The source's `key` tensors in Megatron's parameters and layout, in the
    order tpconv's Megatron reader numbers them (its model order)."""
    s = {n: st[key] for n, st in src["optim"]["state"].items()}
    pad = lambda t: torch.cat([t, t.new_zeros(vpad - t.shape[0], t.shape[1])])
    out = [("embedding.word_embeddings.weight", pad(s["model.embed_tokens.weight"]))]
    for l in range(LAYERS):
        p = "model.layers.%d." % l
        q = s[p + "self_attn.q_proj.weight"].reshape(KV, HEADS // KV * HD, HIDDEN)
        kk = s[p + "self_attn.k_proj.weight"].reshape(KV, HD, HIDDEN)
        v = s[p + "self_attn.v_proj.weight"].reshape(KV, HD, HIDDEN)
        m = "decoder.layers.%d." % l
        out += [(m + "self_attention.linear_qkv.layer_norm_weight", s[p + "input_layernorm.weight"]),
                (m + "self_attention.linear_qkv.weight", torch.cat([q, kk, v], 1).reshape(-1, HIDDEN)),
                (m + "self_attention.linear_proj.weight", s[p + "self_attn.o_proj.weight"])]
        if p + "block_sparse_moe.gate.weight" in s:
            # moe_layer.py / router.py / experts.py names (layout_megatron_dist.c)
            out += [(m + "pre_mlp_layernorm.weight", s[p + "post_attention_layernorm.weight"]),
                    (m + "mlp.router.weight", s[p + "block_sparse_moe.gate.weight"])]
            for e in range(EXPERTS):
                q = p + "block_sparse_moe.experts.%d." % e
                x = m + "mlp.experts.local_experts.%d." % e
                out += [(x + "linear_fc1.weight", torch.cat([s[q + "w1.weight"], s[q + "w3.weight"]])),
                        (x + "linear_fc2.weight", s[q + "w2.weight"])]
            continue
        out += [(m + "mlp.linear_fc1.layer_norm_weight", s[p + "post_attention_layernorm.weight"]),
                (m + "mlp.linear_fc1.weight", torch.cat([s[p + "mlp.gate_proj.weight"], s[p + "mlp.up_proj.weight"]])),
                (m + "mlp.linear_fc2.weight", s[p + "mlp.down_proj.weight"])]
    out += [("decoder.final_layernorm.weight", s["model.norm.weight"]), ("output_layer.weight", pad(s["lm_head.weight"]))]
    return dict(out)


def tag_model(model_path, out_path):
    """OUT: MODEL (a torch state dict) with AdamW state as gen tags it, every
    tensor a parameter but the router's e_score_correction_bias (a buffer, in
    Hugging Face's DeepSeek-V3 and in Megatron)."""
    model = torch.load(model_path)
    state, groups = {}, [[], []]
    for k, (n, t) in enumerate(model.items()):
        if n.endswith("e_score_correction_bias"):
            continue
        state[n] = {"step": torch.tensor(7.0), "exp_avg": tag(k, t.shape, 0), "exp_avg_sq": tag(k, t.shape, 1e6),
                    "fp32_param": tag(k, t.shape, 0.25)}
        groups[t.dim() == 1 or n.endswith(".bias")].append(n)
    hp = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    pg = [dict(hp, weight_decay=0.1, params=groups[0]), dict(hp, weight_decay=0.0, params=groups[1])]
    torch.save({"model": model, "optim": {"state": state, "param_groups": pg}}, out_path)


def check_common(path):
    """common.pt as Megatron's DistributedOptimizer.state_dict / sharded_state_dict
    leave it: param groups without params, the default group (wd_mult 1) first,
    step 7 in each, param_state_sharding_type fully_reshardable."""
    c = torch.load(path)
    o = c["optimizer"]
    if o.get("param_state_sharding_type") != "fully_reshardable":
        return "param_state_sharding_type %r" % o.get("param_state_sharding_type")
    pg = o["optimizer"]["param_groups"]
    if [g["wd_mult"] for g in pg] != [1.0, 0.0] or [g["weight_decay"] for g in pg] != [0.1, 0.0]:
        return "groups %r" % pg
    for g in pg:
        if "params" in g or g["step"] != 7 or g["is_expert_parallel"] or g["lr"] != 1e-3:
            return "group %r" % g
    if c["iteration"] != 7:
        return "iteration %r" % c["iteration"]
    # what a resume reads (shard/layout_megatron_train.c): written with
    # --megatron-train global-batch-size=8, no schedule
    cm = c["content_metadata"]
    if cm != {"singleton_local_shards": False, "chained_optim_avoid_prefix": True,
              "distrib_optim_sharding_type": "fully_reshardable",
              "distrib_optim_fully_reshardable_mem_efficient": False}:
        return "content_metadata %r" % cm
    a = c["args"]
    if (a.consumed_train_samples, a.skipped_train_samples, a.consumed_valid_samples, a.global_batch_size,
            a.no_save_rng) != (56, 0, 0, 8, True):
        return "args %r" % vars(a)
    sch = c["opt_param_scheduler"]
    if sorted(sch) != sorted(["max_lr", "lr_warmup_steps", "num_steps", "lr_decay_style", "lr_decay_steps", "min_lr",
                              "start_wd", "end_wd", "wd_incr_style", "wd_incr_steps"]) or sch["num_steps"] != 56 or \
            any(v is not None for k, v in sch.items() if k != "num_steps"):
        return "opt_param_scheduler %r" % sch
    if c["num_floating_point_operations_so_far"] != 0:
        return "num_floating_point_operations_so_far %r" % c["num_floating_point_operations_so_far"]
    return None


def check(src_path, opt_path, src=None):
    src = src if src is not None else torch.load(src_path)
    step = float(next(iter(src["optim"]["state"].values()))["step"])
    g0 = src["optim"]["param_groups"][0]
    if opt_path.endswith("common.pt"):
        return check_common(opt_path)
    opt = torch.load(opt_path)
    # the vocab rows as Megatron pads them (128 x tp): the reader's embedding
    vpad = max(st["exp_avg"].shape[0] for st in opt["state"].values())
    want = {k: megatron(src, k, vpad) for k in ("exp_avg", "exp_avg_sq", "fp32_param")}
    seen = set()
    for k, st in opt["state"].items():
        hit = None
        for name, t in want["exp_avg"].items():
            if t.shape == st["exp_avg"].shape and torch.equal(t, st["exp_avg"]):
                hit = name
        if hit is None or hit in seen:
            return "state %s: its exp_avg is no parameter's (or a second copy)" % k
        seen.add(hit)
        for key in ("exp_avg_sq", "fp32_param"):
            if not torch.equal(want[key][hit], st[key]):
                return "state %s (%s): %s differs" % (k, hit, key)
        if float(st["step"]) != step:
            return "state %s: step %r" % (k, st["step"])
    if len(seen) != len(want["exp_avg"]):
        return "%d parameters, want %d" % (len(seen), len(want["exp_avg"]))
    # a chained optimizer (experts): the reader's groups are the dense
    # optimizer's two, then the expert one's (their 2-D weights: no wd_mult 0)
    if len(opt["param_groups"]) == 3:
        names = {k: n for n in want["exp_avg"] for k, st in opt["state"].items()
                 if st["exp_avg"].shape == want["exp_avg"][n].shape and torch.equal(st["exp_avg"], want["exp_avg"][n])}
        exp = sorted(k for k, n in names.items() if ".mlp.experts." in n)
        if [g["weight_decay"] for g in opt["param_groups"]] != [0.1, 0.0, 0.1]:
            return "chained groups %r" % [g["weight_decay"] for g in opt["param_groups"]]
        if sorted(opt["param_groups"][2]["params"]) != exp or not opt["param_groups"][2].get("is_expert_parallel"):
            return "expert group %r, want %r" % (opt["param_groups"][2]["params"], exp)
        if any(g.get("is_expert_parallel") for g in opt["param_groups"][:2]):
            return "a dense group is is_expert_parallel"
        return None
    wds = sorted(g["weight_decay"] for g in opt["param_groups"])
    want_wds = sorted(g["weight_decay"] for g in src["optim"]["param_groups"])
    if wds != want_wds or any(g["lr"] != g0["lr"] or tuple(g["betas"]) != tuple(g0["betas"]) for g in opt["param_groups"]):
        return "param groups %r" % [{k: v for k, v in g.items() if k != "params"} for g in opt["param_groups"]]
    for g in opt["param_groups"]:
        for k in g["params"]:
            one_d = opt["state"][k]["exp_avg"].dim() == 1
            if one_d != (g["weight_decay"] == 0.0):
                return "parameter %s in the group of weight decay %r" % (k, g["weight_decay"])
    return None


def zero_src(opt_path, names_path, model_path):
    """A ZeRO folder's state as the source dict check() takes: tpconv's
    optimizer.pt of it (numbered in its groups' order), the parameter names in
    that order (inspect --optimizer's lines), its fp32 model (the masters)."""
    opt, model = torch.load(opt_path), torch.load(model_path)
    names = [l.split()[2].split(".", 1)[1] for l in open(names_path) if l.startswith("# [")]
    state = {names[k]: dict(st, fp32_param=model[names[k]]) for k, st in opt["state"].items()}
    groups = [dict(g, params=[names[k] for k in g["params"]]) for g in opt["param_groups"]]
    return {"optim": {"state": state, "param_groups": groups}}


def check_pt(a, b):
    x, y = torch.load(a), torch.load(b)
    if [{k: v for k, v in g.items()} for g in x["param_groups"]] != [{k: v for k, v in g.items()} for g in y["param_groups"]]:
        return "param groups differ"
    if x["state"].keys() != y["state"].keys():
        return "state keys differ"
    for k in x["state"]:
        for key, t in x["state"][k].items():
            if not torch.equal(t, y["state"][k][key]):
                return "state %s %s differs" % (k, key)
    return None


def torch2(src_path, folder):
    """Real torch 2.x (>= 2.4: the forky chroot) reads the iteration folder's
    .distcp files with its own DCP reader (dcp_to_torch_save): every state key
    of Megatron's fully_reshardable form, layer-stacked as the model's keys,
    holds the source's values (the model's keys hold the source weights)."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    dcp_to_torch_save(folder, folder + ".pt")
    sd = torch.load(folder + ".pt", weights_only=False)
    src = torch.load(src_path, weights_only=False)
    n = 0
    for key, want_key in (("param", "fp32_param"), ("exp_avg", "exp_avg"), ("exp_avg_sq", "exp_avg_sq")):
        vpad = sd["optimizer.state.%s.embedding.word_embeddings.weight" % key].shape[0]
        want = megatron(src, want_key, vpad)
        for name, t in want.items():
            if ".local_experts." in name:  # [layers, experts, ...] under one key (experts.py:1526-1566)
                f = name.split(".")
                l, e = int(f[2]), int(f[6])
                k = name.replace("layers.%d." % l, "layers.").replace("local_experts.%d." % e, "experts.")
                got = sd["optimizer.state.%s.%s" % (key, k)][l][e]
            elif ".layers." in name:
                l = int(name.split(".")[2])
                got = sd["optimizer.state.%s.%s" % (key, name.replace("layers.%d." % l, "layers."))][l]
            else:
                got = sd["optimizer.state.%s.%s" % (key, name)]
            if not torch.equal(got, t):
                return "%s of %s differs" % (key, name)
            n += 1
    extra = [k for k in sd if k.startswith("optimizer.") and not k.startswith("optimizer.state.")]
    if extra:
        return "unexpected keys %r" % extra[:3]
    return "torch %s dcp_to_torch_save: %d state tensors (param, exp_avg, exp_avg_sq per parameter) equal" % (
        torch.__version__, n)


def torch2_chunks(folder):
    """torch 2.x's DCP metadata of the folder: every model key has its three
    state keys with the same global shape and the same chunks (offsets and
    sizes), and no state key lacks its model key."""
    from torch.distributed.checkpoint import FileSystemReader
    md = FileSystemReader(folder).read_metadata().state_dict_metadata
    box = lambda m: (tuple(m.size), sorted((tuple(c.offsets), tuple(c.sizes)) for c in m.chunks))
    model = [k for k in md if not k.startswith("optimizer.")]
    n = 0
    for k in model:
        for key in ("param", "exp_avg", "exp_avg_sq"):
            sk = "optimizer.state.%s.%s" % (key, k)
            if sk not in md:
                if k.endswith("router.expert_bias"):  # a buffer in Megatron: no state
                    continue
                return "%s: no %s" % (k, sk)
            if box(md[sk]) != box(md[k]):
                return "%s: %r, the model's %r" % (sk, box(md[sk]), box(md[k]))
            n += 1
    orphans = [k for k in md if k.startswith("optimizer.state.") and k.split(".", 3)[3] not in md]
    if orphans:
        return "state without its model key: %r" % orphans[:3]
    return "torch %s: %d state keys, each with its model key's shape and %s chunks" % (
        torch.__version__, n, "same")


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
        gen(os.path.join(sys.argv[2], "moe"), moe=True)
    elif sys.argv[1] == "check":  # another .../train.pt among them: the source of those after it
        src = sys.argv[2]
        for p in sys.argv[3:]:
            if p.endswith("/train.pt"):
                src = p
                continue
            why = check(src, p)
            print(("not ok %s: %s" % (p, why)) if why else "ok %s" % p)
    elif sys.argv[1] == "tag":
        tag_model(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "check-zero":
        src = zero_src(sys.argv[2], sys.argv[3], sys.argv[4])
        for p in sys.argv[5:]:
            why = check(None, p, src)
            print(("not ok %s: %s" % (p, why)) if why else "ok %s" % p)
    elif sys.argv[1] == "torch2-chunks":
        for f in sys.argv[2:]:
            print(f, torch2_chunks(f))
    elif sys.argv[1] == "torch2":
        print(torch2(sys.argv[2], sys.argv[3]))
    elif sys.argv[1] == "check-pt":
        why = check_pt(sys.argv[2], sys.argv[3])
        print(("not ok: %s" % why) if why else "ok")
