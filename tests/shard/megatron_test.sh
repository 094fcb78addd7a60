#!/usr/bin/env bash
# The megatron layout (TAP): Megatron-LM legacy sets (release/mp_rank_TT[_PPP]/
# model_optim_rng.pt, Megatron-Core names, QKV per query group) written from Hugging
# Face LLaMA-family models made by real torch (a GQA LLaMA, a tied Qwen2 with q/k/v
# biases in bf16) at several tp x pp; every rank file equals what Megatron's own
# checkpoint loaders build (tests/shard/megatron_check.py, an independent torch
# construction); merge gives the model back bit for bit, with the manifest and as a
# set Megatron wrote (no manifest: head counts from the files' args; the true vocabulary
# from args, a config.json or --vocab, else refused: never the padded rows); reshard and
# verify read it; what Megatron could not load is refused.
# usage: megatron_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
M=$T/m
$PY "$H/vllm_check.py" make "$M" >/dev/null || { echo "1..0 # SKIP model generator failed"; exit 0; }
"$TPCONV" convert "$M/llama" -o "$M/llama.safetensors" -q && "$TPCONV" convert "$M/qwen" -o "$M/qwen.safetensors" -q ||
  { echo "1..0 # SKIP convert failed"; exit 0; }

for spec in "llama 2 2" "llama 2 1" "llama 1 2" "qwen 2 1" "qwen 4 2"; do
  set -- $spec; m=$1 tp=$2 pp=$3
  S=$T/${m}_${tp}_$pp
  run "$TPCONV" shard "$M/$m" --preset llama --tp $tp --pp $pp --layout megatron -o "$S" -q
  if [ "$rc" != 0 ]; then bad "$m tp $tp pp $pp: shard" "$(cat "$T/err")"; continue; fi
  run $PY "$H/megatron_check.py" "$M/$m" "$S" $tp $pp
  [ "$rc" = 0 ] && ok "$m tp $tp pp $pp: every rank file equals Megatron's loader construction (QKV per group, [gate; up], local layers)" ||
    bad "$m tp $tp pp $pp: rank files" "$(tail -n 5 "$T/out" "$T/err")"
  run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q
  [ "$rc" = 0 ] && same "$M/$m.safetensors" "$S.merged.safetensors" && ok "$m tp $tp pp $pp: merge is bit-exact" ||
    bad "$m tp $tp pp $pp: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
done
# Qwen2 (q/k/v biases, tied), Qwen3 (per-head q/k norms, head_dim 16 not hidden / heads)
# and Mistral under their own presets (tests/gguf/arch's tiny models, written by
# transformers): every rank file as Megatron's loaders build it, the args as Megatron names
# them (megatron_check.py), merge bit-exact with the manifest and as a set Megatron wrote
A=$SRC/tests/gguf/arch
for m in qwen2 qwen3 mistral; do
  S=$T/a_$m R=$T/hf_$m && mkdir -p "$R" && cp "$A/tiny-$m/config.json" "$R/"
  run "$TPCONV" convert "$A/tiny-$m" -o "$R/pytorch_model.bin" -q &&
    run "$TPCONV" convert "$A/tiny-$m" -o "$T/$m.safetensors" -q &&
    run "$TPCONV" shard "$A/tiny-$m" --preset $m --tp 2 --pp 2 --layout megatron -o "$S" -q &&
    run $PY "$H/megatron_check.py" "$R" "$S" 2 2 &&
    run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q && same "$T/$m.safetensors" "$S.merged.safetensors" &&
    cp -r "$S" "$S.f" && rm "$S.f/tpconv-manifest.json" &&
    run "$TPCONV" merge "$S.f" --preset $m --vocab 320 -o "$S.f.safetensors" -q && same "$T/$m.safetensors" "$S.f.safetensors" &&
    ok "$m tp 2 pp 2 (--preset $m): rank files and args as Megatron's loaders give them; merge bit-exact, with the manifest and without" ||
    bad "$m tp 2 pp 2" "$(tail -n 5 "$T/out" "$T/err" "$T/diff" 2>/dev/null)"
