#!/usr/bin/env bash
# make bench, GGUF part (issue 33): the 4.74 GB LLaMA-shaped float32 model of
# floor.sh (hidden 2048, 24 layers, vocab 32000) as a Hugging Face folder -
# its safetensors, a config.json written here, the SentencePiece
# tokenizer.model of tests/gguf/arch/tiny-llama (320 pieces; the reference and
# tpconv both pad the vocabulary to config.json's 32000 with [PAD] tokens) -
# converted to GGUF:
#   tpconv convert -> f32, timed beside the in-kernel copy (bench/kcopy.py) of
#          the same number of bytes measured just before it (target 1.2x)
#   tpconv convert -> f16, bf16, q8_0 (measured, no target)
#   tpconv convert -> q4_k_m (one pass: llama-quantize's file, issue 45)
#   convert_hf_to_gguf.py (llama.cpp 0.7, in the forky chroot) -> f32 and q8_0,
#          its time and peak RSS; and whether its file equals tpconv's (cmp);
#          llama-quantize Q4_K_M of its f32 file (the two-step way to q4_k_m:
#          both steps' times added) and whether that equals tpconv's q4_k_m
# Each step followed by a sync, REPS times (default 1; 4.7 GB each), fastest
# kept, largest peak RSS kept (GNU time; the chroot's python is a descendant
# of the timed process, so its RSS is the one reported). Rows to stdout and to
# $DIR/gguf_bench.tsv; the machine is shared: user/sys and RSS are the robust
# numbers, wall times move with the host.
# usage: gguf_bench.sh path/to/tpconv
#   env: BENCH_DIR, REPS, REF=0 (skip the reference), ICHROOT (the chroot,
#        default /var/cache/tpconv-interop/forky; when it is absent or
#        incomplete, or without root, the reference rows are skipped with a
#        WARNING on stderr and a line in the rows), OUTTYPES (default "f32 f16
#        bf16 q8_0 q4_k_m"), REFTYPES (default "f32 q8_0 q4_k_m"), QTYPES
#        (llama-quantize types timed alone from one reference f32, each also in
#        OUTTYPES: its file compared with tpconv's; default none), HIDDEN and
#        LAYERS (default 2048 and 24, the 4.74 GB model; HIDDEN=512 LAYERS=2,
#        150 MB, shows the script works without measuring anything)
set -eu
TPCONV=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
SRCDIR=$(cd "$HERE/.." && pwd)
PEERS=${PEERS:-$SRCDIR/../shared/bench}
DIR=${BENCH_DIR:-$SRCDIR/build/bench}
REPS=${REPS:-1} REF=${REF:-1}
OUTTYPES=${OUTTYPES:-f32 f16 bf16 q8_0 q4_k_m} REFTYPES=${REFTYPES:-f32 q8_0 q4_k_m}
ICHROOT=${ICHROOT:-/var/cache/tpconv-interop/forky}
HIDDEN=${HIDDEN:-2048} LAYERS=${LAYERS:-24}
PY=/usr/bin/python3
mkdir -p "$DIR"
DIR=$(realpath "$DIR")
SRC="$DIR/llama_${HIDDEN}_$LAYERS.bin" ST="$DIR/llama_${HIDDEN}_$LAYERS.safetensors" M="$DIR/gguf-llama"
ROWS="$DIR/gguf_bench.tsv"
: >"$ROWS"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

if [ ! -f "$ST" ]; then
  [ -f "$SRC" ] || { $PY "$PEERS/make_llama.py" "$SRC.tmp" "$HIDDEN" "$LAYERS" && mv "$SRC.tmp" "$SRC"; }
  "$TPCONV" convert "$SRC" -o "$ST" -q
fi
mkdir -p "$M"
ln -f "$ST" "$M/model.safetensors" 2>/dev/null || cp "$ST" "$M/model.safetensors"
cp "$SRCDIR/tests/gguf/arch/tiny-llama/tokenizer.model" "$SRCDIR/tests/gguf/arch/tiny-llama/tokenizer_config.json" "$M/"
# make_llama.py's shapes: heads of 128, a quarter of them key/value heads,
# intermediate 8/3 hidden rounded down to 64
NH=$((HIDDEN / 128 > 0 ? HIDDEN / 128 : 1)); KVH=$((NH / 4 > 0 ? NH / 4 : 1)); INTER=$((HIDDEN * 8 / 3 / 64 * 64))
cat >"$M/config.json" <<EOF
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": $HIDDEN, "intermediate_size": $INTER,
 "num_hidden_layers": $LAYERS, "num_attention_heads": $NH, "num_key_value_heads": $KVH, "head_dim": 128,
 "vocab_size": 32000, "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
 "hidden_act": "silu", "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32"}
