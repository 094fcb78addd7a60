"""A megatron-dist set's args at resume against transformers 5.12 (the forky
chroot; tests/interop/megatron_dist.sh): tests/shard/mcore_args_check.py
(Megatron-LM d98e8a6's load_args_from_checkpoint and check_checkpoint_args
re-implemented) over each set, with the layers that slide taken from
transformers' own config class (AutoConfig's layer_types and sliding_window),
and then what the args make Megatron compute, against transformers:

  - the attention mask of window_size (common.pt) and window_attn_skip_freq:
    Megatron's get_sliding_window_causal_mask (transformer/utils.py:43-50, its
    triu / tril re-done on the CPU), layer by layer as is_layer_window_attention
    (:531-547) picks it, equals transformers' causal mask with
    sliding_window_overlay (masking_utils.py:88-97) for the layers
    transformers slides, and the causal mask for the others;
  - the rope of rotary_base, use_rope_scaling and rope_scaling_factor:
    Megatron's RotaryEmbedding inv_freq (rotary_pos_embedding.py:76-125, its
    _apply_scaling re-done) equals transformers' ROPE_INIT_FUNCTIONS for the
    config (llama3, or the default rope).

usage: python3 mcore_args_hf.py HF_DIR:SET:HOST_HF_DIR ...
"""
import math
import os
import sys

import torch
from transformers import AutoConfig
from transformers.masking_utils import causal_mask_function, sliding_window_overlay
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mcore_args_check as mac  # noqa: E402


def megatron_window_mask(n, ws):
    """transformer/utils.py:43-50 (True: masked)"""
    m = torch.ones(n, n, dtype=torch.bool)
    mu = torch.triu(m, diagonal=n - n - ws[0])
    return ~torch.tril(mu, diagonal=n - n + ws[1])


def megatron_layer_slides(ws, freq, layer_number):
    """transformer/utils.py:531-547 (layer_number 1-based)"""
    if not ws:
        return False
    if freq is None:
        return True
    if isinstance(freq, int):
        return layer_number % freq != 0
    return bool(freq[layer_number - 1])


def megatron_inv_freq(a, dim):
    """rotary_pos_embedding.py:76-84 and _apply_scaling :92-125"""
    inv = 1.0 / (a.rotary_base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    if not getattr(a, "use_rope_scaling", False):
        return inv
    factor, low, high, old = a.rope_scaling_factor, 1, 4, 8192
    wavelen = 2 * math.pi / inv
    llama = torch.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * llama / factor + smooth * llama
    medium = ~(wavelen < old / high) * ~(wavelen > old / low)
    return torch.where(medium, smoothed, llama)


def check(src, s, host):
    hc = AutoConfig.from_pretrained(src)
    lt = getattr(hc, "layer_types", None)
    if lt is None:  # MistralConfig keeps no layer_types: sliding_window alone says it
        lt = ["sliding_attention" if getattr(hc, "sliding_window", None) else "full_attention"] * hc.num_hidden_layers
    cfg, a, cmd = mac.check(src, s, lt, host)
    # the masks, layer by layer, over a sequence past the window
    w = getattr(hc, "sliding_window", None) if getattr(hc, "use_sliding_window", True) is not False else None
    n = (w + 3) if w else 16
    q, kv = torch.arange(n)[:, None], torch.arange(n)[None, :]
    causal = causal_mask_function(0, 0, q, kv)
    ws, freq = getattr(a, "window_size", None), getattr(a, "window_attn_skip_freq", None)
    for l in range(hc.num_hidden_layers):
        hf_ok = causal & sliding_window_overlay(w)(0, 0, q, kv) if lt[l] == "sliding_attention" and w else causal
        mg_ok = ~megatron_window_mask(n, ws) if megatron_layer_slides(ws, freq, l + 1) else ~torch.triu(
            torch.ones(n, n, dtype=torch.bool), diagonal=1)
        assert torch.equal(hf_ok, mg_ok), (s, "layer", l, "mask")
    # the rope's frequencies
    d = a.kv_channels
    hf_inv, _ = ROPE_INIT_FUNCTIONS[hc.rope_parameters["rope_type"]](hc, "cpu") if hc.rope_parameters[
        "rope_type"] != "default" else (1.0 / (hc.rope_parameters["rope_theta"] ** (
            torch.arange(0, d, 2, dtype=torch.int64).float() / d)), 1.0)
    mg_inv = megatron_inv_freq(a, d)
    assert torch.allclose(hf_inv.float(), mg_inv, rtol=1e-6, atol=0), (s, "inv_freq", hf_inv, mg_inv)
    return "%s: adopted args the model's; masks of %d layers and rope (%s) as transformers'; command line: %s" % (
        os.path.basename(s), hc.num_hidden_layers, hc.rope_parameters["rope_type"], " ".join(cmd) or "-")


for spec in sys.argv[1:]:
    src, s, host = spec.split(":")
    print("ok: " + check(src, s, host))
