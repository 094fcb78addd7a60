#!/usr/bin/env bash
# merge --recipe (TAP): mergekit recipes over tiny models (tests/mix, made by
# make_mix.py with Debian's torch: the models, the recipes and ref-*.safetensors,
# a torch re-implementation of mergekit's methods that cites the lines it
# follows). Each method bit for bit in f32 (linear with a gradient and a
# filter, task_arithmetic with lambda, ties, dare_ties, dare_linear,
# breadcrumbs, breadcrumbs_ties, della, della_linear, model_stock, slerp,
# passthrough slices
# with per-filter gradients and its lerp fallback); bf16 inputs rounded once,
# bit for bit; DARE the same at 1 and 4 threads, another seed another mask;
# tied embeddings kept tied; a torch input and output; refusals with their messages, exit 3 and nothing
# written.
# usage: mix_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/lib/tap.sh"
tmpdir
F=$SRC/tests/mix
cd "$F" || exit 1

merged() { # merged DESC RECIPE REF [ARGS...]: merge --recipe RECIPE equals REF bit for bit
  local d=$1 r=$2 ref=$3
  shift 3
  rm -f "$T/o.safetensors"
  if "$TPCONV" merge --recipe "$r" -o "$T/o.safetensors" -q "$@" 2>"$T/err" &&
     "$TPCONV" diff "$T/o.safetensors" "$ref" >"$T/diff" 2>&1; then ok "$d"
  else bad "$d" "$(cat "$T/err" "$T/diff" | tail -6)"; fi
}
if [ "${SAN:-0}" = 1 ]; then
  merged "ties (sanitizer build): the re-implementation's bits" ties.yaml ref-ties.safetensors
  done_testing
  exit
fi
merged "linear, a weight gradient and a filter: bit for bit in f32" linear.yaml ref-linear.safetensors
merged "task_arithmetic with lambda: bit for bit in f32" task_arithmetic.yaml ref-task_arithmetic.safetensors
merged "ties (magnitude trim, sign election, disjoint mean; int8_mask ignored): bit for bit in f32" ties.yaml ref-ties.safetensors
merged "dare_ties, seed 7, L1 rescale: bit for bit in f32" dare_ties.yaml ref-dare_ties.safetensors --seed 7
merged "dare_linear without rescale, normalized: bit for bit in f32" dare_linear.yaml ref-dare_linear.safetensors
merged "breadcrumbs (the largest gamma and the smallest dropped; gamma 0.01 by default, none at 16 elements): bit for bit in f32" breadcrumbs.yaml ref-breadcrumbs.safetensors
merged "breadcrumbs_ties with L1 rescale and a density gradient: bit for bit in f32" breadcrumbs_ties.yaml ref-breadcrumbs_ties.safetensors
merged "della (MagPrune by rank within rows, seed 5, L1 rescale, TIES election, lambda): bit for bit in f32" della.yaml ref-della.safetensors --seed 5
merged "della_linear without rescale, normalized: bit for bit in f32" della_linear.yaml ref-della_linear.safetensors
merged "model_stock of 3 models (t from the mean pairwise cosine of the offsets): bit for bit in f32" model_stock.yaml ref-model_stock.safetensors
merged "model_stock filter_wise (a t per row): bit for bit in f32" model_stock_fw.yaml ref-model_stock_fw.safetensors
merged "slerp, t per filter across layers, lerp where nearly colinear: bit for bit in f32" slerp.yaml ref-slerp.safetensors
merged "linear of bf16 models: the f32 merge rounded once, bit for bit" b-linear.yaml ref-b-linear.safetensors
"$TPCONV" diff --ulps bf16=1 "$T/o.safetensors" ref-b-linear-bf16.safetensors >"$T/diff" 2>&1 &&
  ok "linear of bf16 models: within one bf16 ULP of mergekit's arithmetic in bf16" || bad "bf16 ULP" "$(tail -4 "$T/diff")"
merged "ties of bf16 models: the f32 merge rounded once, bit for bit" b-ties.yaml ref-b-ties.safetensors

