"""Tiny mixture-of-experts bases, PEFT LoRA adapters on their experts and the
merged weights, for tests/lora/lora_moe_test.sh. Run in the forky chroot
(torch 2.14, transformers 5.12; PEFT is not in Debian):
python3 make_lora_moe.py OUTDIR, then copy OUTDIR/moe here, less its
generation_config.json files (seeded: the same
bytes each run).

Bases (transformers from_config, seeded, f32, saved by save_pretrained):
  gptoss/   GptOssForCausalLM: experts fused on disk, mlp.experts.gate_up_proj
            [E, H, 2I] and down_proj [E, I, H] (GptOssExperts is_transposed);
            H = I, so down_proj's experts are square
  granite/  GraniteMoeForCausalLM: block_sparse_moe.input_linear.weight
            [E, 2I, H], output_linear.weight [E, H, I] ([E, out, in])
  mixtral/  MixtralForCausalLM, saved by transformers 5.12 one expert a
            tensor (block_sparse_moe.experts.N.w1/w2/w3.weight)

Adapters, as PEFT saves them (utils/save_and_load.py: keys
base_model.model.<module>.lora_A.weight ...):
  gptoss/params    target_parameters mlp.experts.gate_up_proj and
                   mlp.experts.down_proj (LoRA on the 3-D parameters: PEFT's
                   ParamWrapper), target_modules q_proj, a rank_pattern for
                   gate_up_proj. Two parameters of one module: the wrappers
                   nest, the first registered (gate_up_proj) inside, its keys
                   ...experts.base_layer.lora_A.weight, the outer's
                   ...experts.lora_A.weight (tuners_utils.py
                   _inject_parameters; peft's
                   utils/transformers_weight_conversion.py says the same:
                   "the gate_up_proj is the innner PEFT ParamWrapper")
  granite/params   target_parameters block_sparse_moe.input_linear.weight,
                   output_linear.weight and the 2-D self_attn.o_proj.weight
                   (num_experts 1: a plain Linear's delta)
  mixtral/experts  target_modules q_proj, gate (the router), w1, w2, w3: one
                   LoRA per expert's linear layer (a plain Linear each)
  gptoss-mxfp4     target_parameters on tests/quant/fp4/gptoss-mxfp4's MXFP4
                   experts (no ref.safetensors: see below)
  qwen3moe/params  the same on Qwen3-MoE (experts.N.gate_proj/up_proj/down_proj)
  mixtral/params   target_parameters mlp.experts.gate_up_proj and down_proj
                   (transformers 5's fused MixtralExperts) into the base that
                   keeps one tensor an expert (below)

ref.safetensors is the whole merged model as PEFT's merge_and_unload makes
it, re-implemented after PEFT main at 5d602fdb
(src/peft/tuners/lora/layer.py):
  shapes   ParamWrapper._get_in_out_features (L2301-2322): a 3-D parameter
           is (E, in, out), then update_layer (L2346-2351) swaps in and out
           unless the experts module is_transposed: [E, out, in] for
           transformers' fused experts (Granite), [E, in, out] for gpt-oss;
           lora_A = Linear(in, r * E), lora_B = Linear(r * E, out)
           (L2366-2367): A [r * E, in], B [out, r * E]
  delta    ParamWrapper.get_delta_weight (L2436-2462): A.reshape(E, r, in),
           B.reshape(out, r, E) (rank k of expert e is B's column k * E + e),
           einsum "o r e, e r i -> e i o" (is_transposed) or "-> e o i",
           times scaling; num_experts 1: Linear.get_delta_weight
  merge    ParamWrapper.merge (L2524-2560): param += delta
  scaling  update_layer (L2369-2372): alpha / r, alpha / sqrt(r) with
           use_rslora, r and alpha from rank_pattern / alpha_pattern by the
           parameter's full name (model.py _create_and_replace L233-236)
with the sum over the rank in order, each product and sum rounded to f32
(lib/tpc_lora.h); against torch's own einsum the difference is printed.
"""
import json, math, os, re, sys
import torch
from safetensors.torch import save_file
import transformers

out = os.path.join(sys.argv[1], "moe")
os.makedirs(out, exist_ok=True)
P = "base_model.model."


def seq_matmul(B, A):  # as make_lora.py: the sum over k in order, in f32
    acc = torch.zeros(B.shape[0], A.shape[1], dtype=torch.float32)
    for k in range(A.shape[0]):
        acc = acc + B[:, k:k + 1] * A[k:k + 1, :]
    return acc


