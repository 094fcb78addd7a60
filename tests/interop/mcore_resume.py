"""Does Megatron-LM resume from a megatron-dist set tpconv wrote with its
optimizer state (shard --layout megatron-dist --optimizer)? Megatron's own
load decisions, re-implemented in torch from Megatron-LM at d98e8a6 (each
step cites its line; megatron/training/checkpointing.py unless named), run
over the set, then torch's DCP reader loads every optimizer.state.* tensor of
the folder Megatron picks and compares it with the source's moments.

    python3 mcore_resume.py SRC/train.pt SET MEGATRON_TRAIN [KIND]
        SET: the save folder (latest_checkpointed_iteration.txt at its top);
        MEGATRON_TRAIN: the --megatron-train list it was written with, read
        here as the same Megatron flags of the resumed run; KIND:
          resume   (default) the optimizer and scheduler are loaded, the
                   sharding type is the form written, no RNG is asked for,
                   the data resumes at iteration x global batch size, and
                   every state tensor holds the source's values
          release  the set as tpconv wrote it before issue 44 (release/):
                   Megatron skips its optimizer state
Prints "ok WHAT" / "not ok WHAT: why" lines (tests/interop/optim.sh).
Runs in the forky chroot (torch 2.14) beside make_mcore_optim_out.py.
"""
import argparse
import math
import os
import sys
import types

import torch
from torch.distributed.checkpoint import FileSystemReader
import torch.distributed.checkpoint as dcp

import make_mcore_optim_out as mo

# megatron/core/__init__.py:51-54 register_safe_globals (safe_globals.py:29-57):
# torch.load of common.pt stays weights_only, with argparse.Namespace allowed
torch.serialization.add_safe_globals([argparse.Namespace, types.SimpleNamespace])


def read_metadata(tracker):
    """:388-410: the tracker's text is an iteration, or 'release' (iteration 0)."""
    with open(tracker) as f:
        s = f.read().strip()
    try:
        return int(s), False
    except ValueError:
        if s != "release":
            raise SystemExit("ERROR: Invalid metadata file %s. Exiting" % tracker)
        return 0, True


def checkpoint_dir(load, iteration, release):
    """:230-246 get_checkpoint_name(..., return_base_dir=True)"""
    return os.path.join(load, "release" if release else "iter_{:07d}".format(iteration))


