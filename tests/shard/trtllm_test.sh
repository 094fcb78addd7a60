#!/usr/bin/env bash
# The trtllm layout (TAP): TensorRT-LLM checkpoints, what convert_checkpoint.py
# writes and trtllm-build --checkpoint_dir reads. Four tiny models made by real
# torch (tests/shard/trtllm_ref.py: a GQA LLaMA in fp16 whose vocabulary tp
# does not divide, a Mixtral of 4 experts in bf16, GPT-2 with Conv1D weights and
# biases, a tied Qwen2 with q/k/v biases) shard at tp 2 and 4 (LLaMA also with
# pp 2 over 3 layers; Mixtral with moe_ep 1, 2 and 4, moe_ep 2 at tp 4 being the
# case where TensorRT-LLM's rank order of experts differs from a plain one);
# every rank file and every config key equals what TensorRT-LLM's converters,
# re-implemented in torch from their source, write; merge gives each model back
# bit for bit; verify passes; sets without a manifest (as TensorRT-LLM writes
# them) merge without --preset; trtllm -> trtllm reshards; inspect says what a
# set is; what TensorRT-LLM could not load, or what the model's config does not
# say, is refused by name.
# usage: trtllm_test.sh TPCONV SRCDIR     (needs /usr/bin/python3 with torch)
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
M=$T/m
REF=$H/trtllm_ref.py
$PY "$REF" make "$M" >/dev/null || { echo "1..0 # SKIP model generator failed"; exit 0; }
for m in llama mixtral gpt2 qwen2; do
  "$TPCONV" convert "$M/$m" -o "$M/$m.safetensors" -q || { echo "1..0 # SKIP convert of the test models failed"; exit 0; }
done
preset() { case $1 in qwen2) echo qwen2;; *) echo "$1";; esac; }

# ---- every family at tp 2 and 4: rank files and config against TensorRT-LLM's converters
SPECS=("llama 2 1 1" "llama 4 1 1" "llama 2 2 1" "mixtral 2 1 1" "mixtral 2 1 2" "mixtral 4 1 1" "mixtral 4 1 2"
  "mixtral 4 1 4" "gpt2 2 1 1" "gpt2 4 1 1" "qwen2 2 1 1" "qwen2 4 1 1")
# sanitizer build: the sets the checks below use, one of each family and kind
# of split (pipeline stages, experts by tp and by ep)
[ "$SAN" = 1 ] && SPECS=("llama 2 1 1" "llama 2 2 1" "mixtral 4 1 2" "mixtral 4 1 4" "gpt2 4 1 1" "qwen2 4 1 1")
for spec in "${SPECS[@]}"; do
  set -- $spec
  m=$1 tp=$2 pp=$3 ep=$4 S=$T/${1}_$2_$3_$4 what="$1 tp $2 pp $3 moe_ep $4"
  run "$TPCONV" shard "$M/$m" --preset "$(preset $m)" --tp $tp --pp $pp --ep $ep --layout trtllm -o "$S" -q
  if [ "$rc" != 0 ]; then bad "$what: shard" "$(cat "$T/err")"; continue; fi
  run $PY "$REF" check "$M/$m" "$S" $tp $pp $ep
  [ "$rc" = 0 ] && ok "$what: every tensor and config key equals TensorRT-LLM's converter's ($(tail -n 1 "$T/out"))" ||
    bad "$what: against TensorRT-LLM's converter" "$(tail -6 "$T/out")" "$(tail -3 "$T/err")"
  run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q
  [ "$rc" = 0 ] && same "$M/$m.safetensors" "$S.merged.safetensors" && ok "$what: merge back to Hugging Face names is bit-exact" ||
    bad "$what: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
done

# companions: the tokenizer beside, config.json TensorRT-LLM's (never the model's)
S=$T/llama_2_1_1
$PY - "$S/config.json" <<'PY' 2>"$T/perr" && cmp -s "$S/tokenizer.json" "$M/llama/tokenizer.json" &&
import json, sys
c = json.load(open(sys.argv[1]))
assert c["architecture"] == "LlamaForCausalLM" and "architectures" not in c and "rms_norm_eps" not in c, sorted(c)
assert isinstance(c["rotary_base"], float) and isinstance(c["norm_epsilon"], float) and isinstance(c["vocab_size"], int)
PY
  ok "config.json is TensorRT-LLM's (floats stay floats), the tokenizer is copied beside" || bad "companions" "$(cat "$T/perr")" "$(ls "$S")"
