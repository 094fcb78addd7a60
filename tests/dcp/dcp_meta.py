"""Read and rewrite a DCP .metadata pickle without torch, for hostile variants.

    dcp_meta.py SRC_DIR DST_DIR MUTATION

copies the DCP folder SRC_DIR to DST_DIR and rewrites DST_DIR/.metadata (or a
data file) with one mutation; the classes are stand-ins registered under torch's
own module names, so the pickle keeps exactly the globals real torch writes.

Mutations (KEY is a tensor fqn of the fixture):
  overlap:KEY      chunk 1 starts one row into chunk 0
  gap:KEY          the last chunk is dropped
  outside:KEY      chunk 0's offset moved past the tensor
  dtype:KEY        the metadata says float16 for a float32 tensor
  length:KEY       the item length of chunk 0 runs past the end of its file
  escape:KEY       chunk 0's item lives in '../evil.distcp'
  transform:KEY    chunk 0's item carries transform_descriptors ['stream.zstd/1']
  dangerous        a reference to os.system hidden in storage_meta
  truncate:FILE    the data file FILE loses its last 100 bytes
  missing:FILE     the data file FILE is removed
  rename:OLD=NEW   entry OLD is called NEW (metadata, its chunks' storage keys,
                   its planner_data path: the longest component re-cut)
  swap:A=B         entries A and B trade names
  drop:KEY         entry KEY is gone (metadata, storage keys, planner_data)
  pickleint:KEY=NAME+DELTA
                   in bytes entry KEY (a torch.save zip, as Megatron saves a
                   ShardedObject), the int stored under the dict key NAME in
                   data.pkl changes by DELTA, in place: same width, the zip's
                   CRCs (local header, data descriptor, central directory)
                   redone
"""
import copy
import io
import os
import pickle
import shutil
import sys
import types

_classes = {}


def _module(name):
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        m = ".".join(parts[:i])
        if m not in sys.modules:
            sys.modules[m] = types.ModuleType(m)
    return sys.modules[name]


class _Obj:
    """A dataclass stand-in: keeps its BUILD state (dict or tuple) as given."""

    def __setstate__(self, st):
        if isinstance(st, dict):
            self.__dict__.update(st)
        else:
            self._tuple = st

    def __getstate__(self):
        return self._tuple if "_tuple" in self.__dict__ else dict(self.__dict__)


class _Call:
    """A value made by REDUCE(cls, args) that re-pickles the same way."""

    def __init__(self, *args):
        self._args = args

    def __reduce__(self):
        return (type(self), self._args)


class _Size(tuple):
    def __reduce__(self):
        return (type(self), (tuple(self),))


def stub(module, name):
    key = (module, name)
    if key in _classes:
        return _classes[key]
    if module == "torch" and name == "Size":
        base = (_Size,)
    elif name in ("_get_layout", "_MEM_FORMAT_ENCODING", "MEM_FORMAT_ENCODING", "PosixPath", "PurePosixPath"):
        base = (_Call,)
    elif module == "torch":
        base = (object,)  # a dtype: only ever a GLOBAL
    else:
        base = (_Obj,)
    cls = type(name, base, {"__module__": module, "__qualname__": name})
    setattr(_module(module), name, cls)
    _classes[key] = cls
    return cls


class _Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module in ("builtins", "copyreg", "collections"):
            return super().find_class(module, name)
        return stub(module, name)


def load(path):
    with open(path, "rb") as f:
        return _Unpickler(f).load()


def save(obj, path):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=4)


def storage_of(md, fqn, chunk):
    for k, v in md.storage_data.items():
        if k.fqn == fqn and tuple(k.offset) == tuple(chunk.offsets):
            return k, v
    raise KeyError(fqn)


def rename(md, old, new):
    md.state_dict_metadata[new] = md.state_dict_metadata.pop(old)
    for k in [k for k in md.storage_data if k.fqn == old]:
        v = md.storage_data.pop(k)
        k.__dict__["fqn"] = new
        md.storage_data[k] = v
    if md.planner_data is None:  # saved with flatten_state_dict=False (Megatron): no paths
        return
    path = list(md.planner_data.pop(old))
    i = max(range(len(path)), key=lambda j: len(str(path[j])))
    pre, suf = ".".join(map(str, path[:i])), ".".join(map(str, path[i + 1:]))
    path[i] = new[len(pre) + 1 if pre else 0:len(new) - (len(suf) + 1) if suf else len(new)]
    md.planner_data[new] = tuple(path)


