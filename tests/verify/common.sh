# Shared by the verify test scripts: the tiny models (real torch) and the TAP
# harness (tests/lib/tap.sh; notok is its bad). Sourced; needs DRIVER and SRC set.
PY=${TPC_PY:-/usr/bin/python3}
. "$SRC/tests/lib/tap.sh"
notok() { bad "$*"; }
# make_models WORK: every preset's tiny model (tests/shard/make_models.py) and
# the fused and bf16 LLaMA variants (make_fused.py), seed printed
make_models() {
  if ! $PY -c 'import torch' 2>/dev/null; then
    echo "1..0 # SKIP real torch ($PY) is not installed"
    exit 0
  fi
  $PY "$SRC/tests/shard/make_models.py" "$1" "${SEED:-0}" >/dev/null &&
    $PY "$SRC/tests/verify/make_fused.py" "$1" "${SEED:-0}" >/dev/null || {
    echo "1..0 # SKIP cannot make the test models"; exit 0; }
  echo "# models made with seed ${SEED:-0}"
}
# preset of a model folder (make_fused.py's LLaMA variants name
# Phi3ForCausalLM: Phi-3's record, whose partial rotary LLaMA's has not)
preset_of() { case "$1" in llama-fused|llama-bf16) echo phi3 ;; llama-*) echo llama ;; flux) echo dit ;; *) echo "$1" ;; esac; }
