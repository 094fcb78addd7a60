#!/usr/bin/env bash
# Megatron-Core's distributed optimizer in its default form since 0.13,
# 'dp_reshardable' (TAP): the fixture tests/data/dcp/megatron_optim_dpr is a
# torch_dist save of the same tiny GPT as megatron_optim_reshard at tp 2 x
# dp 2 x pp 2 (--ddp-bucket-size 200: three buckets on stage 0, one on
# stage 1), written by real torch 2.14 DCP from tests/dcp/make_megatron_optim.py
# (a re-implementation of Megatron's writer, cited there): the buffers'
# buckets as flat tensors that name no parameter. tpconv maps them back by
# Megatron's parameter order and buffer layout, checks every master against
# its weight, and gives the same optimizer.pt, byte for byte, as the
# fully_reshardable save. megatron_optim_vpp is the same GPT with 4 layers at
# tp 1 x dp 2 x pp 2 with 2 model chunks per pipeline rank (virtual
# pipeline stages: one buffer per chunk), checked by value;
# megatron_optim_moe a GPT with a router and 4 routed experts per layer at
# tp 1 x ep 2 x dp 4: Megatron's chained optimizer of a dense and an
# expert-parallel part ('chained_N.' keys, the experts' DP groups and
# buckets), checked by value; megatron_optim_dpz the first GPT in
# 'dp_zero_gather_scatter' form; megatron_optim_dsv3 a DeepSeek-V3-shaped
# GPT (MLA, shared experts, uneven stages, tied embeddings) at tp 1 x ep 2
# x pp 2, checked by value; megatron_optim_moez, _vppz and _dsv3z the MoE,
# virtual-pipeline and DeepSeek-V3 saves in dp_zero_gather_scatter form;
# megatron_optim_moeb and _moebg routed experts with linear biases
# (SequentialMLP, TEGroupedMLP); megatron_optim_mtp a GPT with one
# multi-token prediction layer, megatron_optim_mtpmoe one of routed experts,
# megatron_optim_mtppz one over 2 pipeline stages (the last stage's own
# embedding copy);
# megatron_optim_vppuz 6 layers on uneven
# stages (the first 2) of 2 model chunks each, dp_zero_gather_scatter.
# What does not add up is refused by name.
# usage: megatron_dp_optim_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
D=$SRC/tests/data/dcp
. "$SRC/tests/lib/tap.sh"
tmpdir

run "$TPCONV" inspect --optimizer "$D/megatron_optim_dpr"
grep -qx "# optimizer state: Megatron's distributed optimizer (dp_reshardable, 4 DP groups, 8 buckets, every master checked against its weight): 17 parameters, 51 state tensors beside them (each element its parameter's), 2 param groups" "$T/out" &&
  grep -qx "# \[1\] model.decoder.layers.0.self_attention.linear_qkv.weight BF16 \[24, 8\] (group 0): exp_avg F32, exp_avg_sq F32, fp32_param F32, step F32 \[\]" "$T/out" &&
  grep -q "^# param group 1: 7 parameters; lr=0.001 .* weight_decay=0 wd_mult=0$" "$T/out" && [ "$rc" = 0 ] &&
  ok "inspect --optimizer: 4 DP groups' 8 buckets mapped to 17 parameters, every master checked" ||
  bad "inspect --optimizer" "$(head -12 "$T/out" "$T/err")"

mkdir -p "$T/p" "$T/r"
run "$TPCONV" convert "$D/megatron_optim_dpr" --optimizer -o "$T/p/optimizer.pt" -q
r1=$rc
run "$TPCONV" convert "$D/megatron_optim_reshard" --optimizer -o "$T/r/optimizer.pt" -q
[ "$r1$rc" = 00 ] && cmp -s "$T/p/optimizer.pt" "$T/r/optimizer.pt" &&
  ok "dp_reshardable (tp 2 x dp 2 x pp 2) and fully_reshardable (tp 2 x dp 4) give a byte-identical optimizer.pt" ||
  bad "convert: exit $r1 $rc" "$(cat "$T/err")"
run "$TPCONV" convert "$D/megatron_optim_dpr" --optimizer --format dcp --dcp-ranks 2 -o "$T/d2" -q
r2=$rc
run "$TPCONV" convert "$T/d2" --optimizer -o "$T/x.pt" -q
[ "$r2$rc" = 00 ] && ok "--format dcp --dcp-ranks 2 and back" || bad "dcp out: exit $r2 $rc" "$(cat "$T/err")"

# virtual pipeline stages: each model chunk's buffer, its layers interleaved
# over the stages; every value on its element (megatron_optim_check.py with
# the generator's 4 layers at tp 1)
run "$TPCONV" inspect --optimizer "$D/megatron_optim_vpp"
grep -qx "# optimizer state: Megatron's distributed optimizer (dp_reshardable, 2 DP groups of 2 model chunks, 6 buckets, every master checked against its weight): 31 parameters, 93 state tensors beside them (each element its parameter's), 2 param groups" "$T/out" &&
  [ "$rc" = 0 ] && ok "inspect --optimizer of a save with virtual pipeline stages: 2 model chunks per rank, 6 buckets, 31 parameters" ||
  bad "inspect --optimizer (vpp)" "$(head -6 "$T/out" "$T/err")"
