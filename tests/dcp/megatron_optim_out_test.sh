#!/usr/bin/env bash
# Optimizer state INTO a Megatron-Core torch_dist set (TAP): shard --layout
# megatron-dist --optimizer writes Adam's exp_avg, exp_avg_sq and the fp32
# master as Megatron's 'fully_reshardable' form (optimizer.state.{param,
# exp_avg,exp_avg_sq}.KEY, each split as its model tensor KEY; the groups and
# step in common.pt). The source is what torch.save(get_state_dict(...))
# holds for a tiny LLaMA trained in bf16 with fp32 masters, every state value
# naming its parameter and element (make_mcore_optim_out.py gen, torch 1.13);
# tpconv's own Megatron reader gives every value back on its own parameter's
# element (checked against the source rebuilt in Megatron's layout: q/k/v per
# query group, [gate; up], vocab rows padded with zeros), at tp 2 x pp 2,
# after a reshard to tp 1, and byte for byte between a reshard and a direct
# split; a Mixtral's experts at tp 2 x ep 2 x pp 2 and ep 4 over tp 2, in
# the chained expert-parallel optimizer Megatron gives them. What Megatron's
# optimizer cannot hold is refused by name.
# usage: megatron_optim_out_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
G=$SRC/tests/dcp/make_mcore_optim_out.py
. "$SRC/tests/lib/tap.sh"
tmpdir

"$PY" "$G" gen "$T/src" || { bad "make_mcore_optim_out.py gen" ""; done_testing; exit 0; }
S=$T/src/train.pt
FL=(--preset llama --config "$T/src/config.json" --layout megatron-dist --optimizer --megatron-train global-batch-size=8 -q)

run "$TPCONV" shard "$S" "${FL[@]}" --tp 2 --pp 2 -o "$T/s22"
(cd "$T/s22" && find . -type f | sort | tr '\n' ' ') > "$T/tree"
[ "$rc" = 0 ] && [ "$(cat "$T/tree")" = "./iter_0000007/.metadata ./iter_0000007/__0_0.distcp ./iter_0000007/__1_0.distcp ./iter_0000007/__2_0.distcp ./iter_0000007/__3_0.distcp ./iter_0000007/common.pt ./iter_0000007/metadata.json ./latest_checkpointed_iteration.txt ./tpconv-manifest.json " ] &&
  [ "$(cat "$T/s22/latest_checkpointed_iteration.txt")" = 7 ] &&
  ok "shard --optimizer --tp 2 --pp 2: Megatron's iter_0000007/ (the step) and tracker '7', never release/ (whose optimizer Megatron does not load)" ||
  bad "shard --optimizer tp 2 pp 2" "$(cat "$T/err" "$T/tree")"

run "$TPCONV" inspect --optimizer "$T/s22/iter_0000007"
grep -qx "# optimizer state: Megatron's distributed optimizer (fully_reshardable): 15 parameters, 45 state tensors beside them (each element its parameter's), 2 param groups" "$T/out" &&
  grep -qx "# \[1\] model.decoder.layers.0.self_attention.linear_qkv.weight BF16 \[32, 16\] (group 0): exp_avg F32, exp_avg_sq F32, fp32_param F32, step F32 \[\]" "$T/out" &&
  grep -q "^# param group 1: 5 parameters; lr=0.001 .* weight_decay=0 .* wd_mult=0 " "$T/out" && [ "$rc" = 0 ] &&
  grep -qx "# resume: iteration 7, consumed_train_samples 56, learning-rate schedule unknown (None: resume with --override-opt_param-scheduler)" "$T/out" &&
  ok "inspect --optimizer of the set: fully_reshardable, 15 parameters with exp_avg, exp_avg_sq, master and step, two groups; iteration 7, 56 samples" ||
  bad "inspect --optimizer" "$(head -12 "$T/out" "$T/err")"

