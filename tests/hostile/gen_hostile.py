#!/usr/bin/env python3
"""Hostile and broken checkpoints, one per attack or failure mode (issue 7).

usage: gen_hostile.py DIR     writes the files into DIR and prints one case per
                              line: file<TAB>args<TAB>exit<TAB>stderr substring
                              ("@" in args is the file; "-" = no substring)

Plain Python 3, no torch: every byte is written by hand (pickle opcodes, zip
records), so the files say exactly what each case claims. Nothing here is ever
unpickled by Python. seed_pickles() and seed_zips() hand the same inputs to
tests/fuzz/make_seeds.py as fuzz seeds.
"""
import os
import struct
import sys
import zipfile
import zlib

# ---------------------------------------------------------------- pickles --
P2 = b'\x80\x02'
MARK, STOP, TUPLE, TUPLE1, TUPLE2, TUPLE3 = b'(', b'.', b't', b'\x85', b'\x86', b'\x87'
EMPTY_TUPLE, EMPTY_LIST, EMPTY_DICT = b')', b']', b'}'
REDUCE, BUILD, SETITEM, SETITEMS, APPEND = b'R', b'b', b's', b'u', b'a'
NONE, NEWFALSE, NEWTRUE, BINPERSID = b'N', b'\x89', b'\x88', b'Q'


def G(mod, name):
    return b'c' + mod.encode() + b'\n' + name.encode() + b'\n'


def S(s):
    b = s.encode() if isinstance(s, str) else s
    return b'X' + struct.pack('<I', len(b)) + b


def I(v):
    if 0 <= v < 256:
        return b'K' + bytes([v])
    if 0 <= v < 65536:
        return b'M' + struct.pack('<H', v)
    if -2**31 <= v < 2**31:
        return b'J' + struct.pack('<i', v)
    n = (v.bit_length() + 8) // 8
    return b'\x8a' + bytes([n]) + v.to_bytes(n, 'little', signed=True)


def T(*items):
    return MARK + b''.join(items) + TUPLE


def odict():
    return G('collections', 'OrderedDict') + EMPTY_TUPLE + REDUCE


def pid(key, numel, cls='FloatStorage'):
    return T(S('storage'), G('torch', cls), S(key), S('cpu'), I(numel)) + BINPERSID


def tensor(key='0', numel=4, off=0, size=(4,), stride=(1,), cls='FloatStorage'):
    return (G('torch._utils', '_rebuild_tensor_v2') +
            T(pid(key, numel, cls), I(off), T(*map(I, size)), T(*map(I, stride)), NEWFALSE, odict()) +
            REDUCE)


def state(*kv):
    """{'k': v, ...} as EMPTY_DICT MARK k v ... SETITEMS."""
    body = b''.join(S(k) + v for k, v in kv)
    return EMPTY_DICT + (MARK + body + SETITEMS if kv else b'')


def pk(body):
    return P2 + body + STOP


# ---------------------------------------------------------------- containers --
def torch_zip(data_pkl, records=None, prefix='archive', method=zipfile.ZIP_STORED):
    """A torch.save-like zip written by Python's zipfile (torch reads those)."""
    import io
    buf = io.BytesIO()
    records = {'0': b'\0' * 16} if records is None else records
    with zipfile.ZipFile(buf, 'w', method) as z:
        z.writestr(prefix + '/data.pkl', data_pkl)
        for k, v in records.items():
            z.writestr(prefix + '/data/' + k, v)
        z.writestr(prefix + '/version', b'3\n')
    return buf.getvalue()


def lh(name, data, method=0, flags=0, crc=None, csize=None, usize=None, extra=b''):
    """A local file header + payload."""
    crc = zlib.crc32(data) if crc is None else crc
    return (struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, flags, method, 0, 0, crc,
                        len(data) if csize is None else csize, len(data) if usize is None else usize,
                        len(name), len(extra)) + name + extra + data)


def cd(name, off, data, method=0, flags=0, crc=None, csize=None, usize=None, extra=b''):
    crc = zlib.crc32(data) if crc is None else crc
    return (struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, flags, method, 0, 0, crc,
                        len(data) if csize is None else csize, len(data) if usize is None else usize,
                        len(name), len(extra), 0, 0, 0, 0, off) + name + extra)


def eocd(n, cd_size, cd_off):
    return struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, n, n, cd_size, cd_off, 0)


def zip64_end(n, cd_size, cd_off, at):
    rec = struct.pack('<IQHHIIQQQQ', 0x06064b50, 44, 45, 45, 0, 0, n, n, cd_size, cd_off)
    loc = struct.pack('<IIQI', 0x07064b50, 0, at, 1)
    return rec + loc


def raw_zip(entries, zip64=None, cd_override=None):
    """entries: list of dicts (name, data, and lh/cd overrides). Returns bytes."""
    out, cds = b'', b''
    for e in entries:
        off = e.get('offset', len(out))
        name = e['name'].encode()
        l = lh(name, e['data'], **e.get('lh', {}))
        if 'offset' not in e:
            out += l
        cds += cd(name, off, e['data'], **e.get('cd', {}))
    cd_off = len(out)
    n = len(entries)
    tail = b''
    if zip64 is not None:
        tail = zip64_end(zip64.get('n', n), len(cds), cd_off, cd_off + len(cds))
        return out + cds + tail + eocd(0xffff, 0xffffffff, 0xffffffff)
    return out + cds + eocd(n, len(cds), cd_off)


OK_PKL = pk(odict() + MARK + S('w') + tensor() + SETITEMS)


def ok_records():
    return [{'name': 'archive/data.pkl', 'data': OK_PKL},
            {'name': 'archive/data/0', 'data': b'\0' * 16},
            {'name': 'archive/version', 'data': b'3\n'}]


