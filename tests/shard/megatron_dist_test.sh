#!/usr/bin/env bash
# The megatron-dist layout (TAP): Megatron-Core torch_dist folders
# (release/__R_0.distcp, .metadata, common.pt, metadata.json, the tracker) written
# from Hugging Face LLaMA-family models made by real torch (a GQA LLaMA in f32; a
# tied Qwen2 with q/k/v biases in bf16) at several tp x pp, even and uneven stages.
# Checked here, without torch 2.x:
#   - tpconv's own torch_dist reader gives the HF tensors back bit for bit
#     (convert RELEASE --rules megatron-llama --vocab V), and the set reads back
#     as a set (merge bit-exact, verify);
#   - the folder is what Megatron's loader looks for: the tracker says release,
#     metadata.json says torch_dist, the layers are stacked keys (one .metadata
#     entry per parameter, chunks per layer and tp rank);
#   - --pp-layers puts the layers where it says, the keys stay the same;
#   - mixtures of experts (tests/gguf/arch's tiny Mixtral and Qwen3-MoE, 4 experts; the
#     latter with a dense first layer too, Megatron's non-homogeneous keys):
#     tp x pp x ep, expert tp (tp 2, ep 1), --pp-layers, --moe-grouped-gemm: the
#     experts under one stacked key per parameter [layers, experts, ...], read back
#     bit for bit as a set and through convert --rules megatron-mixtral /
#     megatron-qwen3-moe (with $SAN = 1 only the first case, before the generator);
#   - DeepSeek-V3 (tests/gguf/arch's tiny-deepseek): MLA, the router's expert_bias, a shared
#     expert and a dense first layer at tp x pp x ep with uneven stages, read back bit for bit
#     as a set, through convert --rules megatron-deepseek-v3 and resharded;
#   - ep over tp (ep = D x tp, Mixtral and DeepSeek-V3): tp x D x pp rank files as Megatron's
#     save with D data-parallel replicas, the dense chunks on dp rank 0 only, read back bit for
#     bit, resharded both ways; verify checks such a set (the dense part on dp rank 0's tp group,
#     each expert on its rank), and names an expert swapped on a dp rank 1 file or a changed
#     dense slice (tests/shard/dp_tamper.py);
#   - common.pt's args at resume (tests/shard/mcore_args_check.py: Megatron's
#     load_args_from_checkpoint and check_checkpoint_args re-implemented): a Mistral's
#     window, a Qwen2 with and without one, a llama3 rope; yarn, dynamic and a llama3 rope
#     of other numbers than Megatron's refused by name;
#   - what it cannot write is refused by name (a family without its Megatron
#     names, groups % tp, ep that does not divide tp, round-robin experts, V2-Lite's
#     q_proj, MLA whose rope rotates halves, group routing args cannot say, uneven stages
#     without --pp-layers).
# Loading by torch's own DCP reader with every shape and offset as Megatron's
# sharded_state_dict gives them: tests/shard/megatron_dist_torch.py (torch >= 2.4,
# the forky chroot; its docstring has the command).
# usage: megatron_dist_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
M=$T/m

# Mixtures of experts: family preset rules tp pp ep [--pp-layers] [--moe-grouped-gemm]
A=$SRC/tests/gguf/arch
run "$TPCONV" convert "$A/tiny-mixtral" -o "$T/mixtral.safetensors" -q &&
  run "$TPCONV" convert "$A/tiny-qwen3-moe" -o "$T/qwen3-moe.safetensors" -q || { echo "1..0 # SKIP fixtures"; exit 0; }
for spec in "mixtral 2 1 2" "mixtral 2 1 1" "mixtral 1 2 2" "qwen3-moe 2 2 2 0,2 g" "qwen3-moe 2 2 2 1,1" "qwen3-moe 1 2 1 2,0"; do
  set -- $spec; m=$1 tp=$2 pp=$3 ep=$4 pl=${5:-} g=${6:-}
  S=$T/${m}_${tp}_${pp}_$ep${pl:+_$pl} what="$m tp $tp pp $pp ep $ep${pl:+ ($pl)}${g:+ grouped}"
  run "$TPCONV" shard "$A/tiny-$m" --preset $m --tp $tp --pp $pp --ep $ep ${pl:+--pp-layers $pl} ${g:+--moe-grouped-gemm} \
    --layout megatron-dist -o "$S" -q
  if [ "$rc" != 0 ]; then bad "$what: shard" "$(cat "$T/err")"; continue; fi
  nf=$(ls "$S/release" | grep -c '^__[0-9]*_0\.distcp$') dp=$((ep > tp ? ep / tp : 1))
  [ "$nf" = $((tp * dp * pp)) ] && grep -aq 'decoder.layers.mlp.experts.experts.linear_fc1.weight' "$S/release/.metadata" &&
    grep -aq 'decoder.layers.mlp.router.weight' "$S/release/.metadata" && grep -aq 'decoder.layers.pre_mlp_layernorm.weight' "$S/release/.metadata" &&
    grep -aq 'expert_tensor_parallel_size' "$S/release/common.pt" &&
    ok "$what: $nf rank files; the experts, the router and pre_mlp_layernorm under Megatron's stacked keys" ||
    bad "$what: files" "$(ls -R "$S")"
  run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q
  [ "$rc" = 0 ] && same "$T/$m.safetensors" "$S.merged.safetensors" && ok "$what: merge of the set is bit-exact" ||
    bad "$what: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
  run "$TPCONV" convert "$S/release" --rules megatron-$m --vocab 320 -o "$S.hf.safetensors" -q
  [ "$rc" = 0 ] && same "$T/$m.safetensors" "$S.hf.safetensors" &&
    ok "$what: HF -> torch_dist -> HF through the torch_dist reader (--rules megatron-$m) is bit-exact" ||
    bad "$what: read back" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
  [ "$SAN" = 1 ] && break
