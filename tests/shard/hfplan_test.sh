#!/usr/bin/env bash
# tpconv plan --from-hf (TAP): transformers tensor-parallel plans (base_model_tp_plan
# in a config.json, or the dict alone) become tpconv plans; a LLaMA sharded with the
# generated plan splits every projection as the llama preset does, merges back
# bit-exactly and verifies; packed (fused) styles become parts; expert-parallel and
# unknown styles are refused by name.
# usage: hfplan_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
M=$T/m
$PY "$H/vllm_check.py" make "$M" >/dev/null || { echo "1..0 # SKIP model generator failed"; exit 0; }
python3 - "$M/llama/config.json" "$T/llama_cfg.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
# LlamaConfig.base_model_tp_plan as transformers defines it
c["base_model_tp_plan"] = {"layers.*.self_attn.q_proj": "colwise", "layers.*.self_attn.k_proj": "colwise",
                           "layers.*.self_attn.v_proj": "colwise", "layers.*.self_attn.o_proj": "rowwise",
                           "layers.*.mlp.gate_proj": "colwise", "layers.*.mlp.up_proj": "colwise",
                           "layers.*.mlp.down_proj": "rowwise"}
json.dump(c, open(sys.argv[2], "w"))
PY
run "$TPCONV" plan --from-hf "$T/llama_cfg.json"
cp "$T/out" "$T/plan.json"
[ "$rc" = 0 ] && "$TPCONV" plan --check "$T/plan.json" -q && grep -q '"heads": 8, "kv_heads": 2' "$T/plan.json" &&
  ok "a Llama config's base_model_tp_plan becomes a valid plan with its head counts" || bad "from-hf llama" "$(cat "$T/err")"
run "$TPCONV" shard "$M/llama" --plan "$T/plan.json" --tp 2 -o "$T/s" -q
[ "$rc" = 0 ] && run "$TPCONV" merge "$T/s" -o "$T/s.safetensors" -q && "$TPCONV" convert "$M/llama" -o "$T/ref.safetensors" -q &&
  same "$T/ref.safetensors" "$T/s.safetensors" && ok "sharded with it at tp 2 (GQA), merge is bit-exact" || bad "shard/merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
"$TPCONV" shard "$M/llama" --preset llama --tp 2 -o "$T/p" -q
good=1
for r in 00 01; do
  "$TPCONV" inspect --json --checksum xxh3-128 "$T/s/model_tp${r}_pp00.safetensors" > "$T/a.json" &&
  "$TPCONV" inspect --json --checksum xxh3-128 "$T/p/model_tp${r}_pp00.safetensors" > "$T/b.json" &&
  python3 - "$T/a.json" "$T/b.json" <<'PY' || good=0
import json, sys
a = {t["name"]: t for t in json.load(open(sys.argv[1]))["tensors"]}
b = {t["name"]: t for t in json.load(open(sys.argv[2]))["tensors"]}
for n in a:
    if "proj" in n:
        ka = [k for k in a[n] if k.startswith("xxh3") or k.startswith("sha")]
        assert a[n]["shape"] == b[n]["shape"] and a[n][ka[0]] == b[n][ka[0]], n
PY
done
[ $good = 1 ] && ok "every projection's rank slice equals the llama preset's" || bad "slices differ from the preset"
run "$TPCONV" verify --reference "$T/ref.safetensors" --shards "$T/s" --arch llama
[ "$rc" = 0 ] && ok "verify passes ($(tail -n 1 "$T/out" | sed 's/^# //'))" || bad "verify" "$(tail -3 "$T/out")" "$(cat "$T/err")"
# the dict alone, with packed (fused) styles
echo '{"layers.*.self_attn.qkv_proj": "packed_colwise", "layers.*.mlp.gate_up_proj": "local_packed_colwise", "layers.*.self_attn.o_proj": "rowwise", "layers.*.input_layernorm": "replicate", "lm_head": "colwise_rep"}' > "$T/dict.json"
run "$TPCONV" plan --from-hf "$T/dict.json"
[ "$rc" = 0 ] && grep -q 'qkv_proj.*"parts": \["q", "kv", "kv"\]' "$T/out" && grep -q 'gate_up_proj.*"parts": 2' "$T/out" &&
  grep -q 'lm_head.*"vocab"' "$T/out" && ok "the dict alone: packed styles become parts ([q|k|v], [gate|up]), lm_head vocab" || bad "dict" "$(cat "$T/out" "$T/err")"
# refusals
echo '{"hidden_size": 64, "num_attention_heads": 8, "base_model_tp_plan": {"layers.*.mlp.experts.*.w1": "local_colwise"}, "base_model_ep_plan": {"layers.*.mlp.gate": "ep_router", "layers.*.mlp.experts": "grouped_gemm"}}' > "$T/moe.json"
run "$TPCONV" plan --from-hf "$T/moe.json"
[ "$rc" = 3 ] && grep -q "base_model_ep_plan (expert parallelism)" "$T/err" && ok "an expert-parallel plan is refused (exit 3)" || bad "ep" "exit $rc" "$(cat "$T/err")"
echo '{"layers.*.self_attn.q_proj": "weirdwise"}' > "$T/bad.json"
run "$TPCONV" plan --from-hf "$T/bad.json"
[ "$rc" = 3 ] && grep -q "style 'weirdwise', which tpconv does not know" "$T/err" && ok "an unknown style is refused by name" || bad "unknown style" "exit $rc" "$(cat "$T/err")"
echo "1..$n"
[ "$failed" = 0 ]
