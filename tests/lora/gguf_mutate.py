"""Hostile adapter GGUFs for lora_gguf_test.sh, each the reference's f32
adapter (tests/lora/gguf/llama/ref-f32.gguf) with one thing wrong. Python's
standard library only (any python3): the GGUF is parsed, edited and written
again (alignment 32, data laid out anew). Also OUTDIR/rank32/, a PEFT adapter
of rank 32 on tiny-llama's layer-0 q_proj and k_proj (seeded), whose lora_b
rows are whole Q8_0 blocks: a quantized lora_b with its Q/K rows permuted.
usage: gguf_mutate.py REF.gguf OUTDIR"""
import json, os, random, struct, sys

ref, out = sys.argv[1], sys.argv[2]
b = open(ref, "rb").read()
p = 24
magic, ver, nt, nkv = struct.unpack_from("<IIQQ", b, 0)
assert magic == 0x46554747 and ver == 3
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def string(p):
    n = struct.unpack_from("<Q", b, p)[0]
    return b[p + 8:p + 8 + n].decode(), p + 8 + n


def value(p, t):
    if t == 8:
        return string(p)[1]
    if t == 9:
        at, n = struct.unpack_from("<IQ", b, p)
        p += 12
        for _ in range(n):
            p = value(p, at)
        return p
    return p + SIZES[t]


kvs = []  # (key, raw bytes of type + value)
for _ in range(nkv):
    k, p = string(p)
    t = struct.unpack_from("<I", b, p)[0]
    e = value(p + 4, t)
    kvs.append((k, b[p:e]))
    p = e
infos = []  # [name, dims (ne), type, offset]
for _ in range(nt):
    name, p = string(p)
    nd = struct.unpack_from("<I", b, p)[0]
    dims = list(struct.unpack_from("<%dQ" % nd, b, p + 4))
    p += 4 + 8 * nd
    ty, off = struct.unpack_from("<IQ", b, p)
    p += 12
    infos.append([name, dims, ty, off])
data0 = p + (-p % 32)
assert all(i[2] == 0 for i in infos)  # F32
blobs = {i[0]: b[data0 + i[3]:data0 + i[3] + 4 * eval("*".join(map(str, i[1])))] for i in infos}


def gstr(s):
    s = s.encode()
    return struct.pack("<Q", len(s)) + s


def write(name, kvs, infos):
    h = struct.pack("<IIQQ", 0x46554747, 3, len(infos), len(kvs))
    for k, raw in kvs:
        h += gstr(k) + raw
    off, data = 0, b""
    for n, dims, ty, _ in infos:
        h += gstr(n) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims) + struct.pack("<IQ", ty, off)
        blob = blobs[n]
        data += blob + bytes(-len(blob) % 32)
        off += len(blob) + (-len(blob) % 32)
    h += bytes(-len(h) % 32)
    open(os.path.join(out, name + ".gguf"), "wb").write(h + data)


def sval(s):
    return struct.pack("<I", 8) + gstr(s)


def setkv(key, raw):
    return [(k, raw if k == key else r) for k, r in kvs]


write("no-alpha", [kv for kv in kvs if kv[0] != "adapter.lora.alpha"], infos)
write("type-model", setkv("general.type", sval("model")), infos)
write("type-unknown", setkv("general.type", sval("mmproj")), infos)
write("no-type", [kv for kv in kvs if kv[0] != "general.type"], infos)
write("adapter-ia3", setkv("adapter.type", sval("ia3")), infos)
write("arch-qwen2", setkv("general.architecture", sval("qwen2")), infos)
write("only-a", kvs, [i for i in infos if i[0] != "blk.0.attn_q.weight.lora_b"])
write("only-b", kvs, [i for i in infos if i[0] != "blk.1.ffn_up.weight.lora_a"])
write("shape", kvs, [[i[0], [8, 8] if i[0] == "blk.0.attn_v.weight.lora_b" else i[1], i[2], i[3]] for i in infos])
blobs["output_norm.weight"] = bytes(4 * 32)
write("norm", kvs, infos + [["output_norm.weight", [32], 0, 0]])
blobs["blk.0.attn_bogus.weight.lora_a"] = blobs["blk.0.attn_q.weight.lora_a"]
blobs["blk.0.attn_bogus.weight.lora_b"] = blobs["blk.0.attn_q.weight.lora_b"]
write("no-hf-name", kvs, infos + [["blk.0.attn_bogus.weight.lora_a", [32, 4], 0, 0], ["blk.0.attn_bogus.weight.lora_b", [4, 32], 0, 0]])

# rank32/: adapter_model.safetensors as safetensors' save_file lays it out
random.seed(43)
P = "base_model.model.model.layers.0.self_attn."
ts = {}
for m, (o, i) in {"q_proj": (32, 32), "k_proj": (16, 32)}.items():
    ts[P + m + ".lora_A.weight"] = ([32, i], [random.gauss(0, 0.1) for _ in range(32 * i)])
    ts[P + m + ".lora_B.weight"] = ([o, 32], [random.gauss(0, 0.1) for _ in range(o * 32)])
hd, off, data = {"__metadata__": {"format": "pt"}}, 0, b""
for k in sorted(ts):
    shape, v = ts[k]
    blob = struct.pack("<%df" % len(v), *v)
    hd[k] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(blob)]}
    off += len(blob)
    data += blob
hj = json.dumps(hd, separators=(",", ":")).encode()
hj += b" " * (-len(hj) % 8)
os.makedirs(os.path.join(out, "rank32"), exist_ok=True)
open(os.path.join(out, "rank32", "adapter_model.safetensors"), "wb").write(struct.pack("<Q", len(hj)) + hj + data)
json.dump({"peft_type": "LORA", "r": 32, "lora_alpha": 16, "target_modules": ["q_proj", "k_proj"]},
          open(os.path.join(out, "rank32", "adapter_config.json"), "w"))
