#!/usr/bin/env bash
# Run every registered meson test in each build dir given; print per-suite
# results and end with the line "N passed, N failed[, N skipped]".
# The first build runs every suite but "slow" (make test-slow); later ones (the sanitizer build) run the
# 'san' suite: what finds memory errors (the unit tests, every reader on its
# fuzz corpus, the hostile files, the real torch corpus, the fault paths, the
# CLI, and shard/merge/verify of small models through the layouts, the MoE
# and dense presets and direct I/O), not the large and repeated runs that
# exercise the same code; there a test runs one representative of each matrix
# ($SAN, tests/lib/tap.sh) and LeakSanitizer runs where leaks hide (the
# no_leak_check note in tests/meson.build). The ten slowest tests of each
# build end the output.
set -u
pass=0 fail=0 skip=0
# the tests' Python checks run as forks of one process that imported torch once
# (tests/lib/pyfork.py: a few hundred checks, 1.6 s of CPU each to import it)
if [ -x /usr/bin/python3 ] && [ -z "${TPC_PY:-}" ]; then
  pyd=$(mktemp -d)
  /usr/bin/python3 "$(cd "$(dirname "$0")" && pwd)/lib/pyfork.py" --serve "$pyd/sock" $$ &
  pysrv=$!
  trap 'kill $pysrv 2>/dev/null; rm -rf "$pyd"' EXIT
  export TPC_PY="$(cd "$(dirname "$0")" && pwd)/lib/pyfork.py" TPC_PY_SOCK="$pyd/sock"
  # its client in C where the first build made it (a Python client costs an
  # interpreter's start, ~40 ms, before each check)
  [ -x "${1:-}/tests/pyfork-client" ] && TPC_PY=$(cd "$1" && pwd)/tests/pyfork-client
  # a bare `python3` in a test is Debian's too, through the same client: the
  # first python3 on PATH may be another (pyenv's shim, a shell script that
  # costs ~0.7 s of CPU per call on the test machines, without Debian's
  # packages)
  mkdir "$pyd/bin"
  case $TPC_PY in *pyfork-client) ln -s "$TPC_PY" "$pyd/bin/python3" ;; *) ln -s /usr/bin/python3 "$pyd/bin/python3" ;; esac
  export PATH="$pyd/bin:$PATH"
fi
# OpenMP threads that wait sleep, as verify's do by default (cmd/main.c): the
# tests' models are tiny, and libgomp's default spins a waiting thread after
# each parallel region - a third of a tiny shard's CPU time (53 -> 35 ms),
# shard-sets 98 -> 79 CPU-s. Bytes written do not depend on it; verify's own
# choice of the policy is checked with it unset (tests/verify/cli_test.sh).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# one test more than the cores: a test that waits (faults writes 300 MB
# files, mpirun's and the interrupt loop's sleeps) leaves its core to another
# (TPC_TEST_JOBS to choose)
jobs=${TPC_TEST_JOBS:-$(( $(nproc) + 1 ))}
fails= slow=
first=1
for b in "$@"; do
  # the first build: every suite but 'slow' (the records over 4 GiB: `make
  # test-slow`, TPC_TEST_SUITE=slow); later ones the 'san' suite
  case ${TPC_TEST_SUITE:-} in
    "") extra=(--no-suite slow) ;;
    *) extra=(--suite "$TPC_TEST_SUITE") ;;
  esac
  [ "$first" = 1 ] || extra=(--suite san)
  first=0
  echo "== meson test in $b"
  log=$(mktemp)
  # sanitizer builds: fail on the first report, no leak noise from Python subprocesses
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    meson test -C "$b" --print-errorlogs --num-processes "$jobs" --no-rebuild "${extra[@]}" > "$log" 2>&1
  rc=$?
  sed -n '/^Summary of Failures/,$p;/^Ok:/,$p' "$log" | head -n 60
  grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT|ERROR)' "$log" | head -n 40
  n() { grep -E "^$1:" "$log" | tail -n 1 | awk '{print $NF}'; }
  ok=$(n 'Ok'); xf=$(n 'Expected Fail'); f=$(n 'Fail'); up=$(n 'Unexpected Pass'); sk=$(n 'Skipped'); to=$(n 'Timeout')
  # count individual checks (TAP lines of cmocka and the shell tests) from the log;
  # a test program that dies without printing "not ok" still counts through meson's Fail
  tl="$b/meson-logs/testlog.txt"
  tok=$(grep -cE '^ok [0-9]+' "$tl" 2>/dev/null); tnok=$(grep -cE '^not ok [0-9]+' "$tl" 2>/dev/null)
  pass=$((pass + ${tok:-0} + ${xf:-0}))
  fail=$((fail + ${tnok:-0} + ${f:-0} + ${up:-0} + ${to:-0}))
  skip=$((skip + ${sk:-0}))
  if [ "$rc" != 0 ] && [ "${f:-0}" = 0 ] && [ "${to:-0}" = 0 ]; then
    echo "meson test failed to run in $b (exit $rc):"; tail -n 30 "$log"; fail=$((fail + 1))
  fi
  # the failed checks with their first comment lines, for the summary below
  # (CI keeps only the end of this output)
  f1=$(grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT|ERROR)' "$log" | sed "s|^ *|$b: |" | awk '!seen[$0]++' | head -n 10
    awk -v b="$b" '/^test: /{t=$NF} /^not ok [0-9]+/{print b ": " t ": " substr($0, 1, 200); k=4; next}
    k>0 && /^#/{print "    " substr($0, 1, 200); k--; next} {k=0}
    /SUMMARY: [A-Za-z]+Sanitizer|: runtime error: /{print b ": " t ": " substr($0, 1, 200)}' "$tl" 2>/dev/null | head -n 40)
  [ -n "$f1" ] && fails+="$f1"$'\n'
  slow+=$(python3 - "$b" 2>/dev/null <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1] + "/meson-logs/testlog.json"):
    d = json.loads(line)
    rows.append((d.get("duration", 0), d["name"]))
for t, name in sorted(rows, reverse=True)[:10]:
    print("%s: %7.1f s  %s" % (sys.argv[1], t, name))
PY
)$'\n'
  rm -f "$log"
done
echo "== the slowest tests"
printf '%s' "$slow"
if [ -n "$fails" ]; then echo "== failed checks"; printf '%s' "$fails" | head -n 60; fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
