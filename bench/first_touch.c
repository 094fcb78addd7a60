/* first_touch.c - what touching fresh memory costs on this machine, against
 * touching it again: memset and memcpy of a buffer of N MiB, twice each.
 * On a VM that hands freed memory back to its host (virtio-balloon free page
 * reporting) the first pass pays a host fault per page; every converter's
 * new page cache pays the same. usage: cc -O2 bench/first_touch.c -o /tmp/ft
 * && /tmp/ft 4096 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	size_t n = (size_t)(argc > 1 ? atol(argv[1]) : 1024) << 20;
	char *a = malloc(n), *b = malloc(n);
	if (!a || !b)
		return 1;
	double t = now();
	memset(a, 1, n);
	printf("memset, first touch   %6.2f GB/s\n", (double)n / 1e9 / (now() - t));
	t = now();
	memset(a, 2, n);
	printf("memset, again         %6.2f GB/s\n", (double)n / 1e9 / (now() - t));
	t = now();
	memcpy(b, a, n);
	printf("memcpy, fresh target  %6.2f GB/s\n", (double)n / 1e9 / (now() - t));
	t = now();
	memcpy(b, a, n);
	printf("memcpy, again         %6.2f GB/s\n", (double)n / 1e9 / (now() - t));
	return b[n / 2] == 2 ? 0 : 1;
}
