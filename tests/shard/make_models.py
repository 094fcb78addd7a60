# Tiny checkpoints for every sharding preset, made by real torch (/usr/bin/python3).
# usage: make_models.py OUTDIR [SEED]
# Writes, per preset P: OUTDIR/P.pt (torch.save of the state dict), OUTDIR/P/model.safetensors
# (the same tensors, written the way safetensors.torch.save_file lays them out) and
# OUTDIR/P/config.json (Hugging Face style model facts). Names and shapes follow the real
# model classes (HF LLaMA with Qwen2-style q/k/v biases and GQA, GPT-2 Conv1D, GPT-NeoX
# interleaved query_key_value, BERT, LiBai GPT, DALLE2-pytorch prior transformer).
import collections, json, os, sys
import torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import tpctest  # noqa: E402

out = sys.argv[1]
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
torch.manual_seed(seed)
os.makedirs(out, exist_ok=True)
H, NH, HD, V, L, POS = 64, 8, 8, 250, 2, 32


def lin(o, i, bias=True, dt=torch.float32):
    m = torch.nn.Linear(i, o, bias=bias)
    return m.weight.detach().to(dt), (m.bias.detach().to(dt) if bias else None)


def rnd(*shape, dt=torch.float32):
    return torch.randn(*shape).to(dt)


def llama():
    sd, kv = collections.OrderedDict(), 4
    sd['model.embed_tokens.weight'] = rnd(V, H)
    for i in range(L):
        p = f'model.layers.{i}.'
        for n, o in (('q_proj', NH * HD), ('k_proj', kv * HD), ('v_proj', kv * HD)):
            sd[p + f'self_attn.{n}.weight'], sd[p + f'self_attn.{n}.bias'] = lin(o, H)  # Qwen2 biases
        sd[p + 'self_attn.o_proj.weight'], _ = lin(H, NH * HD, bias=False)
        sd[p + 'self_attn.rotary_emb.inv_freq'] = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
        sd[p + 'mlp.gate_proj.weight'], _ = lin(96, H, bias=False)
        sd[p + 'mlp.up_proj.weight'], _ = lin(96, H, bias=False)
        sd[p + 'mlp.down_proj.weight'], _ = lin(H, 96, bias=False)
        sd[p + 'input_layernorm.weight'] = rnd(H)
        sd[p + 'post_attention_layernorm.weight'] = rnd(H)
    sd['model.norm.weight'] = rnd(H)
    sd['lm_head.weight'] = rnd(V, H)
    sd['model.extra_scale'] = torch.tensor(0.5)  # no rule matches: the fallback replicates it
    cfg = {'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_size': H,
           'num_attention_heads': NH, 'num_key_value_heads': kv, 'intermediate_size': 96,
           'num_hidden_layers': L, 'vocab_size': V, 'torch_dtype': 'float32'}
    return sd, cfg


def gpt2():
    sd = collections.OrderedDict()
    wte = rnd(V, H)
    sd['transformer.wte.weight'] = wte
    sd['transformer.wpe.weight'] = rnd(POS, H)
    for i in range(L):
        p = f'transformer.h.{i}.'
        sd[p + 'ln_1.weight'], sd[p + 'ln_1.bias'] = rnd(H), rnd(H)
        sd[p + 'attn.bias'] = torch.tril(torch.ones(POS, POS, dtype=torch.bool)).view(1, 1, POS, POS)
        sd[p + 'attn.masked_bias'] = torch.tensor(-1e4)
        sd[p + 'attn.c_attn.weight'], sd[p + 'attn.c_attn.bias'] = rnd(H, 3 * H), rnd(3 * H)  # Conv1D [in, out]
        sd[p + 'attn.c_proj.weight'], sd[p + 'attn.c_proj.bias'] = rnd(H, H), rnd(H)
        sd[p + 'ln_2.weight'], sd[p + 'ln_2.bias'] = rnd(H), rnd(H)
        sd[p + 'mlp.c_fc.weight'], sd[p + 'mlp.c_fc.bias'] = rnd(H, 4 * H), rnd(4 * H)
        sd[p + 'mlp.c_proj.weight'], sd[p + 'mlp.c_proj.bias'] = rnd(4 * H, H), rnd(H)
    sd['transformer.ln_f.weight'], sd['transformer.ln_f.bias'] = rnd(H), rnd(H)
    sd['lm_head.weight'] = wte  # tied, as GPT2LMHeadModel saves it
    cfg = {'architectures': ['GPT2LMHeadModel'], 'model_type': 'gpt2', 'n_embd': H, 'n_head': NH,
           'n_layer': L, 'n_positions': POS, 'vocab_size': V}
    return sd, cfg


