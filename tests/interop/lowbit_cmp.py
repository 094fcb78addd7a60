"""Why two GGUF files differ (tests/interop/lowbit_matrix.sh, in the interop
chroot with python3-gguf): for each NAME, NAME.gguf (tpconv's) against
ref-NAME.gguf (llama-quantize's); writes NAME.cmp, one line: the first KV or
tensor whose value, type, shape or data differ, else that only the order of
the KVs or of the tensors differs."""
import sys

import gguf


def kv(f):
    out = {}
    for k, fl in f.fields.items():
        if k.startswith("GGUF."):
            continue
        out[k] = (tuple(fl.types), b"".join(bytes(p.tobytes()) for p in fl.parts))
    return out


def verdict(name):
    a, b = gguf.GGUFReader(name + ".gguf"), gguf.GGUFReader("ref-" + name + ".gguf")
    ka, kb = kv(a), kv(b)
    for k in list(ka) + [k for k in kb if k not in ka]:
        if ka.get(k) != kb.get(k):
            if k not in ka or k not in kb:
                return "KV %s only in %s's" % (k, "tpconv" if k in ka else "llama-quantize")
            return "KV %s: the values differ" % k
    ta, tb = {t.name: t for t in a.tensors}, {t.name: t for t in b.tensors}
    for n in list(ta) + [n for n in tb if n not in ta]:
        x, y = ta.get(n), tb.get(n)
        if x is None or y is None:
            return "tensor %s only in %s" % (n, "llama-quantize's" if x is None else "tpconv's")
        if x.tensor_type != y.tensor_type or list(x.shape) != list(y.shape):
            return "tensor %s: tpconv %s %s, llama-quantize %s %s" % (
                n, x.tensor_type.name, [int(d) for d in x.shape], y.tensor_type.name, [int(d) for d in y.shape])
        if x.data.tobytes() != y.data.tobytes():
            return "tensor %s (%s): data differ" % (n, x.tensor_type.name)
    why = []
    if list(ka) != list(kb):
        why.append("KV order (tpconv's last: %s; llama-quantize's last: %s)" % (", ".join(list(ka)[-2:]), ", ".join(list(kb)[-2:])))
    if [t.name for t in a.tensors] != [t.name for t in b.tensors]:
        why.append("tensor order (tpconv's first: %s; llama-quantize's: %s)" % (
            ", ".join(t.name for t in a.tensors[:2]), ", ".join(t.name for t in b.tensors[:2])))
    return ("same KVs and tensors (types, shapes, data); only the " + " and ".join(why) + " differ") if why \
        else "same KVs and tensors in the same order; padding or header bytes differ"


for name in sys.argv[1:]:
    try:
        v = verdict(name)
    except Exception as ex:  # a file gguf-py cannot read: say so
        v = "gguf-py cannot compare: %s" % ex
    with open(name + ".cmp", "w") as f:
        f.write(v + "\n")