def f32s(s):  # torch multiplies an f32 tensor by a Python float as f32(s)
    return torch.tensor(s, dtype=torch.float32)


def ulps(a, b):
    ia, ib = a.contiguous().view(torch.int32).long(), b.contiguous().view(torch.int32).long()
    ia = torch.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = torch.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return int((ia - ib).abs().max()) if a.numel() else 0


def r_alpha(cfg, key):  # utils/other.py get_pattern_key, first match in order
    r, alpha = cfg["r"], cfg["lora_alpha"]
    for k, v in (cfg.get("rank_pattern") or {}).items():
        if re.match(rf"(.*\.)?({k})$", key):
            r = v
            break
    for k, v in (cfg.get("alpha_pattern") or {}).items():
        if re.match(rf"(.*\.)?({k})$", key):
            alpha = v
            break
    return r, (alpha / math.sqrt(r) if cfg.get("use_rslora") else alpha / r)


def rnd(*shape, scale=0.1):
    return torch.randn(*shape) * scale


def param_delta(W, A, B, r, s, transposed, literal=False):
    """ParamWrapper.get_delta_weight for a 3-D parameter W [E, d1, d2]."""
    E = W.shape[0]
    if literal:
        a3, b3 = A.reshape(E, -1, A.shape[-1]), B.reshape(B.shape[0], -1, E)
        eq = "o r e, e r i -> e i o" if transposed else "o r e, e r i -> e o i"
        return torch.einsum(eq, b3, a3) * s
    d = []
    for e in range(E):
        Ae = A[e * r:(e + 1) * r, :]        # A.reshape(E, r, in)[e]
        Be = B[:, [k * E + e for k in range(r)]]  # B.reshape(out, r, E)[:, :, e]
        de = seq_matmul(Be, Ae) * f32s(s)   # [out, in]
        d.append(de.T if transposed else de)
    return torch.stack(d)


def base(name, cfg, cls):
    torch.manual_seed(0)
    m = cls(cfg)
    m.save_pretrained(os.path.join(out, name), safe_serialization=True)
    from safetensors.torch import load_file
    return load_file(os.path.join(out, name, "model.safetensors"))


def lora_cfg(**kw):
    c = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2, "lora_alpha": 4, "lora_dropout": 0.0,
         "bias": "none", "fan_in_fan_out": False, "use_rslora": False, "use_dora": False, "lora_bias": False,
         "init_lora_weights": True, "rank_pattern": {}, "alpha_pattern": {}, "modules_to_save": None,
         "target_modules": None, "target_parameters": None, "exclude_modules": None, "layers_to_transform": None,
         "layers_pattern": None, "revision": None, "inference_mode": True, "base_model_name_or_path": None,
         "peft_version": "0.20.0"}
    c.update(kw)
    return c


def write(name, ad, cfg, ref):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    save_file({k: v.contiguous() for k, v in ad.items()}, os.path.join(d, "adapter_model.safetensors"),
              metadata={"format": "pt"})
    json.dump(cfg, open(os.path.join(d, "adapter_config.json"), "w"), indent=2, sort_keys=True)
    if ref is not None:
        save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(d, "ref.safetensors"))


def linear(sd, ad, ref, cfg, module, w_key=None):
    """A plain Linear's LoRA (layer.py Linear.get_delta_weight / merge)."""
    W = sd[w_key or module + ".weight"]
    r, s = r_alpha(cfg, w_key or module)
    A, B = rnd(r, W.shape[1]), rnd(W.shape[0], r)
    ad[P + module + ".lora_A.weight"], ad[P + module + ".lora_B.weight"] = A, B
    ref[w_key or module + ".weight"] = W + seq_matmul(B, A) * f32s(s)


def param3(sd, ad, ref, cfg, module_key, pkey, transposed, worst):
    W = sd[pkey]
    E, d1, d2 = W.shape
    inn, o = (d1, d2) if transposed else (d2, d1)
    r, s = r_alpha(cfg, pkey)
    A, B = rnd(E * r, inn), rnd(o, r * E)
    ad[P + module_key + ".lora_A.weight"], ad[P + module_key + ".lora_B.weight"] = A, B
    d = param_delta(W, A, B, r, s, transposed)
    ref[pkey] = W + d
    worst.append(ulps(ref[pkey], W + param_delta(W, A, B, r, s, transposed, literal=True)))


T = transformers
torch.manual_seed(1)

