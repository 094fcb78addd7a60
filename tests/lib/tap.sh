# The TAP harness every shell test sources, as git's t/ scripts source
# test-lib.sh: `. "$SRC/tests/lib/tap.sh"` after SRC is set.
#
#   ok DESC                 one passing check
#   bad DESC [LINE...]      one failing check; each LINE (multi-line strings too)
#                           follows as a "# " comment
#   skip DESC [REASON]      a skipped check: "ok N - DESC # SKIP REASON", or
#                           "ok N # SKIP DESC" without a reason
#   diag LINE...            "# " comment lines
#   skip_all REASON         "1..0 # SKIP REASON" and exit 0 (nothing could run)
#   need_torch [PY]         skip_all unless PY (default $PY, else /usr/bin/python3)
#                           imports torch
#   tmpdir [MKTEMP-ARGS]    the scratch folder $T, removed on exit
#   run CMD...              CMD's exit status in $rc, its stdout in $T/out and
#                           stderr in $T/err
#   check DESC CMD...       ok when CMD succeeds, else bad with the first 600
#                           bytes of its output (stdout and stderr)
#   done_testing            the plan line "1..N"; the script's status is 0 only
#                           when no check failed
#
#   $SAN                    1 in a sanitizer build (TPC_TEST_SAN, set by
#                           tests/meson.build): a matrix the normal build runs
#                           whole (every family, outtype, tp, layout) runs one
#                           representative of each code path there
#
# $n counts the checks, $failed the failing ones. A script may define its own
# run or check after sourcing (the later definition wins).
n=0 failed=0 SAN=${TPC_TEST_SAN:-0}
ok()   { n=$((n+1)); echo "ok $n - $1"; }
bad()  { n=$((n+1)); failed=$((failed+1)); echo "not ok $n - $1"; shift; [ $# = 0 ] || diag "$@"; }
skip() { n=$((n+1)); if [ $# -ge 2 ]; then echo "ok $n - $1 # SKIP $2"; else echo "ok $n # SKIP $1"; fi; }
diag() { local l; for l in "$@"; do printf '%s\n' "$l" | sed 's/^/# /'; done; }
skip_all() { echo "1..0 # SKIP $1"; exit 0; }
need_torch() {
  local py=${1:-${PY:-/usr/bin/python3}}
  "$py" -c 'import torch' 2>/dev/null || skip_all "real torch ($py -c 'import torch') is not available"
}
tmpdir() { T=$(mktemp -d "$@") || exit 1; trap 'rm -rf "$T"' EXIT; }
run()   { "$@" >"$T/out" 2>"$T/err"; rc=$?; }
check() { local d=$1; shift; if "$@" >"$T/out" 2>&1; then ok "$d"; else bad "$d" "$(head -c 600 "$T/out")"; fi; }
done_testing() { echo "1..$n"; [ "$failed" = 0 ]; }
