#!/usr/bin/env bash
# megatron-dist sets read by real torch 2.14 (the forky chroot, tests/interop/chroot.sh).
# Opt-in, not part of make test: `make interop-megatron` (root; the chroot is built if
# missing, reused when complete).
#
# For each family record that lists the layout, tpconv shard --layout megatron-dist
# writes a set from a tiny model, and tests/shard/megatron_dist_torch.py (in the chroot)
# loads it with torch.distributed.checkpoint's own reader: every key, its global shape,
# each chunk's offsets and sizes, the bytes and common.pt's args against Megatron-Core's
# sharded_state_dict rebuilt from the Hugging Face tensors (doc/layouts.md's table).
#   - tests/gguf/arch's tiny qwen2 (q/k/v biases: linear_qkv.bias per query group, tied),
#     qwen3 (per-head q_layernorm / k_layernorm, head_dim 16), mistral: tp 2 x pp 2, tp 2,
#     tp 1 x pp 2 (0,2), tp 2 x pp 2 (2,0);
#   - tests/shard/vllm_check.py's LLaMA (tp 2 x pp 2, 0,2) and 4-kv-head Qwen2 (tp 4 x pp 2);
#   - mixtral tp 2 ep 2, qwen3-moe tp 2 x pp 2 ep 2, deepseek-v3 tp 2 x pp 2 ep 2 (2,1);
#   - the args at resume (tests/interop/mcore_args_hf.py): a Mistral, a Qwen2 with and without a
#     sliding window, a Llama-3.1 rope, against Megatron's load_args_from_checkpoint /
#     check_checkpoint_args and transformers' masks and rope.
# usage: megatron_dist.sh TPCONV SRCDIR   (TAP on stdout; TPCONV_INTEROP_KEEP=1 keeps the work folder)
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/lib/tap.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (chroot, bind mounts)"
. "$SRC/tests/interop/chroot.sh"
interop_setup >&2 || { echo "interop: cannot build the chroot in $IROOT" >&2; exit 4; }
W=$(mktemp -d "$IROOT/tmp/mcore.XXXXXX") || exit 4
CW=/tmp/${W##*/}
# the bind mounts another run holds stay: only what this run mounted is unmounted
mounted=$(awk -v r="$(readlink -f "$IROOT")/" 'index($2, r) == 1' /proc/self/mounts | wc -l)
cleanup() {
	interop_stop
	[ "$mounted" != 0 ] || interop_umount "$IROOT"
	[ "${TPCONV_INTEROP_KEEP:-}" = 1 ] && echo "# work folder kept: $W" || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
interop_mount "$IROOT" || exit 4
cp "$SRC/tests/shard/megatron_dist_torch.py" "$W/"
A=$SRC/tests/gguf/arch M=$W/m
/usr/bin/python3 "$SRC/tests/shard/vllm_check.py" make "$M" >"$W/log" 2>&1 || { bad "vllm_check.py make" "$(tail -3 "$W/log")"; done_testing; exit; }
# HF_DIR (config.json + model.safetensors) for each source
hf() { mkdir -p "$W/hf_$2" && cp "$1/config.json" "$W/hf_$2/" && "$TPCONV" convert "$1" -o "$W/hf_$2/model.safetensors" -q 2>>"$W/log"; }
for m in qwen2 qwen3 mistral mixtral qwen3-moe deepseek; do hf "$A/tiny-$m" "$m" || bad "fixture $m" "$(tail -3 "$W/log")"; done
hf "$M/llama" llama && hf "$M/qwen" qwen4 || bad "fixtures llama, qwen4" "$(tail -3 "$W/log")"
# source preset tp pp stages [ep]
for spec in "qwen2 qwen2 2 2 1,1" "qwen2 qwen2 2 1 2" "qwen3 qwen3 2 2 1,1" "qwen3 qwen3 1 2 0,2" "mistral mistral 2 2 1,1" \
	"mistral mistral 2 2 2,0" "llama llama 2 2 0,2" "qwen4 qwen2 4 2 1,1" "mixtral mixtral 2 1 2 2" \
	"qwen3-moe qwen3-moe 2 2 1,1 2" "deepseek deepseek-v3 2 2 2,1 2"; do
	set -- $spec
	s=s_$1_$3_$4_${5/,/-} src=$A/tiny-$1
	case $1 in llama) src=$M/llama ;; qwen4) src=$M/qwen ;; esac
	pl=() && [ "$4" -gt 1 ] && pl=(--pp-layers "$5")
	if ! "$TPCONV" shard "$src" --preset "$2" --tp "$3" --pp "$4" "${pl[@]}" ${6:+--ep $6} --layout megatron-dist \
		--no-extras -o "$W/$s" -q 2>>"$W/log"; then
		bad "$1 tp $3 pp $4 ($5): shard" "$(tail -3 "$W/log")"
		continue
	fi
	interop_run chroot "$IROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TMPDIR="$CW" LANG=C.UTF-8 \
		OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 PYTHONWARNINGS=ignore \
		sh -c "cd '$CW' && python3 megatron_dist_torch.py hf_$1 $s $3 $5 ${6:-}" >"$W/out" 2>&1
	grep -q "^ok: torch" "$W/out" && ok "$1 (--preset $2) tp $3 pp $4 ($5)${6:+ ep $6}: $(tail -n 1 "$W/out" | sed 's/^ok: //; s/: shapes.*//')" ||
		bad "$1 tp $3 pp $4 ($5) read by torch" "$(tail -4 "$W/out")"
