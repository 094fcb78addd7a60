"""Check a `tpconv shard --layout dcp` set with real torch (1.13: no DCP loader
needed): .metadata is read with stand-in classes, every item of every rank file
is loaded with torch.load from its byte range, and compared with an independent
torch slicing of the original tensors.

    dcp_layout_check.py ORIG.pt SETDIR TP PP [llama]

Checks, per tensor: the metadata's global shape and dtype are the original's;
the chunks tile the tensor exactly once; rank r's file holds, in order, exactly
the boxes rank r holds under the manifest's split (a box several ranks hold -
a replicated tensor, a replicated KV head - only in the lowest such rank of the
stage; padded vocab rows in no file), each item's tensor equal bit for bit to
orig[box]. With `llama`, the splits themselves are checked against the LLaMA
recipe (q/k/v/gate/up by rows, o/down by columns, embeddings by vocab rows,
norms whole), so the manifest is not the only witness.
Prints one summary line; exit 1 on any difference.
"""
import io
import json
import os
import pickle
import sys

import torch

orig_path, setdir, TP, PP = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
recipe = sys.argv[5] if len(sys.argv) > 5 else None
orig = torch.load(orig_path)
man = json.load(open(os.path.join(setdir, "tpconv-manifest.json")))


class Obj:
    def __setstate__(self, st):
        if isinstance(st, dict):
            self.__dict__.update(st)
        else:
            self.state = st


def fn(*a):
    return a


class Meta(pickle.Unpickler):
    def find_class(self, module, name):
        if module == "torch" and name == "Size":
            return tuple
        if module == "torch":
            return getattr(torch, name)  # a dtype
        if name in ("_get_layout", "_MEM_FORMAT_ENCODING"):
            return fn
        if module == "copyreg":
            return pickle.Unpickler.find_class(self, module, name)
        return type(name, (Obj,), {})


md = Meta(open(os.path.join(setdir, ".metadata"), "rb")).load()
sdm, sd = md.state_dict_metadata, md.storage_data
where = {(k.fqn, tuple(k.offset)): v for k, v in sd.items()}
errors = []


def err(*a):
    errors.append(" ".join(str(x) for x in a))


def expected_boxes(t, rank):
    """Boxes (offsets, sizes) rank `rank` stores of manifest tensor t, in part order."""
    shape, stage, tpr = t["shape"], t["stage"], rank % TP
    if rank // TP != stage:
        return []
    if t["dim"] < 0:
        return [((0,) * len(shape), tuple(shape))] if tpr == 0 else []
    d, out, poff = t["dim"], [], 0
    for p in t["parts"]:
        size, pad, heads, rep = p["size"], p["pad"], p["heads"], p["replicas"]
        if rep > 1:
            ln = size // heads
            start = lambda q: (q // rep) * ln
        else:
            ln = (size + pad) // TP
            start = lambda q: q * ln
        s = start(tpr)
        a, b = min(s, size), min(s + ln, size)
        dup = any(start(q) == s for q in range(tpr))
        if b > a and not dup:
            off = [0] * len(shape)
            sz = list(shape)
            off[d], sz[d] = poff + a, b - a
            out.append((tuple(off), tuple(sz)))
        poff += size
    return out


def recipe_split(name):
    if any(k in name for k in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")):
        return ("col", 0)
    if any(k in name for k in ("o_proj.weight", "down_proj.weight")):
        return ("row", 1)
    if name in ("model.embed_tokens.weight", "lm_head.weight"):
        return ("vocab", 0)
    return ("replicate", -1)


def raw(x):
    x = x.contiguous().reshape(-1)
    return x.to(torch.uint8) if x.dtype == torch.bool else x.view(torch.uint8)


nitems = nchunks = 0
files = [r["file"] for r in man["ranks"]]
per_file = {f: [] for f in files}
for t in man["tensors"]:
    name = t["name"]
    o = orig[name]
    m = sdm.get(name)
    if m is None:
        err(name, "missing from .metadata")
        continue
    if tuple(m.size) != tuple(o.shape) or m.properties.state[0] != o.dtype:
        err(name, "metadata says", tuple(m.size), m.properties.state[0], "original", tuple(o.shape), o.dtype)
    if recipe == "llama" and (t["split"], t["dim"]) != recipe_split(name):
        err(name, "split", t["split"], t["dim"], "but the LLaMA recipe says", recipe_split(name))
    # the chunks tile the tensor exactly once
    cover = torch.zeros(o.shape, dtype=torch.int32)
    for c in m.chunks:
        sl = tuple(slice(a, a + b) for a, b in zip(c.offsets, c.sizes))
        cover[sl] += 1
        nchunks += 1
    if o.numel() and not bool((cover == 1).all()):
        err(name, "chunks do not tile the tensor once")
    got = {(tuple(c.offsets), tuple(c.sizes)) for c in m.chunks}
    want = set()
    for r in range(TP * PP):
        for off, sz in expected_boxes(t, r):
            want.add((off, sz))
            per_file[files[r]].append((name, off, sz))
    if got != want:
        err(name, "chunks", sorted(got), "expected", sorted(want))

for r, f in enumerate(files):
    data = open(os.path.join(setdir, f), "rb").read()
    pos = 0
    for name, off, sz in per_file[f]:
        si = where.get((name, off))
        if si is None:
            err(f, name, off, "no storage entry")
            continue
        if si.relative_path != f:
            err(name, off, "stored in", si.relative_path, "expected", f)
            continue
        if si.offset != pos:
            err(f, name, off, "item at", si.offset, "expected back to back at", pos)
        item = torch.load(io.BytesIO(data[si.offset:si.offset + si.length]))
        pos = si.offset + si.length
        want = orig[name][tuple(slice(a, a + b) for a, b in zip(off, sz))]
        if item.dtype != want.dtype or item.shape != want.shape or not torch.equal(raw(item), raw(want)):
            err(f, name, off, "item differs from orig[box]", item.dtype, tuple(item.shape))
        nitems += 1
    if pos != len(data):
        err(f, "items end at", pos, "the file at", len(data))

for e in errors[:10]:
    print(e)
print("%d rank files, %d chunks in .metadata, %d items equal to torch slices of the original%s"
      % (len(files), nchunks, nitems, "" if not errors else ", %d errors" % len(errors)))
sys.exit(1 if errors or nitems != nchunks else 0)
