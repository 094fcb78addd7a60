"""Tiny bases, PEFT LoRA adapters and their merged weights, for
tests/lora/lora_test.sh. Run in the forky chroot (torch 2.14, transformers
5.12; PEFT is not in Debian):  python3 make_lora.py OUTDIR, then copy
OUTDIR's llama/ llama-bf16/ gpt2/ hostile/ here (seeded: the same bytes each run).

Bases (transformers from_config, seeded): llama/ (hidden 16, 2 layers, vocab
32, untied lm_head, f32), llama-bf16/ (the same in bf16), gpt2/ (Conv1D
weights [in, out], with biases, f32). Each adapter folder is what PEFT v0.20.0
save_pretrained writes: adapter_config.json + adapter_model.safetensors with
keys base_model.model.<module>.lora_A.weight... (utils/save_and_load.py), and
ref.safetensors: the whole merged model as PEFT's merge_and_unload makes it,
re-implemented below after these lines of PEFT v0.20.0 (tag a5526d27):

  scaling        tuners/lora/layer.py LoraLayer.update_layer / set_scale
                 (L751-753): alpha / r, alpha / sqrt(r) with use_rslora
  r, alpha       tuners/lora/model.py _create_and_replace (L217-220) and
                 utils/other.py get_pattern_key (L1512-1520)
  Linear delta   layer.py Linear.get_delta_weight (L1000-1033):
                 transpose(B @ A, fan_in_fan_out) * scaling
  Linear merge   layer.py Linear.merge (L910-975): W += delta; lora_bias:
                 bias += lora_B.bias * scaling
  Embedding      layer.py Embedding.get_delta_weight (L1320-1346):
                 transpose(B @ A, True) * scaling
  DoRA Linear    tuners/lora/variants.py DoraLinearVariant.merge_safe
                 (L169-186) with dora.py DoraLinearLayer.get_weight_norm
                 (L86-91): n = ||transpose(W, fifo) + transpose(delta, fifo)||
                 over dim 1; W' = transpose((m / n).view(-1, 1), fifo) * (W + delta)
  DoRA Embedding variants.py DoraEmbeddingVariant.merge_safe (L266-283),
                 the layer built with fan_in_fan_out=True: n over the vocab,
                 W' = (m / n).view(1, -1) * (W + delta)

with the two reductions in tpconv's documented order (lib/tpc_lora.h), which
torch leaves to its kernels: B @ A summed over k = 0..r-1 in order, each
product and sum rounded to f32; the norm's squares summed in f64 in index order,
then sqrt, then rounded to f32. Against torch's own matmul / linalg.norm the
difference is printed (ULPs in f32). The bf16 case (llama-bf16/plain) is
PEFT's literal formula (torch's matmul, delta rounded to bf16 and added in
bf16): tpconv rounds once from f32, so it is compared within one bf16 ULP.
hostile/: adapters that must be refused, each with what is wrong.
"""
import json, math, os, shutil, sys
import torch
from safetensors.torch import save_file, load_file
import transformers

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
P = "base_model.model."


def seq_matmul(B, A):
    """B @ A with the sum over k in order, every product and sum rounded to f32."""
    acc = torch.zeros(B.shape[0], A.shape[1], dtype=torch.float32)
    for k in range(A.shape[0]):
        acc = acc + B[:, k:k + 1] * A[k:k + 1, :]
    return acc


def seq_norm_rows(V):
    """||V|| over dim 1: squares summed in f64 in order, sqrt, rounded to f32."""
    return torch.sqrt(torch.cumsum(V.double() ** 2, dim=1)[:, -1]).float()


def T(x, fifo):  # peft.utils.other.transpose
    return x.T if fifo else x


def scaling(cfg, module, w=1.0):
    r, alpha = cfg["r"], cfg["lora_alpha"]
    for k in cfg.get("rank_pattern") or {}:
        import re
        if re.match(rf"(.*\.)?({k})$", module):
            r = cfg["rank_pattern"][k]
            break
    for k in cfg.get("alpha_pattern") or {}:
        import re
        if re.match(rf"(.*\.)?({k})$", module):
            alpha = cfg["alpha_pattern"][k]
            break
    s = w * alpha / math.sqrt(r) if cfg.get("use_rslora") else w * alpha / r
    return r, s


def f32s(s):  # torch multiplies an f32 tensor by a Python float as f32(s)
    return torch.tensor(s, dtype=torch.float32)


