#!/usr/bin/env bash
# `mpirun tpconv shard` (TAP): with OpenMPI's mpirun (--oversubscribe, so 4 and 8
# processes run on a 2-core machine) the set is byte-identical to the
# single-process one, manifest included, for 2, 3, 4 and 8 processes (more
# processes than files), for the hf-mapping and hf layouts, tp x pp sets and a
# reshard; merge and convert to an HF folder divide its shards among the
# processes and write the folder they write alone (a single file: process 0),
# a failing process leaving no index. A process
# that fails fails the job (worst exit status) with no manifest and the other
# processes' files removed; a process killed with SIGKILL leaves no manifest.
# Skips without mpirun or when tpconv was built without MPI.
# usage: mpi_shard_test.sh TPCONV SRCDIR LOCK_DELAY_SHIM
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
command -v mpirun >/dev/null || { echo "1..0 # SKIP mpirun not found"; exit 0; }
export OMPI_MCA_rmaps_base_oversubscribe=1
# OpenMPI's plugins leak at exit (see tests/verify/mpi_test.sh): no leak check
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
mpi() { local np=$1; shift; mpirun --allow-run-as-root --oversubscribe -np "$np" "$@"; }
D=$SRC/tests/data
IN=$D/tiny_llama.safetensors
CFG=(--config "$D/config.json")
run mpi 2 "$TPCONV" shard "$IN" --preset llama --tp 2 "${CFG[@]}" -o "$T/probe" -q
if grep -q "built without MPI" "$T/err"; then echo "1..0 # SKIP tpconv was built without MPI"; exit 0; fi
rm -rf "$T/probe"

# same_dir A B: the same files with the same bytes
same_dir() {
  local a=$1 b=$2
  [ "$(cd "$a" && find . -type f | sort)" = "$(cd "$b" && find . -type f | sort)" ] || { echo "file lists differ"; return 1; }
  (cd "$a" && find . -type f) | while read -r f; do cmp -s "$a/$f" "$b/$f" || { echo "differs: $f"; return 1; }; done
}

