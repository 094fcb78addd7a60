#!/usr/bin/env bash
# Optimizer state through convert and reshard (TAP). tests/data/dcp/optim_tagged
# is a DCP save real torch 2.14 wrote (tests/dcp/make_optim.py gen, in the forky
# chroot): a tiny LLaMA under FSDP2 on 2 gloo processes, AdamW state saved by
# get_state_dict ({"model": ..., "optim": ...}), every parameter, moment and
# step rewritten to name its own parameter and element. tpconv ties each
# moment to its parameter (inspect), writes torch.optim's state_dict
# (convert --optimizer: checked by value and loaded by AdamW in Debian's torch
# 1.13, optim_check.py) and a 4-process DCP folder (each moment cut exactly as
# its parameter; read back equal); state that cannot be tied is refused by
# name (dcp_meta.py rewrites the metadata). The resume proof in torch 2.14 is
# tests/interop/optim.sh (opt-in).
# usage: optim_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
D=$SRC/tests/data/dcp/optim_tagged
. "$SRC/tests/lib/tap.sh"
tmpdir

run "$TPCONV" inspect --optimizer "$D"
grep -qx "# optimizer state 'optim': 21 parameters in 2 param groups, 42 moments shaped as their parameters (element for element), 21 scalars, 0 values; state keys exp_avg, exp_avg_sq, step" "$T/out" &&
  grep -qx "# parameters: 'model.' + each name" "$T/out" &&
  grep -qx "# \[0\] model.model.embed_tokens.weight F32 \[70, 16\] (group 0): exp_avg F32, exp_avg_sq F32, step F32 \[\]" "$T/out" &&
  grep -qx "# \[15\] model.lm_head.weight F32 \[70, 16\] (group 0): exp_avg F32, exp_avg_sq F32, step F32 \[\]" "$T/out" &&
  grep -qx "# \[20\] model.model.norm.weight F32 \[16\] (group 1): exp_avg F32, exp_avg_sq F32, step F32 \[\]" "$T/out" &&
  grep -q "^# param group 1: 5 parameters; weight_decay=0 lr=0.01 betas=(0.9, 0.95) eps=1e-08 " "$T/out" &&
  [ "$(grep -c '^# \[[0-9]*\] ' "$T/out")" = 21 ] && [ "$rc" = 0 ] &&
  ok "inspect --optimizer: 21 parameters in param_groups order, each with its moments and step, the groups' hyper-parameters" ||
  bad "inspect --optimizer" "$(head -12 "$T/out" "$T/err")"

run "$TPCONV" convert "$D" --optimizer -o "$T/optimizer.pt"
r1=$rc
run "$TPCONV" convert "$D" --select model -o "$T/model.pt" -q
r2=$rc
run "$TPCONV" convert "$D" --format dcp --dcp-ranks 4 --no-extras -o "$T/d4" -q
r3=$rc
[ "$r1$r2$r3" = 000 ] && ok "convert --optimizer, --select model and --format dcp --dcp-ranks 4" || bad "convert: exit $r1 $r2 $r3" "$(cat "$T/err")"
if "$PY" -c 'import torch' 2>/dev/null; then
  "$PY" "$SRC/tests/dcp/optim_check.py" "$D" "$T/optimizer.pt" "$T/model.pt" "$T/d4" >"$T/py" 2>&1
  while IFS= read -r l; do
    case $l in
      "ok "*) ok "${l#ok * - }" ;;
      "not ok "*) bad "${l#not ok * - }" ;;
      "# "*) diag "${l#\# }" ;;
      1..*) ;;
      *) diag "$l" ;;
    esac
  done <"$T/py"
else
  skip "optimizer.pt by value, in torch.optim.AdamW; the 4-process chunks" "no torch in $PY"
