#!/usr/bin/env bash
# convert --dequantize of 4-bit float weights (TAP): compressed-tensors NVFP4 and
# MXFP4 and NVIDIA ModelOpt NVFP4 folders (tests/quant/fp4, made by
# make_fp4.py in the forky chroot: compressed-tensors 0.17 wrote the dense
# weights its own decompressor gives, ref.safetensors) and a gpt-oss with its
# own MXFP4 experts (make_gptoss_mxfp4.py: transformers' convert_moe_packed_tensors
# gave the reference), each converted to bf16 and compared byte for byte;
# gpt-oss sharded with --dequantize equal to sharding the dense model; GGUF
# MXFP4/NVFP4 blocks read as python3-gguf dequantizes them; ModelOpt's scheme from hf_quant_config.json
# alone; hostile variants refused with their messages, nothing written.
# usage: fp4_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/lib/tap.sh"
tmpdir
F=$SRC/tests/quant/fp4

for d in ct-nvfp4 ct-mxfp4 modelopt gptoss-mxfp4; do
  rm -f "$T/o.safetensors"
  if "$TPCONV" convert --dequantize "$F/$d/" -o "$T/o.safetensors" -q 2>"$T/err" &&
     "$TPCONV" diff "$T/o.safetensors" "$F/$d/ref.safetensors" >"$T/diff" 2>&1; then
    ok "$d: the dense bf16 weights are its producer's decoder's, byte for byte"
  else bad "$d: dequantized as its producer decodes" "$(cat "$T/err" "$T/diff" | head -8)"; fi
done
# ModelOpt's scheme in hf_quant_config.json, config.json without a quantization_config
mkdir -p "$T/mo" && cp "$F/modelopt/model.safetensors" "$F/modelopt/hf_quant_config.json" "$T/mo/"
echo '{"architectures": ["LlamaForCausalLM"], "dtype": "bfloat16"}' > "$T/mo/config.json"
rm -f "$T/o.safetensors"
"$TPCONV" convert --dequantize "$T/mo/" -o "$T/o.safetensors" -q 2>"$T/err" &&
  "$TPCONV" diff "$T/o.safetensors" "$F/modelopt/ref.safetensors" >"$T/diff" 2>&1 &&
  ok "ModelOpt NVFP4 named by hf_quant_config.json alone" || bad "hf_quant_config.json" "$(cat "$T/err" "$T/diff" | head -5)"
"$TPCONV" inspect --dequantize "$F/ct-nvfp4/" > "$T/insp" 2>&1
grep -q "model.layers.0.mlp.down_proj.weight .*BF16 .*\[48, 64\].*dequantized from model.layers.0.mlp.down_proj.weight_packed" "$T/insp" &&
  ok "inspect --dequantize lists the dense weight and what it comes from" || bad "inspect --dequantize" "$(head -5 "$T/insp")"

# gpt-oss's MXFP4 experts [E, R, I/32, 16] sharded with --dequantize: every rank
# file holds the tensors sharding the dequantized model gives (tp splits the
# inputs of down_proj expert by expert, --ep whole experts)
mkdir -p "$T/ref" && cp "$F/gptoss-mxfp4/ref.safetensors" "$T/ref/model.safetensors"
python3 - "$F/gptoss-mxfp4/config.json" "$T/ref/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c.pop("quantization_config"); json.dump(c, open(sys.argv[2], "w"))
PY
for s in "--tp 2" "--tp 4 --ep 2"; do
  [ "$SAN" = 1 ] && [ "$s" != "--tp 2" ] && continue
  rm -rf "$T/qs" "$T/rs"
  if "$TPCONV" shard --dequantize "$F/gptoss-mxfp4/" $s -o "$T/qs" -q 2>"$T/err" && "$TPCONV" shard "$T/ref/" $s -o "$T/rs" -q 2>>"$T/err"; then
    good=1
    for f in "$T"/rs/*.safetensors; do same "$f" "$T/qs/${f##*/}" || { good=0; break; }; done
    [ $good = 1 ] && ok "gpt-oss MXFP4 experts, shard --dequantize $s: the ranks of the dequantized model" ||
      bad "gpt-oss MXFP4 shard --dequantize $s" "$(head -5 "$T/diff")"
  else bad "gpt-oss MXFP4 shard --dequantize $s" "$(cat "$T/err")"; fi
