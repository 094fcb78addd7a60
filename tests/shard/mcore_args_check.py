"""What Megatron makes of a megatron-dist set's args at resume (common.pt's
argparse.Namespace), re-implemented from Megatron-LM d98e8a6
megatron/training/checkpointing.py, and checked against what the model's
config.json needs:

  - load_args_from_checkpoint (:2199-2366, --use-checkpoint-args): _set_arg
    (:2256-2269: a forced arg always takes the checkpoint's value when it is not
    None; another only when the run's is None), over the model args it names
    (:2272-2321), the tokenizer's with use_tokenizer_model_from_checkpoint_args
    (default true, training/config/training_config.py:480; :2344-2349) and
    padded_vocab_size (:2350);
  - check_checkpoint_args (:176-221) for a run with --vocab-file (:207-212:
    max_position_embeddings, make_vocab_size_divisible_by, tokenizer_type;
    padded_vocab_size not with a dist checkpoint) and use_dist_ckpt.

The args Megatron needs for the model, derived here from config.json alone
(Megatron-LM's dest names: training/arguments.py:2384-2430 and
transformer_config.py's fields): the sizes, rope (rotary_base an int,
--rotary-base's type), swiglu, RMSNorm, no linear biases but Qwen2's q/k/v
ones, the tie; layernorm_epsilon (--norm-epsilon), qk_layernorm for per-head
q/k norms; window_size (w - 1, 0) for a sliding window w (transformers 5.12
masking_utils.py:88-97 against transformer/utils.py:43-50), and
window_attn_skip_freq per layer when only some layers slide; use_rope_scaling
and rope_scaling_factor for a llama3 rope. Every needed arg is either adopted
by load_args_from_checkpoint with the needed value, or one of COMMAND_LINE:
not adopted, so the run's command line gives it; common.pt still holds it,
with the needed value.

usage: python3 mcore_args_check.py SRC:SET [SRC:SET ...]   (SET/release or
SET/iter_*/common.pt; SRC the Hugging Face folder: config.json, and whether it
holds q/k/v biases or q/k norms is read from its model.safetensors header)
"""
import argparse
import glob
import json
import os
import struct
import sys

import torch

# training/checkpointing.py:2272-2321, 2324-2350: (name, force)
ADOPTED = [("num_layers", False), ("hidden_size", False), ("ffn_hidden_size", False), ("seq_length", False),
           ("num_attention_heads", False), ("num_query_groups", True), ("group_query_attention", True),
           ("kv_channels", False), ("max_position_embeddings", False), ("position_embedding_type", True),
           ("add_position_embedding", True), ("use_rotary_position_embeddings", True), ("rotary_base", True),
           ("rotary_percent", True), ("rotary_interleaved", True), ("add_bias_linear", True),
           ("add_qkv_bias", True), ("squared_relu", True), ("swiglu", True),
           ("untie_embeddings_and_output_weights", True), ("apply_layernorm_1p", True), ("normalization", True),
           ("apply_query_key_layer_scaling", True), ("attention_dropout", True), ("hidden_dropout", True),
           ("mtp_hybrid_override_pattern", True), ("mtp_num_layers", True), ("mtp_use_repeated_layer", True),
           ("spec", True), ("num_experts", True), ("moe_layer_freq", True), ("moe_router_topk", True),
           ("moe_token_dispatcher_type", False), ("moe_router_pre_softmax", True), ("moe_grouped_gemm", True),
           ("moe_shared_expert_intermediate_size", True), ("moe_router_score_function", True),
           ("moe_router_enable_expert_bias", True), ("moe_router_topk_scaling_factor", True),
           ("tokenizer_model", True), ("tokenizer_type", True), ("tiktoken_pattern", True),
           ("padded_vocab_size", False), ("ckpt_format", False)]

