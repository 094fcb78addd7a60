#!/usr/bin/env python3
"""Write DeepSpeed ZeRO checkpoints (stage 1, 2, 3) the way DeepSpeed saves
them, with real torch and no DeepSpeed (not packaged in Debian).

Followed (DeepSpeed master, 2024-2025):
  deepspeed/runtime/engine.py  _get_ckpt_name / _get_zero_ckpt_name (file names),
      _save_checkpoint (model-states keys: module, buffer_names, optimizer=None,
      param_shapes, frozen_param_shapes, frozen_param_fragments, shared_params,
      lr_scheduler, sparse_tensor_module_names, skipped_steps, global_steps,
      global_samples, dp_world_size, mp_world_size, ds_config, ds_version),
      _save_zero_checkpoint ({optimizer_state_dict, ds_config, ds_version}),
      _get_zero_param_shapes, _get_shared_params, _get_param_fragment_func
      (stage <= 2: the whole frozen tensor; stage 3: its ds_tensor piece)
  deepspeed/runtime/zero/stage_1_and_2.py  state_dict(): loss_scaler,
      dynamic_loss_scale, overflow, clip_grad, base_optimizer_state,
      single_partition_of_fp32_groups, zero_stage, group_paddings,
      partition_count, ds_version, param_slice_mappings; each group's params
      flattened and padded to a multiple of nccl_start_alignment_factor (2) x
      world size, then cut into world-size equal partitions
  deepspeed/runtime/zero/stage3.py  _rigid_state_dict(): zero_stage,
      loss_scaler, dynamic_loss_scale, overflow, partition_count,
      optimizer_state_dict, fp32_flat_groups; each parameter padded to a
      multiple of world size and cut in world-size pieces (partition_parameters
      _partition_param); sub-groups of sub_group_size elements
DeepSpeed's own classes are stand-ins with DeepSpeed's module and class
names, so the pickles name the same globals real ones do.

usage: make_zero.py OUT_DIR --stage S --world W [--seed N] [--tag global_step14]
       [--dtype bf16|f16] [--expected FILE.pt] [--from MODEL.pt] [--no-moments]
"""
import argparse
import enum
import os
import sys
import types
from collections import OrderedDict

import torch


def _module(name):
    parts = name.split('.')
    for i in range(1, len(parts) + 1):
        n = '.'.join(parts[:i])
        if n not in sys.modules:
            sys.modules[n] = types.ModuleType(n)
            if i > 1:
                setattr(sys.modules['.'.join(parts[:i - 1])], parts[i - 1], sys.modules[n])
    return sys.modules[name]


def _place(cls, modname):
    cls.__module__ = modname
    setattr(_module(modname), cls.__name__, cls)
    return cls


class ZeroStageEnum(int, enum.Enum):
    disabled = 0
    optimizer_states = 1
    gradients = 2
    weights = 3
    max_stage = 3


class DynamicLossScaler:
    def __init__(self):
        self.cur_scale = 65536.0
        self.cur_iter = 14
        self.last_overflow_iter = -1
        self.scale_factor = 2.0
        self.scale_window = 1000
        self.min_scale = 1.0
        self.delayed_shift = 1
        self.cur_hysteresis = 1
        self.consecutive_hysteresis = False
        self.raise_error_at_min_scale = True
        self.dynamic = True


