#!/usr/bin/env bash
# convert --lora and shard --lora on mixture-of-experts bases (TAP): the tiny
# bases and adapters of tests/lora/moe (make_lora_moe.py in the forky chroot;
# ref.safetensors a torch re-implementation of PEFT's ParamWrapper merge that
# cites the lines it follows), bit for bit in f32: PEFT's target_parameters on
# fused 3-D experts ([E, in, out] gpt-oss with square down_proj experts told
# apart by the family record; [E, out, in] Granite-MoE; a 2-D parameter), a
# LoRA on each expert's linear layers (Mixtral, one tensor an expert); each
# sharded with tp and with --ep merges back to the same bytes; what cannot be
# told or merged refused by name, exit 3, nothing written. Mixtral's adapter
# made on transformers 5 (target_parameters on the fused
# mlp.experts.gate_up_proj / down_proj) merges into the base that keeps one
# tensor an expert, through the family record's hf_fused names.
# usage: lora_moe_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/lib/tap.sh"
tmpdir
F=$SRC/tests/lora/moe

for c in gptoss/params granite/params mixtral/experts mixtral/params qwen3moe/params; do
  rm -f "$T/o.safetensors"
  if "$TPCONV" convert "$F/${c%/*}" --lora "$F/$c" -o "$T/o.safetensors" -q 2>"$T/err" &&
     "$TPCONV" diff "$T/o.safetensors" "$F/$c/ref.safetensors" >"$T/diff" 2>&1; then
    ok "$c: the merged weights are the PEFT re-implementation's, bit for bit in f32"
  else bad "$c" "$(cat "$T/err" "$T/diff" | tail -6)"; fi
  for a in "--tp 2" "--tp 2 --ep 2"; do
    rm -rf "$T/sh" "$T/sm.safetensors"
    # shellcheck disable=SC2086 # $a is two options
    if "$TPCONV" shard "$F/${c%/*}" --lora "$F/$c" $a -o "$T/sh" -q 2>"$T/err" &&
       "$TPCONV" merge "$T/sh" -o "$T/sm.safetensors" -q 2>>"$T/err" && cmp -s "$T/sm.safetensors" "$T/o.safetensors"; then
      ok "$c: shard --lora $a merges back to convert --lora's bytes"
    else bad "$c shard $a" "$(tail -3 "$T/err")"; fi
  done
done

# gpt-oss's MXFP4 experts dequantized while read, the LoRA over them: what a
# merge into the dequantized copy gives, also sharded (tp 2, --ep 2)
Q=$SRC/tests/quant/fp4/gptoss-mxfp4
mkdir -p "$T/dqc" && cp "$Q/config.json" "$T/dqc/"
if "$TPCONV" convert "$Q" --dequantize -o "$T/dqc/model.safetensors" -q 2>"$T/err" &&
   "$TPCONV" convert "$T/dqc" --lora "$F/gptoss-mxfp4" -o "$T/q1.safetensors" -q 2>>"$T/err" &&
   "$TPCONV" convert "$Q" --dequantize --lora "$F/gptoss-mxfp4" -o "$T/q2.safetensors" -q 2>>"$T/err" &&
   cmp -s "$T/q1.safetensors" "$T/q2.safetensors"; then
  ok "gpt-oss MXFP4 experts: --dequantize --lora in one pass equals the merge into the dequantized copy"
else bad "MXFP4 --lora" "$(cat "$T/err")"; fi
rm -rf "$T/qs" "$T/qs.safetensors"
"$TPCONV" shard "$Q" --dequantize --lora "$F/gptoss-mxfp4" --tp 2 --ep 2 -o "$T/qs" -q 2>"$T/err" &&
  "$TPCONV" merge "$T/qs" -o "$T/qs.safetensors" -q 2>>"$T/err" && "$TPCONV" diff "$T/qs.safetensors" "$T/q2.safetensors" >"$T/diff" 2>&1 &&
  ok "gpt-oss MXFP4 experts: shard --dequantize --lora --tp 2 --ep 2 merges back to the same tensors" ||
  bad "MXFP4 --lora --ep" "$(cat "$T/err" "$T/diff" | tail -3)"

