#!/usr/bin/env bash
# make bench (Megatron optimizer state): the distributed optimizer's state of
# a LLaMA-shaped GPT (SwiGLU, GQA, untied output layer) read from Megatron's
# saves and written as the `optimizer.pt` torch.optim loads
# (`tpconv convert SAVE --optimizer -o optimizer.pt`) and as a 2-rank DCP
# folder (`--optimizer --format dcp --dcp-ranks 2`), for each form:
#   dpr     torch_dist, dp_reshardable (Megatron's default since 0.13: the
#           buckets as flat tensors; formats/megatron_dp_optim.c)
#   reshard torch_dist, fully_reshardable (model-space tensors;
#           formats/megatron_optim.c)
#   dpz     torch_dist, dp_zero_gather_scatter (Megatron 0.8-0.12's default
#           without --ckpt-fully-parallel-save: each DP group's buffers
#           gathered and torch.save'd in one ShardedObject;
#           formats/megatron_dp_optim.c with the legacy reader's layout)
#   fsms    torch_dist, fully_sharded_model_space (flattened model-space
#           ranges; formats/megatron_optim.c)
#   legacy  a legacy tp 2 x pp 2 set, model_optim_rng.pt + distrib_optim.pt per
#           rank (formats/megatron_legacy_optim.c, shard/tpc_merge_optim.c)
# Each beside an in-kernel copy (copy_file_range, bench/kcopy.py) of the
# files holding the save's optimizer bytes, in the same run, a sync after each
# step, the input read into the page cache before each (untimed), REPS times
# (fastest wall kept, largest peak RSS kept; bench/measure.sh's rule). For a
# torch_dist save those files are the .distcp files (optimizer state and the
# bf16 model interleaved: 12 of every 14 bytes are the optimizer's); for the
# legacy set the distrib_optim.pt files (the optimizer state alone; tpconv
# also reads each rank's model_optim_rng.pt for the parameter order).
# The saves are written once, untimed, and kept in BENCH_DIR:
# tests/dcp/make_megatron_optim.py (real torch 2.14 DCP on gloo processes, in
# make interop's forky chroot: needs root and tests/interop/chroot.sh's
# chroot; without them, and no save kept from an earlier run, those rows are
# skipped with a WARNING) and tests/dcp/make_megatron_legacy_optim.py
# (Debian's torch 1.13, /usr/bin/python3, no root). The timed part needs no
# root.
# Prints a markdown table; writes nothing into BENCHMARKS.md (run it on a
# quiet machine and paste the table).
# usage: mcore_optim_bench.sh path/to/tpconv
#   env: BENCH_DIR, REPS=2, FORMS="dpr reshard dpz fsms legacy",
#   HIDDEN=1024 LAYERS=8 FFN=2816 VOCAB=32000 HEADS=8 KV=2 (query groups;
#   head dim 128, 4 query heads per group: 156 M parameters, 1.87 GB of
#   optimizer state, about 2.2 GB per save), TP=2 DP=2 (pp 1; the legacy set
#   pp 2), BUCKET=40000000 (--ddp-bucket-size: Megatron's default for
#   dp <= 40 with --overlap-grad-reduce, max(40000000, 1000000 x dp):
#   distributed_data_parallel.py's __init__, training.py
#   resolve_ddp_bucket_size at Megatron-LM 60e039626), ICHROOT (default
#   /var/cache/tpconv-interop/forky).
#   A quick proof run: HIDDEN=256 LAYERS=2 FFN=704 VOCAB=1024 HEADS=2 REPS=1
set -eu
TPCONV=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
SRCDIR=$(cd "$HERE/.." && pwd)
DIR=${BENCH_DIR:-$SRCDIR/build/bench}
REPS=${REPS:-2} FORMS=${FORMS:-dpr reshard dpz fsms legacy}
HIDDEN=${HIDDEN:-1024} LAYERS=${LAYERS:-8} FFN=${FFN:-2816} VOCAB=${VOCAB:-32000}
HEADS=${HEADS:-8} KV=${KV:-2} TP=${TP:-2} DP=${DP:-2} BUCKET=${BUCKET:-40000000}
ICHROOT=${ICHROOT:-/var/cache/tpconv-interop/forky}
PY=/usr/bin/python3
mkdir -p "$DIR"
DIR=$(realpath "$DIR")
M="$DIR/mcore_optim_${HIDDEN}_${LAYERS}_${FFN}_${VOCAB}_${HEADS}_${KV}_tp${TP}dp${DP}_b${BUCKET}"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
# the generators' size variables (make_megatron_optim.py's header)
GENV="MEGATRON_OPTIM_HIDDEN=$HIDDEN MEGATRON_OPTIM_LAYERS=$LAYERS MEGATRON_OPTIM_FFN=$FFN"
GENV="$GENV MEGATRON_OPTIM_VOCAB=$VOCAB MEGATRON_OPTIM_HEADS=$HEADS MEGATRON_OPTIM_GROUPS=$KV"
GENV="$GENV MEGATRON_OPTIM_TP=$TP MEGATRON_OPTIM_DP=$DP MEGATRON_OPTIM_PP=1 MEGATRON_OPTIM_BUCKET=$BUCKET"

