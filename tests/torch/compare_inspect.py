#!/usr/bin/env python3
"""usage: compare_inspect.py EXPECTED.json KEY INSPECT.json [--no-hash] [--order]
                                         [--expected-inspect] [--dequantized]
       compare_inspect.py EXPECTED.json --batch LIST [flags]

Compare `tpconv inspect --json --hash` output (INSPECT.json) with the entry KEY
of EXPECTED.json ({file: {name: [torch dtype, shape, sha256]}}, the layout of
../shared/corpus/expected_torch.json). KEY '-' means EXPECTED.json is itself
one {name: [...]} map. With --expected-inspect, EXPECTED.json is another
inspect output. --dequantized expects float32 (hash not compared) where
EXPECTED has a quantized tensor. --order also checks that tensors come in the expected order.
Prints '# ' lines with the differences; exit 0 when equal, 1 when not,
2 when INSPECT.json is not a valid inspect object. Needs no torch.
--batch: LIST has a line "KEY<TAB>INSPECT.json[<TAB>FLAGS]" per comparison; each one's
'# ' lines go to INSPECT.json.diff and its exit status to INSPECT.json.rc (one
process for many: a test's Python call costs ~70-90 ms of CPU)."""
import json
import sys

import tpc_torch as tt


def main():
    argv = sys.argv[1:]
    if '--batch' in argv:
        i = argv.index('--batch')
        lst = argv[i + 1]
        rest = argv[:i] + argv[i + 2:]
        exp_path = [a for a in rest if not a.startswith('--')][0]
        flags = {a for a in rest if a.startswith('--')}
        with open(exp_path) as f:
            exp_all = json.load(f)
        with open(lst) as f:
            for line in f:
                key, got_path, *more = line.rstrip('\n').split('\t')
                lines = []
                rc = compare_one(exp_all, key, got_path, flags | set(' '.join(more).split()), lines)
                with open(got_path + '.diff', 'w') as o:
                    o.write(''.join(x + '\n' for x in lines))
                with open(got_path + '.rc', 'w') as o:
                    o.write('%d\n' % rc)
        return 0
    args = [a for a in argv if not a.startswith('--')]
    flags = {a for a in argv if a.startswith('--')}
    exp_path, key, got_path = args
    with open(exp_path) as f:
        exp = json.load(f)
    lines = []
    rc = compare_one(exp, key, got_path, flags, lines)
    for d in lines:
        print(d)
    return rc


def compare_one(exp, key, got_path, flags, out):
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
        out.append('# inspect output is not JSON: %s' % e)
        return 2
    if not isinstance(doc, dict) or 'tensors' not in doc:
        out.append('# inspect output has no "tensors" list')
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
    out.extend('# ' + d for d in diffs)
    return 1 if diffs else 0


if __name__ == '__main__':
    sys.exit(main())
