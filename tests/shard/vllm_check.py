"""The vllm layout, checked against an independent construction in torch.

  vllm_check.py make OUT                 two tiny models as HF folders:
      OUT/llama  LlamaForCausalLM, GQA (8 heads, 2 kv heads), vocab 1000, untied
      OUT/qwen   Qwen2ForCausalLM, q/k/v biases, 4 heads = 4 kv heads, vocab 130,
                 tie_word_embeddings (no lm_head.weight in the checkpoint)
      OUT/mixtral  MixtralForCausalLM, 4 experts, GQA 8 / 2 heads, vocab 70, bf16
  vllm_check.py check MODEL_DIR SET_DIR TP [MODEL_DIR SET_DIR TP ...]
      builds what vLLM's own state dict holds per tensor-parallel rank, the way
      vLLM computes it (QKVParallelLinear: heads/tp query heads, one replicated
      kv head per rank when tp >= kv heads, head = rank // (tp / kv);
      MergedColumnParallelLinear [gate_r; up_r]; RowParallelLinear dim 1 with
      the bias whole; VocabParallelEmbedding: vocab padded with zero rows to a
      multiple of 64, rank r rows [r*Vp/tp, (r+1)*Vp/tp); tied lm_head kept once
      under the smaller key, lm_head.weight; Mixtral's FusedMoE: the router
      whole (ReplicatedLinear), experts.w13_weight = every expert's
      [w1_r; w3_r] stacked (make_expert_params_mapping shard ids w1, w3 and
      _load_w13's halves), experts.w2_weight = w2's column slices stacked
      (_load_w2)), reads every
      model-rank-R-part-P.safetensors with a header parser of its own, and
      compares: the same key set as vLLM's filtered state dict, shapes, bytes.
      MODEL_DIR holds pytorch_model.bin or model.safetensors (the tiny
      fixtures of tests/gguf/arch). Qwen2-MoE / Qwen3-MoE: the experts
      mlp.experts.N.gate_proj / up_proj / down_proj into FusedMoE's w13_weight
      (shard ids w1 = gate, w3 = up: get_expert_mapping) and w2_weight, the
      router mlp.gate whole; Qwen2-MoE's shared expert a Qwen2MoeMLP
      (gate_up_proj [gate_r; up_r], down_proj's columns) holding
      shared_expert_gate (a torch.nn.Linear, whole) as expert_gate, kept by
      SharedFusedMoE as _shared_experts: each of its tensors is in the state
      dict under every one of those module paths, and _filter_subtensors
      keeps the smallest key (models/qwen2_moe.py@002fb907,
      layers/fused_moe/shared_fused_moe.py@03974a3f). Gemma 2 / Gemma 3
      (Gemma2ForCausalLM, Gemma3ForCausalLM): no lm_head parameter (the
      logits from model.embed_tokens; tie_word_embeddings asserted), norms
      whole and as stored (GemmaRMSNorm adds 1 at run time), the embedding
      normalizer a non-persistent buffer (vLLM PR #19788) and so not in the
      state dict.

Written from vLLM's source as cited in shard/layout_vllm.c, not from tpconv's
code. Exit 0 when every rank matches.
"""
import glob
import json
import os
import re
import struct
import sys

import torch