mkdir -p "$T/v"
run "$TPCONV" convert "$D/megatron_optim_vpp" --optimizer -o "$T/v/optimizer.pt" -q
if [ "$rc" != 0 ]; then
  bad "convert (vpp): exit $rc" "$(cat "$T/err")"
elif "$PY" -c 'import torch' 2>/dev/null; then
  MEGATRON_OPTIM_LAYERS=4 MEGATRON_OPTIM_TP=1 "$PY" "$SRC/tests/dcp/megatron_optim_check.py" "$T/v/optimizer.pt" >"$T/py" 2>&1
  l=$(cat "$T/py")
  case $l in
    "ok "*) ok "vpp: ${l#ok }" ;;
    *) bad "vpp by value" "$l" ;;
  esac
else
  skip "vpp: optimizer.pt by value" "no torch in $PY"
fi

# routed experts: the chained optimizer's dense buffer and the experts' own
# (DP group etp + ETP (ep + EP pp), expert DP 2), every value on its element
run "$TPCONV" inspect --optimizer "$D/megatron_optim_moe"
grep -qx "# optimizer state: Megatron's distributed optimizer (dp_reshardable, 1 DP group, 6 buckets and 2 expert-parallel ones (8 buckets), every master checked against its weight): 31 parameters, 93 state tensors beside them (each element its parameter's), 4 param groups" "$T/out" &&
  grep -q "^# \[[0-9]*\] model.decoder.layers.1.mlp.experts.local_experts.3.linear_fc2.weight BF16 \[8, 16\] (group 2): " "$T/out" &&
  [ "$rc" = 0 ] && ok "inspect --optimizer of a mixture of experts: the dense and the expert-parallel optimizers' buckets, 31 parameters in 4 groups" ||
  bad "inspect --optimizer (moe)" "$(head -6 "$T/out" "$T/err")"
mkdir -p "$T/m"
run "$TPCONV" convert "$D/megatron_optim_moe" --optimizer -o "$T/m/optimizer.pt" -q
if [ "$rc" != 0 ]; then
  bad "convert (moe): exit $rc" "$(cat "$T/err")"
elif "$PY" -c 'import torch' 2>/dev/null; then
  MEGATRON_OPTIM_MOE=1 MEGATRON_OPTIM_TP=1 "$PY" "$SRC/tests/dcp/megatron_optim_check.py" "$T/m/optimizer.pt" >"$T/py" 2>&1
  l=$(cat "$T/py")
  case $l in
    "ok "*) ok "moe: ${l#ok }" ;;
    *) bad "moe by value" "$l" ;;
  esac
else
  skip "moe: optimizer.pt by value" "no torch in $PY"
fi

# a DeepSeek-V3-shaped GPT: multi-latent attention, a dense first layer,
# then 2 routed experts and a shared expert per layer (the router's
# expert_bias a buffer, no state; each layer under its own keys), 4 layers
# over 2 uneven stages (decoder_last_pipeline_num_layers 1), tied embeddings
# over them (the last stage's output layer copy in a bucket of its own), tp
# 1 x ep 2 x pp 2: every value on its element
run "$TPCONV" inspect --optimizer "$D/megatron_optim_dsv3"
grep -qx "# optimizer state: Megatron's distributed optimizer (dp_reshardable, 2 DP groups, 14 buckets and 4 expert-parallel ones (6 buckets), every master checked against its weight): 61 parameters, 183 state tensors beside them (each element its parameter's), 4 param groups" "$T/out" &&
  [ "$rc" = 0 ] && ok "inspect --optimizer of a DeepSeek-V3-shaped save (MLA, a dense first layer, shared experts, uneven stages, tied embeddings): 61 parameters" ||
  bad "inspect --optimizer (dsv3)" "$(head -6 "$T/out" "$T/err")"
mkdir -p "$T/s"
run "$TPCONV" convert "$D/megatron_optim_dsv3" --optimizer -o "$T/s/optimizer.pt" -q
if [ "$rc" != 0 ]; then
  bad "convert (dsv3): exit $rc" "$(cat "$T/err")"
elif "$PY" -c 'import torch' 2>/dev/null; then
  MEGATRON_OPTIM_DSV3=1 "$PY" "$SRC/tests/dcp/megatron_optim_check.py" "$T/s/optimizer.pt" >"$T/py" 2>&1
  l=$(cat "$T/py")
  case $l in
    "ok "*) ok "dsv3: ${l#ok }" ;;
    *) bad "dsv3 by value" "$l" ;;
  esac
else
  skip "dsv3: optimizer.pt by value" "no torch in $PY"
fi

