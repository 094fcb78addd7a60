#!/usr/bin/env bash
# Correct shard sets of every preset's tiny model pass verify on the CPU
# threads backend at tp 2, 4 and 8; the JSON report parses and the JUnit XML
# validates (xmllint).
# usage: presets_test.sh VERIFY_DRIVER SRC
set -u
DRIVER=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/verify/common.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
make_models "$WORK"
cd "$WORK"
for m in llama gpt2 gpt-neox bert libai dalle2 dit flux llama-fused llama-bf16; do
  for tp in 2 4 8; do
    if "$DRIVER" --ref $m/model.safetensors --config $m/config.json --preset "$(preset_of $m)" --tp $tp -q \
        --json r.json --junit r.xml > out.txt 2>&1; then
      ok "$m tp $tp: $(tail -n 1 out.txt | sed 's/^# //')"
    else
      notok "$m tp $tp"; sed 's/^/#   /' out.txt | head -n 20
      continue
    fi
    # every check of the report passed, blocks and model present for llama/gpt2/gpt-neox/bert/libai
    # (nothing skipped), blocks for dit
    if $PY - "$m" r.json <<'PYEOF'
import json, sys
m, r = sys.argv[1], json.load(open(sys.argv[2]))
assert r["tpconv_verify"] == 1 and r["ok"] and r["failed"] == 0, r
kinds = {c["check"] for c in r["checks"]}
assert all(c["status"] == "pass" for c in r["checks"])
want = {"structure", "col", "row"}
assert r["skipped"] == 0, r["skipped"]
if m.startswith("llama") or m in ("gpt2", "gpt-neox", "bert", "libai"):
    want |= {"embed", "head", "mlp", "attn", "model"}
    top = [c for c in r["checks"] if c["check"] == "model"][0]["top1"]
    assert top[0] == top[1], top
if m in ("dit", "flux"):
    want |= {"mlp", "attn"}
assert want <= kinds, (want - kinds)
PYEOF
    then ok "$m tp $tp: JSON report complete"; else notok "$m tp $tp: JSON report"; fi
    if command -v xmllint >/dev/null; then
      if xmllint --noout r.xml 2>xml.err; then ok "$m tp $tp: JUnit XML well-formed"
      else notok "$m tp $tp: JUnit XML"; sed 's/^/#   /' xml.err; fi
    fi
  done
done
echo "1..$n"
[ "$failed" = 0 ]
