#!/usr/bin/env bash
# Fused 3-D expert tensors (TAP): a plan's "stacked" rules. A tiny model with
# Granite-MoE's names and layout, made here with real torch:
# block_sparse_moe.input_linear.weight [E, 2I, H] (each expert's gate then up
# rows), output_linear.weight [E, H, I], router.layer.weight [E, H], and a
# Llama 4 style experts.gate_up_proj [E, H, 2I] (transposed), and gpt-oss's
# experts (mlp.experts.gate_up_proj [E, H, 2I] with gate and up interleaved
# along the last dim, its bias [E, 2I], down_proj [E, I, H] and its bias
# [E, H]) and attention sinks [heads], split as vLLM's gpt_oss.py loads them
# (a contiguous 2*start..2*end slice of gate_up and its bias, "unit": 2;
# down_proj's rows; down_proj_bias whole, added once; sinks by query head).
# Sharded at tp 2
# and 4, with --ep 2 and 4 in both placements, every rank's tensors are
# compared bit for bit with an independent torch slicing (inside each expert:
# gate and up each split tp ways, rank r holding [gate_r | up_r]; output_linear
# by its columns; with --ep, the group's experts of dim 0 first); merge gives
# the model back bit for bit; resharding an EP set equals the direct split;
# verify checks each expert of a stacked tensor on its own (structure, its
# column or row layer check), and fails two experts' slices swapped by name.
# Refusals: a 3-D tensor under a col rule that does not say how (exit 3,
# naming it), experts stacked that the config's count contradicts.
# usage: fused_moe_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}  # the suite's Python server when there is one (tests/run_all.sh)
. "$SRC/tests/shard/tap.sh"
$PY - "$T" <<'PYEOF' || { echo "1..0 # SKIP generator failed"; exit 0; }
import json, os, sys, torch
out = sys.argv[1]
g = torch.Generator().manual_seed(41)
def r(*s): return torch.randn(*s, generator=g)
H, V, L, E, I = 32, 64, 2, 4, 16
sd = {"model.embed_tokens.weight": r(V, H), "model.norm.weight": r(H), "lm_head.weight": r(V, H)}
for l in range(L):
    p = f"model.layers.{l}."
    for n, o in (("q_proj", 32), ("k_proj", 16), ("v_proj", 16)): sd[p + f"self_attn.{n}.weight"] = r(o, H)
    sd[p + "self_attn.o_proj.weight"] = r(H, 32)
    sd[p + "input_layernorm.weight"] = r(H); sd[p + "post_attention_layernorm.weight"] = r(H)
    sd[p + "block_sparse_moe.input_linear.weight"] = r(E, 2 * I, H)
    sd[p + "block_sparse_moe.output_linear.weight"] = r(E, H, I)
    sd[p + "block_sparse_moe.router.layer.weight"] = r(E, H)
    sd[p + "feed_forward.experts.gate_up_proj"] = r(E, H, 2 * I)
    sd[p + "mlp.experts.gate_up_proj"] = r(E, H, 2 * I); sd[p + "mlp.experts.gate_up_proj_bias"] = r(E, 2 * I)
    sd[p + "mlp.experts.down_proj"] = r(E, I, H); sd[p + "mlp.experts.down_proj_bias"] = r(E, H)
    sd[p + "self_attn.sinks"] = r(4)
d = os.path.join(out, "gmoe"); os.makedirs(d)
torch.save(sd, os.path.join(d, "pytorch_model.bin"))
json.dump({"architectures": ["GraniteMoeForCausalLM"], "model_type": "granitemoe", "hidden_size": H,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": I, "num_local_experts": E,
           "num_experts_per_tok": 2, "num_hidden_layers": L, "vocab_size": V}, open(os.path.join(d, "config.json"), "w"))
