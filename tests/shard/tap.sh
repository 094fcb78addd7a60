# Shared by the shard test scripts (sourced after TPCONV, SRC and PY are set):
# the TAP harness (tests/lib/tap.sh), the skip without torch, the scratch
# folder $T (same, two checkpoints holding the same tensors, is
# tests/lib/tap.sh's). Here run returns the command's exit status (also in $rc),
# so that a chain `run A && run B && check` stops at the step that failed,
# which bad then reports as "failed step" (issue 41 item 17).
H=$SRC/tests/shard
. "$SRC/tests/lib/tap.sh"
need_torch
tmpdir
step=
run() { step=; "$@" >"$T/out" 2>"$T/err"; rc=$?; [ "$rc" = 0 ] || step="exit $rc: ${*//$T\//}"; return "$rc"; }
bad() {
  n=$((n+1)); failed=$((failed+1)); echo "not ok $n - $1"; shift; [ $# = 0 ] || diag "$@"
  [ -z "${step:-}" ] || echo "# failed step: $step"
}