done

# split without dequantizing (as vLLM loads them): the packed bytes and their
# scales by rows (column-parallel) or by whole scale groups (row-parallel), the
# per-tensor scales on every rank; merge gives the file's tensors back, and
# every rank dequantizes to its slice of the dense model (shard --dequantize)
HD=(--heads 4 --kv-heads 4 --head-dim 8)   # the fixtures' config.json has no attention facts
for d in ct-nvfp4 ct-mxfp4 modelopt; do
  [ "$SAN" = 1 ] && [ $d != ct-nvfp4 ] && continue   # sanitizer build: one of the three
  rm -rf "$T/ps" "$T/pd" "$T/pm.safetensors"
  if "$TPCONV" shard "$F/$d/" --tp 2 "${HD[@]}" -o "$T/ps" -q 2>"$T/err" &&
     "$TPCONV" merge "$T/ps" -o "$T/pm.safetensors" -q 2>>"$T/err" && same "$T/pm.safetensors" "$F/$d/model.safetensors" &&
     "$TPCONV" shard --dequantize "$F/$d/" --tp 2 "${HD[@]}" -o "$T/pd" -q 2>>"$T/err"; then
    good=1
    for r in 0 1; do
      rm -rf "$T/rk" && mkdir "$T/rk" && cp "$T/ps/model_tp0${r}_pp00.safetensors" "$T/rk/model.safetensors" && cp "$F/$d/"*.json "$T/rk/"
      "$TPCONV" convert --dequantize "$T/rk/" -o "$T/rk.safetensors" --force -q 2>>"$T/err" &&
        same "$T/rk.safetensors" "$T/pd/model_tp0${r}_pp00.safetensors" || good=0
    done
    [ $good = 1 ] && ok "$d sharded packed at tp 2: merge gives the file back, each rank dequantizes to its dense slice" ||
      bad "$d sharded packed: each rank dequantizes to its dense slice" "$(cat "$T/err" "$T/diff" | head -5)"
  else bad "$d sharded packed at tp 2, merged back" "$(cat "$T/err" "$T/diff" | head -5)"; fi
done
rm -rf "$T/ps"
"$TPCONV" shard "$F/ct-mxfp4/" --tp 4 "${HD[@]}" -o "$T/ps" -q 2>"$T/err"; rc=$?
[ $rc = 3 ] && grep -qF "tensor 'model.layers.0.mlp.down_proj.weight_scale': its layer 'model.layers.0.mlp.down_proj.weight' is split row into 16 input features per rank, not a multiple of 32 (the inputs of one FP4 scale)" "$T/err" &&
  [ ! -e "$T/ps/tpconv-manifest.json" ] && ok "MXFP4 row-parallel at tp 4 (16 inputs a rank, 32 a scale): refused naming the numbers" ||
  bad "MXFP4 row split inside a scale group refused" "exit $rc" "$(cat "$T/err")"

# gpt-oss's MXFP4 experts to GGUF as the reference writes them (GptOssModel:
# the blocks repacked into GGUF MXFP4, never dequantized, whatever the
# outtype; file_type MOSTLY_MXFP4_MOE but for q8_0): the whole file equals
# convert_hf_to_gguf.py's (make_gptoss_mxfp4_gguf.py: gptoss-mxfp4-gguf.sha256;
# gptoss-mxfp4-bf16.txt lists the bf16 file) byte for byte
G=$T/g/tiny-gpt-oss   # the folder's name is general.name
mkdir -p "$G" && cp "$F/gptoss-mxfp4/config.json" "$F/gptoss-mxfp4/model.safetensors" "$G/" &&
  cp "$SRC/tests/gguf/arch/tiny-gpt-oss/"tokenizer*.json "$SRC/tests/gguf/arch/tiny-gpt-oss/generation_config.json" "$G/"
