"""Python helpers the tests share (the Python side of tests/lib/tap.sh).

A test script in tests/<feature>/ imports it with

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
    import tpctest

save_safetensors writes a safetensors file as the reference writer lays it
out: the header as compact JSON (insertion order), padded with spaces to a
multiple of 8, then the tensors' bytes back to back in the same order. The
bytes are those every test's own writer wrote before this module, so fixtures
made with it are unchanged. torch is imported only when there is one (the
hostile and corrupt-file generators need none).
"""
import json
import struct

try:
    import torch
except ImportError:  # pragma: no cover - the callers that need torch skip first
    torch = None

if torch is not None:
    ST_DTYPES = {'F64': torch.float64, 'F32': torch.float32, 'F16': torch.float16,
                 'BF16': torch.bfloat16, 'I64': torch.int64, 'I32': torch.int32,
                 'I16': torch.int16, 'I8': torch.int8, 'U8': torch.uint8, 'BOOL': torch.bool}
    ST_NAMES = {v: k for k, v in ST_DTYPES.items()}
else:
    ST_DTYPES, ST_NAMES = {}, {}


def tensor_bytes(t):
    """The bytes of tensor t in memory order (bf16, which numpy lacks, as its bits)."""
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def safetensors_bytes(tensors, metadata={'format': 'pt'}):
    """The whole file for {name: tensor or (dtype name, shape, bytes)}; no
    __metadata__ entry when metadata is None."""
    header, blobs, off = ({} if metadata is None else {'__metadata__': metadata}), [], 0
    for k, v in tensors.items():
        if isinstance(v, tuple):
            dt, shape, b = v
        else:
            dt, shape, b = ST_NAMES[v.dtype], list(v.shape), tensor_bytes(v)
        header[k] = {'dtype': dt, 'shape': shape, 'data_offsets': [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    return struct.pack('<Q', len(h)) + h + b''.join(blobs)


def save_safetensors(path, tensors, metadata={'format': 'pt'}):
    """Write safetensors_bytes(tensors, metadata) to path."""
    with open(path, 'wb') as f:
        f.write(safetensors_bytes(tensors, metadata))


def read_safetensors(path):
    """A safetensors file's tensors in header order, __metadata__ left out:
    {name: (dtype name, shape, raw bytes)}."""
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    return {k: (v['dtype'], v['shape'], data[v['data_offsets'][0]:v['data_offsets'][1]])
            for k, v in hdr.items() if k != '__metadata__'}


def load_safetensors(path):
    """The same as torch tensors (their own memory; empty ones too)."""
    out = {}
    for k, (dt, shape, raw) in read_safetensors(path).items():
        t = ST_DTYPES[dt]
        out[k] = torch.frombuffer(bytearray(raw), dtype=t).reshape(shape) if raw else torch.zeros(shape, dtype=t)
    return out

