#!/usr/bin/env bash
# DeepSpeed universal checkpoints, read and written (TAP). DeepSpeed is not
# packaged in Debian: tests/deepspeed/universal_ref.py re-implements what
# ds_to_universal.py writes and what the universal loaders read (DeepSpeed
# 0.16.5, the source lines cited there), over ZeRO saves made by make_zero.py.
# Checked: tpconv reads a reference-made universal folder to the optimizer.pt
# it reads from the ZeRO save itself, byte for byte (stage 2 and 3, and the
# committed tests/data/ds_universal); it writes from ZeRO (and from a DCP save)
# the files the reference writes, which the loader re-implementation takes
# onto other data-parallel sizes, every element its own; round trips give the
# same optimizer.pt; each parameter's tensor-parallel split from its family's
# record gives the files DeepSpeed's converter writes from a client's
# universal_checkpoint_info, and the loader's tp 2 slices of them equal
# `tpconv shard`'s rank tensors (cat_dim 0 everywhere does not); hostile
# folders, inexpressible states and matrices of unknown split are refused by
# name (exit 3), leaving no output.
# usage: universal_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
Z=$SRC/tests/deepspeed
. "$SRC/tests/shard/tap.sh"   # ok/bad, $T, run; skips without torch
U=global_step14_universal

tap_py() { # the TAP lines of a Python check
  while IFS= read -r l; do
    case $l in
      "ok "*) ok "${l#ok - }" ;;
      "not ok "*) bad "${l#not ok - }" ;;
      *) diag "${l#\# }" ;;
    esac
  done <"$T/py"
}

# ZeRO-2 on 3 ranks, ZeRO-3 on 4 (sub-groups), each with the reference's universal folder; hostile copies
$PY "$Z/universal_ref.py" make "$T" 2>"$T/err" || { bad "fixtures" "$(tail -3 "$T/err")"; echo "1..$n"; exit 1; }

# reading what ds_to_universal writes
run "$TPCONV" inspect --optimizer "$T/z2/$U"
[ "$rc" = 0 ] && grep -qx "# $T/z2/$U: ds-universal, 78 files, 76 tensors, 19759 parameters, 79.0 kB" "$T/out" &&
  grep -qx "# DeepSpeed universal checkpoint (ds_to_universal.py layout for ZeRO stage 1/2), deepspeed 0.14.4" "$T/out" &&
  grep -qx "# 19 parameters from zero/NAME/fp32.pt (the fp32 masters, whole), in the order of param_shapes in mp_rank_00_model_states.pt" "$T/out" &&
  grep -qx "# optimizer state 'optim': 19 parameters in 2 param groups, 38 moments shaped as their parameters (element for element), 19 scalars, 0 values; state keys exp_avg, exp_avg_sq, step" "$T/out" &&
  ok "inspect --optimizer of a universal folder: layout, stage, 38 moments tied to their parameters" || bad "inspect" "$(head -5 "$T/out" "$T/err")"
run "$TPCONV" inspect "$T/z2"
[ "$rc" = 0 ] && grep -q "^# $T/z2: deepspeed-zero2, " "$T/out" &&
  ok "a save root with latest and latest_universal reads what latest names (the ZeRO save)" || bad "root" "$(head -2 "$T/out" "$T/err")"
for st in 2 3; do
  mkdir -p "$T/r$st" "$T/u$st"
  run "$TPCONV" convert "$T/z$st" --optimizer -o "$T/r$st/optimizer.pt" -q &&
    run "$TPCONV" convert "$T/z$st/$U" --optimizer -o "$T/u$st/optimizer.pt" -q && cmp -s "$T/r$st/optimizer.pt" "$T/u$st/optimizer.pt" &&
    ok "stage $st: the reference's universal folder gives the optimizer.pt of the ZeRO save itself, byte for byte" ||
    bad "stage $st: read the reference's universal folder" "$(cat "$T/err" | head -3)"
