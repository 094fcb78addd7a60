#!/usr/bin/env python3
"""transformers (forky chroot, 5.12) loads a GGUF read back into Hugging Face
form by tpconv and gives the original model's logits. Not part of make test.

  host:   tpconv convert tests/gguf/arch/tiny-F -o DIR/F.gguf --outtype f32
          tpconv convert DIR/F.gguf -o DIR/back-F/        (config.json rebuilt)
          cp -r tests/gguf/arch/tiny-F DIR/
  chroot: /tmp/inchroot.sh DIR 'python3 hf_logits.py llama qwen2 mixtral ...'
prints "F CLASS equal" when the logits are bit for bit the same.
"""
import sys, torch
from transformers import AutoModelForCausalLM
ids = torch.tensor([[1, 5, 9, 42, 7, 100, 3]])
for f in sys.argv[1:]:
    a = AutoModelForCausalLM.from_pretrained("tiny-" + f, dtype=torch.float32).eval()
    b = AutoModelForCausalLM.from_pretrained("back-" + f, dtype=torch.float32).eval()
    with torch.no_grad():
        la, lb = a(ids).logits, b(ids).logits
    print(f, type(b).__name__, "equal" if torch.equal(la, lb) else "max abs diff %g" % (la - lb).abs().max().item())
