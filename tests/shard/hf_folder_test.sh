#!/usr/bin/env bash
# A Hugging Face model folder end to end (TAP): weights written by real torch
# plus config.json, generation_config.json, tokenizer files (JSON, a binary
# tokenizer.model, merges/vocab), a README and custom code go through
#   convert (torch .bin folder -> HF-sharded safetensors folder),
#   shard (tp 2 in the tpconv, oslo, hf-mapping and hf layouts) and
#   merge (each set back to an HF-sharded folder),
# and every step must carry every companion file: byte for byte, except the
# config.json of an hf-mapping set (the model's config plus "mapping", taken
# out again by merge) and a cast's torch_dtype. Each merged folder must be what
# `from_pretrained` reads: config.json, model.safetensors.index.json whose
# weight_map names files that hold exactly those tensors, and the tensors of
# the original model bit for bit.
# usage: hf_folder_test.sh TPCONV SRCDIR     (needs /usr/bin/python3 with torch)
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
COMPANIONS="config.json generation_config.json tokenizer.json tokenizer_config.json special_tokens_map.json tokenizer.model vocab.json merges.txt README.md modeling_tiny.py"
# companions WANT GOT [hf-mapping[TP]|json]: every companion of WANT is in GOT, equal
# bytes; config.json of an hf-mapping set must hold "mapping" (tp_size TP,
# default 2) and be
# the model's JSON beside it; after merging such a set (json) config.json is
# the model's JSON again (re-serialised: the layout required the change)
companions() {
  $PY - "$@" <<'EOF' 2>&1
import json, os, sys
want, got = sys.argv[1], sys.argv[2]
mode = sys.argv[3] if len(sys.argv) > 3 else ""
trt = mode.startswith("hf-mapping")
trt_tp = int(mode[10:] or 2) if trt else 0
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
        if not m or m.get("tp_size") != trt_tp or "tpconv" not in cb:
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
for lay in tpconv oslo hf-mapping hf; do
  S=$T/set_$lay
  run "$TPCONV" shard "$ST" --preset llama --tp 2 --layout $lay -o "$S" -q
  if [ "$rc" != 0 ]; then bad "shard --layout $lay" "exit $rc" "$(cat "$T/err")"; continue; fi
  if [ $lay = hf ]; then
    good=1
    for d in "$S"/*/; do out=$(companions "$HF" "$d") || { good=0; break; }; done
    [ $good = 1 ] && [ "$(ls -d "$S"/*/ | wc -l)" = 2 ] && ok "shard --layout hf: both rank folders carry every companion" ||
      bad "shard hf companions" "$out"
  else
    note=""; [ $lay = hf-mapping ] && note=" (config.json with the mapping)"
    out=$(companions "$HF" "$S" $lay) && ok "shard --layout $lay carries every companion$note" ||
      bad "shard --layout $lay companions" "$out"
  fi
  MG=$T/merged_$lay
  run "$TPCONV" merge "$S" -o "$MG/" --max-shard-size 20KB -q
  mode=""; [ $lay = hf-mapping ] && mode=json
  if [ "$rc" = 0 ] && same "$M/llama/model.safetensors" "$MG" && out=$(companions "$HF" "$MG" "$mode") && out2=$(loadable "$MG"); then
    ok "merge --layout $lay set: tensors bit-exact, every companion back as it was, $out2"
  else bad "merge $lay set" "exit $rc" "$(cat "$T/err")" "$out" "${out2:-}" "$(cat "$T/diff" 2>/dev/null)"; fi
  [ ! -e "$MG/tpconv-manifest.json" ] && [ -z "$(ls "$MG" | grep -E '^rank|_tp')" ] && ok "merged $lay folder holds no shard-set files" ||
    bad "merged $lay folder has set files" "$(ls "$MG")"
done
# ---- convert reads a set as merge does (one opener, merged on the fly, no
# temporary file): every output kind byte for byte what merge writes, the
# companions too (same file names in two folders: a torch zip names its
# folder after the file)
# (vLLM's and Megatron's names have no rotary buffer and no extra scale: dropped)
for lay in tpconv oslo hf-mapping hf vllm megatron dcp; do
  S=$T/set_$lay
  [ -d "$S" ] || run "$TPCONV" shard "$ST" --preset llama --tp 2 --layout $lay -o "$S" -q --drop '.*inv_freq|model\.extra_scale'
  rm -rf "$T/cv" "$T/mv" && mkdir "$T/cv" "$T/mv"
  msg=""
  for o in m.safetensors m.pt out/; do
    "$TPCONV" convert "$S" -o "$T/cv/$o" -q 2>> "$T/cverr" || msg="$msg convert $o failed: $(cat "$T/cverr")"
    "$TPCONV" merge "$S" -o "$T/mv/$o" -q 2>> "$T/cverr" || msg="$msg merge $o failed: $(cat "$T/cverr")"
  done
  if [ -z "$msg" ] && diff -r "$T/mv" "$T/cv" > "$T/cvdiff" && [ -f "$T/cv/out/config.json" ]; then
    ok "convert of a $lay set (.safetensors, .pt, folder with companions) equals merge's output byte for byte"
  else bad "convert of a $lay set equals merge" "$msg" "$(head -5 "$T/cvdiff")"; fi
  rm -f "$T/cverr"
