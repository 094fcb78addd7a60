#!/usr/bin/env bash
# make bench: model merging (merge --recipe: linear, task_arithmetic, ties,
# dare_ties, breadcrumbs_ties, della, model_stock, slerp) of three bf16 models of TENSORS
# 4096x4096 weights each (default 8: 256 MiB a model) against an in-kernel
# copy (copy_file_range) of one model's bytes, the output's size. Prints a
# markdown table of wall time, peak RSS and the ratio to the copy.
# usage: mix_bench.sh path/to/tpconv   (env: BENCH_DIR, TENSORS=8, DIM=4096, REPS=2)
set -eu
TPCONV=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${BENCH_DIR:-$HERE/../build/bench}/mix
TENSORS=${TENSORS:-8} DIM=${DIM:-4096} REPS=${REPS:-2}
PY=/usr/bin/python3
mkdir -p "$DIR"
for m in base m1 m2; do
  [ -f "$DIR/$m.safetensors" ] && continue
  $PY - "$DIR/$m.safetensors" "$TENSORS" "$DIM" "$m" <<'PY'
import json, struct, sys, zlib
import numpy as np
path, n, d, name = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(zlib.crc32(name.encode()))
hdr, off = {}, 0
for i in range(n):
    hdr[f"model.layers.{i}.mlp.up_proj.weight"] = {"dtype": "BF16", "shape": [d, d], "data_offsets": [off, off + d * d * 2]}
    off += d * d * 2
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
with open(path + ".tmp", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for i in range(n):
        x = (rng.standard_normal((d, d), dtype=np.float32) * 0.02).view(np.uint32)
        f.write((x >> 16).astype(np.uint16).tobytes())
import os
os.rename(path + ".tmp", path)
PY
done
RESULTS="$DIR/results.tsv"
: >"$RESULTS"
measure() { # LABEL CMD...: fastest wall s and largest RSS KiB of REPS runs, each with a sync
  local label=$1 best="" rss=0 secs m
  shift
  for _ in $(seq "$REPS"); do
    rm -f "$DIR/out.safetensors" "$DIR/k.safetensors"
    sync
    /usr/bin/time -f "%e %M" -o "$DIR/time.txt" sh -c '"$@" && sync' sh "$@" >"$DIR/cmd.log" 2>&1 ||
      { echo "FAILED: $label"; cat "$DIR/cmd.log"; exit 1; }
    read -r secs m <"$DIR/time.txt"
    if [ -z "$best" ] || awk "BEGIN{exit !($secs < $best)}"; then best=$secs; fi
    [ "$m" -gt "$rss" ] && rss=$m
  done
  printf '%s\t%s\t%s\n' "$label" "$best" "$rss" | tee -a "$RESULTS"
}
recipe() { # METHOD EXTRA-PARAMS
  printf 'models:\n  - model: %s/m1.safetensors\n    parameters: {weight: 0.5%s}\n  - model: %s/m2.safetensors\n    parameters: {weight: 0.5%s}\nbase_model: %s/base.safetensors\nmerge_method: %s\n' \
    "$DIR" "$2" "$DIR" "$2" "$DIR" "$1" >"$DIR/$1.yaml"
}
printf 'models:\n  - model: %s/base.safetensors\n    parameters: {weight: 0.2}\n  - model: %s/m1.safetensors\n    parameters: {weight: 0.5}\n  - model: %s/m2.safetensors\n    parameters: {weight: 0.3}\nmerge_method: linear\n' \
  "$DIR" "$DIR" "$DIR" >"$DIR/linear.yaml"
recipe task_arithmetic ""
recipe ties ", density: 0.5"
recipe dare_ties ", density: 0.5"
recipe breadcrumbs_ties ", density: 0.5"
recipe della ", density: 0.5"
recipe model_stock ""
sed -i 's/{weight: 0.5}/{}/' "$DIR/model_stock.yaml"
printf 'models:\n  - model: %s/base.safetensors\n  - model: %s/m1.safetensors\nbase_model: %s/base.safetensors\nmerge_method: slerp\nparameters: {t: 0.3}\n' "$DIR" "$DIR" "$DIR" >"$DIR/slerp.yaml"
measure "kcopy one model (${TENSORS}x ${DIM}x${DIM} bf16)" $PY "$HERE/kcopy.py" "$DIR/base.safetensors" "$DIR/k.safetensors"
for m in linear task_arithmetic ties dare_ties breadcrumbs_ties della model_stock slerp; do
  measure "tpconv merge --recipe $m (3 models; slerp 2)" "$TPCONV" merge --recipe "$DIR/$m.yaml" -o "$DIR/out.safetensors" -f -q
done
rm -f "$DIR/out.safetensors" "$DIR/k.safetensors"
echo
echo "| step | wall s | x kcopy | peak RSS MiB |"
echo "|---|---:|---:|---:|"
awk -F'\t' 'NR == 1 {k = $2} {printf "| %s | %.2f | %.1f | %.0f |\n", $1, $2, $2 / k, $3 / 1024}' "$RESULTS"
