# Tiny LLaMA-shaped checkpoints with fused projections, made by real torch
# (/usr/bin/python3), for the verify mutation suite.
# usage: make_fused.py OUTDIR [SEED]
# Writes OUTDIR/llama-fused/{model.safetensors,config.json}: Phi-3 style
# self_attn.qkv_proj [q | k | v] (8 query heads, 2 kv heads: at tp 4 and 8
# every rank holds a replica of one kv head) and mlp.gate_up_proj [gate | up],
# with an o_proj bias (a row-parallel bias that must be added once), and
# OUTDIR/llama-bf16/ the same model in bfloat16.
import collections, json, os, sys
import torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import tpctest  # noqa: E402

out = sys.argv[1]
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
torch.manual_seed(seed)
H, NH, KV, HD, I, V, L = 64, 8, 2, 8, 96, 250, 2


def model(dt):
    sd = collections.OrderedDict()
    sd['model.embed_tokens.weight'] = torch.randn(V, H)
    for i in range(L):
        p = f'model.layers.{i}.'
        sd[p + 'input_layernorm.weight'] = 1 + 0.1 * torch.randn(H)
        sd[p + 'self_attn.qkv_proj.weight'] = torch.randn((NH + 2 * KV) * HD, H) / H ** 0.5
        sd[p + 'self_attn.o_proj.weight'] = torch.randn(H, NH * HD) / H ** 0.5
        sd[p + 'self_attn.o_proj.bias'] = torch.randn(H)
        sd[p + 'post_attention_layernorm.weight'] = 1 + 0.1 * torch.randn(H)
        sd[p + 'mlp.gate_up_proj.weight'] = torch.randn(2 * I, H) / H ** 0.5
        sd[p + 'mlp.down_proj.weight'] = torch.randn(H, I) / I ** 0.5
    sd['model.norm.weight'] = 1 + 0.1 * torch.randn(H)
    sd['lm_head.weight'] = torch.randn(V, H) / H ** 0.5
    return collections.OrderedDict((k, v.to(dt)) for k, v in sd.items())


def save(sd, d):
    os.makedirs(d, exist_ok=True)
    tpctest.save_safetensors(os.path.join(d, 'model.safetensors'), sd)
    json.dump({'architectures': ['Phi3ForCausalLM'], 'model_type': 'phi3', 'hidden_size': H,
               'num_attention_heads': NH, 'num_key_value_heads': KV, 'head_dim': HD, 'intermediate_size': I,
               'num_hidden_layers': L, 'vocab_size': V}, open(os.path.join(d, 'config.json'), 'w'), indent=2)


base = model(torch.float32)
save(base, os.path.join(out, 'llama-fused'))
save(collections.OrderedDict((k, v.to(torch.bfloat16)) for k, v in base.items()), os.path.join(out, 'llama-bf16'))
print('seed', seed)
