#!/usr/bin/env bash
# The vllm layout for the MoE and Gemma families (TAP): the tiny fixtures of
# tests/gguf/arch (written by transformers) for Qwen3-MoE, Qwen2-MoE (shared
# expert), Gemma 2 and Gemma 3 shard at tp 2 and 4, OLMo 2 and 3 at tp 2 (their
# 2 kv heads, which vLLM cannot replicate); every rank's files hold
# exactly what tests/shard/vllm_check.py's independent construction of vLLM's
# state dict holds (FusedMoE's w13_weight/w2_weight, Qwen2-MoE's shared expert
# under experts._shared_experts, the smallest of its module paths; Gemma's tied
# embedding as model.embed_tokens.weight, no lm_head; norms as stored);
# merge gives each model back bit for bit, with and without a manifest;
# verify passes; what vLLM refuses (tp above the experts or OLMo's kv heads, an
# untied Gemma) is
# refused with the reason.
# usage: vllm_families_test.sh TPCONV SRCDIR     (needs /usr/bin/python3 with torch)
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
A=$SRC/tests/gguf/arch
FAMS="qwen3-moe qwen2-moe gemma2 gemma3 olmo2 olmo3"

checks=()
for f in $FAMS; do
  tps="2 4"; case $f in olmo*) tps=2 ;; esac   # OLMo: 2 kv heads, vLLM cannot replicate them
  for tp in $tps; do
    S=$T/${f}_$tp
    run "$TPCONV" shard "$A/tiny-$f" --tp $tp --layout vllm -o "$S" -q
    if [ "$rc" != 0 ]; then bad "$f tp $tp: shard" "$(cat "$T/err")"; continue; fi
    checks+=("$A/tiny-$f" "$S" $tp)
    run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q
    [ "$rc" = 0 ] && same "$A/tiny-$f/model.safetensors" "$S.merged.safetensors" && ok "$f tp $tp: shard, merge is bit-exact" ||
      bad "$f tp $tp: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
  done
done
# one process checks every set against vLLM's state dict built in torch
run $PY "$H/vllm_check.py" check "${checks[@]}"
[ "$rc" = 0 ] && [ "$(grep -c 'match$' "$T/out")" = 28 ] &&
  ok "every rank of the $((${#checks[@]} / 3)) sets equals vLLM's state dict ($(grep -c 'match$' "$T/out") ranks)" ||
  bad "rank files against vLLM's state dict" "$(grep -v 'match$' "$T/out" | head -8)" "$(cat "$T/err")"

# the names vLLM's _filter_subtensors keeps
$PY - "$T" <<'PY' 2>"$T/perr" && ok "Qwen2-MoE's shared expert under experts._shared_experts, Gemma's tied embedding once as model.embed_tokens.weight" || bad "kept names" "$(cat "$T/perr")"
import json, struct, sys
def keys(p):
    f = open(p, "rb"); n = struct.unpack("<Q", f.read(8))[0]; return json.loads(f.read(n))
h = keys(sys.argv[1] + "/qwen2-moe_2/model-rank-1-part-0.safetensors")
e = "model.layers.0.mlp.experts._shared_experts."
assert h[e + "gate_up_proj.weight"]["shape"] == [64, 32], h[e + "gate_up_proj.weight"]
assert h[e + "expert_gate.weight"]["shape"] == [1, 32] and h[e + "down_proj.weight"]["shape"] == [32, 32]
assert not [k for k in h if "shared_expert." in k or "shared_expert_gate" in k], sorted(h)
assert h["model.layers.0.mlp.experts.w13_weight"]["shape"] == [4, 32, 32]
for g in ("gemma2", "gemma3"):
    h = keys(sys.argv[1] + "/%s_4/model-rank-3-part-0.safetensors" % g)
    assert "lm_head.weight" not in h and h["model.embed_tokens.weight"]["shape"] == [80, 32], sorted(h)
PY

# sets as vLLM writes them (no manifest): the shared expert and the experts from the tables
for s in qwen2-moe_2 gemma3_4; do
  f=${s%_*}
  cp -r "$T/$s" "$T/$s.foreign" && rm "$T/$s.foreign/tpconv-manifest.json"
  run "$TPCONV" merge "$T/$s.foreign" -o "$T/$s.foreign.safetensors" -q
  [ "$rc" = 0 ] && same "$A/tiny-$f/model.safetensors" "$T/$s.foreign.safetensors" &&
    ok "$f: a set without a manifest merges bit-exactly" || bad "$f foreign merge" "exit $rc" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
done
for s in qwen2-moe_4 gemma2_2; do
  f=${s%_*}
  run "$TPCONV" verify --reference "$A/tiny-$f/model.safetensors" --shards "$T/$s" --config "$A/tiny-$f/config.json"
  [ "$rc" = 0 ] && ok "$f: verify passes ($(tail -n 1 "$T/out" | sed 's/^# //'))" || bad "$f verify" "exit $rc" "$(tail -3 "$T/out")" "$(cat "$T/err")"
