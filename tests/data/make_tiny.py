# Make the small checkpoints bundled for `make demo` and the tests, with real torch
# (Debian python3-torch 1.13; run as /usr/bin/python3 tests/data/make_tiny.py tests/data).
#   tiny_llama.pt           torch.save zip: a 2-layer LLaMA-shaped state dict (GQA 4 heads / 2 kv heads)
#   tiny_llama.safetensors  the same tensors, written the way safetensors.torch.save_file does
import collections, json, os, sys, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import tpctest  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)
torch.manual_seed(1234)
h, inter, vocab, layers, heads, kv, hd = 64, 176, 128, 2, 4, 2, 16
sd = collections.OrderedDict()
sd['model.embed_tokens.weight'] = torch.randn(vocab, h)
for i in range(layers):
    p = f'model.layers.{i}.'
    sd[p + 'self_attn.q_proj.weight'] = torch.randn(heads * hd, h)
    sd[p + 'self_attn.k_proj.weight'] = torch.randn(kv * hd, h)
    sd[p + 'self_attn.v_proj.weight'] = torch.randn(kv * hd, h)
    sd[p + 'self_attn.o_proj.weight'] = torch.randn(h, heads * hd)
    sd[p + 'mlp.gate_proj.weight'] = torch.randn(inter, h)
    sd[p + 'mlp.up_proj.weight'] = torch.randn(inter, h)
    sd[p + 'mlp.down_proj.weight'] = torch.randn(h, inter)
    sd[p + 'input_layernorm.weight'] = torch.ones(h) + 0.01 * torch.randn(h)
    sd[p + 'post_attention_layernorm.weight'] = torch.ones(h) + 0.01 * torch.randn(h)
sd['model.norm.weight'] = torch.ones(h)
sd['lm_head.weight'] = torch.randn(vocab, h)
torch.save(sd, os.path.join(out, 'tiny_llama.pt'))

# safetensors, as the reference writer lays it out: dtype descending, then name
tpctest.save_safetensors(os.path.join(out, 'tiny_llama.safetensors'),
                         collections.OrderedDict((k, sd[k]) for k in sorted(sd)))  # all float32: name order
json.dump({'hidden_size': h, 'intermediate_size': inter, 'vocab_size': vocab, 'num_hidden_layers': layers,
           'num_attention_heads': heads, 'num_key_value_heads': kv, 'head_dim': hd,
           'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'torch_dtype': 'float32'},
          open(os.path.join(out, 'config.json'), 'w'), indent=2)