# the model's own config.json is kept beside TensorRT-LLM's and comes back
# byte for byte (issue 41 item 1: a rebuilt one lost sliding_window: null,
# bos/eos, rope_parameters, dtype ...)
for s in llama_2_1_1 mixtral_4_1_2; do
  m=${s%%_*}
  run "$TPCONV" merge "$T/$s" -o "$T/${s}_merged/" -q
  [ "$rc" = 0 ] && cmp -s "$T/$s/tpconv-hf-config.json" "$M/$m/config.json" && cmp -s "$T/${s}_merged/config.json" "$M/$m/config.json" &&
    [ ! -e "$T/${s}_merged/tpconv-hf-config.json" ] && [ -f "$T/${s}_merged/tokenizer.json" ] && same "$M/$m.safetensors" "$T/${s}_merged" &&
    ok "$s: merge into a folder gives the model's own config.json back byte for byte, and the tokenizer" ||
    bad "$s: merge into a folder" "$(cat "$T/err" 2>/dev/null)" "$(ls "$T/${s}_merged" 2>&1)"
done
# a set TensorRT-LLM wrote keeps no model config: merge rebuilds one from TensorRT-LLM's
F=$T/foreign_cfg
cp -r "$S" "$F" && rm "$F/tpconv-hf-config.json" "$F/tpconv-manifest.json"
run "$TPCONV" merge "$F" -o "$T/llama_merged/" -q
# (a real transformers 5 load of these merges: make interop)
[ "$rc" = 0 ] && [ -f "$T/llama_merged/tokenizer.json" ] && same "$M/llama.safetensors" "$T/llama_merged" &&
  $PY - "$M/llama/config.json" "$T/llama_merged/config.json" <<'PY' 2>"$T/perr" &&
import json, sys
want, got = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert got["architectures"] == ["LlamaForCausalLM"] and got["model_type"] == "llama" and "mapping" not in got, got
for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
          "intermediate_size", "rms_norm_eps", "rope_theta", "hidden_act"):
    if k in want:
        assert got[k] == want[k] and type(got[k]) == type(want[k]), (k, got.get(k), want[k])
PY
  ok "merge of a set without the model's config into a folder: a Hugging Face config.json rebuilt from TensorRT-LLM's (same values and types)" ||
  bad "merge into a folder" "$(cat "$T/err" "$T/perr" 2>/dev/null)" "$(ls "$T/llama_merged" 2>&1)"
run "$TPCONV" shard "$M/llama" --preset llama --tp 2 --layout trtllm -o "$T/bare" --no-extras -q
[ "$rc" = 0 ] && [ ! -e "$T/bare/tokenizer.json" ] && $PY "$REF" check "$M/llama" "$T/bare" 2 1 1 >/dev/null &&
  ok "--no-extras: no tokenizer, but TensorRT-LLM's config.json all the same" || bad "--no-extras" "$(cat "$T/err")" "$(ls "$T/bare")"
run "$TPCONV" shard "$M/llama/pytorch_model.bin" --config "$M/llama/config.json" --preset llama --tp 2 --layout trtllm -o "$T/fromfile" -q
[ "$rc" = 0 ] && $PY "$REF" check "$M/llama" "$T/fromfile" 2 1 1 >/dev/null &&
  cmp -s "$T/fromfile/tpconv-hf-config.json" "$M/llama/config.json" &&
  ok "a weights file with --config: the config is written from --config, which is kept beside" || bad "--config" "$(cat "$T/err")"

# verify (the threads backend): the set computes what the model computes
for S in "$T/llama_2_1_1" "$T/mixtral_4_1_2" "$T/gpt2_4_1_1"; do
  m=$(basename "$S" | cut -d_ -f1)
  run "$TPCONV" verify --reference "$M/$m.safetensors" --shards "$S"
  [ "$rc" = 0 ] && ok "verify $(basename "$S") passes ($(tail -n 1 "$T/out" | sed 's/^# //'))" ||
    bad "verify $(basename "$S")" "exit $rc" "$(tail -5 "$T/out")" "$(cat "$T/err")"
