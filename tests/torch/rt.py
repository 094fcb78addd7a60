#!/usr/bin/python3
"""Round-trip helpers for torch_roundtrip_test.sh; run with /usr/bin/python3 (torch).

  rt.py gen OUTDIR SEED         write the source checkpoints (gen_matrix cases,
                                zip and legacy, variants without complex128,
                                select.*.pt); print FILE<TAB>ROLES<TAB>description
  rt.py load-same SRC OUT [SUBTREE] [--any-order] [--loose-tensor-type]
                                OUT (written by tpconv) loads with
                                torch.load(weights_only=True) and equals SRC
                                (a torch file or a .safetensors file);
                                (Parameter versus Tensor and requires_grad too);
                                --any-order: dict key order and dict versus
                                OrderedDict are not compared (a note says so);
                                --loose-tensor-type: nor Parameter/requires_grad
  rt.py st-has SRC.pt ST [--dedup]
                                every tensor of the safetensors file ST equals
                                the tensor of that (flattened) name in SRC.pt;
                                every SRC tensor is in ST (unless --dedup)
  rt.py describe SRC [SUBTREE]  print {name: [dtype, shape, sha]} of torch.load(SRC)
                                (or of its SUBTREE) as JSON
  rt.py dequant SRC.pt OUT [--any-order]
                                OUT (.safetensors, or a torch file that loads
                                with weights_only=True) holds SRC's tensors with
                                the quantized ones dequantized to float32 as torch does
  rt.py batch JOBS              run many checks in one process (torch imports
                                once): each line of JOBS is DESC<TAB>COMMAND<TAB>ARGS...
                                with COMMAND one of the above; prints each check's
                                '# ' lines, then '@@<TAB>RC<TAB>DESC'

'load-same' and 'dequant' load OUT with weights_only=True. torch 1.13's
weights_only unpickler lacks BINFLOAT, some dtype globals and _rebuild_qtensor
(torch 2.x has them), so when OUT fails for one of those reasons and torch's
own SRC cannot be loaded that way either, OUT is loaded with
weights_only=False and a note says so. Exit 0 when equal, 1 with '# ' lines when not.
"""
import collections
import json
import os
import re
import sys

import torch

import tpc_torch as tt


def wo_load(path):
    """torch.load(weights_only=True); returns (obj, None) or (None, error)."""
    try:
        return tt.load(path, weights_only=True), None
    except Exception as e:  # noqa: BLE001 - any refusal is a result here
        return None, '%s: %s' % (type(e).__name__, str(e).strip().splitlines()[-1][:300])


def source(path):
    if path.endswith('.safetensors'):
        d, _ = tt.read_safetensors(path)
        return d, None
    obj = tt.load(path, weights_only=False)
    _, err = wo_load(path)
    return obj, err


# What torch 1.13's weights_only unpickler lacks but torch >= 2.x allows
# (FORMATS.md 1.11): BINFLOAT ('G' = operand 71), dtype globals other than
# complex/float16/32/64/int8..64 (torch.qint8, torch.bfloat16, torch.bool,
# torch.uint8), qschemes and _rebuild_qtensor.
KNOWN_113_LIMITS = re.compile(
    r'Unsupported operand 71\b|Unsupported class torch\.(qint8|quint8|qint32|quint4x2|quint2x4|bfloat16|bool'
    r'|uint8|per_tensor_affine|per_channel_affine|per_tensor_symmetric|per_channel_symmetric)\b'
    r'|Unsupported class torch\._utils\._rebuild_qtensor\b')


def load_output(out, src_wo_err, notes):
    """torch.load(out, weights_only=True), falling back to weights_only=False
    only for what torch 1.13's allow-list lacks and when torch's own source
    file cannot be loaded with weights_only=True either. Returns (obj, error)."""
    b, err = wo_load(out)
    if err is None:
        return b, None
    if src_wo_err is None:
        return None, ('torch.load(%s, weights_only=True) fails: %s | (the torch-written source loads '
                      'with weights_only=True)' % (os.path.basename(out), err))
    if not KNOWN_113_LIMITS.search(err):
        return None, 'torch.load(%s, weights_only=True) fails: %s' % (os.path.basename(out), err)
    notes.append('weights_only=False: torch %s\'s allow-list lacks what this file needs (%s); '
                 'the torch-written source fails too (%s)' % (torch.__version__, err.split('error: ')[-1][:80],
                                                            src_wo_err.split('error: ')[-1][:80]))
    return tt.load(out, weights_only=False), None