done
# DeepSeek-V3 (tests/gguf/arch's tiny-deepseek: 3 layers, the first dense, 4 routed experts
# and a shared one, MLA with q_lora_rank): tp x pp x ep with uneven stages, read back bit for
# bit as a set and through convert --rules megatron-deepseek-v3
run "$TPCONV" convert "$A/tiny-deepseek" -o "$T/deepseek.safetensors" -q || bad "deepseek fixture" "$(cat "$T/err")"
for spec in "2 2 2 2,1" "2 1 1" "4 2 2 1,2 g" "2 2 4 2,1"; do
  set -- $spec; tp=$1 pp=$2 ep=$3 pl=${4:-} g=${5:-}
  S=$T/ds_${tp}_${pp}_$ep what="deepseek-v3 tp $tp pp $pp ep $ep${pl:+ ($pl)}${g:+ grouped}"
  run "$TPCONV" shard "$A/tiny-deepseek" --preset deepseek-v3 --tp $tp --pp $pp --ep $ep ${pl:+--pp-layers $pl} ${g:+--moe-grouped-gemm} \
    --layout megatron-dist -o "$S" -q
  if [ "$rc" != 0 ]; then bad "$what: shard" "$(cat "$T/err")"; continue; fi
  M_=$S/release/.metadata
  grep -aq 'decoder.layers.1.self_attention.linear_q_up_proj.layer_norm_weight' "$M_" && grep -aq 'decoder.layers.2.mlp.router.expert_bias' "$M_" &&
    grep -aq 'decoder.layers.2.mlp.shared_experts.linear_fc1.weight' "$M_" && grep -aq 'decoder.layers.0.mlp.linear_fc1.layer_norm_weight' "$M_" &&
    grep -aq 'decoder.layers.1.self_attention.linear_kv_down_proj.weight' "$M_" && grep -aq 'decoder.layers.1.mlp.experts.experts.linear_fc2.weight' "$M_" &&
    ! grep -aq 'linear_qkv' "$M_" && grep -aq 'multi_latent_attention' "$S/release/common.pt" &&
    ok "$what: MLA, the router's expert_bias, shared experts, the dense first layer under Megatron's per-layer keys" ||
    bad "$what: keys" "$(strings "$M_" | grep decoder | head)"
  run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q
  [ "$rc" = 0 ] && same "$T/deepseek.safetensors" "$S.merged.safetensors" && ok "$what: merge of the set is bit-exact" ||
    bad "$what: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
  run "$TPCONV" convert "$S/release" --rules megatron-deepseek-v3 --vocab 320 -o "$S.hf.safetensors" -q
  [ "$rc" = 0 ] && same "$T/deepseek.safetensors" "$S.hf.safetensors" &&
    ok "$what: HF -> torch_dist -> HF through the torch_dist reader (--rules megatron-deepseek-v3) is bit-exact" ||
    bad "$what: read back" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
  [ "$SAN" = 1 ] && break
done
[ "$SAN" = 1 ] && { done_testing; exit; }
# the chunks: 2 layers x 4 experts, fc1's gate and up apart, each expert whole on its EP group
# (tp 2 ep 2: expert tp 1), halves of every expert's rows or columns at tp 2 ep 1
run "$TPCONV" inspect "$T/mixtral_2_1_2/release"
[ "$rc" = 0 ] && grep -q "10 tensor entries in 43 chunks" "$T/out" && grep -q "local_experts.3.linear_fc1.weight .*\[128, 32\] .* 2 pieces" "$T/out" &&
  run "$TPCONV" inspect "$T/mixtral_2_1_1/release" && grep -q "10 tensor entries in 67 chunks" "$T/out" &&
  grep -q "local_experts.3.linear_fc1.weight .*\[128, 32\] .* 4 pieces" "$T/out" &&
  ok "experts: one key per parameter, a chunk per expert (and half), the global numbers back" || bad "expert chunks" "$(head -12 "$T/out")"
# --dry-run: every rank file with the bytes of the chunks it would store (a replicated box
# once), from the headers alone; they add up to the model's and the vocabulary padding
# (2 x (512 - 320) rows x 32 x 4 bytes = 49152)
run "$TPCONV" shard "$A/tiny-qwen3-moe" --preset qwen3-moe --tp 2 --pp 2 --ep 2 --layout megatron-dist --dry-run
[ "$rc" = 0 ] && [ "$(grep -c '^# rank [0-3] .*release/__[0-3]_0.distcp .* chunks ' "$T/out")" = 4 ] &&
  grep -q "^# stored: 280448 bytes of tensor data in all rank files .* the model 231296 " "$T/out" &&
  ok "--dry-run lists the 4 rank files with their chunks' bytes; 280448 = the model's 231296 + 49152 of padding" ||
  bad "dry-run" "$(grep '^# rank\|stored' "$T/out")" "$(cat "$T/err")"
run "$TPCONV" verify --reference "$A/tiny-qwen3-moe" --shards "$T/qwen3-moe_2_2_2_1,1"
[ "$rc" = 0 ] && ok "verify passes on an expert-parallel megatron-dist set ($(tail -n 1 "$T/out" | sed 's/^# //'))" || bad "verify moe" "$(tail -3 "$T/out")" "$(cat "$T/err")"
# dense layers beside MoE ones (a Qwen3-MoE with mlp_only_layers [0], tests/shard/mixed_moe.py):
# Megatron's non-homogeneous keys, each with its layer number and no layer axis, the
# dense layer's norm fused into linear_fc1, moe_layer_freq [0, 1] in args
X=$T/mixed-moe S=$T/mixed_2_2_2
python3 "$H/mixed_moe.py" "$A/tiny-qwen3-moe" "$X" && run "$TPCONV" convert "$X" -o "$X.safetensors" -q &&
  run "$TPCONV" shard "$X" --preset qwen3-moe --tp 2 --pp 2 --ep 2 --pp-layers 1,1 --layout megatron-dist -o "$S" -q &&
  grep -aq 'decoder.layers.1.mlp.experts.experts.linear_fc1.weight' "$S/release/.metadata" &&
  grep -aq 'decoder.layers.0.mlp.linear_fc1.layer_norm_weight' "$S/release/.metadata" &&
  ! grep -aq 'decoder.layers.mlp' "$S/release/.metadata" && grep -aq moe_layer_freq "$S/release/common.pt" &&
  run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q && same "$X.safetensors" "$S.merged.safetensors" &&
  run "$TPCONV" convert "$S/release" --rules megatron-qwen3-moe --vocab 320 -o "$S.hf.safetensors" -q &&
  same "$X.safetensors" "$S.hf.safetensors" &&
  ok "dense and MoE layers: per-layer keys, the dense norm fused; merge and HF -> torch_dist -> HF bit-exact" ||
  bad "mixed layers" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
