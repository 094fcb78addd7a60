#!/bin/sh
# DeepSpeed universal checkpoints under torch 2.14 (TAP; opt-in, like `make
# interop`: the Debian forky chroot of tests/interop/chroot.sh, root). The
# ZeRO saves and the reference universal folders are written by torch 2.14
# (tests/deepspeed/universal_ref.py make); tpconv on the host reads them and
# writes its own; torch 2.14 then reads tpconv's as DeepSpeed's loaders do
# (universal_ref.py check, same). And a DCP save torch 2.14 makes of
# get_state_dict (AdamW, one process) goes to a universal folder holding
# every parameter's state as torch.optim held it (check_dcp). Tensor
# parallelism: tpconv's files from the family records equal the reference's
# from a client's universal_checkpoint_info, and load_hp_checkpoint_state's tp
# 2 slices (re-implemented, universal_checkpoint.py l. 43-121, run by torch
# 2.14) equal tpconv shard's rank tensors (universal_ref.py tp). Mounts what the chroot lacks (proc, dev)
# and unmounts only those.
# usage: universal_forky.sh TPCONV SRCDIR
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
[ "$(id -u)" = 0 ] || { echo "1..0 # SKIP needs root (chroot)"; exit 0; }
. "$SRC/tests/interop/chroot.sh"
interop_ready || { echo "1..0 # SKIP no forky chroot in $IROOT (tests/interop/chroot.sh setup)"; exit 0; }
mounted=
for m in proc dev dev/shm; do mountpoint -q "$IROOT/$m" || mounted="$m $mounted"; done
W=$(mktemp -d "$IROOT/tmp/universal.XXXXXX") || exit 4
CW=/tmp/${W##*/}
cleanup() {
	for m in $mounted; do umount "$IROOT/$m" 2>/dev/null || umount -l "$IROOT/$m"; done
	rm -rf "$W"
}
trap cleanup EXIT
[ -z "$mounted" ] || interop_mount "$IROOT" || exit 4
cp "$SRC/tests/deepspeed/universal_ref.py" "$SRC/tests/deepspeed/make_zero.py" "$W/"
py() { chroot "$IROOT" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 \
	sh -c "cd '$CW' && python3 $*"; }
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
bad() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }
U=global_step14_universal
py "-c 'import torch; print(torch.__version__)'" >"$W/ver" 2>&1 && py "universal_ref.py make ." 2>"$W/err" ||
	{ bad "torch $(cat "$W/ver"): fixtures" "$(tail -3 "$W/err")"; echo "1..$n"; exit 1; }
for st in 2 3; do
	mkdir -p "$W/r$st" "$W/u$st"
	"$TPCONV" convert "$W/z$st" --optimizer -o "$W/r$st/optimizer.pt" -q 2>"$W/err" &&
		"$TPCONV" convert "$W/z$st/$U" --optimizer -o "$W/u$st/optimizer.pt" -q 2>>"$W/err" &&
		cmp -s "$W/r$st/optimizer.pt" "$W/u$st/optimizer.pt" &&
		ok "torch $(cat "$W/ver"), stage $st: the reference's universal folder gives the ZeRO save's optimizer.pt" ||
		bad "stage $st: read" "$(head -2 "$W/err")"
	"$TPCONV" convert "$W/z$st" --format ds-universal --tp1-only -o "$W/t$st/$U" -q 2>"$W/err" || bad "stage $st: write" "$(head -2 "$W/err")"
done
py "universal_ref.py dcp ." 2>"$W/err" || bad "DCP save" "$(tail -2 "$W/err")"
"$TPCONV" convert "$W/dcp" --format ds-universal --tp1-only -o "$W/du/s" -q 2>"$W/err" || bad "DCP to universal" "$(head -2 "$W/err")"
# tensor parallelism: splits from the family records (zp's config.json, zf --preset phi3),
# tp 2 slices as load_hp_checkpoint_state cuts them against tpconv shard's rank files
"$TPCONV" convert "$W/zp" --format ds-universal -o "$W/tp/$U" -q 2>"$W/err" &&
	"$TPCONV" convert "$W/zf" --format ds-universal --preset phi3 -o "$W/tf/$U" -q 2>>"$W/err" &&
	"$TPCONV" shard "$W/mp" --tp 2 --layout hf --format torch -o "$W/sp" -q 2>>"$W/err" &&
	"$TPCONV" shard "$W/mf" --tp 2 --layout hf --format torch -o "$W/sf" -q 2>>"$W/err" &&
	"$TPCONV" convert "$W/zm" --format ds-universal -o "$W/tm/$U" -q 2>>"$W/err" &&
	"$TPCONV" shard "$W/mm" --tp 2 --layout hf --format torch -o "$W/sm" -q 2>>"$W/err" || bad "tensor-parallel writes" "$(head -2 "$W/err")"
py "universal_ref.py tp t2/$U sp 2" >"$W/py1" 2>&1
grep -q "^not ok" "$W/py1" && grep -qx "# wrong: model.embed_tokens.weight model.layers.0.mlp.down_proj.weight model.layers.0.self_attn.o_proj.weight model.layers.1.mlp.down_proj.weight model.layers.1.self_attn.o_proj.weight" "$W/py1" &&
	ok "torch $(cat "$W/ver"): cat_dim 0 everywhere (--tp1-only) loads wrong at tp 2 exactly the vocabulary, o_proj and down_proj" ||
	bad "tp 1 folder at tp 2" "$(head -3 "$W/py1")"
py "universal_ref.py check t2/$U 23 t3/$U 34" >"$W/py" 2>&1
py "universal_ref.py same z2/$U t2/$U z3/$U t3/$U zp/$U tp/$U zf/$U tf/$U" >>"$W/py" 2>&1
py "universal_ref.py tp tp/$U sp 2 tf/$U sf 2 tm/$U sm 2" >>"$W/py" 2>&1
py "universal_ref.py check_dcp du/s ref.pt" >>"$W/py" 2>&1
while IFS= read -r l; do
	case $l in
	"ok - "*) ok "torch $(cat "$W/ver"): ${l#ok - }" ;;
	"not ok - "*) bad "${l#not ok - }" ;;
	*) echo "# $l" ;;
	esac
done <"$W/py"
echo "1..$n"
[ "$failed" = 0 ] && [ "$n" -ge 13 ]
