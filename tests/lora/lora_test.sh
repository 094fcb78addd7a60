#!/usr/bin/env bash
# convert --lora (TAP): PEFT LoRA adapters merged into tiny bases (tests/lora,
# made by make_lora.py in the forky chroot: transformers 5.12 bases, adapters
# as PEFT v0.20.0 saves them, and ref.safetensors, a torch re-implementation of
# PEFT's merge that cites the lines it follows). f32 cases bit for bit: plain,
# rsLoRA with a regex target_modules and exclude_modules, DoRA, rank/alpha
# patterns, an embedding with lm_head in modules_to_save, DoRA on an
# embedding, GPT-2's Conv1D with lora_bias and with DoRA, two adapters with
# weights; a bf16 base within one bf16 ULP (+ half of the delta's) of PEFT's
# literal formula and bit for bit the f32 merge rounded once; the adapter as a
# torch .bin; GGUF out and in (a q8_0 base as its dequantized copy); a shard
# set as the base; hostile adapters refused with their messages,
# exit 3 and nothing written.
# usage: lora_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/lib/tap.sh"
tmpdir
F=$SRC/tests/lora

merged() { # merged DESC BASE REF ADAPTER...: convert BASE --lora ... equals REF bit for bit
  local d=$1 base=$2 ref=$3 args=()
  shift 3
  for a in "$@"; do args+=(--lora "$a"); done
  rm -f "$T/o.safetensors"
  # shellcheck disable=SC2086 # BASE may carry options after the path
  if "$TPCONV" convert $base "${args[@]}" -o "$T/o.safetensors" -q 2>"$T/err" &&
     "$TPCONV" diff "$T/o.safetensors" "$ref" >"$T/diff" 2>&1; then ok "$d"
  else bad "$d" "$(cat "$T/err" "$T/diff" | tail -6)"; fi
}
for c in plain rslora dora rank-pattern embedding embedding-dora; do
  merged "llama $c: the merged weights are the PEFT re-implementation's, bit for bit in f32" \
    "$F/llama" "$F/llama/$c/ref.safetensors" "$F/llama/$c"
done
for c in conv1d conv1d-dora; do
  merged "gpt2 $c (fan_in_fan_out): bit for bit in f32" "$F/gpt2" "$F/gpt2/$c/ref.safetensors" "$F/gpt2/$c"
done
merged "two adapters in one pass, weights 0.5 and 1.5, applied in order" \
  "$F/llama" "$F/llama/multi-ref.safetensors" "$F/llama/plain:0.5" "$F/llama/rslora:1.5"
merged "a bf16 base: the f32 merge rounded once to bf16, bit for bit" \
  "$F/llama-bf16" "$F/llama-bf16/plain/ref-once.safetensors" "$F/llama-bf16/plain"
"$TPCONV" diff --ulps bf16=1 --atol "bf16=$(cat "$F/llama-bf16/tol")" "$T/o.safetensors" "$F/llama-bf16/plain/ref.safetensors" \
  >"$T/diff" 2>&1 && ok "a bf16 base: within one bf16 ULP + half the delta's of PEFT's literal merge" ||
  bad "bf16 against PEFT's formula" "$(tail -4 "$T/diff")"

# the adapter as a torch .bin (the pickle reader), written by tpconv from the safetensors
mkdir -p "$T/bin" && cp "$F/llama/dora/adapter_config.json" "$T/bin/" &&
  "$TPCONV" convert "$F/llama/dora/adapter_model.safetensors" -o "$T/bin/adapter_model.bin" -q
merged "adapter_model.bin read through the safe pickle reader" "$F/llama" "$F/llama/dora/ref.safetensors" "$T/bin"

# GGUF out: the merged model's GGUF is the reference model's, byte for byte
# (Q/K rows permuted from the computed rows); GGUF in: a base read back from GGUF
mkdir -p "$T/llama" && cp "$F/llama/config.json" "$T/llama/" && cp "$F/llama/dora/ref.safetensors" "$T/llama/model.safetensors"
for ot in f32 q8_0; do
  rm -f "$T/r.gguf" "$T/m.gguf"
  "$TPCONV" convert "$T/llama" -o "$T/r.gguf" --outtype $ot -q 2>"$T/err" &&
    "$TPCONV" convert "$F/llama" --lora "$F/llama/dora" -o "$T/m.gguf" --outtype $ot -q 2>>"$T/err" &&
    cmp -s "$T/r.gguf" "$T/m.gguf" && ok "GGUF $ot output of the merge: the reference model's GGUF, byte for byte" ||
    bad "GGUF $ot output" "$(cat "$T/err")"
