#!/usr/bin/env bash
# Torch corpus test (issue 3): every file in CORPUS/torch must give exactly the
# names, dtypes, shapes and sha256 of CORPUS/expected_torch.json (quantized
# tensors: names, dtypes and shapes), and every file in CORPUS/negative must be
# refused with exit 3, a message naming the file, and nothing written.
# Emits TAP, one line per file. usage: torch_corpus_test.sh TPCONV SRCDIR CORPUS
# Needs only a python3 with json (no torch): the expectations are precomputed.
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2") CORPUS=$(realpath "$3")
export PYTHONDONTWRITEBYTECODE=1
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
H="$SRC/tests/torch"
. "$SRC/tests/lib/tap.sh"
tmpdir

EXP="$CORPUS/expected_torch.json"
if ! "$PY" -c 'import json' 2>/dev/null; then
  skip "no python3 to compare JSON"; echo "1..$n"; exit 0
fi

# -- positive corpus: inspect --json --hash against expected_torch.json
"$PY" -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))))' "$EXP" > "$T/keys"
# every file inspected first, then compared in one Python process (a test's
# Python call costs ~70-90 ms of CPU: 111 of them in two builds)
declare -A KEY
while read -r b; do KEY[$b]=1; done < "$T/keys"
mkdir "$T/i"
: > "$T/batch"
for f in "$CORPUS"/torch/*; do
  b=${f##*/}
  [ -n "${KEY[$b]:-}" ] || continue
  "$TPCONV" inspect --json --hash "$f" > "$T/i/$b.json" 2> "$T/i/$b.err" && printf '%s\t%s\n' "$b" "$T/i/$b.json" >> "$T/batch"
done
"$PY" "$H/compare_inspect.py" "$EXP" --batch "$T/batch" 2> "$T/batcherr" || bad "compare_inspect.py --batch" "$(cat "$T/batcherr")"
for f in "$CORPUS"/torch/*; do
  b=${f##*/}
  if [ -z "${KEY[$b]:-}" ]; then bad "corpus $b: listed in expected_torch.json"; continue; fi
  if [ ! -e "$T/i/$b.json.rc" ]; then bad "corpus $b" "inspect failed" "$(head -c 600 "$T/i/$b.err")"; continue; fi
  read -r crc < "$T/i/$b.json.rc"
  if [ "$crc" = 0 ]; then
    ok "corpus $b"
  else
    bad "corpus $b" "$(sed 's/^# //' "$T/i/$b.json.diff")"
  fi
done
while read -r b; do
  [ -e "$CORPUS/torch/$b" ] || bad "corpus file $b of expected_torch.json exists"
done < "$T/keys"

# -- negative corpus: exit 3, file named, the right reason, nothing written
for f in "$CORPUS"/negative/*; do
  b=$(basename "$f")
  case "$b" in
    *broken.pt) want='truncat|corrupt|too short|too small' ;;
    *.scripted.pt|*.traced.pt) want='TorchScript' ;;
    *) want='' ;;
  esac
  "$TPCONV" inspect "$f" > "$T/out" 2> "$T/err"; rc=$?
  if [ "$rc" != 3 ]; then bad "negative $b: inspect refuses (exit 3, named, reason)" "exit $rc, wanted 3" "$(head -c 600 "$T/err")"
  elif ! grep -qF -- "'$f'" "$T/err"; then bad "negative $b: inspect refuses (exit 3, named, reason)" "message does not name the file" "$(cat "$T/err")"
  elif [ -n "$want" ] && ! grep -qiE -- "$want" "$T/err"; then
    bad "negative $b: inspect refuses (exit 3, named, reason)" "message lacks /$want/" "got: $(cat "$T/err")"
  else
    ok "negative $b: inspect refuses (exit 3, named, reason)"
  fi
  for ext in safetensors pt; do
    mkdir -p "$T/o_$ext"
    "$TPCONV" convert "$f" -o "$T/o_$ext/out.$ext" > "$T/out" 2> "$T/err"; rc=$?
    left=$(ls -A "$T/o_$ext")
    if [ "$rc" = 3 ] && [ -z "$left" ] && grep -qF -- "'$f'" "$T/err"; then
      ok "negative $b: convert -o .$ext refuses, writes nothing"
    else
      bad "negative $b: convert -o .$ext refuses, writes nothing" "exit $rc (want 3); left behind: ${left:-nothing}" "$(cat "$T/err")"
    fi
    rm -rf "$T/o_$ext"
  done
done

echo "1..$n"
[ "$failed" = 0 ]
