"""DCP saves with AdamW optimizer state, written by real torch 2.x FSDP2, and the
resume check that proves a converted optimizer state (run in the forky chroot,
tests/interop/chroot.sh; not in `make test`).

    python3 make_optim.py gen OUTDIR
        writes, each a DCP folder saved as torchtitan and get_state_dict save
        {"model": ..., "optim": ...} (keys model.<fqn>, optim.state.<fqn>.exp_avg,
        .exp_avg_sq, .step, optim.param_groups):
          optim_fsdp2/   a tiny LLaMA (HF names, GQA, vocab 70) trained two steps
                         with AdamW on 2 gloo processes under FSDP2 (fully_shard:
                         every parameter and moment Shard(0)), two param groups as
                         the HF Trainer makes them (weight decay on, off for norms);
                         losses.json: the losses of steps 1-4 of the same run (steps
                         3 and 4 taken after the save).
          optim_tagged/  the same model after one step, every value rewritten so it
                         names its own place: parameter number k (named_parameters
                         order), element i (C order of the global tensor) holds
                         k * 10000 + i + 0.25, its exp_avg k * 10000 + i, its
                         exp_avg_sq 1e6 + k * 10000 + i (all exact in f32), step
                         100 + k; names.json lists the parameter names in order.
    python3 make_optim.py gen-tp OUTDIR
        optim_fsdp_tp/: the same model and steps on 4 processes under FSDP + TP
        (a dp 2 x tp 2 mesh, as torchtitan composes them: q/k/v and gate/up
        ColwiseParallel, o/down RowwiseParallel, then fully_shard on dp; the batch
        split over dp), saved after step 2; losses.json as above.
    python3 make_optim.py resume DIR WORLD OUT.json
        WORLD gloo processes build the model fresh under FSDP2, load DIR (a DCP
        folder) through get_state_dict / dcp.load / set_state_dict, take step 3
        (update with the loaded moments) and compute step 4's loss; OUT.json gets
        {"loss3": ..., "loss4": ..., "hash": sha256 of every parameter after step 3}.
    python3 make_optim.py resume-pt MODEL.safetensors OPTIMIZER.pt OUT.json
        the same in one process without FSDP: the model from safetensors, AdamW
        restored with load_state_dict(torch.load(OPTIMIZER.pt, weights_only=True));
        OPTIMIZER.pt "none": a fresh AdamW (the control: what losing the state costs).
    python3 make_optim.py trainer CKPT_DIR NAMES.json OUT.json
        transformers' Trainer (LlamaForCausalLM of the same shape, its own
        optimizer and param groups) loads CKPT_DIR/optimizer.pt the way it resumes
        (_load_optimizer_and_scheduler; scheduler.pt is made for it); OUT.json lists
        the parameters whose state is not the tagged fixture's own.
"""
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

V, H, NH, NKV, HD, I, L = 70, 16, 4, 2, 4, 36, 2
BATCH, SEQ = 4, 8
LR, BETAS, EPS, WD = 1e-2, (0.9, 0.95), 1e-8, 0.1


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(H, NH * HD, bias=False)
        self.k_proj = nn.Linear(H, NKV * HD, bias=False)
        self.v_proj = nn.Linear(H, NKV * HD, bias=False)
        self.o_proj = nn.Linear(NH * HD, H, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        # -1: under tensor parallelism a rank holds heads / tp of them
        q = self.q_proj(x).view(b, s, -1, HD).transpose(1, 2)
        k = self.k_proj(x).view(b, s, -1, HD).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, HD).transpose(1, 2)

        def rot(t):
            t1, t2 = t[..., : HD // 2], t[..., HD // 2:]
            return t * cos + torch.cat((-t2, t1), dim=-1) * sin
        q, k = rot(q), rot(k)
        k = k.repeat_interleave(NH // NKV, dim=1)
        v = v.repeat_interleave(NH // NKV, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = Attn()
        self.mlp = MLP()
        self.input_layernorm = nn.RMSNorm(H, eps=1e-5)
        self.post_attention_layernorm = nn.RMSNorm(H, eps=1e-5)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, H)
        self.layers = nn.ModuleList(Layer() for _ in range(L))
        self.norm = nn.RMSNorm(H, eps=1e-5)


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Inner()
        self.lm_head = nn.Linear(H, V, bias=False)

    def forward(self, ids):
        inv = 1.0 / (10000.0 ** (torch.arange(0, HD, 2, dtype=torch.float32) / HD))
        f = torch.outer(torch.arange(ids.shape[1], dtype=torch.float32), inv)
        emb = torch.cat((f, f), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.model.norm(x))


def groups(model):
    """HF Trainer's two groups: weight decay except for biases and norms."""
    decay = [p for n, p in model.named_parameters() if "norm" not in n]
    nodecay = [p for n, p in model.named_parameters() if "norm" in n]
    return [{"params": decay, "weight_decay": WD}, {"params": nodecay, "weight_decay": 0.0}]


def group_names(model):
    return [n for n, _ in model.named_parameters() if "norm" not in n] + \
           [n for n, _ in model.named_parameters() if "norm" in n]


def make_opt(model):
    return torch.optim.AdamW(groups(model), lr=LR, betas=BETAS, eps=EPS, foreach=False)


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    ids = torch.randint(0, V, (BATCH, SEQ + 1), generator=g)
    return ids[:, :-1], ids[:, 1:]


def loss_of(model, step, rank, world):
    """Mean token loss of the global batch of `step`: each rank its rows."""
    x, y = batch(step)
    per = BATCH // world
    x, y = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))


