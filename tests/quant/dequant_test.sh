#!/usr/bin/env bash
# convert --dequantize (TAP): FP8 block (DeepSeek-V3 / Qwen3-FP8), FP8 per-channel
# and per-tensor (compressed-tensors), GPTQ (v1 4-bit act-order, 8-bit, gptq_v2) and
# AWQ gemm folders built by make_quant.py with real torch 1.13, converted to
# safetensors, torch and HF folders, each compared bit for bit with an
# independent torch dequantization (check_quant.py); inspect --dequantize; the
# refusals with their exact messages; a bounded resident set while streaming.
# Prints its seed (TPC_SEED=N to replay); skips without torch in /usr/bin/python3.
# usage: dequant_test.sh TPCONV SRCDIR [SEED]
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2") SEED=${3:-${TPC_SEED:-$RANDOM}}
export PYTHONDONTWRITEBYTECODE=1
PY=${TPC_PY:-/usr/bin/python3}
H="$SRC/tests/quant"
. "$SRC/tests/lib/tap.sh"
need_torch
tmpdir
cd "$T" || exit 1
echo "# seed $SEED"
if ! "$PY" "$H/make_quant.py" "$T" "$SEED" >/dev/null 2>"$T/gen.err"; then
  bad "generate quantized folders" "$(cat "$T/gen.err")"; echo "1..$n"; exit 1
fi

# conv DESC IN OUT DTYPE [--all-cast] -- TPCONV ARGS: convert with --dequantize, then compare
conv() {
  local d=$1 in=$2 out=$3 dt=$4 cast=$5; shift 6
  if ! "$TPCONV" convert --dequantize -q "$in" -o "$out" "$@" 2>"$T/err"; then
    bad "$d" "tpconv exit $?" "$(cat "$T/err")"; return 1
  fi
  if "$PY" "$H/check_quant.py" "$in" "$out" "$dt" $cast >"$T/chk" 2>&1; then ok "$d ($(cat "$T/chk"))"
  else bad "$d" "$(cat "$T/chk")"; return 1; fi
}

conv "fp8 block -> safetensors, bf16 (config torch_dtype)" fp8 o1.safetensors bf16 "" --
conv "fp8 block -> torch .pt, --dtype f32" fp8 o2.pt f32 --all-cast -- --dtype f32
conv "fp8 block -> HF folder" fp8 o3 bf16 "" --
if "$PY" - o3/config.json <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
sys.exit("quantization_config" in c or c.get("torch_dtype") != "bfloat16")
EOF
then ok "folder output: config.json without quantization_config, torch_dtype bfloat16"
else bad "folder output config.json" "$(cat o3/config.json)"; fi
[ -f o3/tokenizer_config.json ] && ok "folder output: companions copied" || bad "folder output: companions copied"
conv "fp8 block -> HF folder in several shards" fp8 o4 bf16 "" -- --max-shard-size 300K
[ -f o4/model.safetensors.index.json ] && [ "$(ls o4/*.safetensors | wc -l)" -ge 3 ] && ok "several shards and an index" ||
  bad "several shards and an index" "$(ls o4)"
conv "fp8 per-channel and per-tensor weight_scale (compressed-tensors) -> bf16" fp8ct o5.safetensors bf16 "" --
conv "gptq v1 4-bit act-order (torch .bin) -> safetensors, f16 (config torch_dtype)" gptq4 o6.safetensors f16 "" --
conv "gptq v1 4-bit act-order -> torch .pt, --dtype bf16" gptq4 o7.pt bf16 --all-cast -- --dtype bf16
conv "gptq 8-bit without g_idx -> f16" gptq8 o8.safetensors f16 "" --
conv "gptq 8-bit -> --dtype f32" gptq8 o9.safetensors f32 --all-cast -- --dtype f32
conv "gptq_v2 (zero points stored as is) -> bf16" gptqv2 o10.safetensors bf16 "" --
conv "awq gemm -> safetensors, f16" awq o11.safetensors f16 "" --
conv "awq gemm -> HF folder, --dtype bf16" awq o12 bf16 --all-cast -- --dtype bf16

# an AutoGPTQ folder from before quantization_config: quantize_config.json
mkdir old && cp gptq4/pytorch_model.bin old/ &&
  "$PY" -c 'import json; c = json.load(open("gptq4/config.json")); q = c.pop("quantization_config"); json.dump(c, open("old/config.json", "w")); q.pop("quant_method"); json.dump(q, open("old/quantize_config.json", "w"))'
conv "AutoGPTQ quantize_config.json" old o13.safetensors f16 "" --

# inspect --dequantize lists what convert writes; its hashes are the output's
if "$TPCONV" inspect --dequantize --json --hash fp8 >i1.json 2>"$T/err" && "$TPCONV" inspect --json --hash o1.safetensors >i2.json 2>>"$T/err" &&
   "$PY" - i1.json i2.json <<'EOF'
import json, sys
a = {t["name"]: t for t in json.load(open(sys.argv[1]))["tensors"]}
b = {t["name"]: t for t in json.load(open(sys.argv[2]))["tensors"]}
w = a["model.layers.0.self_attn.q_proj.weight"]
assert w["dtype"] == "BF16" and w["shape"] == [300, 260] and w.get("dequantized"), w
assert not any(k.endswith("scale_inv") for k in a), sorted(a)
assert set(a) == set(b), (sorted(a), sorted(b))
for k in a:
    assert (a[k]["dtype"], a[k]["shape"], a[k]["sha256"]) == (b[k]["dtype"], b[k]["shape"], b[k]["sha256"]), k
