/*
 * tpc_ggml_kq.h - the body of the K-quants' scale searches in vector lanes,
 * included by tpc_ggml_kq.c once per instruction set with KQ_W (lanes),
 * KQ_N(name) (the names of this variant) and KQ_ATTR (its target attribute)
 * defined; not a header of its own.
 *
 * Each lane is one sub-block and runs exactly the scalar search of
 * tpc_ggml_kq.c (kq_qkx2_one, kq_qx_one, kq_q3_one: ggml's make_qkx2_quants,
 * make_qx_quants, make_q3_quants): the same F32 operations in the same
 * order, every sum
 * over the sub-block's elements from the first to the last, a branch of
 * the scalar code a per-lane mask here. So the lanes add nothing up
 * across sub-blocks and the bits are the scalar ones; what changes is that
 * up to KQ_W independent chains of additions advance together instead of
 * one waiting on the latency of the next.
 */
typedef float KQ_N(vf) __attribute__((vector_size(4 * KQ_W)));
typedef int32_t KQ_N(vi) __attribute__((vector_size(4 * KQ_W)));
#define VF KQ_N(vf)
#define VI KQ_N(vi)
#define KQ_INL KQ_ATTR static inline __attribute__((always_inline))

/* m ? a : b lane by lane (m all ones or all zeros) */
KQ_INL VF KQ_N(sel)(VI m, VF a, VF b)
{
	return (VF)(((VI)a & m) | ((VI)b & ~m));
}

KQ_INL VI KQ_N(seli)(VI m, VI a, VI b)
{
	return (a & m) | (b & ~m);
}

KQ_INL VF KQ_N(vabs)(VF a)
{
	return (VF)((VI)a & 0x7fffffff);
}

/* nearest_int (tpc__nearest_int) clamped to [lo, hi] */
KQ_INL VI KQ_N(qlev)(VF v, VI lo, VI hi)
{
	VF f = v + 12582912.0f;
	VI l = ((VI)f & 0x007fffff) - 0x00400000;
#if KQ_W == 16
	return (VI)_mm512_min_epi32(_mm512_max_epi32((__m512i)l, (__m512i)lo), (__m512i)hi);
#elif KQ_W == 8
	return (VI)_mm256_min_epi32(_mm256_max_epi32((__m256i)l, (__m256i)lo), (__m256i)hi);
#else
	l = KQ_N(seli)(l < lo, lo, l);
	return KQ_N(seli)(l > hi, hi, l);
#endif
}

/* xt[i] lane k: element i of sub-block k (n values each, one after
 * another at x), 0 in the lanes past cnt (a masked gather: those lanes
 * read nothing) */
KQ_INL void KQ_N(load)(const float *x, int cnt, int n, VF *xt)
{
#if KQ_W == 16
	const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
					       _mm512_set1_epi32(n));
	const __mmask16 m = (__mmask16)(cnt >= 16 ? 0xffff : (1u << cnt) - 1);
	for (int i = 0; i < n; i++)
		xt[i] = (VF)_mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, x + i, 4);
#elif KQ_W == 8
	const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(n));
	const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(cnt), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	for (int i = 0; i < n; i++)
		xt[i] = (VF)_mm256_mask_i32gather_ps(_mm256_setzero_ps(), x + i, idx, _mm256_castsi256_ps(m), 4);
#else
	float t[32 * KQ_W] __attribute__((aligned(64)));
	for (int k = 0; k < KQ_W; k++)
		for (int i = 0; i < n; i++)
			t[i * KQ_W + k] = k < cnt ? x[k * n + i] : 0.0f;
	for (int i = 0; i < n; i++)
		memcpy(&xt[i], t + i * KQ_W, sizeof(VF));
#endif
}

/* kq_qkx2_one for cnt <= 2 KQ_W sub-blocks of n <= 32 values at once: two
 * groups of KQ_W lanes whose steps interleave (each trial's error sum is a
 * chain of dependent additions; the other group's fills the wait), `mad`
 * a constant in each copy of the body */
