#!/usr/bin/env python3
"""Make tests/gguf/lowbit.gguf in the forky chroot (python3-gguf 0.19):
one small tensor of each of a few ggml types tpconv once read and copied
without dequantizing (IQ4_XS, IQ2_XXS, IQ4_NL, TQ2_0, MXFP4; all decoded since,
and gguf_test.sh retypes the IQ4_NL one as Q2_0, which is not), their blocks seeded
bytes (nothing decodes them; they are copied), beside an F32 one. gguf-py
writes it, so a GGUF -> GGUF copy or a gguf-split set merged back must give
these bytes exactly (tests/gguf/gguf_test.sh).

usage (host): chroot ... 'python3 make_lowbit_fixture.py OUTDIR'
"""
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

out = sys.argv[1] if len(sys.argv) > 1 else "."
rng = np.random.default_rng(41)
w = gguf.GGUFWriter(f"{out}/lowbit.gguf", "llama")
w.add_block_count(1)
w.add_file_type(30)  # LLAMA_FTYPE_MOSTLY_IQ4_XS
w.add_tensor("f32.weight", rng.standard_normal((4, 256)).astype(np.float32))
for ty, rows in ((T.IQ4_XS, 4), (T.IQ2_XXS, 2), (T.IQ4_NL, 2), (T.TQ2_0, 2), (T.MXFP4, 2)):
    blk, size = gguf.GGML_QUANT_SIZES[ty]
    nb = 256 // blk
    raw = rng.integers(0, 256, (rows, nb * size), dtype=np.uint8)
    w.add_tensor(f"{ty.name.lower()}.weight", raw, raw_shape=raw.shape, raw_dtype=ty)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
