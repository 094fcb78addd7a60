#!/usr/bin/env bash
# `tpconv verify` end to end on real rank files: every preset's tiny model
# sharded by `tpconv shard` at tp 2, 4 and 8 passes (exit 0); a flipped bit in
# a rank file fails (exit 1) naming the tensor and rank; a missing rank file is
# bad input (3); --device cuda without a GPU is exit 5; under mpirun the
# report equals the threads backend's bit for bit; usage errors are exit 2.
# usage: cli_test.sh TPCONV SRC
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/verify/common.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
make_models "$WORK"
cd "$WORK"
for m in llama gpt2 gpt-neox bert libai dalle2 llama-fused llama-bf16; do
  for tp in 2 4 8; do
    rm -rf s
    if ! "$TPCONV" shard $m/model.safetensors --config $m/config.json --preset "$(preset_of $m)" --tp $tp -o s -q \
        > out.txt 2>&1; then
      notok "$m tp $tp: tpconv shard failed"; sed 's/^/#   /' out.txt | head; continue
    fi
    if "$TPCONV" verify --reference $m/model.safetensors --shards s -q > out.txt 2>&1; then
      ok "$m tp $tp: $(tail -n 1 out.txt | sed 's/^# //')"
    else
      notok "$m tp $tp: verify exit $?"; sed 's/^/#   /' out.txt | head -n 20
    fi
  done
done
# the reference as shard read it: --select's subtree, renamed by the same rules
# (the set and remap options are shard's and diff's table)
$PY -c 'import sys, torch; torch.save({"model": torch.load(sys.argv[1]), "step": 3}, sys.argv[2])' llama.pt nested.pt
rm -rf sn && "$TPCONV" shard nested.pt --select model --config llama/config.json --preset llama --tp 2 -o sn -q
"$TPCONV" verify --reference nested.pt --select model --shards sn -q > out.txt 2>&1
rc=$?
"$TPCONV" verify --reference nested.pt --shards sn -q > out2.txt 2>&1
rc2=$?
[ $rc = 0 ] && [ $rc2 != 0 ] && ok "verify --select model: the subtree the set was sharded from passes (the whole file does not, exit $rc2)" ||
  { notok "verify --select: exit $rc / $rc2"; sed 's/^/#   /' out.txt out2.txt | head; }
"$TPCONV" convert llama/model.safetensors -o pre.safetensors --add-prefix module. -q -f
rm -rf sp && "$TPCONV" shard pre.safetensors --strip-prefix module. --config llama/config.json --preset llama --tp 2 -o sp -q
"$TPCONV" verify --reference pre.safetensors --strip-prefix module. --shards sp -q > out.txt 2>&1
rc=$?
"$TPCONV" verify --reference pre.safetensors --shards sp -q > out2.txt 2>&1
rc2=$?
[ $rc = 0 ] && [ $rc2 = 3 ] && ok "verify --strip-prefix module.: the reference renamed as shard renamed it passes (without: exit 3)" ||
  { notok "verify with rules: exit $rc / $rc2"; sed 's/^/#   /' out.txt out2.txt | head; }
# --dtype bf16 (issue 41 item 9): the reference cast as the help says, so a set
# sharded from the bf16 conversion passes against the f32 model (it failed every check)
"$TPCONV" convert llama/model.safetensors --dtype bf16 -o bf16.safetensors -q -f
rm -rf sb && "$TPCONV" shard bf16.safetensors --config llama/config.json --preset llama --tp 2 -o sb -q
"$TPCONV" verify --reference llama/model.safetensors --dtype bf16 --shards sb -q > out.txt 2>&1
rc=$?
"$TPCONV" verify --reference llama/model.safetensors --shards sb -q > out2.txt 2>&1
rc2=$?
[ $rc = 0 ] && [ $rc2 = 1 ] && ok "verify --dtype bf16: the reference cast to bf16 passes a bf16 set (without: exit 1)" ||
  { notok "verify --dtype bf16: exit $rc / $rc2"; sed 's/^/#   /' out.txt out2.txt | head; }
