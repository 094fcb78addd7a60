#!/bin/sh
# llama.cpp runs tpconv's low-bit GGUF (opt-in, not in `make test`; needs root
# and the interop chroot, tests/interop/chroot.sh): a tiny Llama whose rows are
# whole 256-blocks (hidden 256, intermediate 512; transformers' from_config in
# the chroot, seed 45, tests/gguf/arch/tiny-llama's SentencePiece tokenizer),
# converted by tpconv in one pass at every --outtype that is a llama-quantize
# file type (the 17 of tpc_gguf_outtypes: q4_0 ... q6_k, iq4_nl, iq4_xs,
# tq1_0, tq2_0 and the K mixtures), and q8_0 from tpconv's f32 GGUF (from a
# GGUF input, llama-quantize's Q8_0 file type). For each: the file is llama-quantize's of
# the f32 GGUF, byte for byte, and llama-completion (temperature 0, 8 tokens,
# one thread) loads tpconv's file and the reference's and prints the same
# text. The chroot is entered once for the model and once for every
# llama-quantize and llama-completion run (tests/interop/lowbit_run.sh).
# A line per type, PASS or FAIL; exit 1 on any FAIL.
# usage: sudo tests/interop/lowbit_llama.sh BUILD/cmd/tpconv [SRCDIR]
#   LOWBIT_TYPES="q4_k_m tq2_0": only those
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "${2:-.}")
R=${TPCONV_INTEROP_ROOT:-/var/cache/tpconv-interop/forky}
TYPES=${LOWBIT_TYPES:-"q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m q6_k iq4_nl iq4_xs tq1_0 tq2_0"}
[ -f "$R/.tpconv-interop-complete" ] || { echo "lowbit_llama: no interop chroot at $R (make interop builds it)" >&2; exit 2; }
. "$SRC/tests/interop/chroot.sh"
# only the mounts this script makes are undone (another run may hold the rest)
MINE=
for m in proc dev dev/shm; do mountpoint -q "$R/$m" || MINE="$m $MINE"; done
interop_mount "$R" || exit 2
D=/tmp/tpc-lowbit-$$
W=$R$D
mkdir -p "$W/tiny-llama256" && cp "$SRC/tests/gguf/arch/tiny-llama/tokenizer.model" \
  "$SRC/tests/gguf/arch/tiny-llama/tokenizer_config.json" "$W/tiny-llama256/"
trap 'rm -rf "$W"; for m in $MINE; do umount "$R/$m" 2>/dev/null || umount -l "$R/$m"; done' EXIT
trap 'exit 2' INT TERM HUP
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
: > "$W/jobs"
for t in $TYPES; do
  in=$W/tiny-llama256
  [ $t = q8_0 ] && in=$W/f32.gguf
  if "$TPCONV" convert "$in" -o "$W/$t.gguf" --outtype $t -q 2>"$W/$t.terr"; then
    echo "$t f32.gguf $t" >> "$W/jobs"
  else
    rm -f "$W/$t.gguf"
  fi
done
cp "$SRC/tests/interop/lowbit_run.sh" "$W/"
inch sh lowbit_run.sh complete < /dev/null > "$W/run.log" 2>&1 || { echo "lowbit_llama: the chroot run failed: $(tail -c 300 "$W/run.log")" >&2; exit 2; }
bad=0
for t in $TYPES; do
  T=$(echo $t | tr a-z A-Z)
  if [ ! -f "$W/$t.gguf" ]; then
    echo "FAIL $t: tpconv: $(cat "$W/$t.terr")"; bad=1; continue
  fi
  [ -f "$W/ref-$t.gguf" ] || { echo "FAIL $t: llama-quantize $T: $(tail -c 200 "$W/ref-$t.qerr")"; bad=1; continue; }
  same=differ; cmp -s "$W/$t.gguf" "$W/ref-$t.gguf" && same=byte-identical
  types=$("$TPCONV" inspect "$W/$t.gguf" | sed -n 's/^# tensor types: //p')
  why=
  for f in $t ref-$t; do
    [ "$(cat "$W/$f.rc")" = 0 ] || why="$why; llama-completion on $f.gguf: exit $(cat "$W/$f.rc"): $(tail -c 200 "$W/$f.lerr")"
  done
  [ -z "$why" ] && ! cmp -s "$W/$t.out" "$W/ref-$t.out" && why="; the texts differ: tpconv's '$(tr -c '[:print:]' ' ' < "$W/$t.out")', the reference's '$(tr -c '[:print:]' ' ' < "$W/ref-$t.out")'"
  [ $same = byte-identical ] || why="files differ$why"
  if [ -z "$why" ]; then
    echo "PASS $t: llama-quantize's $T of the f32 file ($same; $types); llama-completion, same text on both: $(tr -c '[:print:]' ' ' < "$W/$t.out" | tail -c 60)"
  else
    echo "FAIL $t: $why ($types)"; bad=1
  fi
done
exit $bad
