#!/usr/bin/env bash
# GGUF (issue 33): read, write, split. quants.gguf holds one small tensor per
# ggml type tpconv decodes, blocks made by llama-quantize; quants.sha256 the
# SHA-256 of each one's F32 values as python3-gguf's dequantize gives them
# (both from make_fixtures.py in the forky chroot). Emits TAP.
# usage: gguf_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
Q=$SRC/tests/gguf/quants.gguf
. "$SRC/tests/lib/tap.sh"
tmpdir
hashes() { "$TPCONV" inspect --hash "$1" | awk '$1 ~ /weight/ {print $1, $NF}' | sort; }

# 1. every type dequantizes to python3-gguf's values, bit for bit
# (its tensors, one per type, have no Hugging Face names: --gguf-names keeps them)
check "dequantize to safetensors (f32)" "$TPCONV" convert "$Q" -o "$T/q.safetensors" --dtype f32 --gguf-names
hashes "$T/q.safetensors" > "$T/got"
sort "$SRC/tests/gguf/quants.sha256" > "$T/want"
for ty in q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k f16 f32; do
  w=$(grep "^$ty.weight " "$T/want") g=$(grep "^$ty.weight " "$T/got")
  if [ -n "$w" ] && [ "$w" = "$g" ]; then ok "$ty equals gguf.quants.dequantize"; else bad "$ty equals gguf.quants.dequantize" "want $w" "got $g"; fi
done

# inspect of a quantized GGUF: the file's bytes and the dequantized size, each named
QK=$SRC/tests/gguf/quantized/Q4_K_M.gguf
"$TPCONV" inspect "$QK" > "$T/insp" 2>&1
if head -1 "$T/insp" | grep -q ", file 417 kB, dequantized 2.49 MB$" && [ "$(stat -c %s "$QK")" = 416832 ]; then
  ok "inspect of a Q4_K_M GGUF: first line names the file's size and the dequantized size"
else bad "inspect of a quantized GGUF names both sizes" "$(head -1 "$T/insp")"; fi

# 2. GGUF -> GGUF keeps every byte (KVs, infos, packed blocks copied)
check "gguf -> gguf" "$TPCONV" convert "$Q" -o "$T/same.gguf"
check "gguf -> gguf is byte-identical" cmp "$T/same.gguf" "$Q"

# 3. --outtype: values written as F32/F16/BF16/Q8_0 (golden hashes: Q8_0
#    checked equal to gguf-py's quants.quantize in the chroot; q8_0 of a GGUF
#    is llama-quantize's Q8_0 file type, so its tensors come in the loader's
#    order and general.quantization_version, general.file_type 7 are added:
#    quants.gguf has too few KVs for llama-quantize itself to load it, and
#    every tensor equals the earlier gguf-py-checked file's); F32 reads back
#    as the dequantized values
i=0
for t in q8_0 f16 bf16 f32; do
  i=$((i+1))
  check "--outtype $t" "$TPCONV" convert "$Q" -o "$T/$t.gguf" --outtype $t
  want=$(sed -n "${i}p" "$SRC/tests/gguf/outtype.sha256")
  got=$(sha256sum < "$T/$t.gguf" | cut -c1-64)
  [ "$want" = "$got" ] && ok "--outtype $t file as expected" || bad "--outtype $t file as expected" "want $want" "got $got"
done
hashes "$T/f32.gguf" > "$T/got32"
diff <(grep -v norm "$T/want") <(grep -v norm "$T/got32") >/dev/null && ok "f32 GGUF reads back the dequantized values" ||
  bad "f32 GGUF reads back the dequantized values" "$(diff "$T/want" "$T/got32" | head -5)"

# 4. gguf-split: a set, read from any of its files, merges back byte-identical
check "--max-shard-size writes a gguf-split set" "$TPCONV" convert "$Q" -o "$T/s.gguf" --max-shard-size 6K
nf=$(ls "$T"/s-000*-of-*.gguf 2>/dev/null | wc -l)
[ "$nf" -ge 2 ] && [ ! -e "$T/s.gguf" ] && ok "the set has $nf files" || bad "the set has several files" "$(ls "$T")"
last=$(ls "$T"/s-000*-of-*.gguf | tail -n 1)
check "merge the set from its last file" "$TPCONV" convert "$last" -o "$T/m.gguf"
check "merged set is byte-identical" cmp "$T/m.gguf" "$Q"
"$TPCONV" inspect "$T/s-00001-of-0000$nf.gguf" > "$T/insp" 2>&1
grep -q "a gguf-split set of $nf files" "$T/insp" && ok "inspect names the set" || bad "inspect names the set" "$(head -3 "$T/insp")"
grep -q "^# kv general.architecture (str) = \"llama\"" "$T/insp" && ok "inspect shows the KVs" || bad "inspect shows the KVs"
mv "$T/s-00002-of-0000$nf.gguf" "$T/gone"
"$TPCONV" inspect "$T/s-00001-of-0000$nf.gguf" > /dev/null 2>"$T/err"; rc=$?
[ $rc = 3 ] && grep -q "s-00002-of-0000$nf.gguf" "$T/err" && ok "a set missing a file: exit 3 naming it" ||
  bad "a set missing a file: exit 3 naming it" "exit $rc" "$(cat "$T/err")"

