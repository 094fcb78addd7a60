#!/usr/bin/env bash
# Tied weights (TAP): a torch file whose lm_head.weight is model.embed_tokens.weight
# (one storage, as torch.save writes a tied Hugging Face model) through shard in
# several layouts, tp and pp, and a plan that splits the pair differently, then
# merge: the manifest records the tie (tied_to), merge to torch gives one storage
# for both names (the original's size, bit-exact values), merge to safetensors
# (a file or an HF folder) drops the duplicate as save_pretrained does and
# transformers' loading logic accepts it; torch rank files keep the tie; a
# reshard keeps it; a manifest without ties (an older set) still merges; a
# tie whose halves hold different values, or a bad tied_to, is refused.
# Checks in real torch: tests/shard/ties_check.py.
# usage: ties_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
C=$H/ties_check.py
M=$T/tied.pt
$PY "$C" make "$M" || { echo "1..0 # SKIP model generator failed"; exit 0; }
cat >"$T/config.json" <<'J'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
 "num_key_value_heads": 4, "intermediate_size": 96, "num_hidden_layers": 2, "vocab_size": 1000,
 "tie_word_embeddings": true}
J
# the llama plan with lm_head replicated: the two halves of the tie split differently
"$TPCONV" plan llama >"$T/llama.json" &&
  $PY - "$T/llama.json" "$T/rephead.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for r in p['rules']:
    if r['match'] == '^lm_head\\.weight$':
        r['split'] = 'replicate'
json.dump(p, open(sys.argv[2], 'w'))
PY

# tied_once SET: lm_head.weight, and nothing else, is tied to model.embed_tokens.weight
tied_once() {
  [ "$(grep -c '"tied_to"' "$1/tpconv-manifest.json")" = 1 ] &&
    grep '"name": "lm_head.weight"' "$1/tpconv-manifest.json" | grep -q '"tied_to": "model.embed_tokens.weight"'
}
# merged SET DESC: merge to torch (one storage) and to safetensors (save_pretrained's file)
merged() {
  run "$TPCONV" merge "$1" -o "$T/m.pt" -f
  [ "$rc" = 0 ] && $PY "$C" torch "$M" "$T/m.pt" 2>"$T/perr" &&
    ok "$2: merge to torch: one storage for both names, the original's size, bit-exact" ||
    bad "$2: merge to torch" "rc $rc $(cat "$T/err")" "$(cat "$T/perr" 2>/dev/null)"
  run "$TPCONV" merge "$1" -o "$T/m.safetensors" -f
  [ "$rc" = 0 ] && $PY "$C" st "$M" "$T/m.safetensors" 2>"$T/perr" &&
    ok "$2: merge to safetensors: lm_head dropped as save_pretrained does, loads tied" ||
    bad "$2: merge to safetensors" "rc $rc $(cat "$T/err")" "$(cat "$T/perr" 2>/dev/null)"
}

# ---- shard in several layouts, then merge
i=0
for args in "--tp 2" "--tp 2 --format torch" "--tp 2 --pp 2" "--tp 4 --layout oslo" "--tp 2 --plan $T/rephead.json" \
            "--tp 2 --layout vllm"; do
  i=$((i + 1)); S=$T/s$i
  plan="--preset llama"
  case $args in *--plan*) plan= ;; esac
  run "$TPCONV" shard "$M" $plan --config "$T/config.json" $args -o "$S" -q
  d=${args/$T\/rephead.json/lm_head replicated}
  if [ "$rc" != 0 ]; then bad "shard $d" "rc $rc $(cat "$T/err")"; continue; fi
  tied_once "$S" && ok "shard $d: the manifest ties lm_head.weight to model.embed_tokens.weight" ||
    bad "shard $d: tied_to" "$(grep -o '"name": "[^"]*"[^}]*tied_to[^,]*' "$S/tpconv-manifest.json")"
  merged "$S" "$d"
done

# torch rank files hold each rank's slices of the pair as one storage
$PY "$C" ranks "$T/s2" 2 2>"$T/perr" && ok "torch rank files: each rank's embed_tokens and lm_head slices share a storage" ||
  bad "torch rank files" "$(cat "$T/perr")"
# the dry run names the tie
run "$TPCONV" shard "$M" --preset llama --config "$T/config.json" --tp 2 --dry-run
grep -q '^lm_head.weight .*tied to model.embed_tokens.weight$' "$T/out" && ok "shard --dry-run says lm_head is tied" ||
  bad "shard --dry-run" "$(grep lm_head "$T/out")"
run "$TPCONV" merge "$T/s1" --dry-run
grep -q '^lm_head.weight  F32 \[1000, 64\]  tied to model.embed_tokens.weight$' "$T/out" && ok "merge --dry-run says lm_head is tied" ||
  bad "merge --dry-run" "$(grep lm_head "$T/out")"

# a reshard keeps the tie
run "$TPCONV" shard "$T/s1" --tp 4 -o "$T/re" -q
[ "$rc" = 0 ] && tied_once "$T/re" && ok "reshard tp 2 -> 4 keeps the tie in the manifest" || bad "reshard" "rc $rc $(cat "$T/err")"
merged "$T/re" "reshard tp 4"