EOF

# run LABEL OUT CMD...: one timed step (REPS times): SECS (fastest), RSS (KiB, largest), USR, SYS
run() {
  local label=$1 out=$2 r s m u y; shift 2
  SECS="" RSS=0
  for r in $(seq "$REPS"); do
    rm -f "$out"
    sync
    /usr/bin/time -f "%e %M %U %S" -o "$DIR/gtime.txt" sh -c '"$@" && sync' sh "$@" >"$DIR/gcmd.log" 2>&1 ||
      { echo "FAILED: $label"; tail -5 "$DIR/gcmd.log"; return 1; }
    read -r s m u y <"$DIR/gtime.txt"
    if [ -z "$SECS" ] || awk "BEGIN{exit !($s < $SECS)}"; then SECS=$s USR=$u SYS=$y; fi
    [ "$m" -le "$RSS" ] || RSS=$m
  done
}
row() { # LABEL FLOOR-SECS TARGET
  local ratio="" mib=$((RSS / 1024))
  [ -z "$2" ] || ratio=$(awk "BEGIN{printf \"%.2fx\", $SECS / $2}")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$SECS" "${2:-}" "$ratio" "${3:-}" "$mib" "$USR" "$SYS" | tee -a "$ROWS"
}

printf 'step\twall s\tin-kernel copy s\tratio\ttarget\tpeak RSS MiB\tuser s\tsys s\n'
for ot in $OUTTYPES; do
  KC=""
  if [ $ot = f32 ]; then
    cat "$ST" >/dev/null
    run "in-kernel copy" "$DIR/gk.out" $PY "$HERE/kcopy.py" "$ST" "$DIR/gk.out"
    KC=$SECS
    rm -f "$DIR/gk.out"
  fi
  cat "$ST" >/dev/null
  run "tpconv -> GGUF $ot" "$DIR/g-$ot.gguf" "$TPCONV" convert "$M" -o "$DIR/g-$ot.gguf" --outtype $ot -q
  row "tpconv convert -> GGUF $ot" "$KC" "$([ $ot = f32 ] && echo 1.2x)"
  case " f32 q8_0 q4_k_m ${QTYPES:-} " in *" $ot "*) ;; *) rm -f "$DIR/g-$ot.gguf" ;; esac
done

# the reference runs in make interop's chroot (tests/interop/chroot.sh, its
# mounts), in the folder given as a host path under it; without the chroot
# (or a complete one: its stamp) or without root its rows are skipped, and
# said so on stderr and in the rows. The mounts the bench made are undone
# when it ends (those make interop holds are left alone).
TPCONV_INTEROP_ROOT=$ICHROOT . "$SRCDIR/tests/interop/chroot.sh"
if [ "$REF" = 1 ] && [ "$(id -u)" = 0 ] && [ -d "$ICHROOT/proc" ] && ! mountpoint -q "$ICHROOT/proc"; then
  trap 'interop_umount "$ICHROOT"' EXIT
fi
IN="$DIR/inchroot.sh"
printf '%s\n' '#!/bin/sh' \
  '# inchroot.sh HOSTDIR CMD: CMD (one shell string) inside the chroot, in HOSTDIR' \
  ". '$SRCDIR/tests/interop/chroot.sh'" \
  "interop_mount '$ICHROOT' || exit 4" \
  "d=\${1#'$ICHROOT'}; shift" \
  "exec chroot '$ICHROOT' /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8 HF_HUB_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1 PYTHONWARNINGS=ignore sh -c \"cd '\$d' && \$*\"" >"$IN"
chmod +x "$IN"
why=
if [ "$REF" != 1 ]; then :
elif [ "$(id -u)" != 0 ]; then why="not root (the chroot and its mounts need root)"
elif [ ! -d "$ICHROOT/usr/share/llama.cpp" ]; then why="no forky chroot with llama.cpp at $ICHROOT"
elif ! interop_ready; then why="the chroot at $ICHROOT is incomplete (no $ISTAMP for the current package list)"
fi
if [ -n "$why" ]; then
  echo "gguf_bench: WARNING: the reference rows (convert_hf_to_gguf.py, llama-quantize) are SKIPPED: $why;" \
    "'make interop' (as root) builds the chroot: tests/interop/chroot.sh setup" >&2
  echo "reference rows skipped: $why" >>"$ROWS"
