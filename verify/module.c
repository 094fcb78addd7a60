/* module.c - find and open one of tpconv's run-time modules (the CUDA one,
 * the MPI one): they are loaded with dlopen only when a run asks for them,
 * so tpconv links none of their libraries and starts without them. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vint.h"

/* Every module's table opens with its ABI number. */
typedef struct {
	int abi;
} module_head;

int tpc__module_load(const char *path, const char *file, const char *what, const char *sym, int abi, int flags,
		     const void **api, char *why, size_t len)
{
	char exe[PATH_MAX], cand[5][PATH_MAX + 64];
	int nc = 0;
	why[0] = 0;
	if (path && *path)
		snprintf(cand[nc++], sizeof(cand[0]), "%s", path);
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = 0;
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = 0;
			snprintf(cand[nc++], sizeof(cand[0]), "%s/%s", exe, file);
			snprintf(cand[nc++], sizeof(cand[0]), "%s/../verify/%s", exe, file); /* build tree */
			snprintf(cand[nc++], sizeof(cand[0]), "%s/../lib/tpconv/%s", exe, file);
		}
	}
#ifdef TPC_MODULE_DIR
	snprintf(cand[nc++], sizeof(cand[0]), "%s/%s", TPC_MODULE_DIR, file); /* the install's libdir */
#endif
	for (int i = 0; i < nc; i++) {
		if (access(cand[i], R_OK))
			continue;
		void *h = dlopen(cand[i], flags);
		if (!h) {
			/* a module that is there but cannot load: the libraries it needs are missing */
			snprintf(why, len, "cannot load the %s module '%.200s': %.250s", what, cand[i], dlerror());
			continue;
		}
		const void *(*get)(void);
		*(void **)&get = dlsym(h, sym);
		const module_head *head = get ? get() : NULL;
		if (!head || head->abi != abi) {
			snprintf(why, len, "the %s module '%.300s' has ABI %d, this tpconv needs %d", what, cand[i],
				 head ? head->abi : -1, abi);
			dlclose(h);
			continue;
		}
		/* the handle stays open for the life of the process */
		*api = head;
		return 0;
	}
	return -1;
}
