#!/usr/bin/env bash
# make bench, second part: tpconv against the floor. Every step runs right
# after an in-kernel copy (copy_file_range, bench/kcopy.py) of the same bytes,
# in the same run, and its ratio to that copy is what counts:
#   convert  torch zip -> safetensors         (copy: the torch file)
#   shard    safetensors -> tp 2, 4, 8        (copy: the safetensors file)
#   merge    tp 2, 4, 8 -> safetensors        (copy: the safetensors file)
#   reshard  tp 2 -> 4, 4 -> 8, 8 -> 2        (copy: the safetensors file)
#   shard    of a model larger than RAM: LLaMA-13B shape, bf16, 26 GB
#            (bench/make_big_st.py), tp 8; skipped with a message when
#            BENCH_DIR has less than 60 GB free, or with BIG=0
# Beside the in-kernel copy, each group also times the direct-write copy of
# the same bytes (bench/dcopy.c: pread into huge-page buffers, O_DIRECT
# writes through an AIO queue, fsync), which takes no new page cache: the
# in-kernel copy's first touch of new memory moves with the host (3.3 s one
# hour, 5.5-10.9 s another, for the same 4.74 GB), the direct copy much
# less, so the second ratio is the step's own cost over the disk's.
# on the 4.74 GB LLaMA-shaped float32 checkpoint of bench.sh (hidden 2048, 24
# layers), checksums on (the default, xxh3-128). Each step is timed with a
# `sync` after it, REPS times (default 2), fastest kept, largest peak RSS kept.
# The table goes to stdout and into BENCHMARKS.md between the
# "floor-bench" markers, with the date, the machine and its load.
# usage: floor.sh path/to/tpconv
#   env: BENCH_DIR, REPS, BIG=0|1, BENCH_MD, HIDDEN=2048 LAYERS=24 (the model)
set -eu
TPCONV=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HERE/../../shared/bench}
DIR=${BENCH_DIR:-$HERE/../build/bench}
MD=${BENCH_MD:-$HERE/../BENCHMARKS.md}
REPS=${REPS:-2} BIG=${BIG:-auto}
PY=/usr/bin/python3
mkdir -p "$DIR"
DIR=$(realpath "$DIR")
HIDDEN=${HIDDEN:-2048} LAYERS=${LAYERS:-24}
SRC="$DIR/llama_${HIDDEN}_${LAYERS}.bin" ST="$DIR/llama_${HIDDEN}_${LAYERS}.safetensors"
NH=$((HIDDEN / 128)); KV=$((NH / 4)); [ "$KV" -ge 1 ] || KV=1
FACTS=(--preset llama --heads "$NH" --kv-heads "$KV" --head-dim 128 --vocab 32000)
SIZE=$(awk "BEGIN{printf \"%.2f GB\", $( [ -f "$SRC" ] && stat -c %s "$SRC" || echo 0 ) / 1e9}")
ROWS="$DIR/floor.tsv"
: > "$ROWS"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

if [ ! -f "$SRC" ]; then
  echo "# generating $SRC with real torch.save ($PEERS/make_llama.py $HIDDEN $LAYERS)"
  $PY "$PEERS/make_llama.py" "$SRC.tmp" "$HIDDEN" "$LAYERS" && mv "$SRC.tmp" "$SRC"
  SIZE=$(awk "BEGIN{printf \"%.2f GB\", $(stat -c %s "$SRC") / 1e9}")
fi

