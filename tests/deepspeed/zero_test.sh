#!/usr/bin/env bash
# DeepSpeed ZeRO 1/2/3 input (TAP). DeepSpeed is not packaged in Debian: the
# checkpoints are written with real torch following DeepSpeed's save code
# (tests/deepspeed/make_zero.py: file names, keys, partitioning, DeepSpeed's
# class names in the pickles, Python 3.11's getattr-pickled ZeroStageEnum), and
# checked against an independent torch re-implementation of DeepSpeed's
# zero_to_fp32.py (tests/deepspeed/zero_ref.py) and against the model the
# checkpoint was made from. tpconv reads each bit-exactly through inspect,
# convert (safetensors and torch), merge, shard straight into a set, and
# verify --reference; broken and hostile variants exit 3 with the file named,
# leave no output and do not touch the input.
# usage: zero_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
Z=$SRC/tests/deepspeed
. "$SRC/tests/shard/tap.sh"   # ok/bad, $T, run, same; skips without torch
# a torch file equal to a reference file: same keys in the same order, dtypes, shapes, bytes,
# and the same names sharing a storage (zero_to_fp32's shared_params alias is its target's tensor)
torch_same() {
  $PY - "$1" "$2" <<'PY' >"$T/diff" 2>&1
import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
assert list(a) == list(b), (list(a), list(b))
for k in a:
    x, y = a[k], b[k]
    assert x.dtype == y.dtype and x.shape == y.shape, (k, x.dtype, y.dtype, x.shape, y.shape)
    assert x.contiguous().view(-1).view(torch.uint8).equal(y.contiguous().view(-1).view(torch.uint8)), k
def shared(sd):
    g = {}
    for k, v in sd.items():
        g.setdefault(v.storage().data_ptr(), []).append(k)
    return sorted(sorted(x) for x in g.values() if len(x) > 1)
assert shared(a) == shared(b), ('storages shared', shared(a), 'reference', shared(b))
PY
}

for case in "1 2" "2 1" "2 3" "2 4" "3 1" "3 3" "3 4" "3 8"; do
  set -- $case; st=$1 ws=$2; C=$T/z$st-$ws
  $PY "$Z/make_zero.py" "$C" --stage "$st" --world "$ws" --seed "$((st * 10 + ws))" --expected "$C.model.pt" 2>"$T/err" &&
    $PY "$Z/zero_ref.py" "$C" "$C.ref.pt" 2>>"$T/err" || { bad "stage $st world $ws: fixture" "$(tail -3 "$T/err")"; continue; }
  run "$TPCONV" inspect "$C"
  [ "$rc" = 0 ] && grep -q "^# $C: deepspeed-zero$st, " "$T/out" &&
    grep -q "^# DeepSpeed ZeRO stage $st checkpoint global_step14 (deepspeed 0.14.4), iteration 14$" "$T/out" &&
    grep -q "^# data-parallel world size $ws: $ws optim-states files" "$T/out" &&
    grep -q "^# model state: 19 trainable parameters consolidated from the fp32 partitions, 2 frozen, 2 buffers, 1 shared aliases$" "$T/out" &&
    grep -q "^# optimizer state (not read): step, exp_avg, exp_avg_sq" "$T/out" &&
    ok "stage $st world $ws: inspect names framework, world size, model and optimizer state" || bad "stage $st world $ws: inspect" "$(head -6 "$T/out" "$T/err")"
  run "$TPCONV" convert "$C" -o "$T/c.safetensors" -q -f
  [ "$rc" = 0 ] && same "$T/c.safetensors" "$C.ref.pt" && same "$T/c.safetensors" "$C.model.pt" &&
    ok "stage $st world $ws: convert to safetensors equals zero_to_fp32's consolidation and the original model, bit for bit" ||
    bad "stage $st world $ws: convert safetensors" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -5)"
  run "$TPCONV" convert "$C" -o "$T/c.pt" -q -f
  [ "$rc" = 0 ] && torch_same "$T/c.pt" "$C.ref.pt" &&
    ok "stage $st world $ws: convert to torch loads in torch 1.13 equal to zero_to_fp32's, in its order, the shared_params alias on its target's storage" ||
    bad "stage $st world $ws: convert torch" "$(cat "$T/err" "$T/diff" 2>/dev/null | tail -3)"
done

# the optimizer state (convert --optimizer): each moment cut from its parameter's
# elements of the flat partitions, as torch.optim's state_dict, loaded by AdamW
oargs=
for case in "2 3" "3 4"; do
  set -- $case; C=$T/z$1-$2
  mkdir -p "$T/opt$1-$2"
  run "$TPCONV" convert "$C" --optimizer -o "$T/opt$1-$2/optimizer.pt" -q
  [ "$rc" = 0 ] && oargs="$oargs $T/opt$1-$2/optimizer.pt:$(($1 * 10 + $2))" || bad "stage $1 world $2: convert --optimizer: exit $rc" "$(cat "$T/err")"
