# Casts against real torch (issue 4): inputs for `tpconv convert --dtype`, and
# the bit-for-bit check of its outputs against torch.Tensor.to(dtype).
#
#   /usr/bin/python3 cast_torch.py gen DIR SEED
#       DIR/in_<src>.safetensors for src in f32 f64 f16 bf16 i64 i32 i16 i8 u8
#       bool, DIR/strided.pth (a transposed view, saved by torch.save), and
#       DIR/ints.json (a rules file casting integers too)
#   /usr/bin/python3 cast_torch.py check IN.safetensors|IN.pth OUT.safetensors DST [ints]
#       every tensor of OUT must be IN's tensor .to(DST) byte for byte
#       (integer inputs: unchanged unless `ints`); "#" lines show the first
#       differences; exit 1 on any
#   /usr/bin/python3 cast_torch.py check-all JOBS
#       the same for each line "DESC<TAB>IN<TAB>OUT<TAB>DST[<TAB>ints]" of
#       JOBS, printing "ok - DESC" or "not ok - DESC" after its "#" lines
#       (one torch import for all)
#
# Values: random bit patterns (every class: normals, subnormals, +-0, +-Inf,
# NaNs with random sign and payload), random normals over many scales, all
# 65536 patterns of f16 and bf16, rounding ties and near-ties of the f16 and
# bf16 grids, overflow edges (65504, 65519.99, 65520, FLT_MAX), subnormal
# edges, and f64 values that round differently once than twice. Element
# counts are multiples of 16 and f64 tensors stay below torch's 32768-element
# grain, so torch's vectorized f64 -> bf16 kernel handles every element (its
# scalar tail writes NaN as 0x7FC0, the vector body as 0xFFFF; tpc_cast.h).
import json, os, struct, sys
import numpy as np
import torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import tpctest  # noqa: E402

ST = {'F64': torch.float64, 'F32': torch.float32, 'F16': torch.float16, 'BF16': torch.bfloat16,
      'I64': torch.int64, 'I32': torch.int32, 'I16': torch.int16, 'I8': torch.int8,
      'U8': torch.uint8, 'BOOL': torch.bool}
NAME = {v: k for k, v in ST.items()}
SHORT = {'f64': torch.float64, 'f32': torch.float32, 'f16': torch.float16, 'bf16': torch.bfloat16,
         'i64': torch.int64, 'i32': torch.int32, 'i16': torch.int16, 'i8': torch.int8,
         'u8': torch.uint8, 'bool': torch.bool}
BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
        torch.bfloat16: torch.int16}


raw, write_st = tpctest.tensor_bytes, tpctest.save_safetensors


def read_st(path):
    with open(path, 'rb') as f:
        data = f.read()
    n = struct.unpack('<Q', data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for k, v in hdr.items():
        if k == '__metadata__':
            continue
        a, b = v['data_offsets']
        dt = ST[v['dtype']]
        buf = bytearray(data[base + a:base + b])
        t = torch.frombuffer(buf, dtype=dt) if buf else torch.empty(0, dtype=dt)
        out[k] = t.reshape(v['shape'])
    return out


def pad16(bits):
    return bits + bits[:(-len(bits)) % 16] if len(bits) % 16 else bits


def from_bits(bits, dt):
    it = BITS[dt]
    w = {torch.int64: 64, torch.int32: 32, torch.int16: 16}[it]
    signed = [b - (1 << w) if b >= 1 << (w - 1) else b for b in bits]
    return torch.tensor(pad16(signed), dtype=it).view(dt)


def f32_specials():
    v = [0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001,
         0xff800001, 0x7fbfffff, 0x7fffffff, 0xffffffff, 0x7fa5a5a5, 0x7f7fffff, 0xff7fffff,
         0x00800000, 0x80800000, 0x007fffff, 0x00000001, 0x80000001, 0x00400000]
    f = lambda x: struct.unpack('<I', struct.pack('<f', x))[0]
    # f16 overflow and underflow edges
    for x in [65504.0, 65519.0, 65520.0, 65536.0, 70000.0, 6.103515625e-05, 2.0 ** -24, 2.0 ** -25,
              1.5 * 2.0 ** -24, 2.5 * 2.0 ** -24, 3 * 2.0 ** -26, 2.0 ** -26, 1e-9, 3.0e38, 1.0, 1.5]:
        for s in (1, -1):
            b = f(s * x)
            v += [b, b - 1, b + 1]
    # bf16 and f16 rounding ties and near-ties over many exponents
    for e in range(0, 255, 3):
        for m in [0x0000, 0x8000, 0x18000, 0x7fff, 0x8001, 0x10000 | 0x8000]:
            v.append((e << 23) | m)
            v.append(0x80000000 | (e << 23) | m)
        for m in [0x1000, 0x3000, 0x0fff, 0x1001, 0x2000 | 0x1000]:
            v.append((e << 23) | m)
    return v


def f64_specials():
    v = [0, 1 << 63, 0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000,
         0xfff8000000000000, 0x7ff0000000000001, 0x7ff0000020000000, 0xfff123456789abcd,
         0x7fffffffffffffff, 0x7fefffffffffffff, 0x0000000000000001, 0x0010000000000000,
         0x000fffffffffffff]
    d = lambda x: struct.unpack('<Q', struct.pack('<d', x))[0]
    for x in [3.4028234663852886e38, 3.4028235677973366e38, 3.40282357e38, 1e39, 1.401298464324817e-45,
              7.006492321624085e-46, 7.0064923216240862e-46, 1e-46, 65504.0, 65520.0, 65519.999,
              1 + 2.0 ** -8 + 2.0 ** -30, 1 + 2.0 ** -8 - 2.0 ** -40, 1 + 2.0 ** -11 + 2.0 ** -30,
              1 + 2.0 ** -24 + 2.0 ** -60, 2.0 ** -25 + 2.0 ** -50, 2.0 ** -149, 2.0 ** -150]:
        for s in (1, -1):
            b = d(s * x)
            v += [b, b - 1, b + 1]
    return v


def gen(out, seed):
    g = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    # f32: random bits (1 Mi elements: tpconv's parallel kernel), scaled normals, specials
    f32 = {
        'bits': torch.from_numpy(rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(np.uint32).view(np.int32)).view(torch.float32),
        'normal': (torch.randn(4096, generator=g) * torch.logspace(-45, 38, 4096, dtype=torch.float64).float()).reshape(64, 64),
        'special': from_bits(f32_specials(), torch.float32),
    }
    write_st(f'{out}/in_f32.safetensors', f32)
    f64 = {
        'bits': torch.from_numpy(rng.integers(0, 1 << 63, size=16384, dtype=np.int64) * np.where(rng.random(16384) < 0.5, 1, -1)).view(torch.float64),
        'normal': torch.randn(16384, generator=g, dtype=torch.float64) * torch.logspace(-330, 308, 16384, dtype=torch.float64),
        'special': from_bits(f64_specials(), torch.float64),
    }
    write_st(f'{out}/in_f64.safetensors', f64)
    allbits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    write_st(f'{out}/in_f16.safetensors', {'all': allbits.view(torch.float16).reshape(256, 256)})
    write_st(f'{out}/in_bf16.safetensors', {'all': allbits.view(torch.bfloat16).reshape(256, 256)})
    ints = {}
    for name, dt in [('i64', torch.int64), ('i32', torch.int32), ('i16', torch.int16), ('i8', torch.int8), ('u8', torch.uint8)]:
        info = torch.iinfo(dt)
        r = torch.randint(info.min, info.max, (4096,), generator=g, dtype=torch.int64)
        edges = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, 2049, 16777217, 2 ** 53 + 1, 65520, 65519, 257, 32769]
        edges = [x for x in edges if info.min <= x <= info.max]
        t = torch.cat([r, torch.tensor(edges + [0] * ((-len(edges)) % 16), dtype=torch.int64)]).to(dt)
        write_st(f'{out}/in_{name}.safetensors', {'v': t})
    write_st(f'{out}/in_bool.safetensors', {'v': torch.rand(64, generator=g) < 0.5})
    # a strided (transposed) view, only readable from a torch file
    x = torch.randn(48, 80, generator=g)
    torch.save({'t': x.t(), 'c': x[:, 16:48]}, f'{out}/strided.pth')
    with open(f'{out}/ints.json', 'w') as f:
        json.dump({'rules': [{'dtype': 'f32', 'ints': True}]}, f)


