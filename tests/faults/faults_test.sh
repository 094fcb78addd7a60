#!/usr/bin/env bash
# Faults while writing (issue 7): disk full, read-only output folder,
# SIGINT/SIGTERM/SIGKILL in the middle of a convert or a shard, two runs
# writing the same output at once, outputs that are inputs, a flipped bit in a
# rank file. After each: the output is complete and valid or absent (never a
# half-written file under a final name, never a manifest for a partial or mixed
# set), temporaries are gone (after SIGKILL: removed by the next run), inputs
# are untouched, and failures exit 4 (2 for refusals) with the reason.
# Emits TAP. usage: faults_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/lib/tap.sh"
tmpdir
chmod 755 "$T"
temps() { find "$1" -name '.*.tpc-*' 2>/dev/null | wc -l; }
check() { # desc: last run exited $2 with stderr containing $3, and $4 (a path) is absent
  local d=$1 want=$2 sub=$3 path=$4
  if [ "$rc" != "$want" ]; then bad "$d: exit $want" "exit $rc" "$(head -c 500 "$T/err")"; return 1; fi
  if [ -n "$sub" ] && ! grep -qF -- "$sub" "$T/err"; then bad "$d: reason" "wanted: $sub" "got: $(head -c 500 "$T/err")"; return 1; fi
  if [ -n "$path" ] && [ -e "$path" ]; then bad "$d: no output" "$path exists"; return 1; fi
  if [ "$(temps "$(dirname "${path:-$T/x}")")" != 0 ]; then bad "$d: no temporary left" "$(ls -a "$(dirname "$path")")"; return 1; fi
  ok "$d"
}
# sha256 of every tensor, sorted: equal when two files hold the same tensors
hashes() { "$TPCONV" inspect --json --hash "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
for t in sorted(d["tensors"], key=lambda t: t["name"]):
    print(t["name"], t["dtype"], t["shape"], t["sha256"])'; }

# ---- inputs: a ~300 MB safetensors file (big enough that a kill lands mid-write) and a small one
IN=$T/in; mkdir -p "$IN"
python3 - "$IN/big.safetensors" <<'EOF'
import json, struct, sys
n_t, rows = 24, 1024
cols = 300 * 1024 * 1024 // n_t // 4 // rows
hdr, off = {}, 0
for i in range(n_t):
    hdr['model.layers.%d.mlp.gate_proj.weight' % i] = {'dtype': 'F32', 'shape': [rows, cols], 'data_offsets': [off, off + rows * cols * 4]}
    off += rows * cols * 4
h = json.dumps(hdr).encode()
h += b' ' * (-len(h) % 8)
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<Q', len(h)) + h)
    blk = bytes(range(251)) * 4177  # a pattern that is not page-periodic
    left = off
    while left:
        k = min(left, len(blk))
        f.write(blk[:k])
        left -= k
EOF
# and a 96 MiB one of down_proj weights, row-parallel: ranks that share them are written in step
ROW=$IN/row.safetensors
python3 - "$ROW" <<'EOF'
import json, struct, sys
n_t, rows, cols = 24, 1024, 1024
hdr, off = {}, 0
for i in range(n_t):
    hdr['model.layers.%d.mlp.down_proj.weight' % i] = {'dtype': 'F32', 'shape': [rows, cols], 'data_offsets': [off, off + rows * cols * 4]}
    off += rows * cols * 4
h = json.dumps(hdr).encode()
h += b' ' * (-len(h) % 8)
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<Q', len(h)) + h)
    blk = bytes(range(251)) * 4177
    left = off
    while left:
        k = min(left, len(blk))
        f.write(blk[:k])
        left -= k
EOF
cp "$SRC/tests/data/tiny_llama.safetensors" "$IN/small.safetensors"
cp "$SRC/tests/data/config.json" "$IN/config.json"
chmod 644 "$IN"/*
BIG=$IN/big.safetensors SMALL=$IN/small.safetensors
sum_inputs() { cksum "$IN"/* | sort; }
SUM0=$(sum_inputs)
hashes "$BIG" > "$T/big.hashes"
hashes "$SMALL" > "$T/small.hashes"
SHARD=(--tp 2 --preset llama --config "$IN/config.json" -q)

# ---- disk full: a file size limit (RLIMIT_FSIZE; SIGXFSZ ignored, so write fails with EFBIG)
mkdir -p "$T/o1"
for out in o1/a.safetensors o1/a.pt; do
  (ulimit -f 100000; exec "$TPCONV" convert "$BIG" -o "$T/$out" -q) >"$T/out" 2>"$T/err"; rc=$?
  check "disk full (ulimit -f) during convert to ${out##*.}: exit 4" 4 "File too large" "$T/$out"
done
(ulimit -f 100000; exec "$TPCONV" shard "$BIG" -o "$T/o1/set" "${SHARD[@]}") >"$T/out" 2>"$T/err"; rc=$?
if check "disk full (ulimit -f) during shard: exit 4" 4 "File too large" "$T/o1/set/tpconv-manifest.json"; then
  [ -z "$(ls -A "$T/o1/set" 2>/dev/null)" ] && ok "disk full during shard: no rank file left" || bad "disk full during shard: no rank file left" "$(ls -A "$T/o1/set")"
fi

# ---- disk full: a real full file system (a 64 MiB tmpfs in a private mount namespace, when allowed)
if unshare -m true 2>/dev/null; then
  mkdir -p "$T/small"
  unshare -m sh -c '
    mount -t tmpfs -o size=64m tpc-test "$1" || exit 99
    "$2" convert "$3" -o "$1/out.safetensors" -q 2>"$4/err"; echo "rc=$?" >"$4/tmpfs"
    ls -A "$1" >>"$4/tmpfs"' sh "$T/small" "$TPCONV" "$BIG" "$T"
  if [ -f "$T/tmpfs" ]; then
    rc=$(sed -n 's/^rc=//p' "$T/tmpfs")
    left=$(grep -v '^rc=' "$T/tmpfs")
    if [ "$rc" = 4 ] && grep -q "No space left on device" "$T/err" && [ -z "$left" ]; then
      ok "disk full (64 MiB tmpfs) during convert: exit 4, nothing left"
    else bad "disk full (64 MiB tmpfs): exit 4, nothing left" "exit $rc, left: $left" "$(cat "$T/err")"; fi
  else skip "disk full on a tmpfs" "cannot mount a tmpfs"; fi
else skip "disk full on a tmpfs" "no private mount namespace"; fi

# ---- disk full on a folder output: the files finished before it stay (the one
# being written goes), the run says so and exits 4, and the same command
# again, once there is room, resumes to the set an uninterrupted run writes.
# A 200 MiB tmpfs (then 130 MiB) in a private mount namespace; one writer
# thread, so the ranks (75 MiB each at tp 4) and the shards (50 MiB) finish
# one by one.
FULL4=(--tp 4 --preset llama --config "$IN/config.json")
if unshare -m true 2>/dev/null; then
  "$TPCONV" shard "$BIG" -o "$T/ref4" "${FULL4[@]}" -q
  "$TPCONV" convert "$BIG" -o "$T/refhf/" --max-shard-size 60MB -q
  mkdir -p "$T/full"
  OMP_NUM_THREADS=1 TPCONV_JOINT=0 unshare -m bash -s -- "$T/full" "$TPCONV" "$BIG" "$T" "${FULL4[@]}" >"$T/full.res" 2>&1 <<'EOF'
M=$1 TPCONV=$2 BIG=$3 T=$4; shift 4
say() { echo "R $1 $2"; shift 2; for l in "$@"; do echo "# $l"; done; }
mount -t tmpfs -o size=200m tpc-full "$M" || { echo "SKIP"; exit 0; }
"$TPCONV" shard "$BIG" -o "$M/set" "$@" 2>"$T/full.err"; rc=$?
kept=$(cd "$M/set" 2>/dev/null && ls -A | tr '\n' ' ')
same=1; for f in model_tp00_pp00.safetensors model_tp01_pp00.safetensors; do cmp -s "$T/ref4/$f" "$M/set/$f" || same=0; done
[ "$rc" = 4 ] && grep -q "No space left on device" "$T/full.err" && [ "$kept" = "model_tp00_pp00.safetensors model_tp01_pp00.safetensors " ] && [ $same = 1 ] \
  && say 1 "disk full mid-shard: exit 4, the two finished rank files kept whole; no temporary, no manifest left" \
  || say 0 "disk full mid-shard: finished rank files kept" "exit $rc, left: $kept, same: $same" "$(cat "$T/full.err")"
grep -q "kept 2 finished rank files" "$T/full.err" && grep -q "the same command again" "$T/full.err" \
  && say 1 "disk full mid-shard: says what it kept and how to resume" || say 0 "disk full mid-shard: the note" "$(cat "$T/full.err")"
mount -o remount,size=400m "$M"
"$TPCONV" shard "$BIG" -o "$M/set" "$@" 2>"$T/full.err"; rc=$?
out=$(diff -r "$T/ref4" "$M/set" 2>&1)
[ "$rc" = 0 ] && grep -q "resumed: kept 2 rank files" "$T/full.err" && [ -z "$out" ] \
  && say 1 "disk full mid-shard: the same command with room resumes to a set byte-identical to an uninterrupted run's" \
  || say 0 "disk full mid-shard: resume" "exit $rc" "$out" "$(cat "$T/full.err")"
umount "$M"; mount -t tmpfs -o size=130m tpc-full "$M"
"$TPCONV" convert "$BIG" -o "$M/hf/" --max-shard-size 60MB 2>"$T/full.err"; rc=$?
kept=$(cd "$M/hf" 2>/dev/null && ls -A | tr '\n' ' ')
[ "$rc" = 4 ] && grep -q "No space left on device" "$T/full.err" && [ "$kept" = "model-00001-of-00006.safetensors model-00002-of-00006.safetensors " ] \
  && cmp -s "$T/refhf/model-00002-of-00006.safetensors" "$M/hf/model-00002-of-00006.safetensors" && grep -q "kept 2 finished shard files" "$T/full.err" \
  && say 1 "disk full mid-convert to an HF folder: exit 4, the two finished shards kept, no temporary, no index, says how to resume" \
  || say 0 "disk full mid-convert to an HF folder" "exit $rc, left: $kept" "$(cat "$T/full.err")"
mount -o remount,size=400m "$M"
"$TPCONV" convert "$BIG" -o "$M/hf/" --max-shard-size 60MB 2>"$T/full.err"; rc=$?
out=$(diff -r "$T/refhf" "$M/hf" 2>&1)
[ "$rc" = 0 ] && grep -q "resumed: kept 2 shard files" "$T/full.err" && [ -z "$out" ] \
  && say 1 "disk full mid-convert to an HF folder: resumed to the uninterrupted run's folder, byte for byte" \
  || say 0 "disk full mid-convert: resume" "exit $rc" "$out" "$(cat "$T/full.err")"
umount "$M"
EOF
  if grep -q '^SKIP' "$T/full.res"; then skip "disk full on a folder output" "cannot mount a tmpfs"
  elif ! grep -q '^R ' "$T/full.res"; then bad "disk full on a folder output" "$(cat "$T/full.res")"
  else
    while IFS= read -r l; do
      case $l in
        "R 1 "*) ok "${l#R 1 }" ;;
        "R 0 "*) n=$((n+1)); failed=$((failed+1)); echo "not ok $n - ${l#R 0 }" ;;
        *) echo "$l" ;;
      esac
    done < "$T/full.res"
  fi
  rm -rf "$T/ref4" "$T/refhf"
else skip "disk full on a folder output" "no private mount namespace"; fi

# ---- disk full with the joint writer (the default): ranks that share a
# row-parallel weight are written in step, so when the disk fills every file of
# the group is half written. The group then goes again rank by rank: the rank
# files that fit are finished and kept, the note says how many, and the same
# command with room resumes. A 96 MiB model of down_proj weights (split along
# their rows' length), tp 4: 24 MiB a rank, two fit in a 60 MiB tmpfs. One
# writer thread (one group of four: exactly ranks 0 and 1 fit), then two (two
# groups of two at once: which fit, and whether one group's half-written files
# still hold the room while the other goes again, depends on timing: one or two
# are finished; seen in a sanitizer run: one).
if unshare -m true 2>/dev/null; then
  "$TPCONV" shard "$ROW" -o "$T/refrow" "${FULL4[@]}" -q
  mkdir -p "$T/fullj"
  for th in 1 2; do
    OMP_NUM_THREADS=$th unshare -m bash -s -- "$T/fullj" "$TPCONV" "$ROW" "$T" $th "${FULL4[@]}" >"$T/fullj.res" 2>&1 <<'EOF'
M=$1 TPCONV=$2 ROW=$3 T=$4 th=$5; shift 5
say() { echo "R $1 $2"; shift 2; for l in "$@"; do echo "# $l"; done; }
mount -t tmpfs -o size=60m tpc-fullj "$M" || { echo "SKIP"; exit 0; }
"$TPCONV" shard "$ROW" -o "$M/set" "$@" 2>"$T/fullj.err"; rc=$?
kept=$(cd "$M/set" 2>/dev/null && ls -A | tr '\n' ' ')
n=$(cd "$M/set" 2>/dev/null && ls -A | grep -c '^model_tp0[0-3]_pp00\.safetensors$')
all=$(ls -A "$M/set" 2>/dev/null | wc -l)
same=1; for f in $kept; do cmp -s "$T/refrow/$f" "$M/set/$f" || same=0; done
if [ "$th" = 1 ]; then want="model_tp00_pp00.safetensors model_tp01_pp00.safetensors " nok=2; else want="$kept" nok=$n; [ "$n" -ge 1 ] || nok=-; fi
[ "$rc" = 4 ] && grep -q "No space left on device (at byte offset [0-9]" "$T/fullj.err" && [ "$n" = "$nok" ] && [ "$n" -le 2 ] && [ "$all" = "$n" ] && [ "$kept" = "$want" ] && [ $same = 1 ] \
  && say 1 "disk full mid-shard, joint writer, $th thread(s): exit 4, the error names the file and byte offset, the finished rank files ($n) kept whole; no temporary, no manifest" \
  || say 0 "disk full mid-shard, joint writer, $th thread(s): finished rank files kept" "exit $rc, left: $kept, same: $same" "$(cat "$T/fullj.err")"
grep -q "kept $n finished rank file" "$T/fullj.err" && grep -q "the same command again" "$T/fullj.err" \
  && say 1 "disk full mid-shard, joint writer, $th thread(s): says what it kept and how to resume" \
  || say 0 "disk full mid-shard, joint writer, $th thread(s): the note" "$(cat "$T/fullj.err")"
mount -o remount,size=200m "$M"
"$TPCONV" shard "$ROW" -o "$M/set" "$@" 2>"$T/fullj.err"; rc=$?
out=$(diff -r "$T/refrow" "$M/set" 2>&1)
[ "$rc" = 0 ] && grep -q "resumed: kept $n rank file" "$T/fullj.err" && [ -z "$out" ] \
  && say 1 "disk full mid-shard, joint writer, $th thread(s): the same command with room resumes to the uninterrupted run's set, byte for byte" \
  || say 0 "disk full mid-shard, joint writer, $th thread(s): resume" "exit $rc" "$out" "$(cat "$T/fullj.err")"
umount "$M"
EOF
    if grep -q '^SKIP' "$T/fullj.res"; then skip "disk full with the joint writer" "cannot mount a tmpfs"; break
    elif ! grep -q '^R ' "$T/fullj.res"; then bad "disk full with the joint writer" "$(cat "$T/fullj.res")"
    else
      while IFS= read -r l; do
        case $l in
          "R 1 "*) ok "${l#R 1 }" ;;
          "R 0 "*) bad "${l#R 0 }" ;;
          *) echo "$l" ;;
        esac
      done < "$T/fullj.res"
    fi
  done
  rm -rf "$T/refrow"
else skip "disk full with the joint writer" "no private mount namespace"; fi

# ---- read-only output folder (as an unprivileged user when running as root)
mkdir -p "$T/ro"; chmod 555 "$T/ro"
if [ "$(id -u)" = 0 ]; then AS=(setpriv --reuid 65534 --regid 65534 --clear-groups); else AS=(); fi
if [ "$(id -u)" != 0 ] || command -v setpriv >/dev/null; then
  run "${AS[@]}" "$TPCONV" convert "$SMALL" -o "$T/ro/x.safetensors"
  check "read-only output folder: exit 4" 4 "cannot create a temporary file in '$T/ro'" "$T/ro/x.safetensors"
  run "${AS[@]}" "$TPCONV" shard "$SMALL" -o "$T/ro/set" "${SHARD[@]}"
  check "read-only folder for a shard set: exit 4" 4 "cannot create directory" "$T/ro/set"
else skip "read-only output folder" "root without setpriv"; fi
if unshare -m true 2>/dev/null; then
  mkdir -p "$T/rofs"
  unshare -m sh -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 99
    "$2" convert "$3" -o "$1/x.safetensors" 2>"$4/err"; echo $? >"$4/rc"' sh "$T/rofs" "$TPCONV" "$SMALL" "$T"
  rc=$(cat "$T/rc" 2>/dev/null)
  if [ "$rc" = 99 ] || [ -z "$rc" ]; then skip "read-only file system" "cannot remount read-only"
  else check "read-only file system: exit 4" 4 "Read-only file system" "$T/rofs/x.safetensors"; fi
else skip "read-only file system" "no private mount namespace"; fi

# ---- outputs that are inputs
cp "$SMALL" "$T/victim.safetensors"; ln "$T/victim.safetensors" "$T/hardlink.safetensors"; ln -s victim.safetensors "$T/symlink.safetensors"
vsum=$(cksum < "$T/victim.safetensors")
for o in victim hardlink symlink; do
  run "$TPCONV" convert "$T/victim.safetensors" -o "$T/$o.safetensors" -f
  [ "$rc" = 2 ] && grep -qF "output is also an input; refusing to overwrite it" "$T/err" && [ "$(cksum < "$T/victim.safetensors")" = "$vsum" ] \
    && ok "output = input ($o), --force: refused, exit 2, input intact" || bad "output = input ($o)" "exit $rc" "$(cat "$T/err")"
done
"$TPCONV" convert "$SMALL" -o "$T/hf" --max-shard-size 150K -q
"$TPCONV" shard "$SMALL" -o "$T/set" "${SHARD[@]}"
hsum=$(cksum "$T/hf"/* "$T/set"/* | sort)
run "$TPCONV" convert "$T/hf" -o "$T/hf/merged.safetensors"
check "convert: output inside the input model folder (HF shards, no shard set): exit 2, called a model's folder" 2 "the output is inside the input model's folder '$T/hf'" "$T/hf/merged.safetensors"
run "$TPCONV" convert "$T/set" -o "$T/set/merged.safetensors"
check "convert: output inside the input shard set: exit 2, called a shard set's folder" 2 "the output is inside the input shard set's folder '$T/set'" "$T/set/merged.safetensors"
run "$TPCONV" convert "$T/hf/model.safetensors.index.json" -o "$T/hf/model-00001-of-00004.safetensors" -f
check "convert: output is one of the input shards: exit 2" 2 "" ""
run "$TPCONV" convert "$T/hf" -o "$T/hf" -f
check "convert: HF output folder = input folder: exit 2" 2 "" ""
run "$TPCONV" shard "$T/set" --tp 1 -o "$T/set/inner" -q
check "shard: output inside the input set: exit 2" 2 "the output folder is the input folder or inside it" "$T/set/inner"
run "$TPCONV" shard "$T/set" --tp 1 -o "$T/set" -f -q
check "shard: output folder = input set: exit 2" 2 "the output folder is the input folder or inside it" ""
run "$TPCONV" merge "$T/set" -o "$T/set/merged.safetensors"
check "merge: output inside the set: exit 2" 2 "the output is inside the shard set being merged" "$T/set/merged.safetensors"
[ "$(cksum "$T/hf"/* "$T/set"/* | sort)" = "$hsum" ] && ok "refused runs left the input sets untouched" || bad "input sets untouched"

# ---- signals in the middle of a write
# start CMD in the background, wait until a temporary exists in DIR, send SIG;
# sets rc; landed=1 when the process was still writing (killed by the signal)
kill_mid() {
  local sig=$1 dir=$2; shift 2
  "$@" >"$T/out" 2>"$T/err" &
  local pid=$! i=0
  while [ "$(temps "$dir")" = 0 ] && kill -0 "$pid" 2>/dev/null && [ $i -lt 3000 ]; do sleep 0.002; i=$((i+1)); done
  sleep 0.05
  kill -s "$sig" "$pid" 2>/dev/null
  { wait "$pid"; } 2>/dev/null; rc=$?
  landed=0; [ "$rc" -gt 128 ] && landed=1
}
signum() { kill -l "$1"; }
"$TPCONV" shard "$BIG" -o "$T/ref_set" "${SHARD[@]}" # the uninterrupted set a resumed one must equal
for sig in INT TERM KILL; do
  for what in convert shard; do
    d=$T/sig_${what}_$sig; landed=0
    for try in 1 2 3; do
      rm -rf "$d"; mkdir -p "$d"
      if [ $what = convert ]; then kill_mid $sig "$d" "$TPCONV" convert "$BIG" -o "$d/out.pt" --progress
      else kill_mid $sig "$d" "$TPCONV" shard "$BIG" -o "$d/set" --progress "${SHARD[@]}"; fi
      # a signal that came after the output was committed (a loaded machine
      # can delay it past the end of the write) did not land mid-write
      if [ $what = convert ]; then [ -e "$d/out.pt" ] && landed=0
      else [ -e "$d/set/tpconv-manifest.json" ] && landed=0; fi
      [ $landed = 1 ] && break
    done
    desc="SIG$sig mid-$what"
    if [ $landed != 1 ]; then skip "$desc" "the run finished before the signal in 3 tries (exit $rc)"; continue; fi
    [ "$rc" = $((128 + $(signum $sig))) ] && ok "$desc: the process dies by the signal" || bad "$desc: dies by the signal" "exit $rc"
    if [ $what = convert ]; then
      [ ! -e "$d/out.pt" ] && ok "$desc: no output under the final name" || bad "$desc: no output under the final name"
    else
      [ ! -e "$d/set/tpconv-manifest.json" ] && ok "$desc: no manifest for the partial set" || bad "$desc: no manifest"
      badrank=
      for f in "$d"/set/*.safetensors; do
        [ -e "$f" ] || continue
        "$TPCONV" inspect -q "$f" >/dev/null 2>&1 || badrank="$badrank $f"
      done
      [ -z "$badrank" ] && ok "$desc: every rank file under a final name is complete" || bad "$desc: complete rank files" "$badrank"
    fi
    if [ $sig != KILL ]; then
      [ "$(temps "$d")" = 0 ] && ok "$desc: temporaries removed" || bad "$desc: temporaries removed" "$(find "$d" -name '.*.tpc-*')"
      if [ $what = convert ]; then # the shard runs here are -q: errors only
        grep -q "interrupted: temporary files removed, every finished file kept; the same command again" "$T/err" &&
          ok "$desc: says what it removed and kept and how to resume" || bad "$desc: the interrupt note" "$(tail -c 300 "$T/err")"
      else
        ! grep -q "interrupted" "$T/err" && ok "$desc: -q keeps the interrupt note quiet" || bad "$desc: -q" "$(tail -c 300 "$T/err")"
      fi
    else
      [ "$(temps "$d")" != 0 ] && ok "$desc: the temporary is left (nothing runs after SIGKILL)" || bad "$desc: expected a leftover temporary"
      # the same command again at once (a leftover's owner is dead: its lock is gone)
      if [ $what = convert ]; then
        run "$TPCONV" convert "$BIG" -o "$d/out.pt" -q
        [ "$rc" = 0 ] && [ "$(temps "$d")" = 0 ] && ok "$desc: the next run, at once, succeeds and removes the leftover" \
          || bad "$desc: next run cleans up" "exit $rc" "$(cat "$T/err")" "$(ls -a "$d")"
        hashes "$d/out.pt" | diff -q - "$T/big.hashes" >/dev/null && ok "$desc: the next run's output is complete" || bad "$desc: next output complete"
      else
        run "$TPCONV" shard "$BIG" -o "$d/set" "${SHARD[@]}"
        [ "$rc" = 0 ] && [ "$(temps "$d")" = 0 ] && [ -f "$d/set/tpconv-manifest.json" ] \
          && ok "$desc: the same command again, at once, resumes, completes the set and removes every leftover" \
          || bad "$desc: resumed shard run" "exit $rc" "$(cat "$T/err")" "$(ls -a "$d/set")"
        out=$(diff -r "$T/ref_set" "$d/set" 2>&1) && ok "$desc: the resumed set is byte-identical to an uninterrupted run's" \
          || bad "$desc: resumed set = clean set" "$out"
        run "$TPCONV" shard "$BIG" -o "$d/set" "${SHARD[@]}"
        [ "$rc" = 2 ] && grep -qF "already holds a complete shard set" "$T/err" && [ "$(temps "$d")" = 0 ] \
          && ok "$desc: a later run says the set is complete" || bad "$desc: later run" "exit $rc" "$(cat "$T/err")"
      fi
    fi
    rm -rf "$d"
  done
done

# ---- every run sweeps the dead temporaries of its output (a run killed with
# SIGKILL left them: no process holds their lock), whatever file they were
# for and however young; a temporary a live process holds stays
d=$T/sweep; mkdir -p "$d"
"$TPCONV" shard "$SMALL" -o "$d/set" "${SHARD[@]}"
"$TPCONV" convert "$SMALL" -o "$d/hf/" --max-shard-size 150K -q
for f in set/.model_tp00_pp00.safetensors.tpc-AbC123 set/.config.json.tpc-XyZ789 set/.tpconv-manifest.json.tpc-Qw3rty \
         hf/.model-00001-of-00004.safetensors.tpc-Zx9Cv8 .x.safetensors.tpc-Dead01; do printf 'left by a killed run' > "$d/$f"; done
printf 'a live run' > "$d/set/.model_tp01_pp00.safetensors.tpc-Live01"
flock -x "$d/set/.model_tp01_pp00.safetensors.tpc-Live01" sleep 60 & holder=$!
for i in $(seq 500); do flock -n -x "$d/set/.model_tp01_pp00.safetensors.tpc-Live01" true || break; sleep 0.01; done
run "$TPCONV" shard "$SMALL" -o "$d/set" "${SHARD[@]}"
left=$(cd "$d/set" && ls -A | grep tpc-)
[ "$rc" = 2 ] && [ "$left" = ".model_tp01_pp00.safetensors.tpc-Live01" ] \
  && ok "a shard run into a complete set removes its folder's dead temporaries (rank file, companion, manifest), keeps a live one" \
  || bad "shard run sweeps dead temporaries" "exit $rc" "left: $left" "$(cat "$T/err")"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
run "$TPCONV" convert "$SMALL" -o "$d/hf/" --max-shard-size 150K -q
[ "$rc" = 2 ] && [ "$(temps "$d/hf")" = 0 ] && ok "a convert into a complete HF folder removes its dead temporaries" \
  || bad "convert sweeps an HF folder" "exit $rc" "$(ls -A "$d/hf")"
run "$TPCONV" convert "$SMALL" -o "$d/x.safetensors" -q
[ "$rc" = 0 ] && [ ! -e "$d/.x.safetensors.tpc-Dead01" ] && ok "a convert to a file removes that file's dead temporary at once" \
  || bad "convert sweeps its file's temporaries" "exit $rc" "$(ls -A "$d")"
rm -rf "$d"

# ---- two runs writing the same output at once
d=$T/conc; mkdir -p "$d"
for round in 1 2 3; do
  rm -f "$d"/*
  "$TPCONV" convert "$BIG" -o "$d/out.safetensors" 2>"$T/e1" & p1=$!
  "$TPCONV" convert "$BIG" -o "$d/out.safetensors" 2>"$T/e2" & p2=$!
  wait $p1; r1=$?; wait $p2; r2=$?
  # without --force exactly one wins; the other refuses to replace what appeared (exit 2)
  if { [ $r1 = 0 ] && [ $r2 = 2 ]; } || { [ $r1 = 2 ] && [ $r2 = 0 ]; }; then :; else
    bad "concurrent converts, round $round: one wins, one refuses" "exits $r1 $r2" "$(cat "$T/e1" "$T/e2")"; continue; fi
  if hashes "$d/out.safetensors" | diff -q - "$T/big.hashes" >/dev/null && [ "$(temps "$d")" = 0 ]; then
    ok "concurrent converts, round $round: one complete output, the other refused, no temporaries"
  else bad "concurrent converts, round $round: complete output" "$(ls -a "$d")"; fi
done
rm -f "$d"/*
"$TPCONV" convert "$BIG" -o "$d/out.safetensors" -f 2>"$T/e1" & p1=$!
"$TPCONV" convert "$SMALL" -o "$d/out.safetensors" -f 2>"$T/e2" & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
h=$(hashes "$d/out.safetensors")
if [ $r1 = 0 ] && [ $r2 = 0 ] && { [ "$h" = "$(cat "$T/big.hashes")" ] || [ "$h" = "$(cat "$T/small.hashes")" ]; } && [ "$(temps "$d")" = 0 ]; then
  ok "concurrent converts with --force of different inputs: the output is one of them, whole"
else bad "concurrent --force converts" "exits $r1 $r2" "$(cat "$T/e1" "$T/e2")"; fi
# two shard runs into one folder, with different plans (so their rank files differ): never a manifest for a mixed set
echo '{"name": "all-replicated", "rules": [], "fallback": "replicate"}' > "$T/repl.json"
for round in 1 2 3; do
  rm -rf "$d/set"
  "$TPCONV" shard "$SMALL" -o "$d/set" -f "${SHARD[@]}" 2>"$T/e1" & p1=$!
  "$TPCONV" shard "$SMALL" -o "$d/set" -f --tp 2 --plan "$T/repl.json" -q 2>"$T/e2" & p2=$!
  wait $p1; r1=$?; wait $p2; r2=$?
  if [ -f "$d/set/tpconv-manifest.json" ]; then
    run "$TPCONV" merge "$d/set" -o "$d/m.safetensors" -f -q
    if [ "$rc" = 0 ] && hashes "$d/m.safetensors" | diff -q - "$T/small.hashes" >/dev/null; then
      ok "concurrent shard runs, round $round: the manifest's set is whole (exits $r1 $r2)"
    else bad "concurrent shard runs, round $round: a manifest for a mixed set" "exits $r1 $r2; merge: $rc $(cat "$T/err")"; fi
  else
    { [ $r1 != 0 ] || [ $r2 != 0 ]; } && ok "concurrent shard runs, round $round: no manifest, and a run reports it (exits $r1 $r2)" \
      || bad "concurrent shard runs, round $round: no manifest but both runs exit 0" "$(cat "$T/e1" "$T/e2")"
  fi
  [ "$(temps "$d")" = 0 ] || bad "concurrent shard runs, round $round: temporaries left" "$(find "$d" -name '.*.tpc-*')"
done

# ---- a bit flipped in a rank file is caught through the manifest checksums
d=$T/flip; mkdir -p "$d"
"$TPCONV" shard "$SMALL" -o "$d/set" "${SHARD[@]}"
f=$d/set/model_tp01_pp00.safetensors
python3 - "$f" <<'EOF'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
i = 8 + n + (len(b) - 8 - n) // 2  # a byte in the middle of the tensor data
b[i] ^= 0x10
open(p, 'wb').write(b)
EOF
run "$TPCONV" merge "$d/set" -o "$d/m.safetensors"
if [ "$rc" != 0 ] && grep -qF "does not match the manifest checksum" "$T/err" && [ ! -e "$d/m.safetensors" ]; then
  ok "bit flip in a rank file: merge refuses it (exit $rc), names the rank, writes nothing"
else bad "bit flip caught by merge" "exit $rc" "$(cat "$T/err")"; fi
if "$TPCONV" --help | grep -q '^  verify '; then
  run "$TPCONV" verify --reference "$SMALL" --shards "$d/set" --checks structure
  if [ "$rc" = 1 ] && grep -q 'FAIL' "$T/out" && grep -qE '^#? *rank 1\b' "$T/out"; then
    ok "bit flip in a rank file: verify reports rank 1's tensor (exit 1)"
  else bad "bit flip caught by verify" "exit $rc" "$(grep -v ' pass$' "$T/out" | head -8)" "$(cat "$T/err")"; fi
else skip "bit flip caught by verify" "this build has no 'tpconv verify'"; fi

[ "$(sum_inputs)" = "$SUM0" ] && ok "inputs never modified" || bad "inputs never modified"
echo "1..$n"
[ "$failed" = 0 ]
