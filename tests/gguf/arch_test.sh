#!/usr/bin/env bash
# GGUF from a Hugging Face model (TAP): for each tiny model in tests/gguf/arch
# (one per family convert_hf_to_gguf.py converts; made by make_arch_fixtures.py
# in the forky chroot, with the reference's output as ref/FAMILY-OUTTYPE.txt,
# its KVs and tensors as gguf_arch_dump.py prints them), what
# tpc_gguf_from_hf lists (arch_dump) equals the reference's: every KV but the
# tokenizer's (gguf_vocab.c's, tested apart) with its type and value, in
# order (the tokenizer's are in the whole-file comparison below); every
# tensor's name, type, ne[] in order, and the sha256 of its bytes
# for F32, F16 and BF16 (Q8_0 blocks are the writer's: name, type, shape).
# Then each rope type (arch/rope/variants.json, ref/rope.sha256), refusals:
# an architecture the reference has no class for, yarn without its original
# context, a bad --outtype.
# Then whole files: `tpconv convert tiny-FAMILY -o X.gguf --outtype T` (the
# tokenizer read from the folder, tokenizer.ggml.pre named from
# tokenizer.json) has the sha256 of the reference's GGUF (ref/whole.sha256),
# byte for byte; --gguf-pre and its refusals. A Llama with tokenizer.json
# alone (tiny-llama-hf: LlamaHfVocab, with variants and refusals; tiny-llama3).
# usage: arch_test.sh ARCH_DUMP SRCDIR TPCONV
set -u
DUMP=$(realpath "$1") SRC=$(realpath "$2") TPCONV=$(realpath "$3")
A="$SRC/tests/gguf/arch"
. "$SRC/tests/lib/tap.sh"
tmpdir
# a dump without the tokenizer's KVs (a chat template's lines too) and alignment
no_tok() { awk '/^(kv|tensor|alignment) /{skip = /^kv tokenizer\./ || /^alignment /} !skip' "$@"; }
# the names of the whole files in ref/whole.sha256 (a lookup without a grep each)
declare -A WHOLE
while read -r sum name; do WHOLE[$name]=$sum; done < "$A/ref/whole.sha256"
# ref_sum FAMILY: the reference's f32 file's sha256 (ref/whole.sha256)
ref_sum() { echo "${WHOLE[$1-f32.gguf]:-}"; }
# is_ref DIR SHA256: DIR converts to an f32 GGUF with that sha256 (the error in $T/err)
# (each call's output a new file under $T/ref-out: no rm before each)
ref_n=0
is_ref() {
  ref_n=$((ref_n + 1)); [ -d "$T/ref-out" ] || mkdir "$T/ref-out"
  local w=$T/ref-out/$ref_n.gguf
  "$TPCONV" convert "$1" -o "$w" --outtype f32 -q 2> "$T/err" && sha256 "$w" && [ "$REPLY" = "$2" ]
}

# dump_diff DIR FAMILY OUTTYPE: arch_dump's KVs and tensors (the tokenizer's
# KVs aside) against the reference's ref/FAMILY-OUTTYPE.txt, the difference in
# $T/diff; 2 when arch_dump failed (its error in $T/err)
dump_diff() {
  no_tok "$A/ref/$2-$3.txt" | sed '/ Q8_0 /s/ sha256=.*/ sha256=-/' > "$T/ref"
  "$DUMP" "$1" "$3" > "$T/mine" 2> "$T/err" || return 2
  no_tok "$T/mine" | sed '/ Q8_0 /s/ sha256=.*/ sha256=-/' > "$T/mine2"
  diff "$T/ref" "$T/mine2" > "$T/diff"
}
# every reference dump that has no whole file in ref/whole.sha256 (a whole
# file byte-identical below says more; where one differs, its dump's
# difference is what the failure shows)
for dir in "$A"/tiny-*; do
  fam=${dir##*/tiny-}
  for ot in f32 f16 bf16 q8_0 auto; do
    [ -f "$A/ref/$fam-$ot.txt" ] || continue
    [ -n "${WHOLE[$fam-$ot.gguf]:-}" ] && continue
    dump_diff "$dir" "$fam" "$ot"
    case $? in
      0) ok "$fam $ot: KVs and tensors as convert_hf_to_gguf.py writes them" ;;
      2) bad "$fam $ot: arch_dump failed" "$(cat "$T/err")" ;;
      *) bad "$fam $ot: differs from convert_hf_to_gguf.py (< reference, > tpconv)" "$(head -20 "$T/diff")" ;;
    esac
  done
done

# a transformers 4 style config.json: no head_dim, rope_theta at the top level
# (make_arch_fixtures.py t4_config): head_dim as AutoConfig fills it in
mkdir -p "$T/t4" && cp -r "$A/tiny-llama" "$T/t4/"
python3 - "$T/t4/tiny-llama/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
del c["head_dim"], c["rope_parameters"]
c["rope_theta"] = 500000.0
c["torch_dtype"] = c.pop("dtype")
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
no_tok "$A/ref/llama-t4-f32.txt" > "$T/ref"
if "$DUMP" "$T/t4/tiny-llama" f32 > "$T/mine" 2> "$T/err" &&
   no_tok "$T/mine" | diff "$T/ref" - > "$T/diff"; then
  ok "llama with a transformers 4 config.json: head_dim filled in as AutoConfig does"
else
  bad "llama with a transformers 4 config.json" "$(cat "$T/err" "$T/diff" | head -20)"
fi

# rope types (issue 41 item 5): tiny-llama and tiny-phi3 with each
# arch/rope/variants.json config (make_arch_fixtures.py rope_variants; the
# legacy rope_scaling form of llama3 gives the same file), whole f32 files
# against ref/rope.sha256, the dump compared too where they differ
while read -r sum name; do
  v=${name#rope-}; v=${v%-f32.gguf}
  fam=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["family"])' "$A/rope/variants.json" "$v")
  rm -rf "$T/rope" && mkdir -p "$T/rope" && cp -r "$A/tiny-$fam" "$T/rope/" && rm -f "$T/w.gguf"
  python3 - "$A/rope/variants.json" "$v" "$T/rope/tiny-$fam/config.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))[sys.argv[2]]
c = json.load(open(sys.argv[3]))
c.update({k: x for k, x in v.items() if k != "family"})
if "rope_scaling" in v:
    c.pop("rope_parameters", None)
json.dump(c, open(sys.argv[3], "w"), indent=2)
PY
  if is_ref "$T/rope/tiny-$fam" "$sum"; then
    ok "rope $v: tpconv's GGUF is byte-identical to convert_hf_to_gguf.py's"
  else
    "$DUMP" "$T/rope/tiny-$fam" f32 2>&1 | no_tok | diff <(no_tok "$A/ref/rope-$v-f32.txt") - > "$T/diff"
    bad "rope $v: differs from convert_hf_to_gguf.py's (< reference, > tpconv)" "$(cat "$T/err" "$T/diff" | head -20)"
  fi
done < "$A/ref/rope.sha256"

# refuse DESC EXPECTED-MESSAGE DIR [OUTTYPE]
refuse() {
  local d=$1 msg=$2; shift 2
  "$DUMP" "$@" > /dev/null 2> "$T/err"; local rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$msg" "$T/err"; then ok "$d"; else bad "$d" "exit $rc" "$(cat "$T/err")"; fi
}
cp -r "$A/tiny-llama" "$T/m"
sed -i 's/"LlamaForCausalLM"/"FalconForCausalLM"/' "$T/m/config.json"
refuse "an architecture tpconv writes no GGUF for is refused by name" "architecture 'FalconForCausalLM' is not one tpconv writes GGUF for" "$T/m"
cp "$A/tiny-llama/config.json" "$T/m/config.json"
sed -i 's/"rope_type": "default"/"rope_type": "yarn", "factor": 4.0/' "$T/m/config.json"
refuse "yarn without its original context is refused by name" "rope_type 'yarn' without original_max_position_embeddings" "$T/m"
cp "$A/tiny-llama/config.json" "$T/m/config.json"
refuse "an unknown --outtype is refused" "--outtype 'q4_k_xl': f32, f16, bf16, q8_0, q4_0" "$T/m" q4_k_xl
sed -i 's/"num_hidden_layers": 2/"num_hidden_layers": 1/' "$T/m/config.json"
refuse "a layer past config.json's count is refused by tensor" "layer 1, but config.json has 1 layers" "$T/m" f32
# GPT-NeoX as transformers 5 writes it: rotary_pct only as
# rope_parameters.partial_rotary_factor; the same file. Neither: refused by name
rm -rf "$T/nx" && mkdir "$T/nx" && cp -r "$A/tiny-gpt-neox" "$T/nx/" && rm -f "$T/w.gguf"
nx=$T/nx/tiny-gpt-neox   # general.name comes from the folder's name
sed -i '/"rotary_pct"/d' "$nx/config.json"
if is_ref "$nx" "$(ref_sum gpt-neox)"; then
  ok "gpt-neox with rotary_pct only in rope_parameters (transformers 5): the reference's file"
else
  bad "gpt-neox with rotary_pct only in rope_parameters (transformers 5)" "$(cat "$T/err")"