DT = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def make(out):
    torch.manual_seed(7)
    specs = {
        "llama": dict(arch="LlamaForCausalLM", hidden=64, heads=8, kv=2, inter=96, vocab=1000, layers=2,
                      tied=False, bias=False, dtype=torch.float32),
        "qwen": dict(arch="Qwen2ForCausalLM", hidden=32, heads=4, kv=4, inter=48, vocab=130, layers=2,
                     tied=True, bias=True, dtype=torch.bfloat16),
        "mixtral": dict(arch="MixtralForCausalLM", hidden=32, heads=8, kv=2, inter=48, vocab=70, layers=2,
                        tied=False, bias=False, dtype=torch.bfloat16, experts=4),
    }
    for name, s in specs.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        hd = s["hidden"] // s["heads"]
        sd = {}
        r = lambda *shape: torch.randn(*shape).to(s["dtype"])
        sd["model.embed_tokens.weight"] = r(s["vocab"], s["hidden"])
        for i in range(s["layers"]):
            p = "model.layers.%d." % i
            sd[p + "self_attn.q_proj.weight"] = r(s["heads"] * hd, s["hidden"])
            sd[p + "self_attn.k_proj.weight"] = r(s["kv"] * hd, s["hidden"])
            sd[p + "self_attn.v_proj.weight"] = r(s["kv"] * hd, s["hidden"])
            if s["bias"]:
                sd[p + "self_attn.q_proj.bias"] = r(s["heads"] * hd)
                sd[p + "self_attn.k_proj.bias"] = r(s["kv"] * hd)
                sd[p + "self_attn.v_proj.bias"] = r(s["kv"] * hd)
            sd[p + "self_attn.o_proj.weight"] = r(s["hidden"], s["heads"] * hd)
            if s.get("experts"):
                sd[p + "block_sparse_moe.gate.weight"] = r(s["experts"], s["hidden"])
                for x in range(s["experts"]):
                    q = p + "block_sparse_moe.experts.%d." % x
                    sd[q + "w1.weight"] = r(s["inter"], s["hidden"])
                    sd[q + "w2.weight"] = r(s["hidden"], s["inter"])
                    sd[q + "w3.weight"] = r(s["inter"], s["hidden"])
            else:
                sd[p + "mlp.gate_proj.weight"] = r(s["inter"], s["hidden"])
                sd[p + "mlp.up_proj.weight"] = r(s["inter"], s["hidden"])
                sd[p + "mlp.down_proj.weight"] = r(s["hidden"], s["inter"])
            sd[p + "input_layernorm.weight"] = r(s["hidden"])
            sd[p + "post_attention_layernorm.weight"] = r(s["hidden"])
        sd["model.norm.weight"] = r(s["hidden"])
        if not s["tied"]:
            sd["lm_head.weight"] = r(s["vocab"], s["hidden"])
        torch.save(sd, os.path.join(d, "pytorch_model.bin"))
        cfg = {"architectures": [s["arch"]], "model_type": {"llama": "llama", "qwen": "qwen2"}.get(name, name),
               "hidden_size": s["hidden"], "num_attention_heads": s["heads"], "num_key_value_heads": s["kv"],
               "intermediate_size": s["inter"], "vocab_size": s["vocab"], "num_hidden_layers": s["layers"],
               "tie_word_embeddings": s["tied"], "torch_dtype": str(s["dtype"]).replace("torch.", "")}
        if s.get("experts"):
            cfg.update(num_local_experts=s["experts"], num_experts_per_tok=2)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        with open(os.path.join(d, "tokenizer.json"), "w") as f:
            json.dump({"model": {"type": "BPE", "vocab": {"a": 0}}}, f)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        buf = bytearray(data[base + b:base + e])
        t = torch.frombuffer(buf, dtype=DT[v["dtype"]]) if e > b else torch.empty(0, dtype=DT[v["dtype"]])
        out[k] = t.reshape(v["shape"])
    return out, hdr.get("__metadata__", {})


NO_LM_HEAD = ("Gemma2ForCausalLM", "Gemma3ForCausalLM")  # logits from model.embed_tokens


def load_model(model_dir):
    pt = os.path.join(model_dir, "pytorch_model.bin")
    if os.path.exists(pt):
        return torch.load(pt)
    return read_safetensors(os.path.join(model_dir, "model.safetensors"))[0]


