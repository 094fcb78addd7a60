#!/usr/bin/env bash
# shard --dequantize and merge --dequantize (TAP). The FP8-block, FP8
# per-channel/per-tensor, GPTQ (4-bit act-order, 8-bit, v2) and AWQ folders of
# make_quant.py (real torch 1.13) are sharded with --dequantize at tp 2 and 4:
# each rank's slice is computed from the packed tensors while it is written, so
# a tp that cuts an FP8 block or a GPTQ group (refused without --dequantize) is
# fine. The merged set equals `convert --dequantize` bit for bit (and so every
# rank its slice: the pieces have fixed sizes), verify's structure and layer
# checks pass against it, and the set's config.json has no quantization_config.
# merge --dequantize turns a quantized set (split with its layers) into the same
# dense model.
# usage: shard_dequant_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
export PYTHONDONTWRITEBYTECODE=1
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/lib/tap.sh"
need_torch
tmpdir
cd "$T" || exit 1
if ! "$PY" "$SRC/tests/quant/make_quant.py" "$T" 7 >/dev/null 2>"$T/gen.err"; then
  bad "generate quantized folders" "$(cat "$T/gen.err")"; echo "1..$n"; exit 1
fi
# the LLaMA-shaped layers of make_quant.py (q 300 rows, gate 520: no 128-block or
# GPTQ group falls on a tp 2 or 4 boundary)
cat >plan.json <<'PLAN'
{"name": "q", "rules": [{"match": "q_proj\\.weight$", "split": "col"}, {"match": "o_proj\\.weight$", "split": "row"},
 {"match": "gate_proj\\.weight$", "split": "col"}, {"match": "down_proj\\.weight$", "split": "row"},
 {"match": "(down_proj|o_proj)\\.bias$", "split": "row"}, {"match": "(embed_tokens|lm_head)\\.weight$", "split": "vocab"},
 {"match": "^big\\.weight$", "split": "col"}]}
PLAN
diffsame() { "$TPCONV" diff "$1" "$2" >d.txt 2>&1 && grep -q '^# same: .* 0 differ, 0 only in A, 0 only in B' d.txt; }

for m in fp8 fp8ct gptq4 gptq8 gptqv2 awq; do
  "$TPCONV" convert --dequantize -q "$m" -o "c_$m.safetensors" 2>err || { bad "$m: convert --dequantize" "$(cat err)"; continue; }
  for tp in 2 4; do
    S=s_${m}_$tp
    if ! "$TPCONV" shard "$m" --plan plan.json --tp $tp --dequantize -q -o "$S" 2>err; then bad "$m tp $tp: shard --dequantize" "$(cat err)"; continue; fi
    "$TPCONV" merge -q "$S" -o m.safetensors -f 2>err && diffsame "c_$m.safetensors" m.safetensors &&
      ok "$m tp $tp: shard --dequantize, merged, equals convert --dequantize bit for bit" || bad "$m tp $tp: merge" "$(cat err d.txt | head -4)"
    "$TPCONV" verify --reference "c_$m.safetensors" --shards "$S" >v.txt 2>&1 &&
      ok "$m tp $tp: verify against the dense model passes ($(tail -1 v.txt | cut -c3-40))" || bad "$m tp $tp: verify" "$(grep -v ' pass' v.txt | head -4)"
    if [ -f "$m/config.json" ]; then
      "$PY" -c 'import json, sys; sys.exit("quantization_config" in json.load(open(sys.argv[1])))' "$S/config.json" &&
        ok "$m tp $tp: the set's config.json has no quantization_config" || bad "$m tp $tp: config.json" "$(head -c 300 "$S/config.json")"
    fi
  done
done

# without --dequantize a tp 2 slice would cut an FP8 block: refused, exit 3, nothing written
"$TPCONV" shard fp8 --plan plan.json --tp 2 -o no >/dev/null 2>err; rc=$?
[ "$rc" = 3 ] && grep -q "is split col into 150 output features per rank, not a multiple of 128" err && [ ! -e no/tpconv-manifest.json ] &&
  ok "without --dequantize the same FP8 split is refused (exit 3): $(head -c 120 err)" || bad "fp8 refusal (rc=$rc)" "$(cat err)"

