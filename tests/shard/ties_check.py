#!/usr/bin/env python3
"""Tied weights through shard and merge (tests/shard/ties_test.sh), checked in
real torch.

  make OUT.pt                 a LLaMA-style model (2 layers, 4 heads, vocab 1000)
                              whose lm_head.weight is model.embed_tokens.weight,
                              as torch.save writes a tied Hugging Face model:
                              one storage, two tensors
  torch REF.pt OUT.pt [any-order]
                              OUT holds REF's tensors bit for bit, in REF's
                              order (or any), with the same storage sharing (tensors that
                              share a storage in REF share one in OUT, and no
                              others), and its size is REF's within 4 KiB
  st REF.pt OUT.safetensors|DIR
                              what save_pretrained writes for a tied model: the
                              tied duplicate (lm_head.weight) is not stored (nor
                              in an index's weight_map), metadata "format" is
                              "pt" (transformers refuses other values), and
                              transformers' loading logic accepts it: a model
                              whose lm_head is tied to embed_tokens (tie_weights)
                              loads the state dict with strict=False, misses only
                              its _tied_weights_keys and ends up equal to REF
  ranks DIR N                 every torch rank file DIR/model_tpTT_pp00.bin
                              (TT < N) holds its embed_tokens and lm_head slices
                              as one storage
"""
import json
import os
import struct
import sys
from collections import OrderedDict

import torch

TIED_KEYS = ['lm_head.weight']  # LlamaForCausalLM._tied_weights_keys
ST_DTYPES = {'F32': torch.float32, 'F16': torch.float16, 'BF16': torch.bfloat16, 'I64': torch.int64}


def fail(*a):
    print(*a, file=sys.stderr)
    sys.exit(1)


def make(out):
    torch.manual_seed(7)
    V, H, F, L = 1000, 64, 96, 2
    sd = OrderedDict()
    emb = torch.randn(V, H)
    sd['model.embed_tokens.weight'] = emb
    for i in range(L):
        p = f'model.layers.{i}.'
        for n in ('q_proj', 'k_proj', 'v_proj', 'o_proj'):
            sd[p + f'self_attn.{n}.weight'] = torch.randn(H, H)
        sd[p + 'mlp.gate_proj.weight'] = torch.randn(F, H)
        sd[p + 'mlp.up_proj.weight'] = torch.randn(F, H)
        sd[p + 'mlp.down_proj.weight'] = torch.randn(H, F)
        sd[p + 'input_layernorm.weight'] = torch.randn(H)
        sd[p + 'post_attention_layernorm.weight'] = torch.randn(H)
    sd['model.norm.weight'] = torch.randn(H)
    sd['lm_head.weight'] = emb
    torch.save(sd, out)


def groups(sd):
    g = {}
    for k, v in sd.items():
        g.setdefault(v.storage().data_ptr(), []).append(k)
    return sorted(sorted(x) for x in g.values())


def same_values(ref, out, any_order=False):
    if (sorted(ref) if any_order else list(ref)) != (sorted(out) if any_order else list(out)):
        fail('keys or order differ:', list(ref), list(out))
    for k in ref:
        a, b = ref[k], out[k]
        if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a.view(-1).view(torch.uint8),
                                                                        b.contiguous().view(-1).view(torch.uint8)):
            fail('tensor differs:', k)


def check_torch(ref_path, out_path, any_order=False):
    ref, out = torch.load(ref_path), torch.load(out_path)
    same_values(ref, out, any_order)
    if groups(ref) != groups(out):
        fail('storage sharing differs: reference', [x for x in groups(ref) if len(x) > 1], 'output',
             [x for x in groups(out) if len(x) > 1])
    a, b = os.path.getsize(ref_path), os.path.getsize(out_path)
    if abs(a - b) > 4096:
        fail(f'{out_path} is {b} bytes, the original {a}')


def read_st(path):
    with open(path, 'rb') as f:
        data = f.read()
    n = struct.unpack('<Q', data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    meta = hdr.pop('__metadata__', None)
    sd = OrderedDict()
    for k, v in hdr.items():
        a, b = v['data_offsets']
        t = torch.frombuffer(bytearray(data[8 + n + a:8 + n + b]), dtype=torch.uint8)
        sd[k] = t.view(ST_DTYPES[v['dtype']]).reshape(v['shape'])
    return sd, meta


def read_st_set(path):
    """A file, or an HF folder through its index; the files' metadata."""
    if not os.path.isdir(path):
        sd, meta = read_st(path)
        return sd, [meta]
    idx = os.path.join(path, 'model.safetensors.index.json')
    if not os.path.exists(idx):
        return read_st_set(os.path.join(path, 'model.safetensors'))
    with open(idx) as f:
        wm = json.load(f)['weight_map']
    sd, metas = OrderedDict(), []
    for fn in sorted(set(wm.values())):
        part, meta = read_st(os.path.join(path, fn))
        metas.append(meta)
        for k, v in part.items():
            if wm.get(k) != fn:
                fail(f'{fn} holds {k}, which the weight_map does not place there')
            sd[k] = v
    if set(sd) != set(wm):
        fail('weight_map and shards disagree:', sorted(set(wm) ^ set(sd)))
    return sd, metas


class Tied(torch.nn.Module):
    """A module with the reference's parameter names, lm_head tied to
    embed_tokens as PreTrainedModel.tie_weights() leaves it."""

    def __init__(self, ref):
        super().__init__()
        self.names = list(ref)
        for k, v in ref.items():
            mod = self
            *path, leaf = k.split('.')
            for p in path:
                if not hasattr(mod, p):
                    mod.add_module(p, torch.nn.Module())
                mod = getattr(mod, p)
            mod.register_parameter(leaf, torch.nn.Parameter(torch.zeros_like(v)))
        self.lm_head.weight = self.model.embed_tokens.weight


def check_st(ref_path, out_path):
    ref = torch.load(ref_path)
    sd, metas = read_st_set(out_path)
    for meta in metas:
        if not meta or meta.get('format') != 'pt':
            fail('metadata "format" is not "pt":', meta)
    if 'lm_head.weight' in sd or 'model.embed_tokens.weight' not in sd:
        fail('save_pretrained stores model.embed_tokens.weight and drops lm_head.weight; got', sorted(sd))
    m = Tied(ref)
    missing, unexpected = m.load_state_dict(sd, strict=False)
    if unexpected or set(missing) - set(TIED_KEYS):
        fail('from_pretrained would warn: missing', missing, 'unexpected', unexpected)
    got = m.state_dict()
    for k in ref:
        if not torch.equal(got[k], ref[k]):
            fail('loaded value differs:', k)


def check_ranks(d, n):
    for t in range(n):
        sd = torch.load(os.path.join(d, f'model_tp{t:02d}_pp00.bin'))
        a, b = sd['model.embed_tokens.weight'], sd['lm_head.weight']
        if a.storage().data_ptr() != b.storage().data_ptr():
            fail(f'rank {t}: embed_tokens and lm_head are two storages')


if __name__ == '__main__':
    cmd = sys.argv[1]
    if cmd == 'make':
        make(sys.argv[2])
    elif cmd == 'torch':
        check_torch(sys.argv[2], sys.argv[3], sys.argv[4:] == ['any-order'])
    elif cmd == 'st':
        check_st(sys.argv[2], sys.argv[3])
    elif cmd == 'ranks':
        check_ranks(sys.argv[2], int(sys.argv[3]))
    else:
        fail('unknown command', cmd)
