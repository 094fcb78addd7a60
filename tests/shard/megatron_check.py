"""Megatron legacy rank files, checked against an independent construction.

    megatron_check.py MODEL_DIR SET_DIR TP PP

For every (tp, pp) rank, loads release/mp_rank_TT[_PPP]/model_optim_rng.pt with real
torch (weights_only=False: Megatron's files hold an argparse.Namespace) and compares
its "model" state dict with what Megatron's own checkpoint loaders build from the
Hugging Face weights (tools/checkpoint/loader_llama_mistral.py, loader_mixtral_hf.py):
  linear_qkv = cat([q.reshape(G, hpg*d, -1), k.reshape(G, d, -1), v.reshape(G, d, -1)],
               dim=1).reshape(-1, hidden), then chunked over tp (whole groups per rank)
  linear_fc1 = cat([gate.chunk(tp)[r], up.chunk(tp)[r]])
  linear_proj / linear_fc2 chunked on dim 1; embedding and output layer padded with
  zero rows to a multiple of 128 * tp and chunked on dim 0; norms whole;
  layers numbered locally on each pipeline stage (num_layers / pp each).
Qwen3's q/k norms (q_layernorm / k_layernorm, head_dim sized) whole on every rank.
Also checks args (padded_vocab_size and the true orig_vocab_size too; add_qkv_bias,
qk_layernorm, untie_embeddings_and_output_weights, rotary_base as an int,
layernorm_epsilon, max_position_embeddings), checkpoint_version and the tracker file.
Exit 0 when all match.
"""
import json, os, sys
import torch

model_dir, set_dir, tp, pp = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cfg = json.load(open(os.path.join(model_dir, "config.json")))
sd = torch.load(os.path.join(model_dir, "pytorch_model.bin"))
H, nh, G, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
d = cfg.get("head_dim") or H // nh  # kv_channels (Qwen3: not hidden / heads)
hpg = nh // G
per = L // pp
bad = 0
assert open(os.path.join(set_dir, "latest_checkpointed_iteration.txt")).read().strip() == "release"

def vocab_pad(t):
    V = t.shape[0]
    m = 128 * tp
    Vp = (V + m - 1) // m * m
    out = torch.zeros(Vp, t.shape[1], dtype=t.dtype)
    out[:V] = t
    return out

for p in range(pp):
    for r in range(tp):
        name = "mp_rank_%02d_%03d" % (r, p) if pp > 1 else "mp_rank_%02d" % r
        f = torch.load(os.path.join(set_dir, "release", name, "model_optim_rng.pt"), weights_only=False)
        assert f["checkpoint_version"] == 3.0 and f["iteration"] == 0, (f["checkpoint_version"], f["iteration"])
        a = f["args"]
        assert (a.num_layers, a.num_attention_heads, a.num_query_groups, a.kv_channels,
                a.tensor_model_parallel_size, a.pipeline_model_parallel_size) == (L, nh, G, d, tp, pp), vars(a)
        V = sd["model.embed_tokens.weight"].shape[0]  # padded_vocab_size, and the true size as transformers' tools read it
        assert (a.padded_vocab_size, a.orig_vocab_size) == ((V + 128 * tp - 1) // (128 * tp) * 128 * tp, V), vars(a)
        # the attention and rope args under Megatron's names (training/arguments.py,
        # transformer_config.py; as Megatron-Bridge's qwen2/qwen3/mistral bridges give them)
        theta = (cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta"))
        qkn = "model.layers.0.self_attn.q_norm.weight" in sd
        assert (a.add_qkv_bias, getattr(a, "qk_layernorm", False), a.untie_embeddings_and_output_weights,
                getattr(a, "layernorm_epsilon", None), getattr(a, "max_position_embeddings", None)) == (
            "model.layers.0.self_attn.q_proj.bias" in sd, qkn, "lm_head.weight" in sd, cfg.get("rms_norm_eps"),
            cfg.get("max_position_embeddings")), vars(a)
        assert theta is None or (a.rotary_base == theta and isinstance(a.rotary_base, int)), vars(a)
        want = {}
        if p == 0:
            want["embedding.word_embeddings.weight"] = vocab_pad(sd["model.embed_tokens.weight"]).chunk(tp)[r]
        for l in range(p * per, (p + 1) * per):
            hf = "model.layers.%d." % l
            mc = "decoder.layers.%d." % (l - p * per)
            for suf in ("weight", "bias"):
                if hf + "self_attn.q_proj." + suf not in sd:
                    continue
                q, k, v = (sd[hf + "self_attn.%s_proj.%s" % (x, suf)] for x in "qkv")
                tail = q.shape[1:]
                qkv = torch.cat([q.reshape(G, hpg * d, *tail), k.reshape(G, d, *tail), v.reshape(G, d, *tail)], dim=1)
                want[mc + "self_attention.linear_qkv." + suf] = qkv.reshape(-1, *tail).chunk(tp)[r]
            want[mc + "self_attention.linear_qkv.layer_norm_weight"] = sd[hf + "input_layernorm.weight"]
            want[mc + "self_attention.linear_proj.weight"] = sd[hf + "self_attn.o_proj.weight"].chunk(tp, dim=1)[r]
            for x in "qk":  # Qwen3's per-head norms: whole on every rank (attention.py q_layernorm / k_layernorm)
                if hf + "self_attn.%s_norm.weight" % x in sd:
                    want[mc + "self_attention.%s_layernorm.weight" % x] = sd[hf + "self_attn.%s_norm.weight" % x]
            want[mc + "mlp.linear_fc1.layer_norm_weight"] = sd[hf + "post_attention_layernorm.weight"]
            want[mc + "mlp.linear_fc1.weight"] = torch.cat([sd[hf + "mlp.gate_proj.weight"].chunk(tp)[r],
                                                             sd[hf + "mlp.up_proj.weight"].chunk(tp)[r]])
            want[mc + "mlp.linear_fc2.weight"] = sd[hf + "mlp.down_proj.weight"].chunk(tp, dim=1)[r]
        if p == pp - 1:
            want["decoder.final_layernorm.weight"] = sd["model.norm.weight"]
            if "lm_head.weight" in sd:
                want["output_layer.weight"] = vocab_pad(sd["lm_head.weight"]).chunk(tp)[r]
        got = f["model"]
        if set(got) != set(want):
            print(name, "keys differ: extra", sorted(set(got) - set(want)), "missing", sorted(set(want) - set(got)))
            bad += 1
            continue
        for k in want:
            if got[k].dtype != want[k].dtype or got[k].shape != want[k].shape or not torch.equal(got[k], want[k].contiguous()):
                print(name, k, "differs", got[k].shape, want[k].shape)
                bad += 1
        print(name, len(want), "tensors match")
sys.exit(1 if bad else 0)
