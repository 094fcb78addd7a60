#!/usr/bin/env python3
"""DeepSpeed universal checkpoints without DeepSpeed (not packaged in Debian):
a torch re-implementation of what ds_to_universal.py writes and of what the
universal loader reads, to test tpconv's reader and writer against.

Followed: DeepSpeed 0.16.5, commit 38327e07f6cd39b63418f60cedd1651b0be3e7c3
  deepspeed/checkpoint/ds_to_universal.py
    extract_zero_shards (l. 112-149): each parameter's fragment of every flat
      state (exp_avg, exp_avg_sq, fp32 and, when the group has one, step) cut
      at param_slice_mappings' start/numel of each data-parallel rank;
      dump_param_fragment (l. 179-195): step saved whole, never narrowed
    extract_zero_shards_stage3 (l. 152-172): stage 3 cuts fp32_flat_groups /
      state exp_avg, exp_avg_sq at each parameter's ceil(numel / dp) piece,
      padding dropped; no step
    _merge_zero_shards (l. 198-229): fragments concatenated in dp order and
      reshaped to the parameter's shape; step: the first shard's
    merge_tp_slices (l. 232-335): tp 1; the client's universal_checkpoint_info
      patterns (replicated: {"param"}; row: cat_dim 1; 2 sub params; vocab:
      vocab_tensor, rows past original_vocab_size cut), else {"cat_dim": 0,
      "param": t} (cat_dim set first); step.pt the bare step
    merge_zero3_slices (l. 338-345): stage 3 saves the bare flat tensor
    _save_optimizer_state (l. 410-419): rank 0's optimizer_state_dict less
      base_optimizer_state, param_slice_mappings and
      single_partition_of_fp32_groups, plus param_groups;
      _save_optimizer_state_stage3 (l. 422-428): the whole rank-0
      optimizer_state_dict plus param_groups
    main (l. 469-...): mp* (stage 1/2) / *model_states.pt (stage 3) copied
      into the output folder; latest_universal in its parent, last
  deepspeed/checkpoint/universal_checkpoint.py load_hp_checkpoint_state
      (l. 22-141): every KEY.pt in the parameter's folder; step.pt taken as
      is; ckpt_dict["param"] taken whole when its shape is the parameter's
      (l. 57-59), a vocab_tensor zero-padded to the target's rows (l. 65-74),
      chunked along cat_dim for the tp rank (param_n_sub_params parts each
      chunked, l. 92-119), flattened, narrowed to the rank's fragment
  deepspeed/runtime/base_optimizer.py load_hp_checkpoint_state_from_checkpoint_dir
      (l. 20-63): zero/optimizer_state.pt, param_groups zipped with the
      optimizer's; one step per group (assert all equal)
  deepspeed/runtime/zero/stage3.py load_hp_checkpoint_state_from_checkpoint_dir_stage3
      (l. 2756-2808) and load_hp_checkpoint_state (l. 2815-2833): fp32,
      exp_avg, exp_avg_sq of each parameter of param_shapes[0] .view(-1),
      padded to the new dp size, each rank's piece, concatenated; step from
      optimizer_state.pt's optimizer_state_dict.state[0]
  deepspeed/runtime/engine.py load_checkpoint / _get_ckpt_name /
      _load_checkpoint (l. 2819-3076; l. 3006: the module is not loaded): latest_universal names the tag; the
      model states file (mp_rank_00_model_states.pt, stage 3
      zero_pp_rank_0_mp_rank_00_model_states.pt) gives dp_world_size,
      global_steps, skipped_steps, mp_world_size; the module is not loaded

Departure: make_zero.py's stage 3 checkpoints have several sub-groups; the
stage 3 extraction here cuts each sub-group's flat buffers (ds_to_universal
reads sub-group 0's only, the same where there is one sub-group, DeepSpeed's
default sub_group_size of 1e9).

usage:
  universal_ref.py make DIR          ZeRO saves (make_zero.py) z2 (stage 2, dp 3)
                                     and z3 (stage 3, dp 4), each with
                                     global_step14_universal/ made from it; hostile
                                     copies of z2's: h-missing, h-shape, h-catdim;
                                     zp (z2 with a client's universal_checkpoint_info,
                                     LLAMA_INFO, and a LLaMA config.json) and zf (a
                                     model with Phi-3's fused qkv_proj, GQA, and
                                     gate_up_proj, Phi-3's config, dp 2),
                                     each with its universal folder, and their
                                     parameters as model folders mp and mf; zm
                                     and mm: zf's model with multi-head attention
                                     (qkv_proj's parts equal), no universal folder
  universal_ref.py tiny DIR [STAGE]  the committed fixtures (tests/data/ds_universal,
                                     STAGE 2, and ds_universal3, STAGE 3): a 3-parameter
                                     model saved as ZeRO-STAGE on 2 ranks
                                     (global_step14/) and its universal folder
  universal_ref.py tp TAG SHARD TP   load_hp_checkpoint_state's tp slicing of universal
                                     folder TAG for each of TP ranks against SHARD, the
                                     rank folders of `tpconv shard --layout hf --format
                                     torch --tp TP` of the same parameters; "# wrong:"
                                     names the parameters that load wrong (TAP)
  universal_ref.py check TAG SEED    the loader's reading of universal folder TAG
                                     (its stage from its layout) onto dp 1, 2 and 5:
                                     every element of fp32, exp_avg, exp_avg_sq and
                                     step against make_zero.py's model of SEED (TAP)
  universal_ref.py same A B          two universal folders hold the same files,
                                     keys, tensors and param_groups (TAP)
  universal_ref.py dcp DIR           (torch >= 2.6) a small MLP trained two AdamW
                                     steps, saved as get_state_dict gives it through
                                     DCP in one process (DIR/dcp), and the optimizer
                                     as torch.optim holds it (DIR/ref.pt)
  universal_ref.py check_dcp TAG REF the stage 1/2 loader's reading of universal
                                     folder TAG against REF: every parameter's fp32,
                                     exp_avg, exp_avg_sq and step (TAP)
"""
import dataclasses
import glob
import json
import math
import os
import re
import shutil
import sys
from collections import OrderedDict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_zero  # noqa: E402

