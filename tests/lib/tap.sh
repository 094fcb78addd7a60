# The TAP harness every shell test sources, as git's t/ scripts source
# test-lib.sh: `. "$SRC/tests/lib/tap.sh"` after SRC is set.
#
#   ok DESC                 one passing check
#   bad DESC [LINE...]      one failing check; each LINE (multi-line strings too)
#                           follows as a "# " comment
#   skip DESC [REASON]      a skipped check: "ok N - DESC # SKIP REASON", or
#                           "ok N # SKIP DESC" without a reason
#   diag LINE...            "# " comment lines
#   skip_all REASON         "1..0 # SKIP REASON" and exit 0 (nothing could run)
#   need_torch [PY]         skip_all unless PY (default $PY, else /usr/bin/python3)
#                           imports torch
#   tmpdir [MKTEMP-ARGS]    the scratch folder $T, removed on exit
#   run CMD...              CMD's exit status in $rc, its stdout in $T/out and
#                           stderr in $T/err
#   check DESC CMD...       ok when CMD succeeds, else bad with the first 600
#                           bytes of its output (stdout and stderr)
#   done_testing            the plan line "1..N"; the script's status is 0 only
#                           when no check failed
#   same A B                checkpoints A and B (any input $TPCONV reads) hold
#                           the same tensors in any order: name, dtype, shape,
#                           SHA-256 of the bytes, as `inspect --hash` lists them;
#                           else status 1 and why in $T/diff (the first lines
#                           that differ, or an inspect's error; never an earlier
#                           call's). A file unchanged for 2 s is inspected once
#                           (its listing kept under its device, inode, size and
#                           times)
#
#   sha256 FILE             FILE's SHA-256 (hex) in $REPLY; status 1 when it
#                           cannot be read (one process, no pipe)
#
#   $SAN                    1 in a sanitizer build (TPC_TEST_SAN, set by
#                           tests/meson.build): a matrix the normal build runs
#                           whole (every family, outtype, tp, layout) runs one
#                           representative of each code path there
#
# $n counts the checks, $failed the failing ones. A script may define its own
# run or check after sourcing (the later definition wins).
n=0 failed=0 SAN=${TPC_TEST_SAN:-0}
ok()   { n=$((n+1)); echo "ok $n - $1"; }
bad()  { n=$((n+1)); failed=$((failed+1)); echo "not ok $n - $1"; shift; [ $# = 0 ] || diag "$@"; }
skip() { n=$((n+1)); if [ $# -ge 2 ]; then echo "ok $n - $1 # SKIP $2"; else echo "ok $n # SKIP $1"; fi; }
diag() { local l; for l in "$@"; do printf '%s\n' "$l" | sed 's/^/# /'; done; }
skip_all() { echo "1..0 # SKIP $1"; exit 0; }
need_torch() {
  local py=${1:-${PY:-/usr/bin/python3}}
  "$py" -c 'import torch' 2>/dev/null || skip_all "real torch ($py -c 'import torch') is not available"
}
tmpdir() { T=$(mktemp -d "$@") || exit 1; trap 'rm -rf "$T"' EXIT; }
run()   { "$@" >"$T/out" 2>"$T/err"; rc=$?; }
check() { local d=$1; shift; if "$@" >"$T/out" 2>&1; then ok "$d"; else bad "$d" "$(head -c 600 "$T/out")"; fi; }
sha256() { REPLY=$(sha256sum "$1") && REPLY=${REPLY%% *}; }
done_testing() { echo "1..$n"; [ "$failed" = 0 ]; }
same() {
  : >"$T/ierr"
  local st=
  # both files' keys from one stat (a process costs ~10 ms of CPU on the test machines)
  [ -f "$1" ] && [ -f "$2" ] && { st=$(stat -c '%d_%i_%s_%.9Y_%.9Z %Z' "$1" "$2" 2>/dev/null) || st=; }
  tensor_list "$1" a "${st%%$'\n'*}" && tensor_list "$2" b "${st#*$'\n'}" ||
    { { echo "same: cannot inspect both:"; cat "$T/ierr"; } >"$T/diff"; return 1; }
  if cmp -s "$list_a" "$list_b"; then : >"$T/diff"; return 0; fi
  { echo "same: '$1' (<) and '$2' (>) differ:"; diff "$list_a" "$list_b" | grep '^[<>]' | head -n 10; } >"$T/diff"
  return 1
}
# tensor_list CKPT a|b [STAT]: CKPT's tensors, a line each (name dtype shape
# sha256), sorted, in the file named by $list_a or $list_b; STAT is the file's
# `stat -c '%d_%i_%s_%.9Y_%.9Z %Z'` line (none for a folder)
tensor_list() {
  local st=${3:-} key= out=$T/$2.list
  [ -f "$1" ] && [ -z "$st" ] && { st=$(stat -c '%d_%i_%s_%.9Y_%.9Z %Z' "$1") || return 1; }
  [ -f "$1" ] && [ "${st##* }" -lt $((EPOCHSECONDS - 2)) ] && key=$T/.lists/${st%% *}
  if [ -n "$key" ] && [ -f "$key" ]; then printf -v "list_$2" %s "$key"; return 0; fi
  "$TPCONV" inspect --hash "$1" >"$out.raw" 2>>"$T/ierr" || return 1
  sed -E '/^#/d; /^name +dtype +shape /d; s/^([^ ]+) +([^ ]+) +(\[[^]]*\]) +[0-9]+ +([0-9a-f]{64})( .*)?$/\1 \2 \3 \4/' "$out.raw" |
    LC_ALL=C sort >"$out"
  printf -v "list_$2" %s "$out"
  [ -z "$key" ] || { [ -d "$T/.lists" ] || mkdir "$T/.lists"; mv "$out" "$key"; printf -v "list_$2" %s "$key"; }
}
