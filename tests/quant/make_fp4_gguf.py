"""A GGUF of MXFP4 and NVFP4 blocks, for tests/quant/fp4_test.sh. Run in the
forky chroot (python3-gguf 0.19):  python3 make_fp4_gguf.py OUT.gguf OUT.sha256

Three tensors per type: MXFP4 quantized by gguf-py's own quantize (e8m0 +
split-half nibbles) from seeded normal values, one with zero blocks and one
with an exponent byte below 2 (the subnormal half-scale); NVFP4 (4 UE4M3
scales a 64-block), which gguf-py 0.19 cannot quantize, as random blocks whose
scale bytes are 0x00-0x7F (0x7F and 0 decode to 0); OUT.sha256 holds, per tensor, the SHA-256 of the F32 values
gguf.quants.dequantize gives (little-endian, C order) as `NAME SHA`."""
import hashlib, sys
import numpy as np
import gguf
from gguf.quants import quantize, dequantize

out, sums = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(45)
w = gguf.GGUFWriter(out, "fp4test")
lines = []
for ty, name in ((gguf.GGMLQuantizationType.MXFP4, "mxfp4"), (gguf.GGMLQuantizationType.NVFP4, "nvfp4")):
    for k, (rows, cols, scale) in enumerate(((8, 128, 1.0), (4, 64, 1e-3), (3, 192, 300.0))):
        x = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
        if k == 0:
            x[0, :64] = 0  # whole zero blocks
        if k == 1 and ty == gguf.GGMLQuantizationType.MXFP4:
            x[1, :32] *= 2.0 ** -126  # an exponent byte below 2: the subnormal half-scale
        if ty == gguf.GGMLQuantizationType.MXFP4:
            q = quantize(x, ty)
        else:  # gguf-py 0.19 cannot quantize NVFP4: random blocks, scales 0x00-0x7F (0x7F: 0)
            q = rng.integers(0, 256, (rows, cols // 64 * 36), dtype=np.uint8)
            q.reshape(rows, -1, 36)[:, :, :4] &= 0x7F
            q.reshape(rows, -1, 36)[0, 0, :2] = (0x7F, 0)
        n = f"{name}.{k}.weight"
        w.add_tensor(n, q, raw_shape=q.shape, raw_dtype=ty)
        v = dequantize(q, ty).astype("<f4")
        lines.append(f"{n} {hashlib.sha256(v.tobytes()).hexdigest()}")
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
open(sums, "w").write("\n".join(lines) + "\n")
print("wrote", out)
