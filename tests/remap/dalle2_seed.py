# The DALLE2 seed case (issue 4), in real torch.
#
#   /usr/bin/python3 dalle2_seed.py gen DIR SEED
#       DIR/ckpt.pth          torch.save({'ema_model': sd, 'model': sd2, 'step': .., 'version': ..})
#                             with a DALLE2-Decoder-shaped state dict (two unets, .g keys under
#                             cross_attn and fn.fn. and elsewhere, clip.* keys, an 'xclip.' key,
#                             a transposed view, a tied weight, f16 and int64 tensors)
#       DIR/ckpt.safetensors  the same tensors, flattened ("ema_model.unets.0...."), contiguous
#       DIR/keys.txt          the names the seed loop produces (the Decoder's state_dict keys),
#       DIR/keys.json         as a JSON list, and DIR/target.safetensors, a checkpoint with them
#   /usr/bin/python3 dalle2_seed.py check DIR OUT [DTYPE [F32_RE]]
#       OUT (safetensors, or a torch file) must hold exactly the names and bytes of the
#       seed loop run on DIR/ckpt.pth; with DTYPE, its floating tensors .to(DTYPE), except
#       those whose name matches F32_RE (re.search): .to(float32)
import hashlib, json, os, re, struct, sys
import torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import tpctest  # noqa: E402

ST, raw, write_st = tpctest.ST_NAMES, tpctest.tensor_bytes, tpctest.save_safetensors
DT = {'bf16': torch.bfloat16, 'f16': torch.float16, 'f32': torch.float32, 'f64': torch.float64}


