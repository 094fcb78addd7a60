#!/usr/bin/env python3
"""tests/data/tiny_hunyuan_dense.json, tiny_hunyuan_dense.safetensors and
tiny_hunyuan_dense_out.safetensors: a tiny HunYuanDenseV1ForCausalLM (the
record hunyuan-dense) as make_tiny_records.py makes its models (hidden 32,
2 layers, 4 heads of 8, 2 KV heads, vocab 48; its random weights, a
generator of its own, seed 71) with q/k/v/o biases (attention_bias) and
Hunyuan-7B's rope, rope_type "dynamic" with alpha 1000 (factor 1.0, which
transformers 5's rope validation requires): HunYuanDenseV1RotaryEmbedding
rotates by rope_theta * alpha ** (head_dim / (head_dim - 2)), 10000 *
1000 ** (8 / 6) = 1e8 here; the per-head query_layernorm/key_layernorm after
it. The logits transformers 5.12 gives in float64 on tiny_records_out's ids
("ids", "hunyuan_dense"); tests/verify/test_verify_records.c runs verify's reference
forward against them. Run in the forky chroot:
make_tiny_hunyuan_dense.py DATA_DIR"""
import json, os, sys, tempfile
import torch
import transformers as tf
from safetensors.torch import load_file, save_file

d = sys.argv[1]
cfg = tf.HunYuanDenseV1Config(vocab_size=48, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=8, intermediate_size=64, max_position_embeddings=64,
                              tie_word_embeddings=False, attention_bias=True,
                              rope_parameters={"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0,
                                               "rope_theta": 10000.0})
m = tf.AutoModelForCausalLM.from_config(cfg)
rot = m.model.rotary_emb
want = 1.0 / (1e8 ** (torch.arange(0, 8, 2).float() / 8))
assert rot.rope_type == "dynamic" and torch.allclose(rot.inv_freq, want, rtol=1e-6), "not HunYuan's alpha rope"
gen = torch.Generator().manual_seed(71)
with torch.no_grad():  # make_tiny_records.py's randomize
    for n, p in m.named_parameters():
        r = torch.randn(p.shape, generator=gen, dtype=torch.float64).float()
        if "norm" in n and n.endswith("weight"):
            p.copy_(1 + 0.2 * r)
        elif n.endswith("bias"):
            p.copy_(0.1 * r)
        elif "embed" in n:
            p.copy_(r)
        else:
            p.copy_(0.25 * r)
ids = load_file(os.path.join(d, "tiny_records_out.safetensors"))["ids"]
with tempfile.TemporaryDirectory() as t:
    m.save_pretrained(t)
    sd = load_file(os.path.join(t, "model.safetensors"))
    c = json.load(open(os.path.join(t, "config.json")))
save_file(sd, os.path.join(d, "tiny_hunyuan_dense.safetensors"), metadata={"format": "pt"})
json.dump(c, open(os.path.join(d, "tiny_hunyuan_dense.json"), "w"), indent=1)
m = m.double().eval()
with torch.no_grad():
    out = m(input_ids=ids[None]).logits[0].contiguous()
save_file({"ids": ids, "hunyuan_dense": out}, os.path.join(d, "tiny_hunyuan_dense_out.safetensors"))
print("ok", tuple(out.shape))