mkdir -p "$T/a" "$T/b" "$T/c" "$T/d" "$T/e"
"$TPCONV" convert "$T/s22" --optimizer -o "$T/a/optimizer.pt" -q &&
  "$TPCONV" convert "$T/s22/iter_0000007" --optimizer -o "$T/b/optimizer.pt" -q &&
  cmp -s "$T/a/optimizer.pt" "$T/b/optimizer.pt" &&
  ok "convert SET --optimizer reads the set as the torch_dist save it is (the same bytes as its iter_0000007/ folder)" ||
  bad "convert SET --optimizer" ""

# reshard: Megatron names to Hugging Face's by the preset's rules, the state alike
run "$TPCONV" shard "$T/s22" --rules megatron-llama "${FL[@]}" --tp 1 -o "$T/s11"
[ "$rc" = 0 ] && "$TPCONV" convert "$T/s11" --optimizer -o "$T/c/optimizer.pt" -q &&
  ok "reshard tp 2 x pp 2 -> tp 1 with the state (--rules megatron-llama on parameters and moments alike)" ||
  bad "reshard with --optimizer" "$(cat "$T/err")"
"$TPCONV" shard "$T/s11" --rules megatron-llama "${FL[@]}" --tp 2 -o "$T/s41" &&
  "$TPCONV" shard "$S" "${FL[@]}" --tp 2 -o "$T/d41" &&
  "$TPCONV" convert "$T/s41" --optimizer -o "$T/d/optimizer.pt" -q &&
  "$TPCONV" convert "$T/d41" --optimizer -o "$T/e/optimizer.pt" -q &&
  cmp -s "$T/d/optimizer.pt" "$T/e/optimizer.pt" &&
  ok "tp 1 resharded to tp 2 x pp 1 gives the optimizer.pt of a direct split, byte for byte" ||
  bad "reshard tp 1 -> 2" ""


# other sources: a DCP folder of the same state (tpconv's, as 2 FSDP2 ranks
# save it) gives the same bytes; a ZeRO-2 folder (tests/deepspeed/make_zero.py,
# the f32 masters are the parameters) its own values
mkdir -p "$T/f" "$T/z"
"$TPCONV" convert "$S" --optimizer --format dcp --dcp-ranks 2 -o "$T/dcp2" -q &&
  "$TPCONV" shard "$T/dcp2" "${FL[@]}" --tp 2 --pp 2 -o "$T/sd22" &&
  "$TPCONV" convert "$T/sd22" --optimizer -o "$T/f/optimizer.pt" -q && cmp -s "$T/a/optimizer.pt" "$T/f/optimizer.pt" &&
  ok "a DCP save's state (2 ranks) gives the set of the same optimizer.pt, byte for byte" || bad "DCP source" ""
"$PY" "$SRC/tests/deepspeed/make_zero.py" "$T/zero" --stage 2 --world 2 --from "$T/src/model_f32.pt" >/dev/null 2>&1 &&
  "$TPCONV" shard "$T/zero" "${FL[@]}" --tp 2 --pp 2 -o "$T/sz22" &&
  "$TPCONV" convert "$T/sz22" --optimizer -o "$T/z/optimizer.pt" -q &&
  "$TPCONV" convert "$T/zero" --optimizer -o "$T/zopt.pt" -q && "$TPCONV" convert "$T/zero" -o "$T/zmodel.pt" -q &&
  "$TPCONV" inspect --optimizer "$T/zero" > "$T/znames" &&
  "$PY" "$G" check-zero "$T/zopt.pt" "$T/znames" "$T/zmodel.pt" "$T/z/optimizer.pt" > "$T/zchk" 2>&1 &&
  grep -q "^ok " "$T/zchk" &&
  ok "a ZeRO-2 folder's state (its f32 parameters the masters) on every element at tp 2 x pp 2" || bad "ZeRO source" "$(cat "$T/zchk" 2>/dev/null)"

