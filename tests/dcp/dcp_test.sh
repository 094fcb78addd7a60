#!/usr/bin/env bash
# PyTorch Distributed Checkpoint input (TAP). The fixtures in tests/data/dcp were
# written by real torch 2.6 (tests/dcp/make_dcp.py, run in a Debian trixie chroot;
# not part of make test): FSDP2-style DTensor saves on 2 and 4 gloo processes
# (dim-0 even and ragged, dim-1, a 2 x 2 mesh, replicated; f32, bf16, f16, int64,
# bool; non-tensor items), a LLaMA saved as FSDP2 holds it, and torch_save_to_dcp
# of a plain file; beside each, real torch's own consolidation (dcp_to_torch_save).
# tpconv reads every one bit-exactly as torch consolidates it, through inspect,
# convert, merge, shard (straight into a shard set), and verify --reference; the
# torch file it writes loads in real torch 1.13 with the non-tensor items; broken
# and hostile variants (tests/dcp/dcp_meta.py) exit 3 naming file, key and offset.
# usage: dcp_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
D=$SRC/tests/data/dcp
. "$SRC/tests/lib/tap.sh"
tmpdir

for f in from_torch fsdp2 fsdp4 llama2; do
  run "$TPCONV" inspect "$D/$f"
  [ "$rc" = 0 ] && grep -q "^# $D/$f: dcp," "$T/out" && same "$D/$f" "$D/$f.pt" &&
    ok "$f: read as dcp, every tensor equal to torch's dcp_to_torch_save" || bad "$f: read" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -5)"
  run "$TPCONV" convert "$D/$f" -o "$T/$f.safetensors" -q
  [ "$rc" = 0 ] && same "$T/$f.safetensors" "$D/$f.pt" && ok "$f: convert to safetensors, bit-exact" ||
    bad "$f: convert safetensors" "$(cat "$T/err" "$T/diff" 2>/dev/null | head -5)"
  run "$TPCONV" convert "$D/$f" -o "$T/$f.pt" -q
  if [ "$rc" = 0 ] && $PY - "$T/$f.pt" "$D/$f.pt" <<'PY' 2>"$T/perr"
import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
def eq(x, y, at):
    assert type(x) is type(y) or (isinstance(x, dict) and isinstance(y, dict)), (at, type(x), type(y))
    if isinstance(x, torch.Tensor):
        assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), at
    elif isinstance(x, dict):
        assert list(x) == list(y), (at, list(x), list(y))
        for k in x: eq(x[k], y[k], at + "." + str(k))
    elif isinstance(x, (list, tuple)):
        assert len(x) == len(y), at
        for i, (p, q) in enumerate(zip(x, y)): eq(p, q, at + "." + str(i))
    else:
        assert x == y, (at, x, y)
eq(a, b, "")
PY
  then ok "$f: convert to torch loads in real torch 1.13 equal to the consolidated file, non-tensor items included"
  else bad "$f: convert torch" "$(cat "$T/err" "$T/perr" | tail -3)"; fi
done

# the chunk layouts the fixtures hold, as the metadata says (not a tautology:
# the test would pass on single-chunk files otherwise)
run python3 - "$D" <<'PY'
import sys; sys.path.insert(0, sys.argv[1] + "/../../dcp")
import dcp_meta
m = dcp_meta.load(sys.argv[1] + "/fsdp4/.metadata").state_dict_metadata
c = lambda k: [(tuple(x.offsets), tuple(x.sizes)) for x in m[k].chunks]
assert [s[0] for _, s in c("model.model.embed.weight")] == [3, 3, 3, 1], c("model.model.embed.weight")
assert len(c("model.model.grid")) == 4 and {o for o, _ in c("model.model.grid")} == {(0, 0), (0, 5), (3, 0), (3, 5)}
assert all(o[0] == 0 for o, _ in c("model.model.layers.0.attn.o.weight"))
assert len(c("model.model.norm.weight")) == 1
print("ok")
PY
[ "$rc" = 0 ] && ok "fsdp4 holds ragged dim-0 (3/3/3/1), dim-1, 2 x 2 grid and replicated chunks" || bad "fixture layout" "$(cat "$T/err")"

# --select: one subtree, the rest not even read (a torchtitan checkpoint's model, not its optimizer)
run "$TPCONV" convert --select model "$D/fsdp2" -o "$T/sel.pt" -q
[ "$rc" = 0 ] && $PY -c 'import sys,torch; a=torch.load(sys.argv[1]); b=torch.load(sys.argv[2])["model"]; assert list(a)==list(b) and all(torch.equal(a[k],b[k]) for k in a)' "$T/sel.pt" "$D/fsdp2.pt" 2>"$T/perr" &&
  ok "--select model keeps the model subtree, named as in it" || bad "select" "$(cat "$T/err" "$T/perr")"
