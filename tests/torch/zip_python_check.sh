#!/bin/bash
# zip_python_check.sh TEST_ZIP - archives written by tpconv's zip writer are
# checked by Python's zipfile (testzip: every CRC) and loaded by real torch
# (/usr/bin/python3, Debian's python3-torch). Exit 77 (meson: skipped) when
# there is no /usr/bin/python3; the torch part is skipped when torch does not
# import.
set -euo pipefail
tool=$1
py=${TPC_PY:-/usr/bin/python3}
[ -x /usr/bin/python3 ] || { echo "skip: /usr/bin/python3 not found"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/tpc_zip_py.XXXXXX")
trap 'rm -rf "$dir"' EXIT

"$tool" --write-samples "$dir"
"$py" - "$dir" <<'EOF'
import os, struct, sys, zipfile
d = sys.argv[1]
for name, n in (("sample.pt", 6), ("many.pt", 70000), ("none.zip", 0)):
    p = os.path.join(d, name)
    raw = open(p, "rb").read()
    with zipfile.ZipFile(p) as z:
        assert z.testzip() is None, name
        infos = z.infolist()
        assert len(infos) == n, (name, len(infos))
        for i in infos:
            assert i.compress_type == zipfile.ZIP_STORED, i.filename
            nl, xl = struct.unpack("<HH", raw[i.header_offset + 26:i.header_offset + 30])
            assert (i.header_offset + 30 + nl + xl) % 64 == 0, i.filename
    print("zipfile: %s: %d records, CRCs and 64-byte alignment ok" % (name, n))
with zipfile.ZipFile(os.path.join(d, "sample.pt")) as z:
    assert z.read("sample/version") == b"3\n"
    assert z.getinfo("sample/data/1").file_size == 0
EOF

if ! "$py" -c "import torch" 2>/dev/null; then
    echo "note: torch does not import in $py; torch interop skipped"
    exit 0
fi
"$py" - "$dir" <<'EOF'
import collections, sys, torch
torch.manual_seed(0)
sd = collections.OrderedDict()
sd["w"] = torch.randn(3, 4)
sd["b"] = torch.arange(5, dtype=torch.int64)
sd["h"] = torch.randn(2, 2).half()
sd["empty"] = torch.zeros(0)
sd["mask"] = torch.tensor([True, False])
sd["row"] = sd["w"][1]  # a view sharing w's storage
torch.save(sd, sys.argv[1] + "/orig.pt")
EOF
# same names: byte for byte what torch wrote
"$tool" --rewrite "$dir/orig.pt" "$dir/same.pt" -
cmp "$dir/orig.pt" "$dir/same.pt"
# another prefix: torch loads it and finds the same tensors
"$tool" --rewrite "$dir/orig.pt" "$dir/renamed.pt" otherprefix
"$py" - "$dir" <<'EOF'
import sys, torch, zipfile
d = sys.argv[1]
a = torch.load(d + "/orig.pt", weights_only=True)
b = torch.load(d + "/renamed.pt", weights_only=True)
assert list(a) == list(b)
for k in a:
    assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k], b[k]), k
assert b["row"].storage().data_ptr() == b["w"].storage().data_ptr()
assert zipfile.ZipFile(d + "/renamed.pt").namelist()[0].startswith("otherprefix/")
assert torch.load(d + "/sample.pt", weights_only=True) == {}
print("torch %s: loads the rewritten checkpoint and the sample archive" % torch.__version__)
EOF