def merge(sd, ad, cfg, w=1.0, torch_ops=False):
    """PEFT's merge_and_unload of adapter state dict `ad` into f32 state dict sd."""
    sd = dict(sd)
    mods = sorted({k[len(P):].rsplit(".lora_", 1)[0] for k in ad if ".lora_" in k})
    mm = (lambda b, a: b @ a) if torch_ops else seq_matmul
    for m in mods:
        _, s = scaling(cfg, m, w)
        W = sd[m + ".weight"].float()
        emb = P + m + ".lora_embedding_A" in ad
        if emb:
            A, B = ad[P + m + ".lora_embedding_A"].float(), ad[P + m + ".lora_embedding_B"].float()
            d = T(mm(B, A), True) * f32s(s)
            assert torch.equal(d, T(mm(B, A), True) * s)
            fifo = True
        else:
            A, B = ad[P + m + ".lora_A.weight"].float(), ad[P + m + ".lora_B.weight"].float()
            fifo = bool(cfg.get("fan_in_fan_out"))
            d = T(mm(B, A), fifo) * f32s(s)
        mk = P + m + ".lora_magnitude_vector"
        if mk in ad:
            mag = ad[mk].float()
            if emb:
                V = W.T + d.T  # get_weight_norm(W, delta.T, 1): weight = transpose(W, True)
                n = torch.linalg.norm(V, dim=1) if torch_ops else seq_norm_rows(V)
                W = (mag / n).view(1, -1) * (W + d)
            else:
                V = T(W, fifo) + T(d, fifo)
                n = torch.linalg.norm(V, dim=1) if torch_ops else seq_norm_rows(V)
                W = T((mag / n).view(-1, 1), fifo) * (W + d)
        else:
            W = W + d
        sd[m + ".weight"] = W
        bk = P + m + ".lora_B.bias"
        if bk in ad:
            sd[m + ".bias"] = sd[m + ".bias"].float() + ad[bk].float() * f32s(s)
    for k in ad:  # modules_to_save: the whole tensor
        if ".lora_" not in k:
            sd[k[len(P):]] = ad[k].float()
    return sd


def ulps(a, b):
    ia = a.contiguous().view(torch.int32).long()
    ib = b.contiguous().view(torch.int32).long()
    ia = torch.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = torch.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return int((ia - ib).abs().max()) if a.numel() else 0


def base_cfg(**kw):
    c = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": None, "r": 4, "lora_alpha": 8,
         "lora_dropout": 0.0, "fan_in_fan_out": False, "bias": "none", "use_rslora": False, "use_dora": False,
         "target_modules": ["q_proj", "v_proj"], "modules_to_save": None, "rank_pattern": {}, "alpha_pattern": {},
         "init_lora_weights": True, "layers_to_transform": None, "layers_pattern": None, "lora_bias": False,
         "target_parameters": None, "exclude_modules": None, "inference_mode": True, "revision": None}
    c.update(kw)
    return c


g = torch.Generator().manual_seed(43)


def rnd(*shape, scale=0.1):
    return torch.randn(*shape, generator=g) * scale


def make_base(name, model, dtype=torch.float32):
    d = os.path.join(out, name)
    model.to(dtype).save_pretrained(d)
    for f in os.listdir(d):
        if f not in ("model.safetensors", "config.json"):
            os.remove(os.path.join(d, f))
    return load_file(os.path.join(d, "model.safetensors"))


def lin_adapter(sd, cfg, modules, dora=False, bias=False):
    ad = {}
    for m in modules:
        r, _ = scaling(cfg, m)
        W = sd[m + ".weight"]
        fifo = cfg["fan_in_fan_out"]
        o, i = (W.shape[1], W.shape[0]) if fifo else W.shape
        ad[P + m + ".lora_A.weight"] = rnd(r, i)
        ad[P + m + ".lora_B.weight"] = rnd(o, r)
        if bias:
            ad[P + m + ".lora_B.bias"] = rnd(o)
        if dora:
            n = torch.linalg.norm(T(W.float(), fifo), dim=1)
            ad[P + m + ".lora_magnitude_vector"] = n * (1 + rnd(o))
    return ad


def write_adapter(name, ad, cfg, ref=None):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    save_file({k: v.contiguous() for k, v in ad.items()}, os.path.join(d, "adapter_model.safetensors"),
              metadata={"format": "pt"})
    with open(os.path.join(d, "adapter_config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    if ref is not None:
        save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(d, "ref.safetensors"))


def report(name, sd, ad, cfg, w=1.0, ref=None):
    ours = merge(sd, ad, cfg, w) if ref is None else ref
    theirs = merge(sd, ad, cfg, w, torch_ops=True)
    worst = max(ulps(ours[k], theirs[k]) for k in ours if ours[k].dtype == torch.float32)
    print(f"{name}: against torch's own matmul/linalg.norm at most {worst} f32 ULPs apart")
    return ours


llama_cfg = transformers.LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, vocab_size=32,
                                     max_position_embeddings=32, tie_word_embeddings=False)
