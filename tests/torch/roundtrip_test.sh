#!/usr/bin/env bash
# Torch round-trip tests against real torch (issue 3). Emits TAP, one line per case.
#  (a) torch -> torch and safetensors -> torch by tpconv: the result loads with
#      real torch.load(weights_only=True) and equals the source (dtype, shape,
#      bits; NaN-safe; non-tensor values and key order too)
#  (b) torch -> safetensors -> torch by tpconv: the safetensors file holds the
#      source's tensors and the final torch.load equals the first, tensors and
#      non-tensor values (keys, order, values, types); also with --dedup-tied
#      (whether a Parameter stays a Parameter is noted, not asserted: safetensors
#      has no such notion; torch -> torch in (a) must keep it)
#  (c) burn's mnist.pt <-> mnist.safetensors (compared through inspect --hash)
#  (d) --select ema_model of a training checkpoint (inspect and convert)
#  (e) quantized tensors: refused (exit 3, nothing written) for safetensors and
#      torch outputs unless --dequantize, which gives torch's dequantize()
#  (f) every file of CORPUS/torch converts to safetensors with the expected
#      hashes, and (directly and through safetensors) to torch files that real
#      torch loads equal to the original
# usage: torch_roundtrip_test.sh TPCONV SRCDIR CORPUS
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2") CORPUS=$(realpath "$3")
export PYTHONDONTWRITEBYTECODE=1
TORCHPY=${TPC_TORCH_PYTHON:-${TPC_PY:-/usr/bin/python3}}
H="$SRC/tests/torch"
. "$SRC/tests/lib/tap.sh"
tmpdir

if ! "$TORCHPY" -c 'import torch' 2>/dev/null; then
  echo "ok 1 # SKIP $TORCHPY cannot import torch"; echo "1..1"; exit 0
fi
SEED=${TPC_SEED:-$(date +%s)}
echo "# seed $SEED (set TPC_SEED to repeat)"

# tpc DESC ARGS...: run tpconv; on failure report DESC as failed and return 1
tpc() {
  local d=$1; shift
  "$TPCONV" "$@" < /dev/null > "$T/tpc.out" 2> "$T/tpc.err"; local rc=$?
  if [ "$rc" != 0 ]; then bad "$d" "tpconv $(printf '%q ' "$@" | sed "s#$T/##g")-> exit $rc" "$(head -c 600 "$T/tpc.err")"; return 1; fi
  return 0
}
# checks are queued and run by one python process (torch imports once)
: > "$T/jobs"
queue() { local IFS=$'\t'; echo "$*" >> "$T/jobs"; }
flush() {
  [ -s "$T/jobs" ] || return 0
  "$TORCHPY" "$H/rt.py" batch "$T/jobs" > "$T/res" 2> "$T/res.err"
  local details=() line rc desc
  while IFS= read -r line; do
    if [[ "$line" == @@$'\t'* ]]; then
      IFS=$'\t' read -r _ rc desc <<< "$line"
      if [ "$rc" = 0 ]; then
        ok "$desc"; for l in "${details[@]+"${details[@]}"}"; do [[ "$l" == note:* ]] && echo "# $l"; done
      else bad "$desc" "${details[@]+"${details[@]}"}"; fi
      details=()
    else details+=("${line#\# }"); fi
  done < "$T/res"
  local want got
  want=$(wc -l < "$T/jobs"); got=$(grep -c $'^@@\t' "$T/res")
  [ "$want" = "$got" ] || bad "rt.py batch ran every check" "$got of $want" "$(tail -n 20 "$T/res.err")"
  : > "$T/jobs"
}
# cmp_queue DESC KEY FILE [flags...]: inspect --json --hash FILE now, compared
# with KEY of the corpus's expected_torch.json at cmp_flush, all in one Python
# process (a test's Python call costs ~70-90 ms of CPU)
cmpn=0
cmp_queue() {
  local d=$1 k=$2 f=$3; shift 3
  tpc "$d" inspect --json --hash "$f" || return 0
  cmpn=$((cmpn + 1)); cp "$T/tpc.out" "$T/cq.$cmpn.json"
  printf '%s\t%s\t%s\n' "$k" "$T/cq.$cmpn.json" "$*" >> "$T/cq.list"; printf '%s\n' "$d" >> "$T/cq.desc"
}
cmp_flush() {
  [ -s "$T/cq.list" ] || return 0
  "$TORCHPY" "$H/compare_inspect.py" "$CORPUS/expected_torch.json" --batch "$T/cq.list" 2> "$T/cq.err" ||
    bad "compare_inspect.py --batch" "$(cat "$T/cq.err")"
  local k j d crc
  while IFS=$'\t' read -r k j _ && IFS= read -r d <&3; do
    crc=; [ -f "$j.rc" ] && read -r crc < "$j.rc"
    if [ "$crc" = 0 ]; then ok "$d"; else bad "$d" "$(sed 's/^# //' "$j.diff" 2>/dev/null)"; fi
  done < "$T/cq.list" 3< "$T/cq.desc"
  : > "$T/cq.list"; : > "$T/cq.desc"
}
# cmp_inspect DESC EXPECTED KEY FILE [flags...]: inspect --json --hash FILE vs EXPECTED
cmp_inspect() {
  local d=$1 e=$2 k=$3 f=$4; shift 4
  local sel=()
  if [ "${1:-}" = --select ]; then sel=(--select "$2"); shift 2; fi
  tpc "$d" inspect --json --hash "${sel[@]+"${sel[@]}"}" "$f" || return 0
  cp "$T/tpc.out" "$T/insp.json"
  if "$TORCHPY" "$H/compare_inspect.py" "$e" "$k" "$T/insp.json" "$@" > "$T/diff"; then ok "$d"
  else bad "$d" "$(sed 's/^# //' "$T/diff")"; fi
}

