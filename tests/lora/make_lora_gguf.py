"""Adapter GGUF fixtures for tests/lora (tpconv convert ADAPTER --base BASE to
.gguf, and back), made by llama.cpp's own converter. Run in the forky chroot
(torch 2.14, safetensors, gguf-py 0.19, Debian llama.cpp-tools 0.7.0):

  python3 make_lora_gguf.py OUTDIR SRCDIR CONVERT_LORA_TO_GGUF_PY

SRCDIR is the repository (its tests/gguf/arch/tiny-llama and tiny-qwen2 are the
bases: config.json, model.safetensors, tokenizers). CONVERT_LORA_TO_GGUF_PY is
ggml-org/llama.cpp's convert_lora_to_gguf.py (commit 0b03adaa: Debian's
llama.cpp-tools ships convert_hf_to_gguf.py and its conversion/ package, not
this script); it imports LazyTorchTensor and ModelBase from convert_hf_to_gguf,
which Debian's conversion package provides (its __init__ exports both), so the
module is aliased to it before the script runs. Then copy OUTDIR/* to
tests/lora/gguf/ (seeded: the same bytes each run), but for
OUTDIR/llama-alora/adapter/adapter_model.safetensors: llama-alora is
llama's adapter with alora_invocation_tokens in its config, and the test
takes the tensors from llama/adapter.

For each family FAM (llama: LlamaModel's Q/K row permutation on lora_b;
qwen2: none, tied embeddings, no embedding LoRA; phi3: fused weights renamed;
mixtral: the experts stacked), OUTDIR/FAM/adapter/ is an adapter as PEFT
v0.20.0 save_pretrained writes it (adapter_config.json,
adapter_model.safetensors, keys base_model.model.<module>.lora_A.weight /
lora_B.weight, lora_embedding_A / lora_embedding_B for embed_tokens), every
linear projection targeted (llama: the token embedding and lm_head too), and
OUTDIR/FAM/ref-OUTTYPE.gguf the reference's file for each --outtype.
llama's adapter is float32, qwen2's bfloat16.
"""
import json, os, runpy, shutil, sys
import torch
from safetensors.torch import load_file, save_file

out, src, script = sys.argv[1], sys.argv[2], sys.argv[3]
P = "base_model.model."
g = torch.Generator().manual_seed(4303)

FAMS = {
    # family: (base folder, adapter dtype, r, alpha, targets, outtypes)
    "llama": ("tiny-llama", torch.float32, 4, 8,
              ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "embed_tokens", "lm_head"],
              ["f32", "f16", "bf16", "q8_0"]),
    # no embed_tokens: tiny-qwen2 ties lm_head to it, and llama.cpp 0.7 then
    # applies token_embd's pair to the output too and aborts (tpconv refuses)
    "qwen2": ("tiny-qwen2", torch.bfloat16, 8, 16,
              ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
              ["f32", "bf16"]),
    # Phi-3: the checkpoint's fused qkv_proj and gate_up_proj, renamed
    # (attn_qkv, ffn_up) and kept whole, no permutation
    "phi3": ("tiny-phi3", torch.float32, 4, 8, ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"], ["f32"]),
    # Mixtral: a LoRA on every expert's w1/w2/w3 and the router; the reference
    # stacks a layer's experts (conversion/llama.py, torch.stack on its
    # LoraTorchTensor): ffn_*_exps lora_a [E, r, in], lora_b [E, out, r]
    "mixtral": ("tiny-mixtral", torch.float32, 4, 8, ["q_proj", "k_proj", "v_proj", "o_proj", "gate", "w1", "w2", "w3"],
                ["f32", "q8_0"]),
}


def peft_cfg(r, alpha, targets):
    return {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": None, "r": r,
            "lora_alpha": alpha, "lora_dropout": 0.0, "fan_in_fan_out": False, "bias": "none",
            "use_rslora": False, "use_dora": False, "target_modules": targets, "modules_to_save": None,
            "rank_pattern": {}, "alpha_pattern": {}, "init_lora_weights": True, "layers_to_transform": None,
            "layers_pattern": None, "lora_bias": False, "target_parameters": None, "exclude_modules": None,
            "inference_mode": True, "revision": None}


def adapter(base_sd, dtype, r, targets):
    ad = {}
    for k, W in sorted(base_sd.items()):
        if W.dim() != 2 or not k.endswith(".weight"):
            continue
        m = k[:-len(".weight")]
        leaf = m.rsplit(".", 1)[-1]
        if leaf not in targets:
            continue
        o, i = W.shape
        if leaf == "embed_tokens":  # PEFT Embedding: A [r, vocab], B [dim, r]
            ad[P + m + ".lora_embedding_A"] = torch.randn(r, o, generator=g) * 0.1
            ad[P + m + ".lora_embedding_B"] = torch.randn(i, r, generator=g) * 0.1
        else:
            ad[P + m + ".lora_A.weight"] = torch.randn(r, i, generator=g) * 0.1
            ad[P + m + ".lora_B.weight"] = torch.randn(o, r, generator=g) * 0.1
    return {k: v.to(dtype).contiguous() for k, v in ad.items()}


# the script's `from convert_hf_to_gguf import LazyTorchTensor, ModelBase`
sys.path.insert(1, "/usr/share/llama.cpp/llama.cpp-tools")
import conversion  # noqa: E402
sys.modules["convert_hf_to_gguf"] = conversion

for fam, (base, dtype, r, alpha, targets, outtypes) in FAMS.items():
    bdir = os.path.join(src, "tests/gguf/arch", base)
    d = os.path.join(out, fam)
    adir = os.path.join(d, "adapter")
    os.makedirs(adir, exist_ok=True)
    ad = adapter(load_file(os.path.join(bdir, "model.safetensors")), dtype, r, targets)
    save_file(ad, os.path.join(adir, "adapter_model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(adir, "adapter_config.json"), "w") as f:
        json.dump(peft_cfg(r, alpha, targets), f, indent=2, sort_keys=True)
    for ot in outtypes:
        sys.argv = [script, "--base", bdir, "--outtype", ot, "--outfile", os.path.join(d, f"ref-{ot}.gguf"), adir]
        runpy.run_path(script, run_name="__main__")
    print(fam, len(ad), "adapter tensors,", ", ".join(outtypes))

# an activated LoRA (PEFT's alora_invocation_tokens, LoraConfig at 5d602fdb
# L836-846): llama's adapter with the invocation tokens in its config; the
# reference writes them as adapter.alora.invocation_tokens (u32 array) after
# adapter.lora.alpha (LoraModel.set_gguf_parameters)
bdir = os.path.join(src, "tests/gguf/arch/tiny-llama")
adir = os.path.join(out, "llama-alora", "adapter")
os.makedirs(adir, exist_ok=True)
shutil.copy(os.path.join(out, "llama", "adapter", "adapter_model.safetensors"), adir)
cfg = json.load(open(os.path.join(out, "llama", "adapter", "adapter_config.json")))
cfg["alora_invocation_tokens"] = [5, 17, 3]
with open(os.path.join(adir, "adapter_config.json"), "w") as f:
    json.dump(cfg, f, indent=2, sort_keys=True)
sys.argv = [script, "--base", bdir, "--outtype", "f32", "--outfile", os.path.join(out, "llama-alora", "ref-f32.gguf"), adir]
runpy.run_path(script, run_name="__main__")
print("llama-alora: f32")
