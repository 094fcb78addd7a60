"""convert_hf_to_gguf.py's GGUF of gpt-oss's own MXFP4 experts, for
tests/quant/fp4_test.sh. Run in the forky chroot (llama.cpp 0.7):
    python3 make_gptoss_mxfp4_gguf.py SRC OUT
SRC is the tpconv tree. A folder named tiny-gpt-oss (general.name "Tiny Gpt
Oss", as tests/gguf/arch's) gets tests/quant/fp4/gptoss-mxfp4's config.json
and model.safetensors (make_gptoss_mxfp4.py) and tests/gguf/arch/tiny-gpt-oss's
tokenizer files; tests/gguf/ref_convert.py converts it at each outtype.
OUT gets gptoss-mxfp4-gguf.sha256 (one line per outtype) and
gptoss-mxfp4-bf16.txt, gguf_arch_dump.py's listing of the bf16 file: the
experts are MXFP4 whatever the outtype (GptOssModel.repack_mxfp4), first in
the file."""
import hashlib, os, shutil, subprocess, sys, tempfile

src, out = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp()
d = os.path.join(tmp, "tiny-gpt-oss")
os.makedirs(d)
for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
    shutil.copy(os.path.join(src, "tests/gguf/arch/tiny-gpt-oss", f), d)
for f in ("config.json", "model.safetensors"):
    shutil.copy(os.path.join(src, "tests/quant/fp4/gptoss-mxfp4", f), d)
lines = []
for ot in ("f32", "f16", "bf16", "q8_0", "auto"):
    g = os.path.join(tmp, "gpt-oss-mxfp4-%s.gguf" % ot)
    subprocess.run([sys.executable, os.path.join(src, "tests/gguf/ref_convert.py"), d, "--outtype", ot, "--outfile", g],
                   check=True, env=dict(os.environ, TPC_PRE="gpt-2"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lines.append("%s  gpt-oss-mxfp4-%s.gguf\n" % (hashlib.sha256(open(g, "rb").read()).hexdigest(), ot))
    if ot == "bf16":
        with open(os.path.join(out, "gptoss-mxfp4-bf16.txt"), "w") as f:
            subprocess.run([sys.executable, os.path.join(src, "tests/gguf/gguf_arch_dump.py"), g], check=True, stdout=f)
open(os.path.join(out, "gptoss-mxfp4-gguf.sha256"), "w").writelines(lines)
shutil.rmtree(tmp)
print("wrote", out)