make_zero.install_stand_ins()


@dataclasses.dataclass
class SubparamShape:
    """deepspeed/checkpoint/universal_checkpoint.py l. 15-19, a stand-in
    where the pickles name it"""
    patterns: list
    shape: tuple
    partition_dim: int


make_zero._place(SubparamShape, 'deepspeed.checkpoint.universal_checkpoint')


def load(p):
    # DeepSpeed loads these with weights_only=False (commit 2e0c39b, #6751)
    return torch.load(p, map_location='cpu', weights_only=False)


def fragments_12(shapes, world):
    """param_slice_mappings as stage_1_and_2.py _create_param_mapping (l. 574) gives
    them: per rank, per group, name -> (start in the rank's partition, numel),
    the group flattened and padded to 2 x world then cut in world pieces."""
    out = [[OrderedDict() for _ in shapes] for _ in range(world)]
    for g, grp in enumerate(shapes):
        total = sum(math.prod(s) for s in grp.values())
        size = (total + (-total) % (2 * world)) // world
        at = 0
        for name, shape in grp.items():
            lo, hi = at, at + math.prod(shape)
            for r in range(world):
                a, b = max(lo, r * size), min(hi, (r + 1) * size)
                if a < b:
                    out[r][g][name] = (a - r * size, b - a)
            at = hi
    return out


def tp_dict(name, param, info):
    """merge_tp_slices (l. 238-333) for the one tp slice of a tp-1 save: the
    client's universal_checkpoint_info patterns (re.match, at most one per
    list) give the file's keys, in its order."""
    def matched(key):
        m = [p for p in info.get(key, []) if re.match(p, name)]
        assert len(m) <= 1, (name, m)
        return bool(m)
    sd = {}
    sub = None  # get_matched_sub_params_pattern (l. 259-268)
    for s in info.get('parameter_with_sub_params', []):
        if sub is None and any(re.match(p, name) for p in s['patterns']):
            sub = SubparamShape(**s)
    if matched('tp_replicated_parameter_patterns') or matched('parameter_to_average_patterns'):
        p = param
    elif matched('parameter_with_2_sub_params_cat_dim_0'):
        c = param.chunk(2, dim=0)
        p = torch.cat([torch.cat([c[0]], dim=0), torch.cat([c[1]], dim=0)], dim=0)
        sd['cat_dim'] = 0
        sd['param_n_sub_params'] = 2
    elif sub is not None:  # l. 297-316, one slice
        dim = sub.partition_dim
        sizes = sub.shape[dim] if isinstance(sub.shape[dim], tuple) else (sub.shape[dim],)
        v = param.view([sum(d) if isinstance(d, tuple) else d for d in sub.shape])
        at, chunks = 0, []
        for n in sizes:
            chunks.append(torch.cat([v.narrow(dim, at, n)], dim=dim))
            at += n
        p = torch.cat(chunks, dim=dim)
        sd['sub_param_shape'] = sub
    else:
        cat_dim = 1 if matched('parameter_with_row_parallelism_patterns') else 0
        p = torch.cat([param], dim=cat_dim)
        sd['cat_dim'] = cat_dim
    if matched('vocabulary_parameter_patterns'):
        p = p[:info['original_vocab_size'], :]
        sd['vocab_tensor'] = True
    sd['param'] = p
    return sd


