#!/usr/bin/env bash
# The remap stage from the command line (issue 4): the DALLE2 seed case against
# the Python loop in real torch (safetensors and torch inputs), --expect-keys,
# --dry-run, the presets, and the errors for bad rules. Emits TAP; prints its
# seed. usage: remap_test.sh TPCONV SRCDIR [SEED]
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2") SEED=${3:-${TPC_SEED:-$RANDOM}}
export PYTHONDONTWRITEBYTECODE=1
PY=${TPC_PY:-/usr/bin/python3}
H="$SRC/tests/remap"
. "$SRC/tests/lib/tap.sh"
tmpdir
expect() { # desc rc-wanted [stderr-substring...]
  local d=$1 want=$2; shift 2
  if [ "$rc" != "$want" ]; then bad "$d" "exit $rc, wanted $want" "stderr: $(head -c 1500 "$T/err")"; return 1; fi
  for sub in "$@"; do
    if ! grep -qF -- "$sub" "$T/err"; then bad "$d" "stderr lacks: $sub" "stderr: $(head -c 1500 "$T/err")"; return 1; fi
  done
  ok "$d"
}
nothing_written() { # desc path
  if [ -e "$2" ] || ls -a "$(dirname "$2")" | grep -q '\.tpc-'; then bad "$1: nothing written"; else ok "$1: nothing written"; fi
}

