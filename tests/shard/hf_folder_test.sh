#!/usr/bin/env bash
# A Hugging Face model folder end to end (TAP): weights written by real torch
# plus config.json, generation_config.json, tokenizer files (JSON, a binary
# tokenizer.model, merges/vocab), a README and custom code go through
#   convert (torch .bin folder -> HF-sharded safetensors folder),
#   shard (tp 2 in the tpconv, oslo, trtllm and hf layouts) and
#   merge (each set back to an HF-sharded folder), reshard (hf and trtllm sets),
# and every step must carry every companion file: byte for byte, except the
# config.json of a TensorRT-LLM set (the model's config plus "mapping", taken
# out again by merge) and a cast's torch_dtype. Each merged folder must be what
# `from_pretrained` reads: config.json, model.safetensors.index.json whose
# weight_map names files that hold exactly those tensors, and the tensors of
# the original model bit for bit.
# usage: hf_folder_test.sh TPCONV SRCDIR     (needs /usr/bin/python3 with torch)
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=/usr/bin/python3
. "$SRC/tests/shard/tap.sh"
COMPANIONS="config.json generation_config.json tokenizer.json tokenizer_config.json special_tokens_map.json tokenizer.model vocab.json merges.txt README.md modeling_tiny.py"
# companions WANT GOT [trtllm|json]: every companion of WANT is in GOT, equal
# bytes; config.json of a TensorRT-LLM set (trtllm) must hold "mapping" and be
# the model's JSON beside it; after merging such a set (json) config.json is
# the model's JSON again (re-serialised: the layout required the change)
companions() {
  $PY - "$@" <<'EOF' 2>&1
import json, os, sys
want, got = sys.argv[1], sys.argv[2]
mode = sys.argv[3] if len(sys.argv) > 3 else ""
trt = mode == "trtllm"
bad = []
for f in sorted(os.listdir(want)):
    if f.endswith((".bin", ".safetensors", ".index.json")) or f.startswith("."):
        continue
    p, q = os.path.join(want, f), os.path.join(got, f)
    if not os.path.isfile(q):
        bad.append("missing " + f); continue
    a, b = open(p, "rb").read(), open(q, "rb").read()
    if f == "config.json" and trt:
        cb = json.loads(b)
        m = cb.pop("mapping", None)
        if not m or m.get("tp_size") != 2 or "tpconv" not in cb:
            bad.append("config.json lacks the TensorRT-LLM mapping")
        cb.pop("tpconv", None)
        if cb != json.loads(a):
            bad.append("config.json differs beyond the mapping")
    elif f == "config.json" and mode == "json":
        if json.loads(a) != json.loads(b):
            bad.append("config.json is not the model's")
    elif a != b:
        bad.append(f + " differs")
print("\n".join(bad) if bad else "same")
sys.exit(1 if bad else 0)
EOF
}
# loadable DIR: what from_pretrained needs of a sharded safetensors folder
loadable() {
  "$TPCONV" inspect --json "$1" > "$T/l.json" 2>"$T/lerr" || { cat "$T/lerr"; return 1; }
  $PY - "$1" "$T/l.json" <<'EOF' 2>&1
import json, os, sys
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
cfg = json.load(open(os.path.join(d, "config.json")))
assert cfg.get("model_type") == "llama", "config.json is not the model's"
assert "mapping" not in cfg and "tpconv" not in cfg, "config.json still has the shard set's members"
wm = idx["weight_map"]
names = {t["name"] for t in json.load(open(sys.argv[2]))["tensors"]}
assert set(wm) == names, "index weight_map and the files disagree"
for f in set(wm.values()):
    assert os.path.isfile(os.path.join(d, f)), "index names a missing file " + f
print("loadable")
EOF
}

# ---- the model folder: real torch weights and the usual companions
M=$T/m
$PY "$H/make_models.py" "$M" 0 >/dev/null || { echo "1..0 # SKIP model generator failed"; exit 0; }
HF=$T/hf
mkdir -p "$HF"
$PY - "$M/llama/model.safetensors" "$M/llama.pt" "$HF" "$M/llama/config.json" <<'EOF' || { echo "Bail out! cannot build the HF folder"; exit 1; }
import json, os, shutil, sys, torch
pt, out, cfg = sys.argv[2], sys.argv[3], sys.argv[4]
sd = torch.load(pt)
# two torch .bin shards with an index, as transformers' save_pretrained(safe_serialization=False) writes
keys = list(sd)
half = len(keys) // 2
parts = {"pytorch_model-00001-of-00002.bin": keys[:half], "pytorch_model-00002-of-00002.bin": keys[half:]}
wm = {}
for f, ks in parts.items():
    torch.save({k: sd[k] for k in ks}, os.path.join(out, f))
    wm.update({k: f for k in ks})