# dp_zero_gather_scatter (Megatron 0.8-0.12's default without
# --ckpt-fully-parallel-save): each DP group's buffers gathered on its DP rank
# 0 in one ShardedObject, as a legacy distrib_optim.pt holds them; the same
# parameter order, the buckets by args' bucket size
run "$TPCONV" inspect --optimizer "$D/megatron_optim_dpz"
grep -qx "# optimizer state: Megatron's distributed optimizer (dp_zero_gather_scatter, 4 DP groups, 8 buckets by args' bucket size, every master checked against its weight): 17 parameters, 51 state tensors beside them (each element its parameter's), 2 param groups" "$T/out" &&
  [ "$rc" = 0 ] && ok "inspect --optimizer of dp_zero_gather_scatter: 4 DP groups' param_state mapped to 17 parameters, every master checked" ||
  bad "inspect --optimizer (dpz)" "$(head -6 "$T/out" "$T/err")"
mkdir -p "$T/z"
run "$TPCONV" convert "$D/megatron_optim_dpz" --optimizer -o "$T/z/optimizer.pt" -q
[ "$rc" = 0 ] && cmp -s "$T/z/optimizer.pt" "$T/r/optimizer.pt" &&
  ok "dp_zero_gather_scatter (tp 2 x dp 2 x pp 2) and fully_reshardable give a byte-identical optimizer.pt" ||
  bad "convert (dpz): exit $rc" "$(cat "$T/err")"

# multi-token prediction (mtp_num_layers 1): the MTP layer's enorm, hnorm,
# eh_proj, transformer layer and final norm between the decoder's final norm
# and the output layer, each under its own key; tp 1 x dp 2, by value
run "$TPCONV" inspect --optimizer "$D/megatron_optim_mtp"
grep -qx "# optimizer state: Megatron's distributed optimizer (dp_reshardable, 1 DP group, 3 buckets, every master checked against its weight): 21 parameters, 63 state tensors beside them (each element its parameter's), 2 param groups" "$T/out" &&
  grep -q "^# \[[0-9]*\] model.mtp.layers.0.eh_proj.weight BF16 \[8, 16\] (group 0): " "$T/out" &&
  [ "$rc" = 0 ] && ok "inspect --optimizer of a save with an MTP layer: 21 parameters, the MTP layer's 11 among them" ||
  bad "inspect --optimizer (mtp)" "$(head -6 "$T/out" "$T/err")"
mkdir -p "$T/mtp"
run "$TPCONV" convert "$D/megatron_optim_mtp" --optimizer -o "$T/mtp/optimizer.pt" -q
if [ "$rc" != 0 ]; then
  bad "convert (mtp): exit $rc" "$(cat "$T/err")"
elif "$PY" -c 'import torch' 2>/dev/null; then
  l=$(MEGATRON_OPTIM_MTP=1 MEGATRON_OPTIM_LAYERS=1 MEGATRON_OPTIM_TP=1 MEGATRON_OPTIM_PP=1 "$PY" "$SRC/tests/dcp/megatron_optim_check.py" "$T/mtp/optimizer.pt" 2>&1)
  case $l in
    "ok "*) ok "mtp: ${l#ok }" ;;
    *) bad "mtp by value" "$l" ;;
  esac
else
  skip "mtp: optimizer.pt by value" "no torch in $PY"
fi

# expert linear biases (--add-bias-linear): megatron_optim_moeb's experts a
# SequentialMLP's (each expert's fc1 weight and bias, then fc2's),
# megatron_optim_moebg's TEGroupedMLP's (every expert's fc1 weight and bias,
# then every fc2's), 1 layer, tp 1 x ep 2 x dp 2, in dp_zero_gather_scatter form
MB="MEGATRON_OPTIM_MOE=1 MEGATRON_OPTIM_MOE_BIAS=1 MEGATRON_OPTIM_TP=1 MEGATRON_OPTIM_LAYERS=1"
# dp_zero_gather_scatter of the other shapes: the chained expert optimizer
# (its 'chained_N.' prefix kept, optimizer.py:1573-1603), virtual pipeline
# stages (one buffer per model chunk in param_state), tied embeddings over 2
# stages (DeepSeek-V3-shaped); each by value
for z in "moez|MEGATRON_OPTIM_MOE=1 MEGATRON_OPTIM_TP=1|1 DP group, 6 buckets and 2 expert-parallel ones (8 buckets)|31 parameters, 93 state tensors beside them (each element its parameter's), 4 param groups" \
  "vppz|MEGATRON_OPTIM_LAYERS=4 MEGATRON_OPTIM_TP=1|2 DP groups of 2 model chunks, 6 buckets|31 parameters, 93 state tensors beside them (each element its parameter's), 2 param groups" \
  "dsv3z|MEGATRON_OPTIM_DSV3=1|2 DP groups, 14 buckets and 4 expert-parallel ones (6 buckets)|61 parameters, 183 state tensors beside them (each element its parameter's), 4 param groups" \
  "vppuz|MEGATRON_OPTIM_LAYERS=6 MEGATRON_OPTIM_TP=1|2 DP groups of 2 model chunks, 6 buckets|45 parameters, 135 state tensors beside them (each element its parameter's), 2 param groups" \
  "mtpmoe|MEGATRON_OPTIM_MOE=1 MEGATRON_OPTIM_MTP=1 MEGATRON_OPTIM_TP=1 MEGATRON_OPTIM_LAYERS=1|1 DP group, 2 buckets and 2 expert-parallel ones (2 buckets)|35 parameters, 105 state tensors beside them (each element its parameter's), 4 param groups" \
  "mtppz|MEGATRON_OPTIM_MTP=1 MEGATRON_OPTIM_LAYERS=2 MEGATRON_OPTIM_TP=1|2 DP groups, 6 buckets|28 parameters, 84 state tensors beside them (each element its parameter's), 2 param groups" \
  "moeb|$MB|1 DP group, 2 buckets and 2 expert-parallel ones (2 buckets)|27 parameters, 81 state tensors beside them (each element its parameter's), 4 param groups" \
  "moebg|$MB MEGATRON_OPTIM_MOE_GROUPED=1|1 DP group, 2 buckets and 2 expert-parallel ones (2 buckets)|27 parameters, 81 state tensors beside them (each element its parameter's), 4 param groups"; do
  IFS='|' read -r zn envs what count <<<"$z"
  run "$TPCONV" inspect --optimizer "$D/megatron_optim_$zn"
  grep -qxF "# optimizer state: Megatron's distributed optimizer (dp_zero_gather_scatter, $what by args' bucket size, every master checked against its weight): $count" "$T/out" &&
    [ "$rc" = 0 ] && ok "inspect --optimizer of dp_zero_gather_scatter ($zn): $what" ||
    bad "inspect --optimizer ($zn)" "$(head -6 "$T/out" "$T/err")"
  mkdir -p "$T/$zn"
  run "$TPCONV" convert "$D/megatron_optim_$zn" --optimizer -o "$T/$zn/optimizer.pt" -q
  if [ "$rc" != 0 ]; then
    bad "convert ($zn): exit $rc" "$(cat "$T/err")"
  elif "$PY" -c 'import torch' 2>/dev/null; then
    l=$(env $envs "$PY" "$SRC/tests/dcp/megatron_optim_check.py" "$T/$zn/optimizer.pt" 2>&1)
    case $l in
      "ok "*) ok "$zn: ${l#ok }" ;;
      *) bad "$zn by value" "$l" ;;
    esac
  else
    skip "$zn: optimizer.pt by value" "no torch in $PY"
  fi
