#!/usr/bin/env bash
# Megatron-Core's distributed optimizer as a source (TAP). The fixtures
# tests/data/dcp/megatron_optim_{reshard,fsms} are torch_dist saves of one tiny
# GPT (tp 2 x dp 4) that real torch 2.14 DCP wrote from
# tests/dcp/make_megatron_optim.py (a re-implementation of Megatron's writer,
# cited there), with param_state_sharding_type 'fully_reshardable' (model
# space) and 'fully_sharded_model_space' (each DP rank's flattened range,
# Megatron 0.8 to 0.15's default; two parameters' ranges cross DP ranks, the
# SwiGLU fc1's also its gate/up halves); every moment and master names its
# parameter and element. tpconv gives both the same optimizer.pt (checked by
# value and stepped by AdamW in Debian's torch 1.13, megatron_optim_check.py)
# and a DCP folder for another mesh. megatron_optim_legacy is the same model
# as a legacy save (distrib_optim.pt of 6 buckets beside model_optim_rng.pt,
# make_megatron_legacy_optim.py): mapped by Megatron's buffer layout to the
# same values. What tpconv cannot map is refused by name.
# usage: megatron_optim_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
D=$SRC/tests/data/dcp
. "$SRC/tests/lib/tap.sh"
tmpdir

run "$TPCONV" inspect --optimizer "$D/megatron_optim_fsms"
grep -qx "# optimizer state: Megatron's distributed optimizer (fully_sharded_model_space): 17 parameters, 51 state tensors beside them (each element its parameter's), 2 param groups" "$T/out" &&
  grep -qx "# optimizer state 'optim': 17 parameters in 2 param groups, 51 moments shaped as their parameters (element for element), 17 scalars, 0 values; state keys exp_avg, exp_avg_sq, fp32_param, step" "$T/out" &&
  grep -qx "# \[1\] model.decoder.layers.0.self_attention.linear_qkv.weight BF16 \[24, 8\] (group 0): exp_avg F32, exp_avg_sq F32, fp32_param F32, step F32 \[\]" "$T/out" &&
  grep -qx "# \[12\] model.decoder.layers.0.self_attention.linear_qkv.bias BF16 \[24\] (group 1): exp_avg F32, exp_avg_sq F32, fp32_param F32, step F32 \[\]" "$T/out" &&
  grep -q "^# param group 1: 7 parameters; lr=0.001 .* weight_decay=0 wd_mult=0$" "$T/out" && [ "$rc" = 0 ] &&
  ok "inspect --optimizer: the sharding type, 17 parameters with their moments, master and step, the standard weight-decay split" ||
  bad "inspect --optimizer" "$(head -12 "$T/out" "$T/err")"

L=$D/megatron_optim_legacy/iter_0000007/mp_rank_00/model_optim_rng.pt
run "$TPCONV" inspect --optimizer "$L"
grep -qx "# optimizer state: Megatron's distributed optimizer (distrib_optim.pt, 6 buckets): 17 parameters, 51 state tensors beside them (each element its parameter's), 2 param groups" "$T/out" &&
  grep -qx "# \[0\] model.embedding.word_embeddings.weight BF16 \[40, 8\] (group 0): exp_avg F32, exp_avg_sq F32, fp32_param F32, step F32 \[\]" "$T/out" && [ "$rc" = 0 ] &&
  ok "inspect --optimizer of a legacy rank file: distrib_optim.pt's 6 buckets mapped to 17 parameters" ||
  bad "inspect --optimizer (legacy)" "$(head -8 "$T/out" "$T/err")"

mkdir -p "$T/r" "$T/f" "$T/x" "$T/l" "$T/y"
run "$TPCONV" convert "$L" --optimizer -o "$T/l/optimizer.pt" -q
r5=$rc
run "$TPCONV" convert "$L" --optimizer --format dcp --dcp-ranks 2 -o "$T/l2" -q
r6=$rc
run "$TPCONV" convert "$T/l2" --optimizer -o "$T/y/optimizer.pt" -q
# (read back equal by value: the param groups' shared betas tuple comes back as two tuples)
[ "$r5$r6$rc" = 000 ] && ok "legacy: convert --optimizer; --format dcp --dcp-ranks 2 and back" ||
  bad "legacy convert: exit $r5 $r6 $rc" "$(cat "$T/err")"
