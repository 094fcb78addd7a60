# Writes tests/data/tiny_gemma2.safetensors and tiny_gemma3.safetensors (tiny
# Gemma 2 and Gemma 3 text models with the Hugging Face checkpoint names),
# their config.json as tiny_gemma2.json / tiny_gemma3.json, and
# tiny_gemma_logits.safetensors: real transformers' Gemma2ForCausalLM and
# Gemma3ForCausalLM (5.x, eager attention, run in float64) logits on fixed
# token ids ("ids", "logits.gemma2", "logits.gemma3"). What they exercise:
# sandwich norms stored as w (1 + w applied), the embedding times
# sqrt(hidden) (hidden 48: not a whole number), gelu_pytorch_tanh, a
# query_pre_attn_scalar that is not head_dim, sliding layers with a window
# of 4 of the 10 tokens; Gemma 2's attention and final logit softcaps (small
# enough to bite); Gemma 3's per-head q_norm/k_norm (1 + w), its own rope
# theta for the sliding layers and a linear rope scaling on the full ones.
# tests/verify/test_verify_forward.c compares verify's fp64 reference forward with
# them, reading the facts from the two config files.
# usage: python3 make_tiny_gemma.py OUTDIR   (torch >= 2.4, transformers >= 5)
import json, os, sys, tempfile
import torch
from safetensors.torch import save_file
import transformers as tf

out = sys.argv[1]
H, V, L, NH, KVH, HD, I = 48, 48, 3, 4, 2, 16, 64
COMMON = dict(vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=L, num_attention_heads=NH,
              num_key_value_heads=KVH, head_dim=HD, max_position_embeddings=64, query_pre_attn_scalar=24,
              sliding_window=4, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
              pad_token_id=0, bos_token_id=2, eos_token_id=1)
CFGS = {
    "gemma2": (tf.Gemma2Config, tf.Gemma2ForCausalLM,
               dict(COMMON, attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    "gemma3": (tf.Gemma3TextConfig, tf.Gemma3ForCausalLM,
               dict(COMMON, layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                    rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
                                     "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}})),
}
ids = torch.tensor([[3, 17, 41, 0, 29, 8, 47, 12, 33, 21]])
res = {"ids": ids[0].to(torch.int64)}
os.makedirs(out, exist_ok=True)
for seed, (name, (ccls, mcls, kw)) in enumerate(CFGS.items()):
    torch.manual_seed(7 + seed)
    m = mcls(ccls(**kw))
    with torch.no_grad():
        for n, p in m.named_parameters():
            p.copy_(torch.randn_like(p) * (0.2 if "norm" in n else 0.4))
    m = m.float()
    sd = {k: v.contiguous() for k, v in m.state_dict().items() if k != "lm_head.weight"}
    with tempfile.TemporaryDirectory() as d:
        m.save_pretrained(d)
        cfg = json.load(open(os.path.join(d, "config.json")))
        m2 = mcls.from_pretrained(d, attn_implementation="eager").double().eval()
        with torch.no_grad():
            res["logits." + name] = m2(input_ids=ids).logits[0].contiguous()
    save_file(sd, os.path.join(out, "tiny_%s.safetensors" % name))
    json.dump(cfg, open(os.path.join(out, "tiny_%s.json" % name), "w"), indent=1, sort_keys=True)
save_file(res, os.path.join(out, "tiny_gemma_logits.safetensors"))
print("ok", {k: tuple(v.shape) for k, v in res.items()})
