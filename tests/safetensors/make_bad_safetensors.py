#!/usr/bin/env python3
"""Write one handcrafted corrupt safetensors file per failure mode into DIR, and
print a line per file: name<TAB>message the CLI must print<TAB>tensor it must name
(empty when none). Plain Python, no torch needed."""
import json, struct, sys, os

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

def st(header, data=b'', raw_header=None, length=None):
    h = raw_header if raw_header is not None else json.dumps(header, separators=(',', ':')).encode()
    n = len(h) if length is None else length
    return struct.pack('<Q', n) + h + data

T = lambda dt, shape, a, b: {'dtype': dt, 'shape': shape, 'data_offsets': [a, b]}
cases = [
    ('truncated_length', b'\x10\x00\x00', 'too short for the 8-byte safetensors header length', ''),
    ('header_past_eof', st({}, length=1000), 'header length 1000 runs past the end of the file', ''),
    ('header_over_cap', struct.pack('<Q', 100_000_001) + b'{}', 'exceeds the 100000000-byte limit', ''),
    ('invalid_json', st(None, raw_header=b'{"w": {"dtype": "F32",'), 'header is not valid JSON', ''),
    ('unknown_dtype', st({'w': T('F12', [1], 0, 4)}, b'\0' * 4), "unknown dtype 'F12'", 'w'),
    ('size_mismatch', st({'w': T('F32', [2, 3], 0, 20)}, b'\0' * 20), 'needs 24 bytes but data_offsets [0, 20] hold 20', 'w'),
    ('overlap', st({'a': T('F32', [2], 0, 8), 'b': T('F32', [2], 4, 12)}, b'\0' * 12), 'overlap the previous tensor', 'b'),
    ('hole', st({'a': T('F32', [1], 0, 4), 'b': T('F32', [1], 8, 12)}, b'\0' * 12), 'leave a hole', 'b'),
    ('trailing_bytes', st({'a': T('F32', [1], 0, 4)}, b'\0' * 9), '5 unexpected bytes after the last tensor', ''),
    ('truncated_data', st({'a': T('F32', [8], 0, 32)}, b'\0' * 20), 'truncated', 'a'),
    ('duplicate_name', st(None, raw_header=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                                          b'"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', data=b'\0' * 8),
     'duplicate tensor name', 'a'),
    ('nonstring_metadata', st({'__metadata__': {'epoch': 3}}), "__metadata__ value for 'epoch' is not a string", ''),
    ('negative_shape', st({'w': T('F32', [-2], 0, 0)}), 'shape[0] is not an integer', 'w'),
    ('huge_shape', st({'w': T('F32', [2**32, 2**32, 2**32], 0, 0)}), 'shape product overflows', 'w'),
    ('lfs_pointer', b'version https://git-lfs.github.com/spec/v1\noid sha256:' + b'0' * 64 + b'\nsize 4740000000\n',
     'Git LFS pointer', ''),
]
for name, data, msg, tensor in cases:
    with open(os.path.join(out, name + '.safetensors'), 'wb') as f:
        f.write(data)
    print(f'{name}.safetensors\t{msg}\t{tensor}')
