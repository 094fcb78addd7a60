# A tiny model in the names a rules preset reads, for the family check
# (family_rules_test.sh): every rules preset a family record lists is run through
# that family's plan with --strict on one of these. Made by real torch
# (/usr/bin/python3); names and shapes follow the ecosystems' own modules.
# usage: make_family_src.py OUTDIR PRESET
# Writes OUTDIR/model.safetensors and OUTDIR/config.json (the model facts the
# preset's rules and the family's plan need). Exit 3 for a preset it does not know.
#   megatron-llama  Megatron-Core GPTModel, TransformerEngine spec (linear_qkv per
#                   query group [q; k; v], fused norms, linear_fc1 [gate; up]), vocab padded
#   megatron-gpt    Megatron-Core GPT-2 style (per-head [q_h; k_h; v_h], LayerNorm biases)
#   libai           LiBai GPT with its loader's source names (LayerNorm gamma / beta)
#   dalle2          a DALLE2-pytorch Decoder checkpoint: {ema_model, model} of two Unets as
#                   dalle2_pytorch.py builds them (ResnetBlocks with CrossAttention,
#                   RearrangeToSequence(Residual(Attention)) self-attention 'fn.fn.',
#                   Residual(LinearAttention) 'fn.', mid_attn, PixelShuffle upsamples, SP-conv
#                   downsamples), noise schedulers' buffers and a CLIP to drop
#   dalle2-prior    a DiffusionPrior (its network, CausalTransformer, noise scheduler)
#   torchtitan      torchtitan's llama3 Transformer (tok_embeddings, layers.N.attention.wq...)
import collections, json, os, sys
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'remap'))
from dalle2_seed import write_st  # noqa: E402

out, preset = sys.argv[1], sys.argv[2]
torch.manual_seed(sum(map(ord, preset)))
H, NH, KV, HD, V, VP, I, L = 64, 8, 4, 8, 250, 256, 96, 2


def r(*shape):
    return torch.randn(*shape)


def megatron_llama():
    sd = collections.OrderedDict()
    sd['embedding.word_embeddings.weight'] = r(VP, H)
    for i in range(L):
        p = f'decoder.layers.{i}.'
        sd[p + 'self_attention.linear_qkv.layer_norm_weight'] = r(H)
        sd[p + 'self_attention.linear_qkv.weight'] = r((NH + 2 * KV) * HD, H)
        sd[p + 'self_attention.linear_proj.weight'] = r(H, NH * HD)
        sd[p + 'mlp.linear_fc1.layer_norm_weight'] = r(H)
        sd[p + 'mlp.linear_fc1.weight'] = r(2 * I, H)
        sd[p + 'mlp.linear_fc2.weight'] = r(H, I)
        sd[p + 'self_attention.core_attention._extra_state'] = torch.zeros(4, dtype=torch.int64)
    sd['decoder.final_layernorm.weight'] = r(H)
    sd['output_layer.weight'] = r(VP, H)
    cfg = {'architectures': ['LlamaForCausalLM'], 'hidden_size': H, 'num_attention_heads': NH,
           'num_key_value_heads': KV, 'head_dim': HD, 'intermediate_size': I, 'num_hidden_layers': L,
           'vocab_size': V}
    return sd, cfg


def megatron_gpt():
    sd = collections.OrderedDict()
    sd['embedding.word_embeddings.weight'] = r(VP, H)
    sd['embedding.position_embeddings.weight'] = r(32, H)
    for i in range(L):
        p = f'decoder.layers.{i}.'
        sd[p + 'self_attention.linear_qkv.layer_norm_weight'] = r(H)
        sd[p + 'self_attention.linear_qkv.layer_norm_bias'] = r(H)
        sd[p + 'self_attention.linear_qkv.weight'] = r(3 * NH * HD, H)
        sd[p + 'self_attention.linear_qkv.bias'] = r(3 * NH * HD)
        sd[p + 'self_attention.linear_proj.weight'] = r(H, NH * HD)
        sd[p + 'self_attention.linear_proj.bias'] = r(H)
        sd[p + 'mlp.linear_fc1.layer_norm_weight'] = r(H)
        sd[p + 'mlp.linear_fc1.layer_norm_bias'] = r(H)
        sd[p + 'mlp.linear_fc1.weight'] = r(4 * H, H)
        sd[p + 'mlp.linear_fc1.bias'] = r(4 * H)
        sd[p + 'mlp.linear_fc2.weight'] = r(H, 4 * H)
        sd[p + 'mlp.linear_fc2.bias'] = r(H)
    sd['decoder.final_layernorm.weight'] = r(H)
    sd['decoder.final_layernorm.bias'] = r(H)
    sd['output_layer.weight'] = r(VP, H)
    cfg = {'architectures': ['GPT2LMHeadModel'], 'n_embd': H, 'n_head': NH, 'num_key_value_heads': NH,
           'head_dim': HD, 'n_layer': L, 'vocab_size': V}
    return sd, cfg


