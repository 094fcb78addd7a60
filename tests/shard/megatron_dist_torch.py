"""The megatron-dist layout against real torch >= 2.4 (the forky chroot's 2.14;
not part of `make test`): a torch_dist folder tpconv wrote is loaded by
torch.distributed.checkpoint's own reader and every key is checked against what
Megatron-Core's sharded_state_dict gives for the same model and parallel sizes,
rebuilt here independently from the Hugging Face weights:

  - FileSystemReader.read_metadata(): the keys, each global shape, and every
    chunk's offsets and sizes, against the chunks Megatron's ranks would save
    (stacked layers [num_layers, ...] at offset L, per tp rank at
    tp_rank * local rows or columns, linear_fc1's gate half at tp_rank * f and
    up half at tp * f + tp_rank * f, replicated norms once);
  - dcp.load(no_dist=True) into full-size tensors: each equals Megatron's
    layout of the HF weights (QKV per query group [q_g; k_g; v_g], [gate; up],
    vocab padded with zero rows to a multiple of 128 * tp);
  - common.pt (torch.load, weights_only=False: argparse.Namespace) and
    metadata.json say what Megatron's loader reads.

Mixtures of experts (Mixtral, Qwen3-MoE; EP given): pre_mlp_layernorm and the
router replicated, every routed expert under one key per parameter
[num_layers, num_experts, ...] at offset (L, global expert), split over the
expert tensor-parallel group of etp = tp / ep ranks (linear_fc1's gate and up
halves as the dense swiglu factory's), each chunk on its EP group's ranks;
common.pt's num_experts, expert_model/tensor_parallel_size and moe_grouped_gemm.
With dense layers beside (config.json's mlp_only_layers): every key with its
layer number and no layer axis, the dense layers' norm fused into linear_fc1,
moe_layer_freq as a list.
DeepSeek-V3 (config.json's kv_lora_rank): input_layernorm its own key, MLA's
linear_q_down_proj / linear_kv_down_proj replicated (TELinear duplicated),
linear_q_up_proj / linear_kv_up_proj column-parallel with the q_a / kv_a norms as
their layer_norm_weight (replicated), linear_proj row-parallel; the router's
expert_bias replicated; shared_experts' linear_fc1 [gate; up] (swiglu halves over
the whole tp group) and linear_fc2; the first_k_dense_replace layers dense;
common.pt's MLA sizes and sigmoid / expert-bias / group routing.

EP over TP (a multiple of it, DP = ep / tp data-parallel replicas): tp x DP x pp
files __R_0.distcp, R = (pp_rank * DP + dp_rank) * tp + tp_rank; every dense chunk
in a dp rank 0 file, each expert's in the file of its EP rank (R % (tp x DP)),
expert tp 1; common.pt's data_parallel_size.

Qwen2 / Qwen3 / Mistral (their own presets): linear_qkv.bias per query group as the
weight (tp-split on axis 0), q_layernorm / k_layernorm of head_dim replicated (tp rank 0
stores them); common.pt's add_qkv_bias, qk_layernorm, rotary_base (an int),
layernorm_epsilon, max_position_embeddings, untie_embeddings_and_output_weights.
`make interop-megatron` (tests/interop/megatron_dist.sh) runs the sets listed below.

usage (in the chroot): python3 megatron_dist_torch.py HF_DIR SET_DIR TP PP_LAYERS [EP [grouped]]
  HF_DIR holds config.json and model.safetensors; PP_LAYERS the layers of each
  stage, comma-separated ("2" for pp 1); EP the expert parallelism of an MoE set.

Run (as root; R is the chroot's /tmp/mcore):
  /usr/bin/python3 tests/shard/vllm_check.py make /tmp/m
  tpconv convert /tmp/m/llama -o $R/hfl/ && cp /tmp/m/llama/config.json $R/hfl/
  tpconv shard /tmp/m/llama --preset llama --tp 2 --pp 2 --pp-layers 0,2 --layout megatron-dist -o $R/s
  cp tests/shard/megatron_dist_torch.py $R/
  /work/bin/inchroot /tmp/mcore python3 megatron_dist_torch.py hfl s 2 0,2
Last run (torch 2.14.1 in the forky chroot): llama tp 2 pp 2 (0,2) 9 keys in 29
chunks, llama tp 1 9 keys in 17, qwen2 (tied, q/k/v biases, bf16) tp 4 pp 2 (1,1)
9 keys in 57 and tp 2 pp 2 (2,0) 9 keys in 31: every one as Megatron's.
MoE (same chroot, tests/gguf/arch's tiny-mixtral and tiny-qwen3-moe copied to
$R/hfm and $R/hfq): mixtral tp 2 ep 2 (python3 megatron_dist_torch.py hfm SET 2 2 2)
10 keys in 43 chunks, mixtral tp 2 ep 1 (expert tp 2) 10 keys in 67, qwen3-moe
tp 2 pp 2 ep 2 (0,2, --moe-grouped-gemm: ... 2 0,2 2 grouped) and (1,1) 12 keys
in 47 each: every key, shape, offset, byte and expert-to-file placement as
Megatron's; a Qwen3-MoE with a dense first layer (tests/shard/mixed_moe.py) at tp 2
pp 2 ep 2 (1,1): 20 per-layer keys in 40 chunks, moe_layer_freq [0, 1].
DeepSeek-V3 (tests/gguf/arch's tiny-deepseek as $R/hfd, its model.safetensors
from `tpconv convert`): tp 2 pp 2 ep 2 (2,1) 44 keys in 87 chunks, tp 2 ep 1 (3)
44 in 111, tp 4 pp 2 ep 2 (1,2) 44 in 151, tp 2 pp 2 ep 1 (0,3, grouped) 44 in
111, tp 4 pp 3 ep 4 (1,1,1) 44 in 127: every one as Megatron's.
EP over TP (torch 2.14.1, the same chroot; the sets from `tpconv shard ... --tp T --pp P
--ep N [--pp-layers S] --layout megatron-dist`): DeepSeek-V3 tp 2 pp 2 ep 4 (2,1,
... hfd SET 2 2,1 4) 44 keys in 87 chunks in 8 files, tp 1 pp 2 ep 4 (1,2: stage 0
dense, so its dp ranks 1-3 write empty files, as torch's writer does) 44 in 67 in 8,
tp 2 ep 4 grouped (3) 44 in 87 in 4; Mixtral tp 1 pp 2 ep 2 (1,1) 10 in 37 in 4,
tp 2 ep 4 (2) 10 in 43 in 4: every key, offset, byte and file as Megatron's.
Qwen2 / Qwen3 / Mistral (torch 2.14.1, tests/interop/megatron_dist.sh): tests/gguf/arch's
tiny qwen2 tp 2 pp 2 (1,1) 9 keys in 31 chunks, tp 2 (2) 9 in 31; qwen3 tp 2 pp 2 (1,1)
11 in 33, tp 1 pp 2 (0,2) 11 in 21; mistral tp 2 pp 2 (1,1) and (2,0) 9 in 29 each;
vllm_check's 4-kv-head Qwen2 tp 4 pp 2 (1,1) 9 in 57: every one as Megatron's.
"""
import json, os, sys

