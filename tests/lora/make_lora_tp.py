"""Fixtures for tests/lora/lora_tp_test.sh (LoRA and tensor parallelism). Run in
the forky chroot (torch 2.14, transformers 5.12, safetensors):
python3 make_lora_tp.py OUTDIR, then copy OUTDIR's phi3/ qwen2/ nemo/ here
(seeded: the same bytes each run).

phi3/   Phi3ForCausalLM from_config (hidden 16, 4 heads, 2 KV heads, fused
        qkv_proj [q|k|v] and gate_up_proj [gate|up], untied lm_head, f32) and
        phi3/fused: a LoRA adapter on qkv_proj, o_proj, gate_up_proj and
        down_proj with lm_head in modules_to_save, written as PEFT v0.20.0's
        save_pretrained writes it (keys base_model.model.<module>.lora_A.weight
        ..., the modules_to_save tensor under its module's name; see
        make_lora.py).
qwen2/  Qwen2ForCausalLM from_config (q/k/v with biases) and qwen2/bias-dora:
        lora_bias and DoRA on q_proj, k_proj, v_proj.
nemo/   LoRA adapters as NeMo 1.x saves a tensor-parallel PEFT run (the .nemo
        archive extracted): model_config.yaml and per-rank
        mp_rank_TT/model_weights.ckpt (tp_rank_TT_pp_rank_PPP/ with pipeline
        stages; model_weights.ckpt alone at tp 1), torch.save of the adapter
        state dict, keys
          model.decoder.layers.L.self_attention.adapter_layer.lora_kqv_adapter.linear_{in,out}.weight
          ...self_attention.adapter_layer.lora_dense_attention_adapter...
          ...mlp.adapter_layer.lora_hto4h_adapter...   ...mlp.adapter_layer.lora_4htoh_adapter...
        (L local to the stage), each rank's slice made as NeMo's
        ParallelLinearAdapter holds it (NVIDIA/NeMo 8cfedd72,
        nemo/collections/nlp/modules/common/megatron/adapters/parallel_adapters.py
        L201-243, with gather_output=False as nemo/collections/llm/peft/lora.py
        L743-763 builds it):
          column-parallel base (kqv, hto4h): linear_in a ColumnParallelLinear
            (in -> r, gather_output=True): rank t holds rows [t*r/tp, (t+1)*r/tp)
            of A; linear_out a ColumnParallelLinear (r -> out): its out rows
          row-parallel base (dense, 4htoh): linear_in a RowParallelLinear
            (input_is_parallel): columns [t*in/tp, ...) of A; linear_out a
            ColumnParallelLinear (gather_output=True): its out rows
        with the fused layouts of Megatron's base layers: linear_qkv's rows are
        the query groups in turn, each [its heads' q; k; v] (head_dim rows a
        head; rank t holds groups [t*g/tp, ...)), linear_fc1's rows on rank t
        are [gate_t; up_t]. expected/ is the PEFT adapter those files stand
        for, as NeMo's own converter makes it at tp 1
        (nemo/export/utils/lora_converter.py: convert_lora_weights_to_canonical
        L85-157 unfuses kqv by q_slice/k_slice/v_slice and hto4h by halves,
        linear_in duplicated; reformat_module_names_to_hf L51-82 names them;
        replace_number_add_offset L29-41 with layer offset num_layers // pp * p
        for stage p, L186): base_model.model.model.layers.L.self_attn.
        {q,k,v,o}_proj and mlp.{gate,up,down}_proj, lora_A = linear_in, lora_B =
        linear_out, r = adapter_dim, lora_alpha = alpha (NeMo scales by
        alpha / adapter_dim: LoRAMerge, lora.py L799). (Its L70 drops
        ".lora_unfused_kqv_proj", which is not in the keys it made, so it leaves
        ".lora_unfused_kqv_adapter." in q/k/v names; PEFT's names, which it
        means, are written here.)
          nemo/tp2        tp 2, 8 heads, 4 query groups, bf16, alpha 8
          nemo/tp2-pp2    tp 2, pp 2, alpha: ${peft.lora_tuning.adapter_dim}
          nemo/base       a Llama of those shapes (f32); tp2/merged-ref.safetensors
                          is it merged with tp2's LoRA the way NeMo merges
                          (on Megatron's fused weights), named back
          nemo/tp4-names2 tp 4, the modules under NeMo 2 / Megatron-Bridge's
                          names (module.decoder.layers.L.self_attention.
                          linear_qkv.adapter.linear_in.weight ...) in the same
                          per-rank files
"""
import json, os, sys
from collections import OrderedDict
import torch
from safetensors.torch import save_file
import transformers

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
P = "base_model.model."
g = torch.Generator().manual_seed(4302)


