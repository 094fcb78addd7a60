# The torchtitan presets (issue 31, item 17) against real torch 1.13.
#
#   /usr/bin/python3 torchtitan_check.py gen DIR SEED
#       DIR/tt.pt        torch.save of a torchtitan llama3 Transformer state dict (GQA: dim
#                        64, 8 heads, 2 kv heads, head_dim 8; bf16 and f32 weights; the
#                        freqs_cis buffer), DIR/config.json its Hugging Face config,
#                        DIR/tt_weights.pt the same without freqs_cis
#       DIR/hf_ref.pt    what torchtitan's Llama3StateDictAdapter.to_hf makes of it: the
#                        names mapped and wq / wk rows permuted per head, as transformers'
#                        convert_llama_weights_to_hf.py permute(w, n_heads, dim1, dim2) does:
#                        w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2)
#                        .reshape(dim1, dim2)
#   /usr/bin/python3 torchtitan_check.py same A B
#       A and B (torch files or safetensors) hold the same names, dtypes, shapes and bits
#   /usr/bin/python3 torchtitan_check.py from_hf HF OUT CONFIG
#       OUT is what torchtitan's from_hf makes of the Hugging Face checkpoint HF (names, and
#       q_proj / k_proj rows back to pairs: w.view(n, 2, dim1 // n // 2, dim2).transpose(1, 2))
#   /usr/bin/python3 torchtitan_check.py rope DIR HF
#       the permutation is the one RoPE needs: Meta's rotary embedding (complex pairs,
#       torchtitan's apply_rotary_emb) on x @ wq.T / x @ wk.T of tt.pt gives the same
#       attention scores as Hugging Face's (rotate_half) on HF's q_proj / k_proj
import json, os, sys
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dalle2_seed import load_out, raw  # noqa: E402

DIM, NH, NKV, L, V, FF = 64, 8, 2, 2, 100, 96
HD = DIM // NH


def to_hf_permute(w, n_heads, dim1, dim2):
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