def pickle_int(item, name, delta):
    """item (a torch.save zip) with data.pkl's int under key `name` changed."""
    import pickletools
    import struct
    import zipfile
    import zlib
    item = bytearray(item)
    zi = [i for i in zipfile.ZipFile(io.BytesIO(bytes(item))).infolist() if i.filename.endswith("/data.pkl")][0]
    h = zi.header_offset
    start = h + 30 + struct.unpack_from("<H", item, h + 26)[0] + struct.unpack_from("<H", item, h + 28)[0]
    pkl = bytes(item[start:start + zi.compress_size])
    ops, at = list(pickletools.genops(pkl)), None
    for i, (op, arg, pos) in enumerate(ops):
        if arg == name and "UNICODE" in op.name:
            j = i + 1
            while ops[j][0].name in ("BINPUT", "LONG_BINPUT", "MEMOIZE"):
                j += 1
            at = ops[j]
            break
    op, val, pos = at
    fmt = {"BININT1": "<B", "BININT2": "<H", "BININT": "<i"}[op.name]
    struct.pack_into(fmt, item, start + pos + 1, val + delta)
    crc = zlib.crc32(bytes(item[start:start + zi.compress_size]))
    if struct.unpack_from("<I", item, h + 14)[0]:
        struct.pack_into("<I", item, h + 14, crc)
    if zi.flag_bits & 8:  # the data descriptor after the data
        dd = start + zi.compress_size
        struct.pack_into("<I", item, dd + (4 if item[dd:dd + 4] == b"PK\x07\x08" else 0), crc)
    c = item.find(b"PK\x01\x02")
    while c >= 0:
        n = struct.unpack_from("<H", item, c + 28)[0]
        if bytes(item[c + 46:c + 46 + n]).decode() == zi.filename:
            struct.pack_into("<I", item, c + 16, crc)
        c = item.find(b"PK\x01\x02", c + 4)
    return bytes(item)


def main(src, dst, mut):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    kind, _, arg = mut.partition(":")
    if kind in ("truncate", "missing"):
        p = os.path.join(dst, arg)
        if kind == "missing":
            os.unlink(p)
        else:
            n = os.path.getsize(p)
            with open(p, "r+b") as f:
                f.truncate(n - 100)
        return
    mp = os.path.join(dst, ".metadata")
    md = load(mp)
    if kind == "dangerous":
        os_system = stub("os", "system")
        md.storage_meta.__dict__["load_id"] = os_system
        save(md, mp)
        return
    if kind == "drop":
        del md.state_dict_metadata[arg]
        for k in [k for k in md.storage_data if k.fqn == arg]:
            del md.storage_data[k]
        if md.planner_data is not None:
            md.planner_data.pop(arg, None)
        save(md, mp)
        return
    if kind == "pickleint":
        key, _, rest = arg.partition("=")
        name, _, delta = rest.rpartition("+")
        k, v = [(k, v) for k, v in md.storage_data.items() if k.fqn == key][0]
        with open(os.path.join(dst, v.relative_path), "r+b") as f:
            f.seek(v.offset)
            item = pickle_int(f.read(v.length), name, int(delta))
            f.seek(v.offset)
            f.write(item)
        return
    if kind in ("rename", "swap"):
        a, _, b = arg.partition("=")
        if kind == "rename":
            rename(md, a, b)
        else:
            rename(md, a, "\x01swap")
            rename(md, b, a)
            rename(md, "\x01swap", b)
        save(md, mp)
        return
    tm = md.state_dict_metadata[arg]
    ch = tm.chunks
    Size = stub("torch", "Size")
    if kind == "overlap":
        o = list(ch[1].offsets)
        o[0] = ch[0].offsets[0] + 1
        k, v = storage_of(md, arg, ch[1])
        del md.storage_data[k]
        ch[1].offsets = Size(o)
        k2 = copy.copy(k)
        k2.__dict__["offset"] = Size(o)
        md.storage_data[k2] = v
    elif kind == "gap":
        ch.pop()
    elif kind == "outside":
        o = list(ch[0].offsets)
        o[0] = tm.size[0] + 5
        k, v = storage_of(md, arg, ch[0])
        del md.storage_data[k]
        ch[0].offsets = Size(o)
        k.__dict__["offset"] = Size(o)
        md.storage_data[k] = v
    elif kind == "dtype":
        t = list(tm.properties._tuple)
        t[0] = stub("torch", "float16")
        tm.properties._tuple = tuple(t)
    elif kind in ("length", "escape", "transform"):
        k, v = storage_of(md, arg, ch[0])
        if kind == "length":
            v.length = v.length + 1000000
        elif kind == "escape":
            v.relative_path = "../evil.distcp"
        else:
            v.transform_descriptors = ["stream.zstd/1"]
    else:
        raise SystemExit("unknown mutation " + mut)
    save(md, mp)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
