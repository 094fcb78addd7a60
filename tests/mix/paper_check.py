"""merge --recipe against each merge method's paper (TAP), numpy only.

Each method's formula is written here from its paper, not from mergekit,
on a 3-model recipe over the fixtures of tests/mix (base, m1, m2, m3 in f32,
three layers; make_mix.py), and compared with what `tpconv merge --recipe`
writes. The arXiv numbers and formulas were checked against the
papers' public abstracts and summaries (2026-11-30); section numbers are
left out where they could not be checked. Bit for bit where the paper's
arithmetic, done in f32 in the order the paper writes its sums (over the models in the recipe's order), is the
order tpconv follows (lib/tpc_mix.h); within a stated tolerance elsewhere.

  model soup        Wortsman et al. 2022, "Model soups", ICML, arXiv:2203.05482
                    (the uniform soup: the mean of the fine-tuned weights)
  task arithmetic   Ilharco et al. 2023, "Editing models with task
                    arithmetic", ICLR, arXiv:2212.04089:
                    tau_t = theta_ft - theta_pre; theta_new = theta_pre + lambda * sum_t tau_t
  TIES              Yadav et al. 2023, "TIES-Merging", NeurIPS,
                    arXiv:2306.01708, its procedure: trim (keep the top-k%
                    of |tau_t|), elect (gamma_m = sgn(sum_t tau_t_hat)), disjoint merge
                    (tau_m = mean of the tau_t_hat whose sign is gamma_m),
                    theta_m = theta_init + lambda * tau_m
  DARE              Yu et al. 2024, "Language models are Super Mario", ICML,
                    arXiv:2311.03099: m_t ~ Bernoulli(p) drops, delta_hat =
                    (1 - m_t) * delta_t / (1 - p); merged with task
                    arithmetic over the delta_hat
  Model Stock       Jang et al. 2024, "Model Stock", ECCV, arXiv:2403.19522:
                    w_H = t w_avg + (1 - t) w_0, t = k cos(theta) / ((k - 1)
                    cos(theta) + 1), theta the angle between the fine-tuned
                    offsets from w_0 (for k > 2 the mean of the pairwise
                    cosines, as mergekit model_stock.py takes it)
  SLERP             Shoemake 1985, "Animating rotation with quaternion
                    curves", SIGGRAPH: slerp(q0, q1; t) = sin((1-t) W)/sin W
                    q0 + sin(t W)/sin W q1, cos W = q0 . q1 (unit vectors)

Where tpconv departs from a paper, the exact relation is stated and tested:
  - DARE's Bernoulli draw is tpconv's generator (splitmix64 of seed, tensor,
    model and element, lib/tpc_mix.h), reproduced here; its keep rate is
    checked against 1 - p. The paper's 1/(1 - p) rescale is what a recipe
    asks for with `rescale: false` and weight 1/(1 - p) on each model
    (bit for bit where 1/(1 - p) is a power of two). With `rescale: true`
    (mergekit's default) the factor is ||delta||_1 / ||m * delta||_1, the
    L1 norms before and after the drop (mergekit sparsify.py
    rescaled_masked_tensor): that is (1 - p)||delta||_1/||m * delta||_1 times
    the paper's, tested as such to 1e-6 relative.
  - TIES: mergekit elects + where the sum is exactly 0 (the paper's sgn gives
    0, an empty set): both give a zero delta there.
  - SLERP is of two models (the paper's two quaternions): its angle is taken
    between the normalized tensors and the formula applied to the tensors
    as they are; lerp where cos W > 0.9995 (mergekit slerp.py). The angle in
    f64 here with numpy's own summation order: within 2 f32 ULPs of the
    largest element.
usage: paper_check.py TPCONV SRCDIR   (/usr/bin/python3: numpy only)
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("1..0 # SKIP no numpy in " + sys.executable)
    sys.exit(0)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import tpctest  # noqa: E402

TPCONV, SRC = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2])
F = os.path.join(SRC, "tests", "mix")
T = tempfile.mkdtemp(prefix="paper_check.")
n_test = 0
failed = 0


def ok(cond, desc, why=""):
    global n_test, failed
    n_test += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (n_test, desc))
    if not cond:
        failed += 1
        for line in str(why).splitlines()[:8]:
            print("#   " + line)


def load(path):
    """a safetensors file's float tensors as numpy arrays"""
    return {k: np.frombuffer(raw, dtype=np.float32).reshape(shape)
            for k, (dt, shape, raw) in tpctest.read_safetensors(path).items() if dt == "F32"}


