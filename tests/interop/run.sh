#!/bin/sh
# make interop: tpconv's outputs loaded by the real consumers of Debian forky
# (transformers, torch, safetensors, accelerate) in a cached chroot
# (tests/interop/chroot.sh); writes the table doc/interop-results.md. Not part of
# `make test`. Needs root and, the first time, Debian's archive (about 8 minutes).
#
# Steps: gen.py builds tiny random models with transformers and genuine torch
# DCP saves (inside the chroot); tpconv (on the host) converts, shards, merges
# and reshards them into the work folder, which lies inside the chroot's tree;
# check.py loads every result with the real consumers and compares;
# llamacpp.py runs llama.cpp on tpconv's GGUF files. Each step
# appends "consumer TAB family TAB operation TAB case TAB status TAB detail"
# lines to results.tsv; report.py makes the table.
#
# usage: run.sh TPCONV SRCDIR    (TPCONV_INTEROP_ROOT: the chroot's folder;
#                                 TPCONV_INTEROP_KEEP=1 keeps the work folder;
#                                 TPCONV_INTEROP_FAMILIES="olmo2 granite": only
#                                 those families (families.py's names and the
#                                 tiny-* GGUF folders), the report written to
#                                 TPCONV_INTEROP_REPORT, not doc/interop-results.md)
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
H=$SRC/tests/interop
ONLY=$(printf '%s' "${TPCONV_INTEROP_FAMILIES:-}" | tr ',' ' ')
REPORT=$SRC/doc/interop-results.md
[ -n "$ONLY" ] && REPORT=${TPCONV_INTEROP_REPORT:-/tmp/tpconv-interop-results.md}
# is family $1 among those asked for (all when none were named)?
wanted() { [ -z "$ONLY" ] || case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
[ "$(id -u)" = 0 ] || { echo "interop: needs root (debootstrap, chroot, bind mounts)" >&2; exit 2; }
. "$H/chroot.sh"
t0=$(date +%s)
interop_setup || { echo "interop: cannot build the chroot in $IROOT" >&2; exit 4; }
t1=$(date +%s)

W=$(mktemp -d "$IROOT/tmp/interop.XXXXXX") || exit 4
CW=/tmp/${W##*/}
cleanup() {
	interop_stop
	interop_umount "$IROOT"
	[ "${TPCONV_INTEROP_KEEP:-}" = 1 ] && echo "interop: work folder kept: $W" || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
interop_mount "$IROOT" || exit 4
cp "$H"/*.py "$SRC/tests/gguf/ref_convert.py" "$W/"
: >"$W/results.tsv"
: >"$W/cases.tsv"

# python3 of the chroot, in the work folder; one process per step (imports are slow)
inchroot() {
	interop_run chroot "$IROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TMPDIR="$CW" LANG=C.UTF-8 \
		USE_LIBUV=0 GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 \
		TRANSFORMERS_VERBOSITY=error HF_HUB_DISABLE_PROGRESS_BARS=1 TQDM_DISABLE=1 \
		PYTHONDONTWRITEBYTECODE=1 PYTHONWARNINGS=ignore TPC_INTEROP_FAMILIES="$ONLY" \
		sh -c "cd '$CW' && python3 $*"
}
# one line of results.tsv
result() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" | tr -d '\r' >>"$W/results.tsv"; }
# run tpconv quietly; its stderr (one line) in $err
tpc() { "$TPCONV" "$@" -q >"$W/tpc.out" 2>"$W/tpc.err"; rc=$?; err=$(head -c 400 "$W/tpc.err" | tr '\n\t' '  '); return $rc; }
# tpconv made a model folder that check.py loads with from_pretrained: KIND FAMILY OP CASE PATH
want() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$W/cases.tsv"; }
# a tpconv step failed: a layout refusing a model (exit 3: the documented
# limits of the vllm and megatron layouts) is n/a, anything else a failure
refused() { # CONSUMER FAMILY OP CASE WHAT
	case "$rc:$5" in
	"3:shard --layout "*) result "$1" "$2" "$3" "$4" n/a "tpconv refuses ($5): $err" ;;
	*) result "$1" "$2" "$3" "$4" fail "tpconv $5 exit $rc: $err" ;;
	esac
}

echo "interop: building the models and the genuine DCP saves (transformers, torch)"
inchroot gen.py . >"$W/gen.log" 2>&1 || { tail -20 "$W/gen.log"; echo "interop: gen.py failed" >&2; exit 1; }
t2=$(date +%s)

echo "interop: tpconv converts, shards, merges, reshards"
LAYOUTS="tpconv oslo trtllm hf-mapping hf vllm megatron dcp"
mkdir -p "$W/out" "$W/sets"
while IFS="$(printf '\t')" read -r fam preset tps kind; do
	M=$W/models/$fam O=$W/out/$fam S=$W/sets/$fam
	mkdir -p "$O" "$S"
	tpc convert "$M" --format torch -o "$O/c-torch/" && want full "$fam" "convert → torch .bin" "from safetensors" "out/$fam/c-torch" ||
		refused transformers "$fam" "convert → torch .bin" "from safetensors" convert
	tpc convert "$O/c-torch" -o "$O/c-st" && want full "$fam" "convert → safetensors" "from the .bin" "out/$fam/c-st" ||
		refused transformers "$fam" "convert → safetensors" "from the .bin" convert
	tpc convert "$M" -o "$O/c-shards" --max-shard-size 48KiB && want full "$fam" "convert → HF shards" "48 KiB shards" "out/$fam/c-shards" ||
		refused transformers "$fam" "convert → HF shards" "48 KiB shards" convert
	tpc convert "$M" --dtype bf16 -o "$O/c-bf16" && want cast "$fam" "convert --dtype bf16" "dtype=\"auto\"" "out/$fam/c-bf16" ||
		refused transformers "$fam" "convert --dtype bf16" "dtype=\"auto\"" convert
	tpc convert "$M" --format dcp -o "$S/c-dcp" && want dcp "$fam" "convert → DCP" "plain" "sets/$fam/c-dcp" ||
		refused torch "$fam" "convert → DCP" "plain" convert
	for L in $LAYOUTS; do
		for tp in $tps; do
			op="shard $L → merge"
			if ! tpc shard "$M" --preset "$preset" --tp "$tp" --layout "$L" -o "$S/$L-$tp"; then
				refused transformers "$fam" "$op" "tp $tp" "shard --layout $L --tp $tp"
				continue
			fi
			# a TensorRT-LLM set keeps the model's config.json for merge (issue 41 item 1)
			k=full; [ "$L" = trtllm ] && k=config
			tpc merge "$S/$L-$tp" -o "$O/m-$L-$tp" && want $k "$fam" "$op" "tp $tp" "out/$fam/m-$L-$tp" ||
				refused transformers "$fam" "$op" "tp $tp" "merge"
			[ "$L" = hf ] && want rank "$fam" "hf rank folders as 1/tp models" "tp $tp" "sets/$fam/hf-$tp"
			[ "$L" = dcp ] && want dcp "$fam" "shard --layout dcp" "tp $tp" "sets/$fam/dcp-$tp"
		done
	done
	# the torch rank files of a tpconv set (tp 2), compared with the safetensors ones
	tpc shard "$M" --preset "$preset" --tp 2 --format torch -o "$S/tpconv-torch-2" &&
		want ranks "$fam" "tpconv --format torch rank files" "tp 2" "sets/$fam/tpconv-torch-2" ||
		refused torch "$fam" "tpconv --format torch rank files" "tp 2" "shard --format torch"
	tpc merge "$S/tpconv-2" --format torch -o "$O/m-torch-2/" && want full "$fam" "convert → torch .bin" "merge --format torch, tp 2" "out/$fam/m-torch-2" ||
		refused transformers "$fam" "convert → torch .bin" "merge --format torch, tp 2" merge
	tpc merge "$S/hf-4" -o "$O/m-shards-4" --max-shard-size 48KiB && want full "$fam" "convert → HF shards" "merge of hf tp 4, 48 KiB shards" "out/$fam/m-shards-4" ||
		refused transformers "$fam" "convert → HF shards" "merge of hf tp 4, 48 KiB shards" merge
	# reshard: a set in, another set out, no file between; then merged and loaded
	for r in tpconv-4:2:tpconv dcp-2:8:hf hf-8:4:trtllm oslo-2:4:dcp; do
		from=${r%%:*} rest=${r#*:} to=${rest%%:*} lay=${rest#*:} what="$from → $lay tp $to"
		[ -d "$S/$from" ] || { result transformers "$fam" reshard "$what" n/a "no $from set (refused above)"; continue; }
		if ! tpc shard "$S/$from" --tp "$to" --layout "$lay" -o "$S/re-$from-$lay-$to"; then
			refused transformers "$fam" reshard "$what" "shard --layout $lay (a reshard)"
		elif tpc merge "$S/re-$from-$lay-$to" -o "$O/re-$from-$lay-$to"; then
			k=full; [ "$lay" = trtllm ] && k=config
			want $k "$fam" reshard "$what" "out/$fam/re-$from-$lay-$to"
		else
			refused transformers "$fam" reshard "$what" "merge of the reshard"
		fi
	done
done <"$W/families.tsv"

# genuine torch DCP saves (gen.py): tpconv reads them
for d in "$W"/genuine/*/; do
	[ -d "$d" ] || continue  # none (TPCONV_INTEROP_FAMILIES)
	g=$(basename "$d")
	if ! tpc inspect "$d"; then refused torch "$g" "tpconv reads a torch DCP save" inspect inspect; continue; fi
	tpc convert "$d" -o "$W/genuine/$g.safetensors" && want genuine "$g" "tpconv reads a torch DCP save" "convert → safetensors" "genuine/$g.safetensors" ||
		refused torch "$g" "tpconv reads a torch DCP save" "convert → safetensors" convert
	tpc convert "$d" -o "$W/genuine/$g.pt" && want genuine "$g" "tpconv reads a torch DCP save" "convert → torch" "genuine/$g.pt" ||
		refused torch "$g" "tpconv reads a torch DCP save" "convert → torch" convert
done
# GGUF (issue 33): the tiny models of tests/gguf/arch (with their tokenizers)
# converted here, f32, f16, q4_k_m and a gguf-split set; llamacpp.py (in the chroot)
# converts them with convert_hf_to_gguf.py and runs llama-completion on both
mkdir -p "$W/gguf/models" "$W/gguf/tpc"
# tpconv's GGUF files of the model folder $G/models/tiny-$1
gguf_model() {
	for ot in f32 f16 q4_k_m; do
		tpc convert "$G/models/tiny-$1" -o "$G/tpc/$1-$ot.gguf" --outtype $ot || echo "exit $rc: $err" >"$G/tpc/$1-$ot.err"
	done
	mkdir -p "$G/tpc/$1-split"
	tpc convert "$G/models/tiny-$1" -o "$G/tpc/$1-split/tiny.gguf" --outtype f32 --max-shard-size 64KiB ||
		echo "exit $rc: $err" >"$G/tpc/$1-split.err"
}
G=$W/gguf
for d in "$SRC"/tests/gguf/arch/tiny-*; do
	fam=${d##*/tiny-}
	wanted "$fam" || continue
	cp -r "$d" "$G/models/"
	gguf_model "$fam"
done
# Qwen3.5's rope sections, when config.json has none, are _Qwen35MRopeMixin's
# [11, 11, 10]: wider than the 4 rotary dimensions of a tiny 16-wide head,
# and llama.cpp aborts on the reference's own file (GGML_ASSERT(sect_dims <=
# ne0) in ggml_rope_multi). The same models with mrope_section [1, 1, 0] (as
# the published checkpoints, a section per axis) are ones llama-completion
# runs: llamacpp.py asks the same text of tpconv's files as of the reference's
for fam in qwen3_5 qwen3_5-moe; do
	wanted "$fam" || continue
	rm -rf "$G/models/tiny-$fam-mrope" && cp -r "$SRC/tests/gguf/arch/tiny-$fam" "$G/models/tiny-$fam-mrope" &&
	python3 - "$G/models/tiny-$fam-mrope/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_parameters"]["mrope_section"] = [1, 1, 0]
json.dump(c, open(sys.argv[1], "w"), indent=2, sort_keys=True)
PY
	gguf_model "$fam-mrope"
done
# the tokenizer files rebuilt from the metadata (tokenizer.py compares them with
# the model's own), and qwen2 again with a chat template
G=$W/gguf
mkdir -p "$G/chat"  # not among models/: llamacpp.py runs every model there
wanted qwen2 && cp -r "$G/models/tiny-qwen2" "$G/chat/tiny-qwen2-chat" &&
python3 - "$G/chat/tiny-qwen2-chat/tokenizer_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = ("{% for m in messages %}{{ '<|endoftext|>' + m['role'] + '\\n' + m['content'] + '<|endoftext|>\\n' }}"
                      "{% endfor %}{% if add_generation_prompt %}{{ '<|endoftext|>assistant\\n' }}{% endif %}")
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
wanted qwen2 && tpc convert "$G/chat/tiny-qwen2-chat" -o "$G/tpc/qwen2-chat-f32.gguf" --outtype f32
for f in "$G"/tpc/*-f32.gguf; do
	[ -e "$f" ] || continue # no GGUF family among those asked for (the glob unexpanded)
	fam=${f##*/}; fam=${fam%-f32.gguf}
	tpc convert "$f" -o "$G/tpc/$fam-hf/" || result transformers "$fam" "GGUF → tokenizer files" "convert" fail "exit $rc: $err"
done
# LoRA (issue 43): tests/lora's adapters merged by convert --lora; lora.py loads
# each merged folder and compares its logits with the base model running the
# adapter unmerged (PEFT's forward, re-implemented); the mixture-of-experts
# bases of tests/lora/moe too (target_parameters on transformers 5's fused
# experts, whose Mixtral base keeps one tensor an expert on disk)
if wanted lora; then
	L=$W/lora
	mkdir -p "$L/out" && cp -r "$SRC/tests/lora/llama" "$SRC/tests/lora/gpt2" "$SRC"/tests/lora/moe/* "$L/" && : >"$L/cases.tsv"
	for c in llama/plain llama/rslora llama/dora llama/rank-pattern llama/embedding llama/embedding-dora \
		gpt2/conv1d gpt2/conv1d-dora "multi llama/plain:0.5 llama/rslora:1.5" \
		mixtral/experts mixtral/params qwen3moe/params gptoss/params granite/params; do
		set -- $c
		case $1 in multi) name=multi base=llama; shift ;; *) name=${1%%/*}-${1#*/} base=${1%%/*} ;; esac
		args= row=
		for a in "$@"; do args="$args --lora $L/$a"; row="$row	lora/$a"; done
		if tpc convert "$L/$base" $args -o "$L/out/$name/"; then
			printf '%s\t%s\t%s%s\n' "$name" "lora/$base" "lora/out/$name" "$row" >>"$L/cases.tsv"
		else refused transformers lora "convert --lora → from_pretrained, logits" "$name" "convert --lora"; fi
	done
	echo "interop: transformers runs the LoRA-merged models against base + adapter"
	inchroot lora.py . >"$W/lora.log" 2>&1 || { tail -30 "$W/lora.log"; echo "interop: lora.py failed" >&2; }
fi
# LoRA as llama.cpp runs it (issue 43): tpconv's adapter GGUF (convert ADAPTER
# --base BASE) applied by llama-completion --lora on tpconv's base GGUF writes
# the text of tpconv's merged GGUF (convert BASE --lora ADAPTER), for the
# adapters of tests/lora/gguf (make_lora_gguf.py)
if wanted lora-gguf; then
	LG=$W/lora-gguf fams=
	mkdir -p "$LG"
	for fam in llama qwen2 phi3 mixtral; do
		b=$SRC/tests/gguf/arch/tiny-$fam a=$SRC/tests/lora/gguf/$fam/adapter
		tpc convert "$b" -o "$LG/$fam-base.gguf" --outtype f32 &&
			tpc convert "$b" --lora "$a" -o "$LG/$fam-merged.gguf" --outtype f32 &&
			tpc convert "$a" --base "$b" -o "$LG/$fam-adapter.gguf" ||
			result llama.cpp "$fam" "adapter GGUF → llama-completion --lora" f32 fail "tpconv exit $rc: $err"
		fams="$fams $fam"
	done
	echo "interop: llama-completion --lora with tpconv's adapter GGUF against tpconv's merged GGUF"
	inchroot lora_gguf.py . $fams >"$W/lora_gguf.log" 2>&1 || { tail -30 "$W/lora_gguf.log"; echo "interop: lora_gguf.py failed" >&2; }
fi
t3=$(date +%s)

echo "interop: the consumers load what tpconv wrote ($(wc -l <"$W/cases.tsv") outputs)"
inchroot check.py . >"$W/check.log" 2>&1 || { tail -30 "$W/check.log"; echo "interop: check.py failed" >&2; }
echo "interop: llama.cpp loads tpconv's GGUF (llama-completion, gguf-split, llama-quantize)"
inchroot llamacpp.py . >"$W/llamacpp.log" 2>&1 || { tail -30 "$W/llamacpp.log"; echo "interop: llamacpp.py failed" >&2; }
echo "interop: transformers and sentencepiece load the tokenizer files rebuilt from the GGUF"
inchroot tokenizer.py . >"$W/tokenizer.log" 2>&1 || { tail -30 "$W/tokenizer.log"; echo "interop: tokenizer.py failed" >&2; }
echo "interop: transformers loads the model folders rebuilt from the GGUF"
inchroot ggufmodel.py . >"$W/ggufmodel.log" 2>&1 || { tail -30 "$W/ggufmodel.log"; echo "interop: ggufmodel.py failed" >&2; }
t4=$(date +%s)

cat "$W/versions.txt" >"$W/report.env" 2>/dev/null
printf 'setup=%s\ngen=%s\ntpconv=%s\ncheck=%s\ncommit=%s\n' $((t1 - t0)) $((t2 - t1)) $((t3 - t2)) $((t4 - t3)) \
	"$(git -C "$SRC" describe --always --dirty 2>/dev/null || echo unknown)" >>"$W/report.env"
python3 "$H/report.py" "$W/results.tsv" "$W/report.env" "$TPCONV" >"$REPORT.tmp" &&
	mv "$REPORT.tmp" "$REPORT" || { rm -f "$REPORT.tmp"; exit 4; }
awk -F '\t' '{ n[$5]++ } END { for (s in n) printf "%s %d  ", s, n[s]; print "" }' "$W/results.tsv"
echo "interop: $REPORT written${ONLY:+ (families: $ONLY)}; chroot $((t1 - t0)) s, run $((t4 - t1)) s"
! grep -q "$(printf '\tfail\t')" "$W/results.tsv"