class Scheduler:
    """megatron/core/optimizer_param_scheduler.py: __init__ (:124-183),
    get_wd (:185-216, constant), get_lr (:218-282), step (:284-300),
    _check_and_set (:318-339), load_state_dict (:341-404)."""

    def __init__(self, groups, init_lr, max_lr, min_lr, lr_warmup_steps, lr_decay_steps, lr_decay_style, start_wd,
                 end_wd, wd_incr_steps, wd_incr_style, use_checkpoint=False, override=False):
        self.param_groups = groups
        self.init_lr, self.max_lr, self.min_lr = init_lr, float(max_lr), min_lr
        assert self.min_lr >= 0.0
        assert self.max_lr >= self.min_lr
        assert self.init_lr <= self.max_lr
        self.lr_warmup_steps, self.num_steps, self.lr_decay_steps = lr_warmup_steps, 0, lr_decay_steps
        assert self.lr_decay_steps > 0
        assert self.lr_warmup_steps < self.lr_decay_steps
        self.lr_decay_style = lr_decay_style
        self.start_wd, self.end_wd = start_wd, end_wd
        assert self.start_wd >= 0.0
        assert self.end_wd >= self.start_wd
        self.wd_incr_steps, self.wd_incr_style = wd_incr_steps, wd_incr_style
        self.override, self.use_checkpoint = override, use_checkpoint
        if override:
            assert not use_checkpoint, "both override and use-checkpoint are set."
        self.step(0)

    def get_wd(self, g):
        start_wd, end_wd = g.get("start_wd", self.start_wd), g.get("end_wd", self.end_wd)
        if self.num_steps > self.wd_incr_steps:
            return end_wd
        assert self.wd_incr_style == "constant", "only constant weight decay here"
        assert start_wd == end_wd
        return end_wd

    def get_lr(self, g):
        max_lr, min_lr = g.get("max_lr", self.max_lr), g.get("min_lr", self.min_lr)
        if self.lr_warmup_steps > 0 and self.num_steps <= self.lr_warmup_steps:
            return self.init_lr + ((max_lr - self.init_lr) * float(self.num_steps) / float(self.lr_warmup_steps))
        if self.lr_decay_style == "constant":
            return max_lr
        if self.num_steps > self.lr_decay_steps:
            return min_lr
        if self.lr_decay_style == "inverse-square-root":
            return max(min_lr, max_lr * max(self.lr_warmup_steps, 1) ** 0.5 / (max(self.num_steps, 1) ** 0.5))
        ratio = float(self.num_steps - self.lr_warmup_steps) / float(self.lr_decay_steps - self.lr_warmup_steps)
        assert 0.0 <= ratio <= 1.0
        if self.lr_decay_style == "linear":
            coeff = 1.0 - ratio
        elif self.lr_decay_style == "cosine":
            coeff = 0.5 * (math.cos(math.pi * ratio) + 1.0)
        else:
            raise Exception(f"{self.lr_decay_style} decay style is not supported.")
        return min_lr + coeff * (max_lr - min_lr)

    def step(self, increment):
        self.num_steps += increment
        for g in self.param_groups:
            g["lr"] = self.get_lr(g)
            g["weight_decay"] = self.get_wd(g) * g.get("wd_mult", 1.0)

    def _check_and_set(self, cls_value, sd_value, name):
        if self.override:
            return cls_value
        if not self.use_checkpoint:
            assert cls_value == sd_value, (f"OptimizerParamScheduler: class input value {cls_value} and checkpoint"
                                           f"value {sd_value} for {name} do not match")
        return sd_value

    def load_state_dict(self, sd):
        self.max_lr = self._check_and_set(self.max_lr, sd["start_lr"] if "start_lr" in sd else sd["max_lr"],
                                          "learning rate")
        self.min_lr = self._check_and_set(self.min_lr, sd["min_lr"], "minimum learning rate")
        w = sd["warmup_iter"] if "warmup_iter" in sd else sd["warmup_steps"] if "warmup_steps" in sd else sd["lr_warmup_steps"]
        self.lr_warmup_steps = self._check_and_set(self.lr_warmup_steps, w, "warmup iterations")
        d = sd["end_iter"] if "end_iter" in sd else sd["decay_steps"] if "decay_steps" in sd else sd["lr_decay_steps"]
        self.lr_decay_steps = self._check_and_set(self.lr_decay_steps, d, "total number of iterations")
        s = sd["decay_style"] if "decay_style" in sd else sd["lr_decay_style"]
        self.lr_decay_style = self._check_and_set(self.lr_decay_style, s, "learning rate decay style")
        self.step(increment=sd["num_iters"] if "num_iters" in sd else sd["num_steps"])
        if "start_wd" in sd:
            self.start_wd = self._check_and_set(self.start_wd, sd["start_wd"], "start weight decay")
            self.end_wd = self._check_and_set(self.end_wd, sd["end_wd"], "end weight decay")
            self.wd_incr_steps = self._check_and_set(self.wd_incr_steps, sd["wd_incr_steps"],
                                                     "total number of weight decay iterations")
            self.wd_incr_style = self._check_and_set(self.wd_incr_style, sd["wd_incr_style"], "weight decay incr style")


