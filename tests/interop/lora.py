"""Inside the chroot: the models `tpconv convert BASE --lora ADAPTER` merged
(run.sh, from the fixtures of tests/lora) loaded by transformers, their logits
against the base model running with the adapter unmerged, as PEFT v0.20.0's
forward computes it (PEFT is not in Debian; these lines follow
tuners/lora/layer.py Linear.forward and Embedding.forward, variants.py
DoraLinearVariant.forward / DoraEmbeddingVariant.forward with
dora.py DoraLinearLayer.forward): for a Linear (GPT-2's Conv1D alike)
  y = base(x) + s * (x @ A.T @ B.T)      (+ lora_B.bias * s with lora_bias)
DoRA: n = ||W + s * B @ A|| per output (detached),
  y = (m / n) * (base(x) - b) + (m / n) * s * (x @ A.T @ B.T) + b
an Embedding: y = base(ids) + s * (A.T[ids] @ B.T); DoRA over the vocab norms;
modules_to_save: the module's weight replaced. target_parameters (PEFT's
ParamWrapper, main at 5d602fdb: layer.py ParamWrapper._activate_lora runs the
base module with its parameter parametrized as W + get_delta_weight,
L2464-2490): the parameter of the transformers model changed so before the
forward, the delta PEFT's literal einsum (L2436-2462), the experts' layout
from the module's is_transposed (update_layer L2346-2351) and the parameter
a nested wrapper holds from the module's registration order
(tuners_utils.py _inject_parameters): this follows PEFT, not tpconv's rules.
Appends to results.tsv.
usage: lora.py WORK"""
import json, math, os, re, sys, traceback

import torch
import transformers
from safetensors.torch import load_file

from families import input_ids, result

WORK = os.path.abspath(sys.argv[1])
P = "base_model.model."


def scaling(cfg, module, w):
    r, alpha = cfg["r"], cfg["lora_alpha"]
    for k in cfg.get("rank_pattern") or {}:
        if re.match(rf"(.*\.)?({k})$", module):
            r = cfg["rank_pattern"][k]
            break
    for k in cfg.get("alpha_pattern") or {}:
        if re.match(rf"(.*\.)?({k})$", module):
            alpha = cfg["alpha_pattern"][k]
            break
    return w * alpha / math.sqrt(r) if cfg.get("use_rslora") else w * alpha / r


def targeted(cfg, name, keys):
    """check_target_module_exists's list form: name is a key or ends with .key"""
    return any(name == k or name.endswith("." + k) for k in keys or [])


def param_wrapper(named, ad, cfg, m, w):
    """PEFT's ParamWrapper for adapter module m: its parameter += delta."""
    depth, mod_name = m.count(".base_layer"), m.replace(".base_layer", "")
    mod = named[mod_name]
    params = [p for p, _ in mod.named_parameters(recurse=False)
              if targeted(cfg, f"{mod_name}.{p}", cfg.get("target_parameters"))]
    pname = params[len(params) - 1 - depth]  # the outermost wrapper holds the last one
    W = getattr(mod, pname)
    s = scaling(cfg, f"{mod_name}.{pname}", w)
    A, B = ad[P + m + ".lora_A.weight"], ad[P + m + ".lora_B.weight"]
    if W.dim() == 2:
        d = B @ A * s
    else:
        E = W.shape[0]
        a3, b3 = A.reshape(E, -1, A.shape[-1]), B.reshape(B.shape[0], -1, E)
        eq = "o r e, e r i -> e i o" if getattr(mod, "is_transposed", False) else "o r e, e r i -> e o i"
        d = torch.einsum(eq, b3, a3) * s
    W.data += d.to(W.dtype)


def v4_mixtral(named, ad, cfg, m, w):
    """A LoRA on one Mixtral expert's w1/w3/w2 (a transformers 4 name) on
    transformers 5's fused experts: PEFT converts such an adapter
    (utils/transformers_weight_conversion.py at 5d602fdb, PeftConcatenate:
    A of w1 and w3 concatenated, B block-diagonal, so each part keeps its own
    delta) into a ParamWrapper of mlp.experts.gate_up_proj (w1 rows 0 .. I-1,
    w3 rows I ..) and down_proj (w2): the delta added to those rows; the
    router block_sparse_moe.gate is mlp.gate's weight (_MOE_TARGET_MODULE_MAPPING)."""
    g = re.fullmatch(r"(.*)\.block_sparse_moe\.gate", m)
    if g:  # the router: _MOE_TARGET_MODULE_MAPPING "gate" -> "gate.weight", a ParamWrapper
        named[g[1] + ".mlp.gate"].weight.data += ad[P + m + ".lora_B.weight"] @ ad[P + m + ".lora_A.weight"] * scaling(cfg, m, w)
        return True
    g = re.fullmatch(r"(.*)\.block_sparse_moe\.experts\.(\d+)\.(w1|w2|w3)", m)
    if not g:
        return False
    ex = named[g[1] + ".mlp.experts"]
    e, which = int(g[2]), g[3]
    d = ad[P + m + ".lora_B.weight"] @ ad[P + m + ".lora_A.weight"] * scaling(cfg, m, w)
    if which == "w2":
        ex.down_proj.data[e] += d
    else:
        I = ex.gate_up_proj.shape[1] // 2
        ex.gate_up_proj.data[e, (0 if which == "w1" else I):][:I] += d
    return True