# ---------------------------------------------------------------- safetensors --
def st(header, data=b'', length=None):
    import json
    h = header if isinstance(header, bytes) else json.dumps(header, separators=(',', ':')).encode()
    return struct.pack('<Q', len(h) if length is None else length) + h + data


# ---------------------------------------------------------------- the cases --
def gguf(kvs=(), tensors=(), data=b'', version=3, n_kv=None, n_t=None, align=32, magic=b'GGUF'):
    """A GGUF file: kvs are raw (key, type, value bytes), tensors (name, dims,
    type, offset) with dims in ne order."""
    def s(b):
        return struct.pack('<Q', len(b)) + b
    out = magic + struct.pack('<IQQ', version, len(tensors) if n_t is None else n_t, len(kvs) if n_kv is None else n_kv)
    for k, t, v in kvs:
        out += s(k) + struct.pack('<i', t) + v
    for name, dims, ty, off in tensors:
        out += s(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims)
        out += struct.pack('<iQ', ty, off)
    out += b'\0' * ((-len(out)) % align)
    return out + data


def gguf_cases():
    """(name, bytes, args, exit, stderr substring): hostile GGUF headers."""
    F32 = 0
    s8 = lambda b: struct.pack('<Q', len(b)) + b
    arch = (b'general.architecture', 8, s8(b'llama'))
    good_t = [(b'w', [4], F32, 0)]
    return [
        ('bad_version', gguf(version=1), 'inspect @', 3, 'GGUF version 1 is not supported'),
        ('lying_n_kv', gguf(n_kv=1 << 60), 'inspect @', 3, 'KVs cannot fit the'),
        ('lying_n_tensors', gguf([arch], n_t=1 << 59), 'inspect @', 3, 'tensors cannot fit the'),
        ('huge_key', b'GGUF' + struct.pack('<IQQQ', 3, 0, 1, 1 << 62) + b'\0' * 16, 'inspect @', 3,
         'a key of 4611686018427387904 bytes runs past the end of the file'),
        ('huge_string', gguf([(b'k', 8, struct.pack('<Q', 1 << 40))]), 'inspect @', 3,
         'a string value of 1099511627776 bytes runs past the end'),
        ('huge_array', gguf([(b'k', 9, struct.pack('<iQ', 4, 1 << 50))]), 'inspect @', 3,
         'array of 1125899906842624 elements of 4 bytes runs past the end'),
        ('huge_str_array', gguf([(b'k', 9, struct.pack('<iQ', 8, 1 << 50))]), 'inspect @', 3,
         'array of 1125899906842624 strings cannot fit'),
        ('array_of_arrays', gguf([(b'k', 9, struct.pack('<iQ', 9, 1))]), 'inspect @', 3, 'arrays of arrays are not supported'),
        ('unknown_value_type', gguf([(b'k', 77, b'')]), 'inspect @', 3, "key 'k': unknown value type 77"),
        ('duplicate_key', gguf([arch, arch]), 'inspect @', 3, "duplicate key 'general.architecture'"),
        ('bad_bool', gguf([(b'k', 7, b'\x05')]), 'inspect @', 3, "key 'k': bool value 5"),
        ('nul_in_key', gguf([(b'a\0b', 4, b'\0' * 4)]), 'inspect @', 3, 'a key is holding a NUL byte'),
        ('bad_alignment', gguf([(b'general.alignment', 4, struct.pack('<I', 3))], good_t, b'\0' * 16), 'inspect @', 3,
         'general.alignment must be a u32 power of two'),
        ('unknown_tensor_type', gguf([arch], [(b'w', [4], 99, 0)], b'\0' * 32), 'inspect @', 3,
         "tensor 'w'", ),
        ('too_many_dims', gguf([arch], [(b'w', [1, 1, 1, 1, 1], F32, 0)], b'\0' * 32), 'inspect @', 3,
         '5 dimensions (GGUF allows 1 to 4)'),
        ('ne_overflow', gguf([arch], [(b'w', [1 << 40, 1 << 40], F32, 0)], b'\0' * 32), 'inspect @', 3, 'shape overflows'),
        ('ne0_not_block', gguf([arch], [(b'w', [33], 8, 0)], b'\0' * 64), 'inspect @', 3,
         'ne[0] = 33 is not a multiple of the Q8_0 block (32)'),
        ('misaligned_offset', gguf([arch], [(b'w', [4], F32, 0), (b'v', [4], F32, 16)], b'\0' * 64), 'inspect @', 3,
         'data offset 16, expected 32'),
        ('overlapping_offset', gguf([arch], [(b'w', [16], F32, 0), (b'v', [4], F32, 32)], b'\0' * 128), 'inspect @', 3,
         'data offset 32, expected 64'),
        ('offset_past_file', gguf([arch], [(b'w', [4], F32, 1 << 40)], b'\0' * 16), 'inspect @', 3, 'data offset'),
        ('data_truncated', gguf([arch], [(b'w', [64], F32, 0)], b'\0' * 16), 'inspect @', 3,
         'data (256 bytes) runs past the end of the file'),
        ('duplicate_tensor', gguf([arch], [(b'w', [8], F32, 0), (b'w', [8], F32, 32)], b'\0' * 64), 'inspect @', 3,
         "tensor 'w'"),
        ('truncated_header', gguf([arch], good_t, b'\0' * 16)[:40], 'inspect @', 3, '1 tensors cannot fit the 16 bytes left'),
        ('truncated_info', gguf([arch], good_t, b'\0' * 16)[:90], 'inspect @', 3, "tensor 'w': file ends inside a tensor's"),
        ('split_lies', gguf([arch, (b'split.count', 2, struct.pack('<H', 3))], good_t, b'\0' * 16), 'inspect @', 3,
         'a file of a gguf-split set (split.count 3)'),
    ]