done

# ---- sets as TensorRT-LLM writes them (no manifest): the model from config.json
for s in llama_2_2_1 mixtral_4_1_2 mixtral_4_1_4 qwen2_4_1_1 gpt2_4_1_1; do
  F=$T/foreign_$s m=${s%%_*}
  cp -r "$T/$s" "$F" && rm "$F/tpconv-manifest.json"
  run "$TPCONV" merge "$F" -o "$F.safetensors" -q
  if [ "$rc" != 0 ]; then bad "$s without a manifest: merge" "$(cat "$T/err")"; continue; fi
  # tied models: the rank files hold lm_head, which comes back (equal to the embedding)
  "$TPCONV" inspect --json --hash "$F.safetensors" >"$T/a.json" && "$TPCONV" inspect --json --hash "$M/$m.safetensors" >"$T/b.json" &&
    $PY - "$T/a.json" "$T/b.json" <<'PY' >"$T/diff" 2>&1
import json, sys
a = {t["name"]: (t["dtype"], t["shape"], t["sha256"]) for t in json.load(open(sys.argv[1]))["tensors"]}
b = {t["name"]: (t["dtype"], t["shape"], t["sha256"]) for t in json.load(open(sys.argv[2]))["tensors"]}
extra = set(a) - set(b)
emb = "transformer.wte.weight" if "transformer.wte.weight" in b else "model.embed_tokens.weight"
assert extra <= {"lm_head.weight"} and all(a[k] == b[k] for k in b), (extra, [k for k in b if a.get(k) != b[k]])
assert not extra or a["lm_head.weight"] == b[emb]
PY
  [ $? = 0 ] && ok "$s without a manifest merges without --preset: bit-exact (a tied lm_head kept, equal to the embedding)" ||
    bad "$s foreign merge" "$(cat "$T/diff")"
done
run "$TPCONV" inspect "$T/foreign_mixtral_4_1_2"
[ "$rc" = 0 ] && grep -q '^# shard set: layout trtllm (TensorRT-LLM checkpoint.*tp 4, pp 1, 4 rank files, no tpconv manifest; the merged model (preset mixtral)' "$T/out" &&
  grep -q 'block_sparse_moe.experts.3.w2.weight' "$T/out" && ok "inspect of a TensorRT-LLM checkpoint: what it is, then the merged model" ||
  bad "inspect foreign" "$(head -3 "$T/out")" "$(cat "$T/err")"
run "$TPCONV" inspect "$T/mixtral_4_1_2"
[ "$rc" = 0 ] && grep -q '^# shard set: layout trtllm, tp 4, pp 1, ep 2' "$T/out" && ok "inspect of a set tpconv wrote: layout trtllm, ep 2" ||
  bad "inspect manifest set" "$(head -2 "$T/out")"

# ---- reshard: no file between
run "$TPCONV" shard "$T/mixtral_4_1_2" --tp 2 --ep 2 --layout trtllm -o "$T/re_m" -q
[ "$rc" = 0 ] && $PY "$REF" check "$M/mixtral" "$T/re_m" 2 1 2 >"$T/out" &&
  ok "reshard trtllm tp 4 x moe_ep 2 -> trtllm tp 2 x moe_ep 2: TensorRT-LLM's checkpoint at tp 2" || bad "reshard trtllm -> trtllm" "$(cat "$T/err" "$T/out" | tail -5)"
run "$TPCONV" shard "$T/llama_2_2_1" --tp 4 --layout trtllm -o "$T/re_l" -q
[ "$rc" = 0 ] && $PY "$REF" check "$M/llama" "$T/re_l" 4 1 1 >"$T/out" &&
  ok "reshard trtllm tp 2 x pp 2 -> trtllm tp 4: the config from the set's own" || bad "reshard llama" "$(cat "$T/err" "$T/out" | tail -5)"
run "$TPCONV" shard "$T/gpt2_4_1_1" --tp 2 -o "$T/re_t" -q && run "$TPCONV" merge "$T/re_t" -o "$T/re_t.safetensors" -q
[ "$rc" = 0 ] && same "$M/gpt2.safetensors" "$T/re_t.safetensors" && cmp -s "$T/re_t/config.json" "$M/gpt2/config.json" &&
  cmp -s "$T/re_m/tpconv-hf-config.json" "$M/mixtral/config.json" &&
  ok "reshard trtllm -> tpconv layout -> merge: bit-exact; the model's config.json travels (trtllm -> trtllm too)" ||
  bad "reshard to tpconv" "$(cat "$T/err" "$T/diff" 2>/dev/null)"