# timed LABEL OUTPUT CMD...: sets SECS (fastest of REPS) and RSS (KiB, largest)
# WARM, when set, names files read into the page cache before each repetition
# (untimed): the floor copy reads a file that is in the page cache, and so
# does every step. A set written with direct writes (lib/tpc_io.c) is not in
# the page cache after the shard that wrote it; a buffered one was.
timed() {
  local label=$1 out=$2 r s m u y; shift 2
  SECS="" RSS=0 USR="" SYS=""
  for r in $(seq "$REPS"); do
    [ -z "$out" ] || rm -rf "$out"
    [ -z "${WARM:-}" ] || cat $WARM >/dev/null
    sync
    /usr/bin/time -f "%e %M %U %S" -o "$DIR/time.txt" sh -c '"$@" && sync' sh "$@" >"$DIR/cmd.log" 2>&1 ||
      { echo "FAILED: $label"; cat "$DIR/cmd.log"; exit 1; }
    read -r s m u y <"$DIR/time.txt"
    if [ -z "$SECS" ] || awk "BEGIN{exit !($s < $SECS)}"; then SECS=$s USR=$u SYS=$y; fi
    if [ "$m" -gt "$RSS" ]; then RSS=$m; fi
  done
}
# evict FILE: drop FILE's pages from the page cache (clean pages only)
evict() {
  $PY -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"
}
# floor FILE: the in-kernel copy of FILE's bytes, into KC, and the
# direct-write copy, into DC ("" when dcopy could not be built or run)
DCOPY="$DIR/dcopy"
cc -O2 -o "$DCOPY" "$HERE/dcopy.c" 2>/dev/null || DCOPY=""
floor() {
  timed "in-kernel copy" "$DIR/kcopy.out" $PY "$HERE/kcopy.py" "$1" "$DIR/kcopy.out"
  KC=$SECS
  rm -f "$DIR/kcopy.out"
  DC=""
  if [ -n "$DCOPY" ]; then
    if (timed "direct copy" "$DIR/dcopy.out" "$DCOPY" "$1" "$DIR/dcopy.out" && echo "$SECS" >"$DIR/dc.txt"); then
      DC=$(cat "$DIR/dc.txt")
    fi
    rm -f "$DIR/dcopy.out" "$DIR/dc.txt"
  fi
}
# step LABEL TARGET OUTPUT CMD...: timed against the last floor; one row
step() {
  local label=$1 target=$2 out=$3; shift 3
  timed "$label" "$out" "$@"
  local ratio
  ratio=$(awk "BEGIN{printf \"%.2f\", $SECS / $KC}")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$SECS" "$KC" "$ratio" "$RSS" "$USR" "$SYS" "$target" "$DC" | tee -a "$ROWS"
}

echo "# floor bench: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), load $LOAD0"
floor "$SRC"
# the old output goes before each repetition, as the copy's does: replacing
# it inside the timed run would free 4.74 GB of its page cache there
step "convert torch zip -> safetensors, $SIZE" 1.2 "$ST" "$TPCONV" convert "$SRC" -o "$ST"
# the torch file is not read again: out of the page cache with it, so the
# steps below are not slowed by reclaim (24 GiB holds the safetensors file,
# a set and a merged file, not a fourth 4.7 GB file as well)
evict "$SRC"
prev=""
for tp in 2 4 8; do
  next=$((tp == 8 ? 2 : tp * 2))
  floor "$ST"
  step "shard safetensors -> tp $tp (xxh3-128)" 1.2 "$DIR/set$tp" "$TPCONV" shard "$ST" --tp $tp "${FACTS[@]}" -o "$DIR/set$tp"
  # the last repetition's set stays for the merge and the reshard
  WARM="$DIR/set$tp/*.safetensors" step "merge tp $tp -> safetensors (checksums checked)" 1.2 "$DIR/merged.safetensors" \
    "$TPCONV" merge "$DIR/set$tp" -o "$DIR/merged.safetensors" -f
  rm -f "$DIR/merged.safetensors"
  WARM="$DIR/set$tp/*.safetensors" step "reshard tp $tp -> tp $next" 1.2 "$DIR/re$next" "$TPCONV" shard "$DIR/set$tp" --tp $next "${FACTS[@]}" -o "$DIR/re$next"
  rm -rf "$DIR/set$tp" "$DIR/re$next"
