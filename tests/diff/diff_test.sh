#!/usr/bin/env bash
# `tpconv diff` against inputs built by real torch (/usr/bin/python3, tests/diff/make_pair.py):
# a torch file against its safetensors and HF-folder conversions and against a
# shard set merged on the fly, a DCP folder (exit 0); one changed element (exit 1, tensor,
# index and both values named); missing, extra, reshaped and retyped tensors;
# an HF-named model against its Megatron-named twin through --rules; a bf16
# cast through --cast (and one ULP off); tolerances; JSON parsed by Python,
# JUnit checked by xmllint; usage errors (2) and unreadable inputs (3).
# Prints its seed (TPC_SEED=N to replay); skips without torch.
# usage: diff_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_TORCH_PYTHON:-${TPC_PY:-/usr/bin/python3}}
export PYTHONDONTWRITEBYTECODE=1
. "$SRC/tests/shard/tap.sh"
SEED=${TPC_SEED:-$(date +%s)}
echo "# seed $SEED (set TPC_SEED to repeat)"
D=$T/in
mkdir -p "$D"
if ! $PY "$SRC/tests/diff/make_pair.py" "$D" "$SEED" >"$T/err" 2>&1; then
  bad "make_pair.py builds the inputs" "$(head -c 600 "$T/err")"; echo "1..$n"; exit 1
fi
d() { run "$TPCONV" diff "$@"; }
# expect DESC RC [REGEX ...]: the last run exited RC and its stdout matches every REGEX
expect() {
  local desc=$1 want=$2; shift 2
  if [ "$rc" != "$want" ]; then bad "$desc" "exit $rc, want $want" "$(head -c 800 "$T/out")" "$(head -c 400 "$T/err")"; return; fi
  for re in "$@"; do
    if ! grep -qE -- "$re" "$T/out"; then bad "$desc" "stdout lacks /$re/" "$(head -c 800 "$T/out")"; return; fi
  done
  ok "$desc"
}

# --- a torch file against its conversions
"$TPCONV" convert "$D/a.pt" -o "$D/a.safetensors" 2>"$T/err" || bad "convert a.pt" "$(cat "$T/err")"
d "$D/a.pt" "$D/a.safetensors"
expect "torch file vs its safetensors conversion: same" 0 '^# same: 16 tensors: 16 equal'
d -q "$D/a.pt" "$D/a.safetensors"
if [ "$rc" = 0 ] && [ ! -s "$T/out" ]; then ok "-q prints nothing"; else bad "-q prints nothing" "exit $rc" "$(cat "$T/out")"; fi
d -v "$D/a.safetensors" "$D/a.pt"
expect "-v lists the equal tensors" 0 '^extra\.cplx: equal$' '^model\.embed_tokens\.weight: equal$'
"$TPCONV" convert "$D/a.pt" --max-shard-size 20K -o "$D/hf/" 2>"$T/err" || bad "convert to an HF folder" "$(cat "$T/err")"
d "$D/hf" "$D/a.pt"
expect "an HF-sharded folder vs the torch file: same" 0 '^# same: 16 tensors'

# --- one element changed
read -r va vb < "$D/one.txt"
d "$D/a.pt" "$D/one.pt"
expect "one changed element: exit 1 naming tensor, index and both values" 1 \
  "^model\.layers\.1\.mlp\.down_proj\.weight: values differ in 1 of 2048 elements; first at \[2, 3\]: A $va, B $vb; max abs 0\.(5|49999)" \
  '^# different: 16 tensors: 15 equal, 0 within tolerance, 1 differ'
if [ "$(grep -c ': values differ' "$T/out")" = 1 ]; then ok "only that tensor is reported"; else bad "only that tensor is reported" "$(cat "$T/out")"; fi

# --- names, shapes, dtypes
d "$D/a.pt" "$D/missing.pt"
expect "missing, extra, reshaped and retyped tensors" 1 \
  '^model\.norm\.weight: only in A \(F32 \[32\]\)$' '^extra\.bias: only in B \(F32 \[3\]\)$' \
  '^lm_head\.weight: shape \[50, 32\] in A, \[50, 16\] in B$' '^extra\.steps: dtype I64 in A, I32 in B; as numbers, equal$' \
  '1 only in A, 1 only in B'

# --- an HF model against its Megatron-named twin
d "$D/a.pt" "$D/meg.pt"
expect "HF vs Megatron names without rules: names only on one side" 1 'only in A' 'only in B'
d --rules "$D/meg_rules.json" "$D/a.pt" "$D/meg.pt"
expect "HF vs Megatron names through --rules: same" 0 '^# same: 16 tensors: 16 equal'
d --rules "$D/meg_rules.json" "$D/a.pt" "$D/meg_one.pt"
expect "--rules: a changed element is named by its Megatron name" 1 \
  '^decoder\.layers\.0\.self_attention\.linear_proj\.weight: values differ in 1 of 1024 elements; first at \[0, 5\]'

