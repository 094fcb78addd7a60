# Shared by the shard test scripts (sourced after TPCONV, SRC and PY are set):
# the TAP harness (tests/lib/tap.sh), the skip without torch, the scratch
# folder $T, and same (two checkpoints hold the same tensors: name, dtype,
# shape, SHA-256; why not in $T/diff, an inspect's error too, never an
# earlier call's). Here run returns the command's exit status (also in $rc),
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
same() {
  "$TPCONV" inspect --json --hash "$1" >"$T/a.json" 2>"$T/ierr" && "$TPCONV" inspect --json --hash "$2" >"$T/b.json" 2>>"$T/ierr" ||
    { { echo "same: cannot inspect both:"; cat "$T/ierr"; } >"$T/diff"; return 1; }
  $PY "$H/same_tensors.py" "$T/a.json" "$T/b.json" >"$T/diff" 2>&1
}
