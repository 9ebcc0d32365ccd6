// rownorm family (stub: being written).
#include "ckjit_prelude.h"
typedef @DTYPE@ T;
extern "C" __global__ void ckjit_rownorm(const T *x) { (void)x; }
