#!/usr/bin/env python3
"""tests/data/tiny_hunyuan_moe_dyn.json and tiny_hunyuan_moe_dyn_out.safetensors:
tiny_hunyuan_moe (make_tiny_records.py: its weights, tiny_hunyuan_moe.safetensors,
unchanged) under Hunyuan-A13B's rope, rope_type "dynamic" with alpha 1000
(factor 1.0, which transformers 5's rope validation requires), and the logits
transformers 5.12's HunYuanMoEV1ForCausalLM gives in float64 on
tiny_records_out.safetensors' ids ("ids", "hunyuan_moe_dyn"). Its
HunYuanMoEV1RotaryEmbedding rotates by rope_theta * alpha ** (head_dim /
(head_dim - 2)) (here 10000 * 1000 ** (8 / 6) = 1e8); tests/verify/test_verify_moe.c
runs verify's reference forward against them. Run in the forky chroot:
make_tiny_hunyuan_dyn.py DATA_DIR"""
import json, os, shutil, sys, tempfile
import torch
import transformers as tf
from safetensors.torch import load_file, save_file

d = sys.argv[1]
cfg = json.load(open(os.path.join(d, "tiny_hunyuan_moe.json")))
cfg["rope_parameters"] = {"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": 10000.0}
ids = load_file(os.path.join(d, "tiny_records_out.safetensors"))["ids"]
with tempfile.TemporaryDirectory() as t:
    json.dump(cfg, open(os.path.join(t, "config.json"), "w"))
    shutil.copy(os.path.join(d, "tiny_hunyuan_moe.safetensors"), os.path.join(t, "model.safetensors"))
    m = tf.AutoModelForCausalLM.from_pretrained(t, experts_implementation="eager").double().eval()
    assert m.model.rotary_emb.rope_type == "dynamic"
    with torch.no_grad():
        out = m(input_ids=ids[None]).logits[0].contiguous()
json.dump(cfg, open(os.path.join(d, "tiny_hunyuan_moe_dyn.json"), "w"), indent=1)
save_file({"ids": ids, "hunyuan_moe_dyn": out}, os.path.join(d, "tiny_hunyuan_moe_dyn_out.safetensors"))
want = load_file(os.path.join(d, "tiny_records_out.safetensors"))["hunyuan_moe"]
print("ok", tuple(out.shape), "max |dyn - default| %.3g" % (out - want).abs().max().item())