def gen(d, seed):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s, dt=torch.float32: torch.randn(*s, generator=g).to(dt)
    sd = {'tok_embeddings.weight': r(V, DIM)}
    for i in range(L):
        p, dt = f'layers.{i}.', (torch.bfloat16 if i else torch.float32)
        sd[p + 'attention.wq.weight'] = r(NH * HD, DIM, dt=dt)
        sd[p + 'attention.wk.weight'] = r(NKV * HD, DIM, dt=dt)
        sd[p + 'attention.wv.weight'] = r(NKV * HD, DIM, dt=dt)
        sd[p + 'attention.wo.weight'] = r(DIM, NH * HD, dt=dt)
        sd[p + 'feed_forward.w1.weight'] = r(FF, DIM, dt=dt)
        sd[p + 'feed_forward.w2.weight'] = r(DIM, FF, dt=dt)
        sd[p + 'feed_forward.w3.weight'] = r(FF, DIM, dt=dt)
        sd[p + 'attention_norm.weight'] = r(DIM)
        sd[p + 'ffn_norm.weight'] = r(DIM)
    sd['norm.weight'] = r(DIM)
    sd['output.weight'] = r(V, DIM)
    sd['freqs_cis'] = torch.polar(torch.ones(16, HD // 2), torch.randn(16, HD // 2, generator=g))
    torch.save(sd, f'{d}/tt.pt')
    torch.save({k: v for k, v in sd.items() if k != 'freqs_cis'}, f'{d}/tt_weights.pt')
    json.dump({'architectures': ['LlamaForCausalLM'], 'hidden_size': DIM, 'num_attention_heads': NH,
               'num_key_value_heads': NKV, 'num_hidden_layers': L, 'vocab_size': V, 'intermediate_size': FF},
              open(f'{d}/config.json', 'w'))
    names = {'attention.wq': 'self_attn.q_proj', 'attention.wk': 'self_attn.k_proj', 'attention.wv': 'self_attn.v_proj',
             'attention.wo': 'self_attn.o_proj', 'feed_forward.w1': 'mlp.gate_proj', 'feed_forward.w2': 'mlp.down_proj',
             'feed_forward.w3': 'mlp.up_proj', 'attention_norm': 'input_layernorm', 'ffn_norm': 'post_attention_layernorm'}
    hf = {'model.embed_tokens.weight': sd['tok_embeddings.weight'], 'model.norm.weight': sd['norm.weight'],
          'lm_head.weight': sd['output.weight']}
    for i in range(L):
        for a, b in names.items():
            w = sd[f'layers.{i}.{a}.weight']
            if a == 'attention.wq':
                w = to_hf_permute(w, NH, NH * HD, DIM)
            elif a == 'attention.wk':
                w = to_hf_permute(w, NKV, NKV * HD, DIM)
            hf[f'model.layers.{i}.{b}.weight'] = w.contiguous()
    torch.save(hf, f'{d}/hf_ref.pt')


def same(a, b):
    x, y = load_out(a), load_out(b)
    bad = [f'names differ: {sorted(set(x) ^ set(y))[:6]}'] if set(x) != set(y) else []
    bad += [f'{k}: {x[k][:2]} vs {y[k][:2]}{" (bytes differ)" if x[k][:2] == y[k][:2] else ""}'
            for k in sorted(set(x) & set(y)) if x[k] != y[k]]
    print('\n'.join(bad[:10]) if bad else f'{len(x)} tensors: names, dtypes, shapes and bits equal')
    return 1 if bad else 0


def from_hf(hf_path, out_path, cfg_path):
    cfg = json.load(open(cfg_path))
    nh, nkv, dim = cfg['num_attention_heads'], cfg['num_key_value_heads'], cfg['hidden_size']
    hf, got = load_out(hf_path), load_out(out_path)
    dt = {'F32': torch.float32, 'BF16': torch.bfloat16, 'F16': torch.float16}
    names = {'self_attn.q_proj': 'attention.wq', 'self_attn.k_proj': 'attention.wk', 'self_attn.v_proj': 'attention.wv',
             'self_attn.o_proj': 'attention.wo', 'mlp.gate_proj': 'feed_forward.w1', 'mlp.down_proj': 'feed_forward.w2',
             'mlp.up_proj': 'feed_forward.w3', 'input_layernorm': 'attention_norm', 'post_attention_layernorm': 'ffn_norm'}
    want = {}
    for k, (d, shape, b) in hf.items():
        w = torch.frombuffer(bytearray(b), dtype=dt[d]).reshape(shape)
        if k in ('model.embed_tokens.weight', 'model.norm.weight', 'lm_head.weight'):
            nk = {'model.embed_tokens.weight': 'tok_embeddings.weight', 'model.norm.weight': 'norm.weight',
                  'lm_head.weight': 'output.weight'}[k]
        else:
            i, mod = k.split('.')[2], '.'.join(k.split('.')[3:-1])
            nk = f'layers.{i}.{names[mod]}.weight'
            n = nh if mod == 'self_attn.q_proj' else nkv if mod == 'self_attn.k_proj' else 0
            if n:
                w = w.view(n, 2, shape[0] // n // 2, shape[1]).transpose(1, 2).reshape(shape)
        want[nk] = (d, shape, raw(w))
    bad = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    print(f'differ: {bad[:6]}' if bad else f'{len(want)} tensors as from_hf makes them')
    return 1 if bad else 0


def rope_meta(x, theta=10000.0):
    """torchtitan apply_rotary_emb: rows (2i, 2i+1) of a head as one complex number"""
    t, h, d = x.shape
    freqs = torch.polar(torch.ones(t, d // 2, dtype=torch.float64),
                        torch.outer(torch.arange(t, dtype=torch.float64), 1.0 / theta ** (torch.arange(0, d, 2).double() / d)))
    xc = torch.view_as_complex(x.double().reshape(t, h, d // 2, 2))
    return torch.view_as_real(xc * freqs[:, None, :]).reshape(t, h, d)


def rope_hf(x, theta=10000.0):
    """transformers LlamaRotaryEmbedding + apply_rotary_pos_emb: rotate_half over halves"""
    t, h, d = x.shape
    ang = torch.outer(torch.arange(t, dtype=torch.float64), 1.0 / theta ** (torch.arange(0, d, 2).double() / d))
    emb = torch.cat((ang, ang), -1)[:, None, :]
    x = x.double()
    rot = torch.cat((-x[..., d // 2:], x[..., :d // 2]), -1)
    return x * emb.cos() + rot * emb.sin()


def rope(d, hf_path):
    tt, hf = torch.load(f'{d}/tt.pt'), load_out(hf_path)
    as_t = lambda k: torch.frombuffer(bytearray(hf[k][2]), dtype={'F32': torch.float32, 'BF16': torch.bfloat16}[hf[k][0]]).reshape(hf[k][1])
    x = torch.randn(5, DIM, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    worst = 0.0
    for i in range(L):
        wq, wk = tt[f'layers.{i}.attention.wq.weight'].double(), tt[f'layers.{i}.attention.wk.weight'].double()
        hq, hk = as_t(f'model.layers.{i}.self_attn.q_proj.weight').double(), as_t(f'model.layers.{i}.self_attn.k_proj.weight').double()
        qm, km = rope_meta((x @ wq.T).reshape(5, NH, HD)), rope_meta((x @ wk.T).reshape(5, NKV, HD))
        qh, kh = rope_hf((x @ hq.T).reshape(5, NH, HD)), rope_hf((x @ hk.T).reshape(5, NKV, HD))
        g = NH // NKV
        sm = torch.einsum('thd,shd->hts', qm, km.repeat_interleave(g, 1))
        sh = torch.einsum('thd,shd->hts', qh, kh.repeat_interleave(g, 1))
        worst = max(worst, float((sm - sh).abs().max() / sm.abs().max()))
    print(f'attention scores, Meta RoPE on torchtitan vs HF RoPE on the converted weights: max rel diff {worst:.2e}')
    return 0 if worst < 1e-12 else 1


if __name__ == '__main__':
    if sys.argv[1] == 'gen':
        gen(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == 'same':
        sys.exit(same(sys.argv[2], sys.argv[3]))
    elif sys.argv[1] == 'from_hf':
        sys.exit(from_hf(sys.argv[2], sys.argv[3], sys.argv[4]))
    elif sys.argv[1] == 'rope':
        sys.exit(rope(sys.argv[2], sys.argv[3]))
