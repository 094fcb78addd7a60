# Writes tests/data/tiny_gpt_neox.safetensors and tiny_bert.safetensors (tiny
# GPTNeoXForCausalLM and BertForMaskedLM checkpoints as transformers'
# save_pretrained writes them: BERT's decoder tied to its word embeddings, so
# absent), their config.json files, and tiny_neox_bert_out.safetensors: real
# transformers' (5.x, run in float64) outputs on fixed token ids - GPT-NeoX
# logits with the parallel residual and rotary_pct 0.5 ("neox.parallel") and
# without it, rotary_pct 0.25 ("neox.sequential"); BERT's MLM logits
# ("bert.mlm") and BertModel's last hidden states ("bert.hidden").
# tests/verify/test_verify_forward.c compares verify's fp64 reference forward with them.
# usage: python3 make_tiny_neox_bert.py OUTDIR   (torch >= 2.4, transformers >= 5)
import json, os, sys, tempfile
import torch
from safetensors.torch import load_file, save_file
from transformers import BertConfig, BertForMaskedLM, GPTNeoXConfig, GPTNeoXForCausalLM

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(35)
H, V, L, NH, I = 32, 48, 2, 4, 64


def randomize(model):
    # weights of a scale that makes every part of the forward matter
    with torch.no_grad():
        for n, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float64).float()
            if "LayerNorm.weight" in n or "layernorm.weight" in n or "layer_norm.weight" in n:
                p.copy_(1 + 0.2 * r)
            elif n.endswith("bias"):
                p.copy_(0.1 * r)
            elif "embed" in n:
                p.copy_(r)
            else:
                p.copy_(0.25 * r)


def saved(model, name):
    # save_pretrained's own file, config.json beside it
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        sd = load_file(os.path.join(d, "model.safetensors"))
        cfg = json.load(open(os.path.join(d, "config.json")))
    save_file(sd, os.path.join(out, name + ".safetensors"), metadata={"format": "pt"})
    json.dump(cfg, open(os.path.join(out, name + ".json"), "w"), indent=1)
    return sd


ids = torch.tensor([[3, 17, 41, 0, 29, 8, 47, 12, 33, 21]])
res = {"ids": ids[0].to(torch.int64)}
nc = dict(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, intermediate_size=I,
          max_position_embeddings=64, hidden_act="gelu", layer_norm_eps=1e-5, tie_word_embeddings=False)
neox = GPTNeoXForCausalLM(GPTNeoXConfig(rotary_pct=0.5, use_parallel_residual=True, **nc))
randomize(neox)
saved(neox, "tiny_gpt_neox")
neox = neox.double().eval()
with torch.no_grad():
    res["neox.parallel"] = neox(input_ids=ids).logits[0].contiguous()
seq = GPTNeoXForCausalLM(GPTNeoXConfig(rotary_pct=0.25, use_parallel_residual=False, **nc))
seq.load_state_dict(neox.state_dict())
seq = seq.double().eval()
with torch.no_grad():
    res["neox.sequential"] = seq(input_ids=ids).logits[0].contiguous()

bert = BertForMaskedLM(BertConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH,
                                  intermediate_size=I, max_position_embeddings=64, type_vocab_size=2,
                                  hidden_act="gelu", layer_norm_eps=1e-12))
randomize(bert)
bert.tie_weights()
saved(bert, "tiny_bert")
bert = bert.double().eval()
with torch.no_grad():
    res["bert.mlm"] = bert(input_ids=ids).logits[0].contiguous()
    res["bert.hidden"] = bert.bert(input_ids=ids).last_hidden_state[0].contiguous()
save_file(res, os.path.join(out, "tiny_neox_bert_out.safetensors"))
print("ok", {k: tuple(v.shape) for k, v in res.items()})