run "$TPCONV" inspect --select optimizer "$D/fsdp2"
[ "$rc" = 3 ] && grep -q "no key 'optimizer' (keys here: 'model', 'step', 'extra')" "$T/err" && ok "--select of a missing key: exit 3 listing the keys" || bad "select missing" "exit $rc" "$(cat "$T/err")"

# merge consolidates a DCP folder; an HF folder gets the config beside, not the items
run "$TPCONV" merge "$D/llama2" -o "$T/merged/" -q
[ "$rc" = 0 ] && [ -f "$T/merged/config.json" ] && ! ls "$T/merged" | grep -q distcp && same "$T/merged" "$D/llama2.pt" &&
  ok "merge of a DCP folder into an HF folder: bit-exact, config.json beside, no .distcp copied" ||
  bad "merge dcp" "$(cat "$T/err" "$T/diff" 2>/dev/null)" "$(ls "$T/merged" 2>/dev/null)"

# shard straight from DCP into tensor-parallel sets, no intermediate file
for lay in tpconv hf-mapping vllm; do
  run "$TPCONV" shard "$D/llama2" --preset llama --tp 2 --layout $lay -o "$T/tp2_$lay" -q
  [ "$rc" = 0 ] && run "$TPCONV" merge "$T/tp2_$lay" -o "$T/tp2_$lay.safetensors" -q && same "$T/tp2_$lay.safetensors" "$D/llama2.pt" &&
    ok "DCP -> $lay tp 2 set -> merge: bit-exact" || bad "dcp shard $lay" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
done
run "$TPCONV" verify --reference "$D/llama2" --shards "$T/tp2_tpconv"
[ "$rc" = 0 ] && ok "verify with the DCP folder as reference passes ($(tail -n 1 "$T/out" | sed 's/^# //'))" || bad "verify ref dcp" "$(tail -3 "$T/out")" "$(cat "$T/err")"

# a whole training DCP (issue 41 item 3): the model under "model" (its lm_head as
# model.lm_head.weight) beside the optimizer's Adam state under "optim", as
# torchtitan-style training saves it (made here from llama2 with Debian's torch,
# then written as DCP by tpconv). Sharding it whole replicated every moment and
# the lm_head with exit 0; now refused naming the optimizer state and the
# --select that takes the model, which then shards bit-exactly.
run "$TPCONV" convert "$D/llama2" -o "$T/llama2.pt" -q && $PY - "$T" <<'PY' && run "$TPCONV" convert "$T/train.pt" --format dcp -o "$T/train" -q
import sys, torch
T = sys.argv[1]
model = torch.load(f"{T}/llama2.pt")
st = {k: {"step": torch.tensor(3.0), "exp_avg": torch.zeros_like(v), "exp_avg_sq": torch.ones_like(v)} for k, v in model.items()}
torch.save({"model": model, "optim": {"state": st}, "step": 3}, f"{T}/train.pt")
PY
C=$D/llama2/config.json
run "$TPCONV" shard "$T/train" --preset llama --tp 2 --config "$C" -o "$T/train_tp2" -q
[ "$rc" = 3 ] && grep -q "optimizer state ('optim'), not a weight of the model: 63 of the checkpoint's 84 tensors are; .*--select model$" "$T/err" &&
  [ ! -e "$T/train_tp2/tpconv-manifest.json" ] && ok "shard of a whole training DCP: refused, naming the optimizer state and --select model" ||
  bad "training DCP sharded whole" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$T/train" --select model --preset llama --tp 2 --config "$C" -o "$T/train_tp2" -q &&
  run "$TPCONV" merge "$T/train_tp2" -o "$T/train_tp2.safetensors" -q
[ "$rc" = 0 ] && same "$T/train_tp2.safetensors" "$D/llama2.pt" && ok "--select model shards the training DCP's model: merge bit-exact" ||
  bad "training DCP --select model" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
# the model alone under its key: model.lm_head.weight, which the plan splits as lm_head.weight
run "$TPCONV" convert "$T/train" --select model --add-prefix model. -o "$T/prefixed.safetensors" -q &&
  run "$TPCONV" shard "$T/prefixed.safetensors" --preset llama --tp 2 --config "$C" -o "$T/prefixed_tp2" -q
[ "$rc" = 3 ] && grep -q "tensor 'model.lm_head.weight': .*without its prefix 'model.' it is 'lm_head.weight', which the plan splits (rule [0-9]*: vocab)" "$T/err" &&
  ok "a tensor the plan splits under an unknown prefix (model.lm_head.weight) is refused, not replicated" || bad "prefixed lm_head" "exit $rc" "$(cat "$T/err")"