run "$TPCONV" convert "$D/megatron_optim_reshard" --optimizer -o "$T/r/optimizer.pt" -q
r1=$rc
run "$TPCONV" convert "$D/megatron_optim_fsms" --optimizer -o "$T/f/optimizer.pt" -q
r2=$rc
run "$TPCONV" convert "$D/megatron_optim_fsms" --optimizer --format dcp --dcp-ranks 3 -o "$T/d3" -q
r3=$rc
run "$TPCONV" convert "$T/d3" --optimizer -o "$T/x/optimizer.pt" -q
r4=$rc
[ "$r1$r2$r3$r4" = 0000 ] && cmp -s "$T/r/optimizer.pt" "$T/f/optimizer.pt" &&
  ok "fully_reshardable and fully_sharded_model_space give a byte-identical optimizer.pt; --format dcp --dcp-ranks 3 and back" ||
  bad "convert: exit $r1 $r2 $r3 $r4" "$(cat "$T/err")"
if "$PY" -c 'import torch' 2>/dev/null; then
  "$PY" "$SRC/tests/dcp/megatron_optim_check.py" "$T/f/optimizer.pt" "$T/x/optimizer.pt" "$T/l/optimizer.pt" "$T/y/optimizer.pt" >"$T/py" 2>&1
  while IFS= read -r l; do
    case $l in
      "ok "*) ok "${l#ok }" ;;
      "not ok "*) bad "${l#not ok }" ;;
      *) diag "$l" ;;
    esac
  done <"$T/py"
else
  skip "optimizer.pt by value, in torch.optim.AdamW" "no torch in $PY"
fi

# refused by name: what Megatron's save does not say, or says inconsistently
# common.pt variants made in one Python process (megatron_optim_hostile.py), in this order
"$PY" "$SRC/tests/dcp/megatron_optim_hostile.py" "$D/megatron_optim_reshard" "$T/c" \
  type:fully_sharded_bucket_space type:fsdp_dtensor_v2 groups3 nostep nooptim \
  "$D/megatron_optim_legacy" args:ddp_bucket_size=400 uncoalesced twobuffers >/dev/null 2>&1 || rm -rf "$T/c"
hostile() { # name mutation(c:N: common.pt variant N; meta:M: dcp_meta.py M) expected-stderr [file inside]
  rm -rf "$T/h" "$T/h.pt"
  if [ "${2%%:*}" = meta ]; then
    mkdir -p "$T/h" && cp "$D/megatron_optim_fsms/latest_checkpointed_iteration.txt" "$T/h/" &&
      python3 "$SRC/tests/dcp/dcp_meta.py" "$D/megatron_optim_fsms/iter_0000007" "$T/h/iter_0000007" "${2#meta:}" ||
      { bad "$1: generator"; return; }
  else
    [ -d "$T/c/${2#c:}" ] || { skip "$1" "no torch in $PY"; return; }
    mv "$T/c/${2#c:}" "$T/h"
  fi
  run "$TPCONV" convert "$T/h${4:-}" --optimizer -o "$T/h.pt"
  [ "$rc" = 3 ] && [ ! -e "$T/h.pt" ] && grep -qxF "$3" "$T/err" && ok "refused: $1" || bad "$1 (exit $rc)" "$(cat "$T/err")" "want: $3"
}
I=$T/h/iter_0000007
S=optimizer.state
hostile "the bucket-space form (fully_sharded_bucket_space)" c:0 \
  "tpconv: error: '$I/common.pt': the distributed optimizer's state is stored as 'fully_sharded_bucket_space' (deprecated, each DP rank's bucket space), which is not read; tpconv reads 'fully_reshardable' (save with --dist-ckpt-optim-fully-reshardable), 'dp_reshardable', 'dp_zero_gather_scatter' and 'fully_sharded_model_space'"
hostile "an unknown sharding type" c:1 \
  "tpconv: error: '$I/common.pt': unknown param_state_sharding_type 'fsdp_dtensor_v2' (Megatron's: fully_reshardable, fully_sharded_model_space, dp_reshardable, dp_zero_gather_scatter, fsdp_dtensor)"
hostile "three param groups" c:2 \
  "tpconv: error: '$I/common.pt': 3 param groups (wd_mult 1, 0, 1): Megatron does not save which parameter is in which (state_dict drops 'params'), and tpconv knows only its standard split, one group with weight decay and one (wd_mult 0) for 1-D parameters and biases"
