"""A Megatron-Core torch_dist folder of non-homogeneous layers (moe_layer_freq
[0, 1]: layer 0 dense, layer 1 a mixture of 2 experts): each layer's keys carry
its number (megatron/core/transformer/transformer_block.py:793-812, 835-837 at
Megatron-LM d98e8a6), the experts still one key per parameter [experts, ...]
(moe/experts.py:1526-1566). Written by torch's DCP (flatten_state_dict=False as
Megatron saves) with metadata.json; run in the forky chroot (torch 2.14):
  python3 make_megatron_nonhomog.py OUT    -> OUT/latest_checkpointed_iteration.txt, OUT/release/
Values: element i of key k is k's index * 1000 + i (float32), so a reader's
per-expert slices can be checked by value."""
import json, os, sys
import torch
import torch.distributed.checkpoint as dcp

out = sys.argv[1]
it = os.path.join(out, "release")
os.makedirs(it, exist_ok=True)
H, F, E = 4, 6, 2
shapes = {
    "embedding.word_embeddings.weight": (8, H),
    "decoder.layers.0.self_attention.linear_qkv.weight": (3 * H, H),
    "decoder.layers.0.mlp.linear_fc1.weight": (2 * F, H),
    "decoder.layers.0.mlp.linear_fc2.weight": (H, F),
    "decoder.layers.1.self_attention.linear_qkv.weight": (3 * H, H),
    "decoder.layers.1.pre_mlp_layernorm.weight": (H,),
    "decoder.layers.1.mlp.router.weight": (E, H),
    "decoder.layers.1.mlp.experts.experts.linear_fc1.weight": (E, 2 * F, H),
    "decoder.layers.1.mlp.experts.experts.linear_fc2.weight": (E, H, F),
    "decoder.final_layernorm.weight": (H,),
}
sd = {}
for k, (name, shape) in enumerate(shapes.items()):
    n = 1
    for d in shape:
        n *= d
    sd[name] = (torch.arange(n, dtype=torch.float32) + k * 1000).reshape(shape)
dcp.save(sd, storage_writer=dcp.FileSystemWriter(it), no_dist=True)
json.dump({"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch",
           "common_backend_version": 1}, open(os.path.join(it, "metadata.json"), "w"))
open(os.path.join(out, "latest_checkpointed_iteration.txt"), "w").write("release")
print("wrote", out, len(sd), "keys")
