#!/usr/bin/env bash
# DeepSeek-V3 / V2-Lite under the deepseek-v3 preset, and FP8 block --pad (TAP).
# Tiny models with the real Hugging Face names and config.json (MLA q_a/q_b or
# q_proj, kv_a_proj_with_mqa, kv_b_proj with the real head sizes 128+64 and 128;
# a first_k_dense_replace dense layer; 16 routed experts in 4 groups with
# e_score_correction_bias, shared_experts) are written by real torch as
# safetensors, one of them FP8 block-quantized (F8_E4M3 bytes from uint8 arrays:
# torch 1.13 has no float8; weight_scale_inv [ceil(out/128), ceil(in/128)]).
# Each is sharded at several tp (and pp); every rank tensor is compared bit for
# bit with an independent torch slicing written here the way vLLM's
# deepseek_v2.py loads it (q_b_proj/kv_b_proj ColumnParallel over heads, o_proj
# RowParallel, q_a_proj/kv_a_proj_with_mqa Replicated, FusedMoE w13 on the
# output and w2 on the input); merge gives the model back bit for bit; verify
# passes with its MoE block checks (sigmoid, bias-chosen, group-limited,
# renormalised and scaled routing plus the shared experts), its MLA attention
# block checks and the whole-model check, nothing skipped; a rank file holding
# the other rank's kv_b_proj or expert slice fails the model check. FP8: a tp that cuts a 128 x 128 block is refused
# (exit 3, the exact message), accepted with --pad (the manifest and the dry run
# show the pad, each rank's slice is whole blocks of the zero-padded layer, merge
# strips it bit for bit, merge --dequantize equals convert --dequantize), and a
# head split that would cut a block is refused even with --pad; --layout megatron-dist
# refuses the FP8 model and --dequantize by name (convert --dequantize first).
# usage: deepseek_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
$PY - "$T" <<'PYEOF' || { echo "1..0 # SKIP generator failed"; exit 0; }
import json, os, struct, sys, torch
out = sys.argv[1]
g = torch.Generator().manual_seed(14)
def r(*s): return torch.randn(*s, generator=g) * 0.05
ST = {torch.float32: "F32", torch.bfloat16: "BF16", torch.uint8: "F8_E4M3"}
def save_st(path, sd):
    hdr, blobs, off = {}, [], 0
    for k in sorted(sd):
        t = sd[k].contiguous(); b = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        hdr[k] = {"dtype": ST[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}; blobs.append(b); off += len(b)
    h = json.dumps(hdr).encode(); h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h); [f.write(b) for b in blobs]
def fp8(o, i):  # E4M3 codes without the NaN codes 0x7f/0xff, moderate exponents
    return torch.randint(0, 0x58, (o, i), generator=g, dtype=torch.uint8) | (torch.randint(0, 2, (o, i), generator=g, dtype=torch.uint8) << 7)