# a mixture of experts (Mixtral, 4 experts a layer): the routed experts'
# state in a second distributed optimizer chained to the dense one, its
# groups is_expert_parallel; tp 2 x ep 2 x pp 2, and ep 4 over tp 2 (two
# data-parallel replicas a stage, each expert once)
M=$T/src/moe
MF=(--preset mixtral --config "$M/config.json" --layout megatron-dist --optimizer --megatron-train global-batch-size=8 -q)
mkdir -p "$T/m1" "$T/m2" "$T/m3" "$T/m4"
run "$TPCONV" shard "$M/train.pt" "${MF[@]}" --tp 2 --ep 2 --pp 2 -o "$T/m22"
"$TPCONV" inspect --optimizer "$T/m22" > "$T/mi" 2>&1
[ "$rc" = 0 ] && grep -qx "# optimizer state: Megatron's distributed optimizer (fully_reshardable): 29 parameters, 87 state tensors beside them (each element its parameter's), 3 param groups" "$T/mi" &&
  grep -q "^# param group 2: 16 parameters; .* weight_decay=0.1 is_expert_parallel=True " "$T/mi" &&
  ok "MoE tp 2 x ep 2 x pp 2: 29 parameters' state, the 16 experts' in the chained expert optimizer's group" ||
  bad "MoE shard --optimizer" "$(cat "$T/err"; head -12 "$T/mi")"
"$TPCONV" convert "$T/m22" --optimizer -o "$T/m1/optimizer.pt" -q &&
  "$TPCONV" shard "$M/train.pt" "${MF[@]}" --tp 2 --ep 4 -o "$T/m24" &&
  "$TPCONV" convert "$T/m24" --optimizer -o "$T/m2/optimizer.pt" -q &&
  "$TPCONV" shard "$T/m22" --rules megatron-mixtral "${MF[@]}" --tp 1 -o "$T/m11" &&
  "$TPCONV" convert "$T/m11" --optimizer -o "$T/m3/optimizer.pt" -q &&
  "$TPCONV" shard "$T/m11" --rules megatron-mixtral "${MF[@]}" --tp 2 --ep 4 -o "$T/m24r" &&
  "$TPCONV" convert "$T/m24r" --optimizer -o "$T/m4/optimizer.pt" -q &&
  cmp -s "$T/m2/optimizer.pt" "$T/m4/optimizer.pt" &&
  ok "MoE resharded tp 2 x ep 2 x pp 2 -> tp 1 -> tp 2 x ep 4: the optimizer.pt of a direct split, byte for byte" ||
  bad "MoE reshard" ""
# DeepSeek-V3 (tests/gguf/arch's tiny-deepseek: MLA, a dense first layer,
# routed and shared experts, the router's expert_bias a buffer without state)
# at tp 2 x pp 2 (2,1 layers) x ep 2, resharded through tp 1 by
# --rules megatron-deepseek-v3: the same optimizer.pt, byte for byte
A=$SRC/tests/gguf/arch/tiny-deepseek
DF=(--preset deepseek-v3 --config "$A/config.json" --layout megatron-dist --optimizer --megatron-train global-batch-size=8 -q)
mkdir -p "$T/ds1" "$T/ds2"
"$TPCONV" convert "$A" -o "$T/ds.pt" -q && "$PY" "$G" tag "$T/ds.pt" "$T/ds_train.pt" &&
  "$TPCONV" shard "$T/ds_train.pt" "${DF[@]}" --tp 2 --pp 2 --ep 2 --pp-layers 2,1 -o "$T/ds22" &&
  "$TPCONV" inspect --optimizer "$T/ds22" > "$T/dsi" &&
  grep -qx "# optimizer state: Megatron's distributed optimizer (fully_reshardable): 54 parameters, 162 state tensors beside them (each element its parameter's), 3 param groups" "$T/dsi" &&
  "$TPCONV" shard "$T/ds22" --rules megatron-deepseek-v3 "${DF[@]}" --tp 1 -o "$T/ds11" &&
  "$TPCONV" shard "$T/ds11" --rules megatron-deepseek-v3 "${DF[@]}" --tp 2 --pp 2 --ep 2 --pp-layers 2,1 -o "$T/ds22r" &&
  "$TPCONV" convert "$T/ds22" --optimizer -o "$T/ds1/optimizer.pt" -q &&
  "$TPCONV" convert "$T/ds22r" --optimizer -o "$T/ds2/optimizer.pt" -q &&
  cmp -s "$T/ds1/optimizer.pt" "$T/ds2/optimizer.pt" &&
  ok "DeepSeek-V3 (MLA, shared experts, expert_bias a buffer) at tp 2 x pp 2 x ep 2, uneven stages: 54 parameters' state, resharded through tp 1 byte for byte" ||
  bad "DeepSeek-V3 with state" "$(cat "$T/err" 2>/dev/null; head -5 "$T/dsi" 2>/dev/null)"

