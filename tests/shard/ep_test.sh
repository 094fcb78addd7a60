#!/usr/bin/env bash
# Expert parallelism (TAP): shard --ep N. Tiny Mixtral and Qwen2-MoE models with
# the real Hugging Face names and config.json, 8 experts each, are made with real
# torch and sharded at several tp x ep (TensorRT-LLM's mapping: moe_ep_size N,
# moe_tp_size tp/N), contiguous and round-robin. Every rank's tensors are compared
# bit for bit with an independent torch slicing written here (dense tensors over
# all tp ranks as vLLM's layers load them; expert e only on the ranks of the
# group that owns it, split tp/N ways there); merge gives the model back bit for
# bit; reshard to and from EP sets equals the direct split; verify passes with
# its MoE block checks summing every group's experts across all ranks; the
# trtllm layout's mapping says moe_ep_size/moe_tp_size. Refusals: ep not
# dividing tp, a plan without expert patterns, layouts that cannot hold EP sets,
# experts not dividing over the groups, a manifest whose expert placement was
# edited, rank files of two groups swapped.
# usage: ep_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
$PY - "$T" <<'PYEOF' || { echo "1..0 # SKIP generator failed"; exit 0; }
import json, os, sys, torch
out = sys.argv[1]
g = torch.Generator().manual_seed(11)
def r(*s): return torch.randn(*s, generator=g)
H, V, L = 64, 96, 2
def attn(sd, p, nh, kv, hd, bias=False):
    for n, o in (("q_proj", nh * hd), ("k_proj", kv * hd), ("v_proj", kv * hd)):
        sd[p + f"self_attn.{n}.weight"] = r(o, H)
        if bias: sd[p + f"self_attn.{n}.bias"] = r(o)
    sd[p + "self_attn.o_proj.weight"] = r(H, nh * hd)
    sd[p + "input_layernorm.weight"] = r(H); sd[p + "post_attention_layernorm.weight"] = r(H)
def edges(sd):
    sd["model.embed_tokens.weight"] = r(V, H); sd["model.norm.weight"] = r(H); sd["lm_head.weight"] = r(V, H)
def save(name, sd, cfg):
    d = os.path.join(out, name); os.makedirs(d)
    torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
# Mixtral: 8 heads, 4 kv heads (replicated at tp 8), 8 experts of 32
sd = {}; E, I = 8, 32
edges(sd)
for l in range(L):
    p = f"model.layers.{l}."
    attn(sd, p, 8, 4, 8)
    sd[p + "block_sparse_moe.gate.weight"] = r(E, H)
    for e in range(E):
        q = p + f"block_sparse_moe.experts.{e}."
        sd[q + "w1.weight"] = r(I, H); sd[q + "w3.weight"] = r(I, H); sd[q + "w2.weight"] = r(H, I)
save("mixtral", sd, {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": H,
     "num_attention_heads": 8, "num_key_value_heads": 4, "intermediate_size": I, "num_local_experts": E,
     "num_experts_per_tok": 2, "num_hidden_layers": L, "vocab_size": V})
# Qwen2-MoE: q/k/v biases, a shared expert and its gate, a dense first layer, 8 experts
sd = {}; E, I, SI = 8, 16, 64
edges(sd)
for l in range(L):
    p = f"model.layers.{l}."
    attn(sd, p, 8, 2, 8, bias=True)
    if l == 0:
        sd[p + "mlp.gate_proj.weight"] = r(96, H); sd[p + "mlp.up_proj.weight"] = r(96, H); sd[p + "mlp.down_proj.weight"] = r(H, 96)
        continue
    sd[p + "mlp.gate.weight"] = r(E, H)
    for e in range(E):
        q = p + f"mlp.experts.{e}."
        sd[q + "gate_proj.weight"] = r(I, H); sd[q + "up_proj.weight"] = r(I, H); sd[q + "down_proj.weight"] = r(H, I)
    q = p + "mlp.shared_expert."
    sd[q + "gate_proj.weight"] = r(SI, H); sd[q + "up_proj.weight"] = r(SI, H); sd[q + "down_proj.weight"] = r(H, SI)
    sd[p + "mlp.shared_expert_gate.weight"] = r(1, H)
