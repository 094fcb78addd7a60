#!/usr/bin/env bash
# Optimizer state carried across layouts, proved by resuming training in real
# torch 2.14 (the forky chroot, tests/interop/chroot.sh). Opt-in, not part of
# make test: `make interop-optim` (root; the chroot is built if missing).
#
# tests/dcp/make_optim.py trains a tiny LLaMA two steps on a 2-process FSDP2
# mesh (CPU, gloo) with AdamW and saves DCP with the optimizer state, then
# takes steps 3 and 4 of the same run; tpconv converts the save to a
# 4-process DCP folder (--dcp-ranks 4), a 2-process one, and to optimizer.pt +
# model.safetensors. Each is resumed: step 3 updates with the loaded moments,
# step 4's loss shows what they did.
#   - tpconv's 4-process folder on 4 processes against the original save
#     loaded on 4 processes (torch's own resharding): bit-equal losses and
#     parameters (sha256 after step 3);
#   - tpconv's 2-process folder on 2 processes against the uninterrupted run:
#     bit-equal;
#   - optimizer.pt in one process (no FSDP: another reduction order) against
#     the uninterrupted run: |loss difference| <= 1e-6 x loss (fp32: a few
#     ulps), while a fresh optimizer (the state lost) misses by far more;
#   - the same model trained under FSDP + TP (a dp 2 x tp 2 mesh: q/k/v, gate/up
#     column-, o/down row-parallel, then fully_shard on dp; moments in 2-D
#     boxes): tpconv's 4-process FSDP2 folder of it resumed on 4 processes is
#     bit-equal to the original resumed there by torch; its optimizer.pt in one
#     process within 1e-6 of the FSDP + TP run's step-4 loss;
#   - DeepSpeed ZeRO-2 and ZeRO-3 folders (tests/deepspeed/make_zero.py, every
#     moment derived from its own master element) converted with their Adam
#     state to DCP folders load in torch through get_state_dict / dcp.load /
#     set_state_dict (DeepSpeed's groups lack AdamW's other hyper-parameters:
#     allow_partial_load), every moment on its own parameter's elements;
#   - transformers' Trainer loads tpconv's optimizer.pt of the tagged fixture
#     (tests/data/dcp/optim_tagged) and every parameter gets its own state;
#   - megatron-dist sets with optimizer state (a LLaMA at tp 2 x pp 2, a
#     Mixtral at tp 2 x ep 2 x pp 2; tests/dcp/make_mcore_optim_out.py): torch's
#     DCP reader gives every state tensor the source's values; Megatron's load
#     decisions (tests/interop/mcore_resume.py, issue 44) resume from them: the
#     iteration folder, the optimizer in the form written, the scheduler, the
#     data's position; the old release/ form's optimizer is skipped.
# usage: optim.sh TPCONV SRCDIR   (TAP on stdout; TPCONV_INTEROP_KEEP=1 keeps the work folder)
set -u
TPCONV=$(realpath "$1") SRC=$(realpath "$2")
. "$SRC/tests/lib/tap.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (chroot, bind mounts)"
. "$SRC/tests/interop/chroot.sh"
interop_setup >&2 || { echo "interop: cannot build the chroot in $IROOT" >&2; exit 4; }
W=$(mktemp -d "$IROOT/tmp/optim.XXXXXX") || exit 4
CW=/tmp/${W##*/}
cleanup() {
	interop_stop
	interop_umount "$IROOT"
	[ "${TPCONV_INTEROP_KEEP:-}" = 1 ] && echo "# work folder kept: $W" || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
interop_mount "$IROOT" || exit 4
cp "$SRC/tests/dcp/make_optim.py" "$SRC/tests/deepspeed/make_zero.py" "$SRC/tests/deepspeed/zero_dcp_load.py" "$W/"
inpy() { # SCRIPT ARGS...: another script of the work folder, in the chroot
	interop_run chroot "$IROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TMPDIR="$CW" LANG=C.UTF-8 \
		USE_LIBUV=0 GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 PYTHONWARNINGS=ignore \
		sh -c "cd '$CW' && python3 $*" >>"$W/log" 2>&1
}
inchroot() {
	interop_run chroot "$IROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp TMPDIR="$CW" LANG=C.UTF-8 \
		USE_LIBUV=0 GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error \
		PYTHONDONTWRITEBYTECODE=1 PYTHONWARNINGS=ignore sh -c "cd '$CW' && python3 make_optim.py $*" >>"$W/log" 2>&1
}
T=$W/tap
mkdir -p "$T"
inchroot gen-tp gen || bad "make_optim.py gen-tp" "$(tail -5 "$W/log")"
inchroot gen gen || { tail -20 "$W/log" | sed 's/^/# /'; bad "make_optim.py gen"; done_testing; exit; }
S=$W/gen/optim_fsdp2
check "tpconv: the save to 4 and 2 processes, optimizer.pt, model.safetensors" sh -c "
  '$TPCONV' convert '$S' --format dcp --dcp-ranks 4 --no-extras -o '$W/d4' -q &&
  '$TPCONV' convert '$S' --format dcp --dcp-ranks 2 --no-extras -o '$W/d2' -q &&
  '$TPCONV' convert '$S' --optimizer -o '$W/pt/optimizer.pt' -q &&
  '$TPCONV' convert '$S' --select model -o '$W/pt/model.safetensors' -q &&
  '$TPCONV' convert '$SRC/tests/data/dcp/optim_tagged' --optimizer -o '$W/tagged/optimizer.pt' -q &&
  '$TPCONV' convert '$W/gen/optim_fsdp_tp' --format dcp --dcp-ranks 4 --no-extras -o '$W/tp4' -q &&
  '$TPCONV' convert '$W/gen/optim_fsdp_tp' --optimizer -o '$W/tppt/optimizer.pt' -q &&
  '$TPCONV' convert '$W/gen/optim_fsdp_tp' --select model -o '$W/tppt/model.safetensors' -q"
for a in "gen/optim_fsdp2 4 orig4.json" "d4 4 d4.json" "d2 2 d2.json" "gen/optim_fsdp_tp 4 tporig4.json" "tp4 4 tp4.json"; do
	inchroot resume $a || bad "resume $a" "$(tail -5 "$W/log")"
done
inchroot resume-pt pt/model.safetensors pt/optimizer.pt pt.json || bad "resume-pt" "$(tail -5 "$W/log")"
inchroot resume-pt tppt/model.safetensors tppt/optimizer.pt tppt.json || bad "resume-pt fsdp+tp" "$(tail -5 "$W/log")"
inchroot resume-pt pt/model.safetensors none fresh.json || bad "resume-pt none" "$(tail -5 "$W/log")"
cp "$SRC/tests/data/dcp/optim_tagged/names.json" "$W/tagged/"
# ZeRO folders (Debian's torch on the host writes them), into DCP with their Adam state
for z in "2 3 23 2" "3 4 34 4"; do
	set -- $z
	/usr/bin/python3 "$SRC/tests/deepspeed/make_zero.py" "$W/zero$1" --stage "$1" --world "$2" --seed "$3" >>"$W/log" 2>&1 &&
		"$TPCONV" convert "$W/zero$1" --optimizer --format dcp --dcp-ranks "$4" --no-extras -o "$W/zdcp$1" -q 2>>"$W/log" &&
		inpy zero_dcp_load.py "zdcp$1" "$3" "$1" "zero$1.json" || bad "ZeRO-$1 into DCP and loaded" "$(tail -5 "$W/log")"
done
inchroot trainer tagged tagged/names.json trainer.json || bad "trainer" "$(tail -5 "$W/log")"
# Optimizer state into Megatron torch_dist sets (shard --layout megatron-dist
# --optimizer, Megatron's fully_reshardable form): torch's own DCP reader
# reads every state tensor with the source's values, and its metadata gives
# each state key its model key's shape and chunks
cp "$SRC/tests/dcp/make_mcore_optim_out.py" "$SRC/tests/interop/mcore_resume.py" "$W/"
MT=global-batch-size=8
MTS=global-batch-size=8,lr=3e-4,min-lr=3e-5,lr-warmup-iters=10,train-iters=100,lr-decay-style=cosine,weight-decay=0.1
MO=(--layout megatron-dist --optimizer --no-extras -q)
if /usr/bin/python3 "$SRC/tests/dcp/make_mcore_optim_out.py" gen "$W/mo" >>"$W/log" 2>&1 &&
	"$TPCONV" shard "$W/mo/train.pt" --preset llama --config "$W/mo/config.json" "${MO[@]}" --megatron-train $MT --tp 2 --pp 2 -o "$W/mo22" 2>>"$W/log" &&
	"$TPCONV" shard "$W/mo/train.pt" --preset llama --config "$W/mo/config.json" "${MO[@]}" --megatron-train $MTS --tp 2 --pp 2 -o "$W/mos22" 2>>"$W/log" &&
	"$TPCONV" shard "$W/mo/moe/train.pt" --preset mixtral --config "$W/mo/moe/config.json" "${MO[@]}" --megatron-train $MT --tp 2 --ep 2 --pp 2 \
		-o "$W/mom22" 2>>"$W/log"; then
	for c in "mo/train.pt mo22/iter_0000007" "mo/moe/train.pt mom22/iter_0000007"; do
		set -- $c
		inpy make_mcore_optim_out.py torch2 "$1" "$2" && tail -1 "$W/log" | grep -q "state tensors (param, exp_avg, exp_avg_sq per parameter) equal$" &&
			inpy make_mcore_optim_out.py torch2-chunks "$2" && tail -1 "$W/log" | grep -q "each with its model key's shape and same chunks$" &&
			ok "megatron-dist --optimizer ($2): torch's DCP reader gives every state tensor the source's values, each state key its model key's chunks" ||
			bad "megatron-dist --optimizer ($2) read by torch" "$(tail -3 "$W/log")"
	done
	# Megatron's own load decisions over the sets (mcore_resume.py, each step
	# citing checkpointing.py at d98e8a6): the folder the tracker names, the
	# optimizer and scheduler loaded in the form written, no RNG asked for,
	# the data's position, torch DCP loading every state tensor; and the
	# release/ form tpconv wrote before issue 44, whose optimizer Megatron skips
	cp -r "$W/mo22" "$W/old" && mv "$W/old/iter_0000007" "$W/old/release" && printf release >"$W/old/latest_checkpointed_iteration.txt"
	: >"$W/resume"
	for c in "mo/train.pt mo22 $MT" "mo/train.pt mos22 $MTS" "mo/moe/train.pt mom22 $MT" "mo/train.pt old $MT release"; do
		inpy "mcore_resume.py $c >>resume" || echo "not ok mcore_resume.py $c: $(tail -3 "$W/log" | tr '\n' ' ')" >>"$W/resume"
	done
	while IFS= read -r l; do
		case $l in
		"ok "*) ok "Megatron's resume: ${l#ok }" ;;
		*) bad "Megatron's resume: ${l#not ok }" ;;
		esac
	done <"$W/resume"
