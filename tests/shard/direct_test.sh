#!/usr/bin/env bash
# Direct (O_DIRECT) output writes (lib/tpc_io.c). Where the file system takes
# them, the whole pages of large copies from the input mapping and of staged
# sequential bytes (a gather's runs, cast output) go to disk without the page
# cache; the ragged ends stay buffered. Every output must be byte for byte
# what buffered writes give (TPCONV_DIRECT=0): shard tp 2 and 4 (column
# copies and row-parallel gathers), merge (gathers from every rank file),
# a reshard, convert with a cast (staged tpc_out_write), convert to a torch
# zip; on tmpfs (no direct writes, or other alignment) the same bytes again.
# Direct writes run queued (Linux AIO, several in flight) and, with
# TPCONV_DIRECT_ASYNC=0, one at a time, and copies in page phase go through
# the staging buffers or (TPCONV_DIRECT_STAGE=0) straight from the input's
# mapping: every way gives the same bytes. Past a
# file size limit and on a full file system every mode fails with exit 4 and
# leaves nothing.
# When strace is there, a reshard is checked to read its input in whole
# rows, and the run is checked to have opened its outputs
# O_DIRECT at all and queued its writes (else this test would prove
# nothing), and the automatic choice (TPCONV_DIRECT unset) to write direct
# from an input in the page cache and from one that is not (this small input
# is far below three quarters of RAM, the only case that goes buffered).
# usage: direct_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
# hidden 1024, 1 layer, inter 1536, vocab 2048, F32: 8 MiB embeddings, 4 MiB
# attention and 6 MiB MLP weights
$PY "$SRC/bench/make_big_st.py" "$T/src.safetensors" 1024 1 1536 2048 F32 >/dev/null ||
  { echo "1..0 # SKIP generator failed"; exit 0; }
F=(--preset llama --heads 8 --kv-heads 8 --head-dim 128 --vocab 2048)
# both DIR1 DIR2 CMD... with {} for the output: run direct and buffered, compare
both() {
  local label=$1 a=$2 b=$3; shift 3
  local ca=() cb=()
  for x in "$@"; do ca+=("${x//\{\}/$a}"); cb+=("${x//\{\}/$b}"); done
  TPCONV_DIRECT=1 run "${ca[@]}"
  if [ "$rc" != 0 ]; then bad "$label (direct)" "$(cat "$T/err")"; return 1; fi
  TPCONV_DIRECT=0 "${cb[@]}" >"$T/out" 2>"$T/err"
  if [ $? != 0 ]; then bad "$label (TPCONV_DIRECT=0)" "$(cat "$T/err")"; return 1; fi
  if diff -r "$a" "$b" >"$T/diff" 2>&1; then ok "$label: byte-identical to buffered writes"; else bad "$label differs" "$(head -5 "$T/diff")"; fi
  rm -rf "$b" && mkdir -p "$b"
  TPCONV_DIRECT=1 TPCONV_DIRECT_ASYNC=0 "${cb[@]}" >"$T/out" 2>"$T/err"
  if [ $? != 0 ]; then bad "$label (TPCONV_DIRECT_ASYNC=0)" "$(cat "$T/err")"; return 1; fi
  if diff -r "$a" "$b" >"$T/diff" 2>&1; then ok "$label: queued and one-at-a-time direct writes agree"; else bad "$label: queued and synchronous direct writes differ" "$(head -5 "$T/diff")"; fi
  rm -rf "$b" && mkdir -p "$b"
  TPCONV_DIRECT=1 TPCONV_DIRECT_STAGE=0 "${cb[@]}" >"$T/out" 2>"$T/err"
  if [ $? != 0 ]; then bad "$label (TPCONV_DIRECT_STAGE=0)" "$(cat "$T/err")"; return 1; fi
  if diff -r "$a" "$b" >"$T/diff" 2>&1; then ok "$label: staged and from-the-mapping direct writes agree"; else bad "$label: staged and from-the-mapping direct writes differ" "$(head -5 "$T/diff")"; fi
}
for tp in 2 4; do
  both "shard tp $tp" "$T/d$tp" "$T/b$tp" "$TPCONV" shard "$T/src.safetensors" --tp $tp "${F[@]}" -o {}
  mkdir -p "$T/md$tp" "$T/mb$tp"
  both "merge tp $tp" "$T/md$tp" "$T/mb$tp" "$TPCONV" merge "$T/d$tp" -o {}/m.safetensors
  same "$T/src.safetensors" "$T/md$tp/m.safetensors" && ok "merge tp $tp gives the source's tensors" ||
    bad "merge tp $tp: tensors differ" "$(cat "$T/diff" "$T/ierr")"
