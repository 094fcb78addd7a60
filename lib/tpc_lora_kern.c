/* tpc_lora_kern.c - LoRA's row kernel (tpc_lora_kern.h) for the vector
 * instructions this CPU has, chosen once: AVX-512, AVX2 or the compiler's
 * baseline. Every variant multiplies and adds separately (the project is
 * built as ISO C11, where GCC contracts nothing, and -ffp-contract=off is
 * asked for here too), so all give the same bits. */
#include <stdint.h>
#include <string.h>

#include "tpc_lora.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define LK_MR 4 /* rows of a tile */

typedef tpc_lora_kern_fn kern_fn;
static kern_fn pick(void);

#define LK_NAME kern_base
#define LK_VB 16
#define LK_NV 2
#define LK_ATTR
#include "tpc_lora_kern.h"
#undef LK_NAME
#undef LK_VB
#undef LK_NV
#undef LK_ATTR

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define LK_X86 1
#define LK_NAME kern_avx2
#define LK_VB 32
#define LK_NV 2
#define LK_ATTR __attribute__((target("avx2")))
#include "tpc_lora_kern.h"
#undef LK_NAME
#undef LK_VB
#undef LK_NV
#undef LK_ATTR

#define LK_NAME kern_avx512
#define LK_VB 64
#define LK_NV 4
#define LK_ATTR __attribute__((target("avx512f")))
#include "tpc_lora_kern.h"
#undef LK_NAME
#undef LK_VB
#undef LK_NV
#undef LK_ATTR
#endif

static kern_fn pick(void)
{
	kern_fn all[3];
	return all[tpc__lora_kernels(all) - 1];
}

size_t tpc__lora_kernels(tpc_lora_kern_fn all[3])
{
	size_t n = 0;
	all[n++] = kern_base;
#ifdef LK_X86
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2"))
		all[n++] = kern_avx2;
	if (__builtin_cpu_supports("avx512f"))
		all[n++] = kern_avx512;
#endif
	return n;
}

void tpc__lora_kernel(float *V, const float *co, const float *op, int64_t nr, int64_t C, int64_t ld, int64_t r,
		      float s)
{
	static kern_fn fn;
	kern_fn f = __atomic_load_n(&fn, __ATOMIC_RELAXED);
	if (!f) {
		f = pick();
		__atomic_store_n(&fn, f, __ATOMIC_RELAXED);
	}
	f(V, co, op, nr, C, ld, r, s);
}