# one Python process checks every optimizer.pt against its source
"$PY" "$G" check "$S" "$T/a/optimizer.pt" "$T/c/optimizer.pt" "$T/d/optimizer.pt" "$T/s22/iter_0000007/common.pt" \
  "$M/train.pt" "$T/m1/optimizer.pt" "$T/m2/optimizer.pt" "$T/m3/optimizer.pt" > "$T/chk" 2>&1
grep '/m[0-9]/' "$T/chk" > "$T/mchk"
[ "$(grep -v '/m[0-9]/' "$T/chk" | grep -c '^ok ')" = 4 ] &&
  ok "every exp_avg, exp_avg_sq and master value on its own parameter's element (tp 2 x pp 2, resharded to 1, to 2 x 1); common.pt's groups, step, sharding type and resume state (content_metadata, args' samples, opt_param_scheduler) as Megatron reads them" ||
  bad "values" "$(cat "$T/chk")"
[ "$(grep -c '^ok ' "$T/mchk")" = 3 ] &&
  ok "MoE: every expert's, the router's and the dense state on its own element (ep 2, ep 4 over tp 2, resharded to 1); the expert group is_expert_parallel" ||
  bad "MoE values" "$(cat "$T/mchk")"

# refused by name (exit 3)
refuse() { # NAME FILE MESSAGE
  run "$TPCONV" shard "$T/src/$2" "${FL[@]}" --tp 2 -o "$T/h_$2"
  [ "$rc" = 3 ] && grep -qF "$3" "$T/err" && [ ! -e "$T/h_$2" ] && ok "refused: $1" || bad "refused: $1" "rc=$rc $(cat "$T/err")"
}
refuse "steps that differ" steps.pt "tensor 'model.norm.weight': step 6, 'model.layers.1.post_attention_layernorm.weight' step 7: Megatron's optimizer keeps one step for all parameters"
refuse "a 1-D parameter in the weight-decay group" mixed.pt "tensor 'model.layers.0.input_layernorm.weight': in param group 1, 'model.norm.weight' (1-D or a bias) in group 0: Megatron's standard split puts every 1-D parameter and bias in one group"
refuse "three param groups" three.pt "tensor 'model.layers.0.self_attn.v_proj.weight': in param group 1, 'model.embed_tokens.weight' (2-D or more) in group 0: Megatron's standard split puts every other parameter in one group"
refuse "a model tensor no group lists" frozen.pt "tensor 'model.norm.weight': a tensor of the model that no param group lists (frozen, or a buffer): Megatron's distributed optimizer holds state for every parameter of it"
refuse "a bf16 parameter without its master" nomaster.pt "tensor 'model.embed_tokens.weight': a BF16 parameter without its fp32 master (fp32_param)"
refuse "never stepped (step 0: no iteration)" step0.pt "the optimizer's step is 0: a set with optimizer state is Megatron's iter_NNNNNNN/ folder of the iteration it was saved at"
# the run's facts: a schedule written whole (what Megatron's
# get_optimizer_param_scheduler makes of the same flags), --iteration; usage
# errors (exit 2) for what is missing or what Megatron's scheduler asserts
run "$TPCONV" shard "$S" "${FL[@]}" --tp 2 --iteration 30 -o "$T/sch" \
  --megatron-train global-batch-size=8,lr=3e-4,min-lr=3e-5,lr-warmup-iters=10,train-iters=100,lr-decay-style=cosine,weight-decay=0.1
