#!/usr/bin/env bash
# A sweep landing between a temporary's creation and its lock (issue 41 item
# 17). Every run writing a shard set removes the unlocked temporaries of its
# folder first, as a killed run's leftovers; a live run's temporary is unlocked
# for an instant after mkostemp(). Two processes writing one folder (--rank
# runs, as mpirun's processes write it): the first is held in that instant by
# lock_delay.so (LD_PRELOAD) while the second starts and sweeps. The sweep
# takes the first one's file every time; the first must notice, make another
# and finish, and the set must be whole. Then the two runs at once, without
# the shim, a few rounds: whichever takes the folder's exclusive lock last
# finds the set complete and its manifest written by the other; before, it
# wrote the manifest again, was refused (it exists), and took its own rank
# file back from under the other's manifest (16 rounds of 20). Emits TAP.
# usage: sweep_race_test.sh TPCONV SRCDIR LOCK_DELAY_SO
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2") SHIM=$(realpath "$3")
. "$SRC/tests/lib/tap.sh"
tmpdir
cp "$SRC/tests/data/tiny_llama.safetensors" "$T/in.safetensors"
cp "$SRC/tests/data/config.json" "$T/config.json"
PLAN=(--tp 2 --preset llama --config "$T/config.json") SHARD=("${PLAN[@]}" -q)
hashes() { "$TPCONV" inspect --json --hash "$1" | python3 -c '
import json, sys
for t in sorted(json.load(sys.stdin)["tensors"], key=lambda t: t["name"]):
    print(t["name"], t["dtype"], t["shape"], t["sha256"])'; }
hashes "$T/in.safetensors" >"$T/in.hashes"
temps() { find "$1" -name '.*.tpc-*' 2>/dev/null | wc -l; }

# the shim loads and holds a temporary's lock back (a convert with a 300 ms delay takes longer)
env LD_PRELOAD="$SHIM" TPC_TEST_LOCK_DELAY_MS=300 "$TPCONV" convert "$T/in.safetensors" -o "$T/probe.safetensors" -q 2>"$T/err"; rc=$?
grep -q "runtime does not come first" "$T/err" && skip_all "a sanitizer build does not take an LD_PRELOAD shim"
if [ "$rc" != 0 ] || ! hashes "$T/probe.safetensors" | cmp -s - "$T/in.hashes"; then
  bad "a run under the lock-delay shim writes its output" "exit $rc" "$(cat "$T/err")"; done_testing; exit; fi

for round in 1 2 3; do
  d=$T/set$round log=$T/swept$round
  mkdir -p "$d"
  env LD_PRELOAD="$SHIM" TPC_TEST_LOCK_DELAY_MS=1500 TPC_TEST_LOCK_LOG="$log" \
    "$TPCONV" shard "$T/in.safetensors" -o "$d" --rank 0 "${SHARD[@]}" 2>"$T/e1" & p1=$!
  # the first run's temporary exists and is not locked yet
  for i in $(seq 1000); do [ "$(temps "$d")" != 0 ] && break; sleep 0.005; done
  "$TPCONV" shard "$T/in.safetensors" -o "$d" --rank 1 "${SHARD[@]}" 2>"$T/e2"; r2=$?
  wait $p1; r1=$?
  if [ ! -s "$log" ]; then
    bad "round $round: the second run's sweep landed in the first one's window" "exits $r1 $r2" "$(cat "$T/e1" "$T/e2")"; continue; fi
  if [ "$r1" = 0 ] && [ "$r2" = 0 ] && [ -f "$d/tpconv-manifest.json" ] && [ "$(temps "$d")" = 0 ]; then
    ok "round $round: the sweep removed the first run's unlocked temporary; it made another, both runs exit 0, the set is complete, no temporary left"
  else
    bad "round $round: a run whose temporary was swept before its lock" "exits $r1 $r2" "$(ls -A "$d")" "$(cat "$T/e1" "$T/e2")"; continue
  fi
  "$TPCONV" merge "$d" -o "$T/m$round.safetensors" -q 2>"$T/err" && hashes "$T/m$round.safetensors" | cmp -s - "$T/in.hashes" \
    && ok "round $round: the set merges to its input" || bad "round $round: merge" "$(cat "$T/err")"
done

broken=0 notes=0
for round in $(seq 10); do
  d=$T/both$round
  "$TPCONV" shard "$T/in.safetensors" -o "$d" --rank 0 "${PLAN[@]}" 2>"$T/e1" & p1=$!
  "$TPCONV" shard "$T/in.safetensors" -o "$d" --rank 1 "${PLAN[@]}" 2>"$T/e2"; r2=$?
  wait $p1; r1=$?
  if [ "$r1" = 0 ] && [ "$r2" = 0 ] && [ -f "$d/tpconv-manifest.json" ] && [ -f "$d/model_tp00_pp00.safetensors" ] &&
     [ -f "$d/model_tp01_pp00.safetensors" ] && [ "$(temps "$d")" = 0 ]; then
    grep -q "another run writing '$d' completed the set and wrote its manifest" "$T/e1" "$T/e2" && notes=$((notes+1))
  else
    broken=$((broken+1)); diag "round $round: exits $r1 $r2, left: $(ls -A "$d" | tr '\n' ' ')" "$(cat "$T/e1" "$T/e2")"
  fi
done
[ $broken = 0 ] && ok "two --rank runs into one folder at once, 10 rounds: both exit 0, both rank files and the manifest there" \
  || bad "two --rank runs at once: $broken of 10 rounds left a set that is not whole"
[ $broken = 0 ] && [ $notes -gt 0 ] && ok "the run that found the set completed says so ($notes of 10 rounds; in the others one ran after the other)" \
  || bad "the completed-by-another-run note" "$notes of 10 rounds"
done_testing
