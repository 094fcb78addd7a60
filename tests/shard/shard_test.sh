#!/usr/bin/env bash
# Sharding tests (TAP): shard -> merge round trips for every preset, tp 1/2/4/8, both
# rank file formats and all layouts; resharding; pipeline stages; --rank runs; rank
# contents against an independent TensorRT-LLM/vLLM-style slicing in real torch; sets
# written the other tools' way; bad inputs; the --dry-run golden output.
# usage: shard_test.sh TPCONV SRCDIR CORPUS     (needs /usr/bin/python3 with torch)
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
# nothing_written PATH: PATH absent and no temporary files left in its folder
nothing_written() { [ ! -e "$1" ] && ! ls -a "$(dirname "$1")" | grep -q '\.tpc-'; }
# expect_fail DESC RC SUBSTRING OUTPUT CMD...
expect_fail() {
  local d=$1 want=$2 sub=$3 outp=$4; shift 4
  run "$@"
  if [ "$rc" != "$want" ]; then bad "$d" "exit $rc, wanted $want" "$(cat "$T/err")"; return; fi
  if ! grep -qF -- "$sub" "$T/err"; then bad "$d" "stderr lacks: $sub" "$(cat "$T/err")"; return; fi
  if [ -n "$outp" ] && ! nothing_written "$outp"; then bad "$d" "something was written at $outp"; return; fi
  ok "$d"
}

M=$T/m
$PY "$H/make_models.py" "$M" 0 >/dev/null && $PY "$H/make_models.py" "$T/m2" 1 >/dev/null || { echo "1..0 # SKIP model generator failed"; exit 0; }
HAVE_TORCH_FMT=0
"$TPCONV" --help | grep -q '^Formats read.*torch' && HAVE_TORCH_FMT=1

# ---- the harness: a chain `run A && run B` stops at the step that failed, and bad names it
( run false "$T/first" && run true; echo "rc=$rc"; bad "x" ) > "$T/chain"
grep -qx "rc=1" "$T/chain" && grep -qx "# failed step: exit 1: false first" "$T/chain" &&
  ok "run returns its exit status; bad reports the failed step of a chain" || bad "the harness's chains" "$(cat "$T/chain")"
# same's $T/diff says why, when an inspect fails too (it was left from an earlier call:
# issue 41 item 17's 'remap before shard' failed with no message)
( echo "from an earlier call" >"$T/diff"; same "$T/missing.safetensors" "$M/llama"; echo "rc=$?"; cat "$T/diff" ) > "$T/samechk"
grep -qx "rc=1" "$T/samechk" && grep -q "missing.safetensors" "$T/samechk" && ! grep -q "earlier call" "$T/samechk" &&
  ok "same fails with the inspect's error in \$T/diff when a checkpoint cannot be read" || bad "the harness's same" "$(cat "$T/samechk")"

# ---- CLI basics
for c in shard merge plan; do
  run "$TPCONV" $c --help
  [ "$rc" = 0 ] && [ -s "$T/out" ] && [ ! -s "$T/err" ] && ok "$c --help to stdout, exit 0" || bad "$c --help" "rc $rc"
  run "$TPCONV" $c --bogus
  [ "$rc" = 2 ] && grep -qF "unknown or incomplete option '--bogus'" "$T/err" && ok "$c rejects unknown flags" || bad "$c --bogus" "rc $rc $(cat "$T/err")"
done
run "$TPCONV" plan --list
for p in llama gpt2 gpt-neox bert libai dit dalle2; do grep -q "^$p " "$T/out" || { bad "plan --list names $p"; continue; }; done
ok "plan --list names every preset"
allok=1
for p in llama gpt2 gpt-neox bert libai dit dalle2; do
  "$TPCONV" plan $p >"$T/$p.plan.json" && "$TPCONV" plan --check "$T/$p.plan.json" >/dev/null &&
    $PY -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/$p.plan.json" || allok=0
done
[ $allok = 1 ] && ok "every preset prints as valid JSON that --plan accepts" || bad "preset JSON"
run "$TPCONV" shard "$M/llama" --preset llama -o "$T/x"
[ "$rc" = 2 ] && grep -q "missing --tp" "$T/err" && ok "shard without --tp is a usage error" || bad "missing --tp" "$rc"

# ---- the preset from config.json (architectures, else model_type), and --preset checked against it
run "$TPCONV" shard "$M/llama" --tp 2 -o "$T/inf" -v
if [ "$rc" = 0 ] && grep -qF "preset llama, from '$M/llama/config.json' architecture LlamaForCausalLM" "$T/err"; then
  run "$TPCONV" merge "$T/inf" -o "$T/inf.safetensors"
  [ "$rc" = 0 ] && same "$M/llama/model.safetensors" "$T/inf.safetensors" && ok "shard of a folder takes the preset its config.json's architectures names" ||
    bad "inferred preset: merge" "$(cat "$T/err")"
else bad "shard infers the preset" "exit $rc" "$(cat "$T/err")"; fi
run "$TPCONV" shard "$M/llama" --tp 2 --layout oslo -o "$T/infv" -q
rm -f "$T/infv/tpconv-manifest.json"
run "$TPCONV" merge "$T/infv" -o "$T/infv.safetensors"
[ "$rc" = 0 ] && same "$M/llama/model.safetensors" "$T/infv.safetensors" && ok "merge of a set without a manifest takes the preset from its config.json" ||
  bad "merge infers the preset" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" verify --reference "$M/llama" --shards "$T/infv" --ranks 2
[ "$rc" = 0 ] && ok "verify of a set without a manifest takes the preset from config.json" || bad "verify infers the preset" "exit $rc" "$(cat "$T/err")"
mkdir -p "$T/mtype" && cp "$M/llama/model.safetensors" "$T/mtype/" &&
  $PY -c 'import json,sys; c=json.load(open(sys.argv[1])); del c["architectures"]; json.dump(c, open(sys.argv[2], "w"))' "$M/llama/config.json" "$T/mtype/config.json"
run "$TPCONV" shard "$T/mtype" --tp 2 --dry-run -v
[ "$rc" = 0 ] && grep -qF "preset llama, from '$T/mtype/config.json' architecture LlamaForCausalLM" "$T/err" &&
  ok "a config.json without architectures: the preset from its model_type" || bad "preset from model_type" "exit $rc" "$(cat "$T/err")"
