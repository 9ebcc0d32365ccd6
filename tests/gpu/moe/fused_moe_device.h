/* The device side of the fused-MoE GPU suite (test_fused_moe_gpu.c states
 * what it checks): a case's buffers and descriptor on the device, one call
 * with the workspace refilled, and the checks of y and *invalid against the
 * float64 reference (fused_moe_reference.h). */
#ifndef CKJIT_TESTS_GPU_MOE_FUSED_MOE_DEVICE_H
#define CKJIT_TESTS_GPU_MOE_FUSED_MOE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"
#include "fused_moe_reference.h"

#define YGUARD 64
#define INV_SENTINEL 0x7F7F7F7F

typedef struct fm_dev {
  gt_buf x, y, ids, tw, w1, w2, s1, s2, ws, inv;
  int64_t ldy;
  size_t ws_bytes;
  ckjit_fused_moe_desc d;
} fm_dev;

/* Frees every buffer of v (any of them may be unallocated). */
void fm_dev_free(fm_dev *v);
/* A device buffer of elems `dt` elements holding src (its host mirror, a
 * calloc, stays untouched: large weights are not copied twice). */
int fm_dev_put(gt_check *ck, gt_buf *b, ckjit_dtype dt, const void *src, size_t elems);
/* The routing into the device's ids and weights. */
int fm_upload_routing(gt_check *ck, fm_dev *v, const fm_host *p);
/* Buffers, the descriptor and the workspace for p. */
int fm_dev_make(gt_check *ck, fm_dev *v, const fm_host *p);
/* One call on `stream` with the workspace and *invalid refilled first. */
ckjit_status fm_call(gt_check *ck, fm_dev *v, void *stream);
/* y into its host mirror and *invalid into inv. */
int fm_download(gt_check *ck, fm_dev *v, int32_t *inv);
/* Checks y (downloaded) and *invalid against p's routing
 * (test_fused_moe_gpu.c's opening comment). */
void fm_check_output(gt_check *ck, const gt_ctx *ctx, const fm_host *p, fm_dev *v, int32_t inv, tu_rng *r);
/* Passes when y (downloaded) holds the bytes `want`, else fails naming
 * how many differ, the first, and what `want` came from. */
void fm_check_same_y(gt_check *ck, const fm_dev *v, const uint8_t *want, const char *from);
/* Starts a check named after the case. */
void fm_begin(gt_check *ck, const char *what, size_t index, const fm_case *c, uint64_t seed);
/* A case (block scaling for FP8 weights; every other field 0). */
fm_case fm_mk(const char *name, int64_t tokens, int E, int k, int64_t H, int64_t I, ckjit_dtype dt, ckjit_dtype wdt,
              ckjit_unary_op act, ckjit_dtype ids, int routing);

#endif