def neox():
    sd, dt = collections.OrderedDict(), torch.bfloat16
    sd['gpt_neox.embed_in.weight'] = rnd(V, H, dt=dt)
    for i in range(L):
        p = f'gpt_neox.layers.{i}.'
        sd[p + 'input_layernorm.weight'], sd[p + 'input_layernorm.bias'] = rnd(H, dt=dt), rnd(H, dt=dt)
        sd[p + 'post_attention_layernorm.weight'], sd[p + 'post_attention_layernorm.bias'] = rnd(H, dt=dt), rnd(H, dt=dt)
        sd[p + 'attention.bias'] = torch.tril(torch.ones(POS, POS, dtype=torch.bool)).view(1, 1, POS, POS)
        sd[p + 'attention.masked_bias'] = torch.tensor(-1e9)
        sd[p + 'attention.rotary_emb.inv_freq'] = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD))
        # [nh, 3, hd] interleaved rows, as GPT-NeoX stores query_key_value
        sd[p + 'attention.query_key_value.weight'], sd[p + 'attention.query_key_value.bias'] = lin(3 * H, H, dt=dt)
        sd[p + 'attention.dense.weight'], sd[p + 'attention.dense.bias'] = lin(H, H, dt=dt)
        sd[p + 'mlp.dense_h_to_4h.weight'], sd[p + 'mlp.dense_h_to_4h.bias'] = lin(4 * H, H, dt=dt)
        sd[p + 'mlp.dense_4h_to_h.weight'], sd[p + 'mlp.dense_4h_to_h.bias'] = lin(H, 4 * H, dt=dt)
    sd['gpt_neox.final_layer_norm.weight'], sd['gpt_neox.final_layer_norm.bias'] = rnd(H, dt=dt), rnd(H, dt=dt)
    sd['embed_out.weight'] = rnd(V, H, dt=dt)
    cfg = {'architectures': ['GPTNeoXForCausalLM'], 'model_type': 'gpt_neox', 'hidden_size': H,
           'num_attention_heads': NH, 'num_hidden_layers': L, 'vocab_size': V, 'torch_dtype': 'bfloat16'}
    return sd, cfg