def attach(model, adir, w):
    """Hooks that add the adapter in `adir` (weight w) to the model's forward."""
    cfg = json.load(open(f"{adir}/adapter_config.json"))
    ad = {k: v.float() for k, v in load_file(f"{adir}/adapter_model.safetensors").items()}
    mods = sorted({k[len(P):].rsplit(".lora_", 1)[0] for k in ad if ".lora_" in k})
    named = dict(model.named_modules())
    hooks = []
    for m in mods:
        if cfg.get("target_parameters") and (".base_layer" in m or not targeted(cfg, m, cfg.get("target_modules"))):
            param_wrapper(named, ad, cfg, m, w)
            continue
        if m not in named and v4_mixtral(named, ad, cfg, m, w):
            continue
        mod, s = named[m], scaling(cfg, m, w)
        W = mod.weight.detach().float()
        mag = ad.get(P + m + ".lora_magnitude_vector")
        if P + m + ".lora_embedding_A" in ad:
            A, B = ad[P + m + ".lora_embedding_A"], ad[P + m + ".lora_embedding_B"]
            if mag is not None:
                n = torch.linalg.norm(W + (B @ A).T * s, dim=0)

            def hook(mod, args, out, A=A, B=B, s=s, mag=mag, n=None if mag is None else n):
                lo = torch.nn.functional.embedding(args[0], A.T) @ B.T * s
                y = out + lo
                return y if mag is None else (mag / n) * y
        else:
            A, B = ad[P + m + ".lora_A.weight"], ad[P + m + ".lora_B.weight"]
            bb = ad.get(P + m + ".lora_B.bias")
            conv1d = type(mod).__name__ == "Conv1D"
            bias = mod.bias.detach().float() if getattr(mod, "bias", None) is not None else None
            if mag is not None:
                Wo = W.T if conv1d else W  # [out, in]
                n = torch.linalg.norm(Wo + (B @ A) * s, dim=1)

            def hook(mod, args, out, A=A, B=B, s=s, mag=mag, bb=bb, bias=bias, n=None if mag is None else n):
                lo = args[0] @ A.T @ B.T * s
                if bb is not None:
                    lo = lo + bb * s
                if mag is None:
                    return out + lo
                b = 0 if bias is None else bias
                return (mag / n) * (out - b) + (mag / n) * lo + b
        hooks.append(mod.register_forward_hook(hook))
    for k in ad:  # modules_to_save
        if ".lora_" not in k:
            named[k[len(P):].rsplit(".", 1)[0]].weight.data.copy_(ad[k])
    return hooks


def logits(model, vocab):
    with torch.no_grad():
        return model(input_ids(vocab)).logits.float()


with open(f"{WORK}/lora/cases.tsv") as f:
    cases = [l.rstrip("\n").split("\t") for l in f if l.strip()]
for case, base, out, *adapters in cases:
    try:
        kind = transformers.AutoModelForCausalLM
        merged = kind.from_pretrained(out, dtype=torch.float32)
        ref = kind.from_pretrained(base, dtype=torch.float32)
        plain = logits(ref, ref.config.vocab_size)
        for a in adapters:
            d, _, w = a.partition(":")
            attach(ref, d, float(w or 1))
        vocab = ref.config.vocab_size
        got, want = logits(merged, vocab), logits(ref, vocab)
        err = float((got - want).abs().max())
        scale, moved = float(want.abs().max()), float((want - plain).abs().max())
        # the adapter must move the logits for the comparison to mean anything
        st = "pass" if err <= 1e-5 * max(scale, 1) and moved > 1e-3 else "fail"
        result(WORK, "transformers", "lora", "convert --lora → from_pretrained, logits", case, st,
               f"max |merged - base+adapter| {err:.2e}; the adapter moves them by up to {moved:.3f} "
               f"(logits up to {scale:.2f}; f32, tolerance 1e-5 relative)")
    except Exception as e:
        traceback.print_exc()
        result(WORK, "transformers", "lora", "convert --lora → from_pretrained, logits", case, "fail", e)