# --- casts
d "$D/a.pt" "$D/bf16.pt"
expect "f32 vs its bf16 cast without --cast: dtype differences, with a hint" 1 \
  '^model\.norm\.weight: dtype F32 in A, BF16 in B \(--cast compares A cast to BF16\); as numbers, values differ'
grep -q '^extra\.bf: ' "$T/out" && bad "equal bf16 tensors are not listed" "$(grep '^extra\.bf' "$T/out")"
d --cast "$D/a.pt" "$D/bf16.pt"
expect "--cast: torch's .to(bfloat16) is A cast to bf16, bit for bit" 0 '^# same: 16 tensors: 16 equal'
d --cast "$D/a.pt" "$D/bf16ulp.pt"
expect "--cast: one bf16 element one ULP off" 1 \
  '^model\.layers\.0\.self_attn\.o_proj\.weight: A cast to BF16: values differ in 1 of 1024 elements; first at \[1, 1\].*max ulps 1$'
d --cast --ulps bf16=1 "$D/a.pt" "$D/bf16ulp.pt"
expect "--cast --ulps bf16=1: within tolerance" 0 '1 within tolerance, 0 differ'
"$TPCONV" convert "$D/a.pt" --dtype bf16 -o "$D/tpc_bf16.safetensors" 2>"$T/err" || bad "convert --dtype bf16" "$(cat "$T/err")"
d "$D/bf16.pt" "$D/tpc_bf16.safetensors"
expect "tpconv's bf16 cast equals torch's" 0 '^# same'

# --- tolerances
d "$D/a.pt" "$D/noise.pt"
expect "1e-6 relative noise: different bit for bit" 1 '0 within tolerance, 11 differ'
d --rtol 2e-6 "$D/a.pt" "$D/noise.pt"
expect "--rtol 2e-6: within tolerance" 0 '11 within tolerance, 0 differ'
d --rtol bf16=2e-6 "$D/a.pt" "$D/noise.pt"
expect "a tolerance for another dtype does not apply" 1 '11 differ'
d --atol 1e-3 --atol f32=0 "$D/a.pt" "$D/noise.pt"
expect "a later per-dtype tolerance overrides" 1 '11 differ'
d --ulps 40 "$D/a.pt" "$D/noise.pt"
expect "--ulps 40: within tolerance" 0 '11 within tolerance'

# --- JSON and JUnit
d --json "$D/r.json" --junit "$D/r.xml" "$D/a.pt" "$D/missing.pt"
if [ "$rc" = 1 ] && $PY - "$D/r.json" >"$T/py" 2>&1 <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["same"] is False and r["tensors"] == 17 and r["only_a"] == 1 and r["only_b"] == 1 and r["differ"] == 2, r
by = {x["name"]: x for x in r["results"]}
assert by["model.norm.weight"]["status"] == "only_a"
assert by["lm_head.weight"]["status"] == "shape" and by["lm_head.weight"]["shape_b"] == [50, 16]
assert by["extra.steps"]["status"] == "dtype" and by["extra.steps"]["dtype_b"] == "I32"
assert by["extra.cplx"]["status"] == "equal" and by["extra.cplx"]["elements"] == 4
PYEOF
then ok "--json parses and holds every tensor"; else bad "--json parses and holds every tensor" "exit $rc" "$(cat "$T/py")"; fi
if xmllint --noout "$D/r.xml" 2>"$T/xerr" &&
   [ "$(xmllint --xpath 'count(//testcase)' "$D/r.xml")" = 17 ] &&
   [ "$(xmllint --xpath 'count(//testcase/failure)' "$D/r.xml")" = 4 ] &&
   [ "$(xmllint --xpath 'string(//testsuite/@failures)' "$D/r.xml")" = 4 ] &&
   xmllint --xpath 'string(//testcase[@name="lm_head.weight"]/failure/@message)' "$D/r.xml" | grep -q 'shape \[50, 32\] in A'; then
  ok "--junit is well-formed XML with one test case per tensor and a failure per difference"
else bad "--junit is well-formed XML" "$(cat "$T/xerr")" "$(head -c 600 "$D/r.xml")"; fi
d --json - "$D/a.pt" "$D/one.pt"
if [ "$rc" = 1 ] && $PY -c '
import json, sys
r = json.load(sys.stdin)
x = [x for x in r["results"] if x["status"] != "equal"]
assert len(x) == 1 and x[0]["first_index"] == [2, 3] and x[0]["differing"] == 1 and x[0]["first_flat"] == 2 * 64 + 3, x
' <"$T/out" 2>"$T/py"; then ok "--json - writes only JSON to stdout"; else bad "--json - writes only JSON to stdout" "$(cat "$T/py")"; fi

