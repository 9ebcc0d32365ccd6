/* GEMM Stream-K: how the tiles and their K steps are shared among the
 * blocks (the split, ckjit_streamk, is in abi/gemm_args.h: the kernels walk
 * it too). */
#ifndef CKJIT_RUNTIME_OPS_GEMM_STREAMK_H
#define CKJIT_RUNTIME_OPS_GEMM_STREAMK_H

#include <stdint.h>

#include "abi/gemm_args.h"

/* Plans Stream-K for `tiles` tiles of `iters` K steps on up to `sms`
 * blocks; returns the grid. */
int64_t ckjit__gemm_plan_streamk(int64_t tiles, int64_t iters, int64_t sms, ckjit_streamk *s);

#endif