# a run's defaults for them (training/arguments.py; transformer_config.py)
DEFAULTS = dict(position_embedding_type="learned_absolute", add_position_embedding=True, rotary_base=10000,
                rotary_percent=1.0, rotary_interleaved=False, add_bias_linear=True, add_qkv_bias=False, swiglu=False,
                untie_embeddings_and_output_weights=False, normalization="LayerNorm", num_query_groups=None,
                group_query_attention=False, attention_dropout=0.1, hidden_dropout=0.1,
                layernorm_epsilon=1e-5, qk_layernorm=False, window_size=None, window_attn_skip_freq=None,
                use_rope_scaling=False, rope_scaling_factor=8.0, tokenizer_type=None, tokenizer_model=None)

# not taken back by load_args_from_checkpoint: the run's command line gives them
COMMAND_LINE = {"layernorm_epsilon": "--norm-epsilon", "qk_layernorm": "--qk-layernorm", "window_size": "--window-size",
                "window_attn_skip_freq": "--window-attn-skip-freq", "use_rope_scaling": "--use-rope-scaling",
                "rope_scaling_factor": "--rope-scaling-factor", "no_rope_freq": "--no-rope-freq",
                "rotary_seq_len_interpolation_factor": "--rotary-seq-len-interpolation-factor"}


def load_args_from_checkpoint(run, ckpt):
    """checkpointing.py:2256-2269 over ADOPTED (the run has --use-checkpoint-args)"""
    run = argparse.Namespace(**vars(run))
    if hasattr(ckpt, "disable_bias_linear"):  # :2236-2239
        ckpt.add_bias_linear = not ckpt.disable_bias_linear
    for name, force in ADOPTED:
        if not force and getattr(run, name, None) is not None:
            continue
        v = getattr(ckpt, name, None)
        if v is not None:
            setattr(run, name, v)
    return run


def check_checkpoint_args(run, ckpt):
    """checkpointing.py:176-221 (checkpoint version 3.0, no gdp / phase transition)"""
    def cmp(name, default=None):
        v = getattr(ckpt, name, default) if default is not None else getattr(ckpt, name)
        assert v == getattr(run, name), "%s value from checkpoint (%s) is not equal to the input argument value (%s)." % (
            name, v, getattr(run, name))
    for n in ("num_layers", "hidden_size", "num_attention_heads"):
        cmp(n)
    cmp("add_position_embedding", default=True)
    if run.vocab_file:
        cmp("max_position_embeddings")
        cmp("make_vocab_size_divisible_by")
        if not run.use_dist_ckpt:
            cmp("padded_vocab_size")
        cmp("tokenizer_type")
    if not run.use_dist_ckpt:
        cmp("tensor_model_parallel_size")
        cmp("pipeline_model_parallel_size")


