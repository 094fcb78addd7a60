#!/usr/bin/env bash
# Megatron legacy (--ckpt-format torch) sets with virtual pipeline stages
# (TAP). tests/data/dcp/megatron_optim_legacy_vpp is a 4-layer GPT at tp 1 x
# pp 2 x vpp 2 (each rank file model0 and model1, chunk v of stage p layer
# 2v + p, each chunk's buffer gbuf v of distrib_optim.pt) and
# megatron_optim_legacy_l4 the same model at tp 1 x pp 1, both written by
# tests/dcp/make_megatron_legacy_optim.py --vpp (a re-implementation of
# Megatron's writer, each rule cited there; every moment and master tagged
# by parameter and element). The merged model and the joined optimizer.pt
# must equal the tp 1 save's byte for byte, every value on its own Megatron
# element (megatron_legacy_optim_check.py); what is not read is refused by
# name. Expert parallelism: a tiny Mixtral (tests/data/dcp/megatron_legacy_ep_hf)
# as a tp 1 set (tpconv's megatron layout) and as the tp 1 x ep 2 set Megatron
# writes from it (tests/data/dcp/megatron_legacy_ep, made by
# tests/dcp/make_megatron_legacy_ep.py: mp_rank_00_EEE, each the dense model
# and its EP rank's local experts) merge to the same model, and
# the chained optimizer's state (dense part in EP rank 0's distrib_optim.pt,
# each EP rank's experts in its own) joins with every value on its own
# parameter's element (megatron_legacy_optim_check.py --weights).
# usage: megatron_legacy_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
D=$SRC/tests/data/dcp
. "$SRC/tests/lib/tap.sh"
tmpdir

V=$D/megatron_optim_legacy_vpp L=$D/megatron_optim_legacy_l4
run "$TPCONV" inspect --optimizer "$V/iter_0000007/mp_rank_00_000/model_optim_rng.pt"
grep -qx "# optimizer state: Megatron's distributed optimizer (distrib_optim.pt, 2 model chunks' buffers, 4 buckets): 15 parameters, 45 state tensors beside them (each element its parameter's), 2 param groups" "$T/out" &&
  grep -qx "# \[5\] model.model1.decoder.layers.0.self_attention.linear_qkv.weight BF16 \[24, 8\] (group 0): exp_avg F32, exp_avg_sq F32, fp32_param F32, step F32 \[\]" "$T/out" &&
  grep -q "^# Megatron legacy rank file of a tp 1 x pp 2 x vpp 2 set" "$T/out" && [ "$rc" = 0 ] &&
  ok "inspect --optimizer of a rank file with 2 model chunks: each chunk's buffer (chunk 0 bucketed, chunk 1 not) mapped to its parameters" ||
  bad "inspect --optimizer (vpp rank file)" "$(head -8 "$T/out" "$T/err")"

mkdir -p "$T/a" "$T/b"
run "$TPCONV" merge "$V" --preset llama --vocab 40 -o "$T/a/hf" -q
r1=$rc
run "$TPCONV" merge "$L" --preset llama --vocab 40 -o "$T/b/hf" -q
[ "$r1$rc" = 00 ] && cmp -s "$T/a/hf/model.safetensors" "$T/b/hf/model.safetensors" &&
  ok "merge of the tp 1 x pp 2 x vpp 2 set: the tp 1 x pp 1 save's model byte for byte (layers 0-3 from chunks interleaved over the stages)" ||
  bad "merge (vpp): exit $r1 $rc" "$(cat "$T/err")"
run "$TPCONV" merge "$V" --preset llama --vocab 40 --dry-run
[ "$rc" = 0 ] && [ "$(grep -o '^model\.layers\.[0-9]*' "$T/out" | uniq | tr '\n' ' ')" = "model.layers.0 model.layers.1 model.layers.2 model.layers.3 " ] &&
  ok "merge --dry-run: the layers in order, though stage 0 holds layers 0 and 2" || bad "merge --dry-run order" "$(head -30 "$T/out")"