def bert():
    sd, dt = collections.OrderedDict(), torch.float16
    sd['bert.embeddings.position_ids'] = torch.arange(POS).view(1, POS)
    sd['bert.embeddings.word_embeddings.weight'] = rnd(V, H, dt=dt)
    sd['bert.embeddings.position_embeddings.weight'] = rnd(POS, H, dt=dt)
    sd['bert.embeddings.token_type_embeddings.weight'] = rnd(2, H, dt=dt)
    sd['bert.embeddings.LayerNorm.weight'], sd['bert.embeddings.LayerNorm.bias'] = rnd(H, dt=dt), rnd(H, dt=dt)
    for i in range(L):
        p = f'bert.encoder.layer.{i}.'
        for n in ('query', 'key', 'value'):
            sd[p + f'attention.self.{n}.weight'], sd[p + f'attention.self.{n}.bias'] = lin(H, H, dt=dt)
        sd[p + 'attention.output.dense.weight'], sd[p + 'attention.output.dense.bias'] = lin(H, H, dt=dt)
        sd[p + 'attention.output.LayerNorm.weight'], sd[p + 'attention.output.LayerNorm.bias'] = rnd(H, dt=dt), rnd(H, dt=dt)
        sd[p + 'intermediate.dense.weight'], sd[p + 'intermediate.dense.bias'] = lin(4 * H, H, dt=dt)
        sd[p + 'output.dense.weight'], sd[p + 'output.dense.bias'] = lin(H, 4 * H, dt=dt)
        sd[p + 'output.LayerNorm.weight'], sd[p + 'output.LayerNorm.bias'] = rnd(H, dt=dt), rnd(H, dt=dt)
    sd['bert.pooler.dense.weight'], sd['bert.pooler.dense.bias'] = lin(H, H, dt=dt)
    sd['cls.predictions.bias'] = rnd(V, dt=dt)
    sd['cls.predictions.transform.dense.weight'], sd['cls.predictions.transform.dense.bias'] = lin(H, H, dt=dt)
    sd['cls.predictions.transform.LayerNorm.weight'] = rnd(H, dt=dt)
    sd['cls.predictions.transform.LayerNorm.bias'] = rnd(H, dt=dt)
    sd['cls.predictions.decoder.weight'] = sd['bert.embeddings.word_embeddings.weight']  # tied
    sd['cls.predictions.decoder.bias'] = sd['cls.predictions.bias']
    cfg = {'architectures': ['BertForMaskedLM'], 'model_type': 'bert', 'hidden_size': H,
           'num_attention_heads': NH, 'num_hidden_layers': L, 'vocab_size': V, 'intermediate_size': 4 * H}
    return sd, cfg


def libai():
    sd = collections.OrderedDict()
    sd['GPT_model.embeddings.token_embeddings.weight'] = rnd(V, H)
    sd['GPT_model.embeddings.position_embeddings.weight'] = rnd(POS, H)
    for i in range(L):
        p = f'GPT_model.transformer.layers.{i}.'
        sd[p + 'input_layernorm.weight'], sd[p + 'input_layernorm.bias'] = rnd(H), rnd(H)
        sd[p + 'self_attention.query_key_value.weight'], sd[p + 'self_attention.query_key_value.bias'] = lin(3 * H, H)
        sd[p + 'self_attention.dense.weight'], sd[p + 'self_attention.dense.bias'] = lin(H, H)
        sd[p + 'post_attention_layernorm.weight'], sd[p + 'post_attention_layernorm.bias'] = rnd(H), rnd(H)
        sd[p + 'mlp.dense_h_to_4h.weight'], sd[p + 'mlp.dense_h_to_4h.bias'] = lin(4 * H, H)
        sd[p + 'mlp.dense_4h_to_h.weight'], sd[p + 'mlp.dense_4h_to_h.bias'] = lin(H, 4 * H)
    sd['GPT_model.transformer.layernorm_f.weight'], sd['GPT_model.transformer.layernorm_f.bias'] = rnd(H), rnd(H)
    cfg = {'hidden_size': H, 'num_attention_heads': NH, 'hidden_layers': L, 'vocab_size': V}
    return sd, cfg


