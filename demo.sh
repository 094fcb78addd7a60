#!/usr/bin/env bash
# The main job on the bundled example (tests/data, made by real torch with
# tests/data/make_tiny.py): inspect, convert to HF shards and back, check.
# usage: demo.sh path/to/tpconv
set -eu
TPCONV=${1:-build/cmd/tpconv}
cd "$(dirname "$0")"
OUT=$(mktemp -d "${TMPDIR:-/tmp}/tpconv-demo-XXXXXX")
trap 'rm -rf "$OUT"' EXIT
if [ -t 1 ]; then say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }; else say() { printf '\n$ %s\n' "$*"; }; fi
run() { say "$*"; "$@"; }

run "$TPCONV" inspect tests/data/tiny_llama.safetensors
run "$TPCONV" convert tests/data/tiny_llama.safetensors -o "$OUT/hf" --max-shard-size 150K -v
run ls -l "$OUT/hf"
run "$TPCONV" convert "$OUT/hf" -o "$OUT/back.safetensors" -v
run cmp tests/data/tiny_llama.safetensors "$OUT/back.safetensors"
echo "demo: single -> HF shards -> single is byte-identical"
if "$TPCONV" --help | grep -q '^Formats read.* torch'; then
  run "$TPCONV" inspect tests/data/tiny_llama.pt
  run "$TPCONV" convert tests/data/tiny_llama.pt -o "$OUT/from_torch.safetensors" -v
  run "$TPCONV" inspect --hash "$OUT/from_torch.safetensors"
fi
echo "demo: done"
