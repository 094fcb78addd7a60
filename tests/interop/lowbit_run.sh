#!/bin/sh
# Inside the interop chroot, in the folder of tests/interop/lowbit_llama.sh and
# lowbit_matrix.sh: for each line "NAME INPUT TYPE" of ./jobs, llama-quantize
# INPUT ref-NAME.gguf TYPE (its stderr in ref-NAME.qerr; no file when it
# fails); with the argument `complete`, llama-completion at temperature 0
# (8 tokens, one thread) on NAME.gguf and ref-NAME.gguf: stdout in F.out,
# stderr in F.lerr, the status in F.rc; with `compare`, for each NAME.gguf
# that is not byte-identical to ref-NAME.gguf, lowbit_cmp.py says why in
# NAME.cmp (one Python process for all); with `run`, both: the comparison,
# and llama-completion on NAME.gguf, and on ref-NAME.gguf only where the two
# files differ (a byte-identical file prints the same text). One chroot entry
# for every run.
# usage (in the chroot): sh lowbit_run.sh [complete|compare|run]
while read -r name in type; do
  T=$(echo "$type" | tr a-z A-Z)
  llama-quantize "$in" "ref-$name.gguf" "$T" 1 > /dev/null 2> "ref-$name.qerr" || rm -f "ref-$name.gguf"
  case "${1:-}" in complete|run) ;; *) continue ;; esac
  for f in "$name" "ref-$name"; do
    [ "${1:-}" = run ] && [ "$f" = "ref-$name" ] && cmp -s "$name.gguf" "ref-$name.gguf" && continue
    rc=missing
    # llama-completion 0.7 sometimes ends early with status 0 and no summary
    # (tests/interop/llamacpp.py's complete): a run counts once it prints
    # its summary, up to 5 tries
    [ -f "$f.gguf" ] && for _ in 1 2 3 4 5; do
      llama-completion -m "$f.gguf" -p "the quick brown fox" -n 8 --temp 0 --seed 1 -no-cnv -t 1 -tb 1 -c 128 \
        --no-warmup > "$f.out" 2> "$f.lerr" < /dev/null
      rc=$?
      if [ $rc = 0 ] && ! grep -q common_perf_print "$f.lerr"; then rc="0 without its summary"; else break; fi
    done
    echo "$rc" > "$f.rc"
  done
done < ./jobs
if [ "${1:-}" = compare ] || [ "${1:-}" = run ]; then
  set --
  while read -r name in type; do
    [ -f "$name.gguf" ] && [ -f "ref-$name.gguf" ] && ! cmp -s "$name.gguf" "ref-$name.gguf" && set -- "$@" "$name"
  done < ./jobs
  [ $# = 0 ] || python3 lowbit_cmp.py "$@"
fi
