/* test_tune_record.c's view of the GEMM's record: the GEMM's headers and
 * the attention's both name BIAS_NONE (their kernels' enum constants), so
 * they cannot share a translation unit; these wrappers pass a gemm_choice
 * as its four values, in order (pipe, tile, stages, splits). */
#include "tune_record_gemm.h"

#include "runtime/ops/gemm/tune.h"

int gemm_side_any(const char *dir) { return ckjit__gemm_tune_any(dir); }

int gemm_side_mode(void) { return ckjit__gemm_tune_mode(); }

int gemm_side_lookup(const char *dir, const char *cls, int out[4]) {
  gemm_choice c;
  if (!ckjit__gemm_tune_lookup(dir, cls, &c)) return 0;
  out[0] = c.pipe, out[1] = c.tile, out[2] = c.stages, out[3] = c.splits;
  return 1;
}

void gemm_side_store(const char *dir, const char *cls, const int v[4]) {
  const gemm_choice c = {v[0], v[1], v[2], v[3]};
  ckjit__gemm_tune_store(dir, cls, &c);
}