def ds_tp_slice(sd, shape, rank, tp):
    """load_hp_checkpoint_state (universal_checkpoint.py l. 43-121) on one
    state file: the flat slice tp rank `rank` of `tp` copies into its
    parameter of `shape` (its fragment is narrowed from this)."""
    full = sd['param']
    if full.shape == torch.Size(shape):  # l. 57-59: the whole when the shapes match
        rank, tp = 0, 1
    if sd.get('vocab_tensor', False):  # l. 65-74: padding rows for the target tp
        padded = shape[0] * tp
        assert padded >= full.shape[0]
        if padded > full.shape[0]:
            full = torch.nn.functional.pad(full, (0, 0, 0, padded - full.shape[0]), 'constant', 0)
    assert full.numel() == tp * math.prod(shape), 'numel'  # l. 82
    sub = sd.get('sub_param_shape')  # l. 88
    dim, nsub = sd.get('cat_dim', 0), sd.get('param_n_sub_params', 1)  # l. 92-93
    if sub:  # l. 94-111: each part narrowed, chunked, the rank's parts concatenated
        pd = sub.partition_dim
        sizes = sub.shape[pd] if isinstance(sub.shape[pd], tuple) else (sub.shape[pd],)
        full = full.view([sum(d) if isinstance(d, tuple) else d for d in sub.shape])
        at, parts = 0, []
        for n in sizes:
            parts.append(full.narrow(pd, at, n).chunk(tp, dim=pd)[rank])
            at += n
        s = torch.cat(parts, dim=pd)
    elif nsub > 1:  # l. 113-116
        s = torch.cat([p.chunk(tp, dim=dim)[rank] for p in full.chunk(nsub, dim=dim)], dim=dim)
    else:  # l. 117-119
        s = full.chunk(tp, dim)[rank]
    return s.flatten()  # l. 121


def check_tp(tag, shard, tp):
    """The loader's slice of every parameter's fp32, exp_avg and exp_avg_sq for
    each tp rank against the rank tensor `tpconv shard --layout hf --format
    torch` wrote (fp32 = w, exp_avg = w / 2, exp_avg_sq = w * w, as
    make_zero.py's moments); a row-parallel file cut along dim 0 instead must
    differ; the folder's universal_checkpoint_info, read as merge_tp_slices
    reads it, must give each file's keys."""
    ranks = [load(os.path.join(shard, 'tp%02d_pp00' % r, 'pytorch_model.bin')) for r in range(tp)]
    z = os.path.join(tag, 'zero')
    info = load(os.path.join(tag, 'mp_rank_00_model_states.pt')).get('universal_checkpoint_info') or {}
    names = sorted(n for n in os.listdir(z) if os.path.isdir(os.path.join(z, n)))
    wrong, keys, sensitive = [], [], 0
    for n in names:
        ok = True
        for key in ('fp32', 'exp_avg', 'exp_avg_sq'):
            sd = load(os.path.join(z, n, key + '.pt'))
            info_sd = tp_dict(n, sd['param'], info)
            if [k for k in info_sd if k != 'param'] != [k for k in sd if k != 'param'] or any(
                    info_sd[k] != sd[k] for k in info_sd if k != 'param'):
                keys.append(n)
            for r in range(tp):
                w = ranks[r][n].float()
                w = {'fp32': w, 'exp_avg': w * 0.5, 'exp_avg_sq': w * w}[key]
                try:
                    got = ds_tp_slice(sd, w.shape, r, tp)
                    ok = ok and torch.equal(got.view(w.shape), w)
                except AssertionError:
                    ok = False
                if ok and key == 'fp32' and (sd.get('cat_dim', 0) != 0 or 'sub_param_shape' in sd or
                                             sd.get('param_n_sub_params', 1) > 1):
                    # the file as a tp 1 converter writes it: cut along dim 0 in one piece
                    alt = {'cat_dim': 0, 'param': sd['param']}
                    try:
                        sensitive += not torch.equal(ds_tp_slice(alt, w.shape, r, tp).view(w.shape), w)
                    except AssertionError:
                        sensitive += 1
        if not ok:
            wrong.append(n)
    good = not wrong and not keys
    print(('ok - %s at tp %d: %d parameters, fp32/exp_avg/exp_avg_sq cut as load_hp_checkpoint_state cuts them, '
           'each rank\'s slice equals tpconv shard\'s rank tensor; %d rank slices (row-parallel, fused) would differ '
           'cut along dim 0 in one piece; universal_checkpoint_info gives each file\'s keys' if good else
           'not ok - %s at tp %d: %d parameters, %d') % (os.path.basename(tag.rstrip('/')), tp, len(names), sensitive))
    if wrong:
        print('# wrong: ' + ' '.join(wrong))
    if keys:
        print('# keys unlike universal_checkpoint_info: ' + ' '.join(keys))


