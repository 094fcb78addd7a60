#!/usr/bin/env bash
# Run libFuzzer targets one after another (`make fuzz`).
# usage: run_fuzz.sh BUILD SECONDS [TARGET...]     (default: every fuzz_* in BUILD)
#
# Each target runs SECONDS under `nice -n 19` with the committed corpus
# (tests/fuzz/corpus/<t>, read only) behind a scratch corpus in
# BUILD/fuzz-work/<t> that receives new finds; crashes, timeouts, leaks and
# over-limit allocations land in BUILD/fuzz-artifacts/<t>/. Copy one into
# tests/fuzz/corpus/<t>/ as regress-<what> once it is fixed. Prints one line
# per target (execs, coverage, findings) and exits 1 if any target found
# something.
set -u
B=$(realpath "$1") SECS=$2; shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
targets=("$@")
if [ ${#targets[@]} = 0 ]; then
  for f in "$B"/tests/fuzz/fuzz_*; do [ -f "$f" ] && [ -x "$f" ] && targets+=("$(basename "$f" | sed 's/^fuzz_//')"); done
fi
# per-target input size limit and dictionary
maxlen() { case $1 in zip|torch_zip|torch_legacy|safetensors|ds_universal) echo 65536;; pickle) echo 16384;; *) echo 16384;; esac; }
dict() { case $1 in pickle|torch_legacy) echo pickle;; zip|torch_zip|ds_universal) echo zip;; *) echo json;; esac; }
found=0
printf '# %-13s %6s %11s %8s %6s %7s %s\n' target secs execs exec/s cov corpus findings
for t in "${targets[@]}"; do
  exe=$B/tests/fuzz/fuzz_$t
  [ -x "$exe" ] || { echo "no fuzz target $exe (build with -Dfuzzing=true)"; found=1; continue; }
  work=$B/fuzz-work/$t art=$B/fuzz-artifacts/$t log=$B/fuzz-logs/$t.log
  mkdir -p "$work" "$art" "$(dirname "$log")"
  d=$HERE/dict/$(dict "$t").dict
  # -malloc_limit_mb: one allocation over 1 GiB from a <=64 KiB input is a finding
  # (every parser must check lengths against the bytes left before allocating)
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  nice -n 19 "$exe" "$work" "$HERE/corpus/$t" -dict="$d" -max_len="$(maxlen "$t")" \
    -max_total_time="$SECS" -timeout=20 -report_slow_units=30 -rss_limit_mb=2560 -malloc_limit_mb=1024 \
    -artifact_prefix="$art/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  eps=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -oE '(DONE|#[0-9]+ +(NEW|REDUCE|pulse|INITED)) +cov: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+$')
  corp=$(grep -oE 'corp: [0-9]+/[0-9a-zA-Z]+' "$log" | tail -n 1 | sed 's/corp: //')
  nart=$(find "$art" -type f | wc -l)
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -oE '[0-9]+ second' | grep -oE '[0-9]+')
  what=none
  if [ "$rc" != 0 ] || [ "$nart" != 0 ]; then
    found=1; what="rc=$rc, $nart artifact(s) in $art, log $log"
  fi
  printf '  %-13s %6s %11s %8s %6s %7s %s\n' "$t" "${secs:-?}" "${execs:-?}" "${eps:-?}" "${cov:-?}" "${corp:-?}" "$what"
done
exit $found