def dalle2():
    # DiffusionPrior's CausalTransformer: layers.N = [Attention (multi-query: to_kv is one
    # head, dim_head * 2 rows), FeedForward (LayerNorm, Linear(dim, inner*2), SwiGLU,
    # Identity, Dropout, Linear(inner, dim))], plus a cross-attention block whose to_kv is
    # Linear(dim, inner*2) (all heads).
    sd = collections.OrderedDict()
    inner = 4 * H
    for i in range(L):
        p = f'net.causal_transformer.layers.{i}.'
        sd[p + '0.norm.g'] = rnd(H)
        sd[p + '0.null_kv'] = rnd(2, HD)
        sd[p + '0.to_q.weight'], _ = lin(NH * HD, H, bias=False)
        sd[p + '0.to_kv.weight'], _ = lin(2 * HD, H, bias=False)
        sd[p + '0.to_out.0.weight'], _ = lin(H, NH * HD, bias=False)
        sd[p + '0.to_out.1.g'] = rnd(H)
        sd[p + '1.0.g'] = rnd(H)
        sd[p + '1.1.weight'], _ = lin(inner * 2, H, bias=False)
        sd[p + '1.5.weight'], _ = lin(H, inner, bias=False)
    c = 'net.cross_attn.'
    sd[c + 'to_q.weight'], _ = lin(NH * HD, H, bias=False)
    sd[c + 'to_kv.weight'], _ = lin(2 * NH * HD, H, bias=False)
    sd[c + 'to_out.0.weight'], _ = lin(H, NH * HD, bias=False)
    sd['net.causal_transformer.norm.g'] = rnd(H)
    sd['net.causal_transformer.project_out.weight'], _ = lin(H, H, bias=False)
    sd['net.causal_transformer.rel_pos_bias.relative_attention_bias.weight'] = rnd(32, NH)
    cfg = {'dim': H, 'heads': NH, 'head_dim': HD, 'depth': L}
    return sd, cfg


def dit():
    # diffusers PixArt-style DiT blocks (BasicTransformerBlock, norm_type ada_norm_single) with a
    # GEGLU feed-forward (activation_fn "geglu": ff.net.0.proj = Linear(dim, 2 * inner),
    # hidden, gate = proj(x).chunk(2, -1)) and a cross-attention attn2 over caption states of
    # width CROSS != dim.
    sd, cross, inner = collections.OrderedDict(), 48, 4 * H
    sd['pos_embed.proj.weight'], sd['pos_embed.proj.bias'] = rnd(H, 4, 2, 2), rnd(H)
    for i in range(L):
        p = f'transformer_blocks.{i}.'
        sd[p + 'scale_shift_table'] = rnd(6, H)
        for n in ('to_q', 'to_k', 'to_v'):
            sd[p + f'attn1.{n}.weight'], sd[p + f'attn1.{n}.bias'] = lin(NH * HD, H)
        sd[p + 'attn1.to_out.0.weight'], sd[p + 'attn1.to_out.0.bias'] = lin(H, NH * HD)
        sd[p + 'attn2.to_q.weight'], sd[p + 'attn2.to_q.bias'] = lin(NH * HD, H)
        for n in ('to_k', 'to_v'):
            sd[p + f'attn2.{n}.weight'], sd[p + f'attn2.{n}.bias'] = lin(NH * HD, cross)
        sd[p + 'attn2.to_out.0.weight'], sd[p + 'attn2.to_out.0.bias'] = lin(H, NH * HD)
        sd[p + 'ff.net.0.proj.weight'], sd[p + 'ff.net.0.proj.bias'] = lin(2 * inner, H)
        sd[p + 'ff.net.2.weight'], sd[p + 'ff.net.2.bias'] = lin(H, inner)
    sd['scale_shift_table'] = rnd(2, H)
    sd['adaln_single.emb.timestep_embedder.linear_1.weight'], sd['adaln_single.emb.timestep_embedder.linear_1.bias'] = lin(H, 32)
    sd['adaln_single.linear.weight'], sd['adaln_single.linear.bias'] = lin(6 * H, H)
    sd['caption_projection.linear_1.weight'], sd['caption_projection.linear_1.bias'] = lin(H, cross)
    sd['proj_out.weight'], sd['proj_out.bias'] = lin(16, H)
    cfg = {'_class_name': 'PixArtTransformer2DModel', 'num_attention_heads': NH, 'attention_head_dim': HD,
           'cross_attention_dim': cross, 'num_layers': L, 'activation_fn': 'geglu', 'norm_type': 'ada_norm_single'}
    return sd, cfg


