#!/usr/bin/env bash
# convert --outtype with a llama-quantize file type (TAP): the whole file
# equals, byte for byte, what llama.cpp 0.7's llama-quantize (no importance
# matrix) writes from the f32 GGUF (tests/gguf/qmix/whole.sha256, made by
# make_qmix.sh in the forky chroot): the tiny llama, qwen2-moe, gemma (tied
# embeddings) and mixtral models (rows 32 wide: the K types fall back), k256
# (tests/gguf/kquant/q6_k.gguf, rows 256 wide, requantized: a Q6_K tensor that
# stays Q6_K is copied) and k256f (tpconv's f32 GGUF of it: every K type
# quantized from F32 values), and mixtral8 (tiny-mixtral's f32 GGUF with
# expert_count 8: the 8-expert rows), llama80 / qwen2-80 (block_count 80:
# llama.cpp's 70B, attn_v lifted) and llama80mha (its 65B: no lift), q3_k_m
# and q4_k_m: all 17 types for k256f (the k-quants, iq4_nl, iq4_xs, tq1_0,
# tq2_0), for the others the 5 whose choices differ most (q4_0, q2_k, q3_k_m,
# q4_k_m, iq4_xs; llama also q5_1, q3_k_l, q4_k_s, tq2_0: rows of 32 fall back
# to IQ4_NL and Q4_0); edge (make_edge_gguf.py: the quantizers' corner cases,
# zero super-blocks, values below GROUP_MAX_EPS, a lone nonzero value ...):
# all 17; odd (make_edge_gguf.py odd: ffn_down and output rows 48 wide, a
# multiple of no block: llama.cpp 0.7 writes them F16 for every type, the
# 32-block ones and the output's Q8_0 included): iq4_nl, q4_0, q4_k_m, tq2_0;
# every sum is in whole.sha256 and `QMIX_ALL=1` checks them all,
# 204 conversions).
# Then the aliases, the bytes under one thread, and an unknown --outtype
# (exit 2, the types listed, no file written; q2_k_s: why).
# usage: qmix_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
A="$SRC/tests/gguf/arch" Q="$SRC/tests/gguf/qmix/whole.sha256"
. "$SRC/tests/lib/tap.sh"
# the outputs on tmpfs where there is one: each file's commit fsyncs, which on
# a busy disk costs more than the conversion
if [ -d /dev/shm ] && [ -w /dev/shm ]; then tmpdir -p /dev/shm; else tmpdir; fi
TYPES="q4_0 q4_1 q5_0 q5_1 q2_k q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m q6_k iq4_nl iq4_xs tq1_0 tq2_0"
want() { awk -v n="$1.gguf" '$2 == n {print $1}' "$Q"; }
sum() { sha256sum "$1" | cut -d' ' -f1; }
FEW="q4_0 q2_k q3_k_m q4_k_m iq4_xs" LL="q4_0 q2_k q3_k_m q4_k_m q5_1 q3_k_l q4_k_s iq4_xs tq2_0"
[ "${QMIX_ALL:-0}" = 1 ] && FEW=$TYPES LL=$TYPES L80=$TYPES ODD=$TYPES
# one_family NAME INPUT TYPES: each type of INPUT against NAME-TYPE.gguf's sum
one_family() {
  local f=$1 in=$2 types=$3 t bads=""
  for t in $types; do
    rm -f "$T/x.gguf"
    if ! "$TPCONV" convert "$in" -o "$T/x.gguf" --outtype "$t" -q 2> "$T/err"; then
      bads="$bads $t(failed: $(head -c 200 "$T/err"))"
    elif [ "$(sum "$T/x.gguf")" != "$(want "$f-$t")" ]; then
      bads="$bads $t"
    fi
  done
  if [ -z "$bads" ]; then
    ok "$f: $(echo $types | wc -w) types byte-identical to llama-quantize's"
  else
    bad "$f: differs from llama-quantize's for:$bads"
  fi
}
one_family llama "$A/tiny-llama" "$LL"
for f in qwen2-moe gemma mixtral; do
  one_family "$f" "$A/tiny-$f" "$FEW"
done
"$TPCONV" convert "$A/tiny-mixtral" -o "$T/mixtral8.gguf" --outtype f32 -q &&
  sh "$SRC/tests/gguf/set_u32.sh" "$T/mixtral8.gguf" llama.expert_count 8
one_family mixtral8 "$T/mixtral8.gguf" "$FEW"
"$TPCONV" convert "$A/tiny-llama" -o "$T/llama80.gguf" --outtype f32 -q &&
  sh "$SRC/tests/gguf/set_u32.sh" "$T/llama80.gguf" llama.block_count 80
