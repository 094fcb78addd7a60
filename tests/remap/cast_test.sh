#!/usr/bin/env bash
# Casts bit for bit against real torch (issue 4): `tpconv convert --dtype DST`
# on safetensors files of every source dtype (and a strided torch file), each
# output tensor compared with torch's .to(DST) of the same input
# (cast_torch.py says which values). Emits TAP; prints its seed.
# usage: cast_test.sh TPCONV SRCDIR [SEED]
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2") SEED=${3:-${TPC_SEED:-$RANDOM}}
export PYTHONDONTWRITEBYTECODE=1
PY=${TPC_PY:-/usr/bin/python3}
H="$SRC/tests/remap"
. "$SRC/tests/lib/tap.sh"
tmpdir

if ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
  skip "no torch in $PY"; echo "1..$n"; exit 0
fi
echo "# seed $SEED"
if ! "$PY" "$H/cast_torch.py" gen "$T" "$SEED" 2>"$T/err"; then
  bad "generate inputs" "$(cat "$T/err")"; echo "1..$n"; exit 1
fi
: > "$T/jobs"
# conv DESC IN OUT DST [ints] -- tpconv ARGS...: convert, queue the torch check
conv() {
  local d=$1 in=$2 out=$3 dst=$4 ints=$5; shift 6
  "$TPCONV" convert "$in" -o "$out" "$@" 2>"$T/err"; local rc=$?
  if [ "$rc" != 0 ]; then bad "$d" "tpconv convert exit $rc" "$(cat "$T/err")"; return; fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$d" "$in" "$out" "$dst" "$ints" >> "$T/jobs"
}

for src in f32 f64 f16 bf16; do
  for dst in f32 f64 f16 bf16; do
    [ "$src" = "$dst" ] && continue
    conv "$src -> $dst bit-identical with torch .to()" "$T/in_$src.safetensors" "$T/o_${src}_$dst.safetensors" "$dst" "" -- --dtype "$dst"
  done
done

# strided and sliced views from a torch file: gather, then cast
if "$TPCONV" --help | grep -q 'Formats read.*torch'; then
  for dst in bf16 f16 f64; do
    conv "strided views f32 -> $dst bit-identical with torch" "$T/strided.pth" "$T/s_$dst.safetensors" "$dst" "" -- --dtype "$dst"
  done
else
  skip "strided views: this build reads no torch files"
fi

# integers and bool: never cast by --dtype; cast when a rule says "ints"
for src in i64 i32 i16 i8 u8 bool; do
  "$TPCONV" convert "$T/in_$src.safetensors" -o "$T/k_$src.safetensors" --dtype bf16 2>"$T/err"; rc=$?
  if [ "$rc" = 0 ] && cmp -s "$T/in_$src.safetensors" "$T/k_$src.safetensors"; then ok "$src is not cast by --dtype bf16 (file byte-identical)"
  else bad "$src is not cast by --dtype bf16" "exit $rc" "$(cat "$T/err")"; fi
  for dst in f32 f64 f16 bf16; do
    printf '{"rules": [{"dtype": "%s", "ints": true}]}\n' "$dst" > "$T/ints_$dst.json"
    conv "$src -> $dst with \"ints\": true bit-identical with torch" "$T/in_$src.safetensors" "$T/i_${src}_$dst.safetensors" "$dst" ints -- --rules "$T/ints_$dst.json"
  done
done

# the checker itself: a copy of a good output with one changed byte must fail
if [ -f "$T/o_f32_bf16.safetensors" ]; then
  cp "$T/o_f32_bf16.safetensors" "$T/corrupt.safetensors"
  off=$(( $(stat -c %s "$T/corrupt.safetensors") - 3 )); b=$(od -An -tu1 -j "$off" -N1 "$T/corrupt.safetensors")
  printf "\\x$(printf %02x $(( 255 - b )))" | dd of="$T/corrupt.safetensors" bs=1 seek="$off" conv=notrunc status=none
  printf 'selftest: the checker finds one changed byte\t%s\t%s\tbf16\t\n' "$T/in_f32.safetensors" "$T/corrupt.safetensors" >> "$T/jobs"
fi

