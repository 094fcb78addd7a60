# Write a header-only Hugging Face folder of a large mixture of experts (no
# torch needed): config.json, model.safetensors.index.json and one safetensors
# file per layer whose header lists every tensor and whose data is a hole (the
# file has its full size, sparse: no blocks written). `tpconv shard --dry-run`
# plans from the headers alone; the test that it reads no weight is that the
# holes would take minutes to read. Shapes as the real checkpoints' (bf16, the
# score-correction bias f32):
#   deepseek-v3  DeepSeek-V3 / R1: 61 layers (3 dense), 256 routed experts and a
#                shared one, MLA; 671.0B parameters, 1.34 TB of holes
#   qwen3-moe    Qwen3-235B-A22B: 94 layers, 128 experts; 235.1B, 470 GB of holes
# usage: make_header_moe.py KIND OUT_DIR
# e.g. (measured on the 2-core dev machine, others' jobs beside it):
#   make_header_moe.py qwen3-moe /tmp/q235 && /usr/bin/time -f '%e s %M KB' tpconv shard /tmp/q235 \
#     --preset qwen3-moe --tp 4 --pp 16 --ep 4 --pp-layers 4,6,6,6,6,6,6,6,6,6,6,6,6,6,6,6 \
#     --layout megatron-dist --dry-run     # 64 rank files, 6.5 s, 100 MB
#   make_header_moe.py deepseek-v3 /tmp/dsv3 && tpconv shard /tmp/dsv3 --preset deepseek-v3 \
#     --tp 8 --pp 16 --ep 8 --dry-run      # 128 rank files, 6.5 s, 87 MB (tpconv layout)
#   tpconv shard /tmp/dsv3 --preset deepseek-v3 --tp 8 --pp 16 --ep 8 \
#     --pp-layers 3,4,4,4,4,4,4,4,4,4,4,4,4,4,4,2 --layout megatron-dist --dry-run
#                                          # 128 .distcp files, 3.4 s, 112 MB (others' jobs
#                                          # beside it); 1342074888192 bytes stored = the
#                                          # model's 1342052868096 + 22020096 of vocab padding
#   /usr/bin/time -f '%e s %M KB' tpconv shard /tmp/dsv3 --preset deepseek-v3 --tp 8 --pp 16 --ep 64 \
#     --pp-layers 3,4,4,4,4,4,4,4,4,4,4,4,4,4,4,2 --layout megatron-dist --dry-run >plan.txt
#                                          # ep over tp: dp 8, 1024 .distcp files, 2.6 s, 172 MB
#                                          # (others' jobs beside it); the same 1342074888192
#                                          # bytes, the dense ones in dp rank 0's files, 56 files
#                                          # empty (stage 0's 3 dense layers have no experts);
#   python3 bench/megatron_dist_bytes.py /tmp/dsv3 plan.txt 8 8 3,4,4,4,4,4,4,4,4,4,4,4,4,4,4,2
#                                          # every file's bytes recounted from the headers alone
import json, os, sys

kind, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
B = {"BF16": 2, "F32": 4}
files = []  # [(name, {tensor: (dtype, shape)})]