fi
sed -i '/"partial_rotary_factor"/d' "$nx/config.json"
refuse "gpt-neox without rotary_pct is refused by name" "no number 'rotary_pct'" "$nx"
# whole files, byte for byte: tensors, KVs (tokenizer too), order, alignment
# (sanitizer build: every outtype of llama, q8_0 of the others: casts and the
# quantiser on every family's tensors)
while read -r sum name; do
  fo=${name%.gguf} ot=${name%.gguf}; fo=${fo%-*} ot=${ot##*-}
  [ "$SAN" = 1 ] && [ "$fo" != llama ] && [ "$ot" != q8_0 ] && [ -n "${WHOLE[$fo-q8_0.gguf]:-}" ] && continue
  [ -d "$T/whole" ] || mkdir "$T/whole"
  if ! "$TPCONV" convert "$A/tiny-$fo" -o "$T/whole/$name" --outtype "$ot" -q 2> "$T/err"; then
    bad "$fo $ot: tpconv convert failed" "$(cat "$T/err")"; continue
  fi
  sha256 "$T/whole/$name"; got=$REPLY
  if [ "$got" = "$sum" ]; then
    ok "$fo $ot: tpconv's GGUF is byte-identical to convert_hf_to_gguf.py's"
  else
    d=
    [ -f "$A/ref/$fo-$ot.txt" ] && { dump_diff "$A/tiny-$fo" "$fo" "$ot"; d=$(head -20 "$T/diff" "$T/err"); }
    bad "$fo $ot: tpconv's GGUF differs from convert_hf_to_gguf.py's" "sha256 $got, want $sum" "$d"
  fi
done < "$A/ref/whole.sha256"

# a Llama with tokenizer.json alone (issue 41 item 6): tiny-llama-hf above is
# the reference's LlamaHfVocab path, tiny-llama3 its GPT-2 path (llama-bpe);
# here tiny-llama-hf with each tokenizer_config.json of
# arch/llama-hf/variants.json (make_arch_fixtures.py llama_hf_variants),
# whole f32 files against ref/llama-hf.sha256
hfvariant() {
  python3 "$SRC/tests/gguf/apply_variant.py" "$A/llama-hf/variants.json" "$1" "$2"
}
while read -r sum name; do
  v=${name#llama-hf-}; v=${v%-f32.gguf}
  rm -rf "$T/hf" && mkdir -p "$T/hf" && cp -r "$A/tiny-llama-hf" "$T/hf/" && rm -f "$T/w.gguf"
  hfvariant "$v" "$T/hf/tiny-llama-hf"
  if is_ref "$T/hf/tiny-llama-hf" "$sum"; then
    ok "llama-hf $v: tpconv's GGUF is byte-identical to convert_hf_to_gguf.py's"
  else
    bad "llama-hf $v: differs from convert_hf_to_gguf.py's" "$(cat "$T/err")"
  fi
done < "$A/ref/llama-hf.sha256"
# hfrefuse DESC EXPECTED-MESSAGE PYTHON: tiny-llama-hf edited by PYTHON (t:
# tokenizer.json, c: tokenizer_config.json, None: the file removed) is
# refused, exit 3, the message and the file named, nothing written
hfrefuse() {
  rm -rf "$T/hf" "$T/hfo" && mkdir -p "$T/hf" "$T/hfo" && cp -r "$A/tiny-llama-hf" "$T/hf/"
  python3 - "$T/hf/tiny-llama-hf" "$3" <<'PY'
import json, os, sys
d = sys.argv[1]
t = json.load(open(d + "/tokenizer.json"))
c = json.load(open(d + "/tokenizer_config.json"))
exec(sys.argv[2])
for n, x in (("tokenizer.json", t), ("tokenizer_config.json", c)):
    if x is None:
        os.remove(os.path.join(d, n))
    else:
        json.dump(x, open(os.path.join(d, n), "w"), indent=2)
PY
  "$TPCONV" convert "$T/hf/tiny-llama-hf" -o "$T/hfo/w.gguf" 2> "$T/err"; local rc=$?
  if [ $rc -eq 3 ] && grep -qF -- "$2" "$T/err" && [ -z "$(ls -A "$T/hfo")" ]; then
    ok "$1"
  else
    bad "$1" "exit $rc" "$(cat "$T/err")" "$(ls -A "$T/hfo")"
  fi
}
hfrefuse "a tokenizer.json neither LlamaHfVocab's nor a BPE (Unigram) is refused naming the file" \
  "tokenizer.json': model: a BPE model with a vocab object is read (no other)" 't["model"]["type"] = "Unigram"'
hfrefuse "llama-hf: a special token tokenizer.json lacks (transformers would add it) is refused by key" \
  "tokenizer_config.json': pad_token names a token tokenizer.json does not have" 'c["pad_token"] = "<pad>"'
hfrefuse "llama-hf: an added token id past a hole (the reference shifts the list) is refused" \
  "added token '<|gap|>' leaves a hole after model.vocab's ids" \
  't["added_tokens"].append(dict(t["added_tokens"][-1], id=321, content="<|gap|>"))'
hfrefuse "llama-hf: an added token on another token's id is refused" \
  "added token '<|dup|>' has the id of another model.vocab token" \
  't["added_tokens"].append(dict(t["added_tokens"][-1], id=5, content="<|dup|>"))'
hfrefuse "llama-hf: model.vocab with a hole is refused" \
  "model.vocab: the id of '<0x00>' is not one of 0 .. its size - 1 once" 't["model"]["vocab"]["<0x00>"] = 400'
hfrefuse "llama-hf: bos_token left out (the class default) is refused" \
  "tokenizer_config.json': bos_token is not set" 'del c["bos_token"]'
hfrefuse "llama-hf: without tokenizer_config.json is refused naming it" \
  "tokenizer_config.json': tokenizer_config.json is missing" 'c = None'
hfrefuse "llama-hf: an added_tokens_decoder that is not tokenizer.json's added_tokens is refused" \
  "added_tokens_decoder: '320' is not tokenizer.json's added token of that id" \
  'c["added_tokens_decoder"] = {"320": {"content": "<|x|>", "special": True}}'

# a shard set to GGUF: merge finds the model's config and tokenizer among the
# set's companions (the set folder; an hf layout's rank 0 folder), general.name
# is the set folder's, the tensors in one file's order: the same bytes as the
# unsplit model's conversion (the sets are named like the model's folder)
"$TPCONV" convert "$A/tiny-llama" -o "$T/direct.gguf" -q 2> "$T/err" || bad "tiny-llama to GGUF" "$(cat "$T/err")"
# convert of the set (read merged, live) writes the same bytes
for lay in tpconv hf megatron; do
  rm -rf "$T/$lay" && mkdir "$T/$lay"
  if "$TPCONV" shard "$A/tiny-llama" --tp 2 --preset llama --layout $lay -o "$T/$lay/tiny-llama" -q 2> "$T/err" &&
     "$TPCONV" merge "$T/$lay/tiny-llama" -o "$T/$lay/m.gguf" -q 2>> "$T/err" && cmp -s "$T/direct.gguf" "$T/$lay/m.gguf" &&
     "$TPCONV" convert "$T/$lay/tiny-llama" -o "$T/$lay/c.gguf" -q 2>> "$T/err" && cmp -s "$T/direct.gguf" "$T/$lay/c.gguf"; then
    ok "a $lay set of tiny-llama (tp 2) merged or converted to GGUF: byte-identical to the direct conversion"
  else
    bad "a $lay set of tiny-llama (tp 2) merged or converted to GGUF" "$(cat "$T/err")" "$(cmp "$T/direct.gguf" "$T/$lay/m.gguf" 2>&1)" "$(cmp "$T/direct.gguf" "$T/$lay/c.gguf" 2>&1)"
  fi
done
# merge takes convert's GGUF output options: --outtype (and --gguf-pre) as convert
if "$TPCONV" convert "$A/tiny-llama" -o "$T/direct_q8.gguf" --outtype q8_0 -q 2> "$T/err" &&
   "$TPCONV" merge "$T/tpconv/tiny-llama" -o "$T/tpconv/m_q8.gguf" --outtype q8_0 -q 2>> "$T/err" &&
   cmp -s "$T/direct_q8.gguf" "$T/tpconv/m_q8.gguf"; then
  ok "merge SET -o x.gguf --outtype q8_0: byte-identical to convert --outtype q8_0"
else
  bad "merge --outtype q8_0" "$(cat "$T/err")" "$(cmp "$T/direct_q8.gguf" "$T/tpconv/m_q8.gguf" 2>&1)"
fi
"$TPCONV" merge "$T/tpconv/tiny-llama" -o "$T/tpconv/m_q8.safetensors" --outtype q8_0 2> "$T/err"; rc=$?
[ $rc -eq 2 ] && grep -qF -- "--outtype goes with a GGUF output" "$T/err" && [ ! -e "$T/tpconv/m_q8.safetensors" ] &&
  ok "merge --outtype to a safetensors output: refused (exit 2)" || bad "merge --outtype to safetensors" "exit $rc" "$(cat "$T/err")"
# a Megatron mp_rank tree without a manifest (its plan given), a plain DCP folder (read whole)
rm "$T/megatron/tiny-llama/tpconv-manifest.json"
rm -rf "$T/dcp" && mkdir "$T/dcp"
"$TPCONV" shard "$A/tiny-llama" --tp 2 --preset llama --layout dcp -o "$T/dcp/tiny-llama" -q 2> "$T/err" &&
  rm "$T/dcp/tiny-llama/tpconv-manifest.json"
for d in megatron dcp; do
  pre=""; [ $d = megatron ] && pre="--preset llama"
  rm -f "$T/$d/c.gguf" "$T/$d/m.gguf"
  if "$TPCONV" convert "$T/$d/tiny-llama" -o "$T/$d/c.gguf" $pre -q 2>> "$T/err" && cmp -s "$T/direct.gguf" "$T/$d/c.gguf" &&
     "$TPCONV" merge "$T/$d/tiny-llama" -o "$T/$d/m.gguf" $pre -q 2>> "$T/err" && cmp -s "$T/direct.gguf" "$T/$d/m.gguf"; then
    ok "a $d save of tiny-llama without a tpconv manifest converted or merged to GGUF: byte-identical to the direct conversion"
  else
    bad "a $d save without a manifest to GGUF" "$(cat "$T/err")" "$(cmp "$T/direct.gguf" "$T/$d/c.gguf" 2>&1)" "$(cmp "$T/direct.gguf" "$T/$d/m.gguf" 2>&1)"
  fi
done
# a TensorRT-LLM set keeps the engine's config.json, not the model's: refused, nothing written
rm -rf "$T/trt" && mkdir "$T/trt"
"$TPCONV" shard "$A/tiny-llama" --tp 2 --preset llama --layout trtllm -o "$T/trt/set" -q 2> "$T/err"
"$TPCONV" merge "$T/trt/set" -o "$T/trt/m.gguf" 2> "$T/err"; rc=$?
if [ $rc -eq 2 ] && grep -qF "its config.json is not the model's" "$T/err" && [ ! -e "$T/trt/m.gguf" ]; then
  ok "a trtllm set to GGUF is refused (exit 2: merge to a folder first), nothing written"
else
  bad "a trtllm set to GGUF is refused" "exit $rc" "$(cat "$T/err")"
fi
# ... and convert of it to safetensors is merge's
mkdir -p "$T/trt/c" "$T/trt/m"
if "$TPCONV" convert "$T/trt/set" -o "$T/trt/c/x.safetensors" -q 2> "$T/err" &&
   "$TPCONV" merge "$T/trt/set" -o "$T/trt/m/x.safetensors" -q 2>> "$T/err" && cmp -s "$T/trt/c/x.safetensors" "$T/trt/m/x.safetensors"; then
  ok "convert of a trtllm set to safetensors equals merge's"
else
  bad "convert of a trtllm set to safetensors equals merge's" "$(cat "$T/err")"
fi

# a llama whose Q/K permutation has more than 64 parts (8 heads of 32: 128
# row pairs in q, as every real model has hundreds): f16, bf16 and q8_0 read it
# through the composite reader; f16 and bf16 must be the f32 file's values cast
rm -rf "$T/wide" && mkdir -p "$T/wide" && cp "$A/tiny-llama/tokenizer"* "$T/wide/"
python3 - "$A/tiny-llama/config.json" "$T/wide" <<'PY'
import json, struct, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=256, num_attention_heads=8, num_key_value_heads=8, head_dim=32, num_hidden_layers=1,
         intermediate_size=64, dtype="float32")
json.dump(c, open(sys.argv[2] + "/config.json", "w"))
shapes = {"model.embed_tokens.weight": (320, 256), "lm_head.weight": (320, 256), "model.norm.weight": (256,)}
for n, sh in (("self_attn.q_proj", (256, 256)), ("self_attn.k_proj", (256, 256)), ("self_attn.v_proj", (256, 256)),
              ("self_attn.o_proj", (256, 256)), ("mlp.gate_proj", (64, 256)), ("mlp.up_proj", (64, 256)),
              ("mlp.down_proj", (256, 64)), ("input_layernorm", (256,)), ("post_attention_layernorm", (256,))):
    shapes["model.layers.0.%s.weight" % n] = sh
hdr, data, x = {}, bytearray(), 1
for n, sh in shapes.items():
    k = sh[0] * (sh[1] if len(sh) > 1 else 1)
    vals = []
    for _ in range(k):
        x = (x * 1103515245 + 12345) & 0x7fffffff
        vals.append((x / 2**31 - 0.5) * 0.6)
    hdr[n] = {"dtype": "F32", "shape": list(sh), "data_offsets": [len(data), len(data) + 4 * k]}
    data += struct.pack("<%df" % k, *vals)
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2] + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
PY
ok_all=1 msgs=""
for ot in f32 f16 bf16 q8_0; do
  rm -f "$T/wide-$ot.gguf"
  "$TPCONV" convert "$T/wide" -o "$T/wide-$ot.gguf" --outtype $ot -q 2> "$T/err" || { ok_all=0; msgs="$msgs $ot: $(cat "$T/err")"; }
done
for ot in f16 bf16; do
  [ -f "$T/wide-$ot.gguf" ] && "$TPCONV" diff "$T/wide-f32.gguf" "$T/wide-$ot.gguf" --cast -q 2> "$T/err" ||
    { ok_all=0; msgs="$msgs $ot differs from f32 cast: $(cat "$T/err")"; }
done
if [ $ok_all = 1 ]; then
  ok "a Q/K permutation of more than 64 parts converts to f16/bf16/q8_0, values the f32 file's cast"
else
  bad "a Q/K permutation of more than 64 parts converts to f16/bf16/q8_0" "$msgs"
fi

# --gguf-pre: the name given is written; it needs a GGUF output; a
# pre-tokenizer tpconv cannot map is refused naming the key, nothing written
rm -f "$T/w.gguf"
if "$TPCONV" convert "$A/tiny-qwen2" -o "$T/w.gguf" --gguf-pre stablelm2 -q 2> "$T/err" &&
   grep -q stablelm2 "$T/w.gguf"; then
  ok "--gguf-pre NAME sets tokenizer.ggml.pre"
else
  bad "--gguf-pre NAME sets tokenizer.ggml.pre" "$(cat "$T/err")"
fi
"$TPCONV" convert "$A/tiny-qwen2" -o "$T/w.safetensors" --gguf-pre qwen2 2> "$T/err"; rc=$?
if [ $rc -eq 2 ] && grep -qF -- "--gguf-pre goes with a GGUF output" "$T/err"; then
  ok "--gguf-pre with another output format is a usage error"
else
  bad "--gguf-pre with another output format is a usage error" "exit $rc" "$(cat "$T/err")"
fi
rm -rf "$T/m" && cp -r "$A/tiny-qwen2" "$T/m"
sed -i 's/"Isolated"/"Removed"/' "$T/m/tokenizer.json"
rm -rf "$T/r" && mkdir "$T/r"
"$TPCONV" convert "$T/m" -o "$T/r/w.gguf" 2> "$T/err"; rc=$?
if [ $rc -eq 3 ] && grep -qF "tokenizer.ggml.pre" "$T/err" && grep -qF "tokenizer.json" "$T/err" &&
   [ -z "$(ls -A "$T/r")" ]; then
  ok "an unmapped BPE pre-tokenizer is refused (exit 3, tokenizer.ggml.pre), nothing written"
else
  bad "an unmapped BPE pre-tokenizer is refused" "exit $rc" "$(cat "$T/err")" "$(ls -A "$T/r")"
fi
# Granite without its four multipliers in config.json: the reference writes
# each as GraniteConfig's default 1.0 (make_arch_fixtures.py granite_nomul)
rm -rf "$T/nm" && mkdir "$T/nm" && cp -r "$A/tiny-granite" "$T/nm/" && rm -f "$T/w.gguf"
python3 - "$T/nm/tiny-granite/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
for k in ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling"):
    del c[k]
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
if is_ref "$T/nm/tiny-granite" "$(cut -d' ' -f1 "$A/ref/granite-nomul.sha256")"; then
  ok "granite without its multipliers: each 1.0, the reference's file"
else
  bad "granite without its multipliers" "$(cat "$T/err")"
fi

# DeepSeek-V3 (the deepseek-v3 record; tiny-deepseek): with q_lora_rank null
# (q_proj, as V2-Lite; make_arch_fixtures.py deepseek_noqlora, its own
# weights) the reference's file; a multi-token-prediction layer past
# num_hidden_layers left out, as the reference's skip_mtp (the same file);
# kv_b_proj that is not num_key_value_heads heads of qk_nope_head_dim +
# v_head_dim rows refused by tensor; a config.json without
# first_k_dense_replace (DeepseekV3Config's default 3 to the reference's
# AutoConfig) refused by name
if is_ref "$A/noqlora/tiny-deepseek" "$(cut -d' ' -f1 "$A/ref/deepseek-noqlora.sha256")"; then
  ok "deepseek with q_lora_rank null (q_proj): the reference's file"
else
  bad "deepseek with q_lora_rank null (q_proj)" "$(cat "$T/err")"
fi
rm -rf "$T/ds" && mkdir "$T/ds" && cp -r "$A/tiny-deepseek" "$T/ds/"
python3 - "$T/ds/tiny-deepseek/model.safetensors" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n)); data = f.read()
for name in ("model.layers.3.eh_proj.weight", "model.layers.3.enorm.weight"):
    h[name] = {"dtype": "F32", "shape": [32], "data_offsets": [len(data), len(data) + 128]}
    data += b"\0" * 128
b = json.dumps(h).encode(); b += b" " * (-len(b) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(b)) + b + data)
PY
if is_ref "$T/ds/tiny-deepseek" "$(ref_sum deepseek)"; then
  ok "deepseek with a multi-token-prediction layer 3 (num_hidden_layers 3): left out, the reference's file"
else
  bad "deepseek with a multi-token-prediction layer" "$(cat "$T/err")"
fi
cp "$A/tiny-deepseek/config.json" "$T/ds/tiny-deepseek/config.json"
sed -i 's/"v_head_dim": 16/"v_head_dim": 8/' "$T/ds/tiny-deepseek/config.json"
refuse "deepseek: kv_b_proj not heads x (qk_nope_head_dim + v_head_dim) rows is refused by tensor" \
  "not 4 heads of qk_nope_head_dim + v_head_dim = 24 rows" "$T/ds/tiny-deepseek" f32
cp "$A/tiny-deepseek/config.json" "$T/ds/tiny-deepseek/config.json"
sed -i '/"first_k_dense_replace"/d' "$T/ds/tiny-deepseek/config.json"
refuse "deepseek without first_k_dense_replace is refused by name" "config.json has none of first_k_dense_replace" "$T/ds/tiny-deepseek" f32