torch.manual_seed(43)
llama = transformers.LlamaForCausalLM(llama_cfg)
with torch.no_grad():  # norms away from 1 so that a wrong row shows
    for n, p in llama.named_parameters():
        if "norm" in n:
            p.copy_(1 + rnd(*p.shape))
sd = make_base("llama", llama)
L = [f"model.layers.{i}.self_attn.{p}" for i in range(2) for p in ("q_proj", "v_proj")]

# plain: target_modules a list
c = base_cfg()
ad = lin_adapter(sd, c, L)
write_adapter("llama/plain", ad, c, report("plain", sd, ad, c))
plain_ad, plain_c = ad, c

# rsLoRA, target_modules a regex (re.fullmatch), one module excluded
c = base_cfg(use_rslora=True, lora_alpha=16, target_modules=r".*\.(k_proj|o_proj)",
             exclude_modules=["model.layers.1.self_attn.o_proj"])
mods = ["model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.o_proj", "model.layers.1.self_attn.k_proj"]
ad = lin_adapter(sd, c, mods)
write_adapter("llama/rslora", ad, c, report("rslora", sd, ad, c))
rs_ad, rs_c = ad, c

# DoRA on q/v and the MLP's down_proj (rows' norms)
c = base_cfg(use_dora=True, target_modules=["q_proj", "v_proj", "down_proj"])
ad = lin_adapter(sd, c, L + ["model.layers.0.mlp.down_proj"], dora=True)
write_adapter("llama/dora", ad, c, report("dora", sd, ad, c))

# rank_pattern / alpha_pattern (get_pattern_key: the first matching key)
c = base_cfg(target_modules=["q_proj", "v_proj", "gate_proj"],
             rank_pattern={"q_proj": 2, "layers.1.self_attn.v_proj": 6, "v_proj": 3},
             alpha_pattern={"gate_proj": 5, "model.layers.0.self_attn.q_proj": 3})
ad = lin_adapter(sd, c, L + ["model.layers.1.mlp.gate_proj"])
write_adapter("llama/rank-pattern", ad, c, report("rank-pattern", sd, ad, c))

# LoRA on the embedding, lm_head in modules_to_save
c = base_cfg(target_modules=["embed_tokens"], modules_to_save=["lm_head"])
ad = {P + "model.embed_tokens.lora_embedding_A": rnd(4, 32), P + "model.embed_tokens.lora_embedding_B": rnd(16, 4),
      P + "lm_head.weight": rnd(32, 16)}
write_adapter("llama/embedding", ad, c, report("embedding", sd, ad, c))
emb_ad, emb_c = ad, c

# DoRA on the embedding (norms over the vocab)
c = base_cfg(target_modules=["embed_tokens", "q_proj"], use_dora=True)
W = sd["model.embed_tokens.weight"]
ad = {P + "model.embed_tokens.lora_embedding_A": rnd(4, 32), P + "model.embed_tokens.lora_embedding_B": rnd(16, 4),
      P + "model.embed_tokens.lora_magnitude_vector": torch.linalg.norm(W.T, dim=1) * (1 + rnd(16))}
ad.update(lin_adapter(sd, c, ["model.layers.1.self_attn.q_proj"], dora=True))
write_adapter("llama/embedding-dora", ad, c, report("embedding-dora", sd, ad, c))

# two adapters in one pass, weights 0.5 and 1.5: the second over the first's merge
m1 = merge(sd, plain_ad, plain_c, 0.5)
ref = merge(m1, rs_ad, rs_c, 1.5)
t1 = merge(merge(sd, plain_ad, plain_c, 0.5, True), rs_ad, rs_c, 1.5, True)
print("multi: against torch's own ops at most %d f32 ULPs apart" % max(ulps(ref[k], t1[k]) for k in ref))
save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(out, "llama", "multi-ref.safetensors"))

# bf16 base and adapter: PEFT's literal formula (cast_to_fp32 on CPU, delta
# rounded to bf16, added in bf16)
sdb = make_base("llama-bf16", llama, torch.bfloat16)
c = base_cfg()
adb = {k: v.bfloat16() for k, v in plain_ad.items()}
ref = dict(sdb)
for m in L:
    A, B = adb[P + m + ".lora_A.weight"].float(), adb[P + m + ".lora_B.weight"].float()
    d = ((B @ A) * scaling(c, m)[1]).to(torch.bfloat16)
    ref[m + ".weight"] = sdb[m + ".weight"] + d