PYEOF
# the plan: llama's rules, then the fused experts
"$TPCONV" plan llama >"$T/llama.json" 2>"$T/err" || { bad "tpconv plan llama" "$(cat "$T/err")"; echo "1..$n"; exit 1; }
$PY - "$T/llama.json" "$T/plan.json" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["name"] = "fused-experts"
p["rules"][0:0] = [
    {"match": "block_sparse_moe\\.input_linear\\.weight$", "split": "col", "parts": 2, "stacked": True},
    {"match": "block_sparse_moe\\.output_linear\\.weight$", "split": "row", "stacked": True},
    {"match": "feed_forward\\.experts\\.gate_up_proj$", "split": "col", "transposed": True, "parts": 2, "stacked": True},
    {"match": "block_sparse_moe\\.router\\.layer\\.weight$", "split": "replicate"},
    {"match": "mlp\\.experts\\.gate_up_proj(_bias)?$", "split": "col", "transposed": True, "stacked": True, "unit": 2},
    {"match": "mlp\\.experts\\.down_proj$", "split": "row", "transposed": True, "stacked": True},
    {"match": "mlp\\.experts\\.down_proj_bias$", "split": "row", "stacked": True},
    {"match": "self_attn\\.sinks$", "split": "col", "heads": "q", "head_count": True}]
json.dump(p, open(sys.argv[2], "w"), indent=1)
PYEOF

cat >"$T/expect.py" <<'PYEOF'
import json, os, re, struct, sys, torch
model, setdir, tp, ep, placement = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
sd = torch.load(os.path.join(model, "pytorch_model.bin"))
E, hd, nh, kv = 4, 8, 4, 2
mtp = tp // ep
def load_st(path):
    raw = open(path, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n]); out = {}
    for k, m in h.items():
        if k == "__metadata__": continue
        a, b = m["data_offsets"]
        out[k] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=torch.float32).reshape(m["shape"])
    return out
