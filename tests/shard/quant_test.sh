#!/usr/bin/env bash
# Quantized checkpoints split with their layers (TAP). Tiny LLaMA-shaped GPTQ
# (with and without act-order), AWQ and FP8-block checkpoints with real tensor
# names and quantization_config are made with real torch (FP8 bytes as uint8:
# torch 1.13 has no float8; splitting moves bytes). Each is sharded with the
# llama preset; every rank tensor is compared bit for bit with a slicing written
# here from the formats' definitions (a col layer keeps its output features, a
# row layer its input features; GPTQ qweight packs 32/bits input rows per int32,
# qzeros 32/bits output columns, scales and qzeros hold one row per group; AWQ
# packs along the output; FP8 weight_scale_inv holds one entry per 128 x 128
# block; act-order keeps scales/qzeros whole on row layers), as vLLM's GPTQ, AWQ
# and FP8 linear methods load each rank's slice. Merge gives the model back bit
# for bit. A tp that would cut a group or an FP8 block is refused (exit 3) naming
# the tensor and the numbers.
# usage: quant_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
$PY - "$T" <<'PYEOF' || { echo "1..0 # SKIP generator failed"; exit 0; }
import json, os, sys, torch
out = sys.argv[1]
g = torch.Generator().manual_seed(11)
def ri(*s): return torch.randint(-2**31, 2**31 - 1, s, generator=g, dtype=torch.int32)
def layers(H, I, nh, kv, hd):
    return {"self_attn.q_proj": (nh * hd, H), "self_attn.k_proj": (kv * hd, H), "self_attn.v_proj": (kv * hd, H),
            "self_attn.o_proj": (H, nh * hd), "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I)}
def base(sd, H, V):
    sd["model.embed_tokens.weight"] = torch.randn(V, H, generator=g); sd["lm_head.weight"] = torch.randn(V, H, generator=g)
    sd["model.norm.weight"] = torch.randn(H, generator=g)
    for l in range(2):
        sd[f"model.layers.{l}.input_layernorm.weight"] = torch.randn(H, generator=g)
        sd[f"model.layers.{l}.post_attention_layernorm.weight"] = torch.randn(H, generator=g)
def save(name, sd, cfg):
    d = os.path.join(out, name); os.makedirs(d)
    torch.save(sd, os.path.join(d, "pytorch_model.bin")); json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
H, I, V, nh, kv, hd, G = 256, 512, 128, 8, 4, 32, 128
cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": H, "intermediate_size": I, "num_attention_heads": nh,
       "num_key_value_heads": kv, "num_hidden_layers": 2, "vocab_size": V}