ours = merge({k: v.float() for k, v in sdb.items()}, adb, c)
once = {k: v.bfloat16() for k, v in ours.items()}
# PEFT rounds the delta to bf16 before adding: |ours - PEFT's| <= one bf16
# ULP of the result + half a bf16 ULP of the delta (<= 2^-8 |delta|)
dmax = 0.0
for m in L:
    A, B = adb[P + m + ".lora_A.weight"].float(), adb[P + m + ".lora_B.weight"].float()
    dmax = max(dmax, float(((B @ A) * scaling(c, m)[1]).abs().max()))
tol = dmax * 2.0 ** -8
worst = 0
for m in L:
    a = once[m + ".weight"]
    b = ref[m + ".weight"]
    far = (a.float() - b.float()).abs() > tol
    nxt = torch.nextafter(b.float().bfloat16().float(), torch.full_like(b.float(), float("inf")))
    ulp = (b.float().bfloat16().float() - torch.nextafter(b, torch.zeros_like(b)).float()).abs()
    worst = max(worst, int(((a.float() - b.float()).abs() > torch.maximum(ulp, (nxt - b.float()).abs()) + tol).sum()))
print(f"bf16: {worst} elements further from PEFT's than one bf16 ULP + {tol:.3g} (2^-8 of the largest delta)")
assert worst == 0
with open(os.path.join(out, "llama-bf16", "tol"), "w") as f:
    f.write("%.9g\n" % tol)
write_adapter("llama-bf16/plain", adb, c, ref)
save_file({k: v.contiguous() for k, v in once.items()}, os.path.join(out, "llama-bf16", "plain", "ref-once.safetensors"))

# GPT-2: Conv1D weights [in, out], fan_in_fan_out, lora_bias; c_attn is
# [16, 48], c_proj [16, 16] (square: the config's fan_in_fan_out decides)
gcfg = transformers.GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=32, n_positions=16)
torch.manual_seed(44)
gpt2 = transformers.GPT2LMHeadModel(gcfg)
with torch.no_grad():
    for n, p in gpt2.named_parameters():
        if n.endswith("bias"):
            p.copy_(rnd(*p.shape))
sdg = make_base("gpt2", gpt2)
G = ["transformer.h.0.attn.c_attn", "transformer.h.0.attn.c_proj", "transformer.h.0.mlp.c_fc"]
c = base_cfg(fan_in_fan_out=True, target_modules=["c_attn", "c_proj", "c_fc"], lora_bias=True)
ad = lin_adapter(sdg, c, G, bias=True)
write_adapter("gpt2/conv1d", ad, c, report("conv1d", sdg, ad, c))
c = base_cfg(fan_in_fan_out=True, target_modules=["c_attn", "c_proj"], use_dora=True)
ad = lin_adapter(sdg, c, G[:2], dora=True)
write_adapter("gpt2/conv1d-dora", ad, c, report("conv1d-dora", sdg, ad, c))

# hostile adapters: (folder, tensors, config); the test holds their messages
H = os.path.join(out, "hostile")
q0 = "model.layers.0.self_attn.q_proj"
hostile = {
    "no-base": ({P + "model.layers.7.self_attn.q_proj.lora_A.weight": rnd(4, 16),
                 P + "model.layers.7.self_attn.q_proj.lora_B.weight": rnd(16, 4)}, base_cfg()),
    "shape": ({P + q0 + ".lora_A.weight": rnd(4, 12), P + q0 + ".lora_B.weight": rnd(16, 4)}, base_cfg()),
    "only-a": ({P + q0 + ".lora_A.weight": rnd(4, 16)}, base_cfg()),
    "named-adapter": ({P + q0 + ".lora_A.default.weight": rnd(4, 16),
                       P + q0 + ".lora_B.default.weight": rnd(16, 4)}, base_cfg()),
    "norm-1d": ({P + "model.norm.lora_A.weight": rnd(4, 16), P + "model.norm.lora_B.weight": rnd(16, 4)},
                base_cfg(target_modules=["norm"])),
}
for name, (t, cfg) in hostile.items():
    d = os.path.join(H, name)
    os.makedirs(d, exist_ok=True)
    save_file(t, os.path.join(d, "adapter_model.safetensors"))
    with open(os.path.join(d, "adapter_config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
print("wrote", out)