done
"$TPCONV" convert "$F/llama" -o "$T/base.gguf" --outtype f32 -q
merged "a GGUF base (read as its Hugging Face model)" "$T/base.gguf" "$F/llama/dora/ref.safetensors" "$F/llama/dora"

# a q8_0 GGUF base, dequantized while read: the merge equals merging into its
# dequantized f32 copy
"$TPCONV" convert "$F/llama" -o "$T/b8.gguf" --outtype q8_0 -q && "$TPCONV" convert "$T/b8.gguf" -o "$T/dq.safetensors" --dtype f32 -q &&
  "$TPCONV" convert "$T/dq.safetensors" --lora "$F/llama/dora" -o "$T/dq-merged.safetensors" -q
merged "a q8_0 GGUF base: as its dequantized copy merged" "$T/b8.gguf --dtype f32" "$T/dq-merged.safetensors" "$F/llama/dora"

# a shard set as the base, merged on the fly
"$TPCONV" shard "$F/llama" --tp 2 -o "$T/tp2/" -q
merged "a tp 2 shard set as the base" "$T/tp2/" "$F/llama/dora/ref.safetensors" "$F/llama/dora"

# hostile adapters: exit 3, the message, no output
refused() { # refused DESC ADAPTER PATTERN
  rm -f "$T/h.safetensors"
  "$TPCONV" convert "$F/llama" --lora "$2" -o "$T/h.safetensors" 2>"$T/err"
  local rc=$?
  if [ $rc = 3 ] && grep -q -- "$3" "$T/err" && [ ! -e "$T/h.safetensors" ]; then ok "refused: $1"
  else bad "refused: $1 (exit $rc)" "$(cat "$T/err")"; fi
}
H=$F/hostile
refused "an adapter tensor with no base tensor" "$H/no-base" \
  "tensor 'base_model.model.model.layers.7.self_attn.q_proj.lora_A.weight': its base tensor 'model.layers.7.self_attn.q_proj.weight' is not in the base"
refused "lora_A of the wrong shape" "$H/shape" "shape \[4, 12\] does not fit base tensor 'model.layers.0.self_attn.q_proj.weight' \[16, 16\]"
refused "lora_A without lora_B" "$H/only-a" "has only one of lora_A and lora_B"
refused "keys with the adapter's name left in" "$H/named-adapter" "lora_A.default.weight': not a key PEFT's LoRA writes"
refused "LoRA on a 1-D tensor" "$H/norm-1d" "LoRA on 'model.norm.weight', which is not a 2-D weight"
# config.json edits of the plain adapter
edit() { # edit DESC PYTHON-STATEMENT-ON-c PATTERN
  rm -rf "$T/cf" && mkdir "$T/cf" && cp "$F/llama/${4:-plain}/adapter_model.safetensors" "$T/cf/"
  python3 - "$F/llama/${4:-plain}/adapter_config.json" "$T/cf/adapter_config.json" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"))
PY
  refused "$1" "$T/cf" "$3"
}
edit "an unknown peft_type" 'c["peft_type"] = "LOHA"' "peft_type 'LOHA': tpconv merges LORA adapters only"
edit "use_dora without magnitudes" 'c["use_dora"] = True' "use_dora is true but module 'model.layers.0.self_attn.q_proj' has no lora_magnitude_vector"
edit "target_parameters with fan_in_fan_out" 'c["target_parameters"] = ["mlp.experts.gate_up_proj"]; c["fan_in_fan_out"] = True' \
  "target_parameters with fan_in_fan_out: PEFT's ParamWrapper does not make such an adapter"
edit "a rank_pattern the tensors contradict" 'c["rank_pattern"] = {"q_proj": 8}' "its rank is 4 but the config (r, rank_pattern) gives 8"
edit "a module target_modules does not name" 'c["target_modules"] = ["q_proj", "k_proj"]' "module 'model.layers.0.self_attn.v_proj' is not among the config's target_modules"
edit "an excluded module" 'c["exclude_modules"] = "model[.]layers[.]1[.].*"' "module 'model.layers.1.self_attn.q_proj' is among the config's exclude_modules"
edit "a regex in Python's own syntax" 'c["target_modules"] = "(?i).*q_proj"' "target_modules pattern '(?i).\*q_proj'"
edit "PiSSA's changed base" 'c["init_lora_weights"] = "pissa_niter_4"' "init_lora_weights 'pissa' changes the base weights"
edit "lora_bias without lora_B.bias" 'c["lora_bias"] = True' "lora_bias is true but module"
edit "r 0" 'c["r"] = 0' "'r' is not a positive integer"
edit "a whole tensor modules_to_save does not list" 'c["modules_to_save"] = None' \
  "a whole tensor whose module modules_to_save does not name" embedding
