#!/usr/bin/env python3
"""llama.cpp loads tpconv's GGUF (inside the chroot; run.sh made tpconv's files).

usage: llamacpp.py WORK
  WORK/gguf/models/tiny-FAMILY/  the tiny models of tests/gguf/arch (with tokenizers)
  WORK/gguf/tpc/FAMILY-OUTTYPE.gguf  tpconv convert's GGUF of each
  WORK/gguf/tpc/FAMILY-split/tiny-00001-of-0000N.gguf  tpconv's gguf-split set (f32)
(and tiny-qwen3_5-mrope, tiny-qwen3_5-moe-mrope: rope sections llama.cpp runs
on a tiny head, run.sh's). For each family: convert_hf_to_gguf.py's GGUF of the same model (ref_convert.py:
the pre-tokenizer name of a BPE tokenizer trained for the test given, as its hash
table cannot know it), then llama-completion at temperature 0 on both: the same
text must come out (and the files are compared byte for byte). The split set loads
from its first file and generates the same text; llama-quantize makes Q4_K_M and
Q6_K of tpconv's f16 file, which llama-completion loads and runs; tpconv's own
--outtype q4_k_m file is llama-quantize's Q4_K_M of tpconv's f32 file byte for
byte, and llama-completion gives the same text with both. Appends rows to
WORK/results.tsv (consumer, family, operation, case, status, detail)."""
import filecmp
import glob
import os
import subprocess
import sys

W = sys.argv[1]
G = os.path.join(W, "gguf")
PRE = {"qwen2": "qwen2", "qwen3": "qwen2", "qwen2-moe": "qwen2", "gpt2": "gpt-2", "gpt-neox": "olmo", "olmo2": "olmo", "olmo3": "olmo", "qwen3-moe": "qwen2", "olmoe": "olmo", "starcoder2": "gpt-2",
       "seed-oss": "gpt-2", "glm4": "gpt-2", "glm4-moe": "gpt-2", "exaone4": "gpt-2", "phi": "gpt-2", "cohere2": "gpt-2", "deepseek": "gpt-2", "gpt-oss": "gpt-2", "llama4": "gpt-2",
       "llama3": "llama-bpe", "qwen3-next": "qwen2",
       "qwen3_5": "qwen2", "qwen3_5-moe": "qwen2", "qwen3_5-mrope": "qwen2", "qwen3_5-moe-mrope": "qwen2",
       # the name the reference's table gives Hunyuan-A13B's tiktoken tokenizer
       "hunyuan-moe": "hunyuan",
       # and Hunyuan-4B's (HunYuanModel, the same hy.tiktoken layout)
       "hunyuan-dense": "hunyuan-dense"}
# the reference's own flags (make_arch_fixtures.py's REF_ARGS): none, its
# default run (the Qwen models' multi-token-prediction block kept)
REF_ARGS = {}
PROMPT = "the quick brown fox"


def result(fam, op, case, status, detail=""):
    with open(os.path.join(W, "results.tsv"), "a") as f:
        f.write("\t".join(["llama.cpp", fam, op, case, status, detail.replace("\t", " ").replace("\n", " ")]) + "\n")


def tpc_err(stem):
    try:
        return open(stem + ".err").read().strip()
    except OSError:
        return "wrote nothing"


def complete(path):
    """llama-completion's output at temperature 0 (greedy), or raises with its stderr.
    llama-completion 0.7 (Debian's OpenMP build) with 2 threads sometimes ends early
    with status 0 and part of its output, the same file run after run (1 in 6 runs
    here); with one thread it did not: one thread, and a run counts once its
    performance summary is printed, up to 5 tries."""
    for _ in range(5):
        p = subprocess.run(["llama-completion", "-m", path, "-p", PROMPT, "-n", "16", "--temp", "0", "--seed", "1",
                            "-no-cnv", "-t", "1", "-tb", "1", "-c", "128", "--no-warmup"], capture_output=True, timeout=300,
                           stdin=subprocess.DEVNULL)
        if p.returncode:
            raise RuntimeError("llama-completion exit %d: %s" % (p.returncode, p.stderr[-400:].decode(errors="replace")))
        if b"common_perf_print" in p.stderr:
            return p.stdout  # bytes: a random model's text is not always UTF-8
    raise RuntimeError("llama-completion ended early 5 times (status 0, no summary): %r" % p.stdout[-80:])


def reference(fam, ot):
    out = os.path.join(G, "ref", "%s-%s.gguf" % (fam, ot))
    if os.path.exists(out):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    env = dict(os.environ, TPC_PRE=PRE.get(fam, ""))
    subprocess.run([sys.executable, os.path.join(W, "ref_convert.py"), os.path.join(G, "models", "tiny-" + fam),
                    "--outtype", ot, "--outfile", out] + REF_ARGS.get(fam, []), check=True, env=env, capture_output=True)
    return out


