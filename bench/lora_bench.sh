#!/usr/bin/env bash
# make bench: merging a rank-64 PEFT LoRA adapter into the 4.74 GB LLaMA-shaped
# float32 model of bench.sh / floor.sh (hidden 2048, 24 layers; made by
# shared/bench/make_llama.py with real torch.save, converted to safetensors by
# tpconv, untimed), `tpconv convert BASE --lora ADAPTER -o OUT`, timed as
# floor.sh times its steps: right after an in-kernel copy (copy_file_range,
# bench/kcopy.py) of the base's bytes in the same run, with a `sync` after
# each, REPS times (fastest wall kept, largest peak RSS kept). Issue 43's goals:
# at most 1.5x the copy, peak RSS at most 256 MB.
# The adapter: every q/k/v/o/gate/up/down projection, r = RANK (64),
# lora_alpha 2r, float32 A [r, in] and B [out, r] as PEFT saves them
# (adapter_config.json + adapter_model.safetensors), random (numpy, seeded).
# Prints a markdown table; writes nothing into BENCHMARKS.md (run it on a
# quiet machine and paste the table).
# usage: lora_bench.sh path/to/tpconv
#   env: BENCH_DIR, REPS=2, RANK=64, HIDDEN=2048 LAYERS=24 (the model; small
#   ones make a quick proof run: HIDDEN=256 LAYERS=2)
set -eu
TPCONV=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HERE/../../shared/bench}
DIR=${BENCH_DIR:-$HERE/../build/bench}
REPS=${REPS:-2} RANK=${RANK:-64} HIDDEN=${HIDDEN:-2048} LAYERS=${LAYERS:-24}
PY=/usr/bin/python3
mkdir -p "$DIR"
DIR=$(realpath "$DIR")
SRC="$DIR/llama_${HIDDEN}_${LAYERS}.bin" ST="$DIR/llama_${HIDDEN}_${LAYERS}.safetensors"
AD="$DIR/lora_r${RANK}_${HIDDEN}_${LAYERS}" OUT="$DIR/lora-merged.safetensors"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

if [ ! -f "$ST" ]; then
  if [ ! -f "$SRC" ]; then
    echo "# generating $SRC with real torch.save ($PEERS/make_llama.py $HIDDEN $LAYERS)"
    $PY "$PEERS/make_llama.py" "$SRC.tmp" "$HIDDEN" "$LAYERS" && mv "$SRC.tmp" "$SRC"
  fi
  "$TPCONV" convert "$SRC" -o "$ST" -q
fi
if [ ! -f "$AD/adapter_model.safetensors" ]; then
  mkdir -p "$AD"
  $PY - "$ST" "$AD" "$RANK" <<'PY'
import json, os, struct, sys
import numpy as np
st, ad, r = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(st, "rb") as f:
    hdr = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
targets = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
rng = np.random.default_rng(64)
out, order, off = {}, [], 0
for name, v in hdr.items():
    if name == "__metadata__" or name.split(".")[-2] not in targets:
        continue
    o, i = v["shape"]
    p = "base_model.model." + name[: -len(".weight")]
    for part, shape in ((".lora_A.weight", (r, i)), (".lora_B.weight", (o, r))):
        n = shape[0] * shape[1] * 4
        out[p + part] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + n]}
        order.append(shape)
        off += n
