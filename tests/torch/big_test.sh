#!/usr/bin/env bash
# Slow test (suite 'slow'): real torch.save writes a checkpoint whose single
# storage is larger than 4 GiB (plus a view starting past 4 GiB and a record
# stored after it); tpconv reads it, converts it to safetensors and back to
# torch, and every step keeps the sha256 of every tensor (tpconv inspect --hash);
# real torch.load(weights_only=True) reads tpconv's torch output. Needs ~9 GiB
# of free disk in TMPDIR (TPC_BIG_TMPDIR overrides) and ~10 GiB of memory;
# the big files are removed as soon as they are no longer needed.
# Emits TAP. usage: torch_big_test.sh TPCONV SRCDIR [CORPUS]
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
export PYTHONDONTWRITEBYTECODE=1
TORCHPY=${TPC_TORCH_PYTHON:-${TPC_PY:-/usr/bin/python3}}
H="$SRC/tests/torch"
. "$SRC/tests/lib/tap.sh"
tmpdir "${TPC_BIG_TMPDIR:-${TMPDIR:-/tmp}}/tpc-big.XXXXXX"
t0=$SECONDS
el() { echo "# ${1}: $((SECONDS - t0)) s"; }

if ! "$TORCHPY" -c 'import torch' 2>/dev/null; then skip "$TORCHPY cannot import torch"; echo "1..$n"; exit 0; fi
avail=$(df -Pk "$T" | awk 'NR==2 {print $4}')
if [ "${avail:-0}" -lt $((10 * 1024 * 1024)) ]; then skip "less than 10 GiB free in $(dirname "$T")"; echo "1..$n"; exit 0; fi

# inspect_cmp DESC FILE: tpconv inspect --json --hash FILE equals $T/exp.json
inspect_cmp() {
  "$TPCONV" inspect --json --hash "$2" > "$T/insp.json" 2> "$T/err"; local rc=$?
  if [ "$rc" != 0 ]; then bad "$1" "inspect exit $rc" "$(head -c 600 "$T/err")"; return 1; fi
  if "$TORCHPY" "$H/compare_inspect.py" "$T/exp.json" - "$T/insp.json" > "$T/diff"; then ok "$1"; return 0; fi
  bad "$1" "$(sed 's/^# //' "$T/diff")"; return 1
}
conv() { # DESC IN OUT
  "$TPCONV" convert "$2" -o "$3" 2> "$T/err"; local rc=$?
  if [ "$rc" = 0 ]; then ok "$1"; return 0; fi
  bad "$1" "convert exit $rc" "$(head -c 600 "$T/err")"; rm -f "$3"; return 1
}

for fmt in zip legacy; do
  if ! "$TORCHPY" "$H/gen_big.py" "$T/big.pt" $([ $fmt = legacy ] && echo legacy) > "$T/exp.json" 2> "$T/gen.err"; then
    bad "torch.save writes a >4 GiB $fmt checkpoint" "$(tail -n 5 "$T/gen.err")"; rm -f "$T/big.pt"; continue
  fi
  el "torch.save ($fmt, $(du -h "$T/big.pt" | cut -f1))"
  inspect_cmp ">4 GiB $fmt torch file: inspect --hash equals torch" "$T/big.pt"; el inspect
  if conv ">4 GiB $fmt torch -> safetensors" "$T/big.pt" "$T/big.safetensors"; then
    el convert; rm -f "$T/big.pt"
    inspect_cmp ">4 GiB $fmt torch -> safetensors: hashes kept" "$T/big.safetensors"; el inspect
    if conv ">4 GiB $fmt torch -> safetensors -> torch" "$T/big.safetensors" "$T/big2.pt"; then
      el convert; rm -f "$T/big.safetensors"
      inspect_cmp ">4 GiB $fmt torch -> safetensors -> torch: hashes kept" "$T/big2.pt"; el inspect
      if "$TORCHPY" "$H/gen_big.py" --check "$T/big2.pt" "$T/exp.json" > "$T/diff" 2>&1; then
        ok ">4 GiB $fmt: real torch.load(weights_only=True) reads tpconv's torch file, equal"
      else
        bad ">4 GiB $fmt: real torch.load(weights_only=True) reads tpconv's torch file, equal" "$(sed 's/^# //' "$T/diff" | tail -n 8)"
      fi
      el "torch.load"
    fi
  fi
  rm -f "$T/big.pt" "$T/big.safetensors" "$T/big2.pt"
done

echo "1..$n"
[ "$failed" = 0 ]
