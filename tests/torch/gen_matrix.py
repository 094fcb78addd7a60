#!/usr/bin/python3
"""usage: /usr/bin/python3 gen_matrix.py OUTDIR [SEED]

Write the torch.save matrix into OUTDIR with real torch (1.13 on Debian 12):
every case in the zip format (CASE.zip.pt) and the legacy format
(CASE.legacy.pt, pickle protocol 2, torch's default), and again in the legacy
format pickled with protocols 1, 3, 4 and 5 (CASE.legacy_pN.pt), plus one zip
file with more than 65535 storages and files with bytes after their end
(CASE.zip_trailing.pt, CASE.legacy_trailing.pt), which torch loads. Write
OUTDIR/expected/FILE.json = {name: [torch dtype, shape, sha256]} computed by
torch from torch.load of each file (names: flattened dotted keys; a file each,
so a check reads its own: the zip64 case's 65,536 tensors are 6 MB), and
print one line per file: FILE<TAB>description<TAB>the line `tpconv inspect`
must print about it (or nothing).
"""
import collections
import json
import os
import sys

import torch

import tpc_torch as tt

g = torch.Generator().manual_seed(1234)


def set_seed(seed):
    torch.manual_seed(seed)
    g.manual_seed(seed)


def rnd(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g).to(dtype)


def special(dtype):
    """2x3 tensor with values that catch byte-order and rounding bugs."""
    if dtype == torch.bool:
        return torch.tensor([[True, False, True], [False, False, True]])
    if dtype.is_complex:
        r = torch.tensor([[1.5, -0.0, float('nan')], [float('inf'), 1e-30, -2.25]], dtype=torch.float64)
        return torch.complex(r, r.flip(1)).to(dtype)
    if dtype.is_floating_point:
        fi = torch.finfo(dtype)
        return torch.tensor([[fi.max, fi.tiny, -0.0], [float('nan'), float('-inf'), 1.0 / 3]],
                            dtype=torch.float64).to(dtype)
    ii = torch.iinfo(dtype)
    return torch.tensor([[ii.min, ii.max, 0], [1, -1 if ii.min < 0 else 2, 0x5a]], dtype=torch.int64).to(dtype)


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
          torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64, torch.complex128]


def case_dtypes():
    d = collections.OrderedDict()
    for dt in DTYPES:
        name = str(dt).replace('torch.', '')
        d[name] = special(dt)
        d[name + '_rand'] = (rnd(4, 5) * 100).to(dt) if not dt.is_complex else torch.complex(rnd(4, 5), rnd(4, 5)).to(dt)
    return d


def case_views():
    base = torch.arange(24, dtype=torch.float32) * 1.5
    m = base.view(4, 6)
    return {'base': base, 'slice': base[2:6], 'tail': base[20:], 'strided': base[1::3],
            'view2d_t': m.t(), 'row': m[2], 'col': m[:, 1]}


def case_view_only():
    # storage larger than every tensor that uses it, offsets > 0, no base name
    base = torch.arange(100, dtype=torch.int64)
    big = torch.arange(60, dtype=torch.float64).view(6, 10)
    return {'slice': base[10:14], 'slice2': base[50:60].view(2, 5), 'col': big[1:, 3], 'block': big[2:4, 5:9]}


def case_tied():
    w = rnd(5, 3)
    lin = torch.nn.Linear(3, 5, bias=False)
    emb = torch.nn.Embedding(5, 3)
    emb.weight = lin.weight  # tied like embed/lm_head
    sd = collections.OrderedDict()
    sd['embed.weight'] = w
    sd['lm_head.weight'] = w
    sd['other'] = rnd(2)
    sd['mod_emb.weight'] = emb.weight.data
    sd['mod_lin.weight'] = lin.weight.data
    return sd


