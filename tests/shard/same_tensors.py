# Do two `tpconv inspect --json --hash` outputs hold the same tensors (name, dtype,
# shape, SHA-256), whatever their order? usage: same_tensors.py A.json B.json
# Exit 0 if equal; else print the first differences and exit 1.
import json, sys
def load(p):
    return {t['name']: (t['dtype'], tuple(t['shape']), t.get('sha256')) for t in json.load(open(p))['tensors']}
a, b = load(sys.argv[1]), load(sys.argv[2])
bad = [n for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)]
for n in bad[:5]:
    print(f'{n}: {a.get(n)} != {b.get(n)}')
sys.exit(1 if bad else 0)
