# Independent count of the bytes each Megatron torch_dist rank file holds for a
# header-only DeepSeek-V3 folder at tp x D x pp (ep = tp x D), from its
# safetensors headers, against `tpconv shard --dry-run`'s "# rank" lines.
# usage: megatron_dist_bytes.py HEADER_DIR DRY_RUN_OUTPUT TP DP PP_LAYERS (make_header_moe.py has
# the commands); exit 1 unless every rank file's bytes match.
import json, os, re, struct, sys
src, out, tp, D, stages = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), [int(x) for x in sys.argv[5].split(",")]
pp, ep = len(stages), tp * D
B = {"BF16": 2, "F32": 4, "F16": 2}
idx = json.load(open(os.path.join(src, "model.safetensors.index.json")))["weight_map"]
cfg = json.load(open(os.path.join(src, "config.json")))
E = cfg["n_routed_experts"]; per = E // ep
hdr = {}
for f in sorted(set(idx.values())):
    with open(os.path.join(src, f), "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        hdr.update({k: v for k, v in json.loads(fh.read(n)).items() if k != "__metadata__"})
start = [sum(stages[:s]) for s in range(pp)]
def stage_of(layer): return max(s for s in range(pp) if start[s] <= layer)
want = [0] * (tp * D * pp)
def rank(t, d, p): return (p * D + d) * tp + t
split = re.compile(r"(q_b_proj|kv_b_proj|o_proj|gate_proj|up_proj|down_proj)\.weight$")
for name, h in hdr.items():
    n = B[h["dtype"]]
    for x in h["shape"]: n *= x
    m = re.match(r"model\.layers\.(\d+)\.", name)
    p = stage_of(int(m.group(1))) if m else (0 if "embed_tokens" in name else pp - 1)
    ex = re.search(r"\.experts\.(\d+)\.", name)
    if ex:  # EP rank g = e // per -> file (t, d) = (g % tp, g // tp), whole (etp 1)
        g = int(ex.group(1)) // per
        want[rank(g % tp, g // tp, p)] += n
    elif "embed_tokens" in name or name == "lm_head.weight":
        V, H = h["shape"]; Vp = -(-V // (128 * tp)) * 128 * tp
        for t in range(tp): want[rank(t, 0, p)] += Vp // tp * H * B[h["dtype"]]
    elif split.search(name):  # tensor-parallel: 1/tp on each tp rank of dp rank 0
        for t in range(tp): want[rank(t, 0, p)] += n // tp
    else:  # replicated: tp rank 0 of dp rank 0
        want[rank(0, 0, p)] += n
got = {}
for line in open(out):
    m = re.match(r"# rank (\d+) \(tp (\d+), dp (\d+), pp (\d+)\): release/__(\d+)_0\.distcp +\d+ chunks +(\d+) bytes", line)
    if m:
        r, t, d, p, f, b = map(int, m.groups())
        assert r == f == rank(t, d, p), line
        got[r] = b
bad = [r for r in range(len(want)) if got.get(r) != want[r]]
model = sum(B[h["dtype"]] * __import__("math").prod(h["shape"]) for h in hdr.values())
print(f"{len(got)} rank files listed of {len(want)}; {len(want) - len(bad)} match the independent count; "
      f"sum {sum(got.values())} (independent {sum(want)}), the model {model}, padding {sum(want) - model}; "
      f"empty files {sum(1 for b in got.values() if b == 0)}")
sys.exit(1 if bad else 0)
