#!/usr/bin/env python3
"""Apply a named variant of tests/gguf/arch/llama-hf/variants.json to a copy of
tiny-llama-hf: for each file it names, "set" members and "del" keys.
usage: apply_variant.py VARIANTS.json NAME FOLDER (shared by arch_test.sh and hf_test.sh)"""
import json
import os
import sys

for name, ed in json.load(open(sys.argv[1]))[sys.argv[2]].items():
    p = os.path.join(sys.argv[3], name)
    c = json.load(open(p))
    c.update(ed.get("set", {}))
    for k in ed.get("del", []):
        c.pop(k, None)
    json.dump(c, open(p, "w"), indent=2)