done
# a set without a manifest: the plan and degree as merge takes them
rm -rf "$T/oslo_bare" && cp -r "$T/set_oslo" "$T/oslo_bare" && rm "$T/oslo_bare/tpconv-manifest.json"
rm -rf "$T/cv" "$T/mv" && mkdir "$T/cv" "$T/mv"
run "$TPCONV" convert "$T/oslo_bare" -o "$T/cv/m.safetensors" --preset llama --tp 2 -q
"$TPCONV" merge "$T/oslo_bare" -o "$T/mv/m.safetensors" --preset llama --tp 2 -q 2>/dev/null
[ "$rc" = 0 ] && cmp -s "$T/cv/m.safetensors" "$T/mv/m.safetensors" && same "$M/llama/model.safetensors" "$T/cv/m.safetensors" &&
  ok "convert of an OSLO set without a manifest (--preset llama --tp 2) equals merge's, the model bit for bit" ||
  bad "convert of a set without a manifest" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" convert "$T/oslo_bare" -o "$T/cv/i.safetensors" -q
[ "$rc" = 0 ] && cmp -s "$T/cv/m.safetensors" "$T/cv/i.safetensors" &&
  ok "convert of a set without a manifest: the preset from its config.json's architectures" || bad "convert bare set, preset inferred" "exit $rc" "$(cat "$T/err")"
rm -rf "$T/oslo_noconf" && cp -r "$T/oslo_bare" "$T/oslo_noconf" && rm "$T/oslo_noconf/config.json"
run "$TPCONV" convert "$T/oslo_noconf" -o "$T/cv/n.safetensors" -q
[ "$rc" = 2 ] && grep -q "without a tpconv manifest: give the --preset or --plan" "$T/err" && [ ! -e "$T/cv/n.safetensors" ] &&
  ok "convert of a set without a manifest, config.json or plan: exit 2, asks for --preset or --plan" || bad "convert bare set, no plan" "exit $rc" "$(cat "$T/err")"
# inspect: a set without a manifest shows rank 0's file, as before; given the plan, the merged model
run "$TPCONV" inspect "$T/oslo_bare"
[ "$rc" = 0 ] && grep -q "no tpconv manifest (merge it with --preset and --tp); rank 0's file" "$T/out" &&
  ok "inspect of a set without a manifest: rank 0's file" || bad "inspect bare set" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" inspect "$T/oslo_bare" --preset llama --tp 2 --hash
"$TPCONV" inspect "$ST" --hash > "$T/st.txt" 2>/dev/null
[ "$rc" = 0 ] && grep -q "no tpconv manifest; the merged model (preset llama)" "$T/out" &&
  diff <(grep -v '^#' "$T/st.txt" | awk '{print $1, $2, $3, $4, $5}' | sort) \
       <(grep -v '^#' "$T/out" | awk '{print $1, $2, $3, $4, $5}' | sort) > "$T/idiff" &&
  ok "inspect --preset llama --tp 2 of a set without a manifest: the merged model, every tensor's hash the original's" ||
  bad "inspect bare set with plan" "exit $rc" "$(cat "$T/err")" "$(head -5 "$T/idiff")"
# what applies to one checkpoint is refused on a set, naming why (exit 2, nothing written)
for f in "--select model" "--strict" "--rules megatron-llama" "--dtype bf16"; do
  run "$TPCONV" convert "$T/set_tpconv" -o "$T/cv/r.safetensors" $f
  [ "$rc" = 2 ] && grep -q "not of a shard set\|not to a shard set" "$T/err" && [ ! -e "$T/cv/r.safetensors" ] &&
    ok "convert $f of a set: exit 2, said" || bad "convert $f of a set" "exit $rc" "$(cat "$T/err")"
done
run "$TPCONV" convert "$ST" -o "$T/cv/r.safetensors" --preset llama
[ "$rc" = 2 ] && grep -q "is not a shard set" "$T/err" && ok "convert --preset of a checkpoint: exit 2, it is not a shard set" ||
  bad "convert --preset of a checkpoint" "exit $rc" "$(cat "$T/err")"

