#!/usr/bin/env bash
# `meson install --destdir` into a temporary tree; then build a program against
# the installed library through pkg-config (shared and static), including
# only <tpconv/tpconv.h>, and run it. The shared library must export exactly
# the names in lib/libtpconv.map, and the TPC_API marks in lib/ and formats/
# headers must name the same list: a symbol exported, or marked, by accident
# fails here.
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
for f in bin/tpconv include/tpconv/tpconv.h; do
  [ -n "$(find "$T/root" -path "*/$f" | head -n 1)" ] && ok "installed $f" || bad "installed $f"
done
inner=$(find "$T/root" -path '*/include/tpconv/*' ! -name 'tpconv*.h' | head -n 3)
[ -z "$inner" ] && ok "only tpconv*.h headers installed" || bad "internal headers installed" $inner
man1=$(find "$T/root" -path '*/man1/tpconv.1' | head -n 1)
if [ -n "$man1" ] && man -l "$man1" 2>/dev/null | grep -q 'TPCONV SHARD\|TPCONV CONVERT'; then ok "man -l renders tpconv(1)"; else bad "man page" "$man1"; fi
comp=$(find "$T/root" -path '*/bash-completion/completions/tpconv' | head -n 1)
[ -n "$comp" ] && bash -n "$comp" && ok "bash completion installed and parses" || bad "bash completion"
[ -n "$(find "$T/root" -name 'libtpconv.so*' | head -n 1)" ] && ok "shared library installed" || bad "shared library installed"
[ -n "$(find "$T/root" -name 'libtpconv.a' | head -n 1)" ] && ok "static library installed" || bad "static library installed"
# the run-time modules a build made go to <libdir>/tpconv, where tpconv looks for them
for m in tpconv_mpi.so tpconv_cuda.so; do
  [ -e "$B/verify/$m" ] || continue
  [ -n "$(find "$T/root" -path "*/tpconv/$m" | head -n 1)" ] && ok "$m installed in <libdir>/tpconv" || bad "$m installed"
done
# the tree lives under a --destdir: point pkg-config at it as a sysroot
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR="$T/root"
cflags=$(pkg-config --cflags tpconv) && libs=$(pkg-config --libs tpconv) \
  && ok "pkg-config resolves tpconv" || bad "pkg-config resolves tpconv"
libdir="$T/root$(pkg-config --variable=libdir tpconv)"
libdir=${libdir/#$T\/root$T\/root/$T/root}
IN="$SRC/tests/data/tiny_llama.pt"
if cc -std=c11 "${SANFLAGS[@]}" $cflags "$SRC/tests/pkgconfig/consumer.c" -o "$T/consumer" $libs -Wl,-rpath,"$libdir" 2>"$T/cc.log"; then
  ok "builds against the shared library"
  if out=$("$T/consumer" "$IN" "$T/out.safetensors" 2>"$T/consumer.err") \
     && [[ "$out" == "21 tensors, format torch-zip, 435456 bytes read" ]]; then ok "runs: $out"
  else bad "runs" "$out" "$(cat "$T/consumer.err")"; fi
  tpconv=$(find "$T/root" -path '*/bin/tpconv' | head -n 1)
  if "$tpconv" inspect "$T/out.safetensors" 2>&1 | grep -q 'BF16'; then ok "its bf16 safetensors reads back"
  else bad "its bf16 safetensors reads back" "$("$tpconv" inspect "$T/out.safetensors" 2>&1 | tail -3)"; fi
else bad "builds against the shared library" "$(cat "$T/cc.log")"; fi
if cc -std=c11 "${SANFLAGS[@]}" $cflags "$SRC/tests/pkgconfig/consumer.c" -o "$T/consumer_static" "$libdir/libtpconv.a" \
     $(pkg-config --libs --static tpconv | sed 's/-ltpconv//') -fopenmp 2>"$T/cc2.log"; then
  ok "builds against the static library"
  "$T/consumer_static" "$IN" "$T/out2.safetensors" >/dev/null 2>&1 && cmp -s "$T/out.safetensors" "$T/out2.safetensors" \
    && ok "static and shared builds write the same bytes" || bad "static build output"
else bad "builds against the static library" "$(cat "$T/cc2.log")"; fi

# the exports: installed library, committed list, TPC_API marks
sed -n 's/^\t\(tpc_[a-z0-9_]*\);$/\1/p' "$SRC/lib/libtpconv.map" | LC_ALL=C sort >"$T/list"
so=$(find "$T/root" -name 'libtpconv.so.*.*' | head -n 1)
nm -D --defined-only "$so" | awk '{print $NF}' | sed 's/@.*//' | LC_ALL=C sort >"$T/exported"
if [ -s "$T/list" ] && cmp -s "$T/list" "$T/exported"; then ok "libtpconv.so exports exactly lib/libtpconv.map ($(wc -l <"$T/list") names)"
else bad "libtpconv.so exports differ from lib/libtpconv.map (< list, > exported)" \
  "$(diff "$T/list" "$T/exported" | grep '^[<>]' | head -20)"; fi
grep -rhE '^TPC_API [^(]*\btpc_[a-z0-9_]+\(' --include='*.h' "$SRC/lib" "$SRC/formats" \
  | sed -E 's/^TPC_API [^(]*\b(tpc_[a-z0-9_]+)\(.*/\1/' | LC_ALL=C sort -u >"$T/marked"
if cmp -s "$T/list" "$T/marked"; then ok "the TPC_API declarations are lib/libtpconv.map"
else bad "TPC_API declarations differ from lib/libtpconv.map (< list, > marked)" \
  "$(diff "$T/list" "$T/marked" | grep '^[<>]' | head -20)"; fi
# the checkpoint is opaque to a program
printf '#include <tpconv/tpconv.h>\nint main(void) { return (int)sizeof(tpc_ckpt) + (int)sizeof(tpc_tensor); }\n' >"$T/opaque.c"
if ! cc -std=c11 $cflags -c "$T/opaque.c" -o "$T/opaque.o" 2>/dev/null; then ok "tpc_ckpt and tpc_tensor are opaque"
else bad "tpc_ckpt or tpc_tensor is complete in the installed headers"; fi
echo "1..$n"
[ "$failed" = 0 ]