def run_args(train, tp, pp, **over):
    """The resumed run's flags (training/config/training_config.py defaults:
    lr_decay_style linear, lr_warmup_iters 0, min_lr 0.0, weight_decay 0.01,
    weight_decay_incr_style constant; arguments.py:1393-1397 start/end
    weight decay), from the --megatron-train list tpconv was given."""
    kv = dict(x.split("=", 1) for x in train.split(","))
    a = argparse.Namespace(
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, finetune=False, no_load_optim=False,
        no_load_rng=False, use_distributed_optimizer=True, ckpt_fully_parallel_load=False,
        global_batch_size=int(kv["global-batch-size"]), lr=float(kv.get("lr", 3e-4)),
        min_lr=float(kv.get("min-lr", 0.0)), lr_warmup_iters=int(kv.get("lr-warmup-iters", 0)),
        train_iters=int(kv.get("train-iters", 1000)), lr_decay_iters=int(kv["lr-decay-iters"]) if "lr-decay-iters" in kv else None,
        lr_decay_style=kv.get("lr-decay-style", "linear"), weight_decay=float(kv.get("weight-decay", 0.01)),
        weight_decay_incr_style="constant", lr_warmup_init=0.0, use_checkpoint_opt_param_scheduler=False,
        override_opt_param_scheduler=False)
    a.start_weight_decay = a.end_weight_decay = a.weight_decay
    for k, v in over.items():
        setattr(a, k, v)
    return a


def scheduler_of(args, groups):
    """training/training.py:2553-2606 get_optimizer_param_scheduler, iteration-based (:2558-2569)"""
    if args.lr_decay_iters is None:
        args.lr_decay_iters = args.train_iters
    g = args.global_batch_size
    return Scheduler(groups, args.lr_warmup_init, args.lr, args.min_lr, args.lr_warmup_iters * g,
                     args.lr_decay_iters * g, args.lr_decay_style, args.start_weight_decay, args.end_weight_decay,
                     args.train_iters * g, args.weight_decay_incr_style,
                     use_checkpoint=args.use_checkpoint_opt_param_scheduler,
                     override=args.override_opt_param_scheduler)


def load(load_dir, args):
    """load_checkpoint (:2452-3140) for ckpt_format torch_dist, the decisions
    only: what it loads, from where, and what it does with common.pt."""
    r = {}
    tracker = os.path.join(load_dir, "latest_checkpointed_iteration.txt")  # :375-378
    iteration, release = read_metadata(tracker)  # _load_base_checkpoint :2016-2019
    r["dir"] = checkpoint_dir(load_dir, iteration, release)  # :2056
    # the common state (strategies/common.py:46-48 load_common; serialization.py:211-213)
    common = torch.load(os.path.join(r["dir"], "common.pt"), map_location="cpu")
    ckpt_args = common.get("args") or types.SimpleNamespace()  # :2552-2558
    ckpt_tp_pp = (getattr(ckpt_args, "tensor_model_parallel_size", 1), getattr(ckpt_args, "pipeline_model_parallel_size", 1))
    run_tp_pp = (args.tensor_model_parallel_size, args.pipeline_model_parallel_size)  # :2567-2571
    r["release"] = release
    # :2574-2593 whether the RNG state is asked for
    r["load_rng"] = (ckpt_tp_pp == run_tp_pp and not release and not args.finetune and not args.no_load_rng
                     and not getattr(ckpt_args, "no_save_rng", False))
    meta = common.get("content_metadata")  # :2594-2597, serialization.py:314-333 load_content_metadata
    # :2610-2618 whether the optimizer (and its scheduler) is loaded
    r["load_optim"] = (not release and not args.finetune and not args.no_load_optim
                       and not getattr(ckpt_args, "no_save_optim", False))
    if r["load_optim"] and args.use_distributed_optimizer:
        if meta is None:  # :2622-2632 checkpoints before content metadata
            meta = {"distrib_optim_sharding_type": "fully_sharded_model_space"
                    if getattr(ckpt_args, "ckpt_fully_parallel_save", False) else "dp_zero_gather_scatter"}
        # :2649-2656 another tp x pp needs a fully reshardable form
        # (distrib_optimizer.py:127-131 checkpoint_fully_reshardable_formats)
        if ckpt_tp_pp != run_tp_pp and meta["distrib_optim_sharding_type"] not in (
                "fully_reshardable", "fully_sharded_model_space", "fsdp_dtensor"):
            raise RuntimeError("(TP, PP) mismatch after resume: not supported for DistributedOptimizer with sharding type %s"
                               % meta["distrib_optim_sharding_type"])
        # :2659-2667 fully parallel load and dp_zero_gather_scatter
        if args.ckpt_fully_parallel_load and meta["distrib_optim_sharding_type"] == "dp_zero_gather_scatter":
            raise RuntimeError("Fully parallel load is not supported for dp_zero_gather_scatter checkpoints.")
    # the form the optimizer's sharded state dict is built in at load
    # (generate_state_dict :1600-1614 -> distrib_optimizer.py:1511-1512)
    r["sharding_type"] = (meta or {}).get("distrib_optim_sharding_type", "fully_sharded_model_space")
    # :2852-2866 the iteration
    r["iteration"] = 0 if args.finetune or release else common["iteration"]
    r["flops"] = common.get("num_floating_point_operations_so_far", 0)  # :2867
    if "args" in common and not args.finetune:  # :2870-2881 the data's position
        args.consumed_train_samples = getattr(ckpt_args, "consumed_train_samples", 0)
        args.skipped_train_samples = getattr(ckpt_args, "skipped_train_samples", 0)
        args.consumed_valid_samples = getattr(ckpt_args, "consumed_valid_samples", 0)
    r["consumed"] = getattr(args, "consumed_train_samples", 0)
    # :2958-3045 the optimizer's common state, then the scheduler (a
    # KeyError: "Unable to load optimizer from checkpoint ..., exiting")
    r["scheduler"] = None
    if r["load_optim"]:
        opt = common["optimizer"]
        parts = [opt[0], opt[1]] if 0 in opt else [opt]  # a ChainedOptimizer (optimizer.py:1589-1603)
        groups = [dict(g) for p in parts for g in p["optimizer"]["param_groups"]]
        r["param_state_sharding_type"] = {p["param_state_sharding_type"] for p in parts}
        sch = scheduler_of(args, groups)
        sch.load_state_dict(common["opt_param_scheduler"])  # :3001-3005
        if args.override_opt_param_scheduler and sch.num_steps != args.consumed_train_samples:  # :3034-3042
            sch.num_steps = args.consumed_train_samples
            sch.step(increment=0)
        r["scheduler"] = sch
    return r


