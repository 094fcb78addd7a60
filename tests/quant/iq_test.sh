#!/usr/bin/env bash
# GGUF's lattice and ternary types read (TAP): tests/quant/iq/iq.gguf holds
# llama.cpp 0.7's llama-quantize output for IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
# IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS, TQ1_0 and TQ2_0 (make_iq_gguf.sh: 3
# tensors each, one with zero groups and an outlier), iq.sha256 the SHA-256
# of the F32 values python3-gguf 0.19's dequantize gives for each tensor;
# convert and inspect --hash must give them bit for bit, diff sees them equal. Hostile variants
# (the blocks truncated, a row not whole blocks) refused, exit 3, with their
# messages, nothing written.
# usage: iq_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/lib/tap.sh"
tmpdir
F=$SRC/tests/quant/iq

if "$TPCONV" convert "$F/iq.gguf" -o "$T/g.safetensors" --dtype f32 --gguf-names -q 2>"$T/err"; then
  "$TPCONV" inspect --hash "$T/g.safetensors" | awk '$1 ~ /weight/ {print $1, $NF}' | sort > "$T/got"
  for ty in $(awk '{print $2}' "$F/iq.sha256" | sort -u); do
    t=$(echo "$ty" | tr A-Z a-z)
    grep "^$t\." "$F/iq.sha256" | awk '{print $1, $3}' | sort | diff - <(grep "^$t\." "$T/got") > "$T/diff" &&
      ok "GGUF $ty converted: 3 tensors equal gguf.quants.dequantize bit for bit" ||
      bad "GGUF $ty equals gguf.quants.dequantize" "$(cat "$T/diff")"
  done
else bad "GGUF IQ/TQ to safetensors" "$(cat "$T/err")"; fi
"$TPCONV" inspect --hash "$F/iq.gguf" 2>"$T/err" | awk '$1 ~ /weight/ {for (i = 2; i <= NF; i++) if (length($i) == 64) print $1, $i}' | sort > "$T/got"
awk '{print $1, $3}' "$F/iq.sha256" | sort | diff - "$T/got" > "$T/diff" &&
  ok "inspect --hash of the GGUF itself: all 33 tensors' values" || bad "inspect --hash" "$(cat "$T/diff" "$T/err" | head -5)"

# diff reads the blocks through the same decoders: the GGUF equals its values;
# one flipped bit in TQ2_0's blocks is found (exit 1, the tensor named)
"$TPCONV" diff --gguf-names "$F/iq.gguf" "$T/g.safetensors" > "$T/d" 2>&1 && grep -q "33 equal, 0 within tolerance, 0 differ" "$T/d" &&
  ok "diff: the GGUF's 33 tensors equal their dequantized copy" || bad "diff of the GGUF and its values" "$(cat "$T/d")"
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[-100] ^= 0x10; open(sys.argv[2], "wb").write(b)' \
  "$F/iq.gguf" "$T/flip.gguf"
"$TPCONV" diff --gguf-names "$T/flip.gguf" "$T/g.safetensors" > "$T/d" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "^tq2_0.blk.0.ffn_down.weight: values differ in 1 of 1024 elements" "$T/d" &&
  ok "diff: a flipped bit in a TQ2_0 block differs in that one element" || bad "diff of a flipped bit" "exit $rc" "$(cat "$T/d")"

# hostile NAME MESSAGE PYTHON: iq.gguf edited by PYTHON (b: its bytearray;
# ne(name, ne0, ne1) rewrites a tensor's shape) is refused, exit 3, with MESSAGE
hostile() {
  rm -f "$T/h.gguf" "$T/h.safetensors"
  python3 - "$F/iq.gguf" "$T/h.gguf" "$3" <<'PY' || { bad "$1: the fixture edit" ""; return; }
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
def ne(name, ne0, ne1):
    n = name.encode()
    i = b.index(struct.pack('<Q', len(n)) + n) + 8 + len(n)
    struct.pack_into('<QQ', b, i + 4, ne0, ne1)
exec(sys.argv[3])
open(sys.argv[2], 'wb').write(b)
PY
  "$TPCONV" convert "$T/h.gguf" -o "$T/h.safetensors" --dtype f32 --gguf-names -q 2>"$T/err"; local rc=$?
  if [ $rc = 3 ] && grep -qF -- "$2" "$T/err" && [ ! -e "$T/h.safetensors" ]; then ok "$1"
  else bad "$1" "exit $rc" "$(cat "$T/err")"; fi
}
hostile "TQ2_0 blocks cut short: refused naming the tensor and the sizes" \
  "tensor 'tq2_0.blk.0.ffn_down.weight': data (264 bytes) runs past the end of the file (11000 bytes; truncated?)" \
  "del b[11000:]"
hostile "IQ2_XXS row of 128 (half a super-block): refused" \
  "tensor 'iq2_xxs.token_embd.weight': ne[0] = 128 is not a multiple of the IQ2_XXS block (256)" \
  "ne('iq2_xxs.token_embd.weight', 128, 4)"
hostile "IQ4_NL row of 16 (half a block): refused" \
  "tensor 'iq4_nl.blk.0.attn_q.weight': ne[0] = 16 is not a multiple of the IQ4_NL block (32)" \
  "ne('iq4_nl.blk.0.attn_q.weight', 16, 48)"
hostile "IQ1_M tensor made a row longer: its blocks overlap the next tensor's, refused" \
  "tensor 'iq1_m.blk.0.attn_q.weight': data offset 4800, expected 4864 (tensors follow each other in order, each padded to 32 bytes)" \
  "ne('iq1_m.token_embd.weight', 256, 3)"

echo "1..$n"
[ "$failed" = 0 ]