done

# refused by name: a layout, order or save that does not add up
"$PY" "$SRC/tests/dcp/megatron_optim_hostile.py" "$D/megatron_optim_dpr" "$T/c" \
  args:ddp_bucket_size=300 args:pipeline_model_parallel_size=1 args:virtual_pipeline_model_parallel_size=2 \
  type:dp_zero_gather_scatter "$D/megatron_optim_vpp" args:virtual_pipeline_model_parallel_size=1 \
  "$D/megatron_optim_moe" args:expert_model_parallel_size=1 args:moe_grouped_gemm=1 \
  "$D/megatron_optim_dpz" args:ddp_bucket_size=300 \
  "$D/megatron_optim_dsv3" args:untie_embeddings_and_output_weights=1 args:decoder_last_pipeline_num_layers=2 \
  "$D/megatron_optim_moez" args:moe_grouped_gemm=1 "$D/megatron_optim_dsv3z" args:untie_embeddings_and_output_weights=1 \
  "$D/megatron_optim_vppz" args:virtual_pipeline_model_parallel_size=1 \
  "$D/megatron_optim_moeb" args:moe_grouped_gemm=1 "$D/megatron_optim_moebg" args:moe_grouped_gemm=0 \
  "$D/megatron_optim_mtp" args:mtp_use_repeated_layer=1 args:mtp_num_layers=0 \
  "$D/megatron_optim_vppuz" args:decoder_first_pipeline_num_layers=4 args:decoder_first_pipeline_num_layers=3 \
  "$D/megatron_optim_mtppz" args:untie_embeddings_and_output_weights=0 \
  >/dev/null 2>&1 || rm -rf "$T/c"
hostile() { # name mutation(c:N: common.pt variant N; meta:M: dcp_meta.py M) expected-stderr [save]
  rm -rf "$T/h" "$T/h.pt"
  local s=$D/${4:-megatron_optim_dpr}
  if [ "${2%%:*}" = meta ]; then
    mkdir -p "$T/h" && cp "$s/latest_checkpointed_iteration.txt" "$T/h/" &&
      python3 "$SRC/tests/dcp/dcp_meta.py" "$s/iter_0000007" "$T/h/iter_0000007" "${2#meta:}" ||
      { bad "$1: generator"; return; }
  else
    [ -d "$T/c/${2#c:}" ] || { skip "$1" "no torch in $PY"; return; }
    mv "$T/c/${2#c:}" "$T/h"
  fi
  run "$TPCONV" convert "$T/h" --optimizer -o "$T/h.pt"
  [ "$rc" = 3 ] && [ ! -e "$T/h.pt" ] && grep -qxF "$3" "$T/err" && ok "refused: $1" || bad "$1 (exit $rc)" "$(cat "$T/err")" "want: $3"
}
if [ -d "$T/c/0" ]; then
  mkdir -p "$T/b" && run "$TPCONV" convert "$T/c/0" --optimizer -o "$T/b/optimizer.pt" -q
  [ "$rc" = 0 ] && cmp -s "$T/b/optimizer.pt" "$T/r/optimizer.pt" &&
    ok "args with another --ddp-bucket-size: the buckets the save records rule, the same optimizer.pt" ||
    bad "another bucket size in args (exit $rc)" "$(cat "$T/err")"
