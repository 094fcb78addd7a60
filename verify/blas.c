/* blas.c - OpenBLAS, opened at the first product rather than linked.
 *
 * Only verify's products use it, and linking it made every tpconv start
 * relocate libopenblas, libgfortran and libquadmath and run OpenBLAS's
 * initialisation. The two functions the kernels call are resolved with
 * dlsym from the library the build found, opened by its SONAME (meson reads
 * it: libopenblas.so.0 from Debian's libopenblas-openmp-dev), so the calls,
 * and their bits, are those of a linked OpenBLAS. When it cannot be opened
 * the kernels take the hand-written loops of a build without OpenBLAS. */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "vint.h"

#ifdef TPC_HAVE_CBLAS
static bool open_lib(const char *name, tpc__blas *b)
{
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return false;
	*(void **)&b->sgemm = dlsym(h, "cblas_sgemm");
	*(void **)&b->dgemm = dlsym(h, "cblas_dgemm");
	if (!b->sgemm || !b->dgemm) {
		dlclose(h);
		memset(b, 0, sizeof(*b));
		return false;
	}
	return true; /* the handle stays open for the life of the process */
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static tpc__blas found;
static bool found_ok;

/* by its SONAME where the loader finds it, else in the folder the build
 * found it in (an OpenBLAS outside the loader's paths) */
static void open_found(void)
{
	found_ok = open_lib(TPC_BLAS_SONAME, &found);
#ifdef TPC_BLAS_LIBDIR
	if (!found_ok)
		found_ok = open_lib(TPC_BLAS_LIBDIR "/" TPC_BLAS_SONAME, &found);
#endif
}
#endif

bool tpc__blas_open(const char *name, tpc__blas *b)
{
	memset(b, 0, sizeof(*b));
#ifdef TPC_HAVE_CBLAS
	if (name && !strcmp(name, "none"))
		return false;
	if (name && *name)
		return open_lib(name, b);
	pthread_once(&once, open_found);
	if (found_ok)
		*b = found;
	return found_ok;
#else
	(void)name;
	return false;
#endif
}