class DeepSpeedConfig:
    def __init__(self, stage, world):
        self.train_batch_size = 32
        self.train_micro_batch_size_per_gpu = 32 // world
        self.gradient_accumulation_steps = 1
        self.zero_enabled = True
        self.zero_optimization_stage = stage
        self.bfloat16_enabled = True
        self.world_size = world
        self._param_dict = {"zero_optimization": {"stage": stage}, "bf16": {"enabled": True},
                            "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}


def install_stand_ins():
    _place(ZeroStageEnum, 'deepspeed.runtime.zero.config')
    _place(DynamicLossScaler, 'deepspeed.runtime.fp16.loss_scaler')
    _place(DeepSpeedConfig, 'deepspeed.runtime.config')


def model_tensors(seed):
    """A small LLaMA-shaped model: sizes chosen so partition boundaries cut rows."""
    g = torch.Generator().manual_seed(seed)
    H, V, F, KV = 20, 37, 28, 10
    params = OrderedDict()

    def p(name, *shape):
        params[name] = torch.randn(*shape, generator=g, dtype=torch.float32)

    p('model.embed_tokens.weight', V, H)
    for l in range(2):
        pre = f'model.layers.{l}.'
        p(pre + 'self_attn.q_proj.weight', H, H)
        p(pre + 'self_attn.k_proj.weight', KV, H)
        p(pre + 'self_attn.v_proj.weight', KV, H)
        p(pre + 'self_attn.o_proj.weight', H, H)
        p(pre + 'mlp.gate_proj.weight', F, H)
        p(pre + 'mlp.up_proj.weight', F, H)
        p(pre + 'mlp.down_proj.weight', H, F)
        p(pre + 'input_layernorm.weight', H)
        p(pre + 'post_attention_layernorm.weight', H)
    p('model.norm.weight', H)
    p('score.bias', 3)
    buffers = OrderedDict()
    buffers['model.layers.0.self_attn.rotary_emb.inv_freq'] = torch.rand(5, generator=g).to(torch.bfloat16)
    buffers['model.position_ids'] = torch.arange(11, dtype=torch.int64)
    frozen = ['model.layers.0.input_layernorm.weight', 'score.bias']
    shared = OrderedDict([('lm_head.weight', 'model.embed_tokens.weight')])
    return params, buffers, frozen, shared


def groups_of(params, frozen):
    """HF Trainer's two groups: decayed weights, then norms and biases."""
    decay = [n for n, t in params.items() if n not in frozen and t.dim() >= 2]
    nodecay = [n for n, t in params.items() if n not in frozen and t.dim() < 2]
    return [decay, nodecay]


MOMENTS = True


def adam_state(part):
    if not MOMENTS:  # the bench: moments only cost disk (tpconv reads them only for --optimizer)
        return {'step': torch.tensor(14.0)}
    # each element names its master's: exp_avg = master / 2, exp_avg_sq =
    # master * master (f32), so a moment read onto the wrong element shows
    return {'step': torch.tensor(14.0), 'exp_avg': part * 0.5, 'exp_avg_sq': part * part}


def from_file(path):
    """A model from a torch file (the bench's LLaMA): its tensors as the fp32
    masters, every one trainable, no buffers, no ties."""
    sd = torch.load(path)
    params = OrderedDict((k, v.float()) for k, v in sd.items())
    return params, OrderedDict(), [], OrderedDict()


def save_zero(out, stage, world, seed, tag, low, src=None, moments=True):
    install_stand_ins()
    params, buffers, frozen, shared = from_file(src) if src else model_tensors(seed)
    groups = groups_of(params, frozen)
    d = os.path.join(out, tag)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(out, 'latest'), 'w') as f:
        f.write(tag)
    cfg = DeepSpeedConfig(stage, world)
    ver = '0.14.4'

    # the module state dict at training precision (tied lm_head shares storage)
    module = OrderedDict()
    for n, t in params.items():
        module[n] = t.to(low) if stage < 3 else torch.empty(0, dtype=low)
    if 'model.embed_tokens.weight' in params and 'lm_head.weight' not in params:
        module['lm_head.weight'] = module['model.embed_tokens.weight']
    for n, b in buffers.items():
        module[n] = b

    if stage < 3:
        align = 2 * world
        parts = [[] for _ in range(world)]
        paddings = [[] for _ in range(world)]
        slice_maps = [[] for _ in range(world)]
        for grp in groups:
            flat = torch.cat([params[n].flatten() for n in grp])
            pad = (-flat.numel()) % align
            flat = torch.cat([flat, torch.zeros(pad)])
            size = flat.numel() // world
            for r in range(world):
                parts[r].append(flat[r * size:(r + 1) * size].clone())
                paddings[r].append(pad if r == world - 1 else 0)
                slice_maps[r].append(OrderedDict())
        param_shapes = [OrderedDict((n, params[n].shape) for n in grp) for grp in groups]
        model_files = {'mp_rank_00_model_states.pt': None}
    else:
        sub_group = 700  # sub_group_size: group 0 splits into sub-groups
        subgroups = []
        for grp in groups:
            cur, size = [], 0
            for n in grp:
                cur.append(n)
                size += params[n].numel()
                if size >= sub_group:
                    subgroups.append(cur)
                    cur, size = [], 0
            if cur:
                subgroups.append(cur)
        # each rank's sub-group buffer, filled piece by piece (no second copy of the model)
        parts = [[] for _ in range(world)]
        for sg in subgroups:
            pns = [-(-params[n].numel() // world) for n in sg]
            bufs = [torch.zeros(sum(pns)) for _ in range(world)]
            at = 0
            for n, pn in zip(sg, pns):
                flat = params[n].view(-1)
                for r in range(world):
                    piece = flat[r * pn:(r + 1) * pn]
                    bufs[r][at:at + piece.numel()] = piece
                at += pn
            for r in range(world):
                parts[r].append(bufs[r])
        param_shapes = [OrderedDict((n, params[n].shape) for n in sg) for sg in subgroups]
        model_files = {f'zero_pp_rank_{r}_mp_rank_00_model_states.pt': r for r in range(world)}

    frozen_shapes = OrderedDict((n, params[n].shape) for n in frozen)
    for fname, r in model_files.items():
        if stage < 3:
            frags = OrderedDict((n, params[n].to(low)) for n in frozen)
        else:
            frags = OrderedDict()
            for n in frozen:
                flat = params[n].to(low).flatten()
                pn = -(-flat.numel() // world)
                flat = torch.cat([flat, torch.zeros(pn * world - flat.numel(), dtype=low)])
                frags[n] = flat[r * pn:(r + 1) * pn].clone()
        sd = OrderedDict()
        sd['module'] = module
        sd['buffer_names'] = list(buffers.keys())
        sd['optimizer'] = None
        sd['param_shapes'] = param_shapes
        sd['frozen_param_shapes'] = frozen_shapes
        sd['shared_params'] = dict(shared)
        sd['frozen_param_fragments'] = frags
        sd['lr_scheduler'] = {'last_epoch': 14, '_step_count': 15, 'base_lrs': [1e-4, 1e-4]}
        sd['data_sampler'] = None
        sd['random_ltd'] = None
        sd['sparse_tensor_module_names'] = set()
        sd['skipped_steps'] = 0
        sd['global_steps'] = 14
        sd['global_samples'] = 448
        sd['dp_world_size'] = world
        sd['mp_world_size'] = 1
        sd['ds_config'] = cfg
        sd['ds_version'] = ver
        torch.save(sd, os.path.join(d, fname))

    for r in range(world):
        o = OrderedDict()
        o['loss_scaler'] = DynamicLossScaler()
        o['dynamic_loss_scale'] = True
        o['overflow'] = False
        if stage < 3:
            o['clip_grad'] = 1.0
            o['base_optimizer_state'] = {
                'state': {i: adam_state(p) for i, p in enumerate(parts[r])},
                'param_groups': [{'lr': 1e-4, 'betas': (0.9, 0.999), 'eps': 1e-8, 'weight_decay': wd,
                                  'params': [i]} for i, wd in enumerate((0.01, 0.0))]}
            o['single_partition_of_fp32_groups'] = parts[r]
            o['zero_stage'] = ZeroStageEnum.gradients if stage == 2 else ZeroStageEnum.optimizer_states
            o['group_paddings'] = paddings[r]
            o['partition_count'] = [world] * len(groups)
            o['ds_version'] = ver
            o['param_slice_mappings'] = slice_maps[r]
        else:
            o['zero_stage'] = ZeroStageEnum.weights
            o['partition_count'] = world
            o['optimizer_state_dict'] = {
                'state': {i: adam_state(p) for i, p in enumerate(parts[r])},
                'param_groups': [{'lr': 1e-4, 'betas': (0.9, 0.999), 'eps': 1e-8, 'weight_decay': 0.0,
                                  'params': list(range(len(parts[r])))}]}
            o['fp32_flat_groups'] = parts[r]
        prefix = 'bf16_zero_pp_rank' if False else 'zero_pp_rank'
        torch.save({'optimizer_state_dict': o, 'ds_config': cfg, 'ds_version': ver},
                   os.path.join(d, f'{prefix}_{r}_mp_rank_00_optim_states.pt'))
    return params, buffers, frozen, shared


def expected_state(params, buffers, frozen, shared, low):
    """What the model is, in zero_to_fp32's order and dtypes (integer buffers
    keep their dtype: tpconv does not turn them into float)."""
    out = OrderedDict()
    for n, b in buffers.items():
        out[n] = b.float() if b.is_floating_point() else b
    for n in frozen:
        out[n] = params[n].to(low)
    for grp in groups_of(params, frozen):
        for n in grp:
            out[n] = params[n]
    for a, s in shared.items():
        out[a] = out[s]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--stage', type=int, required=True)
    ap.add_argument('--world', type=int, required=True)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--tag', default='global_step14')
    ap.add_argument('--dtype', default='bf16')
    ap.add_argument('--expected')
    ap.add_argument('--from', dest='src', help='take the model from this torch file (fp32 masters)')
    ap.add_argument('--no-moments', action='store_true', help='leave Adam\'s moments out of the optim files')
    a = ap.parse_args()
    global MOMENTS
    MOMENTS = not a.no_moments
    low = {'bf16': torch.bfloat16, 'f16': torch.float16}[a.dtype]
    res = save_zero(a.out, a.stage, a.world, a.seed, a.tag, low, a.src)
    if a.expected:
        torch.save(expected_state(*res, low), a.expected)


if __name__ == '__main__':
    main()