def heads_col(t, r, n):  # kv heads replicated when tp exceeds them
    if n >= tp: return t.view(n, hd, *t.shape[1:]).chunk(tp, 0)[r].reshape(-1, *t.shape[1:])
    return t.view(n, hd, *t.shape[1:])[r * n // tp].reshape(-1, *t.shape[1:])
def group(t, r):  # the experts of rank r's EP group, in order
    g = r // mtp
    ix = list(range(g, E, ep)) if placement == "round-robin" else list(range(g * E // ep, (g + 1) * E // ep))
    return t[ix]
def expect(name, t, r):
    lr = r % mtp
    if name.endswith("input_linear.weight"):
        gate, up = group(t, r).chunk(2, 1)
        return torch.cat([gate.chunk(mtp, 1)[lr], up.chunk(mtp, 1)[lr]], 1)
    if name.endswith("output_linear.weight"): return group(t, r).chunk(mtp, 2)[lr]
    if re.search(r"mlp\.experts\.gate_up_proj(_bias)?$", name): return group(t, r).chunk(mtp, -1)[lr]
    if name.endswith("mlp.experts.down_proj"): return group(t, r).chunk(mtp, 1)[lr]
    if name.endswith("mlp.experts.down_proj_bias"): return group(t, r)
    if name.endswith("self_attn.sinks"): return t.chunk(tp, 0)[r]
    if name.endswith("gate_up_proj"):
        gate, up = group(t, r).chunk(2, 2)
        return torch.cat([gate.chunk(mtp, 2)[lr], up.chunk(mtp, 2)[lr]], 2)
    if re.search(r"self_attn\.q_proj\.", name): return heads_col(t, r, nh)
    if re.search(r"self_attn\.(k_proj|v_proj)\.", name): return heads_col(t, r, kv)
    if re.search(r"self_attn\.o_proj\.weight", name): return t.chunk(tp, 1)[r]
    if re.search(r"embed_tokens|^lm_head", name): return t.chunk(tp, 0)[r]
    return t
bad = 0
for r in range(tp):
    got = load_st(os.path.join(setdir, f"model_tp{r:02d}_pp00.safetensors"))
    if set(got) != set(sd):
        print("rank", r, "names differ:", sorted(set(got) ^ set(sd))[:4]); bad += 1; continue
    for k, t in sd.items():
        e = expect(k, t, r)
        if got[k].shape != e.shape or not torch.equal(got[k], e):
            print("rank", r, k, tuple(got[k].shape), tuple(e.shape)); bad += 1
print("bad", bad)
sys.exit(1 if bad else 0)
PYEOF

M=$T/gmoe
for c in 2:1:contiguous 4:1:contiguous 2:2:contiguous 4:2:contiguous 4:2:round-robin 4:4:contiguous 4:4:round-robin; do
  IFS=: read -r tp ep pl <<<"$c"
  S=$T/tp$tp-ep$ep-$pl
  epf=(); [ "$ep" = 1 ] || epf=(--ep "$ep" --ep-placement "$pl")
  if ! run "$TPCONV" shard "$M" --plan "$T/plan.json" --tp "$tp" "${epf[@]}" -o "$S"; then
    bad "tp $tp ep $ep $pl: shard" "$(cat "$T/err")"; continue
  fi
  $PY "$T/expect.py" "$M" "$S" "$tp" "$ep" "$pl" >"$T/x" 2>&1 &&
    ok "tp $tp ep $ep ($pl): every rank's fused experts equal an independent torch slicing" ||
    bad "tp $tp ep $ep $pl: rank tensors" "$(tail -4 "$T/x")"
  run "$TPCONV" merge "$S" -o "$T/m.safetensors" -f && same "$T/m.safetensors" "$M/pytorch_model.bin" &&
    ok "tp $tp ep $ep ($pl): merge gives the model back bit for bit" || bad "tp $tp ep $ep $pl: merge" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -3)"
  # verify describes each stacked tensor as one tensor per expert: its
  # structure and its column / row checks, on its EP group's ranks
  run "$TPCONV" verify --reference "$M" --shards "$S"
  nx=$(grep -Ec '^ +(col|row) +model\.layers\.[01]\.(block_sparse_moe\.(input|output)_linear\.weight|(feed_forward|mlp)\.experts\.gate_up_proj|mlp\.experts\.down_proj)\[[0-3]\] .* pass' "$T/out")
  [ "$rc" = 0 ] && [ "$nx" = 40 ] && ok "tp $tp ep $ep ($pl): verify passes, $nx layer checks of single experts" ||
    bad "tp $tp ep $ep $pl: verify (rc=$rc, $nx expert checks)" "$(grep -v ' pass' "$T/out" | head -4)" "$(head -3 "$T/err")"
done

# expert 2's and 3's slices of layer 1's output_linear swapped in rank 1's
# file (tp 2, no ep): verify fails naming both experts, the others pass
$PY - "$T/tp2-ep1-contiguous/model_tp01_pp00.safetensors" <<'PYEOF'
import json, struct, sys
f = open(sys.argv[1], "r+b"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
m = h["model.layers.1.block_sparse_moe.output_linear.weight"]; a0, a1 = m["data_offsets"]; per = (a1 - a0) // m["shape"][0]
f.seek(8 + n + a0 + 2 * per); x = f.read(per); y = f.read(per)
f.seek(8 + n + a0 + 2 * per); f.write(y); f.write(x)
PYEOF
"$TPCONV" verify --reference "$M" --shards "$T/tp2-ep1-contiguous" >"$T/out" 2>"$T/err"; rc=$?
[ "$rc" = 1 ] && grep -Eq '^ +structure +model\.layers\.1\.block_sparse_moe\.output_linear\.weight\[2\] .*FAIL' "$T/out" &&
  grep -Eq '^ +structure +model\.layers\.1\.block_sparse_moe\.output_linear\.weight\[3\] .*FAIL' "$T/out" &&
  grep -Eq '^ +structure +model\.layers\.1\.block_sparse_moe\.output_linear\.weight\[1\] .*pass' "$T/out" &&
  ok "two experts' slices swapped in a rank file: verify fails naming both (exit 1)" || bad "swapped expert slices (rc=$rc)" "$(grep -E 'FAIL' "$T/out" | head -4)"
grep -q '"stacked": true' "$T/tp4-ep2-contiguous/tpconv-manifest.json" &&
  ! grep -q '"ep_group"' "$T/tp4-ep2-contiguous/tpconv-manifest.json" &&
  ok "the manifest records the stacked tensors (no expert or group of their own)" || bad "manifest: stacked"

# the dry run says what a stacked tensor is
run "$TPCONV" shard "$M" --plan "$T/plan.json" --tp 4 --ep 2 --dry-run
grep -Eq 'layers\.0\.block_sparse_moe\.input_linear\.weight +F32 +\[4, 32, 32\] +col:1 +\[2, 16, 32\] +parts 16\|16; 4 experts stacked in dim 0, each ep group its own' "$T/out" &&
  ok "dry run: a stacked tensor's split inside each expert and its group's share" || bad "dry run" "$(grep input_linear "$T/out" | head -2)"

# reshard: an EP set to plain tp 2, and tp 4 x ep 4 to tp 4 x ep 2, equal the direct splits
run "$TPCONV" shard "$T/tp4-ep4-round-robin" --tp 2 -o "$T/re2" &&
  $PY "$T/expect.py" "$M" "$T/re2" 2 1 contiguous >"$T/x" 2>&1 &&
  ok "reshard tp 4 x ep 4 (round-robin) -> tp 2: equal to the independent slicing" || bad "reshard -> tp 2" "$(head -3 "$T/err")" "$(tail -3 "$T/x")"
run "$TPCONV" shard "$T/tp4-ep4-contiguous" --tp 4 --ep 2 --ep-placement round-robin -o "$T/re42" &&
  $PY "$T/expect.py" "$M" "$T/re42" 4 2 round-robin >"$T/x" 2>&1 &&
  ok "reshard tp 4 x ep 4 -> tp 4 x ep 2 (round-robin): equal to the independent slicing" || bad "reshard ep -> ep" "$(head -3 "$T/err")" "$(tail -3 "$T/x")"

# refusals, nothing written
refuse() { # want-rc grep-text description args...
  local want=$1 text=$2 what=$3; shift 3
  rm -rf "$T/no"
  run "$TPCONV" shard "$@" -o "$T/no"
  [ "$rc" = "$want" ] && grep -qF -- "$text" "$T/err" && [ ! -e "$T/no/tpconv-manifest.json" ] &&
    ok "$what is refused (exit $want): $(head -c 160 "$T/err")" || bad "$what (rc=$rc)" "$(head -3 "$T/err")"
}
$PY -c 'import json, sys; p = json.load(open(sys.argv[1])); [r.pop("stacked", 0) for r in p["rules"]]; json.dump(p, open(sys.argv[2], "w"))' "$T/plan.json" "$T/nostack.json"
refuse 3 "tensor 'model.layers.0.block_sparse_moe.input_linear.weight'" "a 3-D tensor under a col rule that says neither stacked nor dim" \
  "$M" --plan "$T/nostack.json" --tp 2
grep -q 'a tensor of 3 dimensions that is not a matrix' "$T/err" && ok "... and the message says what to give" || bad "refusal message" "$(cat "$T/err")"
mkdir -p "$T/cfg8" && sed 's/"num_local_experts": 4/"num_local_experts": 8/' "$M/config.json" >"$T/cfg8/config.json"
refuse 2 "whose dim 0 stacks 4 experts" "experts stacked against a config that says 8" "$M" --plan "$T/plan.json" --tp 2 --config "$T/cfg8/config.json"
refuse 3 "4 routed experts do not divide over --ep 8 groups" "4 stacked experts over 8 groups" "$M" --plan "$T/plan.json" --tp 8 --ep 8
# gpt-oss's interleaved gate/up whose tp slices would end inside a pair (2I =
# 12 over tp 4: 3 columns a rank), even with --pad
$PY - "$T" <<'PYEOF'
import json, os, sys, torch
d = os.path.join(sys.argv[1], "odd"); os.makedirs(d)
torch.save({"model.layers.0.mlp.experts.gate_up_proj": torch.zeros(4, 8, 12)}, os.path.join(d, "pytorch_model.bin"))
PYEOF
refuse 3 "tensor 'model.layers.0.mlp.experts.gate_up_proj'" "an interleaved gate/up of 2I = 12 at tp 4 (\"unit\": 2)" \
  "$T/odd" --plan "$T/plan.json" --tp 4 --pad
echo "1..$n"
[ $failed -eq 0 ]