def libai():
    sd = collections.OrderedDict()
    sd['GPT_model.embeddings.token_embeddings.weight'] = r(V + 6, H)
    sd['GPT_model.embeddings.position_embeddings.weight'] = r(32, H)
    for i in range(L):
        p = f'GPT_model.transformer.layers.{i}.'
        for n in ('input_layernorm', 'post_attention_layernorm'):
            sd[p + n + '.gamma'], sd[p + n + '.beta'] = r(H), r(H)
        sd[p + 'self_attention.query_key_value.weight'] = r(3 * H, H)
        sd[p + 'self_attention.query_key_value.bias'] = r(3 * H)
        sd[p + 'self_attention.dense.weight'], sd[p + 'self_attention.dense.bias'] = r(H, H), r(H)
        sd[p + 'mlp.dense_h_to_4h.weight'], sd[p + 'mlp.dense_h_to_4h.bias'] = r(4 * H, H), r(4 * H)
        sd[p + 'mlp.dense_4h_to_h.weight'], sd[p + 'mlp.dense_4h_to_h.bias'] = r(H, 4 * H), r(H)
    sd['GPT_model.transformer.layernorm_f.gamma'], sd['GPT_model.transformer.layernorm_f.beta'] = r(H), r(H)
    cfg = {'hidden_size': H, 'num_attention_heads': NH, 'num_hidden_layers': L, 'vocab_size': V + 6}
    return sd, cfg


# ---- DALLE2-pytorch (dalle2_pytorch/dalle2_pytorch.py) ----
CROSS_HEADS, CROSS_DH = 8, 64     # CrossAttention's defaults (ResnetBlock passes neither)
ATTN_HEADS, ATTN_DH = 4, 32       # Unet(attn_heads=4, attn_dim_head=32)


def lin(sd, p, o, i, bias=True):
    sd[p + 'weight'] = r(o, i)
    if bias:
        sd[p + 'bias'] = r(o)


def conv(sd, p, o, i, k):
    sd[p + 'weight'], sd[p + 'bias'] = r(o, i, k, k), r(o)


def attention(sd, a, d, ctx, heads, dh, kv_rows):
    """Attention / CrossAttention at a: LayerNorm g, null_kv [2, dim_head], to_q, to_kv over
    the context's width ctx, to_out = Sequential(Linear, LayerNorm)"""
    sd[a + 'norm.g'] = r(d)
    sd[a + 'null_kv'] = r(2, dh)
    lin(sd, a + 'to_q.', heads * dh, d, bias=False)
    lin(sd, a + 'to_kv.', kv_rows, ctx, bias=False)
    lin(sd, a + 'to_out.0.', d, heads * dh, bias=False)
    sd[a + 'to_out.1.g'] = r(d)


def resnet(sd, p, d, do, tcd, cond=None):
    """ResnetBlock(d, do, time_cond_dim=tcd, cond_dim=cond)"""
    lin(sd, p + 'time_mlp.1.', do * 2, tcd)
    if cond:  # CrossAttention(dim=do, context_dim=cond): [k | v] of every head
        attention(sd, p + 'cross_attn.', do, cond, CROSS_HEADS, CROSS_DH, 2 * CROSS_HEADS * CROSS_DH)
    for b, din in (('block1', d), ('block2', do)):
        conv(sd, p + b + '.project.', do, din, 3)
        sd[p + b + '.norm.weight'], sd[p + b + '.norm.bias'] = r(do), r(do)  # GroupNorm
    if d != do:
        conv(sd, p + 'res_conv.', do, d, 1)


