#!/usr/bin/env bash
# make bench: tpconv against what users run today (../shared/bench peers), `cp`,
# and an in-kernel copy (copy_file_range) of the same bytes, in the same run.
# Prints a markdown table of wall time, peak RSS and ratios; BENCHMARKS.md
# records a run. Needs ~35 GB free disk in BENCH_DIR and real torch.
# usage: bench.sh path/to/tpconv   (env: BENCH_DIR, HIDDEN=2048, LAYERS=24)
set -eu
TPCONV=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HERE/../../shared/bench}
DIR=${BENCH_DIR:-$HERE/../build/bench}
HIDDEN=${HIDDEN:-2048} LAYERS=${LAYERS:-24}
PY=/usr/bin/python3
mkdir -p "$DIR"
SRC="$DIR/llama_${HIDDEN}_${LAYERS}.bin"
if [ ! -f "$SRC" ]; then
  echo "# generating $SRC with real torch.save ($PEERS/make_llama.py $HIDDEN $LAYERS)"
  $PY "$PEERS/make_llama.py" "$SRC.tmp" "$HIDDEN" "$LAYERS" && mv "$SRC.tmp" "$SRC"
fi
RESULTS="$DIR/results.tsv"
: > "$RESULTS"

REPS=${REPS:-2}
# measure LABEL OUTPUT-TO-DELETE CMD...: wall seconds and peak RSS (KiB) of
# CMD followed by `sync`, so every step pays for getting its bytes to disk
# (tpconv fsyncs; cp and the in-kernel copy would otherwise leave dirty pages).
# Runs REPS times; records the fastest and the largest RSS.
measure() {
  local label=$1 out=$2; shift 2
  local best="" rss=0 r secs m
  for r in $(seq "$REPS"); do
    [ -z "$out" ] || rm -rf "$out"
    sync
    /usr/bin/time -f "%e %M" -o "$DIR/time.txt" sh -c '"$@" && sync' sh "$@" > "$DIR/cmd.log" 2>&1 \
      || { echo "FAILED: $label"; cat "$DIR/cmd.log"; exit 1; }
    read -r secs m < "$DIR/time.txt"
    if [ -z "$best" ] || awk "BEGIN{exit !($secs < $best)}"; then best=$secs; fi
    [ "$m" -gt "$rss" ] && rss=$m
  done
  printf '%s\t%s\t%s\n' "$label" "$best" "$rss" | tee -a "$RESULTS"
  [ -z "$out" ] || rm -rf "$out"
}
bytes() { stat -c %s "$1"; }

echo "# input: $SRC ($(bytes "$SRC") bytes)"
# --- torch zip -> safetensors
measure "kcopy torch-size" "$DIR/k.bin"   $PY "$HERE/kcopy.py" "$SRC" "$DIR/k.bin"
measure "cp torch-size"    "$DIR/c.bin"   cp "$SRC" "$DIR/c.bin"
if "$TPCONV" --help | grep -q '^Formats read.* torch'; then
  measure "tpconv convert torch->safetensors" "" "$TPCONV" convert "$SRC" -o "$DIR/tp.safetensors" -f
  measure "tpconv convert torch->safetensors bf16" "$DIR/bf16.safetensors" "$TPCONV" convert "$SRC" -o "$DIR/bf16.safetensors" --dtype bf16 -f
  head -c $(( $(bytes "$SRC") / 2 )) "$SRC" > "$DIR/half.bin"
  measure "kcopy bf16-size" "$DIR/k.half" $PY "$HERE/kcopy.py" "$DIR/half.bin" "$DIR/k.half"
  rm -f "$DIR/half.bin"
fi
REPS=1 measure "peer_convert.py torch->safetensors" "" $PY "$PEERS/peer_convert.py" "$SRC" "$DIR/peer.safetensors"
ST="$DIR/peer.safetensors"
[ -f "$DIR/tp.safetensors" ] && ST="$DIR/tp.safetensors"

# --- safetensors -> HF shards of 4 GB (issue: foundation)
measure "kcopy st-size"    "$DIR/k.st"    $PY "$HERE/kcopy.py" "$ST" "$DIR/k.st"
measure "cp st-size"       "$DIR/c.st"    cp "$ST" "$DIR/c.st"
measure "tpconv convert safetensors->4GB shards" "$DIR/shards" "$TPCONV" convert "$ST" -o "$DIR/shards" --max-shard-size 4GB
measure "tpconv convert safetensors->safetensors" "$DIR/st2.safetensors" "$TPCONV" convert "$ST" -o "$DIR/st2.safetensors"

if "$TPCONV" --help | grep -q '^  shard '; then
  # model facts of make_llama.py: head_dim 128, 4 query heads per kv head
  NH=$((HIDDEN / 128)); KV=$((NH / 4)); [ "$KV" -ge 1 ] || KV=1
  FACTS=(--heads "$NH" --kv-heads "$KV" --head-dim 128 --vocab 32000)
  measure "tpconv shard torch->tp4 safetensors" "" "$TPCONV" shard "$SRC" --tp 4 --preset llama "${FACTS[@]}" -o "$DIR/tp4" -f
  measure "tpconv shard torch->tp4 oslo layout (torch files)" "$DIR/tp4oslo" "$TPCONV" shard "$SRC" --tp 4 --preset llama "${FACTS[@]}" --layout oslo -o "$DIR/tp4oslo" -f
  mkdir -p "$DIR/peer_tp4"
  REPS=1 measure "peer_shard.py tp4" "" $PY "$PEERS/peer_shard.py" "$SRC" "$DIR/peer_tp4" 4
  measure "tpconv merge tp4->safetensors" "$DIR/merged.safetensors" "$TPCONV" merge "$DIR/tp4" -o "$DIR/merged.safetensors" -f
  measure "tpconv merge tp4->torch" "$DIR/merged.bin" "$TPCONV" merge "$DIR/tp4" -o "$DIR/merged.bin" -f
  REPS=1 measure "peer_merge.py tp4" "$DIR/peer_merged.bin" $PY "$PEERS/peer_merge.py" "$DIR/peer_tp4" "$DIR/peer_merged.bin" 4
  rm -rf "$DIR/peer_tp4"
  if "$TPCONV" --help | grep -q '^  verify '; then
    REPS=1 measure "tpconv verify tp4 (cpu)" "" "$TPCONV" verify --reference "$SRC" --shards "$DIR/tp4" --heads "$NH" --kv-heads "$KV" --head-dim 128 --tokens 8
  fi
  rm -rf "$DIR/tp4"
fi

rm -f "$DIR/peer.safetensors" "$DIR/st2.safetensors"
echo
echo "| step | wall s | peak RSS MiB |"
echo "|---|---:|---:|"
awk -F'\t' '{printf "| %s | %.2f | %.0f |\n", $1, $2, $3/1024}' "$RESULTS"
