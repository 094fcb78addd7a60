#!/usr/bin/env bash
# Mixture-of-experts and the dense LLaMA-family presets (TAP). Tiny models with
# the real Hugging Face names and config.json are made with real torch:
# Mixtral (block_sparse_moe, w1/w2/w3, GQA), Qwen2-MoE (q/k/v biases, shared
# expert and its gate, a dense first layer), Qwen3-MoE (q_norm/k_norm), Gemma
# (head_dim != hidden/heads), Qwen3 (q_norm/k_norm, replicated K/V heads at
# tp 4) and Phi-3 (fused qkv_proj, gate_up_proj). Each is
# sharded with its preset at tp 2 and 4; every rank's tensor is compared bit for
# bit with an independent torch slicing written here the way vLLM's loaders
# slice (ColumnParallelLinear / RowParallelLinear / QKVParallelLinear /
# MergedColumnParallelLinear, FusedMoE w13 on the output and w2 on the input per
# tp rank, ReplicatedLinear routers); merge gives the model back bit for bit and
# verify passes. An MoE model under the plain llama preset is refused.
# usage: moe_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
$PY - "$T" <<'PYEOF' || { echo "1..0 # SKIP generator failed"; exit 0; }
import json, os, sys, torch
out = sys.argv[1]
g = torch.Generator().manual_seed(7)
def r(*s): return torch.randn(*s, generator=g)
def attn(sd, p, H, nh, kv, hd, bias=False, qk_norm=False, fused=False):
    if fused:
        sd[p + "self_attn.qkv_proj.weight"] = r((nh + 2 * kv) * hd, H)
    else:
        for n, o in (("q_proj", nh * hd), ("k_proj", kv * hd), ("v_proj", kv * hd)):
            sd[p + f"self_attn.{n}.weight"] = r(o, H)
            if bias: sd[p + f"self_attn.{n}.bias"] = r(o)
    sd[p + "self_attn.o_proj.weight"] = r(H, nh * hd)
    if qk_norm:
        sd[p + "self_attn.q_norm.weight"] = r(hd); sd[p + "self_attn.k_norm.weight"] = r(hd)
    sd[p + "input_layernorm.weight"] = r(H); sd[p + "post_attention_layernorm.weight"] = r(H)
def dense(sd, p, H, I, fused=False):
    if fused:
        sd[p + "mlp.gate_up_proj.weight"] = r(2 * I, H)
    else:
        sd[p + "mlp.gate_proj.weight"] = r(I, H); sd[p + "mlp.up_proj.weight"] = r(I, H)
    sd[p + "mlp.down_proj.weight"] = r(H, I)
def edges(sd, H, V, tie=False):
    sd["model.embed_tokens.weight"] = r(V, H); sd["model.norm.weight"] = r(H)
    if not tie: sd["lm_head.weight"] = r(V, H)
def save(name, sd, cfg):
    d = os.path.join(out, name); os.makedirs(d)
    torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
H, V, L = 64, 96, 2
# Mixtral: 8 heads, 4 kv heads, 4 experts of 48
sd = {}; E, I = 4, 48
edges(sd, H, V)
for l in range(L):
    p = f"model.layers.{l}."
    attn(sd, p, H, 8, 4, 8)
    sd[p + "block_sparse_moe.gate.weight"] = r(E, H)
    for e in range(E):
        q = p + f"block_sparse_moe.experts.{e}."
        sd[q + "w1.weight"] = r(I, H); sd[q + "w3.weight"] = r(I, H); sd[q + "w2.weight"] = r(H, I)
save("mixtral", sd, {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": H,
     "num_attention_heads": 8, "num_key_value_heads": 4, "intermediate_size": I, "num_local_experts": E,
     "num_experts_per_tok": 2, "num_hidden_layers": L, "vocab_size": V})
