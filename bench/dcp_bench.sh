#!/usr/bin/env bash
# make bench (DCP part): a PyTorch Distributed Checkpoint of the LLaMA-shaped
# bench model (~4.7 GB) read back by tpconv, beside an in-kernel copy of the same
# bytes in the same run. The DCP folder is written by `tpconv convert --format
# dcp` (every item in one __0_0.distcp, as torch's FileSystemWriter writes a
# single-process save; torch 2.14 reads it: tests/dcp/torch2_check.py); reading
# does not depend on who wrote it.
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
. "$HERE/measure.sh"
echo "# DCP input: $DCP ($(du -sb "$DCP" | cut -f1) bytes in $(ls "$DCP" | wc -l) files)"
echo "| step | wall | peak RSS |"
echo "|---|---:|---:|"
measure "in-kernel copy of the same bytes (kcopy.py, torch file)" "$DIR/k.bin" $PY "$HERE/kcopy.py" "$SRC" "$DIR/k.bin"
measure "tpconv convert dcp -> safetensors" "$DIR/dcp.safetensors" "$TPCONV" convert "$DCP" -o "$DIR/dcp.safetensors" -q
measure "tpconv shard dcp -> tp 4 (llama preset)" "$DIR/dcp_tp4" "$TPCONV" shard "$DCP" --preset llama --heads 16 --kv-heads 4 --head-dim 128 --vocab 32000 --tp 4 -o "$DIR/dcp_tp4" -q
