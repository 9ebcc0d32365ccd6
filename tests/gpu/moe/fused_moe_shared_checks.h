/* fused_moe_gpu's checks of shared experts (fused_moe_shared_checks.c):
 * plain ones against the layer that routes them in extra slots, gated ones
 * against the f64 reference.  Each returns the failures it added. */
#ifndef CKJIT_TESTS_GPU_MOE_FUSED_MOE_SHARED_CHECKS_H
#define CKJIT_TESTS_GPU_MOE_FUSED_MOE_SHARED_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "fused_moe_device.h"

/* S shared experts "as slots" of c's layer, or (alone) with every routed id -1. */
long fm_shared_check(gt_ctx *ctx, size_t index, uint64_t seed, fm_case c, int S, int alone);
/* S gated shared experts of inter c.inter, every routed id -1. */
long fm_gated_check(gt_ctx *ctx, size_t index, uint64_t seed, fm_case c, int S);

#endif