def to_universal_12(save_dir, out):
    optim = sorted(glob.glob(os.path.join(save_dir, '*_optim_states.pt')), key=make_zero_natural)
    ms = load(os.path.join(save_dir, 'mp_rank_00_model_states.pt'))
    shapes = ms['param_shapes']
    info = ms.get('universal_checkpoint_info') or {}  # _inject_missing_state: {} when the client gave none
    world = len(optim)
    frags = fragments_12(shapes, world)
    pieces = {}
    for r, f in enumerate(optim):
        osd = load(f)['optimizer_state_dict']
        states, fp32 = osd['base_optimizer_state']['state'], osd['single_partition_of_fp32_groups']
        for g in range(len(states)):
            flat = dict(exp_avg=states[g]['exp_avg'], exp_avg_sq=states[g]['exp_avg_sq'], fp32=fp32[g])
            if 'step' in states[g]:
                flat['step'] = states[g]['step']
            for name, (start, numel) in frags[r][g].items():
                for key, t in flat.items():
                    if key != 'step' and torch.is_tensor(t):
                        t = t.narrow(0, start, numel).clone()
                    pieces.setdefault((name, key), []).append(t)
    for grp in shapes:
        for name, shape in grp.items():
            d = os.path.join(out, 'zero', name)
            os.makedirs(d, exist_ok=True)
            if (name, 'step') in pieces:
                torch.save(pieces[(name, 'step')][0], os.path.join(d, 'step.pt'))
            for key in ('fp32', 'exp_avg', 'exp_avg_sq'):
                param = torch.cat(pieces[(name, key)], dim=0).reshape(shape)
                torch.save(tp_dict(name, param, info), os.path.join(d, key + '.pt'))
    osd = load(optim[0])['optimizer_state_dict']
    keep = {k: v for k, v in osd.items()
            if k not in ('base_optimizer_state', 'param_slice_mappings', 'single_partition_of_fp32_groups')}
    keep['param_groups'] = osd['base_optimizer_state']['param_groups']
    torch.save(keep, os.path.join(out, 'zero', 'optimizer_state.pt'))
    for f in glob.glob(os.path.join(save_dir, 'mp*')):
        shutil.copy2(f, out)


def make_zero_natural(p):
    import re
    return [int(c) if c.isdigit() else c for c in re.split(r'(\d+)', p)]