# a Megatron save of non-homogeneous layers (keys with layer numbers, tests/dcp/
# make_megatron_nonhomog.py): the experts' stack comes apart per expert all the same;
# expert 1's linear_fc1 is elements 48..95 of key 7: float32 7048 .. 7095 (sha256)
run "$TPCONV" inspect --hash "$SRC/tests/data/dcp/megatron_nonhomog"
[ "$rc" = 0 ] && [ "$(grep -c 'decoder.layers.1.mlp.experts.local_experts.[01].linear_fc[12].weight ' "$T/out")" = 4 ] &&
  grep -q "decoder.layers.0.mlp.linear_fc1.weight .*\[12, 4\]" "$T/out" &&
  grep -q "local_experts.1.linear_fc1.weight .* 77bb1d0b7ba4e28256b656ce9291b23fa29b6955519575f23afe046ed273e55e" "$T/out" &&
  ok "non-homogeneous layers (a layer's own keys): the experts come apart per expert, by value" || bad "non-homogeneous" "$(cat "$T/out" "$T/err")"
# ep over tp (ep = D x tp): Megatron's save has tp x D x pp files (rank (pp x D + d) x tp + t),
# the dense chunks in the dp-rank-0 files only (transformer/utils.py:164-175), each file the
# experts of EP rank t + tp x d (moe/experts.py:1556-1564): at tp 2 pp 2 ep 4 with stages 2,1,
# ranks 2, 3, 6, 7 hold one expert's 3 chunks (fc1 gate and up, fc2) of the stage's MoE layer
S=$T/ds_2_2_4
run "$TPCONV" shard "$A/tiny-deepseek" --preset deepseek-v3 --tp 2 --pp 2 --ep 4 --pp-layers 2,1 --layout megatron-dist --dry-run
[ "$rc" = 0 ] && grep -q "^# plan 'deepseek-v3': tp 2, dp 2 .* 8 rank files" "$T/out" &&
  [ "$(grep -c '^# rank [2367] (tp [01], dp 1, pp [01]): release/__[2367]_0.distcp  *3 chunks  *12288 bytes' "$T/out")" = 4 ] &&
  grep -q '^# rank 0 (tp 0, dp 0, pp 0): release/__0_0.distcp  *30 chunks ' "$T/out" &&
  grep -q "^# stored: 419488 bytes " "$T/out" && grep -q '"dp": 2,' "$S/tpconv-manifest.json" &&
  grep -q '"tp_rank": 1, "dp_rank": 1, "pp_rank": 1, "file": "release/__7_0.distcp"' "$S/tpconv-manifest.json" &&
  grep -aq data_parallel_size "$S/release/common.pt" &&
  ok "ep 4 over tp 2: 8 rank files, the dense chunks on dp rank 0, one expert on each; the bytes those of ep 2 (419488)" ||
  bad "ep > tp files" "$(grep '^# rank\|^# plan\|^# stored' "$T/out")" "$(cat "$T/err")"
run "$TPCONV" shard "$S" --tp 2 --ep 2 --layout megatron-dist -o "$S.re" -q &&
  run "$TPCONV" verify --reference "$A/tiny-deepseek" --shards "$S.re" -q &&
  run "$TPCONV" shard "$S.re" --tp 1 --ep 2 --layout megatron-dist -o "$S.dp" -q &&
  [ "$(ls "$S.dp/release" | grep -c distcp)" = 2 ] && run "$TPCONV" merge "$S.dp" -o "$S.dp.safetensors" -q &&
  same "$T/deepseek.safetensors" "$S.dp.safetensors" &&
  ok "ep > tp resharded: tp 2 pp 2 ep 4 -> tp 2 ep 2 (verify passes) -> tp 1 ep 2 (dp 2), merged bit-exact" ||
  bad "ep > tp reshard" "$(cat "$T/err" "$T/out" "$T/diff" 2>/dev/null)"
run "$TPCONV" inspect "$S"
[ "$rc" = 0 ] && grep -q "^# shard set: layout megatron-dist, tp 2, pp 2, dp 2, ep 4 (4 experts per layer, contiguous; 1 rank per expert), 8 rank files" "$T/out" &&
  ok "inspect says the set's tp, pp, dp and ep" || bad "inspect dp" "$(head -2 "$T/out")" "$(cat "$T/err")"
# tp 1 pp 2 ep 4 (1,2): stage 0 is the dense layer, so its dp ranks 1-3 store nothing (empty
# files, as torch's writer leaves them); the balance is of the files that store any
run "$TPCONV" shard "$A/tiny-deepseek" --preset deepseek-v3 --tp 1 --pp 2 --ep 4 --pp-layers 1,2 --layout megatron-dist --dry-run
[ "$rc" = 0 ] && [ "$(grep -c '^# rank [123] (tp 0, dp [123], pp 0): .* 0 chunks  *0 bytes' "$T/out")" = 3 ] &&
  grep -q "^# 3 rank files store no tensor data" "$T/out" && grep -q "^# balance: .* the smallest that stores any" "$T/out" &&
  ok "a dense stage's data-parallel ranks: 3 empty files, said so" || bad "empty dp files" "$(grep '^# ' "$T/out" | tail -12)"