done
run "$TPCONV" verify --reference "$M/llama.safetensors" --shards "$T/llama_2_1"
[ "$rc" = 0 ] && ok "verify passes on a megatron set ($(tail -n 1 "$T/out" | sed 's/^# //'))" || bad "verify" "$(tail -3 "$T/out")" "$(cat "$T/err")"

# a set as Megatron writes it (no manifest): tp and pp from the folders, head counts
# from the files' args; the true vocabulary from --vocab (Megatron keeps only the padded one)
S=$T/foreign && cp -r "$T/llama_2_2" "$S" && rm "$S/tpconv-manifest.json"
run "$TPCONV" merge "$S" --preset llama --vocab 1000 -o "$S.merged.safetensors" -q
[ "$rc" = 0 ] && same "$M/llama.safetensors" "$S.merged.safetensors" &&
  ok "a Megatron-written set (no manifest) merges bit-exactly with --preset llama --vocab" || bad "foreign merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
# the true vocabulary: tpconv records it in args (orig_vocab_size, as transformers'
# Megatron converters read it); a set Megatron wrote records only padded_vocab_size
# (1024 rows for 1000 here): merged without --vocab or a config.json it is refused, never
# merged with its padding kept
S0=$T/foreign0 && cp -r "$T/llama_2_2" "$S0" && rm "$S0/tpconv-manifest.json" "$S0/config.json"
run "$TPCONV" merge "$S0" --preset llama -o "$S0.merged.safetensors" -q
[ "$rc" = 0 ] && same "$M/llama.safetensors" "$S0.merged.safetensors" &&
  ok "no manifest, no config.json: the true vocabulary from the args' orig_vocab_size, bit-exact" || bad "orig_vocab_size" "exit $rc" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
# as Megatron writes its args: orig_vocab_size dropped; then --vocab-size with a NullTokenizer (one EOD more)
margs() {
  $PY - "$1" "$2" <<'PY'
import glob, sys, torch
for f in glob.glob(sys.argv[1] + "/release/*/model_optim_rng.pt"):
    d = torch.load(f, weights_only=False)
    vars(d["args"]).pop("orig_vocab_size", None)
    if sys.argv[2] != "-":
        d["args"].vocab_size, d["args"].tokenizer_type = int(sys.argv[2]), "NullTokenizer"
    torch.save(d, f)
PY
}
margs "$S0" - 2>"$T/perr" || bad "rewrite args" "$(cat "$T/perr")"
run "$TPCONV" merge "$S0" --preset llama -o "$S0.padded.safetensors" -q
[ "$rc" = 2 ] && grep -q "tensor 'model.embed_tokens.weight': the ranks hold 1024 rows in dim 0 (tp 2 x 512), a padded vocabulary (padded_vocab_size 1024 in the set's Megatron args) whose true size nothing gives: give --vocab N or --config config.json" "$T/err" &&
  [ ! -e "$S0.padded.safetensors" ] && ok "a Megatron-written set with only padded_vocab_size: exit 2 naming the tensor, nothing written" ||
  bad "padded vocab kept" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" merge "$S0" --preset llama --vocab 1000 -o "$S0.v.safetensors" -q
[ "$rc" = 0 ] && same "$M/llama.safetensors" "$S0.v.safetensors" && ok "... with --vocab 1000: bit-exact" || bad "--vocab" "exit $rc" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
run "$TPCONV" merge "$S0" --preset llama --vocab 2000 -o "$S0.v2.safetensors" -q
[ "$rc" = 2 ] && grep -q "vocab 2000 (--vocab) contradicts the ranks: they hold 1024 rows" "$T/err" && ok "... with a --vocab above the rows: exit 2" || bad "--vocab 2000" "exit $rc" "$(cat "$T/err")"
margs "$S0" 999 2>"$T/perr" || bad "rewrite args" "$(cat "$T/perr")"
run "$TPCONV" merge "$S0" --preset llama -o "$S0.null.safetensors" -q
[ "$rc" = 0 ] && same "$M/llama.safetensors" "$S0.null.safetensors" &&
  ok "args vocab_size 999 with tokenizer_type NullTokenizer: 1000 tokens with its EOD, bit-exact" || bad "vocab_size" "exit $rc" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
