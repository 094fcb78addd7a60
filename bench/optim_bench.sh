#!/usr/bin/env bash
# make bench (optimizer state): a DeepSpeed ZeRO-2 checkpoint of a LLaMA-shaped
# model with Adam's state (fp32 masters, exp_avg, exp_avg_sq per parameter, 4
# data-parallel ranks; tests/deepspeed/make_zero.py --from, the model made by
# shared/bench/make_llama.py with real torch.save; untimed), carried by
# `tpconv convert Z --optimizer` into the `optimizer.pt` torch.optim loads and
# into a 2-rank DCP folder (--format dcp --dcp-ranks 2) and a DeepSpeed universal
# checkpoint (--format ds-universal) and a Megatron torch_dist folder Megatron
# resumes from (shard --layout megatron-dist --optimizer), beside an in-kernel
# copy (copy_file_range, bench/kcopy.py) of the ZeRO folder's optimizer files
# in the same run, a sync after each step (bench/measure.sh). The peers have no
# such tool: DeepSpeed's zero_to_fp32.py drops the moments.
# usage: optim_bench.sh path/to/tpconv
#   env: BENCH_DIR, HIDDEN=2048, LAYERS=8, REPS=2, WORLD=4
set -eu
TPCONV=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HERE/../../shared/bench}
DIR=${BENCH_DIR:-$HERE/../build/bench}
HIDDEN=${HIDDEN:-2048} LAYERS=${LAYERS:-8} REPS=${REPS:-2} WORLD=${WORLD:-4}
PY=/usr/bin/python3
mkdir -p "$DIR"
DIR=$(realpath "$DIR")
SRC="$DIR/llama_${HIDDEN}_${LAYERS}.bin"
if [ ! -f "$SRC" ]; then
  echo "# generating $SRC with real torch.save"
  $PY "$PEERS/make_llama.py" "$SRC.tmp" "$HIDDEN" "$LAYERS" && mv "$SRC.tmp" "$SRC"
fi
Z="$DIR/llama_${HIDDEN}_${LAYERS}.zero2m_$WORLD"
if [ ! -f "$Z/latest" ]; then
  echo "# writing $Z (ZeRO-2 with Adam's moments, world $WORLD) the way DeepSpeed saves"
  rm -rf "$Z.tmp"
  $PY "$HERE/../tests/deepspeed/make_zero.py" "$Z.tmp" --stage 2 --world "$WORLD" --from "$SRC" && mv "$Z.tmp" "$Z"
fi
. "$HERE/measure.sh"
TAG=$(cat "$Z/latest")
OPTF=$(ls "$Z/$TAG"/*optim_states.pt)
echo "# ZeRO-2 input: $Z ($(du -sb "$Z" | cut -f1) bytes; optimizer files $(cat $OPTF | wc -c) bytes in $(echo "$OPTF" | wc -l) files), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| step | wall | peak RSS |"
echo "|---|---:|---:|"
mkdir -p "$DIR/kz"
measure "in-kernel copy of the optimizer files (kcopy.py)" "$DIR/kz/x" sh -c 'mkdir -p "$1" && shift && exec "$@"' sh "$DIR/kz/x" $PY "$HERE/kcopy.py" $OPTF "$DIR/kz/x"
measure "tpconv convert zero2 --optimizer -o optimizer.pt" "$DIR/optimizer.pt" "$TPCONV" convert "$Z" --optimizer -o "$DIR/optimizer.pt" -q
measure "tpconv convert zero2 --optimizer --format dcp --dcp-ranks 2" "$DIR/optim.dcp" "$TPCONV" convert "$Z" --optimizer --format dcp --dcp-ranks 2 -o "$DIR/optim.dcp" -q
measure "tpconv convert zero2 --format ds-universal (fp32 masters and both moments, a file each per parameter)" "$DIR/optim.universal" "$TPCONV" convert "$Z" --format ds-universal --preset llama -o "$DIR/optim.universal" -q
measure "tpconv shard zero2 --optimizer --layout megatron-dist --tp 2 (Megatron's iter_N/ folder with Adam's state, fully_reshardable)" "$DIR/optim.mcore" "$TPCONV" shard "$Z" --preset llama --heads $((HIDDEN / 128)) --kv-heads $((HIDDEN / 512)) --head-dim 128 --tp 2 --layout megatron-dist --optimizer --megatron-train global-batch-size=8 -o "$DIR/optim.mcore" -q
rmdir "$DIR/kz" 2>/dev/null || true