# verify of a set with data-parallel replicas (tp x dp ranks a stage): the dense chunks checked on
# dp rank 0's tp group, every expert on its EP rank; the forward runs the dense part on dp rank 0's
# tp group (the other ranks' all-reduce shares are zeros) and each expert on the rank holding it
# (tp 2 pp 2 ep 4 above; tp 1 pp 2 ep 4 with a dense first stage; Mixtral tp 2 ep 4); the MoE
# block and model checks of every MoE layer pass
run "$TPCONV" shard "$A/tiny-deepseek" --preset deepseek-v3 --tp 1 --pp 2 --ep 4 --pp-layers 1,2 --layout megatron-dist -o "$T/ds_1_2_4" -q &&
  run "$TPCONV" shard "$A/tiny-mixtral" --preset mixtral --tp 2 --ep 4 --layout megatron-dist -o "$T/mx_2_1_4" -q ||
  bad "dp sets for verify" "$(cat "$T/err")"
for spec in "deepseek ds_2_2_4 2 2" "deepseek ds_1_2_4 1 4" "mixtral mx_2_1_4 2 2"; do
  set -- $spec
  run "$TPCONV" verify --reference "$A/tiny-$1" --shards "$T/$2" --json "$T/$2.json"
  nm=$(grep -Ec '^ *mlp +model\.layers\.[0-9]+\.moe .* pass' "$T/out")
  [ "$rc" = 0 ] && [ "$nm" = 2 ] && grep -Eq '^ *model +model .* pass' "$T/out" &&
    grep -q "^# tpconv verify: tp $(($3 * $4)) (tp $3 x dp $4)," "$T/out" && grep -q "\"dp\": $4," "$T/$2.json" &&
    ok "verify passes on $1 tp $3 x dp $4 ($2): structure, MoE blocks and the model ($(tail -n 1 "$T/out" | sed 's/^# //'))" ||
    bad "verify $2 (rc=$rc, $nm MoE checks)" "$(grep -v ' pass' "$T/out" | head -6)" "$(cat "$T/err")"
done
# under mpirun, one process per rank of a stage (tp 2 x dp 2): the threads backend's checks and digests
if command -v mpirun >/dev/null; then
  mpirun --allow-run-as-root --oversubscribe -np 4 "$TPCONV" verify --reference "$A/tiny-deepseek" --shards "$S" \
    --json "$T/mpi.json" -q >/dev/null 2>"$T/err"
  rc=$?
  [ "$rc" = 0 ] && $PY -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda r: [(c["check"], c["tensor"], c["status"], c["digest"]) for c in r["checks"]]
sys.exit(0 if key(a) == key(b) and a["failed"] == 0 else 1)' "$T/ds_2_2_4.json" "$T/mpi.json" &&
    ok "mpirun -np 4 verify of the tp 2 x dp 2 set: every check and digest equal the threads backend's" ||
    bad "mpirun verify of a dp set (rc=$rc)" "$(tail -3 "$T/err")"
else
  skip "mpirun verify of a dp set" "no mpirun"
fi
run "$TPCONV" verify --reference "$A/tiny-deepseek" --shards "$S" --device cuda
[ "$rc" = 2 ] && grep -q "a set with 2 data-parallel replicas a stage (tp 2 x dp 2 ranks) is checked on the CPU (--device cpu)" "$T/err" &&
  ok "verify --device cuda refuses a dp set by name (its GPU path not run)" || bad "dp on cuda (rc=$rc)" "$(cat "$T/err")"
# tampered copies: expert 3 of layer 1 (EP rank 3: rank file 3, dp rank 1) with its gate and up
# matrices swapped; one element of tp rank 1's slice of the dense layer 0's gate_proj (rank file 1)
# negated. Each fails structure naming the tensor and the rank, and the model check names the layer
cp -r "$S" "$T/dsx1" && cp -r "$S" "$T/dsx2" &&
  $PY "$H/dp_tamper.py" "$T/deepseek.safetensors" "$T/dsx1/release/__3_0.distcp" swap \
    model.layers.1.mlp.experts.3.gate_proj.weight model.layers.1.mlp.experts.3.up_proj.weight &&
  $PY "$H/dp_tamper.py" "$T/deepseek.safetensors" "$T/dsx2/release/__1_0.distcp" flip model.layers.0.mlp.gate_proj.weight 1 2 ||
  bad "tamper" "$(cat "$T/err")"
says() { grep -A1 -E "^ *$1 .* FAIL" "$T/out" | grep -q -- "$2"; } # a failing row and its message
run "$TPCONV" verify --reference "$A/tiny-deepseek" --shards "$T/dsx1"
[ "$rc" = 1 ] && says 'structure +model\.layers\.1\.mlp\.experts\.3\.gate_proj\.weight' "rank 3: 1024 of 1024 elements differ" &&
  says 'structure +model\.layers\.1\.mlp\.experts\.3\.up_proj\.weight' "rank 3: 1024 of 1024 elements differ" &&
  grep -Eq '^ *mlp +model\.layers\.1\.moe .* FAIL' "$T/out" && grep -q "the first layer whose output differs: 'model.layers.1'" "$T/out" &&
  [ "$(grep -c ' FAIL' "$T/out")" = 6 ] &&
  ok "an expert's gate and up swapped on a dp rank 1 file: verify names both tensors, rank 3, their layer checks, the MoE block and layer 1" ||
  bad "swapped expert on dp 1 (rc=$rc)" "$(grep -v ' pass' "$T/out" | head -8)" "$(cat "$T/err")"
run "$TPCONV" verify --reference "$A/tiny-deepseek" --shards "$T/dsx2"
[ "$rc" = 1 ] && says 'structure +model\.layers\.0\.mlp\.gate_proj\.weight' "rank 1: 1 of 1024 elements differ" &&
  grep -Eq '^ *mlp +model\.layers\.0\.mlp .* FAIL' "$T/out" && grep -q "the first layer whose output differs: 'model.layers.0'" "$T/out" &&
  [ "$(grep -c ' FAIL' "$T/out")" = 4 ] &&
  ok "one element of a dense slice changed (rank file 1, dp rank 0): verify names the tensor, rank 1, its layer check, the block and layer 0" ||
  bad "corrupted dense slice (rc=$rc)" "$(grep -v ' pass' "$T/out" | head -8)" "$(cat "$T/err")"