def self_attn(sd, p, d):
    """RearrangeToSequence(Residual(Attention(d, heads, dim_head))): multi-query, to_kv one head"""
    attention(sd, p + 'fn.fn.', d, d, ATTN_HEADS, ATTN_DH, 2 * ATTN_DH)


def linear_attn(sd, p, d):
    """Residual(LinearAttention(d, heads, dim_head)): 1x1 convs, ChanLayerNorm g [1, d, 1, 1]"""
    a, inner = p + 'fn.', ATTN_HEADS * ATTN_DH
    sd[a + 'norm.g'] = r(1, d, 1, 1)
    sd[a + 'to_qkv.weight'] = r(inner * 3, d, 1, 1)
    sd[a + 'to_out.0.weight'] = r(d, inner, 1, 1)
    sd[a + 'to_out.1.g'] = r(1, d, 1, 1)


def unet(sd, p, dim, lowres):
    """Unet(dim, dim_mults=(1, 2), num_resnet_blocks=1, self_attn=(False, True), sparse_attn=True,
    cond_on_text_encodings=True, cond_on_image_embeds=True, image_embed_dim=dim, lowres_cond,
    init_cross_embed=True, pixel_shuffle_upsample=True); num_image_tokens=4, max_text_len=4"""
    tcd, cond, ch = dim * 4, dim, 3 * (2 if lowres else 1)
    for k, (ks, ds) in enumerate(((3, dim // 2), (7, dim // 4), (15, dim // 4))):
        conv(sd, p + f'init_conv.convs.{k}.', ds, ch, ks)
    lin(sd, p + 'to_time_hiddens.1.', tcd, dim)
    lin(sd, p + 'to_time_tokens.0.', cond * 2, tcd)
    lin(sd, p + 'to_time_cond.0.', tcd, tcd)
    lin(sd, p + 'to_image_hiddens.0.', tcd, dim)
    for n in ('norm_cond', 'norm_mid_cond'):
        sd[p + n + '.weight'], sd[p + n + '.bias'] = r(cond), r(cond)
    lin(sd, p + 'text_to_cond.', cond, dim)
    sd[p + 'null_image_embed'] = r(1, 4, cond)
    sd[p + 'null_image_hiddens'] = r(1, tcd)
    sd[p + 'null_text_embed'] = r(1, 4, cond)
    dims = [dim, dim, dim * 2]
    for s, (din, dout) in enumerate(zip(dims[:-1], dims[1:])):
        q, last = f'{p}downs.{s}.', s == 1
        resnet(sd, q + '1.', din, din, tcd)
        resnet(sd, q + '2.0.', din, din, tcd, cond if s else None)
        (self_attn if s == 1 else linear_attn)(sd, q + '3.', din)
        if last:
            conv(sd, q + '4.', dout, din, 1)
        else:
            conv(sd, q + '4.1.', dout, din * 4, 1)  # Downsample: pixel unshuffle + 1x1 conv
    mid = dims[-1]
    resnet(sd, p + 'mid_block1.', mid, mid, tcd, cond)
    self_attn(sd, p + 'mid_attn.', mid)
    resnet(sd, p + 'mid_block2.', mid, mid, tcd, cond)
    for s, (din, dout) in enumerate(reversed(list(zip(dims[:-1], dims[1:])))):
        q, last = f'{p}ups.{s}.', s == 1
        resnet(sd, q + '0.', dout + din, dout, tcd, None if last else cond)
        resnet(sd, q + '1.0.', dout + din, dout, tcd, None if last else cond)
        (self_attn if s == 0 else linear_attn)(sd, q + '2.', dout)
        if not last:
            conv(sd, q + '3.net.0.', din * 4, dout, 1)  # PixelShuffleUpsample
    resnet(sd, p + 'final_resnet_block.', dim * 2, dim, tcd)
    conv(sd, p + 'to_out.', 3, dim, 1)


def decoder_sd():
    sd = collections.OrderedDict()
    unet(sd, 'unets.0.', 16, False)
    unet(sd, 'unets.1.', 16, True)
    for u in range(2):
        for b in ('betas', 'alphas_cumprod', 'alphas_cumprod_prev', 'sqrt_alphas_cumprod',
                  'posterior_variance', 'p2_loss_weight'):
            sd[f'noise_schedulers.{u}.{b}'] = r(20)
    sd['clip.text_transformer.token_emb.weight'] = r(16, 8)
    sd['clip.visual_transformer.layers.0.fn.fn.norm.g'] = r(8)
    return sd


def dalle2():
    ema = decoder_sd()
    sd = collections.OrderedDict(('ema_model.' + k, v) for k, v in ema.items())
    sd.update(('model.' + k, v.clone()) for k, v in ema.items())
    return sd, {'head_dim': CROSS_DH}


def dalle2_prior():
    """DiffusionPrior(net=DiffusionPriorNetwork(dim, depth=2, dim_head=64, heads=2,
    num_timesteps=None (an MLP time embedding), normformer=False, rotary_emb=True))"""
    sd, d, dh, nh, inner = collections.OrderedDict(), 64, 64, 2, 4 * 64
    n = 'net.'
    for k, (o, i) in enumerate(((d * 2, d), (d * 2, d * 2), (d, d * 2))):
        lin(sd, f'{n}to_time_embeds.0.1.net.{k}.{"0." if k < 2 else ""}', o, i)
    sd[n + 'learned_query'] = r(d)
    c = n + 'causal_transformer.'
    sd[c + 'rel_pos_bias.relative_attention_bias.weight'] = r(32, nh)
    for i in range(2):
        p = f'{c}layers.{i}.'
        attention(sd, p + '0.', d, d, nh, dh, 2 * dh)  # multi-query
        sd[p + '0.rotary_emb.freqs'] = r(16)
        sd[p + '1.0.g'] = r(d)
        lin(sd, p + '1.1.', inner * 2, d, bias=False)
        lin(sd, p + '1.5.', d, inner, bias=False)
    sd[c + 'norm.g'] = r(d)
    lin(sd, c + 'project_out.', d, d, bias=False)
    sd[n + 'null_text_encodings'] = r(1, 4, d)
    sd[n + 'null_text_embeds'] = r(1, 1, d)
    sd[n + 'null_image_embed'] = r(1, d)
    for b in ('betas', 'alphas_cumprod', 'alphas_cumprod_prev', 'posterior_variance'):
        sd['noise_scheduler.' + b] = r(20)
    return sd, {'head_dim': dh}


def torchtitan():
    """torchtitan models/llama3 Transformer(dim, n_heads, n_kv_heads, ...) state_dict"""
    sd = collections.OrderedDict()
    sd['tok_embeddings.weight'] = r(V, H)
    for i in range(L):
        p = f'layers.{i}.'
        sd[p + 'attention.wq.weight'] = r(NH * HD, H)
        sd[p + 'attention.wk.weight'] = r(KV * HD, H)
        sd[p + 'attention.wv.weight'] = r(KV * HD, H)
        sd[p + 'attention.wo.weight'] = r(H, NH * HD)
        sd[p + 'feed_forward.w1.weight'] = r(I, H)
        sd[p + 'feed_forward.w2.weight'] = r(H, I)
        sd[p + 'feed_forward.w3.weight'] = r(I, H)
        sd[p + 'attention_norm.weight'] = r(H)
        sd[p + 'ffn_norm.weight'] = r(H)
    sd['norm.weight'] = r(H)
    sd['output.weight'] = r(V, H)
    cfg = {'architectures': ['LlamaForCausalLM'], 'hidden_size': H, 'num_attention_heads': NH,
           'num_key_value_heads': KV, 'intermediate_size': I, 'num_hidden_layers': L, 'vocab_size': V}
    return sd, cfg


MAKERS = {'megatron-llama': megatron_llama, 'torchtitan': torchtitan, 'megatron-gpt': megatron_gpt, 'libai': libai,
          'dalle2': dalle2, 'dalle2-prior': dalle2_prior}
if preset not in MAKERS:
    print(f'make_family_src.py: no model for preset {preset}', file=sys.stderr)
    sys.exit(3)
sd, cfg = MAKERS[preset]()
os.makedirs(out, exist_ok=True)
write_st(os.path.join(out, 'model.safetensors'), {k: v.contiguous() for k, v in sd.items()})
with open(os.path.join(out, 'config.json'), 'w') as f:
    json.dump(cfg, f, indent=2)