done
if [ -n "$oargs" ]; then
  $PY "$Z/zero_optim_check.py" $oargs >"$T/py" 2>&1
  while IFS= read -r l; do
    case $l in
      "ok "*) ok "${l#ok * - }" ;;
      "not ok "*) bad "${l#not ok * - }" ;;
      *) diag "${l#\# }" ;;
    esac
  done <"$T/py"
fi
# into a DCP folder with the state (as get_state_dict names it): it reads back to the same optimizer.pt and model
run "$TPCONV" convert "$T/z3-4" --optimizer --format dcp --dcp-ranks 3 --no-extras -o "$T/zd" -q
r1=$rc
run "$TPCONV" convert "$T/zd" --optimizer -o "$T/zdo/optimizer.pt" -q
r2=$rc
run "$TPCONV" convert "$T/zd" --select model -o "$T/zdm.safetensors" -q
[ "$r1$r2$rc" = 000 ] && cmp -s "$T/zdo/optimizer.pt" "$T/opt3-4/optimizer.pt" && same "$T/zdm.safetensors" "$T/z3-4.ref.pt" &&
  ok "stage 3: --optimizer --format dcp --dcp-ranks 3 (model.NAME, optim.state.NAME.*): reads back to the same optimizer.pt, byte for byte, and zero_to_fp32's model" ||
  bad "stage 3: to dcp with the optimizer state: exit $r1 $r2 $rc" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -5)"
run "$TPCONV" inspect --optimizer "$T/z3-4"
[ "$rc" = 0 ] && grep -qx "# optimizer state 'optim': 19 parameters in 1 param group, 38 moments shaped as their parameters (element for element), 19 scalars, 0 values; state keys exp_avg, exp_avg_sq, step" "$T/out" &&
  grep -q "^# \\[18\\] model.model.norm.weight F32 \\[20\\] (group 0): exp_avg F32, exp_avg_sq F32, step F32 \\[\\]" "$T/out" &&
  ok "stage 3: inspect --optimizer ties 38 moments to their parameters" || bad "stage 3: inspect --optimizer" "$(grep optim "$T/out" | head -3; cat "$T/err")"

# merge (a sharded training save consolidates like a set), the tag folder itself,
# and a shard set straight from the ZeRO folder that merges back and verifies
C=$T/z3-4
run "$TPCONV" merge "$C" -o "$T/m.safetensors"
[ "$rc" = 0 ] && same "$T/m.safetensors" "$C.ref.pt" && ok "merge consolidates a ZeRO-3 folder" || bad "merge" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -3)"
run "$TPCONV" convert "$C/global_step14" -o "$T/g.safetensors" -q
[ "$rc" = 0 ] && same "$T/g.safetensors" "$C.ref.pt" && ok "the tag folder (global_step14/) reads the same" || bad "tag folder" "$(cat "$T/err" | head -3)"
cat >"$T/config.json" <<'J'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 20, "num_attention_heads": 4,
 "num_key_value_heads": 2, "intermediate_size": 28, "num_hidden_layers": 2, "vocab_size": 37, "tie_word_embeddings": true}
J
for tp in 2 4; do
  rm -rf "$T/tp"
  run "$TPCONV" shard "$C" --preset llama --config "$T/config.json" --tp "$tp" -o "$T/tp"
  [ "$rc" = 0 ] && "$TPCONV" merge "$T/tp" -o "$T/tpm.safetensors" -f >/dev/null 2>"$T/err" && same "$T/tpm.safetensors" "$C.ref.pt" &&
    "$TPCONV" verify --reference "$C" --shards "$T/tp" >"$T/vout" 2>"$T/err" &&
    ok "shard a ZeRO-3 folder straight to tp $tp: merges back bit-exactly and verifies" ||
    bad "shard tp $tp" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -4)" "$(grep -v pass "$T/vout" 2>/dev/null | head -3)"
done

# an HF folder from a Trainer checkpoint: config.json goes along, DeepSpeed's bookkeeping does not
cp -r "$C" "$T/run"; cp "$T/config.json" "$T/run/"; echo '# consolidation script' >"$T/run/zero_to_fp32.py"
run "$TPCONV" convert "$T/run" -o "$T/hf/" --max-shard-size 10kB
[ "$rc" = 0 ] && [ -f "$T/hf/config.json" ] && [ -f "$T/hf/model.safetensors.index.json" ] && [ ! -e "$T/hf/latest" ] &&
  [ ! -e "$T/hf/zero_to_fp32.py" ] && same "$T/hf" "$C.ref.pt" &&
  ok "a Trainer folder to HF shards: config.json copied, latest and zero_to_fp32.py not" || bad "trainer to hf" "$(ls "$T/hf" 2>&1; cat "$T/err")"

