#!/usr/bin/env python3
"""The tokenizer files tpconv rebuilds from a GGUF's metadata tokenize as the
original model folder's tokenizer does (inside the chroot; run.sh made the files).

usage: tokenizer.py WORK
  WORK/gguf/models/tiny-FAMILY/  the tiny models of tests/gguf/arch
  WORK/gguf/tpc/FAMILY-hf/       tpconv convert FAMILY-f32.gguf -o FAMILY-hf/
  WORK/gguf/chat/tiny-qwen2-chat, WORK/gguf/tpc/qwen2-chat-hf/  the same with a chat template
A BPE (tokenizer.json) is loaded with transformers' AutoTokenizer from both folders:
the same ids for each text (ASCII, Unicode, digits, contractions, special and added
tokens in the text), the same decoded text, special tokens and chat template ids;
so is tiny-llama-hf (LlamaHfVocab: a tokenizer.json alone, rebuilt as one), with
all its special tokens and added tokens (text, special flag) compared too. The chroot
has no protobuf, so transformers cannot read a tokenizer.model: a SentencePiece
folder is loaded with sentencepiece itself, and through the tokenizer.json tpconv
writes beside its tokenizer.model with AutoTokenizer, which must give the ids the
original's tokenizer.model gives (sentencepiece) and decode them back; where the
original's tokenizer_config names the class tpconv's does, also every text (special
tokens in it too) as transformers' own conversion of the original's tokenizer.model
(read by spm_proto.py, loaded with that class). HunYuan's hy.tiktoken comes back
byte for byte, and with the model's own remote tokenizer module copied beside
it (tpconv writes no code) AutoTokenizer(trust_remote_code=True) gives the same
ids and special tokens. What the GGUF does not hold is not compared:
runs of spaces (sentencepiece's remove_extra_whitespaces, which llama.cpp does not
do: the rebuilt model keeps them, checked on its own) and gemma's dummy prefix
(the reference writes add_space_prefix false for gemma, gemma2 and gemma3, NO_PREFIX; the
tiny models have one).
Appends rows to WORK/results.tsv."""
import os
import sys

from families import result as _result

W = sys.argv[1]
G = os.path.join(W, "gguf")
TEXTS = ["Hello world", "the quick brown fox jumps over the lazy dog.", "tab\there\nnewline",
         "naïve café — 日本語 😀", "1234567 3.14159 2024-01-01", "don't I'll we're", "<s>hi</s><|endoftext|> x",
         "<|user|>hi <|tool|> x<unk>"]
CHAT = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello!"}]
OP = "GGUF → tokenizer files"
# the families whose GGUF the reference writes with add_space_prefix false
# (GemmaModel, Gemma2Model, Gemma3Model) though their tokenizer.model adds a dummy prefix
NO_PREFIX = ("gemma", "gemma2", "gemma3")


def result(consumer, fam, case, ok, detail):
    _result(W, consumer, fam, OP, case, "pass" if ok else "fail", detail)


def original(fam):
    d = os.path.join(G, "models", "tiny-" + fam)
    return d if os.path.isdir(d) else os.path.join(G, "chat", "tiny-" + fam)


def bpe(fam):
    from transformers import AutoTokenizer
    a = AutoTokenizer.from_pretrained(original(fam))
    b = AutoTokenizer.from_pretrained(os.path.join(G, "tpc", fam + "-hf"))
    bad = [t for t in TEXTS if a(t)["input_ids"] != b(t)["input_ids"] or
           a.decode(a(t)["input_ids"]) != b.decode(b(t)["input_ids"])]
    result("transformers", fam, "AutoTokenizer: %d texts" % len(TEXTS), not bad,
           "%s loads; same ids and decoded text" % type(b).__name__ if not bad else "differs on %r" % bad[:2])
    # unk and pad where the model names them: elsewhere transformers takes a class default
    # (Qwen2Tokenizer's, GPT2Tokenizer's) or none, depending on the class it picks
    keys = ["bos_token", "eos_token"] + [k for k in ("unk_token", "pad_token") if k in a.init_kwargs]
    sp = [k for k in keys if getattr(a, k) != getattr(b, k)]
    if fam == "llama-hf":  # tokenizer_config names every special token: all of them, and the added ones
        keys.append("all_special_tokens")
        sp += ["all_special_tokens"] if sorted(a.all_special_tokens) != sorted(b.all_special_tokens) else []
        added = lambda t: {i: (str(x), x.special) for i, x in t.added_tokens_decoder.items()}  # noqa: E731
        keys.append("added tokens")
        sp += ["added tokens %s != %s" % (added(a), added(b))] if added(a) != added(b) else []
    result("transformers", fam, "special tokens", not sp, "%s the same" % ", ".join(keys) if not sp else "differ: %s" % sp)
    if a.chat_template:
        x, y = a.apply_chat_template(CHAT, tokenize=True), b.apply_chat_template(CHAT, tokenize=True)
        x, y = getattr(x, "input_ids", x), getattr(y, "input_ids", y)
        result("transformers", fam, "chat template", x == y, "same ids (%d)" % len(x) if x == y else "%s != %s" % (x, y))


