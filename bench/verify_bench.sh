#!/usr/bin/env bash
# make bench, verify part: `tpconv verify` on the CPU (threads backend, every
# check: structure, layers, blocks, model) of the 4.74 GB LLaMA-shaped
# float32 checkpoint (hidden 2048, 24 layers, vocab 32000) sharded at tp 4 by
# `tpconv shard`, with wall time and peak RSS. Prints a markdown table row;
# BENCHMARKS.md records a run.
# usage: verify_bench.sh path/to/tpconv   (env: BENCH_DIR, HIDDEN=2048, LAYERS=24, TP=4, TOKENS=8)
set -eu
TPCONV=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HERE/../../shared/bench}
DIR=${BENCH_DIR:-$HERE/../build/bench}
HIDDEN=${HIDDEN:-2048} LAYERS=${LAYERS:-24} TP=${TP:-4} TOKENS=${TOKENS:-8}
mkdir -p "$DIR"
SRC="$DIR/llama_${HIDDEN}_${LAYERS}.bin"
if [ ! -f "$SRC" ]; then
  echo "# generating $SRC with real torch.save ($PEERS/make_llama.py $HIDDEN $LAYERS)"
  /usr/bin/python3 "$PEERS/make_llama.py" "$SRC.tmp" "$HIDDEN" "$LAYERS" && mv "$SRC.tmp" "$SRC"
fi
# make_llama.py: 128-wide heads, 4 query heads per KV head
NH=$((HIDDEN / 128)); [ "$NH" -ge 1 ] || NH=1
KV=$((NH / 4)); [ "$KV" -ge 1 ] || KV=1
CFG="$DIR/verify_config.json"
printf '{"hidden_size": %d, "num_attention_heads": %d, "num_key_value_heads": %d, "head_dim": 128, "num_hidden_layers": %d, "vocab_size": 32000}\n' \
  "$HIDDEN" "$NH" "$KV" "$LAYERS" > "$CFG"
SET="$DIR/verify_tp$TP"
rm -rf "$SET"
"$TPCONV" shard "$SRC" --config "$CFG" --preset llama --tp "$TP" -o "$SET" -q
cat "$SRC" "$SET"/*.safetensors > /dev/null   # page cache warm, as for the other steps
/usr/bin/time -f "%e %M" -o "$DIR/verify_time.txt" \
  "$TPCONV" verify --reference "$SRC" --shards "$SET" --config "$CFG" --tokens "$TOKENS" \
  --json "$DIR/verify.json" > "$DIR/verify_table.txt" 2>&1 || {
  echo "FAILED: verify"; tail -n 30 "$DIR/verify_table.txt"; exit 1; }
read -r secs rss < "$DIR/verify_time.txt"
printf '| tpconv verify, %s bytes, tp %s, %s tokens, threads on cpu | %s s | %s MiB | %s |\n' \
  "$(stat -c %s "$SRC")" "$TP" "$TOKENS" "$secs" "$((rss / 1024))" "$(tail -n 1 "$DIR/verify_table.txt" | sed 's/^# //')"
grep -E '^  model' "$DIR/verify_table.txt" | sed 's/^/# /'
rm -rf "$SET"