def state_equal(src_path, folder):
    """torch's DCP reader loads every optimizer.state.* tensor of the folder
    (shapes and dtypes from its .metadata, as Megatron's load requests them)
    and each equals the source's moment rebuilt in Megatron's layout."""
    md = FileSystemReader(folder).read_metadata().state_dict_metadata
    keys = [k for k in md if k.startswith("optimizer.state.")]
    sd = {k: torch.empty(tuple(md[k].size), dtype=md[k].properties.dtype) for k in keys}
    dcp.load(sd, storage_reader=FileSystemReader(folder))
    src = torch.load(src_path, weights_only=False)
    n = 0
    for key, want_key in (("param", "fp32_param"), ("exp_avg", "exp_avg"), ("exp_avg_sq", "exp_avg_sq")):
        vpad = sd["optimizer.state.%s.embedding.word_embeddings.weight" % key].shape[0]
        for name, t in mo.megatron(src, want_key, vpad).items():
            if ".local_experts." in name:  # [layers, experts, ...] under one key
                f = name.split(".")
                l, e = int(f[2]), int(f[6])
                k = name.replace("layers.%d." % l, "layers.").replace("local_experts.%d." % e, "experts.")
                got = sd["optimizer.state.%s.%s" % (key, k)][l][e]
            elif ".layers." in name:
                l = int(name.split(".")[2])
                got = sd["optimizer.state.%s.%s" % (key, name.replace("layers.%d." % l, "layers."))][l]
            else:
                got = sd["optimizer.state.%s.%s" % (key, name)]
            if not torch.equal(got, t):
                return None, "%s of %s differs" % (key, name)
            n += 1
    return n, len(keys)


def tap(good, what, why=""):
    print(("ok %s" % what) if good else ("not ok %s: %s" % (what, why)))


def expect_error(f, kind, text):
    try:
        f()
    except kind as ex:
        return text in str(ex), repr(ex)
    return False, "no %s" % kind.__name__