done
both "reshard tp 2 -> 4" "$T/r4" "$T/rb4" "$TPCONV" shard "$T/d2" --tp 4 "${F[@]}" -o {}
mkdir -p "$T/c1" "$T/c2" "$T/t1" "$T/t2"
both "convert --dtype bf16 (staged writes)" "$T/c1" "$T/c2" "$TPCONV" convert "$T/src.safetensors" --dtype bf16 -o {}/c.safetensors
both "convert to a torch zip" "$T/t1" "$T/t2" "$TPCONV" convert "$T/src.safetensors" -o {}/c.pt
# torch storages read (cast, gathered) straight into the staging buffers
# (tpc_out_room), their CRC taken there: a cast, and megatron-dist's row slices
mkdir -p "$T/tc1" "$T/tc2"
both "convert --dtype bf16 to a torch zip (read into the staging buffers)" "$T/tc1" "$T/tc2" "$TPCONV" convert "$T/src.safetensors" --dtype bf16 -o {}/c.pt
both "shard tp 2 --layout megatron-dist (slices read into the staging buffers)" "$T/ms1" "$T/ms2" "$TPCONV" shard "$T/src.safetensors" --tp 2 "${F[@]}" --layout megatron-dist -o {}
# a write the queue reports as failed: a file size limit (SIGXFSZ is ignored,
# so the writes fail with EFBIG), exit 4, nothing left behind
mkdir -p "$T/lim"
for out in l.safetensors l.pt l16.pt; do
  cast=() lim=20000; [ "$out" = l16.pt ] && cast=(--dtype bf16) lim=8000
  (ulimit -f $lim; TPCONV_DIRECT=1 exec "$TPCONV" convert "$T/src.safetensors" "${cast[@]}" -o "$T/lim/$out" -q) >"$T/out" 2>"$T/err"
  rc=$?
  if [ "$rc" = 4 ] && grep -q "File too large" "$T/err" && [ -z "$(ls -A "$T/lim")" ]; then
    ok "direct writes past a file size limit (${out##*.}): exit 4, nothing left"
  else
    bad "direct writes past a file size limit (${out##*.})" "rc $rc: $(cat "$T/err"; ls -A "$T/lim")"
  fi
done
# Ranks written in step (tpc_format.write_many): each writer thread takes a
# group of ranks and writes tensor i of each before tensor i + 1, so a
# row-parallel weight's rank slices come from one read of its rows. Groups
# of 2, 3 and 4 ranks (1, 2 and 3 threads at tp 4 and 8, the last group
# short where the threads do not divide the ranks), direct and buffered,
# must give the bytes that rank-by-rank writing (TPCONV_JOINT=0) gives.
# (sanitizer build: tp 8 in groups of 8 and of 3, 3 and 2)
tps="4 8" ths="1 2 3"; [ "$SAN" = 1 ] && tps=8 ths="1 3"
for tp in $tps; do
  TPCONV_JOINT=0 run "$TPCONV" shard "$T/src.safetensors" --tp $tp "${F[@]}" -o "$T/j0_$tp"
  [ "$rc" = 0 ] || bad "shard tp $tp rank by rank" "$(cat "$T/err")"
  for th in $ths; do
    for mode in 1 0; do
      rm -rf "$T/j_$tp"
      OMP_NUM_THREADS=$th TPCONV_DIRECT=$mode run "$TPCONV" shard "$T/src.safetensors" --tp $tp "${F[@]}" -o "$T/j_$tp"
      if [ "$rc" = 0 ] && diff -r "$T/j_$tp" "$T/j0_$tp" >"$T/diff" 2>&1; then
        ok "shard tp $tp, $th thread(s), ranks in step, TPCONV_DIRECT=$mode: the bytes of rank-by-rank writes"
      else
        bad "shard tp $tp, $th thread(s), ranks in step, TPCONV_DIRECT=$mode" "rc $rc: $(head -3 "$T/err" "$T/diff")"
      fi
    done
  done
