#!/usr/bin/env bash
# GGUF read into Hugging Face form (TAP): for each tiny model in
# tests/gguf/arch, HF -> GGUF (f32) -> HF gives back every tensor: names,
# dtypes, shapes and bytes (sha256), but Gemma's norms, which the reference
# stored as w + 1 in F32: read back as (w + 1) - 1, the F32 values torch
# computes. A folder output gets a config.json whose members equal the
# model's own, and tokenizer files that convert back to the same GGUF
# byte for byte. Then shard from GGUF (facts and preset from the metadata),
# merge equal to the conversion, verify; a gguf-split set of a model merged
# back byte-identical; quantized blocks (llama-quantize Q4_K_M / Q6_K of
# tpconv's f16 GGUF, made by make_quant_fixture.py in the forky chroot)
# read back as python3-gguf's dequantize gives them.
# usage: hf_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
A="$SRC/tests/gguf/arch"
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/lib/tap.sh"
tmpdir
# name dtype shape sha256 of every tensor, sorted, but the lines GREP -v drops
table() { "$TPCONV" inspect --hash "$1" | awk '$1 !~ /^#/ && $1 != "name" {print $1, $2, $3, $NF}' | sort; }
have_torch=false
$PY -c 'import torch' 2>/dev/null && have_torch=true

# the sanitizer build takes the families the later checks read (and llama3's
# GPT-2 vocabulary) through the two loops over every family
SAN_FAMS=" llama llama-hf llama3 mistral mixtral qwen2 qwen3 qwen2-moe gemma phi3 gpt2 gpt-neox "
san_skip() { [ "$SAN" = 1 ] && [[ "$SAN_FAMS" != *" $1 "* ]]; }

# 1. round trip, every family
for dir in "$A"/tiny-*; do
  fam=${dir##*/tiny-}
  san_skip "$fam" && continue
  dt=$(table "$dir/model.safetensors" | awk '{print tolower($2); exit}')
  if ! "$TPCONV" convert "$dir" -o "$T/$fam.gguf" --outtype f32 -q 2>"$T/err" ||
     ! "$TPCONV" convert "$T/$fam.gguf" -o "$T/$fam.safetensors" --dtype "$dt" -q 2>>"$T/err"; then
    bad "$fam: HF -> GGUF f32 -> HF" "$(cat "$T/err")"; continue
  fi
  table "$dir/model.safetensors" | grep -v 'norm\.weight\|\.A_log \|pre_fc_norm_' > "$T/want"
  table "$T/$fam.safetensors" | grep -v 'norm\.weight\|\.A_log \|pre_fc_norm_' > "$T/got"
  # Gemma's norms go to GGUF as w + 1 and come back as (w + 1) - 1, not bit-exact
  # in F32; Qwen3-Next's (and Qwen3.5's) too but its gated linear_attn.norm (and its
  # multi-token-prediction block's mtp.pre_fc_norm_*, norms to the reference), and its A_log goes
  # as -exp(A_log), several floats to one, and comes back as one whose -exp is
  # the GGUF's (arch_test.sh: GGUF -> HF -> GGUF byte-identical)
  # a Mamba-2 A_log likewise (Granite 4: its exp is the GGUF's A to the bit)
  case $fam in
    gemma|gemma2|gemma3|qwen3-next|qwen3_5|qwen3_5-moe) ;;
    granitemoehybrid*) table "$dir/model.safetensors" | grep -v '\.A_log ' > "$T/want"
                       table "$T/$fam.safetensors" | grep -v '\.A_log ' > "$T/got" ;;
    *) table "$dir/model.safetensors" > "$T/want"; table "$T/$fam.safetensors" > "$T/got" ;;
  esac
  if diff "$T/want" "$T/got" > "$T/diff"; then
    ok "$fam: HF -> GGUF f32 -> HF bit-exact (names, dtypes, shapes, bytes)"
  else
    bad "$fam: HF -> GGUF f32 -> HF bit-exact (< model, > read back)" "$(head -10 "$T/diff")"
  fi
