#!/usr/bin/env bash
# LoRA and tensor parallelism (TAP). shard ADAPTER --base BASE at tp 2 and 4
# (llama: plain, rsLoRA with o_proj, rank patterns with gate_proj, an
# embedding; gpt2's Conv1D at tp 2; phi3's fused qkv_proj / gate_up_proj with
# lm_head in modules_to_save; qwen2's lora_bias + DoRA on q/k/v; made by
# make_lora.py and make_lora_tp.py in the forky chroot):
#   - merge of the rank folders gives the adapter back byte for byte
#     (adapter_model.safetensors and adapter_config.json);
#   - each rank folder merged into the base's rank file of the same rank
#     (convert RANK --lora FOLDER) equals that rank of the merged model
#     sharded, tensor for tensor;
#   - the rank folders hold what vLLM's LoRA layers slice (lora_tp_check.py,
#     written from vLLM's source);
#   - refused by name, exit 3 or 2, nothing written: DoRA on a row-parallel
#     base, a base tensor no rule of the plan knows, an adapter of another
#     base, --pp, another --layout.
# merge NEMO_DIR -o DIR: NeMo 1.x tensor-parallel LoRA saves (tp 2; tp 2 x
# pp 2; tp 4 under NeMo 2 / Megatron-Bridge names) into the PEFT adapter NeMo's
# converter makes, which convert --lora merges into its base as NeMo's own merge
# does, bit for bit; inspect; hostile configs.
# usage: lora_tp_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/lib/tap.sh"
tmpdir
F=$SRC/tests/lora
X=$TPCONV
PY=${TPC_PY:-/usr/bin/python3}  # the suite's Python server when there is one (tests/run_all.sh)

