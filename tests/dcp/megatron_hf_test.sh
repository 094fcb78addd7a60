#!/usr/bin/env bash
# Megatron -> Hugging Face names with the megatron-llama / megatron-gpt rules
# presets (TAP). A tiny GQA LLaMA is built with real torch 1.13
# (tests/dcp/make_llama_hf.py: 4 layers, hidden 64, 8 heads, 2 query groups,
# vocab 200); tests/data/dcp/megatron_llama is the Megatron-Core torch_dist save
# of it that tests/dcp/make_megatron.py --from-hf wrote with real torch 2.6 (tp 2,
# vocab padded to 256). Checked here:
#   - the fixture holds Megatron's layout of those weights (torch rebuilds it);
#   - convert --rules megatron-llama gives the HF tensors back bit for bit, with
#     the head counts from the checkpoint's own args, from --config, or flags;
#   - a legacy set tpconv writes (--layout megatron) merges to the same tensors,
#     and a tp-1 legacy rank file converted with --select model --rules
#     megatron-llama gives them too (a tp > 1 legacy set has per-rank
#     [gate_r; up_r]: only merge reads it; no raw merge path exists; one of
#     its rank files is refused with what it is and the merge to run);
#   - megatron-gpt on a Megatron GPT rank file built in torch (per-head
#     [q_h; k_h; v_h], Linear weights) gives HF GPT-2's (c_attn [q; k; v],
#     Conv1D [in, out]) bit for bit;
#   - shard --rules megatron-llama takes the plan's head facts from the checkpoint's
#     args as convert does (no --config needed);
#   - missing or contradicting facts are refused with the fact named; --dry-run
#     shows the renames and writes nothing.
# usage: megatron_hf_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
MG=$SRC/tests/data/dcp/megatron_llama
. "$SRC/tests/lib/tap.sh"
tmpdir
# a torch file tpconv wrote against the HF state dict: same names, dtypes, bits
torch_eq() {
  $PY - "$1" "$2" <<'PY' 2>"$T/perr"
import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
assert sorted(a) == sorted(b), sorted(set(a) ^ set(b))
for k in b:
    assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, (k, a[k].dtype, a[k].shape, b[k].dtype, b[k].shape)
    assert torch.equal(a[k].contiguous().view(torch.int16) if a[k].dtype == torch.bfloat16 else a[k], b[k].contiguous().view(torch.int16) if b[k].dtype == torch.bfloat16 else b[k]), k
PY
}

$PY "$SRC/tests/dcp/make_llama_hf.py" "$T/hf" 2>"$T/perr" && ok "a GQA LLaMA state dict built with real torch 1.13" || bad "make_llama_hf" "$(cat "$T/perr")"

# the fixture is Megatron's layout of exactly these weights: rebuilt in torch as
# Megatron's converter builds it (per group [q; k; v], [gate; up], padded vocab)
run "$TPCONV" convert "$MG" -o "$T/mcore.pt" -q
if [ "$rc" = 0 ] && $PY - "$T/hf/model.pt" "$T/mcore.pt" <<'PY' 2>"$T/perr"
import sys, torch
hf, got = torch.load(sys.argv[1]), torch.load(sys.argv[2])
H, NH, NG, D, V, P = 64, 8, 2, 8, 200, 256
pad = lambda w: torch.cat([w, w[-1:].expand(P - V, -1)])
exp = {"embedding.word_embeddings.weight": pad(hf["model.embed_tokens.weight"]),
       "output_layer.weight": pad(hf["lm_head.weight"]), "decoder.final_layernorm.weight": hf["model.norm.weight"]}
