"""The IQ / TQ fixture of tests/quant/iq_test.sh, with make_iq_gguf.sh. Run in
the forky chroot (python3-gguf 0.19):

  python3 make_iq_gguf.py input IN.gguf IMATRIX.dat
      a llama-shaped f32 GGUF whose matrices are 256 and 512 wide (the IQ
      types' 256-value super-blocks): seeded normal rows at several scales,
      a zero row, a row with one outlier; and a legacy importance matrix
      (llama-imatrix's .dat layout: count, then per tensor its name, ncall 1
      and one positive float per column), which llama-quantize needs for the
      types below 4 bits
  python3 make_iq_gguf.py combine OUT.gguf OUT.sha256 TYPE=FILE...
      every tensor of each llama-quantize output FILE, its bytes as the tool
      wrote them, renamed TYPE.NAME, into one GGUF; OUT.sha256 holds, per
      tensor, the SHA-256 of the F32 values gguf.quants.dequantize gives
      (little-endian, C order) as `NAME SHA`"""
import hashlib, struct, sys
import numpy as np
import gguf
from gguf.quants import dequantize

SHAPES = {"token_embd.weight": (2, 256), "blk.0.attn_q.weight": (3, 256), "blk.0.ffn_down.weight": (2, 512)}

if sys.argv[1] == "input":
    rng = np.random.default_rng(4545)
    w = gguf.GGUFWriter(sys.argv[2], "llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(256)
    w.add_feed_forward_length(512)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)
    imat = []
    for k, (name, (rows, cols)) in enumerate(SHAPES.items()):
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        x *= np.array([1e-2, 1.0, 30.0][:rows], dtype=np.float32).reshape(-1, 1)
        if k == 1:
            x[0, :64] = 0          # whole zero groups
            x[2, 5] = 400.0        # one outlier
        w.add_tensor(name, x)
        imat.append((name, (rng.random(cols) + 0.05).astype(np.float32)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(sys.argv[3], "wb") as f:
        f.write(struct.pack("<i", len(imat)))
        for name, v in imat:
            f.write(struct.pack("<i", len(name)) + name.encode() + struct.pack("<ii", 1, len(v)) + v.tobytes())
elif sys.argv[1] == "combine":
    w = gguf.GGUFWriter(sys.argv[2], "iqtest")
    lines = []
    for arg in sys.argv[4:]:
        ty, path = arg.split("=", 1)
        r = gguf.GGUFReader(path)
        for t in r.tensors:
            if t.name not in SHAPES or t.tensor_type == gguf.GGMLQuantizationType.F32:
                continue
            q = np.array(t.data)
            n = f"{ty}.{t.name}"
            w.add_tensor(n, q, raw_shape=q.shape, raw_dtype=t.tensor_type)
            v = dequantize(q, t.tensor_type).astype("<f4")
            lines.append(f"{n} {t.tensor_type.name} {hashlib.sha256(v.tobytes()).hexdigest()}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    open(sys.argv[3], "w").write("\n".join(lines) + "\n")
