"""Shared helpers for the torch interop tests (tests/torch_*_test.sh).

The parts that need torch import it lazily, so compare_inspect.py runs on any
python3. Conventions follow ../shared/corpus/README.md: tensor names are the
flattened dotted keys of the loaded object, each tensor is [torch dtype name,
shape, sha256 of its C-contiguous little-endian bytes]; quantized tensors are
["quantized:<dtype>", shape, None].
"""
import hashlib
import json
import struct

# tpconv (safetensors-style) dtype names -> torch dtype names.
ST_TO_TORCH = {
    'BOOL': 'bool', 'U8': 'uint8', 'I8': 'int8', 'I16': 'int16', 'U16': 'uint16',
    'F16': 'float16', 'BF16': 'bfloat16', 'I32': 'int32', 'U32': 'uint32',
    'F32': 'float32', 'C64': 'complex64', 'F64': 'float64', 'I64': 'int64',
    'U64': 'uint64', 'F8_E5M2': 'float8_e5m2', 'F8_E4M3': 'float8_e4m3fn',
}
TORCH_TO_ST = {v: k for k, v in ST_TO_TORCH.items()}
QUANT = {'qint8', 'quint8', 'qint32', 'quint4x2', 'quint2x4'}


def tpc_dtype_to_torch(t):
    """dtype of one tensor of `tpconv inspect --json` as a torch name."""
    d = t.get('dtype')
    name = ST_TO_TORCH.get(d, d)
    if t.get('quantized') or name in QUANT:
        return 'quantized:' + name
    return name


def inspect_to_expected(doc):
    """`tpconv inspect --json --hash` object -> {name: [torch dtype, shape, sha]}"""
    out = {}
    dups = []
    for t in doc.get('tensors', []):
        if t['name'] in out:
            dups.append(t['name'])
        dt = tpc_dtype_to_torch(t)
        out[t['name']] = [dt, list(t.get('shape', [])), t.get('sha256')]
    return out, dups


def compare(expected, got, check_hash=True, check_order=None):
    """Compare two {name: [dtype, shape, sha]} maps. Returns a list of
    human-readable differences (empty when equal). Quantized tensors are
    compared without hash. check_order: a list of names in the wanted order."""
    diffs = []
    missing = [n for n in expected if n not in got]
    extra = [n for n in got if n not in expected]
    if missing:
        diffs.append('missing %d: %s' % (len(missing), ', '.join(map(repr, missing[:12]))))
    if extra:
        diffs.append('unexpected %d: %s' % (len(extra), ', '.join(map(repr, extra[:12]))))
    nbad = 0
    for n, e in expected.items():
        if n not in got:
            continue
        g = got[n]
        why = []
        if e[0] != g[0]:
            why.append('dtype %s, wanted %s' % (g[0], e[0]))
        if list(e[1]) != list(g[1]):
            why.append('shape %s, wanted %s' % (g[1], e[1]))
        if check_hash and not e[0].startswith('quantized:') and e[2] is not None and e[2] != g[2]:
            why.append('sha256 %s, wanted %s' % ((g[2] or 'none')[:16], e[2][:16]))
        if why:
            nbad += 1
            if nbad <= 12:
                diffs.append('%r: %s' % (n, '; '.join(why)))
    if nbad > 12:
        diffs.append('... %d tensors differ in all' % nbad)
    if check_order is not None and not missing and not extra:
        order = [n for n in got]
        if order != list(check_order):
            i = next(i for i, (a, b) in enumerate(zip(order, check_order)) if a != b)
            diffs.append('order differs at %d: %r, wanted %r' % (i, order[i], check_order[i]))
    return diffs


# ---------------------------------------------------------------- torch side

def torch_dtype_name(t):
    import torch
    name = str(t.dtype).replace('torch.', '')
    if t.is_quantized:
        return 'quantized:' + name
    return name


def tensor_array(t):
    """C-contiguous numpy array over the tensor's little-endian bytes (no copy
    when the tensor is contiguous already)."""
    import torch
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    a = t.numpy()
    return a if a.dtype.byteorder != '>' else a.byteswap()


def tensor_bytes(t):
    """C-contiguous little-endian bytes of a (non-quantized) CPU tensor."""
    return tensor_array(t).tobytes()


def tensor_sha(t):
    if t.is_quantized:
        return None
    a = tensor_array(t)
    h = hashlib.sha256()
    if a.size:
        h.update(a.reshape(-1).view('u1'))
    return h.hexdigest()


def flatten(obj, prefix='', out=None):
    """{dotted name: tensor} in the order torch.load returns them."""
    import torch
    if out is None:
        out = {}
    if isinstance(obj, torch.Tensor):
        out[prefix] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, '%s.%s' % (prefix, k) if prefix else str(k), out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flatten(v, '%s.%d' % (prefix, i) if prefix else str(i), out)
    return out


def describe(obj):
    """{name: [dtype, shape, sha]} for a loaded object (expected_torch.json style)."""
    return {n: [torch_dtype_name(t), list(t.shape), tensor_sha(t)] for n, t in flatten(obj).items()}


def bits(t):
    """A tensor whose torch.equal is bitwise equality of t (NaN-safe)."""
    import torch
    t = t.detach().cpu()
    if t.is_quantized:
        return t.int_repr()
    if t.is_complex():
        t = torch.view_as_real(t.contiguous() if t.dim() == 0 else t)
    if t.is_floating_point():
        ity = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
        return t.contiguous().view(ity)
    return t