def case_transposed():
    return {'t': rnd(3, 5).t(),
            'fortran': rnd(4, 3, 2).permute(2, 1, 0),  # shape (2,3,4), strides (1,2,6)
            'fortran_int': torch.arange(24, dtype=torch.int64).reshape(4, 3, 2).permute(2, 1, 0),
            'perm': rnd(2, 3, 4).permute(1, 0, 2),
            'bf16_t': rnd(3, 4, dtype=torch.bfloat16).t(),
            'c128_t': torch.complex(rnd(2, 3), rnd(2, 3)).to(torch.complex128).t()}


def case_broadcast():
    # stride 0 (expand) is written as is by torch.save: 3 stored values, 12 logical
    return {'bcast': rnd(3, 1).expand(3, 4), 'row_bcast': torch.arange(4, dtype=torch.int32).expand(2, 4)}


def case_parameter():
    return {'p': torch.nn.Parameter(rnd(3, 2)),
            'p_nograd': torch.nn.Parameter(rnd(2), requires_grad=False),
            'p_bf16': torch.nn.Parameter(rnd(2, 2, dtype=torch.bfloat16)),
            'plain': rnd(2),
            'plain_requires_grad': rnd(2).requires_grad_()}  # _rebuild_tensor_v2 requires_grad=True


def case_module():
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.ReLU(),
                            torch.nn.Embedding(5, 2), torch.nn.LayerNorm(2))
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(rnd(*p.shape))
    sd = m.state_dict()
    assert isinstance(sd, collections.OrderedDict) and hasattr(sd, '_metadata')
    return sd


def case_nested():
    return {'epoch': 7, 'lr': 1e-3, 'name': 'run-1', 'flag': True, 'off': False, 'none': None,
            'big': 2 ** 40, 'neg': -3, 'huge': 2 ** 70,
            'list': [rnd(2), 1, 'a', None, 0.5],
            'tuple': (rnd(3, dtype=torch.float64), 2.5, (torch.arange(3),)),
            'model': {'enc': {'w': rnd(2, 2), 'b': rnd(2)}, 'dec': collections.OrderedDict(w=rnd(1, 2))},
            'ema_model': {'enc': {'w': rnd(2, 2), 'b': rnd(2)}},
            'ints': {1: rnd(1), 2: 'two'},
            'empty_dict': {}, 'empty_list': []}


def case_scalars_empty():
    return {'s_f32': torch.tensor(1.5), 's_i64': torch.tensor(7), 's_bool': torch.tensor(True),
            's_bf16': torch.tensor(2.5, dtype=torch.bfloat16), 's_c128': torch.tensor(1 + 2j, dtype=torch.complex128),
            's_view': torch.arange(5.)[3],  # 0-d view at offset 3
            'e0': torch.zeros(0), 'e30': torch.zeros(3, 0), 'e04': torch.zeros(0, 4, dtype=torch.int64),
            'e_bool': torch.zeros(0, dtype=torch.bool)}


def case_toplevel_tensor():
    return rnd(3, 4)


def case_toplevel_list():
    return [rnd(2), torch.arange(3), {'x': rnd(1)}]


def case_quantized():
    x = rnd(4, 5)
    return {'q_i8': torch.quantize_per_tensor(x, 0.05, 3, torch.qint8),
            'q_u8': torch.quantize_per_tensor(x, 0.1, 128, torch.quint8),
            'q_i32': torch.quantize_per_tensor(x, 0.001, 0, torch.qint32),
            'q_chan': torch.quantize_per_channel(x, torch.tensor([0.1, 0.2, 0.05, 0.3], dtype=torch.float64),
                                                 torch.tensor([0, 1, 2, 3]), 0, torch.qint8),
            'bias': rnd(4)}