one_family llama80 "$T/llama80.gguf" "${L80:-q3_k_m q4_k_m}"
"$TPCONV" convert "$A/tiny-llama" -o "$T/mha.gguf" --outtype f32 -q &&
  sh "$SRC/tests/gguf/set_u32.sh" "$T/mha.gguf" llama.block_count 80 &&
  sh "$SRC/tests/gguf/set_u32.sh" "$T/mha.gguf" llama.attention.head_count_kv 4
one_family llama80mha "$T/mha.gguf" "${L80:-q3_k_m q4_k_m}"
"$TPCONV" convert "$A/tiny-qwen2" -o "$T/qwen2-80.gguf" --outtype f32 -q &&
  sh "$SRC/tests/gguf/set_u32.sh" "$T/qwen2-80.gguf" qwen2.block_count 80
one_family qwen2-80 "$T/qwen2-80.gguf" "${L80:-q3_k_m q4_k_m}"
one_family k256 "$SRC/tests/gguf/kquant/q6_k.gguf" "$FEW"
"$TPCONV" convert "$SRC/tests/gguf/kquant/q6_k.gguf" -o "$T/k256f.gguf" --outtype f32 -q
one_family k256f "$T/k256f.gguf" "$TYPES"
python3 "$SRC/tests/gguf/make_edge_gguf.py" "$T/edge.gguf"
one_family edge "$T/edge.gguf" "$TYPES"
python3 "$SRC/tests/gguf/make_edge_gguf.py" "$T/odd.gguf" odd
one_family odd "$T/odd.gguf" "${ODD:-iq4_nl q4_0 q4_k_m tq2_0}"

# llama-quantize's aliases and names in any case
rm -f "$T/a.gguf" "$T/b.gguf"
"$TPCONV" convert "$T/k256f.gguf" -o "$T/a.gguf" --outtype q4_k -q &&
"$TPCONV" convert "$T/k256f.gguf" -o "$T/b.gguf" --outtype Q3_K -q
if [ "$(sum "$T/a.gguf" 2>/dev/null)" = "$(want k256f-q4_k_m)" ] && [ "$(sum "$T/b.gguf" 2>/dev/null)" = "$(want k256f-q3_k_m)" ]; then
  ok "--outtype q4_k / Q3_K: the q4_k_m / q3_k_m files"
else
  bad "--outtype q4_k / Q3_K are not the _m files"
fi
# one thread: the same bytes
for t in q2_k iq4_xs; do
  rm -f "$T/a.gguf"
  OMP_NUM_THREADS=1 "$TPCONV" convert "$T/k256f.gguf" -o "$T/a.gguf" --outtype $t -q
  [ "$(sum "$T/a.gguf")" = "$(want k256f-$t)" ] && ok "$t, OMP_NUM_THREADS=1: the same bytes" ||
    bad "$t: OMP_NUM_THREADS=1 changes the bytes"
done

# hostile: unknown types, exit 2, the list of types, nothing written
for ot in bogus q2_k_s iq3_s ""; do
  rm -f "$T/u.gguf"
  "$TPCONV" convert "$A/tiny-llama" -o "$T/u.gguf" --outtype "$ot" 2> "$T/err"; rc=$?
  if [ $rc = 2 ] && grep -qF "q4_0, q4_1, q5_0, q5_1, q2_k, q3_k_s, q3_k_m (q3_k)" "$T/err" && [ ! -e "$T/u.gguf" ]; then
    ok "--outtype '$ot' refused (exit 2) with the list of types"
  else
    bad "--outtype '$ot': exit $rc" "$(cat "$T/err")"
  fi
done
"$TPCONV" convert "$A/tiny-llama" -o "$T/u.gguf" --outtype Q2_K_S 2> "$T/err"; rc=$?
[ $rc = 2 ] && grep -qF "(llama-quantize needs an importance matrix for it, which tpconv does not take)" "$T/err" &&
  ok "--outtype q2_k_s: refused saying it needs an importance matrix" || bad "--outtype Q2_K_S: exit $rc" "$(cat "$T/err")"
rm -f "$T/u.gguf"
"$TPCONV" convert "$SRC/tests/gguf/kquant/q6_k.gguf" -o "$T/u.gguf" --outtype iq2_xs 2> "$T/err"; rc=$?
[ $rc = 2 ] && grep -qF "q5_k_m (q5_k), q6_k, iq4_nl, iq4_xs, tq1_0, tq2_0 or auto" "$T/err" && ok "from a GGUF input too (exit 2)" ||
  bad "GGUF input, --outtype iq2_xs: exit $rc" "$(cat "$T/err")"
done_testing