else
  skip "another bucket size in args" "no torch in $PY"
fi
I=$T/h/iter_0000007
G=optimizer.distributed.dp_group_idx_
B="gbuf_idx_0.dtype_(torch.bfloat16, torch.float32).bucket_idx_0"
hostile "two parameters swapped: the master check" \
  "meta:swap:decoder.layers.self_attention.linear_qkv.layer_norm_weight=decoder.layers.mlp.linear_fc1.layer_norm_weight" \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.self_attention.linear_qkv.layer_norm_weight': element 0: the distributed optimizer's master in DP group 0 (tp 0, pp 0) is 1024.75, which rounds differently to BF16, the model holds 5120: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped"
hostile "a frozen parameter (not in the buffer): the bucket sizes" "meta:drop:decoder.layers.mlp.linear_fc2.weight" \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.self_attention.linear_qkv.bias': DP group 0 (tp 0, pp 0): in Megatron's parameter order its 12 elements here would end at 204 of bucket 0, past the 200 elements per_bucket_numel_unpadded [200, 200, 224] gives it: another layout (frozen parameters, another parameter order); not mapped"
hostile "a parameter in another place of the order: the bucket sizes" "meta:rename:decoder.layers.self_attention.linear_qkv.layer_norm_weight=decoder.layers.input_layernorm.weight" \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.self_attention.linear_proj.weight': DP group 0 (tp 0, pp 0): in Megatron's parameter order its 32 elements here would end at 224 of bucket 1, past the 200 elements per_bucket_numel_unpadded [200, 200, 224] gives it: another layout (frozen parameters, another parameter order); not mapped"
hostile "DP groups beyond the args' tp x pp" c:1 \
  "tpconv: error: '$I/.metadata': tensor '${G}2.$B.param': DP group 2 in a tp 2 x pp 1 save (its groups are 0..1)"
hostile "more model chunks than layers split evenly" c:2 \
  "tpconv: error: '$I/common.pt': tp 2 x pp 2 (x 2 model chunks) over 2 layers: not an even pipeline split, nor uneven stages args give (decoder_first/last_pipeline_num_layers)"
hostile "buckets in a save that says dp_zero_gather_scatter" c:3 \
  "tpconv: error: '$I/.metadata': tensor '${G}0.$B.param': a tensor in a dp_zero_gather_scatter save, which keeps each DP group's state in one ShardedObject ('param_state'): not mapped"
hostile "no per_bucket_numel_unpadded" "meta:drop:${G}2.per_bucket_numel_unpadded/shard_0_1" \
  "tpconv: error: '$I/.metadata': no '${G}2.per_bucket_numel_unpadded': the bucket sizes every dp_reshardable save records for each DP group; not mapped"
hostile "a second parameter buffer" "meta:rename:${G}1.$B.exp_avg=${G}1.gbuf_idx_1.dtype_(torch.float32, torch.float32).bucket_idx_0.exp_avg" \
  "tpconv: error: '$I/.metadata': tensor '${G}1.gbuf_idx_1.dtype_(torch.float32, torch.float32).bucket_idx_0.exp_avg': a second parameter buffer of DP group 1 beside its model chunk's (one per parameter dtype, and expert-parallel parameters have their own): only one dense buffer per model chunk is read"
hostile "a bucket tensor missing" "meta:drop:${G}3.$B.exp_avg_sq" \
  "tpconv: error: '$I/.metadata': DP group 3's bucket 0 has no exp_avg_sq of 800 f32 elements (its per_bucket_numel_unpadded)"
