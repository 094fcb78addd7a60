#!/usr/bin/env bash
# CLI golden tests: stdout, stderr and exit status of the tpconv command.
# Emits TAP. usage: cli_test.sh TPCONV SRCDIR CORPUS
set -u
TPCONV=$(realpath "$1") SRC=$2 CORPUS=$(realpath "$3")
. "$SRC/tests/lib/tap.sh"
tmpdir
# run CMD...: sets rc, out, err
run() { "$@" >"$T/out" 2>"$T/err"; rc=$?; out=$(cat "$T/out"); err=$(cat "$T/err"); }
expect() { # desc rc-wanted [stderr-substring]
  local d=$1 want=$2 sub=${3:-}
  if [ "$rc" != "$want" ]; then bad "$d" "exit $rc, wanted $want" "stderr: $err"; return; fi
  if [ -n "$sub" ] && ! grep -qF -- "$sub" "$T/err"; then bad "$d" "stderr lacks: $sub" "stderr: $err"; return; fi
  ok "$d"
}

run "$TPCONV" --help;            expect "--help exits 0" 0; grep -q "Exit status" "$T/out" && ok "--help lists exit codes" || bad "--help lists exit codes"
run "$TPCONV" --version;         expect "--version" 0; [[ "$out" == tpconv\ * ]] && ok "--version prints the version" || bad "--version prints" "$out"
run "$TPCONV";                   expect "no command is a usage error" 2
run "$TPCONV" frobnicate;        expect "unknown command" 2 "unknown command 'frobnicate'"
for c in inspect convert; do
  run "$TPCONV" $c --help;       expect "$c --help exits 0" 0
  [ -s "$T/out" ] && [ ! -s "$T/err" ] && ok "$c --help goes to stdout" || bad "$c --help goes to stdout"
  run "$TPCONV" $c --bogus x;    expect "$c rejects unknown flags, quoted" 2 "unknown or incomplete option '--bogus'"
done
run "$TPCONV" inspect;           expect "inspect without PATH" 2 "missing PATH"
run "$TPCONV" convert "$CORPUS/safetensors/st_samples_B.safetensors"; expect "convert without -o" 2 "missing -o OUT"
run "$TPCONV" convert "$CORPUS/safetensors/st_samples_B.safetensors" -o "$T/x.weird"
expect "convert with an unknown output kind" 2 "cannot tell the output format"
expect "the unknown output kind names every output name the registry has" 2 "name it *.safetensors, *.pt, *.pth, *.bin, *.ckpt or *.gguf"
# the format lists of --help come from the format registry: every output format and the folder
for c in convert merge; do
  run "$TPCONV" $c --help
  miss=""; for w in safetensors torch dcp gguf folder '\*.pth' '\*.gguf'; do grep -q "^  $w \|$w" "$T/out" || miss="$miss $w"; done
  if [ $c = convert ]; then
    grep -q "^  ds-universal " "$T/out" || miss="$miss ds-universal"
    grep -q -- "--format NAME  *safetensors, torch, dcp, ds-universal or gguf" "$T/out" || miss="$miss --format-line"
  else # merge refuses ds-universal (an optimizer's state, not a model) as usage: not offered
    grep -q "ds-universal" "$T/out" && miss="$miss (ds-universal offered)"
    grep -q -- "--format NAME  *safetensors, torch, dcp or gguf" "$T/out" || miss="$miss --format-line"
  fi
  [ -z "$miss" ] && ok "$c --help names every output format it writes" || bad "$c --help names every output format it writes" "missing:$miss"
done
run "$TPCONV" convert "$CORPUS/safetensors/st_samples_B.safetensors" -o "$T/shards" --max-shard-size 12Q
expect "bad size suffix" 2 "'12Q' is not a size"

# golden inspect output (run from the corpus dir so paths are relative)
(cd "$CORPUS/safetensors" && "$TPCONV" inspect st_samples_overall.safetensors) >"$T/golden" 2>&1
if diff -u "$SRC/tests/cli/golden/inspect_overall.txt" "$T/golden" >"$T/diff"; then ok "inspect golden output"; else bad "inspect golden output" "$(cat "$T/diff")"; fi
(cd "$CORPUS/safetensors" && "$TPCONV" inspect --json candle_jfk-codes.safetensors) >"$T/golden" 2>&1
if diff -u "$SRC/tests/cli/golden/inspect_jfk.json" "$T/golden" >"$T/diff"; then ok "inspect --json golden output"; else bad "inspect --json golden output" "$(cat "$T/diff")"; fi
if /usr/bin/env python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/golden" 2>/dev/null; then ok "inspect --json is valid JSON"; else bad "inspect --json is valid JSON"; fi

