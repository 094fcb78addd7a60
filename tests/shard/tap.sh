# Shared by the shard test scripts (sourced after TPCONV, SRC and PY are set):
# the TAP harness (tests/lib/tap.sh), the skip without torch, the scratch
# folder $T, and same (two checkpoints hold the same tensors: name, dtype,
# shape, SHA-256).
H=$SRC/tests/shard
. "$SRC/tests/lib/tap.sh"
need_torch
tmpdir
same() {
  "$TPCONV" inspect --json --hash "$1" >"$T/a.json" 2>"$T/ierr" && "$TPCONV" inspect --json --hash "$2" >"$T/b.json" 2>>"$T/ierr" &&
    $PY "$H/same_tensors.py" "$T/a.json" "$T/b.json" >"$T/diff" 2>&1
}