total = sum(t.numel() * t.element_size() for t in sd.values())
json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(wm.items()))},
          open(os.path.join(out, "pytorch_model.bin.index.json"), "w"), indent=2)
c = json.load(open(cfg)); c.update({"bos_token_id": 1, "eos_token_id": 2, "rms_norm_eps": 1e-6})
json.dump(c, open(os.path.join(out, "config.json"), "w"), indent=2)
json.dump({"bos_token_id": 1, "eos_token_id": 2, "max_new_tokens": 16}, open(os.path.join(out, "generation_config.json"), "w"), indent=2)
json.dump({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}}, open(os.path.join(out, "tokenizer.json"), "w"))
json.dump({"model_max_length": 128, "tokenizer_class": "LlamaTokenizer"}, open(os.path.join(out, "tokenizer_config.json"), "w"))
json.dump({"bos_token": "<s>", "eos_token": "</s>"}, open(os.path.join(out, "special_tokens_map.json"), "w"))
open(os.path.join(out, "tokenizer.model"), "wb").write(bytes(range(256)) * 3 + b"\x00\xff sentencepiece")
json.dump({"a": 0, "b": 1}, open(os.path.join(out, "vocab.json"), "w"))
open(os.path.join(out, "merges.txt"), "w").write("#version: 0.2\na b\n")
open(os.path.join(out, "README.md"), "w").write("---\nlicense: mit\n---\n# tiny llama\n")
open(os.path.join(out, "modeling_tiny.py"), "w").write("# custom code travels too\n")
EOF
for f in $COMPANIONS; do [ -f "$HF/$f" ] || { echo "Bail out! $f was not made"; exit 1; }; done

# ---- convert: torch .bin folder -> HF-sharded safetensors folder
ST=$T/st
run "$TPCONV" convert "$HF" -o "$ST/" --max-shard-size 20KB -q
if [ "$rc" = 0 ] && same "$M/llama/model.safetensors" "$ST" && out=$(companions "$HF" "$ST") && [ -f "$ST/model.safetensors.index.json" ] &&
   [ "$(ls "$ST"/*.safetensors | wc -l)" -ge 2 ]; then
  ok "convert keeps the tensors and carries every companion ($(ls "$ST" | wc -l) files)"
else bad "convert HF folder" "exit $rc" "$(cat "$T/err")" "$out" "$(cat "$T/diff" 2>/dev/null)"; fi
out=$(loadable "$ST") && ok "converted folder: $out" || bad "converted folder loadable" "$out"
# a cast updates torch_dtype and nothing else
run "$TPCONV" convert "$HF" -o "$T/bf16/" --dtype bf16 -q
if [ "$rc" = 0 ] && $PY -c '
import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
assert b.pop("torch_dtype") == "bfloat16"; a.pop("torch_dtype", None); assert a == b' "$HF/config.json" "$T/bf16/config.json" 2>"$T/perr" &&
   cmp -s "$HF/tokenizer.model" "$T/bf16/tokenizer.model"; then ok "convert --dtype bf16: config.json torch_dtype updated, other companions unchanged"
else bad "convert --dtype bf16 companions" "exit $rc" "$(cat "$T/err" "$T/perr")"; fi
run "$TPCONV" convert "$HF" -o "$T/nox/" --no-extras -q
[ "$rc" = 0 ] && [ ! -e "$T/nox/config.json" ] && [ ! -e "$T/nox/tokenizer.json" ] && ok "convert --no-extras writes weights only" ||
  bad "convert --no-extras" "exit $rc" "$(ls "$T/nox" 2>&1)"