def tensor_diff(a, b):
    """None if equal in dtype, shape and bits, else a reason."""
    import torch
    if a.dtype != b.dtype:
        return 'dtype %s vs %s' % (a.dtype, b.dtype)
    if a.shape != b.shape:
        return 'shape %s vs %s' % (list(a.shape), list(b.shape))
    if a.is_quantized != b.is_quantized:
        return 'quantized %s vs %s' % (a.is_quantized, b.is_quantized)
    if a.is_quantized:
        if a.qscheme() != b.qscheme():
            return 'qscheme differs'
        if a.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            if a.q_scale() != b.q_scale() or a.q_zero_point() != b.q_zero_point():
                return 'quantizer parameters differ'
        else:
            if (not torch.equal(a.q_per_channel_scales(), b.q_per_channel_scales())
                    or not torch.equal(a.q_per_channel_zero_points(), b.q_per_channel_zero_points())
                    or a.q_per_channel_axis() != b.q_per_channel_axis()):
                return 'per-channel quantizer parameters differ'
    if not torch.equal(bits(a), bits(b)):
        return 'values differ'
    return None


def tree_diff(a, b, path='', strict_types=True, out=None, tensor_types_equal=True, check_order=True):
    """Recursive comparison of two torch.load results: dict keys and their order,
    tensor dtype/shape/bits, non-tensor values and their types (dict versus
    OrderedDict too), the _metadata attribute of state dicts. Parameter and
    Tensor are both tensors (tensor_types_equal=False tells them apart)."""
    import torch
    if out is None:
        out = []
    where = path or '<root>'
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            out.append('%s: %s vs %s' % (where, type(a).__name__, type(b).__name__))
            return out
        if not tensor_types_equal and (type(a) is not type(b) or a.requires_grad != b.requires_grad):
            out.append('%s: %s(requires_grad=%s) vs %s(requires_grad=%s)'
                       % (where, type(a).__name__, a.requires_grad, type(b).__name__, b.requires_grad))
        d = tensor_diff(a, b)
        if d:
            out.append('%s: %s' % (where, d))
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        if strict_types and check_order and type(a) is not type(b):
            out.append('%s: type %s vs %s' % (where, type(a).__name__, type(b).__name__))
        # nn.Module.state_dict() keeps per-module versions in an attribute
        ma, mb = getattr(a, '_metadata', None), getattr(b, '_metadata', None)
        if ma != mb:
            out.append('%s: _metadata %s vs %s' % (where, _short(ma), _short(mb)))
        ka, kb = list(a.keys()), list(b.keys())
        if ka != kb:
            if set(ka) == set(kb) and not check_order:
                pass
            elif set(ka) == set(kb):
                out.append('%s: same keys, different order: %r vs %r' % (where, ka[:8], kb[:8]))
            else:
                out.append('%s: keys differ: only in source %r, only in result %r'
                           % (where, [k for k in ka if k not in b][:8], [k for k in kb if k not in a][:8]))
        for k in ka:
            if k in b:
                tree_diff(a[k], b[k], '%s.%s' % (path, k) if path else str(k), strict_types, out,
                          tensor_types_equal, check_order)
        return out
    if strict_types and type(a) is not type(b):
        out.append('%s: type %s vs %s (%r vs %r)' % (where, type(a).__name__, type(b).__name__,
                                                     _short(a), _short(b)))
        return out
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            out.append('%s: length %d vs %d' % (where, len(a), len(b)))
            return out
        for i, (x, y) in enumerate(zip(a, b)):
            tree_diff(x, y, '%s.%d' % (path, i) if path else str(i), strict_types, out, tensor_types_equal,
                      check_order)
        return out
    if isinstance(a, float) and isinstance(b, float):
        if struct.pack('<d', a) != struct.pack('<d', b):
            out.append('%s: %r vs %r' % (where, a, b))
        return out
    if a != b:
        out.append('%s: %r vs %r' % (where, _short(a), _short(b)))
    return out


def _short(v):
    r = repr(v)
    return r if len(r) < 60 else r[:57] + '...'


def load(path, weights_only=True):
    import torch
    return torch.load(path, map_location='cpu', weights_only=weights_only)


def read_safetensors(path):
    """{name: tensor} and __metadata__ of a safetensors file, in header order,
    read with plain struct/json (no safetensors package in bookworm)."""
    import torch
    with open(path, 'rb') as f:
        data = f.read()
    n = struct.unpack('<Q', data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    meta = hdr.pop('__metadata__', None)
    dt = {'BOOL': torch.bool, 'U8': torch.uint8, 'I8': torch.int8, 'I16': torch.int16,
          'F16': torch.float16, 'BF16': torch.bfloat16, 'I32': torch.int32, 'F32': torch.float32,
          'C64': torch.complex64, 'F64': torch.float64, 'I64': torch.int64}
    out = {}
    base = 8 + n
    for name, info in hdr.items():
        s, e = info['data_offsets']
        if info['dtype'] not in dt:
            out[name] = ('unsupported', info['dtype'])
            continue
        raw = bytearray(data[base + s:base + e])
        t = torch.frombuffer(raw, dtype=dt[info['dtype']]) if raw else torch.empty(0, dtype=dt[info['dtype']])
        out[name] = t.reshape(info['shape'])
    return out, meta