save("qwen2moe", sd, {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": H,
     "num_attention_heads": 8, "num_key_value_heads": 2, "moe_intermediate_size": I, "intermediate_size": 96,
     "shared_expert_intermediate_size": SI, "num_experts": E, "num_experts_per_tok": 2, "norm_topk_prob": False,
     "mlp_only_layers": [0], "num_hidden_layers": L, "vocab_size": V})
PYEOF

# the expected rank tensors: dense ones the way vLLM's layers slice them over
# all tp ranks; expert e on the tp/ep ranks of its group only, sliced there
cat >"$T/expect.py" <<'PYEOF'
import json, os, re, struct, sys, torch
model, setdir, tp, ep, placement = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
sd = torch.load(os.path.join(model, "pytorch_model.bin"))
cfg = json.load(open(os.path.join(model, "config.json")))
nh, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
E = cfg.get("num_local_experts") or cfg["num_experts"]
hd = cfg["hidden_size"] // nh
mtp = tp // ep  # moe_tp_size
def owner(e): return e % ep if placement == "round-robin" else e // (E // ep)
def load_st(path):
    raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n]); out = {}
    for k, m in h.items():
        if k == "__metadata__": continue
        a, b = m["data_offsets"]
        out[k] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=torch.float32).reshape(m["shape"])
    return out, h.get("__metadata__", {})