# a dp rank 1 file storing dense chunks too (rank file 0's items appended to rank file 2's; the
# index still places every chunk once): its bytes are more than its experts', said by the file
cp -r "$S" "$T/dsx3" && cat "$S/release/__0_0.distcp" >>"$T/dsx3/release/__2_0.distcp"
run "$TPCONV" verify --reference "$A/tiny-deepseek" --shards "$T/dsx3"
[ "$rc" = 1 ] && says 'structure +release/__2_0\.distcp' "stores 132624 bytes of chunks, but rank 2 (tp 0, dp 1) stores its experts' 12288 only" &&
  [ "$(grep -c ' FAIL' "$T/out")" = 1 ] &&
  ok "dense chunks stored again in a dp rank 1 file: verify names the file and its bytes" ||
  bad "dense chunks on dp 1 (rc=$rc)" "$(grep -v ' pass' "$T/out" | head -4)" "$(cat "$T/err")"
run "$TPCONV" shard "$A/tiny-mixtral" --preset mixtral --tp 1 --pp 2 --ep 2 -o "$T/x4" -q
[ "$rc" = 2 ] && grep -q -- "2 data-parallel replicas a stage (--ep 2 over --tp 1): the tpconv layout holds tp x pp ranks" "$T/err" && [ ! -e "$T/x4" ] &&
  ok "ep over tp in a layout without data-parallel ranks is refused by name" || bad "ep > tp tpconv" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$A/tiny-mixtral" --preset mixtral --tp 2 --ep 2 --ep-placement round-robin --layout megatron-dist -o "$T/x5" -q
[ "$rc" = 2 ] && grep -q "round-robin is not written by the megatron-dist layout" "$T/err" && [ ! -e "$T/x5" ] &&
  ok "round-robin experts are refused by name (Megatron's EP ranks own contiguous experts)" || bad "round-robin" "exit $rc" "$(cat "$T/err")"
# the chunks at tp 2 pp 2 ep 2: 44 keys; MLA's down projections and every norm once, q/kv up
# projections and linear_proj per tp rank, the shared experts' fc1 in 4 pieces (gate and up
# halves), each routed expert whole on its EP group
run "$TPCONV" inspect "$T/ds_2_2_2/release"
[ "$rc" = 0 ] && grep -q "44 tensor entries in 87 chunks" "$T/out" &&
  grep -q "decoder.layers.1.mlp.shared_experts.linear_fc1.weight .*\[64, 32\] .* 4 pieces" "$T/out" &&
  grep -q "decoder.layers.1.self_attention.linear_kv_down_proj.weight .*\[40, 32\] *5120$" "$T/out" &&
  grep -q "decoder.layers.2.mlp.experts.local_experts.3.linear_fc1.weight .*\[64, 32\] .* 2 pieces" "$T/out" &&
  ok "deepseek-v3 chunks: 44 keys in 87 chunks; kv_a whole once, the shared expert's fc1 in 4 pieces" || bad "deepseek chunks" "$(head -30 "$T/out")"
# --dry-run: the rank files and their bytes from the headers; the model's 370336 bytes and
# 2 x (512 - 320) x 32 x 4 = 49152 of vocabulary padding
run "$TPCONV" shard "$A/tiny-deepseek" --preset deepseek-v3 --tp 2 --pp 2 --ep 2 --pp-layers 2,1 --layout megatron-dist --dry-run
[ "$rc" = 0 ] && [ "$(grep -c '^# rank [0-3] .*release/__[0-3]_0.distcp .* chunks ' "$T/out")" = 4 ] &&
  grep -q "^# stored: 419488 bytes of tensor data in all rank files .* the model 370336 " "$T/out" &&
  ok "deepseek-v3 --dry-run: 4 rank files, 419488 bytes = the model's 370336 + 49152 of padding" ||
  bad "deepseek dry-run" "$(grep '^# rank\|stored' "$T/out")" "$(cat "$T/err")"
run "$TPCONV" verify --reference "$A/tiny-deepseek" --shards "$T/ds_2_2_2"
[ "$rc" = 0 ] && ok "verify passes on a deepseek-v3 megatron-dist set ($(tail -n 1 "$T/out" | sed 's/^# //'))" || bad "verify deepseek" "$(tail -3 "$T/out")" "$(cat "$T/err")"
# reshard: the set into megatron-dist tp 1 and into the default layout, both bit-exact
run "$TPCONV" shard "$T/ds_2_2_2" --preset deepseek-v3 --tp 1 --layout megatron-dist -o "$T/dsre1" -q &&
  run "$TPCONV" convert "$T/dsre1/release" --rules megatron-deepseek-v3 --vocab 320 -o "$T/dsre1.safetensors" -q &&
  run "$TPCONV" shard "$T/ds_2_2_2" --preset deepseek-v3 --tp 2 --ep 2 -o "$T/dsre2" -q && run "$TPCONV" merge "$T/dsre2" -o "$T/dsre2.safetensors" -q
[ "$rc" = 0 ] && same "$T/deepseek.safetensors" "$T/dsre1.safetensors" && same "$T/deepseek.safetensors" "$T/dsre2.safetensors" &&
  ok "deepseek-v3 reshard tp 2 pp 2 ep 2 -> megatron-dist tp 1 and -> tpconv tp 2 ep 2: bit-exact" || bad "deepseek reshard" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
