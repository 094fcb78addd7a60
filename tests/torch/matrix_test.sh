#!/usr/bin/env bash
# Torch matrix test (issue 3): real torch.save (/usr/bin/python3, torch 1.13)
# writes every dtype, views with offsets, tied weights, transposed and
# Fortran-order tensors, Parameters, a module state_dict, nested non-tensor
# values, 0-d and empty tensors, quantized tensors, each in the zip and the
# legacy format (pickle protocols 1 to 5), plus a zip with more than 65535
# storages and files with bytes after their end. Each file's
# `tpconv inspect --json --hash` must give the names, dtypes, shapes and
# sha256 that torch.load gives, and `inspect` the line gen_matrix.py expects
# (the pickle protocol, the trailing bytes). Emits TAP, one line per file;
# then the same real files damaged: exact errors.
# usage: torch_matrix_test.sh TPCONV SRCDIR [CORPUS]
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
export PYTHONDONTWRITEBYTECODE=1
TORCHPY=${TPC_TORCH_PYTHON:-${TPC_PY:-/usr/bin/python3}}
H="$SRC/tests/torch"
. "$SRC/tests/lib/tap.sh"
tmpdir

if ! "$TORCHPY" -c 'import torch' 2>/dev/null; then
  n=1; echo "ok 1 # SKIP $TORCHPY cannot import torch"; echo "1..1"; exit 0
fi
SEED=${TPC_SEED:-$(date +%s)}
echo "# seed $SEED (set TPC_SEED to repeat); torch $("$TORCHPY" -c 'import torch; print(torch.__version__)')"

if ! "$TORCHPY" "$H/gen_matrix.py" "$T/m" "$SEED" > "$T/list" 2> "$T/gen.err"; then
  bad "gen_matrix.py writes the matrix" "$(tail -n 20 "$T/gen.err")"; echo "1..$n"; exit 1
fi
while IFS=$'\t' read -r f desc note; do
  "$TPCONV" inspect --json --hash "$T/m/$f" > "$T/out.json" 2> "$T/err"; rc=$?
  if [ "$rc" != 0 ]; then bad "matrix $f: $desc" "inspect exit $rc" "$(head -c 600 "$T/err")"; continue; fi
  if [ -n "$note" ] && ! "$TPCONV" inspect "$T/m/$f" 2>&1 | grep -qxF "# $note"; then
    bad "matrix $f: $desc" "inspect does not say: $note" "$("$TPCONV" inspect "$T/m/$f" 2>&1 | head -3)"; continue
  fi
  if "$TORCHPY" "$H/compare_inspect.py" "$T/m/expected/$f.json" - "$T/out.json" > "$T/diff"; then
    ok "matrix $f: $desc"
  else
    bad "matrix $f: $desc" "$(sed 's/^# //' "$T/diff")"
  fi
done < "$T/list"


# damaged real files: exact errors, exit 3
err_is() { # FILE WANT DESC: inspect fails with exit 3 and exactly this error line
  "$TPCONV" inspect "$1" > /dev/null 2> "$T/err"; rc=$?
  if [ "$rc" = 3 ] && [ "$(cat "$T/err")" = "tpconv: error: '$1': $2" ]; then ok "$3"
  else bad "$3" "exit $rc" "got:    $(head -c 600 "$T/err")" "wanted: tpconv: error: '$1': $2"; fi
}
Z=$T/m/nested.zip.pt L=$T/m/nested.legacy.pt
zn=$(stat -c %s "$Z") ln=$(stat -c %s "$L")
{ head -c $((zn - 100)) "$Z"; printf 'appended%.0s' $(seq 100); } > "$T/cut_trailing.pt"
err_is "$T/cut_trailing.pt" "failed finding the central directory: no end of central directory record, the file looks truncated (it is $((zn + 700)) bytes; an interrupted download or copy?) (at byte offset $((zn + 700)), $(printf 0x%x $((zn + 700))))" \
  "a zip cut inside its central directory, with bytes appended: still a truncated file"
{ cat "$Z"; head -c 65536 /dev/zero; } > "$T/too_much.pt"
err_is "$T/too_much.pt" "65536 unexpected bytes follow the end of central directory record (more than the 65535 that zip readers look through) (at byte offset $zn, $(printf 0x%x "$zn"))" \
  "a zip with 65536 bytes after its end records: refused, naming where they start"
head -c $((ln - 3)) "$L" > "$T/cut_legacy.pt"
"$TPCONV" inspect "$T/cut_legacy.pt" > /dev/null 2> "$T/err"; rc=$?
[ "$rc" = 3 ] && grep -qE "^tpconv: error: '$T/cut_legacy.pt': storage '[0-9]+' claims [0-9]+ elements but the file ends at $((ln - 3)) \(truncated\?\)" "$T/err" &&
  ok "a legacy file cut inside its last storage: still truncated" || bad "legacy cut" "exit $rc" "$(cat "$T/err")"
for p in 4 1; do
  f=$T/m/nested.legacy_p$p.pt
  # the magic number's last byte changed: a pickle, but not torch's
  "$TORCHPY" - "$f" "$T/garbage_p$p.pt" <<'PY'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
i = b.index(b'\x50\x19.') + 1 if b[0] == 0x80 else b.index(b'356L') + 2
b[i] ^= 1
open(sys.argv[2], 'wb').write(b)
PY
done
err_is "$T/garbage_p4.pt" "not a torch.save checkpoint: it starts with a pickle (protocol 4) that is not the legacy magic number 0x1950a86a20f9469cfc6c: its first value is something else (a plain pickle file?) (at byte offset 0, 0x0)" \
  "a protocol-4 legacy file whose magic number is damaged: refused"
err_is "$T/garbage_p1.pt" "not a torch.save checkpoint: neither a zip archive nor the legacy pickle format (at byte offset 0, 0x0)" \
  "a protocol-1 legacy file whose magic number is damaged: refused"
head -c 20 "$T/m/nested.legacy_p4.pt" > "$T/short_p4.pt"
err_is "$T/short_p4.pt" "not a torch.save checkpoint: it starts with a pickle (protocol 4) that is not the legacy magic number 0x1950a86a20f9469cfc6c: truncated pickle: FRAME of 13 bytes but only 9 left (at byte offset 2, 0x2)" \
  "a protocol-4 legacy file cut inside its magic pickle: refused"

echo "1..$n"
[ "$failed" = 0 ]