done
# The args Megatron adopts at resume against transformers 5.12 (tests/interop/mcore_args_hf.py over
# tests/shard/mcore_args_check.py): a Mistral (window on every layer), a Qwen2 without a window and
# one sliding from max_window_layers 1 on, a Llama-3.1 (llama3 rope), each with a tokenizer folder
cp "$SRC/tests/shard/mcore_args_check.py" "$SRC/tests/interop/mcore_args_hf.py" "$W/"
mkdir -p "$W/a_mistral" "$W/a_qwen2" "$W/a_qwen2sw" "$W/a_llama31" &&
	cp "$W/hf_mistral/"* "$A/tiny-mistral/tokenizer_config.json" "$W/a_mistral/" &&
	cp "$W/hf_qwen2/"* "$A/tiny-qwen2/tokenizer.json" "$W/a_qwen2/" &&
	cp "$W/hf_qwen2/model.safetensors" "$A/tiny-qwen2/tokenizer.json" "$W/a_qwen2sw/" &&
	cp "$W/hf_llama/model.safetensors" "$A/tiny-mistral/tokenizer_config.json" "$W/a_llama31/" &&
	/usr/bin/python3 - "$W" <<'PY' || bad "args fixtures"
import json, sys
w = sys.argv[1]
q, l = json.load(open(w + "/hf_qwen2/config.json")), json.load(open(w + "/hf_llama/config.json"))
del q["layer_types"]
q.update(use_sliding_window=True, sliding_window=64, max_window_layers=1)
json.dump(q, open(w + "/a_qwen2sw/config.json", "w"))
l.update(rope_theta=500000.0, rms_norm_eps=1e-5, max_position_embeddings=131072,
         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192})
json.dump(l, open(w + "/a_llama31/config.json", "w"))
PY
specs=""
for spec in "mistral mistral" "qwen2 qwen2" "qwen2sw qwen2" "llama31 llama"; do
	set -- $spec
	"$TPCONV" shard "$W/a_$1" --preset "$2" --tp 2 --pp 2 --layout megatron-dist -o "$W/sa_$1" -q 2>>"$W/log" ||
		bad "a_$1: shard" "$(tail -3 "$W/log")"
	specs="$specs a_$1:sa_$1:$(realpath "$W/a_$1")"
done
interop_run chroot "$IROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TMPDIR="$CW" LANG=C.UTF-8 \
	OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 PYTHONWARNINGS=ignore HF_HUB_OFFLINE=1 \
	sh -c "cd '$CW' && python3 mcore_args_hf.py $specs" >"$W/out" 2>&1
[ "$(grep -c '^ok: ' "$W/out")" = 4 ] && grep -q "sa_mistral: .*--window-size (4095, 0)$" "$W/out" &&
	grep -q "sa_qwen2sw: .*--window-attn-skip-freq \[0, 1\]$" "$W/out" && grep -q "sa_llama31: .*(llama3).*--use-rope-scaling" "$W/out" &&
	ok "resume args (mistral, qwen2 with and without a window, llama3 rope): Megatron adopts the model's, the rest on the command line gives transformers' masks and rope ($(grep '^ok: ' "$W/out" | sed 's/^ok: //' | tr '\n' ';'))" ||
	bad "resume args against transformers" "$(tail -6 "$W/out")"
done_testing