done
for D in "$SRC/tests/data/ds_universal" "$SRC/tests/data/ds_universal3"; do
  rm -rf "$T/cz" "$T/cu"; mkdir -p "$T/cz" "$T/cu"
  run "$TPCONV" convert "$D" --optimizer -o "$T/cz/optimizer.pt" -q && run "$TPCONV" convert "$D/$U" --optimizer -o "$T/cu/optimizer.pt" -q &&
    cmp -s "$T/cz/optimizer.pt" "$T/cu/optimizer.pt" && ok "tests/data/${D##*/} (committed): its universal folder gives its ZeRO save's optimizer.pt" ||
    bad "committed fixture ${D##*/}" "$(cat "$T/err" | head -3)"
done

# writing: the reference's files, which the loader takes onto dp 1, 2 and 5, every element its own
# (z2 names no family: written for tensor parallel 1, as the reference without a client's patterns)
for st in 2 3; do
  run "$TPCONV" convert "$T/z$st" --format ds-universal --tp1-only -o "$T/t$st/$U" -q
  [ "$rc" = 0 ] && [ "$(cat "$T/t$st/latest_universal")" = "$U" ] || bad "stage $st: write" "$(cat "$T/err" | head -3)"
done
$PY "$Z/universal_ref.py" check "$T/t2/$U" 23 "$T/t3/$U" 34 >"$T/py" 2>&1
$PY "$Z/universal_ref.py" same "$T/z2/$U" "$T/t2/$U" "$T/z3/$U" "$T/t3/$U" >>"$T/py" 2>&1
tap_py
for st in 2 3; do
  mkdir -p "$T/w$st"
  run "$TPCONV" convert "$T/t$st" --optimizer -o "$T/w$st/optimizer.pt" -q && cmp -s "$T/r$st/optimizer.pt" "$T/w$st/optimizer.pt" &&
    ok "stage $st: ZeRO -> universal (tpconv) -> optimizer.pt equals ZeRO -> optimizer.pt, byte for byte" || bad "stage $st: round trip" "$(cat "$T/err" | head -3)"
done
# through a DCP folder for 3 processes and back; a universal folder to DCP for 2 processes,
# against the ZeRO save to DCP for 2 (its param groups' shared betas tuple is pickled
# once in the ZeRO save's optimizer.pt; a DCP folder keeps values, not sharing)
mkdir -p "$T/dcpo" "$T/udo" "$T/zdo"
run "$TPCONV" convert "$T/z3" --format dcp --optimizer --dcp-ranks 3 --no-extras -o "$T/dcp" -q &&
  run "$TPCONV" convert "$T/dcp" --format ds-universal --zero-stage 3 -o "$T/du/s" -q &&
  run "$TPCONV" convert "$T/du/s" --optimizer -o "$T/dcpo/optimizer.pt" -q && cmp -s "$T/r3/optimizer.pt" "$T/dcpo/optimizer.pt" &&
  ok "ZeRO-3 -> DCP (3 processes) -> universal (stage 3 layout) -> optimizer.pt equals ZeRO-3 -> optimizer.pt" ||
  bad "ZeRO-3 through DCP to universal" "$(cat "$T/err" | head -3)"
run "$TPCONV" convert "$T/z2/$U" --format dcp --optimizer --dcp-ranks 2 --no-extras -o "$T/udcp" -q &&
  run "$TPCONV" convert "$T/udcp" --optimizer -o "$T/udo/optimizer.pt" -q &&
  run "$TPCONV" convert "$T/z2" --format dcp --optimizer --dcp-ranks 2 --no-extras -o "$T/zdcp" -q &&
  run "$TPCONV" convert "$T/zdcp" --optimizer -o "$T/zdo/optimizer.pt" -q && cmp -s "$T/zdo/optimizer.pt" "$T/udo/optimizer.pt" &&
  ok "the reference's universal folder -> DCP (2 processes) -> optimizer.pt equals the ZeRO save's the same way" ||
  bad "universal to DCP" "$(cat "$T/err" | head -3)"