done

# refusals: what vLLM would not load is never written
mkdir -p "$T/wide" "$T/untied"
cp "$A/tiny-qwen3-moe/"* "$T/wide/" && cp "$A/tiny-gemma2/"* "$T/untied/"
$PY - "$T" <<'PY'
import json, sys
p = sys.argv[1] + "/wide/config.json"; c = json.load(open(p))
# 8 heads of 8 (the same q/k/v rows), 4 experts: only the experts stop tp 8
c.update(num_attention_heads=8, num_key_value_heads=4, head_dim=8); json.dump(c, open(p, "w"))
p = sys.argv[1] + "/untied/config.json"; c = json.load(open(p)); c["tie_word_embeddings"] = False; json.dump(c, open(p, "w"))
PY
# a Gemma 2 checkpoint that also holds lm_head.weight (the embedding's bytes, or other ones)
mkdir -p "$T/withhead" "$T/otherhead"
cp "$A/tiny-gemma2/"* "$T/withhead/" && cp "$A/tiny-gemma2/"* "$T/otherhead/"
$PY - "$T" <<'PY'
import json, struct, sys
def add_head(path, flip):
    d = open(path, "rb").read(); n = struct.unpack("<Q", d[:8])[0]; h = json.loads(d[8:8 + n]); data = d[8 + n:]
    e = h["model.embed_tokens.weight"]; b, x = e["data_offsets"]; blob = bytearray(data[b:x])
    if flip:
        blob[0] ^= 0x40
    h["lm_head.weight"] = dict(e, data_offsets=[len(data), len(data) + len(blob)])
    js = json.dumps(h).encode(); js += b" " * ((8 - len(js) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(js)) + js + data + bytes(blob))
add_head(sys.argv[1] + "/withhead/model.safetensors", False)
add_head(sys.argv[1] + "/otherhead/model.safetensors", True)
PY
run "$TPCONV" shard "$T/withhead" --tp 2 --layout vllm -o "$T/wh" -q && run "$TPCONV" merge "$T/wh" -o "$T/wh.safetensors" -q
[ "$rc" = 0 ] && same "$T/withhead/model.safetensors" "$T/wh.safetensors" && ! grep -q lm_head "$T/wh/model-rank-0-part-0.safetensors" &&
  ok "Gemma 2 with a tied lm_head.weight too: stored once as model.embed_tokens.weight, both back by the manifest" ||
  bad "gemma2 with lm_head" "exit $rc" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
run "$TPCONV" shard "$T/otherhead" --tp 2 --layout vllm -o "$T/oh" -q
[ "$rc" = 3 ] && grep -q "lm_head.weight differs from model.embed_tokens.weight" "$T/err" &&
  ok "Gemma 2 with an lm_head.weight of other bytes is refused by name (exit 3)" || bad "gemma2 other head" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$T/wide" --tp 8 --layout vllm -o "$T/r1" -q
[ "$rc" = 3 ] && grep -q "tp 8 is above the model's 4 routed experts" "$T/err" && grep -q "Qwen3MoeForCausalLM" "$T/err" &&
  [ -z "$(ls "$T/r1" 2>/dev/null)" ] && ok "Qwen3-MoE at tp 8 with 4 experts is refused (exit 3), nothing written" ||
  bad "tp above experts" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$A/tiny-olmo2" --tp 4 --layout vllm -o "$T/r3" -q
[ "$rc" = 3 ] && grep -q "tp 4 is above the model's 2 kv heads" "$T/err" && grep -q "Olmo2ForCausalLM" "$T/err" &&
  ok "OLMo 2 at tp 4 with 2 kv heads is refused (exit 3): vLLM norms k over all kv heads" || bad "olmo2 tp 4" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$A/tiny-gemma3" --tp 8 --layout vllm -o "$T/r4" -q
[ "$rc" = 3 ] && grep -q "4 query heads in dim 1 (size 64) cannot be split over tp 8" "$T/err" && [ -z "$(ls "$T/r4" 2>/dev/null)" ] &&
  ok "Gemma 3 at tp 8 with 4 heads is refused naming the tensor (exit 3), as vLLM asserts" || bad "gemma3 tp 8" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$T/untied" --tp 2 --layout vllm -o "$T/r2" -q
[ "$rc" = 3 ] && grep -q "tie_word_embeddings is not true" "$T/err" && grep -q "Gemma2ForCausalLM has no lm_head" "$T/err" &&
  ok "an untied Gemma 2 config is refused (exit 3): vLLM's class has no lm_head" || bad "untied gemma" "exit $rc" "$(cat "$T/err")"
echo "1..$n"
[ "$failed" = 0 ]