KQ_INL void KQ_N(qkx2_body)(const float *x, int cnt, const tpc__kq_args *a, tpc__kq_fit *out, const int mad)
{
	enum { G = 2 };
	const int n = a->n < 1 ? 1 : a->n > 32 ? 32 : a->n; /* 16 or 32 */
	VF xt[G][32], wt[G][32], lf[G][32];
	VF mn[G], mx[G], sw[G], sx[G], mn0[G], isc[G], scale[G], best[G], wis[G], wm[G];
	VI flat[G];
	const VI lo = (VI){0}, hi = (VI){0} + a->nmax;
	for (int g = 0; g < G; g++) {
		int c = cnt - g * KQ_W;
		KQ_N(load)(x + g * KQ_W * n, c < 0 ? 0 : c > KQ_W ? KQ_W : c, n, xt[g]);
	}
	for (int g = 0; g < G; g++) {
		if (a->wkind == TPC_KQ_W_ABS) {
			for (int i = 0; i < n; i++)
				wt[g][i] = KQ_N(vabs)(xt[g][i]);
		} else {
			VF s2 = (VF){0};
			for (int i = 0; i < n; i++)
				s2 = s2 + xt[g][i] * xt[g][i];
			float av[KQ_W];
			VF q = s2 / (float)n, va;
			for (int k = 0; k < KQ_W; k++)
				av[k] = sqrtf(q[k]);
			memcpy(&va, av, sizeof va);
			for (int i = 0; i < n; i++)
				wt[g][i] = va + KQ_N(vabs)(xt[g][i]);
		}
		mn[g] = mx[g] = xt[g][0];
		sw[g] = wt[g][0];
		sx[g] = wt[g][0] * xt[g][0];
		for (int i = 1; i < n; i++) {
			mn[g] = KQ_N(sel)(xt[g][i] < mn[g], xt[g][i], mn[g]);
			mx[g] = KQ_N(sel)(xt[g][i] > mx[g], xt[g][i], mx[g]);
			sw[g] = sw[g] + wt[g][i];
			sx[g] = sx[g] + wt[g][i] * xt[g][i];
		}
		mn[g] = KQ_N(sel)(mn[g] > 0.0f, (VF){0}, mn[g]);
		flat[g] = mx[g] == mn[g];
		mn0[g] = mn[g];
		isc[g] = (float)a->nmax / (mx[g] - mn[g]);
		scale[g] = 1.0f / isc[g];
		best[g] = (VF){0};
		for (int i = 0; i < n; i++) {
			VF l = __builtin_convertvector(KQ_N(qlev)(isc[g] * (xt[g][i] - mn[g]), lo, hi), VF);
			VF d = scale[g] * l + mn[g] - xt[g][i];
			d = mad ? KQ_N(vabs)(d) : d * d;
			best[g] = best[g] + wt[g][i] * d;
		}
		wis[g] = isc[g];
		wm[g] = mn[g];
	}
	for (int is = 0; is <= a->nstep; is++) {
		const float c = a->rmin + a->rdelta * (float)is + (float)a->nmax;
		VF sl[G], sl2[G], sxl[G], ts[G], tm[G], D[G], err[G];
#pragma GCC unroll 2
		for (int g = 0; g < G; g++) {
			isc[g] = c / (mx[g] - mn[g]);
			sl[g] = sl2[g] = sxl[g] = err[g] = (VF){0};
		}
		for (int i = 0; i < n; i++) {
#pragma GCC unroll 2
			for (int g = 0; g < G; g++) {
				lf[g][i] = __builtin_convertvector(KQ_N(qlev)(isc[g] * (xt[g][i] - mn[g]), lo, hi), VF);
				VF wl = wt[g][i] * lf[g][i];
				sl[g] = sl[g] + wl;
				sl2[g] = sl2[g] + wl * lf[g][i];
				sxl[g] = sxl[g] + wl * xt[g][i];
			}
		}
#pragma GCC unroll 2
		for (int g = 0; g < G; g++) {
			D[g] = sw[g] * sl2[g] - sl[g] * sl[g];
			ts[g] = (sw[g] * sxl[g] - sx[g] * sl[g]) / D[g];
			tm[g] = (sl2[g] * sx[g] - sl[g] * sxl[g]) / D[g];
			VI pos = tm[g] > 0.0f;
			tm[g] = KQ_N(sel)(pos, (VF){0}, tm[g]);
			ts[g] = KQ_N(sel)(pos, sxl[g] / sl2[g], ts[g]);
		}
		for (int i = 0; i < n; i++) {
#pragma GCC unroll 2
			for (int g = 0; g < G; g++) {
				VF d = ts[g] * lf[g][i] + tm[g] - xt[g][i];
				d = mad ? KQ_N(vabs)(d) : d * d;
				err[g] = err[g] + wt[g][i] * d;
			}
		}
#pragma GCC unroll 2
		for (int g = 0; g < G; g++) {
			VI win = (D[g] > 0.0f) & (err[g] < best[g]);
			wis[g] = KQ_N(sel)(win, isc[g], wis[g]);
			wm[g] = KQ_N(sel)(win, mn[g], wm[g]);
			best[g] = KQ_N(sel)(win, err[g], best[g]);
			scale[g] = KQ_N(sel)(win, ts[g], scale[g]);
			mn[g] = KQ_N(sel)(win, tm[g], mn[g]);
		}
	}
	for (int k = 0; k < cnt; k++) {
		const int g = k / KQ_W, j = k % KQ_W;
		out[k].flat = flat[g][j] != 0;
		out[k].scale = flat[g][j] ? 0.0f : scale[g][j];
		out[k].mn = flat[g][j] ? -mn0[g][j] : -mn[g][j];
		out[k].is = wis[g][j];
		out[k].m = wm[g][j];
	}
}