S="$T/src"
if ! "$TORCHPY" "$H/rt.py" gen "$S" "$SEED" > "$T/list" 2> "$T/gen.err"; then
  bad "rt.py gen writes the sources" "$(tail -n 20 "$T/gen.err")"; echo "1..$n"; exit 1
fi

# ---- (a) torch -> torch: loads with weights_only=True, equals the source
mkdir -p "$T/a"
while IFS=$'\t' read -r f roles desc; do
  [[ "$roles" == *a* && "$roles" != *e* ]] || continue   # quantized: see (e)
  tpc "(a) torch->torch $f: $desc" convert "$S/$f" -o "$T/a/$f" || continue
  queue "(a) torch->torch $f: $desc" load-same "$S/$f" "$T/a/$f"
done < "$T/list"
flush

# ---- (a) safetensors -> torch (corpus files whose dtypes torch 1.13 has)
for f in "$CORPUS"/safetensors/*.safetensors; do
  b=$(basename "$f" .safetensors)
  nosup=$("$TORCHPY" -c '
import json,struct,sys
d=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",d[:8])[0]
h=json.loads(d[8:8+n]); h.pop("__metadata__",None)
print(" ".join(sorted({v["dtype"] for v in h.values()} & {"U16","U32","U64","F8_E5M2","F8_E4M3"})))' "$f")
  if [ -n "$nosup" ]; then skip "(a) safetensors->torch $b" "torch 1.13 has no $nosup"; continue; fi
  tpc "(a) safetensors->torch $b" convert "$f" -o "$T/a/$b.pt" || continue
  queue "(a) safetensors->torch $b" load-same "$f" "$T/a/$b.pt"
done
flush

# ---- (b) torch -> safetensors -> torch
no_tree() {
  "$TORCHPY" -c '
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
sys.exit("tpconv.tree" in json.loads(b[8:8 + n]).get("__metadata__", {}))' "$1"
}
mkdir -p "$T/b"
while IFS=$'\t' read -r f roles desc; do
  [[ "$roles" == *b* ]] || continue
  d="(b) torch->safetensors->torch $f: $desc"
  tpc "$d" convert "$S/$f" -o "$T/b/$f.safetensors" || continue
  tpc "$d" convert "$T/b/$f.safetensors" -o "$T/b/$f" || continue
  queue "$d [safetensors file holds the source tensors]" st-has "$S/$f" "$T/b/$f.safetensors"
  # a flat state dict has no tree to restore (no tpconv.tree): it comes back an
  # OrderedDict in the file's order, as from any safetensors file
  anyo=; no_tree "$T/b/$f.safetensors" && anyo=--any-order
  queue "$d" load-same "$S/$f" "$T/b/$f" --loose-tensor-type $anyo
done < "$T/list"
for f in tied.zip.pt tied.legacy.pt views.zip.pt; do
  d="(b) torch->safetensors --dedup-tied->torch $f"
  tpc "$d" convert --dedup-tied "$S/$f" -o "$T/b/dd.$f.safetensors" || continue
  tpc "$d" convert "$T/b/dd.$f.safetensors" -o "$T/b/dd.$f" || continue
  queue "$d [safetensors file holds the source tensors]" st-has "$S/$f" "$T/b/dd.$f.safetensors" --dedup
  anyo=; no_tree "$T/b/dd.$f.safetensors" && anyo=--any-order
  queue "$d" load-same "$S/$f" "$T/b/dd.$f" --loose-tensor-type $anyo
done
# complex128: safetensors has no such dtype; refused (exit 3, dtype named, nothing written)
mkdir -p "$T/b/c128"
"$TPCONV" convert "$S/c128.zip.pt" -o "$T/b/c128/out.safetensors" > /dev/null 2> "$T/err"; rc=$?
if [ "$rc" = 3 ] && [ -z "$(ls -A "$T/b/c128")" ] && grep -q complex128 "$T/err" && grep -qF "'c'" "$T/err"; then
  ok "(b) complex128 -> safetensors is refused (exit 3), dtype and tensor named, nothing written"
else
  bad "(b) complex128 -> safetensors is refused (exit 3), dtype and tensor named, nothing written" "exit $rc" "$(cat "$T/err")"
fi
# a flat state dict (names to tensors, not in the file's order) carries no
# tpconv.tree metadata: it has no tree to restore; a nested checkpoint does
"$TORCHPY" -c '
import collections, sys, torch
sd = collections.OrderedDict((("z." if i % 2 else "a.") + str(i), torch.full((2,), float(i), dtype=torch.float16 if i % 3 else torch.float32)) for i in range(8))
torch.save(sd, sys.argv[1]); torch.save({"model": sd, "step": 3}, sys.argv[2])' "$T/b/flat.pt" "$T/b/nested.pt" 2> "$T/err"
if "$TPCONV" convert "$T/b/flat.pt" -o "$T/b/flat.safetensors" -q 2>> "$T/err" && "$TPCONV" convert "$T/b/nested.pt" -o "$T/b/nested.safetensors" -q 2>> "$T/err" &&
   "$TORCHPY" -c '
import json, struct, sys
def meta(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]).get("__metadata__", {})
assert "tpconv.tree" not in meta(sys.argv[1]) and "tpconv.tree" in meta(sys.argv[2])' "$T/b/flat.safetensors" "$T/b/nested.safetensors" 2>> "$T/err"; then
  ok "(b) a flat state dict -> safetensors: no tpconv.tree metadata; a nested checkpoint keeps its tree"
else
  bad "(b) tpconv.tree only for a tree" "$(cat "$T/err")"
fi
flush

# ---- (c) burn mnist: .pt <-> .safetensors (the two corpus files hold different
# values under the same names, dtypes and shapes; each conversion must keep its own)
MPT="$CORPUS/torch/burn_examples__import-model-weights__weights__mnist.pt"
MST="$CORPUS/safetensors/burn_examples__import-model-weights__weights__mnist.safetensors"
mkdir -p "$T/c"
if tpc "(c) inspect mnist.safetensors" inspect --json --hash "$MST"; then cp "$T/tpc.out" "$T/c/mst.json"; fi
if tpc "(c) mnist.pt -> safetensors" convert "$MPT" -o "$T/c/m.safetensors"; then
  cmp_inspect "(c) mnist.pt -> safetensors: tensors of mnist.pt" "$CORPUS/expected_torch.json" "$(basename "$MPT")" "$T/c/m.safetensors"
  [ -f "$T/c/mst.json" ] && cmp_inspect "(c) mnist.pt -> safetensors: names, dtypes, shapes of mnist.safetensors" \
    "$T/c/mst.json" - "$T/c/m.safetensors" --expected-inspect --no-hash
  if tpc "(c) mnist.pt -> safetensors -> pt" convert "$T/c/m.safetensors" -o "$T/c/m2.pt"; then
    cmp_inspect "(c) mnist.pt -> safetensors -> pt: tensors of mnist.pt" "$CORPUS/expected_torch.json" "$(basename "$MPT")" "$T/c/m2.pt"
  fi
fi
if tpc "(c) mnist.safetensors -> pt" convert "$MST" -o "$T/c/s.pt" && [ -f "$T/c/mst.json" ]; then
  cmp_inspect "(c) mnist.safetensors -> pt: tensors of mnist.safetensors" "$T/c/mst.json" - "$T/c/s.pt" --expected-inspect
  if tpc "(c) mnist.safetensors -> pt -> safetensors" convert "$T/c/s.pt" -o "$T/c/s2.safetensors"; then
    cmp_inspect "(c) mnist.safetensors -> pt -> safetensors: same tensors" "$T/c/mst.json" - "$T/c/s2.safetensors" --expected-inspect
  fi
fi

# ---- (d) --select ema_model
mkdir -p "$T/d"
for f in select.zip.pt select.legacy.pt; do
  "$TORCHPY" "$H/rt.py" describe "$S/$f" ema_model > "$T/d/$f.exp.json"
  cmp_inspect "(d) inspect --select ema_model $f" "$T/d/$f.exp.json" - "$S/$f" --select ema_model --order
  if tpc "(d) convert --select ema_model $f -> safetensors" convert --select ema_model "$S/$f" -o "$T/d/$f.safetensors"; then
    cmp_inspect "(d) convert --select ema_model $f -> safetensors" "$T/d/$f.exp.json" - "$T/d/$f.safetensors"
  fi
  if tpc "(d) convert --select ema_model $f -> torch" convert --select ema_model "$S/$f" -o "$T/d/$f"; then
    queue "(d) convert --select ema_model $f -> torch: loads, equals src['ema_model']" load-same "$S/$f" "$T/d/$f" ema_model
  fi
done
flush
"$TPCONV" convert --select no_such_key "$S/select.zip.pt" -o "$T/d/none.safetensors" > /dev/null 2> "$T/err"; rc=$?
if [ "$rc" -ne 0 ] && [ ! -e "$T/d/none.safetensors" ] && grep -qF no_such_key "$T/err"; then
  ok "(d) --select of a missing key fails (exit $rc), names it, writes nothing"
else
  bad "(d) --select of a missing key fails, names it, writes nothing" "exit $rc" "$(cat "$T/err")"
fi

# ---- (e) quantized
# tpconv writes no quantized tensors (torch 1.13's weights_only cannot load
# _rebuild_qtensor either): refused for both outputs unless --dequantize
mkdir -p "$T/e"
for f in quantized.zip.pt quantized.legacy.pt; do
  for ext in safetensors pt; do
    mkdir -p "$T/e/refuse.$f.$ext"
    "$TPCONV" convert "$S/$f" -o "$T/e/refuse.$f.$ext/out.$ext" > /dev/null 2> "$T/err"; rc=$?
    if [ "$rc" = 3 ] && [ -z "$(ls -A "$T/e/refuse.$f.$ext")" ] && grep -qi quantiz "$T/err" && grep -qE "'q_(i8|u8|i32|chan)'" "$T/err"; then
      ok "(e) $f -> $ext without --dequantize is refused (exit 3, tensor named), writes nothing"
    else
      bad "(e) $f -> $ext without --dequantize is refused (exit 3, tensor named), writes nothing" "exit $rc" "$(cat "$T/err")"
    fi
    if tpc "(e) $f -> $ext --dequantize" convert --dequantize "$S/$f" -o "$T/e/$f.$ext"; then
      queue "(e) $f -> $ext --dequantize equals torch's dequantize()" dequant "$S/$f" "$T/e/$f.$ext"
    fi
  done
done
flush

# ---- (f) every corpus torch file -> safetensors (the expected hashes),
# -> safetensors -> torch and -> torch: real torch.load(weights_only=True) of
# the result equals torch.load of the original (key order through safetensors
# is (b)'s business, not checked here); files with quantized tensors go with
# --dequantize
mkdir -p "$T/f"
"$TORCHPY" -c '
import json,sys
for k,v in json.load(open(sys.argv[1])).items():
    print(k, int(any(x[0].startswith("quantized:") for x in v.values())))' "$CORPUS/expected_torch.json" > "$T/f/keys"
while read -r b q; do
  if [ "$b" = pytorch113_TestSerialization.test_lstm.state_dict.pt ]; then
    # its weights live inside TorchScript objects (packed LSTM params) that no
    # name reaches: converting must refuse rather than drop them
    for ext in safetensors pt; do
      "$TPCONV" convert "$CORPUS/torch/$b" -o "$T/f/lstm.$ext" >"$T/f/out" 2>"$T/f/err"; rc=$?
      if [ "$rc" = 3 ] && grep -q "inside opaque objects (torch._C.ScriptObject)" "$T/f/err" && [ ! -e "$T/f/lstm.$ext" ]; then
        ok "(f) corpus $b -> $ext refused: tensors inside ScriptObjects would be lost"
      else
        bad "(f) corpus $b -> $ext refused" "exit $rc: $(cat "$T/f/err")"
      fi
    done
    continue
  fi
  dq=(); cq=(); [ "$q" = 1 ] && { dq=(--dequantize); cq=(--dequantized); }
  chk=load-same; [ "$q" = 1 ] && chk=dequant
  d="(f) corpus $b -> safetensors${dq:+ --dequantize}"
  if tpc "$d" convert "${dq[@]+"${dq[@]}"}" "$CORPUS/torch/$b" -o "$T/f/$b.safetensors"; then
    cmp_queue "$d" "$b" "$T/f/$b.safetensors" "${cq[@]+"${cq[@]}"}"
    d="(f) corpus $b -> safetensors${dq:+ --dequantize} -> torch: weights_only load equals the original"
    if tpc "$d" convert "$T/f/$b.safetensors" -o "$T/f/st.$b"; then
      queue "$d" $chk "$CORPUS/torch/$b" "$T/f/st.$b" --any-order --loose-tensor-type
    fi
  fi
  d="(f) corpus $b -> torch${dq:+ --dequantize}: weights_only load equals the original"
  if tpc "$d" convert "${dq[@]+"${dq[@]}"}" "$CORPUS/torch/$b" -o "$T/f/$b"; then
    queue "$d" $chk "$CORPUS/torch/$b" "$T/f/$b"
  fi
done < "$T/f/keys"
flush
cmp_flush

echo "1..$n"
[ "$failed" = 0 ]
