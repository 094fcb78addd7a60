#!/bin/sh
# The Debian forky chroot that holds the real consumers (torch, transformers,
# safetensors, accelerate, llama.cpp). Sourced by run.sh; `chroot.sh setup`
# alone builds it. The chroot lives outside the repository, in
# $TPCONV_INTEROP_ROOT (default /var/cache/tpconv-interop/forky); a stamp file
# inside says it is complete, so a rerun reuses it and a half-built one is
# rebuilt. Needs root (debootstrap, chroot, bind mounts).

IROOT=${TPCONV_INTEROP_ROOT:-/var/cache/tpconv-interop/forky}
IMIRROR=${TPCONV_INTEROP_MIRROR:-http://deb.debian.org/debian}
ISTAMP=.tpconv-interop-complete
IMARK=.tpconv-interop-root
IPKGS="python3-torch python3-safetensors python3-transformers python3-accelerate python3-numpy llama.cpp-tools python3-gguf python3-sentencepiece python3-compressed-tensors"
IAPT="-o Acquire::Check-Valid-Until=false -o APT::Install-Recommends=false -o Dpkg::Use-Pty=0"

# The bind mounts, in mount order; unmounted in reverse.
interop_mount() {
	r=$1
	for m in proc dev dev/shm; do
		mkdir -p "$r/$m"
		mountpoint -q "$r/$m" && continue
		case $m in
		proc) mount -t proc proc "$r/proc" ;;
		*) mount --bind "/$m" "$r/$m" ;;
		esac || return 1
	done
}

# Unmount every mount under $1 (deepest first), whatever mounted it, so an
# interrupted run leaves nothing behind and `rm -rf` never reaches /dev.
interop_umount() {
	r=$(readlink -f "$1" 2>/dev/null) || return 0
	for mp in $(awk -v r="$r" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts | sort -r); do
		umount "$mp" 2>/dev/null || umount -l "$mp"
	done
}

# A long step (debootstrap, apt, the Python steps) runs in its own session and
# the script waits for it, so that a signal to the script reaches it at once:
# the traps call interop_stop, which ends that process group.
ICHILD=
interop_run() {
	setsid "$@" &
	ICHILD=$!
	wait "$ICHILD"
	irc=$?
	ICHILD=
	return $irc
}
interop_stop() {
	[ -n "$ICHILD" ] || return 0
	kill -TERM "-$ICHILD" 2>/dev/null
	wait "$ICHILD" 2>/dev/null
	ICHILD=
}

interop_ready() {
	[ -f "$IROOT/$ISTAMP" ] && [ "$(cat "$IROOT/$ISTAMP")" = "$IPKGS" ]
}

# Build the chroot unless a complete one is there.
interop_setup() {
	if interop_ready; then
		echo "interop: reusing $IROOT"
		return 0
	fi
	command -v debootstrap >/dev/null || {
		echo "interop: installing debootstrap"
		apt-get install -y -q debootstrap >/dev/null 2>&1 ||
			{ apt-get update -q && apt-get install -y -q debootstrap; } || return 1
	}
	t0=$(date +%s)
	interop_umount "$IROOT"
	if [ -e "$IROOT" ]; then
		# only a folder this script made (its marker) or an empty one is removed
		if [ ! -f "$IROOT/$IMARK" ] && [ -n "$(ls -A "$IROOT" 2>/dev/null)" ]; then
			echo "interop: $IROOT exists and is not a chroot this script made; remove it or set INTEROP_ROOT" >&2
			return 1
		fi
		echo "interop: $IROOT is incomplete; rebuilding"
		rm -rf --one-file-system "$IROOT" || return 1
	fi
	mkdir -p "$IROOT" && : >"$IROOT/$IMARK" || return 1
	trap 'interop_stop; interop_umount "$IROOT"' EXIT
	trap 'interop_stop; interop_umount "$IROOT"; exit 130' INT
	trap 'interop_stop; interop_umount "$IROOT"; exit 143' TERM HUP
	echo "interop: debootstrap forky into $IROOT"
	interop_run debootstrap --variant=minbase forky "$IROOT" "$IMIRROR" \
		/usr/share/debootstrap/scripts/sid || return 1
	interop_mount "$IROOT" || return 1
	echo "deb $IMIRROR forky main" >"$IROOT/etc/apt/sources.list"
	echo "interop: apt-get install $IPKGS"
	interop_run chroot "$IROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		DEBIAN_FRONTEND=noninteractive sh -c \
		"apt-get $IAPT update -q && apt-get $IAPT install -y -q $IPKGS && apt-get clean" || return 1
	interop_umount "$IROOT"
	trap - EXIT INT TERM HUP
	echo "$IPKGS" >"$IROOT/$ISTAMP"
	echo "interop: chroot ready in $(($(date +%s) - t0)) s"
}

if [ "${0##*/}" = chroot.sh ]; then
	case ${1:-} in
	setup) interop_setup ;;
	umount) interop_umount "$IROOT" ;;
	*) echo "usage: chroot.sh setup|umount" >&2; exit 2 ;;
	esac
fi
