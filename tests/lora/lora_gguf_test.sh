#!/usr/bin/env bash
# convert --base (TAP): PEFT LoRA adapters to llama.cpp's adapter GGUF and
# back. tests/lora/gguf/ (make_lora_gguf.py in the forky chroot) holds
# adapters for tests/gguf/arch's tiny-llama (f32, every projection, the
# embedding and lm_head) and tiny-qwen2 (bf16, tied embeddings: no embedding
# LoRA, which llama.cpp cannot apply there) and the files
# llama.cpp's convert_lora_to_gguf.py writes for them: tpconv's are the same
# bytes for llama f32/f16/bf16/q8_0 (Q/K rows of lora_b permuted, token_embd's
# lora_a transposed), qwen2 f32/bf16, phi3 f32 (fused qkv_proj and
# gate_up_proj renamed) and mixtral f32/q8_0 (each layer's experts stacked).
# Read back, the adapter is PEFT's
# file byte for byte, and merges as the original does. Hostile adapter GGUFs
# (gguf_mutate.py) and PEFT adapters an adapter GGUF cannot express are
# refused: exit 3, the message, nothing written. An activated LoRA
# (alora_invocation_tokens) converts to the reference's bytes, back, and
# through tp shards; its merge is refused, as PEFT refuses it.
# usage: lora_gguf_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/lib/tap.sh"
tmpdir
F=$SRC/tests/lora/gguf A=$SRC/tests/gguf/arch

