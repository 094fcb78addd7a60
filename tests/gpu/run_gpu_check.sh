#!/usr/bin/env bash
# The whole GPU check, for a machine with NVIDIA GPUs (not run by CI, which
# has none): build with the CUDA + NCCL module and MPI, then verify the tiny
# models' shard sets with --device cuda - one process driving every local GPU
# (threads + ncclCommInitAll; with more ranks than GPUs the ranks share them
# and keep host collectives) and, when mpirun exists, one process per GPU
# (ncclUniqueId broadcast over MPI) - correct sets must pass within the fp32
# tolerances and broken ones fail with exit 1. Also runs compute-sanitizer's
# memcheck on one set when it is installed. Last, the CLI tests that call
# `tpconv verify` (MoE, expert parallelism, DeepSeek, DiT, dequantized sets, the
# CLI's own) run with every verify on the GPU.
# usage: tests/gpu/run_gpu_check.sh [BUILD_DIR]   (from the repository root)
# A BUILD_DIR without build.ninja is taken as prebuilt (cmd/tpconv,
# tests/verify/verify_driver, verify/tpconv_cuda.so). PY names a python with torch.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$SRC/build-gpu}
. "$SRC/tests/lib/tap.sh"
notok() { bad "$*"; }
command -v nvidia-smi >/dev/null && nvidia-smi -L
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$NGPU" -ge 1 ] || { echo "1..0 # SKIP no NVIDIA GPU visible"; exit 0; }
if [ ! -f "$BUILD/build.ninja" ] && [ ! -x "$BUILD/tests/verify/verify_driver" ]; then
  meson setup "$BUILD" -Dcuda=enabled -Dmpi=auto -Dslow_tests=false >/dev/null || { echo "Bail out! meson setup"; exit 1; }
fi
if [ -f "$BUILD/build.ninja" ]; then ninja -C "$BUILD" >/dev/null || { echo "Bail out! build"; exit 1; }; fi
[ -f "$BUILD/verify/tpconv_cuda.so" ] || { echo "Bail out! no tpconv_cuda.so"; exit 1; }
DRIVER=$BUILD/tests/verify/verify_driver
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PY=${PY:-/usr/bin/python3}
$PY "$SRC/tests/shard/make_models.py" "$WORK" 0 >/dev/null && $PY "$SRC/tests/verify/make_fused.py" "$WORK" 0 >/dev/null ||
  { echo "Bail out! cannot make the models (needs torch)"; exit 1; }
cd "$WORK"
tps="1 2 4 8" # tp > GPUs: shared GPUs, host collectives; tp <= GPUs: NCCL
for m in llama gpt2 llama-fused llama-bf16 gpt-neox dit flux; do
  p=$m; case $m in llama-*) p=llama ;; flux) p=dit ;; esac
  for tp in $tps; do
    if "$DRIVER" --cuda --ref $m/model.safetensors --config $m/config.json --preset $p --tp $tp -q > out.txt 2>&1; then
      ok "cuda $m tp $tp: $(tail -n 1 out.txt)"
    else notok "cuda $m tp $tp"; sed 's/^/#   /' out.txt | head -n 30; fi
  done
done
"$DRIVER" --cuda --ref gpt2/model.safetensors --config gpt2/config.json --preset gpt2 --tp 4 -q --mutate naive-qkv > out.txt 2>&1
rc=$?
[ $rc = 1 ] && grep -q c_attn out.txt && ok "cuda naive-qkv gpt2 tp 4 fails" || notok "cuda naive-qkv: exit $rc"
if command -v compute-sanitizer >/dev/null; then
  compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 "$DRIVER" --cuda --ref gpt2/model.safetensors \
    --config gpt2/config.json --preset gpt2 --tp 2 -q > cs.txt 2>&1 && ok "compute-sanitizer memcheck gpt2 tp 2" ||
    { notok "compute-sanitizer memcheck"; tail -n 30 cs.txt | sed 's/^/#   /'; }
fi
tp=$NGPU; [ "$tp" -gt 8 ] && tp=8
if command -v mpirun >/dev/null && [ "$tp" -ge 2 ]; then
  out=$(mpirun --allow-run-as-root -np $tp "$DRIVER" --mpi --cuda --ref llama/model.safetensors \
        --config llama/config.json --preset llama --tp $tp -q 2>&1)
  rc=$?
  [ $rc = 0 ] && ok "mpirun -np $tp --device cuda llama" || { notok "mpirun cuda: exit $rc"; sed 's/^/#   /' <<< "$out" | head -n 30; }
fi
# The CLI tests that call tpconv verify, each verify on the GPU: a wrapper adds
# --device cuda (the tests' own python is /usr/bin/python3, which needs torch).
TPCONV=$BUILD/cmd/tpconv
printf '#!/bin/sh\nif [ "$1" = verify ]; then shift; exec "%s" verify --device cuda "$@"; fi\nexec "%s" "$@"\n' \
  "$TPCONV" "$TPCONV" > "$WORK/tpconv"
chmod +x "$WORK/tpconv"
for t in shard/moe_test.sh shard/ep_test.sh shard/deepseek_test.sh shard/dit_test.sh quant/shard_dequant_test.sh \
  verify/cli_test.sh; do
  mkdir -p "$WORK/t" && (cd "$WORK/t" && bash "$SRC/tests/$t" "$WORK/tpconv" "$SRC") > tap.txt 2>&1
  rc=$?
  pass=$(grep -c '^ok' tap.txt) fail=$(grep -c '^not ok' tap.txt)
  if [ $rc = 0 ] && [ "$fail" = 0 ] && [ "$pass" -gt 0 ]; then ok "$t with verify --device cuda: $pass checks"
  else notok "$t with verify --device cuda: exit $rc, $fail of $((pass + fail)) failed"; grep -A6 '^not ok' tap.txt | head -n 40 | sed 's/^/#   /'; fi
  rm -rf "$WORK/t"
done
echo "1..$n"
[ "$failed" = 0 ]
