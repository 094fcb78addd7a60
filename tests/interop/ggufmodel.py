#!/usr/bin/env python3
"""The Hugging Face folder tpconv rebuilds from a GGUF loads in transformers as
the model it was made from (inside the chroot; run.sh made the folders).

usage: ggufmodel.py WORK
  WORK/gguf/models/tiny-FAMILY/  the tiny models of tests/gguf/arch
  WORK/gguf/tpc/FAMILY-hf/       tpconv convert FAMILY-f32.gguf -o FAMILY-hf/
Both folders are loaded in float32 with AutoModelForCausalLM (every key used, none
missing); every parameter of the rebuilt model equals the original's (Gemma's
norms, which the reference stored as w + 1 in F32, within one F32 rounding;
Qwen3-Next's A_log, stored as -exp(A_log), which maps several floats to one:
a float whose -exp is the GGUF's value, within 1e-6 of the original's),
and so do the logits of one prompt (within 1e-4 where a norm was rounded, else
bit-equal). This is what reading a GGUF back is for: the config.json rebuilt
from the metadata must make the same model (DeepSeek-V3's MLA widths, its
num_key_value_heads, the yarn rope; kv_b_proj joined back from attn_k_b and
attn_v_b; Qwen3-MoE's renormalised routing, which llama.cpp computes and no
key says). A family whose GGUF cannot say what its model had (GGUF_SAYS) is
compared with the original loaded with the GGUF's value, under the same
rule, and with the original as saved within a tolerance stated with its
reason. Appends rows to WORK/results.tsv."""
import os
import re
import sys

import torch
import transformers as tf

from families import result as _result

W = sys.argv[1]
G = os.path.join(W, "gguf")
OP = "GGUF → HF folder → from_pretrained"

# What the reference's GGUF cannot say, per family: {member: the GGUF's
# value}, the largest logit difference from the original as saved, and why.
# The rebuilt folder is the model llama.cpp computes (the GGUF's value); the
# original loaded with that value must match it as any family's does.
GGUF_SAYS = {
    "olmoe": ({"rms_norm_eps": 1e-5}, 5e-4,
              "the reference writes the rms epsilon 1e-5 whatever the model's (llama.cpp 0.7 "
              "conversion/olmo.py:79, OlmoeModel.set_gguf_parameters: add_layer_norm_rms_eps(1e-5)); "
              "the tiny model's is 1e-6"),
    # no tolerance: the jitter epsilon moves the sparsemixer's second choice
    # and its weight, so the original as saved routes otherwise (the check
    # is the rebuilt model against the original loaded with 0.01)
    "phimoe": ({"router_jitter_noise": 0.01}, None,
               "no GGUF key holds the sparsemixer's router_jitter_noise (llama.cpp 0.7 conversion/phi.py "
               "PhiMoeModel writes none): the rebuilt config.json has transformers' default 0.01, "
               "Phi-3.5-MoE's own; the tiny model's is 0.25"),
}


def load(d, **over):
    cfg = tf.AutoConfig.from_pretrained(d)
    for k, v in over.items():
        setattr(cfg, k, v)
    m, info = tf.AutoModelForCausalLM.from_pretrained(d, config=cfg, output_loading_info=True, dtype=torch.float32)
    # a layer past num_hidden_layers is one transformers does not build
    # (GLM-4.5's next-token-prediction layer): its keys unused, in both folders
    past = {k for k in info.get("unexpected_keys") or ()
            if re.match(r"model\.layers\.(\d+)\.", k) and int(k.split(".")[2]) >= cfg.num_hidden_layers}
    info["unexpected_keys"] = set(info.get("unexpected_keys") or ()) - past
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        raise RuntimeError("%s: %s" % (os.path.basename(d), bad))
    m.past_keys = past
    return m.eval()


def logits(m):
    x = torch.tensor([[1, 5, 9, 33, 200, 7, 64, 3]])
    with torch.no_grad():
        return m(x).logits.float()


def family(fam):
    over, tol, why = GGUF_SAYS.get(fam, ({}, 0, ""))
    orig = os.path.join(G, "models", "tiny-" + fam)
    a, b = load(orig, **over), load(os.path.join(G, "tpc", fam + "-hf"))
    cb = tf.AutoConfig.from_pretrained(os.path.join(G, "tpc", fam + "-hf"))
    for k, v in over.items():
        if getattr(cb, k, None) != v:
            raise RuntimeError("the rebuilt config.json's %s is %r, the GGUF's %r" % (k, getattr(cb, k, None), v))
    if a.past_keys != b.past_keys:
        raise RuntimeError("keys past the layers differ: %s" % sorted(a.past_keys ^ b.past_keys)[:6])
    sa, sb = a.state_dict(), b.state_dict()
    if sorted(sa) != sorted(sb):
        raise RuntimeError("parameters differ: %s" % sorted(set(sa) ^ set(sb))[:6])
    rounded = []
    for k in sa:
        if sa[k].shape != sb[k].shape:
            raise RuntimeError("%s: shape %s, the original's %s" % (k, tuple(sb[k].shape), tuple(sa[k].shape)))
        if not torch.equal(sa[k].float(), sb[k].float()):
            d = (sa[k].float() - sb[k].float()).abs().max().item()
            # a Mamba-2 A_log: the GGUF holds A = -exp(A_log) (Mamba2Model), the
            # folder an A_log whose exp is that A to the bit, not always the original
            # (Qwen3-Next's: one float32 rounding of -exp apart at most)
            a_same = k.endswith(".A_log") and (torch.equal(torch.exp(sa[k].float()), torch.exp(sb[k].float())) or d <= 1e-6)
            if not a_same and (not k.endswith("norm.weight") or d > 1e-6):
                raise RuntimeError("%s differs (max abs %g)" % (k, d))
            rounded.append(k)
    la, lb = logits(a), logits(b)
    d = (la - lb).abs().max().item()
    if d > (1e-4 if rounded else 0):
        raise RuntimeError("logits differ by %g%s" % (d, " (the original with %s)" % over if over else ""))
    res = "%d parameters equal%s; logits %s" % (len(sa), " (%d norms or A_log within one F32 rounding)" % len(rounded)
                                                   if rounded else "", "within %g" % d if d else "bit-equal")
    if a.past_keys:
        res += "; %d keys of a layer past num_hidden_layers (not built by transformers) in both" % len(a.past_keys)
    if over:
        d0 = (logits(load(orig)) - lb).abs().max().item()
        if tol is not None and d0 > tol:
            raise RuntimeError("logits differ from the original as saved by %g, over %g (%s)" % (d0, tol, why))
        said = "within %g (tolerance %g: %s)" % (d0, tol, why) if tol is not None else \
            "%g apart (not compared: %s)" % (d0, why)
        res += " (the original loaded with %s); as saved %s" % (", ".join("%s %g" % kv for kv in over.items()), said)
    return res


def main():
    for d in sorted(os.listdir(os.path.join(G, "tpc"))):
        fam = d[:-3]
        if not d.endswith("-hf") or not os.path.isdir(os.path.join(G, "models", "tiny-" + fam)):
            continue
        try:
            _result(W, "transformers", fam, OP, "f32", "pass", family(fam))
        except Exception as e:  # one family's failure is a row, not the end of the run
            _result(W, "transformers", fam, OP, "f32", "fail", e)


if __name__ == "__main__":
    main()
