"""The trtllm layout, checked against TensorRT-LLM's converters re-implemented in torch.

  trtllm_ref.py make OUT
      four tiny Hugging Face folders (pytorch_model.bin + a config.json with
      the keys save_pretrained writes):
        OUT/llama    LlamaForCausalLM, GQA 8 heads / 2 kv heads, vocab 1001, 3 layers, float16
        OUT/mixtral  MixtralForCausalLM, 4 experts top-2, GQA 8 / 2, vocab 130, bfloat16
        OUT/gpt2     GPT2LMHeadModel, Conv1D weights and biases, vocab 101, float32, tied
        OUT/qwen2    Qwen2ForCausalLM, q/k/v biases, 4 heads = 4 kv heads, tied, bfloat16
  trtllm_ref.py check MODEL_DIR SET_DIR TP PP EP
      builds every rank{N}.safetensors and the config.json that
      convert_checkpoint.py --dtype <the weights' dtype> --tp_size TP
      --pp_size PP --moe_ep_size EP writes, re-implemented below from
      NVIDIA/TensorRT-LLM's source, and compares tpconv's set with them: the
      same tensor names in every rank file, dtypes, shapes and bytes; every
      config key tpconv writes equal (type and value) to the reference's, and
      every key it leaves out equal to the default TensorRT-LLM's config class
      gives it on load.

Not derived from tpconv's code. The functions cite the TensorRT-LLM lines they
follow (tensorrt_llm/models/convert_utils.py, llama/convert.py
load_weights_from_hf_model, qwen/convert.py convert_hf_qwen, gpt/convert.py
load_weights_from_hf_model, llama|qwen|gpt/config.py from_hugging_face,
modeling_utils.py PretrainedConfig, mapping.py Mapping).
"""
import json
import math
import os
import struct
import sys

import torch

DT = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
DTNAME = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


# ---- the models ----

def llama_like(sd, cfg, dtype, moe=0, bias=False, tied=False):
    g = lambda *s: torch.randn(*s).to(dtype)
    H, nh, kv, I = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]
    hd = H // nh
    sd["model.embed_tokens.weight"] = g(cfg["vocab_size"], H)
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        sd[p + "input_layernorm.weight"] = g(H)
        for n, rows in (("q", nh * hd), ("k", kv * hd), ("v", kv * hd)):
            sd[p + "self_attn.%s_proj.weight" % n] = g(rows, H)
            if bias:
                sd[p + "self_attn.%s_proj.bias" % n] = g(rows)
        sd[p + "self_attn.o_proj.weight"] = g(H, nh * hd)
        sd[p + "post_attention_layernorm.weight"] = g(H)
        if moe:
            sd[p + "block_sparse_moe.gate.weight"] = g(moe, H)
            for e in range(moe):
                q = p + "block_sparse_moe.experts.%d." % e
                sd[q + "w1.weight"] = g(I, H)
                sd[q + "w2.weight"] = g(H, I)
                sd[q + "w3.weight"] = g(I, H)
        else:
            sd[p + "mlp.gate_proj.weight"] = g(I, H)
            sd[p + "mlp.up_proj.weight"] = g(I, H)
            sd[p + "mlp.down_proj.weight"] = g(H, I)
    sd["model.norm.weight"] = g(H)
    if not tied:
        sd["lm_head.weight"] = g(cfg["vocab_size"], H)


