# Write a LLaMA-shaped safetensors file of any size without holding it in
# memory (no torch needed): the header, then every tensor's bytes streamed from
# a 64 MiB block of random bytes, each tensor starting at a different offset
# of it so no two tensors are equal. The default is LLaMA-13B in bf16
# (hidden 5120, 40 layers, 40 heads, intermediate 13824, vocab 32000):
# 26 GB, larger than the bench machine's RAM.
# usage: make_big_st.py OUT.safetensors [HIDDEN LAYERS INTER VOCAB DTYPE]
import json, os, struct, sys

out = sys.argv[1]
h, L, inter, vocab = (int(x) for x in (sys.argv[2:6] if len(sys.argv) > 5 else (5120, 40, 13824, 32000)))
dt = sys.argv[6] if len(sys.argv) > 6 else 'BF16'
es = {'BF16': 2, 'F16': 2, 'F32': 4}[dt]
shapes = [('model.embed_tokens.weight', [vocab, h])]
for i in range(L):
    p = f'model.layers.{i}.'
    shapes += [(p + 'self_attn.q_proj.weight', [h, h]), (p + 'self_attn.k_proj.weight', [h, h]),
               (p + 'self_attn.v_proj.weight', [h, h]), (p + 'self_attn.o_proj.weight', [h, h]),
               (p + 'mlp.gate_proj.weight', [inter, h]), (p + 'mlp.up_proj.weight', [inter, h]),
               (p + 'mlp.down_proj.weight', [h, inter]),
               (p + 'input_layernorm.weight', [h]), (p + 'post_attention_layernorm.weight', [h])]
shapes += [('model.norm.weight', [h]), ('lm_head.weight', [vocab, h])]
hdr, off = {'__metadata__': {'format': 'pt'}}, 0
for name, shp in shapes:
    n = es
    for s in shp:
        n *= s
    hdr[name] = {'dtype': dt, 'shape': shp, 'data_offsets': [off, off + n]}
    off += n
hb = json.dumps(hdr, separators=(',', ':')).encode()
hb += b' ' * (-len(hb) % 8)
BLOCK = 64 << 20
rnd = bytearray(os.urandom(BLOCK))
if es == 2:
    # keep every value finite: clear the top exponent bit of each element's high byte
    rnd[1::2] = rnd[1::2].translate(bytes(x & 0xbf for x in range(256)))
elif es == 4:
    rnd[3::4] = rnd[3::4].translate(bytes(x & 0xbf for x in range(256)))
rnd = bytes(rnd)
with open(out + '.tmp', 'wb') as f:
    f.write(struct.pack('<Q', len(hb)))
    f.write(hb)
    for k, (name, shp) in enumerate(shapes):
        a, b = hdr[name]['data_offsets']
        n, start = b - a, (k * 4099 * es) % BLOCK
        while n:
            piece = rnd[start:start + min(n, BLOCK - start)]
            f.write(piece)
            n -= len(piece)
            start = 0
os.rename(out + '.tmp', out)
print(out, (8 + len(hb) + off) / 1e9, 'GB')