# SmolLM3: llama.cpp reads every 4th layer as one without RoPE and no window,
# and convert_hf_to_gguf.py writes no key for either: tpconv refuses a
# config.json that says otherwise (exit 3, naming the member and the layer),
# nothing written; the same layers said by no_rope_layer_interval 4 alone: the
# reference's file
smol() { # DESC EXPECTED-MESSAGE PYTHON (c: config.json)
  rm -rf "$T/sm" "$T/smo" && mkdir -p "$T/sm" "$T/smo" && cp -r "$A/tiny-smollm3" "$T/sm/"
  python3 - "$T/sm/tiny-smollm3/config.json" "$3" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
  "$TPCONV" convert "$T/sm/tiny-smollm3" -o "$T/smo/w.gguf" --outtype f32 2> "$T/err"; local rc=$?
  if [ -z "$2" ]; then
    want=$(ref_sum smollm3)
    [ $rc -eq 0 ] && [ "$(sha256sum "$T/smo/w.gguf" | cut -d' ' -f1)" = "$want" ] && ok "$1" || bad "$1" "exit $rc" "$(cat "$T/err")"
  elif [ $rc -eq 3 ] && grep -qF -- "$2" "$T/err" && [ -z "$(ls -A "$T/smo")" ]; then
    ok "$1"
  else
    bad "$1" "exit $rc" "$(cat "$T/err")" "$(ls -A "$T/smo")"
  fi
}
smol "smollm3: no_rope_layers other than every 4th is refused by layer" \
  "no_rope_layers leaves layer 1 without RoPE, but a GGUF of architecture 'smollm3' is read with every 4-th layer without it" \
  'c["no_rope_layers"] = [1, 0, 1, 1]'
smol "smollm3: no_rope_layer_interval 2 without the list is refused" \
  "no_rope_layer_interval leaves layer 1 without RoPE" 'del c["no_rope_layers"]; c["no_rope_layer_interval"] = 2'
smol "smollm3: no_rope_layers shorter than the layers is refused" \
  "no_rope_layers has 3 entries for 4 layers" 'c["no_rope_layers"] = [1, 1, 1]'
smol "smollm3: a sliding layer (layer_types) is refused" \
  "layer_types makes layer 3 slide, but a GGUF of architecture 'smollm3' has no sliding window" \
  'c.update(use_sliding_window=True, sliding_window=4, layer_types=["full_attention"] * 3 + ["sliding_attention"])'
smol "smollm3: use_sliding_window without layer_types is refused" \
  "use_sliding_window without layer_types" 'c.update(use_sliding_window=True, sliding_window=4); del c["layer_types"]'
smol "smollm3: every 4th layer by no_rope_layer_interval alone (and a window no layer uses): the reference's file" "" \
  'del c["no_rope_layers"]; c["sliding_window"] = 4'
# Llama 4 text: llama.cpp's llama4 assumes every 4th layer without RoPE
# too, chunks of 8192 and its temperature tuning (floor 8192, scale 0.1),
# which no key says: a config.json that says otherwise is refused by name
# (exit 3), nothing written. l4 DESC EXPECTED PYTHON (c: config.json)
l4() {
  rm -rf "$T/l4" "$T/l4o" && mkdir -p "$T/l4" "$T/l4o" && cp -r "$A/tiny-llama4" "$T/l4/"
  python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); exec(sys.argv[2]); json.dump(c, open(sys.argv[1], "w"))' \
    "$T/l4/tiny-llama4/config.json" "$3"
  "$TPCONV" convert "$T/l4/tiny-llama4" -o "$T/l4o/w.gguf" --outtype f32 2> "$T/err"; local rc=$?
  if [ $rc -eq 3 ] && grep -qF -- "$2" "$T/err" && [ -z "$(ls -A "$T/l4o")" ]; then
    ok "$1"
  else
    bad "$1" "exit $rc" "$(cat "$T/err")"
  fi
}
l4 "llama4: no_rope_layers other than every 4th is refused by layer (exit 3), nothing written" \
  "no_rope_layers leaves layer 1 without RoPE, but a GGUF of architecture 'llama4' is read with every 4-th layer without it" \
  'c["no_rope_layers"] = [1, 0, 1, 1]'
l4 "llama4: attention_chunk_size other than llama.cpp's 8192 is refused (exit 3)" \
  "'attention_chunk_size' is not 8192, which a GGUF of architecture 'llama4' is read with" 'c["attention_chunk_size"] = 4096'
l4 "llama4: attn_temperature_tuning false is refused (exit 3): llama.cpp tunes always" \
  "'attn_temperature_tuning' is not true" 'c["attn_temperature_tuning"] = False'

# Seed-OSS read back: config.json says which biases the GGUF holds
# (SeedOssConfig's defaults would add q/k/v biases and drop o_proj's):
# tiny-seed-oss as it is (q/k/v, no o_proj bias), then with o_proj biases and
# without the q/k/v ones, each GGUF -> HF tensor for tensor the model's
rm -rf "$T/so" && mkdir -p "$T/so/b" && cp -r "$A/tiny-seed-oss" "$T/so/a"
cp "$A/tiny-seed-oss/"*.json "$T/so/b/"
python3 - "$T/so/a/model.safetensors" "$T/so/b" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n)); d = f.read()
t = {k: (v, d[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items() if k != "__metadata__"}
t = {k: x for k, x in t.items() if not k.endswith(("q_proj.bias", "k_proj.bias", "v_proj.bias"))}
for l in (0, 1):  # o_proj biases of hidden 32, values from the q biases' bytes
    t["model.layers.%d.self_attn.o_proj.bias" % l] = ({"dtype": "F32", "shape": [32]}, bytes(range(l, l + 128)))
hdr, data = {}, b""
for k in sorted(t):
    v, b = t[k]
    hdr[k] = {"dtype": v["dtype"], "shape": v["shape"], "data_offsets": [len(data), len(data) + len(b)]}
    data += b
j = json.dumps(hdr).encode(); j += b" " * (-len(j) % 8)
open(sys.argv[2] + "/model.safetensors", "wb").write(struct.pack("<Q", len(j)) + j + data)
c = json.load(open(sys.argv[2] + "/config.json"))
c.update(attention_bias=False, attention_out_bias=True)
json.dump(c, open(sys.argv[2] + "/config.json", "w"), indent=2)
PY
for v in a:true:false b:false:true; do
  d=${v%%:*} qb=${v#*:} qb=${qb%:*} ob=${v##*:}
  if "$TPCONV" convert "$T/so/$d" -o "$T/so/$d.gguf" --outtype f32 -q 2> "$T/err" &&
     "$TPCONV" convert "$T/so/$d.gguf" -o "$T/so/$d-hf/" -q 2>> "$T/err" &&
     grep -q "\"attention_bias\": *$qb," "$T/so/$d-hf/config.json" &&
     grep -q "\"attention_out_bias\": *$ob," "$T/so/$d-hf/config.json" &&
     "$TPCONV" diff "$T/so/$d" "$T/so/$d-hf" -q 2>> "$T/err"; then
    ok "seed-oss read back from GGUF: attention_bias $qb, attention_out_bias $ob, the tensors the model's"
  else
    bad "seed-oss read back from GGUF (attention_bias $qb, attention_out_bias $ob)" "$(cat "$T/err")" "$(cat "$T/so/$d-hf/config.json" 2>&1 | head -12)"
  fi
done

# a family's tokenizer_config.json variant (make_arch_fixtures.py
# TOK_CFG_VARIANTS): tpconv's f32 GGUF is the reference's (ref/FAM-NAME.sha256),
# and GGUF -> HF -> GGUF gives it back. tokcfg FAM NAME PYTHON [FILE] (c: the
# dict of FILE, tokenizer_config.json unless given)
tokcfg() {
  rm -rf "$T/tc" && mkdir -p "$T/tc/rt" && cp -r "$A/tiny-$1" "$T/tc/"
  python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); exec(sys.argv[2]); json.dump(c, open(sys.argv[1], "w"), indent=2)' \
    "$T/tc/tiny-$1/${4:-tokenizer_config.json}" "$3"
  local want; want=$(cut -d' ' -f1 "$A/ref/$1-$2.sha256")
  if "$TPCONV" convert "$T/tc/tiny-$1" -o "$T/tc/w.gguf" --outtype f32 -q 2> "$T/err" &&
     [ "$(sha256sum "$T/tc/w.gguf" | cut -d' ' -f1)" = "$want" ] &&
     "$TPCONV" convert "$T/tc/w.gguf" -o "$T/tc/rt/tiny-$1/" -q 2>> "$T/err" &&
     { [ ! -f "$T/tc/rt/tiny-$1/tokenizer.model" ] || rm "$T/tc/rt/tiny-$1/tokenizer.json"; } &&
     "$TPCONV" convert "$T/tc/rt/tiny-$1" -o "$T/tc/back.gguf" --outtype f32 -q 2>> "$T/err" &&
     cmp -s "$T/tc/w.gguf" "$T/tc/back.gguf"; then
    ok "$1 $2: the reference's file, and GGUF -> HF -> GGUF gives it back"
  else
    bad "$1 $2: the reference's file, GGUF -> HF -> GGUF" "$(cat "$T/err")"
  fi
}
# GLM-4 without bos_token (as GLM-4-0414's tokenizer_config.json): bos is set by
# <|endoftext|>'s text after eot and unk, and left out of the rebuilt folder again
tokcfg glm4 nobos 'c.pop("bos_token")'
# ERNIE 4.5 with add_prefix_space: written after the special ids, and rebuilt
tokcfg ernie4_5 nospace 'c["add_prefix_space"] = False'
# EXAONE 4 without a window (sliding_window null): no window keys, and the
# rebuilt config.json says null (Exaone4Config's default is 4096)
tokcfg exaone4 nowindow 'c["sliding_window"] = None' config.json
grep -Eq '"sliding_window": *null' "$T/tc/rt/tiny-exaone4/config.json" &&
  ok "exaone4 without a window: the rebuilt config.json's sliding_window is null" ||
  bad "exaone4 without a window: the rebuilt sliding_window" "$(cat "$T/tc/rt/tiny-exaone4/config.json" 2>&1)"
# Gemma 3 with final_logit_softcapping 0: no key, as the reference's `if v :=`
# (null gives the same file); read back without it (Gemma3TextConfig's None)
tokcfg gemma3 nosoftcap 'c["final_logit_softcapping"] = 0.0' config.json
# EXAONE 4 without layer_types: the pattern from sliding_window_pattern (an int:
# the reference's file, as Exaone4Config builds layer_types from it), its
# 'LLLG' form refused by name (the config class fails on it)
rm -rf "$T/ex" && mkdir "$T/ex" && cp -r "$A/tiny-exaone4" "$T/ex/" && rm -f "$T/w.gguf"
python3 - "$T/ex/tiny-exaone4/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); del c["layer_types"]; json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
if is_ref "$T/ex/tiny-exaone4" "$(ref_sum exaone4)"; then
  ok "exaone4 without layer_types: sliding_window_pattern 4's layers, the reference's file"
else
  bad "exaone4 without layer_types" "$(cat "$T/err")"
fi
sed -i 's/"sliding_window_pattern": 4/"sliding_window_pattern": "LLLG"/' "$T/ex/tiny-exaone4/config.json"
refuse "exaone4: a sliding_window_pattern string without layer_types is refused by name" "'sliding_window_pattern' is not an integer" "$T/ex/tiny-exaone4"
# GLM-4 without partial_rotary_factor in config.json: Glm4Config's 0.5, the same file
rm -rf "$T/g4" && mkdir "$T/g4" && cp -r "$A/tiny-glm4" "$T/g4/" && rm -f "$T/w.gguf"
sed -i '/"partial_rotary_factor"/d' "$T/g4/tiny-glm4/config.json"
if ! grep -q partial_rotary "$T/g4/tiny-glm4/config.json" && is_ref "$T/g4/tiny-glm4" "$(ref_sum glm4)"; then
  ok "glm4 without partial_rotary_factor: Glm4Config's 0.5, the reference's file"
else
  bad "glm4 without partial_rotary_factor" "$(cat "$T/err")"
fi
# GLM-4 whose tokenizer has no <|user|> (Glm4Model.set_vocab's eot): refused
# naming it (the reference fails), nothing written
cp -r "$A/tiny-glm4/." "$T/g4/tiny-glm4/"
sed -i 's/<|user|>/<|usr|>/g' "$T/g4/tiny-glm4/tokenizer.json"
rm -rf "$T/g4/o" && mkdir "$T/g4/o"
"$TPCONV" convert "$T/g4/tiny-glm4" -o "$T/g4/o/w.gguf" 2> "$T/err"; rc=$?
if [ $rc -eq 3 ] && grep -qF "added_tokens: no '<|user|>'" "$T/err" && [ -z "$(ls -A "$T/g4/o")" ]; then
  ok "glm4 without <|user|> among the added tokens: refused naming it (exit 3), nothing written"
else
  bad "glm4 without <|user|>" "exit $rc" "$(cat "$T/err")"
fi
# ERNIE 4.5 as its remote code names it (Ernie4_5_ForCausalLM: ernie. names,
# fused qkv_proj and up_gate_proj the reference splits): refused by name
rm -rf "$T/m" && cp -r "$A/tiny-ernie4_5" "$T/m"
sed -i 's/"Ernie4_5ForCausalLM"/"Ernie4_5_ForCausalLM"/' "$T/m/config.json"
refuse "ernie4_5's remote-code architecture is refused by name" "architecture 'Ernie4_5_ForCausalLM' is not one tpconv writes GGUF for" "$T/m"
# Phi without partial_rotary_factor in config.json (at the top and in
# rope_parameters): the reference reads PhiConfig's 0.5, the same bytes as
# tiny-phi's f32 file; rebuilt with it
tokcfg phi nopct 'c.pop("partial_rotary_factor"); c["rope_parameters"].pop("partial_rotary_factor")' config.json
# a fraction the ROPE_PCT rules cannot use (the same reader for Phi's, GLM-4's,
# GPT-NeoX's and Cohere 2's): outside (0, 1], or not a number, refused by name
for v in 1.5 '"0.5"'; do
  rm -rf "$T/pp" && cp -r "$A/tiny-phi" "$T/pp"
  python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["partial_rotary_factor"] = c["rope_parameters"]["partial_rotary_factor"] = json.loads(sys.argv[2])
json.dump(c, open(sys.argv[1], "w"), indent=2)' "$T/pp/config.json" "$v"
  refuse "phi with partial_rotary_factor $v is refused by name" \
    "'partial_rotary_factor' is not $([ "$v" = 1.5 ] && echo "in (0, 1]" || echo "a number")" "$T/pp"
done

# Cohere 2: config.json without logit_scale (the reference would write
# Cohere2Config's default 0.0625) and an untied lm_head (Cohere2Model has no
# output tensor to map it to) are refused by name
rm -rf "$T/co" && cp -r "$A/tiny-cohere2" "$T/co"
sed -i '/"logit_scale"/d' "$T/co/config.json"
refuse "cohere2 without logit_scale is refused by name" "config.json has none of logit_scale" "$T/co"
cp "$A/tiny-cohere2/config.json" "$T/co/config.json"
python3 - "$T/co/model.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); d = b[8 + n:]
e = h["model.embed_tokens.weight"]; x0, x1 = e["data_offsets"]
h["lm_head.weight"] = dict(e, data_offsets=[len(d), len(d) + x1 - x0])
j = json.dumps(h).encode(); j += b" " * (-len(j) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(j)) + j + d + d[x0:x1])
PY
refuse "cohere2 with an untied lm_head is refused by name" "convert_hf_to_gguf.py has no GGUF name for this tensor of a Cohere2ForCausalLM model" "$T/co"
# ... and layer_types other than three sliding layers in four, which llama.cpp
# assumes for cohere2 (the reference writes no pattern): refused naming the layer
cp "$A/tiny-cohere2/model.safetensors" "$T/co/model.safetensors"
sed -i '0,/"full_attention"/s//"sliding_attention"/' "$T/co/config.json"
refuse "cohere2 with another sliding-window pattern is refused naming the layer" "layer_types makes layer 3 slide, but a GGUF of architecture 'cohere2' is read with every layer sliding but each 4-th" "$T/co"
# without layer_types the layers are sliding_window_pattern's (Cohere2Config's
# period, 4 when absent), read as the sliding_window_pattern key's rule reads
# them: absent or 4 gives the reference's file, 2 is refused naming layer 1, a
# string (EXAONE 4's 'LLLG' form, which Cohere2Config fails on) by name
rm -rf "$T/cw" && mkdir "$T/cw" && cp -r "$A/tiny-cohere2" "$T/cw/"  # the folder's name is general.name
want=$(ref_sum cohere2)
for v in none 4 2 '"LLLG"'; do
  python3 - "$A/tiny-cohere2/config.json" "$T/cw/tiny-cohere2/config.json" "$v" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); del c["layer_types"]