# case NAME ADAPTER BASE PRESET TPS...
vcheck=()
split_case() {
  local name=$1 ad=$2 base=$3 preset=$4
  shift 4
  "$X" convert "$base/model.safetensors" --config "$base/config.json" --lora "$ad" -o "$T/$name-merged.safetensors" -q 2>"$T/err" ||
    { bad "$name: the merged model" "$(cat "$T/err")"; return; }
  for tp in "$@"; do
    local s=$T/$name-ad$tp b=$T/base-${base##*/}-$tp mm=$T/$name-mm$tp
    if ! "$X" shard "$ad" --base "$base" --tp "$tp" -o "$s" -q 2>"$T/err"; then
      bad "$name tp $tp: shard --base" "$(cat "$T/err")"; continue
    fi
    "$X" merge "$s" -o "$T/$name-back$tp" -q 2>"$T/err" &&
      cmp -s "$T/$name-back$tp/adapter_model.safetensors" "$ad/adapter_model.safetensors" &&
      cmp -s "$T/$name-back$tp/adapter_config.json" "$ad/adapter_config.json" &&
      ok "$name tp $tp: merged back to the adapter byte for byte" ||
      bad "$name tp $tp: merged back" "$(cat "$T/err")"
    { [ -e "$b" ] || "$X" shard "$base" --tp "$tp" -o "$b" -q 2>"$T/err"; } &&
      "$X" shard "$T/$name-merged.safetensors" --config "$base/config.json" --preset "$preset" --tp "$tp" -o "$mm" -q 2>>"$T/err" ||
      { bad "$name tp $tp: the base and merged sets" "$(cat "$T/err")"; continue; }
    local r good=1
    for ((r = 0; r < tp; r++)); do
      local rf rk=$T/$name-rk$tp-$r.safetensors
      printf -v rf 'model_tp%02d_pp00.safetensors' "$r"
      "$X" convert "$b/$rf" --lora "$(printf '%s/tp%02d_pp00' "$s" "$r")" -o "$rk" -q 2>"$T/err" &&
        "$X" diff "$rk" "$mm/$rf" >"$T/diff" 2>&1 || { good=0; bad "$name tp $tp rank $r" "$(cat "$T/err" "$T/diff" | tail -4)"; }
    done
    [ $good = 1 ] && ok "$name tp $tp: every rank of the adapter merged into the base's rank = the merged model's rank"
    # (vLLM slices no Conv1D; its embedding LoRA is not this check's)
    [ "$preset" != gpt2 ] && [ "${name%embedding}" = "$name" ] && vcheck+=("$ad" "$s" "$tp" $(heads_of "$base"))
  done
}
heads_of() { # "heads kv_heads head_dim" of BASE/config.json (no process)
  local c h nh kv
  c=$(<"$1/config.json")
  [[ $c =~ \"hidden_size\":\ *([0-9]+) ]] && h=${BASH_REMATCH[1]}
  [[ $c =~ \"num_attention_heads\":\ *([0-9]+) ]] && nh=${BASH_REMATCH[1]}
  [[ $c =~ \"num_key_value_heads\":\ *([0-9]+) ]] && kv=${BASH_REMATCH[1]}
  echo "$nh $kv $((h / nh))"
}
for c in plain embedding; do split_case "llama-$c" "$F/llama/$c" "$F/llama" llama 2 4; done
for c in rslora rank-pattern; do split_case "llama-$c" "$F/llama/$c" "$F/llama" llama 4; done
split_case gpt2-conv1d "$F/gpt2/conv1d" "$F/gpt2" gpt2 2
split_case phi3-fused "$F/phi3/fused" "$F/phi3" phi3 2 4
split_case qwen2-bias-dora "$F/qwen2/bias-dora" "$F/qwen2" qwen2 2 4

# a reshard of an adapter set (tp 4 -> 2, --layout peft): the set shard --base writes at tp 2
if "$X" shard "$T/phi3-fused-ad4" --tp 2 --layout peft -o "$T/phi3-re2" -q 2>"$T/err" &&
   "$X" diff "$T/phi3-re2/tp00_pp00" "$T/phi3-fused-ad2/tp00_pp00" >"$T/diff" 2>&1 &&
   "$X" diff "$T/phi3-re2/tp01_pp00" "$T/phi3-fused-ad2/tp01_pp00" >>"$T/diff" 2>&1 &&
   cmp -s "$T/phi3-re2/tp01_pp00/adapter_config.json" "$F/phi3/fused/adapter_config.json"; then
  ok "an adapter set resharded 4 -> 2 (--layout peft) = the adapter split at tp 2"
else bad "adapter reshard 4 -> 2" "$(cat "$T/err" "$T/diff" | tail -4)"; fi

if "$PY" -c 'import torch' 2>/dev/null; then
  check "every rank folder holds what vLLM's LoRA layers slice (q/k/v, qkv_proj, gate_up_proj, row layers, lm_head)" \
    "$PY" "$F/lora_tp_check.py" "${vcheck[@]}"
else
  skip "the vLLM slicing check" "no torch at $PY"
fi

# refusals: exit status, message, nothing written
refused() { # refused DESC RC PATTERN ARGS...
  local d=$1 want=$2 pat=$3
  shift 3
  rm -rf "$T/h"
  "$X" shard "$@" -o "$T/h" 2>"$T/err"
  local rc=$?
  if [ $rc = "$want" ] && grep -q -- "$pat" "$T/err" && [ ! -e "$T/h" ]; then ok "refused: $d"
  else bad "refused: $d (exit $rc)" "$(cat "$T/err")"; fi
}
refused "DoRA on a row-parallel base (down_proj)" 3 \
  "tensor 'base_model.model.model.layers.0.mlp.down_proj.lora_A.weight': DoRA on 'model.layers.0.mlp.down_proj.weight', which the plan splits along its input" \
  "$F/llama/dora" --base "$F/llama" --tp 2
refused "DoRA on an embedding split by vocab" 3 "DoRA on 'model.embed_tokens.weight', which the plan splits along its input (the vocabulary)" \
  "$F/llama/embedding-dora" --base "$F/llama" --tp 2
"$X" plan llama | sed 's/{"match": "self_attn\\\\.q_proj\\\\.(weight|bias)$", "split": "col", "heads": "q"},//' >"$T/noq.json"
refused "a base tensor no rule of the plan knows" 3 \
  "tensor 'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight': its base tensor 'model.layers.0.self_attn.q_proj.weight' is matched by no rule of plan 'llama'" \
  "$F/llama/plain" --base "$F/llama" --plan "$T/noq.json" --tp 2
refused "an adapter of another base" 3 "tensor 'base_model.model.model.layers.0.mlp.gate_up_proj.lora_A.weight': no base tensor 'model.layers.0.mlp.gate_up_proj.weight' for it" \
  "$F/phi3/fused" --base "$F/llama" --tp 2
refused "--pp with --base" 2 "no --pp" "$F/llama/plain" --base "$F/llama" --tp 2 --pp 2
refused "another --layout with --base" 2 "not --layout vllm" "$F/llama/plain" --base "$F/llama" --tp 2 --layout vllm

# NeMo 1.x tensor-parallel LoRA saves into a PEFT adapter folder
for c in tp2 tp2-pp2 tp4-names2; do
  if "$X" merge "$F/nemo/$c" -o "$T/nemo-$c" -q 2>"$T/err" &&
     "$X" diff "$T/nemo-$c/adapter_model.safetensors" "$F/nemo/$c/expected/adapter_model.safetensors" >"$T/diff" 2>&1 &&
     grep -q "\"lora_alpha\":.$(cat "$F/nemo/$c/expected/alpha")," "$T/nemo-$c/adapter_config.json" &&
     grep -q '"target_modules":.\["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"\]' "$T/nemo-$c/adapter_config.json"; then
    ok "NeMo LoRA $c: merged into the PEFT adapter NeMo's converter makes (kqv unfused by query groups, fc1 by rank halves, alpha)"
  else bad "NeMo LoRA $c" "$(cat "$T/err" "$T/diff" "$T/nemo-$c/adapter_config.json" 2>&1 | tail -8)"; fi
done
# the merged PEFT adapter applied to a Llama of its shapes = NeMo's own merge on
# Megatron's fused weights (make_lora_tp.py), bit for bit in f32
"$X" convert "$F/nemo/base" --lora "$T/nemo-tp2" -o "$T/nemo-merged.safetensors" -q 2>"$T/err" &&
  "$X" diff "$T/nemo-merged.safetensors" "$F/nemo/tp2/merged-ref.safetensors" >"$T/diff" 2>&1 &&
  ok "NeMo LoRA tp2 as PEFT, merged by convert --lora = NeMo's merge (alpha / dim, fused q|k|v and gate|up), bit for bit" ||
  bad "NeMo LoRA merged into its base" "$(cat "$T/err" "$T/diff" | tail -4)"
"$X" inspect "$F/nemo/tp2-pp2" >"$T/insp" 2>&1 && grep -q "^# NeMo LoRA save: tp 2, pp 2, 2 layers, r 4, alpha 4; the PEFT adapter 'merge' writes:" "$T/insp" &&
  grep -q "nemo-lora, 1 file, 28 tensors" "$T/insp" && ok "inspect a NeMo LoRA save: its geometry and the PEFT tensors" ||
  bad "inspect a NeMo LoRA save" "$(head -3 "$T/insp")"
nemo_bad() { # nemo_bad DESC SED PATTERN [RM]
  rm -rf "$T/nb" "$T/nbo" && cp -r "$F/nemo/tp2" "$T/nb" && sed -i "$2" "$T/nb/model_config.yaml"
  case ${4:-} in
  truncate) head -c 3000 "$F/nemo/tp2/mp_rank_01/model_weights.ckpt" >"$T/nb/mp_rank_01/model_weights.ckpt" ;;
  ?*) rm -f "$T/nb/$4" ;;
  esac
  "$X" merge "$T/nb" -o "$T/nbo" 2>"$T/err"
  local rc=$?
  if [ $rc = 3 ] && grep -q -- "$3" "$T/err" && [ ! -e "$T/nbo" ]; then ok "NeMo refused: $1"
  else bad "NeMo refused: $1 (exit $rc)" "$(cat "$T/err")"; fi
}
nemo_bad "a truncated rank file" "s/^x//" "mp_rank_01/model_weights.ckpt': failed finding the central directory" \
  truncate
nemo_bad "a model_config.yaml that does not parse" "s/^  lora_tuning:/  lora_tuning: [1, 2/" "model_config.yaml': line [0-9]*: a flow collection must close on its line"
nemo_bad "a missing rank file" "s/^x//" "mp_rank_01/model_weights.ckpt': no such file: model_config.yaml says tp 2, pp 1" mp_rank_01/model_weights.ckpt
nemo_bad "tp 4 in the config, 2 rank files" "s/^tensor_model_parallel_size: 2/tensor_model_parallel_size: 4/" "mp_rank_02/model_weights.ckpt': no such file"
nemo_bad "query groups tp does not divide" "s/^num_query_groups: 4/num_query_groups: 1/" "tp 2 must divide each"
nemo_bad "a hidden size the shapes contradict" "s/^hidden_size: 16/hidden_size: 32/" \
  "tensor 'model.decoder.layers.0.self_attention.adapter_layer.lora_kqv_adapter.linear_in.weight': shape \[2, 16\], where model_config.yaml split by tp 2 gives \[2, 32\]"
nemo_bad "a canonical (unfused) save" "s/variant: nemo/variant: canonical/" "'peft.lora_tuning.variant': not \"nemo\""
nemo_bad "an ungated MLP" "s/^activation: fast-swiglu/activation: gelu/" "an hto4h adapter of a model whose activation is not gated"
done_testing