def spm(fam):
    import sentencepiece
    a = sentencepiece.SentencePieceProcessor(model_file=os.path.join(original(fam), "tokenizer.model"))
    b = sentencepiece.SentencePieceProcessor(model_file=os.path.join(G, "tpc", fam + "-hf", "tokenizer.model"))
    texts = [t for t in TEXTS if "<" not in t]  # pieces, not added tokens (transformers' business)
    lead = " " if fam in NO_PREFIX else ""  # the original's dummy prefix, made explicit
    bad = [t for t in texts if a.encode(t) != b.encode(lead + t) or b.decode(b.encode(t)) != t]
    result("sentencepiece", fam, "SentencePieceProcessor: %d texts" % len(texts), not bad,
           "same ids, decodes back" + (" (the original's dummy prefix aside)" if fam in NO_PREFIX else "")
           if not bad else "differs on %r" % bad[:2])
    t = "  two  spaces"
    result("sentencepiece", fam, "runs of spaces kept (as llama.cpp)", b.decode(b.encode(t)) == t, repr(b.decode(b.encode(t))))


def spm_fast(fam):
    """AutoTokenizer on tpconv's folder (tokenizer.json: no protobuf needed)"""
    import json
    import sentencepiece
    from transformers import AutoTokenizer
    tpc = os.path.join(G, "tpc", fam + "-hf")
    b = AutoTokenizer.from_pretrained(tpc)
    a = sentencepiece.SentencePieceProcessor(model_file=os.path.join(original(fam), "tokenizer.model"))
    texts = [t for t in TEXTS if "<" not in t]
    lead = " " if fam in NO_PREFIX else ""  # the original's dummy prefix, made explicit
    bad = []
    for t in texts:
        ids = b(lead + t, add_special_tokens=False)["input_ids"]
        if ids != a.encode(t) or b.decode(ids) != lead + t:
            bad.append((t, ids, a.encode(t)))
    result("transformers", fam, "AutoTokenizer on tokenizer.json vs sentencepiece: %d texts" % len(texts), not bad,
           "%s loads; the ids of the original's tokenizer.model, decodes back" % type(b).__name__
           + (" (the original's dummy prefix aside)" if lead else "") if not bad else "differs on %r" % bad[:2])
    # transformers' own conversion of the original's tokenizer.model, with the class it names
    cls = json.load(open(os.path.join(original(fam), "tokenizer_config.json"))).get("tokenizer_class")
    if cls != json.load(open(os.path.join(tpc, "tokenizer_config.json"))).get("tokenizer_class"):
        return
    import spm_proto
    import transformers
    undo = spm_proto.patch()  # tpconv's folder was loaded without it
    try:
        o = getattr(transformers, cls).from_pretrained(original(fam))
    finally:
        undo()
    bad = [t for t in TEXTS if o(t)["input_ids"] != b(t)["input_ids"] or
           o.decode(o(t)["input_ids"]) != b.decode(b(t)["input_ids"])]
    keys = [k for k in ("bos_token", "eos_token", "unk_token") if getattr(o, k) != getattr(b, k)]
    result("transformers", fam, "AutoTokenizer vs %s of the original tokenizer.model: %d texts" % (cls, len(TEXTS)),
           not bad and not keys, "same ids (special tokens in the text too), decoded text, bos/eos/unk"
           if not bad and not keys else "differs on %r; tokens %s" % (bad[:2], keys))


def tiktoken(fam):
    """HunYuan's hy.tiktoken: rebuilt byte for byte; with the model's remote
    tokenizer module beside it (tpconv writes no code: the module is the
    checkpoint's), AutoTokenizer(trust_remote_code) tokenizes as the model's"""
    import filecmp
    import shutil
    from transformers import AutoTokenizer
    o, b = original(fam), os.path.join(G, "tpc", fam + "-hf")
    same = filecmp.cmp(os.path.join(o, "hy.tiktoken"), os.path.join(b, "hy.tiktoken"), shallow=False)
    result("transformers", fam, "hy.tiktoken", same, "byte-identical to the model's" if same else "differs")
    shutil.copy(os.path.join(o, "tokenization_hy.py"), b)
    ta = AutoTokenizer.from_pretrained(o, trust_remote_code=True)
    tb = AutoTokenizer.from_pretrained(b, trust_remote_code=True)
    bad = [t for t in TEXTS if ta.encode(t) != tb.encode(t)]
    result("transformers", fam, "AutoTokenizer (remote code): %d texts" % len(TEXTS), not bad and
           ta.special_tokens == tb.special_tokens, "same ids, same special tokens" if not bad else "differs on %r" % bad[:2])


def main():
    for d in sorted(os.listdir(os.path.join(G, "tpc"))):
        if not d.endswith("-hf"):
            continue
        fam = d[:-3]
        has = lambda name: os.path.exists(os.path.join(G, "tpc", d, name))  # noqa: E731
        if has("tokenizer.model") and not os.path.exists(os.path.join(original(fam), "tokenizer.model")):
            # tiny-llama-hf (LlamaHfVocab, every score -1000) comes back as a tokenizer.json alone
            result("transformers", fam, "tokenizer files", False,
                   "tpconv wrote a tokenizer.model for a model whose tokenizer is a tokenizer.json")
            continue
        checks = ([(spm, "sentencepiece")] if has("tokenizer.model") else []) + \
                 ([(spm_fast if has("tokenizer.model") else bpe, "transformers")] if has("tokenizer.json") else []) + \
                 ([(tiktoken, "transformers")] if has("hy.tiktoken") else [])
        if not checks or has("tokenizer.model") and not has("tokenizer.json"):
            result("transformers", fam, "tokenizer files", False,
                   "tpconv wrote %s" % ("no tokenizer.json beside tokenizer.model" if checks else "none"))
        for check, consumer in checks:
            try:
                check(fam)
            except Exception as e:  # one check's failure is a row, not the end of the run
                result(consumer, fam, "tokenizer files", False, e)


if __name__ == "__main__":
    main()
