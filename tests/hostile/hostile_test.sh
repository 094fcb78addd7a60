#!/usr/bin/env bash
# Hostile and broken inputs (issue 7): each file from gen_hostile.py is given
# to tpconv and must give exactly the expected exit status and stderr text,
# write nothing, run nothing, and stay within a memory bound.
# Emits TAP. usage: hostile_test.sh TPCONV SRCDIR CORPUS
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2") CORPUS=$(realpath "$3")
. "$SRC/tests/lib/tap.sh"
tmpdir

# Every run gets 20 s (quadratic passes over 100 000 metadata keys or index
# entries took 40 s before they were fixed: exit 124 fails the case).
# Memory bound (max RSS, KiB) for one run on any of these inputs; none is over
# 20 MB, so a run that needs more has allocated from a length it was told.
# Sanitizer builds map large shadow regions: no bound there.
MEM_KB=1200000
if grep -q __asan_init "$TPCONV" 2>/dev/null; then MEM_KB=0; fi
TIME=/usr/bin/time; [ -x "$TIME" ] || TIME=

REAL=("$CORPUS/torch/candle_test.pt"
      "$CORPUS/torch/burn_src__pytorch__tests__reader__test_data__legacy_shared_storage.pt"
      "$CORPUS/safetensors/st_samples_overall.safetensors"
      "$CORPUS/negative/pytorch113_TestSerialization.test_linear.scripted.pt")
for f in "${REAL[@]}"; do [ -f "$f" ] || { echo "1..0 # SKIP corpus file missing: $f"; exit 0; }; done
mkdir -p "$T/f" "$T/cwd"
if ! python3 "$SRC/tests/hostile/gen_hostile.py" "$T/f" "${REAL[@]}" > "$T/cases" 2> "$T/generr"; then
  bad "gen_hostile.py" "$(cat "$T/generr")"; echo "1..$n"; exit 1
fi

while IFS=$'\t' read -r file args want sub wantout; do
  path=$T/f/$file
  outbase=$T/f/$file.out
  # "@" in args is the input, "@.out.x" an output beside it; leading VAR=value words are environment
  cmd=(); envs=()
  for a in $args; do
    case $a in
      *=*) [ ${#cmd[@]} = 0 ] && { envs+=("$a"); continue; } ;;
    esac
    a=${a//@/$path}
    a=${a//%ST%/${REAL[2]}}
    cmd+=("$a")
  done
  sum_before=$(cksum < "$path")
  # run from an empty folder: a payload that ran ("touch PWNED") would leave a file there
  if [ -n "$TIME" ]; then
    (cd "$T/cwd" && env "${envs[@]}" timeout 20 "$TIME" -o "$T/rss" -f %M "$TPCONV" "${cmd[@]}" >"$T/out" 2>"$T/err"); rc=$?
  else
    (cd "$T/cwd" && env "${envs[@]}" timeout 20 "$TPCONV" "${cmd[@]}" >"$T/out" 2>"$T/err"); rc=$?
    echo 0 > "$T/rss"
  fi
  d="$file: ${args//@/FILE}"
  if [ "$rc" != "$want" ]; then bad "$d: exit $want" "exit $rc" "stderr: $(head -c 600 "$T/err")"; continue; fi
  if [ "$want" != 0 ]; then
    # one error line that names the file (quoted, or as the origin of a rule)
    { grep -q "^tpconv: error: '" "$T/err" || { grep -q "^tpconv: error: " "$T/err" && grep -qF -- "$(basename "$path")" "$T/err"; }; } ||
      { bad "$d: error line names the file" "$(head -c 600 "$T/err")"; continue; }
  fi
  if [ "$sub" != "-" ] && ! grep -qF -- "$sub" "$T/err"; then
    bad "$d: stderr has the reason" "wanted: $sub" "got: $(head -c 600 "$T/err")"; continue
  fi
  if [ "$wantout" != "-" ] && ! grep -qF -- "$wantout" "$T/out"; then
    bad "$d: stdout" "wanted: $wantout" "got: $(head -c 600 "$T/out")"; continue
  fi
  if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$T/err"; then
    bad "$d: no control characters from the file reach the terminal" "$(head -c 300 "$T/err" | od -c | head -5)"; continue
  fi
  if [ -e "$T/cwd/PWNED" ] || [ -n "$(ls -A "$T/cwd")" ]; then
    bad "$d: nothing executed, nothing written in the working folder" "$(ls -A "$T/cwd")"; continue
  fi
  if [ "$want" != 0 ] && { ls "$outbase"* >/dev/null 2>&1 || ls -a "$(dirname "$path")" | grep -q '\.tpc-'; }; then
    bad "$d: no output and no temporary file after a refusal" "$(ls -a "$(dirname "$path")")"; continue
  fi
  [ "$(cksum < "$path")" = "$sum_before" ] || { bad "$d: input unchanged"; continue; }
  rss=$(tail -n 1 "$T/rss")
  if [ "$MEM_KB" != 0 ] && [ "${rss:-0}" -gt "$MEM_KB" ] 2>/dev/null; then
    bad "$d: memory stays bounded" "max RSS ${rss} KiB > ${MEM_KB} KiB"; continue
  fi
  rm -f "$outbase"*
  ok "$d"
done < "$T/cases"

echo "1..$n"
[ "$failed" = 0 ]
