"""A tiny LLaMA-shaped Hugging Face state dict with grouped-query attention,
the model tests/dcp/megatron_hf_test.sh takes through Megatron and back.

    /usr/bin/python3 make_llama_hf.py OUTDIR      (torch 1.13 or later)

Writes OUTDIR/model.pt (LlamaForCausalLM's state_dict names, bf16 as Megatron
trains, an untied lm_head) and OUTDIR/config.json. Values are seeded: the same
torch gives the same bytes, so the test rebuilds them and compares tpconv's
conversion of tests/data/dcp/megatron_llama (made from this file by
make_megatron.py --from-hf) with them.
"""
import json
import os
import sys

import torch

LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, VOCAB = 4, 64, 8, 2, 96, 200
HEAD_DIM = HIDDEN // HEADS


def model():
    g = torch.Generator().manual_seed(2024)
    r = lambda *s: torch.randn(*s, generator=g).to(torch.bfloat16)
    sd = {"model.embed_tokens.weight": r(VOCAB, HIDDEN)}
    for l in range(LAYERS):
        p = "model.layers.%d." % l
        sd[p + "input_layernorm.weight"] = r(HIDDEN)
        sd[p + "self_attn.q_proj.weight"] = r(HEADS * HEAD_DIM, HIDDEN)
        sd[p + "self_attn.k_proj.weight"] = r(KV_HEADS * HEAD_DIM, HIDDEN)
        sd[p + "self_attn.v_proj.weight"] = r(KV_HEADS * HEAD_DIM, HIDDEN)
        sd[p + "self_attn.o_proj.weight"] = r(HIDDEN, HEADS * HEAD_DIM)
        sd[p + "post_attention_layernorm.weight"] = r(HIDDEN)
        sd[p + "mlp.gate_proj.weight"] = r(FFN, HIDDEN)
        sd[p + "mlp.up_proj.weight"] = r(FFN, HIDDEN)
        sd[p + "mlp.down_proj.weight"] = r(HIDDEN, FFN)
    sd["model.norm.weight"] = r(HIDDEN)
    sd["lm_head.weight"] = r(VOCAB, HIDDEN)
    return sd


def config():
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
            "intermediate_size": FFN, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
            "num_hidden_layers": LAYERS, "vocab_size": VOCAB, "rms_norm_eps": 1e-5,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.save(model(), os.path.join(out, "model.pt"))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config(), f, indent=2)