def to_universal_3(save_dir, out):
    optim = sorted(glob.glob(os.path.join(save_dir, '*_optim_states.pt')), key=make_zero_natural)
    models = sorted(glob.glob(os.path.join(save_dir, '*_model_states.pt')), key=make_zero_natural)
    shapes = load(models[0])['param_shapes']
    world = len(models)
    pieces = {}
    for r, f in enumerate(optim):
        osd = load(f)['optimizer_state_dict']
        for sg, grp in enumerate(shapes):
            st = osd['optimizer_state_dict']['state'][sg]
            flat = dict(exp_avg=st['exp_avg'], exp_avg_sq=st['exp_avg_sq'], fp32=osd['fp32_flat_groups'][sg])
            offset = 0
            for name, shape in grp.items():
                n = math.prod(shape)
                pn = math.ceil(n / world)
                free = min(pn, abs(n - r * pn))
                for key, t in flat.items():
                    pieces.setdefault((name, key), []).append(t.narrow(0, offset, free).clone())
                offset += pn
    for grp in shapes:
        for name in grp:
            d = os.path.join(out, 'zero', name)
            os.makedirs(d, exist_ok=True)
            for key in ('fp32', 'exp_avg', 'exp_avg_sq'):
                torch.save(torch.cat(pieces[(name, key)], dim=0), os.path.join(d, key + '.pt'))
    sd = load(optim[0])['optimizer_state_dict']
    sd['param_groups'] = sd['optimizer_state_dict']['param_groups']
    torch.save(sd, os.path.join(out, 'zero', 'optimizer_state.pt'))
    for f in models:
        shutil.copy2(f, out)


def to_universal(save_dir, out):
    os.makedirs(out, exist_ok=True)
    first = load(sorted(glob.glob(os.path.join(save_dir, '*_optim_states.pt')))[0])['optimizer_state_dict']
    (to_universal_3 if int(first.get('zero_stage', 1)) == 3 else to_universal_12)(save_dir, out)
    root, tag = os.path.split(out.rstrip('/'))
    with open(os.path.join(root, 'latest_universal'), 'w') as f:
        f.write(tag)


# What a client (Megatron-DeepSpeed's GPTModel for its own names) gives as
# universal_checkpoint_info, for make_zero.py's LLaMA-shaped model in Hugging
# Face names, and for its fused-MLP variant (Phi-3's gate_up_proj [gate; up])
LLAMA_INFO = {
    'universal_checkpoint_version': 0.2,
    'tp_replicated_parameter_patterns': [r'.*layernorm\.weight$', r'model\.norm\.weight$'],
    'parameter_with_row_parallelism_patterns': [r'.*self_attn\.o_proj\.weight$', r'.*mlp\.down_proj\.weight$'],
    'vocabulary_parameter_patterns': [r'model\.embed_tokens\.weight$'],
    'parameter_with_2_sub_params_cat_dim_0': [r'.*mlp\.gate_up_proj\.weight$'],
    'parameter_with_sub_params': [dict(patterns=[r'.*self_attn\.qkv_proj\.weight$'], shape=((20, 10, 10), 20),
                                       partition_dim=0)],
    'original_vocab_size': 37,
}
CONFIG = dict(hidden_size=20, num_attention_heads=4, num_key_value_heads=2, intermediate_size=28,
              vocab_size=37, num_hidden_layers=2, tie_word_embeddings=True)


def with_info(z, arch):
    """save z's model states with the client's universal_checkpoint_info and
    config.json in its root, as a Trainer's checkpoint-N holds it"""
    p = os.path.join(z, 'global_step14', 'mp_rank_00_model_states.pt')
    ms = load(p)
    ms['universal_checkpoint_info'] = LLAMA_INFO
    torch.save(ms, p)
    with open(os.path.join(z, 'config.json'), 'w') as f:
        json.dump(dict(CONFIG, architectures=[arch]), f)


def model_dir(d, params, arch, **cfg):
    """the fp32 parameters as a model folder tpconv shard splits"""
    os.makedirs(d, exist_ok=True)
    torch.save(params, os.path.join(d, 'model.pt'))
    with open(os.path.join(d, 'config.json'), 'w') as f:
        json.dump(dict(CONFIG, architectures=[arch], **cfg), f)


