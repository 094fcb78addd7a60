# In-kernel copy of a file (copy_file_range), the floor for any converter
# that moves the same bytes on the same disk (the bench times it with a sync
# after, like every other step). usage: kcopy.py SRC DST
import os, sys
with open(sys.argv[1], 'rb') as s, open(sys.argv[2], 'wb') as d:
    n = os.fstat(s.fileno()).st_size
    off = 0
    while off < n:
        k = os.copy_file_range(s.fileno(), d.fileno(), min(n - off, 1 << 30))
        if k == 0:
            break
        off += k