elif [ "$REF" = 1 ]; then
  R="$ICHROOT/tmp/gguf-bench"
  mkdir -p "$R/gguf-llama" # the folder's name is general.name's: the same as tpconv's
  for f in "$M"/*; do ln -f "$f" "$R/gguf-llama/" 2>/dev/null || cp "$f" "$R/gguf-llama/"; done
  cp "$SRCDIR/tests/gguf/ref_convert.py" "$R/"
  for ot in $REFTYPES; do
    if [ $ot = q4_k_m ]; then
      # the two steps: convert_hf_to_gguf.py -> f32, then llama-quantize
      cat "$ST" >/dev/null
      run "convert_hf_to_gguf.py -> f32" "$R/ref-f32q.gguf" "$IN" "$R" \
        "python3 ref_convert.py gguf-llama --outtype f32 --outfile ref-f32q.gguf"
      S1=$SECS R1=$RSS U1=$USR Y1=$SYS
      run "llama-quantize Q4_K_M" "$R/ref-q4_k_m.gguf" "$IN" "$R" \
        "llama-quantize ref-f32q.gguf ref-q4_k_m.gguf Q4_K_M"
      row "llama-quantize Q4_K_M of that f32" "" ""
      SECS=$(awk "BEGIN{print $S1 + $SECS}") USR=$(awk "BEGIN{print $U1 + $USR}") SYS=$(awk "BEGIN{print $Y1 + $SYS}")
      [ "$R1" -le "$RSS" ] || RSS=$R1
      row "convert_hf_to_gguf.py f32 + llama-quantize Q4_K_M" "" ""
      rm -f "$R/ref-f32q.gguf"
    else
      cat "$ST" >/dev/null
      run "convert_hf_to_gguf.py -> $ot" "$R/ref-$ot.gguf" "$IN" "$R" \
        "python3 ref_convert.py gguf-llama --outtype $ot --outfile ref-$ot.gguf"
      row "convert_hf_to_gguf.py -> GGUF $ot" "" ""
    fi
    if cmp -s "$R/ref-$ot.gguf" "$DIR/g-$ot.gguf"; then same=identical; else same=DIFFERENT; fi
    printf 'files %s: tpconv and the reference %s\n' "$ot" "$same" | tee -a "$ROWS"
    rm -f "$R/ref-$ot.gguf"
  done
  # llama-quantize alone, type by type, from one reference f32 (QTYPES: the
  # llama-quantize types to time beside tpconv's one pass, which OUTTYPES
  # must hold too; issue 45's "faster than llama-quantize alone for every type")
  if [ -n "${QTYPES:-}" ]; then
    cat "$ST" >/dev/null
    run "convert_hf_to_gguf.py -> f32 (for llama-quantize)" "$R/ref-f32q.gguf" "$IN" "$R" \
      "python3 ref_convert.py gguf-llama --outtype f32 --outfile ref-f32q.gguf"
    for qt in $QTYPES; do
      cat "$R/ref-f32q.gguf" >/dev/null
      run "llama-quantize $qt" "$R/ref-$qt.gguf" "$IN" "$R" "llama-quantize ref-f32q.gguf ref-$qt.gguf $qt"
      row "llama-quantize $qt of the reference's f32 (alone)" "" ""
      if cmp -s "$R/ref-$qt.gguf" "$DIR/g-$qt.gguf"; then same=identical; else same=DIFFERENT; fi
      printf 'files %s: tpconv and llama-quantize %s\n' "$qt" "$same" | tee -a "$ROWS"
      rm -f "$R/ref-$qt.gguf"
    done
    rm -f "$R/ref-f32q.gguf"
  fi
  rm -rf "$R"
fi
rm -f "$DIR"/g-*.gguf
echo "load average $LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end; $(nproc) cores;" \
  "tpconv $("$TPCONV" --version 2>/dev/null | head -1) at $(git -C "$SRCDIR" describe --always --dirty 2>/dev/null)" |
  tee -a "$ROWS"