def make(out):
    torch.manual_seed(11)
    base = {"bos_token_id": 1, "eos_token_id": 2, "initializer_range": 0.02, "use_cache": True,
            "transformers_version": "4.44.0", "attention_dropout": 0.0}
    models = {
        "llama": (dict(base, architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=64,
                       num_attention_heads=8, num_key_value_heads=2, intermediate_size=96, vocab_size=1001,
                       num_hidden_layers=3, max_position_embeddings=8192, rms_norm_eps=1e-05, hidden_act="silu",
                       rope_theta=500000.0, tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                       pretraining_tp=1, torch_dtype="float16",
                       rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}),
                  torch.float16),
        "mixtral": (dict(base, architectures=["MixtralForCausalLM"], model_type="mixtral", hidden_size=32,
                         num_attention_heads=8, num_key_value_heads=2, intermediate_size=48, vocab_size=130,
                         num_hidden_layers=2, max_position_embeddings=32768, rms_norm_eps=1e-05, hidden_act="silu",
                         rope_theta=1000000.0, tie_word_embeddings=False, num_local_experts=4,
                         num_experts_per_tok=2, router_aux_loss_coef=0.02, sliding_window=None,
                         output_router_logits=False, rope_scaling=None, torch_dtype="bfloat16"),
                    torch.bfloat16),
        "qwen2": (dict(base, architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=32,
                       num_attention_heads=4, num_key_value_heads=4, intermediate_size=48, vocab_size=130,
                       num_hidden_layers=2, max_position_embeddings=32768, max_window_layers=21, rms_norm_eps=1e-06,
                       hidden_act="silu", rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False,
                       sliding_window=32768, rope_scaling=None, torch_dtype="bfloat16"),
                  torch.bfloat16),
        "gpt2": (dict(architectures=["GPT2LMHeadModel"], model_type="gpt2", n_embd=32, n_head=4, n_layer=2,
                      n_positions=64, n_ctx=64, n_inner=None, vocab_size=101, layer_norm_epsilon=1e-05,
                      activation_function="gelu_new", resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
                      initializer_range=0.02, bos_token_id=50256, eos_token_id=50256, torch_dtype="float32"),
                 torch.float32),
    }
    for name, (cfg, dtype) in models.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        sd = {}
        if name == "gpt2":
            g = lambda *s: torch.randn(*s).to(dtype)
            H = cfg["n_embd"]
            sd["transformer.wte.weight"] = g(cfg["vocab_size"], H)
            sd["transformer.wpe.weight"] = g(cfg["n_positions"], H)
            for i in range(cfg["n_layer"]):
                p = "transformer.h.%d." % i
                for n, shape in (("ln_1", [H]), ("attn.c_attn", [H, 3 * H]), ("attn.c_proj", [H, H]),
                                 ("ln_2", [H]), ("mlp.c_fc", [H, 4 * H]), ("mlp.c_proj", [4 * H, H])):
                    sd[p + n + ".weight"] = g(*shape)
                    sd[p + n + ".bias"] = g(shape[-1])
            sd["transformer.ln_f.weight"] = g(H)
            sd["transformer.ln_f.bias"] = g(H)
        else:
            llama_like(sd, cfg, dtype, moe=cfg.get("num_local_experts", 0), bias=name == "qwen2",
                       tied=cfg["tie_word_embeddings"])
        torch.save(sd, os.path.join(d, "pytorch_model.bin"))
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        with open(os.path.join(d, "tokenizer.json"), "w") as f:
            json.dump({"model": {"type": "BPE", "vocab": {"a": 0}}}, f)


# ---- TensorRT-LLM's helpers (models/convert_utils.py, _utils.py, mapping.py) ----

