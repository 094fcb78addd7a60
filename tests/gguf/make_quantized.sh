#!/bin/sh
# GGUF files quantized by llama.cpp's own llama-quantize from tpconv's f16 GGUF,
# with what python3-gguf's dequantize gives for each tensor: fixtures for the
# read side (issue 33: "llama-quantize of tpconv's f16 GGUF to Q4_K_M and Q6_K,
# read back by tpconv, dequantizes to exactly what python3-gguf's dequantize
# gives"). Needs the forky chroot (/tmp/inchroot.sh) and a built tpconv.
#
# The model: a llama of hidden 256 (K-quant blocks are 256 wide: a narrower
# row is quantized to another type by llama-quantize), 1 layer, 4 heads,
# intermediate 256, vocab 320 with tiny-llama's tokenizer, seeded random
# weights (transformers in the chroot). tpconv converts it to f16 on the host;
# llama-quantize makes Q4_K_M and Q6_K in the chroot; gguf-py's dequantize
# gives every tensor's float32 values, whose sha256 go beside each file.
#
# usage: make_quantized.sh TPCONV OUT
#   OUT (under /var/cache/tpconv-interop/forky/tmp/, visible in the chroot):
#   tiny-llama-256/ (the model), f16.gguf, Q4_K_M.gguf, Q6_K.gguf and
#   Q4_K_M.sha256, Q6_K.sha256: "TYPE NAME sha256-of-f32-values" per tensor
set -eu
TPCONV=$(realpath "$1") OUT=$2 SRC=$(cd "$(dirname "$0")/../.." && pwd)
R=/var/cache/tpconv-interop/forky
case "$OUT" in "$R"/tmp/*) ;; *) echo "OUT must be under $R/tmp" >&2; exit 2;; esac
mkdir -p "$OUT"
IN=/tmp/${OUT#"$R"/tmp/}
M=$OUT/tiny-llama-256
rm -rf "$M" && mkdir -p "$M"
cp "$SRC/tests/gguf/arch/tiny-llama/tokenizer.model" "$SRC/tests/gguf/arch/tiny-llama/tokenizer_config.json" "$M/"
cat >"$OUT/model.py" <<'EOF'
import sys, torch, transformers as tf
torch.manual_seed(7)
c = tf.LlamaConfig(vocab_size=320, hidden_size=256, intermediate_size=256, num_hidden_layers=1,
                   num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
                   tie_word_embeddings=False)
m = tf.AutoModelForCausalLM.from_config(c)
with torch.no_grad():
    for n, p in m.named_parameters():
        base = 1.0 if "norm" in n else 0.0
        p.copy_(base + torch.randn_like(p) * (0.1 if base else 0.3))
m.save_pretrained(sys.argv[1])
EOF
cat >"$OUT/dequant.py" <<'EOF'
import hashlib, sys
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize
for t in GGUFReader(sys.argv[1]).tensors:
    v = np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
    print(t.tensor_type.name, t.name, hashlib.sha256(v.tobytes()).hexdigest())
EOF
/tmp/inchroot.sh "$OUT" "python3 model.py $IN/tiny-llama-256"
rm -f "$OUT/f16.gguf"
"$TPCONV" convert "$M" -o "$OUT/f16.gguf" --outtype f16 -q
for q in Q4_K_M Q6_K; do
  /tmp/inchroot.sh "$OUT" "llama-quantize f16.gguf $q.gguf $q >/dev/null 2>&1 && python3 dequant.py $q.gguf > $q.sha256"
done
ls -la "$OUT"
