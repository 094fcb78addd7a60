# Independent check of tpconv rank files with real torch (/usr/bin/python3).
# usage: check_ranks.py PRESET ORIGINAL.pt CONFIG.json SETDIR TP LAYOUT FORMAT
#        check_ranks.py --write-oslo|--write-hf-mapping PRESET ORIGINAL.pt CONFIG.json OUTDIR TP [--tamper]
#        check_ranks.py --bump FILE.safetensors TENSOR
#
# The expected tensor of every rank is computed here the way TensorRT-LLM's converters
# and vLLM's loaders slice (tensorrt_llm/models/*/convert.py split / split_qkv /
# dup_kv_weight / pad_vocab_size; vllm QKVParallelLinear / MergedColumnParallelLinear):
# fused tensors are split per part and concatenated per rank, K/V heads are duplicated
# when tp > kv heads, vocab rows are zero-padded to a multiple of tp, row-parallel biases
# stay whole, Conv1D [in, out] weights are transposed to [out, in] first (and back, since
# tpconv keeps the stored orientation). Nothing here shares code with tpconv.
# The rank files are loaded with torch.load(weights_only=True) (torch format: the files
# must load in real torch) or a plain safetensors parser, and compared bit for bit.
# --write-*: write a set the other tool's way (no tpconv manifest) for merge tests;
# --tamper changes one replicated tensor on rank 1; --bump changes one element of a tensor.
import json, os, re, struct, sys
import torch
import torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import tpctest  # noqa: E402

ST = {'F32': torch.float32, 'F16': torch.float16, 'BF16': torch.bfloat16, 'F64': torch.float64,
      'I64': torch.int64, 'I32': torch.int32, 'I16': torch.int16, 'I8': torch.int8, 'U8': torch.uint8,
      'BOOL': torch.bool}


def load_st(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in hdr.items():
        if k == '__metadata__':
            continue
        b, e = v['data_offsets']
        dt = ST[v['dtype']]
        raw = bytearray(data[b:e])
        if dt == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16) if raw else torch.empty(0, dtype=dt)
        else:
            t = torch.frombuffer(raw, dtype=dt) if raw else torch.empty(0, dtype=dt)
        out[k] = t.reshape(v['shape'])
    return out, hdr.get('__metadata__', {})


def save_st(sd, path, meta=None):
    tpctest.save_safetensors(path, sd, meta or {'format': 'pt'})


# ---- TensorRT-LLM / vLLM style slicing ----