"$TPCONV" verify --reference pre.safetensors --strip-prefix module. --shards sp --pp 2 > out.txt 2>&1
rc=$?
[ $rc = 2 ] && grep -q "pp 2, but the manifest says pp 1" out.txt && ok "verify --pp that the manifest contradicts: exit 2" ||
  { notok "verify --pp: exit $rc"; sed 's/^/#   /' out.txt | head; }
# a llama tp 4 set, one bit of one rank file flipped
rm -rf s
"$TPCONV" shard llama/model.safetensors --config llama/config.json --preset llama --tp 4 -o s -q
$PY - s/model_tp01_pp00.safetensors <<'PYEOF'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
b[8 + n + h['model.layers.1.mlp.up_proj.weight']['data_offsets'][0] + 41] ^= 0x40
open(p, 'wb').write(b)
PYEOF
"$TPCONV" verify --reference llama/model.safetensors --shards s -q --junit r.xml --json r.json > out.txt 2>&1
rc=$?
if [ $rc = 1 ] && grep -q 'structure  model.layers.1.mlp.up_proj.weight' out.txt && grep -q 'rank 1' out.txt; then
  ok "a flipped bit: exit 1, naming up_proj and rank 1"
else notok "a flipped bit: exit $rc"; sed 's/^/#   /' out.txt | head; fi
"$TPCONV" verify --reference llama/model.safetensors --shards s > out.txt 2> err.txt
[ $? = 1 ] && grep -Eq '^tpconv: verify: FAIL: [0-9]+ of [0-9]+ checks failed \(the first: structure model.layers.1.mlp.up_proj.weight\), [0-9]+ tensors, 2 layers, max rel err' err.txt &&
  ok "a flipped bit: the summary says FAIL and names the first failing check" || notok "FAIL summary: $(head -c 300 err.txt)"
if ! command -v xmllint >/dev/null || xmllint --noout r.xml; then ok "JUnit XML of a failing run is well-formed"
else notok "JUnit XML"; fi
grep -q '<failure type="mismatch"' r.xml && ok "JUnit XML has the failure" || notok "JUnit XML lacks the failure"
$PY -c 'import json,sys; r=json.load(open("r.json")); assert not r["ok"] and r["failed"] >= 1' && ok "JSON: ok false, failures counted" || notok "JSON"
rm s/model_tp02_pp00.safetensors
"$TPCONV" verify --reference llama/model.safetensors --shards s > out.txt 2>&1
rc=$?
[ $rc = 3 ] && grep -q "model_tp02_pp00.safetensors" out.txt && ok "missing rank file: exit 3 naming it" || notok "missing rank file: exit $rc"
# ... and with --junit the failure is a test case CI shows (no file was written before)
rm -f miss.xml
"$TPCONV" verify --reference llama/model.safetensors --shards s --junit miss.xml > out.txt 2>&1
rc=$?
[ $rc = 3 ] && grep -q '<failure' miss.xml && grep -q 'model_tp02_pp00.safetensors' miss.xml &&
  { ! command -v xmllint >/dev/null || xmllint --noout miss.xml; } &&
  ok "missing rank file with --junit: exit 3, the failure written as a test case" || notok "missing rank file --junit: exit $rc, $(head -c 300 miss.xml 2>&1)"
# an unwritable report path fails at once (exit 4), before the check runs
for opt in --json --junit; do
  "$TPCONV" verify --reference llama/model.safetensors --shards s $opt no-such-dir/r.out > out.txt 2> err.txt
  rc=$?
  [ $rc = 4 ] && grep -q "no-such-dir/r.out" err.txt && ! grep -q "model_tp02_pp00" err.txt &&
    ok "verify $opt to an unwritable path: exit 4 before the check (the missing rank file not reached)" || notok "verify $opt unwritable: exit $rc, $(head -c 300 err.txt)"
  "$TPCONV" diff llama/model.safetensors s $opt no-such-dir/r.out > out.txt 2> err.txt
  rc=$?
  [ $rc = 4 ] && grep -q "no-such-dir/r.out" err.txt && ! grep -q "model_tp02_pp00" err.txt &&
    ok "diff $opt to an unwritable path: exit 4 before the comparison" || notok "diff $opt unwritable: exit $rc, $(head -c 300 err.txt)"