h = json.dumps({"__metadata__": {"format": "pt"}, **out}, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(ad, "adapter_model.safetensors.tmp"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for shape in order:
        f.write((rng.standard_normal(shape, dtype=np.float32) * np.float32(0.01)).tobytes())
os.rename(os.path.join(ad, "adapter_model.safetensors.tmp"), os.path.join(ad, "adapter_model.safetensors"))
cfg = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": r, "lora_alpha": 2 * r, "lora_dropout": 0.0,
       "target_modules": list(targets), "fan_in_fan_out": False, "bias": "none", "use_rslora": False,
       "use_dora": False, "modules_to_save": None, "rank_pattern": {}, "alpha_pattern": {}}
with open(os.path.join(ad, "adapter_config.json"), "w") as f:
    json.dump(cfg, f, indent=2)
print("# adapter:", len(out) // 2, "modules, r", r, round(off / 1e6, 1), "MB")
PY
fi
SIZE=$(awk "BEGIN{printf \"%.2f GB\", $(stat -L -c %s "$ST") / 1e9}")

# timed LABEL OUTPUT CMD...: SECS (fastest of REPS), RSS (KiB, largest); the
# base read into the page cache before each (untimed), as floor.sh's WARM
timed() {
  local label=$1 out=$2 r s m; shift 2
  SECS="" RSS=0
  for r in $(seq "$REPS"); do
    rm -rf "$out"
    cat "$ST" "$AD/adapter_model.safetensors" >/dev/null
    sync
    /usr/bin/time -f "%e %M" -o "$DIR/time.txt" sh -c '"$@" && sync' sh "$@" >"$DIR/cmd.log" 2>&1 ||
      { echo "FAILED: $label"; cat "$DIR/cmd.log"; exit 1; }
    read -r s m <"$DIR/time.txt"
    if [ -z "$SECS" ] || awk "BEGIN{exit !($s < $SECS)}"; then SECS=$s; fi
    if [ "$m" -gt "$RSS" ]; then RSS=$m; fi
  done
}
echo "# lora bench: $(nproc) cores, load $LOAD0, OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}"
timed "in-kernel copy" "$DIR/kcopy.out" $PY "$HERE/kcopy.py" "$ST" "$DIR/kcopy.out"
KC=$SECS KRSS=$RSS
rm -f "$DIR/kcopy.out"
timed "convert --lora" "$OUT" "$TPCONV" convert "$ST" --lora "$AD" -o "$OUT" -q
LS=$SECS LRSS=$RSS
rm -f "$OUT"
# the adapter itself to llama.cpp's adapter GGUF (f32, as convert_lora_to_gguf.py
# writes by default), beside a copy of the adapter's own bytes
timed "adapter copy" "$DIR/kcopy.out" $PY "$HERE/kcopy.py" "$AD/adapter_model.safetensors" "$DIR/kcopy.out"
AKC=$SECS AKRSS=$RSS
rm -f "$DIR/kcopy.out"
# --base takes the base's folder (its config.json: make_llama.py's shapes, heads
# of 128, a quarter of them key/value heads, intermediate 8/3 hidden rounded down to 64)
B="$DIR/lora-base"
mkdir -p "$B"
ln -f "$ST" "$B/model.safetensors" 2>/dev/null || cp "$ST" "$B/model.safetensors"
NH=$((HIDDEN / 128 > 0 ? HIDDEN / 128 : 1)); KVH=$((NH / 4 > 0 ? NH / 4 : 1)); INTER=$((HIDDEN * 8 / 3 / 64 * 64))
cat >"$B/config.json" <<EOF
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": $HIDDEN, "intermediate_size": $INTER,
 "num_hidden_layers": $LAYERS, "num_attention_heads": $NH, "num_key_value_heads": $KVH, "head_dim": 128,
 "vocab_size": 32000, "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
 "hidden_act": "silu", "tie_word_embeddings": false, "torch_dtype": "float32"}
EOF
timed "convert ADAPTER --base" "$DIR/adapter.gguf" "$TPCONV" convert "$AD" --base "$B" -o "$DIR/adapter.gguf" -q
AG=$SECS AGRSS=$RSS
rm -f "$DIR/adapter.gguf"
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
echo
echo "| step ($SIZE f32 base, rank-$RANK adapter) | wall s | x copy (goal <= 1.5) | peak RSS MiB (goal <= 256) |"
echo "|---|---:|---:|---:|"
awk -v kc="$KC" -v krss="$KRSS" -v ls="$LS" -v lrss="$LRSS" -v akc="$AKC" -v akrss="$AKRSS" -v ag="$AG" -v agrss="$AGRSS" 'BEGIN {
  printf "| in-kernel copy of the base | %.2f | 1.00 | %.0f |\n", kc, krss / 1024
  printf "| tpconv convert BASE --lora ADAPTER -o merged.safetensors | %.2f | %.2f | %.0f |\n", ls, ls / kc, lrss / 1024
  printf "| in-kernel copy of the adapter | %.2f | 1.00 | %.0f |\n", akc, akrss / 1024
  printf "| tpconv convert ADAPTER --base BASE -o adapter.gguf (x the adapter copy) | %.2f | %.2f | %.0f |\n", ag, (akc > 0 ? ag / akc : 0), agrss / 1024
}'
echo
echo "load before $LOAD0, after $LOAD1"