EOF
then ok "inspect --dequantize: dtypes, shapes and hashes of the convert output"
else bad "inspect --dequantize" "$(cat "$T/err")"; fi

# without --dequantize nothing changes: F8 bytes and scales are copied
if "$TPCONV" convert -q fp8 -o plain.safetensors 2>"$T/err" && "$TPCONV" inspect plain.safetensors >plain.txt 2>>"$T/err" &&
   grep -q 'q_proj.weight  *F8_E4M3 ' plain.txt && grep -q 'q_proj.weight_scale_inv  *F32 ' plain.txt
then ok "without --dequantize the FP8 tensors are copied as they are"
else bad "without --dequantize" "$(cat "$T/err" plain.txt)"; fi

# refusals: exit 3, the exact message, no output
refuse() {
  local d=$1 in=$2 msg=$3
  "$TPCONV" convert --dequantize "$in" -o r.safetensors >/dev/null 2>"$T/err"; local rc=$?
  if [ "$rc" = 3 ] && [ "$(cat "$T/err")" = "$msg" ] && [ ! -e r.safetensors ]; then ok "refused: $d"
  else bad "refused: $d" "exit $rc" "got:      $(cat "$T/err")" "expected: $msg"; fi
  rm -f r.safetensors
}
refuse "quantized tensors, no quantization_config" bad_noconfig \
  "tpconv: error: tensor 'a.weight': looks quantized (F8_E4M3 tensor) but 'bad_noconfig/config.json' has no quantization_config; tpconv cannot tell how to dequantize it"
mkdir noconf && cp gptq4/pytorch_model.bin noconf/
refuse "packed weights, no config.json at all" noconf/pytorch_model.bin \
  "tpconv: error: tensor 'model.layers.0.self_attn.q_proj.qweight': looks quantized (I32 packed weight) but there is no 'noconf/config.json' with a quantization_config; tpconv cannot tell how to dequantize it"
refuse "unknown quant_method" bad_method \
  "tpconv: error: 'bad_method/config.json': quantization_config.quant_method 'bitsandbytes' is not one tpconv can dequantize (fp8, gptq, awq, compressed-tensors, modelopt NVFP4, mxfp4)"
refuse "F8 weight without its scale" bad_noscale \
  "tpconv: error: 'bad_noscale': tensor 'a.weight': F8_E4M3 weight without a scale: neither 'a.weight_scale_inv' nor 'a.weight_scale' is in the checkpoint"
refuse "scale of the wrong shape" bad_scaleshape \
  "tpconv: error: 'bad_scaleshape': tensor 'a.weight_scale_inv': scale tensor has shape [2, 1]; F8_E4M3 weight 'a.weight' [64, 64] with weight_block_size [128, 128] needs [1, 1]"
refuse "GPTQ without qzeros" bad_gptq \
  "tpconv: error: 'bad_gptq': tensor 'l.qweight': GPTQ qweight without its 'l.qzeros' tensor"
refuse "g_idx out of range" bad_gidx \
  "tpconv: error: 'bad_gidx/model.safetensors': tensor 'l.g_idx': g_idx[5] is 7, outside the 2 groups of 'l.scales' (at byte offset 884, 0x374)"

# a scale beside a weight that is not F8: warned about, copied
if "$TPCONV" convert --dequantize fp8orphan -o orphan.safetensors >/dev/null 2>"$T/err" &&
   [ "$(cat "$T/err")" = "tpconv: warning: tensor 'b.weight_scale_inv' looks quantized but is part of no FP8 weight; copied as it is" ] &&
   "$TPCONV" inspect orphan.safetensors | grep -q '^a.weight  *BF16 ' && "$TPCONV" inspect orphan.safetensors | grep -q '^b.weight_scale_inv '
then ok "a scale that belongs to no F8 weight: warning, kept"
else bad "orphan scale" "$(cat "$T/err")"; fi

# streaming: 32 MiB of F8 to 64 MiB of bf16 in a bounded resident set (a whole-tensor
# dequantization would hold at least the 64 MiB output, plus 128 MiB in f32).
# The bound allows the direct-write queue (lib/tpc_io.c): two 8 MiB staging
# buffers, in huge pages (measured: 40 MB buffered, 48 MB with one direct
# write at a time, 56-60 MB queued)
# (sanitizer builds keep shadow memory and a quarantine: no bound there, as in tests/hostile)
if grep -q __asan_init "$TPCONV" 2>/dev/null; then
  n=$((n+1)); echo "ok $n - bounded RSS # SKIP sanitizer build"
elif [ -x /usr/bin/time ]; then
  if /usr/bin/time -f '%M' -o rss "$TPCONV" convert --dequantize -q fp8big -o big.safetensors 2>"$T/err" &&
     [ "$(tail -n 1 rss)" -lt 96000 ] && [ "$(stat -c %s big.safetensors)" -gt 67108864 ]
  then ok "fp8 32 MiB -> bf16 64 MiB with max RSS $(tail -n 1 rss) kB"
  else bad "bounded RSS" "$(cat "$T/err" rss)"; fi
  rm -f big.safetensors
else
  n=$((n+1)); echo "ok $n - bounded RSS # SKIP no /usr/bin/time"
fi
echo "1..$n"
[ "$failed" = 0 ]