# the adapter itself sharded beside its base (shard ADAPTER --base BASE): each
# expert's LoRA with its expert, in its EP group's folders; merged back byte
# for byte, and each rank's adapter merged into the base's rank file equals
# that rank of the merged model's set
X=$F/mixtral
"$TPCONV" shard "$X" --tp 2 --ep 2 -o "$T/base-ep" -q 2>"$T/err" &&
  "$TPCONV" convert "$X" --lora "$X/experts" -o "$T/mx.safetensors" -q 2>>"$T/err" &&
  "$TPCONV" shard "$T/mx.safetensors" --config "$X/config.json" --tp 2 --ep 2 -o "$T/merged-ep" -q 2>>"$T/err" ||
  bad "the sets to compare with" "$(cat "$T/err")"
for pl in contiguous round_robin; do
  rm -rf "$T/ad-ep" "$T/ad-back"
  if "$TPCONV" shard "$X/experts" --base "$X" --tp 2 --ep 2 --ep-placement $pl -o "$T/ad-ep" -q 2>"$T/err" &&
     "$TPCONV" merge "$T/ad-ep" -o "$T/ad-back" -q 2>>"$T/err" &&
     cmp -s "$T/ad-back/adapter_model.safetensors" "$X/experts/adapter_model.safetensors"; then
    ok "mixtral/experts: the adapter sharded tp 2 --ep 2 ($pl) merges back byte for byte"
  else bad "adapter --ep $pl" "$(cat "$T/err")"; fi
done
rm -rf "$T/ad-ep" && "$TPCONV" shard "$X/experts" --base "$X" --tp 2 --ep 2 -o "$T/ad-ep" -q 2>"$T/err"
good=1
for r in 0 1; do
  rm -f "$T/rk.safetensors"
  "$TPCONV" convert "$T/base-ep/model_tp0${r}_pp00.safetensors" --lora "$T/ad-ep/tp0${r}_pp00" -o "$T/rk.safetensors" -q 2>>"$T/err" &&
    "$TPCONV" diff "$T/rk.safetensors" "$T/merged-ep/model_tp0${r}_pp00.safetensors" >"$T/diff" 2>&1 || { good=0; bad "ep rank $r" "$(cat "$T/err" "$T/diff" | tail -3)"; }
