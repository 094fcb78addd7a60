#!/usr/bin/env bash
# The safetensors writer's page-phase padding (TAP). Files whose tensors of
# 1 MiB or more are copied in the kernel get their header padded with spaces
# (under 4 KiB more, 8-byte steps) so the data section starts in the page
# phase of those tensors' source (tpc_ckpt_copy_residue): copy_file_range then
# moves whole source pages onto whole destination pages. Checked on a
# LLaMA-shaped safetensors file whose data starts at a phase of its own:
# every rank file of shard tp 2 / 4 and the file merge writes start in the
# source's phase, the padding is spaces only and keeps the 8-byte alignment,
# the tensors are the source's (merge bit for bit, by hash), the rank files
# still match their manifest checksums, and convert of the merged file back
# to safetensors needs no padding (same phase: byte-identical header length).
# Small files (no copy of 1 MiB) keep the plain 8-byte padding. Convert of a
# torch zip, whose entries start out of phase, gives its tensors bit for bit.
# usage: phase_test.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/shard/tap.sh"
# hidden 1024, 1 layer, inter 1536, vocab 2048, F32: 8 MiB embeddings, 4 MiB
# attention and 6 MiB MLP weights, 4 KiB norms; every tensor and every rank
# slice a whole number of pages, so one phase fits them all
$PY "$SRC/bench/make_big_st.py" "$T/src.safetensors" 1024 1 1536 2048 F32 >/dev/null ||
  { echo "1..0 # SKIP generator failed"; exit 0; }
phase() { # FILE -> "data_start%4096 trailing_spaces header_len%8 first_byte"
  $PY - "$1" <<'PYEOF'
import struct, sys
f = open(sys.argv[1], 'rb')
n = struct.unpack('<Q', f.read(8))[0]
h = f.read(n)
print((8 + n) % 4096, len(h) - len(h.rstrip(b' ')), n % 8, chr(h[0]))
PYEOF
}
read -r P0 _ _ _ < <(phase "$T/src.safetensors")
F=(--preset llama --heads 8 --kv-heads 8 --head-dim 128 --vocab 2048)
for tp in 2 4; do
  run "$TPCONV" shard "$T/src.safetensors" --tp $tp "${F[@]}" -o "$T/set$tp"
  if [ "$rc" != 0 ]; then bad "shard tp $tp" "$(cat "$T/err")"; continue; fi
  allok=1 msg=""
  for f in "$T/set$tp"/*.safetensors; do
    read -r p sp m8 c < <(phase "$f")
    if [ "$p" != "$P0" ] || [ "$m8" != 0 ] || [ "$c" != "{" ]; then allok=0; msg="$f: phase $p (source $P0), header%8 $m8, first '$c'"; fi
  done
  [ "$allok" = 1 ] && ok "tp $tp: every rank file's data starts in the source's page phase ($P0), header padded with spaces, 8-byte aligned" ||
    bad "tp $tp: rank file phase" "$msg"
  run "$TPCONV" merge "$T/set$tp" -o "$T/m$tp.safetensors"
  if [ "$rc" != 0 ]; then bad "merge tp $tp" "$(cat "$T/err")"; continue; fi
  read -r p _ m8 _ < <(phase "$T/m$tp.safetensors")
  [ "$p" = "$P0" ] && [ "$m8" = 0 ] && ok "tp $tp: the merged file starts in the same phase" || bad "tp $tp: merged phase $p, want $P0"
  same "$T/src.safetensors" "$T/m$tp.safetensors" && ok "tp $tp: merge gives the source's tensors back bit for bit" ||
    bad "tp $tp: merged tensors differ" "$(cat "$T/diff" "$T/ierr")"
done
# a reshard reads the padded rank files and writes padded ones again
run "$TPCONV" shard "$T/set2" --tp 4 "${F[@]}" -o "$T/re4"
if [ "$rc" = 0 ]; then
  run "$TPCONV" merge "$T/re4" -o "$T/re4.safetensors"
  same "$T/src.safetensors" "$T/re4.safetensors" && ok "reshard tp 2 -> 4 of padded rank files merges back to the source" ||
    bad "reshard merge differs" "$(cat "$T/diff" "$T/ierr" "$T/err")"
else
  bad "reshard tp 2 -> 4" "$(cat "$T/err")"
fi
# convert of a file already in its source's phase adds no padding
run "$TPCONV" convert "$T/m2.safetensors" -o "$T/c.safetensors"
if [ "$rc" = 0 ] && cmp -s "$T/m2.safetensors" "$T/c.safetensors"; then
  ok "convert of the merged file is byte-identical (already in phase)"
else
  bad "convert of the merged file differs" "$(cat "$T/err")"
fi
# small tensors (no copy of 1 MiB): the plain 8-byte padding
$PY "$SRC/bench/make_big_st.py" "$T/small.safetensors" 128 1 256 256 F32 >/dev/null
run "$TPCONV" shard "$T/small.safetensors" --tp 2 --preset llama --heads 2 --kv-heads 2 --head-dim 64 --vocab 256 -o "$T/small2"
sp_max=99
[ "$rc" = 0 ] && sp_max=0
[ "$rc" = 0 ] && for f in "$T/small2"/*.safetensors; do read -r _ sp _ _ < <(phase "$f"); [ "$sp" -gt "$sp_max" ] && sp_max=$sp; done
[ "$rc" = 0 ] && [ "$sp_max" -lt 8 ] && ok "small rank files keep the 8-byte padding only" ||
  bad "small rank files padded ($sp_max spaces)" "$(cat "$T/err")"
# convert from a torch zip: each entry's data starts 64-byte aligned in the
# zip, in a page phase of its own, so most large tensors cannot keep their
# source's phase in the output; those are written from the mapping in 64 KiB
# pieces on the output's grid (tpc_out_copy_at), and must come out the same
$PY - "$T/z.pt" <<'PYEOF'
import sys, torch
torch.manual_seed(0)
sd = {'t%d' % i: torch.randn(n) for i, n in enumerate([262144 + 17, 300001, 1 << 20, 5 * 65536 + 3])}
sd['m'] = torch.randn(700, 1031)
sd['v'] = torch.randn(1031, 700).t()  # a view: the writer lays it out itself
torch.save(sd, sys.argv[1])
PYEOF
run "$TPCONV" convert "$T/z.pt" -o "$T/z.safetensors"
if [ "$rc" = 0 ] && same "$T/z.pt" "$T/z.safetensors"; then
  ok "convert of a torch zip whose entries start out of phase gives its tensors bit for bit"
else
  bad "convert of the out-of-phase torch zip" "$(cat "$T/err" "$T/diff" "$T/ierr" 2>/dev/null)"
fi
# and without write-behind (TPCONV_WRITE_BEHIND=0, for measuring) the same bytes
TPCONV_WRITE_BEHIND=0 run "$TPCONV" convert "$T/z.pt" -o "$T/z0.safetensors"
[ "$rc" = 0 ] && cmp -s "$T/z.safetensors" "$T/z0.safetensors" && ok "TPCONV_WRITE_BEHIND=0 writes the same bytes" ||
  bad "TPCONV_WRITE_BEHIND=0 output differs" "$(cat "$T/err")"
echo "1..$n"
[ "$failed" = 0 ]