[ "$rc" = 0 ] && [ "$(cat "$T/sch/latest_checkpointed_iteration.txt")" = 30 ] &&
  "$PY" -c '
import sys, torch
c = torch.load(sys.argv[1])
want = dict(max_lr=3e-4, lr_warmup_steps=80, num_steps=240, lr_decay_style="cosine", lr_decay_steps=800, min_lr=3e-5,
            start_wd=0.1, end_wd=0.1, wd_incr_style="constant", wd_incr_steps=800)
got = c["opt_param_scheduler"]
assert got == want and all(type(got[k]) is type(v) for k, v in want.items()), got
assert c["iteration"] == 30 and c["args"].consumed_train_samples == 240 and c["args"].train_iters == 100, c
' "$T/sch/iter_0000030/common.pt" 2>"$T/err" &&
  ok "--iteration 30 --megatron-train with a schedule: iter_0000030/, tracker 30, opt_param_scheduler in samples as Megatron's get_optimizer_param_scheduler builds it" ||
  bad "a schedule" "rc=$rc $(cat "$T/err")"
usage() { # WHAT MESSAGE ARGS...
  local w=$1 m=$2
  shift 2
  run "$TPCONV" shard "$S" --preset llama --config "$T/src/config.json" --layout megatron-dist --optimizer --tp 2 -o "$T/u" "$@"
  [ "$rc" = 2 ] && grep -qF -- "$m" "$T/err" && [ ! -e "$T/u" ] && ok "usage: $w" || bad "usage: $w" "rc=$rc $(cat "$T/err")"
}
usage "no global batch size" "--optimizer with --layout megatron-dist needs --megatron-train global-batch-size=N" --megatron-train lr=1e-3
usage "an unknown key" "--megatron-train: 'batch=8' is not KEY=VALUE with KEY one of global-batch-size" --megatron-train batch=8
usage "warmup past the decay" "--megatron-train: lr-warmup-iters 100, lr-decay-iters 100: Megatron asserts warmup < decay" \
  --megatron-train global-batch-size=8,lr=1e-3,train-iters=100,lr-warmup-iters=100
usage "WSD" "--megatron-train lr-decay-style=WSD: constant, linear, cosine or inverse-square-root" \
  --megatron-train global-batch-size=8,lr=1e-3,train-iters=100,lr-decay-style=WSD
run "$TPCONV" shard "$S" --preset llama --config "$T/src/config.json" --layout megatron-dist --tp 2 --iteration 3 -o "$T/u"
[ "$rc" = 2 ] && grep -qF -- "--iteration and --megatron-train go with --optimizer" "$T/err" && ok "usage: --iteration without --optimizer" ||
  bad "usage: --iteration without --optimizer" "rc=$rc $(cat "$T/err")"
run "$TPCONV" shard "$S" --preset llama --config "$T/src/config.json" --layout dcp --optimizer --tp 2 -o "$T/h_dcp"
[ "$rc" = 2 ] && grep -qF -- "--optimizer goes with --layout megatron-dist" "$T/err" && ok "refused: --optimizer with a layout that stores no state" ||
  bad "--optimizer --layout dcp" "rc=$rc $(cat "$T/err")"
"$TPCONV" shard "$S" --select model --preset llama --config "$T/src/config.json" --tp 2 -q -o "$T/plain"
run "$TPCONV" convert "$T/plain" --optimizer -o "$T/x.pt"
[ "$rc" = 2 ] && grep -qF "is a shard set whose layout stores no optimizer state" "$T/err" && [ ! -e "$T/x.pt" ] &&
  ok "refused: convert --optimizer of a set without state (was: the model written as optimizer.pt)" || bad "convert --optimizer of a plain set" "rc=$rc $(cat "$T/err")"

done_testing