for c in llama:f32 llama:f16 llama:bf16 llama:q8_0 qwen2:f32 qwen2:bf16 phi3:f32 mixtral:f32 mixtral:q8_0; do
  fam=${c%:*} ot=${c#*:}
  if "$TPCONV" convert "$F/$fam/adapter" --base "$A/tiny-$fam" --outtype "$ot" -o "$T/$fam-$ot.gguf" -q 2>"$T/err" &&
     cmp -s "$T/$fam-$ot.gguf" "$F/$fam/ref-$ot.gguf"; then
    ok "$fam $ot: the adapter GGUF is convert_lora_to_gguf.py's, byte for byte"
  else bad "$fam $ot adapter GGUF" "$(cat "$T/err")"; fi
done
# back to PEFT: the adapter's own safetensors where the dtype is kept
for c in llama:f32 qwen2:bf16 phi3:f32 mixtral:f32; do
  fam=${c%:*} ot=${c#*:}
  if "$TPCONV" convert "$F/$fam/ref-$ot.gguf" --base "$A/tiny-$fam" -o "$T/$fam-back" -q 2>"$T/err" &&
     cmp -s "$T/$fam-back/adapter_model.safetensors" "$F/$fam/adapter/adapter_model.safetensors"; then
    ok "$fam: PEFT -> GGUF ($ot) -> PEFT gives the adapter's adapter_model.safetensors byte for byte"
  else bad "$fam back to PEFT" "$(cat "$T/err")"; fi
done
grep -q '"lora_alpha": 8,' "$T/llama-back/adapter_config.json" && grep -q '"r": 4,' "$T/llama-back/adapter_config.json" &&
  ok "adapter_config.json: lora_alpha and r from the GGUF" || bad "adapter_config.json" "$(cat "$T/llama-back/adapter_config.json")"
"$TPCONV" convert "$A/tiny-llama" --lora "$F/llama/adapter" -o "$T/m1.safetensors" -q 2>"$T/err" &&
  "$TPCONV" convert "$A/tiny-llama" --lora "$T/llama-back" -o "$T/m2.safetensors" -q 2>>"$T/err" &&
  cmp -s "$T/m1.safetensors" "$T/m2.safetensors" &&
  ok "the adapter read back merges into the base as the original does, bit for bit" || bad "merge of the read-back adapter" "$(cat "$T/err")"
# q8_0's lora_a read back dequantized (f32), lora_b F16 (the reference's
# fallback for rows that are not whole blocks); quantized again the same
if "$TPCONV" convert "$F/llama/ref-q8_0.gguf" --base "$A/tiny-llama" -o "$T/q8/adapter" -q 2>"$T/err" &&
   "$TPCONV" convert "$T/q8/adapter" --base "$A/tiny-llama" -o "$T/q8-again.gguf" --outtype q8_0 -q 2>>"$T/err" &&
   cmp -s "$T/q8-again.gguf" "$F/llama/ref-q8_0.gguf"; then
  ok "q8_0 read back (Q8_0 dequantized) and written again: the same q8_0 file"
else bad "q8_0 round trip" "$(cat "$T/err")"; fi

run "$TPCONV" inspect "$F/llama/ref-q8_0.gguf"
[ "$rc" = 0 ] && grep -q "^# GGUF, architecture llama, 6 KVs, a LoRA adapter of 32 tensors (convert FILE --base BASE" "$T/out" &&
  ok "inspect says an adapter GGUF is one" || bad "inspect" "$(head -3 "$T/out" "$T/err")"
run "$TPCONV" convert "$F/llama/ref-f32.gguf" -o "$T/nobase/"
[ "$rc" = 3 ] && grep -q "an adapter GGUF (general.type \"adapter\"): convert it with --base BASE" "$T/err" && [ ! -e "$T/nobase" ] &&
  ok "an adapter GGUF to a folder without --base: refused, not read as a model" || bad "no --base" "rc $rc $(cat "$T/err")"

# hostile adapter GGUFs: exit 3, the message, no folder
python3 "$SRC/tests/lora/gguf_mutate.py" "$F/llama/ref-f32.gguf" "$T" || bad "gguf_mutate.py"
gone() { # gone DESC FILE PATTERN
  rm -rf "$T/h"
  "$TPCONV" convert "$T/$2.gguf" --base "$A/tiny-llama" -o "$T/h" 2>"$T/err"
  local rc=$?
  if [ $rc = 3 ] && grep -q -- "$3" "$T/err" && [ ! -e "$T/h" ]; then ok "refused: $1"
  else bad "refused: $1 (exit $rc)" "$(cat "$T/err")"; fi
}
gone "no adapter.lora.alpha" no-alpha "adapter.lora.alpha missing: PEFT's lora_alpha cannot be known"
gone "general.type model" type-model "general.type 'model': not an adapter GGUF"
gone "an unknown general.type" type-unknown "general.type 'mmproj': not an adapter GGUF"
gone "no general.type" no-type "general.type missing: not an adapter GGUF"
gone "adapter.type other than lora" adapter-ia3 "adapter.type 'ia3': tpconv reads LoRA adapters"
gone "another architecture than the base's" arch-qwen2 "general.architecture 'qwen2', but the base '.*tiny-llama' is LlamaForCausalLM"
gone "lora_a without lora_b" only-a "tensor 'blk.0.attn_q.weight.lora_a': lora_a without its lora_b"
gone "lora_b without lora_a" only-b "tensor 'blk.1.ffn_up.weight.lora_b': lora_b without its lora_a"
gone "a pair whose shapes do not fit" shape "tensor 'blk.0.attn_v.weight.lora_b': shapes do not fit: blk.0.attn_v.weight.lora_a is \[4, 32\] and .lora_b \[8, 8\]"
gone "a norm beside the pairs" norm "tensor 'output_norm.weight': not a .lora_a or .lora_b tensor"
gone "a pair with no Hugging Face module" no-hf-name "tensor 'blk.0.attn_bogus.weight.lora_a': no Hugging Face module for 'blk.0.attn_bogus.weight'"

# rank 32: lora_b whole Q8_0 blocks, its Q/K rows permuted in quantized form;
# q8_0 -> PEFT (f32) -> q8_0 is the same file, and -> PEFT -> f32 the same values
mkdir -p "$T/r32"
if "$TPCONV" convert "$T/rank32" --base "$A/tiny-llama" -o "$T/r32/a.gguf" --outtype q8_0 -q 2>"$T/err" &&
   "$TPCONV" convert "$T/r32/a.gguf" --base "$A/tiny-llama" -o "$T/r32/rank32" -q 2>>"$T/err" &&
   "$TPCONV" convert "$T/r32/rank32" --base "$A/tiny-llama" -o "$T/r32/b.gguf" --outtype q8_0 -q 2>>"$T/err" &&
   "$TPCONV" convert "$T/r32/rank32" --base "$A/tiny-llama" -o "$T/r32/c.gguf" -q 2>>"$T/err" &&
   "$TPCONV" diff --gguf-names "$T/r32/c.gguf" "$T/r32/a.gguf" >"$T/diff" 2>&1 && cmp -s "$T/r32/a.gguf" "$T/r32/b.gguf"; then
  ok "rank 32: a Q8_0 lora_b with permuted rows read back and written again unchanged"
else bad "rank 32 q8_0" "$(cat "$T/err" "$T/diff" | tail -5)"; fi

# PEFT adapters an adapter GGUF cannot express, or that do not fit the base
L=$SRC/tests/lora
nogguf() { # nogguf DESC ADAPTER BASE PATTERN [ARGS...]
  local d=$1 ad=$2 base=$3 pat=$4
  shift 4
  rm -f "$T/w.gguf"
  "$TPCONV" convert "$ad" --base "$base" -o "$T/w.gguf" "$@" 2>"$T/err"
  local rc=$?
  if [ $rc = 3 ] && grep -q -- "$pat" "$T/err" && [ ! -e "$T/w.gguf" ]; then ok "refused: $d"
  else bad "refused: $d (exit $rc)" "$(cat "$T/err")"; fi
}
nogguf "rsLoRA" "$L/llama/rslora" "$L/llama" "use_rslora (llama.cpp scales by alpha / r, not alpha / sqrt(r)): an adapter GGUF cannot express it"
nogguf "DoRA" "$L/llama/dora" "$L/llama" "use_dora (llama.cpp has no DoRA magnitudes)"
nogguf "modules_to_save" "$L/llama/embedding" "$L/llama" "modules_to_save (an adapter GGUF holds LoRA pairs only)"
nogguf "GPT-2's lora_bias" "$L/gpt2/conv1d" "$L/gpt2" "lora_bias (llama.cpp has no LoRA bias)"
nogguf "lora_A without lora_B" "$L/hostile/only-a" "$L/llama" "q_proj' has only one of lora_A and lora_B"
nogguf "lora_A that does not fit the base's weights" "$L/hostile/shape" "$L/llama" "shape \[4, 12\] does not fit base tensor 'model.layers.0.self_attn.q_proj.weight' \[16, 16\]"
mkdir -p "$T/cfgonly" && cp "$L/llama/config.json" "$T/cfgonly/"
nogguf "a module of a layer past the base's (config.json only)" "$L/hostile/no-base" "$T/cfgonly" "layer 7, but the base's config.json has 2 layers"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["tie_word_embeddings"]=True; json.dump(c,open(sys.argv[2],"w"))' \
  "$A/tiny-llama/config.json" "$T/cfgonly/tied.json" && mkdir -p "$T/tied" && mv "$T/cfgonly/tied.json" "$T/tied/config.json"
nogguf "an embedding LoRA on a base with tied embeddings (llama.cpp aborts)" "$F/llama/adapter" "$T/tied" \
  "module 'model.embed_tokens' (token_embd): the base ties its output projection to the token embedding"
# usage: exit 2
run "$TPCONV" convert "$F/llama/adapter" --base "$A/tiny-llama" -o "$T/x.safetensors"
[ "$rc" = 2 ] && grep -q "converts to an adapter GGUF: -o NAME.gguf" "$T/err" && ok "usage: an adapter folder goes to .gguf" || bad "usage .gguf" "$(cat "$T/err")"
run "$TPCONV" convert "$F/llama/adapter" --base "$A/tiny-llama" -o "$T/x.gguf" --outtype auto
[ "$rc" = 2 ] && grep -q "'auto' fails on its LoRA tensors" "$T/err" && [ ! -e "$T/x.gguf" ] && ok "usage: --outtype auto refused (the reference's fails)" || bad "auto" "$(cat "$T/err")"
run "$TPCONV" convert "$F/llama/ref-f32.gguf" --base "$A/tiny-llama" -o "$T/y" --outtype f16
[ "$rc" = 2 ] && ok "usage: --outtype reading an adapter GGUF back" || bad "outtype back" "$(cat "$T/err")"
run "$TPCONV" convert "$F/llama/adapter" --base "$A/tiny-llama" -o "$T/llama-f32.gguf"
[ "$rc" = 2 ] && grep -q "use --force" "$T/err" && ok "an existing output is not overwritten without --force" || bad "exists" "rc $rc $(cat "$T/err")"

# a merge into Mixtral's experts written as GGUF: the merged experts stacked as
# computed weights, the tensors those of the merged checkpoint's GGUF
mkdir -p "$T/mxm" && cp "$A/tiny-mixtral"/*.json "$A/tiny-mixtral"/tokenizer* "$T/mxm/" &&
  "$TPCONV" convert "$A/tiny-mixtral" --lora "$F/mixtral/adapter" -o "$T/mxm/model.safetensors" -q 2>"$T/err" &&
  "$TPCONV" convert "$T/mxm" -o "$T/mxm-a.gguf" --outtype q8_0 -q 2>>"$T/err" &&
  "$TPCONV" convert "$A/tiny-mixtral" --lora "$F/mixtral/adapter" -o "$T/mxm-b.gguf" --outtype q8_0 -q 2>>"$T/err" &&
  "$TPCONV" diff "$T/mxm-a.gguf" "$T/mxm-b.gguf" >"$T/diff" 2>&1 &&
  ok "mixtral: convert --lora into a q8_0 GGUF stacks the merged experts (the merged model's GGUF tensors)" ||
  bad "mixtral merged GGUF" "$(cat "$T/err" "$T/diff" | tail -4)"

# Mixtral's experts: a layer's stack written only when every expert's w1, w2
# and w3 has a pair (the reference drops the rest silently); a quantized stack
# is not read back
mkdir -p "$T/mx/adapter" && cp "$F/mixtral/adapter/adapter_config.json" "$T/mx/adapter/" &&
  "$TPCONV" convert "$F/mixtral/adapter/adapter_model.safetensors" --drop 'layers[.]1[.].*experts[.]2[.]w2' \
    -o "$T/mx/adapter/adapter_model.safetensors" -q
"$TPCONV" convert "$T/mx/adapter" --base "$A/tiny-mixtral" -o "$T/mx.gguf" 2>"$T/err"
[ $? = 3 ] && grep -q "layer 1: LoRA pairs on 11 of its 12 experts' weights (ffn_gate_exp, ffn_down_exp, ffn_up_exp of each)" "$T/err" &&
  [ ! -e "$T/mx.gguf" ] && ok "refused: a layer whose experts are not all adapted (exit 3)" || bad "partial experts" "$(cat "$T/err")"
"$TPCONV" convert "$F/mixtral/ref-q8_0.gguf" --base "$A/tiny-mixtral" -o "$T/mx-back" 2>"$T/err"
[ $? = 3 ] && grep -q "a quantized stack of experts' LoRA pairs is not read back by tpconv yet" "$T/err" &&
  [ ! -e "$T/mx-back" ] && ok "refused: reading back a q8_0 stack of experts' pairs (exit 3)" || bad "q8_0 experts back" "$(cat "$T/err")"

# an activated LoRA (alora_invocation_tokens): to GGUF as the reference
# writes it (adapter.alora.invocation_tokens after the alpha), back to PEFT
# with the tokens, sharded and merged back; a merge into the base refused
# (PEFT does not merge one)
mkdir -p "$T/alora/adapter" && cp "$F/llama/adapter/adapter_model.safetensors" "$F/llama-alora/adapter/adapter_config.json" "$T/alora/adapter/"
if "$TPCONV" convert "$T/alora/adapter" --base "$A/tiny-llama" --outtype f32 -o "$T/alora.gguf" -q 2>"$T/err" &&
   cmp -s "$T/alora.gguf" "$F/llama-alora/ref-f32.gguf"; then
  ok "aLoRA f32: the adapter GGUF is convert_lora_to_gguf.py's, byte for byte"
else bad "aLoRA adapter GGUF" "$(cat "$T/err")"; fi
"$TPCONV" inspect "$F/llama-alora/ref-f32.gguf" 2>&1 | grep -q "a LoRA adapter of 32 tensors (convert FILE --base BASE -o DIR/: the PEFT adapter), activated (aLoRA) after 3 invocation tokens" &&
  ok "inspect names an aLoRA adapter GGUF and its invocation tokens" || bad "inspect aLoRA" "$("$TPCONV" inspect "$F/llama-alora/ref-f32.gguf" 2>&1 | head -3)"

if "$TPCONV" convert "$F/llama-alora/ref-f32.gguf" --base "$A/tiny-llama" -o "$T/alora-back" -q 2>"$T/err" &&
   cmp -s "$T/alora-back/adapter_model.safetensors" "$F/llama/adapter/adapter_model.safetensors" &&
   python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["alora_invocation_tokens"] != [5, 17, 3])' "$T/alora-back/adapter_config.json"; then
  ok "aLoRA back to PEFT: the tensors byte for byte, alora_invocation_tokens [5, 17, 3]"
else bad "aLoRA back to PEFT" "$(cat "$T/err")"; fi
if "$TPCONV" shard "$T/alora/adapter" --base "$A/tiny-llama" --tp 2 -o "$T/alora-tp" -q 2>"$T/err" &&
   "$TPCONV" merge "$T/alora-tp" -o "$T/alora-m" -q 2>>"$T/err" &&
   cmp -s "$T/alora-m/adapter_model.safetensors" "$F/llama/adapter/adapter_model.safetensors" &&
   grep -q alora_invocation_tokens "$T/alora-m/adapter_config.json"; then
  ok "aLoRA sharded for tp 2 and merged back: the adapter byte for byte, its tokens kept"
else bad "aLoRA tp" "$(cat "$T/err")"; fi
rm -f "$T/al.safetensors"
"$TPCONV" convert "$A/tiny-llama" --lora "$T/alora/adapter" -o "$T/al.safetensors" 2>"$T/err"
[ $? = 3 ] && grep -q "'alora_invocation_tokens' is set: an activated LoRA (aLoRA) acts only after its invocation tokens" "$T/err" &&
  [ ! -e "$T/al.safetensors" ] && ok "refused: merging an aLoRA into its base (exit 3)" || bad "aLoRA merge" "$(cat "$T/err")"
python3 - "$T/alora/adapter/adapter_config.json" "$T/alora/adapter/adapter_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["alora_invocation_tokens"] = None
c["invocation_string"] = "<|start_of_role|>assistant"
json.dump(c, open(sys.argv[2], "w"))
PY
"$TPCONV" convert "$T/alora/adapter" --base "$A/tiny-llama" --outtype f32 -o "$T/al2.gguf" 2>"$T/err"
[ $? = 3 ] && grep -q "invocation_string without alora_invocation_tokens" "$T/err" && [ ! -e "$T/al2.gguf" ] &&
  ok "refused: an invocation_string the reference would tokenize (exit 3)" || bad "invocation_string" "$(cat "$T/err")"
done_testing