# ---- refused, with nothing written
refuse() { # CODE WHAT GREP ARGS...
  local code=$1 what=$2 want=$3; shift 3
  rm -rf "$T/no"
  run "$TPCONV" shard "$@" --layout trtllm -o "$T/no" -q
  [ "$rc" = "$code" ] && grep -q -- "$want" "$T/err" && [ ! -e "$T/no/rank0.safetensors" ] && ok "refused: $what (exit $code)" ||
    bad "refuse $what" "exit $rc" "$(cat "$T/err")"
}
mkdir -p "$T/cfg_noeps" && $PY -c 'import json,sys; c=json.load(open(sys.argv[1])); del c["rms_norm_eps"]; json.dump(c, open(sys.argv[2], "w"))' \
  "$M/llama/config.json" "$T/cfg_noeps/config.json"
refuse 3 "a config without rms_norm_eps (TensorRT-LLM's norm_epsilon is not guessed)" "no rms_norm_eps" \
  "$M/llama/pytorch_model.bin" --config "$T/cfg_noeps/config.json" --preset llama --tp 2
refuse 2 "--ep-placement round-robin (TensorRT-LLM's experts are contiguous per moe_ep rank)" "contiguous block of experts" \
  "$M/mixtral" --preset mixtral --tp 4 --ep 2 --ep-placement round-robin
mkdir -p "$T/phi" && $PY -c 'import json,sys; c=json.load(open(sys.argv[1])); c["architectures"]=["Phi3ForCausalLM"]; json.dump(c, open(sys.argv[2], "w"))' \
  "$M/llama/config.json" "$T/phi/config.json"
refuse 3 "an architecture the layout does not write" "not Phi3ForCausalLM" "$M/llama/pytorch_model.bin" --config "$T/phi/config.json" --preset llama --preset-force --tp 2
mkdir -p "$T/tied" && $PY -c 'import json,sys; c=json.load(open(sys.argv[1])); c["tie_word_embeddings"]=True; json.dump(c, open(sys.argv[2], "w"))' \
  "$M/llama/config.json" "$T/tied/config.json"
