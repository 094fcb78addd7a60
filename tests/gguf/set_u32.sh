#!/bin/sh
# usage: set_u32.sh FILE.gguf KEY VALUE: set the u32 KV KEY of FILE in place
# (VALUE < 256; the key must appear once, as a u32: type 4, then the value)
set -eu
f=$1 k=$2 v=$3
off=$(grep -obUaF "$k" "$f" | head -1 | cut -d: -f1)
[ -n "$off" ] && [ "$(grep -cUaF "$k" "$f")" = 1 ] || { echo "set_u32: '$k' not once in $f" >&2; exit 1; }
at=$((off + ${#k}))
[ "$(od -An -tu4 -j "$at" -N4 "$f" | tr -d ' ')" = 4 ] || { echo "set_u32: '$k' is not a u32" >&2; exit 1; }
printf "$(printf '\\%03o\\000\\000\\000' "$v")" | dd of="$f" bs=1 seek=$((at + 4)) conv=notrunc 2>/dev/null
