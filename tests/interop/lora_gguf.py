#!/usr/bin/env python3
"""llama.cpp applies tpconv's adapter GGUF as tpconv's merge does (inside the
chroot; run.sh made the files with tpconv on the host):
  WORK/lora-gguf/FAM-base.gguf     tpconv convert tiny-FAM --outtype f32
  WORK/lora-gguf/FAM-merged.gguf   tpconv convert tiny-FAM --lora ADAPTER --outtype f32
  WORK/lora-gguf/FAM-adapter.gguf  tpconv convert ADAPTER --base tiny-FAM (f32)
(tests/lora/gguf/FAM/adapter, tests/gguf/arch/tiny-FAM). llama-completion at
temperature 0 on the base with --lora FAM-adapter.gguf must write the same text
as on the merged GGUF, and another text than the base alone (the adapter acts).
Appends rows to WORK/results.tsv.
usage: lora_gguf.py WORK FAM..."""
import os
import subprocess
import sys

W = sys.argv[1]
L = os.path.join(W, "lora-gguf")
PROMPT = "the quick brown fox"


def result(fam, case, status, detail=""):
    with open(os.path.join(W, "results.tsv"), "a") as f:
        f.write("\t".join(["llama.cpp", fam, "adapter GGUF → llama-completion --lora", case, status,
                           detail.replace("\t", " ").replace("\n", " ")]) + "\n")


def complete(model, *extra):
    """llamacpp.py's complete(): one thread, up to 5 tries until the summary prints"""
    for _ in range(5):
        p = subprocess.run(["llama-completion", "-m", model, *extra, "-p", PROMPT, "-n", "16", "--temp", "0",
                            "--seed", "1", "-no-cnv", "-t", "1", "-tb", "1", "-c", "128", "--no-warmup"],
                           capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
        if p.returncode:
            raise RuntimeError("llama-completion exit %d: %s" % (p.returncode, p.stderr[-400:].decode(errors="replace")))
        if b"common_perf_print" in p.stderr:
            return p.stdout
    raise RuntimeError("llama-completion ended early 5 times")


for fam in sys.argv[2:]:
    f = {k: os.path.join(L, "%s-%s.gguf" % (fam, k)) for k in ("base", "merged", "adapter")}
    missing = [k for k in f if not os.path.exists(f[k])]
    if missing:
        result(fam, "f32", "fail", "tpconv wrote no %s GGUF" % ", ".join(missing))
        continue
    try:
        lora, merged, base = complete(f["base"], "--lora", f["adapter"]), complete(f["merged"]), complete(f["base"])
        if lora == merged and lora != base:
            result(fam, "f32", "pass", "base + --lora adapter.gguf writes the merged GGUF's text (%d bytes), not the base's"
                   % len(lora))
        else:
            result(fam, "f32", "fail", "with --lora %r, merged %r, base %r" % (lora[-60:], merged[-60:], base[-60:]))
    except Exception as e:
        result(fam, "f32", "fail", str(e)[-300:])