# handcrafted corrupt files: exit 3, file and tensor named, nothing written, no temporaries
python3 "$SRC/tests/safetensors/make_bad_safetensors.py" "$T/bad" > "$T/cases" || bad "generate bad files"
while IFS=$'\t' read -r f msg tensor; do
  run "$TPCONV" convert "$T/bad/$f" -o "$T/out_$f"
  if [ "$rc" != 3 ]; then bad "bad $f: exit 3" "exit $rc" "$err"; continue; fi
  grep -qF -- "'$T/bad/$f'" "$T/err" || { bad "bad $f: names the file" "$err"; continue; }
  grep -qF -- "$msg" "$T/err" || { bad "bad $f: message" "wanted: $msg" "got: $err"; continue; }
  if [ -n "$tensor" ] && ! grep -qF -- "tensor '$tensor'" "$T/err"; then bad "bad $f: names tensor $tensor" "$err"; continue; fi
  if [ -e "$T/out_$f" ] || ls -a "$T" | grep -q '\.tpc-'; then bad "bad $f: nothing written"; continue; fi
  ok "bad $f: exit 3, named, nothing written"
done < "$T/cases"

# convert: single -> HF shards -> single is byte-identical to the first single output
IN="$CORPUS/safetensors/burn_examples__import-model-weights__weights__mnist.safetensors"
run "$TPCONV" convert "$IN" -o "$T/a.safetensors";                 expect "convert to single" 0
run "$TPCONV" convert "$T/a.safetensors" -o "$T/hf" --max-shard-size 600Ki; expect "convert to HF shards" 0
[ -f "$T/hf/model.safetensors.index.json" ] && [ -f "$T/hf/model-00001-of-00003.safetensors" ] && ok "HF shard names" || bad "HF shard names" "$(ls "$T/hf")"
run "$TPCONV" convert "$T/hf/model.safetensors.index.json" -o "$T/b.safetensors"; expect "convert index back to single" 0
cmp -s "$T/a.safetensors" "$T/b.safetensors" && ok "single -> sharded -> single is byte-identical" || bad "round trip byte-identical"
run "$TPCONV" convert "$T/hf" -o "$T/c.safetensors";              expect "convert a shard directory" 0
cmp -s "$T/a.safetensors" "$T/c.safetensors" && ok "directory input equals index input" || bad "directory input"
# refusals
run "$TPCONV" convert "$T/a.safetensors" -o "$T/b.safetensors";   expect "refuses to overwrite" 2 "use --force"
run "$TPCONV" convert "$T/a.safetensors" -o "$T/b.safetensors" -f; expect "--force overwrites" 0
run "$TPCONV" convert "$T/a.safetensors" -o "$T/a.safetensors" -f; expect "output equal to input is refused" 2 "also an input"
cmp -s "$T/a.safetensors" "$T/b.safetensors" && ok "input untouched after refusal" || bad "input untouched"
run "$TPCONV" convert "$T/missing.safetensors" -o "$T/m.safetensors"; expect "missing input" 3 "No such file"
run "$TPCONV" inspect "$CORPUS/negative/burn_src__pytorch__tests__reader__test_data__broken.pt"; [ "$rc" = 3 ] && ok "3-byte file refused with exit 3" || bad "broken.pt exit 3" "$rc $err"
# progress: forced on a non-terminal prints plain lines, never escape codes
run "$TPCONV" convert "$T/a.safetensors" -o "$T/p.safetensors" --progress
if [ "$rc" = 0 ] && grep -q "convert:" "$T/err" && ! grep -q $'\r\|\x1b' "$T/err"; then ok "--progress on a pipe: plain lines"; else bad "--progress" "$err"; fi
run "$TPCONV" convert "$T/a.safetensors" -o "$T/q.safetensors"
[ "$rc" = 0 ] && [ ! -s "$T/err" ] && ok "no progress on a pipe by default" || bad "quiet by default on a pipe" "$err"

