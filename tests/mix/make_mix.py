"""Tiny models, mergekit recipes and their merged weights, for
tests/mix/mix_test.sh. Run with Debian's torch (/usr/bin/python3, torch 1.13):
  /usr/bin/python3 make_mix.py OUTDIR   (seeded: the same bytes each run)
then copy OUTDIR/* here.

Models: base, m1, m2, m3 (f32; m_k = base + 0.05 * noise, one norm of m1
nearly the base's so that SLERP falls back to lerp there), b-base, b1, b2
(the same in bf16), and two hostile ones: m-missing (a tensor left out),
m-shape (a tensor of another shape). Recipes *.yaml are mergekit configs
(mergekit commit a6e40288, mergekit/config.py); ref-<recipe>.safetensors is
the merge re-implemented below after these lines of mergekit a6e40288:

  parameters     config.py evaluate_setting L26-52 (gradients L32-38, filters
                 L42-49), ConfigReader.parameter L204-250 (a model's first);
                 plan.py L285-288: t = layer / (layers - 1)
  linear         merge_methods/linear.py LinearMergeTask.execute L35-57
  task vectors   merge_methods/generalized_task_arithmetic.py GTATask.execute
                 L119-184, get_task_vectors L190-227, get_mask L230-254;
                 registry.py L29-64 (each method's defaults)
  sparsify       sparsify.py magnitude L56-74, bernoulli L119-135,
                 rescaled_masked_tensor L23-53
  slerp          merge_methods/slerp.py slerp L100-157, normalize L166-170
  breadcrumbs    sparsify.py magnitude_outliers L77-116; gamma: GTA
                 tensor_parameters (0.01); registry.py L65-82
  della          sparsify.py della_magprune L138-176; epsilon: GTA
                 tensor_parameters L70-77 (0.15); registry.py L83-100
  model_stock    merge_methods/model_stock.py execute L33-85 (filter_wise: L50-56)
  passthrough    plan.py plan_module L300-331, plan_slice L267-298;
                 merge_methods/passthrough.py (scale)

and tpconv's documented definitions (lib/tpc_mix.h) where mergekit leaves the
bits to torch or its generator: the magnitude mask keeps |delta| >= the k-th
largest (argsort's choice among ties replaced); DARE's mask is splitmix64 of
(seed, tensor, model, element), not torch.bernoulli; whole-tensor sums (L1
norms, SLERP's norms and dot) in f64, rounded to f32 once; SLERP's angle and
coefficients in f64, the coefficients rounded to f32; breadcrumbs' mask by two thresholds (ties at
the upper dropped; n_top 0 drops none, where mergekit's slice drops all);
DELLA's ranks stable among equal magnitudes, its draw DARE's generator with
the per-element probability; Model Stock's norms and dots f64 sums rounded
once, the cosines' mean summed in pair order.
"""
import json, os, struct, sys
import numpy as np
import torch
import yaml

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
ST = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.int64: "I64"}


