# Shared by the shard test scripts (sourced after TPCONV, SRC and PY are set):
# TAP counters and ok/bad/skip, the scratch folder $T (removed on exit), run
# (exit status in $rc and returned, so that a chain `run A && run B && check`
# stops at the step that failed; output in $T/out and $T/err; a failed step in
# $step, which bad reports), same (two checkpoints hold the same tensors: name,
# dtype, shape, SHA-256), and the skip without torch.
H=$SRC/tests/shard
n=0 failed=0
ok()   { n=$((n+1)); echo "ok $n - $1"; }
bad()  {
  n=$((n+1)); failed=$((failed+1)); echo "not ok $n - $1"; shift
  for l in "$@"; do printf '%s\n' "$l" | sed 's/^/# /'; done
  [ -z "${step:-}" ] || echo "# failed step: $step"
}
skip() { n=$((n+1)); echo "ok $n - $1 # SKIP $2"; }
if ! $PY -c 'import torch' 2>/dev/null; then echo "1..0 # SKIP real torch (/usr/bin/python3 -c 'import torch') is not available"; exit 0; fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
step=
run() { step=; "$@" >"$T/out" 2>"$T/err"; rc=$?; [ "$rc" = 0 ] || step="exit $rc: ${*//$T\//}"; return "$rc"; }
same() {
  "$TPCONV" inspect --json --hash "$1" >"$T/a.json" 2>"$T/ierr" && "$TPCONV" inspect --json --hash "$2" >"$T/b.json" 2>>"$T/ierr" &&
    $PY "$H/same_tensors.py" "$T/a.json" "$T/b.json" >"$T/diff" 2>&1
}