else
	bad "megatron-dist --optimizer sets" "$(tail -5 "$W/log")"
fi
python3 - "$W" >"$W/py" 2>&1 <<'PY'
import json, os, sys
w = sys.argv[1]
j = lambda n: json.load(open(os.path.join(w, n)))
run = j("gen/optim_fsdp2/losses.json")
n = 0
def tap(good, what, why=""):
    global n
    n += 1
    print(("ok %d - %s" if good else "not ok %d - %s") % (n, what))
    if not good:
        print("# " + str(why))
try:
    o4, d4, d2, pt, fr, tr = (j(x) for x in ("orig4.json", "d4.json", "d2.json", "pt.json", "fresh.json", "trainer.json"))
except Exception as ex:
    tap(False, "the resume runs' results", repr(ex)); sys.exit()
print("# uninterrupted 2-process run: loss3 %.9g loss4 %.9g" % tuple(run["losses"][2:4]))
for name, r in (("original on 4", o4), ("tpconv dcp-ranks 4 on 4", d4), ("tpconv dcp-ranks 2 on 2", d2),
                ("optimizer.pt, 1 process", pt), ("fresh AdamW, 1 process", fr)):
    print("# %-26s loss3 %.9g loss4 %.9g  d(loss4) %+.3g" % (name, r["loss3"], r["loss4"], r["loss4"] - run["losses"][3]))