def heads_col(t, r, n):
    if n >= tp: return t.view(n, hd, *t.shape[1:]).chunk(tp, 0)[r].reshape(-1, *t.shape[1:])
    return t.view(n, hd, *t.shape[1:])[r * n // tp].reshape(-1, *t.shape[1:])
def vocab(t, r):
    pad = (-t.shape[0]) % tp
    return torch.cat([t, torch.zeros(pad, *t.shape[1:])]).chunk(tp, 0)[r]
def expect(name, t, r):
    m = re.search(r"experts\.(\d+)\.", name)
    if m:  # a routed expert: its group's ranks only, split mtp ways
        e = int(m.group(1))
        if owner(e) != r // mtp: return None
        lr = r % mtp
        if re.search(r"\.(w1|w3|gate_proj|up_proj)\.", name): return t.chunk(mtp, 0)[lr]
        return t.chunk(mtp, 1)[lr]
    if re.search(r"self_attn\.q_proj\.", name): return heads_col(t, r, nh)
    if re.search(r"self_attn\.(k_proj|v_proj)\.", name): return heads_col(t, r, kv)
    if re.search(r"self_attn\.o_proj\.weight", name): return t.chunk(tp, 1)[r]
    if re.search(r"(shared_expert|mlp)\.(gate_proj|up_proj)\.", name): return t.chunk(tp, 0)[r]
    if re.search(r"(shared_expert|mlp)\.down_proj\.", name): return t.chunk(tp, 1)[r]
    if re.search(r"embed_tokens|^lm_head", name): return vocab(t, r)
    return t
bad = 0; held = 0
for r in range(tp):
    got, meta = load_st(os.path.join(setdir, f"model_tp{r:02d}_pp00.safetensors"))
    if meta.get("tpconv.ep") != str(ep) or meta.get("tpconv.ep_rank") != str(r // mtp):
        print("rank", r, "metadata", meta.get("tpconv.ep"), meta.get("tpconv.ep_rank")); bad += 1
    want = {k: expect(k, t, r) for k, t in sd.items()}
    want = {k: v for k, v in want.items() if v is not None}
    if set(got) != set(want):
        print("rank", r, "names differ:", sorted(set(got) ^ set(want))[:4]); bad += 1; continue
    for k, e in want.items():
        held += "experts." in k
        if got[k].shape != e.shape or not torch.equal(got[k], e):
            print("rank", r, k, tuple(got[k].shape), tuple(e.shape)); bad += 1
# every expert tensor is on exactly mtp ranks
nexp = sum("experts." in k and "shared" not in k for k in sd)
if held != nexp * mtp: print("expert copies", held, "want", nexp * mtp); bad += 1
print("bad", bad)
sys.exit(1 if bad else 0)
PYEOF

cases="mixtral:mixtral:2:2:contiguous:2 mixtral:mixtral:4:2:contiguous:2 mixtral:mixtral:4:4:contiguous:2
mixtral:mixtral:8:4:contiguous:2 mixtral:mixtral:8:8:round-robin:2 mixtral:mixtral:4:2:round-robin:2
qwen2moe:qwen2-moe:4:2:contiguous:1 qwen2moe:qwen2-moe:4:4:round-robin:1 qwen2moe:qwen2-moe:8:2:contiguous:1"
for c in $cases; do
  IFS=: read -r m p tp ep pl nmoe <<<"$c"
  M=$T/$m S=$T/$m-tp$tp-ep$ep-$pl
  run "$TPCONV" shard "$M" --preset "$p" --tp "$tp" --ep "$ep" --ep-placement "$pl" -o "$S"
  if [ "$rc" != 0 ]; then bad "$m tp $tp ep $ep $pl: shard" "$(cat "$T/err")"; continue; fi
  $PY "$T/expect.py" "$M" "$S" "$tp" "$ep" "$pl" >"$T/x" 2>&1 &&
    ok "$m tp $tp ep $ep ($pl): every rank holds exactly its group's experts, each equal to an independent torch slicing" ||
    bad "$m tp $tp ep $ep $pl: rank tensors" "$(tail -4 "$T/x")"
  run "$TPCONV" merge "$S" -o "$T/m.safetensors" -f
  [ "$rc" = 0 ] && same "$T/m.safetensors" "$M/pytorch_model.bin" && ok "$m tp $tp ep $ep ($pl): merge gives the model back bit for bit" ||
    bad "$m tp $tp ep $ep: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -3)"
  run "$TPCONV" verify --reference "$M" --shards "$S"
  nm=$(grep -Ec '^ +mlp +model\.layers\.[0-9]+\.moe .* pass' "$T/out")
  [ "$rc" = 0 ] && [ "$nm" = "$nmoe" ] && ok "$m tp $tp ep $ep ($pl): verify passes, $nm MoE block checks ($(tail -1 "$T/out" | cut -c1-50))" ||
    bad "$m tp $tp ep $ep: verify (rc=$rc, $nm MoE checks)" "$(grep -v ' pass' "$T/out" | head -4)" "$(head -3 "$T/err")"
done

# the dry run says where the experts go
run "$TPCONV" shard "$T/mixtral" --preset mixtral --tp 8 --ep 4 --dry-run
grep -q '^# experts: 8 routed per layer over ep 4 groups of 2 ranks (moe_ep_size 4 x moe_tp_size 2), contiguous: group 0 (ranks 0..1): experts 0..1;' "$T/out" &&
  grep -Eq 'experts\.7\.w2\.weight .*row:1 +\[64, 16\] +expert 7: ep group 3' "$T/out" &&
  ok "dry run: the EP groups, their ranks and experts, and each expert tensor's group" || bad "dry run" "$(grep -E '^# experts|experts\.7\.w2' "$T/out" | head -3)"

# inspect names the EP geometry of a set
run "$TPCONV" inspect "$T/mixtral-tp8-ep8-round-robin"
grep -q '^# shard set: layout tpconv, tp 8, pp 1, ep 8 (8 experts per layer, round-robin; 1 rank per expert), 8 rank files' "$T/out" &&
  ok "inspect of an EP set names ep, experts and placement" || bad "inspect EP set" "$(head -2 "$T/out")"

# reshard: EP set -> plain tp 2 equals the direct split; tp 8 ep 4 -> tp 4 ep 2 equals the direct one
S84=$T/mixtral-tp8-ep4-contiguous
run "$TPCONV" shard "$S84" --tp 2 -o "$T/re2"
run2() { "$TPCONV" shard "$T/mixtral" --preset mixtral "$@" >/dev/null 2>&1; }
if [ "$rc" = 0 ] && run2 --tp 2 -o "$T/d2"; then
  okall=1
  for r in 0 1; do same "$T/re2/model_tp0${r}_pp00.safetensors" "$T/d2/model_tp0${r}_pp00.safetensors" || okall=0; done
  [ $okall = 1 ] && ok "reshard tp 8 x ep 4 -> tp 2: the rank tensors equal the direct tp 2 split" || bad "reshard ep -> tp 2 differs"
else bad "reshard ep -> tp 2" "$(head -3 "$T/err")"; fi
run "$TPCONV" shard "$S84" --tp 4 --ep 2 -o "$T/re42"
if [ "$rc" = 0 ]; then
  $PY "$T/expect.py" "$T/mixtral" "$T/re42" 4 2 contiguous >"$T/x" 2>&1 &&
    ok "reshard tp 8 x ep 4 -> tp 4 x ep 2: every rank equals the independent slicing" || bad "reshard ep -> ep" "$(tail -3 "$T/x")"
else bad "reshard ep -> ep" "$(head -3 "$T/err")"; fi

# TensorRT-LLM's mapping (the hf-mapping layout; the trtllm layout's checkpoint: trtllm_test.sh)
run "$TPCONV" shard "$T/mixtral" --preset mixtral --tp 8 --ep 4 --layout hf-mapping -o "$T/trt"
[ "$rc" = 0 ] && $PY -c '
import json, sys; m = json.load(open(sys.argv[1]))["mapping"]
sys.exit(0 if (m["world_size"], m["tp_size"], m["moe_tp_size"], m["moe_ep_size"]) == (8, 8, 2, 4) else 1)' "$T/trt/config.json" &&
  ok "hf-mapping layout: config.json mapping says tp_size 8, moe_ep_size 4, moe_tp_size 2" || bad "hf-mapping mapping" "$(head -3 "$T/err")" "$(grep -o '"mapping"[^}]*' "$T/trt/config.json" 2>/dev/null)"
run "$TPCONV" merge "$T/trt" -o "$T/mt.safetensors" -f
[ "$rc" = 0 ] && same "$T/mt.safetensors" "$T/mixtral/pytorch_model.bin" && ok "hf-mapping EP set merges back bit for bit" || bad "hf-mapping merge" "$(head -3 "$T/err")"

# with pipeline stages, and written in two runs of disjoint --rank subsets
run "$TPCONV" shard "$T/mixtral" --preset mixtral --tp 4 --ep 2 --pp 2 -o "$T/pp2"
[ "$rc" = 0 ] && "$TPCONV" merge "$T/pp2" -o "$T/mp.safetensors" -f >/dev/null 2>&1 && same "$T/mp.safetensors" "$T/mixtral/pytorch_model.bin" &&
  "$TPCONV" verify --reference "$T/mixtral" --shards "$T/pp2" >"$T/out" 2>&1 &&
  ok "tp 4 x ep 2 x pp 2: merges back bit for bit and verifies" || bad "ep with pp 2 (rc=$rc)" "$(head -3 "$T/err")" "$(grep -v ' pass' "$T/out" | head -3)"
"$TPCONV" shard "$T/mixtral" --preset mixtral --tp 4 --ep 2 --rank 0-1 -o "$T/rk" >/dev/null 2>&1
[ ! -e "$T/rk/tpconv-manifest.json" ] && "$TPCONV" shard "$T/mixtral" --preset mixtral --tp 4 --ep 2 --rank 2,3 -o "$T/rk" >/dev/null 2>&1 &&
  [ -e "$T/rk/tpconv-manifest.json" ] && "$TPCONV" merge "$T/rk" -o "$T/mr.safetensors" -f >/dev/null 2>&1 && same "$T/mr.safetensors" "$T/mixtral/pytorch_model.bin" &&
  ok "an EP set written by two runs (--rank 0-1, then 2,3): the second completes it, merge bit for bit" || bad "EP set in two --rank runs"

# the hf layout (a folder per rank) holds EP sets too
run "$TPCONV" shard "$T/qwen2moe" --preset qwen2-moe --tp 4 --ep 2 --layout hf -o "$T/hf"
[ "$rc" = 0 ] && "$TPCONV" merge "$T/hf" -o "$T/mh.safetensors" -f >/dev/null 2>&1 && same "$T/mh.safetensors" "$T/qwen2moe/pytorch_model.bin" &&
  "$TPCONV" verify --reference "$T/qwen2moe" --shards "$T/hf" >"$T/out" 2>&1 &&
  ok "hf layout, qwen2-moe tp 4 x ep 2: merges back bit for bit and verifies" || bad "hf layout EP set (rc=$rc)" "$(head -3 "$T/err")" "$(grep -v ' pass' "$T/out" | head -3)"

# under mpirun each process verifies its own ranks: the same report as the threads backend
if command -v mpirun >/dev/null; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"   # OpenMPI's own allocations
  S=$T/mixtral-tp4-ep2-contiguous
  "$TPCONV" verify --reference "$T/mixtral" --shards "$S" --json "$T/th.json" -q >/dev/null 2>&1
  mpirun --allow-run-as-root --oversubscribe -np 4 "$TPCONV" verify --reference "$T/mixtral" --shards "$S" --json "$T/mpi.json" -q >/dev/null 2>&1
  rc=$?
  [ "$rc" = 0 ] && $PY -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda r: [(c["check"], c["tensor"], c["status"], c["digest"]) for c in r["checks"]]
sys.exit(0 if key(a) == key(b) and a["failed"] == 0 else 1)' "$T/th.json" "$T/mpi.json" &&
    ok "mpirun -np 4 verify of a tp 4 x ep 2 set: every check and digest equal the threads backend's" || bad "mpirun verify of an EP set (rc=$rc)"
else
  skip "mpirun verify of an EP set" "no mpirun"
fi

# a GPTQ-quantized Mixtral: each expert's qweight/qzeros/scales/g_idx go with it to
# its group and split there as its layer (w1/w3 on the output, w2 on the input)
$PY - "$T" <<'PYEOF'
import json, os, sys, torch
out = os.path.join(sys.argv[1], "gptq"); os.makedirs(out)
g = torch.Generator().manual_seed(5)
def ri(*s): return torch.randint(-2**31, 2**31 - 1, s, generator=g, dtype=torch.int32)
H, V, E, I, G = 64, 96, 4, 64, 32
sd = {"model.embed_tokens.weight": torch.randn(V, H, generator=g), "lm_head.weight": torch.randn(V, H, generator=g),
      "model.norm.weight": torch.randn(H, generator=g)}
for l in range(2):
    p = f"model.layers.{l}."
    for n, o in (("q_proj", 64), ("k_proj", 32), ("v_proj", 32)): sd[p + f"self_attn.{n}.weight"] = torch.randn(o, H, generator=g)
    sd[p + "self_attn.o_proj.weight"] = torch.randn(H, 64, generator=g)
    sd[p + "block_sparse_moe.gate.weight"] = torch.randn(E, H, generator=g)
    for e in range(E):
        for w, (o, i) in (("w1", (I, H)), ("w3", (I, H)), ("w2", (H, I))):
            q = p + f"block_sparse_moe.experts.{e}.{w}."
            sd[q + "qweight"] = ri(i // 8, o); sd[q + "qzeros"] = ri(i // G, o // 8)
            sd[q + "scales"] = torch.randn(i // G, o, generator=g).half(); sd[q + "g_idx"] = (torch.arange(i) // G).int()
torch.save(sd, os.path.join(out, "pytorch_model.bin"))
json.dump({"architectures": ["MixtralForCausalLM"], "hidden_size": H, "num_attention_heads": 8, "num_key_value_heads": 4,
           "intermediate_size": I, "num_local_experts": E, "num_experts_per_tok": 2, "num_hidden_layers": 2, "vocab_size": V,
           "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": G, "desc_act": False, "sym": True}},
          open(os.path.join(out, "config.json"), "w"))
PYEOF
run "$TPCONV" shard "$T/gptq" --preset mixtral --tp 4 --ep 2 -o "$T/gq"
if [ "$rc" = 0 ]; then
  $PY - "$T/gptq" "$T/gq" <<'PYEOF' >"$T/x" 2>&1 && ok "GPTQ Mixtral tp 4 x ep 2: every expert's qweight/qzeros/scales/g_idx on its group only, split as GPTQ packs them" || bad "GPTQ Mixtral EP ranks" "$(tail -3 "$T/x")"
import json, os, re, struct, sys, torch
sd = torch.load(os.path.join(sys.argv[1], "pytorch_model.bin")); tp, ep, mtp = 4, 2, 2
dt = {"F32": torch.float32, "F16": torch.float16, "I32": torch.int32}
def load(path):
    raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n]); o = {}
    for k, m in h.items():
        if k == "__metadata__": continue
        a, b = m["data_offsets"]; o[k] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=dt[m["dtype"]]).reshape(m["shape"])
    return o