# tensor parallelism: each parameter's split from its family's record (zp: config.json names
# LlamaForCausalLM; zf: --preset phi3, fused qkv_proj (GQA: sub_param_shape, sized by its
# config.json's head counts) and gate_up_proj (param_n_sub_params 2)) gives the files DeepSpeed's
# converter writes with a client's universal_checkpoint_info, and load_hp_checkpoint_state's
# tp 2 slices equal `tpconv shard`'s rank tensors; cat_dim 0 everywhere (--tp1-only) loads
# the row-parallel and vocabulary tensors wrong at tp 2
run "$TPCONV" convert "$T/zp" --format ds-universal -o "$T/tp/$U" -q &&
  run "$TPCONV" convert "$T/zf" --format ds-universal --preset phi3 -o "$T/tf/$U" -q &&
  run "$TPCONV" shard "$T/mp" --tp 2 --layout hf --format torch -o "$T/sp" -q &&
  run "$TPCONV" shard "$T/mf" --tp 2 --layout hf --format torch -o "$T/sf" -q &&
  run "$TPCONV" convert "$T/zm" --format ds-universal -o "$T/tm/$U" -q &&
  run "$TPCONV" shard "$T/mm" --tp 2 --layout hf --format torch -o "$T/sm" -q ||
  bad "tensor-parallel writes" "$(head -3 "$T/err")"
$PY "$Z/universal_ref.py" tp "$T/t2/$U" "$T/sp" 2 >"$T/py" 2>&1
# the tp 1 folder loads wrong at tp 2, exactly where cat_dim 0 is not the split
grep -q "^not ok" "$T/py" && grep -qx "# wrong: model.embed_tokens.weight model.layers.0.mlp.down_proj.weight model.layers.0.self_attn.o_proj.weight model.layers.1.mlp.down_proj.weight model.layers.1.self_attn.o_proj.weight" "$T/py" &&
  ok "cat_dim 0 everywhere (--tp1-only) loads wrong at tp 2 exactly the vocabulary and the row-parallel o_proj and down_proj" ||
  bad "tp 1 folder at tp 2" "$(head -4 "$T/py")"
$PY "$Z/universal_ref.py" tp "$T/tp/$U" "$T/sp" 2 "$T/tf/$U" "$T/sf" 2 "$T/tm/$U" "$T/sm" 2 >"$T/py" 2>&1
$PY "$Z/universal_ref.py" same "$T/zp/$U" "$T/tp/$U" "$T/zf/$U" "$T/tf/$U" >>"$T/py" 2>&1
tap_py
run "$TPCONV" convert "$T/zp/global_step14" --format ds-universal -o "$T/tq/s" -q && diff -r "$T/tp/$U" "$T/tq/s" >/dev/null &&
  ok "the tag folder inside a Trainer checkpoint finds the family in the config.json above it: the same files" ||
  bad "config.json above" "rc=$rc" "$(head -2 "$T/err")"
run "$TPCONV" inspect "$T/tf/$U"
grep -qx "# tensor-parallel cuts (universal_checkpoint.py): cat_dim not 0 for 4 parameters (model.layers.0.self_attn.o_proj.weight: 1, ...), no cat_dim (replicated) 4, vocab_tensor 1, param_n_sub_params 2, sub_param_shape 2" "$T/out" &&
  ok "inspect: the fused model's qkv_proj by sub_param_shape, gate_up_proj by param_n_sub_params" || bad "inspect fused" "$(head -5 "$T/out")"
run "$TPCONV" inspect "$T/tm/$U"
grep -q "param_n_sub_params 2, sub_param_shape 2$" "$T/out" && ok "inspect: multi-head attention's qkv_proj (equal parts, 3) by sub_param_shape, as its universal_checkpoint_info can name it" ||
  bad "inspect mha" "$(sed -n 4p "$T/out")"
run "$TPCONV" inspect "$T/tp/$U"
grep -qx "# tensor-parallel cuts (universal_checkpoint.py): cat_dim not 0 for 4 parameters (model.layers.0.self_attn.o_proj.weight: 1, ...), no cat_dim (replicated) 4, vocab_tensor 1, param_n_sub_params 0, sub_param_shape 0" "$T/out" &&
  ok "inspect names the tensor-parallel cuts" || bad "inspect cuts" "$(head -5 "$T/out")"

# refused by name: exit 3, nothing written
refuse() { # NAME OUT EXPECTED_LINE command...
  local name=$1 out=$2 want=$3; shift 3
  run "$@"
  if [ "$rc" = 3 ] && grep -qxF "$want" "$T/err" && [ ! -e "$out" ]; then ok "refused $name: $(head -c 160 "$T/err")"
  else bad "refused $name" "rc=$rc" "$(head -3 "$T/err")"; fi
}
K=model.layers.0.self_attn.k_proj.weight
refuse "a missing moment file" "$T/h.pt" "tpconv: error: '$T/h-missing/zero/$K/exp_avg.pt': is missing: the group's other parameters have exp_avg.pt (DeepSpeed's loader gives every parameter of a group the same state keys)" \
  "$TPCONV" convert "$T/h-missing" --optimizer -o "$T/h.pt" -q
