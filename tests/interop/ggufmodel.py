#!/usr/bin/env python3
"""The Hugging Face folder tpconv rebuilds from a GGUF loads in transformers as
the model it was made from (inside the chroot; run.sh made the folders).

usage: ggufmodel.py WORK
  WORK/gguf/models/tiny-FAMILY/  the tiny models of tests/gguf/arch
  WORK/gguf/tpc/FAMILY-hf/       tpconv convert FAMILY-f32.gguf -o FAMILY-hf/
Both folders are loaded in float32 with AutoModelForCausalLM (every key used, none
missing); every parameter of the rebuilt model equals the original's (Gemma's
norms, which the reference stored as w + 1 in F32, within one F32 rounding),
and so do the logits of one prompt (within 1e-4 where a norm was rounded, else
bit-equal). This is what reading a GGUF back is for: the config.json rebuilt
from the metadata must make the same model (DeepSeek-V3's MLA widths, its
num_key_value_heads, the yarn rope; kv_b_proj joined back from attn_k_b and
attn_v_b). Appends rows to WORK/results.tsv."""
import os
import sys

import torch
import transformers as tf

from families import result as _result

W = sys.argv[1]
G = os.path.join(W, "gguf")
OP = "GGUF → HF folder → from_pretrained"


def load(d):
    m, info = tf.AutoModelForCausalLM.from_pretrained(d, output_loading_info=True, dtype=torch.float32)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        raise RuntimeError("%s: %s" % (os.path.basename(d), bad))
    return m.eval()


def family(fam):
    a, b = load(os.path.join(G, "models", "tiny-" + fam)), load(os.path.join(G, "tpc", fam + "-hf"))
    sa, sb = a.state_dict(), b.state_dict()
    if sorted(sa) != sorted(sb):
        raise RuntimeError("parameters differ: %s" % sorted(set(sa) ^ set(sb))[:6])
    rounded = []
    for k in sa:
        if sa[k].shape != sb[k].shape:
            raise RuntimeError("%s: shape %s, the original's %s" % (k, tuple(sb[k].shape), tuple(sa[k].shape)))
        if not torch.equal(sa[k].float(), sb[k].float()):
            d = (sa[k].float() - sb[k].float()).abs().max().item()
            if not k.endswith("norm.weight") or d > 1e-6:
                raise RuntimeError("%s differs (max abs %g)" % (k, d))
            rounded.append(k)
    x = torch.tensor([[1, 5, 9, 33, 200, 7, 64, 3]])
    with torch.no_grad():
        la, lb = a(x).logits.float(), b(x).logits.float()
    d = (la - lb).abs().max().item()
    if d > (1e-4 if rounded else 0):
        raise RuntimeError("logits differ by %g" % d)
    return "%d parameters equal%s; logits %s" % (len(sa), " (%d norms within one F32 rounding)" % len(rounded)
                                                    if rounded else "", "within %g" % d if d else "bit-equal")


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