KQ_ATTR static void KQ_N(qkx2)(const float *x, int cnt, const tpc__kq_args *a, tpc__kq_fit *out)
{
	if (a->mad)
		KQ_N(qkx2_body)(x, cnt, a, out, 1);
	else
		KQ_N(qkx2_body)(x, cnt, a, out, 0);
}

/* kq_qx_one for cnt <= KQ_W sub-blocks of n <= 32 values at once */
KQ_ATTR static void KQ_N(qx)(const float *x, int cnt, const tpc__kq_args *a, tpc__kq_fit *out)
{
	const int n = a->n < 1 ? 1 : a->n > 32 ? 32 : a->n, nmax = a->nmax; /* 16 or 32 */
	VF xt[32], w[32], wx[32];
	const VI lo = (VI){0} - nmax, hi = (VI){0} + (nmax - 1);
	KQ_N(load)(x, cnt, n, xt);
	for (int i = 0; i < n; i++) { /* ggml's w * x * l is (w * x) * l */
		w[i] = xt[i] * xt[i];
		wx[i] = w[i] * xt[i];
	}
	VF amax = (VF){0}, mx = (VF){0};
	for (int i = 0; i < n; i++) {
		VF ax = KQ_N(vabs)(xt[i]);
		VI m = ax > amax;
		amax = KQ_N(sel)(m, ax, amax);
		mx = KQ_N(sel)(m, xt[i], mx);
	}
	const VI flat = amax < GROUP_MAX_EPS;
	VF isc = (float)-nmax / mx, slx = (VF){0}, sl2 = (VF){0};
	for (int i = 0; i < n; i++) {
		VF l = __builtin_convertvector(KQ_N(qlev)(isc * xt[i], lo, hi), VF);
		slx = slx + wx[i] * l;
		sl2 = sl2 + w[i] * l * l;
	}
	VF scale = KQ_N(sel)(sl2 != 0.0f, slx / sl2, (VF){0}), best = scale * slx, wis = isc;
	for (int is = -9; is <= 9; is++) {
		if (!is)
			continue;
		isc = -((float)nmax + 0.1f * (float)is) / mx;
		slx = sl2 = (VF){0};
		for (int i = 0; i < n; i++) {
			VF l = __builtin_convertvector(KQ_N(qlev)(isc * xt[i], lo, hi), VF);
			slx = slx + wx[i] * l;
			sl2 = sl2 + w[i] * l * l;
		}
		VI win = (sl2 > 0.0f) & (slx * slx > best * sl2);
		VF ns = slx / sl2;
		wis = KQ_N(sel)(win, isc, wis);
		scale = KQ_N(sel)(win, ns, scale);
		best = KQ_N(sel)(win, ns * slx, best);
	}
	for (int k = 0; k < cnt; k++) {
		out[k].flat = flat[k] != 0;
		out[k].scale = flat[k] ? 0.0f : scale[k];
		out[k].mn = 0.0f;
		out[k].is = wis[k];
		out[k].m = 0.0f;
	}
}