# 5. refusals
"$TPCONV" convert "$Q" -o "$T/x.safetensors" 2>"$T/err"; rc=$?
[ $rc = 3 ] && grep -q "tensor 'q4_0.weight'.*no Hugging Face name.*--gguf-names" "$T/err" && [ ! -e "$T/x.safetensors" ] &&
  ok "a tensor with no Hugging Face name: exit 3 naming it" || bad "a tensor with no Hugging Face name: exit 3 naming it" "exit $rc" "$(cat "$T/err")"
"$TPCONV" convert "$Q" -o "$T/x.safetensors" --outtype q8_0 2>"$T/err"; rc=$?
[ $rc = 2 ] && ok "--outtype without a GGUF output: exit 2" || bad "--outtype without a GGUF output: exit 2" "exit $rc"
"$TPCONV" convert "$Q" -o "$T/x.gguf" --outtype iq3_s 2>"$T/err"; rc=$?
[ $rc = 2 ] && [ ! -e "$T/x.gguf" ] && ok "--outtype iq3_s refused, nothing written" || bad "--outtype iq3_s refused" "exit $rc $(cat "$T/err")"

# 6. types tpconv reads and copies but does not dequantize (issue 41 item 8):
#    lowbit.gguf (make_lowbit_fixture.py, gguf-py) holds IQ4_XS, IQ2_XXS,
#    IQ4_NL, TQ2_0 and MXFP4 blocks, all dequantized since (tests/quant/fp4_test.sh,
#    iq_test.sh); ulb.gguf is it with iq4_nl.weight retyped Q2_0 [4, 256] (the
#    same 288 bytes), a type tpconv only copies
LB=$T/ulb.gguf
python3 - "$SRC/tests/gguf/lowbit.gguf" "$LB" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
n = b'iq4_nl.weight'
i = b.index(struct.pack('<Q', len(n)) + n) + 8 + len(n)
assert struct.unpack_from('<IQQI', b, i) == (2, 256, 2, 20)
struct.pack_into('<IQQI', b, i, 2, 256, 4, 42)
open(sys.argv[2], 'wb').write(b)
PY
"$TPCONV" inspect "$LB" > "$T/lb" 2>&1; rc=$?
[ $rc = 0 ] && grep -q "^iq4_nl.weight  *Q2_0  *\[4, 256\]  *288  blocks, not dequantized" "$T/lb" &&
  grep -q "^iq4_xs.weight  *F32  *\[4, 256\]  *4096  dequantized from IQ4_XS blocks" "$T/lb" &&
  grep -q "^mxfp4.weight  *F32  *\[2, 256\]  *2048  dequantized from MXFP4 blocks" "$T/lb" &&
  grep -q "tensor types: F32 1, IQ2_XXS 1, IQ4_XS 1, TQ2_0 1, MXFP4 1, Q2_0 1" "$T/lb" &&
  ok "inspect lists Q2_0 by type name and file bytes, IQ/TQ/MXFP4 dequantized" ||
  bad "inspect lists Q2_0 by type name and file bytes, IQ/TQ/MXFP4 dequantized" "exit $rc" "$(head -12 "$T/lb")"
check "gguf -> gguf of undecodable types" "$TPCONV" convert "$LB" -o "$T/lb.gguf"
check "their blocks copied byte-identical" cmp "$T/lb.gguf" "$LB"
check "gguf-split of undecodable types" "$TPCONV" convert "$LB" -o "$T/ls.gguf" --max-shard-size 1K
check "the set merges back byte-identical" "$TPCONV" convert "$(ls "$T"/ls-00002-of-*.gguf)" -o "$T/lm.gguf"
check "merged set equals the file" cmp "$T/lm.gguf" "$LB"
"$TPCONV" convert "$LB" -o "$T/lb.safetensors" --gguf-names 2>"$T/err"; rc=$?
[ $rc = 3 ] && grep -q "tensor 'iq4_nl.weight': tpconv cannot dequantize ggml type Q2_0" "$T/err" && [ ! -e "$T/lb.safetensors" ] &&
  ok "dequantizing Q2_0 blocks: exit 3 naming the type and tensor" ||
  bad "dequantizing Q2_0 blocks: exit 3 naming the type and tensor" "exit $rc" "$(cat "$T/err")"
"$TPCONV" convert "$LB" -o "$T/lq.gguf" --outtype q8_0 2>"$T/err"; rc=$?
[ $rc = 3 ] && grep -q "tensor 'iq4_nl.weight': tpconv cannot dequantize ggml type Q2_0, which GGUF Q8_0 needs" "$T/err" &&
  [ ! -e "$T/lq.gguf" ] && ok "--outtype q8_0 of Q2_0: refused before writing, naming it" ||
  bad "--outtype q8_0 of Q2_0: refused before writing, naming it" "exit $rc" "$(cat "$T/err")"

echo "1..$n"
[ "$failed" = 0 ]
