#!/usr/bin/env bash
# Plans and rules of one family agree (TAP). Every rules preset a family record
# lists ('tpconv rules --list -v': "for --preset F, ...") is run through that
# family's plan with --strict on a model made in the preset's source names
# (tests/shard/make_family_src.py, real torch): every tensor the rules leave must
# be placed by a rule of the plan, the set must merge back to what convert
# --rules gives, and verify (the family's architecture, when it has one) must
# pass. A preset without a model to try it on fails here, so a new pair cannot
# go unchecked. Also: the dalle2 plan on a DiffusionPrior, and the split of
# DALLE2's LinearAttention that could not run (to_qkv replicated, to_out.0
# row-split) is refused by verify.
# usage: family_rules_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"

# one pair: preset P, family F, the model in P's names at $T/src_P
try_pair() {
  local p=$1 f=$2 s=$T/src_$1 o=$T/set_$1_$2
  run "$TPCONV" shard "$s" --rules "$p" --preset "$f" --preset-force --tp 2 --strict --config "$s/config.json" -o "$o" -q
  if [ "$rc" != 0 ]; then bad "--rules $p --preset $f --strict: every tensor placed" "$(head -c 600 "$T/err")"; return; fi
  ok "--rules $p --preset $f --strict: every tensor placed"
  run "$TPCONV" convert "$s" --rules "$p" --config "$s/config.json" -o "$T/conv_$p.safetensors" --force -q &&
    run "$TPCONV" merge "$o" -o "$T/merged_${p}_$f.safetensors" -q
  if [ "$rc" = 0 ] && same "$T/conv_$p.safetensors" "$T/merged_${p}_$f.safetensors"; then ok "$p / $f: the set merges to what convert --rules $p gives"
  else bad "$p / $f: merge = convert --rules" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -5)"; fi
  run "$TPCONV" verify --reference "$T/conv_$p.safetensors" --shards "$o" -q
  [ "$rc" = 0 ] && ok "$p / $f: verify passes" || bad "$p / $f: verify" "$(head -5 "$T/out" "$T/err")"
}

run "$TPCONV" rules --list -v
[ "$rc" = 0 ] || bad "rules --list -v" "$(cat "$T/err")"
awk '/^[^ ]/ {p = $1} /^ +for --preset / {sub(/^ +for --preset /, ""); n = split($0, f, ", "); for (i = 1; i <= n; i++) print p, f[i]}' \
  "$T/out" >"$T/pairs"
grep -q '^dalle2 dalle2$' "$T/pairs" && grep -q '^megatron-llama llama$' "$T/pairs" &&
  ok "rules --list -v names the plans each preset serves ($(wc -l <"$T/pairs") pairs)" || bad "rules --list -v pairs" "$(cat "$T/out")"
while read -r p f; do
  if [ ! -d "$T/src_$p" ] && ! $PY "$H/make_family_src.py" "$T/src_$p" "$p" 2>"$T/perr"; then
    bad "preset $p (plan $f): a model in its names to try it on" "$(cat "$T/perr")"
    continue
  fi
  try_pair "$p" "$f"
done <"$T/pairs"

# the prior: the dalle2 plan places every tensor of a DiffusionPrior too
$PY "$H/make_family_src.py" "$T/prior" dalle2-prior 2>"$T/perr" || bad "make the prior" "$(cat "$T/perr")"
run "$TPCONV" shard "$T/prior" --preset dalle2 --tp 2 --strict --config "$T/prior/config.json" -o "$T/prior_set" -q
[ "$rc" = 0 ] && ok "--preset dalle2 --strict on a DiffusionPrior: every tensor placed" || bad "dalle2 prior --strict" "$(head -c 600 "$T/err")"
run "$TPCONV" verify --reference "$T/prior/model.safetensors" --shards "$T/prior_set" -q
[ "$rc" = 0 ] && ok "dalle2 prior: verify passes" || bad "dalle2 prior verify" "$(head -5 "$T/out" "$T/err")"

# DALLE2's LinearAttention split the way the dalle2 plan did before: to_qkv
# replicated (no rule), its to_out.0 row-split. Every tensor is a faithful slice,
# so the structure and layer checks pass; the block check (each rank's heads
# through its to_qkv rows and to_out.0 columns) refuses the set.
"$TPCONV" plan dalle2 | grep -v 'to_qkv' >"$T/old_dalle2.json"
run "$TPCONV" shard "$T/src_dalle2" --rules dalle2 --plan "$T/old_dalle2.json" --tp 2 --config "$T/src_dalle2/config.json" -o "$T/old_set" -q
[ "$rc" = 0 ] || bad "shard with the old dalle2 plan" "$(head -c 600 "$T/err")"
run "$TPCONV" verify --reference "$T/conv_dalle2.safetensors" --shards "$T/old_set" -q
[ "$rc" = 1 ] && grep -q "attn .*unets.0.downs.0.3.fn .*FAIL" "$T/out" &&
  grep -qF "attention qkv 'unets.0.downs.0.3.fn.to_qkv.weight' is split replicate (dim -1); a tensor-parallel block needs it column-parallel" "$T/out" &&
  ok "verify fails a LinearAttention whose to_qkv is replicated while its to_out.0 is row-split (exit 1)" ||
  bad "verify: inconsistent LinearAttention split" "rc $rc" "$(head -8 "$T/out" "$T/err")"

echo "1..$n"
[ "$failed" = 0 ]