mkdir -p "$T/olmo" && cp "$M/llama/model.safetensors" "$T/olmo/" && sed 's/LlamaForCausalLM/Olmo2ForCausalLM/' "$M/llama/config.json" >"$T/olmo/config.json"
expect_fail "--preset llama on a model whose config.json names Olmo2ForCausalLM: refused, both named" 2 \
  "--preset llama is for LlamaForCausalLM, but '$T/olmo/config.json' names Olmo2ForCausalLM: give --preset olmo2, or --preset-force" "$T/olmo_s" \
  "$TPCONV" shard "$T/olmo" --tp 2 --preset llama -o "$T/olmo_s"
expect_fail "--preset gpt2 on a LLaMA: refused, the preset of its family named" 2 \
  "--preset gpt2 is for GPT2LMHeadModel, but '$M/llama/config.json' names LlamaForCausalLM: give --preset llama, or --preset-force" "$T/g_s" \
  "$TPCONV" shard "$M/llama" --tp 2 --preset gpt2 -o "$T/g_s"
expect_fail "merge --preset gpt2 of a LLaMA set without a manifest: refused" 2 "names LlamaForCausalLM" "$T/g.safetensors" \
  "$TPCONV" merge "$T/infv" --preset gpt2 -o "$T/g.safetensors"
expect_fail "verify --preset gpt2 against a LLaMA reference: refused" 2 "names LlamaForCausalLM" "" \
  "$TPCONV" verify --reference "$M/llama" --shards "$T/infv" --ranks 2 --preset gpt2
run "$TPCONV" shard "$T/olmo" --tp 2 --preset llama --preset-force -o "$T/olmo_f" -q
[ "$rc" = 0 ] && [ -f "$T/olmo_f/tpconv-manifest.json" ] && ok "--preset-force splits it with the preset's plan" || bad "--preset-force" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$M/llama" --tp 2 --preset mistral --dry-run
[ "$rc" = 0 ] && ok "--preset mistral (the llama plan) on a LLaMA is accepted" || bad "same plan, other name" "exit $rc" "$(cat "$T/err")"