fi
# the 4-process folder reads back as the 2-process save: the same tensors, the same optimizer.pt
# (the same file name: torch.save names the archive's folder after it)
run "$TPCONV" convert "$T/d4" --optimizer -o "$T/o4/optimizer.pt" -q
[ "$rc" = 0 ] && same "$D" "$T/d4" && cmp -s "$T/optimizer.pt" "$T/o4/optimizer.pt" &&
  ok "dcp-ranks 4 reads back: every tensor equal to the 2-process save's, optimizer.pt byte-identical" ||
  bad "dcp-ranks 4 read back" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -5)"

# refused by name: a parameter the model lacks, a moment of another shape, state no group holds
hostile() { # MUTATION WHAT EXPECTED-STDERR
  rm -rf "$T/h"
  "$PY" "$SRC/tests/dcp/dcp_meta.py" "$D" "$T/h" "$1" || { bad "$2: generator"; return; }
  run "$TPCONV" convert "$T/h" --optimizer -o "$T/h.pt"
  local r1=$rc e1
  e1=$(cat "$T/err")
  run "$TPCONV" convert "$T/h" --format dcp --dcp-ranks 4 -o "$T/h4"
  [ "$r1" = 3 ] && [ "$e1" = "$3" ] && [ "$rc" = 3 ] && [ ! -e "$T/h.pt" ] && [ ! -e "$T/h4/.metadata" ] &&
    ok "$2: refused by name (exit 3), no output" || bad "$2: exit $r1/$rc" "$e1"
}
hostile rename:model.model.norm.weight=model.model.gone.weight "a moment whose parameter is absent" \
  "tpconv: error: '$T/h': tensor 'optim.state.model.norm.weight': its parameter 'model.model.norm.weight' is not in the checkpoint"
hostile swap:optim.state.model.layers.0.self_attn.q_proj.weight.exp_avg=optim.state.model.layers.0.self_attn.k_proj.weight.exp_avg \
  "a moment of another shape than its parameter" \
  "tpconv: error: '$T/h': tensor 'optim.state.model.layers.0.self_attn.q_proj.weight.exp_avg': [8, 16] is not shaped as its parameter 'model.model.layers.0.self_attn.q_proj.weight' [16, 16]"
hostile rename:optim.state.model.norm.weight.exp_avg=optim.state.model.gone.weight.exp_avg "state for a parameter no group holds" \
  "tpconv: error: '$T/h': tensor 'optim.state.model.gone.weight': belongs to no param group (no group's params names 'model.gone.weight')"
run "$TPCONV" inspect "$T/h"
[ "$rc" = 0 ] && grep -q "^tpconv: warning: the optimizer state is not tied to the parameters: tensor 'optim.state.model.gone.weight'" "$T/err" &&
  ok "inspect without --optimizer lists such a save with a warning" || bad "inspect warning: exit $rc" "$(cat "$T/err")"
run "$TPCONV" convert "$D" --format dcp -o "$T/renamed" --rename 'model.model.norm.weight=model.model.final_norm.weight'
[ "$rc" = 3 ] && grep -q "rename rules ran first: the optimizer state keeps the names it was saved with" "$T/err" && [ ! -e "$T/renamed/.metadata" ] &&
  ok "rename rules that part a parameter from its state: refused (exit 3), with why" || bad "rename: exit $rc" "$(cat "$T/err")"
run "$TPCONV" convert "$SRC/tests/data/dcp/fsdp2" --optimizer -o "$T/none.pt"
[ "$rc" = 3 ] && grep -q "holds no optimizer state" "$T/err" && ok "--optimizer on a save without optimizer state: exit 3" || bad "no state: exit $rc" "$(cat "$T/err")"
run "$TPCONV" convert "$D" --optimizer -o "$T/o.safetensors"
[ "$rc" = 2 ] && grep -q "a torch file" "$T/err" && ok "--optimizer to a safetensors file: usage error" || bad "--optimizer safetensors: exit $rc" "$(cat "$T/err")"
done_testing
