#!/usr/bin/env bash
# make bench: Hugging Face -> Megatron-Core torch_dist of a mixture of experts
# at TP 4 x PP 2 x EP 2 (issue 44), `tpconv shard MOE --preset mixtral --tp 4
# --pp 2 --ep 2 --layout megatron-dist -o OUT`, timed as floor.sh times its
# steps: right after an in-kernel copy (copy_file_range, bench/kcopy.py) of the
# model's safetensors files in the same run, with a `sync` after each, REPS
# times (fastest wall kept, largest peak RSS kept). Issue 44's goals: at most
# 1.2x the copy, peak RSS at most 256 MB.
# The model: a real-data Mixtral-shaped bf16 folder made once by
# bench/make_moe_hf.py (one safetensors file per layer, an index, config.json;
# hidden 1024, ffn 3584, 16 layers, 8 experts, 16 heads / 4 kv heads, vocab
# 32000: 2.89 GB at the defaults), reused by later runs.
# Prints a markdown table; writes nothing into BENCHMARKS.md (run it on a
# quiet machine and paste the table).
# usage: mdist_bench.sh path/to/tpconv
#   env: BENCH_DIR, REPS=2, TP=4 PP=2 EP=2, HIDDEN=1024 FFN=3584 LAYERS=16
#   EXPERTS=8 VOCAB=32000 (small ones make a quick proof run:
#   HIDDEN=256 FFN=512 LAYERS=4 VOCAB=1024)
set -eu
TPCONV=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${BENCH_DIR:-$HERE/../build/bench}
REPS=${REPS:-2} TP=${TP:-4} PP=${PP:-2} EP=${EP:-2}
HIDDEN=${HIDDEN:-1024} FFN=${FFN:-3584} LAYERS=${LAYERS:-16} EXPERTS=${EXPERTS:-8} VOCAB=${VOCAB:-32000}
HEADS=${HEADS:-16} KV=${KV:-4}
PY=/usr/bin/python3
mkdir -p "$DIR"
DIR=$(realpath "$DIR")
MOE="$DIR/mixtral_${HIDDEN}_${FFN}_${LAYERS}_${EXPERTS}_${VOCAB}" OUT="$DIR/mdist.out" KOUT="$DIR/mdist.kcopy"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

if [ ! -f "$MOE/model.safetensors.index.json" ]; then
  echo "# generating $MOE ($HERE/make_moe_hf.py)"
  rm -rf "$MOE.tmp"
  $PY "$HERE/make_moe_hf.py" "$MOE.tmp" "$HIDDEN" "$FFN" "$LAYERS" "$EXPERTS" "$HEADS" "$KV" "$VOCAB"
  mv "$MOE.tmp" "$MOE"
fi
FILES=$(ls "$MOE"/*.safetensors)
BYTES=$(cat $FILES | wc -c)
SIZE=$(awk "BEGIN{printf \"%.2f GB\", $BYTES / 1e9}")

# timed LABEL OUTPUT CMD...: SECS (fastest of REPS), RSS (KiB, largest); the
# model read into the page cache before each (untimed), as floor.sh's WARM
# (and USR, SYS: the CPU seconds of the fastest repetition)
timed() {
  local label=$1 out=$2 r s m u y; shift 2
  SECS="" RSS=0 USR="" SYS=""
  for r in $(seq "$REPS"); do
    rm -rf "$out"
    cat $FILES >/dev/null
    sync
    /usr/bin/time -f "%e %M %U %S" -o "$DIR/time.txt" sh -c '"$@" && sync' sh "$@" >"$DIR/cmd.log" 2>&1 ||
      { echo "FAILED: $label"; cat "$DIR/cmd.log"; exit 1; }
    read -r s m u y <"$DIR/time.txt"
    if [ -z "$SECS" ] || awk "BEGIN{exit !($s < $SECS)}"; then SECS=$s USR=$u SYS=$y; fi
    if [ "$m" -gt "$RSS" ]; then RSS=$m; fi
  done
}
echo "# megatron-dist bench: $(nproc) cores, load $LOAD0, OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}"
timed "in-kernel copy" "$KOUT" sh -c 'mkdir "$1" && shift && exec "$@"' sh "$KOUT" $PY "$HERE/kcopy.py" $FILES "$KOUT"
KC=$SECS KRSS=$RSS KU=$USR KS=$SYS
rm -rf "$KOUT"
timed "shard --layout megatron-dist" "$OUT" "$TPCONV" shard "$MOE" --preset mixtral --tp "$TP" --pp "$PP" --ep "$EP" \
  --layout megatron-dist -o "$OUT" -q
MS=$SECS MRSS=$RSS MU=$USR MSY=$SYS
NF=$(ls "$OUT/release" | grep -c '\.distcp$') OB=$(cat "$OUT"/release/*.distcp | wc -c)
rm -rf "$OUT"
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
echo
echo "| step ($SIZE bf16 Mixtral-shaped, $EXPERTS experts, $LAYERS layers) | wall s | x copy (goal <= 1.2) | peak RSS MiB (goal <= 256) | user s | sys s |"
echo "|---|---:|---:|---:|---:|---:|"
awk -v kc="$KC" -v krss="$KRSS" -v ms="$MS" -v mrss="$MRSS" -v tp="$TP" -v pp="$PP" -v ep="$EP" -v nf="$NF" -v ob="$OB" \
    -v ku="$KU" -v ks="$KS" -v mu="$MU" -v msy="$MSY" 'BEGIN {
  printf "| in-kernel copy of the safetensors files | %.2f | 1.00 | %.0f | %.2f | %.2f |\n", kc, krss / 1024, ku, ks
  printf "| tpconv shard --tp %s --pp %s --ep %s --layout megatron-dist (%d .distcp, %.2f GB) | %.2f | %.2f | %.0f | %.2f | %.2f |\n", tp, pp, ep, nf, ob / 1e9, ms, ms / kc, mrss / 1024, mu, msy
}'
echo
echo "load before $LOAD0, after $LOAD1"
