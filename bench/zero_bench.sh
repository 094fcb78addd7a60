#!/usr/bin/env bash
# make bench (DeepSpeed part): a ZeRO-3 checkpoint of the LLaMA-shaped bench
# model (fp32 masters, ~4.7 GB, 4 data-parallel ranks; tests/deepspeed/make_zero.py
# --from, Adam's moments left out: tpconv never reads them) consolidated by
# tpconv into safetensors and straight into a tp 4 set, beside an in-kernel copy
# of the same bytes in the same run. Every parameter is cut into 4 pieces, one
# per rank file: the output is assembled from 4 x 291 pieces.
# usage: zero_bench.sh path/to/tpconv   (env: BENCH_DIR, HIDDEN=2048, LAYERS=24, REPS=2, WORLD=4)
set -eu
TPCONV=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HERE/../../shared/bench}
DIR=${BENCH_DIR:-$HERE/../build/bench}
HIDDEN=${HIDDEN:-2048} LAYERS=${LAYERS:-24} REPS=${REPS:-2} WORLD=${WORLD:-4}
PY=/usr/bin/python3
mkdir -p "$DIR"
SRC="$DIR/llama_${HIDDEN}_${LAYERS}.bin"
if [ ! -f "$SRC" ]; then
  echo "# generating $SRC with real torch.save"
  $PY "$PEERS/make_llama.py" "$SRC.tmp" "$HIDDEN" "$LAYERS" && mv "$SRC.tmp" "$SRC"
fi
Z="$DIR/llama_${HIDDEN}_${LAYERS}.zero3_$WORLD"
if [ ! -f "$Z/latest" ]; then
  echo "# writing $Z (ZeRO-3, world $WORLD) the way DeepSpeed saves"
  rm -rf "$Z.tmp"
  $PY "$HERE/../tests/deepspeed/make_zero.py" "$Z.tmp" --stage 3 --world "$WORLD" --from "$SRC" --no-moments && mv "$Z.tmp" "$Z"
fi
. "$HERE/measure.sh"
echo "# ZeRO-3 input: $Z ($(du -sb "$Z" | cut -f1) bytes, $(ls "$Z"/global_step14 | wc -l) files)"
echo "| step | wall | peak RSS |"
echo "|---|---:|---:|"
measure "in-kernel copy of the same bytes (kcopy.py, torch file)" "$DIR/k.bin" $PY "$HERE/kcopy.py" "$SRC" "$DIR/k.bin"
measure "tpconv convert zero3 -> safetensors" "$DIR/zero.safetensors" "$TPCONV" convert "$Z" -o "$DIR/zero.safetensors" -q
measure "tpconv shard zero3 -> tp 4 (llama preset)" "$DIR/zero_tp4" "$TPCONV" shard "$Z" --preset llama --heads 16 --kv-heads 4 --head-dim 128 --vocab 32000 --tp 4 -o "$DIR/zero_tp4" -q