def split(v, tp_size, tp_rank, dim=0):  # convert_utils.split (torch branch)
    if tp_size == 1:
        return v
    assert v.shape[dim] % tp_size == 0
    return v.split(v.shape[dim] // tp_size, dim=dim)[tp_rank].clone().detach()


def split_matrix_tp(v, tensor_parallel, rank, dim):  # convert_utils.split_matrix_tp
    return split(v, tensor_parallel, rank, dim=dim)


def split_qkv_tp(v, n_head, n_hidden, tensor_parallel, rank):  # convert_utils.split_qkv_tp
    v = v.reshape(3, n_hidden, n_hidden)
    split_v = split(v, tensor_parallel, rank, dim=1)
    return split_v.reshape(3 * (n_hidden // tensor_parallel), n_hidden).clone()


def split_qkv_bias_tp(v, n_head, n_hidden, tensor_parallel, rank):  # convert_utils.split_qkv_bias_tp
    split_v = v.reshape(3, n_hidden)
    split_v = split(split_v, tensor_parallel, rank, dim=1)
    return split_v.reshape(3 * (n_hidden // tensor_parallel)).clone()


def dup_kv_weight(v, num_head, tp_size):  # convert_utils.dup_kv_weight
    assert tp_size % num_head == 0
    reps = tp_size // num_head
    head_size = v.shape[0] // num_head
    v = v.reshape(num_head, head_size, -1)[:, None, :, :].expand(num_head, reps, head_size, v.shape[1])
    return v.reshape(num_head * reps * head_size, -1).clone().detach()


def dup_kv_bias(v, num_head, tp_size):  # convert_utils.dup_kv_bias
    assert tp_size % num_head == 0
    reps = tp_size // num_head
    head_size = v.shape[0] // num_head
    v = v.reshape(num_head, head_size)[:, None, :].expand(num_head, reps, head_size)
    return v.reshape(num_head * reps * head_size).clone().detach()


def pad_vocab_size(vocab_size, tp_size):  # _utils.pad_vocab_size
    return int(math.ceil(vocab_size / tp_size) * tp_size)


class Mapping:  # mapping.py: rank = pp_rank * tp + tp_rank; moe ranks from tp_rank
    def __init__(self, rank, tp, pp, ep):
        self.rank, self.tp_size, self.pp_size = rank, tp, pp
        self.moe_ep_size, self.moe_tp_size = ep, tp // ep
        self.tp_rank = rank % tp
        self.pp_rank = rank // tp
        self.moe_tp_rank = self.tp_rank // self.moe_ep_size
        self.moe_ep_rank = self.tp_rank % self.moe_ep_size

    def pp_layers(self, n):
        return torch.tensor_split(torch.arange(n), self.pp_size)[self.pp_rank].tolist()

    def ep_experts(self, n):
        per = n // self.moe_ep_size
        return list(range(self.moe_ep_rank * per, (self.moe_ep_rank + 1) * per))

    def is_first_pp_rank(self):
        return self.pp_rank == 0

    def is_last_pp_rank(self):
        return self.pp_rank == self.pp_size - 1


# ---- the converters ----

def llama_weights(sd, hf, m, dtype):
    """llama/convert.py load_weights_from_hf_model (no quantization)."""
    w = {}
    nh, kv, H = hf["num_attention_heads"], hf.get("num_key_value_heads", hf["num_attention_heads"]), hf["hidden_size"]
    head_size = hf.get("head_dim") or H // nh
    mha_mode = kv == nh
    layers_range = m.pp_layers(hf["num_hidden_layers"])
    get = lambda k, dt=dtype: sd[k].to(dt)
    for l in layers_range:
        prefix = "model.layers.%d." % l
        tllm = "transformer.layers.%d." % (l - layers_range[0])
        q, k, v = (get(prefix + "self_attn.%s_proj.weight" % n) for n in "qkv")
        if not mha_mode:
            if kv < m.tp_size:
                k, v = dup_kv_weight(k, kv, m.tp_size), dup_kv_weight(v, kv, m.tp_size)
            assert k.shape[0] % (m.tp_size * head_size) == 0
            w[tllm + "attention.qkv.weight"] = torch.concat(
                (split(q, m.tp_size, m.tp_rank), split(k, m.tp_size, m.tp_rank), split(v, m.tp_size, m.tp_rank)))
        else:
            w[tllm + "attention.qkv.weight"] = split_qkv_tp(torch.cat([q, k, v], 0), nh, H, m.tp_size, m.tp_rank)
        w[tllm + "attention.dense.weight"] = split_matrix_tp(get(prefix + "self_attn.o_proj.weight"), m.tp_size,
                                                            m.tp_rank, dim=1)
        E = hf.get("num_local_experts", 0)
        if E > 1:  # moe_config.has_moe()
            rank_experts = list(range(E))
            if m.moe_ep_size > 1:
                rank_experts = m.ep_experts(E)
            st = {s: torch.stack([sd[prefix + "block_sparse_moe.experts.%d.%s.weight" % (e, s)] for e in rank_experts])
                  for s in ("w1", "w2", "w3")}
            w3, w2, w1 = st["w3"], st["w2"], st["w1"]
            if m.moe_tp_size > 1:
                w3 = split(w3, m.moe_tp_size, m.moe_tp_rank, dim=1)
                w2 = split(w2, m.moe_tp_size, m.moe_tp_rank, dim=2)
                w1 = split(w1, m.moe_tp_size, m.moe_tp_rank, dim=1)
            w[tllm + "mlp.proj.weight"] = w2.to(dtype)
            w[tllm + "mlp.fc.weight"] = torch.concat([w3, w1], dim=-2).to(dtype)
            w[tllm + "mlp.router.weight"] = get(prefix + "block_sparse_moe.gate.weight", torch.float32)
        else:
            w[tllm + "mlp.gate.weight"] = split_matrix_tp(get(prefix + "mlp.up_proj.weight"), m.tp_size, m.tp_rank, dim=0)
            w[tllm + "mlp.fc.weight"] = split_matrix_tp(get(prefix + "mlp.gate_proj.weight"), m.tp_size, m.tp_rank, dim=0)
            w[tllm + "mlp.proj.weight"] = split_matrix_tp(get(prefix + "mlp.down_proj.weight"), m.tp_size, m.tp_rank,
                                                         dim=1)
        w[tllm + "input_layernorm.weight"] = get(prefix + "input_layernorm.weight")
        w[tllm + "post_layernorm.weight"] = get(prefix + "post_attention_layernorm.weight")
    v = get("model.embed_tokens.weight")
    vocab = hf["vocab_size"]
    if hf.get("tie_word_embeddings") and m.is_last_pp_rank():
        if vocab % m.tp_size != 0:
            v2 = torch.nn.functional.pad(v, (0, 0, 0, pad_vocab_size(vocab, m.tp_size) - vocab), "constant", 0)
        else:
            v2 = v
        w["lm_head.weight"] = split(v2, m.tp_size, m.tp_rank)
    if m.is_first_pp_rank():  # use_parallel_embedding False
        w["transformer.vocab_embedding.weight"] = v
    if m.is_last_pp_rank() and not hf.get("tie_word_embeddings"):
        lm = get("lm_head.weight")
        if vocab % m.tp_size != 0:
            lm = torch.nn.functional.pad(lm, (0, 0, 0, pad_vocab_size(vocab, m.tp_size) - vocab), "constant", 0)
        w["lm_head.weight"] = split_matrix_tp(lm, m.tp_size, m.tp_rank, dim=0)
    if m.is_last_pp_rank():
        w["transformer.ln_f.weight"] = get("model.norm.weight")
    return w


def qwen2_weights(sd, hf, m, dtype):
    """qwen/convert.py convert_hf_qwen for qwen_type qwen2 (no quantization)."""
    w = {}
    nh, H = hf["num_attention_heads"], hf["hidden_size"]
    head_size = H // nh
    kv = hf.get("num_key_value_heads", nh)
    mha_mode = kv == nh
    tp, rank = m.tp_size, m.tp_rank
    layers_range = m.pp_layers(hf["num_hidden_layers"])
    get = lambda k: sd[k].to(dtype) if k in sd else None
    for l in layers_range:
        prefix = "model.layers.%d." % l
        tllm = "transformer.layers.%d." % (l - layers_range[0])
        (qw, qb), (kw, kb), (vw, vb) = ((get(prefix + "self_attn.%s_proj.weight" % n),
                                         get(prefix + "self_attn.%s_proj.bias" % n)) for n in "qkv")
        if not mha_mode:
            if kv < tp:
                kw, vw = dup_kv_weight(kw, kv, tp), dup_kv_weight(vw, kv, tp)
                kb, vb = dup_kv_bias(kb, kv, tp), dup_kv_bias(vb, kv, tp)
            w[tllm + "attention.qkv.weight"] = torch.concat((split(qw, tp, rank), split(kw, tp, rank), split(vw, tp, rank)))
            w[tllm + "attention.qkv.bias"] = torch.concat((split(qb, tp, rank), split(kb, tp, rank), split(vb, tp, rank)))
        else:
            w[tllm + "attention.qkv.weight"] = split_qkv_tp(torch.cat([qw, kw, vw], 0), nh, H, tp, rank)
            w[tllm + "attention.qkv.bias"] = split_qkv_bias_tp(torch.cat([qb, kb, vb], 0), nh, H, tp, rank)
        w[tllm + "attention.dense.weight"] = split_matrix_tp(get(prefix + "self_attn.o_proj.weight"), tp, rank, dim=1)
        w[tllm + "mlp.gate.weight"] = split_matrix_tp(get(prefix + "mlp.up_proj.weight"), tp, rank, dim=0)
        w[tllm + "mlp.fc.weight"] = split_matrix_tp(get(prefix + "mlp.gate_proj.weight"), tp, rank, dim=0)
        w[tllm + "mlp.proj.weight"] = split_matrix_tp(get(prefix + "mlp.down_proj.weight"), tp, rank, dim=1)
        w[tllm + "input_layernorm.weight"] = get(prefix + "input_layernorm.weight")
        w[tllm + "post_layernorm.weight"] = get(prefix + "post_attention_layernorm.weight")
    v = get("model.embed_tokens.weight")
    vocab = hf["vocab_size"]
    if m.is_last_pp_rank():
        lm = v.clone() if hf.get("tie_word_embeddings") else get("lm_head.weight")
        if vocab % tp != 0:
            lm = torch.nn.functional.pad(lm, (0, 0, 0, pad_vocab_size(vocab, tp) - vocab), "constant", 0)
        w["lm_head.weight"] = split_matrix_tp(lm, tp, rank, dim=0)
    if m.is_first_pp_rank():
        w["transformer.vocab_embedding.weight"] = v
    if m.is_last_pp_rank():
        w["transformer.ln_f.weight"] = get("model.norm.weight")
    return w


def gpt_split(param, tp_rank, tp_size, is_column=True):  # gpt/convert.py split
    if param is None:
        return None
    if tp_size == 1 or param.numel() == 1:
        return param
    if param.ndim == 1 and not is_column:
        return param
    split_dim = 0 if (param.ndim == 1 or is_column) else 1
    return torch.chunk(param, tp_size, dim=split_dim)[tp_rank].contiguous()


def gpt_split_qkv(param, tp_rank, tp_size, hidden_size, num_heads, num_kv_heads=None):  # gpt/convert.py split_qkv
    head_dim = hidden_size // num_heads
    num_kv_heads = num_kv_heads if num_kv_heads is not None else num_heads
    q, k, v = torch.split(param, [hidden_size, num_kv_heads * head_dim, num_kv_heads * head_dim], dim=0)
    assert num_kv_heads >= tp_size
    return torch.cat([gpt_split(q, tp_rank, tp_size), gpt_split(k, tp_rank, tp_size), gpt_split(v, tp_rank, tp_size)], 0)


def gpt2_weights(sd, hf, m, dtype):
    """gpt/convert.py load_weights_from_hf_model, gpt_variant gpt2."""
    w = {}
    H, nh, vocab = hf["n_embd"], hf["n_head"], hf["vocab_size"]
    tp, rank = m.tp_size, m.tp_rank
    get = lambda k: sd[k].to(dtype)
    layers_range = m.pp_layers(hf["n_layer"])
    for l in layers_range:
        prefix = "transformer.h.%d" % l
        tllm = "transformer.layers.%d" % (l - layers_range[0])
        qkv_w = get(prefix + ".attn.c_attn.weight").t().contiguous()  # transpose for Conv1D
        w[tllm + ".attention.qkv.weight"] = gpt_split_qkv(qkv_w, rank, tp, H, nh, nh)
        w[tllm + ".attention.qkv.bias"] = gpt_split_qkv(get(prefix + ".attn.c_attn.bias"), rank, tp, H, nh, nh)
        w[tllm + ".attention.dense.weight"] = gpt_split(get(prefix + ".attn.c_proj.weight").t().contiguous(), rank, tp,
                                                        is_column=False)
        w[tllm + ".attention.dense.bias"] = get(prefix + ".attn.c_proj.bias")
        w[tllm + ".mlp.fc.weight"] = gpt_split(get(prefix + ".mlp.c_fc.weight").t().contiguous(), rank, tp, True)
        w[tllm + ".mlp.fc.bias"] = gpt_split(get(prefix + ".mlp.c_fc.bias"), rank, tp, True)
        w[tllm + ".mlp.proj.weight"] = gpt_split(get(prefix + ".mlp.c_proj.weight").t().contiguous(), rank, tp, False)
        w[tllm + ".mlp.proj.bias"] = get(prefix + ".mlp.c_proj.bias")
        for src, dst in (("ln_1", "input_layernorm"), ("ln_2", "post_layernorm")):
            w[tllm + "." + dst + ".weight"] = get(prefix + "." + src + ".weight")
            w[tllm + "." + dst + ".bias"] = get(prefix + "." + src + ".bias")
    if m.is_first_pp_rank():  # split_embedding without use_parallel_embedding
        w["transformer.vocab_embedding.weight"] = get("transformer.wte.weight")
        w["transformer.position_embedding.weight"] = get("transformer.wpe.weight")
    if m.is_last_pp_rank():  # not share_embedding_table
        e = get("transformer.wte.weight")
        if vocab % tp != 0:
            e = torch.nn.functional.pad(e, (0, 0, 0, pad_vocab_size(vocab, tp) - vocab), value=0)
        w["lm_head.weight"] = gpt_split(e.clone(), rank, tp, is_column=True)
        w["transformer.ln_f.weight"] = get("transformer.ln_f.weight")
        w["transformer.ln_f.bias"] = get("transformer.ln_f.bias")
    return w


# ---- config.json (from_hugging_face + PretrainedConfig.to_dict) ----

def config(hf, tp, pp, ep, dtype):
    fam = hf["model_type"]
    c = {"architecture": hf["architectures"][0], "dtype": DTNAME[dtype], "logits_dtype": "float32"}
    if fam == "gpt2":  # gpt/config.py GPTConfig.from_hugging_face
        H, nh = hf["n_embd"], hf["n_head"]
        c.update(vocab_size=hf["vocab_size"], hidden_size=H, num_hidden_layers=hf["n_layer"], num_attention_heads=nh,
                 num_key_value_heads=nh, intermediate_size=hf["n_inner"] if hf.get("n_inner") is not None else 4 * H,
                 norm_epsilon=hf["layer_norm_epsilon"], position_embedding_type="learned_absolute",
                 max_position_embeddings=hf["n_positions"], hidden_act=hf["activation_function"], gpt_variant="gpt2",
                 bias=True, apply_query_key_layer_scaling=False, rotary_pct=1.0, rotary_base=10000.0,
                 rotary_scaling=None, qk_layernorm=False, inner_layernorm=False, norm_before_bmm1=False, q_scaling=1,
                 embedding_scale=None, moe={"num_experts": 0, "top_k": 0, "normalization_mode": 1})
        head = H // nh
    else:  # llama/config.py LLaMAConfig, qwen/config.py QWenConfig .from_hugging_face
        nh = hf["num_attention_heads"]
        head = hf.get("kv_channels", hf.get("head_dim") or hf["hidden_size"] // nh)
        c.update(vocab_size=hf["vocab_size"], hidden_size=hf["hidden_size"], num_hidden_layers=hf["num_hidden_layers"],
                 num_attention_heads=nh, num_key_value_heads=hf.get("num_key_value_heads", nh),
                 intermediate_size=hf["intermediate_size"], norm_epsilon=hf["rms_norm_eps"],
                 position_embedding_type="rope_gpt_neox", max_position_embeddings=hf["max_position_embeddings"],
                 hidden_act=hf["hidden_act"], rotary_scaling=hf.get("rope_scaling"), mlp_bias=False,
                 tie_word_embeddings=hf.get("tie_word_embeddings", False))
        if fam == "qwen2":
            c.update(qwen_type="qwen2", attn_bias=True, rotary_base=hf.get("rope_theta", 100000.0),
                     seq_length=hf.get("seq_length", 8192), use_logn_attn=hf.get("use_logn_attn", False),
                     moe_intermediate_size=hf.get("moe_intermediate_size", 0),
                     moe_shared_expert_intermediate_size=hf.get("shared_expert_intermediate_size", 0), num_labels=1,
                     moe={"num_experts": hf.get("num_experts", 0), "top_k": hf.get("num_experts_per_tok", 0),
                          "normalization_mode": 0})
        else:
            mixtral = fam == "mixtral"
            c.update(attn_bias=hf.get("bias", False) or hf.get("attention_bias", False),
                     rotary_base=hf.get("rope_theta", 10000.0), residual_mlp=False,
                     hidden_act="swiglu" if mixtral else hf["hidden_act"],
                     moe={"num_experts": hf.get("num_local_experts", 0), "top_k": hf.get("num_experts_per_tok", 0),
                          "normalization_mode": 1 if mixtral else None},
                     fc_after_embed=False, use_input_layernorm_in_first_layer=True, use_last_layernorm=True,
                     layer_idx_offset=0, remove_duplicated_kv_heads=False, embedding_multiplier=1.0,
                     attention_multiplier=1.0, residual_multiplier=1.0, output_multiplier_scale=1.0)
        c.update(disable_weight_only_quant_plugin=False)
    c.update(head_size=head, rotary_embedding_dim=int(head * 1.0), use_parallel_embedding=False, runtime_defaults=None,
             embedding_sharding_dim=0, qk_layernorm=False,
             quantization={"quant_algo": None, "kv_cache_quant_algo": None, "group_size": 128, "smoothquant_val": 0.5,
                           "clamp_val": None, "use_meta_recipe": False, "has_zero_point": False,
                           "pre_quant_scale": False, "exclude_modules": None},
             mapping={"world_size": tp * pp, "gpus_per_node": 8, "cp_size": 1, "tp_size": tp, "pp_size": pp,
                      "moe_tp_size": tp // ep, "moe_cluster_size": 1, "moe_ep_size": ep, "attn_tp_size": tp,
                      "attn_cp_size": 1, "auto_parallel": False})
    return c


# What the config classes make of a key config.json leaves out (the
# constructors' defaults: modeling_utils.py QuantConfig, Mapping.__init__ with
# tp_size; llama/config.py LLaMAConfig; qwen/config.py QWenConfig).
DEFAULTS = {
    "quantization": {"group_size": 128, "smoothquant_val": 0.5, "clamp_val": None, "use_meta_recipe": False,
                     "has_zero_point": False, "pre_quant_scale": False, "exclude_modules": None},
    "mapping": {"gpus_per_node": 8, "cp_size": 1, "moe_cluster_size": 1, "attn_cp_size": 1, "auto_parallel": False},
}
TOPDEFAULTS = {"runtime_defaults": None, "disable_weight_only_quant_plugin": False, "fc_after_embed": False,
               "use_input_layernorm_in_first_layer": True, "use_last_layernorm": True, "layer_idx_offset": 0,
               "remove_duplicated_kv_heads": False, "embedding_multiplier": 1.0, "attention_multiplier": 1.0,
               "residual_multiplier": 1.0, "output_multiplier_scale": 1.0,
               "moe": {"num_experts": 0, "top_k": 0, "normalization_mode": 1}}
REQUIRED = ["architecture", "dtype", "logits_dtype", "vocab_size", "max_position_embeddings", "hidden_size",
            "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_size", "hidden_act",
            "intermediate_size", "norm_epsilon", "position_embedding_type", "rotary_base", "rotary_scaling",
            "mapping", "quantization"]


def same_value(a, b):
    """Equal JSON values, ints and floats told apart (floats stay floats)."""
    if type(a) != type(b):
        return False
    if isinstance(a, dict):
        return set(a) == set(b) and all(same_value(a[k], b[k]) for k in a)
    return a == b


def check_config(got, want):
    bad = []
    for k in REQUIRED:
        if k not in got:
            bad.append("config: %s missing" % k)
    for k, v in want.items():
        if k not in got and (k not in TOPDEFAULTS or not same_value(TOPDEFAULTS[k], v)):
            bad.append("config: %s left out, its default is not %r" % (k, v))
    for k, v in got.items():
        if k not in want:
            bad.append("config: %s is not a key TensorRT-LLM writes" % k)
        elif isinstance(v, dict) and k in DEFAULTS:
            for kk, vv in want[k].items():
                if kk in v:
                    if not same_value(v[kk], vv):
                        bad.append("config: %s.%s = %r, TensorRT-LLM %r" % (k, kk, v[kk], vv))
                elif kk == "attn_tp_size" and vv == got["mapping"]["tp_size"]:
                    pass  # Mapping: attn_tp_size = tp_size * cp_size when not given
                elif not same_value(DEFAULTS[k].get(kk, object()), vv):
                    bad.append("config: %s.%s left out, its default is not %r" % (k, kk, vv))
            for kk in v:
                if kk not in want[k]:
                    bad.append("config: %s.%s is not a key TensorRT-LLM writes" % (k, kk))
        elif k == "moe" and not same_value(v, {kk: want[k][kk] for kk in v if kk in want[k]}):
            bad.append("config: moe = %r, TensorRT-LLM %r" % (v, want[k]))
        elif k != "moe" and not same_value(v, want[k]):
            bad.append("config: %s = %r, TensorRT-LLM %r" % (k, v, want[k]))
    return bad


# ---- reading tpconv's set ----

def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        t = torch.frombuffer(bytearray(data[8 + n + b:8 + n + e]), dtype=DT[v["dtype"]]) if e > b else \
            torch.empty(0, dtype=DT[v["dtype"]])
        out[k] = t.reshape(v["shape"])
    return out


def check(model_dir, set_dir, tp, pp, ep):
    hf = json.load(open(os.path.join(model_dir, "config.json")))
    sd = torch.load(os.path.join(model_dir, "pytorch_model.bin"))
    dtype = sd["transformer.wte.weight" if hf["model_type"] == "gpt2" else "model.embed_tokens.weight"].dtype
    conv = {"gpt2": gpt2_weights, "qwen2": qwen2_weights}.get(hf["model_type"], llama_weights)
    bad = check_config(json.load(open(os.path.join(set_dir, "config.json"))), config(hf, tp, pp, ep, dtype))
    ntens = 0
    for rank in range(tp * pp):
        want = conv(sd, hf, Mapping(rank, tp, pp, ep), dtype)
        got = read_safetensors(os.path.join(set_dir, "rank%d.safetensors" % rank))
        if set(got) != set(want):
            bad.append("rank %d: names differ: extra %s, missing %s" % (rank, sorted(set(got) - set(want)),
                                                                      sorted(set(want) - set(got))))
            continue
        for k in sorted(want):
            a, b = got[k], want[k].contiguous()
            if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape) or not torch.equal(a, b):
                bad.append("rank %d: %s: %s %s, TensorRT-LLM %s %s" % (rank, k, a.dtype, tuple(a.shape), b.dtype,
                                                                      tuple(b.shape)))
        ntens += len(want)
    for b in bad[:20]:
        print(b)
    print("%d rank files, %d tensors and the config checked, %d differences" % (tp * pp, ntens, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
        sys.exit(0)
    sys.exit(check(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])))