done
# a reshard in step: tp 2 -> 4 (a group's slices of one rank file, read
# jointly) and 4 -> 8 (a group spans two rank files: written rank by rank)
for pair in 2:4 4:8; do
  from=${pair%%:*} to=${pair#*:}
  TPCONV_JOINT=0 run "$TPCONV" shard "$T/d$from" --tp $to "${F[@]}" -o "$T/jr0_$to"
  OMP_NUM_THREADS=1 "$TPCONV" shard "$T/d$from" --tp $to "${F[@]}" -o "$T/jr_$to" >"$T/out" 2>"$T/err"
  rc=$?
  if [ "$rc" = 0 ] && diff -r "$T/jr_$to" "$T/jr0_$to" >"$T/diff" 2>&1; then
    ok "reshard tp $from -> $to in step: the bytes of rank-by-rank writes"
  else
    bad "reshard tp $from -> $to in step" "rc $rc: $(head -3 "$T/err" "$T/diff")"
  fi
done
# a group that fails part way (a file size limit under the second rank's
# file): exit 4, and none of the group's files, committed or not, is left
for mode in 1 0; do
  rm -rf "$T/jl" && mkdir -p "$T/jl"
  (ulimit -f 8000; OMP_NUM_THREADS=1 TPCONV_DIRECT=$mode exec "$TPCONV" shard "$T/src.safetensors" --tp 4 "${F[@]}" -o "$T/jl/set" -q) >"$T/out" 2>"$T/err"
  rc=$?
  if [ "$rc" = 4 ] && grep -q "File too large" "$T/err" && [ -z "$(ls -A "$T/jl/set" 2>/dev/null)" ]; then
    ok "shard tp 4 in step past a file size limit, TPCONV_DIRECT=$mode: exit 4, nothing left"
  else
    bad "shard tp 4 in step past a file size limit, TPCONV_DIRECT=$mode" "rc $rc: $(cat "$T/err"; ls -A "$T/jl/set" 2>/dev/null)"
  fi
done
# ... and reads a row-parallel slice's rows once per group, not once per rank
if command -v strace >/dev/null 2>&1; then
  preads() { awk '/pread64\(/ && / = [0-9]+$/ { s += $NF } END { print s + 0 }' "$1"; }
  OMP_NUM_THREADS=1 strace -f -o "$T/pj" -e trace=pread64 "$TPCONV" shard "$T/src.safetensors" --tp 8 "${F[@]}" -o "$T/pj_set" --no-checksums >/dev/null 2>&1
  OMP_NUM_THREADS=1 TPCONV_JOINT=0 strace -f -o "$T/pn" -e trace=pread64 "$TPCONV" shard "$T/src.safetensors" --tp 8 "${F[@]}" -o "$T/pn_set" --no-checksums >/dev/null 2>&1
  a=$(preads "$T/pj") b=$(preads "$T/pn")
  if [ "$a" -gt 0 ] && [ "$b" -gt $((a * 3 / 2)) ]; then
    ok "shard tp 8 in step read $a bytes with pread against $b rank by rank"
  else
    bad "shard tp 8 in step did not read less" "in step $a bytes, rank by rank $b bytes"
  fi
  # a reshard's hashing assembles each row-parallel weight from the input
  # rank files' pieces of its rows: whole rows a read per part, not a read
  # per piece of a row (8,342 reads for this 4 -> 8 before dc4a117, 184 after)
  strace -f -o "$T/pr" -e trace=pread64,preadv "$TPCONV" shard "$T/d4" --tp 8 "${F[@]}" -o "$T/pr_set" >/dev/null 2>&1
  reads=$(grep -cE 'pread64\(|preadv\(' "$T/pr")
  if [ -d "$T/pr_set" ] && [ "$reads" -gt 0 ] && [ "$reads" -lt 2000 ]; then
    ok "reshard tp 4 -> 8 read its input in $reads reads"
  else
    bad "reshard tp 4 -> 8 read its input piece by piece" "$reads reads (a read per piece of a row: over 8,000)"
  fi
else
  skip "reads of shard tp 8 in step" "strace is not available"
fi
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  S=$(mktemp -d /dev/shm/tpc-direct-XXXXXX)
  run "$TPCONV" shard "$T/src.safetensors" --tp 4 "${F[@]}" -o "$S/set"
  if [ "$rc" = 0 ] && diff -r "$S/set" "$T/d4" >"$T/diff" 2>&1; then ok "shard tp 4 onto tmpfs: the same bytes"; else bad "shard tp 4 onto tmpfs" "$(cat "$T/err" "$T/diff" | head -5)"; fi
  run "$TPCONV" merge "$T/d4" -o "$S/m.safetensors"
  if [ "$rc" = 0 ] && cmp -s "$S/m.safetensors" "$T/md4/m.safetensors"; then ok "merge onto tmpfs: the same bytes"; else bad "merge onto tmpfs" "$(cat "$T/err")"; fi
  rm -rf "$S"
else
  skip "tmpfs outputs" "no writable /dev/shm"
fi
# uncached FILE: percent of FILE not in the page cache (cachestat), or "" when unknown
uncached() {
  $PY - "$1" <<'PYEOF' 2>/dev/null
import ctypes, os, sys
class R(ctypes.Structure): _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]
class C(ctypes.Structure): _fields_ = [("v", ctypes.c_uint64 * 5)]
fd = os.open(sys.argv[1], os.O_RDONLY); r = R(0, 0); c = C()
if ctypes.CDLL(None, use_errno=True).syscall(451, fd, ctypes.byref(r), ctypes.byref(c), 0) == 0:
    pages = (os.fstat(fd).st_size + 4095) // 4096
    print(max(0, 100 - 100 * c.v[0] // pages))
PYEOF
}
DIRECT_RE='O_DIRECT([|)]|$)'
if command -v strace >/dev/null 2>&1 && TPCONV_DIRECT=1 strace -f -o "$T/trace" -e trace=open,openat,io_submit "$TPCONV" shard "$T/src.safetensors" --tp 2 "${F[@]}" -o "$T/traced" >/dev/null 2>&1; then
  if grep -qE "$DIRECT_RE" "$T/trace"; then
    ok "shard opened its outputs O_DIRECT (this file system takes direct writes)"
    grep -q 'io_submit(' "$T/trace" && ok "the direct writes went through the AIO queue" ||
      skip "queued direct writes" "no io_submit: this kernel gave no AIO context"
    # the automatic choice: the input in the page cache -> direct ...
    cat "$T/src.safetensors" >/dev/null
    strace -f -o "$T/trace_auto" -e trace=open,openat "$TPCONV" shard "$T/src.safetensors" --tp 2 "${F[@]}" -o "$T/traced_auto" >/dev/null 2>&1
    grep -qE "$DIRECT_RE" "$T/trace_auto" && ok "TPCONV_DIRECT unset, the input cached: direct writes" ||
      bad "TPCONV_DIRECT unset, the input cached: no O_DIRECT open"
    # ... and not in it -> direct as well (only an input larger than three
    # quarters of RAM goes buffered)
    sync
    $PY -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$T/src.safetensors"
    u=$(uncached "$T/src.safetensors")
    if [ -n "$u" ] && [ "$u" -ge 90 ]; then
      strace -f -o "$T/trace_cold" -e trace=open,openat "$TPCONV" shard "$T/src.safetensors" --tp 2 "${F[@]}" -o "$T/traced_cold" >/dev/null 2>&1
      grep -qE "$DIRECT_RE" "$T/trace_cold" && ok "TPCONV_DIRECT unset, the input not cached ($u% out): direct writes" ||
        bad "TPCONV_DIRECT unset, the input not cached: no O_DIRECT open"
      diff -r "$T/traced_cold" "$T/traced_auto" >/dev/null 2>&1 && ok "the cold and the cached run write the same set" || bad "the cold and the cached run wrote different sets"
    else
      skip "direct writes from an uncached input" "the input could not be evicted from the page cache (${u:-no cachestat})"
    fi
  else
    skip "direct writes used" "no O_DIRECT open: the file system of $T reports no direct-I/O alignment"
  fi
  TPCONV_DIRECT=0 strace -f -o "$T/trace0" -e trace=open,openat "$TPCONV" shard "$T/src.safetensors" --tp 2 "${F[@]}" -o "$T/traced0" >/dev/null 2>&1
  grep -qE 'O_DIRECT([|)]|$)' "$T/trace0" && bad "TPCONV_DIRECT=0 still opened O_DIRECT" || ok "TPCONV_DIRECT=0 opens nothing O_DIRECT"
else
  skip "direct writes used" "strace is not available"
fi
# A full file system: a 24 MiB ext4 image on a loop device (root only, and
# only where the kernel lends loop devices) holds none of the ~50 MB outputs.
# Direct writes fail with ENOSPC inside the queue or at its submit, buffered
# ones at the write or the fsync: every way, exit 4 naming the cause, and
# nothing left on that file system (its free space back). (Under strace on
# the bench VM's kernel, the direct convert's ENOSPC comes back in an AIO
# completion, io_getevents' res=-28; the direct shard's in a pwritev.)
L=$T/full
if [ "$(id -u)" = 0 ] && command -v mkfs.ext4 >/dev/null 2>&1 && truncate -s 24M "$T/full.img" &&
   mkfs.ext4 -q -F "$T/full.img" >/dev/null 2>&1 && mkdir -p "$L" && mount -o loop "$T/full.img" "$L" 2>/dev/null; then
  trap 'umount "$L" 2>/dev/null; rm -rf "$T"' EXIT
  free0=$(df -k --output=avail "$L" | tail -1)
  for mode in 1 0; do
    for c in "convert:f.safetensors" "convert:f.pt" "shard:set"; do
      cmd=${c%%:*} out=$L/${c#*:}
      if [ "$cmd" = shard ]; then
        TPCONV_DIRECT=$mode run "$TPCONV" shard "$T/src.safetensors" --tp 2 "${F[@]}" -o "$out"
      else
        TPCONV_DIRECT=$mode run "$TPCONV" convert "$T/src.safetensors" -o "$out"
      fi
      left=$(ls -A "$L" | grep -v '^lost+found$')
      free1=$(df -k --output=avail "$L" | tail -1)
      if [ "$rc" = 4 ] && grep -q "No space left on device" "$T/err" && [ -z "$left" ] && [ "$free1" -ge $((free0 - 64)) ]; then
        ok "a full file system, TPCONV_DIRECT=$mode, $cmd to ${c#*:}: exit 4, nothing left"
      else
        bad "a full file system, TPCONV_DIRECT=$mode, $cmd to ${c#*:}" "rc $rc: $(head -3 "$T/err") left: $left; free $free0 -> $free1 KiB"
      fi
    done
  done
  umount "$L"
else
  skip "a full file system" "no loop-mounted ext4 here (needs root and loop devices)"
fi
echo "1..$n"
[ "$failed" = 0 ]