# Megatron-Core torch_dist (tests/dcp/make_megatron.py): the save folder's latest
# iteration, layer-stacked keys given back per layer, TP fragments merged (fc1 as
# [gate; up] from 2 fragments a rank), optimizer state left out, TE _extra_state opaque
MG=$D/megatron
run "$TPCONV" inspect "$MG"
[ "$rc" = 0 ] && grep -q "megatron-torch_dist" "$T/out" && same "$MG" "$D/megatron_expected.pt" &&
  ok "megatron save folder: the latest iteration's model, per layer, bit-exact with the unsharded weights" ||
  bad "megatron read" "$(head -3 "$T/out")" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
same "$MG/iter_0000010" "$D/megatron_expected.pt" && ok "the iteration folder itself reads the same" || bad "megatron iter" "$(cat "$T/diff")"
run "$TPCONV" inspect --select optimizer "$MG"
[ "$rc" = 0 ] && grep -q "state.exp_avg.decoder.layers.1.mlp.linear_fc2.weight" "$T/out" && ! grep -q "^output_layer" "$T/out" &&
  ok "optimizer state is left out of the model and read with --select optimizer" || bad "megatron optimizer" "$(cat "$T/out" "$T/err" | head -5)"
run "$TPCONV" convert "$MG" -o "$T/mg.pt" -q
[ "$rc" = 0 ] && $PY -c 'import sys,torch,io; a=torch.load(sys.argv[1]); assert isinstance(a["decoder.layers.self_attention.linear_qkv._extra_state/shard_0.0_1.2"], io.BytesIO) and len(a)==16, list(a)' "$T/mg.pt" 2>"$T/perr" &&
  ok "convert to torch: TransformerEngine's BytesIO _extra_state travels opaque (never called) and loads in torch" || bad "megatron convert" "$(cat "$T/err" "$T/perr")"
mkdir -p "$T/legacy/iter_0000003/mp_rank_00" && echo 3 > "$T/legacy/latest_checkpointed_iteration.txt" && cp "$D/fsdp2.pt" "$T/legacy/iter_0000003/mp_rank_00/model_optim_rng.pt"
run "$TPCONV" convert "$T/legacy" -o "$T/legacy.safetensors" -q
# convert reads a set as merge does: without a manifest it needs the plan the set was split with
[ "$rc" = 2 ] && grep -q "shard set without a tpconv manifest: give the --preset or --plan" "$T/err" && [ ! -e "$T/legacy.safetensors" ] &&
  ok "convert of a legacy Megatron set (mp_rank_00/model_optim_rng.pt) is read as a set: without a manifest it asks for the plan, exit 2" || bad "legacy" "exit $rc" "$(cat "$T/err")"
mkdir -p "$T/stale" && echo 99 > "$T/stale/latest_checkpointed_iteration.txt" && cp -r "$MG/iter_0000010" "$T/stale/"
run "$TPCONV" inspect "$T/stale"
[ "$rc" = 3 ] && ok "a tracker file naming an iteration that is not there: exit 3" || bad "stale tracker" "exit $rc" "$(cat "$T/err")"

# DCP as an output: read back equal, refused over an existing checkpoint, torch values kept
run "$TPCONV" convert "$D/fsdp4" -o "$T/out_dcp" --format dcp -q
[ "$rc" = 0 ] && [ -f "$T/out_dcp/.metadata" ] && same "$T/out_dcp" "$D/fsdp4.pt" &&
  run "$TPCONV" convert "$T/out_dcp" -o "$T/out_dcp.pt" -q && $PY -c 'import sys,torch; a=torch.load(sys.argv[1]); assert a["step"]==7 and a["extra"]["names"]==["a","b"], a' "$T/out_dcp.pt" &&
  ok "convert --format dcp writes a DCP folder that reads back bit-exactly, non-tensor items included" || bad "dcp out" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
# one file for the one rank, as torch's FileSystemWriter writes a single-process
# save (issue 41 item 21: it was one __0_N.distcp per item, 13 here): every item
# in __0_0.distcp, the non-tensor items first, back to back from offset 0 to the end
run python3 - "$T/out_dcp" "$SRC/tests/dcp" <<'PY'
import os, sys; sys.path.insert(0, sys.argv[2])
import dcp_meta
d = sys.argv[1]
files = sorted(f for f in os.listdir(d) if f.endswith(".distcp"))
assert files == ["__0_0.distcp"], files
m = dcp_meta.load(d + "/.metadata")
items = sorted((s.offset, s.length, s.relative_path, i.fqn) for i, s in m.storage_data.items())
assert {p for _, _, p, _ in items} == {"__0_0.distcp"}, items
at = 0
for off, ln, _, fqn in items:
    assert off == at and ln > 0, (fqn, off, at)
    at += ln
