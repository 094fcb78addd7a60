#!/bin/sh
# llama.cpp runs tpconv's low-bit GGUF (opt-in, not in `make test`; needs root
# and the interop chroot, tests/interop/chroot.sh): a tiny Llama whose rows are
# whole 256-blocks (hidden 256, intermediate 512; transformers' from_config in
# the chroot, seed 45, tests/gguf/arch/tiny-llama's SentencePiece tokenizer),
# converted by tpconv at --outtype q4_k_m, iq4_xs and tq2_0 in one pass. For each:
# the file is llama-quantize's of tpconv's f32 GGUF, byte for byte, and
# llama-completion (temperature 0, 8 tokens, one thread) loads it and generates.
# A line per type, PASS or FAIL; exit 1 on any FAIL.
# usage: sudo tests/interop/lowbit_llama.sh BUILD/cmd/tpconv [SRCDIR]
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "${2:-.}")
R=${TPCONV_INTEROP_ROOT:-/var/cache/tpconv-interop/forky}
[ -f "$R/.tpconv-interop-complete" ] || { echo "lowbit_llama: no interop chroot at $R (make interop builds it)" >&2; exit 2; }
. "$SRC/tests/interop/chroot.sh"
interop_mount "$R" || exit 2
D=/tmp/tpc-lowbit-$$
W=$R$D
mkdir -p "$W/tiny-llama256" && cp "$SRC/tests/gguf/arch/tiny-llama/tokenizer.model" \
  "$SRC/tests/gguf/arch/tiny-llama/tokenizer_config.json" "$W/tiny-llama256/"
trap 'rm -rf "$W"' EXIT
inch() { chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LANG=C.UTF-8 OMP_NUM_THREADS=1 \
  HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error PYTHONWARNINGS=ignore sh -c 'cd "$0" && exec "$@"' "$D" "$@"; }
V=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$SRC/tests/gguf/arch/tiny-llama/config.json")
inch python3 -c "
import torch, transformers as tf
torch.manual_seed(45)
c = tf.LlamaConfig(vocab_size=$V, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False)
tf.AutoModelForCausalLM.from_config(c).to(torch.float32).save_pretrained('tiny-llama256')
" >/dev/null 2>&1 || { echo "lowbit_llama: transformers could not make the model" >&2; exit 2; }
"$TPCONV" convert "$W/tiny-llama256" -o "$W/f32.gguf" --outtype f32 -q || exit 2
bad=0
for t in q4_k_m iq4_xs tq2_0; do
  T=$(echo $t | tr a-z A-Z)
  if ! "$TPCONV" convert "$W/tiny-llama256" -o "$W/$t.gguf" --outtype $t -q 2>"$W/err"; then
    echo "FAIL $t: tpconv: $(cat "$W/err")"; bad=1; continue
  fi
  inch llama-quantize f32.gguf ref-$t.gguf $T >/dev/null 2>&1 || { echo "FAIL $t: llama-quantize $T"; bad=1; continue; }
  same=differ; cmp -s "$W/$t.gguf" "$W/ref-$t.gguf" && same=byte-identical
  types=$("$TPCONV" inspect "$W/$t.gguf" | sed -n 's/^# tensor types: //p')
  # llama-completion 0.7 sometimes ends early with status 0 and no summary
  # (tests/interop/llamacpp.py's complete): a run counts once it prints its
  # summary, up to 5 tries
  for try in 1 2 3 4 5; do
    out=$(inch llama-completion -m $t.gguf -p "the quick brown fox" -n 8 --temp 0 --seed 1 -no-cnv -t 1 -tb 1 -c 128 \
      --no-warmup 2>"$W/lerr" </dev/null); rc=$?
    [ $rc != 0 ] || grep -q common_perf_print "$W/lerr" && break
  done
  if [ $rc = 0 ] && grep -q common_perf_print "$W/lerr" && [ $same = byte-identical ]; then
    echo "PASS $t: llama-quantize's $T of the f32 file ($same; $types); llama-completion: $(printf %s "$out" | tr -c '[:print:]' ' ' | tail -c 60)"
  else
    echo "FAIL $t: files $same ($types); llama-completion (exit $rc, $try tries): $(tail -c 300 "$W/lerr")"; bad=1
  fi
done
exit $bad