done
# Gemma's norms: (w + 1) - 1 in F32, as torch rounds it
if $have_torch; then
  "$TPCONV" convert "$A/tiny-gemma" -o "$T/gn.pt" --format torch -q &&
  "$TPCONV" convert "$T/gemma.safetensors" -o "$T/gb.pt" --format torch -q &&
  $PY - "$T/gn.pt" "$T/gb.pt" > "$T/out" 2>&1 <<'PY'
import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
norms = [k for k in a if k.endswith("norm.weight")]
assert norms, "no norms"
for k in norms:
    want = (a[k] + 1) - 1
    assert b[k].dtype == torch.float32 and torch.equal(b[k], want), k
print(len(norms), "norms")
PY
  [ $? = 0 ] && ok "gemma: norms read back as (w + 1) - 1 in F32 ($(cat "$T/out"))" || bad "gemma norms" "$(cat "$T/out")"
else
  skip "gemma norms: no torch"
fi

# 2. config.json from the metadata: every member the model's config has the same
for fam in llama qwen2 qwen3 mixtral qwen2-moe gemma phi3 gpt2 gpt-neox; do
  if ! "$TPCONV" convert "$T/$fam.gguf" -o "$T/o-$fam/" -q 2>"$T/err"; then
    bad "$fam: convert to a folder" "$(cat "$T/err")"; continue
  fi
  $PY - "$T/o-$fam/config.json" "$A/tiny-$fam/config.json" > "$T/out" 2>&1 <<'PY'
import json, sys
got, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
want.setdefault("rope_theta", (want.get("rope_parameters") or {}).get("rope_theta"))
want["torch_dtype"] = want.get("dtype", want.get("torch_dtype"))
# token ids the model's config leaves null come from its tokenizer (tokenizer.ggml.*_token_id)
ids = ("bos_token_id", "eos_token_id", "pad_token_id")
diff = {k: (v, want.get(k)) for k, v in got.items()
        if want.get(k) != v and k != "n_inner" and not (k in ids and want.get(k) is None)}
for k in ("hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size", "n_embd"):
    if k in want and k not in got:
        diff[k] = ("missing", want[k])
print(diff or "")
sys.exit(1 if diff else 0)
PY
  [ $? = 0 ] && [ -f "$T/o-$fam/model.safetensors" ] && ok "$fam: config.json rebuilt from the metadata equals the model's" ||
    bad "$fam: config.json rebuilt from the metadata" "$(cat "$T/out")"
