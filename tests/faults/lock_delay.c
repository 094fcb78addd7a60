/* lock_delay.c - an LD_PRELOAD shim for sweep_race_test.sh. It holds every
 * blocking exclusive flock() of a tpconv temporary (".<name>.tpc-XXXXXX")
 * back for TPC_TEST_LOCK_DELAY_MS milliseconds, so the instant between
 * mkostemp() and the lock (lib/tpc_io.c create_temp), in which another run's
 * sweep may take the file for a dead run's, lasts long enough for a test to
 * land in it every time. After the lock it appends the temporary's name to
 * TPC_TEST_LOCK_LOG when the file was removed meanwhile: the sweep did land
 * there. The test's own; nothing in the program reads these variables. */

#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

/* The path fd was opened as (" (deleted)" appended once it is unlinked). */
static bool fd_path(int fd, char *buf, size_t n)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t k = readlink(link, buf, n - 1);
	if (k <= 0)
		return false;
	buf[k] = '\0';
	return true;
}

static bool is_temp(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return b[0] == '.' && strstr(b, ".tpc-") != NULL;
}

int flock(int fd, int op)
{
	static int (*real)(int, int);
	char path[4096];
	if (!real)
		real = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
	bool temp = op == LOCK_EX && fd_path(fd, path, sizeof(path)) && is_temp(path);
	const char *d = getenv("TPC_TEST_LOCK_DELAY_MS");
	if (temp && d) {
		long ms = strtol(d, NULL, 10);
		struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) != 0)
			;
	}
	int r = real(fd, op);
	const char *log = getenv("TPC_TEST_LOCK_LOG");
	size_t l;
	if (temp && r == 0 && log && fd_path(fd, path, sizeof(path)) && (l = strlen(path)) > 10 &&
	    !strcmp(path + l - 10, " (deleted)")) {
		int lf = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (lf >= 0) {
			path[l - 10] = '\n';
			if (write(lf, path, l - 9) < 0)
				path[0] = '\0';
			close(lf);
		}
	}
	return r;
}
