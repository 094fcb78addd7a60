#!/usr/bin/env bash
# Rank files swapped or renamed on disk (TAP): `tpconv verify`'s first check row
# and a warning say "rank file holds rank N's tensors", naming the file, both for
# safetensors rank files (their tpconv.rank metadata) and torch ones (content:
# a split tensor's SHA-256 against the manifest's rank checksums); a set in
# place, and a file with one corrupted byte, do not get that message.
# On a swapped set the structure check's count of a tensor's differing
# elements stops at 100000 a rank ("more than", "capped" in the JSON).
# usage: rank_swap_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
D=$SRC/tests/data
shard() { "$TPCONV" shard "$D/tiny_llama.safetensors" --preset llama --config "$D/config.json" -q "$@"; }
swap() { mv "$1/$2" "$1/swap.tmp" && mv "$1/$3" "$1/$2" && mv "$1/swap.tmp" "$1/$3"; }
first_row() { grep -v '^#' "$T/out" | head -1; }

shard --tp 2 -o "$T/st"
run "$TPCONV" verify --reference "$D/tiny_llama.safetensors" --shards "$T/st"
[ "$rc" = 0 ] && ! grep -q "holds rank" "$T/out" "$T/err" && ok "a set in place passes without the message" || bad "set in place" "exit $rc" "$(cat "$T/err")"
swap "$T/st" model_tp00_pp00.safetensors model_tp01_pp00.safetensors
run "$TPCONV" verify --reference "$D/tiny_llama.safetensors" --shards "$T/st" --json "$T/v.json"
if [ "$rc" = 1 ] && first_row | grep -q '^  structure  model_tp00_pp00.safetensors .*FAIL$' &&
   sed -n 4p "$T/out" | grep -q "rank file holds rank 1's tensors: 'model_tp00_pp00.safetensors' is rank 0's place" &&
   grep -q "warning: rank file 'model_tp01_pp00.safetensors' holds rank 0's tensors, not rank 1's" "$T/err"; then
  ok "safetensors files swapped: the first check row says the file holds rank 1's tensors"
else bad "safetensors swap" "exit $rc" "$(head -5 "$T/out")" "$(cat "$T/err")"; fi
$PY -c '
import json, sys
c = json.load(open(sys.argv[1]))["checks"]
assert c[0]["check"] == "structure" and c[0]["status"] == "fail" and "holds rank 1" in c[0]["message"], c[0]
' "$T/v.json" 2>"$T/perr" && ok "--json: the first check is the misplaced file" || bad "json first check" "$(cat "$T/perr")"
# merge and diff of the swapped set name the swap as verify does
run "$TPCONV" merge "$T/st" -o "$T/st.safetensors"
[ "$rc" = 3 ] && grep -q "model_tp0[01]_pp00.safetensors': tensor '.*': rank file holds rank [01]'s tensors, not rank [01]'s (files swapped or renamed?)" "$T/err" &&
  [ ! -e "$T/st.safetensors" ] && ok "merge of the swapped set: exit 3, the swap named" || bad "merge swap" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" diff "$D/tiny_llama.safetensors" "$T/st"
[ "$rc" = 3 ] && grep -q "(files swapped or renamed?)" "$T/err" && ok "diff against the swapped set: exit 3, the swap named" || bad "diff swap" "exit $rc" "$(cat "$T/err")"

shard --tp 4 --format torch -o "$T/pt"
ls "$T/pt" > "$T/files"
f0=$(sed -n 1p "$T/files") f1=$(sed -n 2p "$T/files") f2=$(sed -n 3p "$T/files")
swap "$T/pt" "$f0" "$f2"
run "$TPCONV" verify --reference "$D/tiny_llama.safetensors" --shards "$T/pt"
if [ "$rc" = 1 ] && first_row | grep -q "^  structure  $f0 " && grep -q "rank file holds rank 2's tensors: '$f0' is rank 0's place" "$T/out" &&
   grep -q "rank file holds rank 0's tensors: '$f2' is rank 2's place" "$T/out" && ! grep -q "'$f1' is rank" "$T/out"; then
  ok "torch rank files (no metadata) swapped: found by content against the manifest checksums"