def model(name, v2lite=False, quant=False):
    H, V, L, nh, nope, rope, vd, qlr, kvlr = 256, 160, 3, 8, 128, 64, 128, 128, 128
    E, I, MI, NS = 16, 512, 256, 2 if v2lite else 1
    sd = {}; B = 128
    def lin(n, o, i):
        if quant:
            sd[n + ".weight"] = fp8(o, i); sd[n + ".weight_scale_inv"] = torch.rand((o + B - 1) // B, (i + B - 1) // B, generator=g) * 0.01
        else:
            sd[n + ".weight"] = r(o, i)
    fdt = torch.bfloat16 if quant else torch.float32
    def w(*s): return (1 + r(*s)).to(fdt)
    sd["model.embed_tokens.weight"] = r(V, H).to(fdt); sd["lm_head.weight"] = r(V, H).to(fdt); sd["model.norm.weight"] = w(H)
    for l in range(L):
        p = f"model.layers.{l}."
        sd[p + "input_layernorm.weight"] = w(H); sd[p + "post_attention_layernorm.weight"] = w(H)
        a = p + "self_attn."
        if v2lite:
            lin(a + "q_proj", nh * (nope + rope), H)
        else:
            lin(a + "q_a_proj", qlr, H); sd[a + "q_a_layernorm.weight"] = w(qlr); lin(a + "q_b_proj", nh * (nope + rope), qlr)
        lin(a + "kv_a_proj_with_mqa", kvlr + rope, H); sd[a + "kv_a_layernorm.weight"] = w(kvlr)
        lin(a + "kv_b_proj", nh * (nope + vd), kvlr); lin(a + "o_proj", H, nh * vd)
        m = p + "mlp."
        if l == 0:
            lin(m + "gate_proj", I, H); lin(m + "up_proj", I, H); lin(m + "down_proj", H, I); continue
        sd[m + "gate.weight"] = r(E, H).to(fdt) * 20
        if not v2lite: sd[m + "gate.e_score_correction_bias"] = torch.rand(E, generator=g) * 0.1
        for e in range(E):
            lin(m + f"experts.{e}.gate_proj", MI, H); lin(m + f"experts.{e}.up_proj", MI, H); lin(m + f"experts.{e}.down_proj", H, MI)
        lin(m + "shared_experts.gate_proj", NS * MI, H); lin(m + "shared_experts.up_proj", NS * MI, H); lin(m + "shared_experts.down_proj", H, NS * MI)
    cfg = {"architectures": ["DeepseekV2ForCausalLM" if v2lite else "DeepseekV3ForCausalLM"],
           "model_type": "deepseek_v2" if v2lite else "deepseek_v3", "hidden_size": H, "intermediate_size": I,
           "moe_intermediate_size": MI, "num_hidden_layers": L, "num_attention_heads": nh, "num_key_value_heads": nh,
           "n_shared_experts": NS, "n_routed_experts": E, "num_experts_per_tok": 4, "first_k_dense_replace": 1, "moe_layer_freq": 1,
           "q_lora_rank": None if v2lite else qlr, "kv_lora_rank": kvlr, "qk_nope_head_dim": nope, "qk_rope_head_dim": rope,
           "v_head_dim": vd, "vocab_size": V, "rms_norm_eps": 1e-6, "rope_theta": 10000, "hidden_act": "silu",
           "tie_word_embeddings": False}
    if v2lite:
        cfg.update(scoring_func="softmax", topk_method="greedy", n_group=1, topk_group=1, norm_topk_prob=False, routed_scaling_factor=1.0)
    else:
        cfg.update(scoring_func="sigmoid", topk_method="noaux_tc", n_group=4, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5)
    if quant:
        cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [B, B]}
    d = os.path.join(out, name); os.makedirs(d)
    save_st(os.path.join(d, "model.safetensors"), sd); json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
model("v3"); model("v2lite", v2lite=True); model("v3fp8", quant=True)
PYEOF

# the expected rank tensors, sliced independently the way vLLM's deepseek_v2.py loads them
cat >"$T/expect.py" <<'PYEOF'
import glob, json, os, re, struct, sys, torch
model, setdir, tp, pad = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "pad"
DT = {"F32": torch.float32, "BF16": torch.bfloat16, "F8_E4M3": torch.uint8}
def load_st(path):
    raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n]); out = {}
    for k, m in h.items():
        if k == "__metadata__": continue
        a, b = m["data_offsets"]
        out[k] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=DT[m["dtype"]]).reshape(m["shape"])
    return out
sd = load_st(os.path.join(model, "model.safetensors"))
cfg = json.load(open(os.path.join(model, "config.json")))
nh, H = cfg["num_attention_heads"], cfg["hidden_size"]
B = (cfg.get("quantization_config") or {}).get("weight_block_size", [0, 0])[0]
def zpad(t, dim, n):  # zero rows appended along dim up to n
    if t.shape[dim] == n: return t
    s = list(t.shape); s[dim] = n - t.shape[dim]
    return torch.cat([t, torch.zeros(s, dtype=t.dtype)], dim)