done
# tokenizer files from the metadata: the folder converted again gives the
# same GGUF, byte for byte (tokenizer.* keys, config, tensors: a fixed point).
# A SentencePiece folder is that without the tokenizer.json written beside
# tokenizer.model; with it the reference also takes unknown_token_id (the
# unk_token among its added tokens) and add_sep_token (its post-processor):
# every other KV the same bytes, and a fixed point from there on
kvs() { $PY - "$@" <<'PY'
import struct, sys
def kvs(path):
    b = open(path, "rb").read()
    n, o, out = struct.unpack_from("<Q", b, 16)[0], 24, {}
    size = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    def val(t, o):
        if t == 8:
            return o + 8 + struct.unpack_from("<Q", b, o)[0]
        if t == 9:
            et, m = struct.unpack_from("<IQ", b, o)
            o += 12
            for _ in range(m):
                o = val(et, o)
            return o
        return o + size[t]
    for _ in range(n):
        k = struct.unpack_from("<Q", b, o)[0]
        key, o = b[o + 8:o + 8 + k].decode(), o + 8 + k
        t = struct.unpack_from("<I", b, o)[0]
        end = val(t, o + 4)
        out[key], o = b[o:end], end
    return out
a, b = kvs(sys.argv[1]), kvs(sys.argv[2])
extra = sorted(set(b) - set(a))
diff = [k for k in a if a[k] != b.get(k)]
print("KVs differ: %s" % diff if diff else "added: %s" % " ".join(extra))
sys.exit(1 if diff or not extra or not set(extra) <= set(sys.argv[3:]) else 0)
PY
}
mkdir -p "$T/fp" "$T/fp2"
for dir in "$A"/tiny-*; do
  fam=${dir##*/tiny-} F=$T/fp/tiny-$fam
  san_skip "$fam" && continue
  if ! "$TPCONV" convert "$T/$fam.gguf" -o "$F/" -q 2>"$T/err"; then
    bad "$fam: tokenizer files rebuilt" "$(cat "$T/err")"; continue
  fi
  files=$(cd "$F" && ls tokenizer* | tr '\n' ' ')
  spm=false
  [ -f "$F/tokenizer.model" ] && spm=true && mv "$F/tokenizer.json" "$T/fp/$fam.tokenizer.json"
  if "$TPCONV" convert "$F" -o "$T/fp/$fam.gguf" --outtype f32 -q 2>"$T/err" &&
     cmp "$T/$fam.gguf" "$T/fp/$fam.gguf" > "$T/diff" 2>&1; then
    ok "$fam: tokenizer files rebuilt ($files), GGUF -> HF -> GGUF byte-identical$($spm && echo ' (without tokenizer.json)')"
  else
    bad "$fam: tokenizer files rebuilt, GGUF -> HF -> GGUF byte-identical" "$(cat "$T/err" "$T/diff" | head -6)"
  fi
  $spm || continue
  mv "$T/fp/$fam.tokenizer.json" "$F/tokenizer.json"
  "$TPCONV" convert "$F" -o "$T/fp/$fam-j.gguf" --outtype f32 -q 2>"$T/err" &&
    kvs "$T/$fam.gguf" "$T/fp/$fam-j.gguf" tokenizer.ggml.unknown_token_id tokenizer.ggml.add_sep_token > "$T/out" 2>&1 &&
    "$TPCONV" convert "$T/fp/$fam-j.gguf" -o "$T/fp2/tiny-$fam/" -q 2>>"$T/err" &&
    "$TPCONV" convert "$T/fp2/tiny-$fam" -o "$T/fp2/$fam.gguf" --outtype f32 -q 2>>"$T/err" &&
    cmp "$T/fp/$fam-j.gguf" "$T/fp2/$fam.gguf" > "$T/diff" 2>&1 &&
    ok "$fam: with tokenizer.json, every KV the same but the reference's $(cat "$T/out"); then a fixed point" ||
    bad "$fam: with tokenizer.json: the same KVs but unknown_token_id, add_sep_token; then a fixed point" "$(cat "$T/err" "$T/out" "$T/diff" | head -6)"
done
# config.json members the GGUF implies where the config class's default
# would say another model (the folders above): smollm3's GGUF has no
# tokenizer.ggml.padding_token_id, so pad_token_id null (SmolLM3Config's
# 128004 is past the tiny vocabulary: from_pretrained fails); olmoe's
# rms_norm_eps the GGUF's 1e-5 (OlmoeModel.set_gguf_parameters writes 1e-5
# whatever the model's 1e-6: llama.cpp computes with it); qwen3-moe's
# norm_topk_prob true (llama.cpp's qwen3moe graph renormalises the top-k
# routing weights always, and the GGUF has no key: Qwen3MoeConfig's default
# false would route otherwise)
implied() { # FAM DESC PYTHON-CONDITION over c (the rebuilt config.json)
  san_skip "$1" && return
  $PY - "$T/fp/tiny-$1/config.json" "$3" > "$T/out" 2>&1 <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else "%s: %s" % (sys.argv[2], {k: c.get(k) for k in c if k in sys.argv[2]}))
PY
  [ $? = 0 ] && ok "$1: the rebuilt config.json's $2" || bad "$1: the rebuilt config.json's $2" "$(cat "$T/out")"
}
implied smollm3 "pad_token_id null (the GGUF has no padding id)" '"pad_token_id" in c and c["pad_token_id"] is None'
implied olmoe "rms_norm_eps the GGUF's 1e-5" 'c["rms_norm_eps"] == 1e-5'
implied qwen3-moe "norm_topk_prob true (llama.cpp's routing)" 'c.get("norm_topk_prob") is True'
# tj_same GOT WANT: two tokenizer.json files JSON-equal (top level and model.*);
# prints the differing keys, or the counts
tj_same() { $PY - "$1" "$2" <<'PY'
import json, sys
got, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
diff += ["model." + k for k in want["model"] if got.get("model", {}).get(k) != want["model"][k]]
print("differs: %s" % diff if diff else "%d pieces, %d merges, %d added tokens" %
      (len(got["model"]["vocab"]), len(got["model"]["merges"]), len(got["added_tokens"])))
sys.exit(1 if diff else 0)
PY
}
# a "llama" vocabulary the reference took from a tokenizer.json (LlamaHfVocab:
# every score -1000, no UNKNOWN) comes back as transformers 5 saved it: no
# tokenizer.model, the fixture's own tokenizer.json (JSON-equal) and
# chat_template.jinja; a SentencePiece one keeps its tokenizer.model
F=$T/fp/tiny-llama-hf
tj_same "$F/tokenizer.json" "$A/tiny-llama-hf/tokenizer.json" > "$T/out" 2>&1
[ $? = 0 ] && [ ! -e "$F/tokenizer.model" ] && cmp -s "$F/chat_template.jinja" "$A/tiny-llama-hf/chat_template.jinja" &&
  ok "llama-hf: no tokenizer.model; tokenizer.json the fixture's own ($(cat "$T/out")), chat_template.jinja too" ||
  bad "llama-hf: rebuilt as the fixture's tokenizer.json and chat_template.jinja, no tokenizer.model" \
    "$(tail -3 "$T/out"; ls "$F")"
