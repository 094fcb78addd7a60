#!/usr/bin/env bash
# The vllm layout (TAP): vLLM's load_format="sharded_state" folders. Three tiny models
# made by real torch (tests/shard/vllm_check.py: a GQA LLaMA with a vocabulary that
# is no multiple of 64, a tied-embedding Qwen2 with q/k/v biases in bf16, a Mixtral
# of 4 experts) shard at tp 1, 2 and 4; every rank's file holds exactly what an
# independent torch construction of vLLM's state dict holds (fused qkv_proj and
# gate_up_proj, FusedMoE's stacked w13_weight and w2_weight, vocab padded to 64,
# tied lm_head once); merge gives the model back bit for bit; verify
# passes; --max-shard-size writes parts; a set without a manifest (as vLLM writes
# it) merges with --preset; resharding to another layout needs no file between;
# what vLLM could not load is refused with the tensor named.
# usage: vllm_test.sh TPCONV SRCDIR     (needs /usr/bin/python3 with torch)
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
M=$T/m
$PY "$H/vllm_check.py" make "$M" >/dev/null || { echo "1..0 # SKIP model generator failed"; exit 0; }
"$TPCONV" convert "$M/llama" -o "$M/llama.safetensors" -q && "$TPCONV" convert "$M/qwen" -o "$M/qwen.safetensors" -q &&
  "$TPCONV" convert "$M/mixtral" -o "$M/mixtral.safetensors" -q || { echo "1..0 # SKIP convert of the test models failed"; exit 0; }

for m in llama qwen mixtral; do
  pre=llama; [ $m = mixtral ] && pre=mixtral
  tps="1 2 4"; [ "$SAN" = 1 ] && tps="2 4"   # sanitizer build: no tp 1
  for tp in $tps; do
    S=$T/${m}_$tp
    run "$TPCONV" shard "$M/$m" --preset $pre --tp $tp --layout vllm -o "$S" -q
    if [ "$rc" != 0 ]; then bad "$m tp $tp: shard" "$(cat "$T/err")"; continue; fi
    run $PY "$H/vllm_check.py" check "$M/$m" "$S" $tp
    [ "$rc" = 0 ] && ok "$m tp $tp: every rank equals vLLM's state dict built in torch ($(tail -n 1 "$T/out"))" ||
      bad "$m tp $tp: rank files" "$(tail -5 "$T/out")"
    [ -f "$S/config.json" ] && [ -f "$S/tokenizer.json" ] && cmp -s "$S/tokenizer.json" "$M/$m/tokenizer.json" &&
      ok "$m tp $tp: config and tokenizer beside the rank files" || bad "$m tp $tp: companions" "$(ls "$S")"
    run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q
    [ "$rc" = 0 ] && same "$M/$m.safetensors" "$S.merged.safetensors" && ok "$m tp $tp: merge is bit-exact" ||
      bad "$m tp $tp: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
    run "$TPCONV" verify --reference "$M/$m.safetensors" --shards "$S"
    [ "$rc" = 0 ] && grep -q 'attn' "$T/out" && ok "$m tp $tp: verify passes with block checks ($(tail -n 1 "$T/out" | sed 's/^# //'))" ||
      bad "$m tp $tp: verify" "exit $rc" "$(tail -5 "$T/out")" "$(cat "$T/err")"
  done
done

