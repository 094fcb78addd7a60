#!/usr/bin/env python3
"""usage: check_files.py TPCONV FILE... (run with /usr/bin/python3: needs torch)

Checks tpconv on checkpoints gathered from public repositories (kept out of
this repository: fetch them, then point this at them). For each torch file:
what real torch.load returns, flattened as ../shared/corpus/README.md says
(dtype, shape, sha256 of the C-contiguous bytes), must equal `tpconv inspect
--json --hash`, and `tpconv convert` to safetensors must hold the same bytes.
For each safetensors file: the safetensors header and bytes as Python reads
them must equal tpconv's. A file torch refuses must be refused by tpconv with
exit 3. Prints one TAP line per file."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'torch'))
import tpc_torch as tt  # noqa: E402


def expected_torch(path):
    """torch.load's tensors; weights_only=False where torch's allow-list
    refuses the file (numpy arrays, BINFLOAT in torch 1.13): these files come
    from public repositories, and tpconv itself never runs pickle code."""
    import torch
    global note
    try:
        obj = torch.load(path, map_location='cpu', weights_only=True)
    except Exception as e:  # noqa: BLE001
        if 'Weights only load failed' not in str(e):
            raise
        obj = torch.load(path, map_location='cpu', weights_only=False)
        note = ' (torch needed weights_only=False)'
    flat = tt.flatten(obj)
    return {k: [tt.torch_dtype_name(v), list(v.shape), tt.tensor_sha(v)] for k, v in flat.items()}


def expected_st(path):
    """{name: [dtype, shape, sha256]} from the header and bytes as written
    (any dtype, torch 1.13 lacks some: U16, U32, U64, F8)."""
    import hashlib
    import struct
    with open(path, 'rb') as f:
        data = f.read()
    n = struct.unpack('<Q', data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    hdr.pop('__metadata__', None)
    out = {}
    for k, v in hdr.items():
        s, e = v['data_offsets']
        out[k] = [tt.ST_TO_TORCH.get(v['dtype'], v['dtype']), list(v['shape']),
                  hashlib.sha256(data[8 + n + s:8 + n + e]).hexdigest()]
    return out


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


note = ''


def check(tpconv, path, n):
    global note
    note = ''
    st = path.endswith('.safetensors')
    try:
        exp = expected_st(path) if st else expected_torch(path)
        exp_err = None
    except Exception as e:  # torch itself refuses it
        exp, exp_err = None, '%s: %s' % (type(e).__name__, str(e).splitlines()[0] if str(e) else '')
    rc, out, err = run([tpconv, 'inspect', '--json', '--hash', path])
    name = os.path.basename(path)
    if exp is None and exp_err.startswith('ModuleNotFoundError'):
        print('ok %d # SKIP %s: torch cannot load it here (%s); tpconv inspect exits %d' % (n, name, exp_err, rc))
        return True
    if exp is None:
        if rc == 3:
            print('ok %d - %s: refused as torch refuses it (%s)' % (n, name, exp_err))
            return True
        print('not ok %d - %s: torch refuses it (%s) but tpconv inspect exits %d' % (n, name, exp_err, rc))
        return False
    if rc != 0:
        print('not ok %d - %s: inspect exit %d: %s' % (n, name, rc, err.strip()[:300]))
        return False
    got, dups = tt.inspect_to_expected(json.loads(out))
    diffs = tt.compare(exp, got, check_hash=True)
    if not diffs and exp:
        with tempfile.TemporaryDirectory() as d:
            o = os.path.join(d, 'out.safetensors')
            rc, _, err = run([tpconv, 'convert', '-q', path, '-o', o])
            if rc != 0:
                diffs.append('convert exit %d: %s' % (rc, err.strip()[:300]))
            else:
                diffs += tt.compare(exp, expected_st(o), check_hash=True)
    if diffs:
        print('not ok %d - %s' % (n, name))
        for d in diffs[:10]:
            print('# ' + d)
        return False
    print('ok %d - %s: %d tensors equal torch%s%s' % (n, name, len(exp), ' (via safetensors too)' if exp else '', note))
    return True


def main():
    tpconv, files = sys.argv[1], sys.argv[2:]
    bad = 0
    for i, f in enumerate(files, 1):
        bad += not check(tpconv, f, i)
    print('1..%d' % len(files))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