def make(d):
    for st, ws, seed in ((2, 3, 23), (3, 4, 34)):
        z = os.path.join(d, 'z%d' % st)
        make_zero.save_zero(z, st, ws, seed, 'global_step14', torch.bfloat16)
        to_universal(os.path.join(z, 'global_step14'), os.path.join(z, 'global_step14_universal'))
    # z2 again with a client's patterns (zp), and a fused-MLP model (zf), each
    # with its reference universal folder and its parameters as a model folder
    params, _, frozen, _ = make_zero.model_tensors(23)
    model_dir(os.path.join(d, 'mp'), params, 'LlamaForCausalLM')
    make_zero.save_zero(os.path.join(d, 'zp'), 2, 3, 23, 'global_step14', torch.bfloat16)
    with_info(os.path.join(d, 'zp'), 'LlamaForCausalLM')
    fused = OrderedDict()  # Phi-3's qkv_proj [q | k | v] (GQA: 20, 10, 10 rows) and gate_up_proj [gate; up]
    for n, t in params.items():
        if n in frozen or '.up_proj.' in n or '.k_proj.' in n or '.v_proj.' in n:
            continue
        if 'q_proj' in n:
            fused[n.replace('q_proj', 'qkv_proj')] = torch.cat(
                [t, params[n.replace('q_proj', 'k_proj')], params[n.replace('q_proj', 'v_proj')]])
        else:
            fused[n.replace('gate_proj', 'gate_up_proj')] = (
                torch.cat([t, params[n.replace('gate_proj', 'up_proj')]]) if 'gate_proj' in n else t)
    model_dir(os.path.join(d, 'mf'), fused, 'Phi3ForCausalLM')
    make_zero.save_zero(os.path.join(d, 'zf'), 2, 2, 0, 'global_step14', torch.bfloat16,
                        os.path.join(d, 'mf', 'model.pt'))
    with_info(os.path.join(d, 'zf'), 'Phi3ForCausalLM')
    for z in ('zp', 'zf'):
        to_universal(os.path.join(d, z, 'global_step14'), os.path.join(d, z, 'global_step14_universal'))
    # multi-head attention (4 K/V heads): qkv_proj's parts equal, 20 rows each; the save
    # only (its universal folder is tpconv's, param_n_sub_params 3: no client pattern says that)
    g = torch.Generator().manual_seed(5)
    mha = OrderedDict((n, torch.cat([t[:20], torch.randn(40, 20, generator=g)]) if 'qkv_proj' in n else t)
                      for n, t in fused.items())
    model_dir(os.path.join(d, 'mm'), mha, 'Phi3ForCausalLM', num_key_value_heads=4)
    make_zero.save_zero(os.path.join(d, 'zm'), 2, 2, 0, 'global_step14', torch.bfloat16,
                        os.path.join(d, 'mm', 'model.pt'))
    shutil.copy2(os.path.join(d, 'mm', 'config.json'), os.path.join(d, 'zm'))
    u = os.path.join(d, 'z2', 'global_step14_universal')
    name = 'model.layers.0.self_attn.k_proj.weight'
    for h in ('missing', 'shape', 'catdim'):
        shutil.copytree(u, os.path.join(d, 'h-' + h))
    os.remove(os.path.join(d, 'h-missing', 'zero', name, 'exp_avg.pt'))
    torch.save({'cat_dim': 0, 'param': torch.zeros(10, 21)}, os.path.join(d, 'h-shape', 'zero', name, 'exp_avg_sq.pt'))
    sd = load(os.path.join(d, 'h-catdim', 'zero', name, 'fp32.pt'))
    sd['cat_dim'] = 2
    torch.save(sd, os.path.join(d, 'h-catdim', 'zero', name, 'fp32.pt'))


def tiny(d, stage):
    """Three parameters (decayed weights, then a bias): 34 elements."""
    g = torch.Generator().manual_seed(7)
    model = OrderedDict([('w1', torch.randn(3, 4, generator=g)), ('w2', torch.randn(4, 4, generator=g)),
                         ('b', torch.randn(6, generator=g))])
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, 'model.pt')
    torch.save(model, src)
    make_zero.save_zero(d, stage, 2, 0, 'global_step14', torch.bfloat16, src)
    os.remove(src)
    to_universal(os.path.join(d, 'global_step14'), os.path.join(d, 'global_step14_universal'))


def stage_of(tag):
    return 3 if 'optimizer_state_dict' in load(os.path.join(tag, 'zero', 'optimizer_state.pt')) else 2