# gpt-oss: fused, is_transposed; H = I = 16: gate_up [4, 16, 32], down [4, 16, 16]
sd = base("gptoss", T.GptOssConfig(vocab_size=32, hidden_size=16, intermediate_size=16, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1, head_dim=8, num_local_experts=4,
                                   num_experts_per_tok=2, layer_types=["full_attention"] * 2), T.GptOssForCausalLM)
torch.manual_seed(2)
cfg = lora_cfg(target_modules=["q_proj"], target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"],
               rank_pattern={r".*\.gate_up_proj": 3})
ad, ref, worst = {}, dict(sd), []
for L in range(2):
    linear(sd, ad, ref, cfg, f"model.layers.{L}.self_attn.q_proj")
    ex = f"model.layers.{L}.mlp.experts"
    param3(sd, ad, ref, cfg, ex + ".base_layer", ex + ".gate_up_proj", True, worst)
    param3(sd, ad, ref, cfg, ex, ex + ".down_proj", True, worst)
write("gptoss/params", ad, cfg, ref)
print("gptoss/params: against PEFT's einsum at most %d f32 ULPs apart" % max(worst))

# Granite-MoE: [E, out, in]; intermediate 4: input_linear [4, 8, 16], output_linear [4, 16, 4]
sd = base("granite", T.GraniteMoeConfig(vocab_size=32, hidden_size=16, intermediate_size=4, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=1, num_local_experts=4,
                                        num_experts_per_tok=2), T.GraniteMoeForCausalLM)
torch.manual_seed(3)
cfg = lora_cfg(target_modules=[], use_rslora=True, r=2, lora_alpha=3,
               target_parameters=["block_sparse_moe.input_linear.weight", "block_sparse_moe.output_linear.weight",
                                  "self_attn.o_proj.weight"])
ad, ref, worst = {}, dict(sd), []
for L in range(2):
    pre = f"model.layers.{L}."
    for lin in ("input_linear", "output_linear"):
        m = pre + "block_sparse_moe." + lin
        param3(sd, ad, ref, cfg, m, m + ".weight", False, worst)
    linear(sd, ad, ref, cfg, pre + "self_attn.o_proj", pre + "self_attn.o_proj.weight")
write("granite/params", ad, cfg, ref)
print("granite/params: against PEFT's einsum at most %d f32 ULPs apart" % max(worst))

# Mixtral, one tensor an expert on disk: a LoRA on each expert's w1/w2/w3
sd = base("mixtral", T.MixtralConfig(vocab_size=32, hidden_size=16, intermediate_size=8, num_hidden_layers=2,
                                     num_attention_heads=2, num_key_value_heads=1, num_local_experts=4,
                                     num_experts_per_tok=2), T.MixtralForCausalLM)
torch.manual_seed(4)
cfg = lora_cfg(target_modules=["q_proj", "gate", "w1", "w2", "w3"])
ad, ref = {}, dict(sd)
for L in range(2):
    pre = f"model.layers.{L}."
    linear(sd, ad, ref, cfg, pre + "self_attn.q_proj")
    linear(sd, ad, ref, cfg, pre + "block_sparse_moe.gate")
    for e in range(4):
        for w in ("w1", "w2", "w3"):
            linear(sd, ad, ref, cfg, pre + f"block_sparse_moe.experts.{e}.{w}")
write("mixtral/experts", ad, cfg, ref)
print("mixtral/experts: written")

# Mixtral's adapter trained on transformers 5, whose MixtralExperts fuse the
# experts (conversion_mapping.py "mixtral": w1 and w3 of each expert
# concatenated into mlp.experts.gate_up_proj [E, 2I, H], w2 stacked into
# down_proj [E, H, I], not is_transposed): target_parameters on the fused
# parameters, with the rank_pattern / alpha_pattern PEFT's
# _convert_peft_config_moe gives gate_up_proj (r and alpha doubled), and the
# router; the base on disk keeps one tensor an expert, so the merged fused
# delta lands in w1 (rows 0 .. I-1), w3 (rows I ..) and w2 of each expert
torch.manual_seed(5)
cfg = lora_cfg(target_modules=["q_proj"],
               target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj", "mlp.gate.weight"],
               rank_pattern={r".*\.gate_up_proj": 4}, alpha_pattern={r".*\.gate_up_proj": 8})
