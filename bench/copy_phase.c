/* copy_phase.c - copy_file_range of SRC from byte S to a new file at byte D,
 * to see how the source/destination page phase and the 64 KiB grid change
 * the kernel's work. Count the page-cache folios it makes with
 *   perf stat -e filemap:mm_filemap_add_to_page_cache ./copy_phase SRC DST S D [grid]
 * With "grid", the copy begins with the piece up to the next 64 KiB of the
 * output, as tpc_out_copy_at does. usage: cc -O2 bench/copy_phase.c -o /tmp/cp */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: %s SRC DST S D [grid]\n", argv[0]);
		return 2;
	}
	int s = open(argv[1], O_RDONLY), d = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	struct stat st;
	if (s < 0 || d < 0 || fstat(s, &st))
		return 1;
	loff_t so = atoll(argv[3]), dof = atoll(argv[4]);
	int grid = argc > 5 && !strcmp(argv[5], "grid");
	size_t left = (size_t)st.st_size - (size_t)so;
	while (left) {
		size_t k = left > (1u << 30) ? (1u << 30) : left;
		if (grid && (dof & 0xffff) && k > 0x10000 - (size_t)(dof & 0xffff))
			k = 0x10000 - (size_t)(dof & 0xffff);
		ssize_t r = copy_file_range(s, &so, d, &dof, k, 0);
		if (r <= 0)
			return 1;
		left -= (size_t)r;
	}
	return fsync(d) ? 1 : 0;
}