# a Trainer checkpoint folder: with consolidated weights beside, those are read
cp -r "$C" "$T/trainer"
"$TPCONV" convert "$C.ref.pt" -o "$T/trainer/model.safetensors" -q 2>/dev/null
run "$TPCONV" inspect "$T/trainer"
[ "$rc" = 0 ] && grep -q "^# $T/trainer: hf-index" "$T/out" && ok "a Trainer folder with model.safetensors reads its consolidated weights" ||
  bad "trainer folder" "$(head -2 "$T/out" "$T/err")"

# broken and hostile: exit 3, the message, no output, input untouched
hostile() { # NAME STAGE KIND EXPECTED_MESSAGE_REGEX
  local H=$T/h-$1
  rm -rf "$H" "$T/h.safetensors"
  $PY "$Z/make_zero.py" "$H" --stage "$2" --world 2 2>/dev/null
  [ -n "$3" ] && $PY "$Z/zero_hostile.py" "$H" "$3"
  [ -n "${5:-}" ] && eval "$5"
  local before; before=$(cd "$H" && find . -type f -exec sha256sum {} + | sort)
  run "$TPCONV" convert "$H" -o "$T/h.safetensors" -q
  local after; after=$(cd "$H" && find . -type f -exec sha256sum {} + | sort)
  if [ "$rc" = 3 ] && grep -Eq "$4" "$T/err" && [ ! -e "$T/h.safetensors" ] && [ "$before" = "$after" ]; then
    ok "hostile $1: exit 3: $(head -c 150 "$T/err")"
  else
    bad "hostile $1" "rc=$rc" "$(head -3 "$T/err")"
  fi
}
OPT='global_step14/zero_pp_rank_0_mp_rank_00_optim_states.pt'
hostile lying_shapes 2 lying_shapes "'.*/$OPT': tensor 'model.embed_tokens.weight': parameter group 0: needs elements \[0, 37000\) of the group, its partitions hold [0-9]+"
hostile extra_param 2 extra_param "tensor 'model.extra.weight': parameter group 0: needs elements"
hostile extra_param3 3 extra_param "tensor 'model.norm.weight': needs elements \[[0-9]+, [0-9]+\) of every rank's flat groups, which hold [0-9]+"
hostile os_system 2 os_system "'.*/$OPT': pickle GLOBAL: refusing global 'posix.system': it can run code or reach the system \(at byte offset [0-9]+"
hostile getattr_misuse 2 getattr_misuse "'.*/$OPT': pickle result uses builtins.getattr other than as getattr\(class, 'member'\)"
hostile mixed_partition 2 mixed_partition "'.*/$OPT': parameter groups with different data-parallel sizes \(partition_count 2 and 4"
hostile no_zero_stage 2 no_zero_stage "'.*/$OPT': optimizer_state_dict has no zero_stage: not a ZeRO checkpoint"
hostile not_flat 2 not_flat "'.*/$OPT': optimizer_state_dict.single_partition_of_fp32_groups\[0\] is not a flat"
hostile missing_rank 2 "" "expected 2 \*_optim_states.pt files \(partition_count\), found 1" 'rm "$H/global_step14/zero_pp_rank_1_mp_rank_00_optim_states.pt"'
hostile truncated 3 "" "'.*/global_step14/zero_pp_rank_1_mp_rank_00_optim_states.pt'.*offset" 'f=$H/global_step14/zero_pp_rank_1_mp_rank_00_optim_states.pt; head -c 3000 "$f" >"$f.x" && mv "$f.x" "$f"'
hostile latest_escape 2 "" "'latest' must name a folder beside it" 'echo "../../etc" >"$H/latest"'
hostile latest_missing 2 "" "'latest' names global_step99, which is not a folder here" 'echo global_step99 >"$H/latest"'
hostile pipeline 2 "" "a DeepSpeed pipeline-parallel checkpoint \(layer_01-model_00-model_states.pt\)" 'cp "$H/global_step14/mp_rank_00_model_states.pt" "$H/global_step14/layer_01-model_00-model_states.pt"'
hostile model_parallel 2 "" "a model-parallel DeepSpeed checkpoint \(mp_rank_01_model_states.pt\)" 'cp "$H/global_step14/mp_rank_00_model_states.pt" "$H/global_step14/mp_rank_01_model_states.pt"'
hostile no_optim 2 "" "no \*_optim_states.pt files: the fp32 weights ZeRO keeps are in them" 'rm "$H"/global_step14/*_optim_states.pt'

echo "1..$n"
[ "$failed" = 0 ]
