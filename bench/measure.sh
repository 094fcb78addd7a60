# Sourced by the bench scripts: measure LABEL OUT CMD... runs CMD (then
# sync) REPS times with OUT removed before each run, and prints a table row
# with the best wall seconds and the peak RSS. Needs DIR (scratch) and REPS.
measure() { # LABEL OUT CMD...: best wall seconds (with sync) and peak RSS KiB
  local label=$1 out=$2; shift 2
  local best="" rss=0 secs m
  for _ in $(seq "$REPS"); do
    rm -rf "$out"; sync
    /usr/bin/time -f "%e %M" -o "$DIR/time.txt" sh -c '"$@" && sync' sh "$@" > "$DIR/cmd.log" 2>&1 ||
      { echo "FAILED: $label"; cat "$DIR/cmd.log"; exit 1; }
    read -r secs m < "$DIR/time.txt"
    if [ -z "$best" ] || awk "BEGIN{exit !($secs < $best)}"; then best=$secs; fi
    [ "$m" -gt "$rss" ] && rss=$m
  done
  rm -rf "$out"
  printf '| %s | %s s | %s MB |\n' "$label" "$best" "$((rss / 1024))"
}