def expected(model_dir, tp, rank):
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    sd = load_model(model_dir)
    H, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // H
    arch = cfg["architectures"][0]
    qh = H // tp
    if tp >= kv:
        kvh, kv0 = 1, rank // (tp // kv)
    else:
        kvh, kv0 = kv // tp, rank * (kv // tp)
    out = {}

    def rows(t, start, n):
        return t[start:start + n]

    for k, t in sd.items():
        m = re.match(r"(model\.layers\.\d+\.)(.*)$", k)
        if m is None:
            if k in ("model.embed_tokens.weight", "lm_head.weight"):
                V = t.shape[0]
                Vp = (V + 63) // 64 * 64
                pad = torch.zeros(Vp, t.shape[1], dtype=t.dtype)
                pad[:V] = t
                per = Vp // tp
                # the module paths vLLM's state dict holds it under; tied:
                # both, and _filter_subtensors keeps the smaller key
                paths = {k}
                if cfg.get("tie_word_embeddings"):
                    paths = {"model.embed_tokens.weight", "lm_head.weight"}
                if arch in NO_LM_HEAD:
                    paths.discard("lm_head.weight")
                    if k == "lm_head.weight":
                        continue
                out[min(paths)] = pad[rank * per:(rank + 1) * per]
            else:
                out[k] = t
            continue
        p, rest = m.group(1), m.group(2)
        if rest.startswith("self_attn.q_proj."):
            suf = rest[len("self_attn.q_proj."):]
            q = rows(sd[p + "self_attn.q_proj." + suf], rank * qh * hd, qh * hd)
            kk = rows(sd[p + "self_attn.k_proj." + suf], kv0 * hd, kvh * hd)
            vv = rows(sd[p + "self_attn.v_proj." + suf], kv0 * hd, kvh * hd)
            out[p + "self_attn.qkv_proj." + suf] = torch.cat([q, kk, vv], 0)
        elif rest.startswith("self_attn.k_proj.") or rest.startswith("self_attn.v_proj."):
            pass
        elif rest == "self_attn.o_proj.weight":
            out[k] = t[:, rank * qh * hd:(rank + 1) * qh * hd]
        elif rest == "mlp.gate_proj.weight":
            I = t.shape[0] // tp
            up = sd[p + "mlp.up_proj.weight"]
            out[p + "mlp.gate_up_proj.weight"] = torch.cat([t[rank * I:(rank + 1) * I], up[rank * I:(rank + 1) * I]], 0)
        elif rest == "mlp.up_proj.weight":
            pass
        elif rest == "mlp.down_proj.weight":
            I = t.shape[1] // tp
            out[k] = t[:, rank * I:(rank + 1) * I]
        elif rest in ("mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.down_proj.weight",
                      "mlp.shared_expert_gate.weight"):
            # Qwen2MoeMLP under mlp.shared_expert and, through SharedFusedMoE,
            # mlp.experts._shared_experts; its expert_gate is shared_expert_gate
            if rest == "mlp.shared_expert.gate_proj.weight":
                I = t.shape[0] // tp
                up = sd[p + "mlp.shared_expert.up_proj.weight"]
                v, sub = torch.cat([t[rank * I:(rank + 1) * I], up[rank * I:(rank + 1) * I]], 0), "gate_up_proj.weight"
            elif rest == "mlp.shared_expert.down_proj.weight":
                I = t.shape[1] // tp
                v, sub = t[:, rank * I:(rank + 1) * I], "down_proj.weight"
            else:
                v, sub = t, "expert_gate.weight"
            paths = {p + "mlp.shared_expert." + sub, p + "mlp.experts._shared_experts." + sub}
            if sub == "expert_gate.weight":
                paths.add(p + "mlp.shared_expert_gate.weight")
            out[min(paths)] = v
        elif rest == "mlp.shared_expert.up_proj.weight":
            pass
        elif re.match(r"mlp\.experts\.\d+\.", rest):
            # Qwen's FusedMoE: w1 = gate_proj, w3 = up_proj, w2 = down_proj
            if rest == "mlp.experts.0.gate_proj.weight":
                E = cfg.get("num_experts") or cfg["num_local_experts"]
                I = t.shape[0] // tp
                e = p + "mlp.experts."
                out[e + "w13_weight"] = torch.stack([torch.cat(
                    [sd[e + "%d.gate_proj.weight" % x][rank * I:(rank + 1) * I],
                     sd[e + "%d.up_proj.weight" % x][rank * I:(rank + 1) * I]], 0) for x in range(E)])
                out[e + "w2_weight"] = torch.stack([sd[e + "%d.down_proj.weight" % x][:, rank * I:(rank + 1) * I]
                                                    for x in range(E)])
        elif rest.startswith("block_sparse_moe.experts."):
            # FusedMoE (no expert parallelism): every expert on every rank,
            # w13 = [w1 rows of the rank; w3 rows], w2 the rank's columns
            if rest.endswith(".w1.weight"):
                E = cfg["num_local_experts"]
                I = t.shape[0] // tp
                e = p + "block_sparse_moe.experts."
                out[e + "w13_weight"] = torch.stack([torch.cat(
                    [sd[e + "%d.w1.weight" % x][rank * I:(rank + 1) * I],
                     sd[e + "%d.w3.weight" % x][rank * I:(rank + 1) * I]], 0) for x in range(E)])
                out[e + "w2_weight"] = torch.stack([sd[e + "%d.w2.weight" % x][:, rank * I:(rank + 1) * I]
                                                    for x in range(E)])
        else:
            out[k] = t
    return out


def check(model_dir, set_dir, tp):
    bad = 0
    for rank in range(tp):
        parts = sorted(glob.glob(os.path.join(set_dir, "model-rank-%d-part-*.safetensors" % rank)))
        if not parts:
            print("rank %d: no files" % rank)
            return 1
        got = {}
        for f in parts:
            t, meta = read_safetensors(f)
            dup = set(got) & set(t)
            if dup:
                print("rank %d: %s in two parts" % (rank, sorted(dup)))
                bad += 1
            got.update(t)
        want = expected(model_dir, tp, rank)
        if set(got) != set(want):
            print("rank %d: keys differ: extra %s missing %s" % (rank, sorted(set(got) - set(want)),
                                                              sorted(set(want) - set(got))))
            bad += 1
            continue
        for k in want:
            a, b = got[k], want[k].contiguous()
            if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape) or not torch.equal(a, b):
                print("rank %d: %s differs: %s %s vs %s %s" % (rank, k, a.dtype, tuple(a.shape), b.dtype, tuple(b.shape)))
                bad += 1
        print("rank %d: %d tensors in %d part(s) match" % (rank, len(want), len(parts)))
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
        sys.exit(0)
    # check M S TP [M S TP ...]: every triple (one process for many sets)
    a = sys.argv[2:]
    sys.exit(max(check(a[i], a[i + 1], int(a[i + 2])) for i in range(0, len(a) - 2, 3)))
