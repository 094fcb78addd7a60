#!/usr/bin/env python3
"""Write OUT.gguf: a llama-shaped f32 GGUF whose rows are the quantizers'
corner cases (tests/gguf/qmix_test.sh, make_qmix.sh: "edge"), 256 and 512
wide so that every k-quant and IQ4_XS applies: a zero row (a zero
super-block), values below ggml's GROUP_MAX_EPS (1e-15), a single nonzero
value, a zero group beside a tiny one, a row clipped to two magnitudes,
values on a grid of quarters, a row whose halves are each other's negation,
a row of one sign; beside plain pseudo-random rows. Only +, *, / and
struct's rounding to F32 (no libm), so any Python gives the same bytes: the
test writes it on the host, make_qmix.sh in the forky chroot.
With `odd`, the rows of blk.0.ffn_down.weight (feed_forward_length 48) and
of output.weight are 48 wide, a multiple of no block: llama.cpp 0.7's
llama-quantize writes them F16 whatever the type chosen, IQ4_NL, Q4_0 and
the output's Q8_0 included (tests/gguf/qmix_test.sh: "odd").
usage: make_edge_gguf.py OUT.gguf [odd]"""
import struct, sys

ODD = sys.argv[2:] == ["odd"]

state = 45
def uni():
    global state
    state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
    return (state >> 11) / float(1 << 53)

def normalish():  # Irwin-Hall: the sum of 4 uniforms, centred
    return (uni() + uni() + uni() + uni() - 2.0) * 1.7

def rows(n, w, scale=1.0):
    return [[normalish() * scale for _ in range(w)] for _ in range(n)]

q = rows(8, 256)
q[0] = [0.0] * 256
q[1] = [v * 1e-17 for v in q[1]]
q[2] = [0.0] * 256
q[2][77] = -3.0
q[3][:32] = [0.0] * 32
q[3][40] = 1e-16
q[4] = [(0.5 if abs(v) > 1 else v) * 1e4 for v in q[4]]
q[5] = [float(int(v * 4)) / 4 for v in q[5]]
q[6][:128] = [-v for v in q[6][128:]]
q[7] = [abs(v) for v in q[7]]
tensors = [("token_embd.weight", rows(2, 256)), ("blk.0.attn_q.weight", q),
           ("blk.0.attn_k.weight", rows(3, 512, 0.02)), ("blk.0.attn_v.weight", rows(2, 256, 3.0)),
           ("blk.0.ffn_down.weight", rows(2, 48 if ODD else 512)), ("output.weight", rows(2, 48 if ODD else 256))]

def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b

kvs = [("general.architecture", 8, s("llama")), ("llama.block_count", 4, struct.pack("<I", 1)),
       ("llama.context_length", 4, struct.pack("<I", 64)), ("llama.embedding_length", 4, struct.pack("<I", 256)),
       ("llama.feed_forward_length", 4, struct.pack("<I", 48 if ODD else 512)), ("llama.attention.head_count", 4, struct.pack("<I", 4)),
       ("llama.attention.head_count_kv", 4, struct.pack("<I", 4)),
       ("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5)), ("general.file_type", 4, struct.pack("<I", 0))]
out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
for k, t, v in kvs:
    out += s(k) + struct.pack("<I", t) + v
off, data = 0, bytearray()
for name, r in tensors:
    out += s(name) + struct.pack("<IQQIQ", 2, len(r[0]), len(r), 0, off)
    blob = b"".join(struct.pack("<%df" % len(x), *x) for x in r)
    data += blob + bytes(-len(blob) % 32)
    off = len(data)
out += bytes(-len(out) % 32)
open(sys.argv[1], "wb").write(out + data)