if sys.argv[3] != "none":
    c["sliding_window_pattern"] = json.loads(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
  rm -f "$T/w.gguf"
  "$TPCONV" convert "$T/cw/tiny-cohere2" -o "$T/w.gguf" --outtype f32 -q 2> "$T/err"; rc=$?
  case $v in
  none|4) [ $rc -eq 0 ] && [ "$(sha256sum "$T/w.gguf" | cut -d' ' -f1)" = "$want" ] ;;
  2) [ $rc -eq 3 ] && grep -qF "sliding_window_pattern makes layer 1 attend globally, but a GGUF of architecture 'cohere2' is read with every layer sliding but each 4-th" "$T/err" ;;
  *) [ $rc -eq 3 ] && grep -qF "'sliding_window_pattern' is not an integer" "$T/err" ;;
  esac && ok "cohere2 without layer_types, sliding_window_pattern $v: $([ $rc -eq 0 ] && echo "the reference's file" || echo refused)" ||
    bad "cohere2 without layer_types, sliding_window_pattern $v" "exit $rc" "$(cat "$T/err")"
done

# Families added as records alone (lib/tpc_family.c, lib/tpc_family_gguf.c):
# beyond their GGUF above, shard with the preset their config.json names,
# merge back byte for byte, verify's model check at tp 2 and 4 (OLMo 2: post
# norms, q/k norms over the whole projection; Gemma 2: sandwich norms, 1 + w,
# the embedding scale, sliding layers of a 4-token window, softcaps;
# Qwen3-MoE: per-head q/k norms, experts without a shared one; OLMoE:
# whole-projection q/k norms before the experts; StarCoder2: LayerNorms and
# biases everywhere, a plain gelu-tanh MLP; OLMo 3: OLMo 2 with three sliding
# layers of a 4-token window then a full one; Granite: its four multipliers;
# SmolLM3: four layers, the fourth without RoPE, a tied head; Seed-OSS: q/k/v
# biases, head_dim 16 not hidden / heads; GLM-4: sandwich norms, a fused
# gate_up_proj, half of each head rotated in interleaved pairs, q/k/v biases;
# ERNIE 4.5: LLaMA's with the rope in interleaved pairs, a tied head; EXAONE 4:
# post norms, per-head q/k norms, three sliding layers of a 4-token window then
# a global one without rope; Phi: attention and MLP in parallel under one
# LayerNorm, partial RoPE, lm_head's bias split with it; Cohere 2: the same
# under a weight-only LayerNorm, interleaved RoPE on three sliding layers in
# four, none on the full one, logit_scale; Granite-MoE: Granite's multipliers
# around experts stacked in input_linear and output_linear, routed by the
# softmax of the top-k logits; and with a shared expert added ungated; GLM-4.5
# MoE: a dense layer 0, then a sigmoid router with its correction bias over 2
# groups of experts beside a shared expert, per-head q/k norms, partial
# rotate-half RoPE, and a next-token-prediction layer verify leaves out;
# DeepSeek-V3 (tiny-deepseek, the deepseek-v3 preset): MLA with q's low rank,
# a dense first layer, sigmoid-routed grouped experts with a shared one, yarn;
# its swapped slice is q_b_proj's two halves, o_proj's slice being smaller;
# gpt-oss: attention sinks, the yarn rope, a sliding layer, a router bias,
# experts stored [in, out] with gate and up interleaved and their biases,
# the clamped SwiGLU;
# Phi-3.5-MoE: LayerNorms with biases, lm_head's bias split with it, the
# sparsemixer router; ERNIE 4.5 MoE: a dense layer 0, then the softmax's
# top-k chosen with moe_statics' correction bias beside a shared expert;
# Llama 4 text: MoE every second layer with experts stacked [in, out] as
# [gate | up] under a sigmoid router on their input and a shared expert,
# dense MLPs between, L2 q/k norms, NoPE layer 3, chunked attention), and
# Qwen3-Next: gated DeltaNet layers 0 and 2 split by key-head groups, gated
# full attention on layers 1 and 3 (its swapped slice q_proj's two heads,
# each a query and its gate), zero-centred norms, experts beside a gated
# shared expert), and
# GGUF -> HF -> GGUF byte for byte (a rebuilt SentencePiece folder without the
# tokenizer.json written beside tokenizer.model, which the reference's
# SpecialVocab would read more ids from: hf_test.sh checks that one).
FAMS="olmo2 olmo3 gemma2 qwen3-moe olmoe starcoder2 granite smollm3 seed-oss glm4 ernie4_5 exaone4 phi cohere2 granitemoe granitemoeshared glm4-moe gpt-oss phimoe ernie4_5-moe deepseek llama4 granitemoehybrid granitemoehybrid-dense qwen3-next"
# sanitizer build: one family for each kind of layer part the others repeat
# (post norms, sandwich norms and softcaps, MoE, LayerNorm with biases,
# parallel blocks, fused gate_up with partial rotary, the sigmoid router,
# sinks with interleaved experts, the sparsemixer, MLA, Llama 4's experts,
# Mamba-2, the gated DeltaNet); every record's forward runs under the
# sanitizers in the test_verify* unit tests
[ "$SAN" = 1 ] && FAMS="olmo2 gemma2 qwen3-moe starcoder2 phi cohere2 glm4 glm4-moe gpt-oss phimoe deepseek llama4 granitemoehybrid qwen3-next"
for fam in $FAMS; do
  O="$A/tiny-$fam"
  # sl: the layer whose attention slices are swapped, pl: one whose attention passes
  rec=$fam sl=1 pl=0
  [ $fam = deepseek ] && rec=deepseek-v3
  # Granite 4: layers 0 and 2 Mamba-2 mixers, 1 and 3 attention; -dense has
  # two groups of B and C, which tp 4 does not divide (refused below)
  case $fam in granitemoehybrid*) rec=granitemoehybrid sl=3 pl=1 ;; esac
  qn=model.layers.$sl.self_attn.q_proj.weight on="model.layers.$sl.self_attn.o_proj.weight|model.layers.$sl.self_attn.dense.weight"
  [ $fam = deepseek ] && qn=model.layers.1.self_attn.q_b_proj.weight on=""
  [ $fam = qwen3-next ] && on=""   # q_proj's slice is twice o_proj's (a gate per query)
  IFS= read -r -d '' cfg < "$O/config.json"; [[ $cfg =~ \"num_hidden_layers\":\ *([0-9]+) ]]; nl=${BASH_REMATCH[1]:-?}
  tps="2 4"; [ "$SAN" = 1 ] || [ $fam = granitemoehybrid-dense ] && tps=2   # sanitizer build: one split
  for tp in $tps; do
    rm -rf "$T/o$tp" "$T/o$tp.safetensors"
    if "$TPCONV" shard "$O" --tp $tp -o "$T/o$tp" -q 2> "$T/err" &&
       grep -q "\"name\": *\"$rec\"" "$T/o$tp/tpconv-manifest.json" &&
       "$TPCONV" merge "$T/o$tp" -o "$T/o$tp.safetensors" -q 2>> "$T/err" && cmp -s "$O/model.safetensors" "$T/o$tp.safetensors" &&
       "$TPCONV" verify --reference "$O" --shards "$T/o$tp" > "$T/out" 2>> "$T/err" &&
       grep -q ", $nl layers," "$T/err"; then
      ok "$fam tp $tp: the preset from config.json, merged back byte-identical, verify's model check passes"
    else
      bad "$fam tp $tp: shard, merge, verify" "$(cat "$T/err")" "$(tail -5 "$T/out")"
    fi
  done
  # rank 1's slices of layer sl's q_proj and o_proj (Phi: dense) swapped (as
  # many bytes each; none named: the two halves of q's slice): verify fails,
  # naming layer sl, and layer pl still passes
  python3 - "$T/o2/model_tp01_pp00.safetensors" "$qn" "$on" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "r+b"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
out = [k for k in sys.argv[3].split("|") if k in h]
(a0, a1) = h[sys.argv[2]]["data_offsets"]
if out:
    (b0, b1) = h[out[0]]["data_offsets"]
else:
    (a0, a1), (b0, b1) = (a0, (a0 + a1) // 2), ((a0 + a1) // 2, a1)
assert a1 - a0 == b1 - b0
f.seek(8 + n + a0); x = f.read(a1 - a0); f.seek(8 + n + b0); y = f.read(b1 - b0)
f.seek(8 + n + a0); f.write(y); f.seek(8 + n + b0); f.write(x)
PY
  "$TPCONV" verify --reference "$O" --shards "$T/o2" > "$T/out" 2> "$T/err"; rc=$?
  if [ $rc -eq 1 ] && grep -Eq "^ +attn +model\\.layers\\.$sl\\.attn .*FAIL" "$T/out" &&
     grep -Eq "^ +attn +model\\.layers\\.$pl\\.attn .*pass" "$T/out"; then
    ok "$fam tp 2: rank 1's q_proj and o_proj slices of layer $sl swapped: verify fails layer $sl's attention (exit 1)"
  else
    bad "$fam tp 2: a swapped slice" "exit $rc" "$(grep -E 'FAIL|attn' "$T/out" | head -4)"
  fi
  rm -rf "$T/rt" && mkdir "$T/rt"
  if "$TPCONV" convert "$O" -o "$T/rt/o.gguf" --outtype f32 -q 2> "$T/err" &&
     "$TPCONV" convert "$T/rt/o.gguf" -o "$T/rt/tiny-$fam/" -q 2>> "$T/err" &&
     { [ ! -f "$T/rt/tiny-$fam/tokenizer.model" ] || rm "$T/rt/tiny-$fam/tokenizer.json"; } &&
     "$TPCONV" convert "$T/rt/tiny-$fam" -o "$T/rt/back.gguf" --outtype f32 -q 2>> "$T/err" &&
     cmp -s "$T/rt/o.gguf" "$T/rt/back.gguf"; then
    ok "$fam: GGUF -> HF folder -> GGUF byte-identical"
  else
    bad "$fam: GGUF -> HF -> GGUF" "$(cat "$T/err")"
  fi
  # the projections' biases said in the rebuilt config.json (bias_flags)
  case $fam in
    glm4) bm='"attention_bias": *true' ;;
    glm4-moe) bm='"use_qk_norm": *true' ;;
    phimoe) bm='"lm_head_bias": *true' ;;
    ernie4_5-moe) bm='"moe_layer_start_index": *1' ;;
    ernie4_5) bm='"use_bias": *false' ;;
    llama4) bm='"attention_bias": *false' ;;
    *) bm= ;;
  esac
  if [ -n "$bm" ]; then
    grep -Eq "$bm" "$T/rt/tiny-$fam/config.json" && ok "$fam: the rebuilt config.json says whether the projections have biases" ||
      bad "$fam: the bias member in the rebuilt config.json" "$(cat "$T/rt/tiny-$fam/config.json")"
  fi
  # Llama 4 text read back as transformers' llama4_text (llama4 is the
  # multimodal config), its dense and experts' widths apart
  if [ "$fam" = llama4 ]; then
    grep -q '"model_type": *"llama4_text"' "$T/rt/tiny-$fam/config.json" &&
      grep -q '"intermediate_size_mlp": *64' "$T/rt/tiny-$fam/config.json" &&
      grep -q '"intermediate_size": *32' "$T/rt/tiny-$fam/config.json" &&
      ok "llama4: the rebuilt config.json says llama4_text, intermediate_size_mlp 64 and the experts' 32" ||
      bad "llama4: model_type and widths in the rebuilt config.json" "$(cat "$T/rt/tiny-$fam/config.json")"
  fi
  [ "$fam" = gemma2 ] || continue
  # floats read back as floats (transformers 5.12's Gemma2Config takes no int there)
  if grep -q '"final_logit_softcapping": *30\.0,' "$T/rt/tiny-gemma2/config.json" &&
     grep -q '"query_pre_attn_scalar": *16\b' "$T/rt/tiny-gemma2/config.json"; then
    ok "gemma2: the softcaps read back as floats, query_pre_attn_scalar as head_dim"
  else
    bad "gemma2: the softcaps and query_pre_attn_scalar read back" "$(cat "$T/rt/tiny-gemma2/config.json")"
  fi