for ot in f32 f16 bf16 q8_0 auto; do
  [ "$SAN" = 1 ] && [ $ot != bf16 ] && continue
  want=$(awk -v n="gpt-oss-mxfp4-$ot.gguf" '$2 == n {print $1}' "$F/gptoss-mxfp4-gguf.sha256")
  rm -f "$T/mx.gguf"
  if "$TPCONV" convert "$G" -o "$T/mx.gguf" --outtype $ot -q 2>"$T/err" && [ "$(sha256sum < "$T/mx.gguf" | cut -d' ' -f1)" = "$want" ]; then
    ok "gpt-oss MXFP4 -> GGUF --outtype $ot: convert_hf_to_gguf.py's file, the experts repacked as MXFP4"
  else bad "gpt-oss MXFP4 -> GGUF --outtype $ot equals the reference" "$(cat "$T/err")" "$("$TPCONV" inspect "$T/mx.gguf" 2>&1 | grep -m3 exps)"; fi
done
rm -f "$T/mx.gguf"
"$TPCONV" convert --dequantize "$G" -o "$T/mx.gguf" -q 2>"$T/err"; rc=$?
[ $rc = 3 ] && grep -qF "tensor 'model.layers.0.mlp.experts.down_proj': cannot transpose this tensor's experts once dequantized (without --dequantize MXFP4 blocks go to GGUF as MXFP4)" "$T/err" &&
  [ ! -e "$T/mx.gguf" ] && ok "gpt-oss MXFP4 -> GGUF with --dequantize: refused naming the tensor and the way that works" ||
  bad "gpt-oss MXFP4 -> GGUF --dequantize refused" "exit $rc" "$(cat "$T/err")"