def check(tag, seed):
    """The universal loader's reading, onto dp sizes 1, 2 and 5."""
    params, _, frozen, _ = make_zero.model_tensors(seed)
    groups = make_zero.groups_of(params, frozen)
    stage = stage_of(tag)
    z = os.path.join(tag, 'zero')
    osd = load(os.path.join(z, 'optimizer_state.pt'))
    bad = []
    ms = load(os.path.join(tag, 'zero_pp_rank_0_mp_rank_00_model_states.pt' if stage == 3 else 'mp_rank_00_model_states.pt'))
    for k in ('dp_world_size', 'global_steps', 'skipped_steps', 'mp_world_size'):
        if k not in ms:
            bad.append('model states: no ' + k)
    # what _load_checkpoint restores beside the optimizer, as the save had it
    # (lr_scheduler.load_state_dict(checkpoint['lr_scheduler']), l. 3038-3039)
    if (ms.get('lr_scheduler'), ms.get('global_samples')) != (
            {'last_epoch': 14, '_step_count': 15, 'base_lrs': [1e-4, 1e-4]}, 448):
        bad.append('model states: lr_scheduler / global_samples not the save\'s')
    if stage == 3:
        names = [n for grp in groups for n in grp]
        # the loading engine's own param_shapes[0] (one sub-group) names them in this order
        if [n for d in ms['param_shapes'] for n in d] != names:
            bad.append('param_shapes are not every parameter in order')
        step = osd['optimizer_state_dict']['state'][0]['step']
        for dp in (1, 2, 5):
            for key in ('fp32', 'exp_avg', 'exp_avg_sq'):
                for r in range(dp):
                    got, want = [], []
                    for n in names:  # stage3.py: each parameter's rank piece, concatenated
                        t = load(os.path.join(z, n, key + '.pt')).view(-1)
                        pn = math.ceil(t.numel() / dp)
                        t = torch.cat([t, torch.zeros(pn * dp - t.numel(), dtype=t.dtype)])
                        got.append(t.narrow(0, r * pn, pn))
                        w = params[n].reshape(-1)
                        w = {'fp32': w, 'exp_avg': w * 0.5, 'exp_avg_sq': w * w}[key]
                        want.append(torch.cat([w, torch.zeros(pn * dp - w.numel())]).narrow(0, r * pn, pn))
                    if not torch.equal(torch.cat(got), torch.cat(want)):
                        bad.append('stage 3 dp %d rank %d %s' % (dp, r, key))
        if float(step) != 14.0:
            bad.append('step %r' % step)
        what = 'stage 3 layout'
    else:
        if [list(d) for d in ms['param_shapes']] != groups:
            bad.append('param_shapes are not the groups in order')
        if len(osd['param_groups']) != len(groups) or 'ds_version' not in osd:
            bad.append('optimizer_state.pt param_groups / ds_version')
        for g, grp in enumerate(groups):
            steps = []
            for n in grp:
                folder = os.path.join(z, n)
                keys = sorted(f[:-3] for f in os.listdir(folder) if f.endswith('.pt'))
                if keys != ['exp_avg', 'exp_avg_sq', 'fp32', 'step']:
                    bad.append((n, keys))
                    continue
                for key in ('fp32', 'exp_avg', 'exp_avg_sq'):
                    sd = load(os.path.join(folder, key + '.pt'))
                    full = sd['param']
                    if full.shape != params[n].shape:
                        bad.append((n, key, 'shape'))
                    w = params[n]
                    w = {'fp32': w, 'exp_avg': w * 0.5, 'exp_avg_sq': w * w}[key]
                    # tp 1: chunk(1, cat_dim)[0].flatten(), every fragment of any dp narrowed from it
                    if not torch.equal(full.chunk(1, sd.get('cat_dim', 0))[0].flatten(), w.flatten()):
                        bad.append((n, key))
                steps.append(load(os.path.join(folder, 'step.pt')))
            if not all(float(s) == 14.0 for s in steps):
                bad.append(('steps', g))
        what = 'stage 1/2 layout'
    print(('ok - %s: %s, %d parameters: fp32, exp_avg, exp_avg_sq of each its own elements, onto dp 1/2/5, step 14, '
           'model states with the keys the engine reads, the save\'s lr_scheduler' if not bad else 'not ok - %s: %s %d') % (
               os.path.basename(tag.rstrip('/')), what, len(params) - len(frozen)))
    if bad:
        print('# ' + repr(bad)[:600])