def rnd(*shape, scale=0.1):
    return torch.randn(*shape, generator=g) * scale


def peft_cfg(**kw):  # make_lora.py's base_cfg
    c = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": None, "r": 4, "lora_alpha": 8,
         "lora_dropout": 0.0, "fan_in_fan_out": False, "bias": "none", "use_rslora": False, "use_dora": False,
         "target_modules": ["q_proj", "v_proj"], "modules_to_save": None, "rank_pattern": {}, "alpha_pattern": {},
         "init_lora_weights": True, "layers_to_transform": None, "layers_pattern": None, "lora_bias": False,
         "target_parameters": None, "exclude_modules": None, "inference_mode": True, "revision": None}
    c.update(kw)
    return c


def make_base(name, model):
    d = os.path.join(out, name)
    model.save_pretrained(d)
    for f in os.listdir(d):
        if f not in ("model.safetensors", "config.json"):
            os.remove(os.path.join(d, f))
    from safetensors.torch import load_file
    return load_file(os.path.join(d, "model.safetensors"))


def write_adapter(name, ad, cfg):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    save_file({k: v.contiguous() for k, v in ad.items()}, os.path.join(d, "adapter_model.safetensors"),
              metadata={"format": "pt"})
    with open(os.path.join(d, "adapter_config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)


def lin(ad, sd, m, r=4, bias=False, dora=False):
    W = sd[m + ".weight"]
    o, i = W.shape
    ad[P + m + ".lora_A.weight"] = rnd(r, i)
    ad[P + m + ".lora_B.weight"] = rnd(o, r)
    if bias:
        ad[P + m + ".lora_B.bias"] = rnd(o)
    if dora:
        ad[P + m + ".lora_magnitude_vector"] = torch.linalg.norm(W.float(), dim=1) * (1 + rnd(o))


torch.manual_seed(4301)
small = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=32, max_position_embeddings=32, tie_word_embeddings=False)

# phi3: fused qkv_proj and gate_up_proj, lm_head saved whole
sd = make_base("phi3", transformers.Phi3ForCausalLM(transformers.Phi3Config(**small, pad_token_id=0)))
ad = {}
for l in range(2):
    for m in ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"):
        lin(ad, sd, f"model.layers.{l}.{m}")
ad[P + "lm_head.weight"] = sd["lm_head.weight"] + rnd(*sd["lm_head.weight"].shape)
write_adapter("phi3/fused", ad, peft_cfg(target_modules=["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
                                         modules_to_save=["lm_head"]))

# qwen2: q/k/v biases: lora_bias and DoRA on the column-parallel q, k, v
sd = make_base("qwen2", transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**small)))
ad = {}
for l in range(2):
    for m in ("q_proj", "k_proj", "v_proj"):
        lin(ad, sd, f"model.layers.{l}.self_attn.{m}", bias=True, dora=True)
write_adapter("qwen2/bias-dora", ad, peft_cfg(target_modules=["q_proj", "k_proj", "v_proj"], lora_bias=True,
                                              use_dora=True))


