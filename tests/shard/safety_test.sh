#!/usr/bin/env bash
# Never a silently wrong set (TAP): tensors that only the plan's fallback would
# replicate but that belong to a layer the plan splits (GPTQ qweight/qzeros/scales/
# g_idx, FP8 weight_scale_inv, in a checkpoint whose config has no quantization_config) or to a mixture-of-experts layer (experts.N.*) are
# refused with exit 3 naming the tensor and the rule its layer has, nothing written;
# plain unmatched tensors (norms, buffers) are still replicated and the dry run says
# why each replicated tensor is.
# usage: safety_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=/usr/bin/python3
. "$SRC/tests/shard/tap.sh"
$PY - "$T" <<'PYEOF' || { echo "1..0 # SKIP generator failed"; exit 0; }
import json, os, sys, torch
out = sys.argv[1]
torch.manual_seed(3)
H, I, V, nh, kv = 256, 512, 1000, 8, 4
hd = H // nh
def base():
    sd = {"model.embed_tokens.weight": torch.randn(V, H), "lm_head.weight": torch.randn(V, H), "model.norm.weight": torch.ones(H)}
    p = "model.layers.0."
    sd[p + "input_layernorm.weight"] = torch.ones(H)
    sd[p + "post_attention_layernorm.weight"] = torch.ones(H)
    return sd
cfg = {"hidden_size": H, "num_attention_heads": nh, "num_key_value_heads": kv, "vocab_size": V, "num_hidden_layers": 1,
       "intermediate_size": I}
def save(name, sd, extra=None):
    d = os.path.join(out, name); os.makedirs(d, exist_ok=True)
    torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    c = dict(cfg); c.update(extra or {})
    json.dump(c, open(os.path.join(d, "config.json"), "w"))
# GPTQ (4-bit, group 128): qweight [in/8, out] int32, qzeros [in/128, out/8], scales [in/128, out] f16, g_idx [in]
sd = base(); p = "model.layers.0."
for m, (o, i) in {"self_attn.q_proj": (H, H), "self_attn.k_proj": (kv * hd, H), "self_attn.v_proj": (kv * hd, H),
                  "self_attn.o_proj": (H, H), "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I)}.items():
    sd[p + m + ".qweight"] = torch.randint(-2**31, 2**31 - 1, (i // 8, o), dtype=torch.int32)
    sd[p + m + ".qzeros"] = torch.randint(-2**31, 2**31 - 1, (i // 128, o // 8), dtype=torch.int32)
    sd[p + m + ".scales"] = torch.randn(i // 128, o).half()
    sd[p + m + ".g_idx"] = (torch.arange(i) // 128).int()
save("gptq", sd)  # no quantization_config: the companions' packing is unknown (tests/shard/quant_test.sh has it)
# FP8 block scales: weight (raw e4m3 bytes) [out, in], weight_scale_inv [out/128, in/128]
sd = base()
for m, (o, i) in {"self_attn.q_proj": (H, H), "self_attn.k_proj": (kv * hd, H), "self_attn.v_proj": (kv * hd, H),
                  "self_attn.o_proj": (H, H), "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I)}.items():
    sd[p + m + ".weight"] = torch.randint(0, 255, (o, i), dtype=torch.uint8)
    sd[p + m + ".weight_scale_inv"] = torch.rand((o + 127) // 128, (i + 127) // 128)
save("fp8", sd)  # no quantization_config
# Mixtral-style experts under a dense plan
sd = base()
for m, (o, i) in {"self_attn.q_proj": (H, H), "self_attn.k_proj": (kv * hd, H), "self_attn.v_proj": (kv * hd, H),
                  "self_attn.o_proj": (H, H)}.items():
    sd[p + m + ".weight"] = torch.randn(o, i)
sd[p + "block_sparse_moe.gate.weight"] = torch.randn(4, H)
for e in range(4):
    sd[p + "block_sparse_moe.experts.%d.w1.weight" % e] = torch.randn(I, H)
    sd[p + "block_sparse_moe.experts.%d.w2.weight" % e] = torch.randn(H, I)
    sd[p + "block_sparse_moe.experts.%d.w3.weight" % e] = torch.randn(I, H)
save("moe", sd)
PYEOF
run "$TPCONV" shard "$T/gptq" --preset llama --tp 2 -o "$T/o1" -q
[ "$rc" = 3 ] && grep -q "tensor 'model.layers.0.self_attn.q_proj.qweight'" "$T/err" && grep -q "plan splits its layer ('model.layers.0.self_attn.q_proj.weight', rule 0: col)" "$T/err" &&
  [ ! -e "$T/o1" ] && ok "a GPTQ model under a plan without quantized rules: exit 3 naming qweight and its layer's rule, nothing written" ||
  bad "gptq" "exit $rc" "$(cat "$T/err")" "$(ls "$T/o1" 2>/dev/null)"
run "$TPCONV" shard "$T/fp8" --preset llama --tp 2 -o "$T/o2" -q
[ "$rc" = 3 ] && grep -q "weight_scale_inv'" "$T/err" && grep -q "plan splits its layer" "$T/err" && [ ! -e "$T/o2" ] &&
  ok "an FP8 model's weight_scale_inv under a plan that splits its weight: exit 3, nothing written" || bad "fp8" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$T/moe" --preset llama --tp 2 -o "$T/o3" -q
[ "$rc" = 3 ] && grep -q "block_sparse_moe.experts.0.w1.weight'" "$T/err" && grep -q "mixture-of-experts" "$T/err" && [ ! -e "$T/o3" ] &&
  ok "experts under a dense plan: exit 3 naming the first expert weight, nothing written" || bad "moe" "exit $rc" "$(cat "$T/err")"
run "$TPCONV" shard "$T/moe" --preset llama --tp 2 --dry-run
[ "$rc" = 3 ] && ok "--dry-run refuses the same way" || bad "moe dry-run" "exit $rc"
# a plan that says how (drop the experts here) is accepted, and the dry run says why each replicated tensor is
run "$TPCONV" shard "$T/moe" --preset llama --tp 2 --drop 'experts\.' --dry-run
[ "$rc" = 0 ] && grep -q "^#   model.layers.0.block_sparse_moe.gate.weight  no rule: the fallback" "$T/out" &&
  grep -q "^#   model.norm.weight  rule [0-9]* (replicate)" "$T/out" &&
  ok "with the experts dropped: accepted; the dry run lists each replicated tensor and why (rule or fallback)" || bad "dry-run reasons" "exit $rc" "$(cat "$T/err")" "$(grep -A12 '^# replicated' "$T/out")"
echo "1..$n"
[ "$failed" = 0 ]