def flux():
    # diffusers Flux: joint (double-stream) blocks with add_*_proj / to_add_out / ff_context and
    # per-head RMSNorms, single-stream blocks whose proj_out reads [attention | mlp] (Linear(dim +
    # mlp_hidden, dim)), gelu-approximate feed-forwards (no activation_fn in the config).
    sd, mlp = collections.OrderedDict(), 4 * H
    sd['x_embedder.weight'], sd['x_embedder.bias'] = lin(H, 16)
    sd['context_embedder.weight'], sd['context_embedder.bias'] = lin(H, 40)
    sd['time_text_embed.timestep_embedder.linear_1.weight'], sd['time_text_embed.timestep_embedder.linear_1.bias'] = lin(H, 32)
    for i in range(L):
        p = f'transformer_blocks.{i}.'
        sd[p + 'norm1.linear.weight'], sd[p + 'norm1.linear.bias'] = lin(6 * H, H)
        sd[p + 'norm1_context.linear.weight'], sd[p + 'norm1_context.linear.bias'] = lin(6 * H, H)
        for n in ('to_q', 'to_k', 'to_v', 'add_q_proj', 'add_k_proj', 'add_v_proj'):
            sd[p + f'attn.{n}.weight'], sd[p + f'attn.{n}.bias'] = lin(NH * HD, H)
        for n in ('norm_q', 'norm_k', 'norm_added_q', 'norm_added_k'):
            sd[p + f'attn.{n}.weight'] = rnd(HD)
        sd[p + 'attn.to_out.0.weight'], sd[p + 'attn.to_out.0.bias'] = lin(H, NH * HD)
        sd[p + 'attn.to_add_out.weight'], sd[p + 'attn.to_add_out.bias'] = lin(H, NH * HD)
        for f in ('ff', 'ff_context'):
            sd[p + f'{f}.net.0.proj.weight'], sd[p + f'{f}.net.0.proj.bias'] = lin(4 * H, H)
            sd[p + f'{f}.net.2.weight'], sd[p + f'{f}.net.2.bias'] = lin(H, 4 * H)
    for i in range(L):
        p = f'single_transformer_blocks.{i}.'
        sd[p + 'norm.linear.weight'], sd[p + 'norm.linear.bias'] = lin(3 * H, H)
        for n in ('to_q', 'to_k', 'to_v'):
            sd[p + f'attn.{n}.weight'], sd[p + f'attn.{n}.bias'] = lin(NH * HD, H)
        sd[p + 'attn.norm_q.weight'], sd[p + 'attn.norm_k.weight'] = rnd(HD), rnd(HD)
        sd[p + 'proj_mlp.weight'], sd[p + 'proj_mlp.bias'] = lin(mlp, H)
        sd[p + 'proj_out.weight'], sd[p + 'proj_out.bias'] = lin(H, H + mlp)
    sd['norm_out.linear.weight'], sd['norm_out.linear.bias'] = lin(2 * H, H)
    sd['proj_out.weight'], sd['proj_out.bias'] = lin(16, H)
    cfg = {'_class_name': 'FluxTransformer2DModel', 'num_attention_heads': NH, 'attention_head_dim': HD,
           'num_layers': L, 'num_single_layers': L, 'joint_attention_dim': 40, 'in_channels': 16}
    return sd, cfg


def save_safetensors(sd, path):
    tpctest.save_safetensors(path, sd)


for name, fn in (('llama', llama), ('gpt2', gpt2), ('gpt-neox', neox), ('bert', bert), ('libai', libai),
                 ('dalle2', dalle2), ('dit', dit), ('flux', flux)):
    sd, cfg = fn()
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    torch.save(sd, os.path.join(out, name + '.pt'))
    save_safetensors(sd, os.path.join(d, 'model.safetensors'))
    with open(os.path.join(d, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
print('seed', seed)
