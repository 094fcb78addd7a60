#!/usr/bin/env bash
# The dit preset (TAP): diffusers-named diffusion transformers made by real torch
# (tests/shard/make_models.py: a PixArt-style model with GEGLU feed-forwards and a
# cross-attention over 48-wide caption states, and a Flux-style model with joint
# attention, ff_context and single-stream blocks whose proj_out reads [attention | mlp])
# shard at tp 2, 4 and 8 with every rank slice equal to an independent xDiT-style
# slicing in torch, merge bit-exact, and pass `tpconv verify` (attention, cross- and
# joint-attention and feed-forward block checks); a naive GEGLU split fails verify
# naming the tensor; a config that does not say whether the feed-forward is gated
# is completed from the shapes (gated or not), and refused before anything is
# written only when the shapes do not say either.
# usage: dit_test.sh TPCONV SRCDIR     (needs /usr/bin/python3 with torch)
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
M=$T/m
$PY "$H/make_models.py" "$M" 0 >/dev/null || { echo "1..0 # SKIP model generator failed"; exit 0; }

run "$TPCONV" plan dit
[ "$rc" = 0 ] && $PY -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["name"] == "dit"' "$T/out" 2>/dev/null &&
  "$TPCONV" plan --list | grep -q '^dit ' && ok "plan dit prints a valid plan and --list names it" || bad "plan dit" "$(cat "$T/err")"

for m in dit flux; do
  for tp in 2 4 8; do
    S=$T/${m}_$tp
    run "$TPCONV" shard "$M/$m" --preset dit --tp $tp -o "$S" -q
    if [ "$rc" != 0 ]; then bad "$m tp $tp: shard" "$(cat "$T/err")"; continue; fi
    run $PY "$H/check_ranks.py" dit "$M/$m.pt" "$M/$m/config.json" "$S" $tp tpconv safetensors
    [ "$rc" = 0 ] && ok "$m tp $tp: every rank slice equals the independent torch slicing" || bad "$m tp $tp: slicing" "$(tail -5 "$T/out")"
    run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q
    [ "$rc" = 0 ] && same "$M/$m/model.safetensors" "$S.merged.safetensors" && ok "$m tp $tp: merge is bit-exact" ||
      bad "$m tp $tp: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
    run "$TPCONV" verify --reference "$M/$m/model.safetensors" --shards "$S" --json "$T/v.json"
    if [ "$rc" = 0 ] && $PY - "$T/v.json" "$m" <<'PY' 2>"$T/perr"
import json, sys
r = json.load(open(sys.argv[1]))
kinds = {}
for c in r["checks"]:
    kinds[c["check"]] = kinds.get(c["check"], 0) + 1
    assert c["status"] == "pass", c
# dit: attn1 + attn2 + ff per block; flux: attn + attn.add + ff + ff_context per joint block
want = {"dit": (4, 2), "flux": (4, 4)}[sys.argv[2]]
assert kinds.get("attn") == want[0] and kinds.get("mlp") == want[1], kinds
names = {c["tensor"] for c in r["checks"] if c["check"] in ("attn", "mlp")}
if sys.argv[2] == "dit":
    assert "transformer_blocks.1.attn2" in names, names
else:
    assert "transformer_blocks.0.attn.add" in names and "transformer_blocks.1.ff_context" in names, names
PY
    then ok "$m tp $tp: verify passes, attention and feed-forward blocks included ($(tail -n 1 "$T/out" | sed 's/^# //'))"
    else bad "$m tp $tp: verify" "exit $rc" "$(tail -5 "$T/out")" "$(cat "$T/err" "$T/perr")"; fi
  done
done
# torch rank files in the OSLO layout load in real torch and slice the same way
run "$TPCONV" shard "$M/dit.pt" --config "$M/dit/config.json" --preset dit --tp 2 --layout oslo -o "$T/oslo" -q &&
  run $PY "$H/check_ranks.py" dit "$M/dit.pt" "$M/dit/config.json" "$T/oslo" 2 oslo torch
[ "$rc" = 0 ] && ok "dit from torch.save input, OSLO torch rank files equal the independent slicing" || bad "dit oslo" "$(cat "$T/out" "$T/err" | tail -5)"
# a naive split of the GEGLU projection (one contiguous block per rank) fails verify
"$TPCONV" plan dit | $PY -c 'import json,sys; p=json.load(sys.stdin); [r.pop("gated", None) for r in p["rules"]]; json.dump(p, sys.stdout)' > "$T/naive.json"
run "$TPCONV" shard "$M/dit" --plan "$T/naive.json" --tp 2 -o "$T/naive" -q &&
  run "$TPCONV" verify --reference "$M/dit/model.safetensors" --shards "$T/naive" --arch dit