def split(v, tp, r, dim=0):
    # tensorrt_llm/models/convert_utils.py split(): torch.split by size, like vLLM's narrow
    assert v.shape[dim] % tp == 0, (v.shape, tp)
    return torch.split(v, v.shape[dim] // tp, dim=dim)[r].contiguous()


def dup_kv_weight(v, num_head, tp):
    # tensorrt_llm convert_utils.dup_kv_weight, extended to 1-D biases
    assert tp % num_head == 0
    reps = tp // num_head
    head_size = v.shape[0] // num_head
    rest = list(v.shape[1:])
    v = v.reshape([num_head, 1, head_size] + rest).expand([num_head, reps, head_size] + rest)
    return v.reshape([num_head * reps * head_size] + rest).clone()


def kv_slice(v, nkv, tp, r):
    if tp > nkv:
        v = dup_kv_weight(v, nkv, tp)
    return split(v, tp, r)


def pad_vocab(v, tp, multiple=1):
    m = tp * multiple
    pad = (m - v.shape[0] % m) % m
    if pad == 0:
        return v
    return F.pad(v.float(), (0, 0, 0, pad), 'constant', 0).to(v.dtype) if v.dim() == 2 else \
        F.pad(v.float(), (0, pad), 'constant', 0).to(v.dtype)


def expected_dit(name, v, tp, r, cfg):
    # xDiT / diffusers tensor parallelism: attention heads split across ranks (q/k/v rows,
    # to_out/to_add_out columns), the feed-forward's inner features split (a GEGLU
    # proj's value and gate halves each split, as chunk(2, -1) needs), the Flux single
    # block's proj_out columns split per input: [attention | mlp].
    gated = cfg.get('activation_fn') in ('geglu', 'geglu-approximate', 'swiglu')
    inner = cfg['num_attention_heads'] * cfg['attention_head_dim']
    if re.search(r'attn[12]?\.(to_q|to_k|to_v|add_q_proj|add_k_proj|add_v_proj)\.(weight|bias)$', name):
        return split(v, tp, r)
    if re.search(r'attn[12]?\.(to_out\.0|to_add_out)\.weight$', name) or re.search(r'net\.2\.weight$', name):
        return split(v, tp, r, 1)
    if re.search(r'(ff|ff_context)\.net\.0\.proj\.(weight|bias)$', name):
        if gated:
            val, gate = v.chunk(2, dim=0)
            return torch.cat([split(val, tp, r), split(gate, tp, r)], 0)
        return split(v, tp, r)
    if re.search(r'single_transformer_blocks\.\d+\.proj_mlp\.(weight|bias)$', name):
        return split(v, tp, r)
    if re.search(r'single_transformer_blocks\.\d+\.proj_out\.weight$', name):
        att, mlp = v[:, :inner], v[:, inner:]
        return torch.cat([split(att, tp, r, 1), split(mlp, tp, r, 1)], 1)
    return v


def expected(preset, name, v, tp, r, cfg):
    if preset == 'dit':
        return expected_dit(name, v, tp, r, cfg)
    nh = cfg.get('num_attention_heads') or cfg.get('n_head') or cfg.get('heads')
    hidden = cfg.get('hidden_size') or cfg.get('n_embd') or cfg.get('dim')
    hd = cfg.get('head_dim') or hidden // nh
    nkv = cfg.get('num_key_value_heads') or nh
    if preset == 'llama':
        if re.search(r'q_proj\.(weight|bias)$', name):
            return split(v, tp, r)
        if re.search(r'(k_proj|v_proj)\.(weight|bias)$', name):
            return kv_slice(v, nkv, tp, r)
        if name.endswith('o_proj.weight') or name.endswith('down_proj.weight'):
            return split(v, tp, r, 1)
        if re.search(r'(gate_proj|up_proj)\.weight$', name):
            return split(v, tp, r)
        if name.endswith('embed_tokens.weight') or name == 'lm_head.weight':
            return split(pad_vocab(v, tp), tp, r)
        return v
    if preset == 'gpt2':
        if name.endswith('attn.c_attn.weight'):
            w = v.t()  # transpose for Conv1D, as tensorrt_llm/models/gpt/convert.py does
            q, k, vv = torch.split(w, hidden, dim=0)
            return torch.cat([split(q, tp, r), split(k, tp, r), split(vv, tp, r)], 0).t().contiguous()
        if name.endswith('attn.c_attn.bias'):
            q, k, vv = torch.split(v, hidden, dim=0)
            return torch.cat([split(q, tp, r), split(k, tp, r), split(vv, tp, r)], 0)
        if name.endswith('c_proj.weight'):
            return split(v.t(), tp, r, 1).t().contiguous()
        if name.endswith('c_fc.weight'):
            return split(v.t(), tp, r, 0).t().contiguous()
        if name.endswith('c_fc.bias'):
            return split(v, tp, r)
        if name.endswith('wte.weight') or name == 'lm_head.weight':
            return split(pad_vocab(v, tp), tp, r)
        return v
    if preset == 'gpt-neox':
        if re.search(r'query_key_value\.(weight|bias)$', name):
            # [nh, 3, hd] interleaved: split the head axis (tensorrt_llm gptneox)
            rest = list(v.shape[1:])
            w = v.reshape([nh, 3 * hd] + rest)
            return split(w, tp, r, 0).reshape([3 * hd * nh // tp] + rest)
        if name.endswith('attention.dense.weight') or name.endswith('dense_4h_to_h.weight'):
            return split(v, tp, r, 1)
        if re.search(r'dense_h_to_4h\.(weight|bias)$', name):
            return split(v, tp, r)
        if name.endswith('embed_in.weight') or name == 'embed_out.weight':
            return split(pad_vocab(v, tp), tp, r)
        return v
    if preset == 'dalle2':
        if name.endswith('to_q.weight'):
            return split(v, tp, r)
        if name.endswith('to_kv.weight'):
            k, vv = v.chunk(2, dim=0)
            heads = k.shape[0] // hd
            return torch.cat([kv_slice(k, heads, tp, r), kv_slice(vv, heads, tp, r)], 0)
        if name.endswith('to_out.0.weight') or re.search(r'layers\.\d+\.1\.5\.weight$', name):
            return split(v, tp, r, 1)
        if re.search(r'layers\.\d+\.1\.1\.weight$', name):
            x, gate = v.chunk(2, dim=0)  # SwiGLU: x, gate = x.chunk(2, dim=-1)
            return torch.cat([split(x, tp, r), split(gate, tp, r)], 0)
        return v
    raise SystemExit(f'no independent slicer for preset {preset}')


def rank_path(d, layout, fmt, t, tp):
    if layout == 'tpconv':
        return os.path.join(d, f'model_tp{t:02d}_pp00.' + ('bin' if fmt == 'torch' else 'safetensors'))
    if layout == 'oslo':
        return os.path.join(d, f'pytorch_model_tp_{t}_pp_0.bin')
    if layout == 'hf-mapping':
        return os.path.join(d, f'rank{t}.safetensors')
    if layout == 'hf':
        return os.path.join(d, f'tp{t:02d}_pp00', 'pytorch_model.bin' if fmt == 'torch' else 'model.safetensors')
    raise SystemExit('layout?')


def load_rank(path, fmt):
    if fmt == 'torch':
        return torch.load(path, map_location='cpu', weights_only=True), {}
    return load_st(path)


def main():
    argv = sys.argv[1:]
    if argv[0] == '--bump':  # change one element of a tensor in a safetensors file, keeping its metadata
        sd, meta = load_st(argv[1])
        sd = {k: v.clone() for k, v in sd.items()}
        sd[argv[2]].view(-1)[0] += 1
        save_st(sd, argv[1], meta)
        return 0
    if argv[0] in ('--write-oslo', '--write-hf-mapping'):
        mode, preset, orig, cfgp, outd, tp = argv[:6]
        tamper = '--tamper' in argv
        tp = int(tp)
        sd = torch.load(orig, map_location='cpu')
        cfg = json.load(open(cfgp))
        os.makedirs(outd, exist_ok=True)
        for r in range(tp):
            rk = {k: expected(preset, k, v, tp, r, cfg).clone() for k, v in sd.items()}
            if tamper and r == 1:
                k = next(k for k in rk if 'norm' in k and rk[k].dim() == 1)
                rk[k][0] += 1
            if mode == '--write-oslo':
                torch.save(rk, os.path.join(outd, f'pytorch_model_tp_{r}_pp_0.bin'))
            else:
                save_st(rk, os.path.join(outd, f'rank{r}.safetensors'))
        if mode == '--write-hf-mapping':  # the model's config with TensorRT-LLM's mapping added
            with open(os.path.join(outd, 'config.json'), 'w') as f:
                json.dump(dict(cfg, mapping={'world_size': tp, 'tp_size': tp, 'pp_size': 1}), f)
        return 0
    preset, orig, cfgp, d, tp, layout, fmt = argv[:7]
    tp = int(tp)
    sd = torch.load(orig, map_location='cpu')
    cfg = json.load(open(cfgp))
    bad = 0
    for r in range(tp):
        got, meta = load_rank(rank_path(d, layout, fmt, r, tp), fmt)
        if fmt != 'torch' and meta.get('tpconv.rank') != str(r):
            print(f'rank {r}: metadata tpconv.rank = {meta.get("tpconv.rank")}')
            bad += 1
        if set(got) != set(sd):
            print(f'rank {r}: names differ: {sorted(set(got) ^ set(sd))[:5]}')
            bad += 1
            continue
        for k, v in sd.items():
            want = expected(preset, k, v, tp, r, cfg)
            g = got[k]
            if g.dtype != want.dtype or tuple(g.shape) != tuple(want.shape) or not torch.equal(g, want):
                print(f'rank {r} {k}: got {g.dtype} {tuple(g.shape)}, want {want.dtype} {tuple(want.shape)}')
                bad += 1
    print(f'{preset} tp {tp} {layout}/{fmt}: {"ok" if not bad else str(bad) + " differences"}')
    return 1 if bad else 0


sys.exit(main())