done
# Granite 4's Mamba-2 mixers: rank 1's dt_bias and D of layer 0 swapped (as
# many bytes, a wrong slice no layer check of its own sees: both are split
# by heads): verify's model check fails (exit 1); the dense fixture's two
# groups of B and C at tp 4 are refused naming the tensor (vLLM's
# MambaMixer2 replicates one group only), nothing written
rm -rf "$T/gh" && "$TPCONV" shard "$A/tiny-granitemoehybrid" --tp 2 -o "$T/gh" -q 2> "$T/err"
python3 - "$T/gh/model_tp01_pp00.safetensors" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "r+b"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
(a0, a1), (b0, b1) = (h["model.layers.0.mamba.%s" % p]["data_offsets"] for p in ("dt_bias", "D"))
f.seek(8 + n + a0); x = f.read(a1 - a0); f.seek(8 + n + b0); y = f.read(b1 - b0)
f.seek(8 + n + a0); f.write(y); f.seek(8 + n + b0); f.write(x)
PY
"$TPCONV" verify --reference "$A/tiny-granitemoehybrid" --shards "$T/gh" > "$T/out" 2> "$T/err"; rc=$?
if [ $rc -eq 1 ] && grep -Eq '^ +model .*FAIL' "$T/out"; then
  ok "granitemoehybrid tp 2: rank 1's dt_bias and D of a Mamba-2 layer swapped: verify's model check fails (exit 1)"
else
  bad "granitemoehybrid tp 2: a swapped Mamba-2 slice" "exit $rc" "$(grep -E 'FAIL|model' "$T/out" | head -4)"
fi
rm -rf "$T/gh"
"$TPCONV" shard "$A/tiny-granitemoehybrid-dense" --tp 4 -o "$T/gh" -q 2> "$T/err"; rc=$?
if [ $rc -eq 3 ] && grep -qF "2 Mamba-2 groups (mamba_n_groups)" "$T/err" && grep -qF "tensor 'model.layers.0.mamba." "$T/err" &&
   [ ! -e "$T/gh" ]; then
  ok "granitemoehybrid-dense tp 4: two groups of B and C that tp does not divide are refused naming the tensor (exit 3)"
else
  bad "granitemoehybrid-dense tp 4 (exit $rc)" "$(cat "$T/err")"
fi
# its GGUF: a vocabulary the reference pads to a multiple of 8, and a model
# of attention layers alone (written as granite), refused by name
rm -rf "$T/gv" && mkdir "$T/gv" && cp -r "$A/tiny-granitemoehybrid" "$T/gv/m"
sed -i 's/"vocab_size": 320/"vocab_size": 321/' "$T/gv/m/config.json"
refuse "granitemoehybrid: a vocabulary the reference pads to a multiple of 8 is refused by name" "'vocab_size' is 321, not a multiple of 8" "$T/gv/m"
cp "$A/tiny-granitemoehybrid/config.json" "$T/gv/m/config.json"
sed -i 's/"mamba",/"attention",/; s/"mamba"$/"attention"/' "$T/gv/m/config.json"
python3 - "$T/gv/m/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["layer_types"] = ["attention"] * len(c["layer_types"])
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
refuse "granitemoehybrid: attention layers alone (the reference writes granitemoe) are refused by name" "every layer_types entry is 'attention'" "$T/gv/m"
# Qwen3-Next: tp 8 would cut its 4 key-head groups (vLLM's num_k_heads //
# tp): refused by tensor, nothing written
O="$A/tiny-qwen3-next"
rm -rf "$T/q8"
"$TPCONV" shard "$O" --tp 8 -o "$T/q8" -q 2> "$T/err"; rc=$?
if [ $rc -eq 3 ] && grep -qF "tensor 'model.layers.0.linear_attn.conv1d.weight': part 0 of 4 linear-attention key heads" "$T/err" &&
   [ ! -e "$T/q8" ]; then
  ok "qwen3-next tp 8: 4 key-head groups refused by tensor (exit 3), nothing written"
else
  bad "qwen3-next tp 8 (exit $rc)" "$(cat "$T/err")"
fi
# the set's manifest records the linear attention's heads: resharded from
# the set alone (no config.json beside it), merged back byte-identical
rm -rf "$T/q4" "$T/q4r" "$T/q4r.safetensors"
if "$TPCONV" shard "$O" --tp 4 -o "$T/q4" -q 2> "$T/err" && rm "$T/q4/config.json" &&
   grep -q '"linear_num_key_heads": 4' "$T/q4/tpconv-manifest.json" &&
   "$TPCONV" shard "$T/q4" --tp 2 -o "$T/q4r" -q 2>> "$T/err" &&
   "$TPCONV" merge "$T/q4r" -o "$T/q4r.safetensors" -q 2>> "$T/err" && cmp -s "$O/model.safetensors" "$T/q4r.safetensors"; then
  ok "qwen3-next: a tp 4 set resharded to tp 2 by its manifest's linear-attention heads, merged back byte-identical"
else
  bad "qwen3-next: reshard from the manifest" "$(cat "$T/err")"
fi
# rank 1's two key-head groups of layer 0's in_proj_qkvz swapped: verify
# fails the DeltaNet of layer 0, layer 1's attention still passes
rm -rf "$T/q2" && "$TPCONV" shard "$O" --tp 2 -o "$T/q2" -q 2> "$T/err"
python3 - "$T/q2/model_tp01_pp00.safetensors" model.layers.0.linear_attn.in_proj_qkvz.weight <<'PY'
import json, struct, sys
f = open(sys.argv[1], "r+b"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
(a0, a1) = h[sys.argv[2]]["data_offsets"]; m = (a0 + a1) // 2
f.seek(8 + n + a0); x = f.read(m - a0); y = f.read(a1 - m)
f.seek(8 + n + a0); f.write(y + x)
PY
"$TPCONV" verify --reference "$O" --shards "$T/q2" > "$T/out" 2> "$T/err"; rc=$?
if [ $rc -eq 1 ] && grep -Eq '^ +attn +model\.layers\.0\.attn .*FAIL' "$T/out" &&
   grep -Eq '^ +attn +model\.layers\.1\.attn .*pass' "$T/out"; then
  ok "qwen3-next tp 2: rank 1's key-head groups of layer 0's in_proj_qkvz swapped: verify fails its DeltaNet (exit 1)"
else
  bad "qwen3-next tp 2: a swapped DeltaNet slice" "exit $rc" "$(grep -E 'FAIL|attn' "$T/out" | head -4)"
fi
# a tensor of its multi-token-prediction block (mtp.*) that no row names
# is refused into GGUF by name, nothing written
rm -rf "$T/mtp" && mkdir -p "$T/mtp" && cp -r "$O" "$T/mtp/" && rm -f "$T/w.gguf"
python3 - "$T/mtp/tiny-qwen3-next/model.safetensors" <<'PY'
import json, struct, sys
d = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", d[:8])[0]; h = json.loads(d[8:8 + n]); body = d[8 + n:]
end = max(v["data_offsets"][1] for k, v in h.items() if k != "__metadata__")
h["mtp.layers.0.bogus.weight"] = {"dtype": "F32", "shape": [32], "data_offsets": [end, end + 32 * 4]}
t = json.dumps(h).encode(); t += b" " * (-len(t) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(t)) + t + body[:end] + bytes(32 * 4))
PY
"$TPCONV" convert "$T/mtp/tiny-qwen3-next" -o "$T/w.gguf" -q 2> "$T/err"; rc=$?
if [ $rc -eq 3 ] && grep -qF "tensor 'mtp.layers.0.bogus.weight': convert_hf_to_gguf.py has no GGUF name" "$T/err" &&
   [ ! -e "$T/w.gguf" ]; then
  ok "qwen3-next: an mtp.* tensor no row names refused into GGUF by name (exit 3), nothing written"
else
  bad "qwen3-next with an unknown mtp.* tensor (exit $rc)" "$(cat "$T/err")"
fi
# Qwen3.5 and Qwen3.5-MoE: shard at tp 2 and 4 with
# the preset from config.json, merge byte-identical, verify's model check
# (the MoE's with --seed 2: seed 1's 8 tokens differ by 1.1e-4 of their
# rms already at tp 1, fp32 against fp64 with nothing split, as
# tiny-qwen3-next's do at --seed 3; the blocks all pass; the
# multi-token-prediction block mtp.* is in the set, split as a decoder
# layer, and out of the forward: 4 layers); rank 1's two value-head groups
# of layer 0's in_proj_z swapped fail its DeltaNet and layer 1's attention
# still passes, its halves of the MTP layer's q_proj swapped fail that
# tensor by name; tp 8 refused naming the tensor (4 key heads); GGUF -> HF
# -> GGUF byte-identical, the MTP block included (tpconv's GGUF = the
# reference's: ref/whole.sha256)
for fam in qwen3_5 qwen3_5-moe; do
  O="$A/tiny-$fam" vs=
  [ $fam = qwen3_5-moe ] && vs="--seed 2"
  tps="2 4"; [ "$SAN" = 1 ] && tps=2
  for tp in $tps; do
    rm -rf "$T/o$tp" "$T/o$tp.safetensors"
    if "$TPCONV" shard "$O" --tp $tp -o "$T/o$tp" -q 2> "$T/err" &&
       grep -q "\"name\": *\"$fam\"" "$T/o$tp/tpconv-manifest.json" &&
       "$TPCONV" merge "$T/o$tp" -o "$T/o$tp.safetensors" -q 2>> "$T/err" && cmp -s "$O/model.safetensors" "$T/o$tp.safetensors" &&
       "$TPCONV" verify --reference "$O" --shards "$T/o$tp" $vs > "$T/out" 2>> "$T/err" &&
       grep -q ", 4 layers," "$T/err"; then
      ok "$fam tp $tp: the preset from config.json, merged back byte-identical, verify's model check passes"
    else
      bad "$fam tp $tp: shard, merge, verify" "$(cat "$T/err")" "$(tail -5 "$T/out")"
    fi
  done
  python3 - "$T/o2/model_tp01_pp00.safetensors" model.layers.0.linear_attn.in_proj_z.weight \
    mtp.layers.0.self_attn.q_proj.weight <<'PY'
import json, struct, sys
f = open(sys.argv[1], "r+b"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
for t in sys.argv[2:]:
    (a0, a1) = h[t]["data_offsets"]; m = (a0 + a1) // 2
    f.seek(8 + n + a0); x = f.read(m - a0); y = f.read(a1 - m)
    f.seek(8 + n + a0); f.write(y + x)
PY
  "$TPCONV" verify --reference "$O" --shards "$T/o2" $vs > "$T/out" 2> "$T/err"; rc=$?
  if [ $rc -eq 1 ] && grep -Eq '^ +attn +model\.layers\.0\.attn .*FAIL' "$T/out" &&
     grep -Eq '^ +attn +model\.layers\.1\.attn .*pass' "$T/out" &&
     grep -Eq '^ +col +mtp\.layers\.0\.self_attn\.q_proj\.weight .*FAIL' "$T/out"; then
    ok "$fam tp 2: rank 1's value-head groups of layer 0's in_proj_z swapped: verify fails its DeltaNet; the MTP layer's q_proj halves swapped fail that tensor (exit 1)"
  else
    bad "$fam tp 2: a swapped DeltaNet slice" "exit $rc" "$(grep -E 'FAIL|attn' "$T/out" | head -4)"
  fi
  rm -rf "$T/q8"
  "$TPCONV" shard "$O" --tp 8 -o "$T/q8" -q 2> "$T/err"; rc=$?
  if [ $rc -eq 3 ] && grep -qF "tensor 'model.layers.0.linear_attn.conv1d.weight': part 0 of 4 linear-attention key heads" "$T/err" &&
     [ ! -e "$T/q8" ]; then
    ok "$fam tp 8: 4 key heads refused by tensor (exit 3), nothing written"
  else
    bad "$fam tp 8 (exit $rc)" "$(cat "$T/err")"
  fi
  rm -rf "$T/rt" && mkdir "$T/rt"
  if "$TPCONV" convert "$O" -o "$T/rt/o.gguf" --outtype f32 -q 2> "$T/err" &&
     "$TPCONV" convert "$T/rt/o.gguf" -o "$T/rt/tiny-$fam/" -q 2>> "$T/err" &&
     "$TPCONV" convert "$T/rt/tiny-$fam" -o "$T/rt/back.gguf" --outtype f32 -q 2>> "$T/err" &&
     cmp -s "$T/rt/o.gguf" "$T/rt/back.gguf"; then
    ok "$fam: GGUF -> HF folder -> GGUF byte-identical (value heads tiled and back)"
  else
    bad "$fam: GGUF -> HF -> GGUF" "$(cat "$T/err")"
  fi
done
# Qwen3_5ForConditionalGeneration, as the published checkpoints (tiny-qwen3_5
# under model.language_model., its mtp.* where it was, a vision tower
# model.visual.*, config.json's text_config): into GGUF its text model and
# MTP block, the reference's bytes (convert_hf_to_gguf.py on this folder
# gives tiny-qwen3_5's f32 file; checked by hand in the chroot), with a
# warning naming the 2 tensors left out by group; shard and verify refuse it
# by name (exit 3)
rm -rf "$T/mm" && mkdir -p "$T/mm" && cp -r "$A/tiny-qwen3_5" "$T/mm/"
python3 - "$T/mm/tiny-qwen3_5" <<'PY'
import json, struct, sys
d = sys.argv[1]; p = d + "/model.safetensors"
b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); data = b[8 + n:]
meta = h.pop("__metadata__", None)
h = {(k.replace("model.", "model.language_model.", 1) if k.startswith("model.") else k): v for k, v in h.items()}
end, add = len(data), b""
for k, cnt in (("model.visual.patch_embed.proj.weight", 12), ("model.visual.blocks.0.attn.qkv.weight", 24)):
    h[k] = {"dtype": "F32", "shape": [cnt], "data_offsets": [end, end + 4 * cnt]}; end += 4 * cnt; add += bytes(4 * cnt)
if meta: h["__metadata__"] = meta
hj = json.dumps(h).encode(); hj += b" " * ((8 - len(hj) % 8) % 8)
open(p, "wb").write(struct.pack("<Q", len(hj)) + hj + data + add)
c = json.load(open(d + "/config.json")); c.pop("architectures")
json.dump({"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "text_config": c,
           "vision_config": {"model_type": "qwen3_5_vision", "depth": 1, "hidden_size": 4, "num_heads": 1},
           "image_token_id": 5, "tie_word_embeddings": False}, open(d + "/config.json", "w"), indent=2)
PY
want=$(grep ' qwen3_5-f32.gguf$' "$A/ref/whole.sha256" | cut -d' ' -f1)
if "$TPCONV" convert "$T/mm/tiny-qwen3_5" -o "$T/mm/w.gguf" --outtype f32 2> "$T/err" &&
   [ "$(sha256sum "$T/mm/w.gguf" | cut -d' ' -f1)" = "$want" ] &&
   grep -qF "is a Qwen3_5ForConditionalGeneration: its text model (qwen3_5) is read" "$T/err" &&
   grep -qF "2 tensors left out: model.visual.*" "$T/err"; then
  ok "qwen3_5 as Qwen3_5ForConditionalGeneration: its text model's GGUF, the reference's bytes, the groups left out said"