def pickle_cases():
    """(name, pickle bytes, args, exit, stderr substring) with the pickle as data.pkl."""
    deep = 10**6
    return [
        # code execution attempts: refused by name, never run
        ('os_system', pk(G('os', 'system') + T(S('touch PWNED')) + REDUCE), 'inspect @', 3,
         "refusing global 'os.system': it can run code or reach the system"),
        ('posix_system', pk(G('posix', 'system') + T(S('touch PWNED')) + REDUCE), 'inspect @', 3,
         "refusing global 'posix.system'"),
        ('nt_system', pk(G('nt', 'system') + T(S('touch PWNED')) + REDUCE), 'inspect @', 3,
         "refusing global 'nt.system'"),
        ('builtins_eval', pk(G('builtins', 'eval') + T(S("__import__('os').system('touch PWNED')")) + REDUCE),
         'inspect @', 3, "refusing global 'builtins.eval'"),
        ('py2_builtin_eval', pk(G('__builtin__', 'eval') + T(S('1')) + REDUCE), 'inspect @', 3,
         "refusing global 'builtins.eval'"),
        ('builtins_exec', pk(G('builtins', 'exec') + T(S('import os')) + REDUCE), 'convert @ -o @.out.safetensors', 3,
         "refusing global 'builtins.exec'"),
        ('builtins_getattr', pk(G('builtins', 'getattr') + T(G('builtins', 'object'), S('__subclasses__')) + REDUCE),
         'inspect @', 3, "uses builtins.getattr other than as getattr(class, 'member')"),
        ('subprocess_popen', pk(G('subprocess', 'Popen') + T(T(S('touch'), S('PWNED'))) + REDUCE), 'inspect @', 3,
         "refusing global 'subprocess.Popen'"),
        ('subprocess_check_output', pk(G('subprocess', 'check_output') + T(S('id')) + REDUCE), 'inspect @', 3,
         "refusing global 'subprocess.check_output'"),
        ('stack_global_os', pk(S('os') + S('system') + b'\x93' + T(S('id')) + REDUCE), 'inspect @', 3,
         "refusing global 'os.system'"),
        ('os_path_submodule', pk(G('os.path', 'join') + T(S('a')) + REDUCE), 'inspect @', 3,
         "refusing global 'os.path.join'"),
        # the safetensors attacks/ ACE: eval reached through a dict subclass's __reduce__
        ('reduce_in_state_dict', pk(odict() + MARK + S('w') + tensor() + S('evil') +
                                    G('builtins', 'eval') + T(S('print(1)')) + REDUCE + SETITEMS),
         'convert @ -o @.out.safetensors', 3, "refusing global 'builtins.eval'"),
        ('torch_load_nested', pk(G('torch', 'load') + T(S('other.pt')) + REDUCE), 'inspect @', 3,
         "refusing global 'torch.load'"),
        # --globals lists them instead, flagged, and still runs nothing
        ('globals_flags_os_system', pk(odict() + MARK + S('w') + tensor() + S('x') +
                                       G('os', 'system') + T(S('touch PWNED')) + REDUCE + SETITEMS),
         'inspect --globals @', 3, 'references 1 dangerous global', 'os.system                                                     1  DANGEROUS (never executed)'),
        # __reduce__ of unknown classes: an opaque value by default, refused with --strict
        ('unknown_class', pk(odict() + MARK + S('w') + tensor() + S('cfg') +
                             G('mymodule.evil', 'Payload') + T(S('arg')) + REDUCE + SETITEMS),
         'inspect --strict @', 3, "global 'mymodule.evil.Payload' is not on the allow-list"),
        ('unknown_class_default', pk(odict() + MARK + S('w') + tensor() + S('cfg') +
                                     G('mymodule.evil', 'Payload') + T(S('arg')) + REDUCE + SETITEMS),
         'inspect @', 0, '-'),
        ('unknown_newobj', pk(G('mymodule', 'Cls') + EMPTY_TUPLE + b'\x81' + state(('a', I(1))) + BUILD),
         'inspect --strict @', 3, "global 'mymodule.Cls' is not on the allow-list"),
        # type confusion in container opcodes
        ('build_on_list', pk(EMPTY_LIST + state(('a', I(1))) + BUILD), 'inspect @', 3,
         'BUILD'),
        ('build_on_int', pk(I(7) + state(('__class__', I(1))) + BUILD), 'inspect @', 3, 'BUILD'),
        # BUILD on a tensor is legal (torch's allow-list permits it: tensor attributes)
        ('build_on_tensor', pk(tensor() + state(('x', I(1))) + BUILD), 'inspect @', 0, '-'),
        ('setitem_on_list', pk(EMPTY_LIST + S('k') + I(1) + SETITEM), 'inspect @', 3, 'SETITEM'),
        ('setitem_on_tuple', pk(EMPTY_TUPLE + S('k') + I(1) + SETITEM), 'inspect @', 3, 'SETITEM'),
        ('setitems_on_str', pk(S('abc') + MARK + S('k') + I(1) + SETITEMS), 'inspect @', 3, 'SETITEMS'),
        ('append_on_dict', pk(EMPTY_DICT + I(1) + APPEND), 'inspect @', 3, 'APPEND'),
        ('setitem_unhashable_key', pk(EMPTY_DICT + EMPTY_LIST + I(1) + SETITEM), 'inspect @', 3, 'SETITEM'),
        # memo and stack
        ('memo_unset_binget', pk(b'h\x05'), 'inspect @', 3, 'BINGET'),
        ('memo_unset_long_binget', pk(b'j\xff\xff\xff\x00'), 'inspect @', 3, 'LONG_BINGET'),
        ('memo_huge_put', pk(I(1) + b'r\xff\xff\xff\xff'), 'inspect @', 3, 'LONG_BINPUT'),
        ('stack_underflow_reduce', pk(REDUCE), 'inspect @', 3, 'REDUCE'),
        ('stack_underflow_tuple2', pk(I(1) + TUPLE2), 'inspect @', 3, 'TUPLE2'),
        ('stack_underflow_setitem', pk(EMPTY_DICT + S('k') + SETITEM), 'inspect @', 3, 'SETITEM'),
        ('stop_on_empty_stack', P2 + STOP, 'inspect @', 3, 'STOP'),
        ('tuple_without_mark', pk(I(1) + TUPLE), 'inspect @', 3, 'TUPLE'),
        ('no_stop', P2 + EMPTY_DICT, 'inspect @', 3, 'STOP'),
        # depth and size bombs
        ('million_marks', P2 + MARK * deep + STOP, 'inspect @', 3, 'MARK'),
        ('million_nested_tuples', P2 + EMPTY_TUPLE + TUPLE1 * deep + STOP, 'inspect @', 3, 'nest'),
        ('nested_lists', P2 + EMPTY_LIST * 200000 + APPEND * 199999 + STOP, 'inspect @', 3, 'nest'),
        ('nested_dicts', P2 + (EMPTY_DICT + S('k')) * 200000 + EMPTY_DICT + SETITEM * 200000 + STOP,
         'inspect @', 3, 'nest'),
        ('billion_laughs', P2 + S('lol') + b'q\x00' + b''.join(
            MARK + (b'h' + bytes([i])) * 10 + TUPLE + b'q' + bytes([i + 1]) for i in range(30)) + STOP,
         'inspect @', 3, 'tree'),
        ('long1_huge_len', pk(b'\x8a\xff' + b'\x01' * 10), 'inspect @', 3, 'LONG1'),
        ('long4_huge_len', pk(b'\x8b\xff\xff\xff\x7f' + b'\x01' * 10), 'inspect @', 3, 'LONG4'),
        ('long4_negative_len', pk(b'\x8b\xff\xff\xff\xff' + b'\x01' * 10), 'inspect @', 3, 'LONG4'),
        ('binunicode_huge_len', pk(b'X\xff\xff\xff\xff' + b'abc'), 'inspect @', 3, 'BINUNICODE'),
        ('binunicode8_huge_len', pk(b'\x8d' + struct.pack('<Q', 2**63) + b'abc'), 'inspect @', 3, 'BINUNICODE8'),
        ('binbytes8_huge_len', pk(b'\x8e' + struct.pack('<Q', 2**64 - 1) + b'abc'), 'inspect @', 3, 'BINBYTES8'),
        ('frame_huge_len', P2 + b'\x95' + struct.pack('<Q', 2**62) + EMPTY_DICT + STOP, 'inspect @', 3, '-'),
        # persistent ids of the wrong shape
        ('pid_is_string', pk(G('torch._utils', '_rebuild_tensor_v2') + T(S('storage') + BINPERSID, I(0), T(I(4)), T(I(1)),
                                                                      NEWFALSE, odict()) + REDUCE),
         'inspect @', 3, "persistent id is not a ('storage', class, key, location, numel) tuple"),
        ('pid_short_tuple', pk(T(S('storage'), G('torch', 'FloatStorage'), S('0')) + BINPERSID), 'inspect @', 3,
         "persistent id is not a ('storage', class, key, location, numel) tuple"),
        ('pid_wrong_tag', pk(T(S('module'), G('torch', 'FloatStorage'), S('0'), S('cpu'), I(4)) + BINPERSID),
         'inspect @', 3, "persistent id is not a ('storage', class, key, location, numel) tuple"),
        ('pid_class_not_global', pk(T(S('storage'), S('FloatStorage'), S('0'), S('cpu'), I(4)) + BINPERSID),
         'inspect @', 3, 'malformed storage persistent id'),
        ('pid_negative_numel', pk(T(S('storage'), G('torch', 'FloatStorage'), S('0'), S('cpu'), I(-4)) + BINPERSID),
         'inspect @', 3, 'malformed storage persistent id'),
        ('pid_unknown_storage_class', pk(T(S('storage'), G('torch', 'EvilStorage'), S('0'), S('cpu'), I(4)) + BINPERSID),
         'inspect @', 3, "unknown storage class 'torch.EvilStorage'"),
        ('pid_missing_record', pk(odict() + MARK + S('w') + tensor(key='7') + SETITEMS), 'inspect @', 3,
         "storage '7' has no record 'archive/data/7' in the archive"),
        ('pid_key_traversal', pk(odict() + MARK + S('w') + tensor(key='../../etc/passwd') + SETITEMS), 'inspect @', 3,
         "has no record"),
        ('pid_key_too_long', pk(odict() + MARK + S('w') + tensor(key='k' * 1000) + SETITEMS), 'inspect @', 3,
         'is longer than 594 bytes'),
        ('pid_dtype_clash', pk(odict() + MARK + S('a') + tensor() + S('b') + tensor(cls='LongStorage', numel=2, size=(2,))
                               + SETITEMS), 'inspect @', 3, "storage '0' is used as both"),
        # storages and views
        ('numel_over_record', pk(odict() + MARK + S('w') + tensor(numel=1000, size=(1000,)) + SETITEMS), 'inspect @', 3,
         'storage'),
        ('numel_over_record_u64', pk(odict() + MARK + S('w') + tensor(numel=2**62, size=(4,)) + SETITEMS), 'inspect @', 3,
         "storage '0' size overflows"),
        ('view_past_storage', pk(odict() + MARK + S('w') + tensor(off=2, size=(4,)) + SETITEMS), 'inspect @', 3,
         "lies outside its storage"),
        ('view_stride_past_storage', pk(odict() + MARK + S('w') + tensor(size=(2, 2), stride=(3, 1)) + SETITEMS),
         'inspect @', 3, 'lies outside its storage'),
        ('view_huge_offset', pk(odict() + MARK + S('w') + tensor(off=2**62, size=(1,)) + SETITEMS), 'inspect @', 3,
         '-'),
        ('negative_size', pk(odict() + MARK + S('w') + tensor(size=(-1,)) + SETITEMS), 'inspect @', 3,
         'negative size or stride in dimension 0'),
        ('negative_stride', pk(odict() + MARK + S('w') + tensor(size=(2, 2), stride=(-2, 1)) + SETITEMS), 'inspect @', 3,
         'negative size or stride in dimension 0'),
        ('negative_offset', pk(odict() + MARK + S('w') + tensor(off=-1, size=(1,)) + SETITEMS), 'inspect @', 3, '-'),
        ('size_product_overflow', pk(odict() + MARK + S('w') + tensor(size=(2**32, 2**32, 2**32), stride=(0, 0, 0))
                                     + SETITEMS), 'inspect @', 3, 'shape product overflows'),
        ('size_stride_overflow', pk(odict() + MARK + S('w') + tensor(size=(2, 2), stride=(2**62, 2**62)) + SETITEMS),
         'inspect @', 3, 'data ends at 0xffffffffffffffff'),
        ('zero_dim_huge_others', pk(odict() + MARK + S('w') + tensor(size=(0, 2**40, 2**40), stride=(1, 1, 1)) + SETITEMS),
         'inspect @', 3, '-'),
        ('size_stride_mismatch', pk(odict() + MARK + S('w') + tensor(size=(2, 2), stride=(1,)) + SETITEMS), 'inspect @', 3,
         'tensor size has 2 dimensions but stride has 1'),
        ('size_not_int', pk(G('torch._utils', '_rebuild_tensor_v2') + T(pid('0', 4), I(0), T(S('4')), T(I(1)), NEWFALSE,
                                                                       odict()) + REDUCE), 'inspect @', 3, 'size'),
        ('ndim_65', pk(odict() + MARK + S('w') + tensor(size=(1,) * 65, stride=(1,) * 65) + SETITEMS), 'inspect @', 3,
         'tensor size is not a tuple of at most 64 integers'),
    ]


