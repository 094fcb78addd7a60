#!/usr/bin/env bash
# Interrupts, many of them (TAP): shard, merge and convert to HF shards, each with
# 4 writer threads on a machine kept busy by a spinning process, get SIGINT, SIGTERM
# or SIGHUP after a random delay, a few hundred times in all (at least 20, more
# while INTERRUPT_SECONDS last, default 120: no check depends on the machine's speed). After every interrupt: no temporary
# (.NAME.tpc-XXXXXX) anywhere, every file under a final name complete (tpconv reads
# it), and a manifest only over a complete set. An interrupted shard run again
# without --force resumes: the rank files it kept and wrote equal an uninterrupted
# run's byte for byte; so does an interrupted merge or convert to HF shards. Prints its seed (TPC_SEED=N replays the delays).
# usage: interrupt_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
T=$(mktemp -d)
BUSY=""
trap '[ -n "$BUSY" ] && kill $BUSY 2>/dev/null; rm -rf "$T"' EXIT
. "$SRC/tests/lib/tap.sh"
SEED=${TPC_SEED:-$RANDOM}
RANDOM=$SEED
echo "# seed $SEED"
LIMIT=${INTERRUPT_SECONDS:-120}

# a ~48 MB LLaMA-shaped safetensors model and its config (no torch needed)
mkdir -p "$T/model"
python3 - "$T/model" <<'EOF'
import json, struct, sys, os
d = sys.argv[1]
H, I, V, L, nh, kv = 512, 1536, 4096, 4, 8, 4
hd = H // nh
shapes = {"model.embed_tokens.weight": [V, H], "lm_head.weight": [V, H], "model.norm.weight": [H]}
for i in range(L):
    p = "model.layers.%d." % i
    shapes.update({p + "self_attn.q_proj.weight": [H, H], p + "self_attn.k_proj.weight": [kv * hd, H],
                   p + "self_attn.v_proj.weight": [kv * hd, H], p + "self_attn.o_proj.weight": [H, H],
                   p + "mlp.gate_proj.weight": [I, H], p + "mlp.up_proj.weight": [I, H], p + "mlp.down_proj.weight": [H, I],
                   p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H]})
hdr, off = {}, 0
for k in sorted(shapes):
    n = 4
    for s in shapes[k]: n *= s
    hdr[k] = {"dtype": "F32", "shape": shapes[k], "data_offsets": [off, off + n]}
    off += n
js = json.dumps(hdr).encode(); js += b" " * ((8 - len(js) % 8) % 8)
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(js)) + js)
    blk = bytes(range(256)) * 4096
    left = off
    while left:
        w = min(left, len(blk)); f.write(blk[:w]); left -= w
json.dump({"hidden_size": H, "num_attention_heads": nh, "num_key_value_heads": kv, "vocab_size": V,
           "num_hidden_layers": L, "intermediate_size": I}, open(os.path.join(d, "config.json"), "w"))
EOF
export OMP_NUM_THREADS=4
# the uninterrupted references, each timed: an interrupt comes at a random
# point of the command's own duration (a fixed range missed every shard run
# once the writes got faster: nothing was left to resume)
ms() { echo $(( $(date +%s%N) / 1000000 )); }
t0=$(ms)
"$TPCONV" shard "$T/model" --preset llama --tp 4 -o "$T/ref" -q || { echo "1..0 # SKIP reference shard failed"; exit 0; }
t1=$(ms)
"$TPCONV" merge "$T/ref" -o "$T/ref_merge/" --max-shard-size 8MB -q || { echo "1..0 # SKIP reference merge failed"; exit 0; }
t2=$(ms)
"$TPCONV" convert "$T/model" -o "$T/ref_convert/" --max-shard-size 8MB -q || { echo "1..0 # SKIP reference convert failed"; exit 0; }
t3=$(ms)
DUR=($(( t1 - t0 + 1 )) $(( t2 - t1 + 1 )) $(( t3 - t2 + 1 )))
echo "# uninterrupted: shard ${DUR[0]} ms, merge ${DUR[1]} ms, convert ${DUR[2]} ms"
# keep the machine busy: a loop at the lowest priority, so that it takes only
# a core nothing else wants (in the suite, the other tests keep the cores busy)
nice -n 19 python3 -c 'import time; t=time.time()+600
while time.time() < t: pass' & BUSY=$!