# ---- shard in every layout, then merge back
for lay in tpconv oslo trtllm hf; do
  S=$T/set_$lay
  run "$TPCONV" shard "$ST" --preset llama --tp 2 --layout $lay -o "$S" -q
  if [ "$rc" != 0 ]; then bad "shard --layout $lay" "exit $rc" "$(cat "$T/err")"; continue; fi
  if [ $lay = hf ]; then
    good=1
    for d in "$S"/*/; do out=$(companions "$HF" "$d") || { good=0; break; }; done
    [ $good = 1 ] && [ "$(ls -d "$S"/*/ | wc -l)" = 2 ] && ok "shard --layout hf: both rank folders carry every companion" ||
      bad "shard hf companions" "$out"
  else
    note=""; [ $lay = trtllm ] && note=" (config.json with the mapping)"
    out=$(companions "$HF" "$S" $lay) && ok "shard --layout $lay carries every companion$note" ||
      bad "shard --layout $lay companions" "$out"
  fi
  MG=$T/merged_$lay
  run "$TPCONV" merge "$S" -o "$MG/" --max-shard-size 20KB -q
  mode=""; [ $lay = trtllm ] && mode=json
  if [ "$rc" = 0 ] && same "$M/llama/model.safetensors" "$MG" && out=$(companions "$HF" "$MG" "$mode") && out2=$(loadable "$MG"); then
    ok "merge --layout $lay set: tensors bit-exact, every companion back as it was, $out2"
  else bad "merge $lay set" "exit $rc" "$(cat "$T/err")" "$out" "${out2:-}" "$(cat "$T/diff" 2>/dev/null)"; fi
  [ ! -e "$MG/tpconv-manifest.json" ] && [ -z "$(ls "$MG" | grep -E '^rank|_tp')" ] && ok "merged $lay folder holds no shard-set files" ||
    bad "merged $lay folder has set files" "$(ls "$MG")"
done
# a reshard carries the companions from where the input set keeps them: an hf
# set's rank folders, a TensorRT-LLM set's config.json (its old mapping out)
for from in hf trtllm; do
  for to in tpconv trtllm; do
    R=$T/re_${from}_$to mode=""
    [ $from = trtllm ] && mode=json
    [ $to = trtllm ] && mode=trtllm
    run "$TPCONV" shard "$T/set_$from" --tp 2 --layout $to -o "$R" -q
    [ "$rc" = 0 ] && out=$(companions "$HF" "$R" $mode) && ok "reshard of the $from set into $to: every companion carried" ||
      bad "reshard $from -> $to companions" "exit $rc" "$(cat "$T/err")" "${out:-}"
  done
done
# a TensorRT-LLM set from elsewhere (its engine config, no manifest) resharded
# into trtllm: the engine config stays out, the new set still gets its mapping
F=$T/foreign_trt && mkdir -p "$F" && cp "$T/set_trtllm"/rank*.safetensors "$F/" &&
  echo '{"architecture": "LlamaForCausalLM", "dtype": "float32", "mapping": {"world_size": 2, "tp_size": 2, "pp_size": 1}}' >"$F/config.json"
run "$TPCONV" shard "$F" --preset llama --config "$ST/config.json" --tp 2 --layout trtllm -o "$T/re_foreign" -q
[ "$rc" = 0 ] && grep -q '"tp_size": 2' "$T/re_foreign/config.json" 2>/dev/null && ! grep -q '"dtype"' "$T/re_foreign/config.json" &&
  ok "reshard of a foreign TensorRT-LLM set into trtllm: a config.json with the mapping, not the engine's" ||
  bad "reshard foreign trtllm" "exit $rc" "$(cat "$T/err")" "$(cat "$T/re_foreign/config.json" 2>&1)"
# a merge into one file writes no companions beside it
run "$TPCONV" merge "$T/set_tpconv" -o "$T/one.safetensors" -q
[ "$rc" = 0 ] && [ ! -e "$T/config.json" ] && ok "merge to a single file leaves its folder alone" || bad "merge to one file" "exit $rc" "$(ls "$T")"
# --no-extras: weights only (a TensorRT-LLM set keeps the config.json it needs)
run "$TPCONV" shard "$ST" --preset llama --tp 2 -o "$T/bare" --no-extras -q
[ "$rc" = 0 ] && [ ! -e "$T/bare/tokenizer.json" ] && [ ! -e "$T/bare/config.json" ] && ok "shard --no-extras writes no companions" ||
  bad "shard --no-extras" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$ST" --preset llama --tp 2 --layout trtllm -o "$T/bare_trt" --no-extras -q
[ "$rc" = 0 ] && [ ! -e "$T/bare_trt/tokenizer.json" ] && grep -q '"tp_size":' "$T/bare_trt/config.json" 2>/dev/null &&
  ok "shard --layout trtllm --no-extras: only config.json (with mapping)" || bad "trtllm --no-extras" "exit $rc" "$(cat "$T/err")" "$(ls "$T/bare_trt")"
run "$TPCONV" merge "$T/set_tpconv" -o "$T/bare_merged/" --no-extras -q
[ "$rc" = 0 ] && [ ! -e "$T/bare_merged/config.json" ] && ls "$T/bare_merged" | grep -q safetensors && ok "merge --no-extras writes weights only" ||
  bad "merge --no-extras" "exit $rc" "$(cat "$T/err")" "$(ls "$T/bare_merged")"
echo "1..$n"
[ "$failed" = 0 ]