def setup_tp(rank, world, port):
    """FSDP + TP on a (dp 2, tp 2) mesh, as torchtitan composes them: q/k/v and
    gate/up ColwiseParallel, o/down RowwiseParallel, then fully_shard on dp."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["USE_LIBUV"] = "0"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    torch.manual_seed(0)
    model = Llama()
    mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("dp", "tp"))
    plan = {"self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(), "mlp.down_proj": RowwiseParallel()}
    for layer in model.model.layers:
        parallelize_module(layer, mesh["tp"], plan)
        fully_shard(layer, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model, make_opt(model), mesh


def gen_tp_worker(rank, world, out, port):
    """the batch split over dp only: tp ranks of one dp rank see the same rows"""
    model, opt, mesh = setup_tp(rank, world, port)
    dp = mesh.get_local_rank("dp")
    losses = []
    for s in (1, 2, 3):
        loss = loss_of(model, s, dp, 2)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(global_loss(loss, world))
        if s == 2:
            save(model, opt, os.path.join(out, "optim_fsdp_tp"))
    with torch.no_grad():
        losses.append(global_loss(loss_of(model, 4, dp, 2), world))
    h = param_hash(model)
    if rank == 0:
        with open(os.path.join(out, "optim_fsdp_tp", "losses.json"), "w") as f:
            json.dump({"losses": losses, "hash3": h, "world": world, "mesh": "dp 2 x tp 2"}, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


def setup(rank, world, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["USE_LIBUV"] = "0"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = Llama()
    mesh = init_device_mesh("cpu", (world,))
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, make_opt(model), mesh


def global_loss(loss, world):
    t = loss.detach().clone()
    dist.all_reduce(t)
    return (t / world).item()


def train_step(model, opt, step, rank, world):
    loss = loss_of(model, step, rank, world)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return global_loss(loss, world)


def save(model, opt, out):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=out)


def param_hash(model):
    h = hashlib.sha256()
    for n, p in model.named_parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p.detach()
        h.update(n.encode())
        h.update(full.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def gen_worker(rank, world, out, port):
    model, opt, mesh = setup(rank, world, port)
    losses = [train_step(model, opt, s, rank, world) for s in (1, 2)]
    save(model, opt, os.path.join(out, "optim_fsdp2"))
    losses.append(train_step(model, opt, 3, rank, world))
    with torch.no_grad():
        losses.append(global_loss(loss_of(model, 4, rank, world), world))
    h = param_hash(model)
    if rank == 0:
        with open(os.path.join(out, "optim_fsdp2", "losses.json"), "w") as f:
            json.dump({"losses": losses, "hash3": h, "world": world}, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    # the tagged save: a fresh run, one step, then every value rewritten
    model, opt, mesh = setup(rank, world, port + 1)
    train_step(model, opt, 1, rank, world)
    from torch.distributed.tensor import distribute_tensor
    with torch.no_grad():
        for k, (n, p) in enumerate(model.named_parameters()):
            tag = (torch.arange(p.numel(), dtype=torch.float64) + k * 10000).reshape(p.shape)
            st = opt.state[p]
            for key, full in (("exp_avg", tag), ("exp_avg_sq", tag + 1e6)):
                st[key].to_local().copy_(distribute_tensor(full.float(), mesh, p.placements).to_local())
            p.to_local().copy_(distribute_tensor((tag + 0.25).float(), mesh, p.placements).to_local())
            st["step"].fill_(100 + k)
    save(model, opt, os.path.join(out, "optim_tagged"))
    if rank == 0:
        with open(os.path.join(out, "optim_tagged", "names.json"), "w") as f:
            json.dump({"named_parameters": [n for n, _ in model.named_parameters()],
                       "param_groups": group_names(model)}, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


def resume_worker(rank, world, src, out, port):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    model, opt, mesh = setup(rank, world, port)
    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=src)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    loss3 = train_step(model, opt, 3, rank, world)
    with torch.no_grad():
        loss4 = global_loss(loss_of(model, 4, rank, world), world)
    h = param_hash(model)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"loss3": loss3, "loss4": loss4, "hash3": h, "world": world}, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


def resume_pt(model_path, opt_path, out):
    from safetensors.torch import load_file
    torch.manual_seed(0)
    model = Llama()
    sd = load_file(model_path)
    sd = {k[len("model."):] if k.startswith("model.model.") or k.startswith("model.lm_head") else k: v
          for k, v in sd.items()}
    model.load_state_dict(sd, strict=True)
    opt = make_opt(model)
    if opt_path != "none":
        opt.load_state_dict(torch.load(opt_path, weights_only=True))
    loss3 = loss_of(model, 3, 0, 1)
    loss3.backward()
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        loss4 = loss_of(model, 4, 0, 1).item()
    with open(out, "w") as f:
        json.dump({"loss3": loss3.item(), "loss4": loss4, "hash3": param_hash(model), "world": 1}, f, indent=1)


def trainer(ckpt, names_path, out):
    import tempfile
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments
    cfg = LlamaConfig(vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=L, num_attention_heads=NH,
                      num_key_value_heads=NKV, head_dim=HD, tie_word_embeddings=False, rms_norm_eps=1e-5)
    model = LlamaForCausalLM(cfg)
    with tempfile.TemporaryDirectory() as td:
        args = TrainingArguments(output_dir=td, learning_rate=LR, weight_decay=WD, adam_beta1=BETAS[0],
                                 adam_beta2=BETAS[1], adam_epsilon=EPS, report_to=[], use_cpu=True)
        tr = Trainer(model=model, args=args)
        tr.create_optimizer_and_scheduler(num_training_steps=10)
        torch.save(tr.lr_scheduler.state_dict(), os.path.join(ckpt, "scheduler.pt"))
        tr._load_optimizer_and_scheduler(ckpt)
    names = json.load(open(names_path))
    tag_of = {n: k for k, n in enumerate(names["named_parameters"])}
    bad, n = [], 0
    for nm, p in model.named_parameters():
        n += 1
        st, k = tr.optimizer.state.get(p), tag_of.get(nm, -1)
        want = (torch.arange(p.numel(), dtype=torch.float64) + k * 10000).reshape(p.shape)
        if st is None or k < 0 or not torch.equal(st["exp_avg"].double(), want) or \
                not torch.equal(st["exp_avg_sq"].double(), want + 1e6) or float(st["step"]) != 100 + k:
            bad.append(nm)
    with open(out, "w") as f:
        json.dump({"bad": bad, "params": n, "optim": args.optim if isinstance(args.optim, str) else str(args.optim),
                   "groups": [len(g["params"]) for g in tr.optimizer.param_groups]}, f, indent=1)


def main():
    import torch.multiprocessing as mp
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    if sys.argv[1] == "gen":
        out = sys.argv[2]
        os.makedirs(out, exist_ok=True)
        mp.spawn(gen_worker, args=(2, out, 29531), nprocs=2, join=True)
    elif sys.argv[1] == "gen-tp":
        out = sys.argv[2]
        os.makedirs(out, exist_ok=True)
        mp.spawn(gen_tp_worker, args=(4, out, 29551), nprocs=4, join=True)
    elif sys.argv[1] == "resume":
        world = int(sys.argv[3])
        mp.spawn(resume_worker, args=(world, sys.argv[2], sys.argv[4], 29541), nprocs=world, join=True)
    elif sys.argv[1] == "resume-pt":
        resume_pt(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "trainer":
        trainer(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit("usage: make_optim.py gen OUTDIR | resume DIR WORLD OUT.json | resume-pt MODEL OPT OUT.json")


if __name__ == "__main__":
    main()
