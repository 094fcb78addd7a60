#!/usr/bin/env bash
# The dcp layout (TAP): a whole shard set as ONE PyTorch Distributed Checkpoint.
# Tiny models made by real torch (tests/shard/make_models.py: a GQA LLaMA with 4 kv
# heads and a vocabulary of 250, so tp 4 pads the vocab and tp 8 replicates kv heads;
# GPT-2, whose fused c_attn gives each rank one box per part) shard with
# --layout dcp; every rank file's items equal an independent torch slicing of the
# original (dcp_layout_check.py: .metadata read without DCP classes, each item
# torch.load-ed from its byte range); merge, and the folder read as a plain DCP
# checkpoint, give the model back bit for bit; verify passes; resharding the set
# equals sharding the original; a missing or cut rank file is exit 3 naming it.
# With /opt/trixie (real torch 2.6, tests/dcp/README.md) torch's own
# dcp_to_torch_save and dcp.load read the set; skipped without it.
# usage: dcp_layout_test.sh TPCONV SRCDIR     (needs /usr/bin/python3 with torch)
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
M=$T/m
$PY "$H/make_models.py" "$M" 7 >/dev/null || { echo "1..0 # SKIP model generator failed"; exit 0; }

for cfg in "2 1" "4 1" "2 2" "8 1"; do
  set -- $cfg
  tp=$1 pp=$2 S=$T/llama_${1}_$2 what="llama tp $1 pp $2"
  run "$TPCONV" shard "$M/llama" --preset llama --tp $tp --pp $pp --layout dcp -o "$S" -q
  if [ "$rc" != 0 ]; then bad "$what: shard" "$(cat "$T/err")"; continue; fi
  nf=$(ls "$S" | grep -c '^__[0-9]*_0\.distcp$')
  [ -f "$S/.metadata" ] && [ "$nf" = $((tp * pp)) ] && [ -f "$S/tpconv-manifest.json" ] && [ -f "$S/config.json" ] &&
    ok "$what: one DCP folder, $nf rank files __R_0.distcp, .metadata, manifest, config" || bad "$what: files" "$(ls -a "$S")"
  run $PY "$H/dcp_layout_check.py" "$M/llama.pt" "$S" $tp $pp llama
  [ "$rc" = 0 ] && ok "$what: every rank file holds exactly its chunks, each equal to the torch slice ($(tail -n 1 "$T/out"))" ||
    bad "$what: rank files" "$(tail -5 "$T/out" "$T/err")"
  run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q
  [ "$rc" = 0 ] && same "$M/llama/model.safetensors" "$S.merged.safetensors" && ok "$what: merge is bit-exact" ||
    bad "$what: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
  run "$TPCONV" convert "$S" -o "$S.plain.safetensors" -q
  [ "$rc" = 0 ] && same "$M/llama/model.safetensors" "$S.plain.safetensors" &&
    ok "$what: read as a plain DCP checkpoint (the dcp reader) it is the original, bit for bit" ||
    bad "$what: plain DCP read" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
  run "$TPCONV" verify --reference "$M/llama/model.safetensors" --shards "$S"
  [ "$rc" = 0 ] && ok "$what: verify passes ($(tail -n 1 "$T/out" | sed 's/^# //'))" ||
    bad "$what: verify" "exit $rc" "$(tail -5 "$T/out")" "$(cat "$T/err")"
done

# inspect says what the folder is
run "$TPCONV" inspect "$T/llama_2_1"
[ "$rc" = 0 ] && grep -q 'layout dcp, tp 2' "$T/out" && ok "inspect: a shard set in the dcp layout" || bad "inspect" "$(head -3 "$T/out" "$T/err")"
run "$TPCONV" inspect "$T/llama_2_1/__0_0.distcp"
if [ "$rc" = 3 ] && grep -q "__0_0.distcp" "$T/err"; then ok "a lone __0_0.distcp is refused naming it (its names are in .metadata): exit 3"
else bad "inspect of a lone rank file" "exit $rc" "$(head -3 "$T/out" "$T/err")"; fi