# ---- reshard every layout's set to tp 4: the companions travel with it as a
# merge carries them (an hf set's from rank 0's folder, a TensorRT-LLM set's
# config.json without its old mapping)
for lay in tpconv oslo hf-mapping hf; do
  R=$T/re4_$lay
  run "$TPCONV" shard "$T/set_$lay" --tp 4 -o "$R" -q
  mode=""; [ $lay = hf-mapping ] && mode=json
  if [ "$rc" = 0 ] && out=$(companions "$HF" "$R" $mode); then
    ok "reshard a $lay set to tp 4: every companion carried${mode:+ (config.json as the model has it)}"
  else bad "reshard $lay set: companions" "exit $rc" "$(cat "$T/err")" "${out:-}"; fi
done
run "$TPCONV" shard "$T/set_hf-mapping" --tp 4 --layout hf-mapping -o "$T/re4_trt_trt" -q
[ "$rc" = 0 ] && out=$(companions "$HF" "$T/re4_trt_trt" hf-mapping4) && ok "reshard an hf-mapping set to a tp 4 hf-mapping set: every companion, config.json with the new mapping" ||
  bad "reshard hf-mapping -> hf-mapping companions" "exit $rc" "$(cat "$T/err")" "${out:-}"
run "$TPCONV" shard "$T/set_hf" --tp 4 --layout hf -o "$T/re4_hf_hf" -q
good=$([ "$rc" = 0 ] && echo 1 || echo 0)
for d in "$T"/re4_hf_hf/*/; do [ $good = 1 ] && out=$(companions "$HF" "$d") || good=0; done
[ $good = 1 ] && [ "$(ls -d "$T"/re4_hf_hf/*/ | wc -l)" = 4 ] && ok "reshard an hf set to a tp 4 hf set: each of the 4 rank folders carries every companion" ||
  bad "reshard hf -> hf companions" "exit $rc" "$(cat "$T/err")" "${out:-}"
# a merge into one file writes no companions beside it
run "$TPCONV" merge "$T/set_tpconv" -o "$T/one.safetensors" -q
[ "$rc" = 0 ] && [ ! -e "$T/config.json" ] && ok "merge to a single file leaves its folder alone" || bad "merge to one file" "exit $rc" "$(ls "$T")"
# --no-extras: weights only (an hf-mapping set keeps the config.json with its mapping)
run "$TPCONV" shard "$ST" --preset llama --tp 2 -o "$T/bare" --no-extras -q
[ "$rc" = 0 ] && [ ! -e "$T/bare/tokenizer.json" ] && [ ! -e "$T/bare/config.json" ] && ok "shard --no-extras writes no companions" ||
  bad "shard --no-extras" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$ST" --preset llama --tp 2 --layout hf-mapping -o "$T/bare_trt" --no-extras -q
[ "$rc" = 0 ] && [ ! -e "$T/bare_trt/tokenizer.json" ] && grep -q '"tp_size":' "$T/bare_trt/config.json" 2>/dev/null &&
  ok "shard --layout hf-mapping --no-extras: only config.json (with mapping)" || bad "hf-mapping --no-extras" "exit $rc" "$(cat "$T/err")" "$(ls "$T/bare_trt")"
run "$TPCONV" merge "$T/set_tpconv" -o "$T/bare_merged/" --no-extras -q
[ "$rc" = 0 ] && [ ! -e "$T/bare_merged/config.json" ] && ls "$T/bare_merged" | grep -q safetensors && ok "merge --no-extras writes weights only" ||
  bad "merge --no-extras" "exit $rc" "$(cat "$T/err")" "$(ls "$T/bare_merged")"
# config.json rewritten (a cast names its dtype) keeps the model's key order,
# its numbers' text and transformers' 2-space indent: the model's own text but
# for torch_dtype, and a final newline
mkdir -p "$T/c19" && cp "$SRC/tests/data/tiny_llama.safetensors" "$SRC/tests/data/config.json" "$T/c19/"
run "$TPCONV" convert "$T/c19" --dtype bf16 -o "$T/c19_out/" -q
[ "$rc" = 0 ] && $PY -c '
import sys
src = open(sys.argv[1]).read().rstrip("\n") + "\n"
assert open(sys.argv[2]).read() == src.replace("\"float32\"", "\"bfloat16\""), open(sys.argv[2]).read()[:200]' "$T/c19/config.json" "$T/c19_out/config.json" 2> "$T/perr" &&
  ok "a rewritten config.json: the model's key order, number text and 2-space indent" || bad "config.json text" "exit $rc" "$(cat "$T/err" "$T/perr")"
echo "1..$n"
[ "$failed" = 0 ]