# -- presets and rules files: no torch needed
run "$TPCONV" rules --list; expect "rules --list" 0; cp "$T/out" "$T/list"
for p in dalle2 libai strip-module gpt2-conv1d torchtitan hf-torchtitan; do
  grep -q "^$p " "$T/list" || bad "rules --list names $p" "$(cat "$T/list")"
  run "$TPCONV" rules "$p"
  if [ "$rc" = 0 ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["rules"]' "$T/out" 2>/dev/null
  then ok "rules $p prints valid JSON with rules"; else bad "rules $p prints valid JSON" "$(cat "$T/out" "$T/err")"; fi
done
run "$TPCONV" rules nope;   expect "unknown preset: exit 2, lists presets" 2 "unknown rules preset 'nope'" "dalle2, libai"
run "$TPCONV" rules --help; expect "rules --help" 0
printf '{"extends": "dalle2", "rules": [{"dtype": "bf16"}, {"dtype": "f32", "match": "\\\\.(g|gamma)$"}]}\n' > "$T/ext.json"
run "$TPCONV" rules --check "$T/ext.json"
if [ "$rc" = 0 ] && grep -q "5 rules" "$T/out" && grep -qF "(preset dalle2 rule 3)" "$T/out"; then ok "rules --check expands extends"
else bad "rules --check expands extends" "$(cat "$T/out" "$T/err")"; fi
bad_rules() { # desc json message
  printf '%s\n' "$2" > "$T/bad.json"
  run "$TPCONV" rules --check "$T/bad.json"; expect "bad rules file: $1" 2 "$3"
}
bad_rules "unknown key"       '{"rules": [{"renam": "x", "to": "y"}]}' "rule 1: unknown key 'renam'"
bad_rules "two actions"       '[{"drop": "a", "keep": "b"}]'           "rule 1: more than one action"
bad_rules "bad regex"         '[{"drop": "a("}]'                       "bad pattern 'a('"
bad_rules "lookahead"         '[{"drop": "(?!x)a"}]'                   "not POSIX extended"
bad_rules "lazy quantifier"   '[{"drop": "a.*?b"}]'                    "lazy quantifiers"
bad_rules "bad dtype"         '[{"dtype": "f8"}]'                      "rule 1: bad dtype 'f8'"
bad_rules "group out of range" '[{"rename": "(a)", "to": "\\2"}]'      "refers to group \\2 but the pattern has 1 group"
bad_rules "rename without to" '[{"rename": "a"}]'                      "needs a replacement"
bad_rules "unknown preset"    '{"extends": "dalle3"}'                  "unknown preset 'dalle3'"
bad_rules "invalid JSON"      '{"rules": [}'                           "invalid JSON"
run "$TPCONV" rules --check "$T/missing.json"; expect "missing rules file: exit 2" 2 "missing.json"

if ! "$PY" -c 'import torch' 2>/dev/null; then
  skip "no torch in $PY: DALLE2 seed tests"; echo "1..$n"; [ "$failed" = 0 ]; exit
fi
echo "# seed $SEED"
if ! "$PY" "$H/dalle2_seed.py" gen "$T" "$SEED" 2>"$T/err"; then
  bad "generate the DALLE2 checkpoint" "$(cat "$T/err")"; echo "1..$n"; exit 1
fi
check() { # desc out [dtype [keep-re]]
  local d=$1; shift
  if "$PY" "$H/dalle2_seed.py" check "$T" "$@" >"$T/chk" 2>&1; then ok "$d"; else bad "$d" "$(cat "$T/chk")"; fi
}

# -- the seed case: names and bytes exactly as the Python loop, keys as the Decoder's
have_torch_reader=0
"$TPCONV" --help | grep -q 'Formats read.*torch' && have_torch_reader=1
for in in ckpt.safetensors ckpt.pth; do
  if [ "$in" = ckpt.pth ] && [ "$have_torch_reader" = 0 ]; then
    skip "torch input: this build reads no torch files"; continue
  fi
  o="$T/out_${in%%.*}_${in##*.}.safetensors"
  run "$TPCONV" convert "$T/$in" -o "$o" --rules dalle2 --expect-keys "$T/keys.txt"
  expect "$in --rules dalle2 --expect-keys keys.txt" 0 && check "$in --rules dalle2: names and bytes of the seed loop" "$o"
  [ -s "$T/err" ] && bad "$in --rules dalle2: no warnings" "$(cat "$T/err")"
done
for k in keys.json target.safetensors; do
  run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/k_$k.safetensors" --rules dalle2 --expect-keys "$T/$k"
  expect "--expect-keys $k (a JSON list / a checkpoint)" 0
done

# a wrong rule (the rename without its 'when'): exit 1, missing and unexpected listed, nothing written
printf '%s\n' '{"rules": [{"select": "ema_model"}, {"drop": "clip\\."}, {"rename": "\\.g$", "to": ".gamma"}]}' > "$T/wrong.json"
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/wrong.safetensors" --rules "$T/wrong.json" --expect-keys "$T/keys.txt"
expect "wrong rule: exit 1 with the missing and unexpected keys" 1 "does not match the keys of" \
  "missing (" "  unets.0.final_resnet_block.block1.project.0.g" "  unets.0.downs.0.3.norm.g" \
  "unexpected (" "  unets.0.final_resnet_block.block1.project.0.gamma" "  unets.0.downs.0.3.norm.gamma"
nothing_written "wrong rule" "$T/wrong.safetensors"
# ... and without the select: every key unexpected
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/wrong2.safetensors" --drop 'clip\.' --expect-keys "$T/keys.txt"
expect "no select: exit 1" 1 "unexpected (" "  ema_model.unets.0.init_conv.convs.0.weight" "  model.unets.0.init_conv.convs.0.weight"

# the same rules as command-line shorthands
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/short.safetensors" --keep '^ema_model\.' --strip-prefix ema_model. \
  --drop 'clip\.' --when 'cross_attn|fn\.fn\.' --rename '\.g$=.gamma' --expect-keys "$T/keys.txt"
expect "shorthands --keep --strip-prefix --drop --when --rename" 0 && check "shorthands: names and bytes of the seed loop" "$T/short.safetensors"
# capture groups: swap two name parts and back
run "$TPCONV" convert "$T/out_ckpt_safetensors.safetensors" -o "$T/g1.safetensors" --rename '^unets\.([0-9]+)\.(downs|ups)\.=\2.\1.'
run "$TPCONV" convert "$T/g1.safetensors" -o "$T/g2.safetensors" --rename '^(downs|ups)\.([0-9]+)\.=unets.\2.\1.' --expect-keys "$T/keys.txt"
expect "rename with capture groups, there and back" 0 && check "capture groups: names and bytes" "$T/g2.safetensors"
if "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import dalle2_seed as d; h = d.read_st(sys.argv[2]); assert "downs.0.unets.0.0.block1.project.weight" not in h and "downs.0.0.0.block1.project.weight" in h' "$H" "$T/g1.safetensors" 2>"$T/chk"
then ok "rename with groups: \\2.\\1. order"; else bad "rename with groups: \\2.\\1. order" "$(cat "$T/chk")"; fi

# a user file extending the preset: bf16 everywhere except the norms (f32)
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/ext.safetensors" --rules "$T/ext.json" --expect-keys "$T/keys.txt"
expect "extends dalle2 + dtype rules" 0 && check "bf16, norms f32: bytes of torch .to()" "$T/ext.safetensors" bf16 '\.(g|gamma)$'

# --dry-run: the table, and no output
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/dry.safetensors" --rules dalle2 --dry-run --expect-keys "$T/keys.txt"
if [ "$rc" = 0 ] && grep -qxF "ema_model.unets.0.downs.0.1.fn.fn.norm.g -> unets.0.downs.0.1.fn.fn.norm.gamma" "$T/out" \
   && grep -qxF "ema_model.unets.0.final_resnet_block.block1.project.0.g -> unets.0.final_resnet_block.block1.project.0.g" "$T/out" \
   && grep -qxF "ema_model.clip.transformer.x.weight  by drop 'clip\\.' (preset dalle2 rule 2)" "$T/out" \
   && grep -qxF "model.unets.0.init_conv.convs.0.weight  by select 'ema_model' (preset dalle2 rule 1)" "$T/out" \
   && grep -q "^# dropped (" "$T/out"
then ok "--dry-run prints old -> new and the dropped names with their rule"; else bad "--dry-run table" "$(head -n 20 "$T/out")" "$(cat "$T/err")"; fi
nothing_written "--dry-run" "$T/dry.safetensors"
run "$TPCONV" convert "$T/ckpt.safetensors" --dry-run --transpose 'to_q\.weight$' --dtype 'to_q=f16'
if [ "$rc" = 0 ] && grep -qF "ema_model.unets.0.downs.0.2.cross_attn.to_q.weight -> ema_model.unets.0.downs.0.2.cross_attn.to_q.weight  F32 -> F16  transposed [16, 16] -> [16, 16]" "$T/out"
then ok "--dry-run without -o shows casts and transposes"; else bad "--dry-run shows casts and transposes" "$(grep to_q "$T/out" | head -3)" "$(cat "$T/err")"; fi

# rules that match nothing: a warning, or an error with --strict
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/w.safetensors" --rules dalle2 --drop 'no_such_thing'
expect "unmatched rule: warning, exit 0" 0 "tpconv: warning: rule drop 'no_such_thing' (--drop 'no_such_thing') matched no tensor"
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/s.safetensors" --rules dalle2 --drop 'no_such_thing' --strict
expect "unmatched rule with --strict: exit 2" 2 "matched no tensor (--strict)"
nothing_written "--strict" "$T/s.safetensors"
# name collisions name both sources
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/c.safetensors" --rules dalle2 --rename '^unets\.1\.=unets.0.'
expect "collision: exit 2 naming both sources" 2 "name collision: tensors 'ema_model.unets.0.downs.0.0.block1.norm.weight' and 'ema_model.unets.1.downs.0.0.block1.norm.weight' would both be named 'unets.0.downs.0.0.block1.norm.weight'"
nothing_written "collision" "$T/c.safetensors"
# usage errors
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/u.safetensors" --drop 'a('; expect "--drop with a bad regex: exit 2" 2 "--drop 'a(': bad pattern 'a('"
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/u.safetensors" --dtype f8;   expect "--dtype f8: exit 2" 2 "unknown dtype 'f8'"
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/u.safetensors" --rename 'abc'; expect "--rename without '=': exit 2" 2 "expected 'REGEX=REPLACEMENT'"
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/u.safetensors" --drop x --when 'a'; expect "dangling --when: exit 2" 2 "--when 'a' is not followed by a rule"
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/u.safetensors" --rules nope; expect "--rules with neither preset nor file: exit 2" 2 "neither a rules preset"
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/u.safetensors" --transpose 'norm_cond'
expect "transpose of a 1-D tensor: exit 2" 2 "tensor 'ema_model.unets.0.norm_cond.weight'" "only 2-D tensors can be transposed"
run "$TPCONV" convert "$T/ckpt.safetensors" -o "$T/u.safetensors" --strip-prefix 'ema_model.unets.0.lowres_cond.step'
expect "a rule that empties a name: exit 2" 2 "leaves an empty name"
nothing_written "usage errors" "$T/u.safetensors"

# transpose: bytes are the transpose (gpt2-conv1d preset on Conv1D-named tensors)
run "$TPCONV" convert "$T/out_ckpt_safetensors.safetensors" -o "$T/t.safetensors" --rename 'to_kv\.weight$=c_attn.weight' --rules gpt2-conv1d
expect "gpt2-conv1d preset" 0
if "$PY" - "$H" "$T" <<'EOF' >"$T/chk" 2>&1
import sys, torch
sys.path.insert(0, sys.argv[1])
import dalle2_seed as d
a, b = d.read_st(f'{sys.argv[2]}/out_ckpt_safetensors.safetensors'), d.read_st(f'{sys.argv[2]}/t.safetensors')
n = 0
for k, (dt, shape, raw) in a.items():
    if not k.endswith('to_kv.weight'):
        continue
    k2 = k.replace('to_kv.weight', 'c_attn.weight')
    x = torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(shape)
    assert b[k2][1] == [shape[1], shape[0]], (k2, b[k2][1])
    assert b[k2][2] == d.raw(x.t()), k2
    n += 1
assert n == 4, n
EOF
then ok "transposed tensors hold the bytes of x.t().contiguous()"; else bad "transposed bytes" "$(cat "$T/chk")"; fi

# -- torchtitan (issue 31): tiny llama3 state dicts in torchtitan's names, torch.save'd
# by real torch; --rules torchtitan against torchtitan's own to_hf (the permutation of
# transformers' convert_llama_weights_to_hf.py) bit for bit, the RoPE each side runs
# giving the same attention scores, and --rules hf-torchtitan back to the original
TT=$T/tt; mkdir -p "$TT"
if ! "$PY" "$H/torchtitan_check.py" gen "$TT" "$SEED" 2>"$T/err"; then
  bad "generate the torchtitan checkpoint" "$(cat "$T/err")"
else
  tt_same() { # desc A B
    if "$PY" "$H/torchtitan_check.py" same "$2" "$3" >"$T/chk" 2>&1; then ok "$1"; else bad "$1" "$(cat "$T/chk")"; fi
  }
  run "$TPCONV" convert "$TT/tt.pt" --rules torchtitan --config "$TT/config.json" -o "$TT/hf.safetensors"
  expect "torchtitan -> HF: convert --rules torchtitan" 0 &&
    tt_same "torchtitan -> HF: the bits of torchtitan's to_hf (wq/wk rows permuted per head, GQA)" "$TT/hf.safetensors" "$TT/hf_ref.pt"
  if "$PY" "$H/torchtitan_check.py" rope "$TT" "$TT/hf.safetensors" >"$T/chk" 2>&1; then ok "torchtitan -> HF: $(cat "$T/chk")"
  else bad "torchtitan -> HF: RoPE equivalence" "$(cat "$T/chk")"; fi
  run "$TPCONV" convert "$TT/hf.safetensors" --rules hf-torchtitan --config "$TT/config.json" -o "$TT/back.pt"
  expect "HF -> torchtitan: convert --rules hf-torchtitan" 0 &&
    tt_same "HF -> torchtitan: the round trip gives torchtitan's tensors back bit for bit" "$TT/back.pt" "$TT/tt_weights.pt"
  # a sharded source (DCP, each tensor in pieces): the rows come from the pieces
  D=$SRC/tests/data/dcp/llama2
  run "$TPCONV" convert "$D" -o "$TT/dcp_hf.safetensors" &&
    run "$TPCONV" convert "$D" --rules hf-torchtitan -o "$TT/dcp_tt.safetensors"
  if [ "$rc" = 0 ] && "$PY" "$H/torchtitan_check.py" from_hf "$TT/dcp_hf.safetensors" "$TT/dcp_tt.safetensors" "$D/config.json" >"$T/chk" 2>&1
  then ok "HF DCP (2 pieces a tensor) -> torchtitan: $(cat "$T/chk")"; else bad "DCP -> torchtitan" "$(cat "$T/err" "$T/chk")"; fi
  run "$TPCONV" convert "$TT/tt.pt" --rules torchtitan --heads 8 --kv-heads 2 --head-dim 8 -o "$TT/flags.safetensors"
  expect "torchtitan: the facts as flags" 0 && tt_same "torchtitan: flags give the same tensors" "$TT/flags.safetensors" "$TT/hf_ref.pt"
  run "$TPCONV" convert "$TT/tt.pt" --rules torchtitan --heads 8 --kv-heads 4 --head-dim 8 -o "$TT/wrong.safetensors"
  expect "torchtitan: a kv_heads that contradicts wk's rows is refused (exit 2)" 2 \
    "tensor 'layers.0.attention.wk.weight': rope_halves" "16 rows are not 4 heads of head_dim 8: a model fact is wrong"
  nothing_written "torchtitan: wrong fact" "$TT/wrong.safetensors"
  run "$TPCONV" convert "$TT/tt.pt" --rules torchtitan --heads 8 --kv-heads 2 -o "$TT/nohd.safetensors"
  expect "torchtitan: no head_dim is refused, naming the fact (exit 2)" 2 "('head_dim'), which is not known: give --head-dim N or --config config.json"
  run "$TPCONV" convert "$TT/tt.pt" --rules torchtitan --config "$TT/config.json" -o "$TT/dry.safetensors" --dry-run
  [ "$rc" = 0 ] && grep -qF "# 22 tensors: 21 kept (17 renamed, 4 with rotary rows reordered), 1 dropped" "$T/out" &&
    grep -qxF "layers.1.attention.wk.weight -> model.layers.1.self_attn.k_proj.weight  rotary rows: pairs -> halves, 2 heads of 8 [16, 64] -> [16, 64]" "$T/out" &&
    ok "torchtitan --dry-run shows the reordered rows" || bad "torchtitan --dry-run" "$(head -5 "$T/out" "$T/err")"
fi

# torch output (needs the torch writer to take casts and renamed trees; enable with TPC_TEST_TORCH_OUT=1)
if [ -n "${TPC_TEST_TORCH_OUT:-}" ] && [ "$have_torch_reader" = 1 ]; then
  run "$TPCONV" convert "$T/ckpt.pth" -o "$T/out.pth" --rules dalle2 --expect-keys "$T/keys.txt"
  expect "torch -> torch --rules dalle2" 0 && check "torch output: names and bytes of the seed loop (torch.load weights_only)" "$T/out.pth"
  run "$TPCONV" convert "$T/ckpt.pth" -o "$T/out16.pth" --rules "$T/ext.json"
  expect "torch -> torch with casts" 0 && check "torch output with casts" "$T/out16.pth" bf16 '\.(g|gamma)$'
fi

echo "1..$n"
[ "$failed" = 0 ]