CASES = [
    ('dtypes', case_dtypes, 'every dtype torch 1.13 writes, with NaN/Inf/-0/extremes'),
    ('views', case_views, 'views of one storage with offsets and strides'),
    ('view_only', case_view_only, 'slices of larger storages, no base tensor'),
    ('tied', case_tied, 'tied weights: two names, one storage'),
    ('transposed', case_transposed, 'transposed and Fortran-order tensors'),
    ('broadcast', case_broadcast, 'expanded tensors (stride 0)'),
    ('parameter', case_parameter, 'nn.Parameter (_rebuild_parameter), requires_grad'),
    ('module', case_module, 'nn.Module state_dict (OrderedDict with _metadata)'),
    ('nested', case_nested, 'nested dicts/lists/tuples with non-tensor values'),
    ('scalars_empty', case_scalars_empty, '0-d and empty tensors'),
    ('toplevel_tensor', case_toplevel_tensor, 'a bare tensor at the top level'),
    ('toplevel_list', case_toplevel_list, 'a list at the top level'),
    ('quantized', case_quantized, 'quantized tensors, per tensor and per channel'),
]

NZIP64 = 65536 + 1000
# pickle protocols of the extra legacy files (2 is torch's default, above;
# torch.load cannot read protocol 0 files: their storage ids are text)
PROTOCOLS = (1, 3, 4, 5)
# bytes appended to a saved file: what torch.load still reads
TRAILING = {'zip': b'\0' * 512 + b'appended by a copy tool\n', 'legacy': b'junk after the last storage\n' * 100}


def main():
    out = sys.argv[1]
    set_seed(int(sys.argv[2]) if len(sys.argv) > 2 else 1234)
    os.makedirs(out, exist_ok=True)
    expected = collections.OrderedDict()
    lines = []

    def add(f, desc, note=''):
        expected[f] = tt.describe(tt.load(os.path.join(out, f), weights_only=False))
        lines.append('%s\t%s\t%s' % (f, desc, note))

    for name, fn, desc in CASES:
        obj = fn()
        for fmt in ('zip', 'legacy'):
            f = '%s.%s.pt' % (name, fmt)
            torch.save(obj, os.path.join(out, f), _use_new_zipfile_serialization=(fmt == 'zip'))
            add(f, '%s (%s)' % (desc, fmt), 'legacy torch.save format, pickle protocol 2' if fmt == 'legacy' else '')
        for p in PROTOCOLS:
            f = '%s.legacy_p%d.pt' % (name, p)
            torch.save(obj, os.path.join(out, f), _use_new_zipfile_serialization=False, pickle_protocol=p)
            add(f, '%s (legacy, pickle protocol %d)' % (desc, p), 'legacy torch.save format, pickle protocol %d' % p)
    for name in ('nested', 'tied'):
        for fmt in ('zip', 'legacy'):
            with open(os.path.join(out, '%s.%s.pt' % (name, fmt)), 'rb') as fh:
                b = fh.read()
            f = '%s.%s_trailing.pt' % (name, fmt)
            with open(os.path.join(out, f), 'wb') as fh:
                fh.write(b + TRAILING[fmt])
            add(f, '%s with %d bytes after its end (torch loads it)' % (fmt, len(TRAILING[fmt])),
                'trailing bytes: %d after the %s, at offset %d (ignored, as torch.load does)' %
                (len(TRAILING[fmt]), 'end of central directory record' if fmt == 'zip' else 'last storage', len(b)))
    # > 65535 storages: the zip needs zip64 entry counts
    many = collections.OrderedDict(('t%05d' % i, torch.tensor([i], dtype=torch.int32)) for i in range(NZIP64))
    f = 'zip64_many.zip.pt'
    torch.save(many, os.path.join(out, f))
    add(f, '%d tensors, %d zip entries (zip64 counts)' % (NZIP64, NZIP64 + 2))
    os.makedirs(os.path.join(out, 'expected'), exist_ok=True)
    for f, e in expected.items():
        with open(os.path.join(out, 'expected', f + '.json'), 'w') as fh:
            json.dump(e, fh)
    for l in lines:
        print(l)


if __name__ == '__main__':
    main()