# HF folders: shards of at most 100 kB, the pair in one shard
run "$TPCONV" merge "$T/s1" -o "$T/hf/" --max-shard-size 100kB
[ "$rc" = 0 ] && [ -f "$T/hf/model.safetensors.index.json" ] && $PY "$C" st "$M" "$T/hf" 2>"$T/perr" &&
  ok "merge to HF safetensors shards: no lm_head in the weight_map or shards, loads tied" ||
  bad "merge to HF shards" "rc $rc $(cat "$T/err")" "$(cat "$T/perr" 2>/dev/null)"
run "$TPCONV" convert "$T/hf" -o "$T/hf.pt"
[ "$rc" = 0 ] && $PY "$C" torch "$M" "$T/hf.pt" any-order 2>"$T/perr" && ok "those HF shards read back tied (torch output: one storage)" ||
  bad "HF shards back" "rc $rc $(cat "$T/err")" "$(cat "$T/perr" 2>/dev/null)"
run "$TPCONV" merge "$T/s1" -o "$T/hft/" --max-shard-size 100kB --format torch
[ "$rc" = 0 ] && grep -q '"lm_head.weight"' "$T/hft/pytorch_model.bin.index.json" &&
  "$TPCONV" convert "$T/hft" -o "$T/hft.pt" -q && $PY - "$T/hft" <<'PY' 2>"$T/perr" &&
import json, sys, torch
d = sys.argv[1]
wm = json.load(open(d + '/pytorch_model.bin.index.json'))['weight_map']
f = wm['lm_head.weight']
assert wm['model.embed_tokens.weight'] == f, wm
sd = torch.load(d + '/' + f)
assert sd['lm_head.weight'].storage().data_ptr() == sd['model.embed_tokens.weight'].storage().data_ptr()
PY
  ok "merge to HF torch shards: the pair in one shard, one storage, both in the weight_map" ||
  bad "merge to HF torch shards" "rc $rc $(cat "$T/err" "$T/perr" 2>/dev/null)"

# convert torch -> torch keeps the tie
run "$TPCONV" convert "$M" -o "$T/c.pt"
[ "$rc" = 0 ] && $PY "$C" torch "$M" "$T/c.pt" 2>"$T/perr" && ok "convert torch -> torch keeps one storage" ||
  bad "convert torch" "$(cat "$T/err" "$T/perr")"

# a set whose manifest has no ties (written before them) still merges, values exact
cp -r "$T/s1" "$T/old"
sed -i 's/, "tied_to": "model.embed_tokens.weight"//' "$T/old/tpconv-manifest.json"
run "$TPCONV" merge "$T/old" -o "$T/old.safetensors"
[ "$rc" = 0 ] && ! grep -q tied_to "$T/old/tpconv-manifest.json" && same "$T/old.safetensors" "$M" &&
  ok "a manifest without ties merges as before" || bad "old manifest" "rc $rc $(cat "$T/err" "$T/diff" 2>/dev/null)"
# an untied model's manifest has no tied_to member
$PY - "$M" "$T/untied.pt" <<'PY'
import sys, torch
sd = torch.load(sys.argv[1])
sd['lm_head.weight'] = sd['lm_head.weight'].clone()
torch.save(sd, sys.argv[2])
PY
run "$TPCONV" shard "$T/untied.pt" --preset llama --config "$T/config.json" --tp 2 -o "$T/un" -q
[ "$rc" = 0 ] && ! grep -q tied_to "$T/un/tpconv-manifest.json" && ok "an untied model: no tied_to in the manifest" ||
  bad "untied manifest" "rc $rc"

# refused: a tie whose halves hold different values, bad tied_to members
cp -r "$T/s1" "$T/bad"
$PY - "$T/bad/model_tp00_pp00.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
a = json.loads(b[8:8 + n])['lm_head.weight']['data_offsets'][0]
b[8 + n + a] ^= 0x40
open(p, 'wb').write(b)
PY
run "$TPCONV" merge "$T/bad" -o "$T/bad.pt" --no-checksums
[ "$rc" = 3 ] && grep -q "tensor 'lm_head.weight': the manifest ties it to 'model.embed_tokens.weight', but the rank files hold other values" "$T/err" &&
  [ ! -e "$T/bad.pt" ] && ok "tied halves that differ: exit 3, nothing written" || bad "differing halves" "rc $rc $(cat "$T/err")"
bad_manifest() { # DESC SED MESSAGE
  rm -rf "$T/bm"; cp -r "$T/s1" "$T/bm"
  sed -i "$2" "$T/bm/tpconv-manifest.json"
  run "$TPCONV" merge "$T/bm" -o "$T/bm.pt"
  [ "$rc" = 3 ] && grep -qF "$3" "$T/err" && [ ! -e "$T/bm.pt" ] && ok "manifest $1: exit 3" || bad "manifest $1" "rc $rc $(cat "$T/err")"
}
bad_manifest "tied to a later tensor" 's/"name": "model.embed_tokens.weight",/&  "tied_to": "lm_head.weight",/' \
  "\"tied_to\" must name a tensor listed before this one"
bad_manifest "tied to an unknown tensor" 's/"tied_to": "model.embed_tokens.weight"/"tied_to": "nope"/' \
  "\"tied_to\" must name a tensor listed before this one"
bad_manifest "tied to another shape" 's/"tied_to": "model.embed_tokens.weight"/"tied_to": "model.norm.weight"/' \
  "tied to a tensor of another dtype or shape"

echo "1..$n"
[ "$failed" = 0 ]