M = {n: load(os.path.join(F, n + ".safetensors")) for n in ("base", "m1", "m2", "m3")}
NAMES = sorted(M["base"])


def merge(tag, text, seed=0):
    """tpconv merge --recipe (the recipe's paths the fixtures'), its output"""
    y = os.path.join(T, tag + ".yaml")
    with open(y, "w") as f:
        f.write(text.replace("@", F + "/"))
    o = os.path.join(T, tag + ".safetensors")
    r = subprocess.run([TPCONV, "merge", "--recipe", y, "-o", o, "-q", "--seed", str(seed)], capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr
    return load(o), ""


def compare(desc, got, want, ulps=0, rel=None):
    """every tensor: bit for bit (ulps 0), within `ulps` f32 ULPs of the
    tensor's largest |element|, or within `rel` of it"""
    if got is None:
        return ok(False, desc, want)
    worst = ""
    for n in NAMES:
        g, w = got[n], want[n].astype(np.float32)
        if ulps == 0 and rel is None:
            if g.tobytes() != w.tobytes():
                j = int(np.argmax(g.view(np.uint32) != w.view(np.uint32)))
                worst = "%s: element %d %r, the paper's %r" % (n, j, g.flat[j], w.flat[j])
                break
            continue
        scale = float(np.abs(w).max()) or 1.0
        tol = ulps * float(np.spacing(np.float32(scale))) if rel is None else rel * scale
        d = float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max())
        if not d <= tol:  # NaN fails
            worst = "%s: max |diff| %g > %g" % (n, d, tol)
            break
    ok(not worst, desc, worst)


f32 = np.float32
MODELS = ("m1", "m2", "m3")

# ---- the uniform model soup (Wortsman et al. 2022) ----
got, err = merge("soup", """models:
  - model: @m1.safetensors
    parameters: {weight: 1}
  - model: @m2.safetensors
    parameters: {weight: 1}
  - model: @m3.safetensors
    parameters: {weight: 1}
merge_method: linear
""")
want = {}
for n in NAMES:
    s = f32(0) * M["m1"][n]
    for m in MODELS:
        s = s + M[m][n]
    want[n] = s / f32(3)
compare("linear: the uniform soup of 3 models (Wortsman et al. 2022), bit for bit", got, want if got else err)

# ---- task arithmetic (Ilharco et al. 2023) ----
LAM = 0.7
got, err = merge("ta", """models:
  - model: @m1.safetensors
  - model: @m2.safetensors
  - model: @m3.safetensors
merge_method: task_arithmetic
base_model: @base.safetensors
parameters: {weight: 1, lambda: %r}
""" % LAM)
want = {}
for n in NAMES:
    b = M["base"][n]
    tau = [M[m][n] - b for m in MODELS]      # tau_t = theta_ft - theta_pre
    s = f32(0) * b
    for t in tau:
        s = s + t
    want[n] = b + s * f32(LAM)                # theta_pre + lambda sum_t tau_t
compare("task_arithmetic: theta_pre + lambda * sum of 3 task vectors (Ilharco et al. 2023), bit for bit", got, want if got else err)

# ---- TIES (Yadav et al. 2023) ----
K, LAM = 0.2, 0.9                              # the paper's k = 20%


def trim(tau, k):
    """keep the top-k fraction of |tau| (int(k * numel) entries, as mergekit
    counts them), zero the rest"""
    flat = tau.reshape(-1)
    keep = int(k * flat.size)
    order = np.argsort(-np.abs(flat), kind="stable")
    out = np.zeros_like(flat)
    out[order[:keep]] = flat[order[:keep]]
    return out.reshape(tau.shape)