S1=$T/foreign1 && cp -r "$T/llama_2_1" "$S1" && rm "$S1/tpconv-manifest.json"
run "$TPCONV" verify --reference "$M/llama.safetensors" --shards "$S1" --preset llama --ranks 2
[ "$rc" = 0 ] && ok "verify of a Megatron-written set takes the head counts from its args ($(tail -n 1 "$T/out" | sed 's/^# //'))" ||
  bad "foreign verify" "exit $rc" "$(tail -3 "$T/out")" "$(cat "$T/err")"
run "$TPCONV" inspect "$S"
[ "$rc" = 0 ] && grep -q "layout megatron, no tpconv manifest" "$T/out" && ok "inspect names a Megatron set" || bad "inspect" "$(head -3 "$T/out" "$T/err")"
# reshard straight from Megatron into vLLM's layout
run "$TPCONV" shard "$T/llama_2_2" --tp 2 --layout vllm -o "$T/re_vllm" -q
[ "$rc" = 0 ] && run $PY "$H/vllm_check.py" check "$M/llama" "$T/re_vllm" 2 && ok "reshard megatron tp 2 pp 2 -> vllm tp 2 equals vLLM's state dict" ||
  bad "reshard" "$(cat "$T/err" "$T/out" | tail -4)"
# uneven stages: a 4-layer copy of the LLaMA (layers 2, 3 repeat 0, 1 under their own
# numbers) at --pp-layers 1,3: stage 1 holds three layers, numbered 0-2 there; args say
# decoder_first/last_pipeline_num_layers; the set merges bit-exactly
S=$T/llama_uneven L4=$T/llama4
mkdir -p "$L4" && cp "$M/llama/config.json" "$L4/" && $PY - "$M/llama.safetensors" "$L4" <<'PY'
import json, re, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); data = b[8 + n:]
cfg = json.load(open(sys.argv[2] + "/config.json")); cfg["num_hidden_layers"] = 4
json.dump(cfg, open(sys.argv[2] + "/config.json", "w"))
out, parts, off = {}, [], 0
for k, v in h.items():
    if k == "__metadata__":
        continue
    raw = data[v["data_offsets"][0]:v["data_offsets"][1]]
    m = re.match(r"model\.layers\.(\d+)\.(.*)", k)
    for nm in [k] if not m else ["model.layers.%d.%s" % (int(m.group(1)) + 2 * j, m.group(2)) for j in range(2)]:
        out[nm] = {"dtype": v["dtype"], "shape": v["shape"], "data_offsets": [off, off + len(raw)]}
        parts.append(raw); off += len(raw)
hb = json.dumps(out).encode(); hb += b" " * ((8 - len(hb) % 8) % 8)
open(sys.argv[2] + "/model.safetensors", "wb").write(struct.pack("<Q", len(hb)) + hb + b"".join(parts))
PY
run "$TPCONV" shard "$L4" --preset llama --tp 2 --pp 2 --pp-layers 1,3 --layout megatron -o "$S" -q &&
  run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q