# reshard: the set in, tp 4 in tpconv's layout out, equal to sharding the original
"$TPCONV" shard "$M/llama" --preset llama --tp 4 -o "$T/direct4" -q
for src in llama_2_2 llama_4_1; do
  run "$TPCONV" shard "$T/$src" --preset llama --tp 4 -o "$T/re_$src" -q
  okk=$rc
  for f in "$T"/direct4/*.safetensors; do
    same "$f" "$T/re_$src/$(basename "$f")" || okk=1
  done
  [ "$okk" = 0 ] && ok "reshard $src -> tp 4 (tpconv layout) equals sharding the original at tp 4" || bad "reshard $src" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
done

# a fused tensor split per part: GPT-2's c_attn gives each rank three boxes
for tp in 2 4; do
  S=$T/gpt2_$tp
  run "$TPCONV" shard "$M/gpt2" --preset gpt2 --tp $tp --layout dcp -o "$S" -q
  [ "$rc" = 0 ] && $PY "$H/dcp_layout_check.py" "$M/gpt2.pt" "$S" $tp 1 >"$T/out" 2>&1 &&
    "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q && same "$M/gpt2/model.safetensors" "$S.merged.safetensors" &&
    ok "gpt2 tp $tp: fused q|k|v parts stored one chunk per part per rank; merge bit-exact ($(tail -n 1 "$T/out"))" ||
    bad "gpt2 tp $tp" "$(cat "$T/err" "$T/out" "$T/diff" 2>/dev/null)"
done

# broken sets: a missing rank file, a cut one
cp -r "$T/llama_2_1" "$T/lost" && rm "$T/lost/__1_0.distcp"
run "$TPCONV" merge "$T/lost" -o "$T/lost.safetensors" -q
[ "$rc" = 3 ] && grep -q "__1_0.distcp" "$T/err" && [ ! -e "$T/lost.safetensors" ] &&
  ok "merge of a set missing a rank file: exit 3 naming the file, nothing written" || bad "missing rank" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" convert "$T/lost" -o "$T/lost2.safetensors" -q
[ "$rc" = 3 ] && grep -q "__1_0.distcp" "$T/err" && [ ! -e "$T/lost2.safetensors" ] &&
  ok "the same folder read as a plain DCP checkpoint: exit 3 naming the file" || bad "missing rank (plain)" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" verify --reference "$M/llama/model.safetensors" --shards "$T/lost"
[ "$rc" = 3 ] && grep -q "__1_0.distcp" "$T/err" && ok "verify of that set: exit 3 naming the file" || bad "missing rank (verify)" "exit $rc" "$(cat "$T/err")"
cp -r "$T/llama_2_1" "$T/cut" && truncate -s -100 "$T/cut/__1_0.distcp"
run "$TPCONV" merge "$T/cut" -o "$T/cut.safetensors" -q
[ "$rc" = 3 ] && grep -q "__1_0.distcp" "$T/err" && [ ! -e "$T/cut.safetensors" ] &&
  ok "merge of a set with a cut rank file: exit 3 naming the file" || bad "cut rank" "exit $rc" "$(cat "$T/err")"

# an interrupted run: rank files but no .metadata and no manifest; a rerun completes it
"$TPCONV" shard "$M/llama" --preset llama --tp 2 --layout dcp -o "$T/part" -q --rank 0 2>"$T/err"
[ -f "$T/part/__0_0.distcp" ] && [ ! -e "$T/part/.metadata" ] && [ ! -e "$T/part/tpconv-manifest.json" ] &&
  run "$TPCONV" shard "$M/llama" --preset llama --tp 2 --layout dcp -o "$T/part" -q --rank 1 && [ "$rc" = 0 ] &&
  [ -f "$T/part/.metadata" ] && $PY "$H/dcp_layout_check.py" "$M/llama.pt" "$T/part" 2 1 llama >"$T/out" 2>&1 &&
  ok "--rank 0 then --rank 1: .metadata only once the set is complete; the set checks out" ||
  bad "--rank runs" "$(ls -a "$T/part")" "$(cat "$T/err" "$T/out")"

# real torch 2.x: dcp_to_torch_save and dcp.load (opt-in: the trixie chroot)
if [ -x /opt/trixie/usr/bin/python3 ] && [ "$(id -u)" = 0 ] && [ -e /opt/trixie/proc/self ] &&
   chroot /opt/trixie python3 -c 'import torch.distributed.checkpoint' 2>/dev/null; then
  W=$(mktemp -d /opt/trixie/tmp/dcpl.XXXXXX)
  cp -r "$T/llama_4_1" "$T/llama_8_1" "$T/gpt2_2" "$M/llama.pt" "$M/gpt2.pt" "$H/dcp_layout_torch2.py" "$W/"
  for s in llama_4_1:llama llama_8_1:llama gpt2_2:gpt2; do
    run chroot /opt/trixie sh -c "cd /tmp/$(basename "$W") && USE_LIBUV=0 python3 dcp_layout_torch2.py ${s%%:*} ${s#*:}.pt"
    [ "$rc" = 0 ] && ok "${s%%:*}: real $(tail -n 1 "$T/out")" || bad "${s%%:*}: torch 2" "$(tail -5 "$T/err")"
  done
  rm -rf "$W"
else
  skip "real torch 2.x reads the set (dcp_to_torch_save, dcp.load)" "no /opt/trixie chroot with torch (tests/dcp/README.md)"
fi

run "$TPCONV" shard --help
grep -q '^ *dcp  ' "$T/out" && ok "shard --help lists the dcp layout from the registry" || bad "help" "$(grep -n layout "$T/out")"
echo "1..$n"
[ "$failed" = 0 ]