for name, act in (("gptq", False), ("gptq_act", True)):
    sd = {}; base(sd, H, V)
    for l in range(2):
        for m, (o, i) in layers(H, I, nh, kv, hd).items():
            p = f"model.layers.{l}.{m}."
            sd[p + "qweight"] = ri(i // 8, o); sd[p + "qzeros"] = ri(i // G, o // 8)
            sd[p + "scales"] = torch.randn(i // G, o, generator=g).half()
            sd[p + "g_idx"] = (torch.randperm(i, generator=g) // G).int() if act else (torch.arange(i) // G).int()
    save(name, sd, dict(cfg, quantization_config={"quant_method": "gptq", "bits": 4, "group_size": G, "desc_act": act, "sym": True}))
sd = {}; base(sd, H, V)
for l in range(2):
    for m, (o, i) in layers(H, I, nh, kv, hd).items():
        p = f"model.layers.{l}.{m}."
        sd[p + "qweight"] = ri(i, o // 8); sd[p + "qzeros"] = ri(i // G, o // 8)
        sd[p + "scales"] = torch.randn(i // G, o, generator=g).half()
save("awq", sd, dict(cfg, quantization_config={"quant_method": "awq", "bits": 4, "group_size": G, "version": "gemm", "zero_point": True}))
H, I, hd, B = 512, 1024, 64, 128
sd = {}; base(sd, H, V)
for l in range(2):
    for m, (o, i) in layers(H, I, nh, kv, hd).items():
        p = f"model.layers.{l}.{m}."
        sd[p + "weight"] = torch.randint(0, 256, (o, i), generator=g, dtype=torch.uint8)
        sd[p + "weight_scale_inv"] = torch.rand((o + B - 1) // B, (i + B - 1) // B, generator=g)
save("fp8", sd, dict(cfg, hidden_size=H, intermediate_size=I, head_dim=hd,
     quantization_config={"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [B, B]}))
PYEOF

cat >"$T/expect.py" <<'PYEOF'
import json, os, re, struct, sys, torch
model, setdir, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
sd = torch.load(os.path.join(model, "pytorch_model.bin"))
q = json.load(open(os.path.join(model, "config.json")))["quantization_config"]
meth, G, act = q["quant_method"], q.get("group_size", 0), q.get("desc_act", False)
B = (q.get("weight_block_size") or [0, 0])[0]
DT = {"F32": torch.float32, "F16": torch.float16, "I32": torch.int32, "U8": torch.uint8}
def load_st(path):
    raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n]); o = {}
    for k, m in h.items():
        if k == "__metadata__": continue
        a, b = m["data_offsets"]
        o[k] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=DT[m["dtype"]]).reshape(m["shape"])
    return o
def cut(t, dim, r, unit=1):  # rank r's 1/tp of dim, which must fall on whole units
    n = t.shape[dim] * unit // tp
    assert n % unit == 0
    return t.narrow(dim, r * n // unit, n // unit)
def expect(k, t, r):
    col = re.search(r"(q_proj|k_proj|v_proj|gate_proj|up_proj)\.", k); row = re.search(r"(o_proj|down_proj)\.", k)
    if re.search(r"embed_tokens|lm_head", k): return cut(t, 0, r)
    if not (col or row): return t
    s = k.rsplit(".", 1)[1]
    if meth == "fp8":
        if s == "weight": return cut(t, 0 if col else 1, r)
        if s == "weight_scale_inv": return cut(t, 0 if col else 1, r)
    if meth == "gptq":   # qweight [in/8, out], qzeros [in/G, out/8], scales [in/G, out], g_idx [in]
        if col: return t if s == "g_idx" else cut(t, 1, r)
        if act and s in ("scales", "qzeros"): return t
        return cut(t, 0, r)
    if meth == "awq":    # qweight [in, out/8], qzeros [in/G, out/8], scales [in/G, out]
        return cut(t, 1, r) if col else cut(t, 0, r)
    raise SystemExit("unexpected " + k)
bad = 0
for r in range(tp):
    got = load_st(os.path.join(setdir, f"model_tp{r:02d}_pp00.safetensors"))
    assert set(got) == set(sd), set(got) ^ set(sd)
    for k, t in sd.items():
        e = expect(k, t, r)
        if got[k].shape != e.shape or not torch.equal(got[k], e):
            print("rank", r, k, tuple(got[k].shape), tuple(e.shape)); bad += 1
print("bad", bad); sys.exit(1 if bad else 0)
PYEOF

for c in "gptq 2" "gptq_act 2" "awq 2" "fp8 2"; do
  set -- $c; M=$T/$1 S=$T/$1-tp$2
  run "$TPCONV" shard "$M" --preset llama --tp "$2" -o "$S"
  if [ "$rc" != 0 ]; then bad "$1 tp $2: shard" "$(cat "$T/err")"; continue; fi
  $PY "$T/expect.py" "$M" "$S" "$2" >"$T/x" 2>&1 && ok "$1 tp $2: every quantized companion is its layer's slice, in its own units" ||
    bad "$1 tp $2: rank tensors" "$(tail -5 "$T/x")"
  run "$TPCONV" verify --reference "$M" --shards "$S" --arch none
  [ "$rc" = 0 ] && ok "$1 tp $2: verify (structure: every rank's slice of every tensor, bit for bit) passes" ||
    bad "$1 tp $2: verify" "$(grep -v ' pass' "$T/out" | head -4)" "$(head -3 "$T/err")"
  run "$TPCONV" merge "$S" -o "$T/m.safetensors" -f
  [ "$rc" = 0 ] && same "$T/m.safetensors" "$M/pytorch_model.bin" && ok "$1 tp $2: merge gives the checkpoint back bit for bit" ||
    bad "$1 tp $2: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -3)"
done
# act-order keeps scales whole on a row layer; the dry run says how each companion splits
run "$TPCONV" shard "$T/gptq_act" --preset llama --tp 2 --dry-run
[ "$rc" = 0 ] && ok "gptq with act-order: dry run accepted" || bad "gptq act dry-run" "$(cat "$T/err")"
# refusals: a tp that cuts a group (GPTQ o_proj: 256 inputs / 4 = 64 < group 128) or an FP8 block
run "$TPCONV" shard "$T/gptq" --preset llama --tp 4 -o "$T/no1"
[ "$rc" = 3 ] && grep -q "self_attn.o_proj.qzeros'\|self_attn.o_proj.scales'" "$T/err" && grep -q "64 input features per rank, not a multiple of 128 (the group_size)" "$T/err" && [ ! -e "$T/no1" ] &&
  ok "gptq at tp 4 cuts a group: exit 3: $(head -c 200 "$T/err")" || bad "gptq tp 4" "rc=$rc" "$(cat "$T/err")"
run "$TPCONV" shard "$T/fp8" --preset llama --tp 4 -o "$T/no2"
[ "$rc" = 3 ] && grep -q "weight_scale_inv'" "$T/err" && grep -q "64 output features per rank, not a multiple of 128 (the fp8 weight_block_size)" "$T/err" && [ ! -e "$T/no2" ] &&
  ok "fp8 at tp 4 cuts a 128 x 128 block (k_proj: 256 rows / 4): exit 3: $(head -c 200 "$T/err")" || bad "fp8 tp 4" "rc=$rc" "$(cat "$T/err")"
# without quantization_config the companions stay refused (the safety check)
cp -r "$T/gptq" "$T/noq"; $PY -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); del c['quantization_config']; json.dump(c, open(p,'w'))" "$T/noq/config.json"
run "$TPCONV" shard "$T/noq" --preset llama --tp 2 -o "$T/no3"
[ "$rc" = 3 ] && grep -q "plan splits its layer" "$T/err" && [ ! -e "$T/no3" ] &&
  ok "GPTQ tensors without quantization_config: refused, nothing written" || bad "no quantization_config" "rc=$rc" "$(cat "$T/err")"
echo "1..$n"
[ "$failed" = 0 ]
