#!/usr/bin/env bash
# Torch matrix test (issue 3): real torch.save (/usr/bin/python3, torch 1.13)
# writes every dtype, views with offsets, tied weights, transposed and
# Fortran-order tensors, Parameters, a module state_dict, nested non-tensor
# values, 0-d and empty tensors, quantized tensors, each in the zip and the
# legacy format, plus a zip with more than 65535 storages. Each file's
# `tpconv inspect --json --hash` must give the names, dtypes, shapes and
# sha256 that torch.load gives. Emits TAP, one line per file.
# usage: torch_matrix_test.sh TPCONV SRCDIR [CORPUS]
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
export PYTHONDONTWRITEBYTECODE=1
TORCHPY=${TPC_TORCH_PYTHON:-/usr/bin/python3}
H="$SRC/tests/torch"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
n=0 failed=0
ok()  { n=$((n+1)); echo "ok $n - $1"; }
bad() { n=$((n+1)); failed=$((failed+1)); echo "not ok $n - $1"; shift; for l in "$@"; do printf '%s\n' "$l" | sed 's/^/# /'; done; }

if ! "$TORCHPY" -c 'import torch' 2>/dev/null; then
  n=1; echo "ok 1 # SKIP $TORCHPY cannot import torch"; echo "1..1"; exit 0
fi
SEED=${TPC_SEED:-$(date +%s)}
echo "# seed $SEED (set TPC_SEED to repeat); torch $("$TORCHPY" -c 'import torch; print(torch.__version__)')"

if ! "$TORCHPY" "$H/gen_matrix.py" "$T/m" "$SEED" > "$T/list" 2> "$T/gen.err"; then
  bad "gen_matrix.py writes the matrix" "$(tail -n 20 "$T/gen.err")"; echo "1..$n"; exit 1
fi
while IFS=$'\t' read -r f desc; do
  "$TPCONV" inspect --json --hash "$T/m/$f" > "$T/out.json" 2> "$T/err"; rc=$?
  if [ "$rc" != 0 ]; then bad "matrix $f: $desc" "inspect exit $rc" "$(head -c 600 "$T/err")"; continue; fi
  if "$TORCHPY" "$H/compare_inspect.py" "$T/m/expected.json" "$f" "$T/out.json" > "$T/diff"; then
    ok "matrix $f: $desc"
  else
    bad "matrix $f: $desc" "$(sed 's/^# //' "$T/diff")"
  fi
done < "$T/list"

echo "1..$n"
[ "$failed" = 0 ]