def cmd_load_same(src, out, subtree=None, any_order=False, loose_types=False):
    a, src_wo_err = source(src)
    if subtree:
        for part in subtree.split('.'):
            a = a[part]
    notes = []
    b, err = load_output(out, src_wo_err, notes)
    if err:
        print('# ' + err)
        return 1
    if src.endswith('.safetensors'):
        # a flat {name: tensor} from a safetensors file; tpconv writes it as a dict
        if not isinstance(b, dict):
            print('# top level is %s, wanted a dict' % type(b).__name__)
            return 1
        bflat = tt.flatten(b)
        if list(a) != list(bflat) and sorted(a) == sorted(bflat):
            notes.append('tensor order differs from the safetensors header order (not checked)')
        diffs = tt.tree_diff(collections.OrderedDict(sorted(a.items())),
                             collections.OrderedDict(sorted(bflat.items())))
    else:
        diffs = tt.tree_diff(a, b, check_order=not any_order, tensor_types_equal=loose_types)
        if any_order and tt.tree_diff(a, b):
            notes.append('dict order or dict/OrderedDict type differs (not checked here)')
        if loose_types and tt.tree_diff(a, b, check_order=False, tensor_types_equal=False):
            notes.append('Parameter or requires_grad not kept (not checked here): %s'
                         % tt.tree_diff(a, b, check_order=False, tensor_types_equal=False)[0])
    for n in notes:
        print('# note: ' + n)
    for d in diffs[:20]:
        print('# ' + d)
    if len(diffs) > 20:
        print('# ... %d differences' % len(diffs))
    return 1 if diffs else 0


def cmd_st_has(src, st, dedup=False):
    a = tt.flatten(tt.load(src, weights_only=False))
    b, meta = tt.read_safetensors(st)
    diffs = []
    for n, t in b.items():
        if n not in a:
            diffs.append('%r is in the safetensors file but not in the source' % n)
        elif isinstance(t, tuple):
            diffs.append('%r: dtype %s' % (n, t[1]))
        else:
            d = tt.tensor_diff(a[n], t)
            if d:
                diffs.append('%r: %s' % (n, d))
    missing = [n for n in a if n not in b]
    if missing and not dedup:
        diffs.append('missing from the safetensors file: %r' % missing[:10])
    if dedup:
        # every dropped name must repeat a kept tensor bit for bit
        for n in missing:
            if not any(tt.tensor_diff(a[n], t) is None for t in b.values() if not isinstance(t, tuple)):
                diffs.append('%r dropped by --dedup-tied but equals no stored tensor' % n)
    for d in diffs[:20]:
        print('# ' + d)
    return 1 if diffs else 0


def cmd_describe(src, subtree=None):
    obj = tt.load(src, weights_only=False) if not src.endswith('.safetensors') else tt.read_safetensors(src)[0]
    if subtree:
        for part in subtree.split('.'):
            obj = obj[part]
    json.dump(tt.describe(obj), sys.stdout)
    return 0


def cmd_dequant(src, out, any_order=False):
    a = tt.flatten(tt.load(src, weights_only=False))
    diffs = []
    if out.endswith('.safetensors'):
        b, _ = tt.read_safetensors(out)
    else:
        notes = []
        o, err = load_output(out, wo_load(src)[1], notes)
        if err:
            print('# ' + err)
            return 1
        for n in notes:
            print('# note: ' + n)
        b = tt.flatten(o)
        if list(b) != list(a) and (not any_order or sorted(b) != sorted(a)):
            diffs.append('names or order differ: %r vs %r' % (list(b)[:8], list(a)[:8]))
    for n, t in a.items():
        if n not in b:
            diffs.append('%r missing' % n)
            continue
        want = t.dequantize() if t.is_quantized else t
        got = b[n]
        if isinstance(got, tuple):
            diffs.append('%r: dtype %s' % (n, got[1]))
        elif got.dtype != want.dtype or got.shape != want.shape:
            diffs.append('%r: %s %s, wanted %s %s' % (n, got.dtype, list(got.shape), want.dtype, list(want.shape)))
        elif not torch.equal(tt.bits(got), tt.bits(want)):
            # dequantization is (q - zp) * scale in float; allow float rounding, report it
            if torch.allclose(got, want, rtol=1e-6, atol=0):
                print('# note: %r equal within 1e-6 relative, not bitwise' % n)
            else:
                diffs.append('%r: values differ (max abs diff %g)' % (n, (got - want).abs().max().item()))
    extra = [n for n in b if n not in a]
    if extra:
        diffs.append('unexpected %r' % extra[:10])
    for d in diffs[:20]:
        print('# ' + d)
    return 1 if diffs else 0


