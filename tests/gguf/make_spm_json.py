#!/usr/bin/env python3
"""The tokenizer.json transformers 5.12 makes of a SentencePiece folder that
tpconv rebuilt from a GGUF (tokenizer.model + tokenizer_config.json), for
tests/gguf/spm_json/FAMILY.json: hf_test.sh checks that the tokenizer.json
tpconv writes beside them is this one. Run in the forky chroot:

    for f in llama mistral mixtral phi3 gemma; do
      tpconv convert tests/gguf/arch/tiny-$f -o $W/$f.gguf --outtype f32
      tpconv convert $W/$f.gguf -o $W/$f/ && rm $W/$f/tokenizer.json $W/$f/model.safetensors
    done
    inchroot DIR python3 make_spm_json.py OUT $W/llama ...   (with tests/interop/spm_proto.py beside it)

Each folder is loaded with the class its tokenizer_config.json names
(LlamaTokenizer, GemmaTokenizer: AutoTokenizer would pick TokenizersBackend
for phi3 and mixtral by model_type, which builds no SentencePiece pipeline
from a tokenizer.model) and saved; the chroot has no protobuf, so
spm_proto.py reads tokenizer.model for transformers' SentencePieceExtractor.
Added tokens that are neither pieces of tokenizer.model nor in
tokenizer_config.json's added_tokens_decoder are dropped: the class's
default special tokens the folder does not name (GemmaTokenizer's '<mask>'),
which transformers appends at load whatever tokenizer.json says."""
import json
import os
import sys
import tempfile

import spm_proto

spm_proto.patch()
import transformers  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for d in sys.argv[2:]:
    cfg = json.load(open(os.path.join(d, "tokenizer_config.json")))
    cls = cfg["tokenizer_class"]
    tok = getattr(transformers, cls).from_pretrained(d)
    with tempfile.TemporaryDirectory() as tmp:
        tok.save_pretrained(tmp)
        j = json.load(open(os.path.join(tmp, "tokenizer.json")))
    n = len(spm_proto.parse(open(os.path.join(d, "tokenizer.model"), "rb").read()).pieces)
    listed = {int(k) for k in cfg.get("added_tokens_decoder", {})}
    j["added_tokens"] = [a for a in j["added_tokens"] if a["id"] < n or a["id"] in listed]
    name = os.path.basename(os.path.normpath(d))
    with open(os.path.join(out, name + ".json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")
    print(name, cls, len(j["model"]["vocab"]), "pieces", len(j["model"]["merges"]), "merges")