got, err = merge("ties", """models:
  - model: @m1.safetensors
  - model: @m2.safetensors
  - model: @m3.safetensors
merge_method: ties
base_model: @base.safetensors
parameters: {weight: 1, density: %r, lambda: %r}
""" % (K, LAM))
want = {}
for n in NAMES:
    b = M["base"][n]
    th = [trim(M[m][n] - b, K) for m in MODELS]   # step 1: trim
    s = f32(0) * b
    for t in th:
        s = s + t
    gamma = np.sign(s)                             # step 2: elect
    tot, cnt = f32(0) * b, f32(0) * b
    for t in th:                                   # step 3: disjoint merge
        a = (np.sign(t) == gamma) & (gamma != 0)
        tot = tot + np.where(a, t, f32(0))
        cnt = cnt + a.astype(np.float32)
    tau_m = np.where(cnt > 0, tot / np.where(cnt > 0, cnt, f32(1)), f32(0))
    want[n] = b + tau_m * f32(LAM)
compare("ties: trim 20%%, elect, disjoint mean, lambda %g on 3 models (Yadav et al. 2023 Alg. 1), bit for bit" % LAM, got,
        want if got else err)

# ---- DARE (Yu et al. 2024) ----
U64 = np.uint64


def splitmix64(x):
    with np.errstate(over="ignore"):
        z = np.asarray(x, dtype=U64) + U64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> U64(30))) * U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> U64(27))) * U64(0x94D049BB133111EB)
    return z ^ (z >> U64(31))


def fnv1a64(s):
    h = 0xcbf29ce484222325
    for c in s.encode():
        h = ((h ^ c) * 0x100000001b3) & (2**64 - 1)
    return h


def kept(seed, name, k, size, density):
    """1 - m_t: tpconv's Bernoulli draw (lib/tpc_mix.h), kept with 1 - p"""
    inner = int(splitmix64(U64(int(splitmix64(U64(seed))) ^ fnv1a64(name))))
    key = int(splitmix64(U64((inner + k) & (2**64 - 1))))
    with np.errstate(over="ignore"):
        h = splitmix64(U64(key) + np.arange(size, dtype=U64))
    return (h >> U64(40)) < U64(int(np.floor(density * 16777216.0)))


SEED, DENS = 11, {"m1": 0.5, "m2": 0.25, "m3": 0.5}   # 1/(1-p) powers of two: exact in f32
LAM = 0.8
got, err = merge("dare", """models:
  - model: @m1.safetensors
    parameters: {density: 0.5, weight: 2}
  - model: @m2.safetensors
    parameters: {density: 0.25, weight: 4}
  - model: @m3.safetensors
    parameters: {density: 0.5, weight: 2}
merge_method: dare_linear
base_model: @base.safetensors
parameters: {rescale: false, lambda: %r}
""" % LAM, SEED)
want, nk, ntot = {}, {m: 0 for m in MODELS}, 0
for n in NAMES:
    b = M["base"][n]
    s = f32(0) * b
    for k, m in enumerate(MODELS):
        keep = kept(SEED, n, k, b.size, DENS[m]).reshape(b.shape)
        nk[m] += int(keep.sum())
        delta = M[m][n] - b
        s = s + np.where(keep, delta, f32(0)) / f32(DENS[m])   # (1 - m_t) * delta / (1 - p)
    ntot += b.size
    want[n] = b + s * f32(LAM)
compare("dare_linear with rescale off and weight 1/(1-p): drop and rescale by 1/(1-p), lambda %g (Yu et al. 2024), bit for bit"
        % LAM, got, want if got else err)
# the draw: each model's kept fraction within 5 standard deviations of 1 - p
dev = {m: (nk[m] / ntot - DENS[m]) / np.sqrt(DENS[m] * (1 - DENS[m]) / ntot) for m in MODELS}
ok(all(abs(v) < 5 for v in dev.values()), "dare: the drops are Bernoulli(p): kept fractions %s of %d elements (1 - p: 0.5, 0.25, 0.5)"
   % (", ".join("%.3f" % (nk[m] / ntot) for m in MODELS), ntot), dev)