# refused by name, nothing written: V2-Lite's q_proj (q_lora_rank None: Megatron's linear_q_proj
# has a norm the model has not), a rope in halves (rope_interleave false), uneven stages
# without --pp-layers (Megatron's arguments cannot say them)
run "$TPCONV" shard "$A/noqlora/tiny-deepseek" --preset deepseek-v3 --tp 2 --layout megatron-dist -o "$T/x6" -q
[ "$rc" = 3 ] && grep -q "tensor 'model.layers.0.self_attn.q_proj.weight': no Megatron-Core name for this tensor .*: deepseek-v3" "$T/err" && [ ! -e "$T/x6" ] &&
  ok "DeepSeek-V2-Lite's q_proj (no q_lora_rank) is refused by name (exit 3), nothing written" || bad "q_proj refusal" "exit $rc" "$(cat "$T/err")"
mkdir -p "$T/ds-halves" && cp "$A/tiny-deepseek/"* "$T/ds-halves/" &&
  sed -i 's/"rope_interleave": true/"rope_interleave": false/' "$T/ds-halves/config.json"
run "$TPCONV" shard "$T/ds-halves" --preset deepseek-v3 --tp 2 --layout megatron-dist -o "$T/x8" -q
[ "$rc" = 3 ] && grep -q "rope_interleave is false: Megatron-Core's multi-latent attention rotates in interleaved pairs" "$T/err" && [ ! -e "$T/x8" ] &&
  ok "MLA with rope_interleave false is refused (exit 3), nothing written" || bad "rope halves" "exit $rc" "$(cat "$T/err")"
mkdir -p "$T/ds-greedy" && cp "$A/tiny-deepseek/"* "$T/ds-greedy/" &&
  sed -i 's/"topk_method": "noaux_tc"/"topk_method": "group_limited_greedy"/' "$T/ds-greedy/config.json"
run "$TPCONV" shard "$T/ds-greedy" --preset deepseek-v3 --tp 2 --layout megatron-dist -o "$T/x10" -q
[ "$rc" = 3 ] && grep -q "Megatron scores a group by the sum of its top num_experts_per_tok / topk_group experts .* the model by its best one" "$T/err" &&
  [ ! -e "$T/x10" ] && ok "group-limited routing Megatron's args cannot say (V2's max of a group at 2 experts per group) is refused (exit 3)" ||
  bad "group routing" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$A/tiny-deepseek" --preset deepseek-v3 --tp 2 --pp 2 --layout megatron-dist -o "$T/x9" -q
[ "$rc" = 3 ] && grep -q "3 layers over pp 2 (--pp-layers" "$T/err" && [ ! -e "$T/x9" ] &&
  ok "3 layers over pp 2 without --pp-layers is refused (Megatron's stages are equal unless its arguments say)" || bad "uneven stages" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$M/llama" --preset llama --tp 2 --moe-grouped-gemm -o "$T/x7" -q
[ "$rc" = 2 ] && grep -q -- "--moe-grouped-gemm goes with --layout megatron-dist" "$T/err" && ok "--moe-grouped-gemm without megatron-dist: usage error" ||
  bad "grouped usage" "exit $rc" "$(cat "$T/err")"
$PY "$H/vllm_check.py" make "$M" >/dev/null || { echo "1..0 # SKIP model generator failed"; exit 0; }
"$TPCONV" convert "$M/llama" -o "$M/llama.safetensors" -q && "$TPCONV" convert "$M/qwen" -o "$M/qwen.safetensors" -q ||
  { echo "1..0 # SKIP convert failed"; exit 0; }

# model tp pp vocab [--pp-layers]
for spec in "llama 2 2 1000" "llama 1 1 1000" "qwen 2 1 130" "qwen 4 2 130" "llama 2 2 1000 0,2"; do
  set -- $spec; m=$1 tp=$2 pp=$3 v=$4 pl=${5:-}
  S=$T/${m}_${tp}_$pp${pl:+_$pl}
  run "$TPCONV" shard "$M/$m" --preset llama --tp $tp --pp $pp ${pl:+--pp-layers $pl} --layout megatron-dist -o "$S" -q
  if [ "$rc" != 0 ]; then bad "$m tp $tp pp $pp${pl:+ ($pl)}: shard" "$(cat "$T/err")"; continue; fi
  nf=$(ls "$S/release" | grep -c '^__[0-9]*_0\.distcp$')
  [ "$nf" = $((tp * pp)) ] && [ "$(cat "$S/latest_checkpointed_iteration.txt")" = release ] &&
    grep -q '"sharded_backend": "torch_dist"' "$S/release/metadata.json" && [ -s "$S/release/common.pt" ] && [ -s "$S/release/.metadata" ] &&
    ok "$m tp $tp pp $pp${pl:+ ($pl)}: $nf rank files, .metadata, common.pt, metadata.json, the tracker" || bad "$m tp $tp pp $pp: files" "$(ls -R "$S")"
  run "$TPCONV" convert "$S/release" --rules megatron-llama --vocab $v -o "$S.hf.safetensors" -q
  [ "$rc" = 0 ] && same "$M/$m.safetensors" "$S.hf.safetensors" &&
    ok "$m tp $tp pp $pp${pl:+ ($pl)}: HF -> torch_dist -> HF through the torch_dist reader is bit-exact" ||
    bad "$m tp $tp pp $pp: read back" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
  run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q
  [ "$rc" = 0 ] && same "$M/$m.safetensors" "$S.merged.safetensors" && ok "$m tp $tp pp $pp${pl:+ ($pl)}: merge of the set is bit-exact" ||
    bad "$m tp $tp pp $pp: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
done

# stacked keys: one entry per parameter, [layers, ...]; chunks per layer and tp rank
# (linear_fc1: two per rank), norms once
run "$TPCONV" inspect "$T/llama_2_2/release"
[ "$rc" = 0 ] && grep -q "9 tensor entries in 29 chunks" "$T/out" && grep -q "decoder.layers.1.mlp.linear_fc1.weight .*\[192, 64\]" "$T/out" &&
  ok "stacked layers: 9 keys in 29 chunks for 2 layers at tp 2 (fc1's gate and up halves apart)" || bad "stacked keys" "$(head -5 "$T/out")"