# ---- NeMo 1.x tensor-parallel LoRA ----
def nemo(name, tp, pp, alpha, alpha_yaml, layers=2, h=16, heads=8, groups=4, ffn=32, r=4, names2=False):
    hd = h // heads
    hpg = heads // groups
    d = os.path.join(out, "nemo", name)
    peft = OrderedDict()
    nemo_sd = OrderedDict()  # global (tp 1) NeMo tensors, bf16
    for l in range(layers):
        L = P + f"model.layers.{l}."
        A_qkv, A_o, A_fc1, A_fc2 = rnd(r, h), rnd(r, h), rnd(r, h), rnd(r, ffn)
        Bq, Bk, Bv, Bo = rnd(heads * hd, r), rnd(groups * hd, r), rnd(groups * hd, r), rnd(h, r)
        Bg, Bu, Bd = rnd(ffn, r), rnd(ffn, r), rnd(h, r)
        # Megatron's interleaved linear_qkv rows: per query group [q heads; k; v]
        rows = []
        for gi in range(groups):
            rows += [Bq[gi * hpg * hd:(gi + 1) * hpg * hd], Bk[gi * hd:(gi + 1) * hd], Bv[gi * hd:(gi + 1) * hd]]
        B_qkv = torch.cat(rows)
        # check against NeMo's own unfusing (lora_converter.py L105-139)
        qkv_total = heads + 2 * groups
        q_slice = torch.cat([torch.arange((hpg + 2) * gi, (hpg + 2) * gi + hpg) for gi in range(groups)])
        k_slice = torch.arange(hpg, qkv_total, hpg + 2)
        v_slice = torch.arange(hpg + 1, qkv_total, hpg + 2)
        for want, sl in ((Bq, q_slice), (Bk, k_slice), (Bv, v_slice)):
            assert torch.equal(B_qkv.reshape(qkv_total, hd, r)[sl].reshape(-1, r), want)
        for m, a, b in (("self_attn.q_proj", A_qkv, Bq), ("self_attn.k_proj", A_qkv, Bk),
                        ("self_attn.v_proj", A_qkv, Bv), ("self_attn.o_proj", A_o, Bo),
                        ("mlp.gate_proj", A_fc1, Bg), ("mlp.up_proj", A_fc1, Bu), ("mlp.down_proj", A_fc2, Bd)):
            peft[L + m + ".lora_A.weight"] = a.bfloat16()
            peft[L + m + ".lora_B.weight"] = b.bfloat16()
        nemo_sd[l] = {"kqv": (A_qkv, B_qkv, "col"), "dense": (A_o, Bo, "row"),
                      "hto4h": (A_fc1, (Bg, Bu), "fc1"), "4htoh": (A_fc2, Bd, "row")}
    where = {"kqv": "self_attention", "dense": "self_attention", "hto4h": "mlp", "4htoh": "mlp"}
    full = {"kqv": "lora_kqv_adapter", "dense": "lora_dense_attention_adapter", "hto4h": "lora_hto4h_adapter",
            "4htoh": "lora_4htoh_adapter"}
    # NeMo 2 / Megatron-Bridge: LoRALinear(to_wrap, adapter) on the base layer
    # (nemo/collections/llm/peft/lora.py L46-64, L767)
    nemo2 = {"kqv": "linear_qkv", "dense": "linear_proj", "hto4h": "linear_fc1", "4htoh": "linear_fc2"}
    per = layers // pp
    for p in range(pp):
        for t in range(tp):
            sd = OrderedDict()
            for ll in range(per):
                l = p * per + ll
                for kind, (A, B, how) in nemo_sd[l].items():
                    k = (f"module.decoder.layers.{ll}.{where[kind]}.{nemo2[kind]}.adapter." if names2 else
                         f"model.decoder.layers.{ll}.{where[kind]}.adapter_layer.{full[kind]}.")
                    if how == "row":  # RowParallelLinear linear_in: columns of A
                        n = A.shape[1] // tp
                        a = A[:, t * n:(t + 1) * n]
                    else:  # ColumnParallelLinear linear_in: rows of A (the rank dim)
                        n = A.shape[0] // tp
                        a = A[t * n:(t + 1) * n]
                    if how == "fc1":  # linear_fc1's rows on rank t: [gate_t; up_t]
                        n = B[0].shape[0] // tp
                        b = torch.cat([B[0][t * n:(t + 1) * n], B[1][t * n:(t + 1) * n]])
                    else:  # ColumnParallelLinear linear_out: rows of B
                        n = B.shape[0] // tp
                        b = B[t * n:(t + 1) * n]
                    sd[k + "linear_in.weight"] = a.bfloat16().clone()
                    sd[k + "linear_out.weight"] = b.bfloat16().clone()
            sub = ("" if tp == 1 and pp == 1 else f"mp_rank_{t:02d}" if pp == 1 else f"tp_rank_{t:02d}_pp_rank_{p:03d}")
            os.makedirs(os.path.join(d, sub), exist_ok=True)
            torch.save(sd, os.path.join(d, sub, "model_weights.ckpt"))
    with open(os.path.join(d, "model_config.yaml"), "w") as f:  # as OmegaConf.to_yaml writes the members read
        f.write(f"""mcore_gpt: true
micro_batch_size: 1
tensor_model_parallel_size: {tp}
pipeline_model_parallel_size: {pp}
encoder_seq_length: 32
max_position_embeddings: 32
num_layers: {layers}
hidden_size: {h}
ffn_hidden_size: {ffn}
num_attention_heads: {heads}
num_query_groups: {groups}
kv_channels: null
activation: fast-swiglu
normalization: rmsnorm
precision: bf16-mixed
peft:
  peft_scheme: lora
  restore_from_path: null
  lora_tuning:
    variant: nemo
    target_modules:
    - attention_qkv
    - attention_dense
    - mlp_fc1
    - mlp_fc2
    adapter_dim: {r}
    alpha: {alpha_yaml}
    adapter_dropout: 0.0
    column_init_method: xavier
    row_init_method: zero
    layer_selection: null
    weight_tying: false
    position_embedding_strategy: null
""")
    e = os.path.join(d, "expected")
    os.makedirs(e, exist_ok=True)
    save_file(peft, os.path.join(e, "adapter_model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(e, "alpha"), "w") as f:
        f.write(f"{alpha}\n")


nemo("tp2", 2, 1, 8, "8")


def seq_matmul(B, A):  # make_lora.py's: the sum over k in order, each step rounded to f32
    acc = torch.zeros(B.shape[0], A.shape[1], dtype=torch.float32)
    for k in range(A.shape[0]):
        acc = acc + B[:, k:k + 1] * A[k:k + 1, :]
    return acc


# nemo/base: a Llama of tp2's shapes, and nemo/tp2/merged-ref.safetensors: it
# merged the way NeMo merges, on Megatron's fused weights (LoRAMerge,
# nemo/collections/llm/peft/lora.py L799: W + alpha / dim * linear_out @
# linear_in, with linear_qkv's rows in query-group order and linear_fc1 =
# [gate; up]), then unfused back to the Hugging Face names.
torch.manual_seed(4303)
bcfg = transformers.LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=8,
                                num_key_value_heads=4, vocab_size=32, max_position_embeddings=32,
                                tie_word_embeddings=False)
sd = make_base("nemo/base", transformers.LlamaForCausalLM(bcfg))
from safetensors.torch import load_file
ad = load_file(os.path.join(out, "nemo/tp2/expected/adapter_model.safetensors"))
heads, groups, hd, r, alpha = 8, 4, 2, 4, 8
hpg = heads // groups
ref = dict(sd)
for l in range(2):
    L, A = f"model.layers.{l}.", lambda m: ad[P + f"model.layers.{l}.{m}.lora_A.weight"].float()
    Bm = lambda m: ad[P + f"model.layers.{l}.{m}.lora_B.weight"].float()
    q, k, v = (sd[L + f"self_attn.{m}_proj.weight"] for m in "qkv")
    Bq, Bk, Bv = Bm("self_attn.q_proj"), Bm("self_attn.k_proj"), Bm("self_attn.v_proj")
    W, Bf, idx = [], [], []
    for gi in range(groups):  # Megatron's linear_qkv: [q heads; k; v] per query group
        W += [q[gi * hpg * hd:(gi + 1) * hpg * hd], k[gi * hd:(gi + 1) * hd], v[gi * hd:(gi + 1) * hd]]
        Bf += [Bq[gi * hpg * hd:(gi + 1) * hpg * hd], Bk[gi * hd:(gi + 1) * hd], Bv[gi * hd:(gi + 1) * hd]]
        idx += [("q", gi * hpg * hd, hpg * hd), ("k", gi * hd, hd), ("v", gi * hd, hd)]
    Wm = torch.cat(W) + seq_matmul(torch.cat(Bf), A("self_attn.q_proj")) * torch.tensor(alpha / r)
    at = 0
    outq = {m: sd[L + f"self_attn.{m}_proj.weight"].clone() for m in "qkv"}
    for m, o, n in idx:
        outq[m][o:o + n] = Wm[at:at + n]
        at += n
    for m in "qkv":
        ref[L + f"self_attn.{m}_proj.weight"] = outq[m]
    fc1 = torch.cat([sd[L + "mlp.gate_proj.weight"], sd[L + "mlp.up_proj.weight"]])
    f1 = fc1 + seq_matmul(torch.cat([Bm("mlp.gate_proj"), Bm("mlp.up_proj")]), A("mlp.gate_proj")) * torch.tensor(alpha / r)
    ref[L + "mlp.gate_proj.weight"], ref[L + "mlp.up_proj.weight"] = f1[:32].clone(), f1[32:].clone()
    for m in ("self_attn.o_proj", "mlp.down_proj"):
        ref[L + m + ".weight"] = sd[L + m + ".weight"] + seq_matmul(Bm(m), A(m)) * torch.tensor(alpha / r)
save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(out, "nemo/tp2/merged-ref.safetensors"))
nemo("tp2-pp2", 2, 2, 4, "${peft.lora_tuning.adapter_dim}")
nemo("tp4-names2", 4, 1, 16, "16", names2=True)
print("done")
