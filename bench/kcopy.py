# In-kernel copy of a file (copy_file_range), the floor for any converter
# that moves the same bytes on the same disk (the bench times it with a sync
# after, like every other step). usage: kcopy.py SRC DST, or
# kcopy.py SRC... DIR (several files into a folder, each under its own name)
import os, sys


def copy(src, dst):
    with open(src, 'rb') as s, open(dst, 'wb') as d:
        n = os.fstat(s.fileno()).st_size
        off = 0
        while off < n:
            k = os.copy_file_range(s.fileno(), d.fileno(), min(n - off, 1 << 30))
            if k == 0:
                break
            off += k


if len(sys.argv) == 3 and not os.path.isdir(sys.argv[2]):
    copy(sys.argv[1], sys.argv[2])
else:
    for src in sys.argv[1:-1]:
        copy(src, os.path.join(sys.argv[-1], os.path.basename(src)))