def heads(k, t, dim, r):  # num_attention_heads heads of whatever size, tp | heads
    assert nh % tp == 0
    if k.endswith("weight_scale_inv"):  # blocks of whole heads: a rank's heads are whole blocks
        assert sd[k[:-len("_scale_inv")]].shape[dim] // tp % B == 0
        return t.chunk(tp, dim)[r]
    return torch.cat(t.chunk(nh, dim)[r * nh // tp:(r + 1) * nh // tp], dim)
def plain(k, t, dim, r):
    n = t.shape[dim]
    if B and k.endswith((".weight", ".weight_scale_inv")) and pad:
        w = sd[k.rsplit(".", 1)[0] + ".weight"] if k.endswith("_inv") else t
        if w.shape[dim] // tp % B:  # the layer's weight is zero-padded to a multiple of block x tp
            P = -(-w.shape[dim] // (B * tp)) * B * tp
            t = zpad(t, dim, P if not k.endswith("_inv") else P // B)
    assert t.shape[dim] % tp == 0
    return t.chunk(tp, dim)[r]
def expect(k, t, r):
    if re.search(r"self_attn\.(q_proj|q_b_proj|kv_b_proj)\.", k): return heads(k, t, 0, r)
    if re.search(r"self_attn\.o_proj\.", k): return heads(k, t, 1, r)
    if re.search(r"(experts\.\d+|shared_experts|mlp)\.(gate_proj|up_proj)\.", k): return plain(k, t, 0, r)
    if re.search(r"(experts\.\d+|shared_experts|mlp)\.down_proj\.", k): return plain(k, t, 1, r)
    if re.search(r"embed_tokens|^lm_head", k):
        V = t.shape[0]; return zpad(t, 0, -(-V // tp) * tp).chunk(tp, 0)[r]
    return t  # q_a_proj, kv_a_proj_with_mqa, their norms, the router and its bias, norms: whole
bad = 0
for r in range(tp):
    got = {}
    for f in sorted(glob.glob(os.path.join(setdir, f"model_tp{r:02d}_pp*.safetensors"))):
        part = load_st(f); assert not set(part) & set(got), "a tensor in two stages"; got.update(part)
    assert set(got) == set(sd), set(got) ^ set(sd)
    for k, t in sd.items():
        e = expect(k, t, r)
        if got[k].shape != e.shape or not torch.equal(got[k], e):
            print("rank", r, k, tuple(got[k].shape), tuple(e.shape)); bad += 1
print("bad", bad)
sys.exit(1 if bad else 0)
PYEOF

check_set() { # NAME MODEL SET TP PAD [PPNOTE]
  $PY "$T/expect.py" "$2" "$3" "$4" "$5" >"$T/x" 2>&1 && ok "$1: every rank tensor equals vLLM-style torch slicing" ||
    bad "$1: rank tensors" "$(tail -4 "$T/x")"
  run "$TPCONV" merge "$3" -o "$T/m.safetensors" -f
  [ "$rc" = 0 ] && same "$T/m.safetensors" "$2/model.safetensors" && ok "$1: merge gives the model back bit for bit" ||
    bad "$1: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -3)"
  run "$TPCONV" verify --reference "$2" --shards "$3"
  local nm na
  nm=$(grep -Ec '^ +mlp +model\.layers\.[12]\.moe .* pass' "$T/out"); na=$(grep -Ec '^ +attn +model\.layers\.[0-2]\.attn .* pass' "$T/out")
  [ "$rc" = 0 ] && [ "$nm" = 2 ] && [ "$na" = 3 ] && grep -Eq '^ +mlp +model\.layers\.0\.mlp .* pass' "$T/out" &&
    grep -Eq '^ +model +model .* pass +top-1 8/8' "$T/out" && grep -q ' 0 skipped' "$T/out" &&
    ok "$1: verify passes with nothing skipped: 3 MLA attention blocks, 2 MoE blocks, the dense layer's MLP, the model ($(tail -1 "$T/out" | cut -c1-50))" ||
    bad "$1: verify rc=$rc moe=$nm mla=$na" "$(grep -v ' pass' "$T/out" | head -4)" "$(head -3 "$T/err")"
}

for c in "v3 2 1" "v3 4 1" "v3 8 1" "v3 2 2" "v2lite 2 1" "v2lite 4 3" "v3fp8 2 1"; do
  set -- $c; M=$T/$1 S=$T/$1-tp$2-pp$3
  run "$TPCONV" shard "$M" --preset deepseek-v3 --tp "$2" --pp "$3" -o "$S"
  if [ "$rc" != 0 ]; then bad "$1 tp $2 pp $3: shard" "$(cat "$T/err")"; continue; fi
  check_set "$1 tp $2 pp $3" "$M" "$S" "$2" nopad
  rm -rf "$S"
done

# a rank file holding the other rank's slice of one tensor: an MLA kv_b_proj
# (its heads), a routed expert's down_proj; the model check alone fails,
# naming the layer, and the kv_b_proj one fails its MLA attention block
cat >"$T/mut.py" <<'PYEOF'
import json, struct, sys
a, b, name = sys.argv[1:4]  # tensor NAME of rank file B gets rank file A's bytes (the same shape)
def span(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]; s, e = json.loads(f.read(n))[name]["data_offsets"]
    return 8 + n + s, e - s
(sa, la), (sb, lb) = span(a), span(b)
assert la == lb, (la, lb)
data = open(a, "rb").read()[sa:sa + la]
with open(b, "r+b") as f: f.seek(sb); f.write(data)
PYEOF
"$TPCONV" shard "$T/v3" --preset deepseek-v3 --tp 2 -o "$T/v3-tp2" >/dev/null 2>&1
for c in "1.self_attn.kv_b_proj" "2.mlp.experts.5.down_proj"; do
  rm -rf "$T/mut"; cp -r "$T/v3-tp2" "$T/mut"; l=${c%%.*}
  $PY "$T/mut.py" "$T/mut/model_tp00_pp00.safetensors" "$T/mut/model_tp01_pp00.safetensors" "model.layers.$c.weight"
  run "$TPCONV" verify --reference "$T/v3" --shards "$T/mut" --checks model
  [ "$rc" = 1 ] && grep -Eq '^ +model +model .* FAIL' "$T/out" && grep -q "'model.layers.$l'" "$T/out" &&
    ok "rank 1 holding rank 0's slice of $c: the model check fails (exit 1) naming model.layers.$l" ||
    bad "mutated $c: model check" "rc=$rc" "$(head -5 "$T/out")" "$(head -3 "$T/err")"
done
rm -rf "$T/mut"; cp -r "$T/v3-tp2" "$T/mut"
$PY "$T/mut.py" "$T/mut/model_tp00_pp00.safetensors" "$T/mut/model_tp01_pp00.safetensors" model.layers.1.self_attn.kv_b_proj.weight
run "$TPCONV" verify --reference "$T/v3" --shards "$T/mut" --checks blocks
[ "$rc" = 1 ] && grep -Eq '^ +attn +model\.layers\.1\.attn .* FAIL' "$T/out" && [ "$(grep -c FAIL "$T/out")" = 1 ] &&
  ok "the same kv_b_proj slice fails its MLA attention block check, and only that" ||
  bad "mutated kv_b_proj: block check" "rc=$rc" "$(grep -v ' pass' "$T/out" | head -5)"
# a wrong expert split (down_proj by columns) passes the structure check against
# its own plan but fails the MoE block check
"$TPCONV" plan deepseek-v3 | sed 's/"experts\\\\.\[0-9\]+\\\\.(w2|down_proj)\\\\.(weight|bias)$", "split": "row"/"experts\\\\.[0-9]+\\\\.(w2|down_proj)\\\\.(weight|bias)$", "split": "col"/' >"$T/wrong.json"
if grep -q '(w2|down_proj).*"split": "col"' "$T/wrong.json" && "$TPCONV" shard "$T/v3" --plan "$T/wrong.json" --tp 2 -o "$T/wrong" >/dev/null 2>&1; then
  run "$TPCONV" verify --reference "$T/v3" --shards "$T/wrong" --arch deepseek-v3
  [ "$rc" = 1 ] && grep -Eq 'mlp +model\.layers\.1\.moe .*FAIL' "$T/out" && ok "experts' down_proj split by columns fails the DeepSeek MoE block check (exit 1)" ||
    bad "wrong expert split" "rc=$rc" "$(grep -E 'moe' "$T/out" | head -3)"
else
  bad "wrong expert split: could not build the set" "$(head -3 "$T/wrong.json")"
fi
# tp must divide the heads (8): refused naming the numbers, with or without --pad
run "$TPCONV" shard "$T/v3" --preset deepseek-v3 --tp 16 --pad -o "$T/no1"
[ "$rc" = 3 ] && grep -q "tensor 'model.layers.0.self_attn.kv_b_proj.weight': 8 query heads in dim 0 (size 2048) cannot be split over tp 16: tp must divide the heads" "$T/err" && [ ! -e "$T/no1" ] &&
  ok "tp 16 over 8 MLA heads: exit 3: $(head -c 170 "$T/err")" || bad "tp 16" "rc=$rc" "$(cat "$T/err")"
# the preset is printed and listed
run "$TPCONV" plan deepseek-v3
[ "$rc" = 0 ] && grep -q '"head_count": true' "$T/out" && "$TPCONV" plan --list 2>&1 | grep -q '^ *deepseek-v3' &&
  ok "tpconv plan deepseek-v3 prints the preset; plan --list lists it" || bad "plan deepseek-v3" "$(head -3 "$T/err")"

# ---- FP8 block --pad ----
F=$T/v3fp8
run "$TPCONV" shard "$F" --preset deepseek-v3 --tp 4 -o "$T/no2"
want="tpconv: error: tensor 'model.layers.1.mlp.experts.0.down_proj.weight_scale_inv': its layer 'model.layers.1.mlp.experts.0.down_proj.weight' is split row into 64 input features per rank, not a multiple of 128 (the fp8 weight_block_size): a rank's slice at tp 4 would cut a 128 x 128 block; use --pad to zero-pad it to a multiple of 512 (block x tp), or choose a tp where it divides"
[ "$rc" = 3 ] && [ "$(cat "$T/err")" = "$want" ] && [ ! -e "$T/no2" ] &&
  ok "fp8 at tp 4 cuts a block: exit 3, the exact message naming tensor, block and tp and suggesting --pad" || bad "fp8 tp 4 refusal" "rc=$rc" "$(cat "$T/err")"
run "$TPCONV" shard "$F" --preset deepseek-v3 --tp 4 --pad --dry-run
[ "$rc" = 0 ] && grep -Eq 'experts\.0\.gate_proj\.weight +F8_E4M3 \[256, 256\] +col:0 +\[128, 256\] +pad 256' "$T/out" &&
  grep -Eq 'experts\.0\.gate_proj\.weight_scale_inv +F32 +\[2, 2\] +col:0 +\[1, 2\] +pad 2' "$T/out" && [ ! -e "$T/fp" ] &&
  ok "fp8 --pad dry run shows the weight padded 256 rows and its scales 2 blocks" || bad "fp8 --pad dry run" "$(grep experts.0.gate "$T/out" | head -3)" "$(head -3 "$T/err")"
S=$T/fp
run "$TPCONV" shard "$F" --preset deepseek-v3 --tp 4 --pad -o "$S"
if [ "$rc" = 0 ]; then
  $PY - "$S/tpconv-manifest.json" >"$T/x" 2>&1 <<'PYEOF' && ok "fp8 --pad manifest: experts and shared experts padded 256 (weights) / 2 (scales), attention and dense layers not" || bad "fp8 --pad manifest" "$(tail -3 "$T/x")"
import json, re, sys
m = {t["name"]: t for t in json.load(open(sys.argv[1]))["tensors"]}
n = 0
for k, t in m.items():
    pad = sum(p["pad"] for p in t.get("parts", []))
    want = 0
    if re.search(r"(experts\.\d+|shared_experts)\.", k) and k.endswith((".weight", ".weight_scale_inv")):
        want = 256 if k.endswith(".weight") else 2
    if re.search(r"embed_tokens|lm_head", k): want = pad  # vocab: its own padding
    assert pad == want, (k, pad, want); n += pad > 0
assert n == 2 * (16 * 3 + 3) * 2, n
print("padded", n)
PYEOF
  check_set "fp8 tp 4 --pad" "$F" "$S" 4 pad
  run "$TPCONV" merge "$S" --dequantize -o "$T/mdq.safetensors" -f
  rc1=$rc; run "$TPCONV" convert --dequantize "$F" -o "$T/cdq.safetensors" -f
  [ "$rc1" = 0 ] && [ "$rc" = 0 ] && same "$T/mdq.safetensors" "$T/cdq.safetensors" &&
    ok "fp8 --pad: merge --dequantize of the padded set equals convert --dequantize of the model" || bad "merge --dequantize" "$(head -3 "$T/err")"
else
  bad "fp8 tp 4 --pad: shard" "$(cat "$T/err")"
fi
run "$TPCONV" shard "$F" --preset deepseek-v3 --tp 8 --pad -o "$T/no3"
[ "$rc" = 3 ] && grep -q "q_b_proj.weight' is split col into 192 output features per rank, not a multiple of 128 (the fp8 weight_block_size): a rank's slice at tp 8 would cut a 128 x 128 block; a head split is not padded" "$T/err" && [ ! -e "$T/no3" ] &&
  ok "fp8 at tp 8: q_b_proj's heads (192 rows a rank) would cut a block; a head split is refused even with --pad" || bad "fp8 tp 8 --pad" "rc=$rc" "$(cat "$T/err")"
# megatron-dist holds dense weights: the FP8 model is refused by name, --dequantize too (a
# weight computed while written is not stacked as Megatron's [1, ...] items); the dense
# model convert --dequantize gives is written
run "$TPCONV" shard "$F" --preset deepseek-v3 --tp 2 --layout megatron-dist -o "$T/no4"
[ "$rc" = 3 ] && grep -q "weight_scale_inv': a fp8-quantized checkpoint .*dequantize it first (tpconv convert MODEL --dequantize" "$T/err" && [ ! -e "$T/no4" ] &&
  ok "fp8 into megatron-dist is refused by name (exit 3), saying to dequantize first" || bad "fp8 megatron-dist" "rc=$rc" "$(cat "$T/err")"
run "$TPCONV" shard "$F" --preset deepseek-v3 --tp 2 --dequantize --layout megatron-dist -o "$T/no4"
[ "$rc" = 2 ] && grep -q -- "--dequantize with --layout megatron-dist: .* dequantize first" "$T/err" && [ ! -e "$T/no4" ] &&
  run "$TPCONV" convert --dequantize "$F" -o "$T/dense/" -q && run "$TPCONV" shard "$T/dense" --preset deepseek-v3 --tp 2 --layout megatron-dist -o "$T/md" -q &&
  ok "fp8 shard --dequantize into megatron-dist: usage error (exit 2); convert --dequantize first, then it shards" ||
  bad "fp8 megatron-dist --dequantize" "rc=$rc" "$(cat "$T/err")"
# expert parallelism: the routed experts on EP groups (16 experts; tp 4 x ep 2,
# tp 8 x ep 8 round-robin), FP8 with --pad at tp 4 x ep 4
for c in "v3 4 2 contiguous" "v3 8 8 round-robin" "v3fp8 4 4 contiguous --pad"; do
  set -- $c; M=$T/$1 S=$T/ep-$1-$2-$3
  run "$TPCONV" shard "$M" --preset deepseek-v3 --tp $2 --ep $3 --ep-placement $4 ${5:-} -o "$S"
  if [ "$rc" != 0 ]; then bad "$1 tp $2 x ep $3: shard" "$(cat "$T/err")"; continue; fi
  run "$TPCONV" merge "$S" -o "$T/mep.safetensors" -f
  rc1=$rc; run "$TPCONV" verify --reference "$M" --shards "$S"
  [ "$rc1" = 0 ] && [ "$rc" = 0 ] && same "$T/mep.safetensors" "$M/model.safetensors" &&
    [ "$(grep -Ec '^ +mlp +model\.layers\.[0-9]+\.moe .* pass' "$T/out")" = 2 ] &&
    ok "$1 tp $2 x ep $3 ($4${5:+ $5}): merges back bit for bit, verify passes with its 2 MoE block checks" ||
    bad "$1 tp $2 x ep $3" "$(head -3 "$T/err")" "$(grep -v ' pass' "$T/out" | head -3)"
done
echo "1..$n"
[ "$failed" = 0 ]
