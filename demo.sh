#!/usr/bin/env bash
# The main job on the bundled example (tests/data: a tiny LLaMA written by real
# torch with tests/data/make_tiny.py, and its config.json): inspect, convert,
# shard for 2-way tensor parallelism, verify the set against the original,
# merge it back byte for byte, diff. Runs in a temporary folder, removed on exit.
# usage: demo.sh path/to/tpconv
set -eu
TPCONV=$(realpath "${1:-build/cmd/tpconv}")
DATA=$(cd "$(dirname "$0")/tests/data" && pwd)
OUT=$(mktemp -d "${TMPDIR:-/tmp}/tpconv-demo-XXXXXX")
trap 'rm -rf "$OUT"' EXIT
cd "$OUT"
cp "$DATA/tiny_llama.pt" "$DATA/tiny_llama.safetensors" "$DATA/config.json" .
if [ -t 1 ]; then say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }; else say() { printf '\n$ %s\n' "$*"; }; fi
run() { say "$*"; "$@"; }
tpconv() { "$TPCONV" "$@"; }

echo "# in $OUT: tiny_llama.pt (torch.save), tiny_llama.safetensors (the same tensors), config.json"
run tpconv inspect tiny_llama.pt
run tpconv convert tiny_llama.pt -o model.safetensors -v
run tpconv convert model.safetensors -o hf/ --max-shard-size 150K -v
run tpconv shard model.safetensors --preset llama --tp 2 --config config.json -o tp2/ -v
run ls -l tp2
run tpconv verify --reference tiny_llama.pt --shards tp2/
run tpconv merge tp2/ -o merged.safetensors -v
run cmp tiny_llama.safetensors merged.safetensors
echo "byte-identical: torch -> safetensors -> 2 ranks -> merged is the bundled safetensors file"
run tpconv diff tiny_llama.pt hf/
echo
echo "demo: done"