refuse "a moment of another shape" "$T/h.pt" "tpconv: error: '$T/h-shape/zero/$K/exp_avg_sq.pt': param [10, 21] is not the parameter's shape [10, 20] (param_shapes of mp_rank_00_model_states.pt)" \
  "$TPCONV" convert "$T/h-shape" --optimizer -o "$T/h.pt" -q
refuse "cat_dim out of range" "$T/h.safetensors" "tpconv: error: '$T/h-catdim/zero/$K/fp32.pt': cat_dim 2 is out of range for the 2-D parameter [10, 20]" \
  "$TPCONV" convert "$T/h-catdim" -o "$T/h.safetensors" -q
refuse "steps that differ within a group" "$T/tag" "tpconv: error: '$T/tag/s': tensor 'model.layers.0.self_attn.q_proj.weight': step 101 differs from the step of the other parameters of param group 0 (100): DeepSpeed keeps one step per group" \
  "$TPCONV" convert "$SRC/tests/data/dcp/optim_tagged" --format ds-universal -o "$T/tag/s" -q
refuse "two groups for the stage 3 loader" "$T/g3/s" "tpconv: error: '$T/g3/s': 2 param groups: DeepSpeed's stage 3 universal loader (stage3.py load_hp_checkpoint_state_from_checkpoint_dir_stage3) restores param group 0 only; write the stage 1/2 layout (--zero-stage 2)" \
  "$TPCONV" convert "$T/z2" --format ds-universal --zero-stage 3 -o "$T/g3/s" -q
refuse "a model of no known family" "$T/nf/s" "tpconv: error: '$T/nf/s': the tensor-parallel split of 15 parameters is unknown (model.embed_tokens.weight, model.layers.0.self_attn.q_proj.weight, model.layers.0.self_attn.k_proj.weight, ...): no model family is known (no config.json naming one beside the input, no --preset); DeepSpeed's loader cuts each along cat_dim for its tensor-parallel rank, so cat_dim 0 loads right at tensor parallel 1 only: name the family (--preset) or write for tensor parallel 1 (--tp1-only)" \
  "$TPCONV" convert "$T/z2" --format ds-universal -o "$T/nf/s" -q
refuse "tensors no rule of the family splits" "$T/nr/s" "tpconv: error: '$T/nr/s': the tensor-parallel split of 15 parameters is unknown (model.embed_tokens.weight, model.layers.0.self_attn.q_proj.weight, model.layers.0.self_attn.k_proj.weight, ...): no rule of family 'gpt2' splits them; DeepSpeed's loader cuts each along cat_dim for its tensor-parallel rank, so cat_dim 0 loads right at tensor parallel 1 only: name the family (--preset) or write for tensor parallel 1 (--tp1-only)" \
  "$TPCONV" convert "$T/z2" --format ds-universal --preset gpt2 -o "$T/nr/s" -q
cp -r "$T/zf" "$T/nc" && rm "$T/nc/config.json"
refuse "a fused qkv_proj without the head counts (no config.json)" "$T/ncu/s" "tpconv: error: '$T/ncu/s': the tensor-parallel split of 2 parameters is unknown (model.layers.0.self_attn.qkv_proj.weight, model.layers.1.self_attn.qkv_proj.weight): family 'phi3' splits them in parts sized by the model's head counts, which no config.json beside the input gives (or they do not add up to the tensor); DeepSpeed's loader cuts each along cat_dim for its tensor-parallel rank, so cat_dim 0 loads right at tensor parallel 1 only: put the model's config.json beside the input or write for tensor parallel 1 (--tp1-only)" \
  "$TPCONV" convert "$T/nc" --format ds-universal --preset phi3 -o "$T/ncu/s" -q