assert at == os.path.getsize(d + "/__0_0.distcp"), (at, os.path.getsize(d + "/__0_0.distcp"))
tensor = [type(m.state_dict_metadata[f]).__name__ == "TensorStorageMetadata" for _, _, _, f in items]
assert tensor == sorted(tensor) and not all(tensor), tensor  # bytes items first
print(len(items), "items")
PY
[ "$rc" = 0 ] && ok "convert --format dcp writes one .distcp for its one rank: $(cat "$T/out") back to back in __0_0.distcp, non-tensor items first" ||
  bad "dcp out: one file per rank" "$(cat "$T/err" | tail -3)" "$(ls "$T/out_dcp")"
run "$TPCONV" convert "$D/llama2.pt" -o "$T/out_dcp" --format dcp -q
[ "$rc" = 2 ] && grep -q "already holds a DCP checkpoint" "$T/err" && ok "convert --format dcp over an existing DCP folder: exit 2 without --force" || bad "dcp exists" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" convert "$D/llama2.pt" -o "$T/out_dcp" --format dcp -q --force
[ "$rc" = 0 ] && same "$T/out_dcp" "$D/llama2.pt" && ok "--force replaces it" || bad "dcp force" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
run "$TPCONV" convert "$D/llama2.pt" -o "$T/out_dcp2" --format dcp --max-shard-size 1MB -q
[ "$rc" = 2 ] && ok "--max-shard-size with --format dcp is a usage error" || bad "dcp maxsz" "exit $rc"

# broken and hostile folders: exit 3, the file, the key and where
K=model.model.embed.weight
check() { # mutation, what the message must hold
  python3 "$SRC/tests/dcp/dcp_meta.py" "$D/fsdp2" "$T/h" "$1" || { bad "$1: generator"; return; }
  run "$TPCONV" convert "$T/h" -o "$T/h.safetensors" -q
  if [ "$rc" = 3 ] && grep -q -- "$2" "$T/err" && [ ! -e "$T/h.safetensors" ]; then ok "$1: exit 3, $(sed 's/^tpconv: error: //' "$T/err" | cut -c1-150)"
  else bad "$1" "exit $rc" "$(cat "$T/err")"; fi
}
check "overlap:$K" "tensor '$K': chunks 0 and 1 overlap"
check "gap:$K" "cover 40 of the tensor's 80 elements: a gap"
check "outside:$K" "chunk 0 lies outside the tensor"
check "dtype:$K" "__0_0.distcp': tensor '$K': item of chunk 0 holds F32"
check "length:$K" "lies outside the file"
check "escape:$K" "'../evil.distcp' is not a plain name inside the checkpoint folder"
check "transform:$K" "transform 'stream.zstd/1'"
check "dangerous" "refusing global 'os.system'"
check "truncate:__1_0.distcp" "__1_0.distcp': tensor 'model.model.grid': item of 1244 bytes at offset 13408 lies outside the file"
check "missing:__1_0.distcp" "names item file '__1_0.distcp', which is missing"
# an incomplete save (no .metadata yet) is no checkpoint
mkdir -p "$T/partial" && cp "$D/fsdp2/__0_0.distcp" "$T/partial/"
run "$TPCONV" inspect "$T/partial"
[ "$rc" = 3 ] && ok "a folder with items but no .metadata (a save in progress) is refused (exit 3)" || bad "partial" "exit $rc" "$(cat "$T/err")"
# inspect's account of the folder: framework, files, chunks, what was left out
run "$TPCONV" inspect "$D/fsdp4"
[ "$rc" = 0 ] && grep -q '^# PyTorch Distributed Checkpoint (torch.distributed.checkpoint)$' "$T/out" &&
  grep -q '^# 4 .distcp files read: 9 tensor entries in 33 chunks (at most 4 per tensor), 4 non-tensor items$' "$T/out" &&
  ok "inspect says what a DCP folder holds: files, chunks per tensor, non-tensor items" || bad "inspect dcp account" "$(head -4 "$T/out")"
run "$TPCONV" inspect "$D/megatron"
[ "$rc" = 0 ] && grep -q '^# Megatron-Core torch_dist checkpoint iter_0000010 ' "$T/out" &&
  grep -q '^# optimizer state: 1 entry left out (read it with --select optimizer)$' "$T/out" &&
  ok "inspect says a Megatron folder's iteration and what optimizer state it left out" || bad "inspect megatron account" "$(head -5 "$T/out")"
echo "1..$n"
[ "$failed" = 0 ]