tap((d4["loss3"], d4["loss4"], d4["hash3"]) == (o4["loss3"], o4["loss4"], o4["hash3"]),
    "tpconv's 4-process folder resumed on 4 processes: step 3 and 4 losses and every parameter after step 3 bit-equal to the original save resumed on 4",
    (d4, o4))
tap((d2["loss3"], d2["loss4"], d2["hash3"]) == (run["losses"][2], run["losses"][3], run["hash3"]),
    "tpconv's 2-process folder resumed on 2 processes: bit-equal to the uninterrupted run (losses, parameters)", (d2, run))
dpt, dfr = abs(pt["loss4"] - run["losses"][3]), abs(fr["loss4"] - run["losses"][3])
tap(dpt <= 1e-6 * run["losses"][3] and dfr > 100 * max(dpt, 1e-7),
    "optimizer.pt in torch.optim.AdamW (1 process): step 4 loss within 1e-6 relative of the run's (%.2g), a fresh optimizer misses by %.2g" % (dpt, dfr),
    (pt, fr))
tp = j("gen/optim_fsdp_tp/losses.json")
t4, to4, tpt = j("tp4.json"), j("tporig4.json"), j("tppt.json")
print("# FSDP + TP run (dp 2 x tp 2): loss3 %.9g loss4 %.9g" % tuple(tp["losses"][2:4]))
for name, r in (("FSDP+TP save, torch, on 4", to4), ("tpconv of it, dcp-ranks 4", t4), ("its optimizer.pt, 1 process", tpt)):
    print("# %-26s loss3 %.9g loss4 %.9g  d(loss4) %+.3g" % (name, r["loss3"], r["loss4"], r["loss4"] - tp["losses"][3]))
