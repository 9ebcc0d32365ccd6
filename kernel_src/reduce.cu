// reduce family (stub: being written).
#include "ckjit_prelude.h"
typedef @DTYPE@ T;
extern "C" __global__ void ckjit_reduce(const T *x) { (void)x; }