else bad "torch swap" "exit $rc" "$(head -8 "$T/out")" "$(cat "$T/err")"; fi

shard --tp 2 -o "$T/bad"
f="$T/bad/model_tp01_pp00.safetensors"
printf '\x7f' | dd of="$f" bs=1 seek=$(( $(stat -c %s "$f") - 3 )) conv=notrunc status=none
run "$TPCONV" verify --reference "$D/tiny_llama.safetensors" --shards "$T/bad"
[ "$rc" = 1 ] && ! grep -q "holds rank" "$T/out" && ok "a corrupted byte is not reported as a swap" || bad "corrupted byte" "exit $rc" "$(head -6 "$T/out")"
run "$TPCONV" merge "$T/bad" -o "$T/bad.safetensors"
[ "$rc" = 3 ] && grep -q "does not match the manifest checksum" "$T/err" && ! grep -q "holds rank" "$T/err" &&
  ok "merge: a corrupted byte is a checksum mismatch, not a swap" || bad "merge corrupted byte" "exit $rc" "$(cat "$T/err")"
# a swapped set differs in every element of every split tensor: verify counts a
# rank's differing elements of a tensor up to a bound (TPC_VERIFY_COUNT_MAX,
# 100000) and says "more than" past it, naming the first four either way; the
# vocabulary of 4000 x 64 gives each of 2 ranks 128000 elements of the embedding
# (issue 41 item 11: counting every element of a swapped set took minutes)
mkdir -p "$T/big"
$PY "$SRC/bench/make_big_st.py" "$T/big/model.safetensors" 64 1 176 4000 F32 >/dev/null &&
  printf '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 176, "vocab_size": 4000, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "torch_dtype": "float32"}\n' >"$T/big/config.json" &&
  "$TPCONV" shard "$T/big" --preset llama --tp 2 -o "$T/bigsw" -q 2>"$T/err" &&
  swap "$T/bigsw" model_tp00_pp00.safetensors model_tp01_pp00.safetensors || bad "bounded count: setup" "$(cat "$T/err")"
run "$TPCONV" verify --reference "$T/big/model.safetensors" --shards "$T/bigsw" --json "$T/big.json"
E=model.embed_tokens.weight
if [ "$rc" = 1 ] && grep -A6 "^  structure  $E " "$T/out" > "$T/rows" &&
   sed -n 2p "$T/rows" | grep -q "^#   rank 0: more than 100000 of 128000 elements differ from the reference slice (counting stops there)$" &&
   [ "$(sed -n '3,6p' "$T/rows" | grep -c '^#   rank [01] index [0-9]*: expected [-0-9.e+]*, got [-0-9.e+]*$')" = 4 ] &&
   sed -n 7p "$T/rows" | grep -qv '^#   rank'; then
  ok "verify of a swapped set: a tensor's count stops at 100000 (\"more than 100000 of 128000\"), the first four differences named"
else bad "bounded count: table" "exit $rc" "$(cat "$T/rows" 2>/dev/null)" "$(tail -3 "$T/err")"; fi
$PY - "$T/big.json" <<'PY' 2>"$T/perr" && ok "--json: capped true and mismatches a lower bound (100000 a rank) there; a tensor under the bound counted exactly, capped false" || bad "bounded count: json" "$(cat "$T/perr")"
import json, sys
c = {(x["check"], x["tensor"]): x for x in json.load(open(sys.argv[1]))["checks"]}
e = c[("structure", "model.embed_tokens.weight")]
assert e["status"] == "fail" and e["capped"] is True and e["mismatches"] == 200000 and e["elements"] == 256000, e
assert len(e["first"]) == 4 and all(set(d) == {"rank", "index", "expected", "actual"} for d in e["first"]), e["first"]
q = c[("structure", "model.layers.0.self_attn.q_proj.weight")]
assert q["status"] == "fail" and q["capped"] is False and 0 < q["mismatches"] <= 4096 and "more than" not in q["message"], q
PY

echo "1..$n"
[ "$failed" = 0 ]