hostile "groups without step" c:3 \
  "tpconv: error: '$I/common.pt': param group 0 has no step (an integer, as Megatron saves torch's Adam's): the moments cannot be resumed without it"
hostile "no common optimizer state" c:4 \
  "tpconv: error: '$I/common.pt': holds no 'optimizer': the save has no optimizer state (saved with --no-save-optim?)"
hostile "a flattened form that does not add up" "meta:swap:$S.exp_avg.decoder.layers.self_attention.linear_qkv.weight=$S.exp_avg.decoder.layers.mlp.linear_fc2.weight" \
  "tpconv: error: '$I/.metadata': tensor '$S.exp_avg.decoder.layers.self_attention.linear_qkv.weight': a local shard of its parameter 'decoder.layers.self_attention.linear_qkv.weight' [2, 24, 8] holds 96 elements, the flattened form stores 64 per fragment"
hostile "state of a parameter the save lacks" "meta:rename:$S.exp_avg_sq.output_layer.weight=$S.exp_avg_sq.output_layer.bias" \
  "tpconv: error: '$I/.metadata': tensor '$S.exp_avg_sq.output_layer.bias': its parameter 'output_layer.bias' is not in the save"
hostile "a rank's range missing" "meta:gap:$S.fp32_param.output_layer.weight" \
  "tpconv: error: '$I/.metadata': tensor '$S.fp32_param.output_layer.weight': the chunks cover 160 of the tensor's 320 elements: a gap (a rank's file missing from the metadata?)"
hostile "an optimizer entry of another kind" "meta:rename:$S.exp_avg.output_layer.weight=optimizer.distributed.dp_group_idx_0.gbuf_idx_0.bucket_idx_0.exp_avg" \
  "tpconv: error: '$I/.metadata': tensor 'optimizer.distributed.dp_group_idx_0.gbuf_idx_0.bucket_idx_0.exp_avg': an optimizer entry tpconv does not know (neither optimizer.state.{exp_avg,exp_avg_sq,param,fp32_param}.KEY tensors): refused rather than dropped"
R=iter_0000007/mp_rank_00
hostile "legacy: another bucket size" c:5 \
  "tpconv: error: '$T/h/$R/distrib_optim.pt': the model's 17 parameters take 2328 elements in Megatron's buffer layout (4 buckets, 64-element aligned), the buffer holds 2368 (numel_unpadded): another layout (frozen parameters, another Megatron); not mapped" /$R/model_optim_rng.pt
hostile "legacy: the pre-2024 per-bucket form" c:6 \
  "tpconv: error: '$T/h/$R/distrib_optim.pt': no buckets_coalesced: Megatron's per-bucket form from before February 2024, which is not read" /$R/model_optim_rng.pt
hostile "legacy: two parameter buffers" c:7 \
  "tpconv: error: '$T/h/$R/distrib_optim.pt': holds more than one parameter buffer (one per parameter dtype and expert-parallel group): only one dense buffer is read" /$R/model_optim_rng.pt

# a legacy set at tp 2 x pp 2 (make_megatron_legacy_optim.py): each rank's
# distrib_optim.pt mapped to its own slices (every master checked against its
# weight), then joined as the parameters are: the same optimizer.pt, byte for
# byte, as the tp 1 x pp 1 save of the same model gives through the same merge
L1=$D/megatron_optim_legacy L4=$D/megatron_optim_legacy_tp2pp2
mkdir -p "$T/s1" "$T/s4"
run "$TPCONV" convert "$L1" --optimizer --preset llama --vocab 40 -o "$T/s1/optimizer.pt" -q
r1=$rc
run "$TPCONV" convert "$L4/iter_0000007" --optimizer --preset llama --vocab 40 -o "$T/s4/optimizer.pt" -q
[ "$r1$rc" = 00 ] && cmp -s "$T/s1/optimizer.pt" "$T/s4/optimizer.pt" &&
  ok "legacy set tp 2 x pp 2 (its iter_0000007 folder): convert SET --optimizer gives the tp 1 x pp 1 save's optimizer.pt byte for byte" ||
  bad "legacy set: exit $r1 $rc" "$(cat "$T/err")"