def safetensors_names(folder):
    p = os.path.join(folder, "model.safetensors")
    with open(p, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return set(json.loads(f.read(n)))


def sliding_layers(cfg, layer_types=None):
    """the layers transformers 5.12 slides (configuration_qwen2.py:84-94 for
    use_sliding_window / max_window_layers; Mistral: every layer)"""
    L, w = cfg["num_hidden_layers"], cfg.get("sliding_window")
    if not w or cfg.get("use_sliding_window") is False:
        return []
    lt = layer_types or cfg.get("layer_types")
    if lt:
        return [l for l in range(L) if lt[l] == "sliding_attention"]
    if cfg.get("use_sliding_window"):
        return [l for l in range(L) if l >= cfg.get("max_window_layers", 28)]
    return list(range(L))


def needed(src, layer_types=None, host_src=None):
    cfg = json.load(open(os.path.join(src, "config.json")))
    names = safetensors_names(src)
    rp = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    theta = rp.get("rope_theta", cfg.get("rope_theta", 10000))
    H, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    NG = cfg.get("num_key_value_heads") or NH
    need = dict(num_layers=cfg["num_hidden_layers"], hidden_size=H, ffn_hidden_size=cfg["intermediate_size"],
                num_attention_heads=NH, num_query_groups=NG, group_query_attention=NG != NH,
                kv_channels=cfg.get("head_dim") or H // NH, max_position_embeddings=cfg["max_position_embeddings"],
                position_embedding_type="rope", rotary_base=int(theta), rotary_percent=1.0, rotary_interleaved=False,
                swiglu=True, normalization="RMSNorm", add_bias_linear=False,
                add_qkv_bias="model.layers.0.self_attn.q_proj.bias" in names,
                untie_embeddings_and_output_weights="lm_head.weight" in names,
                layernorm_epsilon=cfg["rms_norm_eps"],
                qk_layernorm="model.layers.0.self_attn.q_norm.weight" in names)
    sl = sliding_layers(cfg, layer_types)
    if sl:
        need["window_size"] = (cfg["sliding_window"] - 1, 0)
        if len(sl) != cfg["num_hidden_layers"]:
            need["window_attn_skip_freq"] = [int(l in sl) for l in range(cfg["num_hidden_layers"])]
    if rp.get("rope_type", rp.get("type")) == "llama3":
        need.update(use_rope_scaling=True, rope_scaling_factor=float(rp["factor"]))
    if any(os.path.exists(os.path.join(src, f)) for f in ("tokenizer.json", "tokenizer_config.json")):
        need.update(tokenizer_type="HuggingFaceTokenizer", tokenizer_model=host_src or os.path.realpath(src))
    return cfg, need


def common_of(s):
    c = glob.glob(os.path.join(s, "release", "common.pt")) + glob.glob(os.path.join(s, "iter_*", "common.pt"))
    assert len(c) == 1, (s, c)
    try:
        return torch.load(c[0], weights_only=False)
    except TypeError:  # torch 1.13: no weights_only
        return torch.load(c[0])


def check(src, s, layer_types=None, host_src=None):
    """host_src: src's path where tpconv ran (a chroot's outside)"""
    cfg, need = needed(src, layer_types, host_src)
    ck = common_of(s)["args"]
    run = argparse.Namespace(**{n: None for n, _ in ADOPTED})
    for k, v in DEFAULTS.items():
        setattr(run, k, v)
    got = load_args_from_checkpoint(run, ck)
    adopted = {n for n, _ in ADOPTED}
    cmd = []
    for k, v in need.items():
        if k in adopted:
            assert getattr(got, k) == v and type(getattr(got, k)) is type(v), (s, "adopted", k, getattr(got, k), v)
        else:
            assert k in COMMAND_LINE, (s, k, "needed, neither adopted nor a known command-line flag")
            if v == DEFAULTS[k] and not hasattr(ck, k):
                continue
            assert getattr(ck, k, None) == v and type(getattr(ck, k)) is type(v), (s, "common.pt", k, getattr(ck, k, None), v)
            if v != DEFAULTS[k]:
                cmd.append("%s %s" % (COMMAND_LINE[k], v) if not isinstance(v, bool) else COMMAND_LINE[k])
    # a --vocab-file run with the model's tokenizer and max_position_embeddings passes
    # check_checkpoint_args; one with another tokenizer stops there, naming it
    vrun = argparse.Namespace(**vars(got), vocab_file="vocab.json", use_dist_ckpt=True, make_vocab_size_divisible_by=128)
    if "tokenizer_type" in need:
        check_checkpoint_args(vrun, ck)
        vrun.tokenizer_type = "GPT2BPETokenizer"
        try:
            check_checkpoint_args(vrun, ck)
            raise AssertionError((s, "a GPT2BPETokenizer run passed"))
        except AssertionError as e:
            assert "tokenizer_type value from checkpoint (HuggingFaceTokenizer)" in str(e), (s, str(e))
    return cfg, ck, cmd


if __name__ == "__main__":
    for pair in sys.argv[1:]:
        src, s = pair.split(":")
        _, _, cmd = check(src, s)
        print("ok: %s: the args adopted are the model's; command line: %s" % (os.path.basename(s), " ".join(cmd) or "-"))