def load_in(path):
    if path.endswith('.pth'):
        return torch.load(path, map_location='cpu')
    return read_st(path)


def check(inp, outp, dst, ints):
    """Print "#" detail lines; return the number of differing tensors."""
    src = load_in(inp)
    got = read_st(outp)
    dt = SHORT[dst]
    bad = 0
    if sorted(src) != sorted(got):
        print(f'# names differ: {sorted(src)} vs {sorted(got)}')
        return 1
    for k in sorted(src):
        s = src[k]
        castable = s.is_floating_point() or ints
        want = s.to(dt) if castable else s
        g = got[k]
        tag = f'{inp.split("/")[-1]}:{k} {NAME[s.dtype]} -> {NAME[want.dtype]}'
        if g.dtype != want.dtype or list(g.shape) != list(want.shape):
            print(f'# {tag}: got {NAME[g.dtype]} {list(g.shape)}, want {NAME[want.dtype]} {list(want.shape)}')
            bad += 1
            continue
        a, b = raw(want), raw(g)
        if a == b:
            continue
        w = want.contiguous().reshape(-1)
        gg = g.contiguous().reshape(-1)
        sv = s.contiguous().reshape(-1)
        wb = w.view(BITS[w.dtype]) if w.dtype in BITS else w
        gb = gg.view(BITS[gg.dtype]) if gg.dtype in BITS else gg
        sb = sv.view(BITS[sv.dtype]) if sv.dtype in BITS else sv
        diff = (wb != gb).nonzero().reshape(-1)
        print(f'# {tag}: {diff.numel()} of {w.numel()} elements differ')
        for i in diff[:8].tolist():
            print(f'#   [{i}] in {hex(sb[i].item() & ((1 << 64) - 1))} ({sv[i].item()!r}): '
                  f'torch {hex(wb[i].item() & 0xffffffffffffffff)} tpconv {hex(gb[i].item() & 0xffffffffffffffff)}')
        bad += 1
    return bad


def check_all(jobs):
    """jobs: lines "DESC<TAB>IN<TAB>OUT<TAB>DST[<TAB>ints]"; one TAP-like line each."""
    for line in open(jobs):
        f = line.rstrip('\n').split('\t')
        try:
            nbad = check(f[1], f[2], f[3], len(f) > 4 and f[4] == 'ints')
        except Exception as ex:  # a missing or unreadable output is a failure
            print(f'# {type(ex).__name__}: {ex}')
            nbad = 1
        print(('not ok - ' if nbad else 'ok - ') + f[0], flush=True)


if __name__ == '__main__':
    if sys.argv[1] == 'gen':
        gen(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == 'check':
        sys.exit(1 if check(sys.argv[2], sys.argv[3], sys.argv[4], len(sys.argv) > 5 and sys.argv[5] == 'ints') else 0)
    elif sys.argv[1] == 'check-all':
        check_all(sys.argv[2])
