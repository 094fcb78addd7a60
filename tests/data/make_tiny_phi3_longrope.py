#!/usr/bin/env python3
"""tests/data/tiny_phi3_longrope.safetensors (qkv_proj split, below),
tiny_phi3_longrope_{long,short}.json
and tiny_phi3_longrope_out.safetensors: a tiny Phi3ForCausalLM (2 layers,
hidden 32, 2 heads of 16 dims, 1 kv head, Phi-4-mini's partial_rotary_factor
0.75: 12 rotated dims, 6 factors) under Phi-3's rope_type "longrope", its
config.json written as Phi-3-mini-128k / Phi-4-mini write theirs
(max_position_embeddings and original_max_position_embeddings at the top,
rope_scaling {type, short_factor, long_factor}), and the logits transformers
5.12 gives in float64 on tiny_records_out.safetensors' 10 ids under two
configs of the same weights:
  long   original_max_position_embeddings 8 (< 10 tokens: long_factor),
         max_position_embeddings 64 (factor 8: cos/sin x sqrt(1 + ln 8 / ln 8))
  short  original_max_position_embeddings 16 (>= 10 tokens: short_factor),
         max_position_embeddings 64 (factor 4: x sqrt(1 + ln 4 / ln 16))
Transformers' modeling_rope_utils._compute_longrope_parameters and
dynamic_rope_update's longrope_frequency_update (seq_len = max(position_ids)
+ 1 > original_max_position_embeddings: long_factor). tests/verify/test_verify_records.c
runs verify's reference forward against them. tiny_phi3_longrope_{yarn,su}.json:
Phi-3's older rope_type names, whose logits transformers gives equal to the
long and the short config's (below). Run in the forky chroot:
make_tiny_phi3_longrope.py DATA_DIR"""
import copy, json, math, os, sys, tempfile
import torch
import transformers as tf
from safetensors.torch import load_file, save_file

d = sys.argv[1]
SHORT = [1.0, 1.25, 1.5, 2.0, 3.0, 4.0]
LONG = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
base = {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "vocab_size": 48, "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
        "max_position_embeddings": 64, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
        "pad_token_id": 0, "torch_dtype": "float32",
        "rope_scaling": {"type": "longrope", "short_factor": SHORT, "long_factor": LONG}}
# transformers rewrites the rope dict it is given in place: each load a copy
cfgs = {"long": dict(base, original_max_position_embeddings=8),
        "short": dict(base, original_max_position_embeddings=16)}
ids = load_file(os.path.join(d, "tiny_records_out.safetensors"))["ids"]
gen = torch.Generator().manual_seed(71)
m = tf.AutoModelForCausalLM.from_config(tf.Phi3Config(**{k: v for k, v in copy.deepcopy(cfgs["long"]).items()
                                                         if k not in ("architectures", "model_type")}))
with torch.no_grad():
    for n, p in m.named_parameters():
        r = torch.randn(p.shape, generator=gen, dtype=torch.float64).float()
        p.copy_(1 + 0.2 * r if "norm" in n else r if "embed" in n else 0.25 * r)
sd = {k: v.contiguous() for k, v in m.state_dict().items()}
# the file test_verify_records reads: qkv_proj as q_proj, k_proj, v_proj (32, 16, 16
# rows), the names Phi-3's record also reads (test_verify_records' set has no fused
# qkv); the model loads the fused one
qkv = {k: v for k, v in sd.items() if not k.endswith("qkv_proj.weight")}
for k in (k for k in sd if k.endswith("qkv_proj.weight")):
    for n, t in zip(("q_proj", "k_proj", "v_proj"), sd[k].split([32, 16, 16])):
        qkv[k.replace("qkv_proj", n)] = t.contiguous()
save_file(qkv, os.path.join(d, "tiny_phi3_longrope.safetensors"), metadata={"format": "pt"})
res = {"ids": ids}
for name, cfg in cfgs.items():
    json.dump(cfg, open(os.path.join(d, "tiny_phi3_longrope_%s.json" % name), "w"), indent=1)
    with tempfile.TemporaryDirectory() as t:
        json.dump(cfg, open(os.path.join(t, "config.json"), "w"))
        save_file(sd, os.path.join(t, "model.safetensors"), metadata={"format": "pt"})
        r = tf.AutoModelForCausalLM.from_pretrained(t).double().eval()
    rot = r.model.rotary_emb
    assert rot.rope_type == "longrope", rot.rope_type
    o = cfg["original_max_position_embeddings"]
    want = math.sqrt(1 + math.log(64 / o) / math.log(o))
    assert abs(rot.attention_scaling - want) < 1e-12, (rot.attention_scaling, want)
    with torch.no_grad():
        res[name] = r(input_ids=ids[None]).logits[0].contiguous()
    f = LONG if name == "long" else SHORT
    inv = 1.0 / (torch.tensor(f) * 10000.0 ** (torch.arange(0, 12, 2).float() / 12))
    assert torch.equal(rot.inv_freq.float(), inv), (rot.inv_freq, inv)
# Phi3Config's older names (convert_rope_params_to_dict): rope_type "su" and
# "yarn" read as longrope, the top-level original_max_position_embeddings
# copied over the rope object's (_compute_longrope_parameters'
# standardize_rope_params): "yarn" with a top-level 8 gives the long
# config's logits, "su" with a top-level 16 beside the rope object's 8 (which
# its validation requires) the short config's, exactly
alias = {"yarn": (dict(base, original_max_position_embeddings=8,
                       rope_scaling={"type": "yarn", "short_factor": SHORT, "long_factor": LONG}), "long"),
         "su": (dict(base, original_max_position_embeddings=16,
                     rope_scaling={"type": "su", "short_factor": SHORT, "long_factor": LONG,
                                   "original_max_position_embeddings": 8}), "short")}
for name, (cfg, same) in alias.items():
    json.dump(cfg, open(os.path.join(d, "tiny_phi3_longrope_%s.json" % name), "w"), indent=1)
    with tempfile.TemporaryDirectory() as t:
        json.dump(copy.deepcopy(cfg), open(os.path.join(t, "config.json"), "w"))
        save_file(sd, os.path.join(t, "model.safetensors"), metadata={"format": "pt"})
        r = tf.AutoModelForCausalLM.from_pretrained(t).double().eval()
    with torch.no_grad():
        out = r(input_ids=ids[None]).logits[0]
    assert r.model.rotary_emb.rope_type == "longrope", r.model.rotary_emb.rope_type
    assert torch.equal(out, res[same]), (name, (out - res[same]).abs().max().item())
save_file(res, os.path.join(d, "tiny_phi3_longrope_out.safetensors"))
print("ok", {k: tuple(v.shape) for k, v in res.items()},
      "max |long - short| %.3g" % (res["long"] - res["short"]).abs().max().item())
