#!/usr/bin/python3
"""usage: /usr/bin/python3 gen_big.py OUT.pt [legacy]
       /usr/bin/python3 gen_big.py --check FILE.pt EXPECTED.json

Write, with real torch.save, a checkpoint whose one storage is larger than
4 GiB (1100 MiB + 7 float32 elements, ~4.3 GiB), with a second view into that
storage that starts past 4 GiB and a small tensor stored after it (its zip
record lies past 4 GiB). Print the expected {name: [dtype, shape, sha256]} as
JSON. The big tensor holds distinct values (not zeros), so reading at a wrong
offset changes its hash.

--check loads FILE.pt with real torch.load(weights_only=True) and compares it
with EXPECTED.json; exit 0 when equal.
"""
import json
import sys

import torch

import tpc_torch as tt

N = 1100 * 1024 * 1024 + 7


def main():
    if sys.argv[1] == '--check':
        obj = torch.load(sys.argv[2], map_location='cpu', weights_only=True)
        got = tt.describe(obj)
        with open(sys.argv[3]) as f:
            exp = json.load(f)
        diffs = tt.compare(exp, got)
        for d in diffs:
            print('# ' + d)
        return 1 if diffs else 0
    out = sys.argv[1]
    legacy = len(sys.argv) > 2 and sys.argv[2] == 'legacy'
    # distinct 32-bit patterns, stored as float32 (hashes compare bits, NaN patterns included)
    big = torch.arange(N, dtype=torch.int32).mul_(-1640531535).view(torch.float32)
    obj = {'big': big, 'past_4GiB_view': big[N - 9:N - 1], 'tail': torch.arange(5, dtype=torch.int64)}
    assert obj['past_4GiB_view'].storage_offset() * 4 > 4 << 30
    torch.save(obj, out, _use_new_zipfile_serialization=not legacy)
    json.dump(tt.describe(obj), sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main())
