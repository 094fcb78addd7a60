#!/usr/bin/env bash
# gpt-oss under its preset (TAP), on tests/data/tiny_gpt_oss (transformers
# 5.12's GptOssForCausalLM from_config, make_tiny_records.py): the preset
# chosen from config.json at tp 2 and 4 and at tp 4 with --ep 2, merged back
# byte-identical, verify's structure, layer, attention, MoE and model checks
# passing (sinks, yarn rope, sliding layer, router bias, interleaved experts
# stored [in, out] with their biases, clamped SwiGLU); rank 1's q_proj and
# o_proj slices of layer 1 swapped: verify fails layer 1's attention and
# passes layer 0's (exit 1). Its GGUF: tests/gguf/arch_test.sh.
# usage: gpt_oss_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=/usr/bin/python3
. "$SRC/tests/shard/tap.sh"
M=$T/m
mkdir -p "$M" && cp "$SRC/tests/data/tiny_gpt_oss.safetensors" "$M/model.safetensors" &&
  cp "$SRC/tests/data/tiny_gpt_oss.json" "$M/config.json"
for cfg in "2 0" "4 0" "4 2"; do
  set -- $cfg
  tp=$1 ep=$2 S=$T/s$1e$2 args=()
  lab="tp $tp"
  [ "$ep" = 0 ] || { args=(--ep "$ep"); lab="$lab ep $ep"; }
  if run "$TPCONV" shard "$M" --tp "$tp" "${args[@]}" -o "$S" && run "$TPCONV" merge "$S" -o "$T/mg$tp$ep" &&
     cmp -s "$T/mg$tp$ep/model.safetensors" "$M/model.safetensors" &&
     run "$TPCONV" verify --reference "$M" --shards "$S" &&
     grep -Eq '^ +model +model .* pass' "$T/out" && [ "$(grep -Ec '^ +(attn|mlp) +model\.layers\.[01]\.(attn|moe) .* pass' "$T/out")" = 4 ]; then
    ok "gpt-oss $lab: the preset from config.json, merged back byte-identical, verify's attention, MoE and model checks pass"
  else
    bad "gpt-oss $lab: shard, merge, verify" "$(cat "$T/err")" "$(grep -E 'FAIL|model ' "$T/out" | head -4)"
  fi
done
$PY - "$T/s2e0/model_tp01_pp00.safetensors" <<'PYEOF'
import json, struct, sys
f = open(sys.argv[1], "r+b"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
(a0, a1), (b0, b1) = [h["model.layers.1.self_attn.%s.weight" % k]["data_offsets"] for k in ("q_proj", "o_proj")]
assert a1 - a0 == b1 - b0
f.seek(8 + n + a0); x = f.read(a1 - a0); f.seek(8 + n + b0); y = f.read(b1 - b0)
f.seek(8 + n + a0); f.write(y); f.seek(8 + n + b0); f.write(x)
PYEOF
"$TPCONV" verify --reference "$M" --shards "$T/s2e0" >"$T/out" 2>"$T/err"; rc=$?
if [ $rc -eq 1 ] && grep -Eq '^ +attn +model\.layers\.1\.attn .*FAIL' "$T/out" &&
   grep -Eq '^ +attn +model\.layers\.0\.attn .*pass' "$T/out"; then
  ok "gpt-oss tp 2: rank 1's q_proj and o_proj slices of layer 1 swapped: verify fails layer 1's attention (exit 1)"
else
  bad "gpt-oss tp 2: a swapped slice" "exit $rc" "$(grep -E 'FAIL|attn' "$T/out" | head -4)"
fi
echo "1..$n"
[ $failed -eq 0 ]