run "$TPCONV" convert "$V" --optimizer --preset llama --vocab 40 -o "$T/a/optimizer.pt" -q
r1=$rc
run "$TPCONV" convert "$L/iter_0000007" --optimizer --preset llama --vocab 40 -o "$T/b/optimizer.pt" -q
[ "$r1$rc" = 00 ] && cmp -s "$T/a/optimizer.pt" "$T/b/optimizer.pt" &&
  ok "convert SET --optimizer of the vpp set: the tp 1 x pp 1 save's optimizer.pt byte for byte" ||
  bad "convert --optimizer (vpp): exit $r1 $rc" "$(cat "$T/err")"
if "$PY" -c 'import torch' 2>/dev/null; then
  MEGATRON_OPTIM_LAYERS=4 "$PY" "$SRC/tests/dcp/megatron_legacy_optim_check.py" "$T/a/optimizer.pt" >"$T/py" 2>&1
  while IFS= read -r l; do
    case $l in
      "ok "*) ok "vpp: ${l#ok }" ;;
      "not ok "*) bad "vpp: ${l#not ok }" ;;
      *) diag "$l" ;;
    esac
  done <"$T/py"
else
  skip "vpp set optimizer.pt by value" "no torch in $PY"
fi

"$PY" "$SRC/tests/dcp/make_megatron_legacy_optim.py" --hostile-vpp "$V" "$T/h" >/dev/null 2>&1 || rm -rf "$T/h"
hostile() { # name variant command(merge|convert) expected-stderr
  [ -d "$T/h/$2" ] || { skip "$1" "no torch in $PY"; return; }
  if [ "$3" = merge ]; then
    run "$TPCONV" merge "$T/h/$2" --preset llama --vocab 40 -o "$T/hm" -q
  else
    run "$TPCONV" convert "$T/h/$2" --optimizer --preset llama --vocab 40 -o "$T/h.pt" -q
  fi
  [ "$rc" = 3 ] && [ ! -e "$T/h.pt" ] && [ ! -e "$T/hm" ] && grep -qxF "$4" "$T/err" && ok "refused: $1" || bad "$1 (exit $rc)" "$(cat "$T/err")" "want: $4"
}
R0=iter_0000007/mp_rank_00_000 R1=iter_0000007/mp_rank_00_001
hostile "vpp: two layer norms of model chunk 1 swapped (the master check)" vswap convert \
  "tpconv: error: '$T/h/vswap/$R1/distrib_optim.pt': tensor 'model1.decoder.layers.0.mlp.linear_fc1.layer_norm_weight': its fp32 master at element [0] (buffer offset 1152) is 22528.75, 22528 in BF16, but the rank's model weight there is 26624: Megatron's buffer layout, as inferred from the model's tensors, does not put this parameter here (another parameter order, frozen parameters); not mapped"
hostile "vpp: a rank file without its second model chunk (optimizer)" vchunk convert \
  "tpconv: error: '$T/h/vchunk/$R0/model_optim_rng.pt': args say 2 virtual pipeline stages, but it holds no model chunk 'model1'"
hostile "vpp: a rank file without its second model chunk (merge)" vchunk merge \
  "tpconv: error: '$T/h/vchunk/$R0/model_optim_rng.pt': args say 2 virtual pipeline stages, but it holds no model chunk 'model1'"
hostile "vpp: uneven stages with model chunks (merge)" vuneven merge \
  "tpconv: error: '$T/h/vuneven/$R1/model_optim_rng.pt': args set decoder_first_pipeline_num_layers with virtual pipeline stages: which layers a model chunk holds is read for even stages only"
hostile "vpp: uneven stages with model chunks (optimizer)" vuneven convert \
  "tpconv: error: '$T/h/vuneven/$R1/model_optim_rng.pt': args set decoder_first_pipeline_num_layers with virtual pipeline stages: which layers a model chunk holds is read for even stages only"