done
rm -rf s
"$TPCONV" shard gpt2/model.safetensors --config gpt2/config.json --preset gpt2 --tp 2 -o s -q
"$TPCONV" verify --reference gpt2/model.safetensors --shards s --device cuda > out.txt 2>&1
rc=$?
if [ $rc = 0 ]; then ok "--device cuda ran (a GPU is visible)"
elif [ $rc = 5 ] && grep -qi cuda out.txt; then ok "--device cuda without a GPU: exit 5 ($(head -c 120 out.txt))"
else notok "--device cuda: exit $rc"; fi
"$TPCONV" verify --reference gpt2/model.safetensors > out.txt 2>&1
[ $? = 2 ] && ok "usage: missing --shards is exit 2" || notok "usage exit"
"$TPCONV" verify --reference gpt2/model.safetensors --shards s --checks bogus > out.txt 2>&1
[ $? = 2 ] && grep -q "'bogus'" out.txt && ok "usage: unknown check quoted, exit 2" || notok "unknown check"
"$TPCONV" verify --help | grep -q '^usage: tpconv verify' && ok "verify --help" || notok "verify --help"
# a mistyped preset is a usage error with the nearest name (it exited 254 in silence)
"$TPCONV" verify --reference gpt2/model.safetensors --shards s --preset gtp2 > out.txt 2>&1
[ $? = 2 ] && grep -q "did you mean 'gpt2'" out.txt && ok "usage: unknown --preset says the nearest name, exit 2" || notok "verify --preset typo: $(head -c 200 out.txt)"
# '-' is standard output for --json and --junit, as in diff (a file named '-' was written)
"$TPCONV" verify --reference gpt2/model.safetensors --shards s --json - > out.json 2>/dev/null
[ $? = 0 ] && [ ! -e ./- ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["tpconv_verify"]' out.json &&
  ok "--json - writes the JSON report to stdout, no file '-'" || notok "verify --json -: $(head -c 200 out.json)"
"$TPCONV" verify --reference gpt2/model.safetensors --shards s --junit - > out.xml 2>/dev/null
[ $? = 0 ] && [ ! -e ./- ] && head -1 out.xml | grep -q '^<?xml' && ok "--junit - writes the JUnit report to stdout" || notok "verify --junit -"
"$TPCONV" verify --reference gpt2/model.safetensors --shards s --json - --junit - > out.txt 2>&1
[ $? = 2 ] && ok "--json - with --junit - is a usage error" || notok "both reports to stdout"
# stderr: one summary line on success (it said nothing without -v), none with -q;
# the progress line on a terminal (script gives it one) or with --progress
"$TPCONV" verify --reference gpt2/model.safetensors --shards s > out.txt 2> err.txt
rc=$?
if [ $rc = 0 ] && [ "$(wc -l < err.txt)" = 1 ] &&
   grep -Eq '^tpconv: verify: PASS: [0-9]+ checks, [0-9]+ tensors, 2 layers, max rel err [0-9.e+-]+ \(tp 2, [0-9.]+ s\)$' err.txt &&
   grep -q '^# [0-9]* passed, 0 failed' out.txt; then ok "verify prints one summary line on stderr: $(cat err.txt)"
else notok "verify summary: exit $rc"; sed 's/^/#   /' err.txt | head -5; fi
"$TPCONV" verify --reference gpt2/model.safetensors --shards s -q > out.txt 2> err.txt
[ $? = 0 ] && [ ! -s err.txt ] && ok "verify -q: no summary, no progress" || notok "verify -q stderr: $(head -c 200 err.txt)"
"$TPCONV" verify --reference gpt2/model.safetensors --shards s --progress > out.txt 2> err.txt
[ $? = 0 ] && grep -Eq '^verify: ([0-9]+) / \1 steps \(100%\)$' err.txt && ! grep -q $'\r' err.txt &&
  ok "verify --progress on a pipe: plain lines ($(grep steps err.txt | tail -1))" || notok "verify --progress: $(head -c 300 err.txt)"
if command -v script >/dev/null; then
  script -qec "'$TPCONV' verify --reference gpt2/model.safetensors --shards s > out.txt" /dev/null > tty.txt 2>&1
  grep -q $'\rverify: [0-9]* / [0-9]* steps' tty.txt && grep -q 'tpconv: verify: PASS' tty.txt &&
    ok "verify on a terminal: a progress line redrawn with \\r, then the summary" || notok "verify progress on a tty: $(od -c tty.txt | head -5)"
fi

if command -v mpirun >/dev/null && "$TPCONV" verify --reference gpt2/model.safetensors --shards s --seed 5 --json t.json -q >/dev/null; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  mpirun --allow-run-as-root --oversubscribe -np 2 "$TPCONV" verify --reference gpt2/model.safetensors --shards s \
    --seed 5 --json m.json -q > out.txt 2>&1
  rc=$?
  if [ $rc = 0 ] && $PY - m.json t.json <<'PYEOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["backend"] == "mpi" and b["backend"] == "threads"
for x, y in zip(a["checks"], b["checks"]):
    for k in ("tensor", "max_abs", "max_rel", "digest", "status"):
        assert x[k] == y[k], (x["tensor"], k)
PYEOF
  then ok "mpirun -np 2 tpconv verify: the threads backend's report, bit for bit"
  elif grep -q 'without MPI' out.txt; then ok "# SKIP tpconv built without MPI"
  else notok "mpirun tpconv verify: exit $rc"; sed 's/^/#   /' out.txt | head; fi
fi
# the data path: rank files and the reference are read where they are mapped,
# never copied out of the page cache (a read(2) of every byte was 4.4 times
# the set and the reference before), and a rank tensor's checksum is fed by
# the comparison on the way; the recorded checksums are still checked
rm -rf s
"$TPCONV" shard llama/model.safetensors --config llama/config.json --preset llama --tp 4 -o s -q
rchar_of() { # exit status and read(2) bytes of a command, from its /proc/PID/io before it is reaped
  $PY -c '
import os, subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
io = dict(l.split(": ") for l in open("/proc/%d/io" % p.pid).read().splitlines())
print(p.wait(), io["rchar"])' "$@"
}
size=$(cat llama/model.safetensors s/*.safetensors | wc -c)
read -r _ start < <(rchar_of "$TPCONV" verify --help) # what starting reads (a sanitizer's /proc files)
read -r rc rchar < <(rchar_of "$TPCONV" verify --reference llama/model.safetensors --shards s -q)
[ "$rc" = 0 ] && [ $((rchar - start)) -lt $((size / 4)) ] &&
  ok "verify reads the set and the reference where they are mapped: $((rchar - start)) bytes read(2) for $size bytes" ||
  notok "verify read(2) $((rchar - start)) bytes beyond its start for a $size-byte set and reference (exit $rc)"
cp -r s s_sum
$PY - s_sum/tpconv-manifest.json <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1]))
t = [t for t in m["tensors"] if t["name"] == "model.layers.1.mlp.up_proj.weight"][0]
alg = m["checksum"]
h = t["rank_" + alg][2]; t["rank_" + alg][2] = ("0" if h[0] != "0" else "1") + h[1:]
t = [t for t in m["tensors"] if t["name"] == "model.layers.0.mlp.down_proj.weight"][0]
h = t[alg]; t[alg] = ("0" if h[0] != "0" else "1") + h[1:]
json.dump(m, open(sys.argv[1], "w"))
PYEOF
"$TPCONV" verify --reference llama/model.safetensors --shards s_sum --checks structure > out.txt 2>&1
rc=$?
[ $rc = 1 ] && grep -q "rank 2: xxh3-128 of 'model.layers.1.mlp.up_proj.weight' differs from the recorded one" out.txt &&
  ok "a recorded rank checksum changed (a tensor hashed on the way): exit 1 naming it" ||
  notok "rank checksum hashed on the way: exit $rc $(grep FAIL out.txt | head -3)"
grep -q "the reference 'model.layers.0.mlp.down_proj.weight' differs from the recorded xxh3-128" out.txt &&
  ok "a recorded reference checksum changed: named" || notok "reference checksum: $(grep FAIL out.txt | head -3)"
# verify's OpenMP threads sleep while they wait (a spinning one took a third
# of the CPU time from the ranks): the running process has OMP_WAIT_POLICY
# passive, unless the environment chose a policy
env_of() { # POLICY CMD...: CMD run with OMP_WAIT_POLICY=POLICY ("unset": none, nor GOMP_SPINCOUNT); the policy its /proc/PID/environ shows
  $PY -c '
import os, subprocess, sys, time
env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
if sys.argv[1] != "unset":
    env["OMP_WAIT_POLICY"] = sys.argv[1]
p = subprocess.Popen(sys.argv[2:], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
seen = "unset"
while p.poll() is None:
    try:
        w = [e for e in open("/proc/%d/environ" % p.pid, "rb").read().split(b"\0") if e.startswith(b"OMP_WAIT_POLICY=")]
    except OSError:
        break
    if w:
        seen = w[0].split(b"=", 1)[1].decode()
        break
    time.sleep(0.001)
p.wait()
print(seen)' "$@"
}
w=$(env_of unset "$TPCONV" verify --reference llama/model.safetensors --shards s --tokens 64 -q)
[ "$w" = passive ] && ok "verify runs with OMP_WAIT_POLICY=passive" || notok "verify's OMP_WAIT_POLICY: $w"
w=$(env_of active "$TPCONV" verify --reference llama/model.safetensors --shards s --tokens 64 -q)
[ "$w" = active ] && ok "verify keeps an OMP_WAIT_POLICY the environment sets" || notok "OMP_WAIT_POLICY=active became $w"
# the single pass: the layer, block and model checks read each weight of a
# dense model's layers once, on rank 0's slice and on the reference, not once
# per check (three times before); the embedding and head are read more often,
# and are small here (a vocabulary of 256)
mkdir -p mid
$PY - mid <<'PYEOF'
import sys, json, torch, collections
h, inter, L, V, hd, nh, kvh = 512, 1408, 2, 256, 128, 4, 2
torch.manual_seed(3)
sd = collections.OrderedDict()
sd['model.embed_tokens.weight'] = torch.randn(V, h) * 0.02
for i in range(L):
    p = 'model.layers.%d.' % i
    for n, r, c in (('self_attn.q_proj', nh * hd, h), ('self_attn.k_proj', kvh * hd, h), ('self_attn.v_proj', kvh * hd, h),
                    ('self_attn.o_proj', h, nh * hd), ('mlp.gate_proj', inter, h), ('mlp.up_proj', inter, h),
                    ('mlp.down_proj', h, inter)):
        sd[p + n + '.weight'] = torch.randn(r, c) * 0.02
    sd[p + 'input_layernorm.weight'] = torch.ones(h)
    sd[p + 'post_attention_layernorm.weight'] = torch.ones(h)
sd['model.norm.weight'] = torch.ones(h)
sd['lm_head.weight'] = torch.randn(V, h) * 0.02
torch.save(sd, sys.argv[1] + '/model.bin')
json.dump({"hidden_size": h, "intermediate_size": inter, "num_attention_heads": nh, "num_key_value_heads": kvh,
           "head_dim": hd, "num_hidden_layers": L, "vocab_size": V}, open(sys.argv[1] + '/config.json', 'w'))
PYEOF
rm -rf s
"$TPCONV" shard mid/model.bin --config mid/config.json --preset llama --tp 2 -o s -q &&
  "$TPCONV" verify --reference mid/model.bin --shards s --config mid/config.json --json m.json -q > out.txt 2>&1
rc=$?
read -r rd ref r0 < <(echo "$(sed -n 's/.*"weights_read": \([0-9]*\).*/\1/p' m.json) $(wc -c < mid/model.bin) \
  $(wc -c < s/model_tp00_pp00.safetensors)")
[ "$rc" = 0 ] && [ -n "$rd" ] && [ "$rd" -lt $(((ref + r0) * 5 / 4)) ] &&
  ok "verify's numeric checks read each weight once: $rd bytes for a $ref-byte reference and a $r0-byte rank 0 file" ||
  notok "verify's numeric checks read ${rd:-?} bytes for a $ref-byte reference and a $r0-byte rank 0 file (exit $rc)"
# a row-parallel rank tensor is compared with its column slice of the
# reference row by row where both are mapped: three changed elements of
# rank 2's down_proj found at their own indices
rm -rf s
"$TPCONV" shard mid/model.bin --config mid/config.json --preset llama --tp 4 -o s -q
$PY - s/model_tp02_pp00.safetensors <<'PYEOF'
import json, struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
t = json.loads(b[8:8 + n])['model.layers.1.mlp.down_proj.weight']
for r, c in ((3, 5), (3, 6), (100, t['shape'][1] - 1)):
    b[8 + n + t['data_offsets'][0] + 4 * (r * t['shape'][1] + c) + 2] ^= 0x10
open(sys.argv[1], 'wb').write(b)
PYEOF
"$TPCONV" verify --reference mid/model.bin --shards s --config mid/config.json --checks structure > out.txt 2>&1
rc=$?
[ $rc = 1 ] && grep -q "rank 2: 3 of 180224 elements differ from the reference slice" out.txt &&
  grep -q "rank 2 index 1061: " out.txt && grep -q "rank 2 index 1062: " out.txt && grep -q "rank 2 index 35551: " out.txt &&
  ok "three changed elements of a row-parallel rank tensor: exit 1, each at its index" ||
  { notok "a changed row-parallel rank tensor: exit $rc"; sed 's/^/#   /' out.txt | head; }
# a longrope rope (Phi-3's) is computed: the forward passes; lists of
# another length than the rotated pairs are refused by name, and a rope_type
# verify's forward does not compute ("su", which only Phi3Config reads as
# longrope) is refused by name, not rotated as a plain rope, while --checks
# without the forward still runs
rm -rf lr lb lu s && mkdir lr lb lu && cp llama/model.safetensors lr/ &&
  $PY - llama/config.json lr/config.json lb/config.json lu/config.json <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_scaling"] = {"rope_type": "longrope", "short_factor": [1.0, 1.5, 2.0, 4.0],
                     "long_factor": [1.0] * 4, "original_max_position_embeddings": 64}
json.dump(c, open(sys.argv[2], "w"))
c["rope_scaling"]["long_factor"] = [1.0] * 3
json.dump(c, open(sys.argv[3], "w"))
c["rope_scaling"] = {"rope_type": "su", "short_factor": [1.0] * 4, "long_factor": [1.0] * 4}
json.dump(c, open(sys.argv[4], "w"))
PYEOF
"$TPCONV" shard lr/model.safetensors --config lr/config.json --preset llama --tp 2 -o s -q > out.txt 2>&1
"$TPCONV" verify --reference lr/model.safetensors --config lr/config.json --shards s -q > out.txt 2>&1
rc=$?
"$TPCONV" verify --reference lr/model.safetensors --config lb/config.json --shards s > out2.txt 2>&1
rc2=$?
"$TPCONV" verify --reference lr/model.safetensors --config lu/config.json --shards s > out3.txt 2>&1
rc3=$?
"$TPCONV" verify --reference lr/model.safetensors --config lu/config.json --shards s --checks structure,layers -q > /dev/null 2>&1
rc4=$?
[ $rc = 0 ] && [ $rc2 = 3 ] && [ $rc3 = 3 ] && [ $rc4 = 0 ] &&
  grep -q "config.json's longrope short_factor has 4 entries and long_factor 3, not 4" out2.txt &&
  grep -q "config.json's rope_type 'su' is not one verify's forward computes" out3.txt &&
  ok "longrope: the forward passes, factor lists of the wrong length and rope_type 'su' refused by name (exit 3), the slice checks still pass" ||
  { notok "longrope: exit $rc / $rc2 / $rc3 / $rc4"; cat out.txt out2.txt out3.txt | sed 's/^/#   /' | head; }
echo "1..$n"
[ "$failed" = 0 ]