# Qwen2-MoE: biases, shared expert + gate, first layer dense (mlp_only_layers)
sd = {}; E, I, SI = 4, 32, 64
edges(sd, H, V)
for l in range(L):
    p = f"model.layers.{l}."
    attn(sd, p, H, 8, 2, 8, bias=True)
    if l == 0:
        dense(sd, p, H, 96); continue
    sd[p + "mlp.gate.weight"] = r(E, H)
    for e in range(E):
        q = p + f"mlp.experts.{e}."
        sd[q + "gate_proj.weight"] = r(I, H); sd[q + "up_proj.weight"] = r(I, H); sd[q + "down_proj.weight"] = r(H, I)
    q = p + "mlp.shared_expert."
    sd[q + "gate_proj.weight"] = r(SI, H); sd[q + "up_proj.weight"] = r(SI, H); sd[q + "down_proj.weight"] = r(H, SI)
    sd[p + "mlp.shared_expert_gate.weight"] = r(1, H)
save("qwen2moe", sd, {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": H,
     "num_attention_heads": 8, "num_key_value_heads": 2, "moe_intermediate_size": I, "intermediate_size": 96,
     "shared_expert_intermediate_size": SI, "num_experts": E, "num_experts_per_tok": 2, "mlp_only_layers": [0],
     "num_hidden_layers": L, "vocab_size": V})
# the same with DeepSeek-V3's routing: sigmoid scores, e_score_correction_bias,
# 2 groups of which the best 1 is kept (noaux_tc), renormalised, scaled by 2.5
sd["model.layers.1.mlp.gate.e_score_correction_bias"] = torch.rand(E, generator=g) * 0.1
save("qwen2v3", sd, {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": H,
     "num_attention_heads": 8, "num_key_value_heads": 2, "moe_intermediate_size": I, "intermediate_size": 96,
     "shared_expert_intermediate_size": SI, "num_experts": E, "num_experts_per_tok": 2, "mlp_only_layers": [0],
     "num_hidden_layers": L, "vocab_size": V, "scoring_func": "sigmoid", "topk_method": "noaux_tc", "n_group": 2,
     "topk_group": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.5})
# Qwen3-MoE: q_norm/k_norm, no biases, head_dim 16 (8 heads x 16 != 64)
sd = {}; E, I = 8, 16
edges(sd, H, V, tie=True)
for l in range(L):
    p = f"model.layers.{l}."
    attn(sd, p, H, 8, 4, 16, qk_norm=True)
    sd[p + "mlp.gate.weight"] = r(E, H)
    for e in range(E):
        q = p + f"mlp.experts.{e}."
        sd[q + "gate_proj.weight"] = r(I, H); sd[q + "up_proj.weight"] = r(I, H); sd[q + "down_proj.weight"] = r(H, I)
save("qwen3moe", sd, {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": H,
     "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 16, "moe_intermediate_size": I, "num_experts": E,
     "num_experts_per_tok": 2, "num_hidden_layers": L, "vocab_size": V, "tie_word_embeddings": True})
# Gemma: head_dim 32 with 4 heads on hidden 64, 1 kv head, tied embeddings
sd = {}
edges(sd, H, V, tie=True)
for l in range(L):
    p = f"model.layers.{l}."
    attn(sd, p, H, 4, 1, 32); dense(sd, p, H, 128)
save("gemma", sd, {"architectures": ["GemmaForCausalLM"], "model_type": "gemma", "hidden_size": H, "num_attention_heads": 4,
     "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 128, "num_hidden_layers": L, "vocab_size": V,
     "tie_word_embeddings": True})
# Qwen3 dense: q_norm/k_norm per head, head_dim 16 on hidden 64 (8 x 16 != 64),
# 2 kv heads (replicated at tp 4)
sd = {}
edges(sd, H, V)
for l in range(L):
    p = f"model.layers.{l}."
    attn(sd, p, H, 8, 2, 16, qk_norm=True); dense(sd, p, H, 96)
save("qwen3", sd, {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": H,
     "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
     "num_hidden_layers": L, "vocab_size": V, "rms_norm_eps": 1e-6, "tie_word_embeddings": False})
# Phi-3: fused qkv_proj and gate_up_proj
sd = {}
edges(sd, H, V)
for l in range(L):
    p = f"model.layers.{l}."
    attn(sd, p, H, 8, 8, 8, fused=True); dense(sd, p, H, 80, fused=True)
save("phi3", sd, {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": H, "num_attention_heads": 8,
     "num_key_value_heads": 8, "intermediate_size": 80, "num_hidden_layers": L, "vocab_size": V})
PYEOF

