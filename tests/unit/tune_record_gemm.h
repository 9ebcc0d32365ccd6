/* The GEMM's CKJIT_TUNE record for test_tune_record.c (tune_record_gemm.c
 * says why it is a separate file). */
#ifndef CKJIT_TESTS_TUNE_RECORD_GEMM_H
#define CKJIT_TESTS_TUNE_RECORD_GEMM_H

int gemm_side_any(const char *dir);
int gemm_side_mode(void);
int gemm_side_lookup(const char *dir, const char *cls, int out[4]);
void gemm_side_store(const char *dir, const char *cls, const int v[4]);

#endif