else
  bad "qwen3_5 as Qwen3_5ForConditionalGeneration into GGUF" "$(cat "$T/err")"
fi
for c in "shard $T/mm/tiny-qwen3_5 --tp 2 -o $T/mm/s2" "verify --reference $T/mm/tiny-qwen3_5 --shards $T/o2"; do
  "$TPCONV" $c -q > /dev/null 2> "$T/err"; rc=$?
  if [ $rc -eq 3 ] && grep -qF "architecture 'Qwen3_5ForConditionalGeneration' is a multimodal model (its text model is qwen3_5's): ${c%% *} does not take it yet" "$T/err" &&
     [ ! -e "$T/mm/s2" ]; then
    ok "qwen3_5 as Qwen3_5ForConditionalGeneration: ${c%% *} refuses it by name (exit 3)"
  else
    bad "qwen3_5 as Qwen3_5ForConditionalGeneration: ${c%% *} (exit $rc)" "$(cat "$T/err")"
  fi
done
# Qwen3.5 with mrope_section in its rope parameters (as the published
# checkpoints): rope.dimension_sections written after the rope scaling keys,
# padded to 4, not the default at the end; read back into rope_parameters
tokcfg qwen3_5 mrope 'c["rope_parameters"]["mrope_section"] = [1, 1, 0]' config.json
# a q8_0 GGUF of Qwen3.5-MoE (its MTP layer too) into Hugging Face form:
# the quantized value heads read back grouped as windows of each weight,
# dequantized as python3-gguf does when read (the columns of ssm_out: 8-wide
# heads inside Q8_0's 32-wide blocks), and that folder into GGUF f32 again
# holds the q8_0 file's values to the bit (its F16 tensors as F32)
rm -rf "$T/q35q" && mkdir "$T/q35q"
if "$TPCONV" convert "$A/tiny-qwen3_5-moe" -o "$T/q35q/q.gguf" --outtype q8_0 -q 2> "$T/err" &&
   "$TPCONV" convert "$T/q35q/q.gguf" -o "$T/q35q/tiny-qwen3_5-moe/" -q 2>> "$T/err" &&
   "$TPCONV" convert "$T/q35q/tiny-qwen3_5-moe" -o "$T/q35q/b.gguf" --outtype f32 -q 2>> "$T/err" &&
   "$TPCONV" diff "$T/q35q/q.gguf" "$T/q35q/b.gguf" --gguf-names --cast -q 2>> "$T/err"; then
  ok "qwen3_5-moe: a q8_0 GGUF into Hugging Face form (value heads dequantized and grouped), back to GGUF f32 with its values to the bit"
else
  bad "qwen3_5-moe: q8_0 GGUF -> HF -> GGUF f32" "$(cat "$T/err")"
fi
# DeepSeek-V3's HF folder read back from its GGUF (every tensor the
# original's bytes: hf_test.sh; loaded by transformers: the interop run);
# here a q8_0 GGUF, whose attn_v_b is block-quantized, is refused into Hugging
# Face form by name (the per-head join is not computed from blocks), nothing written
rm -rf "$T/dq" && mkdir "$T/dq"
"$TPCONV" convert "$A/tiny-deepseek" -o "$T/dq/q.gguf" --outtype q8_0 -q 2> "$T/err" &&
  "$TPCONV" convert "$T/dq/q.gguf" -o "$T/dq/hf/" -q 2> "$T/err"; rc=$?
if [ $rc -eq 3 ] && grep -qF "tensor 'blk.0.attn_v_b.weight': a quantized part of Hugging Face's 'model.layers.0.self_attn.kv_b_proj.weight'" "$T/err" &&
   [ ! -e "$T/dq/hf/model.safetensors" ]; then
  ok "deepseek: a q8_0 GGUF into Hugging Face form is refused by name (exit 3)"
else
  bad "deepseek: q8_0 GGUF -> HF (exit $rc)" "$(cat "$T/err")"
fi
# Granite-MoE with expert parallelism: each EP group holds its experts'
# rows of the stacked input_linear and output_linear, split inside each over
# its tp/ep ranks; merged back byte-identical, verify's model check passes
O="$A/tiny-granitemoe"
for c in 2:2:contiguous 4:2:round-robin; do
  IFS=: read -r tp ep pl <<<"$c"
  rm -rf "$T/ep" "$T/ep.safetensors"
  if "$TPCONV" shard "$O" --tp "$tp" --ep "$ep" --ep-placement "$pl" -o "$T/ep" -q 2> "$T/err" &&
     grep -q '"stacked": true' "$T/ep/tpconv-manifest.json" &&
     "$TPCONV" merge "$T/ep" -o "$T/ep.safetensors" -q 2>> "$T/err" && cmp -s "$O/model.safetensors" "$T/ep.safetensors" &&
     "$TPCONV" verify --reference "$O" --shards "$T/ep" > "$T/out" 2>> "$T/err" &&
     grep -Eq '^ +mlp +model\.layers\.1\.moe .* pass' "$T/out" && grep -Eq '^ +model +model .* pass' "$T/out"; then
    ok "granitemoe tp $tp ep $ep ($pl): merged back byte-identical, verify's MoE and model checks pass"
  else
    bad "granitemoe tp $tp ep $ep ($pl)" "$(cat "$T/err")" "$(grep -v ' pass' "$T/out" | tail -4)"
  fi
done
# GLM-4.5 MoE with expert parallelism: each EP group its experts (one tensor
# each), split inside each over its tp/ep ranks; the next-token-prediction
# layer's experts too; merged back byte-identical, verify's checks pass
for c in 2:2:contiguous 4:2:round-robin; do
  IFS=: read -r tp ep pl <<<"$c"
  rm -rf "$T/ep" "$T/ep.safetensors"
  G="$A/tiny-glm4-moe"
  if "$TPCONV" shard "$G" --tp "$tp" --ep "$ep" --ep-placement "$pl" -o "$T/ep" -q 2> "$T/err" &&
     "$TPCONV" merge "$T/ep" -o "$T/ep.safetensors" -q 2>> "$T/err" && cmp -s "$G/model.safetensors" "$T/ep.safetensors" &&
     "$TPCONV" verify --reference "$G" --shards "$T/ep" > "$T/out" 2>> "$T/err" &&
     grep -Eq '^ +mlp +model\.layers\.1\.moe .* pass' "$T/out" && grep -Eq '^ +model +model .* pass' "$T/out" &&
     grep -q ", 2 layers," "$T/err"; then
    ok "glm4-moe tp $tp ep $ep ($pl): merged back byte-identical, verify's MoE and model checks pass (the MTP layer left out)"
  else
    bad "glm4-moe tp $tp ep $ep ($pl)" "$(cat "$T/err")" "$(grep -v ' pass' "$T/out" | tail -4)"
  fi
done
# Phi-3.5-MoE, ERNIE 4.5 MoE and Llama 4 with expert parallelism: each EP
# group its experts (block_sparse_moe.experts.N, mlp.experts.N; Llama 4's
# rows of its stacked gate_up_proj and down_proj), split inside each over
# its tp/ep ranks; merged back byte-identical, verify's MoE (the sparsemixer;
# the softmax chosen with the correction bias) and model checks pass
for c in phimoe:2:2:contiguous phimoe:4:2:round-robin ernie4_5-moe:2:2:contiguous ernie4_5-moe:4:2:round-robin \
         llama4:2:2:contiguous llama4:4:2:round-robin; do
  IFS=: read -r fam tp ep pl <<<"$c"
  rm -rf "$T/ep" "$T/ep.safetensors"
  G="$A/tiny-$fam"
  if "$TPCONV" shard "$G" --tp "$tp" --ep "$ep" --ep-placement "$pl" -o "$T/ep" -q 2> "$T/err" &&
     "$TPCONV" merge "$T/ep" -o "$T/ep.safetensors" -q 2>> "$T/err" && cmp -s "$G/model.safetensors" "$T/ep.safetensors" &&
     "$TPCONV" verify --reference "$G" --shards "$T/ep" > "$T/out" 2>> "$T/err" &&
     grep -Eq '^ +mlp +model\.layers\.1\.moe .* pass' "$T/out" && grep -Eq '^ +model +model .* pass' "$T/out"; then
    ok "$fam tp $tp ep $ep ($pl): merged back byte-identical, verify's MoE and model checks pass"
  else
    bad "$fam tp $tp ep $ep ($pl)" "$(cat "$T/err")" "$(grep -v ' pass' "$T/out" | tail -4)"
  fi