if [ "$rc" = 0 ] && same "$L4/model.safetensors" "$S.merged.safetensors" && $PY - "$S" <<'PY' 2>"$T/perr"
import sys, torch
d0 = torch.load(sys.argv[1] + "/release/mp_rank_00_000/model_optim_rng.pt", weights_only=False)
d1 = torch.load(sys.argv[1] + "/release/mp_rank_00_001/model_optim_rng.pt", weights_only=False)
assert {k.split(".")[2] for k in d0["model"] if k.startswith("decoder.layers.")} == {"0"}, sorted(d0["model"])
assert {k.split(".")[2] for k in d1["model"] if k.startswith("decoder.layers.")} == {"0", "1", "2"}, sorted(d1["model"])
a = d1["args"]
assert (a.decoder_first_pipeline_num_layers, a.decoder_last_pipeline_num_layers) == (1, 3), vars(a)
PY
then ok "--pp-layers 1,3: the layers numbered locally per stage, first/last counts in args; merge bit-exact"
else bad "uneven stages" "$(cat "$T/err" "$T/perr" "$T/diff" 2>/dev/null | tail -4)"; fi
# the same set as Megatron writes it (no manifest): each stage's first layer from the
# args' first/last counts (get_transformer_layer_offset's uneven branch), not the even
# split (which numbered stage 1's layers from 2 and merged a wrong model with exit 0)
cp -r "$S" "$S.foreign" && rm "$S.foreign/tpconv-manifest.json"
run "$TPCONV" merge "$S.foreign" --preset llama --vocab 1000 -o "$S.foreign.safetensors" -q
[ "$rc" = 0 ] && same "$L4/model.safetensors" "$S.foreign.safetensors" &&
  ok "--pp-layers 1,3 as Megatron writes it (no manifest): layers numbered from the args' stage counts, merge bit-exact" ||
  bad "uneven stages, no manifest" "$(cat "$T/err" "$T/diff" 2>/dev/null | tail -4)"
# a stage without layers: Megatron's first/last counts must be larger than 0
# (transformer_config.py:2302-2323), so a legacy set could not load at its own stages
run "$TPCONV" shard "$M/llama" --preset llama --tp 2 --pp 2 --pp-layers 0,2 --layout megatron -o "$T/zero_stage" -q
[ "$rc" = 3 ] && [ ! -e "$T/zero_stage" ] && grep -qF -- "--pp-layers: stage 0 holds no layer, which Megatron's first/last stage counts cannot say (they must be larger than 0)" "$T/err" &&
  ok "--pp-layers 0,2 refused for the legacy layout (exit 3, nothing written)" || bad "zero-layer stage" "rc $rc" "$(cat "$T/err")"
# Mixtral (tests/gguf/arch's tiny-mixtral, written by transformers: 2 layers, 4 experts) at
# tp x pp x ep: mp_rank_TT[_PPP]_EEE folders, local experts, MoE args, each rank file equal
# to an independent construction from the HF tensors (megatron_moe_check.py); merge and
# (tp 1) convert --select model --rules megatron-mixtral give the model back bit for bit
A=$SRC/tests/gguf/arch
run "$TPCONV" convert "$A/tiny-mixtral" -o "$T/mixtral.safetensors" -q || bad "mixtral fixture" "$(cat "$T/err")"
# (and a float32 Mixtral of 4 kv heads for tp 4 x pp 2 x ep 2: expert tp 2 inside each EP group)
$PY "$H/megatron_moe_check.py" make "$T/mx4" || bad "mixtral kv-4 fixture"
sets="" sets4=""
for spec in "2 1 2" "2 2 2" "2 1 1" "1 2 1" "1 1 1" "4 2 2 4"; do
  set -- $spec; tp=$1 pp=$2 ep=$3 S=$T/mx_$1_$2_$3 what="mixtral${4:+ (4 kv heads)} tp $1 pp $2 ep $3"
  src=$A/tiny-mixtral ref=$T/mixtral.safetensors
  [ -n "${4:-}" ] && src=$T/mx4 ref=$T/mx4/model.safetensors
  run "$TPCONV" shard "$src" --preset mixtral --tp $tp --pp $pp --ep $ep --layout megatron -o "$S" -q
  if [ "$rc" != 0 ]; then bad "$what: shard" "$(cat "$T/err")"; continue; fi
  if [ -n "${4:-}" ]; then sets4="$S:$tp:$pp:$ep"; else sets="$sets $S:$tp:$pp:$ep"; fi
  run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q
  [ "$rc" = 0 ] && same "$ref" "$S.merged.safetensors" && ok "$what: $(ls "$S/release" | tr '\n' ' ')merge is bit-exact" ||
    bad "$what: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
