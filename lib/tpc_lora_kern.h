/*
 * tpc_lora_kern.h - the body of LoRA's row kernel, included by tpc_lora_kern.c
 * once per instruction set with LK_NAME (the function), LK_VB (vector bytes),
 * LK_NV (vectors per row of a tile) and LK_ATTR (its target attribute)
 * defined; not a header of its own.
 *
 * V[o, j] = V[o, j] + (P[o, j] * s), P[o, j] = sum over k = 0..r-1 in that
 * order of co[o, k] * op[k, j] for j < C (V's and op's rows ld apart), every product and every sum rounded to f32
 * (separate multiply and add, never fused: tpc_lora.h). A tile is LK_MR rows
 * by LK_NV vectors of columns held in registers while k runs, so each element
 * keeps its own order of sums while the lanes run side by side; columns go
 * in blocks whose slice of op stays in the first-level cache across rows.
 */
LK_ATTR static void LK_NAME(float *restrict V, const float *restrict co, const float *restrict op, int64_t nr,
			    int64_t C, int64_t ld, int64_t r, float s)
{
	typedef float vf __attribute__((vector_size(LK_VB)));
	enum { VL = LK_VB / 4, W = VL * LK_NV };
	const int64_t Cv = C / W * W;
	for (int64_t j = 0; j < Cv; j += W) {
		for (int64_t o = 0; o < nr; o += LK_MR) {
			const int64_t mr = nr - o < LK_MR ? nr - o : LK_MR;
			const float *cf[LK_MR];
			vf acc[LK_MR][LK_NV];
#pragma GCC unroll 8
			for (int m = 0; m < LK_MR; m++) {
				cf[m] = co + (o + (m < mr ? m : 0)) * r; /* a short tile repeats its first row */
#pragma GCC unroll 8
				for (int v = 0; v < LK_NV; v++)
					acc[m][v] = (vf){0};
			}
			const float *a = op + j;
			for (int64_t k = 0; k < r; k++, a += ld) {
				vf x[LK_NV];
#pragma GCC unroll 8
				for (int v = 0; v < LK_NV; v++)
					memcpy(&x[v], a + v * VL, sizeof(vf));
#pragma GCC unroll 8
				for (int m = 0; m < LK_MR; m++) {
					const vf b = (vf){0} + cf[m][k];
#pragma GCC unroll 8
					for (int v = 0; v < LK_NV; v++) {
						vf p = b * x[v];
						acc[m][v] = acc[m][v] + p;
					}
				}
			}
#pragma GCC unroll 8
			for (int m = 0; m < LK_MR; m++) {
				if (m >= mr)
					break;
				float *row = V + (o + m) * ld + j;
#pragma GCC unroll 8
				for (int v = 0; v < LK_NV; v++) {
					vf w, d = acc[m][v] * s;
					memcpy(&w, row + v * VL, sizeof(vf));
					w = w + d;
					memcpy(row + v * VL, &w, sizeof(vf));
				}
			}
		}
	}
	/* the columns past the last whole tile, one at a time, the same order */
	for (int64_t o = 0; o < nr && Cv < C; o++) {
		const float *c = co + o * r;
		for (int64_t j = Cv; j < C; j++) {
			float ac = 0;
			for (int64_t k = 0; k < r; k++) {
				float p = c[k] * op[k * ld + j];
				ac = ac + p;
			}
			float d = ac * s;
			V[o * ld + j] = V[o * ld + j] + d;
		}
	}
}