# ---- the saves (untimed, kept) ----
# save folder of a form: its generator's name for it
folder() { case $1 in legacy) echo "$M/megatron_optim_legacy_tp2pp2" ;; *) echo "$M/megatron_optim_$1" ;; esac; }
mounted=
TPCONV_INTEROP_ROOT=$ICHROOT . "$SRCDIR/tests/interop/chroot.sh"
cleanup() {
  # the chroot's mounts this bench made are undone (those make interop holds are left alone)
  [ -z "$mounted" ] || interop_umount "$ICHROOT"
  rm -rf "$ICHROOT/tmp/mcore-optim-bench.$$" 2>/dev/null || true
}
trap cleanup EXIT
skipped=
gen_mcore() { # FORM: make_megatron_optim.py in the chroot, then moved into $M
  local f=$1 why= G="$ICHROOT/tmp/mcore-optim-bench.$$"
  if [ "$(id -u)" != 0 ]; then why="not root (the chroot and its mounts need root)"
  elif ! interop_ready; then why="no complete forky chroot at $ICHROOT (tests/interop/chroot.sh setup)"
  fi
  if [ -n "$why" ]; then
    echo "mcore_optim_bench: WARNING: the $f rows are SKIPPED: $why; a save kept in $M from a root run would do" >&2
    skipped="$skipped $f"
    return 1
  fi
  if [ -z "$mounted" ] && ! mountpoint -q "$ICHROOT/proc"; then mounted=1; fi
  interop_mount "$ICHROOT" || { echo "FAILED: mounting proc and dev under $ICHROOT"; exit 1; }
  rm -rf "$G" && mkdir -p "$G" && cp "$SRCDIR/tests/dcp/make_megatron_optim.py" "$G/"
  echo "# writing $(folder "$f") with make_megatron_optim.py (torch 2.14 DCP, in $ICHROOT)"
  chroot "$ICHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 $GENV sh -c "cd '${G#"$ICHROOT"}' && python3 make_megatron_optim.py out $f" \
    >"$DIR/gen.log" 2>&1 || { echo "FAILED: make_megatron_optim.py $f"; tail -20 "$DIR/gen.log"; exit 1; }
  mkdir -p "$M" && rm -rf "$(folder "$f")" && mv "$G/out/megatron_optim_$f" "$(folder "$f")"
  rm -rf "$G"
}
gen_legacy() {
  echo "# writing $(folder legacy) with make_megatron_legacy_optim.py (torch 1.13)"
  rm -rf "$M/legacy.tmp" && mkdir -p "$M/legacy.tmp"
  env $GENV "$PY" "$SRCDIR/tests/dcp/make_megatron_legacy_optim.py" "$M/legacy.tmp" tp2pp2 >"$DIR/gen.log" 2>&1 ||
    { echo "FAILED: make_megatron_legacy_optim.py"; tail -20 "$DIR/gen.log"; exit 1; }
  mv "$M/legacy.tmp/megatron_optim_legacy_tp2pp2" "$(folder legacy)" && rmdir "$M/legacy.tmp"
}
ready=
for f in $FORMS; do
  S=$(folder "$f")
  if [ ! -f "$S/latest_checkpointed_iteration.txt" ]; then
    case $f in
    legacy) gen_legacy ;;
    dpr | reshard | dpz | fsms) gen_mcore "$f" || continue ;;
    *) echo "mcore_optim_bench: unknown form '$f' (dpr reshard legacy dpz fsms)" >&2; exit 2 ;;
    esac
  fi
  ready="$ready $f"