done
run $PY "$H/megatron_moe_check.py" "$T/mixtral.safetensors" $sets
[ "$rc" = 0 ] && ok "mixtral: every rank file as Megatron holds it (folder names, local experts, router, pre_mlp_layernorm, MoE args): $(tr '\n' ',' <"$T/out")" ||
  bad "mixtral rank files" "$(cat "$T/out" "$T/err" | tail -5)"
run $PY "$H/megatron_moe_check.py" "$T/mx4/model.safetensors" $sets4
[ "$rc" = 0 ] && ok "mixtral tp 4 pp 2 ep 2 (expert tp 2): every rank file as Megatron holds it: $(cat "$T/out")" ||
  bad "mixtral tp 4 rank files" "$(cat "$T/out" "$T/err" | tail -5)"
run "$TPCONV" convert "$T/mx_1_1_1/release/mp_rank_00/model_optim_rng.pt" --select model --rules megatron-mixtral --vocab 320 -o "$T/mx1.safetensors" -q
[ "$rc" = 0 ] && same "$T/mixtral.safetensors" "$T/mx1.safetensors" && ok "mixtral tp 1: convert --select model --rules megatron-mixtral is bit-exact" ||
  bad "mixtral convert --rules" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
run "$TPCONV" shard "$A/tiny-mixtral" --preset mixtral --tp 2 --ep 2 --ep-placement round-robin --layout megatron -o "$T/r4" -q
[ "$rc" = 2 ] && grep -qF "Megatron's expert-parallel rank g holds experts [g*E/ep, (g+1)*E/ep) (moe_layer.py:187-195, experts.py:1532-1533): --ep-placement round-robin is not written by the megatron layout" "$T/err" &&
  [ ! -e "$T/r4" ] && ok "round-robin experts are refused by name, nothing written" || bad "round-robin" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$A/tiny-qwen3-moe" --preset qwen3-moe --tp 2 --ep 2 --layout megatron -o "$T/r5" -q
[ "$rc" = 3 ] && grep -qF "the megatron layout knows Megatron-Core names for the LLaMA family and Mixtral; this tensor has none" "$T/err" &&
  [ ! -e "$T/r5" ] && ok "an MoE family the layout does not write (qwen3-moe) is refused by name" || bad "qwen3-moe" "exit $rc" "$(cat "$T/err")"
# an expert-parallel set with etp below tp and no manifest (one folder per tp rank,
# its experts split over the expert tensor-parallel group): refused; etp = tp sets
# (Megatron's default) are read (tests/dcp/megatron_legacy_test.sh)
S=$T/mx_foreign && cp -r "$T/mx_2_1_2" "$S" && rm "$S/tpconv-manifest.json"
run "$TPCONV" merge "$S" --preset mixtral --vocab 320 -o "$S.merged.safetensors" -q
[ "$rc" = 3 ] && grep -qF "an expert-parallel legacy set with expert_tensor_parallel_size 1 under tp 2 (args) without tpconv's manifest is not read (only etp = tp, Megatron's default)" "$T/err" &&
  ok "an expert-parallel set with etp below tp, without the manifest, is refused by name" || bad "foreign ep" "exit $rc" "$(cat "$T/err")"
# a rank folder without its EP rank while args say ep 2: refused, not read as EP rank 0's experts
S=$T/mx_noeee && cp -r "$T/mx_2_1_2" "$S" && mv "$S/release/mp_rank_01_001" "$S/release/mp_rank_01" &&
  sed -i 's|mp_rank_01_001|mp_rank_01|' "$S/tpconv-manifest.json"