/* kq_q3_one for cnt <= KQ_W sub-blocks of n <= 32 values at once: a lane
 * that makes no move in a pass stops there, as the scalar loop breaks */
KQ_ATTR static void KQ_N(q3)(const float *x, int cnt, const tpc__kq_args *a, tpc__kq_fit *out, int8_t *L)
{
	const int n = a->n < 1 ? 1 : a->n > 32 ? 32 : a->n, nmax = a->nmax; /* 16 */
	VF xt[32], w[32], wx[32];
	VI lv[32];
	const VI lo = (VI){0} - nmax, hi = (VI){0} + (nmax - 1);
	KQ_N(load)(x, cnt, n, xt);
	VF amax = (VF){0}, mx = (VF){0};
	for (int i = 0; i < n; i++) {
		VF ax = KQ_N(vabs)(xt[i]);
		VI m = ax > amax;
		amax = KQ_N(sel)(m, ax, amax);
		mx = KQ_N(sel)(m, xt[i], mx);
	}
	const VI flat = amax < GROUP_MAX_EPS;
	VF isc = (float)-nmax / mx, sumlx = (VF){0}, suml2 = (VF){0};
	for (int i = 0; i < n; i++) {
		lv[i] = KQ_N(qlev)(isc * xt[i], lo, hi);
		VF l = __builtin_convertvector(lv[i], VF);
		w[i] = xt[i] * xt[i];
		wx[i] = w[i] * xt[i]; /* ggml's w * x * l is (w * x) * l */
		sumlx = sumlx + wx[i] * l;
		suml2 = suml2 + w[i] * l * l;
	}
	VI act = ~flat;
	for (int t = 0; t < 5; t++) {
		VI chg = (VI){0};
		for (int i = 0; i < n; i++) {
			VF l = __builtin_convertvector(lv[i], VF);
			VF slx = sumlx - wx[i] * l, sl2 = suml2 - w[i] * l * l;
			VI nl = KQ_N(qlev)(xt[i] * sl2 / slx, lo, hi);
			VI m = act & (slx > 0.0f) & (nl != lv[i]);
			VF nf = __builtin_convertvector(nl, VF);
			slx = slx + wx[i] * nf;
			sl2 = sl2 + w[i] * nf * nf;
			m = m & (sl2 > 0.0f) & (slx * slx * suml2 > sumlx * sumlx * sl2);
			lv[i] = KQ_N(seli)(m, nl, lv[i]);
			sumlx = KQ_N(sel)(m, slx, sumlx);
			suml2 = KQ_N(sel)(m, sl2, suml2);
			chg = chg | m;
		}
		act = act & chg;
		int any = 0;
		for (int k = 0; k < KQ_W; k++)
			any |= act[k];
		if (!any)
			break;
	}
	VF sc = KQ_N(sel)(suml2 > 0.0f, sumlx / suml2, (VF){0});
	for (int k = 0; k < cnt; k++) {
		out[k] = (tpc__kq_fit){.scale = flat[k] ? 0.0f : sc[k], .flat = flat[k] != 0};
		for (int i = 0; i < n; i++)
			L[k * n + i] = (int8_t)(flat[k] ? 0 : lv[i][k] + nmax);
	}
}

#undef VF
#undef VI
#undef KQ_INL
