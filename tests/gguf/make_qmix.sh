#!/bin/sh
# The references for convert --outtype with a llama-quantize mixture
# (tests/gguf/qmix_test.sh): llama.cpp 0.7's own llama-quantize, run in the
# forky chroot without an importance matrix, of tpconv's f32 GGUF of each tiny
# family (32 wide: the K types fall back to Q4_0 / Q5_0 / Q5_1 / Q8_0,
# IQ4_XS to IQ4_NL, TQ1_0 / TQ2_0 to Q4_0, and
# output.weight is Q8_0), and of two files whose rows are 256 wide, so that
# the K types apply; and mixtral8 (below). k256 is tests/gguf/kquant/q6_k.gguf itself
# (--allow-requantize; a Q6_K tensor that stays Q6_K is copied), and k256f,
# tpconv's f32 GGUF of it (every type quantized from F32 values). Only the
# sha256 of each file is kept: tests/gguf/qmix/whole.sha256, in the order
# qmix_test.sh reads it.
#
# usage: make_qmix.sh TPCONV   (as root: /work/bin/inchroot)
set -eu
TPCONV=$(realpath "$1") SRC=$(cd "$(dirname "$0")/../.." && pwd)
R=/var/cache/tpconv-interop/forky
IN=/tmp/qmix-$$ OUT=$R$IN
FAMS="llama qwen2-moe gemma mixtral"
TYPES=${QMIX_TYPES:-"q4_0 q4_1 q5_0 q5_1 q2_k q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m q6_k iq4_nl iq4_xs tq1_0 tq2_0"}
mkdir -p "$OUT"
for f in $FAMS; do
  "$TPCONV" convert "$SRC/tests/gguf/arch/tiny-$f" -o "$OUT/$f-f32.gguf" --outtype f32 -q
done
# mixtral8: tiny-mixtral's f32 GGUF with llama.expert_count set to 8 (the
# n_expert == 8 rows: attn_v, attn_k Q8_0, attn_output Q5_K); llama-quantize
# reads only the hyperparameters, and tpconv copies the KVs as they are
"$TPCONV" convert "$SRC/tests/gguf/arch/tiny-mixtral" -o "$OUT/mixtral8-in.gguf" --outtype f32 -q
sh "$SRC/tests/gguf/set_u32.sh" "$OUT/mixtral8-in.gguf" llama.expert_count 8
# llama80, qwen2-80: block_count set to 80, what llama.cpp calls a 70B model
# (attn_v Q3_K / Q4_K lifted to Q5_K); llama80mha: with as many KV heads as
# heads, a 65B (no lift)
"$TPCONV" convert "$SRC/tests/gguf/arch/tiny-llama" -o "$OUT/llama80-in.gguf" --outtype f32 -q
sh "$SRC/tests/gguf/set_u32.sh" "$OUT/llama80-in.gguf" llama.block_count 80
cp "$OUT/llama80-in.gguf" "$OUT/llama80mha-in.gguf"
sh "$SRC/tests/gguf/set_u32.sh" "$OUT/llama80mha-in.gguf" llama.attention.head_count_kv 4
"$TPCONV" convert "$SRC/tests/gguf/arch/tiny-qwen2" -o "$OUT/qwen2-80-in.gguf" --outtype f32 -q
sh "$SRC/tests/gguf/set_u32.sh" "$OUT/qwen2-80-in.gguf" qwen2.block_count 80
cp "$SRC/tests/gguf/kquant/q6_k.gguf" "$OUT/k256-in.gguf"
"$TPCONV" convert "$SRC/tests/gguf/kquant/q6_k.gguf" -o "$OUT/k256f-in.gguf" --outtype f32 -q
# edge: the quantizers' corner cases (make_edge_gguf.py: zero super-blocks,
# values below GROUP_MAX_EPS, a lone nonzero value ...), rows 256 and 512 wide
python3 "$SRC/tests/gguf/make_edge_gguf.py" "$OUT/edge-in.gguf"
# odd: rows of 48 (ffn_down, output), a multiple of no block: llama-quantize
# 0.7 writes them F16 for every type, IQ4_NL, Q4_0 and Q8_0 included
python3 "$SRC/tests/gguf/make_edge_gguf.py" "$OUT/odd-in.gguf" odd
for f in $FAMS; do
  for t in $TYPES; do
    T=$(echo "$t" | tr a-z A-Z)
    /work/bin/inchroot "$IN" llama-quantize "$f-f32.gguf" "$f-$t.gguf" "$T" 1 > "$OUT/log" 2>&1 ||
      { cat "$OUT/log" >&2; exit 1; }
  done
done
for k in mixtral8 llama80 llama80mha qwen2-80 k256 k256f edge odd; do
  for t in $TYPES; do
    T=$(echo "$t" | tr a-z A-Z)
    /work/bin/inchroot "$IN" llama-quantize --allow-requantize "$k-in.gguf" "$k-$t.gguf" "$T" 1 > "$OUT/log" 2>&1 ||
      { cat "$OUT/log" >&2; exit 1; }
  done
done
(cd "$OUT" && for f in $FAMS mixtral8 llama80 llama80mha qwen2-80 k256 k256f edge odd; do for t in $TYPES; do sha256sum "$f-$t.gguf"; done; done) > "${QMIX_SUMS:-$SRC/tests/gguf/qmix/whole.sha256}"
echo "$OUT"