mkdir -p "$T/s5"
run "$TPCONV" convert "$L4" --optimizer --preset llama --vocab 40 --format dcp --dcp-ranks 2 -o "$T/s4dcp" -q
r1=$rc
run "$TPCONV" convert "$T/s4dcp" --optimizer -o "$T/s5/optimizer.pt" -q
[ "$r1$rc" = 00 ] && ok "legacy set: --format dcp --dcp-ranks 2 (the merged model and its state) and back" ||
  bad "legacy set to DCP: exit $r1 $rc" "$(cat "$T/err")"
if "$PY" -c 'import torch' 2>/dev/null; then
  "$PY" "$SRC/tests/dcp/megatron_legacy_optim_check.py" "$T/s4/optimizer.pt" "$T/s5/optimizer.pt" >"$T/py" 2>&1
  while IFS= read -r l; do
    case $l in
      "ok "*) ok "${l#ok }" ;;
      "not ok "*) bad "${l#not ok }" ;;
      *) diag "$l" ;;
    esac
  done <"$T/py"
else
  skip "legacy set optimizer.pt by value" "no torch in $PY"
fi
run "$TPCONV" inspect --optimizer "$L4" --preset llama --vocab 40
grep -qx "# megatron set (tp 2 x pp 2) with its optimizer state, each rank's joined as its parameters: 27 parameters, 3 state tensors each and step" "$T/out" &&
  grep -qx "# \[0\] model.model.embed_tokens.weight BF16 \[40, 8\] (group 0): fp32_param F32, exp_avg F32, exp_avg_sq F32, step F32 \[\]" "$T/out" && [ "$rc" = 0 ] &&
  ok "inspect --optimizer SET: the joined state of the merged model's 27 parameters" ||
  bad "inspect --optimizer of the set" "$(head -8 "$T/out" "$T/err")"
run "$TPCONV" merge "$L4" --optimizer -o "$T/m.pt"
[ "$rc" = 2 ] && [ ! -e "$T/m.pt" ] && grep -qF "tpconv convert DIR --optimizer -o optimizer.pt" "$T/err" &&
  ok "merge --optimizer: exit 2 naming the convert command that joins the state" || bad "merge --optimizer (exit $rc)" "$(cat "$T/err")"
R4=$L4/iter_0000007/mp_rank_01_001/model_optim_rng.pt
run "$TPCONV" inspect --optimizer "$R4"
grep -qx "# optimizer state: Megatron's distributed optimizer (distrib_optim.pt, 1 bucket): 9 parameters, 27 state tensors beside them (each element its parameter's), 2 param groups" "$T/out" &&
  grep -qx "# \[0\] model.decoder.layers.0.self_attention.linear_qkv.weight BF16 \[12, 8\] (group 0): exp_avg F32, exp_avg_sq F32, fp32_param F32, step F32 \[\]" "$T/out" && [ "$rc" = 0 ] &&
  ok "one rank file of the set (stage 1: no bucketing past the first stage): its 1 bucket mapped to its 9 local parameters (one query group of linear_qkv)" ||
  bad "inspect --optimizer of a rank file" "$(head -8 "$T/out" "$T/err")"
run "$TPCONV" convert "$R4" --optimizer -o "$T/r4.pt"
[ "$rc" = 0 ] && grep -qxF "tpconv: warning: '$R4': this is one rank file of a Megatron set (tp 2 x pp 2, from its mp_rank folders): its optimizer state, that rank's slices, is written as it is; the whole set's: 'tpconv convert SAVE_DIR --optimizer' with the set's --preset" "$T/err" &&
  ok "convert --optimizer of one rank file: its slices' state, with a warning naming the set and the command" ||
  bad "convert --optimizer of a rank file (exit $rc)" "$(cat "$T/err")"
# tied embeddings at pp 2 (language_module.py: each copy in a bucket of its
# own): the last stage's output-layer slice (160 elements) moves the
# parameters after it off the 64-element grid, so only that rule maps them
LT=$D/megatron_optim_legacy_tied/iter_0000007
run "$TPCONV" inspect --optimizer "$LT/mp_rank_01_001/model_optim_rng.pt"
grep -qx "# optimizer state: Megatron's distributed optimizer (distrib_optim.pt, 2 buckets): 9 parameters, 27 state tensors beside them (each element its parameter's), 2 param groups" "$T/out" && [ "$rc" = 0 ] &&
  ok "tied embeddings at pp 2: the last stage's output-layer copy in a bucket of its own, every master on its weight" ||
  bad "tied embeddings at pp 2" "$(head -4 "$T/out" "$T/err")"