# what an interrupted write leaves (parameters' files, no optimizer_state.pt): the same command again replaces it
mkdir -p "$T/intr/s/zero/$K" && cp "$T/t2/$U/zero/$K/fp32.pt" "$T/intr/s/zero/$K/" && : >"$T/intr/s/zero/$K/exp_avg.pt"
run "$TPCONV" convert "$T/z2" --format ds-universal --tp1-only -o "$T/intr/s" -q &&
  $PY "$Z/universal_ref.py" same "$T/t2/$U" "$T/intr/s" >"$T/py" 2>&1 && grep -q "^ok" "$T/py" &&
  ok "an interrupted write's files (no optimizer_state.pt) are replaced by the same command again" || bad "interrupted" "rc=$rc" "$(head -2 "$T/err" "$T/py")"
# a write that fails half-way takes its files back
mkdir -p "$T/half/s/zero" && : >"$T/half/s/zero/$K"
run "$TPCONV" convert "$T/z2" --format ds-universal --tp1-only -o "$T/half/s" -q
left=$(find "$T/half" -name '*.pt' | wc -l)
[ "$rc" != 0 ] && [ "$left" = 0 ] && [ ! -e "$T/half/latest_universal" ] && ok "a write that fails half-way (exit $rc) leaves no file of it" ||
  bad "half-way" "rc=$rc left=$left" "$(head -2 "$T/err")"
run "$TPCONV" convert "$T/z2" --format ds-universal --tp1-only -o "$T/t2/$U" -q
[ "$rc" = 2 ] && grep -q "already holds a universal checkpoint; use --force" "$T/err" && ok "an existing universal folder is kept without --force" || bad "no force" "rc=$rc"
# a state file the write would not replace (the loader reads every KEY.pt): refused before any file is written
cp -r "$T/t2/$U" "$T/stale" && : >"$T/stale/zero/$K/max_exp_avg_sq.pt"
before=$(cd "$T/stale" && find . -type f -exec sha256sum {} + | sort)
run "$TPCONV" convert "$T/z2" --format ds-universal --tp1-only -o "$T/stale" -q -f
after=$(cd "$T/stale" && find . -type f -exec sha256sum {} + | sort)
[ "$rc" = 2 ] && grep -qxF "tpconv: error: '$T/stale/zero/$K': holds max_exp_avg_sq.pt, which this write does not replace and DeepSpeed's loader would read as the parameter's state; remove it" "$T/err" &&
  [ "$before" = "$after" ] && ok "a stale KEY.pt in a parameter's folder is refused by name (--force too), the folder untouched" || bad "stale" "rc=$rc" "$(head -2 "$T/err")"
# beside the save, as ds_to_universal.py is run (the root's latest_universal then names it); never over what is read
cp -r "$T/z2" "$T/beside" && rm -rf "$T/beside/$U" "$T/beside/latest_universal"
run "$TPCONV" convert "$T/beside" --format ds-universal --tp1-only -o "$T/beside/$U" -q &&
  [ "$(cat "$T/beside/latest_universal")" = "$U" ] && run "$TPCONV" convert "$T/beside" --format ds-universal --tp1-only -o "$T/beside/global_step14" -q
[ "$rc" = 2 ] && grep -q "the output is inside the input model's folder" "$T/err" &&
  ok "a universal folder is written beside the ZeRO save in its root; over the save's own folder: usage" || bad "beside" "rc=$rc" "$(head -2 "$T/err")"
run "$TPCONV" convert "$T/z2" --zero-stage 2 -o "$T/x.pt" -q
[ "$rc" = 2 ] && grep -q "zero-stage goes with a DeepSpeed universal output" "$T/err" && ok "--zero-stage without --format ds-universal: usage" || bad "usage" "rc=$rc"

run "$TPCONV" convert "$T/z2" --tp1-only -o "$T/x.pt" -q
[ "$rc" = 2 ] && grep -q "tp1-only goes with a DeepSpeed universal output" "$T/err" && ok "--tp1-only without --format ds-universal: usage" || bad "usage tp1" "rc=$rc"
run "$TPCONV" convert "$T/z2" --format ds-universal --preset nosuch -o "$T/x/s" -q
[ "$rc" = 2 ] && grep -q "preset: unknown family 'nosuch'" "$T/err" && ok "--preset of no family: usage" || bad "usage preset" "rc=$rc"

echo "1..$n"
[ "$failed" = 0 ]