# tied: one tensor per rank for lm_head/embed_tokens, named as vLLM keeps it
$PY - "$T/qwen_2" <<'PY' 2>"$T/perr" && ok "tied qwen: lm_head.weight stored once, no model.embed_tokens.weight" || bad "tied storage" "$(cat "$T/perr")"
import json, struct, sys
for r in range(2):
    f = open("%s/model-rank-%d-part-0.safetensors" % (sys.argv[1], r), "rb")
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
    assert "lm_head.weight" in h and "model.embed_tokens.weight" not in h, sorted(h)
    assert h["lm_head.weight"]["shape"] == [192 // 2, 32], h["lm_head.weight"]
PY

# parts: --max-shard-size splits a rank the way vLLM's save_model does
S=$T/parts
run "$TPCONV" shard "$M/llama" --preset llama --tp 2 --layout vllm --max-shard-size 40KB -o "$S" -q
np=$(ls "$S" | grep -c '^model-rank-0-part-')
[ "$rc" = 0 ] && [ "$np" -gt 1 ] && $PY "$H/vllm_check.py" check "$M/llama" "$S" 2 >"$T/out" &&
  ok "--max-shard-size 40KB: $np parts for rank 0, together equal to vLLM's state dict" || bad "parts" "$np parts" "$(cat "$T/err" "$T/out")"
run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q
[ "$rc" = 0 ] && same "$M/llama.safetensors" "$S.merged.safetensors" && ok "a set of parts merges bit-exactly" ||
  bad "parts merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
# --force over a set with more parts removes the extra parts
run "$TPCONV" shard "$M/llama" --preset llama --tp 2 --layout vllm -o "$S" -q --force
[ "$rc" = 0 ] && [ "$(ls "$S" | grep -c '^model-rank-0-part-')" = 1 ] && $PY "$H/vllm_check.py" check "$M/llama" "$S" 2 >"$T/out" &&
  ok "--force with one part removes the earlier run's extra parts" || bad "force parts" "$(ls "$S")" "$(cat "$T/err" "$T/out")"

# broken sets: a missing part, a qkv_proj whose rows do not fit the head counts
"$TPCONV" shard "$M/llama" --preset llama --tp 2 --layout vllm --max-shard-size 40KB -o "$T/lost" -q && rm "$T/lost/model-rank-1-part-2.safetensors"
run "$TPCONV" merge "$T/lost" -o "$T/lost.safetensors" -q
[ "$rc" = 3 ] && grep -q "model-rank-1-part-0.safetensors" "$T/err" && [ ! -e "$T/lost.safetensors" ] &&
  ok "a set missing one part of a rank: exit 3 naming the rank file, nothing written" || bad "missing part" "exit $rc" "$(cat "$T/err")"
cp -r "$T/llama_2" "$T/cut" && $PY - "$T/cut/model-rank-0-part-0.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]; d = open(p, "rb").read(); n = struct.unpack("<Q", d[:8])[0]; h = json.loads(d[8:8 + n])
k = "model.layers.1.self_attn.qkv_proj.weight"
h[k]["shape"][0] -= 8
b, e = h[k]["data_offsets"]; h[k]["data_offsets"] = [b, e - 8 * 64 * 4]
# the bytes after it move down; rebuild the data section in offset order
items = sorted((v["data_offsets"][0], kk) for kk, v in json.loads(d[8:8 + n]).items() if kk != "__metadata__")
old = json.loads(d[8:8 + n]); data = b""; hh = {"__metadata__": old["__metadata__"]}
for _, kk in items:
    ob, oe = old[kk]["data_offsets"]; blob = d[8 + n + ob:8 + n + oe]
    if kk == k: blob = blob[:len(blob) - 8 * 64 * 4]
    hh[kk] = dict(old[kk], shape=h[kk]["shape"] if kk == k else old[kk]["shape"], data_offsets=[len(data), len(data) + len(blob)])
    data += blob
js = json.dumps(hh).encode(); js += b" " * ((8 - len(js) % 8) % 8)
open(p, "wb").write(struct.pack("<Q", len(js)) + js + data)
PY
run "$TPCONV" merge "$T/cut" -o "$T/cut.safetensors" -q
[ "$rc" = 3 ] && grep -q "qkv_proj.weight" "$T/err" && grep -q "model-rank-0-part-0.safetensors" "$T/err" && grep -q "rows" "$T/err" &&
  [ ! -e "$T/cut.safetensors" ] && ok "a qkv_proj cut short: exit 3 naming the tensor and file" || bad "cut qkv" "exit $rc" "$(cat "$T/err")"

# a set as vLLM writes it (no manifest): merge and verify with the plan and config
S=$T/foreign
cp -r "$T/llama_4" "$S" && rm "$S/tpconv-manifest.json"
run "$TPCONV" merge "$S" --preset llama --config "$M/llama/config.json" -o "$S.merged.safetensors" -q
[ "$rc" = 0 ] && same "$M/llama.safetensors" "$S.merged.safetensors" &&
  ok "a vllm set without a manifest (as vLLM writes it) merges bit-exactly with --preset llama --config" ||
  bad "foreign merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
cp -r "$T/mixtral_2" "$T/foreign_mixtral" && rm "$T/foreign_mixtral/tpconv-manifest.json"
run "$TPCONV" merge "$T/foreign_mixtral" --preset mixtral -o "$T/foreign_mixtral.safetensors" -q
[ "$rc" = 0 ] && same "$M/mixtral.safetensors" "$T/foreign_mixtral.safetensors" &&
  ok "a Mixtral vllm set without a manifest: FusedMoE's stacked experts unstacked, bit-exact" ||
  bad "foreign mixtral merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
run "$TPCONV" verify --reference "$M/llama.safetensors" --shards "$S" --preset llama --ranks 4 --config "$M/llama/config.json"
[ "$rc" = 0 ] && ok "verify of a vllm set without a manifest passes" || bad "foreign verify" "exit $rc" "$(tail -3 "$T/out")" "$(cat "$T/err")"
# the facts come in one order for every command: flags, --config, then a
# config.json inside the set (vLLM keeps the model's there)
run "$TPCONV" merge "$S" --preset llama -o "$S.ownconfig.safetensors" -q
[ "$rc" = 0 ] && same "$M/llama.safetensors" "$S.ownconfig.safetensors" &&
  ok "a vllm set without a manifest merges with --preset alone: head counts from the set's own config.json" ||
  bad "foreign merge with the set's config" "exit $rc" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
mv "$S/config.json" "$S/config.json.away"
run "$TPCONV" merge "$S" --preset llama -o "$S.nofacts.safetensors" -q
[ "$rc" != 0 ] && grep -q 'head' "$T/err" && [ ! -e "$S.nofacts.safetensors" ] &&
  ok "without head counts the fused qkv_proj is not guessed (exit $rc)" || bad "foreign without facts" "exit $rc" "$(cat "$T/err")"
mv "$S/config.json.away" "$S/config.json"

run "$TPCONV" inspect "$T/llama_2"
[ "$rc" = 0 ] && grep -q '^# shard set: layout vllm, tp 2, pp 1, 2 rank files' "$T/out" && grep -q 'self_attn.q_proj.weight' "$T/out" &&
  ok "inspect of a vllm set: layout, tp, pp, then the merged model" || bad "inspect set" "$(head -3 "$T/out")" "$(cat "$T/err")"
run "$TPCONV" inspect --json "$S"
[ "$rc" = 0 ] && $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["shard_set"] == {"layout": "vllm", "manifest": False}, r["shard_set"]' "$T/out" &&
  ok "inspect --json of a set vLLM wrote: shard_set names the layout, no manifest" || bad "inspect foreign" "$(head -c 300 "$T/out")" "$(cat "$T/err")"

# reshard: a vllm set straight into a tpconv set, no file between
run "$TPCONV" shard "$T/llama_2" --tp 4 -o "$T/re4" -q
[ "$rc" = 0 ] && run "$TPCONV" merge "$T/re4" -o "$T/re4.safetensors" -q && same "$M/llama.safetensors" "$T/re4.safetensors" &&
  ok "reshard vllm tp 2 -> tpconv tp 4 merges bit-exactly" || bad "reshard" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
run "$TPCONV" shard "$T/re4" --tp 2 --layout vllm -o "$T/re2" -q
[ "$rc" = 0 ] && $PY "$H/vllm_check.py" check "$M/llama" "$T/re2" 2 >"$T/out" &&
  ok "reshard tpconv tp 4 -> vllm tp 2 equals vLLM's state dict" || bad "reshard to vllm" "$(cat "$T/err" "$T/out")"

# refusals: what vLLM could not load is never written
$PY - "$M" <<'PY'
import torch, sys, os, json, shutil
m = sys.argv[1]
sd = torch.load(m + "/llama/pytorch_model.bin")
os.makedirs(m + "/extra", exist_ok=True)
sd2 = dict(sd); sd2["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(4)
torch.save(sd2, m + "/extra/pytorch_model.bin"); shutil.copy(m + "/llama/config.json", m + "/extra/")
os.makedirs(m + "/gpt", exist_ok=True)
torch.save(sd, m + "/gpt/pytorch_model.bin")
c = json.load(open(m + "/llama/config.json")); c["architectures"] = ["GPTBigCodeForCausalLM"]
json.dump(c, open(m + "/gpt/config.json", "w"))
os.makedirs(m + "/untied", exist_ok=True)
sd3 = dict(sd); del sd3["lm_head.weight"]
torch.save(sd3, m + "/untied/pytorch_model.bin"); shutil.copy(m + "/llama/config.json", m + "/untied/")
PY
run "$TPCONV" shard "$M/extra" --preset llama --tp 2 --layout vllm -o "$T/r1" -q
[ "$rc" = 3 ] && grep -q "rotary_emb.inv_freq" "$T/err" && grep -q "vLLM has no parameter" "$T/err" && [ ! -e "$T/r1/tpconv-manifest.json" ] &&
  [ -z "$(ls "$T/r1" 2>/dev/null)" ] && ok "a tensor vLLM has no parameter for is refused by name (exit 3), nothing written" ||
  bad "unknown tensor" "exit $rc" "$(cat "$T/err")" "$(ls "$T/r1" 2>/dev/null)"
run "$TPCONV" shard "$M/gpt" --preset llama --tp 2 --layout vllm -o "$T/r2" -q
[ "$rc" = 2 ] && grep -qF "names GPTBigCodeForCausalLM" "$T/err" && ok "--preset llama on a GPTBigCodeForCausalLM is refused (exit 2)" ||
  bad "--preset llama on GPTBigCode" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$M/gpt" --preset llama --preset-force --tp 2 --layout vllm -o "$T/r2" -q
[ "$rc" = 3 ] && grep -q "not GPTBigCodeForCausalLM" "$T/err" && ok "an architecture whose vLLM names are unknown is refused (exit 3)" ||
  bad "unknown arch" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$M/untied" --preset llama --tp 2 --layout vllm -o "$T/r3" -q
[ "$rc" = 3 ] && grep -q "tie_word_embeddings is false" "$T/err" && ok "an untied config without lm_head.weight is refused (exit 3)" ||
  bad "untied without lm_head" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$M/llama" --preset llama --tp 2 --pp 2 --layout vllm -o "$T/r4" -q
[ "$rc" = 2 ] && grep -q "pp up to 1" "$T/err" && ok "--pp 2 is a usage error: vLLM names tensor-parallel ranks only" || bad "pp" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$M/llama" --preset llama --tp 2 --layout vllm --format torch -o "$T/r5" -q
[ "$rc" = 2 ] && grep -q "writes safetensors files, not torch" "$T/err" && ok "--format torch is refused for the vllm layout" || bad "format" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$M/llama" --preset llama --tp 2 --layout vllm --vocab-multiple 8 -o "$T/r6" -q
[ "$rc" = 2 ] && grep -q "drop --vocab-multiple" "$T/err" && ok "--vocab-multiple is refused: vLLM pads its own way" || bad "vmult" "exit $rc" "$(cat "$T/err")"
"$TPCONV" plan llama | $PY -c 'import json,sys; p=json.load(sys.stdin); [r.update(split="col") for r in p["rules"] if "o_proj" in r["match"] and "weight" in r["match"]]; json.dump(p, sys.stdout)' > "$T/bad.json"
run "$TPCONV" shard "$M/llama" --plan "$T/bad.json" --tp 2 --layout vllm -o "$T/r7" -q
[ "$rc" = 3 ] && grep -q "o_proj.weight" "$T/err" && grep -q "row-parallel" "$T/err" &&
  ok "a plan that splits o_proj unlike vLLM is refused naming the tensor" || bad "plan mismatch" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard --help
grep -q '^ *vllm  *model-rank-R-part-P.safetensors' "$T/out" && ok "shard --help lists the vllm layout from the registry" || bad "help" "$(grep -n layout "$T/out")"
echo "1..$n"
[ "$failed" = 0 ]