hostile "a parameter not in the order's table" "meta:rename:decoder.layers.mlp.linear_fc2.weight=decoder.layers.mlp.experts.linear_fc2.weight" \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.mlp.experts.linear_fc2.weight': a parameter whose place in Megatron's parameter order tpconv does not know (its table, megatron_dp_optim.c, holds a GPT's parameters, multi-latent attention and routed and shared experts): the dp_reshardable buckets cannot be mapped"
hostile "a virtual-pipeline save whose args say one chunk" c:4 \
  "tpconv: error: '$I/.metadata': tensor '${G}0.gbuf_idx_1.dtype_(torch.bfloat16, torch.float32).bucket_idx_0.param': a second parameter buffer of DP group 0 beside its model chunk's (one per parameter dtype, and expert-parallel parameters have their own): only one dense buffer per model chunk is read"
Z=optimizer.distributed.dp_group_idx_
hostile "dp_zero_gather_scatter: a DP group's param_state missing" "meta:drop:${Z}2.param_state/shard_0_1" \
  "tpconv: error: '$I/.metadata': no '${Z}2.param_state': DP group 2's (tp 0, pp 1) optimizer state, which a dp_zero_gather_scatter save keeps on the group's DP rank 0; not mapped" \
  megatron_optim_dpz
hostile "dp_zero_gather_scatter: numel_unpadded off" "meta:pickleint:${Z}1.param_state/shard_0_1=numel_unpadded+64" \
  "tpconv: error: '$I/.metadata': tensor '${Z}1.param_state': buffer 0's param is not a flat f32 tensor of numel_unpadded (688) elements" \
  megatron_optim_dpz
hostile "dp_zero_gather_scatter: another bucket size in args" c:7 \
  "tpconv: error: '$I/.metadata': tensor '${Z}0.param_state': DP group 0 (tp 0, pp 0): its 8 parameters take 704 elements in Megatron's buffer layout (2 buckets of args' bucket size 300, 64-element aligned), its param_state holds 624 (numel_unpadded): another layout (frozen parameters, another bucket size or Megatron); not mapped"
hostile "dp_zero_gather_scatter: two parameters swapped, the master check" \
  "meta:swap:decoder.layers.self_attention.linear_qkv.layer_norm_weight=decoder.layers.mlp.linear_fc1.layer_norm_weight" \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.self_attention.linear_qkv.layer_norm_weight': element 0: the distributed optimizer's master in DP group 0 (tp 0, pp 0) is 1024.75, which rounds differently to BF16, the model holds 5120: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped" \
  megatron_optim_dpz
A=decoder.layers.0.self_attention
hostile "DeepSeek-V3: MLA's two up-projection norms swapped, the master check" \
  "meta:swap:$A.linear_q_up_proj.layer_norm_weight=$A.linear_kv_up_proj.layer_norm_weight" \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.self_attention.linear_q_up_proj.layer_norm_weight': element 0: the distributed optimizer's master in DP group 0 (tp 0, pp 0) is 4096.75, which rounds differently to BF16, the model holds 7168: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped" \
  megatron_optim_dsv3
hostile "DeepSeek-V3: a shared expert's weight and an attention one swapped, the master check" \
  "meta:swap:decoder.layers.1.mlp.shared_experts.linear_fc2.weight=decoder.layers.1.self_attention.linear_kv_down_proj.weight" \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.1.self_attention.linear_kv_down_proj.weight': element 0: the distributed optimizer's master in DP group 0 (tp 0, pp 0) is 17408.75, which rounds differently to BF16, the model holds 27648: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped" \
  megatron_optim_dsv3
hostile "DeepSeek-V3: args untie the embeddings (no bucket of their own)" c:8 \
  "tpconv: error: '$I/.metadata': tensor 'embedding.word_embeddings.weight': DP group 0 (tp 0, pp 0): in Megatron's parameter order its 320 elements here would end at 448 of bucket 10, past the 128 elements per_bucket_numel_unpadded [208, 320, 240, 320, 224, 200, 200, 384, 320, 240, 128, 320] gives it: another layout (frozen parameters, another parameter order); not mapped"
hostile "DeepSeek-V3: args put 2 layers on the last stage" c:9 \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.mlp.linear_fc1.weight': DP group 0 (tp 0, pp 0): in Megatron's parameter order its 256 elements here would end at 512 of bucket 3, past the 320 elements per_bucket_numel_unpadded [208, 320, 240, 320, 224, 200, 200, 384, 320, 240, 128, 320] gives it: another layout (frozen parameters, another parameter order); not mapped"
hostile "dp_zero_gather_scatter, virtual pipeline stages: two parameters swapped, the master check" \
  "meta:swap:decoder.layers.self_attention.linear_qkv.layer_norm_weight=decoder.layers.mlp.linear_fc1.layer_norm_weight" \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.self_attention.linear_qkv.layer_norm_weight': element 0: the distributed optimizer's master in DP group 0 (tp 0, pp 0) is 1024.75, which rounds differently to BF16, the model holds 5120: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped" \
  megatron_optim_vppz
hostile "dp_zero_gather_scatter, virtual pipeline stages: args say one chunk" c:12 \
  "tpconv: error: '$I/.metadata': tensor '${Z}0.param_state': holds more than one parameter buffer (one per parameter dtype and expert-parallel group): only one dense buffer is read"
hostile "dp_zero_gather_scatter, experts: two dense norms swapped, the master check" \
  "meta:swap:decoder.layers.self_attention.linear_qkv.layer_norm_weight=decoder.layers.pre_mlp_layernorm.weight" \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.self_attention.linear_qkv.layer_norm_weight': element 0: the distributed optimizer's master in DP group 0 (tp 0, pp 0) is 1024.75, which rounds differently to BF16, the model holds 5120: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped" \
  megatron_optim_moez
hostile "dp_zero_gather_scatter, experts in another order (args say TEGroupedMLP): the master check" c:10 \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.mlp.experts.local_experts.1.linear_fc1.weight': element 0: the distributed optimizer's master in DP group 0 (etp 0, ep 0, pp 0 of the expert-parallel optimizer) is 11264.75, which rounds differently to BF16, the model holds 8192: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped"
hostile "dp_zero_gather_scatter, DeepSeek-V3: a last-stage shared expert's weight and an attention one swapped, the master check" \
  "meta:swap:decoder.layers.3.mlp.shared_experts.linear_fc2.weight=decoder.layers.3.self_attention.linear_kv_down_proj.weight" \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.3.self_attention.linear_kv_down_proj.weight': element 0: the distributed optimizer's master in DP group 1 (tp 0, pp 1) is 50176.75, which rounds differently to BF16, the model holds 60416: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped" \
  megatron_optim_dsv3z
hostile "dp_zero_gather_scatter, DeepSeek-V3: args untie the embeddings (no copy on the last stage)" c:11 \
  "tpconv: error: '$I/.metadata': tensor 'chained_0.${Z}1.param_state': DP group 1 (tp 0, pp 1): its 13 parameters take 968 elements in Megatron's buffer layout (1 bucket of args' bucket size 0, 64-element aligned), its param_state holds 1288 (numel_unpadded): another layout (frozen parameters, another bucket size or Megatron); not mapped"
hostile "expert biases: a SequentialMLP's experts whose args say TEGroupedMLP, the master check" c:13 \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.mlp.experts.local_experts.1.linear_fc1.weight': element 0: the distributed optimizer's master in DP group 0 (etp 0, ep 0, pp 0 of the expert-parallel optimizer) is 17408.75, which rounds differently to BF16, the model holds 10240: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped"
hostile "expert biases: a TEGroupedMLP's experts whose args say SequentialMLP, the master check" c:14 \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.mlp.experts.local_experts.0.linear_fc2.weight': element 0: the distributed optimizer's master in DP group 0 (etp 0, ep 0, pp 0 of the expert-parallel optimizer) is 10240.75, which rounds differently to BF16, the model holds 17408: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped"
hostile "expert biases: a dense bias and a norm swapped, the master check" \
  "meta:swap:decoder.layers.self_attention.linear_proj.bias=decoder.layers.pre_mlp_layernorm.weight" \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.self_attention.linear_proj.bias': element 0: the distributed optimizer's master in DP group 0 (tp 0, pp 0) is 5120.75, which rounds differently to BF16, the model holds 6144: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped" \
  megatron_optim_moeb
hostile "expert biases: fc2's bias frozen (not in the buffer), the layout's total" "meta:drop:decoder.layers.mlp.experts.experts.linear_fc2.bias" \
  "tpconv: error: '$I/.metadata': tensor 'chained_1.${Z}0.param_state': DP group 0 (etp 0, ep 0, pp 0 of the expert-parallel optimizer): its 6 parameters take 640 elements in Megatron's buffer layout (1 bucket of args' bucket size 1000, 64-element aligned), its param_state holds 768 (numel_unpadded): another layout (frozen parameters, another bucket size or Megatron); not mapped" \
  megatron_optim_moeb
hostile "MTP: enorm and hnorm swapped, the master check" "meta:swap:mtp.layers.0.enorm.weight=mtp.layers.0.hnorm.weight" \
  "tpconv: error: '$I/.metadata': tensor 'mtp.layers.0.enorm.weight': element 0: the distributed optimizer's master in DP group 0 (tp 0, pp 0) is 9216.75, which rounds differently to BF16, the model holds 10240: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped" \
  megatron_optim_mtp
hostile "MTP: its final norm and its transformer layer's fc1 norm swapped, the master check" \
  "meta:swap:mtp.layers.0.final_layernorm.weight=mtp.layers.0.transformer_layer.mlp.linear_fc1.layer_norm_weight" \
  "tpconv: error: '$I/.metadata': tensor 'mtp.layers.0.transformer_layer.mlp.linear_fc1.layer_norm_weight': element 0: the distributed optimizer's master in DP group 0 (tp 0, pp 0) is 16384.75, which rounds differently to BF16, the model holds 19456: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped" \
  megatron_optim_mtp
hostile "MTP: a layer beyond args.mtp_num_layers" "meta:rename:mtp.layers.0.enorm.weight=mtp.layers.1.enorm.weight" \
  "tpconv: error: '$I/.metadata': tensor 'mtp.layers.1.enorm.weight': not a parameter of one of the 1 multi-token prediction layers args.mtp_num_layers says" \
  megatron_optim_mtp
hostile "MTP: routed experts in its transformer layer where args have none" \
  "meta:rename:mtp.layers.0.transformer_layer.mlp.linear_fc2.weight=mtp.layers.0.transformer_layer.mlp.experts.experts.linear_fc2.weight" \
  "tpconv: error: '$I/.metadata': tensor 'mtp.layers.0.transformer_layer.mlp.experts.experts.linear_fc2.weight': not stacked over the 0 experts args.num_experts says" \
  megatron_optim_mtp
hostile "MTP with experts: the MTP layer's experts' fc2 frozen, the expert buffer's total" \
  "meta:drop:mtp.layers.0.transformer_layer.mlp.experts.experts.linear_fc2.weight" \
  "tpconv: error: '$I/.metadata': tensor 'chained_1.${Z}0.param_state': DP group 0 (etp 0, ep 0, pp 0 of the expert-parallel optimizer): its 6 parameters take 768 elements in Megatron's buffer layout (1 bucket of args' bucket size 1000, 64-element aligned), its param_state holds 1024 (numel_unpadded): another layout (frozen parameters, another bucket size or Megatron); not mapped" \
  megatron_optim_mtpmoe
hostile "MTP with experts: its pre-MLP norm and enorm swapped, the master check" \
  "meta:swap:mtp.layers.0.transformer_layer.pre_mlp_layernorm.weight=mtp.layers.0.enorm.weight" \
  "tpconv: error: '$I/.metadata': tensor 'mtp.layers.0.enorm.weight': element 0: the distributed optimizer's master in DP group 0 (tp 0, pp 0) is 16384.75, which rounds differently to BF16, the model holds 23552: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped" \
  megatron_optim_mtpmoe
hostile "MTP: a parameter not in the order's table" "meta:rename:mtp.layers.0.enorm.weight=mtp.layers.0.gnorm.weight" \
  "tpconv: error: '$I/.metadata': tensor 'mtp.layers.0.gnorm.weight': a parameter of a multi-token prediction layer whose place in Megatron's parameter order tpconv does not know (enorm, hnorm, eh_proj, a GPT transformer_layer, final_layernorm): the dp_reshardable buckets cannot be mapped" \
  megatron_optim_mtp
hostile "MTP: one repeated layer (mtp_use_repeated_layer)" c:15 \
  "tpconv: error: '$I/common.pt': args.mtp_use_repeated_layer is set (one MTP layer for every depth): not mapped yet"
hostile "MTP: args without MTP layers" c:16 \
  "tpconv: error: '$I/.metadata': tensor 'mtp.layers.0.enorm.weight': not a parameter of one of the 0 multi-token prediction layers args.mtp_num_layers says"
hostile "MTP over 2 stages: its hnorm and the decoder's final norm swapped, the master check" \
  "meta:swap:mtp.layers.0.hnorm.weight=decoder.final_layernorm.weight" \
  "tpconv: error: '$I/.metadata': tensor 'decoder.final_layernorm.weight': element 0: the distributed optimizer's master in DP group 1 (tp 0, pp 1) is 15360.75, which rounds differently to BF16, the model holds 17408: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped" \
  megatron_optim_mtppz
hostile "MTP over 2 stages: args tie the embeddings" c:19 \
  "tpconv: error: '$I/common.pt': args say the embeddings are tied (no untie_embeddings_and_output_weights), yet the save has output_layer.weight"
hostile "uneven stages with virtual ones: two parameters swapped, the master check" \
  "meta:swap:decoder.layers.self_attention.linear_qkv.layer_norm_weight=decoder.layers.mlp.linear_fc1.layer_norm_weight" \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.self_attention.linear_qkv.layer_norm_weight': element 0: the distributed optimizer's master in DP group 0 (tp 0, pp 0) is 1024.75, which rounds differently to BF16, the model holds 5120: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped" \
  megatron_optim_vppuz
hostile "uneven stages with virtual ones: args give the first stage 4 layers" c:17 \
  "tpconv: error: '$I/.metadata': tensor '${Z}0.param_state': DP group 0 (tp 0, pp 0): its 15 parameters take 1984 elements in Megatron's buffer layout (6 buckets of args' bucket size 200, 64-element aligned), its param_state holds 1152 (numel_unpadded): another layout (frozen parameters, another bucket size or Megatron); not mapped"
hostile "uneven stages with virtual ones: a first stage of 3 layers over 2 chunks" c:18 \
  "tpconv: error: '$I/common.pt': decoder_first_pipeline_num_layers 3 and decoder_last_pipeline_num_layers unset of 6 layers over 2 stages (x 2 model chunks): not stages Megatron builds (each given one at least a layer, the stages between the rest evenly, each stage's layers a multiple of its model chunks)"
X="chained_1.${G}1.$B.param"
hostile "experts: DP groups beyond the args' expert parallelism" c:5 \
  "tpconv: error: '$I/.metadata': tensor '$X': DP group 1 of the expert-parallel optimizer in an etp 1 x ep 1 x pp 1 save (its groups are 0..0)"
hostile "experts in another order (args say TEGroupedMLP): the master check" c:6 \
  "tpconv: error: '$I/.metadata': tensor 'decoder.layers.0.mlp.experts.local_experts.1.linear_fc1.weight': element 0: the distributed optimizer's master in DP group 0 (etp 0, ep 0, pp 0 of the expert-parallel optimizer) is 11264.75, which rounds differently to BF16, the model holds 8192: Megatron's parameter order is not the one tpconv inferred from its modules; not mapped"
hostile "a chained optimizer's prefixed keys" "meta:rename:${G}0.$B.param=chained_0.${G}0.$B.param" \
  "tpconv: error: '$I/.metadata': tensor 'chained_0.${G}0.$B.param': a chained optimizer's state under its 'chained_N.' prefix (ChainedOptimizer adds it for the bucket forms, and without chained_optim_avoid_prefix): not read yet"
# without --optimizer the model alone, the prefixed entry left out with the others
run "$TPCONV" inspect "$T/h"
grep -qx "# optimizer state: 36 entries left out (read them with --select optimizer)" "$T/out" && ! grep -q "chained_0" "$T/out" && [ "$rc" = 0 ] &&
  ok "without --optimizer: the model, 36 optimizer entries left out (a chained_0. one among them)" ||
  bad "inspect without --optimizer" "$(head -5 "$T/out" "$T/err")"
done_testing