# DARE's mask: the same bits at any thread count (tensors of 8192 elements,
# computed by OpenMP threads from 4096), another seed another mask
python3 - "$T" <<'PY'
import json, random, struct, sys
for i, n in enumerate(["big0", "big1", "big2"]):
    r = random.Random(i)
    x = struct.pack("<8192f", *(r.gauss(0, 1) for _ in range(8192)))
    h = json.dumps({"w.weight": {"dtype": "F32", "shape": [128, 64], "data_offsets": [0, len(x)]}}).encode()
    h += b" " * (-len(h) % 8)
    open(f"{sys.argv[1]}/{n}.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + x)
PY
printf 'models:\n  - model: %s/big1.safetensors\n    parameters: {weight: 0.6, density: 0.3}\n  - model: %s/big2.safetensors\n    parameters: {weight: 0.4, density: 0.5}\nbase_model: %s/big0.safetensors\nmerge_method: dare_ties\n' \
  "$T" "$T" "$T" >"$T/big.yaml"
OMP_NUM_THREADS=1 "$TPCONV" merge --recipe "$T/big.yaml" --seed 7 -o "$T/t1.safetensors" -q &&
  OMP_NUM_THREADS=4 "$TPCONV" merge --recipe "$T/big.yaml" --seed 7 -o "$T/t4.safetensors" -q &&
  cmp -s "$T/t1.safetensors" "$T/t4.safetensors" && ok "dare_ties: 1 and 4 threads write the same bytes" ||
  bad "DARE across threads"
sed 's/dare_ties/della/; s/density: 0.3/density: 0.3, epsilon: 0.2/' "$T/big.yaml" >"$T/bigd.yaml"
OMP_NUM_THREADS=1 "$TPCONV" merge --recipe "$T/bigd.yaml" --seed 7 -o "$T/d1.safetensors" -q &&
  OMP_NUM_THREADS=4 "$TPCONV" merge --recipe "$T/bigd.yaml" --seed 7 -o "$T/d4.safetensors" -q &&
  cmp -s "$T/d1.safetensors" "$T/d4.safetensors" && ! cmp -s "$T/d1.safetensors" "$T/t1.safetensors" &&
  ok "della: 1 and 4 threads write the same bytes (rows of 64 across 16384-element steps)" || bad "della across threads"
"$TPCONV" merge --recipe "$T/big.yaml" --seed 8 -o "$T/s8.safetensors" -q && ! cmp -s "$T/t1.safetensors" "$T/s8.safetensors" &&
  ok "dare_ties: seed 8 is another mask" || bad "DARE seed"

# passthrough: a frankenmerge of tiny-llama (layers 0-1, 0 halved, 1), the
# layers renamed by the llama record's templates, config.json restacked
rm -rf "$T/pass"
"$TPCONV" merge --recipe passthrough.yaml -o "$T/pass" -q 2>"$T/err" &&
  "$TPCONV" diff "$T/pass/model.safetensors" ref-passthrough.safetensors >"$T/diff" 2>&1 &&
  grep -q '"num_hidden_layers": 4' "$T/pass/config.json" && [ -f "$T/pass/tokenizer.model" ] &&
  ok "passthrough slices (a layer again with a filtered scale): bit for bit in f32, num_hidden_layers 4" ||
  bad "passthrough" "$(cat "$T/err" "$T/diff" | tail -6)"

# tied embeddings (torch.save's one storage) in every input: merged once (DARE's
# mask is the first name's), written tied: one storage in torch, one copy and
# an alias with --dedup-tied; an input where they are two is refused
merged "tied embed_tokens/lm_head: lm_head is embed_tokens' merge, bit for bit" tied.yaml ref-tied.safetensors --seed 3
rm -f "$T/tied.pt" "$T/tied.safetensors"
"$TPCONV" merge --recipe tied.yaml --seed 3 -o "$T/tied.pt" -q && "$TPCONV" inspect "$T/tied.pt" >"$T/out" 2>&1 &&
  grep -q "^lm_head.weight .* storage 0 (shared)$" "$T/out" && grep -q "^model.embed_tokens.weight .* storage 0 (shared)$" "$T/out" &&
  ok "tied: a torch output keeps one storage for both" || bad "tied torch" "$(grep -E "lm_head|embed" "$T/out")"
"$TPCONV" merge --recipe tied.yaml --seed 3 --dedup-tied -o "$T/tied.safetensors" -q &&
  head -c 300 "$T/tied.safetensors" | grep -q '"tpconv.aliases":"{\\"lm_head.weight\\":\\"model.embed_tokens.weight\\"}"' &&
  "$TPCONV" diff "$T/tied.safetensors" ref-tied.safetensors >"$T/diff" 2>&1 &&
  ok "tied: --dedup-tied stores it once with its alias, read back equal" || bad "tied dedup" "$(head -c 300 "$T/tied.safetensors"; tail -3 "$T/diff")"

# inputs and outputs in other formats; out_dtype
mkdir -p "$T/in" && "$TPCONV" convert m2.safetensors -o "$T/in/m2.bin" -q &&
  sed "s#m2.safetensors#$T/in/m2.bin#" ties.yaml >"$T/in/ties.yaml"
merged "a torch .bin among the inputs" "$T/in/ties.yaml" ref-ties.safetensors
rm -f "$T/o.pt"
"$TPCONV" merge --recipe ties.yaml -o "$T/o.pt" -q && "$TPCONV" diff "$T/o.pt" ref-ties.safetensors >"$T/diff" 2>&1 &&
  ok "a torch output" || bad "torch output" "$(tail -4 "$T/diff")"
sed 's/^dtype: float32/dtype: bfloat16/' linear.yaml >"$T/in/linear-bf16.yaml" && sed -i "s#model: #model: $F/#" "$T/in/linear-bf16.yaml"
"$TPCONV" convert ref-linear.safetensors --dtype bf16 -o "$T/ref-bf16.safetensors" -q
merged "dtype: bfloat16 over f32 models: the f32 merge rounded once" "$T/in/linear-bf16.yaml" "$T/ref-bf16.safetensors"
# a model merged with its own copy is itself: a GGUF input read as its Hugging
# Face model, and a q8_0 GGUF output (Q/K rows permuted from merged windows)
# byte for byte convert's
A=$SRC/tests/gguf/arch/tiny-llama
"$TPCONV" convert "$A" -o "$T/a.gguf" --outtype f32 -q && "$TPCONV" convert "$A" -o "$T/ref8.gguf" --outtype q8_0 -q
printf 'models:\n  - model: %s\n    parameters: {weight: 0.5}\n  - model: %s\n    parameters: {weight: 0.5}\nmerge_method: linear\n' \
  "$T/a.gguf" "$A" >"$T/self.yaml"
merged "a GGUF input with its Hugging Face folder: the model itself" "$T/self.yaml" "$A/model.safetensors"
sed -i "s#$T/a.gguf#$A/#" "$T/self.yaml" && mkdir -p "$T/cp" && cp -r "$A" "$T/cp/" && sed -i "s#model: $A\$#model: $T/cp/tiny-llama#" "$T/self.yaml"
rm -f "$T/m8.gguf"
"$TPCONV" merge --recipe "$T/self.yaml" -o "$T/m8.gguf" --outtype q8_0 -q 2>"$T/err" && cmp -s "$T/m8.gguf" "$T/ref8.gguf" &&
  ok "a GGUF q8_0 output: convert's GGUF of the model, byte for byte" || bad "GGUF output" "$(cat "$T/err"; cat "$T/self.yaml")"
# GGUF in, GGUF out: read with GGUF names (the KVs kept), as convert does; a
# filter written for Hugging Face names then matches nothing: refused
cp "$T/a.gguf" "$T/b.gguf" && "$TPCONV" convert "$T/a.gguf" -o "$T/a2.gguf" -q
printf 'models:\n  - model: %s\n  - model: %s\nbase_model: %s\nmerge_method: slerp\nparameters: {t: 0.5}\n' \
  "$T/a.gguf" "$T/b.gguf" "$T/a.gguf" >"$T/gg.yaml"
rm -f "$T/gg.gguf"
"$TPCONV" merge --recipe "$T/gg.yaml" -o "$T/gg.gguf" -q 2>"$T/err" && cmp -s "$T/gg.gguf" "$T/a2.gguf" &&
  ok "GGUF inputs to a GGUF output: a model slerped with its copy is convert's GGUF, byte for byte" || bad "GGUF to GGUF" "$(cat "$T/err")"
sed -i 's/{t: 0.5}/{t: [{filter: self_attn, value: 0.3}, {value: 0.5}]}/' "$T/gg.yaml"
rm -f "$T/gg2.gguf"
"$TPCONV" merge --recipe "$T/gg.yaml" -o "$T/gg2.gguf" 2>"$T/err"
[ $? = 3 ] && grep -q "parameter 't': filter 'self_attn' is in no tensor's name" "$T/err" && [ ! -e "$T/gg2.gguf" ] &&
  ok "refused: a filter no tensor name holds (Hugging Face names on a GGUF read as GGUF)" || bad "filter on GGUF names" "$(cat "$T/err")"
run "$TPCONV" merge --recipe slerp.yaml --dry-run
[ $rc = 0 ] && grep -q "^model.layers.0.self_attn.q_proj.weight  F32 \[16, 16\]$" "$T/out" && grep -q "inv_freq_steps  I64 \[8\]  (kept)" "$T/out" &&
  ok "--dry-run lists the merged tensors, the kept integer one marked" || bad "dry run" "$(cat "$T/out" "$T/err" | head)"

# refusals: exit 3, the message, nothing written
refused() { # refused DESC RECIPE-TEXT PATTERN [EXIT]
  printf '%s\n' "$2" >"$T/r.yaml"
  rm -f "$T/h.safetensors"
  "$TPCONV" merge --recipe "$T/r.yaml" -o "$T/h.safetensors" 2>"$T/err"
  local rc=$?
  if [ $rc = "${4:-3}" ] && grep -q -- "$3" "$T/err" && [ ! -e "$T/h.safetensors" ]; then ok "refused: $1"
  else bad "refused: $1 (exit $rc)" "$(cat "$T/err")"; fi
}
M="models: [{model: $F/m1.safetensors, parameters: {weight: 1}}, {model: $F/m2.safetensors, parameters: {weight: 1}}]"
refused "a tensor missing from one model" "models: [{model: $F/m1.safetensors, parameters: {weight: 1}}, {model: $F/m-missing.safetensors, parameters: {weight: 1}}]
merge_method: linear" "tensor 'model.layers.1.mlp.up_proj.weight': missing: it is in"
refused "a tensor of another shape" "models: [{model: $F/m1.safetensors, parameters: {weight: 1}}, {model: $F/m-shape.safetensors, parameters: {weight: 1}}]
merge_method: linear" "tensor 'lm_head.weight': shape \[33, 16\], in '$F/m1.safetensors' \[32, 16\]"
refused "slices with a method other than passthrough" "slices: []
merge_method: linear" "'slices' are read with merge_method passthrough only (a frankenmerge), not linear"
refused "a method not read" "$M
merge_method: nuslerp" "merge_method 'nuslerp' is not read"
refused "passthrough without slices" "$M
merge_method: passthrough" "passthrough reads 'slices'"
TL=$SRC/tests/gguf/arch/tiny-llama
refused "passthrough: two sources in a slice" "slices: [{sources: [{model: $TL, layer_range: [0, 1]}, {model: $F/m1.safetensors, layer_range: [0, 1]}]}]
merge_method: passthrough" "a passthrough slice has one source"
refused "passthrough: a layer_range past the model's layers" "slices: [{sources: [{model: $TL, layer_range: [1, 3]}]}]
merge_method: passthrough" "layer_range \[1, 3\] of '$TL': it has 2 layers"
refused "passthrough: layer_range [2, 1]" "slices: [{sources: [{model: $TL, layer_range: [2, 1]}]}]
merge_method: passthrough" "model '$TL': layer_range is \[a, b\], whole numbers, 0 <= a < b"
refused "passthrough: a model without a config.json naming its family" "slices: [{sources: [{model: $F/m1.safetensors, layer_range: [0, 1]}]}]
merge_method: passthrough" "passthrough renumbers layers by the family record's tensor names"
printf 'slices: [{sources: [{model: %s, layer_range: [0, 1]}]}]\nmerge_method: passthrough\n' "$TL" >"$T/pg.yaml"
run "$TPCONV" merge --recipe "$T/pg.yaml" -o "$T/pg.gguf"
[ $rc = 2 ] && grep -q "passthrough writes a checkpoint with its config.json" "$T/err" && [ ! -e "$T/pg.gguf" ] &&
  ok "usage: passthrough to a GGUF (exit 2)" || bad "passthrough gguf" "$(cat "$T/err")"
refused "a parameter the method does not take" "$M
merge_method: linear
parameters: {t: 0.5}" "parameter 't' is not one merge_method linear takes"
refused "a merge parameter given to a model" "models: [{model: $F/m1.safetensors, parameters: {weight: 1, normalize: false}}]
merge_method: linear" "parameter 'normalize' is the merge's, not a model's"
refused "a model given twice" "models: [{model: $F/m1.safetensors}, {model: $F/m1.safetensors}]
merge_method: linear" "model '$F/m1.safetensors' is given twice"
refused "a missing weight" "models: [{model: $F/m1.safetensors}, {model: $F/m2.safetensors, parameters: {weight: 1}}]
merge_method: linear" "no 'weight' for model '$F/m1.safetensors'"
refused "density outside (0, 1]" "$M
base_model: $F/base.safetensors
merge_method: ties
parameters: {density: 1.5}" "density 1.5 of model '$F/m1.safetensors' is outside (0, 1\]"
refused "gamma outside [0, 1)" "$M
base_model: $F/base.safetensors
merge_method: breadcrumbs
parameters: {density: 0.5, gamma: 1}" "gamma 1 of model '$F/m1.safetensors' is outside \[0, 1)"
refused "della: density + epsilon outside (0, 1)" "$M
base_model: $F/base.safetensors
merge_method: della
parameters: {density: 0.9, epsilon: 0.15}" "epsilon 0.15 with density 0.9 of model '$F/m1.safetensors': density - epsilon and density + epsilon must be inside (0, 1)"
refused "model_stock of the base and one model" "models: [{model: $F/m1.safetensors}]
base_model: $F/base.safetensors
merge_method: model_stock" "model_stock merges the base_model and two models or more"
refused "a tie of the base that another model does not have" "models: [{model: $F/m1-tied.bin, parameters: {weight: 1}}, {model: $F/m3.safetensors, parameters: {weight: 1}}]
base_model: $F/base-tied.bin
merge_method: task_arithmetic" "tensor 'lm_head.weight': not tied to 'model.embed_tokens.weight' as in '$F/base-tied.bin' (one weight there): merged it would be two"
refused "gamma to a method without outliers" "$M
base_model: $F/base.safetensors
merge_method: ties
parameters: {gamma: 0.1}" "parameter 'gamma' is not one merge_method ties takes"
refused "slerp of three" "models: [{model: $F/m1.safetensors}, {model: $F/m2.safetensors}]
base_model: $F/base.safetensors
merge_method: slerp
parameters: {t: 0.5}" "slerp merges two models"
refused "a mergekit LoRA reference" "models: [{model: $F/m1.safetensors+some/lora}]
merge_method: linear" "a model+LoRA reference is not read"
refused "YAML: an anchor, by line" "merge_method: linear
models: &m [1]" "line 2: anchors (&) are not read"
refused "YAML: a tab in the indentation" "models:
	- model: a" "line 2: a tab in the indentation"
refused "YAML: a block scalar" "merge_method: |
  linear" "line 1: block scalars (| >) are not read"
refused "YAML: a flow sequence not closed on its line" "models: [a,
  b]" "line 1: a flow collection must close on its line"
refused "YAML: a key given twice" "merge_method: linear
merge_method: ties" "line 2: a key given twice in one mapping"
run "$TPCONV" merge --recipe linear.yaml "$T" -o "$T/x.safetensors"
[ $rc = 2 ] && grep -q "no DIR" "$T/err" && ok "usage: --recipe with a DIR (exit 2)" || bad "recipe and DIR" "$(cat "$T/err")"
run "$TPCONV" merge --recipe linear.yaml --tp 2 -o "$T/x.safetensors"
[ $rc = 2 ] && grep -q "a shard set's options" "$T/err" && ok "usage: --tp with --recipe (exit 2)" || bad "recipe and --tp" "$(cat "$T/err")"
done_testing
