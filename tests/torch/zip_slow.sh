#!/bin/bash
# zip_slow.sh TEST_ZIP - a zip with a record over 4 GiB: written by the zip
# writer, read back by the reader (layout, zip64 fields, descriptor, CRC),
# listed by Python's zipfile, and, when /usr/bin/python3 has torch and the
# machine has the memory, loaded by torch.load. Needs ~4.3 GB of disk,
# removed afterwards. Exit 77 (meson: skipped) without the disk space.
set -euo pipefail
tool=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/tpc_zip_slow.XXXXXX")
trap 'rm -rf "$dir"' EXIT
avail_kb=$(df -Pk "$dir" | awk 'NR == 2 { print $4 }')
if [ "$avail_kb" -lt 4700000 ]; then
    echo "skip: $dir has ${avail_kb} KiB free, the test needs ~4.3 GB"
    exit 77
fi
py=${TPC_PY:-/usr/bin/python3}
[ -x "$py" ] || py=python3
N=$(( (1 << 32) + 4096 ))

torch_ok=0
mem_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
if "$py" -c "import torch" 2>/dev/null && [ "${mem_kb:-0}" -gt 10000000 ]; then
    torch_ok=1
    # data.pkl for {'a': uint8 tensor over the whole 4 GiB record}, pickled
    # the way torch.save does it, without allocating the tensor
    "$py" - "$dir/data.pkl" "$N" <<'EOF'
import collections, pickle, sys, torch
n = int(sys.argv[2])
class Storage: pass
st = Storage()
class Tensor:
    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, (st, 0, (n,), (1,), False, collections.OrderedDict()))
class P(pickle.Pickler):
    def persistent_id(self, obj):
        return ("storage", torch.ByteStorage, "0", "cpu", n) if obj is st else None
with open(sys.argv[1], "wb") as f:
    P(f, protocol=2).dump({"a": Tensor()})
EOF
    "$tool" --slow "$dir" "$dir/data.pkl"
else
    echo "note: torch.load part skipped (no torch in $py or under 10 GB of memory available)"
    "$tool" --slow "$dir"
fi

"$py" - "$dir/big.pt" "$N" <<'EOF'
import sys, zipfile
n = int(sys.argv[2])
z = zipfile.ZipFile(sys.argv[1])
sizes = {i.filename: i.file_size for i in z.infolist()}
want = {"big/data/0": n, "big/data/1": 100, "big/data/2": 0, "big/version": 2}
assert all(sizes[k] == v for k, v in want.items()) and len(sizes) == 5, sizes
assert z.getinfo("big/data/1").header_offset >= 1 << 32
assert len(z.read("big/data/1")) == 100 and z.read("big/version") == b"3\n"  # CRC-checked
print("zipfile: sizes and offsets ok")
EOF

if [ "$torch_ok" = 1 ]; then
    "$py" - "$dir/big.pt" "$N" <<'EOF'
import sys, torch
n = int(sys.argv[2])
a = torch.load(sys.argv[1], weights_only=True)["a"]
assert a.dtype == torch.uint8 and a.numel() == n
assert bytes(a[:4].tolist()) == b"HEAD" and bytes(a[-4:].tolist()) == b"TAIL"
assert int(a[4:-4].count_nonzero()) == 0
print("torch %s: loads the 4 GiB record" % torch.__version__)
EOF
fi