refuse 3 "tied embeddings but an lm_head.weight that differs" "lm_head.weight" "$M/llama/pytorch_model.bin" --config "$T/tied/config.json" --preset llama --tp 2
$PY - "$M" <<'PY'
import sys, torch, os
sd = torch.load(os.path.join(sys.argv[1], "llama", "pytorch_model.bin"))
x = dict(sd); x["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(4)
torch.save(x, os.path.join(sys.argv[1], "extra.bin"))
y = dict(sd); y["model.layers.1.input_layernorm.weight"] = y["model.layers.1.input_layernorm.weight"].float()
torch.save(y, os.path.join(sys.argv[1], "mixed.bin"))
z = dict(sd)
for l in range(3):
    for n, rows in (("q", 64), ("k", 16), ("v", 16)):
        z["model.layers.%d.self_attn.%s_proj.bias" % (l, n)] = torch.zeros(rows, dtype=torch.float16)
torch.save(z, os.path.join(sys.argv[1], "bias.bin"))
PY
refuse 3 "q/k/v biases the config does not announce (attention_bias)" "does not say attention_bias" \
  "$M/bias.bin" --config "$M/llama/config.json" --preset llama --tp 2
refuse 3 "a tensor TensorRT-LLM has no parameter for" "rotary_emb.inv_freq" "$M/extra.bin" --config "$M/llama/config.json" --preset llama --tp 2
refuse 3 "a tensor of another dtype than the model's" "model.layers.1.input_layernorm.weight" "$M/mixed.bin" --config "$M/llama/config.json" --preset llama --tp 2
# a set whose config.json says other head counts than its rank files hold
F=$T/broken
cp -r "$T/foreign_llama_2_2_1" "$F" && $PY -c 'import json,sys; c=json.load(open(sys.argv[1])); c["num_key_value_heads"]=4; json.dump(c, open(sys.argv[1], "w"))' "$F/config.json"
run "$TPCONV" merge "$F" -o "$F.safetensors" -q
[ "$rc" = 3 ] && grep -q "attention.qkv.weight" "$T/err" && grep -q "rank[0-9].safetensors" "$T/err" && [ ! -e "$F.safetensors" ] &&
  ok "a qkv whose rows do not fit config.json's head counts: exit 3 naming the tensor and file" || bad "broken qkv" "exit $rc" "$(cat "$T/err")"
F=$T/quantized
cp -r "$T/foreign_llama_2_2_1" "$F" && $PY -c 'import json,sys; c=json.load(open(sys.argv[1])); c["quantization"]["quant_algo"]="W8A16"; json.dump(c, open(sys.argv[1], "w"))' "$F/config.json"
run "$TPCONV" merge "$F" -o "$F.safetensors" -q
[ "$rc" = 3 ] && grep -q "quantized checkpoint" "$T/err" && [ ! -e "$F.safetensors" ] &&
  ok "a quantized TensorRT-LLM checkpoint is refused (exit 3), not read as dense" || bad "quantized" "exit $rc" "$(cat "$T/err")"
# transformers 5 keeps rope_theta in rope_parameters (interop found the layout
# refusing such configs): rotary_base comes from there; a scaled rope_type that
# rotary_scaling cannot say yet is refused, not dropped
R5=$T/tf5 && mkdir -p "$R5" && cp "$M/llama.safetensors" "$R5/model.safetensors"
$PY - "$M/llama/config.json" "$R5/config.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1])); theta = c.pop("rope_theta", 10000.0); c.pop("rope_scaling", None)
c["rope_parameters"] = {"rope_theta": 500000.0, "rope_type": "default"}
json.dump(c, open(sys.argv[2], "w"))
PYEOF
run "$TPCONV" shard "$R5" --preset llama --tp 2 --layout trtllm -o "$T/tf5_set" -q
[ "$rc" = 0 ] && $PY -c 'import json,sys; c=json.load(open(sys.argv[1])); sys.exit(0 if c["rotary_base"] == 500000.0 else 1)' "$T/tf5_set/config.json" &&
  ok "a transformers 5 config (rope_parameters): rotary_base from rope_parameters.rope_theta" || bad "rope_parameters" "exit $rc" "$(cat "$T/err")"
# a scaled rope_type reads the same from rope_parameters as from the legacy
# rope_scaling (issue 41 item 5): rotary_scaling is that object
$PY -c 'import json,sys; p=sys.argv[1]; c=json.load(open(p)); c["rope_parameters"].update(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=64); json.dump(c, open(p,"w"))' "$R5/config.json"
run "$TPCONV" shard "$R5" --preset llama --tp 2 --layout trtllm -o "$T/tf5_l3" -q
[ "$rc" = 0 ] && $PY -c 'import json,sys; r=json.load(open(sys.argv[1]))["rotary_scaling"]; sys.exit(0 if r["rope_type"] == "llama3" and r["factor"] == 8.0 and r["original_max_position_embeddings"] == 64 else 1)' "$T/tf5_l3/config.json" &&
  ok "rope_type llama3 in rope_parameters: rotary_scaling holds it" || bad "rope_type llama3 in rope_parameters" "exit $rc" "$(cat "$T/err")"
$PY -c 'import json,sys; p=sys.argv[1]; c=json.load(open(p)); r=c.pop("rope_parameters"); c["rope_theta"]=r.pop("rope_theta"); c["rope_scaling"]=r; json.dump(c, open(p,"w"))' "$R5/config.json"
run "$TPCONV" shard "$R5" --preset llama --tp 2 --layout trtllm -o "$T/tf4_l3" -q
[ "$rc" = 0 ] && $PY -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); a["rotary_scaling"].pop("rope_theta"); sys.exit(0 if a["rotary_scaling"] == b["rotary_scaling"] and a["rotary_base"] == b["rotary_base"] else 1)' "$T/tf5_l3/config.json" "$T/tf4_l3/config.json" &&
  ok "the same scaling in rope_scaling: the same rotary_scaling and rotary_base" || bad "rope_scaling llama3" "exit $rc" "$(cat "$T/err")"
echo "1..$n"
[ "$failed" = 0 ]
