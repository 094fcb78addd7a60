"""A gpt-oss with its own MXFP4 experts whose intermediate_size (128: 4
blocks of 32 inputs) splits into whole blocks at tp 2 and tp 4, for
tests/quant/fp4_test.sh's shard without --dequantize; with INTERMEDIATE 224
(7 blocks: gptoss-mxfp4-uneven) tp 4 gives vLLM's uneven 2/2/2/1 blocks.
Run in the forky chroot (torch 2.14, transformers 5.12):
    python3 make_gptoss_mxfp4_wide.py SRC OUT [INTERMEDIATE]
SRC is the tpconv tree. transformers' GptOssForCausalLM from_config (hidden
32, intermediate 128 or INTERMEDIATE, 2 layers, 4 experts, seed 45), saved
in bf16, then
tests/quant/make_gptoss_mxfp4.py quantizes its experts into OUT
(model.safetensors, config.json); its ref.safetensors is left out (the test
compares each rank with shard --dequantize of the same folder)."""
import os, subprocess, sys, tempfile
import torch
import transformers as tf

src, out = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp()
torch.manual_seed(45)
inter = int(sys.argv[3]) if len(sys.argv) > 3 else 128
cfg = tf.GptOssConfig(vocab_size=320, hidden_size=32, intermediate_size=inter, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, head_dim=8,
                      num_local_experts=4, num_experts_per_tok=2, sliding_window=4, tie_word_embeddings=False,
                      bos_token_id=0, eos_token_id=0, pad_token_id=0)
tf.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16).save_pretrained(tmp)
subprocess.run([sys.executable, os.path.join(src, "tests/quant/make_gptoss_mxfp4.py"), tmp, out], check=True)
os.remove(os.path.join(out, "ref.safetensors"))
print("wrote", out)