def save(path, tensors):
    """a safetensors file (Debian has no safetensors module): header, then data"""
    hdr, blobs, off = {}, [], 0
    for k, t in tensors.items():
        t = t.contiguous()
        b = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        hdr[k] = {"dtype": ST[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(out, path), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


L = 3
SHAPES = {"model.embed_tokens.weight": (32, 16)}
for i in range(L):
    p = f"model.layers.{i}."
    SHAPES[p + "self_attn.q_proj.weight"] = (16, 16)
    SHAPES[p + "mlp.up_proj.weight"] = (24, 16)
    SHAPES[p + "input_layernorm.weight"] = (16,)
SHAPES["model.norm.weight"] = (16,)
SHAPES["lm_head.weight"] = (32, 16)

g = torch.Generator().manual_seed(43)
base = {k: torch.randn(s, generator=g) for k, s in SHAPES.items()}
base["model.rotary.inv_freq_steps"] = torch.arange(8, dtype=torch.int64)  # an integer buffer: kept


def tuned(scale):
    m = {k: (v + scale * torch.randn(v.shape, generator=g) if v.is_floating_point() else v.clone()) for k, v in base.items()}
    return m


models = {"base": base, "m1": tuned(0.05), "m2": tuned(0.05), "m3": tuned(0.08)}
models["m1"]["model.norm.weight"] = base["model.norm.weight"] + 1e-4 * torch.randn(16, generator=g)
# a tensor left alone by m2 (its delta zero) and SLERP's far one (a random q_proj)
models["m2"]["model.layers.1.input_layernorm.weight"] = base["model.layers.1.input_layernorm.weight"].clone()
models["m1"]["model.layers.2.self_attn.q_proj.weight"] = torch.randn(16, 16, generator=g)
for n, m in models.items():
    save(n + ".safetensors", m)
bmodels = {"b-base": models["base"], "b1": models["m1"], "b2": models["m2"]}
bmodels = {n: {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in m.items()} for n, m in bmodels.items()}
for n, m in bmodels.items():
    save(n + ".safetensors", m)
# tied embeddings (torch.save keeps one storage for lm_head and embed_tokens)
tmodels = {}
for n in ("base", "m1", "m2"):
    m = dict(models[n])
    m["lm_head.weight"] = m["model.embed_tokens.weight"]
    tmodels[n + "-tied"] = m
    torch.save(m, os.path.join(out, n + "-tied.bin"))
hm = dict(models["m2"])
del hm["model.layers.1.mlp.up_proj.weight"]
save("m-missing.safetensors", hm)
hs = dict(models["m2"])
hs["lm_head.weight"] = torch.randn(33, 16, generator=g)
save("m-shape.safetensors", hs)


def load(n):
    return {**models, **bmodels, **tmodels}[n.replace(".safetensors", "").replace(".bin", "")]


# ---- parameters (config.py) ----

def layer_t(name):
    for c in name.split("."):
        if c.isdigit():
            return int(c) / (L - 1) if L > 1 else 1.0
    return 0.0


def evaluate_setting(name, setting, t):  # config.py L26-52
    if isinstance(setting, (float, int, bool)):
        return setting
    if all(isinstance(e, (int, float)) for e in setting):
        scaled = t * (len(setting) - 1)
        i0 = int(scaled)
        i1 = min(len(setting) - 1, i0 + 1)
        frac = scaled - i0
        return (1 - frac) * setting[i0] + frac * setting[i1]
    for cond in setting:
        f = cond.get("filter")
        if f is None or f == "*" or f in name:
            return evaluate_setting(name, cond["value"], t)
    return None


def param(rec, pname, model, name, default=None):  # ConfigReader.parameter L204-250
    t = layer_t(name)
    if model is not None:
        for m in rec["models"]:
            if m["model"] == model and pname in (m.get("parameters") or {}):
                v = evaluate_setting(name, m["parameters"][pname], t)
                if v is not None:
                    return v
    if pname in (rec.get("parameters") or {}):
        v = evaluate_setting(name, rec["parameters"][pname], t)
        if v is not None:
            return v
    return default


# ---- tpconv's definitions where mergekit leaves the bits open ----

def splitmix64(x):
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def fnv1a64(s):
    h = 0xcbf29ce484222325
    for c in s.encode():
        h = ((h ^ c) * 0x100000001b3) & (2**64 - 1)
    return h


def dare_mask(seed, name, k, n, density):
    key = splitmix64(int(splitmix64(int(splitmix64(seed)) ^ fnv1a64(name))) + k)
    with np.errstate(over="ignore"):
        h = splitmix64(key + np.arange(n, dtype=np.uint64))
    keep = int(np.floor(density * 16777216.0))
    return torch.from_numpy(((h >> np.uint64(40)) < np.uint64(keep)).astype(np.float32))


def f64sum(x):
    return float(x.double().sum())


def rescaled_masked_tensor(tensor, mask, rescale):  # sparsify.py L23-53, l1 in f64
    masked = tensor * mask
    if not rescale:
        return masked
    before = torch.tensor(f64sum(tensor.abs()), dtype=torch.float32)
    after = torch.tensor(f64sum(masked.abs()), dtype=torch.float32)
    if before < 1e-7 or after < 1e-7:
        return masked
    return masked * (before / after)


def magnitude(tensor, density, rescale):  # sparsify.py L56-74, ties kept at the threshold
    if density >= 1:
        return tensor
    k = int(density * tensor.numel())
    assert k > 0
    w = tensor.abs().view(-1)
    thr = torch.sort(w, descending=True).values[k - 1]
    mask = (tensor.abs() >= thr).to(tensor.dtype)
    return rescaled_masked_tensor(tensor, mask, rescale)


def magnitude_outliers(tensor, density, rescale, gamma):  # sparsify.py magnitude_outliers
    """the n_top largest |delta| dropped, then the smallest down to int(density *
    numel); by thresholds, ties at the lower kept and at the upper dropped
    (argsort's choice among ties replaced); n_top 0 drops none (mergekit's
    indices[n_bot:-n_top] is then empty: every element dropped)"""
    if density >= 1:
        return tensor
    n = tensor.numel()
    target, top = int(density * n), int(gamma * n)
    assert target > 0
    if target + top > n:
        top = n - target
    w = torch.sort(tensor.abs().view(-1), descending=True).values
    mask = torch.ones_like(tensor, dtype=torch.bool)
    if target + top < n:
        mask &= tensor.abs() >= w[target + top - 1]
    if top:
        mask &= tensor.abs() < w[top - 1]
    return rescaled_masked_tensor(tensor, mask.to(tensor.dtype), rescale)


def della_magprune(tensor, density, epsilon, rescale, seed, name, k):  # sparsify.py della_magprune L138-176
    """ranks within each row (dim 1; a 1-D tensor one row), equal magnitudes
    by index (stable), p = (density - eps) + (r / (n - 1) * 2) * eps in f32,
    drawn by tpconv's generator as DARE's (torch.bernoulli replaced)"""
    if density >= 1:
        return tensor
    assert 0 < density - epsilon and density + epsilon < 1
    t2 = tensor.unsqueeze(0) if tensor.dim() < 2 else tensor
    rows, n = t2.shape
    order = torch.sort(t2.abs(), dim=1, stable=True).indices
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(n).expand(rows, n).contiguous())
    rn = ranks.to(torch.float32) / float(n - 1) if n > 1 else torch.zeros(rows, n)
    p = torch.tensor(density - epsilon, dtype=torch.float32) + (rn * 2) * torch.tensor(epsilon, dtype=torch.float32)
    keep = np.floor(p.double().numpy().reshape(-1) * 16777216.0).astype(np.uint64)
    key = splitmix64(int(splitmix64(int(splitmix64(seed)) ^ fnv1a64(name))) + k)
    with np.errstate(over="ignore"):
        h = splitmix64(key + np.arange(tensor.numel(), dtype=np.uint64))
    mask = torch.from_numpy(((h >> np.uint64(40)) < keep).astype(np.float32)).view(tensor.shape)
    return rescaled_masked_tensor(tensor, mask, rescale)


def bernoulli(tensor, density, rescale, seed, name, k):  # sparsify.py L119-135
    if density >= 1:
        return tensor
    mask = dare_mask(seed, name, k, tensor.numel(), density).view(tensor.shape)
    return rescaled_masked_tensor(tensor, mask, rescale)


# ---- the methods ----

METHODS = {  # registry.py L29-64: consensus, sparsification, normalize, rescale
    "task_arithmetic": (None, None, False, False),
    "ties": ("sum", "magnitude", True, False),
    "dare_ties": ("sum", "random", False, True),
    "dare_linear": (None, "random", False, True),
    "breadcrumbs": (None, "magnitude_outliers", False, False),
    "breadcrumbs_ties": ("sum", "magnitude_outliers", False, False),
    "della": ("sum", "della_magprune", True, True),
    "della_linear": (None, "della_magprune", False, True),
}


def get_mask(delta):  # get_mask L230-254, method 'sum'
    sign = delta.sign().to(delta.dtype)
    sign_weight = delta.sum(dim=0)
    majority_sign = (sign_weight >= 0).to(delta.dtype) * 2 - 1
    return sign == majority_sign


def inputs(rec):
    names = [m["model"] for m in rec["models"]]
    b = rec.get("base_model")
    if b and b not in names:
        names.append(b)
    return names


def merge_tensor(rec, name, seed, dt=torch.float32):
    meth = rec["merge_method"]
    names = inputs(rec)
    xs = {n: load(n)[name].to(dt) for n in names}
    if meth == "linear":  # linear.py L35-57
        tensors = torch.stack([xs[n] for n in names], dim=0)
        weights = torch.tensor([param(rec, "weight", n, name) for n in names], dtype=tensors.dtype)
        while len(weights.shape) < len(tensors.shape):
            weights.unsqueeze_(-1)
        res = (weights * tensors).sum(dim=0)
        if param(rec, "normalize", None, name, True):
            res = res / weights.sum(dim=0)
        return res
    if meth == "slerp":  # slerp.py L100-157 with the sums in f64
        b = rec["base_model"]
        o = [n for n in names if n != b][0]
        t = param(rec, "t", None, name)
        v0, v1 = xs[b], xs[o]
        n0 = torch.tensor(float(torch.sqrt((v0.double() ** 2).sum())), dtype=torch.float32)
        n1 = torch.tensor(float(torch.sqrt((v1.double() ** 2).sum())), dtype=torch.float32)
        a = v0 / n0 if n0 > 1e-8 else v0
        c = v1 / n1 if n1 > 1e-8 else v1
        dot = np.float32(f64sum(a.double() * c.double()))
        if abs(float(dot)) > 0.9995:
            s0, s1 = np.float32(1 - t), np.float32(t)
        else:
            th0 = np.arccos(float(dot))
            s = np.sin(th0)
            tht = th0 * t
            s0, s1 = np.float32(np.sin(th0 - tht) / s), np.float32(np.sin(tht) / s)
        return torch.tensor(s0) * v0 + torch.tensor(s1) * v1
    if meth == "model_stock":  # model_stock.py L33-85: one vector, or a t per row (filter_wise)
        b = rec["base_model"]
        fw = param(rec, "filter_wise", None, name, False)
        w0 = xs[b].reshape(-1, xs[b].shape[-1]) if fw and xs[b].dim() > 1 else xs[b].reshape(1, -1)
        ws = [xs[n].reshape(w0.shape) for n in names if n != b]
        offs = [w - w0 for w in ws]
        # per row, the norms and dots f64 sums rounded to f32 once
        nrm = [torch.sqrt((o.double() ** 2).sum(dim=-1)).float() for o in offs]
        csum, pairs = torch.zeros(w0.shape[0]), 0
        for i in range(len(offs)):
            for j in range(i + 1, len(offs)):
                npr = nrm[i] * nrm[j]
                dot = (offs[i].double() * offs[j].double()).sum(dim=-1).float()
                c = (dot / npr.clamp(min=1e-6)).clamp(-1, 1)
                csum, pairs = csum + c, pairs + 1
        c = (csum / pairs).unsqueeze(-1)  # the mean, summed in pair order
        N = len(ws)
        t = (N * c) / (1 + (N - 1) * c)
        acc = torch.zeros_like(w0)
        for w in ws:
            acc = acc + w
        return (t * (acc / N) + (1 - t) * w0).reshape(xs[b].shape)
    consensus, sparsification, dnorm, drescale = METHODS[meth]
    base_n = rec["base_model"]
    base = xs[base_n]
    normalize = param(rec, "normalize", None, name, dnorm)
    rescale = param(rec, "rescale", None, name, drescale)
    lam = param(rec, "lambda", None, name, 1.0)
    tvs = []
    for k, n in enumerate(names):  # get_task_vectors L190-227
        if n == base_n:
            continue
        delta = xs[n] - base
        w = param(rec, "weight", n, name)
        d = param(rec, "density", n, name, 1.0)
        if sparsification == "magnitude":
            delta = magnitude(delta, d, rescale)
        elif sparsification == "magnitude_outliers":  # gamma: GTA tensor_parameters, 0.01
            delta = magnitude_outliers(delta, d, rescale, param(rec, "gamma", n, name, 0.01))
        elif sparsification == "della_magprune":  # epsilon: GTA tensor_parameters L70-77, 0.15
            delta = della_magprune(delta, d, param(rec, "epsilon", n, name, 0.15), rescale, seed, name, k)
        elif sparsification == "random":
            delta = bernoulli(delta, d, rescale, seed, name, k)
        tvs.append((delta, w))
    deltas = torch.stack([d for d, _ in tvs], dim=0)  # GTATask.execute L152-184
    weights = torch.tensor([w for _, w in tvs], dtype=deltas.dtype)
    while len(deltas.shape) > len(weights.shape):
        weights.unsqueeze_(-1)
    weighted_deltas = deltas * weights
    if consensus:
        mask = get_mask(weighted_deltas)
        mixed_delta = (weighted_deltas * mask).sum(dim=0)
        divisor = (weights * mask).sum(dim=0)
        divisor[divisor == 0] = 1
    else:
        mixed_delta = weighted_deltas.sum(dim=0)
        divisor = weights.sum(dim=0)
        divisor[divisor.abs() < 1e-8] = 1
    if normalize:
        mixed_delta /= divisor
    if lam != 1:
        mixed_delta *= lam
    return base + mixed_delta


RECIPES = {
    "linear": """\
# mergekit's linear (model soup), a gradient and a filter
models:
  - model: m1.safetensors
    parameters:
      weight: 0.5
  - model: m2.safetensors
    parameters:
      weight: [0.2, 0.8]        # across the layers
  - model: m3.safetensors
    parameters:
      weight:
        - filter: mlp
          value: 0.1
        - value: 0.3
merge_method: linear
parameters:
  normalize: true
dtype: float32
""",
    "task_arithmetic": """\
models:
- model: m1.safetensors
  parameters: {}
- model: m2.safetensors
- model: m3.safetensors
merge_method: task_arithmetic
base_model: base.safetensors
parameters:
  weight: 0.4
  lambda: 0.9
""",
    "ties": """\
models:
  - model: base.safetensors
  - model: m1.safetensors
    parameters:
      density: 0.5
      weight: 1.0
  - model: m2.safetensors
    parameters:
      density: [0.3, 0.9]
      weight: 0.6
  - model: m3.safetensors
    parameters:
      density: 0.7
      weight: -0.4
merge_method: ties
base_model: base.safetensors
parameters:
  normalize: true
  int8_mask: true
dtype: float32
""",
    "dare_ties": """\
models:
  - model: m1.safetensors
    parameters: {density: 0.5, weight: 0.5}
  - model: m2.safetensors
    parameters: {density: 0.66, weight: 0.5}
  - model: m3.safetensors
    parameters: {density: 0.4, weight: 0.3}
merge_method: dare_ties
base_model: base.safetensors
""",
    "dare_linear": """\
models:
  - model: m1.safetensors
    parameters:
      density: 0.5
      weight: 0.7
  - model: m2.safetensors
    parameters:
      density: 0.8
      weight: 0.3
merge_method: dare_linear
base_model: base.safetensors
parameters:
  rescale: false
  normalize: true
""",
    "b-linear": """\
models:
  - model: b1.safetensors
    parameters: {weight: 0.5}
  - model: b2.safetensors
    parameters: {weight: 0.5}
merge_method: linear
dtype: bfloat16
""",
    "b-ties": """\
models:
  - model: b1.safetensors
    parameters: {density: 0.5, weight: 0.7}
  - model: b2.safetensors
    parameters: {density: 0.5, weight: 0.5}
merge_method: ties
base_model: b-base.safetensors
dtype: bfloat16
""",
}
RECIPES["breadcrumbs"] = """\
# Model Breadcrumbs (arXiv 2312.06795): the largest 5% and the smallest dropped
models:
  - model: m1.safetensors
    parameters: {weight: 0.6, density: 0.7, gamma: 0.05}
  - model: m2.safetensors
    parameters: {weight: 0.4, density: 0.5}
  - model: m3.safetensors
    parameters: {weight: 0.5, density: 0.9, gamma: 0.2}
merge_method: breadcrumbs
base_model: base.safetensors
parameters: {lambda: 0.9}
"""
RECIPES["breadcrumbs_ties"] = """\
models:
  - model: m1.safetensors
    parameters: {weight: 1.0, density: 0.6}
  - model: m2.safetensors
    parameters: {weight: 0.6, density: [0.3, 0.9], gamma: 0.02}
  - model: m3.safetensors
    parameters: {weight: -0.4, density: 0.5, gamma: 0.1}
merge_method: breadcrumbs_ties
base_model: base.safetensors
parameters: {normalize: true, rescale: true}
"""
RECIPES["della"] = """\
# DELLA (arXiv 2406.11617): MagPrune by rank within rows, then TIES' election
models:
  - model: m1.safetensors
    parameters: {weight: 1.0, density: 0.5, epsilon: 0.1}
  - model: m2.safetensors
    parameters: {weight: 0.6, density: 0.7}
  - model: m3.safetensors
    parameters: {weight: 0.8, density: [0.3, 0.6], epsilon: 0.25}
merge_method: della
base_model: base.safetensors
parameters: {lambda: 1.1}
"""
RECIPES["della_linear"] = """\
models:
  - model: m1.safetensors
    parameters: {weight: 0.5, density: 0.4}
  - model: m2.safetensors
    parameters: {weight: 0.5, density: 0.6, epsilon: 0.3}
merge_method: della_linear
base_model: base.safetensors
parameters: {rescale: false, normalize: true}
"""
RECIPES["model_stock"] = """\
# Model Stock (arXiv 2403.19522): the models' mean pulled to the base by the angle of their offsets
models:
  - model: m1.safetensors
  - model: m2.safetensors
  - model: m3.safetensors
merge_method: model_stock
base_model: base.safetensors
parameters: {filter_wise: false}
"""
RECIPES["tied"] = """\
# tied embeddings in every input: merged once, written tied
models:
  - model: m1-tied.bin
    parameters: {density: 0.5, weight: 0.5}
  - model: m2-tied.bin
    parameters: {density: 0.7, weight: 0.5}
merge_method: dare_ties
base_model: base-tied.bin
"""
RECIPES["model_stock_fw"] = """\
models:
  - model: m1.safetensors
  - model: m2.safetensors
  - model: m3.safetensors
merge_method: model_stock
base_model: base.safetensors
parameters: {filter_wise: true}
"""
RECIPES["slerp"] = """\
# mergekit's README example, on three layers
models:
  - model: base.safetensors
  - model: m1.safetensors
merge_method: slerp
base_model: base.safetensors
parameters:
  t:
    - filter: self_attn
      value: [0, 0.5, 1]
    - filter: mlp
      value: [1, 0.5, 0]
    - value: 0.5
dtype: float32
"""
SEED = {"tied": 3, "dare_ties": 7, "dare_linear": 0, "della": 5, "della_linear": 0}

# ---- passthrough: a frankenmerge of tests/gguf/arch/tiny-llama (a model with
# its config.json: the family record renames the layers) ----
PASS = """\
# passthrough (mergekit's frankenmerge): layers 0-1, layer 0 again with its
# attention and MLP outputs halved, layer 1 again: 4 layers
slices:
  - sources:
      - model: ../gguf/arch/tiny-llama
        layer_range: [0, 2]
  - sources:
      - model: ../gguf/arch/tiny-llama
        layer_range: [0, 1]
        parameters:
          scale:
            - filter: o_proj
              value: 0.5
            - filter: down_proj
              value: 0.5
            - value: 1
  - sources:
      - model: ../gguf/arch/tiny-llama
        layer_range: [1, 2]
merge_method: passthrough
dtype: float32
"""


def load_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = bytearray(f.read())
    res = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        res[k] = torch.frombuffer(data[a:b], dtype=torch.float32).reshape(v["shape"]).clone()
    return res


def passthrough(rec):
    """plan.py plan_module L300-331 (pre weights from slices[0], the slices'
    layers renumbered from 0, post weights from slices[-1]), plan_slice
    L267-298 (t = idx / (len - 1)), passthrough.py (tensor * scale); the layer
    names as mergekit's architecture templates (model.layers.{i}.)"""
    here = os.path.dirname(os.path.abspath(__file__))
    ms = [load_st(os.path.join(here, s["sources"][0]["model"], "model.safetensors")) for s in rec["slices"]]
    out, L = {}, 0
    for k, v in ms[0].items():
        if not k.startswith("model.layers.") and "embed" in k:
            out[k] = v
    for s, m in zip(rec["slices"], ms):
        src = s["sources"][0]
        a, b = src["layer_range"]
        for idx in range(b - a):
            t = idx / (b - a - 1) if b - a > 1 else 1.0
            pre = "model.layers.%d." % (a + idx)
            for k, v in m.items():
                if k.startswith(pre):
                    name = "model.layers.%d." % L + k[len(pre):]
                    sc = (src.get("parameters") or {}).get("scale")
                    sc = None if sc is None else evaluate_setting(name, sc, t)
                    out[name] = v * sc if sc is not None else v
            L += 1
    for k, v in ms[-1].items():
        if not k.startswith("model.layers.") and "embed" not in k:
            out[k] = v
    return out, L


with open(os.path.join(out, "passthrough.yaml"), "w") as f:
    f.write(PASS)
pres, pL = passthrough(yaml.safe_load(PASS))
assert pL == 4
save("ref-passthrough.safetensors", pres)

for name, text in RECIPES.items():
    with open(os.path.join(out, name + ".yaml"), "w") as f:
        f.write(text)
    rec = yaml.safe_load(text)  # PyYAML, as mergekit reads its config
    first = rec.get("base_model") or rec["models"][0]["model"]
    src = load(first)
    res = {}
    for k, v in src.items():
        if not v.is_floating_point():
            res[k] = v
            continue
        r = merge_tensor(rec, k, SEED.get(name, 0))
        res[k] = r.to(torch.bfloat16) if name.startswith("b-") else r
    if name == "tied":  # the tie kept: lm_head is embed_tokens' merge
        res["lm_head.weight"] = res["model.embed_tokens.weight"]
    save("ref-" + name + ".safetensors", res)
    if name == "b-linear":
        # mergekit's own arithmetic in the recipe's dtype (bf16), for the one-ULP check
        lit = {k: merge_tensor(rec, k, 0, torch.bfloat16) if v.is_floating_point() else v for k, v in src.items()}
        save("ref-b-linear-bf16.safetensors", lit)
print("wrote", sorted(os.listdir(out)))