import torch
import torch.distributed.checkpoint as dcp
from safetensors.torch import load_file

hf_dir, set_dir, tp, stages = sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(x) for x in sys.argv[4].split(",")]
ep = int(sys.argv[5]) if len(sys.argv) > 5 else 1
grouped = len(sys.argv) > 6 and sys.argv[6] == "grouped"
# ep over tp (a multiple of it): a save by tp x DP x pp ranks, DP = ep / tp data-parallel
# replicas, expert tp 1; else DP 1 and expert tp = tp / ep
DP = ep // tp if ep > tp else 1
etp = 1 if ep > tp else tp // ep
cfg = json.load(open(os.path.join(hf_dir, "config.json")))
hf = load_file(os.path.join(hf_dir, "model.safetensors"))
H, NH = cfg["hidden_size"], cfg["num_attention_heads"]
NG = cfg.get("num_key_value_heads", NH)
D = cfg.get("head_dim") or H // NH
L, V = cfg["num_hidden_layers"], cfg["vocab_size"]
E = cfg.get("num_local_experts") or cfg.get("num_experts") or cfg.get("n_routed_experts") or 0
MLA = "kv_lora_rank" in cfg  # DeepSeek-V3's multi-latent attention
moe = "block_sparse_moe." if cfg["model_type"] == "mixtral" else "mlp."
ex_names = ("w1", "w3", "w2") if cfg["model_type"] == "mixtral" else ("gate_proj", "up_proj", "down_proj")
P = -(-V // (128 * tp)) * 128 * tp
assert sum(stages) == L, (stages, L)
it = os.path.join(set_dir, "release")
assert open(os.path.join(set_dir, "latest_checkpointed_iteration.txt")).read().strip() == "release"

# ---- what Megatron's sharded_state_dict gives: key -> (global tensor, [(offsets, sizes)])
exp = {}


def chunks(key, full, axis, stacked, layer, replicated=False, parts=1, expert=None):
    """full: the key's global tensor (stacked: of one layer; of one expert of it
    when expert is given); axis: tp axis. An expert's tp group is its etp
    ranks (tp / ep)."""
    g = list(full.shape)
    lead = ([L] if stacked else []) + ([E] if expert is not None else [])
    pre = ([layer] if stacked else []) + ([expert] if expert is not None else [])
    ones = [1] * len(pre)
    ntp = etp if expert is not None else tp
    shape = lead + g
    out = []
    if replicated:
        out.append((pre + [0] * len(g), ones + g))
    else:
        for t in range(ntp):
            for k in range(parts):  # swiglu: part k of ntp * parts pieces along axis 0
                n = g[axis] // (ntp * parts)
                off = [0] * len(g)
                off[axis] = k * ntp * n + t * n
                sz = list(g)
                sz[axis] = n
                out.append((pre + off, ones + sz))
    if key not in exp:
        exp[key] = [torch.zeros(shape, dtype=full.dtype) if stacked or expert is not None else full, []]
    if stacked and expert is not None:
        exp[key][0][layer][expert] = full
    elif stacked:
        exp[key][0][layer] = full
    elif expert is not None:
        exp[key][0][expert] = full
    exp[key][1] += out


def pad(w):
    return torch.cat([w, torch.zeros(P - V, w.shape[1], dtype=w.dtype)])


chunks("embedding.word_embeddings.weight", pad(hf["model.embed_tokens.weight"]), 0, False, 0)
if "lm_head.weight" in hf:
    chunks("output_layer.weight", pad(hf["lm_head.weight"]), 0, False, 0)
chunks("decoder.final_layernorm.weight", hf["model.norm.weight"], 0, False, 0, replicated=True)
dense_layers = cfg.get("mlp_only_layers") or list(range(cfg.get("first_k_dense_replace") or 0))
mixed = bool(E and dense_layers)  # non-homogeneous: every key with its layer number, no layer axis
for l in range(L):
    p, m = "model.layers.%d." % l, "decoder.layers.%d." % l if mixed else "decoder.layers."
    for suf in ["weight", "bias"]:
        if p + "self_attn.q_proj." + suf not in hf:
            continue
        q, k, v = (hf[p + "self_attn.%s_proj.%s" % (x, suf)] for x in "qkv")
        rest = q.shape[1:]
        qkv = torch.cat([q.reshape(NG, NH // NG * D, *rest), k.reshape(NG, D, *rest), v.reshape(NG, D, *rest)], 1)
        chunks(m + "self_attention.linear_qkv." + suf, qkv.reshape(-1, *rest), 0, not mixed, l)
    if MLA:
        # multi_latent_attention.py: the down projections duplicated (TELinear),
        # the q_a / kv_a norms in the up projections (TELayerNormColumnParallelLinear),
        # their weights column-parallel; the input norm its own TENorm
        a = p + "self_attn."
        chunks(m + "input_layernorm.weight", hf[p + "input_layernorm.weight"], 0, not mixed, l, replicated=True)
        chunks(m + "self_attention.linear_q_down_proj.weight", hf[a + "q_a_proj.weight"], 0, not mixed, l, replicated=True)
        chunks(m + "self_attention.linear_q_up_proj.layer_norm_weight", hf[a + "q_a_layernorm.weight"], 0, not mixed, l, replicated=True)
        chunks(m + "self_attention.linear_q_up_proj.weight", hf[a + "q_b_proj.weight"], 0, not mixed, l)
        chunks(m + "self_attention.linear_kv_down_proj.weight", hf[a + "kv_a_proj_with_mqa.weight"], 0, not mixed, l, replicated=True)
        chunks(m + "self_attention.linear_kv_up_proj.layer_norm_weight", hf[a + "kv_a_layernorm.weight"], 0, not mixed, l, replicated=True)
        chunks(m + "self_attention.linear_kv_up_proj.weight", hf[a + "kv_b_proj.weight"], 0, not mixed, l)
    else:
        chunks(m + "self_attention.linear_qkv.layer_norm_weight", hf[p + "input_layernorm.weight"], 0, not mixed, l, replicated=True)
    chunks(m + "self_attention.linear_proj.weight", hf[p + "self_attn.o_proj.weight"], 1, not mixed, l)
    for x in "qk":
        if p + "self_attn.%s_norm.weight" % x in hf:
            chunks(m + "self_attention.%s_layernorm.weight" % x, hf[p + "self_attn.%s_norm.weight" % x], 0, not mixed, l, replicated=True)
    if E and l not in dense_layers:
        # moe/experts.py: SequentialMLP and TEGroupedMLP give the same keys
        chunks(m + "pre_mlp_layernorm.weight", hf[p + "post_attention_layernorm.weight"], 0, not mixed, l, replicated=True)
        chunks(m + "mlp.router.weight", hf[p + moe + "gate.weight"], 0, not mixed, l, replicated=True)
        if p + moe + "gate.e_score_correction_bias" in hf:  # router.py: expert_bias, a buffer
            chunks(m + "mlp.router.expert_bias", hf[p + moe + "gate.e_score_correction_bias"], 0, not mixed, l, replicated=True)
        if p + moe + "shared_experts.gate_proj.weight" in hf:  # shared_experts.py: an MLP over the tp group
            q = p + moe + "shared_experts."
            chunks(m + "mlp.shared_experts.linear_fc1.weight", torch.cat([hf[q + "gate_proj.weight"], hf[q + "up_proj.weight"]]), 0, not mixed, l, parts=2)
            chunks(m + "mlp.shared_experts.linear_fc2.weight", hf[q + "down_proj.weight"], 1, not mixed, l)
        for e in range(E):
            q = p + moe + "experts.%d." % e
            gate, up, down = (hf[q + n + ".weight"] for n in ex_names)
            chunks(m + "mlp.experts.experts.linear_fc1.weight", torch.cat([gate, up]), 0, not mixed, l, parts=2, expert=e)
            chunks(m + "mlp.experts.experts.linear_fc2.weight", down, 1, not mixed, l, expert=e)
        continue
    chunks(m + "mlp.linear_fc1.layer_norm_weight", hf[p + "post_attention_layernorm.weight"], 0, not mixed, l, replicated=True)
    chunks(m + "mlp.linear_fc1.weight", torch.cat([hf[p + "mlp.gate_proj.weight"], hf[p + "mlp.up_proj.weight"]]), 0, not mixed, l, parts=2)
    chunks(m + "mlp.linear_fc2.weight", hf[p + "mlp.down_proj.weight"], 1, not mixed, l)

# ---- torch's reader: the metadata
md = dcp.FileSystemReader(it).read_metadata()
sdm = md.state_dict_metadata
assert sorted(sdm) == sorted(exp), ("keys", sorted(set(sdm) ^ set(exp)))
nchunks = 0
for key, (full, want) in exp.items():
    tm = sdm[key]
    assert list(tm.size) == list(full.shape), (key, tm.size, full.shape)
    assert tm.properties.dtype == full.dtype, (key, tm.properties.dtype, full.dtype)
    got = sorted((list(c.offsets), list(c.sizes)) for c in tm.chunks)
    assert got == sorted(want), (key, got, sorted(want))
    nchunks += len(got)

# ---- torch's reader: the bytes, loaded into full-size tensors
sd = {k: torch.empty_like(v[0]) for k, v in exp.items()}
dcp.load(sd, checkpoint_id=it, no_dist=True)
for k, (full, _) in exp.items():
    assert torch.equal(sd[k], full), k

# ---- what Megatron's loader reads beside them
cfgj = json.load(open(os.path.join(it, "metadata.json")))
assert cfgj["sharded_backend"] == "torch_dist" and cfgj["sharded_backend_version"] == 1, cfgj
common = torch.load(os.path.join(it, "common.pt"), weights_only=False)
a = common["args"]
assert (a.num_layers, a.hidden_size, a.num_attention_heads, a.num_query_groups, a.kv_channels, a.padded_vocab_size,
        a.tensor_model_parallel_size, a.pipeline_model_parallel_size) == (L, H, NH, NG, D, P, tp, len(stages)), vars(a)
assert common["checkpoint_version"] == 3.0 and common["iteration"] == 0, common
# the attention and rope args under Megatron-LM's names (training/arguments.py --rotary-base
# is an int; transformer_config.py's fields add_qkv_bias, qk_layernorm, layernorm_epsilon),
# as Megatron-Bridge's qwen2 / qwen3 / mistral bridges set them from config.json
theta = (cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta"))
assert a.add_qkv_bias == ("model.layers.0.self_attn.q_proj.bias" in hf), vars(a)
assert a.untie_embeddings_and_output_weights == ("lm_head.weight" in hf), vars(a)
if not MLA:
    assert getattr(a, "qk_layernorm", False) == ("model.layers.0.self_attn.q_norm.weight" in hf), vars(a)
if theta:
    assert a.rotary_base == theta and type(a.rotary_base) is int, vars(a)
assert getattr(a, "layernorm_epsilon", None) == cfg.get("rms_norm_eps"), vars(a)
assert getattr(a, "max_position_embeddings", None) == cfg.get("max_position_embeddings"), vars(a)
assert common["content_metadata"] == {"singleton_local_shards": False, "chained_optim_avoid_prefix": True}, common
if E:
    assert (a.num_experts, a.expert_model_parallel_size, a.expert_tensor_parallel_size, a.moe_grouped_gemm,
            a.moe_router_topk, a.moe_router_pre_softmax) == (E, ep, etp, grouped, cfg["num_experts_per_tok"],
                                                             cfg.get("norm_topk_prob") is False), vars(a)
    if mixed:
        assert a.moe_layer_freq == [0 if l in dense_layers else 1 for l in range(L)], vars(a)
    if "n_shared_experts" in cfg:
        assert a.moe_shared_expert_intermediate_size == cfg["moe_intermediate_size"] * cfg["n_shared_experts"], vars(a)
    if cfg.get("scoring_func") == "sigmoid":
        assert a.moe_router_score_function == "sigmoid" and a.moe_router_enable_expert_bias, vars(a)
        assert (a.moe_router_num_groups, a.moe_router_group_topk, a.moe_router_topk_scaling_factor) == (
            cfg["n_group"], cfg["topk_group"], cfg["routed_scaling_factor"]), vars(a)
if MLA:
    assert a.multi_latent_attention and a.qk_layernorm, vars(a)
    assert (a.q_lora_rank, a.kv_lora_rank, a.qk_head_dim, a.qk_pos_emb_head_dim, a.v_head_dim) == (
        cfg["q_lora_rank"], cfg["kv_lora_rank"], cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]), vars(a)
if DP > 1:
    assert a.data_parallel_size == DP, vars(a)
# where each chunk lives: rank r = (pp_rank * DP + dp_rank) * tp + tp_rank (parallel_state.py's
# order tp-cp-ep-dp-pp); an expert's on the ranks of its EP group (EP rank (r % (tp * DP)) //
# etp: experts.py's ep_group), a dense chunk on dp rank 0 only (its replica id ends in the dp
# rank: core/utils.py make_(tp_)sharded_tensor_for_checkpoint), in the file of that rank
sm = md.storage_data
files = sorted(f for f in os.listdir(it) if f.endswith(".distcp"))
assert files == sorted("__%d_0.distcp" % r for r in range(tp * DP * len(stages))), files
for idx, st in sm.items():
    r = int(st.relative_path.split("_")[2])
    s = r % (tp * DP)
    if E and "experts.experts" in idx.fqn:
        e = idx.offset[0 if mixed else 1]
        assert s // etp == e // (E // ep), (idx.fqn, list(idx.offset), st.relative_path)
    else:
        assert s // tp == 0, (idx.fqn, list(idx.offset), st.relative_path)
if len(set(stages)) > 1:
    assert (a.decoder_first_pipeline_num_layers, a.decoder_last_pipeline_num_layers) == (stages[0], stages[-1]), vars(a)
print("ok: torch %s read %d keys in %d chunks in %d files (tp %d, stages %s, ep %d%s): shapes, offsets and bytes as Megatron-Core's "
      "sharded_state_dict gives them" % (torch.__version__, len(exp), nchunks, len(files), tp, sys.argv[4], ep,
                                         (", dp %d" % DP if DP > 1 else "") + (", grouped" if grouped else "")))
