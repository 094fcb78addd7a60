#!/usr/bin/env bash
# `meson install --destdir` into a temporary tree; then build a program against
# the installed library through pkg-config (shared and static) and run it.
# TAP. usage: pkgconfig_test.sh BUILD_DIR SRC_DIR
set -u
B=$(realpath "$1") SRC=$(realpath "$2")
# a sanitizer build installs an instrumented library: build the consumer the same way
SAN=${3:-none}; SANFLAGS=(); [ "$SAN" = none ] || SANFLAGS=(-fsanitize="$SAN")
. "$SRC/tests/lib/tap.sh"
tmpdir
if meson install -C "$B" --destdir "$T/root" --no-rebuild >"$T/install.log" 2>&1; then ok "meson install --destdir"; else bad "meson install" "$(tail -5 "$T/install.log")"; echo "1..$n"; exit 1; fi
pc=$(find "$T/root" -name tpconv.pc | head -n 1)
[ -n "$pc" ] && ok "tpconv.pc installed" || bad "tpconv.pc installed"
for f in bin/tpconv include/tpconv/tpc_ckpt.h include/tpconv/formats.h; do
  [ -n "$(find "$T/root" -path "*/$f" | head -n 1)" ] && ok "installed $f" || bad "installed $f"
done
man1=$(find "$T/root" -path '*/man1/tpconv.1' | head -n 1)
if [ -n "$man1" ] && man -l "$man1" 2>/dev/null | grep -q 'TPCONV SHARD\|TPCONV CONVERT'; then ok "man -l renders tpconv(1)"; else bad "man page" "$man1"; fi
comp=$(find "$T/root" -path '*/bash-completion/completions/tpconv' | head -n 1)
[ -n "$comp" ] && bash -n "$comp" && ok "bash completion installed and parses" || bad "bash completion"
[ -n "$(find "$T/root" -name 'libtpconv.so*' | head -n 1)" ] && ok "shared library installed" || bad "shared library installed"
[ -n "$(find "$T/root" -name 'libtpconv.a' | head -n 1)" ] && ok "static library installed" || bad "static library installed"
# the tree lives under a --destdir: point pkg-config at it as a sysroot
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR="$T/root"
cflags=$(pkg-config --cflags tpconv) && libs=$(pkg-config --libs tpconv) \
  && ok "pkg-config resolves tpconv" || bad "pkg-config resolves tpconv"
libdir="$T/root$(pkg-config --variable=libdir tpconv)"
libdir=${libdir/#$T\/root$T\/root/$T/root}
IN="$SRC/tests/data/tiny_llama.pt"
if cc -std=c11 "${SANFLAGS[@]}" $cflags "$SRC/tests/pkgconfig/consumer.c" -o "$T/consumer" $libs -Wl,-rpath,"$libdir" 2>"$T/cc.log"; then
  ok "builds against the shared library"
  if out=$("$T/consumer" "$IN" "$T/out.safetensors" 2>&1) && [[ "$out" == "21 tensors, format torch-zip" ]]; then ok "runs: $out"; else bad "runs" "$out"; fi
else bad "builds against the shared library" "$(cat "$T/cc.log")"; fi
if cc -std=c11 "${SANFLAGS[@]}" $cflags "$SRC/tests/pkgconfig/consumer.c" -o "$T/consumer_static" "$libdir/libtpconv.a" \
     $(pkg-config --libs --static tpconv | sed 's/-ltpconv//') -fopenmp 2>"$T/cc2.log"; then
  ok "builds against the static library"
  "$T/consumer_static" "$IN" "$T/out2.safetensors" >/dev/null 2>&1 && cmp -s "$T/out.safetensors" "$T/out2.safetensors" \
    && ok "static and shared builds write the same bytes" || bad "static build output"
else bad "builds against the static library" "$(cat "$T/cc2.log")"; fi
echo "1..$n"
[ "$failed" = 0 ]
