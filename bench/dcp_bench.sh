#!/usr/bin/env bash
# make bench (DCP part): a PyTorch Distributed Checkpoint of the LLaMA-shaped
# bench model (~4.7 GB) read back by tpconv, beside an in-kernel copy of the same
# bytes in the same run. The DCP folder is written by `tpconv convert --format
# dcp` (one item per tensor, the layout torch 1.13's writer used; torch 2.6 reads
# it: tests/dcp/torch2_check.py); reading does not depend on who wrote it.
# usage: dcp_bench.sh path/to/tpconv   (env: BENCH_DIR, HIDDEN=2048, LAYERS=24, REPS=2)
set -eu
TPCONV=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HERE/../../shared/bench}
DIR=${BENCH_DIR:-$HERE/../build/bench}
HIDDEN=${HIDDEN:-2048} LAYERS=${LAYERS:-24} REPS=${REPS:-2}
PY=/usr/bin/python3
mkdir -p "$DIR"
SRC="$DIR/llama_${HIDDEN}_${LAYERS}.bin"
if [ ! -f "$SRC" ]; then
  echo "# generating $SRC with real torch.save"
  $PY "$PEERS/make_llama.py" "$SRC.tmp" "$HIDDEN" "$LAYERS" && mv "$SRC.tmp" "$SRC"
fi
DCP="$DIR/llama_${HIDDEN}_${LAYERS}.dcp"
[ -f "$DCP/.metadata" ] || "$TPCONV" convert "$SRC" -o "$DCP" --format dcp -f -q
measure() { # LABEL OUT CMD...: best wall seconds (with sync) and peak RSS KiB
  local label=$1 out=$2; shift 2
  local best="" rss=0 secs m
  for _ in $(seq "$REPS"); do
    rm -rf "$out"; sync
    /usr/bin/time -f "%e %M" -o "$DIR/time.txt" sh -c '"$@" && sync' sh "$@" > "$DIR/cmd.log" 2>&1 ||
      { echo "FAILED: $label"; cat "$DIR/cmd.log"; exit 1; }
    read -r secs m < "$DIR/time.txt"
    if [ -z "$best" ] || awk "BEGIN{exit !($secs < $best)}"; then best=$secs; fi
    [ "$m" -gt "$rss" ] && rss=$m
  done
  rm -rf "$out"
  printf '| %s | %s s | %s MB |\n' "$label" "$best" "$((rss / 1024))"
  eval "T_$3=$best" 2>/dev/null || true
}
echo "# DCP input: $DCP ($(du -sb "$DCP" | cut -f1) bytes in $(ls "$DCP" | wc -l) files)"
echo "| step | wall | peak RSS |"
echo "|---|---:|---:|"
measure "in-kernel copy of the same bytes (kcopy.py, torch file)" "$DIR/k.bin" $PY "$HERE/kcopy.py" "$SRC" "$DIR/k.bin"
measure "tpconv convert dcp -> safetensors" "$DIR/dcp.safetensors" "$TPCONV" convert "$DCP" -o "$DIR/dcp.safetensors" -q
measure "tpconv shard dcp -> tp 4 (llama preset)" "$DIR/dcp_tp4" "$TPCONV" shard "$DCP" --preset llama --heads 16 --kv-heads 4 --head-dim 128 --vocab 32000 --tp 4 -o "$DIR/dcp_tp4" -q