# ---- identical sets
for spec in "tp4:--tp 4" "tp2pp2:--tp 2 --pp 2" "hf-mapping:--tp 4 --layout hf-mapping" "hf:--tp 2 --layout hf"; do
  name=${spec%%:*} args=${spec#*:}
  run "$TPCONV" shard "$IN" --preset llama $args "${CFG[@]}" -o "$T/$name.single" -q
  [ "$rc" = 0 ] || { bad "$name: single-process shard" "$(cat "$T/err")"; continue; }
  for np in 2 3 4 8; do
    [ "$name" != tp4 ] && [ "$np" != 2 ] && [ "$np" != 4 ] && continue
    run mpi "$np" "$TPCONV" shard "$IN" --preset llama $args "${CFG[@]}" -o "$T/$name.np$np" -q
    if [ "$rc" = 0 ] && same_dir "$T/$name.single" "$T/$name.np$np" >"$T/d" 2>&1; then
      ok "$name: mpirun -np $np writes the set the single process writes, manifest included"
    else bad "$name: mpirun -np $np" "exit $rc" "$(cat "$T/err" "$T/d" | head -20)"; fi
  done
done
run mpi 2 "$TPCONV" merge "$T/tp4.np4" -o "$T/merged.np2.safetensors" -q
[ "$rc" = 0 ] && cmp -s "$T/merged.np2.safetensors" <("$TPCONV" merge "$T/tp4.single" -o "$T/merged.1.safetensors" -q && cat "$T/merged.1.safetensors") &&
  ok "merge under mpirun -np 2: process 0 writes the file a single merge writes" || bad "merge under mpirun" "exit $rc" "$(cat "$T/err")"
"$TPCONV" convert "$D/tiny_llama.pt" -o "$T/conv.1" --max-shard-size 50K -q
for np in 2 3; do
  run mpi $np "$TPCONV" convert "$D/tiny_llama.pt" -o "$T/conv.np$np" --max-shard-size 50K -q
  [ "$rc" = 0 ] && same_dir "$T/conv.1" "$T/conv.np$np" >"$T/d" &&
    ok "convert to HF shards under mpirun -np $np: shards divided, the folder equals the single run's" ||
    bad "convert under mpirun -np $np" "exit $rc" "$(cat "$T/err" "$T/d")"
done
"$TPCONV" merge "$T/tp4.single" -o "$T/mf.1" --max-shard-size 60K -q
run mpi 3 "$TPCONV" merge "$T/tp4.single" -o "$T/mf.np3" --max-shard-size 60K -q
[ "$rc" = 0 ] && [ "$(ls "$T/mf.1" | grep -c 'of-')" -gt 3 ] && same_dir "$T/mf.1" "$T/mf.np3" >"$T/d" &&
  ok "merge to an HF folder under mpirun -np 3: shards divided, the folder equals the single merge's" ||
  bad "merge to a folder under mpirun" "exit $rc" "$(cat "$T/err" "$T/d")"
# a process whose shard cannot be written: no index, the other shards removed
second=$(ls "$T/conv.1" | grep -- '-of-' | sed -n 2p)
mkdir -p "$T/convfail/$second"
run mpi 2 "$TPCONV" convert "$D/tiny_llama.pt" -o "$T/convfail" --max-shard-size 50K
left=$(ls "$T/convfail" | grep -v -- "^$second\$" | tr '\n' ' ')
if [ "$rc" != 0 ] && [ -z "$left" ] && grep -q "process 1 of 2" "$T/err" && grep -q "no index written" "$T/err"; then
  ok "convert: a process that fails fails the job, no index, the other process's shards removed"
else bad "convert with a failing process" "exit $rc" "left: $left" "$(cat "$T/err")"; fi
# reshard 4 -> 2 from a set written by mpirun
run mpi 2 "$TPCONV" shard "$T/tp4.np4" --tp 2 -o "$T/re.np2" -q
"$TPCONV" shard "$T/tp4.single" --tp 2 -o "$T/re.1" -q
[ "$rc" = 0 ] && "$TPCONV" diff -q "$T/re.np2" "$IN" && "$TPCONV" diff -q "$T/re.1" "$T/re.np2" &&
  ok "reshard 4 -> 2 under mpirun -np 2: the same model as the single reshard" || bad "reshard under mpirun" "exit $rc" "$(cat "$T/err")"
# without mpirun nothing changes (the same binary)
run "$TPCONV" shard "$IN" --preset llama --tp 4 "${CFG[@]}" -o "$T/plain" -q
[ "$rc" = 0 ] && same_dir "$T/tp4.single" "$T/plain" >/dev/null && ok "without mpirun the binary writes the set alone" || bad "plain run" "$(cat "$T/err")"

# ---- a process that fails: rank 1's file cannot be written (a folder in its place)
mkdir -p "$T/fail/model_tp01_pp00.safetensors"
run mpi 2 "$TPCONV" shard "$IN" --preset llama --tp 4 "${CFG[@]}" -o "$T/fail"
if [ "$rc" != 0 ] && [ ! -e "$T/fail/tpconv-manifest.json" ] && [ ! -e "$T/fail/model_tp00_pp00.safetensors" ] &&
   [ ! -e "$T/fail/model_tp02_pp00.safetensors" ] && grep -q "process 1 of 2" "$T/err" &&
   grep -q "no manifest written" "$T/err"; then
  ok "one process fails: the job fails (exit $rc), no manifest, the other process's files removed"
else bad "one failing process" "exit $rc" "$(ls "$T/fail")" "$(cat "$T/err")"; fi
rm -rf "$T/fail"
run mpi 2 "$TPCONV" shard "$IN" --preset llama --tp 4 "${CFG[@]}" -o "$T/tp4.np2"
[ "$rc" = 2 ] && grep -q "already holds a complete shard set" "$T/err" && ok "an existing set without --force: usage error from every process" ||
  bad "existing set" "exit $rc" "$(cat "$T/err")"
run mpi 3 "$TPCONV" shard "$IN" --preset llama --tp 4 "${CFG[@]}" -o "$T/tp4.np2" --force -q
[ "$rc" = 0 ] && same_dir "$T/tp4.single" "$T/tp4.np2" >/dev/null && ok "--force under mpirun -np 3 replaces the set" || bad "--force under mpirun" "exit $rc" "$(cat "$T/err")"
"$TPCONV" shard "$D/tiny_llama.pt" --preset llama --tp 4 "${CFG[@]}" -o "$T/stale" -q
run mpi 2 "$TPCONV" shard "$IN" --preset llama --tp 4 "${CFG[@]}" -o "$T/stale" --force -q
[ "$rc" = 0 ] && same_dir "$T/tp4.single" "$T/stale" >/dev/null &&
  ok "--force over another set's files: no process trips over files the others are replacing" || bad "--force over another set" "exit $rc" "$(cat "$T/err")"

# ---- the MPI module: tpconv links no MPI library and loads tpconv_mpi.so under mpirun only
readelf -d "$TPCONV" | grep -q 'NEEDED.*libmpi' && bad "tpconv links libmpi" "$(readelf -d "$TPCONV" | grep NEEDED)" ||
  ok "tpconv links no MPI library (readelf -d)"
# a copy away from its module: refused by name under mpirun, as a build without MPI is; fine without
mkdir -p "$T/alone/bin" && cp "$TPCONV" "$T/alone/bin/tpconv"
run mpi 2 "$T/alone/bin/tpconv" shard "$IN" --preset llama --tp 2 "${CFG[@]}" -o "$T/alone/set" -q
[ "$rc" = 5 ] && grep -q "MPI module tpconv_mpi.so is not found" "$T/err" && [ ! -e "$T/alone/set" ] &&
  ok "without its MPI module under mpirun: exit 5 naming tpconv_mpi.so, nothing written" || bad "no module under mpirun" "exit $rc" "$(cat "$T/err")"
echo "not a module" >"$T/alone/broken.so"
TPCONV_MPI_MODULE=$T/alone/broken.so run mpi 2 "$T/alone/bin/tpconv" shard "$IN" --preset llama --tp 2 "${CFG[@]}" -o "$T/alone/set" -q
[ "$rc" = 5 ] && grep -q "cannot load the MPI module '$T/alone/broken.so'" "$T/err" &&
  ok "TPCONV_MPI_MODULE naming a file that does not load: exit 5 saying why" || bad "broken module" "exit $rc" "$(cat "$T/err")"
run "$T/alone/bin/tpconv" shard "$IN" --preset llama --tp 4 "${CFG[@]}" -o "$T/alone/set" -q
[ "$rc" = 0 ] && same_dir "$T/tp4.single" "$T/alone/set" >/dev/null && ok "without mpirun the copy without its module writes the set" ||
  bad "the copy without mpirun" "exit $rc" "$(cat "$T/err")"

# ---- a process killed with SIGKILL while it writes: no manifest. Process 1
# runs under the lock_delay shim (tests/faults/lock_delay.c), which holds it
# at its rank file's temporary for a minute: process 0 writes its file and
# waits for process 1's status, and process 1 is killed there. (Stopping
# process 1 with SIGSTOP instead held process 0 in MPI_Init, before any file.)
SHIM=$(realpath "$3")
SH=("$TPCONV" shard "$IN" --preset llama --tp 2 "${CFG[@]}" -o "$T/killed" -q)
mpirun --allow-run-as-root --oversubscribe -np 1 "${SH[@]}" : \
  -np 1 env LD_PRELOAD="$SHIM" TPC_TEST_LOCK_DELAY_MS=60000 "${SH[@]}" >"$T/out" 2>"$T/err" &
mp=$!
victim=""
for _ in $(seq 1 1000); do
  for p in $(pgrep -P "$mp" 2>/dev/null); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then victim=$p; break; fi
  done
  [ -n "$victim" ] && break
  sleep 0.01
done
if [ -n "$victim" ]; then
  for _ in $(seq 1 1500); do [ -e "$T/killed/model_tp00_pp00.safetensors" ] && break; sleep 0.02; done
  [ -e "$T/killed/model_tp00_pp00.safetensors" ] || bad "SIGKILL of process 1" "process 0 did not write its file in 30 s"
  kill -KILL "$victim"
fi
wait "$mp"; rc=$?
if [ -z "$victim" ]; then bad "SIGKILL of process 1" "could not find process 1 of the job"
elif [ "$rc" != 0 ] && [ ! -e "$T/killed/tpconv-manifest.json" ]; then
  ok "process 1 killed with SIGKILL: the job fails (exit $rc) and leaves no manifest"
else bad "SIGKILL of process 1" "exit $rc" "$(ls -la "$T/killed" 2>&1)" "$(tail -5 "$T/err")"; fi
run "$TPCONV" merge "$T/killed" -o "$T/killed.safetensors"
[ "$rc" != 0 ] && ok "merge refuses what the killed job left (exit $rc)" || bad "merge after kill" "exit 0"
echo "1..$n"
[ "$failed" = 0 ]
