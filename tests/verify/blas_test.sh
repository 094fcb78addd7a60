#!/usr/bin/env bash
# OpenBLAS opened at the first product (verify/blas.c), not linked: tpconv
# needs no BLAS library to start; TPCONV_BLAS=none and a library that cannot
# be opened both compute with the hand-written loops (the build without
# OpenBLAS: the same digests), every run passing; in a build with OpenBLAS the
# default run's digests are OpenBLAS's, not the loops' (it was opened).
# usage: blas_test.sh VERIFY_DRIVER TPCONV SRC HAVE_BLAS(true|false)
set -u
DRIVER=$(realpath "$1") TPCONV=$(realpath "$2") SRC=$(realpath "$3") HAVE=$4
. "$SRC/tests/verify/common.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
make_models "$WORK"
cd "$WORK"
if readelf -d "$TPCONV" | grep -Eq 'NEEDED.*(openblas|blas|gfortran)'; then
  bad "tpconv links a BLAS library" "$(readelf -d "$TPCONV" | grep NEEDED)"
else ok "tpconv links no BLAS library (readelf -d)"; fi
for m in llama gpt2; do
  args=(--ref $m/model.safetensors --config $m/config.json --preset $m --tp 2 -q --seed 7)
  st=0
  "$DRIVER" "${args[@]}" --json def.json >out.txt 2>&1 || st=1
  TPCONV_BLAS=none "$DRIVER" "${args[@]}" --json none.json >>out.txt 2>&1 || st=1
  TPCONV_BLAS=$WORK/no-such-libopenblas.so.0 "$DRIVER" "${args[@]}" --json missing.json >>out.txt 2>&1 || st=1
  if [ $st != 0 ]; then bad "$m: a run failed" "$(head -20 out.txt)"; continue; fi
  if $PY - def.json none.json missing.json "$HAVE" <<'PYEOF'
import json, sys
d, n, m = (json.load(open(f))["checks"] for f in sys.argv[1:4])
have = sys.argv[4] == "true"
dig = lambda r: [(c["tensor"], c["check"], c["digest"]) for c in r]
assert dig(n) == dig(m), "a library that cannot be opened is not the loops"
assert (dig(d) != dig(n)) == have, "OpenBLAS %s" % ("not opened" if have else "used without a build with it")
print("# %d checks; default %s the loops' digests" % (len(d), "differs from" if have else "equals"))
PYEOF
  then ok "$m: TPCONV_BLAS=none and an unopenable BLAS run the loops$([ "$HAVE" = true ] && echo ", the default OpenBLAS")"
  else bad "$m: digests"; fi
done
done_testing