# merge --dequantize: quantized sets, split with their layers, merged dense
"$TPCONV" convert --dequantize -q fp8big -o c_big.safetensors
for tp in 2 8; do
  rm -rf q && "$TPCONV" shard fp8big --plan plan.json --tp $tp -q -o q 2>err &&
    "$TPCONV" merge --dequantize -q q -o mq.safetensors -f 2>>err && diffsame c_big.safetensors mq.safetensors &&
    ok "fp8 [4096, 8192] split at tp $tp with its scale blocks, merge --dequantize equals convert --dequantize" || bad "merge --dequantize fp8 tp $tp" "$(cat err d.txt | head -3)"
done
rm -rf q && "$TPCONV" shard gptq4 --plan plan.json --tp 2 -q -o q 2>err && "$TPCONV" merge --dequantize q -o mg -f -q 2>>err &&
  diffsame c_gptq4.safetensors mg && "$PY" -c 'import json, sys; sys.exit("quantization_config" in json.load(open(sys.argv[1])))' mg/config.json &&
  ok "a GPTQ set merged --dequantize into an HF folder: the dense model, config.json without quantization_config" ||
  bad "merge --dequantize gptq" "$(cat err d.txt | head -3)"

# verify of a quantized set (split with its layers, not dequantized): every weight
# is also dequantized on each rank from its pieces and checked dense
rm -rf q && "$TPCONV" shard gptq4 --plan plan.json --tp 2 -q -o q 2>err && "$TPCONV" verify --reference gptq4 --shards q >v.txt 2>err &&
  grep -Eq '^  structure +model\.layers\.0\.self_attn\.q_proj\.weight +F32 .* pass' v.txt &&
  grep -Eq '^  col +model\.layers\.0\.self_attn\.q_proj\.weight +F32 .* pass' v.txt &&
  grep -Eq '^  row +model\.layers\.0\.mlp\.down_proj\.weight +F32 .* pass' v.txt &&
  grep -Eq '^  structure +model\.layers\.0\.self_attn\.q_proj\.qweight +I32 .* pass' v.txt &&
  ok "verify of a GPTQ tp 2 set: packed tensors bit for bit, and each rank's pieces dequantized against the dense reference (structure, col, row)" ||
  bad "verify GPTQ set" "$(cat err; grep -v ' pass' v.txt | head -5)"
"$TPCONV" verify --reference gptq4 --shards q --no-dequantize >v.txt 2>err && ! grep -q 'q_proj\.weight ' v.txt && grep -q 'q_proj\.qweight' v.txt &&
  ok "verify --no-dequantize checks the set as stored only" || bad "verify --no-dequantize" "$(cat err | head -3)"
rm -rf q && "$TPCONV" shard fp8big --plan plan.json --tp 8 -q -o q 2>err && "$TPCONV" verify --reference fp8big --shards q >v.txt 2>err &&
  grep -Eq '^  structure +big\.weight \(F8_E4M3\) +F8_E4M3 .* pass' v.txt && grep -Eq '^  col +big\.weight +F32 .* pass' v.txt &&
  ok "verify of an FP8 tp 8 set: raw bytes as 'big.weight (F8_E4M3)', the dense weight's column check on 8 ranks" ||
  bad "verify FP8 set" "$(cat err; grep -v ' pass' v.txt | head -5)"

# a set sharded with --dequantize, verified against the quantized reference:
# F32 dense weights against the reference dequantized on the fly; bf16 ones are
# refused with the command that makes a matching reference
rm -rf q && "$TPCONV" shard fp8big --plan plan.json --tp 4 --dequantize --dtype f32 -q -o q 2>err &&
  "$TPCONV" verify --reference fp8big --shards q >v.txt 2>err && grep -Eq '^  col +big\.weight +F32 .* pass' v.txt &&
  ok "verify of an f32 shard --dequantize set against the FP8 reference: dense slices checked" || bad "verify dense f32 set" "$(cat err; grep -v ' pass' v.txt | head -3)"
rm -rf q && "$TPCONV" shard gptq4 --plan plan.json --tp 2 --dequantize -q -o q 2>err
"$TPCONV" verify --reference gptq4 --shards q >v.txt 2>err; rc=$?
[ "$rc" = 3 ] && grep -q "the set holds dequantized F16 weights (shard --dequantize): verify it against the reference dequantized the same way ('tpconv convert --dequantize gptq4 -o dense/', then --reference dense/)" err &&
  ok "verify of an f16 shard --dequantize set against the GPTQ reference says how to check it (exit 3)" || bad "verify dense f16 set (rc=$rc)" "$(cat err)"

echo "1..$n"
[ "$failed" = 0 ]
