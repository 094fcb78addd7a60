#!/usr/bin/env bash
# make bench, verify part: `tpconv verify` on the CPU (threads backend, every
# check: structure with checksums, layers, blocks, model) of the 4.74 GB
# LLaMA-shaped float32 checkpoint (hidden 2048, 24 layers, vocab 32000)
# sharded by `tpconv shard` at tp 4 and 8, each beside the in-kernel copy
# (copy_file_range, bench/kcopy.py) of the same bytes, the reference and the
# set, measured in the same run. Both are timed with a sync after, page cache
# warm (the reference and the set read before each repetition, untimed), REPS
# times (default 2), fastest kept with its user and system time, largest peak
# RSS kept. Prints a markdown table; BENCHMARKS.md records a run. Targets
# (issue 35): verify at most 1.3x the copy, 6 s of user time, 256 MiB.
# usage: verify_bench.sh path/to/tpconv
#   env: BENCH_DIR, REPS=2, TPS="4 8", HIDDEN=2048, LAYERS=24, TOKENS=8
set -eu
TPCONV=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HERE/../../shared/bench}
DIR=${BENCH_DIR:-$HERE/../build/bench}
HIDDEN=${HIDDEN:-2048} LAYERS=${LAYERS:-24} TOKENS=${TOKENS:-8} REPS=${REPS:-2} TPS=${TPS:-4 8}
PY=/usr/bin/python3
mkdir -p "$DIR"
DIR=$(realpath "$DIR")
SRC="$DIR/llama_${HIDDEN}_${LAYERS}.bin"
if [ ! -f "$SRC" ]; then
  echo "# generating $SRC with real torch.save ($PEERS/make_llama.py $HIDDEN $LAYERS)"
  $PY "$PEERS/make_llama.py" "$SRC.tmp" "$HIDDEN" "$LAYERS" && mv "$SRC.tmp" "$SRC"
fi
# make_llama.py: 128-wide heads, 4 query heads per KV head
NH=$((HIDDEN / 128)); [ "$NH" -ge 1 ] || NH=1
KV=$((NH / 4)); [ "$KV" -ge 1 ] || KV=1
CFG="$DIR/verify_config.json"
printf '{"hidden_size": %d, "num_attention_heads": %d, "num_key_value_heads": %d, "head_dim": 128, "num_hidden_layers": %d, "vocab_size": 32000}\n' \
  "$HIDDEN" "$NH" "$KV" "$LAYERS" > "$CFG"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

# timed OUT CMD...: SECS USR SYS of the fastest of REPS runs (each followed by
# a sync, OUT removed before each), RSS the largest (KiB); the reference and
# the set ($WARM) read into the page cache before each, untimed
timed() {
  local out=$1 r s m u y; shift
  SECS="" RSS=0 USR="" SYS=""
  for r in $(seq "$REPS"); do
    [ -z "$out" ] || rm -rf "$out"
    cat $WARM > /dev/null
    sync
    /usr/bin/time -f "%e %M %U %S" -o "$DIR/time.txt" sh -c '"$@" && sync' sh "$@" > "$DIR/cmd.log" 2>&1 ||
      { echo "FAILED: $*"; tail -n 30 "$DIR/cmd.log"; exit 1; }
    read -r s m u y < "$DIR/time.txt"
    if [ -z "$SECS" ] || awk "BEGIN{exit !($s < $SECS)}"; then SECS=$s USR=$u SYS=$y; fi
    if [ "$m" -gt "$RSS" ]; then RSS=$m; fi
  done
  [ -z "$out" ] || rm -rf "$out"
}

ROWS="$DIR/verify_rows.tsv"
: > "$ROWS"
for TP in $TPS; do
  SET="$DIR/verify_tp$TP"
  rm -rf "$SET"
  "$TPCONV" shard "$SRC" --config "$CFG" --preset llama --tp "$TP" -o "$SET" -q
  WARM="$SRC $SET/*.safetensors"
  BYTES=$(cat $WARM | wc -c)
  timed "$DIR/kc" sh -c 'mkdir -p "$1/kc" && for f in $2; do '"$PY"' "$3" "$f" "$1/kc/$(basename "$f")"; done' \
    sh "$DIR" "$WARM" "$HERE/kcopy.py"
  KC=$SECS
  timed "" "$TPCONV" verify --reference "$SRC" --shards "$SET" --config "$CFG" --tokens "$TOKENS" --json "$DIR/verify.json"
  cp "$DIR/cmd.log" "$DIR/verify_table_tp$TP.txt"
  printf 'verify tp %s, %s tokens, all checks (%s)\t%s\t%s\t%s\t%s\t%s\t%s\n' "$TP" "$TOKENS" \
    "$(tail -n 1 "$DIR/cmd.log" | sed 's/^tpconv: verify: //; s/, max rel.*//')" "$SECS" "$KC" "$USR" "$SYS" "$RSS" "$BYTES" |
    tee -a "$ROWS"
  rm -rf "$SET"
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
echo
echo "# $(nproc) cores, load average $LOAD0 at the start and $LOAD1 at the end; tpconv $("$TPCONV" --version | awk '{print $NF}'), REPS=$REPS (fastest kept), every step followed by a sync"
echo "| step | wall s | in-kernel copy of reference + set s | ratio (target 1.3x) | user s (target 6) | sys s | peak RSS MiB (target 256) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
awk -F'\t' '{ r = $2 / $3; printf "| %s | %.2f | %.2f (%.2f GB) | %.2fx%s | %.2f%s | %.2f | %.0f%s |\n", $1, $2, $3, $7 / 1e9, r,
  r <= 1.3 ? "" : " **missed**", $4, $4 <= 6 ? "" : " **missed**", $5, $6 / 1024, $6 < 262144 ? "" : " **missed**" }' "$ROWS"
