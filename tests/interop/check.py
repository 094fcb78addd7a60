"""Inside the chroot: the real consumers load what tpconv wrote (cases.tsv,
written by run.sh) and every result is compared with the original model that
transformers built (gen.py). One process (imports are slow), forking 2 and 4
gloo ranks for transformers' own tensor parallelism and for DTensor/FSDP2 loads
of tpconv's DCP sets. Appends to results.tsv.
usage: check.py WORK"""
import argparse
import glob
import os
import re
import sys
import traceback

import safetensors
import safetensors.torch
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import transformers
from torch.distributed.checkpoint.metadata import TensorStorageMetadata
from torch.distributed.tensor import DTensor

import dist_util
from families import FAMILIES, auto_class, input_ids, result

WORK = os.path.abspath(sys.argv[1])
REF = {}  # family -> Ref (filled before the ranks fork, so they share it)


class Ref:
    """The original: its checkpoint tensors, the loaded model's state dict and
    parameters (transformers' runtime names: MoE experts fused), its logits."""

    def __init__(self, fam):
        self.fam = fam
        self.kind = FAMILIES[fam][2]
        self.path = f"{WORK}/models/{fam}"
        self.ckpt = folder_tensors(self.path)
        model = load(self.path, self.kind)
        self.sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.params = {k: v.detach().clone() for k, v in model.named_parameters()}
        self.ids = input_ids(model.config.vocab_size)
        self.logits = logits(model, self.ids)


def load(path, kind, dtype=torch.float32, **kw):
    model = auto_class(kind).from_pretrained(path, dtype=dtype, **kw)
    return (model[0].eval(), model[1]) if isinstance(model, tuple) else model.eval()


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits.detach().clone()


def folder_tensors(folder):
    """Every tensor of the .safetensors files of a folder (an HF checkpoint)."""
    out = {}
    for f in sorted(glob.glob(f"{folder}/*.safetensors")):
        out.update(safetensors.torch.load_file(f))
    return out


def differing(a, b):
    """Names whose tensors differ between two dicts (missing on either side included)."""
    bad = sorted(set(a) ^ set(b))
    bad += [k for k in sorted(set(a) & set(b))
            if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape or not torch.equal(a[k], b[k])]
    return bad


def short(names, n=4):
    """A few names, layer numbers folded to '*'."""
    pats = sorted({re.sub(r"\.\d+\.", ".*.", x) for x in names})
    return ", ".join(pats[:n]) + (f" (+{len(pats) - n} more)" if len(pats) > n else "")


def loading_problems(info):
    return "; ".join(f"{k}: {short(v)}" for k, v in info.items() if v and k != "error_msgs") or \
        "; ".join(map(str, info.get("error_msgs") or []))


# ---- transformers: from_pretrained of every full checkpoint tpconv made ----

def check_full(fam, op, case, path):
    ref = REF[fam]
    model, info = load(f"{WORK}/{path}", ref.kind, output_loading_info=True)
    why = loading_problems(info)
    bad = differing({k: v for k, v in model.state_dict().items()}, ref.sd)
    if bad:
        why += f"; {len(bad)} tensors differ from the original: {short(bad)}"
    out = logits(model, ref.ids)
    if not torch.equal(out, ref.logits):
        why += f"; logits differ (max |d| {(out - ref.logits).abs().max().item():.3g})"
    n = len(ref.sd)
    return ("fail", why.lstrip("; ")) if why else ("pass", f"{n} tensors equal, logits bit-equal")