def main():
    src, load_dir, train = sys.argv[1:4]
    kind = sys.argv[4] if len(sys.argv) > 4 else "resume"
    name = os.path.basename(load_dir.rstrip("/"))
    if kind == "release":
        r = load(load_dir, run_args(train, 2, 2))
        tap(r["release"] and not r["load_optim"] and r["iteration"] == 0 and r["scheduler"] is None,
            "%s (release/, as before issue 44): Megatron skips its optimizer and scheduler, iteration 0" % name, r)
        return
    # the recipe (doc/training.md): a set without a schedule resumes with
    # --override-opt_param-scheduler, one with it with the same flags
    sched = "lr=" in train
    a = run_args(train, 2, 2, override_opt_param_scheduler=not sched)
    r = load(load_dir, a)
    it = r["iteration"]
    tap(not r["release"] and it > 0 and r["dir"].endswith("iter_%07d" % it) and r["load_optim"],
        "%s: Megatron loads the optimizer from %s (iteration %d)" % (name, os.path.basename(r["dir"]), it), r)
    if not r["load_optim"]:
        return
    tap(r["sharding_type"] == "fully_reshardable" and r["param_state_sharding_type"] == {"fully_reshardable"},
        "%s: the optimizer is read in the form written (fully_reshardable, content_metadata)" % name, r)
    tap(not r["load_rng"], "%s: no RNG state is asked for (args.no_save_rng)" % name, r)
    tap(r["consumed"] == it * a.global_batch_size and r["scheduler"].num_steps == r["consumed"] and r["flops"] == 0,
        "%s: the data resumes at %d samples, the scheduler's num_steps the same" % (name, r["consumed"]), r)
    n, nkeys = state_equal(src, r["dir"])
    tap(n is not None and n > 0, "%s: torch DCP loads the %s optimizer.state keys, %s tensors equal the source's moments"
        % (name, nkeys, n), nkeys)
    # another parallelism (tp 1 x pp 1): the fully reshardable form is accepted
    r1 = load(load_dir, run_args(train, 1, 1, override_opt_param_scheduler=not sched))
    tap(r1["load_optim"] and not r1["load_rng"], "%s: a resume at tp 1 x pp 1 passes the resharding check" % name, r1)
    if sched:
        s = r["scheduler"]
        tap(s.lr_decay_steps == a.lr_decay_iters * a.global_batch_size and s.num_steps == r["consumed"],
            "%s: the saved schedule equals the run's flags (no assert), lr %.6g at %d samples" % (name, s.param_groups[0]["lr"], s.num_steps), vars(s))
        return
    # the schedule unknown (None): loud without the override, right with it
    good, why = expect_error(lambda: load(load_dir, run_args(train, 2, 2)), AssertionError, "for learning rate do not match")
    tap(good, "%s: schedule None, default flags: OptimizerParamScheduler's assert names the learning rate" % name, why)
    good, why = expect_error(lambda: load(load_dir, run_args(train, 2, 2, use_checkpoint_opt_param_scheduler=True)),
                             TypeError, "NoneType")
    tap(good, "%s: schedule None, --use-checkpoint-opt_param-scheduler: fails on None, never takes a made-up schedule" % name, why)
    ro = load(load_dir, run_args(train, 2, 2, override_opt_param_scheduler=True))
    s = ro["scheduler"]
    want = scheduler_of(run_args(train, 2, 2), [dict(g) for g in s.param_groups])
    want.num_steps = ro["consumed"]
    want.step(0)
    tap(s.num_steps == ro["consumed"] and s.param_groups[0]["lr"] == want.param_groups[0]["lr"] and s.max_lr == want.max_lr,
        "%s: --override-opt_param-scheduler: the run's schedule at num_steps %d (lr %.6g)" % (name, s.num_steps, s.param_groups[0]["lr"]),
        vars(s))
    # the sharding type missing from content_metadata (the old output): the
    # load would build another form than the one written
    meta = dict(torch.load(os.path.join(r["dir"], "common.pt"), map_location="cpu")["content_metadata"])
    meta.pop("distrib_optim_sharding_type")
    tap(meta.get("distrib_optim_sharding_type", "fully_sharded_model_space") == "fully_sharded_model_space",
        "%s: without distrib_optim_sharding_type the load would build fully_sharded_model_space (distrib_optimizer.py:1511-1512)" % name)


if __name__ == "__main__":
    main()
