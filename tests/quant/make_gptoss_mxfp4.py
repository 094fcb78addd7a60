"""gpt-oss's own MXFP4 layout, for tests/quant/fp4_test.sh. Run in the forky
chroot (torch 2.14, transformers 5.12):  python3 make_gptoss_mxfp4.py SRC OUT

SRC is tests/gguf/arch/tiny-gpt-oss (bf16, made by transformers). OUT gets the
same model as OpenAI ships gpt-oss: every layer's experts as
mlp.experts.{gate_up,down}_proj_blocks u8 [E, out, in/32, 16] and _scales u8
[E, out, in/32] (the [out, in] matrix's rows, 32 consecutive inputs a block,
element 2j in the low nibble; value = E2M1 * 2^(scale - 127)), config.json
with quantization_config {"quant_method": "mxfp4"}; and ref.safetensors, the
dense bf16 experts transformers' integrations/mxfp4.py
convert_moe_packed_tensors gives for them ([E, in, out]) beside the other
tensors unchanged. The codes quantize the bf16 weights (nearest E2M1 after
dividing by the block's power-of-two scale), so the model is still the model."""
import json, os, shutil, sys
import torch
from safetensors.torch import load_file, save_file
from transformers.integrations.mxfp4 import convert_moe_packed_tensors

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
sd = load_file(os.path.join(src, "model.safetensors"))
GRID = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def quantize(w):  # w [E, in, out] (the HF parameter) -> blocks, scales
    m = w.float().transpose(1, 2).contiguous()  # [E, out, in]
    E, R, I = m.shape
    blk = m.reshape(E, R, I // 32, 32)
    amax = blk.abs().amax(-1).clamp(min=2.0 ** -120)
    exp = torch.floor(torch.log2(amax)) - 2  # 6 = 1.5 * 2^2: the largest code fits
    scales = (exp + 127).to(torch.uint8)
    x = blk / torch.pow(2.0, exp).unsqueeze(-1)
    idx = (x.abs().unsqueeze(-1) - GRID).abs().argmin(-1)
    codes = (idx | torch.where(x < 0, 8, 0)).to(torch.uint8)
    blocks = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return blocks.contiguous(), scales.contiguous()


q, ref = {}, {}
for k, v in sd.items():
    if k.endswith("experts.gate_up_proj") or k.endswith("experts.down_proj"):
        b, s = quantize(v)
        q[k + "_blocks"], q[k + "_scales"] = b, s
        ref[k] = convert_moe_packed_tensors(b, s)  # bf16 [E, in, out]
        assert ref[k].shape == v.shape
    else:
        q[k] = ref[k] = v
save_file(q, os.path.join(out, "model.safetensors"))
save_file(ref, os.path.join(out, "ref.safetensors"))
c = json.load(open(os.path.join(src, "config.json")))
c["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
    "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
json.dump(c, open(os.path.join(out, "config.json"), "w"), indent=2)
print("wrote", out)