temps() { find "$T" -name '.*.tpc-*' | grep -v "^$T/ref" ; }
complete() { # every file under a final name reads
  local f
  for f in $(find "$1" -type f \( -name '*.safetensors' -o -name '*.bin' \) 2>/dev/null); do
    "$TPCONV" inspect "$f" >/dev/null 2>&1 || { echo "$f"; return 1; }
  done
  return 0
}
declare -A runs leaks partial resumed stale
start=$(date +%s)
i=0
# at least MIN interrupts, however slow the machine; more while time is left,
# and (up to 200) until an interrupted shard has been resumed
MIN=20
while [ $(( $(date +%s) - start )) -lt "$LIMIT" ] || [ "$i" -lt "$MIN" ] || { [ "${resumed[ok]:-0}" = 0 ] && [ "$i" -lt 200 ]; }; do
  i=$((i + 1))
  kind=$(( RANDOM % 3 ))
  sig=$(( RANDOM % 3 )); sig=$([ $sig = 0 ] && echo INT || ([ $sig = 1 ] && echo TERM || echo HUP))
  d=$(( RANDOM * 32768 + RANDOM )); d=$(( d % (DUR[kind] + DUR[kind] / 4) ))
  delay=$(printf '%d.%03d' $(( d / 1000 )) $(( d % 1000 )))
  O=$T/out_$i
  case $kind in
    0) what=shard; "$TPCONV" shard "$T/model" --preset llama --tp 4 -o "$O" -q 2>/dev/null & ;;
    1) what=merge; "$TPCONV" merge "$T/ref" -o "$O/" --max-shard-size 8MB -q 2>/dev/null & ;;
    2) what=convert; "$TPCONV" convert "$T/model" -o "$O/" --max-shard-size 8MB -q 2>/dev/null & ;;
  esac
  pid=$!
  sleep "$delay"
  kill -s "$sig" "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  runs[$what]=$(( ${runs[$what]:-0} + 1 ))
  if [ -n "$(temps)" ]; then leaks[$what]=$(( ${leaks[$what]:-0} + 1 )); echo "# leak after $what ($sig at ${delay}s): $(temps | head -3)"; fi
  if ! bad_file=$(complete "$O"); then partial[$what]=$(( ${partial[$what]:-0} + 1 )); echo "# unreadable $bad_file after $what"; fi
  if [ "$what" = shard ] && [ -e "$O/tpconv-manifest.json" ] && ! "$TPCONV" merge "$O" -o "$O.check.safetensors" -q 2>/dev/null; then
    partial[$what]=$(( ${partial[$what]:-0} + 1 )); echo "# manifest over a set that does not merge: $O"
  fi
  if [ "$what" = shard ] && [ -d "$O" ] && [ ! -e "$O/tpconv-manifest.json" ]; then
    # resume: the same command again, no --force
    if "$TPCONV" shard "$T/model" --preset llama --tp 4 -o "$O" -q 2>"$T/resume.err"; then
      same=1
      for f in "$T"/ref/model_tp0*; do cmp -s "$f" "$O/$(basename "$f")" || same=0; done
      [ $same = 1 ] && resumed[ok]=$(( ${resumed[ok]:-0} + 1 )) || { stale[$what]=1; echo "# resumed set differs: $O"; }
    else
      stale[$what]=1; echo "# resume failed: $(cat "$T/resume.err")"
    fi
  fi
  if [ "$what" != shard ] && [ -d "$O" ] && [ ! -e "$O/model.safetensors.index.json" ]; then
    # resume an interrupted HF-shards output: the same command again, no --force
    if [ "$what" = merge ]; then "$TPCONV" merge "$T/ref" -o "$O/" --max-shard-size 8MB -q 2>"$T/resume.err"
    else "$TPCONV" convert "$T/model" -o "$O/" --max-shard-size 8MB -q 2>"$T/resume.err"; fi
    if [ $? = 0 ]; then
      same=1
      for f in "$T/ref_$what"/model*; do cmp -s "$f" "$O/$(basename "$f")" || same=0; done
      [ $same = 1 ] && resumed[$what]=$(( ${resumed[$what]:-0} + 1 )) || { stale[$what]=1; echo "# resumed $what differs: $O"; }
    else
      stale[$what]=1; echo "# resume of $what failed: $(cat "$T/resume.err")"
    fi
  fi
  rm -rf "$O" "$O.check.safetensors"
done
kill $BUSY 2>/dev/null; BUSY=""
total=$(( ${runs[shard]:-0} + ${runs[merge]:-0} + ${runs[convert]:-0} ))
for w in shard merge convert; do
  [ "${runs[$w]:-0}" -gt 0 ] || continue
  [ "${leaks[$w]:-0}" = 0 ] && ok "$w: ${runs[$w]} interrupts (SIGINT/SIGTERM/SIGHUP, random delay, 4 threads, busy CPU), no temporary left" ||
    bad "$w: temporaries left after ${leaks[$w]} of ${runs[$w]} interrupts"
  [ "${partial[$w]:-0}" = 0 ] && ok "$w: every file under a final name complete, no manifest over an incomplete set" ||
    bad "$w: ${partial[$w]} incomplete outputs"
done
[ "${stale[shard]:-0}" = 0 ] && [ "${resumed[ok]:-0}" -gt 0 ] &&
  ok "an interrupted shard run again without --force resumed ${resumed[ok]} times, each set byte-equal to an uninterrupted one" ||
  bad "resume" "resumed ${resumed[ok]:-0}, failures ${stale[shard]:-0}"
for w in merge convert; do
  [ "${stale[$w]:-0}" = 0 ] && ok "an interrupted $w to HF shards run again without --force completed ${resumed[$w]:-0} times, byte-equal to an uninterrupted one" ||
    bad "$w resume" "resumed ${resumed[$w]:-0}"
done
[ "$total" -ge "$MIN" ] && ok "$total interrupts (at least $MIN, more while ${LIMIT}s lasted)" || bad "only $total interrupts ran"
echo "1..$n"
[ "$failed" = 0 ]