mkdir -p "$T/s6"
run "$TPCONV" convert "$LT" --optimizer --preset llama --vocab 40 -o "$T/s6/optimizer.pt" -q
if [ "$rc" = 0 ] && "$PY" -c 'import torch' 2>/dev/null; then
  "$PY" - "$T/s6/optimizer.pt" "$T/s4/optimizer.pt" >"$T/py" 2>&1 <<'PY'
import sys, torch
t, u = torch.load(sys.argv[1]), torch.load(sys.argv[2])
last = t["param_groups"][0]["params"][-1]  # lm_head, the merged model's last weight
assert t["param_groups"] == u["param_groups"] and len(t["state"]) == len(u["state"])
for k in ("exp_avg", "exp_avg_sq", "fp32_param"):
    assert torch.equal(t["state"][last][k], t["state"][0][k]), k  # the copy kept in step with the embeddings
    for n in t["state"]:
        assert n == last or torch.equal(t["state"][n][k], u["state"][n][k]), (n, k)
PY
  [ $? = 0 ] && ok "tied set: its optimizer.pt holds lm_head's state as the embeddings', every other as the untied set's" ||
    bad "tied set by value" "$(cat "$T/py")"
else
  [ "$rc" = 0 ] && skip "tied set by value" "no torch in $PY" || bad "tied set (exit $rc)" "$(cat "$T/err")"
fi
"$PY" "$SRC/tests/dcp/make_megatron_legacy_optim.py" --hostile "$L4" "$T/lh" >/dev/null 2>&1 || rm -rf "$T/lh"
lhostile() { # name variant expected-stderr
  [ -d "$T/lh/$2" ] || { skip "$1" "no torch in $PY"; return; }
  run "$TPCONV" convert "$T/lh/$2" --optimizer --preset llama --vocab 40 -o "$T/lh.pt"
  [ "$rc" = 3 ] && [ ! -e "$T/lh.pt" ] && grep -qxF "$3" "$T/err" && ok "refused: $1" || bad "$1 (exit $rc)" "$(cat "$T/err")" "want: $3"
}
R=iter_0000007/mp_rank_01_001
lhostile "legacy set: a rank without distrib_optim.pt" nodistrib \
  "tpconv: error: '$T/lh/nodistrib/$R/distrib_optim.pt': missing: this rank's distributed optimizer state (what --use-distributed-optimizer saves beside model_optim_rng.pt) is not in the set"
lhostile "legacy set: a rank whose buffer total is off" total \
  "tpconv: error: '$T/lh/total/$R/distrib_optim.pt': the model's 9 parameters take 776 elements in Megatron's buffer layout (1 bucket, 64-element aligned), the buffer holds 840 (numel_unpadded): another layout (frozen parameters, another Megatron); not mapped"
lhostile "legacy set: a replicated layer norm's moments differ between TP ranks" replica \
  "tpconv: error: '$T/lh/replica': tensor 'model.layers.0.input_layernorm.weight': its optimizer state exp_avg, joined as the parameter: replicated tensor differs between rank 0 and rank 1 (use --take-rank0 to keep rank 0's copy)"
lhostile "legacy set: two parameters swapped (the masters do not match the weights)" swap \
  "tpconv: error: '$T/lh/swap/$R/distrib_optim.pt': tensor 'decoder.layers.0.mlp.linear_fc1.layer_norm_weight': its fp32 master at element [0] (buffer offset 768) is 8192.75, 8192 in BF16, but the rank's model weight there is 12288: Megatron's buffer layout, as inferred from the model's tensors, does not put this parameter here (another parameter order, frozen parameters); not mapped"

# without --optimizer the model alone, as before
run "$TPCONV" inspect "$D/megatron_optim_fsms"
grep -qx "# optimizer state: 30 entries left out (read them with --select optimizer)" "$T/out" && [ "$rc" = 0 ] &&
  ok "without --optimizer: the model, the optimizer state left out" || bad "inspect without --optimizer" "$(head -5 "$T/out" "$T/err")"
done_testing