def read_st(path):
    data = open(path, 'rb').read()
    n = struct.unpack('<Q', data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == '__metadata__':
            continue
        a, b = v['data_offsets']
        out[k] = (v['dtype'], v['shape'], data[8 + n + a:8 + n + b])
    return out


def unet(g, u, dim):
    """Names and shapes in the style of DALLE2-pytorch's Unet (its ResnetBlock, LinearAttention
    inside Residual(PreNorm(...)) -> 'fn.fn.', CrossAttention -> 'cross_attn', LayerNorm 'g')."""
    p = f'unets.{u}.'
    sd = {
        p + 'init_conv.convs.0.weight': torch.randn(dim, 3, 7, 7, generator=g),
        p + 'init_conv.convs.0.bias': torch.randn(dim, generator=g),
        p + 'to_time_hiddens.0.weights': torch.randn(dim // 2, generator=g),
        p + 'to_time_hiddens.1.weight': torch.randn(dim * 4, dim + 1, generator=g),
        p + 'to_time_hiddens.1.bias': torch.randn(dim * 4, generator=g),
        p + 'to_time_cond.0.weight': torch.randn(dim * 4, dim * 4, generator=g),
        p + 'norm_cond.weight': torch.randn(dim, generator=g),
        p + 'null_text_embed': torch.randn(1, 4, dim, generator=g),
    }
    for lvl in range(2):
        q = f'{p}downs.{lvl}.'
        sd[q + '0.block1.project.weight'] = torch.randn(dim, dim, 3, 3, generator=g)
        sd[q + '0.block1.norm.weight'] = torch.randn(dim, generator=g)
        sd[q + '0.block2.project.weight'] = torch.randn(dim, dim, 3, 3, generator=g)
        sd[q + '0.time_mlp.1.weight'] = torch.randn(dim * 2, dim * 4, generator=g)
        sd[q + '1.fn.fn.norm.g'] = torch.randn(1, dim, 1, 1, generator=g)
        sd[q + '1.fn.fn.to_qkv.weight'] = torch.randn(dim * 3, dim, 1, 1, generator=g)
        sd[q + '1.fn.fn.to_out.0.weight'] = torch.randn(dim, dim, 1, 1, generator=g)
        sd[q + '1.fn.fn.to_out.1.g'] = torch.randn(1, dim, 1, 1, generator=g)
        sd[q + '2.cross_attn.norm.g'] = torch.randn(dim, generator=g)
        sd[q + '2.cross_attn.norm_context.g'] = torch.randn(dim, generator=g)
        sd[q + '2.cross_attn.to_q.weight'] = torch.randn(dim, dim, generator=g)
        sd[q + '2.cross_attn.to_kv.weight'] = torch.randn(dim * 2, dim, generator=g)
        sd[q + '2.cross_attn.to_out.1.g'] = torch.randn(dim, generator=g)
        sd[q + '2.cross_attn.null_kv'] = torch.randn(2, dim, generator=g)
        sd[q + '3.norm.g'] = torch.randn(dim, generator=g)  # a .g outside both: stays
    sd[p + 'mid_block1.block1.project.weight'] = torch.randn(dim, dim, 3, 3, generator=g)
    sd[p + 'mid_attn.fn.fn.norm.g'] = torch.randn(dim, generator=g)
    sd[p + 'mid_attn.fn.fn.to_out.1.g'] = torch.randn(dim, generator=g)
    sd[p + 'mid_attn.fn.fn.to_out.0.weight'] = torch.randn(dim, dim, generator=g)
    sd[p + 'final_resnet_block.block1.project.0.g'] = torch.randn(dim, generator=g)  # stays .g
    sd[p + 'final_resnet_block.block1.project.weight'] = torch.randn(dim, dim, 3, 3, generator=g)
    sd[p + 'final_conv.weight'] = torch.randn(3, dim, 1, 1, generator=g)
    sd[p + 'xclip.proj'] = torch.randn(dim, generator=g)  # 'clip.' is a substring: dropped
    sd[p + 'fn.fn.gg'] = torch.randn(2, generator=g)      # ends in 'g', not '.g': stays
    return sd


def decoder(g):
    sd = {}
    sd.update(unet(g, 0, 16))
    sd.update(unet(g, 1, 8))
    # CLIP inside the decoder: dropped by the loop, .g keys and all
    sd['clip.transformer.x.weight'] = torch.randn(8, 8, generator=g)
    sd['clip.transformer.layers.0.fn.fn.norm.g'] = torch.randn(8, generator=g)
    sd['clip.visual.cross_attn.g'] = torch.randn(8, generator=g)
    # a transposed view (torch.save keeps the strides), a tied weight, other dtypes
    w = torch.randn(24, 16, generator=g)
    sd['unets.0.to_time_tokens.0.weight'] = w.t()
    sd['unets.0.to_time_tokens.0.weight_tied'] = sd['unets.0.to_time_cond.0.weight']
    sd['unets.1.downs.0.1.fn.fn.norm.g'] = sd['unets.1.downs.0.1.fn.fn.norm.g'].half()
    sd['unets.0.lowres_cond.step'] = torch.tensor([7, 8], dtype=torch.int64)
    return sd


def seed_loop(state_dict):
    """The issue's loop, verbatim but for the assert (the key list is written instead)."""
    new_dict = {}
    for k, v in state_dict.items():
        if 'clip.' in k:
            continue
        if ('cross_attn' in k or 'fn.fn.' in k) and k.endswith(".g"):
            k = k[:-1] + "gamma"
        new_dict[k] = v
    return new_dict


def gen(out, seed):
    g = torch.Generator().manual_seed(seed)
    ema = decoder(g)
    model = {k: v.clone() for k, v in decoder(g).items()}
    torch.save({'ema_model': ema, 'model': model, 'step': 1234, 'version': '1.15.1'}, f'{out}/ckpt.pth')
    flat = {'ema_model.' + k: v for k, v in ema.items()}
    flat.update({'model.' + k: v for k, v in model.items()})
    write_st(f'{out}/ckpt.safetensors', flat)
    new = seed_loop(torch.load(f'{out}/ckpt.pth', map_location='cpu')['ema_model'])
    open(f'{out}/keys.txt', 'w').write(''.join(k + '\n' for k in new))
    json.dump(list(new), open(f'{out}/keys.json', 'w'))
    write_st(f'{out}/target.safetensors', {k: v[:0] if v.dim() else v for k, v in new.items()})


def load_out(path):
    """name -> (dtype name, shape, bytes) of a safetensors or torch output."""
    if open(path, 'rb').read(2) == b'PK' or not path.endswith('.safetensors'):
        sd = torch.load(path, map_location='cpu', weights_only=True)
        return {k: (ST[v.dtype], list(v.shape), raw(v)) for k, v in sd.items() if torch.is_tensor(v)}
    return read_st(path)


def check(d, outp, dtype=None, f32_re=None):
    want = seed_loop(torch.load(f'{d}/ckpt.pth', map_location='cpu')['ema_model'])
    if dtype:
        cast = lambda k: torch.float32 if f32_re and re.search(f32_re, k) else DT[dtype]
        want = {k: v.to(cast(k)) if v.is_floating_point() else v for k, v in want.items()}
    got = load_out(outp)
    bad = []
    miss, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    if miss or extra:
        bad.append(f'missing {miss} unexpected {extra}')
    for k in sorted(set(want) & set(got)):
        v = want[k]
        w = (ST[v.dtype], list(v.shape), raw(v))
        if got[k][:2] != w[:2]:
            bad.append(f'{k}: got {got[k][0]} {got[k][1]}, want {w[0]} {w[1]}')
        elif got[k][2] != w[2]:
            bad.append(f'{k}: bytes differ (sha256 {hashlib.sha256(got[k][2]).hexdigest()[:16]} '
                       f'want {hashlib.sha256(w[2]).hexdigest()[:16]})')
    for b in bad[:20]:
        print(b)
    if not bad:
        print(f'{len(want)} tensors: names, dtypes, shapes and bytes as the seed loop')
    return 1 if bad else 0


if __name__ == '__main__':
    if sys.argv[1] == 'gen':
        gen(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == 'check':
        sys.exit(check(sys.argv[2], sys.argv[3], *(sys.argv[4:6])))