# rough edges a new user hits (issue 16)
D="$SRC/tests/data"
run "$TPCONV" shard "$D/tiny_llama.safetensors" --preset lama --tp 2 -o "$T/typo"
expect "a mistyped preset is a usage error (2) with the nearest name" 2 "unknown preset 'lama' (did you mean 'llama'?"
[ ! -e "$T/typo" ] && ok "nothing written for a mistyped preset" || bad "nothing written for a mistyped preset"
run "$TPCONV" merge "$T/none" --preset lama -o "$T/m.safetensors"
expect "merge: a mistyped preset is a usage error (2)" 2 "did you mean 'llama'?"
run "$TPCONV" shard "$D/tiny_llama.safetensors" --preset llama --layout olso --tp 2 -o "$T/typo"
expect "an unknown layout is a usage error (2)" 2 "unknown --layout 'olso'"
run "$TPCONV" plan lama;          expect "plan: an unknown preset is a usage error (2)" 2 "did you mean 'llama'?"
# a model fact the split needs and nothing gives is a usage error (exit 2), as
# in the unfuse rules and the megatron layout (the plan's said 3)
mkdir -p "$T/nofacts" && cp "$D/tiny_llama.safetensors" "$T/nofacts/"
run "$TPCONV" shard "$T/nofacts/tiny_llama.safetensors" --preset llama --tp 2 -o "$T/nofacts/set"
expect "a missing model fact is exit 2, naming the tensor and the flags" 2 "head size is unknown; give --config config.json, --head-dim or --heads/--kv-heads"
# unknown names everywhere: the nearest known one (commands, options, layouts, rules presets)
run "$TPCONV" shrad x;            expect "a mistyped command says the nearest (2)" 2 "unknown command 'shrad' (did you mean 'shard'?"
run "$TPCONV" shard x --presett llama; expect "a mistyped option says the nearest (2)" 2 "unknown or incomplete option '--presett'; did you mean '--preset'?"
run "$TPCONV" shard x --tp;       expect "an option without its value says so (2)" 2 "option '--tp' needs a value"
run "$TPCONV" verify --referense x --shards y; expect "verify: a mistyped option says the nearest (2)" 2 "did you mean '--reference'?"
run "$TPCONV" shard "$D/tiny_llama.safetensors" --preset llama --layout vlm --tp 2 -o "$T/typo"
expect "a mistyped layout says the nearest (2)" 2 "unknown --layout 'vlm' (did you mean 'vllm'?"
run "$TPCONV" convert "$D/tiny_llama.safetensors" -o "$T/typo.safetensors" --rules dale2
expect "a mistyped rules preset says the nearest (2)" 2 "did you mean 'dalle2'?"
run "$TPCONV" shard "$D/tiny_llama.safetensors" --preset llama --tp 2 --config "$D/config.json" -o "$T/set" -q
cp "$D/config.json" "$T/set/"
( cd "$T" && "$TPCONV" merge set -o merged >"$T/out" 2>"$T/err" ); rc=$?; err=$(cat "$T/err")
expect "merge -o NAME without a suffix writes a folder, as save_pretrained does" 0
[ -d "$T/merged" ] && [ -f "$T/merged/model.safetensors" ] && [ -f "$T/merged/config.json" ] &&
  ok "the folder holds model.safetensors and the config" || bad "merged folder contents" "$(ls -la "$T/merged" 2>&1)"
run "$TPCONV" diff "$T/merged" "$D/tiny_llama.safetensors"; expect "the merged folder equals the model" 0
run "$TPCONV" merge "$T/set" -o "$T/llama-3.1-merged" -q; expect "a name whose dot starts no file suffix is a folder too" 0
[ -f "$T/llama-3.1-merged/model.safetensors" ] && ok "llama-3.1-merged/ holds model.safetensors" || bad "llama-3.1-merged folder"
run "$TPCONV" merge "$T/set" -o "$T/out.weird"; expect "merge -o with an unknown suffix is still refused" 2 "cannot tell the output format"
run "$TPCONV" merge "$T/set" -o "$T/plain" --format torch -q
expect "--format keeps a suffix-less name a file" 0; [ -f "$T/plain" ] && ok "--format torch -o plain writes a file" || bad "--format torch -o plain"
run "$TPCONV" convert "$D/tiny_llama.pt" -o "$T/converted" -q; expect "convert -o NAME without a suffix writes a folder" 0
[ -f "$T/converted/model.safetensors" ] && ok "convert's folder holds model.safetensors" || bad "convert folder"