# --- shard sets, merged on the fly
"$TPCONV" shard "$SRC/tests/data/tiny_llama.safetensors" --preset llama --tp 2 --config "$SRC/tests/data/config.json" \
  -o "$D/set" 2>"$T/err" || bad "shard tiny_llama" "$(cat "$T/err")"
d "$SRC/tests/data/tiny_llama.pt" "$D/set"
expect "a shard set merged on the fly vs the torch file: same" 0 '^# same: 21 tensors'
"$TPCONV" convert "$SRC/tests/data/tiny_llama.pt" --max-shard-size 100K -o "$D/hf2/" 2>"$T/err"
d "$D/hf2" "$D/set"
expect "an HF folder vs a shard set: same" 0 '^# same: 21 tensors'
cp -r "$D/set" "$D/bad"
f="$D/bad/model_tp01_pp00.safetensors"
# one byte inside element 1 of rank 1's slice of lm_head.weight (split, not replicated)
off=$($PY -c '
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
print(8 + n + json.loads(b[8:8 + n])["lm_head.weight"]["data_offsets"][0] + 5)' "$f")
printf '\x7f' | dd of="$f" bs=1 seek="$off" conv=notrunc status=none
d "$SRC/tests/data/tiny_llama.pt" "$D/bad"
if [ "$rc" = 3 ] && grep -q 'SHA-256\|checksum\|sha256' "$T/err"; then ok "a tampered rank file: exit 3 by checksum"; else bad "a tampered rank file: exit 3 by checksum" "exit $rc" "$(cat "$T/err")"; fi
d --no-checksums "$SRC/tests/data/tiny_llama.pt" "$D/bad"
expect "--no-checksums: the tampered element is a value difference" 1 '^lm_head\.weight: values differ in 1 of 8192 elements; first at \[64, 1\]'

# --- a PyTorch DCP folder (genuine torch 2.6 fixtures) against dcp_to_torch_save's file
if [ -d "$SRC/tests/data/dcp/fsdp4" ]; then
  d "$SRC/tests/data/dcp/fsdp4" "$SRC/tests/data/dcp/fsdp4.pt"
  expect "a DCP folder (FSDP, 4 ranks) vs its torch.save conversion: same" 0 '^# same: 9 tensors'
  d "$SRC/tests/data/dcp/fsdp2" "$SRC/tests/data/dcp/fsdp4"
  expect "two DCP checkpoints of different models: different" 1 '^model\.model\.norm\.weight: values differ'
fi

# --- usage and unreadable inputs
d "$D/a.pt"; expect "one input: usage error" 2
d "$D/a.pt" "$D/a.pt" "$D/a.pt"; expect "three inputs: usage error" 2
d --atol -1 "$D/a.pt" "$D/a.pt"; expect "a negative tolerance: usage error" 2
d --rtol f32=x "$D/a.pt" "$D/a.pt"; expect "a bad per-dtype tolerance: usage error" 2
d --bogus "$D/a.pt" "$D/a.pt"; expect "an unknown option: usage error" 2
d --json - --junit - "$D/a.pt" "$D/a.pt"; expect "two reports on stdout: usage error" 2
d "$D/a.pt" "$D/nonexistent.pt"; expect "a missing input: exit 3" 3
head -c 1000 "$D/a.pt" > "$D/trunc.pt"
d "$D/a.pt" "$D/trunc.pt"; expect "a truncated input: exit 3" 3
d --json "$D/no/such/dir/r.json" "$D/a.pt" "$D/a.pt"; expect "a report that cannot be written: exit 4" 4
# --- a GGUF is read as its Hugging Face model, as convert reads it (issue 41 item 10:
# it was compared under its GGUF names, every tensor only in A or only in B)
G=$SRC/tests/gguf/arch/tiny-llama
"$TPCONV" convert "$G" -o "$T/tiny.gguf" --outtype f32 -q 2>"$T/err" || bad "convert to GGUF" "$(cat "$T/err")"
run "$TPCONV" diff "$G" "$T/tiny.gguf"
expect "an HF folder vs its f32 GGUF: same, under the HF names" 0 '^# same: 21 tensors: 21 equal, 0 within tolerance, 0 differ, 0 only in A, 0 only in B'
run "$TPCONV" diff --gguf-names "$G" "$T/tiny.gguf"
expect "--gguf-names: the GGUF keeps its own names" 1 '0 only in A|21 only in A' 'blk\.0\.attn_q\.weight: only in B'

run "$TPCONV" diff --help
expect "--help: exit 0, documents the exit status" 0 '^usage: tpconv diff' 'Exit status: 0 same, 1 different'
echo "1..$n"
[ "$failed" = 0 ]