done
# --no-mtp: the multi-token-prediction layers left out as the reference's
# --no-mtp (make_arch_fixtures.py nomtp_refs, ref/nomtp.sha256): Qwen3-Next's,
# Qwen3.5's, Qwen3.5-MoE's mtp.* and GLM-4.5 MoE's layer past
# num_hidden_layers, at f32, f16 and q8_0, byte for byte; such a file into
# Hugging Face form and back (no option) gives the same file
declare -A NOMTP_FAILS=()
rm -rf "$T/nomtp" && mkdir "$T/nomtp"
while read -r sum name; do
  fam=${name%-nomtp-*} ot=${name##*-nomtp-}; ot=${ot%.gguf}
  if ! "$TPCONV" convert "$A/tiny-$fam" -o "$T/nomtp/$name" --outtype "$ot" --no-mtp -q 2> "$T/err" ||
     ! sha256 "$T/nomtp/$name" || [ "$REPLY" != "$sum" ]; then
    NOMTP_FAILS[$fam]+="$ot: $(head -c 300 "$T/err") "
  fi
done < "$A/ref/nomtp.sha256"
for fam in glm4-moe qwen3-next qwen3_5 qwen3_5-moe; do
  if [ -z "${NOMTP_FAILS[$fam]:-}" ]; then
    ok "$fam --no-mtp: f32, f16 and q8_0 the reference's --no-mtp files, byte for byte"
  else
    bad "$fam --no-mtp: differs from the reference's --no-mtp files" "${NOMTP_FAILS[$fam]}"
  fi
done
for fam in glm4-moe qwen3_5-moe; do
  rm -rf "$T/nomtp/hf"
  if "$TPCONV" convert "$T/nomtp/$fam-nomtp-f32.gguf" -o "$T/nomtp/hf/tiny-$fam/" -q 2> "$T/err" &&
     "$TPCONV" convert "$T/nomtp/hf/tiny-$fam" -o "$T/nomtp/back.gguf" --outtype f32 -f -q 2>> "$T/err" &&
     cmp -s "$T/nomtp/$fam-nomtp-f32.gguf" "$T/nomtp/back.gguf"; then
    ok "$fam --no-mtp: GGUF -> HF -> GGUF (no option) byte-identical"
  else
    bad "$fam --no-mtp: GGUF -> HF -> GGUF" "$(cat "$T/err")"
  fi
done
# refused: a family the reference refuses --no-mtp for (DeepSeek-V3, its
# layer left out always; ref/nomtp-refused.txt holds the reference's refusal),
# exit 3; another output format or a GGUF input, exit 2; nothing written
rm -f "$T/nomtp/x.gguf" "$T/nomtp/x.safetensors"
"$TPCONV" convert "$A/tiny-deepseek" -o "$T/nomtp/x.gguf" --no-mtp -q 2> "$T/err"; rc=$?
if [ $rc -eq 3 ] && grep -qF -- "--no-mtp: a DeepseekV3ForCausalLM GGUF holds no multi-token-prediction layers" "$T/err" &&
   grep -qF -- "--no-nextn are not supported for DeepseekV3ForCausalLM" "$A/ref/nomtp-refused.txt" &&
   [ ! -e "$T/nomtp/x.gguf" ]; then
  ok "deepseek --no-mtp refused (exit 3) as the reference refuses it, nothing written"
else
  bad "deepseek --no-mtp (exit $rc)" "$(cat "$T/err")"
fi
"$TPCONV" convert "$A/tiny-glm4-moe" -o "$T/nomtp/x.safetensors" --no-mtp -q 2> "$T/err"; rc=$?
"$TPCONV" convert "$T/nomtp/glm4-moe-nomtp-f32.gguf" -o "$T/nomtp/x.gguf" --no-mtp -q 2> "$T/err2"; rc2=$?
if [ $rc -eq 2 ] && grep -qF -- "--no-mtp goes with a GGUF output" "$T/err" &&
   [ $rc2 -eq 2 ] && grep -qF -- "--no-mtp goes with a Hugging Face model into GGUF, not a GGUF input" "$T/err2" &&
   [ ! -e "$T/nomtp/x.safetensors" ] && [ ! -e "$T/nomtp/x.gguf" ]; then
  ok "--no-mtp to safetensors, or from a GGUF input: usage errors (exit 2), nothing written"
else
  bad "--no-mtp usage errors (exit $rc, $rc2)" "$(cat "$T/err" "$T/err2")"
fi
# HunYuan MoE's tiny transformers model from tests/data (make_tiny_records.py;
# its GGUF: tiny-hunyuan-moe above and below). Shard at tp 2 and 4 with the
# preset from config.json and at tp 2 and 4 x ep 2, merge back
# byte-identical, verify's MoE and model checks; a swapped slice fails;
# convert to GGUF refused by name (exit 3), nothing written: transformers'
# HunYuanMoEV1Config writes no moe_intermediate_size list, which
# HunYuanMoEModel reads (A13B's config.json has it), and there is no hy.tiktoken
for c in hunyuan-moe:hunyuan_moe; do
  IFS=: read -r fam data <<<"$c"
  HO="$T/tiny-$fam"
  rm -rf "$HO" && mkdir "$HO" && cp "$SRC/tests/data/tiny_$data.json" "$HO/config.json" &&
    cp "$SRC/tests/data/tiny_$data.safetensors" "$HO/model.safetensors"
  for s in 2:1 4:1 2:2 4:2; do
    IFS=: read -r tp ep <<<"$s"
    rm -rf "$T/o" "$T/o.safetensors"
    if "$TPCONV" shard "$HO" --tp "$tp" --ep "$ep" -o "$T/o" -q 2> "$T/err" &&
       grep -q "\"name\": *\"$fam\"" "$T/o/tpconv-manifest.json" &&
       "$TPCONV" merge "$T/o" -o "$T/o.safetensors" -q 2>> "$T/err" && cmp -s "$HO/model.safetensors" "$T/o.safetensors" &&
       "$TPCONV" verify --reference "$HO" --shards "$T/o" > "$T/out" 2>> "$T/err" &&
       grep -Eq '^ +mlp +model\.layers\.1\.moe .* pass' "$T/out" && grep -Eq '^ +model +model .* pass' "$T/out"; then
      ok "$fam tp $tp ep $ep: the preset from config.json, merged back byte-identical, verify's MoE and model checks pass"
    else
      bad "$fam tp $tp ep $ep: shard, merge, verify" "$(cat "$T/err")" "$(grep -v ' pass' "$T/out" | tail -4)"
    fi
  done
  rm -rf "$T/o" && "$TPCONV" shard "$HO" --tp 2 -o "$T/o" -q 2> "$T/err"
  python3 - "$T/o/model_tp01_pp00.safetensors" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "r+b"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
(a0, a1), (b0, b1) = (h["model.layers.1.self_attn.%s.weight" % p]["data_offsets"] for p in ("q_proj", "o_proj"))
f.seek(8 + n + a0); x = f.read(a1 - a0); f.seek(8 + n + b0); y = f.read(b1 - b0)
f.seek(8 + n + a0); f.write(y); f.seek(8 + n + b0); f.write(x)
PY
  "$TPCONV" verify --reference "$HO" --shards "$T/o" > "$T/out" 2> "$T/err"; rc=$?
  if [ $rc -eq 1 ] && grep -Eq '^ +attn +model\.layers\.1\.attn .*FAIL' "$T/out" &&
     grep -Eq '^ +attn +model\.layers\.0\.attn .*pass' "$T/out"; then
    ok "$fam tp 2: rank 1's q_proj and o_proj slices of layer 1 swapped: verify fails layer 1's attention (exit 1)"
  else
    bad "$fam tp 2: a swapped slice" "exit $rc" "$(grep -E 'FAIL|attn' "$T/out" | head -4)"
  fi
  rm -f "$T/x.gguf"
  "$TPCONV" convert "$HO" -o "$T/x.gguf" -q 2> "$T/err"; rc=$?
  if [ $rc -eq 3 ] && grep -qF "config.json has none of moe_intermediate_size, which the GGUF metadata needs" "$T/err" &&
     [ ! -e "$T/x.gguf" ]; then
    ok "$fam: transformers' config.json to GGUF refused by name (no moe_intermediate_size list; exit 3), nothing written"
  else
    bad "$fam: convert to GGUF (exit $rc)" "$(cat "$T/err")"
  fi
done
# the same model under Hunyuan-A13B's rope (tests/data/tiny_hunyuan_moe_dyn.json:
# rope_type "dynamic", alpha 1000; make_tiny_hunyuan_dyn.py): verify's forward
# rotates by the alpha-scaled base (test_verify_moe's test_hunyuan_moe_dynamic_rope
# against transformers' logits) and passes at tp 2; more tokens than
# max_position_embeddings (64), where transformers rescales the frequencies,
# refused by name (exit 3)
HO="$T/tiny-hydyn"
rm -rf "$HO" "$T/o" && mkdir "$HO" && cp "$SRC/tests/data/tiny_hunyuan_moe_dyn.json" "$HO/config.json" &&
  cp "$SRC/tests/data/tiny_hunyuan_moe.safetensors" "$HO/model.safetensors"
"$TPCONV" shard "$HO" --tp 2 -o "$T/o" -q 2> "$T/err" &&
  "$TPCONV" verify --reference "$HO" --shards "$T/o" > "$T/out" 2>> "$T/err"; rc=$?
"$TPCONV" verify --reference "$HO" --shards "$T/o" --tokens 65 > /dev/null 2> "$T/err2"; rc2=$?
if [ $rc -eq 0 ] && grep -Eq '^ +model +model .* pass' "$T/out" && [ $rc2 -eq 3 ] &&
   grep -qF "65 tokens, past the dynamic rope's max_position_embeddings 64" "$T/err2"; then
  ok "hunyuan-moe with a dynamic (NTK-alpha) rope: verify's model check passes at tp 2; 65 tokens past max_position_embeddings refused by name"
else
  bad "hunyuan-moe with a dynamic rope: verify (exit $rc, $rc2)" "$(cat "$T/err" "$T/err2")"
fi
# HunYuan MoE (tiny-hunyuan-moe, its tiktoken vocabulary; the reference's
# files compared whole above): its GGUF into Hugging Face form (hy.tiktoken
# rebuilt, the lists a layer each) and back, byte-identical at f32, f16 and
# bf16; hy.tiktoken equal to the original. Refused by name (exit 3),
# nothing written: moe_topk a number (the reference asserts on a list), its
# entries differing, a dynamic rope, too small a vocab_size, an empty
# hy.tiktoken, a token given twice in it; a GGUF whose merges are not the ranks' into
# Hugging Face form
H="$A/tiny-hunyuan-moe"
rm -rf "$T/hy" && mkdir "$T/hy"
hy_fail=
for ot in f32 f16 bf16; do
  if ! "$TPCONV" convert "$H" -o "$T/hy/$ot.gguf" --outtype "$ot" -q 2> "$T/err" ||
     ! "$TPCONV" convert "$T/hy/$ot.gguf" -o "$T/hy/$ot/tiny-hunyuan-moe/" -q 2>> "$T/err" ||
     ! "$TPCONV" convert "$T/hy/$ot/tiny-hunyuan-moe" -o "$T/hy/$ot-back.gguf" --outtype "$ot" -q 2>> "$T/err" ||
     ! cmp -s "$T/hy/$ot.gguf" "$T/hy/$ot-back.gguf" || ! cmp -s "$H/hy.tiktoken" "$T/hy/$ot/tiny-hunyuan-moe/hy.tiktoken"; then
    hy_fail+="$ot: $(head -c 300 "$T/err") "
  fi
done
if [ -z "$hy_fail" ]; then
  ok "hunyuan-moe: GGUF -> HF (hy.tiktoken rebuilt) -> GGUF byte-identical at f32, f16 and bf16"
else
  bad "hunyuan-moe: GGUF -> HF -> GGUF" "$hy_fail"
fi
# hy_bad NAME MESSAGE: tiny-hunyuan-moe as $T/hy/b/tiny-hunyuan-moe was edited
hy_bad() {
  rm -f "$T/hy/b.gguf"
  "$TPCONV" convert "$T/hy/b/tiny-hunyuan-moe" -o "$T/hy/b.gguf" -q 2> "$T/err"; local rc=$?
  if [ $rc -eq 3 ] && grep -qF -- "$2" "$T/err" && [ ! -e "$T/hy/b.gguf" ]; then
    ok "hunyuan-moe: $1 refused by name (exit 3), nothing written"
  else
    bad "hunyuan-moe: $1 (exit $rc)" "$(cat "$T/err")"
  fi
}
hy_copy() { rm -rf "$T/hy/b" && mkdir "$T/hy/b" && cp -r "$H" "$T/hy/b/"; }
hy_cfg() {
  hy_copy
  python3 -c 'import json, sys
p = sys.argv[1]; c = json.load(open(p)); exec(sys.argv[2]); json.dump(c, open(p, "w"))' "$T/hy/b/tiny-hunyuan-moe/config.json" "$1"
}
hy_cfg 'c["moe_topk"] = 2'
hy_bad "moe_topk a number" "'moe_topk' is not a list of a number a layer"
hy_cfg 'c["moe_topk"] = [2, 1]'
hy_bad "moe_topk differing between layers" "'moe_topk' differs between layers"
hy_cfg 'c["rope_parameters"] = {"rope_type": "dynamic", "alpha": 1000.0, "rope_theta": 10000.0, "factor": 1.0}'
hy_bad "a dynamic (NTK-alpha) rope on an 8-dim head" "a dynamic rope with a head of 8 dims (hidden_size / num_attention_heads), not 128"
hy_cfg 'c["vocab_size"] = 312'
hy_bad "a vocab_size without room for the special tokens" "vocab_size: not hy.tiktoken's ranks and 5"
hy_copy; : > "$T/hy/b/tiny-hunyuan-moe/hy.tiktoken"
hy_bad "an empty hy.tiktoken" "hy.tiktoken': no tokens"
hy_copy; sed -n 1p "$H/hy.tiktoken" | sed 's/ 0$/ 310/' >> "$T/hy/b/tiny-hunyuan-moe/hy.tiktoken"
hy_bad "a token twice in hy.tiktoken" "line 311: the token of line 0 again"
rm -rf "$T/hy/m" && python3 - "$T/hy/f32.gguf" "$T/hy/m.gguf" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
key = b"tokenizer.ggml.merges"
at = b.find(key) + len(key) + 4 + 4 + 8 + 8  # value type, element type, count, the first string's length
b[at] = ord("x") if b[at] != ord("x") else ord("y")  # its first character: another merge
open(sys.argv[2], "wb").write(bytes(b))
PY
"$TPCONV" convert "$T/hy/m.gguf" -o "$T/hy/m/" -q 2> "$T/err"; rc=$?
if [ $rc -eq 3 ] && grep -qF "tokenizer.ggml.merges: merge 0 is not the one hy.tiktoken's ranks give" "$T/err" &&
   [ ! -e "$T/hy/m/model.safetensors" ]; then
  ok "hunyuan-moe: a GGUF whose merges are not hy.tiktoken's ranks' into Hugging Face form refused by name (exit 3)"
else
  bad "hunyuan-moe: altered merges into Hugging Face form (exit $rc)" "$(cat "$T/err")"
fi
# HunYuan MoE with Hunyuan-A13B's rope (make_arch_fixtures.py hunyuan_dyn:
# hydyn/tiny-hunyuan-moe, rope_type "dynamic", alpha 1000, rope_theta 10000,
# one 128-dim head, max_position_embeddings 32768): f32, f16, bf16 and q8_0
# byte-identical to the reference's (ref/hunyuan-moe-dyn.sha256: freq_base
# 10000 x 1000^(128/126), scaling none, factor 1, a 256k context); its GGUF
# into Hugging Face form (the rope parameters back, max_position_embeddings
# 262144) and back byte-identical at f32, f16 and bf16; what the reference
# asserts (ref/hunyuan-moe-dyn-refused.txt: alpha 500, a 64-dim head,
# rope_theta 20000, max_position_embeddings 4096, each its AssertionError)
# refused by name (exit 3), nothing written; a GGUF of another freq_base under
# scaling none into Hugging Face form refused by name
HD="$A/hydyn/tiny-hunyuan-moe"
rm -rf "$T/hd" && mkdir "$T/hd"
hd_fail=
while read -r sum name; do
  ot=${name#hunyuan-moe-dyn-}; ot=${ot%.gguf}
  "$TPCONV" convert "$HD" -o "$T/hd/$ot.gguf" --outtype "$ot" -q 2> "$T/err" && sha256 "$T/hd/$ot.gguf" &&
    [ "$REPLY" = "$sum" ] || hd_fail+="$ot: $(head -c 300 "$T/err") "
done < "$A/ref/hunyuan-moe-dyn.sha256"
if [ -z "$hd_fail" ]; then
  ok "hunyuan-moe with a dynamic (NTK-alpha) rope: f32, f16, bf16, q8_0 byte-identical to convert_hf_to_gguf.py's"
else
  bad "hunyuan-moe with a dynamic rope to GGUF" "$hd_fail"
  "$DUMP" "$HD" f32 2>&1 | no_tok | diff <(no_tok "$A/ref/hunyuan-moe-dyn-f32.txt") - | head -20
fi
hd_fail=
for ot in f32 f16 bf16; do
  if ! "$TPCONV" convert "$T/hd/$ot.gguf" -o "$T/hd/$ot/tiny-hunyuan-moe/" -q 2> "$T/err" ||
     ! "$TPCONV" convert "$T/hd/$ot/tiny-hunyuan-moe" -o "$T/hd/$ot-back.gguf" --outtype "$ot" -q 2>> "$T/err" ||
     ! cmp -s "$T/hd/$ot.gguf" "$T/hd/$ot-back.gguf"; then
    hd_fail+="$ot: $(head -c 300 "$T/err") "
  fi
done
if [ -z "$hd_fail" ] && python3 - "$T/hd/f32/tiny-hunyuan-moe/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
want = {"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": 10000.0}
sys.exit(0 if c["rope_parameters"] == want and c["max_position_embeddings"] == 262144 else 1)
PY
then
  ok "hunyuan-moe dynamic rope: GGUF -> HF (rope parameters rebuilt, a 256k context) -> GGUF byte-identical at f32, f16, bf16"
else
  bad "hunyuan-moe dynamic rope: GGUF -> HF -> GGUF" "$hd_fail" "$(cat "$T/hd/f32/tiny-hunyuan-moe/config.json" 2>/dev/null | head -30)"
fi
declare -A HD_EDIT=(
  [alpha500]='c["rope_parameters"]["alpha"] = 500.0'
  [dim64]='c.update(num_attention_heads=2, num_key_value_heads=2, head_dim=64)'
  [theta20000]='c["rope_parameters"]["rope_theta"] = 20000.0'
  [ctx4096]='c["max_position_embeddings"] = 4096')
declare -A HD_MSG=(
  [alpha500]="a dynamic rope with alpha 500, not 1000"
  [dim64]="a dynamic rope with a head of 64 dims (hidden_size / num_attention_heads), not 128"
  [theta20000]="a dynamic rope with rope_theta 20000, not 10000"
  [ctx4096]="a dynamic rope with max_position_embeddings 4096, not 32768 or 262144")
while read -r v _ rc why; do
  rm -rf "$T/hd/b" && mkdir "$T/hd/b" && cp -r "$HD" "$T/hd/b/"
  python3 -c 'import json, sys
p = sys.argv[1]; c = json.load(open(p)); exec(sys.argv[2]); json.dump(c, open(p, "w"))' "$T/hd/b/tiny-hunyuan-moe/config.json" "${HD_EDIT[$v]}"
  "$TPCONV" convert "$T/hd/b/tiny-hunyuan-moe" -o "$T/hd/b.gguf" -q 2> "$T/err"; r=$?
  if [ "$rc" = 1 ] && [[ $why == AssertionError:* ]] && [ $r -eq 3 ] && grep -qF -- "${HD_MSG[$v]}" "$T/err" &&
     [ ! -e "$T/hd/b.gguf" ]; then
    ok "hunyuan-moe dynamic rope $v: refused by name (exit 3), as the reference asserts; nothing written"
  else
    bad "hunyuan-moe dynamic rope $v (exit $r; the reference's exit $rc)" "$(cat "$T/err")"
  fi
done < "$A/ref/hunyuan-moe-dyn-refused.txt"
python3 - "$T/hd/f32.gguf" "$T/hd/m.gguf" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
at = b.find(b"hunyuan-moe.rope.freq_base") + len(b"hunyuan-moe.rope.freq_base") + 4  # past the value type
b[at:at + 4] = struct.pack("<f", 1e6)
open(sys.argv[2], "wb").write(bytes(b))
PY
"$TPCONV" convert "$T/hd/m.gguf" -o "$T/hd/m/" -q 2> "$T/err"; rc=$?
if [ $rc -eq 3 ] && grep -qF "hunyuan-moe.rope.freq_base 1e+06 with rope.scaling.type 'none' and an original context of 262144: not the dynamic rope" "$T/err" &&
   [ ! -e "$T/hd/m/config.json" ]; then
  ok "hunyuan-moe: a GGUF of another freq_base under rope scaling none into Hugging Face form refused by name (exit 3)"
else
  bad "hunyuan-moe: another freq_base under rope scaling none (exit $rc)" "$(cat "$T/err")"
fi
# HunYuan dense (tiny-hunyuan-dense: Hunyuan-7B's dynamic NTK-alpha rope on
# an 8-dim head, hy.tiktoken, eod_token_id, generation_config.json's two eos
# ids; the reference's files compared whole above): its GGUF into Hugging
# Face form (hy.tiktoken rebuilt, the rope parameters, eod_token_id,
# generation_config.json's eos ids [eot, eos]) and back byte-identical at
# f32, f16 and bf16; config.json variants whole against the reference's
# (ref/hunyuan-dense-var.sha256: alpha 500, which HunYuanModel does not
# assert, the default rope, no eod_token_id: its default 3, eod_token_id
# null: SpecialVocab's eos; a tokenizer.json in place of hy.tiktoken, its
# _set_vocab_gpt2 path, and that with pad_token_id -1: no pad id), each read
# back and converted again the same;
# what the reference asserts (ref/hunyuan-dense-refused.txt: rope_theta
# 20000, max_position_embeddings 4096) and a dynamic rope without alpha (the
# reference writes alpha 50's base, transformers rotates by rope_theta's)
# refused by name (exit 3), nothing written
H="$A/tiny-hunyuan-dense"
rm -rf "$T/hd2" && mkdir "$T/hd2"
hd_fail=
for ot in f32 f16 bf16; do
  if ! "$TPCONV" convert "$H" -o "$T/hd2/$ot.gguf" --outtype "$ot" -q 2> "$T/err" ||
     ! "$TPCONV" convert "$T/hd2/$ot.gguf" -o "$T/hd2/$ot/tiny-hunyuan-dense/" -q 2>> "$T/err" ||
     ! "$TPCONV" convert "$T/hd2/$ot/tiny-hunyuan-dense" -o "$T/hd2/$ot-back.gguf" --outtype "$ot" -q 2>> "$T/err" ||
     ! cmp -s "$T/hd2/$ot.gguf" "$T/hd2/$ot-back.gguf" || ! cmp -s "$H/hy.tiktoken" "$T/hd2/$ot/tiny-hunyuan-dense/hy.tiktoken"; then
    hd_fail+="$ot: $(head -c 300 "$T/err") "
  fi
done
if [ -z "$hd_fail" ] && python3 - "$T/hd2/f32/tiny-hunyuan-dense" <<'PY'
import json, sys
c = json.load(open(sys.argv[1] + "/config.json")); g = json.load(open(sys.argv[1] + "/generation_config.json"))
want = {"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": 10000.0}
sys.exit(0 if c["rope_parameters"] == want and c["max_position_embeddings"] == 262144 and c["eod_token_id"] == 310
         and c["model_type"] == "hunyuan_v1_dense" and g["eos_token_id"] == [315, 310] else 1)
PY
then
  ok "hunyuan-dense: GGUF -> HF (hy.tiktoken, rope parameters, eod_token_id, eot rebuilt) -> GGUF byte-identical at f32, f16, bf16"
else
  bad "hunyuan-dense: GGUF -> HF -> GGUF" "$hd_fail" "$(cat "$T/hd2/f32/tiny-hunyuan-dense/config.json" 2>/dev/null | head -30)"
fi
declare -A HY_DENSE_EDIT=(
  [alpha500]='c["rope_parameters"]["alpha"] = 500.0'
  [defrope]='c["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0}'
  [noeod]='del c["eod_token_id"]'
  [eodnull]='c["eod_token_id"] = None'
  [theta20000]='c["rope_parameters"]["rope_theta"] = 20000.0'
  [ctx4096]='c["max_position_embeddings"] = 4096'
  [noalpha]='del c["rope_parameters"]["alpha"]'
  [tokjson]='pass'
  [tokjson-nopad]='c["pad_token_id"] = -1')
declare -A HY_DENSE_MSG=(
  [theta20000]="a dynamic rope with rope_theta 20000, not 10000"
  [ctx4096]="a dynamic rope with max_position_embeddings 4096, not 32768 or 262144"
  [noalpha]="a dynamic rope without alpha: convert_hf_to_gguf.py writes alpha 50's base, transformers rotates it by rope_theta's")
# hd_variant NAME: $T/hd2/v/tiny-hunyuan-dense as tiny-hunyuan-dense with NAME's
# edit (tokjson*: arch/hydense-tokjson's tokenizer.json in place of hy.tiktoken)
hd_variant() {
  rm -rf "$T/hd2/v" "$T/hd2/v.gguf" "$T/hd2/v2.gguf" && mkdir "$T/hd2/v" && cp -r "$H" "$T/hd2/v/"
  case $1 in tokjson*)
    rm "$T/hd2/v/tiny-hunyuan-dense/"{hy.tiktoken,tokenization_hy.py,tokenizer_config.json}
    cp "$A/hydense-tokjson/"* "$T/hd2/v/tiny-hunyuan-dense/" ;;
  esac
  python3 -c 'import json, sys
p = sys.argv[1]; c = json.load(open(p)); exec(sys.argv[2]); json.dump(c, open(p, "w"))' "$T/hd2/v/tiny-hunyuan-dense/config.json" "${HY_DENSE_EDIT[$1]}"
}
while read -r sum name; do
  v=${name#hunyuan-dense-}; v=${v%-f32.gguf}
  hd_variant "$v"
  if "$TPCONV" convert "$T/hd2/v/tiny-hunyuan-dense" -o "$T/hd2/v.gguf" --outtype f32 -q 2> "$T/err" &&
     sha256 "$T/hd2/v.gguf" && [ "$REPLY" = "$sum" ] &&
     "$TPCONV" convert "$T/hd2/v.gguf" -o "$T/hd2/v/back/tiny-hunyuan-dense/" -q 2>> "$T/err" &&
     "$TPCONV" convert "$T/hd2/v/back/tiny-hunyuan-dense" -o "$T/hd2/v2.gguf" --outtype f32 -q 2>> "$T/err" &&
     cmp -s "$T/hd2/v.gguf" "$T/hd2/v2.gguf"; then
    ok "hunyuan-dense $v: byte-identical to convert_hf_to_gguf.py's; GGUF -> HF -> GGUF the same"
  else
    bad "hunyuan-dense $v" "$(cat "$T/err")"
  fi
done < "$A/ref/hunyuan-dense-var.sha256"
while read -r v _ rc why; do
  hd_variant "$v"
  "$TPCONV" convert "$T/hd2/v/tiny-hunyuan-dense" -o "$T/hd2/v.gguf" -q 2> "$T/err"; r=$?
  if { { [ "$rc" = 1 ] && [[ $why == AssertionError:* ]]; } || [ "$v" = noalpha ]; } && [ $r -eq 3 ] &&
     grep -qF -- "${HY_DENSE_MSG[$v]}" "$T/err" && [ ! -e "$T/hd2/v.gguf" ]; then
    ok "hunyuan-dense $v: refused by name (exit 3; the reference: exit $rc $why); nothing written"
  else
    bad "hunyuan-dense $v (exit $r; the reference's exit $rc)" "$(cat "$T/err")"
  fi
done < "$A/ref/hunyuan-dense-refused.txt"
# tiny-hunyuan-dense sharded with its preset from config.json at tp 2 and 4
# (kv heads replicated at 4) in the hf and vllm layouts (config.json with
# use_qk_norm true, as Tencent's: vLLM's HunYuanAttention has no q/k norms
# without it), merged back byte-identical; verify's attention and model
# checks pass. Without use_qk_norm the vllm layout refuses by name
hv=$T/hd2/qk/tiny-hunyuan-dense
rm -rf "$T/hd2/qk" && mkdir "$T/hd2/qk" && cp -r "$H" "$T/hd2/qk/" && sed -i 's/^{/{"use_qk_norm": true,/' "$hv/config.json"
for s in hf:2 hf:4 vllm:2 vllm:4; do
  IFS=: read -r lay tp <<<"$s"
  rm -rf "$T/o" "$T/o.safetensors"
  if "$TPCONV" shard "$hv" --tp "$tp" --layout "$lay" -o "$T/o" -q 2> "$T/err" &&
     "$TPCONV" merge "$T/o" -o "$T/o.safetensors" -q 2>> "$T/err" && cmp -s "$H/model.safetensors" "$T/o.safetensors" &&
     "$TPCONV" verify --reference "$hv" --shards "$T/o" > "$T/out" 2>> "$T/err" &&
     grep -Eq '^ +attn +model\.layers\.1\.attn .* pass' "$T/out" && grep -Eq '^ +model +model .* pass' "$T/out"; then
    ok "hunyuan-dense $lay tp $tp: sharded, merged back byte-identical, verify's attention and model checks pass"
  else
    bad "hunyuan-dense $lay tp $tp: shard, merge, verify" "$(cat "$T/err")" "$(grep -v ' pass' "$T/out" | tail -4)"
  fi
done
rm -rf "$T/o"
"$TPCONV" shard "$H" --tp 2 --layout vllm -o "$T/o" -q 2> "$T/err"; rc=$?
if [ $rc -eq 3 ] && grep -qF "config.json's use_qk_norm is not true: vLLM's HunYuanDenseV1ForCausalLM model reads it as false" "$T/err" &&
   [ ! -e "$T/o/tpconv-manifest.json" ]; then
  ok "hunyuan-dense: the vllm layout without use_qk_norm in config.json refused by name (exit 3)"
else
  bad "hunyuan-dense: vllm without use_qk_norm (exit $rc)" "$(cat "$T/err")"
fi
# a quantized GGUF's gate and up cannot be fused back into input_linear (a
# block tensor is not concatenated): refused by name, nothing written
rm -rf "$T/q" && mkdir "$T/q"
"$TPCONV" convert "$O" -o "$T/q/q.gguf" --outtype q8_0 -q 2> "$T/err" &&
  "$TPCONV" convert "$T/q/q.gguf" -o "$T/q/hf/" -q 2> "$T/err"; rc=$?
if [ $rc -eq 3 ] && grep -qF "tensor 'blk.0.ffn_gate_exps.weight': a quantized part of Hugging Face's fused 'model.layers.0.block_sparse_moe.input_linear.weight'" "$T/err" &&
   [ ! -e "$T/q/hf/model.safetensors" ]; then
  ok "granitemoe: a q8_0 GGUF into Hugging Face form is refused by name (exit 3)"
else
  bad "granitemoe: q8_0 GGUF -> HF (exit $rc)" "$(cat "$T/err")"
fi
# Gemma 3 text (make_arch_fixtures.py gemma3: five sliding layers then a
# full one, a rope per layer type, the final softcap): GGUF -> HF -> GGUF byte
# for byte, rope_parameters rebuilt per layer type from freq_base and
# freq_base_swa; a scaled sliding-layer rope (not in the GGUF: llama.cpp
# scales no sliding layer), a full layer where llama.cpp's gemma3 assumes a
# sliding one, and attn_logit_softcapping (the reference asserts it absent)
# refused by name
O=$A/tiny-gemma3
rm -rf "$T/g3" && mkdir "$T/g3"
if "$TPCONV" convert "$O" -o "$T/g3/o.gguf" --outtype f32 -q 2> "$T/err" &&
   "$TPCONV" convert "$T/g3/o.gguf" -o "$T/g3/tiny-gemma3/" -q 2>> "$T/err" &&
   rm "$T/g3/tiny-gemma3/tokenizer.json" &&
   "$TPCONV" convert "$T/g3/tiny-gemma3" -o "$T/g3/back.gguf" --outtype f32 -q 2>> "$T/err" &&
   cmp -s "$T/g3/o.gguf" "$T/g3/back.gguf" &&
   tr -d ' \n' < "$T/g3/tiny-gemma3/config.json" | grep -qF '"rope_parameters":{"full_attention":{"rope_theta":1000000,"rope_type":"linear","factor":8},"sliding_attention":{"rope_type":"default","rope_theta":10000}}'; then
  ok "gemma3: GGUF -> HF folder -> GGUF byte-identical, rope_parameters per layer type read back"
else
  bad "gemma3: GGUF -> HF -> GGUF" "$(cat "$T/err")" "$(cat "$T/g3/tiny-gemma3/config.json" 2>/dev/null)"
fi
# the same model in the config.json form the published Gemma 3 checkpoints
# have (rope_theta, rope_local_base_freq, a flat linear rope_scaling; no
# per-layer-type rope_parameters): the reference's file is tiny-gemma3's f32
# one (run by hand in the chroot: ref_convert.py, same sha256); the folder
# named as the model (general.name comes from it)
mkdir "$T/g3/h" && cp -r "$O" "$T/g3/h/"
python3 - "$T/g3/h/tiny-gemma3/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); del c["rope_parameters"]
c.update(rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling={"rope_type": "linear", "factor": 8.0})
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
if is_ref "$T/g3/h/tiny-gemma3" "$(ref_sum gemma3)"; then
  ok "gemma3 with rope_local_base_freq and a flat rope_scaling (the Hub's form): the reference's file"
else
  bad "gemma3 in the Hub's rope form" "$(cat "$T/err")"
fi
cp -r "$O" "$T/g3/m"
sed -i '/"sliding_attention": {/,/}/s/"rope_type": "default"/"rope_type": "linear", "factor": 2.0/' "$T/g3/m/config.json"
refuse "gemma3: a scaled sliding-layer rope is refused by name" "rope_parameters.sliding_attention's rope_type is not 'default'" "$T/g3/m"
cp "$O/config.json" "$T/g3/m/config.json"
sed -i '0,/"sliding_attention",/s//"full_attention",/' "$T/g3/m/config.json"
refuse "gemma3: a full layer where llama.cpp's gemma3 slides is refused by name" "makes layer 0 attend globally" "$T/g3/m"
cp "$O/config.json" "$T/g3/m/config.json"
sed -i 's/"attn_logit_softcapping": null/"attn_logit_softcapping": 50.0/' "$T/g3/m/config.json"
refuse "gemma3: attn_logit_softcapping is refused by name" "'attn_logit_softcapping' is not written to GGUF" "$T/g3/m"
echo "1..$n"
[ $failed -eq 0 ]
