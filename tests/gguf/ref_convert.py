#!/usr/bin/env python3
"""convert_hf_to_gguf.py (llama.cpp 0.7, Debian) as it is, except:
- a BPE tokenizer whose pre-tokenizer hash it does not know (every tokenizer
  trained from scratch) gets the pre-tokenizer name in $TPC_PRE instead of a
  refusal;
- GPT-NeoX's rotary_pct: the reference reads hparams through transformers 5's
  AutoConfig, which drops it (now rope_parameters.partial_rotary_factor), then
  GPTNeoXModel.set_gguf_parameters fails on it (KeyError); the hparams get the
  rotary_pct config.json holds, as transformers 4 kept it (every Pythia has it)."""
import json, os, runpy, sys
sys.path.insert(1, "/usr/share/llama.cpp/llama.cpp-tools")
import conversion.base as base

_orig = base.TextModel.get_vocab_base_pre
_orig_hparams = base.ModelBase.load_hparams


def _pre(self, tokenizer):
    try:
        return _orig(self, tokenizer)
    except NotImplementedError:
        if not os.environ.get("TPC_PRE"):
            raise
        return os.environ["TPC_PRE"]


def _hparams(dir_model, *args, **kwargs):
    h = _orig_hparams(dir_model, *args, **kwargs)
    try:
        with open(os.path.join(dir_model, "config.json"), encoding="utf-8") as f:
            c = json.load(f)
    except OSError:
        return h
    if "rotary_pct" in c and "rotary_pct" not in h:
        h["rotary_pct"] = c["rotary_pct"]
    return h


base.TextModel.get_vocab_base_pre = _pre
base.ModelBase.load_hparams = staticmethod(_hparams)
sys.argv[0] = "/usr/share/doc/llama.cpp-tools/scripts/convert_hf_to_gguf.py"
runpy.run_path(sys.argv[0], run_name="__main__")