def check_config(fam, op, case, path):
    """A TensorRT-LLM set merged back (issue 41 item 1): check_full, and the
    model's own config.json again, byte for byte and as transformers reads it
    (sliding_window null, bos/eos, rope_parameters, dtype: nothing rebuilt)."""
    status, why = check_full(fam, op, case, path)
    ref = REF[fam]
    got_text = open(f"{WORK}/{path}/config.json", "rb").read()
    want_text = open(f"{ref.path}/config.json", "rb").read()
    got = transformers.AutoConfig.from_pretrained(f"{WORK}/{path}").to_dict()
    want = transformers.AutoConfig.from_pretrained(ref.path).to_dict()
    # _name_or_path is the folder it was loaded from
    bad = sorted(k for k in set(got) | set(want)
                 if k != "_name_or_path" and got.get(k, "<absent>") != want.get(k, "<absent>"))
    if bad:
        return "fail", f"{why}; config differs from the original's in {', '.join(bad[:6])}".lstrip("; ")
    if got_text != want_text:
        return "fail", f"{why}; config.json is not the original's byte for byte".lstrip("; ")
    return status, f"{why}; config.json the original's, byte for byte" if status == "pass" else why


def check_cast(fam, op, case, path):
    """convert --dtype bf16: from_pretrained(dtype="auto") gives a bf16 model
    equal to the original loaded with dtype=torch.bfloat16 (torch's rounding)."""
    ref = REF[fam]
    model, info = load(f"{WORK}/{path}", ref.kind, dtype="auto", output_loading_info=True)
    want = load(ref.path, ref.kind, dtype=torch.bfloat16)
    why = loading_problems(info)
    if model.dtype != torch.bfloat16:
        why += f"; dtype=\"auto\" loads it as {model.dtype}"
    bad = differing(model.state_dict(), want.state_dict())
    if bad:
        why += f"; {len(bad)} tensors differ from torch's cast of the original: {short(bad)}"
    elif not torch.equal(logits(model, ref.ids), logits(want, ref.ids)):
        why += "; logits differ from the cast original's"
    return ("fail", why.lstrip("; ")) if why else \
        ("pass", "loads as bfloat16 with dtype=\"auto\"; every tensor and the logits bit-equal to torch's cast")


# ---- transformers: an hf-layout rank folder is the checkpoint of a 1/tp model ----

