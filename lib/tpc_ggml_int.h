/* tpc_ggml_int.h - lib-private: the block quantizers of tpc_ggml_quant.c,
 * which lib/tpc_ggml.c's type table names (its quant column). Each turns
 * nb blocks' values at x into nb blocks at y, as ggml's
 * quantize_row_<type>_ref does. */
#ifndef TPC_GGML_INT_H
#define TPC_GGML_INT_H

#include <stdint.h>

void tpc__ggml_qrow_q4_0(const float *x, uint8_t *y, uint64_t nb);
void tpc__ggml_qrow_q4_1(const float *x, uint8_t *y, uint64_t nb);
void tpc__ggml_qrow_q5_0(const float *x, uint8_t *y, uint64_t nb);
void tpc__ggml_qrow_q5_1(const float *x, uint8_t *y, uint64_t nb);
void tpc__ggml_qrow_q8_0(const float *x, uint8_t *y, uint64_t nb);
void tpc__ggml_qrow_q2_k(const float *x, uint8_t *y, uint64_t nb);
void tpc__ggml_qrow_q3_k(const float *x, uint8_t *y, uint64_t nb);
void tpc__ggml_qrow_q4_k(const float *x, uint8_t *y, uint64_t nb);
void tpc__ggml_qrow_q5_k(const float *x, uint8_t *y, uint64_t nb);
void tpc__ggml_qrow_q6_k(const float *x, uint8_t *y, uint64_t nb);

#endif