# expert parallelism over data-parallel ranks: the committed tp 1 x ep 2 set
# (megatron_legacy_ep, with its chained optimizer's state) of the tiny Mixtral
# megatron_legacy_ep_hf; the other shapes and the hostile sets made here from
# tpconv's tp 1 / pp 2 / tp 2 sets of it (make_megatron_legacy_ep.py, torch)
MX=$D/megatron_legacy_ep_hf EP=$D/megatron_legacy_ep
run "$TPCONV" shard "$MX" --preset mixtral --tp 1 --layout megatron -o "$T/mx1" -q
rm -f "$T/mx1/tpconv-manifest.json" # as Megatron's own save
mkdir -p "$T/e1" "$T/e2"
run "$TPCONV" merge "$T/mx1" --preset mixtral -o "$T/e1/hf" -q
r1=$rc
run "$TPCONV" merge "$EP" --preset mixtral -o "$T/e2/hf" -q
[ "$r1$rc" = 00 ] && cmp -s "$T/e1/hf/model.safetensors" "$T/e2/hf/model.safetensors" &&
  ok "merge of a tp 1 x ep 2 set (mp_rank_00_000, mp_rank_00_001: each the dense model and 2 local experts): the tp 1 set's model byte for byte" ||
  bad "merge (ep 2): exit $r1 $rc" "$(cat "$T/err")"
run "$TPCONV" diff "$MX" "$T/e2/hf/model.safetensors"
[ "$rc" = 0 ] && grep -q "41 equal, 0 within tolerance, 0 differ, 0 only in A, 0 only in B" "$T/out" &&
  ok "the ep 2 set's merge: the Hugging Face model it came from, every tensor equal" || bad "ep 2 merge vs HF" "$(cat "$T/out" "$T/err")"
run "$TPCONV" inspect --optimizer "$EP/iter_0000001/mp_rank_00_001/model_optim_rng.pt"
grep -qxF "# optimizer state: Megatron's distributed optimizer (distrib_optim.pt, the expert-parallel part's buffer (the dense part's state is in its DP group's rank 0's file), 1 bucket): 8 parameters, 24 state tensors beside them (each element its parameter's), 4 param groups" "$T/out" && [ "$rc" = 0 ] &&
  ok "inspect --optimizer of EP rank 1's file: its experts' buffer (distrib_optim.pt [None, experts]) mapped, its 8 expert parameters" ||
  bad "inspect --optimizer (EP rank 1)" "$(head -4 "$T/out" "$T/err")"
mkdir -p "$T/o1" "$T/o2" "$T/o3"
run "$TPCONV" convert "$EP" --preset mixtral --optimizer -o "$T/o1/optimizer.pt" -q
[ "$rc" = 0 ] && ok "convert SET --optimizer of the ep 2 set: EP rank 0's dense state and each EP rank's experts' joined" ||
  bad "convert --optimizer (ep 2): exit $rc" "$(cat "$T/err")"