# gpt-oss's MXFP4 experts sharded without --dequantize, as vLLM's gpt_oss.py
# load_weights narrows them (gptoss-mxfp4-wide: make_gptoss_mxfp4_wide.py,
# intermediate 128 = 4 blocks of 32 inputs): gate_up_proj_blocks/_scales by
# whole rows (dim 1, [gate, up] pairs), down_proj's by whole blocks of inputs
# (dim 2), --ep by experts; merge gives every tensor back, verify passes with
# its forward computed (the experts dense, each dequantized from its blocks
# when read: col/row per expert, the MoE blocks, the model) on the set and on
# one rank holding the whole packed model (--tp 1), and (--ep 2) every rank's
# experts dequantize to that rank of shard --dequantize, tensor for tensor
W=$F/gptoss-mxfp4-wide
fwd() {   # verify's report $1 has the dense experts' checks and the forward, all passing
  grep -q "^  row  *model.layers.1.mlp.experts.down_proj\[3\] .* pass$" "$1" &&
    grep -q "^  col  *model.layers.0.mlp.experts.gate_up_proj\[0\] .* pass$" "$1" &&
    grep -q "^  mlp  *model.layers.1.moe .* pass$" "$1" && grep -q "^  model  *model .* pass  top-1 8/8$" "$1"
}
for s in "--tp 1" "--tp 2" "--tp 4" "--tp 4 --ep 2"; do
  [ "$SAN" = 1 ] && [ "$s" != "--tp 4 --ep 2" ] && continue
  rm -rf "$T/ws" "$T/wd" "$T/wm.safetensors"
  tp=${s#--tp }; tp=${tp%% *}; [ "$s" = "--tp 4 --ep 2" ] || tp=0
  if "$TPCONV" shard "$W/" $s -o "$T/ws" -q 2>"$T/err" && "$TPCONV" merge "$T/ws" -o "$T/wm.safetensors" -q 2>>"$T/err" &&
     same "$T/wm.safetensors" "$W/model.safetensors" && "$TPCONV" verify --reference "$W/" --shards "$T/ws" >"$T/vout" 2>>"$T/err" &&
     fwd "$T/vout" && { [ $tp = 0 ] || "$TPCONV" shard --dequantize "$W/" $s -o "$T/wd" -q 2>>"$T/err"; }; then
    good=1
    for ((r = 0; r < tp; r++)); do
      rm -rf "$T/rk" && mkdir "$T/rk" && cp "$T/ws/model_tp0${r}_pp00.safetensors" "$T/rk/model.safetensors" && cp "$W/config.json" "$T/rk/"
      "$TPCONV" convert --dequantize "$T/rk/" -o "$T/rk.safetensors" --force -q 2>>"$T/err" &&
        same "$T/rk.safetensors" "$T/wd/model_tp0${r}_pp00.safetensors" || { good=0; break; }
    done
    more=; [ $tp = 0 ] || more=", its $tp ranks dequantize to shard --dequantize's"
    [ $good = 1 ] && ok "gpt-oss MXFP4 experts sharded packed, $s: merged back, verify passes with the forward (each expert dense from its blocks)$more" ||
      bad "gpt-oss MXFP4 sharded packed $s: each rank dequantizes to its dense rank" "$(cat "$T/err" "$T/diff" | head -5)"
  else bad "gpt-oss MXFP4 sharded packed $s, merged back, verified" "$(cat "$T/err" "$T/diff" | head -5)" "$(grep -v pass "$T/vout" 2>/dev/null | head -5)"; fi
done
# ... and a rank whose blocks were swapped (layer 1's down_proj_blocks, experts
# 0 and 1 of rank 1) or whose scale is off by a binade (layer 0's
# gate_up_proj_scales, expert 3) fails verify naming the stored tensors and
# the dense experts, layers and model they break
if [ "$SAN" != 1 ]; then
  rm -rf "$T/ws" && "$TPCONV" shard "$W/" --tp 2 -o "$T/ws" -q 2>"$T/err"
  python3 - "$T/ws/model_tp01_pp00.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); o = 8 + n
t = h['model.layers.1.mlp.experts.down_proj_blocks']
s, e = t['data_offsets']; per = (e - s) // t['shape'][0]; a = o + s
b[a:a + per], b[a + per:a + 2 * per] = b[a + per:a + 2 * per], b[a:a + per]
s, e = h['model.layers.0.mlp.experts.gate_up_proj_scales']['data_offsets']
b[o + e - 1] ^= 1
open(p, 'wb').write(b)
PY
  "$TPCONV" verify --reference "$W/" --shards "$T/ws" >"$T/vout" 2>"$T/err"; rc=$?
  X=model.layers
  good=1
  for c in "structure  *$X.1.mlp.experts.down_proj_blocks\[0\]" "structure  *$X.1.mlp.experts.down_proj_blocks\[1\]" \
           "structure  *$X.0.mlp.experts.gate_up_proj_scales\[3\]" "row  *$X.1.mlp.experts.down_proj\[0\]" \
           "row  *$X.1.mlp.experts.down_proj\[1\]" "col  *$X.0.mlp.experts.gate_up_proj\[3\]" "mlp  *$X.0.moe" \
           "mlp  *$X.1.moe" "model  *model"; do
    grep -q "^  $c .* FAIL" "$T/vout" || { good=0; echo "# not failed: $c"; }
  done
  [ $rc = 1 ] && [ $good = 1 ] && [ "$(grep -c ' FAIL' "$T/vout")" = 12 ] &&
    grep -qF "the first layer whose output differs: 'model.layers.1'" "$T/vout" &&
    ok "gpt-oss MXFP4 tp 2, rank 1's blocks swapped and a scale off: verify fails naming the blocks, scales, dense experts, MoE blocks and model" ||
    bad "gpt-oss MXFP4 packed set with swapped blocks fails verify by name" "exit $rc" "$(grep FAIL "$T/vout" | head -14)"
fi
# one block of 32 intermediate features (gptoss-mxfp4) at tp 2: vLLM's cut
# gives rank 0 the block and rank 1 none (empty slices, as vLLM narrows them)
rm -rf "$T/ws" "$T/wm.safetensors"
if "$TPCONV" shard "$F/gptoss-mxfp4/" --tp 2 -o "$T/ws" -q 2>"$T/err" && "$TPCONV" merge "$T/ws" -o "$T/wm.safetensors" -q 2>>"$T/err" &&
   same "$T/wm.safetensors" "$F/gptoss-mxfp4/model.safetensors" &&
   "$TPCONV" verify --reference "$F/gptoss-mxfp4/" --shards "$T/ws" >"$T/vout" 2>>"$T/err" && fwd "$T/vout" &&
   grep -qF '"rank_sizes": [1, 0]' "$T/ws/tpconv-manifest.json"; then
  ok "gpt-oss MXFP4, one block at tp 2: rank 1 holds none (vLLM's cut), merged back, verify passes with the forward"
else bad "gpt-oss MXFP4, one block at tp 2: an empty rank 1" "$(cat "$T/err" "$T/diff" | head -5)" "$(grep -v pass "$T/vout" 2>/dev/null | head -5)"; fi

# ... whose intermediate is not a multiple of the ranks' blocks
# (gptoss-mxfp4-uneven: make_gptoss_mxfp4_wide.py with 224 = 7 blocks of 32):
# cut as vLLM's gpt_oss.py @0025d69 load_weights cuts it (cdiv(7, 4) = 2
# blocks a rank, the last rank 1, unpadded); every rank's blocks, scales and
# gate_up bias are vLLM's narrow of them (its formulas, read independently
# below), the manifest lists the rank sizes, merge gives every tensor back,
# verify passes with the forward; a tp vLLM does not load (224 % 3) and a
# manifest whose rank sizes lie are refused naming the numbers
U=$F/gptoss-mxfp4-uneven
for s in "--tp 4" "--tp 4 --ep 2"; do
  [ "$SAN" = 1 ] && [ "$s" != "--tp 4" ] && continue
  rm -rf "$T/us" "$T/um.safetensors"
  if "$TPCONV" shard "$U/" $s -o "$T/us" -q 2>"$T/err" && "$TPCONV" merge "$T/us" -o "$T/um.safetensors" -q 2>>"$T/err" &&
     same "$T/um.safetensors" "$U/model.safetensors" && "$TPCONV" verify --reference "$U/" --shards "$T/us" >"$T/vout" 2>>"$T/err" &&
     fwd "$T/vout" && { [ "$s" != "--tp 4" ] || python3 - "$U" "$T/us" 4 >"$T/vl" 2>&1 <<'PY'; }; then
import json, struct, sys
def st(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]
    return json.loads(b[8:8 + n]), b, 8 + n
def raw(f, name):
    h, b, o = f; s, e = h[name]['data_offsets']; return h[name]['shape'], b[o + s:o + e]
def narrow(shape, buf, esz, d, a, z):   # buf[..., a:z, ...] on dim d
    outer = 1
    for x in shape[:d]: outer *= x
    inner = esz
    for x in shape[d + 1:]: inner *= x
    return b''.join(buf[(i * shape[d] + a) * inner:(i * shape[d] + z) * inner] for i in range(outer))
src, sd, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = json.load(open(src + '/config.json')); ref = st(src + '/model.safetensors')
I = cfg['intermediate_size']; mxfp4_block = 32
per = -(-(I // mxfp4_block) // tp) * mxfp4_block     # cdiv(intermediate_size_block, tp_size) * mxfp4_block
bad = 0
for r in range(tp):
    rk = st('%s/model_tp%02d_pp00.safetensors' % (sd, r))
    start = r * per; end = min((r + 1) * per, I)        # tp_rank_start, tp_rank_end
    for l in range(cfg['num_hidden_layers']):
        X = 'model.layers.%d.mlp.experts.' % l
        for name, esz, d, a, z, view in (('gate_up_proj_blocks', 1, 1, 2 * start, 2 * end, None),
                                         ('gate_up_proj_scales', 1, 1, 2 * start, 2 * end, None),
                                         ('gate_up_proj_bias', 2, 1, 2 * start, 2 * end, None),
                                         ('down_proj_blocks', 1, 2, start // 2, end // 2, I // 2),
                                         ('down_proj_scales', 1, 2, start // mxfp4_block, end // mxfp4_block, None)):
            shape, buf = raw(ref, X + name)
            if view: shape = [shape[0], shape[1], view]     # weight.view(E, -1, intermediate_size // 2)
            if narrow(shape, buf, esz, d, a, z) != raw(rk, X + name)[1]:
                bad += 1; print('rank', r, X + name, 'is not vLLM\'s narrow [%d:%d]' % (a, z))
print('rank slices', 'differ' if bad else 'are vLLM\'s')
sys.exit(1 if bad else 0)
PY
    rs="2, 2, 2, 1"; [ "$s" = "--tp 4" ] || rs="4, 3"   # --ep 2: two ranks a group, cdiv(7, 2) = 4
    grep -qF "\"rank_sizes\": [$rs]" "$T/us/tpconv-manifest.json" &&
      ok "gpt-oss MXFP4, intermediate 7 blocks, $s: vLLM's uneven cut ($rs blocks a rank, unpadded), merged back, verify passes with the forward" ||
      bad "gpt-oss MXFP4 uneven $s: the manifest lists the rank sizes" "$(grep -o '"rank_sizes[^]]*]' "$T/us/tpconv-manifest.json" | head -3)"
  else bad "gpt-oss MXFP4 uneven $s: vLLM's cut, merged back, verified" "$(cat "$T/err" "$T/diff" "$T/vl" 2>/dev/null | head -6)" "$(grep -v pass "$T/vout" 2>/dev/null | head -5)"; fi
done
if [ "$SAN" != 1 ]; then
  rm -rf "$T/uu"; "$TPCONV" shard "$U/" --tp 3 -o "$T/uu" -q 2>"$T/err"; rc=$?
  [ $rc = 3 ] && [ ! -e "$T/uu" ] && grep -qF "its layer 'model.layers.0.mlp.experts.down_proj' has 224 intermediate features (7 MXFP4 blocks of 32), not a multiple of the 3 ranks splitting it: vLLM's gpt_oss.py does not load that (MLPBlock asserts intermediate_size % world_size == 0)" "$T/err" &&
    ok "gpt-oss MXFP4 uneven at tp 3 (224 % 3): refused as vLLM refuses it, naming the numbers" || bad "gpt-oss MXFP4 at tp 3 refused" "exit $rc" "$(cat "$T/err")"
  sed -i '0,/"rank_sizes": \[4, 3\]/s//"rank_sizes": [4, 4]/' "$T/us/tpconv-manifest.json" 2>/dev/null
  rm -f "$T/um.safetensors"; "$TPCONV" merge "$T/us" -o "$T/um.safetensors" -q 2>"$T/err"; rc=$?
  [ $rc = 3 ] && [ ! -e "$T/um.safetensors" ] && grep -qF "tensor 'model.layers.0.mlp.experts.down_proj_blocks': manifest: part 0: \"rank_sizes\" must list the rows each of its 2 ranks holds of 7 + 1 unstored padding rows, 4 a rank and the last ones fewer" "$T/err" &&
    ok "a manifest whose uneven rank sizes lie ([4, 4] for 7 blocks on 2 ranks): merge refuses it naming the numbers" || bad "lying rank_sizes refused" "exit $rc" "$(cat "$T/err")"
fi

# GGUF's MXFP4 and NVFP4 blocks (make_fp4_gguf.py: fp4.gguf and the SHA-256 of
# the F32 values python3-gguf's dequantize gives for each tensor)
if "$TPCONV" convert "$F/fp4.gguf" -o "$T/g.safetensors" --dtype f32 --gguf-names -q 2>"$T/err"; then
  "$TPCONV" inspect --hash "$T/g.safetensors" | awk '$1 ~ /weight/ {print $1, $NF}' | sort > "$T/got"
  for ty in mxfp4 nvfp4; do
    grep "^$ty\." "$F/fp4.sha256" | sort | diff - <(grep "^$ty\." "$T/got") > "$T/diff" &&
      ok "GGUF $ty: 3 tensors equal gguf.quants.dequantize" || bad "GGUF $ty equals gguf.quants.dequantize" "$(cat "$T/diff")"
  done
else bad "GGUF MXFP4/NVFP4 to safetensors" "$(cat "$T/err")"; fi

# hostile NAME MESSAGE PYTHON: a copy of fixture NAME edited by PYTHON (t: the
# tensors {name: [dtype, shape, bytes]}, c: config.json) is refused, exit 3,
# the message naming the tensor, nothing written
hostile() {
  local d=$1 name=$2 msg=$3 py=$4
  rm -rf "$T/h" "$T/h.safetensors" && mkdir -p "$T/h" && cp "$F/$name"/* "$T/h/" && rm -f "$T/h/ref.safetensors"
  python3 - "$T/h" "$py" <<'PY' || { bad "$d: the fixture edit" ""; return; }
import json, struct, sys
p = sys.argv[1] + "/model.safetensors"
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h.pop("__metadata__", None)
t = {k: [v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]] for k, v in h.items()}
c = json.load(open(sys.argv[1] + "/config.json"))
exec(sys.argv[2])
# the file again, as tests/lib/tpctest.py's safetensors_bytes lays it out (without torch:
# importing it costs 1.5 s a check)
hdr, blobs, off = {}, [], 0
for k, (dt, shape, data) in t.items():
    hdr[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
    blobs.append(data)
    off += len(data)
h = json.dumps(hdr, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
open(p, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
json.dump(c, open(sys.argv[1] + "/config.json", "w"))
PY
  local out=$T/h.safetensors
  if [ "${5:-}" = gguf ]; then   # the MXFP4 experts repacked into a GGUF, not dequantized
    out=$T/h.gguf && rm -f "$out" && cp "$G"/tokenizer*.json "$T/h/"
    "$TPCONV" convert "$T/h/" -o "$out" -q 2>"$T/err"
  elif [ "${5:-}" = shard ]; then   # split packed at tp 2, not dequantized
    out=$T/hs && rm -rf "$out"
    "$TPCONV" shard "$T/h/" --tp 2 -o "$out" -q 2>"$T/err"
  else "$TPCONV" convert --dequantize "$T/h/" -o "$out" -q 2>"$T/err"; fi
  local rc=$?
  if [ $rc = 3 ] && grep -qF -- "$msg" "$T/err" && [ ! -e "$out" ]; then ok "$d"
  else bad "$d" "exit $rc" "$(cat "$T/err")"; fi
}
L=model.layers.0.mlp.down_proj
hostile "NVFP4 without its global scale: refused naming the weight" ct-nvfp4 \
  "tensor '$L.weight_packed': NVFP4 weight without its weight_global_scale tensor" "del t['$L.weight_global_scale']"
hostile "NVFP4 global scale 0: refused" ct-nvfp4 "weight_global_scale is 0: a positive finite scale is needed" \
  "t['$L.weight_global_scale'][2] = b'\0' * 4"
hostile "a 1-D (swizzled) weight_scale: refused naming the layout" ct-nvfp4 \
  "a 1-D scale is cutlass's swizzled layout, which tpconv does not read" \
  "t['$L.weight_scale'][1] = [192]"
hostile "MXFP4 scale 255 (NaN in OCP MX): refused with its byte offset" ct-mxfp4 \
  "tensor '$L.weight_scale': E8M0 scale 255 (NaN) at byte offset 5" \
  "s = bytearray(t['$L.weight_scale'][2]); s[5] = 255; t['$L.weight_scale'][2] = bytes(s)"
hostile "NVFP4 scales under an MXFP4 config: refused" ct-nvfp4 "NVFP4 scales must be F8_E4M3 and MXFP4 scales U8 (E8M0)" \
  "t['$L.weight_scale'][0] = 'F16'; t['$L.weight_scale'][2] *= 2"
hostile "a ModelOpt quant_algo other than NVFP4: refused by name" modelopt "ModelOpt quant_algo 'W4A8_AWQ' is not one tpconv can dequantize (NVFP4 is)" \
  "c['quantization_config']['quant_algo'] = 'W4A8_AWQ'"
hostile "an odd packed width against its scales: refused with both shapes" ct-mxfp4 "weight_scale must be [48, 3]" \
  "t['$L.weight_packed'][1] = [48, 48]; t['$L.weight_packed'][2] = t['$L.weight_packed'][2] + bytes(48 * 16)"

hostile "gpt-oss MXFP4 blocks without their scales: refused naming them" gptoss-mxfp4 \
  "tensor 'model.layers.1.mlp.experts.down_proj_blocks': gpt-oss MXFP4 blocks without their _scales tensor" \
  "del t['model.layers.1.mlp.experts.down_proj_scales']"

X=model.layers.1.mlp.experts
hostile "gpt-oss MXFP4 -> GGUF, scales of the wrong shape: refused naming them" gptoss-mxfp4 \
  "tensor '$X.down_proj_scales': MXFP4 scales must be U8 (E8M0), one per block of '$X.down_proj_blocks' [4, 32, 1, 16]: its shape without the last dim; they are U8 [4, 16, 2]" \
  "t['$X.down_proj_scales'][1] = [4, 16, 2]" gguf
hostile "gpt-oss MXFP4 -> GGUF, blocks of 8 bytes: refused naming them" gptoss-mxfp4 \
  "tensor '$X.gate_up_proj_blocks': MXFP4 blocks must be U8 [experts, rows, blocks, 16], not U8 [4, 64, 2, 8]" \
  "t['$X.gate_up_proj_blocks'][1] = [4, 64, 2, 8]" gguf
hostile "gpt-oss MXFP4 -> GGUF, blocks whose shape claims more bytes than they hold: refused naming them" gptoss-mxfp4 \
  "tensor '$X.down_proj_blocks': shape [4, 32, 2, 16] of U8 needs 4096 bytes but data_offsets" \
  "t['$X.down_proj_blocks'][1] = [4, 32, 2, 16]; t['$X.down_proj_scales'][1] = [4, 32, 2]" gguf
hostile "gpt-oss MXFP4 -> GGUF, scales without their blocks: refused naming them" gptoss-mxfp4 \
  "tensor '$X.down_proj_scales': MXFP4 scales without their blocks tensor '$X.down_proj_blocks'" \
  "del t['$X.down_proj_blocks']" gguf
hostile "gpt-oss MXFP4 -> GGUF, 5 experts' blocks under 4 in config.json: refused naming them" gptoss-mxfp4 \
  "tensor '$X.down_proj_blocks': 5 experts, but config.json has 4" \
  "t['$X.down_proj_blocks'] = ['U8', [5, 32, 1, 16], t['$X.down_proj_blocks'][2] * 2]; t['$X.down_proj_blocks'][2] = t['$X.down_proj_blocks'][2][:5 * 512]; t['$X.down_proj_scales'] = ['U8', [5, 32, 1], (t['$X.down_proj_scales'][2] * 2)[:160]]" gguf
hostile "gpt-oss MXFP4 shard, scales of the wrong shape: refused naming them" gptoss-mxfp4-wide \
  "tensor '$X.down_proj_scales': MXFP4 scales must be [4, 32, 4] (one per block of '$X.down_proj_blocks'), not [4, 64, 2]" \
  "t['$X.down_proj_scales'][1] = [4, 64, 2]" shard

echo "1..$n"
[ "$failed" = 0 ]
