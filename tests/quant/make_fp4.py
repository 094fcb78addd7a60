"""NVFP4 and MXFP4 checkpoints and their dequantized weights, for
tests/quant/fp4_test.sh. Run in the forky chroot (torch 2.14,
python3-compressed-tensors 0.17):  python3 make_fp4.py OUTDIR

Each folder holds model.safetensors + config.json as the producer writes them,
and ref.safetensors: the dense bf16 weights their own decoder gives.
  ct-nvfp4    compressed-tensors nvfp4-pack-quantized: weight_packed u8 [O, I/2],
              weight_scale float8_e4m3fn [O, I/16], weight_global_scale f32 [1],
              input_global_scale f32 [1]; ref = NVFP4PackedCompressor.decompress
  ct-mxfp4    mxfp4-pack-quantized: weight_packed, weight_scale u8 (E8M0) [O, I/32];
              ref = MXFP4PackedCompressor.decompress
  modelopt    NVIDIA ModelOpt NVFP4 (hf_quant_config.json; config.json's
              quantization_config quant_method "modelopt"): weight u8 [O, I/2],
              weight_scale float8_e4m3fn [O, I/16], weight_scale_2 f32 [],
              input_scale f32 []. ModelOpt is not in Debian: ref is a torch
              re-implementation of modelopt/torch/quantization/qtensor/
              nvfp4_tensor.py NVFP4QTensor.dequantize (the E2M1 value times the
              block scale in f32 times weight_scale_2), rounded to bf16.
The values are random (seeded) codes, scales and global scales, not a trained
model's: the decoders, not the quantizers, are what is compared."""
import json, os, sys
import torch
from safetensors.torch import save_file
from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
from compressed_tensors.compressors.mxfp4.base import MXFP4PackedCompressor
from compressed_tensors.quantization import preset_name_to_scheme

out = sys.argv[1]
g = torch.Generator().manual_seed(4)
LAYERS = {"model.layers.0.mlp.down_proj": (48, 64), "model.layers.0.self_attn.q_proj": (32, 96)}
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def packed(o, i):
    return torch.randint(0, 256, (o, i // 2), dtype=torch.uint8, generator=g)


def e4m3(shape):  # positive block scales over a wide range, as float8_e4m3fn
    return (torch.rand(shape, generator=g) * 300 + 0.01).to(torch.float8_e4m3fn)


def unpack(p):  # element 2j: low nibble, 2j+1: high
    lo, hi = p & 0xF, p >> 4
    codes = torch.stack((lo, hi), dim=-1).flatten(-2).long()
    return E2M1[codes & 7] * torch.where(codes & 8 != 0, -1.0, 1.0)


def config(qc):
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "dtype": "bfloat16",
            "quantization_config": qc}


def write(name, sd, ref, cfg, extra=None):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    sd["model.norm.weight"] = torch.randn(48, generator=g).to(torch.bfloat16)
    ref["model.norm.weight"] = sd["model.norm.weight"]
    save_file(sd, os.path.join(d, "model.safetensors"))
    save_file(ref, os.path.join(d, "ref.safetensors"))
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
    for k, v in (extra or {}).items():
        json.dump(v, open(os.path.join(d, k), "w"), indent=2)


def ct(fmt, preset, comp, group):
    sd, ref = {}, {}
    scheme = preset_name_to_scheme(preset, ["Linear"])
    for n, (o, i) in LAYERS.items():
        m = {"weight_packed": packed(o, i)}
        if group == 16:
            m["weight_scale"] = e4m3((o, i // 16))
            m["weight_global_scale"] = torch.tensor([448.0 * 6 / (torch.rand(1, generator=g).item() * 3 + 0.5)])
            m["input_global_scale"] = torch.tensor([1234.5])
        else:
            m["weight_scale"] = torch.randint(110, 135, (o, i // 32), dtype=torch.uint8, generator=g)
        dense = comp.decompress(dict(m), scheme)["weight"]
        assert dense.dtype == torch.bfloat16 and dense.shape == (o, i)
        for k, v in m.items():
            sd[f"{n}.{k}"] = v
        ref[f"{n}.weight"] = dense
    groups = {"group_0": {"targets": ["Linear"], "format": fmt,
                          "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group" if group == 16 else "group",
                                      "group_size": group, "symmetric": True, "dynamic": False,
                                      "scale_dtype": "torch.float8_e4m3fn" if group == 16 else "torch.uint8"}}}
    return sd, ref, config({"quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed",
                            "config_groups": groups, "ignore": ["lm_head"]})


sd, ref, cfg = ct("nvfp4-pack-quantized", "NVFP4", NVFP4PackedCompressor, 16)
write("ct-nvfp4", sd, ref, cfg)
sd, ref, cfg = ct("mxfp4-pack-quantized", "MXFP4", MXFP4PackedCompressor, 32)
write("ct-mxfp4", sd, ref, cfg)

sd, ref = {}, {}
for n, (o, i) in LAYERS.items():
    w, s = packed(o, i), e4m3((o, i // 16))
    s2 = torch.tensor(torch.rand(1, generator=g).item() * 0.01 + 1e-4)
    sd.update({f"{n}.weight": w, f"{n}.weight_scale": s, f"{n}.weight_scale_2": s2,
               f"{n}.input_scale": torch.tensor(0.5)})
    block = s.to(torch.float32) * s2  # per-block scale (f32), then the element
    ref[f"{n}.weight"] = (unpack(w).reshape(o, i // 16, 16) * block.unsqueeze(-1)).reshape(o, i).to(torch.bfloat16)
qc = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "ignore": ["lm_head"]}
hq = {"producer": {"name": "modelopt", "version": "0.33.0"},
      "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                       "exclude_modules": ["lm_head"]}}
write("modelopt", sd, ref, config(qc), {"hf_quant_config.json": hq})
print("wrote", out)