tap((t4["loss3"], t4["loss4"], t4["hash3"]) == (to4["loss3"], to4["loss4"], to4["hash3"]),
    "FSDP + TP save: tpconv's 4-process folder resumed on 4 FSDP2 processes bit-equal to torch resharding the original", (t4, to4))
tap(abs(tpt["loss4"] - tp["losses"][3]) <= 1e-6 * tp["losses"][3],
    "FSDP + TP save: its optimizer.pt (1 process) within 1e-6 relative of the FSDP + TP run's step-4 loss (%.2g)" % abs(tpt["loss4"] - tp["losses"][3]), tpt)
for st in (2, 3):
    try:
        zr = j("zero%d.json" % st)
        tap(not zr["bad"] and zr["trainable"] == 19,
            "ZeRO-%d with its Adam state into DCP: torch loads it by get_state_dict's names, each of 19 parameters' moments and step its own, weights equal" % st, zr)
    except Exception as ex:
        tap(False, "ZeRO-%d into DCP" % st, repr(ex))
tap(not tr["bad"] and tr["params"] == 21 and tr["groups"] == [16, 5],
    "transformers' Trainer (%s) resumes tpconv's optimizer.pt: each of 21 parameters gets its own tagged state" % tr["optim"], tr)
PY
while IFS= read -r l; do
	case $l in
	"ok "*) ok "${l#ok * - }" ;;
	"not ok "*) bad "${l#not ok * - }" ;;
	"# "*) diag "${l#\# }" ;;
	*) diag "$l" ;;
	esac
done <"$W/py"
done_testing