bad = 0
for r in range(tp):
    got = load(os.path.join(sys.argv[2], f"model_tp{r:02d}_pp00.safetensors")); lr = r % mtp
    for k, t in sd.items():
        m = re.search(r"experts\.(\d+)\.(w[123])\.(\w+)$", k)
        if not m:
            continue
        e, w, c = int(m.group(1)), m.group(2), m.group(3)
        if e // 2 != r // mtp:
            if k in got: print("rank", r, "holds", k); bad += 1
            continue
        if w in ("w1", "w3"): want = t if c == "g_idx" else t.chunk(mtp, 1)[lr]   # output features
        else: want = t.chunk(mtp, 0)[lr]                                          # input rows, groups, g_idx
        if k not in got or not torch.equal(got[k], want): print("rank", r, k); bad += 1
print("bad", bad); sys.exit(1 if bad else 0)
PYEOF
  run "$TPCONV" merge "$T/gq" -o "$T/mg.safetensors" -f
  [ "$rc" = 0 ] && same "$T/mg.safetensors" "$T/gptq/pytorch_model.bin" && ok "GPTQ Mixtral tp 4 x ep 2 merges back bit for bit" || bad "GPTQ EP merge" "$(head -3 "$T/err")"
else
  bad "GPTQ Mixtral tp 4 x ep 2: shard" "$(head -3 "$T/err")"