# rescale on (mergekit's default): the paper's delta_hat times
# c = (1 - p) ||delta||_1 / ||(1 - m) * delta||_1, per model and tensor
got, err = merge("dare-l1", """models:
  - model: @m1.safetensors
    parameters: {density: 0.5, weight: 1}
  - model: @m2.safetensors
    parameters: {density: 0.25, weight: 1}
  - model: @m3.safetensors
    parameters: {density: 0.5, weight: 1}
merge_method: dare_linear
base_model: @base.safetensors
parameters: {rescale: true, normalize: false}
""", SEED)
want, cs = {}, []
for n in NAMES:
    b = M["base"][n].astype(np.float64)
    s = 0 * b
    for k, m in enumerate(MODELS):
        keep = kept(SEED, n, k, b.size, DENS[m]).reshape(b.shape)
        delta = M[m][n].astype(np.float64) - b
        hat = np.where(keep, delta, 0) / DENS[m]
        l1, l1k = np.abs(delta).sum(), np.abs(np.where(keep, delta, 0)).sum()
        c = DENS[m] * l1 / l1k if l1 >= 1e-7 and l1k >= 1e-7 else DENS[m]
        cs.append(c)
        s = s + c * hat
    want[n] = b + s
compare("dare_linear with rescale (L1): the paper's delta_hat times (1-p)|delta|_1/|kept delta|_1, to 1e-6 of the largest element",
        got, want if got else err, rel=1e-6)
print("# dare L1 factor over the paper's 1/(1-p): %.3f .. %.3f over %d tensor-models" % (min(cs), max(cs), len(cs)))

# ---- Model Stock (Jang et al. 2024) ----
got, err = merge("stock", """models:
  - model: @m1.safetensors
  - model: @m2.safetensors
  - model: @m3.safetensors
merge_method: model_stock
base_model: @base.safetensors
""")
want = {}
for n in NAMES:
    w0 = M["base"][n].astype(np.float64).reshape(-1)
    ws = [M[m][n].astype(np.float64).reshape(-1) for m in MODELS]
    off = [w - w0 for w in ws]
    # a zero offset (m2 leaves one norm alone) has no angle: its cosine 0,
    # as mergekit's clamp of the norms' product to 1e-6 makes it
    cos = [off[i] @ off[j] / max(np.linalg.norm(off[i]) * np.linalg.norm(off[j]), 1e-6)
           for i in range(3) for j in range(i + 1, 3)]
    c, k = float(np.mean(cos)), len(ws)
    t = k * c / ((k - 1) * c + 1)                     # t = k cos / ((k - 1) cos + 1)
    want[n] = (t * np.mean(ws, axis=0) + (1 - t) * w0).reshape(M["base"][n].shape)   # w_H
compare("model_stock: w_H = t w_avg + (1 - t) w_0, t = k cos / ((k-1) cos + 1), cos the mean pairwise (Jang et al. 2024), "
        "to 1e-6 of the largest element", got, want if got else err, rel=1e-6)

# ---- SLERP (Shoemake 1985) on the tensors, two models ----
TS = 0.3
got, err = merge("slerp", """models:
  - model: @base.safetensors
  - model: @m3.safetensors
merge_method: slerp
base_model: @base.safetensors
parameters: {t: %r}
""" % TS)
want, nlerp = {}, 0
for n in NAMES:
    v0, v1 = M["base"][n], M["m3"][n]
    u0 = v0.astype(np.float64) / np.linalg.norm(v0.astype(np.float64))
    u1 = v1.astype(np.float64) / np.linalg.norm(v1.astype(np.float64))
    cw = float((u0 * u1).sum())
    if abs(cw) > 0.9995:
        s0, s1 = 1 - TS, TS
        nlerp += 1
    else:
        w = np.arccos(cw)
        s0, s1 = np.sin((1 - TS) * w) / np.sin(w), np.sin(TS * w) / np.sin(w)
    want[n] = f32(s0) * v0 + f32(s1) * v1
compare("slerp of base and m3 at t %g: sin((1-t)W)/sin W v0 + sin(tW)/sin W v1 (Shoemake 1985), within 2 ULPs (%d tensors by lerp)"
        % (TS, nlerp), got, want if got else err, ulps=2)

print("1..%d" % n_test)
sys.exit(1 if failed else 0)