# --pp-layers 0,2: stage 0 holds the embedding only, stage 1 both layers; the same keys
S=$T/llama_2_2_0,2
run "$TPCONV" inspect "$S/release"
[ "$rc" = 0 ] && grep -q "9 tensor entries in 29 chunks" "$T/out" && [ "$(stat -c %s "$S/release/__0_0.distcp")" -lt 200000 ] &&
  [ "$(stat -c %s "$S/release/__2_0.distcp")" -gt 200000 ] &&
  ok "--pp-layers 0,2: the first stage holds no layer, the last both; the keys unchanged" || bad "pp-layers" "$(ls -l "$S/release")"
# reshard: a megatron-dist set into another tp (the same layout) and into the default
# layout, both read back bit-exactly
run "$TPCONV" shard "$T/llama_2_2" --preset llama --tp 1 --layout megatron-dist -o "$T/re1" -q &&
  run "$TPCONV" convert "$T/re1/release" --rules megatron-llama --vocab 1000 -o "$T/re1.safetensors" -q &&
  run "$TPCONV" shard "$T/llama_2_2" --tp 2 -o "$T/re2" -q && run "$TPCONV" merge "$T/re2" -o "$T/re2.safetensors" -q
[ "$rc" = 0 ] && same "$M/llama.safetensors" "$T/re1.safetensors" && same "$M/llama.safetensors" "$T/re2.safetensors" &&
  ok "reshard tp 2 pp 2 -> megatron-dist tp 1 and -> tpconv tp 2: bit-exact" || bad "reshard" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
# an interrupted run (rank files, no manifest): the same command completes the set
# (a lone .distcp cannot be compared byte for byte, so its rank files are written
# again, as the dcp layout's are) and it reads back the same
S=$T/llama_2_2 && rm "$S/tpconv-manifest.json"
run "$TPCONV" shard "$M/llama" --preset llama --tp 2 --pp 2 --layout megatron-dist -o "$S" &&
  run "$TPCONV" merge "$S" -o "$S.resumed.safetensors" -q
[ "$rc" = 0 ] && [ -f "$S/tpconv-manifest.json" ] && [ -f "$S/release/metadata.json" ] && same "$M/llama.safetensors" "$S.resumed.safetensors" &&
  ok "resume: the same command completes a set an interrupted run left; it merges bit-exactly" || bad "resume" "exit $rc" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
run "$TPCONV" verify --reference "$M/llama.safetensors" --shards "$T/llama_2_2"
[ "$rc" = 0 ] && ok "verify passes on a megatron-dist set ($(tail -n 1 "$T/out" | sed 's/^# //'))" || bad "verify" "$(tail -3 "$T/out")" "$(cat "$T/err")"

# Qwen2 (q/k/v biases fused per query group as linear_qkv.bias, tied), Qwen3 (per-head
# q_layernorm / k_layernorm, replicated) and Mistral under their own presets (tests/gguf/arch's
# tiny models, 2 kv heads: tp 2 x pp 2), and vllm_check's Qwen2 of 4 kv heads at tp 4 x pp 2:
# HF -> torch_dist -> HF through the reader (--rules megatron-llama) and merge bit-exact; the
# keys in .metadata; common.pt's args as Megatron names them (one torch 1.13 check for all)
sets=""
for spec in "qwen2 2 $A/tiny-qwen2" "qwen3 2 $A/tiny-qwen3" "mistral 2 $A/tiny-mistral" "qwen2 4 $M/qwen"; do
  set -- $spec; m=$1 tp=$2 src=$3 S=$T/f_$1_$2
  run "$TPCONV" convert "$src" -o "$S.ref.safetensors" -q &&
    run "$TPCONV" shard "$src" --preset $m --tp $tp --pp 2 --layout megatron-dist -o "$S" -q &&
    run "$TPCONV" convert "$S/release" --rules megatron-llama --vocab "$(sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' "$src/config.json")" \
      -o "$S.hf.safetensors" -q && same "$S.ref.safetensors" "$S.hf.safetensors" &&
    run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q && same "$S.ref.safetensors" "$S.merged.safetensors" &&
    ok "$m tp $tp pp 2 (--preset $m): HF -> torch_dist -> HF (--rules megatron-llama) and merge bit-exact" ||
    bad "$m tp $tp pp 2" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
  sets="$sets $src:$S"
done
grep -aq 'decoder.layers.self_attention.linear_qkv.bias' "$T/f_qwen2_2/release/.metadata" &&
  grep -aq 'decoder.layers.self_attention.q_layernorm.weight' "$T/f_qwen3_2/release/.metadata" &&
  grep -aq 'decoder.layers.self_attention.k_layernorm.weight' "$T/f_qwen3_2/release/.metadata" &&
  ! grep -aq 'linear_qkv.bias\|[qk]_layernorm' "$T/f_mistral_2/release/.metadata" &&
  run $PY - $sets <<'PY' && ok "qwen2 / qwen3 / mistral: linear_qkv.bias and q/k_layernorm stacked keys; common.pt says add_qkv_bias, qk_layernorm, kv_channels, rotary_base, layernorm_epsilon, untie_embeddings_and_output_weights" ||
import json, sys, torch
for pair in sys.argv[1:]:
    src, s = pair.split(":")
    c = json.load(open(src + "/config.json"))
    a = torch.load(s + "/release/common.pt")["args"]
    theta = (c.get("rope_parameters") or {}).get("rope_theta", c.get("rope_theta"))
    want = dict(add_qkv_bias=c["model_type"] == "qwen2", kv_channels=c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
                untie_embeddings_and_output_weights=not c["tie_word_embeddings"], num_query_groups=c["num_key_value_heads"],
                layernorm_epsilon=c.get("rms_norm_eps"), max_position_embeddings=c.get("max_position_embeddings"),
                rotary_base=int(theta) if theta else None, qk_layernorm=True if c["model_type"] == "qwen3" else None)
    got = {k: getattr(a, k, None) for k in want}
    assert got == want, (s, got, want)