def family(fam):
    # a family tpconv refuses into GGUF by name (exit 3: a record without a
    # GGUF column, whose tiny model tests/gguf/arch keeps for its other
    # checks) is n/a, with tpconv's message
    err = tpc_err(os.path.join(G, "tpc", fam + "-f32"))
    if not os.path.exists(os.path.join(G, "tpc", fam + "-f32.gguf")) and err.startswith("exit 3:"):
        for op, case in (("GGUF → llama-completion", "f32"), ("GGUF → llama-completion", "f16"),
                         ("gguf-split set → llama-completion", "f32"), ("llama-quantize of tpconv's f16", "Q4_K_M"),
                         ("llama-quantize of tpconv's f16", "Q6_K"), ("tpconv --outtype q4_k_m", "Q4_K_M")):
            result(fam, op, case, "n/a", "tpconv refuses it into GGUF (no GGUF column): " + err[:200])
        return
    # a model llama.cpp cannot load from the reference's own file is n/a, not
    # tpconv's failure (as the tiny phi3 was before it had Phi-3's added
    # tokens: llama.cpp looks <|endoftext|> up in a phi3's vocabulary)
    try:
        complete(reference(fam, "f32"))
    except Exception as e:
        mine = os.path.join(G, "tpc", fam + "-f32.gguf")
        same = os.path.exists(mine) and filecmp.cmp(reference(fam, "f32"), mine, shallow=False)
        for op, case in (("GGUF → llama-completion", "f32"), ("GGUF → llama-completion", "f16"),
                         ("gguf-split set → llama-completion", "f32"), ("llama-quantize of tpconv's f16", "Q4_K_M"),
                         ("llama-quantize of tpconv's f16", "Q6_K"), ("tpconv --outtype q4_k_m", "Q4_K_M")):
            result(fam, op, case, "n/a", "llama.cpp cannot load convert_hf_to_gguf.py's own GGUF of this model "
                   "either (tpconv's f32 file %s): %s" % ("byte-identical" if same else "differs", str(e)[-160:]))
        return
    for ot in ("f32", "f16"):
        mine = os.path.join(G, "tpc", "%s-%s.gguf" % (fam, ot))
        if not os.path.exists(mine):
            result(fam, "GGUF → llama-completion", ot, "fail", "tpconv convert " + tpc_err(mine[:-5]))
            continue
        try:
            ref = reference(fam, ot)
            same = filecmp.cmp(ref, mine, shallow=False)
            a, b = complete(ref), complete(mine)
            if a == b:
                result(fam, "GGUF → llama-completion", ot, "pass",
                       "same text as the reference's GGUF%s: %r" % (" (byte-identical files)" if same else "",
                                                                     b[-60:].decode(errors="replace")))
            else:
                result(fam, "GGUF → llama-completion", ot, "fail", "reference %r, tpconv %r" % (a[-80:], b[-80:]))
        except Exception as e:  # one family's failure is a row, not the end of the run
            result(fam, "GGUF → llama-completion", ot, "fail", str(e)[-300:])
    first = sorted(glob.glob(os.path.join(G, "tpc", fam + "-split", "*-00001-of-*.gguf")))
    try:
        if not first:
            raise RuntimeError("tpconv convert --max-shard-size " + tpc_err(os.path.join(G, "tpc", fam + "-split")))
        n = len(glob.glob(first[0].replace("-00001-of-", "-0000?-of-")))
        a, b = complete(reference(fam, "f32")), complete(first[0])
        result(fam, "gguf-split set → llama-completion", "%d files, f32" % n, "pass" if a == b else "fail",
               "same text as the reference's single file" if a == b else "reference %r, split %r" % (a[-80:], b[-80:]))
    except Exception as e:
        result(fam, "gguf-split set → llama-completion", "f32", "fail", str(e)[-300:])
    for q in ("Q4_K_M", "Q6_K"):
        src = os.path.join(G, "tpc", "%s-f16.gguf" % fam)
        dst = os.path.join(G, "tpc", "%s-%s.gguf" % (fam, q))
        try:
            p = subprocess.run(["llama-quantize", src, dst, q], capture_output=True, timeout=300)
            if p.returncode:
                raise RuntimeError("llama-quantize exit %d: %s" % (p.returncode, p.stderr[-300:].decode(errors="replace")))
            complete(dst)
            result(fam, "llama-quantize of tpconv's f16", q, "pass", "quantized, loads and generates")
        except Exception as e:
            result(fam, "llama-quantize of tpconv's f16", q, "fail", str(e)[-300:])
    mine = os.path.join(G, "tpc", "%s-q4_k_m.gguf" % fam)
    ref = os.path.join(G, "tpc", "%s-f32-Q4_K_M.gguf" % fam)
    try:
        if not os.path.exists(mine):
            raise RuntimeError("tpconv convert " + tpc_err(mine[:-5]))
        p = subprocess.run(["llama-quantize", os.path.join(G, "tpc", "%s-f32.gguf" % fam), ref, "Q4_K_M"],
                           capture_output=True, timeout=300)
        if p.returncode:
            raise RuntimeError("llama-quantize exit %d: %s" % (p.returncode, p.stderr[-300:].decode(errors="replace")))
        same = filecmp.cmp(ref, mine, shallow=False)
        a, b = complete(ref), complete(mine)
        if same and a == b:
            result(fam, "tpconv --outtype q4_k_m", "Q4_K_M", "pass",
                   "llama-quantize's Q4_K_M of the f32 file (byte-identical files), loads, same text")
        else:
            result(fam, "tpconv --outtype q4_k_m", "Q4_K_M", "fail",
                   "files %s; llama-quantize's %r, tpconv's %r" % ("identical" if same else "differ", a[-60:], b[-60:]))
    except Exception as e:
        result(fam, "tpconv --outtype q4_k_m", "Q4_K_M", "fail", str(e)[-300:])


def main():
    for d in sorted(glob.glob(os.path.join(G, "models", "tiny-*"))):
        family(os.path.basename(d)[len("tiny-"):])


main()