for l in range(4):
    p, m = "model.layers.%d." % l, "decoder.layers.%d." % l
    q, k, v = (hf[p + "self_attn.%s_proj.weight" % x] for x in "qkv")
    exp[m + "self_attention.linear_qkv.weight"] = torch.cat([q.reshape(NG, NH // NG * D, H), k.reshape(NG, D, H), v.reshape(NG, D, H)], 1).reshape(-1, H)
    exp[m + "self_attention.linear_qkv.layer_norm_weight"] = hf[p + "input_layernorm.weight"]
    exp[m + "self_attention.linear_proj.weight"] = hf[p + "self_attn.o_proj.weight"]
    exp[m + "mlp.linear_fc1.layer_norm_weight"] = hf[p + "post_attention_layernorm.weight"]
    exp[m + "mlp.linear_fc1.weight"] = torch.cat([hf[p + "mlp.gate_proj.weight"], hf[p + "mlp.up_proj.weight"]])
    exp[m + "mlp.linear_fc2.weight"] = hf[p + "mlp.down_proj.weight"]
got = {k: v for k, v in got.items() if isinstance(v, torch.Tensor)}
assert sorted(got) == sorted(exp), sorted(set(got) ^ set(exp))
for k in exp:
    assert torch.equal(got[k].view(torch.int16), exp[k].contiguous().view(torch.int16)), k
PY
then ok "the torch_dist fixture holds Megatron's layout of these weights (per-group QKV, [gate; up], vocab padded 200 -> 256)"
else bad "fixture layout" "$(cat "$T/err" "$T/perr" | tail -3)"; fi

# the conversion: facts from the checkpoint's args (common.pt), vocab from config.json
run "$TPCONV" convert "$MG" --rules megatron-llama --config "$T/hf/config.json" -o "$T/hf_out.pt" -v
[ "$rc" = 0 ] && torch_eq "$T/hf_out.pt" "$T/hf/model.pt" && grep -q "model fact kv_heads = 2 (the checkpoint's Megatron args)" "$T/err" &&
  grep -q "model fact vocab = 200 ('$T/hf/config.json')" "$T/err" &&
  ok "convert --rules megatron-llama: the HF state dict, bit for bit in real torch 1.13 (heads from Megatron's args, vocab from config.json)" ||
  bad "megatron-llama torch_dist" "exit $rc" "$(cat "$T/err" "$T/perr" | tail -4)"
run "$TPCONV" convert "$MG" --rules megatron-llama --vocab 200 -o "$T/hf_dir/" -q
[ "$rc" = 0 ] && [ -f "$T/hf_dir/model.safetensors" ] && same "$T/hf_dir" "$T/hf/model.pt" &&
  ok "convert DIR --rules megatron-llama --vocab 200 -o hf/: an HF folder with the same tensors" || bad "hf folder" "$(cat "$T/err" "$T/diff" 2>/dev/null)"

# the facts: without the checkpoint's args (no common.pt) flags give them
mkdir -p "$T/noargs" && cp -r "$MG/iter_0000010" "$T/noargs/" && rm "$T/noargs/iter_0000010/common.pt"
run "$TPCONV" convert "$T/noargs/iter_0000010" --rules megatron-llama --vocab 200 -o "$T/x.safetensors" -q
[ "$rc" = 2 ] && grep -q "tensor 'decoder.layers.0.self_attention.linear_qkv.weight': unfuse .* (preset megatron-llama rule 2): the group count needs the number of key/value heads (Megatron's query groups) ('kv_heads'), which is not known: give --kv-heads N or --config config.json" "$T/err" &&
  [ ! -e "$T/x.safetensors" ] && ok "no args and no flags: exit 2 naming the missing fact (kv_heads), the rule and the tensor" || bad "missing kv_heads" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" convert "$MG" --rules megatron-llama -o "$T/x.safetensors" -q
[ "$rc" = 2 ] && grep -q "the size of part 1 needs the tokenizer's vocabulary size (unpadded) ('vocab'), which is not known: give --vocab N or --config config.json (Megatron pads the vocabulary" "$T/err" &&
  [ ! -e "$T/x.safetensors" ] && ok "no vocabulary size: exit 2 (Megatron's args hold only the padded one), nothing written" || bad "missing vocab" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" convert "$T/noargs/iter_0000010" --rules megatron-llama --heads 8 --kv-heads 2 --head-dim 8 --vocab 200 -o "$T/flags.safetensors" -q
[ "$rc" = 0 ] && same "$T/flags.safetensors" "$T/hf/model.pt" && ok "--heads --kv-heads --head-dim --vocab give the facts: bit-exact" || bad "flags" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
sed 's/"num_key_value_heads": 2/"num_key_value_heads": 4/' "$T/hf/config.json" >"$T/wrong.json"
run "$TPCONV" convert "$MG" --rules megatron-llama --config "$T/wrong.json" -o "$T/x.safetensors" -q
[ "$rc" = 3 ] && grep -q "the checkpoint's Megatron args say kv_heads 2, '$T/wrong.json' says 4; give --kv-heads" "$T/err" &&
  ok "a config.json that contradicts the checkpoint's args: exit 3 naming both" || bad "conflict" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" convert "$MG" --rules megatron-llama --vocab 200 --head-dim 4 -o "$T/x.safetensors" -q
[ "$rc" = 2 ] && grep -q "the parts (16 + 4 + 4) do not add up to 48, dim 0 of \[96, 64\] over 2 groups" "$T/err" &&
  ok "a wrong --head-dim: the parts do not tile the tensor, exit 2 (never a silently wrong split)" || bad "bad head_dim" "exit $rc" "$(cat "$T/err")"

# --dry-run shows the mapping and writes nothing
run "$TPCONV" convert "$MG" --rules megatron-llama --vocab 200 --dry-run
[ "$rc" = 0 ] && grep -q "^# 27 tensors: 17 kept (17 renamed), 10 unfused into 22, 0 dropped" "$T/out" &&
  grep -q "^decoder.layers.3.self_attention.linear_qkv.weight -> model.layers.3.self_attn.k_proj.weight  unfused: \[32, 40) of each of 2 groups of 48 \[96, 64\] -> \[16, 64\]" "$T/out" &&
  grep -q "^decoder.layers.0.self_attention.linear_qkv.layer_norm_weight -> model.layers.0.input_layernorm.weight$" "$T/out" &&
  grep -q "^embedding.word_embeddings.weight -> model.embed_tokens.weight  unfused: \[0, 200) \[256, 64\] -> \[200, 64\]" "$T/out" &&
  ok "--dry-run: the old -> new table with each part's slice ($(grep -c ' -> ' "$T/out") lines)" || bad "dry-run" "exit $rc" "$(head -5 "$T/out")" "$(cat "$T/err")"
run "$TPCONV" rules megatron-llama
[ "$rc" = 0 ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert any("unfuse" in r for r in d["rules"])' "$T/out" &&
  "$TPCONV" rules --list | grep -q "^megatron-gpt " && ok "tpconv rules megatron-llama prints the preset (JSON with unfuse rules); --list names both" || bad "rules print" "$(cat "$T/err")"

# straight into a tensor-parallel set of HF names, then back
run "$TPCONV" shard "$MG" --rules megatron-llama --config "$T/hf/config.json" --preset llama --tp 2 -o "$T/tp2" -q
[ "$rc" = 0 ] && run "$TPCONV" merge "$T/tp2" -o "$T/tp2.safetensors" -q && same "$T/tp2.safetensors" "$T/hf/model.pt" &&
  ok "shard DIR --rules megatron-llama --preset llama --tp 2, merged: the HF tensors" || bad "shard with rules" "$(cat "$T/err" "$T/diff" 2>/dev/null)"

# the plan's head facts from the checkpoint's own args too (no --config), as convert's
# rules take them: tp 4 over 2 query groups replicates each K/V head on 2 ranks
run "$TPCONV" shard "$MG" --rules megatron-llama --vocab 200 --preset llama --tp 4 -o "$T/tp4" -q
[ "$rc" = 0 ] && $PY -c 'import json,sys; m=json.load(open(sys.argv[1]))["model"]; assert (m["heads"], m["kv_heads"], m["head_dim"]) == (8, 2, 8), m' "$T/tp4/tpconv-manifest.json" 2>"$T/perr" &&
  run "$TPCONV" merge "$T/tp4" -o "$T/tp4.safetensors" -q && same "$T/tp4.safetensors" "$T/hf/model.pt" &&
  ok "shard DIR --rules megatron-llama --preset llama --tp 4 without --config: heads, query groups and kv_channels from the checkpoint's args (manifest 8/2/8), merged: the HF tensors" ||
  bad "shard with the checkpoint's facts" "exit $rc" "$(cat "$T/err" "$T/perr" "$T/diff" 2>/dev/null | tail -4)"

# legacy sets: tpconv's megatron layout (per-rank [gate_r; up_r], tp 2 x pp 2) merges to HF names
run "$TPCONV" shard "$T/hf/model.pt" --preset llama --config "$T/hf/config.json" --tp 2 --pp 2 --layout megatron -o "$T/L" -q
[ "$rc" = 0 ] && [ -f "$T/L/release/mp_rank_01_001/model_optim_rng.pt" ] && run "$TPCONV" merge "$T/L" -o "$T/L.safetensors" -q &&
  same "$T/L.safetensors" "$T/hf/model.pt" && same "$T/L.safetensors" "$T/hf_out.pt" &&
  ok "legacy tp 2 x pp 2 set -> merge: the same HF tensors as the torch_dist conversion" || bad "legacy merge" "$(cat "$T/err" "$T/diff" 2>/dev/null)"
# one rank file of that set: the rules cannot map a rank's slices to HF names; it
# says what the file is and how to merge (it said "the parts (32 + 0 + 0) do not
# add up to 24"); converted without rules it is written as it is, with a warning
R01=$T/L/release/mp_rank_01_001/model_optim_rng.pt LR=$(realpath "$T/L")
HOW="tpconv merge '$LR' -o OUT (--preset llama when the set has no tpconv manifest)"
run "$TPCONV" convert "$R01" --select model --rules megatron-llama --vocab 200 -o "$T/r.safetensors"
[ "$rc" = 2 ] && [ ! -e "$T/r.safetensors" ] &&
  [ "$(cat "$T/err")" = "tpconv: error: '$R01': this is one rank file of a Megatron set (tp 2 x pp 2, from its args), whose tensors are that rank's slices: the rules need the whole model; merge the set, then convert OUT: $HOW" ] &&
  ok "convert one rank file of a tp 2 x pp 2 set with --rules megatron-llama: exit 2, it is one rank of the set (tp from its args), merge it" ||
  bad "rank file with rules" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" convert "$R01" -o "$T/r.safetensors"
[ "$rc" = 0 ] && [ "$(cat "$T/err")" = "tpconv: warning: '$R01': this is one rank file of a Megatron set (tp 2 x pp 2, from its args): its tensors, that rank's slices, are written as they are; the whole model: $HOW" ] &&
  ok "convert one rank file without rules: written as it is, with a warning naming the set and the merge" || bad "rank file plain" "exit $rc" "$(cat "$T/err")"
# shard needs the whole model: a rank's slices split again would be a set silently wrong
run "$TPCONV" shard "$R01" --preset llama --tp 2 -o "$T/rs"
[ "$rc" = 2 ] && [ ! -e "$T/rs" ] &&
  [ "$(cat "$T/err")" = "tpconv: error: '$R01': this is one rank file of a Megatron set (tp 2 x pp 2, from its args), not a whole model: $HOW first" ] &&
  ok "shard one rank file of a tp 2 x pp 2 set: exit 2, not a whole model, merge it first" || bad "shard rank file" "exit $rc" "$(cat "$T/err")"
cp -r "$T/L" "$T/Lnoargs" && R=$T/Lnoargs/release/mp_rank_00_000/model_optim_rng.pt
$PY -c 'import sys, torch; d = torch.load(sys.argv[1]); del d["args"]; torch.save(d, sys.argv[1])' "$R" 2>"$T/perr"
run "$TPCONV" convert "$R" --select model --rules megatron-llama --heads 8 --kv-heads 2 --head-dim 8 --vocab 200 -o "$T/r.safetensors"
[ "$rc" = 2 ] && grep -qF "'$R': this is one rank file of a Megatron set (tp 2 x pp 2, from its mp_rank folders), whose tensors" "$T/err" &&
  grep -qF "tpconv merge '$(realpath "$T/Lnoargs")' -o OUT" "$T/err" &&
  ok "a rank file without args: the set's mp_rank folders say it is one rank of tp 2 x pp 2" || bad "rank file without args" "exit $rc" "$(cat "$T/err" "$T/perr")"
run "$TPCONV" shard "$T/hf/model.pt" --preset llama --config "$T/hf/config.json" --tp 1 --layout megatron -o "$T/L1" -q
R1=$T/L1/release/mp_rank_00/model_optim_rng.pt
[ "$rc" = 0 ] && run "$TPCONV" convert "$R1" --select model --rules megatron-llama --vocab 200 -o "$T/L1.safetensors" -v &&
  same "$T/L1.safetensors" "$T/hf/model.pt" && grep -q "model fact heads = 8 (the checkpoint's Megatron args)" "$T/err" &&
  ok "a tp-1 legacy rank file: convert --select model --rules megatron-llama (facts from its args) gives the HF tensors" ||
  bad "legacy rank file" "exit $rc" "$(cat "$T/err" "$T/diff" 2>/dev/null | tail -3)"
# shard takes the same input options: --select the model subtree, the rules, the args' facts
run "$TPCONV" shard "$R1" --select model --rules megatron-llama --vocab 200 --preset llama --tp 2 -o "$T/S1" -q
[ "$rc" = 0 ] && run "$TPCONV" merge "$T/S1" -o "$T/S1.safetensors" -q && same "$T/S1.safetensors" "$T/hf/model.pt" &&
  ok "shard --select model --rules megatron-llama of a tp-1 rank file (facts from its args) -> merge: the HF tensors" ||
  bad "shard --select" "exit $rc" "$(cat "$T/err" "$T/diff" 2>/dev/null | tail -3)"
run "$TPCONV" merge "$T/S1" --select model -o "$T/S1b.safetensors"
[ "$rc" = 2 ] && grep -qF "select takes a subtree of one checkpoint, not of a shard set" "$T/err" &&
  ok "merge --select: exit 2, a set has no subtree" || bad "merge --select" "exit $rc" "$(cat "$T/err")"

# megatron-gpt: a Megatron GPT rank file (args + model, as Megatron saves it)
# built in torch from HF GPT-2 tensors; HF GPT-2 names come back bit for bit
if $PY - "$T" <<'PY' 2>"$T/perr"
import argparse, sys, torch
out = sys.argv[1]
L, H, NH, V, P = 2, 32, 4, 100, 128
D = H // NH
g = torch.Generator().manual_seed(5)
r = lambda *s: torch.randn(*s, generator=g)
hf = {"transformer.wte.weight": r(V, H), "transformer.wpe.weight": r(16, H),
      "transformer.ln_f.weight": r(H), "transformer.ln_f.bias": r(H)}
for l in range(L):
    p = "transformer.h.%d." % l
    for n, s in [("ln_1.weight", (H,)), ("ln_1.bias", (H,)), ("attn.c_attn.weight", (H, 3 * H)), ("attn.c_attn.bias", (3 * H,)),
                 ("attn.c_proj.weight", (H, H)), ("attn.c_proj.bias", (H,)), ("ln_2.weight", (H,)), ("ln_2.bias", (H,)),
                 ("mlp.c_fc.weight", (H, 4 * H)), ("mlp.c_fc.bias", (4 * H,)), ("mlp.c_proj.weight", (4 * H, H)), ("mlp.c_proj.bias", (H,))]:
        hf[p + n] = r(*s)
# Megatron: Linear [out, in]; linear_qkv rows per head [q_h; k_h; v_h]; vocab padded
m = {"embedding.word_embeddings.weight": torch.cat([hf["transformer.wte.weight"], torch.zeros(P - V, H)]),
     "embedding.position_embeddings.weight": hf["transformer.wpe.weight"],
     "decoder.final_layernorm.weight": hf["transformer.ln_f.weight"], "decoder.final_layernorm.bias": hf["transformer.ln_f.bias"]}
for l in range(L):
    p, d = "transformer.h.%d." % l, "decoder.layers.%d." % l
    w = hf[p + "attn.c_attn.weight"].t()                      # [3H, H] = [q; k; v]
    m[d + "self_attention.linear_qkv.weight"] = w.reshape(3, NH, D, H).transpose(0, 1).reshape(3 * H, H).clone()
    m[d + "self_attention.linear_qkv.bias"] = hf[p + "attn.c_attn.bias"].reshape(3, NH, D).transpose(0, 1).reshape(-1).clone()
    m[d + "self_attention.linear_qkv.layer_norm_weight"] = hf[p + "ln_1.weight"]
    m[d + "self_attention.linear_qkv.layer_norm_bias"] = hf[p + "ln_1.bias"]
    m[d + "self_attention.linear_proj.weight"] = hf[p + "attn.c_proj.weight"].t().clone()
    m[d + "self_attention.linear_proj.bias"] = hf[p + "attn.c_proj.bias"]
    m[d + "mlp.linear_fc1.layer_norm_weight"] = hf[p + "ln_2.weight"]
    m[d + "mlp.linear_fc1.layer_norm_bias"] = hf[p + "ln_2.bias"]
    m[d + "mlp.linear_fc1.weight"] = hf[p + "mlp.c_fc.weight"].t().clone()
    m[d + "mlp.linear_fc1.bias"] = hf[p + "mlp.c_fc.bias"]
    m[d + "mlp.linear_fc2.weight"] = hf[p + "mlp.c_proj.weight"].t().clone()
    m[d + "mlp.linear_fc2.bias"] = hf[p + "mlp.c_proj.bias"]
args = argparse.Namespace(num_layers=L, hidden_size=H, num_attention_heads=NH, group_query_attention=False,
                          num_query_groups=1, kv_channels=D, padded_vocab_size=P, tensor_model_parallel_size=1)
torch.save({"args": args, "checkpoint_version": 3.0, "iteration": 0, "model": m}, out + "/gpt_rank.pt")
torch.save(hf, out + "/gpt2_hf.pt")
PY
then
  run "$TPCONV" convert "$T/gpt_rank.pt" --select model --rules megatron-gpt --vocab 100 -o "$T/gpt2_out.pt" -q
  [ "$rc" = 0 ] && torch_eq "$T/gpt2_out.pt" "$T/gpt2_hf.pt" &&
    ok "convert --rules megatron-gpt: per-head [q_h; k_h; v_h] -> c_attn [q; k; v], Conv1D weights transposed, vocab unpadded: HF GPT-2 bit for bit" ||
    bad "megatron-gpt" "exit $rc" "$(cat "$T/err" "$T/perr" | tail -3)"
else bad "gpt rank file" "$(cat "$T/perr")"; fi
echo "1..$n"
[ "$failed" = 0 ]