if "$PY" -c 'import torch' 2>/dev/null; then
  run "$TPCONV" shard "$MX" --preset mixtral --tp 1 --pp 2 --layout megatron -o "$T/mx1p" -q
  run "$TPCONV" shard "$MX" --preset mixtral --tp 2 --layout megatron -o "$T/mx1t" -q
  rm -f "$T/mx1p/tpconv-manifest.json" "$T/mx1t/tpconv-manifest.json"
  G=$SRC/tests/dcp/make_megatron_legacy_ep.py
  "$PY" "$G" "$T/mx1p" "$T/mx2p" 2 --optimizer >/dev/null 2>&1 && "$PY" "$G" "$T/mx1t" "$T/mx2t" 2 --optimizer >/dev/null 2>&1 &&
    "$PY" "$G" "$T/mx1" "$T/mxs" 2 --optimizer --swap 1 >/dev/null 2>&1 && "$PY" "$G" "$T/mx1" "$T/mxd" 2 --drop 1 >/dev/null 2>&1
  for v in mx2p:"tp 1 x pp 2 x ep 2 (mp_rank_00_PPP_EEE)":mp_rank_00_001_001 mx2t:"tp 2 x ep 2 (etp 2: mp_rank_TT_EEE)":mp_rank_01_001; do
    s=${v%%:*} w=${v#*:} f=${w##*:} w=${w%:*}
    run "$TPCONV" merge "$T/$s" --preset mixtral -o "$T/m_$s/hf" -q
    r1=$rc
    run "$TPCONV" diff "$MX" "$T/m_$s/hf/model.safetensors"
    [ "$r1$rc" = 00 ] && [ -d "$T/$s/iter_0000001/$f" ] && grep -q "41 equal, 0 within tolerance, 0 differ, 0 only in A, 0 only in B" "$T/out" &&
      ok "a $w set merges to the Hugging Face model, every tensor equal" || bad "$w merge: exit $r1 $rc" "$(cat "$T/out" "$T/err")"
  done
  run "$TPCONV" convert "$T/mx2p" --preset mixtral --optimizer -o "$T/o2/optimizer.pt" -q
  r2=$rc
  run "$TPCONV" convert "$T/mx2t" --preset mixtral --optimizer -o "$T/o3/optimizer.pt" -q
  if [ "$r2$rc" = 00 ]; then
    "$PY" "$SRC/tests/dcp/megatron_legacy_optim_check.py" --weights "$MX/pytorch_model.bin" "$T/o1/optimizer.pt" "$T/o2/optimizer.pt" \
      "$T/o3/optimizer.pt" >"$T/py" 2>&1
    while IFS= read -r l; do
      case $l in
        "ok "*) ok "ep 2: ${l#ok }" ;;
        "not ok "*) bad "ep 2: ${l#not ok }" ;;
        *) diag "$l" ;;
      esac
    done <"$T/py"
  else
    bad "convert --optimizer of the pp 2 / tp 2 ep 2 sets: exit $r2 $rc" "$(cat "$T/err")"
  fi
  cmp -s "$T/o1/optimizer.pt" "$T/o3/optimizer.pt" &&
    ok "the tp 2 x ep 2 set's optimizer.pt: the tp 1 x ep 2 set's byte for byte (each EP rank's experts after EP rank 0's of their layer)" ||
    bad "tp 2 x ep 2 optimizer.pt differs from tp 1 x ep 2's"
  run "$TPCONV" convert "$T/mxs" --preset mixtral --optimizer -o "$T/s.pt" -q
  [ "$rc" = 3 ] && [ ! -e "$T/s.pt" ] &&
    grep -qxF "tpconv: error: '$T/mxs/iter_0000001/mp_rank_00_001/distrib_optim.pt': tensor 'decoder.layers.0.mlp.experts.local_experts.1.linear_fc1.weight': its fp32 master at element [0, 0] (buffer offset 1280) is -1.7421875, -1.7421875 in BF16, but the rank's model weight there is -0.453125: Megatron's buffer layout, as inferred from the model's tensors, does not put this parameter here (another parameter order, frozen parameters); not mapped" "$T/err" &&
    ok "refused: two experts of EP rank 1 swapped in its state dict (the master check)" || bad "ep swap (exit $rc)" "$(cat "$T/err")"
  run "$TPCONV" merge "$T/mxd" --preset mixtral -o "$T/ed" -q
  [ "$rc" = 3 ] && [ ! -e "$T/ed" ] &&
    grep -qxF "tpconv: error: '$T/mxd/iter_0000001/mp_rank_00_001/model_optim_rng.pt': missing: tp rank 0, pp rank 0, EP rank 1's file of an expert-parallel set (args: expert_model_parallel_size 2, 4 experts)" "$T/err" &&
    ok "refused: an expert-parallel set without one EP rank's folder" || bad "missing EP rank folder (exit $rc)" "$(cat "$T/err")"
else
  skip "expert-parallel legacy sets: other shapes, by value, hostile" "no torch in $PY"
fi
done_testing