run "$TPCONV" merge "$S" -o "$S.merged.safetensors" -q
[ "$rc" = 3 ] && grep -qF "args say expert_model_parallel_size 2 (4 experts), but the rank folder names no EP rank below it" "$T/err" && [ ! -e "$S.merged.safetensors" ] &&
  ok "a rank folder that names no EP rank is refused by name" || bad "no EEE" "exit $rc" "$(cat "$T/err")"
# refusals
run "$TPCONV" shard "$M/llama" --preset llama --tp 4 --layout megatron -o "$T/r1" -q
[ "$rc" = 3 ] && grep -q "2 groups (kv heads) do not divide by tp 4" "$T/err" && [ ! -e "$T/r1/tpconv-manifest.json" ] &&
  ok "tp above the query groups is refused (Megatron splits whole groups), nothing written" || bad "tp > groups" "exit $rc" "$(cat "$T/err")"
$PY -c 'import torch,sys; sd=torch.load(sys.argv[1]+"/llama/pytorch_model.bin"); sd["model.layers.0.self_attn.rotary_emb.inv_freq"]=torch.ones(4); import os; os.makedirs(sys.argv[1]+"/extra",exist_ok=True); torch.save(sd, sys.argv[1]+"/extra/pytorch_model.bin")' "$M" &&
  cp "$M/llama/config.json" "$M/extra/"
run "$TPCONV" shard "$M/extra" --preset llama --tp 2 --layout megatron -o "$T/r2" -q
[ "$rc" = 3 ] && grep -q "rotary_emb.inv_freq" "$T/err" && ok "a tensor with no Megatron-Core name is refused by name" || bad "unknown tensor" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$A/tiny-olmo2" --preset llama --preset-force --tp 2 --layout megatron -o "$T/r6" -q
[ "$rc" = 3 ] && grep -qF "tensor 'model.layers.0.self_attn.k_norm.weight': a q/k norm of 16 elements: Megatron's q_layernorm / k_layernorm norm each head of kv_channels 8" "$T/err" &&
  [ ! -e "$T/r6" ] && ok "a q/k norm over the whole projection (OLMo 2's) is refused by name, nothing written" || bad "whole q/k norm" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$M/llama" --preset llama --tp 2 --layout megatron --format safetensors -o "$T/r3" -q
[ "$rc" = 2 ] && ok "--format safetensors is refused: Megatron reads torch files" || bad "format" "exit $rc"
# layers without rope and sliding layers in the args (no_rope_freq, window_size (w - 1, 0),
# window_attn_skip_freq): SmolLM3's record default (every 4th layer without rope), Cohere 2's
# layer_types (3 sliding layers of 4, window 4; the global one without rope)
run "$TPCONV" shard "$A/tiny-smollm3" --tp 2 --layout megatron -o "$T/n1" -q &&
  run "$TPCONV" shard "$A/tiny-cohere2" --tp 2 --layout megatron -o "$T/n2" -q &&
  run $PY - "$T/n1" "$T/n2" <<'PY' && ok "smollm3 / cohere2: no_rope_freq, window_size and window_attn_skip_freq in the args" ||
import glob, sys, torch
a, b = (torch.load(glob.glob(d + "/release/mp_rank_00/model_optim_rng.pt")[0])["args"] for d in sys.argv[1:])
assert a.no_rope_freq == [0, 0, 0, 1] and getattr(a, "window_size", None) is None, vars(a)
assert (b.no_rope_freq, b.window_size, b.window_attn_skip_freq) == ([0, 0, 0, 1], (3, 0), [1, 1, 1, 0]), vars(b)
PY
  bad "no-rope and sliding layers" "$(cat "$T/err" | tail -3)"
echo "1..$n"
[ "$failed" = 0 ]
