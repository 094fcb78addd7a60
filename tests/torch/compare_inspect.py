#!/usr/bin/env python3
"""usage: compare_inspect.py EXPECTED.json KEY INSPECT.json [--no-hash] [--order]
                                         [--expected-inspect] [--dequantized]

Compare `tpconv inspect --json --hash` output (INSPECT.json) with the entry KEY
of EXPECTED.json ({file: {name: [torch dtype, shape, sha256]}}, the layout of
../shared/corpus/expected_torch.json). KEY '-' means EXPECTED.json is itself
one {name: [...]} map. With --expected-inspect, EXPECTED.json is another
inspect output. --dequantized expects float32 (hash not compared) where
EXPECTED has a quantized tensor. --order also checks that tensors come in the expected order.
Prints '# ' lines with the differences; exit 0 when equal, 1 when not,
2 when INSPECT.json is not a valid inspect object. Needs no torch."""
import json
import sys

import tpc_torch as tt


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    flags = {a for a in sys.argv[1:] if a.startswith('--')}
    exp_path, key, got_path = args
    with open(exp_path) as f:
        exp = json.load(f)
    if '--expected-inspect' in flags:
        exp, _ = tt.inspect_to_expected(exp)
    elif key != '-':
        exp = exp[key]
    exp = {k: v for k, v in exp.items() if k != '__metadata__'}
    if '--dequantized' in flags:
        # after --dequantize: quantized tensors are float32, values not compared here
        exp = {k: (['float32', v[1], None] if v[0].startswith('quantized:') else v) for k, v in exp.items()}
    try:
        with open(got_path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print('# inspect output is not JSON: %s' % e)
        return 2
    if not isinstance(doc, dict) or 'tensors' not in doc:
        print('# inspect output has no "tensors" list')
        return 2
    got, dups = tt.inspect_to_expected(doc)
    diffs = tt.compare(exp, got, check_hash='--no-hash' not in flags,
                       check_order=list(exp) if '--order' in flags else None)
    if dups:
        diffs.insert(0, 'duplicate names: %r' % dups[:8])
    if '--no-hash' not in flags:
        nohash = [t['name'] for t in doc['tensors'] if 'sha256' not in t and not t.get('quantized')]
        if nohash:
            diffs.append('no sha256 for %d tensors (was --hash given?)' % len(nohash))
    for d in diffs:
        print('# ' + d)
    return 1 if diffs else 0


if __name__ == '__main__':
    sys.exit(main())