def same(a, b):
    bad = []
    za, zb = os.path.join(a, 'zero'), os.path.join(b, 'zero')
    pa = sorted(p for p in os.listdir(za) if os.path.isdir(os.path.join(za, p)))
    pb = sorted(p for p in os.listdir(zb) if os.path.isdir(os.path.join(zb, p)))
    if pa != pb:
        bad.append(('folders', pa, pb))
    for p in pa:
        fa, fb = sorted(os.listdir(os.path.join(za, p))), sorted(os.listdir(os.path.join(zb, p)))
        if fa != fb:
            bad.append((p, fa, fb))
            continue
        for f in fa:
            x, y = load(os.path.join(za, p, f)), load(os.path.join(zb, p, f))
            if isinstance(x, dict):
                # a sub_param_shape's patterns name its parameter (tpconv: exactly; a client: as it likes)
                x, y = ({k: (v.shape, v.partition_dim) if k == 'sub_param_shape' else v for k, v in z.items()}
                        for z in (x, y))
                if list(x) != list(y) or any(not (torch.equal(x[k], y[k]) and x[k].dtype == y[k].dtype)
                                             if torch.is_tensor(x[k]) else x[k] != y[k] for k in x):
                    bad.append((p, f))
            elif torch.is_tensor(x):
                if not (torch.is_tensor(y) and x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)):
                    bad.append((p, f))
            elif x != y:
                bad.append((p, f, x, y))
    oa, ob = load(os.path.join(za, 'optimizer_state.pt')), load(os.path.join(zb, 'optimizer_state.pt'))
    # hyper-parameters; 'params' numbers the flat groups: a stage 3 save of
    # several sub-groups lists each, tpconv's one (the one stage3.py restores)
    hyper = [[{k: v for k, v in g.items() if k != 'params'} for g in o['param_groups']] for o in (oa, ob)]
    if hyper[0] != hyper[1]:
        bad.append('param_groups')
    print(('ok - %s and %s: the same %d parameter folders, files, keys, tensors (dtype, shape, every element) and '
           'param_groups hyper-parameters' if not bad else 'not ok - %s and %s %d') % (a, b, len(pa)))
    if bad:
        print('# ' + repr(bad)[:600])


def dcp_save(d):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 3))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    for _ in range(2):
        m(torch.randn(4, 5)).sum().backward()
        opt.step()
        opt.zero_grad()
    msd, osd = get_state_dict(m, opt)
    dcp.save({'model': msd, 'optim': osd}, checkpoint_id=os.path.join(d, 'dcp'), no_dist=True)
    ref = OrderedDict()
    for n, p in m.named_parameters():
        ref[n] = dict(fp32=p.detach().clone(), **{k: v.clone() for k, v in opt.state[p].items()})
    torch.save(ref, os.path.join(d, 'ref.pt'))


def check_dcp(tag, refp):
    ref = load(refp)
    bad = []
    for n, st in ref.items():
        folder = os.path.join(tag, 'zero', n)
        for key in ('fp32', 'exp_avg', 'exp_avg_sq'):
            sd = load(os.path.join(folder, key + '.pt'))
            if not (sd.get('cat_dim') == 0 and torch.equal(sd['param'].chunk(1, 0)[0].flatten(), st[key].flatten())
                    and sd['param'].shape == st[key].shape):
                bad.append((n, key))
        if not torch.equal(load(os.path.join(folder, 'step.pt')), st['step']):
            bad.append((n, 'step'))
    ms = load(os.path.join(tag, 'mp_rank_00_model_states.pt'))
    if [list(d) for d in ms['param_shapes']] != [list(ref)]:
        bad.append('param_shapes')
    print(('ok - a DCP save of get_state_dict (torch %s, AdamW, 2 steps) written as a universal folder: each of %d '
           'parameters\' fp32, exp_avg, exp_avg_sq and step as torch.optim held them' if not bad else
           'not ok - DCP to universal (torch %s) %d') % (torch.__version__, len(ref)))
    if bad:
        print('# ' + repr(bad)[:600])


if __name__ == '__main__':
    cmd = sys.argv[1]
    if cmd == 'make':
        make(sys.argv[2])
    elif cmd == 'tiny':
        tiny(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 2)
    elif cmd == 'check':
        for i in range(2, len(sys.argv), 2):
            check(sys.argv[i], int(sys.argv[i + 1]))
    elif cmd == 'dcp':
        dcp_save(sys.argv[2])
    elif cmd == 'check_dcp':
        check_dcp(sys.argv[2], sys.argv[3])
    elif cmd == 'tp':
        for i in range(2, len(sys.argv), 3):
            check_tp(sys.argv[i], sys.argv[i + 1], int(sys.argv[i + 2]))
    elif cmd == 'same':
        for i in range(2, len(sys.argv), 2):
            same(sys.argv[i], sys.argv[i + 1])