PY
  bad "qwen2 / qwen3 / mistral keys and args" "$(cat "$T/err" 2>/dev/null | tail -3)"
# The args Megatron adopts at resume (mcore_args_check.py: load_args_from_checkpoint and
# check_checkpoint_args re-implemented, training/checkpointing.py:176-221, 2199-2366): a
# Mistral's sliding window (every layer), a Qwen2 without one (use_sliding_window false) and one
# with it from max_window_layers 1 on, a Llama-3.1 rope (llama3), each with its tokenizer folder
mkdir -p "$T/a_qwen2sw" "$T/a_llama31" && cp "$A/tiny-qwen2/model.safetensors" "$A/tiny-qwen2/tokenizer.json" "$T/a_qwen2sw/" &&
  run "$TPCONV" convert "$M/llama" -o "$T/a_llama31/model.safetensors" -q &&
  run $PY - "$A/tiny-qwen2/config.json" "$M/llama/config.json" "$T" <<'PY' || bad "args fixtures" "$(tail -3 "$T/err")"
import json, sys
q, l = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
del q["layer_types"]
q.update(use_sliding_window=True, sliding_window=64, max_window_layers=1)
json.dump(q, open(sys.argv[3] + "/a_qwen2sw/config.json", "w"))
l["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192}
l.update(rope_theta=500000.0, rms_norm_eps=1e-5, max_position_embeddings=131072)
json.dump(l, open(sys.argv[3] + "/a_llama31/config.json", "w"))
with open(sys.argv[3] + "/a_llama31/tokenizer_config.json", "w") as f:
    f.write("{}")
PY
asets=""
for spec in "mistral $A/tiny-mistral" "qwen2 $A/tiny-qwen2" "qwen2 $T/a_qwen2sw" "llama $T/a_llama31"; do
  set -- $spec
  run "$TPCONV" shard "$2" --preset $1 --tp 2 --pp 2 --layout megatron-dist -o "$T/a_${2##*/}" -q || bad "${2##*/}: shard" "$(cat "$T/err")"
  asets="$asets $2:$T/a_${2##*/}"
done
run $PY "$H/mcore_args_check.py" $asets && [ "$(grep -c '^ok:' "$T/out")" = 4 ] &&
  grep -q "a_tiny-mistral: .*command line: --norm-epsilon 1e-06 --window-size (4095, 0)$" "$T/out" &&
  grep -q "a_a_qwen2sw: .*--window-size (63, 0) --window-attn-skip-freq \[0, 1\]$" "$T/out" &&
  grep -q "a_a_llama31: .*command line: --use-rope-scaling$" "$T/out" &&
  ok "mistral (window every layer), qwen2 (none; from max_window_layers), llama3 rope: Megatron's load_args_from_checkpoint adopts the model's args, check_checkpoint_args passes a --vocab-file run with HuggingFaceTokenizer; the rest is in common.pt for the command line" ||
  bad "args at resume" "$(cat "$T/out" "$T/err" | tail -5)"
# what Megatron's args cannot say: refused by name, nothing written
for spec in "yarn|a yarn rope (factor 4)|{\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 64}" \
  "orig|original_max_position_embeddings 4096: Megatron's --use-rope-scaling fixes them at 1, 4 and 8192|{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 4096}" \
  "dyn|a dynamic (NTK) rope|{\"rope_type\": \"dynamic\", \"factor\": 2.0}"; do
  IFS='|' read -r k msg rope <<<"$spec"
  mkdir -p "$T/r_$k" && ln -sf "$T/a_llama31/model.safetensors" "$T/r_$k/" &&
    sed "s/\"rope_scaling\": {[^}]*}/\"rope_scaling\": $rope/" "$T/a_llama31/config.json" >"$T/r_$k/config.json"
  run "$TPCONV" shard "$T/r_$k" --preset llama --tp 2 --layout megatron-dist -o "$T/r_${k}_out" -q
  [ "$rc" = 3 ] && grep -qF "$msg" "$T/err" && [ ! -e "$T/r_${k}_out" ] &&
    ok "rope $k: refused by name (exit 3), nothing written" || bad "rope $k refusal" "exit $rc" "$(cat "$T/err")"
done
run "$TPCONV" shard "$A/tiny-olmo2" --preset llama --preset-force --tp 2 --layout megatron-dist -o "$T/x11" -q
[ "$rc" = 3 ] && grep -qF "tensor 'model.layers.0.self_attn.k_norm.weight': a q/k norm of 16 elements: Megatron's q_layernorm / k_layernorm norm each head of kv_channels 8" "$T/err" &&
  [ ! -e "$T/x11" ] && ok "a q/k norm over the whole projection (OLMo 2's) is refused by name (exit 3), nothing written" || bad "whole q/k norm" "exit $rc" "$(cat "$T/err")"

# refusals, by name
run "$TPCONV" shard "$A/tiny-qwen2" --preset gemma --preset-force --tp 2 --layout megatron-dist -o "$T/x1" -q
[ "$rc" = 3 ] && grep -q "family 'gemma' is not written by the megatron-dist layout" "$T/err" && [ ! -e "$T/x1" ] &&
  ok "a family whose record does not list the layout is refused by name (exit 3), nothing written" || bad "gemma refusal" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$M/llama" --preset llama --tp 4 --layout megatron-dist -o "$T/x2" -q
[ "$rc" = 3 ] && grep -q "2 groups (kv heads) do not divide by tp 4" "$T/err" &&
  ok "query groups tp does not divide are refused (exit 3)" || bad "groups refusal" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$M/llama" --preset llama --tp 2 --pp 2 --pp-layers 1,2 --layout megatron-dist -o "$T/x3" -q
[ "$rc" = 2 ] && grep -q -- "--pp-layers" "$T/err" && ok "--pp-layers that do not add up to the layers: usage error" || bad "pp-layers sum" "exit $rc" "$(cat "$T/err")"
done_testing