# ---- round trips: every preset, tp, format and layout
combos="tpconv:safetensors hf-mapping:safetensors hf:safetensors tpconv:torch oslo:torch hf:torch"
for p in llama gpt2 gpt-neox bert libai dalle2; do
  for tp in 1 2 4 8; do
    for c in $combos; do
      lay=${c%%:*} fmt=${c##*:}
      if [ "$fmt" = torch ] && [ $HAVE_TORCH_FMT = 0 ]; then skip "$p tp $tp $lay/$fmt round trip" "no torch format in this build"; continue; fi
      o=$T/rt_${p}_${tp}_${lay}_$fmt
      run "$TPCONV" shard "$M/$p" --tp $tp --preset $p --layout $lay --format $fmt -o "$o" -q
      if [ "$rc" != 0 ]; then bad "$p tp $tp $lay/$fmt: shard" "$(cat "$T/err")"; continue; fi
      run "$TPCONV" merge "$o" -o "$o.merged.safetensors"
      if [ "$rc" != 0 ]; then bad "$p tp $tp $lay/$fmt: merge" "$(cat "$T/err")"; continue; fi
      if same "$M/$p/model.safetensors" "$o.merged.safetensors"; then ok "$p tp $tp $lay/$fmt: shard -> merge is bit-exact"
      else bad "$p tp $tp $lay/$fmt: shard -> merge is bit-exact" "$(cat "$T/diff" "$T/ierr")"; fi
      [ "$tp" = 8 ] || [ "$c" = tpconv:safetensors ] || rm -rf "$o" "$o.merged.safetensors"
    done
  done
done
# merge into torch and into an HF folder
if [ $HAVE_TORCH_FMT = 1 ]; then
  run "$TPCONV" merge "$T/rt_llama_8_tpconv_safetensors" -o "$T/llama_merged.pt"
  [ "$rc" = 0 ] && same "$M/llama/model.safetensors" "$T/llama_merged.pt" && ok "merge to a torch file is bit-exact" || bad "merge to torch" "$(cat "$T/err" "$T/diff")"
  $PY -c 'import torch,sys; sd=torch.load(sys.argv[1], weights_only=True); assert isinstance(sd, dict) and len(sd) == 30' "$T/llama_merged.pt" 2>"$T/err" &&
    ok "merged torch file loads in real torch.load(weights_only=True)" || bad "merged torch loads" "$(cat "$T/err")"
fi
# a file output's missing folders are made, as a folder output's are (merge
# failed with "cannot create a temporary file"), and taken back on failure
rm -rf "$T/newdir"
run "$TPCONV" merge "$T/rt_llama_8_tpconv_safetensors" -o "$T/newdir/sub/merged.safetensors"
[ "$rc" = 0 ] && same "$M/llama/model.safetensors" "$T/newdir/sub/merged.safetensors" &&
  ok "merge -o NEWDIR/SUB/file.safetensors makes the folders" || bad "merge into a new folder" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
(ulimit -f 1; exec "$TPCONV" merge "$T/rt_llama_8_tpconv_safetensors" -o "$T/newdir2/sub/merged.safetensors") >/dev/null 2>"$T/err"
rc=$?
[ "$rc" = 4 ] && [ ! -e "$T/newdir2" ] && ok "a failed merge into new folders takes them back (exit 4)" ||
  bad "failed merge into new folders" "rc=$rc" "$(ls -R "$T/newdir2" 2>&1 | head -3)"
# merge writes what convert writes for the same --format: a DCP folder for dcp
# even when OUT ends in '/' (merge wrote an HF folder of safetensors there
# before it shared convert's writer choice), and both list the same writable
# formats for an unknown one
run "$TPCONV" merge "$T/rt_llama_8_tpconv_safetensors" -o "$T/llama_dcp/" --format dcp
[ "$rc" = 0 ] && [ -f "$T/llama_dcp/.metadata" ] && [ ! -e "$T/llama_dcp/model.safetensors.index.json" ] &&
  run "$TPCONV" convert "$T/llama_dcp" -o "$T/llama_dcp.safetensors" && same "$M/llama/model.safetensors" "$T/llama_dcp.safetensors" &&
  ok "merge --format dcp writes a DCP folder that reads back bit-exact" || bad "merge --format dcp" "$(cat "$T/err" "$T/diff" 2>/dev/null; ls "$T/llama_dcp" | head -3)"
expect_fail "merge: unknown --format lists the writable formats (exit 2)" 2 "unknown --format 'hf-index' (safetensors, torch, dcp, gguf)" "$T/nofmt" \
  "$TPCONV" merge "$T/rt_llama_8_tpconv_safetensors" -o "$T/nofmt" --format hf-index
expect_fail "merge: --format ds-universal (an optimizer's state only) refused as usage (exit 2)" 2 "--format ds-universal holds an optimizer's state only, not a model (tpconv convert SRC --format ds-universal)" "$T/nofmt" \
  "$TPCONV" merge "$T/rt_llama_8_tpconv_safetensors" -o "$T/nofmt" --format ds-universal
run "$TPCONV" merge "$T/rt_gpt2_4_tpconv_safetensors" -o "$T/gpt2_hf/" --max-shard-size 200K
[ "$rc" = 0 ] && [ -f "$T/gpt2_hf/model.safetensors.index.json" ] && same "$M/gpt2/model.safetensors" "$T/gpt2_hf" &&
  ok "merge to HF shards is bit-exact" || bad "merge to HF shards" "$(cat "$T/err" "$T/diff")"
# torch checkpoints as input (.pt files made by torch.save)
if [ $HAVE_TORCH_FMT = 1 ]; then
  for p in llama gpt2 gpt-neox bert libai dalle2; do
    o=$T/pt_$p
    run "$TPCONV" shard "$M/$p.pt" --config "$M/$p/config.json" --tp 2 --preset $p -o "$o" -q &&
      run "$TPCONV" merge "$o" -o "$o.merged.safetensors"
    [ "$rc" = 0 ] && same "$M/$p/model.safetensors" "$o.merged.safetensors" && ok "$p: torch.save input, tp 2 round trip" ||
      bad "$p: torch.save input" "$(cat "$T/err" "$T/diff")"
  done
fi

# ---- rank contents against an independent computation in real torch
for p in llama gpt2 gpt-neox dalle2; do
  for tp in 1 2 4 8; do
    run $PY "$H/check_ranks.py" $p "$M/$p.pt" "$M/$p/config.json" "$T/rt_${p}_${tp}_tpconv_safetensors" $tp tpconv safetensors
    [ "$rc" = 0 ] && ok "$p tp $tp: rank files equal TensorRT-LLM/vLLM-style slicing in torch" || bad "$p tp $tp: torch check" "$(cat "$T/out" "$T/err" | tail -5)"
  done
done
if [ $HAVE_TORCH_FMT = 1 ]; then
  for p in llama gpt2 gpt-neox dalle2; do
    for lay in oslo:torch hf:torch hf-mapping:safetensors; do
      run $PY "$H/check_ranks.py" $p "$M/$p.pt" "$M/$p/config.json" "$T/rt_${p}_8_${lay%%:*}_${lay##*:}" 8 ${lay%%:*} ${lay##*:}
      [ "$rc" = 0 ] && ok "$p tp 8 ${lay%%:*}: files load in real torch and equal the independent slicing" || bad "$p tp 8 $lay torch check" "$(cat "$T/out" "$T/err" | tail -5)"
    done
  done
fi
# hf-mapping: the model's config.json with TensorRT-LLM's mapping added
$PY -c 'import json,sys; m=json.load(open(sys.argv[1]))["mapping"]; assert (m["tp_size"], m["pp_size"], m["world_size"]) == (8, 1, 8)' \
  "$T/rt_llama_8_hf-mapping_safetensors/config.json" 2>/dev/null && ok "hf-mapping layout: config.json has the mapping" || bad "hf-mapping config.json mapping"
$PY -c 'import json,sys; c=json.load(open(sys.argv[1])); assert c["num_key_value_heads"] == 4' "$T/rt_llama_8_hf-mapping_safetensors/config.json" 2>/dev/null &&
  ok "hf-mapping layout: the model's config.json is carried along" || bad "hf-mapping config carries the model config"
# rank file metadata
"$TPCONV" inspect --json "$T/rt_llama_4_tpconv_safetensors/model_tp02_pp00.safetensors" >"$T/meta.json"
$PY -c '
import json,sys; m=json.load(open(sys.argv[1]))["metadata"]; man=json.load(open(sys.argv[2]))
assert m["tpconv.rank"]=="2" and m["tpconv.tp_rank"]=="2" and m["tpconv.pp_rank"]=="0" and m["tpconv.tp"]=="4" and m["tpconv.pp"]=="1"
assert m["tpconv.set_id"]==man["set_id"]' "$T/meta.json" "$T/rt_llama_4_tpconv_safetensors/tpconv-manifest.json" 2>"$T/err" &&
  ok "rank files describe themselves (rank, tp, pp, set id)" || bad "rank metadata" "$(cat "$T/err")"
$PY - "$T/rt_llama_8_tpconv_safetensors/tpconv-manifest.json" <<'EOF' 2>"$T/err" && ok "manifest records splits, padding, replicas, shapes and checksums" || bad "manifest content" "$(cat "$T/err")"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["tpconv_manifest"] == 1 and m["tp"] == 8 and m["pp"] == 1 and m["checksum"] == "xxh3-128"
t = {x["name"]: x for x in m["tensors"]}
k = t["model.layers.0.self_attn.k_proj.weight"]
assert k["split"] == "col" and k["dim"] == 0 and k["parts"] == [{"size": 32, "pad": 0, "heads": 4, "replicas": 2}]
assert k["rank_xxh3-128"][0] == k["rank_xxh3-128"][1] != k["rank_xxh3-128"][2]
assert "sha256" not in k and "rank_sha256" not in k
e = t["model.embed_tokens.weight"]
assert e["split"] == "vocab" and e["parts"][0]["pad"] == 6 and e["rank_shape"] == [32, 64] and e["shape"] == [250, 64]
assert t["model.norm.weight"]["split"] == "replicate" and len(t["model.norm.weight"]["xxh3-128"]) == 32
assert t["model.extra_scale"]["matched"] is False
assert len(m["ranks"]) == 8 and m["ranks"][3]["file"] == "model_tp03_pp00.safetensors"
EOF

# the manifest's checksums are plain XXH3-128 (the default) or SHA-256
# (--checksum sha256) of the bytes: python3-xxhash and hashlib agree
cat >"$T/cksum.py" <<'EOF'
import hashlib, json, struct, sys
def raw(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]; h = json.loads(f.read(n)); d = f.read()
    return {k: d[v['data_offsets'][0]:v['data_offsets'][1]] for k, v in h.items() if k != '__metadata__'}
m = json.load(open(sys.argv[1] + '/tpconv-manifest.json'))
alg = sys.argv[3]
assert m['checksum'] == alg, m['checksum']
if alg == 'sha256':
    H = lambda b: hashlib.sha256(b).hexdigest()
else:
    import xxhash
    H = lambda b: xxhash.xxh3_128(b).hexdigest()
orig = raw(sys.argv[2])
for r in range(m['tp']):
    rk = raw(sys.argv[1] + '/model_tp%02d_pp00.safetensors' % r)
    for t in m['tensors']:
        assert len(t[alg]) == (64 if alg == 'sha256' else 32)
        assert H(orig[t['name']]) == t[alg], t['name']
        assert H(rk[t['name']]) == t['rank_' + alg][r], (t['name'], r)
EOF
if $PY -c 'import xxhash' 2>/dev/null; then
  $PY "$T/cksum.py" "$T/rt_gpt2_2_tpconv_safetensors" "$M/gpt2/model.safetensors" xxh3-128 2>"$T/err" &&
    ok "manifest checksums equal python xxhash.xxh3_128 of the tensor bytes" || bad "manifest xxh3-128 vs python xxhash" "$(cat "$T/err")"
  # tp 8: KV heads replicated on two ranks, vocab rows zero-padded
  $PY "$T/cksum.py" "$T/rt_llama_8_tpconv_safetensors" "$M/llama/model.safetensors" xxh3-128 2>"$T/err" &&
    ok "manifest checksums of replicated KV heads and padded vocab slices equal python's" || bad "llama tp8 xxh3-128 vs python xxhash" "$(cat "$T/err")"
  # a reshard hashes tensors assembled from the input set's rank files
  run "$TPCONV" shard "$T/rt_llama_8_tpconv_safetensors" --tp 2 -o "$T/ck_re2" -q
  [ "$rc" = 0 ] && $PY "$T/cksum.py" "$T/ck_re2" "$M/llama/model.safetensors" xxh3-128 2>"$T/err" &&
    ok "reshard tp 8 -> 2: manifest checksums equal python's" || bad "reshard checksums vs python xxhash" "$(cat "$T/err")"
else
  skip "manifest xxh3-128 vs python xxhash" "no python3-xxhash"
fi
run "$TPCONV" shard "$M/gpt2" --tp 2 --preset gpt2 --checksum sha256 -o "$T/sha_gpt2" -q
[ "$rc" = 0 ] && $PY "$T/cksum.py" "$T/sha_gpt2" "$M/gpt2/model.safetensors" sha256 2>"$T/err" &&
  ok "--checksum sha256: manifest checksums equal hashlib.sha256 of the tensor bytes" || bad "manifest sha256 vs hashlib" "$(cat "$T/err")"
run "$TPCONV" shard "$M/gpt2" --tp 2 --preset gpt2 --checksum none -o "$T/none_gpt2" -q
[ "$rc" = 0 ] && $PY -c '
import json,sys; m=json.load(open(sys.argv[1]))
assert m["checksum"]=="none" and not any(k in t for t in m["tensors"] for k in ("sha256","xxh3-128","rank_sha256","rank_xxh3-128"))' \
  "$T/none_gpt2/tpconv-manifest.json" 2>"$T/err" && ok "--checksum none: a manifest without checksum members" || bad "--checksum none" "$(cat "$T/err")"
expect_fail "--checksum with an unknown name is a usage error" 2 "unknown --checksum 'md5'" "$T/md5" \
  "$TPCONV" shard "$M/gpt2" --tp 2 --preset gpt2 --checksum md5 -o "$T/md5"
# inspect --checksum prints the digest the manifest holds
run "$TPCONV" inspect --json --checksum xxh3-128 "$M/gpt2/model.safetensors"
[ "$rc" = 0 ] && $PY -c '
import json,sys; i=json.load(open(sys.argv[1])); m=json.load(open(sys.argv[2]))
want={t["name"]: t["xxh3-128"] for t in m["tensors"]}
assert len(i["tensors"]) == len(want) and all(t["xxh3-128"] == want[t["name"]] for t in i["tensors"])' \
  "$T/out" "$T/rt_gpt2_2_tpconv_safetensors/tpconv-manifest.json" 2>"$T/err" &&
  ok "inspect --checksum xxh3-128 agrees with the manifest" || bad "inspect --checksum" "$(cat "$T/err")"

# ---- the remap stage before splitting: rename and cast, checksums of the cast bytes
run "$TPCONV" shard "$M/llama" --tp 4 --preset llama --dtype bf16 --strip-prefix model. -o "$T/remap" -q &&
  run "$TPCONV" merge "$T/remap" -o "$T/remap.safetensors" &&
  run "$TPCONV" convert "$M/llama" --dtype bf16 --strip-prefix model. -o "$T/remap_ref.safetensors"
[ "$rc" = 0 ] && same "$T/remap_ref.safetensors" "$T/remap.safetensors" &&
  ok "--dtype/--strip-prefix apply before splitting; merge equals convert with the same rules" || bad "remap before shard" "$(cat "$T/err" "$T/diff")"

# ---- resharding: 4 -> 2 equals sharding directly to 2 (rank by rank)
for p in llama gpt2 gpt-neox bert libai dalle2; do
  d2=$T/rt_${p}_2_tpconv_safetensors
  [ -d "$d2" ] || "$TPCONV" shard "$M/$p" --tp 2 --preset $p -o "$d2" -q
  run "$TPCONV" shard "$T/rt_${p}_4_tpconv_safetensors" --tp 2 -o "$T/re_$p" -q
  if [ "$rc" != 0 ]; then bad "$p: reshard 4 -> 2" "$(cat "$T/err")"; continue; fi
  good=1
  for r in 0 1; do same "$d2/model_tp0${r}_pp00.safetensors" "$T/re_$p/model_tp0${r}_pp00.safetensors" || good=0; done
  [ $good = 1 ] && ok "$p: reshard 4 -> 2 equals sharding directly to 2" || bad "$p: reshard 4 -> 2" "$(cat "$T/diff")"
done
if [ $HAVE_TORCH_FMT = 1 ]; then
  run "$TPCONV" shard "$T/rt_llama_8_oslo_torch" --tp 2 -o "$T/re_oslo" -q
  good=1
  for r in 0 1; do same "$T/rt_llama_2_tpconv_safetensors/model_tp0${r}_pp00.safetensors" "$T/re_oslo/model_tp0${r}_pp00.safetensors" || good=0; done
  [ "$rc" = 0 ] && [ $good = 1 ] && ok "reshard an OSLO-layout torch set 8 -> 2 (de-duplicating KV replicas)" || bad "reshard oslo 8 -> 2" "$(cat "$T/err" "$T/diff")"
fi
run "$TPCONV" shard "$T/rt_llama_4_tpconv_safetensors" --tp 2 -o "$T/rt_llama_4_tpconv_safetensors/inside" -q
[ "$rc" = 2 ] && grep -q "inside" "$T/err" && [ ! -e "$T/rt_llama_4_tpconv_safetensors/inside" ] && ok "output inside the input set is refused" || bad "output inside input" "$rc $(cat "$T/err")"

# ---- pipeline stages
run "$TPCONV" shard "$M/llama" --tp 2 --pp 2 --preset llama -o "$T/pp" -q && run "$TPCONV" merge "$T/pp" -o "$T/pp.safetensors"
[ "$rc" = 0 ] && same "$M/llama/model.safetensors" "$T/pp.safetensors" && ok "tp 2 x pp 2 round trip" || bad "pp round trip" "$(cat "$T/err" "$T/diff")"
"$TPCONV" inspect --json "$T/pp/model_tp01_pp00.safetensors" >"$T/s0.json"; "$TPCONV" inspect --json "$T/pp/model_tp01_pp01.safetensors" >"$T/s1.json"
$PY - "$T/s0.json" "$T/s1.json" <<'EOF' 2>"$T/err" && ok "pp stages: embeddings and layer 0 first, layer 1, norm and head last" || bad "pp stage placement" "$(cat "$T/err")"
import json, sys
a = {t["name"] for t in json.load(open(sys.argv[1]))["tensors"]}
b = {t["name"] for t in json.load(open(sys.argv[2]))["tensors"]}
assert "model.embed_tokens.weight" in a and "model.layers.0.mlp.up_proj.weight" in a and not any("layers.1." in x for x in a)
assert "lm_head.weight" in b and "model.norm.weight" in b and "model.layers.1.mlp.up_proj.weight" in b
assert not any("layers.0." in x for x in b) and "model.embed_tokens.weight" not in b
assert json.load(open(sys.argv[2]))["metadata"]["tpconv.rank"] == "3"
EOF
expect_fail "--pp larger than the layer count is refused" 2 "needs at least 3 layers" "$T/pp3" "$TPCONV" shard "$M/llama" --tp 1 --pp 3 --preset llama -o "$T/pp3"

# ---- --rank: several runs write one set; the last writes the manifest
run "$TPCONV" shard "$M/gpt2" --tp 4 --preset gpt2 --rank 0,2 -o "$T/part"
[ "$rc" = 0 ] && [ -f "$T/part/model_tp00_pp00.safetensors" ] && [ -f "$T/part/model_tp02_pp00.safetensors" ] &&
  [ ! -e "$T/part/model_tp01_pp00.safetensors" ] && [ ! -e "$T/part/tpconv-manifest.json" ] && grep -q "2 of 4" "$T/err" &&
  ok "--rank 0,2 writes those ranks and no manifest" || bad "--rank partial" "$(cat "$T/err")"
run "$TPCONV" merge "$T/part" -o "$T/part.safetensors"
[ "$rc" = 3 ] && nothing_written "$T/part.safetensors" && ok "an incomplete set does not merge" || bad "incomplete set merge" "$rc"
run "$TPCONV" shard "$M/gpt2" --tp 4 --preset gpt2 --rank 1-1 --rank 3 -o "$T/part"
[ "$rc" = 0 ] && [ -f "$T/part/tpconv-manifest.json" ] && ok "the run that completes the set writes the manifest" || bad "--rank completion" "$(cat "$T/err")"
run "$TPCONV" merge "$T/part" -o "$T/part.safetensors"
[ "$rc" = 0 ] && same "$M/gpt2/model.safetensors" "$T/part.safetensors" && ok "a set written by two runs merges bit-exact" || bad "--rank set merge" "$(cat "$T/err" "$T/diff")"
cmp -s "$T/part/tpconv-manifest.json" "$T/rt_gpt2_4_tpconv_safetensors/tpconv-manifest.json" && ok "--rank runs give the same manifest as one run" ||
  bad "--rank manifest equals one run's" "$(diff "$T/part/tpconv-manifest.json" "$T/rt_gpt2_4_tpconv_safetensors/tpconv-manifest.json" | head -5)"
expect_fail "--rank outside the set is a usage error" 2 "the set has ranks 0 to 3" "$T/partx" "$TPCONV" shard "$M/gpt2" --tp 4 --preset gpt2 --rank 4 -o "$T/partx"

# ---- sets written by other tools (no manifest): merge with the plan
$PY "$H/check_ranks.py" --write-oslo llama "$M/llama.pt" "$M/llama/config.json" "$T/oslo8" 8
run "$TPCONV" merge "$T/oslo8" --preset llama --config "$M/llama/config.json" -o "$T/oslo8.safetensors"
[ "$rc" = 0 ] && same "$M/llama/model.safetensors" "$T/oslo8.safetensors" && ok "merge an OSLO-style torch set (tp 8, KV replicated, vocab padded) with --preset" ||
  bad "merge foreign oslo" "$(cat "$T/err" "$T/diff")"
$PY "$H/check_ranks.py" --write-hf-mapping gpt-neox "$M/gpt-neox.pt" "$M/gpt-neox/config.json" "$T/trt4" 4
run "$TPCONV" merge "$T/trt4" --preset gpt-neox --config "$M/gpt-neox/config.json" -o "$T/trt4.safetensors"
[ "$rc" = 0 ] && same "$M/gpt-neox/model.safetensors" "$T/trt4.safetensors" && ok "merge an hf-mapping set (HF names, tp from config.json mapping)" ||
  bad "merge foreign hf-mapping" "$(cat "$T/err" "$T/diff")"
expect_fail "a set without manifest needs a plan" 2 "is a shard set without a tpconv manifest: give the --preset or --plan it was split with" "$T/np.safetensors" "$TPCONV" merge "$T/oslo8" -o "$T/np.safetensors"
$PY "$H/check_ranks.py" --write-oslo llama "$M/llama.pt" "$M/llama/config.json" "$T/oslo_bad" 2 --tamper
expect_fail "bad input: a replicated tensor that differs between ranks" 3 "replicated tensor differs between rank 0 and rank 1" "$T/ob.safetensors" \
  "$TPCONV" merge "$T/oslo_bad" --preset llama --config "$M/llama/config.json" -o "$T/ob.safetensors"
grep -qF "tensor 'model.layers.0.input_layernorm.weight'" "$T/err" && ok "the differing tensor is named" || bad "differing tensor named" "$(cat "$T/err")"
run "$TPCONV" merge "$T/oslo_bad" --preset llama --config "$M/llama/config.json" -o "$T/ob.safetensors" --take-rank0
[ "$rc" = 0 ] && grep -q "kept rank 0's copy" "$T/err" && ok "--take-rank0 keeps rank 0's copy and warns" || bad "--take-rank0" "$rc $(cat "$T/err")"

# ---- bad inputs: exit 3, a clear message, nothing written
expect_fail "bad input: uneven head split (tp 3)" 3 "8 query heads in dim 0 (size 64) cannot be split over tp 3" "$T/b1" \
  "$TPCONV" shard "$M/llama" --tp 3 --preset llama -o "$T/b1"
grep -qF "tensor 'model.layers.0.self_attn.q_proj.weight'" "$T/err" && ok "uneven split names the tensor" || bad "uneven names tensor" "$(cat "$T/err")"
cat >"$T/uneven.json" <<'EOF'
{"name": "uneven", "rules": [{"match": "mlp\\.gate_proj\\.weight$", "split": "col"}], "fallback": "replicate"}
EOF
expect_fail "bad input: uneven split names dim, size and tp" 3 "dim 0 of size 96 does not divide evenly by tp 5; use --pad" "$T/b2" \
  "$TPCONV" shard "$M/llama" --tp 5 --plan "$T/uneven.json" -o "$T/b2"
run "$TPCONV" shard "$M/llama" --tp 5 --plan "$T/uneven.json" --pad -o "$T/padded" -q && run "$TPCONV" merge "$T/padded" -o "$T/padded.safetensors"
[ "$rc" = 0 ] && same "$M/llama/model.safetensors" "$T/padded.safetensors" && grep -q '"pad": 4' "$T/padded/tpconv-manifest.json" &&
  ok "--pad pads (recorded) and merge strips it" || bad "--pad round trip" "$(cat "$T/err" "$T/diff")"
expect_fail "usage: unknown preset (exit 2)" 2 "unknown preset 'nope' (known: llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3, phi3, olmo2, olmo3, starcoder2, granite, smollm3, seed-oss, glm4, ernie4_5, exaone4, phi, cohere2, mixtral, qwen2-moe, qwen3-moe, olmoe, granitemoe, granitemoeshared, granitemoehybrid, granitemoehybrid-dense, glm4-moe, gpt-oss, phimoe, hunyuan-moe, hunyuan-dense, ernie4_5-moe, deepseek-v3, llama4, qwen3-next, qwen3_5, qwen3_5-moe, gpt2" "$T/b3" "$TPCONV" shard "$M/llama" --tp 2 --preset nope -o "$T/b3"
cat >"$T/twice.json" <<'EOF'
{"name": "twice", "rules": [{"match": "q_proj\\.weight$", "split": "col"}, {"match": "proj\\.weight$", "split": "row"}]}
EOF
expect_fail "bad input: a plan that matches a tensor twice" 3 "matched by plan rules 0 ('q_proj\\.weight\$', split col) and 1 ('proj\\.weight\$', split row) that disagree" "$T/b4" \
  "$TPCONV" shard "$M/llama" --tp 2 --plan "$T/twice.json" -o "$T/b4"
expect_fail "bad input: --strict refuses unmatched tensors" 3 "1 tensor matches no rule of the plan (--strict): 'model.extra_scale'" "$T/b5" \
  "$TPCONV" shard "$M/llama" --tp 2 --preset llama --strict -o "$T/b5"
echo '{"rules": [{"match": "(", "split": "col"}]}' >"$T/badre.json"
expect_fail "bad input: a plan with a bad regular expression" 3 "bad regular expression '('" "$T/b6" "$TPCONV" shard "$M/llama" --tp 2 --plan "$T/badre.json" -o "$T/b6"
echo '{"rules": [{"match": "x", "split": "col", "parts": [1, "kv"], "head": "q"}]}' >"$T/typo.json"
expect_fail "bad input: a plan with an unknown member" 3 "unknown member \"head\"" "$T/b7" "$TPCONV" shard "$M/llama" --tp 2 --plan "$T/typo.json" -o "$T/b7"
# missing rank
cp -r "$T/rt_llama_4_tpconv_safetensors" "$T/miss"; rm "$T/miss/model_tp01_pp00.safetensors"
expect_fail "bad input: a missing rank in a shard set" 3 "rank 1 (tp 1, pp 0) of the shard set is missing" "$T/miss.safetensors" \
  "$TPCONV" merge "$T/miss" -o "$T/miss.safetensors"
# a rank file from another set: metadata set id, and (torch files, no metadata) the checksums
"$TPCONV" shard "$T/m2/llama" --tp 4 --preset llama -o "$T/other" -q
cp -r "$T/rt_llama_4_tpconv_safetensors" "$T/mixed"; cp "$T/other/model_tp01_pp00.safetensors" "$T/mixed/"
expect_fail "bad input: a rank file from another set (set id)" 3 "rank 1's file belongs to another shard set" "$T/mixed.safetensors" \
  "$TPCONV" merge "$T/mixed" -o "$T/mixed.safetensors"
if [ $HAVE_TORCH_FMT = 1 ]; then
  "$TPCONV" shard "$M/llama" --tp 2 --preset llama --format torch -o "$T/mt" -q
  "$TPCONV" shard "$T/m2/llama" --tp 2 --preset llama --format torch -o "$T/mt2" -q
  cp "$T/mt2/model_tp01_pp00.bin" "$T/mt/"
  expect_fail "bad input: a rank file from another set (manifest checksum)" 3 "does not match the manifest checksum" "$T/mt.safetensors" \
    "$TPCONV" merge "$T/mt" -o "$T/mt.safetensors"
fi
# a replicated tensor that differs, in a tpconv set (checksums off so the comparison decides)
cp -r "$T/rt_llama_2_tpconv_safetensors" "$T/rep"
$PY "$H/check_ranks.py" --bump "$T/rep/model_tp01_pp00.safetensors" model.norm.weight
expect_fail "bad input: a replicated tensor that differs in a tpconv set" 3 "replicated tensor differs between rank 0 and rank 1" "$T/rep.safetensors" \
  "$TPCONV" merge "$T/rep" --no-checksums -o "$T/rep.safetensors"
expect_fail "the same tampered set fails the checksum check by default" 3 "does not match the manifest checksum" "$T/rep.safetensors" \
  "$TPCONV" merge "$T/rep" -o "$T/rep.safetensors"
# a replicated K/V head (llama, 4 KV heads at tp 8: ranks 0 and 1 hold head 0):
# merge takes equal checked checksums for equal replicas; one that differs,
# with its own checksum in the manifest, is still compared and refused
cp -r "$T/rt_llama_8_tpconv_safetensors" "$T/kvrep"
K=model.layers.0.self_attn.k_proj.weight
$PY "$H/check_ranks.py" --bump "$T/kvrep/model_tp01_pp00.safetensors" $K
"$TPCONV" inspect --json --checksum xxh3-128 "$T/kvrep/model_tp01_pp00.safetensors" >"$T/kv.json"
$PY -c '
import json, sys
mp, ip, k = sys.argv[1:4]
m = json.load(open(mp)); d = {t["name"]: t["xxh3-128"] for t in json.load(open(ip))["tensors"]}
t = next(t for t in m["tensors"] if t["name"] == k)
assert t["parts"][0]["replicas"] == 2 and t["rank_xxh3-128"][0] == t["rank_xxh3-128"][1]
t["rank_xxh3-128"][1] = d[k]; json.dump(m, open(mp, "w"))' "$T/kvrep/tpconv-manifest.json" "$T/kv.json" $K 2>"$T/err" ||
  bad "kv replica fixture" "$(cat "$T/err")"
expect_fail "bad input: a replicated K/V head that differs, its checksum recorded, is compared and refused" 3 \
  "replicated key/value head 0 differs between rank 0 and rank 1" "$T/kvrep.safetensors" "$TPCONV" merge "$T/kvrep" -o "$T/kvrep.safetensors"
# without checksums the replicas are compared byte for byte (buffers from the
# scratch pool), by a merge and by a reshard before it writes
expect_fail "bad input: a replicated K/V head that differs, --no-checksums: merge compares and refuses" 3 \
  "replicated key/value head 0 differs between rank 0 and rank 1" "$T/kvrep.safetensors" "$TPCONV" merge "$T/kvrep" --no-checksums -o "$T/kvrep.safetensors"
expect_fail "bad input: a replicated K/V head that differs, --no-checksums: a reshard compares and refuses" 3 \
  "replicated key/value head 0 differs between rank 0 and rank 1" "$T/kvre2" "$TPCONV" shard "$T/kvrep" --tp 2 --no-checksums -o "$T/kvre2"
run "$TPCONV" merge "$T/rt_llama_8_tpconv_safetensors" -o "$T/kvok.safetensors"
[ "$rc" = 0 ] && same "$M/llama/model.safetensors" "$T/kvok.safetensors" && ok "replicated K/V heads with equal checksums merge bit-exact" ||
  bad "kv replicas merge" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -3)"
rm -rf "$T/kvrep" "$T/kvok.safetensors"
# a sha256 set (the manifest schema every set had before xxh3-128: "checksum":
# "sha256", "sha256" and "rank_sha256" members) merges and verifies, and a
# tampered tensor is caught by merge and by verify, with either checksum
$PY -c '
import json,sys; m=json.load(open(sys.argv[1]))
assert m["checksum"]=="sha256" and all("sha256" in t and "rank_sha256" in t and "xxh3-128" not in t for t in m["tensors"])' \
  "$T/sha_gpt2/tpconv-manifest.json" 2>"$T/err" && ok "--checksum sha256 writes the pre-xxh3 manifest schema" || bad "sha256 schema" "$(cat "$T/err")"
run "$TPCONV" merge "$T/sha_gpt2" -o "$T/sha_gpt2.safetensors"
[ "$rc" = 0 ] && same "$M/gpt2/model.safetensors" "$T/sha_gpt2.safetensors" && ok "a sha256 set merges bit-exact" || bad "sha256 set merge" "$(cat "$T/err" "$T/diff")"
run "$TPCONV" verify --reference "$M/gpt2/model.safetensors" --shards "$T/sha_gpt2" --checks structure
[ "$rc" = 0 ] && ok "a sha256 set verifies" || bad "sha256 set verify" "rc $rc $(cat "$T/out" "$T/err" | tail -5)"
for alg in sha256 xxh3-128; do
  src=$T/sha_gpt2; [ $alg = sha256 ] || src=$T/rt_gpt2_2_tpconv_safetensors
  rm -rf "$T/tamp_$alg"; cp -r "$src" "$T/tamp_$alg"
  $PY "$H/check_ranks.py" --bump "$T/tamp_$alg/model_tp01_pp00.safetensors" transformer.h.0.attn.c_attn.weight
  expect_fail "$alg set: a tampered rank tensor fails merge" 3 "does not match the manifest checksum ($alg;" "$T/tamp_$alg.safetensors" \
    "$TPCONV" merge "$T/tamp_$alg" -o "$T/tamp_$alg.safetensors"
  # merge checks the checksums while it writes a single file (before the
  # commit), before writing anything else: every output kind, --force over an
  # existing file, and --dry-run refuse the tampered set and leave nothing
  if [ $HAVE_TORCH_FMT = 1 ]; then
    expect_fail "$alg set: a tampered rank tensor fails merge to a torch file" 3 "does not match the manifest checksum ($alg;" "$T/tamp_$alg.pt" \
      "$TPCONV" merge "$T/tamp_$alg" -o "$T/tamp_$alg.pt"
  fi
  expect_fail "$alg set: a tampered rank tensor fails merge to HF shards" 3 "does not match the manifest checksum ($alg;" "$T/tamp_${alg}_hf" \
    "$TPCONV" merge "$T/tamp_$alg" -o "$T/tamp_${alg}_hf/" --max-shard-size 200K
  # a reshard checks its input's checksums in the reads that hash the new set
  # (a split tensor's rank copies) or after them (fused parts, replicas),
  # beside its writers: it fails the same way and takes back what it wrote
  cp -r "$src" "$T/tamp2_$alg"
  $PY "$H/check_ranks.py" --bump "$T/tamp2_$alg/model_tp01_pp00.safetensors" transformer.h.1.mlp.c_fc.weight
  cp -r "$src" "$T/tamp3_$alg"
  $PY "$H/check_ranks.py" --bump "$T/tamp3_$alg/model_tp01_pp00.safetensors" transformer.ln_f.weight
  for k in tamp:transformer.h.0.attn.c_attn.weight tamp2:transformer.h.1.mlp.c_fc.weight tamp3:transformer.ln_f.weight; do
    expect_fail "$alg set: a reshard of a set with a tampered rank tensor fails (${k#*:})" 3 "does not match the manifest checksum ($alg;" \
      "$T/${k%%:*}_${alg}_re4" "$TPCONV" shard "$T/${k%%:*}_$alg" --tp 4 -o "$T/${k%%:*}_${alg}_re4"
    grep -qF "${k#*:}" "$T/err" && grep -qF "model_tp01_pp00.safetensors" "$T/err" && ok "... the error names ${k#*:} and rank 1's file" ||
      bad "reshard checksum error names the tensor and file" "$(cat "$T/err")"
  done
  cp "$M/gpt2/model.safetensors" "$T/keep_$alg.safetensors"
  run "$TPCONV" merge "$T/tamp_$alg" -o "$T/keep_$alg.safetensors" -f
  [ "$rc" = 3 ] && cmp -s "$M/gpt2/model.safetensors" "$T/keep_$alg.safetensors" && ! ls -a "$T" | grep -q '\.tpc-' &&
    ok "$alg set: a tampered merge with --force leaves the existing output untouched" || bad "$alg tampered --force" "rc $rc $(cat "$T/err")"
  expect_fail "$alg set: a tampered rank tensor fails merge --dry-run" 3 "does not match the manifest checksum ($alg;" "" \
    "$TPCONV" merge "$T/tamp_$alg" --dry-run
  # a reshard checks the input set before it writes (a whole set, one rank
  # with --rank, or a dry run): nothing is written, no folder is made, and
  # an existing folder keeps what it held
  expect_fail "$alg set: a tampered rank tensor fails a reshard and leaves nothing" 3 "does not match the manifest checksum ($alg;" "$T/tamp_${alg}_re" \
    "$TPCONV" shard "$T/tamp_$alg" --tp 4 -o "$T/tamp_${alg}_re"
  expect_fail "$alg set: a tampered rank tensor fails a reshard of one rank before it writes" 3 "does not match the manifest checksum ($alg;" "$T/tamp_${alg}_r1" \
    "$TPCONV" shard "$T/tamp_$alg" --tp 4 --rank 1 -o "$T/tamp_${alg}_r1"
  expect_fail "$alg set: a tampered rank tensor fails a reshard --dry-run" 3 "does not match the manifest checksum ($alg;" "" \
    "$TPCONV" shard "$T/tamp_$alg" --tp 4 --dry-run
  mkdir -p "$T/tamp_${alg}_keep" && echo x >"$T/tamp_${alg}_keep/notes.txt"
  run "$TPCONV" shard "$T/tamp_$alg" --tp 4 -o "$T/tamp_${alg}_keep"
  [ "$rc" = 3 ] && [ "$(ls -A "$T/tamp_${alg}_keep")" = notes.txt ] &&
    ok "$alg set: a failed reshard into an existing folder leaves the folder and its file" || bad "$alg tampered reshard, existing folder" "rc $rc $(ls -A "$T/tamp_${alg}_keep") $(cat "$T/err")"
  run "$TPCONV" verify --reference "$M/gpt2/model.safetensors" --shards "$T/tamp_$alg" --checks structure
  [ "$rc" = 1 ] && grep -q "transformer.h.0.attn.c_attn.weight .*FAIL" "$T/out" &&
    ok "$alg set: a tampered rank tensor fails verify" || bad "$alg tamper verify" "rc $rc $(cat "$T/out" "$T/err" | tail -5)"
  # the rank bytes intact but the recorded checksum changed: only the checksum check can see it
  rm -rf "$T/tamp_$alg"; cp -r "$src" "$T/tamp_$alg"
  $PY -c '
import json,sys; p, alg = sys.argv[1], sys.argv[2]; m=json.load(open(p))
t = [t for t in m["tensors"] if t["name"] == "transformer.h.0.attn.c_attn.weight"][0]
h = t["rank_" + alg][1]; t["rank_" + alg][1] = ("0" if h[0] != "0" else "1") + h[1:]
json.dump(m, open(p, "w"))' "$T/tamp_$alg/tpconv-manifest.json" $alg
  run "$TPCONV" verify --reference "$M/gpt2/model.safetensors" --shards "$T/tamp_$alg" --checks structure
  [ "$rc" = 1 ] && grep -qF "$alg of 'transformer.h.0.attn.c_attn.weight' differs from the recorded one" "$T/out" &&
    ok "$alg set: verify confirms the recorded checksums, naming the algorithm" || bad "$alg checksum verify" "rc $rc $(cat "$T/out" "$T/err" | tail -5)"
done
# a manifest naming a checksum this tpconv does not know is refused, not skipped
rm -rf "$T/blake"; cp -r "$T/sha_gpt2" "$T/blake"
sed -i 's/"checksum": "sha256"/"checksum": "blake3"/' "$T/blake/tpconv-manifest.json"
expect_fail "a manifest with an unknown checksum is refused" 3 "unknown checksum 'blake3'" "$T/blake.safetensors" \
  "$TPCONV" merge "$T/blake" -o "$T/blake.safetensors"
# a manifest that names a checksum but lacks one tensor's is refused
rm -rf "$T/nohash"; cp -r "$T/sha_gpt2" "$T/nohash"
$PY -c '
import json,sys; p=sys.argv[1]; m=json.load(open(p)); del m["tensors"][3]["sha256"]; json.dump(m, open(p, "w"))' "$T/nohash/tpconv-manifest.json"
expect_fail "a manifest missing one tensor's checksum is refused" 3 '"sha256" is missing or not 64 lowercase hex digits' "$T/nohash.safetensors" \
  "$TPCONV" merge "$T/nohash" -o "$T/nohash.safetensors"
# outputs: refuse to overwrite a complete set without --force
run "$TPCONV" shard "$M/llama" --tp 2 --preset llama -o "$T/rt_llama_2_tpconv_safetensors"
[ "$rc" = 2 ] && grep -q "already holds a complete shard set; use --force" "$T/err" && ok "an existing set is not overwritten without --force" || bad "overwrite refusal" "$rc $(cat "$T/err")"
run "$TPCONV" shard "$M/llama" --tp 2 --preset llama -o "$T/rt_llama_2_tpconv_safetensors" -f
[ "$rc" = 0 ] && [ -f "$T/rt_llama_2_tpconv_safetensors/tpconv-manifest.json" ] && ok "--force replaces a set" || bad "--force" "$(cat "$T/err")"

# ---- --dry-run: the full plan, golden, nothing written
(cd "$M" && "$TPCONV" shard llama --tp 8 --preset llama --dry-run) >"$T/dry.txt" 2>&1
if diff -u "$SRC/tests/shard/golden/shard_dryrun_llama_tp8.txt" "$T/dry.txt" >"$T/diff"; then ok "--dry-run golden output"; else bad "--dry-run golden output" "$(cat "$T/diff")"; fi
run "$TPCONV" shard "$M/gpt2" --tp 2 --preset gpt2 --dry-run -o "$T/dry"
[ "$rc" = 0 ] && [ ! -e "$T/dry" ] && ok "--dry-run writes nothing" || bad "--dry-run writes nothing"
run "$TPCONV" shard "$M/gpt2" --tp 2 --preset gpt2 --dry-run --json
[ "$rc" = 0 ] && $PY -c 'import json,sys; m=json.load(open(sys.argv[1])); assert m["tp"]==2 and m["checksum"]=="none"' "$T/out" &&
  ok "--dry-run --json prints the manifest that would be written" || bad "--dry-run --json" "$(cat "$T/err")"

echo "1..$n"
[ "$failed" = 0 ]