for fam in llama mistral mixtral phi3 gemma; do
  [ -f "$T/fp/tiny-$fam/tokenizer.model" ] && ok "$fam: a SentencePiece vocabulary still gets tokenizer.model" ||
    bad "$fam: a SentencePiece vocabulary still gets tokenizer.model" "$(ls "$T/fp/tiny-$fam")"
done
# the tokenizer_config variants of arch/llama-hf/variants.json (v4: as
# transformers 4 saved it, pad_token, add_prefix_space false; specials: no
# unk_token, extra_special_tokens a dict, an added token as pad): HF -> GGUF
# -> HF -> GGUF, the two GGUFs byte-identical
for v in $($PY -c 'import json, sys; print(" ".join(json.load(open(sys.argv[1]))))' "$A/llama-hf/variants.json"); do
  rm -rf "$T/hv" && mkdir -p "$T/hv/in" && cp -r "$A/tiny-llama-hf" "$T/hv/in/"
  $PY "$SRC/tests/gguf/apply_variant.py" "$A/llama-hf/variants.json" "$v" "$T/hv/in/tiny-llama-hf"
  if "$TPCONV" convert "$T/hv/in/tiny-llama-hf" -o "$T/hv/a.gguf" --outtype f32 -q 2>"$T/err" &&
     "$TPCONV" convert "$T/hv/a.gguf" -o "$T/hv/out/tiny-llama-hf/" -q 2>>"$T/err" &&
     "$TPCONV" convert "$T/hv/out/tiny-llama-hf" -o "$T/hv/b.gguf" --outtype f32 -q 2>>"$T/err" &&
     cmp "$T/hv/a.gguf" "$T/hv/b.gguf" > "$T/diff" 2>&1 && [ ! -e "$T/hv/out/tiny-llama-hf/tokenizer.model" ]; then
    ok "llama-hf $v: tokenizer files rebuilt without tokenizer.model, GGUF -> HF -> GGUF byte-identical"
  else
    bad "llama-hf $v: GGUF -> HF -> GGUF byte-identical" "$(cat "$T/err" "$T/diff" | head -6)"
  fi