def pickle_seeds():
    return [(n, p) for n, p, *_ in pickle_cases() if len(p) < 4096]


def zip_cases():
    """(name, bytes, args, exit, substring)."""
    out = []
    good = raw_zip(ok_records())
    # deflate bomb: 16 bytes of tensor data claimed; 256 MiB of zeros inflate from ~256 KiB
    bomb = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = b'\0' * (1 << 20)
    comp = b''.join(bomb.compress(chunk) for _ in range(256)) + bomb.flush()
    ent = ok_records()
    ent[1] = {'name': 'archive/data/0', 'data': comp,
              'lh': {'method': 8, 'crc': 0, 'usize': 16}, 'cd': {'method': 8, 'crc': 0, 'usize': 16}}
    out.append(('deflate_bomb_lying_size', raw_zip(ent), 'inspect --hash @', 3, 'archive/data/0'))
    ent[1] = {'name': 'archive/data/0', 'data': comp,
              'lh': {'method': 8, 'crc': 0, 'usize': 256 << 20}, 'cd': {'method': 8, 'crc': 0, 'usize': 256 << 20}}
    out.append(('deflate_bomb_honest_size', raw_zip(ent), 'convert @ -o @.out.safetensors', 3,
                'refusing to inflate more than the storage holds (a zip bomb?)'))
    # the same bomb as data.pkl: bounded by TPCONV_INFLATE_CAP
    ent = ok_records()
    ent[0] = {'name': 'archive/data.pkl', 'data': comp,
              'lh': {'method': 8, 'crc': 0, 'usize': 256 << 20}, 'cd': {'method': 8, 'crc': 0, 'usize': 256 << 20}}
    out.append(('deflate_bomb_data_pkl', raw_zip(ent), 'TPCONV_INFLATE_CAP=64Mi inspect @', 3, 'archive/data.pkl'))
    # entries whose data runs past the file
    ent = ok_records()
    ent[1] = dict(ent[1], cd={'csize': 1 << 30, 'usize': 1 << 30}, lh={'csize': 1 << 30, 'usize': 1 << 30})
    out.append(('entry_past_eof', raw_zip(ent), 'inspect @', 3, 'archive/data/0'))
    # overlapping entries: data.pkl's sizes (local and central agree) run over data/0's local header
    ent = ok_records()
    n = len(OK_PKL) + 40
    ent[0] = dict(ent[0], lh={'csize': n, 'usize': n, 'crc': 0}, cd={'csize': n, 'usize': n, 'crc': 0})
    out.append(('overlapping_entries', raw_zip(ent), 'inspect @', 3, 'overlap'))
    # duplicate names
    ent = ok_records() + [{'name': 'archive/data/0', 'data': b'\1' * 16}]
    out.append(('duplicate_names', raw_zip(ent), 'inspect @', 3, 'archive/data/0'))
    # encrypted entry (general-purpose flag bit 0)
    ent = ok_records()
    ent[1] = dict(ent[1], lh={'flags': 1}, cd={'flags': 1})
    out.append(('encrypted_entry', raw_zip(ent), 'inspect @', 3, 'encrypt'))
    # central directory inconsistent with the local header: name, method, sizes
    ent = ok_records()
    ent[0] = dict(ent[0], cd={'csize': len(OK_PKL) - 1, 'usize': len(OK_PKL) - 1})
    out.append(('cd_local_size_mismatch', raw_zip(ent), 'inspect @', 3, 'archive/data.pkl'))
    ent = ok_records()
    ent[1] = dict(ent[1], cd={'method': 8})
    out.append(('cd_local_method_mismatch', raw_zip(ent), 'inspect @', 3, 'archive/data/0'))
    z = bytearray(raw_zip(ok_records()))
    i = z.index(b'archive/data/0', 40)  # the local header's copy of the name
    z[i + len('archive/data/')] = ord('9')
    out.append(('cd_local_name_mismatch', bytes(z), 'inspect @', 3, 'archive/data/'))
    ent = ok_records()
    ent[0] = dict(ent[0], cd={'crc': 0x12345678}, lh={'crc': 0x12345678})
    out.append(('bad_crc_pickle', raw_zip(ent), 'inspect @', 0, '-'))  # STORED: CRC not checked on open (torch neither)
    # zip64 fields lying: the zip64 end record claims 2^60 entries / a directory past the file
    out.append(('zip64_2e60_entries', raw_zip(ok_records(), zip64={'n': 2**60}), 'inspect @', 3, '-'))
    # 2^60 tensors again, through the zip64 size extra of one entry
    ent = ok_records()
    x = struct.pack('<HHQQ', 1, 16, 2**60, 2**60)
    ent[1] = dict(ent[1], cd={'csize': 0xffffffff, 'usize': 0xffffffff, 'extra': x})
    out.append(('zip64_extra_lies_size', raw_zip(ent), 'inspect @', 3, 'archive/data/0'))
    # no end record: a partial download
    out.append(('no_eocd', good[:-22], 'inspect @', 3, 'central directory'))
    # a file that is only a local header
    out.append(('local_header_only', good[:30], 'inspect @', 3, '-'))
    # entry names: NUL, absolute, traversal (never used as paths, but refused or contained)
    ent = ok_records() + [{'name': 'archive/../../x', 'data': b'x'}]
    out.append(('name_traversal', raw_zip(ent), 'inspect @', 0, '-'))
    ent = ok_records() + [{'name': 'archive/a\0b', 'data': b'x'}]
    out.append(('name_with_nul', raw_zip(ent), 'inspect @', 3, '-'))
    # not under one prefix
    ent = ok_records() + [{'name': 'other/data/1', 'data': b'x'}]
    out.append(('mixed_prefix', raw_zip(ent), 'inspect @', 3, 'other/data/1'))


    # bytes after the end records: up to 65535 are not part of the archive
    # (torch loads such files), more are refused; a cut stays a truncation
    out.append(('zip_trailing', good + b'junk!', 'inspect @', 0, '-',
                '# trailing bytes: 5 after the end of central directory record, at offset %d '
                '(ignored, as torch.load does)' % len(good)))
    out.append(('zip_trailing_64k', good + b'\0' * 65536, 'inspect @', 3,
                "65536 unexpected bytes follow the end of central directory record "
                "(more than the 65535 that zip readers look through) (at byte offset %d," % len(good)))
    cut = good[:-30] + b'junk' * 10
    out.append(('zip_trailing_cut', cut, 'inspect @', 3,
                'failed finding the central directory: no end of central directory record, the file looks '
                'truncated (it is %d bytes; an interrupted download or copy?)' % len(cut)))
    return out


