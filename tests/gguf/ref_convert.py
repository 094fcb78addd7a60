#!/usr/bin/env python3
"""convert_hf_to_gguf.py (llama.cpp 0.7, Debian) as it is, except that a BPE
tokenizer whose pre-tokenizer hash it does not know (every tokenizer trained
from scratch) gets the pre-tokenizer name in $TPC_PRE instead of a refusal."""
import os, runpy, sys
sys.path.insert(1, "/usr/share/llama.cpp/llama.cpp-tools")
import conversion.base as base

_orig = base.TextModel.get_vocab_base_pre


def _pre(self, tokenizer):
    try:
        return _orig(self, tokenizer)
    except NotImplementedError:
        if not os.environ.get("TPC_PRE"):
            raise
        return os.environ["TPC_PRE"]


base.TextModel.get_vocab_base_pre = _pre
sys.argv[0] = "/usr/share/doc/llama.cpp-tools/scripts/convert_hf_to_gguf.py"
runpy.run_path(sys.argv[0], run_name="__main__")