fi

# refusals: exit 2 (usage) or 3 (input), nothing written
refuse() { # want-rc grep-text description args...
  local want=$1 text=$2 what=$3; shift 3
  rm -rf "$T/no"
  run "$TPCONV" shard "$@" -o "$T/no"
  [ "$rc" = "$want" ] && grep -qF -- "$text" "$T/err" && [ ! -e "$T/no/tpconv-manifest.json" ] && ! ls "$T/no"/*.safetensors >/dev/null 2>&1 &&
    ok "$what is refused (exit $want): $(head -c 150 "$T/err")" || bad "$what (rc=$rc)" "$(head -3 "$T/err")"
}
refuse 2 "--ep 3 does not divide --tp 4" "--ep 3 with --tp 4" "$T/mixtral" --preset mixtral --tp 4 --ep 3
refuse 2 "plan 'llama' has none" "--ep with a plan that names no experts" "$T/mixtral" --preset llama --preset-force --tp 4 --ep 2
refuse 2 "the vllm layout does not hold expert-parallel sets" "--ep with the vllm layout" "$T/mixtral" --preset mixtral --tp 4 --ep 2 --layout vllm
refuse 2 "the megatron layout holds tp x pp ranks" "--ep over --tp with the megatron layout" "$T/mixtral" --preset mixtral --tp 2 --ep 4 --layout megatron
refuse 3 "8 routed experts do not divide over --ep 16 groups" "8 experts over 16 groups" "$T/mixtral" --preset mixtral --tp 16 --ep 16
refuse 2 "unknown --ep-placement 'zigzag'" "an unknown placement" "$T/mixtral" --preset mixtral --tp 4 --ep 2 --ep-placement zigzag
mkdir -p "$T/cfg4" && sed 's/"num_local_experts": 8/"num_local_experts": 4/' "$T/mixtral/config.json" >"$T/cfg4/config.json"
refuse 2 "experts 4 ('$T/cfg4/config.json') contradicts this tensor [32, 64] of expert index 7" "a checkpoint with more experts than config.json says" "$T/mixtral" --preset mixtral --tp 4 --ep 2 --config "$T/cfg4/config.json"
mkdir -p "$T/cfg16" && sed 's/"num_local_experts": 8/"num_local_experts": 16/' "$T/mixtral/config.json" >"$T/cfg16/config.json"
refuse 2 "experts 16 ('$T/cfg16/config.json') contradicts the checkpoint: its highest expert index is 7" "a checkpoint with fewer experts than config.json says (EP would place experts it lacks)" "$T/mixtral" --preset mixtral --tp 4 --ep 2 --config "$T/cfg16/config.json"

# a manifest whose placement was edited: merge refuses, naming the tensor
E42=$T/mixtral-tp4-ep2-contiguous
cp -r "$E42" "$T/edited" && sed -i 's/"ep_placement": "contiguous"/"ep_placement": "round-robin"/' "$T/edited/tpconv-manifest.json"
run "$TPCONV" merge "$T/edited" -o "$T/no.safetensors"
[ "$rc" = 3 ] && grep -q "expert 1 is on group 0, but round-robin placement puts it on group 1" "$T/err" && [ ! -e "$T/no.safetensors" ] &&
  ok "a manifest whose expert placement was edited is refused: $(head -c 160 "$T/err")" || bad "edited placement (rc=$rc)" "$(head -3 "$T/err")"
# hostile manifest edits: an ep that does not divide tp; a checksum for a rank that lacks the expert
cp -r "$E42" "$T/ep3" && sed -i 's/"ep": 2,/"ep": 3,/' "$T/ep3/tpconv-manifest.json"
run "$TPCONV" merge "$T/ep3" -o "$T/no.safetensors"
[ "$rc" = 3 ] && grep -q 'manifest: "ep" must divide tp' "$T/err" && ok "a manifest with ep 3 at tp 4 is refused" || bad "manifest ep 3 (rc=$rc)" "$(head -3 "$T/err")"
cp -r "$E42" "$T/hnull" && $PY - "$T/hnull/tpconv-manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for t in m["tensors"]:
    if "expert" in t:
        h = t["rank_xxh3-128"]; i = h.index(None); h[i] = next(x for x in h if x); break
json.dump(m, open(sys.argv[1], "w"))
PY
run "$TPCONV" merge "$T/hnull" -o "$T/no.safetensors"
[ "$rc" = 3 ] && grep -q "must be null: rank 2 does not hold expert 0" "$T/err" && ok "a manifest giving a checksum to a rank without the expert is refused" || bad "manifest non-null hash (rc=$rc)" "$(head -3 "$T/err")"

# rank files of two EP groups swapped: merge refuses, verify fails
cp -r "$E42" "$T/swapped" && mv "$T/swapped/model_tp00_pp00.safetensors" "$T/swapped/x" &&
  mv "$T/swapped/model_tp02_pp00.safetensors" "$T/swapped/model_tp00_pp00.safetensors" && mv "$T/swapped/x" "$T/swapped/model_tp02_pp00.safetensors"
run "$TPCONV" merge "$T/swapped" -o "$T/no.safetensors"
[ "$rc" = 3 ] && [ ! -e "$T/no.safetensors" ] && ok "rank files of two EP groups swapped: merge refuses: $(head -c 140 "$T/err")" || bad "swapped merge (rc=$rc)" "$(head -3 "$T/err")"
run "$TPCONV" verify --reference "$T/mixtral" --shards "$T/swapped"
[ "$rc" = 1 ] && grep -q "holds rank 2's tensors" "$T/out" && ok "rank files of two EP groups swapped: verify fails naming the swap" || bad "swapped verify (rc=$rc)" "$(grep -v ' pass' "$T/out" | head -3)"

echo "1..$n"
[ "$failed" = 0 ]