def zip_seeds():
    return [(n, z) for n, z, *_ in zip_cases() if len(z) < 65536]


# ---------------------------------------------------------------- legacy files --
MAGIC = 0x1950a86a20f9469cfc6c
MAGIC_P2 = pk(I(MAGIC))                                          # LONG1, 15 bytes
MAGIC_P1 = b'L%dL\n.' % MAGIC                                    # protocols 0 and 1: text
MAGIC_P4 = b'\x80\x04\x95' + struct.pack('<Q', 13) + I(MAGIC) + STOP  # in a FRAME


def legacy(magic=MAGIC_P2, data=b'\0' * 16):
    """A legacy torch.save file of one float tensor 'w' of 4 elements, storage
    key '0', written by hand: magic, protocol version, sys_info, the object
    (legacy persistent ids carry a sixth field, view_metadata), the key list,
    then the storage as a u64 element count and its bytes."""
    sys_info = state(('protocol_version', I(1001)), ('little_endian', NEWTRUE),
                     ('type_sizes', state(('short', I(2)), ('int', I(4)), ('long', I(4)))))
    pid6 = T(S('storage'), G('torch', 'FloatStorage'), S('0'), S('cpu'), I(4), NONE) + BINPERSID
    obj = state(('w', G('torch._utils', '_rebuild_tensor_v2') +
                      T(pid6, I(0), T(I(4)), T(I(1)), NEWFALSE, odict()) + REDUCE))
    keys = EMPTY_LIST + MARK + S('0') + b'e'
    return magic + pk(I(1001)) + pk(sys_info) + pk(obj) + pk(keys) + struct.pack('<Q', 4) + data