done
[ -z "$mounted" ] || { interop_umount "$ICHROOT"; mounted=; }

# ---- the timed part (no root) ----
# timed LABEL OUTPUT CMD...: SECS (fastest of REPS), RSS (KiB, largest), USR
# and SYS (CPU seconds of the fastest); $IN read into the page cache first
timed() {
  local label=$1 out=$2 r s m u y; shift 2
  SECS="" RSS=0 USR="" SYS=""
  for r in $(seq "$REPS"); do
    rm -rf "$out"
    cat $IN >/dev/null
    sync
    /usr/bin/time -f "%e %M %U %S" -o "$DIR/time.txt" sh -c '"$@" && sync' sh "$@" >"$DIR/cmd.log" 2>&1 ||
      { echo "FAILED: $label"; cat "$DIR/cmd.log"; exit 1; }
    read -r s m u y <"$DIR/time.txt"
    if [ -z "$SECS" ] || awk "BEGIN{exit !($s < $SECS)}"; then SECS=$s USR=$u SYS=$y; fi
    if [ "$m" -gt "$RSS" ]; then RSS=$m; fi
  done
}
row() { # LABEL: a table row from timed's numbers, the ratio to KC
  awk -v l="$1" -v s="$SECS" -v kc="$KC" -v m="$RSS" -v u="$USR" -v y="$SYS" \
    'BEGIN { printf "| %s | %.2f | %.2f | %.0f | %.2f | %.2f |\n", l, s, (kc > 0 ? s / kc : 0), m / 1024, u, y }'
}
gb() { awk -v b="$1" 'BEGIN { printf "%.2f GB", b / 1e9 }'; }
echo "# Megatron optimizer bench: hidden $HIDDEN, $LAYERS layers, ffn $FFN, vocab $VOCAB, $HEADS heads / $KV query groups," \
  "tp $TP x dp $DP (legacy tp 2 x pp 2), bucket $BUCKET; $(nproc) cores, load $LOAD0"
echo
echo "| step | wall s | x copy | peak RSS MiB | user s | sys s |"
echo "|---|---:|---:|---:|---:|---:|"
K="$DIR/mcore_optim.kcopy" O="$DIR/mcore_optim.pt" D="$DIR/mcore_optim.dcp"
for f in $ready; do
  S=$(folder "$f")
  T="$S/iter_0000007"
  if [ "$f" = legacy ]; then
    IN=$(ls "$T"/mp_rank_*/distrib_optim.pt) what="distrib_optim.pt"
    # kcopy.py names each copy after its source: links of distinct names
    rm -rf "$DIR/mcore_optim.links" && mkdir "$DIR/mcore_optim.links"
    for i in $IN; do ln -s "$i" "$DIR/mcore_optim.links/$(basename "$(dirname "$i")").pt"; done
    SRCS=$(ls "$DIR"/mcore_optim.links/*)
  else IN=$(ls "$T"/*.distcp) what=".distcp" SRCS=$IN; fi
  B=$(cat $IN | wc -c)
  timed "kcopy $f" "$K" sh -c 'mkdir "$1" && shift && exec "$@"' sh "$K" $PY "$HERE/kcopy.py" $SRCS "$K"
  KC=$SECS
  row "$f: in-kernel copy of the $(echo "$IN" | wc -l) $what files ($(gb "$B"))"
  rm -rf "$K"
  # a legacy set has no manifest: the model's preset and vocabulary, as
  # tests/dcp/megatron_optim_test.sh converts it
  X=""; [ "$f" != legacy ] || X="--preset llama --vocab $VOCAB"
  timed "$f -> optimizer.pt" "$O" "$TPCONV" convert "$S" --optimizer $X -o "$O" -q
  OB=$(stat -c %s "$O")
  row "$f: tpconv convert --optimizer -o optimizer.pt ($(gb "$OB"))"
  rm -f "$O"
  timed "$f -> dcp" "$D" "$TPCONV" convert "$S" --optimizer $X --format dcp --dcp-ranks 2 -o "$D" -q
  row "$f: tpconv convert --optimizer --format dcp --dcp-ranks 2"
  rm -rf "$D"
done
rm -rf "$DIR/mcore_optim.links"
[ -z "$skipped" ] || echo "| skipped (no save, no chroot):$skipped | | | | | |"
echo
echo "load before $LOAD0, after $(cut -d' ' -f1-3 /proc/loadavg)"