ad, ref, worst = {}, dict(sd), []
I = 8
for L in range(2):
    pre = f"model.layers.{L}."
    linear(sd, ad, ref, cfg, pre + "self_attn.q_proj")
    # the router, transformers 5's mlp.gate (block_sparse_moe.gate renamed;
    # PEFT's _MOE_TARGET_MODULE_MAPPING "gate" -> "gate.weight"): a 2-D
    # parameter, a Linear's delta
    linear(sd, ad, ref, cfg, pre + "mlp.gate", pre + "block_sparse_moe.gate.weight")
    bs = pre + "block_sparse_moe.experts."
    ex = pre + "mlp.experts"
    fused = {
        ex + ".gate_up_proj": torch.stack([torch.cat([sd[bs + f"{e}.w1.weight"], sd[bs + f"{e}.w3.weight"]]) for e in range(4)]),
        ex + ".down_proj": torch.stack([sd[bs + f"{e}.w2.weight"] for e in range(4)]),
    }
    fref = {}
    param3(fused, ad, fref, cfg, ex + ".base_layer", ex + ".gate_up_proj", False, worst)
    param3(fused, ad, fref, cfg, ex, ex + ".down_proj", False, worst)
    for e in range(4):
        ref[bs + f"{e}.w1.weight"] = fref[ex + ".gate_up_proj"][e, :I].clone()
        ref[bs + f"{e}.w3.weight"] = fref[ex + ".gate_up_proj"][e, I:].clone()
        ref[bs + f"{e}.w2.weight"] = fref[ex + ".down_proj"][e].clone()
write("mixtral/params", ad, cfg, ref)
print("mixtral/params: against PEFT's einsum at most %d f32 ULPs apart" % max(worst))

# an adapter for tests/quant/fp4/gptoss-mxfp4 (gpt-oss's MXFP4 experts: hidden
# 32, intermediate 32, 4 experts, 2 layers): the test merges it into the
# base dequantized while read and compares with a merge into the base's
# dequantized copy (no ref: the base's values are tpconv's MXFP4 decoding)
torch.manual_seed(6)
cfg = lora_cfg(target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"])
ad = {}
for L in range(2):
    ex = f"model.layers.{L}.mlp.experts"
    ad[P + ex + ".base_layer.lora_A.weight"], ad[P + ex + ".base_layer.lora_B.weight"] = rnd(4 * 2, 32), rnd(64, 2 * 4)
    ad[P + ex + ".lora_A.weight"], ad[P + ex + ".lora_B.weight"] = rnd(4 * 2, 32), rnd(32, 2 * 4)
write("gptoss-mxfp4", ad, cfg, None)
print("gptoss-mxfp4: written")

# Qwen3-MoE, one tensor an expert on disk (mlp.experts.N.gate_proj/up_proj/
# down_proj), its adapter made on transformers 5's fused experts
# (conversion_mapping.py "qwen2_moe", also qwen3_moe's: gate_proj then
# up_proj concatenated into mlp.experts.gate_up_proj)
sd = base("qwen3moe", T.Qwen3MoeConfig(vocab_size=32, hidden_size=16, intermediate_size=24, moe_intermediate_size=8,
                                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                                      num_experts=4, num_experts_per_tok=2, decoder_sparse_step=1), T.Qwen3MoeForCausalLM)
torch.manual_seed(7)
cfg = lora_cfg(target_modules=["o_proj"], target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"])
ad, ref, worst = {}, dict(sd), []
I = 8
for L in range(2):
    pre = f"model.layers.{L}."
    linear(sd, ad, ref, cfg, pre + "self_attn.o_proj")
    bs, ex = pre + "mlp.experts.", pre + "mlp.experts"
    fused = {
        ex + ".gate_up_proj": torch.stack([torch.cat([sd[bs + f"{e}.gate_proj.weight"], sd[bs + f"{e}.up_proj.weight"]]) for e in range(4)]),
        ex + ".down_proj": torch.stack([sd[bs + f"{e}.down_proj.weight"] for e in range(4)]),
    }
    fref = {}
    param3(fused, ad, fref, cfg, ex + ".base_layer", ex + ".gate_up_proj", False, worst)
    param3(fused, ad, fref, cfg, ex, ex + ".down_proj", False, worst)
    for e in range(4):
        ref[bs + f"{e}.gate_proj.weight"] = fref[ex + ".gate_up_proj"][e, :I].clone()
        ref[bs + f"{e}.up_proj.weight"] = fref[ex + ".gate_up_proj"][e, I:].clone()
        ref[bs + f"{e}.down_proj.weight"] = fref[ex + ".down_proj"][e].clone()
write("qwen3moe/params", ad, cfg, ref)
print("qwen3moe/params: against PEFT's einsum at most %d f32 ULPs apart" % max(worst))