def legacy_cases():
    """(name, bytes, args, exit, stderr substring[, stdout substring])."""
    ok = legacy()
    no_magic = ok[len(MAGIC_P2):]
    notmagic = 'not a torch.save checkpoint: it starts with a pickle (protocol %d) that is not the legacy ' \
               'magic number 0x1950a86a20f9469cfc6c: '
    return [
        ('legacy_p2', ok, 'inspect @', 0, '-', '# legacy torch.save format, pickle protocol 2'),
        ('legacy_text_magic', MAGIC_P1 + no_magic, 'inspect @', 0, '-', '# legacy torch.save format, pickle protocol 1'),
        ('legacy_frame_magic', MAGIC_P4 + no_magic, 'inspect @', 0, '-', '# legacy torch.save format, pickle protocol 4'),
        ('legacy_trailing', ok + b'junk', 'inspect @', 0, '-',
         '# trailing bytes: 4 after the last storage, at offset %d (ignored, as torch.load does)' % len(ok)),
        ('legacy_trailing_cut', ok[:-6], 'inspect @', 3,
         "storage '0' claims 4 elements but the file ends at %d (truncated?) (at byte offset %d," %
         (len(ok) - 6, len(ok) - 24)),
        ('legacy_magic_garbage', pk(I(MAGIC ^ (1 << 40))) + no_magic, 'inspect @', 3,
         notmagic % 2 + 'its first value is something else (a plain pickle file?) (at byte offset 0, 0x0)'),
        ('legacy_magic_bad_opcode', MAGIC_P2[:-1] + b'\xff' + no_magic, 'inspect @', 3,
         notmagic % 2 + 'unknown pickle opcode 0xff (at byte offset 14, 0xe)'),
        ('legacy_magic_frame_lies', MAGIC_P4[:3] + struct.pack('<Q', 1 << 40) + MAGIC_P4[11:] + no_magic,
         'inspect @', 3, notmagic % 4 + 'truncated pickle: FRAME of 1099511627776 bytes but only %d left' %
         (len(MAGIC_P4) - 11 + len(no_magic))),
        ('legacy_magic_short', MAGIC_P2[:7], 'inspect @', 3,
         notmagic % 2 + 'truncated pickle: LONG1 needs 10 bytes, 3 left (at byte offset 2, 0x2)'),
        ('legacy_protocol0', MAGIC_P1 + b'I1001\n.' + no_magic[6:], 'inspect @', 3,
         'legacy torch file pickled with protocol 0 (text), which torch.load cannot read either'),
    ]