done
[ $good = 1 ] && ok "mixtral/experts --ep 2: each rank's adapter merged into the base's rank equals the merged model's rank"
# a target_parameters adapter on fused experts split beside its base (tp 2:
# B's rows with the experts' out dim, gpt-oss's interleaved gate/up in whole
# pairs, Granite's [gate | up] per part; A's columns with their in dim):
# merged back byte for byte, and each rank merges alone into the base's rank
for c in gptoss/params granite/params; do
  b=$F/${c%/*} good=1
  rm -rf "$T/pw" && mkdir -p "$T/pw"
  if ! { "$TPCONV" shard "$F/$c" --base "$b" --tp 2 -o "$T/pw/ad" -q && "$TPCONV" merge "$T/pw/ad" -o "$T/pw/back" -q &&
         cmp -s "$T/pw/back/adapter_model.safetensors" "$F/$c/adapter_model.safetensors" &&
         "$TPCONV" shard "$b" --tp 2 -o "$T/pw/base" -q && "$TPCONV" convert "$b" --lora "$F/$c" -o "$T/pw/m.safetensors" -q &&
         "$TPCONV" shard "$T/pw/m.safetensors" --config "$b/config.json" --tp 2 -o "$T/pw/m" -q; } 2>"$T/err"; then
    good=0
    bad "$c: the adapter at tp 2" "$(cat "$T/err")"
  fi
  for r in 0 1; do
    [ $good = 1 ] || break
    "$TPCONV" convert "$T/pw/base/model_tp0${r}_pp00.safetensors" --config "$b/config.json" --lora "$T/pw/ad/tp0${r}_pp00" \
      -o "$T/pw/r.safetensors" -q --force 2>"$T/err" &&
      "$TPCONV" diff "$T/pw/r.safetensors" "$T/pw/m/model_tp0${r}_pp00.safetensors" >"$T/diff" 2>&1 ||
      { good=0; bad "$c rank $r" "$(cat "$T/err" "$T/diff" | tail -3)"; }
  done
  [ $good = 1 ] && ok "$c: the fused-experts adapter at tp 2 merges back byte for byte, and rank by rank into the base's ranks"
done
rm -rf "$T/gp"
"$TPCONV" shard "$F/gptoss/params" --base "$F/gptoss" --tp 2 --ep 2 -o "$T/gp" 2>"$T/err"
[ $? = 3 ] && grep -q "a LoRA of target_parameters on the fused experts 'model.layers.0.mlp.experts.gate_up_proj' with --ep" "$T/err" &&
  [ ! -e "$T/gp" ] && ok "refused: a fused-experts adapter split by expert (--ep; shard BASE --lora merges it)" ||
  bad "fused adapter --ep" "$(cat "$T/err")"
rm -f "$T/g.gguf"
"$TPCONV" convert "$F/gptoss/params" --base "$F/gptoss" -o "$T/g.gguf" 2>"$T/err"
[ $? = 3 ] && grep -q "target_parameters (LoRA on parameters, PEFT's ParamWrapper: the reference takes each key's '<module>.weight'" "$T/err" &&
  [ ! -e "$T/g.gguf" ] && ok "refused: a target_parameters adapter to an adapter GGUF (exit 3)" || bad "target_parameters GGUF" "$(cat "$T/err")"

refused() { # refused DESC BASE ADAPTER PATTERN
  rm -f "$T/h.safetensors"
  "$TPCONV" convert "$2" --lora "$3" -o "$T/h.safetensors" 2>"$T/err"
  local rc=$?
  if [ $rc = 3 ] && grep -q -- "$4" "$T/err" && [ ! -e "$T/h.safetensors" ]; then ok "refused: $1"
  else bad "refused: $1 (exit $rc)" "$(cat "$T/err")"; fi
}
# gpt-oss's down_proj experts are square: without config.json no record says [in, out]
mkdir -p "$T/bare" && cp "$F/gptoss/model.safetensors" "$T/bare/"
refused "square experts with no family record to say their layout" "$T/bare/model.safetensors" "$F/gptoss/params" \
  "module 'model.layers.0.mlp.experts' (target_parameters) fits 'model.layers.0.mlp.experts.down_proj' both as \[experts, out, in\] and as \[experts, in, out\]"
# transformers 5's fused Mixtral experts into the base that keeps one tensor
# an expert: the family record (config.json) says which tensors they are
mkdir -p "$T/bare-mx" && cp "$F/mixtral/model.safetensors" "$T/bare-mx/"
refused "a fused parameter's experts one by one, with no family record to name them" "$T/bare-mx/model.safetensors" \
  "$F/mixtral/params" "'model.layers.0.mlp.experts.gate_up_proj' (not in the base), 'model.layers.0.mlp.experts.down_proj' (not in the base)"
edit() { # edit DESC PYTHON-STATEMENT-ON-c PATTERN
  rm -rf "$T/cf" && mkdir "$T/cf" && cp "$F/gptoss/params/adapter_model.safetensors" "$T/cf/"
  python3 - "$F/gptoss/params/adapter_config.json" "$T/cf/adapter_config.json" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"))
PY
  refused "$1" "$F/gptoss" "$T/cf" "$3"
}
edit "target_parameters naming no parameter of the module" 'c["target_parameters"] = ["mlp.experts.gate_up_proj"]' \
  "module 'model.layers.0.mlp.experts' (target_parameters) adapts none of the base's parameters that fit lora_A 8 x 16 and lora_B 16 x 8 (tried 'model.layers.0.mlp.experts.gate_up_proj')"
edit "a rank_pattern the experts' rows contradict" 'c["rank_pattern"] = {}' \
  "adapts none of the base's parameters that fit lora_A 12 x 16 and lora_B 32 x 12"
edit "target_parameters with use_dora (PEFT's ParamWrapper refuses it)" 'c["use_dora"] = True' \
  "target_parameters with use_dora: PEFT's ParamWrapper does not make such an adapter"
edit "target_parameters that is not a list" 'c["target_parameters"] = "mlp.experts.down_proj"' "'target_parameters' is not a list"
done_testing
