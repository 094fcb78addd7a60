#!/usr/bin/env bash
# compressed-tensors pack-quantized checkpoints (TAP): tiny LLaMA-shaped int4
# models in llm-compressor's layout (weight_packed packed along the input,
# weight_scale per group, weight_zero_point packed along the output when
# asymmetric, weight_g_idx with actorder "group", weight_shape), written by real
# torch 1.13 with the packing done here from compressed-tensors' definition.
# Sharded with the llama preset: every rank tensor equals an independent torch
# slicing (weight_shape: the shape of the rank's slice), merge gives the model
# back bit for bit (weight_shape restored), verify passes (the packed tensors bit
# for bit and every weight dequantized per rank against the dense reference).
# convert --dequantize equals an independent torch dequantization; shard and
# merge --dequantize agree with it. A tp that would cut a group is refused.
# usage: ct_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
cat >"$T/gen.py" <<'PYEOF'
import json, os, sys, torch
out = sys.argv[1]; sym = sys.argv[2] == "sym"; act = sys.argv[3] == "act"; G = int(sys.argv[4])
g = torch.Generator().manual_seed(3)
H, I, V, nh, kv, hd, bits = 256, 512, 128, 8, 4, 32, 4
p8 = 32 // bits
def pack_in(q):   # [O, I] unsigned values -> [O, I/8] int32, value i of a row at word i//8, bits 4*(i%8)
    O, N = q.shape; q = q.view(O, N // p8, p8).to(torch.int64)
    w = sum((q[:, :, k] << (bits * k)) for k in range(p8))
    return (w - ((w >> 31) << 32)).to(torch.int32)
def pack_out(q):  # [O, G] -> [O/8, G], packed along the output
    return pack_in(q.t().contiguous()).t().contiguous()
sd = {"model.embed_tokens.weight": torch.randn(V, H, generator=g), "lm_head.weight": torch.randn(V, H, generator=g),
      "model.norm.weight": torch.randn(H, generator=g)}
lay = {"self_attn.q_proj": (nh * hd, H), "self_attn.k_proj": (kv * hd, H), "self_attn.v_proj": (kv * hd, H),
       "self_attn.o_proj": (H, nh * hd), "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I)}
for l in range(2):
    sd[f"model.layers.{l}.input_layernorm.weight"] = torch.randn(H, generator=g)
    sd[f"model.layers.{l}.post_attention_layernorm.weight"] = torch.randn(H, generator=g)
    for m, (o, i) in lay.items():
        p = f"model.layers.{l}.{m}."
        q = torch.randint(0, 16, (o, i), generator=g)
        sd[p + "weight_packed"] = pack_in(q)
        sd[p + "weight_scale"] = torch.rand(o, i // G, generator=g).to(torch.bfloat16)
        if not sym:
            sd[p + "weight_zero_point"] = pack_out(torch.randint(0, 16, (o, i // G), generator=g))
        if act:
            sd[p + "weight_g_idx"] = (torch.randperm(i, generator=g) // G).int()
        sd[p + "weight_shape"] = torch.tensor([o, i])
os.makedirs(out, exist_ok=True)
torch.save(sd, os.path.join(out, "pytorch_model.bin"))
w = {"num_bits": bits, "type": "int", "symmetric": sym, "strategy": "group", "group_size": G, "actorder": "group" if act else None}
json.dump({"architectures": ["LlamaForCausalLM"], "hidden_size": H, "intermediate_size": I, "num_attention_heads": nh,
           "num_key_value_heads": kv, "num_hidden_layers": 2, "vocab_size": V, "torch_dtype": "bfloat16",
           "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                   "config_groups": {"group_0": {"targets": ["Linear"], "weights": w}}, "ignore": ["lm_head"]}},
          open(os.path.join(out, "config.json"), "w"))
PYEOF
cat >"$T/chk.py" <<'PYEOF'
import json, os, struct, sys, torch
m, out = sys.argv[1], sys.argv[2]
sd = torch.load(os.path.join(m, "pytorch_model.bin"))
def load(path):
    raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n]); o = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        a, b = v["data_offsets"]; o[k] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=torch.float32).reshape(v["shape"])
    return o
got = load(out); bad = 0
for k in [k for k in sd if k.endswith("weight_packed")]:
    p = k[:-len("weight_packed")]; wp = sd[k].to(torch.int64) & 0xFFFFFFFF
    O, I = sd[p + "weight_shape"].tolist()
    q = torch.stack([(wp >> (4 * j)) & 15 for j in range(8)], 2).reshape(O, -1)[:, :I] - 8
    s = sd[p + "weight_scale"].double()
    G = s.shape[1]
    gi = sd[p + "weight_g_idx"].long() if p + "weight_g_idx" in sd else torch.arange(I) // (I // G)
    if p + "weight_zero_point" in sd:
        zp = sd[p + "weight_zero_point"].to(torch.int64) & 0xFFFFFFFF
        z = torch.stack([(zp >> (4 * j)) & 15 for j in range(8)], 1).reshape(-1, G)[:O] - 8
    else:
        z = torch.zeros(O, G, dtype=torch.int64)
    w = ((q - z[:, gi]).double() * s[:, gi]).float()
    if not torch.equal(got[p + "weight"], w): print("differs", p); bad += 1
print("bad", bad); sys.exit(bad)
PYEOF
cat >"$T/ranks.py" <<'PYEOF'
# every rank's tensors against a slicing written from the format (vLLM's
# compressed-tensors WNA16 loader splits the same way)
import json, os, re, struct, sys, torch
model, setdir, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
sd = torch.load(os.path.join(model, "pytorch_model.bin"))
cfg = json.load(open(os.path.join(model, "config.json")))
w = cfg["quantization_config"]["config_groups"]["group_0"]["weights"]
act = w.get("actorder") == "group"
nh, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]
DT = {"F32": torch.float32, "BF16": torch.bfloat16, "I32": torch.int32, "I64": torch.int64}
def load(path):
    raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n]); o = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        a, b = v["data_offsets"]; o[k] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=DT[v["dtype"]]).reshape(v["shape"])
    return o
def col_heads(t, r, n, unit=1):  # q/k/v: rows on head boundaries (hd rows per head, in `unit`s)
    per = hd // unit
    if n >= tp: return t.view(n, per, *t.shape[1:]).chunk(tp, 0)[r].reshape(-1, *t.shape[1:])
    return t.view(n, per, *t.shape[1:])[r * n // tp].reshape(-1, *t.shape[1:])
bad = 0
for r in range(tp):
    got = load(os.path.join(setdir, f"model_tp{r:02d}_pp00.safetensors"))
    for k, t in sd.items():
        m = re.match(r"(.*)\.(weight_packed|weight_scale|weight_zero_point|weight_g_idx|weight_shape)$", k)
        if not m:
            continue
        layer, c = m.groups()
        heads = nh if "q_proj" in layer else kv if re.search("k_proj|v_proj", layer) else 0
        colw = re.search(r"q_proj|k_proj|v_proj|gate_proj|up_proj", layer) is not None
        if c == "weight_shape":
            O, I = t.tolist(); e = torch.tensor([O // tp, I] if colw else [O, I // tp])
            if heads and heads < tp: e = torch.tensor([hd, I])
        elif colw:
            unit = 8 if c == "weight_zero_point" else 1
            if c == "weight_g_idx": e = t
            elif heads: e = col_heads(t, r, heads, unit)
            else: e = t.chunk(tp, 0)[r]
        else:  # row: input features
            if c == "weight_g_idx": e = t.chunk(tp, 0)[r]
            elif c in ("weight_scale", "weight_zero_point") and act: e = t
            else: e = t.chunk(tp, 1)[r]
        if k not in got or got[k].dtype != e.dtype or not torch.equal(got[k], e):
            print("rank", r, k, tuple(got[k].shape) if k in got else None, tuple(e.shape)); bad += 1
print("bad", bad); sys.exit(1 if bad else 0)
PYEOF
for v in "sym sym no 64" "asym asym no 64" "act sym act 64"; do set -- $v; $PY "$T/gen.py" "$T/$1" "$2" "$3" "$4" || { echo "1..0 # SKIP generator failed"; exit 0; }; done

for m in sym asym act; do
  run "$TPCONV" convert --dequantize --dtype f32 -q "$T/$m" -o "$T/d_$m.safetensors"
  [ "$rc" = 0 ] && $PY "$T/chk.py" "$T/$m" "$T/d_$m.safetensors" >"$T/x" 2>&1 &&
    ok "$m: convert --dequantize equals an independent torch dequantization, bit for bit" || bad "$m: dequantize" "$(cat "$T/err" "$T/x" | head -3)"
  "$TPCONV" convert --dequantize -q "$T/$m" -o "$T/c_$m.safetensors" 2>/dev/null
  for tp in 2 4; do
    S=$T/s_${m}_$tp
    run "$TPCONV" shard "$T/$m" --preset llama --tp $tp -o "$S"
    if [ "$rc" != 0 ]; then bad "$m tp $tp: shard" "$(cat "$T/err")"; continue; fi
    $PY "$T/ranks.py" "$T/$m" "$S" $tp >"$T/x" 2>&1 &&
      ok "$m tp $tp: every rank tensor equals the format's slicing (weight_shape: the rank's own)" || bad "$m tp $tp: rank tensors" "$(tail -4 "$T/x")"
    run "$TPCONV" merge "$S" -o "$T/m.safetensors" -f
    [ "$rc" = 0 ] && same "$T/m.safetensors" "$T/$m/pytorch_model.bin" && ok "$m tp $tp: merge gives the model back bit for bit (weight_shape restored)" ||
      bad "$m tp $tp: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -3)"
    run "$TPCONV" verify --reference "$T/$m" --shards "$S"
    [ "$rc" = 0 ] && grep -Eq '^  col +model\.layers\.0\.self_attn\.q_proj\.weight +F32 .* pass' "$T/out" &&
      grep -Eq '^  structure +model\.layers\.0\.mlp\.down_proj\.weight_shape +I64 .* pass' "$T/out" &&
      ok "$m tp $tp: verify passes, packed tensors and dense weights ($(tail -1 "$T/out" | cut -c3-32))" || bad "$m tp $tp: verify (rc=$rc)" "$(grep -v ' pass' "$T/out" | head -4)" "$(head -3 "$T/err")"
    run "$TPCONV" merge --dequantize "$S" -o "$T/md.safetensors" -f
    [ "$rc" = 0 ] && "$TPCONV" diff "$T/c_$m.safetensors" "$T/md.safetensors" 2>&1 | grep -q '^# same: ' &&
      ok "$m tp $tp: merge --dequantize equals convert --dequantize" || bad "$m tp $tp: merge --dequantize" "$(head -3 "$T/err")"
  done
  rm -rf "$T/sd" && run "$TPCONV" shard "$T/$m" --preset llama --tp 4 --dequantize -o "$T/sd"
  [ "$rc" = 0 ] && "$TPCONV" merge -q "$T/sd" -o "$T/mq.safetensors" -f && "$TPCONV" diff "$T/c_$m.safetensors" "$T/mq.safetensors" 2>&1 | grep -q '^# same: ' &&
    ok "$m: shard --dequantize at tp 4, merged, equals convert --dequantize" || bad "$m: shard --dequantize (rc=$rc)" "$(head -3 "$T/err")"
done

# refused: a tp whose row split would cut a group (group_size 64: o_proj's 256 inputs at tp 8)
run "$TPCONV" shard "$T/asym" --preset llama --tp 8 -o "$T/no"
[ "$rc" = 3 ] && grep -q "o_proj.weight' is split row into 32 input features per rank, not a multiple of 64 (the group_size)" "$T/err" && [ ! -e "$T/no/tpconv-manifest.json" ] &&
  ok "asym tp 8 is refused (exit 3): $(head -c 200 "$T/err")" || bad "group cut (rc=$rc)" "$(cat "$T/err")"
# refused: a compressed-tensors format tpconv does not split (its companions are not replicated)
mkdir -p "$T/other" && cp "$T/sym/pytorch_model.bin" "$T/other/" &&
  sed 's/"pack-quantized"/"marlin-24"/' "$T/sym/config.json" >"$T/other/config.json"
run "$TPCONV" shard "$T/other" --preset llama --tp 2 -o "$T/no2"
[ "$rc" = 3 ] && grep -q "weight_packed" "$T/err" && [ ! -e "$T/no2/tpconv-manifest.json" ] &&
  ok "a compressed-tensors format tpconv does not split is refused, never replicated: $(head -c 160 "$T/err")" || bad "other format (rc=$rc)" "$(cat "$T/err")"

# refused: a weight_shape that disagrees with weight_packed (naming both)
mkdir -p "$T/badshape" && cp "$T/sym/config.json" "$T/badshape/" && $PY - "$T/sym" "$T/badshape" <<'PYEOF'
import os, sys, torch
sd = torch.load(os.path.join(sys.argv[1], "pytorch_model.bin"))
sd["model.layers.1.mlp.up_proj.weight_shape"] = torch.tensor([512, 264])
torch.save(sd, os.path.join(sys.argv[2], "pytorch_model.bin"))
PYEOF
run "$TPCONV" shard "$T/badshape" --preset llama --tp 2 -o "$T/no3"
[ "$rc" = 3 ] && grep -q "tensor 'model.layers.1.mlp.up_proj.weight_shape': weight_shape says \[512, 264\], but weight_packed is \[512, 32\] (8 values per int32)" "$T/err" &&
  [ ! -e "$T/no3/tpconv-manifest.json" ] && ok "a weight_shape that disagrees with weight_packed is refused (exit 3), naming both" || bad "bad weight_shape (rc=$rc)" "$(cat "$T/err")"

echo "1..$n"
[ "$failed" = 0 ]