def seed_legacy():
    return [(n, b) for n, b, *_ in legacy_cases()]


def safetensors_cases():
    big = 'w' * (1 << 20)
    deep = b'{"a":' * 100000 + b'1' + b'}' * 100000
    F = lambda dt, shape, a, b: {'dtype': dt, 'shape': shape, 'data_offsets': [a, b]}
    return [
        ('st_deep_nesting', st(deep), 'inspect @', 3, 'not valid JSON'),
        ('st_deep_array', st(b'{"w":{"dtype":"F32","shape":' + b'[' * 50000 + b']' * 50000 +
                             b',"data_offsets":[0,0]}}'), 'inspect @', 3, 'not valid JSON'),
        ('st_long_name', st({big: F('F32', [1], 0, 4)}, b'\0' * 4), 'inspect -q @', 0, '-'),
        ('st_long_bad_name', st({big: F('F99', [1], 0, 4)}, b'\0' * 4), 'inspect @', 3, "unknown dtype 'F99'"),
        ('st_long_metadata', st({'__metadata__': {'k' * 100000: 'v' * 100000}}), 'inspect -q @', 0, '-'),
        ('st_header_2e63', struct.pack('<Q', 2**63) + b'{}', 'inspect @', 3, 'exceeds the 100000000-byte limit'),
        ('st_header_100mb_claimed', struct.pack('<Q', 100_000_000) + b'{}', 'inspect @', 3, 'runs past the end of the file'),
        ('st_header_over_cap', struct.pack('<Q', 100_000_001) + b'{' + b' ' * 1000 + b'}', 'inspect @', 3,
         'exceeds the 100000000-byte limit'),
        ('st_shape_overflow', st({'w': F('F32', [2**30, 2**30, 2**30], 0, 0)}), 'inspect @', 3, 'shape product overflows'),
        ('st_zero_dim_overflow', st({'w': F('F32', [0, 2**40, 2**40], 0, 0)}), 'inspect @', 3, 'shape product overflows'),
        ('st_offsets_2e64', st({'w': F('F32', [1], 2**64 - 4, 2**64)}), 'inspect @', 3, 'w'),
        ('st_float_offsets', st(b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4.5]}}', b'\0' * 4), 'inspect @', 3, 'w'),
        ('st_many_tensors_same_range', st({'t%d' % i: F('F32', [1], 0, 4) for i in range(10000)}, b'\0' * 4),
         'inspect @', 3, 'overlap the previous tensor'),
        ('st_nul_in_name', st(b'{"a\\u0000b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b'\0' * 4),
         'inspect @', 3, 'header has a NUL character'),
        ('st_control_chars_in_name', st({'a\x1b[31mred\x07': F('F99', [1], 0, 4)}, b'\0' * 4), 'inspect @', 3,
         "unknown dtype"),
        ('st_unknown_member', st({'w': dict(F('F32', [1], 0, 4), extra=1)}, b'\0' * 4), 'inspect @', 3, 'w'),
        ('st_bad_utf8', st(b'{"w\xff":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b'\0' * 4), 'inspect @', 3, '-'),
        ('st_empty_file', b'', 'inspect @', 3, '-'),
        ('st_tree_bomb', st({'__metadata__': {'tpconv.tree': '[' * 100000 + ']' * 100000}}), 'inspect @', 3, '-'),
        ('st_alias_loop', st({'__metadata__': {'tpconv.aliases': '{"b":"a","a":"b"}'}, 'a': F('F32', [1], 0, 4)},
                             b'\0' * 4), 'inspect @', 3, 'duplicate tensor name'),
        ('st_meta_quadratic', st({'__metadata__': {'k%d' % i: '' for i in range(100000)}}), 'inspect -q @', 0, '-'),
        ('st_meta_duplicate', st(b'{"__metadata__":{"a":"1","b":"2","a":"3"}}'), 'inspect @', 3,
         "duplicate __metadata__ key 'a'"),
    ]


def index_cases():
    """HF index JSON (written beside stub shards by the driver)."""
    return [
        ('idx_traversal', b'{"weight_map":{"w":"../../../etc/passwd"}}', 'inspect @', 3,
         "not a plain relative file name"),
        ('idx_absolute', b'{"weight_map":{"w":"/etc/passwd"}}', 'inspect @', 3, 'not a plain relative file name'),
        ('idx_deep_nesting', b'{"weight_map":' + b'{"a":' * 100000 + b'1' + b'}' * 100001, 'inspect @', 3, '-'),
        ('idx_not_string', b'{"weight_map":{"w":7}}', 'inspect @', 3, 'weight_map value is not a file name'),
        ('idx_duplicate', b'{"weight_map":{"w":"a.safetensors","w":"b.safetensors"}}', 'inspect @', 3,
         'tensor listed twice in weight_map'),
        ('idx_long_name', b'{"weight_map":{"' + b'w' * (1 << 20) + b'":"missing.safetensors"}}', 'inspect @', 3,
         'No such file or directory'),
        ('idx_quadratic', ('{"weight_map":{%s}}' % ','.join('"t%d":"missing.safetensors"' % i for i in range(100000))).encode(),
         'inspect @', 3, 'No such file or directory'),
    ]


def json_cases():
    """Plans and rules files: regular expressions that would blow up in glibc's
    regcomp, and numbers and nesting that would overflow."""
    import json
    plan = lambda pat: json.dumps({'layers': ['layers\\.([0-9]+)\\.'], 'rules': [{'match': pat, 'split': 'col'}]}).encode()
    rules = lambda r: json.dumps({'rules': r}).encode()
    costly = 'is too costly to compile'
    return [
        ('plan_regex_stacked.json', plan('([0-9]+)' + '+' * 24), 'plan --check @', 3, costly),
        ('plan_regex_nested_plus.json', plan('(' * 20 + 'a+' + ')+' * 20), 'plan --check @', 3, costly),
        ('plan_regex_big_interval.json', plan('a{1,9999}'), 'plan --check @', 3, costly),
        ('plan_regex_nested_intervals.json', plan('((a{1,100}){1,100}){1,10}'), 'plan --check @', 3, costly),
        ('plan_regex_backref.json', plan('(x*)*\\1y'), 'plan --check @', 3, costly),
        ('plan_regex_nullable_repeat.json', plan('x?++++*++++++++*'), 'plan --check @', 3, costly),
        ('plan_regex_nullable_nested.json', plan('(' * 12 + 'x*' + ')+' * 12), 'plan --check @', 3, costly),
        ('plan_regex_ok.json', plan('(layernorm|(^|\\.)norm)\\.(weight|bias)$|x{2,3}[[:alpha:]]'), 'plan --check @', 0, '-'),
        ('plan_number_1e400.json', b'{"pad_multiple": 1e400, "rules": []}', 'plan --check @', 3,
         '"pad_multiple" must be a positive integer'),
        ('plan_deep.json', b'{"rules":' + b'[' * 100000 + b']' * 100000 + b'}', 'plan --check @', 3,
         'plan is not a JSON object'),
        ('plan_layers_stacked.json', json.dumps({'layers': ['(a+)' + '+' * 30], 'rules': []}).encode(),
         'plan --check @', 3, costly),
        ('rules_regex_stacked.json', rules([{'drop': '(a+)' + '+' * 30}]), 'rules --check @', 2, 'too costly to compile'),
        ('rules_regex_nullable.json', rules([{'keep': '(a|)+b'}]), 'rules --check @', 2, 'too costly to compile'),
        ('rules_regex_when.json', rules([{'dtype': 'bf16', 'when': 'a{1,30000}'}]), 'rules --check @', 2,
         'too costly to compile'),
        ('rules_rename_doubling.json', rules([{'rename': '^(.*)$', 'to': '\\1\\1'}] * 40),
         'convert %ST% -o @.out.safetensors --rules @', 2, 'at most 65536'),
        ('rules_rename_wide.json', rules([{'rename': '^(.*)$', 'to': '\\0' * 100}] * 3),
         'convert %ST% -o @.out.safetensors --rules @', 2, 'at most 65536'),
    ]


def seed_pickles():
    return pickle_seeds()


def seed_zips():
    return zip_seeds()


def main():
    """argv: DIR [REAL...]: REAL files (a torch zip, a legacy file, a
    safetensors file) are also written truncated at every 1/16 of their length."""
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)

    def emit(fname, body, args, rc, sub, out='-'):
        p = os.path.join(d, fname)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, 'wb') as f:
            f.write(body)
        print('%s\t%s\t%d\t%s\t%s' % (fname, args, rc, sub, out))

    for name, body, args, rc, sub, *out in pickle_cases():
        emit(name + '.pt', torch_zip(body), args, rc, sub, *out)
    for name, body, args, rc, sub, *out in zip_cases():
        emit(name + '.pt', body, args, rc, sub, *out)
    for name, body, args, rc, sub, *out in legacy_cases():
        emit(name + '.pt', body, args, rc, sub, *out)
    for name, body, args, rc, sub, *out in safetensors_cases():
        emit(name + '.safetensors', body, args, rc, sub, *out)
    for name, body, args, rc, sub, *out in index_cases():
        emit(name + '/model.safetensors.index.json', body, args, rc, sub, *out)
    for name, body, args, rc, sub, *out in gguf_cases():
        emit(name + '.gguf', body, args, rc, sub, *out)
    for name, body, args, rc, sub, *out in json_cases():
        emit(name, body, args, rc, sub, *out)
    for real in sys.argv[2:]:
        with open(real, 'rb') as f:
            b = f.read()
        base = os.path.basename(real)
        if b'constants.pkl' in b:  # a TorchScript archive
            emit('torchscript_' + base, b, 'inspect @', 3, 'this is a TorchScript archive (torch.jit.save)')
            continue
        for k in range(1, 16):
            emit('trunc%02d_%s' % (k, base), b[:len(b) * k // 16], 'inspect @', 3, '-')


if __name__ == '__main__':
    main()