done
# a SentencePiece vocabulary gets a tokenizer.json beside tokenizer.model (transformers
# 5.12 cannot read a tokenizer.model without protobuf): the one transformers makes of
# the folder's own tokenizer.model and tokenizer_config.json (spm_json/, made in the
# forky chroot by make_spm_json.py): vocab, merges in its order, added tokens, pipeline
for fam in llama mistral mixtral phi3 gemma; do
  tj_same "$T/fp/tiny-$fam/tokenizer.json" "$SRC/tests/gguf/spm_json/$fam.json" > "$T/out" 2>&1
  [ $? = 0 ] && ok "$fam: tokenizer.json beside tokenizer.model is transformers' own ($(cat "$T/out"))" ||
    bad "$fam: tokenizer.json beside tokenizer.model is transformers' own" "$(tail -3 "$T/out")"
done
# a pre-tokenizer name tpconv writes no tokenizer.json for: weights and config, a warning
"$TPCONV" convert "$A/tiny-qwen2" -o "$T/dsk.gguf" --outtype f32 --gguf-pre deepseek-llm -q &&
  "$TPCONV" convert "$T/dsk.gguf" -o "$T/dsk/" 2>"$T/err" && grep -q "no tokenizer files written: tokenizer.ggml.pre 'deepseek-llm'" "$T/err" &&
  [ -f "$T/dsk/model.safetensors" ] && [ -f "$T/dsk/config.json" ] && [ ! -e "$T/dsk/tokenizer.json" ] &&
  [ ! -e "$T/dsk/tokenizer_config.json" ] &&
  ok "a pre-tokenizer not expressed: weights and config.json written, the tokenizer skipped with a warning" ||
  bad "a pre-tokenizer not expressed" "$(cat "$T/err")"
"$TPCONV" convert "$T/llama.gguf" -o "$T/keep/" --gguf-names -q && [ ! -e "$T/keep/config.json" ] &&
  table "$T/keep/model.safetensors" | grep -q '^blk\.0\.attn_q\.weight ' &&
  ok "--gguf-names keeps the GGUF names (and writes no config.json)" || bad "--gguf-names keeps the GGUF names"
"$TPCONV" inspect "$T/llama.gguf" | grep -q '^blk\.0\.attn_q\.weight ' &&
  ok "inspect shows the GGUF names" || bad "inspect shows the GGUF names"

