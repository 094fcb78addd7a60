#!/bin/sh
# tests/quant/iq/iq.gguf and iq.sha256 (tests/quant/iq_test.sh): a tiny f32
# GGUF (make_iq_gguf.py input) quantized by llama.cpp 0.7's own llama-quantize
# in the forky chroot to each IQ / TQ type (--pure: every matrix the file
# type's default type; an importance matrix for all, which the types below 4
# bits require; IQ2_S is the default type of the IQ2_M file type), the
# tensors of the 11 outputs gathered into one GGUF, byte for byte, with the
# SHA-256 of python3-gguf's dequantize of each (make_iq_gguf.py combine).
# usage: make_iq_gguf.sh   (as root: /work/bin/inchroot)
set -eu
SRC=$(cd "$(dirname "$0")/../.." && pwd)
R=/var/cache/tpconv-interop/forky
IN=/tmp/iqgen-$$ OUT=$R$IN
mkdir -p "$OUT"
cp "$SRC/tests/quant/make_iq_gguf.py" "$OUT/"
run() { /work/bin/inchroot "$IN" "$@" >"$OUT/log" 2>&1 || { cat "$OUT/log" >&2; exit 1; }; }
run python3 make_iq_gguf.py input in.gguf imat.dat
args=
for p in iq2_xxs:IQ2_XXS iq2_xs:IQ2_XS iq2_s:IQ2_M iq3_xxs:IQ3_XXS iq3_s:IQ3_S iq1_s:IQ1_S iq1_m:IQ1_M \
         iq4_nl:IQ4_NL iq4_xs:IQ4_XS tq1_0:TQ1_0 tq2_0:TQ2_0; do
  t=${p%%:*} ft=${p#*:}
  run llama-quantize --pure --imatrix imat.dat in.gguf "$t.gguf" "$ft" 1
  args="$args $t=$t.gguf"
done
run python3 make_iq_gguf.py combine iq.gguf iq.sha256 $args
cp "$OUT/iq.gguf" "$OUT/iq.sha256" "$SRC/tests/quant/iq/"
rm -rf "$OUT"
echo "wrote $SRC/tests/quant/iq/iq.gguf"