if kind == "deepseek-v3":
    H, L, E, V, I, MI = 7168, 61, 256, 129280, 18432, 2048
    cfg = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": H,
           "num_hidden_layers": L, "num_attention_heads": 128, "num_key_value_heads": 128, "vocab_size": V,
           "intermediate_size": I, "moe_intermediate_size": MI, "n_routed_experts": E, "n_shared_experts": 1,
           "num_experts_per_tok": 8, "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536,
           "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "head_dim": 64, "n_group": 8,
           "topk_group": 4, "topk_method": "noaux_tc", "scoring_func": "sigmoid", "norm_topk_prob": True,
           "routed_scaling_factor": 2.5, "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "dtype": "bfloat16",
           "rope_theta": 10000.0, "max_position_embeddings": 163840}
    for l in range(L):
        p, t = "model.layers.%d." % l, {}
        a = p + "self_attn."
        t[a + "q_a_proj.weight"] = (1536, H); t[a + "q_a_layernorm.weight"] = (1536,)
        t[a + "q_b_proj.weight"] = (128 * 192, 1536); t[a + "kv_a_proj_with_mqa.weight"] = (576, H)
        t[a + "kv_a_layernorm.weight"] = (512,); t[a + "kv_b_proj.weight"] = (128 * 256, 512)
        t[a + "o_proj.weight"] = (H, 128 * 128)
        t[p + "input_layernorm.weight"] = (H,); t[p + "post_attention_layernorm.weight"] = (H,)
        if l < 3:
            for n in ("gate_proj", "up_proj"): t[p + "mlp.%s.weight" % n] = (I, H)
            t[p + "mlp.down_proj.weight"] = (H, I)
        else:
            t[p + "mlp.gate.weight"] = (E, H); t[p + "mlp.gate.e_score_correction_bias"] = ("F32", (E,))
            for x in ["shared_experts"] + ["experts.%d" % e for e in range(E)]:
                for n in ("gate_proj", "up_proj"): t[p + "mlp.%s.%s.weight" % (x, n)] = (MI, H)
                t[p + "mlp.%s.down_proj.weight" % x] = (H, MI)
        files.append(t)
    files.append({"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,), "lm_head.weight": (V, H)})
elif kind == "qwen3-moe":  # Qwen3-235B-A22B
    H, L, E, V, MI = 4096, 94, 128, 151936, 1536
    cfg = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": H,
           "num_hidden_layers": L, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
           "vocab_size": V, "intermediate_size": 12288, "moe_intermediate_size": MI, "num_experts": E,
           "num_experts_per_tok": 8, "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
           "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "dtype": "bfloat16", "rope_theta": 1000000.0}
    for l in range(L):
        p, t = "model.layers.%d." % l, {}
        a = p + "self_attn."
        t[a + "q_proj.weight"] = (64 * 128, H); t[a + "k_proj.weight"] = (4 * 128, H)
        t[a + "v_proj.weight"] = (4 * 128, H); t[a + "o_proj.weight"] = (H, 64 * 128)
        t[a + "q_norm.weight"] = (128,); t[a + "k_norm.weight"] = (128,)
        t[p + "input_layernorm.weight"] = (H,); t[p + "post_attention_layernorm.weight"] = (H,)
        t[p + "mlp.gate.weight"] = (E, H)
        for e in range(E):
            for n in ("gate_proj", "up_proj"): t[p + "mlp.experts.%d.%s.weight" % (e, n)] = (MI, H)
            t[p + "mlp.experts.%d.down_proj.weight" % e] = (H, MI)
        files.append(t)
    files.append({"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,), "lm_head.weight": (V, H)})
else:
    sys.exit("make_header_moe.py: KIND is deepseek-v3 or qwen3-moe, not '%s'" % kind)
json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
wm, total, params = {}, 0, 0
for i, t in enumerate(files):
    name = "model-%05d-of-%05d.safetensors" % (i + 1, len(files))
    hdr, off = {}, 0
    for k, v in t.items():
        dt, shape = v if isinstance(v[0], str) else ("BF16", v)
        n = 1
        for d in shape: n *= d
        hdr[k] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + n * B[dt]]}
        off += n * B[dt]; params += n
        wm[k] = name
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(out, name), "wb") as f:
        f.write(len(h).to_bytes(8, "little")); f.write(h); f.truncate(8 + len(h) + off)
    total += off
json.dump({"metadata": {"total_size": total}, "weight_map": wm}, open(os.path.join(out, "model.safetensors.index.json"), "w"))
print("%s: %d files, %d tensors, %.1fB parameters, %d bytes of data (sparse)" % (out, len(files), len(wm), params / 1e9, total))