# 3. shard straight from GGUF: facts from the metadata, the preset given or
#    from general.architecture; the merge equals the HF conversion; verify
for c in "llama 4 --preset llama" "llama 2" "mixtral 2" "qwen2-moe 2" "gemma 2"; do
  set -- $c; fam=$1 tp=$2; shift 2
  S="$T/set-$fam-$tp$*"
  if ! "$TPCONV" shard "$T/$fam.gguf" --tp "$tp" "$@" -o "$S" -v > "$T/out" 2>&1; then
    bad "$fam: shard from GGUF --tp $tp $*" "$(cat "$T/out")"; continue
  fi
  [ $# = 0 ] && ! grep -q "preset $fam, from the GGUF" "$T/out" && bad "$fam: preset from general.architecture" "$(cat "$T/out")"
  "$TPCONV" merge "$S" -o "$T/m.safetensors" -f -q 2>"$T/err" && table "$T/m.safetensors" > "$T/got" &&
    table "$T/o-$fam/model.safetensors" > "$T/want" && diff "$T/want" "$T/got" > "$T/diff" &&
    ok "$fam: shard from GGUF --tp $tp ${*:-(preset from the metadata)}, merged = the HF conversion" ||
    bad "$fam: shard --tp $tp merged = the HF conversion" "$(cat "$T/err" "$T/diff" | head -6)"
  "$TPCONV" verify --reference "$T/$fam.gguf" --shards "$S" > "$T/out" 2>&1 &&
    ok "$fam tp $tp: verify against the GGUF passes" || bad "$fam tp $tp: verify" "$(tail -3 "$T/out")"
done

# 4. a gguf-split set of a model: merged back byte-identical, read as one model
"$TPCONV" convert "$A/tiny-llama" -o "$T/sp.gguf" --outtype f32 --max-shard-size 20K -q &&
  nf=$(ls "$T"/sp-000*-of-*.gguf | wc -l) && [ "$nf" -ge 3 ] &&
  "$TPCONV" convert "$T/sp-00002-of-0000$nf.gguf" -o "$T/spm.gguf" -q && cmp -s "$T/spm.gguf" "$T/llama.gguf" &&
  ok "a gguf-split set of $nf files merges back byte-identical to the one-file GGUF" || bad "gguf-split set merged back" "$(ls "$T")"
"$TPCONV" convert "$T/sp-00001-of-0000$nf.gguf" -o "$T/sp.safetensors" -q && diff <(table "$T/sp.safetensors") <(table "$T/llama.safetensors") >/dev/null &&
  ok "a gguf-split set reads into Hugging Face form as the one file does" || bad "a gguf-split set into Hugging Face form"

# 5. llama-quantize's K-quants of tpconv's f16 GGUF (kquant/, make_quant_fixture.py):
#    every tensor dequantized as python3-gguf does, in GGUF order
#    (--gguf-names) and in Hugging Face form (attn_q/attn_k rows un-permuted
#    through the dequantizer); that HF model back to GGUF f32 and HF again
#    bit-exact (attn_q's 128 interleaved row pairs: a composite of 128 parts)
K="$SRC/tests/gguf/kquant"
for q in q4_k_m q6_k; do
  types=$(awk -v f="$q.gguf" '$1 == f {print $3}' "$K/expected.txt" | sort | uniq -c | awk '{printf "%s%s x%s", s, $2, $1; s=", "}')
  awk -v f="$q.gguf" '$1 == f {print $2, $4}' "$K/expected.txt" | sort > "$T/want"
  "$TPCONV" convert "$K/$q.gguf" -o "$T/kq.safetensors" --gguf-names -f -q 2>"$T/err" &&
    table "$T/kq.safetensors" | awk '{print $1, $4}' > "$T/got" && diff "$T/want" "$T/got" > "$T/diff" &&
    ok "$q ($types): every tensor equals gguf.quants.dequantize" || bad "$q equals gguf.quants.dequantize" "$(cat "$T/err" "$T/diff" | head -6)"
  awk -v f="$q.gguf" '$1 == f {print $5}' "$K/expected.txt" | sort > "$T/want"
  "$TPCONV" convert "$K/$q.gguf" -o "$T/kh-$q/" -q 2>"$T/err" &&
    table "$T/kh-$q/model.safetensors" | awk '{print $4}' | sort > "$T/got" && diff "$T/want" "$T/got" > "$T/diff" &&
    ok "$q in Hugging Face form: the dequantized values, Q/K rows un-permuted" || bad "$q in Hugging Face form" "$(cat "$T/err" "$T/diff" | head -6)"
done
for ot in f32 f16; do
  "$TPCONV" convert "$T/kh-q6_k" -o "$T/kh.gguf" --outtype $ot -f -q 2>"$T/err" &&
    "$TPCONV" convert "$T/kh.gguf" -o "$T/kh2.safetensors" --dtype $ot -f -q 2>>"$T/err" &&
    "$TPCONV" convert "$T/kh-q6_k/model.safetensors" -o "$T/kh1.safetensors" --dtype $ot -f -q 2>>"$T/err" &&
    diff <(table "$T/kh1.safetensors") <(table "$T/kh2.safetensors") > "$T/diff" &&
    ok "head_dim 128: HF -> GGUF $ot -> HF bit-exact" || bad "head_dim 128: HF -> GGUF $ot -> HF" "$(cat "$T/err" "$T/diff" | head -6)"
done

echo "1..$n"
[ "$failed" = 0 ]