# an FP8 weight without --dequantize: its bytes are not its values
mkdir -p "$T/fp8" && python3 - "$T/fp8/model.safetensors" <<'PY'
import json, struct, sys
h = json.dumps({"model.layers.0.self_attn.q_proj.weight": {"dtype": "F8_E4M3", "shape": [16, 16], "data_offsets": [0, 256]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(256))
PY
rm -f "$T/h.safetensors"
"$TPCONV" convert "$T/fp8/model.safetensors" --lora "$F/llama/plain" -o "$T/h.safetensors" 2>"$T/err"
[ $? = 3 ] && grep -q "is F8_E4M3, not a float weight (quantized? give --dequantize)" "$T/err" && [ ! -e "$T/h.safetensors" ] &&
  ok "refused: an FP8 base weight without --dequantize" || bad "FP8 base" "$(cat "$T/err")"
# lm_head tied to embed_tokens (one storage, a recorded alias): PEFT's merge
# changes both; refused rather than one left behind
python3 - "$F/llama/model.safetensors" "$T/tied.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h, data = json.loads(b[8:8 + n]), b[8 + n:]
a, z = h.pop("lm_head.weight")["data_offsets"]
for k, v in h.items():
    if k != "__metadata__" and v["data_offsets"][0] >= z:
        v["data_offsets"] = [v["data_offsets"][0] - (z - a), v["data_offsets"][1] - (z - a)]
h["__metadata__"] = {"tpconv.aliases": json.dumps({"lm_head.weight": "model.embed_tokens.weight"})}
hb = json.dumps(h).encode()
hb += b" " * (-len(hb) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hb)) + hb + data[:a] + data[z:])
PY
rm -f "$T/h.safetensors"
"$TPCONV" convert "$T/tied.safetensors" --lora "$F/llama/embedding-dora" -o "$T/h.safetensors" 2>"$T/err"
[ $? = 3 ] && grep -q "its base tensor is tied to 'lm_head.weight' (one storage)" "$T/err" && [ ! -e "$T/h.safetensors" ] &&
  ok "refused: a LoRA on an embedding tied to lm_head" || bad "tied embedding" "$(cat "$T/err")"
refused "a folder without adapter_config.json" "$F/llama" "adapter_config.json': no such file"
rm -f "$T/h.safetensors"
"$TPCONV" convert "$F/llama" --lora "$F/llama/plain" -o "$T/h.safetensors" --lora "$H/no-base" 2>"$T/err"
[ $? = 3 ] && [ ! -e "$T/h.safetensors" ] && ok "a good adapter then a bad one: nothing written" || bad "partial merge" "$(cat "$T/err")"
"$TPCONV" convert --help | grep -q -- "--lora DIR\[:WEIGHT\]" && ok "convert --help documents --lora" || bad "--help"

# shard --lora: each rank's slice of a merged weight computed while it is
# written (column windows of the row-parallel o_proj / down_proj included):
# the set merges back to convert --lora's output byte for byte
for c in plain dora embedding-dora rank-pattern; do
  rm -rf "$T/sl" "$T/sl.safetensors" "$T/cl.safetensors"
  if "$TPCONV" shard "$F/llama" --lora "$F/llama/$c" --tp 2 -o "$T/sl" -q 2>"$T/err" &&
     "$TPCONV" merge "$T/sl" -o "$T/sl.safetensors" -q 2>>"$T/err" &&
     "$TPCONV" convert "$F/llama" --lora "$F/llama/$c" -o "$T/cl.safetensors" -q 2>>"$T/err" &&
     cmp -s "$T/sl.safetensors" "$T/cl.safetensors"; then
    ok "shard --lora llama $c at tp 2 merges back to convert --lora's bytes"
  else bad "shard --lora $c" "$(tail -3 "$T/err")"; fi
done
# a fused tensor (GPT-2's c_attn, 3 parts a rank) is not split from its
# computed form: refused by name, nothing written
rm -rf "$T/sg"
"$TPCONV" shard "$F/gpt2" --lora "$F/gpt2/conv1d" --tp 2 -o "$T/sg" 2>"$T/err"
[ $? = 3 ] && grep -q "c_attn.*split in one window a rank, and this one's split takes 3 parts" "$T/err" && [ ! -e "$T/sg" ] &&
  ok "shard --lora refuses a fused tensor's 3-part split of a merged weight (exit 3)" || bad "shard --lora fused" "$(cat "$T/err")"
"$TPCONV" shard "$T/sl" --lora "$F/llama/plain" --tp 2 -o "$T/sx" 2>"$T/err"
[ $? = 2 ] && grep -q "merges into a checkpoint, not a shard set" "$T/err" && [ ! -e "$T/sx" ] &&
  ok "shard --lora refuses a shard set as the base (exit 2)" || bad "shard --lora set" "$(cat "$T/err")"
done_testing
