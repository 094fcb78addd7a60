#!/usr/bin/env python3
"""Print a GGUF's KVs and tensors one a line (python3-gguf's reader), the
text tests/gguf compares: KVs in file order with their type and value
(floats as %.9g, long arrays as their count and sha256), then each tensor's
name, type, ne[] and the sha256 of its data."""
import hashlib, sys
import numpy as np
from gguf import GGUFReader, GGUFValueType

r = GGUFReader(sys.argv[1])
for f in r.fields.values():
    if f.name.startswith("GGUF."):
        continue
    t = f.types[0]
    if t == GGUFValueType.ARRAY:
        et = f.types[1] if len(f.types) > 1 else None
        if et == GGUFValueType.STRING:
            vals = [bytes(f.parts[i]).decode("utf-8", "replace") for i in f.data]
        else:
            vals = [f.parts[i].tolist()[0] for i in f.data]
        if et in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
            vals = ["%.9g" % v for v in vals]
        body = repr(vals)
        if len(vals) > 8:
            body = "n=%d sha256=%s" % (len(vals), hashlib.sha256(body.encode()).hexdigest()[:16])
        print("kv %s ARRAY[%s] %s" % (f.name, et.name if et is not None else "?", body))
    elif t == GGUFValueType.STRING:
        print("kv %s STRING %r" % (f.name, bytes(f.parts[-1]).decode("utf-8", "replace")))
    else:
        v = f.parts[-1].tolist()[0]
        print("kv %s %s %s" % (f.name, t.name, "%.9g" % v if t in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64) else v))
print("alignment %d" % r.alignment)
for t in r.tensors:
    data = np.ascontiguousarray(t.data).tobytes()
    print("tensor %s %s [%s] sha256=%s" % (t.name, t.tensor_type.name, ",".join(str(int(x)) for x in t.shape),
                                          hashlib.sha256(data).hexdigest()[:16]))
