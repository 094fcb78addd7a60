"""Tamper with one rank file of a shard set, finding the bytes by the
reference's (tests/shard/megatron_dist_test.sh: verify must name what changed).

  dp_tamper.py REF.safetensors FILE swap NAME_A NAME_B
      reference tensors A and B (the same size; each stored whole, once, in
      FILE: an expert's matrices on its EP rank) trade places in FILE
  dp_tamper.py REF.safetensors FILE flip NAME K N
      slice K of N of NAME's rows (rank K's column-parallel slice at tp N,
      stored once in FILE) gets its first element's sign flipped

FILE is changed in place; the exit status is 1 when the bytes are not found
exactly once (the set is not laid out as the test assumes)."""
import os
import sys

sys.modules.setdefault('torch', None)  # read_safetensors needs no torch: skip its import
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import tpctest  # noqa: E402


def find_once(data, what, name):
    at = data.find(what)
    if at < 0 or data.find(what, at + 1) >= 0:
        sys.exit(f"dp_tamper: the bytes of {name} are {'not' if at < 0 else 'more than once'} in the file")
    return at


def main():
    ref, path, op = sys.argv[1], sys.argv[2], sys.argv[3]
    t = tpctest.read_safetensors(ref)
    with open(path, 'rb') as f:
        data = bytearray(f.read())
    if op == 'swap':
        a, b = t[sys.argv[4]][2], t[sys.argv[5]][2]
        if len(a) != len(b) or a == b:
            sys.exit('dp_tamper: swap needs two different tensors of one size')
        ia, ib = find_once(data, a, sys.argv[4]), find_once(data, b, sys.argv[5])
        data[ia:ia + len(a)], data[ib:ib + len(b)] = b, a
    elif op == 'flip':
        dt, shape, raw = t[sys.argv[4]]
        k, n = int(sys.argv[5]), int(sys.argv[6])
        rb = len(raw) // shape[0] * (shape[0] // n)
        at = find_once(data, raw[k * rb:(k + 1) * rb], sys.argv[4])
        es = {'F32': 4, 'F16': 2, 'BF16': 2, 'F64': 8}[dt]
        data[at + es - 1] ^= 0x80  # the sign bit of the first element (little-endian)
    else:
        sys.exit(f'dp_tamper: unknown operation {op}')
    with open(path, 'wb') as f:
        f.write(data)


if __name__ == '__main__':
    main()