# the expected rank tensors, sliced independently the way vLLM's layers load them
cat >"$T/expect.py" <<'PYEOF'
import json, os, re, struct, sys, torch
model, setdir, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
sd = torch.load(os.path.join(model, "pytorch_model.bin"))
cfg = json.load(open(os.path.join(model, "config.json")))
nh, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
hd = cfg.get("head_dim") or cfg["hidden_size"] // nh
def load_st(path):
    raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n]); out = {}
    dt = {"F32": torch.float32}
    for k, m in h.items():
        if k == "__metadata__": continue
        a, b = m["data_offsets"]
        out[k] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=dt[m["dtype"]]).reshape(m["shape"])
    return out
def col(t, r): return t.chunk(tp, 0)[r]
def row(t, r): return t.chunk(tp, 1)[r]
def heads_col(t, r, n):  # on head boundaries; K/V replicated when tp > heads (vLLM QKVParallelLinear)
    if n >= tp: return t.view(n, hd, *t.shape[1:]).chunk(tp, 0)[r].reshape(-1, *t.shape[1:])
    return t.view(n, hd, *t.shape[1:])[r * n // tp].reshape(-1, *t.shape[1:])
def vocab(t, r):
    V = t.shape[0]; pad = (-V) % tp
    t = torch.cat([t, torch.zeros(pad, *t.shape[1:])]); return t.chunk(tp, 0)[r]
def expect(name, t, r):
    if re.search(r"self_attn\.q_proj\.", name): return heads_col(t, r, nh)
    if re.search(r"self_attn\.(k_proj|v_proj)\.", name): return heads_col(t, r, kv)
    if re.search(r"self_attn\.qkv_proj\.", name):
        q, k, v = t.split([nh * hd, kv * hd, kv * hd]); return torch.cat([heads_col(q, r, nh), heads_col(k, r, kv), heads_col(v, r, kv)])
    if re.search(r"self_attn\.o_proj\.weight", name): return row(t, r)
    if re.search(r"mlp\.gate_up_proj\.", name):
        a, b = t.chunk(2, 0); return torch.cat([col(a, r), col(b, r)])
    if re.search(r"(experts\.\d+\.(w1|w3|gate_proj|up_proj)|shared_expert\.(gate_proj|up_proj)|mlp\.(gate_proj|up_proj))\.", name): return col(t, r)
    if re.search(r"(experts\.\d+\.(w2|down_proj)|shared_expert\.down_proj|mlp\.down_proj)\.", name): return row(t, r)
    if re.search(r"embed_tokens|^lm_head", name): return vocab(t, r)
    return t  # routers, shared_expert_gate, norms, q_norm/k_norm: whole on every rank
bad = 0
for r in range(tp):
    got = load_st(os.path.join(setdir, f"model_tp{r:02d}_pp00.safetensors"))
    assert set(got) == set(sd), set(got) ^ set(sd)
    for k, t in sd.items():
        e = expect(k, t, r)
        if got[k].shape != e.shape or not torch.equal(got[k], e):
            print("rank", r, k, tuple(got[k].shape), tuple(e.shape)); bad += 1
print("bad", bad)
sys.exit(1 if bad else 0)
PYEOF

for m in "mixtral mixtral 2" "qwen2moe qwen2-moe 1" "qwen3moe qwen3-moe 2" "gemma gemma 0" "qwen3 qwen3 0" "phi3 phi3 0"; do
  set -- $m; M=$T/$1 P=$2
  tps="2 4"; [ "$SAN" = 1 ] && tps=2   # sanitizer build: one split
  for tp in $tps; do
    S=$T/$1-tp$tp
    run "$TPCONV" shard "$M" --preset "$P" --tp "$tp" -o "$S"
    if [ "$rc" != 0 ]; then bad "$1 tp $tp: shard with --preset $P" "$(cat "$T/err")"; continue; fi
    $PY "$T/expect.py" "$M" "$S" "$tp" >"$T/x" 2>&1 && ok "$1 tp $tp: every rank tensor equals vLLM-style torch slicing" ||
      bad "$1 tp $tp: rank tensors" "$(tail -4 "$T/x")"
    run "$TPCONV" merge "$S" -o "$T/m.safetensors" -f
    [ "$rc" = 0 ] && same "$T/m.safetensors" "$M/pytorch_model.bin" && ok "$1 tp $tp: merge gives the model back bit for bit" ||
      bad "$1 tp $tp: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -3)"
    run "$TPCONV" verify --reference "$M" --shards "$S"
    [ "$rc" = 0 ] && ok "$1 tp $tp: verify passes ($(tail -1 "$T/out" | cut -c1-60))" || bad "$1 tp $tp: verify" "$(grep -v ' pass' "$T/out" | head -4)" "$(head -3 "$T/err")"
    if [ "$3" != 0 ]; then
      nm=$(grep -Ec '^ +mlp +model\.layers\.[0-9]+\.moe .* pass' "$T/out")
      [ "$nm" = "$3" ] && grep -Eq '^ +model +model .*pass' "$T/out" && ! grep -Eq ' skip( |$)' "$T/out" &&
        ok "$1 tp $tp: verify ran $3 MoE block checks (routing, experts summed across ranks) and the whole-model check through them, nothing skipped" ||
        bad "$1 tp $tp: MoE block checks" "found $nm, want $3" "$(grep -E 'moe|model ' "$T/out" | head -4)"
    fi
  done
done

# Qwen3's per-head q_norm takes part in the attention and model checks: a set
# whose rank 1 holds a doubled q_norm fails them (it passed before verify
# applied q_norm/k_norm)
# double.py FILE TENSOR [ROWS]: the tensor (its first ROWS rows) doubled in place
cat >"$T/double.py" <<'PYEOF'
import json, struct, sys
f = open(sys.argv[1], "r+b"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
m = h[sys.argv[2]]; a, b = m["data_offsets"]
if len(sys.argv) > 3: b = a + int(sys.argv[3]) * (b - a) // m["shape"][0]
f.seek(8 + n + a); raw = f.read(b - a)
v = [2 * x for x in struct.unpack("<%df" % ((b - a) // 4), raw)]
f.seek(8 + n + a); f.write(struct.pack("<%df" % len(v), *v))
PYEOF
rm -rf "$T/q3bad"; cp -r "$T/qwen3-tp2" "$T/q3bad"
$PY "$T/double.py" "$T/q3bad/model_tp01_pp00.safetensors" model.layers.0.self_attn.q_norm.weight
run "$TPCONV" verify --reference "$T/qwen3" --shards "$T/q3bad"
[ "$rc" = 1 ] && grep -Eq '^ +attn +model\.layers\.0\.attn .*FAIL' "$T/out" && grep -Eq '^ +model +model .*FAIL' "$T/out" &&
  grep -Eq '^ +attn +model\.layers\.1\.attn .*pass' "$T/out" &&
  ok "qwen3: a rank with a different q_norm fails layer 0's attention check and the model check (exit 1)" ||
  bad "qwen3 q_norm in verify" "rc=$rc" "$(grep -E 'attn|model ' "$T/out" | head -4)"

# one expert's slice changed in one rank file (4 rows of rank 1's w1 of layer 1's
# expert 3, which tokens choose) fails the whole-model check on its own, naming
# the first layer whose output differs (the model check skipped MoE models before)
rm -rf "$T/mxbad"; cp -r "$T/mixtral-tp2" "$T/mxbad"
$PY "$T/double.py" "$T/mxbad/model_tp01_pp00.safetensors" model.layers.1.block_sparse_moe.experts.3.w1.weight 4
run "$TPCONV" verify --reference "$T/mixtral" --shards "$T/mxbad" --checks model --json "$T/mx.json"
[ "$rc" = 1 ] && grep -Eq '^ +model +model .*FAIL' "$T/out" &&
  $PY -c 'import json, sys; c = [c for c in json.load(open(sys.argv[1]))["checks"] if c["check"] == "model"][0]; sys.exit(not (c["status"] == "fail" and "layer whose output differs: '"'"'model.layers.1'"'"'" in c["message"]))' "$T/mx.json" &&
  ok "mixtral: a changed slice of one expert in one rank file fails the model check, naming layer 1 (exit 1)" ||
  bad "mixtral mutated expert: model check" "rc=$rc" "$(grep -E 'model ' "$T/out" | head -3)" "$(head -c 400 "$T/mx.json")"

# DeepSeek-V3 routing (grouped top-k, correction bias, scaling) in the model
# check: the set passes with nothing skipped; a rank 0 whose correction bias
# sends tokens to other experts fails it, naming the layer and token (its
# logits alone would agree: the reference runs the experts the split run chose)
run "$TPCONV" shard "$T/qwen2v3" --preset qwen2-moe --tp 2 -o "$T/q2v3"
run "$TPCONV" verify --reference "$T/qwen2v3" --shards "$T/q2v3"
[ "$rc" = 0 ] && grep -Eq '^ +model +model .*pass' "$T/out" && ! grep -Eq ' skip( |$)' "$T/out" &&
  ok "qwen2-moe with DeepSeek-V3 routing tp 2: the model check passes through the MoE layer, nothing skipped" ||
  bad "qwen2v3 verify" "rc=$rc" "$(grep -E 'moe|model |skip' "$T/out" | head -3)" "$(head -3 "$T/err")"
$PY - "$T/q2v3/model_tp00_pp00.safetensors" <<'PYEOF'
import json, struct, sys
f = open(sys.argv[1], "r+b"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
a, b = h["model.layers.1.mlp.gate.e_score_correction_bias"]["data_offsets"]; f.seek(8 + n + a); f.write(struct.pack("<4f", 0, 0, 0, 1))
PYEOF
run "$TPCONV" verify --reference "$T/qwen2v3" --shards "$T/q2v3" --checks model
[ "$rc" = 1 ] && grep -Eq "^# +'model\.layers\.1' routes token [0-9]+ to other experts" "$T/out" &&
  ok "qwen2v3: a rank 0 correction bias that changes the routing fails the model check, naming layer and token" ||
  bad "qwen2v3 routing bias" "rc=$rc" "$(grep -E 'model' "$T/out" | head -3)"

# a wrong expert split (w2 by columns) passes the structure check against its own
# plan but fails the MoE block check
"$TPCONV" plan mixtral | sed 's/"experts\\\\.\[0-9\]+\\\\.(w2|down_proj)\\\\.(weight|bias)$", "split": "row"/"experts\\\\.[0-9]+\\\\.(w2|down_proj)\\\\.(weight|bias)$", "split": "col"/' >"$T/wrong.json"
rm -rf "$T/wrong"
if grep -q '(w2|down_proj).*"split": "col"' "$T/wrong.json" && "$TPCONV" shard "$T/mixtral" --plan "$T/wrong.json" --tp 2 -o "$T/wrong" >/dev/null 2>&1; then
  run "$TPCONV" verify --reference "$T/mixtral" --shards "$T/wrong" --arch llama
  [ "$rc" = 1 ] && grep -Eq 'mlp +model\.layers\.0\.moe .*FAIL' "$T/out" && ok "a set with experts' w2 split by columns fails the MoE block check (exit 1)" ||
    bad "wrong expert split" "rc=$rc" "$(grep -E 'moe' "$T/out" | head -3)"
else
  bad "wrong expert split: could not build the set" "$(head -3 "$T/wrong.json")"
fi

# refused: an MoE model under the dense llama plan (its config.json names
# MixtralForCausalLM: exit 2; forced, the plan itself refuses an expert tensor)
run "$TPCONV" shard "$T/mixtral" --preset llama --tp 2 -o "$T/no"
[ "$rc" = 2 ] && grep -qF "names MixtralForCausalLM: give --preset mixtral" "$T/err" && [ ! -e "$T/no" ] &&
  ok "mixtral under the llama preset is refused by its config.json's architectures" || bad "mixtral under llama, config" "rc=$rc" "$(head -3 "$T/err")"
run "$TPCONV" shard "$T/mixtral" --preset llama --preset-force --tp 2 -o "$T/no"
[ "$rc" = 3 ] && grep -q "block_sparse_moe" "$T/err" && [ ! -e "$T/no" ] &&
  ok "mixtral under the llama preset is refused, naming an expert tensor: $(head -c 160 "$T/err")" || bad "mixtral under llama" "rc=$rc" "$(head -3 "$T/err")"

echo "1..$n"
[ "$failed" = 0 ]