# one torch process checks every queued output
"$PY" "$H/cast_torch.py" check-all "$T/jobs" > "$T/chk" 2>&1
detail=()
while IFS= read -r l; do
  case "$l" in
    "ok - selftest: "*) bad "${l#ok - }" "a corrupted output passed the check"; detail=() ;;
    "not ok - selftest: "*) ok "${l#not ok - }"; detail=() ;;
    "ok - "*) ok "${l#ok - }"; detail=() ;;
    "not ok - "*) bad "${l#not ok - }" "${detail[@]}"; detail=() ;;
    "#"*) detail+=("${l#\# }") ;;
    *) detail+=("$l") ;;
  esac
done < "$T/chk"
[ "${#detail[@]}" = 0 ] || bad "checker output ends with unreported lines" "${detail[@]}"
want=$(wc -l < "$T/jobs"); got=$(grep -cE '^(not )?ok - ' "$T/chk")
[ "$want" = "$got" ] && ok "every queued output was checked ($want)" || bad "checked $got of $want outputs" "$(tail -n 20 "$T/chk")"

# a later per-pattern --dtype wins over an earlier one
"$TPCONV" convert "$T/in_f32.safetensors" -o "$T/o2.safetensors" --dtype bf16 --dtype 'special=f16' 2>"$T/err"; rc=$?
if [ "$rc" != 0 ]; then bad "--dtype bf16 --dtype 'special=f16': convert" "exit $rc" "$(cat "$T/err")"
else
  "$PY" - "$H" "$T" <<'EOF' > "$T/chk" 2>&1
import sys
sys.path.insert(0, sys.argv[1])
from cast_torch import read_st, raw
T = sys.argv[2]
o2, bf, hf = (read_st(f'{T}/{f}.safetensors') for f in ('o2', 'o_f32_bf16', 'o_f32_f16'))
good = o2['special'].dtype == hf['special'].dtype and raw(o2['special']) == raw(hf['special']) and \
       all(raw(o2[k]) == raw(bf[k]) for k in ('bits', 'normal'))
sys.exit(0 if good else 1)
EOF
  [ $? = 0 ] && ok "--dtype bf16 --dtype 'special=f16': the later, per-pattern rule wins" \
             || bad "--dtype bf16 --dtype 'special=f16': the later, per-pattern rule wins" "$(cat "$T/chk")"
fi

# what transformers keeps in f32 when it loads a model in bf16 (ERNIE 4.5 MoE's
# router and its correction bias) stays f32, and config.json says bfloat16
A=$SRC/tests/gguf/arch
"$TPCONV" convert "$A/tiny-ernie4_5-moe/" -o "$T/ernie/" --dtype bf16 -q 2>"$T/err"; rc=$?
kept=$("$TPCONV" inspect "$T/ernie/" 2>/dev/null | awk '!/^#/ && $2 == "F32" {print $1}' | sort | tr '\n' ' ')
want="model.layers.1.mlp.gate.weight model.layers.1.mlp.moe_statics.e_score_correction_bias "
[ "$rc" = 0 ] && [ "$kept" = "$want" ] && grep -q '"dtype": "bfloat16"' "$T/ernie/config.json" &&
  ok "--dtype bf16 of ERNIE 4.5 MoE: its router and correction bias stay f32, config.json says bfloat16" ||
  bad "--dtype bf16 of ERNIE 4.5 MoE keeps what transformers keeps in f32" "exit $rc, f32: $kept" "$(grep dtype "$T/ernie/config.json")" "$(cat "$T/err")"
# gpt-oss keeps its norms in f32 under f16 only
for dt in f16 bf16; do
  "$TPCONV" convert "$A/tiny-gpt-oss/" -o "$T/oss-$dt/" --dtype $dt -q 2>"$T/err"
  k=$("$TPCONV" inspect "$T/oss-$dt/" 2>/dev/null | awk '!/^#/ && $2 == "F32"' | grep -c norm)
  want=$([ $dt = f16 ] && echo 5 || echo 0)
  [ "$k" = "$want" ] && ok "--dtype $dt of gpt-oss: $want norms left in f32" || bad "--dtype $dt of gpt-oss: norms in f32" "$k, want $want" "$(cat "$T/err")"
done

echo "1..$n"
[ "$failed" = 0 ]