# companions: what the format registry recognises is weights, never a companion
# (a GGUF beside the weights is gigabytes); config.json goes along
mkdir -p "$T/comp" && cp "$D/tiny_llama.safetensors" "$T/comp/model.safetensors" && cp "$D/config.json" "$T/comp/"
printf 'GGUF-not-really' >"$T/comp/x.gguf"; printf 'dcp part' >"$T/comp/__0_0.distcp"
companions() { # desc folder
  if [ -f "$2/config.json" ] && [ ! -e "$2/x.gguf" ] && [ ! -e "$2/__0_0.distcp" ]; then ok "$1: config.json copied, no .gguf or .distcp"
  else bad "$1: companions" "$(ls "$2" 2>&1)"; fi
}
run "$TPCONV" convert "$T/comp" -o "$T/comp-conv/" -q; expect "convert a folder with a .gguf beside" 0
companions "convert" "$T/comp-conv"
run "$TPCONV" shard "$T/comp" --preset llama --tp 2 -o "$T/comp-set/" -q; expect "shard a folder with a .gguf beside" 0
companions "shard" "$T/comp-set"
cp "$T/comp/x.gguf" "$T/comp/__0_0.distcp" "$T/comp-set/"
run "$TPCONV" merge "$T/comp-set" -o "$T/comp-merged/" -q; expect "merge a set with a .gguf beside" 0
companions "merge" "$T/comp-merged"

# shell completion (doc/tpconv.bash): option values from 'tpconv __complete', in bash
complete_at() { # words...: COMPREPLY for the last word, space-separated
  COMP_SRC="$SRC/doc/tpconv.bash" bash -c 'source "$COMP_SRC"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _tpconv; echo "${COMPREPLY[*]}"' _ "$TPCONV" "$@" 2>&1
}
got=$(complete_at convert --outtype ""); [ "$got" = "f32 f16 bf16 q8_0 auto q4_0 q4_1 q5_0 q5_1 q2_k q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m q6_k iq4_nl iq4_xs tq1_0 tq2_0 q3_k q4_k q5_k" ] && ok "completion: --outtype values" || bad "completion: --outtype values" "got: $got"
got=$(complete_at convert --format g); [ "$got" = "gguf" ] && ok "completion: --format offers gguf" || bad "completion: --format offers gguf" "got: $got"
got=$(complete_at verify --arch gpt); [ "$got" = "gpt-oss gpt2 gpt-neox" ] && ok "completion: --arch values" || bad "completion: --arch values" "got: $got"
got=$(complete_at verify --checks structure,l); [ "$got" = "structure,layers" ] && ok "completion: --checks completes a list's last item" || bad "completion: --checks" "got: $got"
got=$(complete_at shard --layout vl); [ "$got" = "vllm" ] && ok "completion: --layout from the registry" || bad "completion: --layout" "got: $got"
# each value the completion offers is one its command's --help gives for that option
for oc in --outtype:convert --checks:verify --dtype:convert --checksum:shard --device:verify; do
  o=${oc%%:*} c=${oc#*:} miss=""
  block=$("$TPCONV" $c --help | awk -v o="$o" '$1 == o {f=1; print; next} f && /^  -/ {f=0} f {print}')
  for v in $("$TPCONV" __complete "$o"); do [[ $block == *"$v"* ]] || miss="$miss $v"; done
  [ -n "$block" ] && [ -z "$miss" ] && ok "completion: $o values are in $c --help" || bad "completion: $o values are in $c --help" "missing:$miss" "$block"
done

# --arch: the records verify can compute (plan --list) and none
"$TPCONV" plan --list > "$T/pl" 2>&1
miss=""; for v in $("$TPCONV" __complete --arch); do [ "$v" = none ] || grep -q "^$v " "$T/pl" || miss="$miss $v"; done
[ -z "$miss" ] && "$TPCONV" __complete --arch | grep -qx none && "$TPCONV" __complete --arch | grep -qx olmo2 &&
  ok "completion: --arch values are plan --list's records and none" || bad "completion: --arch values" "not in plan --list:$miss"
# the man page (built from --help by doc/mkman.py): its DESCRIPTION names GGUF, merge's section every output
MAN="$(dirname "$TPCONV")/../doc/tpconv.1"
if [ -f "$MAN" ]; then
  desc=$(sed -n '/^\.SH DESCRIPTION/,/^\.SH /p' "$MAN"); merge=$(sed -n '/^\.SH "TPCONV MERGE"/,/^\.SH /p' "$MAN")
  [[ $desc == *GGUF* && $desc == *"source doc/tpconv.bash"* && $merge == *gguf* ]] && ok "man page: GGUF, the completion, merge's formats" || bad "man page: GGUF, the completion, merge's formats"
fi
echo "1..$n"
[ "$failed" = 0 ]