def drop_c128(obj):
    """obj without its complex128 tensors (safetensors has no C128); None if it had none."""
    found = []

    def walk(o):
        if isinstance(o, torch.Tensor):
            return o
        if isinstance(o, dict):
            r = type(o)()
            for k, v in o.items():
                if isinstance(v, torch.Tensor) and v.dtype == torch.complex128:
                    found.append(k)
                    continue
                r[k] = walk(v)
            if hasattr(o, '_metadata'):
                r._metadata = o._metadata
            return r
        if isinstance(o, (list, tuple)):
            r = [walk(v) for v in o if not (isinstance(v, torch.Tensor) and v.dtype == torch.complex128)]
            found.extend(['list item'] * (len(o) - len(r)))
            return tuple(r) if isinstance(o, tuple) else r
        return o
    r = walk(obj)
    return r if found else None


def cmd_gen(out, seed):
    """Print FILE<TAB>ROLES<TAB>description; ROLES: a = torch->torch,
    b = torch->safetensors->torch, d = --select, e = quantized, c = complex128."""
    import gen_matrix as gm
    gm.set_seed(seed)
    os.makedirs(out, exist_ok=True)
    for name, fn, desc in gm.CASES:
        obj = fn()
        if isinstance(obj, torch.Tensor) and obj.dtype == torch.complex128:
            continue
        st = drop_c128(obj)
        for fmt in ('zip', 'legacy'):
            f = '%s.%s.pt' % (name, fmt)
            torch.save(obj, os.path.join(out, f), _use_new_zipfile_serialization=(fmt == 'zip'))
            roles = 'ae' if name == 'quantized' else ('a' if st is not None else 'ab')
            print('%s\t%s\t%s (%s)' % (f, roles, desc, fmt))
            if st is not None:
                f = '%s.noc128.%s.pt' % (name, fmt)
                torch.save(st, os.path.join(out, f), _use_new_zipfile_serialization=(fmt == 'zip'))
                print('%s\tb\t%s, without complex128 (%s)' % (f, desc, fmt))
    torch.save({'c': torch.complex(torch.randn(2, 2), torch.randn(2, 2)).to(torch.complex128),
                'x': torch.randn(2)}, os.path.join(out, 'c128.zip.pt'))
    print('c128.zip.pt\tc\tcomplex128, which safetensors lacks (zip)')
    # a training checkpoint with an EMA copy of the model: for --select ema_model
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    ema = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    m(torch.randn(2, 3)).sum().backward()
    opt.step()
    ck = {'model': m.state_dict(), 'ema_model': ema.state_dict(), 'optimizer': opt.state_dict(),
          'step': 5, 'config': {'lr': 0.1, 'name': 'x'}}
    torch.save(ck, os.path.join(out, 'select.zip.pt'))
    torch.save(ck, os.path.join(out, 'select.legacy.pt'), _use_new_zipfile_serialization=False)
    print('select.zip.pt\tad\ttraining checkpoint with model, ema_model, optimizer (zip)')
    print('select.legacy.pt\tad\ttraining checkpoint with model, ema_model, optimizer (legacy)')
    return 0


def cmd_batch(jobs):
    import io
    import traceback
    with open(jobs) as f:
        lines = [l.rstrip('\n') for l in f if l.strip()]
    real = sys.stdout
    for line in lines:
        desc, *args = line.split('\t')
        buf = io.StringIO()
        sys.stdout = buf
        try:
            rc = run(args)
        except Exception:  # noqa: BLE001 - report, go on with the next check
            rc = 1
            tb = traceback.format_exc().strip().splitlines()
            print('# exception: ' + ' | '.join(tb[-3:]))
        finally:
            sys.stdout = real
        for l in buf.getvalue().splitlines():
            if l.strip():
                print(l if l.startswith('#') else '# ' + l)
        print('@@\t%d\t%s' % (rc, desc), flush=True)
    return 0


def main():
    return run(sys.argv[1:])


def run(a):
    if not a:
        print(__doc__)
        return 2
    c = a[0]
    if c == 'batch':
        return cmd_batch(a[1])
    if c == 'gen':
        return cmd_gen(a[1], int(a[2]))
    if c == 'load-same':
        pos = [x for x in a[1:] if not x.startswith('--')]
        return cmd_load_same(pos[0], pos[1], pos[2] if len(pos) > 2 else None, '--any-order' in a,
                             '--loose-tensor-type' in a)
    if c == 'st-has':
        return cmd_st_has(a[1], a[2], '--dedup' in a)
    if c == 'describe':
        return cmd_describe(a[1], a[2] if len(a) > 2 else None)
    if c == 'dequant':
        return cmd_dequant(a[1], a[2], '--any-order' in a)
    print('unknown command %r' % c)
    return 2


if __name__ == '__main__':
    sys.exit(main())
