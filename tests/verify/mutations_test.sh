#!/usr/bin/env bash
# The mutation suite: shard sets broken the ways sharders break them must all
# fail verify with exit 1 and a report that names a broken tensor. Prints a
# `#` table of the results.
# usage: mutations_test.sh VERIFY_DRIVER SRC
set -u
DRIVER=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/verify/common.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
make_models "$WORK"
cd "$WORK"
# mutation model tp
cases="naive-qkv gpt2 2
naive-qkv gpt2 4
naive-qkv llama-fused 2
naive-qkv llama-fused 4
naive-gateup llama-fused 2
naive-gateup llama-fused 8
naive-gateup dalle2 4
kv-split llama 8
kv-split llama-fused 4
kv-split llama-fused 8
kv-split dalle2 2
row-col-swap llama 2
row-col-swap gpt2 4
row-col-swap llama-bf16 4
row-col-plan llama 2
row-col-plan llama-fused 4
row-col-plan gpt2 2
ranks-swap llama 2
ranks-swap gpt2 8
ranks-swap gpt-neox 4
ranks-swap bert 2
vocab-off-by-one llama 4
vocab-off-by-one gpt2 8
vocab-off-by-one llama-fused 2
vocab-off-by-one bert 4
bias-tp gpt2 2
bias-tp llama-fused 4
bias-tp bert 8"
# Each case runs twice: all checks, then the numeric checks alone (no byte
# comparison), which must catch every mutation on their own.
table="# mutation          model        tp  checks   exit  named  first failing check"
while read -r mut m tp; do
 for checks in all numeric; do
  carg=()
  [ $checks = numeric ] && carg=(--checks layers,blocks,model)
  "$DRIVER" --ref $m/model.safetensors --config $m/config.json --preset "$(preset_of $m)" --tp "$tp" -q \
    --mutate "$mut" "${carg[@]}" > out.txt 2> err.txt
  rc=$?
  named=no
  if [ "$mut" = ranks-swap ]; then
    grep -q 'FAIL' out.txt && named=yes
  else
    while read -r _ name; do
      grep -qF "$name" out.txt && { named=yes; break; }
    done < <(grep '^broken: ' err.txt)
  fi
  first=$(grep -m1 'FAIL' out.txt | awk '{print $1 " " $2}')
  table="$table
# $(printf '%-17s %-12s %2s  %-7s  %4s  %-5s  %s' "$mut" "$m" "$tp" "$checks" "$rc" "$named" "$first")"
  if [ "$rc" = 1 ] && [ "$named" = yes ]; then ok "$mut $m tp $tp ($checks checks) fails, naming the tensor"
  else notok "$mut $m tp $tp ($checks checks): exit $rc, named $named"; sed 's/^/#   /' out.txt err.txt | head -n 20; fi
 done
done <<< "$cases"
# One rank's slice of one layer's tensor swapped with another rank's: the
# model check alone fails and names that layer.
while read -r m tp tensor layer; do
  "$DRIVER" --ref $m/model.safetensors --config $m/config.json --preset "$(preset_of $m)" --tp "$tp" -q \
    --checks model --swap "$tensor" > out.txt 2> err.txt
  rc=$?
  if [ "$rc" = 1 ] && grep -qF "the first layer whose output differs: '$layer'" out.txt; then
    ok "swapped slices of $tensor, $m tp $tp: the model check fails naming $layer"
  else notok "swapped slices of $tensor, $m tp $tp: exit $rc"; sed 's/^/#   /' out.txt err.txt | head -n 20; fi
done <<'EOF2'
gpt-neox 4 gpt_neox.layers.1.attention.query_key_value.weight gpt_neox.layers.1
gpt-neox 2 gpt_neox.layers.0.mlp.dense_4h_to_h.weight gpt_neox.layers.0
bert 4 bert.encoder.layer.1.attention.self.query.weight bert.encoder.layer.1
bert 2 bert.encoder.layer.0.intermediate.dense.weight bert.encoder.layer.0
libai 8 GPT_model.transformer.layers.1.self_attention.query_key_value.weight GPT_model.transformer.layers.1
EOF2
# The same for families added as records alone, on their tiny models of
# tests/gguf/arch (made by transformers 5.12): OLMo 2, and Gemma 2 (sandwich
# norms, sliding layers, softcaps).
while read -r fam tp tensor layer; do
  G="$SRC/tests/gguf/arch/tiny-$fam"
  "$DRIVER" --ref "$G/model.safetensors" --config "$G/config.json" --preset "$fam" --tp "$tp" -q \
    --checks model --swap "$tensor" > out.txt 2> err.txt
  rc=$?
  if [ "$rc" = 1 ] && grep -qF "the first layer whose output differs: '$layer'" out.txt; then
    ok "swapped slices of $tensor, $fam tp $tp: the model check fails naming $layer"
  else notok "swapped slices of $tensor, $fam tp $tp: exit $rc"; sed 's/^/#   /' out.txt err.txt | head -n 20; fi
done <<'EOF3'
olmo2 2 model.layers.1.self_attn.q_proj.weight model.layers.1
gemma2 2 model.layers.1.self_attn.k_proj.weight model.layers.1
gemma2 4 model.layers.0.mlp.down_proj.weight model.layers.0
EOF3
# Gemma 3 text (no GGUF column, so no tests/gguf/arch model): the tiny model
# of tests/data/make_tiny_gemma.py (transformers 5.12's Gemma3ForCausalLM:
# per-head q/k norms, layer_types, two rope thetas, a linear scaling) passes
# at tp 2 and 4, and a swapped slice fails naming its layer.
for tp in 2 4; do
  "$DRIVER" --ref "$SRC/tests/data/tiny_gemma3.safetensors" --config "$SRC/tests/data/tiny_gemma3.json" --preset gemma3 \
    --tp "$tp" -q > out.txt 2> err.txt && ok "gemma3 tp $tp: every check passes, the model check included" ||
    { notok "gemma3 tp $tp"; sed 's/^/#   /' out.txt err.txt | head -n 20; }
done
"$DRIVER" --ref "$SRC/tests/data/tiny_gemma3.safetensors" --config "$SRC/tests/data/tiny_gemma3.json" --preset gemma3 \
  --tp 2 -q --checks model --swap model.layers.2.self_attn.v_proj.weight > out.txt 2> err.txt
rc=$?
if [ "$rc" = 1 ] && grep -qF "the first layer whose output differs: 'model.layers.2'" out.txt; then
  ok "swapped slices of model.layers.2.self_attn.v_proj.weight, gemma3 tp 2: the model check fails naming model.layers.2"
else notok "swapped slices, gemma3 tp 2: exit $rc"; sed 's/^/#   /' out.txt err.txt | head -n 20; fi
echo "$table"
echo "1..$n"
[ "$failed" = 0 ]