done

# the larger-than-RAM model
BIGST="$DIR/llama13b_bf16.safetensors"
free_gb=$(df -P -B1G "$DIR" | awk 'NR==2{print $4}')
have=$([ -f "$BIGST" ] && echo 1 || echo 0)
if [ "$BIG" = 0 ]; then
  echo "# skipped: shard of the 26 GB model (BIG=0)"
  printf 'shard of the 26 GB bf16 model, tp 8\tskipped (BIG=0)\n' >>"$ROWS"
elif [ "$have" = 0 ] && [ "$free_gb" -lt 60 ]; then
  echo "# skipped: shard of the 26 GB model needs 60 GB free in $DIR, found $free_gb GB"
  printf 'shard of the 26 GB bf16 model, tp 8\tskipped (%s GB free, needs 60)\n' "$free_gb" >>"$ROWS"
else
  [ "$have" = 1 ] || $PY "$HERE/make_big_st.py" "$BIGST"
  floor "$BIGST"
  step "shard 26 GB bf16 LLaMA-13B shape -> tp 8 (larger than RAM)" 1.3 "$DIR/big8" \
    "$TPCONV" shard "$BIGST" --tp 8 --preset llama --heads 40 --kv-heads 40 --head-dim 128 --vocab 32000 -o "$DIR/big8"
  rm -rf "$DIR/big8"
  [ -n "${KEEP_BIG:-}" ] || rm -f "$BIGST"
fi
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

table() {
  echo "| step | wall s | in-kernel copy s | ratio | target | peak RSS MiB | user s | sys s | direct copy s | ratio to it |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  awk -F'\t' '
    NF < 8 { printf "| %s | %s | | | | | | | | |\n", $1, $2; next }
    { ok = ($4 <= $8 && $5 < 262144) ? "" : " **missed**"
      dc = ($9 != "" && $9 > 0) ? sprintf("%.2f | %.2fx", $9, $2 / $9) : " | "
      printf "| %s | %.2f | %.2f | %.2fx | %sx%s | %.0f | %.2f | %.2f | %s |\n", $1, $2, $3, $4, $8, ok, $5/1024, $6, $7, dc }' "$ROWS"
}
echo
table | tee "$DIR/floor.md"
{
  echo "<!-- floor-bench:begin (bench/floor.sh writes this section) -->"
  echo "### Against the in-kernel copy: run of $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "$(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM, load average $LOAD0 at the start and $LOAD1 at the end;"
  echo "tpconv $("$TPCONV" --version 2>/dev/null | head -1 | awk '{print $NF}'), REPS=$REPS (fastest kept), every step followed by a sync."
  echo "Targets: ratio to the in-kernel copy of the same bytes measured just before, and peak RSS under 256 MiB."
  echo "The direct copy (bench/dcopy.c) of the same bytes, measured beside it, is the disk's own time: no target, the step's own cost."
  if [ -r /sys/module/page_reporting/parameters/page_reporting_order ]; then
    echo "This VM returns freed memory to its host (virtio-balloon free page reporting, order"
    echo "$(cat /sys/module/page_reporting/parameters/page_reporting_order)): a page touched again after that costs a host fault, so every"
    echo "step's first touch of new page cache varies from run to run (see \"Why the floor moves\")."
  fi
  echo
  table
  echo "<!-- floor-bench:end -->"
} >"$DIR/floor.section"
if grep -q '^<!-- floor-bench:begin' "$MD"; then
  awk -v f="$DIR/floor.section" '
    /^<!-- floor-bench:begin/ { while ((getline l < f) > 0) print l; skip = 1; next }
    /^<!-- floor-bench:end/ { skip = 0; next }
    !skip' "$MD" >"$MD.tmp" && mv "$MD.tmp" "$MD"
else
  { echo; cat "$DIR/floor.section"; } >>"$MD"
fi
echo "# written to $MD"
