#!/bin/sh
# tpconv's --outtype T against llama-quantize for every GGUF family (opt-in,
# not in `make test`; needs root and the interop chroot, tests/interop/chroot.sh):
# for each tiny model tests/gguf uses (tests/gguf/arch/tiny-*), tpconv's
# one-pass `convert --outtype T` and llama.cpp 0.7's `llama-quantize` of
# tpconv's f32 GGUF of it (the reference's f32 file: tests/gguf/arch_test.sh),
# compared byte for byte; every llama-quantize run in one chroot entry
# (tests/interop/lowbit_run.sh). Prints a markdown table, family x type:
# `=` byte-identical, `differs` (tests/interop/lowbit_cmp.py says how),
# `refused` by tpconv (exit status and message) or by llama-quantize (its
# error), `both refuse`. Exit 1 when a cell differs or only one side refuses,
# q8_0 aside: tpconv's --outtype q8_0 is convert_hf_to_gguf.py's (tests/gguf
# arch refs), whose tensor and KV order and 1-wide dimensions llama-quantize
# does not keep (its cells say `converter's`, the note how the files differ).
# usage: sudo tests/interop/lowbit_matrix.sh BUILD/cmd/tpconv [SRCDIR]
#   MATRIX_TYPES=all: the 17 mixtures and q8_0; default q8_0 q4_k_m q6_k iq4_xs tq2_0
#   MATRIX_FAMILIES="llama gemma": only those (tiny-NAME)
#   MATRIX_GGUF=1: tpconv converts the f32 GGUF too, not the Hugging Face
#   folder (GGUF -> GGUF: q8_0 is then llama-quantize's Q8_0 file type)
#   MATRIX_RUN=1: llama-completion (temperature 0, 8 tokens, one thread) also
#   runs tpconv's file of every cell (and the reference's where the two
#   differ): a cell gets `, runs` when it loads and generates (and prints the
#   reference's text where the files differ), else `, run fails` with a note
# KV_FIX: "FAMILY:KEY=N ..." u32 KVs set in a family's f32 GGUF (set_u32.sh),
# which is then both sides' input: tiny-granitemoehybrid-dense's config says
# num_experts_per_tok 2 with no experts, and llama.cpp 0.7 cannot load the
# f32 GGUF its own converter writes of it (llama-model.cpp:1415:
# GGML_ASSERT(n_expert_used_max <= hparams.n_expert)); with
# expert_used_count 0 it can. KV_FIX= compares the unaltered files.
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "${2:-.}")
R=${TPCONV_INTEROP_ROOT:-/var/cache/tpconv-interop/forky}
TYPES=${MATRIX_TYPES:-"q8_0 q4_k_m q6_k iq4_xs tq2_0"}
[ "$TYPES" = all ] && TYPES="q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m q6_k iq4_nl iq4_xs tq1_0 tq2_0"
KV_FIX=${KV_FIX-"granitemoehybrid-dense:granitehybrid.expert_used_count=0"}
FAMS=${MATRIX_FAMILIES:-$(cd "$SRC/tests/gguf/arch" && ls -d tiny-* | sed 's/^tiny-//')}
[ -f "$R/.tpconv-interop-complete" ] || { echo "lowbit_matrix: no interop chroot at $R (make interop builds it)" >&2; exit 2; }
. "$SRC/tests/interop/chroot.sh"
MINE=
for m in proc dev dev/shm; do mountpoint -q "$R/$m" || MINE="$m $MINE"; done
interop_mount "$R" || exit 2
D=/tmp/tpc-lowbitm-$$
W=$R$D
mkdir -p "$W"
trap 'rm -rf "$W"; for m in $MINE; do umount "$R/$m" 2>/dev/null || umount -l "$R/$m"; done' EXIT
trap 'exit 2' INT TERM HUP
: > "$W/jobs"
bad=0 notes= runwhy=
for f in $FAMS; do
  "$TPCONV" convert "$SRC/tests/gguf/arch/tiny-$f" -o "$W/$f-f32.gguf" --outtype f32 -q 2> "$W/$f.ferr" || continue
  in=$SRC/tests/gguf/arch/tiny-$f
  [ "${MATRIX_GGUF:-0}" = 1 ] && in=$W/$f-f32.gguf
  for fix in $KV_FIX; do
    [ "${fix%%:*}" = "$f" ] || continue
    kv=${fix#*:}
    sh "$SRC/tests/gguf/set_u32.sh" "$W/$f-f32.gguf" "${kv%%=*}" "${kv#*=}" || exit 2
    in=$W/$f-f32.gguf notes="$notes
- $f: both from tpconv's f32 GGUF with ${kv%%=*} set to ${kv#*=} (KV_FIX)"
  done
  for t in $TYPES; do
    "$TPCONV" convert "$in" -o "$W/$f-$t.gguf" --outtype $t -q 2> "$W/$f-$t.terr"
    echo $? > "$W/$f-$t.trc"
    echo "$f-$t $f-f32.gguf $t" >> "$W/jobs"
  done
done
cp "$SRC/tests/interop/lowbit_run.sh" "$SRC/tests/interop/lowbit_cmp.py" "$W/"
chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LANG=C.UTF-8 OMP_NUM_THREADS=1 \
  PYTHONWARNINGS=ignore sh -c 'cd "$0" && exec sh lowbit_run.sh "$1"' "$D" "$([ "${MATRIX_RUN:-0}" = 1 ] && echo run || echo compare)" \
  < /dev/null > "$W/run.log" 2>&1 ||
  { echo "lowbit_matrix: the chroot run failed: $(tail -c 300 "$W/run.log")" >&2; exit 2; }
printf '| family |'; for t in $TYPES; do printf ' %s |' "$t"; done; echo
printf '|---|'; for t in $TYPES; do printf -- '---|'; done; echo
for f in $FAMS; do
  printf '| %s |' "$f"
  if [ ! -f "$W/$f-f32.gguf" ]; then
    echo " tpconv f32: $(head -c 150 "$W/$f.ferr" | tr '\n|' '  ') |"; continue
  fi
  for t in $TYPES; do
    tr=$(cat "$W/$f-$t.trc") ref=$W/ref-$f-$t.gguf
    if [ "$tr" = 0 ] && [ -f "$ref" ]; then
      if cmp -s "$W/$f-$t.gguf" "$ref"; then c='='
      elif [ $t = q8_0 ] && [ "${MATRIX_GGUF:-0}" != 1 ]; then c="converter's"
        notes="$notes
- $f $t: $(cat "$W/$f-$t.cmp" 2>/dev/null)"
      else c='differs'; bad=1
        notes="$notes
- $f $t differs: $(cat "$W/$f-$t.cmp" 2>/dev/null)"; fi
    elif [ "$tr" != 0 ] && [ ! -f "$ref" ]; then c='both refuse'
      notes="$notes
- $f $t: tpconv exit $tr: $(head -c 200 "$W/$f-$t.terr" | tr '\n' ' '); llama-quantize: $(grep -m1 -i 'error\|failed\|exception' "$W/ref-$f-$t.qerr" | head -c 200)"
    elif [ "$tr" != 0 ]; then c='refused'; bad=1
      notes="$notes
- $f $t: tpconv refuses (exit $tr): $(head -c 200 "$W/$f-$t.terr" | tr '\n' ' ')"
    else c='ref refuses'; bad=1
      notes="$notes
- $f $t: llama-quantize fails: $(grep -m1 -i 'error\|failed\|exception' "$W/ref-$f-$t.qerr" | head -c 200)"
    fi
    if [ "${MATRIX_RUN:-0}" = 1 ] && [ "$tr" = 0 ]; then
      trc=$(cat "$W/$f-$t.rc" 2>/dev/null || echo missing)
      why=$(grep -m1 -i 'error\|failed\|assert' "$W/$f-$t.lerr" 2>/dev/null | head -c 200)
      if [ "$trc" != 0 ] && { [ "$c" = '=' ] || [ "$(cat "$W/ref-$f-$t.rc" 2>/dev/null)" != 0 ]; }; then
        # llama.cpp fails on the reference's own file: the same bytes, or its own run fails too
        c="$c, both fail to run"
        case " $runwhy " in *" $f "*) ;; *) runwhy="$runwhy $f"
          notes="$notes
- $f: llama.cpp 0.7 cannot run llama-quantize's own file of this model either (status $trc): $why" ;; esac
      elif [ "$trc" != 0 ]; then c="$c, run fails"; bad=1
        notes="$notes
- $f $t: llama-completion on tpconv's file: status $trc: $why"
      elif [ -f "$W/ref-$f-$t.rc" ] && ! cmp -s "$W/$f-$t.out" "$W/ref-$f-$t.out"; then c="$c, other text"; bad=1
        notes="$notes
- $f $t: llama-completion prints another text than on the reference's file (the files differ: see above)"
      else c="$c, runs"; fi
    fi
    printf ' %s |' "$c"
  done
  echo
done
[ -n "$notes" ] && printf '%s\n' "$notes"
exit $bad