def local_config(ref, tp, rank_tensors):
    """The config of the model whose full tensors are one rank's slices: heads,
    KV heads (1 when replicated), MLP widths, a linear attention's key and value
    heads and the (padded) vocabulary over tp."""
    cfg = transformers.AutoConfig.from_pretrained(ref.path)
    kv = getattr(cfg, "num_key_value_heads", cfg.num_attention_heads)
    cfg.num_attention_heads //= tp
    cfg.num_key_value_heads = max(kv // tp, 1)
    for k in ("intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size",
              "shared_intermediate_size",  # GraniteMoeShared's
              "intermediate_size_mlp",  # Llama 4's dense layers'
              "linear_num_key_heads", "linear_num_value_heads"):  # Qwen3-Next's DeltaNet, by key-head groups
        if getattr(cfg, k, None):
            setattr(cfg, k, getattr(cfg, k) // tp)
    cfg.vocab_size = rank_tensors["model.embed_tokens.weight"].shape[0]
    if not getattr(cfg, "head_dim", None):  # the attention output's columns (Phi's is self_attn.dense)
        out = next(k for k in ("model.layers.0.self_attn.o_proj.weight", "model.layers.0.self_attn.dense.weight")
                   if k in ref.ckpt)
        cfg.head_dim = ref.ckpt[out].shape[1] // (cfg.num_attention_heads * tp)
    return cfg


def check_rank_folders(fam, op, case, path):
    ref = REF[fam]
    tp = int(case.split()[-1])
    if "model.embed_tokens.weight" not in ref.ckpt:
        return ("n/a", "the head size comes from hidden/heads in this architecture: no config "
                "describes a 1/tp slice (the folders' tensors are checked by the merge rows and, "
                "where transformers shards them, by the tensor-parallel oracle)")
    if any(k.endswith(".mamba.in_proj.weight") for k in ref.ckpt):
        return ("n/a", "a Mamba-2 mixer's inner width is mamba_expand x hidden_size, an integer that a "
                "1/tp slice of the heads does not keep, and its one group's gated norm needs every rank's "
                "channels (vLLM all-reduces the sum of squares; verify too): no 1/tp model describes one folder")
    qn = ref.ckpt.get("model.layers.0.self_attn.q_norm.weight")
    if qn is not None and qn.shape[0] == ref.ckpt["model.layers.0.self_attn.q_proj.weight"].shape[0] and \
            qn.shape[0] != getattr(transformers.AutoConfig.from_pretrained(ref.path), "head_dim", 0):
        return ("n/a", "q_norm/k_norm normalise the whole q and k projections (OLMo 2): a rank's slice "
                "needs the statistics of every rank (vLLM all-gathers q and k; verify sums them across "
                "ranks), so no 1/tp model describes one folder")
    msgs = []
    for r in range(tp):
        d = f"{WORK}/{path}/tp{r:02d}_pp00"
        mine = folder_tensors(d)
        model, info = load(d, ref.kind, config=local_config(ref, tp, mine), output_loading_info=True)
        why = loading_problems(info)
        params = dict(model.named_parameters())
        bad = [n for n, v in params.items() if tpconv_runtime(n, mine) is None
               or not torch.equal(tpconv_runtime(n, mine), v.detach())]
        if why or bad:
            msgs.append(f"rank {r}: {why} {short(bad)}")
        else:
            logits(model, ref.ids % model.config.vocab_size)  # it runs
    if msgs:
        return ("fail", "; ".join(msgs))
    return ("pass", f"each of the {tp} folders loads with from_pretrained as a model of 1/{tp} the "
            "heads, KV heads, MLP width and vocabulary: every key used, every parameter the rank's "
            "tensor, and it runs")


# ---- torch: DCP folders tpconv wrote, one process ----

def dcp_meta(path):
    md = dcp.FileSystemReader(path).read_metadata()
    return {k: (v.size, v.properties.dtype) for k, v in md.state_dict_metadata.items()
            if isinstance(v, TensorStorageMetadata)}


def check_dcp(fam, op, case, path):
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    ref = REF[fam]
    full = f"{WORK}/{path}"
    meta = dcp_meta(full)
    sd = {k: torch.empty(size, dtype=dt) for k, (size, dt) in meta.items()}
    dcp.load(sd, checkpoint_id=full, no_dist=True)
    bad = differing(sd, ref.ckpt)
    pt = f"{full}.pt"
    dcp_to_torch_save(full, pt)
    bad2 = differing(torch.load(pt, weights_only=True), ref.ckpt)
    os.unlink(pt)
    out = []
    case = "convert --format dcp" if op.startswith("convert") else f"shard --layout dcp, {case}"
    out.append(("torch", fam, "DCP: dcp.load, one process", case,
                *(("fail", f"{len(bad)} tensors differ or are missing: {short(bad)}") if bad else
                  ("pass", f"{len(sd)} tensors at their global shapes, bit-equal to the original"))))
    out.append(("torch", fam, "DCP: dcp_to_torch_save + torch.load(weights_only)", case,
                *(("fail", f"{len(bad2)} tensors differ: {short(bad2)}") if bad2 else
                  ("pass", f"{len(sd)} tensors bit-equal"))))
    return out


# ---- torch: DCP saves real torch wrote, read by tpconv ----

def flat(obj, prefix="", out=None):
    out = {} if out is None else out
    if isinstance(obj, dict):
        for k, v in obj.items():
            flat(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flat(v, f"{prefix}.{i}", out)
    elif isinstance(obj, torch.Tensor):
        out[prefix] = obj
    return out


def check_genuine(name, op, case, path):
    ref = torch.load(f"{WORK}/genuine/{name}.ref.pt", weights_only=True)
    f = f"{WORK}/{path}"
    got = safetensors.torch.load_file(f) if f.endswith(".safetensors") else flat(torch.load(f, weights_only=True))
    bad = differing({k: got[k] for k in got if k in ref}, ref)
    extra = sorted(set(got) - set(ref))
    place = ""
    if os.path.exists(f"{WORK}/genuine/{name}.placements"):
        place = " (placements " + open(f"{WORK}/genuine/{name}.placements").read().strip() + ")"
    n_opt = sum(1 for k in ref if k.startswith("optim."))
    if bad or extra:
        return ("fail", f"{len(bad)} tensors differ or are missing ({short(bad)}); extra: {short(extra)}")
    return ("pass", f"{len(ref)} tensors bit-equal to the full state dict torch gathers"
            + (f", {n_opt} of them optimizer state" if n_opt else "") + place)


# ---- safetensors and torch.load(weights_only) read every file tpconv wrote ----

def sweep(fam):
    out = []
    files = sorted(glob.glob(f"{WORK}/out/{fam}/**/*", recursive=True) + glob.glob(f"{WORK}/sets/{fam}/**/*", recursive=True))
    st = [f for f in files if f.endswith(".safetensors")]
    pt = [f for f in files if f.endswith((".bin", ".pt"))]
    bad = []
    for f in st:
        try:
            with safetensors.safe_open(f, "pt") as h:
                h.metadata()
            safetensors.torch.load_file(f)
        except Exception as e:
            bad.append(f"{os.path.relpath(f, WORK)}: {type(e).__name__}: {e}")
    out.append(("safetensors", fam, "safe_open + load_file of every .safetensors tpconv wrote", "",
                *(("fail", "; ".join(bad[:3])) if bad else ("pass", f"{len(st)} files"))))
    bad, alike, megatron = [], 0, 0
    for f in pt:
        try:
            if "/release/mp_rank_" in f:
                # Megatron's own saves hold args as an argparse.Namespace too;
                # Megatron loads them with weights_only=False
                with torch.serialization.safe_globals([argparse.Namespace]):
                    obj = torch.load(f, weights_only=True, map_location="cpu")
                megatron += 1
            else:
                obj = torch.load(f, weights_only=True, map_location="cpu")
            twin = twin_file(f)
            if twin and os.path.exists(twin):
                d = differing(flat(obj), safetensors.torch.load_file(twin))
                if d:
                    bad.append(f"{os.path.relpath(f, WORK)} differs from {os.path.relpath(twin, WORK)}: {short(d)}")
                alike += 1
        except Exception as e:
            bad.append(f"{os.path.relpath(f, WORK)}: {type(e).__name__}: {e}")
    out.append(("torch", fam, "torch.load(weights_only=True) of every torch file tpconv wrote", "",
                *(("fail", "; ".join(bad[:3])) if bad else
                  ("pass", f"{len(pt)} files (rank files of the oslo, tpconv --format torch and megatron "
                   f"layouts, .bin conversions and merges); {alike} rank files equal their safetensors twins"
                   + (f"; the {megatron} megatron rank files need argparse.Namespace allow-listed "
                      "(torch.serialization.safe_globals), as Megatron's own checkpoints do" if megatron else "")))))
    return out


def twin_file(f):
    """The safetensors rank file of the same set degree holding the same tensors."""
    m = re.search(r"/sets/[^/]+/tpconv-torch-(\d+)/model_tp(\d+)_pp00\.bin$", f)
    if m:
        return f.replace(f"tpconv-torch-{m[1]}/", f"tpconv-{m[1]}/").replace(".bin", ".safetensors")
    m = re.search(r"/sets/[^/]+/oslo-(\d+)/pytorch_model_tp_(\d+)_pp_0\.bin$", f)
    if m:
        return f"{f[:f.rindex('/oslo-')]}/tpconv-{m[1]}/model_tp{int(m[2]):02d}_pp00.safetensors"
    return None


# ---- transformers' tensor parallelism (tp_plan="auto") as the oracle of the split ----

def tpconv_runtime(name, T):
    """tpconv's rank tensor for transformers' parameter NAME: the same name, or a
    fused MoE expert tensor ([E, 2I, H] gate_up, [E, H, I] down) stacked from
    the per-expert checkpoint tensors as transformers 5 fuses them."""
    if name in T:
        return T[name]
    alt = name.replace(".mlp.", ".block_sparse_moe.")
    if alt in T:
        return T[alt]
    # Phi-3.5-MoE: transformers 5 renames block_sparse_moe.gate to mlp.router
    alt = alt.replace(".block_sparse_moe.router.", ".block_sparse_moe.gate.")
    if alt in T:
        return T[alt]
    # ERNIE 4.5 MoE: mlp.moe_statics to mlp.gate.moe_statics
    alt = name.replace(".mlp.gate.moe_statics.", ".mlp.moe_statics.")
    if alt in T:
        return T[alt]
    m = re.match(r"(.*)\.mlp\.experts\.(gate_up_proj|down_proj)$", name)
    if not m:
        return None
    for base, g, u, d in ((f"{m[1]}.mlp.experts", "gate_proj", "up_proj", "down_proj"),
                          (f"{m[1]}.block_sparse_moe.experts", "w1", "w3", "w2")):
        if f"{base}.0.{g}.weight" not in T:
            continue
        e = 0
        parts = []
        while f"{base}.{e}.{g}.weight" in T:
            w = lambda k: T[f"{base}.{e}.{k}.weight"]
            parts.append(torch.cat([w(g), w(u)], 0) if m[2] == "gate_up_proj" else w(d))
            e += 1
        return torch.stack(parts)
    return None


def plan_style(model, name):
    plan = getattr(model, "tp_plan", None) or {}
    g = re.sub(r"\.\d+\.", ".*.", name)
    for key in (g, g.rsplit(".", 1)[0]):
        for pat, style in plan.items():
            if key == pat or key.endswith("." + pat) or key == "model." + pat:
                return style
    return None


def oracle_rank(rank, world, fam):
    """Compare this rank's local tensors under transformers' tp plan with tpconv's rank slices."""
    ref = REF[fam]
    model = load(ref.path, ref.kind, tp_plan="auto")
    T = folder_tensors(f"{WORK}/sets/{fam}/hf-{world}/tp{rank:02d}_pp00")
    # the test's own fusing of expert tensors must give the original's parameters
    bad_map = [n for n in ref.params if tpconv_runtime(n, ref.ckpt) is None or
               not torch.equal(tpconv_runtime(n, ref.ckpt), ref.params[n])]
    same, both_whole, tf_whole, gathered, bad = [], [], [], [], []
    for n, p in model.named_parameters():
        local = p.to_local() if isinstance(p, DTensor) else p.data
        full, mine = ref.params[n], tpconv_runtime(n, T)
        if mine is None:
            bad.append(f"{n}: tpconv's rank folder has no such tensor")
        elif local.shape == full.shape and torch.equal(local, full):
            (both_whole if torch.equal(mine, full) else tf_whole).append(n)
        elif local.shape == mine.shape and torch.equal(local, mine):
            same.append(n)
        elif (plan_style(model, n) or "").endswith("gather_output") and \
                full.shape[0] % world == 0 and torch.equal(local, full.chunk(world, 0)[rank]):
            gathered.append(n)
        else:
            bad.append(f"{n}: transformers {tuple(local.shape)}, tpconv {tuple(mine.shape)}")
    return dict(same=same, both_whole=both_whole, tf_whole=tf_whole, gathered=gathered, bad=bad,
                bad_map=bad_map)


def oracle_row(fam, world, per_rank):
    r0 = per_rank[0]
    bad = [f"rank {r}: {x}" for r, d in enumerate(per_rank) for x in d["bad"]]
    if r0["bad_map"]:
        return ("fail", f"the test's expert fusing does not give transformers' parameters: {short(r0['bad_map'])}")
    if not r0["same"] and not r0["gathered"] and not bad:
        return ("n/a", "transformers' tp plan shards none of this model's tensors "
                f"({len(r0['both_whole']) + len(r0['tf_whole'])} kept whole on every rank)")
    parts = [f"{len(r0['same'])} tensors sharded by transformers equal tpconv's rank slices on all {world} ranks"]
    if r0["tf_whole"]:
        parts.append(f"kept whole by transformers, split by tpconv: {short(r0['tf_whole'], 8)}")
    if r0["gathered"]:
        parts.append("split contiguously by transformers with a gathered output (colwise_gather_output), "
                     f"per part on head boundaries by tpconv: {short(r0['gathered'])}")
    parts.append(f"{len(r0['both_whole'])} whole in both")
    return ("fail", "; ".join(bad[:4]) + " | " + "; ".join(parts)) if bad else ("pass", "; ".join(parts))


# ---- torch: tpconv's DCP sets loaded into DTensor and FSDP2 meshes ----

def dcp_mesh_rank(rank, world, fam, path):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (world,))
    meta = dcp_meta(path)
    sd = {k: distribute_tensor(torch.zeros(size, dtype=dt), mesh, [Shard(0)]) for k, (size, dt) in meta.items()}
    dcp.load(sd, checkpoint_id=path)
    ref = REF[fam].ckpt
    return [k for k in sorted(set(ref) | set(sd)) if k not in sd or k not in ref or not torch.equal(
        sd[k].to_local(), distribute_tensor(ref[k], mesh, [Shard(0)]).to_local())]


def fsdp2_rank(rank, world, fam, path):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    ref = REF[fam]
    mesh = init_device_mesh("cpu", (world,))
    cfg = transformers.AutoConfig.from_pretrained(ref.path)
    torch.manual_seed(rank + 50)  # different random init on every rank: the load must overwrite it
    model = auto_class(ref.kind).from_config(cfg, dtype=torch.float32).eval()
    blocks = next(m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == cfg.num_hidden_layers)
    for layer in blocks:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    meta = dcp_meta(path)
    full = model.state_dict()
    sd = {k: v for k, v in full.items() if k in meta}
    ptr = lambda v: (v.to_local() if isinstance(v, DTensor) else v).data_ptr()
    loaded = {ptr(v) for v in sd.values()}
    missing = [k for k, v in full.items() if k not in meta and ptr(v) not in loaded]  # tied ones load with their twin
    dcp.load(sd, checkpoint_id=path)
    bad = [k for k, v in model.state_dict().items()
           if not torch.equal(v.full_tensor() if isinstance(v, DTensor) else v, ref.sd[k])]
    out = logits(model, ref.ids)
    return dict(missing=missing, bad=bad, logits=torch.equal(out, ref.logits),
                dmax=(out - ref.logits).abs().max().item())


def world_checks(rank, world, fams):
    """Every world-size check, each family's results gathered to rank 0 and
    written there: transformers' TP oracle, DCP into DTensor, DCP into FSDP2."""
    src = 4 if world == 2 else 2  # load a set written for another degree: a real reshard
    jobs = []
    for fam in fams:
        if os.path.isdir(f"{WORK}/sets/{fam}/hf-{world}"):
            jobs.append(("transformers", fam, f"tp_plan=\"auto\" oracle, {world} processes", oracle_rank,
                         (fam,)))
        p = f"{WORK}/sets/{fam}/dcp-{src}"
        if os.path.isdir(p):
            jobs.append(("torch", fam, f"DCP: dcp.load into a {world}-process DTensor Shard(0) mesh",
                         dcp_mesh_rank, (fam, p)))
            op = f"DCP: FSDP2 fully_shard model loads it, {world} processes"
            if not any(".experts." in k for k in REF[fam].ckpt):
                jobs.append(("torch", fam, op, fsdp2_rank, (fam, p)))
            elif rank == 0:
                result(WORK, "torch", fam, op, f"from tp {src} set", "n/a",
                       "transformers 5 fuses the experts when it loads a checkpoint (experts.gate_up_proj "
                       "[E, 2I, H]): its model's state_dict names are no checkpoint's, so no HF-named "
                       "DCP checkpoint (torch's own neither) loads into it by name")
    for consumer, fam, op, fn, args in jobs:
        try:
            mine = ("ok", fn(rank, world, *args))
        except Exception as e:
            traceback.print_exc()
            mine = ("error", f"{type(e).__name__}: {e}")
        got = [None] * world
        dist.all_gather_object(got, mine)
        if rank == 0:
            case = f"from tp {src} set" if consumer == "torch" else ""
            result(WORK, consumer, fam, op, case, *world_row(fn, fam, world, got))


def world_row(fn, fam, world, got):
    errs = [f"rank {r}: {g[1]}" for r, g in enumerate(got) if g[0] == "error"]
    if errs:
        return ("fail", "; ".join(sorted(set(e.split(": ", 1)[1] for e in errs)))[:500])
    vals = [g[1] for g in got]
    if fn is oracle_rank:
        return oracle_row(fam, world, vals)
    if fn is dcp_mesh_rank:
        bad = sorted({k for v in vals for k in v})
        return ("fail", f"{len(bad)} tensors differ: {short(bad)}") if bad else \
            ("pass", f"every rank's local Shard(0) piece equals distribute_tensor's of the original ({len(REF[fam].ckpt)} tensors)")
    v = vals[0]
    if v["missing"] or any(x["bad"] for x in vals):
        return ("fail", f"missing {short(v['missing'])}; differ: {short(sorted({k for x in vals for k in x['bad']}))}")
    lg = "logits bit-equal" if all(x["logits"] for x in vals) else f"logits max |d| {max(x['dmax'] for x in vals):.3g}"
    return ("pass", f"every parameter (full_tensor) bit-equal to the original; forward: {lg}")


# ---- main ----

def run_case(kind, fam, op, case, path):
    fn = {"full": check_full, "config": check_config, "rank": check_rank_folders, "genuine": check_genuine, "cast": check_cast}[kind]
    consumer = "torch" if kind == "genuine" else "transformers"
    try:
        return [(consumer, fam, op, case, *fn(fam, op, case, path))]
    except Exception as e:
        traceback.print_exc()
        return [(consumer, fam, op, case, "fail", e)]


def main():
    cases = [line.rstrip("\n").split("\t") for line in open(f"{WORK}/cases.tsv") if line.strip()]
    fams = [line.split("\t")[0] for line in open(f"{WORK}/families.tsv")]
    for fam in fams:
        try:
            REF[fam] = Ref(fam)
        except Exception as e:
            result(WORK, "transformers", fam, "load the original", "", "fail", e)
    for kind, fam, op, case, path in cases:
        if fam not in REF and kind != "genuine":
            continue
        if kind == "dcp":
            try:
                rows = check_dcp(fam, op, case, path)
            except Exception as e:
                traceback.print_exc()
                rows = [("torch", fam, "DCP: dcp.load, one process", case, "fail", e)]
        elif kind == "ranks":
            continue  # compared with their safetensors twins in the sweep
        else:
            rows = run_case(kind, fam, op, case, path)
        for row in rows:
            result(WORK, *row)
    for fam in REF:
        for row in sweep(fam):
            result(WORK, *row)
    for world in (2, 4):
        why = dist_util.launch(world_checks, world, [f for f in fams if f in REF], timeout=1200)
        if why:
            result(WORK, "torch", "(all)", f"{world}-process checks", "", "fail", why)


if __name__ == "__main__":
    main()