[ "$rc" = 1 ] && grep -q "ff.net.0.proj.weight' must be split as 2 equal parts \[value|gate\]" "$T/out" &&
  ok "a naive split of the GEGLU projection fails verify (exit 1) naming ff.net.0.proj" || bad "naive GEGLU" "exit $rc" "$(grep -A1 FAIL "$T/out" | head -4)"
# a model config that does not say whether the feed-forward is gated: the shapes
# say it (ff.net.0.proj rows = 2 x ff.net.2 columns), so shard infers it, says so
# with -v and splits [value | gate] as with the full config; ungated shapes give one
# part; shapes that do not say (no ff.net.2) make shard ask, nothing written
mkdir -p "$T/nocfg"
cp "$M/dit/model.safetensors" "$T/nocfg/"
$PY -c 'import json,sys; c=json.load(open(sys.argv[1])); c.pop("activation_fn"); c.pop("_class_name"); json.dump(c, open(sys.argv[2], "w"))' \
  "$M/dit/config.json" "$T/nocfg/config.json"
run "$TPCONV" shard "$T/nocfg" --preset dit --tp 2 -o "$T/nocfg_out" -v
if [ "$rc" = 0 ] && grep -q "the feed-forward is gated (\[value | gate\]), as the shapes say" "$T/err" &&
   grep -q '"activation_fn": "gated"' "$T/nocfg_out/tpconv-manifest.json"; then
  run $PY "$H/check_ranks.py" dit "$M/dit.pt" "$M/dit/config.json" "$T/nocfg_out" 2 tpconv safetensors
  [ "$rc" = 0 ] && ok "no activation_fn in config.json: gated inferred from the shapes, slices equal the GEGLU slicing" ||
    bad "inferred gating: slicing" "$(tail -5 "$T/out")"
  run "$TPCONV" verify --reference "$T/nocfg/model.safetensors" --shards "$T/nocfg_out" --arch dit
  [ "$rc" = 0 ] && ok "inferred gating: verify passes the feed-forward checks" || bad "inferred gating: verify" "exit $rc" "$(grep -i fail "$T/out" | head -3)" "$(cat "$T/err")"
else
  bad "no activation_fn in config.json: gated inferred from the shapes" "exit $rc" "$(cat "$T/err")"
fi
mkdir -p "$T/ungated"
cp "$T/nocfg/config.json" "$T/ungated/"
$PY -c '
import sys, torch
sd = torch.load(sys.argv[1])
for k in list(sd):
    if k.endswith("ff.net.0.proj.weight") or k.endswith("ff.net.0.proj.bias"):
        sd[k] = sd[k][: sd[k].shape[0] // 2].clone()
torch.save(sd, sys.argv[2])' "$M/dit.pt" "$T/ungated/model.pt"
run "$TPCONV" shard "$T/ungated" --preset dit --tp 2 -o "$T/ungated_out" -v
if [ "$rc" = 0 ] && grep -q "the feed-forward is not gated, as the shapes say" "$T/err" &&
   grep -q '"activation_fn": "ungated"' "$T/ungated_out/tpconv-manifest.json"; then
  run "$TPCONV" verify --reference "$T/ungated/model.pt" --shards "$T/ungated_out" --arch dit
  [ "$rc" = 0 ] && ok "ungated shapes: one part per rank, verify passes" || bad "ungated shapes: verify" "exit $rc" "$(grep -i fail "$T/out" | head -3)"
else
  bad "ungated shapes inferred" "exit $rc" "$(cat "$T/err")"
fi
mkdir -p "$T/noout"
run "$TPCONV" convert "$T/nocfg/model.safetensors" --drop '\.ff\.net\.2\.' -o "$T/noout/model.safetensors" -q
cp "$T/nocfg/config.json" "$T/noout/"
run "$TPCONV" shard "$T/noout" --preset dit --tp 2 -o "$T/noout_set"
[ "$rc" = 2 ] && grep -q "ff.net.0.proj" "$T/err" && grep -q "activation_fn" "$T/err" && [ ! -e "$T/noout_set" ] &&
  ok "shapes that do not say (no ff.net.2): shard asks (exit 2, a fact to give) naming the tensor, nothing written" || bad "unknown gating" "exit $rc" "$(cat "$T/err")"
# pipeline stages: embedders first, proj_out last
run "$TPCONV" shard "$M/dit" --preset dit --tp 2 --pp 2 --dry-run
grep -qE '^pos_embed\.proj\.weight .* 0 *$|^pos_embed\.proj\.weight.* 0 ' "$T/out" && grep -qE '^proj_out\.weight .* 1( |$)' "$T/out" &&
  ok "--pp 2: embedders on stage 0, proj_out on the last stage" || bad "dit stages" "$(grep -E '^(pos_embed|proj_out)' "$T/out")"
echo "1..$n"
[ "$failed" = 0 ]
